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
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::backend::Columns;
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

const CREATE_INVITE: &str = "INSERT INTO invites (code_hash, invite_id, team_id, role, \
     display_name, contact, created_by, created_at, expires_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
const PENDING_INVITES: &str = "SELECT invite_id, role, display_name, contact, created_by, \
     created_at, expires_at FROM invites WHERE team_id = $1 AND redeemed_at IS NULL \
     AND expires_at > $2 ORDER BY created_at DESC, invite_id";
/// The conditional update claims the code: of two concurrent redemptions one changes the
/// row, the other sees nothing to redeem.
const CLAIM_INVITE: &str = "UPDATE invites SET redeemed_at = $2, user_id = $3 \
     WHERE code_hash = $1 AND redeemed_at IS NULL AND expires_at > $2 \
     RETURNING team_id, role, display_name, contact";
const INSERT_USER: &str = "INSERT INTO users (user_id, display_name, contact, created_at, status) \
     VALUES ($1, $2, $3, $4, 'active')";
const INSERT_MEMBERSHIP: &str = "INSERT INTO memberships (user_id, team_id, role, created_at) \
     VALUES ($1, $2, $3, $4)";
const MEMBERSHIP: &str = "SELECT m.team_id, m.role, t.tier, t.kind, t.suspended FROM memberships m \
     JOIN tenants t ON t.team_id = m.team_id \
     WHERE m.user_id = $1 AND m.team_id = $2";
const USER: &str = "SELECT user_id, display_name, contact, created_at, status FROM users \
     WHERE user_id = $1";
const MEMBERSHIPS: &str = "SELECT m.team_id, m.role, t.tier, t.kind, t.suspended FROM memberships m \
     JOIN tenants t ON t.team_id = m.team_id WHERE m.user_id = $1 \
     ORDER BY m.team_id";
const CREATE_SESSION: &str = "INSERT INTO sessions (session_id, subject, key_id, user_id, \
     team_id, mfa, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
const SESSION: &str = concat!(
    "SELECT ",
    session_columns!(),
    " FROM sessions WHERE session_id = $1"
);
const SET_SESSION_MFA: &str = "UPDATE sessions SET mfa = $2 WHERE session_id = $1";
const PRUNE_SESSIONS: &str = "DELETE FROM sessions WHERE expires_at < $1 OR revoked_at < $1";
const REVOKE_SESSION: &str = "UPDATE sessions SET revoked_at = $2 \
     WHERE session_id = $1 AND revoked_at IS NULL";
const TOTP: &str = "SELECT subject, secret_enc, enabled, last_step, created_at FROM mfa_totp \
     WHERE subject = $1";
/// Replaces a pending (not enabled: `$3` false) secret, never an enabled one.
const PUT_PENDING_TOTP: &str = "INSERT INTO mfa_totp (subject, secret_enc, enabled, last_step, \
     created_at) VALUES ($1, $2, $3, 0, $4) ON CONFLICT (subject) DO UPDATE SET \
     secret_enc = excluded.secret_enc, last_step = 0, \
     created_at = excluded.created_at WHERE mfa_totp.enabled = $3";
const ACCEPT_TOTP_STEP: &str = "UPDATE mfa_totp SET last_step = $2, enabled = (enabled OR $3) \
     WHERE subject = $1 AND last_step < $2";
const DELETE_TOTP: &str = "DELETE FROM mfa_totp WHERE subject = $1";
const DELETE_RECOVERY_CODES: &str = "DELETE FROM mfa_recovery_codes WHERE subject = $1";
const INSERT_RECOVERY_CODE: &str =
    "INSERT INTO mfa_recovery_codes (subject, code_hash) VALUES ($1, $2)";
const USE_RECOVERY_CODE: &str = "UPDATE mfa_recovery_codes SET used_at = $3 \
     WHERE subject = $1 AND code_hash = $2 AND used_at IS NULL";
const RECOVERY_CODES_LEFT: &str =
    "SELECT COUNT(*) FROM mfa_recovery_codes WHERE subject = $1 AND used_at IS NULL";
const ADD_PASSKEY: &str = "INSERT INTO mfa_passkeys (passkey_id, subject, user_handle, \
     credential_id, display_name, passkey, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";
const PASSKEYS: &str = concat!(
    "SELECT ",
    passkey_columns!(),
    " FROM mfa_passkeys WHERE subject = $1 ORDER BY created_at, passkey_id"
);
const PASSKEY_BY_CREDENTIAL: &str = concat!(
    "SELECT ",
    passkey_columns!(),
    " FROM mfa_passkeys WHERE credential_id = $1"
);
const SUBJECT_OF_USER_HANDLE: &str =
    "SELECT subject FROM mfa_passkeys WHERE user_handle = $1 LIMIT 1";
const TOUCH_PASSKEY: &str =
    "UPDATE mfa_passkeys SET passkey = $2, last_used_at = $3 WHERE passkey_id = $1";
const DELETE_PASSKEY: &str = "DELETE FROM mfa_passkeys WHERE subject = $1 AND passkey_id = $2";
const PUT_CEREMONY: &str = "INSERT INTO mfa_ceremonies (ceremony_id, subject, kind, state, \
     expires_at) VALUES ($1, $2, $3, $4, $5)";
const DELETE_EXPIRED_CEREMONIES: &str = "DELETE FROM mfa_ceremonies WHERE expires_at <= $1";
const TAKE_CEREMONY: &str = "DELETE FROM mfa_ceremonies WHERE ceremony_id = $1 \
     RETURNING ceremony_id, subject, kind, state, expires_at";
/// Every second factor of subject `$1` moves to `$2`.
const MOVE_SECOND_FACTORS: [&str; 3] = [
    "UPDATE mfa_totp SET subject = $2 WHERE subject = $1",
    "UPDATE mfa_recovery_codes SET subject = $2 WHERE subject = $1",
    "UPDATE mfa_passkeys SET subject = $2 WHERE subject = $1",
];
const MFA_LOCKED_UNTIL: &str = "SELECT locked_until FROM mfa_failures WHERE subject = $1";
/// One statement: the row is locked (PostgreSQL) or the database written (SQLite, waiting
/// its busy timeout) while the count is read and moved, so no two callers take the same
/// guess. `$2` now, `$3` the start of the current window, `$4` the budget.
const MFA_TAKE_GUESS: &str = "INSERT INTO mfa_failures (subject, failures, window_start, \
     locked_until) \
     VALUES ($1, 1, $2, NULL) ON CONFLICT (subject) DO UPDATE SET \
     failures = CASE WHEN mfa_failures.window_start <= $3 THEN 1 \
                ELSE mfa_failures.failures + 1 END, \
     window_start = CASE WHEN mfa_failures.window_start <= $3 THEN $2 \
                    ELSE mfa_failures.window_start END \
     WHERE (mfa_failures.locked_until IS NULL OR mfa_failures.locked_until <= $2) \
     AND (mfa_failures.window_start <= $3 OR mfa_failures.failures < $4) \
     RETURNING failures";
const MFA_WINDOW: &str = "SELECT window_start, locked_until FROM mfa_failures WHERE subject = $1";
/// A lock-out starts a fresh window once it ends.
const MFA_SETTLE_FAILURE: &str = "UPDATE mfa_failures SET failures = 0, window_start = $2, \
     locked_until = $2 \
     WHERE subject = $1 AND failures >= $3 AND window_start > $4 \
     AND (locked_until IS NULL OR locked_until <= $5) \
     RETURNING locked_until";
const CLEAR_MFA_FAILURES: &str = "DELETE FROM mfa_failures WHERE subject = $1";

fn user_of(r: &impl Columns) -> Result<User> {
    Ok(User {
        user_id: r.text("user_id")?,
        display_name: r.text("display_name")?,
        contact: r.text("contact")?,
        created_at: r.time("created_at")?,
        status: r.text("status")?,
    })
}

fn membership_of(r: &impl Columns) -> Result<Membership> {
    Ok(Membership {
        team_id: r.text("team_id")?,
        role: parse_role(&r.text("role")?)?,
        tier: parse_tier(&r.text("tier")?)?,
        tenant_kind: parse_kind(&r.text("kind")?),
        suspended: r.flag("suspended")?,
    })
}

fn session_of(r: &impl Columns) -> Result<Session> {
    Ok(Session {
        session_id: r.text("session_id")?,
        subject: r.text("subject")?,
        key_id: r.opt_text("key_id")?,
        user_id: r.opt_text("user_id")?,
        team_id: r.text("team_id")?,
        mfa: r.flag("mfa")?,
        created_at: r.time("created_at")?,
        expires_at: r.time("expires_at")?,
        revoked_at: r.opt_time("revoked_at")?,
    })
}

fn passkey_of(r: &impl Columns) -> Result<PasskeyRow> {
    Ok(PasskeyRow {
        passkey_id: r.text("passkey_id")?,
        subject: r.text("subject")?,
        user_handle: r.text("user_handle")?,
        credential_id: r.text("credential_id")?,
        display_name: r.text("display_name")?,
        passkey: r.text("passkey")?,
        created_at: r.time("created_at")?,
        last_used_at: r.opt_time("last_used_at")?,
    })
}

fn invite_of(r: &impl Columns) -> Result<PendingInvite> {
    let role = r.text("role")?;
    Ok(PendingInvite {
        invite_id: r.text("invite_id")?,
        role: parse_role(&role)?,
        display_name: r.text("display_name")?,
        contact: r.text("contact")?,
        created_by: r.text("created_by")?,
        created_at: r.time("created_at")?,
        expires_at: r.time("expires_at")?,
    })
}

fn totp_of(r: &impl Columns) -> Result<TotpRow> {
    Ok(TotpRow {
        subject: r.text("subject")?,
        secret_enc: r.text("secret_enc")?,
        enabled: r.flag("enabled")?,
        last_step: r.int("last_step")?,
        created_at: r.time("created_at")?,
    })
}

fn ceremony_of(r: &impl Columns) -> Result<Ceremony> {
    Ok(Ceremony {
        ceremony_id: r.text("ceremony_id")?,
        subject: r.opt_text("subject")?,
        kind: r.text("kind")?,
        state: r.text("state")?,
        expires_at: r.time("expires_at")?,
    })
}

/// The user a redeemed invite (a `CLAIM_INVITE` row) creates, and the team and role it
/// grants.
fn invited_user(
    claimed: &impl Columns,
    user_id: &str,
    now: DateTime<Utc>,
) -> Result<(User, String, String)> {
    let team_id = claimed.text("team_id")?;
    let role = claimed.text("role")?;
    let user = User {
        user_id: user_id.to_string(),
        display_name: claimed.text("display_name")?,
        contact: claimed.text("contact")?,
        created_at: now,
        status: "active".into(),
    };
    Ok((user, team_id, role))
}

/// When a subject out of guesses may guess again, from its `MFA_WINDOW` row (if any): the
/// end of its lock-out or of its window, and never sooner than a second from now.
fn next_guess_at(
    row: Option<&impl Columns>,
    now: DateTime<Utc>,
    budget: FailureBudget,
) -> Result<DateTime<Utc>> {
    let mut until = now + Duration::seconds(1);
    if let Some(r) = row {
        let start = r.time("window_start")?;
        let locked = r.opt_time("locked_until")?;
        until = until.max(locked.unwrap_or(start + budget.window));
    }
    Ok(until)
}

macro_rules! users_backend {
    ($store:ident, $row:ty) => {
        #[async_trait]
        impl UserStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn create_invite(&self, i: &NewInvite) -> Result<()> {
                sqlx::query(CREATE_INVITE)
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
                let rows: Vec<$row> = sqlx::query(PENDING_INVITES)
                    .bind(team_id)
                    .bind(now.trunc_subsecs(6))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(invite_of).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn redeem_invite(
                &self,
                code_hash: &str,
                new_user_id: &str,
                now: DateTime<Utc>,
            ) -> Result<Option<(User, Membership)>> {
                let now = now.trunc_subsecs(6);
                let mut tx = Self::write_tx(&self.pool).await?;
                let claimed: Option<$row> = sqlx::query(CLAIM_INVITE)
                    .bind(code_hash)
                    .bind(now)
                    .bind(new_user_id)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_error)?;
                let Some(claimed) = claimed else {
                    return Ok(None);
                };
                let (user, team_id, role) = invited_user(&claimed, new_user_id, now)?;
                sqlx::query(INSERT_USER)
                    .bind(&user.user_id)
                    .bind(&user.display_name)
                    .bind(&user.contact)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                sqlx::query(INSERT_MEMBERSHIP)
                    .bind(&user.user_id)
                    .bind(&team_id)
                    .bind(&role)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                let row: $row = sqlx::query(MEMBERSHIP)
                    .bind(&user.user_id)
                    .bind(&team_id)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db_error)?;
                let membership = membership_of(&row)?;
                tx.commit().await.map_err(db_error)?;
                Ok(Some((user, membership)))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn user(&self, user_id: &str) -> Result<Option<User>> {
                let row: Option<$row> = sqlx::query(USER)
                    .bind(user_id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(user_of).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn user_with_memberships(
                &self,
                user_id: &str,
            ) -> Result<Option<(User, Vec<Membership>)>> {
                let Some(user) = self.user(user_id).await? else {
                    return Ok(None);
                };
                let rows: Vec<$row> = sqlx::query(MEMBERSHIPS)
                    .bind(user_id)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                let memberships = rows.iter().map(membership_of).collect::<Result<_>>()?;
                Ok(Some((user, memberships)))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn create_session(&self, s: &Session) -> Result<()> {
                sqlx::query(CREATE_SESSION)
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
                let row: Option<$row> = sqlx::query(SESSION)
                    .bind(session_id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(session_of).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn set_session_mfa(&self, session_id: &str) -> Result<()> {
                sqlx::query(SET_SESSION_MFA)
                    .bind(session_id)
                    .bind(true)
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn prune_sessions(&self, before: DateTime<Utc>) -> Result<u64> {
                let done = sqlx::query(PRUNE_SESSIONS)
                    .bind(before.trunc_subsecs(6))
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn revoke_session(&self, session_id: &str, now: DateTime<Utc>) -> Result<bool> {
                let done = sqlx::query(REVOKE_SESSION)
                    .bind(session_id)
                    .bind(now.trunc_subsecs(6))
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() > 0)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn totp(&self, subject: &str) -> Result<Option<TotpRow>> {
                let row: Option<$row> = sqlx::query(TOTP)
                    .bind(subject)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(totp_of).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn put_pending_totp(&self, t: &TotpRow) -> Result<()> {
                let done = sqlx::query(PUT_PENDING_TOTP)
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
            async fn accept_totp_step(
                &self,
                subject: &str,
                step: i64,
                enable: bool,
            ) -> Result<bool> {
                let done = sqlx::query(ACCEPT_TOTP_STEP)
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
                let done = sqlx::query(DELETE_TOTP)
                    .bind(subject)
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() > 0)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn replace_recovery_codes(&self, subject: &str, hashes: &[String]) -> Result<()> {
                let mut tx = Self::write_tx(&self.pool).await?;
                sqlx::query(DELETE_RECOVERY_CODES)
                    .bind(subject)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                for hash in hashes {
                    sqlx::query(INSERT_RECOVERY_CODE)
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
                let done = sqlx::query(USE_RECOVERY_CODE)
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
                let left: i64 = sqlx::query_scalar(RECOVERY_CODES_LEFT)
                    .bind(subject)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(u64::try_from(left).unwrap_or(0))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn add_passkey(&self, p: &PasskeyRow) -> Result<()> {
                sqlx::query(ADD_PASSKEY)
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
                let rows: Vec<$row> = sqlx::query(PASSKEYS)
                    .bind(subject)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(passkey_of).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn passkey_by_credential(
                &self,
                credential_id: &str,
            ) -> Result<Option<PasskeyRow>> {
                let row: Option<$row> = sqlx::query(PASSKEY_BY_CREDENTIAL)
                    .bind(credential_id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(passkey_of).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn subject_of_user_handle(&self, user_handle: &str) -> Result<Option<String>> {
                sqlx::query_scalar(SUBJECT_OF_USER_HANDLE)
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
                sqlx::query(TOUCH_PASSKEY)
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
                let done = sqlx::query(DELETE_PASSKEY)
                    .bind(subject)
                    .bind(passkey_id)
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() > 0)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn put_ceremony(&self, c: &Ceremony) -> Result<()> {
                sqlx::query(PUT_CEREMONY)
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
                sqlx::query(DELETE_EXPIRED_CEREMONIES)
                    .bind(now.trunc_subsecs(6))
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                let row: Option<$row> = sqlx::query(TAKE_CEREMONY)
                    .bind(ceremony_id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(ceremony_of).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn move_second_factors(&self, from: &str, to: &str) -> Result<()> {
                let mut tx = Self::write_tx(&self.pool).await?;
                for table in MOVE_SECOND_FACTORS {
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
                let until: Option<Option<DateTime<Utc>>> = sqlx::query_scalar(MFA_LOCKED_UNTIL)
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
                let taken: Option<i64> = sqlx::query_scalar(MFA_TAKE_GUESS)
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
                let row: Option<$row> = sqlx::query(MFA_WINDOW)
                    .bind(subject)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                next_guess_at(row.as_ref(), now, budget).map(Some)
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
                let locked = sqlx::query_scalar::<_, Option<DateTime<Utc>>>(MFA_SETTLE_FAILURE)
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
                sqlx::query(CLEAR_MFA_FAILURES)
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
