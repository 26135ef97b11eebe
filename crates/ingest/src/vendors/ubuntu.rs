//! Ubuntu packages from an archive mirror, following the same signed chain as Debian
//! ([`super::debian`]) with Ubuntu's archive key.
//!
//! Releases are discovered from `https://changelogs.ubuntu.com/meta-release`, the list the
//! release upgrader reads: one deb822 paragraph per release (`Dist`, `Name`, `Version`,
//! `Supported`, `Release-File`...); every release with `Supported: 1` is followed. For each,
//! the release pocket (`dists/<dist>/`) and the updates pocket (`dists/<dist>-updates/`,
//! where security fixes are copied too) are read: `InRelease` verified against the shipped
//! archive key, then `main`'s `Packages` index of each architecture the archive lists, then
//! the `.deb` files with the SHA-256 the index gives and the files of their `data.tar.*`.
//! The default mirror carries `amd64` (Ubuntu publishes `arm64` on its separate ports
//! archive); versions come from the indexes.

use async_trait::async_trait;

use super::debian::{Debian, Selection, paragraphs};
use crate::fetch::{Artifact, FetchContext, FetchError, Fetcher, VendorConfig};

/// The archive key that signs Ubuntu's `InRelease` files (see `keys/SOURCE.md`).
pub(crate) const ARCHIVE_KEYS: &[&str] = &[include_str!("../../keys/ubuntu-archive-2018.asc")];

/// Binary packages holding what attackers replace or imitate on servers (the versioned
/// Python interpreter package differs by release; each release has one of these).
pub(crate) const DEFAULT_PACKAGES: &[&str] = &[
    "coreutils",
    "util-linux",
    "procps",
    "openssh-server",
    "openssh-client",
    "sudo",
    "bash",
    "systemd",
    "cron",
    "iproute2",
    "net-tools",
    "curl",
    "wget",
    "openssl",
    "libc-bin",
    "libc6",
    "passwd",
    "login",
    "python3.10-minimal",
    "python3.12-minimal",
    "python3.13-minimal",
    "python3.14-minimal",
    "perl-base",
    "busybox",
    "busybox-static",
];

/// The base system (`Priority: required`, `important`, `standard`) and the tools above.
fn default_items() -> Vec<&'static str> {
    let mut items = vec![super::debian::BASE_SYSTEM];
    items.extend_from_slice(DEFAULT_PACKAGES);
    items
}

pub struct Ubuntu {
    archive: Debian,
}

impl Ubuntu {
    /// Ubuntu with its archive key.
    pub fn new() -> Self {
        Self::with_keys(ARCHIVE_KEYS)
    }

    /// An archive signed with these armored keys (tests use a key made at test time).
    pub fn with_keys(armored: &[&str]) -> Self {
        Self {
            archive: Debian::with_keys(armored),
        }
    }

    /// Releases from the upgrader's list, packages from an HTTPS mirror of the archive.
    pub(crate) fn default_config() -> VendorConfig {
        VendorConfig::new("https://changelogs.ubuntu.com")
            .with_files_url("https://mirrors.edge.kernel.org/ubuntu")
            .with_items(&default_items())
    }
}

impl Default for Ubuntu {
    fn default() -> Self {
        Self::new()
    }
}

/// The code names of the supported releases a `meta-release` file lists, oldest first.
pub(crate) fn supported_releases(meta_release: &str) -> Vec<String> {
    paragraphs(meta_release)
        .filter(|p| p.get("Supported") == Some(&"1"))
        .filter_map(|p| p.get("Dist").copied())
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_lowercase()))
        .map(str::to_owned)
        .collect()
}

#[async_trait]
impl Fetcher for Ubuntu {
    fn id(&self) -> &str {
        "ubuntu"
    }

    fn vendor(&self) -> &str {
        "Ubuntu"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let selection = Selection::from_items(&ctx.items()?);
        let url = format!("{}/meta-release", ctx.base_url());
        let releases = supported_releases(&ctx.get_text(&url).await?);
        if releases.is_empty() {
            return Err(FetchError::malformed(&url, "no supported release listed"));
        }
        let archive = ctx.files_url();
        let mut out = Vec::new();
        let mut failures = Vec::new();
        let mut pins_found = std::collections::BTreeSet::new();
        let mut suites = Vec::new();
        for dist in releases {
            for suite in [dist.clone(), format!("{dist}-updates")] {
                match self
                    .archive
                    .suite(ctx, archive, &suite, self.vendor())
                    .await
                {
                    Ok(found) => {
                        out.extend(found.artifacts);
                        pins_found.extend(found.pins_found);
                        failures.extend(found.failures);
                    }
                    Err(e) => failures.push(e),
                }
                suites.push(suite);
            }
        }
        // As for Debian: a pinned version no pocket lists is said, not silently skipped.
        for (name, pin) in &selection.names {
            if let Some(version) = pin
                && !pins_found.contains(name)
            {
                failures.push(FetchError::NotListed {
                    item: format!("{name}={version}"),
                    listed_by: format!("the followed suites of {archive} ({})", suites.join(", ")),
                });
            }
        }
        ctx.settle(out, failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openpgp::Keyring;

    #[test]
    fn the_shipped_archive_key_is_ubuntus() {
        let keyring = Keyring::from_armored(ARCHIVE_KEYS).unwrap();
        assert_eq!(
            keyring.fingerprints(),
            ["F6ECB3762474EDA9D21B7022871920D1991BC93C"]
        );
    }

    #[test]
    fn supported_releases_come_from_meta_release() {
        let text = "Dist: warty\nName: Warty Warthog\nVersion: 04.10\nSupported: 0\n\n\
            Dist: jammy\nName: Jammy Jellyfish\nVersion: 22.04.5 LTS\nSupported: 1\n\n\
            Dist: noble\nName: Noble Numbat\nVersion: 24.04.3 LTS\nSupported: 1\n";
        assert_eq!(supported_releases(text), ["jammy", "noble"]);
    }
}
