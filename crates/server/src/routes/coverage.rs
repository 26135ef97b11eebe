//! Inventory-driven coverage: `POST /api/v1/intel/coverage/requests` takes an SBOM (read by
//! the SBOM scan's parser) and queues the PyPI, npm and Debian/Ubuntu package versions it
//! lists for the next vendor refresh, which records exactly those versions. Only
//! (ecosystem, name, version) enters the queue; the document is parsed in memory and
//! dropped with the request, never written to disk, the database or the logs. The SBOM scan
//! route itself stays name-only and fetches nothing.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use model::{Error, Permission, Tier};
use serde::Serialize;
use store::coverage::CoverageItem;
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::error::{ApiResult, ErrorBody};
use crate::extract::RawBody;
use crate::routing::{Api, RouteRule};
// The largest SBOM accepted is the SBOM scan's.
use crate::services::packages::MAX_SBOM_BYTES;

/// The coverage route and who may call it.
pub(crate) fn routes(api: Api) -> Api {
    let rule = RouteRule::private(Permission::IntelPackages, Tier::Teams);
    api.route(routes!(request_coverage), rule.max_body(MAX_SBOM_BYTES))
}

/// One package version: `ecosystem` is the channel that records it (`pypi`, `npm`,
/// `debian`, `ubuntu`).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CoverageVersion {
    pub ecosystem: String,
    pub name: String,
    pub version: String,
}

impl From<CoverageItem> for CoverageVersion {
    fn from(i: CoverageItem) -> Self {
        Self {
            ecosystem: i.ecosystem,
            name: i.name,
            version: i.version,
        }
    }
}

/// A component of a followed ecosystem that was not queued, and why.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RefusedComponent {
    /// `pypi`, `npm` or `deb`, as the SBOM's package URL says.
    pub ecosystem: String,
    pub name: String,
    pub version: String,
    pub reason: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CoverageSummary {
    /// Components the SBOM lists.
    pub components: u64,
    pub queued: u64,
    pub already_queued: u64,
    pub known: u64,
    pub refused: u64,
    pub not_followed: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CoverageRequestResult {
    pub summary: CoverageSummary,
    /// Queued by this request for the next refresh of their channel.
    pub queued: Vec<CoverageVersion>,
    /// Waiting already, from an earlier request.
    pub already_queued: Vec<CoverageVersion>,
    /// Versions the service already holds records of: nothing to fetch.
    pub known: Vec<CoverageVersion>,
    pub refused: Vec<RefusedComponent>,
    /// Components of ecosystems the queue does not follow (Maven, Go, RPM...), counted by
    /// package URL type (`unknown`: no package URL).
    pub not_followed: BTreeMap<String, u64>,
}

/// Queue the package versions of a software bill of materials for the next vendor refresh.
#[utoipa::path(post, path = "/api/v1/intel/coverage/requests", tag = "packages",
    security(("api_key" = [])),
    request_body(content = String, description = "CycloneDX (JSON or XML) or SPDX (JSON, tag-value, 3.0 JSON-LD), at most 16 MB and 10,000 distinct PyPI, npm and Debian/Ubuntu package versions", content_type = "application/json"),
    responses((status = 200, body = CoverageRequestResult), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub(crate) async fn request_coverage(
    State(state): State<AppState>,
    RawBody(body): RawBody,
) -> ApiResult<Json<CoverageRequestResult>> {
    // Parsing is CPU work: off the request threads. Only the plan leaves this closure.
    let plan = tokio::task::spawn_blocking(move || {
        let sbom = packages::sbom::parse(&body).map_err(|e| match e {
            packages::SbomError::Invalid(m) => Error::bad_request(m),
            too_many @ packages::SbomError::TooManyComponents => {
                Error::PayloadTooLarge(too_many.to_string())
            }
        })?;
        drop(body);
        jobs::coverage::plan(&sbom)
    })
    .await
    .map_err(|e| Error::internal_caused("SBOM reading stopped", e))??;
    let done =
        jobs::coverage::request(state.store.as_ref(), &plan.items, state.clock.now()).await?;
    let versions = |items: Vec<CoverageItem>| -> Vec<CoverageVersion> {
        items.into_iter().map(CoverageVersion::from).collect()
    };
    let summary = CoverageSummary {
        components: plan.components,
        queued: done.queued.len() as u64,
        already_queued: done.already_queued.len() as u64,
        known: done.known.len() as u64,
        refused: plan.refused.len() as u64,
        not_followed: plan.not_followed.values().sum(),
    };
    Ok(Json(CoverageRequestResult {
        summary,
        queued: versions(done.queued),
        already_queued: versions(done.already_queued),
        known: versions(done.known),
        refused: plan
            .refused
            .into_iter()
            .map(|r| RefusedComponent {
                ecosystem: r.ecosystem,
                name: r.name,
                version: r.version,
                reason: r.reason,
            })
            .collect(),
        not_followed: plan.not_followed,
    }))
}
