//! Key administration, role grants, the audit log and usage counts: the storage side of
//! access control. Every change to keys, grants or accounts moves `auth_epoch` in the same
//! transaction, so each replica's credential cache can tell it is stale.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use model::Role;

use crate::{KeyPrincipal, NewApiKey, Result};

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
