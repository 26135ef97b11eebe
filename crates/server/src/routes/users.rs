//! Console users: invites by account admins, redeeming an invite, switching account and
//! signing a session out.

use auth::Principal;
use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use model::{Error, Permission, Tier};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::SessionToken;
use crate::api::timestamp;
use crate::error::{ApiResult, ErrorBody};
use crate::extract::JsonBody;
use crate::routing::{Api, ImpersonationPolicy, RouteRule};

pub(crate) fn routes(api: Api) -> Api {
    let session = RouteRule::any_account().impersonation(ImpersonationPolicy::Refused);
    api.route(
        routes!(create_invite),
        RouteRule::private(Permission::TenantManage, Tier::Teams)
            .impersonation(ImpersonationPolicy::Refused),
    )
    .route(routes!(redeem_invite), RouteRule::public())
    .route(routes!(switch_account), session.without_second_factor())
    .route(routes!(sign_out), session.without_second_factor())
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InviteBody {
    /// `analyst` or `auditor` for an account admin (`account_admin` needs staff).
    pub role: String,
    /// The person's name, shown in the console.
    pub display_name: String,
    /// How to reach them (e-mail address or similar); the code is handed over out of band.
    pub contact: String,
}

/// A new invite; `code` is shown this once.
#[derive(Debug, Serialize, ToSchema)]
pub struct InviteJson {
    pub invite_id: String,
    /// The one-time code the invited person redeems at `POST /api/v1/auth/invite`.
    pub code: String,
    pub team_id: String,
    /// The account's uuid; `account_id` accepts it as well as the team id.
    pub account_uuid: String,
    pub role: String,
    pub expires_at: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeemBody {
    pub code: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SwitchBody {
    /// The team id of another account the user belongs to.
    pub account_id: String,
}

/// Invite a user into your account with a role you may give (the code is shown once and
/// expires after 7 days).
#[utoipa::path(post, path = "/api/v1/admin/invites", tag = "users",
    security(("api_key" = []), ("bearer" = [])), request_body = InviteBody,
    responses((status = 201, body = InviteJson), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody)))]
pub async fn create_invite(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    JsonBody(body): JsonBody<InviteBody>,
) -> ApiResult<(StatusCode, Json<InviteJson>)> {
    let invite = state
        .admin
        .invite(&actor, &body.role, &body.display_name, &body.contact)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(InviteJson {
            invite_id: invite.invite_id,
            code: invite.code,
            account_uuid: auth::account_uuid(&invite.team_id).to_string(),
            team_id: invite.team_id,
            role: invite.role.as_str().into(),
            expires_at: timestamp(invite.expires_at),
        }),
    ))
}

/// Redeem an invite code: the new user's session token. The session has no second factor
/// yet: until one is enrolled, intel and admin routes answer 403 `MFA_REQUIRED`.
#[utoipa::path(post, path = "/api/v1/auth/invite", tag = "users", request_body = RedeemBody,
    responses((status = 200, body = SessionToken),
        (status = 401, description = "Unknown, expired or used code", body = ErrorBody)))]
pub async fn redeem_invite(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<RedeemBody>,
) -> ApiResult<Json<SessionToken>> {
    let (token, expires_at) = state.admin.redeem_invite(&body.code).await?;
    Ok(Json(SessionToken {
        token,
        expires_at: timestamp(expires_at),
    }))
}

/// Move the signed-in user to another of their accounts: a session there (same second
/// factor state); the current session is signed out.
#[utoipa::path(post, path = "/api/v1/auth/switch", tag = "users",
    security(("bearer" = [])), request_body = SwitchBody,
    responses((status = 200, body = SessionToken),
        (status = 400, description = "Not a user session", body = ErrorBody),
        (status = 403, description = "Not a member of that account", body = ErrorBody)))]
pub async fn switch_account(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    JsonBody(body): JsonBody<SwitchBody>,
) -> ApiResult<Json<SessionToken>> {
    let (token, expires_at) = state
        .admin
        .switch_account(&actor, body.account_id.trim())
        .await?;
    Ok(Json(SessionToken {
        token,
        expires_at: timestamp(expires_at),
    }))
}

/// Sign a console or user session out: its token stops working at once.
#[utoipa::path(post, path = "/api/v1/auth/sign-out", tag = "users",
    security(("bearer" = [])),
    responses((status = 204), (status = 400, description = "Not a session token", body = ErrorBody)))]
pub async fn sign_out(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
) -> ApiResult<StatusCode> {
    let session = actor.session.as_ref().ok_or_else(|| {
        Error::bad_request("not a session token: keys are revoked, not signed out")
    })?;
    state.credentials.sign_out(&session.session_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
