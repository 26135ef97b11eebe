//! The coverage queue as the operators see it: every package version an SBOM asked the
//! service to know, what became of it, and why a failed one failed. Staff only: the queue
//! is shared by every account, and which versions were asked for says what some account
//! runs (the queue does not keep who asked).

use axum::Json;
use axum::extract::State;
use model::{Error, Permission, Tier};
use serde::{Deserialize, Serialize};
use store::coverage::{CoverageEntry, CoverageState};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::timestamp;
use crate::error::{ApiResult, ErrorBody};
use crate::extract::{QueryParams, parse_limit, parse_offset};
use crate::routing::{Api, RouteRule};

pub(super) fn routes(api: Api) -> Api {
    api.route(
        routes!(coverage_requests),
        RouteRule::private(Permission::PlatformSettings, Tier::Enterprise),
    )
}

/// One requested package version and its state.
#[derive(Debug, Serialize, ToSchema)]
pub struct CoverageRequestJson {
    /// The channel that records it: `pypi`, `npm`, `debian` or `ubuntu`.
    pub ecosystem: String,
    pub name: String,
    pub version: String,
    /// `queued` (waiting for its channel's next refresh), `done` or `failed`.
    pub state: String,
    /// Why the refresh could not record it (`failed` only), URLs redacted.
    pub error: Option<String>,
    /// When it was last queued.
    pub requested_at: String,
    /// When a refresh closed it.
    pub finished_at: Option<String>,
}

impl From<CoverageEntry> for CoverageRequestJson {
    fn from(e: CoverageEntry) -> Self {
        Self {
            ecosystem: e.item.ecosystem,
            name: e.item.name,
            version: e.item.version,
            state: e.state.as_str().to_string(),
            error: e.error.as_deref().map(model::redact_urls),
            requested_at: timestamp(e.requested_at),
            finished_at: e.finished_at.map(timestamp),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CoverageRequestPage {
    /// Entries matching the filter.
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
    pub requests: Vec<CoverageRequestJson>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CoverageRequestParams {
    /// Only entries in this state: `queued`, `done` or `failed`.
    state: Option<String>,
    /// 1 to 200, default 50.
    limit: Option<String>,
    /// 0 or more, default 0.
    offset: Option<String>,
}

/// The coverage queue in (ecosystem, name, version) order, optionally one state only.
#[utoipa::path(get, path = "/api/v1/admin/coverage/requests", tag = "admin",
    security(("api_key" = [])), params(CoverageRequestParams),
    responses((status = 200, body = CoverageRequestPage), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn coverage_requests(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<CoverageRequestParams>,
) -> ApiResult<Json<CoverageRequestPage>> {
    let filter = params.state.as_deref().map(parse_state).transpose()?;
    let limit = parse_limit(params.limit.as_deref())?;
    let offset = parse_offset(params.offset.as_deref())?;
    let page = state.store.coverage_entries(filter, limit, offset).await?;
    Ok(Json(CoverageRequestPage {
        total: page.total,
        limit,
        offset,
        requests: page.items.into_iter().map(Into::into).collect(),
    }))
}

fn parse_state(raw: &str) -> Result<CoverageState, Error> {
    [
        CoverageState::Queued,
        CoverageState::Done,
        CoverageState::Failed,
    ]
    .into_iter()
    .find(|s| s.as_str() == raw)
    .ok_or_else(|| {
        Error::bad_request(format!(
            "state must be queued, done or failed (got {})",
            model::shown(raw)
        ))
    })
}
