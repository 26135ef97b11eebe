//! The console over real HTTP, without a browser (the browser suite in tests/browser drives
//! the same pages in Chromium): its security headers, the CSRF double submit, the session
//! cookie's flags, signing out revoking the session, and its scripts served locally.

use model::{Clock as _, Role, Tier};
use reqwest::header::{HeaderMap, SET_COOKIE};
use reqwest::redirect::Policy;
use testkit::TestApp;

testkit::backend_tests!(
    pages_carry_a_strict_policy_and_no_inline_script,
    forms_need_the_csrf_token_and_sign_out_revokes,
    every_key_holder_reissues_its_own_key_on_account,
    key_sign_in_is_under_the_failed_credential_limit with the_api_failure_limits,
    unknown_console_paths_answer_the_console_404_page,
    invited_users_sign_in_again_with_what_they_enrolled,
    lookup_marks_superseded_builds_with_the_current_version,
    totp_enrolment_retries_and_recovery_codes_follow_the_factor,
    revocations_page_puts_active_certificates_first_and_exports,
    coverage_page_counts_records_shows_channel_errors_and_exports,
    packages_page_checks_names_scans_sboms_and_keeps_a_watchlist,
    keys_page_issues_labels_reissues_and_revokes_keys,
    usage_chart_has_axes_dates_and_the_quota_share,
    lookup_answers_dropped_files_by_name_and_marks_bad_lines,
    history_without_a_match_suggests_names_by_prefix,
    console_authorization_matrix,
    dashboard_search_reads_names_by_prefix_and_vendors_and_caps_the_list,
);

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap()
}

/// `name=value` of a `Set-Cookie`, with its attributes.
fn set_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_string)
}

fn value(cookie: &str) -> String {
    cookie
        .split(';')
        .next()
        .unwrap()
        .split_once('=')
        .unwrap()
        .1
        .to_string()
}

async fn pages_carry_a_strict_policy_and_no_inline_script(app: TestApp) {
    let http = client();
    for path in ["/console/", "/console/sign-in", "/console/invite"] {
        let r = http
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let csp = r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"));
        assert_eq!(r.headers()["x-frame-options"], "DENY");
        let csrf = set_cookie(r.headers(), "kg_csrf").expect("a CSRF cookie");
        assert!(
            csrf.contains("HttpOnly") && csrf.contains("SameSite=Strict"),
            "{csrf}"
        );
        // The default origin is plain http on loopback: no Secure flag there.
        assert!(!csrf.contains("Secure"));
        let html = r.text().await.unwrap();
        assert!(!html.contains("<script>"), "{path} has an inline script");
        assert!(html.contains(r#"<script src="/console/static/console.js" defer>"#));
    }
    let r = http
        .get(format!("{}/console/static/console.js", app.base))
        .send()
        .await
        .unwrap();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("navigator.credentials.create")
    );
    // Pages behind sign-in send the browser to it.
    let r = http
        .get(format!("{}/console/account", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/console/sign-in");
}

async fn forms_need_the_csrf_token_and_sign_out_revokes(app: TestApp) {
    let key = app.account("acme", Role::AccountAdmin, Tier::Teams).await;
    let http = client();
    let r = http
        .get(format!("{}/console/sign-in", app.base))
        .send()
        .await
        .unwrap();
    let csrf = value(&set_cookie(r.headers(), "kg_csrf").unwrap());

    // No token, or one that does not match the cookie: 403 and no session.
    for sent in ["", "0123456789abcdef0123456789abcdef0123456789abcdef"] {
        let r = http
            .post(format!("{}/console/sign-in", app.base))
            .header("Cookie", format!("kg_csrf={csrf}"))
            .form(&[("key", key.as_str()), ("csrf", sent)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403);
        assert!(set_cookie(r.headers(), "kg_session").is_none());
    }

    let r = http
        .post(format!("{}/console/sign-in", app.base))
        .header("Cookie", format!("kg_csrf={csrf}"))
        .form(&[("key", key.as_str()), ("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/console/account?enrol=1");
    let session = set_cookie(r.headers(), "kg_session").expect("a session cookie");
    assert!(session.contains("HttpOnly") && session.contains("SameSite=Strict"));
    let token = value(&session);
    // A first sign-in without a factor: the API answers MFA_REQUIRED to its session.
    let r = app
        .call_bearer(reqwest::Method::GET, "/api/v1/intel/stats", &token, None)
        .await;
    r.assert_error(403, "MFA_REQUIRED");

    let cookies = format!("kg_csrf={csrf}; kg_session={token}");
    let r = http
        .post(format!("{}/console/sign-out", app.base))
        .header("Cookie", &cookies)
        .form(&[("csrf", "wrong")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = http
        .post(format!("{}/console/sign-out", app.base))
        .header("Cookie", &cookies)
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert!(
        set_cookie(r.headers(), "kg_session")
            .unwrap()
            .contains("Max-Age=0")
    );
    let r = app
        .call_bearer(
            reqwest::Method::GET,
            "/api/v1/admin/mfa/status",
            &token,
            None,
        )
        .await;
    r.assert_error(401, "unauthorized");
}

/// A browser's cookies for the console: the CSRF token, and the session and pending
/// sign-in cookies as the server sets and clears them.
struct Browser {
    http: reqwest::Client,
    base: String,
    csrf: String,
    session: Option<String>,
    pending: Option<String>,
}

impl Browser {
    async fn open(app: &TestApp) -> Self {
        let http = client();
        let r = http
            .get(format!("{}/console/sign-in", app.base))
            .send()
            .await
            .unwrap();
        let csrf = value(&set_cookie(r.headers(), "kg_csrf").unwrap());
        Self {
            http,
            base: app.base.clone(),
            csrf,
            session: None,
            pending: None,
        }
    }

    fn cookies(&self) -> String {
        let mut c = format!("kg_csrf={}", self.csrf);
        if let Some(s) = &self.session {
            c.push_str(&format!("; kg_session={s}"));
        }
        if let Some(p) = &self.pending {
            c.push_str(&format!("; kg_pending={p}"));
        }
        c
    }

    fn keep(&mut self, headers: &HeaderMap) {
        for (name, slot) in [
            ("kg_session", &mut self.session),
            ("kg_pending", &mut self.pending),
        ] {
            if let Some(c) = set_cookie(headers, name) {
                let v = value(&c);
                *slot = (!v.is_empty()).then_some(v);
            }
        }
    }

    async fn get(&mut self, path: &str) -> (u16, HeaderMap, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .header("Cookie", self.cookies())
            .send()
            .await
            .unwrap();
        self.keep(r.headers());
        let (status, headers) = (r.status().as_u16(), r.headers().clone());
        (status, headers, r.text().await.unwrap())
    }

    async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> (u16, HeaderMap, String) {
        let mut form: Vec<(&str, &str)> = vec![("csrf", self.csrf.as_str())];
        form.extend_from_slice(fields);
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("Cookie", self.cookies())
            .form(&form)
            .send()
            .await
            .unwrap();
        self.keep(r.headers());
        let (status, headers) = (r.status().as_u16(), r.headers().clone());
        (status, headers, r.text().await.unwrap())
    }
}

/// The text between `start` and the next `end` in `html`.
fn between<'a>(html: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = html.find(start)? + start.len();
    let len = html[from..].find(end)?;
    Some(&html[from..from + len])
}

fn code_now(app: &TestApp, secret: &str) -> String {
    auth::mfa::totp_at(
        &testkit::fixtures::base32_decode(secret),
        app.clock.now().timestamp(),
    )
}

/// Signs in with `key` and sets up an authenticator app on Account, as a first-time user
/// does; returns the browser (its session passed the second factor) and the TOTP secret.
async fn sign_in_and_enrol(app: &TestApp, key: &str) -> (Browser, String) {
    let mut b = Browser::open(app).await;
    let (status, headers, _) = b.post("/console/sign-in", &[("key", key)]).await;
    assert_eq!(status, 303);
    assert_eq!(headers["location"], "/console/account?enrol=1");
    let (status, _, html) = b.post("/console/account/totp/enroll", &[]).await;
    assert_eq!(status, 200, "{html}");
    let secret = between(&html, "data-totp-secret>", "<")
        .expect("the secret on the page")
        .to_string();
    let code = code_now(app, &secret);
    let (status, headers, html) = b
        .post("/console/account/totp/verify", &[("code", &code)])
        .await;
    assert_eq!(status, 303, "{html}");
    assert_eq!(headers["location"], "/console/account");
    (b, secret)
}

async fn every_key_holder_reissues_its_own_key_on_account(app: TestApp) {
    for (team, role) in [
        ("acme-analyst", Role::Analyst),
        ("acme-auditor", Role::Auditor),
        ("acme-admin", Role::AccountAdmin),
    ] {
        let key = app.account(team, role, Tier::Teams).await;
        let (mut b, _) = sign_in_and_enrol(&app, &key).await;
        let (status, _, html) = b.get("/console/account").await;
        assert_eq!(status, 200);
        assert!(html.contains("Reissue my key"), "{role}: {html}");
        let (status, _, html) = b.post("/console/account/reissue", &[]).await;
        assert_eq!(status, 200, "{role}: {html}");
        let new_key = between(&html, "data-new-key>", "<")
            .unwrap_or_else(|| panic!("{role}: no new key shown: {html}"))
            .to_string();
        assert_ne!(new_key, key);
        // The old key stopped working at once, and the console session with it.
        app.get_with("/api/v1/intel/stats", &key)
            .await
            .assert_error(401, "unauthorized");
        assert!(b.session.is_none(), "{role}: the session cookie is cleared");
        assert_eq!(
            app.get_with("/api/v1/intel/stats", &new_key).await.status,
            200,
            "{role}"
        );
        // The new key keeps the role and the authenticator app: signing in asks for it.
        let mut b = Browser::open(&app).await;
        let (status, headers, _) = b.post("/console/sign-in", &[("key", &new_key)]).await;
        assert_eq!(status, 303);
        assert_eq!(headers["location"], "/console/second-factor", "{role}");
        let audit = app
            .text_rows(
                "SELECT outcome FROM audit_log WHERE action = 'key.reissue' AND team_id = $1",
                &[team],
            )
            .await;
        assert_eq!(audit.len(), 1, "{role}: one audited reissue");
    }
}

/// The documented failed-credential limits (the test default raises them out of reach).
fn the_api_failure_limits(s: &mut server::Settings) {
    let documented = server::Settings::default().limits;
    s.limits.failed_auth_per_ip = documented.failed_auth_per_ip;
    s.limits.failed_auth_per_team = documented.failed_auth_per_team;
}

async fn key_sign_in_is_under_the_failed_credential_limit(app: TestApp) {
    let key = app.account("acme", Role::Analyst, Tier::Teams).await;
    let mut b = Browser::open(&app).await;
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for i in 0..40 {
        let bad = format!("acme.{}", "A".repeat(40 + i));
        let (status, headers, html) = b.post("/console/sign-in", &[("key", &bad)]).await;
        if status == 429 {
            retry_after = headers.get("retry-after").cloned();
            assert!(html.contains("Too many failed sign-ins"), "{html}");
        } else {
            assert!(html.contains("That key is not valid."), "{html}");
        }
        statuses.push(status);
    }
    // The API's limit (30 failures a minute per address) holds here too.
    assert!(statuses[..30].iter().all(|s| *s == 401), "{statuses:?}");
    assert!(statuses[30..].iter().all(|s| *s == 429), "{statuses:?}");
    assert!(retry_after.is_some(), "a 429 says when to retry");
    // The API counts the same failures: the address is over its limit there as well.
    let r = app
        .get_with("/api/v1/intel/stats", &format!("acme.{}", "B".repeat(43)))
        .await;
    assert_eq!(r.status, 429, "{}", r.text);
    // A valid key still signs in.
    let (status, headers, _) = b.post("/console/sign-in", &[("key", &key)]).await;
    assert_eq!(status, 303);
    assert_eq!(headers["location"], "/console/account?enrol=1");
}

async fn unknown_console_paths_answer_the_console_404_page(app: TestApp) {
    let http = client();
    for path in ["/console/nonexistent", "/console/lookup/extra/parts"] {
        let r = http
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path}");
        let h = r.headers();
        assert!(
            h["content-type"].to_str().unwrap().starts_with("text/html"),
            "{path}"
        );
        assert!(
            h["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'")
        );
        assert_eq!(h["x-frame-options"], "DENY");
        assert_eq!(h["cache-control"], "no-store");
        let html = r.text().await.unwrap();
        assert!(html.contains("<h1>Page not found</h1>"), "{html}");
        assert!(html.contains(r#"href="/console/sign-in""#), "{html}");
    }
    // The API keeps its JSON 404.
    let r = app.get("/api/v1/nonexistent").await;
    r.assert_error(404, "not found");
    let r = http
        .get(format!("{}/favicon.ico", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/x-icon");
    let icon = r.bytes().await.unwrap();
    assert_eq!(&icon[..4], &[0, 0, 1, 0], "an ICO header");
}

/// The first step of an invited user's sign-in: the user ID, then the second factor.
async fn sign_in_user(b: &mut Browser, user_id: &str) {
    let (status, headers, _) = b.post("/console/sign-in/user", &[("user", user_id)]).await;
    assert_eq!(status, 303);
    assert_eq!(headers["location"], "/console/second-factor");
    assert!(b.pending.is_some());
}

async fn invited_users_sign_in_again_with_what_they_enrolled(app: TestApp) {
    let admin = app.account("acme", Role::AccountAdmin, Tier::Teams).await;
    let r = app
        .send(
            reqwest::Method::POST,
            "/api/v1/admin/invites",
            &admin,
            Some(serde_json::json!({"role": "auditor", "display_name": "Ada", "contact": "ada@example.org"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let code = r.json()["code"].as_str().unwrap().to_string();

    // Redeem the invite in the console, set up an authenticator app, keep recovery codes.
    let mut b = Browser::open(&app).await;
    let (status, headers, _) = b.post("/console/invite", &[("code", &code)]).await;
    assert_eq!(status, 303);
    assert_eq!(headers["location"], "/console/account?enrol=1");
    let (_, _, html) = b.get("/console/account").await;
    let user_id = between(&html, "data-user-id>", "<")
        .expect("the Account page shows the user ID to sign in with")
        .to_string();
    let (_, _, html) = b.post("/console/account/totp/enroll", &[]).await;
    let secret = between(&html, "data-totp-secret>", "<")
        .unwrap()
        .to_string();
    let (status, _, _) = b
        .post(
            "/console/account/totp/verify",
            &[("code", &code_now(&app, &secret))],
        )
        .await;
    assert_eq!(status, 303);
    let (status, _, html) = b.post("/console/account/recovery", &[]).await;
    assert_eq!(status, 200, "{html}");
    let recovery = between(&html, "<li><code>", "<").unwrap().to_string();
    b.post("/console/sign-out", &[]).await;
    assert!(b.session.is_none());

    // The invite code worked once only.
    let mut b = Browser::open(&app).await;
    let (status, _, _) = b.post("/console/invite", &[("code", &code)]).await;
    assert_eq!(status, 401);

    // The sign-in page offers the user sign-in; the user ID leads to the second factor.
    let (_, _, html) = b.get("/console/sign-in").await;
    assert!(html.contains(r#"action="/console/sign-in/user""#), "{html}");
    sign_in_user(&mut b, &user_id).await;
    app.clock.advance(chrono::Duration::seconds(30));
    let (status, _, html) = b
        .post(
            "/console/second-factor/totp",
            &[("code", &code_now(&app, &secret))],
        )
        .await;
    assert_eq!(status, 303, "{html}");
    assert!(b.session.is_some() && b.pending.is_none());
    let token = b.session.clone().unwrap();
    // A full session of the invited user, with the invite's role.
    let r = app
        .call_bearer(reqwest::Method::GET, "/api/v1/intel/stats", &token, None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (status, _, html) = b.get("/console/account").await;
    assert_eq!(status, 200);
    assert!(
        html.contains(&user_id) && html.contains("auditor"),
        "{html}"
    );
    b.post("/console/sign-out", &[]).await;

    // A recovery code, used once.
    let mut b = Browser::open(&app).await;
    sign_in_user(&mut b, &user_id).await;
    let (status, headers, _) = b
        .post("/console/second-factor/recovery", &[("code", &recovery)])
        .await;
    assert_eq!(status, 303);
    assert_eq!(headers["location"], "/console/account?recovery_left=9");
    b.post("/console/sign-out", &[]).await;
    let mut b = Browser::open(&app).await;
    sign_in_user(&mut b, &user_id).await;
    let (status, _, _) = b
        .post("/console/second-factor/recovery", &[("code", &recovery)])
        .await;
    assert_eq!(status, 401, "a recovery code works once");

    // Wrong codes spend the same budget as a key's: the fifth locks the user out, audited.
    app.clock.advance(chrono::Duration::seconds(30));
    let right = code_now(&app, &secret);
    let wrong = if right == "000000" {
        "111111"
    } else {
        "000000"
    };
    let mut last = 0;
    for _ in 0..4 {
        last = b
            .post("/console/second-factor/totp", &[("code", wrong)])
            .await
            .0;
    }
    assert_eq!(
        last, 429,
        "one wrong recovery code and four wrong TOTP codes lock out"
    );
    let (status, _, html) = b
        .post("/console/second-factor/totp", &[("code", &right)])
        .await;
    assert_eq!(status, 429, "{html}");
    assert!(html.contains("Too many wrong codes"), "{html}");
    let audit = app
        .text_rows(
            "SELECT target FROM audit_log WHERE action = 'mfa.lockout'",
            &[],
        )
        .await;
    assert_eq!(audit, vec![vec![format!("user:{user_id}")]]);

    // An unknown user ID is a failed credential, said plainly.
    let mut b = Browser::open(&app).await;
    for unknown in ["00000000-0000-4000-8000-000000000000", "ada@example.org"] {
        let (status, _, html) = b.post("/console/sign-in/user", &[("user", unknown)]).await;
        assert_eq!(status, 401);
        assert!(html.contains("No active user has that ID."), "{html}");
        assert!(b.pending.is_none());
    }
}

async fn lookup_marks_superseded_builds_with_the_current_version(app: TestApp) {
    use testkit::fixtures::{hex_of, putty};
    app.record(putty("0.81", model::Arch::Amd64, 1)).await;
    app.record(putty("0.82", model::Arch::Amd64, 2)).await;
    let key = app.account("acme", Role::Analyst, Tier::Basic).await;
    let (mut b, _) = sign_in_and_enrol(&app, &key).await;
    let hashes = [hex_of(1, 64), hex_of(2, 40), hex_of(1, 32), hex_of(9, 64)].join("\n");
    let (status, _, html) = b.post("/console/lookup", &[("hashes", &hashes)]).await;
    assert_eq!(status, 200, "{html}");
    let rows: Vec<&str> = html.split("<tr>").skip(2).collect();
    let row = |hash: &str| {
        *rows
            .iter()
            .find(|r| r.contains(hash))
            .unwrap_or_else(|| panic!("no row for {hash}: {html}"))
    };
    // The old build is genuine: known, marked superseded, the current version beside it.
    for old in [hex_of(1, 64), hex_of(1, 32)] {
        let r = row(&old);
        assert!(r.contains(">known_vendor_release<"), "{r}");
        assert!(r.contains("data-superseded>superseded<"), "{r}");
        assert!(r.contains("putty.exe 0.81 (PuTTY, windows)"), "{r}");
        assert!(r.contains("current version: 0.82"), "{r}");
    }
    let r = row(&hex_of(2, 40));
    assert!(
        r.contains(">known_vendor_release<") && r.contains("putty.exe 0.82"),
        "{r}"
    );
    assert!(
        !r.contains("superseded"),
        "the current build is not marked: {r}"
    );
    let r = row(&hex_of(9, 64));
    assert!(
        r.contains(">unknown<") && r.contains("found in no source"),
        "{r}"
    );
}

async fn totp_enrolment_retries_and_recovery_codes_follow_the_factor(app: TestApp) {
    let key = app.account("acme", Role::Analyst, Tier::Basic).await;
    let mut b = Browser::open(&app).await;
    b.post("/console/sign-in", &[("key", &key)]).await;
    // No recovery codes before a second factor exists.
    let (_, _, html) = b.get("/console/account").await;
    assert!(!html.contains("Generate new recovery codes"), "{html}");
    assert!(
        html.contains("Recovery codes become available once you have a passkey"),
        "{html}"
    );
    let (_, _, html) = b.post("/console/account/totp/enroll", &[]).await;
    let secret = between(&html, "data-totp-secret>", "<")
        .unwrap()
        .to_string();
    // A wrong code: told plainly, and the same secret stays for the next try.
    let right = code_now(&app, &secret);
    let wrong = if right == "000000" {
        "111111"
    } else {
        "000000"
    };
    let (status, _, html) = b
        .post("/console/account/totp/verify", &[("code", wrong)])
        .await;
    assert_eq!(status, 401, "{html}");
    assert!(html.contains("That code was not accepted"), "{html}");
    assert!(!html.to_lowercase().contains("unauthorized"), "{html}");
    assert!(html.contains(r#"action="/console/account/totp/verify""#));
    let (status, _, html) = b
        .post("/console/account/totp/verify", &[("code", "12ab")])
        .await;
    assert_eq!(status, 400);
    assert!(html.contains("6 digits"), "{html}");
    let (status, headers, _) = b
        .post("/console/account/totp/verify", &[("code", &right)])
        .await;
    assert_eq!(status, 303);
    assert_eq!(headers["location"], "/console/account");
    // With a factor: codes offered, and a prompt while none are left.
    let (_, _, html) = b.get("/console/account").await;
    assert!(html.contains("Generate new recovery codes"), "{html}");
    assert!(html.contains("You have no recovery codes left"), "{html}");
    let (_, _, html) = b.post("/console/account/recovery", &[]).await;
    assert!(html.contains(r#"data-action="copy-codes""#), "{html}");
    assert!(html.contains(r#"data-action="download-codes""#), "{html}");
    let (_, _, html) = b.get("/console/account").await;
    assert!(!html.contains("You have no recovery codes left"), "{html}");

    // A second sign-in with the authenticator lands on Lookup.
    b.post("/console/sign-out", &[]).await;
    let mut b = Browser::open(&app).await;
    b.post("/console/sign-in", &[("key", &key)]).await;
    app.clock.advance(chrono::Duration::seconds(30));
    let (status, headers, _) = b
        .post(
            "/console/second-factor/totp",
            &[("code", &code_now(&app, &secret))],
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(headers["location"], "/console/lookup");
}

/// Records a file of `vendor` signed with certificate `n` and revokes the certificate for
/// `reason`; with `current` false a newer build supersedes the file.
async fn signed_and_revoked(
    app: &TestApp,
    n: u64,
    signer: &str,
    reason: &str,
    current: bool,
) -> String {
    use store::downloads::SigningCert;
    use store::revocations::Revocation;
    let now = app.clock.now();
    let thumbprint = testkit::hex_of(n + 100, 40);
    let mut r = testkit::putty("0.80", model::Arch::Amd64, n + 100);
    r.executable_name = format!("tool{n}.exe");
    r.sig_signer = Some(signer.into());
    r.sig_issuer = Some("CN=Example CA".into());
    r.sig_serial = Some(format!("0{n}"));
    r.sig_thumbprint = Some(thumbprint.clone());
    app.record(r).await;
    if !current {
        let mut newer = testkit::putty("0.81", model::Arch::Amd64, n + 200);
        newer.executable_name = format!("tool{n}.exe");
        app.record(newer).await;
    }
    app.store
        .signing_cert_seen(
            &SigningCert {
                thumbprint: thumbprint.clone(),
                signer: signer.into(),
                issuer: "CN=Example CA".into(),
                serial: format!("0{n}"),
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
                signer: signer.into(),
                issuer: "CN=Example CA".into(),
                serial: format!("0{n}"),
                revoked_at: now - chrono::Duration::days(n as i64),
                reason: reason.into(),
                crl_url: "http://crl.example/ca.crl".into(),
            },
            now,
        )
        .await
        .unwrap();
    thumbprint
}

async fn revocations_page_puts_active_certificates_first_and_exports(app: TestApp) {
    let key = app.account("soc", Role::Auditor, Tier::Teams).await;
    let (mut b, _) = sign_in_and_enrol(&app, &key).await;
    let (status, _, html) = b.get("/console/revocations").await;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains(r#"href="/console/revocations""#),
        "in the navigation"
    );
    assert!(
        html.contains("No signing certificate of a recorded file is revoked"),
        "{html}"
    );
    assert!(
        !html.contains("Download CSV"),
        "nothing to download yet: {html}"
    );

    // A compromised key that signed only a superseded build, and a superseded certificate
    // that signed today's build: the API puts the compromise first, the page the active one.
    let compromised = signed_and_revoked(&app, 1, "CN=Old Signer", "keyCompromise", false).await;
    let active = signed_and_revoked(&app, 2, "CN=<b>Live</b> Signer", "superseded", true).await;
    let api = app.get_with("/api/v1/intel/revocations", &key).await.json();
    assert_eq!(api["revoked_certs"][0]["thumbprint"], compromised.as_str());
    let (status, _, html) = b.get("/console/revocations").await;
    assert_eq!(status, 200);
    let at = |t: &str| {
        html.find(t)
            .unwrap_or_else(|| panic!("{t} missing: {html}"))
    };
    assert!(
        at(&active) < at(&compromised),
        "the active certificate first"
    );
    assert!(
        html.contains("CN=&lt;b&gt;Live&lt;/b&gt; Signer"),
        "escaped: {html}"
    );
    assert!(!html.contains("<b>Live</b>"));
    assert!(
        html.contains("<strong>1</strong> signed a file that is current"),
        "{html}"
    );
    assert!(html.contains("PuTTY"), "affected vendors shown: {html}");

    // Downloads: JSON is the API's answer, CSV the same list in the page's order.
    let (status, headers, csv) = b.get("/console/revocations/export?format=csv").await;
    assert_eq!(status, 200);
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    assert!(
        headers["content-disposition"]
            .to_str()
            .unwrap()
            .contains("knowngood-revocations-")
    );
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("thumbprint,signer,issuer"), "{csv}");
    assert!(
        lines[1].starts_with(&active) && lines[1].contains(",true,PuTTY"),
        "{csv}"
    );
    assert!(lines[2].starts_with(&compromised), "{csv}");
    let (status, _, json) = b.get("/console/revocations/export?format=json").await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&json).unwrap(),
        api
    );
    let (status, _, _) = b.get("/console/revocations/export?format=xml").await;
    assert_eq!(status, 400);

    // The history, filtered by signer.
    let (_, _, html) = b.get("/console/revocations?signer=old").await;
    let history = html.split(r#"id="history""#).nth(1).unwrap();
    assert!(
        history.contains(&compromised) && !history.contains(&active),
        "{history}"
    );
    let (_, _, html) = b.get("/console/revocations?signer=nobody").await;
    assert!(
        html.contains("No recorded revocation has a signer containing “nobody”"),
        "{html}"
    );

    // A role or tier without revocations is told which, plainly.
    let analyst = app.account("soc-analyst", Role::Analyst, Tier::Teams).await;
    let (mut b, _) = sign_in_and_enrol(&app, &analyst).await;
    let (status, _, html) = b.get("/console/revocations").await;
    assert_eq!(status, 403);
    assert!(
        html.contains("Your role (analyst) does not include Revocations"),
        "{html}"
    );
    assert!(
        !html.contains(r#"href="/console/revocations""#),
        "not in its navigation"
    );
    let basic = app.account("small-shop", Role::Auditor, Tier::Basic).await;
    let (mut b, _) = sign_in_and_enrol(&app, &basic).await;
    let (status, _, html) = b.get("/console/revocations/export?format=csv").await;
    assert_eq!(status, 403);
    assert!(html.contains("Revocations comes with the teams tier and above; account small-shop is on the basic tier"), "{html}");
}

async fn coverage_page_counts_records_shows_channel_errors_and_exports(app: TestApp) {
    use testkit::fixtures::{hex_of, putty};
    let key = app.account("acme", Role::Analyst, Tier::Basic).await;
    let (mut b, _) = sign_in_and_enrol(&app, &key).await;
    let (status, _, html) = b.get("/console/coverage").await;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains(r#"href="/console/coverage""#),
        "in the navigation"
    );
    assert!(
        html.contains("No vendor channel has run and no record is held yet"),
        "{html}"
    );
    assert!(html.contains("No reference corpus is loaded"), "{html}");
    for setting in [
        "items_file",
        "releases",
        "history",
        "What <code>unknown</code> means",
    ] {
        assert!(html.contains(setting), "{setting}: {html}");
    }

    app.record(putty("0.81", model::Arch::Amd64, 1)).await;
    app.record(putty("0.82", model::Arch::Amd64, 2)).await;
    let now = app.clock.now();
    app.store
        .record_vendor_run("PuTTY", None, now)
        .await
        .unwrap();
    app.store
        .record_vendor_run(
            "Debian bookworm",
            Some("download: https://mirror.internal/x.deb?token=s3cr3t answered 503"),
            now,
        )
        .await
        .unwrap();
    let (status, _, html) = b.get("/console/coverage").await;
    assert_eq!(status, 200);
    let rows: Vec<&str> = html.split("<tr>").skip(2).collect();
    let putty_row = rows.iter().find(|r| r.contains("PuTTY")).expect(&html);
    assert!(
        putty_row.contains(r#"data-label="Current records">1<"#) && putty_row.contains(">ok<"),
        "{putty_row}"
    );
    let debian = rows
        .iter()
        .find(|r| r.contains("Debian bookworm"))
        .expect(&html);
    assert!(
        debian.contains(">failing<") && debian.contains("download failed"),
        "{debian}"
    );
    assert!(
        !html.contains("secret-path"),
        "a customer sees the error's kind only"
    );
    // Staff see the whole message, URLs redacted.
    let (_, staff_key) = app
        .tenant(
            "ops",
            model::TenantKind::Platform,
            Role::PlatformAdmin,
            Tier::Enterprise,
        )
        .await;
    let (mut staff, _) = sign_in_and_enrol(&app, &staff_key).await;
    let (_, _, html) = staff.get("/console/coverage").await;
    assert!(html.contains("answered 503"), "{html}");
    assert!(
        html.contains("mirror.internal") && !html.contains("s3cr3t"),
        "URLs redacted: {html}"
    );

    // The export is the API's: CSV and JSON, and its refusals said plainly.
    let (status, headers, csv) = b
        .get("/console/export?format=csv&from=&to=&executable=")
        .await;
    assert_eq!(status, 200, "{csv}");
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    assert!(
        csv.starts_with("executable_name,") && csv.contains(&hex_of(2, 64)),
        "{csv}"
    );
    let (status, _, json) = b
        .get("/console/export?format=json&executable=putty.exe")
        .await;
    assert_eq!(status, 200);
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2, "{json}");
    let (status, _, html) = b.get("/console/export?format=csv&from=2026-02-30").await;
    assert_eq!(status, 400, "{html}");
    assert!(html.contains("role=\"alert\""), "{html}");
    assert!(!html.contains("bad request:"), "no internal words: {html}");

    // A free account is told which tier it needs.
    let free = app.account("hobby", Role::Analyst, Tier::Free).await;
    let (mut b, _) = sign_in_and_enrol(&app, &free).await;
    let (status, _, html) = b.get("/console/coverage").await;
    assert_eq!(status, 403);
    assert!(
        html.contains("Coverage comes with the basic tier and above"),
        "{html}"
    );
}

async fn packages_page_checks_names_scans_sboms_and_keeps_a_watchlist(app: TestApp) {
    use testkit::fixtures::hex_of;
    let key = app.account("shop", Role::Auditor, Tier::Teams).await;
    let (mut b, _) = sign_in_and_enrol(&app, &key).await;
    let (status, _, html) = b.get("/console/packages").await;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains(r#"href="/console/packages""#),
        "in the navigation"
    );
    assert!(html.contains("No package is watched yet"), "{html}");
    assert!(html.contains("No change alert."), "{html}");

    // Typosquat check of pasted names, answered as the API answers it.
    let (status, _, html) = b
        .post(
            "/console/packages/typosquat",
            &[
                ("ecosystem", "pypi"),
                ("names", "requests\nreqeusts\n\nacme-internal-lib\n"),
                ("internal", "acme-internal-lib"),
            ],
        )
        .await;
    assert_eq!(status, 200, "{html}");
    let rows: Vec<&str> = html.split("<tr>").collect();
    let squat = rows.iter().find(|r| r.contains(">reqeusts<")).expect(&html);
    assert!(
        squat.contains("data-risk>typosquat<") && squat.contains(">requests<"),
        "{squat}"
    );
    assert!(html.contains("1 typosquat"), "{html}");
    // A name the ecosystem cannot have refuses the batch, said at its line and escaped.
    let (status, _, html) = b
        .post(
            "/console/packages/typosquat",
            &[
                ("ecosystem", "pypi"),
                ("names", "requests\n<script>x</script>"),
            ],
        )
        .await;
    assert_eq!(status, 400, "{html}");
    let alert = between(&html, r#"role="alert">"#, "</p>").expect(&html);
    assert!(alert.starts_with("Line 2: "), "{alert}");
    assert!(!html.contains("<script>x</script>"), "names are escaped");
    assert!(
        html.contains("&lt;script&gt;x&lt;/script&gt;"),
        "the names stay in the form"
    );
    let (status, _, html) = b
        .post(
            "/console/packages/typosquat",
            &[("ecosystem", "maven"), ("names", "guava")],
        )
        .await;
    assert_eq!(status, 400);
    assert!(html.contains("role=\"alert\""), "{html}");
    assert!(!html.contains("bad request:"), "{html}");

    // An SBOM scan and its report.
    let sbom = serde_json::json!({
        "bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1,
        "components": [
            {"type": "library", "name": "reqeusts", "version": "1.0.0", "purl": "pkg:pypi/reqeusts@1.0.0"},
            {"type": "library", "name": "lodash", "version": "4.17.21", "purl": "pkg:npm/lodash@4.17.21",
             "hashes": [{"alg": "SHA-256", "content": hex_of(77, 64)}]}
        ]
    })
    .to_string();
    let (status, _, html) = b.post("/console/packages/sbom", &[("sbom", &sbom)]).await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("CycloneDX 1.6 (json)"), "{html}");
    let summary = between(&html, "data-sbom-summary>", "</dl>").expect(&html);
    assert!(
        summary.contains("<dt>Components</dt><dd>2</dd>"),
        "{summary}"
    );
    assert!(
        summary.contains("<dt>Typosquats</dt><dd>1</dd>"),
        "{summary}"
    );
    assert!(
        summary.contains("<dt>Hash unknown</dt><dd>1</dd>"),
        "{summary}"
    );
    let (status, _, html) = b
        .post(
            "/console/packages/sbom",
            &[("sbom", "{\"not\": \"an sbom\"}")],
        )
        .await;
    assert_eq!(status, 400, "{html}");
    assert!(html.contains("role=\"alert\""), "{html}");

    // The watchlist: add, see, remove.
    let (status, _, html) = b
        .post(
            "/console/packages/watch",
            &[("ecosystem", "npm"), ("package_name", "Left-Pad")],
        )
        .await;
    assert_eq!(status, 201, "{html}");
    assert!(html.contains("Now watching left-pad (npm)."), "{html}");
    let list = between(&html, "data-watchlist>", "</table>").expect(&html);
    assert!(
        list.contains(">left-pad<") && list.contains(">pending<"),
        "{list}"
    );
    let (status, _, html) = b
        .post(
            "/console/packages/watch",
            &[("ecosystem", "npm"), ("package_name", "left-pad")],
        )
        .await;
    assert_eq!(status, 200);
    assert!(html.contains("was already watched"), "{html}");

    // Change alerts, all or only the watched packages'.
    for (i, name) in ["left-pad", "lodash"].iter().enumerate() {
        app.store
            .add_change_alert(&store::downloads::ChangeAlert {
                id: format!("alert-{i}"),
                ecosystem: "npm".into(),
                package_name: name.to_string(),
                version: "1.0.0".into(),
                previous_sha256: hex_of(i as u64 + 1, 64),
                latest_sha256: hex_of(i as u64 + 50, 64),
                observed_at: app.clock.now(),
            })
            .await
            .unwrap();
    }
    let (_, _, html) = b.get("/console/packages").await;
    let alerts = between(&html, "data-alerts>", "</table>").expect(&html);
    assert!(
        alerts.contains(">lodash<") && alerts.contains(">left-pad<"),
        "{alerts}"
    );
    assert!(alerts.contains(&hex_of(50, 64)), "{alerts}");
    let (_, _, html) = b.get("/console/packages?watched=true").await;
    let alerts = between(&html, "data-alerts>", "</table>").expect(&html);
    assert!(
        alerts.contains(">left-pad<") && !alerts.contains(">lodash<"),
        "{alerts}"
    );

    let id = between(&html, "/console/packages/watch/", "/delete")
        .unwrap()
        .to_string();
    let (status, headers, _) = b
        .post(&format!("/console/packages/watch/{id}/delete"), &[])
        .await;
    assert_eq!(status, 303);
    assert_eq!(headers["location"], "/console/packages#watch");
    let (_, _, html) = b.get("/console/packages").await;
    assert!(html.contains("No package is watched yet"), "{html}");
    let (status, _, _) = b
        .post(&format!("/console/packages/watch/{id}/delete"), &[])
        .await;
    assert_eq!(status, 404);

    // Basic tier: told plainly, also on the form posts.
    let basic = app.account("small", Role::Auditor, Tier::Basic).await;
    let (mut b, _) = sign_in_and_enrol(&app, &basic).await;
    let (status, _, html) = b
        .post(
            "/console/packages/typosquat",
            &[("ecosystem", "npm"), ("names", "x")],
        )
        .await;
    assert_eq!(status, 403);
    assert!(
        html.contains("Packages comes with the teams tier and above"),
        "{html}"
    );
}

async fn keys_page_issues_labels_reissues_and_revokes_keys(app: TestApp) {
    let admin = app.account("acme", Role::AccountAdmin, Tier::Teams).await;
    let (mut b, _) = sign_in_and_enrol(&app, &admin).await;
    let (status, _, html) = b.get("/console/keys").await;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains("The service sends nothing to it"),
        "the contact field explained: {html}"
    );

    let (status, _, html) = b
        .post(
            "/console/keys/issue",
            &[("role", "analyst"), ("label", "SIEM <enrichment>")],
        )
        .await;
    assert_eq!(status, 200, "{html}");
    let key = between(&html, "data-issued-key>", "<")
        .expect(&html)
        .to_string();
    assert!(html.contains("SIEM &lt;enrichment&gt;") && !html.contains("SIEM <enrichment>"));
    assert_eq!(app.get_with("/api/v1/intel/stats", &key).await.status, 200);
    let id = app.key_id(&key).await;

    let (status, _, html) = b
        .post(&format!("/console/keys/{id}/label"), &[("label", "SIEM")])
        .await;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains(&format!("Key {id} is now labelled “SIEM”.")),
        "{html}"
    );

    let (status, _, html) = b.post(&format!("/console/keys/{id}/reissue"), &[]).await;
    assert_eq!(status, 200, "{html}");
    let replacement = between(&html, "data-issued-key>", "<")
        .expect(&html)
        .to_string();
    app.get_with("/api/v1/intel/stats", &key)
        .await
        .assert_error(401, "unauthorized");
    assert_eq!(
        app.get_with("/api/v1/intel/stats", &replacement)
            .await
            .status,
        200
    );
    let new_id = app.key_id(&replacement).await;
    let row = html
        .split("<tr>")
        .find(|r| r.contains(&format!("<code>{id}</code>")))
        .expect(&html);
    assert!(
        row.contains("revoked"),
        "the old key is listed as revoked: {row}"
    );

    let (status, _, html) = b.post(&format!("/console/keys/{new_id}/revoke"), &[]).await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains(&format!("Key {new_id} is revoked")), "{html}");
    app.get_with("/api/v1/intel/stats", &replacement)
        .await
        .assert_error(401, "unauthorized");

    // Refusals in plain words: an unknown role, the admin's own key.
    let (status, _, html) = b
        .post(
            "/console/keys/issue",
            &[("role", "superuser"), ("label", "x")],
        )
        .await;
    assert_eq!(status, 400, "{html}");
    assert!(
        html.contains(r#"role="alert""#) && !html.contains("bad request:"),
        "{html}"
    );
    let own = app.key_id(&admin).await;
    let (status, _, html) = b.post(&format!("/console/keys/{own}/revoke"), &[]).await;
    assert_eq!(status, 400);
    assert!(html.contains("the key you signed in with"), "{html}");
    assert_eq!(
        app.get_with("/api/v1/intel/stats", &admin).await.status,
        200
    );
    // Pending invites are listed until redeemed.
    let (_, _, html) = b.get("/console/keys").await;
    assert!(
        html.contains("No invite is waiting to be redeemed."),
        "{html}"
    );
    let (status, _, html) = b
        .post(
            "/console/keys/invite",
            &[
                ("role", "analyst"),
                ("display_name", "Grace <H>"),
                ("contact", "grace@example.org"),
            ],
        )
        .await;
    assert_eq!(status, 201, "{html}");
    let code = between(&html, "data-invite-code>", "<")
        .unwrap()
        .to_string();
    let pending = between(&html, "data-invites>", "</table>").expect(&html);
    assert!(
        pending.contains("Grace &lt;H&gt;") && pending.contains("grace@example.org"),
        "{pending}"
    );
    let mut invitee = Browser::open(&app).await;
    let (status, _, _) = invitee.post("/console/invite", &[("code", &code)]).await;
    assert_eq!(status, 303);
    let (_, _, html) = b.get("/console/keys").await;
    assert!(
        html.contains("No invite is waiting to be redeemed."),
        "{html}"
    );
    // Without the CSRF token nothing changes.
    let r = client()
        .post(format!("{}/console/keys/issue", app.base))
        .header("Cookie", b.cookies())
        .form(&[("role", "analyst"), ("label", "forged")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
}

async fn usage_chart_has_axes_dates_and_the_quota_share(app: TestApp) {
    let key = app.account("acme", Role::Analyst, Tier::Basic).await;
    for _ in 0..3 {
        assert_eq!(app.get_with("/api/v1/intel/stats", &key).await.status, 200);
    }
    let (mut b, _) = sign_in_and_enrol(&app, &key).await;
    let (status, _, html) = b.get("/console/usage").await;
    assert_eq!(status, 200, "{html}");
    let chart = between(&html, "data-usage-chart>", "</svg>").expect(&html);
    assert_eq!(
        chart.matches("<rect ").count(),
        30,
        "a bar per day: {chart}"
    );
    assert_eq!(
        chart.matches(r#"class="axis""#).count(),
        2,
        "both axes: {chart}"
    );
    assert_eq!(
        chart.matches("data-axis-date>").count(),
        3,
        "dated: {chart}"
    );
    let today = app.clock.now().date_naive().format("%b %-d").to_string();
    assert!(
        chart.contains(&format!("data-axis-date>{today}<")),
        "{chart}"
    );
    let share = between(&html, "data-quota-share>", "</p>").expect(&html);
    let total = between(&html, "data-usage-total>", "<").unwrap();
    assert!(
        share.contains(" %</strong> of this month's quota used: ")
            && share.contains(&format!(": {total} of ")),
        "{share}"
    );
    assert!(html.contains("<meter "), "{html}");
}

/// Every console route answers as its declared rule predicts, for an anonymous browser, a
/// key session that has not passed a second factor, an analyst and an account on the basic
/// tier (both with a second factor): the way to sign in, the way to enrol, the page naming
/// the missing permission or tier, or the handler itself.
async fn console_authorization_matrix(app: TestApp) {
    use server::console::rules::{CONSOLE_ROUTES, ConsoleRule};

    let mut routes: Vec<_> = CONSOLE_ROUTES
        .iter()
        .filter(|r| r.rule != ConsoleRule::Public && r.method.is_some())
        .collect();
    assert!(routes.len() > 20, "the console's routes are declared");
    // Reissuing one's own key ends the session: last.
    routes.sort_by_key(|r| r.path == "/console/account/reissue");

    let anonymous = Browser::open(&app).await;
    let mut no_mfa = Browser::open(&app).await;
    let key = app
        .account("m-nomfa", Role::AccountAdmin, Tier::Enterprise)
        .await;
    let (status, headers, _) = no_mfa.post("/console/sign-in", &[("key", &key)]).await;
    assert_eq!(status, 303);
    assert_eq!(headers["location"], "/console/account?enrol=1");
    let analyst = app
        .account("m-analyst", Role::Analyst, Tier::Enterprise)
        .await;
    let (analyst, _) = sign_in_and_enrol(&app, &analyst).await;
    let basic = app
        .account("m-basic", Role::AccountAdmin, Tier::Basic)
        .await;
    let (basic, _) = sign_in_and_enrol(&app, &basic).await;

    let callers = [
        ("anonymous", anonymous, None),
        ("a key session without a second factor", no_mfa, None),
        (
            "an analyst",
            analyst,
            Some((Role::Analyst, Tier::Enterprise)),
        ),
        (
            "the basic tier",
            basic,
            Some((Role::AccountAdmin, Tier::Basic)),
        ),
    ];
    let mut checked = 0;
    for (who, mut browser, passed) in callers {
        for route in &routes {
            let path = route.path.replace("{id}", "0123456789abcdef");
            let method = route.method.clone().unwrap();
            let (status, headers, body) = if method == reqwest::Method::GET {
                browser.get(&path).await
            } else {
                browser.post(&path, &[]).await
            };
            let location = headers
                .get("location")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let what = format!("{method} {} as {who}: {status} {location}", route.path);
            let to_sign_in = status == 303 && location == "/console/sign-in";
            let to_enrol = status == 303 && location == "/console/account?enrol=1";
            match (who, route.rule) {
                ("anonymous", ConsoleRule::SignedInScript) => {
                    assert_eq!(status, 401, "{what}");
                    assert!(body.contains("sign in first"), "{what}: {body}");
                }
                ("anonymous", _) => assert!(to_sign_in, "{what}"),
                (_, ConsoleRule::SignedIn | ConsoleRule::SignedInScript) if passed.is_none() => {
                    assert!(!to_sign_in && !to_enrol && status != 401, "{what}: {body}");
                }
                (_, _) if passed.is_none() => assert!(to_enrol, "{what}"),
                (
                    _,
                    ConsoleRule::Permission {
                        permission, tier, ..
                    },
                ) => {
                    let (role, on) = passed.unwrap();
                    if permission.is_some_and(|p| !role.has(p)) || on < tier {
                        assert_eq!(status, 403, "{what}");
                        assert!(
                            body.contains("permission") || body.contains("tier"),
                            "{what}: {body}"
                        );
                    } else {
                        assert!(!to_sign_in && !to_enrol && status != 403, "{what}: {body}");
                    }
                }
                (_, _) => assert!(!to_sign_in && !to_enrol, "{what}: {body}"),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, routes.len() * 4);
}

async fn lookup_answers_dropped_files_by_name_and_marks_bad_lines(app: TestApp) {
    use testkit::fixtures::{hex_of, putty};
    app.record(putty("0.82", model::Arch::Amd64, 2)).await;
    let key = app.account("acme", Role::Analyst, Tier::Basic).await;
    let (mut b, _) = sign_in_and_enrol(&app, &key).await;
    let files = serde_json::json!([
        {"name": "putty <1>.exe", "sha256": hex_of(2, 64), "sha1": hex_of(2, 40), "md5": hex_of(2, 32)},
        {"name": "notes.txt", "sha256": hex_of(7, 64), "sha1": hex_of(7, 40), "md5": hex_of(7, 32)},
    ])
    .to_string();
    // Line 2 is not a hash and line 4 holds markup: both refused at their line, the
    // good lines answered.
    let hashes = format!(
        "{}\nnot-a-hash\n\n<script>x</script>, {}",
        hex_of(2, 64),
        hex_of(9, 32)
    );
    let (status, _, html) = b
        .post("/console/lookup", &[("hashes", &hashes), ("files", &files)])
        .await;
    assert_eq!(status, 200, "{html}");
    let refused = between(&html, "data-refused>", "</section>").expect("a refused list");
    assert!(
        refused.contains(r#"data-refused-line="2">Line 2: <code>not-a-hash</code>"#),
        "{refused}"
    );
    assert!(
        refused.contains(
            r#"data-refused-line="4">Line 4: <code>&lt;script&gt;x&lt;/script&gt;</code>"#
        ),
        "{refused}"
    );
    assert!(!html.contains("<script>x"), "refused text is escaped");
    assert!(refused.contains("2 values are not a hash"), "{refused}");

    // One row per file, its name kept (escaped), each digest with its verdict.
    let file_rows: Vec<&str> = html
        .split("<tr data-file>")
        .skip(1)
        .map(|r| r.split("</tr>").next().unwrap())
        .collect();
    assert_eq!(file_rows.len(), 2, "{html}");
    let putty_row = file_rows[0];
    assert!(
        putty_row.contains("data-file-name>putty &lt;1&gt;.exe<"),
        "{putty_row}"
    );
    for (algo, hash) in [
        ("SHA-256", hex_of(2, 64)),
        ("SHA-1", hex_of(2, 40)),
        ("MD5", hex_of(2, 32)),
    ] {
        let digest = between(putty_row, &format!(r#"data-digest="{algo}">"#), "</li>").unwrap();
        assert!(digest.contains(&hash), "{digest}");
        assert!(digest.contains(">known_vendor_release<"), "{digest}");
    }
    assert!(
        putty_row.contains("putty.exe 0.82 (PuTTY, windows)"),
        "{putty_row}"
    );
    // The record's source, as recorded.
    assert!(
        putty_row.contains(
            r#"href="https://downloads.example/PuTTY/putty.exe" rel="noreferrer noopener" data-source-url>"#
        ),
        "{putty_row}"
    );
    let other = file_rows[1];
    assert!(other.contains("data-file-name>notes.txt<"), "{other}");
    assert_eq!(other.matches(">unknown<").count(), 3, "{other}");
    assert!(other.contains("found in no source") && !other.contains("data-source-url"));

    // The pasted hashes keep their own table, the vendor build with its source too.
    let results = html
        .split(r#"<h2 id="results">"#)
        .nth(1)
        .expect("pasted results");
    let row = |hash: &str| {
        results
            .split("<tr>")
            .find(|r| r.contains(hash))
            .unwrap_or_else(|| panic!("no row for {hash}: {results}"))
    };
    assert!(row(&hex_of(2, 64)).contains("data-source-url"));
    assert!(row(&hex_of(9, 32)).contains(">unknown<"));

    // Nothing but bad lines: refused, each at its line, and nothing looked up.
    let (status, _, html) = b.post("/console/lookup", &[("hashes", "abc\nfff")]).await;
    assert_eq!(status, 400);
    assert!(html.contains(r#"data-refused-line="1""#) && html.contains(r#"data-refused-line="2""#));
    assert!(!html.contains(r#"<h2 id="results">"#), "{html}");
    // Too many files at once, or a files field that is not the script's: a plain refusal.
    let many: Vec<_> = (0..34)
        .map(|i| serde_json::json!({"name": format!("f{i}"), "sha256": hex_of(i, 64), "sha1": hex_of(i, 40), "md5": hex_of(i, 32)}))
        .collect();
    let (status, _, html) = b
        .post(
            "/console/lookup",
            &[("files", &serde_json::Value::from(many).to_string())],
        )
        .await;
    assert_eq!(status, 400);
    assert!(html.contains("34 files were dropped; at most 33"), "{html}");
    let (status, _, html) = b.post("/console/lookup", &[("files", "[{")]).await;
    assert_eq!(status, 400);
    assert!(html.contains("could not be read"), "{html}");
    let swapped = serde_json::json!([{"name": "a", "sha256": hex_of(1, 32), "sha1": hex_of(1, 40), "md5": hex_of(1, 32)}]).to_string();
    let (status, _, _) = b.post("/console/lookup", &[("files", &swapped)]).await;
    assert_eq!(status, 400);
}

async fn history_without_a_match_suggests_names_by_prefix(app: TestApp) {
    use testkit::fixtures::{putty, rec};
    app.record(putty("0.82", model::Arch::Amd64, 2)).await;
    app.record(rec(
        "PuTTY",
        "puttygen.exe",
        "0.82",
        model::Platform::Windows,
        model::Arch::Amd64,
        3,
    ))
    .await;
    app.record(rec(
        "Odd",
        "50%off.exe",
        "1.0",
        model::Platform::Windows,
        model::Arch::Amd64,
        4,
    ))
    .await;
    let key = app.account("acme", Role::Analyst, Tier::Basic).await;
    let (mut b, _) = sign_in_and_enrol(&app, &key).await;

    let (status, _, html) = b.get("/console/history?executable=PUTT").await;
    assert_eq!(status, 200);
    let suggested = between(&html, "data-suggestions>", "</p>").expect("suggestions");
    assert!(suggested.starts_with("Did you mean: "), "{suggested}");
    assert!(
        suggested.contains(
            r#"<a href="/console/history?executable=putty.exe" data-suggestion>putty.exe</a>"#
        ),
        "{suggested}"
    );
    assert!(suggested.contains(">puttygen.exe</a>"), "{suggested}");
    // A suggestion leads to that executable's history.
    let (status, _, html) = b.get("/console/history?executable=putty.exe").await;
    assert_eq!(status, 200);
    assert!(html.contains("1 versions of putty.exe."), "{html}");
    assert!(
        !html.contains("data-suggestions"),
        "a match needs no suggestion"
    );
    // Wildcards are plain text, and the link carries the name encoded.
    let (_, _, html) = b.get("/console/history?executable=50%25").await;
    assert!(
        html.contains(r#"href="/console/history?executable=50%25off.exe""#),
        "{html}"
    );
    let (_, _, html) = b.get("/console/history?executable=5%25").await;
    assert!(!html.contains("data-suggestions"), "{html}");
    // One character is too short a prefix to search by.
    let (_, _, html) = b.get("/console/history?executable=p").await;
    assert!(html.contains("0 versions of p."), "{html}");
    assert!(!html.contains("data-suggestions"), "{html}");
}

/// The public dashboard lists at most 200 current records, read by index whatever their
/// number: names starting with the search, records of vendors whose name contains it.
async fn dashboard_search_reads_names_by_prefix_and_vendors_and_caps_the_list(app: TestApp) {
    use model::{Arch, Platform};
    use testkit::fixtures::{putty, rec};
    let tools = (0..205)
        .map(|i| {
            let name = format!("tool-{i:03}.exe");
            rec(
                "Acme Tools",
                &name,
                "1.0",
                Platform::Windows,
                Arch::Amd64,
                1000 + i,
            )
        })
        .collect();
    app.store.record_many(tools, app.clock.now()).await.unwrap();
    app.record(putty("0.82", Arch::Amd64, 1)).await;
    let page = |query: &'static str| {
        let app = &app;
        async move {
            let r = reqwest::get(format!("{}/console/{query}", app.base))
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            r.text().await.unwrap()
        }
    };
    let listed = |html: &str| html.matches("<td class=\"hash\">").count();
    // Nothing asked: the first 200 in name order, of every current record.
    let html = page("").await;
    assert!(html.contains("200 of 206 current records."), "{html}");
    assert_eq!(listed(&html), 200);
    assert!(html.contains("putty.exe") && html.contains("tool-198.exe"));
    assert!(!html.contains("tool-199.exe"), "{html}");
    // A name prefix, any case.
    let html = page("?q=PUT").await;
    assert!(html.contains("1 of 1 current records."), "{html}");
    assert!(html.contains("putty.exe"));
    let html = page("?q=tool-01").await;
    assert!(html.contains("10 of 10 current records."), "{html}");
    // A part of a vendor's name: its records, at most 200 of them.
    let html = page("?q=tools").await;
    assert!(
        html.contains("The first 200 of more than 200 matching current records."),
        "{html}"
    );
    assert_eq!(listed(&html), 200);
    // A platform narrows either.
    let html = page("?q=put&platform=linux").await;
    assert!(html.contains("0 of 0 current records."), "{html}");
    // A search with LIKE's wildcards matches them as text.
    let html = page("?q=tool_0%25").await;
    assert!(html.contains("0 of 0 current records."), "{html}");
}
