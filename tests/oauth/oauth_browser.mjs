// The person's side of an OAuth sign-in in headless Chromium, for
// tests/oauth/test_oauth_browser.py: open the authorization URL the client built, sign in with
// an account's password, tick one workspace, allow, and land on the client's redirect URI (the
// test's own loopback listener, as a native app's). JavaScript is disabled: the forms must
// work without it. Records the keyboard focus order and focus ring of both pages.
// Screenshots: sign-in (800 px, light), consent (320 px, dark). Prints one
// JSON report on stdout; the Python test asserts on it.
import { createRequire } from "node:module";

const { chromium } = createRequire(process.env.NODE_MODULES + "/")("playwright-core");
const env = process.env;

const browser = await chromium.launch({ executablePath: env.CHROMIUM, headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
const report = { console: [] };
// Keyboard focus order: the element each Tab lands on (its id, or the button's value/text),
// and whether the focus ring of :focus-visible is drawn (3px solid).
const FOCUSED = `(() => { const e = document.activeElement; const s = getComputedStyle(e);
  return { name: e.id || "button:" + (e.value || e.textContent),
    ring: s.outlineStyle === "solid" && s.outlineWidth === "3px" }; })()`;
async function tabOrder(page, count) {
  const order = [];
  for (let i = 0; i < count; i += 1) {
    await page.keyboard.press("Tab");
    order.push(await page.evaluate(FOCUSED));
  }
  return order;
}
try {
  for (const [name, width, scheme] of [["wide", 800, "light"], ["narrow", 320, "dark"]]) {
    const context = await browser.newContext({ javaScriptEnabled: false,
      viewport: { width, height: 640 }, colorScheme: scheme });
    const page = await context.newPage();
    page.on("console", (m) => report.console.push(m.type() + ": " + m.text()));
    const url = name === "wide" ? env.AUTHORIZE_URL : env.AUTHORIZE_URL_2;
    const opened = await page.goto(url);
    const seen = { signInUrl: page.url(), signInStatus: opened.status(),
      signInTitle: await page.textContent("h1"),
      policy: (await opened.allHeaders())["content-security-policy"],
      scrollWidth: await page.evaluate("document.documentElement.scrollWidth") };
    await page.screenshot({ path: `${env.SCREENSHOT_DIR}/oauth-sign-in-${name}.png`, fullPage: true });
    seen.signInFocus = await tabOrder(page, 3);
    await page.fill("#principal", "alice");
    await page.fill("#password", env.PASSWORD);
    await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]);
    seen.consentUrl = page.url();
    seen.consentTitle = await page.textContent("h1");
    seen.boxes = await page.$$eval('input[type="checkbox"]', (items) => items.map((i) => i.value));
    seen.labelled = await page.$$eval('input[type="checkbox"]', (items) =>
      items.every((i) => i.closest("label") !== null));
    seen.consentScrollWidth = await page.evaluate("document.documentElement.scrollWidth");
    seen.consentFocus = await tabOrder(page, 4);
    await page.check(`input[value="${env.WORKSPACE}"]`);
    await page.screenshot({ path: `${env.SCREENSHOT_DIR}/oauth-consent-${name}.png`, fullPage: true });
    await Promise.all([page.waitForNavigation(), page.click('button[value="allow"]')]);
    seen.landedOn = page.url();
    report[name] = seen;
    await context.close();
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(report));
