//! Writing vendor records in batches. A batch runs in one transaction: the current rows of
//! the families it touches are read with a few `IN` queries, and the whole history only of
//! those that need it (see [`needing_history`]); every record is applied to them in
//! memory exactly as one `record` call at a time would (supersession, intervals fitted
//! between neighbours, "the same file is unchanged"), and what changed is written in a few
//! statements whatever the number of rows, tagged with the batch's records epoch and
//! `added_at`: on SQLite multi-row `UPDATE … FROM (VALUES …)` and `INSERT`s of a few hundred
//! rows, on PostgreSQL one `UPDATE … FROM UNNEST` and one `INSERT … SELECT FROM UNNEST` of
//! one array a column. The current-record counters behind `stats` move in the same
//! transaction, in one statement, from one read of the other current rows sharing the
//! batch's hashes.
//!
//! Concurrent `record` and `record_many` calls (the refresh has up to 256 artifacts waiting
//! for their records at once, each archive's members in one call) share one transaction:
//! each call queues its records, and whoever holds the writer lock writes everything
//! queued, so a busy refresh commits once per group of artifacts instead of once per file.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};
use model::{Arch, HashRecord, NewRecord, Platform, RecordSigner, RecordStatus};

use crate::backend::{Columns, Params};
use crate::records::RecordTime;
use crate::{RecordOutcome, new_id};

/// Rows per multi-row `INSERT` (26 values a row: within both backends' bind limits).
pub(crate) const INSERT_ROWS: usize = 500;
/// Records applied in memory between two flushes to the database, bounding a batch's
/// memory: a chunk ends at the first family boundary past this many (see `plan_chunks`).
pub(crate) const PLAN_CHUNK: usize = 5000;
/// Values per `IN` list when reading histories and hashes.
pub(crate) const IN_LIST: usize = 500;

/// One family of one vendor, platform and arch: the unit of supersession.
pub(crate) type FamilyKey = (String, String, Platform, Arch);

pub(crate) fn family_key(r: &NewRecord) -> FamilyKey {
    (r.vendor.clone(), r.family(), r.platform, r.arch)
}

/// A record of a `record_many` call, with its family and its place in the call.
pub(crate) struct Planned {
    pub key: FamilyKey,
    pub index: usize,
    pub record: NewRecord,
    pub now: DateTime<Utc>,
}

/// The call's records in chunks of about [`PLAN_CHUNK`] to apply and flush in turn, grouped
/// by family, each family's records in call order and never split between chunks. Records
/// of different families do not touch each other's histories, so grouping changes no
/// outcome, and each family's history is read from the database once a call, however far
/// apart its records are (an import of release after release names each file once a
/// release).
pub(crate) fn plan_chunks(records: Vec<(NewRecord, DateTime<Utc>)>) -> Vec<Vec<Planned>> {
    let mut planned: Vec<Planned> = records
        .into_iter()
        .enumerate()
        .map(|(index, (record, now))| Planned {
            // Computed once a record: it folds the name.
            key: family_key(&record),
            index,
            record,
            now,
        })
        .collect();
    // Stable: a family's records keep their order.
    planned.sort_by(|a, b| a.key.cmp(&b.key));
    let mut chunks = Vec::new();
    let mut chunk: Vec<Planned> = Vec::new();
    for p in planned {
        if chunk.len() >= PLAN_CHUNK && chunk.last().is_some_and(|last| last.key != p.key) {
            chunks.push(std::mem::take(&mut chunk));
        }
        chunk.push(p);
    }
    if !chunk.is_empty() {
        chunks.push(chunk);
    }
    chunks
}

/// Outcomes tagged with their record's place in the call, back in call order.
pub(crate) fn in_call_order(mut outcomes: Vec<(usize, RecordOutcome)>) -> Vec<RecordOutcome> {
    outcomes.sort_unstable_by_key(|(index, _)| *index);
    outcomes.into_iter().map(|(_, o)| o).collect()
}

/// A row of a family's history as the batch sees it.
pub(crate) struct Entry {
    pub rec: HashRecord,
    /// The HMAC of a row this batch inserts; `None` for a stored row.
    pub hmac: Option<String>,
    /// Current in the database when the batch read it.
    pub was_current: bool,
    /// A stored row whose status or interval this batch changed.
    pub dirty: bool,
    /// The row's `valid_from` as stored (a new row's own).
    pub stored_from: DateTime<Utc>,
}

impl Entry {
    pub fn stored(rec: HashRecord) -> Self {
        Self {
            was_current: rec.status == RecordStatus::Current,
            stored_from: rec.valid_from,
            rec,
            hmac: None,
            dirty: false,
        }
    }
}

/// Whether two records are the same file of the same version: recording it again adds
/// nothing to the history.
fn same_file(a: &NewRecord, b: &NewRecord) -> bool {
    a.version == b.version
        && a.hash_sha256 == b.hash_sha256
        && a.hash_sha1 == b.hash_sha1
        && a.hash_md5 == b.hash_md5
}

/// Applies one record to its family's history. A version at least as new as the current
/// record supersedes it (unless it is the same file, verified) and becomes current; an
/// older one enters the history as superseded, its interval fitted between its neighbours
/// in version order. A file already in the history (same version and hashes) changes
/// nothing. `family` is the record's (`NewRecord::family`).
pub(crate) fn apply(
    history: &mut Vec<Entry>,
    record: NewRecord,
    family: String,
    now: DateTime<Utc>,
    signer: &RecordSigner,
) -> RecordOutcome {
    // Oldest first, as the history runs.
    history.sort_by(|a, b| (a.rec.valid_from, &a.rec.id).cmp(&(b.rec.valid_from, &b.rec.id)));
    let current = history
        .iter()
        .position(|e| e.rec.status == RecordStatus::Current);
    if let Some(cur) = current.map(|i| &history[i].rec)
        && cur.integrity_ok
        && cur.record == record
    {
        return RecordOutcome::Unchanged { id: cur.id.clone() };
    }
    if let Some(same) = history.iter().map(|e| &e.rec).find(|r| {
        r.integrity_ok && r.status == RecordStatus::Superseded && same_file(&r.record, &record)
    }) {
        return RecordOutcome::Unchanged {
            id: same.id.clone(),
        };
    }
    let tick = chrono::Duration::microseconds(1);
    let older = current.filter(|&i| {
        model::version::compare(
            &record.vendor,
            &record.version,
            &history[i].rec.record.version,
        ) == std::cmp::Ordering::Less
    });
    // A different SHA-256 for a version already recorded is a republish.
    let hash_changed = match current {
        Some(i) if older.is_none() => {
            let c = &history[i].rec.record;
            c.version == record.version && c.hash_sha256 != record.hash_sha256
        }
        _ => history.iter().any(|e| {
            e.rec.record.version == record.version && e.rec.record.hash_sha256 != record.hash_sha256
        }),
    };
    let (status, valid_from, valid_until, superseded) = match (current, older) {
        (_, Some(_)) => {
            // The first record newer than this one (equal versions already recorded count
            // as older: arrival order). It and all after it keep their intervals.
            let next = history
                .iter()
                .position(|e| {
                    model::version::compare(&record.vendor, &record.version, &e.rec.record.version)
                        == std::cmp::Ordering::Less
                })
                .unwrap_or(history.len() - 1);
            let until = history[next].rec.valid_from;
            // `now` is the channel's release date for a past version taken in by a history
            // horizon or a pin; otherwise it is later than `until`.
            let from = now.min(until - tick);
            // Earlier records end where the next one starts; any that would not start
            // strictly before it move back by a microsecond.
            let mut next_from = from;
            for e in history[..next].iter_mut().rev() {
                let old_from = e.rec.valid_from;
                let start = if old_from < next_from {
                    old_from
                } else {
                    next_from - tick
                };
                if start != old_from || e.rec.valid_until != Some(next_from) {
                    e.rec.valid_from = start;
                    e.rec.valid_until = Some(next_from);
                    e.dirty = true;
                }
                if start == old_from {
                    break;
                }
                next_from = start;
            }
            (RecordStatus::Superseded, from, Some(until), None)
        }
        (Some(i), None) => {
            let cur = &mut history[i];
            // valid_from keeps history order equal to version order, even within one
            // batch (one `now`).
            let from = now.max(cur.rec.valid_from + tick);
            cur.rec.status = RecordStatus::Superseded;
            cur.rec.valid_until = Some(from);
            cur.dirty = true;
            (RecordStatus::Current, from, None, Some(cur.rec.id.clone()))
        }
        (None, None) => (RecordStatus::Current, now, None, None),
    };
    let id = new_id();
    let hmac = signer.sign(&id, &record);
    history.push(Entry {
        rec: HashRecord {
            id: id.clone(),
            family,
            record,
            status,
            valid_from,
            valid_until,
            // Given when the batch is written.
            added_at: valid_from,
            cert_revoked_at: None,
            integrity_ok: true,
        },
        hmac: Some(hmac),
        was_current: false,
        dirty: true,
        stored_from: valid_from,
    });
    RecordOutcome::Inserted {
        id,
        superseded,
        hash_changed,
    }
}

/// How a flush moves the current-record counters: rows that became current and rows that
/// stopped being current.
#[derive(Default)]
pub(crate) struct CountDeltas {
    pub by_kind: BTreeMap<(&'static str, String), i64>,
    /// SHA-256 of every row entering or leaving the current set: their distinct count is
    /// read before and after the flush.
    pub hashes: HashSet<String>,
}

impl CountDeltas {
    pub fn of(families: &HashMap<FamilyKey, Vec<Entry>>) -> Self {
        let mut d = Self::default();
        for e in families.values().flatten() {
            let now_current = e.rec.status == RecordStatus::Current;
            let delta = match (e.was_current, now_current) {
                (false, true) => 1,
                (true, false) => -1,
                _ => continue,
            };
            let r = &e.rec.record;
            *d.by_kind.entry(("current", String::new())).or_default() += delta;
            *d.by_kind.entry(("vendor", r.vendor.clone())).or_default() += delta;
            *d.by_kind
                .entry(("platform", r.platform.as_str().to_string()))
                .or_default() += delta;
            d.hashes.insert(r.hash_sha256.clone());
        }
        d.by_kind.retain(|_, n| *n != 0);
        d
    }
}

/// How the distinct count of current SHA-256 among `hashes` moves with the flush of
/// `families`: a hash counts before (after) when a current row outside the families has it
/// (`elsewhere`) or one of the families' rows was (is) current with it.
pub(crate) fn distinct_delta(
    families: &HashMap<FamilyKey, Vec<Entry>>,
    hashes: &[&str],
    elsewhere: &HashSet<String>,
) -> i64 {
    let mut before: HashSet<&str> = HashSet::new();
    let mut after: HashSet<&str> = HashSet::new();
    for e in families.values().flatten() {
        let h = e.rec.record.hash_sha256.as_str();
        if e.was_current {
            before.insert(h);
        }
        if e.rec.status == RecordStatus::Current {
            after.insert(h);
        }
    }
    let counted = |set: &HashSet<&str>| {
        hashes
            .iter()
            .filter(|h| elsewhere.contains(**h) || set.contains(**h))
            .count() as i64
    };
    counted(&after) - counted(&before)
}

/// What a queued call gets back: one outcome a record, and the records epoch of the
/// transaction if it wrote anything.
pub(crate) type Written = (Vec<RecordOutcome>, Option<u64>);

/// One queued `record` or `record_many` call: its records with their `now`, written all or
/// none, and where its outcomes go. Shared, so a call whose writer was cancelled queues
/// them again without copying.
pub(crate) struct Pending {
    pub records: std::sync::Arc<Vec<(NewRecord, DateTime<Utc>)>>,
    pub reply: futures::channel::oneshot::Sender<crate::Result<Written>>,
}

/// The queue of `record` and `record_many` calls and the lock its writer holds.
#[derive(Default)]
pub(crate) struct GroupCommit {
    pub queue: std::sync::Mutex<Vec<Pending>>,
    pub writer: futures::lock::Mutex<()>,
}

impl GroupCommit {
    pub fn push(&self, p: Pending) {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).push(p);
    }

    pub fn take(&self) -> Vec<Pending> {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Lets every task that is ready run once before a writer takes the queue: the calls the
/// previous group just answered queue their next records and join this group rather than
/// the one after (measured: a refresh's groups about 30 % larger).
pub(crate) async fn let_ready_tasks_run() {
    let mut yielded = false;
    futures::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await;
}

/// The key every record-writing transaction locks on PostgreSQL: writes of records are
/// serialised, as SQLite's `BEGIN IMMEDIATE` serialises them, so a batch of any size needs
/// one lock rather than one per family.
pub(crate) const RECORDS_LOCK: &str = "records";
/// Takes [`RECORDS_LOCK`] (bound as `$1`) for the transaction, on PostgreSQL.
pub(crate) const PG_LOCK_RECORDS: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";

/// Settings of the connection that writes a batch, set for the batch and undone after it,
/// so the pool's idle connections do not each keep them. On SQLite:
/// - A page cache of 256 MB: a batch inserts into a dozen indexes at random places, and
///   with the default 2 MB their pages leave the cache mid-transaction, are spilled to the
///   WAL and read back.
/// - Temporary storage in memory: each multi-row statement inside a transaction keeps a
///   statement journal (to undo that statement alone), otherwise a file under /var/tmp
///   written and read back at every statement. Only for the batch, because other queries'
///   temporary sort trees may be as large as the records.
pub(crate) struct WriterSettings {
    pub set: &'static str,
    pub undo: &'static str,
}

pub(crate) const SQLITE_WRITER_SETTINGS: WriterSettings = WriterSettings {
    set: "PRAGMA cache_size = -262144; PRAGMA temp_store = MEMORY",
    // SQLite's defaults; lowering the cache size frees the pages above it.
    undo: "PRAGMA cache_size = -2000; PRAGMA temp_store = DEFAULT",
};

/// PostgreSQL:
/// - The batch's statements are planned at each execution, for their values and the table
///   as it is then. Otherwise, after five executions, a connection keeps a generic plan
///   costed when the table was small (a first import, a fresh service), and every `IN`
///   list of hashes then reads the whole table while the batch grows it: 250 ms a query of
///   500 hashes at 20,000 rows, most of an import's time.
/// - No sequential scans: every read of a batch looks rows up by key (families, digests,
///   source URLs), each with its index. A table grown by an import has no statistics until
///   autovacuum analyzes it, a minute or more later; the planner then guesses that an
///   `IN` list matches a third of the table and reads all of it, each query of each batch
///   (measured: an import of 1,000,000 records at 2,745 records/s, the families' and the
///   digests' queries 60 ms each at 300,000 rows).
///
/// Several statements: run with `sqlx::raw_sql`.
pub(crate) const PG_WRITER_SETTINGS: WriterSettings = WriterSettings {
    set: "SET plan_cache_mode = force_custom_plan; SET enable_seqscan = off",
    undo: "RESET plan_cache_mode; RESET enable_seqscan",
};

/// The columns of a new `hash_records` row, in the order every insert names them.
const INSERT_COLUMNS: &str = "id, vendor, executable_name, family, version, platform, arch, \
     hash_sha256, hash_sha1, hash_md5, source_url, download_verified, sig_signer, sig_issuer, \
     sig_serial, sig_thumbprint, status, valid_from, valid_until, hmac, name_key, size_bytes, \
     added_at, source_id, source_rest_is_name, changed_epoch";

/// A source URL as stored: where it was fetched from, kept once in `record_sources` (an
/// archive's URL through the `#` that names its member, else a download's URL through its
/// last `/`), and the rest, kept in the row (see [`SourceColumns`]). A URL with neither is
/// all rest. The two joined are the URL, which [`crate::records::RECORD_COLUMNS`] reads back.
pub(crate) fn source_parts(url: &str) -> (&str, &str) {
    let cut = url
        .find('#')
        .or_else(|| url.rfind('/'))
        .map_or(0, |at| at + 1);
    url.split_at(cut)
}

/// The distinct shared parts of `urls`, sorted (so that concurrent writers add them in one
/// order), without the empty one of a URL that has none.
pub(crate) fn shared_sources<'r>(urls: impl IntoIterator<Item = &'r str>) -> Vec<&'r str> {
    let mut shared: Vec<&str> = urls
        .into_iter()
        .map(|url| source_parts(url).0)
        .filter(|shared| !shared.is_empty())
        .collect();
    shared.sort_unstable();
    shared.dedup();
    shared
}

/// The URLs of `rows`' records.
fn source_urls<'r>(rows: &[RowInsert<'r>]) -> impl Iterator<Item = &'r str> {
    rows.iter().map(|r| r.entry.rec.record.source_url.as_str())
}

/// A record's source URL as its row stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SourceColumns<'r> {
    /// `source_id`: the shared part's row in `record_sources`, if the URL has one.
    pub id: Option<i64>,
    /// `source_url`: the rest of the URL, or '' when it is the record's executable name.
    pub rest: &'r str,
    /// `source_rest_is_name`: the rest is the executable name (migration 0033). An archive
    /// member's URL most often ends in its path, which is also its name
    /// (`…/coreutils_9.1_amd64.deb#usr/bin/ls` names `usr/bin/ls`): kept once, not twice.
    pub rest_is_name: bool,
}

/// A URL's columns (see [`SourceColumns`]), given the record's executable name and the ids
/// of the shared parts.
pub(crate) fn source_columns<'r>(
    url: &'r str,
    executable_name: &str,
    ids: &HashMap<String, i64>,
) -> crate::Result<SourceColumns<'r>> {
    let (shared, rest) = source_parts(url);
    let id = if shared.is_empty() {
        None
    } else {
        let id = ids.get(shared).copied().ok_or_else(|| {
            model::Error::internal(format!("no record_sources row for {shared:?}"))
        })?;
        Some(id)
    };
    Ok(rest_columns(id, rest, executable_name))
}

/// Whether a URL's rest is the record's executable name, so that the row need not hold it.
pub(crate) fn rest_is_name(rest: &str, executable_name: &str) -> bool {
    !rest.is_empty() && rest == executable_name
}

/// The columns of a URL split into `id` and `rest`: the rest kept in the row unless it is
/// the executable name.
pub(crate) fn rest_columns<'r>(
    id: Option<i64>,
    rest: &'r str,
    executable_name: &str,
) -> SourceColumns<'r> {
    let rest_is_name = rest_is_name(rest, executable_name);
    SourceColumns {
        id,
        rest: if rest_is_name { "" } else { rest },
        rest_is_name,
    }
}

/// The URLs of `urls` whose ids the insert did not return: those already stored.
fn not_returned<'a>(urls: &[&'a str], ids: &HashMap<String, i64>) -> Vec<&'a str> {
    urls.iter()
        .copied()
        .filter(|url| !ids.contains_key(*url))
        .collect()
}

/// SQLite: the ids of `shared` in `record_sources`, adding those not there yet. A batch's
/// sources are mostly new (a new version is a new archive), so the insert returns their
/// ids and only those already there are read. `OR FAIL` rather than the default `ABORT`:
/// a failing statement fails the whole batch anyway, and without `ABORT` SQLite keeps no
/// statement journal (a copy of every page the statement touches, to undo it alone).
pub(crate) async fn sqlite_source_ids(
    conn: &mut sqlx::SqliteConnection,
    shared: &[&str],
) -> crate::Result<HashMap<String, i64>> {
    let mut ids = HashMap::with_capacity(shared.len());
    for chunk in shared.chunks(INSERT_ROWS) {
        let mut add = sqlx::query_as::<_, (String, i64)>(sqlx::AssertSqlSafe(format!(
            "INSERT OR FAIL INTO record_sources (url) VALUES {} ON CONFLICT (url) DO NOTHING \
             RETURNING url, id",
            Params::Anonymous.rows(chunk.len(), 1)
        )));
        for url in chunk {
            add = add.bind(*url);
        }
        ids.extend(add.fetch_all(&mut *conn).await.map_err(crate::db_error)?);
        let known = not_returned(chunk, &ids);
        if known.is_empty() {
            continue;
        }
        let mut read = sqlx::query_as::<_, (String, i64)>(sqlx::AssertSqlSafe(format!(
            "SELECT url, id FROM record_sources WHERE url IN ({})",
            Params::Anonymous.list(1, known.len())
        )));
        for url in known {
            read = read.bind(url);
        }
        ids.extend(read.fetch_all(&mut *conn).await.map_err(crate::db_error)?);
    }
    Ok(ids)
}

/// PostgreSQL: the ids of `shared` in `record_sources`, adding those not there yet (as
/// [`sqlite_source_ids`]: the insert returns the new ones' ids).
pub(crate) async fn pg_source_ids(
    conn: &mut sqlx::PgConnection,
    shared: &[&str],
) -> crate::Result<HashMap<String, i64>> {
    if shared.is_empty() {
        return Ok(HashMap::new());
    }
    let mut ids: HashMap<String, i64> = sqlx::query_as::<_, (String, i64)>(
        "INSERT INTO record_sources (url) SELECT * FROM UNNEST($1::text[]) \
         ON CONFLICT (url) DO NOTHING RETURNING url, id",
    )
    .bind(shared)
    .fetch_all(&mut *conn)
    .await
    .map_err(crate::db_error)?
    .into_iter()
    .collect();
    let known = not_returned(shared, &ids);
    if !known.is_empty() {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT url, id FROM record_sources WHERE url = ANY($1::text[])")
                .bind(known)
                .fetch_all(&mut *conn)
                .await
                .map_err(crate::db_error)?;
        ids.extend(rows);
    }
    Ok(ids)
}

/// A stored row whose status or interval a flush changes.
pub(crate) struct RowUpdate<'a> {
    pub id: &'a str,
    pub status: &'static str,
    pub valid_from: DateTime<Utc>,
    pub valid_until: Option<DateTime<Utc>>,
    /// `valid_from` differs from the stored one: only a version recorded out of order
    /// moves its older neighbours' starts. A superseded current row keeps its start.
    pub moved: bool,
}

/// A row a flush inserts, with its `added_at`.
pub(crate) struct RowInsert<'a> {
    pub entry: &'a Entry,
    pub added_at: DateTime<Utc>,
}

/// A new row's id, digests and HMAC as the bytes they are stored as.
struct RowBytes {
    id: Vec<u8>,
    sha256: Vec<u8>,
    sha1: Option<Vec<u8>>,
    md5: Option<Vec<u8>>,
    hmac: Vec<u8>,
}

impl RowInsert<'_> {
    fn bytes(&self) -> crate::Result<RowBytes> {
        use crate::backend::hex_bytes;
        let r = &self.entry.rec.record;
        let optional =
            |column, hex: &Option<String>| hex.as_deref().map(|h| hex_bytes(column, h)).transpose();
        Ok(RowBytes {
            id: crate::records::id_bytes(&self.entry.rec.id)?,
            sha256: hex_bytes("hash_sha256", &r.hash_sha256)?,
            sha1: optional("hash_sha1", &r.hash_sha1)?,
            md5: optional("hash_md5", &r.hash_md5)?,
            hmac: hex_bytes("hmac", self.entry.hmac.as_deref().unwrap_or_default())?,
        })
    }

    /// The `name_key` and `family` columns: each '' when it equals what it is derived from,
    /// the name key its executable name and the family its name key (`name_key_sql!`).
    fn name_columns(&self) -> (String, &str) {
        let rec = &self.entry.rec;
        let name = rec.record.executable_name.as_str();
        let key = model::name_key(name);
        let family = if rec.family == key { "" } else { &rec.family };
        let key = if key == name { String::new() } else { key };
        (key, family)
    }

    /// `validate` keeps sizes within i64; anything else is unknown.
    fn size(&self) -> Option<i64> {
        self.entry
            .rec
            .record
            .size
            .and_then(|n| i64::try_from(n).ok())
    }
}

/// The multi-row statement `build` makes for `rows` rows. The one of [`INSERT_ROWS`] rows,
/// most of a large batch's statements, is built once into `full`.
fn rows_sql(
    rows: usize,
    full: &'static std::sync::OnceLock<String>,
    build: impl Fn(usize) -> String,
) -> std::borrow::Cow<'static, str> {
    if rows == INSERT_ROWS {
        full.get_or_init(|| build(rows)).as_str().into()
    } else {
        build(rows).into()
    }
}

/// SQLite: the rows' changes in multi-row `UPDATE … FROM (VALUES …)` statements. Rows
/// whose start did not move (nearly all: a superseded current row) are updated without
/// setting `valid_from`: SQLite rewrites a row's entry in every index on a column that an
/// `UPDATE` sets, whatever the value.
pub(crate) async fn sqlite_update(
    conn: &mut sqlx::SqliteConnection,
    rows: &[RowUpdate<'_>],
    epoch: i64,
) -> crate::Result<()> {
    static KEPT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static MOVED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let (moved_rows, kept_rows): (Vec<&RowUpdate>, Vec<&RowUpdate>) =
        rows.iter().partition(|r| r.moved);
    for (rows, moved, full) in [(kept_rows, false, &KEPT), (moved_rows, true, &MOVED)] {
        let (start, values) = if moved {
            ("valid_from = v.column3, valid_until = v.column4", 4)
        } else {
            ("valid_until = v.column3", 3)
        };
        for chunk in rows.chunks(INSERT_ROWS) {
            let sql = rows_sql(chunk.len(), full, |n| {
                format!(
                    "UPDATE hash_records SET status = v.column2, {start}, changed_epoch = ? \
                     FROM (VALUES {}) AS v WHERE hash_records.id = v.column1",
                    Params::Anonymous.rows(n, values)
                )
            });
            let ids = chunk
                .iter()
                .map(|r| crate::records::id_bytes(r.id))
                .collect::<crate::Result<Vec<_>>>()?;
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(epoch);
            for (r, id) in chunk.iter().zip(&ids) {
                q = q.bind(id.as_slice()).bind(r.status);
                if moved {
                    q = q.bind(RecordTime(r.valid_from));
                }
                q = q.bind(RecordTime::opt(r.valid_until));
            }
            q.execute(&mut *conn).await.map_err(crate::db_error)?;
        }
    }
    Ok(())
}

/// SQLite: the new rows in multi-row `INSERT`s.
pub(crate) async fn sqlite_insert(
    conn: &mut sqlx::SqliteConnection,
    rows: &[RowInsert<'_>],
    epoch: i64,
) -> crate::Result<()> {
    for chunk in rows.chunks(INSERT_ROWS) {
        static FULL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let sql = rows_sql(chunk.len(), &FULL, |n| {
            format!(
                "INSERT INTO hash_records ({INSERT_COLUMNS}) VALUES {}",
                Params::Anonymous.rows(n, 26)
            )
        });
        let bytes = chunk
            .iter()
            .map(RowInsert::bytes)
            .collect::<crate::Result<Vec<_>>>()?;
        let ids = sqlite_source_ids(&mut *conn, &shared_sources(source_urls(chunk))).await?;
        let names = chunk
            .iter()
            .map(RowInsert::name_columns)
            .collect::<Vec<_>>();
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for ((row, b), (name_key, family)) in chunk.iter().zip(&bytes).zip(&names) {
            let e = row.entry;
            let r = &e.rec.record;
            let source = source_columns(&r.source_url, &r.executable_name, &ids)?;
            q = q
                .bind(b.id.as_slice())
                .bind(r.vendor.as_str())
                .bind(r.executable_name.as_str())
                .bind(*family)
                .bind(r.version.as_str())
                .bind(r.platform.as_str())
                .bind(r.arch.as_str())
                .bind(b.sha256.as_slice())
                .bind(b.sha1.as_deref())
                .bind(b.md5.as_deref())
                .bind(source.rest)
                .bind(r.download_verified)
                .bind(r.sig_signer.as_deref())
                .bind(r.sig_issuer.as_deref())
                .bind(r.sig_serial.as_deref())
                .bind(r.sig_thumbprint.as_deref())
                .bind(e.rec.status.as_str())
                .bind(RecordTime(e.rec.valid_from))
                .bind(RecordTime::opt(e.rec.valid_until))
                .bind(b.hmac.as_slice())
                .bind(name_key.as_str())
                .bind(row.size())
                .bind(RecordTime(row.added_at))
                .bind(source.id)
                .bind(source.rest_is_name)
                .bind(epoch);
        }
        q.execute(&mut *conn).await.map_err(crate::db_error)?;
    }
    Ok(())
}

/// PostgreSQL: the rows' changes in one `UPDATE … FROM UNNEST(arrays)`: four binds
/// whatever the number of rows.
pub(crate) async fn pg_update(
    conn: &mut sqlx::PgConnection,
    rows: &[RowUpdate<'_>],
    epoch: i64,
) -> crate::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let ids = rows
        .iter()
        .map(|r| crate::records::id_bytes(r.id))
        .collect::<crate::Result<Vec<_>>>()?;
    sqlx::query(
        "UPDATE hash_records SET status = v.status, valid_from = v.valid_from, \
         valid_until = v.valid_until, changed_epoch = $1 \
         FROM UNNEST($2::bytea[], $3::text[], $4::timestamptz[], $5::timestamptz[]) \
         AS v(id, status, valid_from, valid_until) WHERE hash_records.id = v.id",
    )
    .bind(epoch)
    .bind(ids)
    .bind(rows.iter().map(|r| r.status).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.valid_from).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.valid_until).collect::<Vec<_>>())
    .execute(&mut *conn)
    .await
    .map_err(crate::db_error)?;
    Ok(())
}

/// PostgreSQL: the new rows in one `INSERT … SELECT FROM UNNEST(arrays)` per
/// [`PLAN_CHUNK`] rows: one array a column, so one parse and one round trip.
pub(crate) async fn pg_insert(
    conn: &mut sqlx::PgConnection,
    rows: &[RowInsert<'_>],
    epoch: i64,
) -> crate::Result<()> {
    for chunk in rows.chunks(PLAN_CHUNK) {
        // One array of a column's values.
        macro_rules! column {
            (|$r:ident| $value:expr) => {
                chunk.iter().map(|$r| $value).collect::<Vec<_>>()
            };
        }
        let bytes = chunk
            .iter()
            .map(RowInsert::bytes)
            .collect::<crate::Result<Vec<_>>>()?;
        let ids = pg_source_ids(&mut *conn, &shared_sources(source_urls(chunk))).await?;
        let sources = chunk
            .iter()
            .map(|row| {
                let r = &row.entry.rec.record;
                source_columns(&r.source_url, &r.executable_name, &ids)
            })
            .collect::<crate::Result<Vec<_>>>()?;
        let names = chunk
            .iter()
            .map(RowInsert::name_columns)
            .collect::<Vec<_>>();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO hash_records ({INSERT_COLUMNS}) SELECT *, $24::bigint FROM UNNEST(\
             $1::bytea[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
             $7::text[], $8::bytea[], $9::bytea[], $10::bytea[], $11::text[], $12::boolean[], \
             $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], \
             $18::timestamptz[], $19::timestamptz[], $20::bytea[], $21::text[], $22::bigint[], \
             $23::timestamptz[], $25::bigint[], $26::boolean[])"
        )))
        .bind(bytes.iter().map(|b| b.id.as_slice()).collect::<Vec<_>>())
        .bind(column!(|r| r.entry.rec.record.vendor.as_str()))
        .bind(column!(|r| r.entry.rec.record.executable_name.as_str()))
        .bind(names.iter().map(|(_, family)| *family).collect::<Vec<_>>())
        .bind(column!(|r| r.entry.rec.record.version.as_str()))
        .bind(column!(|r| r.entry.rec.record.platform.as_str()))
        .bind(column!(|r| r.entry.rec.record.arch.as_str()))
        .bind(
            bytes
                .iter()
                .map(|b| b.sha256.as_slice())
                .collect::<Vec<_>>(),
        )
        .bind(bytes.iter().map(|b| b.sha1.as_deref()).collect::<Vec<_>>())
        .bind(bytes.iter().map(|b| b.md5.as_deref()).collect::<Vec<_>>())
        .bind(sources.iter().map(|s| s.rest).collect::<Vec<_>>())
        .bind(column!(|r| r.entry.rec.record.download_verified))
        .bind(column!(|r| r.entry.rec.record.sig_signer.as_deref()))
        .bind(column!(|r| r.entry.rec.record.sig_issuer.as_deref()))
        .bind(column!(|r| r.entry.rec.record.sig_serial.as_deref()))
        .bind(column!(|r| r.entry.rec.record.sig_thumbprint.as_deref()))
        .bind(column!(|r| r.entry.rec.status.as_str()))
        .bind(column!(|r| r.entry.rec.valid_from))
        .bind(column!(|r| r.entry.rec.valid_until))
        .bind(bytes.iter().map(|b| b.hmac.as_slice()).collect::<Vec<_>>())
        .bind(
            names
                .iter()
                .map(|(key, _)| key.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(column!(|r| r.size()))
        .bind(column!(|r| r.added_at))
        .bind(epoch)
        .bind(sources.iter().map(|s| s.id).collect::<Vec<_>>())
        .bind(sources.iter().map(|s| s.rest_is_name).collect::<Vec<_>>())
        .execute(&mut *conn)
        .await
        .map_err(crate::db_error)?;
    }
    Ok(())
}

pub(crate) const LATEST_ADDED: &str = "SELECT added_at FROM records_added";
pub(crate) const SET_LATEST_ADDED: &str = "UPDATE records_added SET added_at = $1";

/// Which stored rows of a family a batch reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored {
    /// Its current row only (`hash_records_one_current`).
    Current,
    /// Every row, its whole history (`hash_records_family`).
    History,
}

/// The stored rows of `n` families of one vendor (by name), every record column.
pub(crate) fn families_sql(n: usize, stored: Stored, params: Params) -> String {
    format!(
        concat!(
            "SELECT {} FROM hash_records WHERE vendor = {} AND ",
            family_sql!(),
            " IN ({}){}"
        ),
        crate::records::RECORD_COLUMNS,
        params.one(1),
        params.list(2, n),
        match stored {
            Stored::Current => " AND status = 'current'",
            Stored::History => "",
        }
    )
}

/// The families of `chunk` whose whole stored history a batch reads, given their current
/// rows: those without one, and those with a record that is neither the current file again
/// nor newer than the record current before it (an older version is fitted between its
/// neighbours; a version already recorded may be a file the history holds). A refresh
/// offers the files a channel lists now, each the current file again or a newer version,
/// so it reads one row a family however long the history.
pub(crate) fn needing_history(
    chunk: &[Planned],
    current: &HashMap<FamilyKey, Vec<Entry>>,
) -> HashSet<FamilyKey> {
    // The record current before each of the chunk's records, as `apply` will see it, and
    // whether its HMAC verified.
    let mut latest: HashMap<&FamilyKey, (&NewRecord, bool)> = HashMap::new();
    let mut history = HashSet::new();
    for p in chunk {
        if history.contains(&p.key) {
            continue;
        }
        let before = latest.get(&p.key).copied().or_else(|| {
            current
                .get(&p.key)
                .and_then(|rows| rows.first())
                .map(|e| (&e.rec.record, e.rec.integrity_ok))
        });
        match before {
            // Unchanged, from the current row alone.
            Some((cur, true)) if *cur == p.record => {}
            Some((cur, _))
                if model::version::compare(&p.record.vendor, &p.record.version, &cur.version)
                    == std::cmp::Ordering::Greater =>
            {
                latest.insert(&p.key, (&p.record, true));
            }
            _ => {
                history.insert(p.key.clone());
            }
        }
    }
    history
}

/// The rows holding any of `n` SHA-256 (bound as bytes), with their id and status. The
/// status is tested by the caller rather than in WHERE: as a condition it lets the planner
/// walk every current row instead of probing the hash index.
pub(crate) fn hashes_sql(n: usize, params: Params) -> String {
    format!(
        "SELECT hash_sha256, id, status FROM hash_records WHERE {}",
        crate::records::digest_in("hash_sha256", 1, n, params)
    )
}

/// Adds `n` (kind, key, delta) rows to the counters.
pub(crate) fn counts_sql(n: usize, params: Params) -> String {
    format!(
        "INSERT INTO record_counts (kind, key, n) VALUES {} \
         ON CONFLICT (kind, key) DO UPDATE SET n = record_counts.n + excluded.n",
        (0..n)
            .map(|i| format!("({})", params.list(1 + i * 3, 3)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// (vendor, family, platform, arch) of a `families_sql` row, as stored.
pub(crate) fn stored_family(row: &impl Columns) -> crate::Result<(&str, &str, &str, &str)> {
    Ok((
        row.text_ref("vendor")?,
        row.text_ref("family")?,
        row.text_ref("platform")?,
        row.text_ref("arch")?,
    ))
}

/// The SHA-256 of a `hashes_sql` row when it is a current row other than those `held`.
pub(crate) fn current_hash_outside(
    row: &impl Columns,
    held: &HashSet<&str>,
) -> crate::Result<Option<String>> {
    if row.text_ref("status")? == "current"
        && !held.contains(crate::backend::hex_column(row, "id")?.as_str())
    {
        return Ok(Some(crate::backend::hex_column(row, "hash_sha256")?));
    }
    Ok(None)
}

/// The first `added_at` of a transaction: `now`, or just after `latest` if the clock is
/// behind it.
pub(crate) fn first_added(latest: Option<DateTime<Utc>>, now: DateTime<Utc>) -> DateTime<Utc> {
    let step = chrono::Duration::microseconds(model::record::ADDED_AT_STEP_MICROS);
    match latest {
        Some(latest) if latest + step > now => latest + step,
        _ => now,
    }
}

/// The stored rows of `families` whose status or interval the batch changed.
pub(crate) fn row_updates(families: &HashMap<FamilyKey, Vec<Entry>>) -> Vec<RowUpdate<'_>> {
    families
        .values()
        .flatten()
        .filter(|e| e.dirty && e.hmac.is_none())
        .map(|e| RowUpdate {
            id: &e.rec.id,
            status: e.rec.status.as_str(),
            valid_from: e.rec.valid_from,
            valid_until: e.rec.valid_until,
            moved: e.rec.valid_from != e.stored_from,
        })
        .collect()
}

/// The new rows of `families` in id order, `ADDED_AT_STEP_MICROS` apart from `next_added`;
/// and the `added_at` after the last.
pub(crate) fn row_inserts(
    families: &HashMap<FamilyKey, Vec<Entry>>,
    next_added: DateTime<Utc>,
) -> (Vec<RowInsert<'_>>, DateTime<Utc>) {
    let mut new: Vec<&Entry> = families
        .values()
        .flatten()
        .filter(|e| e.hmac.is_some())
        .collect();
    new.sort_unstable_by(|a, b| a.rec.id.cmp(&b.rec.id));
    let step = chrono::Duration::microseconds(model::record::ADDED_AT_STEP_MICROS);
    let mut added_at = next_added;
    let rows = new
        .into_iter()
        .map(|entry| {
            let row = RowInsert { entry, added_at };
            added_at += step;
            row
        })
        .collect();
    (rows, added_at)
}

macro_rules! record_writer {
    (
        $store:ident, $db:ty, $begin:literal, $lock:expr,
        $update:path, $insert:path, $params:expr
    ) => {
        impl $store {
            /// Records `records`, each with its own `now`, in one transaction and in order,
            /// each exactly as a `record` call of its own would; all or nothing. The
            /// outcomes, and the records epoch of the transaction if it wrote anything.
            pub(crate) async fn write_records(
                &self,
                records: Vec<(model::NewRecord, chrono::DateTime<chrono::Utc>)>,
            ) -> crate::Result<(Vec<crate::RecordOutcome>, Option<u64>)> {
                if records.is_empty() {
                    return Ok((Vec::new(), None));
                }
                self.with_writer_settings(async |conn| self.write_records_on(conn, records).await)
                    .await
            }

            async fn write_records_on(
                &self,
                conn: &mut <$db as sqlx::Database>::Connection,
                records: Vec<(model::NewRecord, chrono::DateTime<chrono::Utc>)>,
            ) -> crate::Result<(Vec<crate::RecordOutcome>, Option<u64>)> {
                use crate::db_error;
                use crate::record_writes::apply;
                let Some(latest_now) = records.iter().map(|(_, now)| *now).max() else {
                    return Ok((Vec::new(), None));
                };
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin)
                    .await
                    .map_err(db_error)?;
                if let Some(lock) = $lock {
                    sqlx::query(lock)
                        .bind(crate::record_writes::RECORDS_LOCK)
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error)?;
                }
                let mut outcomes = Vec::with_capacity(records.len());
                // The epoch and the next `added_at`, once something was written.
                let mut written: Option<(u64, chrono::DateTime<chrono::Utc>)> = None;
                for chunk in crate::record_writes::plan_chunks(records) {
                    let keys: std::collections::HashSet<_> =
                        chunk.iter().map(|p| p.key.clone()).collect();
                    let mut families = self
                        .load_families(&mut tx, &keys, crate::record_writes::Stored::Current)
                        .await?;
                    let history = crate::record_writes::needing_history(&chunk, &families);
                    if !history.is_empty() {
                        families.retain(|key, _| !history.contains(key));
                        families.extend(
                            self.load_families(
                                &mut tx,
                                &history,
                                crate::record_writes::Stored::History,
                            )
                            .await?,
                        );
                    }
                    let mut changed = false;
                    for p in chunk {
                        let family = p.key.1.clone();
                        let history = families.entry(p.key).or_default();
                        let outcome = apply(history, p.record, family, p.now, &self.signer);
                        changed |= matches!(outcome, crate::RecordOutcome::Inserted { .. });
                        outcomes.push((p.index, outcome));
                    }
                    if !changed {
                        continue;
                    }
                    let (epoch, next_added) = match written {
                        Some(w) => w,
                        None => {
                            let epoch = Self::bump_records_epoch(&mut tx).await?;
                            (epoch, Self::first_added_at(&mut tx, latest_now).await?)
                        }
                    };
                    let next_added = Self::flush(&mut tx, &families, epoch, next_added).await?;
                    written = Some((epoch, next_added));
                }
                match written {
                    Some((epoch, next_added)) => {
                        let step =
                            chrono::Duration::microseconds(model::record::ADDED_AT_STEP_MICROS);
                        sqlx::query(crate::record_writes::SET_LATEST_ADDED)
                            .bind(next_added - step)
                            .execute(&mut *tx)
                            .await
                            .map_err(db_error)?;
                        tx.commit().await.map_err(db_error)?;
                        Ok((crate::record_writes::in_call_order(outcomes), Some(epoch)))
                    }
                    // Nothing to keep: the transaction rolls back when dropped.
                    None => Ok((crate::record_writes::in_call_order(outcomes), None)),
                }
            }

            /// Writes a group of queued calls and answers each. When the group fails, each
            /// call is written on its own, so one call's error is not another's.
            pub(crate) async fn write_pending(&self, batch: Vec<crate::record_writes::Pending>) {
                let records = batch
                    .iter()
                    .flat_map(|p| p.records.iter().cloned())
                    .collect();
                match self.write_records(records).await {
                    Ok((outcomes, epoch)) => {
                        let mut outcomes = outcomes.into_iter();
                        for p in batch {
                            let own = outcomes.by_ref().take(p.records.len()).collect();
                            let _ = p.reply.send(Ok((own, epoch)));
                        }
                    }
                    Err(e) if batch.len() == 1 => {
                        if let Some(p) = batch.into_iter().next() {
                            let _ = p.reply.send(Err(e));
                        }
                    }
                    Err(_) => {
                        for p in batch {
                            let alone = self.write_records(p.records.to_vec()).await;
                            let _ = p.reply.send(alone);
                        }
                    }
                }
            }

            /// The stored rows of `keys` (`stored`: current or all), read with one `IN` query
            /// per vendor and few hundred families, and verified row by row.
            async fn load_families(
                &self,
                conn: &mut <$db as sqlx::Database>::Connection,
                keys: &std::collections::HashSet<crate::record_writes::FamilyKey>,
                stored: crate::record_writes::Stored,
            ) -> crate::Result<
                std::collections::HashMap<
                    crate::record_writes::FamilyKey,
                    Vec<crate::record_writes::Entry>,
                >,
            > {
                use crate::db_error;
                let mut families = std::collections::HashMap::with_capacity(keys.len());
                let mut names: Vec<(&str, &str)> =
                    keys.iter().map(|k| (k.0.as_str(), k.1.as_str())).collect();
                names.sort_unstable();
                names.dedup();
                // Rows of another platform or arch under the same family name are passed
                // over before their HMAC is checked.
                let wanted: std::collections::HashSet<(&str, &str, &str, &str)> = keys
                    .iter()
                    .map(|k| (k.0.as_str(), k.1.as_str(), k.2.as_str(), k.3.as_str()))
                    .collect();
                for vendor_names in names.chunk_by(|a, b| a.0 == b.0) {
                    for chunk in vendor_names.chunks(crate::record_writes::IN_LIST) {
                        let sql = crate::record_writes::families_sql(chunk.len(), stored, $params);
                        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(chunk[0].0);
                        for (_, name) in chunk {
                            q = q.bind(*name);
                        }
                        let rows = q.fetch_all(&mut *conn).await.map_err(db_error)?;
                        for row in &rows {
                            if !wanted.contains(&crate::record_writes::stored_family(row)?) {
                                continue;
                            }
                            let rec = self.record_from_row(row)?;
                            let key = (
                                rec.record.vendor.clone(),
                                rec.family.clone(),
                                rec.record.platform,
                                rec.record.arch,
                            );
                            families
                                .entry(key)
                                .or_insert_with(Vec::new)
                                .push(crate::record_writes::Entry::stored(rec));
                        }
                    }
                }
                Ok(families)
            }

            /// The `added_at` of the first row a transaction inserts: `now`, or just after
            /// the latest one (kept in `records_added` by every write) if the clock is
            /// behind it. Called with the records epoch locked, so the order is commit order.
            async fn first_added_at(
                conn: &mut <$db as sqlx::Database>::Connection,
                now: chrono::DateTime<chrono::Utc>,
            ) -> crate::Result<chrono::DateTime<chrono::Utc>> {
                let latest: Option<chrono::DateTime<chrono::Utc>> =
                    sqlx::query_scalar(crate::record_writes::LATEST_ADDED)
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(crate::db_error)?;
                Ok(crate::record_writes::first_added(latest, now))
            }

            /// Which of `hashes` a current row outside `families` has: with the families'
            /// own rows, before and after the flush, what the distinct count of current
            /// SHA-256 does, read once.
            async fn current_elsewhere(
                conn: &mut <$db as sqlx::Database>::Connection,
                hashes: &[&str],
                families: &std::collections::HashMap<
                    crate::record_writes::FamilyKey,
                    Vec<crate::record_writes::Entry>,
                >,
            ) -> crate::Result<std::collections::HashSet<String>> {
                let held: std::collections::HashSet<&str> = families
                    .values()
                    .flatten()
                    .map(|e| e.rec.id.as_str())
                    .collect();
                let mut found = std::collections::HashSet::new();
                for chunk in hashes.chunks(crate::record_writes::IN_LIST) {
                    let sql = crate::record_writes::hashes_sql(chunk.len(), $params);
                    let digests = chunk
                        .iter()
                        .map(|h| crate::backend::hex_bytes("hash_sha256", h))
                        .collect::<crate::Result<Vec<_>>>()?;
                    let digests: Vec<&[u8]> = digests.iter().map(Vec::as_slice).collect();
                    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                    for value in crate::records::digest_binds(&digests) {
                        q = q.bind(value);
                    }
                    for row in q.fetch_all(&mut *conn).await.map_err(crate::db_error)? {
                        found.extend(crate::record_writes::current_hash_outside(&row, &held)?);
                    }
                }
                Ok(found)
            }

            /// Writes what the batch changed in `families`: stored rows first (the record a
            /// new current one replaces stops being current before it is inserted), then
            /// the new rows in id order, `ADDED_AT_STEP_MICROS` apart from `next_added`,
            /// all tagged with `epoch`; then the counters. A few statements whatever the
            /// number of rows. The next `added_at`.
            async fn flush(
                conn: &mut <$db as sqlx::Database>::Connection,
                families: &std::collections::HashMap<
                    crate::record_writes::FamilyKey,
                    Vec<crate::record_writes::Entry>,
                >,
                epoch: u64,
                next_added: chrono::DateTime<chrono::Utc>,
            ) -> crate::Result<chrono::DateTime<chrono::Utc>> {
                use crate::db_error;
                let epoch = i64::try_from(epoch).unwrap_or(i64::MAX);
                let mut deltas = crate::record_writes::CountDeltas::of(families);
                let hashes: Vec<&str> = deltas.hashes.iter().map(String::as_str).collect();
                let elsewhere = Self::current_elsewhere(conn, &hashes, families).await?;
                let updates = crate::record_writes::row_updates(families);
                $update(&mut *conn, &updates, epoch).await?;
                let (rows, added_at) = crate::record_writes::row_inserts(families, next_added);
                $insert(&mut *conn, &rows, epoch).await?;
                let sha256_delta =
                    crate::record_writes::distinct_delta(families, &hashes, &elsewhere);
                if sha256_delta != 0 {
                    deltas
                        .by_kind
                        .insert(("sha256", String::new()), sha256_delta);
                }
                if !deltas.by_kind.is_empty() {
                    let sql = crate::record_writes::counts_sql(deltas.by_kind.len(), $params);
                    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                    for ((kind, key), n) in &deltas.by_kind {
                        q = q.bind(*kind).bind(key.as_str()).bind(*n);
                    }
                    q.execute(&mut *conn).await.map_err(db_error)?;
                }
                Ok(added_at)
            }
        }
    };
}

pub(crate) use record_writer;

#[cfg(test)]
mod tests {
    use super::source_parts;

    #[test]
    fn a_source_url_splits_after_its_member_mark_or_last_slash() {
        for (url, shared, rest) in [
            (
                "https://deb.example/pool/c/coreutils_9.1_amd64.deb#usr/bin/ls",
                "https://deb.example/pool/c/coreutils_9.1_amd64.deb#",
                "usr/bin/ls",
            ),
            // A member path may hold a '#' of its own; the first one marks it.
            (
                "https://x.example/a.tar#b/c#d",
                "https://x.example/a.tar#",
                "b/c#d",
            ),
            (
                "https://go.dev/dl/go1.23.4.windows-amd64.msi",
                "https://go.dev/dl/",
                "go1.23.4.windows-amd64.msi",
            ),
            ("https://x.example/dir/", "https://x.example/dir/", ""),
            ("no-slash", "", "no-slash"),
            ("", "", ""),
        ] {
            assert_eq!(source_parts(url), (shared, rest), "{url}");
        }
    }
}

/// The reads of a batch of records and of a start look rows up by their indexes, on
/// PostgreSQL even on a table without statistics (one an import has just grown, before
/// autovacuum analyzes it): none reads the whole table.
#[cfg(test)]
mod plans {
    use sqlx::Connection as _;

    use super::{IN_LIST, PG_WRITER_SETTINGS, Stored, families_sql, hashes_sql};
    use crate::backend::{Params, UNFILLED_NAME_KEYS};
    use crate::records::digest_binds;

    /// PostgreSQL's plan of `sql` with `names` then `digests` bound.
    async fn plan_of(
        conn: &mut sqlx::PgConnection,
        sql: &str,
        names: &[String],
        digests: &[&[u8]],
    ) -> String {
        let explain = format!("EXPLAIN {sql}");
        let mut q = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(explain));
        for name in names {
            q = q.bind(name.as_str());
        }
        for digest in digests {
            q = q.bind(*digest);
        }
        q.fetch_all(&mut *conn).await.unwrap().join("\n")
    }

    #[tokio::test]
    async fn a_start_reads_no_record_row_on_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("plans.db").display()
        );
        let store = crate::open(&url, model::RecordSigner::new(b"plans"))
            .await
            .unwrap();
        store.close().await;
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        let explain = format!("EXPLAIN QUERY PLAN {UNFILLED_NAME_KEYS}");
        let steps: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(explain))
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .iter()
            .map(|step| sqlx::Row::get(step, "detail"))
            .collect();
        conn.close().await.unwrap();
        assert!(
            steps.iter().all(|s| s.contains("USING INDEX")),
            "a start's name keys read the whole table: {steps:?}"
        );
    }

    testkit::postgres_test! {
        async fn a_batch_and_a_start_read_records_by_index_without_statistics() {
            let Some(scratch) =
                testkit::Scratch::new(testkit::Backend::Postgres, "plans").await
            else {
                return;
            };
            let url = scratch.new_url().await;
            let store = crate::open(&url, model::RecordSigner::new(b"plans")).await.unwrap();
            let records = (0..3_000u64)
                .map(|i| {
                    let name = format!("tool{i}.exe");
                    testkit::rec("Vendor", &name, "1.0", model::Platform::Windows,
                        model::Arch::Amd64, i)
                })
                .collect();
            store.record_many(records, chrono::Utc::now()).await.unwrap();
            store.close().await;

            let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
            let analyzed: Option<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar(
                "SELECT COALESCE(last_analyze, last_autoanalyze) FROM pg_stat_user_tables \
                 WHERE relid = 'hash_records'::regclass",
            )
            .fetch_one(&mut conn)
            .await
            .unwrap();
            sqlx::raw_sql(PG_WRITER_SETTINGS.set).execute(&mut conn).await.unwrap();
            let mut names = vec!["Vendor".to_string()];
            names.extend((0..IN_LIST).map(|i| format!("tool{i}.exe")));
            let families = families_sql(IN_LIST, Stored::History, Params::Numbered);
            let digests: Vec<Vec<u8>> = (0..IN_LIST as u64)
                .map(|i| hex::decode(testkit::hex_of(i, 64)).unwrap())
                .collect();
            let digests: Vec<&[u8]> = digests.iter().map(Vec::as_slice).collect();
            let hashes = hashes_sql(IN_LIST, Params::Numbered);
            let writes = [
                ("a batch's families", plan_of(&mut conn, &families, &names, &[]).await),
                (
                    "a batch's digests",
                    plan_of(&mut conn, &hashes, &[], &digest_binds(&digests)).await,
                ),
            ];
            sqlx::raw_sql(PG_WRITER_SETTINGS.undo).execute(&mut conn).await.unwrap();
            let start = plan_of(&mut conn, UNFILLED_NAME_KEYS, &[], &[]).await;
            conn.close().await.unwrap();
            scratch.cleanup().await;
            for (what, plan) in writes.iter().chain([&("a start's name keys", start)]) {
                assert!(
                    !plan.contains("Seq Scan on hash_records"),
                    "{what} read the whole table (analyzed: {analyzed:?}):\n{plan}"
                );
            }
        }
    }
}
