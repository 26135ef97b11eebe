//! Enforcement of a route's [`Rule`](crate::routing::Rule) on each request:
//! authentication, usage counting, the rate limit, the monthly quota, then permission and
//! tier. The routing layer attaches it to every registered route with that route's rule.

use std::net::{IpAddr, SocketAddr};

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use model::Error;

use crate::AppState;
use crate::error::ApiError;
use crate::routing::{Access, LimitClass, RouteSpec};

/// Authenticates, counts, limits and authorizes one request to the route `spec`.
pub(crate) async fn enforce(
    state: &AppState,
    spec: &RouteSpec,
    peer: SocketAddr,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
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
            let principal = authenticate(state, request.headers()).await?;
            state
                .usage
                .record(&principal.team_id, &spec.endpoint_name(), now);
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
}
