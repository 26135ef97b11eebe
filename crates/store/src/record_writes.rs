//! Writing vendor records in batches. A batch runs in one transaction: the histories of the
//! families it touches are read with a few `IN` queries, every record is applied to them in
//! memory exactly as one `record` call at a time would (supersession, intervals fitted
//! between neighbours, "the same file is unchanged"), and what changed is written with one
//! `UPDATE` per changed row and multi-row `INSERT`s, tagged with the batch's records epoch
//! and `added_at`. The current-record counters behind `stats` move in the same transaction.
//!
//! Concurrent `record` calls (the refresh records up to 16 artifacts at once) share one
//! transaction: each call queues its record, and whoever holds the writer lock writes
//! everything queued, so a busy refresh commits once per group instead of once per file.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};
use model::{Arch, HashRecord, NewRecord, Platform, RecordSigner, RecordStatus};

use crate::{RecordOutcome, new_id};

/// Rows per multi-row `INSERT` (24 values a row: within both backends' bind limits).
pub(crate) const INSERT_ROWS: usize = 500;
/// Records applied in memory between two flushes to the database; bounds a batch's memory.
pub(crate) const PLAN_CHUNK: usize = 5000;
/// Values per `IN` list when reading histories and hashes.
pub(crate) const IN_LIST: usize = 500;

/// One family of one vendor, platform and arch: the unit of supersession.
pub(crate) type FamilyKey = (String, String, Platform, Arch);

pub(crate) fn family_key(r: &NewRecord) -> FamilyKey {
    (r.vendor.clone(), r.family(), r.platform, r.arch)
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
}

impl Entry {
    pub fn stored(rec: HashRecord) -> Self {
        Self {
            was_current: rec.status == RecordStatus::Current,
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
/// nothing.
pub(crate) fn apply(
    history: &mut Vec<Entry>,
    record: NewRecord,
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
            family: record.family(),
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

/// One queued `record` call: its record, its `now` and where its outcome goes.
pub(crate) struct Pending {
    pub record: NewRecord,
    pub now: DateTime<Utc>,
    pub reply: futures::channel::oneshot::Sender<crate::Result<(RecordOutcome, Option<u64>)>>,
}

/// The queue of `record` calls and the lock its writer holds.
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

/// The key every record-writing transaction locks on PostgreSQL: writes of records are
/// serialised, as SQLite's `BEGIN IMMEDIATE` serialises them, so a batch of any size needs
/// one lock rather than one per family.
pub(crate) const RECORDS_LOCK: &str = "records";

/// `INSERT INTO hash_records` of `rows` rows.
pub(crate) fn insert_sql(rows: usize) -> String {
    const COLUMNS: usize = 24;
    let mut sql = String::from(
        "INSERT INTO hash_records (id, vendor, executable_name, family, version, platform, \
         arch, hash_sha256, hash_sha1, hash_md5, source_url, download_verified, sig_signer, \
         sig_issuer, sig_serial, sig_thumbprint, status, valid_from, valid_until, hmac, \
         name_key, size_bytes, added_at, changed_epoch) VALUES ",
    );
    for r in 0..rows {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        sql.push_str(&crate::backend::placeholders(r * COLUMNS + 1, COLUMNS));
        sql.push(')');
    }
    sql
}

macro_rules! record_writer {
    ($store:ident, $db:ty, $begin:literal, $lock:expr) => {
        impl $store {
            /// Records `records`, each with its own `now`, in one transaction and in order,
            /// each exactly as a `record` call of its own would; all or nothing. The
            /// outcomes, and the records epoch of the transaction if it wrote anything.
            pub(crate) async fn write_records(
                &self,
                records: Vec<(model::NewRecord, chrono::DateTime<chrono::Utc>)>,
            ) -> crate::Result<(Vec<crate::RecordOutcome>, Option<u64>)> {
                use crate::db_error;
                use crate::record_writes::{PLAN_CHUNK, apply, family_key};
                let Some(latest_now) = records.iter().map(|(_, now)| *now).max() else {
                    return Ok((Vec::new(), None));
                };
                let mut conn = self.pool.acquire().await.map_err(db_error)?;
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
                let mut records = records.into_iter().peekable();
                while records.peek().is_some() {
                    let chunk: Vec<_> = records.by_ref().take(PLAN_CHUNK).collect();
                    let keys: std::collections::HashSet<_> =
                        chunk.iter().map(|(r, _)| family_key(r)).collect();
                    let mut families = self.load_families(&mut tx, &keys).await?;
                    let mut changed = false;
                    for (record, now) in chunk {
                        let history = families.entry(family_key(&record)).or_default();
                        let outcome = apply(history, record, now, &self.signer);
                        changed |= matches!(outcome, crate::RecordOutcome::Inserted { .. });
                        outcomes.push(outcome);
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
                    Some((epoch, _)) => {
                        tx.commit().await.map_err(db_error)?;
                        Ok((outcomes, Some(epoch)))
                    }
                    // Nothing to keep: the transaction rolls back when dropped.
                    None => Ok((outcomes, None)),
                }
            }

            /// Writes a group of queued `record` calls and answers each. When the group
            /// fails, each is written on its own, so one call's error is not another's.
            pub(crate) async fn write_pending(&self, batch: Vec<crate::record_writes::Pending>) {
                let records = batch.iter().map(|p| (p.record.clone(), p.now)).collect();
                match self.write_records(records).await {
                    Ok((outcomes, epoch)) => {
                        for (p, outcome) in batch.into_iter().zip(outcomes) {
                            let _ = p.reply.send(Ok((outcome, epoch)));
                        }
                    }
                    Err(e) if batch.len() == 1 => {
                        if let Some(p) = batch.into_iter().next() {
                            let _ = p.reply.send(Err(e));
                        }
                    }
                    Err(_) => {
                        for p in batch {
                            let one = self
                                .write_records(vec![(p.record, p.now)])
                                .await
                                .map(|(mut outcomes, epoch)| (outcomes.remove(0), epoch));
                            let _ = p.reply.send(one);
                        }
                    }
                }
            }

            /// The stored histories of `keys`, read with one `IN` query per few hundred
            /// families and verified row by row.
            async fn load_families(
                &self,
                conn: &mut <$db as sqlx::Database>::Connection,
                keys: &std::collections::HashSet<crate::record_writes::FamilyKey>,
            ) -> crate::Result<
                std::collections::HashMap<
                    crate::record_writes::FamilyKey,
                    Vec<crate::record_writes::Entry>,
                >,
            > {
                use crate::db_error;
                use sqlx::Row as _;
                let mut families = std::collections::HashMap::with_capacity(keys.len());
                let mut names: Vec<&str> = keys.iter().map(|k| k.1.as_str()).collect();
                names.sort_unstable();
                names.dedup();
                // Rows of another vendor, platform or arch under the same family name are
                // passed over before their HMAC is checked.
                let wanted: std::collections::HashSet<(&str, &str, &str, &str)> = keys
                    .iter()
                    .map(|k| (k.0.as_str(), k.1.as_str(), k.2.as_str(), k.3.as_str()))
                    .collect();
                for chunk in names.chunks(crate::record_writes::IN_LIST) {
                    let sql = format!(
                        "SELECT {} FROM hash_records WHERE family IN ({})",
                        crate::backend::RECORD_COLUMNS,
                        crate::backend::placeholders(1, chunk.len())
                    );
                    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                    for name in chunk {
                        q = q.bind(*name);
                    }
                    let rows = q.fetch_all(&mut *conn).await.map_err(db_error)?;
                    for row in &rows {
                        let get = |c: &str| row.try_get::<&str, _>(c).map_err(db_error);
                        let key = (get("vendor")?, get("family")?, get("platform")?, get("arch")?);
                        if !wanted.contains(&key) {
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
                Ok(families)
            }

            /// The `added_at` of the first row a transaction inserts: `now`, or just after
            /// the latest one if the clock is behind it. Called with the records epoch
            /// locked, so the order is commit order.
            async fn first_added_at(
                conn: &mut <$db as sqlx::Database>::Connection,
                now: chrono::DateTime<chrono::Utc>,
            ) -> crate::Result<chrono::DateTime<chrono::Utc>> {
                let step = chrono::Duration::microseconds(model::record::ADDED_AT_STEP_MICROS);
                let latest: Option<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar(
                    "SELECT added_at FROM hash_records WHERE added_at IS NOT NULL \
                     ORDER BY added_at DESC LIMIT 1",
                )
                .fetch_optional(&mut *conn)
                .await
                .map_err(crate::db_error)?;
                Ok(match latest {
                    Some(latest) if latest + step > now => latest + step,
                    _ => now,
                })
            }

            /// How many of `hashes` some current record has.
            async fn current_hash_count(
                conn: &mut <$db as sqlx::Database>::Connection,
                hashes: &[&str],
            ) -> crate::Result<i64> {
                let mut total = 0;
                for chunk in hashes.chunks(crate::record_writes::IN_LIST) {
                    let sql = format!(
                        // The status is tested outside WHERE: as a condition it lets the
                        // planner walk every current row instead of probing the hash index.
                        "SELECT COUNT(DISTINCT CASE WHEN status = 'current' THEN hash_sha256 END) \
                         FROM hash_records WHERE hash_sha256 IN ({})",
                        crate::backend::placeholders(1, chunk.len())
                    );
                    let mut q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql));
                    for h in chunk {
                        q = q.bind(*h);
                    }
                    total += q.fetch_one(&mut *conn).await.map_err(crate::db_error)?;
                }
                Ok(total)
            }

            /// Writes what the batch changed in `families`: stored rows first (the record a
            /// new current one replaces stops being current before it is inserted), then
            /// the new rows in id order, `ADDED_AT_STEP_MICROS` apart from `next_added`,
            /// all tagged with `epoch`; then the counters. The next `added_at`.
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
                let hashes_before = Self::current_hash_count(conn, &hashes).await?;
                for e in families.values().flatten().filter(|e| e.dirty && e.hmac.is_none()) {
                    sqlx::query(
                        "UPDATE hash_records SET status = $1, valid_from = $2, valid_until = $3, \
                         changed_epoch = $4 WHERE id = $5",
                    )
                    .bind(e.rec.status.as_str())
                    .bind(e.rec.valid_from)
                    .bind(e.rec.valid_until)
                    .bind(epoch)
                    .bind(&e.rec.id)
                    .execute(&mut *conn)
                    .await
                    .map_err(db_error)?;
                }
                let mut new: Vec<&crate::record_writes::Entry> =
                    families.values().flatten().filter(|e| e.hmac.is_some()).collect();
                new.sort_unstable_by(|a, b| a.rec.id.cmp(&b.rec.id));
                let step = chrono::Duration::microseconds(model::record::ADDED_AT_STEP_MICROS);
                let mut added_at = next_added;
                for rows in new.chunks(crate::record_writes::INSERT_ROWS) {
                    let sql = crate::record_writes::insert_sql(rows.len());
                    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                    for e in rows {
                        let r = &e.rec.record;
                        q = q
                            .bind(&e.rec.id)
                            .bind(&r.vendor)
                            .bind(&r.executable_name)
                            .bind(&e.rec.family)
                            .bind(&r.version)
                            .bind(r.platform.as_str())
                            .bind(r.arch.as_str())
                            .bind(&r.hash_sha256)
                            .bind(&r.hash_sha1)
                            .bind(&r.hash_md5)
                            .bind(&r.source_url)
                            .bind(r.download_verified)
                            .bind(&r.sig_signer)
                            .bind(&r.sig_issuer)
                            .bind(&r.sig_serial)
                            .bind(&r.sig_thumbprint)
                            .bind(e.rec.status.as_str())
                            .bind(e.rec.valid_from)
                            .bind(e.rec.valid_until)
                            .bind(e.hmac.as_deref())
                            .bind(model::name_key(&r.executable_name))
                            // `validate` keeps sizes within i64; anything else is unknown.
                            .bind(r.size.and_then(|n| i64::try_from(n).ok()))
                            .bind(added_at)
                            .bind(epoch);
                        added_at += step;
                    }
                    q.execute(&mut *conn).await.map_err(db_error)?;
                }
                let hashes_after = Self::current_hash_count(conn, &hashes).await?;
                if hashes_after != hashes_before {
                    deltas
                        .by_kind
                        .insert(("sha256", String::new()), hashes_after - hashes_before);
                }
                for ((kind, key), n) in &deltas.by_kind {
                    sqlx::query(
                        "INSERT INTO record_counts (kind, key, n) VALUES ($1, $2, $3) \
                         ON CONFLICT (kind, key) DO UPDATE SET n = record_counts.n + excluded.n",
                    )
                    .bind(*kind)
                    .bind(key)
                    .bind(*n)
                    .execute(&mut *conn)
                    .await
                    .map_err(db_error)?;
                }
                Ok(added_at)
            }
        }
    };
}

pub(crate) use record_writer;
