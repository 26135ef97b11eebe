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
    let corpus_html = match &corpus.generation {
        Some(generation) => format!(
            r#"<dl data-corpus><dt>Distinct SHA-256</dt><dd>{entries}</dd><dt>NSRL release</dt><dd>{versions}</dd><dt>Sets</dt><dd>{sources}</dd><dt>Imported (UTC)</dt><dd>{imported}</dd><dt>Generation</dt><dd><code>{generation}</code></dd></dl>"#,
            entries = corpus.entries,
            versions = esc(&or_none(&corpus.rds_versions.join(", "), "not stated")),
            sources = esc(&or_none(&corpus.sources.join(", "), "none")),
            imported = esc(&short(corpus.imported_at.as_deref())),
            generation = esc(generation),
        ),
        None => r#"<p data-empty>No reference corpus is loaded: a hash that matches no vendor record is <code>unknown</code>, never <code>known_file</code>. An operator loads the NIST NSRL RDS with <code>knowngood nsrl import</code>, or sets <code>corpus_release_url</code> for the service to fetch new releases itself.</p>"#.to_string(),
    };
    let channels = if status.vendors.is_empty() {
        r#"<p data-empty>No vendor channel has run and no record is held yet. The daily refresh (<code>[schedule] daily_refresh</code>) or <code>knowngood ingest</code> reads the vendors' official channels; <code>knowngood admin import-records</code> records files from an offline mirror.</p>"#.to_string()
    } else {
        let rows: String = status
            .vendors
            .iter()
            .map(|v| {
                let badge = match v.status {
                    "ok" => "known_vendor_release",
                    "failing" => "unknown",
                    _ => "superseded",
                };
                let error = match (&v.last_error, &v.last_error_at) {
                    (Some(e), Some(at)) => format!(
                        r#"<span data-error>{}</span> <span class="help">({})</span>"#,
                        esc(e),
                        esc(&short(Some(at)))
                    ),
                    (Some(e), None) => format!("<span data-error>{}</span>", esc(e)),
                    _ => "none".into(),
                };
                format!(
                    "<tr>{}{}{}{}{}</tr>",
                    td("Vendor or release", &esc(&v.vendor)),
                    td("Current records", &v.records.to_string()),
                    td(
                        "State",
                        &format!(r#"<span class="badge {badge}">{}</span>"#, v.status)
                    ),
                    td(
                        "Last refresh (UTC)",
                        &esc(&v
                            .last_success_at
                            .as_deref()
                            .map_or("never".into(), |t| short(Some(t))))
                    ),
                    td("Last error", &error),
                )
            })
            .collect();
        format!(
            r#"<table class="cards" data-channels><thead><tr><th scope="col">Vendor or release</th><th scope="col">Current records</th><th scope="col">State</th><th scope="col">Last refresh (UTC)</th><th scope="col">Last error</th></tr></thead><tbody>{rows}</tbody></table>
<p class="help">{errors}</p>"#,
            errors = if staff {
                "Errors are shown whole, with URLs redacted (as on /api/v1/admin/health)."
            } else {
                "Errors are shown by kind, as on the public status page; the service's operators see the whole message."
            }
        )
    };
    let body = format!(
        r#"<dl data-totals><dt>Current vendor records</dt><dd>{records}</dd><dt>Distinct known-good SHA-256</dt><dd>{hashes}</dd><dt>Vendors and releases</dt><dd>{vendors}</dd><dt>Platforms</dt><dd>{platforms}</dd></dl>
<section aria-labelledby="channels"><h2 id="channels">Records and last refresh per channel</h2>
<p>Distributions are listed per release (<code>Debian bookworm</code>, <code>Debian trixie</code>): each release keeps its own history.</p>
{channels}</section>
<section aria-labelledby="corpus"><h2 id="corpus">Reference corpus (NSRL)</h2>{corpus_html}</section>
<section aria-labelledby="unknown"><h2 id="unknown">What <code>unknown</code> means</h2>
<p><code>unknown</code> says only that no source the service follows has the file: not that it is bad. A file is known when a followed vendor channel published it (<code>known_vendor_release</code>, superseded builds included) or the reference corpus lists it (<code>known_file</code>). Locally built, modified or unfollowed software is <code>unknown</code>, and so is a version older than what the service has recorded for it.</p>
<p>Operators widen coverage in the configuration, per vendor (<code>[vendors.&lt;id&gt;]</code>; <code>knowngood ingest --list</code> shows each channel and its last result):</p>
<ul>
<li><code>items</code>: the packages a distribution or registry follows: <code>"@base"</code> (the base system, the default), <code>"*"</code> (every package), names, or pinned versions (<code>name=version</code>, <code>name==version</code> on PyPI, <code>name@version</code> on npm).</li>
<li><code>items_file</code>: a file of package names read at each run, one per line, optionally pinned; the output of <code>dpkg-query -W -f '${{Package}}=${{Version}}\n'</code> or <code>rpm -qa</code> works as is, so a fleet's own package lists become coverage.</li>
<li><code>releases</code>: which distribution releases are followed: <code>["supported"]</code> (the default) or code names such as <code>["bookworm", "trixie"]</code>.</li>
<li><code>history</code>: past versions, <code>N</code> (the N newest a channel lists) or <code>"all"</code>, recorded as superseded from their release dates, so hosts that are not fully up to date still match.</li>
</ul></section>
<section aria-labelledby="export" class="card"><h2 id="export">Export records</h2>
<p>The records whose validity began within the days chosen (by default the last 30), as <code>GET /api/v1/intel/export</code> gives them: at most 366 days and 100,000 rows.</p>
<form method="get" action="/console/export" class="filters">
<label for="from">First day</label><input id="from" name="from" type="date">
<label for="to">Last day</label><input id="to" name="to" type="date">
<label for="export-executable">Executable (optional)</label><input id="export-executable" name="executable">
<button type="submit" name="format" value="csv">Download CSV</button> <button type="submit" name="format" value="json">Download JSON</button>
</form></section>"#,
        records = stats.total_records,
        hashes = stats.known_good_hashes,
        vendors = stats.total_vendors,
        platforms = stats.total_platforms,
    );
    page(&state, &ctx, StatusCode::OK, TITLE, &body)
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
            let body = format!(
                r#"{}<p><a href="/console/coverage#export">Back to the export form</a></p>"#,
                message("error", &plain(&e))
            );
            page(&state, &ctx, status, "Export", &body)
        }
    }
}
