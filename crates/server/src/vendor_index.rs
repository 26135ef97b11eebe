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
use chrono::{DateTime, Utc};
use model::{HashAlgo, HashRecord, HashValue, Platform, RecordStatus};
use store::Store;

/// Records read per page of the scan.
const SCAN_PAGE: u32 = 5000;

/// What a lookup reports of a vendor record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorMatch {
    /// Shared by every record of the vendor.
    pub vendor: Arc<str>,
    /// The executable name followed by the version: one allocation, so a hit costs one
    /// memory access for its text rather than two (the index is far larger than the caches).
    name_version: Box<str>,
    name_len: usize,
    pub platform: Platform,
    pub current: bool,
    pub valid_from: DateTime<Utc>,
}

impl VendorMatch {
    fn from_record(r: &HashRecord, vendor: Arc<str>) -> Self {
        let name = &r.record.executable_name;
        Self {
            vendor,
            name_version: format!("{name}{}", r.record.version).into(),
            name_len: name.len(),
            platform: r.record.platform,
            current: r.status == RecordStatus::Current,
            valid_from: r.valid_from,
        }
    }

    pub fn executable_name(&self) -> &str {
        &self.name_version[..self.name_len]
    }

    pub fn version(&self) -> &str {
        &self.name_version[self.name_len..]
    }

    /// Which of two records a hash names.
    fn rank(&self) -> (bool, DateTime<Utc>) {
        (self.current, self.valid_from)
    }
}

impl From<&HashRecord> for VendorMatch {
    fn from(r: &HashRecord) -> Self {
        Self::from_record(r, r.record.vendor.as_str().into())
    }
}

/// The best verified record for `hash` among `records` (any that name it), as the database
/// path finds it. Between equals the smallest id wins, as in the index, which scans in id
/// order and lets a later record displace an earlier one only when it ranks higher.
pub fn best_match(hash: &HashValue, records: &[HashRecord]) -> Option<VendorMatch> {
    let rank = |r: &HashRecord| (r.status == RecordStatus::Current, r.valid_from);
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

/// Hashes a digest key by its first eight bytes, mixed with a per-process random seed.
/// Digests are already uniform, so this spreads keys as well as SipHash at a fraction of the
/// cost (SipHash was a tenth of a lookup request); the seed keeps anyone from aiming
/// submitted or recorded hashes at one bucket.
#[derive(Clone)]
struct DigestKeys {
    seed: u64,
}

impl Default for DigestKeys {
    fn default() -> Self {
        Self {
            seed: std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), 0u64),
        }
    }
}

impl std::hash::BuildHasher for DigestKeys {
    type Hasher = DigestHasher;

    fn build_hasher(&self) -> DigestHasher {
        DigestHasher(self.seed)
    }
}

struct DigestHasher(u64);

impl std::hash::Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut first = [0u8; 8];
        let n = bytes.len().min(8);
        first[..n].copy_from_slice(&bytes[..n]);
        self.0 ^= u64::from_le_bytes(first);
    }

    /// Every key of a map has the same length: nothing to mix in.
    fn write_usize(&mut self, _: usize) {}

    fn finish(&self) -> u64 {
        // A folded 64x64->128 multiply: every output bit depends on every input bit.
        let product = u128::from(self.0) * 0x9e37_79b9_7f4a_7c15_u128;
        (product as u64) ^ ((product >> 64) as u64)
    }
}

type DigestMap<const N: usize> = HashMap<[u8; N], u32, DigestKeys>;

/// One build of the index.
#[derive(Default)]
struct Snapshot {
    epoch: u64,
    sha256: DigestMap<32>,
    sha1: DigestMap<20>,
    md5: DigestMap<16>,
    matches: Vec<VendorMatch>,
}

impl Snapshot {
    fn get(&self, hash: &HashValue) -> Option<&VendorMatch> {
        fn key<const N: usize>(hex: &str) -> Option<[u8; N]> {
            let mut out = [0u8; N];
            hex::decode_to_slice(hex, &mut out).ok().map(|()| out)
        }
        let hex = hash.as_str();
        let slot = match hash.algo() {
            HashAlgo::Sha256 => self.sha256.get(&key(hex)?),
            HashAlgo::Sha1 => self.sha1.get(&key(hex)?),
            HashAlgo::Md5 => self.md5.get(&key(hex)?),
        }?;
        self.matches.get(*slot as usize)
    }

    /// Adds a verified record: each of its hashes names it unless a better record already
    /// has that hash.
    fn add(&mut self, record: &HashRecord, vendor: Arc<str>) {
        let m = VendorMatch::from_record(record, vendor);
        let Ok(slot) = u32::try_from(self.matches.len()) else {
            return;
        };
        let r = &record.record;
        let mut used = false;
        used |= claim(
            &mut self.sha256,
            Some(&r.hash_sha256),
            slot,
            &m,
            &self.matches,
        );
        used |= claim(
            &mut self.sha1,
            r.hash_sha1.as_deref(),
            slot,
            &m,
            &self.matches,
        );
        used |= claim(
            &mut self.md5,
            r.hash_md5.as_deref(),
            slot,
            &m,
            &self.matches,
        );
        if used {
            self.matches.push(m);
        }
    }
}

/// Points `hex`'s entry at `slot` (the record `m`, not yet in `matches`) unless the record
/// already there ranks higher; whether it did.
fn claim<const N: usize>(
    map: &mut DigestMap<N>,
    hex: Option<&str>,
    slot: u32,
    m: &VendorMatch,
    matches: &[VendorMatch],
) -> bool {
    let mut key = [0u8; N];
    let Some(hex) = hex else { return false };
    if hex::decode_to_slice(hex, &mut key).is_err() {
        return false;
    }
    match map.get_mut(&key) {
        Some(existing) if matches[*existing as usize].rank() >= m.rank() => false,
        Some(existing) => {
            *existing = slot;
            true
        }
        None => {
            map.insert(key, slot);
            true
        }
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
    /// The record `hash` names, if any; superseded ones only when `historical`.
    pub fn get(&self, hash: &HashValue, historical: bool) -> Option<&VendorMatch> {
        self.0.get(hash).filter(|m| historical || m.current)
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
        let mut snapshot = Snapshot {
            epoch,
            ..Snapshot::default()
        };
        let mut vendors: HashMap<String, Arc<str>> = HashMap::new();
        let mut skipped = 0usize;
        let mut after: Option<String> = None;
        loop {
            let page = store.records_after(after.as_deref(), SCAN_PAGE).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.id.clone());
            for record in &page {
                if !record.integrity_ok {
                    skipped += 1;
                    continue;
                }
                let vendor = vendors
                    .entry(record.record.vendor.clone())
                    .or_insert_with_key(|v| v.as_str().into())
                    .clone();
                snapshot.add(record, vendor);
            }
        }
        let hashes = snapshot.sha256.len() + snapshot.sha1.len() + snapshot.md5.len();
        tracing::info!(
            records = snapshot.matches.len(),
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
