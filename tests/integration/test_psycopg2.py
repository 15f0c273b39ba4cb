"""psycopg2 (libpq) through pgwarden, over TCP and the Unix socket: parameters, a server-side named
cursor, an error mid-transaction then ROLLBACK, notices, cancel, and ParameterStatus."""

import datetime
import decimal
import threading
import time

import psycopg2
import psycopg2.errors
import pytest

import pgwtest


def test_parameters_of_several_types(pgwarden):
    with pgwarden.connect() as conn, conn.cursor() as cur:
        values = (42, "it's \"quoted\" ünïcode", datetime.date(2024, 2, 29),
                  decimal.Decimal("12345.678901234567890"), True, None,
                  datetime.datetime(2023, 7, 1, 12, 30, 15))
        cur.execute("select %s::int, %s::text, %s::date, %s::numeric, %s::boolean, %s::text, "
                    "%s::timestamp", values)
        assert cur.fetchone() == values
    conn.close()


def test_parameters_against_the_table(pgwarden, pg):
    sql = ("select carrier, count(*), sum(weight) from fct_shipments "
           "where ship_date between %s and %s and status = %s group by carrier order by carrier")
    params = (datetime.date(2023, 6, 1), datetime.date(2023, 8, 31), "DELIVERED")
    with pgwarden.connect() as conn, conn.cursor() as cur:
        cur.execute(sql, params)
        got = cur.fetchall()
    conn.close()
    assert got == pg.execute(sql, params)
    assert len(got) == 5


@pytest.mark.parametrize("unix", [False, True], ids=["tcp", "unix"])
def test_server_side_named_cursor(pgwarden, unix):
    user = "analyst" if unix else "core"
    conn = pgwarden.connect(user=user, unix=unix, autocommit=False)
    try:
        cur = conn.cursor(name="shipments_cursor")
        cur.itersize = 700
        cur.execute("select id, status from fct_shipments where id <= 5000 order by id")
        ids, delayed = [], 0
        for row in cur:
            ids.append(row[0])
            delayed += row[1] == "DELAYED"
        cur.close()
        assert ids == list(range(1, 5001))
        assert delayed == sum(1 for i in range(1001, 5001) if i % 20 == 7)
        conn.rollback()
    finally:
        conn.close()


def test_error_mid_transaction_then_rollback(pgwarden):
    conn = pgwarden.connect(autocommit=False)
    try:
        cur = conn.cursor()
        cur.execute("select count(*) from fct_shipments where id < 10")
        assert cur.fetchone() == (9,)
        with pytest.raises(psycopg2.errors.DivisionByZero) as err:
            cur.execute("select 1 / (id - id) from fct_shipments where id = 1")
        assert err.value.pgcode == "22012"
        with pytest.raises(psycopg2.errors.InFailedSqlTransaction):
            cur.execute("select 1")
        conn.rollback()
        cur.execute("select 'usable again'")
        assert cur.fetchone() == ("usable again",)
        conn.commit()
        assert conn.get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_IDLE
    finally:
        conn.close()


def test_notices_arrive(pgwarden):
    conn = pgwarden.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("select pgw_notice('careful: sample data')")
        assert any("careful: sample data" in n for n in conn.notices)
    finally:
        conn.close()


def test_parameter_status_follows_set(pgwarden):
    conn = pgwarden.connect(application_name="pgw-test-app")
    try:
        assert conn.get_parameter_status("application_name") == "pgw-test-app"
        with conn.cursor() as cur:
            cur.execute("set application_name = 'renamed-app'")
            assert conn.get_parameter_status("application_name") == "renamed-app"
            cur.execute("show application_name")
            assert cur.fetchone() == ("renamed-app",)
        assert conn.get_parameter_status("server_version").startswith("15")
    finally:
        conn.close()


def test_conn_cancel_from_a_thread(pgwarden):
    conn = pgwarden.connect()
    try:
        timer = threading.Timer(1.0, conn.cancel)
        timer.start()
        started = time.monotonic()
        with pytest.raises(psycopg2.errors.QueryCanceled) as err:
            with conn.cursor() as cur:
                cur.execute("select pg_sleep(30)")
        elapsed = time.monotonic() - started
        timer.join()
        assert "user request" in str(err.value)
        assert elapsed < 8
        with conn.cursor() as cur:
            cur.execute("select 'after cancel'")
            assert cur.fetchone() == ("after cancel",)
    finally:
        conn.close()


def test_clients_without_application_name_get_pooled_connections(pgwarden):
    """libpq sends no application_name unless asked: such clients must connect one after the
    other, the later ones on a server connection the earlier ones left in the pool."""
    for i in range(4):
        conn = psycopg2.connect(pgwarden.dsn())
        try:
            with conn.cursor() as cur:
                cur.execute("select %s", (i,))
                assert cur.fetchone() == (i,)
        finally:
            conn.close()


def test_server_connections_are_reused_and_reset(pgwarden):
    """Sequential clients share pooled server connections, and none sees its predecessor's
    session state (the connection is reset between clients)."""
    pids = []
    for i in range(20):
        conn = pgwarden.connect()
        with conn.cursor() as cur:
            cur.execute("select pg_backend_pid(), current_setting('DateStyle'), "
                        "(select count(*) from pg_prepared_statements)")
            pid, datestyle, prepared = cur.fetchone()
            assert datestyle == "ISO, MDY", f"client {i} inherited DateStyle {datestyle}"
            assert prepared == 0, f"client {i} inherited {prepared} prepared statements"
            cur.execute("set datestyle = 'SQL, DMY'")
            cur.execute("prepare leftover as select 1")
        conn.close()
        pids.append(pid)
        time.sleep(0.05)
    assert len(set(pids)) < len(pids) / 2, f"server backends were not reused: {pids}"
