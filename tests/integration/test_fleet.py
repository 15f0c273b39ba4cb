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
