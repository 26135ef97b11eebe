//! The access table: every route of the API with who may call it. The router, the
//! authentication middleware, the OpenAPI document and the authorization tests all read
//! this one table, so a route cannot be added without deciding its permission and tier.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::Response;
use model::{Error, Permission, Tier};

use crate::AppState;
use crate::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No credential.
    Public,
    /// A valid credential whose role holds `permission` (when set) on an account of at
    /// least `min_tier`.
    Authenticated {
        permission: Option<Permission>,
        min_tier: Tier,
    },
}

#[derive(Debug, Clone)]
pub struct RouteSpec {
    pub method: Method,
    pub path: &'static str,
    pub access: Access,
}

const fn public(method: Method, path: &'static str) -> RouteSpec {
    RouteSpec {
        method,
        path,
        access: Access::Public,
    }
}

const fn private(
    method: Method,
    path: &'static str,
    permission: Permission,
    min_tier: Tier,
) -> RouteSpec {
    RouteSpec {
        method,
        path,
        access: Access::Authenticated {
            permission: Some(permission),
            min_tier,
        },
    }
}

/// Every route the server answers.
pub static ROUTES: &[RouteSpec] = &[
    public(Method::GET, "/healthz"),
    public(Method::GET, "/readyz"),
    public(Method::GET, "/public/hash-of-day"),
    public(Method::GET, "/public/status"),
    // The API's own description is public so that tools can read it before holding a key.
    public(Method::GET, "/api/v1/openapi.json"),
    public(Method::GET, "/api/v1/docs"),
    private(
        Method::GET,
        "/api/v1/intel/stats",
        Permission::IntelStats,
        Tier::Basic,
    ),
    private(
        Method::POST,
        "/api/v1/intel/lookup",
        Permission::IntelLookup,
        Tier::Basic,
    ),
    private(
        Method::POST,
        "/api/v1/intel/lookup/historical",
        Permission::IntelHistory,
        Tier::Basic,
    ),
    private(
        Method::GET,
        "/api/v1/intel/history",
        Permission::IntelHistory,
        Tier::Basic,
    ),
    private(
        Method::GET,
        "/api/v1/intel/export",
        Permission::IntelHistory,
        Tier::Basic,
    ),
];

pub fn spec_for(method: &Method, path: &str) -> Option<&'static RouteSpec> {
    ROUTES
        .iter()
        .find(|r| r.path == path && (r.method == method || (method == Method::HEAD && r.method == Method::GET)))
}

/// Authenticates and authorizes every request against the access table. A route missing
/// from the table is refused (fail closed).
pub async fn enforce(
    State(state): State<AppState>,
    matched: MatchedPath,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let spec = spec_for(request.method(), matched.as_str()).ok_or_else(|| {
        Error::internal(format!(
            "{} {} is missing from the access table",
            request.method(),
            matched.as_str()
        ))
    })?;
    if let Access::Authenticated {
        permission,
        min_tier,
    } = spec.access
    {
        let principal = authenticate(&state, request.headers()).await?;
        principal.authorize(permission, min_tier)?;
        request.extensions_mut().insert(principal);
    }
    Ok(next.run(request).await)
}

async fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<auth::Principal, Error> {
    let Some(key) = headers.get("x-api-key") else {
        return Err(if headers.contains_key("authorization") {
            Error::Unauthorized("bearer tokens are not accepted; send X-API-Key".into())
        } else {
            Error::Unauthorized("missing credential: send an X-API-Key header".into())
        });
    };
    let key = key
        .to_str()
        .map_err(|_| Error::Unauthorized("invalid API key".into()))?;
    let team = auth::parse_key(key)?;
    let hash = state.keys.hash(key);
    let stored = state
        .store
        .key_by_hash(&hash)
        .await?
        .ok_or_else(|| Error::Unauthorized("invalid API key".into()))?;
    auth::Principal::from_key(&hash, stored, team)
}
