//! npm packages from the registry, for a configured list of packages.
//!
//! `https://registry.npmjs.org/<name>` (scoped: `@scope%2Fname`), asked for the abbreviated
//! document with `Accept: application/vnd.npm.install-v1+json`: `dist-tags.latest` and
//! `versions.<v>.dist: {tarball, shasum (SHA-1 hex), integrity ("sha512-<base64>")}`.
//! Only SHA-1 (and SHA-512) is published, so tarballs are downloaded for SHA-256 and checked
//! against the SHA-1.

use std::collections::BTreeMap;

use async_trait::async_trait;
use model::{Arch, Platform};
use serde::Deserialize;

use crate::fetch::{
    Artifact, FetchContext, FetchError, Fetcher, History, PublishedHashes, VendorConfig,
    resolve_url,
};
use crate::formats::{compare_versions, hex_digest, newest, valid_version};

pub struct Npm;

impl Npm {
    pub(crate) fn default_config() -> VendorConfig {
        VendorConfig::new("https://registry.npmjs.org").with_items(&[
            "lodash",
            "react",
            "express",
            "@types/node",
        ])
    }
}

#[derive(Deserialize)]
struct Packument {
    #[serde(rename = "dist-tags", default)]
    dist_tags: BTreeMap<String, String>,
    #[serde(default)]
    versions: BTreeMap<String, Manifest>,
    /// The full document only: each version's publication time (and `created`, `modified`).
    #[serde(default)]
    time: BTreeMap<String, serde_json::Value>,
}

impl Packument {
    /// When `version` was published, where the document says.
    fn published(&self, version: &str) -> Option<chrono::DateTime<chrono::Utc>> {
        let text = self.time.get(version)?.as_str()?;
        chrono::DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|t| t.with_timezone(&chrono::Utc))
    }
}

#[derive(Deserialize)]
struct Manifest {
    dist: Dist,
}

#[derive(Deserialize)]
struct Dist {
    tarball: String,
    shasum: Option<String>,
}

#[async_trait]
impl Fetcher for Npm {
    fn id(&self) -> &str {
        "npm"
    }

    fn vendor(&self) -> &str {
        "npm"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let mut out = Vec::new();
        let mut failures = Vec::new();
        let horizon = ctx
            .config
            .history
            .map_or(ctx.limits.max_versions, History::count);
        for item in &ctx.config.items {
            let (name, pin) = match parse_item(item) {
                Ok(parsed) => parsed,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            let url = format!("{}/{}", ctx.base_url(), name.replace('/', "%2F"));
            // Past versions need their publication times, which only the full document has.
            let accept = if pin.is_some() || ctx.config.history.is_some() {
                "application/json"
            } else {
                "application/vnd.npm.install-v1+json"
            };
            let doc: Packument = match ctx.get_json(&url, Some(accept)).await {
                Ok(doc) => doc,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            let pinned = pin.is_some();
            let chosen = if let Some(pin) = pin {
                // A pinned version is taken whatever `latest` says.
                if !doc.versions.contains_key(&pin) {
                    failures.push(FetchError::malformed(
                        &url,
                        format!("{name} has no version {}", model::shown(&pin)),
                    ));
                    continue;
                }
                vec![pin]
            } else {
                let Some(latest) = doc.dist_tags.get("latest") else {
                    failures.push(FetchError::malformed(&url, "no dist-tags.latest"));
                    continue;
                };
                // Versions up to `latest`: later ones are pre-releases or other dist-tags.
                let candidates = doc
                    .versions
                    .keys()
                    .filter(|v| valid_version(v) && compare_versions(v, latest).is_le())
                    .cloned();
                newest(candidates, horizon.max(1))
            };
            // Every version but the newest taken (and a pinned one) starts its history at
            // its publication time.
            let dated = chosen.len() - 1;
            for (i, version) in chosen.into_iter().enumerate() {
                let dist = &doc.versions[&version].dist;
                // Registry mirrors may answer tarball links relative to the packument.
                let tarball = match resolve_url(&url, &dist.tarball) {
                    Ok(u) => u,
                    Err(e) => {
                        ctx.note(e);
                        continue;
                    }
                };
                if (pinned || i < dated)
                    && let Some(at) = doc.published(&version)
                {
                    ctx.set_released(&tarball, at);
                }
                out.push(Artifact {
                    vendor: "npm".into(),
                    executable_name: format!("{name} (npm)"),
                    version,
                    platform: Platform::Universal,
                    arch: Arch::Universal,
                    url: tarball,
                    published: PublishedHashes {
                        sha1: dist.shasum.as_deref().and_then(|h| hex_digest(h, 40)),
                        ..Default::default()
                    },
                });
            }
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|a| seen.insert(a.url.clone()));
        ctx.settle(out, failures)
    }
}

/// A configured item: a package name (`lodash`, `@types/node`), optionally pinned to one
/// version with `@` (`lodash@4.17.20`, `@types/node@20.11.5`).
fn parse_item(item: &str) -> Result<(String, Option<String>), FetchError> {
    let item = item.trim();
    let refuse = |why: &str| {
        FetchError::malformed(
            "vendors.npm.items",
            format!("{}: {why}", model::shown(item)),
        )
    };
    let (name, pin) = match item.rfind('@') {
        Some(at) if at > 0 => (&item[..at], Some(&item[at + 1..])),
        _ => (item, None),
    };
    let scoped = name.strip_prefix('@');
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.~".contains(c))
    };
    let ok = match scoped {
        Some(rest) => rest
            .split_once('/')
            .is_some_and(|(s, n)| plain(s) && plain(n)),
        None => plain(name),
    };
    if !ok {
        return Err(refuse("not a package name, nor `name@version`"));
    }
    match pin {
        Some(v) if !valid_version(v) => Err(refuse("the pinned version is not a version")),
        Some(v) => Ok((name.to_owned(), Some(v.to_owned()))),
        None => Ok((name.to_owned(), None)),
    }
}
