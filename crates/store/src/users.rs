//! Console users and their second factors: users and their memberships in accounts,
//! one-time invites, sign-in sessions, TOTP, recovery codes, passkeys, WebAuthn ceremonies
//! in flight and the wrong-code budget.
//!
//! Second factors belong to a *subject*: `key:<key_id>` for a key that signs in to the
//! console, `user:<uuid>` for an invited user. Secrets are stored only as HMACs (invite and
//! recovery codes) or encrypted (TOTP seeds); this module never sees them in clear.

use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Duration, SubsecRound, Utc};
use model::{Role, TenantKind, Tier};
use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::{PgStore, Result, SqliteStore, db_error};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub user_id: String,
    pub display_name: String,
    pub contact: String,
    pub created_at: DateTime<Utc>,
    /// `active` or `disabled`.
    pub status: String,
}

/// A user's role in one account, with the account's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub team_id: String,
    pub role: Role,
    pub tier: Tier,
    pub tenant_kind: TenantKind,
    pub suspended: bool,
}

/// An invite as stored: the code only as its HMAC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInvite {
    pub invite_id: String,
    pub code_hash: String,
    pub team_id: String,
    pub role: Role,
    pub display_name: String,
    pub contact: String,
    /// Key id or `user:<uuid>` of the account admin who invited.
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// An invite not redeemed yet and not expired, as its account admins see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingInvite {
    pub invite_id: String,
    pub role: Role,
    pub display_name: String,
    pub contact: String,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// A sign-in session of the console or of an invited user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub session_id: String,
    /// Whose second factors count: `key:<key_id>` or `user:<uuid>`.
    pub subject: String,
    pub key_id: Option<String>,
    pub user_id: Option<String>,
    pub team_id: String,
    /// The session passed (or enrolled) a second factor.
    pub mfa: bool,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TotpRow {
    pub subject: String,
    /// The seed, encrypted by the caller.
    pub secret_enc: String,
    pub enabled: bool,
    /// The last time step accepted.
    pub last_step: i64,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasskeyRow {
    pub passkey_id: String,
    pub subject: String,
    /// The subject's WebAuthn user handle (base64url).
    pub user_handle: String,
    /// base64url of the WebAuthn credential id.
    pub credential_id: String,
    pub display_name: String,
    /// The serialised credential (public key, counter).
    pub passkey: String,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
}

/// A WebAuthn ceremony in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ceremony {
    pub ceremony_id: String,
    /// The subject registering; none for a discoverable sign-in.
    pub subject: Option<String>,
    /// `register` or `authenticate`.
    pub kind: String,
    /// The serialised ceremony state.
    pub state: String,
    pub expires_at: DateTime<Utc>,
}

/// The wrong-code budget: `budget` failures within `window` lock the subject for `lock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureBudget {
    pub budget: u32,
    pub window: Duration,
    pub lock: Duration,
}

#[async_trait]
pub trait UserStore: Send + Sync {
    async fn create_invite(&self, invite: &NewInvite) -> Result<()>;

    /// The account's invites neither redeemed nor expired at `now`, newest first.
    async fn pending_invites(
        &self,
        team_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<PendingInvite>>;

    /// Redeems an unexpired, unused invite: creates the user `new_user_id`, its membership
    /// and marks the code used, atomically. None when the code is unknown, used or expired.
    async fn redeem_invite(
        &self,
        code_hash: &str,
        new_user_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<(User, Membership)>>;

    async fn user(&self, user_id: &str) -> Result<Option<User>>;

    /// The user and every account they belong to (ordered by team id): what signing in,
    /// switching account and staff impersonation of a user need.
    async fn user_with_memberships(&self, user_id: &str)
    -> Result<Option<(User, Vec<Membership>)>>;

    async fn create_session(&self, session: &Session) -> Result<()>;
    async fn session(&self, session_id: &str) -> Result<Option<Session>>;
    async fn set_session_mfa(&self, session_id: &str) -> Result<()>;
    /// Forgets sessions that ended (expired or signed out) before `before`; how many.
    async fn prune_sessions(&self, before: DateTime<Utc>) -> Result<u64>;
    /// Signs out; false when unknown or already revoked.
    async fn revoke_session(&self, session_id: &str, now: DateTime<Utc>) -> Result<bool>;

    async fn totp(&self, subject: &str) -> Result<Option<TotpRow>>;
    /// Starts (or restarts) an enrolment: the seed is stored, not yet enabled. Refused
    /// (`Conflict`) when an enabled one exists.
    async fn put_pending_totp(&self, row: &TotpRow) -> Result<()>;
    /// Accepts time step `step` once: true when it is newer than the last accepted step (and
    /// records it), false for a replay. Enables a pending enrolment when `enable`.
    async fn accept_totp_step(&self, subject: &str, step: i64, enable: bool) -> Result<bool>;
    async fn delete_totp(&self, subject: &str) -> Result<bool>;

    /// Replaces the subject's recovery codes by these (HMACs).
    async fn replace_recovery_codes(&self, subject: &str, hashes: &[String]) -> Result<()>;
    /// Uses a code once: the unused codes left, or None when it is not an unused code.
    async fn use_recovery_code(
        &self,
        subject: &str,
        hash: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<u64>>;
    async fn recovery_codes_left(&self, subject: &str) -> Result<u64>;

    async fn add_passkey(&self, row: &PasskeyRow) -> Result<()>;
    async fn passkeys(&self, subject: &str) -> Result<Vec<PasskeyRow>>;
    async fn passkey_by_credential(&self, credential_id: &str) -> Result<Option<PasskeyRow>>;
    /// The subject whose passkeys carry this WebAuthn user handle.
    async fn subject_of_user_handle(&self, user_handle: &str) -> Result<Option<String>>;
    /// Stores the credential after a sign-in (its counter moved).
    async fn touch_passkey(
        &self,
        passkey_id: &str,
        passkey: &str,
        now: DateTime<Utc>,
    ) -> Result<()>;
    async fn delete_passkey(&self, subject: &str, passkey_id: &str) -> Result<bool>;

    async fn put_ceremony(&self, ceremony: &Ceremony) -> Result<()>;
    /// Takes a ceremony out (it is finished once): None when unknown or expired.
    async fn take_ceremony(
        &self,
        ceremony_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Ceremony>>;

    /// Hands every second factor of `from` to `to` (a reissued key keeps its holder's
    /// passkeys, TOTP and recovery codes), in one transaction.
    async fn move_second_factors(&self, from: &str, to: &str) -> Result<()>;

    /// When the subject is locked out after too many wrong codes, until when.
    async fn mfa_locked_until(
        &self,
        subject: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>>;
    /// Takes one guess from the subject's budget before a code is checked, in one atomic
    /// statement: the guess counts as a failure until [`UserStore::clear_mfa_failures`]
    /// (the code was right) takes it back. None when taken; when refused (locked out, or
    /// every guess of the window taken), until when. Concurrent callers on any replica
    /// never take more than `budget` guesses per window.
    async fn mfa_take_guess(
        &self,
        subject: &str,
        now: DateTime<Utc>,
        budget: FailureBudget,
    ) -> Result<Option<DateTime<Utc>>>;
    /// A guess taken turned out wrong: when the window's guesses are all spent this locks
    /// the subject out and returns the lock-out end, to exactly one caller.
    async fn mfa_settle_failure(
        &self,
        subject: &str,
        now: DateTime<Utc>,
        budget: FailureBudget,
    ) -> Result<Option<DateTime<Utc>>>;
    async fn clear_mfa_failures(&self, subject: &str) -> Result<()>;
}

fn parse_role(role: &str) -> Result<Role> {
    Role::from_str(role).map_err(|_| model::Error::internal(format!("stored role {role:?}")))
}

fn parse_tier(tier: &str) -> Result<Tier> {
    Tier::from_str(tier).map_err(|_| model::Error::internal(format!("stored tier {tier:?}")))
}

fn parse_kind(kind: &str) -> TenantKind {
    if kind == "platform" {
        TenantKind::Platform
    } else {
        TenantKind::Customer
    }
}

macro_rules! session_columns {
    () => {
        "session_id, subject, key_id, user_id, team_id, mfa, created_at, expires_at, revoked_at"
    };
}
macro_rules! passkey_columns {
    () => {
        "passkey_id, subject, user_handle, credential_id, display_name, passkey, created_at, \
         last_used_at"
    };
}

macro_rules! users_backend {
    ($store:ident, $row:ty) => {
        impl $store {
            fn user_of(r: &$row) -> Result<User> {
                Ok(User {
                    user_id: r.try_get("user_id").map_err(db_error)?,
                    display_name: r.try_get("display_name").map_err(db_error)?,
                    contact: r.try_get("contact").map_err(db_error)?,
                    created_at: r.try_get("created_at").map_err(db_error)?,
                    status: r.try_get("status").map_err(db_error)?,
                })
            }

            fn membership_of(r: &$row) -> Result<Membership> {
                Ok(Membership {
                    team_id: r.try_get("team_id").map_err(db_error)?,
                    role: parse_role(&r.try_get::<String, _>("role").map_err(db_error)?)?,
                    tier: parse_tier(&r.try_get::<String, _>("tier").map_err(db_error)?)?,
                    tenant_kind: parse_kind(&r.try_get::<String, _>("kind").map_err(db_error)?),
                    suspended: r.try_get("suspended").map_err(db_error)?,
                })
            }

            fn session_of(r: &$row) -> Result<Session> {
                Ok(Session {
                    session_id: r.try_get("session_id").map_err(db_error)?,
                    subject: r.try_get("subject").map_err(db_error)?,
                    key_id: r.try_get("key_id").map_err(db_error)?,
                    user_id: r.try_get("user_id").map_err(db_error)?,
                    team_id: r.try_get("team_id").map_err(db_error)?,
                    mfa: r.try_get("mfa").map_err(db_error)?,
                    created_at: r.try_get("created_at").map_err(db_error)?,
                    expires_at: r.try_get("expires_at").map_err(db_error)?,
                    revoked_at: r.try_get("revoked_at").map_err(db_error)?,
                })
            }

            fn passkey_of(r: &$row) -> Result<PasskeyRow> {
                Ok(PasskeyRow {
                    passkey_id: r.try_get("passkey_id").map_err(db_error)?,
                    subject: r.try_get("subject").map_err(db_error)?,
                    user_handle: r.try_get("user_handle").map_err(db_error)?,
                    credential_id: r.try_get("credential_id").map_err(db_error)?,
                    display_name: r.try_get("display_name").map_err(db_error)?,
                    passkey: r.try_get("passkey").map_err(db_error)?,
                    created_at: r.try_get("created_at").map_err(db_error)?,
                    last_used_at: r.try_get("last_used_at").map_err(db_error)?,
                })
            }
        }

        #[async_trait]
        impl UserStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn create_invite(&self, i: &NewInvite) -> Result<()> {
                sqlx::query(
                    "INSERT INTO invites (code_hash, invite_id, team_id, role, display_name, \
                     contact, created_by, created_at, expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(&i.code_hash)
                .bind(&i.invite_id)
                .bind(&i.team_id)
                .bind(i.role.as_str())
                .bind(&i.display_name)
                .bind(&i.contact)
                .bind(&i.created_by)
                .bind(i.created_at.trunc_subsecs(6))
                .bind(i.expires_at.trunc_subsecs(6))
                .execute(&self.pool)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn pending_invites(
                &self,
                team_id: &str,
                now: DateTime<Utc>,
            ) -> Result<Vec<PendingInvite>> {
                let rows = sqlx::query(
                    "SELECT invite_id, role, display_name, contact, created_by, created_at, \
                     expires_at FROM invites WHERE team_id = $1 AND redeemed_at IS NULL \
                     AND expires_at > $2 ORDER BY created_at DESC, invite_id",
                )
                .bind(team_id)
                .bind(now.trunc_subsecs(6))
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                rows.iter()
                    .map(|r| {
                        let role: String = r.try_get("role").map_err(db_error)?;
                        Ok(PendingInvite {
                            invite_id: r.try_get("invite_id").map_err(db_error)?,
                            role: parse_role(&role)?,
                            display_name: r.try_get("display_name").map_err(db_error)?,
                            contact: r.try_get("contact").map_err(db_error)?,
                            created_by: r.try_get("created_by").map_err(db_error)?,
                            created_at: r.try_get("created_at").map_err(db_error)?,
                            expires_at: r.try_get("expires_at").map_err(db_error)?,
                        })
                    })
                    .collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn redeem_invite(
                &self,
                code_hash: &str,
                new_user_id: &str,
                now: DateTime<Utc>,
            ) -> Result<Option<(User, Membership)>> {
                let now = now.trunc_subsecs(6);
                let mut tx = self.pool.begin().await.map_err(db_error)?;
                // The conditional update claims the code: of two concurrent redemptions
                // one changes the row, the other sees nothing to redeem.
                let claimed: Option<$row> = sqlx::query(
                    "UPDATE invites SET redeemed_at = $2, user_id = $3 \
                     WHERE code_hash = $1 AND redeemed_at IS NULL AND expires_at > $2 \
                     RETURNING team_id, role, display_name, contact",
                )
                .bind(code_hash)
                .bind(now)
                .bind(new_user_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?;
                let Some(claimed) = claimed else {
                    return Ok(None);
                };
                let team_id: String = claimed.try_get("team_id").map_err(db_error)?;
                let role: String = claimed.try_get("role").map_err(db_error)?;
                let user = User {
                    user_id: new_user_id.to_string(),
                    display_name: claimed.try_get("display_name").map_err(db_error)?,
                    contact: claimed.try_get("contact").map_err(db_error)?,
                    created_at: now,
                    status: "active".into(),
                };
                sqlx::query(
                    "INSERT INTO users (user_id, display_name, contact, created_at, status) \
                     VALUES ($1, $2, $3, $4, 'active')",
                )
                .bind(&user.user_id)
                .bind(&user.display_name)
                .bind(&user.contact)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
                sqlx::query(
                    "INSERT INTO memberships (user_id, team_id, role, created_at) \
                     VALUES ($1, $2, $3, $4)",
                )
                .bind(&user.user_id)
                .bind(&team_id)
                .bind(&role)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
                let row: $row = sqlx::query(
                    "SELECT m.team_id, m.role, t.tier, t.kind, t.suspended FROM memberships m \
                     JOIN tenants t ON t.team_id = m.team_id \
                     WHERE m.user_id = $1 AND m.team_id = $2",
                )
                .bind(&user.user_id)
                .bind(&team_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)?;
                let membership = Self::membership_of(&row)?;
                tx.commit().await.map_err(db_error)?;
                Ok(Some((user, membership)))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn user(&self, user_id: &str) -> Result<Option<User>> {
                let row: Option<$row> = sqlx::query(
                    "SELECT user_id, display_name, contact, created_at, status FROM users \
                     WHERE user_id = $1",
                )
                .bind(user_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
                row.as_ref().map(Self::user_of).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn user_with_memberships(
                &self,
                user_id: &str,
            ) -> Result<Option<(User, Vec<Membership>)>> {
                let Some(user) = self.user(user_id).await? else {
                    return Ok(None);
                };
                let rows: Vec<$row> = sqlx::query(
                    "SELECT m.team_id, m.role, t.tier, t.kind, t.suspended FROM memberships m \
                     JOIN tenants t ON t.team_id = m.team_id WHERE m.user_id = $1 \
                     ORDER BY m.team_id",
                )
                .bind(user_id)
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                let memberships = rows.iter().map(Self::membership_of).collect::<Result<_>>()?;
                Ok(Some((user, memberships)))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn create_session(&self, s: &Session) -> Result<()> {
                sqlx::query(
                    "INSERT INTO sessions (session_id, subject, key_id, user_id, team_id, mfa, \
                     created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(&s.session_id)
                .bind(&s.subject)
                .bind(s.key_id.as_deref())
                .bind(s.user_id.as_deref())
                .bind(&s.team_id)
                .bind(s.mfa)
                .bind(s.created_at.trunc_subsecs(6))
                .bind(s.expires_at.trunc_subsecs(6))
                .execute(&self.pool)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn session(&self, session_id: &str) -> Result<Option<Session>> {
                let row: Option<$row> = sqlx::query(concat!(
                    "SELECT ",
                    session_columns!(),
                    " FROM sessions WHERE session_id = $1"
                ))
                .bind(session_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
                row.as_ref().map(Self::session_of).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn set_session_mfa(&self, session_id: &str) -> Result<()> {
                sqlx::query("UPDATE sessions SET mfa = $2 WHERE session_id = $1")
                    .bind(session_id)
                    .bind(true)
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn prune_sessions(&self, before: DateTime<Utc>) -> Result<u64> {
                let done = sqlx::query(
                    "DELETE FROM sessions WHERE expires_at < $1 OR revoked_at < $1",
                )
                .bind(before.trunc_subsecs(6))
                .execute(&self.pool)
                .await
                .map_err(db_error)?;
                Ok(done.rows_affected())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn revoke_session(&self, session_id: &str, now: DateTime<Utc>) -> Result<bool> {
                let done = sqlx::query(
                    "UPDATE sessions SET revoked_at = $2 \
                     WHERE session_id = $1 AND revoked_at IS NULL",
                )
                .bind(session_id)
                .bind(now.trunc_subsecs(6))
                .execute(&self.pool)
                .await
                .map_err(db_error)?;
                Ok(done.rows_affected() > 0)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn totp(&self, subject: &str) -> Result<Option<TotpRow>> {
                let row: Option<$row> = sqlx::query(
                    "SELECT subject, secret_enc, enabled, last_step, created_at FROM mfa_totp \
                     WHERE subject = $1",
                )
                .bind(subject)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
                row.map(|r| {
                    Ok(TotpRow {
                        subject: r.try_get("subject").map_err(db_error)?,
                        secret_enc: r.try_get("secret_enc").map_err(db_error)?,
                        enabled: r.try_get("enabled").map_err(db_error)?,
                        last_step: r.try_get("last_step").map_err(db_error)?,
                        created_at: r.try_get("created_at").map_err(db_error)?,
                    })
                })
                .transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn put_pending_totp(&self, t: &TotpRow) -> Result<()> {
                let done = sqlx::query(
                    "INSERT INTO mfa_totp (subject, secret_enc, enabled, last_step, created_at) \
                     VALUES ($1, $2, $3, 0, $4) ON CONFLICT (subject) DO UPDATE SET \
                     secret_enc = excluded.secret_enc, last_step = 0, \
                     created_at = excluded.created_at WHERE mfa_totp.enabled = $3",
                )
                .bind(&t.subject)
                .bind(&t.secret_enc)
                .bind(false)
                .bind(t.created_at.trunc_subsecs(6))
                .execute(&self.pool)
                .await
                .map_err(db_error)?;
                if done.rows_affected() == 0 {
                    return Err(model::Error::Conflict(
                        "TOTP is already enabled; disable it with a current code first".into(),
                    ));
                }
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn accept_totp_step(&self, subject: &str, step: i64, enable: bool) -> Result<bool> {
                let done = sqlx::query(
                    "UPDATE mfa_totp SET last_step = $2, enabled = (enabled OR $3) \
                     WHERE subject = $1 AND last_step < $2",
                )
                .bind(subject)
                .bind(step)
                .bind(enable)
                .execute(&self.pool)
                .await
                .map_err(db_error)?;
                Ok(done.rows_affected() > 0)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn delete_totp(&self, subject: &str) -> Result<bool> {
                let done = sqlx::query("DELETE FROM mfa_totp WHERE subject = $1")
                    .bind(subject)
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() > 0)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn replace_recovery_codes(&self, subject: &str, hashes: &[String]) -> Result<()> {
                let mut tx = self.pool.begin().await.map_err(db_error)?;
                sqlx::query("DELETE FROM mfa_recovery_codes WHERE subject = $1")
                    .bind(subject)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                for hash in hashes {
                    sqlx::query(
                        "INSERT INTO mfa_recovery_codes (subject, code_hash) VALUES ($1, $2)",
                    )
                    .bind(subject)
                    .bind(hash)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                }
                tx.commit().await.map_err(db_error)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn use_recovery_code(
                &self,
                subject: &str,
                hash: &str,
                now: DateTime<Utc>,
            ) -> Result<Option<u64>> {
                let done = sqlx::query(
                    "UPDATE mfa_recovery_codes SET used_at = $3 \
                     WHERE subject = $1 AND code_hash = $2 AND used_at IS NULL",
                )
                .bind(subject)
                .bind(hash)
                .bind(now.trunc_subsecs(6))
                .execute(&self.pool)
                .await
                .map_err(db_error)?;
                if done.rows_affected() == 0 {
                    return Ok(None);
                }
                self.recovery_codes_left(subject).await.map(Some)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn recovery_codes_left(&self, subject: &str) -> Result<u64> {
                let left: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM mfa_recovery_codes WHERE subject = $1 AND used_at IS NULL",
                )
                .bind(subject)
                .fetch_one(&self.pool)
                .await
                .map_err(db_error)?;
                Ok(u64::try_from(left).unwrap_or(0))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn add_passkey(&self, p: &PasskeyRow) -> Result<()> {
                sqlx::query(
                    "INSERT INTO mfa_passkeys (passkey_id, subject, user_handle, credential_id, \
                     display_name, passkey, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(&p.passkey_id)
                .bind(&p.subject)
                .bind(&p.user_handle)
                .bind(&p.credential_id)
                .bind(&p.display_name)
                .bind(&p.passkey)
                .bind(p.created_at.trunc_subsecs(6))
                .execute(&self.pool)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn passkeys(&self, subject: &str) -> Result<Vec<PasskeyRow>> {
                let rows: Vec<$row> = sqlx::query(concat!(
                    "SELECT ",
                    passkey_columns!(),
                    " FROM mfa_passkeys WHERE subject = $1 ORDER BY created_at, passkey_id"
                ))
                .bind(subject)
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                rows.iter().map(Self::passkey_of).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn passkey_by_credential(&self, credential_id: &str) -> Result<Option<PasskeyRow>> {
                let row: Option<$row> = sqlx::query(concat!(
                    "SELECT ",
                    passkey_columns!(),
                    " FROM mfa_passkeys WHERE credential_id = $1"
                ))
                .bind(credential_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
                row.as_ref().map(Self::passkey_of).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn subject_of_user_handle(&self, user_handle: &str) -> Result<Option<String>> {
                sqlx::query_scalar("SELECT subject FROM mfa_passkeys WHERE user_handle = $1 LIMIT 1")
                    .bind(user_handle)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn touch_passkey(
                &self,
                passkey_id: &str,
                passkey: &str,
                now: DateTime<Utc>,
            ) -> Result<()> {
                sqlx::query(
                    "UPDATE mfa_passkeys SET passkey = $2, last_used_at = $3 WHERE passkey_id = $1",
                )
                .bind(passkey_id)
                .bind(passkey)
                .bind(now.trunc_subsecs(6))
                .execute(&self.pool)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn delete_passkey(&self, subject: &str, passkey_id: &str) -> Result<bool> {
                let done =
                    sqlx::query("DELETE FROM mfa_passkeys WHERE subject = $1 AND passkey_id = $2")
                        .bind(subject)
                        .bind(passkey_id)
                        .execute(&self.pool)
                        .await
                        .map_err(db_error)?;
                Ok(done.rows_affected() > 0)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn put_ceremony(&self, c: &Ceremony) -> Result<()> {
                sqlx::query(
                    "INSERT INTO mfa_ceremonies (ceremony_id, subject, kind, state, expires_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(&c.ceremony_id)
                .bind(c.subject.as_deref())
                .bind(&c.kind)
                .bind(&c.state)
                .bind(c.expires_at.trunc_subsecs(6))
                .execute(&self.pool)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn take_ceremony(
                &self,
                ceremony_id: &str,
                now: DateTime<Utc>,
            ) -> Result<Option<Ceremony>> {
                // Expired ceremonies of everyone go at the same time.
                sqlx::query("DELETE FROM mfa_ceremonies WHERE expires_at <= $1")
                    .bind(now.trunc_subsecs(6))
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                let row: Option<$row> = sqlx::query(
                    "DELETE FROM mfa_ceremonies WHERE ceremony_id = $1 \
                     RETURNING ceremony_id, subject, kind, state, expires_at",
                )
                .bind(ceremony_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
                row.map(|r| {
                    Ok(Ceremony {
                        ceremony_id: r.try_get("ceremony_id").map_err(db_error)?,
                        subject: r.try_get("subject").map_err(db_error)?,
                        kind: r.try_get("kind").map_err(db_error)?,
                        state: r.try_get("state").map_err(db_error)?,
                        expires_at: r.try_get("expires_at").map_err(db_error)?,
                    })
                })
                .transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn move_second_factors(&self, from: &str, to: &str) -> Result<()> {
                let mut tx = self.pool.begin().await.map_err(db_error)?;
                for table in [
                    "UPDATE mfa_totp SET subject = $2 WHERE subject = $1",
                    "UPDATE mfa_recovery_codes SET subject = $2 WHERE subject = $1",
                    "UPDATE mfa_passkeys SET subject = $2 WHERE subject = $1",
                ] {
                    sqlx::query(table)
                        .bind(from)
                        .bind(to)
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                }
                tx.commit().await.map_err(db_error)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn mfa_locked_until(
                &self,
                subject: &str,
                now: DateTime<Utc>,
            ) -> Result<Option<DateTime<Utc>>> {
                let until: Option<Option<DateTime<Utc>>> = sqlx::query_scalar(
                    "SELECT locked_until FROM mfa_failures WHERE subject = $1",
                )
                .bind(subject)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
                Ok(until.flatten().filter(|until| *until > now))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn mfa_take_guess(
                &self,
                subject: &str,
                now: DateTime<Utc>,
                budget: FailureBudget,
            ) -> Result<Option<DateTime<Utc>>> {
                let now = now.trunc_subsecs(6);
                // One statement: the row is locked (PostgreSQL) or the database written
                // (SQLite, waiting its busy timeout) while the count is read and moved, so
                // no two callers take the same guess.
                let taken: Option<i64> = sqlx::query_scalar(
                    "INSERT INTO mfa_failures (subject, failures, window_start, locked_until) \
                     VALUES ($1, 1, $2, NULL) ON CONFLICT (subject) DO UPDATE SET \
                     failures = CASE WHEN mfa_failures.window_start <= $3 THEN 1 \
                                ELSE mfa_failures.failures + 1 END, \
                     window_start = CASE WHEN mfa_failures.window_start <= $3 THEN $2 \
                                    ELSE mfa_failures.window_start END \
                     WHERE (mfa_failures.locked_until IS NULL OR mfa_failures.locked_until <= $2) \
                     AND (mfa_failures.window_start <= $3 OR mfa_failures.failures < $4) \
                     RETURNING failures",
                )
                .bind(subject)
                .bind(now)
                .bind(now - budget.window)
                .bind(i64::from(budget.budget))
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
                if taken.is_some() {
                    return Ok(None);
                }
                let row: Option<$row> = sqlx::query(
                    "SELECT window_start, locked_until FROM mfa_failures WHERE subject = $1",
                )
                .bind(subject)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
                let mut until = now + Duration::seconds(1);
                if let Some(r) = row {
                    let start: DateTime<Utc> = r.try_get("window_start").map_err(db_error)?;
                    let locked: Option<DateTime<Utc>> =
                        r.try_get("locked_until").map_err(db_error)?;
                    until = until.max(locked.unwrap_or(start + budget.window));
                }
                Ok(Some(until))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn mfa_settle_failure(
                &self,
                subject: &str,
                now: DateTime<Utc>,
                budget: FailureBudget,
            ) -> Result<Option<DateTime<Utc>>> {
                let now = now.trunc_subsecs(6);
                let until = now + budget.lock;
                // A lock-out starts a fresh window once it ends.
                let locked = sqlx::query_scalar::<_, Option<DateTime<Utc>>>(
                    "UPDATE mfa_failures SET failures = 0, window_start = $2, locked_until = $2 \
                     WHERE subject = $1 AND failures >= $3 AND window_start > $4 \
                     AND (locked_until IS NULL OR locked_until <= $5) \
                     RETURNING locked_until",
                )
                .bind(subject)
                .bind(until)
                .bind(i64::from(budget.budget))
                .bind(now - budget.window)
                .bind(now)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?
                .flatten();
                Ok(locked)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn clear_mfa_failures(&self, subject: &str) -> Result<()> {
                sqlx::query("DELETE FROM mfa_failures WHERE subject = $1")
                    .bind(subject)
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }
        }
    };
}

users_backend!(SqliteStore, SqliteRow);
users_backend!(PgStore, PgRow);
