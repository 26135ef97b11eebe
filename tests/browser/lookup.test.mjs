// The Lookup and History pages in headless Chromium, at desktop and phone width: several
// files dropped at once (one row each, its name, its three digests with their verdicts and
// the record's source), a pasted batch with bad lines (marked at their line, the others
// answered) and History suggesting names when nothing matches. Runs on the seeded server
// of run.sh with its own basic-tier analyst ($KG_LOOKUP_KEY).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { chromium } from "playwright-core";
import { freshCode, shoot } from "./support.mjs";

const BASE = process.env.KG_CONSOLE;
const SHOTS = process.env.KG_SCREENSHOTS;
let browser;
let page;

const digest = (algo, bytes) => createHash(algo).update(bytes).digest("hex");

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.KG_CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on("pageerror", (e) => assert.fail(`script error on ${page.url()}: ${e.message}`));
  // Sign in with the key and enrol an authenticator app: Lookup needs a second factor.
  await page.goto(`${BASE}/console/sign-in`);
  await page.getByLabel("API key").fill(process.env.KG_LOOKUP_KEY);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.waitForURL(/\/console\/account/);
  await page.getByRole("button", { name: "Set up an authenticator app" }).click();
  const totp = (await page.locator("[data-totp-secret]").textContent()).trim();
  await page.getByLabel("Code from the app").fill(await freshCode(totp));
  await page.getByRole("button", { name: "Turn on" }).click();
  await page.waitForURL(`${BASE}/console/account`);
});

after(async () => {
  await browser?.close();
});

test("files dropped at once: one row each, with name, digests, verdicts and source", async () => {
  await page.goto(`${BASE}/console/lookup`);
  const current = readFileSync(process.env.KG_SAMPLE);
  const old = readFileSync(process.env.KG_OLD_SAMPLE);
  const stranger = Buffer.from("a file no source knows\n".repeat(50));
  let uploaded = false;
  page.on("request", (r) => {
    if ((r.postData() || "").includes("knowngood console test file")) uploaded = true;
  });
  await Promise.all([
    page.waitForResponse((r) => r.url().endsWith("/console/lookup") && r.request().method() === "POST"),
    page.evaluate((files) => {
      const transfer = new DataTransfer();
      for (const [name, data] of files) transfer.items.add(new File([new Uint8Array(data)], name));
      document.querySelector("[data-drop]").dispatchEvent(
        new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true }));
    }, [["sample-tool.exe", [...current]], ["sample <old>.exe", [...old]], ["notes.txt", [...stranger]]]),
  ]);
  await page.locator("[data-files]").waitFor();
  assert.equal(uploaded, false, "the files themselves never leave the browser");
  const rows = page.locator("tr[data-file]");
  assert.equal(await rows.count(), 3, "one row per dropped file");
  assert.deepEqual(await page.locator("[data-file-name]").allTextContents(),
    ["sample-tool.exe", "sample <old>.exe", "notes.txt"]);
  for (const [i, bytes] of [[0, current], [1, old], [2, stranger]]) {
    for (const [label, algo] of [["SHA-256", "sha256"], ["SHA-1", "sha1"], ["MD5", "md5"]]) {
      const line = rows.nth(i).locator(`[data-digest="${label}"]`);
      assert.equal(await line.locator(".hash").textContent(), digest(algo, bytes), `${label} of row ${i}`);
    }
  }
  for (const i of [0, 1]) {
    assert.deepEqual(await rows.nth(i).locator("[data-classification]").allTextContents(),
      ["known_vendor_release", "known_vendor_release", "known_vendor_release"]);
    assert.equal(await rows.nth(i).locator("[data-source-url]").first().getAttribute("href"),
      "https://example.org/sample-tool.exe");
  }
  assert.match(await rows.nth(0).textContent(), /sample-tool\.exe 1\.0\.0 \(example, windows\)/);
  // The older build: genuine, each digest marked superseded, the current version beside it.
  assert.equal(await rows.nth(1).locator("[data-superseded]").count(), 3);
  assert.match(await rows.nth(1).locator("[data-current-version]").textContent(), /current version: 1\.0\.0/);
  assert.deepEqual(await rows.nth(2).locator("[data-classification]").allTextContents(),
    ["unknown", "unknown", "unknown"]);
  assert.match(await rows.nth(2).textContent(), /found in no source/);
  assert.equal(await rows.nth(2).locator("[data-source-url]").count(), 0);
  await shoot(page, "lookup-files");
});

test("a pasted batch: bad lines are marked at their line, the good ones answered", async () => {
  await page.goto(`${BASE}/console/lookup`);
  const sha256 = digest("sha256", readFileSync(process.env.KG_SAMPLE));
  const unknown = "0".repeat(40);
  await page.getByLabel(/^Hashes/).fill(`${sha256}\nnot-a-hash\n\n<b>bold</b>\n${unknown}`);
  await page.getByRole("button", { name: "Look up" }).click();
  const refused = page.locator("[data-refused]");
  await refused.waitFor();
  assert.match(await refused.locator('[data-refused-line="2"]').textContent(), /^Line 2: not-a-hash — /);
  // The refused text is shown as text, not markup.
  assert.equal(await refused.locator('[data-refused-line="4"] code').textContent(), "<b>bold</b>");
  assert.equal(await refused.locator("b").count(), 0);
  assert.equal(await refused.locator("li").count(), 2);
  const row = (hash) => page.locator("tbody tr", { hasText: hash });
  assert.equal(await row(sha256).locator("[data-classification]").textContent(), "known_vendor_release");
  assert.equal(await row(sha256).locator("[data-source-url]").textContent(), "https://example.org/sample-tool.exe");
  assert.equal(await row(unknown).locator("[data-classification]").textContent(), "unknown");
  // What was pasted stays in the field to be corrected.
  assert.match(await page.getByLabel(/^Hashes/).inputValue(), /not-a-hash/);
  await shoot(page, "lookup-bad-lines");
});

test("History without a match suggests executable names by prefix", async () => {
  await page.goto(`${BASE}/console/history`);
  await page.getByLabel("Executable name").fill("SAMPLE");
  await page.getByRole("button", { name: "Show history" }).click();
  const suggestions = page.locator("[data-suggestions]");
  await suggestions.waitFor();
  assert.match(await suggestions.textContent(), /^Did you mean: sample-tool\.exe\?$/);
  await shoot(page, "history-suggestions");
  await suggestions.getByRole("link", { name: "sample-tool.exe" }).click();
  await page.waitForURL(`${BASE}/console/history?executable=sample-tool.exe`);
  assert.match(await page.textContent("main"), /2 versions of sample-tool\.exe\./);
  assert.equal(await page.locator("[data-suggestions]").count(), 0);
  // A single character is too short to search by: no suggestions.
  await page.goto(`${BASE}/console/history?executable=s`);
  assert.match(await page.textContent("main"), /0 versions of s\./);
  assert.equal(await page.locator("[data-suggestions]").count(), 0);
});
