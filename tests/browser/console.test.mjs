// The web console in headless Chromium, one user journey per test, in order (they share
// the seeded server that run.sh starts). Each page is photographed at desktop and phone
// width into $KG_SCREENSHOTS.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { chromium } from "playwright-core";
import { base32Decode, codeAt, freshCode, lastStep, shoot } from "./support.mjs";

const BASE = process.env.KG_CONSOLE;
const SHOTS = process.env.KG_SCREENSHOTS;
let adminKey = process.env.KG_ADMIN_KEY;
let browser;
let totpSecret;
let recoveryCodes;
let invitee; // { userId, secret } of the invited user

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

// ----- helpers -----

async function newPage() {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.on("pageerror", (e) => assert.fail(`script error on ${page.url()}: ${e.message}`));
  return page;
}

async function signInWithKey(page, key) {
  await page.goto(`${BASE}/console/sign-in`);
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
}

async function signOut(page) {
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL(`${BASE}/console/sign-in`);
}

async function enrolTotp(page) {
  await page.getByRole("button", { name: "Set up an authenticator app" }).click();
  await page.waitForURL(`${BASE}/console/account/totp/enroll`);
  assert.ok(await page.locator("figure.qr svg").count(), "the QR code is inline SVG");
  const secret = (await page.locator("[data-totp-secret]").textContent()).trim();
  await shoot(page, "totp-enrol");
  await page.getByLabel("Code from the app").fill(await freshCode(secret));
  await page.getByRole("button", { name: "Turn on" }).click();
  await page.waitForURL(`${BASE}/console/account`);
  assert.match(await page.textContent("main"), /Authenticator app: on/);
  return secret;
}

// ----- journeys -----

test("the public dashboard shows the feed, vendor health and today's root", async () => {
  const page = await newPage();
  const response = await page.goto(`${BASE}/console/`);
  const headers = response.headers();
  assert.match(headers["content-security-policy"], /script-src 'self'/);
  assert.doesNotMatch(headers["content-security-policy"], /unsafe-inline/);
  assert.equal(headers["x-frame-options"], "DENY");
  assert.match(await page.textContent("main"), /sample-tool\.exe/);
  assert.match(await page.textContent("main"), /Merkle root/);
  await page.getByLabel("Search executables or vendors").fill("no-such-tool");
  await page.getByRole("button", { name: "Filter" }).click();
  assert.match(await page.textContent("main"), /0 of 0 current records/);
  await shoot(page, "dashboard");
  await page.goto(`${BASE}/console/sign-in`);
  await shoot(page, "sign-in");
  await page.context().close();
});

test("a first sign-in with a key goes to Account, enrols TOTP, then signs in with it", async () => {
  const page = await newPage();
  await signInWithKey(page, adminKey);
  await page.waitForURL(/\/console\/account/);
  const cookies = await page.context().cookies();
  const session = cookies.find((c) => c.name === "kg_session");
  assert.ok(session.httpOnly, "the session cookie is HttpOnly");
  assert.equal(session.sameSite, "Strict");
  assert.match(await page.textContent("main"), /Set up a passkey or an authenticator app/);
  // Other pages wait for the second factor.
  await page.goto(`${BASE}/console/lookup`);
  assert.match(page.url(), /\/console\/account/);
  await shoot(page, "account-first-sign-in");
  totpSecret = await enrolTotp(page);
  await shoot(page, "account");

  await signOut(page);
  await signInWithKey(page, adminKey);
  await page.waitForURL(`${BASE}/console/second-factor`);
  await shoot(page, "second-factor");
  await page.getByLabel("6-digit code").fill(await freshCode(totpSecret));
  await page.getByRole("button", { name: "Continue" }).click();
  // Signed in with a second factor: the console opens on Lookup.
  await page.waitForURL(`${BASE}/console/lookup`);
  await page.context().close();
});

test("recovery codes: generated once, one used at sign-in, the count drops", async () => {
  const page = await newPage();
  await signInWithKey(page, adminKey);
  await page.waitForURL(`${BASE}/console/second-factor`);
  // A code already used is refused.
  await page.getByLabel("6-digit code").fill(codeAt(totpSecret, lastStep.get(totpSecret)));
  await page.getByRole("button", { name: "Continue" }).click();
  assert.match(await page.textContent("main"), /not valid/);
  await page.getByLabel("6-digit code").fill(await freshCode(totpSecret));
  await page.getByRole("button", { name: "Continue" }).click();
  await page.waitForURL(`${BASE}/console/lookup`);
  await page.goto(`${BASE}/console/account`);
  assert.match(await page.textContent("main"), /You have no recovery codes left/);
  await page.getByRole("button", { name: "Generate new recovery codes" }).click();
  recoveryCodes = await page.locator("[data-recovery-codes] code").allTextContents();
  assert.equal(recoveryCodes.length, 10);
  recoveryCodes.forEach((c) => assert.match(c, /^[A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{4}$/));
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    page.getByRole("button", { name: "Download as a text file" }).click(),
  ]);
  assert.equal(download.suggestedFilename(), "knowngood-recovery-codes.txt");
  const saved = readFileSync(await download.path(), "utf8");
  recoveryCodes.forEach((c) => assert.ok(saved.includes(c), `${c} in the downloaded file`));
  await shoot(page, "recovery-codes");
  await page.goto(`${BASE}/console/account`);
  assert.equal((await page.locator("[data-recovery-left]").textContent()).trim(), "10");

  await signOut(page);
  await signInWithKey(page, adminKey);
  await page.waitForURL(`${BASE}/console/second-factor`);
  await page.getByLabel("Recovery code", { exact: true }).fill(recoveryCodes[0]);
  await page.getByRole("button", { name: "Use recovery code" }).click();
  await page.waitForURL(/\/console\/account/);
  assert.match(await page.textContent("main"), /recovery code; 9 left/);
  assert.equal((await page.locator("[data-recovery-left]").textContent()).trim(), "9");
  await page.context().close();
});

test("a passkey registered with the virtual authenticator signs in", async () => {
  const page = await newPage();
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("WebAuthn.enable");
  await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2", transport: "internal", hasResidentKey: true,
      hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true,
    },
  });
  await signInWithKey(page, adminKey);
  await page.waitForURL(`${BASE}/console/second-factor`);
  await page.getByLabel("Recovery code", { exact: true }).fill(recoveryCodes[1]);
  await page.getByRole("button", { name: "Use recovery code" }).click();
  await page.waitForURL(/\/console\/account/);

  await page.getByLabel("Name for a new passkey").fill("Test laptop");
  await Promise.all([
    page.waitForEvent("load"),
    page.getByRole("button", { name: "Add a passkey" }).click(),
  ]);
  assert.match(await page.locator("[data-passkey-list]").textContent(), /Test laptop/);
  await shoot(page, "account-with-passkey");

  await signOut(page);
  await page.getByRole("button", { name: "Sign in with a passkey" }).click();
  await page.waitForURL(`${BASE}/console/lookup`);
  assert.match(await page.textContent("header"), /console-teams/);
  await page.context().close();
});

test("an invited user is held at MFA_REQUIRED until they enrol", async () => {
  const admin = await newPage();
  await signInWithKey(admin, adminKey);
  await admin.waitForURL(`${BASE}/console/second-factor`);
  await admin.getByLabel("Recovery code", { exact: true }).fill(recoveryCodes[2]);
  await admin.getByRole("button", { name: "Use recovery code" }).click();
  await admin.goto(`${BASE}/console/keys`);
  await admin.getByLabel("Role", { exact: true }).selectOption("analyst");
  await admin.getByLabel("Name", { exact: true }).fill("Grace");
  await admin.getByLabel("Contact").fill("grace@example.org");
  await admin.getByRole("button", { name: "Create invite code" }).click();
  const code = (await admin.locator("[data-invite-code]").textContent()).trim();
  await shoot(admin, "keys");
  await admin.context().close();

  const page = await newPage();
  await page.goto(`${BASE}/console/invite`);
  await shoot(page, "invite");
  await page.getByLabel("Invite code").fill(code);
  await page.getByRole("button", { name: "Join" }).click();
  await page.waitForURL(/\/console\/account/);
  assert.match(await page.textContent("main"), /Set up a passkey or an authenticator app/);
  // The API answers the same session MFA_REQUIRED (the console's own fetch carries no
  // bearer token, so ask the API with the session's cookie value as the token).
  const token = (await page.context().cookies()).find((c) => c.name === "kg_session").value;
  const refused = await page.request.get(`${BASE}/api/v1/intel/stats`, {
    headers: { Authorization: `Bearer ${token}` },
  });
  assert.equal(refused.status(), 403);
  assert.equal((await refused.json()).error, "MFA_REQUIRED");
  await page.goto(`${BASE}/console/history`);
  assert.match(page.url(), /\/console\/account/);

  const userId = (await page.locator("[data-user-id]").textContent()).trim();
  assert.match(userId, /^[0-9a-f-]{36}$/, "the Account page shows the user ID to sign in with");
  invitee = { userId, secret: await enrolTotp(page) };
  const allowed = await page.request.get(`${BASE}/api/v1/intel/stats`, {
    headers: { Authorization: `Bearer ${token}` },
  });
  assert.equal(allowed.status(), 200);
  await page.goto(`${BASE}/console/history?executable=sample-tool.exe`);
  assert.match(await page.textContent("main"), /2 versions of sample-tool\.exe/);
  await shoot(page, "history");
  await page.goto(`${BASE}/console/usage`);
  assert.ok(await page.locator("svg.chart").count());
  await shoot(page, "usage");
  await page.context().close();
});

async function signInAsUser(page, userId) {
  await page.goto(`${BASE}/console/sign-in`);
  await page.getByLabel("User ID").fill(userId);
  await page.getByRole("button", { name: "Continue" }).click();
  await page.waitForURL(`${BASE}/console/second-factor`);
}

test("an invited user signs in again with their authenticator, a recovery code or a passkey", async () => {
  const page = await newPage();
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("WebAuthn.enable");
  await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2", transport: "internal", hasResidentKey: true,
      hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true,
    },
  });
  // The invite code worked once; the user ID and the authenticator app work again.
  await page.goto(`${BASE}/console/invite`);
  await page.getByLabel("Invite code").fill("used-or-unknown-code");
  await page.getByRole("button", { name: "Join" }).click();
  assert.match(await page.textContent("main"), /not valid, has expired or was used/);
  await signInAsUser(page, invitee.userId);
  await page.getByLabel("6-digit code").fill(await freshCode(invitee.secret));
  await page.getByRole("button", { name: "Continue" }).click();
  await page.waitForURL(`${BASE}/console/lookup`);
  await page.goto(`${BASE}/console/account`);
  assert.match(await page.textContent("main"), new RegExp(invitee.userId));
  assert.match(await page.textContent("header"), /console-teams · analyst/);
  await page.getByRole("button", { name: "Generate new recovery codes" }).click();
  const codes = await page.locator("[data-recovery-codes] code").allTextContents();
  assert.equal(codes.length, 10);
  await page.goto(`${BASE}/console/account`);
  await shoot(page, "account-invited-user");
  await signOut(page);

  await signInAsUser(page, invitee.userId);
  await page.getByLabel("Recovery code", { exact: true }).fill(codes[0]);
  await page.getByRole("button", { name: "Use recovery code" }).click();
  await page.waitForURL(/\/console\/account/);
  assert.match(await page.textContent("main"), /recovery code; 9 left/);
  await page.getByLabel("Name for a new passkey").fill("Grace's laptop");
  await Promise.all([
    page.waitForEvent("load"),
    page.getByRole("button", { name: "Add a passkey" }).click(),
  ]);
  assert.match(await page.locator("[data-passkey-list]").textContent(), /Grace's laptop/);
  await signOut(page);

  await page.getByRole("button", { name: "Sign in with a passkey" }).click();
  await page.waitForURL(`${BASE}/console/lookup`);
  await page.goto(`${BASE}/console/account`);
  assert.match(await page.textContent("main"), new RegExp(invitee.userId));
  await signOut(page);

  // An unknown user ID is refused plainly.
  await page.getByLabel("User ID").fill("00000000-0000-4000-8000-000000000000");
  await page.getByRole("button", { name: "Continue" }).click();
  assert.match(await page.textContent("main"), /No active user has that ID/);
  await page.context().close();
});

test("an unknown console address answers the console's 404 page; the favicon exists", async () => {
  const page = await newPage();
  const response = await page.goto(`${BASE}/console/no-such-page`);
  assert.equal(response.status(), 404);
  assert.match(response.headers()["content-security-policy"], /frame-ancestors 'none'/);
  assert.equal(await page.locator("h1").textContent(), "Page not found");
  assert.ok(await page.getByRole("link", { name: "sign in" }).count());
  await shoot(page, "not-found");
  const icon = await page.request.get(`${BASE}/favicon.ico`);
  assert.equal(icon.status(), 200);
  assert.equal(icon.headers()["content-type"], "image/x-icon");
  await page.context().close();
});

test("a dropped file is hashed in the browser and classified", async () => {
  const page = await newPage();
  await signInWithKey(page, adminKey);
  await page.waitForURL(`${BASE}/console/second-factor`);
  await page.getByLabel("Recovery code", { exact: true }).fill(recoveryCodes[3]);
  await page.getByRole("button", { name: "Use recovery code" }).click();
  await page.goto(`${BASE}/console/lookup`);
  const bytes = readFileSync(process.env.KG_SAMPLE);
  // Blocks any upload of the file itself: only the form with its hashes may be posted.
  let uploaded = false;
  page.on("request", (r) => {
    if ((r.postData() || "").includes("knowngood console test file")) uploaded = true;
  });
  await Promise.all([
    page.waitForResponse((r) => r.url().endsWith("/console/lookup") && r.request().method() === "POST"),
    page.evaluate((data) => {
      const file = new File([new Uint8Array(data)], "sample-tool.exe");
      const transfer = new DataTransfer();
      transfer.items.add(file);
      document.querySelector("[data-drop]").dispatchEvent(
        new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true }));
    }, [...bytes]),
  ]);
  await page.locator("[data-classification]").first().waitFor();
  assert.equal(uploaded, false, "the file itself never leaves the browser");
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  const md5 = createHash("md5").update(bytes).digest("hex");
  const submitted = await page.locator("tr[data-file]").textContent();
  assert.ok(submitted.includes(sha256) && submitted.includes(md5), "SHA-256 and MD5 computed in the page");
  const classes = await page.locator("[data-classification]").allTextContents();
  assert.deepEqual(classes, ["known_vendor_release", "known_vendor_release", "known_vendor_release"]);
  await shoot(page, "lookup");
  await page.context().close();
});

test("a superseded build is known, marked superseded, with the current version beside it", async () => {
  const page = await newPage();
  await signInWithKey(page, adminKey);
  await page.waitForURL(`${BASE}/console/second-factor`);
  await page.getByLabel("6-digit code").fill(await freshCode(totpSecret));
  await page.getByRole("button", { name: "Continue" }).click();
  await page.waitForURL(`${BASE}/console/lookup`);
  const old = createHash("sha256").update(readFileSync(process.env.KG_OLD_SAMPLE)).digest("hex");
  await page.getByLabel(/^Hashes/).fill(old);
  await page.getByRole("button", { name: "Look up" }).click();
  const row = page.locator("tbody tr", { hasText: old });
  assert.equal(await row.locator("[data-classification]").textContent(), "known_vendor_release");
  assert.equal(await row.locator("[data-superseded]").textContent(), "superseded");
  assert.match(await row.textContent(), /sample-tool\.exe 0\.9\.0/);
  assert.match(await row.locator("[data-current-version]").textContent(), /current version: 1\.0\.0/);
  await shoot(page, "lookup-superseded");
  await page.context().close();
});

test("a reissued key is shown once and the old key is refused", async () => {
  const page = await newPage();
  await signInWithKey(page, adminKey);
  await page.waitForURL(`${BASE}/console/second-factor`);
  await page.getByLabel("Recovery code", { exact: true }).fill(recoveryCodes[4]);
  await page.getByRole("button", { name: "Use recovery code" }).click();
  await page.waitForURL(/\/console\/account/);
  await page.getByRole("button", { name: "Reissue my key" }).click();
  const newKey = (await page.locator("[data-new-key]").textContent()).trim();
  assert.notEqual(newKey, adminKey);
  await shoot(page, "key-reissued");
  await signInWithKey(page, adminKey);
  assert.match(await page.textContent("main"), /That key is not valid/);
  const oldApi = await page.request.get(`${BASE}/api/v1/intel/stats`, { headers: { "X-API-Key": adminKey } });
  assert.equal(oldApi.status(), 401);
  // The second factors moved to the new key.
  await signInWithKey(page, newKey);
  await page.waitForURL(`${BASE}/console/second-factor`);
  await page.getByLabel("Recovery code", { exact: true }).fill(recoveryCodes[5]);
  await page.getByRole("button", { name: "Use recovery code" }).click();
  await page.waitForURL(/\/console\/account/);
  assert.match(await page.textContent("main"), /4 left/);
  adminKey = newKey;
  await page.context().close();
});
