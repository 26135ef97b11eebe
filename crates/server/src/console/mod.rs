//! The web console under `/console/`: server-rendered HTML pages over the same rules and
//! functions as the API, written as `maud` templates (compiled with the binary; text and
//! attribute values are escaped by construction). No JavaScript build step and nothing fetched from elsewhere: the
//! few scripts (WebAuthn ceremonies, hashing a dropped file in the browser) are served by
//! the binary itself.
//!
//! Sessions and security:
//! - Signing in with a key opens a session whose token (the same JWT the API takes, with
//!   the `mfa` claim) lives in the HttpOnly cookie `kg_session`. The API stops taking the
//!   token after its 15 minutes; the console keeps taking it as the handle of its session,
//!   checked on every request, for as long as the session lasts (12 hours, or until signed
//!   out). A key whose principal has
//!   a passkey or TOTP first gets the `kg_pending` cookie and the second-factor page; one
//!   without is sent to Account to enrol, and every other page waits until it has.
//! - Cookies are HttpOnly, `SameSite=Strict`, and `Secure` when the console's configured
//!   origin is https. Every form carries a CSRF token that must equal the `kg_csrf` cookie
//!   (double submit); the scripts send it as `X-CSRF-Token`.
//! - Every page answers with a strict Content-Security-Policy (scripts and styles from the
//!   console only, no inline script), `X-Frame-Options: DENY` and `Cache-Control: no-store`.
//! - Signing out revokes the session server-side.

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;

mod pages;
pub mod rules;

/// The session token cookie.
pub(crate) const SESSION_COOKIE: &str = "kg_session";
/// The double-submit CSRF cookie.
pub(crate) const CSRF_COOKIE: &str = "kg_csrf";

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The console's routes, each behind its declared [`rules::ConsoleRule`].
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    pages::routes(state).layer(axum::middleware::from_fn(console_headers))
}

async fn console_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// The value of cookie `name` in the request, if sent.
pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .filter(|v| !v.is_empty())
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Strict, for the whole site (the second-factor
/// API routes read the pending cookie too), Secure over TLS; `max_age` 0 deletes it.
pub(crate) fn set_cookie(state: &AppState, name: &str, value: &str, max_age: i64) -> HeaderValue {
    let secure = if state.settings.relying_party.origin.scheme() == "https" {
        "; Secure"
    } else {
        ""
    };
    let cookie =
        format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}");
    HeaderValue::from_str(&cookie)
        .unwrap_or_else(|_| HeaderValue::from_static("kg_invalid=; Max-Age=0"))
}

/// A redirect after a form (303: the browser follows with GET).
pub(crate) fn see_other(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, to.to_string())]).into_response()
}
