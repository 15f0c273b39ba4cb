"""Agent context through the real daemon, one daemon for the module: SET/RESET/SHOW pgwarden.* sent
with the extended protocol (raw Parse/Bind/Describe/Execute, and JDBC) answered by pgwarden
itself, comment overrides in the history records of their own statements, each statement of a
multi-statement text counted once against a budget, and the budget, guard timing and Lua/webhook
call metrics."""

import re
import struct

import psycopg2
import pytest

import pgwtest
from agentsupport import PolicyService

LUA = """
function check(ctx)
  if ctx.sql:find("echo_ctx", 1, true) then
    return {action = "deny", code = "ECHO",
            reason = "agent_id=" .. ctx.agent_id .. " conversation_id=" .. ctx.conversation_id}
  end
  if ctx.sql:find("spin_forever", 1, true) then while true do end end
  if ctx.sql:find("raise_error", 1, true) then error("boom") end
end
"""

BUDGET_REASON = "This conversation has used its budget of 4 queries."


@pytest.fixture(scope="module")
def service():
    s = PolicyService()
    yield s
    s.close()


@pytest.fixture(scope="module")
def daemon(pgwarden_bin, pg, service):
    from conftest import DaemonSet
    groups = {
        "scripted": {"guards": [{"kind": "read_only"},
                                {"kind": "lua", "script": LUA, "instruction_limit": 200000}]},
        "counted": {"guards": [{"kind": "budget", "max_statements": 4, "idle_expiry": "3s"},
                               {"kind": "read_only"}]},
        "hooked": {"guards": [{"kind": "http_webhook", "url": service.url("/allow"),
                               "timeout_ms": 2000}]},
        "broken": {"guards": [{"kind": "http_webhook", "retries": 0, "timeout_ms": 2000,
                               "url": f"http://127.0.0.1:{pgwtest.free_port()}/check"}]},
    }
    members = {"agent": "scripted", "counter": "counted", "hooked": "hooked", "broken": "broken"}
    passwords = {u: f"{u}-pw-{i}" for i, u in enumerate(members)}
    users = [{"name": u, "password": pgwtest.scram_verifier(passwords[u]), "group": g}
             for u, g in members.items()]
    daemons = DaemonSet(pgwarden_bin)
    try:
        d = daemons.start(pg, overrides={"groups": groups, "history": {"flush_interval": "50ms"}},
                          users=users, start=False)
        d.passwords.update(passwords)
        d.start()
        yield d
    finally:
        daemons.teardown()


# -- the raw extended protocol ------------------------------------------------------------------

def login(d, user="agent"):
    c = d.raw()
    c.login(user, d.passwords[user])
    return c


def parse(c, sql, name=""):
    c.send_msg(b"P", name.encode() + b"\0" + sql.encode() + b"\0" + struct.pack("!H", 0))


def bind(c, statement="", portal="", result_format=0):
    c.send_msg(b"B", portal.encode() + b"\0" + statement.encode() + b"\0"
               + struct.pack("!HH", 0, 0) + struct.pack("!HH", 1, result_format))


def describe(c, kind, name=""):
    c.send_msg(b"D", kind + name.encode() + b"\0")


def execute(c, portal=""):
    c.send_msg(b"E", portal.encode() + b"\0" + struct.pack("!i", 0))


def close(c, kind, name=""):
    c.send_msg(b"C", kind + name.encode() + b"\0")


def sync_raw(c):
    """Sync, then every (tag, body) up to ReadyForQuery."""
    c.send_msg(b"S")
    got = []
    while True:
        tag, body = c.read_msg()
        got.append((tag, body))
        if tag == b"Z":
            return got


def cells(body):
    (n,) = struct.unpack("!H", body[:2])
    pos, row = 2, []
    for _ in range(n):
        (ln,) = struct.unpack("!i", body[pos:pos + 4])
        pos += 4
        row.append(None if ln < 0 else body[pos:pos + ln])
        pos += max(ln, 0)
    return row


def test_extended_set_and_show_are_answered_by_pgwarden(daemon):
    c = login(daemon)
    try:
        # Unnamed statement and portal, as psycopg3 and JDBC send them.
        parse(c, "SET pgwarden.agent_id = 'x-ext'")
        bind(c)
        describe(c, b"P")
        execute(c)
        got = sync_raw(c)
        assert [t for t, _ in got] == [b"1", b"2", b"n", b"C", b"Z"], got
        assert got[3][1] == b"SET\0"

        # Named statement and portal, SHOW with a binary result column.
        parse(c, "SHOW pgwarden.agent_id", name="s1")
        describe(c, b"S", "s1")
        bind(c, statement="s1", portal="p1", result_format=1)
        describe(c, b"P", "p1")
        execute(c, "p1")
        close(c, b"P", "p1")
        close(c, b"S", "s1")
        got = sync_raw(c)
        assert [t for t, _ in got] == [b"1", b"t", b"T", b"2", b"T", b"D", b"C", b"3", b"3", b"Z"]
        assert got[1][1] == b"\0\0"  # no parameters
        assert b"pgwarden.agent_id\0" in got[2][1] and got[2][1][-2:] == b"\0\0"  # text
        assert got[4][1][-2:] == b"\0\1"  # the portal's column is binary, as bound
        assert cells(got[5][1]) == [b"x-ext"]
        assert got[6][1] == b"SHOW\0"

        # The server never saw our namespace, and the guard chain did see the value.
        rows, _, _ = c.query("SELECT current_setting('pgwarden.agent_id', true)")
        assert rows == [(None,)]
        c.send_extended("SELECT 'echo_ctx'")
        _, _, _, errors, _ = c.sync()
        assert "agent_id=x-ext conversation_id=" in errors[0]["M"]

        # SET ... then RESET through Parse/Bind/Execute in one batch with a normal statement.
        c.send_extended("SET pgwarden.conversation_id TO 'c-batch'")
        c.send_extended("SELECT 'echo_ctx'")
        _, tags, _, errors, _ = c.sync()
        assert tags == ["SET"] and "conversation_id=c-batch" in errors[0]["M"]

        # A key pgwarden does not know is refused by pgwarden, and the batch skips to Sync.
        parse(c, "SET pgwarden.budget = '1000'")
        bind(c)
        execute(c)
        got = sync_raw(c)
        assert [t for t, _ in got] == [b"E", b"Z"]
        assert pgwtest.parse_fields(got[0][1])["C"] == "42704"
        # The session goes on, and an ordinary statement takes the unnamed slots back.
        assert c.extended("SELECT 1")[0] == 1
    finally:
        c.close()


def test_jdbc_sets_and_shows_agent_context(daemon, java):
    url = f"jdbc:postgresql://127.0.0.1:{daemon.port}/{pgwtest.DATABASE}"
    r = java.run("AgentCheck", "context", url, "user=agent", f"password={daemon.passwords['agent']}")
    assert r.returncode == 0, r.stdout + r.stderr
    got = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    assert got["set"] == "ok"
    assert got["show"] == "j-agent"
    assert got["prepared_show"] == "j-conv"
    assert "agent_id=j-agent conversation_id=j-conv" in got["echo"], got
    assert got["server_setting"] == "null"


# -- history -----------------------------------------------------------------------------------

history_rows = pgwtest.history_rows


def test_comment_override_is_in_that_statements_record(daemon):
    conn = daemon.connect(user="agent", options="-c agent_id=a-sess -c conversation_id=c-sess")
    cur = conn.cursor()
    cur.execute("/* conversation_id='c-42' */ SELECT 'override-1'")
    cur.execute("SELECT 'override-2'")
    cur.execute("SELECT 'override-3a'; SELECT 'override-3b' /* agent_id='a-multi' */")
    conn.close()
    c = login(daemon)
    try:
        c.query("SET pgwarden.conversation_id = 'c-raw'")
        c.extended("/* conversation_id='c-ext',agent_id='a-ext' */ SELECT 'override-4'")
        c.extended("SELECT 'override-5'")
    finally:
        c.close()
    rows = history_rows(daemon, "sql_text LIKE '%override-%'", want=6)
    got = {re.search(r"override-\w+", r["sql_text"]).group(0): (r["agent_id"], r["conversation_id"],
                                                                  r["protocol"]) for r in rows}
    assert got == {
        "override-1": ("a-sess", "c-42", "simple"),
        "override-2": ("a-sess", "c-sess", "simple"),
        "override-3a": ("a-multi", "c-sess", "simple"),
        "override-3b": ("a-multi", "c-sess", "simple"),
        "override-4": ("a-ext", "c-ext", "extended"),
        "override-5": ("", "c-raw", "extended"),
    }, got


def test_pgwarden_commands_have_their_own_records(daemon):
    """SET/SHOW pgwarden.* never reach the server, yet each is a statement the session saw: one
    record each, in both protocols, a refused one with its SQLSTATE."""
    c = login(daemon, user="agent")
    try:
        c.query("SET pgwarden.conversation_id = 'c-own-records'")
        c.query("SHOW pgwarden.conversation_id")
        c.send_extended("SET pgwarden.agent_id = 'a-own-records'")
        c.sync()
        parse(c, "SET pgwarden.no_such_key = 'own-records'")
        bind(c)
        execute(c)
        got = sync_raw(c)
        assert [t for t, _ in got] == [b"E", b"Z"]
    finally:
        c.close()
    rows = history_rows(daemon, "sql_text LIKE '%own-records%' OR (sql_text LIKE 'SHOW pgwarden%' "
                        "AND conversation_id = 'c-own-records')", want=4)
    got = sorted((r["sql_text"], r["statement_kind"], r["protocol"], r["outcome"], r["sqlstate"] or "",
                  r["rows_returned"]) for r in rows)
    assert got == sorted([
        ("SET pgwarden.conversation_id = 'c-own-records'", "set", "simple", "ok", "", 0),
        ("SHOW pgwarden.conversation_id", "show", "simple", "ok", "", 1),
        ("SET pgwarden.agent_id = 'a-own-records'", "set", "extended", "ok", "", 0),
        ("SET pgwarden.no_such_key = 'own-records'", "set", "extended", "error", "42704", 0),
    ]), got


# -- budgets and metrics -------------------------------------------------------------------------

def scrape(d):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/metrics", timeout=5) as r:
        return r.read().decode()


def value(text, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        series, _, v = line.rpartition(" ")
        if all(f'{k}="{val}"' in series for k, val in labels.items()):
            total += float(v)
    return total


def test_multi_statement_text_counts_each_statement_once(daemon):
    before = scrape(daemon)
    conn = daemon.connect(user="counter", options="-c conversation_id=c-multi")
    cur = conn.cursor()
    cur.execute("SELECT 1; SELECT 2; SELECT 3")  # three of the four
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("SELECT 4; SELECT 5")  # two do not fit in the one left: neither runs
    assert e.value.pgcode == "54000"
    assert "has 1 of its budget of 4 queries left" in e.value.pgerror
    cur.execute("SELECT 4")  # the fourth
    for sql in ("SELECT 5", "SELECT 6; SELECT 7"):
        with pytest.raises(psycopg2.Error) as e:
            cur.execute(sql)
        assert e.value.pgcode == "54000" and BUDGET_REASON in e.value.pgerror
    conn.close()
    after = scrape(daemon)
    # Each refused statement is one budget record: 2 + 1 + 2.
    assert (value(after, "pgwarden_budget_exhausted_total", group="counted")
            - value(before, "pgwarden_budget_exhausted_total", group="counted")) == 5
    assert (value(after, "pgwarden_statements_total", group="counted", outcome="ok")
            - value(before, "pgwarden_statements_total", group="counted", outcome="ok")) == 4
    rows = history_rows(daemon, "conversation_id = 'c-multi'", want=9)
    assert sorted(r["outcome"] for r in rows) == ["budget"] * 5 + ["ok"] * 4


def test_live_conversations_expire_and_leave_the_gauge(daemon):
    for i in range(3):
        conn = daemon.connect(user="counter", options=f"-c conversation_id=c-live-{i}")
        conn.cursor().execute("SELECT 1")
        conn.close()
    assert value(scrape(daemon), "pgwarden_conversations_live") >= 3
    # idle_expiry is 3 s: a scrape after that sweeps them out.
    assert pgwtest.wait_for(lambda: value(scrape(daemon), "pgwarden_conversations_live") == 0,
                            timeout=10)


def test_guard_timing_and_external_call_metrics(daemon):
    before = scrape(daemon)
    conn = daemon.connect(user="agent")
    cur = conn.cursor()
    cur.execute("SELECT 'lua allows this'")
    for sql in ("SELECT 'spin_forever'", "SELECT 'raise_error'"):
        with pytest.raises(psycopg2.Error):
            cur.execute(sql)
    conn.close()
    conn = daemon.connect(user="hooked")
    conn.cursor().execute("SELECT 'webhook allows this'")
    conn.close()
    conn = daemon.connect(user="broken")
    with pytest.raises(psycopg2.Error) as e:
        conn.cursor().execute("SELECT 'webhook is down'")
    assert e.value.pgcode == "58000"
    conn.close()
    after = scrape(daemon)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("pgwarden_external_guard_calls_total", kind="lua") == 3
    assert moved("pgwarden_external_guard_timeouts_total", kind="lua") == 1
    assert moved("pgwarden_external_guard_failures_total", kind="lua") == 1
    assert moved("pgwarden_external_guard_duration_seconds_count", kind="lua") == 3
    assert moved("pgwarden_external_guard_calls_total", kind="webhook") == 2
    assert moved("pgwarden_external_guard_failures_total", kind="webhook") == 1
    assert moved("pgwarden_external_guard_timeouts_total", kind="webhook") == 0
    assert moved("pgwarden_external_guard_duration_seconds_count", kind="webhook") == 2
    # Guard evaluation time by guard kind: one observation per guard and text.
    assert moved("pgwarden_guard_duration_seconds_count", guard="lua") == 3
    assert moved("pgwarden_guard_duration_seconds_count", guard="read_only") == 3
    assert moved("pgwarden_guard_duration_seconds_count", guard="http_webhook") == 2
    # The runaway script took measurable time, and it is in the sum.
    assert moved("pgwarden_guard_duration_seconds_sum", guard="lua") > 0
