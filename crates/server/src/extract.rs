//! Request extractors whose rejections are API errors: a malformed body or query is a 400
//! that names the problem, an oversize body a 413, never a 500 or axum's plain-text reply.

use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use bytes::Bytes;
use model::Error;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body. Any content type is accepted: clients that forget the header get the same
/// answer as those that send it.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                Error::PayloadTooLarge("request body is larger than this route accepts".into())
            } else {
                Error::bad_request(format!("could not read the request body: {rejection}"))
            }
        })?;
        if bytes.is_empty() {
            return Err(Error::bad_request("request body must be a JSON object").into());
        }
        // The error names where in the body the problem is (`hashes`, `hashes[3]`).
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path == "." {
                Error::bad_request(format!("invalid JSON body: {inner}"))
            } else {
                Error::bad_request(format!("invalid JSON body: {path}: {inner}"))
            }
        })?;
        de.end()
            .map_err(|e| Error::bad_request(format!("invalid JSON body: {e}")))?;
        Ok(JsonBody(value))
    }
}

/// Query parameters.
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| QueryParams(q.0))
            .map_err(|e: QueryRejection| {
                Error::bad_request(format!("invalid query: {}", e.body_text())).into()
            })
    }
}
