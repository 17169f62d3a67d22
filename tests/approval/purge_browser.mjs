// The person's side of a purge approval in headless Chromium, for
// tests/approval/test_purge_browser.py: open the approval URL the MCP client was given, sign in
// with the principal's own token, read what will be destroyed, type the workspace's last path
// segment, submit, and read the confirmation. JavaScript is disabled in the page: the forms
// must work without it. Prints one JSON report on stdout; the Python test asserts on it.
import { createRequire } from "node:module";

// playwright-core lives in .apps-browser/ (scripts/apps-browser), not next to this file.
const { chromium } = createRequire(process.env.NODE_MODULES + "/")("playwright-core");
const env = process.env;

const browser = await chromium.launch({ executablePath: env.CHROMIUM, headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
const report = { console: [] };
try {
  const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 800, height: 520 } });
  const page = await context.newPage();
  page.on("console", (m) => report.console.push(m.type() + ": " + m.text()));
  const opened = await page.goto(env.APPROVAL_URL);
  report.landedOn = page.url();
  report.loginStatus = opened.status();
  report.loginTitle = await page.textContent("h1");
  report.framing = (await opened.allHeaders())["content-security-policy"];

  await page.fill('input[name="token"]', env.NOTES_TOKEN);
  await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]);
  report.confirmUrl = page.url();
  report.confirmTitle = await page.textContent("h1");
  report.listed = await page.$$eval("li", (items) => items.map((li) => li.textContent));
  report.asks = await page.textContent("label code");

  await page.fill('input[name="confirm"]', report.asks);
  await page.screenshot({ path: env.SCREENSHOT_DIR + "/purge-approval.png", fullPage: true });
  const [answer] = await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]);
  report.doneStatus = answer ? answer.status() : null;
  report.doneTitle = await page.textContent("h1");
  report.doneText = await page.textContent("p");
  await page.screenshot({ path: env.SCREENSHOT_DIR + "/purge-approved.png", fullPage: true });
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(report));
