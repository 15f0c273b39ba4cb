"""The official MCP conformance suite (@modelcontextprotocol/conformance) against pgwarden's
endpoint, with trust_loopback since the suite sends no token, in both eras:
- 2025-11-25 (suite 0.1.13, pinned in tests/mcp; one run of the active suite): the scenarios a
  minimal SDK server passes must pass here; tests/mcp/conformance-baseline.yml lists the others
  with the reason.
- 2026-07-28 (suite 0.2.x, `--requirements 2026-07-28`, pinned in tests/mcp/node22 with the Node 22
  it needs, both from the npm registry): one run of the whole requirement set; each scenario either
  passes or is in tests/mcp/conformance-baseline-2026-07-28.yml with the reason it does not apply
  to a database endpoint.
Each era's suite runs once (a few seconds); the tests read its per-scenario results, and print
each scenario's verdict with its reason (pytest -s shows them)."""

import json
import re
import shutil
import subprocess

import pytest

import pgwtest
from mcpsupport import start_mcp_daemon

MCP_DIR = pgwtest.REPO_ROOT / "tests" / "mcp"
SUITE = MCP_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE = MCP_DIR / "conformance-baseline.yml"
MUST_PASS = ["server-initialize", "ping", "tools-list", "dns-rebinding-protection",
             "server-sse-multiple-streams", "logging-set-level"]

NODE22_DIR = MCP_DIR / "node22"
NODE22 = NODE22_DIR / "node_modules" / ".bin" / "node"
SUITE_2026 = NODE22_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE_2026 = MCP_DIR / "conformance-baseline-2026-07-28.yml"
MUST_PASS_2026 = ["server-stateless", "tools-list", "server-sse-multiple-streams",
                  "dns-rebinding-protection", "caching", "input-required-result-unsupported-methods",
                  "input-required-result-validate-input", "http-header-validation"]


@pytest.fixture(scope="module")
def endpoint(pgwarden_bin, pg):
    from conftest import DaemonSet
    daemons = DaemonSet(pgwarden_bin)
    try:
        daemon, _ = start_mcp_daemon(daemons, pg, extra={"trust_loopback": "agent"})
        yield f"http://127.0.0.1:{daemon.mcp_port}/mcp"
    finally:
        daemons.teardown()


def run_suite(node, suite, endpoint, args, out):
    """One run of the suite against the endpoint: (exit status, output, {scenario: checks})."""
    r = subprocess.run([node, str(suite), "server", "--url", endpoint, *args, "-o", str(out)],
                       cwd=suite.parents[4], capture_output=True, text=True, timeout=300)
    checks = {}
    for f in out.glob("*/checks.json"):
        # <out>/server-<scenario>-<timestamp>/checks.json
        scenario = re.sub(r"^server-|-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", f.parent.name)
        checks[scenario] = json.loads(f.read_text())
    return r.returncode, r.stdout + r.stderr, checks


@pytest.fixture(scope="module")
def run_2025(endpoint, tmp_path_factory):
    """The active suite of 0.1.13 (the 2025-11-25 scenarios), once, against its baseline."""
    if shutil.which("node") is None or not SUITE.is_file():
        pgwtest.require_tool("node and tests/mcp/node_modules (run scripts/deps)")
    return run_suite("node", SUITE, endpoint, ["--expected-failures", str(BASELINE)],
                     tmp_path_factory.mktemp("conformance-2025"))


@pytest.fixture(scope="module")
def run_2026(endpoint, tmp_path_factory):
    """The 2026-07-28 requirement set of 0.2.x, once, against its baseline."""
    if not NODE22.is_file() or not SUITE_2026.is_file():
        pgwtest.require_tool("Node 22 and the conformance suite 0.2.x in tests/mcp/node22/node_modules")
    return run_suite(str(NODE22), SUITE_2026, endpoint,
                     ["--requirements", "2026-07-28", "--expected-failures", str(BASELINE_2026),
                      "--timeout", "10000"],
                     tmp_path_factory.mktemp("conformance-2026"))


def baseline_reasons(path):
    """{scenario or scenario:check: reason} of a baseline file: each entry's reason is the
    comment block above it."""
    reasons, comment, in_comment = {}, [], False
    for line in path.read_text().splitlines():
        s = line.strip()
        if s.startswith("#"):
            comment = (comment if in_comment else []) + [s.lstrip("# ")]
        elif s.startswith("- "):
            reasons[s[2:].strip()] = " ".join(comment)
        in_comment = s.startswith("#")
    return reasons


def failed(checks):
    return [c for c in checks if c["status"] in ("FAILURE", "WARNING")]


def unexpected(scenario, checks, reasons):
    """The failed checks of a scenario that the baseline does not expect."""
    if scenario in reasons:
        return []
    return [c for c in failed(checks) if f"{scenario}:{c['id']}" not in reasons]


def verdict(scenario, checks, reasons):
    if scenario in reasons:
        return f"not applicable: {reasons[scenario]}"
    bad = unexpected(scenario, checks, reasons)
    if bad:
        return "FAIL: " + "; ".join(f"{c['id']}: {c.get('errorMessage', '')}" for c in bad)
    excused = [c["id"] for c in failed(checks)]
    if excused:
        why = sorted({reasons[f"{scenario}:{c}"] for c in excused})
        return f"pass, but for {', '.join(excused)}: not applicable: {' '.join(why)}"
    return "pass"


def against_baseline(run, baseline, title):
    """The run passed its baseline (no new failure, no stale entry); prints each scenario's
    verdict."""
    code, output, checks = run
    reasons = baseline_reasons(baseline)
    print(f"\n{title}:")
    for scenario in sorted(checks):
        print(f"  {scenario}: {verdict(scenario, checks[scenario], reasons)}")
    assert code == 0, output[-8000:]
    assert all(reasons.values()), "a baseline entry without its reason"
    missing = {k for k in reasons if ":" not in k} - set(checks)
    assert not missing, f"baseline entries the suite did not run: {missing}"


def scenario_passes(run, baseline, scenario):
    _, output, checks = run
    assert scenario in checks, f"{scenario} did not run:\n{output[-4000:]}"
    bad = unexpected(scenario, checks[scenario], baseline_reasons(baseline))
    assert not bad, json.dumps(bad, indent=1)


def test_active_suite_against_the_baseline(run_2025):
    """Every other scenario of the active suite fails only as the baseline says, and no scenario
    in the baseline passes (a stale entry fails the run too)."""
    against_baseline(run_2025, BASELINE, "2025-11-25 (active suite of 0.1.13), server scenarios")


@pytest.mark.parametrize("scenario", MUST_PASS)
def test_conformance_scenario(run_2025, scenario):
    scenario_passes(run_2025, BASELINE, scenario)


def test_2026_07_28_requirement_set_against_its_baseline(run_2026):
    """Every scenario the 2026-07-28 revision requires of a server passes, or is in the baseline
    with the reason it does not apply; a listed scenario that starts passing fails the run too."""
    against_baseline(run_2026, BASELINE_2026, "2026-07-28 requirement set, server scenarios")


@pytest.mark.parametrize("scenario", MUST_PASS_2026)
def test_2026_07_28_scenario(run_2026, scenario):
    scenario_passes(run_2026, BASELINE_2026, scenario)
