//! The console over real HTTP, without a browser (the browser suite in tests/browser drives
//! the same pages in Chromium): its security headers, the CSRF double submit, the session
//! cookie's flags, signing out revoking the session, and its scripts served locally.

use model::{Role, Tier};
use reqwest::header::{HeaderMap, SET_COOKIE};
use reqwest::redirect::Policy;
use testkit::TestApp;

testkit::backend_tests!(
    pages_carry_a_strict_policy_and_no_inline_script,
    forms_need_the_csrf_token_and_sign_out_revokes,
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
