//! Storage of the transparency log: signed daily roots, the leaves each covers, the roots
//! of each day's 256-leaf chunks (see `translog::chunk`: what lets a proof read one chunk
//! instead of the day), and every key that ever signed. Append-only: publishing a day twice
//! returns the first root, and the database refuses updates and deletes (triggers), so
//! history cannot be rewritten through the service.
//!
//! A leaf is stored once for each time it entered the published set (`translog_entries`),
//! with the last published day it was in once it leaves (`translog_exits`); a day's tree is
//! the entries alive on it, in leaf-hash order. Publishing writes the day's changes, the
//! first leaf hash of each of its chunks (`translog_chunk_starts`) and its chunk roots; a
//! read of a day's positions starts at a chunk start.
//!
//! The hashes are stored as their 32 bytes (`leaf_hash`, `hash_sha256`, `chunk_root`) and
//! read back as the lowercase hex the API speaks: bytes sort as that hex does, so the tree
//! order is the stored order.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, SubsecRound, Utc};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use translog::Hash;
use translog::chunk::{self, ChunkRootBuilder};

use crate::backend::{Columns, Params};
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

/// Rows per multi-row `INSERT`.
const INSERT_ROWS: usize = 1000;

/// Inserts chunk roots; a chunk already stored keeps its row, so storing a day's chunk
/// roots again (two servers computing them at once) changes nothing.
fn chunk_insert_sql(values: &str) -> String {
    format!(
        "INSERT INTO translog_chunks (log_date, chunk_index, chunk_root) VALUES {values} \
         ON CONFLICT (log_date, chunk_index) DO NOTHING"
    )
}

fn entry_insert_sql(values: &str) -> String {
    format!(
        "INSERT INTO translog_entries (leaf_hash, entered, executable_name, hash_sha256, \
         version, platform, arch) VALUES {values}"
    )
}

fn exit_insert_sql(values: &str) -> String {
    format!("INSERT INTO translog_exits (leaf_hash, entered, last_day) VALUES {values}")
}

fn chunk_start_insert_sql(values: &str) -> String {
    format!("INSERT INTO translog_chunk_starts (log_date, chunk_index, leaf_hash) VALUES {values}")
}

fn parse_leaf_hash(hex_text: &str) -> Result<Hash> {
    translog::encoding::parse_hash_hex("leaf_hash", hex_text)
        .map_err(|_| crate::backend::corrupt("leaf_hash", hex_text))
}

/// The hash that `hex_text` spells in lowercase hex, the only form the bytes read back as.
fn lowercase_hash(hex_text: &str) -> Option<Hash> {
    translog::encoding::parse_hash_hex("hash_sha256", hex_text)
        .ok()
        .filter(|hash| translog::encoding::hash_to_hex(hash) == hex_text)
}

/// A leaf's SHA-256 as stored: what would not read back as given is refused.
fn parse_sha256(hex_text: &str) -> Result<Hash> {
    lowercase_hash(hex_text).ok_or_else(|| {
        model::Error::internal(format!(
            "a leaf's hash_sha256 {hex_text:?} is not 64 lowercase hex digits"
        ))
    })
}

/// A stored hash column: 32 bytes.
fn hash_of(column: &str, bytes: &[u8]) -> Result<Hash> {
    Hash::try_from(bytes).map_err(|_| crate::backend::corrupt(column, &hex::encode(bytes)))
}

/// A stored hash column as the lowercase hex the API speaks.
fn hex_of(row: &impl Columns, column: &str) -> Result<String> {
    Ok(translog::encoding::hash_to_hex(&hash_of(
        column,
        row.bytes_ref(column)?,
    )?))
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
    /// Stores a day's root with its leaves (in tree order: strictly increasing leaf hashes)
    /// unless the day is already published; returns the root that is stored for that day
    /// either way. A day before a published one is refused.
    async fn publish_root(&self, root: &StoredRoot, leaves: &[LeafRow]) -> Result<StoredRoot>;
    /// [`publish_root`](RootStore::publish_root) with the leaves in batches, in tree order,
    /// as the caller reads them: a day of any size is stored in bounded memory, in one
    /// transaction with its root and its chunk roots (computed as the leaves go by). Only
    /// what changed since the previous published day is written, and a row per 256 leaves. The
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
    /// Reads the file's entries, its chunk's start, and the entries of the chunk up to it.
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
const ROOT_AFTER: &str = "WHERE log_date > $1 LIMIT 1";
const RECENT_ROOTS: &str = "ORDER BY log_date DESC LIMIT $1";
const ALL_ROOTS: &str = "ORDER BY log_date";
/// A day has one root: publishing it again inserts nothing.
const INSERT_ROOT: &str = "INSERT INTO translog_roots (log_date, merkle_root, entry_count, \
     prev_root, signature, key_id, published_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
     ON CONFLICT (log_date) DO NOTHING";
/// The condition that entry `e` is in the tree of day `$1` (a published day): it entered
/// then or before, and has not left before it.
macro_rules! alive_on_day {
    () => {
        "e.entered <= $1 AND NOT EXISTS (SELECT 1 FROM translog_exits x \
         WHERE x.leaf_hash = e.leaf_hash AND x.entered = e.entered AND x.last_day < $1)"
    };
}
const LEAF_COLUMNS: &str = "e.leaf_hash, e.executable_name, e.hash_sha256, e.version, \
     e.platform, e.arch";
/// Every leaf of a published day in tree order.
fn leaves_sql() -> String {
    format!(
        "SELECT {LEAF_COLUMNS} FROM translog_entries e WHERE EXISTS (SELECT 1 FROM \
         translog_roots r WHERE r.log_date = $1) AND {} ORDER BY e.leaf_hash",
        alive_on_day!()
    )
}
/// The first leaf hash of a day's chunk `$2`.
const CHUNK_START: &str =
    "SELECT leaf_hash FROM translog_chunk_starts WHERE log_date = $1 AND chunk_index = $2";
/// Where day `$1`'s chunk `$2` starts reading: below every leaf hash for chunk 0 (so an
/// entry sorting before the day's first leaf is still read, and shows), else at the chunk's
/// first leaf; NULL, so nothing is read, when the day has no such chunk. A scalar
/// subquery, so a range costs one statement. Below every hash is the empty byte string,
/// written `substr(hash, 1, 0)`: bytes on both backends, where a literal is not.
macro_rules! chunk_floor {
    () => {
        "(SELECT CASE WHEN s.chunk_index = 0 THEN substr(s.leaf_hash, 1, 0) \
         ELSE s.leaf_hash END \
         FROM translog_chunk_starts s WHERE s.log_date = $1 AND s.chunk_index = $2)"
    };
}
/// `$3` of a day's leaves from the start of chunk `$2`, after skipping `$4` of them: the
/// walk reads the entries in leaf-hash order (primary key) and skips those not in the day.
const LEAVES_FROM: &str = concat!(
    "SELECT e.leaf_hash, e.executable_name, e.hash_sha256, e.version, e.platform, e.arch \
     FROM translog_entries e WHERE e.leaf_hash >= ",
    chunk_floor!(),
    " AND ",
    alive_on_day!(),
    " ORDER BY e.leaf_hash LIMIT $3 OFFSET $4"
);
/// [`LEAVES_FROM`]'s leaf hashes joined in one value (32 bytes each), so a range costs one
/// row rather than one per leaf (SQLite 3.44 and PostgreSQL both have `string_agg` with an
/// order; the empty separator is a blob's empty `substr`, so PostgreSQL joins `bytea`, and
/// SQLite joins the bytes as they are).
const LEAF_HASHES_FROM: &str = concat!(
    "SELECT string_agg(leaf_hash, substr(leaf_hash, 1, 0) ORDER BY leaf_hash) AS hashes \
     FROM (SELECT \
     e.leaf_hash FROM translog_entries e WHERE e.leaf_hash >= ",
    chunk_floor!(),
    " AND ",
    alive_on_day!(),
    " ORDER BY e.leaf_hash LIMIT $3 OFFSET $4) AS range_of_day"
);
/// The position of leaf hash `$2` in day `$1`'s tree, in one statement: its chunk (the
/// greatest chunk start at or below it) and how many of the day's leaves lie from that
/// chunk's floor (see [`chunk_floor`]) up to it. No row when the hash sorts below every
/// chunk start of the day.
const LEAF_POSITION: &str = concat!(
    "SELECT s.chunk_index, (SELECT COUNT(*) FROM translog_entries e \
     WHERE e.leaf_hash >= CASE WHEN s.chunk_index = 0 THEN substr(s.leaf_hash, 1, 0) \
     ELSE s.leaf_hash END \
     AND e.leaf_hash < $2 AND ",
    alive_on_day!(),
    ") AS leaves FROM translog_chunk_starts s WHERE s.log_date = $1 AND s.leaf_hash <= $2 \
     ORDER BY s.leaf_hash DESC LIMIT 1"
);
/// How many of day `$1`'s leaves sort below leaf hash `$2`.
const LEAVES_BELOW: &str = concat!(
    "SELECT COUNT(*) AS leaves FROM translog_entries e WHERE e.leaf_hash < $2 AND ",
    alive_on_day!()
);
/// The day's leaves of a file (a handful at most), found through `translog_entries_sha256`.
fn leaves_of_file_sql() -> String {
    format!(
        "SELECT {LEAF_COLUMNS} FROM translog_entries e WHERE e.hash_sha256 = $2 AND {}",
        alive_on_day!()
    )
}
/// Publishing: `$3` entries in day `$1`'s tree after the leaf hash `$2`, in tree order.
fn entries_after_sql() -> String {
    format!(
        "SELECT e.leaf_hash, e.entered FROM translog_entries e WHERE e.leaf_hash > $2 \
         AND {} ORDER BY e.leaf_hash LIMIT $3",
        alive_on_day!()
    )
}
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
        leaf_hash: hex_of(r, "leaf_hash")?,
        executable_name: r.text("executable_name")?,
        hash_sha256: hex_of(r, "hash_sha256")?,
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

/// What publishing a day writes besides its root, gathered and inserted
/// [`INSERT_ROWS`] at a time: the leaves that entered, the entries that left, the day's
/// chunk starts and chunk roots.
#[derive(Default)]
struct DayWrites {
    entered: Vec<Entered>,
    /// Leaf hash and `entered` of each entry that left.
    left: Vec<(Hash, NaiveDate)>,
    /// Chunk index and first leaf hash.
    chunk_starts: Vec<(u64, Hash)>,
    chunk_roots: Vec<Hash>,
    chunk_roots_stored: u64,
}

/// A leaf that enters the day, with its hashes as stored.
struct Entered {
    leaf_hash: Hash,
    hash_sha256: Hash,
    leaf: LeafRow,
}

/// The entries in the previous published day's tree, read in tree order a page at a time
/// while a day is published.
struct PreviousDay {
    day: Option<NaiveDate>,
    page: std::collections::VecDeque<(Hash, NaiveDate)>,
    /// Below every leaf hash until the first page is read.
    after: Vec<u8>,
    done: bool,
}

/// Entries of the previous day read per query while publishing.
const PREVIOUS_PAGE: i64 = 5_000;

macro_rules! translog_backend {
    ($store:ident, $row:ty, $db:ty, $params:expr) => {
        impl $store {
            /// `INSERT` placeholders for `rows` rows of `columns` values.
            fn values(rows: usize, columns: usize) -> String {
                $params.rows(rows, columns)
            }

            /// Inserts `roots` as the day's chunks `first..` in the transaction `tx`, at
            /// most [`INSERT_ROWS`] a statement.
            async fn insert_chunk_roots(
                tx: &mut sqlx::Transaction<'_, $db>,
                date: NaiveDate,
                first: u64,
                roots: &[Hash],
            ) -> Result<()> {
                for (n, batch) in roots.chunks(INSERT_ROWS).enumerate() {
                    let sql = chunk_insert_sql(&Self::values(batch.len(), 3));
                    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                    let mut index = first + (n * INSERT_ROWS) as u64;
                    for root in batch {
                        q = q
                            .bind(date)
                            .bind(i64::try_from(index).unwrap_or(i64::MAX))
                            .bind(root.as_slice());
                        index += 1;
                    }
                    q.execute(&mut **tx).await.map_err(db_error)?;
                }
                Ok(())
            }

            /// Inserts what `writes` gathered for `date` (everything when `all`, else only
            /// full batches) and empties what it inserted.
            async fn flush_day_writes(
                tx: &mut sqlx::Transaction<'_, $db>,
                date: NaiveDate,
                previous: Option<NaiveDate>,
                writes: &mut DayWrites,
                all: bool,
            ) -> Result<()> {
                if all || writes.entered.len() >= INSERT_ROWS {
                    for batch in writes.entered.chunks(INSERT_ROWS) {
                        let sql = entry_insert_sql(&Self::values(batch.len(), 7));
                        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                        for entry in batch {
                            let leaf = &entry.leaf;
                            q = q
                                .bind(entry.leaf_hash.as_slice())
                                .bind(date)
                                .bind(&leaf.executable_name)
                                .bind(entry.hash_sha256.as_slice())
                                .bind(&leaf.version)
                                .bind(&leaf.platform)
                                .bind(&leaf.arch);
                        }
                        q.execute(&mut **tx).await.map_err(db_error)?;
                    }
                    writes.entered.clear();
                }
                if all || writes.left.len() >= INSERT_ROWS {
                    if let Some(last_day) = previous {
                        for batch in writes.left.chunks(INSERT_ROWS) {
                            let sql = exit_insert_sql(&Self::values(batch.len(), 3));
                            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                            for (leaf_hash, entered) in batch {
                                q = q.bind(leaf_hash.as_slice()).bind(*entered).bind(last_day);
                            }
                            q.execute(&mut **tx).await.map_err(db_error)?;
                        }
                    }
                    writes.left.clear();
                }
                if all || writes.chunk_starts.len() >= INSERT_ROWS {
                    for batch in writes.chunk_starts.chunks(INSERT_ROWS) {
                        let sql = chunk_start_insert_sql(&Self::values(batch.len(), 3));
                        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                        for (chunk, leaf_hash) in batch {
                            q = q
                                .bind(date)
                                .bind(i64::try_from(*chunk).unwrap_or(i64::MAX))
                                .bind(leaf_hash.as_slice());
                        }
                        q.execute(&mut **tx).await.map_err(db_error)?;
                    }
                    writes.chunk_starts.clear();
                }
                if all || writes.chunk_roots.len() >= INSERT_ROWS {
                    Self::insert_chunk_roots(
                        tx,
                        date,
                        writes.chunk_roots_stored,
                        &writes.chunk_roots,
                    )
                    .await?;
                    writes.chunk_roots_stored += writes.chunk_roots.len() as u64;
                    writes.chunk_roots.clear();
                }
                Ok(())
            }

            /// Reads the previous day's next page of entries unless one is at hand or the
            /// day is read to its end.
            async fn fill_previous(
                tx: &mut sqlx::Transaction<'_, $db>,
                previous: &mut PreviousDay,
            ) -> Result<()> {
                let Some(day) = previous.day else {
                    return Ok(());
                };
                if !previous.page.is_empty() || previous.done {
                    return Ok(());
                }
                let rows: Vec<$row> = sqlx::query(sqlx::AssertSqlSafe(entries_after_sql()))
                    .bind(day)
                    .bind(previous.after.as_slice())
                    .bind(PREVIOUS_PAGE)
                    .fetch_all(&mut **tx)
                    .await
                    .map_err(db_error)?;
                previous.done = rows.len() < PREVIOUS_PAGE as usize;
                for row in &rows {
                    previous.page.push_back((
                        hash_of("leaf_hash", row.bytes_ref("leaf_hash")?)?,
                        row.date("entered")?,
                    ));
                }
                if let Some((last, _)) = previous.page.back() {
                    previous.after = last.to_vec();
                }
                Ok(())
            }

            /// The first leaf hash of a day's chunk, or None past the day's end or for a
            /// day not published.
            async fn chunk_start(&self, date: NaiveDate, chunk: u64) -> Result<Option<Hash>> {
                let row: Option<$row> = sqlx::query(CHUNK_START)
                    .bind(date)
                    .bind(i64::try_from(chunk).unwrap_or(i64::MAX))
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.map(|r| hash_of("leaf_hash", r.bytes_ref("leaf_hash")?))
                    .transpose()
            }

            /// [`RootStore::publish_root_streamed`] on `conn`, in one transaction.
            async fn publish_root_on(
                conn: &mut <$db as sqlx::Database>::Connection,
                root: &StoredRoot,
                mut leaves: LeafBatches,
            ) -> Result<()> {
                use futures::StreamExt as _;
                let date = root.log_date;
                let mut tx = sqlx::Connection::begin_with(&mut *conn, Self::BEGIN)
                    .await
                    .map_err(db_error)?;
                let inserted = sqlx::query(INSERT_ROOT)
                    .bind(date)
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
                    // A later day's tree holds every entry that entered before it and has
                    // no exit: a day slipped in before it would change that tree.
                    let later: Option<$row> =
                        sqlx::query(sqlx::AssertSqlSafe(select_roots(ROOT_AFTER)))
                            .bind(date)
                            .fetch_optional(&mut *tx)
                            .await
                            .map_err(db_error)?;
                    if let Some(later) = later {
                        return Err(model::Error::bad_request(format!(
                            "{} is already published; {date} can no longer be",
                            later.date("log_date")?
                        )));
                    }
                    let previous_row: Option<$row> =
                        sqlx::query(sqlx::AssertSqlSafe(select_roots(ROOT_BEFORE)))
                            .bind(date)
                            .fetch_optional(&mut *tx)
                            .await
                            .map_err(db_error)?;
                    let previous_day = previous_row.map(|r| r.date("log_date")).transpose()?;
                    let mut previous = PreviousDay {
                        day: previous_day,
                        page: Default::default(),
                        after: Vec::new(),
                        done: false,
                    };
                    let mut writes = DayWrites::default();
                    let mut chunks = ChunkRootBuilder::new();
                    let mut index: u64 = 0;
                    let mut last: Option<Hash> = None;
                    while let Some(batch) = leaves.next().await {
                        for leaf in batch? {
                            let hash = parse_leaf_hash(&leaf.leaf_hash)?;
                            if last.is_some_and(|l| l >= hash) {
                                return Err(model::Error::internal(format!(
                                    "the leaves of {date} are not in tree order at {index}"
                                )));
                            }
                            last = Some(hash);
                            writes.chunk_roots.extend(chunks.push(&hash));
                            if chunk::chunk_start(chunk::chunk_of(index)) == index {
                                writes.chunk_starts.push((chunk::chunk_of(index), hash));
                            }
                            index += 1;
                            let stays = loop {
                                Self::fill_previous(&mut tx, &mut previous).await?;
                                match previous.page.front() {
                                    Some((h, _)) if *h < hash => {
                                        writes.left.extend(previous.page.pop_front());
                                    }
                                    Some((h, _)) if *h == hash => {
                                        previous.page.pop_front();
                                        break true;
                                    }
                                    _ => break false,
                                }
                            };
                            if !stays {
                                writes.entered.push(Entered {
                                    leaf_hash: hash,
                                    hash_sha256: parse_sha256(&leaf.hash_sha256)?,
                                    leaf,
                                });
                            }
                            Self::flush_day_writes(&mut tx, date, previous_day, &mut writes, false)
                                .await?;
                        }
                    }
                    check_leaf_count(root, i64::try_from(index).unwrap_or(i64::MAX))?;
                    loop {
                        Self::fill_previous(&mut tx, &mut previous).await?;
                        if previous.page.is_empty() {
                            break;
                        }
                        writes.left.extend(previous.page.drain(..));
                        Self::flush_day_writes(&mut tx, date, previous_day, &mut writes, false)
                            .await?;
                    }
                    writes.chunk_roots.extend(chunks.finish());
                    Self::flush_day_writes(&mut tx, date, previous_day, &mut writes, true).await?;
                }
                tx.commit().await.map_err(db_error)
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

            /// Merges the day's leaves with the previous published day's entries, both in
            /// tree order: a leaf not there enters, an entry not here leaves (its exit
            /// names the previous day). Writes: the day's changes, and per 256 leaves a
            /// chunk start and a chunk root.
            ///
            /// Runs with the record writer's settings: the day's entries go into a large
            /// index at random places, and SQLite's default page cache spills them to the
            /// WAL mid-transaction (`record_writes::WriterSettings`).
            #[tracing::instrument(level = "debug", skip_all)]
            async fn publish_root_streamed(
                &self,
                root: &StoredRoot,
                leaves: LeafBatches,
            ) -> Result<StoredRoot> {
                self.with_writer_settings(async |conn| {
                    Self::publish_root_on(conn, root, leaves).await
                })
                .await?;
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
                let rows: Vec<$row> = sqlx::query(sqlx::AssertSqlSafe(leaves_sql()))
                    .bind(date)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(leaf_from_row).collect()
            }

            /// One statement: the entries from the start of `from`'s chunk in leaf-hash
            /// order, skipping the `from % 256` leaves before `from`: the rows read are the
            /// page, at most 255 leaves more, and the entries not in the day (left before it
            /// or entered after it) that sort among them.
            #[tracing::instrument(level = "debug", skip_all)]
            async fn leaves_page(
                &self,
                date: NaiveDate,
                from: u64,
                limit: u32,
            ) -> Result<Vec<LeafRow>> {
                let chunk = chunk::chunk_of(from);
                let rows: Vec<$row> = sqlx::query(LEAVES_FROM)
                    .bind(date)
                    .bind(i64::try_from(chunk).unwrap_or(i64::MAX))
                    .bind(i64::from(limit))
                    .bind(i64::try_from(from - chunk::chunk_start(chunk)).unwrap_or(0))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(leaf_from_row).collect()
            }

            /// The file's entries in the day (index `translog_entries_sha256`), then in one
            /// statement the first one's chunk (the greatest chunk start at or below its
            /// leaf hash) and a count of the day's leaves from that start to it: at most
            /// 255 of them, and the entries not in the day that sort among them.
            #[tracing::instrument(level = "debug", skip_all)]
            async fn leaf_of(
                &self,
                date: NaiveDate,
                sha256: &str,
            ) -> Result<Option<(u64, LeafRow)>> {
                // Stored as bytes: what is not a SHA-256 in lowercase hex names no leaf.
                let Some(sha256) = lowercase_hash(sha256) else {
                    return Ok(None);
                };
                let rows: Vec<$row> = sqlx::query(sqlx::AssertSqlSafe(leaves_of_file_sql()))
                    .bind(date)
                    .bind(sha256.as_slice())
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                let mut first: Option<LeafRow> = None;
                for row in &rows {
                    let leaf = leaf_from_row(row)?;
                    if first.as_ref().is_none_or(|f| leaf.leaf_hash < f.leaf_hash) {
                        first = Some(leaf);
                    }
                }
                let Some(leaf) = first else {
                    return Ok(None);
                };
                let leaf_hash = parse_leaf_hash(&leaf.leaf_hash)?;
                let position: Option<$row> = sqlx::query(LEAF_POSITION)
                    .bind(date)
                    .bind(leaf_hash.as_slice())
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                let (chunk, before) = match position {
                    Some(row) => (count(row.int("chunk_index")?), count(row.int("leaves")?)),
                    // Below the day's first chunk start (only an entry the service did not
                    // write sorts there): chunk 0, if the day has one.
                    None if self.chunk_start(date, 0).await?.is_some() => {
                        let row: $row = sqlx::query(LEAVES_BELOW)
                            .bind(date)
                            .bind(leaf_hash.as_slice())
                            .fetch_one(&self.pool)
                            .await
                            .map_err(db_error)?;
                        (0, count(row.int("leaves")?))
                    }
                    None => return Ok(None),
                };
                Ok(Some((chunk::chunk_start(chunk) + before, leaf)))
            }

            /// Read as [`leaves_page`](RootStore::leaves_page) reads, the hashes only.
            #[tracing::instrument(level = "debug", skip_all)]
            async fn leaf_hashes(
                &self,
                date: NaiveDate,
                from: u64,
                count: u32,
            ) -> Result<Vec<Hash>> {
                let chunk = chunk::chunk_of(from);
                let row: $row = sqlx::query(LEAF_HASHES_FROM)
                    .bind(date)
                    .bind(i64::try_from(chunk).unwrap_or(i64::MAX))
                    .bind(i64::from(count))
                    .bind(i64::try_from(from - chunk::chunk_start(chunk)).unwrap_or(0))
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error)?;
                let joined: Option<&[u8]> = row.opt_bytes_ref("hashes")?;
                let joined = joined.unwrap_or_default();
                if joined.len() % 32 != 0 {
                    return Err(model::Error::internal(format!(
                        "the stored leaf hashes of {date} from {from} are not valid"
                    )));
                }
                joined
                    .chunks_exact(32)
                    .map(|hash| hash_of("leaf_hash", hash))
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
                    .map(|r| hash_of("chunk_root", r.bytes_ref("chunk_root")?))
                    .collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn store_chunk_roots(&self, date: NaiveDate, roots: &[Hash]) -> Result<()> {
                let mut tx = Self::write_tx(&self.pool).await?;
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

translog_backend!(SqliteStore, SqliteRow, sqlx::Sqlite, Params::Anonymous);
translog_backend!(PgStore, PgRow, sqlx::Postgres, Params::Numbered);
