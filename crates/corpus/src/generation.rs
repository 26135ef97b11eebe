//! One immutable, memory-mapped generation and its lookups.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use memmap2::{Advice, Mmap};
use sha2::{Digest, Sha256};

use crate::error::{Error, IoContext, Result, bad_generation};
use crate::format::{self, GenerationInfo, MANIFEST, META_ROW_BYTES, Manifest};
use crate::hash::HashBytes;

/// How much of a generation is checked when it is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// Manifest, file sizes, table shapes and bucket tables.
    Sizes,
    /// All of the above plus the SHA-256 of every file (reads every byte once).
    Full,
}

/// How generations are opened.
#[derive(Clone, Copy, Debug)]
pub struct OpenOptions {
    /// Checks run on every generation opened (at start and on reload).
    pub verify: Verify,
    /// `mlock` the files: lookups never wait for the disk, even when the kernel reclaims
    /// page cache it sees as cold (a table probed at random looks cold page by page). Needs
    /// the memory (the generation's size) and a large enough `RLIMIT_MEMLOCK`.
    pub lock_in_memory: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            verify: Verify::Full,
            lock_in_memory: false,
        }
    }
}

/// What the corpus knows about a hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// `nsrl_minimal`, `nsrl_full`, `nsrl_android`, ...
    pub source: &'a str,
    pub file_name: &'a str,
    pub product_name: &'a str,
}

/// Hashes per round of the batch lookup: enough independent memory accesses in flight,
/// small enough for stack arrays.
const ROUND: usize = 32;

pub struct Generation {
    dir: PathBuf,
    manifest: Manifest,
    sha256: Table,
    sha1: Table,
    md5: Table,
    meta: Region,
    strings: Region,
    /// Set when a newer generation replaced this one: the directory goes with the last `Arc`.
    retired: AtomicBool,
}

struct Table {
    rows: Region,
    buckets: Region,
    bits: u32,
    key_len: usize,
    row_len: usize,
}

/// A mapped file; empty files cannot be mapped.
enum Region {
    Map(Mmap),
    Empty,
}

impl Region {
    fn open(path: &Path, lock: bool) -> Result<Region> {
        let file = File::open(path).at(path)?;
        if file.metadata().at(path)?.len() == 0 {
            return Ok(Region::Empty);
        }
        // SAFETY: generation files are never modified after they are renamed into place
        // (new data always goes to a new generation directory), so the mapping stays valid;
        // deleting the directory does not invalidate an existing mapping on Linux.
        let map = unsafe { Mmap::map(&file) }.at(path)?;
        // Lookups touch a few bytes at random: read-ahead would only waste memory.
        let _ = map.advise(Advice::Random);
        if lock {
            map.lock().map_err(|e| Error::Io {
                path: path.to_path_buf(),
                source: std::io::Error::new(
                    e.kind(),
                    format!("cannot lock in memory ({e}); raise RLIMIT_MEMLOCK or open without lock_in_memory"),
                ),
            })?;
        }
        Ok(Region::Map(map))
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Region::Map(m) => m,
            Region::Empty => &[],
        }
    }
}

impl Table {
    fn bucket_start(&self, bucket: usize) -> Option<usize> {
        let b = self.buckets.bytes().get(bucket * 4..bucket * 4 + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    /// Row range of the key's bucket.
    fn range(&self, key: &[u8]) -> Option<(usize, usize)> {
        let bucket = format::bucket_of(key, self.bits);
        Some((self.bucket_start(bucket)?, self.bucket_start(bucket + 1)?))
    }

    /// Scans the bucket's rows (sorted) for the key; returns the metadata row index.
    fn search(&self, key: &[u8], lo: usize, hi: usize) -> Option<usize> {
        let rows = self.rows.bytes();
        for i in lo..hi {
            let row = rows.get(i * self.row_len..(i + 1) * self.row_len)?;
            match row[..self.key_len].cmp(key) {
                std::cmp::Ordering::Less => continue,
                std::cmp::Ordering::Greater => return None,
                std::cmp::Ordering::Equal => {
                    if self.row_len == self.key_len {
                        return Some(i);
                    }
                    let p = &row[self.key_len..];
                    return Some(u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize);
                }
            }
        }
        None
    }
}

/// Prefetches every cache line of `bytes[start..end]`.
#[inline(always)]
fn prefetch_range(bytes: &[u8], start: usize, end: usize) {
    let mut at = start;
    while at < end {
        prefetch(bytes, at);
        at += 64;
    }
    prefetch(bytes, end.saturating_sub(1));
}

#[inline(always)]
fn prefetch(bytes: &[u8], offset: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(p) = bytes.get(offset) {
        // SAFETY: a prefetch is a hint that cannot fault; SSE is part of the x86_64 baseline
        // and the pointer comes from a live slice.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (p as *const u8).cast::<i8>(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, offset);
}

impl Generation {
    /// Opens and checks a generation directory (see [`Verify`]).
    pub fn open(dir: &Path, verify: Verify) -> Result<Generation> {
        Self::open_with(
            dir,
            &OpenOptions {
                verify,
                lock_in_memory: false,
            },
        )
    }

    pub fn open_with(dir: &Path, options: &OpenOptions) -> Result<Generation> {
        let (verify, lock) = (options.verify, options.lock_in_memory);
        let manifest_path = dir.join(MANIFEST);
        let len = std::fs::metadata(&manifest_path).at(&manifest_path)?.len();
        if len > 64 << 20 {
            return Err(bad_generation(dir, "manifest.json is implausibly large"));
        }
        let text = std::fs::read(&manifest_path).at(&manifest_path)?;
        let manifest: Manifest = serde_json::from_slice(&text)
            .map_err(|e| bad_generation(dir, format!("manifest.json: {e}")))?;
        if manifest.format_version != format::FORMAT_VERSION {
            return Err(bad_generation(
                dir,
                format!(
                    "format version {} (expected {})",
                    manifest.format_version,
                    format::FORMAT_VERSION
                ),
            ));
        }
        let dir_name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        if dir_name.as_deref() != Some(manifest.generation.as_str()) {
            return Err(bad_generation(
                dir,
                format!("manifest names generation {:?}", manifest.generation),
            ));
        }
        if manifest.sources.is_empty() || manifest.sources.len() > 256 {
            return Err(bad_generation(dir, "bad source list"));
        }
        check_shapes(dir, &manifest)?;
        for name in format::data_files() {
            let path = dir.join(&name);
            let Some(info) = manifest.files.get(&name) else {
                return Err(bad_generation(
                    dir,
                    format!("{name} missing from the manifest"),
                ));
            };
            let actual = std::fs::metadata(&path).at(&path)?.len();
            if actual != info.bytes {
                return Err(bad_generation(
                    dir,
                    format!("{name}: {actual} bytes, manifest says {}", info.bytes),
                ));
            }
            if verify == Verify::Full && file_sha256(&path)? != info.sha256 {
                return Err(bad_generation(dir, format!("{name}: checksum mismatch")));
            }
        }
        let table = |stem: &str, key_len: usize, row_len: usize| -> Result<Table> {
            let bits = manifest.table(stem).map_or(1, |t| t.bucket_bits);
            Ok(Table {
                rows: Region::open(&dir.join(format::rows_file(stem)), lock)?,
                buckets: Region::open(&dir.join(format::buckets_file(stem)), lock)?,
                bits,
                key_len,
                row_len,
            })
        };
        let generation = Generation {
            dir: dir.to_path_buf(),
            sha256: table("sha256", 32, 32)?,
            sha1: table("sha1", 20, 24)?,
            md5: table("md5", 16, 20)?,
            meta: Region::open(&dir.join(format::META_ROWS), lock)?,
            strings: Region::open(&dir.join(format::STRINGS), lock)?,
            manifest,
            retired: AtomicBool::new(false),
        };
        for (stem, t) in [
            ("sha256", &generation.sha256),
            ("sha1", &generation.sha1),
            ("md5", &generation.md5),
        ] {
            let rows = generation.manifest.table(stem).map_or(0, |t| t.rows) as usize;
            check_buckets(dir, stem, t, rows)?;
        }
        Ok(generation)
    }

    /// Directory name, `gen-<seq>`.
    pub fn name(&self) -> &str {
        &self.manifest.generation
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Distinct SHA-256 values.
    pub fn len(&self) -> u64 {
        self.manifest.entries
    }

    pub fn is_empty(&self) -> bool {
        self.manifest.entries == 0
    }

    pub fn info(&self) -> GenerationInfo {
        self.manifest.info()
    }

    fn table(&self, hash: &HashBytes) -> &Table {
        match hash {
            HashBytes::Sha256(_) => &self.sha256,
            HashBytes::Sha1(_) => &self.sha1,
            HashBytes::Md5(_) => &self.md5,
        }
    }

    pub fn lookup(&self, hash: &HashBytes) -> Option<Entry<'_>> {
        let table = self.table(hash);
        let key = hash.as_bytes();
        let (lo, hi) = table.range(key)?;
        // Ask for all the bucket's lines at once rather than one miss after another.
        prefetch_range(table.rows.bytes(), lo * table.row_len, hi * table.row_len);
        if let HashBytes::Sha256(_) = hash {
            // SHA-256 row i is metadata row i: fetch the bucket's metadata while the rows
            // are scanned, rather than after.
            prefetch_range(self.meta.bytes(), lo * META_ROW_BYTES, hi * META_ROW_BYTES);
        }
        self.entry(table.search(key, lo, hi)?)
    }

    /// Looks up many hashes, overlapping their memory accesses: each step (bucket entry,
    /// rows, metadata row, strings) is prefetched for a whole round before it is read.
    pub fn lookup_batch(&self, hashes: &[HashBytes]) -> Vec<Option<Entry<'_>>> {
        let mut out = Vec::with_capacity(hashes.len());
        for round in hashes.chunks(ROUND) {
            let mut buckets = [0usize; ROUND];
            for (i, h) in round.iter().enumerate() {
                let t = self.table(h);
                buckets[i] = format::bucket_of(h.as_bytes(), t.bits);
                prefetch(t.buckets.bytes(), buckets[i] * 4);
            }
            let mut ranges = [(0usize, 0usize); ROUND];
            for (i, h) in round.iter().enumerate() {
                let t = self.table(h);
                if let (Some(lo), Some(hi)) =
                    (t.bucket_start(buckets[i]), t.bucket_start(buckets[i] + 1))
                {
                    ranges[i] = (lo, hi);
                    prefetch_range(t.rows.bytes(), lo * t.row_len, hi * t.row_len);
                }
            }
            let mut found = [usize::MAX; ROUND];
            for (i, h) in round.iter().enumerate() {
                let (lo, hi) = ranges[i];
                if let Some(index) = self.table(h).search(h.as_bytes(), lo, hi) {
                    found[i] = index;
                    prefetch(self.meta.bytes(), index * META_ROW_BYTES);
                }
            }
            for &index in found.iter().take(round.len()) {
                if let Some((_, name, product)) = self.meta_row(index) {
                    prefetch(self.strings.bytes(), name as usize);
                    prefetch(self.strings.bytes(), product as usize);
                }
            }
            out.extend(
                found
                    .iter()
                    .take(round.len())
                    .map(|&index| self.entry(index)),
            );
        }
        out
    }

    fn meta_row(&self, index: usize) -> Option<(u8, u64, u64)> {
        let row = self
            .meta
            .bytes()
            .get(index.checked_mul(META_ROW_BYTES)?..)?
            .get(..META_ROW_BYTES)?;
        let product = u32::from_le_bytes([row[6], row[7], row[8], row[9]]);
        Some((row[0], format::get_u40(&row[1..6]), u64::from(product)))
    }

    fn entry(&self, index: usize) -> Option<Entry<'_>> {
        let (source, name, product) = self.meta_row(index)?;
        Some(Entry {
            source: self.manifest.sources.get(source as usize)?.source.as_str(),
            file_name: self.string(name),
            product_name: self.string(product),
        })
    }

    /// A pool string; a damaged pool gives "" rather than a panic.
    fn string(&self, offset: u64) -> &str {
        let read = || -> Option<&str> {
            let at = self.strings.bytes().get(usize::try_from(offset).ok()?..)?;
            let (len, used) = format::get_varint(at)?;
            let bytes = at.get(used..used.checked_add(usize::try_from(len).ok()?)?)?;
            std::str::from_utf8(bytes).ok()
        };
        read().unwrap_or("")
    }

    /// The directory is deleted when the last reference to this generation drops.
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        if self.retired.load(Ordering::SeqCst) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl std::fmt::Debug for Generation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generation")
            .field("dir", &self.dir)
            .field("entries", &self.manifest.entries)
            .finish()
    }
}

fn check_shapes(dir: &Path, m: &Manifest) -> Result<()> {
    let size = |name: &str| m.files.get(name).map(|f| f.bytes);
    let expect = |name: String, bytes: Option<u64>| -> Result<()> {
        if bytes.is_some() && size(&name) == bytes {
            Ok(())
        } else {
            Err(bad_generation(
                dir,
                format!("{name} has the wrong size for its table"),
            ))
        }
    };
    if m.sha256.rows != m.entries
        || m.entries >= u64::from(u32::MAX)
        || m.sha1.rows > m.entries
        || m.md5.rows > m.entries
    {
        return Err(bad_generation(dir, "inconsistent row counts"));
    }
    for (stem, _, row_len) in format::TABLES {
        let Some(t) = m.table(stem) else {
            return Err(bad_generation(dir, format!("no {stem} table")));
        };
        if !(1..=format::MAX_BUCKET_BITS).contains(&t.bucket_bits) {
            return Err(bad_generation(
                dir,
                format!("{stem}: bad bucket bits {}", t.bucket_bits),
            ));
        }
        expect(format::rows_file(stem), t.rows.checked_mul(row_len as u64))?;
        expect(
            format::buckets_file(stem),
            Some(((1u64 << t.bucket_bits) + 1) * 4),
        )?;
    }
    expect(
        format::META_ROWS.to_string(),
        m.entries.checked_mul(META_ROW_BYTES as u64),
    )
}

/// Bucket starts must run from 0 to the row count without going down; then every lookup
/// stays inside the rows.
fn check_buckets(dir: &Path, stem: &str, t: &Table, rows: usize) -> Result<()> {
    let mut previous = 0usize;
    for chunk in t.buckets.bytes().chunks_exact(4) {
        let start = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) as usize;
        if start < previous || start > rows {
            return Err(bad_generation(
                dir,
                format!("{stem}: bucket table out of order"),
            ));
        }
        previous = start;
    }
    if t.bucket_start(0) != Some(0) || previous != rows {
        return Err(bad_generation(
            dir,
            format!("{stem}: bucket table does not cover the rows"),
        ));
    }
    Ok(())
}

fn file_sha256(path: &Path) -> Result<String> {
    let mut file = File::open(path).at(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).at(path)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}
