//! The hashlookup-compatible routes: CIRCL hashlookup's REST shapes (lookup, bulk, info,
//! top statistics) so that its clients (PyHashlookup, MISP's expansion module) work
//! unchanged against this service. They are declared under `/hashlookup/` and mounted
//! under the configured prefix ([`mounted`]).
//!
//! Those clients send no credential, so the API key travels in the path
//! (`<prefix>k/<key>/lookup/sha1/<hash>`): the route's rule takes it from there
//! ([`RouteRule::key_in_path`]) and it is checked, limited, counted and authorized exactly as
//! an `X-API-Key` on `POST /api/v1/intel/lookup`. The request log names the route's
//! template, never the path, so the key does not reach the logs.
//!
//! Shapes follow the hashlookup server (CIRCL, `adulau/hashlookup-server` `bin/server.py`):
//! a found record is an object with uppercase hex under `MD5`, `SHA-1` and `SHA-256`,
//! `FileName`, `source` and `hashlookup:trust` (`SHA-1` is always present, `null` when the
//! record has none, because hashlookup's records always carry one and its clients rely on
//! it); a miss is 404
//! `{"message": "Non existing SHA-1", "query": ...}`; a malformed hash is 400 with a
//! `message`; bulk answers are arrays of the found records only.

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use lookup::Verdict;
use model::{HashAlgo, HashValue, Permission, Tier};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::api::MAX_LOOKUP_HASHES;
use crate::error::{ApiResult, ErrorBody};
use crate::extract::JsonBody;
use crate::routing::{Api, RouteRule};
use crate::{AppState, Settings};

/// The prefix the routes are declared under; [`Settings::hashlookup_prefix`] moves them.
pub const DECLARED_PREFIX: &str = "/hashlookup/";

/// Trust given to a vendor release: above hashlookup's 50 for a file merely seen in a
/// set, since the publisher itself states these hashes.
const VENDOR_TRUST: u8 = 100;
/// Trust of a file of the reference corpus: hashlookup's own value for a known file.
const CORPUS_TRUST: u8 = 50;

pub(crate) fn routes(api: Api) -> Api {
    let rule = RouteRule::private(Permission::IntelLookup, Tier::Basic).key_in_path();
    api.route(routes!(lookup), rule)
        .route(routes!(bulk), rule)
        .route(routes!(info), rule)
        .route(routes!(stats_top), rule)
}

/// Where a declared route is served: the hashlookup routes under the configured prefix.
pub(crate) fn mounted(path: &str, settings: &Settings) -> String {
    match path.strip_prefix(DECLARED_PREFIX) {
        Some(rest) => format!("{}{rest}", settings.hashlookup_prefix),
        None => path.to_owned(),
    }
}

/// `/a//b` as `/a/b` under the prefix: MISP's module appends `/lookup/...` to a root URL
/// it has already given a trailing slash. Other paths are left alone.
pub(crate) fn collapse_slashes(mut request: Request, prefix: &str) -> Request {
    let path = request.uri().path();
    if !path.starts_with(prefix) || !path.contains("//") {
        return request;
    }
    let mut collapsed = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && collapsed.ends_with('/')) {
            collapsed.push(c);
        }
    }
    if let Some(query) = request.uri().query() {
        collapsed.push('?');
        collapsed.push_str(query);
    }
    let mut parts = request.uri().clone().into_parts();
    if let Ok(path_and_query) = collapsed.parse() {
        parts.path_and_query = Some(path_and_query);
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    request
}

/// A hashlookup record.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct HashlookupRecord<'a> {
    #[serde(rename = "MD5", skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    /// Always present, `null` when the record has no SHA-1: hashlookup keys its records by
    /// SHA-1, and MISP's expansion module reads this key unconditionally (a missing key
    /// fails the whole expansion; a `null` value is skipped).
    #[serde(rename = "SHA-1")]
    pub sha1: Option<String>,
    #[serde(rename = "SHA-256", skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(rename = "FileName")]
    pub file_name: &'a str,
    /// Bytes, as a decimal string (as hashlookup gives it); only when recorded.
    #[serde(rename = "FileSize", skip_serializing_if = "Option::is_none")]
    pub file_size: Option<String>,
    /// `knowngood` for a vendor release; the reference corpus set otherwise.
    pub source: &'a str,
    #[serde(rename = "hashlookup:trust")]
    pub trust: u8,
    /// known_vendor_release or known_file.
    #[serde(rename = "knowngood:classification")]
    pub classification: &'static str,
    #[serde(rename = "knowngood:vendor", skip_serializing_if = "Option::is_none")]
    pub vendor: Option<&'a str>,
    #[serde(rename = "knowngood:version", skip_serializing_if = "Option::is_none")]
    pub version: Option<&'a str>,
    #[serde(rename = "knowngood:platform", skip_serializing_if = "Option::is_none")]
    pub platform: Option<&'static str>,
    #[serde(rename = "ProductCode", skip_serializing_if = "Option::is_none")]
    pub product: Option<ProductCode<'a>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ProductCode<'a> {
    #[serde(rename = "ProductName")]
    pub product_name: &'a str,
}

/// hashlookup's error and miss shape.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct HashlookupMessage {
    pub message: String,
    /// The value asked for, as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// At most 100 hashes of the route's algorithm.
    pub hashes: Vec<String>,
}

/// hashlookup's name of an algorithm in messages.
fn algo_label(algo: HashAlgo) -> &'static str {
    match algo {
        HashAlgo::Md5 => "MD5",
        HashAlgo::Sha1 => "SHA-1",
        HashAlgo::Sha256 => "SHA-256",
    }
}

/// A hashlookup-shaped refusal or miss, answered as JSON.
struct Refusal {
    status: StatusCode,
    body: HashlookupMessage,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        no_store((self.status, Json(self.body)).into_response())
    }
}

fn message(status: StatusCode, message: String, query: Option<&str>) -> Refusal {
    Refusal {
        status,
        body: HashlookupMessage {
            message,
            query: query.map(str::to_owned),
        },
    }
}

/// The key is in the URL, so no cache may keep the answer.
fn no_store(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

/// The algorithm named in the path, or hashlookup's 400.
fn path_algo(raw: &str) -> Result<HashAlgo, Refusal> {
    match raw {
        "md5" => Ok(HashAlgo::Md5),
        "sha1" => Ok(HashAlgo::Sha1),
        "sha256" => Ok(HashAlgo::Sha256),
        _ => Err(message(
            StatusCode::BAD_REQUEST,
            "Expecting md5, sha1 or sha256 in the path".into(),
            Some(raw),
        )),
    }
}

/// A hash of the route's algorithm, or hashlookup's 400 naming what was expected.
fn parse_hash(raw: &str, algo: HashAlgo) -> Result<HashValue, Refusal> {
    let label = algo_label(algo);
    let bad = |what: String| message(StatusCode::BAD_REQUEST, what, Some(raw));
    if raw.len() != algo.hex_len() {
        return Err(bad(format!("Expecting a {label} hex value")));
    }
    match HashValue::parse(raw) {
        Ok(hash) if hash.algo() == algo => Ok(hash),
        _ => Err(bad(format!("{label} is not in hex format"))),
    }
}

fn upper(bytes: &[u8]) -> String {
    hex::encode_upper(bytes)
}

/// The hashlookup record of a found hash; `None` for an unknown one.
fn record<'a>(hash: &HashValue, verdict: Verdict<'a>) -> Option<HashlookupRecord<'a>> {
    let classification = verdict.classification().as_str();
    match verdict {
        Verdict::VendorRelease(m) => Some(HashlookupRecord {
            md5: m.digests.md5.as_ref().map(|d| upper(d)),
            sha1: m.digests.sha1.as_ref().map(|d| upper(d)),
            sha256: Some(upper(&m.digests.sha256)),
            file_name: m.executable_name,
            file_size: m.size.map(|n| n.to_string()),
            source: "knowngood",
            trust: VENDOR_TRUST,
            classification,
            vendor: Some(m.vendor),
            version: Some(m.version),
            platform: Some(m.platform.as_str()),
            product: None,
        }),
        // The corpus answers by the digest asked for; it does not link the others.
        Verdict::File(e) => {
            let asked = Some(upper(hash.digest()));
            let (md5, sha1, sha256) = match hash.algo() {
                HashAlgo::Md5 => (asked, None, None),
                HashAlgo::Sha1 => (None, asked, None),
                HashAlgo::Sha256 => (None, None, asked),
            };
            Some(HashlookupRecord {
                md5,
                sha1,
                sha256,
                file_name: e.file_name,
                file_size: None,
                source: e.source,
                trust: CORPUS_TRUST,
                classification,
                vendor: None,
                version: None,
                platform: None,
                product: (!e.product_name.is_empty()).then_some(ProductCode {
                    product_name: e.product_name,
                }),
            })
        }
        Verdict::Unknown => None,
    }
}

/// Look up one hash (hashlookup `GET /lookup/{md5|sha1|sha256}/{hash}`).
#[utoipa::path(get, path = "/hashlookup/k/{key}/lookup/{algorithm}/{hash}", tag = "hashlookup",
    params(("key" = String, Path, description = "An API key holding intel:lookup"),
        ("algorithm" = String, Path, description = "md5, sha1 or sha256"),
        ("hash" = String, Path, description = "Hex digest of that algorithm")),
    responses((status = 200, body = HashlookupRecord),
        (status = 400, body = HashlookupMessage), (status = 404, body = HashlookupMessage),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn lookup(
    State(state): State<AppState>,
    Path((_key, algorithm, hash)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let algo = match path_algo(&algorithm) {
        Ok(algo) => algo,
        Err(refusal) => return Ok(refusal.into_response()),
    };
    let value = match parse_hash(&hash, algo) {
        Ok(value) => value,
        Err(refusal) => return Ok(refusal.into_response()),
    };
    let classified = state.classifier.classify(vec![value], false).await?;
    let results = classified.results();
    let found = results
        .first()
        .and_then(|(hash, verdict)| record(hash, *verdict));
    Ok(match found {
        Some(found) => no_store(Json(found).into_response()),
        None => message(
            StatusCode::NOT_FOUND,
            format!("Non existing {}", algo_label(algo)),
            Some(&hash),
        )
        .into_response(),
    })
}

/// Look up to 100 hashes of one algorithm; answers the found records only (hashlookup
/// `POST /bulk/{md5|sha1}`, here also `sha256`).
#[utoipa::path(post, path = "/hashlookup/k/{key}/bulk/{algorithm}", tag = "hashlookup",
    params(("key" = String, Path, description = "An API key holding intel:lookup"),
        ("algorithm" = String, Path, description = "md5, sha1 or sha256")),
    request_body = BulkRequest,
    responses((status = 200, body = [HashlookupRecord]),
        (status = 400, body = HashlookupMessage),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn bulk(
    State(state): State<AppState>,
    Path((_key, algorithm)): Path<(String, String)>,
    JsonBody(request): JsonBody<BulkRequest>,
) -> ApiResult<Response> {
    let algo = match path_algo(&algorithm) {
        Ok(algo) => algo,
        Err(refusal) => return Ok(refusal.into_response()),
    };
    if request.hashes.len() > MAX_LOOKUP_HASHES {
        return Ok(message(
            StatusCode::BAD_REQUEST,
            format!(
                "hashes holds {} values; at most {MAX_LOOKUP_HASHES} are accepted per request",
                request.hashes.len()
            ),
            None,
        )
        .into_response());
    }
    let mut batch = Vec::with_capacity(request.hashes.len());
    for raw in &request.hashes {
        match parse_hash(raw, algo) {
            Ok(value) => batch.push(value),
            Err(refusal) => return Ok(refusal.into_response()),
        }
    }
    if batch.is_empty() {
        return Ok(no_store(
            Json(Vec::<HashlookupRecord>::new()).into_response(),
        ));
    }
    batch.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
    batch.dedup_by(|a, b| a.as_str() == b.as_str());
    let classified = state.classifier.classify(batch, false).await?;
    let found: Vec<HashlookupRecord<'_>> = classified
        .results()
        .into_iter()
        .filter_map(|(hash, verdict)| record(hash, verdict))
        .collect();
    Ok(no_store(Json(found).into_response()))
}

/// What the database holds (hashlookup `GET /info`).
#[derive(Debug, Serialize, ToSchema)]
pub struct Info {
    #[serde(rename = "hashlookup-version")]
    pub hashlookup_version: &'static str,
    #[serde(rename = "knowngood-version")]
    pub knowngood_version: &'static str,
    /// Distinct hashes of current vendor releases.
    #[serde(rename = "knowngood-vendor-items")]
    pub vendor_items: String,
    /// Vendors with current releases.
    #[serde(rename = "knowngood-vendors")]
    pub vendors: String,
    /// Entries of the reference corpus loaded (0 without one).
    #[serde(rename = "nsrl-NSRL-items")]
    pub corpus_items: String,
    /// The reference corpus generation loaded, when there is one.
    #[serde(rename = "nsrl-version", skip_serializing_if = "Option::is_none")]
    pub corpus_generation: Option<String>,
}

/// What the service holds, in hashlookup's `info` shape (counts as strings, as there).
#[utoipa::path(get, path = "/hashlookup/k/{key}/info", tag = "hashlookup",
    params(("key" = String, Path, description = "An API key holding intel:lookup")),
    responses((status = 200, body = Info), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn info(State(state): State<AppState>, Path(_key): Path<String>) -> ApiResult<Response> {
    let stats = state.stats_cache.get(&state).await?;
    let corpus = state.corpus.as_ref().and_then(|c| c.info());
    let body = Info {
        hashlookup_version: "1.0",
        knowngood_version: env!("CARGO_PKG_VERSION"),
        vendor_items: stats.known_good_hashes.to_string(),
        vendors: stats.total_vendors.to_string(),
        corpus_items: corpus.as_ref().map_or(0, |c| c.entries).to_string(),
        corpus_generation: corpus.map(|c| c.generation),
    };
    Ok(no_store(Json(body).into_response()))
}

/// Top hashes looked up (hashlookup `GET /stats/top`).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TopStats {
    /// Most looked-up hashes that were found. Always empty: lookups are not kept.
    pub exist: Vec<String>,
    /// Most looked-up hashes that were not found. Always empty: lookups are not kept.
    pub nx: Vec<String>,
}

/// Always empty lists: the service keeps no record of the hashes its callers look up.
#[utoipa::path(get, path = "/hashlookup/k/{key}/stats/top", tag = "hashlookup",
    params(("key" = String, Path, description = "An API key holding intel:lookup")),
    responses((status = 200, body = TopStats), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(crate) async fn stats_top(Path(_key): Path<String>) -> Response {
    no_store(
        Json(TopStats {
            exist: Vec::new(),
            nx: Vec::new(),
        })
        .into_response(),
    )
}

/// Any other path under the prefix: a hashlookup client pointed at the prefix without a
/// key (`<prefix>lookup/sha1/<hash>`, as CIRCL's public service takes it) gets 401 saying
/// where the key goes, counted as a refused credential like a request without a key on any
/// other route. A path that has a key but no such route stays a 404.
pub(crate) fn unkeyed(settings: &Settings) -> axum::Router<AppState> {
    let prefix = settings.hashlookup_prefix.clone();
    // The console has a catch-all of its own there.
    if prefix == "/console/" {
        return axum::Router::new();
    }
    let example = format!("{prefix}k/<API key>/lookup/sha1/<hash>");
    axum::Router::new().route(
        &format!("{prefix}{{*rest}}"),
        axum::routing::any(
            move |State(state): State<AppState>,
                  axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<
                std::net::SocketAddr,
            >,
                  Path(rest): Path<String>,
                  headers: axum::http::HeaderMap| {
                let example = example.clone();
                async move {
                    if rest.starts_with("k/") {
                        return crate::error::ApiError(model::Error::NotFound(
                            "no such hashlookup route".into(),
                        ))
                        .into_response();
                    }
                    let ip =
                        crate::guard::client_ip(peer, &headers, &state.settings.trusted_proxies);
                    let refused = model::Error::Unauthorized(format!(
                        "the hashlookup-compatible routes take the API key in the path: {example}"
                    ));
                    let answer = state.auth_failures.refuse(&state, ip, None, refused).await;
                    crate::error::ApiError(answer).into_response()
                }
            },
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubled_slashes_collapse_under_the_prefix_only() {
        let request = |uri: &str| Request::builder().uri(uri).body(axum::body::Body::empty());
        let r = collapse_slashes(
            request("/hashlookup/k/abc//lookup/sha1/AA?x=1").unwrap(),
            "/hashlookup/",
        );
        assert_eq!(r.uri(), "/hashlookup/k/abc/lookup/sha1/AA?x=1");
        let r = collapse_slashes(request("/api/v1//intel").unwrap(), "/hashlookup/");
        assert_eq!(r.uri(), "/api/v1//intel");
    }

    #[test]
    fn declared_routes_move_with_the_prefix() {
        let settings = Settings {
            hashlookup_prefix: "/circl/".into(),
            ..Settings::default()
        };
        assert_eq!(
            mounted("/hashlookup/k/{key}/info", &settings),
            "/circl/k/{key}/info"
        );
        assert_eq!(
            mounted("/api/v1/intel/lookup", &settings),
            "/api/v1/intel/lookup"
        );
    }
}
