//! Signing-certificate revocation end to end: a PE signed (osslsigncode) under a CA made
//! here is downloaded from a loopback vendor channel, the revocation check finds its
//! certificate on the CA's CRL, and a user sees `cert_revoked_at` on its record (public
//! feed, history, export) and the certificate on the three revocation routes. The record
//! HMAC still verifies: the lookup still calls it a known vendor release.

use std::collections::BTreeMap;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use ingest::{DownloadLimits, FetchLimits};
use jobs::refresh::{RefreshOptions, VendorOverride, refresh_vendors, vendor_ids};
use jobs::revocation::{RevocationOptions, check};
use model::{Arch, Clock, Role, Tier};
use serde_json::{Value, json};
use sha2::Digest as _;
use store::downloads::SigningCert;
use store::revocations::Revocation;
use testkit::TestApp;
use testkit::pki::{CrlServer, RevocationReason, TestCa, build_pe, have_osslsigncode, sign_pe};
use testkit::vendor::Site;

testkit::backend_tests!(
    a_revoked_signer_reaches_the_records_and_the_routes,
    the_feed_puts_the_most_severe_and_active_first,
);

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// Refresh options running only kubectl, against `base`.
fn kubectl_only(base: &str) -> RefreshOptions {
    let vendors: BTreeMap<String, VendorOverride> = vendor_ids()
        .into_iter()
        .map(|id| {
            let on = id == "kubectl";
            let o = VendorOverride {
                enabled: Some(on),
                base_url: on.then(|| format!("{base}/kubectl")),
                ..VendorOverride::default()
            };
            (id, o)
        })
        .collect();
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
            ..FetchLimits::default()
        },
        attempts: 1,
        backoff: StdDuration::from_millis(10),
        client: Some(client()),
        ..RefreshOptions::default()
    }
}

async fn a_revoked_signer_reaches_the_records_and_the_routes(app: TestApp) {
    if !have_osslsigncode("a_revoked_signer_reaches_the_records_and_the_routes") {
        return;
    }
    let ca = TestCa::new("Example Code Signing CA");
    let crls = CrlServer::start().await;
    let leaf = ca.leaf(
        "Example Kubernetes Signer",
        &[0x8a, 0x11, 0x22],
        &crls.url("/cs.crl"),
    );
    let dir = tempfile::tempdir().unwrap();
    let signed = sign_pe(dir.path(), &build_pe(7), &leaf, &ca);
    let sha256 = format!("{:x}", sha2::Sha256::digest(&signed));

    // The vendor channel: kubectl's stable.txt and one Windows binary without a sidecar
    // hash, so the service downloads it and reads its signature.
    let site = Site::new();
    let base = site.serve_http().await;
    site.file("/kubectl/release/stable.txt", "v1.31.3\n");
    site.file(
        "/kubectl/release/v1.31.3/bin/windows/amd64/kubectl.exe",
        signed,
    );
    refresh_vendors(
        app.store.clone(),
        app.clock.clone(),
        &kubectl_only(&base),
        None,
        &|_| {},
    )
    .await
    .unwrap();
    let certs = app.store.signing_certs().await.unwrap();
    assert_eq!(certs.len(), 1);
    assert_eq!(certs[0].thumbprint, leaf.thumbprint);
    assert_eq!(
        certs[0].issuer_cert.as_deref(),
        Some(ca.der.as_slice()),
        "the CA came with the signature"
    );

    let revoked_at = app.clock.now() - Duration::hours(3);
    crls.set(
        "/cs.crl",
        ca.crl(
            1,
            app.clock.now() - Duration::hours(1),
            &[(
                &[0x8a, 0x11, 0x22],
                revoked_at,
                Some(RevocationReason::KeyCompromise),
            )],
        ),
    );
    let options = RevocationOptions {
        client: Some(client()),
        ..RevocationOptions::default()
    };
    let report = check(
        app.store.as_ref(),
        app.clock.as_ref(),
        &options,
        &ingest::OutboundSettings::default(),
        false,
    )
    .await
    .unwrap();
    assert_eq!(report.newly_revoked, 1, "{report:?}");

    // The record, wherever a user sees it.
    let feed = app
        .get("/public/hash-of-day?executable=kubectl.exe")
        .await
        .json();
    let record = &feed["hashes"][0];
    assert_eq!(record["hash_sha256"], sha256);
    assert_eq!(record["sig_thumbprint"], leaf.thumbprint);
    assert_eq!(record["cert_revoked_at"], ts(revoked_at));
    let key = app.account("soc-team", Role::Auditor, Tier::Teams).await;
    let history = app
        .get_with("/api/v1/intel/history?executable=kubectl.exe", &key)
        .await
        .json();
    assert_eq!(history["results"][0]["cert_revoked_at"], ts(revoked_at));
    let export = app
        .get_with("/api/v1/intel/export?format=json", &key)
        .await
        .json();
    assert_eq!(export[0]["cert_revoked_at"], ts(revoked_at));
    // Not reclassified, and its HMAC still verifies.
    let lookup = app
        .post_with(
            "/api/v1/intel/lookup",
            &key,
            json!({ "hashes": [sha256] }).to_string(),
        )
        .await
        .json();
    assert_eq!(
        lookup["results"][&sha256]["classification"],
        "known_vendor_release"
    );

    // The three routes.
    let expected = json!({
        "thumbprint": leaf.thumbprint,
        "signer": "CN=Example Kubernetes Signer,O=Example Software",
        "issuer": "CN=Example Code Signing CA,O=Knowngood Tests",
        "serial": "8a1122",
        "revoked_at": ts(revoked_at),
        "revocation_reason": "keyCompromise",
        "check_method": "crl",
        "affected_vendors": ["Kubernetes"],
        "currently_active": true,
    });
    let feed = app.get_with("/api/v1/intel/revocations", &key).await.json();
    assert_eq!(feed, json!({ "revoked_certs": [expected], "total": 1 }));
    let detail = app
        .get_with(
            &format!(
                "/api/v1/intel/revocations/{}",
                leaf.thumbprint.to_uppercase()
            ),
            &key,
        )
        .await;
    assert_eq!(detail.status, 200, "{}", detail.text);
    assert_eq!(detail.json(), json!({ "revoked_cert": expected }));
    app.get_with(
        &format!("/api/v1/intel/revocations/{}", "ab".repeat(20)),
        &key,
    )
    .await
    .assert_error(404, "not found");
    app.get_with("/api/v1/intel/revocations/not-a-thumbprint", &key)
        .await
        .assert_error(400, "bad request");

    let day = revoked_at.date_naive();
    let history = |q: String| {
        let (app, key) = (&app, &key);
        async move {
            app.get_with(&format!("/api/v1/intel/revocations/history{q}"), key)
                .await
        }
    };
    let all = history(String::new()).await.json();
    assert_eq!(all["total"], 1);
    assert_eq!(
        (all["limit"].clone(), all["offset"].clone()),
        (json!(50), json!(0))
    );
    assert_eq!(all["revoked_certs"][0], expected);
    for (query, total) in [
        ("?signer=kubernetes%20SIGNER".to_string(), 1),
        ("?signer=nobody".to_string(), 0),
        (format!("?since={day}&until={day}"), 1),
        (format!("?since={}", day + Duration::days(1)), 0),
        (format!("?until={}", day - Duration::days(1)), 0),
        (format!("?until={}", ts(revoked_at)), 1),
    ] {
        let page = history(query.clone()).await;
        assert_eq!(page.json()["total"], total, "{query}: {}", page.text);
    }
    history("?since=yesterday".into())
        .await
        .assert_error(400, "bad request");
    history("?limit=201".into())
        .await
        .assert_error(400, "bad request");

    // Teams tier and the permission are both needed.
    let basic = app.account("basic-team", Role::Auditor, Tier::Basic).await;
    app.get_with("/api/v1/intel/revocations", &basic)
        .await
        .assert_error(403, "forbidden");
    let viewer = app.account("viewer-team", Role::Analyst, Tier::Teams).await;
    app.get_with("/api/v1/intel/revocations", &viewer)
        .await
        .assert_error(403, "forbidden");

    // The issuer's CRL on the status page.
    let status = app.get("/public/status").await.json();
    let crl = &status["revocation"]["crls"][0];
    assert_eq!(
        crl["issuer"],
        "CN=Example Code Signing CA,O=Knowngood Tests"
    );
    assert_eq!(crl["status"], "ok");
    assert_eq!(
        crl["next_update"],
        ts(app.clock.now() - Duration::hours(1) + Duration::days(7))
    );
    assert_eq!(crl["last_error"], Value::Null);

    // The CA goes down: the status says so, in plain words; the revocation stays.
    crls.down(Some(503));
    check(
        app.store.as_ref(),
        app.clock.as_ref(),
        &options,
        &ingest::OutboundSettings::default(),
        true,
    )
    .await
    .unwrap();
    let status = app.get("/public/status").await.json();
    assert_eq!(status["revocation"]["crls"][0]["status"], "failing");
    assert_eq!(
        status["revocation"]["crls"][0]["last_error"],
        "CRL server answered an error"
    );
    assert_eq!(status["status"], "degraded");
    assert_eq!(
        app.get_with("/api/v1/intel/revocations", &key).await.json()["total"],
        1
    );
}

/// Revocations recorded straight through the store: the feed orders them by reason
/// severity, then by whether a current file was signed, then newest first.
async fn the_feed_puts_the_most_severe_and_active_first(app: TestApp) {
    let now = app.clock.now();
    let mut thumbprints = Vec::new();
    // (reason, current record?, revoked days ago)
    let cases = [
        ("superseded", true, 1),
        ("keyCompromise", false, 5),
        ("certificateHold", true, 0),
        ("cACompromise", true, 9),
        ("superseded", false, 0),
    ];
    for (i, (reason, current, days)) in cases.iter().enumerate() {
        let thumbprint = testkit::hex_of(i as u64 + 100, 40);
        let mut r = testkit::putty("0.80", Arch::Amd64, i as u64 + 100);
        r.executable_name = format!("tool{i}.exe");
        r.sig_signer = Some(format!("CN=Signer {i}"));
        r.sig_issuer = Some("CN=CA".into());
        r.sig_serial = Some(format!("0{i}"));
        r.sig_thumbprint = Some(thumbprint.clone());
        app.record(r).await;
        if !current {
            let mut newer = testkit::putty("0.81", Arch::Amd64, i as u64 + 200);
            newer.executable_name = format!("tool{i}.exe");
            app.record(newer).await;
        }
        app.store
            .signing_cert_seen(
                &SigningCert {
                    thumbprint: thumbprint.clone(),
                    signer: format!("CN=Signer {i}"),
                    issuer: "CN=CA".into(),
                    serial: format!("0{i}"),
                    crl_urls: Vec::new(),
                    issuer_cert: None,
                },
                now,
            )
            .await
            .unwrap();
        app.store
            .revoke(
                &Revocation {
                    thumbprint: thumbprint.clone(),
                    signer: format!("CN=Signer {i}"),
                    issuer: "CN=CA".into(),
                    serial: format!("0{i}"),
                    revoked_at: now - Duration::days(*days),
                    reason: (*reason).into(),
                    crl_url: "http://crl.example/ca.crl".into(),
                },
                now,
            )
            .await
            .unwrap();
        thumbprints.push(thumbprint);
    }
    let key = app.account("soc-team", Role::Auditor, Tier::Teams).await;
    let feed = app.get_with("/api/v1/intel/revocations", &key).await.json();
    let order: Vec<&str> = feed["revoked_certs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["thumbprint"].as_str().unwrap())
        .collect();
    let t = |i: usize| thumbprints[i].as_str();
    // Compromises (the active one first), then superseded (active first), then the hold.
    assert_eq!(order, vec![t(3), t(1), t(0), t(4), t(2)]);
    assert_eq!(feed["total"], 5);
    assert_eq!(feed["revoked_certs"][1]["currently_active"], false);
}
