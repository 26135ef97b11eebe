//! The API suite: what a user of the service notices, checked over real HTTP against a
//! real server on each storage backend.
//!
//! Each test is an `async fn(TestApp)`; `testkit::backend_tests!` instantiates it as `sqlite::<name>`
//! and `postgres::<name>` (the latter ignored unless
//! `KNOWNGOOD_TEST_POSTGRES_URL` was set when the tests were built). The harness is the `testkit` crate.
//!
//! `UPDATE_SNAPSHOTS=1 cargo test -p server --test server openapi` rewrites the committed
//! OpenAPI snapshot `crates/server/openapi.json`.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Duration;
use model::{Arch, Clock as _, Platform, Role, Tier};
use reqwest::Method;
use serde_json::{Value, json};
use server::routing::{Access, ImpersonationPolicy, ROUTES, RouteSpec};
use testkit::{TestApp, go, hex_of, putty, pypi, q, rec, t};

testkit::backend_tests!(
    hash_of_day_lists_current_records_only,
    hash_of_day_executable_filter,
    hash_of_day_date_is_forbidden,
    hash_of_day_cache_hits_and_invalidation,
    hash_of_day_cache_expires,
    hash_of_day_pages_and_streams,
    lookup_matches_each_hash_kind,
    lookup_keys_every_hash_lowercase_once,
    lookup_superseded_only_in_historical,
    lookup_never_trusts_tampered_records,
    lookup_index_answers_as_the_database_and_follows_writes,
    lookup_after_any_write_answers_from_the_index_as_the_database,
    lookup_rejects_malformed_bodies,
    lookup_body_size_limit,
    history_family_newest_first_with_validity,
    history_filters_and_paging,
    history_rejects_bad_parameters,
    export_csv_and_json_rows,
    export_rejects_bad_ranges,
    export_row_bound,
    stats_count_current_records,
    auth_rejects_bad_credentials,
    auth_roles_and_tiers,
    authorization_matrix,
    every_route_is_served,
    unknown_routes_are_json_404,
    public_status_never_shows_error_details,
    request_ids_are_echoed_or_minted,
    hostile_input_on_every_route,
    long_name_filters_are_refused_and_the_feed_cache_stays_bounded,
    health_and_status,
    status_counts_vendor_health,
    openapi_document,
    docs_page,
);

const LOOKUP: &str = "/api/v1/intel/lookup";
const HISTORICAL: &str = "/api/v1/intel/lookup/historical";

fn lookup_body(hashes: &[String]) -> String {
    json!({ "hashes": hashes }).to_string()
}

/// Ids of the records in a hash-of-day answer.
fn feed_ids(body: &Value) -> BTreeSet<String> {
    body["hashes"]
        .as_array()
        .expect("hashes array")
        .iter()
        .map(|h| h["id"].as_str().expect("id").to_string())
        .collect()
}

fn set<const N: usize>(items: [&str; N]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------------
// Public hash-of-day
// ---------------------------------------------------------------------------------------

async fn hash_of_day_lists_current_records_only(app: TestApp) {
    let empty = app.get("/public/hash-of-day").await;
    assert_eq!(empty.status, 200, "{}", empty.text);
    assert_eq!(empty.json()["hashes"], json!([]));

    let _old = app.record(putty("0.81", Arch::Amd64, 1)).await;
    let new = app.record(putty("0.82", Arch::Amd64, 2)).await;
    let req = app.record(pypi("requests", "2.32.3", 3)).await;
    let golang = app.record(go("1.23.4", 4)).await;

    let r = app.get("/public/hash-of-day").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.content_type().starts_with("application/json"));
    let body = r.json();
    assert_eq!(body["date"], "2025-03-10");
    assert_eq!(body["generated_at"], "2025-03-10T08:04:00Z");
    assert_eq!(
        body["cache_hit"], false,
        "records changed since the empty answer"
    );
    assert_eq!(
        feed_ids(&body),
        set([new.as_str(), req.as_str(), golang.as_str()])
    );

    let hashes = body["hashes"].as_array().unwrap();
    let p = hashes.iter().find(|h| h["id"] == new.as_str()).unwrap();
    assert_eq!(
        *p,
        json!({
            "id": new,
            "executable_name": "putty.exe",
            "version": "0.82",
            "vendor": "PuTTY",
            "platform": "windows",
            "arch": "amd64",
            "hash_sha256": hex_of(2, 64),
            "hash_sha1": hex_of(2, 40),
            "hash_md5": hex_of(2, 32),
            "source_url": "https://downloads.example/PuTTY/putty.exe",
            "download_verified": true,
            "valid_from": "2025-03-10T08:02:00Z",
            "sig_signer": null,
            "sig_issuer": null,
            "sig_serial": null,
            "sig_thumbprint": null,
        }),
        "cert_revoked_at is omitted when not revoked"
    );
    let pkg = hashes.iter().find(|h| h["id"] == req.as_str()).unwrap();
    assert_eq!(pkg["executable_name"], "requests (pypi)");
    assert_eq!(pkg["vendor"], "pypi");
    assert_eq!(pkg["platform"], "universal");
    assert_eq!(pkg["arch"], "universal");
    assert_eq!(pkg["hash_sha1"], Value::Null);
    assert_eq!(pkg["hash_md5"], Value::Null);
    assert_eq!(pkg["download_verified"], false);
}

/// Without `executable` the feed comes a page at a time: following `next` (or the `Link`
/// header) visits every current record once, in name order, and the JSON Lines route
/// streams the same records whole.
async fn hash_of_day_pages_and_streams(app: TestApp) {
    let mut ids = BTreeSet::new();
    for (i, name) in ["a", "b", "c", "d", "e", "f", "g"].iter().enumerate() {
        let seed = i as u64 + 1;
        ids.insert(app.record(pypi(name, "1.0", seed)).await);
    }
    let mut seen = Vec::new();
    let mut path = "/public/hash-of-day?limit=3".to_string();
    let mut pages = 0;
    loop {
        let r = app.get(&path).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let body = r.json();
        let hashes = body["hashes"].as_array().unwrap();
        assert!(hashes.len() <= 3, "{}", r.text);
        seen.extend(hashes.iter().map(|h| h["id"].as_str().unwrap().to_string()));
        pages += 1;
        match body["next"].as_str() {
            Some(next) => {
                let link = r
                    .headers
                    .get("link")
                    .expect("a Link header")
                    .to_str()
                    .unwrap();
                assert!(
                    link.contains(next) && link.ends_with("rel=\"next\""),
                    "{link}"
                );
                path = format!("/public/hash-of-day?limit=3&after={next}");
            }
            None => {
                assert!(r.headers.get("link").is_none());
                break;
            }
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 7, "every record once: {seen:?}");
    assert_eq!(seen.iter().cloned().collect::<BTreeSet<_>>(), ids);

    // The default page holds them all; bad paging parameters are refused.
    let all = app.get("/public/hash-of-day").await.json();
    assert_eq!(all["hashes"].as_array().unwrap().len(), 7);
    assert_eq!(all["next"], Value::Null);
    for query in [
        "limit=0",
        "limit=10001",
        "limit=x",
        "after=%21%21",
        "after=YQ",
        // A well-formed position whose id is no record id.
        "after=cHV0dHkuZXhlAHdpbmRvd3MAYW1kNjQAbm90LWEtcmVjb3JkLWlk",
    ] {
        app.get(&format!("/public/hash-of-day?{query}"))
            .await
            .assert_error(400, "bad request");
    }

    let r = app.get("/public/hash-of-day.ndjson").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.content_type().starts_with("application/x-ndjson"));
    let streamed: Vec<Value> = r
        .text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(streamed.len(), 7);
    assert_eq!(
        streamed
            .iter()
            .map(|h| h["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>(),
        seen,
        "the same records in the same order"
    );
}

async fn hash_of_day_executable_filter(app: TestApp) {
    app.record(putty("0.81", Arch::Amd64, 1)).await;
    let new = app.record(putty("0.82", Arch::Amd64, 2)).await;
    let x86 = app.record(putty("0.82", Arch::X86, 5)).await;
    let req = app.record(pypi("requests", "2.32.3", 3)).await;
    let golang = app.record(go("1.23.4", 4)).await;

    let cases: &[(&str, BTreeSet<String>)] = &[
        ("putty.exe", set([new.as_str(), x86.as_str()])),
        ("PUTTY.EXE", set([new.as_str(), x86.as_str()])),
        ("  PuTTY.exe ", set([new.as_str(), x86.as_str()])),
        ("requests (pypi)", set([req.as_str()])),
        ("Requests (PyPI)", set([req.as_str()])),
        ("go1.23.4.windows-amd64.msi", set([golang.as_str()])),
        // Exact match only: no prefix, substring, family or wildcard matching.
        ("requests", set([])),
        ("putty", set([])),
        ("putty.ex", set([])),
        ("_utty.exe", set([])),
        ("%", set([])),
        ("go1.23.5.windows-amd64.msi", set([])),
        ("no such tool", set([])),
        ("é\u{1F600}", set([])),
    ];
    for (name, expected) in cases {
        let r = app
            .get(&format!("/public/hash-of-day?executable={}", q(name)))
            .await;
        assert_eq!(r.status, 200, "{name:?}: {}", r.text);
        assert_eq!(&feed_ids(&r.json()), expected, "executable={name:?}");
    }
    // An empty filter is no filter.
    let all = app.get("/public/hash-of-day?executable=").await;
    assert_eq!(all.status, 200);
    assert_eq!(feed_ids(&all.json()).len(), 4);
}

async fn hash_of_day_date_is_forbidden(app: TestApp) {
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    for query in [
        "date=2025-03-09",
        "date=2025-03-10&executable=putty.exe",
        "executable=putty.exe&date=yesterday",
    ] {
        let r = app.get(&format!("/public/hash-of-day?{query}")).await;
        r.assert_error(403, "forbidden");
        assert!(
            r.message().contains("credential"),
            "the message says history needs a credential: {}",
            r.text
        );
    }
}

async fn hash_of_day_cache_hits_and_invalidation(app: TestApp) {
    let old = app.record(putty("0.81", Arch::Amd64, 1)).await;
    let path = "/public/hash-of-day?executable=putty.exe";

    let first = app.get(path).await.json();
    assert_eq!(first["cache_hit"], false);
    assert_eq!(feed_ids(&first), set([old.as_str()]));
    app.clock.advance(Duration::minutes(5));
    let second = app.get(path).await.json();
    assert_eq!(second["cache_hit"], true);
    assert_eq!(second["hashes"], first["hashes"]);
    assert_eq!(
        second["generated_at"], first["generated_at"],
        "a cached body keeps the time it was built"
    );
    // Other filters are cached separately.
    assert_eq!(
        app.get("/public/hash-of-day").await.json()["cache_hit"],
        false
    );
    assert_eq!(
        app.get("/public/hash-of-day").await.json()["cache_hit"],
        true
    );
    // The filter is case-insensitive, and so is its cache entry.
    assert_eq!(
        app.get("/public/hash-of-day?executable=PUTTY.EXE")
            .await
            .json()["cache_hit"],
        true
    );

    // A new record drops the cache: the next answer is fresh and shows it.
    let new = app.record(putty("0.82", Arch::Amd64, 2)).await;
    let third = app.get(path).await.json();
    assert_eq!(third["cache_hit"], false);
    assert_eq!(feed_ids(&third), set([new.as_str()]));
    let all = app.get("/public/hash-of-day").await.json();
    assert_eq!(all["cache_hit"], false);
    assert_eq!(feed_ids(&all), set([new.as_str()]));
    assert_eq!(app.get(path).await.json()["cache_hit"], true);

    // Re-recording an unchanged file is not a change.
    let outcome = app
        .store
        .record(putty("0.82", Arch::Amd64, 2), app.clock.now())
        .await
        .unwrap();
    assert!(matches!(outcome, store::RecordOutcome::Unchanged { .. }));
    assert_eq!(app.get(path).await.json()["cache_hit"], true);
}

async fn hash_of_day_cache_expires(app: TestApp) {
    let id = app.record(putty("0.82", Arch::Amd64, 2)).await;
    let path = "/public/hash-of-day?executable=putty.exe";
    let built_at = app.clock.now();
    assert_eq!(app.get(path).await.json()["cache_hit"], false);

    app.clock.advance(Duration::minutes(59));
    let r = app.get(path).await.json();
    assert_eq!(r["cache_hit"], true, "59 minutes old");
    assert_eq!(r["generated_at"], common_ts(built_at));

    app.clock.advance(Duration::minutes(1));
    let r = app.get(path).await.json();
    assert_eq!(r["cache_hit"], false, "an hour old: expired");
    assert_eq!(r["generated_at"], common_ts(app.clock.now()));
    assert_eq!(feed_ids(&r), set([id.as_str()]));
    assert_eq!(app.get(path).await.json()["cache_hit"], true);

    // Never across a UTC day boundary, even within the hour.
    app.clock.set(t("2025-03-10T23:50:00Z"));
    assert_eq!(app.get(path).await.json()["cache_hit"], false);
    assert_eq!(app.get(path).await.json()["cache_hit"], true);
    app.clock.set(t("2025-03-11T00:05:00Z"));
    let r = app.get(path).await.json();
    assert_eq!(r["cache_hit"], false);
    assert_eq!(r["date"], "2025-03-11");
}

fn common_ts(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

// ---------------------------------------------------------------------------------------
// Lookup
// ---------------------------------------------------------------------------------------

fn known(vendor: &str, name: &str, version: &str, platform: &str) -> Value {
    json!({
        "classification": "known_vendor_release",
        "source": "service_vendor",
        "vendor": vendor,
        "executable_name": name,
        "version": version,
        "platform": platform,
    })
}

fn unknown() -> Value {
    json!({ "classification": "unknown" })
}

async fn lookup_matches_each_hash_kind(app: TestApp) {
    let key = app.analyst().await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    app.record(pypi("requests", "2.32.3", 3)).await;

    for (kind, hash) in [
        ("sha256", hex_of(2, 64)),
        ("sha1", hex_of(2, 40)),
        ("md5", hex_of(2, 32)),
    ] {
        let r = app
            .post_with(LOOKUP, &key, lookup_body(std::slice::from_ref(&hash)))
            .await;
        assert_eq!(r.status, 200, "{kind}: {}", r.text);
        assert_eq!(
            r.json(),
            json!({ "results": { hash.clone(): known("PuTTY", "putty.exe", "0.82", "windows") } }),
            "{kind}"
        );
    }
    let pkg = hex_of(3, 64);
    let r = app
        .post_with(LOOKUP, &key, lookup_body(std::slice::from_ref(&pkg)))
        .await;
    assert_eq!(
        r.json()["results"][&pkg],
        known("pypi", "requests (pypi)", "2.32.3", "universal")
    );

    // Unknown values of each length, and the SHA-1/MD5 of a manifest-only record (which
    // has none).
    let misses = [
        hex_of(99, 64),
        hex_of(99, 40),
        hex_of(99, 32),
        hex_of(3, 40),
        hex_of(3, 32),
    ];
    let r = app.post_with(LOOKUP, &key, lookup_body(&misses)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let results = r.json()["results"].clone();
    assert_eq!(results.as_object().unwrap().len(), misses.len());
    for m in &misses {
        assert_eq!(results[m], unknown(), "{m}");
    }
}

async fn lookup_keys_every_hash_lowercase_once(app: TestApp) {
    let key = app.analyst().await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    let sha = hex_of(2, 64);
    let md5 = hex_of(2, 32);
    let miss = hex_of(77, 40);
    let submitted = vec![
        sha.to_uppercase(),
        sha.clone(),
        format!("  {}\t", sha.to_uppercase()),
        miss.to_uppercase(),
        md5.clone(),
        md5.to_uppercase(),
    ];
    for path in [LOOKUP, HISTORICAL] {
        let r = app.post_with(path, &key, lookup_body(&submitted)).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        let results = r.json()["results"].as_object().unwrap().clone();
        let keys: BTreeSet<String> = results.keys().cloned().collect();
        assert_eq!(
            keys,
            [sha.clone(), miss.clone(), md5.clone()]
                .into_iter()
                .collect(),
            "{path}: one lowercase key per distinct hash"
        );
        assert_eq!(
            results[&sha],
            known("PuTTY", "putty.exe", "0.82", "windows")
        );
        assert_eq!(
            results[&md5],
            known("PuTTY", "putty.exe", "0.82", "windows")
        );
        assert_eq!(results[&miss], unknown());
    }

    // The largest batch: 100 distinct values, every one answered.
    let batch: Vec<String> = (1000..1100).map(|i| hex_of(i, 64)).collect();
    let r = app.post_with(LOOKUP, &key, lookup_body(&batch)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["results"].as_object().unwrap().len(), 100);
}

async fn lookup_superseded_only_in_historical(app: TestApp) {
    let key = app.analyst().await;
    app.record(putty("0.81", Arch::Amd64, 1)).await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    let old = [hex_of(1, 64), hex_of(1, 40), hex_of(1, 32)];
    let new = hex_of(2, 64);
    let mut all = old.to_vec();
    all.push(new.clone());

    let r = app.post_with(LOOKUP, &key, lookup_body(&all)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let results = r.json()["results"].clone();
    for h in &old {
        assert_eq!(results[h], unknown(), "superseded build in lookup: {h}");
    }
    assert_eq!(
        results[&new],
        known("PuTTY", "putty.exe", "0.82", "windows")
    );

    let r = app.post_with(HISTORICAL, &key, lookup_body(&all)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let results = r.json()["results"].clone();
    let mut expected_old = known("PuTTY", "putty.exe", "0.81", "windows");
    expected_old["historical"] = json!(true);
    for h in &old {
        assert_eq!(
            results[h], expected_old,
            "superseded build in historical: {h}"
        );
    }
    assert_eq!(
        results[&new],
        known("PuTTY", "putty.exe", "0.82", "windows"),
        "a current build carries no historical flag"
    );
}

async fn lookup_never_trusts_tampered_records(app: TestApp) {
    let key = app.analyst().await;
    let putty_id = app.record(putty("0.82", Arch::Amd64, 2)).await;
    let go_id = app.record(go("1.23.4", 4)).await;
    let status = app.get("/public/status").await.json();
    assert_eq!(status["integrity_failures"], 0);
    assert_eq!(status["status"], "ok");

    // Someone with database access edits a signed field of one record, and swaps the
    // hash of another for their own file's.
    let n = app
        .exec(
            &format!(
                "UPDATE hash_records SET version = $1 WHERE id = {}",
                app.backend.unhex("$2")
            ),
            &["0.99", &putty_id],
        )
        .await;
    assert_eq!(n, 1);
    let evil = hex_of(666, 64);
    let n = app
        .exec(
            &format!(
                "UPDATE hash_records SET hash_sha256 = {} WHERE id = {}",
                app.backend.bytes_literal(&evil),
                app.backend.unhex("$1")
            ),
            &[&go_id],
        )
        .await;
    assert_eq!(n, 1);

    let probes = vec![
        hex_of(2, 64),
        hex_of(2, 40),
        hex_of(2, 32),
        evil.clone(),
        hex_of(4, 40),
    ];
    for path in [LOOKUP, HISTORICAL] {
        let r = app.post_with(path, &key, lookup_body(&probes)).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let results = r.json()["results"].clone();
        for p in &probes {
            assert_eq!(results[p], unknown(), "{path}: tampered record matched {p}");
        }
    }

    let status = app.get("/public/status").await.json();
    assert_eq!(
        status["integrity_failures"], 2,
        "both tampered records counted once each: {status}"
    );
    assert_eq!(status["status"], "degraded");

    // Nor are they published.
    let feed = app.get("/public/hash-of-day").await.json();
    assert_eq!(feed["hashes"], json!([]));
    let hist = app.get_with("/api/v1/intel/export?format=json", &key).await;
    assert_eq!(hist.status, 200);
    assert_eq!(hist.json(), json!([]), "tampered rows are not exported");
}

/// Builds the in-memory lookup index now and checks that lookups will use it.
async fn index_now(app: &TestApp) {
    app.state.classifier.rebuild().await.expect("index rebuild");
    assert!(
        app.state.classifier.index().is_fresh(&app.store),
        "a fresh build is current"
    );
}

async fn lookup_index_answers_as_the_database_and_follows_writes(app: TestApp) {
    let key = app.analyst().await;
    app.record(putty("0.81", Arch::Amd64, 1)).await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    app.record(pypi("requests", "2.32.3", 3)).await;
    // Two current records of one file, recorded at the same instant: the smaller id wins.
    let a = app.record(go("1.23.4", 4)).await;
    let mut mirror = go("1.23.4", 4);
    mirror.vendor = "Go mirror".into();
    mirror.executable_name = "go-latest.msi".into();
    let b = app.record_now(mirror).await;
    let shared = if a < b {
        known("Go", "go1.23.4.windows-amd64.msi", "1.23.4", "windows")
    } else {
        known("Go mirror", "go-latest.msi", "1.23.4", "windows")
    };
    let probes: Vec<String> = vec![
        hex_of(1, 64),
        hex_of(1, 32),
        hex_of(2, 40),
        hex_of(3, 64),
        hex_of(4, 64),
        hex_of(4, 32),
        hex_of(99, 64),
    ];
    let mut old = known("PuTTY", "putty.exe", "0.81", "windows");
    old["historical"] = json!(true);
    let current = json!({
        hex_of(1, 64): unknown(),
        hex_of(1, 32): unknown(),
        hex_of(2, 40): known("PuTTY", "putty.exe", "0.82", "windows"),
        hex_of(3, 64): known("pypi", "requests (pypi)", "2.32.3", "universal"),
        hex_of(4, 64): shared,
        hex_of(4, 32): shared,
        hex_of(99, 64): unknown(),
    });
    let mut historical = current.clone();
    historical[hex_of(1, 64)] = old.clone();
    historical[hex_of(1, 32)] = old;

    // The first lookup after a write goes to the database; after a build, to the index.
    for pass in ["database", "index"] {
        if pass == "index" {
            index_now(&app).await;
        }
        for (path, expected) in [(LOOKUP, &current), (HISTORICAL, &historical)] {
            let r = app.post_with(path, &key, lookup_body(&probes)).await;
            assert_eq!(r.status, 200, "{}", r.text);
            assert_eq!(&r.json()["results"], expected, "{pass}: {path}");
        }
    }

    // A write is seen by the very next lookup, with no rebuild in between.
    app.record(putty("0.83", Arch::Amd64, 5)).await;
    let probes = vec![hex_of(2, 64), hex_of(5, 64)];
    let r = app.post_with(LOOKUP, &key, lookup_body(&probes)).await;
    assert_eq!(
        r.json()["results"],
        json!({
            hex_of(2, 64): unknown(),
            hex_of(5, 64): known("PuTTY", "putty.exe", "0.83", "windows"),
        })
    );

    // Another replica's write shows once this one has polled the records epoch.
    index_now(&app).await;
    let replica = app.replica().await;
    replica.record(go("1.23.5", 6)).await;
    app.store.poll_records_epoch().await.expect("poll");
    let r = app
        .post_with(LOOKUP, &key, lookup_body(&[hex_of(6, 64), hex_of(4, 64)]))
        .await;
    assert_eq!(
        r.json()["results"][hex_of(6, 64)],
        known("Go", "go1.23.5.windows-amd64.msi", "1.23.5", "windows")
    );
    assert_eq!(
        r.json()["results"][hex_of(4, 64)],
        known("Go mirror", "go-latest.msi", "1.23.4", "windows"),
        "the Go MSI of 1.23.4 is superseded; its mirror is current"
    );
    replica.store.close().await;

    // Tampering behind the service's back changes nothing the index answers (it holds what
    // was verified); the next full scan leaves the record out and counts it.
    index_now(&app).await;
    let putty_id = app
        .text_rows(
            &format!(
                "SELECT {} FROM hash_records WHERE version = $1",
                app.backend.hex("id")
            ),
            &["0.83"],
        )
        .await[0][0]
        .clone();
    app.exec(
        &format!(
            "UPDATE hash_records SET version = $1 WHERE id = {}",
            app.backend.unhex("$2")
        ),
        &["0.99", &putty_id],
    )
    .await;
    let r = app
        .post_with(LOOKUP, &key, lookup_body(&[hex_of(5, 64)]))
        .await;
    assert_eq!(
        r.json()["results"][hex_of(5, 64)],
        known("PuTTY", "putty.exe", "0.83", "windows")
    );
    index_now(&app).await;
    let r = app
        .post_with(LOOKUP, &key, lookup_body(&[hex_of(5, 64)]))
        .await;
    assert_eq!(r.json()["results"][hex_of(5, 64)], unknown());
    let status = app.get("/public/status").await.json();
    assert_eq!(status["integrity_failures"], 1, "{status}");
}

/// Classifies `probes` through the service's classifier, which must answer from its index,
/// and through the database path (`find_by_hashes` and `best_match`); the answers must agree.
async fn index_agrees_with_database(app: &TestApp, probes: &[String], step: &str) {
    let batch: Vec<model::HashValue> = probes
        .iter()
        .map(|h| model::HashValue::parse(h).expect("hash"))
        .collect();
    for historical in [false, true] {
        let classified = app
            .state
            .classifier
            .classify(batch.clone(), historical)
            .await
            .expect("classify");
        assert!(
            classified.from_index(),
            "{step}: answered from the database"
        );
        let from_index: Vec<String> = classified
            .results()
            .into_iter()
            .map(|(_, v)| match v {
                lookup::Verdict::VendorRelease(m) => format!("{m:?}"),
                other => format!("{:?}", other.classification()),
            })
            .collect();
        let records = app
            .store
            .find_by_hashes(&batch, historical)
            .await
            .expect("find_by_hashes");
        let from_database: Vec<String> = batch
            .iter()
            .map(|h| match lookup::best_match(h, &records) {
                Some(m) => format!("{m:?}"),
                None => format!("{:?}", model::Classification::Unknown),
            })
            .collect();
        assert_eq!(
            from_index, from_database,
            "{step}, historical: {historical}"
        );
    }
}

async fn lookup_after_any_write_answers_from_the_index_as_the_database(app: TestApp) {
    let key = app.analyst().await;
    app.record(putty("0.81", Arch::Amd64, 1)).await;
    app.record(go("1.23.4", 4)).await;
    app.record(pypi("requests", "2.32.3", 7)).await;
    index_now(&app).await;
    let probes: Vec<String> = (1..=12)
        .flat_map(|seed| [hex_of(seed, 64), hex_of(seed, 40), hex_of(seed, 32)])
        .chain([hex_of(666, 64)])
        .collect();
    index_agrees_with_database(&app, &probes, "built").await;

    // A newer version supersedes the current record.
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    index_agrees_with_database(&app, &probes, "superseded").await;
    let r = app.post_with(LOOKUP, &key, lookup_body(&probes[..6])).await;
    assert_eq!(r.json()["results"][hex_of(1, 64)], unknown());
    assert_eq!(
        r.json()["results"][hex_of(2, 64)],
        known("PuTTY", "putty.exe", "0.82", "windows")
    );

    // An older version recorded later enters the history before 0.81, which may move back.
    app.record(putty("0.80", Arch::Amd64, 3)).await;
    index_agrees_with_database(&app, &probes, "older version").await;

    // The same file under another name at the same instant: ties go to the smaller id; then
    // the Go MSI is superseded and the mirror alone is current.
    let mut mirror = go("1.23.4", 4);
    mirror.vendor = "Go mirror".into();
    mirror.executable_name = "go-latest.msi".into();
    app.record_now(mirror).await;
    index_agrees_with_database(&app, &probes, "shared hash").await;
    app.record(go("1.23.5", 5)).await;
    index_agrees_with_database(&app, &probes, "shared hash superseded").await;

    // A batch of several families.
    app.clock.advance(Duration::minutes(1));
    app.store
        .record_many(
            vec![putty("0.83", Arch::Amd64, 8), putty("0.83", Arch::Arm64, 9)],
            app.clock.now(),
        )
        .await
        .expect("record_many");
    index_agrees_with_database(&app, &probes, "batch").await;

    // A row tampered with and then superseded is read again, and fails: it stops answering
    // for the hashes it was signed with.
    let requests = app
        .text_rows(
            &format!(
                "SELECT {} FROM hash_records WHERE version = $1",
                app.backend.hex("id")
            ),
            &["2.32.3"],
        )
        .await[0][0]
        .clone();
    app.exec(
        &format!(
            "UPDATE hash_records SET hash_sha256 = {} WHERE id = {}",
            app.backend.bytes_literal(&hex_of(666, 64)),
            app.backend.unhex("$1")
        ),
        &[&requests],
    )
    .await;
    app.record(pypi("requests", "2.32.4", 10)).await;
    index_agrees_with_database(&app, &probes, "tampered, superseded").await;

    // A new row tampered with before the index reads it is never indexed. (A write through
    // this process is read at once, before anyone could tamper with it; so the row comes
    // from another replica, whose writes this process reads when it next looks.)
    let other = app.replica().await;
    let tampered = other.record(putty("0.84", Arch::Amd64, 11)).await;
    app.exec(
        &format!(
            "UPDATE hash_records SET version = $1 WHERE id = {}",
            app.backend.unhex("$2")
        ),
        &["9.99", &tampered],
    )
    .await;
    // This process notices the other replica's write (as its upkeep does twice a second).
    app.store.poll_records_epoch().await.unwrap();
    index_agrees_with_database(&app, &probes, "tampered new row").await;

    // Another replica's write, once this one has polled the records epoch.
    let replica = app.replica().await;
    replica.record(putty("0.85", Arch::Amd64, 12)).await;
    app.store.poll_records_epoch().await.expect("poll");
    index_agrees_with_database(&app, &probes, "replica write").await;
    replica.store.close().await;

    assert_eq!(
        app.state.classifier.index().database_lookups(),
        0,
        "every lookup after the first build answered from the index"
    );
}

async fn lookup_rejects_malformed_bodies(app: TestApp) {
    let key = app.analyst().await;
    let good = hex_of(1, 64);
    let many: Vec<String> = (0..101).map(|i| hex_of(i, 64)).collect();
    let cases: Vec<(String, &[&str])> = vec![
        ("not json".into(), &["JSON"]),
        ("{\"hashes\": [".into(), &["JSON"]),
        ("".into(), &["body"]),
        ("null".into(), &[]),
        ("[]".into(), &[]),
        ("\"hashes\"".into(), &[]),
        ("{}".into(), &["hashes"]),
        ("{\"hash\": []}".into(), &["hash"]),
        ("{\"hashes\": \"abc\"}".into(), &["hashes"]),
        ("{\"hashes\": null}".into(), &["hashes"]),
        ("{\"hashes\": {}}".into(), &["hashes"]),
        ("{\"hashes\": 42}".into(), &["hashes"]),
        ("{\"hashes\": [1, 2]}".into(), &["hashes"]),
        ("{\"hashes\": [null]}".into(), &["hashes"]),
        ("{\"hashes\": [[\"a\"]]}".into(), &["hashes"]),
        ("{\"hashes\": []}".into(), &["hashes", "empty"]),
        (lookup_body(&many), &["101", "100"]),
        (lookup_body(&["zz".repeat(32)]), &["hashes[0]", "hex"]),
        (
            lookup_body(&[good.clone(), "abc".into()]),
            &["hashes[1]", "abc", "64"],
        ),
        (lookup_body(&["a".repeat(63)]), &["hashes[0]", "63"]),
        (lookup_body(&["a".repeat(65)]), &["hashes[0]"]),
        (lookup_body(&[String::new()]), &["hashes[0]"]),
        (lookup_body(&["   ".into()]), &["hashes[0]"]),
        (lookup_body(&["é".repeat(32)]), &["hashes[0]"]),
        (lookup_body(&["é".repeat(16)]), &["hashes[0]"]),
        (lookup_body(&["\u{1F600}".repeat(16)]), &["hashes[0]"]),
        (lookup_body(&["\u{0}".repeat(64)]), &["hashes[0]"]),
        (
            lookup_body(&[format!("0x{}", "a".repeat(62))]),
            &["hashes[0]"],
        ),
        (
            format!("{{\"hashes\": [\"{good}\"], \"extra\": 1}}"),
            &["extra"],
        ),
        (format!("{{\"hashes\": [\"{good}\"]}} trailing"), &[]),
        ("[".repeat(10_000), &[]),
        ("{\"hashes\": [\"\\ud800\"]}".into(), &[]),
        (format!("{{\"hashes\": [{}]}}", "1".repeat(5000)), &[]),
    ];
    for path in [LOOKUP, HISTORICAL] {
        for (body, fragments) in &cases {
            let r = app.post_with(path, &key, body.clone()).await;
            let shown: String = body.chars().take(60).collect();
            assert_eq!(r.status, 400, "{path} {shown:?}: {}", r.text);
            assert_eq!(r.error(), "bad request", "{shown:?}");
            let message = r.message();
            assert!(!message.is_empty(), "{shown:?}: no message");
            for f in *fragments {
                assert!(
                    message.contains(f),
                    "{path} {shown:?}: message {message:?} should mention {f:?}"
                );
            }
        }
    }

    // Bytes that are not UTF-8.
    let r = app
        .call(
            Method::POST,
            LOOKUP,
            Some(&key),
            Some(b"{\"hashes\": [\"\xff\xfe\"]}".to_vec().into()),
        )
        .await;
    r.assert_error(400, "bad request");

    // A body without a JSON content type is read the same way.
    let r = app.call(Method::POST, LOOKUP, Some(&key), None).await;
    r.assert_error(400, "bad request");
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let r = client
        .post(format!("{}{LOOKUP}", app.base))
        .header("X-API-Key", &key)
        .header("Content-Type", "text/plain")
        .body(lookup_body(std::slice::from_ref(&good)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

async fn lookup_body_size_limit(app: TestApp) {
    let key = app.analyst().await;
    let limit = server::routing::DEFAULT_MAX_BODY;
    assert_eq!(limit, 64 * 1024);

    // Just under the limit (padding is whitespace): accepted.
    let body = lookup_body(&[hex_of(1, 64)]);
    let padded = format!("{body}{}", " ".repeat(limit - body.len()));
    assert_eq!(padded.len(), limit);
    let r = app.post_with(LOOKUP, &key, padded).await;
    assert_eq!(r.status, 200, "{}", r.text);

    // Over it, with a Content-Length...
    let big = lookup_body(&["a".repeat(70_000)]);
    for path in [LOOKUP, HISTORICAL] {
        let r = app.post_with(path, &key, big.clone()).await;
        r.assert_error(413, "payload too large");
    }
    let r = app
        .post_with(LOOKUP, &key, format!("{body}{}", " ".repeat(limit)))
        .await;
    r.assert_error(413, "payload too large");

    // ... and streamed without one.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = (0..20)
        .map(|i| {
            Ok(if i == 0 {
                b"{\"hashes\": [\"".to_vec()
            } else {
                vec![b'a'; 8192]
            })
        })
        .collect();
    let r = app
        .call(
            Method::POST,
            LOOKUP,
            Some(&key),
            Some(reqwest::Body::wrap_stream(futures::stream::iter(chunks))),
        )
        .await;
    r.assert_error(413, "payload too large");

    // The server is still fine afterwards.
    let r = app
        .post_with(LOOKUP, &key, lookup_body(&[hex_of(1, 64)]))
        .await;
    assert_eq!(r.status, 200);
}

// ---------------------------------------------------------------------------------------
// History
// ---------------------------------------------------------------------------------------

async fn history_family_newest_first_with_validity(app: TestApp) {
    let key = app.analyst().await;
    for (i, v) in ["1.23.4", "1.23.5", "1.23.6"].iter().enumerate() {
        app.clock.advance(Duration::days(1));
        app.record_now(go(v, 10 + i as u64)).await;
    }
    // Same vendor, other families: not part of this history.
    app.record(rec(
        "Go",
        "go1.23.6.linux-amd64.tar.gz",
        "1.23.6",
        Platform::Linux,
        Arch::Amd64,
        20,
    ))
    .await;
    app.record(rec(
        "Go",
        "go1.23.6.windows-arm64.msi",
        "1.23.6",
        Platform::Windows,
        Arch::Arm64,
        21,
    ))
    .await;

    for name in [
        "go1.23.4.windows-amd64.msi",
        "go1.23.5.windows-amd64.msi",
        "GO1.23.6.WINDOWS-AMD64.MSI",
    ] {
        let r = app
            .get_with(
                &format!("/api/v1/intel/history?executable={}", q(name)),
                &key,
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        let body = r.json();
        assert_eq!(body["total"], 3, "{name}: {body}");
        assert_eq!(body["limit"], 50);
        assert_eq!(body["offset"], 0);
        let results = body["results"].as_array().unwrap();
        let versions: Vec<&str> = results
            .iter()
            .map(|e| e["version"].as_str().unwrap())
            .collect();
        assert_eq!(versions, ["1.23.6", "1.23.5", "1.23.4"], "newest first");
        assert_eq!(results[0]["status"], "current");
        assert_eq!(results[0]["valid_until"], Value::Null);
        assert_eq!(results[0]["executable_name"], "go1.23.6.windows-amd64.msi");
        assert_eq!(results[0]["hash_sha256"], hex_of(12, 64));
        assert_eq!(results[0]["valid_from"], "2025-03-13T08:00:00Z");
        for i in 1..3 {
            assert_eq!(results[i]["status"], "superseded");
            assert_eq!(
                results[i]["valid_until"],
                results[i - 1]["valid_from"],
                "valid_until of a superseded entry is its successor's valid_from"
            );
        }
        assert_eq!(results[2]["valid_from"], "2025-03-11T08:00:00Z");
        for e in results {
            for field in [
                "executable_name",
                "version",
                "hash_sha256",
                "valid_from",
                "valid_until",
                "status",
            ] {
                assert!(e.get(field).is_some(), "history entry lacks {field}: {e}");
            }
        }
    }

    // A package's history, and a name never recorded.
    app.record(pypi("requests", "2.32.2", 30)).await;
    app.record(pypi("requests", "2.32.3", 31)).await;
    let r = app
        .get_with(
            &format!("/api/v1/intel/history?executable={}", q("Requests (PyPI)")),
            &key,
        )
        .await;
    let versions: Vec<Value> = r.json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"].clone())
        .collect();
    assert_eq!(versions, [json!("2.32.3"), json!("2.32.2")]);
    let r = app
        .get_with("/api/v1/intel/history?executable=nothing.exe", &key)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        json!({"results": [], "total": 0, "limit": 50, "offset": 0})
    );
}

async fn history_filters_and_paging(app: TestApp) {
    let key = app.analyst().await;
    // One unversioned name on several platforms and architectures.
    let agent = |platform, arch, version: &str, seed| {
        rec("Example", "agent", version, platform, arch, seed)
    };
    app.record(agent(Platform::Linux, Arch::Amd64, "1.0", 1))
        .await;
    app.record(agent(Platform::Linux, Arch::Amd64, "1.1", 2))
        .await;
    app.record(agent(Platform::Linux, Arch::Arm64, "1.1", 3))
        .await;
    app.record(agent(Platform::Darwin, Arch::Arm64, "1.1", 4))
        .await;
    app.record(agent(Platform::Darwin, Arch::Universal, "1.1", 5))
        .await;

    let hist = |query: String| {
        let key = key.clone();
        let app = &app;
        async move {
            let r = app
                .get_with(&format!("/api/v1/intel/history?{query}"), &key)
                .await;
            assert_eq!(r.status, 200, "{query}: {}", r.text);
            r.json()
        }
    };
    let cases = [
        ("executable=agent", 5),
        ("executable=agent&platform=linux", 3),
        ("executable=agent&arch=arm64", 2),
        ("executable=agent&platform=darwin&arch=arm64", 1),
        ("executable=agent&platform=darwin&arch=universal", 1),
        ("executable=agent&platform=windows", 0),
        ("executable=agent&platform=linux&arch=x86", 0),
    ];
    for (query, total) in cases {
        let body = hist(query.to_string()).await;
        assert_eq!(body["total"], total, "{query}: {body}");
        assert_eq!(body["results"].as_array().unwrap().len(), total, "{query}");
        let platform = query
            .split("platform=")
            .nth(1)
            .map(|s| s.split('&').next().unwrap());
        for e in body["results"].as_array().unwrap() {
            if let Some(p) = platform {
                assert_eq!(e["platform"], p, "{query}");
            }
        }
    }

    // 55 versions of one file: paging.
    let mut expected = Vec::new();
    for i in 0..55u64 {
        let version = format!("2.0.{i}");
        app.record(rec(
            "Tool",
            "tool.exe",
            &version,
            Platform::Windows,
            Arch::Amd64,
            100 + i,
        ))
        .await;
        expected.push(version);
    }
    expected.reverse();
    let versions = |body: &Value| -> Vec<String> {
        body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["version"].as_str().unwrap().to_string())
            .collect()
    };
    let body = hist("executable=tool.exe".into()).await;
    assert_eq!(
        (body["total"].clone(), body["limit"].clone()),
        (json!(55), json!(50))
    );
    assert_eq!(versions(&body), expected[..50], "default page is 50");
    let body = hist("executable=tool.exe&offset=50".into()).await;
    assert_eq!(body["offset"], 50);
    assert_eq!(versions(&body), expected[50..]);
    let body = hist("executable=tool.exe&limit=10&offset=20".into()).await;
    assert_eq!(body["total"], 55);
    assert_eq!(body["limit"], 10);
    assert_eq!(versions(&body), expected[20..30]);
    let body = hist("executable=tool.exe&limit=200".into()).await;
    assert_eq!(body["limit"], 200);
    assert_eq!(versions(&body), expected);
    let body = hist("executable=tool.exe&limit=1".into()).await;
    assert_eq!(versions(&body), expected[..1]);
    let body = hist("executable=tool.exe&offset=1000".into()).await;
    assert_eq!(body["total"], 55);
    assert_eq!(body["results"], json!([]));
    // Paging through with the largest offset still answers every entry once.
    let mut seen = Vec::new();
    for offset in (0..55).step_by(20) {
        let body = hist(format!("executable=tool.exe&limit=20&offset={offset}")).await;
        seen.extend(versions(&body));
    }
    assert_eq!(seen, expected);
}

async fn history_rejects_bad_parameters(app: TestApp) {
    let key = app.analyst().await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    let cases: &[(&str, &str)] = &[
        ("", "executable"),
        ("executable=", "executable"),
        ("executable=%20%20", "executable"),
        ("platform=windows", "executable"),
        ("executable=putty.exe&limit=201", "limit"),
        ("executable=putty.exe&limit=0", "limit"),
        ("executable=putty.exe&limit=-1", "limit"),
        ("executable=putty.exe&limit=abc", "limit"),
        ("executable=putty.exe&limit=1.5", "limit"),
        ("executable=putty.exe&limit=99999999999999999999", "limit"),
        ("executable=putty.exe&offset=-1", "offset"),
        ("executable=putty.exe&offset=abc", "offset"),
        ("executable=putty.exe&platform=beos", "platform"),
        ("executable=putty.exe&platform=Windows", "platform"),
        ("executable=putty.exe&arch=sparc", "arch"),
    ];
    for (query, field) in cases {
        let r = app
            .get_with(&format!("/api/v1/intel/history?{query}"), &key)
            .await;
        r.assert_error(400, "bad request");
        assert!(
            r.message().contains(field),
            "{query}: message {:?} should name {field}",
            r.message()
        );
    }
    // Edges that are fine.
    for query in [
        "executable=putty.exe&limit=200",
        "executable=putty.exe&limit=1&offset=0",
        "executable=putty.exe&platform=universal",
        "executable=putty.exe&unknown_param=1",
    ] {
        let r = app
            .get_with(&format!("/api/v1/intel/history?{query}"), &key)
            .await;
        assert_eq!(r.status, 200, "{query}: {}", r.text);
    }
}

// ---------------------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------------------

const CSV_HEADER: &str = "executable_name,version,vendor,platform,arch,hash_sha256,hash_sha1,hash_md5,valid_from,valid_until,status,source_url,download_verified";

/// Rows of a CSV export as column -> value maps (the test data has no quoting).
fn csv_rows(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = text.split("\r\n");
    let header = lines.next().expect("header line");
    assert_eq!(header, CSV_HEADER);
    let columns: Vec<&str> = header.split(',').collect();
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.last(), Some(&""), "CSV ends with a line break");
    rows[..rows.len() - 1]
        .iter()
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            assert_eq!(cells.len(), columns.len(), "{line}");
            columns
                .iter()
                .zip(cells)
                .map(|(c, v)| (c.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// JSON export rows in the same shape as `csv_rows` (null as empty, booleans as text).
fn json_rows(body: &Value) -> Vec<BTreeMap<String, String>> {
    body.as_array()
        .expect("JSON export is an array")
        .iter()
        .map(|row| {
            let obj = row.as_object().expect("row object");
            let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
            let mut sorted_columns: Vec<&str> = CSV_HEADER.split(',').collect();
            sorted_columns.sort();
            assert_eq!(keys, sorted_columns, "JSON row fields");
            obj.iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::Null => String::new(),
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), v)
                })
                .collect()
        })
        .collect()
}

async fn export(app: &TestApp, key: &str, query: &str) -> (Vec<BTreeMap<String, String>>, String) {
    let csv = app
        .get_with(&format!("/api/v1/intel/export?format=csv&{query}"), key)
        .await;
    assert_eq!(csv.status, 200, "{query}: {}", csv.text);
    assert!(
        csv.content_type().starts_with("text/csv"),
        "{}",
        csv.content_type()
    );
    let disposition = csv
        .headers
        .get("content-disposition")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    assert!(disposition.starts_with("attachment"), "{disposition}");
    let json = app
        .get_with(&format!("/api/v1/intel/export?format=json&{query}"), key)
        .await;
    assert_eq!(json.status, 200, "{query}: {}", json.text);
    assert!(json.content_type().starts_with("application/json"));
    let csv_rows = csv_rows(&csv.text);
    assert_eq!(
        csv_rows,
        json_rows(&json.json()),
        "{query}: CSV and JSON agree"
    );
    (csv_rows, disposition)
}

fn column(rows: &[BTreeMap<String, String>], name: &str) -> Vec<String> {
    rows.iter().map(|r| r[name].clone()).collect()
}

async fn export_csv_and_json_rows(app: TestApp) {
    let key = app.analyst().await;
    app.clock.set(t("2025-03-01T00:00:00Z"));
    app.record_now(putty("0.81", Arch::Amd64, 1)).await;
    app.clock.set(t("2025-03-02T00:00:00Z"));
    app.record_now(go("1.23.4", 4)).await;
    app.clock.set(t("2025-03-02T23:59:59Z"));
    app.record_now(pypi("requests", "2.32.3", 3)).await;
    app.clock.set(t("2025-03-03T00:00:00Z"));
    app.record_now(putty("0.82", Arch::Amd64, 2)).await;
    app.clock.set(t("2025-03-10T08:00:00Z"));

    let (rows, disposition) = export(&app, &key, "from=2025-03-02&to=2025-03-02").await;
    assert!(disposition.contains("2025-03-02"), "{disposition}");
    assert_eq!(
        column(&rows, "executable_name"),
        ["go1.23.4.windows-amd64.msi", "requests (pypi)"],
        "both ends of the day are inside it"
    );
    let go_row = &rows[0];
    let expected: BTreeMap<String, String> = [
        ("executable_name", "go1.23.4.windows-amd64.msi".to_string()),
        ("version", "1.23.4".into()),
        ("vendor", "Go".into()),
        ("platform", "windows".into()),
        ("arch", "amd64".into()),
        ("hash_sha256", hex_of(4, 64)),
        ("hash_sha1", hex_of(4, 40)),
        ("hash_md5", hex_of(4, 32)),
        ("valid_from", "2025-03-02T00:00:00Z".into()),
        ("valid_until", String::new()),
        ("status", "current".into()),
        (
            "source_url",
            "https://downloads.example/Go/go1.23.4.windows-amd64.msi".into(),
        ),
        ("download_verified", "true".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(go_row, &expected);
    assert_eq!(rows[1]["hash_sha1"], "");
    assert_eq!(rows[1]["download_verified"], "false");

    let (rows, _) = export(&app, &key, "from=2025-03-01&to=2025-03-03").await;
    assert_eq!(
        column(&rows, "version"),
        ["0.81", "1.23.4", "2.32.3", "0.82"],
        "oldest first"
    );
    assert_eq!(rows[0]["status"], "superseded");
    assert_eq!(rows[0]["valid_until"], "2025-03-03T00:00:00Z");
    assert_eq!(rows[3]["status"], "current");

    let (rows, _) = export(&app, &key, "from=2025-03-03&to=2025-03-03").await;
    assert_eq!(column(&rows, "version"), ["0.82"]);
    let (rows, _) = export(&app, &key, "from=2025-03-04&to=2025-03-09").await;
    assert!(rows.is_empty());
    // Default: the last 30 days up to today.
    let (rows, _) = export(&app, &key, "").await;
    assert_eq!(rows.len(), 4);
    let (rows, _) = export(&app, &key, "to=2025-03-02").await;
    assert_eq!(rows.len(), 3);
    // Filters.
    let (rows, _) = export(&app, &key, "executable=PUTTY.EXE").await;
    assert_eq!(column(&rows, "version"), ["0.81", "0.82"]);
    let (rows, _) = export(&app, &key, "platform=universal").await;
    assert_eq!(column(&rows, "executable_name"), ["requests (pypi)"]);
    let (rows, _) = export(&app, &key, "platform=windows&arch=amd64").await;
    assert_eq!(rows.len(), 3);
    let (rows, _) = export(&app, &key, "arch=arm64").await;
    assert!(rows.is_empty());
    // JSON is the default format.
    let r = app.get_with("/api/v1/intel/export", &key).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json().as_array().unwrap().len(), 4);
}

async fn export_rejects_bad_ranges(app: TestApp) {
    let key = app.analyst().await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    let cases: &[(&str, &str)] = &[
        ("from=2024-01-01&to=2025-01-01", "366"),
        ("from=2023-01-01&to=2025-03-10", "366"),
        ("from=2024-01-01", "366"),
        ("from=2025-03-05&to=2025-03-04", "from"),
        ("format=xml", "format"),
        ("format=", "format"),
        ("from=2025-13-01", "from"),
        ("from=03/01/2025", "from"),
        ("to=tomorrow", "to"),
        ("platform=beos", "platform"),
        ("arch=mips", "arch"),
    ];
    for (query, fragment) in cases {
        let r = app
            .get_with(&format!("/api/v1/intel/export?{query}"), &key)
            .await;
        r.assert_error(400, "bad request");
        assert!(
            r.message().contains(fragment),
            "{query}: {:?} should mention {fragment:?}",
            r.message()
        );
    }
    // Exactly 366 days (a leap year) is allowed, as is a single day.
    for query in [
        "from=2024-01-01&to=2024-12-31",
        "from=2025-03-10&to=2025-03-10",
    ] {
        let r = app
            .get_with(&format!("/api/v1/intel/export?format=csv&{query}"), &key)
            .await;
        assert_eq!(r.status, 200, "{query}: {}", r.text);
    }
}

/// More than 100,000 rows is refused with advice to narrow; exactly 100,000 is allowed.
/// The rows are bulk-copied in SQL (they fail HMAC verification, so the export skips
/// them, but they count toward the bound).
async fn export_row_bound(app: TestApp) {
    let key = app.analyst().await;
    app.clock.set(t("2025-03-01T12:00:00Z"));
    let id = app.record_now(putty("0.81", Arch::Amd64, 1)).await;
    app.clock.set(t("2025-03-10T08:00:00Z"));
    // Copy number i's id: i as 16 bytes, big-endian.
    let numbered_id = match app.backend {
        testkit::Backend::Sqlite => "unhex(printf('%032x', n.i))",
        testkit::Backend::Postgres => "decode(lpad(to_hex(n.i), 32, '0'), 'hex')",
    };
    let copies = app
        .exec(
            &format!(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) \
                 INSERT INTO hash_records (id, vendor, executable_name, family, version, \
                 platform, arch, hash_sha256, hash_sha1, hash_md5, source_url, \
                 download_verified, status, valid_from, valid_until, hmac) \
                 SELECT {numbered_id}, r.vendor, 'bulk.exe', 'bulk.exe', r.version, \
                 r.platform, r.arch, r.hash_sha256, r.hash_sha1, r.hash_md5, r.source_url, \
                 r.download_verified, 'superseded', r.valid_from, r.valid_from, r.hmac \
                 FROM hash_records r, n WHERE r.id = {}",
                app.backend.unhex("$1")
            ),
            &[&id],
        )
        .await;
    assert_eq!(copies, 100_000);

    let r = app
        .get_with("/api/v1/intel/export?from=2025-03-01&to=2025-03-01", &key)
        .await;
    r.assert_error(400, "bad request");
    let message = r.message();
    assert!(
        message.contains("more than 100000") && message.contains("narrow"),
        "{message}"
    );
    // Narrowed by executable, it answers.
    let r = app
        .get_with(
            "/api/v1/intel/export?from=2025-03-01&to=2025-03-01&executable=putty.exe",
            &key,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json().as_array().unwrap().len(), 1);

    // Exactly at the bound: allowed. Only the status is read: streaming 100,000 rows that
    // each fail HMAC verification takes seconds in a debug build, and the streaming
    // itself is covered above.
    assert_eq!(
        app.exec(
            &format!(
                "DELETE FROM hash_records WHERE id = {}",
                app.backend.unhex("$1")
            ),
            &[&format!("{:032x}", 1)]
        )
        .await,
        1
    );
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let resp = client
        .get(format!(
            "{}/api/v1/intel/export?format=csv&from=2025-03-01&to=2025-03-01",
            app.base
        ))
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    drop(resp);
}

// ---------------------------------------------------------------------------------------
// Stats
// ---------------------------------------------------------------------------------------

async fn stats_count_current_records(app: TestApp) {
    let key = app.analyst().await;
    let totals = |body: Value| body["totals"].clone();
    let r = app.get_with("/api/v1/intel/stats", &key).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    assert_eq!(body["generated_at"], "2025-03-10T08:00:00Z");
    assert_eq!(
        totals(body),
        json!({"known_good_hashes": 0, "total_vendors": 0, "total_platforms": 0})
    );

    app.record(putty("0.81", Arch::Amd64, 1)).await;
    app.record(putty("0.82", Arch::Amd64, 2)).await; // supersedes 0.81
    app.record(go("1.23.4", 4)).await;
    app.record(pypi("requests", "2.32.3", 3)).await;
    // The same file published under a second vendor: one distinct SHA-256.
    app.record(rec(
        "Mirror",
        "putty.exe",
        "0.82",
        Platform::Windows,
        Arch::Amd64,
        2,
    ))
    .await;
    app.record(rec(
        "Go",
        "go1.23.4.linux-amd64.tar.gz",
        "1.23.4",
        Platform::Linux,
        Arch::Amd64,
        5,
    ))
    .await;

    let body = app.get_with("/api/v1/intel/stats", &key).await.json();
    // windows and linux: `universal` (the PyPI package) is not a platform.
    assert_eq!(
        totals(body),
        json!({"known_good_hashes": 4, "total_vendors": 4, "total_platforms": 2})
    );
}

// ---------------------------------------------------------------------------------------
// Authentication and authorization
// ---------------------------------------------------------------------------------------

/// Authenticated routes that take a header credential. (The path-key routes are checked
/// the same way, the key in their path, in `hashlookup.rs`.)
fn authenticated_routes() -> impl Iterator<Item = &'static RouteSpec> {
    ROUTES
        .iter()
        .filter(|r| matches!(r.access, Access::Authenticated { .. }) && !r.rule.key_in_path)
}

/// A request to the route that is valid apart from the credential: if authorization lets
/// it through, the answer is never 401 or 403.
fn sample_request(route: &RouteSpec) -> (Method, String, Option<String>) {
    let mut path: String = route
        .path
        .split('/')
        .map(|seg| {
            if seg.starts_with('{') {
                "0123456789abcdef0123456789abcdef01234567"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/");
    match route.path.as_str() {
        "/api/v1/intel/history" => path.push_str("?executable=putty.exe"),
        "/api/v1/intel/export" => path.push_str("?format=csv"),
        _ => {}
    }
    let method = Method::from_bytes(route.method.as_str().as_bytes()).expect("method");
    let body = match method {
        Method::GET | Method::HEAD | Method::DELETE => None,
        _ if route.path.contains("/lookup") => Some(lookup_body(&[hex_of(2, 64)])),
        // Refused as a bad body: the platform owners of these tests sit on customer
        // accounts, where no platform administrator can be created.
        _ if route.path == "/api/v1/admin/platform-admins" => Some(r#"{"label": 5}"#.to_string()),
        _ => Some("{}".to_string()),
    };
    (method, path, body)
}

/// Routes that take a bearer token rather than an API key.
fn wants_bearer(route: &RouteSpec) -> bool {
    route.path == "/api/v1/auth/refresh"
}

/// Sends the sample request of the route with the key (exchanged for a token where the
/// route wants one).
async fn send_sample(app: &TestApp, route: &RouteSpec, key: Option<&str>) -> testkit::Resp {
    let (method, path, body) = sample_request(route);
    if let Some(key) = key
        && wants_bearer(route)
    {
        let token = app.token(key).await;
        return app
            .call_bearer(method, &path, &token, body.map(Into::into))
            .await;
    }
    app.call(method, &path, key, body.map(Into::into)).await
}

/// Whether an answer comes from the route's handler rather than the router's fallbacks.
fn served(r: &testkit::Resp) -> bool {
    r.status != 405 && !(r.status == 404 && r.message() == "no such route")
}

async fn auth_rejects_bad_credentials(app: TestApp) {
    let key = app.analyst().await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    let secret = key.split_once('.').unwrap().1.to_string();

    // A well-formed key hashed under another server secret.
    let foreign = auth::KeyHasher::new(b"some other deployment")
        .issue("foreign")
        .unwrap();
    app.store
        .create_tenant_with_key(
            "foreign",
            model::TenantKind::Customer,
            Tier::Enterprise,
            store::NewApiKey {
                key_id: foreign.key_id.clone(),
                team_id: "foreign".into(),
                key_hash: foreign.key_hash.clone(),
                role: Role::PlatformOwner,
                label: "foreign".into(),
            },
            app.clock.now(),
        )
        .await
        .unwrap();
    let revoked = app
        .account("revoked-team", Role::Analyst, Tier::Basic)
        .await;
    app.exec(
        "UPDATE api_keys SET revoked_at = created_at WHERE team_id = $1",
        &["revoked-team"],
    )
    .await;
    let suspended = app
        .account("suspended-team", Role::Analyst, Tier::Enterprise)
        .await;
    app.exec(
        "UPDATE tenants SET suspended = TRUE WHERE team_id = $1",
        &["suspended-team"],
    )
    .await;

    let bad_keys: Vec<(String, &str)> = vec![
        (String::new(), "empty"),
        ("nope".into(), "no dot"),
        ("analyst-basic".into(), "team only"),
        ("analyst-basic.".into(), "empty secret"),
        (format!("{key}x"), "secret altered"),
        (key[..key.len() - 1].to_string(), "secret truncated"),
        (key.to_uppercase(), "uppercased"),
        (format!("Analyst-Basic.{secret}"), "team case changed"),
        (format!("someone-else.{secret}"), "another team's name"),
        (
            format!("analyst-basic.{}", "A".repeat(43)),
            "unknown secret",
        ),
        (format!("analyst-basic.{}", "é".repeat(30)), "non-ASCII"),
        (foreign.key.clone(), "key of another server secret"),
        (revoked, "revoked key"),
        (suspended, "suspended account"),
    ];
    for route in authenticated_routes() {
        // No credential at all.
        let r = send_sample(&app, route, None).await;
        r.assert_error(401, "unauthorized");
        assert!(r.message().contains("X-API-Key"), "{}", r.text);
        for (bad, why) in &bad_keys {
            let (method, path, body) = sample_request(route);
            let value = reqwest::header::HeaderValue::from_bytes(bad.as_bytes());
            let Ok(value) = value else { continue };
            let client = reqwest::Client::builder().no_proxy().build().unwrap();
            let mut req = client
                .request(method, format!("{}{path}", app.base))
                .header("X-API-Key", value);
            if let Some(body) = body {
                req = req.body(body);
            }
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let text = resp.text().await.unwrap();
            assert_eq!(status, 401, "{} {why}: {text}", route.path);
            let body: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(body["error"], "unauthorized", "{why}");
            assert!(!text.contains(&secret), "the answer never echoes a key");
        }
    }

    // A bearer token is not an API key; nor is a key in the query string.
    let r = app
        .call(Method::GET, "/api/v1/intel/stats", None, None)
        .await;
    r.assert_error(401, "unauthorized");
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let resp = client
        .get(format!("{}/api/v1/intel/stats", app.base))
        .header("Authorization", format!("Bearer {key}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let r = app
        .get(&format!("/api/v1/intel/stats?api_key={}", q(&key)))
        .await;
    r.assert_error(401, "unauthorized");
    // Bytes that are not UTF-8 in the header.
    let resp = client
        .get(format!("{}/api/v1/intel/stats", app.base))
        .header(
            "X-API-Key",
            reqwest::header::HeaderValue::from_bytes(b"analyst-basic.\xff\xfe").unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);

    // The genuine key still works.
    assert_eq!(app.get_with("/api/v1/intel/stats", &key).await.status, 200);

    // A token exchanged for it works as a Bearer credential until it expires; a mangled
    // one never does.
    let token = app.token(&key).await;
    let stats = |token: String| {
        let app = &app;
        async move {
            app.call_bearer(Method::GET, "/api/v1/intel/stats", &token, None)
                .await
        }
    };
    assert_eq!(stats(token.clone()).await.status, 200);
    for bad in [
        format!("{token}x"),
        token[..token.len() - 2].to_string(),
        "not-a-jwt".to_string(),
        String::new(),
    ] {
        stats(bad).await.assert_error(401, "unauthorized");
    }
    let resp = client
        .get(format!("{}/api/v1/intel/stats", app.base))
        .header("Authorization", "Basic YWxhZGRpbjpvcGVuc2VzYW1l")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    app.clock.advance(Duration::minutes(16));
    stats(token).await.assert_error(401, "unauthorized");
}

async fn auth_roles_and_tiers(app: TestApp) {
    let analyst = app.analyst().await;
    let admin = app
        .account("admin-basic", Role::AccountAdmin, Tier::Basic)
        .await;
    let paid = app
        .account("auditor-teams", Role::Auditor, Tier::Teams)
        .await;
    let mut free = Vec::new();
    for (team, role) in [
        ("free-analyst", Role::Analyst),
        ("free-admin", Role::AccountAdmin),
        ("free-owner", Role::PlatformOwner),
    ] {
        free.push(app.account(team, role, Tier::Free).await);
    }
    app.record(putty("0.82", Arch::Amd64, 2)).await;

    // The basic-tier intel routes: every customer role holds their permissions.
    // (The corpus filters of the bundle need a published root and a corpus: bundle.rs.)
    let intel: Vec<&RouteSpec> = authenticated_routes()
        .filter(|r| {
            r.path.starts_with("/api/v1/intel/")
                && r.path != "/api/v1/intel/bundle/{file}"
                && matches!(
                    r.access,
                    Access::Authenticated {
                        min_tier: Tier::Basic,
                        ..
                    }
                )
        })
        .collect();
    assert!(intel.len() >= 5);
    for route in &intel {
        for key in [&analyst, &admin, &paid] {
            let r = send_sample(&app, route, Some(key)).await;
            assert_eq!(r.status, 200, "{} {}: {}", route.method, route.path, r.text);
        }
        for key in &free {
            let r = send_sample(&app, route, Some(key)).await;
            r.assert_error(403, "forbidden");
            assert!(r.message().contains("tier"), "{}", r.text);
        }
    }
    // Public routes are open to everyone, keys or not, free tier included.
    let r = app.get_with("/public/hash-of-day", &free[0]).await;
    assert_eq!(r.status, 200);
}

/// Every authenticated route x every role x every tier answers exactly as the access table
/// and the role table predict; every public route answers without a key.
async fn authorization_matrix(app: TestApp) {
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    let mut keys = Vec::new();
    for role in Role::ALL {
        for tier in Tier::ALL {
            let team = format!("m-{}-{}", role.as_str().replace('_', "-"), tier.as_str());
            keys.push((role, tier, app.account(&team, role, tier).await));
        }
    }
    let mut checked = 0;
    for route in authenticated_routes() {
        let Access::Authenticated {
            permission,
            min_tier,
        } = route.access
        else {
            unreachable!()
        };
        for (role, tier, key) in &keys {
            let allowed = permission.is_none_or(|p| role.has(p)) && *tier >= min_tier;
            let r = send_sample(&app, route, Some(key)).await;
            let what = format!("{} {} as {role} on {tier}", route.method, route.path);
            assert_ne!(r.status, 401, "{what}: {}", r.text);
            if allowed {
                assert_ne!(r.status, 403, "{what} must pass: {}", r.text);
                // Placeholder path parameters may name nothing: 404 from the handler.
                assert!(
                    (200..300).contains(&r.status)
                        || r.status == 400
                        || (r.status == 404 && served(&r)),
                    "{what}: {}",
                    r.text
                );
            } else {
                r.assert_error(403, "forbidden");
            }
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        authenticated_routes().count() * Role::ALL.len() * Tier::ALL.len()
    );
    for route in ROUTES.iter().filter(|r| r.access == Access::Public) {
        let r = send_sample(&app, route, None).await;
        assert!(
            served(&r) && r.status != 401 && r.status != 403,
            "{} {} without a key: {} {}",
            route.method,
            route.path,
            r.status,
            r.text
        );
    }
}

async fn every_route_is_served(app: TestApp) {
    let owner = app
        .account("owner-ent", Role::PlatformOwner, Tier::Enterprise)
        .await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    for route in ROUTES.iter() {
        let r = send_sample(&app, route, Some(&owner)).await;
        assert!(
            served(&r),
            "{} {} is in the access table but not served: {} {}",
            route.method,
            route.path,
            r.status,
            r.text
        );
        // Placeholder path parameters, minimal queries and empty bodies may be refused as
        // bad requests or unknown targets, but never for want of a credential.
        assert!(
            r.status != 401 && r.status != 403,
            "{} {} as the platform owner: {} {}",
            route.method,
            route.path,
            r.status,
            r.text
        );
    }
    // HEAD answers wherever GET does, with the same status.
    for route in ROUTES.iter().filter(|r| r.method == Method::GET) {
        let (_, path, _) = sample_request(route);
        let get = app.call(Method::GET, &path, Some(&owner), None).await;
        let head = app.call(Method::HEAD, &path, Some(&owner), None).await;
        assert_eq!(head.status, get.status, "HEAD {path}");
        assert!(head.text.is_empty(), "HEAD {path} has no body");
    }
}

/// Values no parameter of any route can use: NUL, a line break, a terminal escape,
/// invalid UTF-8 and an over-long value (percent-encoded as a client would send them).
const HOSTILE: [&str; 6] = [
    "%00",
    "a%0Ab",
    "%1B%5B2J",
    "%FF%FE",
    "x%E2%80%AEy%7F",
    "LONG",
];

fn hostile(value: &str) -> String {
    if value == "LONG" {
        "a".repeat(2_000)
    } else {
        value.to_string()
    }
}

/// Rows that any accepted write would add to.
async fn stored_counts(app: &TestApp) -> Vec<Vec<String>> {
    let mut counts = Vec::new();
    for table in [
        "api_keys",
        "tenants",
        "audit_log",
        "hash_records",
        "key_grants",
    ] {
        counts.extend(
            app.text_rows(&format!("SELECT CAST(COUNT(*) AS TEXT) FROM {table}"), &[])
                .await,
        );
    }
    counts
}

#[track_caller]
fn assert_bad_request(r: &testkit::Resp, what: &str) {
    assert_eq!(r.status, 400, "{what}: {}", r.text);
    assert_eq!(r.error(), "bad request", "{what}");
    assert!(
        !r.message().is_empty(),
        "{what}: the message says what was wrong"
    );
}

/// Every route, as the platform owner (so no refusal hides a fault), with hostile query
/// values, path parameters, dates and bodies: a JSON 400 each time, nothing stored, never
/// a 500 (the harness fails any 500).
async fn hostile_input_on_every_route(app: TestApp) {
    let owner = app
        .account("owner-ent", Role::PlatformOwner, Tier::Enterprise)
        .await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    let before = stored_counts(&app).await;
    for route in ROUTES.iter() {
        let (method, path, body) = sample_request(route);
        let joiner = if path.contains('?') { '&' } else { '?' };
        for value in HOSTILE {
            let what = format!("{} {} with {value}", route.method, route.path);
            for name in ["executable", "team_id", "q"] {
                let url = format!("{path}{joiner}{name}={}", hostile(value));
                let r = app
                    .call(
                        method.clone(),
                        &url,
                        Some(&owner),
                        body.clone().map(Into::into),
                    )
                    .await;
                assert_bad_request(&r, &format!("{what} in {name}"));
            }
            if route.path.contains('{') {
                let url = route
                    .path
                    .split('/')
                    .map(|seg| {
                        if seg.starts_with('{') {
                            hostile(value)
                        } else {
                            seg.to_string()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("/");
                let r = app
                    .call(
                        method.clone(),
                        &url,
                        Some(&owner),
                        body.clone().map(Into::into),
                    )
                    .await;
                assert_bad_request(&r, &format!("{what} as a path parameter"));
            }
        }
        // Routes that read a body, as the API document says.
        let takes_body = server::openapi::document()["paths"][route.path.as_str()]
            [route.method.as_str().to_ascii_lowercase()]
        .get("requestBody")
        .is_some();
        if takes_body {
            for nul in [
                r#"{"hashes": ["\u0000"]}"#,
                r#"{"role": "analyst", "label": "a\u0000b"}"#,
            ] {
                let r = app
                    .call(
                        method.clone(),
                        &path,
                        Some(&owner),
                        Some(nul.to_string().into()),
                    )
                    .await;
                assert_bad_request(
                    &r,
                    &format!("{} {} with a NUL in the body", route.method, route.path),
                );
            }
        }
    }
    for path in [
        "/api/v1/intel/export?from=-5000-01-01",
        "/api/v1/intel/export?to=-262143-01-01",
        "/api/v1/intel/export?from=0001-01-01&to=0001-01-02",
        "/api/v1/intel/export?to=%2B10000-01-01",
        "/api/v1/intel/downloads?from=-5000-01-01",
        "/api/v1/intel/downloads?until=0000-01-01T00:00:00Z",
        "/public/transparency/-5000-01-01",
        "/public/transparency/-262143-01-01/proof?sha256=00",
    ] {
        let r = app.get_with(path, &owner).await;
        assert_bad_request(&r, path);
    }
    assert_eq!(
        stored_counts(&app).await,
        before,
        "a refused request stores nothing"
    );
}

/// A filter longer than any file name is refused; many distinct filters keep the feed
/// cache within its byte bound.
async fn long_name_filters_are_refused_and_the_feed_cache_stays_bounded(app: TestApp) {
    let key = app.analyst().await;
    let long = "n".repeat(256);
    let r = app
        .get(&format!("/public/hash-of-day?executable={long}"))
        .await;
    assert_bad_request(&r, "hash-of-day executable over 255 bytes");
    for path in [
        format!("/api/v1/intel/history?executable={long}"),
        format!("/api/v1/intel/export?executable={long}"),
    ] {
        assert_bad_request(&app.get_with(&path, &key).await, &path);
    }
    for i in 0..5_000 {
        let name = format!("{i:0>250}");
        let r = app
            .get(&format!("/public/hash-of-day?executable={name}"))
            .await;
        assert_eq!(r.status, 200);
    }
    assert!(
        app.state.feed_cache.bytes() <= 64 << 20,
        "{} bytes cached",
        app.state.feed_cache.bytes()
    );
}

/// A vendor error that carries a configured URL with credentials, a token in its query and
/// resolver output: the public page shows only the kind of failure, staff see the message
/// with the URL's secrets redacted, and nobody else reaches the staff view.
async fn public_status_never_shows_error_details(app: TestApp) {
    let error = "discovery: 1 error(s); first: request for \
        https://kg:S3cret@mirror.internal/dl/?access_token=tok123 failed: \
        dns error: failed to lookup address information";
    app.store
        .record_vendor_run("Go", Some(error), app.clock.now())
        .await
        .unwrap();
    let public = app.get("/public/status").await;
    assert_eq!(
        public.json()["vendors"][0]["last_error"],
        "vendor channel unreadable"
    );
    for secret in ["S3cret", "tok123", "mirror.internal", "dns error"] {
        assert!(!public.text.contains(secret), "{secret} on the public page");
    }
    let staff = app
        .account("staff-ops", Role::PlatformAdmin, Tier::Enterprise)
        .await;
    let health = app.get_with("/api/v1/admin/health", &staff).await;
    assert_eq!(health.status, 200, "{}", health.text);
    let full = health.json()["vendors"][0]["last_error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        full.contains("https://redacted@mirror.internal/dl/?redacted"),
        "{full}"
    );
    assert!(full.contains("dns error"), "{full}");
    assert!(
        !full.contains("S3cret") && !full.contains("tok123"),
        "{full}"
    );
    assert!(health.json()["security"]["failed_authentications"].is_u64());
    // The rolling HMAC re-verification's counters, as /metrics has them.
    assert_eq!(health.json()["lookup_index"]["reverified"], 0);
    app.record(pypi("requests", "2.31.0", 1)).await;
    let index = app.state.classifier.index();
    index.rebuild(&app.store).await.unwrap();
    assert_eq!(index.reverify(&app.store, 100).await.unwrap(), 1);
    let health = app.get_with("/api/v1/admin/health", &staff).await.json();
    assert_eq!(health["lookup_index"]["reverified"], 1);
    assert_eq!(health["lookup_index"]["reverify_failures"], 0);
    assert!(health["lookup_index"]["merges"].is_u64());
    // A database this version created: nothing to rewrite.
    assert_eq!(
        health["record_compaction"],
        serde_json::json!({"done": true, "walked": 1.0, "rewritten": 0})
    );
    let customer = app
        .account("cust-admin", Role::AccountAdmin, Tier::Enterprise)
        .await;
    app.get_with("/api/v1/admin/health", &customer)
        .await
        .assert_error(403, "forbidden");
}

async fn unknown_routes_are_json_404(app: TestApp) {
    let key = app.analyst().await;
    for path in [
        "/",
        "/nope",
        "/api",
        "/api/v1",
        "/api/v1/intel",
        "/api/v1/intel/nope",
        "/api/v2/intel/stats",
        "/api/v1/intel/stats/extra",
        "/public/hash-of-day/2025-03-10",
        "/PUBLIC/HASH-OF-DAY",
        "/%00",
        "/public/%F0%9F%98%80",
    ] {
        for k in [None, Some(key.as_str())] {
            let r = app.call(Method::GET, path, k, None).await;
            r.assert_error(404, "not found");
            assert!(r.content_type().starts_with("application/json"));
        }
    }
    // A known path with a method it does not take.
    for (method, path) in [
        (Method::POST, "/healthz"),
        (Method::DELETE, "/public/hash-of-day"),
        (Method::GET, "/api/v1/intel/lookup"),
        (Method::PUT, "/api/v1/intel/stats"),
    ] {
        let r = app.call(method.clone(), path, Some(&key), None).await;
        assert_eq!(r.status, 405, "{method} {path}: {}", r.text);
        assert_eq!(r.error(), "method not allowed");
    }
}

// ---------------------------------------------------------------------------------------
// Health and status
// ---------------------------------------------------------------------------------------

async fn health_and_status(app: TestApp) {
    for path in ["/healthz", "/readyz"] {
        let r = app.get(path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.json()["status"], "ok");
    }
    let r = app.get("/public/status").await;
    assert_eq!(r.status, 200);
    let body = r.json();
    assert_eq!(body["status"], "ok");
    assert_eq!(body["generated_at"], "2025-03-10T08:00:00Z");
    let components = &body["components"];
    assert_eq!(components["database"]["status"], "ok");
    assert_eq!(
        components["database"]["backend"],
        match app.backend {
            testkit::Backend::Sqlite => "sqlite",
            testkit::Backend::Postgres => "postgres",
        }
    );
    assert_eq!(
        components["reference_corpus"],
        json!({"generation": null, "entries": 0, "sources": [], "rds_versions": [], "imported_at": null})
    );
    assert!(components["scheduler"]["status"].is_string(), "{body}");
    assert_eq!(body["vendors"], json!([]));
    assert_eq!(body["integrity_failures"], 0);
}

async fn status_counts_vendor_health(app: TestApp) {
    app.record(putty("0.81", Arch::Amd64, 1)).await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    app.record(putty("0.82", Arch::X86, 3)).await;
    // Records without any run noted yet: health unknown.
    let body = app.get("/public/status").await.json();
    assert_eq!(
        body["vendors"],
        json!([{
            "vendor": "PuTTY", "status": "unknown", "last_success_at": null,
            "last_error_at": null, "last_error": null, "records": 2,
        }])
    );

    let ok_at = app.clock.now();
    app.store
        .record_vendor_run("PuTTY", None, ok_at)
        .await
        .unwrap();
    app.clock.advance(Duration::minutes(10));
    let err_at = app.clock.now();
    app.store
        .record_vendor_run("Go", Some("HTTP 503 from go.dev"), err_at)
        .await
        .unwrap();
    let body = app.get("/public/status").await.json();
    assert_eq!(body["status"], "degraded", "a vendor is failing: {body}");
    assert_eq!(
        body["vendors"],
        json!([
            {"vendor": "Go", "status": "failing", "last_success_at": null,
             "last_error_at": common_ts(err_at), "last_error": "refresh failed", "records": 0},
            {"vendor": "PuTTY", "status": "ok", "last_success_at": common_ts(ok_at),
             "last_error_at": null, "last_error": null, "records": 2},
        ])
    );

    // Go recovers; its last error stays on record.
    app.clock.advance(Duration::minutes(10));
    let recovered_at = app.clock.now();
    app.store
        .record_vendor_run("Go", None, recovered_at)
        .await
        .unwrap();
    app.record(go("1.23.4", 4)).await;
    let body = app.get("/public/status").await.json();
    assert_eq!(body["status"], "ok", "{body}");
    let go_health = &body["vendors"][0];
    assert_eq!(go_health["status"], "ok");
    assert_eq!(go_health["last_success_at"], common_ts(recovered_at));
    assert_eq!(go_health["last_error_at"], common_ts(err_at));
    assert_eq!(go_health["records"], 1);
}

// ---------------------------------------------------------------------------------------
// OpenAPI and docs
// ---------------------------------------------------------------------------------------

async fn request_ids_are_echoed_or_minted(app: TestApp) {
    let client = reqwest::Client::new();
    let id_of = |r: &reqwest::Response| {
        r.headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let url = format!("{}/api/v1/intel/stats", app.base);
    let minted = client.get(&url).send().await.unwrap();
    let again = client.get(&url).send().await.unwrap();
    assert_eq!(minted.status(), 401);
    assert_eq!(
        minted.headers()["www-authenticate"],
        "Bearer realm=\"knowngood\"",
        "a 401 names how to authenticate"
    );
    assert_eq!(
        id_of(&minted).len(),
        16,
        "a new id on every answer, errors included"
    );
    assert_ne!(id_of(&minted), id_of(&again));
    let echoed = client
        .get(&url)
        .header("X-Request-Id", "trace-7.a_b")
        .send()
        .await
        .unwrap();
    assert_eq!(id_of(&echoed), "trace-7.a_b");
    for hostile in ["a b", "<script>", "id\"=1", &"z".repeat(65)] {
        let r = client
            .get(&url)
            .header("X-Request-Id", hostile)
            .send()
            .await
            .unwrap();
        assert_eq!(id_of(&r).len(), 16, "{hostile:?} replaced by a new id");
    }
}

const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");

async fn openapi_document(app: TestApp) {
    let r = app.get("/api/v1/openapi.json").await;
    assert_eq!(r.status, 200);
    assert!(r.content_type().starts_with("application/json"));
    let doc = r.json();
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "{}",
        doc["openapi"]
    );
    for route in ROUTES.iter() {
        let method = route.method.as_str().to_ascii_lowercase();
        let op = &doc["paths"][route.path.as_str()][&method];
        assert!(
            op.is_object(),
            "{} {} is not documented",
            route.method,
            route.path
        );
        assert!(
            op["responses"].is_object(),
            "{} {}",
            route.method,
            route.path
        );
        match route.access {
            Access::Public => {
                assert!(op.get("x-min-tier").is_none(), "{}", route.path);
            }
            Access::Authenticated {
                permission,
                min_tier,
            } => {
                assert_eq!(op["x-min-tier"], min_tier.as_str(), "{}", route.path);
                assert_eq!(
                    op["x-permission"],
                    permission.map_or(Value::Null, |p| p.as_str().into()),
                    "{}",
                    route.path
                );
                if route.rule.key_in_path {
                    assert!(op["x-credential"].is_string(), "{}", route.path);
                } else {
                    assert!(
                        op["security"].as_array().is_some_and(|s| !s.is_empty()),
                        "{} names its credential",
                        route.path
                    );
                }
                assert!(
                    op["responses"]["401"].is_object(),
                    "{} documents 401",
                    route.path
                );
                if permission.is_some() || min_tier > Tier::Free {
                    assert!(
                        op["responses"]["403"].is_object(),
                        "{} documents 403",
                        route.path
                    );
                }
                assert!(
                    op["responses"]["429"].is_object(),
                    "{} documents 429",
                    route.path
                );
                if route.rule.impersonation == ImpersonationPolicy::Refused {
                    assert!(
                        op["responses"]["403"].is_object(),
                        "{} documents the 403 of impersonation sessions",
                        route.path
                    );
                }
            }
        }
        if op["responses"]["429"].is_object() {
            assert_eq!(
                op["responses"]["429"]["headers"]["Retry-After"]["schema"]["type"], "integer",
                "{} {} declares Retry-After on its 429",
                route.method, route.path
            );
        }
    }
    // Nothing documented that is not served.
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            assert!(
                ROUTES
                    .iter()
                    .any(|r| r.path == *path && r.method.as_str().eq_ignore_ascii_case(method)),
                "{method} {path} is documented but not in the access table"
            );
        }
    }
    assert!(doc["components"]["securitySchemes"]["api_key"].is_object());

    // The committed snapshot.
    let pretty = format!("{}\n", serde_json::to_string_pretty(&doc).unwrap());
    if std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1") {
        let tmp = format!("{SNAPSHOT}.{}.tmp", std::process::id());
        std::fs::write(&tmp, &pretty).expect("write snapshot");
        std::fs::rename(&tmp, SNAPSHOT).expect("replace snapshot");
        return;
    }
    let committed = std::fs::read_to_string(SNAPSHOT)
        .unwrap_or_else(|e| panic!("{SNAPSHOT}: {e}; run with UPDATE_SNAPSHOTS=1 to create it"));
    let committed: Value = serde_json::from_str(&committed).expect("snapshot is JSON");
    assert!(
        committed == doc,
        "the served OpenAPI document differs from {SNAPSHOT}; if the change is intended, \
         rerun with UPDATE_SNAPSHOTS=1 and commit the snapshot"
    );
}

async fn docs_page(app: TestApp) {
    let r = app.get("/api/v1/docs").await;
    assert_eq!(r.status, 200);
    assert!(
        r.content_type().starts_with("text/html"),
        "{}",
        r.content_type()
    );
    assert!(r.text.to_ascii_lowercase().starts_with("<!doctype html>"));
    assert!(r.text.contains("/api/v1/openapi.json"));
    for route in ROUTES.iter() {
        assert!(
            r.text.contains(&format!("<code>{}</code>", route.path)),
            "the docs page lists {}",
            route.path
        );
    }
    assert!(!r.text.contains("<script"), "no scripts");
    // A table of contents, then public, customer and staff routes in that order.
    let at = |needle: &str| {
        r.text
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} is on the page"))
    };
    assert!(at("<h2>Contents</h2>") < at("<h2>Public routes"));
    assert!(at("<h2>Public routes") < at("<h2>Customer routes"));
    assert!(at("<h2>Customer routes") < at("<h2>Staff routes"));
    assert!(at("<code>/public/hash-of-day</code></h3>") < at("<h2>Customer routes"));
    assert!(at("<h2>Staff routes") < at("id=\"post-apiv1adminimpersonate\""));
    assert!(
        r.text.contains("href=\"#get-publichash-of-day\""),
        "contents link to each route"
    );
    // Markdown is rendered: the API description's `code` spans become <code>.
    assert!(r.text.contains("<code>X-API-Key</code>"));
    assert!(!r.text.contains("`X-API-Key`"));
}
