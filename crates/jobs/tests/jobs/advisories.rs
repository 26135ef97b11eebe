//! The advisory refresh against OSV-format zip archives and documents served on loopback:
//! once per slot under its lease, what it stores, and URLs that fail without stopping the
//! others.

use std::io::Write as _;

use super::*;
use jobs::advisories::{AdvisoryJob, AdvisorySource, JOB, refresh};
use testkit::pki::CrlServer;

testkit::backend_tests!(
    the_refresh_runs_once_per_slot_and_stores_the_advisories,
    a_failing_url_imports_nothing_of_its_own_while_the_others_are_imported,
);

/// A real OSV advisory (PyPI `requests`), as osv.dev serves it.
const REQUESTS: &str = include_str!("../../../../tests/clients/sbom/GHSA-9wx4-h78v-vm56.json");

fn osv(id: &str, ecosystem: &str, name: &str) -> String {
    format!(
        r#"{{"schema_version":"1.6.0","id":"{id}","modified":"2024-05-01T00:00:00Z",
        "summary":"{name} is affected","affected":[{{"package":{{"ecosystem":"{ecosystem}","name":"{name}"}},
        "ranges":[{{"type":"ECOSYSTEM","events":[{{"introduced":"0"}},{{"fixed":"9.9.9"}}]}}]}}]}}"#
    )
}

/// A zip archive laid out as OSV's `all.zip`: one `<id>.json` per advisory.
fn all_zip(docs: &[(&str, &str)]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    for (id, doc) in docs {
        zip.start_file(format!("{id}.json"), options).unwrap();
        zip.write_all(doc.as_bytes()).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

fn source(server: &CrlServer, paths: &[&str]) -> AdvisorySource {
    AdvisorySource {
        urls: paths
            .iter()
            .map(|p| reqwest::Url::parse(&server.url(p)).unwrap())
            .collect(),
        interval: std::time::Duration::from_secs(6 * 3600),
        max_download_bytes: 1 << 20,
        timeout: std::time::Duration::from_secs(20),
        client: Some(reqwest::Client::builder().no_proxy().build().unwrap()),
    }
}

async fn advisories_of(db: &Db, ecosystem: &str, name: &str) -> Vec<String> {
    db.store
        .advisories_for(&[(ecosystem.to_string(), name.to_string())])
        .await
        .unwrap()
}

fn stats(runner: &Runner) -> (u64, u64) {
    let (_, stats) = runner.stats().find(|(name, _)| *name == JOB).unwrap();
    (
        stats.succeeded.load(std::sync::atomic::Ordering::Relaxed),
        stats.failed.load(std::sync::atomic::Ordering::Relaxed),
    )
}

async fn the_refresh_runs_once_per_slot_and_stores_the_advisories(db: Db) {
    assert!(
        Runner::default().stats().any(|(name, _)| name == JOB),
        "the refresh is one of the cluster jobs"
    );
    let off = Env::new(&db, JobSettings::default()).await;
    assert_eq!(
        AdvisoryJob.due(&off.ctx, off.clock.now()).await.unwrap(),
        None
    );

    let server = CrlServer::start().await;
    server.set(
        "/PyPI/all.zip",
        all_zip(&[
            ("GHSA-9wx4-h78v-vm56", REQUESTS),
            ("DSA-1", &osv("DSA-1", "Debian:12", "openssl")),
        ]),
    );
    let env = Env::new(
        &db,
        JobSettings {
            advisories: Some(source(&server, &["/PyPI/all.zip"])),
            ..JobSettings::default()
        },
    )
    .await;
    let now = t("2026-03-10T07:30:00Z");
    match AdvisoryJob.due(&env.ctx, now).await.unwrap() {
        Some(Due::Leased(lease)) => {
            assert_eq!(lease.name, "advisories.refresh:2026-03-10T06:00:00Z");
            assert_eq!(lease.until, t("2026-03-10T12:00:00Z"));
        }
        other => panic!("expected a leased run, got {other:?}"),
    }
    assert!(advisories_of(&db, "pypi", "requests").await.is_empty());

    let runner = Runner::new(vec![Arc::new(AdvisoryJob)]);
    let runs = runner.start_due(&env.ctx, now).await;
    assert_eq!(runs.len(), 1);
    finish(runs).await;
    assert_eq!(stats(&runner), (1, 0));
    let stored = advisories_of(&db, "pypi", "requests").await;
    assert_eq!(stored.len(), 1);
    assert!(stored[0].contains("CVE-2024-35195"), "{}", stored[0]);

    // Done for the slot, here and on another replica.
    assert!(runner.start_due(&env.ctx, now).await.is_empty());
    let other = Runner::new(vec![Arc::new(AdvisoryJob)]);
    assert!(other.start_due(&env.replica(), now).await.is_empty());
    assert_eq!(server.requests("/PyPI/all.zip").0, 1);

    // The next slot downloads again: whichever replica comes first.
    let later = t("2026-03-10T12:00:30Z");
    let runs = other.start_due(&env.replica(), later).await;
    assert_eq!(runs.len(), 1);
    finish(runs).await;
    assert!(runner.start_due(&env.ctx, later).await.is_empty());
    assert_eq!(server.requests("/PyPI/all.zip").0, 2);
    assert_eq!(stats(&other), (1, 0));
    assert_eq!(advisories_of(&db, "pypi", "requests").await.len(), 1);
}

async fn a_failing_url_imports_nothing_of_its_own_while_the_others_are_imported(db: Db) {
    let server = CrlServer::start().await;
    let lodash = osv("GHSA-aaaa-bbbb-cccc", "npm", "lodash");
    let left_pad = osv("GHSA-dddd-eeee-ffff", "npm", "left-pad");
    server.set("/npm/all.zip", all_zip(&[("GHSA-aaaa-bbbb-cccc", &lodash)]));
    server.set("/GHSA-9wx4-h78v-vm56.json", REQUESTS.as_bytes().to_vec());
    // A good document, then one that is not OSV: the archive as a whole is refused.
    server.set(
        "/bad-member/all.zip",
        all_zip(&[
            ("GHSA-dddd-eeee-ffff", &left_pad),
            ("GHSA-zzzz", r#"{"id": "#),
        ]),
    );
    let whole = all_zip(&[("GHSA-dddd-eeee-ffff", &left_pad)]);
    server.set("/truncated/all.zip", whole[..whole.len() / 2].to_vec());
    server.endless("/huge/all.zip", 4 << 20);
    let paths = [
        "/missing/all.zip",
        "/bad-member/all.zip",
        "/npm/all.zip",
        "/truncated/all.zip",
        "/huge/all.zip",
        "/GHSA-9wx4-h78v-vm56.json",
    ];
    let source = source(&server, &paths);
    let env = Env::new(
        &db,
        JobSettings {
            advisories: Some(source.clone()),
            ..JobSettings::default()
        },
    )
    .await;

    let report = refresh(
        db.store.as_ref(),
        env.clock.as_ref(),
        &source,
        &ingest::OutboundSettings::default(),
    )
    .await
    .unwrap();
    assert_eq!(report.urls_good, 2);
    assert_eq!((report.read, report.written, report.skipped), (2, 2, 0));
    let errors: Vec<&str> = report.failed.iter().map(|(_, e)| e.as_str()).collect();
    assert_eq!(errors.len(), 4, "{errors:?}");
    assert!(
        errors[0].starts_with("http_status:") && errors[0].contains("404"),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with("corrupt:") && errors[1].contains("GHSA-zzzz.json"),
        "{errors:?}"
    );
    assert!(errors[2].starts_with("corrupt:"), "{errors:?}");
    assert!(errors[3].starts_with("too_large:"), "{errors:?}");
    assert!(report.failed[0].0.ends_with("/missing/all.zip"));

    assert_eq!(advisories_of(&db, "npm", "lodash").await.len(), 1);
    assert_eq!(advisories_of(&db, "pypi", "requests").await.len(), 1);
    assert!(
        advisories_of(&db, "npm", "left-pad").await.is_empty(),
        "nothing of a corrupt archive is imported"
    );

    // The scheduled run imports the same and counts as failed, so the failure shows.
    let runner = Runner::new(vec![Arc::new(AdvisoryJob)]);
    finish(runner.start_due(&env.ctx, env.clock.now()).await).await;
    assert_eq!(stats(&runner), (0, 1));
    assert_eq!(advisories_of(&db, "npm", "lodash").await.len(), 1);
    assert!(advisories_of(&db, "npm", "left-pad").await.is_empty());

    // Without a client given, the outbound client of the vendor refresh is used: HTTPS
    // only, so a plain-HTTP URL is never requested.
    let before = server.requests("/npm/all.zip").0;
    let plain = AdvisorySource {
        client: None,
        ..source.clone()
    };
    let report = refresh(
        db.store.as_ref(),
        env.clock.as_ref(),
        &plain,
        &ingest::OutboundSettings::default(),
    )
    .await
    .unwrap();
    assert_eq!(report.urls_good, 0);
    assert_eq!(report.failed.len(), paths.len());
    assert!(
        report.failed[2].1.starts_with("unreachable:"),
        "{:?}",
        report.failed
    );
    assert_eq!(server.requests("/npm/all.zip").0, before);
}
