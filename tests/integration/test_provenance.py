"""Provenance with every MCP answer (docs/provenance.md): the SQL the server ran after pgwarden's
rewrites, the verdicts and warnings, the planner's estimate against the rows returned, and the
age of the catalog statistics."""

import json

import pytest

import pgwtest
from mcpsupport import McpHttp, start_mcp_daemon


@pytest.fixture(scope="module")
def provd(pgwarden_bin, pg):
    pg.execute(f"""
        DROP TABLE IF EXISTS prov_a, prov_b;
        CREATE TABLE prov_a (id int PRIMARY KEY, b_id int NOT NULL);
        CREATE TABLE prov_b (id int PRIMARY KEY, name text NOT NULL);
        INSERT INTO prov_b SELECT i, 'b' || i FROM generate_series(1, 10) i;
        INSERT INTO prov_a SELECT i, 1 + i % 10 FROM generate_series(1, 50) i;
        GRANT SELECT ON prov_a, prov_b TO {pgwtest.READER_ROLE};
        ANALYZE prov_a, prov_b;
    """)
    from conftest import DaemonSet
    daemons = DaemonSet(pgwarden_bin)
    def configure(cfg):
        # The core user's group plans every read (and lets it run): the estimate is known.
        cfg["groups"]["passthrough"] = {"guards": [{"kind": "cost_gate", "plan": "all",
                                                    "seq_scan": "allow", "seq_scan_rows": 1,
                                                    "max_cost": 1000000000}]}

    try:
        yield start_mcp_daemon(daemons, pg, configure=configure)
    finally:
        daemons.teardown()


def test_a_rewritten_read_says_what_ran_and_why(provd):
    daemon, tokens = provd
    c = McpHttp(daemon.mcp_port, tokens["agent"])
    c.initialize()
    r = c.tool("query", {"sql": "SELECT id FROM prov_a WHERE id > 10"})
    p = r["structuredContent"]["provenance"]
    assert p["rewritten"] is True
    assert "LIMIT" in p["executed_sql"] and p["executed_sql"].startswith("SELECT id FROM prov_a")
    assert any(v["code"] == "ROWS_CAPPED" for v in p["verdicts"]), p
    assert p["rows_returned"] == 40
    assert isinstance(p["stats_age_seconds"], int) and p["stats_age_seconds"] >= 0


def test_a_planned_join_carries_the_estimate_against_the_rows(provd):
    daemon, tokens = provd
    c = McpHttp(daemon.mcp_port, tokens["core"])
    c.initialize()
    r = c.tool("query", {"sql": "SELECT a.id, b.name FROM prov_a a JOIN prov_b b ON b.id = a.b_id "
                                "WHERE a.id <= 20"})
    p = r["structuredContent"]["provenance"]
    assert p["rows_returned"] == 20
    assert isinstance(p["estimated_rows"], int) and p["estimated_rows"] > 0, p


def test_the_executed_sql_is_what_the_server_ran(provd):
    # No guard changes the text; the call's row cap (max_rows, default 1000) reaches the SQL as
    # LIMIT max_rows + 1, and provenance says so.
    daemon, tokens = provd
    c = McpHttp(daemon.mcp_port, tokens["core"])
    c.initialize()
    r = c.tool("query", {"sql": "SELECT count(*) FROM prov_b"})
    p = r["structuredContent"]["provenance"]
    assert p["executed_sql"] == "SELECT count(*) FROM prov_b\nLIMIT 1001"
    assert p["rewritten"] is True and p["verdicts"] == [] and p["rows_returned"] == 1


def test_the_wire_notice_comes_when_the_client_asks_for_it(provd):
    daemon, _ = provd
    with daemon.raw() as c:
        c.login("agent", daemon.passwords["agent"])
        _, _, notices = c.query("SELECT id FROM prov_a WHERE id > 10")
        assert not [n for n in notices if n.get("M") == "pgwarden provenance"]
        c.query("SET pgwarden.provenance = on")
        assert c.query("SHOW pgwarden.provenance")[0] == [("on",)]
        _, tags, notices = c.query("SELECT id FROM prov_a WHERE id > 10")
        assert tags == ["SELECT 40"]
        found = [json.loads(n["D"]) for n in notices if n.get("M") == "pgwarden provenance"]
        assert len(found) == 1, notices
        p = found[0]
        assert p["code"] == "PROVENANCE" and p["rewritten"] is True
        assert "LIMIT" in p["executed_sql"] and "ROWS_CAPPED" in p["verdicts"]
        assert p["rows_returned"] == 40
        c.query("RESET pgwarden.provenance")
        _, _, notices = c.query("SELECT 1")
        assert not [n for n in notices if n.get("M") == "pgwarden provenance"]


def test_the_wire_notice_carries_the_estimate_and_the_statistics_age(provd):
    """The wire's account has the fields the MCP one has: the planner's estimate when the cost
    gate planned the statement (the core user's group plans every read) and the age of the
    catalog statistics the statement was judged by."""
    daemon, _ = provd
    with daemon.raw() as c:
        c.login("core", daemon.passwords["core"])
        c.query("SET pgwarden.provenance = on")
        _, tags, notices = c.query("SELECT a.id, b.name FROM prov_a a JOIN prov_b b ON b.id = a.b_id "
                                   "WHERE a.id <= 20")
        assert tags == ["SELECT 20"]
        (p,) = [json.loads(n["D"]) for n in notices if n.get("M") == "pgwarden provenance"]
        assert isinstance(p["estimated_rows"], int) and p["estimated_rows"] > 0, p
        assert p["rows_returned"] == 20
        assert isinstance(p["stats_age_seconds"], int) and 0 <= p["stats_age_seconds"] < 3600, p
    with daemon.raw() as c:
        # The agent's group plans nothing: no estimate, and it says so.
        c.login("agent", daemon.passwords["agent"])
        c.query("SET pgwarden.provenance = on")
        _, _, notices = c.query("SELECT id FROM prov_a WHERE id > 10")
        (p,) = [json.loads(n["D"]) for n in notices if n.get("M") == "pgwarden provenance"]
        assert p["estimated_rows"] is None and isinstance(p["stats_age_seconds"], int), p
