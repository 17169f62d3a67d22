// A minimal MCP Apps host in headless Chromium, for tests/apps/test_apps_browser.py.
//
// Node plays the host's backend: it reads the view from a running notes-server over HTTP
// (resources/read with the Apps capability) and forwards every tools/call the view asks for to
// that server. The host page (served as http://host.test/) renders the view in a sandboxed
// iframe (scripts only, opaque origin) under the strict CSP the view declared (nothing may be
// loaded), speaks the JSON-RPC postMessage bridge, and logs what the view asked for. A second
// frame from http://evil.test/ tries to feed the view a forged result. Every other request the
// browser makes is refused and reported. Prints one JSON report on stdout; the Python test
// asserts on it.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

// playwright-core lives in .apps-browser/ (scripts/apps-browser), not next to this file.
const { chromium } = createRequire(process.env.NODE_MODULES + "/")("playwright-core");

const env = process.env;
const ENDPOINT = env.NOTES_URL + "/mcp";
const WORKSPACE = env.NOTES_WORKSPACE;
const OUT = env.SCREENSHOT_DIR;
const BRIDGE = readFileSync(env.NODE_MODULES + "/../app-bridge.js", "utf-8");
const APPS = { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: ["text/html;profile=mcp-app"] } } };
const CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " +
  "img-src data:; connect-src 'none'; frame-src 'none'; base-uri 'none'; form-action 'none'";

let nextId = 1;
async function mcp(method, params) {
  const body = { jsonrpc: "2.0", id: nextId++, method, params: { ...params, _meta: {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": { ...APPS, elicitation: { form: {} } },
    "io.modelcontextprotocol/clientInfo": { name: "apps-test-host", version: "1" } } } };
  const headers = { "Content-Type": "application/json", Accept: "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method,
    Authorization: "Bearer " + env.NOTES_TOKEN };
  if (method === "tools/call") headers["Mcp-Name"] = params.name;
  if (method === "resources/read") headers["Mcp-Name"] = params.uri;
  const response = await fetch(ENDPOINT, { method: "POST", headers, body: JSON.stringify(body) });
  return await response.json();
}

// The host page: the official host-side bridge (@modelcontextprotocol/ext-apps' AppBridge over
// its PostMessageTransport, loaded from /app-bridge.js) drives the view; a passive listener only
// logs what the view sent. The bridge forwards the view's tools/call to the server through
// Node; a confirmation the server asks for is declined, as a user who says no would.
const HOST_PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>test host</title>
<style>body{margin:0;font:12px sans-serif} iframe{border:0;width:100%;height:900px;display:block}
#evil{width:1px;height:1px}</style><script src="/app-bridge.js"></script></head><body>
<iframe id="view" sandbox="allow-scripts" title="Notes timeline"></iframe>
<script>
window.hostLog = [];
const frame = document.getElementById("view");
let initialized = false;
window.addEventListener("message", (event) => {
  if (event.source !== frame.contentWindow) return;
  const msg = event.data;
  window.hostLog.push({ method: msg.method, id: msg.id, params: msg.params, result: msg.result, initialized });
});
const { AppBridge, PostMessageTransport } = window.ExtApps;
const bridge = new AppBridge(null, { name: "apps-test-host", version: "1" }, { serverTools: {} }, {
  hostContext: { theme: "light", locale: "en-US", displayMode: "inline", containerDimensions: { maxWidth: 900 } } });
bridge.oninitialized = () => {
  initialized = true;
  bridge.sendToolInput({ arguments: window.toolArgs });
  bridge.sendToolResult(window.toolResult);
};
bridge.oncalltool = async (params) => {
  const reply = await window.forwardToServer("tools/call", { name: params.name, arguments: params.arguments });
  if (reply.error) throw new Error(reply.error.message);
  if (reply.result.resultType === "input_required") {
    return { content: [{ type: "text", text: "The user did not confirm." }], isError: true };
  }
  return reply.result;
};
window.startView = async (html) => {
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  frame.srcdoc = html;
};
window.setTheme = (theme) => bridge.setHostContext({ ...bridge.getHostContext?.(), theme });
window.teardown = () => bridge.teardownResource({ reason: "test" });
window.addEvilFrame = () => {
  const evil = document.createElement("iframe");
  evil.id = "evil";
  evil.src = "http://evil.test/forge.html";
  document.body.appendChild(evil);
};
</script></body></html>`;

// The foreign frame forges a tool result naming a note that does not exist, and posts it to
// the view straight from its own window (another origin, not the view's host).
const EVIL_PAGE = `<!doctype html><script>
const forged = { jsonrpc: "2.0", method: "ui/notifications/tool-result", params: {
  structuredContent: { workspaceUri: "file:///evil", notes: [{ id: "evil", title: "FORGED NOTE",
    updatedAt: "2026-03-05T00:00:00Z", archived: false, snippet: "x", path: "x.md" }], days: [],
    truncated: false } } };
parent.frames[0].postMessage(forged, "*");
document.title = "sent";
</script>`;

// Resolves after the view has painted twice: a screenshot then shows what the DOM holds.
async function painted(view) {
  await view.locator("body").evaluate(() => new Promise((resolve) =>
    requestAnimationFrame(() => requestAnimationFrame(resolve))));
}

async function main() {
  const report = { refused: [], console: [], hostLog: [] };
  const read = await mcp("resources/read", { uri: "ui://notes/timeline.html" });
  const html = read.result.contents[0].text.replace("<head>",
    `<head><meta http-equiv="Content-Security-Policy" content="${CSP}">`);
  const args = { workspaceUri: WORKSPACE };
  const timeline = await mcp("tools/call", { name: "notes_timeline", arguments: args });

  const browser = await chromium.launch({ executablePath: env.CHROMIUM, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
      // One renderer for host and view: a screenshot then always holds the view's last frame.
      "--disable-site-isolation-trials", "--disable-features=IsolateSandboxedIframes,site-per-process"] });
  try {
    const page = await browser.newPage({ viewport: { width: 900, height: 700 } });
    page.on("console", (m) => report.console.push(m.type() + ": " + m.text()));
    await page.route("**/*", (route) => {
      const url = route.request().url();
      if (url === "http://host.test/") return route.fulfill({ contentType: "text/html", body: HOST_PAGE });
      if (url === "http://host.test/app-bridge.js") return route.fulfill({ contentType: "text/javascript", body: BRIDGE });
      if (url === "http://evil.test/forge.html") return route.fulfill({ contentType: "text/html", body: EVIL_PAGE });
      report.refused.push(url);
      return route.abort();
    });
    await page.exposeFunction("forwardToServer", (method, params) => mcp(method, params));
    await page.goto("http://host.test/");
    await page.evaluate(([a, r]) => { window.toolArgs = a; window.toolResult = r; }, [args, timeline.result]);
    await page.evaluate((h) => window.startView(h), html);

    const view = page.frameLocator("#view");
    await view.locator("section[data-day]").first().waitFor({ timeout: 20000 });
    report.days = await view.locator("section[data-day]").evaluateAll((sections) => sections.map((s) => ({
      day: s.dataset.day, heading: s.querySelector("h2").textContent,
      titles: Array.from(s.querySelectorAll("button.note")).map((b) => b.textContent) })));
    report.stripBars = await view.locator("#strip span").count();
    report.stripLabel = await view.locator("#strip").getAttribute("aria-label");
    await painted(view);
    await page.screenshot({ path: OUT + "/timeline-light.png", fullPage: true });

    // Filtering is local: words narrow the list; clearing brings everything back.
    await view.locator("#filter").fill("tomatoes");
    report.filtered = await view.locator("button.note").allTextContents();
    await view.locator("#filter").fill("");
    // The date range is local too: from 2026-03-02 leaves that day only.
    await view.locator("#from").fill("2026-03-02");
    report.fromFiltered = await view.locator("section[data-day]").evaluateAll((s) => s.map((x) => x.dataset.day));
    await view.locator("#from").fill("");

    // Keyboard: focus the first note, ArrowDown moves to the next one, Enter opens it.
    await view.locator("button.note").first().focus();
    await page.keyboard.press("ArrowDown");
    report.focusedAfterArrow = await view.locator("button.note:focus").textContent();
    await page.keyboard.press("Enter");
    await view.locator("#detail").filter({ hasText: "Ship the timeline view" }).waitFor({ timeout: 20000 });
    report.detail = await view.locator("#detail").textContent();

    // A click on a note asks the host for notes_open.
    await view.locator("button.note", { hasText: "Garden" }).click();
    await view.locator("#detail").filter({ hasText: "Planted tomatoes" }).waitFor({ timeout: 20000 });

    // Archive goes to the host as a plain tools/call; this host does not ask the user, so the
    // server's confirmation request comes back and nothing is archived.
    await view.locator("button.archive", { hasText: "Archive" }).last().click();
    await view.locator("#status").filter({ hasText: "Not archived" }).waitFor({ timeout: 20000 });
    report.archiveStatus = await view.locator("#status").textContent();
    const after = await mcp("tools/call", { name: "notes_timeline", arguments: args });
    report.titlesAfterArchive = after.result.structuredContent.notes.map((n) => n.title);

    // The archived toggle asks the host for the timeline again, with archived notes.
    await view.locator("#archived").check();
    await view.locator("button.note", { hasText: "Old idea" }).waitFor({ timeout: 20000 });
    report.withArchived = await view.locator("button.note").allTextContents();
    report.archivedBadges = await view.locator(".badge").allTextContents();
    await view.locator("#archived").uncheck();
    await view.locator("button.note", { hasText: "Old idea" }).waitFor({ state: "detached", timeout: 20000 });

    // A forged result from another origin's window changes nothing. Once the real host's
    // theme change (posted after the forgery was sent) shows, the forgery was handled too.
    const before = await view.locator("button.note").allTextContents();
    await page.evaluate(() => window.addEvilFrame());
    let evil = page.frames().find((f) => f.url() === "http://evil.test/forge.html");
    while (!evil) {
      await page.waitForEvent("framenavigated");
      evil = page.frames().find((f) => f.url() === "http://evil.test/forge.html");
    }
    await evil.waitForFunction(() => document.title === "sent");
    report.forgerySent = true;

    // Dark theme through host-context-changed.
    await page.evaluate(() => window.setTheme("dark"));
    await view.locator("html[data-theme='dark']").waitFor({ timeout: 20000 });
    report.beforeForgery = before;
    report.afterForgery = await view.locator("button.note").allTextContents();
    report.darkBackground = await view.locator("body").evaluate((b) => getComputedStyle(b).backgroundColor);
    await painted(view);
    await page.screenshot({ path: OUT + "/timeline-dark.png", fullPage: true });

    // Narrow: 320 px wide, nothing scrolls sideways.
    await page.setViewportSize({ width: 320, height: 700 });
    await page.evaluate(() => window.setTheme("light"));
    await view.locator("html[data-theme='light']").waitFor({ timeout: 20000 });
    report.narrowOverflow = await view.locator("html").evaluate((h) => h.scrollWidth - h.clientWidth);
    await painted(view);
    await page.screenshot({ path: OUT + "/timeline-narrow.png", fullPage: true });

    // Teardown: the view clears what it showed.
    report.teardownAnswer = await page.evaluate(() => window.teardown());
    await view.locator("#status").filter({ hasText: "no longer available" }).waitFor({ timeout: 20000 });
    report.afterTeardown = await view.locator("button.note").count();
    report.hostLog = await page.evaluate(() => window.hostLog);
  } catch (err) {
    const pages = browser.contexts().flatMap((c) => c.pages());
    const debug = pages.length ? await pages[0].evaluate(() => JSON.stringify(window.hostLog)) : "";
    const status = pages.length ? await pages[0].frameLocator("#view").locator("#status").textContent() +
      " | detail: " + await pages[0].frameLocator("#view").locator("#detail").textContent() : "";
    throw new Error(String(err && err.message) + "\nview status: " + status + "\nhost log: " + debug +
      "\nconsole: " + report.console.join("\n"));
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(report) + "\n");
}

main().catch((err) => { process.stderr.write(String(err && err.stack || err) + "\n"); process.exit(1); });
