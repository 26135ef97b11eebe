//! Console users: invites by account admins, redeeming one, switching account.
//!
//! An invite code is shown once; only its HMAC is stored. Redeeming it creates the user
//! with the invited role in the inviting account and opens a session without a second
//! factor: until the user enrols one, intel and admin routes answer `MFA_REQUIRED`.

use base64::Engine;
use chrono::{DateTime, Duration, Utc};
use model::{Error, Role};
use store::users::NewInvite;

use crate::Principal;
use crate::admin::Admin;

/// How long an invite stays redeemable.
pub const INVITE_TTL: Duration = Duration::days(7);

/// A new invite: `code` is shown this once.
#[derive(Debug, Clone)]
pub struct NewInviteCode {
    pub invite_id: String,
    pub code: String,
    pub team_id: String,
    pub role: Role,
    pub expires_at: DateTime<Utc>,
}

impl Admin {
    /// Invites a user into the caller's account with `role` (one the caller may give).
    pub async fn invite(
        &self,
        actor: &Principal,
        role: &str,
        display_name: &str,
        contact: &str,
    ) -> Result<NewInviteCode, Error> {
        let team = actor.team_id.clone();
        self.audited(actor, "user.invite", &team, async {
            let role: Role = role.parse()?;
            if role.is_platform() {
                return Err(Error::Forbidden(
                    "users hold customer roles only; platform roles are for staff keys".into(),
                ));
            }
            check_text("display_name", display_name)?;
            check_text("contact", contact)?;
            let tenant = self
                .store()
                .tenant(&team)
                .await?
                .ok_or_else(|| Error::NotFound(format!("no account {team:?}")))?;
            actor.can_give(role, &team, tenant.kind)?;
            let code =
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 24]>());
            let now = self.now();
            let invite = NewInvite {
                invite_id: format!("inv_{}", hex::encode(rand::random::<[u8; 8]>())),
                code_hash: invite_hash(self.credentials().hasher(), &code),
                team_id: team.clone(),
                role,
                display_name: display_name.trim().to_string(),
                contact: contact.trim().to_string(),
                created_by: actor.key_id.clone(),
                created_at: now,
                expires_at: now + INVITE_TTL,
            };
            self.store().create_invite(&invite).await?;
            Ok(NewInviteCode {
                invite_id: invite.invite_id,
                code,
                team_id: team.clone(),
                role,
                expires_at: invite.expires_at,
            })
        })
        .await
    }

    /// Redeems an invite code: the new user's session token (no second factor yet) and
    /// its expiry.
    pub async fn redeem_invite(&self, code: &str) -> Result<(String, DateTime<Utc>), Error> {
        let code = code.trim();
        if code.is_empty() || code.len() > 128 {
            return Err(Error::bad_request(
                "code must be the invite code you were given",
            ));
        }
        let hash = invite_hash(self.credentials().hasher(), code);
        let user_id = uuid::Uuid::new_v4().to_string();
        let (user, membership) = self
            .store()
            .redeem_invite(&hash, &user_id, self.now())
            .await?
            .ok_or_else(|| {
                Error::Unauthorized("invalid, expired or already used invite code".into())
            })?;
        let entry = store::admin::AuditEntry {
            at: self.now(),
            actor: crate::credentials::user_key_id(&user.user_id),
            team_id: membership.team_id.clone(),
            action: "user.join".into(),
            target: user.user_id.clone(),
            outcome: "ok".into(),
            detail: format!("role {}", membership.role),
        };
        if let Err(e) = self.store().append_audit(&entry).await {
            tracing::error!(error = %e, "could not audit an invite redemption");
        }
        self.credentials()
            .user_session(&user.user_id, Some(&membership.team_id), false)
            .await
    }

    /// Moves a signed-in user to another of their accounts: a new session there (with the
    /// same second-factor state); the old one is signed out.
    pub async fn switch_account(
        &self,
        actor: &Principal,
        account_id: &str,
    ) -> Result<(String, DateTime<Utc>), Error> {
        let Some(session) = &actor.session else {
            return Err(Error::bad_request(
                "only a signed-in user switches account; a key belongs to one account",
            ));
        };
        let Some(user_id) = &session.user_id else {
            return Err(Error::bad_request(
                "only a signed-in user switches account; a key belongs to one account",
            ));
        };
        let issued = self
            .credentials()
            .user_session(user_id, Some(account_id), session.mfa)
            .await?;
        self.credentials().sign_out(&session.session_id).await?;
        Ok(issued)
    }
}

fn invite_hash(hasher: &crate::KeyHasher, code: &str) -> String {
    hasher.hash(&format!("invite:{code}"))
}

fn check_text(field: &str, value: &str) -> Result<(), Error> {
    let value = value.trim();
    if value.is_empty() || value.chars().count() > 200 || value.chars().any(char::is_control) {
        return Err(Error::bad_request(format!(
            "{field} must be 1-200 characters without control characters"
        )));
    }
    Ok(())
}
