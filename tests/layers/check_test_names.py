#!/usr/bin/env python3
"""Checks that the unit tests follow the code: every tests/unit/<folder>/<x>_test.cpp is the test
of <folder>/<x>.cpp or <folder>/<x>.h, so the test of a file is found by its name. Test files not
yet named after one source file are listed in PENDING with what they test; an entry whose file is
gone or now follows the rule is reported too, so the list only shrinks."""
import pathlib
import sys

# tests/unit/... path: what it tests, until it is split or renamed after one file.
PENDING = {
    "guards/housekeeping_test.cpp": "the chain's and budgets' shared housekeeping classification",
    "analysis/deep_statement_test.cpp": "analysis.cpp on deep statements (beside analysis_test.cpp)",
    "analysis/shape_cache_test.cpp": "shape.cpp and shape_template.cpp against full analyses",
    "daemon/auth_config_test.cpp": "daemon/config.cpp's auth section and salt_key.cpp",
    "daemon/config_reference_test.cpp": "the config loader against the pgwarden.yaml(5) page",
    "guards/config_test.cpp": "the `groups:` config parser in policy.cpp (beside policy_test.cpp)",
    "guards/corpus_test.cpp": "the whole chain on the security corpora",
    "guards/live_pg_test.cpp": "guards against a real PostgreSQL",
    "mcp/json_schema_suite_test.cpp": "json_schema.cpp on the JSON Schema Test Suite",
    "metrics/dashboard_test.cpp": "the Grafana dashboard against a live exposition",
    "metrics/metrics_config_test.cpp": "net/metrics_endpoint.cpp's config and authorization",
    "metrics/metrics_endpoint_test.cpp": "net/metrics_endpoint.cpp (with metrics_tests' helpers)",
    "metrics/promtool_test.cpp": "the exposition against Prometheus' own tools",
    "net/http_stream_test.cpp": "http_transport.cpp's streamed answers",
    "pool/pool_slots_test.cpp": "pool.cpp with connection_slots.cpp across two loops",
    "protocol/random_input_test.cpp": "every decoder, startup.cpp, frame_buffer.cpp and scram.cpp",
    "screens/screens_test.cpp": "every screen of screens/",
}


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    unit = root / "tests" / "unit"
    problems = []
    used = set()
    for test in sorted(unit.glob("*/*_test.cpp")):
        rel = test.relative_to(unit).as_posix()
        folder = test.parent.name
        stem = test.name[: -len("_test.cpp")]
        if (root / folder / f"{stem}.cpp").exists() or (root / folder / f"{stem}.h").exists():
            if rel in PENDING:
                problems.append(f"tests/unit/{rel} now names {folder}/{stem}: remove it from PENDING")
                used.add(rel)
            continue
        if rel in PENDING:
            used.add(rel)
            continue
        problems.append(f"tests/unit/{rel}: no {folder}/{stem}.cpp or {folder}/{stem}.h; name the "
                        f"test after the file it tests (tests/unit/<folder>/<file>_test.cpp)")
    for stale in sorted(set(PENDING) - used):
        problems.append(f"PENDING entry for a file that is gone, remove it: tests/unit/{stale}")
    for p in problems:
        print(p)
    print(f"test_names: {len(problems)} problem(s), {len(used)} pending file(s) still to be named")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
