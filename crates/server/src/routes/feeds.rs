//! The pull feeds: JSON Feed, RSS and the STIX bundle of current vendor releases, each the
//! newest [`feeds::WINDOW`] records with a link to the next older window (`?before=`). The
//! documents come from the `feeds` crate; the newest window is cached (with the
//! hash-of-day, in [`FeedCache`](crate::feed_cache::FeedCache): at most the cache TTL,
//! never across a UTC day, never past a change to the records) and every window is served
//! with `ETag` and `Last-Modified`, answering conditional requests with 304.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use feeds::Before;
use model::Error;
use serde::Deserialize;
use utoipa_axum::routes;

use crate::AppState;
use crate::error::{ApiResult, ErrorBody};
use crate::extract::QueryParams;
use crate::feed_cache::{CachedBody, FeedDocuments, documents, serve};
use crate::routing::{Api, RouteRule};

pub(crate) fn routes(api: Api) -> Api {
    api.route(routes!(json_feed), RouteRule::public())
        .route(routes!(rss_feed), RouteRule::public())
        .route(routes!(stix_bundle), RouteRule::public())
}

/// Which window of a feed.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FeedWindow {
    /// The records added before this position: the `before` of the previous window's
    /// `next` link (JSON Feed `next_url`, RSS `atom:link rel="next"`, `Link` header).
    before: Option<String>,
}

impl FeedWindow {
    fn parse(&self) -> Result<Option<Before>, Error> {
        self.before
            .as_deref()
            .map(|text| {
                Before::decode(text)
                    .ok_or_else(|| Error::bad_request("before is not a position this server gave"))
            })
            .transpose()
    }
}

/// The window's document, with a `Link` header to the next older window (the STIX bundle
/// has no place for one in its body).
fn answer(
    headers: &HeaderMap,
    docs: &FeedDocuments,
    body: &CachedBody,
    media_type: &'static str,
    path: &str,
) -> Response {
    let mut response = serve(headers, body, media_type);
    if let Some(next) = &docs.next {
        let url = next.url(&docs.publisher, path);
        if let Ok(link) = HeaderValue::from_str(&format!("<{url}>; rel=\"next\"")) {
            response.headers_mut().insert(header::LINK, link);
        }
    }
    response
}

/// JSON Feed 1.1 of current vendor releases: the newest records first, one item per
/// record, its fields in `_knowngood`; `next_url` to older ones.
#[utoipa::path(get, path = "/public/feed.json", tag = "public", params(FeedWindow),
    responses(
        (status = 200, description = "JSON Feed 1.1 (`ETag`, `Last-Modified`)", content_type = "application/feed+json"),
        (status = 304, description = "Not modified (`If-None-Match` or `If-Modified-Since`)"),
        (status = 400, description = "`before` is not a position this server gave", body = ErrorBody),
        (status = 429, description = "More than 300 requests per minute from this address", body = ErrorBody)))]
pub async fn json_feed(
    State(state): State<AppState>,
    headers: HeaderMap,
    QueryParams(window): QueryParams<FeedWindow>,
) -> ApiResult<Response> {
    let docs = documents(&state, window.parse()?.as_ref()).await?;
    Ok(answer(
        &headers,
        &docs,
        docs.json(),
        feeds::json_feed::MEDIA_TYPE,
        feeds::json_feed::PATH,
    ))
}

/// RSS 2.0 of current vendor releases: the newest records first, one item per record;
/// `atom:link rel="next"` to older ones.
#[utoipa::path(get, path = "/public/feed.rss", tag = "public", params(FeedWindow),
    responses(
        (status = 200, description = "RSS 2.0 (`ETag`, `Last-Modified`)", content_type = "application/rss+xml"),
        (status = 304, description = "Not modified (`If-None-Match` or `If-Modified-Since`)"),
        (status = 400, description = "`before` is not a position this server gave", body = ErrorBody),
        (status = 429, description = "More than 300 requests per minute from this address", body = ErrorBody)))]
pub(crate) async fn rss_feed(
    State(state): State<AppState>,
    headers: HeaderMap,
    QueryParams(window): QueryParams<FeedWindow>,
) -> ApiResult<Response> {
    let docs = documents(&state, window.parse()?.as_ref()).await?;
    Ok(answer(
        &headers,
        &docs,
        docs.rss(),
        feeds::rss::MEDIA_TYPE,
        feeds::rss::PATH,
    ))
}

/// STIX 2.1 bundle of current vendor releases: per record a benign indicator, its file and
/// software observables and their relationships; the producer identity and TLP:CLEAR. The
/// newest records; `Link: rel="next"` to older ones.
#[utoipa::path(get, path = "/public/feed/stix", tag = "public", params(FeedWindow),
    responses(
        (status = 200, description = "STIX 2.1 bundle (`ETag`, `Last-Modified`)", content_type = "application/stix+json;version=2.1"),
        (status = 304, description = "Not modified (`If-None-Match` or `If-Modified-Since`)"),
        (status = 400, description = "`before` is not a position this server gave", body = ErrorBody),
        (status = 429, description = "More than 300 requests per minute from this address", body = ErrorBody)))]
pub(crate) async fn stix_bundle(
    State(state): State<AppState>,
    headers: HeaderMap,
    QueryParams(window): QueryParams<FeedWindow>,
) -> ApiResult<Response> {
    let docs = documents(&state, window.parse()?.as_ref()).await?;
    Ok(answer(
        &headers,
        &docs,
        docs.stix(),
        feeds::stix::MEDIA_TYPE,
        STIX_PATH,
    ))
}

const STIX_PATH: &str = "/public/feed/stix";
