//! From a vendor's artifacts to hash records.
//!
//! For each artifact: a published SHA-256 is recorded as is (no download). Otherwise the file
//! is streamed through [`download_and_hash`] (SHA-256, SHA-1, MD5, Authenticode signer), every
//! hash the vendor did publish is checked against the result, and a mismatch rejects the
//! artifact: the download or the channel may have been tampered with. One failing artifact
//! never stops the others; the [`VendorReport`] counts what happened. Artifacts are fetched
//! concurrently, at most `FetchLimits::downloads_per_host` at once from one host; an
//! artifact waiting for its records to be written gives up its turn, so many artifacts'
//! records are written in one transaction while the next ones download.
//!
//! An artifact that is an archive (zip, tar in its usual compressions) is also read for the
//! files inside it that a host runs or loads ([`crate::members`]): when the store does not
//! have it yet ([`RecordSink::already_recorded`]) it is streamed once, every hash the vendor
//! published for it is checked against the bytes, and only then are the archive and each
//! member recorded, a member named by its path inside the archive, with
//! `<archive URL>#<member path>` as source URL, the archive's version, platform and arch,
//! and the signer of a signed PE. Bytes that disagree with a published hash, or a package
//! that contradicts its own manifest (`.MTREE`, `md5sums`), leave no record at all: the
//! previous version stays current and the vendor's run reports the mismatch. An archive
//! already recorded is not downloaded again.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use model::{Clock, DownloadAudit, NewRecord, RecordOutcome};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::download::{Downloaded, download_and_hash};
use crate::fetch::{Artifact, FetchContext, Fetcher};
use crate::formats::{compare_versions, encode_path, file_name};
use crate::hasher::{PublishedHashError, verify_published};
use crate::members::{ArchiveFormat, MemberError, MemberScan, download_archive};
use crate::rpm::{RpmHeader, download_rpm};

/// Where records go; the store adapter implements it.
#[async_trait]
pub trait RecordSink: Send + Sync {
    async fn record(&self, r: NewRecord) -> Result<RecordOutcome, model::Error>;
    async fn download_audited(&self, audit: DownloadAudit) -> Result<(), model::Error>;
    /// Whether this very record (vendor, file, version, platform, arch and SHA-256) is
    /// already in the store, current or superseded: a package or archive recorded before
    /// is not downloaded again. Sinks that cannot tell answer `false` (download again).
    async fn already_recorded(&self, _record: &NewRecord) -> Result<bool, model::Error> {
        Ok(false)
    }
    /// Whether this very file (vendor, file, version, platform, arch) is already in the
    /// store, current or superseded, with the SHA-1 `record.hash_sha1`: a channel that
    /// publishes no SHA-256 (npm) is not downloaded again for a release already recorded.
    /// Sinks that cannot tell answer `false` (download again).
    async fn recorded_with_sha1(&self, _record: &NewRecord) -> Result<bool, model::Error> {
        Ok(false)
    }
    /// Records a file of a past version whose channel published its release date: its
    /// history starts at `released` (the store keeps history order equal to version order
    /// and never lets it displace a newer current record). Sinks without history record it
    /// as any other.
    async fn record_released(
        &self,
        r: NewRecord,
        _released: DateTime<Utc>,
    ) -> Result<RecordOutcome, model::Error> {
        self.record(r).await
    }
    /// Records the files found in one artifact (an archive's members), in order, each as
    /// `record` would: one result a file. A sink that can writes them together (the store
    /// in one transaction); the default records them one by one.
    async fn record_many(&self, rs: Vec<NewRecord>) -> Vec<Result<RecordOutcome, model::Error>> {
        let mut results = Vec::with_capacity(rs.len());
        for r in rs {
            results.push(self.record(r).await);
        }
        results
    }
    /// [`record_many`](Self::record_many) for the files of a past version whose history
    /// starts at `released` (as [`record_released`](Self::record_released)).
    async fn record_many_released(
        &self,
        rs: Vec<NewRecord>,
        released: DateTime<Utc>,
    ) -> Vec<Result<RecordOutcome, model::Error>> {
        let mut results = Vec::with_capacity(rs.len());
        for r in rs {
            results.push(self.record_released(r, released).await);
        }
        results
    }
    /// A certificate that signed the downloaded file recorded as `record_id` (primary or
    /// nested signature), kept with its CRL distribution points and issuer for the
    /// revocation checker. Sinks that don't track certificates ignore it.
    async fn signer_seen(
        &self,
        _record_id: &str,
        _signer: &crate::SignerInfo,
    ) -> Result<(), model::Error> {
        Ok(())
    }
}

pub use model::ProblemKind;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub kind: ProblemKind,
    /// The artifact concerned, if any.
    pub url: Option<String>,
    pub message: String,
}

/// What one vendor run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VendorReport {
    pub fetcher: String,
    pub vendor: String,
    /// The vendor is disabled: nothing was read.
    pub skipped: bool,
    pub discovered: usize,
    /// New records.
    pub recorded: usize,
    /// Records the store already had.
    pub unchanged: usize,
    /// Records whose hash differs from the one known for the same file and version.
    pub hash_changed: usize,
    /// Completed downloads (including those then rejected).
    pub downloaded: usize,
    /// Artifacts refused: hash mismatches and invalid data.
    pub rejected: usize,
    pub mismatches: usize,
    /// Discovery, download and store failures.
    pub errors: usize,
    /// Files inside archives recorded (new or already known); counted in `recorded` and
    /// `unchanged` too.
    pub members: usize,
    /// Archives whose members could not all be read.
    pub archive_problems: usize,
    pub problems: Vec<Problem>,
}

impl VendorReport {
    /// Adds what one artifact's partial report counted.
    fn absorb(&mut self, part: VendorReport) {
        self.recorded += part.recorded;
        self.unchanged += part.unchanged;
        self.hash_changed += part.hash_changed;
        self.downloaded += part.downloaded;
        self.rejected += part.rejected;
        self.mismatches += part.mismatches;
        self.errors += part.errors;
        self.members += part.members;
        self.archive_problems += part.archive_problems;
        self.problems.extend(part.problems);
    }

    fn problem(&mut self, kind: ProblemKind, url: Option<&str>, message: String) {
        // Configured URLs may carry credentials; nothing below (logs, health) may see them.
        let url = url.map(model::redact_url);
        let url = url.as_deref();
        let message = model::redact_urls(&message);
        tracing::warn!(fetcher = %self.fetcher, kind = kind.as_str(), url, %message, "ingest problem");
        match kind {
            ProblemKind::HashMismatch => {
                self.rejected += 1;
                self.mismatches += 1;
            }
            ProblemKind::InvalidArtifact => self.rejected += 1,
            ProblemKind::Archive => self.archive_problems += 1,
            _ => self.errors += 1,
        }
        self.problems.push(Problem {
            kind,
            url: url.map(str::to_owned),
            message,
        });
    }
}

/// An error with its causes on one line ("error sending request…: connection refused"):
/// reqwest's own message alone says little. A failed connection ends with the setting that
/// fixes it ([`crate::http::hint`]).
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = model::error::chain(e);
    if let Some(hint) = crate::http::hint(&text) {
        text.push_str(" (");
        text.push_str(hint);
        text.push(')');
    }
    text
}

/// Discovers `fetcher`'s artifacts and records each. Never panics on remote data; every
/// failure ends up in the report.
pub async fn ingest_vendor(
    fetcher: &dyn Fetcher,
    ctx: &FetchContext,
    sink: &dyn RecordSink,
    clock: &dyn Clock,
) -> VendorReport {
    let mut report = VendorReport {
        fetcher: fetcher.id().into(),
        vendor: fetcher.vendor().into(),
        ..Default::default()
    };
    if !ctx.config.enabled {
        report.skipped = true;
        return report;
    }
    let discovered = fetcher.discover(ctx).await;
    for note in ctx.take_notes() {
        report.problem(ProblemKind::Discovery, None, error_chain(&note));
    }
    let mut artifacts = match discovered {
        Ok(artifacts) => artifacts,
        Err(e) => {
            report.problem(ProblemKind::Discovery, None, error_chain(&e));
            return report;
        }
    };
    if artifacts.is_empty() {
        // A channel that answered but listed nothing has most likely changed its format;
        // that is a failure to read it, never a vendor with nothing to record.
        let message = "the channel answered but listed no artifact; its format may have changed";
        report.problem(ProblemKind::Discovery, None, message.into());
        return report;
    }
    report.discovered = artifacts.len();
    // Oldest first: the newest version of a family is started last (the store keeps the
    // newest current whatever order records arrive in).
    artifacts.sort_by(|a, b| compare_versions(&a.version, &b.version));
    // Artifacts are ingested concurrently: at most `MAX_WORKING_ARTIFACTS` at work, of those
    // at most `downloads_per_host` against one host; each has its own partial report,
    // folded in artifact order.
    let turns = Turns {
        hosts: HostLimits::new(ctx.limits.downloads_per_host),
        working: Semaphore::new(MAX_WORKING_ARTIFACTS),
        records_waiting: Semaphore::new(MAX_RECORDS_WAITING),
    };
    let mut tasks: Vec<PartFuture<'_>> = Vec::with_capacity(artifacts.len());
    for artifact in &artifacts {
        let mut part = VendorReport {
            fetcher: report.fetcher.clone(),
            vendor: report.vendor.clone(),
            ..Default::default()
        };
        let turns = &turns;
        tasks.push(Box::pin(async move {
            let sink = ArtifactSink {
                sink,
                released: ctx.released(&artifact.url),
                turns,
                url: &artifact.url,
                turn: std::sync::Mutex::new(Some(turns.take(&artifact.url).await)),
            };
            ingest_artifact(artifact, ctx, &sink, clock, &mut part).await;
            part
        }));
    }
    let parts: Vec<VendorReport> = futures::stream::iter(tasks)
        .buffered(MAX_ARTIFACTS_IN_FLIGHT)
        .collect()
        .await;
    for part in parts {
        report.absorb(part);
    }
    report
}

/// One artifact's ingest, yielding its partial report.
type PartFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = VendorReport> + Send + 'a>>;

/// Artifacts of one vendor at work at once (downloading, reading an archive, asking the
/// store what it has), all hosts together.
pub const MAX_WORKING_ARTIFACTS: usize = 16;

/// Artifacts of one vendor in flight at once: at work, or waiting for their records to be
/// written. Concurrent writes share a transaction, and what a commit costs grows far more
/// slowly than its records, so the more artifacts wait together the faster they are
/// written; waiting holds no download and no connection.
pub const MAX_ARTIFACTS_IN_FLIGHT: usize = 256;

/// Records of one vendor waiting to be written at once (a few tens of MB), whatever the
/// artifacts' sizes: 256 archives of 5,000 members each would be far more. It also bounds
/// a transaction of the refresh.
const MAX_RECORDS_WAITING: usize = 65_536;

/// The slots an artifact works in (its host's and one of the vendor's), and the records
/// that may wait for the store.
struct Turns {
    hosts: HostLimits,
    working: Semaphore,
    records_waiting: Semaphore,
}

/// An artifact's turn to work, given up while it waits for its records to be written.
struct Turn<'a> {
    _working: Option<tokio::sync::SemaphorePermit<'a>>,
    _host: Option<OwnedSemaphorePermit>,
}

impl Turns {
    /// A working slot, then a slot of `url`'s host (always in that order, so no two
    /// artifacts each hold what the other waits for).
    async fn take(&self, url: &str) -> Turn<'_> {
        // The semaphores are never closed.
        let working = self.working.acquire().await.ok();
        Turn {
            _working: working,
            _host: self.hosts.acquire(url).await,
        }
    }
}

/// The sink one artifact records through. A past version whose channel published its
/// release date has its records start then. A write gives up the artifact's turn while it
/// waits for its transaction and takes a turn again after, so artifacts waiting for the
/// store never hold back the others' downloads; reads and audits keep the turn.
struct ArtifactSink<'a> {
    sink: &'a dyn RecordSink,
    released: Option<DateTime<Utc>>,
    turns: &'a Turns,
    url: &'a str,
    turn: std::sync::Mutex<Option<Turn<'a>>>,
}

impl ArtifactSink<'_> {
    /// Runs `write` of `records` records without the artifact's turn. Room for the records
    /// is taken first, with the turn still held, so artifacts whose records wait for room
    /// hold working slots: what waits in memory stays bounded.
    async fn waiting<T>(&self, records: usize, write: impl std::future::Future<Output = T>) -> T {
        let records = u32::try_from(records.clamp(1, MAX_RECORDS_WAITING)).unwrap_or(1);
        // The semaphore is never closed.
        let waiting = self.turns.records_waiting.acquire_many(records).await.ok();
        drop(self.turn.lock().unwrap_or_else(|e| e.into_inner()).take());
        let written = write.await;
        drop(waiting);
        let turn = self.turns.take(self.url).await;
        *self.turn.lock().unwrap_or_else(|e| e.into_inner()) = Some(turn);
        written
    }
}

#[async_trait]
impl RecordSink for ArtifactSink<'_> {
    async fn record(&self, r: NewRecord) -> Result<RecordOutcome, model::Error> {
        match self.released {
            Some(at) => self.record_released(r, at).await,
            None => self.waiting(1, self.sink.record(r)).await,
        }
    }
    async fn record_released(
        &self,
        r: NewRecord,
        released: DateTime<Utc>,
    ) -> Result<RecordOutcome, model::Error> {
        self.waiting(1, self.sink.record_released(r, released))
            .await
    }
    async fn record_many(&self, rs: Vec<NewRecord>) -> Vec<Result<RecordOutcome, model::Error>> {
        match self.released {
            Some(at) => self.record_many_released(rs, at).await,
            None => self.waiting(rs.len(), self.sink.record_many(rs)).await,
        }
    }
    async fn record_many_released(
        &self,
        rs: Vec<NewRecord>,
        released: DateTime<Utc>,
    ) -> Vec<Result<RecordOutcome, model::Error>> {
        self.waiting(rs.len(), self.sink.record_many_released(rs, released))
            .await
    }
    async fn download_audited(&self, audit: DownloadAudit) -> Result<(), model::Error> {
        self.sink.download_audited(audit).await
    }
    async fn already_recorded(&self, record: &NewRecord) -> Result<bool, model::Error> {
        self.sink.already_recorded(record).await
    }
    async fn recorded_with_sha1(&self, record: &NewRecord) -> Result<bool, model::Error> {
        self.sink.recorded_with_sha1(record).await
    }
    async fn signer_seen(
        &self,
        record_id: &str,
        signer: &crate::SignerInfo,
    ) -> Result<(), model::Error> {
        self.sink.signer_seen(record_id, signer).await
    }
}

/// One semaphore per host (and port) an artifact is fetched from.
struct HostLimits {
    per_host: usize,
    hosts: std::sync::Mutex<std::collections::HashMap<String, Arc<Semaphore>>>,
}

impl HostLimits {
    fn new(per_host: usize) -> Self {
        Self {
            per_host: per_host.max(1),
            hosts: Default::default(),
        }
    }

    async fn acquire(&self, url: &str) -> Option<OwnedSemaphorePermit> {
        let host = reqwest::Url::parse(url)
            .ok()
            .map(|u| {
                format!(
                    "{}:{:?}",
                    u.host_str().unwrap_or(""),
                    u.port_or_known_default()
                )
            })
            .unwrap_or_default();
        let semaphore = {
            let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
            hosts
                .entry(host)
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_host)))
                .clone()
        };
        // The semaphore is never closed.
        semaphore.acquire_owned().await.ok()
    }
}

fn new_record(a: &Artifact) -> NewRecord {
    NewRecord {
        vendor: a.vendor.clone(),
        executable_name: a.executable_name.clone(),
        version: a.version.clone(),
        platform: a.platform,
        arch: a.arch,
        hash_sha256: String::new(),
        hash_sha1: None,
        hash_md5: None,
        source_url: a.url.clone(),
        download_verified: false,
        sig_signer: None,
        sig_issuer: None,
        sig_serial: None,
        sig_thumbprint: None,
        size: None,
    }
}

/// What the pipeline reads inside an artifact once it is downloaded, beyond its own digests.
#[derive(Clone, Copy)]
enum Contents {
    /// Nothing: a single file.
    Opaque,
    /// An RPM package: the per-file SHA-256 of its header.
    Rpm,
    /// An archive or package whose files become member records.
    Archive(ArchiveFormat),
}

async fn ingest_artifact(
    a: &Artifact,
    ctx: &FetchContext,
    sink: &dyn RecordSink,
    clock: &dyn Clock,
    report: &mut VendorReport,
) {
    let members = ctx.limits.members.enabled;
    let contents = if members && is_rpm(&a.url) {
        Contents::Rpm
    } else {
        match ArchiveFormat::from_name(file_name(&a.url)).filter(|_| members) {
            Some(format) => Contents::Archive(format),
            None => Contents::Opaque,
        }
    };
    if let Some(sha256) = &a.published.sha256 {
        let record = NewRecord {
            hash_sha256: sha256.clone(),
            hash_sha1: a.published.sha1.clone(),
            hash_md5: a.published.md5.clone(),
            ..new_record(a)
        };
        return ingest_published(a, record, contents, ctx, sink, clock, report).await;
    }
    // Only a SHA-1 published (npm): a file already recorded with it is not downloaded again.
    if let Some(sha1) = &a.published.sha1 {
        let probe = NewRecord {
            hash_sha1: Some(sha1.clone()),
            ..new_record(a)
        };
        match sink.recorded_with_sha1(&probe).await {
            Ok(true) => {
                report.unchanged += 1;
                return;
            }
            Ok(false) => {}
            Err(e) => return report.problem(ProblemKind::Record, Some(&a.url), error_chain(&e)),
        }
    }
    ingest_downloaded(a, contents, ctx, sink, clock, report).await;
}

/// An artifact whose SHA-256 the vendor published (`record` carries it): recorded as
/// published when nothing inside it is read, or when it was already recorded (its files
/// were read when it was first seen); otherwise downloaded, checked, and recorded with its
/// members.
async fn ingest_published(
    a: &Artifact,
    record: NewRecord,
    contents: Contents,
    ctx: &FetchContext,
    sink: &dyn RecordSink,
    clock: &dyn Clock,
    report: &mut VendorReport,
) {
    // A past version taken in by a history horizon: its published hash only.
    if matches!(contents, Contents::Opaque) || ctx.is_history_only(&a.url) {
        store(sink, record, &a.url, report).await;
        return;
    }
    match sink.already_recorded(&record).await {
        Ok(true) => {
            store(sink, record, &a.url, report).await;
            return;
        }
        Ok(false) => {}
        Err(e) => return report.problem(ProblemKind::Record, Some(&a.url), error_chain(&e)),
    }
    // Seen for the first time: downloaded and checked before anything is recorded, so
    // that bytes which disagree with the published hash leave no record at all (the
    // previous version stays current).
    let format = match contents {
        Contents::Rpm => return rpm_files(a, record, ctx, sink, clock, report).await,
        Contents::Archive(format) => format,
        Contents::Opaque => return,
    };
    match fetch_archive(a, format, ctx, clock, report).await {
        Fetched::Verified(verified) => {
            let (downloaded, scan) = *verified;
            if let Err(e @ MemberError::PackageManifestMismatch { .. }) = &scan {
                // The package contradicts its own manifest: refused whole.
                let message = error_chain(e);
                return report.problem(ProblemKind::HashMismatch, Some(&a.url), message);
            }
            if store_downloaded(a, record, &downloaded, sink, report)
                .await
                .is_some()
            {
                record_members(a, ctx, scan, sink, report).await;
            }
        }
        // The published hash is recorded as for any file the service does not
        // download; its members are read on a later run.
        Fetched::Failed => {
            store(sink, record, &a.url, report).await;
        }
        Fetched::Refused => {}
    }
}

/// An artifact without a published SHA-256: downloaded and hashed (checked against any
/// hash that was published), then recorded with its digests, its Authenticode signer and
/// the files of an archive.
async fn ingest_downloaded(
    a: &Artifact,
    contents: Contents,
    ctx: &FetchContext,
    sink: &dyn RecordSink,
    clock: &dyn Clock,
    report: &mut VendorReport,
) {
    let (downloaded, scan) = match contents {
        Contents::Archive(format) => match fetch_archive(a, format, ctx, clock, report).await {
            Fetched::Verified(verified) => {
                let (downloaded, scan) = *verified;
                if let Err(e @ MemberError::PackageManifestMismatch { .. }) = &scan {
                    let message = error_chain(e);
                    return report.problem(ProblemKind::HashMismatch, Some(&a.url), message);
                }
                (downloaded, Some(scan))
            }
            Fetched::Failed | Fetched::Refused => return,
        },
        Contents::Opaque | Contents::Rpm => {
            let downloaded =
                match download_and_hash(&ctx.client, &a.url, &ctx.limits.download, clock).await {
                    Ok(d) => d,
                    Err(e) => {
                        return report.problem(
                            ProblemKind::Download,
                            Some(&a.url),
                            error_chain(&e),
                        );
                    }
                };
            report.downloaded += 1;
            if !published_match(a, &downloaded, report) {
                return;
            }
            (downloaded, None)
        }
    };
    if let Some(e) = &downloaded.pe_signer_error {
        // The hashes stand; only the signer fields stay empty.
        tracing::warn!(url = %a.url, error = %e, "Authenticode signer unreadable");
    }
    let signer = downloaded.pe_signer.as_ref();
    let digests = &downloaded.digests;
    let record_data = NewRecord {
        hash_sha256: digests.sha256.clone(),
        hash_sha1: Some(digests.sha1.clone()),
        hash_md5: Some(digests.md5.clone()),
        size: Some(downloaded.size_bytes),
        download_verified: true,
        sig_signer: signer.map(|s| s.sig_signer.clone()),
        sig_issuer: signer.map(|s| s.sig_issuer.clone()),
        sig_serial: signer.map(|s| s.sig_serial.clone()),
        sig_thumbprint: signer.map(|s| s.sig_thumbprint.clone()),
        ..new_record(a)
    };
    let Some(outcome) = store(sink, record_data, &a.url, report).await else {
        return;
    };
    audit(sink, &downloaded, a, outcome.id().to_string(), report).await;
    if let Some(primary) = signer {
        signers_seen(sink, outcome.id(), primary, &a.url, report).await;
    }
    if let Some(scan) = scan {
        record_members(a, ctx, scan, sink, report).await;
    }
}

/// Records a downloaded artifact under its published hashes, with its size, and audits the
/// download against the record.
async fn store_downloaded(
    a: &Artifact,
    record: NewRecord,
    downloaded: &Downloaded,
    sink: &dyn RecordSink,
    report: &mut VendorReport,
) -> Option<RecordOutcome> {
    let record = NewRecord {
        size: Some(downloaded.size_bytes),
        ..record
    };
    let outcome = store(sink, record, &a.url, report).await?;
    audit(sink, downloaded, a, outcome.id().to_string(), report).await;
    Some(outcome)
}

/// Every hash the vendor published for `a` agrees with the downloaded bytes; otherwise the
/// problem is reported and the artifact (with anything inside it) is refused.
fn published_match(a: &Artifact, downloaded: &Downloaded, report: &mut VendorReport) -> bool {
    let published = [&a.published.sha256, &a.published.sha1, &a.published.md5];
    for published in published {
        match verify_published(published.as_deref(), &downloaded.digests) {
            Ok(()) => {}
            Err(e @ PublishedHashError::Mismatch { .. }) => {
                report.problem(ProblemKind::HashMismatch, Some(&a.url), e.to_string());
                return false;
            }
            Err(e @ PublishedHashError::Invalid(_)) => {
                report.problem(ProblemKind::InvalidArtifact, Some(&a.url), e.to_string());
                return false;
            }
        }
    }
    true
}

/// What became of an archive's download.
enum Fetched {
    /// Every published hash agrees with the bytes; the members as scanned.
    Verified(Box<(Downloaded, Result<MemberScan, MemberError>)>),
    /// The download failed (reported).
    Failed,
    /// The bytes disagree with a published hash (reported): possible tampering.
    Refused,
}

/// Downloads an archive, hashing it and scanning its members in one pass.
async fn fetch_archive(
    a: &Artifact,
    format: ArchiveFormat,
    ctx: &FetchContext,
    clock: &dyn Clock,
    report: &mut VendorReport,
) -> Fetched {
    let limits = &ctx.limits;
    let scanned = match download_archive(
        &ctx.client,
        &a.url,
        format,
        &limits.download,
        &limits.members,
        clock,
    )
    .await
    {
        Ok(s) => s,
        Err(e) => {
            report.problem(ProblemKind::Download, Some(&a.url), error_chain(&e));
            return Fetched::Failed;
        }
    };
    report.downloaded += 1;
    let downloaded = Downloaded {
        digests: scanned.digests,
        size_bytes: scanned.size_bytes,
        downloaded_at: scanned.downloaded_at,
        pe_signer: None,
        pe_signer_error: None,
    };
    if published_match(a, &downloaded, report) {
        Fetched::Verified(Box::new((downloaded, scanned.scan)))
    } else {
        Fetched::Refused
    }
}

async fn audit(
    sink: &dyn RecordSink,
    downloaded: &Downloaded,
    a: &Artifact,
    record_id: String,
    report: &mut VendorReport,
) {
    let audit = DownloadAudit {
        vendor: report.vendor.clone(),
        downloaded_at: downloaded.downloaded_at,
        url: a.url.clone(),
        size_bytes: downloaded.size_bytes,
        hash_record_id: record_id,
    };
    if let Err(e) = sink.download_audited(audit).await {
        report.problem(ProblemKind::Audit, Some(&a.url), error_chain(&e));
    }
}

async fn signers_seen(
    sink: &dyn RecordSink,
    record_id: &str,
    primary: &crate::SignerInfo,
    url: &str,
    report: &mut VendorReport,
) {
    for cert in std::iter::once(primary).chain(primary.nested.iter()) {
        if let Err(e) = sink.signer_seen(record_id, cert).await {
            report.problem(ProblemKind::Record, Some(url), error_chain(&e));
        }
    }
}

/// Records the members of an archive whose published hashes were checked.
async fn record_members(
    a: &Artifact,
    ctx: &FetchContext,
    scan: Result<MemberScan, MemberError>,
    sink: &dyn RecordSink,
    report: &mut VendorReport,
) {
    let scan = match scan {
        Ok(scan) => scan,
        Err(e @ MemberError::PackageManifestMismatch { .. }) => {
            return report.problem(ProblemKind::HashMismatch, Some(&a.url), error_chain(&e));
        }
        Err(e) => return report.problem(ProblemKind::Archive, Some(&a.url), error_chain(&e)),
    };
    if let Some(why) = &scan.stopped {
        let message = format!("members read only up to a stop: {why}");
        report.problem(ProblemKind::Archive, Some(&a.url), message);
    }
    let under_archive = ctx.members_under_archive(&a.url);
    let mut files = Vec::with_capacity(scan.members.len());
    let mut signed = Vec::with_capacity(scan.members.len());
    for member in scan.members {
        let path = member.path.trim_start_matches("./").trim_start_matches('/');
        let url = format!("{}#{}", a.url, encode_path(path));
        let signer = member.pe_signer;
        let qualified = format!("{}/{path}", a.executable_name);
        // A name too long for a record keeps the path alone rather than lose the file.
        let name = if under_archive && qualified.len() <= model::record::MAX_NAME_BYTES {
            qualified
        } else {
            path.to_owned()
        };
        let record = NewRecord {
            executable_name: name,
            hash_sha256: member.digests.sha256,
            hash_sha1: Some(member.digests.sha1),
            hash_md5: Some(member.digests.md5),
            size: Some(member.size),
            source_url: url.clone(),
            download_verified: true,
            sig_signer: signer.as_ref().map(|s| s.sig_signer.clone()),
            sig_issuer: signer.as_ref().map(|s| s.sig_issuer.clone()),
            sig_serial: signer.as_ref().map(|s| s.sig_serial.clone()),
            sig_thumbprint: signer.as_ref().map(|s| s.sig_thumbprint.clone()),
            ..new_record(a)
        };
        files.push((record, url.clone()));
        signed.push((url, signer));
    }
    let outcomes = store_all(sink, files, report).await;
    for (outcome, (url, signer)) in outcomes.into_iter().zip(signed) {
        let Some(outcome) = outcome else { continue };
        report.members += 1;
        if let Some(primary) = &signer {
            signers_seen(sink, outcome.id(), primary, &url, report).await;
        }
    }
}

fn is_rpm(url: &str) -> bool {
    let name = file_name(url).to_ascii_lowercase();
    name.ends_with(".rpm") && !name.ends_with(".src.rpm")
}

/// Downloads an RPM package whose SHA-256 the repository published, checks its bytes
/// against every published hash, and only then records the package (`record`) and the
/// executables and libraries its header lists, each with the header's SHA-256 (the only
/// digest an RPM header carries; SHA-1 and MD5 stay empty, and `download_verified` is false:
/// the file itself was not hashed here). A failed download records the published hash alone.
async fn rpm_files(
    a: &Artifact,
    record: NewRecord,
    ctx: &FetchContext,
    sink: &dyn RecordSink,
    clock: &dyn Clock,
    report: &mut VendorReport,
) {
    let scanned = match download_rpm(&ctx.client, &a.url, &ctx.limits.download, clock).await {
        Ok(s) => s,
        Err(e) => {
            report.problem(ProblemKind::Download, Some(&a.url), error_chain(&e));
            store(sink, record, &a.url, report).await;
            return;
        }
    };
    report.downloaded += 1;
    let downloaded = Downloaded {
        digests: scanned.digests,
        size_bytes: scanned.size_bytes,
        downloaded_at: scanned.downloaded_at,
        pe_signer: None,
        pe_signer_error: None,
    };
    if !published_match(a, &downloaded, report) {
        return;
    }
    if store_downloaded(a, record, &downloaded, sink, report)
        .await
        .is_none()
    {
        return;
    };
    let header: RpmHeader = match scanned.header {
        Ok(h) => h,
        Err(e) => return report.problem(ProblemKind::Archive, Some(&a.url), error_chain(&e)),
    };
    let max = ctx.limits.members.max_members;
    let executables: Vec<_> = header.files.iter().filter(|f| f.is_executable()).collect();
    if executables.len() > max {
        let message = format!("files recorded only up to a stop: more than {max} members");
        report.problem(ProblemKind::Archive, Some(&a.url), message);
    }
    let files = executables.into_iter().take(max).map(|file| {
        let path = file.path.trim_start_matches('/');
        let url = format!("{}#{}", a.url, encode_path(path));
        let record = NewRecord {
            executable_name: path.to_owned(),
            hash_sha256: file.sha256.clone(),
            // The header's size of the installed file.
            size: Some(file.size),
            source_url: url.clone(),
            ..new_record(a)
        };
        (record, url)
    });
    let outcomes = store_all(sink, files.collect(), report).await;
    report.members += outcomes.iter().flatten().count();
}

/// Validates and stores one record, counting the outcome.
async fn store(
    sink: &dyn RecordSink,
    record: NewRecord,
    url: &str,
    report: &mut VendorReport,
) -> Option<RecordOutcome> {
    let record = validated(record, url, report)?;
    counted(sink.record(record).await, url, report)
}

/// Validates and stores the files of one artifact (each with its URL) in one call, counting
/// each outcome: the outcome of each file in order, `None` where it was not stored.
async fn store_all(
    sink: &dyn RecordSink,
    files: Vec<(NewRecord, String)>,
    report: &mut VendorReport,
) -> Vec<Option<RecordOutcome>> {
    let mut outcomes = vec![None; files.len()];
    let mut valid = Vec::with_capacity(files.len());
    let mut records = Vec::with_capacity(files.len());
    for (i, (record, url)) in files.into_iter().enumerate() {
        if let Some(record) = validated(record, &url, report) {
            valid.push((i, url));
            records.push(record);
        }
    }
    if records.is_empty() {
        return outcomes;
    }
    let results = sink.record_many(records).await;
    for ((i, url), result) in valid.into_iter().zip(results) {
        outcomes[i] = counted(result, &url, report);
    }
    outcomes
}

fn validated(record: NewRecord, url: &str, report: &mut VendorReport) -> Option<NewRecord> {
    match record.validate() {
        Ok(r) => Some(r),
        Err(e) => {
            report.problem(ProblemKind::InvalidArtifact, Some(url), e.to_string());
            None
        }
    }
}

/// Counts a stored record's outcome, or its error, in the report.
fn counted(
    result: Result<RecordOutcome, model::Error>,
    url: &str,
    report: &mut VendorReport,
) -> Option<RecordOutcome> {
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(e) => {
            report.problem(ProblemKind::Record, Some(url), error_chain(&e));
            return None;
        }
    };
    if outcome.inserted() {
        report.recorded += 1;
    } else {
        report.unchanged += 1;
    }
    if outcome.hash_changed() {
        report.hash_changed += 1;
        tracing::warn!(%url, "recorded hash changed for a known file and version");
    }
    Some(outcome)
}
