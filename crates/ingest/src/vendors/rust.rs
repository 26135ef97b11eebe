//! Rust toolchains from the stable channel manifest.
//!
//! `https://static.rust-lang.org/dist/channel-rust-stable.toml` (manifest v2, as rustup reads
//! it): `[pkg.rust] version = "1.83.0 (90b35a623 2024-11-26)"`, then one table per host
//! `[pkg.rust.target.x86_64-pc-windows-msvc]` with `available`, `url`, `hash` (SHA-256 of the
//! .tar.gz), `xz_url` and `xz_hash`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use model::{Arch, Platform};
use serde::Deserialize;

use crate::fetch::{Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig};
use crate::formats::{file_name, hex_digest, valid_version};

pub struct Rust;

impl Rust {
    pub(crate) fn default_config() -> VendorConfig {
        VendorConfig::new("https://static.rust-lang.org")
    }
}

#[derive(Deserialize)]
struct Manifest {
    pkg: BTreeMap<String, Package>,
}

#[derive(Deserialize)]
struct Package {
    version: String,
    #[serde(default)]
    target: BTreeMap<String, Target>,
}

#[derive(Deserialize)]
struct Target {
    #[serde(default)]
    available: bool,
    url: Option<String>,
    hash: Option<String>,
    xz_url: Option<String>,
    xz_hash: Option<String>,
}

/// A host target triple as platform and arch; targets the service does not track give `None`.
pub(crate) fn target_platform(triple: &str) -> Option<(Platform, Arch)> {
    let arch = match triple.split('-').next()? {
        "x86_64" => Arch::Amd64,
        "aarch64" => Arch::Arm64,
        "i686" | "i586" => Arch::X86,
        "armv7" | "arm" => Arch::Arm,
        _ => return None,
    };
    let platform = if triple.contains("-windows-") {
        Platform::Windows
    } else if triple.ends_with("-apple-darwin") {
        Platform::Darwin
    } else if triple.contains("-linux-android") {
        Platform::Android
    } else if triple.contains("-linux-") {
        Platform::Linux
    } else {
        return None;
    };
    Some((platform, arch))
}

#[async_trait]
impl Fetcher for Rust {
    fn id(&self) -> &str {
        "rust"
    }

    fn vendor(&self) -> &str {
        "Rust"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let url = format!("{}/dist/channel-rust-stable.toml", ctx.base_url());
        let text = ctx.get_text(&url).await?;
        let manifest: Manifest = toml::from_str(&text)
            .map_err(|e| FetchError::malformed(&url, format!("invalid channel manifest: {e}")))?;
        let rust = manifest
            .pkg
            .get("rust")
            .ok_or_else(|| FetchError::malformed(&url, "no [pkg.rust] table"))?;
        // "1.83.0 (90b35a623 2024-11-26)": the release number is the first word.
        let version = rust.version.split_whitespace().next().unwrap_or("");
        if !valid_version(version) {
            return Err(FetchError::malformed(
                &url,
                format!("pkg.rust.version {:?} names no release", rust.version),
            ));
        }
        let mut out = Vec::new();
        for (triple, target) in &rust.target {
            let Some((platform, arch)) = target_platform(triple) else {
                continue;
            };
            if !target.available {
                continue;
            }
            let files = [
                (&target.url, &target.hash),
                (&target.xz_url, &target.xz_hash),
            ];
            for (file_url, hash) in files {
                let Some(file_url) = file_url else { continue };
                out.push(Artifact {
                    vendor: self.vendor().into(),
                    executable_name: file_name(file_url).into(),
                    version: version.into(),
                    platform,
                    arch,
                    url: file_url.clone(),
                    published: PublishedHashes {
                        sha256: hash.as_deref().and_then(|h| hex_digest(h, 64)),
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
    fn triples_map_to_platforms() {
        assert_eq!(
            target_platform("x86_64-pc-windows-msvc"),
            Some((Platform::Windows, Arch::Amd64))
        );
        assert_eq!(
            target_platform("aarch64-apple-darwin"),
            Some((Platform::Darwin, Arch::Arm64))
        );
        assert_eq!(
            target_platform("armv7-unknown-linux-gnueabihf"),
            Some((Platform::Linux, Arch::Arm))
        );
        assert_eq!(
            target_platform("i686-pc-windows-gnu"),
            Some((Platform::Windows, Arch::X86))
        );
        assert_eq!(target_platform("powerpc64le-unknown-linux-gnu"), None);
        assert_eq!(target_platform("x86_64-unknown-freebsd"), None);
    }
}
