"""Worker loops (daemon.workers): connections spread over the loops; a conversation's budget is
exact when its sessions run on different loops at once; a cancel request that arrives on one loop
cancels the statement of a session on another; a reload reaches every loop; pool.max_size caps the
server connections of all loops together; metrics and history count every loop's statements."""

import signal
import threading
import time

import psycopg2
import pytest

import pgwtest
from agentsupport import start_daemon
from test_admin import console, deny_shipments_from_now_on
from test_metrics import samples, scrape

WORKERS = {"daemon": {"workers": 2}}


def client_rows(d, user="core"):
    header, rows = console(d, "SHOW CLIENTS", user=user)
    return [dict(zip(header, r)) for r in rows]


def workers_of(d, application_name, user="core"):
    return {r["worker"] for r in client_rows(d, user) if r["application_name"] == application_name}


@pytest.fixture
def two_loops(pgwarden_factory, pg):
    return pgwarden_factory.start(pg, overrides=pgwtest.deep_merge(
        {"admin_users": ["core"], "logging": {"level": "debug"}}, WORKERS))


def test_connections_spread_over_both_loops(two_loops):
    conns = [two_loops.connect(user="core", application_name="spread") for _ in range(6)]
    try:
        for c in conns:
            with c.cursor() as cur:
                cur.execute("SELECT 1")
        rows = [r for r in client_rows(two_loops) if r["application_name"] == "spread"]
        assert len(rows) == 6
        per_loop = {w: sum(1 for r in rows if r["worker"] == w) for w in ("0", "1")}
        # Least-loaded first: three each.
        assert per_loop == {"0": 3, "1": 3}, rows
    finally:
        for c in conns:
            c.close()


def test_budget_is_exact_across_loops_under_concurrent_sessions(pgwarden_factory, pg):
    limit = 25
    groups = {"counted": {"guards": [{"kind": "budget", "max_statements": limit},
                                     {"kind": "read_only"}]}}
    d = start_daemon(pgwarden_factory, pg, groups,
                     extra=pgwtest.deep_merge({"admin_users": ["agent"]}, WORKERS))
    sessions = 8
    conns = [d.connect(user="agent", application_name="budget",
                       options="-c conversation_id=c-loops") for _ in range(sessions)]
    assert workers_of(d, "budget", user="agent") == {"0", "1"}, "the sessions should be on both loops"
    counts = {"ok": 0, "denied": 0, "other": []}
    lock = threading.Lock()
    start = threading.Barrier(sessions)

    def run(conn):
        start.wait()
        for _ in range(10):
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT 1")
                with lock:
                    counts["ok"] += 1
            except psycopg2.Error as e:
                with lock:
                    if e.pgcode == "54000":
                        counts["denied"] += 1
                    else:
                        counts["other"].append(str(e))

    threads = [threading.Thread(target=run, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert counts["other"] == []
    assert counts["ok"] == limit
    assert counts["denied"] == sessions * 10 - limit
    # History holds every one of them once, from both loops' sessions.
    rows = pgwtest.history_rows(d, "conversation_id = 'c-loops'", want=sessions * 10)
    assert len(rows) == sessions * 10
    assert sum(1 for r in rows if r["outcome"] == "ok") == limit
    for c in conns:
        c.close()


def test_a_cancel_arriving_on_one_loop_cancels_a_statement_on_the_other(two_loops):
    victim = two_loops.connect(user="core", application_name="victim")
    try:
        (loop,) = workers_of(two_loops, "victim")
        result = {}

        def run():
            try:
                with victim.cursor() as cur:
                    cur.execute("SELECT pg_sleep(20)")
                result["outcome"] = "finished"
            except psycopg2.Error as e:
                result["outcome"] = e.pgcode

        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.5)
        offset = len(two_loops.log())
        started = time.monotonic()
        # The cancel connection goes to the least-loaded loop: the one without the victim.
        victim.cancel()
        t.join(15)
        assert result == {"outcome": "57014"}
        assert time.monotonic() - started < 10
        other = "1" if loop == "0" else "0"
        assert pgwtest.wait_for(lambda: f"routed from loop {other} to loop {loop}"
                                in two_loops.log()[offset:], timeout=5), two_loops.log()[offset:]
        with victim.cursor() as cur:  # the victim's connection goes on working
            cur.execute("SELECT 7")
            assert cur.fetchone()[0] == 7
    finally:
        victim.close()


def test_reload_reaches_every_loop(two_loops):
    sql = deny_shipments_from_now_on(two_loops)
    offset = len(two_loops.log())
    two_loops.send_signal(signal.SIGHUP)
    assert pgwtest.wait_for(lambda: "configuration reloaded" in two_loops.log()[offset:])
    time.sleep(0.3)  # the other loop takes the configuration from its mailbox
    conns = [two_loops.connect(user="core", application_name="after-reload") for _ in range(4)]
    try:
        assert workers_of(two_loops, "after-reload") == {"0", "1"}
        for c in conns:
            with pytest.raises(psycopg2.Error) as err:
                with c.cursor() as cur:
                    cur.execute(sql)
            assert err.value.pgcode == "42501"
            assert "fct_shipments" in str(err.value)
    finally:
        for c in conns:
            c.close()


def test_pool_max_size_caps_both_loops_together(pgwarden_factory, pg):
    # Transaction pooling: a client holds a server connection only while a statement runs, so
    # six clients on two loops share what the cap of two allows, waiting their turn.
    d = pgwarden_factory.start(pg, overrides=pgwtest.deep_merge(
        {"admin_users": ["core"],
         "pool": {"mode": "transaction", "max_size": 2, "min_size": 0, "acquire_timeout": "20s"}},
        WORKERS))
    clients = 6
    conns = [d.connect(user="core", application_name="capped") for _ in range(clients)]
    assert workers_of(d, "capped") == {"0", "1"}
    peak = {"running": 0}
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            n = pg.scalar("SELECT count(*) FROM pg_stat_activity "
                          "WHERE query = 'SELECT pg_sleep(0.4)' AND state = 'active'")
            peak["running"] = max(peak["running"], n)
            time.sleep(0.02)

    errors = []

    def run(c):
        try:
            with c.cursor() as cur:
                cur.execute("SELECT pg_sleep(0.4)")
        except psycopg2.Error as e:
            errors.append(str(e))

    w = threading.Thread(target=watch)
    w.start()
    threads = [threading.Thread(target=run, args=(c,)) for c in conns]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    took = time.monotonic() - started
    stop.set()
    w.join()
    assert errors == []
    # Never more than two at once over both loops; six of 0.4 s on two connections take 1.2 s.
    assert peak["running"] == 2, peak
    assert took >= 1.1, took
    _, rows = console(d, "SHOW POOLS")
    assert all(int(r[3]) <= 2 for r in rows), rows
    for c in conns:
        c.close()


def test_metrics_and_history_count_every_loops_statements(two_loops):
    before = samples(scrape(two_loops))
    conns = [two_loops.connect(user="core", application_name="counted") for _ in range(4)]
    assert workers_of(two_loops, "counted") == {"0", "1"}
    for i, c in enumerate(conns):
        with c.cursor() as cur:
            for _ in range(5):
                cur.execute("SELECT %s", (i,))
    for c in conns:
        c.close()

    def ok_total(s):
        return sum(v for (name, labels), v in s.items()
                   if name == "pgwarden_statements_total" and ("outcome", "ok") in labels)

    want = ok_total(before) + 20 + 1  # the SHOW CLIENTS above is a console statement too
    assert pgwtest.wait_for(lambda: ok_total(samples(scrape(two_loops))) >= want, timeout=5)
    rows = pgwtest.history_rows(two_loops, "application_name = 'counted'", want=20)
    assert len(rows) == 20
