// Helpers the browser suites share: RFC 6238 codes for the authenticator-app factor and
// screenshots at desktop and phone width.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";

const SHOTS = process.env.KG_SCREENSHOTS;

export function base32Decode(text) {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = 0, value = 0;
  const out = [];
  for (const c of text) {
    value = (value << 5) | alphabet.indexOf(c);
    bits += 5;
    if (bits >= 8) { bits -= 8; out.push((value >>> bits) & 0xff); }
  }
  return Buffer.from(out);
}

const nowStep = () => Math.floor(Date.now() / 1000 / 30);
/** The last time step whose code each secret used. */
export const lastStep = new Map();

/** The RFC 6238 code of time step `step`. */
export function codeAt(secret, step) {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(step));
  const mac = createHmac("sha1", base32Decode(secret)).update(counter).digest();
  const at = mac[19] & 0x0f;
  const n = (mac.readUInt32BE(at) & 0x7fffffff) % 1_000_000;
  return String(n).padStart(6, "0");
}

/**
 * A code the server has not accepted yet: each step's code works once, and the server
 * takes the current step or one either side of it, so wait when the next unused step is
 * still too far ahead. The step chosen stays acceptable for at least 10 more seconds, so a
 * step boundary passing while the form is filled and sent cannot make the code stale.
 */
export async function freshCode(secret) {
  const stillAcceptedIn10s = Math.floor((Date.now() / 1000 + 10) / 30) - 1;
  const step = Math.max((lastStep.get(secret) ?? 0) + 1, stillAcceptedIn10s);
  while (step > nowStep() + 1) await new Promise((r) => setTimeout(r, 500));
  lastStep.set(secret, step);
  return codeAt(secret, step);
}

/** Desktop and 390 px screenshots of the page as it is; nothing may overflow a phone. */
export async function shoot(page, name) {
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.screenshot({ path: `${SHOTS}/${name}-desktop.png`, fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: `${SHOTS}/${name}-phone.png`, fullPage: true });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `${name} overflows 390 px by ${overflow} px`);
  await page.setViewportSize({ width: 1280, height: 900 });
}
