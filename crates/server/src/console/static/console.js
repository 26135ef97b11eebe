// The console's only script: WebAuthn ceremonies (register a passkey, sign in with one)
// and hashing dropped files in the browser. Served by the binary; no build step.
"use strict";
(function () {
  const csrf = () => document.querySelector('meta[name="csrf-token"]').content;

  const fromB64url = (s) => {
    const b64 = s.replace(/-/g, "+").replace(/_/g, "/");
    const bin = atob(b64 + "===".slice((b64.length + 3) % 4));
    return Uint8Array.from(bin, (c) => c.charCodeAt(0)).buffer;
  };
  const toB64url = (buf) => {
    let bin = "";
    new Uint8Array(buf).forEach((b) => { bin += String.fromCharCode(b); });
    return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  };

  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
      body: JSON.stringify(body),
    });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(data.message || data.error || response.statusText);
    return data;
  }

  function status(text) {
    document.querySelectorAll("[data-passkey-status]").forEach((el) => { el.textContent = text; });
  }

  async function registerPasskey() {
    const nameField = document.querySelector("[data-passkey-name]");
    const name = (nameField && nameField.value.trim()) || "Passkey";
    status("Waiting for your authenticator…");
    const options = await post("/console/passkey/register/begin", { display_name: name });
    const pk = options.publicKey;
    pk.challenge = fromB64url(pk.challenge);
    pk.user.id = fromB64url(pk.user.id);
    (pk.excludeCredentials || []).forEach((c) => { c.id = fromB64url(c.id); });
    const cred = await navigator.credentials.create({ publicKey: pk });
    await post("/console/passkey/register/complete", {
      id: cred.id,
      rawId: toB64url(cred.rawId),
      type: cred.type,
      response: {
        attestationObject: toB64url(cred.response.attestationObject),
        clientDataJSON: toB64url(cred.response.clientDataJSON),
      },
      extensions: cred.getClientExtensionResults(),
    });
    status("Passkey added.");
    window.location.reload();
  }

  async function signInWithPasskey() {
    status("Waiting for your authenticator…");
    const response = await fetch("/api/v1/admin/auth/passkey/begin", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: "{}",
    });
    const options = await response.json();
    if (!response.ok) throw new Error(options.message || options.error);
    const pk = options.publicKey;
    pk.challenge = fromB64url(pk.challenge);
    (pk.allowCredentials || []).forEach((c) => { c.id = fromB64url(c.id); });
    const cred = await navigator.credentials.get({ publicKey: pk });
    const result = await post("/console/passkey/sign-in", {
      id: cred.id,
      rawId: toB64url(cred.rawId),
      type: cred.type,
      response: {
        authenticatorData: toB64url(cred.response.authenticatorData),
        clientDataJSON: toB64url(cred.response.clientDataJSON),
        signature: toB64url(cred.response.signature),
        userHandle: cred.response.userHandle ? toB64url(cred.response.userHandle) : null,
      },
      extensions: cred.getClientExtensionResults(),
    });
    window.location.assign(result.redirect);
  }

  const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, "0")).join("");

  /** Hashes the chosen files in the browser and posts their digests with their names. */
  async function hashFiles(list) {
    const form = document.querySelector("[data-lookup-form]");
    const out = document.querySelector("[data-file-status]");
    const drop = document.querySelector("[data-drop]");
    const max = Number((drop && drop.dataset.maxFiles) || 33);
    const files = Array.from(list);
    if (files.length === 0) return;
    if (files.length > max) {
      out.textContent = `${files.length} files chosen; at most ${max} are looked up at once. Choose fewer.`;
      return;
    }
    const digests = [];
    for (const file of files) {
      out.textContent = `Hashing ${file.name} in your browser (${digests.length + 1} of ${files.length})…`;
      const data = await file.arrayBuffer();
      const [sha256, sha1] = await Promise.all([
        crypto.subtle.digest("SHA-256", data),
        crypto.subtle.digest("SHA-1", data),
      ]);
      digests.push({ name: file.name, sha256: hex(sha256), sha1: hex(sha1), md5: window.knowngoodMd5(data) });
    }
    document.querySelector("[data-lookup-files]").value = JSON.stringify(digests);
    out.textContent = (files.length === 1 ? files[0].name : `${files.length} files`) + " hashed; looking up their digests.";
    form.submit();
  }

  /** The recovery codes on the page, one a line. */
  function codesText() {
    const codes = [...document.querySelectorAll("[data-recovery-codes] code")].map((c) => c.textContent.trim());
    return "knowngood recovery codes (each works once)\n" + codes.join("\n") + "\n";
  }

  function codesStatus(text) {
    const el = document.querySelector("[data-codes-status]");
    if (el) el.textContent = text;
  }

  function wire() {
    document.querySelectorAll('[data-action="copy-codes"]').forEach((button) => {
      button.addEventListener("click", () => {
        navigator.clipboard.writeText(codesText())
          .then(() => codesStatus("Copied. Paste them somewhere safe."))
          .catch(() => codesStatus("Copying is not allowed here: select the codes and copy them."));
      });
    });
    document.querySelectorAll('[data-action="download-codes"]').forEach((button) => {
      button.addEventListener("click", () => {
        const url = URL.createObjectURL(new Blob([codesText()], { type: "text/plain" }));
        const link = document.createElement("a");
        link.href = url;
        link.download = "knowngood-recovery-codes.txt";
        document.body.appendChild(link);
        link.click();
        link.remove();
        setTimeout(() => URL.revokeObjectURL(url), 1000);
        codesStatus("Downloaded knowngood-recovery-codes.txt.");
      });
    });
    document.querySelectorAll('[data-action="passkey-register"]').forEach((button) => {
      button.addEventListener("click", () => registerPasskey().catch((e) => status("Passkey not added: " + e.message)));
    });
    document.querySelectorAll('[data-action="passkey-sign-in"]').forEach((button) => {
      button.addEventListener("click", () => signInWithPasskey().catch((e) => status("Passkey sign-in failed: " + e.message)));
    });
    // An SBOM file is read into the form's text field (the form posts text, not files).
    document.querySelectorAll("[data-sbom-file]").forEach((input) => {
      input.addEventListener("change", async () => {
        const file = input.files[0];
        const note = document.querySelector("[data-sbom-status]");
        const target = document.querySelector("[data-sbom-text]");
        if (!file || !target) return;
        if (file.size > 1024 * 1024) {
          if (note) note.textContent = `${file.name} is over 1 MB: send it to POST /api/v1/intel/sbom instead.`;
          return;
        }
        target.value = await file.text();
        if (note) note.textContent = `${file.name} loaded (${file.size} bytes). Press Scan.`;
      });
    });
    const drop = document.querySelector("[data-drop]");
    const input = document.querySelector("[data-file]");
    if (input) {
      input.addEventListener("change", () => {
        hashFiles(input.files).catch((e) => { document.querySelector("[data-file-status]").textContent = "Could not hash: " + e.message; });
      });
    }
    if (drop) {
      drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
      drop.addEventListener("dragleave", () => drop.classList.remove("over"));
      drop.addEventListener("drop", (e) => {
        e.preventDefault();
        drop.classList.remove("over");
        hashFiles(e.dataTransfer.files).catch((err) => { document.querySelector("[data-file-status]").textContent = "Could not hash: " + err.message; });
      });
      drop.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); input.click(); }
      });
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
