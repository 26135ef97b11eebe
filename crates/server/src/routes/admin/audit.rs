//! The audit log, read-only.

use axum::Json;
use axum::extract::State;
use model::{Permission, Tier};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::timestamp;
use crate::error::{ApiResult, ErrorBody};
use crate::extract::QueryParams;
use crate::routes::intel::{parse_limit, parse_offset};
use crate::routing::{Api, Rule};

pub(super) fn routes(api: Api) -> Api {
    api.route(
        routes!(audit),
        Rule::private(Permission::PlatformSettings, Tier::Enterprise),
    )
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditJson {
    pub at: String,
    pub actor: String,
    pub team_id: String,
    pub action: String,
    pub target: String,
    pub outcome: String,
    pub detail: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditPage {
    pub results: Vec<AuditJson>,
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// Only actions by callers of this account.
    team_id: Option<String>,
    limit: Option<String>,
    offset: Option<String>,
}

/// The audit log, newest first (read-only: nothing in the API edits it).
#[utoipa::path(get, path = "/api/v1/admin/audit", tag = "admin", security(("api_key" = [])),
    params(AuditParams),
    responses((status = 200, body = AuditPage), (status = 403, body = ErrorBody)))]
pub async fn audit(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<AuditParams>,
) -> ApiResult<Json<AuditPage>> {
    let limit = parse_limit(params.limit.as_deref())?;
    let offset = parse_offset(params.offset.as_deref())?;
    let page = state
        .admin
        .audit_log(params.team_id.as_deref(), limit, offset)
        .await?;
    Ok(Json(AuditPage {
        results: page
            .items
            .into_iter()
            .map(|e| AuditJson {
                at: timestamp(e.at),
                actor: e.actor,
                team_id: e.team_id,
                action: e.action,
                target: e.target,
                outcome: e.outcome,
                detail: e.detail,
            })
            .collect(),
        total: page.total,
        limit,
        offset,
    }))
}
