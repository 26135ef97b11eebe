//! RDS v3 databases -> a new generation directory (see the crate docs for the steps).

use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasherDefault, DefaultHasher, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::GenerationInfo;
use crate::corpus;
use crate::error::{Error, IoContext, Result};
use crate::format::{self, FileInfo, InputInfo, META_ROW_BYTES, Manifest, SourceCount, TableInfo};
use crate::generation::{Generation, Verify};
use crate::hash::decode_hex;
use crate::progress::{Phase, Progress};
use crate::rds::{Layout, RdsInput, SetName};
use crate::sort::{Candidate, FixedSorter, RowBuffer, merge_runs};

/// How often (in rows) progress is reported and cancellation checked.
const PROGRESS_EVERY: u64 = 1 << 16;
const MIN_BUDGET: usize = 64 << 20;

#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// Bytes for the sort buffers and the file-name de-duplication map. The process peak is
    /// about this plus 300 MB (bucket counters, I/O buffers, SQLite's cache).
    pub memory_budget: usize,
    /// Recorded in the manifest; `None` = now.
    pub imported_at: Option<DateTime<Utc>>,
    /// How the finished generation is checked before it is published.
    pub verify: Verify,
    /// Point `CURRENT` at the new generation when done.
    pub publish: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            memory_budget: 3 << 30,
            imported_at: None,
            verify: Verify::Full,
            publish: true,
        }
    }
}

/// Imports RDS v3 databases into a new generation under `out_root` and makes it current.
pub fn import(
    inputs: &[(PathBuf, SetName)],
    out_root: &Path,
    progress: &dyn Progress,
) -> Result<GenerationInfo> {
    import_with(inputs, out_root, &ImportOptions::default(), progress)
}

pub fn import_with(
    inputs: &[(PathBuf, SetName)],
    out_root: &Path,
    options: &ImportOptions,
    progress: &dyn Progress,
) -> Result<GenerationInfo> {
    if inputs.is_empty() {
        return Err(Error::NoInputs);
    }
    // Every input is opened and recognised before anything is written.
    let opened = inputs
        .iter()
        .map(|(path, set)| Ok((RdsInput::open(path)?, *set)))
        .collect::<Result<Vec<_>>>()?;
    let sources = Sources::new(&opened);
    let products = Products::new(&opened)?;
    let rds_versions = rds_versions(&opened)?;

    std::fs::create_dir_all(out_root).at(out_root)?;
    let _lock = corpus::lock_import(out_root)?;
    let seq = corpus::next_seq(out_root)?;
    let name = corpus::generation_name(seq);
    let tmp = TempDir::create(out_root.join(format!(".tmp-{name}")))?;
    let runs_dir = tmp.path.join("runs");
    std::fs::create_dir(&runs_dir).at(&runs_dir)?;

    let budget = options.memory_budget.max(MIN_BUDGET);
    let (runs, input_rows) =
        read_inputs(&opened, &sources, &products, &runs_dir, budget, progress)?;
    let mut manifest = write_tables(&tmp.path, &runs, &sources, &products, budget, progress)?;
    std::fs::remove_dir_all(&runs_dir).at(&runs_dir)?;

    manifest.generation = name.clone();
    manifest.imported_at = options.imported_at.unwrap_or_else(Utc::now);
    manifest.rds_versions = rds_versions;
    manifest.inputs = opened
        .iter()
        .zip(&input_rows)
        .map(|((input, set), rows)| InputInfo {
            file: file_label(&input.path),
            source: set.source(input.layout),
            layout: input.layout.as_str().to_string(),
            file_rows: *rows,
        })
        .collect();
    write_manifest(&tmp.path, &manifest)?;
    corpus::sync_dir(&tmp.path)?;

    let final_dir = out_root.join(&name);
    std::fs::rename(&tmp.path, &final_dir).at(&final_dir)?;
    tmp.disarm();
    corpus::sync_dir(out_root)?;

    // Past the rename the import is complete: a cancel request here is too late to honour.
    progress.update(Phase::Verifying, 0, None);
    let generation = match Generation::open(&final_dir, options.verify) {
        Ok(g) => g,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&final_dir);
            return Err(e);
        }
    };
    if options.publish {
        corpus::write_current(out_root, &name)?;
    }
    Ok(generation.info())
}

/// One entry per `VERSION` row of each input (one with only the file when it has none).
fn rds_versions(inputs: &[(RdsInput, SetName)]) -> Result<Vec<format::RdsVersion>> {
    let mut out = Vec::new();
    for (input, set) in inputs {
        let base = format::RdsVersion {
            file: file_label(&input.path),
            source: set.source(input.layout),
            layout: input.layout.as_str().to_string(),
            ..Default::default()
        };
        let versions = input.versions()?;
        if versions.is_empty() {
            out.push(base);
            continue;
        }
        for v in versions {
            out.push(format::RdsVersion {
                file: base.file.clone(),
                source: base.source.clone(),
                layout: base.layout.clone(),
                ..v
            });
        }
    }
    Ok(out)
}

fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<()> {
    let path = dir.join(format::MANIFEST);
    let json = serde_json::to_vec_pretty(manifest).map_err(|e| Error::Io {
        path: path.clone(),
        source: e.into(),
    })?;
    let mut file = File::create(&path).at(&path)?;
    file.write_all(&json).at(&path)?;
    file.sync_all().at(&path)
}

fn file_label(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Source precedence: full layout before minimal, then modern, android, ios, legacy.
struct Sources {
    /// Rank of each input (0 = richest).
    rank_of_input: Vec<u8>,
    /// Source id (index into `names`) of each rank.
    id_of_rank: Vec<u8>,
    /// Source names ordered by precedence; the manifest's source list.
    names: Vec<String>,
}

impl Sources {
    fn new(inputs: &[(RdsInput, SetName)]) -> Sources {
        let key = |layout: Layout, set: SetName| (layout != Layout::Full, set);
        let mut kinds: Vec<(bool, SetName)> =
            inputs.iter().map(|(i, s)| key(i.layout, *s)).collect();
        kinds.sort_unstable();
        kinds.dedup();
        let mut names: Vec<String> = Vec::new();
        let mut id_of_rank = Vec::new();
        for &(minimal, set) in &kinds {
            let layout = if minimal {
                Layout::Minimal
            } else {
                Layout::Full
            };
            let source = set.source(layout);
            let id = match names.iter().position(|n| *n == source) {
                Some(id) => id,
                None => {
                    names.push(source);
                    names.len() - 1
                }
            };
            id_of_rank.push(id as u8);
        }
        let rank_of_input = inputs
            .iter()
            .map(|(i, s)| {
                kinds
                    .iter()
                    .position(|k| *k == key(i.layout, *s))
                    .unwrap_or(0) as u8
            })
            .collect();
        Sources {
            rank_of_input,
            id_of_rank,
            names,
        }
    }
}

/// Product strings of all inputs, sorted so that id order is byte order.
struct Products {
    strings: Vec<String>,
    /// Per input: package_id -> product id.
    ids: Vec<HashMap<i64, u32>>,
    /// Id of "" (packages without a PKG row).
    empty: u32,
}

impl Products {
    fn new(inputs: &[(RdsInput, SetName)]) -> Result<Products> {
        let per_input = inputs
            .iter()
            .map(|(i, _)| i.products())
            .collect::<Result<Vec<_>>>()?;
        let mut strings: Vec<String> = per_input.iter().flat_map(|m| m.values().cloned()).collect();
        strings.push(String::new());
        strings.sort_unstable();
        strings.dedup();
        let id = |s: &str| strings.binary_search_by(|p| p.as_str().cmp(s)).unwrap_or(0) as u32;
        let ids = per_input
            .iter()
            .map(|m| m.iter().map(|(pkg, s)| (*pkg, id(s))).collect())
            .collect();
        let empty = id("");
        Ok(Products {
            strings,
            ids,
            empty,
        })
    }
}

fn invalid(input: &RdsInput, column: &'static str, value: &[u8]) -> Error {
    Error::InvalidHash {
        path: input.path.clone(),
        column,
        value: String::from_utf8_lossy(&value[..value.len().min(80)]).into_owned(),
    }
}

/// Scans every input into sorted runs (one row per SHA-256 per run). Returns the run files
/// with their record counts, and the FILE rows read per input.
fn read_inputs(
    inputs: &[(RdsInput, SetName)],
    sources: &Sources,
    products: &Products,
    runs_dir: &Path,
    budget: usize,
    progress: &dyn Progress,
) -> Result<(Runs, Vec<u64>)> {
    let total: Option<u64> = inputs.iter().map(|(i, _)| i.row_estimate()).sum();
    // Two buffers: one fills while the other is sorted and spilled on a second thread.
    let (full_tx, full_rx) = mpsc::sync_channel::<RowBuffer>(1);
    let (empty_tx, empty_rx) = mpsc::channel::<RowBuffer>();
    let _ = empty_tx.send(RowBuffer::with_budget(budget / 2));
    std::thread::scope(|scope| {
        let spiller = scope.spawn(move || -> Result<Runs> {
            let mut runs = Runs::default();
            for mut buffer in full_rx {
                let path = runs_dir.join(format!("rows-{}.run", runs.paths.len()));
                runs.records += buffer.spill(&path)?;
                runs.paths.push(path);
                if empty_tx.send(buffer).is_err() {
                    break;
                }
            }
            Ok(runs)
        });
        let read = || -> Result<Vec<u64>> {
            let mut buffer = RowBuffer::with_budget(budget / 2);
            let mut done = 0u64;
            let mut per_input = Vec::new();
            for (n, (input, _)) in inputs.iter().enumerate() {
                let rank = sources.rank_of_input[n];
                let ids = &products.ids[n];
                let mut rows = 0u64;
                input.for_each_row(|row| {
                    let sha256 = decode_hex::<32>(row.sha256)
                        .ok_or_else(|| invalid(input, "sha256", row.sha256))?;
                    let sha1 = decode_hex::<20>(row.sha1)
                        .ok_or_else(|| invalid(input, "sha1", row.sha1))?;
                    let md5 =
                        decode_hex::<16>(row.md5).ok_or_else(|| invalid(input, "md5", row.md5))?;
                    let candidate = Candidate {
                        rank,
                        sha1: &sha1,
                        md5: &md5,
                        product: ids.get(&row.package_id).copied().unwrap_or(products.empty),
                        name: row.file_name,
                    };
                    if !buffer.push(&sha256, &candidate) {
                        let next = empty_rx.recv().map_err(|_| spill_failed(runs_dir))?;
                        let full = std::mem::replace(&mut buffer, next);
                        full_tx.send(full).map_err(|_| spill_failed(runs_dir))?;
                        if !buffer.push(&sha256, &candidate) {
                            return Err(spill_failed(runs_dir));
                        }
                    }
                    rows += 1;
                    done += 1;
                    if done.is_multiple_of(PROGRESS_EVERY) {
                        tick(progress, Phase::Reading, done, total)?;
                    }
                    Ok(())
                })?;
                per_input.push(rows);
            }
            if buffer.len() > 0 {
                full_tx.send(buffer).map_err(|_| spill_failed(runs_dir))?;
            }
            tick(progress, Phase::Reading, done, total)?;
            Ok(per_input)
        };
        let read_result = read();
        drop(full_tx);
        drop(empty_rx);
        // The spiller's own error explains a failed hand-over better than ours.
        let spilled = spiller
            .join()
            .unwrap_or_else(|_| Err(spill_failed(runs_dir)));
        let runs = spilled?;
        Ok((runs, read_result?))
    })
}

fn spill_failed(dir: &Path) -> Error {
    Error::Io {
        path: dir.to_path_buf(),
        source: std::io::Error::other("sorting thread stopped"),
    }
}

#[derive(Default)]
struct Runs {
    paths: Vec<PathBuf>,
    records: u64,
}

/// Merges the runs and writes every table of the generation; returns the manifest without
/// the fields the caller knows (name, time, inputs).
fn write_tables(
    dir: &Path,
    runs: &Runs,
    sources: &Sources,
    products: &Products,
    budget: usize,
    progress: &dyn Progress,
) -> Result<Manifest> {
    let runs_dir = dir.join("runs");
    let mut keys = HashingWriter::create(dir.join(format::rows_file("sha256")))?;
    let mut meta = HashingWriter::create(dir.join(format::META_ROWS))?;
    let mut pool = Pool::new(
        dir.join(format::STRINGS),
        budget / 2,
        runs.records,
        &products.strings,
    )?;
    // Per-bucket counts at the finest size any table can need: the distinct count is at
    // most the number of run records.
    let count_bits = format::bucket_bits(runs.records);
    let mut counts = vec![0u32; 1 << count_bits];
    let mut sha1s = FixedSorter::<24>::new(&runs_dir, "sha1", budget / 4);
    let mut md5s = FixedSorter::<20>::new(&runs_dir, "md5", budget / 4);
    let mut per_source = vec![0u64; sources.names.len()];
    let mut n = 0u64;
    merge_runs(&runs.paths, |key, c| {
        let index = u32::try_from(n)
            .ok()
            .filter(|&i| i < u32::MAX)
            .ok_or(Error::TooLarge(n))?;
        keys.write(key)?;
        counts[format::bucket_of(key, count_bits)] += 1;
        let source = sources
            .id_of_rank
            .get(c.rank as usize)
            .copied()
            .unwrap_or(0);
        per_source[source as usize] += 1;
        let mut row = [0u8; META_ROW_BYTES];
        row[0] = source;
        format::put_u40(&mut row[1..6], pool.name(c.name)?);
        let product = pool.products.get(c.product as usize).copied().unwrap_or(0);
        row[6..10].copy_from_slice(&product.to_le_bytes());
        meta.write(&row)?;
        let mut rec = [0u8; 24];
        rec[..20].copy_from_slice(c.sha1);
        // Big-endian so that equal keys sort by row index: the lowest row wins a collision.
        rec[20..].copy_from_slice(&index.to_be_bytes());
        sha1s.push(rec)?;
        let mut rec = [0u8; 20];
        rec[..16].copy_from_slice(c.md5);
        rec[16..].copy_from_slice(&index.to_be_bytes());
        md5s.push(rec)?;
        n += 1;
        if n.is_multiple_of(PROGRESS_EVERY) {
            tick(progress, Phase::Merging, n, Some(runs.records))?;
        }
        Ok(())
    })?;
    if n == 0 {
        return Err(Error::Empty);
    }
    tick(progress, Phase::Merging, n, Some(n))?;
    for path in &runs.paths {
        std::fs::remove_file(path).at(path)?;
    }

    let mut files = std::collections::BTreeMap::new();
    files.insert(format::rows_file("sha256"), keys.finish()?);
    files.insert(format::META_ROWS.to_string(), meta.finish()?);
    files.insert(format::STRINGS.to_string(), pool.out.finish()?);
    let sha256 = write_buckets(dir, "sha256", &counts, n, &mut files)?;
    drop(counts);

    let mut ticker = Ticker {
        progress,
        done: 0,
        total: 2 * n,
    };
    let sha1 = write_index(dir, "sha1", sha1s, count_bits, &mut files, &mut ticker)?;
    let md5 = write_index(dir, "md5", md5s, count_bits, &mut files, &mut ticker)?;

    Ok(Manifest {
        format_version: format::FORMAT_VERSION,
        generation: String::new(),
        imported_at: DateTime::<Utc>::default(),
        entries: n,
        sha256,
        sha1,
        md5,
        sources: sources
            .names
            .iter()
            .zip(per_source)
            .map(|(source, entries)| SourceCount {
                source: source.clone(),
                entries,
            })
            .collect(),
        rds_versions: Vec::new(),
        inputs: Vec::new(),
        files,
    })
}

/// Writes a SHA-1 or MD5 table from its sorter: one row per distinct key, row index in LE.
/// Progress of the indexing phase, shared by the SHA-1 and MD5 tables.
struct Ticker<'a> {
    progress: &'a dyn Progress,
    done: u64,
    total: u64,
}

fn write_index<const W: usize>(
    dir: &Path,
    stem: &str,
    sorter: FixedSorter<W>,
    count_bits: u32,
    files: &mut std::collections::BTreeMap<String, FileInfo>,
    ticker: &mut Ticker<'_>,
) -> Result<TableInfo> {
    let key_len = W - 4;
    let mut out = HashingWriter::create(dir.join(format::rows_file(stem)))?;
    let mut counts = vec![0u32; 1 << count_bits];
    let mut previous: Option<[u8; W]> = None;
    let mut rows = 0u64;
    sorter.finish(|rec| {
        ticker.done += 1;
        if ticker.done.is_multiple_of(PROGRESS_EVERY) {
            tick(
                ticker.progress,
                Phase::Indexing,
                ticker.done,
                Some(ticker.total),
            )?;
        }
        if previous.is_some_and(|p| p[..key_len] == rec[..key_len]) {
            return Ok(());
        }
        previous = Some(*rec);
        let mut row = *rec;
        row[key_len..].reverse();
        out.write(&row)?;
        counts[format::bucket_of(&rec[..key_len], count_bits)] += 1;
        rows += 1;
        Ok(())
    })?;
    tick(
        ticker.progress,
        Phase::Indexing,
        ticker.done,
        Some(ticker.total),
    )?;
    files.insert(format::rows_file(stem), out.finish()?);
    write_buckets(dir, stem, &counts, rows, files)
}

/// Reports progress; the callback's `false` becomes [`Error::Cancelled`].
fn tick(progress: &dyn Progress, phase: Phase, done: u64, total: Option<u64>) -> Result<()> {
    if progress.update(phase, done, total) {
        Ok(())
    } else {
        Err(Error::Cancelled)
    }
}

fn write_buckets(
    dir: &Path,
    stem: &str,
    counts: &[u32],
    rows: u64,
    files: &mut std::collections::BTreeMap<String, FileInfo>,
) -> Result<TableInfo> {
    let bucket_bits = format::bucket_bits(rows);
    let mut out = HashingWriter::create(dir.join(format::buckets_file(stem)))?;
    for offset in format::bucket_offsets(counts, bucket_bits) {
        out.write(&offset.to_le_bytes())?;
    }
    files.insert(format::buckets_file(stem), out.finish()?);
    Ok(TableInfo { rows, bucket_bits })
}

/// The string pool: every product first (so their offsets fit in 32 bits), then file names
/// de-duplicated through a map of 128-bit hashes (exact while the map stays under its
/// budget; after that new names are appended without de-duplication).
struct Pool {
    out: HashingWriter,
    names: HashMap<u128, u64, BuildHasherDefault<PreHashed>>,
    max_names: usize,
    /// Pool offset of each product id.
    products: Vec<u32>,
    scratch: Vec<u8>,
}

impl Pool {
    fn new(path: PathBuf, budget: usize, max_distinct: u64, products: &[String]) -> Result<Pool> {
        // Allocated once at its final size so that it never doubles past the budget; a
        // slot takes 25 bytes and the table rounds up to a power of two (<= 40 bytes/name).
        let max_names = (budget / 40).min(usize::try_from(max_distinct).unwrap_or(usize::MAX));
        let mut pool = Pool {
            out: HashingWriter::create(path)?,
            names: HashMap::with_capacity_and_hasher(max_names, BuildHasherDefault::default()),
            max_names,
            products: Vec::with_capacity(products.len()),
            scratch: Vec::new(),
        };
        for product in products {
            let offset = pool.add(product.as_bytes())?;
            let offset = u32::try_from(offset).map_err(|_| Error::TooLarge(offset))?;
            pool.products.push(offset);
        }
        Ok(pool)
    }

    fn add(&mut self, bytes: &[u8]) -> Result<u64> {
        let offset = self.out.bytes;
        if offset > format::MAX_U40 {
            return Err(Error::TooLarge(offset));
        }
        let text = String::from_utf8_lossy(bytes);
        self.scratch.clear();
        format::put_varint(&mut self.scratch, text.len() as u64);
        self.scratch.extend_from_slice(text.as_bytes());
        let scratch = std::mem::take(&mut self.scratch);
        self.out.write(&scratch)?;
        self.scratch = scratch;
        Ok(offset)
    }

    fn name(&mut self, bytes: &[u8]) -> Result<u64> {
        let key = hash128(bytes);
        if let Some(&offset) = self.names.get(&key) {
            return Ok(offset);
        }
        let offset = self.add(bytes)?;
        if self.names.len() < self.max_names {
            self.names.insert(key, offset);
        }
        Ok(offset)
    }
}

/// Two SipHash-1-3 digests with different prefixes: 128 bits, so a collision among
/// even a billion names is out of reach (~1e-20).
fn hash128(bytes: &[u8]) -> u128 {
    let mut a = DefaultHasher::new();
    a.write(bytes);
    let mut b = DefaultHasher::new();
    b.write_u8(0xa5);
    b.write(bytes);
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}

/// The map's keys are already hashes: use their low bits as they are.
#[derive(Default)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes.iter().take(8) {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u128(&mut self, value: u128) {
        self.0 = value as u64;
    }
}

/// Buffered file writer that hashes (SHA-256) what it writes and fsyncs on finish.
struct HashingWriter {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    hasher: Sha256,
    bytes: u64,
}

impl HashingWriter {
    const BUF: usize = 1 << 20;

    fn create(path: PathBuf) -> Result<HashingWriter> {
        let file = File::create(&path).at(&path)?;
        Ok(HashingWriter {
            path,
            file,
            buf: Vec::with_capacity(Self::BUF),
            hasher: Sha256::new(),
            bytes: 0,
        })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        if self.buf.len() + bytes.len() > Self::BUF {
            self.flush()?;
        }
        self.buf.extend_from_slice(bytes);
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.hasher.update(&self.buf);
        self.file.write_all(&self.buf).at(&self.path)?;
        self.buf.clear();
        Ok(())
    }

    fn finish(mut self) -> Result<FileInfo> {
        self.flush()?;
        self.file.sync_all().at(&self.path)?;
        Ok(FileInfo {
            bytes: self.bytes,
            sha256: hex::encode(self.hasher.finalize()),
        })
    }
}

/// The temporary generation directory; removed on drop unless disarmed (an error or a
/// cancellation leaves nothing behind; a killed process leaves it for the next cleanup).
struct TempDir {
    path: PathBuf,
    armed: bool,
}

impl TempDir {
    fn create(path: PathBuf) -> Result<TempDir> {
        std::fs::create_dir(&path).at(&path)?;
        Ok(TempDir { path, armed: true })
    }

    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
