//! A read-only TAXII 2.1 server over the STIX objects of the current vendor releases:
//! discovery, one API root (`/taxii2/knowngood/`), one collection, its objects (filters,
//! `added_after`, `limit`, `next`), manifest, object versions, and status (404: nothing is
//! ever written). Every answer is `application/taxii+json;version=2.1`, every error a TAXII
//! error body; a request whose `Accept` does not admit that type is answered 406. The
//! objects are read from the store a page at a time (`services::taxii`).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use feeds::taxii::{self, Page, PageBuilder, Query, RawQuery, TaxiiError};
use serde::Deserialize;
use utoipa_axum::routes;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::QueryParams;
use crate::routing::{Api, RouteRule};
use crate::services;

pub(crate) fn routes(api: Api) -> Api {
    api.route(routes!(discovery), RouteRule::public())
        .route(routes!(api_root), RouteRule::public())
        .route(routes!(collections), RouteRule::public())
        .route(routes!(collection), RouteRule::public())
        .route(routes!(objects), RouteRule::public())
        .route(routes!(object), RouteRule::public())
        .route(routes!(object_versions), RouteRule::public())
        .route(routes!(manifest), RouteRule::public())
        .route(routes!(status), RouteRule::public())
}

const HEADER_FIRST: &str = "x-taxii-date-added-first";
const HEADER_LAST: &str = "x-taxii-date-added-last";

fn answer(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(taxii::MEDIA_TYPE),
        )],
        body,
    )
        .into_response()
}

fn error(e: TaxiiError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    answer(status, e.body())
}

/// 406 unless the client accepts TAXII 2.1.
fn negotiate(headers: &HeaderMap) -> Result<(), TaxiiError> {
    let accept = headers
        .get(header::ACCEPT)
        .map(|v| v.to_str().unwrap_or(""));
    if taxii::accepts(accept) {
        Ok(())
    } else {
        Err(TaxiiError::new(
            406,
            "Not acceptable",
            format!("this server answers {} only", taxii::MEDIA_TYPE),
        ))
    }
}

/// A page with its `X-TAXII-Date-Added-First` and `-Last` headers.
fn paged(page: &Page, body: Vec<u8>) -> Response {
    let mut response = answer(StatusCode::OK, body);
    for (name, value) in [
        (HEADER_FIRST, &page.date_added_first),
        (HEADER_LAST, &page.date_added_last),
    ] {
        if let Some(value) = value
            && let Ok(value) = HeaderValue::from_str(value)
        {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// Discovery: the API roots, as absolute URLs on the configured public base URL.
#[utoipa::path(get, path = "/taxii2/", tag = "taxii",
    responses(
        (status = 200, description = "TAXII discovery resource", content_type = "application/taxii+json;version=2.1"),
        (status = 406, description = "`Accept` does not admit TAXII 2.1")))]
pub async fn discovery(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(e) = negotiate(&headers) {
        return error(e);
    }
    let base = feeds::Publisher::new(&state.settings.public_base_url);
    answer(StatusCode::OK, taxii::discovery(&base.base_url))
}

/// The API root.
#[utoipa::path(get, path = "/taxii2/knowngood/", tag = "taxii",
    responses(
        (status = 200, description = "TAXII API root resource", content_type = "application/taxii+json;version=2.1"),
        (status = 406, description = "`Accept` does not admit TAXII 2.1")))]
pub async fn api_root(headers: HeaderMap) -> Response {
    match negotiate(&headers) {
        Ok(()) => answer(StatusCode::OK, taxii::api_root()),
        Err(e) => error(e),
    }
}

/// The collections of the API root.
#[utoipa::path(get, path = "/taxii2/knowngood/collections/", tag = "taxii",
    responses(
        (status = 200, description = "TAXII collections resource", content_type = "application/taxii+json;version=2.1"),
        (status = 406, description = "`Accept` does not admit TAXII 2.1")))]
pub async fn collections(headers: HeaderMap) -> Response {
    match negotiate(&headers) {
        Ok(()) => answer(StatusCode::OK, taxii::collections()),
        Err(e) => error(e),
    }
}

/// One collection.
#[utoipa::path(get, path = "/taxii2/knowngood/collections/{collection_id}/", tag = "taxii",
    params(("collection_id" = String, Path, description = "Collection id")),
    responses(
        (status = 200, description = "TAXII collection resource", content_type = "application/taxii+json;version=2.1"),
        (status = 404, description = "Unknown collection (TAXII error body)"),
        (status = 406, description = "`Accept` does not admit TAXII 2.1")))]
pub async fn collection(Path(collection_id): Path<String>, headers: HeaderMap) -> Response {
    match negotiate(&headers).and_then(|()| taxii::collection(&collection_id)) {
        Ok(body) => answer(StatusCode::OK, body),
        Err(e) => error(e),
    }
}

/// The filters and paging of TAXII object listings.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TaxiiQuery {
    /// Only objects added strictly after this instant (RFC 3339).
    added_after: Option<String>,
    /// Largest page (default 100, at most 1000).
    limit: Option<String>,
    /// The `next` cursor of the previous page.
    next: Option<String>,
    /// Comma-separated object ids.
    #[serde(rename = "match[id]")]
    #[param(rename = "match[id]")]
    match_id: Option<String>,
    /// Comma-separated object types.
    #[serde(rename = "match[type]")]
    #[param(rename = "match[type]")]
    match_type: Option<String>,
    /// `last` (default), `first`, `all`, or comma-separated versions (RFC 3339).
    #[serde(rename = "match[version]")]
    #[param(rename = "match[version]")]
    match_version: Option<String>,
    /// Comma-separated STIX spec versions (objects here are `2.1`).
    #[serde(rename = "match[spec_version]")]
    #[param(rename = "match[spec_version]")]
    match_spec_version: Option<String>,
}

impl TaxiiQuery {
    fn parse(self) -> Result<Query, TaxiiError> {
        Query::parse(&RawQuery {
            added_after: self.added_after,
            limit: self.limit,
            next: self.next,
            match_id: self.match_id,
            match_type: self.match_type,
            match_version: self.match_version,
            match_spec_version: self.match_spec_version,
        })
    }
}

/// Which listing of the collection a request asks for.
enum Listing {
    Objects,
    Manifest,
    Object(String),
    Versions(String),
}

async fn list(
    state: &AppState,
    headers: &HeaderMap,
    collection_id: &str,
    query: TaxiiQuery,
    listing: Listing,
) -> Response {
    let checked = negotiate(headers)
        .and_then(|()| taxii::known_collection(collection_id))
        .and_then(|()| query.parse());
    let query = match checked {
        Ok(query) => query,
        Err(e) => return error(e),
    };
    let store = state.store.as_ref();
    let found = match &listing {
        Listing::Objects | Listing::Manifest => services::taxii::page(store, &query).await,
        Listing::Object(id) | Listing::Versions(id) => {
            match services::taxii::object(&state.store, &state.taxii_objects, id).await {
                Ok(Some(object)) => {
                    // The one object, subject to the query's bound and filters like any other.
                    let mut builder = PageBuilder::new(&query, Some(id));
                    builder.offer(object);
                    Ok(builder.finish(false))
                }
                Ok(None) => {
                    return error(TaxiiError::not_found(format!(
                        "no object {id:?} in this collection"
                    )));
                }
                Err(e) => Err(e),
            }
        }
    };
    let page = match found {
        Ok(page) => page,
        // Objects by id while the table of which records name them is still being filled.
        Err(model::Error::Unavailable(why)) => {
            let mut response = error(TaxiiError::new(503, "Service unavailable", why));
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            return response;
        }
        Err(e) => return ApiError::from(e).into_response(),
    };
    let body = match listing {
        Listing::Objects | Listing::Object(_) => page.envelope(),
        Listing::Manifest => page.manifest(),
        Listing::Versions(_) => page.versions(),
    };
    paged(&page, body)
}

/// The collection's objects, oldest added first, a page at a time.
#[utoipa::path(get, path = "/taxii2/knowngood/collections/{collection_id}/objects/", tag = "taxii",
    params(("collection_id" = String, Path, description = "Collection id"), TaxiiQuery),
    responses(
        (status = 200, description = "TAXII envelope; `X-TAXII-Date-Added-First` and `-Last` headers", content_type = "application/taxii+json;version=2.1"),
        (status = 400, description = "A filter, `limit` or `next` is not valid (TAXII error body)"),
        (status = 404, description = "Unknown collection (TAXII error body)"),
        (status = 406, description = "`Accept` does not admit TAXII 2.1")))]
pub async fn objects(
    State(state): State<AppState>,
    Path(collection_id): Path<String>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<TaxiiQuery>,
) -> Response {
    list(&state, &headers, &collection_id, query, Listing::Objects).await
}

/// The answer to a write (any method but GET and HEAD) under `/taxii2/`: 405 with a TAXII
/// error body; every collection here is read-only.
pub(crate) fn read_only() -> Response {
    let mut response = error(TaxiiError::new(
        405,
        "Method not allowed",
        "this TAXII server is read-only (every collection has can_write false)",
    ));
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    response
}

/// The answer to an unknown path under `/taxii2/`: 404 with a TAXII error body.
pub(crate) fn no_such_resource() -> Response {
    error(TaxiiError::not_found(format!(
        "no such TAXII resource: the API root is /taxii2/{}/",
        taxii::API_ROOT
    )))
}

/// One object (every version kept, which is its latest).
#[utoipa::path(get, path = "/taxii2/knowngood/collections/{collection_id}/objects/{object_id}/", tag = "taxii",
    params(("collection_id" = String, Path, description = "Collection id"),
           ("object_id" = String, Path, description = "STIX id"), TaxiiQuery),
    responses(
        (status = 200, description = "TAXII envelope", content_type = "application/taxii+json;version=2.1"),
        (status = 404, description = "Unknown collection or object (TAXII error body)"),
        (status = 406, description = "`Accept` does not admit TAXII 2.1"),
        (status = 503, description = "The objects are still being indexed by id after an upgrade (TAXII error body, `Retry-After`)")))]
pub async fn object(
    State(state): State<AppState>,
    Path((collection_id, object_id)): Path<(String, String)>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<TaxiiQuery>,
) -> Response {
    list(
        &state,
        &headers,
        &collection_id,
        query,
        Listing::Object(object_id),
    )
    .await
}

/// The versions of one object.
#[utoipa::path(get, path = "/taxii2/knowngood/collections/{collection_id}/objects/{object_id}/versions/", tag = "taxii",
    params(("collection_id" = String, Path, description = "Collection id"),
           ("object_id" = String, Path, description = "STIX id"), TaxiiQuery),
    responses(
        (status = 200, description = "TAXII versions resource", content_type = "application/taxii+json;version=2.1"),
        (status = 404, description = "Unknown collection or object (TAXII error body)"),
        (status = 406, description = "`Accept` does not admit TAXII 2.1"),
        (status = 503, description = "The objects are still being indexed by id after an upgrade (TAXII error body, `Retry-After`)")))]
pub(crate) async fn object_versions(
    State(state): State<AppState>,
    Path((collection_id, object_id)): Path<(String, String)>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<TaxiiQuery>,
) -> Response {
    list(
        &state,
        &headers,
        &collection_id,
        query,
        Listing::Versions(object_id),
    )
    .await
}

/// The collection's manifest: id, date added, version and media type of each object.
#[utoipa::path(get, path = "/taxii2/knowngood/collections/{collection_id}/manifest/", tag = "taxii",
    params(("collection_id" = String, Path, description = "Collection id"), TaxiiQuery),
    responses(
        (status = 200, description = "TAXII manifest resource; `X-TAXII-Date-Added-First` and `-Last` headers", content_type = "application/taxii+json;version=2.1"),
        (status = 400, description = "A filter, `limit` or `next` is not valid (TAXII error body)"),
        (status = 404, description = "Unknown collection (TAXII error body)"),
        (status = 406, description = "`Accept` does not admit TAXII 2.1")))]
pub async fn manifest(
    State(state): State<AppState>,
    Path(collection_id): Path<String>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<TaxiiQuery>,
) -> Response {
    list(&state, &headers, &collection_id, query, Listing::Manifest).await
}

/// Status of a write: there are none, so every id is unknown.
#[utoipa::path(get, path = "/taxii2/knowngood/status/{status_id}/", tag = "taxii",
    params(("status_id" = String, Path, description = "Status id")),
    responses(
        (status = 404, description = "Unknown status (TAXII error body)"),
        (status = 406, description = "`Accept` does not admit TAXII 2.1")))]
pub async fn status(Path(status_id): Path<String>, headers: HeaderMap) -> Response {
    error(negotiate(&headers).err().unwrap_or_else(|| {
        TaxiiError::not_found(format!(
            "no status {status_id:?}: this server accepts no writes"
        ))
    }))
}
