//! Package intelligence over real HTTP on both backends: typosquat and dependency-confusion
//! analysis, SBOM scans, watchlists and the change-alert feed.

use model::{Clock as _, Role, Tier};
use reqwest::Method;
use serde_json::{Value, json};
use testkit::{TestApp, hex_of, pypi};

testkit::backend_tests!(
    typosquat_names_risks_and_techniques,
    typosquat_counts_tracked_packages_as_known,
    typosquat_refusals_name_the_problem,
    sbom_scan_classifies_hashes_names_and_counts,
    sbom_formats_are_detected,
    sbom_components_carry_imported_advisories,
    sbom_refusals_and_size_limit,
    sbom_scan_writes_nothing,
    sbom_large_report_streams_whole_and_in_order,
    sbom_deep_nesting_is_refused_and_the_server_lives,
    sbom_component_limit_answers_413,
    sbom_scans_in_flight_are_capped_per_key,
    sbom_go_standard_library_gets_its_advisories,
    watchlist_lifecycle_and_account_scope,
    watch_refusals_name_the_problem,
    change_feed_filters_and_pages,
    package_routes_need_teams_and_the_permission,
);

const TYPOSQUAT: &str = "/api/v1/intel/typosquat";
const SBOM: &str = "/api/v1/intel/sbom";
const WATCH: &str = "/api/v1/intel/packages/watch";
const CHANGES: &str = "/api/v1/intel/packages/changes";

async fn teams_key(app: &TestApp, team: &str) -> String {
    app.account(team, Role::Auditor, Tier::Teams).await
}

fn by_name<'a>(results: &'a Value, name: &str) -> &'a Value {
    results
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no result for {name}: {results}"))
}

async fn typosquat_names_risks_and_techniques(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let body = json!({
        "packages": [
            {"ecosystem": "pypi", "name": "attrs"},
            {"ecosystem": "pypi", "name": "cattrs"},
            {"ecosystem": "pypi", "name": "Requests"},
            {"ecosystem": "pypi", "name": "reqeusts"},
            {"ecosystem": "pypi", "name": "python3-dateutil"},
            {"ecosystem": "npm", "name": "crossenv"},
            {"ecosystem": "npm", "name": "lodahs"},
            {"ecosystem": "go", "name": "github.com/boltdb-go/bolt"},
            {"ecosystem": "pypi", "name": "acme-billing-core"},
            {"ecosystem": "npm", "name": "acme-totally-private-thing"},
            {"ecosystem": "pypi", "name": "rеquests"}
        ],
        "internal_names": ["acme_billing_core", "Requests"]
    });
    let r = app.post_with(TYPOSQUAT, &key, body.to_string()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    let results = &v["results"];
    assert_eq!(results.as_array().unwrap().len(), 11);
    for name in ["attrs", "cattrs"] {
        assert_eq!(by_name(results, name)["risk"], "known", "{name}");
    }
    // Listed as internal and public: an install may pick the public one.
    let requests = by_name(results, "Requests");
    assert_eq!(requests["risk"], "dependency_confusion");
    assert_eq!(requests["normalized_name"], "requests");
    assert_eq!(requests["nearest_known"], "requests");
    // Internal and not public: nothing to confuse it with.
    assert_eq!(by_name(results, "acme-billing-core")["risk"], "clear");
    assert_eq!(
        by_name(results, "acme-totally-private-thing")["risk"],
        "clear"
    );
    for (name, target, technique) in [
        ("reqeusts", "requests", "swapped"),
        ("python3-dateutil", "python-dateutil", "affix"),
        ("crossenv", "cross-env", "separator"),
        ("lodahs", "lodash", "swapped"),
        (
            "github.com/boltdb-go/bolt",
            "github.com/boltdb/bolt",
            "owner",
        ),
        ("rеquests", "requests", "Unicode"),
    ] {
        let res = by_name(results, name);
        assert_eq!(res["risk"], "typosquat", "{name}: {res}");
        assert_eq!(res["nearest_known"], target, "{name}: {res}");
        assert!(res["distance"].as_u64().unwrap() >= 1, "{name}: {res}");
        assert!(
            res["reason"].as_str().unwrap().contains(technique),
            "{name}: {res}"
        );
    }
    assert_eq!(
        v["summary"],
        json!({"known": 2, "typosquat": 6, "dependency_confusion": 1, "clear": 2})
    );
}

async fn typosquat_counts_tracked_packages_as_known(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let body = json!({"packages": [{"ecosystem": "pypi", "name": "Zz_Obscure.Tool"}]}).to_string();
    let r = app.post_with(TYPOSQUAT, &key, body.clone()).await;
    assert_eq!(r.json()["results"][0]["risk"], "clear", "{}", r.text);
    app.record(pypi("zz-obscure-tool", "1.0.0", 7)).await;
    let r = app.post_with(TYPOSQUAT, &key, body).await;
    let res = &r.json()["results"][0];
    assert_eq!(res["risk"], "known", "{res}");
    assert!(res["reason"].as_str().unwrap().contains("tracked"), "{res}");
}

async fn typosquat_refusals_name_the_problem(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let too_many: Vec<Value> = (0..201)
        .map(|i| json!({"ecosystem": "npm", "name": format!("pkg-{i}")}))
        .collect();
    for (body, says) in [
        (json!({"packages": []}), "packages"),
        (json!({"packages": too_many}), "at most 200"),
        (
            json!({"packages": [{"ecosystem": "cargo", "name": "serde"}]}),
            "packages[0].ecosystem",
        ),
        (
            json!({"packages": [{"ecosystem": "npm", "name": "ok"}, {"ecosystem": "pypi", "name": "-bad-"}]}),
            "packages[1].name",
        ),
        (
            json!({"packages": [{"ecosystem": "go", "name": "no-host/x"}]}),
            "packages[0].name",
        ),
        (
            json!({"packages": [{"ecosystem": "npm", "name": "x"}], "extra": 1}),
            "extra",
        ),
        (json!({"packages": "lodash"}), "packages"),
    ] {
        let r = app.post_with(TYPOSQUAT, &key, body.to_string()).await;
        r.assert_error(400, "bad request");
        assert!(r.message().contains(says), "{body}: {}", r.text);
    }
    // Exactly 200 is fine.
    let two_hundred: Vec<Value> = (0..200)
        .map(|i| json!({"ecosystem": "npm", "name": format!("pkg-{i}")}))
        .collect();
    let r = app
        .post_with(
            TYPOSQUAT,
            &key,
            json!({ "packages": two_hundred }).to_string(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["results"].as_array().unwrap().len(), 200);
}

fn cyclonedx(components: Value) -> String {
    json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "version": 1,
        "metadata": {"component": {"type": "application", "name": "shop"}},
        "components": components,
    })
    .to_string()
}

async fn sbom_scan_classifies_hashes_names_and_counts(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let recorded = pypi("requests", "2.31.0", 11);
    let known_sha = recorded.hash_sha256.clone();
    app.record(recorded).await;
    let body = cyclonedx(json!([
        {"type": "library", "name": "requests", "version": "2.31.0",
         "purl": "pkg:pypi/requests@2.31.0",
         "hashes": [{"alg": "SHA-256", "content": known_sha.to_uppercase()}],
         "components": [
            {"type": "library", "name": "urllib3", "version": "2.0.7", "purl": "pkg:pypi/urllib3@2.0.7",
             "hashes": [{"alg": "SHA-256", "content": hex_of(99, 64)}]}
         ]},
        {"type": "library", "name": "requests", "version": "2.31.0", "purl": "pkg:pypi/Requests@2.31.0"},
        {"type": "library", "name": "reqeusts", "version": "1.0.0", "purl": "pkg:pypi/reqeusts@1.0.0"},
        {"type": "library", "name": "lodash", "version": "4.17.21", "purl": "pkg:npm/lodash@4.17.21"},
        {"type": "library", "name": "guava", "version": "33.0", "purl": "pkg:maven/com.google.guava/guava@33.0"}
    ]));
    let r = app.post_with(SBOM, &key, body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["format"], "CycloneDX");
    assert_eq!(v["spec_version"], "1.6");
    let components = &v["components"];
    assert_eq!(components.as_array().unwrap().len(), 5, "{components}");
    let requests = by_name(components, "requests");
    assert_eq!(requests["ecosystem"], "pypi");
    assert_eq!(requests["hash"]["classification"], "known_vendor_release");
    assert_eq!(requests["hash"]["executable_name"], "requests (pypi)");
    assert_eq!(requests["name_risk"]["risk"], "known");
    assert_eq!(requests["advisories"], json!([]));
    assert_eq!(
        by_name(components, "urllib3")["hash"]["classification"],
        "unknown"
    );
    let squat = by_name(components, "reqeusts");
    assert_eq!(squat["hash"]["classification"], "no_hash");
    assert_eq!(squat["name_risk"]["risk"], "typosquat");
    assert_eq!(squat["name_risk"]["nearest_known"], "requests");
    assert_eq!(
        by_name(components, "com.google.guava/guava")["name_risk"]["risk"],
        "clear"
    );
    assert_eq!(
        v["summary"],
        json!({"components": 5, "hash_known": 1, "hash_unknown": 1, "no_hash": 3,
               "typosquat": 1, "dependency_confusion": 0, "with_advisories": 0})
    );
}

async fn sbom_formats_are_detected(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let sha = hex_of(5, 64);
    let spdx_json = json!({
        "spdxVersion": "SPDX-2.3", "SPDXID": "SPDXRef-DOCUMENT", "name": "doc",
        "packages": [
            {"SPDXID": "SPDXRef-a", "name": "lodash", "versionInfo": "4.17.21",
             "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                               "referenceLocator": "pkg:npm/lodash@4.17.21"}],
             "checksums": [{"algorithm": "SHA256", "checksumValue": sha}]},
            {"SPDXID": "SPDXRef-b", "name": "@babel/core", "versionInfo": "7.24.0",
             "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                               "referenceLocator": "pkg:npm/%40babel/core@7.24.0"}]}
        ],
        "relationships": [{"spdxElementId": "SPDXRef-a", "relationshipType": "DEPENDS_ON", "relatedSpdxElement": "SPDXRef-b"}]
    })
    .to_string();
    let tag_value = format!(
        "SPDXVersion: SPDX-2.2\nDataLicense: CC0-1.0\nSPDXID: SPDXRef-DOCUMENT\n\n\
         PackageName: six\nSPDXID: SPDXRef-1\nPackageVersion: 1.16.0\n\
         PackageChecksum: SHA256: {sha}\nExternalRef: PACKAGE-MANAGER purl pkg:pypi/six@1.16.0\n"
    );
    let spdx3 = json!({
        "@context": "https://spdx.org/rdf/3.0.1/spdx-context.jsonld",
        "@graph": [
            {"type": "software_Package", "spdxId": "urn:a", "name": "github.com/gorilla/mux",
             "software_packageVersion": "v1.8.1", "software_packageUrl": "pkg:golang/github.com/gorilla/mux@v1.8.1"}
        ]
    })
    .to_string();
    let xml = "<?xml version=\"1.0\"?><bom xmlns=\"http://cyclonedx.org/schema/bom/1.5\" version=\"1\">\
               <components><component type=\"library\"><name>express</name><version>4.19.2</version>\
               <purl>pkg:npm/express@4.19.2</purl></component></components></bom>"
        .to_string();
    for (body, format, encoding, count) in [
        (spdx_json, "SPDX", "json", 2),
        (tag_value, "SPDX", "tag-value", 1),
        (spdx3, "SPDX", "json-ld", 1),
        (xml, "CycloneDX", "xml", 1),
    ] {
        let r = app.post_with(SBOM, &key, body).await;
        assert_eq!(r.status, 200, "{encoding}: {}", r.text);
        let v = r.json();
        assert_eq!(v["format"], format, "{encoding}");
        assert_eq!(v["encoding"], encoding);
        assert_eq!(v["summary"]["components"], count, "{encoding}: {v}");
        for c in v["components"].as_array().unwrap() {
            assert_eq!(c["name_risk"]["risk"], "known", "{encoding}: {c}");
        }
    }
}

async fn sbom_refusals_and_size_limit(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    for (body, says) in [
        ("", "empty"),
        ("name,version\nlodash,4\n", "neither CycloneDX"),
        ("{\"hello\": 1}", "neither CycloneDX"),
        (
            "{\"bomFormat\": \"CycloneDX\", \"specVersion\": \"9.9\"}",
            "specVersion",
        ),
        ("{\"bomFormat\": \"CycloneDX\", ", "invalid JSON"),
        ("<html><body/></html>", "CycloneDX"),
    ] {
        let r = app.post_with(SBOM, &key, body).await;
        r.assert_error(400, "bad request");
        assert!(r.message().contains(says), "{body:?}: {}", r.text);
    }
    // 16 MB is accepted; one byte more is 413.
    let limit = 16 << 20;
    let head = "{\"bomFormat\":\"CycloneDX\",\"specVersion\":\"1.5\",\"components\":[],\"pad\":\"";
    let exact = format!("{head}{}\"}}", "x".repeat(limit - head.len() - 2));
    assert_eq!(exact.len(), limit);
    let r = app.post_with(SBOM, &key, exact.clone()).await;
    assert_eq!(r.status, 200, "{}", &r.text[..r.text.len().min(300)]);
    let over = format!("{head}{}\"}}", "x".repeat(limit - head.len() - 1));
    let r = app.post_with(SBOM, &key, over).await;
    r.assert_error(413, "payload too large");
}

/// The scan keeps nothing: no row of any table changes (usage counting aside, which every
/// request does), and no value of the SBOM is anywhere in the database afterwards.
async fn sbom_scan_writes_nothing(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let marker = "zz-private-component-7f3a";
    let before = table_counts(&app).await;
    let body = cyclonedx(json!([
        {"type": "library", "name": marker, "version": "9.9.9", "purl": format!("pkg:npm/{marker}@9.9.9"),
         "hashes": [{"alg": "SHA-256", "content": hex_of(77, 64)}]}
    ]));
    let r = app.post_with(SBOM, &key, body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(table_counts(&app).await, before);
    match app.backend {
        testkit::db::Backend::Sqlite => {
            // Every file of the database (main file, write-ahead log) as bytes.
            let path = app.url.trim_start_matches("sqlite://");
            let path = path.split('?').next().unwrap();
            for file in [path.to_string(), format!("{path}-wal")] {
                if let Ok(bytes) = std::fs::read(&file) {
                    assert!(
                        !bytes.windows(marker.len()).any(|w| w == marker.as_bytes()),
                        "{file} holds the SBOM's component name"
                    );
                }
            }
        }
        testkit::db::Backend::Postgres => {
            for (table, _) in &before {
                let hits = app
                    .text_rows(
                        &format!(
                            "SELECT CAST(COUNT(*) AS TEXT) FROM {table} t WHERE t::text LIKE $1"
                        ),
                        &[&format!("%{marker}%")],
                    )
                    .await;
                assert_eq!(hits[0][0], "0", "{table} holds the SBOM's component name");
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

async fn watchlist_lifecycle_and_account_scope(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let other = teams_key(&app, "globex").await;
    app.record(pypi("requests", "2.31.0", 3)).await;

    let r = app
        .send(
            Method::POST,
            WATCH,
            &key,
            Some(json!({"ecosystem": "pypi", "package_name": "Requests"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let tracked = r.json();
    assert_eq!(tracked["ecosystem"], "pypi");
    assert_eq!(tracked["package_name"], "requests");
    assert_eq!(tracked["tracking"], "tracked");
    assert!(tracked["created_at"].as_str().unwrap().ends_with('Z'));

    // The same package again, spelled otherwise: the existing watch.
    let r = app
        .send(
            Method::POST,
            WATCH,
            &key,
            Some(json!({"ecosystem": "pypi", "package_name": "REQUESTS"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["id"], tracked["id"]);

    app.clock.advance(chrono::Duration::minutes(1));
    let r = app
        .send(
            Method::POST,
            WATCH,
            &key,
            Some(json!({"ecosystem": "go", "package_name": "github.com/!burnt!sushi/toml"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let pending = r.json();
    assert_eq!(pending["package_name"], "github.com/BurntSushi/toml");
    assert_eq!(pending["tracking"], "pending");

    let r = app.get_with(WATCH, &key).await;
    assert_eq!(r.status, 200);
    let list = r.json();
    assert_eq!(list["total"], 2);
    assert_eq!(list["results"][0]["id"], tracked["id"]);
    assert_eq!(list["results"][1]["tracking"], "pending");

    // Another account sees none of it and cannot remove it.
    let r = app.get_with(WATCH, &other).await;
    assert_eq!(r.json(), json!({"results": [], "total": 0}));
    let path = format!("{WATCH}/{}", tracked["id"].as_str().unwrap());
    let r = app.send(Method::DELETE, &path, &other, None).await;
    r.assert_error(404, "not found");

    let r = app.send(Method::DELETE, &path, &key, None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    let r = app.send(Method::DELETE, &path, &key, None).await;
    r.assert_error(404, "not found");
    assert_eq!(app.get_with(WATCH, &key).await.json()["total"], 1);
}

async fn watch_refusals_name_the_problem(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    for (body, says) in [
        (
            json!({"ecosystem": "cargo", "package_name": "serde"}),
            "ecosystem",
        ),
        (
            json!({"ecosystem": "npm", "package_name": "Bad Name"}),
            "package_name",
        ),
        (
            json!({"ecosystem": "pypi", "package_name": ""}),
            "package_name",
        ),
        (
            json!({"ecosystem": "go", "package_name": "nodot/x"}),
            "package_name",
        ),
        (json!({"ecosystem": "npm"}), "package_name"),
    ] {
        let r = app
            .send(Method::POST, WATCH, &key, Some(body.clone()))
            .await;
        r.assert_error(400, "bad request");
        assert!(r.message().contains(says), "{body}: {}", r.text);
    }
    assert_eq!(app.get_with(WATCH, &key).await.json()["total"], 0);
}

async fn change_feed_filters_and_pages(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let t0 = app.clock.now();
    for (i, (eco, name)) in [("npm", "left-pad"), ("pypi", "requests"), ("npm", "lodash")]
        .iter()
        .enumerate()
    {
        app.store
            .add_change_alert(&store::downloads::ChangeAlert {
                id: format!("alert-{i}"),
                ecosystem: eco.to_string(),
                package_name: name.to_string(),
                version: "1.0.0".into(),
                previous_sha256: hex_of(i as u64 + 1, 64),
                latest_sha256: hex_of(i as u64 + 50, 64),
                observed_at: t0 + chrono::Duration::minutes(i as i64),
            })
            .await
            .unwrap();
    }
    let r = app.get_with(CHANGES, &key).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["total"], 3);
    assert_eq!(
        (v["limit"].as_u64(), v["offset"].as_u64()),
        (Some(50), Some(0))
    );
    let ids: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["alert-2", "alert-1", "alert-0"], "newest first");
    let first = &v["results"][0];
    assert_eq!(first["package_name"], "lodash");
    assert_eq!(first["previous_sha256"], hex_of(3, 64));
    assert_eq!(first["latest_sha256"], hex_of(52, 64));
    assert!(first["observed_at"].as_str().unwrap().ends_with('Z'));

    let r = app
        .get_with(&format!("{CHANGES}?ecosystem=npm&limit=1&offset=1"), &key)
        .await;
    let v = r.json();
    assert_eq!(
        (v["total"].as_u64(), v["results"][0]["id"].as_str()),
        (Some(2), Some("alert-0"))
    );

    let r = app.get_with(&format!("{CHANGES}?watched=true"), &key).await;
    assert_eq!(r.json()["total"], 0);
    app.send(
        Method::POST,
        WATCH,
        &key,
        Some(json!({"ecosystem": "pypi", "package_name": "requests"})),
    )
    .await;
    let r = app.get_with(&format!("{CHANGES}?watched=true"), &key).await;
    let v = r.json();
    assert_eq!(
        (v["total"].as_u64(), v["results"][0]["id"].as_str()),
        (Some(1), Some("alert-1"))
    );

    for bad in [
        "watched=yes",
        "ecosystem=cargo",
        "limit=0",
        "limit=201",
        "offset=-1",
    ] {
        let r = app.get_with(&format!("{CHANGES}?{bad}"), &key).await;
        r.assert_error(400, "bad request");
    }
}

async fn package_routes_need_teams_and_the_permission(app: TestApp) {
    let basic = app.account("small", Role::Auditor, Tier::Basic).await;
    let viewer = app.account("viewers", Role::Analyst, Tier::Teams).await;
    let body = json!({"packages": [{"ecosystem": "npm", "name": "lodash"}]}).to_string();
    for key in [&basic, &viewer] {
        app.post_with(TYPOSQUAT, key, body.clone())
            .await
            .assert_error(403, "forbidden");
        app.post_with(SBOM, key, cyclonedx(json!([])))
            .await
            .assert_error(403, "forbidden");
        app.get_with(WATCH, key)
            .await
            .assert_error(403, "forbidden");
        app.get_with(CHANGES, key)
            .await
            .assert_error(403, "forbidden");
    }
    let r = app.call(Method::GET, WATCH, None, None).await;
    assert_eq!(r.status, 401);
}

fn osv(
    id: &str,
    ecosystem: &str,
    name: &str,
    fixed: &str,
    modified: &str,
) -> store::packages::AdvisoryRow {
    let document = json!({
        "schema_version": "1.6.0", "id": id, "modified": modified, "aliases": [format!("CVE-{id}")],
        "summary": format!("{name} flaw"),
        "affected": [{"package": {"ecosystem": ecosystem, "name": name},
                      "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": fixed}]}]}]
    })
    .to_string();
    let e = packages::Ecosystem::from_osv(ecosystem).unwrap();
    store::packages::AdvisoryRow {
        id: id.to_string(),
        modified: modified.to_string(),
        document,
        packages: vec![(e.as_str().to_string(), e.normalize(name).unwrap())],
    }
}

async fn sbom_components_carry_imported_advisories(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let now = app.clock.now();
    let rows = [
        osv(
            "PYSEC-1",
            "PyPI",
            "Django",
            "4.2.11",
            "2024-03-01T00:00:00Z",
        ),
        osv(
            "GHSA-npm-1",
            "npm",
            "lodash",
            "4.17.21",
            "2024-03-01T00:00:00Z",
        ),
        osv(
            "GO-2024-1",
            "Go",
            "golang.org/x/net",
            "0.23.0",
            "2024-03-01T00:00:00Z",
        ),
    ];
    assert_eq!(app.store.import_advisories(&rows, now).await.unwrap(), 3);
    // An older copy of an advisory never replaces a newer one.
    let stale = osv("PYSEC-1", "PyPI", "Django", "1.0", "2020-01-01T00:00:00Z");
    assert_eq!(app.store.import_advisories(&[stale], now).await.unwrap(), 0);
    let body = cyclonedx(json!([
        {"name": "django", "version": "4.2.10", "purl": "pkg:pypi/django@4.2.10"},
        {"name": "Django", "version": "4.2.11", "purl": "pkg:pypi/Django@4.2.11"},
        {"name": "lodash", "version": "4.17.20", "purl": "pkg:npm/lodash@4.17.20"},
        {"name": "golang.org/x/net", "version": "v0.22.0", "purl": "pkg:golang/golang.org/x/net@v0.22.0"},
        {"name": "requests", "version": "2.31.0", "purl": "pkg:pypi/requests@2.31.0"}
    ]));
    let r = app.post_with(SBOM, &key, body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    let comps = v["components"].as_array().unwrap();
    let ids = |i: usize| -> Vec<String> {
        comps[i]["advisories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(0), ["PYSEC-1"], "{}", comps[0]);
    assert_eq!(comps[0]["advisories"][0]["aliases"], json!(["CVE-PYSEC-1"]));
    assert!(ids(1).is_empty(), "the fixed version: {}", comps[1]);
    assert_eq!(ids(2), ["GHSA-npm-1"]);
    assert_eq!(ids(3), ["GO-2024-1"]);
    assert!(ids(4).is_empty());
    assert_eq!(v["summary"]["with_advisories"], 3);
}

/// A report far larger than one streamed piece arrives whole, as one JSON document, in
/// document order; a name listed in many versions gets the same verdict in each.
async fn sbom_large_report_streams_whole_and_in_order(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let mut components = Vec::new();
    for i in 0..3000 {
        let name = match i % 3 {
            0 => format!("acme-internal-tool-{i}"),
            1 => "reqeusts".to_string(),
            _ => "requests".to_string(),
        };
        components.push(json!({
            "type": "library", "name": name, "version": format!("1.0.{i}"),
            "purl": format!("pkg:pypi/{name}@1.0.{i}"),
            "hashes": [{"alg": "SHA-256", "content": hex_of(i, 64)}]
        }));
    }
    // The list before the fields saying what the document is, as some generators sort keys.
    let body = json!({"components": components, "specVersion": "1.5", "bomFormat": "CycloneDX"})
        .to_string();
    let r = app.post_with(SBOM, &key, body).await;
    assert_eq!(r.status, 200, "{}", &r.text[..r.text.len().min(300)]);
    assert!(r.text.len() > 3 * (64 << 10), "{} bytes", r.text.len());
    let v = r.json();
    assert_eq!(v["spec_version"], "1.5");
    let listed = v["components"].as_array().unwrap();
    assert_eq!(listed.len(), 3000);
    for (i, c) in listed.iter().enumerate() {
        assert_eq!(c["version"], format!("1.0.{i}"), "{c}");
        assert_eq!(c["hash"]["classification"], "unknown", "{c}");
        let expected = match i % 3 {
            0 => "clear",
            1 => "typosquat",
            _ => "known",
        };
        assert_eq!(c["name_risk"]["risk"], expected, "{c}");
    }
    assert_eq!(
        v["summary"],
        json!({"components": 3000, "hash_known": 0, "hash_unknown": 3000, "no_hash": 0,
               "typosquat": 1000, "dependency_confusion": 0, "with_advisories": 0})
    );
}

/// Posts a body with its own content type; the answer as text.
async fn post_typed(app: &TestApp, key: &str, content_type: &str, body: String) -> testkit::Resp {
    let resp = reqwest::Client::new()
        .post(format!("{}{SBOM}", app.base))
        .header("X-API-Key", key)
        .header("Content-Type", content_type)
        .body(body)
        .send()
        .await
        .expect("the server answers");
    testkit::Resp {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        text: resp.text().await.expect("body"),
    }
}

/// Documents nested far deeper than any real SBOM (each shape once crashed the whole process
/// with a stack overflow) are refused with 400 naming the limit, and the server goes on
/// answering.
async fn sbom_deep_nesting_is_refused_and_the_server_lives(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let xml = |inner: String| {
        format!(
            "<?xml version=\"1.0\"?><bom xmlns=\"http://cyclonedx.org/schema/bom/1.5\" version=\"1\">{inner}</bom>"
        )
    };
    let metadata_xml = |depth: usize| {
        xml(format!(
            "<metadata>{}{}</metadata><components/>",
            "<tools>".repeat(depth),
            "</tools>".repeat(depth)
        ))
    };
    let components_xml = |depth: usize| {
        xml(format!(
            "<components>{}{}</components>",
            "<component type=\"library\"><name>a</name><components>".repeat(depth),
            "</components></component>".repeat(depth)
        ))
    };
    let json_components = |depth: usize| {
        format!(
            r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","components":[{}{}]}}"#,
            r#"{"type":"library","name":"a","components":["#.repeat(depth),
            "]}".repeat(depth)
        )
    };
    let json_metadata = format!(
        r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","metadata":{}{}}}"#,
        r#"{"component":"#.repeat(10_000),
        "}".repeat(10_000)
    );
    let spdx3_graph = format!(
        r#"{{"@context":"https://spdx.org/rdf/3.0.1/spdx-context.jsonld","@graph":[{{"type":"software_Package","name":"a","verifiedUsing":{}[]{}}}]}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let spdx_json = format!(
        r#"{{"spdxVersion":"SPDX-2.3","packages":[{{"name":"a","externalRefs":{}1{}}}]}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    for (shape, content_type, body) in [
        (
            "10,000-deep metadata, XML",
            "application/xml",
            metadata_xml(10_000),
        ),
        (
            "2,000-deep components, XML",
            "application/xml",
            components_xml(2_000),
        ),
        (
            "100,000-deep components, XML",
            "application/xml",
            components_xml(100_000),
        ),
        (
            "3,000-deep components, JSON",
            "application/json",
            json_components(3_000),
        ),
        (
            "10,000-deep metadata, JSON",
            "application/json",
            json_metadata,
        ),
        (
            "10,000-deep SPDX 3 graph element",
            "application/ld+json",
            spdx3_graph,
        ),
        ("10,000-deep SPDX 2 package", "application/json", spdx_json),
    ] {
        let r = post_typed(&app, &key, content_type, body).await;
        r.assert_error(400, "bad request");
        assert!(
            r.message().contains("deeper than 128 levels"),
            "{shape}: {}",
            r.text
        );
        // Still alive, and still scanning.
        let r = app.get("/healthz").await;
        assert_eq!(r.status, 200, "after {shape}");
    }
    // Real nesting is read: components nested 30 deep, in both encodings.
    let r = post_typed(&app, &key, "application/xml", components_xml(30)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["summary"]["components"], 1);
    let nested = format!(
        r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","components":[{}{}]}}"#,
        (0..30)
            .map(|i| format!(r#"{{"name":"c{i}","purl":"pkg:npm/c{i}@1.0.0","components":["#))
            .collect::<String>(),
        "]}".repeat(30)
    );
    let r = app.post_with(SBOM, &key, nested).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["summary"]["components"], 30);
}

/// Above 100,000 components the scan answers 413 saying so, and reads no further.
async fn sbom_component_limit_answers_413(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let listing: Vec<String> = (0..100_001)
        .map(|i| format!(r#"{{"purl":"pkg:npm/c{i}@1"}}"#))
        .collect();
    let body = format!(
        r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","components":[{}]}}"#,
        listing.join(",")
    );
    assert!(body.len() < 4 << 20, "well within the body limit");
    let r = app.post_with(SBOM, &key, body).await;
    r.assert_error(413, "payload too large");
    assert!(
        r.message().contains("more than 100000 components"),
        "{}",
        r.text
    );
    // The same in SPDX tag-value.
    let tag_value = format!(
        "SPDXVersion: SPDX-2.3\n{}",
        (0..100_001)
            .map(|i| format!("PackageName: p{i}\n"))
            .collect::<String>()
    );
    let r = post_typed(&app, &key, "text/plain", tag_value).await;
    r.assert_error(413, "payload too large");
}

/// A key has at most two SBOM scans running at once (counted from the request's headers, so
/// a body still arriving counts); a third answers 429 with Retry-After. Other keys are not
/// held up, and a finished scan frees its place.
async fn sbom_scans_in_flight_are_capped_per_key(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let other = teams_key(&app, "globex").await;
    let body = cyclonedx(
        json!([{"name": "lodash", "version": "4.17.21", "purl": "pkg:npm/lodash@4.17.21"}]),
    );
    // One scan first, so the name detector is built before the timed part (building it
    // takes a second or more on a loaded machine, during which the slow scans below would
    // not yet hold their places).
    let r = app.post_with(SBOM, &key, body.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    // Two scans whose bodies arrive slowly: the first half now, the rest on a signal.
    let mut finish = Vec::new();
    let mut running = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (head, tail) = body.split_at(body.len() / 2);
        let (head, tail) = (head.to_string(), tail.to_string());
        let chunks = futures::stream::unfold((Some(head), Some((rx, tail))), |state| async move {
            match state {
                (Some(head), rest) => Some((Ok::<_, std::io::Error>(head), (None, rest))),
                (None, Some((rx, tail))) => {
                    let _ = rx.await;
                    Some((Ok(tail), (None, None)))
                }
                (None, None) => None,
            }
        });
        let request = reqwest::Client::new()
            .post(format!("{}{SBOM}", app.base))
            .header("X-API-Key", &key)
            .header("Content-Type", "application/json")
            .body(reqwest::Body::wrap_stream(chunks))
            .send();
        running.push(tokio::spawn(request));
        finish.push(tx);
    }
    // A third scan by the same key is refused while both are running (given a moment to
    // arrive: a probe that gets in first takes a place only until it is answered).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mut refused = None;
    for _ in 0..100 {
        let r = app.post_with(SBOM, &key, body.clone()).await;
        if r.status == 429 {
            refused = Some(r);
            break;
        }
        assert_eq!(r.status, 200, "{}", r.text);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let r = refused.expect("a third concurrent scan is refused");
    r.assert_error(429, "rate limit exceeded");
    assert!(r.message().contains("at most 2 SBOM scans"), "{}", r.text);
    assert_eq!(
        r.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("1")
    );
    // Another key scans meanwhile.
    let r = app.post_with(SBOM, &other, body.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    // Once the two finish, the key scans again.
    for tx in finish {
        tx.send(()).unwrap();
    }
    for request in running {
        let resp = request.await.unwrap().expect("the slow scan is answered");
        assert_eq!(resp.status().as_u16(), 200);
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["summary"]["components"], 1);
    }
    let r = app.post_with(SBOM, &key, body).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

/// An advisory for Go's standard library, imported as `knowngood advisories import` reads it
/// (the real GO-2022-0229 record from vuln.go.dev), reaches the standard-library component
/// however generators write it: Trivy `pkg:golang/stdlib@v1.13.5`, cyclonedx-gomod
/// `pkg:golang/std@go1.12.10`, Syft `pkg:golang/stdlib@1.13.7` (a fixed release).
async fn sbom_go_standard_library_gets_its_advisories(app: TestApp) {
    let key = teams_key(&app, "acme").await;
    let mut read = jobs::advisories::Reader::default();
    read.json(include_bytes!(
        "../../../packages/testdata/osv/GO-2022-0229.json"
    ))
    .unwrap();
    assert!(read.not_kept.is_empty(), "{:?}", read.not_kept);
    let written = jobs::advisories::import(app.store.as_ref(), &read.rows, app.clock.now())
        .await
        .unwrap();
    assert_eq!(written, 1);
    let body = cyclonedx(json!([
        {"type": "library", "name": "stdlib", "version": "v1.13.5", "purl": "pkg:golang/stdlib@v1.13.5"},
        {"type": "library", "name": "std", "version": "go1.12.10", "purl": "pkg:golang/std@go1.12.10?type=module"},
        {"type": "library", "name": "stdlib", "version": "go1.13.7", "purl": "pkg:golang/stdlib@1.13.7"},
        {"type": "library", "name": "golang.org/x/crypto", "version": "v0.0.0-20200115085410-6d4e4cb37c7d",
         "purl": "pkg:golang/golang.org/x/crypto@v0.0.0-20200115085410-6d4e4cb37c7d"}
    ]));
    let r = app.post_with(SBOM, &key, body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    let comps = v["components"].as_array().unwrap();
    let ids = |i: usize| -> Vec<&str> {
        comps[i]["advisories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].as_str().unwrap())
            .collect()
    };
    assert_eq!(ids(0), ["GO-2022-0229"], "{}", comps[0]);
    assert_eq!(
        comps[0]["advisories"][0]["aliases"],
        json!(["CVE-2020-7919", "GHSA-cjjc-xp8v-855w"])
    );
    assert_eq!(ids(1), ["GO-2022-0229"], "{}", comps[1]);
    assert!(ids(2).is_empty(), "fixed in 1.13.7: {}", comps[2]);
    assert_eq!(ids(3), ["GO-2022-0229"], "{}", comps[3]);
    assert_eq!(v["summary"]["with_advisories"], 3);
}
