//! Prometheus metrics, served on a listener of their own (`metrics_listen`), so scrapes
//! never count against the API's limits and the numbers never show on the public address.
//!
//! Request counters and latency histograms are per registered route (its template, never
//! the raw path, so labels stay bounded), kept in atomics indexed by the route's position
//! in [`ROUTES`]; everything else (vendors, corpus, leases, database and Redis health) is
//! read when scraped.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use model::Classification;

use crate::AppState;
use crate::api::Status;
use crate::routing::ROUTES;
use crate::status::{ErrorDetail, system_status};

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

#[derive(Default)]
struct RouteStats {
    /// By status class: 1xx to 5xx.
    by_class: [AtomicU64; 5],
    /// Requests at or under each bucket's bound (not cumulative; summed when rendered).
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    micros: AtomicU64,
}

/// Counters the request path updates.
pub struct Metrics {
    routes: Vec<RouteStats>,
    lookups: [AtomicU64; 3],
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            routes: ROUTES.iter().map(|_| RouteStats::default()).collect(),
            lookups: Default::default(),
        }
    }
}

fn lookup_slot(c: Classification) -> usize {
    match c {
        Classification::KnownVendorRelease => 0,
        Classification::KnownFile => 1,
        Classification::Unknown => 2,
    }
}

const LOOKUP_LABELS: [&str; 3] = ["known_vendor_release", "known_file", "unknown"];

impl Metrics {
    /// One answered request of route number `route`.
    pub(crate) fn observe(&self, route: usize, status: u16, elapsed: Duration) {
        let Some(stats) = self.routes.get(route) else {
            return;
        };
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        stats.by_class[class].fetch_add(1, Relaxed);
        let seconds = elapsed.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|b| seconds <= *b) {
            stats.buckets[i].fetch_add(1, Relaxed);
        }
        stats.count.fetch_add(1, Relaxed);
        stats.micros.fetch_add(
            u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            Relaxed,
        );
    }

    /// One classified hash of a lookup.
    pub(crate) fn lookup(&self, classification: Classification) {
        self.lookups[lookup_slot(classification)].fetch_add(1, Relaxed);
    }
}

/// A document in the text exposition format 0.0.4, written family by family.
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    /// One sample; `labels` is what goes between the braces, empty for none.
    fn sample(&mut self, name: &str, labels: &str, value: impl std::fmt::Display) {
        let _ = if labels.is_empty() {
            writeln!(self.0, "{name} {value}")
        } else {
            writeln!(self.0, "{name}{{{labels}}} {value}")
        };
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Every metric, as Prometheus scrapes it.
pub async fn render(state: &AppState) -> String {
    let mut out = Exposition(String::with_capacity(16 * 1024));
    http_requests(&mut out, &state.metrics);
    lookups(&mut out, &state.metrics);
    let status = system_status(state, ErrorDetail::Class).await;
    let database_up = dependencies(&mut out, state, &status).await;
    vendor_records(&mut out, state, &status);
    jobs(&mut out, state, database_up).await;
    // Not while the database is down: the metrics answer without waiting for it.
    if database_up && let Ok(progress) = state.store.compaction_progress().await {
        record_compaction(&mut out, progress);
    }
    out.family(
        "knowngood_failed_authentications_total",
        "counter",
        "Requests refused for a missing or invalid credential.",
    );
    out.sample(
        "knowngood_failed_authentications_total",
        "",
        state.auth_failures.refused.load(Relaxed),
    );
    out.0
}

/// Per route: answers by status class, and the latency histogram.
fn http_requests(out: &mut Exposition, metrics: &Metrics) {
    const REQUESTS: &str = "knowngood_http_requests_total";
    out.family(
        REQUESTS,
        "counter",
        "Requests answered, by route and status class.",
    );
    for (spec, stats) in ROUTES.iter().zip(&metrics.routes) {
        let route = format!("method=\"{}\",route=\"{}\"", spec.method, label(&spec.path));
        for (i, n) in stats.by_class.iter().enumerate() {
            let n = n.load(Relaxed);
            if n > 0 {
                out.sample(REQUESTS, &format!("{route},status=\"{}xx\"", i + 1), n);
            }
        }
    }
    const DURATION: &str = "knowngood_http_request_duration_seconds";
    out.family(
        DURATION,
        "histogram",
        "Time from routing to the answer, by route.",
    );
    for (spec, stats) in ROUTES.iter().zip(&metrics.routes) {
        let count = stats.count.load(Relaxed);
        if count == 0 {
            continue;
        }
        let labels = format!("method=\"{}\",route=\"{}\"", spec.method, label(&spec.path));
        let bucket = format!("{DURATION}_bucket");
        let mut cumulative = 0;
        for (bound, n) in BUCKETS.iter().zip(&stats.buckets) {
            cumulative += n.load(Relaxed);
            out.sample(&bucket, &format!("{labels},le=\"{bound}\""), cumulative);
        }
        out.sample(&bucket, &format!("{labels},le=\"+Inf\""), count);
        let seconds = stats.micros.load(Relaxed) as f64 / 1e6;
        out.sample(&format!("{DURATION}_sum"), &labels, seconds);
        out.sample(&format!("{DURATION}_count"), &labels, count);
    }
}

fn lookups(out: &mut Exposition, metrics: &Metrics) {
    const RESULTS: &str = "knowngood_lookup_results_total";
    out.family(
        RESULTS,
        "counter",
        "Hashes classified by lookups, by classification.",
    );
    for (name, n) in LOOKUP_LABELS.iter().zip(&metrics.lookups) {
        out.sample(
            RESULTS,
            &format!("classification=\"{name}\""),
            n.load(Relaxed),
        );
    }
}

/// The overall status and what answers depend on: the database, Redis, the reference
/// corpus and the vendor index. Returns whether the database answered.
async fn dependencies(out: &mut Exposition, state: &AppState, status: &Status) -> bool {
    out.family(
        "knowngood_up",
        "gauge",
        "Overall status: 1 ok, 0.5 degraded, 0 down.",
    );
    let overall = match status.status {
        "ok" => 1.0,
        "degraded" => 0.5,
        _ => 0.0,
    };
    out.sample("knowngood_up", "", overall);
    out.family(
        "knowngood_database_up",
        "gauge",
        "1 when the database answers.",
    );
    let database_up = state.database.up(state.store.as_ref()).await;
    out.sample("knowngood_database_up", "", u8::from(database_up));
    let pool = state.store.pool_stats();
    const CONNECTIONS: &str = "knowngood_database_connections";
    out.family(
        CONNECTIONS,
        "gauge",
        "Connections of the database pool, by state (idle, in use) and its cap (max).",
    );
    out.sample(CONNECTIONS, "state=\"idle\"", pool.idle);
    out.sample(
        CONNECTIONS,
        "state=\"in_use\"",
        pool.size.saturating_sub(pool.idle),
    );
    out.sample(CONNECTIONS, "state=\"max\"", pool.max);
    out.family(
        "knowngood_database_unavailable_total",
        "counter",
        "Statements that failed because the database could not be reached (no connection within the acquire timeout, connection refused or lost).",
    );
    out.sample(
        "knowngood_database_unavailable_total",
        "",
        store::unavailable_errors(),
    );
    if let Some(up) = state.limiter.redis_up().await {
        out.family(
            "knowngood_redis_up",
            "gauge",
            "1 when Redis (shared rate limits) answers.",
        );
        out.sample("knowngood_redis_up", "", u8::from(up));
    }
    if let Some(n) = state.limiter.fallbacks() {
        out.family(
            "knowngood_rate_limit_fallbacks_total",
            "counter",
            "Rate-limit checks applied per replica because Redis could not answer.",
        );
        out.sample("knowngood_rate_limit_fallbacks_total", "", n);
    }
    out.family(
        "knowngood_reference_corpus_entries",
        "gauge",
        "SHA-256 entries of the live reference corpus generation.",
    );
    out.sample(
        "knowngood_reference_corpus_entries",
        "",
        status.components.reference_corpus.entries,
    );
    out.family(
        "knowngood_reference_corpus_refused",
        "gauge",
        "1 while CURRENT names a generation that failed its checks (the previous one stays live).",
    );
    let refused = state.corpus.as_ref().and_then(|c| c.refused()).is_some();
    out.sample("knowngood_reference_corpus_refused", "", u8::from(refused));
    let index = state.classifier.index();
    for (name, help, value) in [
        (
            "knowngood_vendor_index_reverified_total",
            "Vendor records whose stored HMAC the lookup index's rolling re-verification read again.",
            index.reverified(),
        ),
        (
            "knowngood_vendor_index_reverify_failures_total",
            "Vendor records the rolling re-verification found failing their HMAC.",
            index.reverify_failures(),
        ),
        (
            "knowngood_vendor_index_merges_total",
            "Vendor lookup generations this process wrote.",
            index.merges(),
        ),
    ] {
        out.family(name, "counter", help);
        out.sample(name, "", value);
    }
    database_up
}

/// Records per vendor, failing vendors, integrity failures and the records epoch.
fn vendor_records(out: &mut Exposition, state: &AppState, status: &Status) {
    out.family(
        "knowngood_vendor_records",
        "gauge",
        "Current records per vendor.",
    );
    for v in &status.vendors {
        let vendor = format!("vendor=\"{}\"", label(&v.vendor));
        out.sample("knowngood_vendor_records", &vendor, v.records);
    }
    out.family(
        "knowngood_vendor_failing",
        "gauge",
        "1 when the vendor's last refresh failed.",
    );
    for v in &status.vendors {
        let vendor = format!("vendor=\"{}\"", label(&v.vendor));
        out.sample(
            "knowngood_vendor_failing",
            &vendor,
            u8::from(v.status == "failing"),
        );
    }
    out.family(
        "knowngood_integrity_failures_total",
        "counter",
        "Vendor records whose HMAC failed verification since start.",
    );
    out.sample(
        "knowngood_integrity_failures_total",
        "",
        status.integrity_failures,
    );
    out.family(
        "knowngood_records_epoch",
        "gauge",
        "The records epoch this replica has seen (moves with every write).",
    );
    out.sample("knowngood_records_epoch", "", state.store.records_epoch());
}

/// Runs and time of each scheduled job in this process, and the leases held now.
async fn jobs(out: &mut Exposition, state: &AppState, database_up: bool) {
    const RUNS: &str = "knowngood_job_runs_total";
    out.family(
        RUNS,
        "counter",
        "Runs of each scheduled job in this process, by outcome.",
    );
    for (job, stats) in state.runner.stats() {
        let ok = stats.succeeded.load(Relaxed);
        out.sample(RUNS, &format!("job=\"{job}\",outcome=\"ok\""), ok);
        let failed = stats.failed.load(Relaxed);
        out.sample(RUNS, &format!("job=\"{job}\",outcome=\"failed\""), failed);
    }
    const SECONDS: &str = "knowngood_job_run_seconds_total";
    out.family(
        SECONDS,
        "counter",
        "Time spent in runs of each job in this process.",
    );
    for (job, stats) in state.runner.stats() {
        let seconds = stats.micros.load(Relaxed) as f64 / 1e6;
        out.sample(SECONDS, &format!("job=\"{job}\""), seconds);
    }
    const LEASES: &str = "knowngood_job_lease_held";
    out.family(
        LEASES,
        "gauge",
        "Unexpired, unfinished job leases and the replica run holding each.",
    );
    // Not while the database is down: the metrics answer without waiting for it.
    if database_up && let Ok(leases) = state.store.recent_leases(50).await {
        let now = state.clock.now();
        for l in leases
            .iter()
            .filter(|l| l.finished_at.is_none() && l.expires_at > now)
        {
            let held = format!(
                "lease=\"{}\",holder=\"{}\"",
                label(&l.job),
                label(&l.holder)
            );
            out.sample(LEASES, &held, 1);
        }
    }
}

/// How far the `records.compact` job's rewrite of older vendor rows has gone.
fn record_compaction(out: &mut Exposition, progress: store::CompactionProgress) {
    const WALKED: &str = "knowngood_record_compaction_walked_ratio";
    out.family(
        WALKED,
        "gauge",
        "Share of the vendor records the rewrite of rows stored in an older form has walked (1 once done).",
    );
    out.sample(WALKED, "", progress.walked);
    const REWRITTEN: &str = "knowngood_record_compaction_rewritten_total";
    out.family(
        REWRITTEN,
        "counter",
        "Vendor records rewritten from an older stored form, by every replica.",
    );
    out.sample(REWRITTEN, "", progress.rewritten);
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        render(&state).await,
    )
}

/// The metrics listener's application: `GET /metrics` only.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// Serves [`router`] on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, state: AppState) {
    if let Err(e) = axum::serve(listener, router(state)).await {
        tracing::error!(error = %e, "metrics listener stopped");
    }
}
