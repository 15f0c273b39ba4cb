"""What a client may put in its StartupMessage: pgwarden's own keys (agent_id, conversation_id,
query_intent) are taken and never reach PostgreSQL; ordinary client parameters pass; attempts to
set server settings are refused with a FATAL naming the parameter."""

import subprocess
import uuid

import psycopg2
import pytest

import pgwtest
from pgwtest import psql


def ids():
    tag = uuid.uuid4().hex[:10]
    return f"agent-{tag}", f"conv-{tag}"


def assert_never_reached_server(pg, offset, *values):
    log = pg.log_since(offset)
    for v in values:
        assert v not in log, f"{v!r} reached the server:\n{log[-3000:]}"
    activity = pg.execute("select coalesce(application_name, '') || ' ' || coalesce(query, '') "
                          "from pg_stat_activity")
    for (row,) in activity:
        for v in values:
            assert v not in row


def test_identity_via_options_with_psql(pgwarden, pg):
    agent, conv = ids()
    offset = pg.log_offset()
    r = psql(pgwarden.dsn(options=f"-c agent_id={agent} -c conversation_id={conv}"),
             "-At", "-c", "select 'identified'")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "identified"
    assert_never_reached_server(pg, offset, agent, conv)
    # pgwarden read them: its connect line carries both.
    assert pgwtest.wait_for(lambda: agent in pgwarden.log() and conv in pgwarden.log(), 5), \
        pgwarden.log()[-2000:]


def test_identity_via_options_with_psycopg2(pgwarden, pg):
    agent, conv = ids()
    offset = pg.log_offset()
    conn = pgwarden.connect(options=f"-c agent_id={agent} -c conversation_id={conv} "
                                    f"-c query_intent=lookup")
    try:
        with conn.cursor() as cur:
            cur.execute("select count(*) from fct_shipments where id <= 10")
            assert cur.fetchone() == (10,)
    finally:
        conn.close()
    assert_never_reached_server(pg, offset, agent, conv)
    assert pgwtest.wait_for(lambda: agent in pgwarden.log(), 5)


def test_identity_via_startup_parameters(pgwarden, pg):
    """Drivers that can send arbitrary startup parameters (libpq cannot) name them directly."""
    agent, conv = ids()
    offset = pg.log_offset()
    with pgwarden.raw() as c:
        c.login("agent", pgwarden.passwords["agent"],
                extra={"agent_id": agent, "conversation_id": conv, "query_intent": "aggregation",
                       "application_name": "raw-client"})
        rows, tags, _ = c.query("select current_setting('application_name'), 7 * 6")
        assert rows == [("raw-client", "42")]
        assert tags == ["SELECT 1"]
        assert c.backend_key is not None
        assert "agent_id" not in c.params and "conversation_id" not in c.params
    assert_never_reached_server(pg, offset, agent, conv, "aggregation")
    assert pgwtest.wait_for(lambda: agent in pgwarden.log() and conv in pgwarden.log(), 5)


def test_identity_via_startup_parameters_over_unix_socket(pgwarden, pg):
    agent, conv = ids()
    offset = pg.log_offset()
    with pgwarden.raw(unix=True) as c:
        c.login("analyst", None, extra={"agent_id": agent, "conversation_id": conv})
        rows, _, _ = c.query("select 1")
        assert rows == [("1",)]
    assert_never_reached_server(pg, offset, agent, conv)


def test_jdbc_style_client_parameters_pass(pgwarden):
    with pgwarden.raw() as c:
        c.login("agent", pgwarden.passwords["agent"], extra={
            "client_encoding": "UTF8", "DateStyle": "ISO", "TimeZone": "Asia/Tokyo",
            "extra_float_digits": "2", "IntervalStyle": "iso_8601",
            "application_name": "PostgreSQL JDBC Driver"})
        rows, _, _ = c.query("select current_setting('TimeZone'), current_setting('IntervalStyle'),"
                             " current_setting('extra_float_digits'), "
                             "current_setting('application_name')")
        assert rows == [("Asia/Tokyo", "iso_8601", "2", "PostgreSQL JDBC Driver")]
        assert c.params.get("TimeZone") == "Asia/Tokyo"
        assert c.params.get("application_name") == "PostgreSQL JDBC Driver"


def refused_raw(pgwarden, extra):
    with pgwarden.raw() as c:
        with pytest.raises(pgwtest.ServerError) as err:
            c.login("agent", pgwarden.passwords["agent"], extra=extra)
        assert c.closed_by_peer()
    assert err.value.fields["S"] == "FATAL"
    return err.value


@pytest.mark.parametrize("options,param", [
    ("-c default_transaction_read_only=off", "default_transaction_read_only"),
    ("-c statement_timeout=0", "statement_timeout"),
    ("--default_transaction_read_only=off", "default_transaction_read_only"),
    ("-c agent_id=a1 -c transaction_read_only=off", "transaction_read_only"),
    ("-c work_mem=1GB", "work_mem"),
    ("-c session_authorization=postgres", "session_authorization"),
])
def test_options_setting_server_settings_refused(pgwarden, pg, options, param):
    offset = pg.log_offset()
    err = refused_raw(pgwarden, {"options": options})
    assert param in err.message, err.fields
    r = psql(pgwarden.dsn(options=options), "-c", "select 1")
    assert r.returncode == 2
    assert "FATAL" in r.stderr and param in r.stderr
    assert param not in pg.log_since(offset)


@pytest.mark.parametrize("name,value", [
    ("statement_timeout", "0"),
    ("default_transaction_read_only", "off"),
    ("lock_timeout", "0"),
    ("replication", "true"),
    ("replication", "database"),
    ("role", "postgres"),
])
def test_startup_parameters_setting_server_settings_refused(pgwarden, name, value):
    err = refused_raw(pgwarden, {name: value})
    assert name in err.message, err.fields


def test_replication_connection_from_libpq_refused(pgwarden):
    r = psql(pgwarden.dsn(replication="database"), "-c", "IDENTIFY_SYSTEM")
    assert r.returncode != 0
    assert "replication" in r.stderr


def test_refusals_leave_the_daemon_serving(pgwarden):
    for _ in range(3):
        refused_raw(pgwarden, {"options": "-c statement_timeout=0"})
    r = psql(pgwarden.dsn(), "-At", "-c", "select 'fine'")
    assert r.stdout.strip() == "fine"
