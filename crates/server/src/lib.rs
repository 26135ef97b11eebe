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
use axum::response::IntoResponse;
use model::{Clock, Error};
use store::Store;
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;

pub(crate) mod api;
mod bare_refusals;
pub(crate) mod connections;
pub mod console;
pub(crate) mod error;
pub(crate) mod extract;
pub(crate) mod feed_cache;
pub(crate) mod guard;
pub(crate) mod headers;
pub mod metrics;
pub mod openapi;
pub(crate) mod readiness;
pub(crate) mod request_log;
pub(crate) mod routes;
pub mod routing;
pub(crate) mod services;
pub(crate) mod status;

pub use connections::{ConnectionLimits, serve_with};
use error::ApiError;
use feed_cache::FeedCache;
use jobs::LogKey;
/// Public for the configuration, whose default hashlookup prefix is this one.
pub use routes::hashlookup::DECLARED_PREFIX as HASHLOOKUP_DECLARED_PREFIX;
/// Public for the fuzz target, which reads lookup bodies exactly as the routes do.
pub use routes::intel::parse_lookup_body;
/// Public so that clients and tests open checkpoints under the origin the server signs.
pub use routes::transparency::CHECKPOINT_ORIGIN;
/// Public for the command line's offline bundle, which writes the same vendor part as the route.
pub use services::bundle::write_vendor_part;

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

impl Limits {
    /// These limits with the staff's run-time overrides applied.
    pub(crate) fn with_overrides(&self, o: &model::staff::LimitOverrides) -> Limits {
        Limits {
            hash_of_day_per_ip: o.hash_of_day_per_ip.unwrap_or(self.hash_of_day_per_ip),
            public_per_ip: o.public_per_ip.unwrap_or(self.public_per_ip),
            token_per_key: o.token_per_key.unwrap_or(self.token_per_key),
            authenticated_per_key: o
                .authenticated_per_key
                .unwrap_or(self.authenticated_per_key),
            ..self.clone()
        }
    }
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
    /// The service's public address (`https://knowngood.example`): the absolute links of
    /// the feeds and of TAXII discovery are built on it.
    pub public_base_url: String,
    /// Monthly request quotas per tier; the documented values by default.
    pub quotas: Quotas,
    /// The scheduled cluster jobs: vendor refresh, transparency publication, NSRL releases.
    pub jobs: jobs::JobSettings,
    /// Timeouts and caps on client connections.
    pub connections: ConnectionLimits,
    /// The relying party (domain and console origin) passkeys are bound to.
    pub relying_party: auth::mfa::RelyingParty,
    /// Where the hashlookup-compatible routes are served: starts and ends with `/`.
    pub hashlookup_prefix: String,
    /// How often the upkeep loop asks the cluster jobs whether they are due (a minute;
    /// shorter only where a test needs quick turns).
    pub jobs_every: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            trusted_proxies: Vec::new(),
            feed_cache_ttl: Duration::from_secs(3600),
            public_base_url: "http://127.0.0.1:8080".into(),
            quotas: Quotas::default(),
            jobs: jobs::JobSettings::default(),
            connections: ConnectionLimits::default(),
            relying_party: auth::mfa::RelyingParty::default(),
            hashlookup_prefix: routes::hashlookup::DECLARED_PREFIX.to_owned(),
            jobs_every: Duration::from_secs(60),
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
    /// Second factors: TOTP, recovery codes, passkeys.
    pub mfa: Arc<auth::mfa::Mfa>,
    pub usage: Arc<Usage>,
    pub limiter: Arc<Limiter>,
    /// Refused credentials: counts and their own limits.
    pub auth_failures: Arc<guard::AuthFailures>,
    pub clock: Arc<dyn Clock>,
    pub feed_cache: Arc<FeedCache>,
    pub stats_cache: Arc<routes::intel::StatsCache>,
    /// The offline bundle, built on demand and kept until its inputs change.
    pub bundle_cache: Arc<routes::bundle::BundleCache>,
    pub log_key: Arc<LogKey>,
    pub trees: Arc<routes::transparency::TreeCache>,
    pub settings: Arc<Settings>,
    /// The NSRL reference corpus, when one is configured (the classifier holds it too).
    pub corpus: Option<Arc<corpus::Corpus>>,
    /// Classifies lookups; holds the in-memory vendor index.
    pub classifier: lookup::Classifier,
    /// What the cluster jobs run with: the same store, clock, log key and corpus as above.
    pub jobs: jobs::JobContext,
    /// The cluster jobs of this process, started by [`maintain`].
    pub runner: Arc<jobs::Runner>,
    /// Request, lookup and job counters for the metrics listener.
    pub metrics: Arc<metrics::Metrics>,
    /// Set once the process was told to stop: `/readyz` answers 503 from then on.
    pub draining: Arc<std::sync::atomic::AtomicBool>,
    /// Whether the database answers, for `/readyz` and the metrics (briefly cached).
    pub database: Arc<readiness::DatabaseCheck>,
    /// Package name analysis over the popular-name lists.
    pub packages: Arc<services::packages::PackageIntel>,
    /// Which records name which TAXII object, for the objects by id.
    pub taxii_objects: Arc<services::taxii::ObjectIndex>,
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
        let log_key = Arc::new(log_key);
        let jobs = jobs::JobContext::new(
            store.clone(),
            clock.clone(),
            settings.jobs.clone(),
            log_key.clone(),
        );
        let mfa = Arc::new(auth::mfa::Mfa::new(
            store.clone(),
            credentials.hasher().clone(),
            &settings.relying_party,
            clock.clone(),
        ));
        Self {
            mfa,
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
            bundle_cache: Arc::default(),
            log_key,
            trees: Arc::default(),
            corpus: None,
            jobs,
            runner: Arc::default(),
            metrics: Arc::default(),
            draining: Arc::default(),
            database: Arc::default(),
            packages: Arc::default(),
            taxii_objects: Arc::default(),
            settings: Arc::new(settings),
        }
    }
}

impl AppState {
    /// Compares package names with these popular-name lists instead of the shipped ones
    /// (per ecosystem; `knowngood packages refresh-popular` writes them).
    pub fn with_popular_lists(mut self, lists: Vec<packages::PopularList>) -> Self {
        if !lists.is_empty() {
            self.packages = Arc::new(services::packages::PackageIntel::with_lists(lists));
        }
        self
    }

    /// Keeps the vendor lookup index's generations in `dir`, so that a restart maps the
    /// newest one instead of scanning every record (without it: a temporary directory).
    pub fn with_vendor_generations(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.classifier = self.classifier.with_generation_dir(dir);
        self
    }

    /// Serves `known_file` results from this corpus.
    pub fn with_corpus(mut self, corpus: Arc<corpus::Corpus>) -> Self {
        self.classifier = self.classifier.with_corpus(Arc::clone(&corpus));
        self.jobs = self.jobs.with_corpus(corpus.clone());
        self.corpus = Some(corpus);
        self
    }
}

/// The whole application: every registered route behind its own rule, plus the JSON
/// answers for unknown routes and methods, over-large request heads and slow bodies, a
/// last-resort panic guard, and the headers every answer carries. Doubled slashes under the
/// hashlookup prefix are collapsed before routing.
pub fn router(state: AppState) -> Router {
    let body_read_timeout = state.settings.connections.body_read_timeout;
    let prefix: Arc<str> = state.settings.hashlookup_prefix.as_str().into();
    let app = routes::api()
        .into_router(&state)
        .merge(console::router(&state))
        .merge(routes::hashlookup::unkeyed(&state.settings))
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
        .with_state(state);
    Router::new().fallback_service(tower::ServiceExt::map_request(
        app,
        move |request: axum::extract::Request| {
            routes::hashlookup::collapse_slashes(request, &prefix)
        },
    ))
}

/// Background upkeep until `shutdown` resolves: notice credential and settings changes
/// made by other replicas and pick up a new reference-corpus generation (every 0.5 s; the
/// loading runs beside the loop, so a large generation never delays the other polls), write
/// batched usage counts (every half second, in a task of its own) and re-read month totals (every 10 s), prune idle
/// rate-limit buckets (every minute) and start the cluster jobs that are due (every
/// [`Settings::jobs_every`], a minute by default; see [`jobs::Runner`]). Flushes usage once
/// more on the way out.
pub async fn maintain(state: AppState, shutdown: impl Future<Output = ()>) {
    let mut epoch = tokio::time::interval(Duration::from_millis(500));
    // Usage counts are written in a task of their own, so a slow poll or job start never
    // holds them back: a crash (kill -9) loses at most the last second's counts.
    let (stop_flusher, flusher_stopped) = tokio::sync::oneshot::channel::<()>();
    let usage_flusher = tokio::spawn(flush_usage_every(
        state.usage.clone(),
        USAGE_FLUSH_EVERY,
        flusher_stopped,
    ));
    let mut totals = tokio::time::interval(Duration::from_secs(10));
    let mut prune = tokio::time::interval(Duration::from_secs(60));
    let mut due = tokio::time::interval(state.settings.jobs_every.max(Duration::from_millis(100)));
    due.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Reading `CURRENT` is one small file: a switch reaches every replica within a second.
    let mut corpus = tokio::time::interval(Duration::from_millis(500));
    corpus.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let reloading = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The first tick starts the index (maps its newest generation or writes one); later
    // ones merge a large delta or re-verify a share of the stored HMACs, so tampering with
    // a row shows on /public/status even when no lookup names it.
    let mut reindex = tokio::time::interval(Duration::from_secs(600));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = epoch.tick() => {
                match state.credentials.poll_epoch().await {
                    // Settings changes move the same epoch.
                    Ok(true) => {
                        if let Err(e) = state.admin.reload_settings().await {
                            tracing::warn!(error = %e, "platform settings reload failed");
                        }
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, "credential epoch poll failed"),
                }
                if let Err(e) = state.store.poll_records_epoch().await {
                    tracing::warn!(error = %e, "records epoch poll failed");
                }
                state.classifier.catch_up();
                state.taxii_objects.follow(&state.store);
            }
            _ = reindex.tick() => state.classifier.upkeep(),
            _ = totals.tick() => {
                if let Err(e) = state.usage.refresh_totals().await {
                    tracing::warn!(error = %e, "usage totals refresh failed");
                }
            }
            _ = corpus.tick() => {
                use std::sync::atomic::Ordering;
                if !reloading.swap(true, Ordering::AcqRel) {
                    let (jobs, reloading) = (state.jobs.clone(), reloading.clone());
                    tokio::spawn(async move {
                        jobs::corpus_release::reload(&jobs).await;
                        reloading.store(false, Ordering::Release);
                    });
                }
            }
            _ = prune.tick() => {
                let now = state.clock.now();
                state.limiter.prune(now.timestamp_millis());
                // Ended sessions are kept a day (their tokens keep answering "signed out").
                if let Err(e) = state.store.prune_sessions(now - chrono::Duration::days(1)).await {
                    tracing::warn!(error = %e, "pruning ended sessions failed");
                }
            }
            _ = due.tick() => {
                // Runs go on in their own tasks.
                drop(state.runner.start_due(&state.jobs, state.clock.now()).await);
            }
        }
    }
    // Stopped between flushes, never inside one, so no taken counts are dropped.
    let _ = stop_flusher.send(());
    let _ = usage_flusher.await;
    if let Err(e) = state.usage.flush().await {
        tracing::error!(error = %e, "final usage flush failed");
    }
}

/// How often counted requests reach the store; what a crash can lose.
const USAGE_FLUSH_EVERY: Duration = Duration::from_millis(500);

/// Writes pending usage counts every `every` until `stop`; a failed write keeps its counts
/// for the next one.
async fn flush_usage_every(
    usage: Arc<Usage>,
    every: Duration,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    // Nothing is counted before the first request: the first flush is one period in.
    let mut flush = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = flush.tick() => {}
        }
        if let Err(e) = usage.flush().await {
            tracing::warn!(error = %e, "usage flush failed; will retry");
        }
    }
}

/// Under `/taxii2/`, answers are TAXII error bodies.
fn is_taxii(uri: &axum::http::Uri) -> bool {
    uri.path().starts_with("/taxii2/")
}

async fn not_found(uri: axum::http::Uri) -> axum::response::Response {
    if is_taxii(&uri) {
        return routes::taxii::no_such_resource();
    }
    ApiError(Error::NotFound("no such route".into())).into_response()
}

async fn method_not_allowed(uri: axum::http::Uri) -> axum::response::Response {
    if is_taxii(&uri) {
        return routes::taxii::read_only();
    }
    error::HttpRefusal::MethodNotAllowed.response("this route does not accept that method")
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
