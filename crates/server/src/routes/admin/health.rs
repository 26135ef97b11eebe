//! The staff view of the service's health: everything the public status page shows, with
//! each vendor's whole last error (URLs redacted) instead of its kind, the counters of
//! refused credentials and of the lookup index's rolling HMAC re-verification, and how far
//! the rewrite of records stored in an older form has gone.

use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use model::{Permission, Tier};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::Status;
use crate::api::timestamp;
use crate::error::{ApiResult, ErrorBody};
use crate::routing::{Api, RouteRule};
use crate::status::{ErrorDetail, system_status};

pub(super) fn routes(api: Api) -> Api {
    api.route(
        routes!(health),
        RouteRule::private(Permission::PlatformSettings, Tier::Enterprise),
    )
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StaffHealth {
    /// As on `/public/status`, but `vendors[].last_error` is the whole message.
    #[serde(flatten)]
    pub status: Status,
    pub security: SecurityCounters,
    pub lookup_index: LookupIndexCounters,
    pub record_compaction: RecordCompactionJson,
    /// The latest scheduled-job leases, newest first (at most 20).
    pub jobs: Vec<JobLeaseJson>,
}

/// A scheduled job's lease: which replica ran or runs it, until when.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobLeaseJson {
    /// The lease's name (the job, with the day or vendor it covers).
    pub lease: String,
    /// The replica run that holds or held it.
    pub holder: String,
    pub expires_at: String,
    /// When the run ended; absent while it runs (or if it never ended).
    pub finished_at: Option<String>,
    /// Unexpired and not finished.
    pub running: bool,
}

/// Since this process started.
#[derive(Debug, Serialize, ToSchema)]
pub struct SecurityCounters {
    /// Requests refused for a missing or invalid credential.
    pub failed_authentications: u64,
    /// Of those, answered 429 because their address or team was over the failure limit.
    pub failed_authentications_limited: u64,
}

/// Since this process started, as on `/metrics`.
#[derive(Debug, Serialize, ToSchema)]
pub struct LookupIndexCounters {
    /// Vendor records whose stored HMAC the rolling re-verification read again.
    pub reverified: u64,
    /// Of those, records that failed their HMAC (left out of lookups; investigate).
    pub reverify_failures: u64,
    /// Vendor lookup generations this process wrote.
    pub merges: u64,
}

/// The rewrite of vendor records stored in an older form (whole source URLs and names,
/// written before this version's storage), run in the background by the `records.compact`
/// job; as on `/metrics`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecordCompactionJson {
    /// Every record has been looked at: nothing is left to rewrite.
    pub done: bool,
    /// The share of the records walked so far, 0 to 1.
    pub walked: f64,
    /// Records rewritten so far, by every replica.
    pub rewritten: u64,
}

/// Service health with full vendor errors (staff).
#[utoipa::path(get, path = "/api/v1/admin/health", tag = "admin", security(("api_key" = [])),
    responses((status = 200, body = StaffHealth), (status = 403, body = ErrorBody)))]
pub async fn health(State(state): State<AppState>) -> ApiResult<Json<StaffHealth>> {
    let failures = &state.auth_failures;
    let index = state.classifier.index();
    let now = state.clock.now();
    let jobs = state
        .store
        .recent_leases(20)
        .await?
        .into_iter()
        .map(|l| JobLeaseJson {
            running: l.finished_at.is_none() && l.expires_at > now,
            lease: l.job,
            holder: l.holder,
            expires_at: timestamp(l.expires_at),
            finished_at: l.finished_at.map(timestamp),
        })
        .collect();
    let compaction = state.store.compaction_progress().await?;
    Ok(Json(StaffHealth {
        status: system_status(&state, ErrorDetail::Full).await,
        security: SecurityCounters {
            failed_authentications: failures.refused.load(Ordering::Relaxed),
            failed_authentications_limited: failures.limited.load(Ordering::Relaxed),
        },
        lookup_index: LookupIndexCounters {
            reverified: index.reverified(),
            reverify_failures: index.reverify_failures(),
            merges: index.merges(),
        },
        record_compaction: RecordCompactionJson {
            done: compaction.done,
            walked: compaction.walked,
            rewritten: compaction.rewritten,
        },
        jobs,
    }))
}
