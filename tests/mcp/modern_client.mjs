// Drives pgwarden's MCP endpoint with the official TypeScript SDK's v2 client
// (@modelcontextprotocol/client) pinned to protocol revision 2026-07-28: server/discover, then
// sessionless tools/list and tools/call with the per-request _meta the SDK attaches, a denial, and
// a second client in "auto" mode that must also choose the modern era. One "ok - ..." line per check.
// Usage: PGW_MCP_URL=http://127.0.0.1:PORT/mcp PGW_MCP_TOKEN=... node modern_client.mjs
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { check } from "./harness.mjs";

const url = new URL(process.env.PGW_MCP_URL);
const token = process.env.PGW_MCP_TOKEN;

async function connect(mode) {
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "modern-sdk-agent", version: "2.0.0" }, { versionNegotiation: { mode } });
  await client.connect(transport);
  return { client, transport };
}

const { client, transport } = await connect({ pin: "2026-07-28" });
check(client.getProtocolEra() === "modern", "pinned: modern era", client.getProtocolEra());
check(client.getNegotiatedProtocolVersion() === "2026-07-28", "pinned: 2026-07-28", client.getNegotiatedProtocolVersion());
const discovered = client.getDiscoverResult();
check(discovered?.supportedVersions?.includes("2025-11-25"), "discover lists the 2025 revision too", discovered);
check(!transport.sessionId, "no session id", transport.sessionId);

const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
check(JSON.stringify(names) === JSON.stringify(["describe_table", "explain", "list_schemas", "list_tables", "policy", "query", "search"]),
      "tools/list names", names);

const ok = await client.callTool({ name: "query", arguments: { sql: "SELECT 41 + 1 AS answer" } });
check(!ok.isError && ok.structuredContent?.rows?.[0]?.[0] === 42, "query allowed: one row", ok);

const denied = await client.callTool({ name: "query", arguments: { sql: "DELETE FROM fct_shipments" } });
check(denied.isError === true && denied.structuredContent?.code === "READ_ONLY", "query denied: READ_ONLY", denied.structuredContent);

const described = await client.callTool({ name: "describe_table", arguments: { table: "fct_shipments", sample_rows: 1 } });
check(!described.isError && described.structuredContent.table === "public.fct_shipments", "describe_table", described.structuredContent);
await client.close();

const auto = await connect("auto");
check(auto.client.getProtocolEra() === "modern", "auto: modern era chosen", auto.client.getProtocolEra());
const again = await auto.client.callTool({ name: "query", arguments: { sql: "SELECT 7" } });
check(again.structuredContent?.rows?.[0]?.[0] === 7, "auto: query", again);
await auto.client.close();
console.log("all checks passed");
