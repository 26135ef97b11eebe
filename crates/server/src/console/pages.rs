//! The console's pages and form handlers.

// The helpers' `Err` is the page's early answer (a redirect or a refusal), built once per
// request and returned as is; boxing it would only add an allocation.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use auth::Principal;
use auth::mfa::{MfaStatus, Proof};
use axum::extract::{ConnectInfo, Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use model::{Error, HashRecord, HashValue, Permission, Tier};
use store::VendorHealth;
use store::roots::StoredRoot;
use store::users::PasskeyRow;
use subtle::ConstantTimeEq;

use super::rules::{ConsoleRoutes, ConsoleRule};
use super::{CSRF_COOKIE, SESSION_COOKIE, cookie, see_other, set_cookie};
use crate::AppState;
use crate::services::sessions::{PENDING_COOKIE, session_for_subject};

mod coverage;
mod gate;
mod hash_lookup;
mod keys;
mod packages;
mod revocations;

use gate::Signed;

type Fields = HashMap<String, String>;

/// Every console route with its access rule; the router and [`CONSOLE_ROUTES`] are both
/// built from this list, so a route cannot be served without a rule.
///
/// [`CONSOLE_ROUTES`]: super::rules::CONSOLE_ROUTES
pub(super) fn declared() -> ConsoleRoutes {
    use ConsoleRule as R;
    use Permission as P;
    let packages = R::page(P::IntelPackages, Tier::Teams, "Packages");
    let revocations = R::page(P::IntelRevocations, Tier::Teams, "Revocations");
    ConsoleRoutes::default()
        .get("/console", R::Public, || async { see_other("/console/") })
        .get("/console/", R::Public, dashboard)
        .get("/console/sign-in", R::Public, sign_in_page)
        .post("/console/sign-in", R::Public, sign_in)
        .post("/console/sign-in/user", R::Public, sign_in_user)
        .get("/console/second-factor", R::Public, second_factor_page)
        .post("/console/second-factor/totp", R::Public, second_factor_totp)
        .post(
            "/console/second-factor/recovery",
            R::Public,
            second_factor_recovery,
        )
        .get("/console/invite", R::Public, invite_page)
        .post("/console/invite", R::Public, redeem_invite)
        .post("/console/sign-out", R::Public, sign_out)
        .get("/console/account", R::SignedIn, account)
        .post("/console/account/totp/enroll", R::SignedIn, totp_enroll)
        .post("/console/account/totp/verify", R::SignedIn, totp_verify)
        .post(
            "/console/account/totp/disable",
            R::SecondFactor,
            totp_disable,
        )
        .post(
            "/console/account/recovery",
            R::SecondFactor,
            recovery_generate,
        )
        .post(
            "/console/account/passkeys/{id}/delete",
            R::SecondFactor,
            passkey_delete,
        )
        .post("/console/account/reissue", R::SecondFactor, reissue)
        .post(
            "/console/passkey/register/begin",
            R::SignedInScript,
            passkey_register_begin,
        )
        .post(
            "/console/passkey/register/complete",
            R::SignedInScript,
            passkey_register_complete,
        )
        .post("/console/passkey/sign-in", R::Public, passkey_sign_in)
        .get(
            "/console/lookup",
            R::permission(Some(P::IntelLookup), Tier::Basic),
            lookup_page,
        )
        .post(
            "/console/lookup",
            R::permission(Some(P::IntelLookup), Tier::Basic),
            lookup,
        )
        .get(
            "/console/history",
            R::permission(Some(P::IntelHistory), Tier::Basic),
            history,
        )
        .get(
            "/console/coverage",
            R::page(P::IntelStats, Tier::Basic, "Coverage"),
            coverage::page_,
        )
        .get(
            "/console/export",
            R::page(P::IntelHistory, Tier::Basic, "Export"),
            coverage::export,
        )
        .get("/console/packages", packages, packages::page_)
        .post("/console/packages/typosquat", packages, packages::typosquat)
        .post("/console/packages/sbom", packages, packages::sbom)
        .post("/console/packages/watch", packages, packages::add_watch)
        .post(
            "/console/packages/watch/{id}/delete",
            packages,
            packages::remove_watch,
        )
        .get("/console/revocations", revocations, revocations::page_)
        .get(
            "/console/revocations/export",
            revocations,
            revocations::export,
        )
        .get("/console/usage", R::permission(None, Tier::Free), usage)
        .get(
            "/console/keys",
            R::permission(Some(P::TenantManage), Tier::Teams),
            keys::keys,
        )
        .post("/console/keys/invite", R::SecondFactor, keys::create_invite)
        .post("/console/keys/issue", R::SecondFactor, keys::issue)
        .post("/console/keys/{id}/label", R::SecondFactor, keys::label)
        .post("/console/keys/{id}/revoke", R::SecondFactor, keys::revoke)
        .post("/console/keys/{id}/reissue", R::SecondFactor, keys::reissue)
        .get("/console/static/console.js", R::Public, script)
        .get("/console/static/md5.js", R::Public, md5_script)
        .get("/console/static/console.css", R::Public, style)
        .get("/favicon.ico", R::Public, favicon)
        .any("/console/{*rest}", R::Public, not_found)
}

/// The console's router: each declared route behind the enforcement of its rule (a public
/// route has nothing to enforce; the catch-all's method router could not take a layer).
pub(super) fn routes(state: &AppState) -> Router<AppState> {
    let mut router = Router::new();
    for (route, handler) in declared().into_parts() {
        let handler = if route.rule == ConsoleRule::Public {
            handler
        } else {
            handler.route_layer(axum::middleware::from_fn_with_state(
                Arc::new((state.clone(), route.rule)),
                gate::enforce,
            ))
        };
        router = router.route(route.path, handler);
    }
    router
}

// ----- plumbing -----

/// What every page knows about the request: the signed-in principal (if any) and the CSRF
/// token (a new one is set when the browser has none).
#[derive(Clone)]
struct Ctx {
    principal: Option<Principal>,
    csrf: String,
    new_csrf: bool,
}

async fn ctx(state: &AppState, headers: &HeaderMap) -> Ctx {
    let principal = match cookie(headers, SESSION_COOKIE) {
        Some(token) => state.credentials.from_session_cookie(&token).await.ok(),
        None => None,
    };
    let (csrf, new_csrf) = match cookie(headers, CSRF_COOKIE) {
        Some(token) if token.len() >= 32 => (token, false),
        _ => (hex::encode(rand::random::<[u8; 24]>()), true),
    };
    Ctx {
        principal: principal.filter(|p| p.session.is_some()),
        csrf,
        new_csrf,
    }
}

/// The form's CSRF token must equal the cookie's.
fn check_csrf(headers: &HeaderMap, sent: Option<&str>) -> Result<(), Response> {
    let cookie = cookie(headers, CSRF_COOKIE).unwrap_or_default();
    let sent = sent.unwrap_or_default();
    if cookie.len() >= 32 && bool::from(cookie.as_bytes().ct_eq(sent.as_bytes())) {
        Ok(())
    } else {
        Err((
            StatusCode::FORBIDDEN,
            "the form's security token does not match; reload the page and try again",
        )
            .into_response())
    }
}

fn csrf_field(ctx: &Ctx) -> Markup {
    html! { input type="hidden" name="csrf" value=(ctx.csrf); }
}

/// A page inside the layout, with the CSRF cookie when it is new.
fn page(state: &AppState, ctx: &Ctx, status: StatusCode, title: &str, body: Markup) -> Response {
    let html = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="csrf-token" content=(ctx.csrf);
                title { (title) " · knowngood" }
                link rel="stylesheet" href="/console/static/console.css";
                link rel="icon" href="/favicon.ico";
                script src="/console/static/md5.js" defer {}
                script src="/console/static/console.js" defer {}
            }
            body {
                a class="skip" href="#main" { "Skip to content" }
                header { a class="brand" href="/console/" { "knowngood" } (nav(ctx)) }
                main id="main" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    };
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        html.into_string(),
    )
        .into_response();
    if ctx.new_csrf {
        response.headers_mut().append(
            header::SET_COOKIE,
            set_cookie(state, CSRF_COOKIE, &ctx.csrf, 12 * 3600),
        );
    }
    response
}

fn nav(ctx: &Ctx) -> Markup {
    let mut links = vec![("/console/", "Dashboard")];
    match &ctx.principal {
        Some(p) => {
            links.extend([
                ("/console/lookup", "Lookup"),
                ("/console/history", "History"),
                ("/console/coverage", "Coverage"),
            ]);
            if p.has(Permission::IntelRevocations) {
                links.push(("/console/revocations", "Revocations"));
            }
            if p.has(Permission::IntelPackages) {
                links.push(("/console/packages", "Packages"));
            }
            links.push(("/console/usage", "Usage"));
            if p.has(Permission::TenantManage) {
                links.push(("/console/keys", "Keys"));
            }
            links.push(("/console/account", "Account"));
        }
        None => links.push(("/console/sign-in", "Sign in")),
    }
    html! {
        nav aria-label="Main" {
            ul { @for (href, label) in &links { li { a href=(href) { (label) } } } }
            @if let Some(p) = &ctx.principal {
                form method="post" action="/console/sign-out" class="inline" {
                    (csrf_field(ctx)) button type="submit" { "Sign out" }
                }
                "\n"
                span class="who" { (p.team_id) " · " (p.role.as_str()) }
            }
        }
    }
}

fn message(kind: &str, text: &str) -> Markup {
    let role = if kind == "error" { "alert" } else { "status" };
    html! { p class={ "msg " (kind) } role=(role) { (text) } }
}

/// The signed-in principal, or the way to the sign-in page. With `need_mfa`, a session
/// that has not passed a second factor is sent to Account to enrol one.
fn signed_in(ctx: &Ctx, need_mfa: bool) -> Result<&Principal, Response> {
    let Some(principal) = &ctx.principal else {
        return Err(see_other("/console/sign-in"));
    };
    if need_mfa && principal.session.as_ref().is_some_and(|s| !s.mfa) {
        return Err(see_other("/console/account?enrol=1"));
    }
    Ok(principal)
}

fn refused(state: &AppState, ctx: &Ctx, e: &Error) -> Response {
    let (status, _) = crate::error::status_and_code(e);
    let text = match e {
        Error::Internal { .. } => {
            tracing::error!(error = %e, "console: internal error");
            "Something went wrong on our side.".to_string()
        }
        other => other.to_string(),
    };
    page(state, ctx, status, "Not allowed", message("error", &text))
}

fn with_session_cookie(state: &AppState, mut response: Response, token: &str) -> Response {
    let max_age = auth::credentials::SESSION_TTL_SECS;
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(state, SESSION_COOKIE, token, max_age),
    );
    response
}

fn clear_cookie(state: &AppState, mut response: Response, name: &str) -> Response {
    response
        .headers_mut()
        .append(header::SET_COOKIE, set_cookie(state, name, "", 0));
    response
}

// ----- public pages -----

async fn dashboard(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<Fields>,
) -> Response {
    let ctx = ctx(&state, &headers).await;
    let search = q
        .get("q")
        .map(|s| s.trim().to_lowercase())
        .unwrap_or_default();
    let platform = q.get("platform").cloned().unwrap_or_default();
    let health = state.store.vendor_health().await.unwrap_or_default();
    let query = store::CurrentSearch {
        name_prefix: (!search.is_empty()).then(|| search.clone()),
        vendors: health
            .iter()
            .filter(|h| !search.is_empty() && h.vendor.to_lowercase().contains(&search))
            .map(|h| h.vendor.clone())
            .collect(),
        platform: (!platform.is_empty()).then(|| platform.clone()),
    };
    // One more than is shown, to know whether there are more.
    let found = match state.store.search_current(&query, FEED_SHOWN + 1).await {
        Ok(r) => r,
        Err(e) => return refused(&state, &ctx, &e),
    };
    let total = if query == store::CurrentSearch::default() {
        state.store.stats().await.ok().map(|s| s.total_records)
    } else {
        None
    };
    let matching: Vec<_> = found.iter().filter(|r| r.integrity_ok).collect();
    let root = match state.store.recent_roots(1).await {
        Ok(roots) => roots.into_iter().next(),
        Err(_) => None,
    };
    let body = html! {
        (feed_section(
            q.get("q").map(String::as_str).unwrap_or_default(),
            &platform,
            &matching,
            total,
        ))
        (health_section(&health))
        (root_section(root.as_ref()))
    };
    page(&state, &ctx, StatusCode::OK, "Dashboard", body)
}

/// Current records the dashboard lists at most.
const FEED_SHOWN: u32 = 200;

/// Today's feed: the search form and the current records that match it (200 at most, of
/// up to 201 read: the 201st says there are more). `total`: every current record's count,
/// when nothing narrows the list.
fn feed_section(
    search_text: &str,
    platform: &str,
    matching: &[&HashRecord],
    total: Option<u64>,
) -> Markup {
    let shown = matching.len().min(FEED_SHOWN as usize);
    let more = matching.len() > shown;
    html! {
        section aria-labelledby="feed" {
            h2 id="feed" { "Today's feed" }
            form method="get" action="/console/" class="filters" role="search" {
                label for="q" { "Search executables or vendors" }
                input id="q" name="q" value=(search_text);
                "\n"
                label for="platform" { "Platform" }
                select id="platform" name="platform" {
                    @for p in ["", "windows", "linux", "darwin", "android", "universal"] {
                        option value=(p) selected[p == platform] {
                            (if p.is_empty() { "any platform" } else { p })
                        }
                    }
                }
                "\n"
                button type="submit" { "Filter" }
            }
            p {
                @match (total, more) {
                    (Some(total), _) => { (shown) " of " (total) " current records." }
                    (None, false) => { (shown) " of " (shown) " current records." }
                    (None, true) => {
                        "The first " (shown) " of more than " (shown) " matching current records."
                    }
                }
            }
            div class="scroll" {
                table {
                    thead { tr {
                        th scope="col" { "Executable" } th scope="col" { "Version" }
                        th scope="col" { "Vendor" } th scope="col" { "Platform" }
                        th scope="col" { "SHA-256" }
                    } }
                    tbody {
                        @for r in matching.iter().take(shown) {
                            tr {
                                td { (r.record.executable_name) }
                                td { (r.record.version) }
                                td { (r.record.vendor) }
                                td { (r.record.platform.as_str()) " / " (r.record.arch.as_str()) }
                                td class="hash" { (r.record.hash_sha256) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Each vendor's last refresh.
fn health_section(health: &[VendorHealth]) -> Markup {
    html! {
        section aria-labelledby="health" {
            h2 id="health" { "Vendor health" }
            div class="scroll" {
                table {
                    thead { tr {
                        th scope="col" { "Vendor" } th scope="col" { "State" }
                        th scope="col" { "Last success (UTC)" } th scope="col" { "Records" }
                    } }
                    tbody {
                        @for v in health {
                            @let ok = v.last_success_at.is_some()
                                && v.last_error_at.is_none_or(|e| Some(e) < v.last_success_at);
                            tr {
                                td { (v.vendor) }
                                td { (if ok { "ok" } else { "failing" }) }
                                td {
                                    (v.last_success_at.map_or("never".into(), |t| {
                                        t.format("%Y-%m-%d %H:%M").to_string()
                                    }))
                                }
                                td { (v.records) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The latest published root of the transparency log, and how to verify it.
fn root_section(root: Option<&StoredRoot>) -> Markup {
    html! {
        section aria-labelledby="root" {
            h2 id="root" { "Transparency log" }
            @match root {
                Some(r) => dl {
                    dt { "Day" } dd { (r.log_date) }
                    dt { "Merkle root" } dd class="hash" { (r.merkle_root) }
                    dt { "Entries" } dd { (r.entry_count) }
                    dt { "Previous root" } dd class="hash" { (r.prev_root) }
                },
                None => p { "No root has been published yet." },
            }
            p {
                "To verify: fetch " code { "/public/transparency/<day>" }
                " and the key at " code { "/public/transparency/key" }
                ", check the Ed25519 signature over the signed message, and check that "
                code { "prev_root" } " equals the previous day's root. " code { "knowngood verify" }
                " does all of it; an inclusion proof for one hash is at "
                code { "/public/transparency/<day>/proof?sha256=<hex>" } "."
            }
        }
    }
}

async fn sign_in_page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let ctx = ctx(&state, &headers).await;
    sign_in_form(&state, &ctx, StatusCode::OK, html! {})
}

fn sign_in_form(state: &AppState, ctx: &Ctx, status: StatusCode, note: Markup) -> Response {
    let body = html! {
        (note)
        form method="post" action="/console/sign-in" class="card" {
            (csrf_field(ctx))
            label for="key" { "API key" }
            input id="key" name="key" type="password" autocomplete="off" required aria-describedby="key-help";
            p id="key-help" class="help" {
                "The key you use for the API (" code { "TEAM.SECRET" }
                "). You will be asked for your passkey or authenticator code next."
            }
            button type="submit" { "Sign in" }
        }
        div class="card" {
            h2 { "Passkey" }
            p { "Signed in with a passkey before? Use it directly." }
            button type="button" data-action="passkey-sign-in" { "Sign in with a passkey" }
            p class="msg" role="status" data-passkey-status {}
        }
        form method="post" action="/console/sign-in/user" class="card" {
            (csrf_field(ctx))
            h2 { "Invited user" }
            label for="user" { "User ID" }
            input id="user" name="user" autocomplete="username" spellcheck="false" required aria-describedby="user-help";
            p id="user-help" class="help" {
                "Joined with an invite code? Enter the user ID shown on your Account page. You will be asked for your authenticator code, a recovery code or your passkey next."
            }
            button type="submit" { "Continue" }
        }
        p {
            "Invited by your account admin and not joined yet? "
            a href="/console/invite" { "Redeem your invite code" } "."
        }
    };
    page(state, ctx, status, "Sign in", body)
}

/// A refused credential at sign-in, counted under the same per-address (and per-team)
/// failed-credential limits as the API's: 401 with `text` while under them, 429 beyond.
async fn failed_sign_in(
    state: &AppState,
    ctx: &Ctx,
    headers: &HeaderMap,
    peer: SocketAddr,
    team_named: Option<&str>,
    text: &str,
) -> Response {
    let ip = crate::guard::client_ip(peer, headers, &state.settings.trusted_proxies);
    let team = team_named.filter(|t| auth::validate_team_id(t).is_ok());
    let answer = state
        .auth_failures
        .refuse(state, ip, team, Error::Unauthorized(text.into()))
        .await;
    match answer {
        Error::RateLimited { retry_after_secs } => {
            let mut r = sign_in_form(
                state,
                ctx,
                StatusCode::TOO_MANY_REQUESTS,
                message(
                    "error",
                    &format!(
                        "Too many failed sign-ins from your address. Try again in {retry_after_secs} seconds."
                    ),
                ),
            );
            if let Ok(v) = HeaderValue::from_str(&retry_after_secs.to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
            r
        }
        _ => sign_in_form(state, ctx, StatusCode::UNAUTHORIZED, message("error", text)),
    }
}

/// Sends a subject with a second factor to the second-factor page, under a pending
/// sign-in cookie.
async fn to_second_factor(state: &AppState, ctx: &Ctx, subject: &str) -> Response {
    match state.mfa.start_pending(subject).await {
        Ok(pending) => {
            let mut r = see_other("/console/second-factor");
            r.headers_mut().append(
                header::SET_COOKIE,
                set_cookie(state, PENDING_COOKIE, &pending, 300),
            );
            r
        }
        Err(e) => refused(state, ctx, &e),
    }
}

async fn sign_in(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    if let Err(r) = check_csrf(&headers, form.get("csrf").map(String::as_str)) {
        return r;
    }
    let ctx = ctx(&state, &headers).await;
    let key = form.get("key").map(|k| k.trim()).unwrap_or_default();
    let principal = match state.credentials.from_api_key(key).await {
        Ok(p) => p,
        Err(Error::Unauthorized(_)) => {
            let team = key.split_once('.').map(|(team, _)| team);
            return failed_sign_in(&state, &ctx, &headers, peer, team, "That key is not valid.")
                .await;
        }
        Err(e) => return refused(&state, &ctx, &e),
    };
    let subject = principal.mfa_subject();
    let enrolled = match state.mfa.enrolled(&subject).await {
        Ok(e) => e,
        Err(e) => return refused(&state, &ctx, &e),
    };
    if enrolled {
        return to_second_factor(&state, &ctx, &subject).await;
    }
    // A first sign-in: a session that reaches only Account until a factor is enrolled.
    match state
        .credentials
        .key_session(&principal.key_id, false)
        .await
    {
        Ok((token, _)) => {
            with_session_cookie(&state, see_other("/console/account?enrol=1"), &token)
        }
        Err(e) => refused(&state, &ctx, &e),
    }
}

/// Where a session that passed its second factor lands: Lookup when the account may look
/// up hashes, Account otherwise.
async fn landing(state: &AppState, token: &str) -> &'static str {
    match state.credentials.from_session_cookie(token).await {
        Ok(p)
            if p.authorize(Some(Permission::IntelLookup), Tier::Basic)
                .is_ok() =>
        {
            "/console/lookup"
        }
        _ => "/console/account",
    }
}

/// An invited user signing in again: their user ID, then the second factor they enrolled
/// (authenticator code, recovery code or passkey) on the second-factor page, under the
/// same wrong-code budget and lock-out as a key's. An unknown or disabled user counts as a
/// failed credential.
async fn sign_in_user(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    if let Err(r) = check_csrf(&headers, form.get("csrf").map(String::as_str)) {
        return r;
    }
    let ctx = ctx(&state, &headers).await;
    let given = form.get("user").map(|u| u.trim()).unwrap_or_default();
    let user = match uuid::Uuid::parse_str(given) {
        Ok(id) => match state.store.user(&id.to_string()).await {
            Ok(user) => user.filter(|u| u.status == "active"),
            Err(e) => return refused(&state, &ctx, &e),
        },
        Err(_) => None,
    };
    let Some(user) = user else {
        return failed_sign_in(
            &state,
            &ctx,
            &headers,
            peer,
            None,
            "No active user has that ID.",
        )
        .await;
    };
    let subject = format!("user:{}", user.user_id);
    match state.mfa.enrolled(&subject).await {
        Ok(true) => to_second_factor(&state, &ctx, &subject).await,
        Ok(false) => sign_in_form(
            &state,
            &ctx,
            StatusCode::UNAUTHORIZED,
            message(
                "error",
                "That user has no passkey or authenticator app yet, so it cannot sign in again. Ask your account admin for a new invite code.",
            ),
        ),
        Err(e) => refused(&state, &ctx, &e),
    }
}

async fn second_factor_page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let ctx = ctx(&state, &headers).await;
    second_factor_form(&state, &ctx, &headers, StatusCode::OK, html! {}).await
}

async fn second_factor_form(
    state: &AppState,
    ctx: &Ctx,
    headers: &HeaderMap,
    status: StatusCode,
    note: Markup,
) -> Response {
    let pending = match cookie(headers, PENDING_COOKIE) {
        Some(p) => state.mfa.pending_subject(&p).await.ok().flatten(),
        None => None,
    };
    if pending.is_none() {
        return see_other("/console/sign-in");
    }
    let body = html! {
        (note)
        form method="post" action="/console/second-factor/totp" class="card" {
            (csrf_field(ctx))
            h2 { "Authenticator app" }
            label for="code" { "6-digit code" }
            input id="code" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" required;
            "\n"
            button type="submit" { "Continue" }
        }
        div class="card" {
            h2 { "Passkey" }
            button type="button" data-action="passkey-sign-in" { "Use a passkey" }
            p class="msg" role="status" data-passkey-status {}
        }
        form method="post" action="/console/second-factor/recovery" class="card" {
            (csrf_field(ctx))
            h2 { "Recovery code" }
            label for="recovery" { "Recovery code" }
            input id="recovery" name="code" autocomplete="off" placeholder="XXXX-XXXX-XXXX" required;
            "\n"
            button type="submit" { "Use recovery code" }
        }
    };
    page(state, ctx, status, "Second factor", body)
}

async fn second_factor_totp(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    second_factor(state, headers, form, false).await
}

async fn second_factor_recovery(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    second_factor(state, headers, form, true).await
}

async fn second_factor(
    state: AppState,
    headers: HeaderMap,
    form: Fields,
    recovery: bool,
) -> Response {
    if let Err(r) = check_csrf(&headers, form.get("csrf").map(String::as_str)) {
        return r;
    }
    let ctx = ctx(&state, &headers).await;
    let Some(pending) = cookie(&headers, PENDING_COOKIE) else {
        return see_other("/console/sign-in");
    };
    let Ok(Some(subject)) = state.mfa.pending_subject(&pending).await else {
        return see_other("/console/sign-in");
    };
    let code = form.get("code").map(String::as_str).unwrap_or_default();
    let checked = if recovery {
        state.mfa.recovery_use(&subject, code).await.map(Some)
    } else {
        state.mfa.totp_sign_in(&subject, code).await.map(|()| None)
    };
    let left = match checked {
        Ok(left) => left,
        Err(e) => {
            let (status, text, retry_after) = match e {
                Error::RateLimited { retry_after_secs } => (
                    StatusCode::TOO_MANY_REQUESTS,
                    format!(
                        "Too many wrong codes. Try again in {} minutes.",
                        retry_after_secs.div_ceil(60)
                    ),
                    Some(retry_after_secs),
                ),
                Error::Internal { .. } | Error::Unavailable(_) => return refused(&state, &ctx, &e),
                _ => (
                    StatusCode::UNAUTHORIZED,
                    "That code is not valid (or was already used).".into(),
                    None,
                ),
            };
            let mut r =
                second_factor_form(&state, &ctx, &headers, status, message("error", &text)).await;
            if let Some(v) = retry_after.and_then(|s| HeaderValue::from_str(&s.to_string()).ok()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
            return r;
        }
    };
    let issued = session_for_subject(&state, &subject).await;
    let (token, _) = match issued {
        Ok(t) => t,
        Err(e) => return refused(&state, &ctx, &e),
    };
    if let Err(e) = state.mfa.end_pending(&pending).await {
        tracing::warn!(error = %e, "could not close a pending sign-in");
    }
    let to = match left {
        Some(left) => format!("/console/account?recovery_left={left}"),
        None => landing(&state, &token).await.into(),
    };
    let response = with_session_cookie(&state, see_other(&to), &token);
    clear_cookie(&state, response, PENDING_COOKIE)
}

async fn invite_page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let ctx = ctx(&state, &headers).await;
    invite_form(&state, &ctx, StatusCode::OK, html! {})
}

fn invite_form(state: &AppState, ctx: &Ctx, status: StatusCode, note: Markup) -> Response {
    let body = html! {
        (note)
        form method="post" action="/console/invite" class="card" {
            (csrf_field(ctx))
            label for="code" { "Invite code" }
            input id="code" name="code" autocomplete="off" required;
            p class="help" { "You will set up a passkey or authenticator app next." }
            button type="submit" { "Join" }
        }
    };
    page(state, ctx, status, "Redeem an invite", body)
}

async fn redeem_invite(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    if let Err(r) = check_csrf(&headers, form.get("csrf").map(String::as_str)) {
        return r;
    }
    let ctx = ctx(&state, &headers).await;
    let code = form.get("code").map(String::as_str).unwrap_or_default();
    match state.admin.redeem_invite(code).await {
        Ok((token, _)) => {
            with_session_cookie(&state, see_other("/console/account?enrol=1"), &token)
        }
        Err(e @ Error::Internal { .. }) => refused(&state, &ctx, &e),
        Err(_) => invite_form(
            &state,
            &ctx,
            StatusCode::UNAUTHORIZED,
            message(
                "error",
                "That invite code is not valid, has expired or was used.",
            ),
        ),
    }
}

async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    if let Err(r) = check_csrf(&headers, form.get("csrf").map(String::as_str)) {
        return r;
    }
    let ctx = ctx(&state, &headers).await;
    if let Some(session) = ctx.principal.as_ref().and_then(|p| p.session.as_ref())
        && let Err(e) = state.credentials.sign_out(&session.session_id).await
    {
        return refused(&state, &ctx, &e);
    }
    clear_cookie(&state, see_other("/console/sign-in"), SESSION_COOKIE)
}

// ----- account -----

async fn account(
    State(state): State<AppState>,
    Signed { ctx, principal }: Signed,
    Query(q): Query<Fields>,
) -> Response {
    let principal = &principal;
    let notes = html! {
        @if let Some(left) = q.get("recovery_left") {
            (message(
                "warn",
                &format!(
                    "You signed in with a recovery code; {} left.",
                    left.parse::<u64>().unwrap_or(0)
                ),
            ))
        }
    };
    account_page(&state, &ctx, principal, StatusCode::OK, notes).await
}

async fn account_page(
    state: &AppState,
    ctx: &Ctx,
    principal: &Principal,
    status: StatusCode,
    notes: Markup,
) -> Response {
    let subject = principal.mfa_subject();
    let mfa = match state.mfa.status(&subject).await {
        Ok(s) => s,
        Err(e) => return refused(state, ctx, &e),
    };
    let passkeys = state.store.passkeys(&subject).await.unwrap_or_default();
    let session_mfa = principal.session.as_ref().is_some_and(|s| s.mfa);
    let user_id = principal.session.as_ref().and_then(|s| s.user_id.as_ref());
    let signed_in_with_key = principal
        .session
        .as_ref()
        .is_some_and(|s| s.user_id.is_none());
    let body = html! {
        (notes)
        @if !session_mfa {
            (message(
                "warn",
                "Set up a passkey or an authenticator app to continue: the other pages open once you have one.",
            ))
        }
        (who_section(principal, user_id))
        (passkeys_section(ctx, &passkeys))
        (totp_section(ctx, &mfa))
        (recovery_section(ctx, &mfa))
        @if signed_in_with_key {
            (reissue_section(ctx))
        }
    };
    page(state, ctx, status, "Account", body)
}

/// Who is signed in: the user ID to sign in again with, the account, role and tier.
fn who_section(principal: &Principal, user_id: Option<&String>) -> Markup {
    html! {
        section aria-labelledby="who" {
            h2 id="who" { "Signed in as" }
            dl {
                @if let Some(user_id) = user_id {
                    dt { "User ID" }
                    dd {
                        code data-user-id { (user_id) }
                        p class="help" {
                            "You sign in again with this user ID and your authenticator app, a recovery code or your passkey: keep it."
                        }
                    }
                }
                dt { "Account" } dd { (principal.team_id) }
                dt { "Role" } dd { (principal.role.as_str()) }
                dt { "Tier" } dd { (principal.tier.as_str()) }
            }
        }
    }
}

/// The passkeys, each with its remove button, and the control that adds one.
fn passkeys_section(ctx: &Ctx, passkeys: &[PasskeyRow]) -> Markup {
    html! {
        section aria-labelledby="passkeys" class="card" {
            h2 id="passkeys" { "Passkeys" }
            ul data-passkey-list {
                @for p in passkeys {
                    li {
                        (p.display_name) " "
                        span class="help" { "added " (p.created_at.format("%Y-%m-%d")) }
                        "\n"
                        form method="post" action={ "/console/account/passkeys/" (p.passkey_id) "/delete" } class="inline" {
                            (csrf_field(ctx))
                            button type="submit" aria-label={ "Remove passkey " (p.display_name) } { "Remove" }
                        }
                    }
                }
            }
            label for="passkey-name" { "Name for a new passkey" }
            input id="passkey-name" value="Passkey" data-passkey-name;
            "\n"
            button type="button" data-action="passkey-register" { "Add a passkey" }
            p class="msg" role="status" data-passkey-status {}
        }
    }
}

/// The authenticator app: the form that turns it off, or the one that sets it up.
fn totp_section(ctx: &Ctx, mfa: &MfaStatus) -> Markup {
    html! {
        section aria-labelledby="totp" class="card" {
            h2 id="totp" { "Authenticator app (TOTP)" }
            @if mfa.totp_enabled {
                p { "Authenticator app: " strong { "on" } "." }
                form method="post" action="/console/account/totp/disable" {
                    (csrf_field(ctx))
                    label for="disable-code" { "Current code to turn it off" }
                    input id="disable-code" name="code" inputmode="numeric" autocomplete="one-time-code" required;
                    button type="submit" { "Turn off" }
                }
            } @else {
                p { "Authenticator app: " strong { "off" } "." }
                form method="post" action="/console/account/totp/enroll" {
                    (csrf_field(ctx))
                    button type="submit" { "Set up an authenticator app" }
                }
            }
        }
    }
}

/// The recovery codes left, and the form that generates a new set.
fn recovery_section(ctx: &Ctx, mfa: &MfaStatus) -> Markup {
    html! {
        section aria-labelledby="recovery" class="card" {
            h2 id="recovery" { "Recovery codes" }
            @if !mfa.enrolled {
                p {
                    "Recovery codes become available once you have a passkey or an authenticator app: they stand in for it if you lose it."
                }
            } @else {
                @if mfa.recovery_codes_remaining == 0 {
                    (message(
                        "warn",
                        "You have no recovery codes left. Generate a set now, so that losing your passkey or phone does not lock you out.",
                    ))
                }
                p { span data-recovery-left { (mfa.recovery_codes_remaining) } " unused recovery codes." }
                form method="post" action="/console/account/recovery" {
                    (csrf_field(ctx))
                    button type="submit" { "Generate new recovery codes" }
                }
            }
        }
    }
}

/// Reissuing the API key the session was opened with.
fn reissue_section(ctx: &Ctx) -> Markup {
    html! {
        section aria-labelledby="reissue" class="card" {
            h2 id="reissue" { "Your API key" }
            p {
                "Reissuing revokes the key you signed in with at once and shows its replacement once. You will need to sign in again with the new key."
            }
            form method="post" action="/console/account/reissue" {
                (csrf_field(ctx))
                button type="submit" class="danger" { "Reissue my key" }
            }
        }
    }
}

/// The page context and principal of a form post its route's rule let through, once its
/// CSRF token is checked.
fn form_principal(
    signed: Signed,
    headers: &HeaderMap,
    form: &Fields,
) -> Result<(Ctx, Principal), Response> {
    check_csrf(headers, form.get("csrf").map(String::as_str))?;
    Ok((signed.ctx, signed.principal))
}

async fn mark_session_mfa(state: &AppState, principal: &Principal) -> Result<(), Error> {
    if let Some(s) = &principal.session
        && !s.mfa
    {
        state.store.set_session_mfa(&s.session_id).await?;
    }
    Ok(())
}

async fn totp_enroll(
    State(state): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    let (ctx, principal) = match form_principal(signed, &headers, &form) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let label = format!("{}@{}", principal.key_id, principal.team_id);
    let enrollment = match state
        .mfa
        .totp_enroll(
            &principal.mfa_subject(),
            &label,
            Proof::of(&principal, None),
        )
        .await
    {
        Ok(e) => e,
        Err(e) => return refused(&state, &ctx, &e),
    };
    let body = html! {
        p {
            "Scan the code with your authenticator app, or type the secret in. Then enter the 6-digit code it shows."
        }
        figure class="qr" aria-label="QR code of the authenticator secret" {
            // The QR code is our own SVG markup (qrcode's renderer: rects and a path only).
            (PreEscaped(&enrollment.qr_code_svg))
        }
        p { "Secret: " code data-totp-secret { (enrollment.secret) } }
        (totp_code_form(&ctx))
    };
    page(
        &state,
        &ctx,
        StatusCode::OK,
        "Set up an authenticator app",
        body,
    )
}

async fn totp_verify(
    State(state): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    let (ctx, principal) = match form_principal(signed, &headers, &form) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let code = form.get("code").map(String::as_str).unwrap_or_default();
    let result = state
        .mfa
        .totp_verify(&principal.mfa_subject(), code, Proof::of(&principal, None))
        .await;
    match result {
        Ok(()) => {
            if let Err(e) = mark_session_mfa(&state, &principal).await {
                return refused(&state, &ctx, &e);
            }
            see_other("/console/account")
        }
        Err(e @ (Error::Internal { .. } | Error::Unavailable(_))) => refused(&state, &ctx, &e),
        Err(Error::RateLimited { retry_after_secs }) => totp_retry(
            &state,
            &ctx,
            StatusCode::TOO_MANY_REQUESTS,
            &format!(
                "Too many wrong codes. Try again in {} minutes, with the same app entry.",
                retry_after_secs.div_ceil(60)
            ),
        ),
        Err(Error::BadRequest(text)) if text.contains("pending") => {
            account_page(
                &state,
                &ctx,
                &principal,
                StatusCode::BAD_REQUEST,
                message(
                    "error",
                    "No set-up is in progress: start it again from this page.",
                ),
            )
            .await
        }
        Err(Error::BadRequest(_)) => totp_retry(
            &state,
            &ctx,
            StatusCode::BAD_REQUEST,
            "The code is the 6 digits the app shows now.",
        ),
        Err(_) => totp_retry(
            &state,
            &ctx,
            StatusCode::UNAUTHORIZED,
            "That code was not accepted. Check that the app's clock is right and enter the code it shows now.",
        ),
    }
}

/// A wrong code at enrolment: the same secret stays pending (the app already holds it), so
/// the user only enters the current code again.
fn totp_retry(state: &AppState, ctx: &Ctx, status: StatusCode, text: &str) -> Response {
    let body = html! {
        (message("error", text))
        p { "Your authenticator app keeps the entry you added: enter the code it shows now." }
        (totp_code_form(ctx))
        form method="post" action="/console/account/totp/enroll" {
            (csrf_field(ctx))
            button type="submit" { "Start again with a new secret" }
        }
    };
    page(state, ctx, status, "Set up an authenticator app", body)
}

/// The form that turns a pending authenticator app on with its first code.
fn totp_code_form(ctx: &Ctx) -> Markup {
    html! {
        form method="post" action="/console/account/totp/verify" class="card" {
            (csrf_field(ctx))
            label for="code" { "Code from the app" }
            input id="code" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" required;
            "\n"
            button type="submit" { "Turn on" }
        }
    }
}

async fn totp_disable(
    State(state): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    let (ctx, principal) = match form_principal(signed, &headers, &form) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let code = form.get("code").map(String::as_str).unwrap_or_default();
    match state.mfa.totp_disable(&principal.mfa_subject(), code).await {
        Ok(()) => see_other("/console/account"),
        Err(e) => {
            account_page(
                &state,
                &ctx,
                &principal,
                StatusCode::BAD_REQUEST,
                message("error", &format!("Not turned off: {e}")),
            )
            .await
        }
    }
}

async fn recovery_generate(
    State(state): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    let (ctx, principal) = match form_principal(signed, &headers, &form) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let codes = match state
        .mfa
        .recovery_generate(&principal.mfa_subject(), Proof::of(&principal, None))
        .await
    {
        Ok(c) => c,
        Err(e) => return refused(&state, &ctx, &e),
    };
    let body = html! {
        (message(
            "warn",
            "Store these codes somewhere safe: each works once, they are shown only now, and these replace any earlier codes.",
        ))
        ol class="codes" data-recovery-codes {
            @for c in &codes { li { code { (c) } } }
        }
        p {
            button type="button" data-action="copy-codes" { "Copy the codes" }
            " "
            button type="button" data-action="download-codes" { "Download as a text file" }
        }
        p class="msg" role="status" data-codes-status {}
        p { a href="/console/account" { "Back to Account" } }
    };
    page(&state, &ctx, StatusCode::OK, "Recovery codes", body)
}

async fn passkey_delete(
    State(state): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<Fields>,
) -> Response {
    let (ctx, principal) = match form_principal(signed, &headers, &form) {
        Ok(p) => p,
        Err(r) => return r,
    };
    match state
        .mfa
        .passkey_delete(&principal.mfa_subject(), &id, Proof::of(&principal, None))
        .await
    {
        Ok(_) => see_other("/console/account"),
        Err(e) => refused(&state, &ctx, &e),
    }
}

async fn reissue(
    State(state): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    let (ctx, principal) = match form_principal(signed, &headers, &form) {
        Ok(p) => p,
        Err(r) => return r,
    };
    if principal
        .session
        .as_ref()
        .is_some_and(|s| s.user_id.is_some())
    {
        return refused(
            &state,
            &ctx,
            &Error::bad_request("you signed in as a user, not with a key"),
        );
    }
    let new = match state.admin.reissue_own_key(&principal).await {
        Ok(k) => k,
        Err(e) => return refused(&state, &ctx, &e),
    };
    // The old key is revoked, and the session with it.
    let body = html! {
        (message("warn", "Copy the new key now: it is shown only this once."))
        p { "Your new key:" }
        p { code class="secret" data-new-key { (new.key) } }
        p {
            "The old key stopped working just now. " a href="/console/sign-in" { "Sign in again" }
            " with the new key."
        }
    };
    let ctx = Ctx {
        principal: None,
        ..ctx
    };
    let response = page(&state, &ctx, StatusCode::OK, "Key reissued", body);
    clear_cookie(&state, response, SESSION_COOKIE)
}

// ----- passkeys (JSON for the console's script) -----

fn json_error(e: &Error) -> Response {
    crate::error::ApiError(e.clone()).into_response()
}

fn check_csrf_header(headers: &HeaderMap) -> Result<(), Response> {
    let sent = headers.get("x-csrf-token").and_then(|v| v.to_str().ok());
    check_csrf(headers, sent)
}

#[derive(serde::Deserialize)]
struct RegisterBegin {
    display_name: String,
}

async fn passkey_register_begin(
    State(state): State<AppState>,
    Signed { principal, .. }: Signed,
    headers: HeaderMap,
    Json(body): Json<RegisterBegin>,
) -> Response {
    if let Err(r) = check_csrf_header(&headers) {
        return r;
    }
    let principal = &principal;
    let name = body.display_name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return json_error(&Error::bad_request("display_name must be 1-100 characters"));
    }
    let user_name = format!("{}@{}", principal.key_id, principal.team_id);
    match state
        .mfa
        .passkey_register_begin(
            &principal.mfa_subject(),
            &user_name,
            name,
            Proof::of(principal, None),
        )
        .await
    {
        Ok(options) => Json(options).into_response(),
        Err(e) => json_error(&e),
    }
}

async fn passkey_register_complete(
    State(state): State<AppState>,
    Signed { principal, .. }: Signed,
    headers: HeaderMap,
    Json(credential): Json<serde_json::Value>,
) -> Response {
    if let Err(r) = check_csrf_header(&headers) {
        return r;
    }
    let principal = &principal;
    match state
        .mfa
        .passkey_register_complete(
            &principal.mfa_subject(),
            credential,
            Proof::of(principal, None),
        )
        .await
    {
        Ok(row) => {
            if let Err(e) = mark_session_mfa(&state, principal).await {
                return json_error(&e);
            }
            Json(
                serde_json::json!({"passkey_id": row.passkey_id, "display_name": row.display_name}),
            )
            .into_response()
        }
        Err(e) => json_error(&e),
    }
}

async fn passkey_sign_in(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(assertion): Json<serde_json::Value>,
) -> Response {
    if let Err(r) = check_csrf_header(&headers) {
        return r;
    }
    let subject = match state.mfa.passkey_sign_in_complete(assertion).await {
        Ok(s) => s,
        Err(e) => return json_error(&e),
    };
    let (token, _) = match session_for_subject(&state, &subject).await {
        Ok(t) => t,
        Err(e) => return json_error(&e),
    };
    if let Some(pending) = cookie(&headers, PENDING_COOKIE)
        && let Err(e) = state.mfa.end_pending(&pending).await
    {
        tracing::warn!(error = %e, "could not close a pending sign-in");
    }
    let to = landing(&state, &token).await;
    let response = Json(serde_json::json!({ "redirect": to })).into_response();
    let response = with_session_cookie(&state, response, &token);
    clear_cookie(&state, response, PENDING_COOKIE)
}

// ----- intel pages -----

/// The principal of a page that needs `permission` on `tier` and a passed second factor.
fn allowed<'a>(
    state: &AppState,
    ctx: &'a Ctx,
    permission: Option<Permission>,
    tier: Tier,
) -> Result<&'a Principal, Response> {
    let principal = signed_in(ctx, true)?;
    principal
        .authorize(permission, tier)
        .map_err(|e| refused(state, ctx, &e))?;
    Ok(principal)
}

async fn lookup_page(State(state): State<AppState>, Signed { ctx, .. }: Signed) -> Response {
    lookup_form(&state, &ctx, StatusCode::OK, "", html! {})
}

fn lookup_form(
    state: &AppState,
    ctx: &Ctx,
    status: StatusCode,
    hashes: &str,
    results: Markup,
) -> Response {
    let max_files = hash_lookup::MAX_FILES;
    let body = html! {
        form method="post" action="/console/lookup" class="card" data-lookup-form {
            (csrf_field(ctx))
            label for="hashes" { "Hashes (MD5, SHA-1 or SHA-256; one per line, up to 100)" }
            textarea id="hashes" name="hashes" rows="6" data-lookup-hashes { (hashes) }
            input type="hidden" name="files" value="" data-lookup-files;
            div class="drop" data-drop data-max-files=(max_files) tabindex="0" role="button" aria-describedby="drop-help" {
                "Drop files here, or choose them:\n"
                label for="file" class="sr-only" { "Files to hash" }
                input id="file" type="file" multiple data-file;
            }
            p id="drop-help" class="help" {
                "Each file is hashed in your browser (SHA-256, SHA-1, MD5) and never leaves it; only the hashes are looked up, up to "
                (max_files) " files at once, one row each."
            }
            p class="msg" role="status" data-file-status {}
            button type="submit" { "Look up" }
        }
        (results)
    };
    page(state, ctx, status, "Lookup", body)
}

async fn lookup(
    State(state): State<AppState>,
    Signed { ctx, principal }: Signed,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    if let Err(r) = check_csrf(&headers, form.get("csrf").map(String::as_str)) {
        return r;
    }
    hash_lookup::answer(&state, &ctx, &principal, &form).await
}

async fn history(
    State(state): State<AppState>,
    Signed { ctx, .. }: Signed,
    Query(q): Query<Fields>,
) -> Response {
    let executable = q
        .get("executable")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let mut results = html! {};
    if !executable.is_empty() {
        let query = store::HistoryQuery {
            executable: executable.clone(),
            limit: 200,
            ..store::HistoryQuery::default()
        };
        match state.store.history(&query).await {
            Ok(page) => {
                let suggest = if page.total == 0 {
                    match hash_lookup::suggestions(&state, &executable).await {
                        Ok(s) => s,
                        Err(e) => return refused(&state, &ctx, &e),
                    }
                } else {
                    html! {}
                };
                results = html! {
                    p { (page.total) " versions of " (executable) "." }
                    (suggest)
                    div class="scroll" {
                        table {
                            thead { tr {
                                th scope="col" { "Version" } th scope="col" { "Platform" }
                                th scope="col" { "Valid from (UTC)" } th scope="col" { "Valid until" }
                                th scope="col" { "Status" } th scope="col" { "SHA-256" }
                            } }
                            tbody {
                                @for r in &page.items {
                                    tr {
                                        td { (r.record.version) }
                                        td { (r.record.platform.as_str()) " / " (r.record.arch.as_str()) }
                                        td { (r.valid_from.format("%Y-%m-%d %H:%M")) }
                                        td {
                                            (r.valid_until.map_or("now".into(), |t| {
                                                t.format("%Y-%m-%d %H:%M").to_string()
                                            }))
                                        }
                                        td { (r.status.as_str()) }
                                        td class="hash" { (r.record.hash_sha256) }
                                    }
                                }
                            }
                        }
                    }
                };
            }
            Err(e) => return refused(&state, &ctx, &e),
        }
    }
    let body = html! {
        form method="get" action="/console/history" class="card" role="search" {
            label for="executable" { "Executable name" }
            input id="executable" name="executable" value=(executable) required;
            "\n"
            button type="submit" { "Show history" }
        }
        (results)
    };
    page(&state, &ctx, StatusCode::OK, "History", body)
}

async fn usage(State(state): State<AppState>, Signed { ctx, principal }: Signed) -> Response {
    let summary = match state.admin.usage(&principal).await {
        Ok(s) => s,
        Err(e) => return refused(&state, &ctx, &e),
    };
    let quota = summary.quota.filter(|q| *q > 0);
    let body = html! {
        dl {
            dt { "Month" } dd { (summary.month) }
            dt { "Requests" } dd data-usage-total { (summary.total) }
            dt { "Monthly quota (" (summary.tier.as_str()) ")" }
            dd { @if let Some(q) = quota { (q) } @else { "unlimited" } }
        }
        @if let Some(q) = quota {
            @let percent = format!("{:.1} %", summary.total as f64 / q as f64 * 100.0);
            p data-quota-share {
                strong { (percent) } " of this month's quota used: " (summary.total) " of " (q) " requests."
            }
            meter min="0" max=(q) low=(q / 2) high=(q / 10 * 9) optimum="0" value=(summary.total.min(q)) aria-label="Share of the monthly quota used" {
                (percent)
            }
        } @else {
            p data-quota-share { "This tier has no monthly quota." }
        }
        h2 { "Requests per day, last 30 days (UTC)" }
        (usage_chart(&summary.daily))
        h2 { "By endpoint" }
        div class="scroll" {
            table {
                thead { tr { th scope="col" { "Endpoint" } th scope="col" { "Requests" } } }
                tbody {
                    @for (endpoint, n) in &summary.by_endpoint {
                        tr { td { code { (endpoint) } } td { (n) } }
                    }
                }
            }
        }
    };
    page(&state, &ctx, StatusCode::OK, "Usage", body)
}

/// Requests per day as an SVG bar chart with its axes: the y axis from 0 to the busiest
/// day, the x axis dated at its first, middle and last day.
fn usage_chart(daily: &[(chrono::NaiveDate, u64)]) -> Markup {
    const LEFT: usize = 44;
    const TOP: usize = 8;
    const HEIGHT: usize = 100;
    const BAR: usize = 10;
    let max = daily.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    let width = daily.len().max(1) * BAR;
    let bottom = TOP + HEIGHT;
    // The middle tick only where it is a whole number of requests.
    let mut ticks = vec![(0, max), (HEIGHT, 0)];
    if max % 2 == 0 {
        ticks.push((HEIGHT / 2, max / 2));
    }
    let picks = match daily.len() {
        0 => Vec::new(),
        n => {
            let mut p = vec![0, n / 2, n - 1];
            p.dedup();
            p
        }
    };
    let (first, last) = match (daily.first(), daily.last()) {
        (Some(f), Some(l)) => (f.0.to_string(), l.0.to_string()),
        _ => (String::new(), String::new()),
    };
    html! {
        svg class="chart" viewBox={ "0 0 " (LEFT + width + 4) " " (bottom + 24) } role="img"
            aria-label={ "Requests per day from " (first) " to " (last) ", at most " (max) " a day" }
            data-usage-chart {
            g class="bars" {
                @for (i, (day, n)) in daily.iter().enumerate() {
                    @let h = (*n as f64 / max as f64 * HEIGHT as f64).round();
                    rect x=(LEFT + i * BAR + 1) y=((TOP + HEIGHT) as f64 - h) width="8" height=(h) {
                        title { (day) ": " (n) }
                    }
                }
            }
            line class="axis" x1=(LEFT) x2=(LEFT) y1=(TOP) y2=(bottom) {}
            line class="axis" x1=(LEFT) x2=(LEFT + width) y1=(bottom) y2=(bottom) {}
            g class="labels" {
                @for (offset, value) in &ticks {
                    text x=(LEFT - 6) y=(TOP + offset + 4) text-anchor="end" { (value) }
                    line class="tick" x1=(LEFT - 3) x2=(LEFT) y1=(TOP + offset) y2=(TOP + offset) {}
                }
                @for &i in &picks {
                    @let anchor = if i == 0 {
                        "start"
                    } else if i + 1 == daily.len() {
                        "end"
                    } else {
                        "middle"
                    };
                    text x=(LEFT + i * BAR + if anchor == "end" { BAR } else { 0 }) y=(bottom + 16)
                        text-anchor=(anchor) data-axis-date {
                        (daily[i].0.format("%b %-d"))
                    }
                }
            }
        }
    }
}

/// Any other path under `/console/`: the console's own 404 page (with its navigation and
/// headers), not the API's JSON error.
async fn not_found(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let ctx = ctx(&state, &headers).await;
    let body = html! {
        p { "There is no console page at this address. It may have moved, or the link is mistyped." }
        p {
            "Go to "
            @if ctx.principal.is_some() {
                a href="/console/lookup" { "Lookup" } " or the " a href="/console/" { "dashboard" }
            } @else {
                "the " a href="/console/" { "dashboard" } " or " a href="/console/sign-in" { "sign in" }
            }
            "."
        }
    };
    page(&state, &ctx, StatusCode::NOT_FOUND, "Page not found", body)
}

// ----- static files -----

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=3600"),
            ),
        ],
        body,
    )
        .into_response()
}

async fn script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("static/console.js"),
    )
}

async fn md5_script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("static/md5.js"),
    )
}

async fn favicon() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("image/x-icon"),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=86400"),
            ),
        ],
        &include_bytes!("static/favicon.ico")[..],
    )
        .into_response()
}

async fn style() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("static/console.css"),
    )
}
