"""Helpers for the MCP endpoint's tests: a daemon with `mcp:` configured (a token for the guarded
`agent` user, one for the unguarded `core` user) and a small raw HTTP/JSON-RPC client."""

import hashlib
import http.client
import json
import secrets
import shutil
import socket
import sqlite3
import threading
import time

import pgwtest


def start_mcp_daemon(factory, pg, extra=None, configure=None):
    """(daemon, tokens by user) with the MCP endpoint on a free loopback port. `configure` may
    change the config dict before the daemon starts."""
    tokens = {"agent": "pgw_" + secrets.token_urlsafe(32), "core": "pgw_" + secrets.token_urlsafe(32)}
    mcp = {
        "listen": f"127.0.0.1:{pgwtest.free_port()}",
        "database": pgwtest.DATABASE,
        "tokens": [{"user": u, "sha256": hashlib.sha256(t.encode()).hexdigest()} for u, t in tokens.items()],
    }
    mcp.update(extra or {})
    daemon = factory.start(pg, overrides={"mcp": mcp}, start=False)
    if configure:
        configure(daemon.config)
        daemon.write_config()
    daemon.start()
    daemon.mcp_port = wait_mcp_listener(mcp)
    return daemon, tokens


def mcp_daemon_with_group(pgwarden_bin, pg, group):
    """A module fixture's daemon (MCP on) whose `passthrough` group is `group`: yields
    (daemon, tokens), torn down after."""
    from conftest import DaemonSet
    daemons = DaemonSet(pgwarden_bin)

    def configure(cfg):
        cfg["groups"]["passthrough"] = group

    try:
        yield start_mcp_daemon(daemons, pg, configure=configure)
    finally:
        daemons.teardown()


def wait_mcp_listener(mcp):
    """The port of the `mcp` config section's listener once it accepts: the SQL port accepting
    does not mean the MCP listener is bound yet."""
    port = int(mcp["listen"].rsplit(":", 1)[1])
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return port
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def history(daemon, where="1=1", count=1):
    """The history rows matching `where` (dicts), once at least `count` of them are written."""
    deadline = time.monotonic() + 10
    db = daemon.dir / "history.db"
    rows = []
    while time.monotonic() < deadline:
        try:
            con = sqlite3.connect(str(db))
            con.row_factory = sqlite3.Row
            rows = [dict(r) for r in con.execute(f"SELECT * FROM pgwarden_history WHERE {where} ORDER BY id")]
            con.close()
        except sqlite3.OperationalError:
            rows = []
        if len(rows) >= count:
            return rows
        time.sleep(0.2)
    return rows


class McpHttp:
    """One keep-alive HTTP connection speaking JSON-RPC to the endpoint."""

    def __init__(self, port, token=None, path="/mcp", timeout=30):
        self.port = port
        self.token = token
        self.path = path
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.session = None
        self.version = None
        self.next_id = 0

    def close(self):
        self.conn.close()

    def raw(self, method="POST", body=b"", headers=None, path=None):
        """(status, headers dict lower-cased, body bytes)."""
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if self.session:
            h["Mcp-Session-Id"] = self.session
        if self.version:
            h["MCP-Protocol-Version"] = self.version
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        self.conn.request(method, path or self.path, body=body, headers=h)
        r = self.conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def post(self, message, headers=None):
        status, hdrs, data = self.raw(body=json.dumps(message).encode(), headers=headers)
        return status, hdrs, (json.loads(data) if data and hdrs.get("content-type", "").startswith("application/json") else data)

    def call(self, method, params=None):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        status, _, body = self.post(msg)
        assert status == 200, (status, body)
        assert body["id"] == self.next_id
        return body

    def initialize(self, version="2025-06-18", client="pytest-agent"):
        status, hdrs, body = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                        "params": {"protocolVersion": version, "capabilities": {},
                                                   "clientInfo": {"name": client, "version": "1"}}})
        assert status == 200, (status, body)
        self.session = hdrs["mcp-session-id"]
        self.version = body["result"]["protocolVersion"]
        s, _, _ = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert s == 202
        return body["result"]

    def tool(self, name, arguments=None):
        body = self.call("tools/call", {"name": name, "arguments": arguments or {}})
        assert "result" in body, body
        return body["result"]


def recorded_tool(c, name, arguments, seen):
    """A tools/call whose raw HTTP answer is appended to `seen` (a bytearray); returns the result."""
    c.next_id += 1
    msg = {"jsonrpc": "2.0", "id": c.next_id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}}
    status, _, data = c.raw(body=json.dumps(msg).encode())
    assert status == 200
    seen += data
    return json.loads(data)["result"]


def cancelled_call(c, other, sql="SELECT pg_sleep(20)"):
    """Runs `sql` with the query tool through `c`, cancels it from `other` (a second connection in
    the same session) with notifications/cancelled after a second, and returns the tool result."""
    result = {}
    t = threading.Thread(target=lambda: result.update(r=c.tool("query", {"sql": sql})))
    t.start()
    time.sleep(1.0)
    s, _, _ = other.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": c.next_id, "reason": "user"}})
    assert s == 202
    t.join(15)
    assert not t.is_alive()
    return result["r"]


def sdk_node():
    """(node, tests/mcp) for the SDK-driven scripts, or the test is skipped without them."""
    mcp_dir = pgwtest.REPO_ROOT / "tests" / "mcp"
    node = shutil.which("node")
    if node is None or not (mcp_dir / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pgwtest.require_tool("node and tests/mcp/node_modules (run scripts/deps)")
    return node, mcp_dir
