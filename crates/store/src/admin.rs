//! Key administration, role grants, the audit log and usage counts: the storage side of
//! access control. Every change to keys, grants or accounts moves `auth_epoch` in the same
//! transaction, so each replica's credential cache can tell it is stale. [`AdminStore`]
//! (`api_keys`, `key_grants`, `tenants.suspended`, `audit_log`, `usage_counts`) and its
//! implementation for both backends.

use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, SubsecRound, Utc};
use model::Role;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::backend::Columns;
use crate::{AccountStore, KeyPrincipal, NewApiKey, PgStore, Result, SqliteStore, db_error};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantRow {
    pub role: Role,
    /// None = permanent.
    pub expires_at: Option<DateTime<Utc>>,
    /// key_id of the granter.
    pub granted_by: String,
    pub granted_at: DateTime<Utc>,
}

/// A key as administrators see it (never its secret or hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo {
    pub key_id: String,
    pub team_id: String,
    pub role: Role,
    pub label: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub grants: Vec<GrantRow>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub at: DateTime<Utc>,
    /// key_id of the caller (the staff actor when impersonating).
    pub actor: String,
    /// The caller's team.
    pub team_id: String,
    pub action: String,
    pub target: String,
    /// `ok` or `denied: <reason>`.
    pub outcome: String,
    pub detail: String,
}

/// Which audit entries to read: every filter given must match; newest first, starting
/// below `before_id` (the cursor of the previous page) when set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Actions by callers of this account (or, in an impersonation session, done to it).
    pub team_id: Option<String>,
    /// The caller's key id.
    pub actor: Option<String>,
    /// Actions starting with this text (`key.` matches every key action).
    pub action: Option<String>,
    pub target: Option<String>,
    /// Inclusive bounds on the entry's time.
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    pub before_id: Option<i64>,
    pub limit: u32,
}

/// An audit entry with its position in the log (increasing with time of writing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub id: i64,
    pub entry: AuditEntry,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageDelta {
    pub team_id: String,
    pub day: NaiveDate,
    /// `<METHOD> <route>`.
    pub endpoint: String,
    pub count: u64,
}

#[async_trait]
pub trait AdminStore: Send + Sync {
    async fn key_by_id(&self, key_id: &str) -> Result<Option<KeyPrincipal>>;
    async fn grants(&self, key_id: &str) -> Result<Vec<GrantRow>>;
    /// Keys of one team, or of every team; newest first.
    async fn list_keys(&self, team_id: Option<&str>) -> Result<Vec<KeyInfo>>;
    /// `NotFound` when the team does not exist.
    async fn insert_key(&self, key: NewApiKey, now: DateTime<Utc>) -> Result<()>;
    async fn update_key(&self, key_id: &str, label: Option<&str>, role: Option<Role>)
    -> Result<()>;
    /// Revokes a key; revoking a revoked key is `NotFound`.
    async fn revoke_key(&self, key_id: &str, now: DateTime<Utc>) -> Result<()>;
    /// Revokes the old key and stores its replacement, atomically.
    async fn reissue_key(&self, old_key_id: &str, new: NewApiKey, now: DateTime<Utc>)
    -> Result<()>;
    /// Adds or replaces the grant of `grant.role`.
    async fn put_grant(&self, key_id: &str, grant: &GrantRow) -> Result<()>;
    /// False when the key held no such grant.
    async fn delete_grant(&self, key_id: &str, role: Role) -> Result<bool>;
    async fn set_suspended(&self, team_id: &str, suspended: bool) -> Result<()>;
    async fn auth_epoch(&self) -> Result<u64>;
    async fn append_audit(&self, entry: &AuditEntry) -> Result<()>;
    /// The entries matching `query`, newest first, at most `query.limit`.
    async fn audit_log(&self, query: &AuditQuery) -> Result<Vec<AuditRow>>;
    async fn add_usage(&self, deltas: &[UsageDelta]) -> Result<()>;
    /// Per endpoint over the inclusive days.
    async fn usage_by_endpoint(
        &self,
        team_id: &str,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<(String, u64)>>;
    /// Per day over the inclusive days (days without requests are absent).
    async fn usage_daily(
        &self,
        team_id: &str,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<(NaiveDate, u64)>>;
}

const BUMP_EPOCH: &str = "UPDATE counters SET value = value + 1 WHERE name = 'auth_epoch'";
const AUTH_EPOCH: &str = "SELECT value FROM counters WHERE name = 'auth_epoch'";
const KEY_HASH: &str = "SELECT key_hash FROM api_keys WHERE key_id = $1";
const GRANTS: &str = "SELECT role, expires_at, granted_by, granted_at FROM key_grants \
     WHERE key_id = $1 ORDER BY role";
const KEYS: &str = "SELECT key_id, team_id, role, label, created_at, revoked_at FROM api_keys \
     WHERE $1 IS NULL OR team_id = $1 ORDER BY created_at DESC, key_id";
const INSERT_KEY: &str = "INSERT INTO api_keys (key_id, team_id, key_hash, role, label, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6)";
const UPDATE_KEY: &str = "UPDATE api_keys SET label = COALESCE($2, label), role = COALESCE($3, role) \
     WHERE key_id = $1 AND revoked_at IS NULL";
const REVOKE_KEY: &str =
    "UPDATE api_keys SET revoked_at = $2 WHERE key_id = $1 AND revoked_at IS NULL";
/// Grants move to the replacement key.
const MOVE_GRANTS: &str = "UPDATE key_grants SET key_id = $2 WHERE key_id = $1";
const PUT_GRANT: &str = "INSERT INTO key_grants (key_id, role, expires_at, granted_by, granted_at) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key_id, role) DO UPDATE \
     SET expires_at = excluded.expires_at, granted_by = excluded.granted_by, \
     granted_at = excluded.granted_at";
const DELETE_GRANT: &str = "DELETE FROM key_grants WHERE key_id = $1 AND role = $2";
const SET_SUSPENDED: &str = "UPDATE tenants SET suspended = $2 WHERE team_id = $1";
const APPEND_AUDIT: &str = "INSERT INTO audit_log (at, actor, team_id, action, target, outcome, detail) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";
/// Prefix match on the action without LIKE, so `%` and `_` in it are plain text.
const AUDIT_LOG: &str = "SELECT id, at, actor, team_id, action, target, outcome, detail FROM audit_log \
     WHERE ($1 IS NULL OR team_id = $1) AND ($2 IS NULL OR actor = $2) \
     AND ($3 IS NULL OR substr(action, 1, length($3)) = $3) \
     AND ($4 IS NULL OR target = $4) \
     AND ($5 IS NULL OR at >= $5) AND ($6 IS NULL OR at <= $6) \
     AND ($7 IS NULL OR id < $7) \
     ORDER BY id DESC LIMIT $8";
const ADD_USAGE: &str = "INSERT INTO usage_counts (team_id, day, endpoint, count) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (team_id, day, endpoint) DO UPDATE \
     SET count = usage_counts.count + excluded.count";
const USAGE_BY_ENDPOINT: &str = "SELECT endpoint, CAST(SUM(count) AS BIGINT) AS n FROM usage_counts \
     WHERE team_id = $1 AND day >= $2 AND day <= $3 GROUP BY endpoint ORDER BY endpoint";
const USAGE_DAILY: &str = "SELECT day, CAST(SUM(count) AS BIGINT) AS n FROM usage_counts \
     WHERE team_id = $1 AND day >= $2 AND day <= $3 GROUP BY day ORDER BY day";

fn role_of(text: &str) -> Result<Role> {
    Role::from_str(text).map_err(|_| model::Error::internal(format!("stored role {text:?}")))
}

fn count(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn no_such_key() -> model::Error {
    model::Error::NotFound("no such key".into())
}

fn grant_from_row(row: &impl Columns) -> Result<GrantRow> {
    let role = row.text("role")?;
    Ok(GrantRow {
        role: role_of(&role)?,
        expires_at: row.opt_time("expires_at")?,
        granted_by: row.text("granted_by")?,
        granted_at: row.time("granted_at")?,
    })
}

/// A `KEYS` row, with the key's grants.
fn key_from_row(row: &impl Columns, grants: Vec<GrantRow>) -> Result<KeyInfo> {
    let role = row.text("role")?;
    Ok(KeyInfo {
        grants,
        key_id: row.text("key_id")?,
        team_id: row.text("team_id")?,
        role: role_of(&role)?,
        label: row.text("label")?,
        created_at: row.time("created_at")?,
        revoked_at: row.opt_time("revoked_at")?,
    })
}

fn audit_from_row(row: &impl Columns) -> Result<AuditRow> {
    Ok(AuditRow {
        id: row.int("id")?,
        entry: AuditEntry {
            at: row.time("at")?,
            actor: row.text("actor")?,
            team_id: row.text("team_id")?,
            action: row.text("action")?,
            target: row.text("target")?,
            outcome: row.text("outcome")?,
            detail: row.text("detail")?,
        },
    })
}

fn endpoint_usage_from_row(row: &impl Columns) -> Result<(String, u64)> {
    Ok((row.text("endpoint")?, count(row.int("n")?)))
}

fn daily_usage_from_row(row: &impl Columns) -> Result<(NaiveDate, u64)> {
    Ok((row.date("day")?, count(row.int("n")?)))
}

/// Every replica writes the rows in one order: two flushes touching the same rows then wait
/// for each other instead of deadlocking (PostgreSQL).
fn usage_in_write_order(deltas: &[UsageDelta]) -> Vec<&UsageDelta> {
    let mut ordered: Vec<&UsageDelta> = deltas.iter().collect();
    ordered.sort_unstable_by(|a, b| {
        (&a.team_id, a.day, &a.endpoint).cmp(&(&b.team_id, b.day, &b.endpoint))
    });
    ordered
}

macro_rules! access_backend {
    ($store:ident, $row:ty) => {
        impl $store {
            /// Ends a change to keys, grants or accounts: `auth_epoch` moves in the same
            /// transaction, so every replica drops its cached principals with the change.
            pub(crate) async fn commit_access_change(
                mut tx: sqlx::Transaction<'_, <$row as sqlx::Row>::Database>,
            ) -> Result<()> {
                sqlx::query(BUMP_EPOCH)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                tx.commit().await.map_err(db_error)
            }
        }

        #[async_trait]
        impl AdminStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn key_by_id(&self, key_id: &str) -> Result<Option<KeyPrincipal>> {
                let hash: Option<String> = sqlx::query_scalar(KEY_HASH)
                    .bind(key_id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                match hash {
                    Some(hash) => self.key_by_hash(&hash).await,
                    None => Ok(None),
                }
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn grants(&self, key_id: &str) -> Result<Vec<GrantRow>> {
                let rows: Vec<$row> = sqlx::query(GRANTS)
                    .bind(key_id)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(grant_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn list_keys(&self, team_id: Option<&str>) -> Result<Vec<KeyInfo>> {
                let rows: Vec<$row> = sqlx::query(KEYS)
                    .bind(team_id)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                let mut keys = Vec::with_capacity(rows.len());
                for row in &rows {
                    let grants = self.grants(&row.text("key_id")?).await?;
                    keys.push(key_from_row(row, grants)?);
                }
                Ok(keys)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn insert_key(&self, key: NewApiKey, now: DateTime<Utc>) -> Result<()> {
                // The foreign key tells us when the team does not exist.
                let mut tx = Self::write_tx(&self.pool).await?;
                let inserted = sqlx::query(INSERT_KEY)
                    .bind(&key.key_id)
                    .bind(&key.team_id)
                    .bind(&key.key_hash)
                    .bind(key.role.as_str())
                    .bind(&key.label)
                    .bind(now.trunc_subsecs(6))
                    .execute(&mut *tx)
                    .await;
                match inserted {
                    Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation() => {
                        return Err(model::Error::NotFound(format!(
                            "no account {:?}",
                            key.team_id
                        )));
                    }
                    other => other.map_err(db_error)?,
                };
                Self::commit_access_change(tx).await
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn update_key(
                &self,
                key_id: &str,
                label: Option<&str>,
                role: Option<Role>,
            ) -> Result<()> {
                let mut tx = Self::write_tx(&self.pool).await?;
                let done = sqlx::query(UPDATE_KEY)
                    .bind(key_id)
                    .bind(label)
                    .bind(role.map(Role::as_str))
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                if done.rows_affected() == 0 {
                    return Err(no_such_key());
                }
                Self::commit_access_change(tx).await
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn revoke_key(&self, key_id: &str, now: DateTime<Utc>) -> Result<()> {
                let mut tx = Self::write_tx(&self.pool).await?;
                let done = sqlx::query(REVOKE_KEY)
                    .bind(key_id)
                    .bind(now.trunc_subsecs(6))
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                if done.rows_affected() == 0 {
                    return Err(no_such_key());
                }
                Self::commit_access_change(tx).await
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn reissue_key(
                &self,
                old_key_id: &str,
                new: NewApiKey,
                now: DateTime<Utc>,
            ) -> Result<()> {
                let now = now.trunc_subsecs(6);
                let mut tx = Self::write_tx(&self.pool).await?;
                let done = sqlx::query(REVOKE_KEY)
                    .bind(old_key_id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                if done.rows_affected() == 0 {
                    return Err(no_such_key());
                }
                sqlx::query(INSERT_KEY)
                    .bind(&new.key_id)
                    .bind(&new.team_id)
                    .bind(&new.key_hash)
                    .bind(new.role.as_str())
                    .bind(&new.label)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                sqlx::query(MOVE_GRANTS)
                    .bind(old_key_id)
                    .bind(&new.key_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                Self::commit_access_change(tx).await
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn put_grant(&self, key_id: &str, grant: &GrantRow) -> Result<()> {
                let mut tx = Self::write_tx(&self.pool).await?;
                sqlx::query(PUT_GRANT)
                    .bind(key_id)
                    .bind(grant.role.as_str())
                    .bind(grant.expires_at.map(|t| t.trunc_subsecs(6)))
                    .bind(&grant.granted_by)
                    .bind(grant.granted_at.trunc_subsecs(6))
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                Self::commit_access_change(tx).await
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn delete_grant(&self, key_id: &str, role: Role) -> Result<bool> {
                let mut tx = Self::write_tx(&self.pool).await?;
                let done = sqlx::query(DELETE_GRANT)
                    .bind(key_id)
                    .bind(role.as_str())
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                Self::commit_access_change(tx).await?;
                Ok(done.rows_affected() > 0)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn set_suspended(&self, team_id: &str, suspended: bool) -> Result<()> {
                let mut tx = Self::write_tx(&self.pool).await?;
                let done = sqlx::query(SET_SUSPENDED)
                    .bind(team_id)
                    .bind(suspended)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                if done.rows_affected() == 0 {
                    return Err(model::Error::NotFound(format!("no account {team_id:?}")));
                }
                Self::commit_access_change(tx).await
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn auth_epoch(&self) -> Result<u64> {
                let v: i64 = sqlx::query_scalar(AUTH_EPOCH)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(count(v))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn append_audit(&self, e: &AuditEntry) -> Result<()> {
                sqlx::query(APPEND_AUDIT)
                    .bind(e.at.trunc_subsecs(6))
                    .bind(&e.actor)
                    .bind(&e.team_id)
                    .bind(&e.action)
                    .bind(&e.target)
                    .bind(&e.outcome)
                    .bind(&e.detail)
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn audit_log(&self, q: &AuditQuery) -> Result<Vec<AuditRow>> {
                let rows: Vec<$row> = sqlx::query(AUDIT_LOG)
                    .bind(q.team_id.as_deref())
                    .bind(q.actor.as_deref())
                    .bind(q.action.as_deref())
                    .bind(q.target.as_deref())
                    .bind(q.since.map(|t| t.trunc_subsecs(6)))
                    .bind(q.until.map(|t| t.trunc_subsecs(6)))
                    .bind(q.before_id)
                    .bind(i64::from(q.limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(audit_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn add_usage(&self, deltas: &[UsageDelta]) -> Result<()> {
                if deltas.is_empty() {
                    return Ok(());
                }
                let mut tx = Self::write_tx(&self.pool).await?;
                for d in usage_in_write_order(deltas) {
                    sqlx::query(ADD_USAGE)
                        .bind(&d.team_id)
                        .bind(d.day)
                        .bind(&d.endpoint)
                        .bind(i64::try_from(d.count).unwrap_or(i64::MAX))
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                }
                tx.commit().await.map_err(db_error)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn usage_by_endpoint(
                &self,
                team_id: &str,
                from: NaiveDate,
                to: NaiveDate,
            ) -> Result<Vec<(String, u64)>> {
                let rows: Vec<$row> = sqlx::query(USAGE_BY_ENDPOINT)
                    .bind(team_id)
                    .bind(from)
                    .bind(to)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(endpoint_usage_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn usage_daily(
                &self,
                team_id: &str,
                from: NaiveDate,
                to: NaiveDate,
            ) -> Result<Vec<(NaiveDate, u64)>> {
                let rows: Vec<$row> = sqlx::query(USAGE_DAILY)
                    .bind(team_id)
                    .bind(from)
                    .bind(to)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(daily_usage_from_row).collect()
            }
        }
    };
}

access_backend!(SqliteStore, SqliteRow);
access_backend!(PgStore, PgRow);
