"""bench/run --quick keeps working: it starts its own PostgreSQL, PgBouncer and pgwarden, runs
every target in every pgbench mode, the MCP tool calls against the wire protocol, the memory runs
and the micro-benchmarks, and writes JSON
with every cell filled. Only completeness is checked here; no timing figure is judged."""

import json
import subprocess

import pgwtest

BENCH_RUN = pgwtest.REPO_ROOT / "bench" / "run"


def test_bench_run_quick_writes_every_cell(pgwarden_bin, tmp_path):
    out = tmp_path / "quick.json"
    r = subprocess.run(["/usr/bin/python3", str(BENCH_RUN), "--quick", "--no-build",
                        "--pgwarden", str(pgwarden_bin), "--out", str(out)],
                       capture_output=True, text=True, timeout=540, env=pgwtest.pg_env())
    log = (r.stdout + r.stderr)[-6000:]
    assert r.returncode == 0, log
    results = json.loads(out.read_text())
    settings = results["settings"]
    assert results["mode"] == "quick"
    assert set(settings["targets"]) == {"direct", "pgbouncer", "pgwarden"}
    assert set(settings["modes"]) == {"simple", "extended", "prepared"}
    assert results["errors"] == [], log

    # Every (mode, clients) cell, every target, with figures from real transactions.
    cells = {(c["mode"], c["clients"]): c for c in results["cells"]}
    assert set(cells) == {(m, n) for m in settings["modes"] for n in settings["clients"]}
    for (mode, clients), cell in cells.items():
        for target in settings["targets"]:
            t = cell["targets"][target]
            where = f"{mode} c={clients} {target}: {t}"
            assert t["errors"] == [], where
            assert t["runs"] == settings["repeats"], where
            assert t["transactions"] > 0 and t["failed"] == 0, where
            assert t["tps_median"] > 0, where
            assert 0 < t["latency_median_us"] <= t["latency_p99_us"], where
        assert cell["ratios"]["pgwarden_over_direct_tps"] is not None
        assert cell["ratios"]["pgwarden_over_pgbouncer_tps"] is not None
    assert len(results["runs"]) == len(cells) * 3 * settings["repeats"]

    # The result screens' on/off runs: every cell, both variants, and no screen spoke.
    screens = results["screens"]
    assert {(c["mode"], c["clients"]) for c in screens["cells"]} == {
        (m, n) for m in settings["modes"] for n in screens["clients"]}
    for cell in screens["cells"]:
        for variant in ("screens_on", "screens_off"):
            assert cell["targets"][variant]["tps_median"] > 0, cell
        assert cell["ratios"]["on_over_off_tps"] is not None, cell
    assert screens["result_warnings"] == 0, screens

    # Worker loops: every cell with one loop and with two, from real transactions.
    workers = results["workers"]
    assert {(c["mode"], c["clients"]) for c in workers["cells"]} == set(cells)
    for cell in workers["cells"]:
        for variant in ("one_loop", "two_loops"):
            t = cell["targets"][variant]
            assert t["errors"] == [] and t["failed"] == 0 and t["tps_median"] > 0, cell
            assert t.get("proxy_cpu_us_per_tx") is not None, cell
        assert cell["ratios"]["two_over_one_tps"] is not None, cell

    # The MCP phase: both paths made every call and have figures; the tool call's added latency
    # is computed (its size is bench/run's to report, not this test's to judge).
    mcp = results["mcp"]
    assert mcp["user"] == "bench_agent" and mcp["sql"].startswith("SELECT"), mcp
    for path in ("wire_protocol", "mcp_query_tool"):
        x = mcp[path]
        assert x["calls"] == settings["mcp_calls"], (path, x)
        assert 0 < x["median_us"] <= x["p95_us"], (path, x)
        assert x["calls_per_s"] > 0 and x["proxy_cpu_us_per_call"] is not None, (path, x)
    assert mcp["added_median_us"] is not None and mcp["added_proxy_cpu_us_per_call"] is not None

    # Memory: every idle level reached, each client holding a server backend (session pooling),
    # and the slow reader got the whole result through pgwarden.
    idle = results["memory"]["pgwarden_idle"]
    assert [lv["connections"] for lv in idle["levels"]] == settings["idle_connections"], idle
    for lv in idle["levels"]:
        assert "error" not in lv, lv
        assert lv["rss_kib"] > 0 and "bytes_per_connection" in lv
    slow = results["memory"]["slow_reader"]
    expected_rows = settings["slow_reader_mb"] * 1000
    assert slow["error"] is None, slow
    assert slow["rows"] == expected_rows and slow["command_tag"] == f"SELECT {expected_rows}"
    assert slow["bytes_read"] > expected_rows * 1000
    assert slow["rss_samples_kib"], slow

    # Micro-benchmarks: whatever is built ran to completion and reported its cases.
    for name, entry in results["micro"]["binaries"].items():
        assert entry.get("exit_status") == 0 and entry["cases"], (name, entry)

    # The report names every target it checks against.
    for key in ("throughput_vs_pgbouncer", "added_latency_1_client", "mcp_tool_call_overhead",
                "memory_per_idle_connection", "slow_reader_bounded"):
        assert results["targets"][key]["status"], key
