//! The pull feeds: JSON Feed, RSS and the STIX bundle of current vendor releases. The
//! documents come from the `feeds` crate; here they are cached (with the hash-of-day, in
//! [`FeedCache`](crate::routes::public::FeedCache): at most the cache TTL, never across a
//! UTC day, never past a change to the records) and served with `ETag` and
//! `Last-Modified`, answering conditional requests with 304.

use std::sync::{Arc, OnceLock};

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use feeds::Publisher;
use feeds::taxii::Index;
use model::HashRecord;
use utoipa_axum::routes;

use crate::AppState;
use crate::error::{ApiResult, ErrorBody};
use crate::routing::{Api, Rule};

pub(crate) fn routes(api: Api) -> Api {
    api.route(routes!(json_feed), Rule::public())
        .route(routes!(rss_feed), Rule::public())
        .route(routes!(stix_bundle), Rule::public())
}

/// A feed document ready to serve.
#[derive(Debug, Clone)]
pub struct CachedBody {
    pub bytes: Bytes,
    pub etag: String,
    /// When these bytes were first served: carried over from the previous documents while
    /// the bytes stay the same, so `If-Modified-Since` is answered 304 across rebuilds.
    pub last_modified: DateTime<Utc>,
}

/// The feeds of one state of the records, each built on first use.
pub struct FeedDocuments {
    pub(crate) generated_at: DateTime<Utc>,
    /// The records epoch these were built from.
    pub(crate) epoch: u64,
    records: Vec<HashRecord>,
    publisher: Publisher,
    /// Entity tags and dates of the documents served before these, by kind.
    previous: Vec<(Kind, String, DateTime<Utc>)>,
    json: OnceLock<CachedBody>,
    rss: OnceLock<CachedBody>,
    stix: OnceLock<CachedBody>,
    index: OnceLock<Index>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Json,
    Rss,
    Stix,
}

impl FeedDocuments {
    fn new(
        records: Vec<HashRecord>,
        publisher: Publisher,
        generated_at: DateTime<Utc>,
        epoch: u64,
        previous: Option<&FeedDocuments>,
    ) -> Self {
        let previous = previous
            .map(|p| {
                [
                    (Kind::Json, &p.json),
                    (Kind::Rss, &p.rss),
                    (Kind::Stix, &p.stix),
                ]
                .into_iter()
                .filter_map(|(kind, body)| {
                    body.get().map(|b| (kind, b.etag.clone(), b.last_modified))
                })
                .collect()
            })
            .unwrap_or_default();
        Self {
            generated_at,
            epoch,
            records,
            publisher,
            previous,
            json: OnceLock::new(),
            rss: OnceLock::new(),
            stix: OnceLock::new(),
            index: OnceLock::new(),
        }
    }

    fn body(&self, kind: Kind, bytes: Vec<u8>) -> CachedBody {
        let etag = feeds::etag(&bytes);
        let last_modified = self
            .previous
            .iter()
            .find(|(k, tag, _)| *k == kind && *tag == etag)
            .map_or(self.generated_at, |(_, _, at)| *at);
        CachedBody {
            bytes: Bytes::from(bytes),
            etag,
            last_modified,
        }
    }

    fn feed_records(&self) -> Vec<&HashRecord> {
        feeds::feed_records(&self.records)
    }

    pub(crate) fn json(&self) -> &CachedBody {
        self.json.get_or_init(|| {
            self.body(
                Kind::Json,
                feeds::json_feed::document(&self.feed_records(), &self.publisher),
            )
        })
    }

    pub(crate) fn rss(&self) -> &CachedBody {
        self.rss.get_or_init(|| {
            self.body(
                Kind::Rss,
                feeds::rss::document(&self.feed_records(), &self.publisher),
            )
        })
    }

    pub(crate) fn stix(&self) -> &CachedBody {
        self.stix
            .get_or_init(|| self.body(Kind::Stix, feeds::stix::bundle(self.index().objects())))
    }

    /// The STIX objects in TAXII's order (date added).
    pub(crate) fn index(&self) -> &Index {
        self.index
            .get_or_init(|| Index::new(feeds::stix::objects(&self.feed_records())))
    }
}

/// The documents for the records as they are now: cached, or built from the current
/// records (one read of the store).
pub(crate) async fn documents(state: &AppState) -> ApiResult<Arc<FeedDocuments>> {
    let now = state.clock.now();
    let epoch = state.store.records_epoch();
    if let Some(docs) = state.feed_cache.documents(now, epoch) {
        return Ok(docs);
    }
    let records = state.store.current_records(None).await?;
    let previous = state.feed_cache.previous_documents();
    let docs = Arc::new(FeedDocuments::new(
        records,
        Publisher::new(&state.settings.public_base_url),
        now,
        epoch,
        previous.as_deref(),
    ));
    state.feed_cache.put_documents(docs.clone());
    Ok(docs)
}

/// An HTTP date (RFC 9110 IMF-fixdate).
fn http_date(t: DateTime<Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// Whether the client's copy is current: `If-None-Match` decides when present (any of its
/// tags, weak or strong, or `*`); otherwise `If-Modified-Since` at whole seconds.
fn not_modified(request: &HeaderMap, body: &CachedBody) -> bool {
    if let Some(tags) = request.get(header::IF_NONE_MATCH) {
        let Ok(tags) = tags.to_str() else {
            return false;
        };
        return tags
            .split(',')
            .map(str::trim)
            .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == body.etag);
    }
    request
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| DateTime::parse_from_rfc2822(v).ok())
        .is_some_and(|since| body.last_modified.timestamp() <= since.timestamp())
}

/// The document, or 304 when the client's copy is current.
pub(crate) fn serve(request: &HeaderMap, body: &CachedBody, media_type: &'static str) -> Response {
    let mut headers = HeaderMap::new();
    if let Ok(etag) = HeaderValue::from_str(&body.etag) {
        headers.insert(header::ETAG, etag);
    }
    if let Ok(date) = HeaderValue::from_str(&http_date(body.last_modified)) {
        headers.insert(header::LAST_MODIFIED, date);
    }
    // Caches may keep it but must ask again (a conditional request costs a 304).
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if not_modified(request, body) {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    (StatusCode::OK, headers, body.bytes.clone()).into_response()
}

/// JSON Feed 1.1 of current vendor releases: one item per record, its fields in `_knowngood`.
#[utoipa::path(get, path = "/public/feed.json", tag = "public",
    responses(
        (status = 200, description = "JSON Feed 1.1 (`ETag`, `Last-Modified`)", content_type = "application/feed+json"),
        (status = 304, description = "Not modified (`If-None-Match` or `If-Modified-Since`)"),
        (status = 429, description = "More than 300 requests per minute from this address", body = ErrorBody)))]
pub async fn json_feed(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    let docs = documents(&state).await?;
    Ok(serve(&headers, docs.json(), feeds::json_feed::MEDIA_TYPE))
}

/// RSS 2.0 of current vendor releases: one item per record.
#[utoipa::path(get, path = "/public/feed.rss", tag = "public",
    responses(
        (status = 200, description = "RSS 2.0 (`ETag`, `Last-Modified`)", content_type = "application/rss+xml"),
        (status = 304, description = "Not modified (`If-None-Match` or `If-Modified-Since`)"),
        (status = 429, description = "More than 300 requests per minute from this address", body = ErrorBody)))]
pub async fn rss_feed(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    let docs = documents(&state).await?;
    Ok(serve(&headers, docs.rss(), feeds::rss::MEDIA_TYPE))
}

/// STIX 2.1 bundle of current vendor releases: per record a benign indicator, its file and
/// software observables and their relationships; the producer identity and TLP:CLEAR.
#[utoipa::path(get, path = "/public/feed/stix", tag = "public",
    responses(
        (status = 200, description = "STIX 2.1 bundle (`ETag`, `Last-Modified`)", content_type = "application/stix+json;version=2.1"),
        (status = 304, description = "Not modified (`If-None-Match` or `If-Modified-Since`)"),
        (status = 429, description = "More than 300 requests per minute from this address", body = ErrorBody)))]
pub async fn stix_bundle(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    let docs = documents(&state).await?;
    Ok(serve(&headers, docs.stix(), feeds::stix::MEDIA_TYPE))
}
