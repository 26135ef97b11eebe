//! Memory of one anonymous pull-feed request against a large catalogue.
//!
//! Loads N current vendor records into a SQLite store (a release built for two arches per
//! family, so observables are shared), starts the real server on 127.0.0.1:0 and sends one
//! `GET /taxii2/knowngood/collections/<id>/objects/?limit=100` and one
//! `GET /public/feed.json` (each to a cold cache), then a listing whose filter matches
//! nothing (`match[id]` of no object: an answer that examines as many records as one may),
//! and reports, per request, the peak of live heap bytes while it ran and the growth of the
//! process's anonymous resident memory.
//!
//! Then one object by id (`…/objects/<indicator of the newest record>/`): the time until
//! the server's table of which records name which object has every record (the first
//! start after an upgrade), and the median of 20 lookups once it has, against the
//! baseline measured in the same run: the previous way, reading the collection in
//! date-added order, 200 records at a time, until a record names the object.
//!
//! ```text
//! cargo run --release -p server --example bench_feeds_memory -- \
//!     [--records N (200000)] [--sqlite-file PATH]
//! ```
//!
//! `--sqlite-file PATH` keeps the loaded database for later runs with the same `--records`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

mod support;

use std::sync::Arc;
use std::time::Instant;

use chrono::{TimeZone, Utc};
use model::{Arch, Clock, NewRecord, Platform, RecordSigner, SystemClock};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Records written per transaction while loading.
const BATCH: u64 = 2_000;

/// This process's anonymous resident memory, in KiB.
fn rss_anon_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn hex(seed: u64, len: usize) -> String {
    let mut out = String::with_capacity(len);
    let mut state = seed;
    while out.len() < len {
        state = support::splitmix(state);
        out.push_str(&format!("{state:016x}"));
    }
    out.truncate(len);
    out
}

/// Record `i`: family `i / 2`, amd64 or arm64 by parity.
fn record(i: u64) -> NewRecord {
    let family = i / 2;
    NewRecord {
        vendor: format!("Vendor {}", family % 500),
        executable_name: format!("tool{family}.exe"),
        version: "1.0.0".into(),
        platform: Platform::Windows,
        arch: if i.is_multiple_of(2) {
            Arch::Amd64
        } else {
            Arch::Arm64
        },
        hash_sha256: hex(i * 3 + 1, 64),
        hash_sha1: Some(hex(i * 3 + 2, 40)),
        hash_md5: Some(hex(i * 3 + 3, 32)),
        source_url: format!("https://downloads.example.com/tool{family}/{i}.exe"),
        download_verified: true,
        sig_signer: None,
        sig_issuer: None,
        sig_serial: None,
        sig_thumbprint: None,
        size: Some(1_000_000 + i),
    }
}

struct Args {
    records: u64,
    sqlite_file: Option<std::path::PathBuf>,
}

fn parse_args() -> Result<Args, BoxError> {
    let mut args = Args {
        records: 200_000,
        sqlite_file: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--records" => args.records = value()?.replace('_', "").parse()?,
            "--sqlite-file" => args.sqlite_file = Some(value()?.into()),
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = parse_args()?;
    let dir = tempfile::tempdir()?;
    let path = args
        .sqlite_file
        .clone()
        .unwrap_or_else(|| dir.path().join("feeds.db"));
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let store = store::open(&url, RecordSigner::new(b"bench-record-secret")).await?;
    let marker = path.with_extension("loaded");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(&args.records.to_string()) {
        println!("reusing {} (loaded earlier)", path.display());
    } else {
        let started = Instant::now();
        let at = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
        let mut from = 0;
        while from < args.records {
            let to = (from + BATCH).min(args.records);
            store
                .record_many((from..to).map(record).collect(), at)
                .await?;
            from = to;
        }
        std::fs::write(&marker, args.records.to_string())?;
        println!(
            "loaded {} records in {:.1} s",
            args.records,
            started.elapsed().as_secs_f64()
        );
    }

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let keys = auth::KeyHasher::new(b"bench-key-secret");
    let state = support::unthrottled_state(Arc::clone(&store), keys, clock, &[7; 32])?;
    let serving = support::Serving::start(server::router(state)).await?;
    let addr = serving.addr;
    let client = reqwest::Client::builder().no_proxy().build()?;
    let collection = feeds::taxii::CURRENT_COLLECTION.as_str();
    let taxii = format!("/taxii2/knowngood/collections/{collection}/objects/?limit=100");
    support::counting::start();
    println!(
        "{:<72} {:>8} {:>14} {:>16}",
        "request", "status", "peak heap MiB", "RssAnon +MiB"
    );
    let unmatched = format!(
        "/taxii2/knowngood/collections/{collection}/objects/?match[id]=indicator--00000000-0000-4000-8000-000000000000"
    );
    for path in [taxii.as_str(), "/public/feed.json", unmatched.as_str()] {
        let rss_before = rss_anon_kib();
        support::counting::reset_peak();
        let live_before = support::counting::live();
        let started = Instant::now();
        let response = client.get(format!("http://{addr}{path}")).send().await?;
        let status = response.status();
        let body = response.bytes().await?;
        let elapsed = started.elapsed();
        let peak = support::counting::peak().saturating_sub(live_before);
        let rss = rss_anon_kib().saturating_sub(rss_before);
        println!(
            "{:<72} {:>8} {:>14.1} {:>16.1}   ({} bytes, {:.0} ms)",
            path,
            status.as_u16(),
            peak as f64 / (1 << 20) as f64,
            rss as f64 / 1024.0,
            body.len(),
            elapsed.as_secs_f64() * 1e3
        );
    }

    // One object by id: the newest record's indicator, the last one a walk reaches.
    let newest = store.current_records_added_before(None, 1).await?;
    let wanted = feeds::stix::RecordObjectIds::of(&newest[0]).indicator;
    let object =
        format!("http://{addr}/taxii2/knowngood/collections/{collection}/objects/{wanted}/");
    let started = Instant::now();
    let mut first_status = None;
    loop {
        let status = client.get(&object).send().await?.status().as_u16();
        first_status.get_or_insert(status);
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "only 503 while the records are noted");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    println!(
        "object by id: first answer {}, every record noted and the object found after {:.1} s",
        first_status.unwrap_or_default(),
        started.elapsed().as_secs_f64()
    );
    let indexed = median_ms(20, || async {
        let response = client.get(&object).send().await.unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
    })
    .await;
    let walked = median_ms(3, || async {
        assert!(walk_until_named(store.as_ref(), &wanted).await.is_some());
    })
    .await;
    println!(
        "object by id: {indexed:.2} ms (median of 20) through the table; baseline, reading the collection until found: {walked:.0} ms (median of 3); baseline / table = {:.0}x",
        walked / indexed
    );

    let _ = serving.stop().await;
    store.close().await;
    Ok(())
}

/// The median time of `runs` runs of `run`, in milliseconds.
async fn median_ms<F, Fut>(runs: usize, run: F) -> f64
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        run().await;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    times[runs / 2]
}

/// The baseline: the first object with this id in the current records' date-added order.
async fn walk_until_named(store: &dyn store::Store, id: &str) -> Option<feeds::stix::StixObject> {
    let mut after: Option<store::AddedPosition> = None;
    loop {
        let records = store
            .current_records_added_after(after.as_ref(), 200)
            .await
            .unwrap();
        let last = records.last()?;
        after = Some(store::AddedPosition {
            added_at: last.added_at,
            id: last.id.clone(),
        });
        for record in &records {
            if let Some(found) = feeds::stix::record_objects(record)
                .into_iter()
                .find(|o| o.id == id)
            {
                return Some(found);
            }
        }
    }
}
