//! The audit log, read-only.

use axum::Json;
use axum::extract::State;
use model::{Error, Permission, Tier};
use serde::{Deserialize, Serialize};
use store::admin::AuditQuery;
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::timestamp;
use crate::error::{ApiResult, ErrorBody};
use crate::extract::parse_limit;
use crate::extract::{QueryParams, instant};
use crate::routing::{Api, RouteRule};

pub(super) fn routes(api: Api) -> Api {
    api.route(
        routes!(audit),
        RouteRule::private(Permission::PlatformSettings, Tier::Enterprise),
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
    pub limit: u32,
    /// Pass as `cursor` for the next (older) page; absent on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// Only actions by callers of this account (or done to it in an impersonation session).
    team_id: Option<String>,
    /// Only actions by this key id.
    actor: Option<String>,
    /// Only actions starting with this text, e.g. `key.` or `impersonate.`.
    action: Option<String>,
    /// Only actions on this target.
    target: Option<String>,
    /// From this instant (RFC 3339) or day (YYYY-MM-DD), inclusive.
    since: Option<String>,
    /// Up to this instant or day (the whole day), inclusive.
    until: Option<String>,
    /// Default 50, at most 200.
    limit: Option<String>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// The audit log, newest first, filtered and paged by cursor (read-only: nothing in the
/// API edits it).
#[utoipa::path(get, path = "/api/v1/admin/audit", tag = "admin", security(("api_key" = [])),
    params(AuditParams),
    responses((status = 200, body = AuditPage), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn audit(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<AuditParams>,
) -> ApiResult<Json<AuditPage>> {
    let limit = parse_limit(params.limit.as_deref())?;
    let before_id = params
        .cursor
        .as_deref()
        .map(|c| {
            c.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| {
                Error::bad_request(format!(
                    "cursor {} is not one this route gave",
                    model::shown(c)
                ))
            })
        })
        .transpose()?;
    let text = |v: Option<String>| v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    let query = AuditQuery {
        team_id: text(params.team_id),
        actor: text(params.actor),
        action: text(params.action),
        target: text(params.target),
        since: instant(params.since.as_deref(), "since", false)?,
        until: instant(params.until.as_deref(), "until", true)?,
        before_id,
        limit,
    };
    let rows = state.admin.audit_log(&query).await?;
    let next_cursor = (rows.len() == limit as usize)
        .then(|| rows.last().map(|r| r.id.to_string()))
        .flatten();
    Ok(Json(AuditPage {
        results: rows
            .into_iter()
            .map(|r| {
                let e = r.entry;
                AuditJson {
                    at: timestamp(e.at),
                    actor: e.actor,
                    team_id: e.team_id,
                    action: e.action,
                    target: e.target,
                    outcome: e.outcome,
                    detail: e.detail,
                }
            })
            .collect(),
        limit,
        next_cursor,
    }))
}
