"""Read replicas against a real streaming standby made with pg_basebackup -R from the test's own
primary: reads of a group with read_replicas go to the replica and every other session to the
primary; a replica whose replay is paused falls behind max_replica_lag and reads go back to the
primary until it catches up; a replica stopped under load leaves the rotation (its waiting
clients move to the primary) and comes back when it answers again. MCP reads of such a group go
to the replica too, and every statement's history record and metric name the host it ran on."""

import hashlib
import os
import re
import secrets
import signal
import subprocess
import time
import urllib.request

import psycopg2
import pytest

import pgwtest
import writesupport
from mcpsupport import McpHttp, history, start_mcp_daemon

CLIENTS = 4


def make_replica(primary):
    """A hot standby of `primary` on a port of its own, streaming from it."""
    replica = pgwtest.PgCluster(prefix="pgw-replica-")
    replica.sockdir.mkdir()
    if pgwtest.is_root():
        import os
        import pwd
        pw = pwd.getpwnam("postgres")
        os.chown(replica.sockdir, pw.pw_uid, pw.pw_gid)
    subprocess.run(
        pgwtest.as_pg_user([pgwtest.PG_BIN / "pg_basebackup", "-D", replica.data, "-R",
                            "-X", "stream", "-c", "fast", "-h", "127.0.0.1",
                            "-p", str(primary.port), "-U", "postgres"]),
        check=True, env=pgwtest.pg_env(pgwtest.SUPERUSER_PASSWORD), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, timeout=300)
    with open(replica.data / "postgresql.conf", "a") as f:
        f.write(f"\nport = {replica.port}\nunix_socket_directories = '{replica.sockdir}'\n"
                "hot_standby = on\n")
    replica.start()
    return replica


@pytest.fixture
def fleet(pg_factory, pgwarden_factory):
    primary = pg_factory(rows=1000)
    writer_password = "w-" + secrets.token_hex(6)
    writesupport.create_write_role(primary, "pgw_replica_writer", writer_password)
    replica = make_replica(primary)
    rwriter_token = "pgw_" + secrets.token_urlsafe(32)

    def configure(cfg):
        cfg["admin_users"] = ["core"]
        cfg["upstream"].update({"replicas": [{"host": "127.0.0.1", "port": replica.port}],
                                "max_replica_lag": "2s", "health_check_interval": "200ms"})
        # analysts (md5user) without guards, to see where its reads go: it has no
        # read_replicas. core (passthrough) reads from the replica, on the wire and over MCP.
        cfg["groups"]["passthrough"] = {"guards": [], "read_replicas": True}
        cfg["groups"]["analysts"] = {"guards": []}
        # A guarded-writes group's reads stay on the primary even with read_replicas: a read
        # after its commit must see the commit.
        cfg["upstream"].update(write_user="pgw_replica_writer", write_password=writer_password)
        cfg["groups"]["rwriters"] = {"mode": "guarded_writes", "read_replicas": True,
                                     "guards": []}
        cfg["users"].append({"name": "rwriter", "group": "rwriters",
                             "password": pgwtest.scram_verifier("r-" + writer_password)})
        cfg["mcp"]["tokens"].append({"user": "rwriter",
                                     "sha256": hashlib.sha256(rwriter_token.encode()).hexdigest()})

    try:
        d, d.tokens = start_mcp_daemon(pgwarden_factory, primary, configure=configure)
        d.tokens["rwriter"] = rwriter_token
        yield primary, replica, d
    finally:
        replica.destroy()


def console(d, command):
    res = pgwtest.psql(d.dsn(user="core", dbname="pgwarden"), "-A", "-c", command)
    assert res.returncode == 0, res.stderr
    lines = [l for l in res.stdout.splitlines() if l]
    header = lines[0].split("|")
    return [dict(zip(header, l.split("|"))) for l in lines[1:-1]]


def host_row(d, port):
    for r in console(d, "SHOW HOSTS"):
        if r["host"] == f"127.0.0.1:{port}":
            return r
    raise AssertionError(f"no host 127.0.0.1:{port} in SHOW HOSTS")


def served_by(d, user):
    """The port of the server a new session of `user` reads from."""
    conn = d.connect(user=user)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT inet_server_port()")
            return cur.fetchone()[0]
    finally:
        conn.close()


def metric(d, name, **labels):
    text = urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/metrics", timeout=5).read()
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.decode().splitlines():
        m = re.match(r"^(\w+)\{(.*)\} (\S+)$", line)
        if m and m.group(1) == name and ",".join(sorted(m.group(2).split(","))) == want:
            return float(m.group(3))
    return None


def test_reads_of_a_group_that_allows_it_go_to_the_replica_and_the_rest_to_the_primary(fleet):
    primary, replica, d = fleet
    assert pgwtest.wait_for(lambda: host_row(d, replica.port)["up"] == "yes", timeout=30)
    assert {served_by(d, "core") for _ in range(4)} == {replica.port}
    # A group without read_replicas: the primary.
    assert {served_by(d, "md5user") for _ in range(2)} == {primary.port}
    conn = d.connect(user="core")
    with conn.cursor() as cur:
        cur.execute("SELECT pg_is_in_recovery()")
        assert cur.fetchone() == (True,)
        # The replica is read-only all the same: a write is the server's error.
        with pytest.raises(psycopg2.Error):
            cur.execute("INSERT INTO scratch VALUES (99, 'x')")
    servers = console(d, "SHOW SERVERS")
    assert f"127.0.0.1:{replica.port}" in {s["host"] for s in servers}
    assert f"127.0.0.1:{primary.port}" in {s["host"] for s in servers}
    pools = {p["host"] for p in console(d, "SHOW POOLS")}
    assert f"127.0.0.1:{replica.port}" in pools
    dbs = {r["name"]: r for r in console(d, "SHOW DATABASES")}
    assert dbs[pgwtest.DATABASE]["replicas"] == f"127.0.0.1:{replica.port}"
    conn.close()
    assert metric(d, "pgwarden_upstream_host_up", host=f"127.0.0.1:{replica.port}",
                  role="replica") == 1
    assert metric(d, "pgwarden_upstream_host_up", host=f"127.0.0.1:{primary.port}",
                  role="primary") == 1
    assert metric(d, "pgwarden_upstream_replica_lag_seconds",
                  host=f"127.0.0.1:{replica.port}") == 0
    # The same fleet (a replica costs a base backup): MCP reads and the history's host.
    mcp_reads_go_to_the_replica_and_history_names_the_host_of_each_statement(primary, replica, d)


def mcp_reads_go_to_the_replica_and_history_names_the_host_of_each_statement(primary, replica, d):
    on_replica = f"127.0.0.1:{replica.port}"
    c = McpHttp(d.mcp_port, d.tokens["core"])
    try:
        c.initialize(client="replica-reader")
        r = c.tool("query", {"sql": "SELECT inet_server_port() AS port, pg_is_in_recovery() AS r"})
        assert r["isError"] is False, r
        assert r["structuredContent"]["rows"] == [[replica.port, True]]
        r = c.tool("explain", {"sql": "SELECT * FROM scratch WHERE id = 1"})
        assert r["isError"] is False, r
    finally:
        c.close()
    rows = history(d, "agent_id = 'replica-reader'", count=2)
    assert [(row["tool_name"], row["host"]) for row in rows] == [("query", on_replica),
                                                                   ("explain", on_replica)], rows
    c = McpHttp(d.mcp_port, d.tokens["rwriter"])
    try:
        c.initialize(client="replica-writer")
        # (its functions guard refuses inet_server_port(): the record's host says where it ran)
        r = c.tool("query", {"sql": "SELECT id FROM scratch ORDER BY id LIMIT 1"})
        assert r["isError"] is False, r
    finally:
        c.close()
    assert [row["host"] for row in history(d, "agent_id = 'replica-writer'")] == ["primary"]
    # The wire's: a read of the same group on the replica, one of a group without read_replicas
    # on the primary, and a statement that reached no server (pgwarden answers it).
    served_by(d, "core")
    served_by(d, "md5user")
    local = "SET pgwarden.agent_id = 'replica-wire'"
    conn = d.connect(user="core")
    with conn.cursor() as cur:
        cur.execute(local)
    conn.close()
    where = (f"protocol = 'simple' AND sql_text IN ('SELECT inet_server_port()', "
             f"'{local.replace(chr(39), chr(39) * 2)}')")
    wire = lambda: {(row["user_name"], row["sql_text"], row["host"]) for row in history(d, where)}
    want = {("core", "SELECT inet_server_port()", on_replica),
            ("md5user", "SELECT inet_server_port()", "primary"),
            ("core", local, "")}
    assert pgwtest.wait_for(lambda: wire() == want, timeout=15), wire()
    # The statements metric's host label: the replica's reads, the primary's, and none.
    assert statements_on(d, on_replica) >= 3
    assert statements_on(d, "primary") >= 1
    assert statements_on(d, "none") >= 1


def statements_on(d, host):
    """pgwarden_statements_total summed over the series whose host label is `host`."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/metrics", timeout=5).read()
    total = 0.0
    for line in text.decode().splitlines():
        if line.startswith("pgwarden_statements_total{") and f'host="{host}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_replica_lagging_past_max_replica_lag_leaves_reads_to_the_primary(fleet):
    primary, replica, d = fleet
    assert pgwtest.wait_for(lambda: host_row(d, replica.port)["up"] == "yes", timeout=30)
    primary.execute("INSERT INTO scratch VALUES (2, 'before the pause')")
    # Replayed before the pause: the lag is then the age of that transaction, which grows. A
    # replica that has replayed none since it started has an unknown lag (no replay time), and
    # reads leave it for that alone.
    assert pgwtest.wait_for(lambda: replica.scalar("SELECT count(*) FROM scratch WHERE id = 2") == 1,
                            timeout=60)
    replica.execute("SELECT pg_wal_replay_pause()")

    def lagging():
        primary.execute("UPDATE scratch SET note = now()::text WHERE id = 1")
        row = host_row(d, replica.port)
        return row["lag_seconds"] != "" and float(row["lag_seconds"]) >= 2.0
    assert pgwtest.wait_for(lagging, timeout=60, interval=0.3), host_row(d, replica.port)
    assert host_row(d, replica.port)["up"] == "yes"  # it answers; it is only behind
    assert {served_by(d, "core") for _ in range(3)} == {primary.port}
    assert metric(d, "pgwarden_upstream_replica_lag_seconds",
                  host=f"127.0.0.1:{replica.port}") >= 2

    replica.execute("SELECT pg_wal_replay_resume()")
    assert pgwtest.wait_for(lambda: host_row(d, replica.port)["lag_seconds"] == "0.000",
                            timeout=60), host_row(d, replica.port)
    assert {served_by(d, "core") for _ in range(3)} == {replica.port}


def test_a_replica_stopped_under_load_leaves_the_rotation_and_comes_back(fleet):
    primary, replica, d = fleet
    assert pgwtest.wait_for(lambda: host_row(d, replica.port)["up"] == "yes", timeout=30)
    stop = [False]
    out = [False]  # SHOW HOSTS said the replica is out
    after_out = {"ok": 0, "failed": 0, "ports": set()}  # sessions begun while it is out

    def client():
        # A new session per read, as pgbench -C: every one chooses a host afresh.
        done, failed, ports = 0, 0, set()
        while not stop[0]:
            begun_out = out[0]
            try:
                port = served_by(d, "core")
                done += 1
                ports.add(port)
                if begun_out:
                    after_out["ok"] += 1
                    after_out["ports"].add(port)
            except psycopg2.Error:
                failed += 1
                if begun_out:
                    after_out["failed"] += 1
        return done, failed, ports

    workers = [pgwtest.Background(client) for _ in range(CLIENTS)]
    assert pgwtest.wait_for(lambda: all(w.is_alive() for w in workers), timeout=5)
    time.sleep(1.0)
    stopped_at = time.monotonic()
    replica.stop("fast")
    assert pgwtest.wait_for(lambda: host_row(d, replica.port)["up"] == "no", timeout=30)
    out_after = time.monotonic() - stopped_at
    out[0] = True
    assert pgwtest.wait_for(lambda: after_out["ok"] >= 200, timeout=60), after_out
    out[0] = False
    while_out = {"failed": after_out["failed"], "ok": after_out["ok"],
                 "ports": set(after_out["ports"])}
    replica.start()
    started_at = time.monotonic()
    assert pgwtest.wait_for(lambda: host_row(d, replica.port)["up"] == "yes", timeout=60)
    back_after = time.monotonic() - started_at
    assert pgwtest.wait_for(lambda: served_by(d, "core") == replica.port, timeout=30)
    stop[0] = True
    for w in workers:
        w.join(60)
        assert w.error is None, w.error
    done = sum(w.result[0] for w in workers)
    failed = sum(w.result[1] for w in workers)
    # Once out of the rotation no read goes near the replica, and none fails.
    assert while_out["failed"] == 0, while_out
    assert while_out["ports"] == {primary.port}, while_out
    # Before that, only sessions on the replica as it stopped fail (its backends are terminated):
    # at most one per client; one waiting for a replica connection moved to the primary.
    assert failed <= CLIENTS, (done, failed)
    assert {replica.port, primary.port} <= set().union(*(w.result[2] for w in workers))
    assert int(host_row(d, replica.port)["failures"]) >= 1
    assert d.alive()
    print(f"replica stopped under {CLIENTS} clients opening a session per read: {done} sessions, "
          f"{failed} failed (on the replica as it stopped); out of the rotation {out_after:.2f} s "
          f"after pg_ctl stop began, back {back_after:.2f} s after pg_ctl start returned")


def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:  # a backend that ended meanwhile
            pass


def stop_cluster(cluster, sig):
    """Sends `sig` to the postmaster of `cluster` (first: it forks no more), then to its children
    (backends, startup, walreceiver...); returns their pids."""
    postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
    os.kill(postmaster, sig)
    pids = [postmaster]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == postmaster:
                        pids.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    signal_all(pids[1:], sig)
    return pids


def test_a_replica_that_hangs_leaves_the_rotation_and_holds_up_no_other_hosts_check(fleet):
    """Every process of the replica stopped (SIGSTOP): connections to it are taken by the kernel
    and never answered. Its check fails at its bound (upstream.connect_timeout: 3s here) while
    the primary's go on every health_check_interval."""
    primary, replica, d = fleet
    assert pgwtest.wait_for(lambda: host_row(d, replica.port)["up"] == "yes", timeout=30)
    primary_checks = lambda: int(host_row(d, primary.port)["checks"])
    before = primary_checks()
    hung_at = time.monotonic()
    pids = stop_cluster(replica, signal.SIGSTOP)
    try:
        assert pgwtest.wait_for(lambda: host_row(d, replica.port)["up"] == "no", timeout=60)
        out_after = time.monotonic() - hung_at
        during = primary_checks() - before
        out = host_row(d, replica.port)
        assert {served_by(d, "core") for _ in range(2)} == {primary.port}
    finally:
        signal_all(pids, signal.SIGCONT)
    print(f"replica hung (SIGSTOP): out of the rotation {out_after:.2f} s after, the primary "
          f"checked {during} times meanwhile; {out['last_error']}")
    # Checked one after another, the primary waited for the hung replica's check each round.
    assert during >= 3, (during, out_after)
    assert "no answer to the health check" in out["last_error"], out
    assert pgwtest.wait_for(lambda: host_row(d, replica.port)["up"] == "yes", timeout=60)
