//! The staff view of the service's health: everything the public status page shows, with
//! each vendor's whole last error (URLs redacted) instead of its kind, and the counters of
//! refused credentials.

use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use model::{Permission, Tier};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::Status;
use crate::error::ErrorBody;
use crate::routes::public::{ErrorDetail, system_status};
use crate::routing::{Api, Rule};

pub(super) fn routes(api: Api) -> Api {
    api.route(
        routes!(health),
        Rule::private(Permission::PlatformSettings, Tier::Enterprise),
    )
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StaffHealth {
    /// As on `/public/status`, but `vendors[].last_error` is the whole message.
    #[serde(flatten)]
    pub status: Status,
    pub security: SecurityCounters,
}

/// Since this process started.
#[derive(Debug, Serialize, ToSchema)]
pub struct SecurityCounters {
    /// Requests refused for a missing or invalid credential.
    pub failed_authentications: u64,
    /// Of those, answered 429 because their address or team was over the failure limit.
    pub failed_authentications_limited: u64,
}

/// Service health with full vendor errors (staff).
#[utoipa::path(get, path = "/api/v1/admin/health", tag = "admin", security(("api_key" = [])),
    responses((status = 200, body = StaffHealth), (status = 403, body = ErrorBody)))]
pub async fn health(State(state): State<AppState>) -> Json<StaffHealth> {
    let failures = &state.auth_failures;
    Json(StaffHealth {
        status: system_status(&state, ErrorDetail::Full).await,
        security: SecurityCounters {
            failed_authentications: failures.refused.load(Ordering::Relaxed),
            failed_authentications_limited: failures.limited.load(Ordering::Relaxed),
        },
    })
}
