//! Second factors: TOTP (RFC 6238, SHA-1, 6 digits, 30-second steps), recovery codes and
//! passkeys (WebAuthn), each belonging to a *subject* (`key:<key_id>` or `user:<uuid>`).
//!
//! - TOTP seeds are encrypted at rest (AES-256-GCM) with a key derived from the server's
//!   HMAC secret; they never reach a log. A code is accepted once: the store records the
//!   time step it matched and refuses any step not newer than the last.
//! - Recovery codes are kept as HMACs and used once; a new set replaces the old.
//! - Wrong codes count against a budget per subject ([`FAILURE_BUDGET`]); spending it locks
//!   the subject out for a while and is audited.
//! - WebAuthn ceremony state is kept in the database, keyed by the ceremony's challenge, so
//!   any replica finishes a ceremony another began.

use std::sync::Arc;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chrono::{DateTime, Duration, Utc};
use model::{Clock, Error};
use store::Store;
use store::users::{Ceremony, FailureBudget, PasskeyRow, TotpRow};
use uuid::Uuid;
use webauthn_rs::prelude::{
    DiscoverableAuthentication, Passkey, PasskeyAuthentication, PasskeyRegistration,
    PublicKeyCredential, RegisterPublicKeyCredential, Url, Webauthn, WebauthnBuilder,
};

use crate::KeyHasher;

/// Seconds per TOTP step.
pub const TOTP_STEP_SECS: i64 = 30;
/// Digits of a TOTP code.
pub const TOTP_DIGITS: u32 = 6;
/// Recovery codes per generation.
pub const RECOVERY_CODES: usize = 10;
/// Five wrong codes within 15 minutes lock the subject out for 15 minutes.
pub const FAILURE_BUDGET: FailureBudget = FailureBudget {
    budget: 5,
    window: Duration::minutes(15),
    lock: Duration::minutes(15),
};
/// How long a WebAuthn ceremony may take.
const CEREMONY_TTL: Duration = Duration::minutes(5);
/// Characters of recovery codes: no 0/O or 1/I to misread.
const RECOVERY_ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/// The relying party the console's passkeys are bound to.
#[derive(Debug, Clone)]
pub struct RelyingParty {
    /// The domain (e.g. `knowngood.example`).
    pub id: String,
    /// The console's origin (e.g. `https://knowngood.example`).
    pub origin: Url,
    /// Accept the origin on any port (development and tests on loopback).
    pub any_port: bool,
}

impl Default for RelyingParty {
    fn default() -> Self {
        Self {
            id: "localhost".into(),
            origin: Url::parse("http://localhost").unwrap_or_else(|_| unreachable!("valid URL")),
            any_port: true,
        }
    }
}

/// The second-factor state of a subject, as `GET /api/v1/admin/mfa/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MfaStatus {
    /// A passkey or an enabled TOTP: the subject may sign in to the console.
    pub enrolled: bool,
    pub totp_enabled: bool,
    pub passkeys: usize,
    pub recovery_codes_remaining: u64,
    /// The WebAuthn user handle of the subject (base64url), a sign-in hint.
    pub user_handle: String,
    /// Locked out after too many wrong codes, until then.
    pub locked_until: Option<DateTime<Utc>>,
}

/// A TOTP enrolment: shown once.
pub struct TotpEnrollment {
    /// Base32 seed, no padding.
    pub secret: String,
    pub otpauth_url: String,
    pub qr_code_svg: String,
}

/// What a caller changing its second factors shows besides its credential. Once a subject
/// has a passkey or an enabled TOTP, enrolling another factor, removing a passkey and
/// generating recovery codes need [`Proof::Session`] or [`Proof::TotpCode`]; a raw key (or
/// a token exchanged for it) alone may only enrol the first factor. Otherwise the key alone
/// would mint the factor that its console sign-in then asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof<'a> {
    /// A raw key, a key token, or a session that has not passed a second factor.
    None,
    /// A console or user session that passed a second factor.
    Session,
    /// The current TOTP code, sent with the request: checked against the wrong-code budget
    /// and accepted once, like a sign-in.
    TotpCode(&'a str),
}

impl<'a> Proof<'a> {
    /// The proof of a request by `principal` that sent `code` (a TOTP code) or none.
    pub fn of(principal: &crate::Principal, code: Option<&'a str>) -> Self {
        if principal.session.as_ref().is_some_and(|s| s.mfa) {
            Proof::Session
        } else if let Some(code) = code {
            Proof::TotpCode(code)
        } else {
            Proof::None
        }
    }
}

pub struct Mfa {
    store: Arc<dyn Store>,
    hasher: KeyHasher,
    seed_key: LessSafeKey,
    webauthn: Result<Webauthn, String>,
    clock: Arc<dyn Clock>,
}

impl Mfa {
    /// A relying party WebAuthn refuses (an origin that does not match the id) leaves
    /// passkeys unavailable, said on each use and logged here; TOTP still works.
    pub fn new(
        store: Arc<dyn Store>,
        hasher: KeyHasher,
        rp: &RelyingParty,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let key_bytes = hasher.derive("knowngood totp seed encryption v1");
        let seed_key = LessSafeKey::new(
            UnboundKey::new(&AES_256_GCM, &key_bytes)
                .unwrap_or_else(|_| unreachable!("a 32-byte key suits AES-256-GCM")),
        );
        let webauthn = WebauthnBuilder::new(&rp.id, &rp.origin)
            .and_then(|b| b.rp_name("knowngood").allow_any_port(rp.any_port).build())
            .map_err(|e| {
                tracing::error!(error = %e, rp_id = %rp.id, origin = %rp.origin, "passkeys unavailable: bad relying party");
                format!("passkeys are not available: the relying party is misconfigured ({e})")
            });
        Self {
            store,
            hasher,
            seed_key,
            webauthn,
            clock,
        }
    }

    fn webauthn(&self) -> Result<&Webauthn, Error> {
        self.webauthn
            .as_ref()
            .map_err(|e| Error::Unavailable(e.clone()))
    }

    /// A passkey or an enabled TOTP.
    pub async fn enrolled(&self, subject: &str) -> Result<bool, Error> {
        let totp = self.store.totp(subject).await?.is_some_and(|t| t.enabled);
        Ok(totp || !self.store.passkeys(subject).await?.is_empty())
    }

    pub async fn status(&self, subject: &str) -> Result<MfaStatus, Error> {
        let now = self.clock.now();
        let totp_enabled = self.store.totp(subject).await?.is_some_and(|t| t.enabled);
        let passkeys = self.store.passkeys(subject).await?.len();
        Ok(MfaStatus {
            enrolled: totp_enabled || passkeys > 0,
            totp_enabled,
            passkeys,
            recovery_codes_remaining: self.store.recovery_codes_left(subject).await?,
            user_handle: URL_SAFE_NO_PAD.encode(user_uuid(subject).as_bytes()),
            locked_until: self.store.mfa_locked_until(subject, now).await?,
        })
    }

    /// The second-factor rule for changing factors (see [`Proof`]). With `first`, a
    /// subject that has no passkey and no enabled TOTP yet may go ahead without proof (it is
    /// enrolling its first factor). `403 MFA_REQUIRED` otherwise.
    async fn require_second_factor(
        &self,
        subject: &str,
        proof: Proof<'_>,
        first: bool,
    ) -> Result<(), Error> {
        if proof == Proof::Session || (first && !self.enrolled(subject).await?) {
            return Ok(());
        }
        match proof {
            Proof::TotpCode(code) => self.check_totp_code(subject, code, false).await,
            Proof::None | Proof::Session => Err(Error::MfaRequired),
        }
    }

    // ----- TOTP -----

    /// Starts an enrolment: a fresh 160-bit seed, stored encrypted and not yet enabled.
    /// `label` names the account in the authenticator app.
    pub async fn totp_enroll(
        &self,
        subject: &str,
        label: &str,
        proof: Proof<'_>,
    ) -> Result<TotpEnrollment, Error> {
        if self.store.totp(subject).await?.is_some_and(|t| t.enabled) {
            return Err(Error::Conflict(
                "TOTP is already enabled; disable it with a current code first".into(),
            ));
        }
        self.require_second_factor(subject, proof, true).await?;
        let seed: [u8; 20] = rand::random();
        self.store
            .put_pending_totp(&TotpRow {
                subject: subject.into(),
                secret_enc: self.seal(&seed)?,
                enabled: false,
                last_step: 0,
                created_at: self.clock.now(),
            })
            .await?;
        let secret = base32(&seed);
        let label = url_escape(&format!("knowngood:{label}"));
        let otpauth_url = format!(
            "otpauth://totp/{label}?secret={secret}&issuer=knowngood&algorithm=SHA1&digits={TOTP_DIGITS}&period={TOTP_STEP_SECS}"
        );
        let qr_code_svg = qr_svg(&otpauth_url)?;
        Ok(TotpEnrollment {
            secret,
            otpauth_url,
            qr_code_svg,
        })
    }

    /// Checks a code of the subject's TOTP (enabled, or pending when `enable`) against the
    /// budget: the guess is taken from the budget before the code is looked at, and a wrong
    /// or replayed code stays counted.
    async fn check_totp_code(&self, subject: &str, code: &str, enable: bool) -> Result<(), Error> {
        let stored = self
            .store
            .totp(subject)
            .await?
            .filter(|t| t.enabled != enable)
            .ok_or_else(|| {
                if enable {
                    Error::bad_request("no TOTP enrolment is pending: call totp/enroll first")
                } else {
                    Error::bad_request("TOTP is not enabled for this principal")
                }
            })?;
        let code = code.trim();
        if code.len() != TOTP_DIGITS as usize || !code.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::bad_request("code must be 6 digits"));
        }
        let seed = self.open(&stored.secret_enc)?;
        self.take_guess(subject).await?;
        let now = self.clock.now().timestamp();
        let step = matching_step(&seed, code, now);
        let accepted = match step {
            Some(step) => self.store.accept_totp_step(subject, step, enable).await?,
            None => false,
        };
        if !accepted {
            return Err(self.wrong_code(subject, "TOTP").await);
        }
        self.store.clear_mfa_failures(subject).await?;
        Ok(())
    }

    /// Confirms an enrolment with a first code; TOTP is enabled from then on. When the
    /// subject has another factor by now, only with a [`Proof::Session`].
    pub async fn totp_verify(
        &self,
        subject: &str,
        code: &str,
        proof: Proof<'_>,
    ) -> Result<(), Error> {
        let proof = match proof {
            // The code here is the new seed's, not a proof of an enabled factor.
            Proof::TotpCode(_) => Proof::None,
            other => other,
        };
        self.require_second_factor(subject, proof, true).await?;
        self.check_totp_code(subject, code, true).await
    }

    /// Disables TOTP after checking a current code.
    pub async fn totp_disable(&self, subject: &str, code: &str) -> Result<(), Error> {
        self.check_totp_code(subject, code, false).await?;
        self.store.delete_totp(subject).await?;
        Ok(())
    }

    /// Signs in with a TOTP code.
    pub async fn totp_sign_in(&self, subject: &str, code: &str) -> Result<(), Error> {
        self.check_totp_code(subject, code, false).await
    }

    // ----- recovery codes -----

    /// A new set of codes; the old set stops working. Always needs a proof: recovery codes
    /// stand in for a second factor, so they are never made with the key alone (`400` while
    /// the subject has no factor to stand in for, `403 MFA_REQUIRED` without the proof).
    pub async fn recovery_generate(
        &self,
        subject: &str,
        proof: Proof<'_>,
    ) -> Result<Vec<String>, Error> {
        if proof != Proof::Session && !self.enrolled(subject).await? {
            return Err(Error::bad_request(
                "recovery codes stand in for a second factor: enroll a passkey or TOTP first",
            ));
        }
        self.require_second_factor(subject, proof, false).await?;
        let codes: Vec<String> = (0..RECOVERY_CODES).map(|_| recovery_code()).collect();
        let hashes: Vec<String> = codes.iter().map(|c| self.recovery_hash(c)).collect();
        self.store.replace_recovery_codes(subject, &hashes).await?;
        Ok(codes)
    }

    /// Uses a code once; the codes left.
    pub async fn recovery_use(&self, subject: &str, code: &str) -> Result<u64, Error> {
        self.take_guess(subject).await?;
        let hash = self.recovery_hash(code);
        match self
            .store
            .use_recovery_code(subject, &hash, self.clock.now())
            .await?
        {
            Some(left) => {
                self.store.clear_mfa_failures(subject).await?;
                Ok(left)
            }
            None => Err(self.wrong_code(subject, "recovery").await),
        }
    }

    /// The HMAC of a code, normalised (case, hyphens and spaces do not count). Not bound to
    /// the subject, so the codes follow a reissued key.
    fn recovery_hash(&self, code: &str) -> String {
        let normal: String = code
            .trim()
            .chars()
            .filter(|c| *c != '-' && !c.is_whitespace())
            .flat_map(char::to_uppercase)
            .collect();
        self.hasher.hash(&format!("recovery:{normal}"))
    }

    // ----- budget -----

    /// Takes a guess from the subject's budget (one atomic step in the database, so
    /// concurrent requests on any replica never try more codes than the budget): 429 when
    /// locked out or when every guess of the window is taken.
    async fn take_guess(&self, subject: &str) -> Result<(), Error> {
        let now = self.clock.now();
        match self
            .store
            .mfa_take_guess(subject, now, FAILURE_BUDGET)
            .await?
        {
            Some(until) => Err(locked(until, now)),
            None => Ok(()),
        }
    }

    /// A wrong code (its guess already counted); the error to answer (401, or 429 when it
    /// spent the budget and locked the subject out).
    async fn wrong_code(&self, subject: &str, factor: &str) -> Error {
        let now = self.clock.now();
        match self
            .store
            .mfa_settle_failure(subject, now, FAILURE_BUDGET)
            .await
        {
            Ok(Some(until)) => {
                let entry = store::admin::AuditEntry {
                    at: now,
                    actor: subject.to_string(),
                    team_id: String::new(),
                    action: "mfa.lockout".into(),
                    target: subject.to_string(),
                    outcome: format!("locked until {}", until.to_rfc3339()),
                    detail: format!("{} wrong codes; last: {factor}", FAILURE_BUDGET.budget),
                };
                if let Err(e) = self.store.append_audit(&entry).await {
                    tracing::error!(error = %e, "could not audit an MFA lock-out");
                }
                tracing::warn!(%subject, "second-factor budget spent; locked out");
                locked(until, now)
            }
            Ok(None) => Error::Unauthorized(format!("invalid or already used {factor} code")),
            Err(e) => e,
        }
    }

    // ----- passkeys -----

    /// Registration options for a new passkey of `subject`; the ceremony is kept in the
    /// database under its challenge.
    pub async fn passkey_register_begin(
        &self,
        subject: &str,
        user_name: &str,
        display_name: &str,
        proof: Proof<'_>,
    ) -> Result<serde_json::Value, Error> {
        self.require_second_factor(subject, proof, true).await?;
        // Whether the ceremony began with a proof; without one, completing it needs the
        // subject to have no factor still (or a session that passed one by then).
        let proven = proof != Proof::None;
        let exclude = self
            .store
            .passkeys(subject)
            .await?
            .iter()
            .filter_map(|p| serde_json::from_str::<Passkey>(&p.passkey).ok())
            .map(|p| p.cred_id().clone())
            .collect::<Vec<_>>();
        let (options, state) = self
            .webauthn()?
            .start_passkey_registration(user_uuid(subject), user_name, user_name, Some(exclude))
            .map_err(|e| Error::internal(format!("passkey registration: {e}")))?;
        let mut options = serde_json::to_value(&options).map_err(Error::internal)?;
        // Discoverable where the authenticator can, so a sign-in needs no user name.
        if let Some(sel) = options.pointer_mut("/publicKey/authenticatorSelection") {
            sel["residentKey"] = "preferred".into();
        }
        let challenge = options
            .pointer("/publicKey/challenge")
            .and_then(|c| c.as_str())
            .ok_or_else(|| Error::internal("registration options without a challenge"))?
            .to_string();
        let state =
            serde_json::json!({"display_name": display_name, "proven": proven, "state": state});
        self.put_ceremony(&challenge, Some(subject), "register", &state)
            .await?;
        Ok(options)
    }

    /// Finishes a registration begun by the same subject: the new passkey.
    pub async fn passkey_register_complete(
        &self,
        subject: &str,
        credential: serde_json::Value,
        proof: Proof<'_>,
    ) -> Result<PasskeyRow, Error> {
        let credential: RegisterPublicKeyCredential = serde_json::from_value(credential)
            .map_err(|e| Error::bad_request(format!("not a WebAuthn credential: {e}")))?;
        let challenge = challenge_of(&credential.response.client_data_json)?;
        let ceremony = self
            .store
            .take_ceremony(&challenge, self.clock.now())
            .await?
            .filter(|c| c.kind == "register" && c.subject.as_deref() == Some(subject))
            .ok_or_else(|| Error::bad_request("no registration in progress for this challenge"))?;
        let state: serde_json::Value =
            serde_json::from_str(&ceremony.state).map_err(Error::internal)?;
        if state["proven"] != true {
            self.require_second_factor(subject, proof, true).await?;
        }
        let reg: PasskeyRegistration =
            serde_json::from_value(state["state"].clone()).map_err(Error::internal)?;
        let passkey = self
            .webauthn()?
            .finish_passkey_registration(&credential, &reg)
            .map_err(|e| Error::bad_request(format!("passkey registration refused: {e}")))?;
        let credential_id = URL_SAFE_NO_PAD.encode(passkey.cred_id().as_slice());
        if self
            .store
            .passkey_by_credential(&credential_id)
            .await?
            .is_some()
        {
            return Err(Error::Conflict("this passkey is already registered".into()));
        }
        let row = PasskeyRow {
            passkey_id: format!("pk_{}", hex::encode(rand::random::<[u8; 8]>())),
            subject: subject.into(),
            user_handle: URL_SAFE_NO_PAD.encode(user_uuid(subject).as_bytes()),
            credential_id,
            display_name: state["display_name"].as_str().unwrap_or("passkey").into(),
            passkey: serde_json::to_string(&passkey).map_err(Error::internal)?,
            created_at: self.clock.now(),
            last_used_at: None,
        };
        self.store.add_passkey(&row).await?;
        Ok(row)
    }

    /// Removes one of the subject's passkeys (with a proof: the subject has a factor if it
    /// has a passkey); false when it has no such passkey.
    pub async fn passkey_delete(
        &self,
        subject: &str,
        passkey_id: &str,
        proof: Proof<'_>,
    ) -> Result<bool, Error> {
        self.require_second_factor(subject, proof, true).await?;
        self.store.delete_passkey(subject, passkey_id).await
    }

    /// Sign-in options. With a `user_handle` hint (from the MFA status) the options list
    /// that subject's passkeys; without, any discoverable passkey may answer. A handle with
    /// no passkey gets options of the same shape (a credential id derived from the handle,
    /// the same on every call), so the answer does not tell a stranger whether a handle has
    /// passkeys; no passkey can finish that ceremony.
    pub async fn passkey_sign_in_begin(
        &self,
        user_handle: Option<&str>,
    ) -> Result<serde_json::Value, Error> {
        let (options, subject, state) = match user_handle {
            Some(handle) => {
                let handle = handle.trim_end_matches('=');
                let subject = self.store.subject_of_user_handle(handle).await?;
                let passkeys: Vec<Passkey> = match &subject {
                    Some(subject) => self
                        .store
                        .passkeys(subject)
                        .await?
                        .iter()
                        .filter_map(|p| serde_json::from_str(&p.passkey).ok())
                        .collect(),
                    None => Vec::new(),
                };
                let Some(subject) = subject.filter(|_| !passkeys.is_empty()) else {
                    return self.decoy_sign_in_begin(handle).await;
                };
                let (options, state) = self
                    .webauthn()?
                    .start_passkey_authentication(&passkeys)
                    .map_err(|e| Error::internal(format!("passkey sign-in: {e}")))?;
                let state = serde_json::to_value(&state).map_err(Error::internal)?;
                (
                    serde_json::to_value(&options).map_err(Error::internal)?,
                    Some(subject),
                    state,
                )
            }
            None => {
                let (options, state) = self
                    .webauthn()?
                    .start_discoverable_authentication()
                    .map_err(|e| Error::internal(format!("passkey sign-in: {e}")))?;
                let mut options = serde_json::to_value(&options).map_err(Error::internal)?;
                // A modal prompt, not the autofill UI.
                if let Some(o) = options.as_object_mut() {
                    o.remove("mediation");
                }
                (
                    options,
                    None,
                    serde_json::to_value(&state).map_err(Error::internal)?,
                )
            }
        };
        let challenge = options
            .pointer("/publicKey/challenge")
            .and_then(|c| c.as_str())
            .ok_or_else(|| Error::internal("sign-in options without a challenge"))?
            .to_string();
        self.put_ceremony(&challenge, subject.as_deref(), "authenticate", &state)
            .await?;
        Ok(options)
    }

    /// Finishes a sign-in: the subject whose passkey signed. The signature counter must
    /// move forward (a cloned authenticator is refused) and user verification is required.
    pub async fn passkey_sign_in_complete(
        &self,
        assertion: serde_json::Value,
    ) -> Result<String, Error> {
        let assertion: PublicKeyCredential = serde_json::from_value(assertion)
            .map_err(|e| Error::bad_request(format!("not a WebAuthn assertion: {e}")))?;
        let challenge = challenge_of(&assertion.response.client_data_json)?;
        let refused = || Error::Unauthorized("passkey sign-in refused".into());
        let ceremony = self
            .store
            .take_ceremony(&challenge, self.clock.now())
            .await?
            .filter(|c| c.kind == "authenticate")
            .ok_or_else(|| {
                Error::Unauthorized("no sign-in in progress for this challenge".into())
            })?;
        let credential_id = URL_SAFE_NO_PAD.encode(assertion.get_credential_id());
        let row = self
            .store
            .passkey_by_credential(&credential_id)
            .await?
            .ok_or_else(refused)?;
        if ceremony.subject.as_ref().is_some_and(|s| *s != row.subject) {
            return Err(refused());
        }
        let mut passkey: Passkey = serde_json::from_str(&row.passkey).map_err(Error::internal)?;
        let result = if ceremony.subject.is_some() {
            let state: PasskeyAuthentication =
                serde_json::from_str(&ceremony.state).map_err(Error::internal)?;
            self.webauthn()?
                .finish_passkey_authentication(&assertion, &state)
        } else {
            let state: DiscoverableAuthentication =
                serde_json::from_str(&ceremony.state).map_err(Error::internal)?;
            self.webauthn()?
                .finish_discoverable_authentication_v2(&assertion, state, &passkey)
        }
        .map_err(|e| {
            tracing::info!(error = %e, "passkey assertion refused");
            refused()
        })?;
        if result.cred_id() != passkey.cred_id() {
            return Err(refused());
        }
        passkey.update_credential(&result);
        let stored = serde_json::to_string(&passkey).map_err(Error::internal)?;
        self.store
            .touch_passkey(&row.passkey_id, &stored, self.clock.now())
            .await?;
        Ok(row.subject)
    }

    /// The sign-in options for a handle without passkeys: shaped like a real subject's (one
    /// allowed credential), its ceremony kept like a real one, bound to no subject that can
    /// hold a passkey, so completing it is refused as any unknown credential is.
    async fn decoy_sign_in_begin(&self, handle: &str) -> Result<serde_json::Value, Error> {
        let (options, _) = self
            .webauthn()?
            .start_discoverable_authentication()
            .map_err(|e| Error::internal(format!("passkey sign-in: {e}")))?;
        let mut options = serde_json::to_value(&options).map_err(Error::internal)?;
        // Passkey sign-in options carry no mediation and no extensions.
        if let Some(o) = options.as_object_mut() {
            o.remove("mediation");
        }
        if let Some(o) = options.get_mut("publicKey").and_then(|p| p.as_object_mut()) {
            o.remove("extensions");
        }
        let id = hex::decode(self.hasher.hash(&format!("decoy passkey:{handle}")))
            .map_err(Error::internal)?;
        if let Some(public_key) = options.get_mut("publicKey") {
            public_key["allowCredentials"] =
                serde_json::json!([{"type": "public-key", "id": URL_SAFE_NO_PAD.encode(&id)}]);
        }
        let challenge = options
            .pointer("/publicKey/challenge")
            .and_then(|c| c.as_str())
            .ok_or_else(|| Error::internal("sign-in options without a challenge"))?
            .to_string();
        self.put_ceremony(
            &challenge,
            Some(&format!("none:{handle}")),
            "authenticate",
            &serde_json::Value::Null,
        )
        .await?;
        Ok(options)
    }

    async fn put_ceremony(
        &self,
        challenge: &str,
        subject: Option<&str>,
        kind: &str,
        state: &serde_json::Value,
    ) -> Result<(), Error> {
        self.store
            .put_ceremony(&Ceremony {
                ceremony_id: challenge.to_string(),
                subject: subject.map(str::to_string),
                kind: kind.into(),
                state: state.to_string(),
                expires_at: self.clock.now() + CEREMONY_TTL,
            })
            .await
    }

    // ----- pending console sign-in -----

    /// After a key passed the console's first step: an opaque value for an HttpOnly
    /// cookie naming the subject until its second factor (five minutes).
    pub async fn start_pending(&self, subject: &str) -> Result<String, Error> {
        let value = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 24]>());
        let id = self.hasher.hash(&format!("pending:{value}"));
        self.put_ceremony(&id, Some(subject), "pending", &serde_json::Value::Null)
            .await?;
        Ok(value)
    }

    /// The subject a pending sign-in cookie names, if it is still open.
    pub async fn pending_subject(&self, value: &str) -> Result<Option<String>, Error> {
        let id = self.hasher.hash(&format!("pending:{value}"));
        let Some(ceremony) = self.store.take_ceremony(&id, self.clock.now()).await? else {
            return Ok(None);
        };
        if ceremony.kind != "pending" {
            return Ok(None);
        }
        // Read, not spent: a wrong code may be retried within the budget.
        self.store.put_ceremony(&ceremony).await?;
        Ok(ceremony.subject)
    }

    /// Closes a pending sign-in (it succeeded).
    pub async fn end_pending(&self, value: &str) -> Result<(), Error> {
        let id = self.hasher.hash(&format!("pending:{value}"));
        self.store.take_ceremony(&id, self.clock.now()).await?;
        Ok(())
    }

    // ----- seed encryption -----

    fn seal(&self, seed: &[u8]) -> Result<String, Error> {
        let nonce_bytes: [u8; NONCE_LEN] = rand::random();
        let mut sealed = seed.to_vec();
        self.seed_key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce_bytes),
                Aad::empty(),
                &mut sealed,
            )
            .map_err(|_| Error::internal("sealing a TOTP seed failed"))?;
        Ok(format!(
            "{}.{}",
            STANDARD.encode(nonce_bytes),
            STANDARD.encode(sealed)
        ))
    }

    fn open(&self, stored: &str) -> Result<Vec<u8>, Error> {
        let bad = || Error::internal("a stored TOTP seed does not decrypt");
        let (nonce, sealed) = stored.split_once('.').ok_or_else(bad)?;
        let nonce: [u8; NONCE_LEN] = STANDARD
            .decode(nonce)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or_else(bad)?;
        let mut sealed = STANDARD.decode(sealed).map_err(|_| bad())?;
        let plain = self
            .seed_key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::empty(),
                &mut sealed,
            )
            .map_err(|_| bad())?;
        Ok(plain.to_vec())
    }
}

fn locked(until: DateTime<Utc>, now: DateTime<Utc>) -> Error {
    Error::RateLimited {
        retry_after_secs: u64::try_from((until - now).num_seconds()).unwrap_or(1),
    }
}

/// The WebAuthn user id of a subject: a user's own uuid, or one derived from a key id.
pub fn user_uuid(subject: &str) -> Uuid {
    if let Some(id) = subject.strip_prefix("user:")
        && let Ok(uuid) = Uuid::parse_str(id)
    {
        return uuid;
    }
    let digest = <sha2::Sha256 as sha2::Digest>::digest(subject.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// The `challenge` of a ceremony's clientDataJSON.
fn challenge_of(client_data_json: &[u8]) -> Result<String, Error> {
    let data: serde_json::Value = serde_json::from_slice(client_data_json)
        .map_err(|_| Error::bad_request("clientDataJSON is not JSON"))?;
    data["challenge"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| Error::bad_request("clientDataJSON has no challenge"))
}

/// HOTP (RFC 4226) of `counter` with `digits` digits: RFC 6238's TOTP with a one-second
/// step is HOTP of the unix time, so `counter` goes in as the time.
pub fn hotp(seed: &[u8], counter: u64, digits: u32) -> String {
    totp_lite::totp_custom::<totp_lite::Sha1>(1, digits, seed, counter)
}

/// The TOTP code of the step holding unix time `at`.
pub fn totp_at(seed: &[u8], at: i64) -> String {
    totp_lite::totp_custom::<totp_lite::Sha1>(
        TOTP_STEP_SECS as u64,
        TOTP_DIGITS,
        seed,
        u64::try_from(at).unwrap_or(0),
    )
}

/// The step (current, or one either side for clock drift) whose code is `code`, compared in
/// constant time.
fn matching_step(seed: &[u8], code: &str, now: i64) -> Option<i64> {
    let current = now.div_euclid(TOTP_STEP_SECS);
    [current, current - 1, current + 1]
        .into_iter()
        .find(|&step| {
            let expected = totp_at(seed, step * TOTP_STEP_SECS);
            subtle::ConstantTimeEq::ct_eq(expected.as_bytes(), code.as_bytes()).into()
        })
}

/// RFC 4648 base32, no padding (what authenticator apps read).
pub fn base32(bytes: &[u8]) -> String {
    data_encoding::BASE32_NOPAD.encode(bytes)
}

fn url_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn qr_svg(text: &str) -> Result<String, Error> {
    let code = qrcode::QrCode::new(text.as_bytes()).map_err(Error::internal)?;
    Ok(code
        .render::<qrcode::render::svg::Color>()
        .min_dimensions(200, 200)
        .build())
}

fn recovery_code() -> String {
    let mut code = String::with_capacity(14);
    for i in 0..12 {
        if i > 0 && i % 4 == 0 {
            code.push('-');
        }
        let pick = usize::from(rand::random::<u8>()) % RECOVERY_ALPHABET.len();
        code.push(char::from(RECOVERY_ALPHABET[pick]));
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6238 appendix B, SHA-1 rows (8 digits).
    #[test]
    fn rfc6238_test_vectors() {
        let seed = b"12345678901234567890";
        for (time, expected) in [
            (59_i64, "94287082"),
            (1_111_111_109, "07081804"),
            (1_111_111_111, "14050471"),
            (1_234_567_890, "89005924"),
            (2_000_000_000, "69279037"),
            (20_000_000_000, "65353130"),
        ] {
            let step = u64::try_from(time / TOTP_STEP_SECS).unwrap();
            assert_eq!(hotp(seed, step, 8), expected, "T = {time}");
        }
        // Six digits are the low six of the same value.
        assert_eq!(totp_at(seed, 59), "287082");
    }

    #[test]
    fn codes_of_the_neighbouring_steps_match_and_others_do_not() {
        let seed = b"12345678901234567890";
        let now = 1_111_111_111;
        assert_eq!(
            matching_step(seed, &totp_at(seed, now), now),
            Some(now / 30)
        );
        assert_eq!(
            matching_step(seed, &totp_at(seed, now - 30), now),
            Some(now / 30 - 1)
        );
        assert_eq!(matching_step(seed, &totp_at(seed, now - 90), now), None);
    }

    #[test]
    fn base32_matches_rfc4648() {
        assert_eq!(base32(b"foobar"), "MZXW6YTBOI");
        assert_eq!(
            base32(b"12345678901234567890"),
            "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"
        );
    }

    #[test]
    fn recovery_codes_have_three_groups_of_four() {
        let code = recovery_code();
        let groups: Vec<&str> = code.split('-').collect();
        assert_eq!(groups.len(), 3);
        assert!(groups.iter().all(|g| g.len() == 4));
    }
}
