//! What the server benchmarks share: the binary's allocator, summarising latency samples,
//! an application without rate limits.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// As in the `knowngood` binary: glibc's allocator spends a large share of a lookup in
/// `malloc` once the heap has been through an index build. Wrapped to count live bytes
/// when a benchmark asks for it ([`counting`]); otherwise the wrapper only reads a flag.
#[global_allocator]
static ALLOCATOR: Counting = Counting;

pub struct Counting;

static COUNT: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to mimalloc unchanged; the counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is mimalloc's.
        let p = unsafe { mimalloc::MiMalloc.alloc(layout) };
        if !p.is_null() && COUNT.load(Ordering::Relaxed) {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() && COUNT.load(Ordering::Relaxed) {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) };
        if COUNT.load(Ordering::Relaxed) {
            shrank(layout.size());
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() && COUNT.load(Ordering::Relaxed) {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}

fn shrank(by: usize) {
    let _ = LIVE.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_sub(by))
    });
}

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

/// Live heap bytes allocated while counting, and their peak since [`reset_peak`]. Counting
/// starts at the first call: bytes allocated before and freed after are not subtracted
/// (the counter stops at zero), so measure growth between two readings.
#[allow(dead_code)] // only some benchmarks measure memory
pub mod counting {
    use super::{COUNT, LIVE, Ordering, PEAK};

    pub fn start() {
        COUNT.store(true, Ordering::SeqCst);
    }

    pub fn live() -> usize {
        LIVE.load(Ordering::SeqCst)
    }

    pub fn reset_peak() {
        PEAK.store(LIVE.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    pub fn peak() -> usize {
        PEAK.load(Ordering::SeqCst)
    }
}

#[allow(dead_code)] // not every benchmark measures latency
pub struct Summary {
    #[allow(dead_code)] // not every benchmark prints these
    pub count: usize,
    #[allow(dead_code)]
    pub max: Duration,
    pub median: Duration,
    pub p90: Duration,
    pub p99: Duration,
}

/// Median (mean of the middle two for an even count) and nearest-rank p90/p99.
#[allow(dead_code)] // not every benchmark measures latency
pub fn summarize(mut samples: Vec<Duration>) -> Summary {
    samples.sort_unstable();
    let count = samples.len();
    let n = samples.len().max(1);
    samples.resize(n, Duration::ZERO);
    let at = |q: f64| samples[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
    let median = if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2
    };
    Summary {
        count,
        max: samples[n - 1],
        median,
        p90: at(0.90),
        p99: at(0.99),
    }
}

/// Microseconds, right-aligned for tables.
#[allow(dead_code)] // not every benchmark measures latency
pub fn us(d: Duration) -> String {
    format!("{:>7.1} µs", d.as_secs_f64() * 1e6)
}

/// The real application with every per-minute limit raised so that a run is not throttled
/// (the limiter and quota checks still run on every request). Background upkeep
/// (`server::maintain`) is not started: it does no per-request work.
pub fn unthrottled_state(
    store: std::sync::Arc<dyn store::Store>,
    keys: auth::KeyHasher,
    clock: std::sync::Arc<dyn model::Clock>,
    log_seed: &[u8; 32],
) -> Result<server::AppState, Box<dyn std::error::Error + Send + Sync>> {
    let credentials = auth::credentials::Credentials::new(
        store.clone(),
        keys,
        auth::jwt::JwtKeys::from_pkcs8(&[auth::jwt::generate_rsa_pkcs8()?])?,
        clock.clone(),
    );
    // Limits out of reach: the benchmarks measure the work, not the limiter's refusals.
    let settings = testkit::test_settings();
    Ok(server::AppState::new(
        store,
        credentials,
        auth::limits::Limiter::Local(auth::limits::LocalLimiter::default()),
        clock,
        settings,
        jobs::LogKey::new(log_seed),
    ))
}

/// SplitMix64: deterministic, well-spread values for synthetic benchmark data.
#[allow(dead_code)] // bench_auth needs no synthetic data
pub fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The real server on 127.0.0.1 (a port of the system's choosing) until [`Serving::stop`].
#[allow(dead_code)] // not every benchmark serves HTTP
pub struct Serving {
    pub addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

#[allow(dead_code)]
impl Serving {
    pub async fn start(app: axum::Router) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server::serve(listener, app, async {
            let _ = stopped.await;
        }));
        Ok(Self { addr, stop, task })
    }

    /// Stops accepting, lets requests in flight finish, and returns the server's outcome.
    pub async fn stop(self) -> std::io::Result<()> {
        let _ = self.stop.send(());
        self.task.await.map_err(std::io::Error::other)?
    }
}
