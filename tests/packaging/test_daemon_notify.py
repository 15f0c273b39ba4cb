"""The real pgwarden under a stand-in service manager: a datagram socket as $NOTIFY_SOCKET that
must receive READY=1 once the listeners accept, RELOADING=1 / READY=1 around a SIGHUP (also when
the new config is rejected), STATUS= text, watchdog pings at half of $WATCHDOG_USEC, and
STOPPING=1 on SIGTERM; listening sockets passed as descriptors 3 and up (socket activation, by a
small launcher and by systemd-socket-activate); the Unix socket's mode under a strict umask; and
log lines with syslog priority prefixes when $JOURNAL_STREAM names its stderr.

A daemon built without the systemd integration (no sd_notify in its dynamic symbols) fails every
test here with that reason.
"""

import grp
import os
import pathlib
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

import pytest
import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "integration"))
import pgwtest  # noqa: E402  (the integration suite's PostgreSQL and config helpers)

READY_TIMEOUT = 20.0


def _binary():
    env = os.environ.get("PGWARDEN_BIN")
    if env:
        return pathlib.Path(env)
    return pgwtest.REPO_ROOT / "build" / "daemon" / "pgwarden"


def _links_sd_notify(path):
    out = subprocess.run(["nm", "-D", "--undefined-only", str(path)], capture_output=True,
                         text=True, check=True).stdout
    return re.search(r"\bsd_notify\b", out) is not None


@pytest.fixture(scope="module")
def pgwarden_bin():
    path = _binary()
    if not path.is_file():
        pytest.fail(f"pgwarden binary not found at {path} (set PGWARDEN_BIN)", pytrace=False)
    if not _links_sd_notify(path):
        pgwtest.require_tool("this pgwarden does not call sd_notify: it was built without "
                             "libsystemd (Debian package libsystemd-dev)")
    return path


@pytest.fixture(scope="module")
def pg():
    cluster = pgwtest.PgCluster(prefix="pgw-pg-notify-")
    try:
        cluster.init()
        cluster.start()
        cluster.load_fixture_data(rows=1000)
        yield cluster
    finally:
        cluster.destroy()


class NotifySocket:
    """The service manager's end: a bound SOCK_DGRAM Unix socket, read by a thread."""

    def __init__(self, directory):
        self.path = str(pathlib.Path(directory) / "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.2)
        self.messages = []  # (time.monotonic(), text)
        self.cond = threading.Condition()
        self.running = True
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while self.running:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            with self.cond:
                self.messages.append((time.monotonic(), data.decode("utf-8", "replace")))
                self.cond.notify_all()

    def wait_for(self, predicate, start=0, timeout=READY_TIMEOUT):
        """Index of the first message at or after `start` for which predicate(text) holds."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i in range(start, len(self.messages)):
                    if predicate(self.messages[i][1]):
                        return i
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def texts(self):
        with self.cond:
            return [m for _, m in self.messages]

    def close(self):
        self.running = False
        self.thread.join(5)
        self.sock.close()


def has(key):
    return lambda text: key in text.split("\n")


def lifecycle(texts):
    """The READY/RELOADING/STOPPING assignments in arrival order (pings and status left out)."""
    out = []
    for text in texts:
        for line in text.split("\n"):
            if line in ("READY=1", "RELOADING=1", "STOPPING=1"):
                out.append(line)
    return out


# argv[1]: the descriptors to hand over, in order. They are first moved above any target so
# that dup2 onto 3, 4, ... never overwrites one not yet moved.
ACTIVATE = """
import fcntl, os, sys
fds = [int(f) for f in sys.argv[1].split(",")]
high = [fcntl.fcntl(f, fcntl.F_DUPFD, 100) for f in fds]
for f in fds:
    os.close(f)
for i, f in enumerate(high):
    os.dup2(f, 3 + i)
    os.close(f)
os.environ["LISTEN_PID"] = str(os.getpid())
os.execv(sys.argv[2], sys.argv[2:])
"""


class Daemon:
    """pgwarden from a config derived from the packaged example, run with a given environment."""

    def __init__(self, binary, pg):
        self.spec = pgwtest.Pgwarden(binary, pg, prefix="pgw-notify-")
        self.binary = str(binary)
        self.proc = None
        self.logfile = self.spec.dir / "stderr.log"

    def start(self, env_extra, inherit=(), names=None, umask=None, launcher=None, preexec=None):
        """Runs pgwarden; `inherit` are listening sockets handed over as descriptors 3, 4, ...
        with LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID (the daemon's own pid) as systemd sets
        them. `launcher` is an argv prefix that does the handing over itself."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS",
                            "LISTEN_PID", "LISTEN_FDNAMES", "JOURNAL_STREAM")}
        env.update(env_extra)
        argv = [self.binary, "--config", str(self.spec.config_path)]
        pass_fds = ()
        if inherit:
            # A launcher that moves the sockets to 3.. and execs pgwarden, keeping its pid.
            fds = [s.fileno() for s in inherit]
            env["LISTEN_FDS"] = str(len(fds))
            if names is not None:
                env["LISTEN_FDNAMES"] = ":".join(names)
            argv = [sys.executable, "-c", ACTIVATE, ",".join(map(str, fds))] + argv
            pass_fds = tuple(fds)
        if launcher is not None:
            argv = list(launcher) + argv
        self.log = open(self.logfile, "wb")
        if umask is not None:
            preexec = lambda: os.umask(umask)  # noqa: E731
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log, pass_fds=pass_fds, preexec_fn=preexec,
                                     start_new_session=True)
        return self

    def stop(self, timeout=30):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                return None
        return self.proc.returncode

    def destroy(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc is not None:
            self.log.close()
        self.spec.destroy()

    def output(self):
        return self.logfile.read_text(errors="replace") if self.logfile.exists() else ""


@pytest.fixture
def daemon(pgwarden_bin, pg):
    d = Daemon(pgwarden_bin, pg)
    yield d
    d.destroy()


@pytest.fixture
def notify():
    directory = tempfile.mkdtemp(prefix="pgw-notify-sock-")
    n = NotifySocket(directory)
    yield n
    n.close()
    os.unlink(n.path)
    os.rmdir(directory)


def query(d, sql="SELECT 1"):
    conn = d.spec.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall()
    finally:
        conn.close()


def wait_ready(d, notify, start=0):
    i = notify.wait_for(has("READY=1"), start)
    assert i is not None, (f"no READY=1 within {READY_TIMEOUT}s; got {notify.texts()}\n"
                           + d.output())
    return i


def monotonic_usec():
    return int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1_000_000)


def test_ready_reload_stop_arrive_in_order(daemon, notify):
    daemon.start({"NOTIFY_SOCKET": notify.path})
    ready = wait_ready(daemon, notify)
    # READY=1 means the listeners accept: connect at once, no retry.
    socket.create_connection(("127.0.0.1", daemon.spec.port), timeout=2).close()
    assert query(daemon) == [(1,)]
    held = daemon.spec.connect()
    # `systemctl status` shows the live connection counts.
    counts = notify.wait_for(
        lambda t: re.search(r"^STATUS=accepting connections: 1 clients, [1-9]\d* server "
                            r"connections$", t, re.M) is not None, ready + 1, timeout=5)
    assert counts is not None, notify.texts()
    # A setting only a restart applies is named in the log, and the reload still goes through.
    daemon.spec.config["listen"]["unix_socket_mode"] = "0700"
    daemon.spec.write_config()

    before = monotonic_usec()
    daemon.proc.send_signal(signal.SIGHUP)
    reloading = notify.wait_for(has("RELOADING=1"), ready + 1)
    assert reloading is not None, f"no RELOADING=1 after SIGHUP: {notify.texts()}"
    text = notify.texts()[reloading]
    m = re.search(r"^MONOTONIC_USEC=(\d+)$", text, re.M)
    assert m, f"RELOADING=1 without MONOTONIC_USEC (systemd 253+ needs it): {text!r}"
    assert before <= int(m.group(1)) <= monotonic_usec()
    assert notify.wait_for(has("READY=1"), reloading + 1) is not None, notify.texts()
    # A reload drops no connection.
    with held.cursor() as cur:
        cur.execute("SELECT 2")
        assert cur.fetchall() == [(2,)]
    held.close()
    assert ("reload: listen.unix_socket_mode changed; the listeners keep their old settings "
            "until a restart") in daemon.output(), daemon.output()

    assert daemon.stop() == 0, daemon.output()
    texts = notify.texts()
    assert lifecycle(texts) == ["READY=1", "RELOADING=1", "READY=1", "STOPPING=1"], texts
    assert any(line.startswith("STATUS=") for t in texts for line in t.split("\n")), (
        f"no STATUS= text for systemctl status: {texts}")


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _make_ca_and_server(d, ca):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-days", "2", "-subj", f"/CN={ca}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{ca}-server.key", "-out", f"{ca}-server.csr", "-subj", "/CN=localhost",
             cwd=d)
    (d / f"{ca}.ext").write_text("basicConstraints=CA:FALSE\n"
                                 "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", f"{ca}-server.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-out", f"{ca}-server.crt", "-days", "2", "-extfile", f"{ca}.ext",
             cwd=d)


def test_reload_swaps_tls_certificates_and_keeps_tls_sessions(daemon, notify):
    d = daemon.spec.dir / "certs"
    d.mkdir()
    for ca in ("ca1", "ca2"):
        _make_ca_and_server(d, ca)

    def install(ca):
        shutil.copyfile(d / f"{ca}-server.crt", d / "server.crt")
        shutil.copyfile(d / f"{ca}-server.key", d / "server.key")
        (d / "server.key").chmod(0o600)

    def connect(ca):
        return daemon.spec.connect(sslmode="verify-full", sslrootcert=str(d / f"{ca}.crt"))

    install("ca1")
    daemon.spec.config["tls"] = {"mode": "require", "cert_file": str(d / "server.crt"),
                                 "key_file": str(d / "server.key")}
    daemon.spec.write_config()
    daemon.start({"NOTIFY_SOCKET": notify.path})
    ready = wait_ready(daemon, notify)
    held = connect("ca1")
    assert held.info.ssl_in_use

    install("ca2")
    daemon.proc.send_signal(signal.SIGHUP)
    reloading = notify.wait_for(has("RELOADING=1"), ready + 1)
    assert reloading is not None, notify.texts()
    assert notify.wait_for(has("READY=1"), reloading + 1) is not None, notify.texts()
    # New sessions get the new certificate: only the new CA verifies it.
    conn = connect("ca2")
    assert conn.info.ssl_in_use
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchall() == [(1,)]
    conn.close()
    with pytest.raises(Exception, match="certificate verify failed"):
        connect("ca1").close()
    # The session that began under the old certificate goes on.
    with held.cursor() as cur:
        cur.execute("SELECT 3")
        assert cur.fetchall() == [(3,)]
    held.close()
    assert daemon.stop() == 0, daemon.output()


def test_out_of_descriptors_refuses_new_clients_and_keeps_sessions(daemon, notify):
    import psycopg2
    import resource

    # 64 descriptors: about 30 go to the loop, listeners, history and metrics; pgwarden keeps
    # 16 for the sessions it has, so new clients are refused from descriptor 48 on.
    daemon.start({"NOTIFY_SOCKET": notify.path},
                 preexec=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)))
    wait_ready(daemon, notify)
    held = daemon.spec.connect()
    # Connections that never send a startup packet each hold one of pgwarden's descriptors
    # (until limits.startup_timeout) and no server connection.
    # They are opened until pgwarden refuses one; that one is closed again, so the next client
    # gets its descriptor (the lowest free one), which is past the threshold, not past the limit.
    idle = []
    while "refused: out of file descriptors" not in daemon.output():
        assert len(idle) < 64, daemon.output()
        idle.append(socket.create_connection(("127.0.0.1", daemon.spec.port), timeout=5))
        time.sleep(0.05)
    idle.pop().close()
    time.sleep(0.3)
    with pytest.raises(psycopg2.OperationalError, match="out of file descriptors"):
        daemon.spec.connect().close()
    log = daemon.output()
    assert re.search(r"refused: out of file descriptors \(descriptor \d+ of a limit of 64, 16 kept "
                     r"for open sessions\); raise LimitNOFILE", log), log
    # The session already in goes on, and gets its server connection.
    with held.cursor() as cur:
        cur.execute("SELECT 5")
        assert cur.fetchall() == [(5,)]
    for sock in idle:
        sock.close()
    # Descriptors free again (pgwarden sees the closes on its next loop turn): clients get in.
    deadline = time.monotonic() + 10
    while True:
        try:
            assert query(daemon) == [(1,)]
            break
        except psycopg2.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    held.close()
    assert daemon.stop() == 0, daemon.output()


def test_rejected_reload_still_ends_the_reload(daemon, notify):
    daemon.start({"NOTIFY_SOCKET": notify.path})
    ready = wait_ready(daemon, notify)
    good = daemon.spec.config_path.read_text()
    cfg = yaml.safe_load(good)
    cfg["limits"]["no_such_setting"] = 1
    daemon.spec.config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    daemon.proc.send_signal(signal.SIGHUP)
    reloading = notify.wait_for(has("RELOADING=1"), ready + 1)
    assert reloading is not None, notify.texts()
    # The old config stays in force, and systemd must hear the reload is over, or
    # `systemctl reload` would hang until its timeout.
    assert notify.wait_for(has("READY=1"), reloading + 1) is not None, notify.texts()
    assert daemon.proc.poll() is None, daemon.output()
    assert query(daemon) == [(1,)]
    assert "no_such_setting" in daemon.output()
    assert daemon.stop() == 0, daemon.output()


def test_watchdog_pings_at_half_the_interval(daemon, notify):
    daemon.start({"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "1000000"})
    ready = wait_ready(daemon, notify)
    t0 = notify.messages[ready][0]
    time.sleep(2.6)
    pings = [t for t, text in list(notify.messages) if "WATCHDOG=1" in text.split("\n") and t > t0]
    # Every 0.5 s: about 5 in 2.6 s. Fewer than 3 would let systemd's 1 s watchdog fire.
    assert len(pings) >= 3, f"{len(pings)} pings in 2.6 s with WatchdogSec=1s: {notify.texts()}"
    assert daemon.stop() == 0, daemon.output()


def test_no_watchdog_pings_without_watchdog(daemon, notify):
    daemon.start({"NOTIFY_SOCKET": notify.path})
    wait_ready(daemon, notify)
    time.sleep(1.0)
    assert daemon.stop() == 0, daemon.output()
    assert not any("WATCHDOG=1" in t.split("\n") for t in notify.texts()), notify.texts()


def _listening_tcp(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    return sock


def _listening_unix(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(64)
    return sock


def test_socket_activation_uses_the_inherited_listeners(daemon, notify):
    spec = daemon.spec
    # Configured: TCP `port` and the Unix socket (both passed in), and TCP `own_port`, which the
    # "socket unit" leaves out, so pgwarden binds it itself. Passed in too: TCP `extra_port`,
    # which the config does not name.
    own_port, extra_port = pgwtest.free_port(), pgwtest.free_port()
    spec.config["listen"]["addresses"] = [f"127.0.0.1:{spec.port}", f"127.0.0.1:{own_port}"]
    spec.write_config()
    unix_path = spec.sockdir / f".s.PGSQL.{spec.port}"
    sockets = [_listening_tcp(spec.port), _listening_unix(unix_path), _listening_tcp(extra_port)]
    try:
        daemon.start({"NOTIFY_SOCKET": notify.path}, inherit=sockets,
                     names=["pgwarden", "pgwarden", "extra"])
        wait_ready(daemon, notify)
        # `port`, the socket file and `extra_port` are held by this process's sockets: pgwarden
        # can only be serving them through the descriptors it inherited.
        assert query(daemon) == [(1,)]
        for kw in ({"unix": True}, {"port": own_port}, {"port": extra_port}):
            conn = spec.connect(**kw)
            with conn.cursor() as cur:
                cur.execute("SELECT 7")
                assert cur.fetchall() == [(7,)], kw
            conn.close()
        log = daemon.output()
        assert f"127.0.0.1:{spec.port} is socket 3 (pgwarden) from the service manager" in log, log
        assert f"{unix_path} is socket 4 (pgwarden) from the service manager" in log, log
        assert f"listening on 127.0.0.1:{own_port}" in log, log
        assert re.search(rf"inherited socket 127\.0\.0\.1:{extra_port} \(extra\) is not in the "
                         r"config's listen section", log), log
        assert daemon.stop() == 0, daemon.output()
        # The socket file belongs to whoever bound it (systemd), not to pgwarden.
        assert stat.S_ISSOCK(os.lstat(unix_path).st_mode)
    finally:
        for sock in sockets:
            sock.close()


def test_socket_activation_refuses_the_metrics_address(daemon, notify):
    metrics = _listening_tcp(daemon.spec.metrics_port)
    try:
        daemon.start({"NOTIFY_SOCKET": notify.path}, inherit=[metrics], names=["metrics"])
        assert daemon.proc.wait(20) == 1, daemon.output()
        assert (f"inherited socket 127.0.0.1:{daemon.spec.metrics_port} (metrics) is the metrics "
                "endpoint's address") in daemon.output()
        assert not any("READY=1" in t.split("\n") for t in notify.texts()), notify.texts()
    finally:
        metrics.close()


def test_systemd_socket_activate_starts_pgwarden_on_first_connection(daemon, notify):
    if shutil.which("systemd-socket-activate") is None:
        pgwtest.require_tool("systemd-socket-activate is not installed (Debian package systemd)")
    port = daemon.spec.port
    daemon.start({"NOTIFY_SOCKET": notify.path},
                 launcher=["systemd-socket-activate", "-l", f"127.0.0.1:{port}",
                           "--fdname=pgwarden", "-E", "NOTIFY_SOCKET"])
    # systemd-socket-activate binds the port and starts pgwarden on the first connection; this
    # client's connection waits in the backlog meanwhile, as under systemd.
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            first = socket.create_connection(("127.0.0.1", port), timeout=1)
            break
        except OSError:
            assert daemon.proc.poll() is None, daemon.output()
            assert time.monotonic() < deadline, "systemd-socket-activate did not listen"
            time.sleep(0.05)
    first.close()
    wait_ready(daemon, notify)
    assert query(daemon) == [(1,)]
    assert f"127.0.0.1:{port} is socket 3 (pgwarden) from the service manager" in daemon.output()
    assert daemon.stop() == 0, daemon.output()


def test_unix_socket_mode_is_applied_whatever_the_umask(daemon, notify):
    # systemd's UMask=0077 would leave the socket to pgwarden's own user: the default mode 0777
    # is set after bind, as PostgreSQL and PgBouncer do.
    daemon.start({"NOTIFY_SOCKET": notify.path}, umask=0o077)
    wait_ready(daemon, notify)
    path = daemon.spec.sockdir / f".s.PGSQL.{daemon.spec.port}"
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o777
    assert daemon.stop() == 0, daemon.output()


def _other_group():
    """A group this process may give a file to, other than its own primary group if it can."""
    if os.geteuid() == 0:
        for name in ("daemon", "nogroup", "adm"):
            try:
                return grp.getgrnam(name)
            except KeyError:
                pass
    gids = [g for g in os.getgroups() if g != os.getegid()] or [os.getegid()]
    return grp.getgrgid(gids[0])


def test_unix_socket_mode_and_group_from_the_config(daemon, notify):
    group = _other_group()
    # Quoted: YAML 1.1 (PyYAML) would read a bare 0750 as the number 488.
    daemon.spec.config["listen"].update(unix_socket_mode="0750", unix_socket_group=group.gr_name)
    daemon.spec.write_config()
    daemon.start({"NOTIFY_SOCKET": notify.path}, umask=0o077)
    wait_ready(daemon, notify)
    st = os.lstat(daemon.spec.sockdir / f".s.PGSQL.{daemon.spec.port}")
    assert stat.S_IMODE(st.st_mode) == 0o750
    assert st.st_gid == group.gr_gid
    assert query(daemon) == [(1,)]
    conn = daemon.spec.connect(unix=True)
    conn.close()
    assert daemon.stop() == 0, daemon.output()


def test_unknown_unix_socket_group_stops_start_up(daemon, notify):
    daemon.spec.config["listen"]["unix_socket_group"] = "pgw-no-such-group"
    daemon.spec.write_config()
    daemon.start({"NOTIFY_SOCKET": notify.path})
    assert daemon.proc.wait(20) == 1, daemon.output()
    assert 'listen.unix_socket_group: no group "pgw-no-such-group"' in daemon.output()
    assert not (daemon.spec.sockdir / f".s.PGSQL.{daemon.spec.port}").exists()


@pytest.mark.parametrize("text, value", [
    ("0999", "0999"), ("01777", "01777"), ("rw", "rw"), ("77", "77"), ("1777", "1777"),
])
def test_bad_unix_socket_mode_is_a_config_error(pgwarden_bin, daemon, text, value):
    cfg = daemon.spec.config_path.read_text()
    # Written unquoted, as an operator would.
    cfg = cfg.replace("  unix_socket_dir:", f"  unix_socket_mode: {text}\n  unix_socket_dir:", 1)
    daemon.spec.config_path.write_text(cfg)
    line = next(i for i, l in enumerate(cfg.split("\n"), 1) if "unix_socket_mode" in l)
    out = subprocess.run([str(pgwarden_bin), "--check-config", str(daemon.spec.config_path)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0, out.stdout
    err = out.stderr + out.stdout
    assert "listen.unix_socket_mode" in err and f'got "{value}"' in err, err
    assert f":{line}" in err, err


def test_empty_unix_socket_group_is_a_config_error(pgwarden_bin, daemon):
    daemon.spec.config["listen"]["unix_socket_group"] = ""
    daemon.spec.write_config()
    out = subprocess.run([str(pgwarden_bin), "--check-config", str(daemon.spec.config_path)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert "listen.unix_socket_group" in out.stderr + out.stdout


def _log_lines(text):
    return [line for line in text.split("\n") if line.strip()]


def test_journal_stream_gets_priority_prefixes_and_no_timestamps(daemon, notify):
    # JOURNAL_STREAM must name the daemon's stderr: the log file it writes to.
    daemon.logfile.touch()
    st = os.stat(daemon.logfile)
    daemon.start({"NOTIFY_SOCKET": notify.path, "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
    wait_ready(daemon, notify)
    query(daemon)
    assert daemon.stop() == 0, daemon.output()
    lines = _log_lines(daemon.output())
    assert lines, "pgwarden logged nothing"
    bad = [line for line in lines if not re.match(r"^<[0-7]>", line)]
    assert not bad, f"lines without a syslog priority prefix under journald: {bad[:5]}"
    stamped = [line for line in lines if re.match(r"^<[0-7]>\s*\[?\d{4}-\d\d-\d\d", line)]
    assert not stamped, f"journald adds timestamps; these carry their own: {stamped[:5]}"


def test_plain_stderr_has_no_priority_prefixes(daemon, notify):
    daemon.start({"NOTIFY_SOCKET": notify.path})
    wait_ready(daemon, notify)
    assert daemon.stop() == 0, daemon.output()
    lines = _log_lines(daemon.output())
    assert lines, "pgwarden logged nothing"
    assert not any(re.match(r"^<[0-7]>", line) for line in lines), lines[:5]
