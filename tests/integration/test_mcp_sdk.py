"""The MCP endpoint driven by the official TypeScript SDK client (@modelcontextprotocol/sdk, pinned
by tests/mcp/package-lock.json and installed there by scripts/deps with `npm ci`): initialize,
tools/list, every tool, a denial, a cancelled long statement, a wrong token and session deletion,
then the history the calls left."""

import os
import shutil
import sqlite3
import subprocess
import time

import pgwtest
from mcpsupport import start_mcp_daemon

MCP_DIR = pgwtest.REPO_ROOT / "tests" / "mcp"


def test_typescript_sdk_client(pgwarden_factory, pg):
    node = shutil.which("node")
    if node is None or not (MCP_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pgwtest.require_tool("node and tests/mcp/node_modules (run scripts/deps)")
    daemon, tokens = start_mcp_daemon(pgwarden_factory, pg)
    env = dict(os.environ, PGW_MCP_URL=f"http://127.0.0.1:{daemon.mcp_port}/mcp",
               PGW_MCP_TOKEN=tokens["agent"], PGW_MCP_CORE_TOKEN=tokens["core"])
    r = subprocess.run([node, "sdk_client.mjs"], cwd=MCP_DIR, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}\nlog:\n{daemon.log()[-3000:]}"
    assert "all checks passed" in r.stdout
    # Every tool call that ran a statement left its records: protocol mcp, agent from clientInfo.
    deadline = time.monotonic() + 10
    while True:
        con = sqlite3.connect(str(daemon.dir / "history.db"))
        rows = con.execute("SELECT outcome, protocol, agent_id, application_name FROM pgwarden_history "
                           "WHERE agent_id = 'sdk-test-agent' ORDER BY id").fetchall()
        con.close()
        if any(o == "cancelled" for o, *_ in rows) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert rows and all(p == "mcp" for _, p, _, _ in rows)
    outcomes = [o for o, *_ in rows]
    assert "denied" in outcomes and "ok" in outcomes and "cancelled" in outcomes, rows
    assert {"mcp:query", "mcp:describe_table"} <= {a for *_, a in rows}


def test_typescript_sdk_v2_client_in_the_2026_era(pgwarden_factory, pg):
    """The SDK's v2 client (@modelcontextprotocol/client) pinned to 2026-07-28 and in auto mode:
    server/discover, then sessionless calls; each call recorded with the client's name."""
    node = shutil.which("node")
    if node is None or not (MCP_DIR / "node_modules" / "@modelcontextprotocol" / "client").is_dir():
        pgwtest.require_tool("node and tests/mcp/node_modules (run scripts/deps)")
    daemon, tokens = start_mcp_daemon(pgwarden_factory, pg)
    env = dict(os.environ, PGW_MCP_URL=f"http://127.0.0.1:{daemon.mcp_port}/mcp", PGW_MCP_TOKEN=tokens["agent"])
    r = subprocess.run([node, "modern_client.mjs"], cwd=MCP_DIR, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}\nlog:\n{daemon.log()[-3000:]}"
    assert "all checks passed" in r.stdout
    deadline = time.monotonic() + 10
    while True:
        con = sqlite3.connect(str(daemon.dir / "history.db"))
        rows = con.execute("SELECT outcome, protocol FROM pgwarden_history WHERE agent_id = 'modern-sdk-agent'").fetchall()
        con.close()
        if len(rows) >= 4 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert {o for o, _ in rows} >= {"ok", "denied"} and all(p == "mcp" for _, p in rows), rows
