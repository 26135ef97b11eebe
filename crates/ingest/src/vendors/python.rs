//! Python installers from python.org's downloads API.
//!
//! `https://www.python.org/api/v2/downloads/release/?is_published=true&pre_release=false`
//! lists the releases (`[{name: "Python 3.13.1", version: 3, is_published, pre_release,
//! release_date, resource_uri: ".../release/<id>/"}]`); the newest release of each of the
//! two newest minor series is followed. `/api/v2/downloads/release_file/?release=<id>`
//! lists its files (`[{name, url, is_source, md5_sum, sha256_sum, filesize,
//! sigstore_bundle_file...}]`). Each installer and embeddable package is an artifact:
//! `python-<v>-amd64.exe`, `python-<v>.exe` (x86), `python-<v>-arm64.exe`,
//! `python-<v>-embed-*.zip`, `python-<v>-macos11.pkg` (universal). Where a file has no
//! `sha256_sum` it is downloaded and its `md5_sum` checked.

use std::collections::BTreeMap;

use async_trait::async_trait;
use model::{Arch, Platform};
use serde::Deserialize;

use crate::fetch::{Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig};
use crate::formats::{compare_versions, file_name, hex_digest, valid_version};

pub(crate) struct PythonOrg;

impl PythonOrg {
    pub(crate) fn default_config() -> VendorConfig {
        VendorConfig::new("https://www.python.org")
    }
}

/// Minor series followed, newest first.
const SERIES: usize = 2;

#[derive(Deserialize)]
struct Release {
    name: String,
    #[serde(default)]
    is_published: bool,
    #[serde(default)]
    pre_release: bool,
    resource_uri: String,
}

#[derive(Deserialize)]
struct ReleaseFile {
    url: String,
    #[serde(default)]
    is_source: bool,
    md5_sum: Option<String>,
    sha256_sum: Option<String>,
}

/// The platform and arch of an installer by its file name, `None` for other files.
pub fn target(name: &str) -> Option<(Platform, Arch)> {
    let name = name.to_ascii_lowercase();
    if name.ends_with(".pkg") {
        return Some((Platform::Darwin, Arch::Universal));
    }
    let stem = name
        .strip_suffix(".exe")
        .or_else(|| name.strip_suffix(".zip").filter(|s| s.contains("-embed-")))?;
    if stem.ends_with("-amd64") {
        Some((Platform::Windows, Arch::Amd64))
    } else if stem.ends_with("-arm64") {
        Some((Platform::Windows, Arch::Arm64))
    } else if stem.ends_with("-win32") || !stem.contains("-embed-") {
        Some((Platform::Windows, Arch::X86))
    } else {
        None
    }
}

#[async_trait]
impl Fetcher for PythonOrg {
    fn id(&self) -> &str {
        "python"
    }

    fn vendor(&self) -> &str {
        "Python Software Foundation"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let url = format!(
            "{}/api/v2/downloads/release/?is_published=true&pre_release=false",
            ctx.base_url()
        );
        let releases: Vec<Release> = ctx.get_json(&url, None).await?;
        // The newest release of each minor series.
        let mut series: BTreeMap<String, (String, String)> = BTreeMap::new();
        for r in releases {
            let Some(version) = r.name.strip_prefix("Python ") else {
                continue;
            };
            if !r.is_published || r.pre_release || !valid_version(version) {
                continue;
            }
            if !version.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
                continue;
            }
            let minor: String = version.split('.').take(2).collect::<Vec<_>>().join(".");
            let id = r
                .resource_uri
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or("")
                .to_owned();
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let newer = series
                .get(&minor)
                .is_none_or(|(known, _)| compare_versions(version, known).is_gt());
            if newer {
                series.insert(minor, (version.to_owned(), id));
            }
        }
        let mut chosen: Vec<(String, String)> = series.into_values().collect();
        chosen.sort_by(|a, b| compare_versions(&b.0, &a.0));
        chosen.truncate(SERIES);
        if chosen.is_empty() {
            return Err(FetchError::malformed(&url, "no published release"));
        }
        let mut out = Vec::new();
        let mut failures = Vec::new();
        for (version, id) in chosen {
            let url = format!(
                "{}/api/v2/downloads/release_file/?release={id}",
                ctx.base_url()
            );
            let files: Vec<ReleaseFile> = match ctx.get_json(&url, None).await {
                Ok(f) => f,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            for f in files {
                if f.is_source || !f.url.starts_with("https://") {
                    continue;
                }
                let name = file_name(&f.url);
                let Some((platform, arch)) = target(name) else {
                    continue;
                };
                out.push(Artifact {
                    vendor: self.vendor().into(),
                    executable_name: name.into(),
                    version: version.clone(),
                    platform,
                    arch,
                    url: f.url.clone(),
                    published: PublishedHashes {
                        sha256: f.sha256_sum.as_deref().and_then(|h| hex_digest(h, 64)),
                        sha1: None,
                        md5: f.md5_sum.as_deref().and_then(|h| hex_digest(h, 32)),
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
    fn installer_names_give_platform_and_arch() {
        let cases = [
            (
                "python-3.13.1-amd64.exe",
                Some((Platform::Windows, Arch::Amd64)),
            ),
            ("python-3.13.1.exe", Some((Platform::Windows, Arch::X86))),
            (
                "python-3.13.1-arm64.exe",
                Some((Platform::Windows, Arch::Arm64)),
            ),
            (
                "python-3.13.1-embed-amd64.zip",
                Some((Platform::Windows, Arch::Amd64)),
            ),
            (
                "python-3.13.1-embed-win32.zip",
                Some((Platform::Windows, Arch::X86)),
            ),
            (
                "python-3.13.1-macos11.pkg",
                Some((Platform::Darwin, Arch::Universal)),
            ),
            ("Python-3.13.1.tar.xz", None),
            ("python-3.13.1-docs-html.zip", None),
        ];
        for (name, expected) in cases {
            assert_eq!(target(name), expected, "{name}");
        }
    }
}
