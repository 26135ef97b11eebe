//! The knowngood HTTP API.
//!
//! [`router`] builds the axum application from an [`AppState`]; [`serve`] runs it on a
//! listener until a shutdown signal, letting in-flight requests finish ([`serve_with`] with
//! the connection limits of a [`Settings`]). Tests bind port 0 and call the same functions
//! as the binary.

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use auth::admin::Admin;
use auth::credentials::Credentials;
use auth::limits::Limiter;
use auth::usage::{Quotas, Usage};
use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use model::{Clock, Error};
use store::Store;
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;

pub mod api;
pub mod connections;
pub mod corpus_release;
pub mod error;
pub mod extract;
pub mod guard;
pub mod headers;
pub mod openapi;
pub mod refresh;
pub mod request_log;
pub mod routes;
pub mod routing;

pub use connections::{ConnectionLimits, serve_with};
use error::ApiError;
use routes::public::FeedCache;
use routes::transparency::LogKey;

/// Per-minute limits; the documented values by default (docs/api.md).
#[derive(Debug, Clone)]
pub struct Limits {
    pub hash_of_day_per_ip: u32,
    pub public_per_ip: u32,
    pub token_per_key: u32,
    pub authenticated_per_key: u32,
    /// Per client address: refused credentials before further ones are answered 429.
    pub failed_auth_per_ip: u32,
    /// Per team id named in a refused key.
    pub failed_auth_per_team: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            hash_of_day_per_ip: 100,
            public_per_ip: 300,
            token_per_key: 10,
            authenticated_per_key: 60,
            failed_auth_per_ip: 30,
            failed_auth_per_team: 60,
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
    /// UTC time of day after which the day's transparency root is published (after the
    /// vendor refresh).
    pub translog_publish_at: chrono::NaiveTime,
    /// Monthly request quotas per tier; the documented values by default.
    pub quotas: Quotas,
    /// A directory where new NSRL RDS v3 releases (`*.db`) are dropped; a file newer than
    /// the live corpus generation is imported, then swapped in. None = imports by hand only.
    pub corpus_import_dir: Option<std::path::PathBuf>,
    /// A URL checked on a schedule for a new NSRL release (see [`corpus_release`]); None =
    /// no fetching.
    pub corpus_release: Option<corpus_release::ReleaseSource>,
    /// UTC time of day of the vendor refresh; None (the library default, so embedding
    /// and tests never reach out to vendors) turns it off. The binary defaults to 02:00.
    pub daily_refresh: Option<chrono::NaiveTime>,
    pub refresh: refresh::RefreshOptions,
    /// Timeouts and caps on client connections.
    pub connections: ConnectionLimits,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            trusted_proxies: Vec::new(),
            feed_cache_ttl: Duration::from_secs(3600),
            translog_publish_at: chrono::NaiveTime::from_hms_opt(2, 30, 0).unwrap_or_default(),
            quotas: Quotas::default(),
            corpus_import_dir: None,
            corpus_release: None,
            daily_refresh: None,
            refresh: refresh::RefreshOptions::default(),
            connections: ConnectionLimits::default(),
        }
    }
}

/// Shared by every request.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub credentials: Arc<Credentials>,
    /// Key, grant and account administration; every admin route goes through it.
    pub admin: Arc<Admin>,
    pub usage: Arc<Usage>,
    pub limiter: Arc<Limiter>,
    /// Refused credentials: counts and their own limits.
    pub auth_failures: Arc<guard::AuthFailures>,
    pub clock: Arc<dyn Clock>,
    pub feed_cache: Arc<FeedCache>,
    pub stats_cache: Arc<routes::intel::StatsCache>,
    pub log_key: Arc<LogKey>,
    pub trees: Arc<routes::transparency::TreeCache>,
    pub settings: Arc<Settings>,
    /// Names this process when it takes a scheduled job's lease.
    pub replica_id: String,
    /// The NSRL reference corpus, when one is configured (the classifier holds it too).
    pub corpus: Option<Arc<corpus::Corpus>>,
    /// A vendor refresh is running in this process.
    pub refreshing: Arc<std::sync::atomic::AtomicBool>,
    /// Classifies lookups; holds the in-memory vendor index.
    pub classifier: lookup::Classifier,
    /// Held while this process imports a new corpus release, so hourly runs never overlap.
    pub corpus_importing: Arc<tokio::sync::Mutex<()>>,
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
        let usage = Arc::new(Usage::new(store.clone(), settings.quotas));
        let credentials = Arc::new(credentials);
        Self {
            classifier: lookup::Classifier::new(store.clone()),
            admin: Arc::new(Admin::new(
                store.clone(),
                credentials.clone(),
                usage.clone(),
                clock.clone(),
            )),
            usage,
            store,
            credentials,
            limiter: Arc::new(limiter),
            auth_failures: Arc::default(),
            clock,
            feed_cache: Arc::new(FeedCache::new(settings.feed_cache_ttl)),
            stats_cache: Arc::default(),
            log_key: Arc::new(log_key),
            trees: Arc::default(),
            replica_id: store::new_id(),
            corpus: None,
            refreshing: Arc::default(),
            corpus_importing: Arc::default(),
            settings: Arc::new(settings),
        }
    }
}

impl AppState {
    /// Serves `known_file` results from this corpus.
    pub fn with_corpus(mut self, corpus: Arc<corpus::Corpus>) -> Self {
        self.classifier = self.classifier.with_corpus(Arc::clone(&corpus));
        self.corpus = Some(corpus);
        self
    }
}

/// The whole application: every registered route behind its own rule, plus the JSON
/// answers for unknown routes and methods, over-large request heads and slow bodies, a
/// last-resort panic guard, and the headers every answer carries.
pub fn router(state: AppState) -> Router {
    let body_read_timeout = state.settings.connections.body_read_timeout;
    routes::api()
        .into_router(&state)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(CatchPanicLayer::custom(|_| {
            ApiError(Error::internal("handler panicked")).into_response()
        }))
        .layer(axum::middleware::from_fn_with_state(
            body_read_timeout,
            connections::body_deadline,
        ))
        .layer(axum::middleware::from_fn(headers::head_limits))
        .layer(axum::middleware::from_fn(request_log::request_span))
        .layer(axum::middleware::from_fn(headers::security_headers))
        .with_state(state)
}

/// Background upkeep until `shutdown` resolves: notice credential changes made by other
/// replicas (every 0.5 s), write batched usage counts (every 2 s) and re-read month totals
/// (every 10 s), pick up a new reference-corpus generation (every 10 s), import a new NSRL
/// release from the drop directory or the release URL when there is one (every hour), prune
/// idle rate-limit buckets and publish the day's transparency root once its hour has come
/// (every minute). Flushes usage once more on the way out.
pub async fn maintain(state: AppState, shutdown: impl Future<Output = ()>) {
    let mut epoch = tokio::time::interval(Duration::from_millis(500));
    // Nothing is counted before the first request: the first flush is one period in.
    let flush_every = Duration::from_secs(2);
    let mut flush =
        tokio::time::interval_at(tokio::time::Instant::now() + flush_every, flush_every);
    let mut totals = tokio::time::interval(Duration::from_secs(10));
    let mut prune = tokio::time::interval(Duration::from_secs(60));
    let mut corpus = tokio::time::interval(Duration::from_secs(10));
    let mut corpus_import = tokio::time::interval(Duration::from_secs(3600));
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
                state.classifier.catch_up();
            }
            _ = reindex.tick() => state.classifier.rebuild_in_background(),
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
            _ = corpus.tick() => reload_corpus(&state).await,
            _ = corpus_import.tick() => {
                // Imports take minutes to hours: off the upkeep loop (a run still going
                // makes the next tick's a no-op).
                let state = state.clone();
                tokio::spawn(async move { corpus_release::run_due(&state).await });
            }
            _ = prune.tick() => {
                let now = state.clock.now();
                state.limiter.prune(now.timestamp_millis());
                if let Err(e) = start_refresh_if_due(&state, now).await {
                    tracing::warn!(error = %e, "could not start the vendor refresh");
                }
                if now.time() >= state.settings.translog_publish_at
                    && let Err(e) = publish_if_leader(&state, now).await
                {
                    tracing::warn!(error = %e, "publishing the transparency root failed; will retry");
                }
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

/// Swaps in a generation an import finished meanwhile (on another thread: opening verifies
/// the files). Requests in flight finish on the old generation.
pub(crate) async fn reload_corpus(state: &AppState) {
    let Some(corpus) = state.corpus.clone() else {
        return;
    };
    match tokio::task::spawn_blocking(move || corpus.reload()).await {
        Ok(Ok(true)) => tracing::info!("reference corpus: new generation live"),
        Ok(Ok(false)) => {}
        Ok(Err(e)) => {
            tracing::error!(error = %e, "reference corpus reload failed; keeping the live generation")
        }
        Err(e) => tracing::error!(error = %e, "reference corpus reload panicked"),
    }
}

/// Starts today's vendor refresh in the background once its hour has come, on the one
/// replica that claims the day's lease first.
async fn start_refresh_if_due(
    state: &AppState,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), Error> {
    use std::sync::atomic::Ordering;
    let Some(at) = state.settings.daily_refresh else {
        return Ok(());
    };
    if now.time() < at || state.refreshing.load(Ordering::Acquire) {
        return Ok(());
    }
    let today = now.date_naive();
    let end_of_day = today.and_time(chrono::NaiveTime::MIN).and_utc() + chrono::Duration::days(1);
    // A fresh holder name: whoever claims the day's lease first runs it, once.
    let claimed = state
        .store
        .try_lease(
            &format!("vendor.refresh:{today}"),
            &store::new_id(),
            end_of_day,
            now,
        )
        .await?;
    if !claimed {
        return Ok(());
    }
    state.refreshing.store(true, Ordering::Release);
    let state = state.clone();
    tokio::spawn(async move {
        tracing::info!("daily vendor refresh started");
        let result = refresh::refresh_vendors(
            state.store.clone(),
            state.clock.clone(),
            &state.settings.refresh,
            None,
            &|r| tracing::info!(vendor = %r.fetcher, recorded = r.recorded, unchanged = r.unchanged, errors = r.errors, mismatches = r.mismatches, "vendor refreshed"),
        )
        .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "daily vendor refresh failed");
        }
        state.refreshing.store(false, Ordering::Release);
    });
    Ok(())
}

/// Publishes today's root unless it exists or another replica holds the job's lease.
async fn publish_if_leader(
    state: &AppState,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), Error> {
    let today = now.date_naive();
    if state.store.root(today).await?.is_some() {
        return Ok(());
    }
    let until = now + chrono::Duration::minutes(10);
    if !state
        .store
        .try_lease("translog.publish", &state.replica_id, until, now)
        .await?
    {
        return Ok(());
    }
    routes::transparency::publish_day(state.store.as_ref(), &state.log_key, now, today)
        .await
        .map(|_| ())
}

/// Serves until `shutdown` resolves, then lets in-flight requests finish; the default
/// connection limits (see [`serve_with`]).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, app, &Settings::default(), shutdown).await
}
