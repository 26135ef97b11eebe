//! Accounts: suspension by staff.

use auth::Principal;
use axum::Json;
use axum::extract::{Extension, Path, State};
use model::{Permission, Tier};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::error::{ApiResult, ErrorBody};
use crate::routing::{Api, RouteRule};

pub(super) fn routes(api: Api) -> Api {
    let staff = RouteRule::private(Permission::PlatformKeys, Tier::Enterprise);
    api.route(routes!(suspend), staff)
        .route(routes!(unsuspend), staff)
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AccountState {
    pub team_id: String,
    pub suspended: bool,
}

async fn set_suspended(
    state: AppState,
    actor: Principal,
    team_id: String,
    suspended: bool,
) -> ApiResult<Json<AccountState>> {
    state
        .admin
        .set_suspended(&actor, &team_id, suspended)
        .await?;
    Ok(Json(AccountState { team_id, suspended }))
}

/// Suspend an account: its keys and tokens stop working at once (staff).
#[utoipa::path(post, path = "/api/v1/admin/accounts/{team_id}/suspend", tag = "admin", security(("api_key" = [])),
    params(("team_id" = String, Path, description = "Team id of the account")),
    responses((status = 200, body = AccountState), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn suspend(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(team_id): Path<String>,
) -> ApiResult<Json<AccountState>> {
    set_suspended(state, actor, team_id, true).await
}

/// Lift a suspension (staff).
#[utoipa::path(post, path = "/api/v1/admin/accounts/{team_id}/unsuspend", tag = "admin", security(("api_key" = [])),
    params(("team_id" = String, Path, description = "Team id of the account")),
    responses((status = 200, body = AccountState), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn unsuspend(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(team_id): Path<String>,
) -> ApiResult<Json<AccountState>> {
    set_suspended(state, actor, team_id, false).await
}
