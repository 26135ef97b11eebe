//! Cost of a revocation check against the number of records, measured in one run.
//!
//! Two fresh SQLite stores hold records signed by the same 50 code-signing certificates
//! under 5 CAs (10 each, one of them revoked on its CA's CRL): one store with 1,000
//! records (the baseline), one with 100,000. For each, the check runs three times against
//! the CAs' CRLs served on loopback: the first check (fetches 5 CRLs, records 5
//! revocations and sets `cert_revoked_at` on the records they signed), a forced check
//! (conditional GETs answered 304; nothing changes) and a check before nextUpdate (no
//! fetch at all). The claim: cost follows distinct certificates and CRLs, not records, so
//! the forced and cached checks cost about the same at 100x the records; the first check
//! also writes every record a revoked certificate signed (10% of them here), which is
//! inherent and shows in its ratio.
//!
//! ```text
//! cargo run -p jobs --example bench_revocation -- [--records N] [--baseline M]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use jobs::revocation::{RevocationOptions, check};
use model::{Arch, FixedClock, Platform, RecordSigner};
use store::Store;
use store::downloads::SigningCert;
use testkit::pki::{CrlServer, Leaf, RevocationReason, TestCa};

const ISSUERS: usize = 5;
const CERTS_PER_ISSUER: usize = 10;
const BATCH: usize = 1000;

struct Pki {
    cas: Vec<TestCa>,
    leaves: Vec<(usize, Leaf)>,
    server: CrlServer,
}

fn serial(issuer: usize, cert: usize) -> Vec<u8> {
    vec![0x40 + issuer as u8, cert as u8, 0x01]
}

async fn pki(now: DateTime<Utc>) -> Pki {
    let server = CrlServer::start().await;
    let mut cas = Vec::new();
    let mut leaves = Vec::new();
    for i in 0..ISSUERS {
        let ca = TestCa::new(&format!("Bench CA {i}"));
        let url = server.url(&format!("/ca{i}.crl"));
        for c in 0..CERTS_PER_ISSUER {
            leaves.push((i, ca.leaf(&format!("Signer {i}-{c}"), &serial(i, c), &url)));
        }
        // Certificate 0 of each CA is revoked, among 2,000 other serials (a CRL of a
        // realistic size: ~60 KB).
        let others: Vec<Vec<u8>> = (0u32..2000).map(|n| n.to_be_bytes().to_vec()).collect();
        let mut entries: Vec<(&[u8], DateTime<Utc>, Option<RevocationReason>)> = others
            .iter()
            .map(|s| (s.as_slice(), now - chrono::Duration::days(30), None))
            .collect();
        let revoked = serial(i, 0);
        entries.push((
            &revoked,
            now - chrono::Duration::days(1),
            Some(RevocationReason::KeyCompromise),
        ));
        server.set(
            &format!("/ca{i}.crl"),
            ca.crl(1, now - chrono::Duration::hours(1), &entries),
        );
        cas.push(ca);
    }
    Pki {
        cas,
        leaves,
        server,
    }
}

async fn store_with(
    records: usize,
    pki: &Pki,
    dir: &std::path::Path,
    now: DateTime<Utc>,
) -> Arc<dyn Store> {
    let url = format!("sqlite://{}/bench-{records}.db", dir.display());
    let store = store::open(&url, RecordSigner::new(b"bench-record-secret"))
        .await
        .unwrap();
    for (issuer, leaf) in &pki.leaves {
        store
            .signing_cert_seen(
                &SigningCert {
                    thumbprint: leaf.thumbprint.clone(),
                    signer: leaf.subject.clone(),
                    issuer: leaf.issuer.clone(),
                    serial: leaf.serial.clone(),
                    crl_urls: vec![pki.server.url(&format!("/ca{issuer}.crl"))],
                    issuer_cert: Some(pki.cas[*issuer].der.clone()),
                },
                now,
            )
            .await
            .unwrap();
    }
    let mut batch = Vec::with_capacity(BATCH);
    let mut thumbprints = Vec::with_capacity(BATCH);
    for n in 0..records {
        let leaf = &pki.leaves[n % pki.leaves.len()].1;
        let seed = n as u64 + 1;
        let mut r = testkit::rec(
            "Bench",
            &format!("tool{n}.exe"),
            "1.0",
            Platform::Windows,
            Arch::Amd64,
            seed,
        );
        r.sig_signer = Some(leaf.subject.clone());
        r.sig_issuer = Some(leaf.issuer.clone());
        r.sig_serial = Some(leaf.serial.clone());
        r.sig_thumbprint = Some(leaf.thumbprint.clone());
        batch.push(r);
        thumbprints.push(leaf.thumbprint.clone());
        if batch.len() == BATCH || n + 1 == records {
            let outcomes = store
                .record_many(std::mem::take(&mut batch), now)
                .await
                .unwrap();
            for (outcome, thumbprint) in outcomes.iter().zip(thumbprints.drain(..)) {
                if let store::RecordOutcome::Inserted { id, .. } = outcome {
                    store.record_signed_by(id, &thumbprint).await.unwrap();
                }
            }
        }
    }
    store
}

struct Times {
    first: Duration,
    forced: Duration,
    cached: Duration,
    revoked_records: usize,
}

async fn measure(store: &dyn Store, clock: &FixedClock, options: &RevocationOptions) -> Times {
    let outbound = ingest::OutboundSettings::default();
    let started = Instant::now();
    let report = check(store, clock, options, &outbound, false)
        .await
        .unwrap();
    let first = started.elapsed();
    assert_eq!(report.newly_revoked, ISSUERS, "{report:?}");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    clock.advance(chrono::Duration::hours(6));
    let started = Instant::now();
    let report = check(store, clock, options, &outbound, true).await.unwrap();
    let forced = started.elapsed();
    assert_eq!((report.fetched, report.newly_revoked), (ISSUERS, 0));
    clock.advance(chrono::Duration::hours(6));
    let started = Instant::now();
    let report = check(store, clock, options, &outbound, false)
        .await
        .unwrap();
    let cached = started.elapsed();
    assert_eq!(
        (report.fetched, report.checked),
        (0, ISSUERS * CERTS_PER_ISSUER)
    );
    let mut revoked_records = 0;
    let mut after = None;
    loop {
        let page = store.records_after(after.as_deref(), 10_000).await.unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        revoked_records += page
            .iter()
            .filter(|r| r.cert_revoked_at.is_some() && r.integrity_ok)
            .count();
    }
    Times {
        first,
        forced,
        cached,
        revoked_records,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (mut records, mut baseline) = (100_000usize, 1_000usize);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .and_then(|v| v.parse().ok())
            .expect("a number after the flag");
        match flag.as_str() {
            "--records" => records = value,
            "--baseline" => baseline = value,
            other => panic!("unknown flag {other}"),
        }
    }
    let now: DateTime<Utc> = "2026-03-10T00:00:00Z".parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(now).await;
    let options = RevocationOptions {
        client: Some(reqwest::Client::builder().no_proxy().build().unwrap()),
        ..RevocationOptions::default()
    };
    let mut results = Vec::new();
    for n in [baseline, records] {
        let started = Instant::now();
        let loaded = store_with(n, &pki, dir.path(), now).await;
        eprintln!(
            "loaded {n} records in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        // Closing checkpoints the write-ahead log of the load, so its cost is not charged
        // to the first check.
        loaded.close().await;
        let url = format!("sqlite://{}/bench-{n}.db", dir.path().display());
        let store = store::open(&url, RecordSigner::new(b"bench-record-secret"))
            .await
            .unwrap();
        let clock = FixedClock::new(now);
        let times = measure(store.as_ref(), &clock, &options).await;
        store.close().await;
        results.push((n, times));
    }
    println!(
        "{} certificates under {} issuers; first check = fetch + verify 5 CRLs, record 5 revocations, mark their records",
        ISSUERS * CERTS_PER_ISSUER,
        ISSUERS
    );
    println!(
        "{:>9} {:>14} {:>12} {:>12} {:>12}",
        "records", "marked", "first ms", "forced ms", "cached ms"
    );
    for (n, t) in &results {
        println!(
            "{n:>9} {:>14} {:>12.1} {:>12.1} {:>12.1}",
            t.revoked_records,
            ms(t.first),
            ms(t.forced),
            ms(t.cached)
        );
    }
    let (small, large) = (&results[0].1, &results[1].1);
    println!(
        "ratio {}x records: first {:.2}, forced (304) {:.2}, cached {:.2}",
        records / baseline.max(1),
        ms(large.first) / ms(small.first),
        ms(large.forced) / ms(small.forced),
        ms(large.cached) / ms(small.cached)
    );
}
