//! Routes that need no credential: liveness, readiness, the daily feed and the status page.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use model::Error;
use serde::Deserialize;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::{HashOfDay, HashRecordJson, Status, timestamp};
use crate::error::{ApiResult, ErrorBody};
use crate::extract::QueryParams;
use crate::feed_cache::CachedFeed;
use crate::routing::{Api, LimitClass, RouteRule};
use crate::status::{ErrorDetail, system_status};
use model::HashRecord;
use store::FeedPosition;

/// The routes that need no credential.
pub(crate) fn routes(api: Api) -> Api {
    api.route(
        routes!(healthz),
        RouteRule::public().limit(LimitClass::None),
    )
    .route(routes!(readyz), RouteRule::public().limit(LimitClass::None))
    .route(
        routes!(hash_of_day),
        RouteRule::public().limit(LimitClass::HashOfDay),
    )
    .route(
        routes!(hash_of_day_ndjson),
        RouteRule::public().limit(LimitClass::HashOfDay),
    )
    .route(routes!(status), RouteRule::public())
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
pub(crate) struct HashOfDayQuery {
    /// Exact executable name, case-insensitive; a package as `name (ecosystem)`. All its
    /// current records come in one answer.
    executable: Option<String>,
    /// Records per page without `executable`: 1 to 10,000, default 1,000.
    limit: Option<String>,
    /// Where the page starts: the `next` value of the previous page.
    after: Option<String>,
    /// Not accepted: history needs a credential (403).
    date: Option<String>,
}

/// Records per page of the feed unless `limit` says otherwise.
pub(crate) const FEED_PAGE_DEFAULT: u32 = 1_000;
/// The largest page of the feed.
pub(crate) const FEED_PAGE_MAX: u32 = 10_000;

/// The public daily feed: one record per tracked file, current today. Without `executable`
/// it comes a page at a time in executable-name order; `next` (and the `Link` header) name
/// the next page. `/public/hash-of-day.ndjson` streams the whole day's feed instead.
#[utoipa::path(get, path = "/public/hash-of-day", tag = "public", params(HashOfDayQuery),
    responses(
        (status = 200, body = HashOfDay, headers(("Link" = String, description = "`<...>; rel=\"next\"` while more pages follow"))),
        (status = 400, description = "`limit` or `after` is not valid", body = ErrorBody),
        (status = 403, description = "`date` given: history needs a credential", body = ErrorBody),
        (status = 429, description = "More than 100 requests per minute from this address", body = ErrorBody)))]
pub(crate) async fn hash_of_day(
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
    let name = crate::extract::name_filter(query.executable.as_deref(), "executable")?
        .unwrap_or_default()
        .to_lowercase();
    let page = if name.is_empty() {
        let limit = crate::extract::parse_limit_within(
            query.limit.as_deref(),
            FEED_PAGE_DEFAULT,
            FEED_PAGE_MAX,
        )?;
        let after = query.after.as_deref().map(decode_position).transpose()?;
        Some((limit, after))
    } else {
        None
    };
    let key = match &page {
        None => format!("name:{name}"),
        Some((limit, after)) => format!(
            "page:{limit}:{}",
            query
                .after
                .as_deref()
                .filter(|_| after.is_some())
                .unwrap_or("")
        ),
    };
    let epoch = state.store.records_epoch();
    if let Some(hit) = state.feed_cache.get(&key, now, epoch) {
        return Ok(with_next_link(
            json_bytes(hit.hit_body),
            hit.next.as_deref(),
            page.as_ref(),
        ));
    }
    let (records, next) = match &page {
        None => (state.store.current_records(Some(&name)).await?, None),
        Some((limit, after)) => {
            let records = state
                .store
                .current_records_page(after.as_ref(), *limit)
                .await?;
            // A full page may have more behind it; the last page is the first short one.
            let next = (records.len() == *limit as usize)
                .then(|| records.last().map(encode_position))
                .flatten();
            (records, next)
        }
    };
    let mut answer = HashOfDay {
        date: now.date_naive().to_string(),
        generated_at: timestamp(now),
        cache_hit: true,
        hashes: records
            .iter()
            .filter(|r| r.integrity_ok)
            .map(HashRecordJson::from)
            .collect(),
        next: next.clone(),
    };
    // Serialised once: a hit is these bytes, however large the page.
    let hit_body = Bytes::from(
        serde_json::to_vec(&answer)
            .map_err(|e| Error::internal_caused("encoding a page of records", e))?,
    );
    state.feed_cache.put(
        key,
        CachedFeed {
            generated_at: now,
            hit_body,
            next: next.clone(),
            epoch,
        },
    );
    answer.cache_hit = false;
    Ok(with_next_link(
        Json(answer).into_response(),
        next.as_deref(),
        page.as_ref(),
    ))
}

/// The whole day's feed as JSON Lines (`application/x-ndjson`), one hash record a line,
/// read from the database a page at a time while it is sent, so its memory stays the same
/// whatever the number of records. Not cached.
#[utoipa::path(get, path = "/public/hash-of-day.ndjson", tag = "public",
    responses(
        (status = 200, description = "One hash record (as in hash-of-day) per line", content_type = "application/x-ndjson"),
        (status = 429, description = "More than 100 requests per minute from this address", body = ErrorBody)))]
pub(crate) async fn hash_of_day_ndjson(State(state): State<AppState>) -> Response {
    use futures::StreamExt as _;
    let store = state.store.clone();
    let pages =
        futures::stream::unfold(Some(None), move |position: Option<Option<FeedPosition>>| {
            let store = store.clone();
            async move {
                let after = position?;
                match store
                    .current_records_page(after.as_ref(), FEED_PAGE_DEFAULT)
                    .await
                {
                    Ok(records) => {
                        let next = (records.len() == FEED_PAGE_DEFAULT as usize)
                            .then(|| records.last().map(position_of))
                            .flatten();
                        let mut lines = Vec::new();
                        for r in records.iter().filter(|r| r.integrity_ok) {
                            if serde_json::to_writer(&mut lines, &HashRecordJson::from(r)).is_ok() {
                                lines.push(b'\n');
                            }
                        }
                        Some((Ok::<_, std::io::Error>(Bytes::from(lines)), next.map(Some)))
                    }
                    Err(e) => {
                        // The status line is gone: cutting the stream short is the only signal
                        // left, and a JSON Lines reader sees the last line incomplete.
                        tracing::warn!(error = %e, "hash-of-day stream ended early");
                        Some((Err(std::io::Error::other(e.to_string())), None))
                    }
                }
            }
        })
        .filter(|chunk| std::future::ready(!matches!(chunk, Ok(b) if b.is_empty())));
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        )],
        axum::body::Body::from_stream(pages),
    )
        .into_response()
}

fn position_of(r: &HashRecord) -> FeedPosition {
    FeedPosition {
        executable_name: r.record.executable_name.clone(),
        platform: r.record.platform.as_str().to_string(),
        arch: r.record.arch.as_str().to_string(),
        id: r.id.clone(),
    }
}

/// The `after` value naming the position after `r`: its sort key, base64url, opaque to
/// callers.
fn encode_position(r: &HashRecord) -> String {
    use base64::Engine as _;
    let p = position_of(r);
    let joined = [p.executable_name, p.platform, p.arch, p.id].join("\0");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(joined)
}

fn decode_position(raw: &str) -> Result<FeedPosition, Error> {
    use base64::Engine as _;
    let invalid =
        || Error::bad_request("after must be the `next` value of a previous hash-of-day page");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(raw.trim())
        .map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let mut parts = text.split('\0').map(str::to_string);
    match (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) {
        (Some(executable_name), Some(platform), Some(arch), Some(id), None) => Ok(FeedPosition {
            executable_name,
            platform,
            arch,
            id,
        }),
        _ => Err(invalid()),
    }
}

/// Adds `Link: <...>; rel="next"` to a page that has a next one.
fn with_next_link(
    mut response: Response,
    next: Option<&str>,
    page: Option<&(u32, Option<FeedPosition>)>,
) -> Response {
    if let (Some(next), Some((limit, _))) = (next, page)
        && let Ok(value) = HeaderValue::from_str(&format!(
            "</public/hash-of-day?limit={limit}&after={next}>; rel=\"next\""
        ))
    {
        response.headers_mut().insert(header::LINK, value);
    }
    response
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

/// Overall and per-vendor health.
#[utoipa::path(get, path = "/public/status", tag = "public",
    responses((status = 200, body = Status)))]
pub async fn status(State(state): State<AppState>) -> Json<Status> {
    Json(system_status(&state, ErrorDetail::Class).await)
}
