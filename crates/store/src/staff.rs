//! Staff tooling: impersonation sessions and the platform settings document. Changing the
//! settings moves `auth_epoch` in the same transaction, so every replica notices within a
//! poll and applies them.

use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};
use model::{ImpersonationMode, PlatformSettings, Role};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::backend::Columns;
use crate::{PgStore, Result, SqliteStore, db_error};

/// A staff impersonation session, named by its token's `jti`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImpersonationSession {
    pub session_id: String,
    /// The staff key that started it.
    pub actor_key_id: String,
    pub actor_team_id: String,
    /// The account acted as.
    pub team_id: String,
    /// The user acted as (user scope).
    pub user_id: Option<String>,
    pub mode: ImpersonationMode,
    /// The customer role assumed.
    pub role: Role,
    pub started_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
}

/// The platform settings document as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSettings {
    /// JSON of `model::PlatformSettings`.
    pub document: String,
    pub updated_at: DateTime<Utc>,
    /// Key id of the staff member who changed them last.
    pub updated_by: String,
}

#[async_trait]
pub trait StaffStore: Send + Sync {
    async fn start_impersonation(&self, session: &ImpersonationSession) -> Result<()>;
    async fn impersonation(&self, session_id: &str) -> Result<Option<ImpersonationSession>>;
    /// Ends a session early; false when it is unknown or already ended.
    async fn end_impersonation(&self, session_id: &str, now: DateTime<Utc>) -> Result<bool>;
    async fn platform_settings(&self) -> Result<Option<StoredSettings>>;
    async fn put_platform_settings(&self, settings: &StoredSettings) -> Result<()>;

    /// The settings in force: the stored document, or the defaults when none was stored.
    async fn current_platform_settings(&self) -> Result<PlatformSettings> {
        match self.platform_settings().await? {
            Some(stored) => PlatformSettings::from_document(&stored.document),
            None => Ok(PlatformSettings::default()),
        }
    }
}

const START_IMPERSONATION: &str = "INSERT INTO impersonation_sessions (session_id, actor_key_id, \
     actor_team_id, team_id, user_id, mode, role, started_at, expires_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
const IMPERSONATION: &str = "SELECT session_id, actor_key_id, actor_team_id, team_id, user_id, \
     mode, role, started_at, expires_at, ended_at FROM impersonation_sessions \
     WHERE session_id = $1";
const END_IMPERSONATION: &str = "UPDATE impersonation_sessions SET ended_at = $2 \
     WHERE session_id = $1 AND ended_at IS NULL";
const PLATFORM_SETTINGS: &str =
    "SELECT document, updated_at, updated_by FROM platform_settings WHERE id = 1";
const PUT_PLATFORM_SETTINGS: &str = "INSERT INTO platform_settings \
     (id, document, updated_at, updated_by) \
     VALUES (1, $1, $2, $3) ON CONFLICT (id) DO UPDATE SET \
     document = excluded.document, updated_at = excluded.updated_at, \
     updated_by = excluded.updated_by";

fn session_from_row(row: &impl Columns) -> Result<ImpersonationSession> {
    let stored = |what: &str, v: &str| model::Error::internal(format!("stored {what} {v:?}"));
    let started_at = row.time("started_at")?;
    let expires_at = row.time("expires_at")?;
    let ended_at = row.opt_time("ended_at")?;
    let user_id = row.opt_text("user_id")?;
    let mode = row.text("mode")?;
    let role = row.text("role")?;
    Ok(ImpersonationSession {
        session_id: row.text("session_id")?,
        actor_key_id: row.text("actor_key_id")?,
        actor_team_id: row.text("actor_team_id")?,
        team_id: row.text("team_id")?,
        user_id,
        mode: ImpersonationMode::from_str(&mode).map_err(|_| stored("mode", &mode))?,
        role: Role::from_str(&role).map_err(|_| stored("role", &role))?,
        started_at,
        expires_at,
        ended_at,
    })
}

fn settings_from_row(row: &impl Columns) -> Result<StoredSettings> {
    Ok(StoredSettings {
        document: row.text("document")?,
        updated_at: row.time("updated_at")?,
        updated_by: row.text("updated_by")?,
    })
}

macro_rules! staff_backend {
    ($store:ident, $row:ty) => {
        #[async_trait]
        impl StaffStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn start_impersonation(&self, s: &ImpersonationSession) -> Result<()> {
                sqlx::query(START_IMPERSONATION)
                    .bind(&s.session_id)
                    .bind(&s.actor_key_id)
                    .bind(&s.actor_team_id)
                    .bind(&s.team_id)
                    .bind(s.user_id.as_deref())
                    .bind(s.mode.as_str())
                    .bind(s.role.as_str())
                    .bind(s.started_at.trunc_subsecs(6))
                    .bind(s.expires_at.trunc_subsecs(6))
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn impersonation(
                &self,
                session_id: &str,
            ) -> Result<Option<ImpersonationSession>> {
                let row: Option<$row> = sqlx::query(IMPERSONATION)
                    .bind(session_id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(session_from_row).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn end_impersonation(
                &self,
                session_id: &str,
                now: DateTime<Utc>,
            ) -> Result<bool> {
                let done = sqlx::query(END_IMPERSONATION)
                    .bind(session_id)
                    .bind(now.trunc_subsecs(6))
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() > 0)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn platform_settings(&self) -> Result<Option<StoredSettings>> {
                let row: Option<$row> = sqlx::query(PLATFORM_SETTINGS)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(settings_from_row).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn put_platform_settings(&self, s: &StoredSettings) -> Result<()> {
                let mut tx = Self::write_tx(&self.pool).await?;
                sqlx::query(PUT_PLATFORM_SETTINGS)
                    .bind(&s.document)
                    .bind(s.updated_at.trunc_subsecs(6))
                    .bind(&s.updated_by)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                Self::commit_access_change(tx).await
            }
        }
    };
}

staff_backend!(SqliteStore, SqliteRow);
staff_backend!(PgStore, PgRow);
