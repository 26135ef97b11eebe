//! Operations over real HTTP: the Prometheus metrics listener.

use model::{Arch, Role, Tier};
use reqwest::Method;
use serde_json::json;
use testkit::{TestApp, hex_of, putty};

testkit::backend_tests!(metrics_count_routes_lookups_and_health);

/// The value of the sample `name{labels}` in an exposition, if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Requests are counted per route template and status class with their latency, lookups
/// per classification; health, vendor records and job counters are read at scrape time.
/// Raw paths never become labels.
async fn metrics_count_routes_lookups_and_health(app: TestApp) {
    let record = putty("0.82", Arch::Amd64, 2);
    let sha256 = record.hash_sha256.clone();
    app.record(record).await;
    let key = app.account("acme", Role::AccountAdmin, Tier::Teams).await;
    let r = app
        .send(
            Method::POST,
            "/api/v1/intel/lookup",
            &key,
            Some(json!({"hashes": [sha256, hex_of(9, 64), hex_of(8, 40)]})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = app
        .send(
            Method::DELETE,
            "/api/v1/admin/keys/key_feedfacefeedface",
            &key,
            None,
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.text);
    let r = app
        .get_with("/api/v1/intel/stats", "acme.not-a-valid-key")
        .await;
    assert_eq!(r.status, 401);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(server::metrics::serve(listener, app.state.clone()));
    let resp = reqwest::get(format!("http://{address}/metrics"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = resp.text().await.unwrap();
    server.abort();

    let lookup = r#"method="POST",route="/api/v1/intel/lookup""#;
    assert_eq!(
        sample(
            &text,
            &format!("knowngood_http_requests_total{{{lookup},status=\"2xx\"}}")
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!("knowngood_http_request_duration_seconds_count{{{lookup}}}")
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("knowngood_http_request_duration_seconds_bucket{{{lookup},le=\"+Inf\"}}")
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"knowngood_http_requests_total{method="DELETE",route="/api/v1/admin/keys/{key_id}",status="4xx"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"knowngood_http_requests_total{method="GET",route="/api/v1/intel/stats",status="4xx"}"#
        ),
        Some(1.0)
    );
    assert!(!text.contains("feedface"), "raw paths are never labels");
    assert_eq!(
        sample(
            &text,
            r#"knowngood_lookup_results_total{classification="known_vendor_release"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"knowngood_lookup_results_total{classification="unknown"}"#
        ),
        Some(2.0)
    );
    assert_eq!(sample(&text, "knowngood_database_up"), Some(1.0));
    assert_eq!(
        sample(&text, r#"knowngood_vendor_records{vendor="PuTTY"}"#).map(|v| v >= 1.0),
        Some(true),
        "{text}"
    );
    assert_eq!(
        sample(&text, "knowngood_failed_authentications_total"),
        Some(1.0)
    );
    assert!(text.contains(r#"knowngood_job_runs_total{job="vendor.refresh",outcome="ok"} 0"#));
    // A database this version created has no rows in an older form to rewrite.
    assert_eq!(
        sample(&text, "knowngood_record_compaction_walked_ratio"),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "knowngood_record_compaction_rewritten_total"),
        Some(0.0)
    );
    // Every line is a comment or `name{labels} value`.
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').expect(line);
        assert!(value.parse::<f64>().is_ok(), "{line}");
        let name = series.split('{').next().unwrap();
        assert!(
            name.starts_with("knowngood_")
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{line}"
        );
    }
}
