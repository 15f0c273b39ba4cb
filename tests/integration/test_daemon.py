"""The pgwarden executable itself: command line, config checking, password verifiers, signals,
listeners, logging hygiene and the failed-login rate limit."""

import re
import signal
import subprocess
import time

import psycopg2
import pytest
import yaml

import pgwtest
from pgwtest import psql


def run(binary, *args, input=None, timeout=30):
    return subprocess.run([str(binary), *args], input=input, capture_output=True, text=True,
                          timeout=timeout)


def test_version(pgwarden_bin):
    r = run(pgwarden_bin, "--version")
    assert r.returncode == 0, r.stderr
    assert re.search(r"pgwarden\s+\d+\.\d+\.\d+", r.stdout), r.stdout


def test_help(pgwarden_bin):
    r = run(pgwarden_bin, "--help")
    assert r.returncode == 0, r.stderr
    for word in ("--config", "--check-config", "passwd", "--version"):
        assert word in r.stdout


def test_unknown_argument_fails(pgwarden_bin):
    r = run(pgwarden_bin, "--no-such-flag")
    assert r.returncode != 0
    assert r.stderr.strip()


SHIPPED_HISTORY = "  path: /var/lib/pgwarden/history.db\n"


def example_with_history(path):
    """The example config as shipped but for its history file: the shipped /var/lib/pgwarden
    exists only where the package made it (--check-config proves the file can be created)."""
    text = pgwtest.EXAMPLE_CONFIG.read_text()
    assert text.count(SHIPPED_HISTORY) == 1
    return text.replace(SHIPPED_HISTORY, f"  path: {path}\n")


def line_of(text, start):
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(start))


def test_check_config_accepts_the_example(pgwarden_bin, tmp_path):
    # The state directory too is the package's (postinst makes it): here, a directory of the test's.
    config = tmp_path / "pgwarden.yaml"
    config.write_text(example_with_history(tmp_path / "history.db").replace(
        "  state_dir: /var/lib/pgwarden", f"  state_dir: {tmp_path}"))
    r = run(pgwarden_bin, "--check-config", str(config))
    assert r.returncode == 0, r.stdout + r.stderr


def test_check_config_and_start_refuse_a_history_path_that_cannot_be_created(pgwarden_bin, tmp_path):
    text = example_with_history("/nonexistent/dir/h.db")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    expected = (f"{bad}:{line_of(text, '  path: /nonexistent/dir/h.db')}: history.path: cannot create "
                "/nonexistent/dir/h.db: the directory /nonexistent/dir does not exist")
    r = run(pgwarden_bin, "--check-config", str(bad))
    assert r.returncode == 1, r.stdout + r.stderr
    assert expected in r.stderr.splitlines(), r.stderr
    # The daemon refuses to start with the same message, before it listens.
    r = run(pgwarden_bin, "--config", str(bad))
    assert r.returncode == 1, r.stdout + r.stderr
    assert expected in r.stderr.splitlines(), r.stderr


def test_check_config_and_start_refuse_a_spool_the_file_system_cannot_hold(pgwarden_bin, tmp_path):
    """A history spool bigger than the free space where it lives: --check-config says so, the
    daemon refuses to start with the same message, and no spool file (sparse or not) is left."""
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(small)], check=True)
    try:
        spool = small / "h.spool"
        text = example_with_history(tmp_path / "history.db").replace(
            "  # spool_path: /var/lib/pgwarden/history.db.spool",
            f"  spool_path: {spool}\n  spool_size: 16MiB")
        text = text.replace("  state_dir: /var/lib/pgwarden", f"  state_dir: {tmp_path}")
        config = tmp_path / "spool.yaml"
        config.write_text(text)
        expected = (f"{config}: history.spool_size: cannot reserve {16 * 2**20 + 4096} bytes for the "
                    f"spool {spool}: {small} has ")
        r = run(pgwarden_bin, "--check-config", str(config))
        assert r.returncode == 1, r.stdout + r.stderr
        assert expected in r.stderr, r.stderr
        r = run(pgwarden_bin, "--config", str(config))
        assert r.returncode == 1, r.stdout + r.stderr
        assert expected in r.stderr, r.stderr
        assert list(small.iterdir()) == []
        # Within the free space: accepted, and the daemon's own reservation then succeeds.
        config.write_text(text.replace("spool_size: 16MiB", "spool_size: 6MiB"))
        r = run(pgwarden_bin, "--check-config", str(config))
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_check_config_names_both_lines_of_a_duplicate_key(pgwarden_bin, tmp_path):
    text = example_with_history(tmp_path / "history.db")
    first = line_of(text, "pool:")
    text += "pool:\n  max_size: 5\n"
    second = len(text.splitlines()) - 1
    bad = tmp_path / "dup.yaml"
    bad.write_text(text)
    r = run(pgwarden_bin, "--check-config", str(bad))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{bad}:{second}: pool: duplicate key 'pool' at lines {first} and {second}" in r.stderr, r.stderr


def test_check_config_accepts_the_test_config(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg, start=False)
    r = run(d.binary, "--check-config", str(d.config_path))
    assert r.returncode == 0, r.stdout + r.stderr


def test_check_config_names_file_line_and_key_of_an_unknown_key(pgwarden_bin, tmp_path):
    text = pgwtest.EXAMPLE_CONFIG.read_text()
    lines = text.splitlines()
    idx = next(i for i, l in enumerate(lines) if l.startswith("  connect_timeout:"))
    lines.insert(idx + 1, "  conect_timeout: 5s")
    bad = tmp_path / "bad.yaml"
    bad.write_text("\n".join(lines) + "\n")
    r = run(pgwarden_bin, "--check-config", str(bad))
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert str(bad) in out or "bad.yaml" in out
    assert f":{idx + 2}" in out or f"line {idx + 2}" in out, out
    assert "upstream.conect_timeout" in out, out


@pytest.mark.parametrize("mutation,key", [
    (lambda c: c["limits"].update(max_message_bytes="lots"), "limits.max_message_bytes"),
    (lambda c: c["upstream"].update(port="not-a-port"), "upstream.port"),
    (lambda c: c["users"][0].update(group="no_such_group"), "group"),
    (lambda c: c.update(listen={"addresses": ["127.0.0.1:notaport"]}), "listen.addresses"),
])
def test_check_config_rejects_bad_values(pgwarden_bin, tmp_path, mutation, key):
    cfg = yaml.safe_load(pgwtest.EXAMPLE_CONFIG.read_text())
    mutation(cfg)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = run(pgwarden_bin, "--check-config", str(bad))
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert key in out, out


def test_check_config_missing_file(pgwarden_bin, tmp_path):
    r = run(pgwarden_bin, "--check-config", str(tmp_path / "absent.yaml"))
    assert r.returncode == 1
    assert "absent.yaml" in r.stdout + r.stderr


def test_passwd_prints_a_verifier_that_logs_in(pgwarden_bin, pgwarden_factory, pg):
    password = "correct horse battery staple"
    r = run(pgwarden_bin, "passwd", "someone", input=password + "\n")
    assert r.returncode == 0, r.stderr
    verifier = r.stdout.strip().splitlines()[-1].strip()
    assert re.fullmatch(r"SCRAM-SHA-256\$\d+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+",
                        verifier), verifier
    assert password not in r.stdout + r.stderr
    # Checked against RFC 5802 independently of pgwarden ...
    assert pgwtest.scram_verifier_matches(verifier, password)
    assert not pgwtest.scram_verifier_matches(verifier, password + "!")
    # ... and it works as a user's password in the config.
    d = pgwarden_factory.start(pg, users=[{"name": "someone", "password": verifier,
                                           "group": "analysts"}])
    r = psql(d.dsn(user="someone", password=password), "-At", "-c", "select 'in'")
    assert r.stdout.strip() == "in", r.stderr
    # Two runs never give the same verifier (random salt).
    r2 = run(pgwarden_bin, "passwd", "someone", input=password + "\n")
    assert r2.stdout.strip().splitlines()[-1].strip() != verifier


def test_unix_socket_listener(pgwarden):
    sock = pgwarden.sockdir / f".s.PGSQL.{pgwarden.port}"
    assert sock.is_socket()
    r = psql(f"host={pgwarden.sockdir} port={pgwarden.port} dbname={pgwtest.DATABASE} user=agent "
             f"password={pgwarden.passwords['agent']}", "-At", "-c", "select 'via socket'")
    assert r.stdout.strip() == "via socket", r.stderr


def test_sigterm_lets_the_running_statement_finish(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg)
    conn = d.connect()
    cur = conn.cursor()
    worker = pgwtest.Background(lambda: (cur.execute("select pg_sleep(2), 'finished'"),
                                         cur.fetchone())[1])
    time.sleep(0.7)
    d.send_signal(signal.SIGTERM)
    worker.join(20)
    assert worker.error is None, repr(worker.error)
    assert worker.result[1] == "finished"
    # New connections are no longer accepted while it drains / after it stopped.
    with pytest.raises(psycopg2.OperationalError):
        d.connect()
    assert d.wait_exit(15) == 0, d.log()[-3000:]
    conn.close()


def test_sigterm_idle_exits_zero_quickly(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg)
    conns = [d.connect() for _ in range(3)]
    started = time.monotonic()
    code = d.stop(signal.SIGTERM, timeout=15, by_test=True)
    assert code == 0, d.log()[-3000:]
    assert time.monotonic() - started < 6  # shutdown_timeout is 5s in the test config
    for c in conns:
        c.close()


def test_sigint_exits_zero(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg)
    assert psql(d.dsn(), "-At", "-c", "select 1").stdout.strip() == "1"
    code = d.stop(signal.SIGINT, timeout=15, by_test=True)
    assert code == 0, d.log()[-3000:]


def test_log_lines_carry_session_context_and_no_secrets(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg)
    r = psql(d.dsn(application_name="ctx-app", options="-c agent_id=ctx-agent "
                                                        "-c conversation_id=ctx-conv"),
             "-At", "-c", "select 1")
    assert r.returncode == 0, r.stderr
    psql(d.dsn(password="definitely-wrong-password"), "-c", "select 1")
    d.stop(by_test=True)  # exit status: see the SIGTERM tests
    log = d.log()
    assert "ctx-agent" in log and "ctx-conv" in log
    assert "user=core" in log and pgwtest.DATABASE in log and "127.0.0.1" in log
    for secret in (*d.passwords.values(), pgwtest.READER_PASSWORD,
                   "definitely-wrong-password"):
        assert secret not in log, "a password reached the log"
    verifier = next(u["password"] for u in d.config["users"] if u["name"] == "agent")
    for part in verifier.split("$")[1:]:
        for piece in part.split(":"):
            assert len(piece) < 8 or piece not in log, "SCRAM material reached the log"


def test_failed_logins_are_rate_limited_per_user_and_peer(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg, overrides={"auth": {"failed_attempts_per_minute": 3}})
    for _ in range(3):
        r = psql(d.dsn(password="wrong"), "-c", "select 1")
        assert "password authentication failed" in r.stderr
    # Now even the right password of that user is refused from this peer for a while.
    r = psql(d.dsn(), "-c", "select 1")
    assert r.returncode == 2
    assert "FATAL" in r.stderr
    assert "too many failed login attempts for this user" in r.stderr, r.stderr
    # Another user from the same address is not locked out by the first one's failures.
    r = psql(d.dsn(user="agent"), "-c", "select 1")
    assert r.returncode == 0, r.stderr


def test_max_client_connections(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg, overrides={"limits": {"max_client_connections": 3}})
    conns = [d.connect() for _ in range(3)]
    with pytest.raises(psycopg2.OperationalError) as err:
        d.connect()
    assert "too many" in str(err.value).lower() or "connections" in str(err.value).lower()
    conns.pop().close()
    conn = pgwtest.wait_for(lambda: _try_connect(d), timeout=5)
    assert conn, "a slot freed by a closed client was not reused"
    conn.close()
    for c in conns:
        c.close()


def _try_connect(d):
    try:
        return d.connect()
    except psycopg2.OperationalError:
        return None
