"""The server behind pgwarden goes away and comes back. These tests use their own PostgreSQL
cluster and their own daemon, so the shared ones are never disturbed."""

import time

import psycopg2
import pytest

import pgwtest
from pgwtest import psql


@pytest.fixture
def own(pg_factory, pgwarden_factory):
    pg = pg_factory()
    daemon = pgwarden_factory.start(pg)
    return pg, daemon


def query_error(conn, sql="select 1"):
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            cur.fetchall()
    except psycopg2.Error as e:
        return e
    return None


def raw_error_after_restart(c):
    """What an idle raw client learns once the server has restarted: the ErrorResponse pushed to
    it (as PostgreSQL itself pushes FATAL 57P01 to idle sessions on shutdown) or the one that
    answers its next Query. None when the connection just closes without a word."""
    c.sock.settimeout(3)
    try:
        tag, body = c.read_msg()
        if tag == b"E":
            return pgwtest.parse_fields(body)
    except (TimeoutError, OSError):
        pass
    except EOFError:
        return None
    c.sock.settimeout(10)
    try:
        c.send_msg(b"Q", b"select 1\0")
    except OSError:
        return None
    return c.read_until_closed_or_error()


def test_upstream_restart_with_clients_connected(own):
    pg, daemon = own
    conns = [daemon.connect() for _ in range(3)]
    raws = [daemon.raw() for _ in range(2)]
    for conn in conns:
        assert query_error(conn) is None
    for c in raws:
        c.login("core", daemon.passwords["core"])
        assert c.query("select 1")[0] == [("1",)]
    pg.restart("fast")
    for c in raws:
        err = raw_error_after_restart(c)
        c.close()
        # A clean error: an ErrorResponse with a SQLSTATE the client can act on (the server's
        # admin-shutdown one, or pgwarden's connection-failure one), not a silently dropped socket.
        assert err is not None, "the connection was dropped without an ErrorResponse"
        assert err.get("C", "")[:2] in ("57", "08"), err
    for conn in conns:
        started = time.monotonic()
        err = query_error(conn)
        assert time.monotonic() - started < 10, "a connected client hung after the restart"
        assert isinstance(err, psycopg2.OperationalError), \
            f"a statement on a dead server connection gave {err!r}"
        conn.close()
    # New clients connect again as soon as the server is back.
    ok = pgwtest.wait_for(lambda: psql(daemon.dsn(), "-At", "-c", "select 'back'")
                          .stdout.strip() == "back", timeout=15, interval=0.5)
    assert ok, daemon.log()[-3000:]
    conn = daemon.connect()
    assert query_error(conn) is None
    conn.close()


def test_upstream_down_then_back(own):
    pg, daemon = own
    pg.stop("fast")
    with daemon.raw() as c:
        with pytest.raises(pgwtest.ServerError) as err:
            c.login("core", daemon.passwords["core"])
    e = err.value
    assert e.fields["S"] == "FATAL"
    assert e.sqlstate == "08006"
    assert "unreachable" in e.message.lower() or "unavailable" in e.message.lower(), e.message
    everything = " ".join(e.fields.values())
    for leak in ("127.0.0.1", str(pg.port), "pgwarden_reader", str(pg.dir)):
        assert leak not in everything, f"internal detail {leak!r} in {e.fields}"
    # psql shows the same to a person.
    r = psql(daemon.dsn(), "-c", "select 1")
    assert r.returncode == 2 and "FATAL" in r.stderr
    pg.start()
    ok = pgwtest.wait_for(lambda: psql(daemon.dsn(), "-At", "-c", "select 'back'")
                          .stdout.strip() == "back", timeout=15, interval=0.5)
    assert ok, daemon.log()[-3000:]


def test_server_backend_terminated_mid_session(own):
    pg, daemon = own
    conn = daemon.connect(application_name="victim")
    with conn.cursor() as cur:
        cur.execute("select pg_backend_pid()")
        (pid,) = cur.fetchone()
    assert pg.scalar("select pg_terminate_backend(%s)", (pid,)) is True
    err = query_error(conn)
    assert isinstance(err, psycopg2.OperationalError), repr(err)
    conn.close()
    conn = daemon.connect()
    assert query_error(conn) is None
    conn.close()
