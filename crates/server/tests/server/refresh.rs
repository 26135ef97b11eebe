//! The vendor refresh end to end: `jobs::refresh::refresh_vendors` reads vendor channels
//! served by a loopback plain-HTTP server (the client is injected, so no TLS is needed) and
//! records into the test server's store; the tests then check what a user notices through
//! the HTTP API: the public feed and its cache, history and historical lookup, the download
//! audit, change alerts for republished packages, and per-vendor health on /public/status.
//!
//! The channels served are realistic documents of PuTTY (three checksum files), npm
//! (abbreviated packuments with SHA-1 `shasum`; tarballs downloaded for SHA-256), Go modules
//! (proxy `list`, `.info`, `.zip`), Android platform-tools (`repository2-3.xml`, SHA-1 only)
//! and the Go toolchain (`go.dev/dl/?mode=json`). Every vendor not under test is disabled.
//!
//! Each test runs as `sqlite::<name>` and `postgres::<name>`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use base64::Engine as _;
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use ingest::{DownloadLimits, FetchLimits, VendorReport};
use jobs::refresh::{RefreshOptions, VendorOverride, refresh_vendors, vendor_ids};
use model::{Clock, Role, Tier};
use serde_json::{Value, json};
use sha2::Digest as _;
use testkit::vendor::Site;
use testkit::{TestApp, q};

testkit::backend_tests!(
    a_refresh_feeds_the_public_api,
    a_newer_release_supersedes_the_current_one,
    a_republished_package_raises_a_change_alert,
    watched_packages_are_tracked_at_the_next_refresh,
    one_failing_vendor_never_blocks_the_others,
    a_vanished_item_leaves_the_vendor_degraded,
    an_archive_that_disagrees_with_its_published_hash_is_not_recorded,
);

// ---------------------------------------------------------------------------------------
// Hashes of the served bytes, computed here independently of the service.

fn sha256(data: &[u8]) -> String {
    format!("{:x}", sha2::Sha256::digest(data))
}

fn sha1(data: &[u8]) -> String {
    format!("{:x}", sha1::Sha1::digest(data))
}

fn md5(data: &[u8]) -> String {
    format!("{:x}", md5::Md5::digest(data))
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

// ---------------------------------------------------------------------------------------
// The loopback vendor channels

/// Every vendor channel on one plain-HTTP loopback server, each under `/<fetcher id>/`.
/// Documents can be replaced between refreshes (a new release, a republish, an outage).
#[derive(Clone)]
struct Channels {
    base: String,
    site: Site,
}

impl Channels {
    async fn start() -> Self {
        let site = Site::new();
        let base = site.serve_http().await;
        Self { base, site }
    }

    fn file(&self, path: &str, body: impl Into<Vec<u8>>) {
        self.site.file(path, body);
    }

    /// Every path of vendor `id` answers `status` until [`Channels::up`].
    fn down(&self, id: &str, status: u16) {
        self.site.down_under(&format!("/{id}/"), status);
    }

    fn up(&self, id: &str) {
        self.site.up(&format!("/{id}/"));
    }

    /// `path` answers 503 for its next `times` requests.
    fn flaky(&self, path: &str, times: u32) {
        self.site.flaky(path, times);
    }

    /// Refresh options running exactly `ids`, each against its part of this server; every
    /// other vendor is disabled.
    fn options(&self, ids: &[&str]) -> RefreshOptions {
        let mut vendors: BTreeMap<String, VendorOverride> = vendor_ids()
            .into_iter()
            .map(|id| {
                let off = VendorOverride {
                    enabled: Some(false),
                    ..VendorOverride::default()
                };
                (id, off)
            })
            .collect();
        for id in ids {
            let items = match *id {
                "npm" => Some(vec!["lodash".to_owned()]),
                "gomod" => Some(vec!["golang.org/x/text".to_owned()]),
                _ => None,
            };
            let on = VendorOverride {
                enabled: Some(true),
                base_url: Some(format!("{}/{id}", self.base)),
                files_url: None,
                items,
                ..VendorOverride::default()
            };
            assert!(
                vendors.insert((*id).to_owned(), on).is_some(),
                "unknown vendor {id}"
            );
        }
        RefreshOptions {
            vendors,
            limits: FetchLimits {
                max_versions: 1,
                max_document_bytes: 1 << 20,
                request_timeout: StdDuration::from_secs(10),
                download: DownloadLimits {
                    max_bytes: 1 << 20,
                    connect_timeout: StdDuration::from_secs(5),
                    total_timeout: StdDuration::from_secs(10),
                    max_signature_bytes: 1 << 20,
                },
                members: ingest::MemberLimits {
                    enabled: false,
                    ..Default::default()
                },
                downloads_per_host: 4,
            },
            attempts: 1,
            backoff: StdDuration::from_millis(10),
            client: Some(
                reqwest::Client::builder()
                    .no_proxy()
                    .build()
                    .expect("client"),
            ),
            ..RefreshOptions::default()
        }
    }
}

/// The published hashes of one file of a checksum-file vendor.
#[derive(Debug, Clone)]
struct Sums {
    sha256: String,
    sha1: String,
    md5: String,
}

/// PuTTY `latest/{sha256,sha1,md5}sums` for `version`. The files themselves are never
/// fetched (a SHA-256 is published). Returns the sums by listed name.
fn publish_putty(ch: &Channels, version: &str) -> BTreeMap<String, Sums> {
    let listed = [
        format!("putty-{version}.tar.gz"),
        "w64/putty.exe".to_owned(),
        format!("w64/putty-64bit-{version}-installer.msi"),
        "w64/putty.exe (installer version)".to_owned(),
        "w32/putty.exe".to_owned(),
        "wa64/putty.exe".to_owned(),
    ];
    let sums: BTreeMap<String, Sums> = listed
        .iter()
        .map(|name| {
            let content = format!("PuTTY {version} {name}");
            let s = Sums {
                sha256: sha256(content.as_bytes()),
                sha1: sha1(content.as_bytes()),
                md5: md5(content.as_bytes()),
            };
            (name.clone(), s)
        })
        .collect();
    let file = |pick: fn(&Sums) -> &String| -> String {
        sums.iter()
            .map(|(name, s)| format!("{}  {name}\n", pick(s)))
            .collect()
    };
    ch.file("/putty/latest/sha256sums", file(|s| &s.sha256));
    ch.file("/putty/latest/sha1sums", file(|s| &s.sha1));
    ch.file("/putty/latest/md5sums", file(|s| &s.md5));
    sums
}

/// A tarball-like body (gzip magic, then content that differs per `salt`).
fn tarball(label: &str, salt: &str) -> Vec<u8> {
    let mut bytes = vec![0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03];
    bytes.extend(
        format!("package/package.json {label} {salt}\n")
            .repeat(64)
            .bytes(),
    );
    bytes
}

/// A zip-like body for a Go module.
fn module_zip(label: &str) -> Vec<u8> {
    let mut bytes = b"PK\x03\x04\x14\x00\x00\x00\x08\x00".to_vec();
    bytes.extend(
        format!("{label}/LICENSE {label}/go.mod\n")
            .repeat(48)
            .bytes(),
    );
    bytes
}

/// The npm registry's abbreviated packument for `lodash`: every version in `versions`
/// (version, tarball bytes served, `shasum` published), `latest` as dist-tag. Returns the
/// tarball URLs by version.
fn publish_npm(
    ch: &Channels,
    latest: &str,
    versions: &[(&str, &[u8], String)],
) -> BTreeMap<String, String> {
    let mut docs = serde_json::Map::new();
    let mut urls = BTreeMap::new();
    for (version, bytes, shasum) in versions {
        let path = format!("/npm/lodash/-/lodash-{version}.tgz");
        let integrity = format!(
            "sha512-{}",
            base64::engine::general_purpose::STANDARD.encode(sha2::Sha512::digest(bytes))
        );
        docs.insert(
            (*version).to_owned(),
            json!({
                "name": "lodash", "version": version, "dependencies": {},
                "engines": {"node": ">=4"},
                "dist": {"integrity": integrity, "shasum": shasum,
                         "tarball": format!("{{BASE}}{path}"),
                         "fileCount": 1054, "unpackedSize": 1_412_415},
            }),
        );
        ch.file(&path, bytes.to_vec());
        urls.insert((*version).to_owned(), format!("{}{path}", ch.base));
    }
    let packument = json!({
        "name": "lodash", "modified": "2025-03-01T12:00:00.000Z",
        "dist-tags": {"latest": latest}, "versions": docs,
    });
    ch.file("/npm/lodash", packument.to_string());
    urls
}

/// The Go module proxy for golang.org/x/text listing `listed`, with `.info` and `.zip` of
/// `version`. Returns the zip URL.
fn publish_gomod(ch: &Channels, listed: &[&str], version: &str, zip: &[u8]) -> String {
    let root = "/gomod/golang.org/x/text/@v";
    ch.file(&format!("{root}/list"), listed.join("\n") + "\n");
    ch.file(
        &format!("{root}/{version}.info"),
        json!({"Version": version, "Time": "2025-03-01T17:23:31Z"}).to_string(),
    );
    ch.file(&format!("{root}/{version}.zip"), zip.to_vec());
    format!("{}{root}/{version}.zip", ch.base)
}

/// Google's SDK repository with one stable platform-tools revision and an archive per
/// host OS: (file, host-os, served bytes). The SHA-1 published is that of the bytes.
fn publish_android(ch: &Channels, archives: &[(&str, &str, &[u8])]) {
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
         <sdk:sdk-repository xmlns:sdk=\"http://schemas.android.com/sdk/android/repo/repository2/03\" \
         xmlns:common=\"http://schemas.android.com/repository/android/common/02\" \
         xmlns:generic=\"http://schemas.android.com/repository/android/generic/02\" \
         xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">\
         <license id=\"android-sdk-license\" type=\"text\">Terms and Conditions</license>\
         <channel id=\"channel-0\">stable</channel><channel id=\"channel-1\">beta</channel>\
         <remotePackage path=\"platform-tools\"><type-details xsi:type=\"generic:genericDetailsType\"/>\
         <revision><major>36</major><minor>0</minor><micro>0</micro></revision>\
         <display-name>Android SDK Platform-Tools</display-name><uses-license ref=\"android-sdk-license\"/>\
         <channelRef ref=\"channel-0\"/><archives>",
    );
    for (file, os, bytes) in archives {
        xml.push_str(&format!(
            "<archive><complete><size>{}</size><checksum type=\"sha1\">{}</checksum>\
             <url>{file}</url></complete><host-os>{os}</host-os></archive>",
            bytes.len(),
            sha1(bytes)
        ));
        ch.file(&format!("/android-platform-tools/{file}"), bytes.to_vec());
    }
    xml.push_str("</archives></remotePackage></sdk:sdk-repository>");
    ch.file("/android-platform-tools/repository2-3.xml", xml);
}

/// go.dev's release manifest with one stable release whose Windows MSI has `msi_sha256`.
fn publish_go(ch: &Channels, msi_sha256: &str) {
    let doc = json!([
        {"version": "go1.24rc1", "stable": false, "files": [
            {"filename": "go1.24rc1.windows-amd64.msi", "os": "windows", "arch": "amd64",
             "version": "go1.24rc1", "sha256": sha256(b"rc"), "size": 75_000_000, "kind": "installer"}]},
        {"version": "go1.23.4", "stable": true, "files": [
            {"filename": "go1.23.4.src.tar.gz", "os": "", "arch": "", "version": "go1.23.4",
             "sha256": sha256(b"src"), "size": 28_000_000, "kind": "source"},
            {"filename": "go1.23.4.windows-amd64.msi", "os": "windows", "arch": "amd64",
             "version": "go1.23.4", "sha256": msi_sha256, "size": 75_000_000, "kind": "installer"}]},
    ]);
    ch.file("/go/dl/", doc.to_string());
}

// ---------------------------------------------------------------------------------------
// Running a refresh and reading the API

async fn refresh(app: &TestApp, options: &RefreshOptions) -> BTreeMap<String, VendorReport> {
    let clock: Arc<dyn Clock> = app.clock.clone();
    refresh_vendors(app.store.clone(), clock, options, None, &|_| {})
        .await
        .expect("refresh")
        .into_iter()
        .filter(|r| !r.skipped)
        .map(|r| (r.fetcher.clone(), r))
        .collect()
}

#[track_caller]
fn assert_clean(report: &VendorReport) {
    assert!(
        report.errors == 0 && report.rejected == 0 && report.problems.is_empty(),
        "{report:#?}"
    );
}

async fn feed(app: &TestApp, path: &str) -> Value {
    let r = app.get(path).await;
    assert_eq!(r.status, 200, "{path}: {}", r.text);
    r.json()
}

/// The one record of the feed named `name` on `arch`.
#[track_caller]
fn record<'a>(feed: &'a Value, name: &str, arch: &str) -> &'a Value {
    let found: Vec<&Value> = feed["hashes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["executable_name"] == name && r["arch"] == arch)
        .collect();
    assert_eq!(found.len(), 1, "{name} {arch} in {feed:#}");
    found[0]
}

fn feed_names(feed: &Value) -> BTreeSet<String> {
    feed["hashes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["executable_name"].as_str().unwrap().to_owned())
        .collect()
}

/// A downloaded record carries the three hashes of the served bytes.
#[track_caller]
fn assert_downloaded(rec: &Value, bytes: &[u8], url: &str) {
    assert_eq!(rec["hash_sha256"], sha256(bytes), "{rec:#}");
    assert_eq!(rec["hash_sha1"], sha1(bytes), "{rec:#}");
    assert_eq!(rec["hash_md5"], md5(bytes), "{rec:#}");
    assert_eq!(rec["download_verified"], true, "{rec:#}");
    assert_eq!(rec["source_url"], url, "{rec:#}");
}

async fn downloads(app: &TestApp, key: &str, query: &str) -> Value {
    let r = app
        .get_with(&format!("/api/v1/intel/downloads{query}"), key)
        .await;
    assert_eq!(r.status, 200, "{query}: {}", r.text);
    r.json()
}

async fn history(app: &TestApp, key: &str, query: &str) -> Vec<Value> {
    let r = app
        .get_with(&format!("/api/v1/intel/history?{query}"), key)
        .await;
    assert_eq!(r.status, 200, "{query}: {}", r.text);
    let body = r.json();
    let results = body["results"].as_array().unwrap().clone();
    assert_eq!(body["total"], results.len(), "{body:#}");
    results
}

async fn lookup(app: &TestApp, key: &str, route: &str, hashes: &[&str]) -> Value {
    let r = app
        .post_with(route, key, json!({ "hashes": hashes }).to_string())
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["results"].clone()
}

async fn vendor_status(app: &TestApp) -> (Value, BTreeMap<String, Value>) {
    let body = feed(app, "/public/status").await;
    let vendors = body["vendors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["vendor"].as_str().unwrap().to_owned(), v.clone()))
        .collect();
    (body, vendors)
}

// ---------------------------------------------------------------------------------------
// Tests

/// A good run of a checksum-file vendor and three download vendors: the feed (no stale
/// cache), the records' hashes and `download_verified`, the download audit, vendor health.
async fn a_refresh_feeds_the_public_api(app: TestApp) {
    let auditor = app.account("audit-team", Role::Auditor, Tier::Teams).await;
    let ch = Channels::start().await;
    let putty = publish_putty(&ch, "0.83");
    let lodash = tarball("lodash@4.17.21", "");
    let old_lodash = tarball("lodash@4.17.20", "");
    let npm_urls = publish_npm(
        &ch,
        "4.17.21",
        &[
            ("4.17.20", &old_lodash, sha1(&old_lodash)),
            ("4.17.21", &lodash, sha1(&lodash)),
            // Past `latest`: a pre-release, never taken.
            ("5.0.0-alpha.1", b"alpha", sha1(b"alpha")),
        ],
    );
    let text_zip = module_zip("golang.org/x/text@v0.21.0");
    let zip_url = publish_gomod(
        &ch,
        &["v0.3.8", "v0.20.0", "v0.21.0", "v0.22.0-rc.1"],
        "v0.21.0",
        &text_zip,
    );
    let tools: Vec<(&str, &str, Vec<u8>)> = vec![
        (
            "platform-tools_r36.0.0-win.zip",
            "windows",
            module_zip("pt-win"),
        ),
        (
            "platform-tools_r36.0.0-linux.zip",
            "linux",
            module_zip("pt-linux"),
        ),
        (
            "platform-tools_r36.0.0-darwin.zip",
            "macosx",
            module_zip("pt-mac"),
        ),
    ];
    let borrowed: Vec<(&str, &str, &[u8])> = tools
        .iter()
        .map(|(f, o, b)| (*f, *o, b.as_slice()))
        .collect();
    publish_android(&ch, &borrowed);

    // The feed before the refresh, cached.
    let before = feed(&app, "/public/hash-of-day").await;
    assert_eq!(before["cache_hit"], false);
    assert_eq!(before["hashes"], json!([]));
    assert_eq!(feed(&app, "/public/hash-of-day").await["cache_hit"], true);
    let filtered = "/public/hash-of-day?executable=putty.exe";
    assert_eq!(feed(&app, filtered).await["hashes"], json!([]));
    assert_eq!(feed(&app, filtered).await["cache_hit"], true);

    app.clock.advance(Duration::minutes(1));
    let run_at = app.clock.now();
    let options = ch.options(&["putty", "npm", "gomod", "android-platform-tools"]);
    let reports = refresh(&app, &options).await;
    assert_eq!(reports.len(), 4, "{:?}", reports.keys());
    let counts = |id: &str| {
        let r = &reports[id];
        assert_clean(r);
        (r.discovered, r.recorded, r.downloaded)
    };
    assert_eq!(counts("putty"), (4, 4, 0));
    assert_eq!(counts("npm"), (1, 1, 1));
    assert_eq!(counts("gomod"), (1, 1, 1));
    assert_eq!(counts("android-platform-tools"), (3, 3, 3));

    // The cached (empty) feeds are not served stale.
    let all = feed(&app, "/public/hash-of-day").await;
    assert_eq!(all["cache_hit"], false, "stale feed after a refresh");
    assert_eq!(all["generated_at"], ts(run_at));
    assert_eq!(all["hashes"].as_array().unwrap().len(), 9, "{all:#}");
    let putty_feed = feed(&app, filtered).await;
    assert_eq!(putty_feed["cache_hit"], false);
    assert_eq!(putty_feed["hashes"].as_array().unwrap().len(), 3);
    assert_eq!(
        feed_names(&all),
        BTreeSet::from(
            [
                "putty.exe",
                "putty-64bit-0.83-installer.msi",
                "lodash (npm)",
                "golang.org/x/text (go)",
                "platform-tools_r36.0.0-win.zip",
                "platform-tools_r36.0.0-linux.zip",
                "platform-tools_r36.0.0-darwin.zip",
            ]
            .map(String::from)
        )
    );

    // Checksum-file records: the published hashes, no download.
    for (listed, arch) in [
        ("w64/putty.exe", "amd64"),
        ("w32/putty.exe", "x86"),
        ("wa64/putty.exe", "arm64"),
        ("w64/putty-64bit-0.83-installer.msi", "amd64"),
    ] {
        let name = listed.rsplit('/').next().unwrap();
        let rec = record(&all, name, arch);
        let sums = &putty[listed];
        assert_eq!(
            (&rec["vendor"], &rec["version"], &rec["platform"]),
            (&json!("PuTTY"), &json!("0.83"), &json!("windows"))
        );
        assert_eq!(rec["hash_sha256"], sums.sha256);
        assert_eq!(rec["hash_sha1"], sums.sha1);
        assert_eq!(rec["hash_md5"], sums.md5);
        assert_eq!(rec["download_verified"], false);
        assert_eq!(
            rec["source_url"],
            format!("{}/putty/0.83/{listed}", ch.base)
        );
        assert_eq!(rec["valid_from"], ts(run_at));
    }

    // Downloaded records: all three hashes are those of the bytes served.
    let npm = record(&all, "lodash (npm)", "universal");
    assert_eq!(
        (&npm["vendor"], &npm["version"], &npm["platform"]),
        (&json!("npm"), &json!("4.17.21"), &json!("universal"))
    );
    assert_downloaded(npm, &lodash, &npm_urls["4.17.21"]);
    let module = record(&all, "golang.org/x/text (go)", "universal");
    assert_eq!(
        (&module["vendor"], &module["version"]),
        (&json!("go"), &json!("v0.21.0"))
    );
    assert_downloaded(module, &text_zip, &zip_url);
    let mut served: BTreeMap<String, (usize, String)> = BTreeMap::new();
    served.insert(
        npm["id"].as_str().unwrap().into(),
        (lodash.len(), npm_urls["4.17.21"].clone()),
    );
    served.insert(
        module["id"].as_str().unwrap().into(),
        (text_zip.len(), zip_url.clone()),
    );
    for ((file, _, bytes), platform) in tools.iter().zip(["windows", "linux", "darwin"]) {
        let rec = record(&all, file, "universal");
        assert_eq!(
            (&rec["vendor"], &rec["version"]),
            (&json!("Google"), &json!("36.0.0"))
        );
        assert_eq!(rec["platform"], platform);
        let url = format!("{}/android-platform-tools/{file}", ch.base);
        assert_downloaded(rec, bytes, &url);
        served.insert(rec["id"].as_str().unwrap().into(), (bytes.len(), url));
    }

    // The download audit: one row per download, each naming its record.
    let audit = downloads(&app, &auditor, "").await;
    assert_eq!(audit["total"], 5, "{audit:#}");
    let rows = audit["results"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
    let mut seen = BTreeSet::new();
    for row in rows {
        assert_eq!(row["storage_method"], "stream", "{row:#}");
        assert_eq!(row["downloaded_at"], ts(run_at), "{row:#}");
        assert_eq!(row["deleted_at"], row["downloaded_at"], "{row:#}");
        let id = row["hash_record_id"].as_str().unwrap();
        let (size, url) = served
            .get(id)
            .unwrap_or_else(|| panic!("audit row for no downloaded record: {row:#}"));
        assert_eq!(row["size_bytes"], *size, "{row:#}");
        assert_eq!(row["url"], *url, "{row:#}");
        assert!(seen.insert(id.to_owned()), "two rows for {id}");
    }
    let only_npm = downloads(&app, &auditor, "?vendor=npm").await;
    assert_eq!(only_npm["total"], 1);
    assert_eq!(only_npm["results"][0]["hash_record_id"], npm["id"]);
    assert_eq!(
        downloads(&app, &auditor, "?vendor=GOOGLE").await["total"],
        3
    );
    assert_eq!(downloads(&app, &auditor, "?vendor=PuTTY").await["total"], 0);
    let mut paged = Vec::new();
    for offset in [0, 2, 4] {
        let page = downloads(&app, &auditor, &format!("?limit=2&offset={offset}")).await;
        assert_eq!(
            (&page["total"], &page["limit"], &page["offset"]),
            (&json!(5), &json!(2), &json!(offset))
        );
        paged.extend(page["results"].as_array().unwrap().iter().cloned());
    }
    assert_eq!(&paged, rows, "pages cover the list once, in order");
    let tomorrow = (run_at + Duration::days(1)).date_naive();
    assert_eq!(
        downloads(&app, &auditor, &format!("?from={tomorrow}")).await["total"],
        0
    );
    let basic = app.account("small-team", Role::Auditor, Tier::Basic).await;
    app.get_with("/api/v1/intel/downloads", &basic)
        .await
        .assert_error(403, "forbidden");

    // Vendor health.
    let (status, vendors) = vendor_status(&app).await;
    assert_eq!(status["status"], "ok", "{status:#}");
    assert_eq!(
        vendors.keys().map(String::as_str).collect::<Vec<_>>(),
        ["Google", "PuTTY", "go", "npm"],
        "disabled vendors are not reported"
    );
    for (vendor, records) in [("PuTTY", 4), ("npm", 1), ("go", 1), ("Google", 3)] {
        assert_eq!(
            vendors[vendor],
            json!({"vendor": vendor, "status": "ok", "last_success_at": ts(run_at),
                   "last_error_at": null, "last_error": null, "records": records}),
        );
    }

    // The same channels a day later: nothing new, the feed stays cached.
    app.clock.advance(Duration::minutes(5));
    let cached = feed(&app, "/public/hash-of-day").await;
    assert_eq!(cached["cache_hit"], true);
    let again = refresh(&app, &options).await;
    for r in again.values() {
        assert_clean(r);
        assert_eq!((r.recorded, r.unchanged), (0, r.discovered), "{r:#?}");
    }
    let after = feed(&app, "/public/hash-of-day").await;
    assert_eq!(
        after["cache_hit"], true,
        "an unchanged refresh keeps the cache"
    );
    assert_eq!(after["hashes"], all["hashes"]);
    // Runs are incremental: an artifact already recorded under the digest its channel
    // publishes (npm's SHA-1, the Android repository's SHA-1) is not downloaded again; a Go
    // module zip is, since the module proxy publishes no digest of the zip itself.
    let audit = downloads(&app, &auditor, "?limit=200").await;
    assert_eq!(audit["total"], 6, "{audit:#}");
    let per_record = audit["results"].as_array().unwrap().iter().fold(
        BTreeMap::<String, (usize, String)>::new(),
        |mut m, row| {
            let entry = m
                .entry(row["hash_record_id"].as_str().unwrap().into())
                .or_default();
            entry.0 += 1;
            entry.1 = row["url"].as_str().unwrap().into();
            m
        },
    );
    assert_eq!(per_record.keys().cloned().collect::<BTreeSet<_>>(), seen);
    for (count, url) in per_record.values() {
        let expected = if url.contains("/gomod/") { 2 } else { 1 };
        assert_eq!(*count, expected, "{url}: {per_record:?}");
    }
    let (_, vendors) = vendor_status(&app).await;
    assert_eq!(vendors["npm"]["last_success_at"], ts(app.clock.now()));
}

/// A later release supersedes the current record: history keeps both with validity, the
/// feed shows the new one, the historical lookup still knows the old hashes.
async fn a_newer_release_supersedes_the_current_one(app: TestApp) {
    let analyst = app.analyst().await;
    let auditor = app.account("audit-team", Role::Auditor, Tier::Teams).await;
    let ch = Channels::start().await;
    let options = ch.options(&["putty", "gomod"]);

    let old_putty = publish_putty(&ch, "0.82");
    let old_zip = module_zip("golang.org/x/text@v0.20.0");
    publish_gomod(&ch, &["v0.19.0", "v0.20.0"], "v0.20.0", &old_zip);
    app.clock.advance(Duration::minutes(1));
    let first_at = app.clock.now();
    let reports = refresh(&app, &options).await;
    assert_eq!(reports["putty"].recorded, 4);
    assert_eq!(reports["gomod"].recorded, 1);
    let first_feed = feed(&app, "/public/hash-of-day").await;
    let old_module_id = record(&first_feed, "golang.org/x/text (go)", "universal")["id"].clone();

    app.clock.advance(Duration::days(1));
    let second_at = app.clock.now();
    let new_putty = publish_putty(&ch, "0.83");
    let new_zip = module_zip("golang.org/x/text@v0.21.0");
    publish_gomod(&ch, &["v0.19.0", "v0.20.0", "v0.21.0"], "v0.21.0", &new_zip);
    let reports = refresh(&app, &options).await;
    for r in reports.values() {
        assert_clean(r);
    }
    assert_eq!(
        (reports["putty"].recorded, reports["gomod"].recorded),
        (4, 1)
    );

    // History: both versions, the old one superseded when the new one became valid.
    let putty_history = history(
        &app,
        &analyst,
        "executable=putty.exe&platform=windows&arch=amd64",
    )
    .await;
    let versions: Vec<&str> = putty_history
        .iter()
        .map(|e| e["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["0.83", "0.82"]);
    let (new, old) = (&putty_history[0], &putty_history[1]);
    assert_eq!(
        (&new["status"], &new["valid_until"]),
        (&json!("current"), &Value::Null)
    );
    assert_eq!(new["valid_from"], ts(second_at));
    assert_eq!(new["hash_sha256"], new_putty["w64/putty.exe"].sha256);
    assert_eq!(old["status"], "superseded");
    assert_eq!(old["valid_from"], ts(first_at));
    assert_eq!(old["valid_until"], new["valid_from"]);
    assert_eq!(old["hash_sha256"], old_putty["w64/putty.exe"].sha256);
    // A versioned file name is one executable across versions.
    let msi = history(
        &app,
        &analyst,
        &format!("executable={}", q("putty-64bit-0.82-installer.msi")),
    )
    .await;
    let names: Vec<&str> = msi
        .iter()
        .map(|e| e["executable_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "putty-64bit-0.83-installer.msi",
            "putty-64bit-0.82-installer.msi"
        ]
    );
    assert_eq!(msi[1]["valid_until"], msi[0]["valid_from"]);
    let module = history(
        &app,
        &analyst,
        &format!("executable={}", q("golang.org/x/text (go)")),
    )
    .await;
    let versions: Vec<(&str, &str)> = module
        .iter()
        .map(|e| {
            (
                e["version"].as_str().unwrap(),
                e["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        versions,
        [("v0.21.0", "current"), ("v0.20.0", "superseded")]
    );
    assert_eq!(module[0]["hash_sha256"], sha256(&new_zip));
    assert_eq!(module[1]["hash_sha256"], sha256(&old_zip));
    assert_eq!(module[1]["valid_until"], module[0]["valid_from"]);

    // The feed: only the new release.
    let now_feed = feed(&app, "/public/hash-of-day").await;
    assert_eq!(now_feed["cache_hit"], false);
    let versions: BTreeSet<&str> = now_feed["hashes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, BTreeSet::from(["0.83", "v0.21.0"]));

    // Lookup: the old build is only known historically.
    let old_sums = &old_putty["w64/putty.exe"];
    let new_sha = new_putty["w64/putty.exe"].sha256.clone();
    let old_zip_sha = sha256(&old_zip);
    let hashes = [
        old_sums.sha256.as_str(),
        old_sums.sha1.as_str(),
        old_zip_sha.as_str(),
        new_sha.as_str(),
    ];
    let current = lookup(&app, &analyst, "/api/v1/intel/lookup", &hashes).await;
    for h in &hashes[..3] {
        assert_eq!(current[*h]["classification"], "unknown", "{h}: {current:#}");
    }
    assert_eq!(current[&new_sha]["classification"], "known_vendor_release");
    let historical = lookup(&app, &analyst, "/api/v1/intel/lookup/historical", &hashes).await;
    for h in &hashes[..2] {
        let r = &historical[*h];
        assert_eq!(
            r["classification"], "known_vendor_release",
            "{h}: {historical:#}"
        );
        assert_eq!(
            (&r["vendor"], &r["version"]),
            (&json!("PuTTY"), &json!("0.82"))
        );
        assert_eq!(r["executable_name"], "putty.exe");
        assert_eq!(r["historical"], true);
    }
    let r = &historical[&old_zip_sha];
    assert_eq!(
        (&r["executable_name"], &r["version"]),
        (&json!("golang.org/x/text (go)"), &json!("v0.20.0"))
    );
    assert_eq!(r["historical"], true);
    assert!(
        historical[&new_sha].get("historical").is_none(),
        "{historical:#}"
    );

    // Each module download is audited against its own record.
    let audit = downloads(&app, &auditor, "?vendor=go").await;
    let ids: Vec<&Value> = audit["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["hash_record_id"])
        .collect();
    let new_module_id = record(&now_feed, "golang.org/x/text (go)", "universal")["id"].clone();
    assert_eq!(ids, [&new_module_id, &old_module_id], "newest first");
}

/// npm: the same package@version served with other bytes is a republish: a change alert is
/// stored and the history keeps both observations. A Go toolchain (vendor `Go`) whose
/// published hash changes is no package: no alert.
async fn a_republished_package_raises_a_change_alert(app: TestApp) {
    let analyst = app.analyst().await;
    let auditor = app.account("audit-team", Role::Auditor, Tier::Teams).await;
    let ch = Channels::start().await;
    let options = ch.options(&["npm", "go"]);
    let alerts = async || {
        app.text_rows(
            "SELECT ecosystem, package_name, version, previous_sha256, latest_sha256 \
             FROM change_alerts ORDER BY observed_at",
            &[],
        )
        .await
    };

    let original = tarball("lodash@4.17.21", "");
    publish_npm(&ch, "4.17.21", &[("4.17.21", &original, sha1(&original))]);
    publish_go(&ch, &sha256(b"go1.23.4 msi"));
    app.clock.advance(Duration::minutes(1));
    let reports = refresh(&app, &options).await;
    assert_eq!((reports["npm"].recorded, reports["go"].recorded), (1, 1));
    let first = record(
        &feed(&app, "/public/hash-of-day").await,
        "lodash (npm)",
        "universal",
    )
    .clone();

    // Republished: other bytes under the same version (the packument's shasum follows).
    app.clock.advance(Duration::hours(1));
    let republished = tarball("lodash@4.17.21", "with a postinstall script");
    publish_npm(
        &ch,
        "4.17.21",
        &[("4.17.21", &republished, sha1(&republished))],
    );
    publish_go(&ch, &sha256(b"go1.23.4 msi, rebuilt"));
    let reports = refresh(&app, &options).await;
    for r in reports.values() {
        assert_clean(r);
        assert_eq!((r.recorded, r.hash_changed), (1, 1), "{r:#?}");
    }
    assert_eq!(
        alerts().await,
        [[
            "npm".to_owned(),
            "lodash".to_owned(),
            "4.17.21".to_owned(),
            sha256(&original),
            sha256(&republished),
        ]],
        "one alert, for the package only"
    );

    let observed = history(&app, &analyst, &format!("executable={}", q("lodash (npm)"))).await;
    let seen: Vec<(&str, &str, &str)> = observed
        .iter()
        .map(|e| {
            (
                e["version"].as_str().unwrap(),
                e["hash_sha256"].as_str().unwrap(),
                e["status"].as_str().unwrap(),
            )
        })
        .collect();
    let (old_sha, new_sha) = (sha256(&original), sha256(&republished));
    assert_eq!(
        seen,
        [
            ("4.17.21", new_sha.as_str(), "current"),
            ("4.17.21", old_sha.as_str(), "superseded")
        ]
    );
    assert_eq!(observed[1]["valid_until"], observed[0]["valid_from"]);
    let now = feed(
        &app,
        &format!("/public/hash-of-day?executable={}", q("lodash (npm)")),
    )
    .await;
    let current = record(&now, "lodash (npm)", "universal");
    assert_downloaded(current, &republished, first["source_url"].as_str().unwrap());
    assert_eq!(
        history(&app, &analyst, "executable=go1.23.4.windows-amd64.msi")
            .await
            .len(),
        2
    );

    // Each download is audited against the record it produced.
    let audit = downloads(&app, &auditor, "?vendor=npm").await;
    let ids: Vec<&Value> = audit["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["hash_record_id"])
        .collect();
    assert_eq!(ids, [&current["id"], &first["id"]]);

    // Seen again unchanged: no further alert.
    app.clock.advance(Duration::hours(1));
    let reports = refresh(&app, &options).await;
    assert!(
        reports
            .values()
            .all(|r| r.recorded == 0 && r.hash_changed == 0)
    );
    assert_eq!(alerts().await.len(), 1);
}

/// A tarball that disagrees with its published SHA-1 is refused and its vendor marked
/// failing; a vendor that is down is failing too; the other vendors of the run still
/// record. A later good run (after a retry) makes them healthy again.
async fn one_failing_vendor_never_blocks_the_others(app: TestApp) {
    let auditor = app.account("audit-team", Role::Auditor, Tier::Teams).await;
    let ch = Channels::start().await;
    publish_putty(&ch, "0.83");
    let genuine = tarball("lodash@4.17.21", "");
    let tampered = tarball("lodash@4.17.21", "tampered in transit");
    publish_npm(&ch, "4.17.21", &[("4.17.21", &tampered, sha1(&genuine))]);
    let text_zip = module_zip("golang.org/x/text@v0.21.0");
    publish_gomod(&ch, &["v0.21.0"], "v0.21.0", &text_zip);
    let win = module_zip("pt-win");
    publish_android(&ch, &[("platform-tools_r36.0.0-win.zip", "windows", &win)]);
    ch.down("android-platform-tools", 503);

    let options = ch.options(&["putty", "npm", "gomod", "android-platform-tools"]);
    app.clock.advance(Duration::minutes(1));
    let failed_at = app.clock.now();
    let reports = refresh(&app, &options).await;
    let npm = &reports["npm"];
    assert_eq!(
        (npm.downloaded, npm.recorded, npm.mismatches),
        (1, 0, 1),
        "{npm:#?}"
    );
    let android = &reports["android-platform-tools"];
    assert_eq!(
        (android.discovered, android.recorded, android.errors),
        (0, 0, 1)
    );
    assert_clean(&reports["putty"]);
    assert_clean(&reports["gomod"]);
    assert_eq!(
        (reports["putty"].recorded, reports["gomod"].recorded),
        (4, 1)
    );

    let all = feed(&app, "/public/hash-of-day").await;
    assert_eq!(
        feed_names(&all),
        BTreeSet::from(
            [
                "putty.exe",
                "putty-64bit-0.83-installer.msi",
                "golang.org/x/text (go)"
            ]
            .map(String::from)
        ),
        "no record for the refused tarball nor the vendor that is down"
    );
    let tampered_sha = sha256(&tampered);
    assert!(!all.to_string().contains(&tampered_sha));
    // A refused download leaves no record to audit.
    let audit = downloads(&app, &auditor, "").await;
    assert_eq!(audit["total"], 1, "{audit:#}");
    assert_eq!(
        audit["results"][0]["url"],
        format!("{}/gomod/golang.org/x/text/@v/v0.21.0.zip", ch.base)
    );

    let (status, vendors) = vendor_status(&app).await;
    assert_eq!(status["status"], "degraded", "{status:#}");
    let npm = &vendors["npm"];
    assert_eq!(
        (&npm["status"], &npm["records"]),
        (&json!("failing"), &json!(0)),
        "{npm:#}"
    );
    assert_eq!(npm["last_error_at"], ts(failed_at));
    assert_eq!(npm["last_success_at"], Value::Null);
    // The public page names the kind of failure; staff read the whole message.
    assert_eq!(
        npm["last_error"],
        "published hash mismatch (possible tampering)"
    );
    let staff = app
        .account("staff-health", Role::PlatformAdmin, Tier::Enterprise)
        .await;
    let health = app.get_with("/api/v1/admin/health", &staff).await.json();
    let full = |vendor: &str| -> String {
        health["vendors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["vendor"] == vendor)
            .and_then(|v| v["last_error"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let message = full("npm");
    assert!(
        message.contains("hash mismatch") && message.contains("SHA-1"),
        "{message}"
    );
    let google = &vendors["Google"];
    assert_eq!(
        (&google["status"], &google["records"]),
        (&json!("failing"), &json!(0)),
        "{google:#}"
    );
    assert_eq!(google["last_error"], "vendor channel unreadable");
    let message = full("Google");
    assert!(message.contains("503"), "{message}");
    for (vendor, records) in [("PuTTY", 4), ("go", 1)] {
        let v = &vendors[vendor];
        assert_eq!(
            (&v["status"], &v["records"]),
            (&json!("ok"), &json!(records)),
            "{v:#}"
        );
        assert_eq!(v["last_success_at"], ts(failed_at));
        assert_eq!(v["last_error"], Value::Null);
    }

    // Unknown vendors are refused up front.
    let clock: Arc<dyn Clock> = app.clock.clone();
    let unknown = refresh_vendors(app.store.clone(), clock, &options, Some("nope"), &|_| {}).await;
    assert!(
        matches!(unknown, Err(model::Error::NotFound(_))),
        "{unknown:?}"
    );

    // The channels recover; Google's manifest still fails once and is retried.
    app.clock.advance(Duration::minutes(10));
    let fixed_at = app.clock.now();
    publish_npm(&ch, "4.17.21", &[("4.17.21", &genuine, sha1(&genuine))]);
    ch.up("android-platform-tools");
    ch.flaky("/android-platform-tools/repository2-3.xml", 1);
    let retrying = RefreshOptions {
        attempts: 2,
        ..options.clone()
    };
    let reports = refresh(&app, &retrying).await;
    assert_eq!(
        (
            reports["npm"].recorded,
            reports["android-platform-tools"].recorded
        ),
        (1, 1)
    );
    assert_clean(&reports["android-platform-tools"]);
    let (status, vendors) = vendor_status(&app).await;
    assert_eq!(status["status"], "ok", "{status:#}");
    for vendor in ["npm", "Google"] {
        let v = &vendors[vendor];
        assert_eq!(
            (&v["status"], &v["records"]),
            (&json!("ok"), &json!(1)),
            "{v:#}"
        );
        assert_eq!(v["last_success_at"], ts(fixed_at));
        assert_eq!(
            v["last_error_at"],
            ts(failed_at),
            "the last error stays on record"
        );
    }
    let npm = record(
        &feed(&app, "/public/hash-of-day").await,
        "lodash (npm)",
        "universal",
    )
    .clone();
    assert_downloaded(
        &npm,
        &genuine,
        &format!("{}/npm/lodash/-/lodash-4.17.21.tgz", ch.base),
    );
}

/// A watched package the refresh does not follow yet is followed from the next refresh
/// (`pending`, then `tracked`); one the registry does not know is reported `not_found`.
async fn watched_packages_are_tracked_at_the_next_refresh(app: TestApp) {
    let auditor = app.account("watchers", Role::Auditor, Tier::Teams).await;
    let ch = Channels::start().await;
    let mut options = ch.options(&["npm"]);
    // The configured list is empty: only the watchlist names packages.
    options.vendors.get_mut("npm").unwrap().items = Some(Vec::new());
    let original = tarball("lodash@4.17.21", "");
    publish_npm(&ch, "4.17.21", &[("4.17.21", &original, sha1(&original))]);

    let watch = async |name: &str| {
        let r = app
            .send(
                reqwest::Method::POST,
                "/api/v1/intel/packages/watch",
                &auditor,
                Some(json!({"ecosystem": "npm", "package_name": name})),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        r.json()
    };
    assert_eq!(watch("Lodash").await["tracking"], "pending");
    assert_eq!(
        watch("no-such-package-anywhere").await["tracking"],
        "pending"
    );

    app.clock.advance(Duration::minutes(1));
    let reports = refresh(&app, &options).await;
    assert_eq!(reports["npm"].recorded, 1, "{:#?}", reports["npm"]);

    let list = app
        .get_with("/api/v1/intel/packages/watch", &auditor)
        .await
        .json();
    let tracking: BTreeMap<&str, &str> = list["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["package_name"].as_str().unwrap(),
                w["tracking"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tracking,
        BTreeMap::from([
            ("lodash", "tracked"),
            ("no-such-package-anywhere", "not_found")
        ])
    );
    // Its versions are records now.
    let r = app
        .get_with(
            &format!("/api/v1/intel/history?executable={}", q("lodash (npm)")),
            &auditor,
        )
        .await;
    assert_eq!(r.json()["total"], 1, "{}", r.text);
}

/// One followed item of a multi-item channel disappearing: the rest is recorded and the
/// vendor shows degraded (not failing) until a run reads everything again.
async fn a_vanished_item_leaves_the_vendor_degraded(app: TestApp) {
    let ch = Channels::start().await;
    publish_gomod(
        &ch,
        &["v0.21.0"],
        "v0.21.0",
        &module_zip("golang.org/x/text@v0.21.0"),
    );
    let mut options = ch.options(&["gomod"]);
    if let Some(gomod) = options.vendors.get_mut("gomod") {
        gomod.items = Some(vec!["golang.org/x/text".into(), "golang.org/x/gone".into()]);
    }
    let reports = refresh(&app, &options).await;
    let gomod = &reports["gomod"];
    assert_eq!((gomod.recorded, gomod.errors), (1, 1), "{gomod:#?}");

    let (status, vendors) = vendor_status(&app).await;
    assert_eq!(status["status"], "degraded", "{status:#}");
    let go = &vendors["go"];
    assert_eq!(
        (&go["status"], &go["records"]),
        (&json!("degraded"), &json!(1)),
        "{go:#}"
    );
    assert_eq!(go["last_success_at"], go["last_error_at"]);

    // The item is back: healthy again.
    let root = "/gomod/golang.org/x/gone/@v";
    ch.file(&format!("{root}/list"), "v1.0.0\n");
    ch.file(
        &format!("{root}/v1.0.0.info"),
        json!({"Version": "v1.0.0", "Time": "2025-03-01T17:23:31Z"}).to_string(),
    );
    ch.file(
        &format!("{root}/v1.0.0.zip"),
        module_zip("golang.org/x/gone@v1.0.0"),
    );
    app.clock.advance(Duration::minutes(1));
    let reports = refresh(&app, &options).await;
    assert_eq!(reports["gomod"].errors, 0, "{:#?}", reports["gomod"]);
    let (status, vendors) = vendor_status(&app).await;
    assert_eq!(vendors["go"]["status"], "ok", "{status:#}");
    assert_eq!(vendors["go"]["records"], 2);
}

/// A zip holding `go/bin/go`, an ELF whose bytes depend on `label`.
fn go_archive(label: &str) -> Vec<u8> {
    let mut elf = b"\x7fELF\x02\x01\x01\x00".to_vec();
    elf.extend(format!("go toolchain {label} ").repeat(200).bytes());
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    writer.start_file("go/bin/go", options).expect("zip");
    std::io::Write::write_all(&mut writer, &elf).expect("zip");
    writer.finish().expect("zip").into_inner()
}

/// go.dev's manifest listing one stable release with a Windows zip whose published SHA-256
/// is `published`; `served` is what the download answers.
fn publish_go_archive(ch: &Channels, version: &str, published: &str, served: &[u8]) {
    let name = format!("{version}.windows-amd64.zip");
    let doc = json!([{"version": version, "stable": true, "files": [
        {"filename": name, "os": "windows", "arch": "amd64", "version": version,
         "sha256": published, "size": served.len(), "kind": "archive"}]}]);
    ch.file("/go/dl/", doc.to_string());
    ch.file(&format!("/go/dl/{name}"), served.to_vec());
}

/// An archive whose downloaded bytes disagree with the SHA-256 the vendor published: neither
/// value can be trusted, so nothing is recorded for it (not the archive, not its files), the
/// previous release stays current, and the vendor shows as possibly tampered.
async fn an_archive_that_disagrees_with_its_published_hash_is_not_recorded(app: TestApp) {
    let analyst = app.analyst().await;
    let ch = Channels::start().await;
    let mut options = ch.options(&["go"]);
    options.limits.members.enabled = true;

    let genuine = go_archive("go1.23.4");
    publish_go_archive(&ch, "go1.23.4", &sha256(&genuine), &genuine);
    app.clock.advance(Duration::minutes(1));
    let reports = refresh(&app, &options).await;
    assert_clean(&reports["go"]);
    assert_eq!(
        (reports["go"].recorded, reports["go"].members),
        (2, 1),
        "{:#?}",
        reports["go"]
    );

    // The next release is published with one hash and served with other bytes.
    app.clock.advance(Duration::days(1));
    let announced = go_archive("go1.23.5");
    let served = go_archive("go1.23.5 with an implant");
    publish_go_archive(&ch, "go1.23.5", &sha256(&announced), &served);
    let reports = refresh(&app, &options).await;
    let go = &reports["go"];
    assert_eq!(
        (go.downloaded, go.mismatches, go.recorded, go.members),
        (1, 1, 0, 0),
        "{go:#?}"
    );

    let versions: Vec<(String, String)> = history(
        &app,
        &analyst,
        &format!("executable={}", q("go1.23.4.windows-amd64.zip")),
    )
    .await
    .iter()
    .map(|e| {
        (
            e["version"].as_str().unwrap().to_owned(),
            e["status"].as_str().unwrap().to_owned(),
        )
    })
    .collect();
    assert_eq!(versions, [("go1.23.4".to_owned(), "current".to_owned())]);
    let (announced_sha, served_sha) = (sha256(&announced), sha256(&served));
    for route in ["/api/v1/intel/lookup", "/api/v1/intel/lookup/historical"] {
        let found = lookup(&app, &analyst, route, &[&announced_sha, &served_sha]).await;
        for h in [&announced_sha, &served_sha] {
            assert_eq!(
                found[h]["classification"], "unknown",
                "{route} {h}: {found:#}"
            );
        }
    }
    let current = lookup(&app, &analyst, "/api/v1/intel/lookup", &[&sha256(&genuine)]).await;
    assert_eq!(
        current[&sha256(&genuine)]["classification"],
        "known_vendor_release"
    );
    let (_, vendors) = vendor_status(&app).await;
    assert_eq!(
        vendors["Go"]["last_error"], "published hash mismatch (possible tampering)",
        "{vendors:#?}"
    );
}
