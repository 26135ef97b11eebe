//! Keys: list, issue, update, revoke, reissue.

use auth::Principal;
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::MANAGE_KEYS;
use crate::AppState;
use crate::api::{KeyJson, NewKeyJson};
use crate::error::{ApiResult, ErrorBody};
use crate::extract::{JsonBody, QueryParams};
use crate::routing::Api;

pub(super) fn routes(api: Api) -> Api {
    api.route(routes!(list_keys), MANAGE_KEYS)
        .route(routes!(issue_key), MANAGE_KEYS)
        .route(routes!(update_key), MANAGE_KEYS)
        .route(routes!(revoke_key), MANAGE_KEYS)
        .route(routes!(reissue_key), MANAGE_KEYS)
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyList {
    pub results: Vec<KeyJson>,
    pub total: usize,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Another account's keys (staff with platform:keys only); default your own.
    team_id: Option<String>,
}

/// Keys of your account (or, for staff, of any account).
#[utoipa::path(get, path = "/api/v1/admin/keys", tag = "admin", security(("api_key" = [])),
    params(ListParams),
    responses((status = 200, body = KeyList), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn list_keys(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    QueryParams(params): QueryParams<ListParams>,
) -> ApiResult<Json<KeyList>> {
    let keys = state
        .admin
        .list_keys(&actor, params.team_id.as_deref())
        .await?;
    Ok(Json(KeyList {
        total: keys.len(),
        results: keys.iter().map(KeyJson::from).collect(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IssueKey {
    /// analyst, auditor, account_admin (staff only), or a platform role (owner only).
    // A string, parsed inside the audited action, so that a removed or unknown role is
    // logged as denied rather than refused before the audit.
    #[schema(value_type = String)]
    pub role: String,
    #[serde(default)]
    pub label: Option<String>,
    /// Another account (staff only); default your own.
    #[serde(default)]
    pub team_id: Option<String>,
}

/// Issue a key. The response holds the key once.
#[utoipa::path(post, path = "/api/v1/admin/keys", tag = "admin", security(("api_key" = [])),
    request_body = IssueKey,
    responses((status = 201, body = NewKeyJson), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn issue_key(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    JsonBody(body): JsonBody<IssueKey>,
) -> ApiResult<(StatusCode, Json<NewKeyJson>)> {
    let created = state
        .admin
        .issue_key(
            &actor,
            &body.role,
            body.label.as_deref(),
            body.team_id.as_deref(),
        )
        .await?;
    Ok((StatusCode::CREATED, Json(created.into())))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateKey {
    #[serde(default)]
    pub label: Option<String>,
    /// New primary role.
    // Parsed inside the audited action (see `IssueKey::role`).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub role: Option<String>,
}

/// Change a key's label or primary role.
#[utoipa::path(patch, path = "/api/v1/admin/keys/{key_id}", tag = "admin", security(("api_key" = [])),
    params(("key_id" = String, Path, description = "Public id of the key")),
    request_body = UpdateKey,
    responses((status = 200, body = KeyJson), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn update_key(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(key_id): Path<String>,
    JsonBody(body): JsonBody<UpdateKey>,
) -> ApiResult<Json<KeyJson>> {
    let key = state
        .admin
        .update_key(&actor, &key_id, body.label.as_deref(), body.role.as_deref())
        .await?;
    Ok(Json(KeyJson::from(&key)))
}

/// Revoke a key; it stops working at once, tokens included.
#[utoipa::path(delete, path = "/api/v1/admin/keys/{key_id}", tag = "admin", security(("api_key" = [])),
    params(("key_id" = String, Path, description = "Public id of the key")),
    responses((status = 204), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn revoke_key(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(key_id): Path<String>,
) -> ApiResult<StatusCode> {
    state.admin.revoke_key(&actor, &key_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Revoke a key and issue its replacement (same account, role, label and grants).
#[utoipa::path(post, path = "/api/v1/admin/keys/{key_id}/reissue", tag = "admin", security(("api_key" = [])),
    params(("key_id" = String, Path, description = "Public id of the key")),
    responses((status = 201, body = NewKeyJson), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn reissue_key(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(key_id): Path<String>,
) -> ApiResult<(StatusCode, Json<NewKeyJson>)> {
    let created = state.admin.reissue_key(&actor, &key_id).await?;
    Ok((StatusCode::CREATED, Json(created.into())))
}
