//! A PyPI history horizon through the refresh into the store: past versions are superseded
//! history starting at their upload times, the newest is current from the refresh.

use std::sync::Arc;

use jobs::refresh::{HistorySetting, RefreshOptions, VendorOverride, refresh_vendors, vendor_ids};
use model::{FixedClock, RecordStatus};
use serde_json::json;
use store::HistoryQuery;
use testkit::vendor::Site;
use testkit::{Db, t};

testkit::backend_tests!(a_history_horizon_records_past_versions_from_their_upload_times,);

const UPLOADS: [(&str, &str); 4] = [
    ("2.31.0", "2023-05-22T15:12:42.313790Z"),
    ("2.32.0", "2024-05-20T15:45:39.542115Z"),
    ("2.32.2", "2024-05-21T18:51:35.553415Z"),
    ("2.32.3", "2024-05-29T15:37:49.011825Z"),
];

fn site() -> Site {
    let mut releases = serde_json::Map::new();
    for (i, (version, uploaded)) in UPLOADS.iter().enumerate() {
        let file = format!("requests-{version}.tar.gz");
        let sha = format!("{:064x}", 0xabc0 + i);
        releases.insert(
            (*version).to_owned(),
            json!([{"filename": file, "packagetype": "sdist", "python_version": "source",
                    "digests": {"sha256": sha, "md5": format!("{:032x}", 0x10 + i)},
                    "upload_time_iso_8601": uploaded, "url": format!("{{BASE}}/packages/{file}"),
                    "yanked": false}]),
        );
    }
    Site::new().file(
        "/pypi/requests/json",
        json!({"info": {"name": "requests", "version": "2.32.3"}, "releases": releases})
            .to_string(),
    )
}

async fn a_history_horizon_records_past_versions_from_their_upload_times(db: Db) {
    let base = site().serve().await;
    let vendors = vendor_ids()
        .into_iter()
        .map(|id| {
            let on = id == "pypi";
            let o = VendorOverride {
                enabled: Some(on),
                base_url: on.then(|| base.clone()),
                items: on.then(|| vec!["requests".to_owned()]),
                history: on.then_some(HistorySetting::Count(3)),
                ..Default::default()
            };
            (id, o)
        })
        .collect();
    let mut options = RefreshOptions {
        vendors,
        attempts: 1,
        client: Some(testkit::vendor::https_client()),
        ..RefreshOptions::default()
    };
    options.limits.members.enabled = false;
    let now = t("2026-03-10T02:00:00Z");
    let clock = Arc::new(FixedClock::new(now));
    let reports = refresh_vendors(db.store.clone(), clock, &options, Some("pypi"), &|_| {})
        .await
        .expect("refresh");
    assert_eq!(reports[0].problems, vec![], "{reports:?}");
    assert_eq!((reports[0].recorded, reports[0].downloaded), (3, 0));
    let history = db
        .store
        .history(&HistoryQuery {
            executable: "requests (pypi)".into(),
            platform: None,
            arch: None,
            limit: 10,
            offset: 0,
        })
        .await
        .expect("history");
    let seen: Vec<(&str, RecordStatus, _, _)> = history
        .items
        .iter()
        .map(|r| {
            (
                r.record.version.as_str(),
                r.status,
                r.valid_from,
                r.valid_until,
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("2.32.3", RecordStatus::Current, now, None),
            (
                "2.32.2",
                RecordStatus::Superseded,
                t(UPLOADS[2].1),
                Some(now)
            ),
            (
                "2.32.0",
                RecordStatus::Superseded,
                t(UPLOADS[1].1),
                Some(t(UPLOADS[2].1))
            ),
        ]
    );
}
