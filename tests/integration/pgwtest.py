"""Building blocks of the integration tests: a throwaway PostgreSQL 15 cluster, the real pgwarden
daemon started from a config derived from packaging/pgwarden.yaml, and clients (psql, pgbench,
psycopg2, JDBC, and a raw v3 protocol client for what no driver will send).

Everything here picks free ports, keeps its files in a temp directory, and stops what it started.
"""

import base64
import copy
import hashlib
import hmac
import os
import pathlib
import pwd
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

import psycopg2
import pytest
import yaml

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE_CONFIG = REPO_ROOT / "packaging" / "pgwarden.yaml"
SAMPLE_SQL = REPO_ROOT / "scripts" / "fct_shipments.sql"
PG_BIN = pathlib.Path(os.environ.get("PGW_PGBIN", "/usr/lib/postgresql/15/bin"))
JDBC_JAR = pathlib.Path("/usr/share/java/postgresql.jar")

SUPERUSER_PASSWORD = "super-" + secrets.token_hex(8)
# Daemon defects the suite knows about. A test that exists to show one is marked
# xfail(strict=True, reason=KNOWN_BUGS[...]) so that it fails the day the defect is fixed, and the
# entry (and whatever works around it below) must then go.
KNOWN_BUGS = {}

READER_ROLE = "pgwarden_reader"
READER_PASSWORD = "reader-" + secrets.token_hex(8)
DATABASE = "analytics"


def require_tool(reason):
    """Fails the calling test (or fixture) for want of a tool. Never a skip: a skipped test has not
    run, and scripts/deps installs every tool the suite uses."""
    pytest.fail(f"{reason} (scripts/deps installs it)", pytrace=False)


# The daemon under test is a sanitizer build (scripts/test's second stage sets this): its memory
# figures measure ASan's quarantine and shadow memory, and it runs a few times slower, so the
# tests that bound memory or race a flood report those figures without asserting them.
SANITIZED = os.environ.get("PGWARDEN_SANITIZED", "") == "1"
# PGWARDEN_TEST_WORKERS=N: every daemon of the run on N worker loops (scripts/test's multi-loop pass).
TEST_WORKERS = int(os.environ.get("PGWARDEN_TEST_WORKERS", "1") or "1")


# The first line of an AddressSanitizer, LeakSanitizer or UndefinedBehaviorSanitizer report.
SANITIZER_REPORT = re.compile(r"^==\d+==ERROR: (Address|Leak)Sanitizer|^\S+:\d+:\d+: runtime error: ",
                              re.M)


def sanitizer_report(log):
    """The first sanitizer report in a daemon's log (a daemon built with PGWARDEN_SANITIZE, as
    scripts/test's second stage runs the suite), with what follows it; "" when there is none."""
    m = SANITIZER_REPORT.search(log)
    return "" if m is None else log[m.start():m.start() + 6000]


def is_root():
    return os.geteuid() == 0


_PORTS_GIVEN = set()


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now (chosen by the kernel), and
    that this process has not handed out before: the kernel may offer a port again once the probe
    socket is closed, and two ports of one daemon's config (its listener and its metrics) must
    differ."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _PORTS_GIVEN:
            _PORTS_GIVEN.add(port)
            return port
    raise RuntimeError("no free TCP port that was not handed out already")


def make_tempdir(prefix):
    """A temp directory the cluster owner can use: as root, it is handed to `postgres`."""
    path = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    if is_root():
        pw = pwd.getpwnam("postgres")
        os.chown(path, pw.pw_uid, pw.pw_gid)
    path.chmod(0o755)
    return path


def as_pg_user(argv):
    """initdb and postgres refuse to run as root: run them as the `postgres` OS user then."""
    if is_root():
        return ["runuser", "-u", "postgres", "--"] + list(argv)
    return list(argv)


def pg_env(password=None):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("PG"):
            del env[k]
    if password is not None:
        env["PGPASSWORD"] = password
    env["PGCONNECT_TIMEOUT"] = "10"
    return env


# --------------------------------------------------------------------------------------------
# SCRAM-SHA-256 (RFC 5802 / RFC 7677), independent of pgwarden's own implementation, so that the
# tests check the daemon against the standard rather than against itself.

def _hmac(key, msg):
    return hmac.new(key, msg, hashlib.sha256).digest()


def scram_verifier(password, salt=None, iterations=4096):
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    stored = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    server = _hmac(salted, b"Server Key")
    b64 = lambda b: base64.b64encode(b).decode()
    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored)}:{b64(server)}"


def scram_verifier_matches(verifier, password):
    """True when `verifier` (SCRAM-SHA-256$iter:salt$stored:server) was made from `password`."""
    head, keys = verifier.split("$", 2)[1:]
    iterations, salt = head.split(":")
    expected = scram_verifier(password, base64.b64decode(salt), int(iterations))
    return expected.split("$", 1)[1] == f"{head}${keys}"


def md5_hash(password, user):
    return "md5" + hashlib.md5((password + user).encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# PostgreSQL

class PgCluster:
    """A PostgreSQL 15 cluster made with initdb in a temp dir, listening on 127.0.0.1 on a free
    port and on a socket in the temp dir, scram-sha-256 everywhere, every statement logged."""

    def __init__(self, prefix="pgw-pg-"):
        self.dir = make_tempdir(prefix)
        self.data = self.dir / "data"
        self.sockdir = self.dir / "sock"
        self.logfile = self.dir / "postgres.log"
        self.port = free_port()
        self.running = False

    def init(self):
        sockdir = self.sockdir
        sockdir.mkdir()
        pwfile = self.dir / "superuser.pw"
        pwfile.write_text(SUPERUSER_PASSWORD + "\n")
        if is_root():
            pw = pwd.getpwnam("postgres")
            for p in (sockdir, pwfile):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        pwfile.chmod(0o600)
        subprocess.run(
            as_pg_user([PG_BIN / "initdb", "-D", self.data, "-U", "postgres", f"--pwfile={pwfile}",
                        "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"]),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
        pwfile.unlink()
        with open(self.data / "postgresql.conf", "a") as f:
            f.write(f"""
listen_addresses = '127.0.0.1'
port = {self.port}
unix_socket_directories = '{sockdir}'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
log_statement = 'all'
log_connections = on
log_disconnections = on
log_line_prefix = '%m [%p] %q%u@%d app=%a '
""")
        return self

    def start(self):
        subprocess.run(
            as_pg_user([PG_BIN / "pg_ctl", "-D", self.data, "-l", self.logfile, "-w", "-t", "60",
                        "start"]),
            check=True, stdout=subprocess.DEVNULL, timeout=90)
        self.running = True

    def stop(self, mode="fast"):
        if (self.data / "postmaster.pid").exists():
            subprocess.run(
                as_pg_user([PG_BIN / "pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60", "stop"]),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=90)
        self.running = False

    def restart(self, mode="fast"):
        self.stop(mode)
        self.start()

    def destroy(self):
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- superuser access, straight to the server (never through pgwarden)
    def connect(self, dbname=DATABASE, user="postgres", password=SUPERUSER_PASSWORD, **kw):
        conn = psycopg2.connect(host="127.0.0.1", port=self.port, dbname=dbname, user=user,
                                password=password, connect_timeout=10, **kw)
        conn.autocommit = True
        return conn

    def execute(self, sql, params=None, dbname=DATABASE):
        conn = self.connect(dbname)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else None
        finally:
            conn.close()

    def scalar(self, sql, params=None, dbname=DATABASE):
        return self.execute(sql, params, dbname)[0][0]

    # -- the server log, to prove what did or did not reach the server
    def log_offset(self):
        return self.logfile.stat().st_size if self.logfile.exists() else 0

    def log_since(self, offset=0):
        with open(self.logfile, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")

    def load_fixture_data(self, rows=200_000):
        """fct_shipments (the demo's table, smaller), pgbench tables, and a scratch table the
        reader role could write to if the session were not read-only."""
        self.execute(f"CREATE DATABASE {DATABASE}", dbname="postgres")
        subprocess.run(
            ["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
             "-d", DATABASE, "-v", "ON_ERROR_STOP=1", "-v", f"rows={rows}",
             "-v", f"reader={READER_ROLE}", "-v", f"reader_password={READER_PASSWORD}",
             "-f", SAMPLE_SQL],
            check=True, env=pg_env(SUPERUSER_PASSWORD), stdout=subprocess.DEVNULL, timeout=300)
        subprocess.run(
            ["pgbench", "-i", "-s", "1", "-q", "-h", "127.0.0.1", "-p", str(self.port),
             "-U", "postgres", DATABASE],
            check=True, env=pg_env(SUPERUSER_PASSWORD), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, timeout=300)
        self.execute(f"""
            CREATE TABLE scratch (id int PRIMARY KEY, note text);
            INSERT INTO scratch VALUES (1, 'seed');
            GRANT ALL ON scratch TO {READER_ROLE};
            GRANT SELECT ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history
                TO {READER_ROLE};
            CREATE FUNCTION pgw_notice(msg text) RETURNS int LANGUAGE plpgsql AS
                $$ BEGIN RAISE NOTICE '%', msg; RETURN 1; END $$;
        """)


# --------------------------------------------------------------------------------------------
# pgwarden

def deep_merge(base, over):
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            deep_merge(base[k], v)
        else:
            base[k] = v
    return base


class Pgwarden:
    """The real daemon, run in the foreground with its log captured to a file."""

    def __init__(self, binary, pg, overrides=None, users=None, prefix="pgw-d-"):
        self.binary = str(binary)
        self.pg = pg
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
        self.dir.chmod(0o755)
        self.sockdir = self.dir / "sock"
        self.sockdir.mkdir()
        self.port = free_port()
        self.metrics_port = free_port()
        self.config_path = self.dir / "pgwarden.yaml"
        self.logfile = self.dir / "pgwarden.log"
        self.proc = None
        self.stopped_by_test = False
        self.passwords = {}  # user -> client password
        self.config = self._make_config(overrides or {}, users)
        self.write_config()

    def _make_config(self, overrides, users):
        cfg = yaml.safe_load(EXAMPLE_CONFIG.read_text())
        pwfile = self.dir / "upstream.password"
        pwfile.write_text(READER_PASSWORD + "\n")
        pwfile.chmod(0o600)
        cfg["listen"] = {"addresses": [f"127.0.0.1:{self.port}"],
                         "unix_socket_dir": str(self.sockdir)}
        upstream = cfg["upstream"]
        upstream.pop("password", None)
        upstream.update(host="127.0.0.1", port=self.pg.port, user=READER_ROLE,
                        password_file=str(pwfile), connect_timeout="3s", login_retry="1s")
        cfg["limits"].update(startup_timeout="5s", shutdown_timeout="5s")
        # Tests log in and fail to log in often from 127.0.0.1: only the rate-limit test lowers this.
        cfg["auth"]["failed_attempts_per_minute"] = 10000
        cfg["auth"]["failed_attempts_per_address"] = 100000
        cfg["metrics"]["listen"] = f"127.0.0.1:{self.metrics_port}"
        cfg["history"] = {"store": "sqlite", "path": str(self.dir / "history.db")}
        # The salt key (and anything else that must outlive the process) stays in the temp dir.
        cfg.setdefault("daemon", {})["state_dir"] = str(self.dir)
        # PGWARDEN_TEST_WORKERS=N runs every daemon of a test run with N loops (scripts/test runs
        # the multi-loop tests this way too; the first pass keeps one, whatever the host's CPUs);
        # a test's own overrides still win.
        cfg["daemon"]["workers"] = TEST_WORKERS
        if users is None:
            self.passwords = {u: f"{u}-" + secrets.token_hex(6) for u in ("agent", "core", "md5user")}
            users = [
                # The example's guarded group, as an agent would meet it.
                {"name": "agent", "password": scram_verifier(self.passwords["agent"]),
                 "group": "agents"},
                # No guards at all: the protocol core and the read-only server session alone.
                {"name": "core", "password": scram_verifier(self.passwords["core"]),
                 "group": "passthrough"},
                {"name": "analyst", "method": "trust", "group": "analysts"},
                {"name": "md5user", "password": md5_hash(self.passwords["md5user"], "md5user"),
                 "group": "analysts"},
            ]
            cfg["groups"]["passthrough"] = {"guards": []}
        cfg["users"] = users
        return deep_merge(cfg, copy.deepcopy(overrides))

    def write_config(self, text=None):
        """Writes the config (or `text`) in one step, so a reload never reads half a file."""
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(text if text is not None else yaml.safe_dump(self.config, sort_keys=False))
        os.replace(tmp, self.config_path)

    def start(self, timeout=20):
        self._log = open(self.logfile, "ab")
        self.proc = subprocess.Popen([self.binary, "--config", str(self.config_path)],
                                     stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stopped_by_test = True  # reported here; teardown need not say it again
                raise RuntimeError(f"pgwarden exited with {self.proc.returncode} at start:\n"
                                   + self.log())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                # The SQL port takes connections as soon as it listens, before the loop runs;
                # the metrics endpoint is bound just after it: wait for that one too.
                metrics_at = str((self.config.get("metrics") or {}).get("listen") or "")
                host, _, port = metrics_at.rpartition(":")
                if port.isdigit() and int(port) > 0 and host in ("127.0.0.1", "localhost"):
                    socket.create_connection(("127.0.0.1", int(port)), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        self.stopped_by_test = True
        raise RuntimeError("pgwarden did not accept connections in time:\n" + self.log())

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=15, by_test=False):
        """Stops the daemon and returns its exit code (None if it had to be killed)."""
        self.stopped_by_test |= by_test
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
        self._log.close()
        return self.proc.returncode

    def wait_exit(self, timeout):
        """Waits for the daemon to exit after a signal the test sent; returns the exit code or
        None (then it is killed)."""
        self.stopped_by_test = True
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self):
        """SIGKILL to the daemon's whole process group (it was started in a session of its own)."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)

    def destroy(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self):
        return self.logfile.read_text(errors="replace") if self.logfile.exists() else ""

    # -- the process as the kernel sees it
    def rss_kib(self):
        """Resident memory of the daemon (VmRSS from /proc), in KiB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS in /proc status")

    def open_fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    # -- client connection strings
    def dsn(self, user="core", dbname=DATABASE, password=None, host="127.0.0.1", **extra):
        parts = {"host": host, "port": self.port, "dbname": dbname, "user": user,
                 "connect_timeout": 10}
        pw = password if password is not None else self.passwords.get(user)
        if pw is not None:
            parts["password"] = pw
        parts.update(extra)
        return " ".join(f"{k}='{_escape_conninfo(v)}'" for k, v in parts.items())

    def connect(self, user="core", password=None, unix=False, autocommit=True, **extra):
        host = str(self.sockdir) if unix else "127.0.0.1"
        conn = psycopg2.connect(self.dsn(user=user, password=password, host=host, **extra))
        conn.autocommit = autocommit
        return conn

    def raw(self, unix=False, timeout=10):
        if unix:
            return RawClient.unix(self.sockdir / f".s.PGSQL.{self.port}", timeout)
        return RawClient.tcp("127.0.0.1", self.port, timeout)


def _escape_conninfo(v):
    return str(v).replace("\\", "\\\\").replace("'", "\\'")


# --------------------------------------------------------------------------------------------
# command-line clients

def psql(dsn, *args, input=None, timeout=60, password=None, check=False):
    """Runs psql with a conninfo string; returns the CompletedProcess (text mode)."""
    cmd = ["psql", "-X", "--no-psqlrc", "-v", "ON_ERROR_STOP=1", *args, "-d", dsn]
    return subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout,
                          env=pg_env(password), check=check)


def run_pgbench(dsn_args, mode, clients=4, seconds=3, password=None, timeout=120):
    cmd = ["pgbench", "-n", "-S", "-M", mode, "-c", str(clients), "-j", "2", "-T", str(seconds),
           *dsn_args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=pg_env(password))


# --------------------------------------------------------------------------------------------
# JDBC

class JavaRunner:
    """Compiles the JDBC programs in tests/integration/java once per test session and runs them."""

    SOURCES = pathlib.Path(__file__).resolve().parent / "java"

    def __init__(self):
        self.classes = pathlib.Path(tempfile.mkdtemp(prefix="pgw-java-"))
        sources = sorted(str(p) for p in self.SOURCES.glob("*.java"))
        subprocess.run(["javac", "-d", str(self.classes), "-cp", str(JDBC_JAR), *sources],
                       check=True, capture_output=True, text=True, timeout=180)

    def run(self, main, *args, timeout=120):
        cp = f"{self.classes}:{JDBC_JAR}"
        return subprocess.run(["java", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                               "-cp", cp, main, *map(str, args)],
                              capture_output=True, text=True, timeout=timeout)

    def destroy(self):
        shutil.rmtree(self.classes, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# A raw v3 protocol client, for startup parameters libpq will not send, malformed packets and
# exact SQLSTATEs. https://www.postgresql.org/docs/15/protocol-message-formats.html

class ProtocolError(Exception):
    pass


def parse_fields(body):
    """ErrorResponse / NoticeResponse body -> {'S': 'FATAL', 'C': '28P01', 'M': ...}."""
    fields = {}
    for part in body.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode("utf-8", "replace")
    return fields


class ServerError(Exception):
    def __init__(self, fields):
        self.fields = fields
        super().__init__(f"{fields.get('S')} {fields.get('C')}: {fields.get('M')}")

    @property
    def sqlstate(self):
        return self.fields.get("C")

    @property
    def message(self):
        return self.fields.get("M", "")


class RecordingSocket:
    """A socket that keeps every byte it receives: what a test checks no secret reaches."""

    def __init__(self, sock):
        self.sock, self.received = sock, bytearray()

    def recv(self, n):
        data = self.sock.recv(n)
        self.received += data
        return data

    def __getattr__(self, name):
        return getattr(self.sock, name)


class RawClient:
    def __init__(self, sock, timeout):
        self.sock = sock
        self.sock.settimeout(timeout)
        self.buf = b""
        self.params = {}
        self.backend_key = None

    @classmethod
    def tcp(cls, host, port, timeout=10):
        return cls(socket.create_connection((host, port), timeout=timeout), timeout)

    @classmethod
    def unix(cls, path, timeout=10):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(str(path))
        return cls(s, timeout)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- writing
    def send(self, data):
        self.sock.sendall(data)

    def send_tolerant(self, data):
        """Sends what it can: the peer may already have rejected an earlier message and closed."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def shutdown_write(self):
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:  # already closed by the peer
            pass

    def send_startup(self, params, version=196608):
        body = struct.pack("!I", version)
        for k, v in params.items():
            body += k.encode() + b"\0" + v.encode() + b"\0"
        body += b"\0"
        self.send(struct.pack("!I", len(body) + 4) + body)

    def send_msg(self, tag, body=b"", tolerant=False):
        data = tag + struct.pack("!I", len(body) + 4) + body
        (self.send_tolerant if tolerant else self.send)(data)

    # -- reading
    def _fill(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed by pgwarden")
            self.buf += chunk

    def read_byte(self):
        self._fill(1)
        b, self.buf = self.buf[:1], self.buf[1:]
        return b

    def read_msg(self):
        """Returns (tag, body); raises EOFError when the peer closed the connection."""
        self._fill(5)
        tag = self.buf[:1]
        (length,) = struct.unpack("!I", self.buf[1:5])
        if length < 4 or length > 64 * 1024 * 1024:
            raise ProtocolError(f"bad length {length} for message {tag!r}")
        self._fill(1 + length)
        body = self.buf[5:1 + length]
        self.buf = self.buf[1 + length:]
        return tag, body

    def read_until_closed_or_error(self):
        """Reads until an ErrorResponse (returned as fields) or EOF (returns None)."""
        try:
            while True:
                tag, body = self.read_msg()
                if tag == b"E":
                    return parse_fields(body)
        except (EOFError, ConnectionResetError):
            return None

    def closed_by_peer(self, timeout=5):
        """True when the peer closes the connection (after any pending messages) within timeout."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    # -- authentication
    def login(self, user, password=None, database=DATABASE, extra=None):
        """Startup plus authentication (SCRAM-SHA-256, md5, cleartext or none) up to the first
        ReadyForQuery. Raises ServerError on an ErrorResponse."""
        params = {"user": user, "database": database}
        params.update(extra or {})
        self.send_startup(params)
        return self.finish_login(user, password)

    def finish_login(self, user, password):
        notices = []
        while True:
            tag, body = self.read_msg()
            if tag == b"R":
                (code,) = struct.unpack("!I", body[:4])
                if code == 0:
                    continue
                if code == 3:
                    self.send_msg(b"p", password.encode() + b"\0")
                elif code == 5:
                    inner = hashlib.md5((password + user).encode()).hexdigest()
                    outer = hashlib.md5(inner.encode() + body[4:8]).hexdigest()
                    self.send_msg(b"p", b"md5" + outer.encode() + b"\0")
                elif code == 10:
                    self._scram(body[4:], password)
                else:
                    raise ProtocolError(f"unexpected authentication request {code}")
            elif tag == b"S":
                k, v, _ = body.split(b"\0", 2)
                self.params[k.decode()] = v.decode()
            elif tag == b"K":
                self.backend_key = struct.unpack("!II", body)
            elif tag == b"N":
                notices.append(parse_fields(body))
            elif tag == b"E":
                raise ServerError(parse_fields(body))
            elif tag == b"Z":
                return notices
            else:
                raise ProtocolError(f"unexpected message {tag!r} during login")

    def _scram(self, mechanisms, password):
        if b"SCRAM-SHA-256\0" not in mechanisms:
            raise ProtocolError(f"no SCRAM-SHA-256 in {mechanisms!r}")
        nonce = base64.b64encode(secrets.token_bytes(18)).decode()
        client_first_bare = f"n=,r={nonce}"
        first = ("n,," + client_first_bare).encode()
        self.send_msg(b"p", b"SCRAM-SHA-256\0" + struct.pack("!I", len(first)) + first)
        tag, body = self.read_msg()
        if tag == b"E":
            raise ServerError(parse_fields(body))
        (code,) = struct.unpack("!I", body[:4])
        if tag != b"R" or code != 11:
            raise ProtocolError(f"expected SASLContinue, got {tag!r} {code}")
        server_first = body[4:].decode()
        attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
        if not attrs["r"].startswith(nonce):
            raise ProtocolError("server nonce does not extend the client nonce")
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]),
                                     int(attrs["i"]))
        client_key = _hmac(salted, b"Client Key")
        stored_key = hashlib.sha256(client_key).digest()
        final_no_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{client_first_bare},{server_first},{final_no_proof}".encode()
        signature = _hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self.send_msg(b"p", f"{final_no_proof},p={base64.b64encode(proof).decode()}".encode())
        tag, body = self.read_msg()
        if tag == b"E":
            raise ServerError(parse_fields(body))
        (code,) = struct.unpack("!I", body[:4])
        if tag != b"R" or code != 12:
            raise ProtocolError(f"expected SASLFinal, got {tag!r} {code}")
        server_sig = base64.b64encode(_hmac(_hmac(salted, b"Server Key"), auth_message)).decode()
        if body[4:].decode() != f"v={server_sig}":
            raise ProtocolError("server signature does not verify")

    # -- simple query
    def query(self, sql):
        """Runs one simple Query; returns (rows, command_tags, notices); raises ServerError."""
        self.send_msg(b"Q", sql.encode() + b"\0")
        return self.read_query_result()

    def read_query_result(self):
        """The answer to a simple Query already sent, up to ReadyForQuery: (rows, command_tags,
        notices); raises ServerError."""
        rows, tags, notices, error = [], [], [], None
        while True:
            tag, body = self.read_msg()
            if tag == b"D":
                (n,) = struct.unpack("!H", body[:2])
                pos, row = 2, []
                for _ in range(n):
                    (ln,) = struct.unpack("!i", body[pos:pos + 4])
                    pos += 4
                    if ln < 0:
                        row.append(None)
                    else:
                        row.append(body[pos:pos + ln].decode())
                        pos += ln
                rows.append(tuple(row))
            elif tag == b"C":
                tags.append(body.rstrip(b"\0").decode())
            elif tag == b"N":
                notices.append(parse_fields(body))
            elif tag == b"E":
                error = parse_fields(body)
            elif tag == b"Z":
                if error:
                    raise ServerError(error)
                return rows, tags, notices
            elif tag == b"S":
                k, v, _ = body.split(b"\0", 2)
                self.params[k.decode()] = v.decode()

    # -- extended protocol
    def send_extended(self, sql, params=(), name=""):
        """Parse, Bind (text parameters), Describe portal and Execute (no row limit) of one
        statement in the unnamed portal; no Sync, so several can share one batch."""
        self.send_msg(b"P", name.encode() + b"\0" + sql.encode() + b"\0" + struct.pack("!H", 0))
        bind = b"\0" + name.encode() + b"\0" + struct.pack("!HH", 0, len(params))
        for p in params:
            if p is None:
                bind += struct.pack("!i", -1)
            else:
                raw = str(p).encode()
                bind += struct.pack("!i", len(raw)) + raw
        self.send_msg(b"B", bind + struct.pack("!H", 0))
        self.send_msg(b"D", b"P\0")
        self.send_msg(b"E", b"\0" + struct.pack("!i", 0))

    def sync(self):
        """Sends Sync and reads up to ReadyForQuery. Returns (rows, tags, notices, errors, tags
        of every message received): a batch may hold several statements, and after an error the
        server (or pgwarden) skips the rest up to the Sync."""
        self.send_msg(b"S")
        return self.read_sync_result()

    def read_sync_result(self):
        """The answer to a batch whose Sync was already sent, as sync() returns it."""
        rows, tags, notices, errors, seen = [], [], [], [], []
        while True:
            tag, body = self.read_msg()
            seen.append(tag)
            if tag == b"D":
                rows.append(body)
            elif tag == b"C":
                tags.append(body.rstrip(b"\0").decode())
            elif tag == b"N":
                notices.append(parse_fields(body))
            elif tag == b"E":
                errors.append(parse_fields(body))
            elif tag == b"Z":
                return rows, tags, notices, errors, seen

    def extended(self, sql, params=()):
        """One statement through Parse/Bind/Describe/Execute/Sync; returns (row count, command
        tags, notices); raises ServerError."""
        self.send_extended(sql, params)
        rows, tags, notices, errors, _ = self.sync()
        if errors:
            raise ServerError(errors[0])
        return len(rows), tags, notices


def send_cancel(host_or_path, port, key, unix=False):
    """Sends a CancelRequest with the BackendKeyData pgwarden gave the client."""
    if unix:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(host_or_path))
    else:
        s = socket.create_connection((host_or_path, port), timeout=5)
    with s:
        s.sendall(struct.pack("!IIII", 16, 80877102, key[0], key[1]))
        s.settimeout(5)
        try:
            s.recv(1)
        except OSError:
            pass


HISTORY_FILES = {"sqlite": "history.db", "jsonl": "history.jsonl"}


def history_config(d, store, dsn=None, **keys):
    """A `history:` section for daemon `d`: the sqlite or jsonl file in its directory, or the
    postgres store at `dsn` with its spool in that directory; then `keys`."""
    h = {"store": store}
    if store in HISTORY_FILES:
        h["path"] = str(d.dir / HISTORY_FILES[store])
    else:
        h.update(dsn=dsn, spool_path=str(d.dir / "history.spool"))
    h.update(keys)
    return h


def history_rows(d, where, params=(), want=1, timeout=10):
    """Rows of a daemon's SQLite history (its default store, `history.db` in its directory)
    matching `where`, ordered by id, once at least `want` are there (or the timeout passed)."""
    import sqlite3
    path = d.dir / "history.db"
    rows = []

    def ready():
        nonlocal rows
        if not path.exists():
            return False
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        db.row_factory = sqlite3.Row
        try:
            rows = db.execute(f"SELECT * FROM pgwarden_history WHERE {where} ORDER BY id",
                              params).fetchall()
        except sqlite3.OperationalError:
            return False
        finally:
            db.close()
        return len(rows) >= want

    wait_for(ready, timeout=timeout)
    return rows


def wait_for(predicate, timeout=10, interval=0.1):
    """Polls predicate until it returns a truthy value; returns that value, or the last falsy one."""
    deadline = time.monotonic() + timeout
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(interval)
        value = predicate()
    return value


class Background(threading.Thread):
    """Runs a function in a thread and keeps its result or exception."""

    def __init__(self, fn, *args, **kw):
        super().__init__(daemon=True)
        self.fn, self.args, self.kw = fn, args, kw
        self.result = self.error = None
        self.started_at = self.finished_at = None
        self.start()

    def run(self):
        self.started_at = time.monotonic()
        try:
            self.result = self.fn(*self.args, **self.kw)
        except BaseException as e:  # noqa: B902 - handed to the test thread
            self.error = e
        finally:
            self.finished_at = time.monotonic()
