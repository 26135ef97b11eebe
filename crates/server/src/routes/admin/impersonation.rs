//! Staff impersonation: start a 30-minute session acting as a customer account, and end it.

use auth::Principal;
use auth::staff::ImpersonationTarget;
use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use model::{Error, ImpersonationMode, Permission, Tier};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::timestamp;
use crate::error::{ApiResult, ErrorBody};
use crate::extract::JsonBody;
use crate::routing::{Api, ImpersonationPolicy, RouteRule};

pub(super) fn routes(api: Api) -> Api {
    api.route(
        routes!(impersonate),
        RouteRule::private(Permission::TenantImpersonate, Tier::Enterprise)
            .impersonation(ImpersonationPolicy::Refused),
    )
    .route(
        routes!(end_impersonation),
        RouteRule::any_account().impersonation(ImpersonationPolicy::Always),
    )
}

/// Tenant scope (`team_id`) or user scope (`user_id`, with `account_id` when the user
/// belongs to several accounts); exactly one of `team_id` and `user_id`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImpersonateRequest {
    #[serde(default)]
    pub team_id: Option<String>,
    #[serde(default)]
    pub user_id: Option<String>,
    #[serde(default)]
    pub account_id: Option<String>,
    /// `view` (every write refused) or `manage`.
    pub mode: String,
}

/// An impersonation session: use `token` as a Bearer token until `expires_at`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ImpersonationJson {
    pub token: String,
    pub token_type: &'static str,
    pub expires_at: String,
    pub expires_in: i64,
    pub session_id: String,
    /// The account acted as.
    pub team_id: String,
    /// The customer role assumed.
    pub role: String,
    pub mode: String,
}

/// Act as a customer account (staff JWT, enterprise). The session's token carries `act`
/// (the staff key) and `imp_mode`; it lasts 30 minutes, cannot mint or refresh tokens or
/// impersonate again, and every request made with it is audited.
#[utoipa::path(post, path = "/api/v1/admin/impersonate", tag = "admin", security(("bearer" = [])),
    request_body = ImpersonateRequest,
    responses((status = 201, body = ImpersonationJson), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "own team, staff target, suspended account, a key instead of a staff JWT, or a session impersonating again"),
        (status = 404, body = ErrorBody, description = "unknown account or user")))]
pub async fn impersonate(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    JsonBody(body): JsonBody<ImpersonateRequest>,
) -> ApiResult<(StatusCode, Json<ImpersonationJson>)> {
    let mode: ImpersonationMode = body.mode.parse()?;
    let target = match (body.team_id, body.user_id) {
        (Some(team_id), None) if body.account_id.is_none() => ImpersonationTarget::Tenant(team_id),
        (None, Some(user_id)) => ImpersonationTarget::User {
            user_id,
            account_id: body.account_id,
        },
        (Some(_), None) => {
            return Err(Error::bad_request("account_id goes with user_id, not team_id").into());
        }
        _ => {
            return Err(Error::bad_request(
                "name exactly one of team_id (tenant scope) and user_id (user scope)",
            )
            .into());
        }
    };
    let started = state.admin.impersonate(&actor, &target, mode).await?;
    let session = started.session;
    Ok((
        StatusCode::CREATED,
        Json(ImpersonationJson {
            token: started.token,
            token_type: "Bearer",
            expires_at: timestamp(started.expires_at),
            expires_in: (started.expires_at - session.started_at).num_seconds(),
            session_id: session.session_id,
            team_id: session.team_id,
            role: session.role.as_str().into(),
            mode: session.mode.as_str().into(),
        }),
    ))
}

/// End the calling impersonation session; its token stops working at once (allowed in
/// `view` sessions too).
#[utoipa::path(delete, path = "/api/v1/admin/impersonate", tag = "admin", security(("bearer" = [])),
    responses((status = 204), (status = 404, body = ErrorBody, description = "the credential is not an open impersonation session")))]
pub async fn end_impersonation(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
) -> ApiResult<StatusCode> {
    state.admin.end_impersonation(&actor).await?;
    Ok(StatusCode::NO_CONTENT)
}
