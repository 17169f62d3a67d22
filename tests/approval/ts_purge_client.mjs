// A host built on the TypeScript SDK 1.x (2025-11-25 only) over Streamable HTTP with a bearer
// token, declaring URL-mode elicitation: it calls notes_purge, and for the URL elicitation it
// prints the URL on stderr (the Python test plays the person on the page) and answers accept.
// It records notifications/elicitation/complete. Prints one JSON object with what it saw.
// Usage: node ts_purge_client.mjs SDK_DIR URL TOKEN WORKSPACE_URI
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, url, token, workspace] = process.argv.slice(2);
const load = (sub) => import(pathToFileURL(path.join(sdkDir, "dist", "esm", sub)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { ElicitRequestSchema, ElicitationCompleteNotificationSchema } = await load("types.js");

const asked = [];
const completed = [];
const client = new Client(
  { name: "ts-purge-test", version: "1.0.0" },
  { capabilities: { elicitation: { url: {} } } },
);
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params);
  process.stderr.write(`OPEN ${request.params.url}\n`);
  return { action: "accept" };
});
client.setNotificationHandler(ElicitationCompleteNotificationSchema, async (notification) => {
  completed.push(notification.params.elicitationId);
});

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
const purged = await client.callTool(
  { name: "notes_purge", arguments: { workspaceUri: workspace } },
  undefined,
  { timeout: 120000 },
);
await transport.terminateSession();
await client.close();

console.log(JSON.stringify({ version: transport.protocolVersion, asked, completed, purged }));
