// The console's intel pages (Coverage, Revocations, Packages) in headless Chromium, empty
// and with data, photographed at desktop and phone width like the other journeys. Runs
// after console.test.mjs on the same seeded server, with its own accounts: a teams account
// admin ($KG_INTEL_KEY) and a basic-tier auditor ($KG_BASIC_KEY). What no command makes on
// a loopback server (a revocation, change alerts, a failed channel) is written by seed.py.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { chromium } from "playwright-core";
import { freshCode, shoot } from "./support.mjs";

const BASE = process.env.KG_CONSOLE;
const SHOTS = process.env.KG_SCREENSHOTS;
let browser;
let secret; // the TOTP secret of the teams account's key

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.KG_CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
});

after(async () => {
  await browser?.close();
});

async function newPage() {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  const page = await context.newPage();
  page.on("pageerror", (e) => assert.fail(`script error on ${page.url()}: ${e.message}`));
  return page;
}

/** Signs in with a key that has no factor yet and enrols an authenticator app. */
async function signInAndEnrol(page, key) {
  await page.goto(`${BASE}/console/sign-in`);
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.waitForURL(/\/console\/account/);
  await page.getByRole("button", { name: "Set up an authenticator app" }).click();
  const totp = (await page.locator("[data-totp-secret]").textContent()).trim();
  await page.getByLabel("Code from the app").fill(await freshCode(totp));
  await page.getByRole("button", { name: "Turn on" }).click();
  await page.waitForURL(`${BASE}/console/account`);
  return totp;
}

async function signIn(page) {
  await page.goto(`${BASE}/console/sign-in`);
  await page.getByLabel("API key").fill(process.env.KG_INTEL_KEY);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.waitForURL(`${BASE}/console/second-factor`);
  await page.getByLabel("6-digit code").fill(await freshCode(secret));
  await page.getByRole("button", { name: "Continue" }).click();
  await page.waitForURL(`${BASE}/console/lookup`);
}

/** The text of a download the click starts. */
async function downloaded(page, click) {
  const [download] = await Promise.all([page.waitForEvent("download"), click()]);
  return { name: download.suggestedFilename(), text: readFileSync(await download.path(), "utf8") };
}

test("before any revocation, alert or channel run: each page says so", async () => {
  const page = await newPage();
  secret = await signInAndEnrol(page, process.env.KG_INTEL_KEY);
  for (const link of ["Coverage", "Revocations", "Packages"]) {
    assert.ok(await page.locator("nav").getByRole("link", { name: link }).count(), `${link} in the navigation`);
  }
  await page.locator("nav").getByRole("link", { name: "Revocations" }).click();
  await page.waitForURL(`${BASE}/console/revocations`);
  assert.match(await page.textContent("main"), /No signing certificate of a recorded file is revoked/);
  assert.equal(await page.getByRole("link", { name: "Download CSV" }).count(), 0);
  await shoot(page, "revocations-empty");

  await page.goto(`${BASE}/console/packages`);
  assert.match(await page.textContent("main"), /No package is watched yet/);
  assert.match(await page.textContent("main"), /No change alert\./);
  await shoot(page, "packages-empty");

  await page.goto(`${BASE}/console/coverage`);
  assert.match(await page.textContent("main"), /No reference corpus is loaded/);
  const example = page.locator("[data-channels] tr", { hasText: "example" });
  assert.match(await example.textContent(), /unknown/, "recorded from a file, never refreshed");
  await shoot(page, "coverage-empty");
  await page.context().close();
});

test("with data: revocations, coverage and packages, with their downloads", async () => {
  execFileSync("python3", [new URL("./seed.py", import.meta.url).pathname,
    process.env.KG_DB, process.env.KG_SIGNED_THUMBPRINT]);
  const page = await newPage();
  await signIn(page);

  await page.goto(`${BASE}/console/revocations`);
  const row = page.locator("[data-revocations] tbody tr").first();
  assert.match(await row.textContent(), /CN=Example Signing <Test>/, "the signer, escaped and shown as text");
  assert.match(await row.textContent(), /keyCompromise/);
  assert.match(await row.textContent(), /example/, "the affected vendor");
  assert.equal(await row.locator("[data-active]").textContent(), "yes");
  const csv = await downloaded(page, () => page.getByRole("link", { name: "Download CSV" }).click());
  assert.match(csv.name, /^knowngood-revocations-\d{4}-\d{2}-\d{2}\.csv$/);
  assert.ok(csv.text.split("\r\n")[1].startsWith(process.env.KG_SIGNED_THUMBPRINT), csv.text);
  const json = await downloaded(page, () => page.getByRole("link", { name: "Download JSON" }).click());
  assert.equal(JSON.parse(json.text).revoked_certs[0].currently_active, true);
  await shoot(page, "revocations");

  await page.goto(`${BASE}/console/coverage`);
  const debian = page.locator("[data-channels] tr", { hasText: "Debian bookworm" });
  assert.match(await debian.textContent(), /failing/);
  assert.match(await debian.textContent(), /download failed/);
  assert.doesNotMatch(await page.textContent("main"), /s3cr3t|deb\.example/, "customers see the error's kind");
  assert.match(await page.locator("[data-channels] tr", { hasText: "example" }).first().textContent(), /ok/);
  const records = await downloaded(page, () => page.getByRole("button", { name: "Download CSV" }).click());
  assert.match(records.text, /^executable_name,/);
  assert.match(records.text, /sample-tool\.exe/);
  await shoot(page, "coverage");

  await page.goto(`${BASE}/console/packages`);
  await page.locator("#ecosystem").selectOption("pypi");
  await page.getByLabel(/^Package names/).fill("requests\nreqeusts");
  await page.getByRole("button", { name: "Check names" }).click();
  const squat = page.locator("[data-typosquat-results] tr", { hasText: "reqeusts" });
  assert.equal(await squat.locator("[data-risk]").textContent(), "typosquat");

  const sbomPath = `${mkdtempSync(`${tmpdir()}/kg-sbom-`)}/app.cdx.json`;
  writeFileSync(sbomPath, JSON.stringify({
    bomFormat: "CycloneDX", specVersion: "1.6", version: 1,
    components: [
      { type: "library", name: "reqeusts", version: "1.0.0", purl: "pkg:pypi/reqeusts@1.0.0" },
      { type: "library", name: "lodash", version: "4.17.21", purl: "pkg:npm/lodash@4.17.21" },
    ],
  }));
  await page.getByLabel("SBOM file").setInputFiles(sbomPath);
  await page.locator("[data-sbom-status]").filter({ hasText: "loaded" }).waitFor();
  await page.getByRole("button", { name: "Scan" }).click();
  const summary = await page.locator("[data-sbom-summary]").textContent();
  assert.match(summary, /Components\s*2/);
  assert.match(summary, /Typosquats\s*1/);

  await page.getByLabel("Package", { exact: true }).fill("left-pad");
  await page.getByRole("button", { name: "Watch", exact: true }).click();
  assert.match(await page.textContent("main"), /Now watching left-pad \(npm\)/);
  assert.match(await page.locator("[data-watchlist]").textContent(), /left-pad/);
  assert.match(await page.locator("[data-alerts]").textContent(), /lodash/);
  await page.getByRole("link", { name: "Show only watched packages" }).click();
  const watched = await page.locator("[data-alerts]").textContent();
  assert.match(watched, /left-pad/);
  assert.doesNotMatch(watched, /lodash/);
  await shoot(page, "packages");
  await page.context().close();
});

test("a basic-tier account is told which tier Packages and Revocations need", async () => {
  const page = await newPage();
  const key = process.env.KG_BASIC_KEY;
  await signInAndEnrol(page, key);
  const response = await page.goto(`${BASE}/console/packages`);
  assert.equal(response.status(), 403);
  assert.match(await page.textContent("main"), /Packages comes with the teams tier and above; account console-basic is on the basic tier/);
  await shoot(page, "packages-tier");
  await page.goto(`${BASE}/console/coverage`);
  assert.match(await page.textContent("h1"), /Coverage/);
  await page.context().close();
});

test("Keys: issue, rename and revoke a key; Usage has axes, dates and the quota share", async () => {
  const page = await newPage();
  await signIn(page);
  await page.goto(`${BASE}/console/keys`);
  assert.match(await page.locator("#contact-help").textContent(), /sends nothing to it/);
  await page.getByLabel("Role of the new key").selectOption("auditor");
  await page.getByLabel("Label", { exact: true }).fill("SIEM enrichment");
  await page.getByRole("button", { name: "Issue key", exact: true }).click();
  const issued = (await page.locator("[data-issued-key]").textContent()).trim();
  assert.match(issued, /^console-intel\./);
  const api = await page.request.get(`${BASE}/api/v1/intel/stats`, { headers: { "X-API-Key": issued } });
  assert.equal(api.status(), 200, "the new key works");
  const row = page.locator("[data-keys] tbody tr", { hasText: "SIEM enrichment" });
  const keyId = (await row.locator("code").first().textContent()).trim();
  await row.getByLabel(`New label for ${keyId}`).fill("SIEM");
  await row.getByRole("button", { name: "Rename" }).click();
  assert.match(await page.textContent("main"), new RegExp(`Key ${keyId} is now labelled “SIEM”`));
  assert.match(await page.textContent("main"), /No invite is waiting to be redeemed/);
  await page.getByLabel("Role", { exact: true }).selectOption("auditor");
  await page.getByLabel("Name", { exact: true }).fill("Ada");
  await page.getByLabel("Contact").fill("ada@example.org");
  await page.getByRole("button", { name: "Create invite code" }).click();
  const invite = page.locator("[data-invites] tbody tr", { hasText: "Ada" });
  assert.match(await invite.textContent(), /ada@example\.org/);
  assert.match(await invite.textContent(), /auditor/);
  await shoot(page, "keys-manage");
  await page.locator("[data-keys] tbody tr", { hasText: keyId })
    .getByRole("button", { name: `Revoke key ${keyId}` }).click();
  assert.match(await page.textContent("main"), new RegExp(`Key ${keyId} is revoked`));
  const refused = await page.request.get(`${BASE}/api/v1/intel/stats`, { headers: { "X-API-Key": issued } });
  assert.equal(refused.status(), 401);

  await page.goto(`${BASE}/console/usage`);
  const chart = page.locator("[data-usage-chart]");
  assert.equal(await chart.locator("line.axis").count(), 2);
  assert.equal(await chart.locator("[data-axis-date]").count(), 3);
  assert.match(await page.locator("[data-quota-share]").textContent(), /% of this month's quota used: \d+ of \d+ requests/);
  await shoot(page, "usage-chart");
  await page.context().close();
});
