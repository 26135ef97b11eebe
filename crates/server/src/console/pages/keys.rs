//! Keys and invites, for account admins: issue a key, change its label, revoke or reissue
//! it (a new key is shown once), and invite a person. The same `Admin` calls, checks and
//! audit rows as `/api/v1/admin/keys` and `/api/v1/admin/invites`.

use super::gate::{plain, td, when};
use super::*;

const TITLE: &str = "Keys and invites";

pub(super) async fn keys(State(state): State<AppState>, signed: Signed) -> Response {
    keys_page(&state, &signed.ctx, StatusCode::OK, html! {}).await
}

pub(super) async fn keys_page(
    state: &AppState,
    ctx: &Ctx,
    status: StatusCode,
    note: Markup,
) -> Response {
    let principal = match allowed(state, ctx, Some(Permission::TenantManage), Tier::Teams) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let keys = match state.admin.list_keys(principal, None).await {
        Ok(k) => k,
        Err(e) => return refused(state, ctx, &e),
    };
    let invites = match state
        .store
        .pending_invites(&principal.team_id, state.clock.now())
        .await
    {
        Ok(i) => i,
        Err(e) => return refused(state, ctx, &e),
    };
    let key_roles = ["analyst", "auditor", "account_admin"];
    let body = html! {
        (note)
        table class="cards" data-keys {
            thead { tr {
                th scope="col" { "Key" } th scope="col" { "Label" } th scope="col" { "Role" }
                th scope="col" { "Grants" } th scope="col" { "State" } th scope="col" { "Actions" }
            } }
            tbody { @for k in &keys { (key_row(ctx, principal, k)) } }
        }
        p class="help" {
            "Reissuing revokes a key at once and shows its replacement once (same role, label and grants; its holder's second factors move to it). Revoking stops a key at once, its tokens and console sessions included."
        }
        section aria-labelledby="issue" class="card" {
            h2 id="issue" { "Issue a key" }
            form method="post" action="/console/keys/issue" {
                (csrf_field(ctx))
                label for="issue-role" { "Role of the new key" }
                select id="issue-role" name="role" {
                    @for r in key_roles { option value=(r) { (r) } }
                }
                "\n"
                label for="issue-label" { "Label" }
                input id="issue-label" name="label" maxlength="100" required aria-describedby="issue-help";
                p id="issue-help" class="help" {
                    "Who or what uses the key, e.g. “SIEM enrichment” or “Ada's laptop”: it is how you tell keys apart later."
                }
                button type="submit" { "Issue key" }
            }
        }
        section aria-labelledby="invite" class="card" {
            h2 id="invite" { "Invite a person" }
            p {
                "An invited person signs in with the console (no API key): they redeem the code at "
                a href="/console/invite" { "/console/invite" }
                ", set up a passkey or an authenticator app, and sign in again with their user ID and that factor."
            }
            form method="post" action="/console/keys/invite" {
                (csrf_field(ctx))
                label for="role" { "Role" }
                select id="role" name="role" {
                    option value="analyst" { "analyst (Viewer)" }
                    option value="auditor" { "auditor (Analyst)" }
                }
                "\n"
                label for="display_name" { "Name" }
                input id="display_name" name="display_name" required;
                "\n"
                label for="contact" { "Contact" }
                input id="contact" name="contact" required aria-describedby="contact-help";
                p id="contact-help" class="help" {
                    "How you will reach this person to hand over the code: an email address, phone number or chat handle. The service sends nothing to it; it is kept with the invite and in the audit log so that you can tell later whom a code was for."
                }
                button type="submit" { "Create invite code" }
            }
        }
        section aria-labelledby="pending" {
            h2 id="pending" { "Pending invites" }
            p { "Codes handed out and not redeemed yet; each expires after 7 days." }
            @if invites.is_empty() {
                p data-empty { "No invite is waiting to be redeemed." }
            } @else {
                table class="cards" data-invites {
                    thead { tr {
                        th scope="col" { "Name" } th scope="col" { "Contact" } th scope="col" { "Role" }
                        th scope="col" { "Created (UTC)" } th scope="col" { "Valid until (UTC)" }
                    } }
                    tbody {
                        @for i in &invites {
                            tr {
                                (td("Name", &i.display_name))
                                (td("Contact", &i.contact))
                                (td("Role", i.role.as_str()))
                                (td("Created (UTC)", when(i.created_at)))
                                (td("Valid until (UTC)", when(i.expires_at)))
                            }
                        }
                    }
                }
            }
        }
    };
    page(state, ctx, status, TITLE, body)
}

/// One key's row: its label, role, active grants, state and, while it works, the forms
/// that rename, reissue and revoke it.
fn key_row(ctx: &Ctx, principal: &Principal, k: &auth::admin::ManagedKey) -> Markup {
    let grants: Vec<String> = k
        .info
        .grants
        .iter()
        .filter(|g| k.grant_active(g))
        .map(|g| match g.expires_at {
            Some(at) => format!("{} until {}", g.role.as_str(), at.format("%Y-%m-%d")),
            None => g.role.as_str().to_string(),
        })
        .collect();
    let id = &k.info.key_id;
    let state = match k.info.revoked_at {
        Some(at) => format!("revoked {}", when(at)),
        None if *id == principal.key_id => "active (yours)".to_string(),
        None => "active".to_string(),
    };
    let actions = html! {
        @if k.info.revoked_at.is_none() {
            form method="post" action={ "/console/keys/" (id) "/label" } class="row-form" {
                (csrf_field(ctx))
                label for={ "label-" (id) } class="sr-only" { "New label for " (id) }
                input id={ "label-" (id) } name="label" value=(k.info.label) maxlength="100" required;
                button type="submit" { "Rename" }
            }
            "\n"
            form method="post" action={ "/console/keys/" (id) "/reissue" } class="inline" {
                (csrf_field(ctx))
                button type="submit" aria-label={ "Reissue key " (id) } { "Reissue" }
            }
            "\n"
            form method="post" action={ "/console/keys/" (id) "/revoke" } class="inline" {
                (csrf_field(ctx))
                button type="submit" class="danger" aria-label={ "Revoke key " (id) } { "Revoke" }
            }
        }
    };
    html! {
        tr {
            (td("Key", html! { code { (id) } }))
            (td("Label", &k.info.label))
            (td("Role", k.info.role.as_str()))
            (td("Grants", or_dash(&grants.join(", "))))
            (td("State", state))
            (td("Actions", actions))
        }
    }
}

fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "–".into()
    } else {
        text.to_string()
    }
}

/// A key shown once, with what to do with it.
fn shown_once(what: &str, key: &str) -> Markup {
    html! {
        (message("warn", "Copy the key now: it is shown only this once."))
        p { (what) ": " code class="secret" data-issued-key { (key) } }
    }
}

async fn after(state: &AppState, ctx: &Ctx, result: Result<Markup, Error>) -> Response {
    match result {
        Ok(note) => keys_page(state, ctx, StatusCode::OK, note).await,
        Err(e) => {
            let (status, _) = crate::error::status_and_code(&e);
            keys_page(state, ctx, status, message("error", &plain(&e))).await
        }
    }
}

pub(super) async fn issue(
    State(state): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    let (ctx, principal) = match form_principal(signed, &headers, &form) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let get = |k: &str| form.get(k).map(|v| v.trim()).unwrap_or_default();
    let result = state
        .admin
        .issue_key(&principal, get("role"), Some(get("label")), None)
        .await
        .map(|k| {
            shown_once(
                &format!("New {} key “{}” ({})", k.role.as_str(), k.label, k.key_id),
                &k.key,
            )
        });
    after(&state, &ctx, result).await
}

pub(super) async fn label(
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
    let label = form.get("label").map(|v| v.trim()).unwrap_or_default();
    let result = state
        .admin
        .update_key(&principal, &id, Some(label), None)
        .await
        .map(|k| {
            message(
                "status",
                &format!("Key {} is now labelled “{}”.", k.info.key_id, k.info.label),
            )
        });
    after(&state, &ctx, result).await
}

pub(super) async fn revoke(
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
    if id == principal.key_id {
        let e = Error::bad_request(
            "this is the key you signed in with: reissue it on Account, or revoke it from another admin's session",
        );
        return after(&state, &ctx, Err(e)).await;
    }
    let result = state.admin.revoke_key(&principal, &id).await.map(|()| {
        message(
            "status",
            &format!("Key {id} is revoked: it stopped working."),
        )
    });
    after(&state, &ctx, result).await
}

pub(super) async fn reissue(
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
    if id == principal.key_id {
        // The session goes with the old key: Account's reissue says what happens next.
        return see_other("/console/account#reissue");
    }
    let result = state.admin.reissue_key(&principal, &id).await.map(|k| {
        shown_once(
            &format!("Replacement of {id} (“{}”), now {}", k.label, k.key_id),
            &k.key,
        )
    });
    after(&state, &ctx, result).await
}

pub(super) async fn create_invite(
    State(state): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    let (ctx, principal) = match form_principal(signed, &headers, &form) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let get = |k: &str| form.get(k).map(String::as_str).unwrap_or_default();
    match state
        .admin
        .invite(&principal, get("role"), get("display_name"), get("contact"))
        .await
    {
        Ok(invite) => {
            let note = html! {
                (message("warn", "Hand this code over now: it is shown only this once."))
                p {
                    "Invite code for " (get("display_name")) ": "
                    code class="secret" data-invite-code { (invite.code) }
                    " (valid until " (invite.expires_at.format("%Y-%m-%d %H:%M UTC")) "). Send it to "
                    (get("contact").trim()) "; they redeem it at " code { "/console/invite" } "."
                }
            };
            keys_page(&state, &ctx, StatusCode::CREATED, note).await
        }
        Err(e) => {
            let (status, _) = crate::error::status_and_code(&e);
            keys_page(&state, &ctx, status, message("error", &plain(&e))).await
        }
    }
}
