//! A 200 MB download is hashed without touching the disk and without holding the body.
//!
//! The measurement runs alone in a child process (this test binary again, this test
//! selected) so that other tests cannot disturb the process counters.

use std::convert::Infallible;
use std::io::Write as _;
use std::process::Command;

use crate::common::{client, limits, serve};
use aws_lc_rs::digest;
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use bytes::Bytes;
use futures::stream;
use ingest::download_and_hash;
use model::SystemClock;

const CHILD_ENV: &str = "KNOWNGOOD_STREAM_MEMORY_CHILD";
const TEST_NAME: &str = "stream_memory::a_200_mb_download_neither_writes_to_disk_nor_grows_memory";
const CHUNK: usize = 1 << 20;
const CHUNKS: usize = 200;

/// Reads a `key: value` counter from a /proc file (kB units are left as they are).
fn proc_value(file: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..]
        .trim_start_matches(':')
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn chunk() -> Bytes {
    // Not constant, so a hasher that skipped or repeated data would be caught.
    Bytes::from(
        (0..CHUNK)
            .map(|i| (i * 31 % 251) as u8)
            .collect::<Vec<u8>>(),
    )
}

#[test]
fn a_200_mb_download_neither_writes_to_disk_nor_grows_memory() {
    if std::env::var_os(CHILD_ENV).is_some() {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(measure());
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Past the harness's capture, as the child would have shown it.
    for line in stderr.lines().filter(|l| l.starts_with("SKIPPED")) {
        let _ = writeln!(std::io::stderr(), "{line}");
    }
    eprintln!("{stderr}");
    assert!(
        out.status.success(),
        "the measuring child failed: {}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
}

async fn measure() {
    if proc_value("/proc/self/io", "write_bytes").is_none() {
        eprintln!("SKIPPED: /proc/self/io is not readable here");
        return;
    }
    let body = chunk();
    let served = body.clone();
    let app = Router::new().route(
        "/big",
        get(move || {
            let chunk = served.clone();
            async move {
                let chunks = (0..CHUNKS).map(move |_| Ok::<_, Infallible>(chunk.clone()));
                Body::from_stream(stream::iter(chunks))
            }
        }),
    );
    let url = format!("http://{}/big", serve(app).await);
    let client = client();

    let written_before = proc_value("/proc/self/io", "write_bytes").unwrap();
    let hwm_before = proc_value("/proc/self/status", "VmHWM").unwrap();
    let got = download_and_hash(&client, &url, &limits(), &SystemClock)
        .await
        .unwrap();
    let written = proc_value("/proc/self/io", "write_bytes").unwrap() - written_before;
    let hwm_after = proc_value("/proc/self/status", "VmHWM").unwrap();
    let rss_after = proc_value("/proc/self/status", "VmRSS").unwrap();
    eprintln!(
        "200 MB streamed: write_bytes +{written} B, VmHWM {hwm_before} -> {hwm_after} kB, \
         VmRSS {rss_after} kB"
    );

    assert_eq!(got.size_bytes, (CHUNK * CHUNKS) as u64);
    // Checks that every byte went through once and in order; the algorithm itself is
    // checked against the sha2 crate in the unit tests (too slow for 200 MB in debug builds).
    let mut sha256 = digest::Context::new(&digest::SHA256);
    for _ in 0..CHUNKS {
        sha256.update(&body);
    }
    assert_eq!(got.digests.sha256, hex::encode(sha256.finish()));

    assert!(
        written < 64 * 1024,
        "the download wrote {written} bytes to storage"
    );
    let growth_kb = hwm_after.saturating_sub(hwm_before);
    assert!(
        growth_kb < 32 * 1024,
        "peak memory grew by {growth_kb} kB while streaming 200 MB"
    );
}
