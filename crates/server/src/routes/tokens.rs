//! Token exchange and the JWKS.

use auth::{Credential, Principal};
use axum::Json;
use axum::extract::{Extension, State};
use model::Error;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::error::{ApiResult, ErrorBody};
use crate::routing::{Api, ImpersonationPolicy, LimitClass, RouteRule};

/// Token exchange, refresh and the verification keys.
pub(crate) fn routes(api: Api) -> Api {
    // Sessions cannot mint or refresh tokens.
    let minting = RouteRule::any_account().impersonation(ImpersonationPolicy::Refused);
    api.route(routes!(jwks), RouteRule::public())
        .route(routes!(token), minting.limit(LimitClass::Token))
        .route(routes!(refresh), minting)
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenResponse {
    /// RS256 JWT.
    pub token: String,
    /// Always `Bearer`.
    pub token_type: &'static str,
    /// Seconds until the token expires: 900, or less when the sign-in session it belongs
    /// to ends sooner.
    pub expires_in: i64,
    /// When the token expires (its `exp`).
    pub expires_at: String,
}

fn token_for(state: &AppState, principal: &Principal) -> ApiResult<Json<TokenResponse>> {
    // Whole seconds, as the token's `iat` and `exp` are: a token minted with the full
    // lifetime says 900 even when the second ticks over while it is signed.
    let issued = state.clock.now().timestamp();
    let (token, expires_at) = state.credentials.issue_token_until(principal)?;
    Ok(Json(TokenResponse {
        token,
        token_type: "Bearer",
        expires_in: (expires_at.timestamp() - issued).clamp(0, auth::jwt::TOKEN_TTL_SECS),
        expires_at: crate::api::timestamp(expires_at),
    }))
}

/// Exchange an API key for a 15-minute JWT.
#[utoipa::path(post, path = "/api/v1/auth/token", tag = "auth",
    security(("api_key" = [])),
    responses((status = 200, body = TokenResponse), (status = 401, body = ErrorBody),
        (status = 403, description = "An impersonation session (`forbidden`: sessions cannot mint tokens), or a console or user session that has not passed a second factor (`MFA_REQUIRED`)", body = ErrorBody),
        (status = 429, description = "More than 10 per minute for this key", body = ErrorBody)))]
pub async fn token(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> ApiResult<Json<TokenResponse>> {
    if principal.credential != Credential::ApiKey {
        return Err(Error::Unauthorized(
            "a token is exchanged for an API key; use /api/v1/auth/refresh".into(),
        )
        .into());
    }
    token_for(&state, &principal)
}

/// A new token with a fresh 15-minute lifetime, for a valid (unexpired) token. A session
/// token's refresh stays in its session: refused once the session is signed out or over,
/// and never past the session's end.
#[utoipa::path(post, path = "/api/v1/auth/refresh", tag = "auth",
    security(("bearer" = [])),
    responses((status = 200, body = TokenResponse),
        (status = 401, description = "An expired or invalid token, or its session signed out or over", body = ErrorBody),
        (status = 403, description = "An impersonation session (`forbidden`: sessions cannot refresh tokens), or a console or user session that has not passed a second factor (`MFA_REQUIRED`)", body = ErrorBody)))]
pub async fn refresh(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> ApiResult<Json<TokenResponse>> {
    if principal.credential != Credential::Jwt {
        return Err(Error::Unauthorized(
            "refresh takes a Bearer token; exchange a key at /api/v1/auth/token".into(),
        )
        .into());
    }
    token_for(&state, &principal)
}

/// Public keys that verify the service's JWTs (the signing key first).
#[utoipa::path(get, path = "/.well-known/jwks.json", tag = "auth",
    responses((status = 200, description = "JWKS with every RSA key still valid for verification")))]
pub async fn jwks(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(state.credentials.jwks())
}
