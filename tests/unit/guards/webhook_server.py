"""A small policy service for the webhook tests: answers on 127.0.0.1 on a free port, prints the
port on its first line, and behaves by path. Runs until its standard input closes."""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

flaky_calls = {}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        path, _, query = self.path.partition("?")
        args = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
        try:
            ctx = json.loads(raw)
        except ValueError:
            ctx = {}
        if path == "/allow":
            self.reply(200, '{"action": "allow"}')
        elif path == "/deny":
            self.reply(200, json.dumps({
                "action": "deny", "code": "TICKET_REQUIRED",
                "reason": "Queries on %s need a ticket; ask the user for one." % ",".join(ctx.get("tables", [])),
                "detail": {"tables": ctx.get("tables", [])}, "hint": "SELECT 1"}))
        elif path == "/warn":
            self.reply(200, '{"action": "warn", "code": "SLOW_TABLE", "reason": "this table is slow"}')
        elif path == "/echo":
            self.reply(200, json.dumps({
                "action": "deny", "code": "ECHO",
                "reason": "agent_id=%s conversation_id=%s query_intent=%s" % (
                    ctx.get("agent_id"), ctx.get("conversation_id"), ctx.get("query_intent")),
                "detail": json.dumps({"ctx": ctx, "headers": {k.lower(): v for k, v in self.headers.items()}})}))
        elif path == "/slow":
            time.sleep(int(args.get("ms", "300")) / 1000.0)
            self.reply(200, '{"action": "allow"}')
        elif path == "/flaky":
            key = args.get("key", "")
            with lock:
                n = flaky_calls.get(key, 0)
                flaky_calls[key] = n + 1
            if n == 0:
                self.reply(500, '{"error": "try again"}')
            else:
                self.reply(200, '{"action": "deny", "code": "SECOND_TRY", "reason": "answered on the second try"}')
        elif path == "/status":
            self.reply(int(args.get("code", "404")), '{"error": "status"}')
        elif path == "/garbage":
            self.reply(200, "this is {not json")
        elif path == "/big":
            self.reply(200, '{"action": "allow", "pad": "' + "x" * 200000 + '"}')
        else:
            self.reply(404, "{}")


class Server(ThreadingHTTPServer):
    # Many clients connect at once (the concurrency tests): a short listen backlog would drop
    # their SYNs and add a one-second retransmit to each.
    request_queue_size = 512


def main():
    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
