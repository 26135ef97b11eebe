//! Artifacts of one vendor are fetched concurrently, within the per-host bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use ingest::{Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, ingest_vendor};
use model::{Arch, Platform};

use crate::vendor_support::{MemorySink, clock, config_for, limits, sha256};

/// Requests in flight now, and the most seen at once.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    max: AtomicUsize,
}

/// A host whose every file takes 150 ms to answer.
async fn slow_host(gauge: Arc<Gauge>) -> String {
    let app = Router::new().fallback(move |uri: axum::http::Uri| {
        let gauge = gauge.clone();
        async move {
            let now = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
            gauge.max.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(150)).await;
            gauge.now.fetch_sub(1, Ordering::SeqCst);
            uri.path().as_bytes().to_vec()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// A channel listing `count` files on each host, none with a published hash (each is
/// downloaded).
struct Files {
    hosts: Vec<String>,
    count: usize,
}

#[async_trait]
impl Fetcher for Files {
    fn id(&self) -> &str {
        "files"
    }

    fn vendor(&self) -> &str {
        "Files"
    }

    async fn discover(&self, _ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        Ok(self
            .hosts
            .iter()
            .flat_map(|host| {
                (0..self.count).map(move |i| Artifact {
                    vendor: "Files".into(),
                    executable_name: format!("tool-{i}.exe"),
                    version: "1.0".into(),
                    platform: Platform::Windows,
                    arch: Arch::Amd64,
                    url: format!("{host}/tool-{i}.exe"),
                    published: PublishedHashes::default(),
                })
            })
            .collect())
    }
}

async fn run(per_host: usize, hosts: usize) -> (Vec<Arc<Gauge>>, usize) {
    let mut gauges = Vec::new();
    let mut bases = Vec::new();
    for _ in 0..hosts {
        let gauge = Arc::new(Gauge::default());
        bases.push(slow_host(gauge.clone()).await);
        gauges.push(gauge);
    }
    let mut limits = limits();
    limits.downloads_per_host = per_host;
    let ctx = FetchContext::new(
        testkit::vendor::http_client(),
        config_for("go", &bases[0]),
        limits,
    );
    let sink = MemorySink::default();
    let fetcher = Files {
        hosts: bases.clone(),
        count: 10,
    };
    let report = ingest_vendor(&fetcher, &ctx, &sink, &clock()).await;
    assert_eq!(report.errors, 0, "{:#?}", report.problems);
    // Every file was downloaded and recorded with the hash of what the host sent.
    let record = sink.get("tool-3.exe", Platform::Windows, Arch::Amd64);
    assert!(record.download_verified);
    assert_eq!(record.hash_sha256, sha256(b"/tool-3.exe"));
    (gauges, report.downloaded)
}

#[tokio::test]
async fn downloads_overlap_up_to_the_per_host_bound() {
    let (gauges, downloaded) = run(4, 1).await;
    assert_eq!(downloaded, 10);
    assert_eq!(gauges[0].max.load(Ordering::SeqCst), 4);

    let (gauges, _) = run(1, 1).await;
    assert_eq!(gauges[0].max.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn each_host_has_its_own_bound() {
    let (gauges, downloaded) = run(2, 2).await;
    assert_eq!(downloaded, 20);
    for gauge in gauges {
        assert_eq!(gauge.max.load(Ordering::SeqCst), 2);
    }
}

/// A store whose writes wait for each other: each write is held until `together` writes
/// wait at once (or 10 s pass), as a group commit holds a call until its transaction ends.
struct GatheringSink {
    inner: MemorySink,
    together: usize,
    waiting: Gauge,
}

#[async_trait]
impl ingest::RecordSink for GatheringSink {
    async fn record(&self, r: model::NewRecord) -> Result<model::RecordOutcome, model::Error> {
        let now = self.waiting.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.waiting.max.fetch_max(now, Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.waiting.max.load(Ordering::SeqCst) < self.together
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.waiting.now.fetch_sub(1, Ordering::SeqCst);
        self.inner.record(r).await
    }

    async fn download_audited(&self, audit: model::DownloadAudit) -> Result<(), model::Error> {
        self.inner.download_audited(audit).await
    }
}

#[tokio::test]
async fn artifacts_waiting_for_the_store_do_not_hold_back_downloads() {
    let gauge = Arc::new(Gauge::default());
    let base = slow_host(gauge.clone()).await;
    let mut limits = limits();
    limits.downloads_per_host = 4;
    let ctx = FetchContext::new(
        testkit::vendor::http_client(),
        config_for("go", &base),
        limits,
    );
    let files = 40;
    let sink = GatheringSink {
        inner: MemorySink::default(),
        together: files,
        waiting: Gauge::default(),
    };
    let fetcher = Files {
        hosts: vec![base],
        count: files,
    };
    let report = ingest_vendor(&fetcher, &ctx, &sink, &clock()).await;
    assert_eq!(report.errors, 0, "{:#?}", report.problems);
    assert_eq!((report.downloaded, report.recorded), (files, files));
    // Every artifact's write waited at once, so a store could write them in one transaction,
    // while downloads kept to the host's bound.
    assert_eq!(sink.waiting.max.load(Ordering::SeqCst), files);
    assert_eq!(gauge.max.load(Ordering::SeqCst), 4);
    assert_eq!(sink.inner.records.lock().unwrap().len(), files);
}
