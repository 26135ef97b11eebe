//! The hashlookup-compatible routes (key in the path, hashlookup's shapes) and the MISP
//! warninglist export.

use model::{Arch, Role, Tier};
use reqwest::Method;
use serde_json::{Value, json};
use server::Settings;
use testkit::TestApp;
use testkit::fixtures::{hex_of, putty, pypi};

testkit::backend_tests!(
    lookup_answers_in_hashlookup_shape,
    recorded_sizes_show_in_answers,
    errors_are_hashlookup_json,
    bulk_answers_found_records_only,
    info_and_top_stats,
    path_key_is_the_one_credential,
    path_key_shares_the_lookup_limit with two_per_minute,
    prefix_is_configurable with circl_prefix,
    misp_warninglist_lists_current_vendor_hashes,
    misp_warninglist_streams_a_long_list_in_order,
);

fn two_per_minute(settings: &mut Settings) {
    settings.limits.authenticated_per_key = 2;
}

fn circl_prefix(settings: &mut Settings) {
    settings.hashlookup_prefix = "/circl/".into();
}

fn root(key: &str) -> String {
    format!("/hashlookup/k/{key}/")
}

async fn get(app: &TestApp, path: &str) -> testkit::Resp {
    app.call(Method::GET, path, None, None).await
}

async fn post(app: &TestApp, path: &str, body: Value) -> testkit::Resp {
    app.call(Method::POST, path, None, Some(body.to_string().into()))
        .await
}

fn upper(seed: u64, len: usize) -> String {
    hex_of(seed, len).to_uppercase()
}

async fn lookup_answers_in_hashlookup_shape(app: TestApp) {
    let key = app.analyst().await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    let expected = json!({
        "MD5": upper(2, 32),
        "SHA-1": upper(2, 40),
        "SHA-256": upper(2, 64),
        "FileName": "putty.exe",
        "source": "knowngood",
        "hashlookup:trust": 100,
        "knowngood:classification": "known_vendor_release",
        "knowngood:vendor": "PuTTY",
        "knowngood:version": "0.82",
        "knowngood:platform": "windows",
    });
    for (algo, len) in [("md5", 32), ("sha1", 40), ("sha256", 64)] {
        // Either case, as hashlookup's clients send both.
        for hash in [hex_of(2, len), upper(2, len)] {
            let r = get(&app, &format!("{}lookup/{algo}/{hash}", root(&key))).await;
            assert_eq!(r.status, 200, "{algo}: {}", r.text);
            assert_eq!(r.json(), expected, "{algo}");
            assert_eq!(r.headers["cache-control"], "no-store");
        }
    }
    // MISP's module adds a slash to a root URL that already ends with one.
    let r = get(
        &app,
        &format!("{}/lookup/sha1/{}", root(&key), hex_of(2, 40)),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["SHA-1"], upper(2, 40));
    // A manifest-only record has a SHA-256 alone: `SHA-1` is there, null (MISP's module
    // reads it unconditionally), `MD5` is left out.
    app.record(pypi("requests", "2.32.3", 3)).await;
    let r = get(
        &app,
        &format!("{}lookup/sha256/{}", root(&key), hex_of(3, 64)),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    assert_eq!(body["SHA-256"], upper(3, 64));
    assert_eq!(body.get("SHA-1"), Some(&Value::Null), "{body}");
    assert!(body.get("MD5").is_none(), "{body}");
}

/// A record with a size: hashlookup's `FileSize` (a string, as hashlookup gives it), the
/// lookup's and the history's `size`; a record without one shows none.
async fn recorded_sizes_show_in_answers(app: TestApp) {
    let key = app.analyst().await;
    let mut sized = putty("0.82", Arch::Amd64, 5);
    sized.size = Some(1_234_567);
    app.record(sized).await;
    app.record(putty("0.82", Arch::Arm64, 6)).await;
    let r = get(
        &app,
        &format!("{}lookup/sha256/{}", root(&key), hex_of(5, 64)),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["FileSize"], "1234567");
    let r = get(
        &app,
        &format!("{}lookup/sha256/{}", root(&key), hex_of(6, 64)),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.json().get("FileSize").is_none(), "{}", r.text);
    let r = app
        .call(
            Method::POST,
            "/api/v1/intel/lookup",
            Some(&key),
            Some(
                json!({ "hashes": [hex_of(5, 64), hex_of(6, 64)] })
                    .to_string()
                    .into(),
            ),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let results = &r.json()["results"];
    assert_eq!(results[hex_of(5, 64)]["size"], 1_234_567);
    assert!(results[hex_of(6, 64)].get("size").is_none());
    let r = app
        .call(
            Method::GET,
            "/api/v1/intel/history?executable=putty.exe&arch=amd64",
            Some(&key),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["results"][0]["size"], 1_234_567);
}

async fn errors_are_hashlookup_json(app: TestApp) {
    let key = app.analyst().await;
    let missing = hex_of(9, 40);
    let r = get(&app, &format!("{}lookup/sha1/{missing}", root(&key))).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json(),
        json!({ "message": "Non existing SHA-1", "query": missing })
    );
    let r = get(&app, &format!("{}lookup/md5/{}", root(&key), hex_of(9, 32))).await;
    assert_eq!(r.json()["message"], "Non existing MD5");
    for (path, message) in [
        ("lookup/md5/abc", "Expecting a MD5 hex value"),
        (
            "lookup/sha1/zz23456789abcdef0123456789abcdef01234567",
            "SHA-1 is not in hex format",
        ),
        // A SHA-1 under the MD5 route is the wrong length for it.
        (
            "lookup/md5/0123456789abcdef0123456789abcdef01234567",
            "Expecting a MD5 hex value",
        ),
        (
            "lookup/sha512/abcd",
            "Expecting md5, sha1 or sha256 in the path",
        ),
    ] {
        let r = get(&app, &format!("{}{path}", root(&key))).await;
        assert_eq!(r.status, 400, "{path}: {}", r.text);
        assert_eq!(r.json()["message"], message, "{path}");
        assert!(r.json()["query"].is_string(), "{path}");
    }
}

async fn bulk_answers_found_records_only(app: TestApp) {
    let key = app.analyst().await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    app.record(putty("0.82", Arch::Arm64, 4)).await;
    let r = post(
        &app,
        &format!("{}bulk/sha1", root(&key)),
        json!({ "hashes": [hex_of(2, 40), upper(4, 40), hex_of(9, 40), hex_of(2, 40)] }),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let found: Vec<String> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|rec| rec["SHA-1"].as_str().unwrap().to_string())
        .collect();
    let mut expected = vec![upper(2, 40), upper(4, 40)];
    expected.sort();
    let mut found_sorted = found.clone();
    found_sorted.sort();
    assert_eq!(found_sorted, expected);
    // SHA-256 too, which hashlookup itself lacks.
    let r = post(
        &app,
        &format!("{}bulk/sha256", root(&key)),
        json!({ "hashes": [hex_of(2, 64)] }),
    )
    .await;
    assert_eq!(r.json()[0]["SHA-256"], upper(2, 64));
    // One bad hash refuses the batch; more than 100 too.
    let r = post(
        &app,
        &format!("{}bulk/md5", root(&key)),
        json!({ "hashes": [hex_of(2, 32), "nope"] }),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json(),
        json!({ "message": "Expecting a MD5 hex value", "query": "nope" })
    );
    let many: Vec<String> = (0..101).map(|i| hex_of(100 + i, 32)).collect();
    let r = post(
        &app,
        &format!("{}bulk/md5", root(&key)),
        json!({ "hashes": many }),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text);
}

async fn info_and_top_stats(app: TestApp) {
    let key = app.analyst().await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    let r = get(&app, &format!("{}info", root(&key))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let info = r.json();
    assert_eq!(info["hashlookup-version"], "1.0");
    assert_eq!(info["knowngood-vendors"], "1");
    assert_eq!(info["nsrl-NSRL-items"], "0");
    let r = get(&app, &format!("{}stats/top", root(&key))).await;
    assert_eq!(r.json(), json!({ "exist": [], "nx": [] }));
}

async fn path_key_is_the_one_credential(app: TestApp) {
    let key = app.analyst().await;
    let hash = hex_of(2, 40);
    // No key, a bad key, a key of an account below the route's tier.
    // Without a key (CIRCL's own URL shape): 401 saying where the key goes, for every
    // route and method under the prefix.
    for (method, path) in [
        (Method::GET, format!("/hashlookup/lookup/sha1/{hash}")),
        (Method::POST, "/hashlookup/bulk/sha1".to_string()),
        (Method::GET, "/hashlookup/info".to_string()),
    ] {
        let r = app.call(method, &path, None, None).await;
        r.assert_error(401, "unauthorized");
        assert!(
            r.message().contains(
                "take the API key in the path: /hashlookup/k/<API key>/lookup/sha1/<hash>"
            ),
            "{path}: {}",
            r.text
        );
    }
    // A key and a path that is no hashlookup route: 404.
    let r = get(&app, &format!("{}nothing-here", root(&key))).await;
    assert_eq!(r.status, 404, "{}", r.text);
    let r = get(&app, &format!("/hashlookup/k/nope.nope/lookup/sha1/{hash}")).await;
    r.assert_error(401, "unauthorized");
    // A free-tier account has no intel routes.
    let free = app.account("free-team", Role::Analyst, Tier::Free).await;
    let r = get(&app, &format!("{}lookup/sha1/{hash}", root(&free))).await;
    assert_eq!(r.status, 403, "{}", r.text);
    // Every kind of bad key in the path is a 401 that never echoes it.
    let secret = key.split_once('.').unwrap().1.to_string();
    for (bad, why) in [
        ("nope".to_string(), "no dot"),
        (format!("{key}x"), "secret altered"),
        (key.to_uppercase(), "uppercased"),
        (format!("someone-else.{secret}"), "another team's name"),
        ("%C3%A9t%C3%A9.abc".to_string(), "non-ASCII"),
    ] {
        let r = get(&app, &format!("/hashlookup/k/{bad}/lookup/sha1/{hash}")).await;
        assert_eq!(r.status, 401, "{why}: {}", r.text);
        assert!(
            !r.text.contains(&secret),
            "{why}: the answer never echoes a key"
        );
    }
    // A header credential besides the path key is refused, not preferred.
    let r = app
        .call(
            Method::GET,
            &format!("{}lookup/sha1/{hash}", root(&key)),
            Some(&key),
            None,
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    // A header key alone does not open a path-key route.
    let r = app
        .call(
            Method::GET,
            &format!("/hashlookup/k/-/lookup/sha1/{hash}"),
            Some(&key),
            None,
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
}

async fn path_key_shares_the_lookup_limit(app: TestApp) {
    let key = app.analyst().await;
    let hash = hex_of(2, 40);
    let path = format!("{}lookup/sha1/{hash}", root(&key));
    assert_eq!(get(&app, &path).await.status, 404);
    let r = app
        .post_with(
            "/api/v1/intel/lookup",
            &key,
            json!({ "hashes": [hash] }).to_string(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // The third request of the minute, by either way in, is over the key's limit.
    let r = get(&app, &path).await;
    assert_eq!(r.status, 429, "{}", r.text);
    assert!(r.headers.contains_key("retry-after"));
}

async fn prefix_is_configurable(app: TestApp) {
    let key = app.analyst().await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    let r = get(
        &app,
        &format!("/circl/k/{key}/lookup/md5/{}", hex_of(2, 32)),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = get(&app, &format!("/circl/k/{key}//info")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = get(
        &app,
        &format!("/hashlookup/k/{key}/lookup/md5/{}", hex_of(2, 32)),
    )
    .await;
    assert_eq!(r.status, 404);
    // The key hint names the configured prefix.
    let r = get(&app, &format!("/circl/lookup/md5/{}", hex_of(2, 32))).await;
    r.assert_error(401, "unauthorized");
    assert!(r.message().contains("/circl/k/<API key>/"), "{}", r.text);
}

async fn misp_warninglist_lists_current_vendor_hashes(app: TestApp) {
    let key = app.analyst().await;
    app.record(putty("0.81", Arch::Amd64, 1)).await;
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    app.record(pypi("requests", "2.32.3", 3)).await;
    let r = app
        .get_with("/api/v1/intel/export/misp-warninglist", &key)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let list = r.json();
    assert_eq!(list["type"], "string");
    assert_eq!(
        list["matching_attributes"],
        json!([
            "md5",
            "sha1",
            "sha256",
            "filename|md5",
            "filename|sha1",
            "filename|sha256"
        ])
    );
    assert!(list["version"].as_u64().unwrap() > 20_000_000);
    let mut expected = vec![hex_of(2, 64), hex_of(2, 40), hex_of(2, 32), hex_of(3, 64)];
    expected.sort();
    // The superseded 0.81 is not listed.
    assert_eq!(list["list"], json!(expected));
    // A free-tier account has no intel routes.
    let free = app.account("free-team", Role::Analyst, Tier::Free).await;
    let r = app
        .get_with("/api/v1/intel/export/misp-warninglist", &free)
        .await;
    assert_eq!(r.status, 403);
}

/// A list longer than one streamed piece comes out whole: every digest once, sorted, the
/// superseded builds' left out.
async fn misp_warninglist_streams_a_long_list_in_order(app: TestApp) {
    use model::{Clock as _, Platform};
    use testkit::fixtures::rec;
    let key = app.analyst().await;
    let releases = |version: &str, seed: u64| {
        (0..800)
            .map(|i| {
                let name = format!("tool-{i:03}.exe");
                rec(
                    "Acme",
                    &name,
                    version,
                    Platform::Windows,
                    Arch::Amd64,
                    seed + i,
                )
            })
            .collect::<Vec<_>>()
    };
    app.store
        .record_many(releases("1.0", 10_000), app.clock.now())
        .await
        .unwrap();
    app.clock.advance(chrono::Duration::minutes(1));
    app.store
        .record_many(releases("2.0", 20_000), app.clock.now())
        .await
        .unwrap();
    let r = app
        .get_with("/api/v1/intel/export/misp-warninglist", &key)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.text.len() > 100_000, "{} bytes", r.text.len());
    let mut expected: Vec<String> = (20_000..20_800)
        .flat_map(|seed| [hex_of(seed, 64), hex_of(seed, 40), hex_of(seed, 32)])
        .collect();
    expected.sort();
    assert_eq!(r.json()["list"], json!(expected));
}
