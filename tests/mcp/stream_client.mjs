// The official TypeScript SDK client on pgwarden's server-to-client stream: the SDK opens the GET
// stream itself after initialize; the test driving this script reloads pgwarden's config with a new
// operator tool once it prints "ready", and the client must then receive
// notifications/tools/list_changed and see the tool in a fresh tools/list. logging/setLevel is
// checked on the way. Prints "ok - ..." per check; exits non-zero on a failure.
// Usage: PGW_MCP_URL=http://127.0.0.1:PORT/mcp PGW_MCP_TOKEN=... PGW_MCP_NEW_TOOL=name node stream_client.mjs
import { LoggingMessageNotificationSchema, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { check, connect } from "./harness.mjs";

const url = new URL(process.env.PGW_MCP_URL);
const newTool = process.env.PGW_MCP_NEW_TOOL;

let changed;
const listChanged = new Promise((resolve) => { changed = resolve; });
const { client, transport } = await connect(url, process.env.PGW_MCP_TOKEN, "sdk-stream-agent", (c) => {
  c.setNotificationHandler(ToolListChangedNotificationSchema, () => changed(true));
  c.setNotificationHandler(LoggingMessageNotificationSchema, () => {});
});

const caps = client.getServerCapabilities();
check(caps?.tools?.listChanged === true, "initialize announces tools.listChanged", caps);
check(caps?.logging !== undefined, "initialize announces logging", caps);
await client.setLoggingLevel("warning");
check(true, "logging/setLevel accepted");
let { tools } = await client.listTools();
check(!tools.some((t) => t.name === newTool), "the new tool is not listed yet");

console.log("ready");
const timeout = new Promise((resolve) => setTimeout(() => resolve(false), 30000));
check(await Promise.race([listChanged, timeout]) === true, "notifications/tools/list_changed received");
({ tools } = await client.listTools());
check(tools.some((t) => t.name === newTool), "tools/list after the notification has the new tool",
      tools.map((t) => t.name));

await transport.terminateSession();
await client.close();
console.log("all checks passed");
