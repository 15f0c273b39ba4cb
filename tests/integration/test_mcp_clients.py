"""Every client snippet of docs/mcp-clients.md, run against a real daemon: each JSON block parses,
each server entry connects as its client would (its URL and headers over HTTP, or its command
through `pgwarden mcp-stdio`) with the placeholders replaced, and each shell line runs with
`claude` or `npx` standing in where this machine has no such client (their arguments are checked)."""

import json
import os
import re
import shlex
import shutil
import subprocess

import pgwtest
from mcpsupport import McpHttp, start_mcp_daemon

PAGE = pgwtest.REPO_ROOT / "docs" / "mcp-clients.md"
URL = "http://127.0.0.1:6433/mcp"
MCP_DIR = pgwtest.REPO_ROOT / "tests" / "mcp"


def blocks(lang):
    return re.findall(r"```" + lang + r"\n(.*?)```", PAGE.read_text(), re.S)


def substitute(text, url, token, token_file, pgwarden_bin):
    return (text.replace(URL, url).replace("/home/you/.config/pgwarden/token", str(token_file))
            .replace("${PGWARDEN_TOKEN}", token).replace("${env:PGWARDEN_TOKEN}", token)
            .replace("${input:pgwarden-token}", token).replace("$PGWARDEN_TOKEN", token))


def discover_over_http(url, headers):
    port = int(url.split(":")[2].split("/")[0])
    c = McpHttp(port, None)
    status, _, body = c.post({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                              "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                                   "io.modelcontextprotocol/clientCapabilities": {}}}},
                             headers=dict(headers, **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}))
    c.close()
    return status, body


def discover_over_stdio(command, args):
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                       "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                            "io.modelcontextprotocol/clientCapabilities": {}}}})
    r = subprocess.run([command, *args], input=line + "\n", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[0])


def test_every_snippet_connects(pgwarden_factory, pgwarden_bin, pg, tmp_path):
    daemon, tokens = start_mcp_daemon(pgwarden_factory, pg)
    url = f"http://127.0.0.1:{daemon.mcp_port}/mcp"
    token = tokens["agent"]
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    entries = 0
    for block in blocks("json"):
        doc = json.loads(block)
        json.loads(substitute(block, url, token, token_file, pgwarden_bin))
        servers = doc.get("mcpServers") or doc.get("servers")
        assert servers and "pgwarden" in servers, block
        entry = json.loads(substitute(json.dumps(servers["pgwarden"]), url, token, token_file, pgwarden_bin))
        if "command" in entry:
            assert entry["command"] == "pgwarden"
            answer = discover_over_stdio(str(pgwarden_bin), entry["args"])
        else:
            assert entry.get("type", "http") == "http" and entry["headers"]["Authorization"] == f"Bearer {token}"
            status, answer = discover_over_http(entry["url"], entry["headers"])
            assert status == 200
        assert "2026-07-28" in answer["result"]["supportedVersions"], answer
        entries += 1
    assert entries == 4  # Claude Desktop, .mcp.json, Cursor, VS Code
    for block in blocks("sh"):
        words = shlex.split(substitute(block.strip(), url, token, token_file, pgwarden_bin))
        if words[0] == "claude":
            # claude mcp add [--transport http NAME URL --header H] | [NAME -- COMMAND ARGS...]
            assert words[1:3] == ["mcp", "add"]
            if "--" in words:
                cmd = words[words.index("--") + 1:]
                assert cmd[0] == "pgwarden"
                assert "2026-07-28" in discover_over_stdio(str(pgwarden_bin), cmd[1:])["result"]["supportedVersions"]
            else:
                assert words[words.index("--transport") + 1] == "http"
                header = words[words.index("--header") + 1]
                name, value = header.split(": ", 1)
                status, _ = discover_over_http(words[words.index("--transport") + 3], {name: value})
                assert status == 200
        else:
            assert words[:2] == ["npx", "@modelcontextprotocol/inspector"]
            node = shutil.which("node")
            cli = MCP_DIR / "node_modules" / "@modelcontextprotocol" / "inspector" / "cli" / "build" / "cli.js"
            if node is None or not cli.is_file():
                pgwtest.require_tool("node and tests/mcp/node_modules (run scripts/deps)")
            r = subprocess.run([node, str(cli), *words[2:]], cwd=MCP_DIR, capture_output=True, text=True,
                               timeout=120, env=dict(os.environ))
            assert r.returncode == 0, r.stderr
            assert "query" in {t["name"] for t in json.loads(r.stdout)["tools"]}
