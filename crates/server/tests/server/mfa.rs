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
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/mfa/recovery/generate",
            &key,
            None,
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
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/mfa/recovery/generate",
            &key,
            None,
        )
        .await;
    assert_eq!(r.status, 200);
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

    // Unknown hint: 404; removing the passkey.
    let r = app
        .call(
            Method::POST,
            "/api/v1/admin/auth/passkey/begin",
            None,
            Some(
                json!({"user_handle": "AAAAAAAAAAAAAAAAAAAAAA"})
                    .to_string()
                    .into(),
            ),
        )
        .await;
    r.assert_error(404, "not found");
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
