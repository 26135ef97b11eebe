//! The knowngood HTTP API.
//!
//! [`router`] builds the axum application from an [`AppState`]; [`serve`] runs it on a
//! listener until a shutdown signal, letting in-flight requests finish. Tests bind port 0
//! and call the same functions as the binary.

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use auth::credentials::Credentials;
use auth::limits::Limiter;
use auth::usage::{Quotas, Usage};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{delete, get, patch, post};
use model::{Clock, Error};
use store::Store;
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;

pub mod access;
pub mod api;
pub mod error;
pub mod extract;
mod huge_pages;
pub mod openapi;
pub mod routes;
pub mod vendor_index;

use error::ApiError;
use jobs::LogKey;
use routes::public::FeedCache;

/// Largest request body accepted by routes that take JSON (100 hashes need about 7 KB).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Per-minute limits; SPEC.md's values by default.
#[derive(Debug, Clone)]
pub struct Limits {
    pub hash_of_day_per_ip: u32,
    pub public_per_ip: u32,
    pub token_per_key: u32,
    pub authenticated_per_key: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            hash_of_day_per_ip: 100,
            public_per_ip: 300,
            token_per_key: 10,
            authenticated_per_key: 60,
        }
    }
}

/// Server behaviour a deployment may tune.
#[derive(Debug, Clone)]
pub struct Settings {
    pub limits: Limits,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<IpAddr>,
    pub feed_cache_ttl: Duration,
    /// Monthly request quotas per tier; SPEC.md's values by default.
    pub quotas: Quotas,
    /// The scheduled cluster jobs: vendor refresh, transparency publication, NSRL releases.
    pub jobs: jobs::JobSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            trusted_proxies: Vec::new(),
            feed_cache_ttl: Duration::from_secs(3600),
            quotas: Quotas::default(),
            jobs: jobs::JobSettings::default(),
        }
    }
}

/// Shared by every request.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub credentials: Arc<Credentials>,
    pub usage: Arc<Usage>,
    pub limiter: Arc<Limiter>,
    pub clock: Arc<dyn Clock>,
    pub feed_cache: Arc<FeedCache>,
    pub stats_cache: Arc<routes::intel::StatsCache>,
    pub log_key: Arc<LogKey>,
    pub trees: Arc<routes::transparency::TreeCache>,
    pub settings: Arc<Settings>,
    /// The NSRL reference corpus, when one is configured.
    pub corpus: Option<Arc<corpus::Corpus>>,
    /// The vendor records in memory, for lookups.
    pub vendor_index: Arc<vendor_index::VendorIndex>,
    /// What the cluster jobs run with: the same store, clock, log key and corpus as above.
    pub jobs: jobs::JobContext,
    /// The cluster jobs of this process, started by [`maintain`].
    pub runner: Arc<jobs::Runner>,
}

impl AppState {
    pub fn new(
        store: Arc<dyn Store>,
        credentials: Credentials,
        limiter: Limiter,
        clock: Arc<dyn Clock>,
        settings: Settings,
        log_key: LogKey,
    ) -> Self {
        let log_key = Arc::new(log_key);
        let jobs = jobs::JobContext::new(
            store.clone(),
            clock.clone(),
            settings.jobs.clone(),
            log_key.clone(),
        );
        Self {
            usage: Arc::new(Usage::new(store.clone(), settings.quotas)),
            store,
            credentials: Arc::new(credentials),
            limiter: Arc::new(limiter),
            clock,
            feed_cache: Arc::new(FeedCache::new(settings.feed_cache_ttl)),
            stats_cache: Arc::default(),
            log_key,
            trees: Arc::default(),
            corpus: None,
            vendor_index: Arc::default(),
            jobs,
            runner: Arc::default(),
            settings: Arc::new(settings),
        }
    }
}

impl AppState {
    /// Serves `known_file` results from this corpus.
    pub fn with_corpus(mut self, corpus: Arc<corpus::Corpus>) -> Self {
        self.jobs = self.jobs.with_corpus(corpus.clone());
        self.corpus = Some(corpus);
        self
    }
}

/// The whole application.
pub fn router(state: AppState) -> Router {
    use routes::{admin, auth, intel, public, transparency};
    Router::new()
        .route("/healthz", get(public::healthz))
        .route("/readyz", get(public::readyz))
        .route("/public/hash-of-day", get(public::hash_of_day))
        .route("/public/status", get(public::status))
        .route("/.well-known/jwks.json", get(auth::jwks))
        .route("/public/transparency", get(transparency::index))
        .route("/public/transparency/key", get(transparency::key))
        .route(
            "/public/transparency/checkpoint",
            get(transparency::checkpoint),
        )
        .route(
            "/public/transparency/consistency",
            get(transparency::consistency),
        )
        .route("/public/transparency/{date}", get(transparency::day))
        .route(
            "/public/transparency/{date}/proof",
            get(transparency::proof),
        )
        .route("/api/v1/openapi.json", get(openapi::openapi_json))
        .route("/api/v1/docs", get(openapi::docs_page))
        .route("/api/v1/auth/token", post(auth::token))
        .route("/api/v1/auth/refresh", post(auth::refresh))
        .route("/api/v1/intel/stats", get(intel::stats))
        .route("/api/v1/intel/lookup", post(intel::lookup))
        .route(
            "/api/v1/intel/lookup/historical",
            post(intel::lookup_historical),
        )
        .route("/api/v1/intel/history", get(intel::history))
        .route("/api/v1/intel/export", get(intel::export))
        .route("/api/v1/intel/downloads", get(intel::downloads))
        .route("/api/v1/admin/usage", get(admin::usage))
        .route(
            "/api/v1/admin/keys",
            get(admin::list_keys).post(admin::issue_key),
        )
        .route(
            "/api/v1/admin/keys/{key_id}",
            patch(admin::update_key).delete(admin::revoke_key),
        )
        .route(
            "/api/v1/admin/keys/{key_id}/reissue",
            post(admin::reissue_key),
        )
        .route("/api/v1/admin/keys/{key_id}/roles", post(admin::grant_role))
        .route(
            "/api/v1/admin/keys/{key_id}/roles/{role}",
            delete(admin::revoke_role),
        )
        .route(
            "/api/v1/admin/accounts/{team_id}/suspend",
            post(admin::suspend),
        )
        .route(
            "/api/v1/admin/accounts/{team_id}/unsuspend",
            post(admin::unsuspend),
        )
        .route("/api/v1/admin/audit", get(admin::audit))
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

/// Background upkeep until `shutdown` resolves: notice credential changes made by other
/// replicas (every 0.5 s), write batched usage counts (every 2 s) and re-read month totals
/// (every 10 s), pick up a new reference-corpus generation (every 10 s), prune idle
/// rate-limit buckets and start the cluster jobs that are due (every minute; see
/// [`jobs::Runner`]). Flushes usage once more on the way out.
pub async fn maintain(state: AppState, shutdown: impl Future<Output = ()>) {
    let mut epoch = tokio::time::interval(Duration::from_millis(500));
    // Nothing is counted before the first request: the first flush is one period in.
    let flush_every = Duration::from_secs(2);
    let mut flush =
        tokio::time::interval_at(tokio::time::Instant::now() + flush_every, flush_every);
    let mut totals = tokio::time::interval(Duration::from_secs(10));
    let mut prune = tokio::time::interval(Duration::from_secs(60));
    let mut corpus = tokio::time::interval(Duration::from_secs(10));
    // A full scan re-verifies every record's HMAC, so tampering with a row shows on
    // /public/status even when no lookup names it. The first tick builds the index.
    let mut reindex = tokio::time::interval(Duration::from_secs(600));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = epoch.tick() => {
                if let Err(e) = state.credentials.poll_epoch().await {
                    tracing::warn!(error = %e, "credential epoch poll failed");
                }
                if let Err(e) = state.store.poll_records_epoch().await {
                    tracing::warn!(error = %e, "records epoch poll failed");
                }
                state.vendor_index.catch_up(&state.store);
            }
            _ = reindex.tick() => state.vendor_index.rebuild_in_background(&state.store),
            _ = flush.tick() => {
                if let Err(e) = state.usage.flush().await {
                    tracing::warn!(error = %e, "usage flush failed; will retry");
                }
            }
            _ = totals.tick() => {
                if let Err(e) = state.usage.refresh_totals().await {
                    tracing::warn!(error = %e, "usage totals refresh failed");
                }
            }
            _ = corpus.tick() => jobs::corpus_release::reload(&state.jobs).await,
            _ = prune.tick() => {
                let now = state.clock.now();
                state.limiter.prune(now.timestamp_millis());
                // Runs go on in their own tasks.
                drop(state.runner.start_due(&state.jobs, now).await);
            }
        }
    }
    if let Err(e) = state.usage.flush().await {
        tracing::error!(error = %e, "final usage flush failed");
    }
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
