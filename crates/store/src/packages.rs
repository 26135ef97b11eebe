//! Package watchlists per account, what the registries said of watched packages not yet
//! tracked, the tracked packages themselves (records of the `npm`, `pypi` and `go`
//! vendors) and the change-alert feed.

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::backend::Columns;
use crate::downloads::ChangeAlert;
use crate::{Page, PgStore, Result, SqliteStore, db_error, new_id};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageWatch {
    pub id: String,
    pub team_id: String,
    pub ecosystem: String,
    /// As the ecosystem compares names.
    pub package_name: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeQuery {
    /// Whose watchlist `watched_only` means.
    pub team_id: String,
    pub watched_only: bool,
    pub ecosystem: Option<String>,
    pub limit: u32,
    pub offset: u64,
}

/// A package the service holds records of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedPackage {
    pub ecosystem: String,
    /// The name as recorded (the record's executable name without ` (ecosystem)`).
    pub package_name: String,
}

#[async_trait]
pub trait PackageStore: Send + Sync {
    /// Adds the watch, or returns the account's existing watch of that package; `true`
    /// when it was created.
    async fn add_watch(
        &self,
        team_id: &str,
        ecosystem: &str,
        package_name: &str,
        now: DateTime<Utc>,
    ) -> Result<(PackageWatch, bool)>;
    /// The account's watches, oldest first.
    async fn watches(&self, team_id: &str) -> Result<Vec<PackageWatch>>;
    /// Removes one of the account's watches; false when it has none with that id.
    async fn remove_watch(&self, team_id: &str, id: &str) -> Result<bool>;
    /// Every watched package of every account, distinct, as (ecosystem, name).
    async fn watched_packages(&self) -> Result<Vec<(String, String)>>;
    /// Notes what the registry said of a watched, untracked package (`not_found`), or
    /// clears the note (None).
    async fn set_registry_status(
        &self,
        ecosystem: &str,
        package_name: &str,
        status: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<()>;
    /// Every note of [`set_registry_status`](PackageStore::set_registry_status), as
    /// (ecosystem, name, status).
    async fn registry_statuses(&self) -> Result<Vec<(String, String, String)>>;
    /// Packages with records, distinct.
    async fn tracked_packages(&self) -> Result<Vec<TrackedPackage>>;
    /// Change alerts, newest first.
    async fn change_alerts(&self, query: &ChangeQuery) -> Result<Page<ChangeAlert>>;
    /// Stores advisories in one transaction, each replacing a stored one of its id unless
    /// that one was modified later; returns how many were written.
    async fn import_advisories(
        &self,
        advisories: &[AdvisoryRow],
        now: DateTime<Utc>,
    ) -> Result<u64>;
    /// The documents of the advisories naming any of the packages (ecosystem, name).
    async fn advisories_for(&self, packages: &[(String, String)]) -> Result<Vec<String>>;
}

/// An advisory as stored: the document and the packages it is found by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdvisoryRow {
    pub id: String,
    /// RFC 3339, as the document says; compared as text.
    pub modified: String,
    pub document: String,
    pub packages: Vec<(String, String)>,
}

/// Packages per `advisories_for` statement.
const ADVISORY_BATCH: usize = 200;

fn count(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

const ALERT_FILTER: &str = "($1 IS NULL OR a.ecosystem = $1) AND ($2 = 0 OR EXISTS \
     (SELECT 1 FROM package_watches w WHERE w.team_id = $3 AND w.ecosystem = a.ecosystem \
     AND w.package_name = a.package_name))";

const ADD_WATCH: &str = "INSERT INTO package_watches (id, team_id, ecosystem, package_name, \
     created_at) VALUES ($1, $2, $3, $4, $5) \
     ON CONFLICT (team_id, ecosystem, package_name) DO NOTHING";
const WATCH: &str = "SELECT id, team_id, ecosystem, package_name, created_at FROM package_watches \
     WHERE team_id = $1 AND ecosystem = $2 AND package_name = $3";
const WATCHES: &str = "SELECT id, team_id, ecosystem, package_name, created_at FROM package_watches \
     WHERE team_id = $1 ORDER BY created_at, id";
const REMOVE_WATCH: &str = "DELETE FROM package_watches WHERE team_id = $1 AND id = $2";
const WATCHED_PACKAGES: &str = "SELECT DISTINCT ecosystem, package_name FROM package_watches \
     ORDER BY ecosystem, package_name";
const SET_REGISTRY_STATUS: &str = "INSERT INTO package_registry_status \
     (ecosystem, package_name, status, checked_at) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (ecosystem, package_name) \
     DO UPDATE SET status = excluded.status, checked_at = excluded.checked_at";
const CLEAR_REGISTRY_STATUS: &str =
    "DELETE FROM package_registry_status WHERE ecosystem = $1 AND package_name = $2";
const REGISTRY_STATUSES: &str =
    "SELECT ecosystem, package_name, status FROM package_registry_status";
const TRACKED_PACKAGES: &str = "SELECT DISTINCT vendor, executable_name FROM hash_records \
     WHERE vendor IN ('npm', 'pypi', 'go') AND status = 'current'";
const ADVISORY_MODIFIED: &str = "SELECT modified FROM advisories WHERE id = $1";
const CLEAR_ADVISORY_PACKAGES: &str = "DELETE FROM advisory_packages WHERE advisory_id = $1";
const PUT_ADVISORY: &str = "INSERT INTO advisories (id, modified, document, imported_at) \
     VALUES ($1, $2, $3, $4) \
     ON CONFLICT (id) DO UPDATE SET modified = excluded.modified, \
     document = excluded.document, imported_at = excluded.imported_at";
const ADD_ADVISORY_PACKAGE: &str = "INSERT INTO advisory_packages \
     (ecosystem, package_name, advisory_id) \
     VALUES ($1, $2, $3) ON CONFLICT DO NOTHING";

fn alerts_count_sql() -> String {
    format!("SELECT COUNT(*) FROM change_alerts a WHERE {ALERT_FILTER}")
}

fn alerts_page_sql() -> String {
    format!(
        "SELECT a.id, a.ecosystem, a.package_name, a.version, a.previous_sha256, \
         a.latest_sha256, a.observed_at FROM change_alerts a WHERE {ALERT_FILTER} \
         ORDER BY a.observed_at DESC, a.id DESC LIMIT $4 OFFSET $5"
    )
}

/// The advisories of a batch of packages: binds are each package's (ecosystem, name).
fn advisories_for_sql(packages: usize) -> String {
    // ($1, $2) OR ($3, $4) ...: placeholders only, the values are bound.
    let filter = (0..packages)
        .map(|i| {
            format!(
                "(p.ecosystem = ${} AND p.package_name = ${})",
                2 * i + 1,
                2 * i + 2
            )
        })
        .collect::<Vec<_>>()
        .join(" OR ");
    format!(
        "SELECT DISTINCT a.id, a.document FROM advisory_packages p \
         JOIN advisories a ON a.id = p.advisory_id WHERE {filter}"
    )
}

fn watch_from(r: &impl Columns) -> Result<PackageWatch> {
    Ok(PackageWatch {
        id: r.text("id")?,
        team_id: r.text("team_id")?,
        ecosystem: r.text("ecosystem")?,
        package_name: r.text("package_name")?,
        created_at: r.time("created_at")?,
    })
}

fn package_from(r: &impl Columns) -> Result<(String, String)> {
    Ok((r.text("ecosystem")?, r.text("package_name")?))
}

fn registry_status_from(r: &impl Columns) -> Result<(String, String, String)> {
    Ok((
        r.text("ecosystem")?,
        r.text("package_name")?,
        r.text("status")?,
    ))
}

/// A `TRACKED_PACKAGES` row as a package, when its name is a package's.
fn tracked_from(r: &impl Columns) -> Result<Option<TrackedPackage>> {
    let ecosystem = r.text("vendor")?;
    let name = r.text("executable_name")?;
    // Packages are recorded as `name (ecosystem)`.
    Ok(name
        .strip_suffix(&format!(" ({ecosystem})"))
        .map(|package| TrackedPackage {
            package_name: package.to_string(),
            ecosystem,
        }))
}

fn alert_from(r: &impl Columns) -> Result<ChangeAlert> {
    Ok(ChangeAlert {
        id: r.text("id")?,
        ecosystem: r.text("ecosystem")?,
        package_name: r.text("package_name")?,
        version: r.text("version")?,
        previous_sha256: r.text("previous_sha256")?,
        latest_sha256: r.text("latest_sha256")?,
        observed_at: r.time("observed_at")?,
    })
}

macro_rules! packages_backend {
    ($store:ident, $row:ty) => {
        #[async_trait]
        impl PackageStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn add_watch(
                &self,
                team_id: &str,
                ecosystem: &str,
                package_name: &str,
                now: DateTime<Utc>,
            ) -> Result<(PackageWatch, bool)> {
                let inserted = sqlx::query(ADD_WATCH)
                    .bind(new_id())
                    .bind(team_id)
                    .bind(ecosystem)
                    .bind(package_name)
                    .bind(now.trunc_subsecs(6))
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?
                    .rows_affected()
                    == 1;
                let row: $row = sqlx::query(WATCH)
                    .bind(team_id)
                    .bind(ecosystem)
                    .bind(package_name)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok((watch_from(&row)?, inserted))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn watches(&self, team_id: &str) -> Result<Vec<PackageWatch>> {
                let rows: Vec<$row> = sqlx::query(WATCHES)
                    .bind(team_id)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(watch_from).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn remove_watch(&self, team_id: &str, id: &str) -> Result<bool> {
                let done = sqlx::query(REMOVE_WATCH)
                    .bind(team_id)
                    .bind(id)
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() > 0)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn watched_packages(&self) -> Result<Vec<(String, String)>> {
                let rows: Vec<$row> = sqlx::query(WATCHED_PACKAGES)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(package_from).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn set_registry_status(
                &self,
                ecosystem: &str,
                package_name: &str,
                status: Option<&str>,
                now: DateTime<Utc>,
            ) -> Result<()> {
                match status {
                    Some(status) => sqlx::query(SET_REGISTRY_STATUS)
                        .bind(ecosystem)
                        .bind(package_name)
                        .bind(status)
                        .bind(now.trunc_subsecs(6)),
                    None => sqlx::query(CLEAR_REGISTRY_STATUS)
                        .bind(ecosystem)
                        .bind(package_name),
                }
                .execute(&self.pool)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn registry_statuses(&self) -> Result<Vec<(String, String, String)>> {
                let rows: Vec<$row> = sqlx::query(REGISTRY_STATUSES)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(registry_status_from).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn tracked_packages(&self) -> Result<Vec<TrackedPackage>> {
                let rows: Vec<$row> = sqlx::query(TRACKED_PACKAGES)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    out.extend(tracked_from(r)?);
                }
                Ok(out)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn change_alerts(&self, q: &ChangeQuery) -> Result<Page<ChangeAlert>> {
                let watched = i64::from(q.watched_only);
                let total: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(alerts_count_sql()))
                    .bind(&q.ecosystem)
                    .bind(watched)
                    .bind(&q.team_id)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error)?;
                let rows: Vec<$row> = sqlx::query(sqlx::AssertSqlSafe(alerts_page_sql()))
                    .bind(&q.ecosystem)
                    .bind(watched)
                    .bind(&q.team_id)
                    .bind(i64::from(q.limit))
                    .bind(i64::try_from(q.offset).unwrap_or(i64::MAX))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(Page {
                    items: rows.iter().map(alert_from).collect::<Result<Vec<_>>>()?,
                    total: count(total),
                })
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn import_advisories(
                &self,
                rows: &[AdvisoryRow],
                now: DateTime<Utc>,
            ) -> Result<u64> {
                let mut tx = Self::write_tx(&self.pool).await?;
                let mut written = 0;
                for a in rows {
                    let stored: Option<String> = sqlx::query_scalar(ADVISORY_MODIFIED)
                        .bind(&a.id)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(db_error)?;
                    if stored.is_some_and(|m| m > a.modified) {
                        continue;
                    }
                    sqlx::query(CLEAR_ADVISORY_PACKAGES)
                        .bind(&a.id)
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                    sqlx::query(PUT_ADVISORY)
                        .bind(&a.id)
                        .bind(&a.modified)
                        .bind(&a.document)
                        .bind(now.trunc_subsecs(6))
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                    for (ecosystem, name) in &a.packages {
                        sqlx::query(ADD_ADVISORY_PACKAGE)
                            .bind(ecosystem)
                            .bind(name)
                            .bind(&a.id)
                            .execute(&mut *tx)
                            .await
                            .map_err(db_error)?;
                    }
                    written += 1;
                }
                tx.commit().await.map_err(db_error)?;
                Ok(written)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn advisories_for(&self, packages: &[(String, String)]) -> Result<Vec<String>> {
                let mut out = Vec::new();
                let mut seen = std::collections::HashSet::new();
                for batch in packages.chunks(ADVISORY_BATCH) {
                    let mut query =
                        sqlx::query(sqlx::AssertSqlSafe(advisories_for_sql(batch.len())));
                    for (ecosystem, name) in batch {
                        query = query.bind(ecosystem).bind(name);
                    }
                    let rows: Vec<$row> = query.fetch_all(&self.pool).await.map_err(db_error)?;
                    for r in &rows {
                        if seen.insert(r.text("id")?) {
                            out.push(r.text("document")?);
                        }
                    }
                }
                Ok(out)
            }
        }
    };
}

packages_backend!(SqliteStore, SqliteRow);
packages_backend!(PgStore, PgRow);
