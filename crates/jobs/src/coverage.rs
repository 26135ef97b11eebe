//! Inventory-driven coverage: the PyPI, npm and Debian/Ubuntu package versions an SBOM
//! lists are queued for the next refresh of their channel, which records exactly those
//! versions (pinned items: `name==version`, `name@version`, `name=version`), members
//! included. Only (ecosystem, name, version) enters the queue; the SBOM is read here and
//! dropped by the caller.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use ingest::VendorReport;
use model::Error;
use store::Store;
use store::coverage::{CoverageEntry, CoverageItem, CoverageState, RecordProbe};

/// The most package versions one request may queue (after removing duplicates).
pub const MAX_ITEMS: usize = 10_000;

/// Queued versions of one channel one refresh takes; the rest wait for the next one.
pub const PER_RUN: u32 = 10_000;

/// The channels the queue feeds, by fetcher id (also the queue's ecosystem names).
pub const CHANNELS: [&str; 4] = ["pypi", "npm", "debian", "ubuntu"];

/// A component the queue cannot take, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub ecosystem: String,
    pub name: String,
    pub version: String,
    pub reason: String,
}

/// What an SBOM asks to be queued.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Distinct versions, in (ecosystem, name, version) order.
    pub items: Vec<CoverageItem>,
    /// Components of a followed ecosystem that name no usable version.
    pub refused: Vec<Refused>,
    /// Components of ecosystems the queue does not follow (Maven, Go, RPM, ...), by package
    /// URL type.
    pub not_followed: BTreeMap<String, u64>,
    pub components: u64,
}

/// The package versions of `sbom` the queue takes. More than [`MAX_ITEMS`] distinct ones
/// is `PayloadTooLarge`.
pub fn plan(sbom: &packages::Sbom) -> Result<Plan, Error> {
    let mut items = BTreeSet::new();
    let mut plan = Plan {
        components: sbom.components.len() as u64,
        ..Plan::default()
    };
    for c in &sbom.components {
        match item_of(c) {
            Ok(Some(item)) => {
                items.insert(item);
                if items.len() > MAX_ITEMS {
                    return Err(Error::PayloadTooLarge(format!(
                        "the bill of materials lists more than {MAX_ITEMS} distinct PyPI, npm \
                         and Debian/Ubuntu package versions, the most one request queues; split it"
                    )));
                }
            }
            Ok(None) => *plan.not_followed.entry(c.ecosystem.clone()).or_default() += 1,
            Err(reason) => plan.refused.push(Refused {
                ecosystem: c.ecosystem.clone(),
                name: c.name.clone(),
                version: c.version.clone(),
                reason,
            }),
        }
    }
    plan.items = items.into_iter().collect();
    Ok(plan)
}

/// The queue item of a component: `None` for an ecosystem the queue does not follow, an
/// error for a followed one whose name or version cannot be pinned.
fn item_of(c: &packages::Component) -> Result<Option<CoverageItem>, String> {
    let version = c.version.trim();
    let versioned = |ecosystem: &str, name: String, ok: bool| {
        if version.is_empty() {
            return Err("no version: only exact versions are queued".to_string());
        }
        if !ok {
            return Err(format!(
                "{version:?} is not a version the {ecosystem} channel pins"
            ));
        }
        Ok(Some(CoverageItem {
            ecosystem: ecosystem.to_string(),
            name,
            version: version.to_string(),
        }))
    };
    match c.ecosystem.as_str() {
        "pypi" => {
            let name = packages::Ecosystem::Pypi
                .normalize(&c.name)
                .map_err(|e| e.to_string())?;
            versioned("pypi", name, ingest::formats::valid_version(version))
        }
        "npm" => {
            packages::Ecosystem::Npm
                .normalize(&c.name)
                .map_err(|e| e.to_string())?;
            // The registry's names are case-sensitive: kept as listed.
            versioned(
                "npm",
                c.name.trim().to_string(),
                ingest::formats::valid_version(version),
            )
        }
        "deb" => {
            let Some((distro, name)) = c.name.split_once('/') else {
                return Err(
                    "a deb package URL names its distribution (pkg:deb/debian/... or \
                     pkg:deb/ubuntu/...)"
                        .to_string(),
                );
            };
            let distro = distro.to_ascii_lowercase();
            if !matches!(distro.as_str(), "debian" | "ubuntu") {
                return Err(format!(
                    "deb packages of {distro:?} are not followed (debian and ubuntu are)"
                ));
            }
            if !debian_name(name) {
                return Err(format!("{name:?} is not a Debian package name"));
            }
            versioned(&distro, name.to_string(), debian_version(version))
        }
        _ => Ok(None),
    }
}

/// Debian policy 5.6.1: lowercase letters, digits, `+`, `-`, `.`; two characters at
/// least, starting with a letter or digit.
fn debian_name(name: &str) -> bool {
    name.len() >= 2
        && name.len() <= 128
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
}

/// Debian policy 5.6.12: `[epoch:]upstream[-revision]`.
fn debian_version(version: &str) -> bool {
    version.len() <= 128
        && version.starts_with(|c: char| c.is_ascii_digit())
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+~-:".contains(c))
}

/// The item a channel is configured with to record exactly this version.
pub fn pinned_item(item: &CoverageItem) -> String {
    match item.ecosystem.as_str() {
        "pypi" => format!("{}=={}", item.name, item.version),
        "npm" => format!("{}@{}", item.name, item.version),
        _ => format!("{}={}", item.name, item.version),
    }
}

/// Where the service's record of a package version would be: the package itself
/// (`name (pypi)`, `name (npm)`), or the `.deb` of any followed arch and release.
pub fn probe(item: &CoverageItem) -> RecordProbe {
    let (vendor, vendor_prefix, names) = match item.ecosystem.as_str() {
        "pypi" | "npm" => (
            item.ecosystem.clone(),
            false,
            vec![format!("{} ({})", item.name, item.ecosystem)],
        ),
        distro => {
            // `Filename` carries the version without its epoch.
            let bare = item
                .version
                .split_once(':')
                .map_or(item.version.as_str(), |(_, v)| v);
            let names = ["amd64", "arm64", "all"]
                .iter()
                .map(|arch| format!("{}_{bare}_{arch}.deb", item.name))
                .collect();
            if distro == "debian" {
                // One vendor per release: `Debian bookworm`, `Debian trixie`.
                ("Debian ".to_string(), true, names)
            } else {
                ("Ubuntu".to_string(), false, names)
            }
        }
    };
    RecordProbe {
        vendor,
        vendor_prefix,
        names,
        version: item.version.clone(),
    }
}

/// What a request did with each version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Queued {
    /// Queued now for the next refresh.
    pub queued: Vec<CoverageItem>,
    /// Already waiting from an earlier request.
    pub already_queued: Vec<CoverageItem>,
    /// The service already holds records of that version (or recorded it for an earlier
    /// request): nothing to do.
    pub known: Vec<CoverageItem>,
}

/// Queues the versions the service does not know yet.
pub async fn request(
    store: &dyn Store,
    items: &[CoverageItem],
    now: DateTime<Utc>,
) -> Result<Queued, Error> {
    let probes: Vec<RecordProbe> = items.iter().map(probe).collect();
    let known = store.records_exist(&probes).await?;
    let mut out = Queued::default();
    let mut wanted = Vec::new();
    for (item, known) in items.iter().zip(known) {
        if known {
            out.known.push(item.clone());
        } else {
            wanted.push(item.clone());
        }
    }
    let before = store.queue_coverage(&wanted, now).await?;
    for (item, before) in wanted.into_iter().zip(before) {
        match before {
            None | Some(CoverageState::Failed) => out.queued.push(item),
            Some(CoverageState::Queued) => out.already_queued.push(item),
            // A version only wheels stand for has no `name (pypi)` record to probe.
            Some(CoverageState::Done) => out.known.push(item),
        }
    }
    out.known.sort();
    Ok(out)
}

/// The queued versions of one channel split into passes in which each package appears
/// once (a distribution channel pins one version of a name per run).
pub fn passes(fetcher_id: &str, entries: Vec<CoverageEntry>) -> Vec<Vec<CoverageEntry>> {
    if matches!(fetcher_id, "pypi" | "npm") {
        return if entries.is_empty() {
            Vec::new()
        } else {
            vec![entries]
        };
    }
    let mut out: Vec<Vec<CoverageEntry>> = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for entry in entries {
        let n = seen.entry(entry.item.name.clone()).or_default();
        if out.len() <= *n {
            out.push(Vec::new());
        }
        out[*n].push(entry);
        *n += 1;
    }
    out
}

/// Whether a record written by a queue pass is (a file of) `item`'s package: the package
/// record, one of its wheels, or its `.deb`.
pub fn records_item(item: &CoverageItem, executable_name: &str, version: &str) -> bool {
    if version != item.version {
        return false;
    }
    match item.ecosystem.as_str() {
        "pypi" => {
            executable_name == format!("{} (pypi)", item.name)
                || executable_name.strip_suffix(".whl").is_some_and(|stem| {
                    stem.split('-')
                        .next()
                        .is_some_and(|dist| packages::names::pep503(dist) == item.name)
                })
        }
        "npm" => executable_name == format!("{} (npm)", item.name),
        _ => {
            executable_name.ends_with(".deb")
                && executable_name.starts_with(&format!("{}_", item.name))
        }
    }
}

/// Why a queue pass left `item` unrecorded: the first problem of the run that names it, or
/// the channel's silence.
pub fn failure(fetcher_id: &str, item: &CoverageItem, report: &VendorReport) -> String {
    const MAX: usize = 500;
    // The problem that names the version, else the package; a channel that could not be
    // read at all is the reason for every item.
    let named = report
        .problems
        .iter()
        .find(|p| p.message.contains(&item.name) && p.message.contains(&item.version))
        .or_else(|| {
            report
                .problems
                .iter()
                .find(|p| p.message.contains(&item.name))
        })
        .or_else(|| {
            (report.discovered == 0)
                .then(|| report.problems.first())
                .flatten()
        });
    let mut text = match named {
        Some(p) => format!("{}: {}", p.kind.as_str(), p.message),
        None => format!(
            "the {fetcher_id} channel recorded no {} {}",
            item.name, item.version
        ),
    };
    if text.len() > MAX {
        let mut cut = MAX;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}
