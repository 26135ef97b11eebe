//! The access table: every route of the API with who may call it and which rate limit
//! applies. The router, the enforcement middleware, the OpenAPI document and the
//! authorization tests all read this one table, so a route cannot be added without
//! deciding its permission, tier and limit.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
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
    /// A valid credential whose effective roles hold `permission` (when set) on an
    /// account of at least `min_tier`.
    Authenticated {
        permission: Option<Permission>,
        min_tier: Tier,
    },
}

/// Which per-minute limit a route counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitClass {
    /// Per client address: the public feed (100/min by default).
    HashOfDay,
    /// Per client address: other public routes (300/min).
    Public,
    /// Per key: token exchange (10/min).
    Token,
    /// Per key: every other authenticated route (60/min).
    Authenticated,
    /// Probes that orchestrators call constantly.
    None,
}

#[derive(Debug, Clone)]
pub struct RouteSpec {
    pub method: Method,
    pub path: &'static str,
    pub access: Access,
    pub limit: LimitClass,
}

const fn public(method: Method, path: &'static str, limit: LimitClass) -> RouteSpec {
    RouteSpec {
        method,
        path,
        access: Access::Public,
        limit,
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
        limit: LimitClass::Authenticated,
    }
}

/// Routes with no permission in SPEC's table: open to every authenticated account.
const fn any_account(method: Method, path: &'static str, limit: LimitClass) -> RouteSpec {
    RouteSpec {
        method,
        path,
        access: Access::Authenticated {
            permission: None,
            min_tier: Tier::Free,
        },
        limit,
    }
}

use LimitClass as L;
use Permission as P;

/// Every route the server answers.
pub static ROUTES: &[RouteSpec] = &[
    public(Method::GET, "/healthz", L::None),
    public(Method::GET, "/readyz", L::None),
    public(Method::GET, "/public/hash-of-day", L::HashOfDay),
    public(Method::GET, "/public/status", L::Public),
    public(Method::GET, "/.well-known/jwks.json", L::Public),
    public(Method::GET, "/public/transparency", L::Public),
    public(Method::GET, "/public/transparency/key", L::Public),
    public(Method::GET, "/public/transparency/checkpoint", L::Public),
    public(Method::GET, "/public/transparency/consistency", L::Public),
    public(Method::GET, "/public/transparency/{date}", L::Public),
    public(Method::GET, "/public/transparency/{date}/proof", L::Public),
    // The API's own description is public so that tools can read it before holding a key.
    public(Method::GET, "/api/v1/openapi.json", L::Public),
    public(Method::GET, "/api/v1/docs", L::Public),
    any_account(Method::POST, "/api/v1/auth/token", L::Token),
    any_account(Method::POST, "/api/v1/auth/refresh", L::Authenticated),
    private(
        Method::GET,
        "/api/v1/intel/stats",
        P::IntelStats,
        Tier::Basic,
    ),
    private(
        Method::POST,
        "/api/v1/intel/lookup",
        P::IntelLookup,
        Tier::Basic,
    ),
    private(
        Method::POST,
        "/api/v1/intel/lookup/historical",
        P::IntelHistory,
        Tier::Basic,
    ),
    private(
        Method::GET,
        "/api/v1/intel/history",
        P::IntelHistory,
        Tier::Basic,
    ),
    private(
        Method::GET,
        "/api/v1/intel/export",
        P::IntelHistory,
        Tier::Basic,
    ),
    private(
        Method::GET,
        "/api/v1/intel/downloads",
        P::IntelDownloads,
        Tier::Teams,
    ),
    any_account(Method::GET, "/api/v1/admin/usage", L::Authenticated),
    private(
        Method::GET,
        "/api/v1/admin/keys",
        P::TenantManage,
        Tier::Teams,
    ),
    private(
        Method::POST,
        "/api/v1/admin/keys",
        P::TenantManage,
        Tier::Teams,
    ),
    private(
        Method::PATCH,
        "/api/v1/admin/keys/{key_id}",
        P::TenantManage,
        Tier::Teams,
    ),
    private(
        Method::DELETE,
        "/api/v1/admin/keys/{key_id}",
        P::TenantManage,
        Tier::Teams,
    ),
    private(
        Method::POST,
        "/api/v1/admin/keys/{key_id}/reissue",
        P::TenantManage,
        Tier::Teams,
    ),
    private(
        Method::POST,
        "/api/v1/admin/keys/{key_id}/roles",
        P::TenantManage,
        Tier::Teams,
    ),
    private(
        Method::DELETE,
        "/api/v1/admin/keys/{key_id}/roles/{role}",
        P::TenantManage,
        Tier::Teams,
    ),
    private(
        Method::POST,
        "/api/v1/admin/accounts/{team_id}/suspend",
        P::PlatformKeys,
        Tier::Enterprise,
    ),
    private(
        Method::POST,
        "/api/v1/admin/accounts/{team_id}/unsuspend",
        P::PlatformKeys,
        Tier::Enterprise,
    ),
    private(
        Method::GET,
        "/api/v1/admin/audit",
        P::PlatformSettings,
        Tier::Enterprise,
    ),
];

pub fn spec_for(method: &Method, path: &str) -> Option<&'static RouteSpec> {
    ROUTES.iter().find(|r| {
        r.path == path
            && (r.method == method || (method == Method::HEAD && r.method == Method::GET))
    })
}

/// `<METHOD> <route>`, the key of usage statistics.
pub fn endpoint_name(spec: &RouteSpec) -> String {
    format!("{} {}", spec.method, spec.path)
}

/// Enforces the access table on every request: authentication, usage counting, the rate
/// limit, the monthly quota, then permission and tier. A route missing from the table is
/// refused (fail closed).
pub async fn enforce(
    State(state): State<AppState>,
    matched: MatchedPath,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
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
    let now = state.clock.now();
    let limits = &state.settings.limits;
    match spec.access {
        Access::Public => {
            let per_minute = match spec.limit {
                LimitClass::HashOfDay => Some(limits.hash_of_day_per_ip),
                LimitClass::None => None,
                _ => Some(limits.public_per_ip),
            };
            if let Some(per_minute) = per_minute {
                let ip = client_ip(peer, request.headers(), &state.settings.trusted_proxies);
                let bucket = format!("ip:{ip}:{:?}", spec.limit);
                state
                    .limiter
                    .check(&bucket, per_minute, now.timestamp_millis())
                    .await?;
            }
        }
        Access::Authenticated {
            permission,
            min_tier,
        } => {
            let principal = authenticate(&state, request.headers()).await?;
            state
                .usage
                .record(&principal.team_id, &endpoint_name(spec), now);
            let (bucket, per_minute) = match spec.limit {
                LimitClass::Token => ("token", limits.token_per_key),
                _ => ("api", limits.authenticated_per_key),
            };
            state
                .limiter
                .check(
                    &format!("key:{}:{bucket}", principal.key_id),
                    per_minute,
                    now.timestamp_millis(),
                )
                .await?;
            state
                .usage
                .check_quota(&principal.team_id, principal.tier, now)
                .await?;
            principal.authorize(permission, min_tier)?;
            request.extensions_mut().insert(principal);
        }
    }
    Ok(next.run(request).await)
}

async fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<auth::Principal, Error> {
    if let Some(key) = headers.get("x-api-key") {
        let key = key
            .to_str()
            .map_err(|_| Error::Unauthorized("invalid API key".into()))?;
        return state.credentials.from_api_key(key).await;
    }
    if let Some(value) = headers.get(axum::http::header::AUTHORIZATION) {
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| Error::Unauthorized("Authorization must be 'Bearer <token>'".into()))?;
        return state.credentials.from_bearer(token.trim()).await;
    }
    Err(Error::Unauthorized(
        "missing credential: send an X-API-Key header or a Bearer token".into(),
    ))
}

/// The caller's address: the peer, unless the peer is a trusted proxy, in which case the
/// right-most `X-Forwarded-For` address that is not itself a trusted proxy.
pub fn client_ip(peer: SocketAddr, headers: &HeaderMap, trusted: &[IpAddr]) -> IpAddr {
    let peer_ip = peer.ip();
    if !trusted.contains(&peer_ip) {
        return peer_ip;
    }
    headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .rev()
        .filter_map(|s| s.trim().parse::<IpAddr>().ok())
        .find(|ip| !trusted.contains(ip))
        .unwrap_or(peer_ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_addresses_count_only_from_trusted_proxies() {
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            "203.0.113.9, 198.51.100.7".parse().unwrap(),
        );
        let from_proxy = SocketAddr::new(proxy, 1);
        let direct = SocketAddr::new("192.0.2.5".parse().unwrap(), 1);
        assert_eq!(
            client_ip(from_proxy, &headers, &[proxy]),
            "198.51.100.7".parse::<IpAddr>().unwrap()
        );
        assert_eq!(client_ip(direct, &headers, &[proxy]), direct.ip());
    }

    #[test]
    fn every_route_is_unique() {
        for (i, a) in ROUTES.iter().enumerate() {
            for b in &ROUTES[i + 1..] {
                assert!(
                    !(a.method == b.method && a.path == b.path),
                    "{} {}",
                    a.method,
                    a.path
                );
            }
        }
    }
}
