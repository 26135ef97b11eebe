//! The caller's own usage report.

use std::collections::BTreeMap;

use auth::Principal;
use axum::Json;
use axum::extract::{Extension, State};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::error::{ApiResult, ErrorBody};
use crate::routing::{Api, RouteRule};

pub(super) fn routes(api: Api) -> Api {
    api.route(routes!(usage), RouteRule::any_account())
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DailyCount {
    pub date: String,
    pub count: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UsageReport {
    /// YYYY-MM (UTC).
    pub month: String,
    /// Authenticated requests of the account this month.
    pub total: u64,
    /// Monthly quota of the tier; null = unlimited.
    pub quota: Option<u64>,
    pub tier: String,
    /// `<METHOD> <route>` -> requests this month.
    pub by_endpoint: BTreeMap<String, u64>,
    /// The last 30 days, oldest first, today included.
    pub daily: Vec<DailyCount>,
}

/// Your account's usage: this month's total and per route, the last 30 days, the quota.
#[utoipa::path(get, path = "/api/v1/admin/usage", tag = "admin", security(("api_key" = [])),
    responses((status = 200, body = UsageReport), (status = 401, body = ErrorBody)))]
pub async fn usage(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
) -> ApiResult<Json<UsageReport>> {
    let report = state.admin.usage(&actor).await?;
    Ok(Json(UsageReport {
        month: report.month.format("%Y-%m").to_string(),
        total: report.total,
        quota: report.quota,
        tier: report.tier.as_str().into(),
        by_endpoint: report.by_endpoint,
        daily: report
            .daily
            .into_iter()
            .map(|(date, count)| DailyCount {
                date: date.to_string(),
                count,
            })
            .collect(),
    }))
}
