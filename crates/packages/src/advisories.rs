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
//!
//! Go's own releases are two OSV packages of the `Go` ecosystem: `stdlib` (the standard
//! library) and `toolchain` (the `go` command). They are kept under those names and match an
//! SBOM's Go distribution component ([`advisory_names`]: `pkg:golang/stdlib@…` as Syft and
//! Trivy write it, `pkg:golang/std@go1.x.y` as cyclonedx-gomod does), whose version may be
//! written `go1.21.3`, `v1.21.3` or `1.21.3` ([`go_release_version`]).
//!
//! Nothing is dropped unsaid: [`read_osv`] lists each affected package it does not keep, and
//! why.

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

/// The OSV package of Go's standard library.
pub const GO_STDLIB: &str = "stdlib";
/// The OSV package of Go's `go` command.
pub const GO_TOOLCHAIN: &str = "toolchain";

/// Whether a Go package name is Go's own distribution: `stdlib` or `toolchain` as OSV names
/// them, `std` as cyclonedx-gomod does, or `go`.
fn is_go_distribution(name: &str) -> bool {
    matches!(name.trim(), GO_STDLIB | GO_TOOLCHAIN | "std" | "go")
}

/// The names an SBOM component's advisories are stored under: the name as its ecosystem
/// compares it, or for Go's distribution (the standard library the binary was built with,
/// which generators list as `stdlib` or `std`) both `stdlib` and `toolchain`. None for a
/// string that is no name of the ecosystem.
pub fn advisory_names(ecosystem: Ecosystem, name: &str) -> Vec<String> {
    if ecosystem == Ecosystem::Go && is_go_distribution(name) {
        return vec![GO_STDLIB.to_string(), GO_TOOLCHAIN.to_string()];
    }
    ecosystem
        .normalize(name)
        .map(|n| vec![n])
        .unwrap_or_default()
}

/// A Go release version as OSV writes it (SemVer without `v`): `go1.21.3`, `v1.21.3` and
/// `1.21.3` are `1.21.3`; `go1.21` is `1.21.0`; `go1.21rc2` is `1.21.0-rc.2`. Anything after
/// a space (`go1.22.1 X:boringcrypto`) is not part of it.
pub fn go_release_version(version: &str) -> String {
    let v = version.split_whitespace().next().unwrap_or_default();
    let v = v.strip_prefix("go").unwrap_or(v);
    let v = v.strip_prefix('v').unwrap_or(v);
    if v.contains('-') || v.contains('+') {
        return v.to_string();
    }
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (base, pre) = v.split_at(split);
    let mut parts: Vec<&str> = base.split('.').filter(|p| !p.is_empty()).collect();
    if parts.is_empty() {
        return v.to_string();
    }
    while parts.len() < 3 {
        parts.push("0");
    }
    let mut out = parts.join(".");
    if !pre.is_empty() {
        let digits = pre.trim_start_matches(|c: char| !c.is_ascii_digit());
        let word = &pre[..pre.len() - digits.len()];
        out.push('-');
        out.push_str(word);
        if !digits.is_empty() {
            out.push('.');
            out.push_str(digits);
        }
    }
    out
}

/// An affected package of an OSV document that is not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The OSV ecosystem as written (`Maven`, `Debian:11`), empty when none.
    pub ecosystem: String,
    pub name: String,
    pub reason: SkipReason,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum SkipReason {
    /// An ecosystem other than npm, PyPI and Go.
    OtherEcosystem,
    /// Not a package name of its ecosystem (the problem).
    InvalidName(String),
    /// An `affected` entry without a `package` (OSV allows that for some databases).
    NoPackage,
}

impl Skipped {
    /// The reason in a few words, the same for every package skipped for it (for counting).
    pub fn category(&self) -> String {
        let base = self.ecosystem.split(':').next().unwrap_or_default();
        match &self.reason {
            SkipReason::OtherEcosystem => {
                format!("ecosystem {base} (only npm, PyPI and Go are analysed)")
            }
            SkipReason::InvalidName(_) => format!("{base} package names that are not valid"),
            SkipReason::NoPackage => "affected entries naming no package".to_string(),
        }
    }
}

/// One OSV document read: the advisory (none when it names no npm, PyPI or Go package) and
/// each affected package not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Osv {
    pub id: String,
    pub advisory: Option<Advisory>,
    pub skipped: Vec<Skipped>,
}

/// Reads one OSV document. Affected packages of other ecosystems are dropped; a document
/// left with none is `Ok(None)`. [`read_osv`] says what was dropped.
pub fn parse_osv(json: &[u8]) -> Result<Option<Advisory>, AdvisoryError> {
    read_osv(json).map(|osv| osv.advisory)
}

/// Reads one OSV document, listing what it does not keep.
pub fn read_osv(json: &[u8]) -> Result<Osv, AdvisoryError> {
    let doc: Doc = serde_json::from_slice(json).map_err(|e| {
        if e.to_string().starts_with("recursion limit exceeded") {
            AdvisoryError(format!(
                "not an OSV document: it nests deeper than 128 levels, the most read (line {} column {})",
                e.line(),
                e.column()
            ))
        } else {
            AdvisoryError(format!("not an OSV document: {e}"))
        }
    })?;
    if doc.id.trim().is_empty() {
        return Err(AdvisoryError("an OSV document needs an id".into()));
    }
    let mut affected = Vec::new();
    let mut skipped = Vec::new();
    for a in doc.affected {
        let Some(package) = a.package else {
            skipped.push(Skipped {
                ecosystem: String::new(),
                name: String::new(),
                reason: SkipReason::NoPackage,
            });
            continue;
        };
        // OSV writes ecosystem variants as `Name:suffix` (e.g. `Debian:11`).
        let base = package.ecosystem.split(':').next().unwrap_or_default();
        let Some(ecosystem) = Ecosystem::from_osv(base) else {
            skipped.push(Skipped {
                ecosystem: package.ecosystem,
                name: package.name,
                reason: SkipReason::OtherEcosystem,
            });
            continue;
        };
        let name = match ecosystem.normalize(&package.name) {
            Ok(name) => name,
            Err(_) if ecosystem == Ecosystem::Go && is_go_distribution(&package.name) => {
                package.name.trim().to_string()
            }
            Err(e) => {
                skipped.push(Skipped {
                    ecosystem: package.ecosystem,
                    name: package.name,
                    reason: SkipReason::InvalidName(e.why),
                });
                continue;
            }
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
        return Ok(Osv {
            id: doc.id,
            advisory: None,
            skipped,
        });
    }
    let summary = doc
        .summary
        .or_else(|| doc.details.map(|d| d.chars().take(200).collect()))
        .unwrap_or_default();
    Ok(Osv {
        id: doc.id.clone(),
        advisory: Some(Advisory {
            id: doc.id,
            aliases: doc.aliases,
            summary,
            modified: doc.modified,
            affected,
        }),
        skipped,
    })
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
        let release;
        let version = if self.ecosystem == Ecosystem::Go && is_go_distribution(&self.name) {
            release = go_release_version(version);
            release.as_str()
        } else {
            version
        };
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

    /// GO-2022-0229 as Go's vulnerability database publishes it: the record of
    /// <https://vuln.go.dev/ID/GO-2022-0229.json> (OSV schema 1.3.1, as of its 2023-04-03
    /// modification), unchanged.
    const GO_2022_0229: &str = include_str!("../testdata/osv/GO-2022-0229.json");

    #[test]
    fn go_standard_library_advisories_are_kept_and_match_go_releases() {
        let osv = read_osv(GO_2022_0229.as_bytes()).unwrap();
        assert!(osv.skipped.is_empty(), "{:?}", osv.skipped);
        let advisory = osv.advisory.unwrap();
        let names: Vec<&str> = advisory.affected.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["stdlib", "golang.org/x/crypto"]);
        let stdlib = &advisory.affected[0];
        // As generators write the Go version: Trivy `v1.13.5`, Syft `go1.13.5` (purl
        // `1.13.5`), cyclonedx-gomod `go1.13.5`. A 1.13 release candidate comes before the
        // range's `introduced: 1.13.0`.
        for v in [
            "v1.13.5",
            "go1.13.5",
            "1.13.5",
            "go1.13",
            "go1.12.15",
            "go1.12rc1",
        ] {
            assert!(stdlib.affects(v), "{v}");
        }
        for v in [
            "v1.13.7",
            "go1.13.7",
            "1.14.0",
            "go1.21.3",
            "go1.12.16",
            "go1.13rc1",
        ] {
            assert!(!stdlib.affects(v), "{v}");
        }
        assert_eq!(
            advisory_names(Ecosystem::Go, "stdlib"),
            ["stdlib", "toolchain"]
        );
        assert_eq!(
            advisory_names(Ecosystem::Go, "std"),
            ["stdlib", "toolchain"]
        );
        assert_eq!(
            advisory_names(Ecosystem::Go, "github.com/gorilla/mux"),
            ["github.com/gorilla/mux"]
        );
        assert!(advisory_names(Ecosystem::Go, "nodot").is_empty());
        assert_eq!(go_release_version("go1.21rc2"), "1.21.0-rc.2");
        assert_eq!(go_release_version("go1.22.1 X:boringcrypto"), "1.22.1");
        let toolchain = GO_2022_0229.replace(r#""name":"stdlib""#, r#""name":"toolchain""#);
        let advisory = parse_osv(toolchain.as_bytes()).unwrap().unwrap();
        assert_eq!(advisory.affected[0].name, "toolchain");
        assert!(advisory.affected[0].affects("go1.13.5"));
    }

    #[test]
    fn what_is_not_kept_is_said() {
        let json = br#"{"id":"MIX-1","affected":[
            {"package":{"ecosystem":"Maven","name":"org.x:y"}},
            {"package":{"ecosystem":"Go","name":"not-a-module"}},
            {"ranges":[]},
            {"package":{"ecosystem":"npm","name":"lodash"},"versions":["1.0.0"]}]}"#;
        let osv = read_osv(json).unwrap();
        assert_eq!(osv.advisory.unwrap().affected.len(), 1);
        let categories: Vec<String> = osv.skipped.iter().map(Skipped::category).collect();
        assert_eq!(
            categories,
            [
                "ecosystem Maven (only npm, PyPI and Go are analysed)",
                "Go package names that are not valid",
                "affected entries naming no package",
            ]
        );
        // A range event's value is read as any JSON value, however nested: bounded.
        let deep = format!(
            r#"{{"id":"X","affected":[{{"package":{{"ecosystem":"npm","name":"a"}},"ranges":[{{"type":"SEMVER","events":[{{"introduced":{}1{}}}]}}]}}]}}"#,
            "[".repeat(5000),
            "]".repeat(5000)
        );
        let e = read_osv(deep.as_bytes()).unwrap_err();
        assert!(e.0.contains("deeper than 128 levels"), "{e}");
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
