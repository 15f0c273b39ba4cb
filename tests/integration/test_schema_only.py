"""Schema-only groups (docs/schema-only.md) over both doors: no value of a user table reaches the
caller (rows, describe_table's sample and known values, screens' value lists), while the schema
and counts do."""

import json

import pytest

import pgwtest
from mcpsupport import McpHttp, recorded_tool, mcp_daemon_with_group

TABLE = "schema_only_orders"
SECRET = b"QX-VALUE"  # in every status value; no byte sent to a caller may hold it



@pytest.fixture(scope="module")
def schemad(pgwarden_bin, pg):
    pg.execute(f"""
        DROP TABLE IF EXISTS {TABLE};
        CREATE TABLE {TABLE} (id int PRIMARY KEY, status text NOT NULL);
        INSERT INTO {TABLE} SELECT i, (ARRAY['OPEN', 'SHIPPED', 'LOST'])[1 + i % 3] || '-QX-VALUE'
          FROM generate_series(1, 30) AS i;
        GRANT SELECT ON {TABLE} TO {pgwtest.READER_ROLE};
        ANALYZE {TABLE};
    """)
    yield from mcp_daemon_with_group(pgwarden_bin, pg, {"guards": [], "schema_only": True})


def test_wire_rows_carry_no_values_and_counts_answer(schemad):
    daemon, _ = schemad
    with daemon.raw() as c:
        c.sock = pgwtest.RecordingSocket(c.sock)
        c.login("core", daemon.passwords["core"])
        rows, _, _ = c.query(f"SELECT id, status FROM {TABLE}")
        assert len(rows) == 30 and all(r == (None, None) for r in rows)
        assert c.query(f"SELECT count(DISTINCT status) FROM {TABLE}")[0] == [("3",)]
        grouped, _, _ = c.query(f"SELECT status, count(*) FROM {TABLE} GROUP BY status")
        assert sorted(int(r[1]) for r in grouped) == [10, 10, 10]
        assert c.query(f"SELECT count(*) FROM {TABLE} WHERE status = 'OPEN-QX-VALUE'")[0] == [("10",)]
        with pytest.raises(pgwtest.ServerError) as e:
            c.query(f"SELECT upper(status) FROM {TABLE}")
        assert "schema only" in e.value.message
        # A comparison with a value the column does not hold: no screen lists the real ones.
        c.query(f"SELECT count(*) FROM {TABLE} WHERE status = 'nothing'")
        # The catalog still answers: the schema is what this group sees.
        cols, _, _ = c.query(f"SELECT attname FROM pg_attribute WHERE attrelid = '{TABLE}'::regclass"
                             " AND attnum > 0 ORDER BY attnum")
        assert cols == [("id",), ("status",)]
        received = bytes(c.sock.received)
    assert SECRET not in received


def test_mcp_describe_table_has_no_sample_and_no_known_values(schemad):
    daemon, tokens = schemad
    c = McpHttp(daemon.mcp_port, tokens["core"])
    c.initialize()
    seen = bytearray()

    def call(name, args):
        return recorded_tool(c, name, args, seen)

    r = call("describe_table", {"table": f"public.{TABLE}", "sample_rows": 5})
    s = r["structuredContent"]
    assert s["sample"] is None and s["sample_withheld"] == "schema_only"
    assert [col["name"] for col in s["columns"]] == ["id", "status"]
    assert all(col["known_values"] is None for col in s["columns"])
    r = call("query", {"sql": f"SELECT status, count(*) AS n FROM {TABLE} GROUP BY status"})
    assert "10" in json.dumps(r["structuredContent"])
    r = call("query", {"sql": f"SELECT count(*) FROM {TABLE} WHERE status = 'nothing'"})
    assert SECRET not in seen


def test_the_catalog_statistics_views_are_refused(schemad):
    daemon, _ = schemad
    with daemon.raw() as c:
        c.sock = pgwtest.RecordingSocket(c.sock)
        c.login("core", daemon.passwords["core"])
        for sql in (f"SELECT most_common_vals FROM pg_stats WHERE tablename = '{TABLE}'",
                    "SELECT count(*) FROM pg_catalog.pg_statistic"):
            with pytest.raises(pgwtest.ServerError) as e:
                c.query(sql)
            assert "MASKED_COLUMN" in str(e.value.fields), sql
        received = bytes(c.sock.received)
    assert SECRET not in received
