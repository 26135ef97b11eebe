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
            let tenant = self
                .store()
                .tenant(&team)
                .await?
                .ok_or_else(|| Error::NotFound(format!("no account {team:?}")))?;
            actor.can_give(role, &team, tenant.kind)?;
            create_invite(
                self.store(),
                self.credentials().hasher(),
                InviteRequest {
                    team_id: &team,
                    role,
                    display_name,
                    contact,
                    created_by: &actor.key_id,
                },
                self.now(),
            )
            .await
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

/// Who is invited where, by whom.
pub struct InviteRequest<'a> {
    pub team_id: &'a str,
    pub role: Role,
    pub display_name: &'a str,
    /// How the inviter will hand the code over (an e-mail address, a chat handle): shown
    /// to account admins beside the pending invite; the service sends nothing.
    pub contact: &'a str,
    /// The inviting key's id, or `command-line`.
    pub created_by: &'a str,
}

/// Stores an invite (its code's HMAC only) and returns the code, shown this once. The
/// caller has checked that the inviter may give the role in that account.
pub async fn create_invite(
    store: &dyn store::Store,
    hasher: &crate::KeyHasher,
    request: InviteRequest<'_>,
    now: DateTime<Utc>,
) -> Result<NewInviteCode, Error> {
    check_text("display_name", request.display_name)?;
    check_text("contact", request.contact)?;
    let code = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 24]>());
    let invite = NewInvite {
        invite_id: format!("inv_{}", hex::encode(rand::random::<[u8; 8]>())),
        code_hash: invite_hash(hasher, &code),
        team_id: request.team_id.to_string(),
        role: request.role,
        display_name: request.display_name.trim().to_string(),
        contact: request.contact.trim().to_string(),
        created_by: request.created_by.to_string(),
        created_at: now,
        expires_at: now + INVITE_TTL,
    };
    store.create_invite(&invite).await?;
    Ok(NewInviteCode {
        invite_id: invite.invite_id,
        code,
        team_id: invite.team_id,
        role: invite.role,
        expires_at: invite.expires_at,
    })
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
