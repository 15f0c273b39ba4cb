"""The admin console's PgBouncer commands against a real PostgreSQL: PAUSE waits for a running
transaction and holds new statements without an error (the held session stops reading, so what
its client keeps sending stays out of pgwarden's memory) until RESUME; SUSPEND; RECONNECT and
WAIT_CLOSE replace server connections; DISABLE/ENABLE; KILL db; SHUTDOWN and SHUTDOWN
WAIT_FOR_CLIENTS; the new SHOW tables; stats_users that may only SHOW; and a PAUSE/RESUME under
pgbench that fails no transaction. Every command is one history record."""

import re
import socket
import struct

import psycopg2
import pytest

import pgwtest


@pytest.fixture(scope="module", params=[1, 2], ids=["1-loop", "2-loops"])
def d(pgwarden_bin, pg, request):
    from conftest import DaemonSet
    daemons = DaemonSet(pgwarden_bin)
    try:
        yield daemons.start(pg, overrides={"admin_users": ["core"], "stats_users": ["agent"],
                                           "daemon": {"workers": request.param}})
    finally:
        daemons.teardown()


def run(d, command, user="core"):
    return pgwtest.psql(d.dsn(user=user, dbname="pgwarden", application_name="console-test"),
                        "-A", "-c", command)


def console(d, command, user="core"):
    """(header, rows) of a console command that must succeed."""
    res = run(d, command, user)
    assert res.returncode == 0, res.stderr
    lines = [l for l in res.stdout.splitlines() if l]
    if not lines or not lines[-1].endswith(("row)", "rows)")):
        return [], lines
    return lines[0].split("|"), [l.split("|") for l in lines[1:-1]]


def table(d, command):
    header, rows = console(d, command)
    return [dict(zip(header, r)) for r in rows]


def state(d):
    return {r["key"]: r["value"] for r in table(d, "SHOW STATE")}


def lists(d):
    return {r["list"]: r["items"] for r in table(d, "SHOW LISTS")}


def backend_pid(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        return cur.fetchone()[0]


def test_pause_waits_for_a_transaction_and_holds_new_statements_until_resume(d):
    busy = d.connect(user="core", autocommit=False)
    later = d.connect(user="core")
    try:
        with busy.cursor() as cur:
            cur.execute("SELECT 1")  # a transaction is open now
        pause = pgwtest.Background(run, d, "PAUSE")
        assert pgwtest.wait_for(lambda: state(d)["paused"] == "yes")
        # A new statement of another session is held, not refused.
        held = pgwtest.Background(lambda: later.cursor().execute("SELECT 42") or "done")
        assert pgwtest.wait_for(lambda: state(d)["held_clients"] == "1"), state(d)
        assert pause.is_alive(), "PAUSE answered while a transaction was still open"
        # The open transaction goes on under PAUSE and ends; then PAUSE answers.
        with busy.cursor() as cur:
            cur.execute("SELECT 2")
        busy.commit()
        pause.join(30)
        assert not pause.is_alive() and pause.error is None
        assert pause.result.returncode == 0, pause.result.stderr
        assert "PAUSE" in pause.result.stdout
        assert held.is_alive(), "a statement ran while paused"
        # A second PAUSE is an error, RESUME lets the held statement run.
        res = run(d, "PAUSE")
        assert res.returncode != 0 and "already paused" in res.stderr
        res = run(d, "RESUME")
        assert res.returncode == 0, res.stderr
        held.join(30)
        assert held.error is None and held.result == "done"
        assert state(d)["held_clients"] == "0"
        res = run(d, "RESUME")
        assert res.returncode != 0 and "nothing is paused" in res.stderr
    finally:
        busy.close()
        later.close()


def test_pause_of_one_database_leaves_the_others(d, pg):
    other = d.connect(user="core", dbname="postgres")
    mine = d.connect(user="core")
    try:
        assert run(d, "PAUSE postgres").returncode == 0
        assert state(d)["paused_databases"] == "postgres"
        with mine.cursor() as cur:
            cur.execute("SELECT 1")  # analytics is not paused
        held = pgwtest.Background(lambda: other.cursor().execute("SELECT 1") or "done")
        assert pgwtest.wait_for(lambda: state(d)["held_clients"] == "1")
        assert run(d, "RESUME postgres").returncode == 0
        held.join(30)
        assert held.result == "done", held.error
    finally:
        other.close()
        mine.close()


def test_a_held_session_stops_reading(d):
    """While held, a client that keeps sending fills the socket, not pgwarden: the bytes waiting
    in the session stay under one message and send() blocks on the kernel's buffers."""
    with d.raw() as c:
        c.login("core", d.passwords["core"])
        assert run(d, "PAUSE").returncode == 0
        try:
            query = b"SELECT 1;" + b" " * 8000 + b"\0"
            msg = b"Q" + struct.pack("!I", len(query) + 4) + query
            c.sock.settimeout(2)
            sent = 0
            with pytest.raises(socket.timeout):
                while sent < 64 * 1024 * 1024:
                    c.sock.sendall(msg)
                    sent += len(msg)
            sockets = [r for r in table(d, "SHOW SOCKETS") if r["type"] == "C"
                       and r["database"] == pgwtest.DATABASE]
            assert sockets and max(int(r["recv_pending"]) for r in sockets) < 1024 * 1024, sockets
            print(f"held session: {sent} bytes sent before the client blocked")
            assert sent < 64 * 1024 * 1024
        finally:
            assert run(d, "RESUME").returncode == 0


def test_suspend_holds_every_message_until_resume(d):
    in_txn = d.connect(user="core", autocommit=False)
    try:
        with in_txn.cursor() as cur:
            cur.execute("SELECT 1")
        res = run(d, "SUSPEND")
        assert res.returncode == 0, res.stderr
        assert state(d)["suspended"] == "yes"
        # Even inside a transaction the next message waits.
        held = pgwtest.Background(lambda: in_txn.cursor().execute("SELECT 2") or "done")
        assert pgwtest.wait_for(lambda: state(d)["held_clients"] == "1")
        assert run(d, "RESUME").returncode == 0
        held.join(30)
        assert held.result == "done", held.error
        in_txn.commit()
    finally:
        in_txn.close()


def test_reconnect_and_wait_close_replace_server_connections(d, pg):
    holder = d.connect(user="core")
    try:
        old_pid = backend_pid(holder)
        assert run(d, "RECONNECT").returncode == 0
        wait = pgwtest.Background(run, d, f"WAIT_CLOSE {pgwtest.DATABASE}")
        # Session pooling: the connection is the client's until it leaves.
        assert pgwtest.wait_for(lambda: lists(d)["close_needed_servers"] == "1")
        assert wait.is_alive(), "WAIT_CLOSE answered while the connection was still lent"
        assert backend_pid(holder) == old_pid
        holder.close()
        wait.join(30)
        assert not wait.is_alive() and wait.result.returncode == 0, wait.result
        gone = pgwtest.wait_for(lambda: pg.scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (old_pid,)) == 0)
        assert gone, "the old backend is still there after WAIT_CLOSE"
        fresh = d.connect(user="core")
        assert backend_pid(fresh) != old_pid
        fresh.close()
    finally:
        holder.close()


def test_disable_refuses_new_logins_and_enable_admits_them(d):
    stays = d.connect(user="core")
    try:
        assert run(d, f"DISABLE {pgwtest.DATABASE}").returncode == 0
        with pytest.raises(psycopg2.OperationalError) as err:
            d.connect(user="core")
        assert "not currently accepting connections" in str(err.value)
        with stays.cursor() as cur:
            cur.execute("SELECT 1")  # sessions already in go on
        dbs = {r["name"]: r for r in table(d, "SHOW DATABASES")}
        assert dbs[pgwtest.DATABASE]["disabled"] == "yes"
        assert run(d, f"DISABLE {pgwtest.DATABASE}").returncode != 0
        assert run(d, f"ENABLE {pgwtest.DATABASE}").returncode == 0
        d.connect(user="core").close()
    finally:
        stays.close()


def test_kill_database_ends_its_clients_and_holds_new_ones_until_resume(d, pg):
    victim = d.connect(user="core")
    other = d.connect(user="core", dbname="postgres")
    try:
        pid = backend_pid(victim)
        assert run(d, f"KILL {pgwtest.DATABASE}").returncode == 0
        with pytest.raises(psycopg2.Error):
            victim.cursor().execute("SELECT 1")
        with other.cursor() as cur:
            cur.execute("SELECT 1")  # another database is untouched
        assert pgwtest.wait_for(lambda: pg.scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)) == 0)
        newcomer = d.connect(user="core")
        held = pgwtest.Background(lambda: newcomer.cursor().execute("SELECT 1") or "done")
        assert pgwtest.wait_for(lambda: state(d)["held_clients"] == "1")
        assert run(d, f"RESUME {pgwtest.DATABASE}").returncode == 0
        held.join(30)
        assert held.result == "done", held.error
        newcomer.close()
    finally:
        victim.close()
        other.close()


SHOWS = {
    "DATABASES": ["name", "host", "port", "database", "pool_size", "min_pool_size", "pool_mode",
                  "current_connections", "clients", "paused", "disabled", "replicas"],
    "USERS": ["name", "group", "pool_mode", "console", "clients"],
    "MEM": ["name", "size", "used", "memtotal"],
    "STATE": ["key", "value"],
    "LISTS": ["list", "items"],
    "SOCKETS": ["type", "id", "user", "database", "state", "addr", "recv_pending",
                "send_pending", "worker"],
    "SESSIONS": ["id", "user", "group", "database", "client_name", "client_version",
                 "protocol_version", "addr", "idle_seconds", "calls_in_flight", "initialized"],
    "STATS": ["database", "total_query_count", "total_error_count", "total_denied_count",
              "total_rows", "total_sent", "total_query_time", "avg_query_count", "avg_rows",
              "avg_sent", "avg_query_time"],
    "STATS_TOTALS": ["database", "total_query_count", "total_error_count", "total_denied_count",
                     "total_rows", "total_sent", "total_query_time"],
    "STATS_AVERAGES": ["database", "avg_query_count", "avg_rows", "avg_sent", "avg_query_time"],
    "TOTALS": ["name", "value"],
    "HOSTS": ["host", "role", "up", "lag_seconds", "checks", "failures", "last_error"],
}


@pytest.mark.parametrize("what", sorted(SHOWS))
def test_every_new_show_renders(d, what):
    conn = d.connect(user="core")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
        header, rows = console(d, f"SHOW {what}")
        assert header == SHOWS[what]
        if what != "SESSIONS":
            assert rows, what
        if what == "DATABASES":
            assert {pgwtest.DATABASE, "pgwarden"} <= {r[0] for r in rows}
        if what == "USERS":
            roles = {r[0]: r[3] for r in rows}
            assert roles["core"] == "admin" and roles["agent"] == "stats"
        if what == "SOCKETS":
            assert {"C", "S"} <= {r[0] for r in rows}
    finally:
        conn.close()


def test_show_stats_counts_each_databases_statements(d):
    def count():
        rows = {r["database"]: r for r in table(d, "SHOW STATS_TOTALS")}
        return int(rows.get("postgres", {}).get("total_query_count", 0))
    before = count()
    conn = d.connect(user="core", dbname="postgres")
    try:
        with conn.cursor() as cur:
            for _ in range(5):
                cur.execute("SELECT 1")
    finally:
        conn.close()
    assert pgwtest.wait_for(lambda: count() == before + 5), (before, count())


def test_stats_users_may_only_show(d):
    header, rows = console(d, "SHOW STATE", user="agent")
    assert header == ["key", "value"]
    for command in ("PAUSE", "RESUME", "RECONNECT", "KILL CLIENT 1", "RELOAD", "SHUTDOWN"):
        res = run(d, command, user="agent")
        assert res.returncode != 0 and "may only SHOW" in res.stderr, (command, res.stderr)
    assert state(d)["paused"] == "no"
    assert d.alive()
    config = {r["key"]: r["value"] for r in table(d, "SHOW CONFIG")}
    assert config["stats_users"] == "agent" and config["admin_users"] == "core"
    assert config["logging.format"] == "text" and config["listen.so_reuseport"] == "false"


def test_control_commands_are_recorded_in_history(d):
    dsn = d.dsn(user="core", dbname="pgwarden", application_name="control-history")
    for command in ("DISABLE nosuchdb", "ENABLE nosuchdb", "PAUSE", "RESUME", "RESUME"):
        pgwtest.psql(dsn, "-c", command)
    rows = pgwtest.history_rows(d, "application_name = 'control-history'", want=5)
    got = [(r["sql_text"], r["outcome"], r["sqlstate"]) for r in rows]
    assert got == [("DISABLE nosuchdb", "ok", ""), ("ENABLE nosuchdb", "ok", ""),
                   ("PAUSE", "ok", ""), ("RESUME", "ok", ""), ("RESUME", "error", "55000")], got
    assert all(r["statement_kind"] == "admin" for r in rows)


def test_pause_and_resume_under_pgbench_fail_no_transaction(d):
    args = ["-h", "127.0.0.1", "-p", str(d.port), "-U", "core", pgwtest.DATABASE]
    bench = pgwtest.Background(pgwtest.run_pgbench, args, "simple", clients=4, seconds=6,
                               password=d.passwords["core"])
    assert pgwtest.wait_for(lambda: any(int(r["total_query_count"]) > 50 for r in
                                        table(d, "SHOW STATS_TOTALS")
                                        if r["database"] == pgwtest.DATABASE))
    assert run(d, "PAUSE").returncode == 0
    assert pgwtest.wait_for(lambda: int(state(d)["held_clients"]) >= 1)
    assert run(d, "RESUME").returncode == 0
    bench.join(120)
    out = bench.result.stdout + bench.result.stderr
    assert bench.result.returncode == 0, out
    failed = re.search(r"number of failed transactions: (\d+)", out)
    processed = re.search(r"number of transactions actually processed: (\d+)", out)
    assert failed and int(failed.group(1)) == 0, out
    print(f"pgbench -S -c 4 -T 6 with a PAUSE/RESUME: {processed.group(1)} transactions, "
          f"failed {failed.group(1)}")


def test_shutdown_wait_for_clients_lets_a_client_finish(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg, overrides={"admin_users": ["core"]})
    client = d.connect(user="core")
    res = run(d, "SHUTDOWN WAIT_FOR_CLIENTS")
    assert res.returncode == 0, res.stderr
    # No new connections; the one in goes on.
    assert pgwtest.wait_for(lambda: _refused(d.port))
    for _ in range(3):
        with client.cursor() as cur:
            cur.execute("SELECT 1")
    assert d.alive()
    client.close()
    assert d.wait_exit(15) == 0, d.log()[-3000:]


def test_shutdown_stops_the_process(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg, overrides={"admin_users": ["core"]})
    run(d, "SHUTDOWN")
    assert d.wait_exit(15) == 0, d.log()[-3000:]


def _refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        return True


def test_pause_holds_the_mcp_endpoints_statements_until_resume(pgwarden_factory, pg):
    """PAUSE waits for an MCP statement running now, then holds new ones (they wait, with no
    error) until RESUME, as it does a SQL client's."""
    import mcpsupport
    d, tokens = mcpsupport.start_mcp_daemon(
        pgwarden_factory, pg, configure=lambda cfg: cfg.update(admin_users=["core"]))

    def mcp_query(sql):
        c = mcpsupport.McpHttp(d.mcp_port, tokens["core"], timeout=60)
        try:
            c.initialize()
            return c.tool("query", {"sql": sql})
        finally:
            c.close()

    running = pgwtest.Background(mcp_query, "SELECT pg_sleep(1.5) AS slept")
    assert pgwtest.wait_for(
        lambda: any(r["calls_in_flight"] == "1" for r in table(d, "SHOW SESSIONS")))
    # Running on the server, not only in flight: a call that PAUSE finds still before the server
    # (its first catalog load, a connection being made) is held like a new one, until RESUME.
    assert pgwtest.wait_for(lambda: pg.scalar(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE state = 'active' AND query LIKE 'SELECT pg_sleep(1.5) AS slept%'"))
    paused = pgwtest.Background(run, d, "PAUSE")
    running.join(30)
    paused.join(30)
    assert running.error is None and not running.result.get("isError"), running.result
    assert paused.result.returncode == 0, paused.result.stderr
    # PAUSE answered only once the running statement had its answer.
    assert paused.finished_at >= running.finished_at

    held = pgwtest.Background(mcp_query, "SELECT 'after resume' AS said")
    assert pgwtest.wait_for(
        lambda: any(r["calls_in_flight"] == "1" for r in table(d, "SHOW SESSIONS")))
    # Held: no answer while paused, however long the pause (several janitor rounds here).
    assert pgwtest.wait_for(lambda: not held.is_alive(), timeout=1.0) is False
    assert state(d)["paused"] == "yes"
    res = run(d, "RESUME")
    assert res.returncode == 0, res.stderr
    held.join(30)
    assert held.error is None, held.error
    assert not held.result.get("isError"), held.result
    assert "after resume" in held.result["content"][0]["text"]
