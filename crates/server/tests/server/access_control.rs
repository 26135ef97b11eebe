//! Access control over real HTTP: the authorization matrix for both kinds of credential,
//! hostile JWTs, role grants and their expiry, rank rules and the audit log, revocation
//! (in one process and across replicas), per-minute limits (in process and shared through
//! Redis by two OS processes), monthly quotas and usage accounting.
//!
//! Each test is an `async fn(TestApp)`; `testkit::backend_tests!` instantiates it as `sqlite::<name>`
//! and `postgres::<name>` (the latter ignored unless
//! `KNOWNGOOD_TEST_POSTGRES_URL` was set when the tests were built). `name with f` first adjusts the server's
//! `Settings` with `f`. The Redis test needs Redis at `KNOWNGOOD_TEST_REDIS_URL` (default
//! `redis://127.0.0.1:6379`) and prints `SKIPPED` when it is unreachable.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant};

use auth::jwt::{Claims, JwtKeys};
use auth::limits::{Limiter, RedisLimiter};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chrono::{DateTime, Duration, NaiveDate, SecondsFormat, Utc};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use model::{Arch, Clock as _, FixedClock, RecordSigner, Role, Tier};
use model::{ImpersonationMode, TenantKind};
use reqwest::Method;
use serde_json::{Value, json};
use server::Settings;
use server::routing::{Access, ImpersonationPolicy, ROUTES, RouteSpec};
use testkit::{Resp, TestApp, hex_of, putty, t};

testkit::backend_tests!(
    authorization_matrix_both_credentials,
    jwt_attacks,
    grants_expire_with_the_clock,
    rank_rules_and_the_audit_log,
    revocation_is_immediate_and_reissue_replaces,
    reissue_only_own_key_or_lower_rank,
    revocation_reaches_other_replicas,
    per_minute_limits_in_process with spec_limits,
    redis_limit_shared_by_two_processes,
    monthly_quota_exhaustion with low_basic_quota,
    usage_report_across_days_and_months,
    usage_survives_clean_shutdown,
    failed_authentications_are_limited with tight_failure_limits,
    ambiguous_credentials_are_refused,
    refused_requests_cost_no_quota with two_per_minute,
    malformed_targets_are_audited_escaped_and_cut,
);

const STATS: &str = "/api/v1/intel/stats";
const TOKEN: &str = "/api/v1/auth/token";
const REFRESH: &str = "/api/v1/auth/refresh";
const KEYS: &str = "/api/v1/admin/keys";
const USAGE: &str = "/api/v1/admin/usage";
const AUDIT: &str = "/api/v1/admin/audit";
const SETTINGS: &str = "/api/v1/admin/settings";
const IMPERSONATE: &str = "/api/v1/admin/impersonate";

/// The documented per-minute limits, with the platform's proxy (here: the test client's own
/// address) trusted for `X-Forwarded-For`.
fn spec_limits(s: &mut Settings) {
    s.limits = server::Limits::default();
    s.trusted_proxies = vec!["127.0.0.1".parse().expect("ip")];
}

/// Basic accounts may make five requests a month.
fn low_basic_quota(s: &mut Settings) {
    s.quotas.basic = Some(5);
}

fn ts(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn parse_ts(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .unwrap_or_else(|| panic!("not a timestamp: {v}"))
        .parse()
        .unwrap_or_else(|e| panic!("bad timestamp {v}: {e}"))
}

/// A JSON value as a JWT segment.
fn b64(v: &Value) -> String {
    URL_SAFE_NO_PAD.encode(v.to_string())
}

/// Header and claims of a JWT, unverified.
fn jwt_parts(token: &str) -> (Value, Value) {
    let segment = |i: usize| -> Value {
        let raw = token.split('.').nth(i).expect("JWT segment");
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(raw).expect("base64url")).expect("JSON")
    };
    (segment(0), segment(1))
}

fn role_names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|r| r.as_str().expect("role").to_string())
        .collect()
}

async fn bearer(app: &TestApp, token: &str) -> Resp {
    app.call_bearer(Method::GET, STATS, token, None).await
}

async fn refresh(app: &TestApp, token: &str) -> Resp {
    app.call_bearer(Method::POST, REFRESH, token, None).await
}

/// Issues a key through the API as `admin`; returns (key_id, key).
async fn issue(app: &TestApp, admin: &str, body: Value) -> (String, String) {
    let r = app.send(Method::POST, KEYS, admin, Some(body)).await;
    assert_eq!(r.status, 201, "issue: {}", r.text);
    let v = r.json();
    (
        v["key_id"].as_str().expect("key_id").to_string(),
        v["key"].as_str().expect("key").to_string(),
    )
}

/// The key as GET /api/v1/admin/keys shows it to `admin`.
async fn listed(app: &TestApp, admin: &str, key_id: &str) -> Value {
    let r = app.get_with(KEYS, admin).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|k| k["key_id"] == key_id)
        .unwrap_or_else(|| panic!("{key_id} not listed: {}", r.text))
        .clone()
}

/// A GET route without path parameters that auditor's permissions reach and analyst's do
/// not (intel:downloads, intel:revocations, intel:packages), if the server has one yet.
fn auditor_only_route() -> Option<&'static RouteSpec> {
    ROUTES.iter().find(|r| match r.access {
        Access::Authenticated {
            permission: Some(p),
            min_tier,
        } => {
            r.method == Method::GET
                && !r.path.contains('{')
                && min_tier <= Tier::Teams
                && Role::Auditor.has(p)
                && !Role::Analyst.has(p)
        }
        _ => false,
    })
}

// ---------------------------------------------------------------------------------------
// The authorization matrix
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cred {
    ApiKey,
    Jwt,
}

/// A request to the route that is valid apart from the credential, and the status its
/// handler gives once authorization lets it through (`None`: a route this table does not
/// know yet, checked leniently).
fn sample(route: &RouteSpec) -> (Method, String, Option<String>, Option<u16>) {
    let mut path: String = route
        .path
        .split('/')
        .map(|seg| {
            // A path key is filled in per caller.
            if seg == "{key}" {
                seg
            } else if seg.starts_with('{') {
                "0123456789abcdef0123456789abcdef01234567"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/");
    let method = Method::from_bytes(route.method.as_str().as_bytes()).expect("method");
    let lookup = json!({ "hashes": [hex_of(2, 64)] }).to_string();
    let (body, expected) = match (route.method.as_str(), route.path.as_str()) {
        ("GET", "/api/v1/intel/history") => {
            path.push_str("?executable=putty.exe");
            (None, Some(200))
        }
        ("GET", "/api/v1/intel/export") => {
            path.push_str("?format=csv");
            (None, Some(200))
        }
        ("POST", "/api/v1/intel/lookup" | "/api/v1/intel/lookup/historical") => {
            (Some(lookup), Some(200))
        }
        ("POST", TOKEN | REFRESH) => (None, Some(200)),
        ("GET", "/hashlookup/k/{key}/lookup/{algorithm}/{hash}") => {
            path = format!("/hashlookup/k/{{key}}/lookup/sha1/{}", hex_of(9, 40));
            (None, Some(404))
        }
        ("POST", "/hashlookup/k/{key}/bulk/{algorithm}") => {
            path = "/hashlookup/k/{key}/bulk/sha256".into();
            (Some(lookup), Some(200))
        }
        ("GET", "/hashlookup/k/{key}/info" | "/hashlookup/k/{key}/stats/top") => (None, Some(200)),
        ("GET", "/api/v1/intel/export/misp-warninglist") => (None, Some(200)),
        (
            "GET",
            STATS
            | USAGE
            | KEYS
            | AUDIT
            | SETTINGS
            | "/api/v1/intel/downloads"
            | "/api/v1/admin/vendors"
            | "/api/v1/admin/roles"
            | "/api/v1/admin/platform-admins",
        ) => (None, Some(200)),
        ("PATCH", SETTINGS) => (Some("{}".into()), Some(200)),
        // A label that is not a string (owners here are on customer accounts, where the
        // new administrator could not be created anyway).
        ("POST", "/api/v1/admin/platform-admins") => (Some(r#"{"label": 5}"#.into()), Some(400)),
        // No mode.
        ("POST", IMPERSONATE) => (Some("{}".into()), Some(400)),
        // Not an impersonation session (sessions are checked apart).
        ("DELETE", IMPERSONATE) => (None, Some(404)),
        // No such vendor or administrator.
        (
            "POST",
            "/api/v1/admin/vendors/{vendor}/enable"
            | "/api/v1/admin/vendors/{vendor}/disable"
            | "/api/v1/admin/vendors/{vendor}/refresh",
        )
        | ("DELETE", "/api/v1/admin/platform-admins/{key_id}") => (None, Some(404)),
        // No role in the body.
        ("POST", KEYS | "/api/v1/admin/keys/{key_id}/roles") => (Some("{}".into()), Some(400)),
        // No such key or account.
        ("PATCH", "/api/v1/admin/keys/{key_id}") => (Some("{}".into()), Some(404)),
        ("DELETE", "/api/v1/admin/keys/{key_id}")
        | ("POST", "/api/v1/admin/keys/{key_id}/reissue")
        | (
            "POST",
            "/api/v1/admin/accounts/{team_id}/suspend"
            | "/api/v1/admin/accounts/{team_id}/unsuspend",
        ) => (None, Some(404)),
        // Not a role.
        ("DELETE", "/api/v1/admin/keys/{key_id}/roles/{role}") => (None, Some(400)),
        // Recovery codes stand in for a second factor: none for a key without one.
        ("POST", "/api/v1/admin/mfa/recovery/generate") => (Some("{}".into()), Some(400)),
        (_, _) if matches!(method, Method::GET | Method::HEAD | Method::DELETE) => (None, None),
        _ => (Some("{}".into()), None),
    };
    (method, path, body, expected)
}

/// Every authenticated route x every role x every tier x {API key, JWT} answers exactly as
/// the access table, the role table and the credential kind predict: the token route takes
/// only an API key and refresh only a JWT (the other kind is 401); elsewhere both kinds
/// are equal. Staff impersonation sessions (view and manage, on every tier) answer as the
/// route's impersonation rule and the assumed account_admin role predict.
async fn authorization_matrix_both_credentials(app: TestApp) {
    app.record(putty("0.82", Arch::Amd64, 2)).await;
    let mut callers = Vec::new();
    for role in Role::ALL {
        for tier in Tier::ALL {
            let team = format!("x-{}-{}", role.as_str().replace('_', "-"), tier.as_str());
            let (_, key) = app.tenant(&team, TenantKind::Customer, role, tier).await;
            let token = app.token(&key).await;
            let (header, claims) = jwt_parts(&token);
            assert_eq!(header["alg"], "RS256");
            assert_eq!(claims["sub"], team.as_str());
            assert_eq!(claims["role"], role.as_str());
            assert_eq!(claims["roles"], json!([role.as_str()]));
            assert_eq!(claims["tier"], tier.as_str());
            assert_eq!(
                claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
                900
            );
            callers.push((role, tier, key, token));
        }
    }
    let mut routes: Vec<&RouteSpec> = ROUTES
        .iter()
        .filter(|r| matches!(r.access, Access::Authenticated { .. }))
        .collect();
    // Ending a session comes last: it ends the impersonation sessions below.
    routes.sort_by_key(|r| r.path == IMPERSONATE && r.method == Method::DELETE);
    // Staff sessions acting as each tier's account admin, in both modes.
    let (_, owner) = app
        .tenant(
            "platform",
            TenantKind::Platform,
            Role::PlatformOwner,
            Tier::Enterprise,
        )
        .await;
    let staff_token = app.token(&owner).await;
    let mut sessions = Vec::new();
    for tier in Tier::ALL {
        for mode in [ImpersonationMode::View, ImpersonationMode::Manage] {
            let team = format!("x-account-admin-{}", tier.as_str());
            let r = app
                .call_bearer(
                    Method::POST,
                    IMPERSONATE,
                    &staff_token,
                    Some(
                        json!({ "team_id": team, "mode": mode.as_str() })
                            .to_string()
                            .into(),
                    ),
                )
                .await;
            assert_eq!(r.status, 201, "{team} {mode}: {}", r.text);
            sessions.push((tier, mode, r.json()["token"].as_str().unwrap().to_string()));
        }
    }
    let mut checked = 0;
    let mut unknown = Vec::new();
    for route in &routes {
        let Access::Authenticated {
            permission,
            min_tier,
        } = route.access
        else {
            unreachable!()
        };
        let (method, path, body, expected) = sample(route);
        if expected.is_none() {
            unknown.push(format!("{} {}", route.method, route.path));
        }
        for (role, tier, key, token) in &callers {
            for cred in [Cred::ApiKey, Cred::Jwt] {
                let by_table = permission.is_none_or(|p| role.has(p)) && *tier >= min_tier;
                // The token route exchanges a key; refresh takes a token.
                let wrong_kind = (route.path == TOKEN && cred == Cred::Jwt)
                    || (route.path == REFRESH && cred == Cred::ApiKey);
                let body = body.clone().map(reqwest::Body::from);
                // A path-key route takes the key in its path and no header credential.
                let in_path = route.rule.key_in_path;
                let path = path.replace("{key}", key);
                let r = match cred {
                    Cred::ApiKey if in_path => app.call(method.clone(), &path, None, body).await,
                    Cred::ApiKey => app.call(method.clone(), &path, Some(key), body).await,
                    Cred::Jwt => app.call_bearer(method.clone(), &path, token, body).await,
                };
                let what = format!(
                    "{} {} as {role} on {tier} with {cred:?}",
                    route.method, route.path
                );
                if in_path && cred == Cred::Jwt {
                    // A token besides the path key: two credentials.
                    assert_eq!(r.status, 400, "{what}: {}", r.text);
                } else if wrong_kind {
                    // Not the credential this route takes: as good as none.
                    assert_eq!(r.status, 401, "{what}: {}", r.text);
                    assert_eq!(r.error(), "unauthorized", "{what}");
                    assert!(
                        r.message().contains("/api/v1/auth/"),
                        "{what} should point at the other route: {}",
                        r.text
                    );
                } else if !by_table {
                    assert_eq!(r.status, 403, "{what}: {}", r.text);
                    assert_eq!(r.error(), "forbidden", "{what}");
                    let reason = r.message();
                    assert!(
                        reason.contains("permission") || reason.contains("tier"),
                        "{what}: {reason}"
                    );
                } else if let Some(status) = expected {
                    assert_eq!(r.status, status, "{what}: {}", r.text);
                } else {
                    assert!(
                        r.status != 401 && r.status != 403 && r.status != 405,
                        "{what}: {} {}",
                        r.status,
                        r.text
                    );
                }
                checked += 1;
            }
        }
        // Impersonation sessions: what the route's rule lets a session do, then what the
        // assumed account_admin role and the account's tier allow.
        for (tier, mode, token) in &sessions {
            let body = body.clone().map(reqwest::Body::from);
            if route.rule.key_in_path {
                // A session is a bearer token, and a path-key route takes only its path key.
                let path = path.replace("{key}", "none.given");
                let r = app.call_bearer(method.clone(), &path, token, body).await;
                assert_eq!(r.status, 400, "{} {}: {}", route.method, route.path, r.text);
                checked += 1;
                continue;
            }
            let r = app.call_bearer(method.clone(), &path, token, body).await;
            let what = format!(
                "{} {} impersonating on {tier} in {mode}",
                route.method, route.path
            );
            let refused_to_sessions = match route.rule.impersonation {
                ImpersonationPolicy::Refused => true,
                ImpersonationPolicy::ManageOnly => *mode == ImpersonationMode::View,
                ImpersonationPolicy::Allowed | ImpersonationPolicy::Always => false,
            };
            let by_table =
                permission.is_none_or(|p| Role::AccountAdmin.has(p)) && *tier >= min_tier;
            if refused_to_sessions || !by_table {
                assert_eq!(r.status, 403, "{what}: {}", r.text);
            } else if route.path == IMPERSONATE && route.method == Method::DELETE {
                assert_eq!(r.status, 204, "{what}: {}", r.text);
            } else if let Some(status) = expected {
                assert_eq!(r.status, status, "{what}: {}", r.text);
            } else {
                assert!(
                    ![401, 403, 405].contains(&r.status),
                    "{what}: {} {}",
                    r.status,
                    r.text
                );
            }
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        routes.len() * (Role::ALL.len() * Tier::ALL.len() * 2 + Tier::ALL.len() * 2)
    );
    if !unknown.is_empty() {
        eprintln!("access matrix: no exact status for {unknown:?}; checked as not 401/403/405");
    }
}

// ---------------------------------------------------------------------------------------
// Hostile and stale JWTs
// ---------------------------------------------------------------------------------------

fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

fn der_uint(be: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(be.len() + 1);
    if be.first().is_some_and(|b| b & 0x80 != 0) {
        v.push(0);
    }
    v.extend_from_slice(be);
    der(0x02, &v)
}

fn pem(label: &str, der: &[u8]) -> String {
    let b = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("ascii"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The server's RSA public key, rebuilt from the JWKS, in every encoding a confused
/// verifier might use as an HMAC secret.
fn public_key_encodings(jwk: &Value) -> Vec<(&'static str, Vec<u8>)> {
    let n = URL_SAFE_NO_PAD
        .decode(jwk["n"].as_str().expect("n"))
        .expect("n");
    let e = URL_SAFE_NO_PAD
        .decode(jwk["e"].as_str().expect("e"))
        .expect("e");
    let pkcs1 = der(0x30, &[der_uint(&n), der_uint(&e)].concat());
    let rsa_oid = [
        0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01,
    ];
    let algorithm = der(0x30, &[&rsa_oid[..], &[0x05, 0x00]].concat());
    let spki = der(
        0x30,
        &[algorithm, der(0x03, &[&[0u8][..], &pkcs1].concat())].concat(),
    );
    let spki_pem = pem("PUBLIC KEY", &spki);
    vec![
        ("SPKI PEM", spki_pem.clone().into_bytes()),
        (
            "SPKI PEM without final newline",
            spki_pem.trim_end().as_bytes().to_vec(),
        ),
        ("PKCS#1 PEM", pem("RSA PUBLIC KEY", &pkcs1).into_bytes()),
        ("SPKI DER", spki),
        ("PKCS#1 DER", pkcs1),
        ("modulus", n),
        ("JWK JSON", jwk.to_string().into_bytes()),
    ]
}

fn sign(alg: Algorithm, kid: Option<&str>, claims: &Value, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_string);
    jsonwebtoken::encode(&header, claims, key).expect("sign")
}

async fn jwt_attacks(app: TestApp) {
    let (admin_id, admin) = app
        .tenant(
            "acme",
            TenantKind::Customer,
            Role::AccountAdmin,
            Tier::Teams,
        )
        .await;
    let (staff_id, staff) = app
        .tenant(
            "platform",
            TenantKind::Platform,
            Role::PlatformAdmin,
            Tier::Enterprise,
        )
        .await;
    let token = app.token(&admin).await;
    assert_eq!(bearer(&app, &token).await.status, 200);
    let (header, claims) = jwt_parts(&token);
    assert_eq!(claims["key_id"], admin_id.as_str());
    let kid = header["kid"].as_str().expect("kid").to_string();
    let jwks = app.get("/.well-known/jwks.json").await.json();
    let jwk = jwks["keys"][0].clone();
    assert_eq!(jwk["kid"], kid.as_str());
    assert_eq!(jwk["alg"], "RS256");
    assert_eq!(jwk["kty"], "RSA");
    let segments: Vec<&str> = token.split('.').collect();
    let (h0, p0, s0) = (segments[0], segments[1], segments[2]);

    // The real signing key, to show that the crafting itself is sound: a token it signs
    // with proper claims passes, so every refusal below is for the stated reason.
    let real = JwtKeys::from_pkcs8(&[testkit::jwt_pkcs8().to_vec()]).expect("real key");
    let real_pem = EncodingKey::from_rsa_pem(pem("PRIVATE KEY", testkit::jwt_pkcs8()).as_bytes())
        .expect("real key as PEM");
    let as_claims = |v: &Value| -> Claims { serde_json::from_value(v.clone()).expect("claims") };
    let crafted = real.issue(&as_claims(&claims)).expect("issue");
    assert_eq!(bearer(&app, &crafted).await.status, 200, "crafted control");
    let crafted = sign(Algorithm::RS256, Some(&kid), &claims, &real_pem);
    assert_eq!(bearer(&app, &crafted).await.status, 200, "crafted control");

    let mut forged: Vec<(String, String)> = Vec::new();
    // alg none, in any spelling, with or without a signature.
    for alg in ["none", "None", "NONE", "nOnE"] {
        let h = b64(&json!({ "alg": alg, "typ": "JWT", "kid": kid }));
        let p = b64(&claims);
        forged.push((format!("alg {alg}"), format!("{h}.{p}.")));
        forged.push((format!("alg {alg} without signature"), format!("{h}.{p}")));
        forged.push((
            format!("alg {alg} with the genuine signature"),
            format!("{h}.{p}.{s0}"),
        ));
    }
    // HMAC keyed with the public key (the RS256/HS256 confusion).
    for (what, secret) in public_key_encodings(&jwk) {
        for alg in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
            let key = EncodingKey::from_secret(&secret);
            forged.push((
                format!("{alg:?} keyed with the public key as {what}"),
                sign(alg, Some(&kid), &claims, &key),
            ));
        }
    }
    // Other RSA algorithms, even signed by the real key.
    for alg in [Algorithm::RS384, Algorithm::RS512, Algorithm::PS256] {
        forged.push((
            format!("{alg:?} by the real key"),
            sign(alg, Some(&kid), &claims, &real_pem),
        ));
    }
    // Key ids: unknown, missing, or the right one on another key's signature.
    let other_pkcs8 = auth::jwt::generate_rsa_pkcs8().expect("RSA key");
    let other = JwtKeys::from_pkcs8(std::slice::from_ref(&other_pkcs8)).expect("other key");
    let other_pem = EncodingKey::from_rsa_pem(pem("PRIVATE KEY", &other_pkcs8).as_bytes())
        .expect("other key as PEM");
    forged.push((
        "another key with its own (unknown) kid".into(),
        other.issue(&as_claims(&claims)).expect("issue"),
    ));
    forged.push((
        "another key claiming the server's kid".into(),
        sign(Algorithm::RS256, Some(&kid), &claims, &other_pem),
    ));
    forged.push((
        "the real key under an unknown kid".into(),
        sign(
            Algorithm::RS256,
            Some("0000000000000000"),
            &claims,
            &real_pem,
        ),
    ));
    forged.push((
        "the real key without a kid".into(),
        sign(Algorithm::RS256, None, &claims, &real_pem),
    ));
    // Tampered payloads under the genuine header and signature.
    let mut tampered = Vec::new();
    for (field, value) in [
        ("role", json!("platform_owner")),
        ("roles", json!(["account_admin", "platform_owner"])),
        ("tier", json!("enterprise")),
        ("sub", json!("platform")),
        ("key_id", json!(staff_id)),
        ("exp", json!(claims["exp"].as_i64().unwrap() + 86_400)),
        ("iss", json!("someone-else")),
    ] {
        let mut c = claims.clone();
        c[field] = value;
        tampered.push((field, c.clone()));
        forged.push((
            format!("payload {field} changed"),
            format!("{h0}.{}.{s0}", b64(&c)),
        ));
    }
    forged.push((
        "signature truncated".into(),
        format!("{h0}.{p0}.{}", &s0[..s0.len() - 4]),
    ));
    forged.push(("signature empty".into(), format!("{h0}.{p0}.")));
    let staff_token = app.token(&staff).await;
    forged.push((
        "signature of another token".into(),
        format!("{h0}.{p0}.{}", staff_token.rsplit('.').next().unwrap()),
    ));
    // Properly signed by the real key, but claims the server did not issue: another
    // issuer, or a subject that is not the key's team.
    for (field, c) in &tampered {
        if ["iss", "sub", "key_id"].contains(field) {
            let signed = real.issue(&as_claims(c)).expect("issue");
            if *field == "key_id" {
                // The key of another team under this team's name.
                forged.push(("signed: key of another team".into(), signed));
            } else {
                forged.push((format!("signed: foreign {field}"), signed));
            }
        }
    }
    let mut c = claims.clone();
    c["key_id"] = json!("key_0000000000000000");
    forged.push((
        "signed: unknown key".into(),
        real.issue(&as_claims(&c)).expect("issue"),
    ));

    for (why, forged_token) in &forged {
        for r in [
            bearer(&app, forged_token).await,
            refresh(&app, forged_token).await,
        ] {
            assert_eq!(r.status, 401, "{why}: {}", r.text);
            assert_eq!(r.error(), "unauthorized", "{why}");
        }
    }
    // Every refusal left the genuine token working.
    assert_eq!(bearer(&app, &token).await.status, 200);

    // Expiry: valid for 900 s, not one more.
    let fresh = app.token(&admin).await;
    app.clock.advance(Duration::seconds(899));
    assert_eq!(bearer(&app, &fresh).await.status, 200);
    app.clock.advance(Duration::seconds(1));
    let r = bearer(&app, &fresh).await;
    r.assert_error(401, "unauthorized");
    assert!(r.message().contains("expired"), "{}", r.text);
    refresh(&app, &fresh)
        .await
        .assert_error(401, "unauthorized");
    // A refresh before expiry gives a new 15 minutes.
    let fresh = app.token(&admin).await;
    app.clock.advance(Duration::seconds(600));
    let r = refresh(&app, &fresh).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["expires_in"], 900);
    let renewed = r.json()["token"].as_str().unwrap().to_string();
    app.clock.advance(Duration::seconds(600));
    bearer(&app, &fresh).await.assert_error(401, "unauthorized");
    assert_eq!(bearer(&app, &renewed).await.status, 200);

    // Not yet valid: issued with the clock an hour ahead, then the clock set back.
    app.clock.advance(Duration::hours(1));
    let ahead = app.token(&admin).await;
    app.clock.advance(Duration::hours(-1));
    let r = bearer(&app, &ahead).await;
    r.assert_error(401, "unauthorized");
    assert!(r.message().contains("not yet valid"), "{}", r.text);
    app.clock.advance(Duration::hours(1));
    assert_eq!(bearer(&app, &ahead).await.status, 200);

    // A token of a key revoked since: refused at once, as is its refresh.
    let (analyst_id, analyst) = issue(&app, &admin, json!({ "role": "analyst" })).await;
    let analyst_token = app.token(&analyst).await;
    assert_eq!(bearer(&app, &analyst_token).await.status, 200);
    let r = app
        .call(
            Method::DELETE,
            &format!("{KEYS}/{analyst_id}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    bearer(&app, &analyst_token)
        .await
        .assert_error(401, "unauthorized");
    refresh(&app, &analyst_token)
        .await
        .assert_error(401, "unauthorized");

    // A token of an account suspended since: key and token refused until unsuspended.
    let admin_token = app.token(&admin).await;
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/accounts/acme/suspend",
            &staff,
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json(), json!({ "team_id": "acme", "suspended": true }));
    app.get_with(STATS, &admin)
        .await
        .assert_error(401, "unauthorized");
    bearer(&app, &admin_token)
        .await
        .assert_error(401, "unauthorized");
    refresh(&app, &admin_token)
        .await
        .assert_error(401, "unauthorized");
    app.call(Method::POST, TOKEN, Some(&admin), None)
        .await
        .assert_error(401, "unauthorized");
    assert_eq!(app.get_with(STATS, &staff).await.status, 200);
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/accounts/acme/unsuspend",
            &staff,
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["suspended"], false);
    assert_eq!(app.get_with(STATS, &admin).await.status, 200);
    assert_eq!(bearer(&app, &admin_token).await.status, 200);
    // The platform tenant itself cannot be suspended.
    app.send(
        Method::POST,
        "/api/v1/admin/accounts/platform/suspend",
        &staff,
        None,
    )
    .await
    .assert_error(403, "forbidden");
}

// ---------------------------------------------------------------------------------------
// Grants
// ---------------------------------------------------------------------------------------

async fn grants_expire_with_the_clock(app: TestApp) {
    let (admin_id, admin) = app
        .tenant(
            "acme",
            TenantKind::Customer,
            Role::AccountAdmin,
            Tier::Teams,
        )
        .await;
    let (analyst_id, analyst) = issue(&app, &admin, json!({ "role": "analyst" })).await;
    let route = auditor_only_route();
    if route.is_none() {
        eprintln!(
            "grants_expire_with_the_clock: no auditor-only route in ROUTES yet; \
             checking the key list and the token's roles only"
        );
    }
    let reaches = |key: String| {
        let app = &app;
        async move {
            match route {
                Some(r) => Some(app.get_with(&r.path, &key).await.status != 403),
                None => None,
            }
        }
    };
    let token_roles = |key: String| {
        let app = &app;
        async move { role_names(&jwt_parts(&app.token(&key).await).1["roles"]) }
    };

    assert_eq!(
        role_names(&listed(&app, &admin, &analyst_id).await["roles"]),
        ["analyst"]
    );
    assert_eq!(token_roles(analyst.clone()).await, ["analyst"]);
    assert_ne!(reaches(analyst.clone()).await, Some(true));
    let token_before = app.token(&analyst).await;

    let now = app.clock.now();
    let until = now + Duration::hours(1);
    let grant = format!("{KEYS}/{analyst_id}/roles");
    let r = app
        .send(
            Method::POST,
            &grant,
            &admin,
            Some(json!({ "role": "auditor", "expires_at": ts(until) })),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let key = r.json();
    assert_eq!(role_names(&key["roles"]), ["analyst", "auditor"]);
    assert_eq!(key["role"], "analyst");
    assert_eq!(key["grants"][0]["role"], "auditor");
    assert_eq!(key["grants"][0]["active"], true);
    assert_eq!(key["grants"][0]["granted_by"], admin_id.as_str());
    assert_eq!(parse_ts(&key["grants"][0]["expires_at"]), until);

    assert_eq!(token_roles(analyst.clone()).await, ["analyst", "auditor"]);
    assert_ne!(reaches(analyst.clone()).await, Some(false));
    // A token issued before the grant is authorized by the key's roles as they are now.
    if let Some(r) = route {
        let status = app
            .call_bearer(Method::GET, &r.path, &token_before, None)
            .await
            .status;
        assert_ne!(status, 403);
    }
    let r = refresh(&app, &token_before).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let refreshed = r.json()["token"].as_str().unwrap().to_string();
    assert_eq!(
        role_names(&jwt_parts(&refreshed).1["roles"]),
        ["analyst", "auditor"]
    );

    // One second before expiry the grant holds; at expiry it is gone, with no cleanup.
    app.clock.advance(Duration::hours(1) - Duration::seconds(1));
    assert_eq!(
        role_names(&listed(&app, &admin, &analyst_id).await["roles"]),
        ["analyst", "auditor"]
    );
    assert_ne!(reaches(analyst.clone()).await, Some(false));
    let late = app.token(&analyst).await;
    assert_eq!(
        role_names(&jwt_parts(&late).1["roles"]),
        ["analyst", "auditor"]
    );
    app.clock.advance(Duration::seconds(1));
    let listed_now = listed(&app, &admin, &analyst_id).await;
    assert_eq!(role_names(&listed_now["roles"]), ["analyst"]);
    assert_eq!(listed_now["grants"][0]["role"], "auditor");
    assert_eq!(listed_now["grants"][0]["active"], false);
    assert_eq!(token_roles(analyst.clone()).await, ["analyst"]);
    assert_ne!(reaches(analyst.clone()).await, Some(true));
    if let Some(r) = route {
        let status = app
            .call_bearer(Method::GET, &r.path, &late, None)
            .await
            .status;
        assert_eq!(status, 403, "a token's old roles claim grants nothing");
    }

    // The window: in the future and at most 30 days ahead.
    let now = app.clock.now();
    for (at, ok) in [
        (now + Duration::days(30) + Duration::seconds(1), false),
        (now + Duration::days(31), false),
        (now + Duration::days(365), false),
        (now - Duration::seconds(1), false),
        (now, false),
        (now - Duration::days(2), false),
        (now + Duration::days(30), true),
        (now + Duration::seconds(1), true),
    ] {
        let r = app
            .send(
                Method::POST,
                &grant,
                &admin,
                Some(json!({ "role": "auditor", "expires_at": ts(at) })),
            )
            .await;
        if ok {
            assert_eq!(r.status, 200, "{}: {}", ts(at), r.text);
        } else {
            r.assert_error(400, "bad request");
            assert!(r.message().contains("expires_at"), "{}", r.text);
        }
    }
    // Without an expiry the grant is permanent.
    let r = app
        .send(
            Method::POST,
            &grant,
            &admin,
            Some(json!({ "role": "auditor" })),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    app.clock.advance(Duration::days(400));
    let listed_now = listed(&app, &admin, &analyst_id).await;
    assert_eq!(role_names(&listed_now["roles"]), ["analyst", "auditor"]);
    assert_eq!(listed_now["grants"][0]["expires_at"], Value::Null);
    // Revoking the grant takes it away at once.
    let r = app
        .call(
            Method::DELETE,
            &format!("{grant}/auditor"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    assert_eq!(token_roles(analyst.clone()).await, ["analyst"]);
}

// ---------------------------------------------------------------------------------------
// Rank rules and the audit log
// ---------------------------------------------------------------------------------------

/// One administrative request of the rank-rules script: who sends it, what it must answer,
/// and the audit entry it must leave. `{name}` in a path or target is the key_id of a key
/// named in [`rank_rules_and_the_audit_log`] or saved by an earlier step.
#[derive(Default)]
struct Step {
    /// The actor's key, by name.
    by: &'static str,
    req: (Method, &'static str),
    body: Option<Value>,
    /// The status, and the audit outcome: `ok` or `denied: <the answer's error code>`.
    expect: (u16, &'static str),
    /// The audit entry's action and target.
    audit: (&'static str, &'static str),
    /// Words the answer's message contains.
    says: Option<&'static str>,
    /// Names the key this step issues, for later steps.
    saves: Option<&'static str>,
}

fn role(role: &str) -> Option<Value> {
    Some(json!({ "role": role }))
}

/// The script, in order. Its denials and grants follow the rank rules: account admins act
/// only in their account and below their rank, platform roles come from the owner only and
/// never to a customer, and nobody alters the owner's key but the owner's label.
// One step a line, as a table.
#[rustfmt::skip]
fn rank_steps() -> Vec<Step> {
    use Method as M;
    const FORBIDDEN: &str = "denied: forbidden";
    const NOT_FOUND: &str = "denied: not found";
    const BAD: &str = "denied: bad request";
    vec![
        // Staff set-up, allowed.
        Step { by: "owner", req: (M::POST, KEYS), body: role("platform_admin"), expect: (201, "ok"), audit: ("key.issue", "platform"), saves: Some("pa"), ..Step::default() },
        Step { by: "owner", req: (M::POST, KEYS), body: role("platform_admin"), expect: (201, "ok"), audit: ("key.issue", "platform"), saves: Some("pa2"), ..Step::default() },
        Step { by: "owner", req: (M::POST, KEYS), body: role("analyst"), expect: (201, "ok"), audit: ("key.issue", "platform"), saves: Some("staff_analyst"), ..Step::default() },
        Step { by: "acme", req: (M::POST, KEYS), body: role("analyst"), expect: (201, "ok"), audit: ("key.issue", "acme"), saves: Some("an"), ..Step::default() },
        // account_admin: no account_admin, no platform role, nothing outside its account.
        Step { by: "acme", req: (M::POST, KEYS), body: role("account_admin"), expect: (403, FORBIDDEN), audit: ("key.issue", "acme"), says: Some("staff"), ..Step::default() },
        Step { by: "acme", req: (M::POST, "{keys}/{an}/roles"), body: role("account_admin"), expect: (403, FORBIDDEN), audit: ("role.grant:account_admin", "{an}"), ..Step::default() },
        Step { by: "acme", req: (M::POST, "{keys}/{an}/roles"), body: role("client_liaison"), expect: (403, FORBIDDEN), audit: ("role.grant:client_liaison", "{an}"), ..Step::default() },
        Step { by: "acme", req: (M::POST, "{keys}/{an}/roles"), body: role("platform_admin"), expect: (403, FORBIDDEN), audit: ("role.grant:platform_admin", "{an}"), ..Step::default() },
        Step { by: "acme", req: (M::POST, "{keys}/{an}/roles"), body: role("platform_owner"), expect: (403, FORBIDDEN), audit: ("role.grant:platform_owner", "{an}"), ..Step::default() },
        Step { by: "acme", req: (M::POST, "{keys}/{an}/roles"), body: role("auditor"), expect: (200, "ok"), audit: ("role.grant:auditor", "{an}"), ..Step::default() },
        Step { by: "acme", req: (M::PATCH, "{keys}/{globex}"), body: Some(json!({"label": "mine"})), expect: (404, NOT_FOUND), audit: ("key.update", "{globex}"), ..Step::default() },
        Step { by: "acme", req: (M::DELETE, "{keys}/{globex}"), expect: (404, NOT_FOUND), audit: ("key.revoke", "{globex}"), ..Step::default() },
        Step { by: "acme", req: (M::POST, "{keys}/{globex}/reissue"), expect: (404, NOT_FOUND), audit: ("key.reissue", "{globex}"), ..Step::default() },
        Step { by: "acme", req: (M::POST, "{keys}/{globex}/roles"), body: role("analyst"), expect: (404, NOT_FOUND), audit: ("role.grant:analyst", "{globex}"), ..Step::default() },
        Step { by: "acme", req: (M::DELETE, "{keys}/{globex}/roles/analyst"), expect: (404, NOT_FOUND), audit: ("role.revoke:analyst", "{globex}"), ..Step::default() },
        Step { by: "acme", req: (M::POST, KEYS), body: Some(json!({"role": "analyst", "team_id": "globex"})), expect: (404, NOT_FOUND), audit: ("key.issue", "globex"), ..Step::default() },
        Step { by: "acme", req: (M::DELETE, "{keys}/{owner}"), expect: (404, NOT_FOUND), audit: ("key.revoke", "{owner}"), ..Step::default() },
        // Platform roles come from the owner only, and never to a customer account.
        Step { by: "pa", req: (M::POST, "{keys}/{staff_analyst}/roles"), body: role("client_liaison"), expect: (403, FORBIDDEN), audit: ("role.grant:client_liaison", "{staff_analyst}"), says: Some("owner"), ..Step::default() },
        Step { by: "pa", req: (M::POST, KEYS), body: role("client_liaison"), expect: (403, FORBIDDEN), audit: ("key.issue", "platform"), ..Step::default() },
        Step { by: "owner", req: (M::POST, "{keys}/{an}/roles"), body: role("client_liaison"), expect: (403, FORBIDDEN), audit: ("role.grant:client_liaison", "{an}"), says: Some("customer"), ..Step::default() },
        Step { by: "owner", req: (M::POST, KEYS), body: Some(json!({"role": "platform_admin", "team_id": "acme"})), expect: (403, FORBIDDEN), audit: ("key.issue", "acme"), ..Step::default() },
        Step { by: "owner", req: (M::POST, "{keys}/{staff_analyst}/roles"), body: role("client_liaison"), expect: (200, "ok"), audit: ("role.grant:client_liaison", "{staff_analyst}"), ..Step::default() },
        // Staff may give account_admin to a customer.
        Step { by: "pa", req: (M::POST, KEYS), body: Some(json!({"role": "account_admin", "team_id": "acme"})), expect: (201, "ok"), audit: ("key.issue", "acme"), saves: Some("acme_peer"), ..Step::default() },
        // A peer account admin's key is its holder's: revoking, demoting, relabelling or
        // granting to it would let a peer take it over (then reissue it), so only staff may.
        Step { by: "acme", req: (M::DELETE, "{keys}/{acme_peer}"), expect: (403, FORBIDDEN), audit: ("key.revoke", "{acme_peer}"), says: Some("only its holder or a higher rank"), ..Step::default() },
        Step { by: "acme", req: (M::PATCH, "{keys}/{acme_peer}"), body: role("analyst"), expect: (403, FORBIDDEN), audit: ("key.update", "{acme_peer}"), ..Step::default() },
        Step { by: "acme", req: (M::PATCH, "{keys}/{acme_peer}"), body: Some(json!({"label": "mine now"})), expect: (403, FORBIDDEN), audit: ("key.update", "{acme_peer}"), ..Step::default() },
        Step { by: "acme", req: (M::POST, "{keys}/{acme_peer}/roles"), body: role("auditor"), expect: (403, FORBIDDEN), audit: ("role.grant:auditor", "{acme_peer}"), ..Step::default() },
        Step { by: "acme", req: (M::POST, "{keys}/{acme_peer}/reissue"), expect: (403, FORBIDDEN), audit: ("key.reissue", "{acme_peer}"), ..Step::default() },
        Step { by: "pa", req: (M::PATCH, "{keys}/{acme_peer}"), body: Some(json!({"label": "second admin"})), expect: (200, "ok"), audit: ("key.update", "{acme_peer}"), ..Step::default() },
        // Nobody revokes, demotes or alters the owner's key; not even the owner.
        Step { by: "pa", req: (M::DELETE, "{keys}/{owner}"), expect: (403, FORBIDDEN), audit: ("key.revoke", "{owner}"), ..Step::default() },
        Step { by: "pa", req: (M::PATCH, "{keys}/{owner}"), body: role("analyst"), expect: (403, FORBIDDEN), audit: ("key.update", "{owner}"), ..Step::default() },
        Step { by: "pa", req: (M::PATCH, "{keys}/{owner}"), body: Some(json!({"label": "mine now"})), expect: (403, FORBIDDEN), audit: ("key.update", "{owner}"), ..Step::default() },
        Step { by: "pa", req: (M::POST, "{keys}/{owner}/reissue"), expect: (403, FORBIDDEN), audit: ("key.reissue", "{owner}"), ..Step::default() },
        Step { by: "pa", req: (M::DELETE, "{keys}/{owner}/roles/platform_owner"), expect: (403, FORBIDDEN), audit: ("role.revoke:platform_owner", "{owner}"), ..Step::default() },
        Step { by: "owner", req: (M::DELETE, "{keys}/{owner}"), expect: (403, FORBIDDEN), audit: ("key.revoke", "{owner}"), ..Step::default() },
        Step { by: "owner", req: (M::PATCH, "{keys}/{owner}"), body: role("platform_admin"), expect: (403, FORBIDDEN), audit: ("key.update", "{owner}"), says: Some("demoted"), ..Step::default() },
        Step { by: "owner", req: (M::PATCH, "{keys}/{owner}"), body: Some(json!({"label": "the owner"})), expect: (200, "ok"), audit: ("key.update", "{owner}"), ..Step::default() },
        // A platform admin does not manage other platform admins; the owner does.
        Step { by: "pa", req: (M::DELETE, "{keys}/{pa2}"), expect: (403, FORBIDDEN), audit: ("key.revoke", "{pa2}"), ..Step::default() },
        Step { by: "owner", req: (M::DELETE, "{keys}/{pa2}"), expect: (204, "ok"), audit: ("key.revoke", "{pa2}"), ..Step::default() },
        // Removed roles, wherever a role is named.
        Step { by: "acme", req: (M::POST, KEYS), body: role("responder"), expect: (400, BAD), audit: ("key.issue", "acme"), says: Some("removed"), ..Step::default() },
        Step { by: "acme", req: (M::POST, "{keys}/{an}/roles"), body: role("responder"), expect: (400, BAD), audit: ("role.grant:responder", "{an}"), says: Some("removed"), ..Step::default() },
        Step { by: "acme", req: (M::DELETE, "{keys}/{an}/roles/responder"), expect: (400, BAD), audit: ("role.revoke:responder", "{an}"), says: Some("removed"), ..Step::default() },
        Step { by: "acme", req: (M::PATCH, "{keys}/{an}"), body: role("senior responder"), expect: (400, BAD), audit: ("key.update", "{an}"), says: Some("removed"), ..Step::default() },
        // Allowed actions are logged as well.
        Step { by: "acme", req: (M::DELETE, "{keys}/{an}/roles/auditor"), expect: (204, "ok"), audit: ("role.revoke:auditor", "{an}"), ..Step::default() },
        Step { by: "pa", req: (M::POST, "/api/v1/admin/accounts/globex/suspend"), expect: (200, "ok"), audit: ("account.suspend", "globex"), ..Step::default() },
        Step { by: "pa", req: (M::POST, "/api/v1/admin/accounts/globex/unsuspend"), expect: (200, "ok"), audit: ("account.unsuspend", "globex"), ..Step::default() },
    ]
}

/// Plays `steps`; every key by name (`name -> (key_id, key)`) grows with the keys they
/// issue. Returns the audit entries (actor, action, target, outcome) they must have left.
async fn play(
    app: &TestApp,
    keys: &mut BTreeMap<&'static str, (String, String)>,
    steps: Vec<Step>,
) -> Vec<(String, String, String, String)> {
    let fill = |keys: &BTreeMap<&'static str, (String, String)>, text: &str| {
        let mut text = text.replace("{keys}", KEYS);
        for (name, (key_id, _)) in keys {
            text = text.replace(&format!("{{{name}}}"), key_id);
        }
        assert!(!text.contains('{'), "unknown name in {text}");
        text
    };
    let mut entries = Vec::new();
    for step in steps {
        let (actor_id, actor) = keys[step.by].clone();
        let (method, path) = (step.req.0, fill(keys, step.req.1));
        let r = app.send(method.clone(), &path, &actor, step.body).await;
        let (status, outcome) = step.expect;
        assert_eq!(
            r.status, status,
            "{method} {path} by {}: {}",
            step.by, r.text
        );
        match outcome.strip_prefix("denied: ") {
            Some(code) => assert_eq!(r.error(), code, "{method} {path}: {}", r.text),
            None => assert!((200..300).contains(&r.status), "{outcome} for {}", r.status),
        }
        if let Some(words) = step.says {
            assert!(r.message().contains(words), "{method} {path}: {}", r.text);
        }
        if let Some(name) = step.saves {
            let issued = r.json();
            let key_id = issued["key_id"].as_str().unwrap().to_string();
            let key = issued["key"].as_str().unwrap().to_string();
            keys.insert(name, (key_id, key));
        }
        let (action, target) = step.audit;
        entries.push((
            actor_id,
            action.to_string(),
            fill(keys, target),
            outcome.to_string(),
        ));
    }
    entries
}

async fn rank_rules_and_the_audit_log(app: TestApp) {
    let (owner_id, owner) = app
        .tenant(
            "platform",
            TenantKind::Platform,
            Role::PlatformOwner,
            Tier::Enterprise,
        )
        .await;
    let (acme_id, acme) = app
        .tenant(
            "acme",
            TenantKind::Customer,
            Role::AccountAdmin,
            Tier::Teams,
        )
        .await;
    let globex = app
        .tenant("globex", TenantKind::Customer, Role::Analyst, Tier::Teams)
        .await;
    let mut keys = BTreeMap::from([
        ("owner", (owner_id.clone(), owner.clone())),
        ("acme", (acme_id.clone(), acme.clone())),
        ("globex", globex),
    ]);
    let entries = play(&app, &mut keys, rank_steps()).await;
    use Method as M;
    // Listing another account's keys is refused the same way (reads are not audited).
    app.get_with(&format!("{KEYS}?team_id=globex"), &acme)
        .await
        .assert_error(404, "not found");

    // The log holds exactly these entries, newest first.
    let read = |key: String, query: &'static str| {
        let app = &app;
        async move {
            let r = app.get_with(&format!("{AUDIT}{query}"), &key).await;
            assert_eq!(r.status, 200, "{}", r.text);
            r.json()
        }
    };
    let page = read(owner.clone(), "?limit=200").await;
    let team_of = |actor: &str| {
        if actor == acme_id { "acme" } else { "platform" }
    };
    let got: Vec<(String, String, String, String)> = page["results"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|e| {
            assert_eq!(e["team_id"], team_of(e["actor"].as_str().unwrap()), "{e}");
            let outcome = e["outcome"].as_str().unwrap();
            assert_eq!(
                e["detail"].as_str().unwrap().is_empty(),
                outcome == "ok",
                "a refusal says why: {e}"
            );
            (
                e["actor"].as_str().unwrap().to_string(),
                e["action"].as_str().unwrap().to_string(),
                e["target"].as_str().unwrap().to_string(),
                outcome.to_string(),
            )
        })
        .collect();
    assert!(page["next_cursor"].is_null(), "one page holds them all");
    assert_eq!(got, entries);
    let denied = got.iter().filter(|e| e.3.starts_with("denied: ")).count();
    assert!(denied >= 25, "{denied}");
    // Filtered by the actor's account.
    let acme_page = read(owner.clone(), "?team_id=acme&limit=200").await;
    let acme_count = entries.iter().filter(|e| e.0 == acme_id).count();
    assert_eq!(acme_page["results"].as_array().unwrap().len(), acme_count);
    // Customers and platform admins without platform:settings... a customer cannot read it.
    app.get_with(AUDIT, &acme)
        .await
        .assert_error(403, "forbidden");

    // No route changes the log.
    for method in [M::POST, M::PUT, M::PATCH, M::DELETE] {
        let r = app
            .send(method.clone(), AUDIT, &owner, Some(json!({})))
            .await;
        assert_eq!(r.status, 405, "{method} {AUDIT}: {}", r.text);
    }
    for method in [M::DELETE, M::PATCH, M::PUT] {
        let r = app
            .send(
                method.clone(),
                &format!("{AUDIT}/1"),
                &owner,
                Some(json!({})),
            )
            .await;
        r.assert_error(404, "not found");
    }
    // Nor does the database let anyone rewrite it behind the API's back.
    for sql in [
        "UPDATE audit_log SET outcome = 'ok'",
        "UPDATE audit_log SET detail = '' WHERE outcome <> 'ok'",
        "DELETE FROM audit_log",
        "DELETE FROM audit_log WHERE outcome <> 'ok'",
    ] {
        let err = app
            .try_exec(sql, &[])
            .await
            .expect_err(&format!("the database accepted {sql:?}"));
        assert!(err.contains("append-only"), "{sql}: {err}");
    }
    if app.backend == testkit::Backend::Postgres {
        let err = app
            .try_exec("TRUNCATE audit_log", &[])
            .await
            .expect_err("the database accepted TRUNCATE");
        assert!(err.contains("append-only"), "TRUNCATE: {err}");
    }
    let again = read(owner.clone(), "?limit=200").await;
    assert_eq!(again["results"], page["results"]);
}

// ---------------------------------------------------------------------------------------
// Revocation
// ---------------------------------------------------------------------------------------

async fn revocation_is_immediate_and_reissue_replaces(app: TestApp) {
    let (_, admin) = app
        .tenant(
            "acme",
            TenantKind::Customer,
            Role::AccountAdmin,
            Tier::Teams,
        )
        .await;
    let (k1_id, k1) = issue(&app, &admin, json!({ "role": "analyst" })).await;
    let r = app
        .send(
            Method::POST,
            &format!("{KEYS}/{k1_id}/roles"),
            &admin,
            Some(json!({ "role": "auditor" })),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let t1 = app.token(&k1).await;
    assert_eq!(app.get_with(STATS, &k1).await.status, 200);
    assert_eq!(bearer(&app, &t1).await.status, 200);
    let r = app
        .call(
            Method::DELETE,
            &format!("{KEYS}/{k1_id}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    // The very next request is refused, whichever credential it carries.
    let r = app.get_with(STATS, &k1).await;
    r.assert_error(401, "unauthorized");
    assert!(r.message().contains("revoked"), "{}", r.text);
    bearer(&app, &t1).await.assert_error(401, "unauthorized");
    app.call(Method::POST, TOKEN, Some(&k1), None)
        .await
        .assert_error(401, "unauthorized");
    app.call(
        Method::DELETE,
        &format!("{KEYS}/{k1_id}"),
        Some(&admin),
        None,
    )
    .await
    .assert_error(404, "not found");
    assert!(listed(&app, &admin, &k1_id).await["revoked_at"].is_string());

    // Reissue: the old key and its tokens die, the new key has the same role and grants.
    let (k2_id, k2) = issue(&app, &admin, json!({ "role": "analyst", "label": "siem" })).await;
    let until = app.clock.now() + Duration::days(2);
    let r = app
        .send(
            Method::POST,
            &format!("{KEYS}/{k2_id}/roles"),
            &admin,
            Some(json!({ "role": "auditor", "expires_at": ts(until) })),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let t2 = app.token(&k2).await;
    assert_eq!(app.get_with(STATS, &k2).await.status, 200);
    let r = app
        .send(
            Method::POST,
            &format!("{KEYS}/{k2_id}/reissue"),
            &admin,
            None,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let new = r.json();
    let k3 = new["key"].as_str().unwrap().to_string();
    let k3_id = new["key_id"].as_str().unwrap().to_string();
    assert_ne!(k3_id, k2_id);
    assert_ne!(k3, k2);
    assert_eq!(new["role"], "analyst");
    assert_eq!(new["label"], "siem");
    assert_eq!(new["team_id"], "acme");
    app.get_with(STATS, &k2)
        .await
        .assert_error(401, "unauthorized");
    bearer(&app, &t2).await.assert_error(401, "unauthorized");
    assert_eq!(app.get_with(STATS, &k3).await.status, 200);
    let t3 = app.token(&k3).await;
    assert_eq!(bearer(&app, &t3).await.status, 200);
    assert_eq!(
        role_names(&jwt_parts(&t3).1["roles"]),
        ["analyst", "auditor"]
    );
    let listed_new = listed(&app, &admin, &k3_id).await;
    assert_eq!(listed_new["role"], "analyst");
    assert_eq!(role_names(&listed_new["roles"]), ["analyst", "auditor"]);
    assert_eq!(listed_new["grants"][0]["role"], "auditor");
    assert_eq!(parse_ts(&listed_new["grants"][0]["expires_at"]), until);
    assert_eq!(listed_new["revoked_at"], Value::Null);
    let listed_old = listed(&app, &admin, &k2_id).await;
    assert!(listed_old["revoked_at"].is_string());
    assert_eq!(listed_old["grants"], json!([]));
    if let Some(route) = auditor_only_route() {
        assert_ne!(app.get_with(&route.path, &k3).await.status, 403);
    }
}

/// Reissuing hands the caller the new secret and locks the holder out: an account admin may
/// reissue its own key and lower-ranked keys, not a peer's; staff may reissue any customer
/// key.
async fn reissue_only_own_key_or_lower_rank(app: TestApp) {
    let (_, owner) = app
        .tenant(
            "platform",
            TenantKind::Platform,
            Role::PlatformOwner,
            Tier::Enterprise,
        )
        .await;
    let (a1_id, a1) = app
        .tenant(
            "acme",
            TenantKind::Customer,
            Role::AccountAdmin,
            Tier::Teams,
        )
        .await;
    let (_, staff) = issue(&app, &owner, json!({ "role": "platform_admin" })).await;
    let (a2_id, a2) = issue(
        &app,
        &staff,
        json!({ "role": "account_admin", "team_id": "acme" }),
    )
    .await;
    let (an_id, _) = issue(&app, &a1, json!({ "role": "analyst" })).await;
    let reissue = |key_id: &str| format!("{KEYS}/{key_id}/reissue");

    // A peer account admin's key: refused, audited, and the peer keeps working.
    let r = app.send(Method::POST, &reissue(&a2_id), &a1, None).await;
    r.assert_error(403, "forbidden");
    assert!(r.message().contains("account_admin"), "{}", r.text);
    assert_eq!(app.get_with(STATS, &a2).await.status, 200);
    assert!(listed(&app, &a1, &a2_id).await["revoked_at"].is_null());
    let log = app
        .get_with(&format!("{AUDIT}?team_id=acme&limit=200"), &owner)
        .await;
    assert_eq!(log.status, 200, "{}", log.text);
    let denied = log.json()["results"]
        .as_array()
        .expect("results")
        .iter()
        .any(|e| {
            e["actor"] == a1_id.as_str()
                && e["action"] == "key.reissue"
                && e["target"] == a2_id.as_str()
                && e["outcome"] == "denied: forbidden"
        });
    assert!(denied, "no denied reissue in {}", log.text);

    // A lower-ranked key, then the caller's own.
    let r = app.send(Method::POST, &reissue(&an_id), &a1, None).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = app.send(Method::POST, &reissue(&a1_id), &a1, None).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let a1_new = r.json()["key"].as_str().expect("key").to_string();
    assert_eq!(r.json()["role"], "account_admin");
    app.get_with(STATS, &a1)
        .await
        .assert_error(401, "unauthorized");
    assert_eq!(app.get_with(STATS, &a1_new).await.status, 200);

    // Staff reissue any customer key, account admins included.
    let r = app.send(Method::POST, &reissue(&a2_id), &staff, None).await;
    assert_eq!(r.status, 201, "{}", r.text);
    app.get_with(STATS, &a2)
        .await
        .assert_error(401, "unauthorized");
    let a2_new = r.json()["key"].as_str().expect("key").to_string();
    assert_eq!(app.get_with(STATS, &a2_new).await.status, 200);
}

/// Waits until `key` is refused by `app`, polling; returns how long that took.
async fn until_refused(app: &TestApp, key: &str) -> StdDuration {
    let start = Instant::now();
    loop {
        let r = app.get_with(STATS, key).await;
        if r.status == 401 {
            return start.elapsed();
        }
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(
            start.elapsed() < StdDuration::from_secs(5),
            "the other replica still accepts the key after 5 s"
        );
        tokio::time::sleep(StdDuration::from_millis(20)).await;
    }
}

/// Two servers over one database: a revocation or suspension made through A is enforced
/// by B within about a second (B's `maintain` polls the auth epoch every 0.5 s).
async fn revocation_reaches_other_replicas(app: TestApp) {
    let (_, admin) = app
        .tenant(
            "acme",
            TenantKind::Customer,
            Role::AccountAdmin,
            Tier::Teams,
        )
        .await;
    let (_, staff) = app
        .tenant(
            "platform",
            TenantKind::Platform,
            Role::PlatformAdmin,
            Tier::Enterprise,
        )
        .await;
    let (key_id, key) = issue(&app, &admin, json!({ "role": "analyst" })).await;
    let b = app.replica().await;
    let upkeep = b.spawn_maintain();
    tokio::time::sleep(StdDuration::from_millis(100)).await;
    let token = app.token(&key).await;
    // B knows (and caches) the key and the admin's.
    assert_eq!(b.get_with(STATS, &key).await.status, 200);
    assert_eq!(bearer(&b, &token).await.status, 200);
    assert_eq!(b.get_with(STATS, &admin).await.status, 200);

    let r = app
        .call(
            Method::DELETE,
            &format!("{KEYS}/{key_id}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    app.get_with(STATS, &key)
        .await
        .assert_error(401, "unauthorized");
    let took = until_refused(&b, &key).await;
    eprintln!("replica B refused the revoked key after {took:?}");
    assert!(took <= StdDuration::from_millis(1500), "{took:?}");
    bearer(&b, &token).await.assert_error(401, "unauthorized");

    // Suspension travels the same way.
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/accounts/acme/suspend",
            &staff,
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let took = until_refused(&b, &admin).await;
    eprintln!("replica B refused the suspended account after {took:?}");
    assert!(took <= StdDuration::from_millis(1500), "{took:?}");

    upkeep.stop().await;
    b.store.close().await;
}

// ---------------------------------------------------------------------------------------
// Per-minute limits
// ---------------------------------------------------------------------------------------

fn retry_after(r: &Resp) -> u64 {
    r.headers
        .get(reqwest::header::RETRY_AFTER)
        .unwrap_or_else(|| panic!("no Retry-After: {}", r.text))
        .to_str()
        .unwrap()
        .parse()
        .expect("integer Retry-After")
}

#[track_caller]
fn assert_rate_limited(r: &Resp, retry: u64) {
    assert_eq!(r.status, 429, "{}", r.text);
    assert_eq!(r.json(), json!({ "error": "rate limit exceeded" }));
    assert_eq!(retry_after(r), retry, "Retry-After");
}

/// The documented limits with the in-process limiter (the clock is frozen, so buckets refill only
/// when the test moves it).
async fn per_minute_limits_in_process(app: TestApp) {
    // Public feed: 100 per minute per client address.
    for i in 0..100 {
        let r = app.get("/public/hash-of-day").await;
        assert_eq!(r.status, 200, "request {}: {}", i + 1, r.text);
    }
    assert_rate_limited(&app.get("/public/hash-of-day").await, 1);
    // Other public routes count separately; so does another client behind the proxy.
    assert_eq!(app.get("/public/status").await.status, 200);
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let via_proxy = client
        .get(format!("{}/public/hash-of-day", app.base))
        .header("X-Forwarded-For", "203.0.113.7")
        .send()
        .await
        .unwrap();
    assert_eq!(via_proxy.status(), 200);
    // Credit returns at one request per 600 ms.
    app.clock.advance(Duration::milliseconds(600));
    assert_eq!(app.get("/public/hash-of-day").await.status, 200);
    assert_rate_limited(&app.get("/public/hash-of-day").await, 1);

    // Token exchange: 10 per minute per key.
    let (_, a) = app
        .tenant(
            "limits",
            TenantKind::Customer,
            Role::AccountAdmin,
            Tier::Teams,
        )
        .await;
    for i in 0..10 {
        let r = app.call(Method::POST, TOKEN, Some(&a), None).await;
        assert_eq!(r.status, 200, "token {}: {}", i + 1, r.text);
    }
    assert_rate_limited(&app.call(Method::POST, TOKEN, Some(&a), None).await, 6);
    // The key's other requests have their own budget; another key of the account too.
    assert_eq!(app.get_with(STATS, &a).await.status, 200);
    let (_, b) = issue(&app, &a, json!({ "role": "analyst" })).await;
    assert_eq!(
        app.call(Method::POST, TOKEN, Some(&b), None).await.status,
        200
    );

    // Other authenticated routes: 60 per minute per key, its tokens included.
    let (_, c) = issue(&app, &a, json!({ "role": "analyst" })).await;
    let token = app.token(&c).await;
    for i in 0..60 {
        let r = if i % 2 == 0 {
            app.get_with(STATS, &c).await
        } else {
            bearer(&app, &token).await
        };
        assert_eq!(r.status, 200, "request {}: {}", i + 1, r.text);
    }
    assert_rate_limited(&app.get_with(STATS, &c).await, 1);
    assert_rate_limited(&bearer(&app, &token).await, 1);
    assert_rate_limited(&refresh(&app, &token).await, 1);
    assert_eq!(app.get_with(STATS, &b).await.status, 200);
    app.clock.advance(Duration::seconds(1));
    assert_eq!(bearer(&app, &token).await.status, 200);
    assert_rate_limited(&app.get_with(STATS, &c).await, 1);
}

// ---------------------------------------------------------------------------------------
// Shared limits through Redis, across two OS processes
// ---------------------------------------------------------------------------------------

const CHILD_ENV: &str = "KNOWNGOOD_ACCESS_TEST_CHILD";
const REDIS_ENV: &str = "KNOWNGOOD_TEST_REDIS_URL";

/// Not a test by itself: the server process `redis_limit_shared_by_two_processes` starts
/// twice by running this test binary again with this test selected and the server's
/// configuration in `KNOWNGOOD_ACCESS_TEST_CHILD`. Without that variable it does nothing.
#[tokio::test]
async fn redis_child_server() {
    let Ok(conf) = std::env::var(CHILD_ENV) else {
        return;
    };
    let conf: Value = serde_json::from_str(&conf).expect("child configuration");
    let store = store::open(
        conf["db"].as_str().unwrap(),
        RecordSigner::new(testkit::RECORD_SECRET),
    )
    .await
    .expect("child: open store");
    let limiter = Limiter::Redis(
        RedisLimiter::connect(conf["redis"].as_str().unwrap())
            .await
            .expect("child: Redis"),
    );
    let mut settings = testkit::test_settings();
    settings.limits.authenticated_per_key = conf["per_minute"].as_u64().unwrap() as u32;
    let state = testkit::app_state_with(
        store.clone(),
        auth::KeyHasher::new(testkit::KEY_SECRET),
        Arc::new(FixedClock::new(testkit::start_time())),
        limiter,
        settings,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().unwrap();
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "\nLISTENING {addr}").unwrap();
        out.flush().unwrap();
    }
    // Serve until the parent closes our standard input (or goes away).
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        let _ = tx.send(());
    });
    server::serve(listener, server::router(state), async {
        let _ = rx.await;
    })
    .await
    .expect("serve");
    store.close().await;
}

/// A server in another OS process; stopped (stdin closed, killed if need be) when dropped.
struct ChildServer {
    child: std::process::Child,
    base: String,
}

impl ChildServer {
    async fn start(conf: &Value) -> ChildServer {
        let exe = std::env::current_exe().expect("test binary");
        let mut child = std::process::Command::new(exe)
            .args([
                "access_control::redis_child_server",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, conf.to_string())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("spawn child server");
        let stdout = child.stdout.take().expect("child stdout");
        let found = tokio::time::timeout(
            StdDuration::from_secs(60),
            tokio::task::spawn_blocking(move || {
                let mut lines = BufReader::new(stdout).lines();
                let addr = lines.by_ref().map_while(Result::ok).find_map(|line| {
                    line.find("LISTENING ")
                        .map(|i| line[i + "LISTENING ".len()..].trim().to_string())
                });
                // Keep draining so the child never blocks on a full pipe.
                std::thread::spawn(move || for _ in lines {});
                addr
            }),
        )
        .await;
        let mut server = ChildServer {
            child,
            base: String::new(),
        };
        match found {
            Ok(Ok(Some(addr))) => server.base = format!("http://{addr}"),
            other => panic!("the child server did not start: {other:?}"),
        }
        server
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(StdDuration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two server processes share one Redis: N requests of a key split across both pass, the
/// next one is refused by either.
async fn redis_limit_shared_by_two_processes(app: TestApp) {
    let redis_url = std::env::var(REDIS_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    match tokio::time::timeout(StdDuration::from_secs(3), RedisLimiter::connect(&redis_url)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED redis_limit_shared_by_two_processes ({:?}): Redis at {redis_url} is unreachable: {e}; set {REDIS_ENV}",
                app.backend
            );
            return;
        }
        Err(_) => {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED redis_limit_shared_by_two_processes ({:?}): no answer from Redis at {redis_url}; set {REDIS_ENV}",
                app.backend
            );
            return;
        }
    }
    const N: u32 = 12;
    // A fresh key per run (random key id), so parallel and repeated runs use their own
    // Redis buckets.
    let team = format!("redis-{}", &store::new_id()[..12]);
    let (_, key) = app
        .tenant(&team, TenantKind::Customer, Role::Analyst, Tier::Basic)
        .await;
    let (_, other) = app
        .tenant(
            &format!("{team}-b"),
            TenantKind::Customer,
            Role::Analyst,
            Tier::Basic,
        )
        .await;
    let conf = json!({ "db": app.url, "redis": redis_url, "per_minute": N });
    let a = ChildServer::start(&conf).await;
    let b = ChildServer::start(&conf).await;
    assert_ne!(a.child.id(), b.child.id(), "two separate processes");
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let get = |base: String, key: String| {
        let client = client.clone();
        async move {
            let r = client
                .get(format!("{base}{STATS}"))
                .header("X-API-Key", key)
                .send()
                .await
                .expect("request");
            let status = r.status().as_u16();
            let retry = r
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .map(|v| v.to_str().unwrap().parse::<u64>().expect("integer"));
            (status, retry, r.text().await.unwrap())
        }
    };
    let started = Instant::now();
    for i in 0..N {
        let base = if i % 2 == 0 { &a.base } else { &b.base };
        let (status, _, text) = get(base.clone(), key.clone()).await;
        assert_eq!(status, 200, "request {} of {N}: {text}", i + 1);
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed < StdDuration::from_secs(u64::from(60 / N)),
        "the {N} requests took {elapsed:?}, long enough for the bucket to refill"
    );
    for base in [&a.base, &b.base] {
        let (status, retry, text) = get(base.clone(), key.clone()).await;
        assert_eq!(status, 429, "{text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["error"], "rate limit exceeded");
        let retry = retry.expect("Retry-After");
        assert!(
            (1..=60 / u64::from(N)).contains(&retry),
            "Retry-After {retry}"
        );
    }
    // Another key's bucket is its own.
    assert_eq!(get(a.base.clone(), other.clone()).await.0, 200);
    assert_eq!(get(b.base.clone(), other).await.0, 200);
    drop(a);
    drop(b);
}

// ---------------------------------------------------------------------------------------
// Quotas and usage
// ---------------------------------------------------------------------------------------

#[track_caller]
fn assert_quota_exceeded(r: &Resp, retry: u64) {
    assert_eq!(r.status, 429, "{}", r.text);
    assert_eq!(r.json(), json!({ "error": "QUOTA_EXCEEDED" }));
    assert_eq!(retry_after(r), retry, "Retry-After");
}

/// Basic accounts here get five requests a month; the sixth is refused until the next
/// UTC month, and Retry-After says how long that is.
async fn monthly_quota_exhaustion(app: TestApp) {
    let (_, basic) = app
        .tenant(
            "quota-basic",
            TenantKind::Customer,
            Role::Analyst,
            Tier::Basic,
        )
        .await;
    let (_, teams) = app
        .tenant(
            "quota-teams",
            TenantKind::Customer,
            Role::Analyst,
            Tier::Teams,
        )
        .await;
    let token = app.token(&basic).await; // 1
    for i in 0..2 {
        assert_eq!(app.get_with(STATS, &basic).await.status, 200, "{i}"); // 2, 3
        assert_eq!(bearer(&app, &token).await.status, 200, "{i}"); // 4, 5
    }
    // 2025-03-10T08:00:00Z to 2025-04-01T00:00:00Z.
    let to_april = (t("2025-04-01T00:00:00Z") - app.clock.now()).num_seconds() as u64;
    assert_eq!(to_april, 21 * 86_400 + 16 * 3_600);
    assert_quota_exceeded(&app.get_with(STATS, &basic).await, to_april);
    assert_quota_exceeded(&bearer(&app, &token).await, to_april);
    assert_quota_exceeded(
        &app.call(Method::POST, TOKEN, Some(&basic), None).await,
        to_april,
    );
    assert_quota_exceeded(&app.get_with(USAGE, &basic).await, to_april);
    // Other accounts are untouched.
    assert_eq!(app.get_with(STATS, &teams).await.status, 200);
    let r = app.get_with(USAGE, &teams).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["quota"], 500_000);
    // Retry-After counts down to the month's end; a new month starts afresh.
    app.clock.set(t("2025-03-31T23:59:30Z"));
    assert_quota_exceeded(&app.get_with(STATS, &basic).await, 30);
    app.clock.set(t("2025-04-01T00:00:00Z"));
    assert_eq!(app.get_with(STATS, &basic).await.status, 200);
    let r = app.get_with(USAGE, &basic).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let usage = r.json();
    assert_eq!(usage["month"], "2025-04");
    assert_eq!(usage["quota"], 5);
    assert_eq!(usage["total"], 2);
}

/// The `daily` series as a date -> count map, checking its shape: 30 consecutive days,
/// oldest first, ending today.
fn daily(usage: &Value, today: NaiveDate) -> BTreeMap<NaiveDate, u64> {
    let days = usage["daily"].as_array().expect("daily");
    assert_eq!(days.len(), 30, "{usage}");
    let mut out = BTreeMap::new();
    for (i, d) in days.iter().enumerate() {
        let date: NaiveDate = d["date"].as_str().unwrap().parse().expect("date");
        assert_eq!(date, today - Duration::days(29 - i as i64), "{usage}");
        out.insert(date, d["count"].as_u64().expect("count"));
    }
    out
}

fn day(s: &str) -> NaiveDate {
    s.parse().expect("date")
}

/// Usage after a known sequence of requests, across a day and a month boundary.
async fn usage_report_across_days_and_months(app: TestApp) {
    let (_, key) = app
        .tenant(
            "usage-team",
            TenantKind::Customer,
            Role::Analyst,
            Tier::Basic,
        )
        .await;
    let (_, other) = app
        .tenant(
            "usage-other",
            TenantKind::Customer,
            Role::Analyst,
            Tier::Enterprise,
        )
        .await;
    let lookup = json!({ "hashes": [hex_of(9, 64)] }).to_string();
    for _ in 0..3 {
        assert_eq!(app.get_with(STATS, &key).await.status, 200);
    }
    let token = app.token(&key).await;
    for _ in 0..2 {
        let r = app
            .call_bearer(
                Method::POST,
                "/api/v1/intel/lookup",
                &token,
                Some(lookup.clone().into()),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    // Refused by role or tier, yet authenticated: counted.
    app.get_with(KEYS, &key)
        .await
        .assert_error(403, "forbidden");
    // Not authenticated: not counted.
    app.get(STATS).await.assert_error(401, "unauthorized");
    app.get_with(STATS, &format!("usage-team.{}", "A".repeat(43)))
        .await
        .assert_error(401, "unauthorized");
    // Another account's requests are its own.
    for _ in 0..4 {
        assert_eq!(app.get_with(STATS, &other).await.status, 200);
    }

    let r = app.get_with(USAGE, &key).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let u = r.json();
    assert_eq!(u["month"], "2025-03");
    assert_eq!(u["tier"], "basic");
    assert_eq!(u["quota"], 50_000);
    assert_eq!(
        u["by_endpoint"],
        json!({
            "GET /api/v1/intel/stats": 3,
            "POST /api/v1/auth/token": 1,
            "POST /api/v1/intel/lookup": 2,
            "GET /api/v1/admin/keys": 1,
            "GET /api/v1/admin/usage": 1,
        })
    );
    assert_eq!(u["total"], 8);
    let d = daily(&u, day("2025-03-10"));
    assert_eq!(d[&day("2025-03-10")], 8);
    assert_eq!(d.values().sum::<u64>(), 8);

    // Past midnight UTC.
    app.clock.set(t("2025-03-11T00:00:05Z"));
    for _ in 0..2 {
        assert_eq!(app.get_with(STATS, &key).await.status, 200);
    }
    let u = app.get_with(USAGE, &key).await.json();
    assert_eq!(u["month"], "2025-03");
    assert_eq!(
        u["by_endpoint"],
        json!({
            "GET /api/v1/intel/stats": 5,
            "POST /api/v1/auth/token": 1,
            "POST /api/v1/intel/lookup": 2,
            "GET /api/v1/admin/keys": 1,
            "GET /api/v1/admin/usage": 2,
        })
    );
    assert_eq!(u["total"], 11);
    let d = daily(&u, day("2025-03-11"));
    assert_eq!(d[&day("2025-03-10")], 8);
    assert_eq!(d[&day("2025-03-11")], 3);
    assert_eq!(d.values().sum::<u64>(), 11);

    // Into April: the month's figures start again; the 30 days reach back into March.
    app.clock.set(t("2025-04-01T00:00:00Z"));
    let u = app.get_with(USAGE, &key).await.json();
    assert_eq!(u["month"], "2025-04");
    assert_eq!(u["by_endpoint"], json!({ "GET /api/v1/admin/usage": 1 }));
    assert_eq!(u["total"], 1);
    let d = daily(&u, day("2025-04-01"));
    assert_eq!(d[&day("2025-03-10")], 8);
    assert_eq!(d[&day("2025-03-11")], 3);
    assert_eq!(d[&day("2025-04-01")], 1);
    assert_eq!(d.values().sum::<u64>(), 12);

    // The other account: its own numbers, unlimited quota.
    let u = app.get_with(USAGE, &other).await.json();
    assert_eq!(u["tier"], "enterprise");
    assert_eq!(u["quota"], Value::Null);
    assert_eq!(u["total"], 1);
    let d = daily(&u, day("2025-04-01"));
    assert_eq!(d[&day("2025-03-10")], 4);
}

/// Counts still in memory when the server stops are written by `maintain`'s final flush.
async fn usage_survives_clean_shutdown(mut app: TestApp) {
    let (_, key) = app
        .tenant(
            "flush-team",
            TenantKind::Customer,
            Role::Analyst,
            Tier::Basic,
        )
        .await;
    // The upkeep's first periodic flush is 2 s after it starts.
    let started = Instant::now();
    let upkeep = app.spawn_maintain();
    for _ in 0..7 {
        assert_eq!(app.get_with(STATS, &key).await.status, 200);
    }
    let today = app.clock.now().date_naive();
    let stored = |store: Arc<dyn store::Store>| async move {
        store
            .usage_by_endpoint("flush-team", today, today)
            .await
            .expect("usage")
    };
    let before = stored(app.store.clone()).await;
    // A clean shutdown: stop serving, then stop the upkeep.
    app.stop_serving().await;
    upkeep.stop().await;
    if started.elapsed() < StdDuration::from_millis(1500) {
        assert_eq!(
            before,
            vec![],
            "no periodic flush ran; the counts were only in memory"
        );
    }
    assert_eq!(
        stored(app.store.clone()).await,
        vec![("GET /api/v1/intel/stats".to_string(), 7)]
    );
    // A server started afterwards reports them.
    let restarted = app.replica().await;
    let u = restarted.get_with(USAGE, &key).await.json();
    assert_eq!(u["total"], 8, "{u}");
    assert_eq!(u["by_endpoint"]["GET /api/v1/intel/stats"], 7);
    restarted.store.close().await;
}

/// Five refused credentials a minute per address, three per team id named in a bad key;
/// the test client's address is a trusted proxy, so `X-Forwarded-For` names the caller.
fn tight_failure_limits(s: &mut Settings) {
    s.limits.failed_auth_per_ip = 5;
    s.limits.failed_auth_per_team = 3;
    s.trusted_proxies = vec!["127.0.0.1".parse().expect("ip")];
}

/// GET `path` as if from `ip`, with extra headers.
async fn from_address(
    app: &TestApp,
    ip: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, Option<u64>) {
    let mut req = reqwest::Client::new()
        .get(format!("{}{path}", app.base))
        .header("X-Forwarded-For", ip);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let r = req.send().await.expect("request");
    let retry = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    (r.status().as_u16(), retry)
}

async fn failed_authentications_are_limited(app: TestApp) {
    let good = app.analyst().await;
    let junk_token = [("Authorization", "Bearer not.a.token")];
    // Junk tokens and missing credentials count against the address.
    for i in 0..5 {
        let refused = if i % 2 == 0 { &junk_token[..] } else { &[] };
        assert_eq!(
            from_address(&app, "203.0.113.1", STATS, refused).await.0,
            401,
            "{i}"
        );
    }
    let (status, retry) = from_address(&app, "203.0.113.1", STATS, &junk_token).await;
    assert_eq!(status, 429, "the sixth failure in a minute");
    assert!(retry.is_some_and(|s| s >= 1), "{retry:?}");
    assert_eq!(from_address(&app, "203.0.113.1", STATS, &[]).await.0, 429);
    // Another address is not affected, and a valid key still works from the limited one.
    assert_eq!(
        from_address(&app, "203.0.113.2", STATS, &junk_token)
            .await
            .0,
        401
    );
    assert_eq!(
        from_address(&app, "203.0.113.1", STATS, &[("X-API-Key", &good)])
            .await
            .0,
        200
    );
    // Wrong secrets for one team from many addresses: the team's own limit.
    for i in 0..3 {
        let ip = format!("198.51.100.{i}");
        let r = from_address(&app, &ip, STATS, &[("X-API-Key", "victim-team.d3Jvbmc")]).await;
        assert_eq!(r.0, 401, "{i}");
    }
    let r = from_address(
        &app,
        "198.51.100.9",
        STATS,
        &[("X-API-Key", "victim-team.d3Jvbmc")],
    )
    .await;
    assert_eq!(r.0, 429, "the fourth failure naming the team");
    let r = from_address(
        &app,
        "198.51.100.9",
        STATS,
        &[("X-API-Key", "other-team.d3Jvbmc")],
    )
    .await;
    assert_eq!(r.0, 401, "other teams are not affected");
    let failures = &app.state.auth_failures;
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(failures.refused.load(Relaxed), 13);
    assert_eq!(failures.limited.load(Relaxed), 3);
}

async fn ambiguous_credentials_are_refused(app: TestApp) {
    let key = app.analyst().await;
    let token = app.token(&key).await;
    let bearer_header = format!("Bearer {token}");
    let client = reqwest::Client::new();
    let url = format!("{}{STATS}", app.base);
    let two_keys = client
        .get(&url)
        .header("X-API-Key", &key)
        .header("X-API-Key", "nobody.Zm9v")
        .send()
        .await
        .unwrap();
    let key_and_junk = client
        .get(&url)
        .header("X-API-Key", &key)
        .header("Authorization", "Bearer garbage")
        .send()
        .await
        .unwrap();
    let key_and_token = client
        .get(&url)
        .header("X-API-Key", &key)
        .header("Authorization", &bearer_header)
        .send()
        .await
        .unwrap();
    for (what, r) in [
        ("two keys", two_keys),
        ("key and junk", key_and_junk),
        ("key and token", key_and_token),
    ] {
        assert_eq!(r.status(), 400, "{what}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"], "bad request", "{what}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("exactly one credential"),
            "{what}"
        );
    }
    // Each alone is fine.
    assert_eq!(app.get_with(STATS, &key).await.status, 200);
    assert_eq!(bearer(&app, &token).await.status, 200);
}

/// Two authenticated requests a minute per key.
fn two_per_minute(s: &mut Settings) {
    s.limits.authenticated_per_key = 2;
}

async fn refused_requests_cost_no_quota(app: TestApp) {
    let key = app.analyst().await;
    let statuses: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..5 {
            v.push(app.get_with(STATS, &key).await.status);
        }
        v
    };
    assert_eq!(statuses, [200, 200, 429, 429, 429]);
    let team = key.split_once('.').unwrap().0;
    let month = app.state.usage.month_total(team, app.clock.now()).await;
    assert_eq!(month.unwrap(), 2, "only the answered requests count");
}

/// A team id no account can have is refused with 400 and audited as a refused attempt, the
/// value quoted and cut; the audit log never holds the caller's text as given.
async fn malformed_targets_are_audited_escaped_and_cut(app: TestApp) {
    let owner = app
        .account("owner-audit", Role::PlatformOwner, Tier::Enterprise)
        .await;
    let long = "x".repeat(1_000);
    let r = app
        .call(
            Method::POST,
            &format!("/api/v1/admin/accounts/{long}/suspend"),
            Some(&owner),
            None,
        )
        .await;
    r.assert_error(400, "bad request");
    assert!(
        r.message().len() < 300,
        "the message quotes a cut value: {}",
        r.message()
    );
    let log = app.get_with(AUDIT, &owner).await.json();
    let entry = &log["results"][0];
    assert_eq!(entry["action"], "account.suspend");
    assert_eq!(entry["outcome"], "denied: bad request");
    let target = entry["target"].as_str().unwrap();
    assert!(
        target.starts_with("\"xxx") && target.ends_with("…\""),
        "{target}"
    );
    assert!(target.chars().count() < 80, "{target}");
}
