//! Android apps from the F-Droid repository index, for a configured list of app ids.
//!
//! `https://f-droid.org/repo/index-v2.json`: `packages.<app id>.versions.<key>` with
//! `file: {name: "/org.fdroid.fdroid_1021050.apk", sha256, size}` (name relative to the repo)
//! and `manifest: {versionName, versionCode, nativecode: [ABIs]}`. An app often ships one APK
//! per ABI under the same versionName, each with its own versionCode. Some versions carry no
//! `versionName` (the field is optional in the index); those are skipped, as is any version
//! entry that does not parse, so one odd entry never costs the rest of the index.

use std::collections::BTreeMap;

use async_trait::async_trait;
use model::{Arch, Platform};
use serde::Deserialize;

use crate::fetch::{Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig};
use crate::formats::{file_name, hex_digest, valid_version};

pub(crate) struct FDroid;

impl FDroid {
    pub(crate) fn default_config() -> VendorConfig {
        VendorConfig::new("https://f-droid.org/repo").with_items(&[
            "org.fdroid.fdroid",
            "org.videolan.vlc",
            "org.mozilla.fennec_fdroid",
        ])
    }
}

#[derive(Deserialize)]
struct Index {
    packages: BTreeMap<String, App>,
}

#[derive(Deserialize)]
struct App {
    /// Parsed one by one (see [`Version::parse`]).
    #[serde(default)]
    versions: BTreeMap<String, serde_json::Value>,
}

#[derive(Deserialize)]
struct Version {
    file: File,
    manifest: Manifest,
}

#[derive(Deserialize)]
struct File {
    name: String,
    sha256: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    version_name: Option<String>,
    #[serde(default)]
    version_code: u64,
    #[serde(default)]
    nativecode: Vec<String>,
}

impl Version {
    /// A version entry with what a record needs (a file and a versionName), or `None`.
    fn parse(value: &serde_json::Value) -> Option<(Self, String)> {
        let v = Version::deserialize(value).ok()?;
        let name = v.manifest.version_name.clone()?;
        Some((v, name))
    }
}

/// The arch of an APK from the ABIs it carries: none (pure Java/Kotlin) or several (a fat
/// APK) run anywhere; one names its arch. `None` for an ABI the service does not track.
pub(crate) fn abi_arch(nativecode: &[String]) -> Option<Arch> {
    match nativecode {
        [abi] => match abi.as_str() {
            "arm64-v8a" => Some(Arch::Arm64),
            "armeabi-v7a" | "armeabi" => Some(Arch::Arm),
            "x86_64" => Some(Arch::Amd64),
            "x86" => Some(Arch::X86),
            _ => None,
        },
        _ => Some(Arch::Universal),
    }
}

#[async_trait]
impl Fetcher for FDroid {
    fn id(&self) -> &str {
        "fdroid"
    }

    fn vendor(&self) -> &str {
        "F-Droid"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let url = format!("{}/index-v2.json", ctx.base_url());
        let index: Index = ctx.get_json(&url, None).await?;
        let mut out = Vec::new();
        for id in &ctx.config.items {
            let Some(app) = index.packages.get(id) else {
                ctx.note(FetchError::malformed(
                    &url,
                    format!("app {id} is not in the index"),
                ));
                continue;
            };
            let versions: Vec<(Version, String)> =
                app.versions.values().filter_map(Version::parse).collect();
            // Newest versionNames by their highest versionCode; every ABI split of each.
            let mut top: BTreeMap<&str, u64> = BTreeMap::new();
            for (v, name) in &versions {
                let code = top.entry(name.as_str()).or_default();
                *code = (*code).max(v.manifest.version_code);
            }
            let mut names: Vec<(&str, u64)> = top.into_iter().collect();
            names.sort_by_key(|&(_, code)| code);
            let keep: Vec<&str> = names
                .iter()
                .rev()
                .take(ctx.limits.max_versions)
                .map(|&(n, _)| n)
                .collect();
            for (v, name) in &versions {
                let name = name.as_str();
                if !keep.contains(&name) || !valid_version(name) {
                    continue;
                }
                let Some(arch) = abi_arch(&v.manifest.nativecode) else {
                    continue;
                };
                let path = v.file.name.trim_start_matches('/');
                out.push(Artifact {
                    vendor: self.vendor().into(),
                    executable_name: file_name(path).into(),
                    version: name.into(),
                    platform: Platform::Android,
                    arch,
                    url: format!("{}/{path}", ctx.base_url()),
                    published: PublishedHashes {
                        sha256: v.file.sha256.as_deref().and_then(|h| hex_digest(h, 64)),
                        ..Default::default()
                    },
                });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abis_map_to_arches() {
        let abis = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(abi_arch(&abis(&[])), Some(Arch::Universal));
        assert_eq!(abi_arch(&abis(&["arm64-v8a"])), Some(Arch::Arm64));
        assert_eq!(
            abi_arch(&abis(&["arm64-v8a", "x86_64"])),
            Some(Arch::Universal)
        );
        assert_eq!(abi_arch(&abis(&["mips"])), None);
    }
}
