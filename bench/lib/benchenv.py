"""The benchmark's throwaway world: a PostgreSQL 15 cluster loaded with pgbench data, PgBouncer
and pgwarden in front of it, all on free loopback ports in one temp directory, and the cleanup
that stops every process the harness started and removes that directory, whatever happens."""

import base64
import hashlib
import hmac
import os
import pathlib
import pwd
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import yaml

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
LIB_SH = REPO_ROOT / "scripts" / "lib.sh"
EXAMPLE_CONFIG = REPO_ROOT / "packaging" / "pgwarden.yaml"
PG_BIN = pathlib.Path(os.environ.get("PGW_PGBIN", "/usr/lib/postgresql/15/bin"))
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"

DATABASE = "bench"
READER_ROLE = "bench_reader"      # the server role every target logs in as
AGENT_USER = "bench_agent"        # pgwarden user in the example `agents` group
ANALYST_USER = "bench_analyst"    # pgwarden user in the `analysts` group (no row_limit)


class BenchError(Exception):
    pass


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def is_root():
    return os.geteuid() == 0


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now (chosen by the kernel)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_pg_user(argv):
    """initdb, postgres and pgbouncer refuse to run as root: as root they run as `postgres`."""
    if is_root():
        return ["runuser", "-u", "postgres", "--"] + [str(a) for a in argv]
    return [str(a) for a in argv]


def chown_pg(path):
    if is_root():
        pw = pwd.getpwnam("postgres")
        os.chown(path, pw.pw_uid, pw.pw_gid)


def clean_env(password=None):
    """The environment for libpq programs: no inherited PG* variables, only our password."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    if password is not None:
        env["PGPASSWORD"] = password
    env["PGCONNECT_TIMEOUT"] = "10"
    return env


def raise_fd_limit(wanted):
    """Idle-connection runs hold thousands of sockets; children (pgwarden) inherit the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(max(wanted, soft), hard) if hard != resource.RLIM_INFINITY else max(wanted, soft)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def lib_sh(function, *args, timeout=180):
    """Calls one of the shared shell helpers in scripts/lib.sh."""
    script = f'source "{LIB_SH}" && {function} "$@"'
    r = subprocess.run(["bash", "-c", script, "lib.sh", *map(str, args)], capture_output=True,
                       text=True, timeout=timeout)
    if r.returncode != 0:
        raise BenchError(f"{function} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout


# --------------------------------------------------------------------------------------------
# SCRAM-SHA-256 verifiers (RFC 5802 / RFC 7677), for PgBouncer's auth_file and as a fallback
# when `pgwarden passwd` is not usable.

def _hmac(key, msg):
    return hmac.new(key, msg, hashlib.sha256).digest()


def scram_verifier(password, iterations=4096):
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    stored = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    server = _hmac(salted, b"Server Key")
    b64 = lambda b: base64.b64encode(b).decode()
    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored)}:{b64(server)}"


# --------------------------------------------------------------------------------------------

class Cleanup:
    """Everything to undo, newest first. Runs once, from `finally`, atexit or a signal."""

    def __init__(self):
        self.actions = []
        self.done = False

    def add(self, what, fn):
        self.actions.append((what, fn))

    def run(self):
        if self.done:
            return
        self.done = True
        for what, fn in reversed(self.actions):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - cleanup must go on
                log(f"cleanup of {what} failed: {e}")


def stop_process(proc, sig=signal.SIGTERM, timeout=15, group=False):
    """Stops one process we started (by its pid, or its own process group when it has one)."""
    if proc is None or proc.poll() is not None:
        return proc.returncode if proc else None
    try:
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        try:
            if group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except ProcessLookupError:
            pass
        try:
            # A process holding thousands of sockets takes a while to be torn down.
            proc.wait(120)
        except subprocess.TimeoutExpired:
            log(f"pid {proc.pid} still there 120 s after SIGKILL")
    except ProcessLookupError:
        pass
    return proc.returncode


def wait_port(port, proc=None, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def rss_kib(pid):
    """(VmRSS, VmHWM) of a process in KiB, from /proc."""
    rss = hwm = None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return rss, hwm


# --------------------------------------------------------------------------------------------

class BenchEnv:
    """One temp directory holding the cluster, PgBouncer's and pgwarden's files and logs."""

    def __init__(self, cleanup, scale, max_connections, keep=False, history_durability="process"):
        self.cleanup = cleanup
        self.history_durability = history_durability
        self.scale = scale
        self.max_connections = max_connections
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="pgw-bench-"))
        self.dir.chmod(0o755)
        chown_pg(self.dir)
        if keep:
            log(f"keeping {self.dir}")
        else:
            cleanup.add("temp directory", lambda: shutil.rmtree(self.dir, ignore_errors=True))
        self.super_password = "super-" + secrets.token_hex(8)
        self.reader_password = "reader-" + secrets.token_hex(8)
        self.agent_password = "agent-" + secrets.token_hex(8)
        self.analyst_password = "analyst-" + secrets.token_hex(8)
        self.pg_port = None
        self.pgb_port = None
        self.pgb_proc = None
        self.pgw = None
        self.pgw_port = None
        self.pgw_config = None
        self.pgw_stops = []
        self.shared_buffers_mb = None

    # -- PostgreSQL ---------------------------------------------------------------------------
    def start_postgres(self):
        self.pg_port = free_port()
        pgdir = self.dir / "pg"
        # scripts/lib.sh owns the cluster recipe (initdb as postgres, scram-sha-256, loopback,
        # fsync off); the benchmark only raises what it needs and sizes shared_buffers so the
        # whole pgbench data set stays in PostgreSQL's cache (16 MB per scale unit, doubled).
        lib_sh("pgw_pg_init", pgdir, self.pg_port, self.super_password)
        self.shared_buffers_mb = max(128, 32 * self.scale + 64)
        with open(pgdir / "data" / "postgresql.conf", "a") as f:
            f.write(f"""
# benchmark overrides (later lines win)
max_connections = {self.max_connections}
shared_buffers = {self.shared_buffers_mb}MB
autovacuum = off
log_min_messages = warning
""")
        self.cleanup.add("PostgreSQL", lambda: lib_sh("pgw_pg_stop", pgdir, timeout=60))
        lib_sh("pgw_pg_start", pgdir, timeout=120)
        self.pgdir = pgdir

    def psql(self, sql, db=DATABASE, user="postgres", password=None, timeout=600):
        r = subprocess.run(
            ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
             "-p", str(self.pg_port), "-U", user, "-d", db, "-c", sql],
            capture_output=True, text=True, timeout=timeout,
            env=clean_env(password or self.super_password))
        if r.returncode != 0:
            raise BenchError(f"psql failed: {sql[:80]}...\n{r.stderr}")
        return r.stdout.strip()

    def server_backends(self):
        """Backends of the reader role, or None when the server does not answer in time."""
        try:
            return int(self.psql("SELECT count(*) FROM pg_stat_activity WHERE usename = "
                                 f"'{READER_ROLE}'", timeout=60))
        except (BenchError, subprocess.TimeoutExpired, ValueError):
            return None

    def wait_backends_drained(self, at_most, timeout=300):
        """After thousands of server connections close, the postmaster needs a while to reap
        their backends and may refuse new connections meanwhile: wait until it is done."""
        deadline = time.monotonic() + timeout
        n = None
        while time.monotonic() < deadline:
            n = self.server_backends()
            if n is not None and n <= at_most:
                return n
            time.sleep(2)
        log(f"PostgreSQL still has {n} reader backends after {timeout} s")
        return n

    def load_pgbench(self):
        self.psql(f"CREATE DATABASE {DATABASE}", db="postgres")
        r = subprocess.run(
            ["pgbench", "-i", "-s", str(self.scale), "-q", "-h", "127.0.0.1", "-p",
             str(self.pg_port), "-U", "postgres", DATABASE],
            capture_output=True, text=True, timeout=900, env=clean_env(self.super_password))
        if r.returncode != 0:
            raise BenchError(f"pgbench -i failed:\n{r.stderr}")
        self.psql(f"""
            CREATE ROLE {READER_ROLE} LOGIN PASSWORD '{self.reader_password}';
            GRANT SELECT ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history
              TO {READER_ROLE};
            CREATE EXTENSION IF NOT EXISTS pg_prewarm;
            SELECT pg_prewarm('pgbench_accounts'), pg_prewarm('pgbench_accounts_pkey'),
                   pg_prewarm('pgbench_branches'), pg_prewarm('pgbench_tellers');
        """)
        self.data_size = self.psql("SELECT pg_size_pretty(pg_database_size(current_database()))")
        # PgBouncer's auth_file holds the server's own SCRAM verifier for the role: PgBouncer
        # then logs in to PostgreSQL with the client's proof (SCRAM pass-through), no cleartext.
        self.reader_verifier = self.psql(
            f"SELECT rolpassword FROM pg_authid WHERE rolname = '{READER_ROLE}'")

    # -- PgBouncer ----------------------------------------------------------------------------
    def start_pgbouncer(self, max_clients, pool_mode="session", pool_size=None, name="pgbouncer"):
        """PgBouncer in `pool_mode` with `pool_size` server connections (default: one per
        client). The first one started is the session-mode target of the throughput runs; another
        (`name`) returns (port, pid) and is stopped with the run."""
        d = self.dir / name
        d.mkdir()
        chown_pg(d)
        port = free_port()
        first = name == "pgbouncer"
        if first:
            self.pgb_port = port
        userlist = d / "userlist.txt"
        userlist.write_text(f'"{READER_ROLE}" "{self.reader_verifier}"\n')
        ini = d / "pgbouncer.ini"
        ini.write_text(f"""[databases]
{DATABASE} = host=127.0.0.1 port={self.pg_port} dbname={DATABASE}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = scram-sha-256
auth_file = {userlist}
pool_mode = {pool_mode}
max_client_conn = {max_clients}
default_pool_size = {pool_size or max_clients}
max_db_connections = 0
logfile = {d / 'pgbouncer.log'}
pidfile = {d / 'pgbouncer.pid'}
log_connections = 0
log_disconnections = 0
ignore_startup_parameters = extra_float_digits
""")
        for p in (userlist, ini):
            chown_pg(p)
            p.chmod(0o600)
        log_path = d / "pgbouncer.log"
        # runuser puts the soft open-file limit back at 1024; the idle-connection run needs as
        # many descriptors for PgBouncer as pgwarden gets, so the shell raises it again.
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        argv = ["sh", "-c", 'ulimit -n "$1" && exec "$2" "$3"', "sh", nofile, PGBOUNCER, ini]
        proc = subprocess.Popen(as_pg_user(argv), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        self.cleanup.add(name, lambda: stop_process(proc, group=True))
        if not wait_port(port, proc):
            raise BenchError("PgBouncer did not start:\n" + self._tail(log_path))
        pid = self._pgbouncer_pid(d / "pgbouncer.pid")
        if not first:
            return port, pid, proc
        self.pgb_proc = proc
        self.pgb_log = log_path
        self.pgb_pid = pid
        self.pgb_nofile = None
        try:
            with open(f"/proc/{self.pgb_pid}/limits") as f:
                for line in f:
                    if line.startswith("Max open files"):
                        self.pgb_nofile = int(line.split()[3])
        except (OSError, ValueError, IndexError):
            pass

    def _pgbouncer_pid(self, pidfile):
        # runuser forks: the pid that matters for RSS is PgBouncer's own, from its pidfile.
        for _ in range(50):
            if pidfile.exists() and pidfile.read_text().strip():
                return int(pidfile.read_text().strip())
            time.sleep(0.05)
        return self.pgb_proc.pid

    @staticmethod
    def _tail(path, n=4000):
        try:
            return pathlib.Path(path).read_text(errors="replace")[-n:]
        except OSError:
            return ""

    # -- pgwarden -----------------------------------------------------------------------------
    def pgwarden_config(self, binary, max_clients, pool_mode="session", pool_size=None):
        """Config derived from the example: its groups as they are (the agents group in
        `pool_mode`, session unless asked), our users, ports and paths."""
        cfg = yaml.safe_load(EXAMPLE_CONFIG.read_text())
        d = self.dir / "pgwarden"
        d.mkdir(exist_ok=True)
        (d / "sock").mkdir(exist_ok=True)
        pwfile = d / "upstream.password"
        pwfile.write_text(self.reader_password + "\n")
        pwfile.chmod(0o600)
        cfg["listen"] = {"addresses": ["127.0.0.1:0"], "unix_socket_dir": str(d / "sock")}
        up = cfg["upstream"]
        up.pop("password", None)
        up.update(host="127.0.0.1", port=self.pg_port, user=READER_ROLE, password_file=str(pwfile),
                  # The slow reader of a 1 GB result keeps its statement running far longer
                  # than the example's 10 s; nothing else here comes near it.
                  statement_timeout="10m")
        cfg["pool"].update(min_size=0, max_size=pool_size or max_clients + 8, acquire_timeout="60s")
        # The memory runs log in 32 clients at a time, all from 127.0.0.1: no per-address cap.
        cfg["limits"].update(max_client_connections=max_clients + 8, startup_timeout="60s",
                             max_startup_per_address=0)
        cfg["auth"]["failed_attempts_per_minute"] = 100000
        cfg["metrics"]["listen"] = "127.0.0.1:0"
        cfg["history"] = {"store": "sqlite", "path": str(d / "history.db"),
                          "durability": self.history_durability}
        cfg["daemon"] = {"state_dir": str(d)}
        cfg["users"] = [
            {"name": AGENT_USER, "password": self._pgwarden_verifier(binary, AGENT_USER,
                                                                     self.agent_password),
             "group": "agents"},
            {"name": ANALYST_USER, "password": self._pgwarden_verifier(binary, ANALYST_USER,
                                                                       self.analyst_password),
             "group": "analysts"},
        ]
        for g in ("agents", "analysts"):
            if g not in cfg.get("groups", {}):
                raise BenchError(f"packaging/pgwarden.yaml has no `{g}` group")
        cfg["groups"]["agents"]["pool_mode"] = pool_mode
        return cfg

    def _pgwarden_verifier(self, binary, user, password):
        """`pgwarden passwd USER` (password on stdin), the way an operator makes one."""
        try:
            r = subprocess.run([str(binary), "passwd", user], input=password + "\n",
                               capture_output=True, text=True, timeout=30)
            out = r.stdout.strip().splitlines()
            if r.returncode == 0 and out and out[-1].startswith("SCRAM-SHA-256$"):
                return out[-1].strip()
            log(f"`pgwarden passwd` gave no verifier (rc {r.returncode}); computing one here")
        except (OSError, subprocess.TimeoutExpired) as e:
            log(f"`pgwarden passwd` failed ({e}); computing the verifier here")
        return scram_verifier(password)

    def start_pgwarden(self, binary, max_clients, name="pgwarden", config=None):
        """Starts a fresh pgwarden (stopping any previous one) on new free ports."""
        self.stop_pgwarden()
        cfg = config or self.pgwarden_config(binary, max_clients)
        port, metrics_port = free_port(), free_port()
        cfg["listen"]["addresses"] = [f"127.0.0.1:{port}"]
        cfg["metrics"]["listen"] = f"127.0.0.1:{metrics_port}"
        d = self.dir / "pgwarden"
        path = d / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        logf = open(d / f"{name}.log", "ab")
        proc = subprocess.Popen([str(binary), "--config", str(path)], stdin=subprocess.DEVNULL,
                                stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        logf.close()
        self.pgw = proc
        self.pgw_port = port
        self.pgw_metrics_port = metrics_port
        self.pgw_log = d / f"{name}.log"
        self.pgw_config = cfg
        self.cleanup.add(name, lambda p=proc: stop_process(p, group=True))
        if not wait_port(port, proc):
            stop_process(proc, group=True)
            self.pgw = self.pgw_port = None
            raise BenchError(f"pgwarden did not start (rc {proc.poll()}):\n"
                             + self._tail(self.pgw_log))
        return proc

    def stop_pgwarden(self):
        """SIGTERM, as systemd would send; SIGKILL after a few seconds. How each stop went is
        kept in `pgw_stops` (an idle daemon should exit 0 at once)."""
        if self.pgw is None:
            return None
        proc, self.pgw = self.pgw, None
        t0 = time.monotonic()
        already = proc.poll() is not None
        rc = stop_process(proc, timeout=5, group=True)
        self.pgw_stops.append({"exit_status": rc, "already_exited": already,
                               "seconds": round(time.monotonic() - t0, 2)})
        return rc

    def pgwarden_alive(self):
        return self.pgw is not None and self.pgw.poll() is None

    # -- the targets, as pgbench sees them ------------------------------------------------------
    def targets(self):
        return {
            "direct": dict(port=self.pg_port, user=READER_ROLE, password=self.reader_password),
            "pgbouncer": dict(port=self.pgb_port, user=READER_ROLE, password=self.reader_password),
            "pgwarden": dict(port=self.pgw_port, user=AGENT_USER, password=self.agent_password),
        }
