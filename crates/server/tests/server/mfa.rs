//! Users, invites and second factors over real HTTP: an invited user is held at
//! `MFA_REQUIRED` until they enrol, TOTP enrolment and sign-in with replay refused and a
//! wrong-code budget that locks out (and is audited), recovery codes used once with the
//! count dropping, passkeys registered and used with a software authenticator (counter
//! checked), account switch, sign-out, and raw keys never asked for a second factor.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::Duration;
use model::{Clock as _, Role, TenantKind, Tier};
use reqwest::Method;
use serde_json::{Value, json};
use testkit::{Resp, TestApp};
use webauthn_authenticator_rs::WebauthnAuthenticator;
use webauthn_authenticator_rs::softpasskey::SoftPasskey;

testkit::backend_tests!(
    invite_then_mfa_required_until_enrolled,
    invites_follow_the_grant_rules,
    totp_sign_in_refuses_replay_and_locks_out,
    concurrent_wrong_codes_spend_the_budget_once,
    a_key_alone_cannot_change_second_factors,
    session_tokens_live_fifteen_minutes_within_their_session,
    recovery_codes_are_single_use,
    passkeys_register_and_sign_in,
    switch_moves_between_accounts,
    raw_keys_never_need_a_second_factor,
    staff_impersonate_a_user_with_their_membership_role,
);

const STATUS: &str = "/api/v1/admin/mfa/status";

fn claims(token: &str) -> Value {
    let raw = token.split('.').nth(1).expect("JWT payload");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(raw).expect("base64url")).expect("JSON")
}

async fn bearer(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> Resp {
    app.call_bearer(method, path, token, body.map(|b| b.to_string().into()))
        .await
}

/// An account admin on a teams account; returns its key.
async fn admin(app: &TestApp, team: &str) -> String {
    app.account(team, Role::AccountAdmin, Tier::Teams).await
}

async fn invite(app: &TestApp, admin_key: &str, role: &str) -> String {
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/invites",
            admin_key,
            Some(json!({"role": role, "display_name": "Ada", "contact": "ada@example.org"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    r.json()["code"].as_str().unwrap().to_string()
}

async fn redeem(app: &TestApp, code: &str) -> Resp {
    app.call(
        Method::POST,
        "/api/v1/auth/invite",
        None,
        Some(json!({ "code": code }).to_string().into()),
    )
    .await
}

/// The structure of a JSON value: its keys and the kinds of their values, not the values.
fn shape(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(shape).collect()),
        Value::String(_) => json!("string"),
        Value::Number(_) => json!("number"),
        Value::Bool(_) => json!("bool"),
        Value::Null => Value::Null,
    }
}

/// The code an authenticator app shows now for the seed.
fn code_now(app: &TestApp, secret: &str) -> String {
    auth::mfa::totp_at(
        &testkit::fixtures::base32_decode(secret),
        app.clock.now().timestamp(),
    )
}

/// Enrols TOTP with `token` (bearer) and returns the secret.
async fn enrol_totp(app: &TestApp, token: &str) -> String {
    let r = bearer(
        app,
        Method::POST,
        "/api/v1/admin/mfa/totp/enroll",
        token,
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let e = r.json();
    let secret = e["secret"].as_str().unwrap().to_string();
    assert!(
        e["otpauth_url"]
            .as_str()
            .unwrap()
            .starts_with("otpauth://totp/")
    );
    assert!(
        e["otpauth_url"]
            .as_str()
            .unwrap()
            .contains(&format!("secret={secret}"))
    );
    assert!(e["qr_code_svg"].as_str().unwrap().contains("<svg"));
    let r = bearer(
        app,
        Method::POST,
        "/api/v1/admin/mfa/totp/verify",
        token,
        Some(json!({"code": code_now(app, &secret)})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["enrolled"], true);
    secret
}

async fn invite_then_mfa_required_until_enrolled(app: TestApp) {
    let admin_key = admin(&app, "acme").await;
    let code = invite(&app, &admin_key, "analyst").await;
    let r = redeem(&app, &code).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let token = r.json()["token"].as_str().unwrap().to_string();
    assert!(r.json()["expires_at"].is_string());
    let c = claims(&token);
    assert_eq!(c["mfa"], false);
    assert_eq!(c["sub"], "acme");
    assert_eq!(c["role"], "analyst");

    // The code works once.
    redeem(&app, &code).await.assert_error(401, "unauthorized");

    // Intel and admin routes: MFA_REQUIRED; enrolment routes work.
    let r = bearer(&app, Method::GET, "/api/v1/intel/stats", &token, None).await;
    r.assert_error(403, "MFA_REQUIRED");
    let r = bearer(&app, Method::GET, "/api/v1/admin/usage", &token, None).await;
    r.assert_error(403, "MFA_REQUIRED");
    let r = bearer(&app, Method::GET, STATUS, &token, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["enrolled"], false);
    assert_eq!(r.json()["session_mfa"], false);

    enrol_totp(&app, &token).await;
    // The session enrolled a factor: it passes now.
    let r = bearer(&app, Method::GET, "/api/v1/intel/stats", &token, None).await;
    assert_eq!(r.status, 200, "{}", r.text);

    // Signing out ends the session at once.
    let r = bearer(&app, Method::POST, "/api/v1/auth/sign-out", &token, None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    let r = bearer(&app, Method::GET, "/api/v1/intel/stats", &token, None).await;
    r.assert_error(401, "unauthorized");

    // An expired invite is refused.
    let code = invite(&app, &admin_key, "auditor").await;
    app.clock.advance(Duration::days(8));
    redeem(&app, &code).await.assert_error(401, "unauthorized");

    // Ended sessions are pruned after a day.
    let pruned = app
        .store
        .prune_sessions(app.clock.now() - Duration::days(1))
        .await
        .unwrap();
    assert_eq!(pruned, 1);
    let r = bearer(&app, Method::GET, STATUS, &token, None).await;
    r.assert_error(401, "unauthorized");
}

async fn invites_follow_the_grant_rules(app: TestApp) {
    let admin_key = admin(&app, "acme").await;
    let body = |role: &str| Some(json!({"role": role, "display_name": "B", "contact": "b@x"}));
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/invites",
            &admin_key,
            body("account_admin"),
        )
        .await;
    r.assert_error(403, "forbidden");
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/invites",
            &admin_key,
            body("platform_admin"),
        )
        .await;
    r.assert_error(403, "forbidden");
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/invites",
            &admin_key,
            body("responder"),
        )
        .await;
    r.assert_error(400, "bad request");
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/invites",
            &admin_key,
            Some(json!({"role": "analyst", "display_name": "", "contact": "b@x"})),
        )
        .await;
    r.assert_error(400, "bad request");
    // An analyst cannot invite at all.
    let analyst = app.account("viewer-team", Role::Analyst, Tier::Teams).await;
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/invites",
            &analyst,
            body("analyst"),
        )
        .await;
    r.assert_error(403, "forbidden");
    // An invited analyst cannot invite either (they hold no tenant:manage).
    let code = invite(&app, &admin_key, "analyst").await;
    let token = redeem(&app, &code).await.json()["token"]
        .as_str()
        .unwrap()
        .to_string();
    enrol_totp(&app, &token).await;
    let r = bearer(
        &app,
        Method::POST,
        "/api/v1/admin/invites",
        &token,
        body("analyst"),
    )
    .await;
    r.assert_error(403, "forbidden");
}

async fn totp_sign_in_refuses_replay_and_locks_out(app: TestApp) {
    let key = admin(&app, "acme").await;
    // With a raw key (no session) the factor is the key's own.
    let r = app
        .send(Method::POST, "/api/v1/admin/mfa/totp/enroll", &key, None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let secret = r.json()["secret"].as_str().unwrap().to_string();
    // Nothing is enabled before a first code.
    let r = app.get_with(STATUS, &key).await;
    assert_eq!(r.json()["totp_enabled"], false);
    let code = code_now(&app, &secret);
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/mfa/totp/verify",
            &key,
            Some(json!({"code": code})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // The seed is stored encrypted, never in clear.
    let stored = app.text_rows("SELECT secret_enc FROM mfa_totp", &[]).await;
    assert_eq!(stored.len(), 1);
    assert!(!stored[0][0].contains(&secret));
    // A second enrolment while enabled is refused.
    let r = app
        .send(Method::POST, "/api/v1/admin/mfa/totp/enroll", &key, None)
        .await;
    r.assert_error(409, "conflict");

    // The same code again (same step) is a replay.
    let sign_in = |code: String| {
        let app = &app;
        let key = key.clone();
        async move {
            app.send(
                Method::POST,
                "/api/v1/admin/auth/totp",
                &key,
                Some(json!({"code": code})),
            )
            .await
        }
    };
    sign_in(code.clone())
        .await
        .assert_error(401, "unauthorized");
    app.clock.advance(Duration::seconds(30));
    let r = sign_in(code_now(&app, &secret)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let token = r.json()["token"].as_str().unwrap().to_string();
    assert_eq!(claims(&token)["mfa"], true);
    let r = bearer(&app, Method::GET, "/api/v1/intel/stats", &token, None).await;
    assert_eq!(r.status, 200, "{}", r.text);

    // No key and no pending sign-in: 401.
    let r = app
        .call(
            Method::POST,
            "/api/v1/admin/auth/totp",
            None,
            Some(json!({"code": "123456"}).to_string().into()),
        )
        .await;
    r.assert_error(401, "unauthorized");

    // Five wrong codes lock the key out; even the right code is refused then; audited.
    app.clock.advance(Duration::seconds(30));
    let right = code_now(&app, &secret);
    let wrong = if right == "000000" {
        "111111"
    } else {
        "000000"
    };
    for _ in 0..4 {
        sign_in(wrong.to_string())
            .await
            .assert_error(401, "unauthorized");
    }
    let r = sign_in(wrong.to_string()).await;
    r.assert_error(429, "rate limit exceeded");
    assert!(r.headers.get("retry-after").is_some());
    sign_in(right.clone())
        .await
        .assert_error(429, "rate limit exceeded");
    let audit = app
        .text_rows(
            "SELECT action FROM audit_log WHERE action = 'mfa.lockout'",
            &[],
        )
        .await;
    assert_eq!(audit.len(), 1);
    let r = app.get_with(STATUS, &key).await;
    assert!(r.json()["locked_until"].is_string());
    // After the lock-out a right code works again.
    app.clock.advance(Duration::minutes(16));
    let r = sign_in(code_now(&app, &secret)).await;
    assert_eq!(r.status, 200, "{}", r.text);

    // Disabling needs a current (unused) code.
    app.clock.advance(Duration::seconds(30));
    let r = app
        .send(
            Method::DELETE,
            "/api/v1/admin/mfa/totp",
            &key,
            Some(json!({"code": "12"})),
        )
        .await;
    r.assert_error(400, "bad request");
    let r = app
        .send(
            Method::DELETE,
            "/api/v1/admin/mfa/totp",
            &key,
            Some(json!({"code": code_now(&app, &secret)})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["disabled"], true);
    assert_eq!(
        app.get_with(STATUS, &key).await.json()["totp_enabled"],
        false
    );
}

async fn recovery_codes_are_single_use(app: TestApp) {
    let key = admin(&app, "acme").await;
    // Recovery codes stand in for a second factor: a key without one cannot make them.
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/mfa/recovery/generate",
            &key,
            None,
        )
        .await;
    r.assert_error(400, "bad request");
    assert!(
        r.message().contains("enroll a passkey or TOTP first"),
        "{}",
        r.text
    );
    let secret = enrol_totp(&app, &app.token(&key).await).await;
    app.clock.advance(Duration::seconds(30));
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/mfa/recovery/generate",
            &key,
            Some(json!({"code": code_now(&app, &secret)})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.headers["x-recovery-codes-remaining"], "10");
    let body = r.json();
    assert_eq!(body["count"], 10);
    assert!(body["warning"].as_str().unwrap().len() > 10);
    let codes: Vec<String> = body["codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert_eq!(codes.len(), 10);
    for code in &codes {
        let groups: Vec<&str> = code.split('-').collect();
        assert_eq!(groups.len(), 3, "{code}");
        assert!(
            groups
                .iter()
                .all(|g| g.len() == 4 && g.chars().all(|c| c.is_ascii_alphanumeric()))
        );
    }
    // Only hashes are stored.
    let stored = app
        .text_rows("SELECT code_hash FROM mfa_recovery_codes", &[])
        .await;
    assert!(stored.iter().all(|r| !codes.contains(&r[0])));

    let use_code = |code: String| {
        let app = &app;
        let key = key.clone();
        async move {
            app.send(
                Method::POST,
                "/api/v1/admin/auth/recovery",
                &key,
                Some(json!({"code": code})),
            )
            .await
        }
    };
    let r = use_code(codes[0].clone()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.headers["x-recovery-codes-remaining"], "9");
    assert_eq!(claims(r.json()["token"].as_str().unwrap())["mfa"], true);
    // Lower case and without hyphens is the same code.
    let r = use_code(codes[1].to_lowercase().replace('-', "")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.headers["x-recovery-codes-remaining"], "8");
    // Used codes are refused.
    use_code(codes[0].clone())
        .await
        .assert_error(401, "unauthorized");

    // A new set cancels the old one.
    app.clock.advance(Duration::seconds(30));
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/mfa/recovery/generate",
            &key,
            Some(json!({"code": code_now(&app, &secret)})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    use_code(codes[2].clone())
        .await
        .assert_error(401, "unauthorized");
    assert_eq!(
        app.get_with(STATUS, &key).await.json()["recovery_codes_remaining"],
        10
    );
}

async fn passkeys_register_and_sign_in(app: TestApp) {
    let origin = url::Url::parse("http://localhost").unwrap();
    let code = invite(&app, &admin(&app, "acme").await, "auditor").await;
    let token = redeem(&app, &code).await.json()["token"]
        .as_str()
        .unwrap()
        .to_string();

    let r = bearer(
        &app,
        Method::POST,
        "/api/v1/admin/mfa/passkey/begin",
        &token,
        Some(json!({"display_name": "laptop"})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let options: webauthn_rs::prelude::CreationChallengeResponse =
        serde_json::from_str(&r.text).unwrap();
    let mut authenticator = SoftPasskey::new(true);
    let credential = authenticator
        .do_registration(origin.clone(), options)
        .unwrap();
    let r = bearer(
        &app,
        Method::POST,
        "/api/v1/admin/mfa/passkey/complete",
        &token,
        Some(serde_json::to_value(&credential).unwrap()),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let passkey = r.json();
    assert_eq!(passkey["display_name"], "laptop");
    assert!(passkey["created_at"].is_string());
    let passkey_id = passkey["passkey_id"].as_str().unwrap().to_string();
    // The same credential again (a replayed ceremony) is refused.
    let r = bearer(
        &app,
        Method::POST,
        "/api/v1/admin/mfa/passkey/complete",
        &token,
        Some(serde_json::to_value(&credential).unwrap()),
    )
    .await;
    r.assert_error(400, "bad request");
    // Registering passed a factor: the session is through.
    let r = bearer(&app, Method::GET, "/api/v1/intel/stats", &token, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let status = bearer(&app, Method::GET, STATUS, &token, None).await.json();
    assert_eq!(status["passkeys"], 1);
    let handle = status["user_handle"].as_str().unwrap().to_string();
    let r = bearer(
        &app,
        Method::GET,
        "/api/v1/admin/mfa/passkeys",
        &token,
        None,
    )
    .await;
    assert_eq!(r.json()["total"], 1);
    assert_eq!(r.json()["results"][0]["passkey_id"], passkey_id);

    // Sign in with it: a new session with the second factor passed.
    let sign_in = |authenticator: &mut SoftPasskey, options: String| {
        let options: webauthn_rs::prelude::RequestChallengeResponse =
            serde_json::from_str(&options).unwrap();
        authenticator
            .do_authentication(origin.clone(), options)
            .unwrap()
    };
    let r = app
        .call(
            Method::POST,
            "/api/v1/admin/auth/passkey/begin",
            None,
            Some(json!({"user_handle": handle}).to_string().into()),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let assertion = sign_in(&mut authenticator, r.text.clone());
    let complete = |assertion: &webauthn_rs::prelude::PublicKeyCredential| {
        let app = &app;
        let body = serde_json::to_string(assertion).unwrap();
        async move {
            app.call(
                Method::POST,
                "/api/v1/admin/auth/passkey/complete",
                None,
                Some(body.into()),
            )
            .await
        }
    };
    let r = complete(&assertion).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let signed_in = r.json()["token"].as_str().unwrap().to_string();
    let c = claims(&signed_in);
    assert_eq!(c["mfa"], true);
    assert_eq!(c["sub"], "acme");
    assert_eq!(c["role"], "auditor");
    let r = bearer(&app, Method::GET, "/api/v1/intel/stats", &signed_in, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    // The ceremony is finished once: replaying the assertion is refused.
    complete(&assertion).await.assert_error(401, "unauthorized");

    // An assertion whose counter is behind the stored one (a cloned authenticator) is
    // refused: the stored counter is moved ahead of the authenticator's.
    let stored = app
        .text_rows("SELECT passkey_id, passkey FROM mfa_passkeys", &[])
        .await;
    let mut passkey_json: Value = serde_json::from_str(&stored[0][1]).unwrap();
    let counter = passkey_json["cred"]["counter"]
        .as_u64()
        .expect("stored counter");
    assert!(counter >= 1, "the sign-in stored the moved counter");
    passkey_json["cred"]["counter"] = json!(counter + 100);
    app.exec(
        "UPDATE mfa_passkeys SET passkey = $1 WHERE passkey_id = $2",
        &[&passkey_json.to_string(), &stored[0][0]],
    )
    .await;
    let r = app
        .call(
            Method::POST,
            "/api/v1/admin/auth/passkey/begin",
            None,
            Some(json!({"user_handle": handle}).to_string().into()),
        )
        .await;
    let stale = sign_in(&mut authenticator, r.text.clone());
    complete(&stale).await.assert_error(401, "unauthorized");

    // A handle without passkeys gets options of the same shape as one with them, and the
    // same options id on every call: the answer does not say whether a handle has passkeys.
    let begin = |handle: String| {
        let app = &app;
        async move {
            let r = app
                .call(
                    Method::POST,
                    "/api/v1/admin/auth/passkey/begin",
                    None,
                    Some(json!({ "user_handle": handle }).to_string().into()),
                )
                .await;
            assert_eq!(r.status, 200, "{}", r.text);
            r.json()
        }
    };
    let real = begin(handle.clone()).await;
    let unknown = begin("AAAAAAAAAAAAAAAAAAAAAA".into()).await;
    assert_eq!(shape(&real), shape(&unknown), "{real}\n{unknown}");
    assert_eq!(
        unknown["publicKey"]["allowCredentials"]
            .as_array()
            .unwrap()
            .len(),
        real["publicKey"]["allowCredentials"]
            .as_array()
            .unwrap()
            .len()
    );
    let again = begin("AAAAAAAAAAAAAAAAAAAAAA".into()).await;
    assert_eq!(
        again["publicKey"]["allowCredentials"],
        unknown["publicKey"]["allowCredentials"]
    );
    assert_ne!(
        again["publicKey"]["challenge"],
        unknown["publicKey"]["challenge"]
    );
    // Removing the passkey (the session passed a second factor).
    let r = bearer(
        &app,
        Method::DELETE,
        &format!("/api/v1/admin/mfa/passkeys/{passkey_id}"),
        &signed_in,
        None,
    )
    .await;
    assert_eq!(r.status, 204, "{}", r.text);
    let r = bearer(
        &app,
        Method::DELETE,
        &format!("/api/v1/admin/mfa/passkeys/{passkey_id}"),
        &signed_in,
        None,
    )
    .await;
    r.assert_error(404, "not found");
}

async fn switch_moves_between_accounts(app: TestApp) {
    let acme = admin(&app, "acme").await;
    let globex = admin(&app, "globex").await;
    let code = invite(&app, &acme, "analyst").await;
    let token = redeem(&app, &code).await.json()["token"]
        .as_str()
        .unwrap()
        .to_string();
    let user_id = app
        .text_rows("SELECT user_id FROM users", &[])
        .await
        .remove(0)
        .remove(0);
    // The same person also belongs to globex (as an auditor).
    app.exec(
        "INSERT INTO memberships (user_id, team_id, role, created_at) \
         VALUES ($1, 'globex', 'auditor', '2026-01-01T00:00:00Z')",
        &[&user_id],
    )
    .await;
    // Switching works before enrolment (it is how a user reaches the account to enrol in).
    let r = bearer(
        &app,
        Method::POST,
        "/api/v1/auth/switch",
        &token,
        Some(json!({"account_id": "globex"})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let switched = r.json()["token"].as_str().unwrap().to_string();
    let c = claims(&switched);
    assert_eq!(c["sub"], "globex");
    assert_eq!(c["role"], "auditor");
    assert_eq!(c["mfa"], false);
    // The old session is over.
    let r = bearer(&app, Method::GET, STATUS, &token, None).await;
    r.assert_error(401, "unauthorized");
    // Not a member: 403. A key cannot switch: 400.
    let r = bearer(
        &app,
        Method::POST,
        "/api/v1/auth/switch",
        &switched,
        Some(json!({"account_id": "initech"})),
    )
    .await;
    r.assert_error(403, "forbidden");
    let r = app
        .send(
            Method::POST,
            "/api/v1/auth/switch",
            &globex,
            Some(json!({"account_id": "acme"})),
        )
        .await;
    r.assert_error(400, "bad request");
}

async fn raw_keys_never_need_a_second_factor(app: TestApp) {
    let key = admin(&app, "acme").await;
    let r = app.get_with("/api/v1/intel/stats", &key).await;
    assert_eq!(r.status, 200);
    let token = app.token(&key).await;
    assert!(claims(&token).get("mfa").is_none());
    let r = bearer(&app, Method::GET, "/api/v1/intel/stats", &token, None).await;
    assert_eq!(r.status, 200);
    // Even with TOTP enrolled, the key itself is not asked for it.
    enrol_totp(&app, &token).await;
    let r = app.get_with("/api/v1/intel/stats", &key).await;
    assert_eq!(r.status, 200);
    // A key token cannot sign out (it is not a session).
    let r = bearer(&app, Method::POST, "/api/v1/auth/sign-out", &token, None).await;
    r.assert_error(400, "bad request");
}

async fn staff_impersonate_a_user_with_their_membership_role(app: TestApp) {
    let owner = app
        .tenant(
            "platform",
            TenantKind::Platform,
            Role::PlatformOwner,
            Tier::Enterprise,
        )
        .await
        .1;
    let staff = app.token(&owner).await;
    let acme = admin(&app, "acme").await;
    admin(&app, "globex").await;
    let code = invite(&app, &acme, "auditor").await;
    redeem(&app, &code).await;
    let user_id = app
        .text_rows("SELECT user_id FROM users", &[])
        .await
        .remove(0)
        .remove(0);
    let impersonate = |body: Value| {
        let app = &app;
        let staff = staff.clone();
        async move {
            bearer(
                app,
                Method::POST,
                "/api/v1/admin/impersonate",
                &staff,
                Some(body),
            )
            .await
        }
    };
    // One account: the user's own role there, named in imp_uid.
    let r = impersonate(json!({"user_id": user_id, "mode": "view"})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let token = r.json()["token"].as_str().unwrap().to_string();
    let c = claims(&token);
    assert_eq!(c["sub"], "acme");
    assert_eq!(c["role"], "auditor");
    assert_eq!(c["imp_uid"], user_id.as_str());
    let r = bearer(&app, Method::GET, "/api/v1/intel/stats", &token, None).await;
    assert_eq!(r.status, 200, "{}", r.text);

    // Several accounts: account_id is needed (400), and must be one of theirs (404).
    app.exec(
        "INSERT INTO memberships (user_id, team_id, role, created_at) \
         VALUES ($1, 'globex', 'analyst', '2026-01-01T00:00:00Z')",
        &[&user_id],
    )
    .await;
    let r = impersonate(json!({"user_id": user_id, "mode": "view"})).await;
    r.assert_error(400, "bad request");
    let r = impersonate(json!({"user_id": user_id, "account_id": "initech", "mode": "view"})).await;
    r.assert_error(404, "not found");
    let r =
        impersonate(json!({"user_id": user_id, "account_id": "globex", "mode": "manage"})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(
        claims(r.json()["token"].as_str().unwrap())["role"],
        "analyst"
    );
    // The account's uuid names it as well as its team id; another account's uuid does not.
    let globex = auth::account_uuid("globex").to_string();
    let r = impersonate(json!({"user_id": user_id, "account_id": globex, "mode": "view"})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(claims(r.json()["token"].as_str().unwrap())["sub"], "globex");
    let initech = auth::account_uuid("initech").to_string();
    let r = impersonate(json!({"user_id": user_id, "account_id": initech, "mode": "view"})).await;
    r.assert_error(404, "not found");

    // Unknown user 404; a user with a membership in the platform tenant is staff: 403.
    let r = impersonate(json!({"user_id": "7d444840-9dc0-11d1-b245-5ffdce74fad2", "mode": "view"}))
        .await;
    r.assert_error(404, "not found");
    app.exec(
        "INSERT INTO memberships (user_id, team_id, role, created_at) \
         VALUES ($1, 'platform', 'analyst', '2026-01-01T00:00:00Z')",
        &[&user_id],
    )
    .await;
    let r = impersonate(json!({"user_id": user_id, "account_id": "acme", "mode": "view"})).await;
    r.assert_error(403, "forbidden");
}

/// Sends `n` second-factor sign-ins with `code` for `key`, released together; their statuses.
async fn totp_burst(app: &TestApp, key: &str, code: &str, n: usize) -> Vec<u16> {
    let gate = std::sync::Arc::new(tokio::sync::Barrier::new(n));
    let sends = (0..n).map(|_| {
        let gate = gate.clone();
        async move {
            gate.wait().await;
            app.send(
                Method::POST,
                "/api/v1/admin/auth/totp",
                key,
                Some(json!({ "code": code })),
            )
            .await
            .status
        }
    });
    futures::future::join_all(sends).await
}

/// 120 wrong codes released together evaluate at most five (four answered 401, the fifth
/// locks and answers 429), the rest are refused with 429 without being tried, none fails
/// with 500, one lock-out is audited, and the lock then holds for the right code too.
async fn concurrent_wrong_codes_spend_the_budget_once(app: TestApp) {
    let key = admin(&app, "acme").await;
    let secret = enrol_totp(&app, &app.token(&key).await).await;
    app.clock.advance(Duration::seconds(30));
    let right = code_now(&app, &secret);
    let wrong = if right == "000000" {
        "111111"
    } else {
        "000000"
    };
    for round in 0..2 {
        let statuses = totp_burst(&app, &key, wrong, 120).await;
        let count = |s: u16| statuses.iter().filter(|x| **x == s).count();
        assert_eq!(count(500), 0, "round {round}: {statuses:?}");
        assert_eq!(count(401) + count(429), 120, "round {round}: {statuses:?}");
        assert!(
            count(401) <= 4,
            "round {round}: {} wrong codes were evaluated before the lock-out",
            count(401) + 1
        );
        let lockouts = app
            .text_rows(
                "SELECT action FROM audit_log WHERE action = 'mfa.lockout'",
                &[],
            )
            .await;
        assert_eq!(lockouts.len(), round + 1, "round {round}");
        let r = app
            .send(
                Method::POST,
                "/api/v1/admin/auth/totp",
                &key,
                Some(json!({ "code": code_now(&app, &secret) })),
            )
            .await;
        r.assert_error(429, "rate limit exceeded");
        // The lock ends; a new window starts.
        app.clock.advance(Duration::minutes(16));
    }
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/auth/totp",
            &key,
            Some(json!({ "code": code_now(&app, &secret) })),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

/// The console in a few requests, without a browser: the CSRF cookie, then the key, then
/// (when asked) the TOTP code of `secret`. The client, the CSRF token and the session cookie.
async fn console_sign_in(
    app: &TestApp,
    key: &str,
    secret: Option<&str>,
) -> (reqwest::Client, String, String) {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let cookie = |headers: &reqwest::header::HeaderMap, name: &str| {
        headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix(&format!("{name}=")))
            .map(|v| v.split(';').next().unwrap().to_string())
    };
    let r = http
        .get(format!("{}/console/sign-in", app.base))
        .send()
        .await
        .unwrap();
    let csrf = cookie(r.headers(), "kg_csrf").expect("a CSRF cookie");
    let r = http
        .post(format!("{}/console/sign-in", app.base))
        .header("Cookie", format!("kg_csrf={csrf}"))
        .form(&[("key", key), ("csrf", &csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    if let Some(session) = cookie(r.headers(), "kg_session") {
        return (http, csrf, session);
    }
    let pending = cookie(r.headers(), "kg_pending").expect("a pending sign-in");
    let code = code_now(app, secret.expect("the key has a second factor"));
    let r = http
        .post(format!("{}/console/second-factor/totp", app.base))
        .header("Cookie", format!("kg_csrf={csrf}; kg_pending={pending}"))
        .form(&[("code", code.as_str()), ("csrf", &csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let session = cookie(r.headers(), "kg_session").expect("a session after the code");
    (http, csrf, session)
}

/// Registers a passkey with `token` (bearer); its id.
async fn register_passkey(app: &TestApp, token: &str, authenticator: &mut SoftPasskey) -> String {
    let r = bearer(
        app,
        Method::POST,
        "/api/v1/admin/mfa/passkey/begin",
        token,
        Some(json!({"display_name": "laptop"})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let options = serde_json::from_str(&r.text).unwrap();
    let credential = authenticator
        .do_registration(url::Url::parse("http://localhost").unwrap(), options)
        .unwrap();
    let r = bearer(
        app,
        Method::POST,
        "/api/v1/admin/mfa/passkey/complete",
        token,
        Some(serde_json::to_value(&credential).unwrap()),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["passkey_id"].as_str().unwrap().to_string()
}

/// With only a key whose holder has a second factor, nothing of that factor can be changed
/// or added to: no recovery codes (the route answered ten fresh codes to the key alone, and
/// one of them then signed in to the console with `mfa: true`), no passkey ceremony, no
/// passkey removed, each `403 MFA_REQUIRED`. The holder still can: with the current TOTP
/// code in the request, or in a session (API or console) that passed the second factor.
async fn a_key_alone_cannot_change_second_factors(app: TestApp) {
    const GENERATE: &str = "/api/v1/admin/mfa/recovery/generate";
    const BEGIN: &str = "/api/v1/admin/mfa/passkey/begin";
    let key = admin(&app, "acme").await;
    let key_token = app.token(&key).await;
    // The holder enrols TOTP with the key: a first factor needs nothing more.
    let secret = enrol_totp(&app, &key_token).await;

    // The attack, with the raw key and with a token exchanged for it.
    let r = app.send(Method::POST, GENERATE, &key, None).await;
    r.assert_error(403, "MFA_REQUIRED");
    assert!(r.message().contains("second factor"), "{}", r.text);
    bearer(&app, Method::POST, GENERATE, &key_token, Some(json!({})))
        .await
        .assert_error(403, "MFA_REQUIRED");
    assert_eq!(
        app.get_with(STATUS, &key).await.json()["recovery_codes_remaining"],
        0
    );
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/auth/recovery",
            &key,
            Some(json!({"code": "ABCD-EFGH-JKLM"})),
        )
        .await;
    r.assert_error(401, "unauthorized");
    for token in [None, Some(&key_token)] {
        let body = Some(json!({"display_name": "attacker"}));
        let r = match token {
            None => app.send(Method::POST, BEGIN, &key, body).await,
            Some(t) => bearer(&app, Method::POST, BEGIN, t, body).await,
        };
        r.assert_error(403, "MFA_REQUIRED");
    }
    // A wrong code is no proof (and counts against the budget).
    app.clock.advance(Duration::seconds(30));
    let right = code_now(&app, &secret);
    let wrong = if right == "000000" {
        "111111"
    } else {
        "000000"
    };
    app.send(Method::POST, GENERATE, &key, Some(json!({"code": wrong})))
        .await
        .assert_error(401, "unauthorized");

    // The holder: the current code with the key.
    let r = app
        .send(Method::POST, GENERATE, &key, Some(json!({"code": right})))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["count"], 10);
    // Or a session that passed the second factor.
    app.clock.advance(Duration::seconds(30));
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/auth/totp",
            &key,
            Some(json!({"code": code_now(&app, &secret)})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let session = r.json()["token"].as_str().unwrap().to_string();
    let r = bearer(&app, Method::POST, GENERATE, &session, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let mut authenticator = SoftPasskey::new(true);
    let passkey_id = register_passkey(&app, &session, &mut authenticator).await;

    // Removing it: not with the key alone; with the key and the current code.
    let delete = format!("/api/v1/admin/mfa/passkeys/{passkey_id}");
    app.send(Method::DELETE, &delete, &key, None)
        .await
        .assert_error(403, "MFA_REQUIRED");
    assert_eq!(app.get_with(STATUS, &key).await.json()["passkeys"], 1);
    app.clock.advance(Duration::seconds(30));
    let r = app
        .send(
            Method::DELETE,
            &delete,
            &key,
            Some(json!({"code": code_now(&app, &secret)})),
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);

    // A key whose holder has only a passkey: the key alone cannot add TOTP either.
    let other = admin(&app, "globex").await;
    let other_token = app.token(&other).await;
    let mut other_authenticator = SoftPasskey::new(true);
    register_passkey(&app, &other_token, &mut other_authenticator).await;
    app.send(Method::POST, "/api/v1/admin/mfa/totp/enroll", &other, None)
        .await
        .assert_error(403, "MFA_REQUIRED");
    // A ceremony begun while there was no factor cannot finish once there is one.
    let third = admin(&app, "initech").await;
    let r = app
        .send(
            Method::POST,
            BEGIN,
            &third,
            Some(json!({"display_name": "first"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let credential = SoftPasskey::new(true)
        .do_registration(
            url::Url::parse("http://localhost").unwrap(),
            serde_json::from_str(&r.text).unwrap(),
        )
        .unwrap();
    enrol_totp(&app, &app.token(&third).await).await;
    app.send(
        Method::POST,
        "/api/v1/admin/mfa/passkey/complete",
        &third,
        Some(serde_json::to_value(&credential).unwrap()),
    )
    .await
    .assert_error(403, "MFA_REQUIRED");
    assert_eq!(app.get_with(STATUS, &third).await.json()["passkeys"], 0);

    // The console's own forms work in a session that passed the second factor.
    app.clock.advance(Duration::seconds(30));
    let (http, csrf, session) = console_sign_in(&app, &key, Some(&secret)).await;
    let r = http
        .post(format!("{}/console/account/recovery", app.base))
        .header("Cookie", format!("kg_csrf={csrf}; kg_session={session}"))
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let html = r.text().await.unwrap();
    assert!(html.contains("data-recovery-codes"), "{html}");
    assert_eq!(
        app.get_with(STATUS, &key).await.json()["recovery_codes_remaining"],
        10
    );
}

/// Every session token lives 15 minutes (`exp - iat` = 900) whichever route signed in;
/// `auth/refresh` gives a fresh 15 minutes while the session lasts and never past its end,
/// and is refused once the session is signed out or over. The console, whose cookie holds
/// the session's first token, stays signed in for the session's 12 hours.
async fn session_tokens_live_fifteen_minutes_within_their_session(app: TestApp) {
    const REFRESH: &str = "/api/v1/auth/refresh";
    let lifetime = |token: &str| {
        let c = claims(token);
        c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap()
    };
    let expires_at = |r: &testkit::Resp| {
        chrono::DateTime::parse_from_rfc3339(r.json()["expires_at"].as_str().unwrap())
            .unwrap()
            .timestamp()
    };
    let key = admin(&app, "acme").await;
    let secret = enrol_totp(&app, &app.token(&key).await).await;

    // auth/totp
    app.clock.advance(Duration::seconds(30));
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/auth/totp",
            &key,
            Some(json!({"code": code_now(&app, &secret)})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let totp_token = r.json()["token"].as_str().unwrap().to_string();
    assert_eq!(lifetime(&totp_token), 900);
    assert_eq!(expires_at(&r), claims(&totp_token)["exp"].as_i64().unwrap());
    // auth/recovery
    app.clock.advance(Duration::seconds(30));
    let codes = bearer(
        &app,
        Method::POST,
        "/api/v1/admin/mfa/recovery/generate",
        &totp_token,
        None,
    )
    .await
    .json();
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/auth/recovery",
            &key,
            Some(json!({"code": codes["codes"][0]})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(lifetime(r.json()["token"].as_str().unwrap()), 900);
    // auth/invite and auth/switch
    let code = invite(&app, &key, "analyst").await;
    let r = redeem(&app, &code).await;
    let invited = r.json()["token"].as_str().unwrap().to_string();
    assert_eq!(lifetime(&invited), 900);
    assert_eq!(expires_at(&r), claims(&invited)["exp"].as_i64().unwrap());
    admin(&app, "globex").await;
    let user_id = app
        .text_rows("SELECT user_id FROM users", &[])
        .await
        .remove(0)
        .remove(0);
    app.exec(
        "INSERT INTO memberships (user_id, team_id, role, created_at) \
         VALUES ($1, 'globex', 'auditor', '2026-01-01T00:00:00Z')",
        &[&user_id],
    )
    .await;
    let r = bearer(
        &app,
        Method::POST,
        "/api/v1/auth/switch",
        &invited,
        Some(json!({"account_id": "globex"})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(lifetime(r.json()["token"].as_str().unwrap()), 900);
    // auth/passkey/complete
    let mut authenticator = SoftPasskey::new(true);
    register_passkey(&app, &totp_token, &mut authenticator).await;
    let handle = bearer(&app, Method::GET, STATUS, &totp_token, None)
        .await
        .json()["user_handle"]
        .clone();
    let r = app
        .call(
            Method::POST,
            "/api/v1/admin/auth/passkey/begin",
            None,
            Some(json!({ "user_handle": handle }).to_string().into()),
        )
        .await;
    let assertion = authenticator
        .do_authentication(
            url::Url::parse("http://localhost").unwrap(),
            serde_json::from_str(&r.text).unwrap(),
        )
        .unwrap();
    let r = app
        .call(
            Method::POST,
            "/api/v1/admin/auth/passkey/complete",
            None,
            Some(serde_json::to_string(&assertion).unwrap().into()),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(lifetime(r.json()["token"].as_str().unwrap()), 900);
    // The console's session cookie
    app.clock.advance(Duration::seconds(30));
    let (http, csrf, console) = console_sign_in(&app, &key, Some(&secret)).await;
    assert_eq!(lifetime(&console), 900);

    // Refresh: a fresh 15 minutes each time, the same session.
    let mut token = totp_token.clone();
    app.clock.advance(Duration::minutes(10));
    let r = bearer(&app, Method::POST, REFRESH, &token, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["expires_in"], 900);
    let refreshed = r.json()["token"].as_str().unwrap().to_string();
    assert_eq!(lifetime(&refreshed), 900);
    assert_eq!(
        claims(&refreshed)["exp"].as_i64().unwrap(),
        app.clock.now().timestamp() + 900
    );
    assert_eq!(expires_at(&r), app.clock.now().timestamp() + 900);
    assert_eq!(claims(&refreshed)["jti"], claims(&token)["jti"]);
    assert_eq!(claims(&refreshed)["mfa"], true);
    // The first token is over after its 15 minutes; the refreshed one is not.
    app.clock.advance(Duration::minutes(6));
    bearer(&app, Method::GET, "/api/v1/intel/stats", &token, None)
        .await
        .assert_error(401, "unauthorized");
    bearer(&app, Method::POST, REFRESH, &token, None)
        .await
        .assert_error(401, "unauthorized");
    let r = bearer(&app, Method::GET, "/api/v1/intel/stats", &refreshed, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    // The console's cookie outlives its token: still signed in an hour later.
    app.clock.advance(Duration::minutes(44));
    let base = app.base.clone();
    let account = |session: String| {
        let (http, csrf, base) = (&http, &csrf, &base);
        async move {
            http.get(format!("{base}/console/account"))
                .header("Cookie", format!("kg_csrf={csrf}; kg_session={session}"))
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(account(console.clone()).await.status(), 200);
    bearer(&app, Method::GET, "/api/v1/intel/stats", &console, None)
        .await
        .assert_error(401, "unauthorized");

    // Refreshing every 14 minutes reaches the session's end and not past it.
    // (The session's tokens all expired meanwhile: a new sign-in.)
    bearer(&app, Method::POST, REFRESH, &refreshed, None)
        .await
        .assert_error(401, "unauthorized");
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/auth/totp",
            &key,
            Some(json!({"code": code_now(&app, &secret)})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    token = r.json()["token"].as_str().unwrap().to_string();
    let session_end = claims(&token)["iat"].as_i64().unwrap() + 12 * 3600;
    loop {
        let r = bearer(&app, Method::POST, REFRESH, &token, None).await;
        if r.status != 200 {
            r.assert_error(401, "unauthorized");
            assert!(
                app.clock.now().timestamp() >= session_end,
                "refused {}s before the session's end: {}",
                session_end - app.clock.now().timestamp(),
                r.text
            );
            break;
        }
        token = r.json()["token"].as_str().unwrap().to_string();
        let exp = claims(&token)["exp"].as_i64().unwrap();
        assert!(exp <= session_end, "a token outlives its session");
        assert_eq!(
            r.json()["expires_in"].as_i64().unwrap(),
            exp - app.clock.now().timestamp()
        );
        app.clock.advance(Duration::minutes(14));
    }
    // The console's session of the same length is over too.
    let r = account(console).await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/console/sign-in");

    // A signed-out session refreshes no more.
    let code = invite(&app, &key, "analyst").await;
    let user = redeem(&app, &code).await.json()["token"]
        .as_str()
        .unwrap()
        .to_string();
    enrol_totp(&app, &user).await;
    let r = bearer(&app, Method::POST, REFRESH, &user, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let renewed = r.json()["token"].as_str().unwrap().to_string();
    let r = bearer(&app, Method::POST, "/api/v1/auth/sign-out", &renewed, None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    for t in [&user, &renewed] {
        bearer(&app, Method::POST, REFRESH, t, None)
            .await
            .assert_error(401, "unauthorized");
    }
}
