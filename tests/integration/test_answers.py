"""Result screens (docs/answers.md) replayed the way an agent meets them: a shipments table like the
demo's, ANALYZEd, asked for 'late' shipments in every spelling an agent tries, for a range past the
data's end, and then the right way. The warnings must reach psql, psycopg2 and JDBC before the
result completes, and land in history and metrics; the right query gets none. A second table is
never ANALYZEd: its bounds come from min/max read through an index, or not at all."""

import datetime
import json
import time
import urllib.request

import pytest

import pgwtest
from conftest import DaemonSet

TABLE = "answer_shipments"
# The table's ship_date runs from 2023-01-01 over 1277 days.
LAST_DATE = (datetime.date(2023, 1, 1) + datetime.timedelta(days=1276)).isoformat()
COUNT_LATE = ("SELECT count(*) FROM answer_shipments WHERE status = '{status}' "
              "AND ship_date >= '2024-07-01'")
# Never analysed (autovacuum off for it): ship_date leads a btree index, delivered_on none.
FRESH = "answer_fresh"
FRESH_LAST = (datetime.date(2024, 1, 1) + datetime.timedelta(days=399)).isoformat()


@pytest.fixture(scope="module")
def screened(pgwarden_bin, pg):
    pg.execute(f"""
        DROP TABLE IF EXISTS {TABLE};
        CREATE TABLE {TABLE} (id bigint PRIMARY KEY, status text NOT NULL, ship_date date NOT NULL,
                              carrier text NOT NULL, weight numeric NOT NULL);
        INSERT INTO {TABLE}
          SELECT i, (ARRAY['DELIVERED', 'DELIVERED', 'DELIVERED', 'DELAYED', 'RETURNED'])[1 + i % 5],
                 date '2023-01-01' + (i % 1277), 'carrier' || (i % 7), (i % 90) + 0.5
          FROM generate_series(1, 20000) AS i;
        GRANT SELECT ON {TABLE} TO {pgwtest.READER_ROLE};
        ANALYZE {TABLE};
        DROP TABLE IF EXISTS {FRESH};
        CREATE TABLE {FRESH} (id bigint NOT NULL, ship_date date NOT NULL, delivered_on date NOT NULL)
            WITH (autovacuum_enabled = false);
        INSERT INTO {FRESH}
          SELECT i, date '2024-01-01' + (i % 400), date '2024-01-03' + (i % 400)
          FROM generate_series(1, 5000) AS i;
        CREATE INDEX ON {FRESH} (ship_date);
        GRANT SELECT ON {FRESH} TO {pgwtest.READER_ROLE};
    """)
    daemons = DaemonSet(pgwarden_bin)
    try:
        yield daemons.start(pg)
    finally:
        daemons.teardown()


def codes_in(notices):
    out = []
    for n in notices:
        for line in n.splitlines():
            if line.startswith("DETAIL:"):
                out.append(json.loads(line[len("DETAIL:"):].strip())["code"])
    return out


def ask(daemon, sql):
    """The rows of `sql` and the WARNING notices that came with them, over psycopg2."""
    conn = daemon.connect()
    try:
        cur = conn.cursor()
        cur.execute(sql)
        rows = cur.fetchall()
        return rows, [n for n in conn.notices if n.startswith("WARNING:")]
    finally:
        conn.close()


@pytest.mark.parametrize("status", ["late", "Late", "LATE", "overdue"])
def test_unknown_value_names_the_real_values(screened, status):
    rows, notices = ask(screened, COUNT_LATE.format(status=status))
    assert rows == [(0,)]
    assert codes_in(notices) == ["UNKNOWN_VALUE"], notices
    assert f"status has no value '{status}'; its values are" in notices[0]
    for value in ("DELAYED", "DELIVERED", "RETURNED"):
        assert value in notices[0]


def test_near_match_by_case(screened):
    rows, notices = ask(screened, COUNT_LATE.format(status="delayed "))
    assert rows == [(0,)]
    assert codes_in(notices) == ["UNKNOWN_VALUE"]
    assert "did you mean 'DELAYED'?" in notices[0]
    assert "HINT:  status = 'DELAYED'" in notices[0]


def test_range_past_the_data_is_out_of_range(screened):
    rows, notices = ask(screened, "SELECT count(*) FROM answer_shipments WHERE status = 'DELAYED' "
                                  "AND ship_date >= '2026-07-01'")
    assert rows == [(0,)]
    assert codes_in(notices) == ["OUT_OF_RANGE"], notices
    assert (f"ship_date data runs from 2023-01-01 to {LAST_DATE}; your range starts 2026-07-01"
            in notices[0])
    assert '"bounds_from":"pg_stats"' in notices[0]


def ask_until_warned(daemon, sql, timeout=15):
    """The index bounds land a moment after the catalog snapshot: ask until a warning comes."""
    deadline = time.monotonic() + timeout
    while True:
        rows, notices = ask(daemon, sql)
        if notices or time.monotonic() > deadline:
            return rows, notices
        time.sleep(0.2)


def test_unanalysed_table_takes_its_bounds_from_the_index(screened, pg):
    assert pg.scalar(f"SELECT count(*) FROM pg_stats WHERE tablename = '{FRESH}'") == 0
    # Two LIMIT 1 index scans, as the refresh reads them (MinMaxAgg), never a scan of the table.
    plan = "\n".join(r[0] for r in pg.execute(
        f"EXPLAIN SELECT min(ship_date)::text, max(ship_date)::text FROM public.{FRESH}"))
    assert plan.count("Limit") == 2 and "Seq Scan" not in plan, plan
    sql = f"SELECT count(*) FROM {FRESH} WHERE ship_date >= '2025-03-01'"
    rows, notices = ask_until_warned(screened, sql)
    assert rows == [(0,)]
    assert codes_in(notices) == ["OUT_OF_RANGE"], notices
    assert (f"ship_date data runs from 2024-01-01 to {FRESH_LAST}; your range starts 2025-03-01"
            in notices[0])
    assert '"bounds_from":"index"' in notices[0]
    r = pgwtest.psql(screened.dsn(), "-c", f"SELECT * FROM {FRESH} WHERE ship_date < '2023-06-01'",
                     password=screened.passwords["core"])
    assert r.returncode == 0, r.stderr
    assert (f"WARNING:  ship_date data runs from 2024-01-01 to {FRESH_LAST}; your range ends "
            "2023-06-01") in r.stderr
    assert "(0 rows)" in r.stdout
    # Still no statistics: the refresh read the index, it did not ANALYZE.
    assert pg.scalar(f"SELECT count(*) FROM pg_stats WHERE tablename = '{FRESH}'") == 0


def test_unanalysed_column_without_an_index_stays_silent(screened):
    # By now the index bounds of answer_fresh are in (the test above waited for them).
    ask_until_warned(screened, f"SELECT count(*) FROM {FRESH} WHERE ship_date >= '2025-03-01'")
    rows, notices = ask(screened, f"SELECT count(*) FROM {FRESH} WHERE delivered_on >= '2025-03-01'")
    assert rows == [(0,)] and notices == []


def test_the_refresh_probes_only_indexed_columns_under_a_timeout(screened, pg):
    ask_until_warned(screened, f"SELECT count(*) FROM {FRESH} WHERE ship_date >= '2025-03-01'")
    log = pg.log_since()
    assert (f'SET LOCAL statement_timeout = 200; SELECT min("ship_date")::text, '
            f'max("ship_date")::text FROM "public"."{FRESH}"') in log
    assert 'min("delivered_on")' not in log
    # SET LOCAL took effect in the Query's implicit transaction (PostgreSQL warns when it cannot).
    assert "SET LOCAL can only be used in transaction blocks" not in log


def test_the_right_query_gets_no_warning(screened):
    rows, notices = ask(screened, COUNT_LATE.format(status="DELAYED"))
    assert rows[0][0] > 0 and notices == []
    # Nor does a lookup that finds its row.
    rows, notices = ask(screened, "SELECT id, status FROM answer_shipments WHERE id = 44")
    assert rows == [(44, "RETURNED")] and notices == []


def test_psql_prints_the_warning_before_the_result(screened):
    r = pgwtest.psql(screened.dsn(), "-c", COUNT_LATE.format(status="late"),
                     password=screened.passwords["core"])
    assert r.returncode == 0, r.stderr
    assert "WARNING:  status has no value 'late'; its values are" in r.stderr
    assert "HINT:  status = 'DELAYED'" in r.stderr or "HINT:  status = 'DELIVERED'" in r.stderr
    assert " 0\n" in r.stdout


def test_history_and_metrics_carry_the_code(screened):
    ask(screened, COUNT_LATE.format(status="shipped_late"))
    rows = pgwtest.history_rows(screened, "sql_text LIKE '%shipped_late%'")
    assert rows, "no history record"
    actions = json.loads(rows[-1]["guard_actions"])
    assert [a["code"] for a in actions] == ["UNKNOWN_VALUE"]
    assert actions[0]["guard"] == "result_screen" and actions[0]["action"] == "warn"
    assert rows[-1]["warnings"] == 1
    with urllib.request.urlopen(f"http://127.0.0.1:{screened.metrics_port}/metrics", timeout=5) as r:
        body = r.read().decode()
    assert 'pgwarden_result_warnings_total{code="UNKNOWN_VALUE",group="passthrough"}' in body
    assert "pgwarden_catalog_stats_age_seconds{" in body


def test_jdbc_sees_the_warning_in_get_warnings(java, screened):
    """pgjdbc (extended protocol, as Statement and PreparedStatement): the notice arrives before
    CommandComplete, so it is attached to the statement."""
    url = f"jdbc:postgresql://127.0.0.1:{screened.port}/{pgwtest.DATABASE}"
    r = java.run("DenialCheck", url, "user=core", f"password={screened.passwords['core']}", "--",
                 COUNT_LATE.format(status="late"), COUNT_LATE.format(status="DELAYED"))
    assert r.returncode == 0, r.stdout + r.stderr
    facts = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    for mode in ("stmt", "prep"):
        assert facts[f"0.{mode}.outcome"] == "ok"
        warnings = facts[f"0.{mode}.warnings"]
        assert warnings.startswith("01000 status has no value 'late'; its values are"), warnings
        assert '"code":"UNKNOWN_VALUE"' in warnings
        assert facts[f"1.{mode}.warnings"] == ""


def test_limit_without_order_is_arbitrary(screened):
    rows, notices = ask(screened, "SELECT id FROM answer_shipments WHERE carrier = 'carrier1' LIMIT 5")
    assert len(rows) == 5
    assert codes_in(notices) == ["ARBITRARY_ROWS"], notices
    rows, notices = ask(screened, "SELECT id FROM answer_shipments WHERE carrier = 'carrier1' "
                                  "ORDER BY id DESC LIMIT 5")
    assert len(rows) == 5 and notices == []


def test_the_whole_table_is_unfiltered(screened):
    rows, notices = ask(screened, "SELECT id, status FROM answer_shipments")
    assert len(rows) == 20000
    assert codes_in(notices) == ["UNFILTERED"], notices
    assert "not a filtered subset" in notices[0]


def test_a_cut_result_is_partial(screened):
    """The agents group caps results at 1000 rows: after ROWS_TRUNCATED comes PARTIAL_RESULT with the
    aggregate to run instead."""
    conn = screened.connect(user="agent", password=screened.passwords["agent"])
    try:
        cur = conn.cursor()
        cur.execute("SELECT id FROM answer_shipments WHERE ship_date > '2023-02-01'")
        assert len(cur.fetchall()) == 1000
        notices = [n for n in conn.notices if n.startswith("WARNING:")]
    finally:
        conn.close()
    assert codes_in(notices) == ["ROWS_TRUNCATED", "PARTIAL_RESULT"], notices
    assert ("HINT:  SELECT count(*) FROM (SELECT id FROM answer_shipments WHERE ship_date > "
            "'2023-02-01') AS q") in notices[1]


def test_count_over_a_many_to_many_join_is_fanout(screened):
    rows, notices = ask(screened, "SELECT count(*) FROM answer_shipments a JOIN answer_shipments b "
                                  "ON a.carrier = b.carrier WHERE a.id < 50 AND b.id < 50")
    assert rows[0][0] > 49
    assert codes_in(notices) == ["FANOUT_JOIN"], notices
    rows, notices = ask(screened, "SELECT count(*) FROM answer_shipments a JOIN answer_shipments b "
                                  "ON a.id = b.id WHERE a.id < 50")
    assert rows == [(49,)] and notices == []


def test_deny_replaces_the_result_with_the_error(pgwarden_factory, screened, pg):
    import psycopg2
    d = pgwarden_factory.start(pg, overrides={"groups": {"passthrough": {
        "result_screens": {"UNKNOWN_VALUE": "deny", "OUT_OF_RANGE": "off"}}}})
    conn = d.connect()
    try:
        cur = conn.cursor()
        with pytest.raises(psycopg2.Error) as err:
            cur.execute(COUNT_LATE.format(status="late"))
        assert err.value.pgcode == "42501"
        assert "status has no value 'late'" in err.value.pgerror
        # The session goes on; a code turned off says nothing.
        cur.execute("SELECT count(*) FROM answer_shipments WHERE ship_date >= '2026-07-01'")
        assert cur.fetchone() == (0,)
        assert [n for n in conn.notices if n.startswith("WARNING:")] == []
    finally:
        conn.close()


def test_jdbc_bound_parameter_is_screened_with_its_value(java, screened):
    url = f"jdbc:postgresql://127.0.0.1:{screened.port}/{pgwtest.DATABASE}"
    r = java.run("JdbcCheck", "screen", url, "user=core", f"password={screened.passwords['core']}")
    assert r.returncode == 0, r.stdout + r.stderr
    facts = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    for round in range(7):
        if round == 1:
            assert int(facts["1.count"]) > 0 and facts["1.warning"] == "none"
            continue
        assert facts[f"{round}.count"] == "0"
        assert facts[f"{round}.warning"].startswith("01000 status has no value 'late'"), facts


def test_mcp_query_carries_the_same_warnings(pgwarden_factory, screened, pg):
    """The MCP `query` tool runs the same screens: 'late' gets UNKNOWN_VALUE naming DELAYED in
    the result's warnings (with the same code and text as on the wire); the right query gets none.
    (The screen fires on the single zero the runner now notices, as the wire session does.)"""
    from mcpsupport import McpHttp, start_mcp_daemon
    d, tokens = start_mcp_daemon(pgwarden_factory, pg)
    c = McpHttp(d.mcp_port, tokens["agent"])
    try:
        c.initialize()
        r = c.tool("query", {"sql": COUNT_LATE.format(status="late")})
        s = r["structuredContent"]
        assert s["rows"] == [[0]], s
        codes = [json.loads(w["detail"])["code"] for w in s["warnings"] if w.get("detail")]
        assert "UNKNOWN_VALUE" in codes, s["warnings"]
        text = next(w["message"] for w in s["warnings"] if "late" in w["message"])
        assert "DELAYED" in text and "'late'" in text
        _, notices = ask(screened, COUNT_LATE.format(status="late"))
        assert any(text in n for n in notices), (text, notices)
        r = c.tool("query", {"sql": COUNT_LATE.format(status="DELAYED")})
        assert r["structuredContent"]["warnings"] == [], r["structuredContent"]
    finally:
        c.close()
