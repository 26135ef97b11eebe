//! Eclipse Temurin (the Adoptium OpenJDK builds) from the Adoptium API.
//!
//! `https://api.adoptium.net/v3/info/available_releases` names the feature releases
//! (`most_recent_lts`, `most_recent_feature_release`); both are followed.
//! `/v3/assets/latest/<feature>/hotspot?vendor=eclipse` lists the newest build of a feature
//! release for every target: `[{binary: {os, architecture, image_type, package: {name,
//! link, checksum, size}, installer: {...}}, release_name, version: {...}}]`, the `checksum`
//! being the file's SHA-256. Each package and installer of a `jdk` or `jre` image for
//! Windows, Linux or macOS on x64, x86 or aarch64 is an artifact (Adoptium API v3, its
//! OpenAPI description at `api.adoptium.net/q/swagger-ui`).

use async_trait::async_trait;
use model::{Arch, Platform};
use serde::Deserialize;

use crate::fetch::{Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig};
use crate::formats::hex_digest;

pub struct Temurin;

impl Temurin {
    pub(crate) fn default_config() -> VendorConfig {
        VendorConfig::new("https://api.adoptium.net")
    }
}

#[derive(Deserialize)]
struct Available {
    most_recent_lts: u32,
    most_recent_feature_release: u32,
}

#[derive(Deserialize)]
struct Asset {
    binary: Binary,
    release_name: String,
}

#[derive(Deserialize)]
struct Binary {
    os: String,
    architecture: String,
    image_type: String,
    package: Option<Package>,
    installer: Option<Package>,
}

#[derive(Deserialize)]
struct Package {
    name: String,
    link: String,
    checksum: Option<String>,
}

/// The platform and arch of an Adoptium target, `None` for targets not followed.
pub fn target(os: &str, architecture: &str) -> Option<(Platform, Arch)> {
    let platform = match os {
        "windows" => Platform::Windows,
        "linux" => Platform::Linux,
        "mac" => Platform::Darwin,
        _ => return None,
    };
    let arch = match architecture {
        "x64" => Arch::Amd64,
        "x32" | "x86" => Arch::X86,
        "aarch64" => Arch::Arm64,
        _ => return None,
    };
    Some((platform, arch))
}

#[async_trait]
impl Fetcher for Temurin {
    fn id(&self) -> &str {
        "temurin"
    }

    fn vendor(&self) -> &str {
        "Eclipse Adoptium"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let url = format!("{}/v3/info/available_releases", ctx.base_url());
        let available: Available = ctx.get_json(&url, None).await?;
        let mut features = vec![
            available.most_recent_lts,
            available.most_recent_feature_release,
        ];
        features.dedup();
        let mut out = Vec::new();
        let mut failures = Vec::new();
        for feature in features {
            let url = format!(
                "{}/v3/assets/latest/{feature}/hotspot?vendor=eclipse",
                ctx.base_url()
            );
            let assets: Vec<Asset> = match ctx.get_json(&url, None).await {
                Ok(a) => a,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            for asset in assets {
                let b = &asset.binary;
                if !matches!(b.image_type.as_str(), "jdk" | "jre") {
                    continue;
                }
                let Some((platform, arch)) = target(&b.os, &b.architecture) else {
                    continue;
                };
                let version = asset
                    .release_name
                    .trim_start_matches("jdk-")
                    .trim_start_matches("jdk")
                    .to_owned();
                for file in [&b.package, &b.installer].into_iter().flatten() {
                    let Some(sha256) = file.checksum.as_deref().and_then(|h| hex_digest(h, 64))
                    else {
                        ctx.note(FetchError::malformed(
                            &url,
                            format!("{}: no SHA-256", file.name),
                        ));
                        continue;
                    };
                    out.push(Artifact {
                        vendor: self.vendor().into(),
                        executable_name: file.name.clone(),
                        version: version.clone(),
                        platform,
                        arch,
                        url: file.link.clone(),
                        published: PublishedHashes {
                            sha256: Some(sha256),
                            ..Default::default()
                        },
                    });
                }
            }
        }
        ctx.settle(out, failures)
    }
}
