// A host built on the TypeScript SDK 1.x (2025-11-25) with its OAuth support
// (`authProvider`): discovery and dynamic registration by the SDK; for the browser step it
// prints `OPEN <authorization URL>` on stderr and reads the redirect URL back on stdin (the
// Python test plays the person); then `finishAuth(code)`, tool calls including a confirmed
// delete, a call with a spoilt access token (401: the SDK refreshes and retries), and one
// JSON report on stdout. With METADATA_URL the SDK identifies itself with that Client ID
// Metadata Document (`clientMetadataUrl`) instead of registering.
// Usage: node ts_oauth_client.mjs SDK_DIR URL REDIRECT WS_ALLOWED WS_OTHER [METADATA_URL]
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const [sdkDir, url, redirect, workspace, other, metadataUrl] = process.argv.slice(2);
const load = (sub) => import(pathToFileURL(path.join(sdkDir, "dist", "esm", sub)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { UnauthorizedError } = await load("client/auth.js");
const { ElicitRequestSchema } = await load("types.js");

let clientInfo, tokens, verifier;
const saved = [];
const provider = {
  get redirectUrl() { return redirect; },
  clientMetadataUrl: metadataUrl,
  get clientMetadata() {
    return { client_name: "TS SDK test host", redirect_uris: [redirect], response_types: ["code"],
      grant_types: ["authorization_code", "refresh_token"], token_endpoint_auth_method: "none" };
  },
  clientInformation: () => clientInfo,
  saveClientInformation: (info) => { clientInfo = info; },
  tokens: () => tokens,
  saveTokens: (t) => { tokens = t; saved.push(t.access_token); },
  redirectToAuthorization: (u) => { process.stderr.write(`OPEN ${u.href}\n`); },
  saveCodeVerifier: (v) => { verifier = v; },
  codeVerifier: () => verifier,
};

function newClient() {
  const client = new Client({ name: "ts-oauth-test", version: "1.0.0" },
    { capabilities: { elicitation: {} } });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    const choices = request.params.requestedSchema.properties.note_id.oneOf;
    return { action: "accept", content: { note_id: choices[0].const, confirm: true } };
  });
  return client;
}

let transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
let client = newClient();
let unauthorizedFirst = false;
try {
  await client.connect(transport);
} catch (error) {
  if (!(error instanceof UnauthorizedError)) throw error;
  unauthorizedFirst = true;
}
const lines = readline.createInterface({ input: process.stdin });
const back = new URL((await lines[Symbol.asyncIterator]().next()).value);
lines.close();
await transport.finishAuth(back.searchParams.get("code"));

transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
client = newClient();
await client.connect(transport);
const call = (name, args) => client.callTool({ name, arguments: args });
const tools = (await client.listTools()).tools.map((t) => t.name);
await call("notes_create", { workspaceUri: workspace, title: "from TypeScript" });
await call("notes_create", { workspaceUri: workspace, title: "to delete" });
const deleted = (await call("notes_delete", { workspaceUri: workspace, title: "to delete" }))
  .structuredContent;
let denied = null;
try {
  const result = await call("notes_search", { workspaceUri: other });
  denied = result.isError ? "isError" : "allowed";
} catch (error) {
  denied = error.code;
}
// A spoilt access token: the server answers 401, the SDK refreshes and retries.
tokens = { ...tokens, access_token: "nsa_" + "x".repeat(43) };
const found = (await call("notes_search", { workspaceUri: workspace })).structuredContent;
await transport.terminateSession().catch(() => {});
await client.close();
console.log(JSON.stringify({ unauthorizedFirst, tools, deleted, denied, saved,
  clientId: clientInfo.client_id, tokens, after: found.notes.map((n) => n.title) }));
