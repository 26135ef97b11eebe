//! The Lookup page's answer: pasted hashes read line by line (a bad one is marked at its
//! line while the others are answered) and files hashed in the browser, one row per file
//! with its three digests, the verdict of each and, for a vendor build, where it came from.

use std::collections::{BTreeSet, HashMap};

use serde::Deserialize;

use super::gate::td;
use super::*;

/// At most this many hashes are looked up at once, as on the API.
const MAX_HASHES: usize = 100;
/// Each dropped file is three digests.
pub(super) const MAX_FILES: usize = MAX_HASHES / 3;
/// A refused line or a file name is shown up to this many characters.
const SHOWN_CHARS: usize = 80;

/// A file hashed in the browser, as the page's script posts it (`files`, a JSON array).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DroppedFile {
    name: String,
    sha256: String,
    sha1: String,
    md5: String,
}

/// A pasted value that is not a hash, with its line (from 1).
struct Refusal {
    line: usize,
    text: String,
    why: String,
}

fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// The pasted values (split at whitespace and commas), each checked on its own.
fn pasted(raw: &str) -> (Vec<HashValue>, Vec<Refusal>) {
    let mut good = Vec::new();
    let mut refused = Vec::new();
    for (i, line) in raw.lines().enumerate() {
        for token in line
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|s| !s.is_empty())
        {
            match HashValue::parse(token) {
                Ok(h) => good.push(h),
                Err(e) => refused.push(Refusal {
                    line: i + 1,
                    text: shown(token),
                    why: match e {
                        Error::BadRequest(m) => m,
                        other => other.to_string(),
                    },
                }),
            }
        }
    }
    (good, refused)
}

/// The dropped files' digests, each of the kind its field names.
fn dropped(raw: &str) -> Result<Vec<(String, [HashValue; 3])>, String> {
    if raw.trim().is_empty() {
        return Ok(Vec::new());
    }
    let files: Vec<DroppedFile> = serde_json::from_str(raw)
        .map_err(|_| "The dropped files' digests could not be read: drop the files again.")?;
    if files.len() > MAX_FILES {
        return Err(format!(
            "{} files were dropped; at most {MAX_FILES} are looked up at once (three digests each).",
            files.len()
        ));
    }
    files
        .into_iter()
        .map(|f| {
            let digest = |value: &str, algo| {
                HashValue::parse_as(value, algo).map_err(|e| {
                    format!("The digests of {} could not be read: {e}", shown(&f.name))
                })
            };
            let digests = [
                digest(&f.sha256, model::HashAlgo::Sha256)?,
                digest(&f.sha1, model::HashAlgo::Sha1)?,
                digest(&f.md5, model::HashAlgo::Md5)?,
            ];
            Ok((f.name, digests))
        })
        .collect()
}

/// Answers the Lookup form: 200 when anything was looked up, 400 when nothing could be.
pub(super) async fn answer(
    state: &AppState,
    ctx: &Ctx,
    principal: &Principal,
    form: &Fields,
) -> Response {
    let raw = form.get("hashes").cloned().unwrap_or_default();
    let bad = |text: &str| {
        lookup_form(
            state,
            ctx,
            StatusCode::BAD_REQUEST,
            &raw,
            message("error", text),
        )
    };
    let files = match dropped(form.get("files").map_or("", String::as_str)) {
        Ok(f) => f,
        Err(text) => return bad(&text),
    };
    let (typed, refusals) = pasted(&raw);
    let mut batch: Vec<HashValue> = typed.clone();
    batch.extend(files.iter().flat_map(|(_, d)| d.iter().cloned()));
    batch.sort_unstable();
    batch.dedup();
    let not_hashes = refused_list(&refusals);
    if batch.is_empty() {
        let text = if refusals.is_empty() {
            message("error", "Enter between 1 and 100 hashes.")
        } else {
            not_hashes
        };
        return lookup_form(state, ctx, StatusCode::BAD_REQUEST, &raw, text);
    }
    if batch.len() > MAX_HASHES {
        return bad(&format!(
            "{} distinct hashes: at most {MAX_HASHES} are looked up at once.",
            batch.len()
        ));
    }
    // Superseded builds are genuine too: with intel:history (as the CLI does) they are
    // answered and marked, with the current version beside them.
    let historical = principal.has(Permission::IntelHistory);
    let answers = match answers(state, batch, historical).await {
        Ok(a) => a,
        Err(e) => return refused(state, ctx, &e),
    };
    let mut seen = BTreeSet::new();
    let typed: Vec<&HashValue> = typed.iter().filter(|h| seen.insert(h.as_str())).collect();
    let results = html! {
        (not_hashes)
        @if !files.is_empty() { (files_table(&files, &answers)) }
        @if !typed.is_empty() {
            section aria-labelledby="results" {
                h2 id="results" { "Results" }
                table class="cards" {
                    thead { tr {
                        th scope="col" { "Hash" } th scope="col" { "Classification" }
                        th scope="col" { "Match" }
                    } }
                    tbody {
                        @for h in &typed {
                            @let a = &answers[h.as_str()];
                            tr {
                                td class="hash" data-label="Hash" { (h.as_str()) }
                                td data-label="Classification" {
                                    span class={ "badge " (a.classification) } data-classification { (a.classification) }
                                    (a.mark())
                                }
                                td data-label="Match" { (a.detail) }
                            }
                        }
                    }
                }
            }
        }
    };
    lookup_form(state, ctx, StatusCode::OK, &raw, results)
}

/// The pasted values that were not looked up, each at its line.
fn refused_list(refusals: &[Refusal]) -> Markup {
    let n = refusals.len();
    html! {
        @if n > 0 {
            section class="msg error" aria-labelledby="refused" data-refused {
                h2 id="refused" { "Not looked up" }
                p {
                    (n) " value" (if n == 1 { "" } else { "s" }) " "
                    (if n == 1 { "is" } else { "are" }) " not a hash; the others are answered below."
                }
                ul {
                    @for r in refusals {
                        li data-refused-line=(r.line) {
                            "Line " (r.line) ": " code { (r.text) } " — " (r.why)
                        }
                    }
                }
            }
        }
    }
}

/// One row per dropped file: its name, each digest with its verdict, and the matches.
fn files_table(files: &[(String, [HashValue; 3])], answers: &HashMap<String, Answer>) -> Markup {
    html! {
        section aria-labelledby="files" {
            h2 id="files" { "Files" }
            p class="help" { "Hashed in your browser; each digest is looked up on its own." }
            table class="cards files" data-files {
                thead { tr {
                    th scope="col" { "File" } th scope="col" { "Digests and verdicts" }
                    th scope="col" { "Match" }
                } }
                tbody { @for (name, digests) in files { (file_row(name, digests, answers)) } }
            }
        }
    }
}

/// A dropped file's row: each digest with its verdict, and the distinct matches.
fn file_row(name: &str, digests: &[HashValue; 3], answers: &HashMap<String, Answer>) -> Markup {
    let mut details: Vec<&Markup> = Vec::new();
    for h in digests {
        let a = &answers[h.as_str()];
        if a.classification != "unknown" && !details.iter().any(|d| d.0 == a.detail.0) {
            details.push(&a.detail);
        }
    }
    let lines = html! {
        ul class="digests" {
            @for (algo, h) in ["SHA-256", "SHA-1", "MD5"].iter().zip(digests) {
                @let a = &answers[h.as_str()];
                li data-digest=(algo) {
                    span class="algo" { (algo) } " " span class="hash" { (h.as_str()) } " "
                    span class={ "badge " (a.classification) } data-classification { (a.classification) }
                    (a.mark())
                }
            }
        }
    };
    let matched = html! {
        @if details.is_empty() {
            "found in no source"
        } @else {
            @for (i, d) in details.iter().enumerate() {
                @if i > 0 { br; }
                (d)
            }
        }
    };
    html! {
        tr data-file {
            (td("File", html! { span class="file-name" data-file-name { (shown(name)) } }))
            (td("Digests", lines))
            (td("Match", matched))
        }
    }
}

/// What the page shows for one looked-up hash (owned: the classifier's answer borrows from
/// the index, which is not held across the look-ups that follow).
struct Answer {
    classification: &'static str,
    /// The match, with the record's source for a vendor build.
    detail: Markup,
    superseded: bool,
}

impl Answer {
    fn mark(&self) -> Markup {
        html! {
            @if self.superseded {
                " " span class="badge superseded" data-superseded { "superseded" }
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Classifies the batch and completes each vendor match: the record's source URL (read
/// from the records, which the lookup index does not keep) and, for a superseded build,
/// the current version.
async fn answers(
    state: &AppState,
    batch: Vec<HashValue>,
    historical: bool,
) -> Result<HashMap<String, Answer>, Error> {
    let classified = state.classifier.classify(batch, historical).await?;
    let rows: Vec<(String, LookupRow)> = classified
        .results()
        .into_iter()
        .map(|(hash, verdict)| (hash.as_str().to_string(), LookupRow::of(&verdict)))
        .collect();
    drop(classified);
    let vendor_hashes: Vec<HashValue> = rows
        .iter()
        .filter_map(|(_, r)| r.vendor_sha256.as_deref())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter_map(|h| HashValue::parse(h).ok())
        .collect();
    let mut sources: HashMap<String, String> = HashMap::new();
    if !vendor_hashes.is_empty() {
        for r in state
            .store
            .find_by_hashes(&vendor_hashes, historical)
            .await?
        {
            if r.integrity_ok {
                sources.insert(r.record.hash_sha256.clone(), r.record.source_url.clone());
            }
        }
    }
    let mut current_versions: HashMap<(String, String, model::Platform), String> = HashMap::new();
    let mut out = HashMap::with_capacity(rows.len());
    for (hash, row) in rows {
        if let Some(key) = &row.superseded
            && !current_versions.contains_key(key)
        {
            current_versions.insert(key.clone(), current_version(state, key).await?);
        }
        let current = row.superseded.as_ref().map(|key| &current_versions[key]);
        let source = row.vendor_sha256.as_ref().and_then(|h| sources.get(h));
        let detail = html! {
            (row.detail)
            @if let Some(current) = current {
                " " span class="help" data-current-version { (current) }
            }
            @if let Some(url) = source {
                br;
                a class="source" href=(url) rel="noreferrer noopener" data-source-url { (url) }
            }
        };
        out.insert(
            hash,
            Answer {
                classification: row.classification,
                detail,
                superseded: row.superseded.is_some(),
            },
        );
    }
    Ok(out)
}

/// One classified hash, owned.
struct LookupRow {
    classification: &'static str,
    /// The match: what the hash is.
    detail: String,
    /// A superseded vendor build: its vendor, executable and platform.
    superseded: Option<(String, String, model::Platform)>,
    /// A vendor build's SHA-256, by which its record (and source) is read.
    vendor_sha256: Option<String>,
}

impl LookupRow {
    fn of(verdict: &::lookup::Verdict<'_>) -> Self {
        use ::lookup::Verdict;
        let (detail, superseded, vendor_sha256) = match verdict {
            Verdict::VendorRelease(m) => (
                format!(
                    "{} {} ({}, {})",
                    m.executable_name,
                    m.version,
                    m.vendor,
                    m.platform.as_str()
                ),
                (!m.current).then(|| {
                    (
                        m.vendor.to_string(),
                        m.executable_name.to_string(),
                        m.platform,
                    )
                }),
                Some(hex(&m.digests.sha256)),
            ),
            Verdict::File(e) => (
                format!("{} ({}, {})", e.file_name, e.product_name, e.source),
                None,
                None,
            ),
            Verdict::Unknown => ("found in no source".into(), None, None),
        };
        Self {
            classification: verdict.classification().as_str(),
            detail,
            superseded,
            vendor_sha256,
        }
    }
}

/// What to show beside a superseded build: the current version(s) of the same vendor's
/// executable on that platform, or that none is current.
async fn current_version(
    state: &AppState,
    (vendor, executable, platform): &(String, String, model::Platform),
) -> Result<String, Error> {
    let query = store::HistoryQuery {
        executable: executable.clone(),
        platform: Some(*platform),
        limit: 200,
        ..store::HistoryQuery::default()
    };
    let page = state.store.history(&query).await?;
    let mut versions: Vec<&str> = page
        .items
        .iter()
        .filter(|r| r.valid_until.is_none() && r.record.vendor == *vendor)
        .map(|r| r.record.version.as_str())
        .collect();
    versions.sort_unstable();
    versions.dedup();
    Ok(if versions.is_empty() {
        "no version of it is current".to_string()
    } else {
        format!("current version: {}", versions.join(", "))
    })
}

/// "Did you mean" links for a History search that matched nothing: executable names that
/// start with what was typed.
pub(super) async fn suggestions(state: &AppState, typed: &str) -> Result<Markup, Error> {
    let names = state
        .store
        .executable_names_with_prefix(typed, store::MAX_NAME_SUGGESTIONS)
        .await?;
    Ok(html! {
        @if !names.is_empty() {
            p data-suggestions {
                "Did you mean: "
                @for (i, n) in names.iter().enumerate() {
                    @if i > 0 { ", " }
                    a href={ "/console/history?executable=" (query_value(n)) } data-suggestion { (n) }
                }
                "?"
            }
        }
    })
}

/// A query-string value, percent-encoded but for unreserved characters.
fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
