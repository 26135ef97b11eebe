//! The coverage queue: package versions an inventory (an SBOM) asked the service to know,
//! waiting for the next vendor refresh of their channel. Only (ecosystem, name, version)
//! and the state of each are kept: nothing else of the inventory, nor who sent it.

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::backend::Columns;
use crate::{Page, PgStore, Result, SqliteStore, db_error, new_id};

/// One package version: `ecosystem` is the channel that records it (`pypi`, `npm`,
/// `debian`, `ubuntu`), `name` as that channel is asked for it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CoverageItem {
    pub ecosystem: String,
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoverageState {
    /// Waiting for the next refresh of its channel.
    Queued,
    /// The refresh recorded it.
    Done,
    /// The refresh could not record it; the entry says why.
    Failed,
}

impl CoverageState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Done => "done",
            Self::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        match s {
            "queued" => Ok(Self::Queued),
            "done" => Ok(Self::Done),
            "failed" => Ok(Self::Failed),
            other => Err(model::Error::internal(format!(
                "unknown coverage request state {other:?}"
            ))),
        }
    }
}

/// An item of the queue and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoverageEntry {
    pub item: CoverageItem,
    pub state: CoverageState,
    /// Why the refresh could not record it (state `failed`).
    pub error: Option<String>,
    /// When it was last queued.
    pub requested_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Changes each time the item is queued again, so that a refresh that took an earlier
    /// request cannot close a newer one.
    pub ticket: String,
}

/// Whether the store holds a record of one package version: a record of `version` named
/// (in `name_key` form) one of `names`, of vendor `vendor` (or, with `vendor_prefix`, of
/// any vendor starting with it: `Debian ` for every Debian release).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordProbe {
    pub vendor: String,
    pub vendor_prefix: bool,
    pub names: Vec<String>,
    pub version: String,
}

#[async_trait]
pub trait CoverageStore: Send + Sync {
    /// Queues each item that is neither waiting nor done (a failed one is queued again);
    /// for each, in order, its state before this call (`None`: never asked for). One
    /// transaction.
    async fn queue_coverage(
        &self,
        items: &[CoverageItem],
        now: DateTime<Utc>,
    ) -> Result<Vec<Option<CoverageState>>>;
    /// The items waiting for `ecosystem`'s channel, oldest request first, at most `limit`.
    async fn queued_coverage(&self, ecosystem: &str, limit: u32) -> Result<Vec<CoverageEntry>>;
    /// Closes a request taken by a refresh: done (`error` None) or failed. A request
    /// queued again since (another ticket) stays queued.
    async fn finish_coverage(
        &self,
        entry: &CoverageEntry,
        error: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<()>;
    /// Every entry (with `state`, only those in it) in (ecosystem, name, version) order.
    async fn coverage_entries(
        &self,
        state: Option<CoverageState>,
        limit: u32,
        offset: u64,
    ) -> Result<Page<CoverageEntry>>;
    /// For each probe, in order, whether such a record exists (current or superseded).
    async fn records_exist(&self, probes: &[RecordProbe]) -> Result<Vec<bool>>;
}

const ENTRY_COLUMNS: &str =
    "ecosystem, package_name, version, ticket, status, error, requested_at, finished_at";

/// `SELECT` of every entry column from `coverage_requests`, then `rest`.
fn select_entries(rest: &str) -> String {
    format!("SELECT {ENTRY_COLUMNS} FROM coverage_requests {rest}")
}

const ENTRY_STATE: &str = "SELECT status FROM coverage_requests \
     WHERE ecosystem = $1 AND package_name = $2 AND version = $3";
/// Another request may insert it first: then it is waiting already.
const QUEUE_NEW: &str = "INSERT INTO coverage_requests (ecosystem, package_name, version, \
     ticket, status, error, requested_at, finished_at) \
     VALUES ($1, $2, $3, $4, 'queued', NULL, $5, NULL) \
     ON CONFLICT (ecosystem, package_name, version) DO NOTHING";
const QUEUE_FAILED_AGAIN: &str = "UPDATE coverage_requests SET ticket = $4, status = 'queued', \
     error = NULL, requested_at = $5, finished_at = NULL \
     WHERE ecosystem = $1 AND package_name = $2 AND version = $3 \
     AND status = 'failed'";
const QUEUED: &str = "WHERE ecosystem = $1 AND status = 'queued' \
     ORDER BY requested_at, package_name, version LIMIT $2";
const FINISH: &str = "UPDATE coverage_requests SET status = $1, error = $2, finished_at = $3 \
     WHERE ecosystem = $4 AND package_name = $5 AND version = $6 \
     AND ticket = $7 AND status = 'queued'";
/// `$1` is the state or NULL for every state.
const COUNT_ENTRIES: &str = "SELECT COUNT(*) FROM coverage_requests \
     WHERE $1 IS NULL OR status = $1";
const ENTRIES_PAGE: &str = "WHERE $1 IS NULL OR status = $1 \
     ORDER BY ecosystem, package_name, version LIMIT $2 OFFSET $3";

/// How queueing writes an item in `state` (binds: ecosystem, name, version, ticket, now);
/// None when it is queued or done already.
fn queue_write(state: Option<CoverageState>) -> Option<&'static str> {
    match state {
        None => Some(QUEUE_NEW),
        Some(CoverageState::Failed) => Some(QUEUE_FAILED_AGAIN),
        Some(CoverageState::Queued | CoverageState::Done) => None,
    }
}

/// Whether a record of the probe exists: binds are the vendor, the version, then the names
/// in `name_key` form.
fn probe_sql(probe: &RecordProbe) -> String {
    // Placeholders only; the names are bound (indexed by `name_key`).
    let names = (0..probe.names.len())
        .map(|i| format!("${}", i + 3))
        .collect::<Vec<_>>()
        .join(", ");
    let vendor = if probe.vendor_prefix {
        "substr(vendor, 1, length($1)) = $1"
    } else {
        "vendor = $1"
    };
    format!(
        concat!(
            "SELECT 1 FROM hash_records WHERE {vendor} AND version = $2 AND ",
            name_key_sql!(),
            " IN ({names}) LIMIT 1"
        ),
        vendor = vendor,
        names = names
    )
}

fn entry_from(r: &impl Columns) -> Result<CoverageEntry> {
    let state = r.text("status")?;
    Ok(CoverageEntry {
        item: CoverageItem {
            ecosystem: r.text("ecosystem")?,
            name: r.text("package_name")?,
            version: r.text("version")?,
        },
        state: CoverageState::parse(&state)?,
        error: r.opt_text("error")?,
        requested_at: r.time("requested_at")?,
        finished_at: r.opt_time("finished_at")?,
        ticket: r.text("ticket")?,
    })
}

macro_rules! coverage_backend {
    ($store:ident, $row:ty) => {
        #[async_trait]
        impl CoverageStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn queue_coverage(
                &self,
                items: &[CoverageItem],
                now: DateTime<Utc>,
            ) -> Result<Vec<Option<CoverageState>>> {
                let now = now.trunc_subsecs(6);
                let mut tx = Self::write_tx(&self.pool).await?;
                let mut before = Vec::with_capacity(items.len());
                for item in items {
                    let state: Option<String> = sqlx::query_scalar(ENTRY_STATE)
                        .bind(&item.ecosystem)
                        .bind(&item.name)
                        .bind(&item.version)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(db_error)?;
                    let state = state.as_deref().map(CoverageState::parse).transpose()?;
                    let Some(sql) = queue_write(state) else {
                        before.push(state);
                        continue;
                    };
                    let written = sqlx::query(sql)
                        .bind(&item.ecosystem)
                        .bind(&item.name)
                        .bind(&item.version)
                        .bind(new_id())
                        .bind(now)
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?
                        .rows_affected();
                    before.push(if written == 0 {
                        Some(CoverageState::Queued)
                    } else {
                        state
                    });
                }
                tx.commit().await.map_err(db_error)?;
                Ok(before)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn queued_coverage(
                &self,
                ecosystem: &str,
                limit: u32,
            ) -> Result<Vec<CoverageEntry>> {
                let rows: Vec<$row> = sqlx::query(sqlx::AssertSqlSafe(select_entries(QUEUED)))
                    .bind(ecosystem)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(entry_from).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn finish_coverage(
                &self,
                entry: &CoverageEntry,
                error: Option<&str>,
                now: DateTime<Utc>,
            ) -> Result<()> {
                sqlx::query(FINISH)
                    .bind(if error.is_some() { "failed" } else { "done" })
                    .bind(error)
                    .bind(now.trunc_subsecs(6))
                    .bind(&entry.item.ecosystem)
                    .bind(&entry.item.name)
                    .bind(&entry.item.version)
                    .bind(&entry.ticket)
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn coverage_entries(
                &self,
                state: Option<CoverageState>,
                limit: u32,
                offset: u64,
            ) -> Result<Page<CoverageEntry>> {
                let state = state.map(CoverageState::as_str);
                let total: i64 = sqlx::query_scalar(COUNT_ENTRIES)
                    .bind(state)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error)?;
                let rows: Vec<$row> =
                    sqlx::query(sqlx::AssertSqlSafe(select_entries(ENTRIES_PAGE)))
                        .bind(state)
                        .bind(i64::from(limit))
                        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
                        .fetch_all(&self.pool)
                        .await
                        .map_err(db_error)?;
                Ok(Page {
                    items: rows.iter().map(entry_from).collect::<Result<_>>()?,
                    total: u64::try_from(total).unwrap_or(0),
                })
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn records_exist(&self, probes: &[RecordProbe]) -> Result<Vec<bool>> {
                let mut out = Vec::with_capacity(probes.len());
                let mut conn = self.pool.acquire().await.map_err(db_error)?;
                for probe in probes {
                    if probe.names.is_empty() {
                        out.push(false);
                        continue;
                    }
                    let mut query = sqlx::query(sqlx::AssertSqlSafe(probe_sql(probe)))
                        .bind(&probe.vendor)
                        .bind(&probe.version);
                    for name in &probe.names {
                        query = query.bind(model::name_key(name));
                    }
                    let found = query
                        .fetch_optional(&mut *conn)
                        .await
                        .map_err(db_error)?
                        .is_some();
                    out.push(found);
                }
                Ok(out)
            }
        }
    };
}

coverage_backend!(SqliteStore, SqliteRow);
coverage_backend!(PgStore, PgRow);
