"""One client must not starve the others of server connections (docs/reliability.md, "A hanging
webhook" and "Clients that stop reading"): statements waiting for a webhook that never answers
hold no server connection in transaction pool mode, and clients that stopped reading their
results lose their connection after limits.client_stall_timeout. Real PostgreSQL, the real
daemon; the webhook is a loopback HTTP server that answers only when the test lets it, and the
stalled clients are raw sockets that send a query for a large result and never read."""

import socket
import threading
import time

import pytest

import pgwtest
from test_metrics import samples, scrape

POOL_SIZE = 4


def figure(name, value, unit=""):
    print(f"figure: {name} = {value}{(' ' + unit) if unit else ''}")


class HangingWebhook:
    """Accepts POSTs and answers none of them until release(); then each (held or new) gets
    {"action": "allow"}."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.port = self.sock.getsockname()[1]
        self.released = threading.Event()
        self.lock = threading.Lock()
        self.requests = 0
        self.conns = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def url(self):
        return f"http://127.0.0.1:{self.port}/check"

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, rest = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v.strip())
                while len(rest) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    rest += chunk
                buf = rest[length:]
                with self.lock:
                    self.requests += 1
                self.released.wait()
                body = b'{"action": "allow"}'
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(body) + body)
        except OSError:
            return

    def count(self):
        with self.lock:
            return self.requests

    def close(self):
        self.released.set()
        self.sock.close()
        with self.lock:
            for c in self.conns:
                c.close()


@pytest.fixture
def webhook():
    w = HangingWebhook()
    yield w
    w.close()


def start(factory, pg, groups, extra):
    """A daemon with one SCRAM user per group, named after it."""
    overrides = pgwtest.deep_merge({"groups": groups, "pool": {"max_size": POOL_SIZE}}, extra)
    users = [{"name": g, "password": pgwtest.scram_verifier(f"{g}-pw"), "group": g}
             for g in groups]
    d = factory.start(pg, overrides=overrides, users=users, start=False)
    d.passwords.update({g: f"{g}-pw" for g in groups})
    d.start()
    return d


def raw_login(d, user):
    c = pgwtest.RawClient.tcp("127.0.0.1", d.port, timeout=30)
    c.login(user, d.passwords[user])
    return c


def running(pg, prefix):
    """pgwarden's server connections running a statement that starts with `prefix`."""
    return pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE usename = %s "
                     "AND state = 'active' AND query LIKE %s", (pgwtest.READER_ROLE, prefix + "%"))


@pytest.mark.parametrize("protocol", ["simple", "extended"])
def test_statements_waiting_for_a_webhook_hold_no_server_connection(pgwarden_factory, pg,
                                                                   webhook, protocol):
    waiting = POOL_SIZE * 3
    groups = {
        # The webhook first, then the cost gate: the EXPLAIN needs a connection again after the
        # webhook's answer, and gets one.
        "hooked": {"pool_mode": "transaction", "search_path": ["public"],
                   "guards": [dict(kind="http_webhook", url=webhook.url(), timeout_ms=120000),
                              dict(kind="cost_gate", tables=["public.pgbench_accounts"],
                                   max_cost=1000000000)]},
        "plain": {"pool_mode": "transaction", "guards": []},
    }
    d = start(pgwarden_factory, pg, groups, {"pool": {"acquire_timeout": "3s"}})
    clients = [raw_login(d, "hooked") for _ in range(waiting)]
    try:
        for i, c in enumerate(clients):
            if protocol == "simple":
                c.send_msg(b"Q", f"SELECT aid FROM pgbench_accounts WHERE aid = {i + 1}".encode()
                           + b"\0")
            else:
                c.send_extended("SELECT aid FROM pgbench_accounts WHERE aid = $1", (i + 1,))
                c.send_msg(b"S")
        # Every statement reached the webhook at once: three times as many as the pool has
        # connections, so none of them holds one while it waits.
        reached = pgwtest.wait_for(lambda: webhook.count() >= waiting, timeout=15)
        figure(f"statements waiting on the hanging webhook ({protocol}, pool of {POOL_SIZE})",
               webhook.count())
        assert reached, (webhook.count(), d.log()[-3000:])

        # Another group's client logs in and runs a statement meanwhile.
        r = pgwtest.psql(d.dsn(user="plain", password=d.passwords["plain"]), "-At", "-c",
                         "SELECT 'served'")
        assert r.returncode == 0 and r.stdout.strip() == "served", r.stderr + d.log()[-3000:]

        # The webhook answers: each statement takes a connection again and runs (three rounds
        # through the pool), with the cost gate's EXPLAIN on the connection it took.
        webhook.released.set()
        for i, c in enumerate(clients):
            if protocol == "simple":
                rows, tags, _ = c.read_query_result()
                assert rows == [(str(i + 1),)] and tags == ["SELECT 1"]
            else:
                rows, tags, _, errors, _ = c.read_sync_result()
                assert not errors and tags == ["SELECT 1"], errors
    finally:
        for c in clients:
            c.close()
    recs = pgwtest.history_rows(d, "user_name = 'hooked' AND outcome = 'ok'", want=waiting)
    assert len(recs) == waiting


def idle_servers(d):
    """Idle server connections."""
    return sum(v for (name, labels), v in samples(scrape(d)).items()
               if name == "pgwarden_server_connections" and ("state", "idle") in labels)


def stalled_client(d, user, sql):
    """A client with a small receive buffer that sends `sql` and never reads the answer."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(30)
    s.connect(("127.0.0.1", d.port))
    c = pgwtest.RawClient(s, 30)
    c.login(user, d.passwords[user])
    c.send_msg(b"Q", sql.encode() + b"\0")
    return c


def test_clients_that_stop_reading_lose_their_server_connection(pgwarden_factory, pg):
    groups = {"plain": {"guards": []}}
    d = start(pgwarden_factory, pg, groups,
              {"limits": {"client_stall_timeout": "2s"},
               "pool": {"acquire_timeout": "20s"},
               "upstream": {"statement_timeout": "10min"}})
    big = "SELECT repeat('x', 1000) AS pad, g FROM generate_series(1, 200000) g"  # 200 MB
    stalled = [stalled_client(d, "plain", big) for _ in range(POOL_SIZE)]
    try:
        # Each holds a server connection (session pool mode) whose results it does not take; the
        # server is held back for it. A new client waits for a connection, and gets one once
        # the stalled ones are closed (well within its 20 s acquire_timeout).
        began = time.monotonic()
        r = pgwtest.psql(d.dsn(user="plain", password=d.passwords["plain"]), "-At", "-c",
                         "SELECT 'served'", timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == "served", r.stderr + d.log()[-3000:]
        figure(f"a new client behind {POOL_SIZE} stalled ones: served after",
               round(time.monotonic() - began, 1), "s")

        recs = pgwtest.history_rows(d, "sql_text LIKE 'SELECT repeat%'", want=POOL_SIZE)
        assert len(recs) == POOL_SIZE
        for rec in recs:
            assert rec["outcome"] == "aborted" and rec["sqlstate"] == "08006", dict(rec)
            assert "client_stall_timeout" in rec["error_message"]
            assert rec["rows_returned"] > 0
        figure("stalled clients' statements: rows sent before the close",
               sorted(rec["rows_returned"] for rec in recs))
        figure("stalled clients' statements: seconds from start to close",
               sorted(round(rec["duration_us"] / 1e6, 1) for rec in recs))
        # The statements were cancelled on the server, and their connections came back to the
        # pool (drained and reset, not closed).
        assert pgwtest.wait_for(lambda: running(pg, "SELECT repeat") == 0, timeout=15)
        assert pgwtest.wait_for(lambda: idle_servers(d) >= POOL_SIZE, timeout=15), \
            idle_servers(d)
        s = samples(scrape(d))
        # psql was lent a connection a stalled client had held, drained and reset.
        assert s[("pgwarden_pool_reuse_total", frozenset())] >= 1
        assert s[("pgwarden_client_stall_closes_total", frozenset())] == POOL_SIZE
        assert "limits.client_stall_timeout" in d.log()
    finally:
        for c in stalled:
            c.close()
