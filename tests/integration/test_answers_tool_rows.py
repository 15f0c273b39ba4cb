"""A per-tool `rows` assertion of result_assertions (docs/answers.md) over the real daemon's MCP
endpoint: an operator tool declared to return exactly one row warns ASSERTION_FAILED when a call
returns three, says nothing when a call returns one, and the same SQL sent through the query tool
is not held to the tool's declaration; with the code set to deny, the breaching call is refused
instead of answered. History keeps the finding with the tool's record."""

import json

import pytest

import pgwtest
from conftest import DaemonSet
from mcpsupport import McpHttp, start_mcp_daemon

TABLE = "rows_tool_carriers"
SQL = f"SELECT id, name FROM public.{TABLE} WHERE region = $region ORDER BY id"
TOOL = {"name": "carrier_of_region", "description": "The carrier serving a region (one per region).",
        "parameters": {"type": "object", "required": ["region"],
                       "properties": {"region": {"type": "string", "maxLength": 16}}},
        "sql": SQL, "result": "rows"}


def _daemon(pgwarden_bin, pg, action):
    pg.execute(f"""
        DROP TABLE IF EXISTS {TABLE};
        CREATE TABLE {TABLE} (id int PRIMARY KEY, name text NOT NULL, region text NOT NULL);
        INSERT INTO {TABLE} VALUES (1, 'north-a', 'north'), (2, 'south-a', 'south'),
                                   (3, 'south-b', 'south'), (4, 'south-c', 'south');
        ANALYZE {TABLE};
        GRANT SELECT ON {TABLE} TO {pgwtest.READER_ROLE};
    """)
    daemons = DaemonSet(pgwarden_bin)

    def configure(cfg):
        cfg["tools"] = [TOOL]
        cfg["groups"]["passthrough"] = {
            "guards": [],
            "result_assertions": [{"tools": [TOOL["name"]], "rows": 1}],
            "result_screens": {"ASSERTION_FAILED": action}}
    try:
        yield start_mcp_daemon(daemons, pg, configure=configure)
    finally:
        daemons.teardown()
        pg.execute(f"DROP TABLE IF EXISTS {TABLE}")


@pytest.fixture(scope="module")
def warned(pgwarden_bin, pg):
    yield from _daemon(pgwarden_bin, pg, "warn")


@pytest.fixture(scope="module")
def denied(pgwarden_bin, pg):
    yield from _daemon(pgwarden_bin, pg, "deny")


def _client(d):
    daemon, tokens = d
    c = McpHttp(daemon.mcp_port, tokens["core"])
    c.initialize(client="rows-assertion")
    return c


def _codes(result):
    return [w["code"] for w in result["structuredContent"].get("warnings", [])]


def test_a_tool_held_to_one_row_warns_when_it_returns_three(warned):
    c = _client(warned)
    r = c.tool(TOOL["name"], {"region": "south"})
    assert r["isError"] is False, r
    s = r["structuredContent"]
    assert s["row_count"] == 3, s
    assert _codes(r) == ["ASSERTION_FAILED"], s
    w = s["warnings"][0]
    detail = json.loads(w["detail"])
    assert detail["expected_rows"] == 1 and detail["rows"] == 3, detail
    # One row is what it promises: nothing to say.
    r = c.tool(TOOL["name"], {"region": "north"})
    assert r["isError"] is False and r["structuredContent"]["row_count"] == 1
    assert _codes(r) == [], r["structuredContent"]
    # The same SQL through the query tool is not that tool's call.
    r = c.tool("query", {"sql": SQL.replace("$region", "'south'")})
    assert r["isError"] is False and r["structuredContent"]["row_count"] == 3
    assert _codes(r) == [], r["structuredContent"]
    daemon, _ = warned
    rows = pgwtest.history_rows(daemon, f"tool_name = '{TOOL['name']}'", want=2)
    actions = [[a["code"] for a in json.loads(row["guard_actions"] or "[]")] for row in rows]
    assert actions == [["ASSERTION_FAILED"], []], actions


def test_a_group_that_denies_refuses_the_breaching_call(denied):
    c = _client(denied)
    r = c.tool(TOOL["name"], {"region": "south"})
    assert r["isError"] is True, r
    s = r["structuredContent"]
    assert s["denial"]["code"] == "ASSERTION_FAILED", s
    assert s["denial"]["detail"]["expected_rows"] == 1, s
    assert "rows" not in s, s
    r = c.tool(TOOL["name"], {"region": "north"})
    assert r["isError"] is False and r["structuredContent"]["row_count"] == 1
