// Drives pgwarden's MCP endpoint with the official TypeScript SDK client, as an agent would:
// initialize, tools/list, every tool, a denial, a cancelled long statement, a wrong token, and
// ending the session. Prints one "ok - ..." line per check; exits non-zero on the first failure.
// Usage: PGW_MCP_URL=http://127.0.0.1:PORT/mcp PGW_MCP_TOKEN=... PGW_MCP_CORE_TOKEN=... node sdk_client.mjs
import { check, connect as connectAs } from "./harness.mjs";

const url = new URL(process.env.PGW_MCP_URL);
const token = process.env.PGW_MCP_TOKEN;            // a user of the guarded example group
const coreToken = process.env.PGW_MCP_CORE_TOKEN;    // a user without guards (pg_sleep allowed)

const connect = (bearer) => connectAs(url, bearer, "sdk-test-agent");

const { client, transport } = await connect(token);
check(client.getServerVersion()?.name === "pgwarden", "initialize: server is pgwarden", client.getServerVersion());
check(typeof transport.sessionId === "string" && transport.sessionId.length > 0, "session id issued");

const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
check(JSON.stringify(names) === JSON.stringify(["describe_table", "explain", "list_schemas", "list_tables", "policy", "query", "search"]),
      "tools/list names", names);
check(tools.every((t) => t.annotations?.readOnlyHint === true), "every tool is readOnlyHint");

const ok = await client.callTool({ name: "query", arguments: { sql: "SELECT 41 + 1 AS answer" } });
check(!ok.isError && ok.structuredContent?.rows?.[0]?.[0] === 42, "query allowed: one row, typed", ok.structuredContent);
check(ok.structuredContent.columns[0].name === "answer", "query: column names");

const denied = await client.callTool({ name: "query", arguments: { sql: "DELETE FROM fct_shipments" } });
check(denied.isError === true && denied.structuredContent?.code === "READ_ONLY", "query denied: READ_ONLY", denied.structuredContent);
check(typeof denied.structuredContent.next_step === "string", "denial carries next_step");

const capped = await client.callTool({ name: "query", arguments: { sql: "SELECT g FROM generate_series(1, 100) g", max_rows: 5 } });
check(capped.structuredContent.row_count === 5 && capped.structuredContent.truncated === true, "row cap and truncated");

const policy = await client.callTool({ name: "policy", arguments: {} });
check(!policy.isError && typeof policy.structuredContent.group === "string", "policy tool", policy.structuredContent);

const schemas = await client.callTool({ name: "list_schemas", arguments: {} });
check(!schemas.isError && Array.isArray(schemas.structuredContent.schemas), "list_schemas tool");

const tables = await client.callTool({ name: "list_tables", arguments: { name_like: "fct%" } });
check(!tables.isError && Array.isArray(tables.structuredContent.tables), "list_tables tool");

const described = await client.callTool({ name: "describe_table", arguments: { table: "fct_shipments", sample_rows: 2 } });
check(!described.isError && described.structuredContent.table === "public.fct_shipments", "describe_table tool", described.structuredContent);

const explained = await client.callTool({ name: "explain", arguments: { sql: "SELECT * FROM fct_shipments WHERE id = 3" } });
check(!explained.isError && explained.structuredContent.scans.length > 0, "explain tool", explained.structuredContent);

// Cancellation: the SDK sends notifications/cancelled when the signal aborts.
const core = await connect(coreToken);
const controller = new AbortController();
const started = Date.now();
const slow = core.client.callTool({ name: "query", arguments: { sql: "SELECT pg_sleep(30)" } }, undefined,
                             { signal: controller.signal, timeout: 60000 });
setTimeout(() => controller.abort("test cancels"), 1000);
let aborted = false;
try {
  await slow;
} catch (e) {
  aborted = true;
}
check(aborted && Date.now() - started < 15000, "a long statement is cancelled");
const after = await core.client.callTool({ name: "query", arguments: { sql: "SELECT 1 AS still_here" } });
check(!after.isError && after.structuredContent.rows[0][0] === 1, "the session works after a cancel");

// A wrong token: the SDK reports the 401.
let refused = false;
try {
  await connect("pgw_not_a_token");
} catch (e) {
  refused = /401|Unauthorized|invalid/i.test(String(e));
}
check(refused, "a wrong token is refused with 401");

await core.transport.terminateSession();
await core.client.close();
await transport.terminateSession();
check(transport.sessionId === undefined, "session deleted");
await client.close();
console.log("sdk client: all checks passed");
