//! Software bills of materials, parsed in memory: CycloneDX (JSON and XML; 1.2 to 1.6, the
//! service's contract names 1.4 to 1.6), SPDX 2.2/2.3 (JSON and tag-value) and SPDX 3.0
//! (JSON-LD). The format is detected from the content. Each format's packages become
//! [`Component`]s: name, version and ecosystem from the package URL when there is one
//! (<https://github.com/package-url/purl-spec>), else from the fields; nested CycloneDX
//! components are walked; the same package listed twice is one component.
//!
//! Field names follow the specifications: CycloneDX `components[].{name, group, version,
//! purl, hashes[].{alg, content}, components}`; SPDX 2 `packages[].{name, versionInfo,
//! externalRefs[].{referenceType, referenceLocator}, checksums[].{algorithm,
//! checksumValue}}` and the tag-value tags `PackageName`, `PackageVersion`, `ExternalRef`,
//! `PackageChecksum`; SPDX 3 `@graph[]` elements of type `software_Package` with `name`,
//! `software_packageVersion`, `software_packageUrl`, `externalIdentifier[]` and
//! `verifiedUsing[].{algorithm, hashValue}`.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;

use crate::names::Ecosystem;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SbomFormat {
    CycloneDx,
    Spdx,
}

impl SbomFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            SbomFormat::CycloneDx => "CycloneDX",
            SbomFormat::Spdx => "SPDX",
        }
    }
}

/// A parsed bill of materials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sbom {
    pub format: SbomFormat,
    /// The format's version as the document states it (`1.5`, `SPDX-2.3`, `3.0`).
    pub spec_version: String,
    /// How the document was written: `json`, `xml`, `tag-value` or `json-ld`.
    pub encoding: &'static str,
    pub components: Vec<Component>,
}

/// One package of the bill of materials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    pub name: String,
    pub version: String,
    /// `npm`, `pypi` or `go` for the analysed ecosystems, else the package URL type
    /// (`maven`, `deb`, …), or `unknown`.
    pub ecosystem: String,
    /// The strongest digest listed: SHA-256, else SHA-1, else MD5 (lowercase hex).
    pub hash: Option<String>,
    pub purl: Option<String>,
}

impl Component {
    pub fn analysed_ecosystem(&self) -> Option<Ecosystem> {
        self.ecosystem.parse().ok()
    }
}

/// Why a body is not a bill of materials this parser reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SbomError(pub String);

const NEITHER: &str =
    "the body is neither CycloneDX (JSON or XML) nor SPDX (JSON, tag-value or 3.0 JSON-LD)";

/// Parses a bill of materials, detecting its format.
pub fn parse(body: &[u8]) -> Result<Sbom, SbomError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| SbomError(format!("the body is not UTF-8 text ({e}); {NEITHER}")))?;
    let text = text.trim_start_matches('\u{feff}');
    let start = text.trim_start();
    match start.as_bytes().first() {
        Some(b'{') => parse_json(text),
        Some(b'<') => parse_xml(text),
        Some(_)
            if start
                .lines()
                .take(50)
                .any(|l| l.trim_start().starts_with("SPDXVersion:")) =>
        {
            parse_tag_value(text)
        }
        Some(_) => Err(SbomError(NEITHER.into())),
        None => Err(SbomError(format!("the body is empty; {NEITHER}"))),
    }
}

/// Every field of the JSON formats the parser reads, so one pass reads any of them.
#[derive(Deserialize)]
struct AnyJson<'a> {
    #[serde(rename = "bomFormat", borrow, default)]
    bom_format: Option<Cow<'a, str>>,
    #[serde(rename = "specVersion", borrow, default)]
    spec_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    components: Option<Vec<CdxComponent<'a>>>,
    #[serde(rename = "spdxVersion", borrow, default)]
    spdx_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    packages: Option<Vec<SpdxPackage<'a>>>,
    #[serde(rename = "@context", default)]
    context: Option<serde_json::Value>,
    #[serde(rename = "@graph", borrow, default)]
    graph: Option<Vec<Spdx3Element<'a>>>,
}

#[derive(Deserialize)]
struct CdxComponent<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    group: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    purl: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    hashes: Vec<CdxHash<'a>>,
    #[serde(borrow, default)]
    components: Vec<CdxComponent<'a>>,
}

#[derive(Deserialize)]
struct CdxHash<'a> {
    #[serde(borrow)]
    alg: Cow<'a, str>,
    #[serde(borrow)]
    content: Cow<'a, str>,
}

#[derive(Deserialize)]
struct SpdxPackage<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(rename = "versionInfo", borrow, default)]
    version_info: Option<Cow<'a, str>>,
    #[serde(rename = "externalRefs", borrow, default)]
    external_refs: Vec<SpdxRef<'a>>,
    #[serde(borrow, default)]
    checksums: Vec<SpdxChecksum<'a>>,
}

#[derive(Deserialize)]
struct SpdxRef<'a> {
    #[serde(rename = "referenceType", borrow, default)]
    reference_type: Option<Cow<'a, str>>,
    #[serde(rename = "referenceLocator", borrow, default)]
    reference_locator: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct SpdxChecksum<'a> {
    #[serde(borrow)]
    algorithm: Cow<'a, str>,
    #[serde(rename = "checksumValue", borrow)]
    checksum_value: Cow<'a, str>,
}

#[derive(Deserialize)]
struct Spdx3Element<'a> {
    #[serde(rename = "type", alias = "@type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(
        rename = "software_packageVersion",
        alias = "packageVersion",
        borrow,
        default
    )]
    version: Option<Cow<'a, str>>,
    #[serde(rename = "software_packageUrl", alias = "packageUrl", borrow, default)]
    package_url: Option<Cow<'a, str>>,
    #[serde(rename = "externalIdentifier", borrow, default)]
    external_identifier: Vec<Spdx3Identifier<'a>>,
    #[serde(rename = "verifiedUsing", borrow, default)]
    verified_using: Vec<Spdx3Hash<'a>>,
    #[serde(rename = "creationInfo", default)]
    creation_info: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Spdx3Identifier<'a> {
    #[serde(rename = "externalIdentifierType", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    identifier: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Spdx3Hash<'a> {
    #[serde(borrow, default)]
    algorithm: Option<Cow<'a, str>>,
    #[serde(rename = "hashValue", borrow, default)]
    hash_value: Option<Cow<'a, str>>,
}

fn parse_json(text: &str) -> Result<Sbom, SbomError> {
    let doc: AnyJson<'_> = serde_json::from_str(text).map_err(|e| {
        SbomError(format!(
            "invalid JSON at line {} column {}: {e}",
            e.line(),
            e.column()
        ))
    })?;
    let mut out = Merger::default();
    if doc.bom_format.as_deref() == Some("CycloneDX") {
        let version = doc.spec_version.as_deref().unwrap_or_default().to_string();
        check_cyclonedx_version(&version)?;
        // Depth first, in document order.
        let mut stack: Vec<&CdxComponent<'_>> = doc.components.iter().flatten().rev().collect();
        while let Some(c) = stack.pop() {
            stack.extend(c.components.iter().rev());
            let hashes = c
                .hashes
                .iter()
                .map(|h| (h.alg.as_ref(), h.content.as_ref()));
            out.add(
                c.name.as_deref(),
                c.group.as_deref(),
                c.version.as_deref(),
                c.purl.as_deref(),
                hashes,
            );
        }
        return Ok(out.finish(SbomFormat::CycloneDx, version, "json"));
    }
    if let Some(version) = doc.spdx_version.as_deref() {
        if !matches!(version, "SPDX-2.2" | "SPDX-2.3") {
            return Err(SbomError(format!(
                "spdxVersion {version:?} is not supported; SPDX-2.2 and SPDX-2.3 are (and SPDX 3.0 JSON-LD)"
            )));
        }
        for p in doc.packages.iter().flatten() {
            let purl = p.external_refs.iter().find_map(|r| {
                (r.reference_type.as_deref() == Some("purl"))
                    .then_some(r.reference_locator.as_deref())
                    .flatten()
            });
            let hashes = p
                .checksums
                .iter()
                .map(|c| (c.algorithm.as_ref(), c.checksum_value.as_ref()));
            out.add(
                p.name.as_deref(),
                None,
                p.version_info.as_deref(),
                purl,
                hashes,
            );
        }
        return Ok(out.finish(SbomFormat::Spdx, version.to_string(), "json"));
    }
    let spdx3 = doc
        .context
        .as_ref()
        .is_some_and(|c| c.to_string().contains("spdx.org/rdf/3."));
    if spdx3 && let Some(graph) = &doc.graph {
        let version = graph
            .iter()
            .find_map(|e| {
                e.creation_info
                    .as_ref()
                    .and_then(|c| c.get("specVersion"))
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "3.0".to_string());
        for e in graph {
            let kind = e.kind.as_deref().unwrap_or_default();
            if !(kind == "software_Package" || kind.ends_with("/Package") || kind == "Package") {
                continue;
            }
            let purl = e.package_url.as_deref().or_else(|| {
                e.external_identifier.iter().find_map(|i| {
                    (i.kind.as_deref() == Some("packageUrl"))
                        .then_some(i.identifier.as_deref())
                        .flatten()
                })
            });
            let hashes = e
                .verified_using
                .iter()
                .filter_map(|h| Some((h.algorithm.as_deref()?, h.hash_value.as_deref()?)));
            out.add(e.name.as_deref(), None, e.version.as_deref(), purl, hashes);
        }
        return Ok(out.finish(SbomFormat::Spdx, version, "json-ld"));
    }
    Err(SbomError(format!(
        "{NEITHER}: a JSON body needs bomFormat \"CycloneDX\", an spdxVersion, or an SPDX 3 @context and @graph"
    )))
}

fn check_cyclonedx_version(version: &str) -> Result<(), SbomError> {
    if matches!(version, "1.2" | "1.3" | "1.4" | "1.5" | "1.6") {
        Ok(())
    } else {
        Err(SbomError(format!(
            "CycloneDX specVersion {version:?} is not supported; 1.4, 1.5 and 1.6 are"
        )))
    }
}

fn parse_xml(text: &str) -> Result<Sbom, SbomError> {
    let options = roxmltree::ParsingOptions {
        allow_dtd: false,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(text, options)
        .map_err(|e| SbomError(format!("invalid XML: {e}")))?;
    let root = doc.root_element();
    let ns = root.tag_name().namespace().unwrap_or_default();
    let Some(version) = ns.strip_prefix("http://cyclonedx.org/schema/bom/") else {
        return Err(SbomError(format!(
            "{NEITHER}: an XML body must be a CycloneDX <bom> in the http://cyclonedx.org/schema/bom/1.x namespace"
        )));
    };
    check_cyclonedx_version(version)?;
    let child_text = |node: roxmltree::Node<'_, '_>, name: &str| {
        node.children()
            .find(|c| c.tag_name().name() == name)
            .and_then(|c| c.text())
            .map(str::trim)
            .map(str::to_string)
    };
    let mut out = Merger::default();
    // Components anywhere except the document's own subject under <metadata>.
    for node in root
        .descendants()
        .filter(|n| n.tag_name().name() == "component")
    {
        if node.ancestors().any(|a| a.tag_name().name() == "metadata") {
            continue;
        }
        let hashes: Vec<(String, String)> = node
            .children()
            .filter(|c| c.tag_name().name() == "hashes")
            .flat_map(|h| h.children().filter(|c| c.tag_name().name() == "hash"))
            .filter_map(|h| {
                Some((
                    h.attribute("alg")?.to_string(),
                    h.text()?.trim().to_string(),
                ))
            })
            .collect();
        out.add(
            child_text(node, "name").as_deref(),
            child_text(node, "group").as_deref(),
            child_text(node, "version").as_deref(),
            child_text(node, "purl").as_deref(),
            hashes.iter().map(|(a, h)| (a.as_str(), h.as_str())),
        );
    }
    Ok(out.finish(SbomFormat::CycloneDx, version.to_string(), "xml"))
}

fn parse_tag_value(text: &str) -> Result<Sbom, SbomError> {
    #[derive(Default)]
    struct Pending {
        name: Option<String>,
        version: Option<String>,
        purl: Option<String>,
        hashes: Vec<(String, String)>,
    }
    let mut out = Merger::default();
    let mut version = None;
    let mut current: Option<Pending> = None;
    let mut in_text = false;
    let flush = |p: Option<Pending>, out: &mut Merger| {
        if let Some(p) = p {
            out.add(
                p.name.as_deref(),
                None,
                p.version.as_deref(),
                p.purl.as_deref(),
                p.hashes.iter().map(|(a, h)| (a.as_str(), h.as_str())),
            );
        }
    };
    for line in text.lines() {
        // Multi-line values are wrapped in <text>…</text>.
        if in_text {
            in_text = !line.contains("</text>");
            continue;
        }
        let Some((tag, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if value.starts_with("<text>") && !value.contains("</text>") {
            in_text = true;
        }
        match tag.trim() {
            "SPDXVersion" => version = Some(value.to_string()),
            "PackageName" => {
                flush(current.take(), &mut out);
                current = Some(Pending {
                    name: Some(value.to_string()),
                    ..Pending::default()
                });
            }
            // A file or snippet section ends the package's own tags.
            "FileName" | "SnippetSPDXID" => flush(current.take(), &mut out),
            "PackageVersion" => {
                if let Some(p) = current.as_mut() {
                    p.version = Some(value.to_string());
                }
            }
            "ExternalRef" => {
                let mut parts = value.split_whitespace();
                if let (Some(_), Some("purl"), Some(locator), Some(p)) =
                    (parts.next(), parts.next(), parts.next(), current.as_mut())
                {
                    p.purl = Some(locator.to_string());
                }
            }
            "PackageChecksum" => {
                if let (Some((alg, hex)), Some(p)) = (value.split_once(':'), current.as_mut()) {
                    p.hashes
                        .push((alg.trim().to_string(), hex.trim().to_string()));
                }
            }
            _ => {}
        }
    }
    flush(current.take(), &mut out);
    let version = version.unwrap_or_default();
    if !matches!(version.as_str(), "SPDX-2.2" | "SPDX-2.3") {
        return Err(SbomError(format!(
            "SPDXVersion {version:?} is not supported; SPDX-2.2 and SPDX-2.3 are"
        )));
    }
    Ok(out.finish(SbomFormat::Spdx, version, "tag-value"))
}

/// Collects components, merging the same package (ecosystem, name as the ecosystem
/// compares it, version) listed more than once.
#[derive(Default)]
struct Merger {
    components: Vec<Component>,
    index: HashMap<(String, String, String), usize>,
}

impl Merger {
    fn add<'h>(
        &mut self,
        name: Option<&str>,
        group: Option<&str>,
        version: Option<&str>,
        purl: Option<&str>,
        hashes: impl Iterator<Item = (&'h str, &'h str)>,
    ) {
        let parsed = purl.and_then(Purl::parse);
        let (name, version, ecosystem) = match &parsed {
            Some(p) => (
                p.name.clone(),
                p.version
                    .clone()
                    .or(version.map(str::to_string))
                    .unwrap_or_default(),
                Ecosystem::from_purl_type(&p.ty)
                    .map_or_else(|| p.ty.clone(), |e| e.as_str().to_string()),
            ),
            None => {
                let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) else {
                    return;
                };
                let name = match group.map(str::trim).filter(|g| !g.is_empty()) {
                    Some(g) => format!("{g}/{name}"),
                    None => name.to_string(),
                };
                (
                    name,
                    version.unwrap_or_default().trim().to_string(),
                    "unknown".to_string(),
                )
            }
        };
        let hash = best_hash(hashes);
        let key_name = ecosystem
            .parse::<Ecosystem>()
            .ok()
            .and_then(|e| e.normalize(&name).ok())
            .unwrap_or_else(|| name.clone());
        let key = (ecosystem.clone(), key_name, version.clone());
        match self.index.get(&key) {
            Some(&i) => {
                let existing = &mut self.components[i];
                if existing.hash.is_none() {
                    existing.hash = hash;
                }
                if existing.purl.is_none() {
                    existing.purl = purl.map(str::to_string);
                }
            }
            None => {
                self.index.insert(key, self.components.len());
                self.components.push(Component {
                    name,
                    version,
                    ecosystem,
                    hash,
                    purl: purl.map(str::to_string),
                });
            }
        }
    }

    fn finish(self, format: SbomFormat, spec_version: String, encoding: &'static str) -> Sbom {
        Sbom {
            format,
            spec_version,
            encoding,
            components: self.components,
        }
    }
}

/// The strongest well-formed digest: SHA-256, then SHA-1, then MD5.
fn best_hash<'h>(hashes: impl Iterator<Item = (&'h str, &'h str)>) -> Option<String> {
    let mut best: Option<(u8, String)> = None;
    for (alg, hex) in hashes {
        let alg: String = alg
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        let (strength, len) = match alg.as_str() {
            "sha256" => (3, 64),
            "sha1" => (2, 40),
            "md5" => (1, 32),
            _ => continue,
        };
        let hex = hex.trim();
        if hex.len() != len || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        if best.as_ref().is_none_or(|(s, _)| strength > *s) {
            best = Some((strength, hex.to_ascii_lowercase()));
        }
    }
    best.map(|(_, h)| h)
}

/// A package URL: `pkg:type/namespace/name@version?qualifiers#subpath`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purl {
    pub ty: String,
    /// The namespace and name joined by `/` (`@scope/name` for npm, the module path for Go).
    pub name: String,
    pub version: Option<String>,
}

impl Purl {
    pub fn parse(purl: &str) -> Option<Self> {
        let rest = purl.trim().strip_prefix("pkg:")?.trim_start_matches('/');
        let rest = rest.split('#').next()?;
        let rest = rest.split('?').next()?;
        let (ty, path) = rest.split_once('/')?;
        // The version separator is the last `@` that does not start a path segment (an
        // unencoded npm scope).
        let at = path
            .char_indices()
            .rev()
            .find(|&(i, c)| c == '@' && i > 0 && !path[..i].ends_with('/'))
            .map(|(i, _)| i);
        let (path, version) = match at {
            Some(i) => (&path[..i], Some(decode(&path[i + 1..]))),
            None => (path, None),
        };
        let name = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(decode)
            .collect::<Vec<_>>()
            .join("/");
        if ty.is_empty() || name.is_empty() {
            return None;
        }
        Some(Self {
            ty: ty.to_ascii_lowercase(),
            name,
            version: version.filter(|v| !v.is_empty()),
        })
    }
}

/// Percent-decoding; invalid escapes are kept as written.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn purls() {
        let p = Purl::parse("pkg:npm/%40babel/core@7.24.0").unwrap();
        assert_eq!(
            (p.ty.as_str(), p.name.as_str(), p.version.as_deref()),
            ("npm", "@babel/core", Some("7.24.0"))
        );
        let p = Purl::parse("pkg:npm/@types/node@20.1.0?x=y#sub").unwrap();
        assert_eq!(p.name, "@types/node");
        let p = Purl::parse("pkg:golang/github.com/gorilla/mux@v1.8.0").unwrap();
        assert_eq!(
            (p.ty.as_str(), p.name.as_str()),
            ("golang", "github.com/gorilla/mux")
        );
        let p = Purl::parse("pkg:pypi/requests").unwrap();
        assert_eq!(p.version, None);
        assert!(Purl::parse("not-a-purl").is_none());
    }

    #[test]
    fn cyclonedx_json_nested_and_duplicates() {
        let body = format!(
            r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","metadata":{{"component":{{"name":"app"}}}},
            "components":[
              {{"type":"library","name":"requests","version":"2.31.0","purl":"pkg:pypi/requests@2.31.0",
                "hashes":[{{"alg":"MD5","content":"{md5}"}},{{"alg":"SHA-256","content":"{SHA}"}}],
                "components":[{{"name":"urllib3","version":"2.0.0","purl":"pkg:pypi/urllib3@2.0.0"}}]}},
              {{"name":"Requests","version":"2.31.0","purl":"pkg:pypi/Requests@2.31.0"}},
              {{"name":"core","group":"@babel","version":"7.0.0"}}
            ]}}"#,
            md5 = "0".repeat(32)
        );
        let sbom = parse(body.as_bytes()).unwrap();
        assert_eq!(sbom.format, SbomFormat::CycloneDx);
        assert_eq!(sbom.spec_version, "1.5");
        assert_eq!(sbom.components.len(), 3, "{:?}", sbom.components);
        let req = sbom
            .components
            .iter()
            .find(|c| c.name == "requests")
            .unwrap();
        assert_eq!(req.hash.as_deref(), Some(SHA));
        assert_eq!(req.ecosystem, "pypi");
        assert!(sbom.components.iter().any(|c| c.name == "urllib3"));
        assert!(
            sbom.components
                .iter()
                .any(|c| c.name == "@babel/core" && c.ecosystem == "unknown")
        );
    }

    #[test]
    fn cyclonedx_xml() {
        let body = format!(
            r#"<?xml version="1.0"?><bom xmlns="http://cyclonedx.org/schema/bom/1.4" version="1">
            <metadata><component type="application"><name>app</name></component></metadata>
            <components><component type="library"><name>lodash</name><version>4.17.21</version>
            <purl>pkg:npm/lodash@4.17.21</purl><hashes><hash alg="SHA-256">{SHA}</hash></hashes>
            <components><component type="library"><name>x</name><purl>pkg:npm/x@1.0.0</purl></component></components>
            </component></components></bom>"#
        );
        let sbom = parse(body.as_bytes()).unwrap();
        assert_eq!(sbom.encoding, "xml");
        assert_eq!(sbom.components.len(), 2);
        assert_eq!(sbom.components[0].hash.as_deref(), Some(SHA));
    }

    #[test]
    fn spdx_json_tag_value_and_3() {
        let json = format!(
            r#"{{"spdxVersion":"SPDX-2.3","packages":[{{"SPDXID":"SPDXRef-1","name":"lodash","versionInfo":"4.17.21",
            "externalRefs":[{{"referenceCategory":"PACKAGE-MANAGER","referenceType":"purl","referenceLocator":"pkg:npm/lodash@4.17.21"}}],
            "checksums":[{{"algorithm":"SHA256","checksumValue":"{SHA}"}}]}},{{"SPDXID":"SPDXRef-2","name":"root"}}],
            "relationships":[{{"spdxElementId":"SPDXRef-2","relationshipType":"DEPENDS_ON","relatedSpdxElement":"SPDXRef-1"}}]}}"#
        );
        let sbom = parse(json.as_bytes()).unwrap();
        assert_eq!((sbom.format, sbom.components.len()), (SbomFormat::Spdx, 2));
        assert_eq!(sbom.components[0].hash.as_deref(), Some(SHA));

        let tv = format!(
            "SPDXVersion: SPDX-2.2\nDataLicense: CC0-1.0\nDocumentComment: <text>multi\nPackageName: fake\n</text>\n\
             PackageName: requests\nSPDXID: SPDXRef-1\nPackageVersion: 2.31.0\n\
             PackageChecksum: SHA256: {SHA}\nExternalRef: PACKAGE-MANAGER purl pkg:pypi/requests@2.31.0\n\n\
             PackageName: six\nPackageVersion: 1.16.0\nFileName: ./six.py\nPackageVersion: ignored\n"
        );
        let sbom = parse(tv.as_bytes()).unwrap();
        assert_eq!(sbom.encoding, "tag-value");
        assert_eq!(sbom.components.len(), 2, "{:?}", sbom.components);
        assert_eq!(sbom.components[1].version, "1.16.0");

        let ld = format!(
            r#"{{"@context":"https://spdx.org/rdf/3.0.1/spdx-context.jsonld","@graph":[
            {{"type":"CreationInfo","@id":"_:c","specVersion":"3.0.1"}},
            {{"type":"software_Package","spdxId":"urn:1","name":"requests","software_packageVersion":"2.31.0",
              "externalIdentifier":[{{"type":"ExternalIdentifier","externalIdentifierType":"packageUrl","identifier":"pkg:pypi/requests@2.31.0"}}],
              "verifiedUsing":[{{"type":"Hash","algorithm":"sha256","hashValue":"{SHA}"}}]}},
            {{"type":"software_File","name":"x.py"}}]}}"#
        );
        let sbom = parse(ld.as_bytes()).unwrap();
        assert_eq!(
            (sbom.format, sbom.encoding, sbom.components.len()),
            (SbomFormat::Spdx, "json-ld", 1)
        );
        assert_eq!(sbom.components[0].ecosystem, "pypi");
    }

    #[test]
    fn refusals_name_the_problem() {
        for (body, says) in [
            ("", "empty"),
            ("hello", "neither"),
            ("{\"a\":1}", "bomFormat"),
            (
                "{\"bomFormat\":\"CycloneDX\",\"specVersion\":\"2.0\"}",
                "specVersion",
            ),
            ("{\"spdxVersion\":\"SPDX-1.2\"}", "spdxVersion"),
            ("{\"bomFormat\":", "invalid JSON"),
            ("<html/>", "CycloneDX"),
            ("<bom", "invalid XML"),
        ] {
            let e = parse(body.as_bytes()).unwrap_err();
            assert!(e.0.contains(says), "{body}: {e}");
        }
        assert!(parse(&[0xff, 0xfe]).is_err());
    }
}
