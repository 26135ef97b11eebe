//! The fetcher framework: what a vendor channel yields ([`Artifact`]), the [`Fetcher`] trait
//! every vendor implements, and the [`FetchContext`] a fetcher reads its channel through
//! (client, configured URLs, size and time limits).

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use model::{Arch, Platform};
use serde::de::DeserializeOwned;

use crate::download::DownloadLimits;
use crate::http::{BodyError, CappedBody};
use crate::members::MemberLimits;

/// Hashes a vendor publishes for one file, as lowercase hex. `None` where the channel
/// publishes nothing for that algorithm.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishedHashes {
    pub sha256: Option<String>,
    pub sha1: Option<String>,
    pub md5: Option<String>,
}

/// One file a vendor distributes, as its release channel describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Publisher name, or the ecosystem for packages (`npm`, `pypi`, `go`).
    pub vendor: String,
    /// File name as distributed, or `name (ecosystem)` for packages.
    pub executable_name: String,
    pub version: String,
    pub platform: Platform,
    pub arch: Arch,
    /// Exact URL of the file.
    pub url: String,
    pub published: PublishedHashes,
}

/// Per-vendor settings. Every vendor has its official channel as default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorConfig {
    pub enabled: bool,
    /// Where the channel is read from.
    pub base_url: String,
    /// Host of the files and checksum files when it differs from the discovery host
    /// (Firefox: product-details then archive.mozilla.org; Terraform: API then releases).
    pub files_url: Option<String>,
    /// What to follow, for vendors that track a list: F-Droid app ids, PyPI and npm
    /// packages, Go modules, distribution packages (there also `*`, every binary package,
    /// and `@base`, the base system by the distribution's own definition; `name=version`
    /// pins a version).
    pub items: Vec<String>,
    /// Distributions: a file of further package names, one per line, optionally pinned
    /// `name=version` (the output of `dpkg-query -W -f '${Package}=${Version}\n'` or
    /// `rpm -qa --qf '%{NAME}=%{VERSION}-%{RELEASE}\n'` as is); read at each run.
    pub items_file: Option<std::path::PathBuf>,
    /// Debian: the releases followed, by code name, or `supported` (oldstable and stable,
    /// read from the archive's Release files).
    pub releases: Vec<String>,
    /// Debian: the security archive (`<root>/dists/<release>-security/`).
    pub security_url: Option<String>,
    /// Debian and Rocky Linux: where a pinned `name=version` the followed suites or repos no
    /// longer list is read, through the same signed chain: Debian's snapshot service
    /// (`https://snapshot.debian.org`, the archive as it stood then) or Rocky Linux's vault
    /// of older minor releases. `None`: such a pin is reported as not listed.
    pub snapshot_url: Option<String>,
    /// PyPI and npm: how many of the versions a channel lists are recorded (the newest
    /// current, the others as superseded history). `None`: the newest only.
    pub history: Option<History>,
}

/// A history horizon: the N newest versions a channel lists, or all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum History {
    Newest(usize),
    All,
}

impl History {
    /// How many versions this horizon takes.
    pub fn count(self) -> usize {
        match self {
            Self::Newest(n) => n,
            Self::All => usize::MAX,
        }
    }
}

impl VendorConfig {
    pub fn new(base_url: &str) -> Self {
        Self {
            enabled: true,
            base_url: base_url.into(),
            files_url: None,
            items: Vec::new(),
            items_file: None,
            releases: Vec::new(),
            security_url: None,
            snapshot_url: None,
            history: None,
        }
    }

    pub(crate) fn with_files_url(mut self, files_url: &str) -> Self {
        self.files_url = Some(files_url.into());
        self
    }

    pub(crate) fn with_items(mut self, items: &[&str]) -> Self {
        self.items = items.iter().map(|s| (*s).to_owned()).collect();
        self
    }
}

/// Bounds on what one vendor run reads and downloads.
#[derive(Debug, Clone)]
pub struct FetchLimits {
    /// How many of the newest releases to take from a channel that lists several.
    pub max_versions: usize,
    /// Largest manifest, checksum file or listing accepted (F-Droid's index is tens of MB).
    pub max_document_bytes: u64,
    /// Time allowed for one manifest request, body included.
    pub request_timeout: Duration,
    /// Bounds on artifact downloads (when no SHA-256 is published, and archives read for
    /// their members).
    pub download: DownloadLimits,
    /// Whether and within what bounds the files inside archives are recorded.
    pub members: MemberLimits,
    /// Artifacts fetched at once from one host (downloads of a vendor run in parallel,
    /// within this bound per host).
    pub downloads_per_host: usize,
}

impl Default for FetchLimits {
    fn default() -> Self {
        Self {
            max_versions: 1,
            max_document_bytes: 256 << 20,
            request_timeout: Duration::from_secs(120),
            download: DownloadLimits::default(),
            members: MemberLimits::default(),
            downloads_per_host: 4,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("request for {url} failed: {source}")]
    Request {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url} sent more than the {limit}-byte limit for a manifest")]
    TooLarge { url: String, limit: u64 },
    #[error("{url} broke off after {received} bytes: {reason}")]
    BrokeOff {
        url: String,
        received: u64,
        reason: String,
    },
    #[error("{url} did not answer within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    #[error("malformed response from {url}: {reason}")]
    Malformed { url: String, reason: String },
    /// A setting of the vendor's configuration cannot be used (nothing was fetched).
    #[error("{setting}: {reason}")]
    Setting {
        setting: &'static str,
        reason: String,
    },
    /// A pinned version that no index the channel read lists.
    #[error(
        "{item}: not listed by {listed_by}; an archive lists only each suite's current \
         versions, so pin a version it lists (or remove the pin to follow the newest)"
    )]
    NotListed { item: String, listed_by: String },
}

impl FetchError {
    pub fn malformed(url: &str, reason: impl Into<String>) -> Self {
        Self::Malformed {
            url: url.into(),
            reason: reason.into(),
        }
    }

    /// The channel answered 404: the thing asked for does not exist (yet).
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, Self::Status { status: 404, .. })
    }
}

/// The address `reference` names, read in the document fetched from `document` (RFC 3986
/// resolution, as a browser or pip does): absolute URLs stay as they are, and mirrors that
/// answer relative links (`../../packages/…`, `/pool/…`, `pool/…`) are followed. A
/// directory base must end with `/`. Only `https://` and `http://` results are accepted
/// (the client then refuses plain HTTP unless it was built to allow it).
pub fn resolve_url(document: &str, reference: &str) -> Result<String, FetchError> {
    let base = reqwest::Url::parse(document)
        .map_err(|e| FetchError::malformed(document, format!("not a URL: {e}")))?;
    let resolved = base.join(reference.trim()).map_err(|e| {
        FetchError::malformed(
            document,
            format!("unusable link {}: {e}", model::shown(reference)),
        )
    })?;
    if !matches!(resolved.scheme(), "https" | "http") {
        return Err(FetchError::malformed(
            document,
            format!("link {} is not an HTTP(S) URL", model::shown(reference)),
        ));
    }
    Ok(resolved.into())
}

/// A vendor release channel reader.
#[async_trait]
pub trait Fetcher: Send + Sync {
    /// Stable identifier (`go`, `nodejs`, `fdroid`...), used in configuration and reports.
    fn id(&self) -> &str;
    /// The `vendor` of the records this fetcher produces.
    fn vendor(&self) -> &str;
    /// Reads the channel and lists the artifacts of its newest release(s). Versions come
    /// from the channel; artifacts whose platform or arch is unknown are left out.
    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError>;
}

/// What a fetcher reads its channel with.
pub struct FetchContext {
    pub client: reqwest::Client,
    pub config: VendorConfig,
    pub limits: FetchLimits,
    notes: Mutex<Vec<FetchError>>,
    /// Artifacts (by URL) recorded from their published hashes alone, never downloaded.
    history_only: Mutex<std::collections::HashSet<String>>,
    /// The channel's release dates of past versions' artifacts (by URL).
    released: Mutex<std::collections::HashMap<String, DateTime<Utc>>>,
    /// Archives (by URL) whose members are named under the archive's own file name.
    members_under_archive: Mutex<std::collections::HashSet<String>>,
}

impl FetchContext {
    pub fn new(client: reqwest::Client, config: VendorConfig, limits: FetchLimits) -> Self {
        Self {
            client,
            config,
            limits,
            notes: Mutex::new(Vec::new()),
            history_only: Mutex::new(Default::default()),
            released: Mutex::new(Default::default()),
            members_under_archive: Mutex::new(Default::default()),
        }
    }

    /// The configured base URL without a trailing slash.
    pub fn base_url(&self) -> &str {
        self.config.base_url.trim_end_matches('/')
    }

    /// The files host, the base URL when none is configured.
    pub fn files_url(&self) -> &str {
        self.config
            .files_url
            .as_deref()
            .map_or(self.base_url(), |u| u.trim_end_matches('/'))
    }

    /// The configured items followed by those of `items_file`, each trimmed, without blank
    /// lines and `#` comments. A `name:arch=version` line (dpkg's multi-arch spelling) is
    /// read as `name=version`. An unreadable file is an error naming it.
    pub fn items(&self) -> Result<Vec<String>, FetchError> {
        let mut items: Vec<String> = self.config.items.clone();
        if let Some(path) = &self.config.items_file {
            let shown = path.display().to_string();
            let unreadable = |e: std::io::Error| FetchError::Setting {
                setting: "items_file",
                reason: format!("cannot read {shown}: {e}"),
            };
            let meta = std::fs::metadata(path).map_err(unreadable)?;
            if meta.len() > self.limits.max_document_bytes {
                return Err(FetchError::TooLarge {
                    url: shown,
                    limit: self.limits.max_document_bytes,
                });
            }
            let text = std::fs::read_to_string(path).map_err(unreadable)?;
            for line in text.lines().map(str::trim) {
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let (name, version) = match line.split_once('=') {
                    Some((n, v)) => (n.trim(), Some(v.trim())),
                    None => (line, None),
                };
                let name = name.split_once(':').map_or(name, |(n, _)| n);
                items.push(match version {
                    Some(v) if !v.is_empty() => format!("{name}={v}"),
                    _ => name.to_owned(),
                });
            }
        }
        Ok(items)
    }

    /// Records a failure that does not stop discovery (one F-Droid app missing from the
    /// index, one checksum file absent); the pipeline reports it.
    pub fn note(&self, error: FetchError) {
        tracing::warn!(%error, "partial discovery failure");
        self.notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(error);
    }

    /// Marks an artifact of a past version taken in by a history horizon: its published
    /// SHA-256 is recorded as is, and the file is not downloaded (nor read for members).
    pub(crate) fn history_only(&self, url: &str) {
        self.history_only
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(url.to_owned());
    }

    /// Whether `url` was marked by [`FetchContext::history_only`].
    pub(crate) fn is_history_only(&self, url: &str) -> bool {
        self.history_only
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(url)
    }

    /// The channel's release date of a past version's artifact (a history horizon's or a
    /// pin's): its records start their history then rather than when they were recorded.
    pub(crate) fn set_released(&self, url: &str, at: DateTime<Utc>) {
        self.released
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(url.to_owned(), at);
    }

    /// The release date given by [`FetchContext::set_released`].
    pub fn released(&self, url: &str) -> Option<DateTime<Utc>> {
        self.released
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(url)
            .copied()
    }

    /// Names the members of the archive at `url` under its file name (`<file>/<path>`):
    /// for a channel that publishes several builds of one archive for one platform and arch
    /// (PyPI's manylinux and musllinux wheels), where one path names a different file in
    /// each build and no build may supersede another.
    pub(crate) fn name_members_under_archive(&self, url: &str) {
        self.members_under_archive
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(url.to_owned());
    }

    /// Whether [`FetchContext::name_members_under_archive`] marked `url`.
    pub(crate) fn members_under_archive(&self, url: &str) -> bool {
        self.members_under_archive
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(url)
    }

    /// The failures noted so far, emptying the list.
    pub(crate) fn take_notes(&self) -> Vec<FetchError> {
        std::mem::take(&mut *self.notes.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Ends a discovery that read several documents: when every one failed the channel is
    /// down or broken, an error; when some did, they are noted and the rest is returned.
    pub fn settle(
        &self,
        artifacts: Vec<Artifact>,
        failures: Vec<FetchError>,
    ) -> Result<Vec<Artifact>, FetchError> {
        let mut failures = failures.into_iter();
        if artifacts.is_empty()
            && let Some(first) = failures.next()
        {
            failures.for_each(|e| self.note(e));
            return Err(first);
        }
        failures.for_each(|e| self.note(e));
        Ok(artifacts)
    }

    /// The body of `url`, within the document size and time limits.
    pub async fn get_bytes(&self, url: &str, accept: Option<&str>) -> Result<Vec<u8>, FetchError> {
        let timeout = self.limits.request_timeout;
        tokio::time::timeout(timeout, self.read(url, accept))
            .await
            .map_err(|_| FetchError::Timeout {
                url: url.into(),
                timeout,
            })?
    }

    async fn read(&self, url: &str, accept: Option<&str>) -> Result<Vec<u8>, FetchError> {
        // The URL is said once, by the message, not again by the transport error.
        let request_error = |source: reqwest::Error| FetchError::Request {
            url: url.into(),
            source: source.without_url(),
        };
        let mut request = self.client.get(url);
        if let Some(accept) = accept {
            request = request.header(reqwest::header::ACCEPT, accept);
        }
        let response = request.send().await.map_err(request_error)?;
        let status = response.status();
        if !status.is_success() {
            return Err(FetchError::Status {
                url: url.into(),
                status: status.as_u16(),
            });
        }
        let limit = self.limits.max_document_bytes;
        let body_error = |e: BodyError| match e {
            BodyError::AnnouncedTooLarge { limit, .. } | BodyError::TooLarge { limit } => {
                FetchError::TooLarge {
                    url: url.into(),
                    limit,
                }
            }
            BodyError::BrokeOff { received, reason } => FetchError::BrokeOff {
                url: url.into(),
                received,
                reason,
            },
        };
        let body = CappedBody::new(response, limit).map_err(body_error)?;
        let body = body.into_vec().await.map_err(body_error)?;
        Ok(body)
    }

    /// The body of `url` as UTF-8 text.
    pub(crate) async fn get_text(&self, url: &str) -> Result<String, FetchError> {
        let bytes = self.get_bytes(url, None).await?;
        String::from_utf8(bytes).map_err(|e| FetchError::malformed(url, format!("not UTF-8: {e}")))
    }

    /// The body of `url` parsed as JSON into `T`.
    pub async fn get_json<T: DeserializeOwned>(
        &self,
        url: &str,
        accept: Option<&str>,
    ) -> Result<T, FetchError> {
        let bytes = self.get_bytes(url, accept).await?;
        serde_json::from_slice(&bytes)
            .map_err(|e| FetchError::malformed(url, format!("invalid JSON: {e}")))
    }
}
