//! The vendor records in memory, for lookups.
//!
//! Classifying 100 hashes against the database costs about a millisecond of SQL and HMAC
//! checks; against this index it costs microseconds. The index maps every SHA-256, SHA-1 and
//! MD5 of a verified record to the record that hash names: current before superseded, then
//! the newest, then the smallest id (the same choice the database path makes).
//!
//! It is a base built from a full scan of the store, in which every row's HMAC is verified as
//! it is read (records that fail are left out, and the store logs and counts them), and a
//! delta on top: the records written since (`records_changed_after`, also verified as read),
//! with, for every hash they name or named, the answer over base and delta together. The
//! index is tagged with the records epoch read *before* each read of the store, and a lookup
//! uses it only when that tag is at least the epoch the lookup saw; otherwise the lookup
//! first applies what changed (one indexed query), so after a write the next lookup still
//! answers from memory. Writes through this process move the epoch at once, other replicas'
//! writes within one poll of the database counter (half a second).
//!
//! When the delta grows past an eighth of the base (at least 65,536 records), and every ten minutes (which also
//! re-verifies every row), a new base is built in the background while the old one keeps
//! answering; it is caught up and swapped in under the lock catch-ups take. A rebuild starts
//! no sooner after the previous one than that one took.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use model::{HashAlgo, HashRecord, HashValue, Platform, RecordStatus};
use store::Store;

use corpus::prefetch::prefetch;

use crate::huge_pages;

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
    pub digests: Digests,
    /// The file's size in bytes, when recorded.
    pub size: Option<u64>,
}

/// A vendor record's digests as bytes: SHA-256 always, SHA-1 and MD5 when recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digests {
    pub sha256: [u8; 32],
    pub sha1: Option<[u8; 20]>,
    pub md5: Option<[u8; 16]>,
}

impl Digests {
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
            digests: Digests::from_hex(
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
type Key = (HashAlgo, Digest);

fn key_of(algo: HashAlgo, digest: &[u8]) -> Key {
    let mut d = [0u8; 32];
    let n = digest.len().min(32);
    d[..n].copy_from_slice(&digest[..n]);
    (algo, d)
}

/// The bytes of a key's digest.
fn digest_bytes(key: &Key) -> &[u8] {
    &key.1[..key.0.hex_len() / 2]
}

/// A hex digest of `algo`'s length as bytes, or `None` if it is not one.
fn digest_of(algo: HashAlgo, hex: &str) -> Option<Digest> {
    let mut out = [0u8; 32];
    model::hash::decode_hex(hex.as_bytes(), &mut out[..algo.hex_len() / 2]).then_some(out)
}

fn algo_code(algo: HashAlgo) -> u8 {
    match algo {
        HashAlgo::Sha256 => 1,
        HashAlgo::Sha1 => 2,
        HashAlgo::Md5 => 3,
    }
}

/// A verified record as the index keeps it: plain data, so that the entries of a million
/// records are one array on huge pages, and a hit reads one entry and its text.
#[derive(Clone, Copy)]
struct Entry {
    sha256: [u8; 32],
    sha1: [u8; 20],
    md5: [u8; 16],
    has_sha1: bool,
    has_md5: bool,
    current: bool,
    platform: Platform,
    /// Index into the vendor names.
    vendor: u32,
    /// The executable name then the version, at `text` in the text arena.
    text: u32,
    name_len: u32,
    version_len: u32,
    valid_from_micros: i64,
    size: Option<u64>,
}

impl Entry {
    fn digest(&self, algo: HashAlgo) -> Option<&[u8]> {
        match algo {
            HashAlgo::Sha256 => Some(&self.sha256),
            HashAlgo::Sha1 => self.has_sha1.then_some(&self.sha1[..]),
            HashAlgo::Md5 => self.has_md5.then_some(&self.md5[..]),
        }
    }

    fn rank(&self) -> (bool, i64) {
        (self.current, self.valid_from_micros)
    }

    fn keys(&self) -> Vec<Key> {
        let mut keys = vec![(HashAlgo::Sha256, self.sha256)];
        if self.has_sha1 {
            keys.push(key_of(HashAlgo::Sha1, &self.sha1));
        }
        if self.has_md5 {
            keys.push(key_of(HashAlgo::Md5, &self.md5));
        }
        keys
    }
}

/// One place of the open-addressed table: four bytes of a digest and the entry it names.
/// Eight to a cache line; the entry holds the full digest that settles a match.
#[derive(Clone, Copy, Default)]
struct Slot {
    tag: u32,
    /// Entry index plus one; zero marks an empty slot.
    entry: u32,
}

/// One build of the index: an open-addressed table (linear probing, at most half full) from
/// every hash to the entry of the record it names.
///
/// A batch lookup goes through the hashes in steps, prefetching what the next step reads
/// for all of them first: their table slots, then their entries, then their text. At a
/// million records each of these is a DRAM access, so a 100-hash request waits for three
/// rounds of overlapping accesses rather than for a few hundred one after another.
struct Snapshot {
    slots: Vec<Slot>,
    /// `64 - log2(slots.len())`: a hash's home slot is the top bits of its mixed key.
    shift: u32,
    /// Per process and random, so that nobody can aim recorded hashes at one run of slots.
    seed: u64,
    entries: Vec<Entry>,
    text: Vec<u8>,
    vendors: Vec<Box<str>>,
    /// Entry `e`'s record id is `ids[id_at[e]..id_at[e + 1]]`; read only to apply changes.
    ids: Vec<u8>,
    id_at: Vec<u32>,
    /// Every entry naming a hash that several entries name (the table keeps the best), so
    /// that the next best is known when the delta changes the best.
    shared: HashMap<Key, Vec<u32>>,
    /// Distinct hashes in the table.
    hashes: usize,
}

/// The first eight bytes of a digest, which place it in the table.
fn key(digest: &[u8]) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// The digest bytes a slot keeps to tell candidates apart.
fn tag(key: u64) -> u32 {
    (key >> 32) as u32
}

impl Snapshot {
    fn home(&self, algo: HashAlgo, key: u64) -> usize {
        // A folded 64x64->128 multiply: every output bit depends on every input bit.
        let salted = key ^ self.seed ^ u64::from(algo_code(algo));
        let product = u128::from(salted) * 0x9e37_79b9_7f4a_7c15_u128;
        let mixed = (product as u64) ^ ((product >> 64) as u64);
        (mixed >> self.shift) as usize
    }

    /// The entries whose slots carry `digest`'s tag, probing from its home slot; nearly
    /// always at most one, which [`find`](Self::find) then compares in full.
    fn candidates(&self, algo: HashAlgo, digest: &[u8]) -> impl Iterator<Item = u32> {
        let key = key(digest);
        let tag = tag(key);
        let mask = self.slots.len() - 1;
        let mut i = self.home(algo, key);
        std::iter::from_fn(move || {
            loop {
                let slot = self.slots[i];
                i = (i + 1) & mask;
                if slot.entry == 0 {
                    return None;
                }
                if slot.tag == tag {
                    return Some(slot.entry - 1);
                }
            }
        })
    }

    /// The entry `digest` names.
    fn find(&self, algo: HashAlgo, digest: &[u8]) -> Option<u32> {
        self.candidates(algo, digest)
            .find(|&e| self.entries[e as usize].digest(algo) == Some(digest))
    }

    /// Points `digest` at entry `e` unless the entry there already ranks at least as high
    /// (entries arrive in id order, so among equals the smallest id keeps the hash).
    fn claim(&mut self, algo: HashAlgo, digest: &[u8], e: u32) {
        let key = key(digest);
        let tag = tag(key);
        let mut i = self.home(algo, key);
        loop {
            let slot = self.slots[i];
            if slot.entry == 0 {
                self.slots[i] = Slot { tag, entry: e + 1 };
                self.hashes += 1;
                return;
            }
            let existing = slot.entry - 1;
            if slot.tag == tag && self.entries[existing as usize].digest(algo) == Some(digest) {
                self.shared
                    .entry(key_of(algo, digest))
                    .or_insert_with(|| vec![existing])
                    .push(e);
                if self.entries[e as usize].rank() > self.entries[existing as usize].rank() {
                    self.slots[i].entry = e + 1;
                }
                return;
            }
            i = (i + 1) & (self.slots.len() - 1);
        }
    }

    fn id(&self, e: u32) -> &str {
        let e = e as usize;
        let (Some(&from), Some(&to)) = (self.id_at.get(e), self.id_at.get(e + 1)) else {
            return "";
        };
        self.ids
            .get(from as usize..to as usize)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    /// The entry of the record `id`, by a linear search: only for a changed record that
    /// now fails its HMAC, which must stop answering for the hashes it named when verified.
    fn entry_of_id(&self, id: &str) -> Option<u32> {
        (0..self.entries.len() as u32).find(|&e| self.id(e) == id)
    }

    /// Every entry naming `key`.
    fn naming(&self, key: &Key) -> Vec<u32> {
        match self.shared.get(key) {
            Some(all) => all.clone(),
            None => self.find(key.0, digest_bytes(key)).into_iter().collect(),
        }
    }

    fn matched(&self, e: u32) -> Option<VendorMatch<'_>> {
        let entry = self.entries.get(e as usize)?;
        let at = entry.text as usize;
        let name_end = at + entry.name_len as usize;
        let end = name_end + entry.version_len as usize;
        let text = |range: std::ops::Range<usize>| std::str::from_utf8(self.text.get(range)?).ok();
        Some(VendorMatch {
            vendor: self.vendors.get(entry.vendor as usize)?,
            executable_name: text(at..name_end)?,
            version: text(name_end..end)?,
            platform: entry.platform,
            current: entry.current,
            digests: Digests {
                sha256: entry.sha256,
                sha1: entry.has_sha1.then_some(entry.sha1),
                md5: entry.has_md5.then_some(entry.md5),
            },
            size: entry.size,
        })
    }

    /// The record each hash names, in order, overlapping their memory accesses.
    fn get_batch(&self, batch: &[HashValue]) -> Vec<Option<VendorMatch<'_>>> {
        for h in batch {
            prefetch(&self.slots, self.home(h.algo(), key(h.digest())));
        }
        let candidates: Vec<Option<u32>> = batch
            .iter()
            .map(|h| {
                let e = self.candidates(h.algo(), h.digest()).next()?;
                // An entry spans two cache lines.
                prefetch(&self.entries, e as usize);
                prefetch(&self.entries, e as usize + 1);
                Some(e)
            })
            .collect();
        let found: Vec<Option<u32>> = batch
            .iter()
            .zip(candidates)
            .map(|(h, e)| {
                let (algo, d) = (h.algo(), h.digest());
                let e = e.filter(|&e| self.entries[e as usize].digest(algo) == Some(d));
                // A tag shared by two digests: rare enough to take the slow path.
                let e = e.or_else(|| self.find(algo, d))?;
                prefetch(&self.text, self.entries[e as usize].text as usize);
                Some(e)
            })
            .collect();
        found.iter().map(|e| self.matched((*e)?)).collect()
    }
}

/// The first `N` bytes of a digest, zeros for none.
fn leading<const N: usize>(digest: Option<Digest>) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(d) = digest {
        out.copy_from_slice(&d[..N]);
    }
    out
}

/// Builds a snapshot from verified records, in id order.
#[derive(Default)]
struct Builder {
    entries: Vec<Entry>,
    text: Vec<u8>,
    vendors: Vec<Box<str>>,
    vendor_ids: HashMap<String, u32>,
    ids: Vec<u8>,
    id_at: Vec<u32>,
    hashes: usize,
}

impl Builder {
    fn add(&mut self, record: &HashRecord) {
        let r = &record.record;
        let (Ok(text), Ok(name_len), Ok(version_len), Ok(id_end)) = (
            u32::try_from(self.text.len()),
            u32::try_from(r.executable_name.len()),
            u32::try_from(r.version.len()),
            u32::try_from(self.ids.len() + record.id.len()),
        ) else {
            return;
        };
        let Some(sha256) = digest_of(HashAlgo::Sha256, &r.hash_sha256) else {
            return;
        };
        let sha1 = r
            .hash_sha1
            .as_deref()
            .and_then(|h| digest_of(HashAlgo::Sha1, h));
        let md5 = r
            .hash_md5
            .as_deref()
            .and_then(|h| digest_of(HashAlgo::Md5, h));
        let next_vendor = self.vendors.len() as u32;
        let vendor = *self.vendor_ids.entry(r.vendor.clone()).or_insert_with(|| {
            self.vendors.push(r.vendor.as_str().into());
            next_vendor
        });
        if self.id_at.is_empty() {
            self.id_at.push(0);
        }
        self.ids.extend_from_slice(record.id.as_bytes());
        self.id_at.push(id_end);
        self.text.extend_from_slice(r.executable_name.as_bytes());
        self.text.extend_from_slice(r.version.as_bytes());
        self.hashes += 1 + usize::from(sha1.is_some()) + usize::from(md5.is_some());
        self.entries.push(Entry {
            sha256,
            sha1: leading(sha1),
            md5: leading(md5),
            has_sha1: sha1.is_some(),
            has_md5: md5.is_some(),
            current: record.status == RecordStatus::Current,
            platform: r.platform,
            vendor,
            text,
            name_len,
            version_len,
            valid_from_micros: record.valid_from.timestamp_micros(),
            size: r.size,
        });
    }

    /// The table has at least 16 slots, never more than half of them used, so a probe
    /// always reaches an empty slot.
    fn finish(self, seed: u64) -> Snapshot {
        let len = (self.hashes * 2).next_power_of_two().max(16);
        let mut snapshot = Snapshot {
            slots: huge_pages::filled(len, Slot::default()),
            shift: 64 - len.trailing_zeros(),
            seed,
            entries: huge_pages::copy(&self.entries),
            text: huge_pages::copy(&self.text),
            vendors: self.vendors,
            ids: self.ids,
            id_at: self.id_at,
            shared: HashMap::new(),
            hashes: 0,
        };
        for e in 0..snapshot.entries.len() {
            let entry = snapshot.entries[e];
            let e = e as u32;
            snapshot.claim(HashAlgo::Sha256, &entry.sha256, e);
            if entry.has_sha1 {
                snapshot.claim(HashAlgo::Sha1, &entry.sha1, e);
            }
            if entry.has_md5 {
                snapshot.claim(HashAlgo::Md5, &entry.md5, e);
            }
        }
        snapshot
    }
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
    digests: Digests,
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
            digests: Digests::from_hex(
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
    base: Arc<Snapshot>,
    delta: Delta,
}

impl State {
    fn new(epoch: u64, base: Snapshot) -> Self {
        Self {
            epoch,
            base: Arc::new(base),
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
                        touched.extend(self.base.entries[e as usize].keys());
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
        let mut candidates: Vec<((bool, i64), Reverse<&str>, Answer)> = Vec::new();
        for e in self.base.naming(key) {
            let id = self.base.id(e);
            if !self.delta.records.contains_key(id) {
                let rank = self.base.entries[e as usize].rank();
                candidates.push((rank, Reverse(id), Answer::Base(e)));
            }
        }
        for id in self.delta.naming.get(key).into_iter().flatten() {
            if let Some(r) = self.delta.records.get(id)
                && r.verified
            {
                let rank = (r.current, r.valid_from_micros);
                candidates.push((rank, Reverse(&r.id), Answer::Record(Arc::clone(r))));
            }
        }
        candidates
            .into_iter()
            .max_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)))
            .map(|(_, _, answer)| answer)
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

/// The index: base and delta, and the bookkeeping of catch-ups and rebuilds.
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
}

/// The index as it stood for one batch: the base, and the delta's answers for the batch's
/// hashes (`None` when the delta is empty).
pub struct FreshIndex {
    base: Arc<Snapshot>,
    overlay: Option<Vec<Option<Option<Answer>>>>,
}

impl FreshIndex {
    /// The record each hash of the batch this was made for names, if any, in order;
    /// superseded ones only when `historical`.
    pub fn get_batch(&self, batch: &[HashValue], historical: bool) -> Vec<Option<VendorMatch<'_>>> {
        let mut found = self.base.get_batch(batch);
        if let Some(overlay) = &self.overlay {
            for (m, answer) in found.iter_mut().zip(overlay) {
                if let Some(answer) = answer {
                    *m = match answer {
                        Some(Answer::Base(e)) => self.base.matched(*e),
                        Some(Answer::Record(r)) => Some(r.matched()),
                        None => None,
                    };
                }
            }
        }
        for m in &mut found {
            if m.is_some_and(|m| !historical && !m.current) {
                *m = None;
            }
        }
        found
    }
}

impl VendorIndex {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Option<State>> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Option<State>> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
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
            // Folded into a new base well before the delta costs much memory (a few hundred
            // bytes per record); rarely during an ingest, since a rebuild takes a core.
            state.delta.records.len() > (state.base.entries.len() / 8).max(1 << 16)
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

    /// Builds a new base from a full scan of the store, now, on this task, catches it up and
    /// swaps it in; the old one answers meanwhile. Returns the number of hashes indexed.
    pub async fn rebuild(&self, store: &Arc<dyn Store>) -> Result<usize, model::Error> {
        let started = Instant::now();
        // Read before the scan: a write that lands during the scan is applied after it.
        let epoch = store.records_epoch();
        let mut builder = Builder::default();
        let mut skipped = 0usize;
        let mut after: Option<String> = None;
        loop {
            let page = store.records_after(after.as_deref(), SCAN_PAGE).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.id.clone());
            for record in &page {
                if record.integrity_ok {
                    builder.add(record);
                } else {
                    skipped += 1;
                }
            }
        }
        let seed = std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), epoch);
        let snapshot = builder.finish(seed);
        let (records, hashes) = (snapshot.entries.len(), snapshot.hashes);
        let mut state = State::new(epoch, snapshot);
        // What was written during the scan, without blocking lookups; then the rest, and
        // the swap, under the lock that catch-ups take.
        state.catch_up(store, store.records_epoch()).await?;
        {
            let _updating = self.updating.lock().await;
            state.catch_up(store, store.records_epoch()).await?;
            // The old state's epoch was read from the store earlier: this one is no older.
            *self.write() = Some(state);
        }
        tracing::info!(
            records,
            hashes,
            skipped_integrity = skipped,
            epoch,
            ms = started.elapsed().as_millis() as u64,
            "vendor lookup index built"
        );
        Ok(hashes)
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

    fn snapshot(records: &[HashRecord]) -> Snapshot {
        let mut builder = Builder::default();
        for r in records {
            builder.add(r);
        }
        builder.finish(42)
    }

    fn names(s: &Snapshot, hashes: &[&str]) -> Vec<Option<String>> {
        let batch: Vec<HashValue> = hashes
            .iter()
            .map(|h| HashValue::parse(h).unwrap())
            .collect();
        s.get_batch(&batch)
            .into_iter()
            .map(|m| m.map(|m| format!("{} {} {}", m.vendor, m.executable_name, m.version)))
            .collect()
    }

    #[test]
    fn digests_sharing_their_first_eight_bytes_are_told_apart() {
        // Same tag, so the same home slot: the second is found by probing past the first.
        let a = format!("{}{}", "ab".repeat(8), "01".repeat(24));
        let b = format!("{}{}", "ab".repeat(8), "02".repeat(24));
        let c = format!("{}{}", "ab".repeat(8), "03".repeat(24));
        let s = snapshot(&[record(1, &a, None, true, 1), record(2, &b, None, true, 1)]);
        assert_eq!(
            names(&s, &[&b, &c, &a]),
            [
                Some("vendor0 tool2.exe 1.2".to_string()),
                None,
                Some("vendor1 tool1.exe 1.1".to_string()),
            ]
        );
    }

    #[test]
    fn a_shared_hash_names_the_current_then_the_newest_then_the_first_record() {
        let shared = "0f".repeat(32);
        let md5 = "e1".repeat(16);
        let old = record(1, &shared, Some(&md5), false, 1);
        let newer_superseded = record(2, &shared, None, false, 5);
        let current = record(3, &"aa".repeat(32), Some(&md5), true, 2);
        let tie = record(4, &"bb".repeat(32), Some(&md5), true, 2);
        let s = snapshot(&[old, newer_superseded, current, tie]);
        assert_eq!(
            names(&s, &[&shared, &md5]),
            [
                Some("vendor0 tool2.exe 1.2".to_string()),
                Some("vendor1 tool3.exe 1.3".to_string()),
            ]
        );
        assert_eq!(s.hashes, 4);
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
            let mut builder = Builder::default();
            for r in sorted.iter().filter(|r| r.integrity_ok) {
                builder.add(r);
            }
            let mut state = State::new(1, builder.finish(seed));
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

    #[test]
    fn an_empty_index_knows_nothing() {
        let s = snapshot(&[]);
        assert_eq!(names(&s, &[&"12".repeat(20)]), [None]);
    }
}
