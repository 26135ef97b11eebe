//! Python packages from PyPI's JSON API, for a configured list of packages.
//!
//! `https://pypi.org/pypi/<name>/json`: `info.version` (latest release), and `releases:
//! {"2.32.3": [{filename, url, packagetype ("sdist" | "bdist_wheel"), digests: {md5, sha256,
//! blake2b_256}, yanked}]}` (see the Warehouse JSON API docs).
//!
//! A package release is recorded as `name (pypi)` on universal/universal: its sdist, or its
//! pure wheel (`*-none-any.whl`) when there is no sdist. Its platform wheels are recorded
//! too, each under its own file name (several share one platform and arch, and more are
//! uploaded to old releases later), with platform and arch from the wheel's platform tag
//! (`{name}-{version}[-{build}]-{python}-{abi}-{platform}.whl`, the platform part possibly
//! several tags joined by `.`): `win_amd64`, `win32`, `win_arm64`; `macosx_*_x86_64`,
//! `macosx_*_arm64`, `macosx_*_universal2`; `manylinux*_x86_64`/`_aarch64` (and `linux_*`).
//! Of several wheels for one python tag, ABI, platform and arch (`manylinux_2_17` and
//! `manylinux_2_28` builds) the first by name is taken; `musllinux` and other platforms are
//! left out. A wheel is a zip: the shared libraries and executables inside it are recorded
//! as files of the package.

use std::collections::BTreeMap;

use async_trait::async_trait;
use model::{Arch, Platform};
use serde::Deserialize;

use crate::fetch::{
    Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig, resolve_url,
};
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

/// The platform and arch a wheel's platform tag names, `None` for pure wheels and platforms
/// not followed.
pub fn wheel_target(filename: &str) -> Option<(Platform, Arch)> {
    let stem = filename.strip_suffix(".whl")?;
    let tag = stem.rsplit('-').next()?;
    // Compound tags name one platform in several spellings; the first decides.
    let tag = tag.split('.').next()?;
    let arch_of = |suffix: &str| match suffix {
        "x86_64" | "amd64" => Some(Arch::Amd64),
        "aarch64" | "arm64" => Some(Arch::Arm64),
        "universal2" => Some(Arch::Universal),
        _ => None,
    };
    if tag == "win32" {
        return Some((Platform::Windows, Arch::X86));
    }
    if let Some(rest) = tag.strip_prefix("win_") {
        return arch_of(rest).map(|a| (Platform::Windows, a));
    }
    if tag.starts_with("macosx_") {
        let arch = ["x86_64", "arm64", "universal2"]
            .into_iter()
            .find(|a| tag.ends_with(&format!("_{a}")))?;
        return arch_of(arch).map(|a| (Platform::Darwin, a));
    }
    if tag.starts_with("manylinux") || tag.starts_with("linux_") {
        let arch = ["x86_64", "aarch64"]
            .into_iter()
            .find(|a| tag.ends_with(&format!("_{a}")))?;
        return arch_of(arch).map(|a| (Platform::Linux, a));
    }
    None
}

/// The platform wheels that stand for a release: one per python tag, ABI, platform and arch.
fn platform_wheels(files: &[File]) -> Vec<(&File, Platform, Arch)> {
    let mut chosen: BTreeMap<(String, Platform, Arch), &File> = BTreeMap::new();
    let mut wheels: Vec<&File> = files
        .iter()
        .filter(|f| !f.yanked && f.packagetype == "bdist_wheel")
        .collect();
    wheels.sort_by(|a, b| a.filename.cmp(&b.filename));
    for wheel in wheels {
        let Some((platform, arch)) = wheel_target(&wheel.filename) else {
            continue;
        };
        let parts: Vec<&str> = wheel.filename.rsplitn(4, '-').collect();
        let (Some(abi), Some(python)) = (parts.get(1), parts.get(2)) else {
            continue;
        };
        chosen
            .entry((format!("{python}-{abi}"), platform, arch))
            .or_insert(wheel);
    }
    chosen
        .into_iter()
        .map(|((_, platform, arch), file)| (file, platform, arch))
        .collect()
}

fn published(file: &File) -> PublishedHashes {
    PublishedHashes {
        sha256: file
            .digests
            .sha256
            .as_deref()
            .and_then(|h| hex_digest(h, 64)),
        sha1: None,
        md5: file.digests.md5.as_deref().and_then(|h| hex_digest(h, 32)),
    }
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
                .filter(|(v, files)| {
                    valid_version(v)
                        && (canonical(files).is_some() || !platform_wheels(files).is_empty())
                })
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
                let Some(files) = project.releases.get(&version) else {
                    continue;
                };
                // Mirrors (devpi, bandersnatch, Artifactory, Nexus) answer file URLs relative
                // to the document.
                let link = |file: &File| match resolve_url(&url, &file.url) {
                    Ok(u) => Some(u),
                    Err(e) => {
                        ctx.note(e);
                        None
                    }
                };
                if let Some(file) = canonical(files)
                    && let Some(file_url) = link(file)
                {
                    out.push(Artifact {
                        vendor: "pypi".into(),
                        executable_name: format!("{name} (pypi)"),
                        version: version.clone(),
                        platform: Platform::Universal,
                        arch: Arch::Universal,
                        url: file_url,
                        published: published(file),
                    });
                }
                for (file, platform, arch) in platform_wheels(files) {
                    let Some(file_url) = link(file) else {
                        continue;
                    };
                    out.push(Artifact {
                        vendor: "pypi".into(),
                        executable_name: file.filename.clone(),
                        version: version.clone(),
                        platform,
                        arch,
                        url: file_url,
                        published: published(file),
                    });
                }
            }
        }
        ctx.settle(out, failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wheel_tags_give_platform_and_arch() {
        let cases = [
            (
                "cryptography-44.0.0-cp39-abi3-win_amd64.whl",
                Some((Platform::Windows, Arch::Amd64)),
            ),
            (
                "cryptography-44.0.0-cp39-abi3-win32.whl",
                Some((Platform::Windows, Arch::X86)),
            ),
            (
                "numpy-2.2.1-cp313-cp313-win_arm64.whl",
                Some((Platform::Windows, Arch::Arm64)),
            ),
            (
                "cryptography-44.0.0-cp39-abi3-macosx_10_9_universal2.whl",
                Some((Platform::Darwin, Arch::Universal)),
            ),
            (
                "numpy-2.2.1-cp313-cp313-macosx_14_0_arm64.whl",
                Some((Platform::Darwin, Arch::Arm64)),
            ),
            (
                "numpy-2.2.1-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                Some((Platform::Linux, Arch::Amd64)),
            ),
            (
                "cryptography-44.0.0-cp39-abi3-manylinux_2_28_aarch64.whl",
                Some((Platform::Linux, Arch::Arm64)),
            ),
            (
                "cryptography-44.0.0-cp39-abi3-musllinux_1_2_x86_64.whl",
                None,
            ),
            ("requests-2.32.3-py3-none-any.whl", None),
            ("requests-2.32.3.tar.gz", None),
        ];
        for (name, expected) in cases {
            assert_eq!(wheel_target(name), expected, "{name}");
        }
    }

    #[test]
    fn names_normalize() {
        assert_eq!(normalize("Typing_Extensions"), "typing-extensions");
        assert_eq!(normalize("zope..interface"), "zope-interface");
    }
}
