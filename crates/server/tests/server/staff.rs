//! Staff tooling over real HTTP: impersonation sessions (every refusal, view and manage
//! modes, ending, auditing of every request), platform settings applied at once and on
//! another replica, vendors enabled and disabled, the role list with renamed labels,
//! platform administrators managed by the owner only, and the audit log's filters, cursor
//! paging and immutability.

use std::collections::BTreeSet;
use std::time::Duration as StdDuration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use model::Permission;
use model::{Clock as _, Role, TenantKind, Tier};
use reqwest::Method;
use serde_json::{Value, json};
use server::routing::{Access, ROUTES};
use testkit::{Resp, TestApp};

testkit::backend_tests!(
    impersonation_refusals,
    impersonation_view_and_manage,
    impersonation_ends,
    settings_apply_here_and_on_other_replicas,
    vendors_are_enabled_and_disabled,
    roles_with_their_labels,
    platform_administrators_by_the_owner_only,
    audit_log_filters_and_cursor,
    every_administrative_action_is_audited,
);

const IMPERSONATE: &str = "/api/v1/admin/impersonate";
const SETTINGS: &str = "/api/v1/admin/settings";
const AUDIT: &str = "/api/v1/admin/audit";

fn claims(token: &str) -> Value {
    let raw = token.split('.').nth(1).expect("JWT payload");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(raw).expect("base64url")).expect("JSON")
}

/// The platform tenant with its owner; returns the owner's key.
async fn owner(app: &TestApp) -> String {
    app.tenant(
        "platform",
        TenantKind::Platform,
        Role::PlatformOwner,
        Tier::Enterprise,
    )
    .await
    .1
}

/// A staff key of `role` issued by the owner; returns (key_id, key).
async fn staff(app: &TestApp, owner: &str, role: Role) -> (String, String) {
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/keys",
            owner,
            Some(json!({ "role": role.as_str() })),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let v = r.json();
    (
        v["key_id"].as_str().unwrap().into(),
        v["key"].as_str().unwrap().into(),
    )
}

async fn impersonate(app: &TestApp, token: &str, body: Value) -> Resp {
    app.call_bearer(
        Method::POST,
        IMPERSONATE,
        token,
        Some(body.to_string().into()),
    )
    .await
}

async fn audit(app: &TestApp, owner: &str, query: &str) -> Vec<Value> {
    let r = app
        .get_with(&format!("{AUDIT}?limit=200&{query}"), owner)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["results"].as_array().unwrap().clone()
}

/// Every refusal the rules name, each with its status and a message saying which rule.
async fn impersonation_refusals(app: TestApp) {
    let owner = owner(&app).await;
    let (_, liaison) = staff(&app, &owner, Role::ClientLiaison).await;
    let (_, admin) = staff(&app, &owner, Role::PlatformAdmin).await;
    let token = app.token(&liaison).await;
    app.account("acme", Role::AccountAdmin, Tier::Teams).await;
    app.account("frozen", Role::Analyst, Tier::Basic).await;
    app.account("sneaky", Role::PlatformAdmin, Tier::Enterprise)
        .await;
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/accounts/frozen/suspend",
            &admin,
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);

    let cases: &[(Value, u16, &str)] = &[
        (
            json!({"team_id": "platform", "mode": "view"}),
            403,
            "own team",
        ),
        (
            json!({"team_id": "nobody-here", "mode": "view"}),
            404,
            "no account",
        ),
        (
            json!({"team_id": "frozen", "mode": "manage"}),
            403,
            "suspended",
        ),
        (
            json!({"team_id": "sneaky", "mode": "view"}),
            403,
            "platform roles",
        ),
        (
            json!({"user_id": "6f1c1e9a-3b7e-4d0a-9a53-2b1f4f0c9d11", "mode": "view"}),
            404,
            "no user",
        ),
        (
            json!({"user_id": "not-a-uuid", "mode": "view"}),
            400,
            "UUID",
        ),
        (json!({"team_id": "acme", "mode": "admin"}), 400, "mode"),
        (
            json!({"team_id": "acme", "user_id": "6f1c1e9a-3b7e-4d0a-9a53-2b1f4f0c9d11", "mode": "view"}),
            400,
            "exactly one",
        ),
        (
            json!({"team_id": "Not Valid!", "mode": "view"}),
            400,
            "team id",
        ),
        (json!({"team_id": "acme"}), 400, "mode"),
    ];
    for (body, status, says) in cases {
        let r = impersonate(&app, &token, body.clone()).await;
        assert_eq!(r.status, *status, "{body}: {}", r.text);
        assert!(r.message().contains(says), "{body}: {}", r.text);
    }

    // A raw staff key is refused: sessions start from a staff JWT.
    let r = app
        .send(
            Method::POST,
            IMPERSONATE,
            &liaison,
            Some(json!({"team_id": "acme", "mode": "view"})),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.message().contains("staff JWT"), "{}", r.text);

    // Customers cannot impersonate at all: the permission and the tier say no.
    let customer = app
        .account("big-customer", Role::AccountAdmin, Tier::Enterprise)
        .await;
    let customer_token = app.token(&customer).await;
    let r = impersonate(
        &app,
        &customer_token,
        json!({"team_id": "acme", "mode": "view"}),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text);

    // A session cannot start another one, whatever its mode.
    let r = impersonate(&app, &token, json!({"team_id": "acme", "mode": "manage"})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let session = r.json()["token"].as_str().unwrap().to_string();
    let r = impersonate(
        &app,
        &session,
        json!({"team_id": "big-customer", "mode": "view"}),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.message().contains("impersonate again"), "{}", r.text);

    // Every attempt that reached the rules, refused or not, is in the audit log under the
    // staff key (malformed bodies are refused before: nothing was attempted); the refused
    // chaining attempt shows as a failed request of the session.
    let entries = audit(&app, &owner, "action=impersonate.").await;
    let denied = entries
        .iter()
        .filter(|e| e["outcome"].as_str().unwrap().starts_with("denied"))
        .count();
    assert_eq!(denied, 8, "{entries:#?}");
    assert!(entries.iter().any(|e| e["action"] == "impersonate.request"
        && e["target"] == "POST /api/v1/admin/impersonate"
        && e["outcome"] == "failed: 403"));
    assert!(
        entries
            .iter()
            .any(|e| e["action"] == "impersonate.tenant.manage" && e["outcome"] == "ok")
    );
}

/// A view session reads as the account's admin and is refused every write; a manage
/// session writes, and each request and action names the staff key and the session.
async fn impersonation_view_and_manage(app: TestApp) {
    let owner = owner(&app).await;
    let (liaison_id, liaison) = staff(&app, &owner, Role::ClientLiaison).await;
    let token = app.token(&liaison).await;
    app.account("acme", Role::AccountAdmin, Tier::Teams).await;

    let r = impersonate(&app, &token, json!({"team_id": "acme", "mode": "view"})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let v = r.json();
    assert_eq!(v["team_id"], "acme");
    assert_eq!(v["role"], "account_admin");
    assert_eq!(v["mode"], "view");
    assert_eq!(v["expires_in"], 1800);
    let view = v["token"].as_str().unwrap().to_string();
    let c = claims(&view);
    assert_eq!(c["sub"], "acme");
    assert_eq!(c["role"], "account_admin");
    assert_eq!(c["roles"], json!(["account_admin"]));
    assert_eq!(c["tier"], "teams");
    assert_eq!(c["act"], liaison_id.as_str());
    assert_eq!(c["imp_mode"], "view");
    assert!(c.get("imp_uid").is_none());
    assert_eq!(
        c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(),
        1800
    );

    // Reads as acme's account admin.
    let r = app
        .call_bearer(Method::GET, "/api/v1/admin/keys", &view, None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let teams: BTreeSet<String> = r.json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["team_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(teams, BTreeSet::from(["acme".to_string()]));
    let r = app
        .call_bearer(Method::GET, "/api/v1/intel/stats", &view, None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // No platform route, even though the staff key behind it has them.
    let r = app.call_bearer(Method::GET, SETTINGS, &view, None).await;
    assert_eq!(r.status, 403, "{}", r.text);
    // Every write is refused in view mode, and tokens are never minted or refreshed.
    let r = app
        .call_bearer(
            Method::POST,
            "/api/v1/admin/keys",
            &view,
            Some(json!({"role": "analyst"}).to_string().into()),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.message().contains("view-only"), "{}", r.text);
    let r = app
        .call_bearer(Method::POST, "/api/v1/auth/refresh", &view, None)
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    let r = app
        .call_bearer(Method::POST, "/api/v1/auth/token", &view, None)
        .await;
    assert_eq!(r.status, 403, "{}", r.text);

    // Manage mode writes, as account_admin: an analyst key, but never a platform role.
    let r = impersonate(&app, &token, json!({"team_id": "acme", "mode": "manage"})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let manage = r.json()["token"].as_str().unwrap().to_string();
    let r = app
        .call_bearer(
            Method::POST,
            "/api/v1/admin/keys",
            &manage,
            Some(
                json!({"role": "analyst", "label": "made by support"})
                    .to_string()
                    .into(),
            ),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json()["team_id"], "acme");
    let r = app
        .call_bearer(
            Method::POST,
            "/api/v1/admin/keys",
            &manage,
            Some(json!({"role": "client_liaison"}).to_string().into()),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);

    // The audit log names the staff key as actor and acme as the account, for the action
    // and for every request of both sessions, refused ones included.
    let entries = audit(&app, &owner, &format!("actor={liaison_id}&team_id=acme")).await;
    let issue = entries
        .iter()
        .find(|e| e["action"] == "key.issue" && e["outcome"] == "ok")
        .expect("key.issue audited");
    assert!(
        issue["detail"].as_str().unwrap().contains("impersonation"),
        "{issue}"
    );
    assert!(
        issue["detail"].as_str().unwrap().contains("manage"),
        "{issue}"
    );
    let requests: Vec<(String, String)> = entries
        .iter()
        .filter(|e| e["action"] == "impersonate.request")
        .map(|e| {
            (
                e["target"].as_str().unwrap().to_string(),
                e["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (target, outcome) in [
        ("GET /api/v1/admin/keys", "ok"),
        ("GET /api/v1/intel/stats", "ok"),
        ("GET /api/v1/admin/settings", "failed: 403"),
        ("POST /api/v1/admin/keys", "failed: 403"),
        ("POST /api/v1/auth/refresh", "failed: 403"),
        ("POST /api/v1/admin/keys", "ok"),
    ] {
        assert!(
            requests.iter().any(|(t, o)| t == target && o == outcome),
            "{target} {outcome} missing from {requests:#?}"
        );
    }
}

/// Ending a session, suspending its account or revoking the staff key stops its token at
/// once; the end is audited.
async fn impersonation_ends(app: TestApp) {
    let owner = owner(&app).await;
    let (liaison_id, liaison) = staff(&app, &owner, Role::ClientLiaison).await;
    let token = app.token(&liaison).await;
    app.account("acme", Role::AccountAdmin, Tier::Teams).await;
    let start = |mode: &'static str| {
        let app = &app;
        let token = token.clone();
        async move {
            let r = impersonate(app, &token, json!({"team_id": "acme", "mode": mode})).await;
            assert_eq!(r.status, 201, "{}", r.text);
            r.json()["token"].as_str().unwrap().to_string()
        }
    };

    // A view session may end itself (a DELETE, yet allowed).
    let session = start("view").await;
    let r = app
        .call_bearer(Method::DELETE, IMPERSONATE, &session, None)
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    let r = app
        .call_bearer(Method::GET, "/api/v1/intel/stats", &session, None)
        .await;
    assert_eq!(r.status, 401, "{}", r.text);
    assert!(r.message().contains("ended"), "{}", r.text);
    // Not a session: nothing to end.
    let r = app
        .call_bearer(Method::DELETE, IMPERSONATE, &token, None)
        .await;
    assert_eq!(r.status, 404, "{}", r.text);
    let ends = audit(
        &app,
        &owner,
        &format!("actor={liaison_id}&action=impersonate.end"),
    )
    .await;
    assert_eq!(
        ends.iter().filter(|e| e["outcome"] == "ok").count(),
        1,
        "{ends:#?}"
    );

    // Suspending the account ends its sessions.
    let session = start("manage").await;
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/accounts/acme/suspend",
            &owner,
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = app
        .call_bearer(Method::GET, "/api/v1/intel/stats", &session, None)
        .await;
    assert_eq!(r.status, 401, "{}", r.text);
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/accounts/acme/unsuspend",
            &owner,
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);

    // Revoking the staff key ends its sessions.
    let session = start("view").await;
    let r = app
        .call_bearer(Method::GET, "/api/v1/intel/stats", &session, None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = app
        .send(
            Method::DELETE,
            &format!("/api/v1/admin/keys/{liaison_id}"),
            &owner,
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    let r = app
        .call_bearer(Method::GET, "/api/v1/intel/stats", &session, None)
        .await;
    assert_eq!(r.status, 401, "{}", r.text);

    // A forged session token (right shape, unknown session) is refused.
    let r = app
        .call_bearer(
            Method::GET,
            "/api/v1/intel/stats",
            &format!("{session}x"),
            None,
        )
        .await;
    assert_eq!(r.status, 401, "{}", r.text);
}

/// A settings change applies to this replica at once and to another within a second;
/// a bad change is 400 and changes nothing.
async fn settings_apply_here_and_on_other_replicas(app: TestApp) {
    let owner = owner(&app).await;
    let (_, admin) = staff(&app, &owner, Role::PlatformAdmin).await;
    let customer = app.account("acme", Role::Analyst, Tier::Basic).await;
    let replica = app.replica().await;
    let upkeep = replica.spawn_maintain();

    let r = app.get_with(SETTINGS, &admin).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let before = r.json();
    assert_eq!(before["role_labels"]["analyst"], "Viewer");
    assert!(before["updated_at"].is_null());

    for bad in [
        json!({"limits": {"authenticated_per_key": 0}}),
        json!({"limits": {"per_second": 5}}),
        json!({"role_labels": {"platform_owner": "Boss"}}),
        json!({"role_labels": {"responder": "Old"}}),
        json!({"daily_refresh_at": "25:00:00"}),
        json!({"surprise": true}),
    ] {
        let r = app
            .send(Method::PATCH, SETTINGS, &admin, Some(bad.clone()))
            .await;
        assert_eq!(r.status, 400, "{bad}: {}", r.text);
    }
    assert_eq!(
        app.get_with(SETTINGS, &admin).await.json(),
        before,
        "nothing changed"
    );

    let r = app
        .send(
            Method::PATCH,
            SETTINGS,
            &admin,
            Some(json!({"limits": {"authenticated_per_key": 3}, "daily_refresh_at": "04:30:00"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["limits"]["authenticated_per_key"], 3);
    assert_eq!(v["limit_overrides"], json!({"authenticated_per_key": 3}));
    assert_eq!(v["daily_refresh_at"], "04:30:00");
    assert_eq!(v["updated_by"], app.key_id(&admin).await.as_str());

    // Here at once: the fourth request in the minute is refused.
    for _ in 0..3 {
        assert_eq!(
            app.get_with("/api/v1/intel/stats", &customer).await.status,
            200
        );
    }
    let r = app.get_with("/api/v1/intel/stats", &customer).await;
    assert_eq!(r.status, 429, "{}", r.text);

    // On the other replica within a second (its own limiter: three more, then refused).
    tokio::time::sleep(StdDuration::from_millis(1200)).await;
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(
            replica
                .get_with("/api/v1/intel/stats", &customer)
                .await
                .status,
        );
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    let r = replica.get_with(SETTINGS, &admin).await;
    assert_eq!(r.json()["limits"]["authenticated_per_key"], 3);

    let changes = audit(&app, &owner, "action=settings.change").await;
    assert_eq!(changes.iter().filter(|e| e["outcome"] == "ok").count(), 1);
    // The three refused by the rules (the others were not settings at all).
    assert_eq!(
        changes.iter().filter(|e| e["outcome"] != "ok").count(),
        3,
        "{changes:#?}"
    );
    drop(upkeep);
    replica.store.close().await;
}

/// Disabling a vendor leaves it out of every refresh (the refresh-now route says so);
/// unknown vendors are 404; the staff health view lists the latest job leases.
async fn vendors_are_enabled_and_disabled(app: TestApp) {
    let owner = owner(&app).await;
    let r = app.get_with("/api/v1/admin/vendors", &owner).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let vendors = r.json()["vendors"].as_array().unwrap().clone();
    assert!(vendors.len() >= 10, "{vendors:#?}");
    let first = vendors[0]["vendor"].as_str().unwrap().to_string();

    let r = app
        .send(
            Method::POST,
            &format!("/api/v1/admin/vendors/{first}/disable"),
            &owner,
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let listed = r.json()["vendors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vendor"] == first.as_str())
        .cloned()
        .unwrap();
    assert_eq!(listed["enabled"], false);
    assert_eq!(listed["disabled_by_staff"], true);
    let r = app
        .send(
            Method::POST,
            &format!("/api/v1/admin/vendors/{first}/refresh"),
            &owner,
            None,
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.message().contains("disabled"), "{}", r.text);
    let settings = app.get_with(SETTINGS, &owner).await.json();
    assert_eq!(settings["disabled_vendors"], json!([first]));

    let r = app
        .send(
            Method::POST,
            &format!("/api/v1/admin/vendors/{first}/enable"),
            &owner,
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        app.get_with(SETTINGS, &owner).await.json()["disabled_vendors"],
        json!([])
    );

    for path in [
        "/api/v1/admin/vendors/no-such-vendor/disable",
        "/api/v1/admin/vendors/no-such-vendor/refresh",
    ] {
        let r = app.send(Method::POST, path, &owner, None).await;
        assert_eq!(r.status, 404, "{path}: {}", r.text);
    }
    // Job health: the latest leases, running or finished, with their holders.
    let now = app.clock.now();
    assert!(
        app.store
            .try_lease(
                "vendor.refresh:test-day",
                "replica-a",
                now + chrono::Duration::hours(1),
                now
            )
            .await
            .unwrap()
    );
    assert!(
        app.store
            .try_lease(
                "translog.publish:test-day",
                "replica-b",
                now + chrono::Duration::minutes(5),
                now
            )
            .await
            .unwrap()
    );
    app.store
        .finish_lease(
            "translog.publish:test-day",
            "replica-b",
            now,
            now + chrono::Duration::minutes(5),
        )
        .await
        .unwrap();
    let health = app.get_with("/api/v1/admin/health", &owner).await;
    assert_eq!(health.status, 200, "{}", health.text);
    let jobs = health.json()["jobs"].as_array().unwrap().clone();
    assert_eq!(jobs[0]["lease"], "vendor.refresh:test-day");
    assert_eq!(jobs[0]["holder"], "replica-a");
    assert_eq!(jobs[0]["running"], true);
    assert_eq!(jobs[1]["lease"], "translog.publish:test-day");
    assert_eq!(jobs[1]["running"], false);
    assert!(jobs[1]["finished_at"].is_string());

    let entries = audit(&app, &owner, "action=vendor.").await;
    let actions: BTreeSet<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        BTreeSet::from(["vendor.disable", "vendor.enable", "vendor.refresh"])
    );
}

/// The fixed roles in rank order with their permissions; customer labels renamed per
/// deployment, platform labels fixed.
async fn roles_with_their_labels(app: TestApp) {
    let owner = owner(&app).await;
    let r = app
        .send(
            Method::PATCH,
            SETTINGS,
            &owner,
            Some(json!({"role_labels": {"analyst": "Reader", "auditor": "Investigator"}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = app.get_with("/api/v1/admin/roles", &owner).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let roles = r.json()["roles"].as_array().unwrap().clone();
    let names: Vec<&str> = roles.iter().map(|r| r["role"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "analyst",
            "auditor",
            "account_admin",
            "client_liaison",
            "platform_admin",
            "platform_owner"
        ]
    );
    assert_eq!(roles[0]["label"], "Reader");
    assert_eq!(roles[1]["label"], "Investigator");
    assert_eq!(roles[2]["label"], "Account Admin");
    assert_eq!(roles[0]["kind"], "customer");
    assert_eq!(roles[5]["kind"], "platform");
    assert_eq!(
        roles[0]["permissions"],
        json!(["intel:stats", "intel:lookup", "intel:history"])
    );
    assert!(
        roles[5]["permissions"]
            .as_array()
            .unwrap()
            .contains(&json!("platform:admin"))
    );
    assert!(
        !roles[4]["permissions"]
            .as_array()
            .unwrap()
            .contains(&json!("platform:admin"))
    );
    // Read-only: the routes that list roles accept nothing else.
    assert!(
        ROUTES
            .iter()
            .filter(|r| r.path.starts_with("/api/v1/admin/roles"))
            .all(|r| r.method == Method::GET)
    );
    // An empty label restores the default.
    let r = app
        .send(
            Method::PATCH,
            SETTINGS,
            &owner,
            Some(json!({"role_labels": {"analyst": ""}})),
        )
        .await;
    assert_eq!(r.json()["role_labels"]["analyst"], "Viewer");
}

/// Only the owner lists, adds and removes platform administrators; the owner stays.
async fn platform_administrators_by_the_owner_only(app: TestApp) {
    let owner_key = owner(&app).await;
    let owner_id = app.key_id(&owner_key).await;
    let (_, peer) = staff(&app, &owner_key, Role::PlatformAdmin).await;

    // A platform admin cannot see, add or remove its peers.
    for (method, path) in [
        (Method::GET, "/api/v1/admin/platform-admins".to_string()),
        (Method::POST, "/api/v1/admin/platform-admins".to_string()),
        (
            Method::DELETE,
            format!("/api/v1/admin/platform-admins/{owner_id}"),
        ),
    ] {
        let body = (method == Method::POST).then(|| json!({}));
        let r = app.send(method.clone(), &path, &peer, body).await;
        assert_eq!(r.status, 403, "{method} {path}: {}", r.text);
    }

    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/platform-admins",
            &owner_key,
            Some(json!({"label": "night shift"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let new = r.json();
    assert_eq!(new["role"], "platform_admin");
    assert_eq!(new["team_id"], "platform");
    let new_key = new["key"].as_str().unwrap().to_string();
    let new_id = new["key_id"].as_str().unwrap().to_string();
    assert_eq!(app.get_with(SETTINGS, &new_key).await.status, 200);

    let r = app
        .get_with("/api/v1/admin/platform-admins", &owner_key)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let listed: BTreeSet<(String, String)> = r.json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["key"]["key_id"].as_str().unwrap().into(),
                a["role"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        listed.contains(&(owner_id.clone(), "platform_owner".into())),
        "{listed:?}"
    );
    assert!(
        listed.contains(&(new_id.clone(), "platform_admin".into())),
        "{listed:?}"
    );
    assert_eq!(listed.len(), 3, "owner, peer and the new one: {listed:?}");

    let r = app
        .send(
            Method::DELETE,
            &format!("/api/v1/admin/platform-admins/{owner_id}"),
            &owner_key,
            None,
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    let r = app
        .send(
            Method::DELETE,
            &format!("/api/v1/admin/platform-admins/{new_id}"),
            &owner_key,
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    assert_eq!(app.get_with(SETTINGS, &new_key).await.status, 401);
    let r = app
        .send(
            Method::DELETE,
            "/api/v1/admin/platform-admins/key_0000",
            &owner_key,
            None,
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.text);
}

/// Filters narrow the log; the cursor walks it page by page, newest first, each entry
/// once; no route can alter or delete an entry.
async fn audit_log_filters_and_cursor(app: TestApp) {
    let owner = owner(&app).await;
    let owner_id = app.key_id(&owner).await;
    app.account("acme", Role::AccountAdmin, Tier::Teams).await;
    for i in 0..7 {
        let r = app
            .send(
                Method::POST,
                "/api/v1/admin/keys",
                &owner,
                Some(json!({"role": "analyst", "team_id": "acme", "label": format!("k{i}")})),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/keys",
            &owner,
            Some(json!({"role": "responder", "team_id": "acme"})),
        )
        .await;
    assert_eq!(r.status, 400);
    app.clock.advance(chrono::Duration::days(2));
    let r = app
        .send(
            Method::PATCH,
            SETTINGS,
            &owner,
            Some(json!({"limits": {"public_per_ip": 500}})),
        )
        .await;
    assert_eq!(r.status, 200);

    let all = audit(&app, &owner, "").await;
    assert_eq!(all.len(), 9, "{all:#?}");
    assert_eq!(all[0]["action"], "settings.change", "newest first");
    let issued = audit(&app, &owner, "action=key.").await;
    assert_eq!(issued.len(), 8);
    assert_eq!(
        audit(&app, &owner, "action=key.issue&target=acme")
            .await
            .len(),
        8
    );
    assert_eq!(
        audit(&app, &owner, &format!("actor={owner_id}"))
            .await
            .len(),
        9
    );
    assert_eq!(audit(&app, &owner, "actor=key_nobody").await.len(), 0);
    // An action filter is a plain prefix: `%` and `_` match only themselves.
    assert_eq!(audit(&app, &owner, "action=key%25").await.len(), 0);
    assert_eq!(audit(&app, &owner, "action=%25").await.len(), 0);
    let today = app.clock.now().date_naive();
    assert_eq!(
        audit(&app, &owner, &format!("since={today}")).await.len(),
        1
    );
    let before = today - chrono::Duration::days(1);
    assert_eq!(
        audit(&app, &owner, &format!("until={before}")).await.len(),
        8
    );

    // Three pages of three, then none.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = cursor
            .as_ref()
            .map_or(String::new(), |c| format!("&cursor={c}"));
        let r = app.get_with(&format!("{AUDIT}?limit=3{q}"), &owner).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let page = r.json();
        seen.extend(page["results"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(seen, all);
    for bad in [
        "cursor=abc",
        "cursor=-1",
        "since=yesterday",
        "limit=0",
        "limit=201",
    ] {
        let r = app.get_with(&format!("{AUDIT}?{bad}"), &owner).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.text);
    }

    // The API has no way to change the log: only GET routes under it.
    assert!(
        ROUTES
            .iter()
            .filter(|r| r.path.starts_with(AUDIT))
            .all(|r| r.method == Method::GET)
    );
    for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
        let r = app
            .send(method.clone(), AUDIT, &owner, Some(json!({})))
            .await;
        assert_eq!(r.status, 405, "{method}: {}", r.text);
    }
    assert_eq!(audit(&app, &owner, "").await, all, "unchanged");
}

/// Who sends an administrative request.
enum Caller<'a> {
    Key(&'a str),
    Bearer(&'a str),
}

/// (method, route template, concrete path, body, caller, audited action, acting key id)
type AdminAction<'a> = (
    Method,
    &'a str,
    String,
    Option<Value>,
    Caller<'a>,
    &'a str,
    &'a str,
);

/// Every administrative write route, done for real (as staff, or in an impersonation
/// session), leaves an audit entry naming its action, the acting key and its outcome. The
/// table must cover every such route, so a new one cannot skip the audit unnoticed.
async fn every_administrative_action_is_audited(app: TestApp) {
    let owner = owner(&app).await;
    let owner_id = app.key_id(&owner).await;
    let (liaison_id, liaison) = staff(&app, &owner, Role::ClientLiaison).await;
    let liaison_token = app.token(&liaison).await;
    let acme = app.account("acme", Role::AccountAdmin, Tier::Teams).await;
    let acme_id = app.key_id(&acme).await;
    let (target_id, _) = staff(&app, &owner, Role::Analyst).await;
    let vendor = app.get_with("/api/v1/admin/vendors", &owner).await.json()["vendors"][0]["vendor"]
        .as_str()
        .unwrap()
        .to_string();
    let r = app
        .send(
            Method::POST,
            "/api/v1/admin/platform-admins",
            &owner,
            Some(json!({})),
        )
        .await;
    let admin_id = r.json()["key_id"].as_str().unwrap().to_string();
    let r = impersonate(
        &app,
        &liaison_token,
        json!({"team_id": "acme", "mode": "manage"}),
    )
    .await;
    let session = r.json()["token"].as_str().unwrap().to_string();

    let actions: Vec<AdminAction> = vec![
        (
            Method::POST,
            "/api/v1/admin/keys",
            "/api/v1/admin/keys".into(),
            Some(json!({"role": "analyst"})),
            Caller::Key(&owner),
            "key.issue",
            &owner_id,
        ),
        (
            Method::PATCH,
            "/api/v1/admin/keys/{key_id}",
            format!("/api/v1/admin/keys/{target_id}"),
            Some(json!({"label": "renamed"})),
            Caller::Key(&owner),
            "key.update",
            &owner_id,
        ),
        (
            Method::POST,
            "/api/v1/admin/keys/{key_id}/roles",
            format!("/api/v1/admin/keys/{target_id}/roles"),
            Some(json!({"role": "auditor"})),
            Caller::Key(&owner),
            "role.grant:auditor",
            &owner_id,
        ),
        (
            Method::DELETE,
            "/api/v1/admin/keys/{key_id}/roles/{role}",
            format!("/api/v1/admin/keys/{target_id}/roles/auditor"),
            None,
            Caller::Key(&owner),
            "role.revoke:auditor",
            &owner_id,
        ),
        (
            Method::POST,
            "/api/v1/admin/keys/{key_id}/reissue",
            format!("/api/v1/admin/keys/{target_id}/reissue"),
            None,
            Caller::Key(&owner),
            "key.reissue",
            &owner_id,
        ),
        (
            Method::POST,
            "/api/v1/admin/accounts/{team_id}/suspend",
            "/api/v1/admin/accounts/acme/suspend".into(),
            None,
            Caller::Key(&owner),
            "account.suspend",
            &owner_id,
        ),
        (
            Method::POST,
            "/api/v1/admin/accounts/{team_id}/unsuspend",
            "/api/v1/admin/accounts/acme/unsuspend".into(),
            None,
            Caller::Key(&owner),
            "account.unsuspend",
            &owner_id,
        ),
        (
            Method::PATCH,
            SETTINGS,
            SETTINGS.into(),
            Some(json!({"limits": {"public_per_ip": 400}})),
            Caller::Key(&owner),
            "settings.change",
            &owner_id,
        ),
        (
            Method::POST,
            "/api/v1/admin/vendors/{vendor}/disable",
            format!("/api/v1/admin/vendors/{vendor}/disable"),
            None,
            Caller::Key(&owner),
            "vendor.disable",
            &owner_id,
        ),
        (
            Method::POST,
            "/api/v1/admin/vendors/{vendor}/enable",
            format!("/api/v1/admin/vendors/{vendor}/enable"),
            None,
            Caller::Key(&owner),
            "vendor.enable",
            &owner_id,
        ),
        // No vendor is reachable here: refused (409 or a failed start), still audited.
        (
            Method::POST,
            "/api/v1/admin/vendors/{vendor}/refresh",
            "/api/v1/admin/vendors/no-such-vendor/refresh".into(),
            None,
            Caller::Key(&owner),
            "vendor.refresh",
            &owner_id,
        ),
        (
            Method::POST,
            "/api/v1/admin/platform-admins",
            "/api/v1/admin/platform-admins".into(),
            Some(json!({"label": "second"})),
            Caller::Key(&owner),
            "key.issue",
            &owner_id,
        ),
        (
            Method::DELETE,
            "/api/v1/admin/platform-admins/{key_id}",
            format!("/api/v1/admin/platform-admins/{admin_id}"),
            None,
            Caller::Key(&owner),
            "key.revoke",
            &owner_id,
        ),
        (
            Method::POST,
            "/api/v1/admin/invites",
            "/api/v1/admin/invites".into(),
            Some(json!({"role": "analyst", "display_name": "Ann", "contact": "ann@example.org"})),
            Caller::Key(&acme),
            "user.invite",
            &acme_id,
        ),
        (
            Method::POST,
            IMPERSONATE,
            IMPERSONATE.into(),
            Some(json!({"team_id": "acme", "mode": "view"})),
            Caller::Bearer(&liaison_token),
            "impersonate.tenant.view",
            &liaison_id,
        ),
        (
            Method::DELETE,
            IMPERSONATE,
            IMPERSONATE.into(),
            None,
            Caller::Bearer(&session),
            "impersonate.end",
            &liaison_id,
        ),
        (
            Method::DELETE,
            "/api/v1/admin/keys/{key_id}",
            "/api/v1/admin/keys/{target}".into(),
            None,
            Caller::Key(&owner),
            "key.revoke",
            &owner_id,
        ),
    ];
    let covered: BTreeSet<(String, String)> = actions
        .iter()
        .map(|(m, route, ..)| (m.to_string(), route.to_string()))
        .collect();
    let staff_permissions = [
        Permission::TenantManage,
        Permission::TenantImpersonate,
        Permission::PlatformKeys,
        Permission::PlatformSettings,
        Permission::PlatformAdmin,
    ];
    for route in ROUTES
        .iter()
        .filter(|r| r.method != Method::GET && r.path.starts_with("/api/v1/admin/"))
    {
        let administrative = matches!(route.access, Access::Authenticated { permission: Some(p), .. } if staff_permissions.contains(&p))
            || route.path == IMPERSONATE;
        if administrative {
            assert!(
                covered.contains(&(route.method.to_string(), route.path.clone())),
                "{} {} is not exercised here",
                route.method,
                route.path
            );
        }
    }

    let mut target_id = target_id;
    for (method, route, path, body, caller, action, actor) in actions {
        // The reissued key has a new id: later rows act on the replacement.
        let path = path.replace("{target}", &target_id);
        let before = audit(&app, &owner, &format!("action={action}")).await.len();
        let body_text = body.map(|b| b.to_string().into());
        let r = match caller {
            Caller::Key(key) => app.call(method.clone(), &path, Some(key), body_text).await,
            Caller::Bearer(token) => {
                app.call_bearer(method.clone(), &path, token, body_text)
                    .await
            }
        };
        assert!(r.status < 500, "{method} {route}: {}", r.text);
        let after = audit(&app, &owner, &format!("action={action}")).await;
        assert_eq!(
            after.len(),
            before + 1,
            "{method} {route} ({}) left no {action} entry",
            r.status
        );
        assert_eq!(after[0]["actor"], actor, "{method} {route}");
        if r.status < 300 {
            assert_eq!(after[0]["outcome"], "ok", "{method} {route}");
        } else {
            assert!(
                after[0]["outcome"].as_str().unwrap().starts_with("denied"),
                "{method} {route}"
            );
        }
        if route.ends_with("/reissue") {
            target_id = r.json()["key_id"].as_str().unwrap().to_string();
        }
    }
}
