//! Tenants (accounts) and their API keys (`tenants`, `api_keys`): [`AccountStore`] and its
//! implementation for both backends.

use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use model::{Role, TenantKind, Tier};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::backend::{Columns, corrupt, micros};
use crate::{PgStore, Result, SqliteStore, db_error};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    pub team_id: String,
    pub kind: TenantKind,
    pub tier: Tier,
    pub suspended: bool,
    pub created_at: DateTime<Utc>,
}

/// An API key as stored: its public id and the HMAC of the secret key, never the key.
#[derive(Clone, PartialEq, Eq)]
pub struct NewApiKey {
    pub key_id: String,
    pub team_id: String,
    pub key_hash: String,
    pub role: Role,
    pub label: String,
}

impl std::fmt::Debug for NewApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewApiKey")
            .field("key_id", &self.key_id)
            .field("team_id", &self.team_id)
            .field("role", &self.role)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// Who a key belongs to and what it may do, as authentication needs it.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyPrincipal {
    pub key_id: String,
    pub key_hash: String,
    pub team_id: String,
    pub role: Role,
    pub tier: Tier,
    pub tenant_kind: TenantKind,
    pub revoked: bool,
    pub suspended: bool,
}

impl std::fmt::Debug for KeyPrincipal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPrincipal")
            .field("key_id", &self.key_id)
            .field("team_id", &self.team_id)
            .field("role", &self.role)
            .field("tier", &self.tier)
            .field("revoked", &self.revoked)
            .field("suspended", &self.suspended)
            .finish_non_exhaustive()
    }
}

/// Tenants (accounts) and their API keys.
#[async_trait]
pub trait AccountStore: Send + Sync {
    /// Creates a tenant together with its first key, atomically. `Conflict` if the team
    /// exists, or if `kind` is platform and a platform tenant already exists.
    async fn create_tenant_with_key(
        &self,
        team_id: &str,
        kind: TenantKind,
        tier: Tier,
        key: NewApiKey,
        now: DateTime<Utc>,
    ) -> Result<()>;

    async fn tenant(&self, team_id: &str) -> Result<Option<Tenant>>;

    /// The key whose HMAC is `key_hash`, with its tenant's tier and state.
    async fn key_by_hash(&self, key_hash: &str) -> Result<Option<KeyPrincipal>>;
}

/// A team of that id, or any platform tenant when the new one is a platform (`$2`).
const TENANT_CLASH: &str = "SELECT team_id FROM tenants \
     WHERE team_id = $1 OR (kind = 'platform' AND $2 = 'platform')";
const INSERT_TENANT: &str = "INSERT INTO tenants (team_id, kind, tier, suspended, created_at) \
     VALUES ($1, $2, $3, FALSE, $4)";
const INSERT_KEY: &str = "INSERT INTO api_keys (key_id, team_id, key_hash, role, label, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6)";
const TENANT: &str =
    "SELECT team_id, kind, tier, suspended, created_at FROM tenants WHERE team_id = $1";
const KEY_BY_HASH: &str = "SELECT k.key_id, k.key_hash, k.team_id, k.role, k.revoked_at, \
     t.tier, t.kind, t.suspended \
     FROM api_keys k JOIN tenants t ON t.team_id = k.team_id WHERE k.key_hash = $1";

fn kind_of(kind: &str) -> TenantKind {
    if kind == "platform" {
        TenantKind::Platform
    } else {
        TenantKind::Customer
    }
}

/// Why a new tenant clashes with `existing` (a `TENANT_CLASH` row).
fn clash(team_id: &str, existing: &str) -> model::Error {
    model::Error::Conflict(if existing == team_id {
        format!("account {team_id:?} already exists")
    } else {
        format!("the platform tenant already exists ({existing:?})")
    })
}

fn tenant_from_row(row: &impl Columns) -> Result<Tenant> {
    let tier = row.text("tier")?;
    let kind = row.text("kind")?;
    Ok(Tenant {
        team_id: row.text("team_id")?,
        kind: kind_of(&kind),
        tier: Tier::from_str(&tier).map_err(|_| corrupt("tier", &tier))?,
        suspended: row.flag("suspended")?,
        created_at: row.time("created_at")?,
    })
}

fn principal_from_row(row: &impl Columns) -> Result<KeyPrincipal> {
    let role = row.text("role")?;
    let tier = row.text("tier")?;
    let kind = row.text("kind")?;
    Ok(KeyPrincipal {
        key_id: row.text("key_id")?,
        key_hash: row.text("key_hash")?,
        team_id: row.text("team_id")?,
        role: Role::from_str(&role).map_err(|_| corrupt("role", &role))?,
        tier: Tier::from_str(&tier).map_err(|_| corrupt("tier", &tier))?,
        tenant_kind: kind_of(&kind),
        revoked: row.opt_time("revoked_at")?.is_some(),
        suspended: row.flag("suspended")?,
    })
}

macro_rules! accounts_backend {
    ($store:ident, $row:ty) => {
        #[async_trait]
        impl AccountStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn create_tenant_with_key(
                &self,
                team_id: &str,
                kind: TenantKind,
                tier: Tier,
                key: NewApiKey,
                now: DateTime<Utc>,
            ) -> Result<()> {
                let now = micros(now);
                let mut tx = Self::write_tx(&self.pool).await?;
                if let Some(lock) = Self::WRITE_LOCK {
                    sqlx::query(lock)
                        .bind("tenants")
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                }
                let existing: Option<$row> = sqlx::query(TENANT_CLASH)
                    .bind(team_id)
                    .bind(kind.as_str())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_error)?;
                if let Some(row) = existing {
                    return Err(clash(team_id, &row.text("team_id")?));
                }
                sqlx::query(INSERT_TENANT)
                    .bind(team_id)
                    .bind(kind.as_str())
                    .bind(tier.as_str())
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                sqlx::query(INSERT_KEY)
                    .bind(&key.key_id)
                    .bind(team_id)
                    .bind(&key.key_hash)
                    .bind(key.role.as_str())
                    .bind(&key.label)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                tx.commit().await.map_err(db_error)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn tenant(&self, team_id: &str) -> Result<Option<Tenant>> {
                let row: Option<$row> = sqlx::query(TENANT)
                    .bind(team_id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(tenant_from_row).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn key_by_hash(&self, key_hash: &str) -> Result<Option<KeyPrincipal>> {
                let row: Option<$row> = sqlx::query(KEY_BY_HASH)
                    .bind(key_hash)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(principal_from_row).transpose()
            }
        }
    };
}

accounts_backend!(SqliteStore, SqliteRow);
accounts_backend!(PgStore, PgRow);
