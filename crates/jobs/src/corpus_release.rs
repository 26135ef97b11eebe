//! New NSRL RDS releases for the reference corpus, imported on one replica at a time (the
//! `corpus.import` lease in the database) from two places:
//!
//! - a drop directory ([`crate::JobSettings::corpus_import_dir`]): `*.db` files newer than the
//!   live generation, looked for hourly (a directory listing);
//! - a release URL ([`crate::JobSettings::corpus_release`]), checked when due: at the first
//!   chance, then every `check_every` (90 days by default; NIST publishes quarterly) after the
//!   last successful check. The check is a conditional GET with the validators of the previous
//!   answer, so an unchanged release costs one request. The URL names a zip archive holding RDS
//!   v3 `.db` files, as NIST ships them, or a bare `.db`.
//!
//! A fetched release is streamed to `corpus-release.tmp/` beside the corpus root, its
//! databases extracted there (streamed too: releases are many GB), imported as a new
//! generation and swapped in; the directory is removed whatever happens, and a failure leaves
//! the live generation as it was. `corpus-release.json` beside the corpus root remembers the
//! validators, the last successful check and the failures since (retried after 1 h, then
//! 2 h, 4 h, ... up to a day), so the schedule survives restarts and is shared by replicas
//! that share the data directory.

use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use ingest::http::CappedBody;
use reqwest::header::{ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use crate::{Due, Job, JobContext};

/// Beside the corpus root: what the last checks of the release URL found.
pub const STATE_FILE: &str = "corpus-release.json";
/// Beside the corpus root: the download and the extracted databases while a release is
/// imported.
pub const WORK_DIR: &str = "corpus-release.tmp";

/// Shared by both imports, so they never run at once.
const LEASE_JOB: &str = "corpus.import";
const FIRST_RETRY: chrono::TimeDelta = chrono::TimeDelta::hours(1);
const LONGEST_RETRY: chrono::TimeDelta = chrono::TimeDelta::days(1);

/// Where and how to fetch NSRL releases.
#[derive(Clone)]
pub struct ReleaseSource {
    /// An RDS v3 release: a zip archive of `.db` files or a bare `.db`.
    pub url: reqwest::Url,
    /// Time from one successful check to the next.
    pub check_every: Duration,
    /// Largest download accepted.
    pub max_download_bytes: u64,
    /// Largest total of the databases extracted from one archive (a zip bomb stops here).
    pub max_extracted_bytes: u64,
    /// Time allowed until the response headers arrive.
    pub connect_timeout: Duration,
    /// Longest wait for the next piece of the body.
    pub stall_timeout: Duration,
    /// Time allowed for the whole download.
    pub total_timeout: Duration,
}

impl ReleaseSource {
    /// Quarterly checks, 512 GiB caps, and timeouts for a download of many GB.
    pub fn new(url: reqwest::Url) -> Self {
        Self {
            url,
            check_every: Duration::from_secs(90 * 86_400),
            max_download_bytes: 512 << 30,
            max_extracted_bytes: 512 << 30,
            connect_timeout: Duration::from_secs(60),
            stall_timeout: Duration::from_secs(600),
            total_timeout: Duration::from_secs(24 * 3600),
        }
    }
}

// The URL may carry a token (basic auth, a signed query): never shown whole.
impl fmt::Debug for ReleaseSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReleaseSource")
            .field("url", &redacted(&self.url))
            .field("check_every", &self.check_every)
            .field("max_download_bytes", &self.max_download_bytes)
            .field("max_extracted_bytes", &self.max_extracted_bytes)
            .field("connect_timeout", &self.connect_timeout)
            .field("stall_timeout", &self.stall_timeout)
            .field("total_timeout", &self.total_timeout)
            .finish()
    }
}

/// The URL with its credentials and query replaced, for logs and messages.
pub fn redacted(url: &reqwest::Url) -> String {
    model::redact_url(url.as_str())
}

/// Why fetching or importing a release failed, in words for the log and the saved state:
/// each step says what it was doing and with what (URLs redacted).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReleaseError(String);

impl From<String> for ReleaseError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

/// What one look at the release URL did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseCheck {
    /// No release URL, or no corpus, is configured.
    Off,
    /// Checked recently (or failed recently); the next check is at `next_at`.
    NotDue { next_at: DateTime<Utc> },
    /// An import runs in this process, or another replica holds the job.
    Busy,
    /// The server answered 304, or sent the bytes imported last time.
    Unchanged,
    /// A new generation is live.
    Imported { generation: String, entries: u64 },
    /// Nothing changed; retried later.
    Failed { error: String },
}

/// Looks for new releases hourly (within a minute after the hour, by the context's clock):
/// the drop directory, then the release URL when due. Takes `corpus.import` itself, only once
/// it has found work, and renews it while it imports.
#[derive(Default)]
pub struct CorpusReleaseJob {
    next: std::sync::Mutex<Option<DateTime<Utc>>>,
}

/// [`CorpusReleaseJob`]'s name.
pub const JOB: &str = "corpus.release";
const LOOK_EVERY: chrono::TimeDelta = chrono::TimeDelta::hours(1);

#[async_trait::async_trait]
impl Job for CorpusReleaseJob {
    fn name(&self) -> &'static str {
        JOB
    }

    async fn due(&self, ctx: &JobContext, now: DateTime<Utc>) -> Result<Option<Due>, model::Error> {
        let settings = &ctx.settings;
        if ctx.corpus.is_none()
            || (settings.corpus_import_dir.is_none() && settings.corpus_release.is_none())
        {
            return Ok(None);
        }
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        if next.is_some_and(|at| now < at) {
            return Ok(None);
        }
        *next = Some(now + LOOK_EVERY);
        Ok(Some(Due::Now))
    }

    async fn run(&self, ctx: &JobContext, _now: DateTime<Utc>) -> Result<(), model::Error> {
        run_due(ctx).await;
        Ok(())
    }
}

/// Swaps in a generation an import finished meanwhile (on another thread: opening verifies
/// the files). Requests in flight finish on the old generation.
pub async fn reload(ctx: &JobContext) {
    let Some(corpus) = ctx.corpus.clone() else {
        return;
    };
    match tokio::task::spawn_blocking(move || corpus.reload()).await {
        Ok(Ok(true)) => tracing::info!("reference corpus: new generation live"),
        Ok(Ok(false)) => {}
        Ok(Err(e)) => {
            tracing::error!(error = %e, "reference corpus reload failed; keeping the live generation")
        }
        Err(e) => tracing::error!(error = %e, "reference corpus reload panicked"),
    }
}

/// The hourly corpus upkeep: the drop directory, then the release URL when due.
pub async fn run_due(ctx: &JobContext) {
    import_dropped(ctx).await;
    match check_release(ctx).await {
        ReleaseCheck::Imported {
            generation,
            entries,
        } => {
            tracing::info!(%generation, entries, "NSRL release imported from the release URL")
        }
        ReleaseCheck::Unchanged => tracing::info!("NSRL release URL: no new release"),
        // Logged where it happened, with the details.
        ReleaseCheck::Failed { .. }
        | ReleaseCheck::Off
        | ReleaseCheck::NotDue { .. }
        | ReleaseCheck::Busy => {}
    }
}

/// Imports RDS databases from the drop directory that are newer than the live generation.
pub async fn import_dropped(ctx: &JobContext) {
    let (Some(dir), Some(corpus)) = (ctx.settings.corpus_import_dir.clone(), ctx.corpus.clone())
    else {
        return;
    };
    let Ok(_running) = ctx.corpus_importing.try_lock() else {
        return;
    };
    let live_since = corpus
        .info()
        .map(|i| std::time::SystemTime::from(i.imported_at));
    let newer: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "db"))
            .filter(|p| {
                let modified = std::fs::metadata(p).and_then(|m| m.modified()).ok();
                match (modified, live_since) {
                    (Some(m), Some(live)) => m > live,
                    (Some(_), None) => true,
                    _ => false,
                }
            })
            .collect(),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot read the corpus import directory");
            return;
        }
    };
    if newer.is_empty() {
        return;
    }
    let Some(lease) = HeldLease::take(ctx).await else {
        return;
    };
    tracing::info!(
        files = newer.len(),
        "importing a new NSRL release from the import directory"
    );
    let inputs: Vec<_> = newer
        .into_iter()
        .map(|p| (p, corpus::SetName::Modern))
        .collect();
    match import(corpus.root().to_path_buf(), inputs).await {
        Ok(info) => {
            tracing::info!(generation = %info.generation, entries = info.entries, "NSRL import finished");
            reload(ctx).await;
        }
        Err(e) => tracing::error!(error = %e, "the live generation is unchanged"),
    }
    lease.release(ctx).await;
}

/// Checks the release URL if a check is due, and imports what it serves when it changed.
pub async fn check_release(ctx: &JobContext) -> ReleaseCheck {
    let (Some(source), Some(corpus)) = (ctx.settings.corpus_release.as_ref(), ctx.corpus.clone())
    else {
        return ReleaseCheck::Off;
    };
    let Ok(_running) = ctx.corpus_importing.try_lock() else {
        return ReleaseCheck::Busy;
    };
    let place = Place::beside(corpus.root());
    let started = ctx.clock.now();
    if let Some(next_at) = next_check(&place.load(&source.url), source, started) {
        return ReleaseCheck::NotDue { next_at };
    }
    let Some(lease) = HeldLease::take(ctx).await else {
        return ReleaseCheck::Busy;
    };
    // Another replica may have finished a check between the look above and the lease.
    let mut saved = place.load(&source.url);
    if let Some(next_at) = next_check(&saved, source, started) {
        lease.release(ctx).await;
        return ReleaseCheck::NotDue { next_at };
    }
    let url = redacted(&source.url);
    tracing::info!(url = %url, "checking the NSRL release URL");
    let outcome = fetch_and_import(ctx, source, corpus.root(), &place, &saved).await;
    let check = match outcome {
        Ok(fetched) => {
            saved.checked_at = Some(started);
            saved.failures = 0;
            saved.failed_at = None;
            saved.last_error = None;
            match fetched {
                Fetched::NotModified(v) => {
                    saved.validators.update(v);
                    ReleaseCheck::Unchanged
                }
                Fetched::Same(v) => {
                    saved.validators = v;
                    ReleaseCheck::Unchanged
                }
                Fetched::Imported {
                    validators,
                    body_sha256,
                    info,
                } => {
                    saved.validators = validators;
                    saved.body_sha256 = Some(body_sha256);
                    saved.generation = Some(info.generation.clone());
                    reload(ctx).await;
                    ReleaseCheck::Imported {
                        generation: info.generation,
                        entries: info.entries,
                    }
                }
            }
        }
        Err(error) => {
            saved.failures = saved.failures.saturating_add(1);
            saved.failed_at = Some(started);
            let error = error.to_string();
            saved.last_error = Some(error.clone());
            let retry_at = started + retry_delay(saved.failures);
            tracing::error!(url = %url, error = %error, retry_at = %retry_at, "NSRL release fetch failed; the live generation is unchanged");
            ReleaseCheck::Failed { error }
        }
    };
    if let Err(e) = place.save(&saved) {
        tracing::error!(path = %place.state.display(), error = %e, "cannot record the NSRL release check; it will run again");
    }
    lease.release(ctx).await;
    check
}

/// None when a check is due now.
fn next_check(saved: &Saved, source: &ReleaseSource, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let every = chrono::TimeDelta::from_std(source.check_every).unwrap_or(chrono::TimeDelta::MAX);
    // An interval past the calendar's end means never again, not now.
    let mut next = saved.checked_at.map(|at| {
        at.checked_add_signed(every)
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    });
    if let Some(failed_at) = saved.failed_at
        && saved.failures > 0
    {
        let retry = failed_at + retry_delay(saved.failures);
        next = Some(next.map_or(retry, |n| n.max(retry)));
    }
    next.filter(|&at| at > now)
}

/// 1 h after the first failure, doubling up to a day: a download of many GB that keeps
/// failing is not repeated every hour.
fn retry_delay(failures: u32) -> chrono::TimeDelta {
    let doublings = failures.saturating_sub(1).min(5);
    (FIRST_RETRY * 2i32.pow(doublings)).min(LONGEST_RETRY)
}

/// The files beside the corpus root (in the data directory).
struct Place {
    state: PathBuf,
    work: PathBuf,
}

impl Place {
    fn beside(root: &Path) -> Self {
        let dir = root
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Self {
            state: dir.join(STATE_FILE),
            work: dir.join(WORK_DIR),
        }
    }

    /// What earlier checks of this URL found; nothing when they were of another URL or the
    /// file is unreadable (the release is then fetched again).
    fn load(&self, url: &reqwest::Url) -> Saved {
        let fresh = Saved {
            url_sha256: url_digest(url),
            ..Saved::default()
        };
        let bytes = match std::fs::read(&self.state) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return fresh,
            Err(e) => {
                tracing::warn!(path = %self.state.display(), error = %e, "cannot read the NSRL release state; fetching the release again");
                return fresh;
            }
        };
        match serde_json::from_slice::<Saved>(&bytes) {
            Ok(saved) if saved.url_sha256 == fresh.url_sha256 => saved,
            Ok(_) => fresh,
            Err(e) => {
                tracing::warn!(path = %self.state.display(), error = %e, "the NSRL release state is damaged; fetching the release again");
                fresh
            }
        }
    }

    /// Replaces the state file atomically.
    fn save(&self, saved: &Saved) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(saved)?;
        let mut tmp = self.state.clone().into_os_string();
        tmp.push(".new");
        let tmp = PathBuf::from(tmp);
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&json)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &self.state)
    }
}

/// The state file.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Saved {
    /// The URL the rest belongs to, hashed: it may carry a token.
    url_sha256: String,
    #[serde(flatten)]
    validators: Validators,
    /// Of the body imported last, so a server that ignores the validators and sends the same
    /// release again does not cause a second import.
    body_sha256: Option<String>,
    /// The generation that import made.
    generation: Option<String>,
    /// When the last successful check started.
    checked_at: Option<DateTime<Utc>>,
    /// Failed checks since the last successful one.
    #[serde(default)]
    failures: u32,
    failed_at: Option<DateTime<Utc>>,
    last_error: Option<String>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Validators {
    etag: Option<String>,
    last_modified: Option<String>,
}

impl Validators {
    fn of(response: &reqwest::Response) -> Self {
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        Self {
            etag: header(ETAG),
            last_modified: header(LAST_MODIFIED),
        }
    }

    /// A 304 may carry fresher validators; absent ones keep the earlier values.
    fn update(&mut self, newer: Validators) {
        if newer.etag.is_some() {
            self.etag = newer.etag;
        }
        if newer.last_modified.is_some() {
            self.last_modified = newer.last_modified;
        }
    }
}

fn url_digest(url: &reqwest::Url) -> String {
    hex::encode(Sha256::digest(url.as_str().as_bytes()))
}

enum Fetched {
    NotModified(Validators),
    Same(Validators),
    Imported {
        validators: Validators,
        body_sha256: String,
        info: corpus::GenerationInfo,
    },
}

async fn fetch_and_import(
    ctx: &JobContext,
    source: &ReleaseSource,
    root: &Path,
    place: &Place,
    saved: &Saved,
) -> Result<Fetched, ReleaseError> {
    let client = ctx
        .settings
        .refresh
        .https_client()
        .map_err(|e| format!("HTTP client: {}", ingest::error_chain(&e)))?;
    let work = WorkDir::create(&place.work)?;
    let download = match download(&client, source, &saved.validators, &work.path).await? {
        Download::NotModified(v) => return Ok(Fetched::NotModified(v)),
        Download::Body(d) => d,
    };
    if saved.body_sha256.as_deref() == Some(download.sha256.as_str()) {
        return Ok(Fetched::Same(download.validators));
    }
    tracing::info!(
        bytes = download.bytes,
        "NSRL release downloaded; extracting"
    );
    let (path, name, dir, limit) = (
        download.path.clone(),
        download.name.clone(),
        work.path.clone(),
        source.max_extracted_bytes,
    );
    let inputs = tokio::task::spawn_blocking(move || unpack(&path, &name, &dir, limit))
        .await
        .map_err(|e| format!("extraction stopped: {e}"))??;
    let names: Vec<String> = inputs
        .iter()
        .map(|(p, set)| format!("{} ({set})", file_name(p)))
        .collect();
    tracing::info!(databases = %names.join(", "), "importing the NSRL release");
    let info = import(root.to_path_buf(), inputs).await?;
    Ok(Fetched::Imported {
        validators: download.validators,
        body_sha256: download.sha256,
        info,
    })
}

/// Runs the corpus import off the async threads.
async fn import(
    root: PathBuf,
    inputs: Vec<(PathBuf, corpus::SetName)>,
) -> Result<corpus::GenerationInfo, ReleaseError> {
    tokio::task::spawn_blocking(move || {
        corpus::import(&inputs, &root, &corpus::TerminalProgress::new())
    })
    .await
    .map_err(|e| format!("NSRL import stopped: {e}"))?
    .map_err(|e| format!("NSRL import failed: {e}").into())
}

/// The work directory; removed with everything in it when dropped, whatever happened.
struct WorkDir {
    path: PathBuf,
}

impl WorkDir {
    fn create(path: &Path) -> Result<Self, ReleaseError> {
        // Left by a run that was killed: this replica holds the lease, nobody else uses it.
        match std::fs::remove_dir_all(path) {
            Ok(()) => {
                tracing::info!(path = %path.display(), "removed what an interrupted NSRL release import left")
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(ReleaseError::from(format!(
                    "cannot clear {}: {e}",
                    path.display()
                )));
            }
        }
        std::fs::create_dir_all(path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(Self {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the NSRL release work directory");
        }
    }
}

enum Download {
    NotModified(Validators),
    Body(Body),
}

struct Body {
    path: PathBuf,
    /// The URL's last path segment, for the set name and the manifest.
    name: String,
    bytes: u64,
    sha256: String,
    validators: Validators,
}

/// Streams the release to a file in `dir` within the size cap and the timeouts.
async fn download(
    client: &reqwest::Client,
    source: &ReleaseSource,
    known: &Validators,
    dir: &Path,
) -> Result<Download, ReleaseError> {
    let url = redacted(&source.url);
    let started = Instant::now();
    let deadline = started + source.total_timeout;
    let mut request = client.get(source.url.clone());
    if let Some(etag) = &known.etag {
        request = request.header(IF_NONE_MATCH, etag);
    }
    if let Some(since) = &known.last_modified {
        request = request.header(IF_MODIFIED_SINCE, since);
    }
    let headers_by = deadline.min(started + source.connect_timeout);
    let response = tokio::time::timeout_at(headers_by, request.send())
        .await
        .map_err(|_| {
            format!(
                "{url} sent no response headers within {:?}",
                source.connect_timeout.min(source.total_timeout)
            )
        })?
        .map_err(|e| {
            format!(
                "request for {url} failed: {}",
                ingest::error_chain(&e.without_url())
            )
        })?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_MODIFIED {
        return Ok(Download::NotModified(Validators::of(&response)));
    }
    if !status.is_success() {
        return Err(ReleaseError::from(format!(
            "{url} answered HTTP {}",
            status.as_u16()
        )));
    }
    let validators = Validators::of(&response);
    let mut body = CappedBody::new(response, source.max_download_bytes)
        .map_err(|e| ReleaseError::from(format!("{url} {e}")))?;
    let name = download_name(&source.url);
    let path = dir.join(&name);
    let mut file = tokio::fs::File::create(&path)
        .await
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let write_error = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut hasher = Sha256::new();
    loop {
        let wait_until = deadline.min(Instant::now() + source.stall_timeout);
        let chunk = match tokio::time::timeout_at(wait_until, body.chunk()).await {
            Ok(Ok(Some(chunk))) => chunk,
            Ok(Ok(None)) => break,
            Ok(Err(e)) => return Err(ReleaseError::from(format!("download of {url}: {e}"))),
            Err(_) if Instant::now() >= deadline => {
                return Err(ReleaseError::from(format!(
                    "download of {url} did not finish within {:?}",
                    source.total_timeout
                )));
            }
            Err(_) => {
                return Err(ReleaseError::from(format!(
                    "download of {url} stalled: nothing received for {:?} after {} bytes",
                    source.stall_timeout,
                    body.received()
                )));
            }
        };
        hasher.update(&chunk);
        file.write_all(&chunk).await.map_err(write_error)?;
    }
    file.flush().await.map_err(write_error)?;
    Ok(Download::Body(Body {
        path,
        name,
        bytes: body.received(),
        sha256: hex::encode(hasher.finalize()),
        validators,
    }))
}

/// The URL's last path segment when it is a plain file name, else `release`.
fn download_name(url: &reqwest::Url) -> String {
    url.path_segments()
        .and_then(|mut s| s.next_back())
        .filter(|n| {
            !n.is_empty()
                && !n.starts_with('.')
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        })
        .unwrap_or("release")
        .to_string()
}

/// The databases of a downloaded release: the file itself when it is one, the `.db` members
/// extracted into `dir` when it is a zip archive (the archive is then deleted to free the
/// space for the import).
fn unpack(
    download: &Path,
    name: &str,
    dir: &Path,
    max_extracted: u64,
) -> Result<Vec<(PathBuf, corpus::SetName)>, ReleaseError> {
    let mut magic = Vec::with_capacity(16);
    std::fs::File::open(download)
        .and_then(|f| f.take(16).read_to_end(&mut magic))
        .map_err(|e| format!("cannot read {}: {e}", download.display()))?;
    if magic.starts_with(b"SQLite format 3\0") {
        return Ok(vec![(download.to_path_buf(), set_named(name))]);
    }
    if !magic.starts_with(b"PK") {
        return Err(ReleaseError::from(format!(
            "the release {name} is neither a zip archive nor an SQLite database"
        )));
    }
    let databases = extract_databases(download, name, dir, max_extracted)?;
    if let Err(e) = std::fs::remove_file(download) {
        tracing::warn!(path = %download.display(), error = %e, "cannot remove the downloaded archive before the import");
    }
    Ok(databases)
}

fn extract_databases(
    archive_path: &Path,
    archive_name: &str,
    dir: &Path,
    max_extracted: u64,
) -> Result<Vec<(PathBuf, corpus::SetName)>, ReleaseError> {
    let file = std::fs::File::open(archive_path)
        .map_err(|e| format!("cannot open {}: {e}", archive_path.display()))?;
    let mut archive = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| {
        format!("the zip archive {archive_name} is unreadable (truncated or damaged?): {e}")
    })?;
    let mut left = max_extracted;
    let mut databases = Vec::new();
    for index in 0..archive.len() {
        let mut member = archive.by_index(index).map_err(|e| {
            format!("cannot read member {index} of the zip archive {archive_name}: {e}")
        })?;
        let Some(inner) = member.enclosed_name() else {
            tracing::warn!(
                archive = archive_name,
                index,
                "skipping a zip member whose name points outside the archive"
            );
            continue;
        };
        let base = file_name(&inner);
        if !member.is_file() || !base.to_ascii_lowercase().ends_with(".db") {
            continue;
        }
        let shown = inner.display().to_string();
        if member.encrypted() {
            return Err(ReleaseError::from(format!(
                "{shown} in {archive_name} is encrypted"
            )));
        }
        if member.size() > left {
            return Err(ReleaseError::from(format!(
                "{shown} in {archive_name} would unpack to {} bytes, over the {max_extracted}-byte extraction limit",
                member.size()
            )));
        }
        // One directory per member: two members may share a file name.
        let out_dir = dir.join(format!("member-{index}"));
        std::fs::create_dir_all(&out_dir)
            .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
        let out = out_dir.join(&base);
        let mut writer = std::io::BufWriter::new(
            std::fs::File::create(&out)
                .map_err(|e| format!("cannot create {}: {e}", out.display()))?,
        );
        // The sizes in the archive are not trusted: one byte past the limit is the proof.
        let copied = std::io::copy(&mut (&mut member).take(left.saturating_add(1)), &mut writer)
            .map_err(|e| format!("cannot extract {shown} from {archive_name}: {e}"))?;
        if copied > left {
            return Err(ReleaseError::from(format!(
                "{shown} in {archive_name} unpacks to more than the {max_extracted}-byte extraction limit"
            )));
        }
        writer
            .flush()
            .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
        left -= copied;
        let set = set_in(&shown).unwrap_or_else(|| set_named(archive_name));
        databases.push((out, set));
    }
    if databases.is_empty() {
        return Err(ReleaseError::from(format!(
            "the zip archive {archive_name} holds no RDS database (.db)"
        )));
    }
    Ok(databases)
}

/// The RDS set a file name names (NIST: `RDS_2024.12.1_android_minimal.db`); modern when
/// it names none.
fn set_named(name: &str) -> corpus::SetName {
    set_in(name).unwrap_or(corpus::SetName::Modern)
}

fn set_in(name: &str) -> Option<corpus::SetName> {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .find_map(|word| word.parse().ok())
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The `corpus.import` lease, renewed in the background while held (a minute at a time,
/// so a replica that dies mid-import hands the job on within a minute).
struct HeldLease {
    _heartbeat: crate::Heartbeat,
}

impl HeldLease {
    async fn take(ctx: &JobContext) -> Option<Self> {
        let now = ctx.clock.now();
        match ctx
            .store
            .try_lease(
                LEASE_JOB,
                &ctx.replica_id,
                now + crate::LEASE_HEARTBEAT,
                now,
            )
            .await
        {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => {
                tracing::warn!(error = %e, "cannot take the corpus import lease; will try again");
                return None;
            }
        }
        let lease = crate::Lease {
            name: LEASE_JOB.into(),
            holder: ctx.replica_id.clone(),
            until: DateTime::<Utc>::MAX_UTC,
        };
        Some(Self {
            _heartbeat: crate::Heartbeat::start(ctx, lease),
        })
    }

    /// Lets another replica take the job at once.
    async fn release(self, ctx: &JobContext) {
        drop(self);
        let now = ctx.clock.now();
        if let Err(e) = ctx
            .store
            .release_lease(LEASE_JOB, &ctx.replica_id, now)
            .await
        {
            tracing::warn!(error = %e, "cannot hand back the corpus import lease; it expires on its own");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_come_from_nist_file_names() {
        use corpus::SetName;
        assert_eq!(
            set_named("RDS_2024.12.1_android_minimal.db"),
            SetName::Android
        );
        assert_eq!(set_named("rds/RDS_2024.12.1_iOS_minimal.db"), SetName::Ios);
        assert_eq!(set_named("RDS_2024.12.1_legacy.db"), SetName::Legacy);
        assert_eq!(
            set_named("RDS_2024.12.1_modern_minimal.db"),
            SetName::Modern
        );
        // A set name inside a longer word is not a set.
        assert_eq!(set_named("studios-bios.db"), SetName::Modern);
    }

    #[test]
    fn urls_in_logs_hide_credentials_and_queries() {
        let url: reqwest::Url = "https://user:secret@mirror.example/rds/x.zip?token=abc"
            .parse()
            .unwrap();
        let shown = redacted(&url);
        assert!(!shown.contains("secret") && !shown.contains("abc") && !shown.contains("user"));
        assert!(shown.contains("mirror.example/rds/x.zip"), "{shown}");
        let shown = format!("{:?}", ReleaseSource::new(url));
        assert!(
            !shown.contains("secret") && !shown.contains("abc"),
            "{shown}"
        );
    }

    #[test]
    fn download_names_are_plain_file_names() {
        let name = |u: &str| download_name(&u.parse().unwrap());
        assert_eq!(
            name("https://h.example/rds/RDS_2025.03.1_modern_minimal.zip"),
            "RDS_2025.03.1_modern_minimal.zip"
        );
        assert_eq!(name("https://h.example/"), "release");
        assert_eq!(name("https://h.example/a/%2e%2e"), "release");
        assert_eq!(name("https://h.example/a/b%20c.db"), "release");
    }

    #[test]
    fn failures_back_off_to_a_day() {
        assert_eq!(retry_delay(1), chrono::TimeDelta::hours(1));
        assert_eq!(retry_delay(2), chrono::TimeDelta::hours(2));
        assert_eq!(retry_delay(5), chrono::TimeDelta::hours(16));
        assert_eq!(retry_delay(6), chrono::TimeDelta::days(1));
        assert_eq!(retry_delay(u32::MAX), chrono::TimeDelta::days(1));
    }
}
