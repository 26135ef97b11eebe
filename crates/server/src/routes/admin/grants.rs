//! Role grants: grant an additional role, revoke one.

use auth::Principal;
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::MANAGE_KEYS;
use crate::AppState;
use crate::api::KeyJson;
use crate::error::{ApiResult, ErrorBody};
use crate::extract::JsonBody;
use crate::routing::Api;

pub(super) fn routes(api: Api) -> Api {
    api.route(routes!(grant_role), MANAGE_KEYS)
        .route(routes!(revoke_role), MANAGE_KEYS)
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantRole {
    // Parsed inside the audited action (see `IssueKey::role`).
    #[schema(value_type = String)]
    pub role: String,
    /// RFC 3339; at most 30 days ahead. Absent = permanent.
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
}

/// Grant an additional role, permanent or until `expires_at`.
#[utoipa::path(post, path = "/api/v1/admin/keys/{key_id}/roles", tag = "admin", security(("api_key" = [])),
    params(("key_id" = String, Path, description = "Public id of the key")),
    request_body = GrantRole,
    responses((status = 200, body = KeyJson), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn grant_role(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path(key_id): Path<String>,
    JsonBody(body): JsonBody<GrantRole>,
) -> ApiResult<Json<KeyJson>> {
    let key = state
        .admin
        .grant_role(&actor, &key_id, &body.role, body.expires_at)
        .await?;
    Ok(Json(KeyJson::from(&key)))
}

/// Revoke an additional role.
#[utoipa::path(delete, path = "/api/v1/admin/keys/{key_id}/roles/{role}", tag = "admin", security(("api_key" = [])),
    params(("key_id" = String, Path, description = "Public id of the key"), ("role" = String, Path, description = "The granted role to revoke")),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn revoke_role(
    State(state): State<AppState>,
    Extension(actor): Extension<Principal>,
    Path((key_id, role)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    state.admin.revoke_role(&actor, &key_id, &role).await?;
    Ok(StatusCode::NO_CONTENT)
}
