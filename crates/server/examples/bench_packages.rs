//! Package analysis latency against `GET /healthz` in the same run, and the memory an SBOM
//! scan takes.
//!
//! Starts the real server on 127.0.0.1:0 over a SQLite store (one auditor key on a teams
//! account, limits raised) and measures, over one keep-alive connection:
//!
//! - `GET /healthz` (the baseline), alone and while SBOM scans run on other connections,
//! - `POST /api/v1/intel/typosquat` with 200 names (popular names, look-alikes made from
//!   popular names by one edit, and unrelated names),
//! - `POST /api/v1/intel/sbom` with a generated CycloneDX document of about 16 MB (tens of
//!   thousands of npm components with SHA-256 hashes, a few of them look-alikes of popular
//!   names).
//!
//! Prints the medians and their ratios to the healthz median, and the memory of the first
//! SBOM scan as a multiple of the body size, measured two ways: the peak of live heap bytes
//! (a counting allocator over the binary's allocator, from the moment the request is sent
//! until the answer is read) and the growth of the process's resident high-water mark
//! (`VmHWM`, reset just before). Both include the server reading the body; the client
//! sends a shared copy of the document and streams the answer without keeping it.
//!
//! ```text
//! cargo run --release -p server --example bench_packages -- [--requests N (50)] [--scans N (5)]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

mod support;
use support::{counting, splitmix, summarize, us};

use std::sync::Arc;
use std::time::{Duration, Instant};

use model::{Clock, RecordSigner, Role, SystemClock, TenantKind, Tier};
use store::NewApiKey;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const SBOM_BYTES: usize = 16 << 20;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

/// 200 names: a third popular, a third one edit from a popular name, a third unrelated.
fn typosquat_body() -> String {
    let known = packages::KnownNames::shipped();
    let popular = known.popular(packages::Ecosystem::Npm);
    let names: Vec<serde_json::Value> = (0..200u64)
        .map(|i| {
            let r = splitmix(i);
            let base = &popular[(r % 3000) as usize];
            let name = match i % 3 {
                0 => base.clone(),
                1 => {
                    let mut chars: Vec<char> = base.chars().collect();
                    // Never before a scope's `@`.
                    let at = 1 + (r >> 20) as usize % chars.len().max(2).saturating_sub(1);
                    chars.insert(at, 'x');
                    chars.into_iter().collect()
                }
                _ => format!("unrelated-tool-{r:x}"),
            };
            serde_json::json!({"ecosystem": "npm", "name": name})
        })
        .collect();
    serde_json::json!({ "packages": names }).to_string()
}

/// A CycloneDX 1.5 document just under 16 MB.
fn sbom_body() -> (String, usize) {
    let known = packages::KnownNames::shipped();
    let popular = known.popular(packages::Ecosystem::Npm);
    let mut out = String::with_capacity(SBOM_BYTES);
    out.push_str(r#"{"bomFormat":"CycloneDX","specVersion":"1.5","version":1,"components":["#);
    let mut n = 0usize;
    loop {
        let r = splitmix(n as u64);
        // One in a hundred a look-alike of a popular name (`x` inserted), the rest unrelated.
        let name = if n.is_multiple_of(100) {
            let base = &popular[(r % 3000) as usize];
            let at = base.find('/').map_or(1, |i| i + 2).min(base.len());
            format!("{}x{}", &base[..at], &base[at..])
        } else {
            format!("component-{n}-{r:08x}")
        };
        let (major, minor) = (r % 20, r % 7);
        let component = format!(
            r#"{{"type":"library","name":"{name}","version":"1.{major}.{minor}","purl":"pkg:npm/{name}@1.{major}.{minor}","hashes":[{{"alg":"SHA-256","content":"{:016x}{:016x}{:016x}{:016x}"}}]}}"#,
            splitmix(r),
            splitmix(r + 1),
            splitmix(r + 2),
            splitmix(r + 3)
        );
        if out.len() + component.len() + 3 > SBOM_BYTES {
            break;
        }
        if n > 0 {
            out.push(',');
        }
        out.push_str(&component);
        n += 1;
    }
    out.push_str("]}");
    (out, n)
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    body: &bytes::Bytes,
) -> Result<Duration, BoxError> {
    let start = Instant::now();
    let mut response = client
        .post(url)
        .header("x-api-key", key)
        .body(body.clone())
        .send()
        .await?;
    let status = response.status();
    // Streamed and dropped: the answer is not kept by the client.
    let mut first = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if first.len() < 300 {
            first.extend_from_slice(&chunk[..chunk.len().min(300)]);
        }
    }
    let elapsed = start.elapsed();
    if !status.is_success() {
        return Err(format!("POST {url}: {status}: {}", String::from_utf8_lossy(&first)).into());
    }
    Ok(elapsed)
}

async fn get(client: &reqwest::Client, url: &str) -> Result<Duration, BoxError> {
    let start = Instant::now();
    let response = client.get(url).send().await?.error_for_status()?;
    response.bytes().await?;
    Ok(start.elapsed())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    counting::start();
    let requests = arg("--requests", 50);
    let scans = arg("--scans", 5);
    let dir = tempfile::tempdir()?;
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("bench.db").display()
    );
    let store = store::open(&url, RecordSigner::new(b"bench-record-secret")).await?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let keys = auth::KeyHasher::new(b"bench-key-secret");
    let issued = keys.issue("bench-packages")?;
    store
        .create_tenant_with_key(
            "bench-packages",
            TenantKind::Customer,
            Tier::Teams,
            NewApiKey {
                key_id: issued.key_id.clone(),
                team_id: "bench-packages".into(),
                key_hash: issued.key_hash.clone(),
                role: Role::Auditor,
                label: "bench".into(),
            },
            clock.now(),
        )
        .await?;
    let state = support::unthrottled_state(Arc::clone(&store), keys, Arc::clone(&clock), &[9; 32])?;
    let serving = support::Serving::start(server::router(state)).await?;
    let addr = serving.addr;
    let client = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(1)
        .build()?;
    let healthz = format!("http://{addr}/healthz");
    let typosquat = format!("http://{addr}/api/v1/intel/typosquat");
    let sbom = format!("http://{addr}/api/v1/intel/sbom");
    let key = issued.key.as_str();

    let names = bytes::Bytes::from(typosquat_body());
    let (document, components) = sbom_body();
    let document = bytes::Bytes::from(document);
    println!(
        "SBOM: {components} components, {:.1} MiB",
        document.len() as f64 / f64::from(1 << 20)
    );

    // Warm-up (the name indexes are built on first use), then the memory of the first scan.
    for _ in 0..5 {
        get(&client, &healthz).await?;
        post(&client, &typosquat, key, &names).await?;
    }
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let rss_before = status_kib("VmRSS:");
    let live_before = counting::live();
    counting::reset_peak();
    let first_scan = post(&client, &sbom, key, &document).await?;
    let heap_growth = counting::peak().saturating_sub(live_before);
    let rss_growth = status_kib("VmHWM:").saturating_sub(rss_before) * 1024;

    let mut health = Vec::new();
    let mut typo = Vec::new();
    for _ in 0..requests {
        health.push(get(&client, &healthz).await?);
        typo.push(post(&client, &typosquat, key, &names).await?);
    }
    let mut scan = vec![first_scan];
    for _ in 1..scans {
        health.push(get(&client, &healthz).await?);
        scan.push(post(&client, &sbom, key, &document).await?);
    }
    // `GET /healthz` on its own connection while scans run back to back on another.
    let scanning = {
        let client = client.clone();
        let (sbom, key, document) = (sbom.clone(), key.to_string(), document.clone());
        tokio::spawn(async move {
            let mut times = Vec::new();
            for _ in 0..scans {
                times.push(post(&client, &sbom, &key, &document).await?);
            }
            Ok::<_, BoxError>(times)
        })
    };
    let other = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .build()?;
    let mut health_loaded = Vec::new();
    while !scanning.is_finished() {
        health_loaded.push(get(&other, &healthz).await?);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    scan.extend(scanning.await??);

    let (h, t, s, hl) = (
        summarize(health),
        summarize(typo),
        summarize(scan),
        summarize(health_loaded),
    );
    println!(
        "healthz          median {} p90 {} p99 {}",
        us(h.median),
        us(h.p90),
        us(h.p99)
    );
    println!(
        "typosquat (200)  median {} p99 {}  ratio to healthz {:.1}",
        us(t.median),
        us(t.p99),
        t.median.as_secs_f64() / h.median.as_secs_f64()
    );
    println!(
        "sbom (16 MB)     median {:.1} ms  max {:.1} ms  ratio to healthz {:.0}",
        s.median.as_secs_f64() * 1e3,
        s.max.as_secs_f64() * 1e3,
        s.median.as_secs_f64() / h.median.as_secs_f64()
    );
    println!(
        "healthz during scans ({} requests) median {} p99 {}  ratio to idle median {:.1}",
        hl.count,
        us(hl.median),
        us(hl.p99),
        hl.median.as_secs_f64() / h.median.as_secs_f64()
    );
    let body = document.len() as f64;
    println!(
        "first sbom scan: peak live heap growth {:.1} MiB = {:.2}x the body; resident high-water growth {:.1} MiB = {:.2}x (goal <= 4x)",
        heap_growth as f64 / f64::from(1 << 20),
        heap_growth as f64 / body,
        rss_growth as f64 / f64::from(1 << 20),
        rss_growth as f64 / body
    );
    let _ = serving.stop().await;
    Ok(())
}
