// A host built on the TypeScript SDK 1.x (2025-11-25 only) over Streamable HTTP with a bearer
// token: connect, list tools, create, search, then delete twice, answering the confirmation form
// with accept and then decline. Prints one JSON object with what it saw.
// Usage: node ts_legacy_client.mjs SDK_DIR URL TOKEN WORKSPACE_URI
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, url, token, workspace] = process.argv.slice(2);
const load = (sub) => import(pathToFileURL(path.join(sdkDir, "dist", "esm", sub)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { ElicitRequestSchema } = await load("types.js");

const answers = ["accept", "decline"];
const asked = [];
const client = new Client(
  { name: "ts-legacy-http-test", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  const action = answers.shift();
  if (action !== "accept") return { action };
  const choices = request.params.requestedSchema.properties.note_id.oneOf;
  return { action, content: { note_id: choices[0].const, confirm: true } };
});

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
const titles = (result) => result.structuredContent.notes.map((note) => note.title);
const call = (name, args) => client.callTool({ name, arguments: args });

const tools = await client.listTools();
await call("notes_create", { workspaceUri: workspace, title: "Accept me" });
await call("notes_create", { workspaceUri: workspace, title: "Decline me" });
const found = await call("notes_search", { workspaceUri: workspace });
const accepted = await call("notes_delete", { workspaceUri: workspace, title: "Accept me" });
const declined = await call("notes_delete", { workspaceUri: workspace, title: "Decline me" });
const after = await call("notes_search", { workspaceUri: workspace });
await transport.terminateSession();
await client.close();

console.log(
  JSON.stringify({
    version: transport.protocolVersion,
    tools: tools.tools.map((tool) => tool.name),
    found: titles(found),
    asked: asked.length,
    accepted: accepted.structuredContent.deleted,
    declined: declined.structuredContent.deleted,
    after: titles(after),
  }),
);
