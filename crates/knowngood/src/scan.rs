//! `knowngood scan PATH...`: walk files, hash each once (SHA-256, SHA-1 and MD5 in one
//! pass; several files at a time), classify the SHA-256s against a server in batches of
//! 100, and report every file: vendor releases (superseded builds flagged), files of the
//! reference corpus, unknowns, and what could not be hashed.
//!
//! Hashing: one thread per CPU, each keeping sixteen files open at once when the CPU has
//! AVX-512 ([`crate::md5x16`]): every file's next piece is read and fed to SHA-256 and
//! SHA-1 (AWS-LC, on the CPU's SHA extensions), and MD5 runs on the sixteen files
//! together, one per vector lane. MD5 is a long serial chain, the slowest of the three
//! one file at a time; in lanes it costs a fraction of that, so the scan needs little
//! more CPU than `md5sum` alone. Without AVX-512 each thread hashes one file at a time.
//!
//! Nothing on the way stops the scan: a path that cannot be read (permissions, a dangling
//! symlink, a symlink loop) is reported `unreadable`, a FIFO, socket or device `special`
//! (never opened: reading a FIFO would wait for a writer), a symlink to a directory
//! `skipped` (not followed, so loops cannot recur). Symlinks to files are hashed.

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context as _, Result};
use serde::Serialize;

use crate::client::{ApiClient, Classified, api_key, printable};

/// Exit status when `--fail-on-unknown` finds an unknown file.
pub(crate) const EXIT_UNKNOWN: u8 = 4;

/// Exit status when `--fail-on-unknown` with `--packages` finds a `modified` file.
pub(crate) const EXIT_MODIFIED: u8 = 5;

/// The scan found unknown files and was asked to fail on them.
#[derive(Debug)]
pub(crate) struct UnknownFiles(pub usize);

impl std::fmt::Display for UnknownFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} unknown file(s)", self.0)
    }
}

impl std::error::Error for UnknownFiles {}

/// The scan found files that differ from the genuine build of their installed package
/// version (`--packages`) and was asked to fail on unknown files.
#[derive(Debug)]
pub(crate) struct ModifiedFiles(pub usize);

impl std::fmt::Display for ModifiedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} modified file(s): they differ from the genuine build of their package version",
            self.0
        )
    }
}

impl std::error::Error for ModifiedFiles {}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Aligned columns and a summary, for people.
    Table,
    /// One JSON object per file, then one `{"summary": ...}`.
    Jsonl,
    /// A header, then one row per file (the summary goes to stderr).
    Csv,
}

pub(crate) struct ScanArgs {
    pub(crate) paths: Vec<PathBuf>,
    pub(crate) server: String,
    pub(crate) key_file: Option<PathBuf>,
    pub(crate) format: Format,
    pub(crate) fail_on_unknown: bool,
    pub(crate) jobs: usize,
    /// Classify with this bundle instead of the server.
    pub(crate) offline: Option<PathBuf>,
    pub(crate) trust_keys: Vec<String>,
    /// Off a terminal: a progress line on stderr this often.
    pub(crate) progress_every: std::time::Duration,
    /// Explain unknown files with the package database (dpkg or RPM) of the system at this root.
    pub(crate) packages: Option<PathBuf>,
}

/// What the walk found at a path.
enum Found {
    File(PathBuf),
    Problem {
        path: PathBuf,
        status: &'static str,
        reason: String,
    },
}

/// One reported path.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Row {
    /// known_vendor_release, known_file, unknown, unreadable, special or skipped; with
    /// `--packages`, an unknown file a package owns is modified or not_covered.
    pub(crate) status: &'static str,
    pub(crate) path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sha1: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) md5: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) vendor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) executable_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<String>,
    /// A vendor build that a newer release has replaced.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) superseded: bool,
    /// The reference corpus set of a known file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) file_name: Option<String>,
    /// Why a path was not hashed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// `--packages`: the installed package that owns the file, and its version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) package: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) package_version: Option<String>,
}

/// Counts by status.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Summary {
    pub(crate) files: usize,
    pub(crate) bytes: u64,
    pub(crate) known_vendor_release: usize,
    pub(crate) superseded: usize,
    pub(crate) known_file: usize,
    pub(crate) unknown: usize,
    pub(crate) unreadable: usize,
    pub(crate) special: usize,
    pub(crate) skipped: usize,
    /// `--packages`: unknown files of a package version the service knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) modified: Option<usize>,
    /// `--packages`: unknown files of a package version the service does not know.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) not_covered: Option<usize>,
}

impl Summary {
    fn of(rows: &[Row]) -> Self {
        let mut s = Summary::default();
        for row in rows {
            match row.status {
                "known_vendor_release" => s.known_vendor_release += 1,
                "known_file" => s.known_file += 1,
                "unknown" => s.unknown += 1,
                "unreadable" => s.unreadable += 1,
                "special" => s.special += 1,
                "modified" => *s.modified.get_or_insert(0) += 1,
                "not_covered" => *s.not_covered.get_or_insert(0) += 1,
                _ => s.skipped += 1,
            }
            if row.superseded {
                s.superseded += 1;
            }
            if row.sha256.is_some() {
                s.files += 1;
                s.bytes += row.size.unwrap_or(0);
            }
        }
        s
    }

    fn line(&self) -> String {
        let packages = match (self.modified, self.not_covered) {
            (None, None) => String::new(),
            (m, n) => format!(
                "; of package files, {} modified, {} not covered",
                m.unwrap_or(0),
                n.unwrap_or(0)
            ),
        };
        format!(
            "{} files hashed ({} bytes): {} vendor releases ({} superseded), {} known files, {} unknown; {} unreadable, {} special, {} skipped{packages}",
            self.files,
            self.bytes,
            self.known_vendor_release,
            self.superseded,
            self.known_file,
            self.unknown,
            self.unreadable,
            self.special,
            self.skipped
        )
    }
}

pub(crate) async fn run(args: ScanArgs) -> Result<()> {
    // A path named on the command line that does not exist is a mistake, not a finding.
    for root in &args.paths {
        if let Err(e) = std::fs::symlink_metadata(root)
            && e.kind() == std::io::ErrorKind::NotFound
        {
            anyhow::bail!("{}: no such file or directory", root.display());
        }
    }
    // The package database is read first: a host without one is said before any hashing.
    let packages = match &args.packages {
        Some(root) => Some(crate::packages_db::PackagesDb::open(root)?),
        None => None,
    };
    // A bundle that does not verify is refused before anything is read.
    if let Some(dir) = &args.offline {
        let verified = crate::offline::verify_bundle(dir, &args.trust_keys)
            .with_context(|| format!("the bundle {} is refused", dir.display()))?;
        let found = walk(&args.paths);
        let progress = Progress::start(found.len(), args.progress_every);
        let jobs = args.jobs.max(1);
        let hashing = progress.clone();
        let mut rows = tokio::task::spawn_blocking(move || hash_all(found, jobs, &hashing)).await?;
        progress.finish();
        for row in &mut rows {
            classify_offline(row, &verified);
        }
        return report(&mut rows, &args, packages.as_ref(), true);
    }
    let key = api_key(args.key_file.as_deref())?;
    let mut client = ApiClient::new(&args.server, key)?;
    let found = walk(&args.paths);
    let progress = Progress::start(found.len(), args.progress_every);
    let waits = progress.clone();
    client.on_wait(Box::new(move |wait| waits.waiting(wait)));
    let jobs = args.jobs.max(1);
    let hashing = progress.clone();
    let mut rows = tokio::task::spawn_blocking(move || hash_all(found, jobs, &hashing)).await?;
    let hashes: Vec<String> = {
        let mut h: Vec<String> = rows.iter().filter_map(|r| r.sha256.clone()).collect();
        h.sort();
        h.dedup();
        h
    };
    progress.looking_up(hashes.len());
    let answers = client.lookup(&hashes, |n| progress.looked_up(n)).await;
    progress.finish();
    let answers = answers?;
    for row in &mut rows {
        if let Some(answer) = row.sha256.as_ref().and_then(|h| answers.get(h)) {
            apply(row, answer);
        }
    }
    report(&mut rows, &args, packages.as_ref(), false)
}

fn report(
    rows: &mut [Row],
    args: &ScanArgs,
    packages: Option<&crate::packages_db::PackagesDb>,
    offline: bool,
) -> Result<()> {
    let coverage = packages.map(|db| explain_unknowns(rows, db, offline));
    let mut summary = Summary::of(rows);
    if coverage.is_some() {
        summary.modified.get_or_insert(0);
        summary.not_covered.get_or_insert(0);
    }
    print(rows, &summary, coverage.as_deref(), args.format)?;
    let modified = summary.modified.unwrap_or(0);
    let unknown = summary.unknown + modified + summary.not_covered.unwrap_or(0);
    if args.fail_on_unknown && modified > 0 {
        return Err(ModifiedFiles(modified).into());
    }
    if args.fail_on_unknown && unknown > 0 {
        return Err(UnknownFiles(unknown).into());
    }
    Ok(())
}

/// One installed package's files among those scanned.
#[derive(Debug, Default, Serialize)]
pub(crate) struct PackageCoverage {
    pub(crate) package: String,
    pub(crate) version: String,
    /// Hashed files the package owns.
    pub(crate) files: usize,
    /// Of those, known as a vendor release or a reference file.
    pub(crate) known: usize,
    pub(crate) modified: usize,
    pub(crate) not_covered: usize,
}

/// Says why each unknown file a package owns is unknown, and counts every package's
/// scanned files.
///
/// The service knows a package version when another file of that package was answered as
/// a vendor release whose version is the installed one
/// ([`crate::packages_db::PackagesDb::version_matches`]): an unknown file of it then
/// differs from the genuine build (`modified`); otherwise it is
/// `not_covered`. Offline, a bundle filter's hit carries no version: any vendor release
/// of the package known by a filter counts as the package being known. Unowned unknown
/// files stay `unknown`.
fn explain_unknowns(
    rows: &mut [Row],
    db: &crate::packages_db::PackagesDb,
    offline: bool,
) -> Vec<PackageCoverage> {
    let owners: Vec<&[usize]> = rows
        .iter()
        .map(|row| {
            if row.sha256.is_some() {
                db.owners_of(Path::new(&row.path))
            } else {
                &[]
            }
        })
        .collect();
    let mut known_version = vec![false; db.packages.len()];
    for (row, owners) in rows.iter().zip(&owners) {
        if row.status != "known_vendor_release" {
            continue;
        }
        for &p in *owners {
            let matches = match &row.version {
                Some(version) => db.version_matches(version, p),
                None => offline,
            };
            known_version[p] |= matches;
        }
    }
    let mut coverage: std::collections::BTreeMap<usize, PackageCoverage> = Default::default();
    for (row, owners) in rows.iter_mut().zip(&owners) {
        // A file several packages own (Multi-Arch: same) is told by the first that is known.
        let Some(&owner) = owners
            .iter()
            .find(|&&p| known_version[p])
            .or(owners.first())
        else {
            continue;
        };
        let package = &db.packages[owner];
        let entry = coverage.entry(owner).or_insert_with(|| PackageCoverage {
            package: package.name.clone(),
            version: package.version.clone(),
            ..Default::default()
        });
        entry.files += 1;
        match row.status {
            "known_vendor_release" | "known_file" => entry.known += 1,
            "unknown" => {
                row.package = Some(package.name.clone());
                row.package_version = Some(package.version.clone());
                if known_version[owner] {
                    row.status = "modified";
                    entry.modified += 1;
                } else {
                    row.status = "not_covered";
                    entry.not_covered += 1;
                }
            }
            _ => {}
        }
    }
    let mut coverage: Vec<PackageCoverage> = coverage.into_values().collect();
    coverage.sort_by(|a, b| a.package.cmp(&b.package));
    coverage
}

/// Classifies a hashed file from a verified bundle: the day's feed list by SHA-256
/// (exact, with names), else the filters by SHA-256, SHA-1 then MD5 (`source` says a
/// filter answered: a false positive is possible at the manifest's rate). Superseded
/// builds cannot be told offline.
pub(crate) fn classify_offline(row: &mut Row, bundle: &bundle::Verified) {
    use bundle::OfflineVerdict;
    let digests = [&row.sha256, &row.sha1, &row.md5];
    let mut verdict = OfflineVerdict::Unknown;
    for digest in digests.into_iter().flatten() {
        verdict = bundle.classify(digest);
        if verdict != OfflineVerdict::Unknown {
            break;
        }
    }
    match verdict {
        OfflineVerdict::Feed(r) => {
            row.status = "known_vendor_release";
            row.vendor = r.vendor.clone();
            row.executable_name = Some(r.executable_name.clone());
            row.version = Some(r.version.clone());
        }
        OfflineVerdict::VendorFilter => {
            row.status = "known_vendor_release";
            row.source = Some("bundle vendor filter".into());
        }
        OfflineVerdict::CorpusFilter => {
            row.status = "known_file";
            row.source = Some("bundle corpus filter".into());
        }
        OfflineVerdict::Unknown => {}
    }
}

/// Fills a hashed file's row from the server's answer.
pub(crate) fn apply(row: &mut Row, answer: &Classified) {
    row.status = match answer.classification.as_str() {
        "known_vendor_release" => "known_vendor_release",
        "known_file" => "known_file",
        _ => "unknown",
    };
    row.vendor = answer.vendor.clone();
    row.executable_name = answer.executable_name.clone();
    row.version = answer.version.clone();
    row.superseded = answer.historical == Some(true);
    row.source = answer.source.clone().filter(|s| s != "service_vendor");
    row.file_name = answer.file_name.clone();
}

/// Every path under `roots`, depth first, in name order.
fn walk(roots: &[PathBuf]) -> Vec<Found> {
    let mut found = Vec::new();
    for root in roots {
        // A path named on the command line is followed even when it is a symlink.
        match std::fs::metadata(root) {
            Ok(meta) if meta.is_dir() => walk_dir(root, &mut found),
            Ok(meta) => found.push(classify_type(root.clone(), meta.file_type())),
            Err(e) => found.push(problem(root, "unreadable", e.to_string())),
        }
    }
    found
}

fn walk_dir(dir: &Path, found: &mut Vec<Found>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return found.push(problem(dir, "unreadable", e.to_string())),
    };
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => paths.push(entry.path()),
            Err(e) => found.push(problem(dir, "unreadable", e.to_string())),
        }
    }
    paths.sort();
    for path in paths {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) => {
                found.push(problem(&path, "unreadable", e.to_string()));
                continue;
            }
        };
        if meta.is_dir() {
            walk_dir(&path, found);
        } else if meta.file_type().is_symlink() {
            match std::fs::metadata(&path) {
                Ok(target) if target.is_dir() => found.push(problem(
                    &path,
                    "skipped",
                    "symlink to a directory (not followed)".into(),
                )),
                Ok(target) => found.push(classify_type(path, target.file_type())),
                Err(e) => found.push(problem(&path, "unreadable", e.to_string())),
            }
        } else {
            found.push(classify_type(path, meta.file_type()));
        }
    }
}

fn classify_type(path: PathBuf, kind: std::fs::FileType) -> Found {
    if kind.is_file() {
        return Found::File(path);
    }
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_char_device() {
        "a character device"
    } else {
        "not a regular file"
    };
    problem(&path, "special", format!("{what} (not read)"))
}

fn problem(path: &Path, status: &'static str, reason: String) -> Found {
    Found::Problem {
        path: path.to_path_buf(),
        status,
        reason,
    }
}

/// Hashes every file on `jobs` threads, each taking the next file as it finishes one
/// (sixteen at a time with AVX-512); rows come back in walk order, each counted in
/// `progress`.
fn hash_all(found: Vec<Found>, jobs: usize, progress: &Progress) -> Vec<Row> {
    hash_all_with(found, jobs, crate::md5x16::available(), progress)
}

fn hash_all_with(found: Vec<Found>, jobs: usize, lanes: bool, progress: &Progress) -> Vec<Row> {
    let next = AtomicUsize::new(0);
    let rows: Vec<Mutex<Option<Row>>> = found.iter().map(|_| Mutex::new(None)).collect();
    let done = |i: usize, row: Row| {
        progress.file(row.size.unwrap_or(0));
        if let Ok(mut slot) = rows[i].lock() {
            *slot = Some(row);
        }
    };
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(found.len().max(1)) {
            scope.spawn(|| {
                if lanes {
                    return hash_in_lanes(&found, &next, &done);
                }
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = found.get(i) else { break };
                    done(i, hash_one(item, &mut buf));
                }
            });
        }
    });
    progress.hashed();
    rows.into_iter()
        .filter_map(|slot| slot.into_inner().ok().flatten())
        .collect()
}

/// Bytes read from one file at a time in [`hash_in_lanes`]: a multiple of MD5's block.
const LANE_CHUNK: usize = 128 << 10;
/// A lane's room in the arena: a chunk and MD5's padding (at most two blocks).
const LANE_ROOM: usize = LANE_CHUNK + 128;

/// A file being hashed in one MD5 lane.
struct Lane {
    item: usize,
    shown: String,
    file: std::fs::File,
    size: u64,
    sha256: aws_lc_rs::digest::Context,
    sha1: aws_lc_rs::digest::Context,
    /// Where the lane's next unhashed MD5 block starts in the arena.
    offset: usize,
    /// Whole blocks ready there.
    blocks: usize,
    /// The end of the file was read and its padding placed after it.
    ended: bool,
}

impl Lane {
    /// Reads the file's next chunk into `room` (this lane's part of the arena, which
    /// starts at `start`), feeding it to SHA-256 and SHA-1; at the end of the file, adds
    /// MD5's padding.
    fn refill(&mut self, room: &mut [u8], start: usize) -> std::io::Result<()> {
        use std::io::Read as _;
        let mut got = 0;
        while got < LANE_CHUNK {
            match self.file.read(&mut room[got..LANE_CHUNK]) {
                Ok(0) => {
                    self.ended = true;
                    break;
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.sha256.update(&room[..got]);
        self.sha1.update(&room[..got]);
        self.size += got as u64;
        let mut whole = got;
        if self.ended {
            whole = got / 64 * 64;
            let mut padded = [0u8; 128];
            let n = crate::md5x16::pad(&room[whole..got], self.size, &mut padded);
            room[whole..whole + n].copy_from_slice(&padded[..n]);
            whole += n;
        }
        self.offset = start;
        self.blocks = whole / 64;
        Ok(())
    }

    fn finish(self, md5: [u8; 16]) -> Row {
        Row {
            status: "unknown",
            path: self.shown,
            size: Some(self.size),
            sha256: Some(hex::encode(self.sha256.finish().as_ref())),
            sha1: Some(hex::encode(self.sha1.finish().as_ref())),
            md5: Some(hex::encode(md5)),
            ..Row::default()
        }
    }
}

/// One thread's share of the files, sixteen at a time: each lane holds a file; lanes
/// whose blocks are used up read their next chunk (or finish their file and take the
/// next one), then MD5 runs over the blocks every busy lane has ready.
fn hash_in_lanes(found: &[Found], next: &AtomicUsize, done: &(dyn Fn(usize, Row) + Sync)) {
    use crate::md5x16::{LANES, Md5x16};
    let mut md5 = Md5x16::new();
    let mut arena = vec![0u8; LANE_ROOM * LANES];
    let mut lanes: Vec<Option<Lane>> = (0..LANES).map(|_| None).collect();
    let mut no_more = false;
    loop {
        for (l, slot) in lanes.iter_mut().enumerate() {
            loop {
                match slot {
                    None if no_more => break,
                    None => {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = found.get(i) else {
                            no_more = true;
                            break;
                        };
                        match open_file(item) {
                            Ok((file, shown)) => {
                                md5.reset(l);
                                *slot = Some(Lane {
                                    item: i,
                                    shown,
                                    file,
                                    size: 0,
                                    sha256: aws_lc_rs::digest::Context::new(
                                        &aws_lc_rs::digest::SHA256,
                                    ),
                                    sha1: aws_lc_rs::digest::Context::new(
                                        &aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY,
                                    ),
                                    offset: 0,
                                    blocks: 0,
                                    ended: false,
                                });
                            }
                            Err(row) => done(i, *row),
                        }
                    }
                    Some(lane) if lane.blocks > 0 => break,
                    Some(lane) if lane.ended => {
                        if let Some(lane) = slot.take() {
                            let item = lane.item;
                            done(item, lane.finish(md5.digest(l)));
                        }
                    }
                    Some(lane) => {
                        let start = l * LANE_ROOM;
                        if let Err(e) = lane.refill(&mut arena[start..start + LANE_ROOM], start)
                            && let Some(lane) = slot.take()
                        {
                            done(
                                lane.item,
                                Row {
                                    status: "unreadable",
                                    path: lane.shown,
                                    reason: Some(e.to_string()),
                                    ..Row::default()
                                },
                            );
                        }
                    }
                }
            }
        }
        let busy = lanes
            .iter()
            .enumerate()
            .filter_map(|(l, lane)| lane.as_ref().map(|lane| (l, lane.blocks)));
        let (mut active, mut blocks) = (0u16, usize::MAX);
        for (l, n) in busy {
            active |= 1 << l;
            blocks = blocks.min(n);
        }
        if active == 0 {
            break;
        }
        let mut offsets = [0usize; LANES];
        for (l, lane) in lanes.iter().enumerate() {
            if let Some(lane) = lane {
                offsets[l] = lane.offset;
            }
        }
        md5.compress(&arena, &offsets, active, blocks);
        for lane in lanes.iter_mut().flatten() {
            lane.offset += blocks * 64;
            lane.blocks -= blocks;
        }
    }
}

fn hash_one(item: &Found, buf: &mut [u8]) -> Row {
    let (mut file, shown) = match open_file(item) {
        Ok(opened) => opened,
        Err(row) => return *row,
    };
    match ingest::hasher::digest_reader(&mut file, buf) {
        Ok((digests, size)) => Row {
            status: "unknown",
            path: shown,
            size: Some(size),
            sha256: Some(digests.sha256),
            sha1: Some(digests.sha1),
            md5: Some(digests.md5),
            ..Row::default()
        },
        Err(e) => Row {
            status: "unreadable",
            path: shown,
            reason: Some(e.to_string()),
            ..Row::default()
        },
    }
}

/// Opens a regular file for hashing, with the path as shown; anything else is its row.
fn open_file(item: &Found) -> Result<(std::fs::File, String), Box<Row>> {
    let path = match item {
        Found::File(path) => path,
        Found::Problem {
            path,
            status,
            reason,
        } => {
            return Err(Box::new(Row {
                status,
                path: path.display().to_string(),
                reason: Some(reason.clone()),
                ..Row::default()
            }));
        }
    };
    let shown = path.display().to_string();
    let unreadable = |reason: String| Row {
        status: "unreadable",
        path: shown.clone(),
        reason: Some(reason),
        ..Row::default()
    };
    // Non-blocking, so that a file swapped for a FIFO since the walk cannot hang the scan.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path);
    let file = match file {
        Ok(file) => file,
        Err(e) => return Err(Box::new(unreadable(e.to_string()))),
    };
    match file.metadata() {
        Ok(meta) if meta.is_file() => Ok((file, shown)),
        Ok(meta) => match classify_type(path.clone(), meta.file_type()) {
            Found::Problem { status, reason, .. } => Err(Box::new(Row {
                status,
                path: shown,
                reason: Some(reason),
                ..Row::default()
            })),
            Found::File(_) => Ok((file, shown)),
        },
        Err(e) => Err(Box::new(unreadable(e.to_string()))),
    }
}

/// How far the scan is. On a terminal: a progress bar (files/s, MB/s, then the lookups)
/// on stderr. Otherwise: a line on stderr every `every` (hashed files and bytes, hashes
/// looked up, time so far), so a log shows a long scan is alive. Either way a wait for the
/// server's `Retry-After` is said when it starts.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    total: usize,
    files: AtomicUsize,
    bytes: std::sync::atomic::AtomicU64,
    to_look_up: AtomicUsize,
    looked_up: AtomicUsize,
    started: std::time::Instant,
    /// Set when the scan is over: the line printer stops.
    done: std::sync::atomic::AtomicBool,
}

impl Progress {
    fn start(total: usize, every: std::time::Duration) -> std::sync::Arc<Self> {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(total as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} files {msg}",
            ) {
                bar.set_style(style);
            }
            bar
        });
        let progress = std::sync::Arc::new(Self {
            bar,
            total,
            files: AtomicUsize::new(0),
            bytes: std::sync::atomic::AtomicU64::new(0),
            to_look_up: AtomicUsize::new(0),
            looked_up: AtomicUsize::new(0),
            started: std::time::Instant::now(),
            done: std::sync::atomic::AtomicBool::new(false),
        });
        if progress.bar.is_none() && !every.is_zero() {
            let lines = progress.clone();
            std::thread::spawn(move || {
                let mut next = every;
                loop {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    if lines.done.load(Ordering::Acquire) {
                        break;
                    }
                    if lines.started.elapsed() >= next {
                        eprintln!("{}", lines.line());
                        next += every;
                    }
                }
            });
        }
        progress
    }

    /// One progress line, with the UTC time (a log line).
    fn line(&self) -> String {
        let to_look_up = self.to_look_up.load(Ordering::Relaxed);
        let lookups = if to_look_up == 0 {
            String::new()
        } else {
            format!(
                ", {}/{to_look_up} hashes looked up",
                self.looked_up.load(Ordering::Relaxed)
            )
        };
        format!(
            "{} knowngood scan: {}/{} paths hashed ({:.1} MB){lookups}, {} s so far",
            chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ"),
            self.files.load(Ordering::Relaxed),
            self.total,
            self.bytes.load(Ordering::Relaxed) as f64 / 1e6,
            self.started.elapsed().as_secs()
        )
    }

    fn file(&self, bytes: u64) {
        let files = self.files.fetch_add(1, Ordering::Relaxed) + 1;
        let total = self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let Some(bar) = &self.bar else { return };
        bar.inc(1);
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        bar.set_message(format!(
            "{:.0} files/s {:.1} MB/s",
            files as f64 / secs,
            total as f64 / secs / 1e6
        ));
    }

    /// Every path is hashed.
    fn hashed(&self) {
        if let Some(bar) = &self.bar {
            bar.set_message("hashed");
        }
    }

    /// The lookups begin: `n` distinct hashes.
    fn looking_up(&self, n: usize) {
        self.to_look_up.store(n, Ordering::Relaxed);
        if let Some(bar) = &self.bar {
            bar.set_message(format!("looking up 0/{n} hashes"));
        }
    }

    fn looked_up(&self, n: usize) {
        let done = self.looked_up.fetch_add(n, Ordering::Relaxed) + n;
        if let Some(bar) = &self.bar {
            bar.set_message(format!(
                "looking up {done}/{} hashes",
                self.to_look_up.load(Ordering::Relaxed)
            ));
        }
    }

    /// The server said to wait (`Retry-After`).
    fn waiting(&self, wait: std::time::Duration) {
        match &self.bar {
            Some(bar) => {
                bar.println(crate::client::wait_line(wait, true));
                bar.set_message(format!("waiting {} s (rate limited)", wait.as_secs()));
            }
            None => eprintln!("{}", crate::client::wait_line(wait, false)),
        }
    }

    fn finish(&self) {
        self.done.store(true, Ordering::Release);
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A path or text on one line: control characters (a newline in a file name) shown as `?`.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

fn print(
    rows: &[Row],
    summary: &Summary,
    coverage: Option<&[PackageCoverage]>,
    format: Format,
) -> Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match format {
        Format::Jsonl => {
            for row in rows {
                writeln!(out, "{}", serde_json::to_string(row)?)?;
            }
            for package in coverage.unwrap_or_default() {
                writeln!(
                    out,
                    "{}",
                    serde_json::to_string(&serde_json::json!({ "package": package }))?
                )?;
            }
            writeln!(
                out,
                "{}",
                serde_json::to_string(&serde_json::json!({ "summary": summary }))?
            )?;
        }
        Format::Csv => {
            writeln!(out, "{}", CSV_COLUMNS.join(","))?;
            for row in rows {
                writeln!(out, "{}", csv_line(row))?;
            }
            if let Some(coverage) = coverage {
                for line in coverage_table(coverage) {
                    eprintln!("{}", line.trim_end());
                }
            }
            eprintln!("{}", summary.line());
        }
        Format::Table => {
            for line in table(rows) {
                writeln!(out, "{}", line.trim_end())?;
            }
            if let Some(coverage) = coverage {
                writeln!(out)?;
                for line in coverage_table(coverage) {
                    writeln!(out, "{}", line.trim_end())?;
                }
            }
            writeln!(out, "{}", summary.line())?;
        }
    }
    Ok(())
}

/// The table's columns, one meaning each.
const TABLE_COLUMNS: [&str; 6] = ["STATUS", "SOURCE", "NAME", "VERSION", "NOTE", "PATH"];
/// A column wider than this keeps its text but no longer pads the others.
const MAX_COLUMN: usize = 40;

/// The table's cells of a row: what vouches for the file (vendor, or the reference set or
/// bundle filter), the name it is known by, the vendor's version, a note (superseded, or
/// why a path was not hashed), and the path last.
fn table_cells(row: &Row) -> [String; 6] {
    let source = match row.status {
        "known_vendor_release" => row.vendor.clone().or_else(|| row.source.clone()),
        "known_file" => row.source.clone(),
        "modified" | "not_covered" => Some("dpkg".to_owned()),
        _ => None,
    };
    let name = row
        .executable_name
        .clone()
        .or_else(|| row.file_name.clone())
        .or_else(|| row.package.clone());
    let note = if row.superseded {
        Some("superseded by a newer release".to_owned())
    } else if row.status == "modified" {
        Some("differs from the genuine build of this package version".to_owned())
    } else if row.status == "not_covered" {
        Some("this package version is not known to the service".to_owned())
    } else {
        row.reason.clone()
    };
    let version = row.version.clone().or_else(|| row.package_version.clone());
    [
        row.status.to_owned(),
        printable(&source.unwrap_or_default()),
        printable(&name.unwrap_or_default()),
        printable(&version.unwrap_or_default()),
        printable(&note.unwrap_or_default()),
        one_line(&row.path),
    ]
}

/// The header and one line per row, columns padded to their widest cell (up to
/// [`MAX_COLUMN`]); empty cells show `-`.
fn table(rows: &[Row]) -> Vec<String> {
    let mut cells: Vec<[String; 6]> = vec![TABLE_COLUMNS.map(str::to_owned)];
    cells.extend(
        rows.iter()
            .map(|row| table_cells(row).map(|c| if c.is_empty() { "-".to_owned() } else { c })),
    );
    let mut widths = [0usize; 6];
    for line in &cells {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count().min(MAX_COLUMN));
        }
    }
    cells
        .iter()
        .map(|line| {
            let mut text = String::new();
            for (i, cell) in line.iter().enumerate() {
                if i + 1 == line.len() {
                    text.push_str(cell);
                } else {
                    let _ = write!(text, "{cell:<width$}  ", width = widths[i]);
                }
            }
            text
        })
        .collect()
}

/// `--packages`: one line per package with scanned files, columns aligned.
fn coverage_table(coverage: &[PackageCoverage]) -> Vec<String> {
    let mut cells: Vec<[String; 6]> = vec![
        [
            "PACKAGE",
            "VERSION",
            "FILES",
            "KNOWN",
            "MODIFIED",
            "NOT COVERED",
        ]
        .map(str::to_owned),
    ];
    cells.extend(coverage.iter().map(|c| {
        [
            printable(&c.package),
            printable(&c.version),
            c.files.to_string(),
            c.known.to_string(),
            c.modified.to_string(),
            c.not_covered.to_string(),
        ]
    }));
    let mut widths = [0usize; 6];
    for line in &cells {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count().min(MAX_COLUMN));
        }
    }
    cells
        .iter()
        .map(|line| {
            let mut text = String::new();
            for (i, cell) in line.iter().enumerate() {
                let _ = write!(text, "{cell:<width$}  ", width = widths[i]);
            }
            text
        })
        .collect()
}

const CSV_COLUMNS: [&str; 15] = [
    "status",
    "path",
    "size",
    "sha256",
    "sha1",
    "md5",
    "vendor",
    "executable_name",
    "version",
    "superseded",
    "source",
    "file_name",
    "reason",
    "package",
    "package_version",
];

/// RFC 4180: every field quoted, quotes doubled. A leading `=`, `+`, `-` or `@` is
/// prefixed with `'` so a spreadsheet never runs a file name as a formula.
fn csv_line(row: &Row) -> String {
    let fields: [String; 15] = [
        row.status.to_owned(),
        row.path.clone(),
        row.size.map(|s| s.to_string()).unwrap_or_default(),
        row.sha256.clone().unwrap_or_default(),
        row.sha1.clone().unwrap_or_default(),
        row.md5.clone().unwrap_or_default(),
        row.vendor.clone().unwrap_or_default(),
        row.executable_name.clone().unwrap_or_default(),
        row.version.clone().unwrap_or_default(),
        row.superseded.to_string(),
        row.source.clone().unwrap_or_default(),
        row.file_name.clone().unwrap_or_default(),
        row.reason.clone().unwrap_or_default(),
        row.package.clone().unwrap_or_default(),
        row.package_version.clone().unwrap_or_default(),
    ];
    let mut line = String::new();
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        let guarded = if field.starts_with(['=', '+', '-', '@']) {
            format!("'{field}")
        } else {
            field.clone()
        };
        let _ = write!(line, "\"{}\"", guarded.replace('"', "\"\""));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_give_the_digests_of_one_file_at_a_time() {
        if !crate::md5x16::available() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        // Sizes around MD5's padding edges and the lanes' chunk, more files than lanes.
        let sizes = [
            0,
            1,
            55,
            56,
            63,
            64,
            65,
            1000,
            LANE_CHUNK - 1,
            LANE_CHUNK,
            LANE_CHUNK + 1,
            3 * LANE_CHUNK + 70,
        ];
        let mut found = Vec::new();
        let mut seed = 7u32;
        for round in 0..4 {
            for (i, &size) in sizes.iter().enumerate() {
                let bytes: Vec<u8> = (0..size)
                    .map(|_| {
                        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                        (seed >> 24) as u8
                    })
                    .collect();
                let path = dir.path().join(format!("f{round}-{i}"));
                std::fs::write(&path, bytes).unwrap();
                found.push(Found::File(path));
            }
        }
        found.push(problem(dir.path(), "special", "a FIFO (not read)".into()));
        found.push(Found::File(dir.path().join("missing")));
        let again: Vec<Found> = found
            .iter()
            .map(|f| match f {
                Found::File(p) => Found::File(p.clone()),
                Found::Problem {
                    path,
                    status,
                    reason,
                } => problem(path, status, reason.clone()),
            })
            .collect();
        let quiet = Progress::start(0, std::time::Duration::ZERO);
        let lanes = hash_all_with(found, 2, true, &quiet);
        let single = hash_all_with(again, 1, false, &quiet);
        assert_eq!(lanes.len(), single.len());
        for (a, b) in lanes.iter().zip(&single) {
            assert_eq!(
                (a.status, &a.path, a.size, &a.sha256, &a.sha1, &a.md5),
                (b.status, &b.path, b.size, &b.sha256, &b.sha1, &b.md5)
            );
        }
        assert_eq!(
            lanes[0].md5.as_deref(),
            Some("d41d8cd98f00b204e9800998ecf8427e")
        );
        assert_eq!(lanes[lanes.len() - 1].status, "unreadable");
    }
}
