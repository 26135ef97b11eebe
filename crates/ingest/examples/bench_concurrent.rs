//! Concurrent artifact fetching: one vendor run of `--files` downloads from one host that
//! takes `--latency-ms` before each answer (a distant mirror), with the per-host bound at 1
//! (the baseline: one download after another) and at `--per-host`, in the same run.
//!
//! ```text
//! cargo run --release -p ingest --example bench_concurrent -- [--files 40] [--latency-ms 100] [--kib 512] [--per-host 4]
//! ```
//!
//! Each file is `--kib` of random bytes served from memory over loopback HTTP; none has a
//! published hash, so each is downloaded and hashed (SHA-256, SHA-1, MD5) by the pipeline.
//! Goal: sequential / concurrent >= 2.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::Router;
use ingest::{
    Artifact, FetchContext, FetchError, FetchLimits, Fetcher, PublishedHashes, RecordSink,
    VendorConfig, ingest_vendor,
};
use model::{Arch, DownloadAudit, NewRecord, Platform, RecordOutcome, SystemClock};
use rand::RngCore;

struct Files {
    base: String,
    count: usize,
}

#[async_trait]
impl Fetcher for Files {
    fn id(&self) -> &str {
        "bench"
    }

    fn vendor(&self) -> &str {
        "Bench"
    }

    async fn discover(&self, _ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        Ok((0..self.count)
            .map(|i| Artifact {
                vendor: "Bench".into(),
                executable_name: format!("tool-{i}.exe"),
                version: "1.0".into(),
                platform: Platform::Windows,
                arch: Arch::Amd64,
                url: format!("{}/tool-{i}.exe", self.base),
                published: PublishedHashes::default(),
            })
            .collect())
    }
}

/// Accepts every record.
struct Sink;

#[async_trait]
impl RecordSink for Sink {
    async fn record(&self, _r: NewRecord) -> Result<RecordOutcome, model::Error> {
        Ok(RecordOutcome::Inserted {
            id: "r".into(),
            superseded: None,
            hash_changed: false,
        })
    }

    async fn download_audited(&self, _audit: DownloadAudit) -> Result<(), model::Error> {
        Ok(())
    }
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

async fn run(base: &str, files: usize, per_host: usize) -> Duration {
    let limits = FetchLimits {
        downloads_per_host: per_host,
        ..FetchLimits::default()
    };
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let ctx = FetchContext::new(client, VendorConfig::new(base), limits);
    let fetcher = Files {
        base: base.to_owned(),
        count: files,
    };
    let started = Instant::now();
    let report = ingest_vendor(&fetcher, &ctx, &Sink, &SystemClock).await;
    let elapsed = started.elapsed();
    assert_eq!(
        (report.downloaded, report.errors),
        (files, 0),
        "{:#?}",
        report.problems
    );
    elapsed
}

#[tokio::main]
async fn main() {
    let files = arg("--files", 40) as usize;
    let latency = Duration::from_millis(arg("--latency-ms", 100));
    let kib = arg("--kib", 512) as usize;
    let per_host = arg("--per-host", 4) as usize;

    let mut body = vec![0u8; kib << 10];
    rand::rng().fill_bytes(&mut body);
    let body = Arc::new(body);
    let app = Router::new().fallback(move || {
        let body = body.clone();
        async move {
            tokio::time::sleep(latency).await;
            body.to_vec()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    println!(
        "{files} downloads of {kib} KiB, {} ms before each answer",
        latency.as_millis()
    );
    let sequential = run(&base, files, 1).await;
    let concurrent = run(&base, files, per_host).await;
    println!("per host 1 (baseline): {:>8.3} s", sequential.as_secs_f64());
    println!(
        "per host {per_host}:            {:>8.3} s",
        concurrent.as_secs_f64()
    );
    println!(
        "ratio sequential / concurrent: {:.2} (goal >= 2)",
        sequential.as_secs_f64() / concurrent.as_secs_f64()
    );
}
