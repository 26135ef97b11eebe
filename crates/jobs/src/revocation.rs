//! The revocation check: every signing certificate recorded at ingest (primary and nested
//! signatures of current and superseded records) is looked up on its issuer's CRL.
//!
//! Work follows distinct CRL URLs and certificates, never records: each URL is fetched at
//! most once per check (not at all before the cached CRL's nextUpdate unless forced; a
//! conditional GET otherwise), its CRL verified against the issuing CA's certificate that
//! the signatures shipped ([`revocation::Crl::verify`]), and each certificate's serial
//! looked up in it. The store then sets `cert_revoked_at` on the records a newly revoked
//! certificate signed. A CRL that cannot be fetched, parsed or verified, that is past its
//! nextUpdate, or whose CRL number went backwards, changes nothing: its error is kept per
//! URL (shown on /public/status) and logged.
//!
//! A certificate on hold (`certificateHold`) that leaves the CRL, or is listed as
//! `removeFromCRL`, is released. Other revocations are final: a CA may drop an expired
//! certificate from its CRL, which does not make it valid again.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use ingest::http::CappedBody;
use model::{CheckFailure, Clock, Error};
use reqwest::header::{ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED};
use revocation::{Crl, CrlNumber, Reason};
use store::Store;
use store::downloads::SigningCert;
use store::revocations::{CrlCache, Revocation};

/// How the check runs.
#[derive(Debug, Clone)]
pub struct RevocationOptions {
    /// Time between checks; None (the library default, so tests and embedding never
    /// reach out) turns the schedule off. The binary defaults to 6 hours.
    pub interval: Option<Duration>,
    /// Largest CRL accepted, in bytes; a larger one is refused while it streams.
    pub max_crl_bytes: u64,
    /// Time allowed for one CRL fetch, from request to last byte.
    pub fetch_timeout: Duration,
    /// A client used as is instead of one built from the refresh's outbound settings
    /// (tests).
    pub client: Option<reqwest::Client>,
}

/// The default cap: larger than the CRLs of public code-signing CAs (a few MB), far below
/// what would strain memory.
pub const DEFAULT_MAX_CRL_BYTES: u64 = 32 << 20;

impl Default for RevocationOptions {
    fn default() -> Self {
        Self {
            interval: None,
            max_crl_bytes: DEFAULT_MAX_CRL_BYTES,
            fetch_timeout: Duration::from_secs(60),
            client: None,
        }
    }
}

/// What one check did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Distinct signing certificates known.
    pub certificates: usize,
    /// Certificates whose issuer's CRL verified: their state is known.
    pub checked: usize,
    /// Distinct CRL URLs, and those that gave a verified CRL.
    pub crls: usize,
    pub crls_good: usize,
    /// CRL URLs actually requested (not answered from the cache before nextUpdate).
    pub fetched: usize,
    pub newly_revoked: usize,
    pub released: usize,
    /// (URL, error) of each CRL that could not be used.
    pub errors: Vec<(String, String)>,
}

/// [`RevocationJob`]'s name.
pub const JOB: &str = "revocation.check";

/// Checks every known signing certificate once. `force` refetches CRLs before their
/// nextUpdate (still conditionally).
pub async fn check(
    store: &dyn Store,
    clock: &dyn Clock,
    options: &RevocationOptions,
    outbound: &ingest::OutboundSettings,
    force: bool,
) -> Result<CheckReport, Error> {
    let client = match &options.client {
        Some(client) => client.clone(),
        None => outbound
            .client_builder()
            .and_then(|b| b.build().map_err(ingest::OutboundError::Build))
            .map_err(|e| Error::internal_caused("HTTP client", e))?,
    };
    let certs = store.signing_certs().await?;
    let mut report = CheckReport {
        certificates: certs.len(),
        ..CheckReport::default()
    };
    // URL -> the certificates naming it.
    let mut by_url: BTreeMap<&str, Vec<&SigningCert>> = BTreeMap::new();
    for cert in &certs {
        for url in &cert.crl_urls {
            by_url.entry(url.as_str()).or_default().push(cert);
        }
    }
    report.crls = by_url.len();
    let mut verified: HashMap<&str, Crl> = HashMap::new();
    for (url, named_by) in &by_url {
        let outcome = crl_for(store, clock, &client, options, url, named_by, force).await?;
        if outcome.fetched {
            report.fetched += 1;
        }
        match outcome.crl {
            Ok(crl) => {
                tracing::info!(url = %model::redact_url(url), issuer = %crl.issuer, revoked = crl.len(), "CRL verified");
                report.crls_good += 1;
                verified.insert(url, crl);
            }
            Err(e) => {
                tracing::warn!(url = %model::redact_url(url), error = %e, "CRL not usable; its certificates keep their state");
                report.errors.push((model::redact_url(url), e));
            }
        }
    }
    let in_force = store.revocations_in_force().await?;
    for cert in &certs {
        let Some((url, crl)) = cert.crl_urls.iter().find_map(|u| {
            verified
                .get_key_value(u.as_str())
                .filter(|(_, crl)| crl.issuer == cert.issuer)
        }) else {
            continue;
        };
        report.checked += 1;
        let serial = revocation::serial_key_hex(&cert.serial).unwrap_or_default();
        let entry = crl
            .entry(&serial)
            .filter(|e| e.reason != Reason::RemoveFromCrl);
        let thumbprint = cert.thumbprint.to_ascii_lowercase();
        match entry {
            Some(entry) => {
                let revocation = Revocation {
                    thumbprint: thumbprint.clone(),
                    signer: cert.signer.clone(),
                    issuer: cert.issuer.clone(),
                    serial: cert.serial.clone(),
                    revoked_at: entry.revoked_at,
                    reason: entry.reason.as_str().to_string(),
                    crl_url: (*url).to_string(),
                };
                let known = in_force.get(&thumbprint);
                let changed = known.is_none_or(|(reason, at)| {
                    reason != entry.reason.as_str() || *at != entry.revoked_at
                });
                if changed && store.revoke(&revocation, clock.now()).await? {
                    tracing::warn!(thumbprint, signer = %cert.signer, reason = %entry.reason, "signing certificate revoked");
                    if known.is_none() {
                        report.newly_revoked += 1;
                    }
                }
            }
            None => {
                let on_hold = in_force
                    .get(&thumbprint)
                    .is_some_and(|(reason, _)| reason == Reason::CertificateHold.as_str());
                if on_hold && store.release(&thumbprint, clock.now()).await? {
                    tracing::info!(thumbprint, signer = %cert.signer, "certificate hold released");
                    report.released += 1;
                }
            }
        }
    }
    Ok(report)
}

struct CrlOutcome {
    fetched: bool,
    crl: Result<Crl, String>,
}

/// The verified CRL of `url`: the cached one before its nextUpdate (unless forced),
/// otherwise fetched (conditionally) and verified. Notes the outcome on the URL's cache row.
async fn crl_for(
    store: &dyn Store,
    clock: &dyn Clock,
    client: &reqwest::Client,
    options: &RevocationOptions,
    url: &str,
    named_by: &[&SigningCert],
    force: bool,
) -> Result<CrlOutcome, Error> {
    let now = clock.now();
    let issuer = named_by
        .first()
        .map(|c| c.issuer.clone())
        .unwrap_or_default();
    let mut cache = store.crl_cache(url).await?.unwrap_or_else(|| CrlCache {
        url: url.to_string(),
        issuer: issuer.clone(),
        ..CrlCache::default()
    });
    cache.issuer = issuer;
    let cas: Vec<&[u8]> = {
        let mut cas: Vec<&[u8]> = named_by
            .iter()
            .filter_map(|c| c.issuer_cert.as_deref())
            .collect();
        cas.sort_unstable();
        cas.dedup();
        cas
    };
    let fresh = cache.next_update.is_some_and(|next| now < next);
    if let (Some(body), false) = (&cache.body, force)
        && fresh
    {
        return Ok(CrlOutcome {
            fetched: false,
            crl: verify(body, &cas, now, None),
        });
    }
    cache.last_checked_at = Some(now);
    let fetched = fetch(client, options, url, &cache).await;
    let result =
        match fetched {
            Err(e) => Err(e),
            Ok(Fetched::NotModified) => match &cache.body {
                Some(body) => verify(body, &cas, now, None),
                None => Err(CheckFailure::HttpStatus
                    .message("answered 304 Not Modified with no CRL cached")),
            },
            Ok(Fetched::Body {
                bytes,
                etag,
                last_modified,
            }) => {
                let previous = cache.crl_number.as_deref().and_then(CrlNumber::from_hex);
                let verified = verify(&bytes, &cas, now, previous.as_ref());
                if verified.is_ok() {
                    cache.body = Some(bytes);
                    cache.etag = etag;
                    cache.last_modified = last_modified;
                }
                verified
            }
        };
    match &result {
        Ok(crl) => {
            cache.crl_number = crl.number.as_ref().map(CrlNumber::to_hex);
            cache.this_update = Some(crl.this_update);
            cache.next_update = crl.next_update;
            cache.last_good_at = Some(now);
            cache.last_error = None;
        }
        Err(e) => {
            cache.last_error = Some(e.clone());
            cache.last_error_at = Some(now);
        }
    }
    store.save_crl_cache(&cache).await?;
    Ok(CrlOutcome {
        fetched: true,
        crl: result,
    })
}

/// Parses and verifies a CRL against the candidate CA certificates (the first that
/// verifies it wins); refuses one past its nextUpdate or numbered below `previous`.
fn verify(
    bytes: &[u8],
    cas: &[&[u8]],
    now: DateTime<Utc>,
    previous: Option<&CrlNumber>,
) -> Result<Crl, String> {
    let crl = revocation::parse(bytes).map_err(|e| CheckFailure::Malformed.message(e))?;
    if cas.is_empty() {
        return Err(CheckFailure::Unverified.message(format_args!(
"no certificate of the issuer {} was shipped with the signatures; the CRL cannot be verified",
            crl.issuer
        )));
    }
    let mut first_error = None;
    let mut ok = false;
    for ca in cas {
        match crl.verify(ca) {
            Ok(()) => {
                ok = true;
                break;
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if !ok {
        return Err(CheckFailure::Unverified.message(format_args!(
            "{}",
            first_error.map(|e| e.to_string()).unwrap_or_default()
        )));
    }
    if let Some(next) = crl.next_update
        && next <= now
    {
        return Err(CheckFailure::Expired.message(format_args!(
            "its nextUpdate {} has passed",
            model::record::rfc3339(next)
        )));
    }
    if let (Some(previous), Some(number)) = (previous, &crl.number)
        && number < previous
    {
        return Err(CheckFailure::Rollback.message(format_args!(
            "CRL number went backwards (from {} to {}): refused as a possible replay",
            previous.to_hex(),
            number.to_hex()
        )));
    }
    Ok(crl)
}

enum Fetched {
    NotModified,
    Body {
        bytes: Vec<u8>,
        etag: Option<String>,
        last_modified: Option<String>,
    },
}

/// One conditional GET of a CRL (http or https), within the size cap and timeout.
async fn fetch(
    client: &reqwest::Client,
    options: &RevocationOptions,
    url: &str,
    cache: &CrlCache,
) -> Result<Fetched, String> {
    let shown = model::redact_url(url);
    let parsed = reqwest::Url::parse(url.trim())
        .map_err(|e| CheckFailure::BadUrl.message(format_args!("{shown}: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(CheckFailure::BadUrl.message(format_args!("{shown} is neither http nor https")));
    }
    let mut request = client.get(parsed);
    if cache.body.is_some() {
        if let Some(etag) = &cache.etag {
            request = request.header(IF_NONE_MATCH, etag);
        }
        if let Some(since) = &cache.last_modified {
            request = request.header(IF_MODIFIED_SINCE, since);
        }
    }
    let limit = options.max_crl_bytes;
    let work = async {
        let response = request.send().await.map_err(|e| {
            CheckFailure::Unreachable.message(format_args!(
                "request for {shown} failed: {}",
                ingest::error_chain(&e.without_url())
            ))
        })?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_MODIFIED {
            return Ok(Fetched::NotModified);
        }
        if !status.is_success() {
            return Err(CheckFailure::HttpStatus
                .message(format_args!("{shown} answered HTTP {}", status.as_u16())));
        }
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
                .map(str::to_string)
        };
        let (etag, last_modified) = (header(ETAG), header(LAST_MODIFIED));
        let bytes = CappedBody::new(response, limit)
            .map_err(|e| e.stored_failure(&shown))?
            .into_vec()
            .await
            .map_err(|e| e.stored_failure(&shown))?;
        Ok(Fetched::Body {
            bytes,
            etag,
            last_modified,
        })
    };
    tokio::time::timeout(options.fetch_timeout, work)
        .await
        .map_err(|_| {
            CheckFailure::Unreachable.message(format_args!(
                "{shown} did not answer within {:?}",
                options.fetch_timeout
            ))
        })?
}

/// The scheduled check: once per interval (aligned to the Unix epoch), on the replica that
/// takes that interval's lease.
pub struct RevocationJob;

#[async_trait]
impl crate::Job for RevocationJob {
    fn name(&self) -> &'static str {
        JOB
    }

    async fn due(
        &self,
        ctx: &crate::JobContext,
        now: DateTime<Utc>,
    ) -> Result<Option<crate::Due>, Error> {
        let Some(interval) = ctx.settings.revocation.interval else {
            return Ok(None);
        };
        Ok(crate::Due::each_interval(JOB, interval, now))
    }

    async fn run(&self, ctx: &crate::JobContext, _now: DateTime<Utc>) -> Result<(), Error> {
        let report = check(
            ctx.store.as_ref(),
            ctx.clock.as_ref(),
            &ctx.settings.revocation,
            &ctx.settings.refresh.outbound,
            false,
        )
        .await?;
        tracing::info!(
            certificates = report.certificates,
            checked = report.checked,
            crls = report.crls,
            crls_good = report.crls_good,
            newly_revoked = report.newly_revoked,
            released = report.released,
            "revocation check finished"
        );
        Ok(())
    }
}
