// A TypeScript client that waits for a change made by another process: the v2 client
// (`v2`, 2026-07-28) opens `subscriptions/listen` with `client.listen()`, the SDK 1.x (`sdk1`,
// 2025-11-25 only) sends `resources/subscribe` with `client.subscribeResource()`; both over
// stdio, or (config.url and config.token set: the v2 client only) over Streamable HTTP with a
// bearer token, where the listen is the SSE response of its POST. Prints `{"ready": ...}` once subscribed, then, at the first
// `notifications/resources/updated`, one JSON object with what it saw, and exits.
// Usage: node ts_subscriptions_client.mjs CONFIG_JSON
import path from "node:path";
import { pathToFileURL } from "node:url";

const config = JSON.parse(process.argv[2]);
const load = (sub) => import(pathToFileURL(path.join(config.packageDir, "dist", sub)).href);
const give_up = setTimeout(() => {
  console.error("no notifications/resources/updated within 30 s");
  process.exit(3);
}, 30_000);

let api;
if (config.flavor === "sdk1") {
  const { Client } = await load("esm/client/index.js");
  const { StdioClientTransport } = await load("esm/client/stdio.js");
  const { ResourceUpdatedNotificationSchema } = await load("esm/types.js");
  api = { Client, StdioClientTransport, updated: ResourceUpdatedNotificationSchema };
} else {
  const { Client, StreamableHTTPClientTransport } = await load("index.mjs");
  const { StdioClientTransport } = await load("stdio.mjs");
  api = {
    Client,
    StdioClientTransport,
    StreamableHTTPClientTransport,
    updated: "notifications/resources/updated",
  };
}
const options =
  config.flavor === "v2" ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {};
const client = new api.Client({ name: `subscriptions-${config.flavor}`, version: "1.0.0" }, options);
const heard = new Promise((resolve) => {
  client.setNotificationHandler(api.updated, (notification) => resolve(notification));
});
const transport = config.url
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

let honored = null;
let subscription = null;
if (config.flavor === "sdk1") {
  await client.subscribeResource({ uri: config.uri });
} else {
  subscription = await client.listen({ resourceSubscriptions: [config.uri] });
  honored = subscription.honoredFilter;
}
const era = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion;
console.log(JSON.stringify({ ready: true }));

const notification = await heard;
clearTimeout(give_up);
if (subscription !== null) await subscription.close();
await client.close();
console.log(
  JSON.stringify({
    version: era ?? null,
    honored,
    method: notification.method,
    uri: notification.params.uri,
  }),
);
