"""A turn's tool call, the statements it ran and their history records can be linked: each tool
result names the records it made (history_ids: their record_uid), and each record keeps the
request's JSON-RPC id (request_id, as JSON text) and its W3C traceparent (the header, or
params._meta.traceparent), in both protocol eras."""

import json

from mcpsupport import McpHttp, history
from test_mcp_modern import mcpd, meta, modern  # noqa: F401  (the module's daemon)

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
META_TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def modern_call(mcpd, rid, arguments, headers=None, extra_meta=None, tool="query"):  # noqa: F811
    params = {"name": tool, "arguments": arguments, "_meta": meta(client="ids-agent", **(extra_meta or {}))}
    status, _, body = modern(mcpd, "tools/call", params, headers=headers, rid=rid)
    assert status == 200, body
    return body["result"]


def record(daemon, uid):
    rows = history(daemon, f"record_uid = '{uid}'")
    assert len(rows) == 1, uid
    return rows[0]


def test_modern_result_names_its_record_with_request_id_and_traceparent(mcpd):
    daemon, _ = mcpd
    r = modern_call(mcpd, "turn-7", {"sql": "SELECT 6 * 7 AS answer"}, headers={"traceparent": TRACE})
    assert r["isError"] is False
    ids = r["structuredContent"]["history_ids"]
    assert len(ids) == 1
    # pgwarden's own words: outside the fence in the text a model reads.
    text = r["content"][0]["text"]
    assert ids[0] in text.split("<untrusted-data>")[0]
    row = record(daemon, ids[0])
    assert row["request_id"] == '"turn-7"'
    assert row["traceparent"] == TRACE
    assert row["sql_text"] == "SELECT 6 * 7 AS answer"


def test_meta_traceparent_wins_and_a_malformed_one_is_not_kept(mcpd):
    daemon, _ = mcpd
    r = modern_call(mcpd, 31, {"sql": "SELECT 2"}, headers={"traceparent": TRACE},
                    extra_meta={"traceparent": META_TRACE})
    row = record(daemon, r["structuredContent"]["history_ids"][0])
    assert row["request_id"] == "31" and row["traceparent"] == META_TRACE
    r = modern_call(mcpd, 32, {"sql": "SELECT 3"}, headers={"traceparent": "00-xyz-01"})
    row = record(daemon, r["structuredContent"]["history_ids"][0])
    assert row["request_id"] == "32" and row["traceparent"] == ""


def test_a_denial_names_the_record_of_each_statement_it_refused(mcpd):
    daemon, _ = mcpd
    r = modern_call(mcpd, 40, {"sql": "DELETE FROM fct_shipments"})
    assert r["isError"] is True and r["structuredContent"]["code"] == "READ_ONLY"
    ids = r["structuredContent"]["history_ids"]
    assert len(ids) == 1
    row = record(daemon, ids[0])
    assert row["outcome"] == "denied" and row["request_id"] == "40"


def test_session_era_explain_and_query_name_their_records(mcpd):
    daemon, tokens = mcpd
    c = McpHttp(daemon.mcp_port, tokens["agent"])
    try:
        c.initialize("2025-11-25", client="ids-session")
        status, _, body = c.post({"jsonrpc": "2.0", "id": 100, "method": "tools/call",
                                  "params": {"name": "explain",
                                             "arguments": {"sql": "SELECT 1 AS explained"}}},
                                 headers={"traceparent": TRACE})
        assert status == 200, body
        explain_ids = body["result"]["structuredContent"]["history_ids"]
        c.next_id = 100  # the query below is request 101
        r = c.tool("query", {"sql": "SELECT 1 AS one"})
        query_ids = r["structuredContent"]["history_ids"]
    finally:
        c.close()
    assert len(explain_ids) == 1 and len(query_ids) == 1 and explain_ids != query_ids
    row = record(daemon, explain_ids[0])
    assert row["request_id"] == "100" and row["traceparent"] == TRACE
    assert row["tool_name"] == "explain"
    row = record(daemon, query_ids[0])
    assert row["request_id"] == "101"
    assert row["traceparent"] == ""
    # The records and their calls are linked: the same conversation, one request each.
    rows = history(daemon, "agent_id = 'ids-session'", count=2)
    assert sorted(json.loads(r["request_id"]) for r in rows) == [100, 101]
