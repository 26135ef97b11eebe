//! Revocations: signing certificates found revoked on their issuers' CRLs, as
//! `/api/v1/intel/revocations` answers them, those that signed a file current on today's
//! feed first; the history with released holds; downloads of the list as JSON (the API's
//! own answer) and CSV.

use store::revocations::RevocationQuery;

use super::gate::{download, plain, td, when};
use super::*;
use crate::api::csv_field;
use crate::services::revocations::{self as service, RevokedCertJson};

const TITLE: &str = "Revocations";

/// Revocations in force in the API's order (most severe reason, then active, then newest),
/// with every certificate that signed a current file moved ahead of the rest.
async fn in_force(state: &AppState) -> Result<Vec<RevokedCertJson>, Error> {
    let mut certs = service::in_force(state).await?.revoked_certs;
    certs.sort_by_key(|c| !c.currently_active);
    Ok(certs)
}

pub(super) async fn page_(
    State(state): State<AppState>,
    Signed { ctx, .. }: Signed,
    Query(q): Query<Fields>,
) -> Response {
    let certs = match in_force(&state).await {
        Ok(c) => c,
        Err(e) => return refused(&state, &ctx, &e),
    };
    let active = certs.iter().filter(|c| c.currently_active).count();
    let list = html! {
        @if certs.is_empty() {
            p data-empty {
                "No signing certificate of a recorded file is revoked. The service checks each certificate against its issuer's CRL every few hours; one found revoked appears here with the vendors whose files it signed."
            }
        } @else {
            p {
                (certs.len()) " revoked certificates; " strong { (active) }
                " signed a file that is current on today's feed (listed first)."
            }
            p class="actions" {
                a class="button" href="/console/revocations/export?format=csv" download { "Download CSV" }
                " "
                a class="button" href="/console/revocations/export?format=json" download { "Download JSON" }
            }
            table class="cards" data-revocations {
                thead { tr {
                    th scope="col" { "Signer" } th scope="col" { "Reason" }
                    th scope="col" { "Revoked (UTC)" } th scope="col" { "Affected vendors" }
                    th scope="col" { "Signs a current file" } th scope="col" { "Issuer" }
                    th scope="col" { "Serial" } th scope="col" { "Thumbprint (SHA-1)" }
                } }
                tbody { @for c in &certs { (row(c)) } }
            }
        }
    };

    // The history: every revocation recorded, released holds included, newest first.
    let signer_raw = q.get("signer").map(|s| s.trim()).unwrap_or_default();
    let history = match crate::extract::name_filter(
        Some(signer_raw).filter(|s| !s.is_empty()),
        "signer",
    ) {
        Err(e) => message("error", &plain(&e)),
        Ok(signer) => {
            let query = RevocationQuery {
                signer,
                limit: 50,
                ..RevocationQuery::default()
            };
            match state.store.revocation_history(&query).await {
                Err(e) => return refused(&state, &ctx, &e),
                Ok(found) if found.items.is_empty() => html! {
                    @if signer_raw.is_empty() {
                        p data-empty { "No revocation has been recorded yet." }
                    } @else {
                        p data-empty {
                            "No recorded revocation has a signer containing “" (signer_raw) "”."
                        }
                    }
                },
                Ok(found) => html! {
                    p { (found.total.min(50)) " of " (found.total) ", newest first." }
                    table class="cards" {
                        thead { tr {
                            th scope="col" { "Signer" } th scope="col" { "Reason" }
                            th scope="col" { "Revoked (UTC)" } th scope="col" { "Released" }
                            th scope="col" { "Thumbprint (SHA-1)" }
                        } }
                        tbody {
                            @for c in found.items {
                                @let released = c.released_at.map(when);
                                @let c = RevokedCertJson::from(c);
                                tr {
                                    (td("Signer", &c.signer))
                                    (td("Reason", &c.revocation_reason))
                                    (td("Revoked (UTC)", short_time(&c.revoked_at)))
                                    (td("Released", released.unwrap_or_else(|| "in force".into())))
                                    (td("Thumbprint (SHA-1)", html! { span class="hash" { (c.thumbprint) } }))
                                }
                            }
                        }
                    }
                },
            }
        }
    };
    let body = html! {
        p {
            "Signing certificates of recorded files that their issuer's CRL lists as revoked: a file signed with one may have been signed by whoever held a stolen key. The same list as "
            code { "GET /api/v1/intel/revocations" } "."
        }
        section aria-labelledby="in-force" { h2 id="in-force" { "In force" } (list) }
        section aria-labelledby="history" {
            h2 id="history" { "History" }
            form method="get" action="/console/revocations" class="filters" role="search" {
                label for="signer" { "Signer contains" }
                input id="signer" name="signer" value=(signer_raw);
                "\n"
                button type="submit" { "Search" }
            }
            (history)
        }
    };
    page(&state, &ctx, StatusCode::OK, TITLE, body)
}

fn row(c: &RevokedCertJson) -> Markup {
    let vendors = if c.affected_vendors.is_empty() {
        "none recorded".to_string()
    } else {
        c.affected_vendors.join(", ")
    };
    let active = html! {
        @if c.currently_active {
            span class="badge unknown" data-active { "yes" }
        } @else {
            "no"
        }
    };
    html! {
        tr class=[c.currently_active.then_some("active")] {
            (td("Signer", &c.signer))
            (td("Reason", &c.revocation_reason))
            (td("Revoked (UTC)", short_time(&c.revoked_at)))
            (td("Affected vendors", vendors))
            (td("Signs a current file", active))
            (td("Issuer", &c.issuer))
            (td("Serial", html! { span class="hash" { (c.serial) } }))
            (td("Thumbprint (SHA-1)", html! { span class="hash" { (c.thumbprint) } }))
        }
    }
}

/// `2026-11-26T09:00:00Z` as `2026-11-26 09:00`.
fn short_time(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| when(t.with_timezone(&chrono::Utc)))
        .unwrap_or_else(|_| rfc3339.to_string())
}

/// The revocations in force as a file: JSON exactly as the API answers it, or CSV with
/// the same fields (vendors joined by `;`).
pub(super) async fn export(
    State(state): State<AppState>,
    Signed { ctx, .. }: Signed,
    Query(q): Query<Fields>,
) -> Response {
    let day = state.clock.now().format("%Y-%m-%d");
    match q.get("format").map(String::as_str) {
        Some("json") => match service::in_force(&state).await {
            Ok(feed) => match serde_json::to_string_pretty(&feed) {
                Ok(json) => download(
                    "application/json",
                    &format!("knowngood-revocations-{day}.json"),
                    json,
                ),
                Err(e) => refused(&state, &ctx, &Error::internal(e.to_string())),
            },
            Err(e) => refused(&state, &ctx, &e),
        },
        Some("csv") => match in_force(&state).await {
            Ok(certs) => {
                let mut csv = String::from(
                    "thumbprint,signer,issuer,serial,revoked_at,revocation_reason,check_method,currently_active,affected_vendors\r\n",
                );
                for c in &certs {
                    let fields = [
                        c.thumbprint.clone(),
                        c.signer.clone(),
                        c.issuer.clone(),
                        c.serial.clone(),
                        c.revoked_at.clone(),
                        c.revocation_reason.clone(),
                        c.check_method.clone(),
                        c.currently_active.to_string(),
                        c.affected_vendors.join(";"),
                    ];
                    let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
                    csv.push_str(&line.join(","));
                    csv.push_str("\r\n");
                }
                download(
                    "text/csv; charset=utf-8",
                    &format!("knowngood-revocations-{day}.csv"),
                    csv,
                )
            }
            Err(e) => refused(&state, &ctx, &e),
        },
        _ => page(
            &state,
            &ctx,
            StatusCode::BAD_REQUEST,
            TITLE,
            message("error", "The export format is csv or json."),
        ),
    }
}
