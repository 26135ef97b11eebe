//! The public feeds' caches: the hash-of-day pages and the pull feeds' documents (JSON
//! Feed, RSS, STIX bundle) of the newest [`feeds::WINDOW`] records, kept at most the cache
//! TTL, never across a UTC day and never past a change to the records; and how a feed
//! document is served (`ETag`, `Last-Modified`, 304 to a conditional request). Older
//! windows (`?before=`) are built per request from one window of records. The routes that
//! serve them (`routes::public`, `routes::feeds`) only read from here; TAXII reads the
//! store a page at a time (`services::taxii`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use feeds::{Before, Publisher};
use model::HashRecord;
use store::AddedPosition;

use crate::AppState;
use crate::error::ApiResult;

#[derive(Clone)]
pub(crate) struct CachedFeed {
    pub(crate) generated_at: DateTime<Utc>,
    /// The whole answer, `cache_hit: true`, as sent.
    pub(crate) hit_body: Bytes,
    /// The page's `next`, for its `Link` header.
    pub(crate) next: Option<String>,
    /// The store's records epoch when this was built; any later write makes it stale.
    pub(crate) epoch: u64,
}

/// The hash-of-day cache, one entry per `executable` filter, and the pull feeds' documents.
/// Entries live at most `ttl`, never across a UTC day boundary, and never past a change to
/// the records. Filters are
/// caller-chosen, so the cache is bounded by entries and by bytes.
pub struct FeedCache {
    ttl: Duration,
    entries: Mutex<CachedFeeds>,
    /// The pull feeds' newest window (`routes::feeds`).
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

    pub(crate) fn get(&self, key: &str, now: DateTime<Utc>, epoch: u64) -> Option<CachedFeed> {
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

    pub(crate) fn put(&self, key: String, entry: CachedFeed) {
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

/// A feed document ready to serve.
#[derive(Debug, Clone)]
pub(crate) struct CachedBody {
    pub bytes: Bytes,
    pub etag: String,
    /// When these bytes were first served: carried over from the previous documents while
    /// the bytes stay the same, so `If-Modified-Since` is answered 304 across rebuilds.
    pub last_modified: DateTime<Utc>,
}

/// The feeds of one window of the records in one state of them, each built on first use.
pub(crate) struct FeedDocuments {
    pub(crate) generated_at: DateTime<Utc>,
    /// The records epoch these were built from.
    pub(crate) epoch: u64,
    /// At most [`feeds::WINDOW`] current records, newest added first.
    records: Vec<HashRecord>,
    /// Where the next older window starts, when there is one.
    pub(crate) next: Option<Before>,
    /// Whom the documents name, and the base of their links.
    pub(crate) publisher: Publisher,
    /// Entity tags and dates of the documents served before these, by kind.
    previous: Vec<(Kind, String, DateTime<Utc>)>,
    json: OnceLock<CachedBody>,
    rss: OnceLock<CachedBody>,
    stix: OnceLock<CachedBody>,
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
        next: Option<Before>,
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
            next,
            publisher,
            previous,
            json: OnceLock::new(),
            rss: OnceLock::new(),
            stix: OnceLock::new(),
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
                feeds::json_feed::document(
                    &self.feed_records(),
                    &self.publisher,
                    self.next.as_ref(),
                ),
            )
        })
    }

    pub(crate) fn rss(&self) -> &CachedBody {
        self.rss.get_or_init(|| {
            self.body(
                Kind::Rss,
                feeds::rss::document(&self.feed_records(), &self.publisher, self.next.as_ref()),
            )
        })
    }

    /// The bundle of the window's records, in the order they were added; an observable
    /// several of them share appears once, with the first.
    pub(crate) fn stix(&self) -> &CachedBody {
        self.stix.get_or_init(|| {
            let mut oldest_first = self.feed_records();
            oldest_first.reverse();
            self.body(
                Kind::Stix,
                feeds::stix::bundle(&feeds::stix::objects(&oldest_first)),
            )
        })
    }
}

/// The documents of the newest window of records (`before: None`), cached, or of the
/// window of records added before `before`, built for this request; one read of at most a
/// window of records from the store.
pub(crate) async fn documents(
    state: &AppState,
    before: Option<&Before>,
) -> ApiResult<Arc<FeedDocuments>> {
    let now = state.clock.now();
    let epoch = state.store.records_epoch();
    if before.is_none()
        && let Some(docs) = state.feed_cache.documents(now, epoch)
    {
        return Ok(docs);
    }
    let position = before.map(|b| AddedPosition {
        added_at: b.added_at,
        id: b.id.clone(),
    });
    // One record more than the window tells whether an older window exists.
    let mut records = state
        .store
        .current_records_added_before(position.as_ref(), feeds::WINDOW as u32 + 1)
        .await?;
    let next = if records.len() > feeds::WINDOW {
        records.truncate(feeds::WINDOW);
        records.last().map(|r| Before {
            added_at: r.added_at,
            id: r.id.clone(),
        })
    } else {
        None
    };
    let publisher = Publisher::new(&state.settings.public_base_url);
    if before.is_some() {
        return Ok(Arc::new(FeedDocuments::new(
            records, next, publisher, now, epoch, None,
        )));
    }
    let previous = state.feed_cache.previous_documents();
    let docs = Arc::new(FeedDocuments::new(
        records,
        next,
        publisher,
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
