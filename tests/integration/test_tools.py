"""Operator-defined tools (the tools: section) over the MCP endpoint, against the real database:
tools/list per group, arguments checked by the JSON Schema and the range caps with structured
refusals, values bound to a prepared statement (the server's log shows the bind values), the row
cap the caller cannot widen, the plan check, history and metrics; and the config errors."""

import json
import os
import subprocess
import time
import urllib.request

import pytest

import pgwtest
from mcpsupport import McpHttp, sdk_node, start_mcp_daemon
from test_mcp import history

TABLE = "tool_shipments"
INDEX = "tool_shipments_ship_date_idx"

LATE_SHIPMENTS = {
    "name": "late_shipments",
    "description": "Shipments with a given status between two dates (at most 92 days apart), newest "
                   "first, at most 500 rows.",
    "groups": ["agents"],
    "parameters": {
        "type": "object",
        "required": ["from", "to"],
        "properties": {
            "from": {"type": "string", "format": "date"},
            "to": {"type": "string", "format": "date"},
            "status": {"type": "string", "enum": ["DELIVERED", "DELAYED", "RETURNED"]},
            "carrier": {"type": "string", "maxLength": 32},
        },
    },
    "range_caps": [{"from": "from", "to": "to", "max_days": 92}],
    "sql": f"SELECT id, carrier, status, ship_date FROM public.{TABLE}\n"
           "WHERE ship_date >= $from AND ship_date < $to\n"
           "  AND ($status::text IS NULL OR status = $status)\n"
           "  AND ($carrier::text IS NULL OR carrier = $carrier)\n"
           "ORDER BY ship_date DESC, id DESC",
    "max_rows": 500,
    "plan_check": {"deny_seq_scan_on": [f"public.{TABLE}"]},
    "result": "rows",
}

TOOLS = [
    LATE_SHIPMENTS,
    {"name": "count_status", "description": "How many shipments have a status.",
     "parameters": {"type": "object", "required": ["status"],
                    "properties": {"status": {"type": "string", "enum": ["DELIVERED", "DELAYED", "RETURNED"]}}},
     "sql": f"SELECT count(*) AS n FROM public.{TABLE} WHERE status = $status AND id > 0",
     "result": "scalar"},
    {"name": "shipment", "description": "One shipment by id.",
     "parameters": {"type": "object", "required": ["id"],
                    "properties": {"id": {"type": "integer", "minimum": 1}}},
     "sql": f"SELECT id, carrier, status, ship_date FROM public.{TABLE} WHERE id = $id",
     "result": "single_row"},
    {"name": "analyst_only", "description": "Only the analysts group sees this.", "groups": ["analysts"],
     "sql": "SELECT 1 AS one"},
]


@pytest.fixture(scope="module")
def toolsd(pgwarden_bin, pg):
    from conftest import DaemonSet
    pg.execute(f"""
        DROP TABLE IF EXISTS {TABLE};
        CREATE TABLE {TABLE} AS SELECT * FROM fct_shipments;
        CREATE INDEX {INDEX} ON {TABLE} (ship_date);
        ANALYZE {TABLE};
        GRANT SELECT ON {TABLE} TO {pgwtest.READER_ROLE};
    """, dbname=pgwtest.DATABASE)
    daemons = DaemonSet(pgwarden_bin)

    def configure(cfg):
        cfg["tools"] = TOOLS
    try:
        daemon, tokens = start_mcp_daemon(daemons, pg, configure=configure)
        yield daemon, tokens
    finally:
        daemons.teardown()
        pg.execute(f"DROP TABLE IF EXISTS {TABLE}", dbname=pgwtest.DATABASE)


def client(toolsd, user="agent"):
    daemon, tokens = toolsd
    c = McpHttp(daemon.mcp_port, tokens[user])
    c.initialize()
    return c


def expected_rows(pg, lo, hi, status=None):
    where = f"ship_date >= '{lo}' AND ship_date < '{hi}'" + (f" AND status = '{status}'" if status else "")
    return pg.scalar(f"SELECT count(*) FROM {TABLE} WHERE {where}")


def test_tools_list_shows_the_groups_tools_with_their_schemas(toolsd):
    c = client(toolsd)
    tools = {t["name"]: t for t in c.call("tools/list")["result"]["tools"]}
    assert "late_shipments" in tools and "count_status" in tools and "shipment" in tools
    assert "analyst_only" not in tools  # another group's tool
    t = tools["late_shipments"]
    assert t["description"].startswith("Shipments with a given status")
    assert t["inputSchema"]["required"] == ["from", "to"]
    assert t["inputSchema"]["properties"]["status"]["enum"] == ["DELIVERED", "DELAYED", "RETURNED"]
    assert t["inputSchema"]["additionalProperties"] is False
    assert t["annotations"]["readOnlyHint"] is True
    assert "rows" in t["outputSchema"]["properties"]
    # Another group's tool is unknown to this caller, as one never configured.
    body = c.call("tools/call", {"name": "analyst_only", "arguments": {}})
    assert body["error"]["code"] == -32602 and "Unknown tool" in body["error"]["message"]


def test_a_good_call_returns_rows_window_and_truncated(toolsd, pg):
    c = client(toolsd)
    # ship_date 2024-03-03 is day 427 of the data (ids ending in 7): every row of that day is DELAYED or DELIVERED.
    r = c.tool("late_shipments", {"from": "2024-03-03", "to": "2024-03-04", "status": "DELAYED"})
    assert r["isError"] is False, r
    s = r["structuredContent"]
    want = expected_rows(pg, "2024-03-03", "2024-03-04", "DELAYED")
    assert 0 < want < 500
    assert s["row_count"] == want and s["truncated"] is False and s["max_rows"] == 500
    assert all(row["status"] == "DELAYED" and row["ship_date"] == "2024-03-03" for row in s["rows"])
    assert s["window"] == {"from": "2024-03-03", "to": "2024-03-04"}
    # 92 days hold far more than 500 rows: the cap is the tool's, and the caller is told.
    r = c.tool("late_shipments", {"from": "2024-01-01", "to": "2024-04-01"})
    s = r["structuredContent"]
    assert expected_rows(pg, "2024-01-01", "2024-04-01") > 500
    assert s["row_count"] == 500 and s["truncated"] is True
    assert "truncated" in r["content"][0]["text"]
    dates = [row["ship_date"] for row in s["rows"]]
    assert dates == sorted(dates, reverse=True) and dates[0] == "2024-03-31"


def test_partial_result_hint_runs_and_counts_every_row(toolsd, pg):
    """The PARTIAL_RESULT hint of a capped operator tool is a statement that runs as it stands:
    the arguments written in, pgwarden's LIMIT 501 left out, so its count is the whole answer."""
    c = client(toolsd)
    r = c.tool("late_shipments", {"from": "2024-01-01", "to": "2024-04-01", "status": "DELIVERED"})
    partial = [w for w in r["structuredContent"]["warnings"] if w["code"] == "PARTIAL_RESULT"]
    assert partial, r["structuredContent"]["warnings"]
    hint = partial[0]["hint"]
    assert "$" not in hint and "LIMIT 501" not in hint, hint
    counted = c.tool("query", {"sql": hint})
    assert counted["isError"] is False, counted
    want = expected_rows(pg, "2024-01-01", "2024-04-01", "DELIVERED")
    assert want > 501 and counted["structuredContent"]["rows"] == [[want]]


def test_scalar_and_single_row_results(toolsd, pg):
    c = client(toolsd)
    r = c.tool("count_status", {"status": "RETURNED"})
    want = pg.scalar(f"SELECT count(*) FROM {TABLE} WHERE status = 'RETURNED'")
    assert r["isError"] is False and r["structuredContent"]["value"] == want
    r = c.tool("shipment", {"id": 1007})
    row = r["structuredContent"]["row"]
    assert row["id"] == 1007 and row["status"] == "DELAYED"
    r = c.tool("shipment", {"id": 999999999})
    assert r["isError"] is False and r["structuredContent"]["row"] is None


@pytest.mark.parametrize("args,rule,argument", [
    ({"from": "2024-03-01"}, "required", "to"),
    ({"from": "March 1st", "to": "2024-03-02"}, "format", "from"),
    ({"from": "2024-02-30", "to": "2024-03-02"}, "format", "from"),
    ({"from": "2024-03-01", "to": "2024-03-02", "status": "late"}, "enum", "status"),
    ({"from": "2024-03-01", "to": "2024-03-02", "limit": 10}, "additionalProperties", "limit"),
    ({"from": "2024-03-01", "to": "2024-03-02", "carrier": "x" * 33}, "maxLength", "carrier"),
    ({"from": 20240301, "to": "2024-03-02"}, "type", "from"),
])
def test_each_bad_argument_is_refused_with_what_would_pass(toolsd, args, rule, argument):
    c = client(toolsd)
    r = c.tool("late_shipments", args)
    assert r["isError"] is True, r
    d = r["structuredContent"]["denial"]
    assert d["code"] == "INVALID_ARGUMENTS"
    assert any(v["rule"] == rule and v["argument"] == argument for v in d["violations"]), d
    assert d["next_step"]
    if rule == "enum":
        v = next(v for v in d["violations"] if v["rule"] == "enum")
        assert v["expected"] == ["DELIVERED", "DELAYED", "RETURNED"]
        assert "DELAYED" in v["message"]


def test_a_400_day_range_is_refused_with_range_too_wide(toolsd):
    c = client(toolsd)
    r = c.tool("late_shipments", {"from": "2023-01-01", "to": "2024-02-05"})
    assert r["isError"] is True
    d = r["structuredContent"]["denial"]
    assert d["code"] == "RANGE_TOO_WIDE" and d["max_days"] == 92 and d["got_days"] == 400
    assert "split the range" in d["next_step"]
    r = c.tool("late_shipments", {"from": "2024-03-02", "to": "2024-03-01"})
    assert r["structuredContent"]["denial"]["code"] == "RANGE_REVERSED"


def test_a_value_holding_sql_stays_a_value(toolsd, pg):
    c = client(toolsd)
    evil = "'); DROP TABLE x; --"
    r = c.tool("late_shipments", {"from": "2024-03-01", "to": "2024-03-02", "carrier": evil})
    assert r["isError"] is False and r["structuredContent"]["row_count"] == 0
    assert pg.scalar(f"SELECT count(*) FROM {TABLE}") > 0


def test_the_statement_runs_prepared_with_bind_values(toolsd, pg):
    c = client(toolsd)
    offset = pg.log_offset()
    r = c.tool("late_shipments", {"from": "2024-05-01", "to": "2024-05-03", "carrier": "DHL"})
    assert r["isError"] is False
    deadline = time.monotonic() + 5
    while True:
        log = pg.log_since(offset)
        if "parameters:" in log or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    # log_statement = all: an extended-protocol Execute with its bind values, never the text
    # with the values spliced in.
    assert "execute <unnamed>: SELECT id, carrier, status, ship_date FROM public.tool_shipments" in log, log[-3000:]
    assert "$1 = '2024-05-01'" in log and "'DHL'" in log
    assert "'2024-05-01'" not in log.split("parameters:")[0].split("execute <unnamed>:")[-1]
    assert "LIMIT 501" in log


def test_history_records_the_tool_and_its_arguments(toolsd):
    daemon, _ = toolsd
    c = client(toolsd)
    c.tool("late_shipments", {"from": "2024-06-01", "to": "2024-06-02", "status": "RETURNED"})
    c.tool("late_shipments", {"from": "2020-01-01", "to": "2024-01-01"})
    rows = history(daemon, "tool_name = 'late_shipments' AND tool_args LIKE '%2024-06-01%'")
    assert rows and rows[-1]["outcome"] == "ok" and rows[-1]["protocol"] == "mcp"
    args = json.loads(rows[-1]["tool_args"])
    assert args == {"from": "2024-06-01", "to": "2024-06-02", "status": "RETURNED"}
    assert "$1" in rows[-1]["sql_text"]
    denied = history(daemon, "tool_name = 'late_shipments' AND deny_code = 'RANGE_TOO_WIDE'")
    assert denied and denied[-1]["outcome"] == "denied"
    # Built-in tools are named too.
    c.tool("query", {"sql": "SELECT 1"})
    assert history(daemon, "tool_name = 'query'")


def test_plan_check_denies_a_seq_scan_when_the_index_is_gone(toolsd, pg):
    daemon, _ = toolsd
    c = client(toolsd)
    args = {"from": "2024-03-01", "to": "2024-03-03"}
    assert c.tool("late_shipments", args)["isError"] is False
    pg.execute(f"DROP INDEX {INDEX}", dbname=pgwtest.DATABASE)
    try:
        r = c.tool("late_shipments", args)
        assert r["isError"] is True, r
        d = r["structuredContent"]["denial"]
        assert d["code"] == "SEQ_SCAN" and "public.tool_shipments" in d["message"], d
        assert d["next_step"]
        assert history(daemon, "tool_name = 'late_shipments' AND deny_code = 'SEQ_SCAN'")
    finally:
        pg.execute(f"CREATE INDEX {INDEX} ON {TABLE} (ship_date); ANALYZE {TABLE}", dbname=pgwtest.DATABASE)
    assert c.tool("late_shipments", args)["isError"] is False


def test_tool_calls_are_counted_per_tool(toolsd):
    daemon, _ = toolsd
    c = client(toolsd)
    c.tool("count_status", {"status": "DELAYED"})
    c.tool("count_status", {"status": "nope"})
    body = urllib.request.urlopen(f"http://127.0.0.1:{daemon.metrics_port}/metrics", timeout=5).read().decode()
    values = {}
    for line in body.splitlines():
        if line.startswith("pgwarden_tool_calls_total{"):
            k, v = line.rsplit(" ", 1)
            values[k] = float(v)
    assert values.get('pgwarden_tool_calls_total{outcome="ok",tool="count_status"}', 0) >= 1, values
    assert values.get('pgwarden_tool_calls_total{outcome="denied",tool="count_status"}', 0) >= 1, values


def test_the_typescript_sdk_client_calls_operator_tools(toolsd):
    """The official SDK validates structuredContent against each tool's outputSchema."""
    daemon, tokens = toolsd
    node, mcp_dir = sdk_node()
    env = dict(os.environ, PGW_MCP_URL=f"http://127.0.0.1:{daemon.mcp_port}/mcp", PGW_MCP_TOKEN=tokens["agent"])
    r = subprocess.run([node, "tools_client.mjs"], cwd=mcp_dir, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}\nlog:\n{daemon.log()[-3000:]}"
    assert "all checks passed" in r.stdout


BAD_TOOLS = [
    ({"sql": "SELECT $nope"}, "tools.t.sql", "does not declare"),
    ({"parameters": {"type": "object", "properties": {"a": {"type": "string"}}}, "sql": "SELECT 1"},
     "tools.t.parameters.properties.a", "never uses"),
    ({"parameters": {"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}, "sql": "SELECT $a"},
     "tools.t.parameters", "oneOf"),
    ({"sql": "DELETE FROM scratch WHERE id = 1"}, "tools.t.sql", "must be a read"),
    ({"sql": "SELECT 1 LIMIT 5"}, "tools.t.sql", "max_rows"),
    ({"sql": "SELEC 1"}, "tools.t.sql", "does not parse"),
    ({"sql": "SELECT $1"}, "tools.t.sql", "positional"),
    ({"name": "query"}, "tools.query.name", "built-in"),
    ({"groups": ["nobody"]}, "tools.t.groups", "not defined"),
    ({"range_caps": [{"from": "a", "to": "b", "max_days": 3}],
      "parameters": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
      "sql": "SELECT $a, $b"}, "tools.t.range_caps[0]", "format date"),
]


@pytest.mark.parametrize("change,key,words", BAD_TOOLS)
def test_config_errors_name_the_tool_and_the_key(pgwarden_factory, pg, change, key, words):
    d = pgwarden_factory.start(pg, start=False)
    tool = {"name": "t", "description": "a tool", "sql": "SELECT 1"}
    tool.update(change)
    d.config["tools"] = [tool]
    d.write_config()
    r = subprocess.run([d.binary, "--check-config", str(d.config_path)], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0, r.stdout
    err = r.stderr + r.stdout
    assert key in err and words in err, err
