// What the SDK-driven scripts share: one "ok - ..." line per check (exit non-zero on the first
// failure), and a Streamable HTTP client connected with a bearer token.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

export function check(cond, what, detail) {
  if (!cond) {
    console.error(`not ok - ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok - ${what}`);
}

// `prepare` runs on the client before it connects (notification handlers go there, so nothing
// sent right after initialize is missed).
export async function connect(url, bearer, name, prepare) {
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
  });
  const client = new Client({ name, version: "1.0.0" });
  if (prepare) prepare(client);
  await client.connect(transport);
  return { client, transport };
}
