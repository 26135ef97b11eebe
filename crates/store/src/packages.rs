//! Package watchlists per account, what the registries said of watched packages not yet
//! tracked, the tracked packages themselves (records of the `npm`, `pypi` and `go`
//! vendors) and the change-alert feed.

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};
use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

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

macro_rules! packages_backend {
    ($store:ident, $row:ty) => {
        fn watch_from(r: &$row) -> Result<PackageWatch> {
            Ok(PackageWatch {
                id: r.try_get("id").map_err(db_error)?,
                team_id: r.try_get("team_id").map_err(db_error)?,
                ecosystem: r.try_get("ecosystem").map_err(db_error)?,
                package_name: r.try_get("package_name").map_err(db_error)?,
                created_at: r.try_get("created_at").map_err(db_error)?,
            })
        }

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
                let inserted = sqlx::query(
                    "INSERT INTO package_watches (id, team_id, ecosystem, package_name, created_at) \
                     VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (team_id, ecosystem, package_name) DO NOTHING",
                )
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
                let row = sqlx::query(
                    "SELECT id, team_id, ecosystem, package_name, created_at FROM package_watches \
                     WHERE team_id = $1 AND ecosystem = $2 AND package_name = $3",
                )
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
                let rows = sqlx::query(
                    "SELECT id, team_id, ecosystem, package_name, created_at FROM package_watches \
                     WHERE team_id = $1 ORDER BY created_at, id",
                )
                .bind(team_id)
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                rows.iter().map(watch_from).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn remove_watch(&self, team_id: &str, id: &str) -> Result<bool> {
                let done = sqlx::query("DELETE FROM package_watches WHERE team_id = $1 AND id = $2")
                    .bind(team_id)
                    .bind(id)
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(done.rows_affected() > 0)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn watched_packages(&self) -> Result<Vec<(String, String)>> {
                let rows = sqlx::query(
                    "SELECT DISTINCT ecosystem, package_name FROM package_watches \
                     ORDER BY ecosystem, package_name",
                )
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                rows.iter()
                    .map(|r: &$row| {
                        Ok((
                            r.try_get("ecosystem").map_err(db_error)?,
                            r.try_get("package_name").map_err(db_error)?,
                        ))
                    })
                    .collect()
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
                    Some(status) => sqlx::query(
                        "INSERT INTO package_registry_status (ecosystem, package_name, status, checked_at) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT (ecosystem, package_name) \
                         DO UPDATE SET status = excluded.status, checked_at = excluded.checked_at",
                    )
                    .bind(ecosystem)
                    .bind(package_name)
                    .bind(status)
                    .bind(now.trunc_subsecs(6)),
                    None => sqlx::query(
                        "DELETE FROM package_registry_status WHERE ecosystem = $1 AND package_name = $2",
                    )
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
                let rows = sqlx::query(
                    "SELECT ecosystem, package_name, status FROM package_registry_status",
                )
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                rows.iter()
                    .map(|r: &$row| {
                        Ok((
                            r.try_get("ecosystem").map_err(db_error)?,
                            r.try_get("package_name").map_err(db_error)?,
                            r.try_get("status").map_err(db_error)?,
                        ))
                    })
                    .collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn tracked_packages(&self) -> Result<Vec<TrackedPackage>> {
                let rows = sqlx::query(
                    "SELECT DISTINCT vendor, executable_name FROM hash_records \
                     WHERE vendor IN ('npm', 'pypi', 'go') AND status = 'current'",
                )
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    let r: &$row = r;
                    let ecosystem: String = r.try_get("vendor").map_err(db_error)?;
                    let name: String = r.try_get("executable_name").map_err(db_error)?;
                    // Packages are recorded as `name (ecosystem)`.
                    if let Some(package) = name.strip_suffix(&format!(" ({ecosystem})")) {
                        out.push(TrackedPackage {
                            package_name: package.to_string(),
                            ecosystem,
                        });
                    }
                }
                Ok(out)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn change_alerts(&self, q: &ChangeQuery) -> Result<Page<ChangeAlert>> {
                let watched = i64::from(q.watched_only);
                let total: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "SELECT COUNT(*) FROM change_alerts a WHERE {ALERT_FILTER}"
                )))
                .bind(&q.ecosystem)
                .bind(watched)
                .bind(&q.team_id)
                .fetch_one(&self.pool)
                .await
                .map_err(db_error)?;
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT a.id, a.ecosystem, a.package_name, a.version, a.previous_sha256, \
                     a.latest_sha256, a.observed_at FROM change_alerts a WHERE {ALERT_FILTER} \
                     ORDER BY a.observed_at DESC, a.id DESC LIMIT $4 OFFSET $5"
                )))
                .bind(&q.ecosystem)
                .bind(watched)
                .bind(&q.team_id)
                .bind(i64::from(q.limit))
                .bind(i64::try_from(q.offset).unwrap_or(i64::MAX))
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                let items = rows
                    .iter()
                    .map(|r: &$row| {
                        Ok(ChangeAlert {
                            id: r.try_get("id").map_err(db_error)?,
                            ecosystem: r.try_get("ecosystem").map_err(db_error)?,
                            package_name: r.try_get("package_name").map_err(db_error)?,
                            version: r.try_get("version").map_err(db_error)?,
                            previous_sha256: r.try_get("previous_sha256").map_err(db_error)?,
                            latest_sha256: r.try_get("latest_sha256").map_err(db_error)?,
                            observed_at: r.try_get("observed_at").map_err(db_error)?,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(Page {
                    items,
                    total: count(total),
                })
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn import_advisories(&self, rows: &[AdvisoryRow], now: DateTime<Utc>) -> Result<u64> {
                let mut tx = self.pool.begin().await.map_err(db_error)?;
                let mut written = 0;
                for a in rows {
                    let stored: Option<String> =
                        sqlx::query_scalar("SELECT modified FROM advisories WHERE id = $1")
                            .bind(&a.id)
                            .fetch_optional(&mut *tx)
                            .await
                            .map_err(db_error)?;
                    if stored.is_some_and(|m| m > a.modified) {
                        continue;
                    }
                    sqlx::query("DELETE FROM advisory_packages WHERE advisory_id = $1")
                        .bind(&a.id)
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                    sqlx::query(
                        "INSERT INTO advisories (id, modified, document, imported_at) VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (id) DO UPDATE SET modified = excluded.modified, \
                         document = excluded.document, imported_at = excluded.imported_at",
                    )
                    .bind(&a.id)
                    .bind(&a.modified)
                    .bind(&a.document)
                    .bind(now.trunc_subsecs(6))
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                    for (ecosystem, name) in &a.packages {
                        sqlx::query(
                            "INSERT INTO advisory_packages (ecosystem, package_name, advisory_id) \
                             VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                        )
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
                    // ($1, $2) OR ($3, $4) ...: placeholders only, the values are bound.
                    let filter = (0..batch.len())
                        .map(|i| format!("(p.ecosystem = ${} AND p.package_name = ${})", 2 * i + 1, 2 * i + 2))
                        .collect::<Vec<_>>()
                        .join(" OR ");
                    let sql = format!(
                        "SELECT DISTINCT a.id, a.document FROM advisory_packages p \
                         JOIN advisories a ON a.id = p.advisory_id WHERE {filter}"
                    );
                    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
                    for (ecosystem, name) in batch {
                        query = query.bind(ecosystem).bind(name);
                    }
                    let rows = query.fetch_all(&self.pool).await.map_err(db_error)?;
                    for r in &rows {
                        let r: &$row = r;
                        let id: String = r.try_get("id").map_err(db_error)?;
                        if seen.insert(id) {
                            out.push(r.try_get("document").map_err(db_error)?);
                        }
                    }
                }
                Ok(out)
            }
        }
    };
}

mod sqlite_impl {
    use super::*;
    packages_backend!(SqliteStore, SqliteRow);
}

mod pg_impl {
    use super::*;
    packages_backend!(PgStore, PgRow);
}
