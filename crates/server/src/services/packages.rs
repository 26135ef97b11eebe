//! Package intelligence: typosquat and dependency-confusion analysis, SBOM scans and
//! package watchlists, for the API's package routes and the console's Packages page. The
//! analysis itself is the `packages` crate; this module supplies the tracked packages and
//! classifies SBOM hashes with the lookup classifier. A submitted SBOM is parsed in memory
//! and dropped with the request: nothing of it is written to disk, the database or the logs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use model::{Error, HashValue};
use packages::{Detector, Ecosystem, KnownNames, NameVerdict, PopularList, Risk};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::api::lookup_result_owned;
use crate::api::timestamp;

pub(crate) const MAX_TYPOSQUAT_PACKAGES: usize = 200;
pub(crate) const MAX_INTERNAL_NAMES: usize = 1000;
pub(crate) use packages::sbom::MAX_SBOM_BYTES;
/// SBOM scans one key may have running at once on one replica, from reading the body to
/// the last byte of the report; another is refused.
pub(crate) const MAX_SBOM_SCANS_PER_KEY: usize = 2;

/// The analysis and what it compares with: popular names (shipped or refreshed lists) and
/// the packages the service tracks, re-read when the records change. The detector's indexes
/// are built on first use, off the request threads, so starting the service costs nothing;
/// the one over the shipped lists is shared by every state of the process.
pub struct PackageIntel {
    /// Replacements of the shipped lists, per ecosystem; none means the shipped ones.
    lists: Vec<PopularList>,
    detector: tokio::sync::OnceCell<Arc<Detector>>,
    tracked: Mutex<Option<(u64, Arc<Tracked>)>>,
    /// SBOM scans running, per key id (keys with none are removed).
    scans: Mutex<HashMap<String, usize>>,
}

/// Tracked package names per ecosystem, as each ecosystem compares names.
#[derive(Debug, Default)]
pub(crate) struct Tracked(HashMap<Ecosystem, HashSet<String>>);

impl Tracked {
    pub fn of(&self, ecosystem: Ecosystem) -> &HashSet<String> {
        static EMPTY: std::sync::OnceLock<HashSet<String>> = std::sync::OnceLock::new();
        self.0
            .get(&ecosystem)
            .unwrap_or_else(|| EMPTY.get_or_init(HashSet::new))
    }
}

impl Default for PackageIntel {
    fn default() -> Self {
        Self::with_lists(Vec::new())
    }
}

/// The detector over the shipped lists, built once per process.
static SHIPPED: tokio::sync::OnceCell<Arc<Detector>> = tokio::sync::OnceCell::const_new();

impl PackageIntel {
    /// The shipped lists, with any of `lists` in place of its ecosystem's.
    pub(crate) fn with_lists(lists: Vec<PopularList>) -> Self {
        Self {
            lists,
            detector: tokio::sync::OnceCell::new(),
            tracked: Mutex::new(None),
            scans: Mutex::new(HashMap::new()),
        }
    }

    /// The detector, built on first use.
    pub async fn detector(&self) -> Result<Arc<Detector>, Error> {
        let build = |lists: Vec<PopularList>| async move {
            tokio::task::spawn_blocking(move || {
                let mut by_ecosystem: HashMap<Ecosystem, PopularList> = Ecosystem::ALL
                    .iter()
                    .map(|&e| (e, PopularList::shipped(e)))
                    .collect();
                for list in lists {
                    by_ecosystem.insert(list.ecosystem, list);
                }
                Arc::new(Detector::new(KnownNames::from_lists(
                    by_ecosystem.into_values(),
                )))
            })
            .await
            .map_err(|e| Error::internal_caused("building the name indexes stopped", e))
        };
        if self.lists.is_empty() {
            return SHIPPED.get_or_try_init(|| build(Vec::new())).await.cloned();
        }
        self.detector
            .get_or_try_init(|| build(self.lists.clone()))
            .await
            .cloned()
    }

    async fn tracked(&self, state: &AppState) -> Result<Arc<Tracked>, Error> {
        let epoch = state.store.records_epoch();
        if let Some((e, tracked)) = &*self.tracked.lock().unwrap_or_else(|e| e.into_inner())
            && *e == epoch
        {
            return Ok(tracked.clone());
        }
        let mut sets: HashMap<Ecosystem, HashSet<String>> = HashMap::new();
        for p in state.store.tracked_packages().await? {
            if let Ok(e) = p.ecosystem.parse::<Ecosystem>()
                && let Ok(name) = e.normalize(&p.package_name)
            {
                sets.entry(e).or_default().insert(name);
            }
        }
        let tracked = Arc::new(Tracked(sets));
        *self.tracked.lock().unwrap_or_else(|e| e.into_inner()) = Some((epoch, tracked.clone()));
        Ok(tracked)
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TyposquatRequest {
    /// 1 to 200 packages.
    pub packages: Vec<PackageRef>,
    /// Names of the caller's own private packages; one that also exists publicly is
    /// `dependency_confusion`.
    #[serde(default)]
    pub internal_names: Vec<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PackageRef {
    /// npm, pypi or go.
    pub ecosystem: String,
    pub name: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TyposquatResult {
    pub ecosystem: String,
    /// As submitted.
    pub name: String,
    /// As the ecosystem compares names (PEP 503 for PyPI, lower case for npm).
    pub normalized_name: String,
    /// known, typosquat, dependency_confusion or clear.
    pub risk: &'static str,
    pub nearest_known: Option<String>,
    /// Edit distance to `nearest_known`.
    pub distance: Option<u32>,
    /// The relation found (the technique, for a typosquat).
    pub reason: String,
}

impl TyposquatResult {
    fn new(ecosystem: &str, name: &str, v: NameVerdict) -> Self {
        Self {
            ecosystem: ecosystem.to_string(),
            name: name.to_string(),
            normalized_name: v.name,
            risk: v.risk.as_str(),
            nearest_known: v.nearest_known,
            distance: v.distance,
            reason: v.reason,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TyposquatResponse {
    pub results: Vec<TyposquatResult>,
    /// Results per risk: known, typosquat, dependency_confusion, clear.
    pub summary: BTreeMap<&'static str, u64>,
}

fn risk_summary(results: &[TyposquatResult]) -> BTreeMap<&'static str, u64> {
    let mut summary: BTreeMap<&'static str, u64> =
        Risk::ALL.iter().map(|r| (r.as_str(), 0)).collect();
    for r in results {
        *summary.entry(r.risk).or_default() += 1;
    }
    summary
}

/// An ecosystem name, refused as `field` when unknown.
pub(crate) fn ecosystem_at(raw: &str, field: &str) -> Result<Ecosystem, Error> {
    raw.parse::<Ecosystem>()
        .map_err(|m| Error::bad_request(format!("{field}: {m}")))
}

/// Typosquat and dependency-confusion analysis of package names (nothing is fetched).
pub async fn typosquat(
    state: &AppState,
    request: &TyposquatRequest,
) -> Result<TyposquatResponse, Error> {
    if request.packages.is_empty() {
        return Err(Error::bad_request("packages must not be empty"));
    }
    if request.packages.len() > MAX_TYPOSQUAT_PACKAGES {
        return Err(Error::bad_request(format!(
            "packages holds {} entries; at most {MAX_TYPOSQUAT_PACKAGES} are accepted per request",
            request.packages.len()
        )));
    }
    if request.internal_names.len() > MAX_INTERNAL_NAMES {
        return Err(Error::bad_request(format!(
            "internal_names holds {} entries; at most {MAX_INTERNAL_NAMES} are accepted",
            request.internal_names.len()
        )));
    }
    // Validate everything before any work.
    let ecosystems = request
        .packages
        .iter()
        .enumerate()
        .map(|(i, p)| ecosystem_at(&p.ecosystem, &format!("packages[{i}].ecosystem")))
        .collect::<Result<Vec<_>, _>>()?;
    let intel = state.packages.clone();
    let detector = intel.detector().await?;
    let tracked = intel.tracked(state).await?;
    let mut results = Vec::with_capacity(request.packages.len());
    for (i, (p, &e)) in request.packages.iter().zip(&ecosystems).enumerate() {
        // Internal names compare as names of the package's ecosystem.
        let internal = e.normalize(&p.name).is_ok_and(|n| {
            request
                .internal_names
                .iter()
                .any(|internal| e.normalize(internal).is_ok_and(|m| m == n))
        });
        let verdict = detector
            .analyse(e, &p.name, tracked.of(e), internal)
            .map_err(|err| Error::bad_request(format!("packages[{i}].name: {err}")))?;
        results.push(TyposquatResult::new(e.as_str(), p.name.trim(), verdict));
    }
    Ok(TyposquatResponse {
        summary: risk_summary(&results),
        results,
    })
}

/// One of the caller's [`MAX_SBOM_SCANS_PER_KEY`] SBOM scans, taken before the body is read
/// and given back when dropped (with the report's last byte).
pub struct SbomScanSlot {
    intel: Arc<PackageIntel>,
    key: String,
}

impl SbomScanSlot {
    /// One of `key_id`'s scan slots, or `None` while it already runs
    /// [`MAX_SBOM_SCANS_PER_KEY`] scans.
    pub fn take(state: &AppState, key_id: &str) -> Option<Self> {
        let intel = state.packages.clone();
        {
            let mut scans = intel.scans.lock().unwrap_or_else(|e| e.into_inner());
            let running = scans.entry(key_id.to_owned()).or_default();
            if *running >= MAX_SBOM_SCANS_PER_KEY {
                return None;
            }
            *running += 1;
        }
        Some(Self {
            key: key_id.to_owned(),
            intel,
        })
    }
}

impl Drop for SbomScanSlot {
    fn drop(&mut self) {
        let mut scans = self.intel.scans.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(running) = scans.get_mut(&self.key) {
            *running = running.saturating_sub(1);
            if *running == 0 {
                scans.remove(&self.key);
            }
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SbomReport {
    /// CycloneDX or SPDX.
    pub format: &'static str,
    /// The format's version as the document states it.
    pub spec_version: String,
    /// json, xml, tag-value or json-ld.
    pub encoding: &'static str,
    pub summary: SbomSummary,
    pub components: Vec<SbomComponent>,
}

#[derive(Debug, Default, Serialize, ToSchema)]
pub(crate) struct SbomSummary {
    pub components: u64,
    pub hash_known: u64,
    pub hash_unknown: u64,
    pub no_hash: u64,
    pub typosquat: u64,
    pub dependency_confusion: u64,
    pub with_advisories: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SbomComponent {
    pub name: String,
    pub version: String,
    /// npm, pypi, go, another package URL type, or unknown.
    pub ecosystem: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purl: Option<String>,
    /// The component's digest classified as a lookup classifies it; `no_hash` when the
    /// SBOM lists none.
    #[schema(value_type = Object)]
    pub hash: serde_json::Value,
    pub name_risk: NameRisk,
    /// Imported OSV advisories affecting this version: `id`, `aliases` (CVE ids),
    /// `summary`, `modified`.
    #[schema(value_type = Vec<Object>)]
    pub advisories: Vec<serde_json::Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct NameRisk {
    pub risk: &'static str,
    pub nearest_known: Option<String>,
    pub distance: Option<u32>,
    pub reason: String,
}

/// Scans a software bill of materials under `slot`: each component's hash, name risk and
/// advisories, the report (the shape of [`SbomReport`]) streamed as it is written.
pub async fn sbom(state: &AppState, slot: SbomScanSlot, body: bytes::Bytes) -> Result<Body, Error> {
    let intel = state.packages.clone();
    let detector = intel.detector().await?;
    let tracked = intel.tracked(state).await?;
    // Parsing and name analysis are CPU work: off the request threads.
    let (sbom, risks) =
        tokio::task::spawn_blocking(move || parse_and_judge_names(body, &detector, &tracked))
            .await
            .map_err(|e| Error::internal_caused("SBOM analysis stopped", e))??;
    let hashes = HashAnswers::classify(state, &sbom.components).await?;
    let advisories = Advisories::for_components(state, &sbom.components).await?;
    let found: Vec<Vec<serde_json::Value>> = sbom
        .components
        .iter()
        .map(|c| advisories.affecting(c))
        .collect();
    drop(advisories);
    let summary = summarise(&sbom.components, &risks, &found, &hashes);
    let head = serde_json::to_vec(&SbomReportHead {
        format: sbom.format.as_str(),
        spec_version: &sbom.spec_version,
        encoding: sbom.encoding,
        summary: &summary,
    })
    .map_err(|e| Error::internal_caused("could not serialise an SBOM report", e))?;
    let rows = sbom.components.into_iter().zip(risks).zip(found);
    Ok(stream_report(head, rows, hashes, slot))
}

/// Parses the document and judges each distinct (ecosystem, name) once: the components and,
/// for each, its name risk.
fn parse_and_judge_names(
    body: bytes::Bytes,
    detector: &Detector,
    tracked: &Tracked,
) -> Result<(packages::Sbom, Vec<Arc<NameRisk>>), Error> {
    let sbom = packages::sbom::parse(&body).map_err(|e| match e {
        packages::SbomError::Invalid(m) => Error::bad_request(m),
        too_many @ packages::SbomError::TooManyComponents => {
            Error::PayloadTooLarge(too_many.to_string())
        }
    })?;
    // The document is not needed past parsing: freed before the names are judged.
    drop(body);
    // A name listed in several versions is analysed once.
    let mut seen: HashMap<(&str, &str), usize> = HashMap::new();
    let mut risks: Vec<Arc<NameRisk>> = Vec::new();
    // Most names are clear for one of a few reasons: one shared answer per reason.
    let mut clear: HashMap<String, Arc<NameRisk>> = HashMap::new();
    let mut risk_of = Vec::with_capacity(sbom.components.len());
    for c in &sbom.components {
        let i = *seen
            .entry((c.ecosystem.as_str(), c.name.as_str()))
            .or_insert_with(|| {
                let risk = name_risk(detector, tracked, c);
                let shared = if risk.risk == Risk::Clear.as_str()
                    && risk.nearest_known.is_none()
                    && risk.distance.is_none()
                {
                    Arc::clone(
                        clear
                            .entry(risk.reason.clone())
                            .or_insert_with(|| Arc::new(risk)),
                    )
                } else {
                    Arc::new(risk)
                };
                risks.push(shared);
                risks.len() - 1
            });
        risk_of.push(Arc::clone(&risks[i]));
    }
    Ok((sbom, risk_of))
}

/// The components' listed digests, classified as a lookup classifies them.
struct HashAnswers {
    /// Only known hashes are kept; every other listed one is `unknown`.
    known: HashMap<String, serde_json::Value>,
    unknown: serde_json::Value,
    no_hash: serde_json::Value,
}

/// What a component's listed digest is.
enum HashAnswer<'a> {
    Known(&'a serde_json::Value),
    Unknown,
    /// None listed, or one that is no well-formed hash (not looked up).
    NoHash,
}

impl HashAnswers {
    async fn classify(state: &AppState, components: &[packages::Component]) -> Result<Self, Error> {
        let mut batch: Vec<HashValue> = components
            .iter()
            .filter_map(|c| c.hash.as_deref())
            .filter_map(|h| HashValue::parse(h).ok())
            .collect();
        batch.sort_unstable();
        batch.dedup();
        let mut known = HashMap::new();
        if !batch.is_empty() {
            let classified = state.classifier.classify(batch, false).await?;
            for (hash, verdict) in classified.results() {
                if verdict.classification() != model::Classification::Unknown {
                    known.insert(hash.as_str().to_string(), lookup_result_owned(verdict));
                }
            }
        }
        Ok(Self {
            known,
            unknown: serde_json::json!({ "classification": "unknown" }),
            no_hash: serde_json::json!({ "classification": "no_hash" }),
        })
    }

    fn of(&self, c: &packages::Component) -> HashAnswer<'_> {
        match c.hash.as_deref().filter(|h| HashValue::parse(h).is_ok()) {
            Some(h) => self
                .known
                .get(h)
                .map_or(HashAnswer::Unknown, HashAnswer::Known),
            None => HashAnswer::NoHash,
        }
    }

    /// The component's `hash` field.
    fn json(&self, c: &packages::Component) -> &serde_json::Value {
        match self.of(c) {
            HashAnswer::Known(v) => v,
            HashAnswer::Unknown => &self.unknown,
            HashAnswer::NoHash => &self.no_hash,
        }
    }
}

fn summarise(
    components: &[packages::Component],
    risks: &[Arc<NameRisk>],
    advisories: &[Vec<serde_json::Value>],
    hashes: &HashAnswers,
) -> SbomSummary {
    let mut summary = SbomSummary::default();
    for ((c, risk), advisories) in components.iter().zip(risks).zip(advisories) {
        summary.components += 1;
        match hashes.of(c) {
            HashAnswer::Known(_) => summary.hash_known += 1,
            HashAnswer::Unknown => summary.hash_unknown += 1,
            HashAnswer::NoHash => summary.no_hash += 1,
        }
        match risk.risk {
            "typosquat" => summary.typosquat += 1,
            "dependency_confusion" => summary.dependency_confusion += 1,
            _ => {}
        }
        if !advisories.is_empty() {
            summary.with_advisories += 1;
        }
    }
    summary
}

/// The report is written component by component (the shape of [`SbomReport`]) after its
/// `head`, and sent in pieces as it is written, each component freed once written: a scan
/// of tens of thousands of components never holds the whole answer, nor a tree of it.
fn stream_report(
    head: Vec<u8>,
    rows: impl Iterator<Item = ((packages::Component, Arc<NameRisk>), Vec<serde_json::Value>)>
    + Send
    + 'static,
    hashes: HashAnswers,
    slot: SbomScanSlot,
) -> Body {
    super::streamed::streamed(move |out| {
        use std::io::Write as _;
        // The scan counts against the caller until its report is written.
        let _slot = slot;
        let mut head = head;
        head.pop(); // the head's closing brace
        out.write_all(&head)?;
        out.write_all(b",\"components\":[")?;
        for (i, ((c, risk), advisories)) in rows.enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            let component = SbomComponentRef {
                name: &c.name,
                version: &c.version,
                ecosystem: &c.ecosystem,
                purl: c.purl.as_deref(),
                hash: hashes.json(&c),
                name_risk: &risk,
                advisories: &advisories,
            };
            serde_json::to_writer(&mut *out, &component).map_err(std::io::Error::other)?;
        }
        out.write_all(b"]}")
    })
}

/// [`SbomReport`] without its components, which follow it.
#[derive(Serialize)]
struct SbomReportHead<'a> {
    format: &'static str,
    spec_version: &'a str,
    encoding: &'static str,
    summary: &'a SbomSummary,
}

/// [`SbomComponent`], borrowed.
#[derive(Serialize)]
struct SbomComponentRef<'a> {
    name: &'a str,
    version: &'a str,
    ecosystem: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    purl: Option<&'a str>,
    hash: &'a serde_json::Value,
    name_risk: &'a NameRisk,
    advisories: &'a [serde_json::Value],
}

/// The imported advisories naming any of an SBOM's packages.
struct Advisories(HashMap<(Ecosystem, String), Vec<Arc<packages::Advisory>>>);

impl Advisories {
    async fn for_components(
        state: &AppState,
        components: &[packages::Component],
    ) -> Result<Self, Error> {
        let mut wanted: Vec<(String, String)> = components
            .iter()
            .filter_map(|c| {
                let e = c.analysed_ecosystem()?;
                let names = packages::advisories::advisory_names(e, &c.name);
                Some(names.into_iter().map(move |n| (e.as_str().to_string(), n)))
            })
            .flatten()
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut by_package: HashMap<(Ecosystem, String), Vec<Arc<packages::Advisory>>> =
            HashMap::new();
        if wanted.is_empty() {
            return Ok(Self(by_package));
        }
        for document in state.store.advisories_for(&wanted).await? {
            // Stored documents were read when imported; one that no longer reads is skipped.
            let Ok(Some(advisory)) = packages::parse_osv(document.as_bytes()) else {
                continue;
            };
            let advisory = Arc::new(advisory);
            for a in &advisory.affected {
                by_package
                    .entry((a.ecosystem, a.name.clone()))
                    .or_default()
                    .push(advisory.clone());
            }
        }
        Ok(Self(by_package))
    }

    /// The advisories affecting the component's version (for Go's standard library, those
    /// of `stdlib` and of `toolchain`), each once.
    fn affecting(&self, c: &packages::Component) -> Vec<serde_json::Value> {
        let Some(e) = c.analysed_ecosystem() else {
            return Vec::new();
        };
        let mut seen = HashSet::new();
        packages::advisories::advisory_names(e, &c.name)
            .into_iter()
            .filter_map(|name| Some((self.0.get(&(e, name.clone()))?, name)))
            .flat_map(|(found, name)| {
                found.iter().filter(move |a| {
                    a.affected
                        .iter()
                        .any(|x| x.ecosystem == e && x.name == name && x.affects(&c.version))
                })
            })
            .filter(|a| seen.insert(a.id.clone()))
            .map(|a| {
                serde_json::json!({
                    "id": a.id,
                    "aliases": a.aliases,
                    "summary": a.summary,
                    "modified": a.modified,
                })
            })
            .collect()
    }
}

fn name_risk(detector: &Detector, tracked: &Tracked, c: &packages::Component) -> NameRisk {
    let Some(e) = c.analysed_ecosystem() else {
        return NameRisk {
            risk: Risk::Clear.as_str(),
            nearest_known: None,
            distance: None,
            reason: format!("names of ecosystem {:?} are not analysed", c.ecosystem),
        };
    };
    match detector.analyse(e, &c.name, tracked.of(e), false) {
        Ok(v) => NameRisk {
            risk: v.risk.as_str(),
            nearest_known: v.nearest_known,
            distance: v.distance,
            reason: v.reason,
        },
        Err(err) => NameRisk {
            risk: Risk::Clear.as_str(),
            nearest_known: None,
            distance: None,
            reason: err.to_string(),
        },
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchRequest {
    /// npm, pypi or go.
    pub ecosystem: String,
    pub package_name: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WatchJson {
    pub id: String,
    pub ecosystem: String,
    /// As the ecosystem compares names.
    pub package_name: String,
    pub created_at: String,
    /// tracked (the service holds its versions), pending (tracked from the next refresh)
    /// or not_found (the registry knows no such package).
    pub tracking: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WatchList {
    pub results: Vec<WatchJson>,
    pub total: u64,
}

async fn tracking_of(
    state: &AppState,
    watches: &[store::packages::PackageWatch],
) -> Result<Vec<&'static str>, Error> {
    let tracked = state.packages.tracked(state).await?;
    let statuses: HashSet<(String, String)> = state
        .store
        .registry_statuses()
        .await?
        .into_iter()
        .filter(|(_, _, s)| s == "not_found")
        .map(|(e, n, _)| (e, n))
        .collect();
    Ok(watches
        .iter()
        .map(|w| {
            let in_tracked = w
                .ecosystem
                .parse::<Ecosystem>()
                .is_ok_and(|e| tracked.of(e).contains(&w.package_name));
            if in_tracked {
                "tracked"
            } else if statuses.contains(&(w.ecosystem.clone(), w.package_name.clone())) {
                "not_found"
            } else {
                "pending"
            }
        })
        .collect())
}

fn watch_json(w: &store::packages::PackageWatch, tracking: &'static str) -> WatchJson {
    WatchJson {
        id: w.id.clone(),
        ecosystem: w.ecosystem.clone(),
        package_name: w.package_name.clone(),
        created_at: timestamp(w.created_at),
        tracking,
    }
}

/// The account's package watchlist.
pub async fn watches(state: &AppState, team_id: &str) -> Result<WatchList, Error> {
    let watches = state.store.watches(team_id).await?;
    let tracking = tracking_of(state, &watches).await?;
    Ok(WatchList {
        total: watches.len() as u64,
        results: watches
            .iter()
            .zip(tracking)
            .map(|(w, t)| watch_json(w, t))
            .collect(),
    })
}

/// Watches a package; an untracked one is tracked from the next refresh. Whether the watch
/// is new (`false`: the package was already on the list, and that watch is returned).
pub async fn add_watch(
    state: &AppState,
    team_id: &str,
    request: &WatchRequest,
) -> Result<(WatchJson, bool), Error> {
    let ecosystem = ecosystem_at(&request.ecosystem, "ecosystem")?;
    let name = ecosystem
        .normalize(&request.package_name)
        .map_err(|e| Error::bad_request(format!("package_name: {e}")))?;
    let (watch, created) = state
        .store
        .add_watch(team_id, ecosystem.as_str(), &name, state.clock.now())
        .await?;
    let tracking = tracking_of(state, std::slice::from_ref(&watch)).await?;
    Ok((watch_json(&watch, tracking[0]), created))
}

/// Stops watching a package; 404 when the account has no watch `id`.
pub async fn remove_watch(state: &AppState, team_id: &str, id: &str) -> Result<(), Error> {
    if state.store.remove_watch(team_id, id).await? {
        Ok(())
    } else {
        Err(Error::NotFound(
            "no watch with that id on this account".into(),
        ))
    }
}
