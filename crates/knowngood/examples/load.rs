//! Load generator of the failure test (`bench/load.sh` starts everything it needs and runs
//! this): mixed traffic through a round-robin TCP proxy in front of the replicas, then per
//! route p50/p99, 5xx inside and outside the outage windows, and the replicas' memory.
//!
//!     cargo run --release -p knowngood --example load -- --backend 127.0.0.1:8081 \
//!         --backend 127.0.0.1:8082 --key "$KEY" --records 2000 --duration 300 \
//!         --pid 1234 --pid 1235 --events /tmp/events
//!
//! Traffic (weights): lookup of 10 hashes, half of them recorded (40), history of one
//! executable with a JWT (25), hash of the day of one executable (25), key-for-JWT exchange
//! (10). The records are those `bench/load.sh` loads: `tool{i}.exe`, SHA-256 of
//! `load-file-{i}`.
//!
//! `--events` names a file the driver appends `<name> <start ms> <end ms>` lines to (Unix
//! epoch milliseconds) while the outages happen; it is read at the end. A window counts from
//! its start to its end plus `--grace` seconds (pools reconnect on their next request).
//! Exit status 1 when a 5xx came outside every window or a replica's resident memory grew
//! by 5 % or more between the end of the warm-up and the end.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use clap::Parser;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::RwLock;

#[derive(Parser, Debug)]
struct Args {
    /// A replica's address; connections are handed to them in turn.
    #[arg(long, required = true)]
    backend: Vec<SocketAddr>,
    /// Address of the round-robin proxy the clients connect to [default: a free port].
    #[arg(long, default_value = "127.0.0.1:0")]
    proxy_listen: SocketAddr,
    /// API key (`TEAM.SECRET`) of an analyst.
    #[arg(long, env = "KNOWNGOOD_API_KEY", hide_env_values = true)]
    key: String,
    /// Records loaded (`tool0.exe` .. `tool{n-1}.exe`).
    #[arg(long, default_value_t = 2000)]
    records: u64,
    /// Seconds of traffic.
    #[arg(long, default_value_t = 300)]
    duration: u64,
    /// Seconds of warm-up: memory growth is measured from its end.
    #[arg(long, default_value_t = 60)]
    warmup: u64,
    /// Concurrent clients (each keeps one connection while it can).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Process id of a replica, for its resident memory (one per replica).
    #[arg(long)]
    pid: Vec<u32>,
    /// File of outage windows, `<name> <start ms> <end ms>` per line.
    #[arg(long)]
    events: Option<std::path::PathBuf>,
    /// Seconds after a window's end still counted in it.
    #[arg(long, default_value_t = 5)]
    grace: u64,
    /// Seconds before a request without an answer counts as a timeout.
    #[arg(long, default_value_t = 10)]
    timeout: u64,
}

const ROUTES: [&str; 4] = ["lookup", "history", "hash-of-day", "token"];
const WEIGHTS: [u32; 4] = [40, 25, 25, 10];

/// One request: route, outcome (HTTP status, or 0 for no answer), latency, when it ended.
struct Sample {
    route: u8,
    status: u16,
    micros: u32,
    at_ms: u64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn sha256_hex(text: &str) -> String {
    hex::encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, text.as_bytes()).as_ref())
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Accepts connections and splices each to the next backend in turn.
async fn proxy(listener: TcpListener, backends: Vec<SocketAddr>, counts: Arc<Vec<AtomicUsize>>) {
    let next = AtomicUsize::new(0);
    loop {
        let Ok((mut client, _)) = listener.accept().await else {
            continue;
        };
        let i = next.fetch_add(1, Ordering::Relaxed) % backends.len();
        let backend = backends[i];
        if let Some(c) = counts.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        tokio::spawn(async move {
            // A replica that refuses the connection: the client sees it closed, as behind
            // any TCP balancer without health checks.
            if let Ok(mut upstream) = TcpStream::connect(backend).await {
                let _ = client.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
        });
    }
}

struct Shared {
    base: String,
    key: String,
    jwt: RwLock<String>,
    records: u64,
    stop: AtomicBool,
}

async fn exchange(client: &reqwest::Client, shared: &Shared) -> Result<(u16, Option<String>)> {
    let response = client
        .post(format!("{}/api/v1/auth/token", shared.base))
        .header("X-API-Key", &shared.key)
        .send()
        .await?;
    let status = response.status().as_u16();
    let body = response.bytes().await?;
    let token = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("token")?.as_str().map(str::to_owned));
    Ok((status, token))
}

async fn one(client: &reqwest::Client, shared: &Shared, route: usize) -> Result<u16> {
    let pick = || rand::random_range(0..shared.records.max(1));
    let response = match route {
        0 => {
            let mut hashes: Vec<String> = (0..5)
                .map(|_| sha256_hex(&format!("load-file-{}", pick())))
                .collect();
            hashes.extend((0..5).map(|_| hex::encode(rand::random::<[u8; 32]>())));
            let body = serde_json::json!({ "hashes": hashes }).to_string();
            client
                .post(format!("{}/api/v1/intel/lookup", shared.base))
                .header("X-API-Key", &shared.key)
                .header("Content-Type", "application/json")
                .body(body)
                .send()
                .await?
        }
        1 => {
            let jwt = shared.jwt.read().await.clone();
            client
                .get(format!(
                    "{}/api/v1/intel/history?executable=tool{}.exe&limit=20",
                    shared.base,
                    pick()
                ))
                .bearer_auth(jwt)
                .send()
                .await?
        }
        2 => {
            client
                .get(format!(
                    "{}/public/hash-of-day?executable=tool{}.exe",
                    shared.base,
                    pick()
                ))
                .send()
                .await?
        }
        _ => {
            let (status, token) = exchange(client, shared).await?;
            if let Some(token) = token {
                *shared.jwt.write().await = token;
            }
            return Ok(status);
        }
    };
    let status = response.status().as_u16();
    // The whole answer is part of the latency.
    response.bytes().await?;
    Ok(status)
}

async fn worker(client: reqwest::Client, shared: Arc<Shared>) -> Vec<Sample> {
    let total: u32 = WEIGHTS.iter().sum();
    let mut samples = Vec::new();
    while !shared.stop.load(Ordering::Relaxed) {
        let mut roll = rand::random_range(0..total);
        let mut route = 0;
        while roll >= WEIGHTS[route] {
            roll -= WEIGHTS[route];
            route += 1;
        }
        let started = Instant::now();
        let status = one(&client, &shared, route).await.unwrap_or(0);
        let micros = u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX);
        samples.push(Sample {
            route: u8::try_from(route).unwrap_or(0),
            status,
            micros,
            at_ms: now_ms(),
        });
        if status == 0 {
            // No answer (refused, reset, timed out): do not spin on a dead connection.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    samples
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64)).ceil() as usize;
    f64::from(sorted[rank.clamp(1, sorted.len()) - 1]) / 1000.0
}

fn read_windows(path: Option<&std::path::Path>, grace_ms: u64) -> Result<Vec<(String, u64, u64)>> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).context("reading the events file"),
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        if let [name, start, end] = parts[..] {
            out.push((
                name.to_owned(),
                start.parse()?,
                end.parse::<u64>()? + grace_ms,
            ));
        }
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let listener = TcpListener::bind(args.proxy_listen).await?;
    let proxy_addr = listener.local_addr()?;
    let counts = Arc::new(
        (0..args.backend.len())
            .map(|_| AtomicUsize::new(0))
            .collect::<Vec<_>>(),
    );
    tokio::spawn(proxy(listener, args.backend.clone(), counts.clone()));

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(args.timeout))
        .pool_max_idle_per_host(args.concurrency)
        .build()?;
    let shared = Arc::new(Shared {
        base: format!("http://{proxy_addr}"),
        key: args.key.clone(),
        jwt: RwLock::new(String::new()),
        records: args.records,
        stop: AtomicBool::new(false),
    });
    let (status, token) = exchange(&client, &shared).await?;
    let token = token.with_context(|| format!("the first token exchange answered {status}"))?;
    *shared.jwt.write().await = token;

    println!(
        "load: {} s ({} s warm-up), {} clients, proxy {proxy_addr} -> {:?}",
        args.duration, args.warmup, args.concurrency, args.backend
    );
    let start = Instant::now();
    let start_ms = now_ms();
    let workers: Vec<_> = (0..args.concurrency)
        .map(|_| tokio::spawn(worker(client.clone(), shared.clone())))
        .collect();

    // Resident memory of each replica, once a second.
    let mut rss: Vec<Vec<(u64, u64)>> = vec![Vec::new(); args.pid.len()];
    let mut at_warmup: Vec<Option<u64>> = vec![None; args.pid.len()];
    let mut last_report = 0;
    while start.elapsed() < Duration::from_secs(args.duration) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let t = start.elapsed().as_secs();
        for (i, pid) in args.pid.iter().enumerate() {
            if let Some(kib) = rss_kib(*pid) {
                rss[i].push((t, kib));
                if t >= args.warmup && at_warmup[i].is_none() {
                    at_warmup[i] = Some(kib);
                }
            }
        }
        if t >= last_report + 30 {
            last_report = t;
            let now: Vec<String> = rss
                .iter()
                .map(|r| {
                    r.last()
                        .map_or("-".into(), |(_, k)| format!("{} MiB", k / 1024))
                })
                .collect();
            println!("  t={t:>4} s  rss {}", now.join(", "));
        }
    }
    shared.stop.store(true, Ordering::Relaxed);
    let mut samples = Vec::new();
    for w in workers {
        samples.extend(w.await?);
    }
    let elapsed = start.elapsed().as_secs_f64();

    let windows = read_windows(args.events.as_deref(), args.grace * 1000)?;
    let in_window = |at: u64| windows.iter().any(|(_, s, e)| at >= *s && at <= *e);

    println!();
    for (name, s, e) in &windows {
        println!(
            "window {name}: t={:.1} s .. {:.1} s (with {} s grace)",
            (*s as f64 - start_ms as f64) / 1000.0,
            (*e as f64 - start_ms as f64) / 1000.0,
            args.grace
        );
    }
    println!(
        "{} requests in {elapsed:.0} s ({:.0}/s); connections per replica: {:?}",
        samples.len(),
        samples.len() as f64 / elapsed,
        counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect::<Vec<_>>()
    );
    println!(
        "{:<12} {:>8} {:>8} {:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "route",
        "requests",
        "2xx",
        "4xx",
        "429",
        "5xx in",
        "5xx out",
        "none in",
        "none out",
        "p50 ms",
        "p99 ms"
    );
    let mut outside_5xx = 0u64;
    let mut outside_none = 0u64;
    for (r, name) in ROUTES.iter().enumerate() {
        let mine: Vec<&Sample> = samples
            .iter()
            .filter(|s| usize::from(s.route) == r)
            .collect();
        let count = |f: &dyn Fn(&Sample) -> bool| mine.iter().filter(|s| f(s)).count();
        let ok = count(&|s| (200..300).contains(&s.status));
        let c4 = count(&|s| (400..500).contains(&s.status) && s.status != 429);
        let c429 = count(&|s| s.status == 429);
        let s5_in = count(&|s| s.status >= 500 && in_window(s.at_ms));
        let s5_out = count(&|s| s.status >= 500 && !in_window(s.at_ms));
        let none_in = count(&|s| s.status == 0 && in_window(s.at_ms));
        let none_out = count(&|s| s.status == 0 && !in_window(s.at_ms));
        outside_5xx += s5_out as u64;
        outside_none += none_out as u64;
        // Latency of the answered requests outside the outage windows.
        let mut lat: Vec<u32> = mine
            .iter()
            .filter(|s| s.status != 0 && !in_window(s.at_ms))
            .map(|s| s.micros)
            .collect();
        lat.sort_unstable();
        println!(
            "{name:<12} {:>8} {ok:>8} {c4:>6} {c429:>6} {s5_in:>9} {s5_out:>9} {none_in:>9} {none_out:>9} {:>9.2} {:>9.2}",
            mine.len(),
            percentile(&lat, 50.0),
            percentile(&lat, 99.0)
        );
    }
    // The same routes inside the windows: answered, and how long they took.
    if !windows.is_empty() {
        println!("inside the outage windows:");
        for (r, name) in ROUTES.iter().enumerate() {
            let mut lat: Vec<u32> = samples
                .iter()
                .filter(|s| usize::from(s.route) == r && s.status != 0 && in_window(s.at_ms))
                .map(|s| s.micros)
                .collect();
            lat.sort_unstable();
            println!(
                "  {name:<12} {:>8} answered, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
                lat.len(),
                percentile(&lat, 50.0),
                percentile(&lat, 99.0),
                percentile(&lat, 100.0)
            );
        }
    }
    // What the outages looked like from outside.
    let mut per_status: BTreeMap<u16, usize> = BTreeMap::new();
    for s in samples.iter().filter(|s| in_window(s.at_ms)) {
        *per_status.entry(s.status).or_default() += 1;
    }
    let end_ms = now_ms();
    let window_secs: f64 = windows
        .iter()
        .map(|(_, s, e)| ((*e).min(end_ms).saturating_sub((*s).max(start_ms))) as f64 / 1000.0)
        .sum();
    let inside: usize = per_status.values().sum();
    if window_secs > 0.0 {
        println!(
            "inside the windows: {inside} requests in {window_secs:.1} s ({:.0}/s; outside {:.0}/s)",
            inside as f64 / window_secs,
            (samples.len() - inside) as f64 / (elapsed - window_secs).max(1.0)
        );
    }
    println!("answers inside the windows by status (0 = no answer): {per_status:?}");

    let mut memory_ok = true;
    for (i, pid) in args.pid.iter().enumerate() {
        let (Some(warm), Some((_, end))) = (at_warmup[i], rss[i].last()) else {
            println!("replica pid {pid}: no memory reading (did it exit?)");
            memory_ok = false;
            continue;
        };
        let peak = rss[i].iter().map(|(_, k)| *k).max().unwrap_or(0);
        let growth = (*end as f64 - warm as f64) / warm as f64 * 100.0;
        println!(
            "replica pid {pid}: rss {:.1} MiB after warm-up, {:.1} MiB at the end ({growth:+.1} %), peak {:.1} MiB",
            warm as f64 / 1024.0,
            *end as f64 / 1024.0,
            peak as f64 / 1024.0
        );
        if growth >= 5.0 {
            memory_ok = false;
        }
    }
    let pass = outside_5xx == 0 && outside_none == 0 && memory_ok;
    println!(
        "{}: {outside_5xx} 5xx and {outside_none} unanswered outside the outage windows; memory {}",
        if pass { "PASS" } else { "FAIL" },
        if memory_ok {
            "flat (< 5 % growth)"
        } else {
            "grew 5 % or more"
        }
    );
    if !pass {
        std::process::exit(1);
    }
    Ok(())
}
