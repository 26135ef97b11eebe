//! One span per request: a request id (the caller's `X-Request-Id` when it is a short
//! token, otherwise a new one, echoed in the response), the method, the matched route
//! from the registration (never the raw path, which may carry hashes or names), the status
//! and the latency. `RUST_LOG=server::request_log=debug` logs every request; failures
//! (5xx) are logged at `warn` whatever the filter allows below.

use std::time::Instant;

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

pub(crate) const REQUEST_ID: &str = "x-request-id";

/// The outermost layer of the application.
pub(crate) async fn request_span(mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| is_token(v))
        .map_or_else(new_request_id, str::to_owned);
    let span = tracing::info_span!(
        "request",
        id = %id,
        method = %request.method(),
        route = tracing::field::Empty,
        status = tracing::field::Empty,
        latency_us = tracing::field::Empty,
    );
    if let Ok(value) = HeaderValue::from_str(&id) {
        request.headers_mut().insert(REQUEST_ID, value.clone());
    }
    let started = Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    span.record("status", status);
    span.record("latency_us", started.elapsed().as_micros() as u64);
    span.in_scope(|| {
        if status >= 500 {
            tracing::warn!("request failed");
        } else {
            tracing::debug!("request");
        }
    });
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}

/// Names the matched route on the current request span (called by the route's guard).
pub(crate) fn record_route(route: &str) {
    tracing::Span::current().record("route", route);
}

/// A caller's id is kept only when it cannot smuggle anything into a log line.
fn is_token(v: &str) -> bool {
    (1..=64).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn new_request_id() -> String {
    hex::encode(rand::random::<[u8; 8]>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_plain_ids_are_kept() {
        assert!(is_token("req-42_a.b"));
        assert!(!is_token(""));
        assert!(!is_token("a\nb"));
        assert!(!is_token("\u{1b}[31m"));
        assert!(!is_token(&"a".repeat(65)));
        assert_eq!(new_request_id().len(), 16);
    }
}
