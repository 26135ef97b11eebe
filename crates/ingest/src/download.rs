//! Download a vendor binary and hash it in one streaming pass, nothing written to disk.
//!
//! The body goes chunk by chunk through the [`TripleHasher`] and, for PE files, through a
//! [`SignatureCapture`] that keeps only the headers and the certificate table. A size cap
//! (checked against Content-Length first, then against the bytes actually received) and two
//! timeouts bound every download.

use std::time::Duration;

use chrono::{DateTime, Utc};
use model::Clock;
use tokio::time::{Instant, timeout_at};

use crate::authenticode::{AuthenticodeError, SignatureCapture, SignerInfo};
use crate::hasher::{Digests, HasherError, TripleHasher};
use crate::http::{BodyError, CappedBody};

/// Bounds on one download.
#[derive(Debug, Clone)]
pub struct DownloadLimits {
    /// Largest body accepted, in bytes.
    pub max_bytes: u64,
    /// Time allowed until the response headers arrive (connection, TLS, server delay).
    pub connect_timeout: Duration,
    /// Time allowed for the whole download, headers included.
    pub total_timeout: Duration,
    /// Largest Authenticode certificate table kept in memory. Real tables are tens of KiB;
    /// past this the download still succeeds, without a signer.
    pub max_signature_bytes: usize,
}

impl Default for DownloadLimits {
    fn default() -> Self {
        Self {
            max_bytes: 4 << 30,
            connect_timeout: Duration::from_secs(30),
            total_timeout: Duration::from_secs(30 * 60),
            max_signature_bytes: 16 << 20,
        }
    }
}

/// What one streamed download yielded; the content itself is gone.
#[derive(Debug, Clone)]
pub struct Downloaded {
    pub digests: Digests,
    pub size_bytes: u64,
    /// When the last byte was hashed (and so, for the audit record, discarded).
    pub downloaded_at: DateTime<Utc>,
    /// The primary Authenticode signer of a signed PE.
    pub pe_signer: Option<SignerInfo>,
    /// Why a PE's signer could not be read; the hashes are valid regardless.
    pub pe_signer_error: Option<AuthenticodeError>,
}

#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("request for {url} failed: {source}")]
    Request { url: String, source: reqwest::Error },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url} announces {announced} bytes, over the {limit}-byte limit")]
    AnnouncedTooLarge {
        url: String,
        announced: u64,
        limit: u64,
    },
    #[error("{url} sent more than the {limit}-byte limit; download aborted")]
    TooLarge { url: String, limit: u64 },
    #[error("{url} broke off after {received} bytes: {reason}")]
    BrokeOff {
        url: String,
        received: u64,
        reason: String,
    },
    #[error("{url} sent no response headers within {timeout:?}")]
    ConnectTimeout { url: String, timeout: Duration },
    #[error("download of {url} did not finish within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    #[error(transparent)]
    Hasher(#[from] HasherError),
}

impl DownloadError {
    /// A capped body's refusal, for the download of `url`.
    pub(crate) fn body(url: &str, e: BodyError) -> Self {
        let url = url.into();
        match e {
            BodyError::AnnouncedTooLarge { announced, limit } => Self::AnnouncedTooLarge {
                url,
                announced,
                limit,
            },
            BodyError::TooLarge { limit } => Self::TooLarge { url, limit },
            BodyError::BrokeOff { received, reason } => Self::BrokeOff {
                url,
                received,
                reason,
            },
        }
    }
}

/// Sends the GET of a download within `limits`: headers within the connect timeout, a
/// success status, no announced length over the cap. Returns the body, read within the cap,
/// and the instant by which all of it must have arrived.
pub(crate) async fn open(
    client: &reqwest::Client,
    url: &str,
    limits: &DownloadLimits,
) -> Result<(CappedBody, Instant), DownloadError> {
    let started = Instant::now();
    let deadline = started + limits.total_timeout;
    let headers_deadline = deadline.min(started + limits.connect_timeout);
    let response = timeout_at(headers_deadline, client.get(url).send())
        .await
        .map_err(|_| DownloadError::ConnectTimeout {
            url: url.into(),
            timeout: limits.connect_timeout.min(limits.total_timeout),
        })?
        .map_err(|source| DownloadError::Request {
            url: url.into(),
            source,
        })?;
    let status = response.status();
    if !status.is_success() {
        return Err(DownloadError::Status {
            url: url.into(),
            status: status.as_u16(),
        });
    }
    let body =
        CappedBody::new(response, limits.max_bytes).map_err(|e| DownloadError::body(url, e))?;
    Ok((body, deadline))
}

/// Streams `url` through SHA-256, SHA-1 and MD5 (and Authenticode extraction for PE files)
/// within `limits`. `clock` stamps `downloaded_at`.
pub async fn download_and_hash(
    client: &reqwest::Client,
    url: &str,
    limits: &DownloadLimits,
    clock: &dyn Clock,
) -> Result<Downloaded, DownloadError> {
    let (body, deadline) = open(client, url, limits).await?;
    let body = stream_body(body, url, limits);
    let (digests, size_bytes, signer) =
        timeout_at(deadline, body)
            .await
            .map_err(|_| DownloadError::Timeout {
                url: url.into(),
                timeout: limits.total_timeout,
            })??;
    let (pe_signer, pe_signer_error) = match signer {
        Ok(signer) => (signer, None),
        Err(e) => (None, Some(e)),
    };
    Ok(Downloaded {
        digests,
        size_bytes,
        downloaded_at: clock.now(),
        pe_signer,
        pe_signer_error,
    })
}

type SignerResult = Result<Option<SignerInfo>, AuthenticodeError>;

async fn stream_body(
    mut body: CappedBody,
    url: &str,
    limits: &DownloadLimits,
) -> Result<(Digests, u64, SignerResult), DownloadError> {
    let mut hasher = TripleHasher::new()?;
    let mut capture = SignatureCapture::new(limits.max_signature_bytes);
    while let Some(chunk) = body
        .chunk()
        .await
        .map_err(|e| DownloadError::body(url, e))?
    {
        capture.push(&chunk);
        hasher.update(&chunk).await?;
    }
    let size = hasher.size();
    Ok((hasher.finish().await?, size, capture.finish()))
}
