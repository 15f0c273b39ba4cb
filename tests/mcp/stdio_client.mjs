// Drives `pgwarden mcp-stdio` with the official TypeScript SDK's stdio clients: the v1 client
// (initialize, a 2025 session through the bridge) and the v2 client pinned to 2026-07-28
// (server/discover and sessionless calls through the bridge). One "ok - ..." line per check.
// Usage: PGW_BIN=.../pgwarden PGW_MCP_URL=http://127.0.0.1:PORT/mcp PGW_TOKEN_FILE=... node stdio_client.mjs
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Client as ModernClient } from "@modelcontextprotocol/client";
import { StdioClientTransport as ModernStdio } from "@modelcontextprotocol/client/stdio";
import { check } from "./harness.mjs";

const params = {
  command: process.env.PGW_BIN,
  args: ["mcp-stdio", "--url", process.env.PGW_MCP_URL, "--token-file", process.env.PGW_TOKEN_FILE],
  stderr: "inherit",
};

const legacy = new Client({ name: "stdio-agent", version: "1.0.0" });
await legacy.connect(new StdioClientTransport(params));
check(legacy.getServerVersion()?.name === "pgwarden", "v1 stdio: initialize reaches pgwarden", legacy.getServerVersion());
const { tools } = await legacy.listTools();
check(tools.some((t) => t.name === "query"), "v1 stdio: tools/list", tools.map((t) => t.name));
const ok = await legacy.callTool({ name: "query", arguments: { sql: "SELECT 41 + 1 AS answer" } });
check(!ok.isError && ok.structuredContent?.rows?.[0]?.[0] === 42, "v1 stdio: query", ok);
const denied = await legacy.callTool({ name: "query", arguments: { sql: "DELETE FROM fct_shipments" } });
check(denied.isError === true && denied.structuredContent?.code === "READ_ONLY", "v1 stdio: denial", denied.structuredContent);
await legacy.close();

const modern = new ModernClient({ name: "stdio-modern-agent", version: "2.0.0" },
                                { versionNegotiation: { mode: { pin: "2026-07-28" } } });
await modern.connect(new ModernStdio(params));
check(modern.getProtocolEra() === "modern", "v2 stdio: modern era", modern.getProtocolEra());
const again = await modern.callTool({ name: "query", arguments: { sql: "SELECT 7 AS seven" } });
check(again.structuredContent?.rows?.[0]?.[0] === 7, "v2 stdio: query", again);
await modern.close();
console.log("all checks passed");
