"""Transaction pooling (pool_mode transaction, docs/operations.md) through the real daemon and
PostgreSQL: thousands of client connections on a small pool with correct answers and never more
server backends than the pool allows; protocol-level prepared statements carried across server
connections (pgbench -M prepared, JDBC with server-side prepared statements); a SET of a carried
setting honoured for that client only; session state refused with a denial that says what to do;
explicit transactions holding their connection; a cancel reaching the right statement; a client
that vanishes mid-transaction leaving a clean connection behind; the admin console and metrics."""

import hashlib
import re
import struct
import secrets
import threading
import time
import urllib.request

import psycopg2
import psycopg2.errors
import pytest

import pgwtest
from conftest import module_daemon
from mcpsupport import McpHttp, wait_mcp_listener

POOL = 20


def _users():
    pw = {"tx": "tx-" + secrets.token_hex(6), "sess": "s-" + secrets.token_hex(6)}
    users = [
        {"name": "tx", "password": pgwtest.scram_verifier(pw["tx"]), "group": "pooled"},
        {"name": "txtrust", "method": "trust", "group": "pooled"},
        {"name": "sess", "password": pgwtest.scram_verifier(pw["sess"]), "group": "sessions"},
    ]
    return users, pw


def _start(factory, pg, pool=POOL, extra=None):
    users, pw = _users()
    overrides = {
        "pool": {"max_size": pool, "mode": "transaction", "acquire_timeout": "60s",
                 "max_prepared_statements": 8},
        "limits": {"max_client_connections": 2600, "max_startup_connections": 256,
                   "max_startup_per_address": 0},
        "groups": {
            "pooled": {"search_path": ["public"], "guards": []},
            "sessions": {"search_path": ["public"], "guards": [], "pool_mode": "session"},
        },
        "admin_users": ["tx"],
    }
    if extra:
        overrides = pgwtest.deep_merge(overrides, extra)
    d = factory.start(pg, overrides=overrides, users=users, start=False)
    d.passwords = pw
    d.start()
    return d


@pytest.fixture(scope="module")
def daemon(pg, pgwarden_bin):
    yield from module_daemon(pgwarden_bin, lambda daemons: _start(daemons, pg))


def _backends(pg):
    return pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE usename = %s",
                     (pgwtest.READER_ROLE,))


def _admin(d, command):
    conn = psycopg2.connect(d.dsn(user="tx", dbname="pgwarden"))
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(command)
            cols = [c.name for c in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]
    finally:
        conn.close()


def test_two_thousand_clients_on_twenty_server_connections(daemon, pg):
    """2,000 clients (1,800 raw, 200 psycopg2) each run statements, all at once, through a pool of
    20: every answer is the client's own, and PostgreSQL never sees more than 20 backends."""
    raws, conns = [], []
    peak = 0
    try:
        for i in range(1800):
            r = pgwtest.RawClient.unix(daemon.sockdir / f".s.PGSQL.{daemon.port}", timeout=120)
            r.login("txtrust")
            raws.append(r)
            if i % 300 == 0:
                peak = max(peak, _backends(pg))
        for _ in range(200):
            conns.append(daemon.connect(user="txtrust", unix=True))
        assert len(raws) + len(conns) == 2000
        for rnd in range(2):
            # Every raw client sends before any reads: 1,800 transactions wait for 20 connections.
            for i, r in enumerate(raws):
                r.send_msg(b"Q", f"SELECT {i} * 10 + {rnd}, pg_backend_pid()".encode() + b"\0")
            pids = set()
            for i, r in enumerate(raws):
                rows, tags, _ = r.read_query_result()
                assert rows[0][0] == str(i * 10 + rnd) and tags == ["SELECT 1"]
                pids.add(rows[0][1])
                if i % 300 == 0:
                    peak = max(peak, _backends(pg))
            # With several loops a slot moves between them by closing an idle connection on one
            # loop and opening one on the other: more distinct backends over the round, never
            # more at once (the peak below).
            if pgwtest.TEST_WORKERS <= 1:
                assert 1 <= len(pids) <= POOL
            else:
                assert 1 <= len(pids) <= 2 * POOL
            for i, c in enumerate(conns):
                with c.cursor() as cur:
                    cur.execute("SELECT %s::int + 1", (i,))
                    assert cur.fetchone()[0] == i + 1
        peak = max(peak, _backends(pg))
        # The pool's 20, plus the one connection that reads catalog statistics.
        assert peak <= POOL + 1, f"{peak} backends for a pool of {POOL}"
        pools = [p for p in _admin(daemon, "SHOW POOLS") if p["database"] == pgwtest.DATABASE]
        assert sum(int(p["total"]) for p in pools) <= POOL + 1, pools
        stats = {r["name"]: int(r["value"]) for r in _admin(daemon, "SHOW TOTALS")}
        assert stats["pool_assignments"] >= 2 * 1800 + 2 * 200
        clients = _admin(daemon, "SHOW CLIENTS")
        assert sum(1 for c in clients if c["pool_mode"] == "transaction") >= 2000
    finally:
        for r in raws:
            r.close()
        for c in conns:
            c.close()


def test_pgbench_prepared_across_connections(daemon, pgwarden_factory):
    """pgbench -M prepared with more clients than server connections and a server-side statement
    cache of 8 per connection: named statements move between connections and are re-prepared."""
    small = _start(pgwarden_factory, daemon.pg, pool=3)
    for mode in ("prepared", "extended", "simple"):
        r = pgwtest.run_pgbench(["-h", "127.0.0.1", "-p", str(small.port), "-U", "tx", pgwtest.DATABASE],
                                mode, clients=12, seconds=3, password=small.passwords["tx"])
        assert r.returncode == 0, r.stdout + r.stderr
        m = re.search(r"number of transactions actually processed: (\d+)", r.stdout)
        assert m and int(m.group(1)) > 100, r.stdout
        assert "error" not in r.stderr.lower(), r.stderr
    pools = [p for p in _admin(small, "SHOW POOLS") if p["database"] == pgwtest.DATABASE]
    # The three of the clients' pool, and the catalog statistics' own connection.
    assert 1 <= sum(int(p["total"]) for p in pools) <= 3 + 1, pools


def test_jdbc_server_prepared_statements(daemon, java):
    """JDBC with server-side prepared statements (prepareThreshold 1 and the default 5) on 40
    connections sharing a pool of 20: results checked row by row."""
    for threshold in ("1", "5"):
        r = java.run("TxnPoolCheck", daemon.port, "tx", daemon.passwords["tx"], threshold, 40)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "OK" in r.stdout, r.stdout


def test_set_of_carried_setting_stays_with_its_client(pgwarden_factory, pg):
    """On a pool of one, a client's SET DateStyle / extra_float_digits applies to that client
    only, though both clients run on the same server connection in turn."""
    one = _start(pgwarden_factory, pg, pool=1)
    a = one.connect(user="tx")
    b = one.connect(user="tx")
    ca, cb = a.cursor(), b.cursor()
    ca.execute("SET DateStyle = 'German'")
    ca.execute("SET extra_float_digits = -10")
    for _ in range(3):
        ca.execute("SELECT '2024-03-01'::date::text, (1/3::float8)::text")
        assert ca.fetchone() == ("01.03.2024", "0.33333")
        cb.execute("SELECT '2024-03-01'::date::text, (1/3::float8)::text")
        assert cb.fetchone() == ("2024-03-01", "0.3333333333333333")
    ca.execute("RESET extra_float_digits")
    ca.execute("SELECT (1/3::float8)::text")
    assert ca.fetchone()[0] == "0.3333333333333333"
    ca.execute("SHOW DateStyle")
    assert ca.fetchone()[0].startswith("German")
    a.close()
    b.close()


def test_mcp_call_after_a_pooled_client_sees_login_settings(pgwarden_factory, pg):
    """A transaction-pooled client leaves its DateStyle and extra_float_digits on the pool's only
    connection; an MCP tool call lent that connection next reads with the login values, and the
    client keeps its own afterwards."""
    token = "pgw_" + secrets.token_urlsafe(32)
    mcp = {"listen": f"127.0.0.1:{pgwtest.free_port()}", "database": pgwtest.DATABASE,
           "tokens": [{"user": "tx", "sha256": hashlib.sha256(token.encode()).hexdigest()}]}
    one = _start(pgwarden_factory, pg, pool=1, extra={"mcp": mcp})
    a = one.connect(user="tx")
    ca = a.cursor()
    ca.execute("SET DateStyle = 'German'")
    ca.execute("SET extra_float_digits = -10")
    sql = "SELECT '2024-03-01'::date::text AS d, (1/3::float8)::text AS f"
    ca.execute(sql)
    assert ca.fetchone() == ("01.03.2024", "0.33333")
    c = McpHttp(wait_mcp_listener(mcp), token)
    c.initialize(client="settings-check")
    for _ in range(2):
        r = c.tool("query", {"sql": sql})
        assert r["isError"] is False, r
        assert r["structuredContent"]["rows"] == [["2024-03-01", "0.3333333333333333"]]
        ca.execute(sql)
        assert ca.fetchone() == ("01.03.2024", "0.33333")
    c.close()
    a.close()


@pytest.mark.parametrize("sql, what", [
    ("SET work_mem = '64MB'", "SET work_mem"),
    ("LISTEN jobs", "LISTEN"),
    ("PREPARE q AS SELECT 1", "PREPARE"),
    ("SELECT pg_advisory_lock(42)", "pg_advisory_lock()"),
    ("DECLARE c CURSOR WITH HOLD FOR SELECT 1", "DECLARE ... WITH HOLD"),
    ("SELECT set_config('work_mem', '64MB', false)", "set_config(..., false)"),
])
def test_session_state_is_refused_with_what_to_do(daemon, sql, what):
    conn = daemon.connect(user="tx")
    try:
        with conn.cursor() as cur:
            with pytest.raises(psycopg2.Error) as e:
                cur.execute(sql)
            assert e.value.pgcode == "0A000"
            msg = e.value.pgerror
            assert what in msg and "transaction-pooled" in msg, msg
            assert "SESSION_STATE" in (e.value.diag.message_detail or ""), e.value.diag.message_detail
            # What to do instead works.
            cur.execute("BEGIN")
            cur.execute("SET LOCAL work_mem = '64MB'")
            cur.execute("SHOW work_mem")
            assert cur.fetchone()[0] == "64MB"
            cur.execute("SELECT pg_advisory_xact_lock(42)")
            cur.execute("COMMIT")
    finally:
        conn.close()
    # A session-mode group keeps them.
    s = daemon.connect(user="sess")
    try:
        with s.cursor() as cur:
            cur.execute("SET work_mem = '64MB'")
            cur.execute("SHOW work_mem")
            assert cur.fetchone()[0] == "64MB"
    finally:
        s.close()


def test_explicit_transaction_holds_its_connection_and_vanishing_client_rolls_back(pgwarden_factory, pg):
    # One loop: B is lent A's very connection (with two, a loop can only hand over the slot).
    one = _start(pgwarden_factory, pg, pool=1, extra={"daemon": {"workers": 1}})
    a = one.connect(user="tx", autocommit=False)
    ca = a.cursor()
    ca.execute("SELECT pg_backend_pid()")
    pid = ca.fetchone()[0]
    ca.execute("SET LOCAL DateStyle = 'SQL'")
    holders = [s for s in _admin(one, "SHOW SERVERS") if s["client_id"]]
    assert len(holders) == 1
    done = {}

    def other():
        b = one.connect(user="tx")
        with b.cursor() as cb:
            cb.execute("SELECT pg_backend_pid(), current_setting('DateStyle')")
            done["row"] = cb.fetchone()
            done["at"] = time.monotonic()
        b.close()

    t = threading.Thread(target=other)
    t.start()
    time.sleep(1.0)
    assert "row" not in done, "the other client ran inside A's transaction"
    # A vanishes mid-transaction: its connection is rolled back and lent to B, clean.
    a.close()
    t.join(30)
    assert done["row"][0] == pid
    assert done["row"][1].startswith("ISO"), done["row"]
    assert pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND "
                     "state = 'idle in transaction'", (pgwtest.READER_ROLE,)) == 0


def test_cancel_reaches_the_right_statement(daemon):
    a = daemon.connect(user="tx")
    b = daemon.connect(user="tx")
    results = {}

    def run(name, conn, secs):
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT pg_sleep({secs}), 'done'")
                results[name] = cur.fetchone()[1]
        except psycopg2.Error as e:
            results[name] = e.pgcode

    ta = threading.Thread(target=run, args=("a", a, 5))
    tb = threading.Thread(target=run, args=("b", b, 1.5))
    ta.start()
    tb.start()
    time.sleep(0.5)
    a.cancel()
    ta.join(20)
    tb.join(20)
    assert results == {"a": "57014", "b": "done"}
    # A's connection works afterwards.
    with a.cursor() as cur:
        cur.execute("SELECT 7")
        assert cur.fetchone()[0] == 7
    a.close()
    b.close()


def test_metrics_show_assignments_and_waits(daemon):
    body = urllib.request.urlopen(f"http://127.0.0.1:{daemon.metrics_port}/metrics", timeout=10).read().decode()
    m = re.search(r"^pgwarden_pool_assignments_total (\S+)$", body, re.M)
    assert m and float(m.group(1)) > 0
    assert re.search(r'^pgwarden_pool_wait_seconds_count\{mode="transaction"\} [1-9]', body, re.M), \
        [l for l in body.splitlines() if "pool_wait" in l]
    assert "pgwarden_pool_waiting_clients{" in body


def test_prepared_statements_across_connections_at_the_protocol_level(pgwarden_factory, pg):
    """Raw Parse/Bind/Execute on a pool of one shared with another client: a named statement is
    answered ParseComplete where the connection holds the text already, re-prepared where it does
    not, and its name is the client's own (Close by one client leaves the other's working); a
    Parse the server refuses leaves no name behind; a name parsed twice is 42P05, as PostgreSQL
    says it."""
    one = _start(pgwarden_factory, pg, pool=1)
    a = one.raw()
    b = one.raw()
    a.login("tx", one.passwords["tx"])
    b.login("tx", one.passwords["tx"])
    sql = "SELECT $1::int + 1"

    def run(c, name, value):
        bind = b"\0" + name.encode() + b"\0" + struct.pack("!HH", 0, 1)
        bind += struct.pack("!i", len(value)) + value.encode() + struct.pack("!H", 0)
        c.send_msg(b"B", bind)
        c.send_msg(b"E", b"\0" + struct.pack("!i", 0))
        rows, tags, _, errors, _ = c.sync()
        return rows, tags, errors

    def parse(c, name, text):
        c.send_msg(b"P", name.encode() + b"\0" + text.encode() + b"\0" + struct.pack("!H", 0))
        return c.sync()

    for c in (a, b):
        _, _, _, errors, seen = parse(c, "s1", sql)
        assert not errors and seen == [b"1", b"Z"], (errors, seen)
    for i in range(3):
        for c in (a, b):
            rows, tags, errors = run(c, "s1", str(i))
            assert not errors and tags == ["SELECT 1"], errors
    # A closes its s1; B's still runs, on the same server statement.
    a.send_msg(b"C", b"S" + b"s1\0")
    _, _, _, errors, seen = a.sync()
    assert seen == [b"3", b"Z"]
    rows, tags, errors = run(b, "s1", "41")
    assert not errors and tags == ["SELECT 1"]
    _, _, errors = run(a, "s1", "1")
    assert errors and errors[0]["C"] == "26000", errors
    # A Parse the server refuses: the name is not left behind.
    _, _, _, errors, _ = parse(a, "bad", "SELECT * FROM no_such_table_here")
    assert errors and errors[0]["C"] == "42P01"
    _, _, errors = run(a, "bad", "1")
    assert errors and errors[0]["C"] == "26000", errors
    _, _, _, errors, _ = parse(b, "s1", sql)
    assert errors and errors[0]["C"] == "42P05", errors
    a.close()
    b.close()


def test_mixed_clients_stay_correct_under_contention(pgwarden_factory, pg):
    """40 clients on a pool of 3, each running a seeded random mix of simple queries, pipelined
    extended batches with named and unnamed statements, explicit transactions and SETs of a
    carried setting: every answer is checked against what that client alone should see."""
    import random

    one = _start(pgwarden_factory, pg, pool=3)
    failures = []

    def client(n):
        rnd = random.Random(n)
        c = one.raw(timeout=60)
        try:
            c.login("tx", one.passwords["tx"])
            style = "ISO, MDY"
            prepared = set()
            for step in range(30):
                k = rnd.randrange(5)
                v = rnd.randrange(1000)
                if k == 0:
                    rows, tags, _ = c.query(f"SELECT {v} + {n}")
                    assert rows == [(str(v + n),)], rows
                elif k == 1:
                    name = f"p{v % 3}"
                    if name not in prepared:
                        c.send_msg(b"P", name.encode() + b"\0SELECT $1::int * 3\0" + struct.pack("!H", 0))
                        prepared.add(name)
                    for _ in range(2):  # pipelined: two Bind/Execute before the Sync
                        bind = b"\0" + name.encode() + b"\0" + struct.pack("!HH", 0, 1)
                        bind += struct.pack("!i", len(str(v))) + str(v).encode() + struct.pack("!H", 0)
                        c.send_msg(b"B", bind)
                        c.send_msg(b"E", b"\0" + struct.pack("!i", 0))
                    rows, tags, _, errors, _ = c.sync()
                    assert not errors and tags == ["SELECT 1", "SELECT 1"], errors
                    assert [r[-len(str(v * 3)):] for r in rows] == [str(v * 3).encode()] * 2, rows
                elif k == 2:
                    _, tags, _ = c.extended("SELECT $1::int - 1", (str(v),))
                    assert tags == ["SELECT 1"]
                elif k == 3:
                    c.query("BEGIN")
                    rows, _, _ = c.query("SELECT txid_current()")
                    rows2, _, _ = c.query("SELECT txid_current()")
                    assert rows == rows2, "a transaction moved connections"
                    c.query("COMMIT")
                else:
                    style = rnd.choice(["ISO, MDY", "German, DMY", "SQL, DMY"])
                    c.query(f"SET DateStyle = '{style}'")
                rows, _, _ = c.query("SHOW DateStyle")
                assert rows == [(style,)], (rows, style)
        except Exception as e:  # noqa: BLE001 - collected and reported below
            failures.append(f"client {n}: {e!r}")
        finally:
            c.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures[:5]
    pools = [p for p in _admin(one, "SHOW POOLS") if p["database"] == pgwtest.DATABASE]
    assert sum(int(p["total"]) for p in pools) <= 3 + 1, pools


@pytest.mark.parametrize("user", ["sess", "tx"])
def test_a_quiet_session_gives_back_its_buffers_and_keeps_its_state(pgwarden_factory, pg, user):
    """Sessions and server connections quiet for a second give back their buffers and their
    statement gate (docs/operations.md, "Memory per connection"); what the client set stays, the
    next statement regrows what it needs, and a SET after login changes that connection's
    parameters only: a new client still logs in with the server's values. Session and
    transaction pooling."""
    d = _start(pgwarden_factory, pg, pool=2)
    a = d.connect(user=user)
    ca = a.cursor()
    ca.execute("SET DateStyle = 'German'")
    assert a.get_parameter_status("DateStyle") == "German, DMY"
    ca.execute("SELECT repeat('x', 300000)")  # grows the buffers past what a login needs
    assert len(ca.fetchone()[0]) == 300000
    time.sleep(1.6)  # the janitor trims after 1 s
    fresh = d.connect(user=user)
    assert fresh.get_parameter_status("DateStyle") == "ISO, MDY"
    with fresh.cursor() as cf:
        cf.execute("SELECT '2024-03-01'::date::text")
        assert cf.fetchone()[0] == "2024-03-01"
    for _ in range(2):
        ca.execute("SELECT '2024-03-01'::date::text, length(repeat('y', 200000))")
        assert ca.fetchone() == ("01.03.2024", 200000)
        time.sleep(1.2)
    ca.execute("SELECT x FROM generate_series(1, 3) AS x")
    assert [r[0] for r in ca.fetchall()] == [1, 2, 3]
    a.close()
    late = d.connect(user=user)
    assert late.get_parameter_status("DateStyle") == "ISO, MDY"
    late.close()
    fresh.close()
