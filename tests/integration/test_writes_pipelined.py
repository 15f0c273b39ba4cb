"""Guarded writes under pipelining (docs/writes.md, docs/reliability.md): a statement is judged
against the transaction state the server will run it in, never ahead of an answer still owed.
Drivers do not send these byte sequences, so a raw v3 client does: several simple Queries in one
TCP write, and a look plus a write in one extended-protocol batch."""

import secrets
import sqlite3
import struct
import time

import pytest

import pgwtest
from conftest import module_daemon
import writesupport
from writesupport import ROWS

WRITER_ROLE = "pgw_pipe_writer"
WRITER_PASSWORD = "writer-" + secrets.token_hex(8)
STATEMENT_CAP = 10


def _daemon(factory, pg):
    password = "w-" + secrets.token_hex(6)
    users = [{"name": "writer", "password": pgwtest.scram_verifier(password), "group": "writers"}]
    group = {"mode": "guarded_writes", "search_path": ["public"],
             "max_rows_affected": {"statement": STATEMENT_CAP, "transaction": 40},
             "transaction_idle_timeout": "5s", "transaction_max_age": "1m",
             "guards": [{"kind": "functions"}]}
    overrides = {"upstream": {"write_user": WRITER_ROLE, "write_password": WRITER_PASSWORD},
                 "groups": {"writers": group}}
    d = factory.start(pg, overrides=overrides, users=users, start=False)
    d.password = password
    d.start()
    return d


@pytest.fixture(scope="module")
def wd(pgwarden_bin, pg):
    writesupport.create_write_role(pg, WRITER_ROLE, WRITER_PASSWORD)
    yield from module_daemon(pgwarden_bin, lambda daemons: _daemon(daemons, pg))


@pytest.fixture
def table(pg, wd):
    writesupport.reset_table(pg, WRITER_ROLE)
    yield
    pg.execute("DROP TABLE IF EXISTS w_items")


def _q(sql):
    body = sql.encode() + b"\0"
    return b"Q" + struct.pack("!I", len(body) + 4) + body


def _writer(wd):
    c = wd.raw()
    c.login("writer", wd.password)
    return c


def _answers(c, n):
    """The answers to n simple Queries already sent: [(rows, tags, notices) or ServerError]."""
    out = []
    for _ in range(n):
        try:
            out.append(c.read_query_result())
        except pgwtest.ServerError as e:
            out.append(e)
    return out


def _history(wd, text, want, timeout=10):
    """The history records of `text` (outcome, deny code or sqlstate), once `want` are there."""
    deadline = time.time() + timeout
    while True:
        db = sqlite3.connect(str(wd.dir / "history.db"))
        recs = db.execute("SELECT outcome, sqlstate FROM pgwarden_history WHERE sql_text = ?",
                          (text,)).fetchall()
        db.close()
        if len(recs) >= want or time.time() > deadline:
            return recs
        time.sleep(0.2)


@pytest.mark.parametrize("end", ["COMMIT", "ROLLBACK"])
def test_write_pipelined_behind_transaction_end_is_judged_after_it(wd, pg, table, end):
    update = f"UPDATE w_items SET qty = 4242 WHERE id BETWEEN 100 AND 160 -- {end}"
    with _writer(wd) as c:
        c.query("BEGIN")
        c.query("SELECT id, qty FROM w_items WHERE id BETWEEN 100 AND 160")
        # Both Queries in one TCP write: the UPDATE must not be judged inside the transaction
        # the COMMIT (or ROLLBACK) is about to end.
        c.send(_q(end) + _q(update))
        first, second = _answers(c, 2)
        assert not isinstance(first, Exception), first
        assert isinstance(second, pgwtest.ServerError), second
        assert second.sqlstate == "25P01", second.message  # TRANSACTION_REQUIRED
        assert "TRANSACTION_REQUIRED" in second.fields.get("D", ""), second.fields
        # The session goes on, outside any transaction.
        rows, _, _ = c.query("SELECT count(*) FROM w_items WHERE qty = 4242")
        assert rows == [("0",)]
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty <> 0") == 0
    assert pg.scalar("SELECT count(*) FROM w_items") == ROWS
    recs = _history(wd, update, 1)
    assert recs == [("denied", "25P01")], recs


def test_pipelined_begin_look_write_commit_runs_in_order(wd, pg, table):
    update = "UPDATE w_items SET qty = 7 WHERE id BETWEEN 1 AND 5"
    with _writer(wd) as c:
        c.send(_q("BEGIN") + _q("SELECT id FROM w_items WHERE id BETWEEN 1 AND 5") + _q(update)
               + _q("COMMIT"))
        answers = _answers(c, 4)
        assert not any(isinstance(a, Exception) for a in answers), answers
        assert answers[2][1] == ["UPDATE 5"], answers[2]
        assert answers[3][1] == ["COMMIT"], answers[3]
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 7") == 5


def test_write_over_the_cap_pipelined_behind_begin_is_undone(wd, pg, table):
    # Thirty rows against a statement cap of ten: undone, the transaction still usable.
    with _writer(wd) as c:
        c.send(_q("BEGIN") + _q("SELECT id FROM w_items WHERE grp = 3")
               + _q("UPDATE w_items SET qty = 9 WHERE id <= 30") + _q("COMMIT"))
        begin, look, write, commit = _answers(c, 4)
        assert isinstance(write, pgwtest.ServerError), write
        assert "TOO_MANY_ROWS" in write.fields.get("D", ""), write.fields
        assert not isinstance(commit, Exception) and commit[1] == ["COMMIT"], commit
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty <> 0") == 0


def test_look_and_write_in_one_extended_batch(wd, pg, table):
    with _writer(wd) as c:
        c.query("BEGIN")
        c.send_extended("SELECT id, qty FROM w_items WHERE id = $1", (42,))
        c.send_extended("UPDATE w_items SET qty = $1 WHERE id = $2", (11, 42))
        rows, tags, _, errors, _ = c.sync()
        assert not errors, errors
        assert tags == ["SELECT 1", "UPDATE 1"], tags
        _, tags, _ = c.query("COMMIT")
        assert tags == ["COMMIT"]
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 42") == 11
