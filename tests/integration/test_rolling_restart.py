"""Restarting without dropping clients: two pgwarden processes share one port with
`listen.so_reuseport: true`; under pgbench, each is stopped with SIGTERM (it closes its listener,
lets its connected clients finish, then exits) and started again, one at a time, and pgbench
reports no failed transaction. pgbench runs with -C (a new connection per transaction), so every
transaction goes through a listener while the processes come and go. The figures are printed
(pytest -s) for docs/operations.md."""

import re
import secrets
import subprocess
import time

import pytest

import pgwtest


def start_pair(factory, pg):
    """Two processes on one port, with the same user and password."""
    port = pgwtest.free_port()
    password = "core-" + secrets.token_hex(6)
    users = [{"name": "core", "password": pgwtest.scram_verifier(password),
              "group": "passthrough"}]
    overrides = {"listen": {"addresses": [f"127.0.0.1:{port}"], "unix_socket_dir": "",
                            "so_reuseport": True},
                 "limits": {"shutdown_timeout": "10s"},
                 "groups": {"passthrough": {"guards": []}}}
    pair = []
    for _ in range(2):
        d = factory.start(pg, overrides=overrides, users=users, start=False)
        d.passwords["core"] = password
        d.port = port  # the shared one (dsn() and start() use it)
        d.start()
        pair.append(d)
    return pair


def restart(d):
    """SIGTERM, wait for the exit (status 0), start the same config again."""
    d.send_signal(15)
    code = d.wait_exit(30)
    assert code == 0, d.log()[-3000:]
    d.stopped_by_test = False
    d.start()


def accepted(d):
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/metrics", timeout=5).read()
    m = re.search(rb"^pgwarden_client_connections_accepted_total (\S+)$", text, re.M)
    return float(m.group(1))


def test_two_processes_share_a_port(pgwarden_factory, pg):
    """The kernel spreads new connections over both listeners."""
    a, b = start_pair(pgwarden_factory, pg)
    before = (accepted(a), accepted(b))  # the start-up probes' connections
    for _ in range(40):
        conn = a.connect(user="core")
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
        conn.close()
    after = (accepted(a), accepted(b))
    assert after[0] > before[0] and after[1] > before[1], (before, after)
    assert sum(after) - sum(before) == 40


def test_without_so_reuseport_the_second_process_cannot_bind(pgwarden_factory, pg):
    a = pgwarden_factory.start(pg, overrides={"listen": {"unix_socket_dir": ""}})
    b = pgwarden_factory.start(pg, overrides={"listen": {
        "addresses": [f"127.0.0.1:{a.port}"], "unix_socket_dir": ""}}, start=False)
    b.port = a.port
    with pytest.raises(RuntimeError) as err:
        b.start()
    assert "address already in use" in str(err.value), str(err.value)[-2000:]


def test_rolling_restart_under_pgbench_fails_no_transaction(pgwarden_factory, pg):
    a, b = start_pair(pgwarden_factory, pg)
    args = ["-h", "127.0.0.1", "-p", str(a.port), "-U", "core", pgwtest.DATABASE]
    seconds = 16
    cmd_extra = ["-C"]
    bench = pgwtest.Background(
        lambda: subprocess.run(
            ["pgbench", "-n", "-S", "-M", "simple", *cmd_extra, "-c", "4", "-j", "2", "-T",
             str(seconds), *args],
            capture_output=True, text=True, timeout=120, env=pgwtest.pg_env(a.passwords["core"])))
    time.sleep(2)
    restarts = []
    for d in (a, b, a, b):
        t0 = time.monotonic()
        restart(d)
        restarts.append(time.monotonic() - t0)
        time.sleep(1)
    bench.join(120)
    assert bench.error is None, bench.error
    out = bench.result.stdout + bench.result.stderr
    assert bench.result.returncode == 0, out
    processed = re.search(r"number of transactions actually processed: (\d+)", out)
    failed = re.search(r"number of failed transactions: (\d+)", out)
    assert processed and failed, out
    print(f"rolling restart: pgbench -S -C -c 4 -T {seconds}: {processed.group(1)} transactions, "
          f"failed {failed.group(1)}; {len(restarts)} restarts, each "
          f"{min(restarts):.2f}-{max(restarts):.2f} s from SIGTERM to accepting again")
    assert int(failed.group(1)) == 0, out
    assert int(processed.group(1)) > 0


def test_the_log_says_whether_the_kernel_moves_connections_off_a_closing_listener(
        pgwarden_factory, pg):
    """net.ipv4.tcp_migrate_req decides whether a connection queued on a listener that closes
    (SIGTERM) is reset or handed to the other process: the log says which, as the kernel is."""
    a, b = start_pair(pgwarden_factory, pg)
    try:
        value = int(open("/proc/sys/net/ipv4/tcp_migrate_req").read())
    except FileNotFoundError:
        value = None
    for d in (a, b):
        log = d.log()
        if value == 0:
            assert "net.ipv4.tcp_migrate_req is 0" in log, log[-2000:]
        elif value is None:
            assert "this kernel has no net.ipv4.tcp_migrate_req" in log, log[-2000:]
        else:
            assert "tcp_migrate_req" not in log, log[-2000:]
