"""Fidelity: where pgwarden lets a statement through, the client sees what the server itself would
answer, and where it refuses, the client is left as the server would leave it. Each test compares
pgwarden's answer with the server's direct answer where it can: deep statements analysed rather
than refused, harmless reads of a read-only group allowed, a refusal inside a transaction block
aborting it, pgwarden's own syntax errors with the server's SQLSTATE and HINT, RESET of a startup
setting going back to the client's value, and a dropped database's pool giving up its retries."""

import secrets
import time

import psycopg2
import pytest

import pgwtest
from conftest import module_daemon

GUARDS = [{"kind": "read_only"}, {"kind": "functions"}]


def _users():
    pw = {u: f"{u}-" + secrets.token_hex(6) for u in ("ro", "rotx", "core")}
    users = [
        {"name": "ro", "password": pgwtest.scram_verifier(pw["ro"]), "group": "readers"},
        {"name": "rotx", "password": pgwtest.scram_verifier(pw["rotx"]), "group": "readers_tx"},
        {"name": "core", "password": pgwtest.scram_verifier(pw["core"]), "group": "passthrough"},
    ]
    return users, pw


def _start(daemons, pg, extra=None):
    users, pw = _users()
    overrides = {
        "groups": {
            "readers": {"search_path": ["public"], "guards": GUARDS, "pool_mode": "session"},
            "readers_tx": {"search_path": ["public"], "guards": GUARDS, "pool_mode": "transaction"},
            "passthrough": {"guards": []},
        },
    }
    if extra:
        overrides = pgwtest.deep_merge(overrides, extra)
    d = daemons.start(pg, overrides=overrides, users=users, start=False)
    d.passwords = pw
    d.start()
    return d


@pytest.fixture(scope="module")
def daemon(pg, pgwarden_bin):
    yield from module_daemon(pgwarden_bin, lambda daemons: _start(daemons, pg))


def _direct(pg, **kw):
    conn = pg.connect(**kw)
    conn.autocommit = True
    return conn


def _through(daemon, user="ro", **kw):
    return daemon.connect(user=user, password=daemon.passwords[user], **kw)


def _answer(conn, sql):
    """(rows, None) or (None, (sqlstate, message, hint)) for one statement."""
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return (cur.fetchall() if cur.description else cur.statusmessage), None
    except psycopg2.Error as e:
        diag = e.diag
        return None, (e.pgcode, diag.message_primary, diag.message_hint)


# ---- 4. deep statements -------------------------------------------------------------------

def _nested(n):
    return "SELECT " + "(SELECT " * n + "1" + ")" * n


def _union(n):
    return "SELECT 1" + "".join(f" UNION ALL SELECT {i + 1}" for i in range(1, n))


def _plus(n):
    return "SELECT 1" + "+1" * (n - 1)


def _coalesce(n):
    return "SELECT " + "coalesce(" * n + "1" + ", 2)" * n


@pytest.mark.parametrize("sql", [_nested(145), _union(1009), _plus(508), _coalesce(338),
                                 _nested(1000), _plus(4000), _coalesce(4000)],
                         ids=["nested145", "union1009", "plus508", "coalesce338", "nested1000",
                              "plus4000", "coalesce4000"])
@pytest.mark.parametrize("user", ["ro", "rotx"])
def test_deep_statements_answered_as_the_server_does(daemon, pg, sql, user):
    direct = _direct(pg)
    conn = _through(daemon, user)
    try:
        expected = _answer(direct, sql)
        assert expected[1] is None, expected
        got = _answer(conn, sql)
        if pgwtest.SANITIZED and got[1] is not None:
            # AddressSanitizer's larger frames lower the depth the loop's stack allows: refused
            # with the honest message, never a crash.
            assert got[1][0] == "54001" and "nested deeper than pgwarden analyses" in got[1][1], got
            return
        assert got == expected
    finally:
        conn.close()
        direct.close()


def test_deeper_than_analysed_is_refused_honestly(daemon):
    conn = _through(daemon)
    try:
        rows, err = _answer(conn, _nested(2600))
        assert rows is None
        assert "nested deeper than pgwarden analyses" in err[1], err
        assert _answer(conn, "SELECT 1") == ([(1,)], None)
    finally:
        conn.close()


# ---- 2. a refusal inside a transaction block aborts it ------------------------------------

def _after_refusal(conn, refused_sql, begin="BEGIN"):
    """What a client sees after a statement refused inside a transaction block: the status the
    refusal left, the next statement's SQLSTATE and COMMIT's command tag."""
    cur = conn.cursor()
    cur.execute(begin)
    cur.execute("SELECT 1")
    with pytest.raises(psycopg2.Error):
        cur.execute(refused_sql)
    status = conn.info.transaction_status
    try:
        cur.execute("SELECT 1")
        next_state = None
    except psycopg2.Error as e:
        next_state = e.pgcode
    cur.execute("COMMIT")
    return status, next_state, cur.statusmessage


@pytest.mark.parametrize("user", ["ro", "rotx"])
def test_refusal_in_transaction_block_aborts_it_simple(daemon, pg, user):
    direct = pg.connect()
    direct.autocommit = True
    conn = _through(daemon, user)
    try:
        # The server refusing a write in a read-only transaction: aborted, 25P02, ROLLBACK.
        expected = _after_refusal(direct, "CREATE TABLE fidelity_never (a int)", "BEGIN READ ONLY")
        assert expected == (psycopg2.extensions.TRANSACTION_STATUS_INERROR, "25P02", "ROLLBACK")
        marker = "fidelity-abort-" + secrets.token_hex(4)
        assert _after_refusal(conn, f"CREATE TABLE fidelity_never (a int) /* {marker} */") == expected
        # The connection is clean for the next transaction.
        assert _answer(conn, "SELECT 2") == ([(2,)], None)
        # History: the denial once; pgwarden's own statement never.
        rows = pgwtest.history_rows(daemon, "sql_text LIKE ?", (f"%{marker}%",))
        assert len(rows) == 1 and rows[0]["outcome"] == "denied", [dict(r) for r in rows]
        time_rows = pgwtest.history_rows(daemon, "sql_text LIKE '%pgwarden$BEGIN%'", want=0,
                                         timeout=0)
        assert time_rows == []
    finally:
        conn.close()
        direct.close()


def _raw_status(client):
    """Reads up to ReadyForQuery: (sqlstates of the errors, the status byte)."""
    errors = []
    while True:
        tag, body = client.read_msg()
        if tag == b"E":
            errors.append(pgwtest.parse_fields(body).get("C"))
        elif tag == b"Z":
            return errors, body[:1].decode()


def _extended_refusal(client, begin, refused):
    client.query(begin)
    client.send_extended("SELECT 1")
    client.send_extended(refused)
    client.send_extended("SELECT 2")  # skipped up to the Sync, by the server or by pgwarden
    client.send_msg(b"S")
    first = _raw_status(client)
    client.send_extended("SELECT 3")
    client.send_msg(b"S")
    second = _raw_status(client)
    _, tags, _ = client.query("COMMIT")
    return first, second, tags


@pytest.mark.parametrize("user", ["ro", "rotx"])
def test_refusal_in_transaction_block_aborts_it_extended(daemon, pg, user):
    with pgwtest.RawClient.tcp("127.0.0.1", pg.port) as direct:
        direct.login("postgres", pgwtest.SUPERUSER_PASSWORD)
        expected = _extended_refusal(direct, "BEGIN READ ONLY", "CREATE TABLE fidelity_never (a int)")
    assert expected == ((["25006"], "E"), (["25P02"], "E"), ["ROLLBACK"])
    with pgwtest.RawClient.tcp("127.0.0.1", daemon.port) as client:
        client.login(user, daemon.passwords[user])
        got = _extended_refusal(client, "BEGIN", "CREATE TABLE fidelity_never (a int)")
        assert got == ((["42501"], "E"), (["25P02"], "E"), ["ROLLBACK"])
        assert client.query("SELECT 4")[0] == [("4",)]


def test_refusal_outside_a_transaction_block_leaves_it_idle(daemon):
    conn = _through(daemon)
    try:
        with pytest.raises(psycopg2.Error):
            conn.cursor().execute("CREATE TABLE fidelity_never (a int)")
        assert conn.info.transaction_status == psycopg2.extensions.TRANSACTION_STATUS_IDLE
    finally:
        conn.close()


# ---- 5. harmless statements a read-only group used to refuse ------------------------------

HARMLESS = [
    "SELECT ts_rewrite('a & b'::tsquery, 'a'::tsquery, 'c'::tsquery)",
    "EXPLAIN SELECT * FROM scratch WHERE id = 1 FOR UPDATE",
    "EXPLAIN WITH d AS (DELETE FROM scratch RETURNING *) SELECT count(*) FROM d",
    "EXPLAIN SELECT * FROM pgbench_accounts WHERE aid = 1 FOR UPDATE",
    "SET default_transaction_read_only = on",
    "RESET default_transaction_read_only",
    "SET default_transaction_read_only TO DEFAULT",
    "RESET ROLE",
    "SET ROLE NONE",
    "RESET SESSION AUTHORIZATION",
    "SET SESSION AUTHORIZATION DEFAULT",
]


@pytest.mark.parametrize("sql", HARMLESS)
def test_harmless_statements_allowed(daemon, pg, sql):
    direct = _direct(pg, user=pgwtest.READER_ROLE, password=pgwtest.READER_PASSWORD)
    conn = _through(daemon)
    try:
        direct.cursor().execute("SET default_transaction_read_only = on")
        expected = _answer(direct, sql)
        got = _answer(conn, sql)
        if expected[1] is not None or not sql.startswith("EXPLAIN"):
            # The server's own answer, its refusals included (the reader role may not lock or
            # delete: "permission denied" is the server's word, not a pgwarden denial).
            assert got == expected
        else:
            assert got[1] is None, got  # a plan (costs may differ by chance)
        assert _answer(conn, "SHOW default_transaction_read_only") == ([("on",)], None)
    finally:
        conn.close()
        direct.close()


@pytest.mark.parametrize("sql", [
    "SELECT ts_rewrite('a & b'::tsquery, 'SELECT ''a''::tsquery, ''c''::tsquery')",
    "EXPLAIN ANALYZE WITH d AS (DELETE FROM scratch RETURNING *) SELECT count(*) FROM d",
    "EXPLAIN ANALYZE SELECT * FROM scratch WHERE id = 1 FOR UPDATE",
    "SET default_transaction_read_only = off",
    "SET ROLE postgres",
    "SET SESSION AUTHORIZATION postgres",
])
def test_still_refused(daemon, sql):
    conn = _through(daemon)
    try:
        rows, err = _answer(conn, sql)
        assert rows is None and err[0] == "42501", (rows, err)
    finally:
        conn.close()


# ---- 7. a dropped database's pool stops knocking --------------------------------------------

def test_dropped_database_is_not_retried_forever(pg, pgwarden_factory):
    d = _start(pgwarden_factory, pg, {"upstream": {"stats_refresh": "1s"}})
    db = "fidelity_gone"
    pg.execute(f"DROP DATABASE IF EXISTS {db}")
    pg.execute(f"CREATE DATABASE {db}")
    conn = _through(d, "core", dbname=db)
    assert _answer(conn, "SELECT 1") == ([(1,)], None)
    conn.close()
    gone = f'database "{db}" does not exist'
    offset = pg.log_offset()
    pg.execute(f"DROP DATABASE {db} WITH (FORCE)")
    # With a refresh every second, the refresher used to log in (and fail) every second, forever.
    pgwtest.wait_for(lambda: gone in pg.log_since(offset), timeout=10)
    time.sleep(6)
    fatals = pg.log_since(offset).count(gone)
    assert fatals == 1, pg.log_since(offset)[-3000:]
    assert d.log().count("the database is gone") == 1
    # A client asking for it again (it exists again) brings the refreshes back.
    pg.execute(f"CREATE DATABASE {db}")
    conn = _through(d, "core", dbname=db)
    try:
        assert _answer(conn, "SELECT 1") == ([(1,)], None)
    finally:
        conn.close()
        pg.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


# ---- 1. RESET of a startup setting goes back to the client's value -------------------------

RESET_CASES = [
    "set datestyle=iso; reset datestyle; select date '2020-01-02'",
    "set datestyle=iso; set datestyle to default; select date '2020-01-02'",
    "set timezone='UTC'; reset timezone; select timestamptz '2020-01-02 03:04:05+00'",
    "set intervalstyle=iso_8601; reset intervalstyle; select interval '1 day 2 hours'",
    "set extra_float_digits=3; reset extra_float_digits; select 0.1::float8",
    "set application_name='x'; reset application_name; select current_setting('application_name')",
    "select current_setting('application_name')",
    "begin; set local datestyle=iso; set local datestyle to default; select date '2020-01-02'; commit",
]
STARTUP = {"DateStyle": "Postgres, MDY", "TimeZone": "Asia/Tokyo",
           "IntervalStyle": "postgres_verbose", "extra_float_digits": "0"}


def _reset_answers(client, sql):
    """Rows, command tags and the ParameterStatus values the client holds after `sql`."""
    rows, tags, _ = client.query(sql)
    return rows, tags, {k: client.params.get(k) for k in ("DateStyle", "TimeZone", "IntervalStyle",
                                                        "application_name")}


@pytest.mark.parametrize("sql", RESET_CASES)
@pytest.mark.parametrize("user", ["ro", "rotx", "core"])
def test_reset_returns_to_the_clients_startup_value(daemon, pg, sql, user):
    """A client that sent DateStyle, TimeZone, IntervalStyle and extra_float_digits (and no
    application_name) at startup, as PGDATESTYLE and the like do: its RESETs answer as on a direct
    connection, command tags and ParameterStatus included."""
    with pgwtest.RawClient.tcp("127.0.0.1", pg.port) as direct:
        direct.login("postgres", pgwtest.SUPERUSER_PASSWORD, extra=STARTUP)
        expected = _reset_answers(direct, sql)
    with pgwtest.RawClient.tcp("127.0.0.1", daemon.port) as client:
        client.login(user, daemon.passwords[user], extra=STARTUP)
        assert _reset_answers(client, sql) == expected
        # and the next statement on a (possibly different) pooled connection still agrees
        assert client.query("select date '2020-01-02'")[0] == [("01-02-2020",)]


def test_a_startup_datestyle_without_an_order_keeps_the_servers_order(daemon, pg):
    """pgjdbc sends DateStyle=ISO, a style without a field order: on a direct login the order
    stays the server's (MDY), and so it must through a pooled connection whose last client set
    DMY (before, that client's order leaked: '12.27.2001' was out of range)."""
    sql = "select date '12.27.2001'"
    reset = "set datestyle='sql, dmy'; reset datestyle; " + sql
    with pgwtest.RawClient.tcp("127.0.0.1", pg.port) as direct:
        direct.login("postgres", pgwtest.SUPERUSER_PASSWORD, extra={"DateStyle": "ISO"})
        expected = (direct.query(sql)[0], direct.params.get("DateStyle"))
        expected_reset = direct.query(reset)[0]
    assert expected == ([("2001-12-27",)], "ISO, MDY")
    with pgwtest.RawClient.tcp("127.0.0.1", daemon.port) as first:
        first.login("rotx", daemon.passwords["rotx"], extra={"DateStyle": "Postgres, DMY"})
        assert first.query("select 1")[0] == [("1",)]  # its connection goes back with DMY set
        with pgwtest.RawClient.tcp("127.0.0.1", daemon.port) as client:
            client.login("rotx", daemon.passwords["rotx"], extra={"DateStyle": "ISO"})
            assert (client.query(sql)[0], client.params.get("DateStyle")) == expected
            assert client.query(reset)[0] == expected_reset
