//! Microsoft Edge from its official release API.
//!
//! `https://edgeupdates.microsoft.com/api/products` is a JSON array of channels
//! (`[{Product: "Stable", Releases: [{ReleaseId, Platform, Architecture, ProductVersion,
//! PublishedTime, Artifacts: [{ArtifactName, Location, Hash, HashAlgorithm, SizeInBytes}]}]}]`).
//! The newest `Stable` release of each platform (`Windows`, `MacOS`, `Linux`) and
//! architecture (`x86`, `x64`, `arm64`, `universal`) is taken, each artifact whose hash is a
//! SHA-256 (the MSI, the macOS package, the Linux `.deb` and `.rpm`) being a file.

use std::collections::BTreeMap;

use async_trait::async_trait;
use model::{Arch, Platform};
use serde::Deserialize;

use crate::fetch::{Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig};
use crate::formats::{compare_versions, file_name, hex_digest};

pub struct Edge;

impl Edge {
    pub(crate) fn default_config() -> VendorConfig {
        VendorConfig::new("https://edgeupdates.microsoft.com")
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Product {
    product: String,
    #[serde(default)]
    releases: Vec<Release>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Release {
    platform: String,
    architecture: String,
    product_version: String,
    #[serde(default)]
    artifacts: Vec<EdgeArtifact>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct EdgeArtifact {
    location: String,
    hash: Option<String>,
    hash_algorithm: Option<String>,
}

/// The platform and arch of an Edge release, `None` for those not followed.
pub fn target(platform: &str, architecture: &str) -> Option<(Platform, Arch)> {
    let platform = match platform {
        "Windows" => Platform::Windows,
        "MacOS" => Platform::Darwin,
        "Linux" => Platform::Linux,
        _ => return None,
    };
    let arch = match architecture {
        "x64" => Arch::Amd64,
        "x86" => Arch::X86,
        "arm64" => Arch::Arm64,
        "universal" => Arch::Universal,
        _ => return None,
    };
    Some((platform, arch))
}

#[async_trait]
impl Fetcher for Edge {
    fn id(&self) -> &str {
        "edge"
    }

    fn vendor(&self) -> &str {
        "Microsoft"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let url = format!("{}/api/products", ctx.base_url());
        let products: Vec<Product> = ctx.get_json(&url, None).await?;
        let stable = products
            .into_iter()
            .find(|p| p.product == "Stable")
            .ok_or_else(|| FetchError::malformed(&url, "no Stable channel"))?;
        let mut newest: BTreeMap<(Platform, Arch), Release> = BTreeMap::new();
        for release in stable.releases {
            let Some(key) = target(&release.platform, &release.architecture) else {
                continue;
            };
            if release.artifacts.is_empty() {
                continue;
            }
            let newer = newest.get(&key).is_none_or(|known| {
                compare_versions(&release.product_version, &known.product_version).is_gt()
            });
            if newer {
                newest.insert(key, release);
            }
        }
        let mut out = Vec::new();
        for ((platform, arch), release) in newest {
            for a in release.artifacts {
                let sha256 = a
                    .hash
                    .as_deref()
                    .filter(|_| a.hash_algorithm.as_deref() == Some("SHA256"))
                    .and_then(|h| hex_digest(h, 64));
                let Some(sha256) = sha256 else {
                    continue;
                };
                if !a.location.starts_with("https://") {
                    continue;
                }
                out.push(Artifact {
                    vendor: self.vendor().into(),
                    executable_name: file_name(&a.location).into(),
                    version: release.product_version.clone(),
                    platform,
                    arch,
                    url: a.location,
                    published: PublishedHashes {
                        sha256: Some(sha256),
                        ..Default::default()
                    },
                });
            }
        }
        Ok(out)
    }
}
