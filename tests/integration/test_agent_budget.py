"""Per-conversation budgets through the real daemon: a counting budget of 4 lets exactly 4
statements through whatever the client (psql sessions, JDBC prepared statements), the refusal
tells the agent how to finish, budgets belong to (user, conversation), the per-user rate, and two
pgwarden processes sharing one budget in a PostgreSQL table, one statement or several per text."""

import psycopg2
import pytest

import pgwtest
from agentsupport import start_daemon

REASON = ("This conversation has used its budget of 4 queries. Do not run more. Answer with what "
          "you have found and say what you could not determine.")


def budget_groups(**keys):
    return {"counted": {"guards": [dict(kind="budget", **keys), {"kind": "read_only"}]}}


def psql_as(daemon, user, sql, **extra):
    return pgwtest.psql(daemon.dsn(user=user, **extra), "-c", sql)


def test_psql_sessions_of_one_conversation_get_exactly_four(pgwarden_factory, pg):
    d = start_daemon(pgwarden_factory, pg, budget_groups(max_statements=4))
    results = [psql_as(d, "agent", "SELECT 1", options="-c conversation_id=c-psql") for _ in range(7)]
    assert [r.returncode for r in results] == [0, 0, 0, 0, 1, 1, 1]
    for r in results[4:]:
        assert REASON in r.stderr, r.stderr
        assert "BUDGET_EXHAUSTED" in r.stderr  # the detail line
    # Another conversation of the same user has a budget of its own.
    assert psql_as(d, "agent", "SELECT 1", options="-c conversation_id=c-other").returncode == 0


def test_jdbc_extended_protocol_counts_each_execution_once(pgwarden_factory, pg, java):
    d = start_daemon(pgwarden_factory, pg, budget_groups(max_statements=4))
    url = f"jdbc:postgresql://127.0.0.1:{d.port}/{pgwtest.DATABASE}"
    r = java.run("AgentCheck", "budget", url, "user=agent", f"password={d.passwords['agent']}",
                 "options=-c conversation_id=c-jdbc", "prepareThreshold=2")
    assert r.returncode == 0, r.stdout + r.stderr
    got = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    assert got["passed"] == "4"
    assert got["sqlstate"] == "54000"
    assert REASON in got["message"]
    assert got["after"] == "54000"


def test_denied_statements_are_not_counted_and_failed_text_is_not_either(pgwarden_factory, pg):
    d = start_daemon(pgwarden_factory, pg, budget_groups(max_statements=2))
    conn = d.connect(user="agent", options="-c conversation_id=c-mixed")
    cur = conn.cursor()
    for sql in ("DELETE FROM fct_shipments", "SELEC 1"):  # read_only denial, syntax error
        with pytest.raises(psycopg2.Error):
            cur.execute(sql)
    cur.execute("SELECT 1")
    cur.execute("SELECT 2")
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("SELECT 3")
    assert e.value.pgcode == "54000"
    assert "budget of 2 queries" in e.value.pgerror
    conn.close()


def test_per_user_rate(pgwarden_factory, pg):
    d = start_daemon(pgwarden_factory, pg, budget_groups(per_user_rate=3))
    conn = d.connect(user="agent")
    cur = conn.cursor()
    for i in range(3):
        cur.execute("SELECT %s", (i,))
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("SELECT 4")
    assert e.value.pgcode == "53400"
    assert "statements per minute" in e.value.pgerror and "Wait about" in e.value.pgerror
    conn.close()


def test_two_processes_share_one_budget_in_postgres(pgwarden_factory, pg):
    dsn = (f"host=127.0.0.1 port={pg.port} user=postgres password={pgwtest.SUPERUSER_PASSWORD} "
           f"dbname={pgwtest.DATABASE}")
    groups = budget_groups(max_statements=4, max_denied=3, store="postgres", dsn=dsn, timeout="2s")
    a = start_daemon(pgwarden_factory, pg, groups)
    b = start_daemon(pgwarden_factory, pg, groups)
    codes = []
    for i in range(8):
        d = a if i % 2 == 0 else b
        r = psql_as(d, "agent", "SELECT 1", options="-c conversation_id=c-shared-pg")
        codes.append(r.returncode)
        if r.returncode:
            assert REASON in r.stderr, r.stderr
    assert codes.count(0) == 4, codes
    assert pg.scalar("SELECT statements FROM pgwarden_budget WHERE conversation_id = 'c-shared-pg'") == 4

    # Several statements per text: each counts once, in both processes, and a text that does not
    # fit in what is left is refused whole with how many are left.
    def run(d, sql, conversation):
        return psql_as(d, "agent", sql, options=f"-c conversation_id={conversation}")

    passed = 0
    r = run(a, "SELECT 1; SELECT 2; SELECT 3", "c-multi-pg")
    assert r.returncode == 0, r.stderr
    passed += 3
    r = run(b, "SELECT 4; SELECT 5", "c-multi-pg")
    assert r.returncode == 1
    assert ("This text has 2 statements, and this conversation has 1 of its budget of 4 queries left."
            in r.stderr), r.stderr
    assert pg.scalar("SELECT statements FROM pgwarden_budget WHERE conversation_id = 'c-multi-pg'") == 3
    for d in (b, a):
        r = run(d, "SELECT 4", "c-multi-pg")
        if r.returncode == 0:
            passed += 1
        else:
            assert REASON in r.stderr, r.stderr
    assert passed == 4
    assert pg.scalar("SELECT statements FROM pgwarden_budget WHERE conversation_id = 'c-multi-pg'") == 4

    # Denied statements count the same way: a denied text of two is two towards max_denied 3.
    r = run(a, "DELETE FROM fct_shipments; DELETE FROM fct_shipments", "c-denied-pg")
    assert r.returncode == 1 and "BUDGET" not in r.stderr, r.stderr
    assert pgwtest.wait_for(lambda: pg.scalar(
        "SELECT denied FROM pgwarden_budget WHERE conversation_id = 'c-denied-pg'") == 2)
    assert run(b, "SELECT 1", "c-denied-pg").returncode == 0
    r = run(b, "DELETE FROM fct_shipments", "c-denied-pg")
    assert r.returncode == 1 and "BUDGET" not in r.stderr, r.stderr
    assert pgwtest.wait_for(lambda: pg.scalar(
        "SELECT denied FROM pgwarden_budget WHERE conversation_id = 'c-denied-pg'") == 3)
    r = run(a, "SELECT 2", "c-denied-pg")
    assert r.returncode == 1 and "DENIED_EXHAUSTED" in r.stderr, r.stderr
    assert pg.scalar("SELECT statements FROM pgwarden_budget WHERE conversation_id = 'c-denied-pg'") == 1
    # The password in the store's DSN never reaches the log.
    for d in (a, b):
        assert pgwtest.SUPERUSER_PASSWORD not in d.log()
