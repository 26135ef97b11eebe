//! The intel routes: statistics, lookup, history and export.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use model::{Arch, Error, HashValue, Permission, Platform, Tier};
use serde::Deserialize;
use store::HistoryQuery;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::{
    ExportRow, HistoryEntry, HistoryPage, LookupRequest, LookupResponse, LookupResult,
    MAX_LOOKUP_HASHES, Stats, StatsTotals, timestamp,
};
use crate::error::{ApiResult, ErrorBody};
use crate::extract::{QueryParams, RawBody, parse_limit, parse_offset};
use crate::routing::{Api, RouteRule};
use crate::services::export::{self as service, ExportParams, parse_opt};
use crate::services::warninglist::{self, MispWarninglist};

/// The intel routes and who may call them.
pub(crate) fn routes(api: Api) -> Api {
    use Permission as P;
    api.route(
        routes!(stats),
        RouteRule::private(P::IntelStats, Tier::Basic),
    )
    .route(
        routes!(lookup),
        RouteRule::private(P::IntelLookup, Tier::Basic),
    )
    .route(
        routes!(lookup_historical),
        RouteRule::private(P::IntelHistory, Tier::Basic),
    )
    .route(
        routes!(history),
        RouteRule::private(P::IntelHistory, Tier::Basic),
    )
    .route(
        routes!(export),
        RouteRule::private(P::IntelHistory, Tier::Basic),
    )
    .route(
        routes!(misp_warninglist),
        RouteRule::private(P::IntelHistory, Tier::Basic),
    )
    .route(
        routes!(downloads),
        RouteRule::private(P::IntelDownloads, Tier::Teams),
    )
}

/// Platform statistics.
#[utoipa::path(get, path = "/api/v1/intel/stats", tag = "intel",
    security(("api_key" = [])),
    responses((status = 200, body = Stats), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn stats(State(state): State<AppState>) -> ApiResult<Json<Stats>> {
    let s = state.stats_cache.get(&state).await?;
    Ok(Json(Stats {
        generated_at: timestamp(state.clock.now()),
        totals: StatsTotals {
            known_good_hashes: s.known_good_hashes,
            total_vendors: s.total_vendors,
            total_platforms: s.total_platforms,
        },
        reference_corpus_hashes: state
            .corpus
            .as_ref()
            .and_then(|c| c.current())
            .map_or(0, |g| g.len()),
    }))
}

/// Statistics are aggregate queries over every record; they are reused until a record
/// changes or a minute passes, so polling dashboards cost no database work.
#[derive(Default)]
pub struct StatsCache(
    std::sync::Mutex<Option<(u64, chrono::DateTime<chrono::Utc>, store::RecordStats)>>,
);

impl StatsCache {
    const TTL_SECS: i64 = 60;

    pub(crate) async fn get(&self, state: &AppState) -> Result<store::RecordStats, Error> {
        let epoch = state.store.records_epoch();
        let now = state.clock.now();
        {
            let cached = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((e, at, stats)) = *cached
                && e == epoch
                && (now - at).num_seconds() < Self::TTL_SECS
            {
                return Ok(stats);
            }
        }
        let stats = state.store.stats().await?;
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((epoch, now, stats));
        Ok(stats)
    }
}

/// Classify hashes against current vendor releases.
#[utoipa::path(post, path = "/api/v1/intel/lookup", tag = "intel",
    security(("api_key" = [])), request_body = LookupRequest,
    responses((status = 200, body = LookupResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn lookup(State(state): State<AppState>, RawBody(body): RawBody) -> ApiResult<Response> {
    classify(&state, parse_lookup_body(&body)?, false).await
}

/// Classify hashes against every vendor release ever recorded, superseded builds included.
#[utoipa::path(post, path = "/api/v1/intel/lookup/historical", tag = "intel",
    security(("api_key" = [])), request_body = LookupRequest,
    responses((status = 200, body = LookupResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub(crate) async fn lookup_historical(
    State(state): State<AppState>,
    RawBody(body): RawBody,
) -> ApiResult<Response> {
    classify(&state, parse_lookup_body(&body)?, true).await
}

/// The answer as JSON, written into a buffer sized for it up front. (`Json` starts from 128
/// bytes and grows in small appends, which cost a tenth of a 100-hash lookup.)
fn lookup_json(answer: &LookupResponse) -> Response {
    let mut body = Vec::with_capacity(64 + answer.results.len() * 256);
    match serde_json::to_writer(&mut body, answer) {
        Ok(()) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => crate::error::ApiError::from(Error::internal(format!(
            "could not serialise a lookup answer: {e}"
        )))
        .into_response(),
    }
}

/// A lookup request body as the lookup routes read it: the JSON checks every route applies,
/// then the batch rules (1 to 100 hashes, each MD5, SHA-1 or SHA-256 hex), normalised,
/// sorted and de-duplicated.
pub fn parse_lookup_body(body: &[u8]) -> Result<Vec<HashValue>, Error> {
    parse_batch(crate::extract::decode_json::<LookupRequest>(body)?)
}

/// Normalises and de-duplicates the batch, sorted (the order of the answer's keys); every
/// distinct hash gets a result.
fn parse_batch(request: LookupRequest) -> Result<Vec<HashValue>, Error> {
    if request.hashes.is_empty() {
        return Err(Error::bad_request("hashes must not be empty"));
    }
    if request.hashes.len() > MAX_LOOKUP_HASHES {
        return Err(Error::bad_request(format!(
            "hashes holds {} values; at most {MAX_LOOKUP_HASHES} are accepted per request",
            request.hashes.len()
        )));
    }
    let mut batch = request
        .hashes
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            HashValue::parse(&raw.0).map_err(|e| match e {
                Error::BadRequest(m) => Error::BadRequest(format!("hashes[{i}]: {m}")),
                other => other,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    batch.sort_unstable();
    batch.dedup();
    Ok(batch)
}

/// Classifies the batch and answers. The answer borrows its text from the classifier's
/// sources, so it is serialised here, while those are held.
async fn classify(
    state: &AppState,
    batch: Vec<HashValue>,
    historical: bool,
) -> ApiResult<Response> {
    let classified = state.classifier.classify(batch, historical).await?;
    // `batch` is sorted and distinct, so the map is built in one pass.
    let results = classified
        .results()
        .into_iter()
        .map(|(hash, verdict)| {
            state.metrics.lookup(verdict.classification());
            (hash.as_str(), LookupResult::of(verdict, historical))
        })
        .collect();
    Ok(lookup_json(&LookupResponse { results }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryParams {
    /// Any version's filename, or the bare name of an unversioned file.
    executable: String,
    /// windows, linux, darwin, android or universal.
    platform: Option<String>,
    /// amd64, arm64, arm, x86 or universal.
    arch: Option<String>,
    /// 1 to 200, default 50.
    limit: Option<String>,
    /// 0 or more, default 0.
    offset: Option<String>,
}

fn required_executable(raw: String) -> Result<String, Error> {
    crate::extract::name_filter(Some(&raw), "executable")?
        .ok_or_else(|| Error::bad_request("executable is required"))
}

/// Every version ever recorded of an executable, newest first.
#[utoipa::path(get, path = "/api/v1/intel/history", tag = "intel",
    security(("api_key" = [])), params(HistoryParams),
    responses((status = 200, body = HistoryPage), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn history(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<HistoryParams>,
) -> ApiResult<Json<HistoryPage>> {
    let query = HistoryQuery {
        platform: parse_opt::<Platform>(params.platform.as_deref(), "platform")?,
        arch: parse_opt::<Arch>(params.arch.as_deref(), "arch")?,
        limit: parse_limit(params.limit.as_deref())?,
        offset: parse_offset(params.offset.as_deref())?,
        executable: required_executable(params.executable)?,
    };
    let page = state.store.history(&query).await?;
    Ok(Json(HistoryPage {
        results: page.items.iter().map(HistoryEntry::from).collect(),
        total: page.total,
        limit: query.limit,
        offset: query.offset,
    }))
}

/// Bulk export of records whose validity began within the days given, streamed.
#[utoipa::path(get, path = "/api/v1/intel/export", tag = "intel",
    security(("api_key" = [])), params(ExportParams),
    responses(
        (status = 200, description = "CSV (text/csv) or a JSON array of export rows", body = [ExportRow]),
        (status = 400, description = "Bad parameters, or more than 366 days or 100,000 rows", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn export(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<ExportParams>,
) -> ApiResult<Response> {
    let export = service::export(&state, params).await?;
    Ok((
        [
            (header::CONTENT_TYPE, export.content_type.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{}\"", export.filename),
            ),
        ],
        export.body,
    )
        .into_response())
}

/// Every hash (SHA-256, SHA-1, MD5) of every current, verified vendor release as a MISP
/// warninglist, so MISP flags attributes that name known-good vendor files.
#[utoipa::path(get, path = "/api/v1/intel/export/misp-warninglist", tag = "intel",
    security(("api_key" = [])),
    responses((status = 200, body = MispWarninglist), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody)))]
pub(crate) async fn misp_warninglist(State(state): State<AppState>) -> ApiResult<Response> {
    let body = warninglist::misp_warninglist(&state).await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DownloadParams {
    /// Vendor name, case-insensitive.
    vendor: Option<String>,
    /// RFC 3339 timestamp or YYYY-MM-DD (start of that UTC day), inclusive.
    from: Option<String>,
    /// RFC 3339 timestamp or YYYY-MM-DD (end of that UTC day), inclusive.
    until: Option<String>,
    limit: Option<String>,
    offset: Option<String>,
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct DownloadJson {
    pub downloaded_at: String,
    /// Equals downloaded_at: the content was hashed in a stream and never stored.
    pub deleted_at: String,
    /// Always `stream`.
    pub storage_method: &'static str,
    pub url: String,
    pub size_bytes: u64,
    pub hash_record_id: String,
    pub vendor: String,
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct DownloadPage {
    pub results: Vec<DownloadJson>,
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
}

/// Audit of every artifact the service downloaded to hash, newest first.
#[utoipa::path(get, path = "/api/v1/intel/downloads", tag = "intel",
    security(("api_key" = [])), params(DownloadParams),
    responses((status = 200, body = DownloadPage), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn downloads(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<DownloadParams>,
) -> ApiResult<Json<DownloadPage>> {
    let query = store::downloads::DownloadQuery {
        vendor: crate::extract::name_filter(params.vendor.as_deref(), "vendor")?,
        from: crate::extract::instant(params.from.as_deref(), "from", false)?,
        until: crate::extract::instant(params.until.as_deref(), "until", true)?,
        limit: parse_limit(params.limit.as_deref())?,
        offset: parse_offset(params.offset.as_deref())?,
    };
    if let (Some(from), Some(until)) = (query.from, query.until)
        && from > until
    {
        return Err(Error::bad_request("from must not be after until").into());
    }
    let page = state.store.downloads(&query).await?;
    Ok(Json(DownloadPage {
        results: page
            .items
            .iter()
            .map(|d| DownloadJson {
                downloaded_at: timestamp(d.downloaded_at),
                deleted_at: timestamp(d.downloaded_at),
                storage_method: "stream",
                url: d.url.clone(),
                size_bytes: d.size_bytes,
                hash_record_id: d.hash_record_id.clone(),
                vendor: d.vendor.clone(),
            })
            .collect(),
        total: page.total,
        limit: query.limit,
        offset: query.offset,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_read_through_escapes_then_sorted_and_distinct() {
        let md5 = "d41d8cd98f00b204e9800998ecf8427e";
        let sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        // `\u0064` is `d`: an escaped value is the same value; upper case is too.
        let body = format!(
            r#"{{"hashes": ["{sha256}", "\u0064{}", "{}"]}}"#,
            &md5[1..],
            md5.to_uppercase()
        );
        let batch = parse_lookup_body(body.as_bytes()).unwrap();
        let texts: Vec<&str> = batch.iter().map(HashValue::as_str).collect();
        assert_eq!(texts, [md5, sha256]);
        let refused = parse_lookup_body(format!(r#"{{"hashes": ["{md5}", "abc"]}}"#).as_bytes());
        assert!(refused.unwrap_err().to_string().contains("hashes[1]"));
    }
}
