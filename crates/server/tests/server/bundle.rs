//! The offline bundle over HTTP: the public part verifies with the log key alone, files
//! carry entity tags and byte ranges, the corpus part needs a key, and a new record
//! rebuilds the bundle.

use model::{Arch, Clock as _};
use serde_json::Value;
use testkit::TestApp;
use testkit::fixtures::putty;

testkit::backend_tests!(
    public_part_verifies_with_the_log_key,
    entity_tags_and_ranges,
    corpus_part_needs_a_key,
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
