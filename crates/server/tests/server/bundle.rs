//! The offline bundle over HTTP: the public part verifies with the log key alone, files
//! carry entity tags and byte ranges, the corpus part needs a key, and a new record
//! rebuilds the bundle.

use model::{Arch, Clock as _, Platform};
use serde_json::Value;
use testkit::TestApp;
use testkit::fixtures::{go, putty, rec};

testkit::backend_tests!(
    public_part_verifies_with_the_log_key,
    entity_tags_and_ranges,
    corpus_part_needs_a_key,
    vendor_filters_hold_the_current_records_of_generation_and_delta,
);

const PUBLIC_FILES: [&str; 8] = [
    "manifest.json",
    "manifest.sig",
    "key.json",
    "root.json",
    "feed.jsonl",
    "vendor-sha256.bloom",
    "vendor-sha1.bloom",
    "vendor-md5.bloom",
];

async fn publish(app: &TestApp) {
    jobs::publish::publish_day(
        app.store.as_ref(),
        &app.state.log_key,
        app.clock.now(),
        app.clock.now().date_naive(),
    )
    .await
    .unwrap();
}

/// Status, body bytes and `Content-Range` of a GET with these headers.
async fn raw(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> (u16, Vec<u8>, String) {
    let mut req = reqwest::Client::new().get(format!("{}{path}", app.base));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let range = resp
        .headers()
        .get("content-range")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, resp.bytes().await.unwrap().to_vec(), range)
}

async fn download(app: &TestApp, dir: &std::path::Path) {
    for name in PUBLIC_FILES {
        let (status, body, _) = raw(app, &format!("/public/bundle/{name}"), &[]).await;
        assert_eq!(status, 200, "{name}");
        std::fs::write(dir.join(name), body).unwrap();
    }
}

async fn public_part_verifies_with_the_log_key(app: TestApp) {
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    let r = app.get("/public/bundle/manifest.json").await;
    assert_eq!(r.status, 404, "no root yet: {}", r.text);
    publish(&app).await;
    let dir = tempfile::tempdir().unwrap();
    download(&app, dir.path()).await;
    let key = app.state.log_key.verifying_key();
    let v = bundle::verify_dir(dir.path(), &key).unwrap();
    assert_eq!(v.feed.len(), 1);
    assert_eq!(v.manifest.counts["vendor-sha1"], 1);
    assert!(v.filters["vendor-sha1"].contains(testkit::hex_of(2, 40).to_uppercase().as_bytes()));
    // A new record rebuilds the bundle: the filters now hold it, the feed (the day's
    // signed tree) does not.
    app.record(putty("0.82", Arch::Arm64, 3)).await;
    download(&app, dir.path()).await;
    let v = bundle::verify_dir(dir.path(), &key).unwrap();
    assert_eq!(v.manifest.counts["vendor-sha256"], 2);
    assert_eq!(v.feed.len(), 1);
}

async fn entity_tags_and_ranges(app: TestApp) {
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    publish(&app).await;
    let whole = app.get("/public/bundle/vendor-sha256.bloom").await;
    assert_eq!(whole.status, 200);
    let etag = whole.headers["etag"].to_str().unwrap().to_owned();
    assert!(etag.starts_with('"') && etag.len() == 66, "{etag}");
    assert_eq!(whole.headers["accept-ranges"], "bytes");
    let manifest: Value = app.get("/public/bundle/manifest.json").await.json();
    assert_eq!(
        format!(
            "\"{}\"",
            manifest["files"]["vendor-sha256.bloom"]["sha256"]
                .as_str()
                .unwrap()
        ),
        etag
    );
    let r = raw(
        &app,
        "/public/bundle/vendor-sha256.bloom",
        &[("if-none-match", etag.as_str())],
    )
    .await;
    assert_eq!(r.0, 304);
    let r = raw(
        &app,
        "/public/bundle/vendor-sha256.bloom",
        &[("range", "bytes=0-47")],
    )
    .await;
    assert_eq!(r.0, 206);
    assert_eq!(r.1.len(), 48);
    assert!(r.2.starts_with("bytes 0-47/"), "{}", r.2);
    let r = raw(
        &app,
        "/public/bundle/vendor-sha256.bloom",
        &[("range", "bytes=99999999-")],
    )
    .await;
    assert_eq!(r.0, 416);
    let r = app.get("/public/bundle/nothing.bin").await;
    assert_eq!(r.status, 404);
}

async fn corpus_part_needs_a_key(app: TestApp) {
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    publish(&app).await;
    let r = app.get("/api/v1/intel/bundle/corpus-sha256.bloom").await;
    assert_eq!(r.status, 401);
    let key = app.analyst().await;
    // No corpus is loaded here, so the bundle has no corpus filters.
    let r = app
        .get_with("/api/v1/intel/bundle/corpus-sha256.bloom", &key)
        .await;
    assert_eq!(r.status, 404, "{}", r.text);
    // The corpus part is not public, and the public part not behind the key.
    let r = app.get("/public/bundle/corpus-sha256.bloom").await;
    assert_eq!(r.status, 404);
    assert!(r.text.contains("/api/v1/intel/bundle/<file>"), "{}", r.text);
}

async fn vendor_filters_hold_the_current_records_of_generation_and_delta(app: TestApp) {
    // Three records in a generation of the lookup index...
    app.record(putty("0.81", Arch::Amd64, 10)).await;
    app.record(putty("0.81", Arch::Arm64, 11)).await;
    app.record(go("1.22.0", 12)).await;
    let index = app.state.classifier.index();
    app.state.classifier.rebuild().await.unwrap();
    assert_eq!(index.generation().unwrap().1, 3);
    // ...then, only in its delta, a newer PuTTY that supersedes one of them and a new
    // vendor's record.
    app.record(putty("0.82", Arch::Amd64, 20)).await;
    app.record(rec(
        "Igor Pavlov",
        "7z.exe",
        "24.08",
        Platform::Windows,
        Arch::Amd64,
        21,
    ))
    .await;
    publish(&app).await;
    let dir = tempfile::tempdir().unwrap();
    download(&app, dir.path()).await;
    assert_eq!(
        index.generation().unwrap().1,
        3,
        "the bundle merged nothing"
    );
    assert!(index.delta_records() >= 2, "{}", index.delta_records());
    let v = bundle::verify_dir(dir.path(), &app.state.log_key.verifying_key()).unwrap();
    let current = [11, 12, 20, 21];
    for (kind, len) in [("sha256", 64), ("sha1", 40), ("md5", 32)] {
        let name = format!("vendor-{kind}");
        assert_eq!(v.manifest.counts[&name], current.len() as u64, "{name}");
        let holds =
            |seed| v.filters[&name].contains(testkit::hex_of(seed, len).to_uppercase().as_bytes());
        for seed in current {
            assert!(holds(seed), "{name} lacks record {seed}");
        }
        assert!(!holds(10), "{name} holds the superseded record");
    }
    // The feed list (the day's tree: the current records) names each record's vendor.
    let mut vendors: Vec<(String, Option<String>)> = v
        .feed
        .iter()
        .map(|r| (r.hash_sha256.clone(), r.vendor.clone()))
        .collect();
    vendors.sort();
    let mut want: Vec<(String, Option<String>)> = [
        (11, "PuTTY"),
        (12, "Go"),
        (20, "PuTTY"),
        (21, "Igor Pavlov"),
    ]
    .into_iter()
    .map(|(seed, vendor)| (testkit::hex_of(seed, 64), Some(vendor.to_owned())))
    .collect();
    want.sort();
    assert_eq!(vendors, want);
}
