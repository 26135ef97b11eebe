//! Python packages from PyPI's JSON API, for a configured list of packages.
//!
//! `https://pypi.org/pypi/<name>/json`: `info.version` (latest release), and `releases:
//! {"2.32.3": [{filename, url, packagetype ("sdist" | "bdist_wheel"), digests: {md5, sha256,
//! blake2b_256}, yanked}]}` (see the Warehouse JSON API docs).
//!
//! A package release is recorded once, as `name (pypi)` on universal/universal: its sdist,
//! or its pure wheel (`*-none-any.whl`) when there is no sdist. Platform wheels are not
//! recorded: several share one platform and arch and more are uploaded to old releases
//! later, which would read as a changed hash on an immutable release.

use std::collections::BTreeMap;

use async_trait::async_trait;
use model::{Arch, Platform};
use serde::Deserialize;

use crate::fetch::{Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig};
use crate::formats::{compare_versions, hex_digest, newest, valid_version};

pub struct PyPi;

impl PyPi {
    pub fn default_config() -> VendorConfig {
        VendorConfig::new("https://pypi.org").with_items(&[
            "requests",
            "urllib3",
            "pip",
            "setuptools",
        ])
    }
}

#[derive(Deserialize)]
struct Project {
    info: Info,
    #[serde(default)]
    releases: BTreeMap<String, Vec<File>>,
}

#[derive(Deserialize)]
struct Info {
    version: String,
}

#[derive(Deserialize)]
struct File {
    filename: String,
    url: String,
    packagetype: String,
    #[serde(default)]
    digests: Digests,
    #[serde(default)]
    yanked: bool,
}

#[derive(Deserialize, Default)]
struct Digests {
    md5: Option<String>,
    sha256: Option<String>,
}

/// PEP 503 normal form: lowercase, runs of `-`, `_`, `.` as one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::new();
    for part in name.split(['-', '_', '.']).filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&part.to_ascii_lowercase());
    }
    out
}

/// The one file that stands for a release: the sdist, else the first pure wheel.
fn canonical(files: &[File]) -> Option<&File> {
    let live = || files.iter().filter(|f| !f.yanked);
    live().find(|f| f.packagetype == "sdist").or_else(|| {
        let mut wheels: Vec<&File> = live()
            .filter(|f| f.filename.ends_with("-none-any.whl"))
            .collect();
        wheels.sort_by(|a, b| a.filename.cmp(&b.filename));
        wheels.first().copied()
    })
}

#[async_trait]
impl Fetcher for PyPi {
    fn id(&self) -> &str {
        "pypi"
    }

    fn vendor(&self) -> &str {
        "pypi"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let mut out = Vec::new();
        let mut failures = Vec::new();
        for item in &ctx.config.items {
            let name = normalize(item);
            let url = format!("{}/pypi/{name}/json", ctx.base_url());
            let project: Project = match ctx.get_json(&url, None).await {
                Ok(p) => p,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            let latest = project.info.version.as_str();
            // Releases up to the latest stable one: newer keys are pre-releases.
            let candidates = project
                .releases
                .iter()
                .filter(|(v, files)| valid_version(v) && canonical(files).is_some())
                .filter(|(v, _)| compare_versions(v, latest).is_le())
                .map(|(v, _)| v.clone());
            let chosen = newest(candidates, ctx.limits.max_versions);
            if chosen.is_empty() {
                failures.push(FetchError::malformed(
                    &url,
                    format!("no usable release up to {latest:?}"),
                ));
                continue;
            }
            for version in chosen {
                let Some(file) = project.releases.get(&version).and_then(|f| canonical(f)) else {
                    continue;
                };
                out.push(Artifact {
                    vendor: "pypi".into(),
                    executable_name: format!("{name} (pypi)"),
                    version,
                    platform: Platform::Universal,
                    arch: Arch::Universal,
                    url: file.url.clone(),
                    published: PublishedHashes {
                        sha256: file
                            .digests
                            .sha256
                            .as_deref()
                            .and_then(|h| hex_digest(h, 64)),
                        sha1: None,
                        md5: file.digests.md5.as_deref().and_then(|h| hex_digest(h, 32)),
                    },
                });
            }
        }
        ctx.settle(out, failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalize() {
        assert_eq!(normalize("Typing_Extensions"), "typing-extensions");
        assert_eq!(normalize("zope..interface"), "zope-interface");
    }
}
