//! The coverage queue on both backends: queueing, taking and closing requests, and the
//! record probes that tell which versions are already known.

use model::{Arch, Platform};
use store::coverage::{CoverageItem, CoverageState, RecordProbe};
use testkit::{Db, rec, t};

testkit::backend_tests!(
    queued_versions_wait_once_and_close_with_their_outcome,
    a_request_queued_again_is_not_closed_by_an_earlier_refresh,
    record_probes_find_packages_and_debs_of_any_release,
);

fn item(ecosystem: &str, name: &str, version: &str) -> CoverageItem {
    CoverageItem {
        ecosystem: ecosystem.into(),
        name: name.into(),
        version: version.into(),
    }
}

async fn queued_versions_wait_once_and_close_with_their_outcome(db: Db) {
    let s = db.store.as_ref();
    let first = [
        item("pypi", "cryptography", "42.0.5"),
        item("debian", "curl", "7.88.1-10+deb12u5"),
        item("pypi", "cffi", "1.16.0"),
    ];
    let waiting = s
        .queue_coverage(&first, t("2025-03-10T08:00:00Z"))
        .await
        .unwrap();
    assert_eq!(waiting, vec![None, None, None]);
    // A second request naming one of them again: it keeps its place.
    let again = [
        item("pypi", "cffi", "1.16.0"),
        item("npm", "lodash", "4.17.20"),
    ];
    let waiting = s
        .queue_coverage(&again, t("2025-03-10T09:00:00Z"))
        .await
        .unwrap();
    assert_eq!(waiting, vec![Some(CoverageState::Queued), None]);

    let pypi = s.queued_coverage("pypi", 100).await.unwrap();
    let names: Vec<&str> = pypi.iter().map(|e| e.item.name.as_str()).collect();
    assert_eq!(names, vec!["cffi", "cryptography"]);
    assert!(pypi.iter().all(|e| e.state == CoverageState::Queued));
    assert_eq!(pypi[0].requested_at, t("2025-03-10T08:00:00Z"));
    assert_eq!(s.queued_coverage("pypi", 1).await.unwrap().len(), 1);
    assert_eq!(s.queued_coverage("debian", 100).await.unwrap().len(), 1);

    let now = t("2025-03-11T02:10:00Z");
    s.finish_coverage(&pypi[0], None, now).await.unwrap();
    s.finish_coverage(&pypi[1], Some("discovery: 404"), now)
        .await
        .unwrap();
    assert!(s.queued_coverage("pypi", 100).await.unwrap().is_empty());
    let all = s.coverage_entries(None, 100, 0).await.unwrap();
    assert_eq!(all.total, 4);
    let shown: Vec<(String, &str, Option<&str>)> = all
        .items
        .iter()
        .map(|e| {
            (
                format!("{} {} {}", e.item.ecosystem, e.item.name, e.item.version),
                e.state.as_str(),
                e.error.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        vec![
            ("debian curl 7.88.1-10+deb12u5".to_string(), "queued", None),
            ("npm lodash 4.17.20".to_string(), "queued", None),
            ("pypi cffi 1.16.0".to_string(), "done", None),
            (
                "pypi cryptography 42.0.5".to_string(),
                "failed",
                Some("discovery: 404")
            ),
        ]
    );
    assert_eq!(all.items[2].finished_at, Some(now));
    let failed = s
        .coverage_entries(Some(CoverageState::Failed), 100, 0)
        .await
        .unwrap();
    assert_eq!(failed.total, 1);
    assert_eq!(failed.items[0].item.name, "cryptography");
    let waiting = s
        .coverage_entries(Some(CoverageState::Queued), 1, 1)
        .await
        .unwrap();
    assert_eq!((waiting.total, waiting.items.len()), (2, 1));
    assert_eq!(waiting.items[0].item.name, "lodash");
    // A failed version asked for again is queued again, its error cleared; a done one
    // stays done.
    let before = s
        .queue_coverage(
            &[
                item("pypi", "cryptography", "42.0.5"),
                item("pypi", "cffi", "1.16.0"),
            ],
            t("2025-03-12T08:00:00Z"),
        )
        .await
        .unwrap();
    assert_eq!(
        before,
        vec![Some(CoverageState::Failed), Some(CoverageState::Done)]
    );
    let requeued = s.queued_coverage("pypi", 100).await.unwrap();
    assert_eq!(requeued.len(), 1);
    assert_eq!(
        (requeued[0].error.as_deref(), requeued[0].finished_at),
        (None, None)
    );
    let page = s.coverage_entries(None, 2, 1).await.unwrap();
    assert_eq!((page.total, page.items.len()), (4, 2));
    assert_eq!(page.items[0].item.name, "lodash");
}

async fn a_request_queued_again_is_not_closed_by_an_earlier_refresh(db: Db) {
    let s = db.store.as_ref();
    let wanted = [item("npm", "lodash", "4.17.20")];
    s.queue_coverage(&wanted, t("2025-03-10T08:00:00Z"))
        .await
        .unwrap();
    let taken = s.queued_coverage("npm", 10).await.unwrap();
    s.finish_coverage(
        &taken[0],
        Some("download: timed out"),
        t("2025-03-10T08:05:00Z"),
    )
    .await
    .unwrap();
    // Asked for again, then the earlier refresh's entry is closed once more (a replica
    // that took it before): the new request stays queued.
    s.queue_coverage(&wanted, t("2025-03-10T09:00:00Z"))
        .await
        .unwrap();
    s.finish_coverage(&taken[0], None, t("2025-03-10T09:01:00Z"))
        .await
        .unwrap();
    let now = s.queued_coverage("npm", 10).await.unwrap();
    assert_eq!(now.len(), 1);
    assert_ne!(now[0].ticket, taken[0].ticket);
    s.finish_coverage(&now[0], None, t("2025-03-10T09:02:00Z"))
        .await
        .unwrap();
    assert!(s.queued_coverage("npm", 10).await.unwrap().is_empty());
}

async fn record_probes_find_packages_and_debs_of_any_release(db: Db) {
    let s = db.store.as_ref();
    let now = t("2025-03-10T08:00:00Z");
    for r in [
        rec(
            "pypi",
            "cryptography (pypi)",
            "42.0.5",
            Platform::Universal,
            Arch::Universal,
            1,
        ),
        rec(
            "Debian bookworm",
            "curl_7.88.1-10+deb12u5_amd64.deb",
            "7.88.1-10+deb12u5",
            Platform::Linux,
            Arch::Amd64,
            2,
        ),
        // A member of the package carries its version too, but is not the package.
        rec(
            "Debian bookworm",
            "usr/bin/wget",
            "1.21.3-1+b2",
            Platform::Linux,
            Arch::Amd64,
            3,
        ),
    ] {
        s.record(r, now).await.unwrap();
    }
    let probe = |vendor: &str, prefix: bool, names: &[&str], version: &str| RecordProbe {
        vendor: vendor.into(),
        vendor_prefix: prefix,
        names: names.iter().map(|n| (*n).to_string()).collect(),
        version: version.into(),
    };
    let found = s
        .records_exist(&[
            // Names match as the store compares them (case folded).
            probe("pypi", false, &["Cryptography (PyPI)"], "42.0.5"),
            probe("pypi", false, &["cryptography (pypi)"], "41.0.7"),
            probe("npm", false, &["cryptography (pypi)"], "42.0.5"),
            probe(
                "Debian ",
                true,
                &[
                    "curl_7.88.1-10+deb12u5_arm64.deb",
                    "curl_7.88.1-10+deb12u5_amd64.deb",
                ],
                "7.88.1-10+deb12u5",
            ),
            probe(
                "Ubuntu",
                false,
                &["curl_7.88.1-10+deb12u5_amd64.deb"],
                "7.88.1-10+deb12u5",
            ),
            probe(
                "Debian ",
                true,
                &["wget_1.21.3-1+b2_amd64.deb"],
                "1.21.3-1+b2",
            ),
            probe("Debian ", true, &[], "1.21.3-1+b2"),
        ])
        .await
        .unwrap();
    assert_eq!(found, vec![true, false, false, true, false, false, false]);
}
