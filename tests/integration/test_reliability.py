"""The reliability suite: the black-box probes of a hardening review, made repeatable and bounded
(loopback only, a minute or two in all). Hostile wire input with liveness, memory and descriptor
checks; slowloris at startup and on HTTP; a connection flood; PostgreSQL terminated, restarted and
stopped under load; reloads under load; SIGTERM with statements running. Each test prints the
figures docs/reliability.md quotes (run with -s to see them: lines starting `figure:`).

Select the suite with `-m reliability`; test_limits.py belongs to it too. The narrower cases
stay where they were: test_malformed.py (one hostile input at a time), test_upstream.py (one
fault, no load), test_daemon.py (one statement across SIGTERM)."""

import random
import signal
import socket
import struct
import threading
import time
import urllib.error
import urllib.request

import psycopg2
import pytest
import yaml

import pgwtest
from pgwtest import psql

pytestmark = pytest.mark.reliability

RSS_GROWTH_LIMIT_KIB = 16 * 1024


def figure(name, value, unit=""):
    print(f"figure: {name} = {value}{(' ' + unit) if unit else ''}")


def still_serving(d, retry_for=0.0):
    """A login and a statement succeed (within `retry_for` seconds of retrying, for a daemon that
    is still draining a flood)."""
    deadline = time.monotonic() + retry_for
    while True:
        r = psql(d.dsn(), "-At", "-c", "select 'alive'")
        if (r.returncode == 0 and r.stdout.strip() == "alive") or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    assert r.returncode == 0 and r.stdout.strip() == "alive", r.stderr + d.log()[-3000:]


def assert_rss_growth(before, after, limit_kib):
    """Memory bounds hold for the product build; a sanitizer build's RSS is mostly ASan's."""
    if not pgwtest.SANITIZED:
        assert after - before < limit_kib, (before, after)


def fds_settle(d, baseline, slack=4, timeout=15):
    """Waits for the daemon's open descriptors to come back to `baseline` (plus a few pooled
    server connections); returns the last count."""
    pgwtest.wait_for(lambda: d.open_fds() <= baseline + slack, timeout=timeout, interval=0.2)
    return d.open_fds()


def http_probe(port, path="/healthz", timeout=3):
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    return status, time.monotonic() - started


def error_kind(text):
    """A short name for an error without a SQLSTATE: the FATAL's words when there was one
    (libpq puts it in the message), else the first words."""
    if "FATAL:" in text:
        return "FATAL " + " ".join(text.split("FATAL:", 1)[1].split()[:6])
    return " ".join(text.split()[:5])


class Load:
    """`clients` psycopg2 sessions through pgwarden, each running `sql` in a loop; after an error
    a client reconnects (50 ms later). Counts successes and errors (by SQLSTATE, or by the
    first words of the message when there is none) and when each client last succeeded."""

    def __init__(self, daemon, clients=6, sql="select 1"):
        self.daemon, self.sql = daemon, sql
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.ok = 0
        self.errors = {}
        self.last_ok = [0.0] * clients
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(clients)]
        for t in self.threads:
            t.start()

    def _run(self, i):
        conn = None
        while not self.stopping.is_set():
            try:
                if conn is None:
                    conn = self.daemon.connect(connect_timeout=5)
                with conn.cursor() as cur:
                    cur.execute(self.sql)
                    cur.fetchall()
                with self.lock:
                    self.ok += 1
                    self.last_ok[i] = time.monotonic()
            except psycopg2.Error as e:
                kind = e.pgcode or error_kind(str(e))
                with self.lock:
                    self.errors[kind] = self.errors.get(kind, 0) + 1
                if conn is not None:
                    conn.close()
                    conn = None
                time.sleep(0.05)
        if conn is not None:
            conn.close()

    def error_count(self):
        with self.lock:
            return sum(self.errors.values())

    def all_ok_since(self, t0, timeout=20):
        """Seconds from t0 until every client has succeeded after t0, or None."""
        done = pgwtest.wait_for(lambda: min(self.last_ok) > t0, timeout=timeout, interval=0.02)
        return time.monotonic() - t0 if done else None

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(15)


# ---- hostile wire input ----------------------------------------------------------------------

def startup_packet(params, version=196608):
    body = struct.pack("!I", version)
    for k, v in params.items():
        body += k.encode() + b"\0" + v.encode() + b"\0"
    body += b"\0"
    return struct.pack("!I", len(body) + 4) + body


def message(tag, body):
    return tag + struct.pack("!I", len(body) + 4) + body


VALID_MESSAGES = [
    message(b"Q", b"select 1\0"),
    message(b"P", b"s1\0select $1::int\0" + struct.pack("!HI", 1, 23)),
    message(b"B", b"\0s1\0" + struct.pack("!HHIB", 0, 1, 1, 0x37) + struct.pack("!H", 0)),
    message(b"D", b"P\0"),
    message(b"E", b"\0" + struct.pack("!i", 0)),
    message(b"C", b"S\0s1\0"),
    message(b"H", b""),
    message(b"S", b""),
    message(b"d", b"copy data"),
    message(b"f", b"no copy\0"),
]


def mutate(rng, data):
    """One of: flipped bytes, a cut, a lying length, junk appended, or junk alone."""
    data = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.getrandbits(8)
    elif kind == 1:
        data = data[:rng.randrange(1, len(data))]
    elif kind == 2:
        at = 1 if data[:1].isalpha() else 0  # the length field of a message or startup packet
        data[at:at + 4] = struct.pack("!I", rng.choice([0, 3, 4, 5, 0x7FFFFFFF, 0xFFFFFFFF,
                                                        rng.getrandbits(32)]))
    elif kind == 3:
        data += bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))
    else:
        data = bytearray(rng.getrandbits(8) for _ in range(rng.randint(1, 200)))
    return bytes(data)


def send_and_wait_for_close(sock, data, timeout=5):
    """Sends `data`, ends the sending side and reads until pgwarden closes. False on a hang."""
    sock.settimeout(timeout)
    try:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    finally:
        sock.close()


def hostile_startup(d, rng):
    good = startup_packet({"user": "core", "database": pgwtest.DATABASE,
                           "application_name": "x" * rng.randint(0, 40)})
    sock = socket.create_connection(("127.0.0.1", d.port), timeout=5)
    return send_and_wait_for_close(sock, mutate(rng, good))


def hostile_after_login(d, rng):
    c = pgwtest.RawClient.unix(d.sockdir / f".s.PGSQL.{d.port}", 5)
    c.login("analyst")  # trust over the Unix socket: no password exchange to pay for
    msgs = [rng.choice(VALID_MESSAGES) for _ in range(rng.randint(1, 5))]
    bad = rng.randrange(len(msgs))
    msgs[bad] = mutate(rng, msgs[bad])
    return send_and_wait_for_close(c.sock, b"".join(msgs))


def test_hostile_wire_input_leaves_the_daemon_serving_with_bounded_memory(pgwarden):
    """2,000 malformed startup packets and post-login messages (seeded mutations of valid ones),
    each on its own connection: every one ends in an error or a close, never a hang; the daemon
    serves on, its memory stays bounded and its descriptors come back."""
    d = pgwarden
    rng = random.Random(20261201)
    still_serving(d)
    fds_before = d.open_fds()
    for _ in range(100):  # warm-up: pools, parse cache, allocator arenas
        hostile_startup(d, rng)
        hostile_after_login(d, rng)
    rss_before = d.rss_kib()
    started = time.monotonic()
    hangs = 0
    for i in range(1000):
        hangs += not hostile_startup(d, rng)
        hangs += not hostile_after_login(d, rng)
        if i % 250 == 0:
            assert d.alive(), d.log()[-3000:]
    elapsed = time.monotonic() - started
    still_serving(d)
    rss_after = d.rss_kib()
    fds_after = fds_settle(d, fds_before)
    figure("hostile inputs", 2000)
    figure("hostile inputs, seconds", round(elapsed, 1))
    figure("hostile inputs, RSS growth", rss_after - rss_before, "KiB")
    figure("hostile inputs, descriptors before/after", f"{fds_before}/{fds_after}")
    assert hangs == 0, f"{hangs} malformed inputs were neither answered nor closed in 5 s"
    assert_rss_growth(rss_before, rss_after, RSS_GROWTH_LIMIT_KIB)
    assert fds_after <= fds_before + 4


# ---- slowloris and floods ----------------------------------------------------------------------

class Dribbler(threading.Thread):
    """Sockets that each send their bytes one at a time, one every `pace` seconds, until the
    peer closes them. Counts the sockets the peer closed."""

    def __init__(self, socks, data, pace=0.2):
        super().__init__(daemon=True)
        self.socks, self.data, self.pace = list(socks), data, pace
        self.cut = 0
        self.stopping = threading.Event()
        self.start()

    def run(self):
        pos = 0
        live = list(self.socks)
        for s in live:
            s.setblocking(False)
        while live and not self.stopping.is_set():
            for s in list(live):
                try:
                    s.send(self.data[pos % len(self.data):pos % len(self.data) + 1])
                    try:
                        if s.recv(4096) == b"":
                            raise ConnectionResetError
                    except BlockingIOError:
                        pass
                except (ConnectionResetError, BrokenPipeError, OSError):
                    live.remove(s)
                    self.cut += 1
                    s.close()
            pos += 1
            time.sleep(self.pace)
        for s in live:
            s.close()


def test_slowloris_at_startup_and_on_http(pgwarden_factory, pg):
    """120 clients dribble a startup packet a byte at a time from eight addresses, 64 dribble
    HTTP headers: logins and health probes still succeed throughout, and every dribbler is cut
    (startup_timeout and metrics.read_timeout are 4 s here) without the daemon's help running
    out."""
    d = pgwarden_factory.start(pg, overrides={"limits": {"startup_timeout": "4s"},
                                              "metrics": {"read_timeout": "4s"}})
    d.connect().close()
    fds_before = d.open_fds()
    pg_socks = []
    for i in range(120):
        s = socket.socket()
        s.bind((f"127.0.0.{2 + i % 8}", 0))
        s.connect(("127.0.0.1", d.port))
        pg_socks.append(s)
    http_socks = [socket.create_connection(("127.0.0.1", d.metrics_port)) for _ in range(64)]
    started = time.monotonic()
    startup = startup_packet({"user": "core", "database": pgwtest.DATABASE,
                              "application_name": "slowloris" * 4})
    pg_drip = Dribbler(pg_socks, startup)
    http_drip = Dribbler(http_socks, b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"s" * 200)
    # Connections that have not logged in make room once they are a second old.
    time.sleep(1.1)
    logins = probes = 0
    worst_login = worst_probe = 0.0
    try:
        while time.monotonic() - started < 6:
            t = time.monotonic()
            conn = d.connect(connect_timeout=5)
            conn.close()
            worst_login = max(worst_login, time.monotonic() - t)
            logins += 1
            status, took = http_probe(d.metrics_port)
            assert status == 200
            worst_probe = max(worst_probe, took)
            probes += 1
            time.sleep(0.2)
        all_cut = pgwtest.wait_for(lambda: pg_drip.cut == 120 and http_drip.cut == 64,
                                   timeout=10)
        cut_after = time.monotonic() - started
    finally:
        pg_drip.stopping.set()
        http_drip.stopping.set()
        pg_drip.join(5)
        http_drip.join(5)
    fds_after = fds_settle(d, fds_before)
    figure("slowloris logins during the attack", logins)
    figure("slowloris worst login", round(worst_login * 1000), "ms")
    figure("slowloris worst /healthz", round(worst_probe * 1000), "ms")
    figure("slowloris every dribbler cut after", round(cut_after, 1), "s")
    assert all_cut, f"still connected: {120 - pg_drip.cut} startup, {64 - http_drip.cut} HTTP"
    assert fds_after <= fds_before + 4
    still_serving(d)


def flood(d, churn_each=750, held_count=300):
    """Four threads open and drop `churn_each` connections each as fast as they can (a third
    after an SSLRequest, half with RST) while `held_count` connections from 127.0.0.2 are held
    open; logins still succeed meanwhile. Returns the connection failures seen."""
    failures = []

    def churn(seed):
        rng = random.Random(seed)
        for _ in range(churn_each):
            try:
                s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
                if rng.random() < 0.3:
                    s.sendall(struct.pack("!II", 8, 80877103))  # SSLRequest
                if rng.random() < 0.5:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            except OSError as e:
                failures.append(repr(e))

    workers = [threading.Thread(target=churn, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    held = []
    for _ in range(held_count):
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.settimeout(5)
        s.connect(("127.0.0.1", d.port))
        held.append(s)
    for w in workers:
        w.join(60)
    # Logins go on while the 300 are held (they get no more than their address's share). A
    # sanitizer build may still be working through the churned connections' closes.
    still_serving(d, retry_for=20 if pgwtest.SANITIZED else 0)
    for s in held:
        s.close()
    return failures


def test_connection_flood(pgwarden):
    """Three rounds of 3,300 connections: 3,000 opened and dropped at once, 300 held open from
    another address. The daemon serves on and gives every descriptor back; its memory levels
    off (the allocator keeps what the first rounds needed) and the third round adds nothing."""
    d = pgwarden
    still_serving(d)
    fds_before = d.open_fds()
    rss_start = d.rss_kib()
    failures = flood(d) + flood(d)
    fds_settle(d, fds_before)
    rss_before = d.rss_kib()
    started = time.monotonic()
    failures += flood(d)
    elapsed = time.monotonic() - started
    fds_after = fds_settle(d, fds_before)
    rss_after = d.rss_kib()
    figure("flood connections per round", 3300)
    figure("flood round seconds", round(elapsed, 1))
    figure("flood RSS after two rounds", rss_before - rss_start, "KiB")
    figure("flood RSS growth in the third round", rss_after - rss_before, "KiB")
    assert not failures, failures[:5]
    assert fds_after <= fds_before + 4
    assert_rss_growth(rss_before, rss_after, 3 * 1024)
    still_serving(d)


# ---- the upstream under load ---------------------------------------------------------------------

def test_upstream_terminate_restart_and_stop_under_load(pg_factory, pgwarden_factory):
    """Six clients run statements nonstop while PostgreSQL's backends are terminated, then the
    server is restarted, then stopped for two seconds and started again. Each time the clients
    get errors and reconnect; the same daemon process serves them all again."""
    own = pg_factory(rows=100)
    d = pgwarden_factory.start(own)
    pid = d.proc.pid
    load = Load(d, clients=6)
    recovery = {}
    try:
        assert load.all_ok_since(time.monotonic()) is not None, d.log()[-3000:]
        t0 = time.monotonic()
        terminated = own.scalar("select count(pg_terminate_backend(pid)) from pg_stat_activity "
                                "where usename = %s", (pgwtest.READER_ROLE,))
        assert terminated >= 1
        recovery["terminate"] = load.all_ok_since(t0)
        t0 = time.monotonic()
        own.restart("fast")
        recovery["restart"] = load.all_ok_since(t0)
        own.stop("fast")
        time.sleep(2)
        down = load.error_count()
        t0 = time.monotonic()
        own.start()
        recovery["stop and start"] = load.all_ok_since(t0)
        time.sleep(0.5)
    finally:
        load.stop()
    for name, took in recovery.items():
        figure(f"upstream {name}: every client served again after",
               None if took is None else round(took, 2), "s")
    figure("upstream statements served", load.ok)
    figure("upstream client errors by kind", dict(sorted(load.errors.items())))
    assert all(took is not None for took in recovery.values()), (recovery, d.log()[-3000:])
    assert d.alive() and d.proc.pid == pid
    assert down > 0, "the clients saw no error while the server was down"
    still_serving(d)


def test_reload_under_load(pgwarden_factory, pg):
    """Twenty SIGHUPs, one of them with a broken file, while four clients run statements: not one
    statement fails, and history holds every statement the clients were answered."""
    d = pgwarden_factory.start(pg)
    load = Load(d, clients=4, sql="select 'reload-load'")
    good = yaml.safe_dump(d.config, sort_keys=False)
    try:
        assert load.all_ok_since(time.monotonic()) is not None
        for i in range(20):
            if i == 10:
                d.write_config(good + "not_a_key: 1\n")
            else:
                d.config["limits"]["client_idle_timeout"] = "1h" if i % 2 else "0"
                row_limit = next(g for g in d.config["groups"]["agents"]["guards"]
                                 if g["kind"] == "row_limit")
                row_limit["max_rows"] = 1000 + i
                d.write_config()
            d.send_signal(signal.SIGHUP)
            time.sleep(0.15)
        time.sleep(0.3)
    finally:
        load.stop()
    log = d.log()
    figure("reload statements served across 20 reloads", load.ok)
    assert load.errors == {}, load.errors
    assert log.count("configuration reloaded") == 19, log[-3000:]
    assert log.count("reload rejected") == 1
    rows = pgwtest.history_rows(d, "sql_text = 'select ''reload-load'''", want=load.ok, timeout=20)
    assert len(rows) == load.ok
    assert all(r["outcome"] == "ok" for r in rows)
    still_serving(d)


def run_one(d, sql):
    conn = d.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchone()
    finally:
        conn.close()


def error_for(d, sql):
    """Runs `sql` on a raw connection and returns the ErrorResponse that ends it (psycopg2 would
    only say the server closed the connection, whatever the FATAL before it said)."""
    with d.raw(timeout=30) as c:
        c.login("core", d.passwords["core"])
        if sql:
            c.send_msg(b"Q", sql.encode() + b"\0")
        return c.read_until_closed_or_error()


def test_sigterm_with_statements_running(pgwarden_factory, pg):
    """SIGTERM while ten statements run: the eight that end within shutdown_timeout (3 s) return
    their rows, the two that would not get a clean FATAL 57P01, idle clients are told at once;
    the exit code is 0 and history holds every statement with how it ended."""
    d = pgwarden_factory.start(pg, overrides={"limits": {"shutdown_timeout": "3s"}})
    short = [pgwtest.Background(run_one, d, f"select pg_sleep(1), 'short-{i}'") for i in range(8)]
    long = [pgwtest.Background(error_for, d, f"select pg_sleep(30), 'long-{i}'") for i in range(2)]
    idle = [pgwtest.Background(error_for, d, None) for _ in range(3)]
    assert pgwtest.wait_for(lambda: pg.scalar(
        "select count(*) from pg_stat_activity where query like 'select pg_sleep(%'") == 10), \
        d.log()[-3000:]
    started = time.monotonic()
    d.send_signal(signal.SIGTERM)
    code = d.wait_exit(20)
    took = time.monotonic() - started
    for b in short + long + idle:
        b.join(10)
    figure("sigterm exit after", round(took, 2), "s")
    assert code == 0, d.log()[-3000:]
    for i, b in enumerate(short):
        assert b.error is None and b.result[1] == f"short-{i}", (b.result, b.error)
    for b in long:
        assert b.error is None and b.result is not None, (b.result, b.error)
        assert b.result["S"] == "FATAL" and b.result["C"] == "57P01", b.result
        assert "did not finish within limits.shutdown_timeout" in b.result["M"], b.result
    for b in idle:
        assert b.error is None and b.result is not None, (b.result, b.error)
        assert b.result["C"] == "57P01" and "shutting down" in b.result["M"], b.result
    rows = pgwtest.history_rows(d, "sql_text LIKE 'select pg_sleep(%'", want=10)
    outcomes = sorted((r["sql_text"].split("'")[1], r["outcome"], r["sqlstate"] or "")
                      for r in rows)
    assert outcomes == sorted([(f"long-{i}", "aborted", "57P01") for i in range(2)]
                              + [(f"short-{i}", "ok", "") for i in range(8)]), outcomes
