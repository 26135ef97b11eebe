//! Storage of the transparency log: signed daily roots, the leaves each covers, the roots
//! of each day's 256-leaf chunks (see `translog::chunk`: what lets a proof read one chunk
//! instead of the day), and every key that ever signed. Append-only: publishing a day twice returns the first root, and
//! the database refuses updates and deletes (triggers), so history cannot be rewritten
//! through the service.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, SubsecRound, Utc};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use translog::Hash;
use translog::chunk::ChunkRootBuilder;

use crate::backend::Columns;
use crate::{PgStore, Result, SqliteStore, db_error};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRoot {
    pub log_date: NaiveDate,
    /// Lowercase hex.
    pub merkle_root: String,
    pub entry_count: u64,
    pub prev_root: String,
    /// Base64 Ed25519 signature.
    pub signature: String,
    pub key_id: String,
    pub published_at: DateTime<Utc>,
}

/// The record fields a leaf hash is computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafRow {
    pub leaf_hash: String,
    pub executable_name: String,
    pub hash_sha256: String,
    pub version: String,
    pub platform: String,
    pub arch: String,
}

/// A day's leaves in tree order, a batch at a time.
pub type LeafBatches = futures::stream::BoxStream<'static, Result<Vec<LeafRow>>>;

/// Leaves per `INSERT` (8 values each).
const LEAF_ROWS: usize = 1000;

fn leaf_insert_sql(rows: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO translog_leaves (log_date, leaf_index, leaf_hash, executable_name, \
         hash_sha256, version, platform, arch) VALUES ",
    );
    for r in 0..rows {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        sql.push_str(&crate::backend::placeholders(r * 8 + 1, 8));
        sql.push(')');
    }
    sql
}

/// Chunk roots per `INSERT` (3 values each).
const CHUNK_ROWS: usize = 1000;

/// Inserts chunk roots; a chunk already stored keeps its row, so storing a day's chunk
/// roots again (two servers computing them at once) changes nothing.
fn chunk_insert_sql(rows: usize) -> String {
    let mut sql =
        String::from("INSERT INTO translog_chunks (log_date, chunk_index, chunk_root) VALUES ");
    for r in 0..rows {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        sql.push_str(&crate::backend::placeholders(r * 3 + 1, 3));
        sql.push(')');
    }
    sql.push_str(" ON CONFLICT (log_date, chunk_index) DO NOTHING");
    sql
}

fn parse_leaf_hash(hex_text: &str) -> Result<Hash> {
    translog::encoding::parse_hash_hex("leaf_hash", hex_text)
        .map_err(|_| crate::backend::corrupt("leaf_hash", hex_text))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningKeyRecord {
    pub key_id: String,
    /// Base64 of the raw 32-byte Ed25519 public key.
    pub public_key: String,
    /// First and last day this key signed (None if it has signed nothing yet).
    pub first_date: Option<NaiveDate>,
    pub last_date: Option<NaiveDate>,
}

#[async_trait]
pub trait RootStore: Send + Sync {
    /// Stores a day's root with its leaves (in tree order) unless the day is already
    /// published; returns the root that is stored for that day either way.
    async fn publish_root(&self, root: &StoredRoot, leaves: &[LeafRow]) -> Result<StoredRoot>;
    /// [`publish_root`](RootStore::publish_root) with the leaves in batches, in tree order,
    /// as the caller reads them: a day of any size is stored in bounded memory, in one
    /// transaction with its root and its chunk roots (computed as the leaves go by). The
    /// batches hold `root.entry_count` leaves in all, or nothing is stored; an error from
    /// the stream stores nothing either.
    async fn publish_root_streamed(
        &self,
        root: &StoredRoot,
        leaves: LeafBatches,
    ) -> Result<StoredRoot>;
    async fn root(&self, date: NaiveDate) -> Result<Option<StoredRoot>>;
    /// The latest root of a day before `date`.
    async fn root_before(&self, date: NaiveDate) -> Result<Option<StoredRoot>>;
    /// Newest first.
    async fn recent_roots(&self, limit: u32) -> Result<Vec<StoredRoot>>;
    /// Every root, oldest first.
    async fn all_roots(&self) -> Result<Vec<StoredRoot>>;
    /// A day's leaves in tree order, all at once: for tests and small days only; serving
    /// reads [`leaves_page`](RootStore::leaves_page) and the chunk roots instead.
    async fn leaves(&self, date: NaiveDate) -> Result<Vec<LeafRow>>;
    /// At most `limit` of a day's leaves in tree order, from leaf index `from`: a walk over
    /// every page reads a day of any size in bounded memory.
    async fn leaves_page(&self, date: NaiveDate, from: u64, limit: u32) -> Result<Vec<LeafRow>>;
    /// The day's first leaf with this SHA-256 (64 lowercase hex): its tree position and row.
    async fn leaf_of(&self, date: NaiveDate, sha256: &str) -> Result<Option<(u64, LeafRow)>>;
    /// The leaf hashes of positions `from` to `from + count` (fewer at the day's end), in
    /// tree order: a chunk's hashes in one row, for a proof.
    async fn leaf_hashes(&self, date: NaiveDate, from: u64, count: u32) -> Result<Vec<Hash>>;
    /// The roots of a day's chunks (`translog::chunk`) in order: empty for a day published
    /// before chunk roots were stored, until [`store_chunk_roots`](RootStore::store_chunk_roots).
    async fn chunk_roots(&self, date: NaiveDate) -> Result<Vec<Hash>>;
    /// Stores a published day's chunk roots (computed from its stored leaves), in one
    /// transaction; chunks already stored keep their rows.
    async fn store_chunk_roots(&self, date: NaiveDate, roots: &[Hash]) -> Result<()>;
    async fn register_log_key(
        &self,
        key_id: &str,
        public_key: &str,
        now: DateTime<Utc>,
    ) -> Result<()>;
    async fn log_keys(&self) -> Result<Vec<SigningKeyRecord>>;
}

fn count(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

const ROOT_COLUMNS: &str =
    "log_date, merkle_root, entry_count, prev_root, signature, key_id, published_at";

/// `SELECT` of every root column from `translog_roots`, then `rest`.
fn select_roots(rest: &str) -> String {
    format!("SELECT {ROOT_COLUMNS} FROM translog_roots {rest}")
}

const ROOT_OF_DAY: &str = "WHERE log_date = $1";
const ROOT_BEFORE: &str = "WHERE log_date < $1 ORDER BY log_date DESC LIMIT 1";
const RECENT_ROOTS: &str = "ORDER BY log_date DESC LIMIT $1";
const ALL_ROOTS: &str = "ORDER BY log_date";
/// A day has one root: publishing it again inserts nothing.
const INSERT_ROOT: &str = "INSERT INTO translog_roots (log_date, merkle_root, entry_count, \
     prev_root, signature, key_id, published_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
     ON CONFLICT (log_date) DO NOTHING";
const LEAVES: &str = "SELECT leaf_hash, executable_name, hash_sha256, version, platform, arch \
     FROM translog_leaves WHERE log_date = $1 ORDER BY leaf_index";
const LEAVES_PAGE: &str = "SELECT leaf_hash, executable_name, hash_sha256, version, platform, \
     arch FROM translog_leaves WHERE log_date = $1 AND leaf_index >= $2 ORDER BY leaf_index \
     LIMIT $3";
/// Every leaf of a file on a day (a handful at most), found through `translog_leaves_sha256`.
/// No `ORDER BY leaf_index LIMIT 1`: with it SQLite walks the day's primary key in order
/// instead, reading the whole day to find one leaf; the first is picked by the caller.
const LEAVES_OF_FILE: &str = "SELECT leaf_index, leaf_hash, executable_name, hash_sha256, \
     version, platform, arch FROM translog_leaves WHERE log_date = $1 AND hash_sha256 = $2";
/// A range of leaf hashes joined in one text (64 hex digits each), so the range costs one
/// row rather than one per leaf (SQLite 3.44 and PostgreSQL both have `string_agg` with an
/// order).
const LEAF_HASHES: &str = "SELECT string_agg(leaf_hash, '' ORDER BY leaf_index) AS hashes \
     FROM translog_leaves WHERE log_date = $1 AND leaf_index >= $2 AND leaf_index < $3";
const CHUNK_ROOTS: &str =
    "SELECT chunk_root FROM translog_chunks WHERE log_date = $1 ORDER BY chunk_index";
const REGISTER_LOG_KEY: &str = "INSERT INTO translog_keys (key_id, public_key, added_at) \
     VALUES ($1, $2, $3) ON CONFLICT (key_id) DO NOTHING";
const LOG_KEYS: &str = "SELECT k.key_id, k.public_key, MIN(r.log_date) AS first_date, \
     MAX(r.log_date) AS last_date FROM translog_keys k \
     LEFT JOIN translog_roots r ON r.key_id = k.key_id \
     GROUP BY k.key_id, k.public_key, k.added_at ORDER BY k.added_at";

fn root_from_row(row: &impl Columns) -> Result<StoredRoot> {
    Ok(StoredRoot {
        log_date: row.date("log_date")?,
        merkle_root: row.text("merkle_root")?,
        entry_count: count(row.int("entry_count")?),
        prev_root: row.text("prev_root")?,
        signature: row.text("signature")?,
        key_id: row.text("key_id")?,
        published_at: row.time("published_at")?,
    })
}

fn leaf_from_row(r: &impl Columns) -> Result<LeafRow> {
    Ok(LeafRow {
        leaf_hash: r.text("leaf_hash")?,
        executable_name: r.text("executable_name")?,
        hash_sha256: r.text("hash_sha256")?,
        version: r.text("version")?,
        platform: r.text("platform")?,
        arch: r.text("arch")?,
    })
}

fn log_key_from_row(r: &impl Columns) -> Result<SigningKeyRecord> {
    Ok(SigningKeyRecord {
        key_id: r.text("key_id")?,
        public_key: r.text("public_key")?,
        first_date: r.opt_date("first_date")?,
        last_date: r.opt_date("last_date")?,
    })
}

/// Fails unless the leaves given number what the root covers.
fn check_leaf_count(root: &StoredRoot, given: i64) -> Result<()> {
    if u64::try_from(given).ok() != Some(root.entry_count) {
        return Err(model::Error::internal(format!(
            "the root of {} covers {} leaves but {given} were given",
            root.log_date, root.entry_count
        )));
    }
    Ok(())
}

macro_rules! translog_backend {
    ($store:ident, $row:ty, $db:ty) => {
        impl $store {
            /// Inserts `roots` as the day's chunks `first..` in the transaction `tx`, at
            /// most [`CHUNK_ROWS`] a statement.
            async fn insert_chunk_roots(
                tx: &mut sqlx::Transaction<'_, $db>,
                date: NaiveDate,
                first: u64,
                roots: &[Hash],
            ) -> Result<()> {
                for (n, batch) in roots.chunks(CHUNK_ROWS).enumerate() {
                    let mut q = sqlx::query(sqlx::AssertSqlSafe(chunk_insert_sql(batch.len())));
                    let mut index = first + (n * CHUNK_ROWS) as u64;
                    for root in batch {
                        q = q
                            .bind(date)
                            .bind(i64::try_from(index).unwrap_or(i64::MAX))
                            .bind(translog::encoding::hash_to_hex(root));
                        index += 1;
                    }
                    q.execute(&mut **tx).await.map_err(db_error)?;
                }
                Ok(())
            }
        }

        #[async_trait]
        impl RootStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn publish_root(
                &self,
                root: &StoredRoot,
                leaves: &[LeafRow],
            ) -> Result<StoredRoot> {
                use futures::StreamExt as _;
                let batch: Result<Vec<LeafRow>> = Ok(leaves.to_vec());
                self.publish_root_streamed(root, futures::stream::iter([batch]).boxed())
                    .await
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn publish_root_streamed(
                &self,
                root: &StoredRoot,
                mut leaves: LeafBatches,
            ) -> Result<StoredRoot> {
                use futures::StreamExt as _;
                let mut tx = self.pool.begin().await.map_err(db_error)?;
                let inserted = sqlx::query(INSERT_ROOT)
                    .bind(root.log_date)
                    .bind(&root.merkle_root)
                    .bind(i64::try_from(root.entry_count).unwrap_or(i64::MAX))
                    .bind(&root.prev_root)
                    .bind(&root.signature)
                    .bind(&root.key_id)
                    .bind(root.published_at.trunc_subsecs(6))
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?
                    .rows_affected();
                if inserted == 1 {
                    let mut index: i64 = 0;
                    let mut chunks = ChunkRootBuilder::new();
                    let mut chunk_roots: Vec<Hash> = Vec::new();
                    let mut chunks_stored: u64 = 0;
                    while let Some(batch) = leaves.next().await {
                        for rows in batch?.chunks(LEAF_ROWS) {
                            let sql = leaf_insert_sql(rows.len());
                            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                            for leaf in rows {
                                chunk_roots.extend(chunks.push(&parse_leaf_hash(&leaf.leaf_hash)?));
                                q = q
                                    .bind(root.log_date)
                                    .bind(index)
                                    .bind(&leaf.leaf_hash)
                                    .bind(&leaf.executable_name)
                                    .bind(&leaf.hash_sha256)
                                    .bind(&leaf.version)
                                    .bind(&leaf.platform)
                                    .bind(&leaf.arch);
                                index += 1;
                            }
                            q.execute(&mut *tx).await.map_err(db_error)?;
                            if chunk_roots.len() >= CHUNK_ROWS {
                                Self::insert_chunk_roots(
                                    &mut tx,
                                    root.log_date,
                                    chunks_stored,
                                    &chunk_roots,
                                )
                                .await?;
                                chunks_stored += chunk_roots.len() as u64;
                                chunk_roots.clear();
                            }
                        }
                    }
                    check_leaf_count(root, index)?;
                    chunk_roots.extend(chunks.finish());
                    Self::insert_chunk_roots(&mut tx, root.log_date, chunks_stored, &chunk_roots)
                        .await?;
                }
                tx.commit().await.map_err(db_error)?;
                self.root(root.log_date)
                    .await?
                    .ok_or_else(|| model::Error::internal("published root vanished"))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn root(&self, date: NaiveDate) -> Result<Option<StoredRoot>> {
                let row: Option<$row> = sqlx::query(sqlx::AssertSqlSafe(select_roots(ROOT_OF_DAY)))
                    .bind(date)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(root_from_row).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn root_before(&self, date: NaiveDate) -> Result<Option<StoredRoot>> {
                let row: Option<$row> = sqlx::query(sqlx::AssertSqlSafe(select_roots(ROOT_BEFORE)))
                    .bind(date)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(root_from_row).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn recent_roots(&self, limit: u32) -> Result<Vec<StoredRoot>> {
                let rows: Vec<$row> = sqlx::query(sqlx::AssertSqlSafe(select_roots(RECENT_ROOTS)))
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(root_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn all_roots(&self) -> Result<Vec<StoredRoot>> {
                let rows: Vec<$row> = sqlx::query(sqlx::AssertSqlSafe(select_roots(ALL_ROOTS)))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(root_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn leaves(&self, date: NaiveDate) -> Result<Vec<LeafRow>> {
                let rows: Vec<$row> = sqlx::query(LEAVES)
                    .bind(date)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(leaf_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn leaves_page(
                &self,
                date: NaiveDate,
                from: u64,
                limit: u32,
            ) -> Result<Vec<LeafRow>> {
                let rows: Vec<$row> = sqlx::query(LEAVES_PAGE)
                    .bind(date)
                    .bind(i64::try_from(from).unwrap_or(i64::MAX))
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(leaf_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn leaf_of(
                &self,
                date: NaiveDate,
                sha256: &str,
            ) -> Result<Option<(u64, LeafRow)>> {
                let rows: Vec<$row> = sqlx::query(LEAVES_OF_FILE)
                    .bind(date)
                    .bind(sha256)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                let mut first: Option<(u64, LeafRow)> = None;
                for row in &rows {
                    let index = count(row.int("leaf_index")?);
                    if first.as_ref().is_none_or(|(f, _)| index < *f) {
                        first = Some((index, leaf_from_row(row)?));
                    }
                }
                Ok(first)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn leaf_hashes(
                &self,
                date: NaiveDate,
                from: u64,
                count: u32,
            ) -> Result<Vec<Hash>> {
                let from = i64::try_from(from).unwrap_or(i64::MAX);
                let row: $row = sqlx::query(LEAF_HASHES)
                    .bind(date)
                    .bind(from)
                    .bind(from.saturating_add(i64::from(count)))
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error)?;
                let joined = row.opt_text("hashes")?.unwrap_or_default();
                if joined.len() % 64 != 0 || !joined.is_ascii() {
                    return Err(model::Error::internal(format!(
                        "the stored leaf hashes of {date} from {from} are not valid"
                    )));
                }
                (0..joined.len())
                    .step_by(64)
                    .map(|at| parse_leaf_hash(&joined[at..at + 64]))
                    .collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn chunk_roots(&self, date: NaiveDate) -> Result<Vec<Hash>> {
                let rows: Vec<$row> = sqlx::query(CHUNK_ROOTS)
                    .bind(date)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter()
                    .map(|r| {
                        let hex_text = r.text_ref("chunk_root")?;
                        translog::encoding::parse_hash_hex("chunk_root", hex_text)
                            .map_err(|_| crate::backend::corrupt("chunk_root", hex_text))
                    })
                    .collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn store_chunk_roots(&self, date: NaiveDate, roots: &[Hash]) -> Result<()> {
                let mut tx = self.pool.begin().await.map_err(db_error)?;
                Self::insert_chunk_roots(&mut tx, date, 0, roots).await?;
                tx.commit().await.map_err(db_error)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn register_log_key(
                &self,
                key_id: &str,
                public_key: &str,
                now: DateTime<Utc>,
            ) -> Result<()> {
                sqlx::query(REGISTER_LOG_KEY)
                    .bind(key_id)
                    .bind(public_key)
                    .bind(now.trunc_subsecs(6))
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn log_keys(&self) -> Result<Vec<SigningKeyRecord>> {
                let rows: Vec<$row> = sqlx::query(LOG_KEYS)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(log_key_from_row).collect()
            }
        }
    };
}

translog_backend!(SqliteStore, SqliteRow, sqlx::Sqlite);
translog_backend!(PgStore, PgRow, sqlx::Postgres);
