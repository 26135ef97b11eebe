//! OSV advisories: reading them (single JSON documents, directories of them, or a zip
//! archive of them such as OSV's per-ecosystem `all.zip`) into [`AdvisoryRow`]s, and the
//! scheduled refresh that downloads configured URLs and imports them
//! (`advisories.refresh:<interval start>`). `knowngood advisories import` calls the same
//! readers on local paths.
//!
//! Each URL is downloaded with the outbound HTTP client of the vendor refresh (user agent,
//! proxy, extra CA; HTTPS only), capped in size while it streams, to an anonymous temporary
//! file; every document is read before anything is stored, so a corrupt archive imports
//! nothing. A URL that fails is logged and counted; the others are still imported.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read, Seek, SeekFrom, Write as _};
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use ingest::http::CappedBody;
use model::{CheckFailure, Clock, Error};
use store::Store;
use store::packages::AdvisoryRow;

/// [`AdvisoryJob`]'s name.
pub const JOB: &str = "advisories.refresh";

/// The largest single document read; OSV's are a few kilobytes.
pub const MAX_DOCUMENT: u64 = 8 << 20;

/// Rows per store transaction.
const IMPORT_BATCH: usize = 1000;

/// Why advisories could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReadError(String);

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        Self(e.to_string())
    }
}

/// What was read: the rows, the documents naming no npm, PyPI or Go package, and every
/// affected package not kept, by reason.
#[derive(Debug, Default)]
pub struct Reader {
    pub rows: Vec<AdvisoryRow>,
    pub skipped: u64,
    /// Affected packages not kept, per reason ([`packages::advisories::Skipped::category`]).
    pub not_kept: BTreeMap<String, NotKept>,
}

/// Affected packages not kept for one reason.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NotKept {
    /// How many affected packages.
    pub packages: u64,
    /// The first few advisories naming one.
    pub examples: Vec<String>,
}

/// Advisory ids shown per reason.
const EXAMPLES: usize = 3;

impl Reader {
    /// One line per reason a package was not kept: `<reason>: <count> (<ids>, …)`.
    pub fn not_kept_lines(&self) -> Vec<String> {
        self.not_kept
            .iter()
            .map(|(reason, n)| {
                let more = if n.packages > n.examples.len() as u64 {
                    ", …"
                } else {
                    ""
                };
                format!("{reason}: {} ({}{more})", n.packages, n.examples.join(", "))
            })
            .collect()
    }
}

impl Reader {
    /// Adds the advisories of `path`: a JSON document, a zip archive of them (`.zip`), or a
    /// directory holding either (recursively, in name order).
    pub fn path(&mut self, path: &Path) -> Result<(), ReadError> {
        if path.is_dir() {
            let mut entries: Vec<_> = std::fs::read_dir(path)?
                .map(|e| e.map(|e| e.path()))
                .collect::<std::io::Result<_>>()?;
            entries.sort();
            for entry in entries {
                if entry.is_dir() || has_extension(&entry, "json") || has_extension(&entry, "zip") {
                    self.path(&entry)?;
                }
            }
            return Ok(());
        }
        if has_extension(path, "zip") {
            return self.zip(std::fs::File::open(path)?);
        }
        if std::fs::metadata(path)?.len() > MAX_DOCUMENT {
            return Err(ReadError(format!("larger than {MAX_DOCUMENT} bytes")));
        }
        self.json(&std::fs::read(path)?)
    }

    /// Adds the `.json` members of a zip archive; any bad member fails the whole archive.
    pub fn zip<R: Read + Seek>(&mut self, reader: R) -> Result<(), ReadError> {
        let mut archive = zip::ZipArchive::new(reader)
            .map_err(|e| ReadError(format!("not a zip archive: {e}")))?;
        for i in 0..archive.len() {
            let entry = archive
                .by_index(i)
                .map_err(|e| ReadError(format!("zip member {i}: {e}")))?;
            let name = entry
                .name()
                .map_err(|e| ReadError(format!("zip member {i}: {e}")))?
                .to_string();
            if !name.ends_with(".json") {
                continue;
            }
            if entry.size() > MAX_DOCUMENT {
                return Err(ReadError(format!(
                    "{name}: larger than {MAX_DOCUMENT} bytes"
                )));
            }
            let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
            entry
                .take(MAX_DOCUMENT)
                .read_to_end(&mut bytes)
                .map_err(|e| ReadError(format!("{name}: {e}")))?;
            self.json(&bytes)
                .map_err(|e| ReadError(format!("{name}: {e}")))?;
        }
        Ok(())
    }

    /// Adds one OSV JSON document (counted as skipped when it names no npm, PyPI or Go
    /// package; each affected package not kept is counted under its reason).
    pub fn json(&mut self, bytes: &[u8]) -> Result<(), ReadError> {
        let osv = packages::advisories::read_osv(bytes).map_err(|e| ReadError(e.to_string()))?;
        for skipped in &osv.skipped {
            let n = self.not_kept.entry(skipped.category()).or_default();
            n.packages += 1;
            if n.examples.len() < EXAMPLES && !n.examples.contains(&osv.id) {
                n.examples.push(osv.id.clone());
            }
        }
        let Some(advisory) = osv.advisory else {
            self.skipped += 1;
            return Ok(());
        };
        let mut names: Vec<(String, String)> = advisory
            .affected
            .iter()
            .map(|a| (a.ecosystem.as_str().to_string(), a.name.clone()))
            .collect();
        names.sort();
        names.dedup();
        self.rows.push(AdvisoryRow {
            id: advisory.id,
            modified: advisory.modified,
            document: String::from_utf8_lossy(bytes).into_owned(),
            packages: names,
        });
        Ok(())
    }

    /// Adds a downloaded file: a zip archive when it starts like one, else one JSON
    /// document.
    pub fn download(&mut self, mut file: std::fs::File) -> Result<(), ReadError> {
        let mut magic = [0u8; 4];
        file.seek(SeekFrom::Start(0))?;
        let len = file.read(&mut magic)?;
        file.seek(SeekFrom::Start(0))?;
        if len == 4 && (magic == *b"PK\x03\x04" || magic == *b"PK\x05\x06") {
            return self.zip(file);
        }
        if file.metadata()?.len() > MAX_DOCUMENT {
            return Err(ReadError(format!(
                "neither a zip archive nor a JSON document of at most {MAX_DOCUMENT} bytes"
            )));
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        self.json(&bytes)
    }
}

fn has_extension(path: &Path, ext: &str) -> bool {
    path.extension().is_some_and(|e| e == ext)
}

/// Stores rows in batches; returns how many were written (not older than the stored ones).
pub async fn import(
    store: &dyn Store,
    rows: &[AdvisoryRow],
    now: DateTime<Utc>,
) -> Result<u64, Error> {
    let mut written = 0;
    for batch in rows.chunks(IMPORT_BATCH) {
        written += store.import_advisories(batch, now).await?;
    }
    Ok(written)
}

/// Where and how often advisories are downloaded.
#[derive(Clone)]
pub struct AdvisorySource {
    /// OSV JSON documents or zip archives of them (`https://…/npm/all.zip`).
    pub urls: Vec<reqwest::Url>,
    /// Time between refreshes.
    pub interval: Duration,
    /// Largest download accepted per URL; a larger one is refused while it streams.
    pub max_download_bytes: u64,
    /// Time allowed for one URL's download, from request to last byte.
    pub timeout: Duration,
    /// A client used as is instead of one built from the refresh's outbound settings
    /// (tests).
    pub client: Option<reqwest::Client>,
}

/// The default interval: OSV's exports change daily.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// The default cap per download: above OSV's largest ecosystem archives.
pub const DEFAULT_MAX_DOWNLOAD_BYTES: u64 = 512 << 20;
/// The default time per download.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

impl AdvisorySource {
    /// Daily refreshes of `urls` with the default cap and timeout.
    pub fn new(urls: Vec<reqwest::Url>) -> Self {
        Self {
            urls,
            interval: DEFAULT_INTERVAL,
            max_download_bytes: DEFAULT_MAX_DOWNLOAD_BYTES,
            timeout: DEFAULT_TIMEOUT,
            client: None,
        }
    }
}

// A URL may carry a token (basic auth, a signed query): never shown whole.
impl fmt::Debug for AdvisorySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self
            .urls
            .iter()
            .map(|u| model::redact_url(u.as_str()))
            .collect();
        f.debug_struct("AdvisorySource")
            .field("urls", &urls)
            .field("interval", &self.interval)
            .field("max_download_bytes", &self.max_download_bytes)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// What one refresh did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefreshReport {
    /// URLs downloaded and read in full.
    pub urls_good: usize,
    /// Advisories for npm, PyPI or Go read, and how many of them were written.
    pub read: usize,
    pub written: u64,
    /// Documents for other ecosystems.
    pub skipped: u64,
    /// (URL, error) of each URL that failed; nothing of it was imported.
    pub failed: Vec<(String, String)>,
}

/// Downloads every URL of `source` and imports what each holds.
pub async fn refresh(
    store: &dyn Store,
    clock: &dyn Clock,
    source: &AdvisorySource,
    outbound: &ingest::OutboundSettings,
) -> Result<RefreshReport, Error> {
    let client = match &source.client {
        Some(client) => client.clone(),
        None => outbound
            .https_client()
            .map_err(|e| Error::internal_caused("HTTP client", e))?,
    };
    let mut report = RefreshReport::default();
    for url in &source.urls {
        let shown = model::redact_url(url.as_str());
        let read = match fetch(&client, source, url).await {
            Ok(file) => tokio::task::spawn_blocking(move || {
                let mut read = Reader::default();
                read.download(file).map(|()| read)
            })
            .await
            .map_err(|e| Error::internal_caused("reading advisories", e))?
            .map_err(|e| format!("corrupt: {shown}: {e}")),
            Err(e) => Err(e),
        };
        match read {
            Ok(read) => {
                let written = import(store, &read.rows, clock.now()).await?;
                tracing::info!(url = %shown, read = read.rows.len(), written, skipped = read.skipped, "advisories imported");
                for line in read.not_kept_lines() {
                    tracing::info!(url = %shown, not_kept = %line, "affected packages not kept");
                }
                report.urls_good += 1;
                report.read += read.rows.len();
                report.written += written;
                report.skipped += read.skipped;
            }
            Err(e) => {
                tracing::warn!(url = %shown, error = %e, "advisories not imported from this URL");
                report.failed.push((shown, e));
            }
        }
    }
    Ok(report)
}

/// Downloads `url` to an anonymous temporary file, within the size cap and timeout.
async fn fetch(
    client: &reqwest::Client,
    source: &AdvisorySource,
    url: &reqwest::Url,
) -> Result<std::fs::File, String> {
    let shown = model::redact_url(url.as_str());
    let limit = source.max_download_bytes;
    let work = async {
        let response = client.get(url.clone()).send().await.map_err(|e| {
            CheckFailure::Unreachable.message(format_args!(
                "request for {shown} failed: {}",
                ingest::error_chain(&e.without_url())
            ))
        })?;
        let status = response.status();
        if !status.is_success() {
            return Err(CheckFailure::HttpStatus
                .message(format_args!("{shown} answered HTTP {}", status.as_u16())));
        }
        let mut body = CappedBody::new(response, limit).map_err(|e| e.stored_failure(&shown))?;
        let mut file =
            tempfile::tempfile().map_err(|e| format!("temporary file for {shown}: {e}"))?;
        while let Some(chunk) = body.chunk().await.map_err(|e| e.stored_failure(&shown))? {
            file.write_all(&chunk)
                .map_err(|e| format!("temporary file for {shown}: {e}"))?;
        }
        Ok(file)
    };
    tokio::time::timeout(source.timeout, work)
        .await
        .map_err(|_| {
            CheckFailure::Unreachable.message(format_args!(
                "{shown} was not downloaded within {:?}",
                source.timeout
            ))
        })?
}

/// The scheduled refresh: once per interval (aligned to the Unix epoch), on the replica
/// that takes that interval's lease.
pub struct AdvisoryJob;

#[async_trait]
impl crate::Job for AdvisoryJob {
    fn name(&self) -> &'static str {
        JOB
    }

    async fn due(
        &self,
        ctx: &crate::JobContext,
        now: DateTime<Utc>,
    ) -> Result<Option<crate::Due>, Error> {
        let Some(source) = &ctx.settings.advisories else {
            return Ok(None);
        };
        if source.urls.is_empty() {
            return Ok(None);
        }
        Ok(crate::Due::each_interval(JOB, source.interval, now))
    }

    async fn run(&self, ctx: &crate::JobContext, _now: DateTime<Utc>) -> Result<(), Error> {
        let Some(source) = &ctx.settings.advisories else {
            return Ok(());
        };
        let report = refresh(
            ctx.store.as_ref(),
            ctx.clock.as_ref(),
            source,
            &ctx.settings.refresh.outbound,
        )
        .await?;
        tracing::info!(
            urls = source.urls.len(),
            urls_good = report.urls_good,
            failed = report.failed.len(),
            read = report.read,
            written = report.written,
            skipped = report.skipped,
            "advisory refresh finished"
        );
        if report.failed.is_empty() {
            Ok(())
        } else {
            let errors: Vec<String> = report.failed.iter().map(|(_, e)| e.clone()).collect();
            Err(Error::internal(format!(
                "{} of {} advisory URLs failed: {}",
                report.failed.len(),
                source.urls.len(),
                errors.join("; ")
            )))
        }
    }
}
