//! Enforcement of a route's [`RouteRule`](crate::routing::RouteRule) on each request:
//! authentication, what an impersonation session may call, the rate limit, the monthly
//! quota and usage counting, then permission and tier. The routing layer attaches it to every registered route with that route's rule.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use model::{Error, ImpersonationMode};

use crate::AppState;
use crate::error::ApiError;
use crate::routing::{Access, ImpersonationPolicy, LimitClass, RouteSpec};

/// Authenticates, counts, limits and authorizes one request to the route `spec`.
pub(crate) async fn enforce(
    state: &AppState,
    spec: &RouteSpec,
    peer: SocketAddr,
    path_key: Option<String>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let now = state.clock.now();
    let limits = state
        .settings
        .limits
        .with_overrides(&state.admin.platform_settings().limits);
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
            Ok(next.run(request).await)
        }
        Access::Authenticated {
            permission,
            min_tier,
        } => {
            let path_key = path_key.as_deref();
            let principal = match authenticate(state, request.headers(), path_key).await {
                Ok(principal) => principal,
                Err(refused @ Error::Unauthorized(_)) => {
                    let ip = client_ip(peer, request.headers(), &state.settings.trusted_proxies);
                    let named = team_named(request.headers(), path_key);
                    return Err(state
                        .auth_failures
                        .refuse(state, ip, named, refused)
                        .await
                        .into());
                }
                Err(e) => return Err(e.into()),
            };
            let Some(session) = principal.impersonation.clone() else {
                return authorized(
                    state,
                    spec,
                    &limits,
                    principal,
                    (permission, min_tier),
                    request,
                    next,
                )
                .await;
            };
            // Every request of an impersonation session is audited, refused ones included.
            let response = match check_impersonation(spec, session.mode) {
                Ok(()) => {
                    authorized(
                        state,
                        spec,
                        &limits,
                        principal.clone(),
                        (permission, min_tier),
                        request,
                        next,
                    )
                    .await
                }
                Err(e) => Err(e.into()),
            }
            .unwrap_or_else(IntoResponse::into_response);
            audit_impersonated(state, spec, &principal, &session, response.status()).await;
            Ok(response)
        }
    }
}

/// The rest of an authenticated request: the per-key limit, the quota and usage (not for
/// staff sessions: acting as a customer costs the customer nothing), then permission and
/// tier, then the handler.
async fn authorized(
    state: &AppState,
    spec: &RouteSpec,
    limits: &crate::Limits,
    principal: auth::Principal,
    (permission, min_tier): (Option<model::Permission>, model::Tier),
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let now = state.clock.now();
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
    if principal.impersonation.is_none() {
        state
            .usage
            .check_quota(&principal.team_id, principal.tier, now)
            .await?;
        // Counted once past the limits: a request refused with 429 costs no quota.
        state
            .usage
            .record(&principal.team_id, &spec.endpoint_name(), now);
    }
    // A console or invited-user session that has not passed a second factor reaches only
    // the enrolment and switch routes; raw keys and key tokens are never asked for one.
    if spec.rule.second_factor && principal.session.as_ref().is_some_and(|s| !s.mfa) {
        return Err(Error::MfaRequired.into());
    }
    principal.authorize(permission, min_tier)?;
    request.extensions_mut().insert(principal);
    Ok(next.run(request).await)
}

/// What an impersonation session may call: never the routes that mint or refresh tokens
/// or start another impersonation, and no write in a `view` session.
fn check_impersonation(spec: &RouteSpec, mode: ImpersonationMode) -> Result<(), Error> {
    match spec.rule.impersonation {
        ImpersonationPolicy::Refused => Err(Error::Forbidden(format!(
            "an impersonation session cannot call {} {}: sessions cannot mint or refresh tokens or impersonate again",
            spec.method, spec.path
        ))),
        ImpersonationPolicy::ManageOnly if mode == ImpersonationMode::View => {
            Err(Error::Forbidden(format!(
                "this impersonation session is view-only: {} is a write and is refused",
                spec.method
            )))
        }
        _ => Ok(()),
    }
}

/// One audit row per request of an impersonation session: the staff key as actor, the
/// account acted as, the route (its template, never caller text) and the answer's status.
async fn audit_impersonated(
    state: &AppState,
    spec: &RouteSpec,
    principal: &auth::Principal,
    session: &auth::Impersonation,
    status: StatusCode,
) {
    let outcome = if status.is_client_error() || status.is_server_error() {
        format!("failed: {}", status.as_u16())
    } else {
        "ok".to_string()
    };
    let entry = store::admin::AuditEntry {
        at: state.clock.now(),
        actor: principal.key_id.clone(),
        team_id: principal.team_id.clone(),
        action: "impersonate.request".into(),
        target: spec.endpoint_name(),
        outcome,
        detail: auth::admin::impersonation_detail(principal, session, ""),
    };
    if let Err(e) = state.store.append_audit(&entry).await {
        tracing::error!(error = %e, "could not audit an impersonated request");
    }
}

/// The one credential of the request: an `X-API-Key`, a bearer token, or the key in the
/// path of a route that takes it there. Two credentials are refused rather than one
/// silently preferred: a proxy or client that adds its own credential must not decide who
/// the caller is.
async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    path_key: Option<&str>,
) -> Result<auth::Principal, Error> {
    let keys = headers.get_all("x-api-key").iter().count();
    let bearers = headers
        .get_all(axum::http::header::AUTHORIZATION)
        .iter()
        .count();
    if keys + bearers + usize::from(path_key.is_some()) > 1 {
        return Err(Error::bad_request(
            "send exactly one credential: one X-API-Key header, one Authorization header, or the key in the path",
        ));
    }
    if let Some(key) = path_key {
        return state.credentials.from_api_key(key).await;
    }
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
pub(crate) fn client_ip(peer: SocketAddr, headers: &HeaderMap, trusted: &[IpAddr]) -> IpAddr {
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

/// Failed authentications: counted per client address and per team id named in a bad key,
/// each with its own per-minute limit, so guessing keys or replaying junk tokens from one
/// place turns into 429s; each burst is logged once, and the counts are kept for the staff
/// health route.
#[derive(Default)]
pub struct AuthFailures {
    /// Every refused credential since start.
    pub refused: AtomicU64,
    /// Refusals answered 429 because the address or team was over its failure limit.
    pub limited: AtomicU64,
    /// When each over-limit bucket was last logged (ms), so a burst logs one line.
    logged: Mutex<HashMap<String, i64>>,
}

/// Distinct buckets remembered for burst logging; beyond, the memory is dropped at once.
const MAX_LOGGED_BURSTS: usize = 4096;

impl AuthFailures {
    /// Counts a refused credential and returns the answer: `refused` (401) while under the
    /// limits, 429 beyond them.
    pub(crate) async fn refuse(
        &self,
        state: &AppState,
        ip: IpAddr,
        team_named: Option<&str>,
        refused: Error,
    ) -> Error {
        self.refused.fetch_add(1, Ordering::Relaxed);
        let now_ms = state.clock.now().timestamp_millis();
        let limits = &state.settings.limits;
        let mut buckets = vec![(format!("authfail:ip:{ip}"), limits.failed_auth_per_ip)];
        if let Some(team) = team_named {
            buckets.push((format!("authfail:team:{team}"), limits.failed_auth_per_team));
        }
        for (bucket, per_minute) in buckets {
            match state.limiter.check(&bucket, per_minute, now_ms).await {
                Ok(()) => {}
                Err(limited @ Error::RateLimited { .. }) => {
                    self.limited.fetch_add(1, Ordering::Relaxed);
                    self.log_burst(&bucket, now_ms);
                    return limited;
                }
                // A limiter that cannot answer (Redis down) must not hide the 401.
                Err(e) => tracing::warn!(error = %e, "failed-authentication limit unavailable"),
            }
        }
        refused
    }

    fn log_burst(&self, bucket: &str, now_ms: i64) {
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        if logged.get(bucket).is_some_and(|&at| now_ms - at < 60_000) {
            return;
        }
        if logged.len() >= MAX_LOGGED_BURSTS {
            logged.clear();
        }
        logged.insert(bucket.to_string(), now_ms);
        tracing::warn!(source = %bucket.trim_start_matches("authfail:"), "failed authentications over the limit; answering 429");
    }
}

/// The team id a bad key (header or path) names, when it is a well-formed one (anything
/// else is not a bucket name).
fn team_named<'a>(headers: &'a HeaderMap, path_key: Option<&'a str>) -> Option<&'a str> {
    let key = match path_key {
        Some(key) => key,
        None => headers.get("x-api-key")?.to_str().ok()?,
    };
    let (team, _) = key.split_once('.')?;
    auth::validate_team_id(team).ok()?;
    Some(team)
}
