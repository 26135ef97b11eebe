//! Coverage: what the service can vouch for. Current records per vendor and distribution
//! release, the reference corpus, each channel's last refresh with its error, what
//! `unknown` means and how an operator widens coverage; and the records export of
//! `/api/v1/intel/export` as CSV or JSON.

use super::gate::{plain, td};
use super::*;
use crate::status::{ErrorDetail, system_status};

const TITLE: &str = "Coverage";

pub(super) async fn page_(
    State(state): State<AppState>,
    Signed { ctx, principal }: Signed,
) -> Response {
    // Staff see each channel's whole (URL-redacted) error, as on /api/v1/admin/health;
    // customers its kind, as on the public status page.
    let staff = principal
        .authorize(Some(Permission::PlatformSettings), Tier::Enterprise)
        .is_ok();
    let detail = if staff {
        ErrorDetail::Full
    } else {
        ErrorDetail::Class
    };
    let status = system_status(&state, detail).await;
    let stats = match state.stats_cache.get(&state).await {
        Ok(s) => s,
        Err(e) => return refused(&state, &ctx, &e),
    };
    let corpus = &status.components.reference_corpus;
    let body = html! {
        dl data-totals {
            dt { "Current vendor records" } dd { (stats.total_records) }
            dt { "Distinct known-good SHA-256" } dd { (stats.known_good_hashes) }
            dt { "Vendors and releases" } dd { (stats.total_vendors) }
            dt { "Platforms" } dd { (stats.total_platforms) }
        }
        section aria-labelledby="channels" {
            h2 id="channels" { "Records and last refresh per channel" }
            p {
                "Distributions are listed per release (" code { "Debian bookworm" } ", "
                code { "Debian trixie" } "): each release keeps its own history."
            }
            @if status.vendors.is_empty() {
                p data-empty {
                    "No vendor channel has run and no record is held yet. The daily refresh ("
                    code { "[schedule] daily_refresh" } ") or " code { "knowngood ingest" }
                    " reads the vendors' official channels; " code { "knowngood admin import-records" }
                    " records files from an offline mirror."
                }
            } @else {
                table class="cards" data-channels {
                    thead { tr {
                        th scope="col" { "Vendor or release" } th scope="col" { "Current records" }
                        th scope="col" { "State" } th scope="col" { "Last refresh (UTC)" }
                        th scope="col" { "Last error" }
                    } }
                    tbody { @for v in &status.vendors { (channel_row(v)) } }
                }
                p class="help" {
                    @if staff {
                        "Errors are shown whole, with URLs redacted (as on /api/v1/admin/health)."
                    } @else {
                        "Errors are shown by kind, as on the public status page; the service's operators see the whole message."
                    }
                }
            }
        }
        section aria-labelledby="corpus" {
            h2 id="corpus" { "Reference corpus (NSRL)" }
            @match &corpus.generation {
                Some(generation) => dl data-corpus {
                    dt { "Distinct SHA-256" } dd { (corpus.entries) }
                    dt { "NSRL release" } dd { (or_none(&corpus.rds_versions.join(", "), "not stated")) }
                    dt { "Sets" } dd { (or_none(&corpus.sources.join(", "), "none")) }
                    dt { "Imported (UTC)" } dd { (short(corpus.imported_at.as_deref())) }
                    dt { "Generation" } dd { code { (generation) } }
                },
                None => p data-empty {
                    "No reference corpus is loaded: a hash that matches no vendor record is "
                    code { "unknown" } ", never " code { "known_file" }
                    ". An operator loads the NIST NSRL RDS with " code { "knowngood nsrl import" }
                    ", or sets " code { "corpus_release_url" }
                    " for the service to fetch new releases itself."
                },
            }
        }
        section aria-labelledby="unknown" {
            h2 id="unknown" { "What " code { "unknown" } " means" }
            p {
                code { "unknown" }
                " says only that no source the service follows has the file: not that it is bad. A file is known when a followed vendor channel published it ("
                code { "known_vendor_release" } ", superseded builds included) or the reference corpus lists it ("
                code { "known_file" } "). Locally built, modified or unfollowed software is "
                code { "unknown" } ", and so is a version older than what the service has recorded for it."
            }
            p {
                "Operators widen coverage in the configuration, per vendor (" code { "[vendors.<id>]" }
                "; " code { "knowngood ingest --list" } " shows each channel and its last result):"
            }
            ul {
                li {
                    code { "items" } ": the packages a distribution or registry follows: "
                    code { "\"@base\"" } " (the base system, the default), " code { "\"*\"" }
                    " (every package), names, or pinned versions (" code { "name=version" } ", "
                    code { "name==version" } " on PyPI, " code { "name@version" } " on npm)."
                }
                li {
                    code { "items_file" }
                    ": a file of package names read at each run, one per line, optionally pinned; the output of "
                    code { "dpkg-query -W -f '${Package}=${Version}\\n'" } " or " code { "rpm -qa" }
                    " works as is, so a fleet's own package lists become coverage."
                }
                li {
                    code { "releases" } ": which distribution releases are followed: "
                    code { "[\"supported\"]" } " (the default) or code names such as "
                    code { "[\"bookworm\", \"trixie\"]" } "."
                }
                li {
                    code { "history" } ": past versions, " code { "N" } " (the N newest a channel lists) or "
                    code { "\"all\"" }
                    ", recorded as superseded from their release dates, so hosts that are not fully up to date still match."
                }
            }
        }
        section aria-labelledby="export" class="card" {
            h2 id="export" { "Export records" }
            p {
                "The records whose validity began within the days chosen (by default the last 30), as "
                code { "GET /api/v1/intel/export" } " gives them: at most 366 days and 100,000 rows."
            }
            form method="get" action="/console/export" class="filters" {
                label for="from" { "First day" } input id="from" name="from" type="date";
                "\n"
                label for="to" { "Last day" } input id="to" name="to" type="date";
                "\n"
                label for="export-executable" { "Executable (optional)" }
                input id="export-executable" name="executable";
                "\n"
                button type="submit" name="format" value="csv" { "Download CSV" }
                " "
                button type="submit" name="format" value="json" { "Download JSON" }
            }
        }
    };
    page(&state, &ctx, StatusCode::OK, TITLE, body)
}

/// One channel's row: its records, state, last refresh and last error.
fn channel_row(v: &crate::api::VendorStatus) -> Markup {
    let badge = match v.status {
        "ok" => "known_vendor_release",
        "failing" => "unknown",
        _ => "superseded",
    };
    let refreshed = v
        .last_success_at
        .as_deref()
        .map_or("never".into(), |t| short(Some(t)));
    let error = html! {
        @match (&v.last_error, &v.last_error_at) {
            (Some(e), Some(at)) => {
                span data-error { (e) } " " span class="help" { "(" (short(Some(at))) ")" }
            }
            (Some(e), None) => span data-error { (e) },
            _ => "none",
        }
    };
    html! {
        tr {
            (td("Vendor or release", &v.vendor))
            (td("Current records", v.records))
            (td("State", html! { span class={ "badge " (badge) } { (v.status) } }))
            (td("Last refresh (UTC)", refreshed))
            (td("Last error", error))
        }
    }
}

fn or_none(text: &str, none: &str) -> String {
    if text.is_empty() {
        none.to_string()
    } else {
        text.to_string()
    }
}

/// An RFC 3339 time as `YYYY-MM-DD HH:MM`.
fn short(rfc3339: Option<&str>) -> String {
    match rfc3339 {
        Some(t) => chrono::DateTime::parse_from_rfc3339(t)
            .map(|t| super::gate::when(t.with_timezone(&chrono::Utc)))
            .unwrap_or_else(|_| t.to_string()),
        None => "unknown".into(),
    }
}

/// The records export, answered by the API's export service (same limits, same rows); a
/// refusal is a page that says why.
pub(super) async fn export(
    State(state): State<AppState>,
    Signed { ctx, .. }: Signed,
    Query(q): Query<Fields>,
) -> Response {
    // Empty form fields mean "not given".
    let given: serde_json::Map<String, serde_json::Value> = q
        .into_iter()
        .filter(|(k, v)| {
            !v.trim().is_empty() && ["format", "from", "to", "executable"].contains(&k.as_str())
        })
        .map(|(k, v)| (k, serde_json::Value::String(v.trim().to_string())))
        .collect();
    let params = match serde_json::from_value(serde_json::Value::Object(given)) {
        Ok(p) => p,
        Err(e) => return refused(&state, &ctx, &Error::internal(e.to_string())),
    };
    match crate::services::export::export(&state, params).await {
        Ok(export) => (
            [
                (header::CONTENT_TYPE, export.content_type.to_string()),
                (
                    header::CONTENT_DISPOSITION,
                    format!("attachment; filename=\"{}\"", export.filename),
                ),
            ],
            export.body,
        )
            .into_response(),
        Err(e) => {
            let (status, _) = crate::error::status_and_code(&e);
            let body = html! {
                (message("error", &plain(&e)))
                p { a href="/console/coverage#export" { "Back to the export form" } }
            };
            page(&state, &ctx, status, "Export", body)
        }
    }
}
