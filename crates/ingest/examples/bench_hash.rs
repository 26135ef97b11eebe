//! The streaming download-and-hash path against `md5sum` alone and against `sha256sum`,
//! `sha1sum` and `md5sum` run in parallel, on the same bytes, in one run.
//!
//! ```text
//! cargo run --release -p ingest --example bench_hash -- [--mib 1024]
//! ```
//!
//! The bytes are generated once, written to a tmpfs file for the tools and served from memory
//! by a loopback axum server (1 MiB writes, with Content-Length) for [`download_and_hash`]: a
//! vendor's server costs this machine nothing, so the stand-in should cost it little.
//! Memory growth during the download is sampled from VmRSS every ~10 ms.
//!
//! Goals: md5sum time / hasher time >= 0.85; RSS growth during the download <= 64 MB.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

use std::convert::Infallible;
use std::error::Error;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use bytes::Bytes;
use futures::stream;
use ingest::{DownloadLimits, download_and_hash};
use model::SystemClock;
use rand::RngCore;

/// As in the `knowngood` binary, which the download path runs in.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Each measurement is the best of this many runs.
const RUNS: usize = 3;
/// Size of the writes the server makes.
const CHUNK: usize = 1 << 20;

/// A field of /proc/self/status, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// CPU seconds (user + system) this process has used so far, from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    // USER_HZ is 100 on Linux.
    ticks as f64 / 100.0
}

/// Samples VmRSS every ~10 ms until stopped; yields the maximum seen, in KiB.
struct RssSampler {
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<u64>,
}

impl RssSampler {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = thread::spawn(move || {
            let mut max = status_kib("VmRSS");
            while !flag.load(Ordering::Relaxed) {
                max = max.max(status_kib("VmRSS"));
                thread::sleep(Duration::from_millis(10));
            }
            max.max(status_kib("VmRSS"))
        });
        Self { stop, handle }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or(0)
    }
}

fn spawn_tool(name: &str, path: &Path) -> Result<Child, Box<dyn Error>> {
    Ok(Command::new(name)
        .arg(path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?)
}

fn wait_tool(name: &str, child: Child) -> Result<String, Box<dyn Error>> {
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(format!("{name} failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    let text = String::from_utf8(out.stdout)?;
    Ok(text
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned())
}

fn parse_mib() -> Result<usize, Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let mut mib = 1024;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mib" => mib = args.next().ok_or("--mib needs a value")?.parse()?,
            other => return Err(format!("unknown argument {other}; usage: [--mib N]").into()),
        }
    }
    Ok(mib)
}

fn main() -> Result<(), Box<dyn Error>> {
    let mib = parse_mib()?;
    let size = mib << 20;

    let mut data = vec![0u8; size];
    rand::rng().fill_bytes(&mut data);
    let data = Bytes::from(data);

    // tmpfs keeps the tools off the disk, as the hasher is.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let file = tempfile::NamedTempFile::new_in(&dir)?;
    std::fs::write(file.path(), &data)?;
    // Warm the page cache with one read.
    drop(std::fs::read(file.path())?);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let served = data.clone();
    let url = rt.block_on(async move {
        let app = Router::new().route(
            "/blob",
            get(move || {
                let data = served.clone();
                async move {
                    let len = data.len();
                    let chunks = (0..len)
                        .step_by(CHUNK)
                        .map(move |at| Ok::<_, Infallible>(data.slice(at..(at + CHUNK).min(len))));
                    (
                        [(header::CONTENT_LENGTH, len.to_string())],
                        Body::from_stream(stream::iter(chunks)),
                    )
                        .into_response()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok::<_, std::io::Error>(format!("http://{addr}/blob"))
    })?;
    let client = reqwest::Client::builder().no_proxy().build()?;
    let limits = DownloadLimits {
        max_bytes: size as u64 + (1 << 20),
        connect_timeout: Duration::from_secs(60),
        total_timeout: Duration::from_secs(3600),
        ..DownloadLimits::default()
    };

    println!(
        "{mib} MiB of random bytes, served in {} KiB chunks from {url}; file in {}; best of {RUNS}, alternating",
        CHUNK >> 10,
        dir.display()
    );

    // The transfer alone, body dropped chunk by chunk: what the loopback costs both ends.
    let started = Instant::now();
    let cpu_before = cpu_seconds();
    let received = rt.block_on(async {
        use futures::StreamExt as _;
        let mut body = client.get(&url).send().await?.bytes_stream();
        let mut n = 0usize;
        while let Some(chunk) = body.next().await {
            n += chunk?.len();
        }
        Ok::<_, reqwest::Error>(n)
    })?;
    println!(
        "transfer alone (no hashing): {:.3} s, {:.2} CPU s, {received} bytes",
        started.elapsed().as_secs_f64(),
        cpu_seconds() - cpu_before
    );

    let mut hasher_time = Duration::MAX;
    let mut md5_time = Duration::MAX;
    let mut par_time = Duration::MAX;
    let mut max_growth_kib = 0u64;
    let hwm_before = status_kib("VmHWM");
    let mut sums = String::new();
    let mut tool_sums = String::new();
    for run in 1..=RUNS {
        // The streaming hasher over loopback HTTP.
        let rss_before = status_kib("VmRSS");
        let sampler = RssSampler::start();
        let started = Instant::now();
        let cpu_before = cpu_seconds();
        let got = rt.block_on(download_and_hash(&client, &url, &limits, &SystemClock))?;
        let t = started.elapsed();
        let cpu = cpu_seconds() - cpu_before;
        let rss_max = sampler.stop();
        let growth = rss_max.saturating_sub(rss_before);
        if got.size_bytes != size as u64 {
            return Err(format!("downloaded {} bytes, expected {size}", got.size_bytes).into());
        }
        sums = format!(
            "{} {} {}",
            got.digests.sha256, got.digests.sha1, got.digests.md5
        );
        println!(
            "run {run}: download_and_hash {:.3} s ({cpu:.2} CPU s, server included), VmRSS before {rss_before} KiB, max during {rss_max} KiB, growth {:.1} MB",
            t.as_secs_f64(),
            growth as f64 * 1024.0 / 1e6
        );
        hasher_time = hasher_time.min(t);
        max_growth_kib = max_growth_kib.max(growth);

        // md5sum alone.
        let started = Instant::now();
        let md5 = wait_tool("md5sum", spawn_tool("md5sum", file.path())?)?;
        let t = started.elapsed();
        println!("run {run}: md5sum {:.3} s", t.as_secs_f64());
        md5_time = md5_time.min(t);

        // The three tools in parallel.
        let started = Instant::now();
        let names = ["sha256sum", "sha1sum", "md5sum"];
        let children = names
            .iter()
            .map(|n| spawn_tool(n, file.path()))
            .collect::<Result<Vec<_>, _>>()?;
        let outs = names
            .iter()
            .zip(children)
            .map(|(n, c)| wait_tool(n, c))
            .collect::<Result<Vec<_>, _>>()?;
        let t = started.elapsed();
        println!(
            "run {run}: sha256sum & sha1sum & md5sum {:.3} s",
            t.as_secs_f64()
        );
        par_time = par_time.min(t);
        if outs[2] != md5 {
            return Err("md5sum disagrees with itself".into());
        }
        tool_sums = outs.join(" ");
    }
    let hwm_after = status_kib("VmHWM");

    if sums != tool_sums {
        return Err(format!("digests differ: hasher {sums}, tools {tool_sums}").into());
    }

    let mb = size as f64 / 1e6;
    let report = |label: &str, t: Duration| {
        println!(
            "{label:<34} {:>8.3} s {:>8.0} MB/s",
            t.as_secs_f64(),
            mb / t.as_secs_f64()
        );
    };
    println!("--- best of {RUNS} ---");
    report("download_and_hash (loopback HTTP)", hasher_time);
    report("md5sum alone", md5_time);
    report("sha256sum & sha1sum & md5sum", par_time);
    let growth_mb = max_growth_kib as f64 * 1024.0 / 1e6;
    println!(
        "peak VmRSS growth during download: {growth_mb:.1} MB (goal <= 64 MB: {})",
        if growth_mb <= 64.0 { "met" } else { "MISSED" }
    );
    println!("VmHWM before {hwm_before} KiB, after {hwm_after} KiB");
    let md5_ratio = md5_time.as_secs_f64() / hasher_time.as_secs_f64();
    println!(
        "ratio md5sum / hasher = {md5_ratio:.2} (goal >= 0.85: {}); parallel tools / hasher = {:.2}; digests agree",
        if md5_ratio >= 0.85 { "met" } else { "MISSED" },
        par_time.as_secs_f64() / hasher_time.as_secs_f64()
    );
    Ok(())
}
