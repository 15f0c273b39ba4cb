"""The MCP endpoint driven by the official MCP Inspector's CLI mode (@modelcontextprotocol/inspector
`--cli`, pinned by tests/mcp/package-lock.json and installed there by scripts/deps with `npm ci`):
tools/list, a query that returns a row, a denied statement and a wrong token, over the Streamable
HTTP transport with the bearer token sent through the CLI's `--header` option, then the history
the calls left.

The pin is 1.0.3, the last of the 1.x line: 2.x requires Node >= 22.19 and these machines have
Debian's Node 20. 1.0.3 declares Node >= 22.7.5 (npm warns EBADENGINE on install) but its CLI mode
runs on Node 20, which this test shows; it prints a deprecation notice for v1 on stderr."""

import json
import shutil
import subprocess

import pgwtest
from mcpsupport import history, start_mcp_daemon

MCP_DIR = pgwtest.REPO_ROOT / "tests" / "mcp"
INSPECTOR = MCP_DIR / "node_modules" / "@modelcontextprotocol" / "inspector" / "cli" / "build" / "cli.js"


def inspector(node, url, token, *args):
    """Runs `mcp-inspector --cli URL --transport http ...` as a user would (the package's own entry
    point, which starts its CLI client) and returns the finished process."""
    cmd = [node, str(INSPECTOR), "--cli", url, "--transport", "http",
           "--header", f"Authorization: Bearer {token}", *args]
    return subprocess.run(cmd, cwd=MCP_DIR, capture_output=True, text=True, timeout=120)


def result_of(r, daemon):
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}\nlog:\n{daemon.log()[-3000:]}"
    return json.loads(r.stdout)


def test_inspector_cli(pgwarden_factory, pg):
    node = shutil.which("node")
    if node is None or not INSPECTOR.is_file():
        pgwtest.require_tool("node and the MCP Inspector in tests/mcp/node_modules (run scripts/deps)")
    daemon, tokens = start_mcp_daemon(pgwarden_factory, pg)
    url = f"http://127.0.0.1:{daemon.mcp_port}/mcp"

    listed = result_of(inspector(node, url, tokens["agent"], "--method", "tools/list"), daemon)
    assert sorted(t["name"] for t in listed["tools"]) == [
        "describe_table", "explain", "list_schemas", "list_tables", "policy", "query", "search"]
    assert all(t["annotations"]["readOnlyHint"] is True for t in listed["tools"])

    ok = result_of(inspector(node, url, tokens["agent"], "--method", "tools/call", "--tool-name", "query",
                             "--tool-arg", "sql=SELECT 41 + 1 AS answer"), daemon)
    assert not ok.get("isError"), ok
    assert ok["structuredContent"]["columns"][0]["name"] == "answer"
    assert ok["structuredContent"]["rows"] == [[42]]
    assert ok["structuredContent"]["row_count"] == 1

    # max_rows comes from the command line as text; the CLI converts it by the tool's inputSchema.
    capped = result_of(inspector(node, url, tokens["agent"], "--method", "tools/call", "--tool-name", "query",
                                 "--tool-arg", "sql=SELECT g FROM generate_series(1, 100) g",
                                 "--tool-arg", "max_rows=5"), daemon)
    assert capped["structuredContent"]["row_count"] == 5 and capped["structuredContent"]["truncated"] is True

    denied = result_of(inspector(node, url, tokens["agent"], "--method", "tools/call", "--tool-name", "query",
                                 "--tool-arg", "sql=DELETE FROM fct_shipments"), daemon)
    assert denied["isError"] is True
    assert denied["structuredContent"]["code"] == "READ_ONLY"
    assert "READ_ONLY" in denied["content"][0]["text"]

    # A wrong token: the CLI fails to connect and shows pgwarden's 401 body.
    wrong = inspector(node, url, "pgw_not_a_token", "--method", "tools/list")
    assert wrong.returncode != 0 and not wrong.stdout.strip()
    assert "invalid token" in wrong.stderr, wrong.stderr

    # The CLI's calls left their history like any agent's: protocol mcp, agent from clientInfo.
    rows = history(daemon, "application_name = 'mcp:query'", count=3)
    assert [r["outcome"] for r in rows] == ["ok", "ok", "denied"], rows
    assert all(r["protocol"] == "mcp" and r["agent_id"].startswith("inspector") for r in rows), rows
