//! OSV advisories (<https://ossf.github.io/osv-schema/>): reading the JSON documents OSV
//! publishes (one per advisory, also bundled per ecosystem in `all.zip`) and deciding which
//! versions a document affects. Only the `npm`, `PyPI` and `Go` ecosystems are kept.
//!
//! A version is affected when it is listed in `affected[].versions`, or falls in a range of
//! type `SEMVER` or `ECOSYSTEM`: the range's events, ordered by version, open (`introduced`,
//! `0` meaning every version) and close (`fixed`: that version and later are not affected;
//! `last_affected`: later versions are not) the affected stretches. Versions compare by the
//! ecosystem's rules: PEP 440 for PyPI, SemVer for npm and Go (pseudo-versions are SemVer
//! pre-releases; Go's leading `v` is ignored).

use std::cmp::Ordering;

use serde::Deserialize;

use crate::names::Ecosystem;

/// One advisory, reduced to what matching and reporting need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advisory {
    pub id: String,
    pub aliases: Vec<String>,
    pub summary: String,
    pub modified: String,
    pub affected: Vec<Affected>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Affected {
    pub ecosystem: Ecosystem,
    /// As the ecosystem compares names.
    pub name: String,
    pub versions: Vec<String>,
    /// Each range's events, in document order.
    pub ranges: Vec<Vec<Event>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Introduced(String),
    Fixed(String),
    LastAffected(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AdvisoryError(pub String);

#[derive(Deserialize)]
struct Doc {
    id: String,
    #[serde(default)]
    modified: String,
    #[serde(default)]
    aliases: Vec<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    details: Option<String>,
    #[serde(default)]
    affected: Vec<DocAffected>,
}

#[derive(Deserialize)]
struct DocAffected {
    package: Option<DocPackage>,
    #[serde(default)]
    versions: Vec<String>,
    #[serde(default)]
    ranges: Vec<DocRange>,
}

#[derive(Deserialize)]
struct DocPackage {
    ecosystem: String,
    name: String,
}

#[derive(Deserialize)]
struct DocRange {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    events: Vec<serde_json::Map<String, serde_json::Value>>,
}

/// Reads one OSV document. Affected packages of other ecosystems are dropped; a document
/// left with none is `Ok(None)`.
pub fn parse_osv(json: &[u8]) -> Result<Option<Advisory>, AdvisoryError> {
    let doc: Doc = serde_json::from_slice(json)
        .map_err(|e| AdvisoryError(format!("not an OSV document: {e}")))?;
    if doc.id.trim().is_empty() {
        return Err(AdvisoryError("an OSV document needs an id".into()));
    }
    let mut affected = Vec::new();
    for a in doc.affected {
        let Some(package) = a.package else { continue };
        // OSV writes ecosystem variants as `Name:suffix` (e.g. `Debian:11`).
        let base = package.ecosystem.split(':').next().unwrap_or_default();
        let Some(ecosystem) = Ecosystem::from_osv(base) else {
            continue;
        };
        let Ok(name) = ecosystem.normalize(&package.name) else {
            continue;
        };
        let ranges = a
            .ranges
            .iter()
            .filter(|r| r.kind == "SEMVER" || r.kind == "ECOSYSTEM")
            .map(|r| {
                r.events
                    .iter()
                    .filter_map(|e| {
                        let (k, v) = e.iter().next()?;
                        let v = v.as_str()?.to_string();
                        match k.as_str() {
                            "introduced" => Some(Event::Introduced(v)),
                            "fixed" => Some(Event::Fixed(v)),
                            "last_affected" => Some(Event::LastAffected(v)),
                            _ => None,
                        }
                    })
                    .collect()
            })
            .collect();
        affected.push(Affected {
            ecosystem,
            name,
            versions: a.versions,
            ranges,
        });
    }
    if affected.is_empty() {
        return Ok(None);
    }
    let summary = doc
        .summary
        .or_else(|| doc.details.map(|d| d.chars().take(200).collect()))
        .unwrap_or_default();
    Ok(Some(Advisory {
        id: doc.id,
        aliases: doc.aliases,
        summary,
        modified: doc.modified,
        affected,
    }))
}

/// Compares versions by the ecosystem's rules.
pub fn compare_versions(ecosystem: Ecosystem, a: &str, b: &str) -> Ordering {
    match ecosystem {
        Ecosystem::Go => model::version::compare(
            "go",
            a.trim().trim_start_matches('v'),
            b.trim().trim_start_matches('v'),
        ),
        e => model::version::compare(e.as_str(), a, b),
    }
}

impl Affected {
    /// Whether `version` of this package is affected.
    pub fn affects(&self, version: &str) -> bool {
        let version = version.trim();
        if version.is_empty() {
            return false;
        }
        let e = self.ecosystem;
        let same = |a: &str, b: &str| compare_versions(e, a, b) == Ordering::Equal;
        if self.versions.iter().any(|v| same(v, version)) {
            return true;
        }
        self.ranges
            .iter()
            .any(|events| in_range(e, events, version))
    }
}

fn in_range(e: Ecosystem, events: &[Event], version: &str) -> bool {
    let key = |ev: &Event| match ev {
        Event::Introduced(v) | Event::Fixed(v) | Event::LastAffected(v) => v.clone(),
    };
    let mut sorted: Vec<&Event> = events.iter().collect();
    sorted.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        match (ka.as_str(), kb.as_str()) {
            ("0", "0") => Ordering::Equal,
            ("0", _) => Ordering::Less,
            (_, "0") => Ordering::Greater,
            _ => compare_versions(e, &ka, &kb),
        }
    });
    let cmp = |bound: &str| compare_versions(e, version, bound);
    let mut affected = false;
    for event in sorted {
        match event {
            Event::Introduced(v) if v == "0" || cmp(v) != Ordering::Less => affected = true,
            Event::Fixed(v) if cmp(v) != Ordering::Less => affected = false,
            Event::LastAffected(v) if cmp(v) == Ordering::Greater => affected = false,
            _ => {}
        }
    }
    affected
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(ecosystem: &str, name: &str, ranges: &str, versions: &str) -> Advisory {
        let json = format!(
            r#"{{"id":"GHSA-test","modified":"2024-01-01T00:00:00Z","aliases":["CVE-2024-0001"],
            "summary":"bad thing","affected":[{{"package":{{"ecosystem":"{ecosystem}","name":"{name}"}},
            "ranges":{ranges},"versions":{versions}}},
            {{"package":{{"ecosystem":"Maven","name":"x:y"}},"versions":["1"]}}]}}"#
        );
        parse_osv(json.as_bytes()).unwrap().unwrap()
    }

    #[test]
    fn semver_ranges_for_npm() {
        let a = doc(
            "npm",
            "lodash",
            r#"[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"4.17.21"}]}]"#,
            "[]",
        );
        assert_eq!(a.affected.len(), 1, "Maven dropped");
        let lodash = &a.affected[0];
        assert!(lodash.affects("4.17.20"));
        assert!(lodash.affects("1.0.0"));
        assert!(!lodash.affects("4.17.21"));
        assert!(!lodash.affects("5.0.0"));
    }

    #[test]
    fn pep440_ranges_and_last_affected() {
        let a = doc(
            "PyPI",
            "Django",
            r#"[{"type":"ECOSYSTEM","events":[{"introduced":"4.2"},{"fixed":"4.2.11"},{"introduced":"5.0a1"},{"last_affected":"5.0.2"}]}]"#,
            r#"["3.2.1"]"#,
        );
        let d = &a.affected[0];
        assert_eq!(d.name, "django");
        assert!(d.affects("4.2.10"));
        assert!(!d.affects("4.2rc1"), "before introduced");
        assert!(!d.affects("4.2.11"));
        assert!(d.affects("5.0b2"));
        assert!(d.affects("5.0.2"));
        assert!(!d.affects("5.0.3"));
        assert!(d.affects("3.2.1"), "listed version");
        assert!(!d.affects("3.2.2"));
    }

    #[test]
    fn go_pseudo_versions() {
        let a = doc(
            "Go",
            "golang.org/x/net",
            r#"[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"0.17.0"}]}]"#,
            "[]",
        );
        let net = &a.affected[0];
        assert!(net.affects("v0.0.0-20220906165146-f3363e06e74c"));
        assert!(net.affects("v0.16.0"));
        assert!(!net.affects("v0.17.0"));
    }

    #[test]
    fn documents_without_supported_packages() {
        let json =
            br#"{"id":"DSA-1","affected":[{"package":{"ecosystem":"Debian:11","name":"x"}}]}"#;
        assert_eq!(parse_osv(json).unwrap(), None);
        assert!(parse_osv(b"[]").is_err());
        assert!(parse_osv(br#"{"id":""}"#).is_err());
    }
}
