"""A fleet: two pgwarden processes behind one port (listen.so_reuseport) with query history in
one PostgreSQL store. One is killed with SIGKILL while clients run statements through the port:
its clients reconnect and land on the other, the killed one is started again and replays its
spool, and every statement a client saw answered is in history exactly once."""

import collections
import secrets
import threading

import psycopg2

import pgwtest

CLIENTS = 4
STATEMENTS = 400  # per client


def history_texts(dsn, marker):
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT sql_text FROM pgwarden_history WHERE sql_text LIKE %s",
                        (f"%{marker}-%",))
            return collections.Counter(r[0] for r in cur.fetchall())
    except psycopg2.errors.UndefinedTable:
        return collections.Counter()
    finally:
        conn.close()


def clients_on(d):
    """Client sessions of `d` past login, from its metrics."""
    import re
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/metrics", timeout=5).read()
    return int(sum(float(v) for v in re.findall(
        rb'^pgwarden_client_connections\{state="(?:idle|active)"\} (\S+)$', text, re.M)))


def test_a_killed_instance_loses_no_record_and_its_clients_move_on(pgwarden_factory, pg):
    db = "fleet_" + secrets.token_hex(4)
    pg.execute(f"CREATE DATABASE {db}", dbname="postgres")
    dsn = (f"host=127.0.0.1 port={pg.port} dbname={db} user=postgres "
           f"password={pgwtest.SUPERUSER_PASSWORD} connect_timeout=2")
    port = pgwtest.free_port()
    password = "core-" + secrets.token_hex(6)
    users = [{"name": "core", "password": pgwtest.scram_verifier(password),
              "group": "passthrough"}]
    fleet = []
    for _ in range(2):
        d = pgwarden_factory.start(pg, users=users, start=False, overrides={
            "listen": {"addresses": [f"127.0.0.1:{port}"], "unix_socket_dir": "",
                       "so_reuseport": True},
            "groups": {"passthrough": {"guards": []}}})
        d.config["history"] = pgwtest.history_config(d, "postgres", dsn, flush_interval="50ms")
        d.write_config()
        d.passwords["core"] = password
        d.port = port
        d.start()
        fleet.append(d)
    a, b = fleet

    marker = "fleet" + secrets.token_hex(4)
    answered = []
    reconnects = [0]
    halfway = threading.Barrier(CLIENTS + 1)

    def client(c):
        conn = None
        i = 0
        while i < STATEMENTS:
            try:
                if conn is None:
                    conn = a.connect(user="core")  # the shared port: either process
                with conn.cursor() as cur:
                    cur.execute(f"SELECT '{marker}-{c}-{i}'")
                    assert cur.fetchone() == (f"{marker}-{c}-{i}",)
                answered.append((c, i))
                i += 1
                if i == STATEMENTS // 2:
                    halfway.wait(120)  # every client holds a connection here
            except psycopg2.Error:
                # The process it was on is gone: the statement has no answer; it is sent again
                # on a new connection, which lands on the other process.
                reconnects[0] += 1
                conn = None
        conn.close()

    workers = [pgwtest.Background(client, c) for c in range(CLIENTS)]
    halfway.wait(120)
    # Every client holds a connection now (idle, at the barrier); the one killed holds some.
    victim = a if clients_on(a) > 0 else b
    on_victim = clients_on(victim)
    assert on_victim > 0
    victim.kill()
    victim.stopped_by_test = False
    victim.start()  # replays its spool into the store
    for w in workers:
        w.join(300)
        assert w.error is None, w.error
    assert len(answered) == CLIENTS * STATEMENTS
    assert reconnects[0] >= on_victim

    want = {f"SELECT '{marker}-{c}-{i}'" for c, i in answered}
    assert pgwtest.wait_for(lambda: want <= set(history_texts(dsn, marker)), timeout=60), \
        len(want - set(history_texts(dsn, marker)))
    for d in fleet:
        assert d.stop(by_test=True) == 0, d.log()[-3000:]
    counts = history_texts(dsn, marker)
    missing = want - set(counts)
    twice = {t: n for t, n in counts.items() if n > 1}
    assert not missing, f"{len(missing)} answered statements missing from history"
    assert not twice, f"{len(twice)} statements stored more than once"
    print(f"fleet: {CLIENTS} clients, {CLIENTS * STATEMENTS} statements answered through one "
          f"port; one of two processes killed with SIGKILL halfway holding {on_victim} of the "
          f"clients, which reconnected ({reconnects[0]} statements sent again); every answered "
          f"statement in history once ({sum(counts.values())} records of the run)")


def start_fleet(pgwarden_factory, pg, users, groups, history=None, count=2):
    """`count` processes on one port (so_reuseport); `history(d)` makes each one's history
    section (default: each its own SQLite file)."""
    port = pgwtest.free_port()
    fleet = []
    for _ in range(count):
        d = pgwarden_factory.start(pg, users=[u for u, _ in users], start=False, overrides={
            "listen": {"addresses": [f"127.0.0.1:{port}"], "unix_socket_dir": "",
                       "so_reuseport": True},
            "groups": groups})
        if history:
            d.config["history"] = history(d)
        d.write_config()
        d.passwords.update({u["name"]: p for u, p in users})
        d.port = port
        d.start()
        fleet.append(d)
    return fleet


def metric_sum(d, name):
    import re
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/metrics", timeout=5).read()
    return sum(float(v) for v in re.findall(rb"^" + name.encode() + rb"(?:\{[^}]*\})? (\S+)$",
                                            text, re.M))


BUDGET = 5
CONVERSATIONS = 6
ATTEMPTS = 12  # per conversation, 3 clients of 4 each


def test_budgets_in_postgres_are_exact_across_the_fleet(pgwarden_factory, pg):
    """Two processes behind one port with the budget guard's store in PostgreSQL: clients of one
    conversation connect through the port (so to either process) at the same time, and every
    conversation gets exactly its budget."""
    dsn = (f"host=127.0.0.1 port={pg.port} user=postgres password={pgwtest.SUPERUSER_PASSWORD} "
           f"dbname={pgwtest.DATABASE}")
    password = "agent-" + secrets.token_hex(6)
    users = [({"name": "agent", "password": pgwtest.scram_verifier(password),
               "group": "counted"}, password)]
    groups = {"counted": {"guards": [
        {"kind": "budget", "max_statements": BUDGET, "store": "postgres", "dsn": dsn,
         "timeout": "5s"},
        {"kind": "read_only"}]}}
    a, b = start_fleet(pgwarden_factory, pg, users, groups)
    run = "fleet" + secrets.token_hex(4)
    results = collections.defaultdict(list)
    lock = threading.Lock()

    def client(conversation):
        for _ in range(ATTEMPTS // 3):
            conn = a.connect(user="agent", options=f"-c conversation_id={conversation}")
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT 1")
                    outcome = "ok"
            except psycopg2.Error as e:
                assert "budget" in str(e), str(e)
                outcome = "over"
            finally:
                conn.close()
            with lock:
                results[conversation].append(outcome)

    workers = [pgwtest.Background(client, f"{run}-{c}")
               for c in range(CONVERSATIONS) for _ in range(3)]
    for w in workers:
        w.join(300)
        assert w.error is None, w.error
    accepted = [metric_sum(d, "pgwarden_client_connections_accepted_total") for d in (a, b)]
    assert all(n > 0 for n in accepted), accepted  # the port spread clients over both
    for c in range(CONVERSATIONS):
        got = results[f"{run}-{c}"]
        assert len(got) == ATTEMPTS
        assert got.count("ok") == BUDGET, (c, got)
    stored = pg.execute("SELECT statements FROM pgwarden_budget WHERE conversation_id LIKE %s",
                        (f"{run}-%",))
    assert sorted(r[0] for r in stored) == [BUDGET] * CONVERSATIONS
    print(f"fleet budgets: {CONVERSATIONS} conversations x {ATTEMPTS} statements through one "
          f"port over two processes (connections accepted: {accepted[0]:.0f} and "
          f"{accepted[1]:.0f}); each conversation got exactly {BUDGET}")


def test_a_process_killed_while_the_history_store_is_down_replays_its_spool(pgwarden_factory, pg):
    """History in a PostgreSQL store that is stopped while clients run statements through the
    port: the records wait in each process's spool; one process is killed with SIGKILL, the store
    comes back, the killed process is started again, and every answered statement is in history
    exactly once."""
    store = pgwtest.PgCluster(prefix="pgw-fleetstore-")
    try:
        store.init()
        store.start()
        store.execute("CREATE DATABASE history", dbname="postgres")
        dsn = (f"host=127.0.0.1 port={store.port} dbname=history user=postgres "
               f"password={pgwtest.SUPERUSER_PASSWORD} connect_timeout=2")
        password = "core-" + secrets.token_hex(6)
        users = [({"name": "core", "password": pgwtest.scram_verifier(password),
                   "group": "passthrough"}, password)]
        fleet = start_fleet(
            pgwarden_factory, pg, users, {"passthrough": {"guards": []}},
            history=lambda d: pgwtest.history_config(d, "postgres", dsn, flush_interval="50ms"))
        for d in fleet:
            assert pgwtest.wait_for(lambda: metric_sum(d, "pgwarden_history_store_up") == 1)
        store.stop()
        marker = "spool" + secrets.token_hex(4)
        answered = []

        def client(c):
            for i in range(100):
                conn = fleet[0].connect(user="core")  # through the port: either process
                try:
                    with conn.cursor() as cur:
                        cur.execute(f"SELECT '{marker}-{c}-{i}'")
                        assert cur.fetchone() == (f"{marker}-{c}-{i}",)
                    answered.append((c, i))
                finally:
                    conn.close()

        workers = [pgwtest.Background(client, c) for c in range(CLIENTS)]
        for w in workers:
            w.join(300)
            assert w.error is None, w.error
        ran = [metric_sum(d, "pgwarden_statements_total") for d in fleet]
        assert all(n > 0 for n in ran), ran
        victim = fleet[0]
        victim.kill()
        victim.stopped_by_test = False
        store.start()
        victim.start()  # replays its spool into the store
        assert "records from before the last stop found in the spool" in victim.log()
        want = {f"SELECT '{marker}-{c}-{i}'" for c, i in answered}
        assert len(want) == CLIENTS * 100
        dsn_store = dsn.replace("connect_timeout=2", "connect_timeout=10")
        assert pgwtest.wait_for(lambda: want <= set(history_texts(dsn_store, marker)),
                                timeout=60), len(want - set(history_texts(dsn_store, marker)))
        for d in fleet:
            assert d.stop(by_test=True) == 0, d.log()[-3000:]
        counts = history_texts(dsn_store, marker)
        assert set(counts) == want
        twice = {t: n for t, n in counts.items() if n > 1}
        assert not twice, f"{len(twice)} statements stored more than once"
        print(f"fleet spool: {CLIENTS * 100} statements through one port while the history "
              f"store was down ({ran[0]:.0f} and {ran[1]:.0f} statements on the two processes); "
              f"the first killed with SIGKILL, the store started, the process restarted: every "
              f"statement in history once")
    finally:
        store.destroy()
