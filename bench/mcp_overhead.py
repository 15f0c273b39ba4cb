#!/usr/bin/python3
"""The MCP endpoint's cost over the wire protocol, on this machine: the same one-row statement
(SELECT 1 as the guarded `agent` user) through pgwarden's `query` tool over a keep-alive HTTP
connection, and over a psycopg2 connection to pgwarden, one client each, N calls. Prints the
median and p95 latency of each path, calls per second, and the added median latency of a tool
call (the issue's target: at most 200 us). Uses the integration tests' harness (a PostgreSQL 15
made with initdb on a free port, the built daemon); nothing is judged by exit status.

  bench/mcp_overhead.py [--calls 2000] [--bin build/daemon/pgwarden]
"""

import argparse
import json
import pathlib
import statistics
import sys
import time

sys.dont_write_bytecode = True
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

import pgwtest  # noqa: E402
from conftest import DaemonSet  # noqa: E402
from mcpsupport import McpHttp, start_mcp_daemon  # noqa: E402


def timed(fn, calls):
    out = []
    for _ in range(calls):
        t = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t) / 1000.0)
    return out


def summary(us):
    us = sorted(us)
    return {"median_us": round(statistics.median(us), 1), "p95_us": round(us[int(len(us) * 0.95)], 1),
            "calls_per_s": round(1e6 * len(us) / sum(us), 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--bin", default=str(REPO / "build" / "daemon" / "pgwarden"))
    args = ap.parse_args()
    pg = pgwtest.PgCluster()
    daemons = DaemonSet(pathlib.Path(args.bin))
    try:
        pg.init()
        pg.start()
        pg.load_fixture_data(rows=10_000)
        daemon, tokens = start_mcp_daemon(daemons, pg, extra={"session_idle_timeout": "1h"})
        conn = daemon.connect(user="agent", password=daemon.passwords["agent"])
        cur = conn.cursor()
        mcp = McpHttp(daemon.mcp_port, tokens["agent"])
        mcp.initialize(client="bench")

        def wire():
            cur.execute("SELECT 1")
            cur.fetchall()

        def tool():
            r = mcp.tool("query", {"sql": "SELECT 1"})
            assert not r["isError"], r

        timed(wire, 200)  # warm both paths (pool, caches)
        timed(tool, 200)
        w = summary(timed(wire, args.calls))
        m = summary(timed(tool, args.calls))
        result = {"calls": args.calls, "wire_protocol": w, "mcp_query_tool": m,
                  "added_median_us": round(m["median_us"] - w["median_us"], 1)}
        print(json.dumps(result, indent=2))
        conn.close()
        mcp.close()
    finally:
        daemons.teardown()
        pg.destroy()


if __name__ == "__main__":
    main()
