"""Helpers of the agent-feature integration tests: a daemon whose users sit in groups made for
the test, and a small policy service (HTTP, on loopback) run in a thread of the test process."""

import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pgwtest


def start_daemon(factory, pg, groups, users=("agent",), group=None, extra=None):
    """A pgwarden whose `users` (SCRAM) all belong to `group` (default: the first of `groups`)."""
    group = group or next(iter(groups))
    passwords = {u: f"{u}-" + secrets.token_hex(6) for u in users}
    cfg_users = [{"name": u, "password": pgwtest.scram_verifier(p), "group": group}
                 for u, p in passwords.items()]
    overrides = {"groups": groups, "pool": {"max_size": 80}}
    if extra:
        overrides = pgwtest.deep_merge(overrides, extra)
    daemon = factory.start(pg, overrides=overrides, users=cfg_users, start=False)
    daemon.passwords.update(passwords)
    daemon.start()
    return daemon


class PolicyService:
    """Answers POSTs by path: /allow, /deny (reason names the tables), /slow?ms=N (allow after N
    ms), /echo (deny, reason = agent_id/conversation_id/query_intent it was sent)."""

    def __init__(self):
        calls = self.calls = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                ctx = json.loads(body or b"{}")
                calls.append(ctx)
                path, _, query = self.path.partition("?")
                args = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
                if path == "/slow":
                    time.sleep(int(args.get("ms", "200")) / 1000.0)
                    answer = {"action": "allow"}
                elif path == "/deny":
                    answer = {"action": "deny", "code": "TICKET_REQUIRED",
                              "reason": "Reading %s needs a ticket; ask the user for one."
                                        % ",".join(ctx.get("tables", [])),
                              "hint": "SELECT count(*) FROM fct_shipments WHERE ship_date = current_date"}
                elif path == "/echo":
                    answer = {"action": "deny", "code": "ECHO",
                              "reason": "agent_id=%s conversation_id=%s query_intent=%s" % (
                                  ctx.get("agent_id"), ctx.get("conversation_id"),
                                  ctx.get("query_intent"))}
                else:
                    answer = {"action": "allow"}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            request_queue_size = 512
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
