"""Guarded write transactions for sessionless (2026-07-28) callers: begin answers with a signed
transaction_handle naming this pgwarden instance; execute, commit and rollback need it, reads take it
to see the transaction's changes, each call an independent request. An altered or forged handle, one
naming another instance, one from before a restart, and one whose transaction expired are each
answered with what happened to the transaction, and nothing runs. Instances of a fleet given the
same mcp.handle_key_file verify each other's handles: one that does not hold the transaction names
the holder only for a handle the fleet's key signed."""

import base64
import os
import time

from mcpsupport import McpHttp
from test_mcp_writes import _start, idle_in_transaction, table, wmcp, writer_role  # noqa: F401

MODERN = "2026-07-28"


def post(wmcp, user, method, params):
    """One independent 2026-07-28 request (a new HTTP connection each time): its body."""
    daemon, tokens = wmcp
    c = McpHttp(daemon.mcp_port, tokens[user])
    params = dict(params, _meta={"io.modelcontextprotocol/protocolVersion": MODERN,
                                 "io.modelcontextprotocol/clientInfo": {"name": "handle-agent", "version": "1"},
                                 "io.modelcontextprotocol/clientCapabilities": {}})
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    try:
        status, hdrs, body = c.post({"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                                    headers=headers)
    finally:
        c.close()
    assert status == 200, body
    assert "mcp-session-id" not in hdrs
    return body


def call(wmcp, tool, arguments=None, user="writer"):  # noqa: F811
    return post(wmcp, user, "tools/call", {"name": tool, "arguments": arguments or {}})["result"]


def tools_list(wmcp, user):  # noqa: F811
    return {t["name"]: t for t in post(wmcp, user, "tools/list", {})["result"]["tools"]}


def test_write_tools_are_offered_with_the_handle_argument(wmcp):
    tools = tools_list(wmcp, "writer")
    assert {"begin", "execute", "commit", "rollback"} <= set(tools)
    assert "transaction_handle" in tools["execute"]["inputSchema"]["required"]
    assert "transaction_handle" in tools["query"]["inputSchema"]["properties"]
    assert "transaction_handle" in tools["begin"]["description"]
    assert "begin" not in tools_list(wmcp, "agent")


def test_begin_look_change_commit_across_independent_requests(wmcp, pg, table):
    r = call(wmcp, "begin")
    assert r["isError"] is False, r
    handle = r["structuredContent"]["transaction_handle"]
    prefix, instance, boot, holder, sig = handle.split(".")
    assert prefix == "pgwt1" and len(sig) == 32
    assert base64.urlsafe_b64decode(instance + "=" * (-len(instance) % 4)).decode()
    h = {"transaction_handle": handle}
    r = call(wmcp, "describe_table", {"table": "w_items", "sample_rows": 0, **h})
    assert r["isError"] is False, r
    r = call(wmcp, "execute", {"sql": "UPDATE w_items SET qty = 3 WHERE grp = 9", **h})
    assert r["isError"] is False and r["structuredContent"]["command"] == "UPDATE 4", r
    assert r["structuredContent"]["transaction_handle"] == handle
    # A read with the handle sees the change; the database does not yet.
    r = call(wmcp, "query", {"sql": "SELECT count(*) AS n FROM w_items WHERE qty = 3", **h})
    assert r["structuredContent"]["rows"] == [[4]], r
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 3") == 0
    r = call(wmcp, "commit", h)
    assert r["isError"] is False and r["structuredContent"]["notice"]["code"] == "TRANSACTION_COMMITTED", r
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 3") == 4
    assert not idle_in_transaction(pg)


def test_write_tools_need_a_handle(wmcp, table):
    r = call(wmcp, "execute", {"sql": "UPDATE w_items SET qty = 1 WHERE id = 1"})
    assert r["isError"] is True and r["structuredContent"]["code"] == "TRANSACTION_HANDLE_REQUIRED", r
    assert "begin" in r["structuredContent"]["next_step"]


def test_an_altered_handle_is_refused_and_nothing_runs(wmcp, pg, table):
    handle = call(wmcp, "begin")["structuredContent"]["transaction_handle"]
    prefix, instance, boot, holder, sig = handle.split(".")
    other_holder = ("0" if holder[0] != "0" else "1") + holder[1:]
    for bad in (f"{prefix}.{instance}.{boot}.{other_holder}.{sig}",
                handle[:-1] + ("0" if handle[-1] != "0" else "1"), "pgwt1.garbage", "hello"):
        r = call(wmcp, "execute", {"sql": "UPDATE w_items SET qty = 2 WHERE id = 2",
                                   "transaction_handle": bad})
        assert r["isError"] is True and r["structuredContent"]["code"] == "TRANSACTION_HANDLE_INVALID", (bad, r)
    assert call(wmcp, "rollback", {"transaction_handle": handle})["isError"] is False
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 2") == 0


def test_a_handle_naming_another_instance_says_where_it_is(wmcp, table):
    handle = call(wmcp, "begin")["structuredContent"]["transaction_handle"]
    prefix, instance, boot, holder, sig = handle.split(".")
    elsewhere = base64.urlsafe_b64encode(b"pgw-replica-2").decode().rstrip("=")
    r = call(wmcp, "commit", {"transaction_handle": f"{prefix}.{elsewhere}.{boot}.{holder}.{sig}"})
    s = r["structuredContent"]
    assert r["isError"] is True and s["code"] == "TRANSACTION_ELSEWHERE" and s["instance"] == "pgw-replica-2", s
    assert s["handle_verified"] is False, s  # no shared key: another instance's key is not known here
    # A handle of this instance from an earlier process: its transaction was rolled back.
    r = call(wmcp, "commit", {"transaction_handle": f"{prefix}.{instance}.{'0' * 16}.{holder}.{sig}"})
    s = r["structuredContent"]
    assert s["code"] == "TRANSACTION_ROLLED_BACK" and s["reason"] == "restart", s
    assert call(wmcp, "rollback", {"transaction_handle": handle})["isError"] is False


def test_another_users_handle_finds_no_transaction(wmcp, table):
    handle = call(wmcp, "begin")["structuredContent"]["transaction_handle"]
    r = call(wmcp, "query", {"sql": "SELECT 1", "transaction_handle": handle}, user="agent")
    # The reader's group has no write transactions: the argument is not one of its tools'.
    assert r["isError"] is True and r["structuredContent"]["code"] == "INVALID_ARGUMENTS", r
    assert call(wmcp, "rollback", {"transaction_handle": handle})["isError"] is False


def test_an_expired_holder_says_the_transaction_was_rolled_back(pgwarden_factory, pg, writer_role, table):  # noqa: F811
    daemon, tokens = _start(pgwarden_factory, pg, group={"transaction_idle_timeout": "1m"},
                            mcp={"session_idle_timeout": "2s"})
    w = (daemon, tokens)
    handle = call(w, "begin")["structuredContent"]["transaction_handle"]
    h = {"transaction_handle": handle}
    assert call(w, "describe_table", {"table": "w_items", "sample_rows": 0, **h})["isError"] is False
    r = call(w, "execute", {"sql": "UPDATE w_items SET qty = 8 WHERE id = 4", **h})
    assert r["structuredContent"]["command"] == "UPDATE 1", r
    deadline = time.time() + 10
    while time.time() < deadline and idle_in_transaction(pg):
        time.sleep(0.2)
    assert not idle_in_transaction(pg)
    r = call(w, "commit", h)
    s = r["structuredContent"]
    assert r["isError"] is True and s["code"] == "TRANSACTION_ROLLED_BACK", s
    assert s["reason"] == "idle" and s["transaction_rolled_back"] is True, s
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 4") == 0


def key_file(path, data):
    path.write_bytes(data)
    os.chmod(path, 0o600)
    return str(path)


def test_a_fleet_sharing_the_handle_key_verifies_each_others_handles(pgwarden_factory, pg, writer_role,  # noqa: F811
                                                                      table, tmp_path):
    fleet_key = key_file(tmp_path / "fleet.key", os.urandom(32))
    other_key = key_file(tmp_path / "other.key", os.urandom(48))
    a, b, c = (_start(pgwarden_factory, pg, mcp={"handle_key_file": k}, root={"instance_id": name})
               for name, k in (("pgw-a", fleet_key), ("pgw-b", fleet_key), ("pgw-c", other_key)))
    handle = call(a, "begin")["structuredContent"]["transaction_handle"]
    h = {"transaction_handle": handle}
    assert call(a, "describe_table", {"table": "w_items", "sample_rows": 0, **h})["isError"] is False
    r = call(a, "execute", {"sql": "UPDATE w_items SET qty = 6 WHERE id = 6", **h})
    assert r["structuredContent"]["command"] == "UPDATE 1", r
    # b holds none of a's transactions, but its key verifies a's handle: it names the holder.
    r = call(b, "commit", h)
    s = r["structuredContent"]
    assert r["isError"] is True and s["code"] == "TRANSACTION_ELSEWHERE", s
    assert s["instance"] == "pgw-a" and s["handle_verified"] is True, s
    # Altered, or naming another instance than the one that signed it: invalid on b.
    prefix, instance, boot, holder, sig = handle.split(".")
    renamed = base64.urlsafe_b64encode(b"pgw-z").decode().rstrip("=")
    for bad in (handle[:-1] + ("0" if handle[-1] != "0" else "1"), f"{prefix}.{renamed}.{boot}.{holder}.{sig}"):
        s = call(b, "commit", {"transaction_handle": bad})["structuredContent"]
        assert s["code"] == "TRANSACTION_HANDLE_INVALID", (bad, s)
    # c's key is another: a's handle is not one it can verify, so it routes nowhere.
    s = call(c, "commit", h)["structuredContent"]
    assert s["code"] == "TRANSACTION_HANDLE_INVALID", s
    # Nor does a take c's handle (signed with c's key) as another instance's.
    other = call(c, "begin")["structuredContent"]["transaction_handle"]
    s = call(a, "commit", {"transaction_handle": other})["structuredContent"]
    assert s["code"] == "TRANSACTION_HANDLE_INVALID", s
    assert call(c, "rollback", {"transaction_handle": other})["isError"] is False
    # Nothing ran on b or c: the holder commits its transaction.
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 6") == 0
    r = call(a, "commit", h)
    assert r["structuredContent"]["notice"]["code"] == "TRANSACTION_COMMITTED", r
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 6") == 6
