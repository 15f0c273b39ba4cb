"""Guarded writes (docs/writes.md) through the real daemon and PostgreSQL, with psycopg2
(autocommit off and on) and psql: writes only inside BEGIN after a look at the table, no UPDATE or
DELETE without a WHERE, a write over its row cap undone while the transaction stays usable, idle
transactions rolled back and the next statement told, a client killed mid-transaction leaving no
change, COMMIT keeping exactly what the notices reported, the write-mode escapes refused, a
read-only group still unable to write, and a superuser write role refused."""

import json
import os
import secrets
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
import time
import urllib.request

import psycopg2
import psycopg2.errors
import pytest

import pgwtest
from conftest import module_daemon
import writesupport
from writesupport import ROWS

WRITER_ROLE = "pgw_writer"
WRITER_PASSWORD = "writer-" + secrets.token_hex(8)


def _reset_table(pg):
    writesupport.reset_table(pg, WRITER_ROLE)


def _daemon(factory, pg, write_user=WRITER_ROLE, write_password=WRITER_PASSWORD, extra=None):
    d_users = {"writer": "w-" + secrets.token_hex(6), "reader": "r-" + secrets.token_hex(6)}
    users = [
        {"name": "writer", "password": pgwtest.scram_verifier(d_users["writer"]), "group": "writers"},
        {"name": "reader", "password": pgwtest.scram_verifier(d_users["reader"]), "group": "agents"},
    ]
    group = {"mode": "guarded_writes", "search_path": ["public"],
             "max_rows_affected": {"statement": 100, "transaction": 150},
             "transaction_idle_timeout": "2s", "transaction_max_age": "1m",
             "guards": [{"kind": "functions"}]}
    group.update(extra or {})
    overrides = {"upstream": {"write_user": write_user, "write_password": write_password},
                 "groups": {"writers": group}}
    d = factory.start(pg, overrides=overrides, users=users, start=False)
    d.passwords = d_users
    d.start()
    return d


@pytest.fixture(scope="module")
def writer_role(pg):
    return writesupport.create_write_role(pg, WRITER_ROLE, WRITER_PASSWORD)


@pytest.fixture(scope="module")
def wd(pgwarden_bin, pg, writer_role):
    yield from module_daemon(pgwarden_bin, lambda daemons: _daemon(daemons, pg))


@pytest.fixture
def table(pg, wd):
    _reset_table(pg)
    yield
    pg.execute("DROP TABLE IF EXISTS w_items")


def _detail(err):
    return json.loads(err.diag.message_detail)


def _notices(conn):
    out = list(conn.notices)
    del conn.notices[:]
    return out


def _looked(wd, where="id = 1", autocommit=False):
    """A writer's connection that has read w_items (psycopg2 began its transaction for it)."""
    conn = wd.connect(user="writer", autocommit=autocommit)
    cur = conn.cursor()
    cur.execute(f"SELECT * FROM w_items WHERE {where}")
    return conn, cur


def test_update_without_where_denied(wd, table):
    conn, cur = _looked(wd, "id = 1")
    for sql in ("UPDATE w_items SET qty = 1", "UPDATE w_items SET qty = 1 WHERE 1=1",
                "DELETE FROM w_items WHERE true"):
        with pytest.raises(psycopg2.Error) as e:
            cur.execute(sql)
        assert _detail(e.value)["code"] == "MISSING_PREDICATE", sql
        assert e.value.pgcode == "54000"
        assert "Transaction open" in _notices(conn)[-1]  # the next moves, after a denial too
        # The denial never reached the server: the transaction is still usable.
        cur.execute("SELECT 1")
    conn.rollback()
    conn.close()


def test_write_outside_transaction_and_before_looking(wd, pg, table):
    conn = wd.connect(user="writer", autocommit=True)
    cur = conn.cursor()
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("UPDATE w_items SET qty = 1 WHERE id = 1")
    assert _detail(e.value)["code"] == "TRANSACTION_REQUIRED"
    assert e.value.pgcode == "25P01"
    cur.execute("BEGIN")
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("UPDATE w_items SET qty = 1 WHERE id = 1")
    assert _detail(e.value)["code"] == "LOOK_FIRST"
    assert "w_items" in e.value.pgerror
    cur.execute("SELECT id, qty FROM w_items WHERE id = 1")
    cur.execute("UPDATE w_items SET qty = 1 WHERE id = 1")
    assert cur.rowcount == 1
    cur.execute("ROLLBACK")
    conn.close()
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty <> 0") == 0


def test_too_many_rows_undone_transaction_usable(wd, pg, table):
    conn, cur = _looked(wd, "id < 5")
    # Meant 4 rows, wrote a predicate that matches all 400.
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("UPDATE w_items SET qty = 7 WHERE id > 0")
    d = _detail(e.value)
    assert d["code"] == "TOO_MANY_ROWS" and d["rows"] == ROWS and d["cap"] == 100
    assert conn.get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_INTRANS
    # Still usable, and the undone statement left nothing behind.
    cur.execute("SELECT count(*) FROM w_items WHERE qty = 7")
    assert cur.fetchone()[0] == 0
    cur.execute("UPDATE w_items SET qty = 7 WHERE id < 5")
    assert cur.rowcount == 4
    notices = _notices(conn)
    assert any("TRANSACTION_OPEN" in n or "Transaction open" in n for n in notices), notices
    conn.commit()
    conn.close()
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 7") == 4


def test_transaction_cap(wd, pg, table):
    conn, cur = _looked(wd, "id = 1")
    cur.execute("UPDATE w_items SET qty = 1 WHERE id <= 100")
    assert cur.rowcount == 100
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("UPDATE w_items SET qty = 1 WHERE id > 100 AND id <= 160")
    d = _detail(e.value)
    assert d["code"] == "TOO_MANY_ROWS" and d["scope"] == "transaction" and d["transaction_rows"] == 100
    conn.commit()
    conn.close()
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 1") == 100


def test_commit_keeps_what_the_notices_said(wd, pg, table):
    conn, cur = _looked(wd, "id = 10")
    cur.execute("UPDATE w_items SET qty = 3 WHERE grp = 10")
    cur.execute("DELETE FROM w_items WHERE id = 400")
    cur.execute("INSERT INTO w_items VALUES (1000, 1, 9)")
    notices = _notices(conn)
    last = [n for n in notices if "Transaction open" in n][-1]
    assert "w_items: 6 rows" in last, notices
    conn.commit()
    kept = _notices(conn)
    assert any("Committed; kept: w_items: 6 rows" in n for n in kept), kept
    conn.close()
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 3") == 4
    assert pg.scalar("SELECT count(*) FROM w_items") == ROWS
    # History: each write with its rows, and the COMMIT record with the transaction's total.
    deadline = time.time() + 10
    while True:
        db = sqlite3.connect(str(wd.dir / "history.db"))
        recs = db.execute("SELECT sql_text, outcome, rows_affected FROM pgwarden_history "
                          "WHERE user_name = 'writer' ORDER BY id").fetchall()
        db.close()
        # Earlier tests of the module committed too: this one's COMMIT follows its UPDATE.
        mine = [i for i, r in enumerate(recs) if r[0] == "UPDATE w_items SET qty = 3 WHERE grp = 10"]
        after = recs[mine[-1]:] if mine else []
        commits = [r for r in after if r[0].strip().upper() == "COMMIT"]
        if commits or time.time() > deadline:
            break
        time.sleep(0.2)
    assert commits and commits[0] == ("COMMIT", "ok", 6), after
    assert ("UPDATE w_items SET qty = 3 WHERE grp = 10", "ok", 4) in recs


def test_idle_transaction_rolled_back_and_next_statement_told(wd, pg, table):
    conn, cur = _looked(wd, "id = 2")
    cur.execute("UPDATE w_items SET qty = 5 WHERE id = 2")
    time.sleep(3.5)
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("SELECT 1")
    d = _detail(e.value)
    assert d["code"] == "TRANSACTION_ROLLED_BACK" and d["reason"] == "idle_timeout"
    assert "w_items: 1 row" in d["lost"]
    assert e.value.pgcode == "25P03"
    conn.rollback()
    cur.execute("SELECT qty FROM w_items WHERE id = 2")
    assert cur.fetchone()[0] == 0
    conn.close()
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 2") == 0


def test_rolled_back_transaction_told_over_the_extended_protocol(wd, pg, table):
    """A driver that sends its next statement through Parse hears TRANSACTION_ROLLED_BACK once,
    then works as before."""
    with wd.raw() as c:
        c.login("writer", wd.passwords["writer"])
        c.query("BEGIN")
        c.query("SELECT * FROM w_items WHERE id = 12")
        c.query("UPDATE w_items SET qty = 6 WHERE id = 12")
        time.sleep(3.5)
        with pytest.raises(pgwtest.ServerError) as e:
            c.extended("SELECT qty FROM w_items WHERE id = 12")
        assert json.loads(e.value.fields["D"])["code"] == "TRANSACTION_ROLLED_BACK"
        count, tags, _ = c.extended("SELECT qty FROM w_items WHERE id = 12")
        assert count == 1 and tags == ["SELECT 1"]
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 12") == 0


def test_client_killed_mid_transaction_leaves_no_change(wd, pg, table):
    script = (
        "import psycopg2, os, signal, sys\n"
        "conn = psycopg2.connect(sys.argv[1])\n"
        "cur = conn.cursor()\n"
        "cur.execute('SELECT * FROM w_items WHERE id = 3')\n"
        "cur.execute('UPDATE w_items SET qty = 99 WHERE id = 3')\n"
        "print('updated', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    p = subprocess.run([sys.executable, "-c", script, wd.dsn(user="writer")], capture_output=True,
                       text=True, timeout=30)
    assert "updated" in p.stdout and p.returncode == -signal.SIGKILL
    deadline = time.time() + 10
    while time.time() < deadline and pg.scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND state LIKE 'idle in%%'",
            (WRITER_ROLE,)):
        time.sleep(0.1)
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 3") == 0
    text = urllib.request.urlopen(f"http://127.0.0.1:{wd.metrics_port}/metrics", timeout=5).read().decode()
    line = [l for l in text.splitlines() if l.startswith('pgwarden_write_transactions_total{outcome="disconnect"}')]
    assert line and float(line[0].split()[-1]) >= 1


def test_psql_session(wd, pg, table):
    sql = ("SELECT count(*) FROM w_items WHERE grp = 1;\n"
           "BEGIN;\n"
           "UPDATE w_items SET qty = 2 WHERE grp = 1;\n"
           "COMMIT;\n")
    r = pgwtest.psql(wd.dsn(user="writer", password=wd.passwords["writer"]), input=sql)
    assert r.returncode == 0, r.stderr
    assert "Transaction open" in r.stderr and "Committed; kept: w_items: 4 rows" in r.stderr
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 2") == 4
    r = pgwtest.psql(wd.dsn(user="writer", password=wd.passwords["writer"]), "-c",
                     "DELETE FROM w_items")
    assert r.returncode != 0 and "WHERE" in r.stderr


def _load_escapes():
    out = []
    path = pgwtest.REPO_ROOT / "tests" / "security" / "write_escapes.tsv"
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        category, code, sql = line.split("\t", 2)
        out.append((sql.replace("\\n", "\n"), code))
    return out


ESCAPES = _load_escapes()


@pytest.mark.parametrize("sql,code", ESCAPES, ids=[c + ":" + s[:30] for s, c in ESCAPES])
def test_write_mode_escapes_denied(wd, pg, table, sql, code):
    conn = wd.connect(user="writer", autocommit=True)
    cur = conn.cursor()
    cur.execute("BEGIN")
    cur.execute("SELECT * FROM w_items WHERE id = 1")
    with pytest.raises(psycopg2.Error) as e:
        cur.execute(sql)
    assert _detail(e.value)["code"] == code, (sql, e.value.pgerror)
    cur.execute("ROLLBACK")
    conn.close()
    assert pg.scalar("SELECT count(*) FROM w_items") == ROWS
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty <> 0") == 0


def test_extended_protocol_writes_are_guarded(wd, pg, table):
    """Parse/Bind/Execute writes get the same state machine: TRANSACTION_REQUIRED and LOOK_FIRST
    judged when the Execute runs, the savepoint around it, TOO_MANY_ROWS undone with the
    transaction still usable, and the TRANSACTION_OPEN notice at Sync."""
    with wd.raw() as c:
        c.login("writer", wd.passwords["writer"])
        with pytest.raises(pgwtest.ServerError) as e:
            c.extended("UPDATE w_items SET qty = 1 WHERE id = 1")
        assert json.loads(e.value.fields["D"])["code"] == "TRANSACTION_REQUIRED"
        c.query("BEGIN")
        with pytest.raises(pgwtest.ServerError) as e:
            c.extended("UPDATE w_items SET qty = 1 WHERE id = 1")
        assert json.loads(e.value.fields["D"])["code"] == "LOOK_FIRST"
        c.extended("SELECT * FROM w_items WHERE id = 1")
        _, tags, notices = c.extended("UPDATE w_items SET qty = 1 WHERE id = 1")
        assert tags == ["UPDATE 1"]
        assert any("Transaction open" in n.get("M", "") and "w_items: 1 row" in n.get("M", "")
                   for n in notices), notices
        with pytest.raises(pgwtest.ServerError) as e:
            c.extended("UPDATE w_items SET qty = 2 WHERE id > 0")
        assert json.loads(e.value.fields["D"])["code"] == "TOO_MANY_ROWS"
        assert e.value.sqlstate == "54000"
        rows, _, _ = c.extended("SELECT * FROM w_items WHERE qty = 2")
        assert rows == 0, "the over-cap write was undone"
        c.query("COMMIT")
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 1") == 1
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 2") == 0


def test_read_only_group_still_cannot_write(wd, pg, table):
    conn = wd.connect(user="reader", autocommit=False)
    cur = conn.cursor()
    cur.execute("SELECT * FROM w_items WHERE id = 1")
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("UPDATE w_items SET qty = 1 WHERE id = 1")
    assert _detail(e.value)["code"] == "READ_ONLY"
    conn.rollback()
    conn.close()
    # Its server sessions run as the read-only role: the write role never served it.
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty <> 0") == 0


def test_metrics_count_transactions(wd, table):
    conn, cur = _looked(wd, "id = 1")
    cur.execute("UPDATE w_items SET qty = 1 WHERE id = 1")
    conn.commit()
    conn.close()
    text = urllib.request.urlopen(f"http://127.0.0.1:{wd.metrics_port}/metrics", timeout=5).read().decode()
    committed = [l for l in text.splitlines()
                 if l.startswith("pgwarden_write_transactions_total") and 'outcome="committed"' in l]
    assert committed and float(committed[0].split()[-1]) >= 1
    assert any(l.startswith("pgwarden_rows_written_total") for l in text.splitlines())


def _read_until_rfq(c):
    """Messages up to and including the next ReadyForQuery, as (tag, fields-or-body)."""
    out = []
    while True:
        tag, body = c.read_msg()
        out.append((tag, pgwtest.parse_fields(body) if tag in (b"E", b"N") else body))
        if tag == b"Z":
            return out


def test_pipelined_queries_wait_for_the_savepoint(wd, pg, table):
    """Queries sent right behind a write run after pgwarden's RELEASE, in order, each answered."""
    with wd.raw() as c:
        c.login("writer", wd.passwords["writer"])
        c.query("BEGIN")
        c.query("SELECT * FROM w_items WHERE id = 5")
        q = lambda sql: b"Q" + struct.pack("!I", len(sql) + 5) + sql.encode() + b"\0"
        c.send(q("UPDATE w_items SET qty = 4 WHERE id = 5") + q("SELECT qty FROM w_items WHERE id = 5")
               + q("UPDATE w_items SET qty = 4 WHERE id > 0") + q("SELECT count(*) FROM w_items WHERE qty = 4")
               + q("COMMIT"))
        first = _read_until_rfq(c)
        assert [t for t, _ in first if t == b"C"] == [b"C"] and first[-1] == (b"Z", b"T")
        assert any(t == b"N" and f["C"] == "00000" and "Transaction open" in f["M"] for t, f in first)
        second = _read_until_rfq(c)
        assert (b"D", b"\x00\x01\x00\x00\x00\x014") in second
        third = _read_until_rfq(c)
        err = [f for t, f in third if t == b"E"]
        assert err and json.loads(err[0]["D"])["code"] == "TOO_MANY_ROWS" and third[-1] == (b"Z", b"T")
        fourth = _read_until_rfq(c)
        assert (b"D", b"\x00\x01\x00\x00\x00\x011") in fourth
        fifth = _read_until_rfq(c)
        assert any(t == b"N" and "Committed; kept: w_items: 1 row" in f["M"] for t, f in fifth), fifth
        assert fifth[-1] == (b"Z", b"I")
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 4") == 1


def test_failed_write_leaves_only_rollback(wd, pg, table):
    conn, cur = _looked(wd, "id = 6")
    _notices(conn)
    with pytest.raises(psycopg2.errors.UniqueViolation):
        cur.execute("INSERT INTO w_items VALUES (6, 1, 1)")
    assert any("only ROLLBACK helps" in n for n in _notices(conn))
    conn.rollback()
    assert any("Rolled back; nothing was kept" in n for n in _notices(conn))
    cur.execute("SELECT count(*) FROM w_items")
    assert cur.fetchone()[0] == ROWS
    conn.close()


def test_returning_previews_the_rows(wd, pg, table):
    conn, cur = _looked(wd, "id = 7")
    cur.execute("UPDATE w_items SET qty = qty + 1 WHERE id IN (7, 8) RETURNING id, qty")
    assert sorted(cur.fetchall()) == [(7, 1), (8, 1)]
    cur.execute("EXPLAIN DELETE FROM w_items WHERE id = 9")
    assert "Delete on w_items" in cur.fetchone()[0]
    conn.rollback()
    conn.close()
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty <> 0") == 0


def test_old_transaction_rolled_back_at_max_age(pgwarden_factory, pg, writer_role):
    _reset_table(pg)
    d = _daemon(pgwarden_factory, pg, extra={"transaction_idle_timeout": "1m", "transaction_max_age": "2s"})
    conn = d.connect(user="writer", autocommit=False)
    cur = conn.cursor()
    cur.execute("SELECT * FROM w_items WHERE id = 11")
    cur.execute("UPDATE w_items SET qty = 5 WHERE id = 11")
    began = time.time()
    # Busy, never idle for long (the idle timeout is a minute), but older than 2 s in the end.
    with pytest.raises(psycopg2.Error) as e:
        while time.time() - began < 10:
            time.sleep(0.3)
            cur.execute("SELECT 1")
    assert 2 <= time.time() - began < 5
    assert _detail(e.value)["reason"] == "max_age"
    conn.rollback()
    conn.close()
    assert pg.scalar("SELECT qty FROM w_items WHERE id = 11") == 0
    text = urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/metrics", timeout=5).read().decode()
    assert 'pgwarden_write_transactions_total{outcome="max_age"} 1' in text


def _jdbc(java, wd, *props):
    url = f"jdbc:postgresql://127.0.0.1:{wd.port}/{pgwtest.DATABASE}"
    r = java.run("JdbcCheck", "writes", url, "user=writer", f"password={wd.passwords['writer']}", *props)
    assert r.returncode == 0, r.stdout + r.stderr
    return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


def test_jdbc_simple_query_mode(java, wd, pg, table):
    got = _jdbc(java, wd, "preferQueryMode=simple")
    assert got["looked"] == "4"
    assert got["wide_sqlstate"] == "54000" and "TOO_MANY_ROWS" not in got.get("wide", "")
    assert "would have changed 400 rows" in got["wide_message"]
    assert got["narrow"] == "4" and got["committed"] == "yes"
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 8") == 4


def test_jdbc_extended_protocol_writes(java, wd, pg, table):
    """pgjdbc's default extended protocol with setAutoCommit(false): its BEGIN and the write in
    one batch, the 400-row UPDATE undone with TOO_MANY_ROWS, the 4-row one kept, and a
    PreparedStatement run past prepareThreshold (a named server-side statement) guarded too."""
    got = _jdbc(java, wd)
    assert got["looked"] == "4"
    assert got["wide_sqlstate"] == "54000", got
    assert "would have changed 400 rows" in got["wide_message"]
    assert got["narrow"] == "4" and got["committed"] == "yes", got
    assert got["prepared"] == "6", got
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 8") == 4
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 9") == 6


def test_mcp_runs_a_write_groups_statements_read_only(pgwarden_factory, pg, writer_role):
    """Over MCP (no write tools yet) a write group's user reads on the read-only pool, and the write
    mode's read checks stand in for the read_only guard the group cannot list."""
    import hashlib
    import mcpsupport
    _reset_table(pg)
    token = "pgw_" + secrets.token_urlsafe(32)

    def configure(cfg):
        cfg["upstream"].update(write_user=WRITER_ROLE, write_password=WRITER_PASSWORD)
        cfg["groups"]["writers"] = {"mode": "guarded_writes", "search_path": ["public"], "guards": []}
        cfg["users"].append({"name": "writer", "password": pgwtest.scram_verifier("x"), "group": "writers"})
        cfg["mcp"]["tokens"].append({"user": "writer", "sha256": hashlib.sha256(token.encode()).hexdigest()})

    d, _ = mcpsupport.start_mcp_daemon(pgwarden_factory, pg, configure=configure)
    c = mcpsupport.McpHttp(d.mcp_port, token)
    c.initialize(client="writer-agent")
    r = c.tool("query", {"sql": "SELECT count(*) AS n FROM w_items"})
    assert r["isError"] is False
    for sql, code in (("DELETE FROM w_items WHERE id = 1", "READ_ONLY"),
                      ("SET default_transaction_read_only = off", "PROTECTED_SETTING")):
        r = c.tool("query", {"sql": sql})
        assert r["isError"] is True and r["structuredContent"]["code"] == code, r
    c.close()
    assert pg.scalar("SELECT count(*) FROM w_items") == ROWS


def test_superuser_write_role_refused(pgwarden_factory, pg):
    pg.execute("DROP ROLE IF EXISTS pgw_super_writer")
    pg.execute("CREATE ROLE pgw_super_writer LOGIN SUPERUSER PASSWORD 'sw'")
    d = _daemon(pgwarden_factory, pg, write_user="pgw_super_writer", write_password="sw")
    with pytest.raises(psycopg2.OperationalError) as e:
        d.connect(user="writer")
    assert "refuses the write role" in str(e.value)
    assert "refuses the write role" in d.log()
    # A member of a superuser role is refused the same way.
    pg.execute("DROP ROLE IF EXISTS pgw_member_writer")
    pg.execute("CREATE ROLE pgw_member_writer LOGIN PASSWORD 'mw' IN ROLE postgres")
    d2 = _daemon(pgwarden_factory, pg, write_user="pgw_member_writer", write_password="mw")
    with pytest.raises(psycopg2.OperationalError) as e:
        d2.connect(user="writer")
    assert "refuses the write role" in str(e.value)


def test_transaction_pooled_write_group_holds_its_connection_to_commit(pgwarden_factory, pg, writer_role):
    """A guarded_writes group in transaction pool_mode on a write pool of one connection: the
    transaction keeps the connection from BEGIN to COMMIT (another writer waits), the savepoint
    and the caps work as in session mode, and what COMMIT kept is in the table."""
    _reset_table(pg)
    try:
        d = _daemon(pgwarden_factory, pg, extra={"pool_mode": "transaction"})
        d.config["pool"]["max_size"] = 1
        d.write_config()
        d.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        conn, cur = _looked(d, "id = 5")
        cur.execute("UPDATE w_items SET qty = 7 WHERE id = 5")
        assert cur.rowcount == 1
        with pytest.raises(psycopg2.Error) as e:
            cur.execute("UPDATE w_items SET qty = 8 WHERE id <= 300")
        assert _detail(e.value)["code"] == "TOO_MANY_ROWS"
        done = {}

        def other():
            c2, cur2 = _looked(d, "id = 6")
            cur2.execute("UPDATE w_items SET qty = 9 WHERE id = 6")
            c2.commit()
            done["at"] = time.monotonic()
            c2.close()

        t = threading.Thread(target=other)
        t.start()
        time.sleep(1.0)
        assert "at" not in done, "another writer ran inside this transaction's connection"
        commit_sent = time.monotonic()
        conn.commit()
        t.join(30)
        assert done["at"] >= commit_sent
        conn.close()
        assert pg.scalar("SELECT qty FROM w_items WHERE id = 5") == 7
        assert pg.scalar("SELECT qty FROM w_items WHERE id = 6") == 9
        assert pg.scalar("SELECT count(*) FROM w_items WHERE qty = 8") == 0
    finally:
        pg.execute("DROP TABLE IF EXISTS w_items")
