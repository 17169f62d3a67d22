// A web host's script on a foreign origin against the authorization server, for
// tests/oauth/test_oauth_cors.py: headless Chromium opens the host's page (web-host.example,
// mapped to the test's loopback listener), and in that page fetch() reads the metadata (with
// MCP-Protocol-Version, as the SDKs send it: a preflighted GET), registers a client (JSON: a
// preflighted POST), exchanges the code the test obtained, replays it, revokes, and tries what
// the browser must refuse: a credentialed request, and the authorization request. Prints one
// JSON report on stdout; the Python test asserts on it.
import { createRequire } from "node:module";

const { chromium } = createRequire(process.env.NODE_MODULES + "/")("playwright-core");
const env = process.env;
const pageHost = new URL(env.PAGE_URL).hostname;

const browser = await chromium.launch({ executablePath: env.CHROMIUM, headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    `--host-resolver-rules=MAP ${pageHost} 127.0.0.1`] });
const report = { answers: {} };
try {
  const page = await (await browser.newContext()).newPage();
  page.on("response", async (response) => {
    if (response.url().startsWith(env.SERVER)) {
      const url = new URL(response.url());
      report.answers[`${response.request().method()} ${url.pathname}`] =
        await response.allHeaders();
    }
  });
  await page.goto(env.PAGE_URL);
  Object.assign(report, await page.evaluate(async (e) => {
    const out = { origin: self.origin };
    const form = (fields) => new URLSearchParams(fields);
    const meta = await fetch(`${e.SERVER}/.well-known/oauth-authorization-server`,
      { headers: { "MCP-Protocol-Version": "2026-07-28" } });
    const metadata = await meta.json();
    out.metadata = { status: meta.status, token_endpoint: metadata.token_endpoint };
    const reg = await fetch(metadata.registration_endpoint, { method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ client_name: "Script Host", token_endpoint_auth_method: "none",
        redirect_uris: [`https://${location.hostname}/callback`] }) });
    const registered = await reg.json();
    out.registered = { status: reg.status, client_name: registered.client_name,
      error: registered.error };
    const exchange = { grant_type: "authorization_code", code: e.CODE,
      redirect_uri: e.REDIRECT_URI, client_id: e.CLIENT_ID, code_verifier: e.VERIFIER,
      resource: e.RESOURCE };
    const tok = await fetch(metadata.token_endpoint, { method: "POST", body: form(exchange) });
    const tokens = await tok.json();
    out.token = { status: tok.status, token_type: tokens.token_type,
      has_access_token: typeof tokens.access_token === "string" };
    const again = await fetch(metadata.token_endpoint, { method: "POST", body: form(exchange) });
    out.replayed = { status: again.status, error: (await again.json()).error };
    const rev = await fetch(metadata.revocation_endpoint, { method: "POST",
      body: form({ token: tokens.refresh_token ?? "", client_id: e.CLIENT_ID }) });
    out.revoked = { status: rev.status };
    const refused = async (url, init) => {
      try {
        const answer = await fetch(url, init);
        return `read ${answer.status}`;
      } catch (error) {
        return error.name;
      }
    };
    out.credentialed = await refused(metadata.token_endpoint, { method: "POST",
      credentials: "include", body: form({ grant_type: "authorization_code", code: "x" }) });
    out.authorize = await refused(`${metadata.authorization_endpoint}?client_id=${e.CLIENT_ID}`);
    return out;
  }, { SERVER: env.SERVER, CODE: env.CODE, VERIFIER: env.VERIFIER, CLIENT_ID: env.CLIENT_ID,
    REDIRECT_URI: env.REDIRECT_URI, RESOURCE: env.RESOURCE }));
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(report));
