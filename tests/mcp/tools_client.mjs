// Calls pgwarden's operator-defined tools with the official TypeScript SDK client. The SDK checks
// every structuredContent against the outputSchema tools/list gave, so a result that does not
// match its declared shape fails here. Prints "ok - ..." per check; exits non-zero on a failure.
// Usage: PGW_MCP_URL=http://127.0.0.1:PORT/mcp PGW_MCP_TOKEN=... node tools_client.mjs
import { check, connect } from "./harness.mjs";

const { client, transport } = await connect(new URL(process.env.PGW_MCP_URL), process.env.PGW_MCP_TOKEN,
                                            "sdk-tools-agent");

let { tools } = await client.listTools();
const late = tools.find((t) => t.name === "late_shipments");
check(late !== undefined, "tools/list has late_shipments", tools.map((t) => t.name));
check(late.inputSchema.properties.from.format === "date" && late.inputSchema.required.includes("to"),
      "inputSchema as the operator wrote it", late.inputSchema);
check(late.outputSchema?.type === "object", "outputSchema present");

const good = await client.callTool({ name: "late_shipments", arguments: { from: "2024-03-01", to: "2024-03-02" } });
check(!good.isError && good.structuredContent.row_count > 0, "a good call returns rows", good.structuredContent);
check(good.structuredContent.truncated === false, "not truncated");

// After the first call the columns are known: tools/list describes each row's fields, and the
// SDK validates the next result against that schema.
({ tools } = await client.listTools());
const described = tools.find((t) => t.name === "late_shipments");
const rowProps = described.outputSchema.properties.rows.items.properties;
check(rowProps && rowProps.id && rowProps.ship_date && rowProps.status, "outputSchema names the result columns", rowProps);
const again = await client.callTool({ name: "late_shipments", arguments: { from: "2024-01-01", to: "2024-04-01" } });
check(!again.isError && again.structuredContent.truncated === true && again.structuredContent.row_count === 500,
      "a wide window is cut at max_rows and says so", { ...again.structuredContent, rows: undefined });

const bad = await client.callTool({ name: "late_shipments", arguments: { from: "2024-03-01", to: "2024-03-02", status: "late" } });
check(bad.isError === true && bad.structuredContent.denial.code === "INVALID_ARGUMENTS", "a bad argument is refused",
      bad.structuredContent);
const wide = await client.callTool({ name: "late_shipments", arguments: { from: "2023-01-01", to: "2024-02-05" } });
check(wide.isError === true && wide.structuredContent.denial.code === "RANGE_TOO_WIDE" &&
      wide.structuredContent.denial.got_days === 400, "a 400-day range is RANGE_TOO_WIDE", wide.structuredContent);

const scalar = await client.callTool({ name: "count_status", arguments: { status: "DELAYED" } });
check(!scalar.isError && typeof scalar.structuredContent.value === "number", "scalar result", scalar.structuredContent);
const one = await client.callTool({ name: "shipment", arguments: { id: 1007 } });
check(!one.isError && one.structuredContent.row.id === 1007, "single_row result", one.structuredContent);

await transport.terminateSession();
await client.close();
console.log("tools client: all checks passed");
