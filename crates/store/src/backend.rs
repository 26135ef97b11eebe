//! The SQLite and PostgreSQL stores. One body of code, instantiated per backend by the
//! `backend!` macro: same SQL, same row mapping, different pool and migrations.

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveTime, SubsecRound, Utc};
use model::{HashAlgo, HashRecord, HashValue, NewRecord, RecordSigner, Role, TenantKind, Tier};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{AssertSqlSafe, Row};

use crate::migrate::{self, Migration};
use crate::{
    AccountStore, ExportCursor, ExportQuery, FeedPosition, HealthStore, HistoryQuery, KeyPrincipal,
    NewApiKey, Page, RecordOutcome, RecordStats, RecordStore, Result, Store, Tenant, VendorHealth,
    db_error,
};

pub(crate) const RECORD_COLUMNS: &str = "id, vendor, executable_name, family, version, platform, arch, \
     hash_sha256, hash_sha1, hash_md5, source_url, download_verified, sig_signer, sig_issuer, \
     sig_serial, sig_thumbprint, cert_revoked_at, status, valid_from, valid_until, hmac, added_at, \
     size_bytes";

/// Both backends keep microseconds; truncating here makes them round-trip alike.
fn micros(t: DateTime<Utc>) -> DateTime<Utc> {
    t.trunc_subsecs(6)
}

fn start_of(day: chrono::NaiveDate) -> DateTime<Utc> {
    day.and_time(NaiveTime::MIN).and_utc()
}

/// `$first, $first+1, …` for an IN list of `n` values.
pub(crate) fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn corrupt(column: &str, value: &str) -> model::Error {
    model::Error::internal(format!("stored {column} {value:?} is not valid"))
}

/// Remembers which records failed HMAC verification, for the status page.
#[derive(Default)]
struct IntegrityMonitor {
    failed: Mutex<HashSet<String>>,
    count: AtomicU64,
}

impl IntegrityMonitor {
    fn failed(&self, id: &str) {
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        if failed.insert(id.to_string()) {
            self.count.fetch_add(1, Ordering::Relaxed);
            tracing::error!(record_id = id, "hash record failed HMAC verification");
        }
    }
}

/// Filters shared by history-like queries: (SQL condition, bound text values).
fn platform_arch_filter(
    platform: Option<model::Platform>,
    arch: Option<model::Arch>,
    first: usize,
) -> (String, Vec<String>) {
    let mut sql = String::new();
    let mut binds = Vec::new();
    if let Some(p) = platform {
        binds.push(p.as_str().to_string());
        sql.push_str(&format!(" AND platform = ${}", first + binds.len() - 1));
    }
    if let Some(a) = arch {
        binds.push(a.as_str().to_string());
        sql.push_str(&format!(" AND arch = ${}", first + binds.len() - 1));
    }
    (sql, binds)
}

/// Most hashes `find_by_hashes` sends in one statement (an API lookup holds at most 100).
const FIND_CHUNK: usize = 128;

/// Hashes per `IN` list of a lookup. Without statistics (a fresh database, or autovacuum
/// off) PostgreSQL guesses that each value matches 0.5 % of the table, and from about 20
/// values in one scan it prefers reading the whole table to the index; eight keeps every
/// scan on its index whatever the statistics say.
const FIND_GROUP: usize = 8;

/// The lookup of a batch: one `SELECT … WHERE <hash column> IN (8 values)` per group of
/// eight hashes of one kind, joined by `UNION ALL`, and its binds. The last group of each
/// kind is padded by repeating its last value (a duplicate in an IN list changes nothing),
/// so every group has one shape and batches of a similar mix share prepared statements.
/// A record may come back once per group that names it; the caller de-duplicates.
fn hash_lookup(hashes: &[HashValue]) -> (String, Vec<&str>) {
    let mut selects = Vec::new();
    let mut binds: Vec<&str> = Vec::new();
    for (algo, column) in [
        (HashAlgo::Sha256, "hash_sha256"),
        (HashAlgo::Sha1, "hash_sha1"),
        (HashAlgo::Md5, "hash_md5"),
    ] {
        let values: Vec<&str> = hashes
            .iter()
            .filter(|h| h.algo() == algo)
            .map(HashValue::as_str)
            .collect();
        for group in values.chunks(FIND_GROUP) {
            selects.push(format!(
                "SELECT {RECORD_COLUMNS} FROM hash_records WHERE {column} IN ({})",
                placeholders(binds.len() + 1, FIND_GROUP)
            ));
            binds.extend(group.iter().copied());
            let last = group[group.len() - 1];
            binds.resize(binds.len() + FIND_GROUP - group.len(), last);
        }
    }
    (selects.join(" UNION ALL "), binds)
}

macro_rules! backend {
    ($store:ident, $db:ty, $row:ty, $pool:ty, $name:literal, $migrations:expr, $begin:literal, $lock:expr) => {
        pub struct $store {
            pub(crate) pool: $pool,
            pub(crate) signer: RecordSigner,
            integrity: IntegrityMonitor,
            records_epoch: AtomicU64,
            records_listener: std::sync::RwLock<Option<std::sync::Weak<dyn crate::RecordsListener>>>,
            group: crate::record_writes::GroupCommit,
        }

        impl $store {
            /// Lets the listener catch up with `epoch`, then shows it.
            pub(crate) async fn publish_records_epoch(&self, epoch: u64) {
                let listener = self
                    .records_listener
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                    .and_then(std::sync::Weak::upgrade);
                if let Some(listener) = listener {
                    listener.before_epoch(epoch).await;
                }
                self.records_epoch.fetch_max(epoch, Ordering::AcqRel);
            }

            async fn migrate(pool: &$pool, migrations: &[Migration]) -> Result<()> {
                sqlx::query(migrate::CREATE_TABLE)
                    .execute(pool)
                    .await
                    .map_err(db_error)?;
                for m in migrations {
                    // `$begin` (BEGIN IMMEDIATE on SQLite): a deferred transaction that reads
                    // then writes fails with SQLITE_BUSY when another process migrates too.
                    let mut conn = pool.acquire().await.map_err(db_error)?;
                    let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin)
                        .await
                        .map_err(db_error)?;
                    let done = sqlx::query("SELECT version FROM schema_migrations WHERE version = $1")
                        .bind(m.version)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(db_error)?;
                    if done.is_some() {
                        continue;
                    }
                    // A migration that rebuilds an index of a large table takes a while:
                    // its start is logged, so a slow start shows what it is waiting for.
                    let started = std::time::Instant::now();
                    tracing::info!(backend = $name, version = m.version, "applying migration");
                    sqlx::raw_sql(m.sql).execute(&mut *tx).await.map_err(db_error)?;
                    sqlx::query("INSERT INTO schema_migrations (version) VALUES ($1)")
                        .bind(m.version)
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                    tx.commit().await.map_err(db_error)?;
                    tracing::info!(
                        backend = $name,
                        version = m.version,
                        elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                        "applied migration"
                    );
                }
                Ok(())
            }

            pub(crate) fn record_from_row(&self, row: &$row) -> Result<HashRecord> {
                let get_s = |c: &str| row.try_get::<String, _>(c).map_err(db_error);
                let get_o = |c: &str| row.try_get::<Option<String>, _>(c).map_err(db_error);
                let platform = get_s("platform")?;
                let arch = get_s("arch")?;
                let status = get_s("status")?;
                let record = NewRecord {
                    vendor: get_s("vendor")?,
                    executable_name: get_s("executable_name")?,
                    version: get_s("version")?,
                    platform: platform.parse().map_err(|_| corrupt("platform", &platform))?,
                    arch: arch.parse().map_err(|_| corrupt("arch", &arch))?,
                    hash_sha256: get_s("hash_sha256")?,
                    hash_sha1: get_o("hash_sha1")?,
                    hash_md5: get_o("hash_md5")?,
                    source_url: get_s("source_url")?,
                    download_verified: row.try_get("download_verified").map_err(db_error)?,
                    sig_signer: get_o("sig_signer")?,
                    sig_issuer: get_o("sig_issuer")?,
                    sig_serial: get_o("sig_serial")?,
                    sig_thumbprint: get_o("sig_thumbprint")?,
                    size: {
                        let size: Option<i64> = row.try_get("size_bytes").map_err(db_error)?;
                        match size {
                            Some(n) => Some(
                                u64::try_from(n).map_err(|_| corrupt("size_bytes", &n.to_string()))?,
                            ),
                            None => None,
                        }
                    },
                };
                let id = get_s("id")?;
                let valid_from: DateTime<Utc> = row.try_get("valid_from").map_err(db_error)?;
                // Set when the inserting transaction commits; a row read inside it has none yet.
                let added_at: Option<DateTime<Utc>> = row.try_get("added_at").map_err(db_error)?;
                let integrity_ok = self.signer.verify(&id, &record, &get_s("hmac")?);
                if !integrity_ok {
                    self.integrity.failed(&id);
                }
                Ok(HashRecord {
                    id,
                    record,
                    family: get_s("family")?,
                    status: status.parse().map_err(|_| corrupt("status", &status))?,
                    valid_from,
                    added_at: added_at.unwrap_or(valid_from),
                    valid_until: row.try_get("valid_until").map_err(db_error)?,
                    cert_revoked_at: row.try_get("cert_revoked_at").map_err(db_error)?,
                    integrity_ok,
                })
            }

            /// Moves the shared records epoch inside a record transaction; the new value.
            pub(crate) async fn bump_records_epoch(
                conn: &mut <$db as sqlx::Database>::Connection,
            ) -> Result<u64> {
                let epoch: i64 = sqlx::query_scalar(
                    "UPDATE counters SET value = value + 1 WHERE name = 'records_epoch' \
                     RETURNING value",
                )
                .fetch_one(&mut *conn)
                .await
                .map_err(db_error)?;
                Ok(u64::try_from(epoch).unwrap_or_default())
            }

            async fn read_records_epoch(pool: &$pool) -> Result<u64> {
                let epoch: i64 =
                    sqlx::query_scalar("SELECT value FROM counters WHERE name = 'records_epoch'")
                        .fetch_one(pool)
                        .await
                        .map_err(db_error)?;
                Ok(u64::try_from(epoch).unwrap_or_default())
            }

            /// Fills `name_key` (and the family, also in key form) of rows the migration
            /// could not: names outside ASCII, whose key only Rust computes. A current row
            /// whose new family already has a current record keeps its old family.
            async fn backfill_name_keys(pool: &$pool) -> Result<()> {
                loop {
                    let rows = sqlx::query(
                        "SELECT id, executable_name, version FROM hash_records \
                         WHERE name_key IS NULL LIMIT 500",
                    )
                    .fetch_all(pool)
                    .await
                    .map_err(db_error)?;
                    if rows.is_empty() {
                        return Ok(());
                    }
                    let mut conn = pool.acquire().await.map_err(db_error)?;
                    let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin)
                        .await
                        .map_err(db_error)?;
                    for row in &rows {
                        let id: String = row.try_get("id").map_err(db_error)?;
                        let name: String = row.try_get("executable_name").map_err(db_error)?;
                        let version: String = row.try_get("version").map_err(db_error)?;
                        sqlx::query(
                            "UPDATE hash_records SET name_key = $1, family = CASE WHEN status = 'current' \
                             AND EXISTS (SELECT 1 FROM hash_records o WHERE o.vendor = hash_records.vendor \
                             AND o.family = $2 AND o.platform = hash_records.platform \
                             AND o.arch = hash_records.arch AND o.status = 'current' AND o.id <> $3) \
                             THEN family ELSE $2 END WHERE id = $3",
                        )
                        .bind(model::name_key(&name))
                        .bind(model::family_of(&name, &version))
                        .bind(&id)
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                    }
                    tx.commit().await.map_err(db_error)?;
                }
            }

            fn records_from_rows(&self, rows: Vec<$row>) -> Result<Vec<HashRecord>> {
                rows.iter().map(|r| self.record_from_row(r)).collect()
            }

            fn principal_from_row(row: &$row) -> Result<KeyPrincipal> {
                let get_s = |c: &str| row.try_get::<String, _>(c).map_err(db_error);
                let role = get_s("role")?;
                let tier = get_s("tier")?;
                let kind = get_s("kind")?;
                Ok(KeyPrincipal {
                    key_id: get_s("key_id")?,
                    key_hash: get_s("key_hash")?,
                    team_id: get_s("team_id")?,
                    role: Role::from_str(&role).map_err(|_| corrupt("role", &role))?,
                    tier: Tier::from_str(&tier).map_err(|_| corrupt("tier", &tier))?,
                    tenant_kind: if kind == "platform" {
                        TenantKind::Platform
                    } else {
                        TenantKind::Customer
                    },
                    revoked: row
                        .try_get::<Option<DateTime<Utc>>, _>("revoked_at")
                        .map_err(db_error)?
                        .is_some(),
                    suspended: row.try_get("suspended").map_err(db_error)?,
                })
            }

            /// The export's WHERE clause and its text binds, after the two day bounds
            /// ($1, $2).
            fn export_filter(query: &ExportQuery) -> (String, Vec<String>) {
                let mut sql = String::from("valid_from >= $1 AND valid_from < $2");
                let mut binds = Vec::new();
                if let Some(exe) = &query.executable {
                    binds.push(model::name_key(exe));
                    sql.push_str(&format!(
                        " AND family IN (SELECT family FROM hash_records WHERE name_key = ${n} UNION SELECT ${n})",
                        n = 3
                    ));
                }
                let (extra, more) = platform_arch_filter(query.platform, query.arch, 3 + binds.len());
                sql.push_str(&extra);
                binds.extend(more);
                (sql, binds)
            }
        }

        #[async_trait]
        impl RecordStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn record(&self, record: NewRecord, now: DateTime<Utc>) -> Result<RecordOutcome> {
                use futures::future::Either;
                let record = record.validate()?;
                let now = micros(now);
                loop {
                    let (reply, mut answer) = futures::channel::oneshot::channel();
                    self.group.push(crate::record_writes::Pending {
                        record: record.clone(),
                        now,
                        reply,
                    });
                    // Either another call's writer answers, or this call writes the queue.
                    let answered = loop {
                        let mut lock = self.group.writer.lock();
                        match futures::future::select(&mut answer, &mut lock).await {
                            Either::Left((answered, _)) => break answered,
                            Either::Right((guard, _)) => {
                                let batch = self.group.take();
                                if !batch.is_empty() {
                                    self.write_pending(batch).await;
                                }
                                drop(guard);
                            }
                        }
                    };
                    match answered {
                        Ok(Ok((outcome, epoch))) => {
                            if let Some(epoch) = epoch {
                                self.publish_records_epoch(epoch).await;
                            }
                            return Ok(outcome);
                        }
                        Ok(Err(e)) => return Err(e),
                        // The writer that took it was cancelled before it committed.
                        Err(futures::channel::oneshot::Canceled) => continue,
                    }
                }
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn record_many(
                &self,
                records: Vec<NewRecord>,
                now: DateTime<Utc>,
            ) -> Result<Vec<RecordOutcome>> {
                let now = micros(now);
                let records = records
                    .into_iter()
                    .map(|r| Ok((r.validate()?, now)))
                    .collect::<Result<Vec<_>>>()?;
                if records.is_empty() {
                    return Ok(Vec::new());
                }
                let (outcomes, epoch) = self.write_records(records).await?;
                if let Some(epoch) = epoch {
                    self.publish_records_epoch(epoch).await;
                }
                Ok(outcomes)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn current_records(&self, executable: Option<&str>) -> Result<Vec<HashRecord>> {
                let rows = match executable {
                    Some(name) => sqlx::query(AssertSqlSafe(format!(
                        "SELECT {RECORD_COLUMNS} FROM hash_records \
                         WHERE status = 'current' AND name_key = $1 \
                         ORDER BY executable_name, platform, arch"
                    )))
                    .bind(model::name_key(name))
                    .fetch_all(&self.pool)
                    .await,
                    None => sqlx::query(AssertSqlSafe(format!(
                        "SELECT {RECORD_COLUMNS} FROM hash_records WHERE status = 'current' \
                         ORDER BY executable_name, platform, arch"
                    )))
                    .fetch_all(&self.pool)
                    .await,
                }
                .map_err(db_error)?;
                self.records_from_rows(rows)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn current_records_page(
                &self,
                after: Option<&FeedPosition>,
                limit: u32,
            ) -> Result<Vec<HashRecord>> {
                let rows = match after {
                    None => sqlx::query(AssertSqlSafe(format!(
                        "SELECT {RECORD_COLUMNS} FROM hash_records WHERE status = 'current' \
                         ORDER BY executable_name, platform, arch, id LIMIT $1"
                    )))
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await,
                    Some(p) => sqlx::query(AssertSqlSafe(format!(
                        "SELECT {RECORD_COLUMNS} FROM hash_records WHERE status = 'current' \
                         AND (executable_name, platform, arch, id) > ($1, $2, $3, $4) \
                         ORDER BY executable_name, platform, arch, id LIMIT $5"
                    )))
                    .bind(&p.executable_name)
                    .bind(&p.platform)
                    .bind(&p.arch)
                    .bind(&p.id)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await,
                }
                .map_err(db_error)?;
                self.records_from_rows(rows)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn find_by_hashes(
                &self,
                hashes: &[HashValue],
                include_superseded: bool,
            ) -> Result<Vec<HashRecord>> {
                let mut found = Vec::new();
                // A record matched by several of the submitted hashes is returned once.
                let mut seen = HashSet::new();
                // One statement per chunk, whatever mix of kinds it holds: each database
                // round trip costs more than the index probes of a whole API request.
                for chunk in hashes.chunks(FIND_CHUNK) {
                    let (sql, binds) = hash_lookup(chunk);
                    if binds.is_empty() {
                        continue;
                    }
                    let mut q = sqlx::query(AssertSqlSafe(sql));
                    for v in binds {
                        q = q.bind(v);
                    }
                    let rows = q.fetch_all(&self.pool).await.map_err(db_error)?;
                    for row in &rows {
                        // Superseded records are left out here rather than in SQL: a
                        // `status` condition invites PostgreSQL, without statistics, to
                        // scan the whole partial index of current records. Left out before
                        // their HMAC is checked, as the SQL condition did.
                        if !include_superseded
                            && row.try_get::<&str, _>("status").map_err(db_error)? != "current"
                        {
                            continue;
                        }
                        let id: &str = row.try_get("id").map_err(db_error)?;
                        if seen.insert(id.to_string()) {
                            found.push(self.record_from_row(row)?);
                        }
                    }
                }
                Ok(found)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn records_after(
                &self,
                after: Option<&str>,
                limit: u32,
            ) -> Result<Vec<HashRecord>> {
                let rows = sqlx::query(AssertSqlSafe(format!(
                    "SELECT {RECORD_COLUMNS} FROM hash_records WHERE id > $1 ORDER BY id LIMIT $2"
                )))
                .bind(after.unwrap_or(""))
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                self.records_from_rows(rows)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn records_changed_after(
                &self,
                epoch: u64,
                after: Option<&str>,
                limit: u32,
            ) -> Result<Vec<(u64, HashRecord)>> {
                // In (changed_epoch, id) order, which its index holds: ordered by id alone,
                // planners walk the whole primary key.
                let condition = match after {
                    None => "changed_epoch > $1",
                    Some(_) => "changed_epoch >= $1 AND (changed_epoch > $1 OR id > $2)",
                };
                let rows = sqlx::query(AssertSqlSafe(format!(
                    "SELECT {RECORD_COLUMNS}, changed_epoch FROM hash_records WHERE {condition} \
                     ORDER BY changed_epoch, id LIMIT $3"
                )))
                .bind(i64::try_from(epoch).unwrap_or(i64::MAX))
                .bind(after.unwrap_or(""))
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                rows.iter()
                    .map(|row| {
                        let changed: i64 = row.try_get("changed_epoch").map_err(db_error)?;
                        Ok((u64::try_from(changed).unwrap_or_default(), self.record_from_row(row)?))
                    })
                    .collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn history(&self, query: &HistoryQuery) -> Result<Page<HashRecord>> {
                let (extra, binds) = platform_arch_filter(query.platform, query.arch, 2);
                let filter = format!(
                    "family IN (SELECT family FROM hash_records WHERE name_key = $1 \
                     UNION SELECT $1){extra}"
                );
                let count_sql = format!("SELECT COUNT(*) FROM hash_records WHERE {filter}");
                let mut count = sqlx::query_scalar::<_, i64>(AssertSqlSafe(count_sql)).bind(model::name_key(&query.executable));
                for b in &binds {
                    count = count.bind(b);
                }
                let total = count.fetch_one(&self.pool).await.map_err(db_error)?;
                let n = 2 + binds.len();
                let page_sql = format!(
                    "SELECT {RECORD_COLUMNS} FROM hash_records WHERE {filter} \
                     ORDER BY valid_from DESC, id DESC LIMIT ${} OFFSET ${}",
                    n,
                    n + 1
                );
                let mut q = sqlx::query(AssertSqlSafe(page_sql)).bind(model::name_key(&query.executable));
                for b in &binds {
                    q = q.bind(b);
                }
                let rows = q
                    .bind(i64::from(query.limit))
                    .bind(i64::try_from(query.offset).unwrap_or(i64::MAX))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(Page {
                    items: self.records_from_rows(rows)?,
                    total: u64::try_from(total).unwrap_or(0),
                })
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn export_count(&self, query: &ExportQuery) -> Result<u64> {
                let (filter, binds) = Self::export_filter(query);
                let sql = format!("SELECT COUNT(*) FROM hash_records WHERE {filter}");
                let mut q = sqlx::query_scalar::<_, i64>(AssertSqlSafe(sql))
                    .bind(start_of(query.from))
                    .bind(start_of(query.to) + chrono::Duration::days(1));
                for b in &binds {
                    q = q.bind(b);
                }
                let n = q.fetch_one(&self.pool).await.map_err(db_error)?;
                Ok(u64::try_from(n).unwrap_or(0))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn export_page(
                &self,
                query: &ExportQuery,
                after: Option<&ExportCursor>,
                limit: u32,
            ) -> Result<Vec<HashRecord>> {
                let (mut filter, binds) = Self::export_filter(query);
                let mut n = 3 + binds.len();
                if after.is_some() {
                    filter.push_str(&format!(
                        " AND (valid_from > ${n} OR (valid_from = ${n} AND id > ${}))",
                        n + 1
                    ));
                    n += 2;
                }
                let sql = format!(
                    "SELECT {RECORD_COLUMNS} FROM hash_records WHERE {filter} \
                     ORDER BY valid_from, id LIMIT ${n}"
                );
                let mut q = sqlx::query(AssertSqlSafe(sql))
                    .bind(start_of(query.from))
                    .bind(start_of(query.to) + chrono::Duration::days(1));
                for b in &binds {
                    q = q.bind(b);
                }
                if let Some(c) = after {
                    q = q.bind(c.valid_from).bind(&c.id);
                }
                let rows = q
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                self.records_from_rows(rows)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn executable_names_with_prefix(
                &self,
                prefix: &str,
                limit: u32,
            ) -> Result<Vec<String>> {
                let key = model::name_key(prefix);
                let limit = limit.min(crate::MAX_NAME_SUGGESTIONS);
                if key.chars().count() < crate::MIN_NAME_PREFIX_CHARS || limit == 0 {
                    return Ok(Vec::new());
                }
                let pattern = format!(
                    "{}%",
                    key.replace('\\', "\\\\")
                        .replace('%', "\\%")
                        .replace('_', "\\_")
                );
                // One spelling per name: the smallest, so the answer does not vary by row order.
                let names = sqlx::query_scalar::<_, String>(
                    "SELECT MIN(executable_name) FROM hash_records \
                     WHERE name_key LIKE $1 ESCAPE '\\' \
                     GROUP BY name_key ORDER BY name_key LIMIT $2",
                )
                .bind(pattern)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                Ok(names)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn stats(&self) -> Result<RecordStats> {
                // From the counters every record write moves, never from the records. A row
                // changed behind the service's back (noted by a trigger; normally none) is
                // verified here: a record failing its HMAC is no known-good hash, as the
                // lookup and the feed already treat it.
                let rows = sqlx::query("SELECT kind, key, n FROM record_counts")
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                let mut current = 0i64;
                let mut hashes = 0i64;
                let mut vendors = std::collections::HashMap::<String, i64>::new();
                let mut platforms = std::collections::HashMap::<String, i64>::new();
                for row in &rows {
                    let kind: String = row.try_get("kind").map_err(db_error)?;
                    let key: String = row.try_get("key").map_err(db_error)?;
                    let n: i64 = row.try_get("n").map_err(db_error)?;
                    match kind.as_str() {
                        "current" => current = n,
                        "sha256" => hashes = n,
                        "vendor" => {
                            vendors.insert(key, n);
                        }
                        "platform" => {
                            platforms.insert(key, n);
                        }
                        _ => {}
                    }
                }
                let flagged = sqlx::query(AssertSqlSafe(format!(
                    "SELECT u.counted_vendor, u.counted_platform, u.counted_sha256, u.deleted, \
                     {} FROM records_unverified u \
                     LEFT JOIN hash_records r ON r.id = u.id WHERE u.counted_current",
                    RECORD_COLUMNS
                        .split(", ")
                        .map(|c| format!("r.{c}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                let mut failed_ids = HashSet::new();
                let mut suspect_hashes = HashSet::new();
                for row in &flagged {
                    let deleted: bool = row.try_get("deleted").map_err(db_error)?;
                    if !deleted {
                        // Once superseded through the service, the counts left it already.
                        let r = self.record_from_row(row)?;
                        if r.integrity_ok || r.status != model::RecordStatus::Current {
                            continue;
                        }
                    }
                    if !deleted {
                        failed_ids.insert(row.try_get::<String, _>("id").map_err(db_error)?);
                    }
                    let platform: String = row.try_get("counted_platform").map_err(db_error)?;
                    *platforms.entry(platform).or_default() -= 1;
                    suspect_hashes.insert(row.try_get::<String, _>("counted_sha256").map_err(db_error)?);
                    if deleted {
                        current -= 1;
                        let vendor: String = row.try_get("counted_vendor").map_err(db_error)?;
                        *vendors.entry(vendor).or_default() -= 1;
                    }
                }
                // A counted hash stays known-good while another current record of it verifies.
                for sha256 in suspect_hashes {
                    let rows = sqlx::query(AssertSqlSafe(format!(
                        "SELECT {RECORD_COLUMNS} FROM hash_records \
                         WHERE hash_sha256 = $1 AND status = 'current'"
                    )))
                    .bind(&sha256)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                    let mut still_good = false;
                    for row in &rows {
                        let r = self.record_from_row(row)?;
                        still_good |= r.integrity_ok && !failed_ids.contains(&r.id);
                    }
                    if !still_good {
                        hashes -= 1;
                    }
                }
                let count = |n: i64| u64::try_from(n).unwrap_or(0);
                let positive = |m: &std::collections::HashMap<String, i64>, skip: &str| {
                    m.iter().filter(|(k, n)| **n > 0 && k.as_str() != skip).count() as u64
                };
                Ok(RecordStats {
                    known_good_hashes: count(hashes),
                    total_vendors: positive(&vendors, ""),
                    // `universal` marks platform-neutral artifacts, not a platform.
                    total_platforms: positive(&platforms, model::Platform::Universal.as_str()),
                    total_records: count(current),
                })
            }
        }

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
                let mut conn = self.pool.acquire().await.map_err(db_error)?;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin)
                    .await
                    .map_err(db_error)?;
                if let Some(lock) = $lock {
                    sqlx::query(lock)
                        .bind("tenants")
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                }
                let clash = sqlx::query(
                    "SELECT team_id FROM tenants WHERE team_id = $1 OR (kind = 'platform' AND $2 = 'platform')",
                )
                .bind(team_id)
                .bind(kind.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?;
                if let Some(row) = clash {
                    let existing: String = row.try_get("team_id").map_err(db_error)?;
                    return Err(model::Error::Conflict(if existing == team_id {
                        format!("account {team_id:?} already exists")
                    } else {
                        format!("the platform tenant already exists ({existing:?})")
                    }));
                }
                sqlx::query(
                    "INSERT INTO tenants (team_id, kind, tier, suspended, created_at) VALUES ($1, $2, $3, FALSE, $4)",
                )
                .bind(team_id)
                .bind(kind.as_str())
                .bind(tier.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
                sqlx::query(
                    "INSERT INTO api_keys (key_id, team_id, key_hash, role, label, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
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
                let row = sqlx::query(
                    "SELECT team_id, kind, tier, suspended, created_at FROM tenants WHERE team_id = $1",
                )
                .bind(team_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
                let Some(row) = row else { return Ok(None) };
                let tier: String = row.try_get("tier").map_err(db_error)?;
                let kind: String = row.try_get("kind").map_err(db_error)?;
                Ok(Some(Tenant {
                    team_id: row.try_get("team_id").map_err(db_error)?,
                    kind: if kind == "platform" { TenantKind::Platform } else { TenantKind::Customer },
                    tier: Tier::from_str(&tier).map_err(|_| corrupt("tier", &tier))?,
                    suspended: row.try_get("suspended").map_err(db_error)?,
                    created_at: row.try_get("created_at").map_err(db_error)?,
                }))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn key_by_hash(&self, key_hash: &str) -> Result<Option<KeyPrincipal>> {
                let row = sqlx::query(
                    "SELECT k.key_id, k.key_hash, k.team_id, k.role, k.revoked_at, t.tier, t.kind, t.suspended \
                     FROM api_keys k JOIN tenants t ON t.team_id = k.team_id WHERE k.key_hash = $1",
                )
                .bind(key_hash)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
                row.as_ref().map(Self::principal_from_row).transpose()
            }
        }

        #[async_trait]
        impl HealthStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn ping(&self) -> Result<()> {
                sqlx::query("SELECT 1").execute(&self.pool).await.map_err(db_error)?;
                Ok(())
            }

            fn pool_stats(&self) -> crate::PoolStats {
                crate::PoolStats {
                    size: self.pool.size(),
                    idle: u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX),
                    max: self.pool.options().get_max_connections(),
                }
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn vendor_health(&self) -> Result<Vec<VendorHealth>> {
                let rows = sqlx::query(
                    "SELECT v.vendor, h.last_success_at, h.last_error_at, h.last_error, v.records FROM \
                     (SELECT key AS vendor, n AS records FROM record_counts WHERE kind = 'vendor' \
                      UNION SELECT vendor, 0 FROM vendor_health \
                      WHERE vendor NOT IN (SELECT key FROM record_counts WHERE kind = 'vendor')) v \
                     LEFT JOIN vendor_health h ON h.vendor = v.vendor ORDER BY v.vendor",
                )
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                rows.iter()
                    .map(|row| {
                        let records: i64 = row.try_get("records").map_err(db_error)?;
                        Ok(VendorHealth {
                            vendor: row.try_get("vendor").map_err(db_error)?,
                            last_success_at: row.try_get("last_success_at").map_err(db_error)?,
                            last_error_at: row.try_get("last_error_at").map_err(db_error)?,
                            last_error: row.try_get("last_error").map_err(db_error)?,
                            records: u64::try_from(records).unwrap_or(0),
                        })
                    })
                    .collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn record_vendor_run(
                &self,
                vendor: &str,
                error: Option<&str>,
                now: DateTime<Utc>,
            ) -> Result<()> {
                let now = micros(now);
                let query = match error {
                    Some(error) => sqlx::query(
                        "INSERT INTO vendor_health (vendor, last_error_at, last_error) VALUES ($1, $2, $3) \
                         ON CONFLICT (vendor) DO UPDATE SET last_error_at = $2, last_error = $3",
                    )
                    .bind(vendor)
                    .bind(now)
                    .bind(error),
                    None => sqlx::query(
                        "INSERT INTO vendor_health (vendor, last_success_at) VALUES ($1, $2) \
                         ON CONFLICT (vendor) DO UPDATE SET last_success_at = $2",
                    )
                    .bind(vendor)
                    .bind(now),
                };
                query.execute(&self.pool).await.map_err(db_error)?;
                Ok(())
            }
        }

        #[async_trait]
        impl Store for $store {
            fn integrity_failures(&self) -> u64 {
                self.integrity.count.load(Ordering::Relaxed)
            }

            fn backend(&self) -> &'static str {
                $name
            }

            fn records_epoch(&self) -> u64 {
                self.records_epoch.load(Ordering::Acquire)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn poll_records_epoch(&self) -> Result<u64> {
                let epoch = Self::read_records_epoch(&self.pool).await?;
                if epoch > self.records_epoch.load(Ordering::Acquire) {
                    self.publish_records_epoch(epoch).await;
                }
                Ok(self.records_epoch.load(Ordering::Acquire).max(epoch))
            }

            fn listen_to_records(&self, listener: std::sync::Weak<dyn crate::RecordsListener>) {
                *self
                    .records_listener
                    .write()
                    .unwrap_or_else(|e| e.into_inner()) = Some(listener);
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn close(&self) {
                self.pool.close().await;
            }
        }
    };
}

// `$lock`: a statement that serialises the check-then-write transactions (record,
// create_tenant_with_key) on one key ($1) until commit. SQLite needs none: BEGIN IMMEDIATE
// already admits one writer at a time. PostgreSQL (READ COMMITTED) takes a transaction-scoped
// advisory lock; without it two concurrent writers both see "no current record" / "no
// platform tenant" and either hit the unique index or create two platform tenants.
backend!(
    SqliteStore,
    sqlx::Sqlite,
    SqliteRow,
    SqlitePool,
    "sqlite",
    migrate::SQLITE,
    "BEGIN IMMEDIATE",
    None::<&'static str>
);
crate::record_writes::record_writer!(
    SqliteStore,
    sqlx::Sqlite,
    "BEGIN IMMEDIATE",
    None::<&'static str>,
    crate::record_writes::sqlite_update,
    crate::record_writes::sqlite_insert
);
crate::record_writes::record_writer!(
    PgStore,
    sqlx::Postgres,
    "BEGIN",
    Some("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"),
    crate::record_writes::pg_update,
    crate::record_writes::pg_insert
);
backend!(
    PgStore,
    sqlx::Postgres,
    PgRow,
    PgPool,
    "postgres",
    migrate::POSTGRES,
    "BEGIN",
    Some("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
);

impl SqliteStore {
    /// Opens (creating if needed) the SQLite database: WAL mode so readers never wait for
    /// the writer, `synchronous = NORMAL` which in WAL mode loses no committed transaction
    /// when the process dies.
    pub async fn connect(url: &str, signer: RecordSigner) -> Result<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| model::Error::bad_request(format!("invalid SQLite URL: {e}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            // Reads map the file (the OS page cache, shared by every connection) instead
            // of copying each page with a read() into a 2 MB per-connection cache: lookups
            // probe three hash indexes at random. Capped by SQLite at its compiled maximum.
            .pragma("mmap_size", "2147418112");
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            // A connection to a local file cannot go stale; the default ping on every
            // acquire would cost a round trip to the connection's worker thread.
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .map_err(db_error)?;
        Self::migrate(&pool, migrate::SQLITE).await?;
        Self::backfill_name_keys(&pool).await?;
        let epoch = Self::read_records_epoch(&pool).await?;
        Ok(Self {
            pool,
            signer,
            integrity: IntegrityMonitor::default(),
            records_epoch: AtomicU64::new(epoch),
            records_listener: std::sync::RwLock::new(None),
            group: crate::record_writes::GroupCommit::default(),
        })
    }
}

impl PgStore {
    pub async fn connect(url: &str, signer: RecordSigner) -> Result<Self> {
        Self::connect_with(url, signer, crate::StoreOptions::default()).await
    }

    pub async fn connect_with(
        url: &str,
        signer: RecordSigner,
        store_options: crate::StoreOptions,
    ) -> Result<Self> {
        // No JIT: the store runs short indexed statements, and without statistics (a fresh
        // database, or autovacuum off) PostgreSQL overestimates a 100-hash lookup enough
        // to compile it with LLVM, which costs hundreds of milliseconds per execution.
        let options = PgConnectOptions::from_str(url)
            .map_err(db_error)?
            .options([("jit", "off")]);
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(store_options.acquire_timeout)
            .connect_with(options)
            .await
            .map_err(db_error)?;
        // Replicas starting together must not race on migrations.
        let mut lock = pool.acquire().await.map_err(db_error)?;
        sqlx::query("SELECT pg_advisory_lock(7212468310)")
            .execute(&mut *lock)
            .await
            .map_err(db_error)?;
        let migrated = Self::migrate(&pool, migrate::POSTGRES).await;
        sqlx::query("SELECT pg_advisory_unlock(7212468310)")
            .execute(&mut *lock)
            .await
            .map_err(db_error)?;
        migrated?;
        Self::backfill_name_keys(&pool).await?;
        let epoch = Self::read_records_epoch(&pool).await?;
        Ok(Self {
            pool,
            signer,
            integrity: IntegrityMonitor::default(),
            records_epoch: AtomicU64::new(epoch),
            records_listener: std::sync::RwLock::new(None),
            group: crate::record_writes::GroupCommit::default(),
        })
    }
}
