//! Inclusion-proof latency against a baseline measured in the same run.
//!
//! Loads N current records into a fresh SQLite store, publishes today's transparency root
//! over them, starts the real server on 127.0.0.1:0 and alternates, sequentially over one
//! keep-alive connection, `GET /healthz` and
//! `GET /public/transparency/{today}/proof?sha256=<random member>`. Reports the medians and
//! the ratio proof/healthz; the goal is at most 2.0. Also reports what the proofs cost in
//! memory: the process's resident set (`VmRSS`) and its live heap before the first proof
//! and after the last, and the heap's peak in between (the server runs in this process).
//!
//! ```text
//! cargo run --release -p server --example bench_proof -- [--records N] [--requests M]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

mod support;
use support::{counting, splitmix, summarize, us};

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use jobs::LogKey;
use jobs::publish::publish_day;
use model::{Arch, Clock, NewRecord, Platform, RecordSigner, SystemClock};

const GOAL: f64 = 2.0;
const BATCH: usize = 5000;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    records: u64,
    requests: usize,
}

fn parse_args() -> Result<Args, BoxError> {
    let mut args = Args {
        records: 100_000,
        requests: 2000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--records" => args.records = value()?.replace('_', "").parse()?,
            "--requests" => args.requests = value()?.replace('_', "").parse()?,
            "-h" | "--help" => {
                println!("bench_proof [--records N (100000)] [--requests M (2000)]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    if args.records == 0 || args.requests == 0 {
        return Err("--records and --requests must be positive".into());
    }
    Ok(args)
}

/// The SHA-256 (64 lowercase hex) of record `i`.
fn sha256_of(i: u64) -> String {
    let mut state = splitmix(i ^ 0x7072_6f6f_665f_6265);
    let mut out = String::with_capacity(64);
    for _ in 0..4 {
        state = splitmix(state);
        out.push_str(&format!("{state:016x}"));
    }
    out
}

const PLATFORMS: &[(Platform, Arch)] = &[
    (Platform::Windows, Arch::Amd64),
    (Platform::Windows, Arch::Arm64),
    (Platform::Linux, Arch::Amd64),
    (Platform::Linux, Arch::Arm64),
    (Platform::Darwin, Arch::Arm64),
    (Platform::Universal, Arch::Universal),
];

/// Record `i`: its own executable, so every record is current.
fn record(i: u64) -> NewRecord {
    let (platform, arch) = PLATFORMS[(i % PLATFORMS.len() as u64) as usize];
    let h = splitmix(i);
    let executable_name = format!("tool-{i}-{}-{}.bin", platform.as_str(), arch.as_str());
    NewRecord {
        vendor: format!("Vendor {}", i % 40),
        source_url: format!("https://downloads.example/{executable_name}"),
        executable_name,
        version: format!("{}.{}.{}", 1 + h % 20, (h >> 8) % 30, (h >> 16) % 9),
        platform,
        arch,
        hash_sha256: sha256_of(i),
        hash_sha1: None,
        hash_md5: None,
        download_verified: true,
        sig_signer: None,
        sig_issuer: None,
        sig_serial: None,
        sig_thumbprint: None,
        size: None,
    }
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = splitmix(self.0);
        self.0 % n
    }
}

/// The process's resident set size in bytes (`VmRSS` of `/proc/self/status`; 0 where that
/// file does not exist).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Times one GET; the body is returned for checks made outside the timed span.
async fn timed_get(
    client: &reqwest::Client,
    url: &str,
) -> Result<(Duration, bytes::Bytes), BoxError> {
    let start = Instant::now();
    let response = client.get(url).send().await?;
    let status = response.status();
    let body = response.bytes().await?;
    let elapsed = start.elapsed();
    if !status.is_success() {
        return Err(format!("GET {url}: {status}: {}", String::from_utf8_lossy(&body)).into());
    }
    Ok((elapsed, body))
}

fn check_proof(body: &[u8], sha256: &str, entries: u64) -> Result<(), BoxError> {
    let v: serde_json::Value = serde_json::from_slice(body)?;
    if v["sha256"] != sha256
        || v["verified"] != true
        || v["root_matches"] != true
        || v["tree_size"] != entries
    {
        return Err(format!("unexpected proof for {sha256}: {v}").into());
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = parse_args()?;
    let dir = tempfile::tempdir()?;
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("bench.db").display()
    );
    let store = store::open(&url, RecordSigner::new(b"bench-record-secret")).await?;

    println!(
        "backend: {}; loading {} records",
        store.backend(),
        args.records
    );
    let start = Instant::now();
    let now = Utc::now();
    let mut next = 0u64;
    while next < args.records {
        let end = (next + BATCH as u64).min(args.records);
        store
            .record_many((next..end).map(record).collect(), now)
            .await?;
        next = end;
    }
    let load = start.elapsed();

    let start = Instant::now();
    let log_key_seed = [7u8; 32];
    let today = Utc::now().date_naive();
    let root = publish_day(
        store.as_ref(),
        &LogKey::new(&log_key_seed),
        Utc::now(),
        today,
    )
    .await?;
    let publish = start.elapsed();
    if root.entry_count != args.records {
        return Err(format!("{} leaves for {} records", root.entry_count, args.records).into());
    }

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let state = support::unthrottled_state(
        Arc::clone(&store),
        auth::KeyHasher::new(b"bench-key-secret"),
        Arc::clone(&clock),
        &log_key_seed,
    )?;
    let serving = support::Serving::start(server::router(state)).await?;
    let addr = serving.addr;

    let client = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(1)
        .build()?;
    let healthz = format!("http://{addr}/healthz");
    let proof_url =
        |sha: &str| format!("http://{addr}/public/transparency/{today}/proof?sha256={sha}");
    let mut rng = Rng(splitmix(now.timestamp_micros() as u64));
    let warmup = (args.requests / 5).max(100);

    // Memory from here on is what serving proofs costs (the first one loads the day).
    counting::start();
    let heap_before = counting::live();
    counting::reset_peak();
    let rss_before = resident_bytes();
    let first = Instant::now();
    let sha = sha256_of(rng.below(args.records));
    let (_, body) = timed_get(&client, &proof_url(&sha)).await?;
    check_proof(&body, &sha, root.entry_count)?;
    let first = first.elapsed();

    for _ in 0..warmup {
        timed_get(&client, &healthz).await?;
        let sha = sha256_of(rng.below(args.records));
        let (_, body) = timed_get(&client, &proof_url(&sha)).await?;
        check_proof(&body, &sha, root.entry_count)?;
    }
    let mut health_samples = Vec::with_capacity(args.requests);
    let mut proof_samples = Vec::with_capacity(args.requests);
    let started = Instant::now();
    for _ in 0..args.requests {
        let sha = sha256_of(rng.below(args.records));
        let url = proof_url(&sha);
        health_samples.push(timed_get(&client, &healthz).await?.0);
        let (elapsed, body) = timed_get(&client, &url).await?;
        proof_samples.push(elapsed);
        check_proof(&body, &sha, root.entry_count)?;
    }
    let wall = started.elapsed();
    let rss_after = resident_bytes();
    let heap_after = counting::live();
    let heap_peak = counting::peak();

    // Diagnostics, after the measured run: `GET /public/transparency/{today}` (the same
    // date check and root read, no tree) alternated with /healthz, and the one database
    // read a proof makes, without HTTP.
    let day_url = format!("http://{addr}/public/transparency/{today}");
    let mut day_samples = Vec::with_capacity(args.requests);
    let mut day_health = Vec::with_capacity(args.requests);
    for _ in 0..args.requests {
        day_health.push(timed_get(&client, &healthz).await?.0);
        day_samples.push(timed_get(&client, &day_url).await?.0);
    }
    let mut root_samples = Vec::with_capacity(args.requests);
    for _ in 0..args.requests {
        let start = Instant::now();
        store.root(today).await?;
        root_samples.push(start.elapsed());
    }

    serving.stop().await?;
    store.close().await;

    let h = summarize(health_samples);
    let p = summarize(proof_samples);
    let r = summarize(root_samples);
    let dh = summarize(day_health);
    let dy = summarize(day_samples);
    let ratio = p.median.as_secs_f64() / h.median.as_secs_f64();
    println!(
        "records:  {} ({:.1} s to load, {:.1} s to publish {today}: {} leaves)",
        args.records,
        load.as_secs_f64(),
        publish.as_secs_f64(),
        root.entry_count
    );
    println!(
        "first proof (loads the day): {:.1} ms",
        first.as_secs_f64() * 1e3
    );
    println!(
        "memory over the proofs: resident {} -> {} (+{}); live heap +{}, peak +{}",
        mib(rss_before),
        mib(rss_after),
        mib(rss_after.saturating_sub(rss_before)),
        mib(heap_after.saturating_sub(heap_before) as u64),
        mib(heap_peak.saturating_sub(heap_before) as u64),
    );
    println!(
        "requests: {} of each, alternating, after {warmup} warm-up pairs ({:.1} s)",
        args.requests,
        wall.as_secs_f64()
    );
    println!(
        "GET /healthz                         median {:>10}  p90 {:>10}  p99 {:>10}",
        us(h.median),
        us(h.p90),
        us(h.p99)
    );
    println!(
        "GET /public/transparency/{{d}}/proof   median {:>10}  p90 {:>10}  p99 {:>10}",
        us(p.median),
        us(p.p90),
        us(p.p99)
    );
    println!(
        "  GET /public/transparency/{{d}}     median {:>10}  (healthz {:>10} in that loop; measured separately)",
        us(dy.median),
        us(dh.median)
    );
    println!(
        "  store.root(day) alone              median {:>10}  p90 {:>10}  p99 {:>10}  (measured separately)",
        us(r.median),
        us(r.p90),
        us(r.p99)
    );
    println!(
        "ratio proof/healthz median: {ratio:.2} (goal <= {GOAL:.1}): {}",
        if ratio <= GOAL { "MET" } else { "MISSED" }
    );
    Ok(())
}
