"""What a guarded write really changed (docs/writes.md, "What counts as a changed row"): rows
removed or changed through ON DELETE CASCADE / SET NULL count against the row caps on both doors
(wire simple and extended protocol, MCP), an over-cap cascade is undone and named table by table,
and the transaction's tallies follow the client's own ROLLBACK TO SAVEPOINT and RELEASE."""

import hashlib
import json
import secrets

import psycopg2
import pytest

import pgwtest
from conftest import module_daemon
import writesupport
from mcpsupport import McpHttp, history, start_mcp_daemon

WRITER_ROLE = "pgw_count_writer"  # each module drops and makes its own
WRITER_PASSWORD = "writer-" + secrets.token_hex(8)
GROUP = {"mode": "guarded_writes", "search_path": ["public"],
         "max_rows_affected": {"statement": 10, "transaction": 150},
         "transaction_idle_timeout": "30s", "transaction_max_age": "1m",
         "guards": [{"kind": "functions"}]}


def _start(factory, pg):
    """A daemon with a `writer` user in the guarded_writes group `writers`, on the wire and MCP."""
    token = "pgw_" + secrets.token_urlsafe(32)
    password = "w-" + secrets.token_hex(6)

    def configure(cfg):
        cfg["upstream"].update(write_user=WRITER_ROLE, write_password=WRITER_PASSWORD)
        cfg["groups"]["writers"] = dict(GROUP)
        cfg["users"].append({"name": "writer", "password": pgwtest.scram_verifier(password),
                             "group": "writers"})
        cfg["mcp"]["tokens"].append({"user": "writer", "sha256": hashlib.sha256(token.encode()).hexdigest()})

    daemon, _ = start_mcp_daemon(factory, pg, configure=configure)
    daemon.writer_password = password
    daemon.writer_token = token
    return daemon


@pytest.fixture(scope="module")
def wd(pgwarden_bin, pg):
    writesupport.create_write_role(pg, WRITER_ROLE, WRITER_PASSWORD)
    yield from module_daemon(pgwarden_bin, lambda daemons: _start(daemons, pg))


@pytest.fixture
def family(pg, wd):
    """w_parent 1..3; w_child: 100 rows of parent 1 and 5 of parent 2 (ON DELETE CASCADE);
    w_note: 7 rows of parent 3 (ON DELETE SET NULL)."""
    pg.execute("DROP TABLE IF EXISTS w_child, w_note, w_parent")
    pg.execute("CREATE TABLE w_parent (id int PRIMARY KEY)")
    pg.execute("CREATE TABLE w_child (id serial PRIMARY KEY, "
               "parent int REFERENCES w_parent ON DELETE CASCADE)")
    pg.execute("CREATE TABLE w_note (id serial PRIMARY KEY, "
               "parent int REFERENCES w_parent ON DELETE SET NULL)")
    pg.execute("INSERT INTO w_parent VALUES (1), (2), (3)")
    pg.execute("INSERT INTO w_child (parent) SELECT 1 FROM generate_series(1, 100)")
    pg.execute("INSERT INTO w_child (parent) SELECT 2 FROM generate_series(1, 5)")
    pg.execute("INSERT INTO w_note (parent) SELECT 3 FROM generate_series(1, 7)")
    pg.execute(f"GRANT SELECT, DELETE ON w_parent TO {WRITER_ROLE}")
    pg.execute(f"GRANT SELECT ON w_child, w_note TO {WRITER_ROLE}")
    writesupport.reset_table(pg, WRITER_ROLE)
    yield
    pg.execute("DROP TABLE IF EXISTS w_child, w_note, w_parent, w_items")


def _writer(wd):
    conn = wd.connect(user="writer", password=wd.writer_password, autocommit=False)
    return conn, conn.cursor()


def _notices(conn):
    out = list(conn.notices)
    del conn.notices[:]
    return out


def test_cascade_counts_against_the_cap(wd, pg, family):
    conn, cur = _writer(wd)
    cur.execute("SELECT * FROM w_parent WHERE id = 1")
    # The tag says 1 row; ON DELETE CASCADE removes 100 more: over the statement cap of 10.
    with pytest.raises(psycopg2.Error) as e:
        cur.execute("DELETE FROM w_parent WHERE id = 1")
    d = json.loads(e.value.diag.message_detail)
    assert d["code"] == "TOO_MANY_ROWS" and d["rows"] == 101 and d["cap"] == 10, d
    assert sorted(d["tables"]) == ["w_child: 100 rows", "w_parent: 1 row"], d
    assert "w_child: 100 rows" in e.value.diag.message_primary
    # Undone, the transaction still usable.
    cur.execute("SELECT count(*) FROM w_child")
    assert cur.fetchone()[0] == 105
    # Parent 2 takes 5 children with it, parent 3 sets 7 notes' parent to NULL: within the cap.
    cur.execute("DELETE FROM w_parent WHERE id = 2")
    assert cur.rowcount == 1
    last = [n for n in _notices(conn) if "Transaction open" in n][-1]
    assert "w_parent: 1 row" in last and "w_child: 5 rows" in last, last
    cur.execute("DELETE FROM w_parent WHERE id = 3")
    conn.commit()
    kept = [n for n in _notices(conn) if "Committed" in n]
    assert kept and "w_parent: 2 rows" in kept[0] and "w_child: 5 rows" in kept[0] \
        and "w_note: 7 rows" in kept[0], kept
    conn.close()
    assert pg.scalar("SELECT count(*) FROM w_child") == 100
    assert pg.scalar("SELECT count(*) FROM w_note WHERE parent IS NULL") == 7
    # History: the undone DELETE with every row it would have changed.
    rows = history(wd, "sql_text = 'DELETE FROM w_parent WHERE id = 1'")
    assert [(r["outcome"], r["rows_affected"], r["sqlstate"]) for r in rows] == [("error", 101, "54000")]


def test_cascade_counts_over_the_extended_protocol(wd, pg, family):
    with wd.raw() as c:
        c.login("writer", wd.writer_password)
        c.query("BEGIN")
        c.extended("SELECT * FROM w_parent WHERE id = 1")
        with pytest.raises(pgwtest.ServerError) as e:
            c.extended("DELETE FROM w_parent WHERE id = 1")
        d = json.loads(e.value.fields["D"])
        assert d["code"] == "TOO_MANY_ROWS" and d["rows"] == 101, d
        rows, _, _ = c.extended("SELECT * FROM w_child")
        assert rows == 105, "the cascade was undone"
        _, tags, notices = c.extended("DELETE FROM w_parent WHERE id = 2")
        assert tags == ["DELETE 1"]
        assert any("w_child: 5 rows" in n.get("M", "") for n in notices), notices
        c.query("COMMIT")
    assert pg.scalar("SELECT count(*) FROM w_child") == 100
    assert pg.scalar("SELECT count(*) FROM w_parent") == 2


def test_cascade_counts_over_mcp(wd, pg, family):
    c = McpHttp(wd.mcp_port, wd.writer_token)
    c.initialize(client="cascade")
    assert c.tool("describe_table", {"table": "w_parent", "sample_rows": 0})["isError"] is False
    assert c.tool("begin")["isError"] is False
    r = c.tool("execute", {"sql": "DELETE FROM w_parent WHERE id = 1"})
    s = r["structuredContent"]
    assert r["isError"] is True and s["code"] == "TOO_MANY_ROWS" and s["undone"] is True, s
    assert s["detail"]["rows"] == 101 and "w_child: 100 rows" in s["detail"]["tables"], s
    r = c.tool("execute", {"sql": "DELETE FROM w_parent WHERE id = 2"})
    assert r["isError"] is False and r["structuredContent"]["command"] == "DELETE 1", r
    s = c.tool("commit")["structuredContent"]
    assert "w_child: 5 rows" in s["notice"]["message"], s
    assert pg.scalar("SELECT count(*) FROM w_child") == 100


def test_tallies_follow_rollback_to_savepoint(wd, pg, family):
    conn, cur = _writer(wd)
    cur.execute("SELECT * FROM w_items WHERE id = 1")
    cur.execute("UPDATE w_items SET qty = 1 WHERE id <= 4")
    cur.execute("SAVEPOINT a")
    cur.execute("UPDATE w_items SET qty = 2 WHERE id > 4 AND id <= 14")
    cur.execute("SAVEPOINT b")
    cur.execute("UPDATE w_items SET qty = 3 WHERE id = 15")
    cur.execute("RELEASE SAVEPOINT b")  # its write now belongs to a
    cur.execute("ROLLBACK TO SAVEPOINT a")
    last = [n for n in _notices(conn) if "Transaction open" in n][-1]
    assert "w_items: 4 rows" in last, last
    # Within the transaction cap of 150 only because the undone 11 rows are not counted.
    for low in range(100, 240, 10):
        cur.execute(f"UPDATE w_items SET qty = 4 WHERE id > {low} AND id <= {low + 10}")
    conn.commit()
    kept = [n for n in _notices(conn) if "Committed" in n]
    assert kept and "w_items: 144 rows" in kept[0], kept
    conn.close()
    assert pg.scalar("SELECT count(*) FROM w_items WHERE qty <> 0") == 144
