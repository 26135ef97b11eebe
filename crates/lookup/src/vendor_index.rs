//! The vendor records in memory, for lookups.
//!
//! Classifying 100 hashes against the database costs about a millisecond of SQL and HMAC
//! checks; against this index it costs microseconds. The index maps every SHA-256, SHA-1 and
//! MD5 of a verified record to the record that hash names: current before superseded, then
//! the newest (the same choice the database path makes).
//!
//! It is built from a full scan of the store, in which every row's HMAC is verified as it is
//! read (records that fail are left out, and the store logs and counts them), and it is
//! tagged with the records epoch read *before* the scan. Lookups use it only while that
//! epoch is still the store's; otherwise they go to the database and ask for a rebuild in the
//! background. Writes through this process move the epoch at once, other replicas' writes
//! within one poll of the database counter (half a second), so a lookup never answers from a
//! view older than that. A rebuild starts no sooner after the previous one than that one
//! took, so a long ingest with lookups arriving keeps at most about half a core busy.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
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
}

impl<'a> From<&'a HashRecord> for VendorMatch<'a> {
    fn from(r: &'a HashRecord) -> Self {
        Self {
            vendor: &r.record.vendor,
            executable_name: &r.record.executable_name,
            version: &r.record.version,
            platform: r.record.platform,
            current: r.status == RecordStatus::Current,
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
    epoch: u64,
    slots: Vec<Slot>,
    /// `64 - log2(slots.len())`: a hash's home slot is the top bits of its mixed key.
    shift: u32,
    /// Per process and random, so that nobody can aim recorded hashes at one run of slots.
    seed: u64,
    entries: Vec<Entry>,
    text: Vec<u8>,
    vendors: Vec<Box<str>>,
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
                if self.entries[e as usize].rank() > self.entries[existing as usize].rank() {
                    self.slots[i].entry = e + 1;
                }
                return;
            }
            i = (i + 1) & (self.slots.len() - 1);
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
    hashes: usize,
}

impl Builder {
    fn add(&mut self, record: &HashRecord) {
        let r = &record.record;
        let (Ok(text), Ok(name_len), Ok(version_len)) = (
            u32::try_from(self.text.len()),
            u32::try_from(r.executable_name.len()),
            u32::try_from(r.version.len()),
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
        });
    }

    /// The table has at least 16 slots, never more than half of them used, so a probe
    /// always reaches an empty slot.
    fn finish(self, epoch: u64, seed: u64) -> Snapshot {
        let len = (self.hashes * 2).next_power_of_two().max(16);
        let mut snapshot = Snapshot {
            epoch,
            slots: huge_pages::filled(len, Slot::default()),
            shift: 64 - len.trailing_zeros(),
            seed,
            entries: huge_pages::copy(&self.entries),
            text: huge_pages::copy(&self.text),
            vendors: self.vendors,
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

/// The index: the latest build, and the bookkeeping of rebuilds.
#[derive(Default)]
pub struct VendorIndex {
    snapshot: ArcSwapOption<Snapshot>,
    rebuilding: AtomicBool,
    /// No rebuild starts before this instant.
    not_before: Mutex<Option<Instant>>,
}

/// A build of the index that matches the store's records epoch.
pub struct FreshIndex(Arc<Snapshot>);

impl FreshIndex {
    /// The record each hash names, if any, in order; superseded ones only when
    /// `historical`.
    pub fn get_batch(&self, batch: &[HashValue], historical: bool) -> Vec<Option<VendorMatch<'_>>> {
        let mut found = self.0.get_batch(batch);
        for m in &mut found {
            if m.is_some_and(|m| !historical && !m.current) {
                *m = None;
            }
        }
        found
    }
}

impl VendorIndex {
    /// The index if it reflects the store as this process knows it; otherwise `None`, and a
    /// rebuild is started in the background unless one is running or it is too soon.
    pub fn fresh(self: &Arc<Self>, store: &Arc<dyn Store>) -> Option<FreshIndex> {
        let epoch = store.records_epoch();
        match self.snapshot.load_full() {
            Some(s) if s.epoch == epoch => Some(FreshIndex(s)),
            _ => {
                self.rebuild_in_background(store);
                None
            }
        }
    }

    /// Starts a rebuild if the index is behind the store (see [`fresh`](Self::fresh)).
    pub fn catch_up(self: &Arc<Self>, store: &Arc<dyn Store>) {
        let _ = self.fresh(store);
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
                tracing::warn!(error = %e, "vendor lookup index rebuild failed; lookups use the database");
            }
            let took = started.elapsed();
            *index.not_before.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(Instant::now() + took.min(Duration::from_secs(60)));
            index.rebuilding.store(false, Ordering::Release);
        });
    }

    /// Builds the index from a full scan of the store, now, on this task. Returns the
    /// number of hashes indexed.
    pub async fn rebuild(&self, store: &Arc<dyn Store>) -> Result<usize, model::Error> {
        let started = Instant::now();
        // Read before the scan: a write that lands during the scan moves the epoch past
        // this one, so the build is stale at once rather than missing it unnoticed.
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
        let snapshot = builder.finish(epoch, seed);
        let hashes = snapshot.hashes;
        tracing::info!(
            records = snapshot.entries.len(),
            hashes,
            skipped_integrity = skipped,
            epoch,
            ms = started.elapsed().as_millis() as u64,
            "vendor lookup index built"
        );
        self.snapshot.store(Some(Arc::new(snapshot)));
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
            },
            family: format!("tool{id}"),
            status: if current {
                RecordStatus::Current
            } else {
                RecordStatus::Superseded
            },
            valid_from: Utc.with_ymd_and_hms(2026, 1, day, 0, 0, 0).unwrap(),
            valid_until: None,
            cert_revoked_at: None,
            integrity_ok: true,
        }
    }

    fn snapshot(records: &[HashRecord]) -> Snapshot {
        let mut builder = Builder::default();
        for r in records {
            builder.add(r);
        }
        builder.finish(1, 42)
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

    #[test]
    fn an_empty_index_knows_nothing() {
        let s = snapshot(&[]);
        assert_eq!(names(&s, &[&"12".repeat(20)]), [None]);
    }
}
