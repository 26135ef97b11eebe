//! Packages: what the package routes do, in the console. A typosquat and
//! dependency-confusion check of pasted names, an SBOM scan with its report, the account's
//! watchlist and the change alerts. Each form calls the same service as the API, so the
//! limits, messages and the per-key SBOM scan cap are the API's.

use store::Page;
use store::downloads::ChangeAlert;
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
    typosquat: Option<Markup>,
    names: String,
    internal: String,
    ecosystem: String,
    sbom: Option<Markup>,
    sbom_text: String,
    watch_note: Option<Markup>,
    watched_only: bool,
}

fn ecosystem_options(selected: &str) -> Markup {
    html! {
        @for e in ECOSYSTEMS {
            option value=(e) selected[e == selected] { (e) }
        }
    }
}

async fn render(
    state: &AppState,
    ctx: &Ctx,
    principal: &Principal,
    status: StatusCode,
    s: Sections,
) -> Response {
    let eco = if s.ecosystem.is_empty() {
        "npm"
    } else {
        s.ecosystem.as_str()
    };
    let watches = match service::watches(state, &principal.team_id).await {
        Ok(w) => w,
        Err(e) => return refused(state, ctx, &e),
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
    let body = html! {
        (typosquat_section(ctx, &s, eco))
        (sbom_section(ctx, &s))
        (watchlist_section(ctx, &s, &watches))
        (changes_section(&s, &alerts))
    };
    page(state, ctx, status, TITLE, body)
}

/// The typosquat and dependency-confusion check: its form, then the answer to the last post.
fn typosquat_section(ctx: &Ctx, s: &Sections, eco: &str) -> Markup {
    html! {
        section aria-labelledby="typosquat" class="card" {
            h2 id="typosquat" { "Check package names" }
            p {
                "Typosquats of popular or tracked packages, and your private names that also exist publicly (dependency confusion). Nothing is fetched: names are compared with the service's lists."
            }
            form method="post" action="/console/packages/typosquat" data-typosquat-form {
                (csrf_field(ctx))
                label for="ecosystem" { "Ecosystem" }
                select id="ecosystem" name="ecosystem" { (ecosystem_options(eco)) }
                "\n"
                label for="names" { "Package names (one per line, up to 200)" }
                textarea id="names" name="names" rows="5" spellcheck="false" required { (s.names) }
                "\n"
                label for="internal" { "Your private package names (optional, one per line)" }
                textarea id="internal" name="internal" rows="2" spellcheck="false" { (s.internal) }
                "\n"
                button type="submit" { "Check names" }
            }
            @if let Some(answer) = &s.typosquat { (answer) }
        }
    }
}

/// The SBOM scan: its form, then the report of the last post.
fn sbom_section(ctx: &Ctx, s: &Sections) -> Markup {
    html! {
        section aria-labelledby="sbom" class="card" {
            h2 id="sbom" { "Scan an SBOM" }
            p {
                "CycloneDX (JSON or XML) or SPDX (JSON, tag-value, 3.0 JSON-LD): each component's hash is looked up, its name checked, and imported advisories listed. The document is read in memory and kept nowhere. Up to 1 MB here; "
                code { "POST /api/v1/intel/sbom" } " takes up to 16 MB."
            }
            form method="post" action="/console/packages/sbom" {
                (csrf_field(ctx))
                label for="sbom-file" { "SBOM file" }
                input id="sbom-file" type="file" accept=".json,.xml,.spdx,.txt,.cdx" data-sbom-file;
                p class="msg" role="status" data-sbom-status {}
                label for="sbom-text" { "or its text" }
                textarea id="sbom-text" name="sbom" rows="5" spellcheck="false" data-sbom-text { (s.sbom_text) }
                "\n"
                button type="submit" { "Scan" }
            }
            @if let Some(report) = &s.sbom { (report) }
        }
    }
}

/// The account's watchlist and the form that adds to it.
fn watchlist_section(ctx: &Ctx, s: &Sections, watches: &service::WatchList) -> Markup {
    html! {
        section aria-labelledby="watch" {
            h2 id="watch" { "Watchlist" }
            @if let Some(note) = &s.watch_note { (note) }
            @if watches.results.is_empty() {
                p data-empty {
                    "No package is watched yet. Watch the packages your teams depend on: an untracked one is tracked from the next refresh, and a published version whose file changes raises an alert below."
                }
            } @else {
                table class="cards" data-watchlist {
                    thead { tr {
                        th scope="col" { "Ecosystem" } th scope="col" { "Package" }
                        th scope="col" { "Tracking" } th scope="col" { "Since" }
                        th scope="col" { span class="sr-only" { "Actions" } }
                    } }
                    tbody {
                        @for w in &watches.results {
                            tr {
                                (td("Ecosystem", &w.ecosystem))
                                (td("Package", &w.package_name))
                                (td("Tracking", w.tracking))
                                (td("Since", w.created_at.get(..10).unwrap_or(&w.created_at)))
                                (td("", html! {
                                    form method="post" action={ "/console/packages/watch/" (w.id) "/delete" } class="inline" {
                                        (csrf_field(ctx))
                                        button type="submit" aria-label={ "Stop watching " (w.package_name) } { "Stop watching" }
                                    }
                                }))
                            }
                        }
                    }
                }
                p class="help" {
                    code { "tracked" } ": the service holds its versions; " code { "pending" }
                    ": tracked from the next refresh; " code { "not_found" }
                    ": the registry knows no such package."
                }
            }
            form method="post" action="/console/packages/watch" class="filters" {
                (csrf_field(ctx))
                label for="watch-ecosystem" { "Ecosystem" }
                select id="watch-ecosystem" name="ecosystem" { (ecosystem_options("npm")) }
                "\n"
                label for="watch-name" { "Package" }
                input id="watch-name" name="package_name" required spellcheck="false";
                "\n"
                button type="submit" { "Watch" }
            }
        }
    }
}

/// The change alerts, all of them or only the watched packages'.
fn changes_section(s: &Sections, alerts: &Page<ChangeAlert>) -> Markup {
    html! {
        section aria-labelledby="changes" {
            h2 id="changes" { "Change alerts" }
            p {
                @if s.watched_only {
                    a href="/console/packages#changes" { "Show alerts for every package" }
                } @else {
                    a href="/console/packages?watched=true#changes" { "Show only watched packages" }
                }
            }
            @if alerts.items.is_empty() {
                p data-empty {
                    @if s.watched_only { "No change alert for a watched package." } @else { "No change alert." }
                    " An alert is raised when a version already published is served with different bytes: a registry compromise or a republish."
                }
            } @else {
                p { (alerts.items.len()) " of " (alerts.total) ", newest first." }
                table class="cards" data-alerts {
                    thead { tr {
                        th scope="col" { "Observed (UTC)" } th scope="col" { "Ecosystem" }
                        th scope="col" { "Package" } th scope="col" { "Version" }
                        th scope="col" { "Previous SHA-256" } th scope="col" { "Now served SHA-256" }
                    } }
                    tbody {
                        @for a in &alerts.items {
                            tr {
                                (td("Observed (UTC)", when(a.observed_at)))
                                (td("Ecosystem", &a.ecosystem))
                                (td("Package", &a.package_name))
                                (td("Version", &a.version))
                                (td("Previous SHA-256", html! { span class="hash" { (a.previous_sha256) } }))
                                (td("Now served SHA-256", html! { span class="hash" { (a.latest_sha256) } }))
                            }
                        }
                    }
                }
            }
        }
    }
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
        typosquat: Some(answer),
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

fn risk_badge(risk: &str) -> Markup {
    let class = match risk {
        "typosquat" | "dependency_confusion" => "unknown",
        "known" => "known_vendor_release",
        _ => "",
    };
    html! { span class={ "badge " (class) } data-risk { (risk) } }
}

fn typosquat_table(answer: &service::TyposquatResponse) -> Markup {
    let summary: Vec<String> = answer
        .summary
        .iter()
        .map(|(risk, n)| format!("{n} {risk}"))
        .collect();
    html! {
        h3 { "Result" }
        p data-summary { (summary.join(", ")) "." }
        table class="cards" data-typosquat-results {
            thead { tr {
                th scope="col" { "Name" } th scope="col" { "Risk" } th scope="col" { "Nearest known" }
                th scope="col" { "Distance" } th scope="col" { "Why" }
            } }
            tbody {
                @for r in &answer.results {
                    tr {
                        (td("Name", &r.name))
                        (td("Risk", risk_badge(r.risk)))
                        (td("Nearest known", r.nearest_known.as_deref().unwrap_or("–")))
                        (td("Distance", r.distance.map_or("–".into(), |d| d.to_string())))
                        (td("Why", &r.reason))
                    }
                }
            }
        }
    }
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
        sbom: Some(report),
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
        .map_err(|e| Error::internal_caused("reading an SBOM report", e))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| Error::internal_caused("an SBOM report did not parse", e))
}

fn sbom_report(report: &serde_json::Value) -> Markup {
    let s = &report["summary"];
    let n = |k: &str| s[k].as_u64().unwrap_or(0);
    let str_of = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let components = report["components"].as_array().cloned().unwrap_or_default();
    html! {
        h3 { "Report" }
        p {
            (str_of(&report["format"])) " " (str_of(&report["spec_version"])) " ("
            (str_of(&report["encoding"])) ")."
        }
        dl data-sbom-summary {
            dt { "Components" } dd { (n("components")) }
            dt { "Hash known" } dd { (n("hash_known")) }
            dt { "Hash unknown" } dd { (n("hash_unknown")) }
            dt { "No hash listed" } dd { (n("no_hash")) }
            dt { "Typosquats" } dd { (n("typosquat")) }
            dt { "Dependency confusion" } dd { (n("dependency_confusion")) }
            dt { "With advisories" } dd { (n("with_advisories")) }
        }
        @if components.len() > MAX_SHOWN_COMPONENTS {
            p { "The first " (MAX_SHOWN_COMPONENTS) " of " (components.len()) " components are shown." }
        }
        table class="cards" data-sbom-components {
            thead { tr {
                th scope="col" { "Component" } th scope="col" { "Version" } th scope="col" { "Ecosystem" }
                th scope="col" { "Hash" } th scope="col" { "Name" } th scope="col" { "Advisories" }
            } }
            tbody {
                @for c in components.iter().take(MAX_SHOWN_COMPONENTS) {
                    (component_row(c))
                }
            }
        }
    }
}

/// One SBOM component: its hash verdict, name risk and advisories.
fn component_row(c: &serde_json::Value) -> Markup {
    let str_of = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let hash = &c["hash"];
    let class = str_of(&hash["classification"]);
    let matched = match (hash["executable_name"].as_str(), hash["version"].as_str()) {
        (Some(name), Some(version)) => format!(" {name} {version}"),
        _ => String::new(),
    };
    let advisories: Vec<String> = c["advisories"]
        .as_array()
        .map(|list| list.iter().map(|a| str_of(&a["id"])).collect())
        .unwrap_or_default();
    let risk = &c["name_risk"];
    let nearest = risk["nearest_known"]
        .as_str()
        .map(|k| format!(" (like {k})"))
        .unwrap_or_default();
    html! {
        tr {
            (td("Component", str_of(&c["name"])))
            (td("Version", str_of(&c["version"])))
            (td("Ecosystem", str_of(&c["ecosystem"])))
            (td("Hash", html! {
                span class={ "badge " (class) } data-classification { (class) } (matched)
            }))
            (td("Name", html! { (risk_badge(risk["risk"].as_str().unwrap_or(""))) (nearest) }))
            (td("Advisories", if advisories.is_empty() {
                "none".to_string()
            } else {
                advisories.join(", ")
            }))
        }
    }
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
        watch_note: Some(note),
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
                watch_note: Some(message("error", &plain(&e))),
                ..Sections::default()
            };
            render(&state, &ctx, &principal, status, sections).await
        }
    }
}
