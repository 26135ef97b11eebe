//! One immutable generation, mapped or loaded into memory, and its lookups.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};

use crate::error::{Error, IoContext, Result, bad_generation};
use crate::format::{self, GenerationInfo, MANIFEST, META_ROW_BYTES, Manifest};
use crate::hash::HashBytes;
use crate::index::Index;
use crate::prefetch::{prefetch, prefetch_range};
use crate::region::{Region, read_into};

/// How much of a generation is checked when it is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// Manifest, file sizes, table shapes and bucket tables.
    Sizes,
    /// All of the above plus the SHA-256 of every file (reads every byte once).
    Full,
}

/// Where the tables of an open generation live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// Memory-mapped files, shared with the page cache: opens at once and costs no memory
    /// of its own, but a probe can fault, misses the TLB (4 KiB pages) and may wait for the
    /// disk once the kernel has reclaimed pages it saw as cold. For tools and tests.
    Mapped,
    /// Read into anonymous memory backed by transparent huge pages: a few TLB entries cover
    /// the tables and, without swap, the kernel cannot reclaim them, so hot lookups stay at
    /// memory speed. Needs the generation's size in free memory (twice during a reload) and
    /// one read of every file at open.
    Resident,
}

/// How generations are opened.
#[derive(Clone, Copy, Debug)]
pub struct OpenOptions {
    /// Checks run on every generation opened (at start and on reload).
    pub verify: Verify,
    pub memory: Memory,
}

impl Default for OpenOptions {
    /// What a server wants: every file checked, tables resident.
    fn default() -> Self {
        OpenOptions {
            verify: Verify::Full,
            memory: Memory::Resident,
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
const ROUND: usize = 64;

/// Half-width of the first read, in standard deviations of a key's rank around its
/// interpolated position in an average bucket (`sqrt(rows per bucket) / 2`), plus one row:
/// about 1.6 + 1 leaves a second read to a few per cent of probes. Wider costs more than it
/// saves: every extra cache line adds to each lookup (measured at 10 million hashes).
const WINDOW: f64 = 0.8;

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
    /// Derived from the on-disk bucket table, which is too large (up to 64 MiB) to stay in
    /// the CPU cache: reading it would cost a memory access of its own.
    index: Index,
    /// Half-width in rows of the first read around the interpolated position (see
    /// [`WINDOW`]).
    window: usize,
    key_len: usize,
    row_len: usize,
}

/// The first eight bytes of a key as a big-endian number (shorter keys padded with zeros).
#[inline]
fn prefix(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = key.len().min(8);
    bytes[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(bytes)
}

impl Table {
    /// The key's bucket as a row range, and where in it the key would sit if the keys were
    /// evenly spread (hash values are uniform, so they nearly are).
    #[inline]
    fn locate(&self, key: &[u8]) -> Option<(usize, usize, usize)> {
        self.index.locate(prefix(key))
    }

    /// The rows read first: the window around the guess, inside the bucket.
    #[inline]
    fn window(&self, lo: usize, hi: usize, guess: usize) -> (usize, usize) {
        (
            guess.saturating_sub(self.window).max(lo),
            guess.saturating_add(self.window + 1).min(hi),
        )
    }

    #[inline]
    fn key_at(&self, i: usize) -> Option<&[u8]> {
        let at = i.checked_mul(self.row_len)?;
        self.rows.bytes().get(at..at.checked_add(self.key_len)?)
    }

    /// The metadata row of table row `i`.
    #[inline]
    fn pointer(&self, i: usize) -> Option<usize> {
        if self.row_len == self.key_len {
            return Some(i);
        }
        let at = i.checked_mul(self.row_len)? + self.key_len;
        let p = self.rows.bytes().get(at..at + 4)?;
        Some(u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize)
    }

    /// Finds the key in bucket rows `lo..hi` (sorted), scanning the window `a..b` first and
    /// the rest of the bucket only when the key lies beyond it. Returns the metadata row.
    fn find(&self, key: &[u8], (lo, hi): (usize, usize), (a, b): (usize, usize)) -> Option<usize> {
        // Keys are uniform, so their first eight bytes, compared as one number, nearly
        // always decide; the rest is compared only when those are equal.
        let head = prefix(key);
        for i in a..b {
            let row = self.key_at(i)?;
            match prefix(row).cmp(&head).then_with(|| row.cmp(key)) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return self.pointer(i),
                std::cmp::Ordering::Greater if i == a && a > lo => {
                    return self.bisect(key, lo, a);
                }
                std::cmp::Ordering::Greater => return None,
            }
        }
        if b < hi {
            self.bisect(key, b, hi)
        } else {
            None
        }
    }

    fn bisect(&self, key: &[u8], mut lo: usize, mut hi: usize) -> Option<usize> {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.key_at(mid)?.cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return self.pointer(mid),
            }
        }
        None
    }
}

impl Generation {
    /// Opens and checks a generation directory, memory-mapped (see [`Verify`]).
    pub fn open(dir: &Path, verify: Verify) -> Result<Generation> {
        Self::open_with(
            dir,
            &OpenOptions {
                verify,
                memory: Memory::Mapped,
            },
        )
    }

    pub fn open_with(dir: &Path, options: &OpenOptions) -> Result<Generation> {
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
        let mut resident = 0u64;
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
            if !name.ends_with(".buckets") {
                resident += info.bytes;
            }
        }
        if options.memory == Memory::Resident {
            check_memory(dir, resident, mem_available())?;
        }
        let opener = Opener {
            dir,
            manifest: &manifest,
            options,
        };
        let generation = Generation {
            dir: dir.to_path_buf(),
            sha256: opener.table("sha256", 32, 32)?,
            sha1: opener.table("sha1", 20, 24)?,
            md5: opener.table("md5", 16, 20)?,
            meta: opener.region(format::META_ROWS)?,
            strings: opener.region(format::STRINGS)?,
            manifest,
            retired: AtomicBool::new(false),
        };
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

    /// Every distinct digest of one algorithm, in table (sorted) order: what the offline
    /// bundle's filters are built from.
    pub fn keys(&self, alg: crate::HashAlg) -> impl Iterator<Item = &[u8]> + Clone + '_ {
        let table = match alg {
            crate::HashAlg::Sha256 => &self.sha256,
            crate::HashAlg::Sha1 => &self.sha1,
            crate::HashAlg::Md5 => &self.md5,
        };
        let rows = table.rows.bytes().len() / table.row_len.max(1);
        (0..rows).filter_map(move |i| table.key_at(i))
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
        let (lo, hi, guess) = table.locate(key)?;
        let (a, b) = table.window(lo, hi, guess);
        // Ask for all the window's lines at once rather than one miss after another.
        prefetch_range(table.rows.bytes(), a * table.row_len, b * table.row_len);
        if let HashBytes::Sha256(_) = hash {
            // SHA-256 row i is metadata row i: fetch the window's metadata while the rows
            // are scanned, rather than after.
            prefetch_range(self.meta.bytes(), a * META_ROW_BYTES, b * META_ROW_BYTES);
        }
        self.entry(table.find(key, (lo, hi), (a, b))?)
    }

    /// Looks up many hashes, overlapping their memory accesses: each step (index entry,
    /// rows, metadata row, strings) is prefetched for a whole round before it is read. For
    /// SHA-256 the window's metadata comes with its rows, as in [`lookup`](Self::lookup):
    /// a few more lines per hash, but one fewer step that waits for DRAM.
    pub fn lookup_batch(&self, hashes: &[HashBytes]) -> Vec<Option<Entry<'_>>> {
        let mut out = Vec::with_capacity(hashes.len());
        for round in hashes.chunks(ROUND) {
            let mut prefixes = [0u64; ROUND];
            for (i, h) in round.iter().enumerate() {
                prefixes[i] = prefix(h.as_bytes());
                self.table(h).index.prefetch(prefixes[i]);
            }
            let mut spans = [((0usize, 0usize), (0usize, 0usize)); ROUND];
            for (i, h) in round.iter().enumerate() {
                let t = self.table(h);
                if let Some((lo, hi, guess)) = t.index.locate(prefixes[i]) {
                    let (a, b) = t.window(lo, hi, guess);
                    spans[i] = ((lo, hi), (a, b));
                    prefetch_range(t.rows.bytes(), a * t.row_len, b * t.row_len);
                    if let HashBytes::Sha256(_) = h {
                        prefetch_range(self.meta.bytes(), a * META_ROW_BYTES, b * META_ROW_BYTES);
                    }
                }
            }
            let mut found = [usize::MAX; ROUND];
            for (i, h) in round.iter().enumerate() {
                let (bucket, window) = spans[i];
                if let Some(index) = self.table(h).find(h.as_bytes(), bucket, window) {
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

/// What opening needs besides the directory: the checked manifest and the options.
struct Opener<'a> {
    dir: &'a Path,
    manifest: &'a Manifest,
    options: &'a OpenOptions,
}

impl Opener<'_> {
    fn expected(&self, name: &str) -> Result<&format::FileInfo> {
        self.manifest
            .files
            .get(name)
            .ok_or_else(|| bad_generation(self.dir, format!("{name} missing from the manifest")))
    }

    fn check_sum(&self, name: &str, hasher: Option<Sha256>) -> Result<()> {
        let Some(hasher) = hasher else {
            return Ok(());
        };
        if hex::encode(hasher.finalize()) == self.expected(name)?.sha256 {
            Ok(())
        } else {
            Err(bad_generation(
                self.dir,
                format!("{name}: checksum mismatch"),
            ))
        }
    }

    fn hasher(&self) -> Option<Sha256> {
        (self.options.verify == Verify::Full).then(Sha256::new)
    }

    /// A data file, mapped or loaded as the options say, its checksum verified if asked.
    fn region(&self, name: &str) -> Result<Region> {
        let path = self.dir.join(name);
        match self.options.memory {
            Memory::Mapped => {
                if self.options.verify == Verify::Full
                    && file_sha256(&path)? != self.expected(name)?.sha256
                {
                    return Err(bad_generation(
                        self.dir,
                        format!("{name}: checksum mismatch"),
                    ));
                }
                Region::map(&path)
            }
            Memory::Resident => {
                let mut hasher = self.hasher();
                let len = self.expected(name)?.bytes;
                let region = Region::load(self.dir, &path, len, hasher.as_mut())?;
                self.check_sum(name, hasher)?;
                Ok(region)
            }
        }
    }

    /// A key table: its rows, and the in-memory index derived from its bucket file (read
    /// once, checked, then dropped: lookups do not need it).
    fn table(&self, stem: &str, key_len: usize, row_len: usize) -> Result<Table> {
        let Some(shape) = self.manifest.table(stem) else {
            return Err(bad_generation(self.dir, format!("no {stem} table")));
        };
        let name = format::buckets_file(stem);
        let path = self.dir.join(&name);
        let len = usize::try_from(self.expected(&name)?.bytes)
            .map_err(|_| bad_generation(self.dir, format!("{name} is too large")))?;
        let mut buckets = vec![0u8; len];
        let mut hasher = self.hasher();
        read_into(
            &mut File::open(&path).at(&path)?,
            &path,
            &mut buckets,
            hasher.as_mut(),
        )?;
        self.check_sum(&name, hasher)?;
        let starts = bucket_starts(self.dir, stem, &buckets, shape.rows)?;
        drop(buckets);
        let index = Index::new(self.dir, &starts, shape.bucket_bits)?;
        let per_bucket = shape.rows as f64 / index.buckets() as f64;
        Ok(Table {
            rows: self.region(&format::rows_file(stem))?,
            index,
            window: (WINDOW * per_bucket.sqrt()).ceil() as usize + 1,
            key_len,
            row_len,
        })
    }
}

/// Decodes a bucket file and checks that its starts run from 0 to the row count without
/// going down; then every lookup stays inside the rows.
fn bucket_starts(dir: &Path, stem: &str, bytes: &[u8], rows: u64) -> Result<Vec<u32>> {
    let starts: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if starts.windows(2).any(|w| w[0] > w[1]) {
        return Err(bad_generation(
            dir,
            format!("{stem}: bucket table out of order"),
        ));
    }
    if starts.first() != Some(&0) || starts.last().map(|&s| u64::from(s)) != Some(rows) {
        return Err(bad_generation(
            dir,
            format!("{stem}: bucket table does not cover the rows"),
        ));
    }
    Ok(starts)
}

/// Fails clearly, before allocating, when the resident tables cannot fit: otherwise the
/// kernel would grant the memory and kill the process while the files are read.
fn check_memory(dir: &Path, needed: u64, available: Option<u64>) -> Result<()> {
    match available {
        Some(available) if needed > available => Err(Error::NoMemory {
            dir: dir.to_path_buf(),
            needed,
            detail: format!("{available} bytes available"),
        }),
        _ => Ok(()),
    }
}

/// `MemAvailable` of `/proc/meminfo` in bytes, if the system tells.
fn mem_available() -> Option<u64> {
    parse_mem_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let meminfo = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(parse_mem_available(meminfo), Some(2048 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: lots\n"), None);
    }

    #[test]
    fn too_little_memory_is_a_clear_error() {
        let dir = Path::new("/corpus/gen-00000001");
        assert!(check_memory(dir, 100, Some(100)).is_ok());
        assert!(check_memory(dir, 100, None).is_ok());
        let e = check_memory(dir, 101, Some(100)).unwrap_err();
        assert!(matches!(e, Error::NoMemory { needed: 101, .. }), "{e}");
        assert!(e.to_string().contains("Memory::Mapped"), "{e}");
    }

    #[test]
    fn interpolation_finds_keys_outside_the_window() {
        // 64 sorted keys crowded at the start, then at the end, of one bucket: the
        // interpolated guess lands far from most of them, so the search must go past its
        // window, after it or before it.
        for first in [0x00u8, 0x7f] {
            let key = |i: u8, extra: u8| {
                let mut key = [0u8; 16];
                key[0] = first;
                key[1] = if first == 0 { i } else { 0xc0 + i };
                key[2] = extra;
                key
            };
            let bytes: Vec<u8> = (0..64).flat_map(|i| key(i, 0)).collect();
            let table = Table {
                rows: Region::copy_of(Path::new("/"), &bytes).unwrap(),
                index: Index::new(Path::new("/"), &[0, 64, 64], 1).unwrap(),
                window: 2,
                key_len: 16,
                row_len: 16,
            };
            let find = |key: &[u8]| {
                let (lo, hi, guess) = table.locate(key).unwrap();
                table.find(key, (lo, hi), table.window(lo, hi, guess))
            };
            for i in 0..64u8 {
                assert_eq!(find(&key(i, 0)), Some(usize::from(i)), "{first} {i}");
                assert_eq!(find(&key(i, 1)), None);
            }
            assert_eq!(find(&[0u8; 16]), if first == 0 { Some(0) } else { None });
            assert_eq!(find(&[0xffu8; 16]), None, "an empty bucket");
        }
    }
}
