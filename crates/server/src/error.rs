//! The one mapping from domain errors to HTTP: every error response of the API is made
//! here, as `{"error": "<code>", "message": "<detail>"}` with the status docs/api.md
//! ("Errors") fixes. Domain failures come as `model::Error` ([`ApiError`]); the refusals the
//! HTTP layer makes before any route runs (a method the route lacks, a slow body, an
//! over-long target, over-large headers, a head hyper could not parse) as [`HttpRefusal`].
//! (TAXII routes answer TAXII error bodies instead, as that protocol requires:
//! `routes/taxii.rs`.)
//!
//! Codes: every code is part of the API (docs/api.md lists them; clients and tests compare
//! them). A code that is the only one of its status is the status's meaning in lower-case
//! words (`not found`, `uri too long`); a code that shares its status with another, and
//! that a client must tell apart to act on it, is an upper-case identifier (`MFA_REQUIRED`
//! beside `forbidden`, `QUOTA_EXCEEDED` beside `rate limit exceeded`). New codes follow
//! the same rule; existing ones never change.
//!
//! Error policy, by layer:
//! - Each layer reports failures in its own terms: the store as `store::StoreError`
//!   (not found, conflict, unavailable, corrupt, configuration, other with its source),
//!   ingestion as problems in a vendor report, the edge (`extract`) as bad requests naming
//!   the field. Layers that can tell the caller something speak `model::Error`.
//! - Every kind is turned into the next layer's exactly once: `StoreError` into
//!   `model::Error` in the store, `model::Error` into status and code here
//!   ([`status_and_code`], exhaustive, so a new kind cannot go unmapped).
//! - Messages are for the caller: they name the offending field or value (quoted with
//!   `model::shown`) and never carry internals. An internal failure keeps what was being
//!   done and the error underneath (`model::Error::internal_caused`, or a `StoreError`
//!   turned into `model::Error`), and its display is that whole chain: it is logged here
//!   (and by the console) with every cause, while a 500 answers `internal error` with no
//!   message; a 503 says the database is unavailable.
//! - A 401 names the scheme (`WWW-Authenticate`); a 429 says when to retry (`Retry-After`).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use model::Error;
use serde::Serialize;
use utoipa::ToSchema;

/// An error as the API reports it.
#[derive(Debug)]
pub struct ApiError(pub Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        Self(e)
    }
}

/// Error body of every failed request.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorBody {
    /// One of `unauthorized`, `forbidden`, `MFA_REQUIRED`, `not found`, `bad request`,
    /// `conflict`, `payload too large`, `method not allowed`, `rate limit exceeded`,
    /// `QUOTA_EXCEEDED`, `internal error`.
    pub error: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Status and code of each error kind; exhaustive, so a new kind cannot go unmapped. The
/// code is the kind's own (`Error::code`), so the audit log names failures the same way.
pub(crate) fn status_and_code(e: &Error) -> (StatusCode, &'static str) {
    let status = match e {
        Error::BadRequest(_) => StatusCode::BAD_REQUEST,
        Error::Unauthorized(_) => StatusCode::UNAUTHORIZED,
        Error::Forbidden(_) | Error::MfaRequired => StatusCode::FORBIDDEN,
        Error::NotFound(_) => StatusCode::NOT_FOUND,
        Error::Conflict(_) => StatusCode::CONFLICT,
        Error::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        Error::RangeNotSatisfiable(_) => StatusCode::RANGE_NOT_SATISFIABLE,
        Error::RateLimited { .. } | Error::QuotaExceeded { .. } => StatusCode::TOO_MANY_REQUESTS,
        Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        Error::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (status, e.code())
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = status_and_code(&self.0);
        let message = match &self.0 {
            Error::BadRequest(m)
            | Error::Unauthorized(m)
            | Error::Forbidden(m)
            | Error::NotFound(m)
            | Error::Conflict(m)
            | Error::PayloadTooLarge(m)
            | Error::RangeNotSatisfiable(m)
            | Error::Unavailable(m) => Some(m.clone()),
            Error::MfaRequired => Some(
                "a second factor is needed: enroll a passkey or authenticator first, or use a \
                 session that passed one"
                    .into(),
            ),
            Error::RateLimited { .. } | Error::QuotaExceeded { .. } => None,
            Error::Internal { .. } => {
                // The context and the whole cause chain, for the log only.
                tracing::error!(error = %self.0, "internal error");
                None
            }
        };
        let mut response = (
            status,
            Json(ErrorBody {
                error: code,
                message,
            }),
        )
            .into_response();
        if let Error::Unauthorized(_) = self.0 {
            // RFC 9110: a 401 names how to authenticate (a key header works as well).
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"knowngood\""),
            );
        }
        if let Error::RateLimited { retry_after_secs } | Error::QuotaExceeded { retry_after_secs } =
            self.0
        {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(retry_after_secs.max(1)),
            );
        }
        response
    }
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// A refusal made by the HTTP layer itself, before (or instead of) any route: not a domain
/// failure, so not a `model::Error` kind, but answered with the same body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HttpRefusal {
    /// A request head hyper could not parse (answered by `bare_refusals`).
    MalformedHead,
    /// The route exists; the method does not.
    MethodNotAllowed,
    /// The body did not arrive within the body-read deadline (`connections`).
    RequestTimeout,
    /// The request target is longer than served (`headers`, `bare_refusals`).
    UriTooLong,
    /// The headers are larger than served (`headers`, `bare_refusals`).
    HeaderFieldsTooLarge,
}

impl HttpRefusal {
    /// Status and code of each refusal; exhaustive, like [`status_and_code`].
    pub(crate) fn status_and_code(self) -> (StatusCode, &'static str) {
        match self {
            HttpRefusal::MalformedHead => (StatusCode::BAD_REQUEST, "bad request"),
            HttpRefusal::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
            HttpRefusal::RequestTimeout => (StatusCode::REQUEST_TIMEOUT, "request timeout"),
            HttpRefusal::UriTooLong => (StatusCode::URI_TOO_LONG, "uri too long"),
            HttpRefusal::HeaderFieldsTooLarge => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "request header fields too large",
            ),
        }
    }

    /// The refusal's JSON body with `message`, serialised.
    pub(crate) fn body(self, message: impl Into<String>) -> Option<Vec<u8>> {
        serde_json::to_vec(&ErrorBody {
            error: self.status_and_code().1,
            message: Some(message.into()),
        })
        .ok()
    }

    /// The refusal as an answer with `message`.
    pub(crate) fn response(self, message: impl Into<String>) -> Response {
        let (status, code) = self.status_and_code();
        (
            status,
            Json(ErrorBody {
                error: code,
                message: Some(message.into()),
            }),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_internal_error_answers_its_code_alone_whatever_its_cause() {
        let e = Error::internal_caused(
            "reading a record",
            std::io::Error::other("relation \"hash_records\" does not exist"),
        );
        assert!(
            e.to_string().contains("hash_records"),
            "the log line has the cause"
        );
        let response = ApiError(e).into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        assert_eq!(&body[..], br#"{"error":"internal error"}"#);
    }
}
