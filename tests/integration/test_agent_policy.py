"""Scripted and remote policy through the real daemon: HTTP webhook guards (allow, deny with the
service's reason, service down, 50 sessions waiting on a 200 ms service at once), Lua guards (a
reason via psql, a runaway script stopped with the session still usable), and the three sources
of agent context (startup options, SET pgwarden.*, a sqlcommenter comment) reaching the guard."""

import concurrent.futures
import time

import psycopg2
import pytest

import pgwtest
from agentsupport import PolicyService, start_daemon


@pytest.fixture
def service():
    s = PolicyService()
    yield s
    s.close()


def webhook_groups(url, **keys):
    return {"hooked": {"guards": [{"kind": "read_only"},
                                  dict(kind="http_webhook", url=url, timeout_ms=2000, **keys)]}}


def test_webhook_allow_and_deny_reach_psql(pgwarden_factory, pg, service):
    d = start_daemon(pgwarden_factory, pg, webhook_groups(service.url("/allow")))
    r = pgwtest.psql(d.dsn(user="agent"), "-c", "SELECT count(*) FROM fct_shipments WHERE id < 10")
    assert r.returncode == 0 and "9" in r.stdout, r.stderr
    assert service.calls and service.calls[-1]["tables"] == ["fct_shipments"]

    d2 = start_daemon(pgwarden_factory, pg, webhook_groups(service.url("/deny")))
    r = pgwtest.psql(d2.dsn(user="agent"), "-c", "SELECT id FROM fct_shipments WHERE id = 1")
    assert r.returncode == 1
    assert "Reading fct_shipments needs a ticket; ask the user for one." in r.stderr
    assert "TICKET_REQUIRED" in r.stderr
    assert "HINT:  SELECT count(*) FROM fct_shipments" in r.stderr


def test_webhook_down_says_unavailable_and_names_nothing(pgwarden_factory, pg):
    port = pgwtest.free_port()
    url = f"http://127.0.0.1:{port}/check?token=s3cret"
    d = start_daemon(pgwarden_factory, pg, webhook_groups(url, retries=1))
    conn = d.connect(user="agent")
    with pytest.raises(psycopg2.Error) as e:
        conn.cursor().execute("SELECT 1")
    text = e.value.pgerror
    assert e.value.pgcode == "58000"
    assert "policy check is unavailable" in text and "Retry" in text
    for secret in (str(port), "127.0.0.1", "s3cret", "/check", "refused"):
        assert secret not in text
    # The session stays usable; the log has the details.
    with pytest.raises(psycopg2.Error):
        conn.cursor().execute("SELECT 2")
    conn.close()
    assert "http_webhook" in d.log() and str(port) in d.log()


def test_fifty_sessions_wait_on_a_200ms_webhook_together(pgwarden_factory, pg, service):
    d = start_daemon(pgwarden_factory, pg, webhook_groups(service.url("/slow?ms=200")))
    conns = [d.connect(user="agent") for _ in range(50)]

    def one(conn):
        cur = conn.cursor()
        cur.execute("SELECT 1")
        return cur.fetchone()[0]

    with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
        start = time.monotonic()
        results = list(pool.map(one, conns))
        elapsed = time.monotonic() - start
    print(f"\n[timing] 50 concurrent sessions behind a 200 ms webhook: {elapsed * 1000:.0f} ms")
    assert results == [1] * 50
    assert elapsed < 3.0, f"{elapsed:.2f}s: the sessions waited one after another"
    for c in conns:
        c.close()


LUA = """
function check(ctx)
  if ctx.sql:find("echo_ctx", 1, true) then
    return {action = "deny", code = "ECHO",
            reason = "agent_id=" .. ctx.agent_id .. " conversation_id=" .. ctx.conversation_id ..
                     " query_intent=" .. ctx.query_intent}
  end
  if ctx.sql:find("spin_forever", 1, true) then while true do end end
  if ctx.sql:find("os_execute", 1, true) then os.execute("true") end
  for _, t in ipairs(ctx.tables) do
    if t == "pgbench_accounts" then
      return {action = "deny", code = "NOT_FOR_AGENTS",
              reason = "pgbench_accounts is benchmark data; query fct_shipments instead.",
              hint = "SELECT count(*) FROM fct_shipments WHERE ship_date = current_date"}
    end
  end
end
"""


def lua_groups():
    return {"scripted": {"guards": [{"kind": "read_only"},
                                    {"kind": "lua", "script": LUA, "instruction_limit": 200000}]}}


def echo_of(stderr):
    line = next(l for l in stderr.splitlines() if "agent_id=" in l)
    return line[line.index("agent_id="):]


def test_lua_reason_via_psql_and_runaway_script(pgwarden_factory, pg):
    d = start_daemon(pgwarden_factory, pg, lua_groups())
    r = pgwtest.psql(d.dsn(user="agent"), "-c", "SELECT aid FROM pgbench_accounts WHERE aid = 1")
    assert r.returncode == 1
    assert "pgbench_accounts is benchmark data; query fct_shipments instead." in r.stderr
    assert "NOT_FOR_AGENTS" in r.stderr

    conn = d.connect(user="agent")
    cur = conn.cursor()
    for sql in ("SELECT 'spin_forever'", "SELECT 'os_execute'"):
        start = time.monotonic()
        with pytest.raises(psycopg2.Error) as e:
            cur.execute(sql)
        assert time.monotonic() - start < 2
        assert e.value.pgcode == "58000"
        assert "policy check could not be completed" in e.value.pgerror
    cur.execute("SELECT count(*) FROM fct_shipments WHERE id <= 5")
    assert cur.fetchone()[0] == 5
    conn.close()
    assert "instruction limit" in d.log()


def test_three_context_sources_reach_the_guard(pgwarden_factory, pg):
    d = start_daemon(pgwarden_factory, pg, lua_groups())
    # 1. Startup options.
    r = pgwtest.psql(d.dsn(user="agent", options="-c agent_id=a1 -c conversation_id=c1"), "-c",
                     "SELECT 'echo_ctx' FROM fct_shipments WHERE id = 1")
    assert echo_of(r.stderr).startswith("agent_id=a1 conversation_id=c1 query_intent="), r.stderr
    # 2. SET pgwarden.* (answered by pgwarden itself), then SHOW.
    r = pgwtest.psql(d.dsn(user="agent", options="-c agent_id=a1"), "-c",
                     "SET pgwarden.agent_id = 'a2'", "-c", "SET SESSION pgwarden.conversation_id TO 'c2'",
                     "-c", "SET pgwarden.query_intent = 'aggregation'", "-c", "SHOW pgwarden.agent_id",
                     "-c", "SELECT 'echo_ctx'")
    assert "SET" in r.stdout and "a2" in r.stdout, r.stdout + r.stderr
    assert echo_of(r.stderr) == "agent_id=a2 conversation_id=c2 query_intent=aggregation"
    # 3. A sqlcommenter comment, for that statement only.
    conn = d.connect(user="agent", options="-c agent_id=a1 -c conversation_id=c1")
    cur = conn.cursor()
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("SELECT 'echo_ctx' /*agent_id='a3',conversation_id='c%2D3'*/")
    assert echo_of(e.value.pgerror).startswith("agent_id=a3 conversation_id=c-3 query_intent=")
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("SELECT 'echo_ctx'")
    assert echo_of(e.value.pgerror).startswith("agent_id=a1 conversation_id=c1 ")
    cur.execute("SHOW pgwarden.conversation_id")
    assert cur.fetchone()[0] == "c1"
    # Our namespace never reaches the server: an unknown key is refused by pgwarden.
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("SET pgwarden.budget = '1000'")
    assert e.value.pgcode == "42704"
    conn.close()


def test_webhook_sees_context_sources(pgwarden_factory, pg, service):
    d = start_daemon(pgwarden_factory, pg, webhook_groups(service.url("/echo")))
    conn = d.connect(user="agent", options="-c agent_id=w1 -c conversation_id=wc1 -c query_intent=lookup")
    cur = conn.cursor()
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("SELECT 1")
    assert "agent_id=w1 conversation_id=wc1 query_intent=lookup" in e.value.pgerror
    cur.execute("SET pgwarden.agent_id = 'w2'")
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("SELECT 1 /* conversation_id='wc3' */")
    assert "agent_id=w2 conversation_id=wc3" in e.value.pgerror
    conn.close()
