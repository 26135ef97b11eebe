//! The revocation routes: signing certificates found revoked on their issuers' CRLs.

use axum::Json;
use axum::extract::{Path, State};
use model::{Error, Permission, Tier};
use serde::{Deserialize, Serialize};
use store::revocations::RevocationQuery;
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::error::{ApiResult, ErrorBody};
use crate::extract::QueryParams;
use crate::extract::{parse_limit, parse_offset};
use crate::routing::{Api, RouteRule};
use crate::services::revocations::{self as service, RevocationFeed, RevokedCertJson};

pub(crate) fn routes(api: Api) -> Api {
    let rule = || RouteRule::private(Permission::IntelRevocations, Tier::Teams);
    api.route(routes!(revocations), rule())
        .route(routes!(revocation_history), rule())
        .route(routes!(revocation), rule())
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RevocationHistoryPage {
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
    pub revoked_certs: Vec<RevokedCertJson>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RevocationDetail {
    pub revoked_cert: RevokedCertJson,
}

/// Revocations in force: most severe reason first (keyCompromise, cACompromise), then
/// certificates that signed a current file, then the newest.
#[utoipa::path(get, path = "/api/v1/intel/revocations", tag = "intel",
    security(("api_key" = [])),
    responses((status = 200, body = RevocationFeed), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody)))]
pub async fn revocations(State(state): State<AppState>) -> ApiResult<Json<RevocationFeed>> {
    Ok(Json(service::in_force(&state).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RevocationHistoryParams {
    /// RFC 3339 timestamp or YYYY-MM-DD (from the start of that UTC day), inclusive.
    since: Option<String>,
    /// RFC 3339 timestamp or YYYY-MM-DD (to the end of that UTC day), inclusive.
    until: Option<String>,
    /// Case-insensitive substring of the certificate subject.
    signer: Option<String>,
    /// 1 to 200, default 50.
    limit: Option<String>,
    /// 0 or more, default 0.
    offset: Option<String>,
}

/// Every revocation recorded, released holds included, newest revocation first.
#[utoipa::path(get, path = "/api/v1/intel/revocations/history", tag = "intel",
    security(("api_key" = [])), params(RevocationHistoryParams),
    responses((status = 200, body = RevocationHistoryPage), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn revocation_history(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<RevocationHistoryParams>,
) -> ApiResult<Json<RevocationHistoryPage>> {
    let query = RevocationQuery {
        since: crate::extract::instant(params.since.as_deref(), "since", false)?,
        until: crate::extract::instant(params.until.as_deref(), "until", true)?,
        signer: crate::extract::name_filter(params.signer.as_deref(), "signer")?,
        limit: parse_limit(params.limit.as_deref())?,
        offset: parse_offset(params.offset.as_deref())?,
    };
    if let (Some(since), Some(until)) = (query.since, query.until)
        && since > until
    {
        return Err(Error::bad_request("since must not be after until").into());
    }
    let page = state.store.revocation_history(&query).await?;
    Ok(Json(RevocationHistoryPage {
        total: page.total,
        limit: query.limit,
        offset: query.offset,
        revoked_certs: page.items.into_iter().map(RevokedCertJson::from).collect(),
    }))
}

/// A thumbprint: 40 hex characters of either case, normalised to lowercase.
fn parse_thumbprint(raw: &str) -> Result<String, Error> {
    if raw.len() == 40 && raw.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(raw.to_ascii_lowercase())
    } else {
        Err(Error::bad_request(format!(
            "thumbprint must be 40 hexadecimal characters (a SHA-1 of the certificate; got {})",
            model::shown(raw)
        )))
    }
}

/// One certificate's revocation: the one in force, else the latest lifted hold.
#[utoipa::path(get, path = "/api/v1/intel/revocations/{thumbprint}", tag = "intel",
    security(("api_key" = [])),
    params(("thumbprint" = String, Path, description = "SHA-1 thumbprint, 40 hex characters")),
    responses((status = 200, body = RevocationDetail), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub async fn revocation(
    State(state): State<AppState>,
    Path(thumbprint): Path<String>,
) -> ApiResult<Json<RevocationDetail>> {
    let thumbprint = parse_thumbprint(&thumbprint)?;
    let cert = state.store.revocation(&thumbprint).await?.ok_or_else(|| {
        Error::NotFound(format!("{thumbprint} is not a known revoked certificate"))
    })?;
    Ok(Json(RevocationDetail {
        revoked_cert: cert.into(),
    }))
}
