//! The coverage queue through the refresh into the store: an SBOM's PyPI versions queued,
//! then recorded pinned (wheel and module) by the next refresh beside the channel's own
//! items, each request closed as done or failed with the channel's reason; npm versions,
//! scoped ones included, the same way.

use std::io::Write as _;
use std::sync::Arc;

use jobs::refresh::{RefreshOptions, VendorOverride, refresh_queued, refresh_vendors, vendor_ids};
use model::{Arch, FixedClock, Platform, RecordStatus};
use serde_json::json;
use sha2::Digest as _;
use store::HistoryQuery;
use testkit::vendor::Site;
use testkit::{Db, t};

testkit::backend_tests!(
    a_refresh_records_the_queued_pinned_versions_and_closes_each_request,
    queued_versions_are_recorded_alone_on_request,
    queued_npm_versions_are_recorded_pinned,
);

const MODULE: &str = "cryptography/hazmat/bindings/_rust.abi3.so";

fn wheel_name(version: &str) -> String {
    format!("cryptography-{version}-cp39-abi3-manylinux_2_28_x86_64.whl")
}

/// A manylinux wheel holding one extension module; (wheel, module).
fn wheel(version: &str) -> (Vec<u8>, Vec<u8>) {
    let mut module = b"\x7fELF\x02\x01\x01\x00".to_vec();
    module.extend(format!("_rust.abi3.so {version}").repeat(64).bytes());
    let mut out = Vec::new();
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(&mut out));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    w.start_file(MODULE, options).unwrap();
    w.write_all(&module).unwrap();
    w.finish().unwrap();
    (out, module)
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// PyPI with two releases of cryptography, each one wheel (served), in the Warehouse JSON
/// format; the module bytes per version.
fn site() -> (Site, Vec<(&'static str, Vec<u8>)>) {
    let site = Site::new();
    let mut releases = serde_json::Map::new();
    let mut modules = Vec::new();
    for (version, uploaded) in [
        ("41.0.7", "2023-11-28T00:06:17.018238Z"),
        ("44.0.0", "2024-11-27T18:06:39.471923Z"),
    ] {
        let (bytes, module) = wheel(version);
        let file = wheel_name(version);
        releases.insert(
            version.to_owned(),
            json!([{"filename": file, "packagetype": "bdist_wheel", "python_version": "cp39",
                    "digests": {"sha256": sha256(&bytes)},
                    "upload_time_iso_8601": uploaded, "url": format!("{{BASE}}/packages/{file}"),
                    "yanked": false}]),
        );
        site.file(&format!("/packages/{file}"), bytes);
        modules.push((version, module));
    }
    site.file(
        "/pypi/cryptography/json",
        json!({"info": {"name": "cryptography", "version": "44.0.0"}, "releases": releases})
            .to_string(),
    );
    (site.status("/pypi/cryptography/9.9.9/json", 404), modules)
}

/// Only PyPI, at `base`, following `items`; members read.
fn options(base: &str, items: &[&str]) -> RefreshOptions {
    options_for("pypi", base, items)
}

/// Only the channel `vendor`, at `base`, following `items`; members read.
pub(crate) fn options_for(vendor: &str, base: &str, items: &[&str]) -> RefreshOptions {
    let vendors = vendor_ids()
        .into_iter()
        .map(|id| {
            let on = id == vendor;
            let o = VendorOverride {
                enabled: Some(on),
                base_url: on.then(|| base.to_owned()),
                items: on.then(|| items.iter().map(|i| (*i).to_owned()).collect()),
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
    options.limits.members.enabled = true;
    options
}

/// Queues what `purls` name, as the coverage route does.
pub(crate) async fn queue_sbom(db: &Db, purls: &[&str]) -> jobs::coverage::Queued {
    let components: Vec<_> = purls
        .iter()
        .map(|p| json!({"type": "library", "name": p, "purl": p}))
        .collect();
    let sbom = json!({"bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1,
                      "components": components})
    .to_string();
    let sbom = packages::sbom::parse(sbom.as_bytes()).expect("SBOM");
    let plan = jobs::coverage::plan(&sbom).expect("plan");
    jobs::coverage::request(db.store.as_ref(), &plan.items, t("2026-03-09T12:00:00Z"))
        .await
        .expect("queue")
}

/// The queue: "ecosystem name version state [error]".
pub(crate) async fn entries(db: &Db) -> Vec<String> {
    db.store
        .coverage_entries(None, 100, 0)
        .await
        .expect("entries")
        .items
        .iter()
        .map(|e| {
            let mut line = format!(
                "{} {} {} {}",
                e.item.ecosystem,
                e.item.name,
                e.item.version,
                e.state.as_str()
            );
            if let Some(error) = &e.error {
                line.push(' ');
                line.push_str(error);
            }
            line
        })
        .collect()
}

async fn versions_of(db: &Db, name: &str) -> Vec<(String, RecordStatus)> {
    db.store
        .history(&HistoryQuery {
            executable: name.into(),
            platform: Some(Platform::Linux),
            arch: Some(Arch::Amd64),
            limit: 10,
            offset: 0,
        })
        .await
        .expect("history")
        .items
        .iter()
        .map(|r| (r.record.version.clone(), r.status))
        .collect()
}

async fn a_refresh_records_the_queued_pinned_versions_and_closes_each_request(db: Db) {
    let (site, modules) = site();
    let base = site.serve().await;
    let queued = queue_sbom(
        &db,
        &[
            "pkg:pypi/cryptography@41.0.7",
            "pkg:pypi/cryptography@9.9.9",
            "pkg:deb/debian/curl@7.88.1-10%2Bdeb12u5",
        ],
    )
    .await;
    assert_eq!(queued.queued.len(), 3);

    let now = t("2026-03-10T02:00:00Z");
    let clock = Arc::new(FixedClock::new(now));
    let reports = refresh_vendors(
        db.store.clone(),
        clock.clone(),
        &options(&base, &["cryptography"]),
        None,
        &|_| {},
    )
    .await
    .expect("refresh");
    let ran: Vec<&str> = reports
        .iter()
        .filter(|r| !r.skipped)
        .map(|r| r.fetcher.as_str())
        .collect();
    assert_eq!(ran, vec!["pypi", "pypi (coverage queue)"]);
    assert_eq!(
        reports
            .iter()
            .find(|r| r.fetcher == "pypi")
            .unwrap()
            .problems,
        vec![]
    );
    let pass = reports
        .iter()
        .find(|r| r.fetcher == "pypi (coverage queue)")
        .unwrap();
    // The pinned wheel and its module.
    assert_eq!((pass.downloaded, pass.members), (1, 1), "{pass:?}");

    // The newest from the channel's own run is current; the queued version joins the
    // history, its module included, starting at its upload time.
    assert_eq!(
        versions_of(&db, &wheel_name("44.0.0")).await,
        vec![
            ("44.0.0".to_string(), RecordStatus::Current),
            ("41.0.7".to_string(), RecordStatus::Superseded),
        ]
    );
    let module = db
        .store
        .history(&HistoryQuery {
            executable: format!("{}/{MODULE}", wheel_name("41.0.7")),
            limit: 10,
            ..HistoryQuery::default()
        })
        .await
        .expect("history");
    let old = module
        .items
        .iter()
        .find(|r| r.record.version == "41.0.7")
        .expect("the queued version's module");
    assert_eq!(old.record.hash_sha256, sha256(&modules[0].1));
    assert_eq!(old.valid_from, t("2023-11-28T00:06:17.018238Z"));

    // Each request closed with its outcome; the disabled channel's stays queued.
    let shown = entries(&db).await;
    assert_eq!(shown[0], "debian curl 7.88.1-10+deb12u5 queued");
    assert_eq!(shown[1], "pypi cryptography 41.0.7 done");
    assert!(
        shown[2].starts_with("pypi cryptography 9.9.9 failed discovery: ")
            && shown[2].contains("9.9.9/json answered HTTP 404"),
        "{shown:?}"
    );
    // A version an inventory named that the channel lacks is no fault of the channel.
    let health = db.store.vendor_health().await.expect("health");
    let pypi = health
        .iter()
        .find(|h| h.vendor == "pypi")
        .expect("pypi health");
    assert_eq!(
        (pypi.last_error.as_deref(), pypi.last_success_at),
        (None, Some(now))
    );

    // The next refresh has nothing queued for PyPI: no pass, nothing downloaded.
    let again = refresh_vendors(
        db.store.clone(),
        clock,
        &options(&base, &["cryptography"]),
        Some("pypi"),
        &|_| {},
    )
    .await
    .expect("refresh");
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].downloaded, 0);
}

async fn queued_versions_are_recorded_alone_on_request(db: Db) {
    let (site, _) = site();
    let base = site.serve().await;
    queue_sbom(&db, &["pkg:pypi/Cryptography@41.0.7"]).await;
    let clock = Arc::new(FixedClock::new(t("2026-03-10T09:00:00Z")));
    // The channel follows something else; only the queue is read.
    let reports = refresh_queued(
        db.store.clone(),
        clock,
        &options(&base, &["requests"]),
        None,
        &|_| {},
    )
    .await
    .expect("refresh");
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].fetcher, "pypi (coverage queue)");
    assert_eq!(reports[0].problems, vec![]);
    assert!(!site.hit("/pypi/requests/json"));
    assert!(!site.hit(&format!("/packages/{}", wheel_name("44.0.0"))));
    assert_eq!(
        versions_of(&db, &wheel_name("41.0.7")).await,
        vec![("41.0.7".to_string(), RecordStatus::Current)]
    );
    assert_eq!(entries(&db).await, vec!["pypi cryptography 41.0.7 done"]);
    // Known now: the same inventory queues nothing.
    let again = queue_sbom(&db, &["pkg:pypi/cryptography@41.0.7"]).await;
    assert_eq!((again.queued.len(), again.known.len()), (0, 1));
}

/// An npm registry in the packument format (`dist.shasum` is the tarball's SHA-1, tarball
/// links absolute as the public registry writes them): lodash 4.17.20 and 4.17.21, and
/// the scoped @types/node 20.11.5. The tarball bytes per path.
fn npm_site() -> (Site, Vec<(String, Vec<u8>)>) {
    let site = Site::new();
    let mut tarballs = Vec::new();
    let mut packument = |name: &str, escaped: &str, versions: &[(&str, &str)]| {
        let mut listed = serde_json::Map::new();
        let mut time = serde_json::Map::new();
        let file = name.rsplit('/').next().unwrap_or(name);
        for (version, published) in versions {
            let path = format!("{name}/-/{file}-{version}.tgz");
            let bytes = format!("{name} {version} tarball").repeat(40).into_bytes();
            let shasum = hex::encode(<sha1::Sha1 as sha1::Digest>::digest(&bytes));
            listed.insert(
                (*version).to_owned(),
                json!({"name": name, "version": version,
                       "dist": {"shasum": shasum, "tarball": format!("{{BASE}}/{path}")}}),
            );
            time.insert((*version).to_owned(), json!(published));
            site.file(&format!("/{path}"), bytes.clone());
            tarballs.push((path, bytes));
        }
        let latest = versions.last().map(|v| v.0).unwrap_or_default();
        site.file(
            &format!("/{escaped}"),
            json!({"name": name, "dist-tags": {"latest": latest}, "versions": listed,
                   "time": time})
            .to_string(),
        );
    };
    packument(
        "lodash",
        "lodash",
        &[
            ("4.17.20", "2020-08-13T16:53:54.152Z"),
            ("4.17.21", "2021-02-20T15:42:16.891Z"),
        ],
    );
    packument(
        "@types/node",
        "@types%2Fnode",
        &[("20.11.5", "2024-01-18T06:36:28.000Z")],
    );
    (site, tarballs)
}

async fn queued_npm_versions_are_recorded_pinned(db: Db) {
    let (site, tarballs) = npm_site();
    let base = site.serve().await;
    let queued = queue_sbom(
        &db,
        &[
            "pkg:npm/lodash@4.17.20",
            "pkg:npm/%40types/node@20.11.5",
            "pkg:npm/lodash@9.9.9",
        ],
    )
    .await;
    assert_eq!(queued.queued.len(), 3);
    let mut options = options_for("npm", &base, &["left-pad"]);
    options.limits.members.enabled = false;
    let clock = Arc::new(FixedClock::new(t("2026-03-10T09:00:00Z")));
    let reports = refresh_queued(db.store.clone(), clock, &options, None, &|_| {})
        .await
        .expect("refresh");
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].fetcher, "npm (coverage queue)");
    assert_eq!(reports[0].downloaded, 2, "{:?}", reports[0]);
    // Only the queued versions: not the newest, not what the channel follows.
    assert!(!site.hit("/lodash/-/lodash-4.17.21.tgz"));
    assert!(!site.hit("/left-pad"));

    let recorded = |name: &'static str| {
        let store = db.store.clone();
        async move {
            store
                .history(&HistoryQuery {
                    executable: name.into(),
                    limit: 10,
                    ..HistoryQuery::default()
                })
                .await
                .expect("history")
                .items
        }
    };
    let lodash = recorded("lodash (npm)").await;
    assert_eq!(lodash.len(), 1);
    assert_eq!(lodash[0].record.version, "4.17.20");
    assert_eq!(lodash[0].record.hash_sha256, sha256(&tarballs[0].1));
    assert_eq!(lodash[0].valid_from, t("2020-08-13T16:53:54.152Z"));
    let types = recorded("@types/node (npm)").await;
    assert_eq!(types.len(), 1);
    assert_eq!(types[0].record.version, "20.11.5");
    assert_eq!(types[0].record.hash_sha256, sha256(&tarballs[2].1));

    let shown = entries(&db).await;
    assert_eq!(shown[0], "npm @types/node 20.11.5 done");
    assert_eq!(shown[1], "npm lodash 4.17.20 done");
    assert!(
        shown[2].starts_with("npm lodash 9.9.9 failed "),
        "{shown:?}"
    );
}
