"""`pgwarden mcp-stdio`: the stdio bridge to the MCP endpoint, driven by the official SDK's stdio
clients (v1 in a 2025 session, v2 pinned to 2026-07-28), and its refusals of a missing token."""

import os
import shutil
import subprocess

import pgwtest
from mcpsupport import history, start_mcp_daemon

MCP_DIR = pgwtest.REPO_ROOT / "tests" / "mcp"


def test_sdk_stdio_clients_through_the_bridge(pgwarden_factory, pgwarden_bin, pg, tmp_path):
    node = shutil.which("node")
    if node is None or not (MCP_DIR / "node_modules" / "@modelcontextprotocol" / "client").is_dir():
        pgwtest.require_tool("node and tests/mcp/node_modules (run scripts/deps)")
    daemon, tokens = start_mcp_daemon(pgwarden_factory, pg)
    token_file = tmp_path / "token"
    token_file.write_text(tokens["agent"] + "\n")
    env = dict(os.environ, PGW_BIN=str(pgwarden_bin), PGW_MCP_URL=f"http://127.0.0.1:{daemon.mcp_port}/mcp",
               PGW_TOKEN_FILE=str(token_file))
    r = subprocess.run([node, "stdio_client.mjs"], cwd=MCP_DIR, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}\nlog:\n{daemon.log()[-3000:]}"
    assert "all checks passed" in r.stdout
    rows = history(daemon, "agent_id IN ('stdio-agent', 'stdio-modern-agent')", count=3)
    assert {x["agent_id"] for x in rows} == {"stdio-agent", "stdio-modern-agent"}
    assert {x["outcome"] for x in rows} == {"ok", "denied"}


def test_raw_lines_through_the_bridge(pgwarden_factory, pgwarden_bin, pg, tmp_path):
    daemon, tokens = start_mcp_daemon(pgwarden_factory, pg)
    token_file = tmp_path / "token"
    token_file.write_text(tokens["agent"])
    lines = "\n".join([
        '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{'
        '"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}',
        '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{'
        '"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}',
    ]) + "\n"
    r = subprocess.run([str(pgwarden_bin), "mcp-stdio", "--url", f"http://127.0.0.1:{daemon.mcp_port}/mcp",
                        "--token-file", str(token_file)], input=lines, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    import json
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert out[0]["id"] == 1 and "2026-07-28" in out[0]["result"]["supportedVersions"]
    assert out[1]["id"] == 2 and out[1]["error"]["code"] == -32022
    bad = subprocess.run([str(pgwarden_bin), "mcp-stdio", "--url", "http://127.0.0.1:1/mcp",
                          "--token-file", str(tmp_path / "missing")], input="", capture_output=True, text=True)
    assert bad.returncode == 1 and "cannot read the token" in bad.stderr
    usage = subprocess.run([str(pgwarden_bin), "mcp-stdio"], capture_output=True, text=True)
    assert usage.returncode == 2
