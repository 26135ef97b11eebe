//! Software bills of materials, parsed in memory: CycloneDX (JSON and XML; 1.2 to 1.6, the
//! service's contract names 1.4 to 1.6), SPDX 2.2/2.3 (JSON and tag-value) and SPDX 3.0
//! (JSON-LD). The format is detected from the content. Each format's packages become
//! [`Component`]s: name, version and ecosystem from the package URL when there is one
//! (<https://github.com/package-url/purl-spec>), else from the fields; nested CycloneDX
//! components are walked; the same artefact listed twice is one component (see [`Merger`]).
//!
//! Bounds: a document nests at most [`MAX_DEPTH`] levels (XML elements within elements, JSON
//! arrays and objects within each other), checked before anything recursive reads it, and
//! lists at most [`MAX_COMPONENTS`] components. Nothing here recurses over the document's
//! own nesting: nested CycloneDX components are walked with an explicit stack.
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
use std::hash::BuildHasher as _;

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

/// The deepest nesting a document may have: XML elements within elements, or JSON arrays
/// and objects within each other (also `serde_json`'s own limit). Real bills of materials
/// stay far below it: a CycloneDX component nested ten deep is about 20 levels.
pub const MAX_DEPTH: usize = 128;

/// The most components one bill of materials may list (after merging the same artefact
/// listed twice). The largest real SBOMs (container images, monorepos) list some tens of
/// thousands.
pub const MAX_COMPONENTS: usize = 100_000;

/// The largest bill of materials accepted, in bytes: by the SBOM scan, the coverage request
/// and `knowngood ingest --from-sbom` alike.
pub const MAX_SBOM_BYTES: usize = 16 << 20;

/// Why a body is not a bill of materials this parser reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SbomError {
    /// Not a document of an accepted format, or malformed, or nested deeper than
    /// [`MAX_DEPTH`].
    #[error("{0}")]
    Invalid(String),
    /// More than [`MAX_COMPONENTS`] components.
    #[error(
        "the bill of materials lists more than {MAX_COMPONENTS} components, the most one scan reads; split it"
    )]
    TooManyComponents,
}

fn invalid(message: impl Into<String>) -> SbomError {
    SbomError::Invalid(message.into())
}

fn too_deep(encoding: &str) -> String {
    format!(
        "the document nests deeper than {MAX_DEPTH} levels ({encoding}), the most this service reads"
    )
}

const NEITHER: &str =
    "the body is neither CycloneDX (JSON or XML) nor SPDX (JSON, tag-value or 3.0 JSON-LD)";

/// Parses a bill of materials, detecting its format.
pub fn parse(body: &[u8]) -> Result<Sbom, SbomError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| invalid(format!("the body is not UTF-8 text ({e}); {NEITHER}")))?;
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
        Some(_) => Err(invalid(NEITHER)),
        None => Err(invalid(format!("the body is empty; {NEITHER}"))),
    }
}

/// The top level of the JSON formats, read in one pass. The two long lists (CycloneDX
/// `components`, SPDX 2 `packages`) are not kept: each entry goes to its [`Merger`] as soon
/// as it is read, so a scan holds the body and the merged components, not a tree of the
/// document as well. Which list counts is decided at the end (fields come in any order).
struct TopLevel<'m> {
    cyclonedx: &'m mut Merger,
    spdx: &'m mut Merger,
}

#[derive(Default)]
struct TopFields<'a> {
    bom_format: Option<String>,
    spec_version: Option<String>,
    spdx_version: Option<String>,
    context: Option<serde_json::Value>,
    graph: Option<Vec<Spdx3Element<'a>>>,
}

#[derive(Deserialize)]
#[serde(field_identifier)]
enum TopKey {
    #[serde(rename = "bomFormat")]
    BomFormat,
    #[serde(rename = "specVersion")]
    SpecVersion,
    #[serde(rename = "components")]
    Components,
    #[serde(rename = "spdxVersion")]
    SpdxVersion,
    #[serde(rename = "packages")]
    Packages,
    #[serde(rename = "@context")]
    Context,
    #[serde(rename = "@graph")]
    Graph,
    #[serde(other)]
    Other,
}

impl<'de> serde::de::Visitor<'de> for TopLevel<'_> {
    type Value = TopFields<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = TopFields::default();
        while let Some(key) = map.next_key::<TopKey>()? {
            match key {
                TopKey::BomFormat => out.bom_format = map.next_value()?,
                TopKey::SpecVersion => out.spec_version = map.next_value()?,
                TopKey::SpdxVersion => out.spdx_version = map.next_value()?,
                TopKey::Context => out.context = map.next_value()?,
                TopKey::Graph => out.graph = map.next_value()?,
                TopKey::Components => map.next_value_seed(Each::<CdxComponent<'de>, _>::new(
                    |c: CdxComponent<'de>| add_cyclonedx(self.cyclonedx, &c),
                ))?,
                TopKey::Packages => {
                    map.next_value_seed(Each::<SpdxPackage<'de>, _>::new(|p: SpdxPackage<'de>| {
                        add_spdx(self.spdx, &p);
                        !self.spdx.full
                    }))?
                }
                TopKey::Other => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

/// A JSON array (or null) whose elements are handed to `each` one at a time; `each`
/// answers false to stop reading (the list is longer than the scan takes).
struct Each<T, F> {
    each: F,
    element: std::marker::PhantomData<fn() -> T>,
}

impl<T, F> Each<T, F> {
    fn new(each: F) -> Self {
        Self {
            each,
            element: std::marker::PhantomData,
        }
    }
}

impl<'de, T: Deserialize<'de>, F: FnMut(T) -> bool> serde::de::DeserializeSeed<'de> for Each<T, F> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, T: Deserialize<'de>, F: FnMut(T) -> bool> serde::de::Visitor<'de> for Each<T, F> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array")
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        while let Some(element) = seq.next_element::<T>()? {
            if !(self.each)(element) {
                return Err(serde::de::Error::custom(SbomError::TooManyComponents));
            }
        }
        Ok(())
    }
}

/// A top-level CycloneDX component and the ones nested in it, depth first in document
/// order; false once the merger is full.
fn add_cyclonedx(out: &mut Merger, top: &CdxComponent<'_>) -> bool {
    let mut stack: Vec<&CdxComponent<'_>> = vec![top];
    while let Some(c) = stack.pop() {
        if out.full {
            return false;
        }
        stack.extend(c.components.iter().rev());
        // The component's own digests, else those of its distribution references.
        let own = !c.hashes.is_empty();
        let hashes = c
            .hashes
            .iter()
            .chain(
                c.external_references
                    .iter()
                    .filter(|r| !own && r.kind.as_deref() == Some("distribution"))
                    .flat_map(|r| &r.hashes),
            )
            .map(|h| (h.alg.as_ref(), h.content.as_ref()));
        out.add(
            c.name.as_deref(),
            c.group.as_deref(),
            c.version.as_deref(),
            c.purl.as_deref(),
            hashes,
        );
    }
    !out.full
}

fn add_spdx(out: &mut Merger, p: &SpdxPackage<'_>) {
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
    #[serde(rename = "externalReferences", borrow, default)]
    external_references: Vec<CdxReference<'a>>,
    #[serde(borrow, default)]
    components: Vec<CdxComponent<'a>>,
}

/// An external reference; a `distribution` one may carry the digests of the artifact (as
/// generators from pinned requirement files write the pins).
#[derive(Deserialize)]
struct CdxReference<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    hashes: Vec<CdxHash<'a>>,
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
    /// A `CreationInfo` element's version of the specification.
    #[serde(rename = "specVersion", borrow, default)]
    spec_version: Option<Cow<'a, str>>,
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

/// Whether arrays and objects nest deeper than `limit` in a JSON text (strings skipped).
/// The reader refuses deeper nesting of what it reads anyway; this also covers the fields it
/// skips, so that one limit holds for the whole document.
fn json_nests_deeper_than(text: &str, limit: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &c in text.as_bytes() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

fn parse_json(text: &str) -> Result<Sbom, SbomError> {
    if json_nests_deeper_than(text, MAX_DEPTH) {
        return Err(invalid(too_deep("JSON arrays and objects")));
    }
    let mut cyclonedx = Merger::default();
    let mut spdx = Merger::default();
    let mut de = serde_json::Deserializer::from_str(text);
    let doc = serde::Deserializer::deserialize_map(
        &mut de,
        TopLevel {
            cyclonedx: &mut cyclonedx,
            spdx: &mut spdx,
        },
    )
    .and_then(|doc| de.end().map(|()| doc))
    .map_err(|e| {
        if cyclonedx.full || spdx.full {
            SbomError::TooManyComponents
        } else if e.to_string().starts_with("recursion limit exceeded") {
            invalid(format!(
                "{} (line {} column {})",
                too_deep("JSON arrays and objects"),
                e.line(),
                e.column()
            ))
        } else {
            invalid(format!(
                "invalid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ))
        }
    })?;
    if doc.bom_format.as_deref() == Some("CycloneDX") {
        let version = doc.spec_version.unwrap_or_default();
        check_cyclonedx_version(&version)?;
        return cyclonedx.finish(SbomFormat::CycloneDx, version, "json");
    }
    drop(cyclonedx);
    if let Some(version) = doc.spdx_version {
        if !matches!(version.as_str(), "SPDX-2.2" | "SPDX-2.3") {
            return Err(invalid(format!(
                "spdxVersion {version:?} is not supported; SPDX-2.2 and SPDX-2.3 are (and SPDX 3.0 JSON-LD)"
            )));
        }
        return spdx.finish(SbomFormat::Spdx, version, "json");
    }
    drop(spdx);
    let mut out = Merger::default();
    let spdx3 = doc
        .context
        .as_ref()
        .is_some_and(|c| c.to_string().contains("spdx.org/rdf/3."));
    if spdx3 && let Some(graph) = &doc.graph {
        // The version the document states: its CreationInfo's `specVersion` (an element of
        // the graph, or inline in an element), else the one its @context URL names.
        let version = graph
            .iter()
            .find_map(|e| {
                e.spec_version.as_deref().map(str::to_string).or_else(|| {
                    e.creation_info
                        .as_ref()
                        .and_then(|c| c.get("specVersion"))
                        .and_then(|v| v.as_str())
                        .map(str::to_string)
                })
            })
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .or_else(|| doc.context.as_ref().and_then(context_version))
            .unwrap_or_else(|| "3.0".to_string());
        for e in graph {
            if out.full {
                return Err(SbomError::TooManyComponents);
            }
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
        return out.finish(SbomFormat::Spdx, version, "json-ld");
    }
    Err(invalid(format!(
        "{NEITHER}: a JSON body needs bomFormat \"CycloneDX\", an spdxVersion, or an SPDX 3 @context and @graph"
    )))
}

/// The SPDX version an SPDX 3 `@context` URL names (`https://spdx.org/rdf/3.0.1/…`).
fn context_version(context: &serde_json::Value) -> Option<String> {
    let urls: Vec<&str> = match context {
        serde_json::Value::String(s) => vec![s.as_str()],
        serde_json::Value::Array(a) => a.iter().filter_map(|v| v.as_str()).collect(),
        _ => Vec::new(),
    };
    urls.into_iter().find_map(|url| {
        let rest = url.split("spdx.org/rdf/").nth(1)?;
        let version = rest.split('/').next()?;
        (version.starts_with("3.") && version.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
            .then(|| version.to_string())
    })
}

/// The CycloneDX versions read: every one with a JSON form (1.2 onwards).
const CYCLONEDX_VERSIONS: [&str; 5] = ["1.2", "1.3", "1.4", "1.5", "1.6"];

fn check_cyclonedx_version(version: &str) -> Result<(), SbomError> {
    if CYCLONEDX_VERSIONS.contains(&version) {
        Ok(())
    } else {
        Err(invalid(format!(
            "CycloneDX specVersion {version:?} is not supported; 1.2, 1.3, 1.4, 1.5 and 1.6 are"
        )))
    }
}

/// Whether elements nest deeper than `limit` in an XML text. The XML parser recurses once per
/// open element, so this runs first, over the same markup it reads: comments, CDATA sections,
/// processing instructions and declarations hold no elements; an element opens at `<name`
/// (closing at once with `/>`, after attribute values in quotes, which may hold `>`) and
/// closes at `</`. Malformed markup is left to the parser to refuse.
fn xml_nests_deeper_than(text: &str, limit: usize) -> bool {
    let b = text.as_bytes();
    let find = |from: usize, what: &[u8]| {
        b.get(from..)
            .and_then(|rest| rest.windows(what.len()).position(|w| w == what))
            .map(|at| from + at + what.len())
    };
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(at) = b
        .get(i..)
        .and_then(|rest| rest.iter().position(|&c| c == b'<'))
    {
        i += at;
        let rest = &b[i..];
        let next = if rest.starts_with(b"<!--") {
            find(i + 4, b"-->")
        } else if rest.starts_with(b"<![CDATA[") {
            find(i + 9, b"]]>")
        } else if rest.starts_with(b"<?") {
            find(i + 2, b"?>")
        } else if rest.starts_with(b"<!") {
            find(i + 2, b">")
        } else if rest.starts_with(b"</") {
            depth = depth.saturating_sub(1);
            find(i + 2, b">")
        } else {
            depth += 1;
            if depth > limit {
                return true;
            }
            let mut quote = None;
            let mut end = None;
            for (j, &c) in b.iter().enumerate().skip(i + 1) {
                match quote {
                    Some(q) if c == q => quote = None,
                    Some(_) => {}
                    None if c == b'"' || c == b'\'' => quote = Some(c),
                    None if c == b'>' => {
                        if b[j - 1] == b'/' {
                            depth -= 1;
                        }
                        end = Some(j + 1);
                        break;
                    }
                    None => {}
                }
            }
            end
        };
        match next {
            Some(next) => i = next,
            None => return false,
        }
    }
    false
}

fn parse_xml(text: &str) -> Result<Sbom, SbomError> {
    if xml_nests_deeper_than(text, MAX_DEPTH) {
        return Err(invalid(too_deep("XML elements")));
    }
    let options = roxmltree::ParsingOptions {
        allow_dtd: false,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(text, options)
        .map_err(|e| invalid(format!("invalid XML: {e}")))?;
    let root = doc.root_element();
    let ns = root.tag_name().namespace().unwrap_or_default();
    let Some(version) = ns.strip_prefix("http://cyclonedx.org/schema/bom/") else {
        return Err(invalid(format!(
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
        if out.full {
            return Err(SbomError::TooManyComponents);
        }
        if node.ancestors().any(|a| a.tag_name().name() == "metadata") {
            continue;
        }
        let digests = |holder: roxmltree::Node<'_, '_>| {
            holder
                .children()
                .filter(|c| c.tag_name().name() == "hashes")
                .flat_map(|h| h.children().filter(|c| c.tag_name().name() == "hash"))
                .filter_map(|h| {
                    Some((
                        h.attribute("alg")?.to_string(),
                        h.text()?.trim().to_string(),
                    ))
                })
                .collect::<Vec<_>>()
        };
        let mut hashes = digests(node);
        // The component's own digests, else those of its distribution references.
        if hashes.is_empty() {
            hashes = node
                .children()
                .filter(|c| c.tag_name().name() == "externalReferences")
                .flat_map(|r| r.children().filter(|c| c.tag_name().name() == "reference"))
                .filter(|r| r.attribute("type") == Some("distribution"))
                .flat_map(digests)
                .collect();
        }
        out.add(
            child_text(node, "name").as_deref(),
            child_text(node, "group").as_deref(),
            child_text(node, "version").as_deref(),
            child_text(node, "purl").as_deref(),
            hashes.iter().map(|(a, h)| (a.as_str(), h.as_str())),
        );
    }
    out.finish(SbomFormat::CycloneDx, version.to_string(), "xml")
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
        if out.full {
            return Err(SbomError::TooManyComponents);
        }
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
        return Err(invalid(format!(
            "SPDXVersion {version:?} is not supported; SPDX-2.2 and SPDX-2.3 are"
        )));
    }
    out.finish(SbomFormat::Spdx, version, "tag-value")
}

/// Collects components, merging listings of the same artefact. Two listings are the same
/// artefact when they name the same package (ecosystem, name as the ecosystem compares it,
/// version) and either list the same digest, or list the same package URL qualifiers and
/// subpath while at most one of them lists a digest. Listings of one package that differ in
/// qualifiers (a Maven `classifier`, another `type`) or in their digests are different
/// artefacts, each its own component, so that each digest is classified.
///
/// The indexes keep a hash of each key, not the key: a hash shared by two different keys is
/// told apart by recomputing the key of the component already held.
#[derive(Default)]
struct Merger {
    components: Vec<Component>,
    hasher: std::hash::RandomState,
    /// (package, digest) -> the component with that digest.
    by_digest: Index,
    /// (package, qualifiers and subpath) -> the first component listed with them.
    by_qualifiers: Index,
    /// Set when a component beyond [`MAX_COMPONENTS`] was listed.
    full: bool,
}

/// Key hash -> component, for one kind of key.
#[derive(Default)]
struct Index {
    /// Key hash -> the first component with it.
    first: HashMap<u64, usize>,
    /// Further components whose key hash equals an earlier, different key's.
    collided: HashMap<u64, Vec<usize>>,
}

impl Index {
    fn find(&self, h: u64, same: impl Fn(usize) -> bool) -> Option<usize> {
        self.first
            .get(&h)
            .into_iter()
            .chain(self.collided.get(&h).into_iter().flatten())
            .copied()
            .find(|&i| same(i))
    }

    /// Indexes component `i` under `h`, unless one with the same key (`same`) already is.
    fn insert(&mut self, h: u64, i: usize, same: impl Fn(usize) -> bool) {
        match self.first.entry(h) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(i);
            }
            std::collections::hash_map::Entry::Occupied(o) => {
                if same(*o.get()) {
                    return;
                }
                let more = self.collided.entry(h).or_default();
                if !more.iter().any(|&j| same(j)) {
                    more.push(i);
                }
            }
        }
    }
}

/// The key two listings of the same package share (borrowed where it can be).
fn merge_key<'a>(
    ecosystem: &'a str,
    name: &'a str,
    version: &'a str,
) -> (&'a str, Cow<'a, str>, &'a str) {
    let key_name = match ecosystem
        .parse::<Ecosystem>()
        .ok()
        .and_then(|e| e.normalize(name).ok())
    {
        Some(n) if n != name => Cow::Owned(n),
        _ => Cow::Borrowed(name),
    };
    (ecosystem, key_name, version)
}

/// A package URL's qualifiers (keys lower-cased, values decoded, sorted) and subpath, in one
/// string that two spellings of the same ones share; empty without a package URL.
fn qualifiers(purl: Option<&str>) -> String {
    let Some(purl) = purl.map(str::trim) else {
        return String::new();
    };
    let (rest, subpath) = match purl.split_once('#') {
        Some((rest, subpath)) => (rest, subpath.trim_matches('/')),
        None => (purl, ""),
    };
    let mut pairs: Vec<(String, String)> = rest
        .split_once('?')
        .map_or("", |(_, q)| q)
        .split('&')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let (k, v) = (k.trim().to_ascii_lowercase(), decode(v.trim()));
            (!k.is_empty() && !v.is_empty()).then_some((k, v))
        })
        .collect();
    pairs.sort();
    let mut out = String::new();
    for (k, v) in pairs {
        out.push_str(&k);
        out.push('=');
        out.push_str(&v);
        out.push('\n');
    }
    if !subpath.is_empty() {
        out.push('#');
        out.push_str(&decode(subpath));
    }
    out
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
        if self.full {
            return;
        }
        let parsed = purl.and_then(Purl::parse);
        let (name, version, ecosystem) = match parsed {
            Some(p) => (
                p.name,
                p.version
                    .or(version.map(str::to_string))
                    .unwrap_or_default(),
                Ecosystem::from_purl_type(&p.ty).map_or(p.ty, |e| e.as_str().to_string()),
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
        let quals = qualifiers(purl);
        let key = merge_key(&ecosystem, &name, &version);
        let by_digest = hash.as_deref().map(|d| self.hasher.hash_one((&key, d)));
        let by_qualifiers = self.hasher.hash_one((&key, quals.as_str()));
        let components = &self.components;
        let package = |i: usize| {
            let c = &components[i];
            merge_key(&c.ecosystem, &c.name, &c.version) == key
        };
        let same_digest = |i: usize| components[i].hash == hash && package(i);
        let same_qualifiers =
            |i: usize| qualifiers(components[i].purl.as_deref()) == quals && package(i);
        let existing = by_digest
            .and_then(|h| self.by_digest.find(h, same_digest))
            .or_else(|| {
                self.by_qualifiers.find(by_qualifiers, |i| {
                    let held = &components[i].hash;
                    (hash.is_none() || held.is_none() || *held == hash) && same_qualifiers(i)
                })
            });
        match existing {
            Some(i) => {
                if self.components[i].hash.is_none()
                    && let Some(h) = by_digest
                {
                    self.components[i].hash = hash;
                    let components = &self.components;
                    self.by_digest.insert(h, i, |j| {
                        components[j].hash == components[i].hash
                            && merge_key(
                                &components[j].ecosystem,
                                &components[j].name,
                                &components[j].version,
                            ) == key
                    });
                }
                let existing = &mut self.components[i];
                if existing.purl.is_none() {
                    existing.purl = purl.map(str::to_string);
                }
            }
            None => {
                if self.components.len() >= MAX_COMPONENTS {
                    self.full = true;
                    return;
                }
                let i = self.components.len();
                self.components.push(Component {
                    name: name.clone(),
                    version: version.clone(),
                    ecosystem: ecosystem.clone(),
                    hash: hash.clone(),
                    purl: purl.map(str::to_string),
                });
                let components = &self.components;
                let package = |j: usize| {
                    let c = &components[j];
                    merge_key(&c.ecosystem, &c.name, &c.version) == key
                };
                if let Some(h) = by_digest {
                    self.by_digest
                        .insert(h, i, |j| components[j].hash == hash && package(j));
                }
                self.by_qualifiers.insert(by_qualifiers, i, |j| {
                    qualifiers(components[j].purl.as_deref()) == quals && package(j)
                });
            }
        }
    }

    fn finish(
        self,
        format: SbomFormat,
        spec_version: String,
        encoding: &'static str,
    ) -> Result<Sbom, SbomError> {
        if self.full {
            return Err(SbomError::TooManyComponents);
        }
        Ok(Sbom {
            format,
            spec_version,
            encoding,
            components: self.components,
        })
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
    fn distribution_reference_digests_stand_in_for_missing_hashes() {
        let other = "1".repeat(64);
        let json = format!(
            r#"{{"components":[
              {{"name":"requests","version":"2.31.0","purl":"pkg:pypi/requests@2.31.0",
                "externalReferences":[{{"type":"website","url":"x","hashes":[{{"alg":"SHA-256","content":"{other}"}}]}},
                  {{"type":"distribution","url":"https://pypi.org/simple/requests/","hashes":[{{"alg":"SHA-256","content":"{SHA}"}}]}}]}},
              {{"name":"six","version":"1.16.0","purl":"pkg:pypi/six@1.16.0","hashes":[{{"alg":"SHA-256","content":"{other}"}}],
                "externalReferences":[{{"type":"distribution","url":"x","hashes":[{{"alg":"SHA-256","content":"{SHA}"}}]}}]}}],
              "bomFormat":"CycloneDX","specVersion":"1.5"}}"#
        );
        let sbom = parse(json.as_bytes()).unwrap();
        assert_eq!(sbom.components[0].hash.as_deref(), Some(SHA));
        assert_eq!(sbom.components[1].hash.as_deref(), Some(other.as_str()));

        let xml = format!(
            r#"<bom xmlns="http://cyclonedx.org/schema/bom/1.6"><components><component type="library">
            <name>requests</name><version>2.31.0</version><purl>pkg:pypi/requests@2.31.0</purl>
            <externalReferences><reference type="vcs"><url>x</url><hashes><hash alg="SHA-256">{other}</hash></hashes></reference>
            <reference type="distribution"><url>x</url><hashes><hash alg="SHA-256">{SHA}</hash></hashes></reference>
            </externalReferences></component></components></bom>"#
        );
        let sbom = parse(xml.as_bytes()).unwrap();
        assert_eq!(sbom.components[0].hash.as_deref(), Some(SHA));
    }

    #[test]
    fn json_lists_stream_in_any_field_order() {
        // `components` before `bomFormat`, as some generators sort keys; a null list and
        // unknown fields of any shape are fine.
        let body = br#"{"components":[{"name":"a","purl":"pkg:npm/a@1.0.0"},{"name":"b","purl":"pkg:npm/b@1.0.0",
            "components":[{"name":"c","purl":"pkg:npm/c@1.0.0"}]},{"name":"a","purl":"pkg:npm/A@1.0.0"}],
            "x":{"y":[1,2,{"z":null}]},"bomFormat":"CycloneDX","specVersion":"1.6","packages":null}"#;
        let sbom = parse(body).unwrap();
        let names: Vec<&str> = sbom.components.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        // A list of the wrong shape is refused, and so is text after the document.
        let e =
            parse(br#"{"bomFormat":"CycloneDX","specVersion":"1.5","components":{"name":"a"}}"#)
                .unwrap_err();
        assert!(e.to_string().contains("invalid JSON"), "{e}");
        let e = parse(br#"{"bomFormat":"CycloneDX","specVersion":"1.5"} trailing"#).unwrap_err();
        assert!(e.to_string().contains("invalid JSON"), "{e}");
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
            assert!(e.to_string().contains(says), "{body}: {e}");
        }
        assert!(parse(&[0xff, 0xfe]).is_err());
    }

    /// A CycloneDX XML document whose `<metadata>` nests `depth` elements.
    fn deep_metadata_xml(depth: usize) -> String {
        format!(
            r#"<bom xmlns="http://cyclonedx.org/schema/bom/1.5"><metadata>{}{}</metadata><components/></bom>"#,
            "<x>".repeat(depth),
            "</x>".repeat(depth)
        )
    }

    /// Components nested `depth` levels deep, in XML.
    fn deep_components_xml(depth: usize) -> String {
        format!(
            r#"<bom xmlns="http://cyclonedx.org/schema/bom/1.5"><components>{}{}</components></bom>"#,
            r#"<component type="library"><name>a</name><components>"#.repeat(depth),
            "</components></component>".repeat(depth)
        )
    }

    /// Parses on a thread with half the stack of a server thread (1 MiB of 2), so that
    /// recursion over the document's depth shows as a crash here, even in a debug build
    /// (whose frames are several times larger than a release build's).
    fn parse_on_small_stack(body: String) -> Result<Sbom, SbomError> {
        std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || parse(body.as_bytes()))
            .unwrap()
            .join()
            .expect("the parser overflowed its stack")
    }

    #[test]
    fn deep_nesting_is_refused_naming_the_limit() {
        let deep_json = format!(
            r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","metadata":{}1{}}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        let deep_json_components = format!(
            r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","components":[{}{}]}}"#,
            r#"{"name":"a","components":["#.repeat(2_000),
            "]}".repeat(2_000)
        );
        let deep_spdx3 = format!(
            r#"{{"@context":"https://spdx.org/rdf/3.0.1/spdx-context.jsonld","@graph":[{{"type":"CreationInfo","specVersion":"3.0.1","x":{}1{}}}]}}"#,
            "[".repeat(5_000),
            "]".repeat(5_000)
        );
        for (what, body) in [
            ("metadata XML", deep_metadata_xml(10_000)),
            ("components XML", deep_components_xml(2_000)),
            ("components XML", deep_components_xml(100_000)),
            ("JSON", deep_json),
            ("JSON components", deep_json_components),
            ("SPDX 3", deep_spdx3),
        ] {
            let e = parse_on_small_stack(body).unwrap_err();
            assert!(
                matches!(&e, SbomError::Invalid(m) if m.contains("deeper than 128 levels")),
                "{what}: {e}"
            );
        }
        // Up to the limit is fine: 128 levels of elements, components nested 60 deep.
        let sbom = parse_on_small_stack(deep_metadata_xml(MAX_DEPTH - 3)).unwrap();
        assert!(sbom.components.is_empty());
        let sbom = parse_on_small_stack(deep_components_xml(60)).unwrap();
        assert_eq!(sbom.components.len(), 1, "the same component 60 times");
        let nested = format!(
            r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","components":[{}{}]}}"#,
            (0..60)
                .map(|i| format!(r#"{{"name":"c{i}","purl":"pkg:npm/c{i}@1.0.0","components":["#))
                .collect::<String>(),
            "]}".repeat(60)
        );
        let sbom = parse_on_small_stack(nested).unwrap();
        assert_eq!(sbom.components.len(), 60);
    }

    #[test]
    fn xml_depth_follows_the_markup() {
        // Self-closing elements, `>` and `/` in attribute values, comments, CDATA and
        // processing instructions open nothing.
        let shallow = format!(
            "<?xml version=\"1.0\"?><!-- <a><a><a> --><r>{}</r>",
            "<b x=\"/>\" y='>'/><![CDATA[<c><c><c>]]><?pi <d><d>?><e></e>".repeat(500)
        );
        assert!(!xml_nests_deeper_than(&shallow, 2));
        assert!(xml_nests_deeper_than("<a><b><c/></b></a>", 2));
        assert!(!xml_nests_deeper_than("<a><b><c/></b></a>", 3));
        assert!(xml_nests_deeper_than("<a x='>'><b y=\"/\"><c>", 2));
    }

    #[test]
    fn component_limit() {
        let listing = |n: usize| {
            (0..n)
                .map(|i| format!(r#"{{"purl":"pkg:npm/c{i}@1.0.0"}}"#))
                .collect::<Vec<_>>()
                .join(",")
        };
        let at_limit = format!(
            r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","components":[{}]}}"#,
            listing(MAX_COMPONENTS)
        );
        assert_eq!(
            parse(at_limit.as_bytes()).unwrap().components.len(),
            MAX_COMPONENTS
        );
        let over = format!(
            r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","components":[{}]}}"#,
            listing(MAX_COMPONENTS + 1)
        );
        let e = parse(over.as_bytes()).unwrap_err();
        assert_eq!(e, SbomError::TooManyComponents);
        assert!(e.to_string().contains("100000 components"), "{e}");
        // Listing the same package many times is one component, within the limit.
        let same = format!(
            r#"{{"spdxVersion":"SPDX-2.3","packages":[{}]}}"#,
            vec![r#"{"name":"a","versionInfo":"1"}"#; MAX_COMPONENTS + 10].join(",")
        );
        assert_eq!(parse(same.as_bytes()).unwrap().components.len(), 1);
        let tag_value = format!(
            "SPDXVersion: SPDX-2.3\n{}",
            (0..=MAX_COMPONENTS)
                .map(|i| format!("PackageName: p{i}\nPackageVersion: 1\n"))
                .collect::<String>()
        );
        assert_eq!(
            parse(tag_value.as_bytes()).unwrap_err(),
            SbomError::TooManyComponents
        );
    }

    #[test]
    fn artefacts_differing_in_qualifiers_or_digests_stay_apart() {
        let other = "1".repeat(64);
        // Two Maven artefacts of one version: the jar and its test jar, each with its digest.
        let body = format!(
            r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","components":[
              {{"name":"keycloak-core","group":"org.keycloak","version":"24.0.1",
                "purl":"pkg:maven/org.keycloak/keycloak-core@24.0.1?type=jar",
                "hashes":[{{"alg":"SHA-256","content":"{SHA}"}}]}},
              {{"name":"keycloak-core","group":"org.keycloak","version":"24.0.1",
                "purl":"pkg:maven/org.keycloak/keycloak-core@24.0.1?classifier=tests&type=jar",
                "hashes":[{{"alg":"SHA-256","content":"{other}"}}]}},
              {{"name":"keycloak-core","version":"24.0.1",
                "purl":"pkg:maven/org.keycloak/keycloak-core@24.0.1?type=jar&classifier=tests"}},
              {{"name":"keycloak-core","version":"24.0.1",
                "purl":"pkg:maven/org.keycloak/keycloak-core@24.0.1?TYPE=jar",
                "hashes":[{{"alg":"SHA-256","content":"{SHA}"}}]}},
              {{"name":"wheel","purl":"pkg:pypi/six@1.16.0","hashes":[{{"alg":"SHA-256","content":"{SHA}"}}]}},
              {{"name":"sdist","purl":"pkg:pypi/six@1.16.0","hashes":[{{"alg":"SHA-256","content":"{other}"}}]}},
              {{"name":"nohash","purl":"pkg:pypi/Six@1.16.0"}},
              {{"name":"same-digest","purl":"pkg:pypi/six@1.16.0?file_name=six.whl","hashes":[{{"alg":"SHA-256","content":"{other}"}}]}}
            ]}}"#
        );
        let sbom = parse(body.as_bytes()).unwrap();
        let listed: Vec<(&str, Option<&str>)> = sbom
            .components
            .iter()
            .map(|c| (c.name.as_str(), c.hash.as_deref()))
            .collect();
        assert_eq!(
            listed,
            [
                ("org.keycloak/keycloak-core", Some(SHA)),
                ("org.keycloak/keycloak-core", Some(other.as_str())),
                ("six", Some(SHA)),
                ("six", Some(other.as_str())),
            ],
            "{:?}",
            sbom.components
        );
        // A listing without a digest fills in the digest of a later listing of the same
        // artefact, and the two are one component.
        let body = format!(
            r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","components":[
              {{"name":"a","purl":"pkg:npm/a@1.0.0"}},
              {{"name":"a","purl":"pkg:npm/a@1.0.0","hashes":[{{"alg":"SHA-256","content":"{SHA}"}}]}},
              {{"name":"a","purl":"pkg:npm/a@1.0.0","hashes":[{{"alg":"SHA-256","content":"{other}"}}]}}]}}"#
        );
        let sbom = parse(body.as_bytes()).unwrap();
        let hashes: Vec<Option<&str>> = sbom.components.iter().map(|c| c.hash.as_deref()).collect();
        assert_eq!(hashes, [Some(SHA), Some(other.as_str())]);
    }

    #[test]
    fn versions_as_the_document_states_them() {
        let e = parse(br#"{"bomFormat":"CycloneDX","specVersion":"1.1"}"#).unwrap_err();
        assert!(
            e.to_string().contains("1.2, 1.3, 1.4, 1.5 and 1.6 are"),
            "{e}"
        );
        for version in ["1.2", "1.3"] {
            let body = format!(r#"{{"bomFormat":"CycloneDX","specVersion":"{version}"}}"#);
            assert_eq!(parse(body.as_bytes()).unwrap().spec_version, version);
        }
        // SPDX 3: the CreationInfo element's specVersion (referenced by id, as generators
        // write it), else the one the @context names.
        for (context, creation, expected) in [
            ("3.0.1", r#""specVersion":"3.0.1""#, "3.0.1"),
            ("3.0.1", r#""specVersion":"3.0.0""#, "3.0.0"),
            ("3.0.1", r#""created":"2024-01-01T00:00:00Z""#, "3.0.1"),
        ] {
            let body = format!(
                r#"{{"@context":"https://spdx.org/rdf/{context}/spdx-context.jsonld","@graph":[
                {{"type":"CreationInfo","@id":"_:creationinfo",{creation}}},
                {{"type":"software_Package","creationInfo":"_:creationinfo","name":"a","software_packageUrl":"pkg:npm/a@1.0.0"}}]}}"#
            );
            let sbom = parse(body.as_bytes()).unwrap();
            assert_eq!(sbom.spec_version, expected, "{body}");
            assert_eq!(sbom.components.len(), 1);
        }
    }
}
