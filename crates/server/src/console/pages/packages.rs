//! Packages: what the package routes do, in the console. A typosquat and
//! dependency-confusion check of pasted names, an SBOM scan with its report, the account's
//! watchlist and the change alerts. Each form calls the same service as the API, so the
//! limits, messages and the per-key SBOM scan cap are the API's.

use store::packages::ChangeQuery;

use super::gate::{plain, td, when};
use super::*;
use crate::services::packages::{self as service, SbomScanSlot};

const TITLE: &str = "Packages";
/// The console posts an SBOM as a form field; larger documents (up to 16 MB) go to the
/// API's `POST /api/v1/intel/sbom`.
const MAX_CONSOLE_SBOM_BYTES: usize = 1 << 20;
/// Components shown on the page; the summary counts them all.
const MAX_SHOWN_COMPONENTS: usize = 500;
const ECOSYSTEMS: [&str; 3] = ["npm", "pypi", "go"];

pub(super) async fn page_(
    State(state): State<AppState>,
    Signed { ctx, principal }: Signed,
    Query(q): Query<Fields>,
) -> Response {
    let watched_only = q.get("watched").is_some_and(|v| v == "true");
    render(
        &state,
        &ctx,
        &principal,
        StatusCode::OK,
        Sections {
            watched_only,
            ..Sections::default()
        },
    )
    .await
}

/// What a form post puts on the page: its answer, and the form's fields to show again.
#[derive(Default)]
struct Sections {
    typosquat: String,
    names: String,
    internal: String,
    ecosystem: String,
    sbom: String,
    sbom_text: String,
    watch_note: String,
    watched_only: bool,
}

fn ecosystem_options(selected: &str) -> String {
    ECOSYSTEMS
        .iter()
        .map(|e| {
            format!(
                r#"<option value="{e}"{}>{e}</option>"#,
                if *e == selected { " selected" } else { "" }
            )
        })
        .collect()
}

async fn render(
    state: &AppState,
    ctx: &Ctx,
    principal: &Principal,
    status: StatusCode,
    s: Sections,
) -> Response {
    let csrf = csrf_field(ctx);
    let eco = if s.ecosystem.is_empty() {
        "npm"
    } else {
        s.ecosystem.as_str()
    };
    let watches = match service::watches(state, &principal.team_id).await {
        Ok(w) => w,
        Err(e) => return refused(state, ctx, &e),
    };
    let watch_rows: String = watches
        .results
        .iter()
        .map(|w| {
            format!(
                r#"<tr>{}{}{}{}{}</tr>"#,
                td("Ecosystem", &esc(&w.ecosystem)),
                td("Package", &esc(&w.package_name)),
                td("Tracking", &esc(w.tracking)),
                td("Since", &esc(w.created_at.get(..10).unwrap_or(&w.created_at))),
                td(
                    "",
                    &format!(
                        r#"<form method="post" action="/console/packages/watch/{id}/delete" class="inline">{csrf}<button type="submit" aria-label="Stop watching {name}">Stop watching</button></form>"#,
                        id = esc(&w.id),
                        name = esc(&w.package_name),
                    )
                ),
            )
        })
        .collect();
    let watch_list = if watches.results.is_empty() {
        "<p data-empty>No package is watched yet. Watch the packages your teams depend on: an untracked one is tracked from the next refresh, and a published version whose file changes raises an alert below.</p>".to_string()
    } else {
        format!(
            r#"<table class="cards" data-watchlist><thead><tr><th scope="col">Ecosystem</th><th scope="col">Package</th><th scope="col">Tracking</th><th scope="col">Since</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead><tbody>{watch_rows}</tbody></table>
<p class="help"><code>tracked</code>: the service holds its versions; <code>pending</code>: tracked from the next refresh; <code>not_found</code>: the registry knows no such package.</p>"#
        )
    };
    let query = ChangeQuery {
        team_id: principal.team_id.clone(),
        watched_only: s.watched_only,
        ecosystem: None,
        limit: 50,
        offset: 0,
    };
    let alerts = match state.store.change_alerts(&query).await {
        Ok(a) => a,
        Err(e) => return refused(state, ctx, &e),
    };
    let alert_list = if alerts.items.is_empty() {
        if s.watched_only {
            "<p data-empty>No change alert for a watched package. An alert is raised when a version already published is served with different bytes: a registry compromise or a republish.</p>".to_string()
        } else {
            "<p data-empty>No change alert. An alert is raised when a version already published is served with different bytes: a registry compromise or a republish.</p>".to_string()
        }
    } else {
        let rows: String = alerts
            .items
            .iter()
            .map(|a| {
                format!(
                    "<tr>{}{}{}{}{}{}</tr>",
                    td("Observed (UTC)", &when(a.observed_at)),
                    td("Ecosystem", &esc(&a.ecosystem)),
                    td("Package", &esc(&a.package_name)),
                    td("Version", &esc(&a.version)),
                    td(
                        "Previous SHA-256",
                        &format!(r#"<span class="hash">{}</span>"#, esc(&a.previous_sha256))
                    ),
                    td(
                        "Now served SHA-256",
                        &format!(r#"<span class="hash">{}</span>"#, esc(&a.latest_sha256))
                    ),
                )
            })
            .collect();
        format!(
            r#"<p>{shown} of {total}, newest first.</p><table class="cards" data-alerts><thead><tr><th scope="col">Observed (UTC)</th><th scope="col">Ecosystem</th><th scope="col">Package</th><th scope="col">Version</th><th scope="col">Previous SHA-256</th><th scope="col">Now served SHA-256</th></tr></thead><tbody>{rows}</tbody></table>"#,
            shown = alerts.items.len(),
            total = alerts.total,
        )
    };
    let toggle = if s.watched_only {
        r#"<a href="/console/packages#changes">Show alerts for every package</a>"#
    } else {
        r#"<a href="/console/packages?watched=true#changes">Show only watched packages</a>"#
    };
    let body = format!(
        r#"<section aria-labelledby="typosquat" class="card"><h2 id="typosquat">Check package names</h2>
<p>Typosquats of popular or tracked packages, and your private names that also exist publicly (dependency confusion). Nothing is fetched: names are compared with the service's lists.</p>
<form method="post" action="/console/packages/typosquat" data-typosquat-form>{csrf}
<label for="ecosystem">Ecosystem</label><select id="ecosystem" name="ecosystem">{options}</select>
<label for="names">Package names (one per line, up to 200)</label>
<textarea id="names" name="names" rows="5" spellcheck="false" required>{names}</textarea>
<label for="internal">Your private package names (optional, one per line)</label>
<textarea id="internal" name="internal" rows="2" spellcheck="false">{internal}</textarea>
<button type="submit">Check names</button></form>{typosquat}</section>
<section aria-labelledby="sbom" class="card"><h2 id="sbom">Scan an SBOM</h2>
<p>CycloneDX (JSON or XML) or SPDX (JSON, tag-value, 3.0 JSON-LD): each component's hash is looked up, its name checked, and imported advisories listed. The document is read in memory and kept nowhere. Up to 1 MB here; <code>POST /api/v1/intel/sbom</code> takes up to 16 MB.</p>
<form method="post" action="/console/packages/sbom">{csrf}
<label for="sbom-file">SBOM file</label><input id="sbom-file" type="file" accept=".json,.xml,.spdx,.txt,.cdx" data-sbom-file>
<p class="msg" role="status" data-sbom-status></p>
<label for="sbom-text">or its text</label>
<textarea id="sbom-text" name="sbom" rows="5" spellcheck="false" data-sbom-text>{sbom_text}</textarea>
<button type="submit">Scan</button></form>{sbom}</section>
<section aria-labelledby="watch"><h2 id="watch">Watchlist</h2>{watch_note}{watch_list}
<form method="post" action="/console/packages/watch" class="filters">{csrf}
<label for="watch-ecosystem">Ecosystem</label><select id="watch-ecosystem" name="ecosystem">{watch_options}</select>
<label for="watch-name">Package</label><input id="watch-name" name="package_name" required spellcheck="false">
<button type="submit">Watch</button></form></section>
<section aria-labelledby="changes"><h2 id="changes">Change alerts</h2><p>{toggle}</p>{alert_list}</section>"#,
        options = ecosystem_options(eco),
        watch_options = ecosystem_options("npm"),
        names = esc(&s.names),
        internal = esc(&s.internal),
        typosquat = s.typosquat,
        sbom = s.sbom,
        sbom_text = esc(&s.sbom_text),
        watch_note = s.watch_note,
    );
    page(state, ctx, status, TITLE, &body)
}

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

pub(super) async fn typosquat(
    State(state): State<AppState>,
    Signed { ctx, principal }: Signed,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    if let Err(r) = check_csrf(&headers, form.get("csrf").map(String::as_str)) {
        return r;
    }
    let get = |k: &str| form.get(k).cloned().unwrap_or_default();
    let ecosystem = get("ecosystem");
    let request = service::TyposquatRequest {
        packages: lines(&get("names"))
            .into_iter()
            .map(|name| service::PackageRef {
                ecosystem: ecosystem.clone(),
                name,
            })
            .collect(),
        internal_names: lines(&get("internal")),
    };
    let (status, answer) = match service::typosquat(&state, &request).await {
        Ok(answer) => (StatusCode::OK, typosquat_table(&answer)),
        Err(e) => {
            let (status, _) = crate::error::status_and_code(&e);
            (status, message("error", &at_line(&plain(&e))))
        }
    };
    let sections = Sections {
        typosquat: answer,
        names: get("names"),
        internal: get("internal"),
        ecosystem,
        ..Sections::default()
    };
    render(&state, &ctx, &principal, status, sections).await
}

/// The API names a refused entry `packages[i]`; the form has lines.
fn at_line(text: &str) -> String {
    let Some(rest) = text.strip_prefix("packages[") else {
        return text.to_string();
    };
    match rest.split_once("].name: ") {
        Some((i, why)) if i.parse::<usize>().is_ok() => {
            format!("Line {}: {why}", i.parse::<usize>().unwrap_or(0) + 1)
        }
        _ => text.to_string(),
    }
}

fn risk_badge(risk: &str) -> String {
    let class = match risk {
        "typosquat" | "dependency_confusion" => "unknown",
        "known" => "known_vendor_release",
        _ => "",
    };
    format!(
        r#"<span class="badge {class}" data-risk>{}</span>"#,
        esc(risk)
    )
}

fn typosquat_table(answer: &service::TyposquatResponse) -> String {
    let summary: Vec<String> = answer
        .summary
        .iter()
        .map(|(risk, n)| format!("{n} {risk}"))
        .collect();
    let rows: String = answer
        .results
        .iter()
        .map(|r| {
            format!(
                "<tr>{}{}{}{}{}</tr>",
                td("Name", &esc(&r.name)),
                td("Risk", &risk_badge(r.risk)),
                td(
                    "Nearest known",
                    &esc(r.nearest_known.as_deref().unwrap_or("–"))
                ),
                td(
                    "Distance",
                    &r.distance.map_or("–".into(), |d| d.to_string())
                ),
                td("Why", &esc(&r.reason)),
            )
        })
        .collect();
    format!(
        r#"<h3>Result</h3><p data-summary>{}.</p><table class="cards" data-typosquat-results><thead><tr><th scope="col">Name</th><th scope="col">Risk</th><th scope="col">Nearest known</th><th scope="col">Distance</th><th scope="col">Why</th></tr></thead><tbody>{rows}</tbody></table>"#,
        esc(&summary.join(", "))
    )
}

pub(super) async fn sbom(
    State(state): State<AppState>,
    Signed { ctx, principal }: Signed,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    if let Err(r) = check_csrf(&headers, form.get("csrf").map(String::as_str)) {
        return r;
    }
    let text = form.get("sbom").cloned().unwrap_or_default();
    let (status, report) = if text.trim().is_empty() {
        (
            StatusCode::BAD_REQUEST,
            message("error", "Choose an SBOM file or paste its text."),
        )
    } else if text.len() > MAX_CONSOLE_SBOM_BYTES {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            message(
                "error",
                &format!(
                    "This SBOM is {} bytes; the console takes up to 1 MB. Send larger ones (up to 16 MB) to POST /api/v1/intel/sbom.",
                    text.len()
                ),
            ),
        )
    } else {
        match scan(&state, &principal, text.clone()).await {
            Ok(report) => (StatusCode::OK, sbom_report(&report)),
            Err(e) => {
                let (status, _) = crate::error::status_and_code(&e);
                (status, message("error", &plain(&e)))
            }
        }
    };
    // The document is shown again only when it was refused, for correcting it.
    let sbom_text = if status == StatusCode::OK {
        String::new()
    } else {
        text
    };
    let sections = Sections {
        sbom: report,
        sbom_text,
        ..Sections::default()
    };
    render(&state, &ctx, &principal, status, sections).await
}

/// The API's scan of `text` under the caller's scan slots, its streamed report read whole
/// (the console's cap keeps it small).
async fn scan(
    state: &AppState,
    principal: &Principal,
    text: String,
) -> Result<serde_json::Value, Error> {
    let Some(slot) = SbomScanSlot::take(state, &principal.key_id) else {
        return Err(Error::RateLimited {
            retry_after_secs: 1,
        });
    };
    let report = service::sbom(state, slot, text.into()).await?;
    let bytes = axum::body::to_bytes(report, 64 << 20)
        .await
        .map_err(|e| Error::internal(format!("reading an SBOM report: {e}")))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| Error::internal(format!("an SBOM report did not parse: {e}")))
}

fn sbom_report(report: &serde_json::Value) -> String {
    let s = &report["summary"];
    let n = |k: &str| s[k].as_u64().unwrap_or(0);
    let str_of = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let components = report["components"].as_array().cloned().unwrap_or_default();
    let rows: String = components
        .iter()
        .take(MAX_SHOWN_COMPONENTS)
        .map(|c| {
            let hash = &c["hash"];
            let class = str_of(&hash["classification"]);
            let matched = match (hash["executable_name"].as_str(), hash["version"].as_str()) {
                (Some(name), Some(version)) => format!(" {} {}", esc(name), esc(version)),
                _ => String::new(),
            };
            let advisories: Vec<String> = c["advisories"]
                .as_array()
                .map(|list| list.iter().map(|a| esc(&str_of(&a["id"]))).collect())
                .unwrap_or_default();
            let risk = &c["name_risk"];
            let nearest = risk["nearest_known"]
                .as_str()
                .map(|k| format!(" (like {})", esc(k)))
                .unwrap_or_default();
            format!(
                "<tr>{}{}{}{}{}{}</tr>",
                td("Component", &esc(&str_of(&c["name"]))),
                td("Version", &esc(&str_of(&c["version"]))),
                td("Ecosystem", &esc(&str_of(&c["ecosystem"]))),
                td(
                    "Hash",
                    &format!(
                        r#"<span class="badge {c}" data-classification>{c}</span>{matched}"#,
                        c = esc(&class)
                    )
                ),
                td(
                    "Name",
                    &format!(
                        "{}{nearest}",
                        risk_badge(risk["risk"].as_str().unwrap_or(""))
                    )
                ),
                td(
                    "Advisories",
                    &if advisories.is_empty() {
                        "none".to_string()
                    } else {
                        advisories.join(", ")
                    }
                ),
            )
        })
        .collect();
    let more = if components.len() > MAX_SHOWN_COMPONENTS {
        format!(
            "<p>The first {MAX_SHOWN_COMPONENTS} of {} components are shown.</p>",
            components.len()
        )
    } else {
        String::new()
    };
    format!(
        r#"<h3>Report</h3><p>{format} {spec} ({encoding}).</p>
<dl data-sbom-summary><dt>Components</dt><dd>{components}</dd><dt>Hash known</dt><dd>{known}</dd><dt>Hash unknown</dt><dd>{unknown}</dd><dt>No hash listed</dt><dd>{no_hash}</dd><dt>Typosquats</dt><dd>{typosquat}</dd><dt>Dependency confusion</dt><dd>{confusion}</dd><dt>With advisories</dt><dd>{advisories}</dd></dl>
{more}<table class="cards" data-sbom-components><thead><tr><th scope="col">Component</th><th scope="col">Version</th><th scope="col">Ecosystem</th><th scope="col">Hash</th><th scope="col">Name</th><th scope="col">Advisories</th></tr></thead><tbody>{rows}</tbody></table>"#,
        format = esc(&str_of(&report["format"])),
        spec = esc(&str_of(&report["spec_version"])),
        encoding = esc(&str_of(&report["encoding"])),
        components = n("components"),
        known = n("hash_known"),
        unknown = n("hash_unknown"),
        no_hash = n("no_hash"),
        typosquat = n("typosquat"),
        confusion = n("dependency_confusion"),
        advisories = n("with_advisories"),
    )
}

pub(super) async fn add_watch(
    State(state): State<AppState>,
    Signed { ctx, principal }: Signed,
    headers: HeaderMap,
    Form(form): Form<Fields>,
) -> Response {
    if let Err(r) = check_csrf(&headers, form.get("csrf").map(String::as_str)) {
        return r;
    }
    let get = |k: &str| form.get(k).cloned().unwrap_or_default();
    let request = service::WatchRequest {
        ecosystem: get("ecosystem"),
        package_name: get("package_name"),
    };
    let answer = service::add_watch(&state, &principal.team_id, &request).await;
    let (status, note) = match answer {
        Ok((w, true)) => (
            StatusCode::CREATED,
            message(
                "status",
                &format!("Now watching {} ({}).", w.package_name, w.ecosystem),
            ),
        ),
        Ok((w, false)) => (
            StatusCode::OK,
            message(
                "status",
                &format!("{} ({}) was already watched.", w.package_name, w.ecosystem),
            ),
        ),
        Err(e) => {
            let (status, _) = crate::error::status_and_code(&e);
            (status, message("error", &plain(&e)))
        }
    };
    let sections = Sections {
        watch_note: note,
        ..Sections::default()
    };
    render(&state, &ctx, &principal, status, sections).await
}

pub(super) async fn remove_watch(
    State(state): State<AppState>,
    Signed { ctx, principal }: Signed,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<Fields>,
) -> Response {
    if let Err(r) = check_csrf(&headers, form.get("csrf").map(String::as_str)) {
        return r;
    }
    match service::remove_watch(&state, &principal.team_id, &id).await {
        Ok(()) => see_other("/console/packages#watch"),
        Err(e) => {
            let (status, _) = crate::error::status_and_code(&e);
            let sections = Sections {
                watch_note: message("error", &plain(&e)),
                ..Sections::default()
            };
            render(&state, &ctx, &principal, status, sections).await
        }
    }
}
