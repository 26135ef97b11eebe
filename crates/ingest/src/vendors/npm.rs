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
    Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig, resolve_url,
};
use crate::formats::{compare_versions, hex_digest, newest, valid_version};

pub struct Npm;

impl Npm {
    pub fn default_config() -> VendorConfig {
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
        for name in &ctx.config.items {
            let url = format!("{}/{}", ctx.base_url(), name.replace('/', "%2F"));
            let doc: Packument = match ctx
                .get_json(&url, Some("application/vnd.npm.install-v1+json"))
                .await
            {
                Ok(doc) => doc,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
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
            for version in newest(candidates, ctx.limits.max_versions) {
                let dist = &doc.versions[&version].dist;
                // Registry mirrors may answer tarball links relative to the packument.
                let tarball = match resolve_url(&url, &dist.tarball) {
                    Ok(u) => u,
                    Err(e) => {
                        ctx.note(e);
                        continue;
                    }
                };
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
        ctx.settle(out, failures)
    }
}
