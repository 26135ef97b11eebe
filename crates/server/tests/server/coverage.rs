//! The inventory-driven coverage queue over real HTTP on both backends: what an SBOM
//! queues, what it answers as known, that nothing of the SBOM but the queued versions is
//! stored, its limits, and who may call it.

use model::{Arch, Platform, Role, Tier};
use reqwest::Method;
use serde_json::{Value, json};
use store::coverage::CoverageState;
use testkit::{TestApp, hex_of, pypi, rec};

testkit::backend_tests!(
    an_sbom_queues_its_unknown_versions_and_names_the_known,
    only_the_queued_versions_are_stored,
    refusals_and_the_version_cap,
    coverage_requests_need_teams_and_the_permission,
    staff_list_the_queue_with_each_failure,
);

const REQUESTS: &str = "/api/v1/intel/coverage/requests";

async fn teams_key(app: &TestApp, team: &str) -> String {
    app.account(team, Role::Auditor, Tier::Teams).await
}

fn cyclonedx(components: Value) -> String {
    json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "version": 1,
        "metadata": {"component": {"type": "application", "name": "fleet"}},
        "components": components,
    })
    .to_string()
}

fn component(purl: &str) -> Value {
    json!({"type": "library", "name": purl, "purl": purl})
}

fn versions(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|i| format!("{} {} {}", i["ecosystem"], i["name"], i["version"]).replace('"', ""))
        .collect()
}

/// The queue as the store holds it: "ecosystem name version state".
async fn queue(app: &TestApp) -> Vec<String> {
    app.store
        .coverage_entries(None, 100, 0)
        .await
        .unwrap()
        .items
        .iter()
        .map(|e| {
            format!(
                "{} {} {} {}",
                e.item.ecosystem,
                e.item.name,
                e.item.version,
                e.state.as_str()
            )
        })
        .collect()
}

async fn an_sbom_queues_its_unknown_versions_and_names_the_known(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    // Known already: a PyPI release and a Debian package of one release.
    app.record(pypi("requests", "2.31.0", 1)).await;
    app.record(rec(
        "Debian bookworm",
        "libc6_2.36-9+deb12u10_amd64.deb",
        "2.36-9+deb12u10",
        Platform::Linux,
        Arch::Amd64,
        2,
    ))
    .await;
    let body = cyclonedx(json!([
        component("pkg:pypi/Cryptography@42.0.5"),
        component("pkg:pypi/requests@2.31.0"),
        component("pkg:npm/%40types/node@20.11.5"),
        component("pkg:npm/lodash@4.17.20"),
        component("pkg:deb/debian/libc6@2.36-9%2Bdeb12u10?arch=amd64&distro=debian-12"),
        component("pkg:deb/debian/curl@7.88.1-10%2Bdeb12u5?arch=amd64"),
        component("pkg:deb/ubuntu/bash@5.2.21-2ubuntu4?arch=amd64"),
        // The same version twice (another spelling of the name, another artefact): queued once.
        component("pkg:pypi/cryptography@42.0.5?file_name=cryptography-42.0.5.tar.gz"),
        component("pkg:maven/org.apache.commons/commons-text@1.10.0"),
        component("pkg:golang/golang.org/x/text@v0.14.0"),
        {"type": "library", "name": "in-house-tool", "version": "3.1"},
    ]));
    let r = app.post_with(REQUESTS, &key, body.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(
        versions(&v["queued"]),
        vec![
            "debian curl 7.88.1-10+deb12u5",
            "npm @types/node 20.11.5",
            "npm lodash 4.17.20",
            "pypi cryptography 42.0.5",
            "ubuntu bash 5.2.21-2ubuntu4",
        ]
    );
    assert_eq!(
        versions(&v["known"]),
        vec!["debian libc6 2.36-9+deb12u10", "pypi requests 2.31.0"]
    );
    assert_eq!(v["already_queued"], json!([]));
    assert_eq!(
        v["not_followed"],
        json!({"maven": 1, "go": 1, "unknown": 1})
    );
    assert_eq!(
        v["summary"],
        json!({"components": 11, "queued": 5, "already_queued": 0, "known": 2,
               "refused": 0, "not_followed": 3})
    );
    assert_eq!(
        queue(&app).await,
        vec![
            "debian curl 7.88.1-10+deb12u5 queued",
            "npm @types/node 20.11.5 queued",
            "npm lodash 4.17.20 queued",
            "pypi cryptography 42.0.5 queued",
            "ubuntu bash 5.2.21-2ubuntu4 queued",
        ]
    );
    // What the refresh of each channel is given.
    let pypi = app.store.queued_coverage("pypi", 10).await.unwrap();
    assert_eq!(
        jobs::coverage::pinned_item(&pypi[0].item),
        "cryptography==42.0.5"
    );
    let npm = app.store.queued_coverage("npm", 10).await.unwrap();
    assert_eq!(
        npm.iter()
            .map(|e| jobs::coverage::pinned_item(&e.item))
            .collect::<Vec<_>>(),
        vec!["@types/node@20.11.5", "lodash@4.17.20"]
    );
    let debian = app.store.queued_coverage("debian", 10).await.unwrap();
    assert_eq!(
        jobs::coverage::pinned_item(&debian[0].item),
        "curl=7.88.1-10+deb12u5"
    );

    // The same inventory again, from another account: waiting already.
    let other = teams_key(&app, "globex").await;
    let r = app.post_with(REQUESTS, &other, body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["queued"], json!([]));
    assert_eq!(v["summary"]["already_queued"], 5);
    assert_eq!(v["summary"]["known"], 2);
    assert_eq!(queue(&app).await.len(), 5);
    let waiting = app.store.queued_coverage("pypi", 10).await.unwrap();
    assert_eq!(waiting[0].state, CoverageState::Queued);
}

async fn only_the_queued_versions_are_stored(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let markers = [
        "zz-private-app-5d1e",
        "zz-private-lib-9c2b",
        "zz-qualifier-41aa",
    ];
    let digest = hex_of(91, 64);
    let before = table_counts(&app).await;
    let body = json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "version": 1,
        "serialNumber": "urn:uuid:3e671687-395b-41f5-a30f-a58921a69b79",
        "metadata": {"component": {"type": "application", "name": markers[0]}},
        "components": [
            {"type": "library", "name": "numpy", "version": "1.26.4",
             "purl": format!("pkg:pypi/numpy@1.26.4?repository_url=https://{}.example/simple", markers[2]),
             "hashes": [{"alg": "SHA-256", "content": digest}]},
            {"type": "library", "name": markers[1], "version": "1.0.0",
             "purl": format!("pkg:maven/com.acme/{}@1.0.0", markers[1])},
        ],
    })
    .to_string();
    let r = app.post_with(REQUESTS, &key, body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(versions(&r.json()["queued"]), vec!["pypi numpy 1.26.4"]);
    // One row more, in the queue; nothing else changed.
    let after = table_counts(&app).await;
    for ((table, n), (_, m)) in before.iter().zip(&after) {
        let grown = m.parse::<u64>().unwrap() - n.parse::<u64>().unwrap();
        let expected = u64::from(table == "coverage_requests");
        assert_eq!(grown, expected, "{table}");
    }
    let needles: Vec<&str> = markers.iter().copied().chain([digest.as_str()]).collect();
    match app.backend {
        testkit::db::Backend::Sqlite => {
            let path = app.url.trim_start_matches("sqlite://");
            let path = path.split('?').next().unwrap();
            for file in [path.to_string(), format!("{path}-wal")] {
                if let Ok(bytes) = std::fs::read(&file) {
                    for needle in &needles {
                        assert!(
                            !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
                            "{file} holds {needle} from the SBOM"
                        );
                    }
                }
            }
        }
        testkit::db::Backend::Postgres => {
            for (table, _) in &after {
                for needle in &needles {
                    let hits = app
                        .text_rows(
                            &format!(
                                "SELECT CAST(COUNT(*) AS TEXT) FROM {table} t WHERE t::text LIKE $1"
                            ),
                            &[&format!("%{needle}%")],
                        )
                        .await;
                    assert_eq!(hits[0][0], "0", "{table} holds {needle} from the SBOM");
                }
            }
        }
    }
}

/// Row counts of every table but the usage counters.
async fn table_counts(app: &TestApp) -> Vec<(String, String)> {
    let tables = match app.backend {
        testkit::db::Backend::Sqlite => {
            app.text_rows(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
                &[],
            )
            .await
        }
        testkit::db::Backend::Postgres => {
            app.text_rows(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1",
                &[],
            )
            .await
        }
    };
    let mut out = Vec::new();
    for row in tables {
        let table = &row[0];
        if table.starts_with("usage") {
            continue;
        }
        let n = app
            .text_rows(&format!("SELECT CAST(COUNT(*) AS TEXT) FROM {table}"), &[])
            .await;
        out.push((table.clone(), n[0][0].clone()));
    }
    out
}

async fn refusals_and_the_version_cap(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    // Not a bill of materials.
    app.post_with(REQUESTS, &key, "name,version\nrequests,2.31.0\n")
        .await
        .assert_error(400, "bad request");
    // Components the queue cannot pin are answered, not queued.
    let r = app
        .post_with(
            REQUESTS,
            &key,
            cyclonedx(json!([
                component("pkg:pypi/requests"),
                component("pkg:pypi/requests@latest"),
                component("pkg:deb/curl@7.88.1-10"),
                component("pkg:deb/kali/curl@8.5.0-2"),
                component("pkg:npm/left-pad@1.3.0"),
            ])),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(versions(&v["queued"]), vec!["npm left-pad 1.3.0"]);
    let reasons: Vec<&str> = v["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert!(reasons[0].contains("no version"), "{reasons:?}");
    assert!(reasons[1].contains("not a version"), "{reasons:?}");
    assert!(reasons[2].contains("names its distribution"), "{reasons:?}");
    assert!(reasons[3].contains("kali"), "{reasons:?}");
    assert_eq!(queue(&app).await, vec!["npm left-pad 1.3.0 queued"]);

    // 10,001 distinct versions: refused whole, nothing queued.
    let many: Vec<Value> = (0..=jobs::coverage::MAX_ITEMS)
        .map(|i| component(&format!("pkg:npm/pkg-{i}@1.0.{i}")))
        .collect();
    let r = app.post_with(REQUESTS, &key, cyclonedx(json!(many))).await;
    r.assert_error(413, "payload too large");
    assert!(r.text.contains("10000"), "{}", r.text);
    assert_eq!(queue(&app).await.len(), 1);
    // Exactly the cap is taken.
    let cap: Vec<Value> = (0..jobs::coverage::MAX_ITEMS)
        .map(|i| component(&format!("pkg:npm/pkg-{i}@1.0.{i}")))
        .collect();
    let r = app.post_with(REQUESTS, &key, cyclonedx(json!(cap))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["summary"]["queued"], jobs::coverage::MAX_ITEMS);
}

async fn coverage_requests_need_teams_and_the_permission(app: TestApp) {
    let basic = app.account("small", Role::Auditor, Tier::Basic).await;
    let viewer = app.account("viewers", Role::Analyst, Tier::Teams).await;
    let body = cyclonedx(json!([component("pkg:pypi/requests@2.31.0")]));
    for key in [&basic, &viewer] {
        app.post_with(REQUESTS, key, body.clone())
            .await
            .assert_error(403, "forbidden");
    }
    let r = app
        .call(Method::POST, REQUESTS, None, Some(body.into()))
        .await;
    assert_eq!(r.status, 401);
    assert!(queue(&app).await.is_empty());
}

async fn staff_list_the_queue_with_each_failure(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let body = cyclonedx(json!([
        component("pkg:pypi/cffi@1.16.0"),
        component("pkg:pypi/cryptography@42.0.5"),
        component("pkg:npm/lodash@4.17.20"),
    ]));
    let queued = app.post_with(REQUESTS, &key, body).await;
    assert_eq!(queued.status, 200, "{}", queued.text);
    // A refresh records cffi and fails cryptography, naming a mirror URL with a token.
    let taken = app.store.queued_coverage("pypi", 10).await.unwrap();
    let now = chrono::Utc::now();
    app.store
        .finish_coverage(&taken[0], None, now)
        .await
        .unwrap();
    app.store
        .finish_coverage(
            &taken[1],
            Some("discovery: https://mirror.internal/simple/cryptography/?token=tok123: 404"),
            now,
        )
        .await
        .unwrap();

    let staff = app
        .account("staff-ops", Role::PlatformAdmin, Tier::Enterprise)
        .await;
    let all = app
        .get_with("/api/v1/admin/coverage/requests", &staff)
        .await;
    assert_eq!(all.status, 200, "{}", all.text);
    let all = all.json();
    assert_eq!(all["total"], 3);
    let shown: Vec<String> = all["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{} {} {}", r["name"], r["version"], r["state"]).replace('"', ""))
        .collect();
    assert_eq!(
        shown,
        [
            "lodash 4.17.20 queued",
            "cffi 1.16.0 done",
            "cryptography 42.0.5 failed"
        ]
    );

    let failed = app
        .get_with("/api/v1/admin/coverage/requests?state=failed", &staff)
        .await
        .json();
    assert_eq!(failed["total"], 1);
    let error = failed["requests"][0]["error"].as_str().unwrap();
    assert!(
        error.contains("404") && error.contains("mirror.internal"),
        "{error}"
    );
    assert!(!error.contains("tok123"), "{error}");
    assert!(failed["requests"][0]["finished_at"].is_string());

    let page = app
        .get_with("/api/v1/admin/coverage/requests?limit=1&offset=1", &staff)
        .await
        .json();
    assert_eq!(
        (
            page["total"].as_u64(),
            page["requests"].as_array().unwrap().len()
        ),
        (Some(3), 1)
    );
    assert_eq!(page["requests"][0]["name"], "cffi");

    app.get_with("/api/v1/admin/coverage/requests?state=lost", &staff)
        .await
        .assert_error(400, "bad request");
    // The queue says what some account runs: not for customers, not even the one that asked.
    app.get_with("/api/v1/admin/coverage/requests", &key)
        .await
        .assert_error(403, "forbidden");
}
