//! Routes that need no credential: liveness, readiness, the daily feed and the status page.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use model::Error;
use serde::Deserialize;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::{
    ComponentStatus, Components, CrlStatus, HashOfDay, HashRecordJson, ReferenceCorpusStatus,
    RevocationStatus, Status, VendorStatus, timestamp,
};
use crate::error::{ApiResult, ErrorBody};
use crate::extract::QueryParams;
use crate::routes::feeds::FeedDocuments;
use crate::routing::{Api, LimitClass, Rule};

/// The routes that need no credential.
pub(crate) fn routes(api: Api) -> Api {
    api.route(routes!(healthz), Rule::public().limit(LimitClass::None))
        .route(routes!(readyz), Rule::public().limit(LimitClass::None))
        .route(
            routes!(hash_of_day),
            Rule::public().limit(LimitClass::HashOfDay),
        )
        .route(routes!(status), Rule::public())
}

/// Liveness: answers as long as the process serves requests; touches nothing.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process is alive")))]
pub async fn healthz() -> impl IntoResponse {
    Json(serde_json::json!({"status": "ok"}))
}

/// Readiness: the process is not draining and the database answers.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "Ready"), (status = 503, description = "Draining after a stop signal, or the database is unreachable")))]
pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    if state.draining.load(std::sync::atomic::Ordering::Acquire) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({"status": "draining"})),
        );
    }
    match state.database.up(state.store.as_ref()).await {
        true => (StatusCode::OK, Json(serde_json::json!({"status": "ok"}))),
        false => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({"status": "down", "database": "unreachable"})),
        ),
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HashOfDayQuery {
    /// Exact executable name, case-insensitive; a package as `name (ecosystem)`.
    executable: Option<String>,
    /// Not accepted: history needs a credential (403).
    date: Option<String>,
}

/// The public daily feed: one record per tracked file, current today.
#[utoipa::path(get, path = "/public/hash-of-day", tag = "public", params(HashOfDayQuery),
    responses(
        (status = 200, body = HashOfDay),
        (status = 403, description = "`date` given: history needs a credential", body = ErrorBody),
        (status = 429, description = "More than 100 requests per minute from this address", body = ErrorBody)))]
pub async fn hash_of_day(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<HashOfDayQuery>,
) -> ApiResult<Response> {
    if query.date.is_some() {
        return Err(Error::Forbidden(
            "the date parameter is not available here: history needs a credential (GET /api/v1/intel/history)".into(),
        )
        .into());
    }
    let now = state.clock.now();
    let key = crate::extract::name_filter(query.executable.as_deref(), "executable")?
        .unwrap_or_default()
        .to_lowercase();
    let epoch = state.store.records_epoch();
    if let Some(hit) = state.feed_cache.get(&key, now, epoch) {
        return Ok(json_bytes(hit.hit_body));
    }
    let executable = (!key.is_empty()).then_some(key.as_str());
    let records = state.store.current_records(executable).await?;
    let mut answer = HashOfDay {
        date: now.date_naive().to_string(),
        generated_at: timestamp(now),
        cache_hit: true,
        hashes: records
            .iter()
            .filter(|r| r.integrity_ok)
            .map(HashRecordJson::from)
            .collect(),
    };
    // Serialised once: a hit is these bytes, however large the feed.
    let hit_body = Bytes::from(serde_json::to_vec(&answer).map_err(Error::internal)?);
    state.feed_cache.put(
        key,
        CachedFeed {
            generated_at: now,
            hit_body,
            epoch,
        },
    );
    answer.cache_hit = false;
    Ok(Json(answer).into_response())
}

fn json_bytes(body: Bytes) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

#[derive(Clone)]
pub struct CachedFeed {
    generated_at: DateTime<Utc>,
    /// The whole answer, `cache_hit: true`, as sent.
    hit_body: Bytes,
    /// The store's records epoch when this was built; any later write makes it stale.
    epoch: u64,
}

/// The hash-of-day cache, one entry per `executable` filter, and the pull feeds' documents.
/// Entries live at most `ttl`, never across a UTC day boundary, and never past a change to
/// the records. Filters are
/// caller-chosen, so the cache is bounded by entries and by bytes.
pub struct FeedCache {
    ttl: Duration,
    entries: Mutex<CachedFeeds>,
    /// The pull feeds (`routes::feeds`, `routes::taxii`): one set, for every record.
    documents: Mutex<Option<Arc<FeedDocuments>>>,
}

#[derive(Default)]
struct CachedFeeds {
    by_filter: HashMap<String, CachedFeed>,
    bytes: usize,
}

impl FeedCache {
    const MAX_ENTRIES: usize = 4096;
    const MAX_BYTES: usize = 64 << 20;

    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::default(),
            documents: Mutex::default(),
        }
    }

    /// Whether something built at `generated_at` from records epoch `built_from` may still
    /// be served: younger than the TTL, of today (UTC) and of the current records.
    fn fresh(
        &self,
        generated_at: DateTime<Utc>,
        built_from: u64,
        now: DateTime<Utc>,
        epoch: u64,
    ) -> bool {
        let age = (now - generated_at).to_std().unwrap_or(Duration::MAX);
        built_from == epoch && age < self.ttl && generated_at.date_naive() == now.date_naive()
    }

    fn get(&self, key: &str, now: DateTime<Utc>, epoch: u64) -> Option<CachedFeed> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let hit = entries.by_filter.get(key)?;
        self.fresh(hit.generated_at, hit.epoch, now, epoch)
            .then(|| hit.clone())
    }

    /// The pull feeds' documents, while fresh by the same rule as the hash-of-day.
    pub(crate) fn documents(&self, now: DateTime<Utc>, epoch: u64) -> Option<Arc<FeedDocuments>> {
        let slot = self.documents.lock().unwrap_or_else(|e| e.into_inner());
        let docs = slot.as_ref()?;
        self.fresh(docs.generated_at, docs.epoch, now, epoch)
            .then(|| docs.clone())
    }

    /// The documents served last, fresh or not (their entity tags carry over).
    pub(crate) fn previous_documents(&self) -> Option<Arc<FeedDocuments>> {
        self.documents
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn put_documents(&self, docs: Arc<FeedDocuments>) {
        *self.documents.lock().unwrap_or_else(|e| e.into_inner()) = Some(docs);
    }

    fn put(&self, key: String, entry: CachedFeed) {
        let size = key.len() + entry.approximate_bytes();
        if size > Self::MAX_BYTES / 4 {
            return;
        }
        let mut cache = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = cache.by_filter.remove(&key) {
            cache.bytes -= key.len() + old.approximate_bytes();
        }
        if cache.by_filter.len() >= Self::MAX_ENTRIES || cache.bytes + size > Self::MAX_BYTES {
            // Stale entries first; if that is not enough, start over.
            cache.by_filter.retain(|_, e| e.epoch == entry.epoch);
            cache.bytes = cache
                .by_filter
                .iter()
                .map(|(k, e)| k.len() + e.approximate_bytes())
                .sum();
            if cache.by_filter.len() >= Self::MAX_ENTRIES || cache.bytes + size > Self::MAX_BYTES {
                *cache = CachedFeeds::default();
            }
        }
        cache.bytes += size;
        cache.by_filter.insert(key, entry);
    }

    /// Bytes the cache holds now (approximately).
    pub fn bytes(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }
}

impl CachedFeed {
    fn approximate_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.hit_body.len()
    }
}

/// Overall and per-vendor health.
#[utoipa::path(get, path = "/public/status", tag = "public",
    responses((status = 200, body = Status)))]
pub async fn status(State(state): State<AppState>) -> Json<Status> {
    Json(system_status(&state, ErrorDetail::Class).await)
}

/// How much of a vendor's last error a status answer shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorDetail {
    /// The kind of failure only: the public page never shows configured URLs, resolver
    /// output or anything else an error message may carry.
    Class,
    /// The whole (URL-redacted) message, for staff.
    Full,
}

/// What the public page says of a stored error: its kind in plain words.
pub fn error_class(last_error: &str) -> &'static str {
    match last_error.split_once(':').map(|(kind, _)| kind) {
        Some("hash_mismatch") => "published hash mismatch (possible tampering)",
        Some("discovery") => "vendor channel unreadable",
        Some("download") => "download failed",
        Some("invalid_artifact") => "invalid data from the vendor channel",
        Some("record" | "audit") => "could not store the results",
        _ => "refresh failed",
    }
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
                    ErrorDetail::Class => error_class(&e).to_string(),
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
                    ErrorDetail::Class => crl_error_class(&e).to_string(),
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

/// What the public page says of a CRL error: its kind (`jobs::revocation` starts each
/// message with it) in plain words.
pub fn crl_error_class(last_error: &str) -> &'static str {
    match last_error.split_once(':').map(|(kind, _)| kind) {
        Some("unreachable") => "CRL server unreachable",
        Some("http_status") => "CRL server answered an error",
        Some("too_large") => "CRL over the size limit",
        Some("malformed") => "CRL unreadable or unsupported",
        Some("unverified") => "CRL failed verification against its issuer",
        Some("expired") => "CRL past its nextUpdate",
        Some("rollback") => "CRL number went backwards (possible replay)",
        _ => "CRL check failed",
    }
}
