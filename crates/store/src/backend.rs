//! The SQLite and PostgreSQL stores: the two structs, opening them, their migrations, the
//! records epoch and the umbrella [`Store`]. Each aggregate's trait is implemented for both
//! in the aggregate's own file (`records.rs`, `accounts.rs`, `health.rs`, …) by a thin
//! macro over plain functions: same SQL, same row mapping, different pool and migrations.

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, SubsecRound, Utc};
use model::RecordSigner;
use sqlx::Row;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};

use crate::migrate::{self, Migration};
use crate::{Result, Store, db_error};

/// Both backends keep microseconds; truncating here makes them round-trip alike.
pub(crate) fn micros(t: DateTime<Utc>) -> DateTime<Utc> {
    t.trunc_subsecs(6)
}

/// `$first, $first+1, …` for an IN list of `n` values.
pub(crate) fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How a backend marks the parameters of a statement that binds many values (an `IN` list,
/// a multi-row `INSERT`). SQLite accepts PostgreSQL's `$N`, but its driver looks up the name
/// of every numbered parameter by a walk over all of them, so binding such a statement costs
/// the square of their number (two thirds of an import's time at 24 × 500 `$N` a
/// statement); anonymous `?` are bound in the order they appear, which is the order of the
/// numbers in every statement built this way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Params {
    /// `$1, $2, …`: PostgreSQL.
    Numbered,
    /// `?, ?, …`: SQLite.
    Anonymous,
}

impl Params {
    /// The `i`-th parameter.
    pub(crate) fn one(self, i: usize) -> String {
        match self {
            Params::Numbered => format!("${i}"),
            Params::Anonymous => "?".to_string(),
        }
    }

    /// `n` parameters from the `first`-th, comma-separated.
    pub(crate) fn list(self, first: usize, n: usize) -> String {
        match self {
            Params::Numbered => placeholders(first, n),
            Params::Anonymous => vec!["?"; n].join(", "),
        }
    }

    /// `rows` rows of `columns` parameters each, `(…), (…)`, numbered from the first.
    pub(crate) fn rows(self, rows: usize, columns: usize) -> String {
        (0..rows)
            .map(|r| format!("({})", self.list(r * columns + 1, columns)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

pub(crate) fn corrupt(column: &str, value: &str) -> model::Error {
    model::Error::internal(format!("stored {column} {value:?} is not valid"))
}

/// The lowercase hex of a digest or HMAC column, which holds the bytes.
pub(crate) fn hex_column(row: &impl Columns, column: &str) -> Result<String> {
    Ok(lower_hex(row.bytes_ref(column)?))
}

/// [`hex_column`] of a column that may be NULL.
pub(crate) fn opt_hex_column(row: &impl Columns, column: &str) -> Result<Option<String>> {
    Ok(row.opt_bytes_ref(column)?.map(lower_hex))
}

/// `hex::encode`, two digits a byte written straight into the string: `hex::encode`
/// collects them a `char` at a time, which was a twentieth of reading a page of records
/// (four digests and an id a row).
fn lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// The bytes a digest or HMAC column holds, from the hex the service handles.
pub(crate) fn hex_bytes(column: &str, hex: &str) -> Result<Vec<u8>> {
    // Into a buffer of the right size: `hex::decode` collects byte by byte, which cost an
    // import about 4 % of its time with four values (three digests, the HMAC) a record.
    let mut bytes = vec![0; hex.len() / 2];
    hex::decode_to_slice(hex, &mut bytes)
        .map_err(|_| model::Error::internal(format!("{column} {hex:?} is not hexadecimal")))?;
    Ok(bytes)
}

/// Remembers which records failed HMAC verification, for the status page.
#[derive(Default)]
pub(crate) struct IntegrityMonitor {
    failed: Mutex<HashSet<String>>,
    count: AtomicU64,
}

impl IntegrityMonitor {
    pub(crate) fn failed(&self, id: &str) {
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        if failed.insert(id.to_string()) {
            self.count.fetch_add(1, Ordering::Relaxed);
            tracing::error!(record_id = id, "hash record failed HMAC verification");
        }
    }
}

/// The columns of a result row by name, whichever backend read it: what lets row mapping
/// be plain functions shared by both.
pub(crate) trait Columns {
    fn text(&self, column: &str) -> Result<String>;
    fn text_ref(&self, column: &str) -> Result<&str>;
    fn opt_text(&self, column: &str) -> Result<Option<String>>;
    fn int(&self, column: &str) -> Result<i64>;
    fn int4(&self, column: &str) -> Result<i32>;
    fn opt_int(&self, column: &str) -> Result<Option<i64>>;
    fn flag(&self, column: &str) -> Result<bool>;
    fn opt_flag(&self, column: &str) -> Result<Option<bool>>;
    fn time(&self, column: &str) -> Result<DateTime<Utc>>;
    fn opt_time(&self, column: &str) -> Result<Option<DateTime<Utc>>>;
    /// A vendor record's time ([`crate::records::RecordTime`]).
    fn record_time(&self, column: &str) -> Result<DateTime<Utc>>;
    fn opt_record_time(&self, column: &str) -> Result<Option<DateTime<Utc>>>;
    fn date(&self, column: &str) -> Result<NaiveDate>;
    fn opt_date(&self, column: &str) -> Result<Option<NaiveDate>>;
    fn opt_bytes(&self, column: &str) -> Result<Option<Vec<u8>>>;
    fn bytes_ref(&self, column: &str) -> Result<&[u8]>;
    fn opt_bytes_ref(&self, column: &str) -> Result<Option<&[u8]>>;
}

macro_rules! columns {
    ($row:ty) => {
        impl Columns for $row {
            fn text(&self, column: &str) -> Result<String> {
                self.try_get(column).map_err(db_error)
            }
            fn text_ref(&self, column: &str) -> Result<&str> {
                self.try_get(column).map_err(db_error)
            }
            fn opt_text(&self, column: &str) -> Result<Option<String>> {
                self.try_get(column).map_err(db_error)
            }
            fn int(&self, column: &str) -> Result<i64> {
                self.try_get(column).map_err(db_error)
            }
            fn int4(&self, column: &str) -> Result<i32> {
                self.try_get(column).map_err(db_error)
            }
            fn opt_int(&self, column: &str) -> Result<Option<i64>> {
                self.try_get(column).map_err(db_error)
            }
            fn flag(&self, column: &str) -> Result<bool> {
                self.try_get(column).map_err(db_error)
            }
            fn opt_flag(&self, column: &str) -> Result<Option<bool>> {
                self.try_get(column).map_err(db_error)
            }
            fn time(&self, column: &str) -> Result<DateTime<Utc>> {
                self.try_get(column).map_err(db_error)
            }
            fn opt_time(&self, column: &str) -> Result<Option<DateTime<Utc>>> {
                self.try_get(column).map_err(db_error)
            }
            fn record_time(&self, column: &str) -> Result<DateTime<Utc>> {
                let t: crate::records::RecordTime = self.try_get(column).map_err(db_error)?;
                Ok(t.0)
            }
            fn opt_record_time(&self, column: &str) -> Result<Option<DateTime<Utc>>> {
                let t: Option<crate::records::RecordTime> =
                    self.try_get(column).map_err(db_error)?;
                Ok(t.map(|t| t.0))
            }
            fn date(&self, column: &str) -> Result<NaiveDate> {
                self.try_get(column).map_err(db_error)
            }
            fn opt_date(&self, column: &str) -> Result<Option<NaiveDate>> {
                self.try_get(column).map_err(db_error)
            }
            fn opt_bytes(&self, column: &str) -> Result<Option<Vec<u8>>> {
                self.try_get(column).map_err(db_error)
            }
            fn bytes_ref(&self, column: &str) -> Result<&[u8]> {
                self.try_get(column).map_err(db_error)
            }
            fn opt_bytes_ref(&self, column: &str) -> Result<Option<&[u8]>> {
                self.try_get(column).map_err(db_error)
            }
        }
    };
}

columns!(SqliteRow);
columns!(PgRow);

const MIGRATION_DONE: &str = "SELECT version FROM schema_migrations WHERE version = $1";
const MIGRATION_APPLIED: &str = "INSERT INTO schema_migrations (version) VALUES ($1)";
const BUMP_RECORDS_EPOCH: &str =
    "UPDATE counters SET value = value + 1 WHERE name = 'records_epoch' RETURNING value";
const READ_RECORDS_EPOCH: &str = "SELECT value FROM counters WHERE name = 'records_epoch'";
pub(crate) const UNFILLED_NAME_KEYS: &str =
    "SELECT id, executable_name, version FROM hash_records WHERE name_key IS NULL LIMIT 500";
// The family's columns in the subquery are those of `o`, its innermost table.
const FILL_NAME_KEY: &str = concat!(
    "UPDATE hash_records SET name_key = $1, family = CASE \
     WHEN status = 'current' AND EXISTS (SELECT 1 FROM hash_records o \
     WHERE o.vendor = hash_records.vendor AND ",
    family_sql!(),
    " = $2 AND o.platform = hash_records.platform \
     AND o.arch = hash_records.arch AND o.status = 'current' AND o.id <> $3) \
     THEN family ELSE $2 END WHERE id = $3"
);

/// A counter read from the database; never negative.
fn epoch_of(value: i64) -> u64 {
    u64::try_from(value).unwrap_or_default()
}

/// How long a migration took, for its log line.
fn elapsed_ms(started: std::time::Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

macro_rules! backend {
    ($store:ident, $db:ty, $pool:ty, $name:literal) => {
        pub struct $store {
            pub(crate) pool: $pool,
            pub(crate) signer: RecordSigner,
            pub(crate) integrity: IntegrityMonitor,
            records_epoch: AtomicU64,
            records_listener:
                std::sync::RwLock<Option<std::sync::Weak<dyn crate::RecordsListener>>>,
            pub(crate) group: crate::record_writes::GroupCommit,
        }

        impl $store {
            fn new(pool: $pool, signer: RecordSigner, epoch: u64) -> Self {
                Self {
                    pool,
                    signer,
                    integrity: IntegrityMonitor::default(),
                    records_epoch: AtomicU64::new(epoch),
                    records_listener: std::sync::RwLock::new(None),
                    group: crate::record_writes::GroupCommit::default(),
                }
            }

            /// Begins a transaction that writes, holding the write lock from its start
            /// (`BEGIN IMMEDIATE` on SQLite, waiting the busy timeout for another writer).
            /// A deferred SQLite transaction that reads before it writes is refused at once
            /// ("database is locked") when another connection commits in between.
            pub(crate) async fn write_tx(pool: &$pool) -> Result<sqlx::Transaction<'static, $db>> {
                pool.begin_with(Self::BEGIN).await.map_err(db_error)
            }

            /// Runs `write` on a connection with the settings of a transaction that writes
            /// many rows ([`Self::WRITER_SETTINGS`]), undone afterwards whatever `write`
            /// returned, so the pool's idle connections do not keep them.
            pub(crate) async fn with_writer_settings<T>(
                &self,
                write: impl AsyncFnOnce(&mut <$db as sqlx::Database>::Connection) -> Result<T>,
            ) -> Result<T> {
                let settings = Self::WRITER_SETTINGS;
                let mut conn = self.pool.acquire().await.map_err(db_error)?;
                sqlx::raw_sql(settings.set)
                    .execute(&mut *conn)
                    .await
                    .map_err(db_error)?;
                let written = write(&mut conn).await;
                sqlx::raw_sql(settings.undo)
                    .execute(&mut *conn)
                    .await
                    .map_err(db_error)?;
                written
            }

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
                    // Another process may be migrating too.
                    let mut tx = Self::write_tx(pool).await?;
                    let done = sqlx::query(MIGRATION_DONE)
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
                    sqlx::raw_sql(m.sql)
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                    sqlx::query(MIGRATION_APPLIED)
                        .bind(m.version)
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                    tx.commit().await.map_err(db_error)?;
                    tracing::info!(
                        backend = $name,
                        version = m.version,
                        elapsed_ms = elapsed_ms(started),
                        "applied migration"
                    );
                }
                Ok(())
            }

            /// Moves the shared records epoch inside a record transaction; the new value.
            pub(crate) async fn bump_records_epoch(
                conn: &mut <$db as sqlx::Database>::Connection,
            ) -> Result<u64> {
                let epoch: i64 = sqlx::query_scalar(BUMP_RECORDS_EPOCH)
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(db_error)?;
                Ok(epoch_of(epoch))
            }

            async fn read_records_epoch(pool: &$pool) -> Result<u64> {
                let epoch: i64 = sqlx::query_scalar(READ_RECORDS_EPOCH)
                    .fetch_one(pool)
                    .await
                    .map_err(db_error)?;
                Ok(epoch_of(epoch))
            }

            /// Fills `name_key` (and the family, also in key form) of rows the migration
            /// could not: names outside ASCII, whose key only Rust computes. A current row
            /// whose new family already has a current record keeps its old family.
            async fn backfill_name_keys(pool: &$pool) -> Result<()> {
                loop {
                    let rows = sqlx::query(UNFILLED_NAME_KEYS)
                        .fetch_all(pool)
                        .await
                        .map_err(db_error)?;
                    if rows.is_empty() {
                        return Ok(());
                    }
                    let mut tx = Self::write_tx(pool).await?;
                    for row in &rows {
                        let id = row.bytes_ref("id")?;
                        let name = row.text("executable_name")?;
                        let version = row.text("version")?;
                        sqlx::query(FILL_NAME_KEY)
                            .bind(model::name_key(&name))
                            .bind(model::family_of(&name, &version))
                            .bind(id)
                            .execute(&mut *tx)
                            .await
                            .map_err(db_error)?;
                    }
                    tx.commit().await.map_err(db_error)?;
                }
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

backend!(SqliteStore, sqlx::Sqlite, SqlitePool, "sqlite");
backend!(PgStore, sqlx::Postgres, PgPool, "postgres");

// `WRITE_LOCK`: a statement that serialises the check-then-write transactions (record,
// create_tenant_with_key) on one key ($1) until commit. SQLite needs none: BEGIN IMMEDIATE
// already admits one writer at a time. PostgreSQL (READ COMMITTED) takes a transaction-scoped
// advisory lock; without it two concurrent writers both see "no current record" / "no
// platform tenant" and either hit the unique index or create two platform tenants.
impl SqliteStore {
    /// How a transaction that writes begins (see `write_tx`).
    pub(crate) const BEGIN: &'static str = "BEGIN IMMEDIATE";
    pub(crate) const WRITE_LOCK: Option<&'static str> = None;
    /// The settings of a connection writing many rows in one transaction.
    pub(crate) const WRITER_SETTINGS: crate::record_writes::WriterSettings =
        crate::record_writes::SQLITE_WRITER_SETTINGS;
}

impl PgStore {
    /// How a transaction that writes begins (see `write_tx`).
    pub(crate) const BEGIN: &'static str = "BEGIN";
    pub(crate) const WRITE_LOCK: Option<&'static str> =
        Some("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))");
    /// The settings of a connection writing many rows in one transaction.
    pub(crate) const WRITER_SETTINGS: crate::record_writes::WriterSettings =
        crate::record_writes::PG_WRITER_SETTINGS;
}

/// Rows a SQLite connection's worker thread reads ahead of the task that asked for them
/// (bounded, so that a slow reader holds at most this many).
const ROW_BUFFER: usize = 1024;

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
            .pragma("mmap_size", "2147418112")
            // A commit that leaves the WAL past this many pages copies them into the
            // database (a checkpoint, with an fsync). A batch of records dirties pages all over
            // a dozen indexes; past SQLite's 1,000 (4 MB) nearly every commit of a refresh
            // paid a checkpoint, and pages written again before the next one are copied once.
            .pragma("wal_autocheckpoint", "8192")
            // At the driver's default of 50 rows the worker thread and the reading task
            // take turns every few rows, each turn a wake-up, while a page of 5,000
            // records (a feed page, the daily root's pass) is read.
            .row_buffer_size(ROW_BUFFER);
        Self::switch_to_wal(&options).await?;
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
        Ok(Self::new(pool, signer, epoch))
    }

    /// Puts the database file in WAL mode on one connection before the pool opens. The switch
    /// needs an exclusive lock that SQLite's busy timeout does not wait for, so processes
    /// opening one fresh file together (replicas, or the server and the CLI) would otherwise
    /// fail with "database is locked". Once the file is in WAL mode, which it keeps, the
    /// pragma each pool connection runs changes nothing and takes no such lock.
    async fn switch_to_wal(options: &SqliteConnectOptions) -> Result<()> {
        use sqlx::{ConnectOptions, Connection};
        const BUSY: &str = "5";
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match options.connect().await {
                Ok(conn) => return conn.close().await.map_err(db_error),
                Err(sqlx::Error::Database(e))
                    if e.code().as_deref() == Some(BUSY)
                        && std::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(db_error(e)),
            }
        }
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
        let port = options.get_port();
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(store_options.acquire_timeout)
            .after_connect(move |_, _| {
                Box::pin(async move {
                    crate::nodelay::set_on_sockets_to(port);
                    Ok(())
                })
            })
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
        Ok(Self::new(pool, signer, epoch))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lower_hex_spells_every_byte_as_hex_encode_does() {
        let every: Vec<u8> = (0..=255).collect();
        assert_eq!(super::lower_hex(&every), hex::encode(&every));
        assert_eq!(super::lower_hex(&[]), "");
        assert_eq!(super::lower_hex(&[0x0a, 0xf0]), "0af0");
    }
}
