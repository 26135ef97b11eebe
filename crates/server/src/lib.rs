//! The knowngood HTTP API.
//!
//! [`router`] builds the axum application from an [`AppState`]; [`serve`] runs it on a
//! listener until a shutdown signal, letting in-flight requests finish. Tests bind port 0
//! and call the same functions as the binary.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use model::{Clock, Error};
use store::Store;
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;

pub mod access;
pub mod api;
pub mod error;
pub mod extract;
pub mod openapi;
pub mod routes;

use error::ApiError;
use routes::public::FeedCache;

/// Largest request body accepted by routes that take JSON (100 hashes need about 7 KB).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Shared by every request.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub keys: auth::KeyHasher,
    pub clock: Arc<dyn Clock>,
    pub feed_cache: Arc<FeedCache>,
}

impl AppState {
    pub fn new(store: Arc<dyn Store>, keys: auth::KeyHasher, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            keys,
            clock,
            feed_cache: Arc::new(FeedCache::new(Duration::from_secs(3600))),
        }
    }
}

/// The whole application.
pub fn router(state: AppState) -> Router {
    use routes::{intel, public};
    Router::new()
        .route("/healthz", get(public::healthz))
        .route("/readyz", get(public::readyz))
        .route("/public/hash-of-day", get(public::hash_of_day))
        .route("/public/status", get(public::status))
        .route("/api/v1/openapi.json", get(openapi::openapi_json))
        .route("/api/v1/docs", get(openapi::docs_page))
        .route("/api/v1/intel/stats", get(intel::stats))
        .route("/api/v1/intel/lookup", post(intel::lookup))
        .route(
            "/api/v1/intel/lookup/historical",
            post(intel::lookup_historical),
        )
        .route("/api/v1/intel/history", get(intel::history))
        .route("/api/v1/intel/export", get(intel::export))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            access::enforce,
        ))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError(Error::internal("handler panicked")).into_response()
        }))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError(Error::NotFound("no such route".into()))
}

async fn method_not_allowed() -> impl IntoResponse {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        axum::Json(error::ErrorBody {
            error: "method not allowed",
            message: Some("this route does not accept that method".into()),
        }),
    )
}

/// Serves until `shutdown` resolves, then lets in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}
