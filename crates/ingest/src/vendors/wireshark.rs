//! Wireshark from its official download site.
//!
//! `https://www.wireshark.org/download/` is a directory listing holding a
//! `SIGNATURES-<version>.txt` for each release: the newest stable release (an even second
//! number; odd ones are development releases) is followed. That file lists each file of the
//! release as `<name> (<size> bytes)` then `SHA1(<name>)=<hex>` and `SHA256(<name>)=<hex>`
//! lines. The Windows installers and portable package are in `download/win64/`, the macOS
//! disk images in `download/osx/`.

use async_trait::async_trait;
use model::{Arch, Platform};

use crate::fetch::{Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig};
use crate::formats::{encode_path, hex_digest, listing_links, newest};

pub struct Wireshark;

impl Wireshark {
    pub(crate) fn default_config() -> VendorConfig {
        VendorConfig::new("https://www.wireshark.org")
    }
}

/// `ALGO(<name>)=<hex>` lines of a SIGNATURES file: (name, hex) for `algo`.
pub fn signatures(text: &str, algo: &str, hex_len: usize) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix(algo)?.strip_prefix('(')?;
            let (name, hash) = rest.rsplit_once(")=")?;
            Some((name.to_owned(), hex_digest(hash, hex_len)?))
        })
        .collect()
}

/// Where a file of release `version` is, with its platform and arch; `None` for files not
/// followed (sources, other platforms).
pub fn locate(name: &str, version: &str) -> Option<(&'static str, Platform, Arch)> {
    let win = [
        format!("Wireshark-{version}-x64.exe"),
        format!("Wireshark-{version}-x64.msi"),
        format!("WiresharkPortable64_{version}.paf.exe"),
    ];
    if win.iter().any(|w| w == name) {
        return Some(("win64", Platform::Windows, Arch::Amd64));
    }
    if name == format!("Wireshark {version} Arm 64.dmg") {
        return Some(("osx", Platform::Darwin, Arch::Arm64));
    }
    if name == format!("Wireshark {version} Intel 64.dmg") {
        return Some(("osx", Platform::Darwin, Arch::Amd64));
    }
    None
}

/// A stable release: `major.minor.patch` with an even minor.
fn stable(version: &str) -> bool {
    let parts: Vec<&str> = version.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && parts[1].parse::<u32>().is_ok_and(|m| m % 2 == 0)
}

#[async_trait]
impl Fetcher for Wireshark {
    fn id(&self) -> &str {
        "wireshark"
    }

    fn vendor(&self) -> &str {
        "Wireshark Foundation"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let dir = format!("{}/download", ctx.base_url());
        let listing = ctx.get_text(&format!("{dir}/")).await?;
        let versions = listing_links(&listing).into_iter().filter_map(|link| {
            let v = link.strip_prefix("SIGNATURES-")?.strip_suffix(".txt")?;
            stable(v).then(|| v.to_owned())
        });
        let chosen = newest(versions, ctx.limits.max_versions);
        if chosen.is_empty() {
            return Err(FetchError::malformed(
                &dir,
                "no SIGNATURES file of a stable release",
            ));
        }
        let mut out = Vec::new();
        let mut failures = Vec::new();
        for version in chosen {
            let url = format!("{dir}/SIGNATURES-{version}.txt");
            let text = match ctx.get_text(&url).await {
                Ok(t) => t,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            let sha1 = signatures(&text, "SHA1", 40);
            for (name, sha256) in signatures(&text, "SHA256", 64) {
                let Some((sub, platform, arch)) = locate(&name, &version) else {
                    continue;
                };
                out.push(Artifact {
                    vendor: self.vendor().into(),
                    executable_name: name.clone(),
                    version: version.clone(),
                    platform,
                    arch,
                    url: format!("{dir}/{sub}/{}", encode_path(&name)),
                    published: PublishedHashes {
                        sha256: Some(sha256),
                        sha1: sha1
                            .iter()
                            .find(|(n, _)| *n == name)
                            .map(|(_, h)| h.clone()),
                        md5: None,
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
    fn stable_releases_have_an_even_minor() {
        assert!(stable("4.6.6") && stable("4.4.12"));
        assert!(!stable("4.5.0") && !stable("4.6") && !stable("4.6.0rc1"));
    }
}
