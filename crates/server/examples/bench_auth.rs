//! The cost of authentication against a baseline measured in the same run.
//!
//! Starts the real server on 127.0.0.1:0 over a SQLite store in a temporary directory (a
//! few records, one analyst key on a teams account, per-minute limits raised so the run is
//! not throttled; the limiter, usage counting and quota check still run on every request;
//! the background upkeep runs as in production) and alternates, sequentially over one
//! keep-alive connection:
//!
//! - `GET /healthz` (no credential: the baseline),
//! - `GET /api/v1/intel/stats` with `X-API-Key`,
//! - `GET /api/v1/intel/stats` with `Authorization: Bearer <JWT>`.
//!
//! Prints median, p90 and p99 of each, and the ratios of the medians stats_key/healthz and
//! stats_jwt/healthz; the goal is at most 1.5. Then, without HTTP, the time of each step of
//! the authenticated path, to show where the difference goes.
//!
//! ```text
//! cargo run --release -p server --example bench_auth -- [--requests M (3000)]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

mod support;
use support::{summarize, us};

use std::sync::Arc;
use std::time::{Duration, Instant};

use model::TenantKind;
use model::{Arch, Clock, NewRecord, Platform, RecordSigner, Role, SystemClock, Tier};
use store::NewApiKey;

const GOAL: f64 = 1.5;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn parse_args() -> Result<usize, BoxError> {
    let mut requests = 3000;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--requests" => {
                requests = it
                    .next()
                    .ok_or("--requests needs a value")?
                    .replace('_', "")
                    .parse()?;
            }
            "-h" | "--help" => {
                println!("bench_auth [--requests M (3000)]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    if requests == 0 {
        return Err("--requests must be positive".into());
    }
    Ok(requests)
}

/// One timed GET; the body is read inside the timed span, the status checked outside it.
async fn timed(
    client: &reqwest::Client,
    url: &str,
    header: Option<(&str, &str)>,
) -> Result<Duration, BoxError> {
    let mut request = client.get(url);
    if let Some((name, value)) = header {
        request = request.header(name, value);
    }
    let start = Instant::now();
    let response = request.send().await?;
    let status = response.status();
    let body = response.bytes().await?;
    let elapsed = start.elapsed();
    if !status.is_success() {
        return Err(format!("GET {url}: {status}: {}", String::from_utf8_lossy(&body)).into());
    }
    Ok(elapsed)
}

fn record(i: u64) -> NewRecord {
    let hex = |seed: u64, len: usize| {
        let mut out = String::new();
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.push_str(&format!("{x:016x}"));
        }
        out.truncate(len);
        out
    };
    NewRecord {
        vendor: "Bench".into(),
        executable_name: format!("tool{i}.exe"),
        version: "1.0".into(),
        platform: Platform::Windows,
        arch: Arch::Amd64,
        hash_sha256: hex(i + 1, 64),
        hash_sha1: Some(hex(i + 101, 40)),
        hash_md5: Some(hex(i + 201, 32)),
        source_url: format!("https://downloads.example/tool{i}.exe"),
        download_verified: true,
        sig_signer: None,
        sig_issuer: None,
        sig_serial: None,
        sig_thumbprint: None,
        size: None,
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let requests = parse_args()?;
    let dir = tempfile::tempdir()?;
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("bench.db").display()
    );
    let store = store::open(&url, RecordSigner::new(b"bench-record-secret")).await?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    for i in 0..8 {
        store.record(record(i), clock.now()).await?;
    }
    let keys = auth::KeyHasher::new(b"bench-key-secret");
    let issued = keys.issue("bench-auth")?;
    store
        .create_tenant_with_key(
            "bench-auth",
            TenantKind::Customer,
            Tier::Teams,
            NewApiKey {
                key_id: issued.key_id.clone(),
                team_id: "bench-auth".into(),
                key_hash: issued.key_hash.clone(),
                role: Role::Analyst,
                label: "bench".into(),
            },
            clock.now(),
        )
        .await?;

    let state = support::unthrottled_state(Arc::clone(&store), keys, Arc::clone(&clock), &[7; 32])?;
    let serving = support::Serving::start(server::router(state.clone())).await?;
    let addr = serving.addr;
    let (stop_upkeep, upkeep_stopped) = tokio::sync::oneshot::channel::<()>();
    let upkeep = tokio::spawn(server::maintain(state.clone(), async {
        let _ = upkeep_stopped.await;
    }));

    let client = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(1)
        .build()?;
    let healthz = format!("http://{addr}/healthz");
    let stats = format!("http://{addr}/api/v1/intel/stats");
    let token_response: serde_json::Value = client
        .post(format!("http://{addr}/api/v1/auth/token"))
        .header("x-api-key", &issued.key)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let token = token_response["token"]
        .as_str()
        .ok_or("no token in the token response")?
        .to_string();
    let bearer = format!("Bearer {token}");
    let key_header = Some(("x-api-key", issued.key.as_str()));
    let jwt_header = Some(("authorization", bearer.as_str()));

    let warmup = (requests / 10).max(100);
    for _ in 0..warmup {
        timed(&client, &healthz, None).await?;
        timed(&client, &stats, key_header).await?;
        timed(&client, &stats, jwt_header).await?;
    }
    let mut health = Vec::with_capacity(requests);
    let mut with_key = Vec::with_capacity(requests);
    let mut with_jwt = Vec::with_capacity(requests);
    let started = Instant::now();
    for _ in 0..requests {
        health.push(timed(&client, &healthz, None).await?);
        with_key.push(timed(&client, &stats, key_header).await?);
        with_jwt.push(timed(&client, &stats, jwt_header).await?);
    }
    let wall = started.elapsed();

    // Diagnostics without HTTP: each step of the authenticated path, N times.
    let n: u32 = 2000;
    let step = |start: Instant| start.elapsed() / n;
    let start = Instant::now();
    for _ in 0..n {
        state.credentials.from_api_key(&issued.key).await?;
    }
    let api_key_step = step(start);
    let start = Instant::now();
    for _ in 0..n {
        state.credentials.from_bearer(&token).await?;
    }
    let bearer_step = step(start);
    let now = state.clock.now();
    let start = Instant::now();
    for _ in 0..n {
        state
            .usage
            .record("bench-auth", "GET /api/v1/intel/stats", now);
        state
            .usage
            .check_quota("bench-auth", Tier::Teams, now)
            .await?;
    }
    let usage_step = step(start);
    let start = Instant::now();
    for _ in 0..n {
        state
            .limiter
            .check("key:bench:api", 1_000_000, now.timestamp_millis())
            .await?;
    }
    let limiter_step = step(start);

    serving.stop().await?;
    let _ = stop_upkeep.send(());
    upkeep.await?;
    store.close().await;

    let h = summarize(health);
    let k = summarize(with_key);
    let j = summarize(with_jwt);
    let ratio_key = k.median.as_secs_f64() / h.median.as_secs_f64();
    let ratio_jwt = j.median.as_secs_f64() / h.median.as_secs_f64();
    println!(
        "requests: {requests} of each, alternating, after {warmup} warm-up rounds ({:.1} s)",
        wall.as_secs_f64()
    );
    println!("                     median        p90        p99");
    for (name, s) in [
        ("GET /healthz       ", &h),
        ("stats, X-API-Key   ", &k),
        ("stats, Bearer JWT  ", &j),
    ] {
        println!("{name}  {}  {}  {}", us(s.median), us(s.p90), us(s.p99));
    }
    let verdict = |r: f64| if r <= GOAL { "ok" } else { "MISSED" };
    println!(
        "ratio stats_key/healthz: {ratio_key:.2} (goal <= {GOAL}: {})",
        verdict(ratio_key)
    );
    println!(
        "ratio stats_jwt/healthz: {ratio_jwt:.2} (goal <= {GOAL}: {})",
        verdict(ratio_jwt)
    );
    println!("in-process steps (mean of {n}):");
    println!("  credentials.from_api_key     {}", us(api_key_step));
    println!("  credentials.from_bearer      {}", us(bearer_step));
    println!("  usage.record + check_quota   {}", us(usage_step));
    println!("  limiter.check (local)        {}", us(limiter_step));
    Ok(())
}
