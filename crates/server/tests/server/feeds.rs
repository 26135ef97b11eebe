//! The pull feeds and the TAXII server: documents, caching with conditional requests,
//! content negotiation, and paging that stays exact while records are added.

use std::collections::BTreeSet;

use chrono::Duration;
use model::{Arch, Clock as _};
use reqwest::header::HeaderMap;
use serde_json::Value;
use server::Settings;
use testkit::{TestApp, putty, pypi};

testkit::backend_tests!(
    feeds_present_current_records_with_stable_ids with public_base,
    feeds_are_cached_and_answer_conditional_requests,
    taxii_discovery_negotiation_and_errors with public_base,
    taxii_paging_is_exact_while_records_are_added,
    taxii_filters_manifest_and_versions,
    taxii_pages_many_records_each_object_once_in_order,
    taxii_objects_by_id_follow_the_records,
    taxii_object_by_id_answers_503_until_a_large_backlog_is_noted,
    feeds_hold_the_newest_records_and_link_to_older_ones,
);

const TAXII: &str = "application/taxii+json;version=2.1";

fn public_base(settings: &mut Settings) {
    settings.public_base_url = "https://kg.example/intel".into();
}

struct Answer {
    status: u16,
    headers: HeaderMap,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("{e}: {}", self.text))
    }

    fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    }
}

async fn get(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> Answer {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut request = client.get(format!("{}{path}", app.base));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        text: response.text().await.unwrap(),
    }
}

async fn taxii(app: &TestApp, path: &str) -> Answer {
    let r = get(app, path, &[("Accept", TAXII)]).await;
    assert_eq!(r.header("content-type"), TAXII, "{path}: {}", r.text);
    r
}

fn collection_path(id: &str) -> String {
    format!("/taxii2/knowngood/collections/{id}")
}

async fn collection_id(app: &TestApp) -> String {
    let r = taxii(app, "/taxii2/knowngood/collections/").await;
    r.json()["collections"][0]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn feeds_present_current_records_with_stable_ids(app: TestApp) {
    let _old = app.record(putty("0.81", Arch::Amd64, 1)).await;
    let current = app.record(putty("0.82", Arch::Amd64, 2)).await;
    let package = app.record(pypi("requests", "2.32.3", 3)).await;

    let json = get(&app, "/public/feed.json", &[]).await;
    assert_eq!(json.status, 200, "{}", json.text);
    assert_eq!(json.header("content-type"), "application/feed+json");
    let feed = json.json();
    assert_eq!(feed["version"], "https://jsonfeed.org/version/1.1");
    assert_eq!(
        feed["feed_url"],
        "https://kg.example/intel/public/feed.json"
    );
    let ids: BTreeSet<&str> = feed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, BTreeSet::from([current.as_str(), package.as_str()]));
    let item = &feed["items"].as_array().unwrap()[0];
    assert_eq!(item["_knowngood"]["id"], item["id"]);
    assert_eq!(item["date_published"], item["_knowngood"]["valid_from"]);

    let rss = get(&app, "/public/feed.rss", &[]).await;
    assert_eq!(rss.status, 200);
    assert_eq!(rss.header("content-type"), "application/rss+xml");
    assert!(rss.text.contains(&format!(
        "<guid isPermaLink=\"false\">knowngood-record-{current}</guid>"
    )));
    assert!(rss.text.contains("rel=\"self\""));

    let stix = get(&app, "/public/feed/stix", &[]).await;
    assert_eq!(stix.status, 200);
    assert_eq!(
        stix.header("content-type"),
        "application/stix+json;version=2.1"
    );
    let bundle = stix.json();
    assert_eq!(bundle["type"], "bundle");
    let objects = bundle["objects"].as_array().unwrap();
    let indicators: Vec<&Value> = objects
        .iter()
        .filter(|o| o["type"] == "indicator")
        .collect();
    assert_eq!(indicators.len(), 2, "one per current record");
    for kind in [
        "identity",
        "marking-definition",
        "file",
        "software",
        "relationship",
    ] {
        assert!(objects.iter().any(|o| o["type"] == kind), "{kind}");
    }
    let putty_indicator = indicators
        .iter()
        .find(|o| o["name"].as_str().unwrap().starts_with("putty.exe 0.82"))
        .unwrap();
    let pattern = putty_indicator["pattern"].as_str().unwrap();
    assert!(pattern.contains("file:hashes.'SHA-256'"), "{pattern}");
    assert!(pattern.contains("file:hashes.MD5"), "{pattern}");

    // A newer version replaces the record; the other record keeps its ids.
    app.record(putty("0.83", Arch::Amd64, 4)).await;
    let later = get(&app, "/public/feed/stix", &[]).await.json();
    let later_ids: BTreeSet<&str> = later["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    let package_indicator = indicators
        .iter()
        .find(|o| o["name"].as_str().unwrap().starts_with("requests"))
        .unwrap();
    assert!(later_ids.contains(package_indicator["id"].as_str().unwrap()));
    assert!(!later_ids.contains(putty_indicator["id"].as_str().unwrap()));
}

async fn feeds_are_cached_and_answer_conditional_requests(app: TestApp) {
    app.record(putty("0.81", Arch::Amd64, 1)).await;
    for path in ["/public/feed.json", "/public/feed.rss", "/public/feed/stix"] {
        let first = get(&app, path, &[]).await;
        assert_eq!(first.status, 200);
        let etag = first.header("etag");
        let modified = first.header("last-modified");
        assert!(etag.starts_with('"'), "{path}: {etag}");
        assert!(modified.ends_with(" GMT"), "{path}: {modified}");

        let same = get(&app, path, &[("If-None-Match", &etag)]).await;
        assert_eq!(same.status, 304, "{path}");
        assert_eq!(same.text, "");
        assert_eq!(same.header("etag"), etag);
        let weak = format!("\"other\", W/{etag}");
        assert_eq!(
            get(&app, path, &[("If-None-Match", &weak)]).await.status,
            304
        );
        assert_eq!(
            get(&app, path, &[("If-None-Match", "\"other\"")])
                .await
                .status,
            200
        );
        assert_eq!(
            get(&app, path, &[("If-Modified-Since", &modified)])
                .await
                .status,
            304
        );
        assert_eq!(
            get(
                &app,
                path,
                &[("If-Modified-Since", "Mon, 01 Jan 2001 00:00:00 GMT")]
            )
            .await
            .status,
            200
        );
    }

    // The cache expires within the hour; the same bytes keep their tag and date.
    let before = get(&app, "/public/feed/stix", &[]).await;
    app.clock.advance(Duration::minutes(61));
    let rebuilt = get(&app, "/public/feed/stix", &[]).await;
    assert_eq!(rebuilt.header("etag"), before.header("etag"));
    assert_eq!(
        rebuilt.header("last-modified"),
        before.header("last-modified")
    );
    assert_eq!(
        get(
            &app,
            "/public/feed/stix",
            &[("If-Modified-Since", &before.header("last-modified"))]
        )
        .await
        .status,
        304
    );

    // A new record drops the cache at once: new tag, the new record is in.
    app.record(pypi("requests", "2.32.3", 3)).await;
    let changed = get(
        &app,
        "/public/feed/stix",
        &[("If-None-Match", &before.header("etag"))],
    )
    .await;
    assert_eq!(changed.status, 200);
    assert_ne!(changed.header("etag"), before.header("etag"));
    assert!(changed.text.contains("requests (pypi)"));
}

async fn taxii_discovery_negotiation_and_errors(app: TestApp) {
    app.record(putty("0.81", Arch::Amd64, 1)).await;
    let discovery = taxii(&app, "/taxii2/").await;
    assert_eq!(discovery.status, 200);
    assert_eq!(
        discovery.json()["api_roots"],
        serde_json::json!(["https://kg.example/intel/taxii2/knowngood/"])
    );
    let root = taxii(&app, "/taxii2/knowngood/").await.json();
    assert_eq!(root["versions"], serde_json::json!([TAXII]));
    let id = collection_id(&app).await;
    let collection = taxii(&app, &format!("{}/", collection_path(&id)))
        .await
        .json();
    assert_eq!(collection["can_read"], true);
    assert_eq!(collection["can_write"], false);

    // Content negotiation: TAXII 2.1 or anything, nothing else.
    for accept in ["application/json", "application/taxii+json;version=2.0"] {
        let r = get(&app, "/taxii2/", &[("Accept", accept)]).await;
        assert_eq!(r.status, 406, "{accept}");
        assert_eq!(r.header("content-type"), TAXII);
        assert_eq!(r.json()["http_status"], "406");
    }
    assert_eq!(
        get(&app, "/taxii2/", &[("Accept", "*/*")]).await.status,
        200
    );

    // TAXII error bodies.
    let missing = taxii(&app, &format!("{}/", collection_path("no-such-collection"))).await;
    assert_eq!(missing.status, 404);
    let body = missing.json();
    assert!(body["title"].is_string() && body["description"].is_string());
    assert_eq!(body["http_status"], "404");
    let missing_object = taxii(
        &app,
        &format!(
            "{}/objects/indicator--00000000-0000-5000-8000-000000000000/",
            collection_path(&id)
        ),
    )
    .await;
    assert_eq!(missing_object.status, 404);
    let status = taxii(&app, "/taxii2/knowngood/status/some-status/").await;
    assert_eq!(status.status, 404);
    let bad_limit = taxii(&app, &format!("{}/objects/?limit=0", collection_path(&id))).await;
    assert_eq!(bad_limit.status, 400);
    let bad_next = taxii(
        &app,
        &format!("{}/objects/?next=nonsense", collection_path(&id)),
    )
    .await;
    assert_eq!(bad_next.status, 400);

    // Read-only: a write is refused with a TAXII error, and nothing changes.
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let post = client
        .post(format!("{}{}/objects/", app.base, collection_path(&id)))
        .header("Accept", TAXII)
        .header("Content-Type", TAXII)
        .body(r#"{"objects":[]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 405);
    assert_eq!(post.headers()["content-type"], TAXII);
    assert_eq!(post.headers()["allow"], "GET, HEAD");
    let body: Value = post.json().await.unwrap();
    assert_eq!(body["http_status"], "405");
    let delete = client
        .delete(format!(
            "{}{}/objects/{}/",
            app.base,
            collection_path(&id),
            "indicator--x"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), 405);
    assert_eq!(delete.headers()["content-type"], TAXII);
    // An unknown API root is a TAXII 404 too.
    let root = taxii(&app, "/taxii2/other/").await;
    assert_eq!(root.status, 404);
    assert_eq!(root.json()["http_status"], "404");
}

/// Every object of a collection listing, following `next`.
async fn walk(app: &TestApp, id: &str, query: &str) -> Vec<Value> {
    walk_by(app, id, 4, query).await
}

/// Every object of a collection listing, `limit` at a time, following `next`.
async fn walk_by(app: &TestApp, id: &str, limit: usize, query: &str) -> Vec<Value> {
    let mut objects = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let mut path = format!("{}/objects/?limit={limit}{query}", collection_path(id));
        if let Some(next) = &next {
            path.push_str(&format!("&next={next}"));
        }
        let page = taxii(app, &path).await;
        assert_eq!(page.status, 200, "{}", page.text);
        let body = page.json();
        objects.extend(body["objects"].as_array().cloned().unwrap_or_default());
        if body["more"] != true {
            return objects;
        }
        next = Some(body["next"].as_str().unwrap().to_string());
    }
}

async fn taxii_paging_is_exact_while_records_are_added(app: TestApp) {
    // One batch: records entered together still have distinct dates added.
    app.store
        .record_many(
            (1..=3)
                .map(|i| pypi(&format!("pkg{i}"), "1.0", i))
                .collect(),
            app.clock.now(),
        )
        .await
        .unwrap();
    let id = collection_id(&app).await;

    // A first page, then records are added, then the rest by cursor.
    let first = taxii(&app, &format!("{}/objects/?limit=4", collection_path(&id))).await;
    let first_body = first.json();
    assert_eq!(first_body["more"], true);
    let mut seen: Vec<String> = first_body["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(seen.len(), 4);
    app.record(pypi("pkg4", "1.0", 4)).await;
    let mut next = first_body["next"].as_str().unwrap().to_string();
    let mut last_added;
    loop {
        let page = taxii(
            &app,
            &format!("{}/objects/?limit=4&next={next}", collection_path(&id)),
        )
        .await;
        let body = page.json();
        last_added = page.header("x-taxii-date-added-last");
        assert!(!page.header("x-taxii-date-added-first").is_empty());
        seen.extend(
            body["objects"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["id"].as_str().unwrap().to_string()),
        );
        if body["more"] != true {
            break;
        }
        next = body["next"].as_str().unwrap().to_string();
    }
    let distinct: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(distinct.len(), seen.len(), "no object twice");
    let all = walk(&app, &id, "").await;
    assert_eq!(
        all.len(),
        seen.len(),
        "every object once, the new record's too"
    );

    // Polling as OpenCTI does: resume strictly after the last date added.
    let nothing_new = taxii(
        &app,
        &format!("{}/objects/?added_after={last_added}", collection_path(&id)),
    )
    .await;
    assert_eq!(nothing_new.json()["more"], false);
    assert!(nothing_new.json()["objects"].is_null());
    assert_eq!(nothing_new.header("x-taxii-date-added-last"), last_added);
    app.record(pypi("pkg5", "1.0", 5)).await;
    let fresh = walk(&app, &id, &format!("&added_after={last_added}")).await;
    let indicators: Vec<&Value> = fresh.iter().filter(|o| o["type"] == "indicator").collect();
    assert_eq!(indicators.len(), 1);
    assert!(indicators[0]["name"].as_str().unwrap().starts_with("pkg5"));
}

async fn taxii_filters_manifest_and_versions(app: TestApp) {
    app.record(putty("0.81", Arch::Amd64, 1)).await;
    app.record(pypi("requests", "2.32.3", 2)).await;
    let id = collection_id(&app).await;
    let base = collection_path(&id);
    let all = walk(&app, &id, "").await;

    let indicators = walk(&app, &id, "&match[type]=indicator").await;
    assert_eq!(indicators.len(), 2);
    let two = walk(&app, &id, "&match[type]=file,software").await;
    assert_eq!(two.len(), 4);
    let one_id = indicators[0]["id"].as_str().unwrap();
    let by_id = walk(&app, &id, &format!("&match[id]={one_id}")).await;
    assert_eq!(by_id.len(), 1);
    assert_eq!(walk(&app, &id, "&match[spec_version]=2.0").await.len(), 0);
    assert_eq!(
        walk(&app, &id, "&match[spec_version]=2.1").await.len(),
        all.len()
    );
    assert_eq!(
        walk(&app, &id, "&match[version]=all").await.len(),
        all.len()
    );
    let modified = indicators[0]["modified"].as_str().unwrap();
    let exact = walk(
        &app,
        &id,
        &format!("&match[version]={modified}&match[type]=indicator"),
    )
    .await;
    assert!(exact.iter().any(|o| o["id"] == one_id));

    let manifest = taxii(&app, &format!("{base}/manifest/")).await;
    let entries = manifest.json()["objects"].as_array().unwrap().clone();
    assert_eq!(entries.len(), all.len());
    assert!(
        entries
            .iter()
            .all(|e| e["media_type"] == "application/stix+json;version=2.1")
    );
    assert_eq!(
        manifest.header("x-taxii-date-added-first"),
        entries[0]["date_added"].as_str().unwrap()
    );

    let object = taxii(&app, &format!("{base}/objects/{one_id}/")).await;
    assert_eq!(object.json()["objects"][0]["id"], one_id);
    let versions = taxii(&app, &format!("{base}/objects/{one_id}/versions/")).await;
    assert_eq!(versions.json()["versions"].as_array().unwrap().len(), 1);
    assert!(!versions.header("x-taxii-date-added-last").is_empty());
}

/// Every object the listing holds, fetched by its id, as the listing gives it.
async fn assert_each_found_by_id(app: &TestApp, id: &str, objects: &[Value]) {
    for object in objects {
        let object_id = object["id"].as_str().unwrap();
        let one = taxii(
            app,
            &format!("{}/objects/{object_id}/", collection_path(id)),
        )
        .await;
        assert_eq!(one.status, 200, "{object_id}: {}", one.text);
        assert_eq!(one.json()["objects"][0], *object, "{object_id}");
    }
}

async fn taxii_objects_by_id_follow_the_records(app: TestApp) {
    app.record(putty("0.81", Arch::Amd64, 1)).await;
    app.record(putty("0.81", Arch::Arm64, 2)).await;
    app.record(pypi("requests", "2.32.3", 3)).await;
    let id = collection_id(&app).await;
    let before = walk(&app, &id, "").await;
    // The producer, the marking, five objects per record but one software for PuTTY.
    assert_eq!(before.len(), 2 + 5 + 4 + 5);
    assert_each_found_by_id(&app, &id, &before).await;

    // A newer build supersedes the amd64 one: its indicator and relationship leave the
    // collection and are no longer found by id; the new record's objects are.
    app.record(putty("0.82", Arch::Amd64, 4)).await;
    let after = walk(&app, &id, "").await;
    let listed = |objects: &[Value]| -> BTreeSet<String> {
        objects
            .iter()
            .map(|o| o["id"].as_str().unwrap().to_string())
            .collect()
    };
    let gone: Vec<String> = listed(&before)
        .difference(&listed(&after))
        .cloned()
        .collect();
    assert!(
        gone.iter().any(|g| g.starts_with("indicator--")),
        "{gone:?}"
    );
    for object_id in &gone {
        let one = taxii(
            &app,
            &format!("{}/objects/{object_id}/", collection_path(&id)),
        )
        .await;
        assert_eq!(one.status, 404, "{object_id}: {}", one.text);
        assert_eq!(one.json()["http_status"], "404");
    }
    assert_each_found_by_id(&app, &id, &after).await;

    // An id of the right form that names nothing, and ids of no form at all.
    for nothing in [
        "file--0f0f0f0f-0000-5000-8000-000000000000",
        "indicator--",
        "not-an-id",
    ] {
        let one = taxii(
            &app,
            &format!("{}/objects/{nothing}/", collection_path(&id)),
        )
        .await;
        assert_eq!(one.status, 404, "{nothing}");
        let versions = taxii(
            &app,
            &format!("{}/objects/{nothing}/versions/", collection_path(&id)),
        )
        .await;
        assert_eq!(versions.status, 404, "{nothing}");
    }
}

/// The first start after an upgrade: every stored record's objects are still to be noted,
/// more than a lookup notes itself, so it answers 503 while the rest is noted in the
/// background, then finds the object.
async fn taxii_object_by_id_answers_503_until_a_large_backlog_is_noted(app: TestApp) {
    let records: Vec<_> = (0..20_050)
        .map(|i| pypi(&format!("pkg{i}"), "1.0", i))
        .collect();
    for batch in records.chunks(5_000) {
        app.store
            .record_many(batch.to_vec(), app.clock.now())
            .await
            .unwrap();
    }
    let newest = app
        .store
        .current_records_added_before(None, 1)
        .await
        .unwrap();
    let wanted = feeds::stix::RecordObjectIds::of(&newest[0]).indicator;
    let id = collection_id(&app).await;
    let path = format!("{}/objects/{wanted}/", collection_path(&id));
    let first = taxii(&app, &path).await;
    assert_eq!(first.status, 503, "{}", first.text);
    assert_eq!(first.json()["http_status"], "503");
    assert_eq!(first.header("retry-after"), "5");
    let started = std::time::Instant::now();
    let found = loop {
        let answer = taxii(&app, &path).await;
        if answer.status != 503 {
            break answer;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "still 503 after two minutes"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(found.status, 200, "{}", found.text);
    assert_eq!(found.json()["objects"][0]["id"], wanted.as_str());
}

/// Every manifest entry of the collection, `limit` at a time, following `next`; `between`
/// runs after the first page.
async fn manifest_walk<F: std::future::Future<Output = ()>>(
    app: &TestApp,
    id: &str,
    limit: usize,
    between: impl FnOnce() -> F,
) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut next: Option<String> = None;
    let mut between = Some(between);
    loop {
        let mut path = format!("{}/manifest/?limit={limit}", collection_path(id));
        if let Some(next) = &next {
            path.push_str(&format!("&next={next}"));
        }
        let page = taxii(app, &path).await;
        assert_eq!(page.status, 200, "{}", page.text);
        let body = page.json();
        let listed = body["objects"].as_array().cloned().unwrap_or_default();
        assert!(listed.len() <= limit);
        entries.extend(listed);
        if let Some(between) = between.take() {
            between().await;
        }
        if body["more"] != true {
            return entries;
        }
        next = Some(body["next"].as_str().unwrap().to_string());
    }
}

async fn taxii_pages_many_records_each_object_once_in_order(app: TestApp) {
    // More records than the server reads from the store at a time, and a release built
    // for several arches whose records are far apart in date added.
    let now = app.clock.now();
    let batch = |from: u64, n: u64| {
        (from..from + n)
            .map(|i| pypi(&format!("pkg{i}"), "1.0", i))
            .collect::<Vec<_>>()
    };
    app.store.record_many(batch(0, 250), now).await.unwrap();
    app.record(putty("0.81", Arch::Amd64, 1001)).await;
    app.store.record_many(batch(250, 200), now).await.unwrap();
    app.record(putty("0.81", Arch::Arm64, 1002)).await;
    let id = collection_id(&app).await;

    let entries = manifest_walk(&app, &id, 97, || async {
        // Records arrive while the client pages.
        app.store.record_many(batch(450, 30), now).await.unwrap();
        app.record(putty("0.81", Arch::X86, 1003)).await;
    })
    .await;

    let ids: Vec<&str> = entries.iter().map(|e| e["id"].as_str().unwrap()).collect();
    let distinct: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), ids.len(), "no object twice");
    let added: Vec<&str> = entries
        .iter()
        .map(|e| e["date_added"].as_str().unwrap())
        .collect();
    assert!(
        added.windows(2).all(|w| w[0] < w[1]),
        "oldest added first, across pages"
    );
    // The producer and the marking; five objects per package; the first PuTTY record's
    // five, and four for each other arch (the release's software is listed once).
    assert_eq!(ids.len(), 2 + 5 * 480 + 5 + 4 + 4);
    let software = ids.iter().filter(|i| i.starts_with("software--")).count();
    assert_eq!(software, 480 + 1);

    // The objects themselves, by cursor, are the manifest's, in the same order.
    let objects = walk_by(&app, &id, 500, "").await;
    let object_ids: Vec<&str> = objects.iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(object_ids, ids);
    // A shared object is found by id too, with the record that named it first.
    let putty_software = objects
        .iter()
        .find(|o| o["type"] == "software" && o["vendor"] == "PuTTY")
        .unwrap();
    let one = taxii(
        &app,
        &format!(
            "{}/objects/{}/",
            collection_path(&id),
            putty_software["id"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(one.status, 200, "{}", one.text);
    assert_eq!(one.json()["objects"][0], *putty_software);
}

async fn feeds_hold_the_newest_records_and_link_to_older_ones(app: TestApp) {
    let records = (0..1003)
        .map(|i| pypi(&format!("pkg{i}"), "1.0", i))
        .collect::<Vec<_>>();
    app.store
        .record_many(records, app.clock.now())
        .await
        .unwrap();
    let newest = app.record(pypi("newest", "1.0", 5000)).await;
    // The path and query of a link this server gave.
    let local = |url: &str| url[url.find("/public/").unwrap()..].to_string();

    let json = get(&app, "/public/feed.json", &[]).await;
    let feed = json.json();
    let items = feed["items"].as_array().unwrap();
    assert_eq!(items.len(), 1000, "the newest thousand");
    assert_eq!(items[0]["id"], newest.as_str(), "newest first");
    let next_url = feed["next_url"].as_str().unwrap();
    assert!(next_url.contains("/public/feed.json?before="), "{next_url}");
    let older = get(&app, &local(next_url), &[]).await;
    assert_eq!(older.status, 200, "{}", older.text);
    let older_feed = older.json();
    let older_items = older_feed["items"].as_array().unwrap();
    assert_eq!(older_items.len(), 4);
    assert!(older_feed.get("next_url").is_none(), "the oldest window");
    let all: BTreeSet<&str> = items
        .iter()
        .chain(older_items)
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(all.len(), 1004, "every record in one window or the other");
    // An older window is a document like the first: tagged, and 304 when unchanged.
    let tag = older.header("etag");
    assert_eq!(
        get(&app, &local(next_url), &[("If-None-Match", &tag)])
            .await
            .status,
        304
    );

    let rss = get(&app, "/public/feed.rss", &[]).await;
    assert_eq!(rss.text.matches("<item>").count(), 1000);
    let rss_next = rss
        .text
        .split("<atom:link ")
        .find(|l| l.contains("rel=\"next\""))
        .and_then(|l| l.split("href=\"").nth(1))
        .and_then(|l| l.split('"').next())
        .unwrap()
        .replace("&amp;", "&");
    let older_rss = get(&app, &local(&rss_next), &[]).await;
    assert_eq!(older_rss.text.matches("<item>").count(), 4);
    assert!(!older_rss.text.contains("rel=\"next\""));

    let stix = get(&app, "/public/feed/stix", &[]).await;
    let indicators = |bundle: &Value| {
        bundle["objects"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["type"] == "indicator")
            .count()
    };
    assert_eq!(indicators(&stix.json()), 1000);
    let link = stix.header("link");
    let stix_next = link
        .strip_prefix('<')
        .and_then(|l| l.split_once(">; rel=\"next\""))
        .map(|(url, _)| url.to_string())
        .unwrap_or_else(|| panic!("{link}"));
    let older_stix = get(&app, &local(&stix_next), &[]).await;
    assert_eq!(indicators(&older_stix.json()), 4);
    assert!(older_stix.header("link").is_empty());

    let bad = get(&app, "/public/feed.json?before=nonsense", &[]).await;
    assert_eq!(bad.status, 400, "{}", bad.text);
}
