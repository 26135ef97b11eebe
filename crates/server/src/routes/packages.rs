//! The package intelligence routes: typosquat and dependency-confusion analysis, SBOM scans,
//! package watchlists and the change-alert feed. Each parses the request, calls
//! [`crate::services::packages`] and answers.

use auth::Principal;
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use model::{Error, Permission, Tier};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::timestamp;
use crate::error::{ApiResult, ErrorBody};
use crate::extract::{JsonBody, QueryParams, RawBody};
use crate::extract::{parse_limit, parse_offset};
use crate::routing::{Api, RouteRule};
use crate::services::packages::{
    self as service, MAX_SBOM_BYTES, MAX_SBOM_SCANS_PER_KEY, SbomReport, SbomScanSlot,
    TyposquatRequest, TyposquatResponse, WatchJson, WatchList, WatchRequest, ecosystem_at,
};

/// The `Retry-After` of the `429` past [`MAX_SBOM_SCANS_PER_KEY`]: a 16 MB scan takes about
/// a second.
const SBOM_RETRY_AFTER_SECS: u32 = 1;

/// The package routes and who may call them.
pub(crate) fn routes(api: Api) -> Api {
    let rule = RouteRule::private(Permission::IntelPackages, Tier::Teams);
    api.route(routes!(typosquat), rule)
        .route(routes!(sbom), rule.max_body(MAX_SBOM_BYTES))
        .route(routes!(list_watches), rule)
        .route(routes!(add_watch), rule)
        .route(routes!(remove_watch), rule)
        .route(routes!(changes), rule)
}

/// Typosquat and dependency-confusion analysis of package names (nothing is fetched).
#[utoipa::path(post, path = "/api/v1/intel/typosquat", tag = "packages",
    security(("api_key" = [])), request_body = TyposquatRequest,
    responses((status = 200, body = TyposquatResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn typosquat(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<TyposquatRequest>,
) -> ApiResult<Json<TyposquatResponse>> {
    Ok(Json(service::typosquat(&state, &request).await?))
}

/// One of the caller's SBOM scan slots, taken before the body is read; a caller already
/// running its [`MAX_SBOM_SCANS_PER_KEY`] scans is answered `429` with `Retry-After`.
pub struct ScanSlot(SbomScanSlot);

impl axum::extract::FromRequestParts<AppState> for ScanSlot {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Self, Response> {
        let Some(caller) = parts.extensions.get::<Principal>() else {
            return Err(crate::error::ApiError(Error::internal(
                "an SBOM scan without an authenticated caller",
            ))
            .into_response());
        };
        match SbomScanSlot::take(state, &caller.key_id) {
            Some(slot) => Ok(Self(slot)),
            None => {
                let mut refused = (
                    StatusCode::TOO_MANY_REQUESTS,
                    Json(ErrorBody {
                        error: "rate limit exceeded",
                        message: Some(format!(
                            "at most {MAX_SBOM_SCANS_PER_KEY} SBOM scans per key run at once; retry when one has finished"
                        )),
                    }),
                )
                    .into_response();
                refused.headers_mut().insert(
                    header::RETRY_AFTER,
                    header::HeaderValue::from(SBOM_RETRY_AFTER_SECS),
                );
                Err(refused)
            }
        }
    }
}

/// Scan a software bill of materials: each component's hash, name risk and advisories.
#[utoipa::path(post, path = "/api/v1/intel/sbom", tag = "packages",
    security(("api_key" = [])),
    request_body(content = String, description = "CycloneDX (JSON or XML) or SPDX (JSON, tag-value, 3.0 JSON-LD), at most 16 MB", content_type = "application/json"),
    responses((status = 200, body = SbomReport), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn sbom(
    State(state): State<AppState>,
    ScanSlot(slot): ScanSlot,
    RawBody(body): RawBody,
) -> ApiResult<Response> {
    let report = service::sbom(&state, slot, body).await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], report).into_response())
}

/// The account's package watchlist.
#[utoipa::path(get, path = "/api/v1/intel/packages/watch", tag = "packages",
    security(("api_key" = [])),
    responses((status = 200, body = WatchList), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(crate) async fn list_watches(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
) -> ApiResult<Json<WatchList>> {
    Ok(Json(service::watches(&state, &caller.team_id).await?))
}

/// Watch a package; an untracked one is tracked from the next refresh. Watching a package
/// already on the list returns that watch (200).
#[utoipa::path(post, path = "/api/v1/intel/packages/watch", tag = "packages",
    security(("api_key" = [])), request_body = WatchRequest,
    responses((status = 201, body = WatchJson), (status = 200, description = "Already watched", body = WatchJson),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn add_watch(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    JsonBody(request): JsonBody<WatchRequest>,
) -> ApiResult<(StatusCode, Json<WatchJson>)> {
    let (watch, created) = service::add_watch(&state, &caller.team_id, &request).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(watch)))
}

/// Stop watching a package.
#[utoipa::path(delete, path = "/api/v1/intel/packages/watch/{id}", tag = "packages",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "Id of the watch")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn remove_watch(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    service::remove_watch(&state, &caller.team_id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ChangeParams {
    /// true: only packages on the caller's watchlist.
    watched: Option<String>,
    /// npm, pypi or go.
    ecosystem: Option<String>,
    /// 1 to 200, default 50.
    limit: Option<String>,
    /// 0 or more, default 0.
    offset: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChangeAlertJson {
    pub id: String,
    pub ecosystem: String,
    pub package_name: String,
    pub version: String,
    pub previous_sha256: String,
    pub latest_sha256: String,
    pub observed_at: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChangeFeed {
    pub results: Vec<ChangeAlertJson>,
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
}

/// Change alerts: published package versions whose artifact hash changed, newest first.
#[utoipa::path(get, path = "/api/v1/intel/packages/changes", tag = "packages",
    security(("api_key" = [])), params(ChangeParams),
    responses((status = 200, body = ChangeFeed), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn changes(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    QueryParams(params): QueryParams<ChangeParams>,
) -> ApiResult<Json<ChangeFeed>> {
    let watched_only = match params.watched.as_deref().map(str::trim) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(Error::bad_request(format!(
                "watched must be true or false (got {other:?})"
            ))
            .into());
        }
    };
    let ecosystem = params
        .ecosystem
        .as_deref()
        .map(|e| ecosystem_at(e, "ecosystem"))
        .transpose()?;
    let query = store::packages::ChangeQuery {
        team_id: caller.team_id.clone(),
        watched_only,
        ecosystem: ecosystem.map(|e| e.as_str().to_string()),
        limit: parse_limit(params.limit.as_deref())?,
        offset: parse_offset(params.offset.as_deref())?,
    };
    let page = state.store.change_alerts(&query).await?;
    Ok(Json(ChangeFeed {
        results: page
            .items
            .into_iter()
            .map(|a| ChangeAlertJson {
                id: a.id,
                ecosystem: a.ecosystem,
                package_name: a.package_name,
                version: a.version,
                previous_sha256: a.previous_sha256,
                latest_sha256: a.latest_sha256,
                observed_at: timestamp(a.observed_at),
            })
            .collect(),
        total: page.total,
        limit: query.limit,
        offset: query.offset,
    }))
}
