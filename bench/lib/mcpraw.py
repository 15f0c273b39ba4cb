"""A lean MCP tool caller for the benchmark: one keep-alive TCP connection, the request's HTTP
head built once, the response read by its Content-Length and decoded with json.loads, so the
figures are pgwarden's and the network's, not a general-purpose HTTP library's (Python's
http.client adds about 100 us per request on the development machine). The session is set up
with the integration tests' McpHttp (initialize, initialized), then taken over."""

import json
import socket


class McpRaw:
    def __init__(self, port, token, session, version):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.head = ("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Accept: application/json, text/event-stream\r\n"
                     f"Authorization: Bearer {token}\r\nMcp-Session-Id: {session}\r\n"
                     f"MCP-Protocol-Version: {version}\r\n")
        self.buf = b""
        self.next_id = 1000

    def close(self):
        self.sock.close()

    def tool(self, name, arguments):
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                           "params": {"name": name, "arguments": arguments}}).encode()
        self.sock.sendall(f"{self.head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        reply = json.loads(self._response())
        if reply.get("id") != self.next_id or "result" not in reply:
            raise RuntimeError(f"unexpected MCP reply: {reply}")
        return reply["result"]

    def _response(self):
        while b"\r\n\r\n" not in self.buf:
            self._recv()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        status = head.split(b" ", 2)[1]
        length = None
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
        if status != b"200" or length is None:
            raise RuntimeError(f"unexpected HTTP answer: {head[:200]!r}")
        while len(self.buf) < length:
            self._recv()
        body, self.buf = self.buf[:length], self.buf[length:]
        return body

    def _recv(self):
        data = self.sock.recv(65536)
        if not data:
            raise RuntimeError("the MCP endpoint closed the connection")
        self.buf += data
