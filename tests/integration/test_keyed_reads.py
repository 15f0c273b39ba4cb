"""The row cap and reads of one row by a unique key, against PostgreSQL's own catalog. A read that
equates a primary key or another unique column with a literal (or with a parameter whose type the
server infers) reaches the server as written (a
LIMIT there would cap nothing and cost the server a Limit node to plan); every other read of the same
tables reaches it with the LIMIT that caps it: a column that is not unique, a parameter whose type
the client declared, a table with
inheritance children (the parent's index does not cover their rows), a unique index left invalid by
a failed CREATE INDEX CONCURRENTLY. And the session's own count still cuts a result the catalog did
not foresee: an inheritance child added after the catalog was read."""

import itertools
import secrets
import struct

import psycopg2
import pytest

import pgwtest

CAP = 5

TABLES = """
DROP TABLE IF EXISTS keyed_late_kid, keyed_kid, keyed_parent, keyed_plain, keyed_dup CASCADE;
CREATE TABLE keyed_plain (id int PRIMARY KEY, code int UNIQUE, grp int NOT NULL, note text);
INSERT INTO keyed_plain SELECT g, 1000 + g, g % 4, 'row ' || g FROM generate_series(1, 40) g;
CREATE TABLE keyed_parent (id int PRIMARY KEY, v int);
INSERT INTO keyed_parent SELECT g, g FROM generate_series(1, 10) g;
CREATE TABLE keyed_kid () INHERITS (keyed_parent);
INSERT INTO keyed_kid SELECT 1, g FROM generate_series(1, 20) g;
CREATE TABLE keyed_dup (id int, v int);
INSERT INTO keyed_dup SELECT 1, g FROM generate_series(1, 20) g;
GRANT SELECT ON keyed_plain, keyed_parent, keyed_kid, keyed_dup TO {reader};
"""


@pytest.fixture(scope="module")
def daemon(pgwarden_bin, pg):
    from conftest import DaemonSet
    pg.execute(TABLES.format(reader=pgwtest.READER_ROLE))
    # Left invalid: the rows it would cover are not unique.
    with pytest.raises(psycopg2.errors.UniqueViolation):
        pg.execute("CREATE UNIQUE INDEX CONCURRENTLY keyed_dup_id ON keyed_dup (id)")
    assert pg.scalar("SELECT NOT indisvalid FROM pg_index WHERE indexrelid = 'keyed_dup_id'::regclass")
    groups = {"capped": {"search_path": ["public"], "guards": [
        {"kind": "read_only"}, {"kind": "row_limit", "max_rows": CAP}]}}
    password = "capped-" + secrets.token_hex(6)
    users = [{"name": "capped", "password": pgwtest.scram_verifier(password), "group": "capped"}]
    daemons = DaemonSet(pgwarden_bin)
    try:
        # The catalog is read once, at the first login: the test adds a child after that.
        d = daemons.start(pg, overrides={"groups": groups, "upstream": {"stats_refresh": "1h"}},
                          users=users, start=False)
        d.passwords["capped"] = password
        d.start()
        yield d
    finally:
        daemons.teardown()
        pg.execute("DROP TABLE IF EXISTS keyed_late_kid, keyed_kid, keyed_parent, keyed_plain, "
                   "keyed_dup CASCADE")


def truncations(notices):
    return [n for n in notices if '"code":"ROWS_TRUNCATED"' in n.get("D", "")
            and f"truncated at {CAP} rows" in n["M"]]


def reached(pg, offset, marker):
    """The text the server logged for the one statement marked by `marker` (a comment); the
    server log continues a statement's further lines with a tab."""
    lines = pg.log_since(offset).splitlines()
    heads = ("statement: ", "execute <unnamed>: ")
    found = [i for i, line in enumerate(lines) if marker in line and any(h in line for h in heads)]
    assert len(found) == 1, "\n".join(lines[-40:])
    line = lines[found[0]]
    text = [line.split(next(h for h in heads if h in line), 1)[1]]
    for line in lines[found[0] + 1:]:
        if not line.startswith("\t"):
            break
        text.append(line[1:])
    return "\n".join(text)


MARKS = itertools.count()


def run_marked(c, pg, sql):
    """Runs `sql` with a unique comment; returns its rows, tags, notices and the text that
    reached the server."""
    marker = f"-- keyed {next(MARKS)}"
    offset = pg.log_offset()
    rows, tags, notices = c.query(f"{sql} {marker}")
    return rows, tags, notices, reached(pg, offset, marker), f"{sql} {marker}"


def run_extended_marked(c, pg, sql, param, declared=0):
    """`sql` with a unique comment through Parse (declaring $1's type when `declared` is an OID),
    Bind of `param`, Describe, Execute and Sync: its row count, notices and the text that
    reached the server."""
    marker = f"-- keyed {next(MARKS)}"
    sent = f"{sql} {marker}"
    types = struct.pack("!HI", 1, declared) if declared else struct.pack("!H", 0)
    c.send_msg(b"P", b"\0" + sent.encode() + b"\0" + types)
    raw = str(param).encode()
    c.send_msg(b"B", b"\0\0" + struct.pack("!HHi", 0, 1, len(raw)) + raw + struct.pack("!H", 0))
    c.send_msg(b"D", b"P\0")
    c.send_msg(b"E", b"\0" + struct.pack("!i", 0))
    offset = pg.log_offset()
    rows, _, notices, errors, _ = c.sync()
    assert not errors, errors
    return len(rows), notices, reached(pg, offset, marker), sent


def wait_for_catalog(c, pg, sql):
    """The catalog is read at the first login, beside this session: until it is in, every read
    is capped in its text. Waits until `sql` (a keyed read) reaches the server as written."""
    def as_written():
        _, _, _, text, sent = run_marked(c, pg, sql)
        return text == sent
    assert pgwtest.wait_for(as_written, timeout=15), f"{sql} never reached the server as written"


def test_a_read_by_a_unique_key_reaches_the_server_as_written(daemon, pg):
    with daemon.raw() as c:
        c.login("capped", daemon.passwords["capped"])
        wait_for_catalog(c, pg, "SELECT id, note FROM keyed_plain WHERE id = 7")

        for sql, rows, capped in [
                ("SELECT id, note FROM keyed_plain WHERE id = 9", [("9", "row 9")], False),
                ("SELECT id FROM keyed_plain k WHERE k.code = 1012 AND grp = 0 ORDER BY id",
                 [("12",)], False),
                ("SELECT * FROM keyed_plain WHERE id = 1000", [], False),
                ("SELECT id FROM keyed_plain WHERE grp = 1 ORDER BY id", None, True),
                ("SELECT id FROM keyed_plain WHERE id >= 30 ORDER BY id", None, True),
                ("SELECT id FROM keyed_plain WHERE id::text = '7'", [("7",)], True),
                ("SELECT v FROM keyed_parent WHERE id = 1 ORDER BY v", None, True),
                ("SELECT v FROM keyed_dup WHERE id = 1 ORDER BY v", None, True)]:
            got, tags, notices, text, marked = run_marked(c, pg, sql)
            if capped:
                assert text == f"{marked}\nLIMIT {CAP + 1}", text
            else:
                assert text == marked, text
            if rows is None:
                assert len(got) == CAP and len(truncations(notices)) == 1, (sql, got, notices)
            else:
                assert got == rows and not truncations(notices), (sql, got, notices)
            assert tags == [f"SELECT {len(got)}"], tags

        # The extended protocol: a parameter whose type the server infers is a key as a literal
        # is; one whose type the client declared is not (float8: the column is cast to it).
        count, notices, text, sent = run_extended_marked(c, pg, "SELECT id FROM keyed_plain WHERE id = $1", 3)
        assert (count, truncations(notices), text) == (1, [], sent), text
        for declared in (23, 701):  # int4, float8
            count, notices, text, sent = run_extended_marked(
                c, pg, "SELECT id FROM keyed_plain WHERE id = $1", 3, declared)
            assert (count, truncations(notices)) == (1, []), notices
            assert text == f"{sent}\nLIMIT {CAP + 1}", text
        count, notices, text, sent = run_extended_marked(c, pg, "SELECT v FROM keyed_parent WHERE id = $1", 1)
        assert count == CAP and len(truncations(notices)) == 1, notices
        assert text == f"{sent}\nLIMIT {CAP + 1}", text


def test_the_session_still_cuts_what_the_catalog_did_not_foresee(daemon, pg):
    with daemon.raw() as c:
        c.login("capped", daemon.passwords["capped"])
        sql = "SELECT id, note FROM keyed_plain WHERE id = 5"
        wait_for_catalog(c, pg, sql)
        # A child the catalog read at start-up does not know: 20 more rows with id 5.
        pg.execute("CREATE TABLE keyed_late_kid () INHERITS (keyed_plain); "
                   "INSERT INTO keyed_late_kid SELECT 5, 2000 + g, 0, 'late' FROM generate_series(1, 20) g; "
                   f"GRANT SELECT ON keyed_late_kid TO {pgwtest.READER_ROLE}")
        rows, tags, notices, text, sent = run_marked(c, pg, sql)
        # Sent as written (the catalog says unique, no children), cut by the session's count.
        assert text == sent, text
        assert len(rows) == CAP and tags == [f"SELECT {CAP}"], (rows, tags)
        assert len(truncations(notices)) == 1, notices
