//! The health of the service as the status page and the staff health route tell it:
//! database, reference corpus, scheduler, each vendor channel and each CRL, with the
//! vendors' last errors shown by kind (public) or whole (staff).

use crate::AppState;
use crate::api::{
    ComponentStatus, Components, CrlStatus, ReferenceCorpusStatus, RevocationStatus, Status,
    VendorStatus, timestamp,
};

/// How much of a vendor's last error a status answer shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorDetail {
    /// The kind of failure only: the public page never shows configured URLs, resolver
    /// output or anything else an error message may carry.
    Class,
    /// The whole (URL-redacted) message, for staff.
    Full,
}

pub(crate) async fn system_status(state: &AppState, detail: ErrorDetail) -> Status {
    let now = state.clock.now();
    let database_ok = state.database.up(state.store.as_ref()).await;
    let vendors: Vec<VendorStatus> = if database_ok {
        state
            .store
            .vendor_health()
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|v| VendorStatus {
                status: match (v.last_success_at, v.last_error_at) {
                    (_, Some(err)) if v.last_success_at.is_none_or(|ok| err > ok) => "failing",
                    // One run both recorded and met a problem (part of the channel gone).
                    (Some(ok), Some(err)) if err == ok => "degraded",
                    (Some(_), _) => "ok",
                    _ => "unknown",
                },
                vendor: v.vendor,
                last_success_at: v.last_success_at.map(timestamp),
                last_error_at: v.last_error_at.map(timestamp),
                last_error: v.last_error.map(|e| match detail {
                    ErrorDetail::Class => model::ProblemKind::public_text(&e).to_string(),
                    ErrorDetail::Full => model::redact_urls(&e),
                }),
                records: v.records,
            })
            .collect()
    } else {
        Vec::new()
    };
    let crls: Vec<CrlStatus> = if database_ok {
        state
            .store
            .crl_caches()
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|c| CrlStatus {
                status: match (&c.last_error, c.last_good_at) {
                    (Some(_), _) => "failing",
                    (None, Some(_)) => "ok",
                    (None, None) => "unknown",
                },
                issuer: c.issuer,
                url: model::redact_url(&c.url),
                last_good_at: c.last_good_at.map(timestamp),
                next_update: c.next_update.map(timestamp),
                last_checked_at: c.last_checked_at.map(timestamp),
                last_error_at: c.last_error_at.map(timestamp),
                last_error: c.last_error.map(|e| match detail {
                    ErrorDetail::Class => model::CheckFailure::public_text(&e).to_string(),
                    ErrorDetail::Full => model::redact_urls(&e),
                }),
            })
            .collect()
    } else {
        Vec::new()
    };
    let integrity_failures = state.store.integrity_failures();
    let overall = if !database_ok {
        "down"
    } else if integrity_failures > 0
        || vendors
            .iter()
            .any(|v| v.status == "failing" || v.status == "degraded")
        || crls.iter().any(|c| c.status == "failing")
    {
        "degraded"
    } else {
        "ok"
    };
    Status {
        status: overall,
        generated_at: timestamp(now),
        components: Components {
            database: ComponentStatus {
                status: if database_ok { "ok" } else { "down" },
                backend: Some(state.store.backend()),
            },
            reference_corpus: match state.corpus.as_ref().and_then(|c| c.info()) {
                Some(info) => ReferenceCorpusStatus {
                    generation: Some(info.generation),
                    entries: info.entries,
                    sources: info.sources.iter().map(|s| s.source.clone()).collect(),
                    rds_versions: info
                        .rds_versions
                        .iter()
                        .filter_map(|v| v.version.clone())
                        .collect(),
                    imported_at: Some(timestamp(info.imported_at)),
                },
                None => ReferenceCorpusStatus {
                    generation: None,
                    entries: 0,
                    sources: Vec::new(),
                    rds_versions: Vec::new(),
                    imported_at: None,
                },
            },
            scheduler: ComponentStatus {
                status: if state.runner.is_running(jobs::refresh::JOB) {
                    "running"
                } else {
                    "idle"
                },
                backend: None,
            },
        },
        vendors,
        revocation: RevocationStatus { crls },
        integrity_failures,
    }
}
