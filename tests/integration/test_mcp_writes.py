"""Guarded writes over the MCP endpoint (docs/writes.md): a guarded_writes group's session gets the
begin / execute / commit / rollback tools, driven by the same state machine as the wire protocol's:
writes only inside the transaction after a look at the table, no UPDATE without a WHERE, a write
over its row cap undone while the transaction stays usable, every answer naming its next moves,
calls out of order refused with INVALID_STATE, an idle transaction rolled back and the next call
told, a deleted MCP session leaving no change, and every statement in history once."""

import hashlib
import secrets
import threading
import time
import urllib.request

import pytest

import pgwtest
from conftest import module_daemon
import writesupport
from mcpsupport import McpHttp, history, start_mcp_daemon
from writesupport import ROWS

WRITER_ROLE = "pgw_mcp_writer"  # not test_writes.py's: each module drops and makes its own
WRITER_PASSWORD = "writer-" + secrets.token_hex(8)
WRITE_TOOLS = {"begin", "execute", "commit", "rollback"}


def _start(factory, pg, group=None, mcp=None, root=None):
    """(daemon, tokens) with a `writer` user in the guarded_writes group `writers`; `root` adds
    top-level keys (instance_id)."""
    token = "pgw_" + secrets.token_urlsafe(32)

    def configure(cfg):
        cfg["upstream"].update(write_user=WRITER_ROLE, write_password=WRITER_PASSWORD)
        cfg["groups"]["writers"] = {
            "mode": "guarded_writes", "search_path": ["public"],
            "max_rows_affected": {"statement": 100, "transaction": 150},
            "transaction_idle_timeout": "2s", "transaction_max_age": "1m",
            "guards": [{"kind": "functions"}], **(group or {})}
        cfg["users"].append({"name": "writer", "password": pgwtest.scram_verifier("x"), "group": "writers"})
        cfg["mcp"]["tokens"].append({"user": "writer", "sha256": hashlib.sha256(token.encode()).hexdigest()})
        cfg.update(root or {})

    daemon, tokens = start_mcp_daemon(factory, pg, extra=mcp, configure=configure)
    tokens["writer"] = token
    return daemon, tokens


@pytest.fixture(scope="module")
def writer_role(pg):
    return writesupport.create_write_role(pg, WRITER_ROLE, WRITER_PASSWORD)


@pytest.fixture(scope="module")
def wmcp(pgwarden_bin, pg, writer_role):
    yield from module_daemon(pgwarden_bin, lambda daemons: _start(daemons, pg))


@pytest.fixture
def table(pg, wmcp):
    writesupport.reset_table(pg, WRITER_ROLE)
    yield
    pg.execute("DROP TABLE IF EXISTS w_items")


def writer(wmcp, name):
    daemon, tokens = wmcp
    c = McpHttp(daemon.mcp_port, tokens["writer"])
    c.initialize(client=name)
    return c


def looked(wmcp, name):
    """A writer's session that described w_items and began a transaction."""
    c = writer(wmcp, name)
    r = c.tool("describe_table", {"table": "w_items", "sample_rows": 0})
    assert r["isError"] is False, r
    r = c.tool("begin")
    assert r["isError"] is False, r
    return c


def idle_in_transaction(pg):
    return pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND state LIKE 'idle in%%'",
                     (WRITER_ROLE,))


def test_write_tools_only_for_a_write_group(wmcp):
    daemon, tokens = wmcp
    c = McpHttp(daemon.mcp_port, tokens["writer"])
    assert "`begin`" in c.initialize(client="lister")["instructions"]
    tools = {t["name"]: t for t in c.call("tools/list")["result"]["tools"]}
    assert WRITE_TOOLS <= set(tools)
    assert tools["execute"]["annotations"]["readOnlyHint"] is False
    assert tools["execute"]["annotations"]["destructiveHint"] is True
    reader = McpHttp(daemon.mcp_port, tokens["agent"])
    reader.initialize()
    assert not WRITE_TOOLS & {t["name"] for t in reader.call("tools/list")["result"]["tools"]}
    body = reader.call("tools/call", {"name": "begin", "arguments": {}})
    assert body["error"]["code"] == -32602 and "Unknown tool" in body["error"]["message"]


def test_calls_out_of_order_are_invalid_state(wmcp, table):
    c = writer(wmcp, "order")
    for tool, args in (("commit", {}), ("rollback", {}), ("execute", {"sql": "SELECT 1"})):
        r = c.tool(tool, args)
        s = r["structuredContent"]
        assert r["isError"] is True and s["code"] == "INVALID_STATE", (tool, s)
        assert s["state"] == "none" and s["next_moves"] == ["begin"], s
        assert "begin" in s["message"]
    assert c.tool("begin")["structuredContent"]["next_moves"] == ["execute", "commit", "rollback"]
    s = c.tool("begin")["structuredContent"]
    assert s["code"] == "INVALID_STATE" and s["state"] == "open"
    assert s["next_moves"] == ["execute", "commit", "rollback"]
    assert c.tool("rollback")["structuredContent"]["state"] == "none"


def test_begin_execute_commit_changes_rows(wmcp, pg, table):
    daemon, _ = wmcp
    c = looked(wmcp, "committer")
    r = c.tool("execute", {"sql": "UPDATE w_items SET qty = 5 WHERE grp = 7"})
    s = r["structuredContent"]
    assert r["isError"] is False, s
    assert s["command"] == "UPDATE 4" and s["state"] == "open"
    assert s["next_moves"] == ["execute", "commit", "rollback"]
    assert s["notice"]["code"] == "TRANSACTION_OPEN" and "w_items: 4 rows" in s["notice"]["message"]
    assert s["transaction"]["rows"] == 4 and s["transaction"]["seconds_left"] >= 1
    r = c.tool("execute", {"sql": "INSERT INTO w_items VALUES (1000, 7, 5) RETURNING id, qty"})
    assert r["structuredContent"]["rows"] == [[1000, 5]]
    # Inside the transaction its own changes show; outside it nothing was kept yet.
    r = c.tool("execute", {"sql": "SELECT count(*) AS n FROM w_items WHERE qty = 5"})
    assert r["structuredContent"]["rows"] == [[5]]
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 5") == 0
    r = c.tool("commit")
    s = r["structuredContent"]
    assert r["isError"] is False and s["state"] == "none" and s["next_moves"] == ["begin"]
    assert s["notice"]["code"] == "TRANSACTION_COMMITTED"
    assert "kept: w_items: 5 rows" in s["notice"]["message"]
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 5") == 5
    assert not idle_in_transaction(pg)
    # History: every statement once, the COMMIT with the transaction's rows.
    rows = history(daemon, "agent_id = 'committer'", count=5)
    got = [(r["sql_text"], r["outcome"], r["rows_affected"], r["application_name"]) for r in rows
           if r["application_name"] != "mcp:describe_table"]
    assert got == [("BEGIN", "ok", 0, "mcp:begin"),
                   ("UPDATE w_items SET qty = 5 WHERE grp = 7", "ok", 4, "mcp:execute"),
                   ("INSERT INTO w_items VALUES (1000, 7, 5) RETURNING id, qty", "ok", 1, "mcp:execute"),
                   ("SELECT count(*) AS n FROM w_items WHERE qty = 5", "ok", 0, "mcp:execute"),
                   ("COMMIT", "ok", 5, "mcp:commit")], got
    assert all(r["protocol"] == "mcp" for r in rows)


def test_look_first_and_no_where_denied(wmcp, pg, table):
    c = writer(wmcp, "careless")
    assert c.tool("begin")["isError"] is False
    r = c.tool("execute", {"sql": "UPDATE w_items SET qty = 1 WHERE id = 1"})
    s = r["structuredContent"]
    assert r["isError"] is True and s["code"] == "LOOK_FIRST" and "w_items" in s["message"]
    assert s["state"] == "open" and s["notice"]["code"] == "TRANSACTION_OPEN"
    # A read is a look: through execute, or (outside the transaction) through query.
    r = c.tool("query", {"sql": "SELECT * FROM w_items WHERE id = 1"})
    assert r["isError"] is False
    for sql in ("UPDATE w_items SET qty = 1", "UPDATE w_items SET qty = 1 WHERE 1=1",
                "DELETE FROM w_items WHERE true"):
        r = c.tool("execute", {"sql": sql})
        s = r["structuredContent"]
        assert r["isError"] is True and s["code"] == "MISSING_PREDICATE", (sql, s)
        assert s["state"] == "open" and s["next_moves"] == ["execute", "commit", "rollback"]
    r = c.tool("execute", {"sql": "UPDATE w_items SET qty = 1 WHERE id = 1"})
    assert r["isError"] is False and r["structuredContent"]["command"] == "UPDATE 1"
    assert c.tool("rollback")["structuredContent"]["notice"]["code"] == "TRANSACTION_DISCARDED"
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty <> 0") == 0


def test_too_many_rows_undone_transaction_usable(wmcp, pg, table):
    daemon, _ = wmcp
    c = looked(wmcp, "wide")
    # Meant 4 rows, wrote a predicate that matches all 400.
    r = c.tool("execute", {"sql": "UPDATE w_items SET qty = 7 WHERE id > 0"})
    s = r["structuredContent"]
    assert r["isError"] is True and s["code"] == "TOO_MANY_ROWS" and s["undone"] is True, s
    assert s["detail"]["rows"] == ROWS and s["detail"]["cap"] == 100 and s["sqlstate"] == "54000"
    assert s["state"] == "open" and s["next_moves"] == ["execute", "commit", "rollback"]
    r = c.tool("execute", {"sql": "SELECT count(*) FROM w_items WHERE qty = 7"})
    assert r["structuredContent"]["rows"] == [[0]]
    r = c.tool("execute", {"sql": "UPDATE w_items SET qty = 7 WHERE id < 5"})
    assert r["structuredContent"]["command"] == "UPDATE 4"
    s = c.tool("commit")["structuredContent"]
    assert "kept: w_items: 4 rows" in s["notice"]["message"]
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 7") == 4
    rows = history(daemon, "agent_id = 'wide' AND sql_text LIKE 'UPDATE%'", count=2)
    assert [(r["outcome"], r["rows_affected"]) for r in rows] == [("error", ROWS), ("ok", 4)], rows
    assert rows[0]["sqlstate"] == "54000"


def test_failed_statement_leaves_only_rollback(wmcp, pg, table):
    c = looked(wmcp, "dup")
    r = c.tool("execute", {"sql": "INSERT INTO w_items VALUES (6, 1, 1)"})
    s = r["structuredContent"]
    assert r["isError"] is True and s["sqlstate"] == "23505"
    assert s["state"] == "failed" and s["next_moves"] == ["rollback"]
    assert "only ROLLBACK helps" in s["notice"]["message"]
    for tool, args in (("execute", {"sql": "SELECT 1"}), ("commit", {})):
        s = c.tool(tool, args)["structuredContent"]
        assert s["code"] == "INVALID_STATE" and s["next_moves"] == ["rollback"], s
    s = c.tool("rollback")["structuredContent"]
    assert s["state"] == "none" and s["notice"]["code"] == "TRANSACTION_DISCARDED"
    assert pg.scalar("SELECT count(*) FROM w_items") == ROWS


def test_deleting_the_session_mid_transaction_rolls_back(wmcp, pg, table):
    daemon, _ = wmcp
    c = looked(wmcp, "leaver")
    r = c.tool("execute", {"sql": "UPDATE w_items SET qty = 99 WHERE id = 3"})
    assert r["structuredContent"]["command"] == "UPDATE 1"
    assert idle_in_transaction(pg) >= 1
    status, _, _ = c.raw(method="DELETE")
    assert status == 200
    deadline = time.time() + 10
    while time.time() < deadline and idle_in_transaction(pg):
        time.sleep(0.1)
    assert not idle_in_transaction(pg)
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 3") == 0
    text = urllib.request.urlopen(f"http://127.0.0.1:{daemon.metrics_port}/metrics", timeout=5).read().decode()
    line = [l for l in text.splitlines() if l.startswith('pgwarden_write_transactions_total{outcome="disconnect"}')]
    assert line and float(line[0].split()[-1]) >= 1


def test_idle_transaction_rolled_back_and_next_call_told(wmcp, pg, table):
    c = looked(wmcp, "sleeper")
    r = c.tool("execute", {"sql": "UPDATE w_items SET qty = 5 WHERE id = 2"})
    assert r["isError"] is False
    time.sleep(4)
    assert not idle_in_transaction(pg)
    r = c.tool("execute", {"sql": "SELECT qty FROM w_items WHERE id = 2"})
    s = r["structuredContent"]
    assert r["isError"] is True and s["code"] == "TRANSACTION_ROLLED_BACK", s
    assert s["detail"]["reason"] == "idle_timeout" and "w_items: 1 row" in s["detail"]["lost"]
    assert s["state"] == "none" and s["next_moves"] == ["begin"]
    # Told once: the conversation goes on.
    assert c.tool("begin")["structuredContent"]["state"] == "open"
    r = c.tool("execute", {"sql": "SELECT qty FROM w_items WHERE id = 2"})
    assert r["structuredContent"]["rows"] == [[0]]
    assert c.tool("rollback")["isError"] is False
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 2") == 0


def _escapes():
    out = []
    for line in (pgwtest.REPO_ROOT / "tests" / "security" / "write_escapes.tsv").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            _, code, sql = line.split("\t", 2)
            out.append((sql.replace("\\n", "\n"), code))
    return out


def test_write_mode_escapes_denied_over_mcp(wmcp, pg, table):
    """The wire's corpus of write-mode escapes, through execute in one open transaction: each is
    refused with its code, and the transaction is still open and unchanged after all of them."""
    c = looked(wmcp, "escaper")
    c.tool("execute", {"sql": "SELECT * FROM w_items WHERE id = 1"})
    for sql, code in _escapes():
        r = c.tool("execute", {"sql": sql})
        s = r["structuredContent"]
        assert r["isError"] is True and s.get("code") == code, (sql, s)
        assert s["state"] == "open" and s["next_moves"] == ["execute", "commit", "rollback"], (sql, s)
    assert c.tool("commit")["structuredContent"]["notice"]["message"].startswith("Committed; kept: no changes")
    assert pg.scalar("SELECT count(*) FROM w_items") == ROWS
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty <> 0") == 0


def test_one_transaction_call_at_a_time(wmcp, pg, table):
    """A second call while a write waits on a row lock is refused with TRANSACTION_BUSY; the write
    then finishes and the transaction goes on."""
    daemon, _ = wmcp
    c = looked(wmcp, "busy")
    other = McpHttp(daemon.mcp_port, c.token)
    other.session, other.version = c.session, c.version
    blocker = pg.connect()
    blocker.autocommit = False
    blocker.cursor().execute("SELECT * FROM w_items WHERE id = 9 FOR UPDATE")
    result = {}
    t = threading.Thread(target=lambda: result.update(
        r=c.tool("execute", {"sql": "UPDATE w_items SET qty = 1 WHERE id = 9"})))
    t.start()
    time.sleep(1.0)
    s = other.tool("commit")["structuredContent"]
    assert s["code"] == "TRANSACTION_BUSY", s
    blocker.rollback()
    blocker.close()
    t.join(15)
    assert not t.is_alive()
    assert result["r"]["structuredContent"]["command"] == "UPDATE 1"
    assert other.tool("commit")["structuredContent"]["state"] == "none"
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 9") == 1


def test_an_expired_session_rolls_back(pgwarden_factory, pg, writer_role, table):
    """mcp.session_idle_timeout ends a session mid-transaction: rolled back, never committed."""
    daemon, tokens = _start(pgwarden_factory, pg, group={"transaction_idle_timeout": "1m"},
                            mcp={"session_idle_timeout": "2s"})
    c = looked((daemon, tokens), "expiring")
    r = c.tool("execute", {"sql": "UPDATE w_items SET qty = 8 WHERE id = 4"})
    assert r["structuredContent"]["command"] == "UPDATE 1"
    deadline = time.time() + 10
    while time.time() < deadline and idle_in_transaction(pg):
        time.sleep(0.2)
    assert not idle_in_transaction(pg)
    status, _, body = c.post({"jsonrpc": "2.0", "id": 9, "method": "ping"})
    assert status == 404  # the session is gone, and the answer says why
    assert body["error"]["data"]["reason"] == "idle", body
    assert body["error"]["data"]["code"] == "TRANSACTION_ROLLED_BACK", body
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 4") == 0
    assert "write transaction rolled back" in daemon.log()


def _initialize(c, i, client):
    """initialize through `c` as a new session: (status, session id, body)."""
    c.session = None
    status, hdrs, body = c.post({"jsonrpc": "2.0", "id": i, "method": "initialize",
                                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                            "clientInfo": {"name": client, "version": "1"}}})
    return status, hdrs.get("mcp-session-id"), body


def _ping(c, session):
    c.session = session
    return c.post({"jsonrpc": "2.0", "id": 99, "method": "ping"})


def test_a_session_flood_never_ends_another_callers_sessions(pgwarden_factory, pg, writer_role, table):
    """1,000 token-less initialize calls from loopback (trust_loopback), back to back: the flood
    makes room among its own sessions only. The writer's open transaction commits, another
    token's session still answers, and a flooded-out session says why it is gone."""
    # The writer's transaction waits out the flood: an idle timeout longer than 1,000 initialize
    # calls take on a loaded host, so what ends it can only be the flood.
    daemon, tokens = _start(pgwarden_factory, pg, mcp={"trust_loopback": "agent"},
                            group={"transaction_idle_timeout": "1m"})
    w = looked((daemon, tokens), "flood-writer")
    r = w.tool("execute", {"sql": "UPDATE w_items SET qty = 6 WHERE id = 5"})
    assert r["structuredContent"]["command"] == "UPDATE 1"
    bystander = McpHttp(daemon.mcp_port, tokens["core"])
    bystander.initialize(client="bystander")
    flood = McpHttp(daemon.mcp_port)
    ids = []
    for i in range(1000):
        status, sid, body = _initialize(flood, i, "flood")
        assert status == 200, (i, status, body)
        ids.append(sid)
    assert bystander.call("ping")["result"] == {}
    s = w.tool("commit")["structuredContent"]
    assert s["notice"]["code"] == "TRANSACTION_COMMITTED", s
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 5") == 6
    # The flood holds mcp.max_sessions_per_principal (16) sessions: its newest.
    assert _ping(flood, ids[-1])[0] == 200
    status, _, body = _ping(flood, ids[0])
    assert status == 404
    err = body["error"]
    assert err["code"] == -32001 and err["data"]["reason"] == "evicted", err
    assert "max_sessions_per_principal" in err["message"] and "send initialize" in err["message"], err


def test_a_callers_own_cap_spares_its_open_transaction(pgwarden_factory, pg, writer_role, table):
    """At mcp.max_sessions_per_principal a caller's new session ends its own session idle the
    longest, never one holding a write transaction; with every session busy it is refused (429)."""
    daemon, tokens = _start(pgwarden_factory, pg, mcp={"max_sessions_per_principal": 2})
    holder = looked((daemon, tokens), "holder")
    r = holder.tool("execute", {"sql": "UPDATE w_items SET qty = 3 WHERE id = 6"})
    assert r["structuredContent"]["command"] == "UPDATE 1"
    c = McpHttp(daemon.mcp_port, tokens["writer"])
    ids = []
    for i in range(3):
        status, sid, body = _initialize(c, i, f"more{i}")
        assert status == 200, (status, body)
        ids.append(sid)
    assert _ping(c, ids[0])[0] == 404 and _ping(c, ids[1])[0] == 404
    assert _ping(c, ids[2])[0] == 200
    # The other session begins a transaction too: now none can make room.
    c.session, c.version = ids[2], "2025-06-18"
    assert c.tool("describe_table", {"table": "w_items", "sample_rows": 0})["isError"] is False
    assert c.tool("begin")["isError"] is False
    status, _, body = _initialize(c, 9, "refused")
    assert status == 429, (status, body)
    assert "max_sessions_per_principal" in body["error"]["message"], body
    c.session = ids[2]
    assert c.tool("rollback")["isError"] is False
    s = holder.tool("commit")["structuredContent"]
    assert s["notice"]["code"] == "TRANSACTION_COMMITTED", s
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 6") == 3


def test_a_request_for_an_ended_session_says_why(wmcp, pg, table):
    """A commit naming a session that was deleted mid-transaction hears it ended and that its
    transaction was rolled back, and that it must initialize again; another user learns nothing."""
    daemon, tokens = wmcp
    c = looked(wmcp, "told")
    assert c.tool("execute", {"sql": "UPDATE w_items SET qty = 4 WHERE id = 7"})["isError"] is False
    assert c.raw(method="DELETE")[0] == 200
    status, _, body = c.post({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                              "params": {"name": "commit", "arguments": {}}})
    assert status == 404
    err = body["error"]
    assert err["code"] == -32001 and err["data"]["code"] == "TRANSACTION_ROLLED_BACK", err
    assert err["data"]["reason"] == "deleted" and err["data"]["next_step"] == "initialize", err
    assert "rolled back" in err["message"] and "send initialize" in err["message"], err
    other = McpHttp(daemon.mcp_port, tokens["core"])
    status, _, body = _ping(other, c.session)
    assert status == 404 and body["error"]["data"]["code"] == "SESSION_NOT_FOUND", body
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 7") == 0
