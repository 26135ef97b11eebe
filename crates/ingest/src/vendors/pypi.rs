//! Python packages from PyPI's JSON API, for a configured list of packages.
//!
//! `https://pypi.org/pypi/<name>/json`: `info.version` (latest release), and `releases:
//! {"2.32.3": [{filename, url, packagetype ("sdist" | "bdist_wheel"), digests: {md5, sha256,
//! blake2b_256}, yanked}]}` (see the Warehouse JSON API docs).
//!
//! A package release is recorded as `name (pypi)` on universal/universal: its sdist, or its
//! pure wheel (`*-none-any.whl`) when there is no sdist. Every platform wheel of the release
//! is recorded too, each under its own file name, with platform and arch from the wheel's
//! platform tag (`{name}-{version}[-{build}]-{python}-{abi}-{platform}.whl`, the platform
//! part possibly several tags joined by `.`): `win_amd64`, `win32`, `win_arm64`;
//! `macosx_*_x86_64`, `macosx_*_arm64`, `macosx_*_universal2`; `manylinux*`, `musllinux_*`
//! and `linux_*` for `x86_64`, `aarch64`, `i686` and `armv7l`. pip picks a different
//! variant on different hosts (a `manylinux_2_17` or a `manylinux_2_28` build of one Python
//! tag and arch, `musllinux` on Alpine), so every one is followed. A wheel is a zip: the
//! shared libraries and executables inside it are recorded as files of the package, named
//! under the wheel's file name (`<wheel>/<path>`) because two variants hold different builds
//! of one path for one platform and arch, and one must not supersede the other.

use std::collections::BTreeMap;

use async_trait::async_trait;
use model::{Arch, Platform};
use serde::Deserialize;

use crate::fetch::{
    Artifact, FetchContext, FetchError, Fetcher, History, PublishedHashes, VendorConfig,
    resolve_url,
};
use crate::formats::{compare_versions, hex_digest, newest, valid_version};

pub(crate) struct PyPi;

impl PyPi {
    pub(crate) fn default_config() -> VendorConfig {
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

/// `/pypi/<name>/<version>/json`: one release, its files under `urls`.
#[derive(Deserialize)]
struct Release {
    info: Info,
    #[serde(default)]
    urls: Vec<File>,
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
    digests: PublishedDigests,
    #[serde(default)]
    yanked: bool,
    /// When the file was uploaded: the release date its history starts at.
    #[serde(default)]
    upload_time_iso_8601: Option<String>,
}

impl File {
    fn uploaded(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        let text = self.upload_time_iso_8601.as_deref()?;
        chrono::DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|t| t.with_timezone(&chrono::Utc))
    }
}

#[derive(Deserialize, Default)]
struct PublishedDigests {
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
/// without an arch of the model (`ppc64le`, `s390x`, `riscv64`).
pub(crate) fn wheel_target(filename: &str) -> Option<(Platform, Arch)> {
    let stem = filename.strip_suffix(".whl")?;
    let tag = stem.rsplit('-').next()?;
    // Compound tags name one platform in several spellings; the first decides.
    let tag = tag.split('.').next()?;
    let arch_of = |suffix: &str| match suffix {
        "x86_64" | "amd64" => Some(Arch::Amd64),
        "aarch64" | "arm64" => Some(Arch::Arm64),
        "universal2" => Some(Arch::Universal),
        "i686" => Some(Arch::X86),
        "armv7l" => Some(Arch::Arm),
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
    // glibc (manylinux, and plain `linux_` from private indexes) and musl (Alpine) builds.
    if ["manylinux", "musllinux_", "linux_"]
        .iter()
        .any(|p| tag.starts_with(p))
    {
        let arch = ["x86_64", "aarch64", "i686", "armv7l"]
            .into_iter()
            .find(|a| tag.ends_with(&format!("_{a}")))?;
        return arch_of(arch).map(|a| (Platform::Linux, a));
    }
    None
}

/// Every platform wheel of a release (not yanked, of a platform and arch followed), by name.
fn platform_wheels(files: &[File]) -> Vec<(&File, Platform, Arch)> {
    let mut wheels: Vec<(&File, Platform, Arch)> = files
        .iter()
        .filter(|f| !f.yanked && f.packagetype == "bdist_wheel")
        .filter_map(|f| wheel_target(&f.filename).map(|(p, a)| (f, p, a)))
        .collect();
    wheels.sort_by(|a, b| a.0.filename.cmp(&b.0.filename));
    wheels.dedup_by(|a, b| a.0.filename == b.0.filename);
    wheels
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
        // Past versions within the history horizon, recorded from their published digests.
        let mut past_urls = Vec::new();
        let mut pinned_urls = Vec::new();
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
            if let Some(pin) = pin {
                // The project document lists every release's files (`releases`), and it is
                // the one document every mirror serves; `/pypi/<name>/<version>/json` (that
                // release's files under `urls`) is asked only for a release it leaves out.
                let project_url = format!("{}/pypi/{name}/json", ctx.base_url());
                let listed = match ctx.get_json::<Project>(&project_url, None).await {
                    Ok(mut project) => project.releases.remove(&pin).filter(|f| !f.is_empty()),
                    Err(_) => None,
                };
                let (url, release) = match listed {
                    Some(files) => (
                        project_url,
                        Release {
                            info: Info {
                                version: pin.clone(),
                            },
                            urls: files,
                        },
                    ),
                    None => {
                        let url = format!("{}/pypi/{name}/{pin}/json", ctx.base_url());
                        match ctx.get_json::<Release>(&url, None).await {
                            Ok(r) => (url, r),
                            Err(e) => {
                                failures.push(e);
                                continue;
                            }
                        }
                    }
                };
                let version = release.info.version;
                if !valid_version(&version) {
                    failures.push(FetchError::malformed(
                        &url,
                        format!("unusable version {}", model::shown(&version)),
                    ));
                    continue;
                }
                let before = out.len();
                release_artifacts(ctx, &url, &name, &version, &release.urls, &mut out, true);
                if out.len() == before {
                    failures.push(FetchError::malformed(
                        &url,
                        format!("release {version} has no usable file"),
                    ));
                }
                pinned_urls.extend(out[before..].iter().map(|a| a.url.clone()));
                continue;
            }
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
            let chosen = newest(candidates, horizon.max(1));
            if chosen.is_empty() {
                failures.push(FetchError::malformed(
                    &url,
                    format!("no usable release up to {latest:?}"),
                ));
                continue;
            }
            // With a history horizon, every version but the newest is history: recorded
            // from its published digests, not downloaded.
            let past = if ctx.config.history.is_some() {
                chosen.len() - 1
            } else {
                0
            };
            for (i, version) in chosen.iter().enumerate() {
                let Some(files) = project.releases.get(version) else {
                    continue;
                };
                let before = out.len();
                release_artifacts(ctx, &url, &name, version, files, &mut out, i < past);
                if i < past {
                    past_urls.extend(out[before..].iter().map(|a| a.url.clone()));
                }
            }
        }
        // A pinned version is read whole even where a horizon also takes it in.
        for url in past_urls {
            if !pinned_urls.contains(&url) {
                ctx.history_only(&url);
            }
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|a| seen.insert(a.url.clone()));
        ctx.settle(out, failures)
    }
}

/// A configured item: a project name, optionally pinned with PEP 440's `==`
/// (`cryptography==41.0.7`). Other specifiers (`>=`, `~=`, `!=`) name no single release.
fn parse_item(item: &str) -> Result<(String, Option<String>), FetchError> {
    let item = item.trim();
    let refuse = |why: &str| {
        FetchError::malformed(
            "vendors.pypi.items",
            format!("{}: {why}", model::shown(item)),
        )
    };
    let (name, pin) = match item.split_once("==") {
        Some((name, version)) => (name.trim(), Some(version.trim())),
        None => (item, None),
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(refuse(
            "not a project name, nor `name==version` (other specifiers are not followed)",
        ));
    }
    match pin {
        Some(v) if !valid_version(v) || v.starts_with('=') => {
            Err(refuse("the pinned version is not a version"))
        }
        Some(v) => Ok((normalize(name), Some(v.to_owned()))),
        None => Ok((normalize(name), None)),
    }
}

/// The artifacts of one release's files: its canonical file and its platform wheels, each
/// link resolved against the document that named it.
fn release_artifacts(
    ctx: &FetchContext,
    document: &str,
    name: &str,
    version: &str,
    files: &[File],
    out: &mut Vec<Artifact>,
    past: bool,
) {
    // A past version's files start their history at their upload time.
    let dated = |file: &File, url: &str| {
        if past && let Some(at) = file.uploaded() {
            ctx.set_released(url, at);
        }
    };
    // Mirrors (devpi, bandersnatch, Artifactory, Nexus) answer file URLs relative to the
    // document.
    let link = |file: &File| match resolve_url(document, &file.url) {
        Ok(u) => Some(u),
        Err(e) => {
            ctx.note(e);
            None
        }
    };
    if let Some(file) = canonical(files)
        && let Some(file_url) = link(file)
    {
        dated(file, &file_url);
        out.push(Artifact {
            vendor: "pypi".into(),
            executable_name: format!("{name} (pypi)"),
            version: version.to_owned(),
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
        dated(file, &file_url);
        ctx.name_members_under_archive(&file_url);
        out.push(Artifact {
            vendor: "pypi".into(),
            executable_name: file.filename.clone(),
            version: version.to_owned(),
            platform,
            arch,
            url: file_url,
            published: published(file),
        });
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
                Some((Platform::Linux, Arch::Amd64)),
            ),
            (
                "cryptography-44.0.0-cp39-abi3-musllinux_1_2_aarch64.whl",
                Some((Platform::Linux, Arch::Arm64)),
            ),
            (
                "Pillow-10.2.0-cp311-cp311-manylinux_2_17_i686.manylinux2014_i686.whl",
                Some((Platform::Linux, Arch::X86)),
            ),
            (
                "numpy-1.26.4-cp311-cp311-linux_armv7l.whl",
                Some((Platform::Linux, Arch::Arm)),
            ),
            (
                "numpy-1.26.4-cp311-cp311-manylinux_2_17_ppc64le.manylinux2014_ppc64le.whl",
                None,
            ),
            ("numpy-1.26.4-cp311-cp311-musllinux_1_1_s390x.whl", None),
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
