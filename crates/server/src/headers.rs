//! Response headers every answer carries, and JSON answers for request heads too large to
//! serve.

use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::error::HttpRefusal;

/// Longest request target (path and query) served; longer ones are answered 414.
pub(crate) const MAX_URI_BYTES: usize = 8 * 1024;
/// Largest total of header names and values served; larger heads are answered 431. (Heads
/// beyond 64 KiB, or with more than 100 headers, never reach the application: the HTTP
/// layer answers 431 itself, and `bare_refusals` gives that answer its JSON body.)
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// `X-Content-Type-Options: nosniff` on every answer, so no browser reads a JSON or CSV
/// body as something else; `Cache-Control: no-store` on every `/api/v1/` answer, since each
/// is for one caller (tokens, new keys, usage, lookups) and no shared cache may keep it.
pub async fn security_headers(request: Request, next: Next) -> Response {
    let per_caller = request.uri().path().starts_with("/api/v1/");
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if per_caller {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// Refuses an over-long request target (414) or over-large headers (431) as JSON.
pub(crate) async fn head_limits(request: Request, next: Next) -> Response {
    let uri_bytes = request
        .uri()
        .path_and_query()
        .map_or(0, |p| p.as_str().len());
    if uri_bytes > MAX_URI_BYTES {
        return HttpRefusal::UriTooLong.response(format!(
            "the request target is longer than {MAX_URI_BYTES} bytes"
        ));
    }
    let header_bytes: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if header_bytes > MAX_HEADER_BYTES {
        return HttpRefusal::HeaderFieldsTooLarge.response(format!(
            "the request headers exceed {MAX_HEADER_BYTES} bytes"
        ));
    }
    next.run(request).await
}
