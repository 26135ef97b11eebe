//! The pull feeds: JSON Feed, RSS and the STIX bundle of current vendor releases. The
//! documents come from the `feeds` crate; here they are cached (with the hash-of-day, in
//! [`FeedCache`](crate::feed_cache::FeedCache): at most the cache TTL, never across a
//! UTC day, never past a change to the records) and served with `ETag` and
//! `Last-Modified`, answering conditional requests with 304.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use utoipa_axum::routes;

use crate::AppState;
use crate::error::{ApiResult, ErrorBody};
use crate::feed_cache::{documents, serve};
use crate::routing::{Api, RouteRule};

pub(crate) fn routes(api: Api) -> Api {
    api.route(routes!(json_feed), RouteRule::public())
        .route(routes!(rss_feed), RouteRule::public())
        .route(routes!(stix_bundle), RouteRule::public())
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
pub(crate) async fn rss_feed(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> ApiResult<Response> {
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
pub(crate) async fn stix_bundle(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let docs = documents(&state).await?;
    Ok(serve(&headers, docs.stix(), feeds::stix::MEDIA_TYPE))
}
