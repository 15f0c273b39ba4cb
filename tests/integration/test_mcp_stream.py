"""The MCP endpoint's server-to-client stream (GET), read off a raw socket as an agent's SSE client
would: notifications/tools/list_changed after a reload changes what the session's group sees,
logging notifications at the level the session set, the stream's end with its session, and a
shutdown that lets a slow call finish while new requests get 503."""

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from mcpsupport import McpHttp, cancelled_call, sdk_node, start_mcp_daemon

ANSWER_TOOL = {
    "name": "the_answer",
    "description": "The answer, as one number.",
    "groups": ["agents"],
    "parameters": {"type": "object", "properties": {}},
    "sql": "SELECT 42 AS n",
    "result": "scalar",
}


class SseStream:
    """A GET stream on its own socket: the status and headers, then events as they come."""

    def __init__(self, port, token, session, version="2025-06-18", accept="text/event-stream", extra=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        lines = ["GET /mcp HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Authorization: Bearer {token}"]
        if accept:
            lines.append(f"Accept: {accept}")
        if session:
            lines.append(f"Mcp-Session-Id: {session}")
        if version:
            lines.append(f"MCP-Protocol-Version: {version}")
        lines += extra or []
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            assert chunk, "closed before the headers"
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        status_line, *header_lines = head.decode().split("\r\n")
        self.status = int(status_line.split()[1])
        self.headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in header_lines)}
        self.eof = False

    def close(self):
        self.sock.close()

    def next_event(self, timeout=10):
        """The next event's data as JSON (comments skipped), or None at the end of the stream or
        when nothing came within `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n\n" in self.buf:
                block, self.buf = self.buf.split(b"\n\n", 1)
                data = [l[5:].strip() for l in block.decode().split("\n") if l.startswith("data:")]
                if data:
                    return json.loads("\n".join(data))
            left = deadline - time.monotonic()
            if left <= 0 or self.eof:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            if not chunk:
                self.eof = True
            self.buf += chunk

    def closed_within(self, timeout=10):
        """True when the server ends the stream within `timeout` (events before the end are read
        and returned in self.rest)."""
        self.rest = []
        deadline = time.monotonic() + timeout
        while not self.eof and time.monotonic() < deadline:
            e = self.next_event(deadline - time.monotonic())
            if e is not None:
                self.rest.append(e)
        return self.eof


@pytest.fixture
def streamd(pgwarden_factory, pg):
    return start_mcp_daemon(pgwarden_factory, pg)


def session(daemon, tokens, user="agent", client="stream-agent"):
    c = McpHttp(daemon.mcp_port, tokens[user])
    init = c.initialize(client=client)
    return c, init


def open_stream(daemon, tokens, c, user="agent"):
    s = SseStream(daemon.mcp_port, tokens[user], c.session, c.version)
    assert s.status == 200, s.buf
    assert s.headers["content-type"] == "text/event-stream"
    assert s.headers["cache-control"] == "no-cache"
    assert "content-length" not in s.headers
    return s


def test_capabilities_and_get_answers(streamd):
    daemon, tokens = streamd
    c, init = session(daemon, tokens)
    assert init["capabilities"]["tools"] == {"listChanged": True}
    assert init["capabilities"]["logging"] == {}
    port, token = daemon.mcp_port, tokens["agent"]
    # A GET that cannot read SSE, or names no session, an unknown one or a foreign version.
    assert SseStream(port, token, c.session, accept="application/json").status == 406
    assert SseStream(port, token, None).status == 400
    assert SseStream(port, token, "0" * 32).status == 404
    assert SseStream(port, token, c.session, version="2020-01-01").status == 400
    # Another user's token does not open this session's stream.
    assert SseStream(port, tokens["core"], c.session).status == 404
    assert McpHttp(port, token).raw(method="PUT")[0] == 405


def test_list_changed_after_a_reload_that_changes_the_groups_tools(streamd):
    daemon, tokens = streamd
    agent, _ = session(daemon, tokens, "agent")
    core, _ = session(daemon, tokens, "core")
    names = {t["name"] for t in agent.call("tools/list")["result"]["tools"]}
    assert "the_answer" not in names
    agent_stream = open_stream(daemon, tokens, agent, "agent")
    core_stream = open_stream(daemon, tokens, core, "core")
    daemon.config["tools"] = [ANSWER_TOOL]
    daemon.write_config()
    daemon.send_signal(signal.SIGHUP)
    event = agent_stream.next_event(timeout=10)
    assert event == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    names = {t["name"] for t in agent.call("tools/list")["result"]["tools"]}
    assert "the_answer" in names
    # The tool is for the agents group only: the core user's list did not change.
    assert core_stream.next_event(timeout=1.5) is None
    # A reload that changes the tool's statement changes its list entry... only when what the
    # session sees changes: a description edit does, an unrelated reload does not.
    daemon.send_signal(signal.SIGHUP)
    assert agent_stream.next_event(timeout=1.5) is None
    daemon.config["tools"] = [dict(ANSWER_TOOL, description="The answer, still one number.")]
    daemon.write_config()
    daemon.send_signal(signal.SIGHUP)
    assert agent_stream.next_event(timeout=10)["method"] == "notifications/tools/list_changed"
    daemon.config["tools"] = []
    daemon.write_config()
    daemon.send_signal(signal.SIGHUP)
    assert agent_stream.next_event(timeout=10)["method"] == "notifications/tools/list_changed"


def cancel_a_sleep(daemon, tokens, c):
    """Runs pg_sleep through `c` and cancels it with notifications/cancelled; returns the result."""
    other = McpHttp(daemon.mcp_port, tokens["core"])
    other.session, other.version = c.session, c.version
    return cancelled_call(c, other)


def test_logging_notifications_at_the_sessions_level(streamd):
    daemon, tokens = streamd
    c, _ = session(daemon, tokens, "core")
    bad = c.call("logging/setLevel", {"level": "loud"})
    assert bad["error"]["code"] == -32602
    assert c.call("logging/setLevel", {"level": "warning"})["result"] == {}
    s = open_stream(daemon, tokens, c, "core")
    assert cancel_a_sleep(daemon, tokens, c)["structuredContent"]["code"] == "CANCELLED"
    event = s.next_event(timeout=10)
    assert event["method"] == "notifications/message"
    assert event["params"]["level"] == "warning"
    assert event["params"]["logger"] == "pgwarden"
    assert event["params"]["data"]["event"] == "statement_cancelled"
    assert event["params"]["data"]["tool"] == "query"
    assert event["params"]["data"]["request_id"] == c.next_id
    # Above the level of what happens: nothing comes, up to the stream's end with the session.
    assert c.call("logging/setLevel", {"level": "error"})["result"] == {}
    cancel_a_sleep(daemon, tokens, c)
    assert c.raw(method="DELETE")[0] == 200
    assert s.closed_within(10)
    assert s.rest == []


def test_stream_ends_with_its_session_and_a_second_replaces_the_first(streamd):
    daemon, tokens = streamd
    c, _ = session(daemon, tokens)
    first = open_stream(daemon, tokens, c)
    second = open_stream(daemon, tokens, c)
    assert first.closed_within(5)
    assert not second.closed_within(0.5)
    # The stream is no request of its own: the POST connection keeps working beside it.
    assert c.call("ping")["result"] == {}
    assert c.raw(method="DELETE")[0] == 200
    assert second.closed_within(5)
    assert SseStream(daemon.mcp_port, tokens["agent"], c.session, c.version).status == 404


def test_shutdown_lets_a_call_finish_and_refuses_new_requests(streamd):
    daemon, tokens = streamd
    c, _ = session(daemon, tokens, "core", client="drain-agent")
    s = open_stream(daemon, tokens, c, "core")
    result = {}
    t = threading.Thread(target=lambda: result.update(r=c.tool("query", {"sql": "SELECT pg_sleep(2), 7 AS n"})))
    t.start()
    time.sleep(0.7)
    daemon.send_signal(signal.SIGTERM)
    notice = s.next_event(timeout=5)
    assert notice["method"] == "notifications/message"
    assert notice["params"]["data"]["event"] == "server_shutting_down"
    # New requests during the drain: 503 with Retry-After (a new session as much as this one's).
    late = McpHttp(daemon.mcp_port, tokens["core"])
    status, hdrs, _ = late.raw(body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                "params": {"protocolVersion": "2025-06-18"}}).encode())
    assert status == 503
    assert int(hdrs["retry-after"]) > 0
    other = McpHttp(daemon.mcp_port, tokens["core"])
    other.session, other.version = c.session, c.version
    assert other.post({"jsonrpc": "2.0", "id": 5, "method": "ping"})[0] == 503
    t.join(10)
    assert not t.is_alive()
    assert result["r"]["isError"] is False, result["r"]
    assert result["r"]["structuredContent"]["rows"][0][-1] == 7
    assert s.closed_within(5)
    assert daemon.wait_exit(10) == 0, daemon.log()[-3000:]


def test_typescript_sdk_client_hears_list_changed(streamd):
    """The official SDK client opens the GET stream itself and gets list_changed on a reload."""
    daemon, tokens = streamd
    node, mcp_dir = sdk_node()
    env = dict(os.environ, PGW_MCP_URL=f"http://127.0.0.1:{daemon.mcp_port}/mcp", PGW_MCP_TOKEN=tokens["agent"],
               PGW_MCP_NEW_TOOL=ANSWER_TOOL["name"])
    proc = subprocess.Popen([node, "stream_client.mjs"], cwd=mcp_dir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.strip() == "ready":
                break
        assert lines and lines[-1].strip() == "ready", "".join(lines) + proc.stderr.read()

        def streams():
            with urllib.request.urlopen(f"http://127.0.0.1:{daemon.metrics_port}/metrics", timeout=5) as r:
                text = r.read().decode()
            return float([l for l in text.splitlines() if l.startswith("pgwarden_mcp_streams ")][0].split()[-1])
        # The SDK opens its stream right after initialize; the reload waits until it is there.
        deadline = time.monotonic() + 10
        while streams() < 1:
            assert time.monotonic() < deadline, "the SDK client opened no GET stream"
            time.sleep(0.1)
        daemon.config["tools"] = [ANSWER_TOOL]
        daemon.write_config()
        daemon.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "".join(lines) + out
    assert proc.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}\nlog:\n{daemon.log()[-3000:]}"
    assert "all checks passed" in out


def test_expiry_is_announced_then_the_stream_ends(pgwarden_factory, pg):
    daemon, tokens = start_mcp_daemon(pgwarden_factory, pg, extra={"session_idle_timeout": "4s"})
    c, _ = session(daemon, tokens)
    s = open_stream(daemon, tokens, c)
    started = time.monotonic()
    warning = s.next_event(timeout=10)
    assert warning["params"]["data"]["event"] == "session_expiring", warning
    assert 1 <= warning["params"]["data"]["expires_in_s"] <= 2
    assert time.monotonic() - started >= 1.5  # half the idle timeout, not at once
    assert s.closed_within(10)
    assert [e["params"]["data"]["event"] for e in s.rest] == ["session_ended"]
    assert c.post({"jsonrpc": "2.0", "id": 1, "method": "ping"})[0] == 404


def test_shutdown_timeout_cancels_a_call_that_runs_on(streamd):
    daemon, tokens = streamd  # limits.shutdown_timeout is 5s in the test config
    c, _ = session(daemon, tokens, "core", client="overdue-agent")
    outcome = {}

    def run():
        try:
            outcome["r"] = c.tool("query", {"sql": "SELECT pg_sleep(60)"})
        except Exception as e:  # the connection closes under the call
            outcome["e"] = e
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.7)
    started = time.monotonic()
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait_exit(15) == 0, daemon.log()[-3000:]
    assert 4 <= time.monotonic() - started < 10
    t.join(10)
    assert not t.is_alive()
    assert "e" in outcome or outcome["r"]["isError"] is True
