"""The admin console (database "pgwarden") driven with plain psql: every SHOW renders as a table
with its column headers, RELOAD applies a changed guard to the next session, KILL CLIENT ends a
client, unknown commands point at SHOW HELP, every command is one record in query history, and users
not in admin_users get 42501."""


import psycopg2
import pytest

import pgwtest

COLUMNS = {
    "CLIENTS": ["id", "user", "database", "state", "addr", "application_name", "group", "agent_id",
                "conversation_id", "connected_seconds", "statements", "pool_mode", "server_id", "worker"],
    "SERVERS": ["id", "pool", "database", "state", "backend_pid", "idle_seconds", "last_error",
                "client_id", "assignments", "worker", "host"],
    "POOLS": ["pool", "role", "database", "total", "connecting", "idle", "active", "resetting",
              "waiting", "default_mode", "host"],
    "TOTALS": ["name", "value"],
    "GROUPS": ["group", "guards", "users", "search_path"],
    "GUARDS": ["group", "position", "kind", "codes"],
    "CONVERSATIONS": ["user", "conversation_id", "agent_id", "statements", "denials",
                      "budget_left", "last_seen_seconds"],
    "CONFIG": ["key", "value"],
    "VERSION": ["version"],
    "HELP": ["command", "description"],
}


# One loop, and two: with two the console gathers every loop's rows before it answers.
@pytest.fixture(scope="module", params=[1, 2], ids=["1-loop", "2-loops"])
def admin_daemon(pgwarden_bin, pg, request):
    from conftest import DaemonSet
    daemons = DaemonSet(pgwarden_bin)
    try:
        yield daemons.start(pg, overrides={"admin_users": ["core"],
                                           "daemon": {"workers": request.param}})
    finally:
        daemons.teardown()


def console(d, command, user="core"):
    """psql -A (unaligned, '|' between fields) on the console: (header, rows) or raises."""
    res = pgwtest.psql(d.dsn(user=user, dbname="pgwarden"), "-A", "-c", command)
    assert res.returncode == 0, res.stderr
    lines = [l for l in res.stdout.splitlines() if l]
    assert lines[-1].startswith("(") and lines[-1].endswith(("row)", "rows)")), res.stdout
    return lines[0].split("|"), [l.split("|") for l in lines[1:-1]]


@pytest.mark.parametrize("what", sorted(COLUMNS))
def test_every_show_renders_in_psql(admin_daemon, what):
    # Some traffic first, so clients, pools, servers and conversations have rows.
    conn = admin_daemon.connect(user="agent", application_name="agent-app",
                                options="-c pgwarden.conversation_id=conv-42")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
        header, rows = console(admin_daemon, f"SHOW {what}")
        assert header == COLUMNS[what]
        if what in ("CLIENTS", "POOLS", "SERVERS", "TOTALS", "GROUPS", "GUARDS", "CONFIG",
                    "VERSION", "HELP"):
            assert rows, what
        if what == "CLIENTS":
            apps = {r[5] for r in rows}
            assert "agent-app" in apps, rows
            # The console's own session is listed too, on database pgwarden.
            assert any(r[2] == "pgwarden" for r in rows), rows
        if what == "VERSION":
            assert rows[0][0].startswith("pgwarden ")
        if what == "CONFIG":
            keys = dict(r for r in rows if len(r) == 2)
            assert keys["admin_users"] == "core"
            assert pgwtest.READER_PASSWORD not in "\n".join("|".join(r) for r in rows)
        if what == "GUARDS":
            assert ["agents", "1", "read_only"] == rows[0][:3] or \
                any(r[0] == "agents" and r[2] == "read_only" for r in rows), rows
        if what == "TOTALS":
            names = {r[0] for r in rows}
            assert {"clients_accepted", "statements_ok", "statements_denied"} <= names
    finally:
        conn.close()


def test_show_conversations_lists_a_conversation(admin_daemon):
    conn = admin_daemon.connect(user="agent", options="-c pgwarden.conversation_id=conv-77 "
                                                      "-c pgwarden.agent_id=bot-1")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            cur.execute("SELECT 2")
        header, rows = console(admin_daemon, "SHOW CONVERSATIONS")
        mine = [r for r in rows if r[0] == "agent" and r[1] == "conv-77"]
        assert len(mine) == 1, rows
        assert mine[0][2] == "bot-1"
        assert int(mine[0][3]) >= 2
    finally:
        conn.close()


def test_unknown_command_points_at_show_help(admin_daemon):
    res = pgwtest.psql(admin_daemon.dsn(user="core", dbname="pgwarden"), "-c", "SHOW NOTHING")
    assert res.returncode != 0
    assert "unknown admin console command" in res.stderr
    assert "SHOW HELP" in res.stderr


def test_console_commands_are_recorded_in_history(admin_daemon):
    dsn = admin_daemon.dsn(user="core", dbname="pgwarden", application_name="console-history")
    assert pgwtest.psql(dsn, "-c", "SHOW VERSION; SHOW HELP").returncode == 0
    assert pgwtest.psql(dsn, "-c", "SHOW NOSUCH").returncode != 0
    rows = pgwtest.history_rows(admin_daemon, "application_name = 'console-history'", want=3)
    got = [(r["sql_text"], r["outcome"], r["sqlstate"]) for r in rows]
    # One record per command, two of them from one Query text.
    assert got == [("SHOW VERSION", "ok", ""), ("SHOW HELP", "ok", ""),
                   ("SHOW NOSUCH", "error", "42601")], got
    for r in rows:
        assert (r["database_name"], r["user_name"], r["statement_kind"], r["protocol"]) == (
            "pgwarden", "core", "admin", "simple")
        assert r["query_intent_inferred"] == "admin"
    assert rows[0]["rows_returned"] == 1 and rows[1]["rows_returned"] > 5
    assert "unknown admin console command" in rows[2]["error_message"]


def test_non_admin_is_refused_with_42501(admin_daemon):
    with admin_daemon.raw() as c:
        with pytest.raises(pgwtest.ServerError) as err:
            c.login("agent", admin_daemon.passwords["agent"], database="pgwarden")
        assert err.value.sqlstate == "42501"
    res = pgwtest.psql(admin_daemon.dsn(user="agent", dbname="pgwarden"), "-c", "SHOW HELP")
    assert res.returncode != 0 and "not an admin user" in res.stderr


def test_kill_client_ends_that_client(admin_daemon):
    victim = admin_daemon.connect(user="core", application_name="victim-app")
    try:
        with victim.cursor() as cur:
            cur.execute("SELECT 1")
        _, rows = console(admin_daemon, "SHOW CLIENTS")
        ids = [r[0] for r in rows if r[5] == "victim-app"]
        assert len(ids) == 1, rows
        header, _ = console(admin_daemon, "SHOW HELP")  # the console itself keeps working
        res = pgwtest.psql(admin_daemon.dsn(user="core", dbname="pgwarden"), "-c",
                           f"KILL CLIENT {ids[0]}")
        assert res.returncode == 0, res.stderr
        with pytest.raises(psycopg2.Error):
            with victim.cursor() as cur:
                cur.execute("SELECT 1")
        assert pgwtest.wait_for(lambda: all(r[5] != "victim-app"
                                            for r in console(admin_daemon, "SHOW CLIENTS")[1]))
        res = pgwtest.psql(admin_daemon.dsn(user="core", dbname="pgwarden"), "-c",
                           "KILL CLIENT 999999")
        assert res.returncode != 0 and "no client with id" in res.stderr
    finally:
        victim.close()


def deny_shipments_from_now_on(d):
    """Reads fct_shipments as user core, then writes a config whose guard denies that table
    (taking effect at the next reload). Returns the statement."""
    sql = "SELECT count(*) FROM fct_shipments WHERE id < 10"
    conn = d.connect(user="core")
    with conn.cursor() as cur:
        cur.execute(sql)
    conn.close()
    d.config["groups"]["passthrough"] = {
        "guards": [{"kind": "tables", "deny": ["public.fct_shipments"]}]}
    d.write_config()
    return sql


def test_reload_applies_a_changed_guard(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg, overrides={"admin_users": ["core"]})
    sql = deny_shipments_from_now_on(d)
    res = pgwtest.psql(d.dsn(user="core", dbname="pgwarden"), "-c", "RELOAD")
    assert res.returncode == 0, res.stderr
    assert "RELOAD" in res.stdout

    conn = d.connect(user="core")
    try:
        with pytest.raises(psycopg2.Error) as err:
            with conn.cursor() as cur:
                cur.execute(sql)
        assert err.value.pgcode == "42501", err.value
        assert "fct_shipments" in str(err.value)
    finally:
        conn.close()
    _, rows = console(d, "SHOW GUARDS")
    assert ["passthrough", "1", "tables"] in [r[:3] for r in rows]

    # A config that does not parse is refused and the running one kept.
    d.config_path.write_text(d.config_path.read_text() + "\nnot_a_key: 1\n")
    res = pgwtest.psql(d.dsn(user="core", dbname="pgwarden"), "-c", "RELOAD")
    assert res.returncode != 0 and "reload failed" in res.stderr
    _, rows = console(d, "SHOW GUARDS")
    assert ["passthrough", "1", "tables"] in [r[:3] for r in rows]
