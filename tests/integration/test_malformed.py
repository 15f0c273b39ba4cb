"""Hostile and broken bytes: each gets an error or a disconnect with a reason, never a crash or a
hang, and the daemon keeps serving everyone else."""

import random
import socket
import struct
import time

import pytest

import pgwtest
from pgwtest import psql


def still_serving(pgwarden):
    r = psql(pgwarden.dsn(), "-At", "-c", "select 'alive'")
    assert r.returncode == 0 and r.stdout.strip() == "alive", r.stderr + pgwarden.log()[-2000:]


def assert_rejected(c, sqlstate=None):
    """The peer answered with an ErrorResponse (when sqlstate is given, with that code) and/or
    closed the connection; it did not hang."""
    err = c.read_until_closed_or_error()
    if sqlstate is not None:
        assert err is not None, "no ErrorResponse"
        assert err.get("C") == sqlstate, err
    assert c.closed_by_peer(), "connection left open"
    return err


def logged_in(pgwarden):
    c = pgwarden.raw()
    c.login("core", pgwarden.passwords["core"])
    return c


@pytest.mark.parametrize("payload", [
    b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    b"\x00\x00\x00\x08\x00\x00\x00\x00",                  # protocol version 0.0
    b"\x00\x00\x00\x08\x00\x02\x00\x00",                  # protocol 2.0
    b"\x00\x00\x00\x03",                                  # length smaller than itself
    b"\x00\x00\x00\x10\x00\x03\x00\x00user\x00agent",     # parameters not terminated
    b"\x00\x00\x00\x0c\x00\x03\x00\x00\x00\x00\x00\x00",  # no user
], ids=["http", "version-0", "version-2", "short-length", "unterminated", "no-user"])
def test_garbage_startup(pgwarden, payload):
    with pgwarden.raw() as c:
        c.send(payload)
        assert_rejected(c)
    still_serving(pgwarden)


def test_oversized_startup_length(pgwarden):
    with pgwarden.raw() as c:
        c.send(struct.pack("!II", 0x7FFFFFFF, 196608) + b"user\x00agent\x00")
        started = time.monotonic()
        assert_rejected(c)
        assert time.monotonic() - started < 5, "pgwarden waited for two gigabytes"
    still_serving(pgwarden)


def test_startup_timeout(pgwarden):
    """A client that connects and says nothing is dropped after limits.startup_timeout (5s)."""
    with pgwarden.raw(timeout=15) as c:
        started = time.monotonic()
        assert c.closed_by_peer(timeout=12), "silent client was never disconnected"
        assert time.monotonic() - started >= 4
    still_serving(pgwarden)


def test_half_a_startup_then_disconnect(pgwarden):
    for _ in range(5):
        with pgwarden.raw() as c:
            c.send(struct.pack("!II", 40, 196608) + b"user\x00ag")
    still_serving(pgwarden)


def test_ssl_and_gssenc_requests_answered_n(pgwarden):
    for code in (80877103, 80877104):  # SSLRequest, GSSENCRequest
        with pgwarden.raw() as c:
            c.send(struct.pack("!II", 8, code))
            assert c.read_byte() == b"N"
            c.login("core", pgwarden.passwords["core"])
            rows, _, _ = c.query("select 1")
            assert rows == [("1",)]


def test_bad_message_length_after_auth(pgwarden):
    with logged_in(pgwarden) as c:
        c.send(b"Q" + struct.pack("!I", 2))  # a length that cannot hold itself
        assert_rejected(c, "08P01")
    still_serving(pgwarden)


def test_message_over_the_size_cap_after_auth(pgwarden):
    with logged_in(pgwarden) as c:
        c.send(b"Q" + struct.pack("!I", 512 * 1024 * 1024) + b"select ")
        started = time.monotonic()
        assert_rejected(c, "08P01")
        assert time.monotonic() - started < 5
    still_serving(pgwarden)


def test_query_over_max_message_bytes_is_refused(pgwarden):
    """limits.max_message_bytes (1 MiB) applies to Query: a 2 MiB query text is refused whole."""
    with logged_in(pgwarden) as c:
        sql = "select '" + "x" * (2 * 1024 * 1024) + "'"
        c.send_msg(b"Q", sql.encode() + b"\0", tolerant=True)
        err = c.read_until_closed_or_error()
        assert err is not None and err.get("C") in ("08P01", "54000"), err
    still_serving(pgwarden)


def test_query_without_terminator(pgwarden):
    with logged_in(pgwarden) as c:
        c.send_msg(b"Q", b"select 1")  # no trailing NUL
        assert_rejected(c, "08P01")
    still_serving(pgwarden)


def test_unknown_message_type_after_auth(pgwarden):
    with logged_in(pgwarden) as c:
        c.send_msg(b"\x01", b"junk")
        assert_rejected(c, "08P01")
    still_serving(pgwarden)


def test_bind_with_inconsistent_counts(pgwarden):
    with logged_in(pgwarden) as c:
        c.send_msg(b"P", b"\0select $1::int\0" + struct.pack("!H", 0))
        # Bind: portal "", statement "", 0 format codes, claims 5 parameters but carries one.
        c.send_msg(b"B", b"\0\0" + struct.pack("!HH", 0, 5) + struct.pack("!I", 1) + b"7",
                   tolerant=True)
        c.send_msg(b"S", tolerant=True)
        assert_rejected(c, "08P01")
    still_serving(pgwarden)


def test_function_call_refused_cleanly(pgwarden):
    with logged_in(pgwarden) as c:
        c.send_msg(b"F", struct.pack("!IHHIH", 1598, 0, 0, 0, 0))  # FunctionCall of some oid
        tag, body = c.read_msg()
        assert tag == b"E", (tag, body)
        # The session may be closed or may go on; either way the daemon is fine.
    still_serving(pgwarden)


def test_random_bytes_after_auth(pgwarden):
    rng = random.Random(20240229)
    for _ in range(10):
        with logged_in(pgwarden) as c:
            c.send_tolerant(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))))
            c.shutdown_write()  # a valid-looking prefix must not wait forever
            c.sock.settimeout(5)
            try:
                c.read_until_closed_or_error()
            except pgwtest.ProtocolError:
                pass
            assert c.closed_by_peer(), "connection left open after the client finished sending"
    still_serving(pgwarden)


def test_cancel_request_with_unknown_key_is_harmless(pgwarden):
    pgwtest.send_cancel("127.0.0.1", pgwarden.port, (12345, 67890))
    still_serving(pgwarden)


def test_many_abrupt_disconnects(pgwarden):
    for _ in range(50):
        s = socket.create_connection(("127.0.0.1", pgwarden.port), timeout=5)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
        s.close()
    still_serving(pgwarden)


def test_query_sent_with_a_malformed_message_does_not_strand_its_server_connection(
        pgwarden_factory, pg):
    """A Query and a malformed message in one write: the session ends at the bad message while
    the Query is still on its way to the server. The server connection must still come back to
    the pool (here of one) for the next client, within the acquire timeout (5 s)."""
    d = pgwarden_factory.start(pg, overrides={"pool": {"max_size": 1}})
    still_serving(d)
    with logged_in(d) as c:
        c.send(b"Q" + struct.pack("!I", 13) + b"select 1\0"
               + b"E" + struct.pack("!I", 5) + b"\0")  # Execute without its row limit
        assert_rejected(c, "08P01")
    still_serving(d)


def test_query_queued_behind_a_failing_parse_does_not_strand_its_server_connection(
        pgwarden_factory, pg):
    """Parse naming a type that does not exist, then a Query, then Sync, and the client leaves:
    the server skips the Query after the Parse fails, so it owes one ReadyForQuery fewer than
    the messages suggest. The connection must not wait for it: the next client of a pool of one
    gets it within the acquire timeout (5 s)."""
    d = pgwarden_factory.start(pg, overrides={"pool": {"max_size": 1}})
    still_serving(d)
    with logged_in(d) as c:
        parse = b"s1\0select $1::int\0" + struct.pack("!HI", 1, 1311)  # no type has OID 1311
        c.send(b"P" + struct.pack("!I", 4 + len(parse)) + parse
               + b"Q" + struct.pack("!I", 13) + b"select 1\0"
               + b"S" + struct.pack("!I", 4))
        c.shutdown_write()
        c.read_until_closed_or_error()
    still_serving(d)


def test_query_skipped_after_a_failing_parse_is_not_waited_for(pgwarden_factory, pg):
    """The same batch, but the client reads every answer before it goes on: the server answers
    the Parse with an error and only the Sync with ReadyForQuery. The session must match that
    ReadyForQuery to the Sync, not to the skipped Query, so its next Query is answered and the
    connection is free again (pool of one) once the client leaves."""
    d = pgwarden_factory.start(pg, overrides={"pool": {"max_size": 1}})
    with logged_in(d) as c:
        parse = b"s1\0select $1::int\0" + struct.pack("!HI", 1, 1311)  # no type has OID 1311
        c.send(b"P" + struct.pack("!I", 4 + len(parse)) + parse
               + b"Q" + struct.pack("!I", 13) + b"select 1\0"
               + b"S" + struct.pack("!I", 4))
        tags = []
        while not tags or tags[-1] != b"Z":
            tags.append(c.read_msg()[0])
        assert tags == [b"E", b"Z"], tags
        c.send_msg(b"Q", b"select 'next'\0")
        tags = []
        while not tags or tags[-1] != b"Z":
            tags.append(c.read_msg()[0])
        assert tags == [b"T", b"D", b"C", b"Z"], tags
    still_serving(d)
