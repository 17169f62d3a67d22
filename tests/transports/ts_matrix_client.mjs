// One cell of the client matrix for the TypeScript clients: the SDK 1.x (`sdk1`, 2025-11-25
// only) or the v2 client (`v2`, mode legacy / auto / pin), over stdio or Streamable HTTP with a
// bearer token. Connect, list tools, create three notes, search, delete them answering the
// confirmation with accept, decline and cancel, search again; print one JSON object.
// Usage: node ts_matrix_client.mjs CONFIG_JSON
import path from "node:path";
import { pathToFileURL } from "node:url";

const config = JSON.parse(process.argv[2]);
const load = (sub) => import(pathToFileURL(path.join(config.packageDir, "dist", sub)).href);

async function classes() {
  if (config.flavor === "sdk1") {
    const { Client } = await load("esm/client/index.js");
    const { StreamableHTTPClientTransport } = await load("esm/client/streamableHttp.js");
    const { StdioClientTransport } = await load("esm/client/stdio.js");
    const { ElicitRequestSchema } = await load("esm/types.js");
    return { Client, StreamableHTTPClientTransport, StdioClientTransport, elicit: ElicitRequestSchema };
  }
  const { Client, StreamableHTTPClientTransport } = await load("index.mjs");
  const { StdioClientTransport } = await load("stdio.mjs");
  return { Client, StreamableHTTPClientTransport, StdioClientTransport, elicit: "elicitation/create" };
}

const api = await classes();
const options = { capabilities: { elicitation: { form: {} } } };
if (config.flavor === "v2") {
  const mode = config.mode === "pin" ? { pin: "2026-07-28" } : config.mode;
  options.versionNegotiation = { mode };
}
const client = new api.Client({ name: `matrix-${config.flavor}`, version: "1.0.0" }, options);
const answers = ["accept", "decline", "cancel"];
let asked = 0;
client.setRequestHandler(api.elicit, async (request) => {
  asked += 1;
  const action = answers.shift();
  if (action !== "accept") return { action };
  const choices = request.params.requestedSchema.properties.note_id.oneOf;
  return { action, content: { note_id: choices[0].const, confirm: true } };
});

const transport =
  config.transport === "http"
    ? new api.StreamableHTTPClientTransport(new URL(config.url), {
        requestInit: { headers: { Authorization: `Bearer ${config.token}` } },
      })
    : new api.StdioClientTransport({
        command: config.command,
        args: config.args,
        env: config.env,
        stderr: "ignore",
      });
// The SDK 1.x records the negotiated version only on transports that take it (HTTP does).
transport.setProtocolVersion ??= (version) => {
  transport.protocolVersion = version;
};
await client.connect(transport);
const ws = config.workspace;
const call = (name, args) => client.callTool({ name, arguments: { workspaceUri: ws, ...args } });
const titles = (result) => result.structuredContent.notes.map((note) => note.title).sort();

const tools = await client.listTools();
for (const title of ["accept", "decline", "cancel"]) await call("notes_create", { title });
const found = await call("notes_search", {});
const deleted = [];
for (const title of ["accept", "decline", "cancel"]) {
  const result = await call("notes_delete", { title });
  deleted.push(result.structuredContent?.deleted ?? null);
}
const after = await call("notes_search", {});
const era = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion;
if (config.transport === "http") await transport.terminateSession();
await client.close();
console.log(
  JSON.stringify({
    version: era ?? null,
    tools: tools.tools.length,
    found: titles(found),
    asked,
    deleted,
    after: titles(after),
  }),
);
