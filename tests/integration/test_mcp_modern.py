"""The MCP endpoint's 2026-07-28 requests over raw HTTP: per-request `_meta`, the headers checked
against the body, server/discover, resultType and caching hints, the revision's errors
(HeaderMismatch -32020, UnsupportedProtocolVersionError -32022 with the supported list, 404 for an
unknown method), no session minted, history filled from the request, and a 2025 session on the same
endpoint at the same time."""

import json

import pytest

from mcpsupport import McpHttp, history, start_mcp_daemon

MODERN = "2026-07-28"


@pytest.fixture(scope="module")
def mcpd(pgwarden_bin, pg):
    from conftest import DaemonSet
    daemons = DaemonSet(pgwarden_bin)
    try:
        yield start_mcp_daemon(daemons, pg)
    finally:
        daemons.teardown()


def meta(version=MODERN, client="modern-agent", **extra):
    m = {"io.modelcontextprotocol/protocolVersion": version,
         "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
         "io.modelcontextprotocol/clientCapabilities": {}}
    m.update(extra)
    return m


def modern(mcpd, method, params=None, headers=None, rid=1, version=MODERN, user="agent"):
    """(status, headers, body) of one modern request with the headers a client must send, changed
    by `headers` (a None value leaves that header out)."""
    daemon, tokens = mcpd
    c = McpHttp(daemon.mcp_port, tokens[user])
    params = dict(params or {})
    params.setdefault("_meta", meta(version))
    h = {"MCP-Protocol-Version": version, "Mcp-Method": method}
    if "name" in params:
        h["Mcp-Name"] = params["name"]
    h.update(headers or {})
    try:
        return c.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, headers=h)
    finally:
        c.close()


def test_discover(mcpd):
    status, hdrs, body = modern(mcpd, "server/discover")
    assert status == 200, body
    r = body["result"]
    assert r["resultType"] == "complete"
    assert r["supportedVersions"] == [MODERN, "2025-11-25", "2025-06-18", "2025-03-26"]
    assert "tools" in r["capabilities"]
    assert r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "pgwarden"
    assert r["ttlMs"] >= 0 and r["cacheScope"] in ("public", "private")
    assert "next_step" in r["instructions"]
    assert "mcp-session-id" not in hdrs


def test_tools_list_is_cacheable_and_private(mcpd):
    status, hdrs, body = modern(mcpd, "tools/list")
    assert status == 200, body
    r = body["result"]
    assert r["resultType"] == "complete" and r["cacheScope"] == "private" and r["ttlMs"] > 0
    names = {t["name"] for t in r["tools"]}
    assert {"query", "explain", "describe_table"} <= names
    assert "begin" not in names
    assert "mcp-session-id" not in hdrs


def test_tools_call_is_stateless_and_recorded(mcpd):
    daemon, _ = mcpd
    p = {"name": "query", "arguments": {"sql": "SELECT 41 + 1 AS answer"},
         "_meta": meta(client="modern-history", conversation_id="modern-conv-1")}
    status, hdrs, body = modern(mcpd, "tools/call", p, headers={"Mcp-Session-Id": "ignored"})
    assert status == 200, body
    r = body["result"]
    assert r["resultType"] == "complete" and r["isError"] is False
    assert r["structuredContent"]["rows"] == [[42]]
    assert "mcp-session-id" not in hdrs
    rows = history(daemon, "agent_id = 'modern-history'")
    assert len(rows) == 1
    assert rows[0]["conversation_id"] == "modern-conv-1" and rows[0]["protocol"] == "mcp"


def test_denial_is_a_tool_result(mcpd):
    p = {"name": "query", "arguments": {"sql": "DELETE FROM fct_shipments"}}
    status, _, body = modern(mcpd, "tools/call", p)
    assert status == 200
    assert body["result"]["isError"] is True and body["result"]["structuredContent"]["code"] == "READ_ONLY"


def test_unsupported_version_lists_the_supported(mcpd):
    status, _, body = modern(mcpd, "tools/list", version="1900-01-01")
    assert status == 400
    err = body["error"]
    assert err["code"] == -32022 and body["id"] == 1
    assert err["data"]["requested"] == "1900-01-01"
    assert MODERN in err["data"]["supported"] and "2025-11-25" in err["data"]["supported"]


@pytest.mark.parametrize("headers", [
    {"Mcp-Method": "tools/list"},       # another method than the body's
    {"Mcp-Method": None},               # missing
    {"Mcp-Name": "explain"},            # another tool than the body's
    {"Mcp-Name": None},                 # missing on tools/call
    {"MCP-Protocol-Version": None},     # missing while the body names the version
])
def test_header_mismatch(mcpd, headers):
    p = {"name": "query", "arguments": {"sql": "SELECT 1"}}
    status, _, body = modern(mcpd, "tools/call", p, headers=headers)
    assert status == 400, body
    assert body["error"]["code"] == -32020, body


def test_a_missing_meta_or_version_is_invalid_params(mcpd):
    no_version = meta()
    del no_version["io.modelcontextprotocol/protocolVersion"]
    daemon, tokens = mcpd
    for params in ({}, {"_meta": no_version}):
        c = McpHttp(daemon.mcp_port, tokens["agent"])
        try:
            status, _, body = c.post({"jsonrpc": "2.0", "id": 5, "method": "server/discover", "params": params},
                                     headers={"MCP-Protocol-Version": MODERN, "Mcp-Method": "server/discover"})
        finally:
            c.close()
        assert status == 400 and body["error"]["code"] == -32602 and body["id"] == 5, (params, body)


def test_a_served_header_and_an_unserved_body_version_mismatch(mcpd):
    status, _, body = modern(mcpd, "server/discover", {"_meta": meta("v999.0.0")})
    assert status == 400 and body["error"]["code"] == -32020, body


def test_header_values_are_taken_without_surrounding_whitespace(mcpd):
    p = {"name": "query", "arguments": {"sql": "SELECT 1"}}
    status, _, body = modern(mcpd, "tools/call", p, headers={"Mcp-Name": "query  "})
    assert status == 200 and body["result"]["isError"] is False, body


def test_base64_encoded_name(mcpd):
    p = {"name": "query", "arguments": {"sql": "SELECT 1"}}
    status, _, body = modern(mcpd, "tools/call", p, headers={"Mcp-Name": "=?base64?cXVlcnk=?="})
    assert status == 200 and body["result"]["isError"] is False, body


def test_meta_version_differs_from_header(mcpd):
    status, _, body = modern(mcpd, "tools/list", {"_meta": meta("2025-11-25")})
    assert status == 400 and body["error"]["code"] == -32020


def test_unknown_and_removed_methods_are_404(mcpd):
    for method in ("no/such/method", "ping", "logging/setLevel"):
        status, _, body = modern(mcpd, method)
        assert status == 404, (method, body)
        assert body["error"]["code"] == -32601


def test_capabilities_are_required(mcpd):
    m = meta()
    del m["io.modelcontextprotocol/clientCapabilities"]
    status, _, body = modern(mcpd, "tools/list", {"_meta": m})
    assert status == 400 and body["error"]["code"] == -32602


def test_batch_and_get_and_delete_are_refused(mcpd):
    daemon, tokens = mcpd
    c = McpHttp(daemon.mcp_port, tokens["agent"])
    h = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}
    status, _, data = c.raw(body=json.dumps([msg]).encode(), headers=h)
    assert status == 400 and json.loads(data)["error"]["code"] == -32600
    for verb in ("GET", "DELETE"):
        status, hdrs, _ = c.raw(method=verb, headers=dict(h, Accept="text/event-stream"))
        assert status == 405 and hdrs["allow"] == "POST"


def test_modern_without_token_is_401(mcpd):
    daemon, _ = mcpd
    c = McpHttp(daemon.mcp_port, None)
    status, hdrs, _ = c.post({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta()}},
                             headers={"MCP-Protocol-Version": MODERN, "Mcp-Method": "server/discover"})
    assert status == 401 and hdrs["www-authenticate"].startswith("Bearer")


def test_both_eras_at_once(mcpd):
    daemon, tokens = mcpd
    legacy = McpHttp(daemon.mcp_port, tokens["agent"])
    legacy.initialize(version="2025-11-25", client="legacy-next-door")
    assert legacy.version == "2025-11-25"
    status, _, body = modern(mcpd, "tools/call", {"name": "query", "arguments": {"sql": "SELECT 3"}})
    assert status == 200 and body["result"]["structuredContent"]["rows"] == [[3]]
    r = legacy.tool("query", {"sql": "SELECT 4"})
    assert r["structuredContent"]["rows"] == [[4]] and "resultType" not in r
    # initialize asking for the modern revision gets the newest 2025 one: initialize is 2025's.
    other = McpHttp(daemon.mcp_port, tokens["agent"])
    assert other.initialize(version=MODERN)["protocolVersion"] == "2025-11-25"


def test_legacy_unknown_version_header_is_32022(mcpd):
    daemon, tokens = mcpd
    c = McpHttp(daemon.mcp_port, tokens["agent"])
    c.initialize()
    status, _, body = c.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"MCP-Protocol-Version": "1999-01-01"})
    assert status == 400 and body["error"]["code"] == -32022
    assert body["error"]["data"]["supported"][0] == MODERN
