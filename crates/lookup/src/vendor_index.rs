//! The vendor records for lookups: a memory-mapped generation and a delta over it.
//!
//! Classifying 100 hashes against the database costs about a millisecond of SQL and HMAC
//! checks; against this index it costs microseconds. The index maps every SHA-256, SHA-1 and
//! MD5 of a verified record to the record that hash names: current before superseded, then
//! the newest, then the smallest id (the same choice the database path makes).
//!
//! The base is an immutable generation file ([`crate::generation`]): sorted digest tables
//! pointing at compact record entries, mapped read-only, so its pages are the kernel's page
//! cache, shared by every thread (and every process mapping the same file), not memory of
//! this process. It is written by a merge: a scan of the store in id order in which every
//! row's HMAC is verified as it is read (records that fail are left out, and the store logs
//! and counts them), sorted externally in bounded memory, fsynced and renamed into place.
//! Over it, a delta: the records written since (`records_changed_after`, also verified as
//! read), with, for every hash they name or named, the answer over base and delta together.
//! The index is tagged with the records epoch read *before* each read of the store, and a
//! lookup uses it only when that tag is at least the epoch the lookup saw; otherwise the
//! lookup first applies what changed (one indexed query), so after a write the next lookup
//! still answers from memory. Writes through this process move the epoch at once, other
//! replicas' writes within one poll of the database counter (half a second).
//!
//! At start the newest generation of the directory that opens, checks (header, sizes,
//! bucket tables) and was written from this store (its fingerprint, and an epoch the store
//! has reached) is mapped and the delta since its epoch replayed: nothing is rebuilt. Its
//! checksum is verified right after, while it answers (reading a large file whole takes
//! longer than a start should); one that fails is dropped (the database answers) and
//! replaced by a merge. Otherwise, and when
//! the delta grows past an eighth of the base (at least 65,536 records), a merge writes the
//! next generation in the background while the old one keeps answering; it is caught up and
//! swapped in under the lock catch-ups take, and older generation files are deleted. A merge
//! starts no sooner after the previous one than that one took. Stored HMACs are re-verified
//! on a rolling budget ([`VendorIndex::upkeep`]): a share of the records an hour, read in id
//! order from where the last pass stopped; one that now fails stops answering at once.
//! Without a directory (tests, tools) generations go to a private temporary directory that
//! is removed with the index.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use model::{HashAlgo, HashRecord, HashValue, Platform, RecordStatus};
use store::Store;

use crate::generation::{self, Generation, table_of};

/// How many of the store's first record ids (in id order) a generation's fingerprint may
/// match at start: the first id when it was written, with up to this many written since
/// that sort before it.
const FINGERPRINT_WINDOW: u32 = 1_000;

/// Records read per page of the scan.
const SCAN_PAGE: u32 = 5000;

/// What a lookup reports of a vendor record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VendorMatch<'a> {
    pub vendor: &'a str,
    pub executable_name: &'a str,
    pub version: &'a str,
    pub platform: Platform,
    pub current: bool,
    /// The record's own digests (a lookup by one of them may show the others).
    pub digests: DigestBytes,
    /// The file's size in bytes, when recorded.
    pub size: Option<u64>,
}

/// A vendor record's digests as bytes: SHA-256 always, SHA-1 and MD5 when recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestBytes {
    pub sha256: [u8; 32],
    pub sha1: Option<[u8; 20]>,
    pub md5: Option<[u8; 16]>,
}

impl DigestBytes {
    /// From a record's hex digests; one that does not decode is left out.
    pub fn from_hex(sha256: &str, sha1: Option<&str>, md5: Option<&str>) -> Self {
        fn decode<const N: usize>(hex: &str) -> Option<[u8; N]> {
            let mut out = [0u8; N];
            model::hash::decode_hex(hex.as_bytes(), &mut out).then_some(out)
        }
        Self {
            sha256: decode(sha256).unwrap_or([0; 32]),
            sha1: sha1.and_then(decode),
            md5: md5.and_then(decode),
        }
    }
}

impl<'a> From<&'a HashRecord> for VendorMatch<'a> {
    fn from(r: &'a HashRecord) -> Self {
        Self {
            vendor: &r.record.vendor,
            executable_name: &r.record.executable_name,
            version: &r.record.version,
            platform: r.record.platform,
            current: r.status == RecordStatus::Current,
            digests: DigestBytes::from_hex(
                &r.record.hash_sha256,
                r.record.hash_sha1.as_deref(),
                r.record.hash_md5.as_deref(),
            ),
            size: r.record.size,
        }
    }
}

/// Which of two records a hash names: current before superseded, then the newest.
fn rank(r: &HashRecord) -> (bool, i64) {
    (
        r.status == RecordStatus::Current,
        r.valid_from.timestamp_micros(),
    )
}

/// The best verified record for `hash` among `records` (any that name it), as the database
/// path finds it. Between equals the smallest id wins, as in the index, which scans in id
/// order and lets a later record displace an earlier one only when it ranks higher.
pub fn best_match<'a>(hash: &HashValue, records: &'a [HashRecord]) -> Option<VendorMatch<'a>> {
    records
        .iter()
        .filter(|r| r.integrity_ok && names(r, hash))
        .max_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| b.id.cmp(&a.id)))
        .map(VendorMatch::from)
}

fn names(record: &HashRecord, hash: &HashValue) -> bool {
    let r = &record.record;
    let stored = match hash.algo() {
        HashAlgo::Sha256 => Some(r.hash_sha256.as_str()),
        HashAlgo::Sha1 => r.hash_sha1.as_deref(),
        HashAlgo::Md5 => r.hash_md5.as_deref(),
    };
    stored == Some(hash.as_str())
}

/// A digest as bytes; SHA-1 and MD5 use the first 20 and 16.
type Digest = [u8; 32];

/// A hash as the delta keys it: its kind and its digest, zero-padded.
pub(crate) type Key = (HashAlgo, Digest);

pub(crate) fn key_of(algo: HashAlgo, digest: &[u8]) -> Key {
    let mut d = [0u8; 32];
    let n = digest.len().min(32);
    d[..n].copy_from_slice(&digest[..n]);
    (algo, d)
}

/// A hex digest of `algo`'s length as bytes, or `None` if it is not one.
fn digest_of(algo: HashAlgo, hex: &str) -> Option<Digest> {
    let mut out = [0u8; 32];
    model::hash::decode_hex(hex.as_bytes(), &mut out[..algo.hex_len() / 2]).then_some(out)
}

/// A record written since the base was built, as the store last returned it.
#[derive(Debug)]
struct DeltaRecord {
    id: Box<str>,
    vendor: Box<str>,
    executable_name: Box<str>,
    version: Box<str>,
    platform: Platform,
    current: bool,
    digests: DigestBytes,
    valid_from_micros: i64,
    size: Option<u64>,
    /// Its HMAC verified (and its digests parsed); otherwise it names nothing.
    verified: bool,
    keys: Vec<Key>,
}

impl DeltaRecord {
    fn new(record: &HashRecord) -> Self {
        let r = &record.record;
        let mut keys = Vec::new();
        let mut verified = record.integrity_ok;
        if verified {
            match digest_of(HashAlgo::Sha256, &r.hash_sha256) {
                Some(d) => keys.push((HashAlgo::Sha256, d)),
                None => verified = false,
            }
            for (algo, hex) in [
                (HashAlgo::Sha1, r.hash_sha1.as_deref()),
                (HashAlgo::Md5, r.hash_md5.as_deref()),
            ] {
                if let Some(d) = hex.and_then(|h| digest_of(algo, h)) {
                    keys.push((algo, d));
                }
            }
        }
        if !verified {
            keys.clear();
        }
        Self {
            id: record.id.as_str().into(),
            vendor: r.vendor.as_str().into(),
            executable_name: r.executable_name.as_str().into(),
            version: r.version.as_str().into(),
            platform: r.platform,
            current: record.status == RecordStatus::Current,
            digests: DigestBytes::from_hex(
                &r.hash_sha256,
                r.hash_sha1.as_deref(),
                r.hash_md5.as_deref(),
            ),
            valid_from_micros: record.valid_from.timestamp_micros(),
            size: r.size,
            verified,
            keys,
        }
    }

    fn matched(&self) -> VendorMatch<'_> {
        VendorMatch {
            vendor: &self.vendor,
            executable_name: &self.executable_name,
            version: &self.version,
            platform: self.platform,
            current: self.current,
            digests: self.digests,
            size: self.size,
        }
    }
}

/// The record a hash names according to base and delta together.
#[derive(Debug, Clone)]
enum Answer {
    Base(u32),
    Record(Arc<DeltaRecord>),
}

/// A record naming a hash: its rank, its id (the smaller wins a tie) and the answer it gives.
type Candidate = ((bool, i64), Reverse<Box<str>>, Answer);

/// What changed since the base was built.
#[derive(Default)]
struct Delta {
    /// Every record written since the base, by id, as last read; it replaces the base's
    /// entry of the same id.
    records: HashMap<Box<str>, Arc<DeltaRecord>>,
    /// The ids of the records here that name each hash (when verified).
    naming: HashMap<Key, Vec<Box<str>>>,
    /// For every hash a record here names or named: the answer, or `None` when no verified
    /// record names it any more. Hashes not here are answered by the base alone.
    answers: HashMap<Key, Option<Answer>>,
}

/// The base, the delta over it and the records epoch they reflect.
struct State {
    epoch: u64,
    base: Arc<Generation>,
    delta: Delta,
}

impl State {
    fn new(epoch: u64, base: Arc<Generation>) -> Self {
        Self {
            epoch,
            base,
            delta: Delta::default(),
        }
    }

    /// Takes `record`'s state as the store returned it and answers again every hash it
    /// names or named. Changes may arrive in any order: each step keeps every answer the
    /// best over the latest state of every record.
    fn apply(&mut self, record: &HashRecord) {
        let new = DeltaRecord::new(record);
        let mut touched = new.keys.clone();
        if new.verified {
            for key in &new.keys {
                let ids = self.delta.naming.entry(*key).or_default();
                if !ids.contains(&new.id) {
                    ids.push(new.id.clone());
                }
            }
        } else {
            // Its hashes may have been rewritten: the ones it named when verified.
            match self.delta.records.get(&new.id) {
                Some(prev) => touched.extend(prev.keys.iter().copied()),
                None => {
                    if let Some(e) = self.base.entry_of_id(&new.id) {
                        touched.extend(self.base.keys(e));
                    }
                }
            }
        }
        self.delta.records.insert(new.id.clone(), Arc::new(new));
        touched.sort_unstable();
        touched.dedup();
        for key in touched {
            let answer = self.best(&key);
            self.delta.answers.insert(key, answer);
        }
    }

    /// The best verified record naming `key`: current before superseded, then the newest,
    /// then the smallest id.
    fn best(&self, key: &Key) -> Option<Answer> {
        let mut candidates: Vec<Candidate> = Vec::new();
        for e in self.base.naming(key) {
            let id = self.base.id(e);
            if !self.delta.records.contains_key(id.as_str()) {
                let rank = self.base.rank(e);
                candidates.push((rank, Reverse(id.as_str().into()), Answer::Base(e)));
            }
        }
        for id in self.delta.naming.get(key).into_iter().flatten() {
            if let Some(r) = self.delta.records.get(id)
                && r.verified
            {
                let rank = (r.current, r.valid_from_micros);
                candidates.push((rank, Reverse(r.id.clone()), Answer::Record(Arc::clone(r))));
            }
        }
        candidates
            .into_iter()
            .max_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)))
            .map(|(_, _, answer)| answer)
    }

    /// The current records' digests as base and delta now hold them.
    fn current_digests(&self) -> CurrentDigests {
        let mut delta: [Vec<(Digest, bool)>; 3] = Default::default();
        for (key, answer) in &self.delta.answers {
            let current = match answer {
                None => false,
                Some(Answer::Base(e)) => self.base.rank(*e).0,
                Some(Answer::Record(r)) => r.current,
            };
            delta[table_of(key.0)].push((key.1, current));
        }
        for hashes in &mut delta {
            hashes.sort_unstable();
        }
        CurrentDigests {
            epoch: self.epoch,
            base: Arc::clone(&self.base),
            delta,
        }
    }

    /// Whether the delta is worth folding into a new generation: well before it costs much
    /// memory (a few hundred bytes per record), rarely during an ingest.
    fn delta_is_large(&self) -> bool {
        self.delta.records.len() as u64 > (self.base.records() / 8).max(1 << 16)
    }

    /// Whether record `id` may answer a lookup now (verified in the delta, or in the base
    /// and not replaced by the delta).
    fn answers_for(&self, id: &str) -> bool {
        match self.delta.records.get(id) {
            Some(r) => r.verified,
            None => self.base.entry_of_id(id).is_some(),
        }
    }

    /// The index for `batch`: the base, and the delta's answers for its hashes.
    fn for_batch(&self, batch: &[HashValue]) -> FreshIndex {
        let overlay = (!self.delta.answers.is_empty()).then(|| {
            batch
                .iter()
                .map(|h| {
                    self.delta
                        .answers
                        .get(&key_of(h.algo(), h.digest()))
                        .cloned()
                })
                .collect()
        });
        FreshIndex {
            base: Arc::clone(&self.base),
            overlay,
        }
    }

    /// Applies every change the store has after this state's epoch, up to at least
    /// `target` (read before the changes are).
    async fn catch_up(&mut self, store: &Arc<dyn Store>, target: u64) -> Result<(), model::Error> {
        if self.epoch >= target {
            return Ok(());
        }
        for record in changes_after(store, self.epoch).await? {
            self.apply(&record);
        }
        self.epoch = target;
        Ok(())
    }
}

/// The digests of the current, verified records as the index held them at one records
/// epoch: the base generation and, for the hashes the delta answers, whether a current
/// record names them. Its memory is the delta's hashes (33 bytes each); the base is the
/// mapped file, shared.
pub struct CurrentDigests {
    epoch: u64,
    base: Arc<Generation>,
    /// Per kind (SHA-256, SHA-1, MD5), every hash the delta answers for, sorted, and
    /// whether its answer is a current record.
    delta: [Vec<(Digest, bool)>; 3],
}

impl CurrentDigests {
    /// The records epoch these digests reflect.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Calls `each` with every distinct digest of `algo` that a current, verified record
    /// names, in ascending byte order (see [`CurrentDigests::iter`]).
    pub fn for_each(&self, algo: HashAlgo, each: impl FnMut(&[u8])) {
        self.iter(algo).for_each(each);
    }

    /// Every distinct digest of `algo` that a current, verified record names, in ascending
    /// byte order: the base's table and the delta's hashes walked together, the delta's
    /// answer taking the place of the base's. Holds nothing per digest.
    pub fn iter(&self, algo: HashAlgo) -> impl Iterator<Item = &[u8]> + '_ {
        let len = algo.hex_len() / 2;
        let mut delta = self.delta[table_of(algo)]
            .iter()
            .map(move |(d, current)| (&d[..len], *current))
            .peekable();
        let mut base = self.base.distinct_digests(algo).peekable();
        std::iter::from_fn(move || {
            loop {
                // The smaller of the two walks' next digests; on a tie the delta answers.
                let (digest, current) = match (base.peek(), delta.peek()) {
                    (None, None) => return None,
                    (Some(_), None) => base.next()?,
                    (None, Some(_)) => delta.next()?,
                    (Some((b, _)), Some((d, _))) if d < b => delta.next()?,
                    (Some((b, _)), Some((d, _))) if d == b => {
                        base.next();
                        delta.next()?
                    }
                    (Some(_), Some(_)) => base.next()?,
                };
                if current {
                    return Some(digest);
                }
            }
        })
    }
}

/// Every record the store wrote after `epoch`.
async fn changes_after(
    store: &Arc<dyn Store>,
    epoch: u64,
) -> Result<Vec<HashRecord>, model::Error> {
    let mut changes = Vec::new();
    let (mut epoch, mut after) = (epoch, None::<String>);
    loop {
        let page = store
            .records_changed_after(epoch, after.as_deref(), SCAN_PAGE)
            .await?;
        let Some((last_epoch, last)) = page.last() else {
            break;
        };
        (epoch, after) = (*last_epoch, Some(last.id.clone()));
        changes.extend(page.into_iter().map(|(_, r)| r));
    }
    Ok(changes)
}

/// Memory the merge's external sorts may use before they spill (the rest of a merge is
/// streamed: a page of the scan at a time).
const MERGE_BUDGET: usize = 48 << 20;

/// Share of the records whose stored HMAC is re-verified per hour: each is read again at
/// least every ten hours.
const REVERIFY_SHARE_PER_HOUR: f64 = 0.1;
/// Re-verified per hour at least, so a small store is gone through quickly.
const REVERIFY_MIN_PER_HOUR: f64 = 60_000.0;

/// Where the rolling re-verification stands.
#[derive(Default)]
struct Reverify {
    /// The last record id read by the current pass; `None` at the start of a pass.
    after: Option<String>,
    /// When the budget was last spent.
    last: Option<Instant>,
}

/// The index: base and delta, and the bookkeeping of catch-ups, merges and re-verification.
#[derive(Default)]
pub struct VendorIndex {
    /// Held only for in-memory work, never across an await.
    state: RwLock<Option<State>>,
    /// One reader of the store's changes at a time: catch-ups and the swap of a new base.
    updating: tokio::sync::Mutex<()>,
    rebuilding: AtomicBool,
    /// No rebuild starts before this instant.
    not_before: Mutex<Option<Instant>>,
    database_lookups: AtomicU64,
    /// Where generations are kept; `None`: a private temporary directory, made when first
    /// needed and removed with the index.
    dir: Option<PathBuf>,
    temp: Mutex<Option<tempfile::TempDir>>,
    /// Whether the start (map a generation, else merge) was tried.
    started: AtomicBool,
    merges: AtomicU64,
    reverify: tokio::sync::Mutex<Reverify>,
    reverified: AtomicU64,
    reverify_failures: AtomicU64,
}

/// The index as it stood for one batch: the base, and the delta's answers for the batch's
/// hashes (`None` when the delta is empty).
pub struct FreshIndex {
    base: Arc<Generation>,
    overlay: Option<Vec<Option<Option<Answer>>>>,
}

impl FreshIndex {
    /// The record each hash of the batch this was made for names, if any, in order;
    /// superseded ones only when `historical`.
    pub fn get_batch(&self, batch: &[HashValue], historical: bool) -> Vec<Option<VendorMatch<'_>>> {
        let entries = self.base.get_batch(batch);
        let mut found: Vec<Option<VendorMatch<'_>>> = match &self.overlay {
            None => entries.into_iter().map(|e| self.base.matched(e?)).collect(),
            Some(overlay) => entries
                .into_iter()
                .zip(overlay)
                .map(|(e, answer)| match answer {
                    None => self.base.matched(e?),
                    Some(Some(Answer::Base(e))) => self.base.matched(*e),
                    Some(Some(Answer::Record(r))) => Some(r.matched()),
                    Some(None) => None,
                })
                .collect(),
        };
        for m in &mut found {
            if m.is_some_and(|m| !historical && !m.current) {
                *m = None;
            }
        }
        found
    }
}

fn io_error(e: std::io::Error) -> model::Error {
    model::Error::internal_caused("vendor lookup generation", e)
}

impl VendorIndex {
    /// An index whose generations live in `dir` (created when first needed), so that a
    /// restart maps the newest one rather than scanning the store.
    pub fn with_dir(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: Some(dir.into()),
            ..Self::default()
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Option<State>> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Option<State>> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The directory generations are written to.
    pub fn dir(&self) -> Result<PathBuf, model::Error> {
        if let Some(dir) = &self.dir {
            return Ok(dir.clone());
        }
        let mut temp = self.temp.lock().unwrap_or_else(|e| e.into_inner());
        if temp.is_none() {
            *temp = Some(
                tempfile::Builder::new()
                    .prefix("knowngood-vendor-")
                    .tempdir()
                    .map_err(io_error)?,
            );
        }
        temp.as_ref()
            .map(|t| t.path().to_path_buf())
            .ok_or_else(|| model::Error::internal("no generation directory"))
    }

    /// Whether the index reflects the store as this process knows it.
    pub fn is_fresh(&self, store: &Arc<dyn Store>) -> bool {
        let epoch = store.records_epoch();
        self.read().as_ref().is_some_and(|s| s.epoch >= epoch)
    }

    /// The index for `batch` if it reflects at least `epoch`.
    fn fresh_for(&self, epoch: u64, batch: &[HashValue]) -> Option<FreshIndex> {
        self.read()
            .as_ref()
            .filter(|s| s.epoch >= epoch)
            .map(|s| s.for_batch(batch))
    }

    /// The index for `batch`, first applying what the store changed if it is behind; `None`
    /// when there is no index yet (a build is started) or the store could not be read.
    pub async fn lookup(
        self: &Arc<Self>,
        store: &Arc<dyn Store>,
        batch: &[HashValue],
    ) -> Option<FreshIndex> {
        let epoch = store.records_epoch();
        if let Some(fresh) = self.fresh_for(epoch, batch) {
            return Some(fresh);
        }
        match self.catch_up_now(store).await {
            Ok(true) => {}
            Ok(false) => self.rebuild_in_background(store),
            Err(e) => {
                tracing::warn!(error = %e, "vendor lookup index catch-up failed; lookups use the database");
            }
        }
        let fresh = self.fresh_for(epoch, batch);
        if fresh.is_none() {
            self.database_lookups.fetch_add(1, Ordering::Relaxed);
        }
        fresh
    }

    /// Lookups answered from the database because the index could not answer them.
    pub fn database_lookups(&self) -> u64 {
        self.database_lookups.load(Ordering::Relaxed)
    }

    /// Records whose stored HMAC the rolling re-verification has read again.
    pub fn reverified(&self) -> u64 {
        self.reverified.load(Ordering::Relaxed)
    }

    /// Records the rolling re-verification found failing their HMAC.
    pub fn reverify_failures(&self) -> u64 {
        self.reverify_failures.load(Ordering::Relaxed)
    }

    /// Generations this index wrote.
    pub fn merges(&self) -> u64 {
        self.merges.load(Ordering::Relaxed)
    }

    /// The base generation: its file, records and size in bytes; `None` before the first.
    pub fn generation(&self) -> Option<(PathBuf, u64, u64)> {
        self.read().as_ref().map(|s| {
            (
                s.base.path().to_path_buf(),
                s.base.records(),
                s.base.bytes(),
            )
        })
    }

    /// The current, verified records' digests as of at least the store's records epoch
    /// now: the index caught up first, and made now (mapping the newest generation, else
    /// merging) when there is none yet.
    pub async fn current_digests(
        self: &Arc<Self>,
        store: &Arc<dyn Store>,
    ) -> Result<CurrentDigests, model::Error> {
        let epoch = store.records_epoch();
        if !self.catch_up_to(store, epoch).await? {
            self.rebuild(store).await?;
            self.catch_up_to(store, epoch).await?;
        }
        self.read()
            .as_ref()
            .filter(|s| s.epoch >= epoch)
            .map(State::current_digests)
            .ok_or_else(|| model::Error::internal("the vendor lookup index is behind the store"))
    }

    /// Records in the delta over the base.
    pub fn delta_records(&self) -> usize {
        self.read().as_ref().map_or(0, |s| s.delta.records.len())
    }

    /// Applies the store's changes now unless the index is current; `false` when there is
    /// no index to apply them to.
    async fn catch_up_now(self: &Arc<Self>, store: &Arc<dyn Store>) -> Result<bool, model::Error> {
        // Read before the changes: a write landing meanwhile is read now or next time.
        self.catch_up_to(store, store.records_epoch()).await
    }

    /// Applies the store's changes up to at least `target`, an epoch whose writes are
    /// committed; `false` when there is no index to apply them to.
    pub async fn catch_up_to(
        self: &Arc<Self>,
        store: &Arc<dyn Store>,
        target: u64,
    ) -> Result<bool, model::Error> {
        let _updating = self.updating.lock().await;
        let from = match self.read().as_ref() {
            None => return Ok(false),
            Some(s) if s.epoch >= target => return Ok(true),
            Some(s) => s.epoch,
        };
        let changes = changes_after(store, from).await?;
        let grown = {
            let mut guard = self.write();
            let Some(state) = guard.as_mut() else {
                return Ok(false);
            };
            for record in &changes {
                state.apply(record);
            }
            state.epoch = target;
            state.delta_is_large()
        };
        if grown {
            self.rebuild_in_background(store);
        }
        Ok(true)
    }

    /// Applies the store's changes in the background if the index is behind it.
    pub fn catch_up(self: &Arc<Self>, store: &Arc<dyn Store>) {
        if self.is_fresh(store) {
            return;
        }
        let index = Arc::clone(self);
        let store = Arc::clone(store);
        tokio::spawn(async move {
            match index.catch_up_now(&store).await {
                Ok(true) => {}
                Ok(false) => index.rebuild_in_background(&store),
                Err(e) => tracing::warn!(error = %e, "vendor lookup index catch-up failed"),
            }
        });
    }

    /// Periodic upkeep (the server calls it every ten minutes): starts the index if it has
    /// none, merges if the delta is large, and otherwise re-verifies the stored HMACs of
    /// the share of records due since the last call, in the background.
    pub fn upkeep(self: &Arc<Self>, store: &Arc<dyn Store>) {
        let large = match self.read().as_ref() {
            None => true,
            Some(s) => s.delta_is_large(),
        };
        if large {
            self.rebuild_in_background(store);
            return;
        }
        let index = Arc::clone(self);
        let store = Arc::clone(store);
        tokio::spawn(async move {
            if let Err(e) = index.reverify_due(&store).await {
                tracing::warn!(error = %e, "vendor record re-verification failed");
            }
        });
    }

    /// Starts a rebuild on its own task, unless one is running or the last one ended less
    /// than its own duration ago.
    pub fn rebuild_in_background(self: &Arc<Self>, store: &Arc<dyn Store>) {
        let too_soon = self
            .not_before
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|t| Instant::now() < t);
        if too_soon || self.rebuilding.swap(true, Ordering::AcqRel) {
            return;
        }
        let index = Arc::clone(self);
        let store = Arc::clone(store);
        tokio::spawn(async move {
            let started = Instant::now();
            if let Err(e) = index.rebuild(&store).await {
                tracing::warn!(error = %e, "vendor lookup index rebuild failed");
            }
            let took = started.elapsed();
            *index.not_before.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(Instant::now() + took.min(Duration::from_secs(60)));
            index.rebuilding.store(false, Ordering::Release);
        });
    }

    /// Makes the index current now, on this task: the first time, by mapping the newest
    /// generation written from this store if there is one; otherwise by a merge. Returns
    /// the number of distinct hashes in the base.
    pub async fn rebuild(&self, store: &Arc<dyn Store>) -> Result<usize, model::Error> {
        if !self.started.swap(true, Ordering::AcqRel)
            && self.read().is_none()
            && let Some(hashes) = self.map_newest(store).await?
        {
            return Ok(hashes);
        }
        self.merge(store).await
    }

    /// Maps the newest valid generation of the directory if it was written from this store,
    /// replays the changes since and swaps it in; `None` when there is none to use.
    async fn map_newest(&self, store: &Arc<dyn Store>) -> Result<Option<usize>, model::Error> {
        let started = Instant::now();
        let dir = self.dir()?;
        // The generation's first record id must still be among the store's first ids. A
        // record written since may sort before it (ids are random), so the first few are read.
        let firsts = store.records_after(None, FINGERPRINT_WINDOW).await?;
        let epoch = store.records_epoch();
        let opened = tokio::task::spawn_blocking(move || {
            if let Err(e) = generation::clean(&dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot clean the vendor generation directory");
            }
            // Sizes, shapes and bucket tables now; the checksum once it answers.
            generation::open_newest(&dir, false)
        })
        .await
        .map_err(model::Error::internal)?;
        let Some(base) = opened else {
            return Ok(None);
        };
        let ours = if firsts.is_empty() {
            base.fingerprint() == generation::fingerprint(None)
        } else {
            firsts
                .iter()
                .any(|r| generation::fingerprint(Some(&r.id)) == base.fingerprint())
        };
        if !ours || base.epoch() > epoch {
            tracing::info!(
                path = %base.path().display(),
                "vendor generation was written from another database; writing a new one"
            );
            return Ok(None);
        }
        let hashes = base.hashes() as usize;
        let (path, records, gen_epoch) = (base.path().to_path_buf(), base.records(), base.epoch());
        let base = Arc::new(base);
        let delta = self
            .swap_in(store, State::new(gen_epoch, Arc::clone(&base)))
            .await?;
        // Reading a large file whole takes longer than a start should: lookups use the
        // generation meanwhile, and one whose checksum fails is replaced by a merge.
        let verified = tokio::task::spawn_blocking(move || base.verify())
            .await
            .map_err(model::Error::internal)?;
        if let Err(e) = verified {
            tracing::error!(path = %path.display(), error = %e, "vendor generation refused; writing a new one");
            // The database answers until the merge is done.
            let _updating = self.updating.lock().await;
            *self.write() = None;
            return Ok(None);
        }
        tracing::info!(
            path = %path.display(),
            records,
            delta,
            epoch = gen_epoch,
            ms = started.elapsed().as_millis() as u64,
            "vendor lookup index mapped"
        );
        Ok(Some(hashes))
    }

    /// Catches `state` up (first without the lock, then under it) and makes it the index;
    /// returns the records in its delta.
    async fn swap_in(
        &self,
        store: &Arc<dyn Store>,
        mut state: State,
    ) -> Result<usize, model::Error> {
        // What was written during the scan, without blocking lookups; then the rest, and
        // the swap, under the lock that catch-ups take.
        state.catch_up(store, store.records_epoch()).await?;
        let _updating = self.updating.lock().await;
        state.catch_up(store, store.records_epoch()).await?;
        let delta = state.delta.records.len();
        // The old state's epoch was read from the store earlier: this one is no older.
        *self.write() = Some(state);
        Ok(delta)
    }

    /// Writes a new generation from a full scan of the store, now, on this task (the writing
    /// on a blocking thread), catches it up and swaps it in; the old one answers meanwhile.
    /// Returns the number of distinct hashes indexed.
    pub async fn merge(&self, store: &Arc<dyn Store>) -> Result<usize, model::Error> {
        let started = Instant::now();
        let dir = self.dir()?;
        // Read before the scan: a write that lands during the scan is applied after it.
        let epoch = store.records_epoch();
        let (pages, mut receive) = tokio::sync::mpsc::channel::<Vec<HashRecord>>(2);
        let complete = Arc::new(AtomicBool::new(false));
        let done = Arc::clone(&complete);
        let write_dir = dir.clone();
        let writing = tokio::task::spawn_blocking(move || -> std::io::Result<Option<PathBuf>> {
            let mut writer = generation::Writer::create(&write_dir, MERGE_BUDGET)?;
            let mut first: Option<String> = None;
            while let Some(page) = receive.blocking_recv() {
                for record in &page {
                    if first.is_none() {
                        first = Some(record.id.clone());
                    }
                    if record.integrity_ok {
                        writer.push(record)?;
                    }
                }
            }
            if !done.load(Ordering::Acquire) {
                writer.abandon();
                return Ok(None);
            }
            writer
                .finish(epoch, generation::fingerprint(first.as_deref()))
                .map(Some)
        });
        let mut skipped = 0usize;
        let scan = async {
            let mut after: Option<String> = None;
            loop {
                let page = store.records_after(after.as_deref(), SCAN_PAGE).await?;
                let Some(last) = page.last() else { break };
                after = Some(last.id.clone());
                skipped += page.iter().filter(|r| !r.integrity_ok).count();
                if pages.send(page).await.is_err() {
                    // The writer failed: its error is reported below.
                    break;
                }
            }
            Ok::<(), model::Error>(())
        }
        .await;
        if scan.is_ok() {
            complete.store(true, Ordering::Release);
        }
        drop(pages);
        let written = writing.await.map_err(model::Error::internal)?;
        scan?;
        let path = written
            .map_err(io_error)?
            .ok_or_else(|| model::Error::internal("vendor generation merge abandoned"))?;
        let open_path = path.clone();
        // Just written and fsynced: the sizes and shapes are checked, not the checksum.
        let base = tokio::task::spawn_blocking(move || Generation::open(&open_path, false))
            .await
            .map_err(model::Error::internal)?
            .map_err(io_error)?;
        let (records, hashes, bytes) = (base.records(), base.hashes(), base.bytes());
        self.swap_in(store, State::new(epoch, Arc::new(base)))
            .await?;
        self.merges.fetch_add(1, Ordering::Relaxed);
        generation::remove_older(&dir, &path);
        tracing::info!(
            path = %path.display(),
            records,
            hashes,
            bytes,
            skipped_integrity = skipped,
            epoch,
            ms = started.elapsed().as_millis() as u64,
            "vendor lookup generation written"
        );
        Ok(hashes as usize)
    }

    /// Re-verifies the records due since the last call (see [`upkeep`](Self::upkeep)).
    async fn reverify_due(&self, store: &Arc<dyn Store>) -> Result<u64, model::Error> {
        let records = match self.read().as_ref() {
            Some(s) => s.base.records() as f64,
            None => return Ok(0),
        };
        let per_hour = (records * REVERIFY_SHARE_PER_HOUR).max(REVERIFY_MIN_PER_HOUR);
        let mut progress = self.reverify.lock().await;
        let now = Instant::now();
        // The first call pays for one upkeep interval.
        let elapsed = progress
            .last
            .map_or(Duration::from_secs(600), |t| now.duration_since(t));
        progress.last = Some(now);
        let budget = (per_hour * elapsed.as_secs_f64() / 3600.0).ceil() as u64;
        self.reverify_records(store, &mut progress, budget).await
    }

    /// Reads up to `budget` records again, in id order from where the last pass stopped
    /// (the store verifies each HMAC as it reads); one in the base that now fails stops
    /// answering. Returns how many were read.
    pub async fn reverify(&self, store: &Arc<dyn Store>, budget: u64) -> Result<u64, model::Error> {
        let mut progress = self.reverify.lock().await;
        self.reverify_records(store, &mut progress, budget).await
    }

    async fn reverify_records(
        &self,
        store: &Arc<dyn Store>,
        progress: &mut Reverify,
        budget: u64,
    ) -> Result<u64, model::Error> {
        let mut read = 0u64;
        while read < budget {
            let want = (budget - read).min(u64::from(SCAN_PAGE)) as u32;
            let page = store.records_after(progress.after.as_deref(), want).await?;
            let Some(last) = page.last() else {
                // A pass is complete; the next starts from the first record.
                progress.after = None;
                break;
            };
            progress.after = Some(last.id.clone());
            read += page.len() as u64;
            let failing: Vec<&HashRecord> = page.iter().filter(|r| !r.integrity_ok).collect();
            if failing.is_empty() {
                continue;
            }
            self.reverify_failures
                .fetch_add(failing.len() as u64, Ordering::Relaxed);
            let _updating = self.updating.lock().await;
            let mut guard = self.write();
            if let Some(state) = guard.as_mut() {
                for record in failing {
                    if state.answers_for(&record.id) {
                        state.apply(record);
                    }
                }
            }
        }
        self.reverified.fetch_add(read, Ordering::Relaxed);
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use model::{Arch, NewRecord};

    fn record(id: u32, sha256: &str, md5: Option<&str>, current: bool, day: u32) -> HashRecord {
        HashRecord {
            id: format!("r{id:04}"),
            record: NewRecord {
                vendor: format!("vendor{}", id % 2),
                executable_name: format!("tool{id}.exe"),
                version: format!("1.{id}"),
                platform: Platform::Windows,
                arch: Arch::Amd64,
                hash_sha256: sha256.into(),
                hash_sha1: None,
                hash_md5: md5.map(Into::into),
                source_url: "https://example.com".into(),
                download_verified: false,
                sig_signer: None,
                sig_issuer: None,
                sig_serial: None,
                sig_thumbprint: None,
                size: None,
            },
            family: format!("tool{id}"),
            status: if current {
                RecordStatus::Current
            } else {
                RecordStatus::Superseded
            },
            valid_from: Utc.with_ymd_and_hms(2026, 1, day, 0, 0, 0).unwrap(),
            valid_until: None,
            added_at: Utc.with_ymd_and_hms(2026, 1, day, 0, 0, 0).unwrap(),
            cert_revoked_at: None,
            integrity_ok: true,
        }
    }

    /// A generation of `records` (verified ones, in the order given), in its own directory.
    fn generation(records: &[HashRecord]) -> (tempfile::TempDir, Arc<Generation>) {
        let dir = tempfile::tempdir().unwrap();
        let path = generation::write_records(dir.path(), records, 1, 1 << 16).unwrap();
        let g = Generation::open(&path, true).unwrap();
        (dir, Arc::new(g))
    }

    fn names(g: &Generation, hashes: &[&str]) -> Vec<Option<String>> {
        let batch: Vec<HashValue> = hashes
            .iter()
            .map(|h| HashValue::parse(h).unwrap())
            .collect();
        g.get_batch(&batch)
            .into_iter()
            .map(|e| {
                let m = g.matched(e?)?;
                Some(format!("{} {} {}", m.vendor, m.executable_name, m.version))
            })
            .collect()
    }

    #[test]
    fn digests_sharing_their_first_sixteen_bytes_are_told_apart() {
        // Rows keep a digest's first 16 bytes: these share their rows' keys, and the entries'
        // whole digests tell them apart.
        let a = format!("{}{}", "ab".repeat(16), "01".repeat(16));
        let b = format!("{}{}", "ab".repeat(16), "02".repeat(16));
        let c = format!("{}{}", "ab".repeat(16), "03".repeat(16));
        let d = format!("{}{}", "ab".repeat(8), "04".repeat(24));
        let (_dir, g) = generation(&[
            record(1, &b, None, true, 1),
            record(2, &a, None, true, 1),
            record(3, &b, None, false, 2),
            record(4, &d, None, true, 1),
        ]);
        assert_eq!(
            names(&g, &[&b, &c, &a, &d]),
            [
                Some("vendor1 tool1.exe 1.1".to_string()),
                None,
                Some("vendor0 tool2.exe 1.2".to_string()),
                Some("vendor0 tool4.exe 1.4".to_string()),
            ]
        );
        let naming = |hex: &str| -> Vec<String> {
            let h = HashValue::parse(hex).unwrap();
            g.naming(&key_of(h.algo(), h.digest()))
                .into_iter()
                .map(|e| g.id(e).as_str().to_string())
                .collect()
        };
        assert_eq!(naming(&b), ["r0001", "r0003"]);
        assert_eq!(naming(&a), ["r0002"]);
        assert!(naming(&c).is_empty());
        let digests: Vec<(Vec<u8>, bool)> = g
            .distinct_digests(HashAlgo::Sha256)
            .map(|(d, current)| (d.to_vec(), current))
            .collect();
        let bytes = |hex: &str| HashValue::parse(hex).unwrap().digest().to_vec();
        assert_eq!(
            digests,
            [(bytes(&d), true), (bytes(&a), true), (bytes(&b), true)]
        );
        assert_eq!(g.hashes(), 3);
    }

    #[test]
    fn a_shared_hash_names_the_current_then_the_newest_then_the_first_record() {
        let shared = "0f".repeat(32);
        let md5 = "e1".repeat(16);
        let old = record(1, &shared, Some(&md5), false, 1);
        let newer_superseded = record(2, &shared, None, false, 5);
        let current = record(3, &"aa".repeat(32), Some(&md5), true, 2);
        let tie = record(4, &"bb".repeat(32), Some(&md5), true, 2);
        let (_dir, g) = generation(&[old, newer_superseded, current, tie]);
        assert_eq!(
            names(&g, &[&shared, &md5]),
            [
                Some("vendor0 tool2.exe 1.2".to_string()),
                Some("vendor1 tool3.exe 1.3".to_string()),
            ]
        );
        // Distinct: three SHA-256 and one MD5.
        assert_eq!(g.hashes(), 4);
        let naming: Vec<String> = g
            .naming(&key_of(HashAlgo::Md5, &[0xe1; 16]))
            .into_iter()
            .map(|e| g.id(e).as_str().to_string())
            .collect();
        assert_eq!(naming, ["r0003", "r0004", "r0001"]);
    }

    /// A small generator for the model test.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) % n
        }
    }

    fn pool_sha256(i: u64) -> String {
        format!("{:02x}", 0x10 + i).repeat(32)
    }

    fn pool_md5(i: u64) -> String {
        format!("{:02x}", 0x80 + i).repeat(16)
    }

    /// What the database path answers: verified records naming the hash, current ones only
    /// unless `historical`, the best by `best_match`.
    fn database_answer(records: &[HashRecord], hash: &HashValue, historical: bool) -> String {
        let visible: Vec<HashRecord> = records
            .iter()
            .filter(|r| historical || r.status == RecordStatus::Current)
            .cloned()
            .collect();
        format!("{:?}", best_match(hash, &visible))
    }

    fn index_answers(state: &State, batch: &[HashValue], historical: bool) -> Vec<String> {
        state
            .for_batch(batch)
            .get_batch(batch, historical)
            .into_iter()
            .map(|m| format!("{m:?}"))
            .collect()
    }

    /// A base and a stream of changes (new records, supersessions, intervals moved back,
    /// tampered rows, restored rows) over a few shared hashes with tied ranks: after every
    /// change, every hash answers as the database would over the records as they now are.
    #[test]
    fn the_delta_answers_as_the_database_after_every_change() {
        for seed in 0..40 {
            let mut rng = Rng(seed);
            let mut truth: Vec<HashRecord> = Vec::new();
            let mut next_id = 0u32;
            let mut new_record = |rng: &mut Rng| {
                next_id += 1;
                let mut r = record(
                    next_id,
                    &pool_sha256(rng.below(6)),
                    (rng.below(3) > 0)
                        .then(|| pool_md5(rng.below(4)))
                        .as_deref(),
                    rng.below(3) > 0,
                    1 + rng.below(3) as u32,
                );
                // Ids in no particular order against arrival.
                r.id = format!("r{:04}", (next_id * 7919) % 10007);
                r
            };
            for _ in 0..rng.below(12) {
                let mut r = new_record(&mut rng);
                r.integrity_ok = rng.below(8) > 0;
                truth.push(r);
            }
            let mut signed: Vec<String> =
                truth.iter().map(|r| r.record.hash_sha256.clone()).collect();
            let mut sorted = truth.clone();
            sorted.sort_by(|a, b| a.id.cmp(&b.id));
            let (_dir, base) = generation(&sorted);
            let mut state = State::new(1, base);
            let batch: Vec<HashValue> = (0..6)
                .map(pool_sha256)
                .chain((0..4).map(pool_md5))
                .map(|h| HashValue::parse(&h).unwrap())
                .collect();
            for step in 0..60 {
                let changed = if truth.is_empty() || rng.below(3) == 0 {
                    let r = new_record(&mut rng);
                    signed.push(r.record.hash_sha256.clone());
                    truth.push(r);
                    truth.len() - 1
                } else {
                    let i = rng.below(truth.len() as u64) as usize;
                    let r = &mut truth[i];
                    match rng.below(5) {
                        0 | 1 => r.status = RecordStatus::Superseded,
                        2 => r.valid_from -= chrono::Duration::microseconds(1),
                        3 => {
                            r.integrity_ok = false;
                            if rng.below(2) == 0 {
                                r.record.hash_sha256 = pool_sha256(rng.below(6));
                            }
                        }
                        _ => {
                            // The tampering undone: signed fields as they were.
                            r.integrity_ok = true;
                            r.record.hash_sha256 = signed[i].clone();
                        }
                    }
                    i
                };
                state.apply(&truth[changed]);
                for historical in [false, true] {
                    let want: Vec<String> = batch
                        .iter()
                        .map(|h| database_answer(&truth, h, historical))
                        .collect();
                    assert_eq!(
                        index_answers(&state, &batch, historical),
                        want,
                        "seed {seed}, step {step}, historical {historical}"
                    );
                }
            }
        }
    }

    /// The distinct digests of `algo` of the current, verified records, sorted.
    fn current_truth(records: &[HashRecord], algo: HashAlgo) -> Vec<Vec<u8>> {
        let mut want: Vec<Vec<u8>> = records
            .iter()
            .filter(|r| r.integrity_ok && r.status == RecordStatus::Current)
            .filter_map(|r| match algo {
                HashAlgo::Sha256 => Some(r.record.hash_sha256.as_str()),
                HashAlgo::Sha1 => r.record.hash_sha1.as_deref(),
                HashAlgo::Md5 => r.record.hash_md5.as_deref(),
            })
            .map(|h| digest_of(algo, h).unwrap()[..algo.hex_len() / 2].to_vec())
            .collect();
        want.sort();
        want.dedup();
        want
    }

    /// Records in the base, new ones in the delta, supersessions and tampering of either:
    /// the current digests walked over base and delta are, after every change, exactly the
    /// distinct digests of the current, verified records, in order.
    #[test]
    fn current_digests_are_those_of_the_current_verified_records() {
        for seed in 0..30 {
            let mut rng = Rng(seed + 1000);
            let mut truth: Vec<HashRecord> = (0..1 + rng.below(10) as u32)
                .map(|i| {
                    record(
                        i + 1,
                        &pool_sha256(rng.below(6)),
                        (rng.below(2) == 0)
                            .then(|| pool_md5(rng.below(4)))
                            .as_deref(),
                        rng.below(3) > 0,
                        1 + rng.below(3) as u32,
                    )
                })
                .collect();
            let (_dir, base) = generation(&truth);
            let mut state = State::new(1, base);
            for step in 0..40 {
                let i = rng.below(truth.len() as u64 + 2) as usize;
                let changed = if i >= truth.len() {
                    let id = truth.len() as u32 + 1;
                    truth.push(record(
                        id,
                        &pool_sha256(rng.below(6)),
                        (rng.below(2) == 0)
                            .then(|| pool_md5(rng.below(4)))
                            .as_deref(),
                        true,
                        4,
                    ));
                    truth.len() - 1
                } else {
                    match rng.below(3) {
                        0 => truth[i].status = RecordStatus::Superseded,
                        1 => truth[i].integrity_ok = !truth[i].integrity_ok,
                        _ => truth[i].status = RecordStatus::Current,
                    }
                    i
                };
                state.apply(&truth[changed]);
                let digests = state.current_digests();
                for algo in [HashAlgo::Sha256, HashAlgo::Sha1, HashAlgo::Md5] {
                    let mut got = Vec::new();
                    digests.for_each(algo, |d| got.push(d.to_vec()));
                    assert_eq!(
                        got,
                        current_truth(&truth, algo),
                        "seed {seed}, step {step}, {algo:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn an_empty_index_knows_nothing() {
        let (_dir, g) = generation(&[]);
        assert_eq!(names(&g, &[&"12".repeat(20)]), [None]);
    }
}
