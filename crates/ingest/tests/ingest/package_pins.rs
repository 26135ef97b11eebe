//! PyPI and npm: pinned versions (`name==version`, `name@version`) and the history horizon
//! (`history = N`), against loopback registries in their real JSON formats.

use crate::vendor_support::{MemorySink, Site, body, fake_hex, md5, run_with, sha1, sha256};
use model::Arch::{Amd64, Universal};
use model::Platform::{Linux, Universal as AnyPlatform};
use serde_json::{Value, json};

/// A file entry as the Warehouse JSON API lists it, for `bytes` served at `path`.
fn pypi_entry(version: &str, file: &str, kind: &str, bytes: &[u8], uploaded: &str) -> Value {
    json!({"comment_text": "", "digests": {"blake2b_256": fake_hex(&format!("b{file}"), 64), "md5": md5(bytes), "sha256": sha256(bytes)},
           "downloads": -1, "filename": file, "has_sig": false, "md5_digest": md5(bytes), "packagetype": kind,
           "python_version": if kind == "sdist" { "source" } else { "cp39" }, "requires_python": ">=3.7", "size": bytes.len(),
           "upload_time": &uploaded[..19], "upload_time_iso_8601": uploaded,
           "url": format!("{{BASE}}/packages/c/cryptography/{file}"), "yanked": false, "yanked_reason": null,
           "version": version})
}

/// A manylinux wheel holding one extension module.
fn wheel(version: &str) -> (Vec<u8>, Vec<u8>) {
    use std::io::Write;
    let mut module = b"\x7fELF\x02\x01\x01\x00".to_vec();
    module.extend(format!("_rust.abi3.so {version}").repeat(80).bytes());
    let mut out = Vec::new();
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(&mut out));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    w.start_file("cryptography/hazmat/bindings/_rust.abi3.so", options)
        .unwrap();
    w.write_all(&module).unwrap();
    w.start_file(format!("cryptography-{version}.dist-info/WHEEL"), options)
        .unwrap();
    w.write_all(b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
        .unwrap();
    w.finish().unwrap();
    (out, module)
}

fn wheel_name(version: &str) -> String {
    format!("cryptography-{version}-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
}

fn at(text: &str) -> chrono::DateTime<chrono::Utc> {
    text.parse().unwrap()
}

const VERSIONS: [(&str, &str); 5] = [
    ("39.0.2", "2023-03-02T16:05:12.554623Z"),
    ("40.0.2", "2023-04-14T12:33:41.103212Z"),
    ("41.0.7", "2023-11-28T00:06:17.018238Z"),
    ("42.0.8", "2024-06-04T19:51:59.870311Z"),
    ("44.0.0", "2024-11-27T18:06:39.471923Z"),
];

/// A registry with five releases of cryptography, each a manylinux wheel (served), under
/// both `/pypi/cryptography/json` and `/pypi/cryptography/<version>/json`.
fn cryptography_site() -> (Site, Vec<(String, Vec<u8>)>) {
    let site = Site::new();
    let mut releases = serde_json::Map::new();
    let mut modules = Vec::new();
    for (version, uploaded) in VERSIONS {
        let (bytes, module) = wheel(version);
        let file = wheel_name(version);
        let entry = pypi_entry(version, &file, "bdist_wheel", &bytes, uploaded);
        site.file(&format!("/packages/c/cryptography/{file}"), bytes);
        site.file(
            &format!("/pypi/cryptography/{version}/json"),
            json!({"info": {"name": "cryptography", "version": version},
                   "urls": [entry.clone()], "vulnerabilities": []})
            .to_string(),
        );
        releases.insert(version.to_owned(), json!([entry]));
        modules.push((version.to_owned(), module));
    }
    site.file(
        "/pypi/cryptography/json",
        json!({"info": {"name": "cryptography", "version": "44.0.0"},
               "releases": releases, "urls": [], "vulnerabilities": []})
        .to_string(),
    );
    (site, modules)
}

#[tokio::test]
async fn a_pinned_pypi_version_is_recorded_with_its_members_whatever_the_newest() {
    let (site, modules) = cryptography_site();
    let base = site.serve().await;
    let sink = MemorySink::default();
    let pin = |config: &mut ingest::VendorConfig, limits: &mut ingest::FetchLimits| {
        config.items = vec!["cryptography==41.0.7".into()];
        limits.members.enabled = true;
    };
    let report = run_with("pypi", &base, &sink, pin).await;
    assert_eq!(report.problems, vec![]);
    assert_eq!((report.downloaded, report.members), (1, 1));
    let wheel = sink.get(&wheel_name("41.0.7"), Linux, Amd64);
    assert_eq!(wheel.version, "41.0.7");
    let module = format!(
        "{}/cryptography/hazmat/bindings/_rust.abi3.so",
        wheel_name("41.0.7")
    );
    let member = sink.get(&module, Linux, Amd64);
    assert_eq!(member.version, "41.0.7");
    // The wheel and its module start their history at the wheel's upload time.
    for name in [wheel_name("41.0.7").as_str(), module.as_str()] {
        assert_eq!(
            sink.released(name, "41.0.7"),
            Some(at(VERSIONS[2].1)),
            "{name}"
        );
    }
    assert_eq!(member.hash_sha256, sha256(&modules[2].1));
    // The newest release is neither downloaded nor recorded.
    assert_eq!(sink.versions(), vec!["41.0.7".to_owned()]);
    assert!(!site.hit(&format!(
        "/packages/c/cryptography/{}",
        wheel_name("44.0.0")
    )));

    // A second run: the pinned release is known, nothing is downloaded.
    let again = run_with("pypi", &base, &sink, pin).await;
    assert_eq!(again.problems, vec![]);
    assert_eq!((again.downloaded, again.recorded), (0, 0));
    assert_eq!(again.unchanged, 1);
}

/// A mirror may serve only the project
/// document, not `/pypi/<name>/<version>/json`: a pin is taken from the project's
/// `releases`, and the per-version document is never needed.
#[tokio::test]
async fn a_pin_is_read_from_the_project_document_where_a_mirror_serves_only_that() {
    let (site, _) = cryptography_site();
    let site = site.status("/pypi/cryptography/41.0.7/json", 404);
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("pypi", &base, &sink, |config, _| {
        config.items = vec!["cryptography==41.0.7".into()];
    })
    .await;
    assert_eq!(report.problems, vec![]);
    assert_eq!(sink.versions(), vec!["41.0.7".to_owned()]);
    assert_eq!(
        sink.released(&wheel_name("41.0.7"), "41.0.7"),
        Some(at(VERSIONS[2].1))
    );
    assert!(!site.hit("/pypi/cryptography/41.0.7/json"));
}

#[tokio::test]
async fn a_pin_beside_the_unpinned_name_records_both_releases() {
    let (site, _) = cryptography_site();
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("pypi", &base, &sink, |config, _| {
        config.items = vec!["cryptography".into(), "Cryptography==40.0.2".into()];
    })
    .await;
    assert_eq!(report.problems, vec![]);
    assert_eq!(
        sink.versions(),
        vec!["40.0.2".to_owned(), "44.0.0".to_owned()]
    );
}

#[tokio::test]
async fn a_pin_the_registry_does_not_have_and_a_range_are_reported() {
    let (site, _) = cryptography_site();
    let site = site.status("/pypi/cryptography/9.9.9/json", 404);
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("pypi", &base, &sink, |config, _| {
        config.items = vec![
            "cryptography==9.9.9".into(),
            "cryptography>=41".into(),
            "cryptography==41.0.7".into(),
        ];
    })
    .await;
    assert_eq!(sink.versions(), vec!["41.0.7".to_owned()]);
    let messages: Vec<&str> = report.problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages.iter().any(|m| m.contains("404")), "{messages:?}");
    assert!(
        messages
            .iter()
            .any(|m| m.contains("cryptography>=41") && m.contains("other specifiers")),
        "{messages:?}"
    );
}

#[tokio::test]
async fn a_pypi_history_horizon_records_past_digests_without_downloading() {
    let (site, _) = cryptography_site();
    let base = site.serve().await;
    let sink = MemorySink::default();
    let horizon = |config: &mut ingest::VendorConfig, limits: &mut ingest::FetchLimits| {
        config.items = vec!["cryptography".into()];
        config.history = Some(ingest::History::Newest(4));
        limits.members.enabled = true;
    };
    let report = run_with("pypi", &base, &sink, horizon).await;
    assert_eq!(report.problems, vec![]);
    // The four newest: three past versions from their published digests, the newest read
    // whole (its wheel and the module inside).
    assert_eq!(
        sink.versions(),
        vec!["40.0.2", "41.0.7", "42.0.8", "44.0.0"]
    );
    assert_eq!((report.downloaded, report.members), (1, 1));
    for (version, _) in &VERSIONS[..4] {
        let path = format!("/packages/c/cryptography/{}", wheel_name(version));
        assert!(!site.hit(&path), "{path} downloaded");
    }
    // Each past version starts its history at its upload time; the newest when recorded.
    for (version, uploaded) in &VERSIONS[1..4] {
        assert_eq!(
            sink.released(&wheel_name(version), version),
            Some(at(uploaded)),
            "{version}"
        );
    }
    assert_eq!(sink.released(&wheel_name("44.0.0"), "44.0.0"), None);
    let past = sink.get(&wheel_name("41.0.7"), Linux, Amd64);
    assert_eq!(past.hash_sha256, sha256(&wheel("41.0.7").0));
    assert!(!past.download_verified);
    let members: Vec<String> = sink
        .records
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, r)| r.executable_name.ends_with(".so"))
        .map(|(_, r)| r.version.clone())
        .collect();
    assert_eq!(members, vec!["44.0.0"]);

    let again = run_with("pypi", &base, &sink, horizon).await;
    assert_eq!(again.problems, vec![]);
    assert_eq!((again.downloaded, again.recorded), (0, 0));
}

#[tokio::test]
async fn a_history_horizon_of_all_takes_every_release() {
    let (site, _) = cryptography_site();
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("pypi", &base, &sink, |config, _| {
        config.items = vec!["cryptography".into()];
        config.history = Some(ingest::History::All);
    })
    .await;
    assert_eq!(report.problems, vec![]);
    assert_eq!(sink.versions().len(), VERSIONS.len());
}

fn npm_version(name: &str, version: &str, tarball: &str, shasum: &str) -> Value {
    json!({"name": name, "version": version, "dependencies": {}, "engines": {"node": ">=4"},
           "dist": {"integrity": "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg==",
                    "shasum": shasum, "tarball": format!("{{BASE}}/{tarball}"), "fileCount": 1054, "unpackedSize": 1_412_415}})
}

fn npm_site() -> Site {
    let site = Site::new();
    let mut versions = serde_json::Map::new();
    let mut time = serde_json::Map::new();
    for (i, v) in ["4.17.15", "4.17.19", "4.17.20", "4.17.21"]
        .iter()
        .enumerate()
    {
        let path = format!("lodash/-/lodash-{v}.tgz");
        let bytes = body(&path);
        versions.insert(
            (*v).to_owned(),
            npm_version("lodash", v, &path, &sha1(&bytes)),
        );
        time.insert(
            (*v).to_owned(),
            json!(format!("202{i}-02-20T15:42:16.891Z")),
        );
        site.file(&format!("/{path}"), bytes);
    }
    let types_path = "@types/node/-/node-20.11.5.tgz";
    let types = body(types_path);
    site.file(&format!("/{types_path}"), types.clone());
    site.file(
        "/lodash",
        json!({"name": "lodash", "modified": "2024-11-20T14:00:00.000Z",
               "dist-tags": {"latest": "4.17.21"}, "versions": versions, "time": time})
        .to_string(),
    )
    .file(
        "/@types%2Fnode",
        json!({"name": "@types/node", "dist-tags": {"latest": "22.10.1"},
               "versions": {"20.11.5": npm_version("@types/node", "20.11.5", types_path, &sha1(&types)),
                            "22.10.1": npm_version("@types/node", "22.10.1", "@types/node/-/node-22.10.1.tgz", &fake_hex("t", 40))}})
        .to_string(),
    )
}

#[tokio::test]
async fn a_pinned_npm_version_is_recorded_whatever_latest_says() {
    let site = npm_site();
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("npm", &base, &sink, |config, _| {
        config.items = vec!["lodash@4.17.20".into(), "@types/node@20.11.5".into()];
    })
    .await;
    assert_eq!(report.problems, vec![]);
    assert_eq!((report.downloaded, report.recorded), (2, 2));
    let lodash = sink.get("lodash (npm)", AnyPlatform, Universal);
    assert_eq!(lodash.version, "4.17.20");
    assert_eq!(
        sink.released("lodash (npm)", "4.17.20"),
        Some(at("2022-02-20T15:42:16.891Z"))
    );
    assert_eq!(
        lodash.hash_sha256,
        sha256(&body("lodash/-/lodash-4.17.20.tgz"))
    );
    assert!(lodash.download_verified);
    let types = sink.get("@types/node (npm)", AnyPlatform, Universal);
    assert_eq!(types.version, "20.11.5");
    assert!(!site.hit("/lodash/-/lodash-4.17.21.tgz"));
    assert!(!site.hit("/@types/node/-/node-22.10.1.tgz"));

    // A second run: both pinned tarballs are known by their published SHA-1.
    let again = run_with("npm", &base, &sink, |config, _| {
        config.items = vec!["lodash@4.17.20".into(), "@types/node@20.11.5".into()];
    })
    .await;
    assert_eq!(again.problems, vec![]);
    assert_eq!(
        (again.downloaded, again.recorded, again.unchanged),
        (0, 0, 2)
    );
}

#[tokio::test]
async fn an_npm_pin_the_packument_lacks_is_reported() {
    let site = npm_site();
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("npm", &base, &sink, |config, _| {
        config.items = vec!["lodash@4.17.99".into(), "@types/node@20.11.5".into()];
    })
    .await;
    assert_eq!(report.problems.len(), 1);
    assert!(
        report.problems[0]
            .message
            .contains("lodash has no version \"4.17.99\""),
        "{:?}",
        report.problems
    );
    assert_eq!(sink.versions(), vec!["20.11.5".to_owned()]);
}

#[tokio::test]
async fn an_npm_history_horizon_records_the_newest_versions() {
    let site = npm_site();
    let base = site.serve().await;
    let sink = MemorySink::default();
    let report = run_with("npm", &base, &sink, |config, _| {
        config.items = vec!["lodash".into()];
        config.history = Some(ingest::History::Newest(3));
    })
    .await;
    assert_eq!(report.problems, vec![]);
    assert_eq!(sink.versions(), vec!["4.17.19", "4.17.20", "4.17.21"]);
    assert!(!site.hit("/lodash/-/lodash-4.17.15.tgz"));
    // Past versions start at their publication time (`time` of the full packument).
    assert_eq!(
        sink.released("lodash (npm)", "4.17.19"),
        Some(at("2021-02-20T15:42:16.891Z"))
    );
    assert_eq!(
        sink.released("lodash (npm)", "4.17.20"),
        Some(at("2022-02-20T15:42:16.891Z"))
    );
    assert_eq!(sink.released("lodash (npm)", "4.17.21"), None);
}
