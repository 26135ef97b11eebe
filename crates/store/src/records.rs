//! Vendor hash records (`hash_records`, with `record_counts`, `records_added` and the
//! `records_epoch` counter): [`RecordStore`] and its implementation for both backends.
//! Writes go through `record_writes.rs`; reads are here, one SQL text or builder per query.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use model::{Arch, HashAlgo, HashRecord, HashValue, NewRecord, Platform, RecordSigner};
use sqlx::AssertSqlSafe;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::backend::{
    Columns, IntegrityMonitor, Params, corrupt, hex_column, micros, opt_hex_column,
};
use crate::{Page, PgStore, Result, SqliteStore, db_error};

/// The most names [`RecordStore::executable_names_with_prefix`] answers.
pub const MAX_NAME_SUGGESTIONS: u32 = 10;
/// The shortest prefix [`RecordStore::executable_names_with_prefix`] searches by.
pub const MIN_NAME_PREFIX_CHARS: usize = 2;

pub use model::RecordOutcome;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryQuery {
    /// Any version's filename, or the bare name of an unversioned file.
    pub executable: String,
    pub platform: Option<Platform>,
    pub arch: Option<Arch>,
    pub limit: u32,
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportQuery {
    pub executable: Option<String>,
    pub platform: Option<Platform>,
    pub arch: Option<Arch>,
    /// Inclusive UTC days bounding `valid_from`.
    pub from: NaiveDate,
    pub to: NaiveDate,
}

/// Keyset position in the public feed's order (executable name, platform, arch, id): the
/// last record of the previous page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedPosition {
    pub executable_name: String,
    pub platform: String,
    pub arch: String,
    pub id: String,
}

/// A search of the current records (the console's feed search): records whose executable
/// name starts with `name_prefix` (case-insensitively, [`model::name_key`]) or whose vendor is
/// one of `vendors`; with neither, every current record. Only `platform`'s when given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CurrentSearch {
    pub name_prefix: Option<String>,
    pub vendors: Vec<String>,
    pub platform: Option<String>,
}

/// Keyset position in the order records were added (`added_at`, id): the last record of
/// the previous page. Dates added are distinct per record; the id only breaks ties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedPosition {
    pub added_at: DateTime<Utc>,
    pub id: String,
}

/// Keyset position of an export stream: the last row sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportCursor {
    pub valid_from: DateTime<Utc>,
    pub id: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordStats {
    /// Distinct SHA-256 over current records whose HMAC verifies.
    pub known_good_hashes: u64,
    /// Vendors with a current record.
    pub total_vendors: u64,
    /// Platforms (never `universal`) of current records whose HMAC verifies.
    pub total_platforms: u64,
    /// Current records.
    pub total_records: u64,
}

/// Vendor hash records and their history.
#[async_trait]
pub trait RecordStore: Send + Sync {
    /// Records a file. A version of the same family (vendor, family, platform, arch) at
    /// least as new as the current one (`model::version::compare`) supersedes the current
    /// record in the same transaction: its status becomes `superseded` and its `valid_until`
    /// the new record's `valid_from` (`now`, or a microsecond after the current record's
    /// start). An older version is inserted as superseded, ending where the next newer
    /// version starts (and starting at `now` when that is earlier: the channel's release
    /// date of a past version), so history order by `valid_from` is version order. A file
    /// already in the history (same version and hashes) is `Unchanged`.
    async fn record(&self, record: NewRecord, now: DateTime<Utc>) -> Result<RecordOutcome>;

    /// Records a batch in one transaction, in order, each exactly as [`record`] would
    /// (a later record of a family supersedes an earlier one of the same batch). All or
    /// nothing: an invalid record or a database error records none. One outcome per record.
    /// Concurrent calls (and `record` calls) may share a transaction, each still all or
    /// nothing: a refresh recording many archives' members commits once for several.
    ///
    /// [`record`]: RecordStore::record
    async fn record_many(
        &self,
        records: Vec<NewRecord>,
        now: DateTime<Utc>,
    ) -> Result<Vec<RecordOutcome>>;

    /// Current records, optionally only those whose executable name equals `executable`
    /// case-insensitively; ordered by executable name.
    async fn current_records(&self, executable: Option<&str>) -> Result<Vec<HashRecord>>;

    /// At most `limit` current records in the public feed's order (executable name,
    /// platform, arch, id), those after `after`; a walk over every page reads each current
    /// record once, in bounded memory, whatever their number.
    async fn current_records_page(
        &self,
        after: Option<&FeedPosition>,
        limit: u32,
    ) -> Result<Vec<HashRecord>>;

    /// At most `limit` current records matching `search`, in the public feed's order. Each
    /// part of the search reads only what its index yields (the feed's order, the name key,
    /// a vendor's current records), up to `limit` rows, whatever the number of records.
    async fn search_current(&self, search: &CurrentSearch, limit: u32) -> Result<Vec<HashRecord>>;

    /// At most `limit` current records in the order they were added (`added_at`, id),
    /// oldest first, those after `after`: the TAXII collection's pages.
    async fn current_records_added_after(
        &self,
        after: Option<&AddedPosition>,
        limit: u32,
    ) -> Result<Vec<HashRecord>>;

    /// At most `limit` current records newest added first, those before `before`: the
    /// pull feeds' windows.
    async fn current_records_added_before(
        &self,
        before: Option<&AddedPosition>,
        limit: u32,
    ) -> Result<Vec<HashRecord>>;

    /// The current records of the families `(vendor, family)`: every platform and arch of
    /// a release, found through the one-current index.
    async fn current_in_families(&self, families: &[(String, String)]) -> Result<Vec<HashRecord>>;

    /// Records with any of the hashes (SHA-256, SHA-1 or MD5 by length); superseded
    /// records only when asked.
    async fn find_by_hashes(
        &self,
        hashes: &[HashValue],
        include_superseded: bool,
    ) -> Result<Vec<HashRecord>>;

    /// Every version of the executable's family, newest first.
    async fn history(&self, query: &HistoryQuery) -> Result<Page<HashRecord>>;

    /// How many records an export would return, counting no further than `at_most`.
    async fn export_count(&self, query: &ExportQuery, at_most: u64) -> Result<u64>;

    /// One page of an export in (valid_from, id) order, after the cursor.
    async fn export_page(
        &self,
        query: &ExportQuery,
        after: Option<&ExportCursor>,
        limit: u32,
    ) -> Result<Vec<HashRecord>>;

    async fn stats(&self) -> Result<RecordStats>;

    /// Distinct executable names (one spelling each) whose case-folded name starts with
    /// `prefix` ([`model::name_key`]), in name-key order; at most `limit` (capped at
    /// [`MAX_NAME_SUGGESTIONS`]). A prefix under [`MIN_NAME_PREFIX_CHARS`] characters
    /// matches nothing; `%`, `_` and `\` in it are plain text.
    async fn executable_names_with_prefix(&self, prefix: &str, limit: u32) -> Result<Vec<String>>;

    /// Every record, current and superseded, in id order after `after`, at most `limit`:
    /// the pages an in-memory view of all records is built from.
    async fn records_after(&self, after: Option<&str>, limit: u32) -> Result<Vec<HashRecord>>;

    /// Records written (inserted, superseded, interval fitted) by a transaction whose
    /// records epoch is above `epoch`, each with that epoch, in (epoch, id) order, at most
    /// `limit`: what an in-memory view tagged with `epoch` must apply to reflect the store.
    /// The next page is `(last epoch, Some(last id))`. Every write up to the epoch this
    /// store reports is included; later ones may be too.
    async fn records_changed_after(
        &self,
        epoch: u64,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(u64, HashRecord)>>;
}

/// Something derived from the records (the lookup index) that catches up with each new
/// records epoch before it becomes visible.
#[async_trait]
pub trait RecordsListener: Send + Sync {
    /// The records up to `epoch` are committed; `records_epoch()` shows it once this returns.
    async fn before_epoch(&self, epoch: u64);
}

/// A vendor record's time as stored (`valid_from`, `valid_until`, `added_at`): integer
/// microseconds since the Unix epoch on SQLite (8 bytes, where RFC 3339 text took up to 32,
/// in the row and in every index over a time), `timestamptz` on PostgreSQL (8 bytes
/// already). Both sort as the instants do. Times reach the store truncated to microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordTime(pub DateTime<Utc>);

impl RecordTime {
    pub(crate) fn opt(t: Option<DateTime<Utc>>) -> Option<Self> {
        t.map(Self)
    }
}

impl sqlx::Type<sqlx::Sqlite> for RecordTime {
    fn type_info() -> sqlx::sqlite::SqliteTypeInfo {
        <i64 as sqlx::Type<sqlx::Sqlite>>::type_info()
    }
    fn compatible(ty: &sqlx::sqlite::SqliteTypeInfo) -> bool {
        <i64 as sqlx::Type<sqlx::Sqlite>>::compatible(ty)
    }
}

impl sqlx::Encode<'_, sqlx::Sqlite> for RecordTime {
    fn encode_by_ref(
        &self,
        buf: &mut sqlx::sqlite::SqliteArgumentsBuffer,
    ) -> std::result::Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
        sqlx::Encode::<sqlx::Sqlite>::encode(self.0.timestamp_micros(), buf)
    }
}

impl<'r> sqlx::Decode<'r, sqlx::Sqlite> for RecordTime {
    fn decode(
        value: sqlx::sqlite::SqliteValueRef<'r>,
    ) -> std::result::Result<Self, sqlx::error::BoxDynError> {
        let us = <i64 as sqlx::Decode<sqlx::Sqlite>>::decode(value)?;
        DateTime::from_timestamp_micros(us)
            .map(Self)
            .ok_or_else(|| format!("{us} microseconds is no time").into())
    }
}

impl sqlx::Type<sqlx::Postgres> for RecordTime {
    fn type_info() -> sqlx::postgres::PgTypeInfo {
        <DateTime<Utc> as sqlx::Type<sqlx::Postgres>>::type_info()
    }
}

impl sqlx::Encode<'_, sqlx::Postgres> for RecordTime {
    fn encode_by_ref(
        &self,
        buf: &mut sqlx::postgres::PgArgumentBuffer,
    ) -> std::result::Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
        sqlx::Encode::<sqlx::Postgres>::encode_by_ref(&self.0, buf)
    }
}

impl<'r> sqlx::Decode<'r, sqlx::Postgres> for RecordTime {
    fn decode(
        value: sqlx::postgres::PgValueRef<'r>,
    ) -> std::result::Result<Self, sqlx::error::BoxDynError> {
        <DateTime<Utc> as sqlx::Decode<sqlx::Postgres>>::decode(value).map(Self)
    }
}

/// A record id as stored: its 16 bytes (ids are 32 lowercase hex digits, [`crate::new_id`]),
/// which sort as the hex does. The empty id, which keyset walks use for "before every
/// record", is no bytes. Anything else, such as an id in a forged cursor, is refused.
pub(crate) fn id_bytes(id: &str) -> Result<Vec<u8>> {
    if id.is_empty() {
        return Ok(Vec::new());
    }
    let not_an_id =
        || model::Error::bad_request(format!("{} is not a record id", model::error::shown(id)));
    let lower_hex = id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !lower_hex {
        return Err(not_an_id());
    }
    hex::decode(id).map_err(|_| not_an_id())
}

/// Every column of a record from `hash_records` (unaliased: its id is named by the table,
/// which a query may join with another table that has an `id`), the source URL joined again
/// from its parts (`record_writes::SourceColumns`).
pub(crate) const RECORD_COLUMNS: &str = concat!(
    "hash_records.id, vendor, executable_name, ",
    family_sql!(),
    " AS family, version, platform, arch, \
     hash_sha256, hash_sha1, hash_md5, \
     COALESCE((SELECT url FROM record_sources WHERE record_sources.id = hash_records.source_id), '') \
     || CASE WHEN source_rest_is_name THEN executable_name ELSE source_url END AS source_url, \
     download_verified, sig_signer, sig_issuer, \
     sig_serial, sig_thumbprint, cert_revoked_at, status, valid_from, valid_until, hmac, added_at, \
     size_bytes"
);

/// `SELECT` of every record column from `hash_records`, then `rest` (its `WHERE` and order).
fn select_records(rest: &str) -> String {
    format!("SELECT {RECORD_COLUMNS} FROM hash_records {rest}")
}

const CURRENT_NAMED: &str = concat!(
    "WHERE status = 'current' AND ",
    name_key_sql!(),
    " = $1 ORDER BY executable_name, platform, arch"
);
const CURRENT_ALL: &str = "WHERE status = 'current' ORDER BY executable_name, platform, arch";
const FEED_FIRST: &str =
    "WHERE status = 'current' ORDER BY executable_name, platform, arch, id LIMIT $1";
const FEED_AFTER: &str = "WHERE status = 'current' \
     AND (executable_name, platform, arch, id) > ($1, $2, $3, $4) \
     ORDER BY executable_name, platform, arch, id LIMIT $5";
const ADDED_FIRST: &str = "WHERE status = 'current' ORDER BY added_at, id LIMIT $1";
const ADDED_AFTER: &str = "WHERE status = 'current' AND (added_at, id) > ($1, $2) \
     ORDER BY added_at, id LIMIT $3";
const NEWEST_FIRST: &str = "WHERE status = 'current' ORDER BY added_at DESC, id DESC LIMIT $1";
const NEWEST_BEFORE: &str = "WHERE status = 'current' AND (added_at, id) < ($1, $2) \
     ORDER BY added_at DESC, id DESC LIMIT $3";
const RECORDS_AFTER: &str = "WHERE id > $1 ORDER BY id LIMIT $2";
const RECORD_COUNTS: &str = "SELECT kind, key, n FROM record_counts";
/// Names whose key starts with a prefix (`condition`, from [`name_key_prefix`]), one
/// spelling each: the smallest, so the answer does not vary by row order. `$limit` the limit.
fn names_with_prefix_sql(condition: &str, limit: usize) -> String {
    format!(
        concat!(
            "SELECT MIN(executable_name) FROM hash_records WHERE {condition} GROUP BY ",
            name_key_sql!(),
            " ORDER BY ",
            name_key_sql!(),
            " LIMIT ${limit}"
        ),
        condition = condition,
        limit = limit
    )
}

/// Current records of `n` families: `$1, $2` the first vendor and family, and so on.
fn families_sql(n: usize, params: Params) -> String {
    let alternatives = (0..n)
        .map(|i| {
            format!(
                concat!("(vendor = {} AND ", family_sql!(), " = {})"),
                params.one(2 * i + 1),
                params.one(2 * i + 2)
            )
        })
        .collect::<Vec<_>>()
        .join(" OR ");
    select_records(&format!(
        "WHERE status = 'current' AND ({alternatives}) ORDER BY added_at, id"
    ))
}

/// Records written by a transaction of a later epoch, with that epoch: `$1` the epoch,
/// `$2` the last id of the previous page (when `after`), `$3` the limit.
fn changed_after_sql(after: bool) -> String {
    // In (changed_epoch, id) order, which its index holds: ordered by id alone, planners
    // walk the whole primary key.
    let condition = if after {
        "changed_epoch >= $1 AND (changed_epoch > $1 OR id > $2)"
    } else {
        "changed_epoch > $1"
    };
    format!(
        "SELECT {RECORD_COLUMNS}, changed_epoch FROM hash_records WHERE {condition} \
         ORDER BY changed_epoch, id LIMIT $3"
    )
}

/// The records the service flagged as changed behind its back and still counted as
/// current, with what the counters hold of them and the row as it is now (if any).
fn unverified_sql() -> String {
    format!(
        "SELECT u.counted_vendor, u.counted_platform, u.counted_sha256, u.deleted, \
         {RECORD_COLUMNS} FROM records_unverified u \
         LEFT JOIN hash_records ON hash_records.id = u.id WHERE u.counted_current"
    )
}

fn start_of(day: NaiveDate) -> DateTime<Utc> {
    day.and_time(NaiveTime::MIN).and_utc()
}

/// The export's bounds: `$1` the first day's start, `$2` the start of the day after the last.
fn export_bounds(query: &ExportQuery) -> (DateTime<Utc>, DateTime<Utc>) {
    (
        start_of(query.from),
        start_of(query.to) + chrono::Duration::days(1),
    )
}

/// Filters shared by history-like queries: (SQL condition, bound text values).
fn platform_arch_filter(
    platform: Option<Platform>,
    arch: Option<Arch>,
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

/// A history's two statements, counting and paging, and their text binds after the name
/// key (`$1`); the page's limit and offset come last.
fn history_sql(query: &HistoryQuery) -> (String, String, Vec<String>) {
    let (extra, binds) = platform_arch_filter(query.platform, query.arch, 2);
    let filter = format!("{}{extra}", family_of_name(1));
    let count_sql = format!("SELECT COUNT(*) FROM hash_records WHERE {filter}");
    let n = 2 + binds.len();
    let page_sql = format!(
        "SELECT {RECORD_COLUMNS} FROM hash_records WHERE {filter} \
         ORDER BY valid_from DESC, id DESC LIMIT ${} OFFSET ${}",
        n,
        n + 1
    );
    (count_sql, page_sql, binds)
}

/// The condition that a row is of the family of the name key bound as `$n`: the families of
/// the records of that name, and the name itself (a family with its version in the name).
fn family_of_name(n: usize) -> String {
    format!(
        concat!(
            family_sql!(),
            " IN (SELECT ",
            family_sql!(),
            " FROM hash_records WHERE ",
            name_key_sql!(),
            " = ${n} UNION SELECT ${n})"
        ),
        n = n
    )
}

/// The export's WHERE clause and its text binds, after the two day bounds ($1, $2).
fn export_filter(query: &ExportQuery) -> (String, Vec<String>) {
    let mut sql = String::from("valid_from >= $1 AND valid_from < $2");
    let mut binds = Vec::new();
    if let Some(exe) = &query.executable {
        binds.push(model::name_key(exe));
        sql.push_str(&format!(" AND {}", family_of_name(3)));
    }
    let (extra, more) = platform_arch_filter(query.platform, query.arch, 3 + binds.len());
    sql.push_str(&extra);
    binds.extend(more);
    (sql, binds)
}

/// The count of an export up to a bound: the bound is bound after the text binds, so a
/// count reads at most that many index entries whatever the number of records.
fn export_count_sql(query: &ExportQuery) -> (String, Vec<String>) {
    let (filter, binds) = export_filter(query);
    let limit = 3 + binds.len();
    (
        format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM hash_records WHERE {filter} LIMIT ${limit}) AS t"
        ),
        binds,
    )
}

/// One page of an export: binds are the bounds, the text binds, the cursor's
/// (valid_from, id) when `after`, then the limit.
fn export_page_sql(query: &ExportQuery, after: bool) -> (String, Vec<String>) {
    let (mut filter, binds) = export_filter(query);
    let mut n = 3 + binds.len();
    if after {
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
    (sql, binds)
}

/// The statements of a [`CurrentSearch`] (each the `WHERE` and order after the columns) and
/// their text binds; the limit is bound after them. Each is ordered as its index is, so a
/// scan stops at the limit.
fn current_search_sql(search: &CurrentSearch, how: PrefixSearch) -> Vec<(String, Vec<String>)> {
    let mut parts: Vec<(String, Vec<String>, &str)> = Vec::new();
    if search.name_prefix.is_none() && search.vendors.is_empty() {
        parts.push((
            String::new(),
            Vec::new(),
            "executable_name, platform, arch, id",
        ));
    }
    if let Some(prefix) = &search.name_prefix {
        let (condition, binds) = name_key_prefix(&model::name_key(prefix), how, 1);
        parts.push((format!(" AND {condition}"), binds, name_key_sql!()));
    }
    for vendor in &search.vendors {
        parts.push((
            " AND vendor = $1".to_string(),
            vec![vendor.clone()],
            family_sql!(),
        ));
    }
    parts
        .into_iter()
        .map(|(condition, mut binds, order)| {
            let mut sql = format!("WHERE status = 'current'{condition}");
            if let Some(platform) = &search.platform {
                binds.push(platform.clone());
                sql.push_str(&format!(" AND platform = ${}", binds.len()));
            }
            sql.push_str(&format!(" ORDER BY {order} LIMIT ${}", binds.len() + 1));
            (sql, binds)
        })
        .collect()
}

/// The key and limit of a name-prefix search, or `None` when it matches nothing.
fn name_prefix_search(prefix: &str, limit: u32) -> Option<(String, u32)> {
    let limit = limit.min(MAX_NAME_SUGGESTIONS);
    let key = model::name_key(prefix);
    if key.chars().count() < MIN_NAME_PREFIX_CHARS || limit == 0 {
        return None;
    }
    Some((key, limit))
}

/// How a backend finds the name keys that start with a prefix in `hash_records_name_key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PrefixSearch {
    /// By `LIKE` alone: PostgreSQL's index is on `text_pattern_ops`, which turns a `LIKE`
    /// with a constant prefix into a range of the index in any locale.
    Like,
    /// By a range of keys, the `LIKE` checking each row found: SQLite uses an index for
    /// `LIKE` only on a plain column, and compares text byte by byte (code point order), in
    /// which the keys starting with a prefix are one range.
    LikeInRange,
}

/// The condition that a row's name key starts with `key` (in [`model::name_key`] form) and
/// its binds, numbered from `$first`.
fn name_key_prefix(key: &str, how: PrefixSearch, first: usize) -> (String, Vec<String>) {
    let like = format!(concat!(name_key_sql!(), " LIKE ${} ESCAPE '\\'"), first);
    let pattern = like_prefix_pattern(key);
    match (how, key_successor(key)) {
        (PrefixSearch::LikeInRange, Some(beyond)) => (
            format!(
                concat!(
                    name_key_sql!(),
                    " >= ${} AND ",
                    name_key_sql!(),
                    " < ${} AND {}"
                ),
                first + 1,
                first + 2,
                like,
            ),
            vec![pattern, key.to_string(), beyond],
        ),
        _ => (like, vec![pattern]),
    }
}

/// The `LIKE … ESCAPE '\'` pattern of keys starting with `key`: `%`, `_` and `\` in it are
/// plain text.
fn like_prefix_pattern(key: &str) -> String {
    let escaped = key
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("{escaped}%")
}

/// The first string, in code point order, after every string starting with `prefix`: its
/// last character that has a successor, advanced by one (surrogates skipped), with what
/// followed it dropped. `None` when there is no such character (or no prefix).
fn key_successor(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last {
            '\u{D7FF}' => Some('\u{E000}'),
            c => char::from_u32(u32::from(c) + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
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
/// A record may come back once per group that names it; the caller de-duplicates. The
/// digests are bound as the bytes they are stored as, in [`digest_in`]'s form.
fn hash_lookup(hashes: &[HashValue], params: Params) -> (String, Vec<&[u8]>) {
    let mut selects = Vec::new();
    let mut binds: Vec<&[u8]> = Vec::new();
    for (algo, column) in [
        (HashAlgo::Sha256, "hash_sha256"),
        (HashAlgo::Sha1, "hash_sha1"),
        (HashAlgo::Md5, "hash_md5"),
    ] {
        let values: Vec<&[u8]> = hashes
            .iter()
            .filter(|h| h.algo() == algo)
            .map(HashValue::digest)
            .collect();
        for group in values.chunks(FIND_GROUP) {
            selects.push(format!(
                "SELECT {RECORD_COLUMNS} FROM hash_records WHERE {}",
                digest_in(column, binds.len() + 1, FIND_GROUP, params)
            ));
            let mut padded = group.to_vec();
            padded.resize(FIND_GROUP, group[group.len() - 1]);
            binds.extend(digest_binds(&padded));
        }
    }
    (selects.join(" UNION ALL "), binds)
}

/// The condition "`column` holds one of `n` digests", in the form the digest indexes serve:
/// they key on a digest's first [`DIGEST_PREFIX`] bytes (migration 0030), so the condition
/// names the prefixes, which the index finds, and the whole digests, which each row it finds
/// is checked against. Binds, from `$first`, the values of [`digest_binds`]. The prefixes
/// are bound rather than cut in SQL: PostgreSQL cannot estimate `substr($1, 1, 8)` in a
/// generic plan, so it planned such a statement anew at every execution.
pub(crate) fn digest_in(column: &str, first: usize, n: usize, params: Params) -> String {
    format!(
        "substr({column}, 1, {DIGEST_PREFIX}) IN ({}) AND {column} IN ({})",
        params.list(first, n),
        params.list(first + n, n)
    )
}

/// Bytes of a digest that its index keys on.
pub(crate) const DIGEST_PREFIX: usize = 8;

/// The binds of [`digest_in`] for `digests`: their prefixes, then the digests.
pub(crate) fn digest_binds<'a>(digests: &[&'a [u8]]) -> Vec<&'a [u8]> {
    let prefixes = digests.iter().map(|d| &d[..DIGEST_PREFIX.min(d.len())]);
    prefixes.chain(digests.iter().copied()).collect()
}

/// Adds the rows of one lookup statement to `found`, each record once (`seen`).
fn collect_found<R: Columns>(
    rows: &[R],
    include_superseded: bool,
    seen: &mut HashSet<Vec<u8>>,
    found: &mut Vec<HashRecord>,
    verify: impl Fn(&R) -> Result<HashRecord>,
) -> Result<()> {
    for row in rows {
        // Superseded records are left out here rather than in SQL: a `status` condition
        // invites PostgreSQL, without statistics, to scan the whole partial index of
        // current records. Left out before their HMAC is checked, as the SQL condition did.
        if !include_superseded && row.text_ref("status")? != "current" {
            continue;
        }
        if seen.insert(row.bytes_ref("id")?.to_vec()) {
            found.push(verify(row)?);
        }
    }
    Ok(())
}

/// A record as stored, its HMAC verified; a failure is noted in `integrity`.
fn record_from_row(
    row: &impl Columns,
    signer: &RecordSigner,
    integrity: &IntegrityMonitor,
) -> Result<HashRecord> {
    let platform = row.text("platform")?;
    let arch = row.text("arch")?;
    let status = row.text("status")?;
    let record = NewRecord {
        vendor: row.text("vendor")?,
        executable_name: row.text("executable_name")?,
        version: row.text("version")?,
        platform: platform
            .parse()
            .map_err(|_| corrupt("platform", &platform))?,
        arch: arch.parse().map_err(|_| corrupt("arch", &arch))?,
        hash_sha256: hex_column(row, "hash_sha256")?,
        hash_sha1: opt_hex_column(row, "hash_sha1")?,
        hash_md5: opt_hex_column(row, "hash_md5")?,
        source_url: row.text("source_url")?,
        download_verified: row.flag("download_verified")?,
        sig_signer: row.opt_text("sig_signer")?,
        sig_issuer: row.opt_text("sig_issuer")?,
        sig_serial: row.opt_text("sig_serial")?,
        sig_thumbprint: row.opt_text("sig_thumbprint")?,
        size: match row.opt_int("size_bytes")? {
            Some(n) => Some(u64::try_from(n).map_err(|_| corrupt("size_bytes", &n.to_string()))?),
            None => None,
        },
    };
    let id = hex_column(row, "id")?;
    let valid_from = row.record_time("valid_from")?;
    // Set when the inserting transaction commits; a row read inside it has none yet.
    let added_at = row.opt_record_time("added_at")?;
    let integrity_ok = signer.verify(&id, &record, row.bytes_ref("hmac")?);
    if !integrity_ok {
        integrity.failed(&id);
    }
    Ok(HashRecord {
        id,
        record,
        family: row.text("family")?,
        status: status.parse().map_err(|_| corrupt("status", &status))?,
        valid_from,
        added_at: added_at.unwrap_or(valid_from),
        valid_until: row.opt_record_time("valid_until")?,
        cert_revoked_at: row.opt_time("cert_revoked_at")?,
        integrity_ok,
    })
}

/// A count read from the database; never negative.
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The counters behind [`RecordStore::stats`], as `record_counts` holds them, less what
/// records changed behind the service's back take away.
#[derive(Default)]
struct Counts {
    current: i64,
    hashes: i64,
    vendors: HashMap<String, i64>,
    platforms: HashMap<String, i64>,
}

impl Counts {
    fn from_rows(rows: &[impl Columns]) -> Result<Self> {
        let mut counts = Self::default();
        for row in rows {
            let kind = row.text("kind")?;
            let key = row.text("key")?;
            let n = row.int("n")?;
            match kind.as_str() {
                "current" => counts.current = n,
                "sha256" => counts.hashes = n,
                "vendor" => {
                    counts.vendors.insert(key, n);
                }
                "platform" => {
                    counts.platforms.insert(key, n);
                }
                _ => {}
            }
        }
        Ok(counts)
    }

    /// Takes the flagged rows (`unverified_sql`) whose record is gone or fails its HMAC
    /// out of the counts; the ids of those failing, and the SHA-256 they were counted
    /// under (its bytes, as stored), which stay known-good only while another current
    /// record of them verifies.
    fn discount_flagged<R: Columns>(
        &mut self,
        flagged: &[R],
        verify: impl Fn(&R) -> Result<HashRecord>,
    ) -> Result<(HashSet<String>, HashSet<Vec<u8>>)> {
        let mut failed_ids = HashSet::new();
        let mut suspect_hashes = HashSet::new();
        for row in flagged {
            let deleted = row.flag("deleted")?;
            if !deleted {
                // Once superseded through the service, the counts left it already.
                let r = verify(row)?;
                if r.integrity_ok || r.status != model::RecordStatus::Current {
                    continue;
                }
            }
            if !deleted {
                failed_ids.insert(hex_column(row, "id")?);
            }
            let platform = row.text("counted_platform")?;
            *self.platforms.entry(platform).or_default() -= 1;
            suspect_hashes.insert(row.bytes_ref("counted_sha256")?.to_vec());
            if deleted {
                self.current -= 1;
                let vendor = row.text("counted_vendor")?;
                *self.vendors.entry(vendor).or_default() -= 1;
            }
        }
        Ok((failed_ids, suspect_hashes))
    }

    fn stats(&self) -> RecordStats {
        let positive = |m: &HashMap<String, i64>, skip: &str| {
            m.iter()
                .filter(|(k, n)| **n > 0 && k.as_str() != skip)
                .count() as u64
        };
        RecordStats {
            known_good_hashes: count(self.hashes),
            total_vendors: positive(&self.vendors, ""),
            // `universal` marks platform-neutral artifacts, not a platform.
            total_platforms: positive(&self.platforms, Platform::Universal.as_str()),
            total_records: count(self.current),
        }
    }
}

macro_rules! records_backend {
    ($store:ident, $row:ty, $prefix_search:expr, $params:expr) => {
        impl $store {
            pub(crate) fn record_from_row(&self, row: &$row) -> Result<HashRecord> {
                record_from_row(row, &self.signer, &self.integrity)
            }

            fn records_from_rows(&self, rows: Vec<$row>) -> Result<Vec<HashRecord>> {
                rows.iter().map(|r| self.record_from_row(r)).collect()
            }

            /// Queues validated records for the group commit and waits for their outcomes:
            /// either another call's writer answers, or this call writes the queue.
            async fn write_queued(
                &self,
                records: Vec<(NewRecord, DateTime<Utc>)>,
            ) -> Result<Vec<RecordOutcome>> {
                use futures::future::Either;
                let records = std::sync::Arc::new(records);
                loop {
                    let (reply, mut answer) = futures::channel::oneshot::channel();
                    self.group.push(crate::record_writes::Pending {
                        records: records.clone(),
                        reply,
                    });
                    let answered = loop {
                        let mut lock = self.group.writer.lock();
                        match futures::future::select(&mut answer, &mut lock).await {
                            Either::Left((answered, _)) => break answered,
                            Either::Right((guard, _)) => {
                                crate::record_writes::let_ready_tasks_run().await;
                                let batch = self.group.take();
                                if !batch.is_empty() {
                                    self.write_pending(batch).await;
                                }
                                drop(guard);
                            }
                        }
                    };
                    match answered {
                        Ok(Ok((outcomes, epoch))) => {
                            if let Some(epoch) = epoch {
                                self.publish_records_epoch(epoch).await;
                            }
                            return Ok(outcomes);
                        }
                        Ok(Err(e)) => return Err(e),
                        // The writer that took it was cancelled before it committed.
                        Err(futures::channel::oneshot::Canceled) => continue,
                    }
                }
            }
        }

        #[async_trait]
        impl RecordStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn record(&self, record: NewRecord, now: DateTime<Utc>) -> Result<RecordOutcome> {
                let outcomes = self
                    .write_queued(vec![(record.validate()?, micros(now))])
                    .await?;
                outcomes
                    .into_iter()
                    .next()
                    .ok_or_else(|| model::Error::internal("a recorded file got no outcome"))
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
                self.write_queued(records).await
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn current_records(&self, executable: Option<&str>) -> Result<Vec<HashRecord>> {
                let rows = match executable {
                    Some(name) => {
                        sqlx::query(AssertSqlSafe(select_records(CURRENT_NAMED)))
                            .bind(model::name_key(name))
                            .fetch_all(&self.pool)
                            .await
                    }
                    None => {
                        sqlx::query(AssertSqlSafe(select_records(CURRENT_ALL)))
                            .fetch_all(&self.pool)
                            .await
                    }
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
                let query = match after {
                    None => sqlx::query(AssertSqlSafe(select_records(FEED_FIRST)))
                        .bind(i64::from(limit)),
                    Some(p) => sqlx::query(AssertSqlSafe(select_records(FEED_AFTER)))
                        .bind(&p.executable_name)
                        .bind(&p.platform)
                        .bind(&p.arch)
                        .bind(id_bytes(&p.id)?)
                        .bind(i64::from(limit)),
                };
                // Each row is read back and its HMAC checked as it arrives, while the
                // database reads the rows after it: a page is the daily root's unit of work.
                use futures::TryStreamExt as _;
                query
                    .fetch(&self.pool)
                    .map_err(db_error)
                    .and_then(|row| std::future::ready(self.record_from_row(&row)))
                    .try_collect()
                    .await
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn search_current(
                &self,
                search: &CurrentSearch,
                limit: u32,
            ) -> Result<Vec<HashRecord>> {
                let mut found = Vec::new();
                for (rest, binds) in current_search_sql(search, $prefix_search) {
                    let sql = select_records(&rest);
                    let mut q = sqlx::query(AssertSqlSafe(sql.as_str()));
                    for text in &binds {
                        q = q.bind(text);
                    }
                    let rows = q
                        .bind(i64::from(limit))
                        .fetch_all(&self.pool)
                        .await
                        .map_err(db_error)?;
                    found.extend(self.records_from_rows(rows)?);
                }
                let feed_order = |r: &HashRecord| {
                    let n = &r.record;
                    (
                        n.executable_name.clone(),
                        n.platform.as_str(),
                        n.arch.as_str(),
                        r.id.clone(),
                    )
                };
                found.sort_by_cached_key(feed_order);
                found.dedup_by(|a, b| a.id == b.id);
                found.truncate(limit as usize);
                Ok(found)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn current_records_added_after(
                &self,
                after: Option<&AddedPosition>,
                limit: u32,
            ) -> Result<Vec<HashRecord>> {
                let rows = match after {
                    None => {
                        sqlx::query(AssertSqlSafe(select_records(ADDED_FIRST)))
                            .bind(i64::from(limit))
                            .fetch_all(&self.pool)
                            .await
                    }
                    Some(p) => {
                        sqlx::query(AssertSqlSafe(select_records(ADDED_AFTER)))
                            .bind(RecordTime(micros(p.added_at)))
                            .bind(id_bytes(&p.id)?)
                            .bind(i64::from(limit))
                            .fetch_all(&self.pool)
                            .await
                    }
                }
                .map_err(db_error)?;
                self.records_from_rows(rows)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn current_records_added_before(
                &self,
                before: Option<&AddedPosition>,
                limit: u32,
            ) -> Result<Vec<HashRecord>> {
                let rows = match before {
                    None => {
                        sqlx::query(AssertSqlSafe(select_records(NEWEST_FIRST)))
                            .bind(i64::from(limit))
                            .fetch_all(&self.pool)
                            .await
                    }
                    Some(p) => {
                        sqlx::query(AssertSqlSafe(select_records(NEWEST_BEFORE)))
                            .bind(RecordTime(micros(p.added_at)))
                            .bind(id_bytes(&p.id)?)
                            .bind(i64::from(limit))
                            .fetch_all(&self.pool)
                            .await
                    }
                }
                .map_err(db_error)?;
                self.records_from_rows(rows)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn current_in_families(
                &self,
                families: &[(String, String)],
            ) -> Result<Vec<HashRecord>> {
                let mut found = Vec::new();
                for chunk in families.chunks(FIND_CHUNK / 2) {
                    let mut q = sqlx::query(AssertSqlSafe(families_sql(chunk.len(), $params)));
                    for (vendor, family) in chunk {
                        q = q.bind(vendor).bind(family);
                    }
                    let rows = q.fetch_all(&self.pool).await.map_err(db_error)?;
                    found.extend(self.records_from_rows(rows)?);
                }
                Ok(found)
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
                    let (sql, binds) = hash_lookup(chunk, $params);
                    if binds.is_empty() {
                        continue;
                    }
                    let mut q = sqlx::query(AssertSqlSafe(sql));
                    for v in binds {
                        q = q.bind(v);
                    }
                    let rows = q.fetch_all(&self.pool).await.map_err(db_error)?;
                    collect_found(&rows, include_superseded, &mut seen, &mut found, |row| {
                        self.record_from_row(row)
                    })?;
                }
                Ok(found)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn records_after(
                &self,
                after: Option<&str>,
                limit: u32,
            ) -> Result<Vec<HashRecord>> {
                let rows = sqlx::query(AssertSqlSafe(select_records(RECORDS_AFTER)))
                    .bind(id_bytes(after.unwrap_or(""))?)
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
                let rows = sqlx::query(AssertSqlSafe(changed_after_sql(after.is_some())))
                    .bind(i64::try_from(epoch).unwrap_or(i64::MAX))
                    .bind(id_bytes(after.unwrap_or(""))?)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter()
                    .map(|row| {
                        let changed = row.int("changed_epoch")?;
                        Ok((
                            u64::try_from(changed).unwrap_or_default(),
                            self.record_from_row(row)?,
                        ))
                    })
                    .collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn history(&self, query: &HistoryQuery) -> Result<Page<HashRecord>> {
                let (count_sql, page_sql, binds) = history_sql(query);
                let name_key = model::name_key(&query.executable);
                let mut total =
                    sqlx::query_scalar::<_, i64>(AssertSqlSafe(count_sql)).bind(&name_key);
                for b in &binds {
                    total = total.bind(b);
                }
                let total = total.fetch_one(&self.pool).await.map_err(db_error)?;
                let mut q = sqlx::query(AssertSqlSafe(page_sql)).bind(&name_key);
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
                    total: count(total),
                })
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn export_count(&self, query: &ExportQuery, at_most: u64) -> Result<u64> {
                let (sql, binds) = export_count_sql(query);
                let (from, to) = export_bounds(query);
                let mut q = sqlx::query_scalar::<_, i64>(AssertSqlSafe(sql))
                    .bind(RecordTime(from))
                    .bind(RecordTime(to));
                for b in &binds {
                    q = q.bind(b);
                }
                let at_most = i64::try_from(at_most).unwrap_or(i64::MAX);
                let n = q
                    .bind(at_most)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(count(n))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn export_page(
                &self,
                query: &ExportQuery,
                after: Option<&ExportCursor>,
                limit: u32,
            ) -> Result<Vec<HashRecord>> {
                let (sql, binds) = export_page_sql(query, after.is_some());
                let (from, to) = export_bounds(query);
                let mut q = sqlx::query(AssertSqlSafe(sql))
                    .bind(RecordTime(from))
                    .bind(RecordTime(to));
                for b in &binds {
                    q = q.bind(b);
                }
                if let Some(c) = after {
                    q = q.bind(RecordTime(c.valid_from)).bind(id_bytes(&c.id)?);
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
                let Some((key, limit)) = name_prefix_search(prefix, limit) else {
                    return Ok(Vec::new());
                };
                let (condition, binds) = name_key_prefix(&key, $prefix_search, 1);
                let sql = names_with_prefix_sql(&condition, binds.len() + 1);
                let mut q = sqlx::query_scalar::<_, String>(AssertSqlSafe(sql));
                for text in &binds {
                    q = q.bind(text);
                }
                q.bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn stats(&self) -> Result<RecordStats> {
                // From the counters every record write moves, never from the records. A row
                // changed behind the service's back (noted by a trigger; normally none) is
                // verified here: a record failing its HMAC is no known-good hash, as the
                // lookup and the feed already treat it.
                let rows = sqlx::query(RECORD_COUNTS)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                let mut counts = Counts::from_rows(&rows)?;
                let flagged = sqlx::query(AssertSqlSafe(unverified_sql()))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                let (failed_ids, suspect_hashes) =
                    counts.discount_flagged(&flagged, |row| self.record_from_row(row))?;
                // A counted hash stays known-good while another current record of it verifies.
                // Every record of the hash is read and the current ones kept here: a status
                // condition lets PostgreSQL, without statistics, walk the partial index of
                // current records instead of the hash's.
                let with_sha256 = select_records(&format!(
                    "WHERE {}",
                    digest_in("hash_sha256", 1, 1, $params)
                ));
                for sha256 in suspect_hashes {
                    let mut q = sqlx::query(AssertSqlSafe(with_sha256.clone()));
                    for value in digest_binds(&[sha256.as_slice()]) {
                        q = q.bind(value);
                    }
                    let rows = q.fetch_all(&self.pool).await.map_err(db_error)?;
                    let mut still_good = false;
                    for row in &rows {
                        let r = self.record_from_row(row)?;
                        still_good |= r.status == model::RecordStatus::Current
                            && r.integrity_ok
                            && !failed_ids.contains(&r.id);
                    }
                    if !still_good {
                        counts.hashes -= 1;
                    }
                }
                Ok(counts.stats())
            }
        }
    };
}

records_backend!(
    SqliteStore,
    SqliteRow,
    PrefixSearch::LikeInRange,
    Params::Anonymous
);
records_backend!(PgStore, PgRow, PrefixSearch::Like, Params::Numbered);
crate::record_writes::record_writer!(
    SqliteStore,
    sqlx::Sqlite,
    "BEGIN IMMEDIATE",
    None::<&'static str>,
    crate::record_writes::sqlite_update,
    crate::record_writes::sqlite_insert,
    crate::backend::Params::Anonymous
);
crate::record_writes::record_writer!(
    PgStore,
    sqlx::Postgres,
    "BEGIN",
    Some(crate::record_writes::PG_LOCK_RECORDS),
    crate::record_writes::pg_update,
    crate::record_writes::pg_insert,
    crate::backend::Params::Numbered
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_successor_follows_every_key_with_its_prefix() {
        assert_eq!(key_successor("pu/").as_deref(), Some("pu0"));
        assert_eq!(key_successor("élan").as_deref(), Some("élao"));
        // Surrogates are no characters; the last character has no successor.
        assert_eq!(key_successor("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
        assert_eq!(key_successor("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(key_successor("\u{10FFFF}"), None);
        assert_eq!(key_successor(""), None);
    }
}
