//! Arch Linux packages from the official mirror, through the repository databases.
//!
//! `https://geo.mirror.pkgbuild.com/<repo>/os/x86_64/<repo>.db` is a compressed tar (gzip, or
//! zstd/xz) with one `<name>-<version>/desc` per package: `%KEY%` lines, each followed by its
//! values and a blank line (`%FILENAME%`, `%NAME%`, `%VERSION%`, `%SHA256SUM%`, `%ARCH%`;
//! pacman's `repo-add`, <https://wiki.archlinux.org/title/Pacman>). Each followed package's
//! `.pkg.tar.zst` is an artifact with its SHA-256; the pipeline reads its files as members.
//! Arch is a rolling release: the databases are the current release.

use std::collections::BTreeMap;
use std::io::Read;

use async_trait::async_trait;
use model::{Arch, Platform};

use crate::fetch::{Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig};
use crate::formats::hex_digest;

pub struct ArchLinux;

/// Repositories read, in order.
const REPOS: &[&str] = &["core", "extra"];

/// Largest decompressed database read (`extra.db` is tens of MB).
const MAX_DB_BYTES: u64 = 512 << 20;

/// Packages holding what attackers replace or imitate on servers.
pub const DEFAULT_PACKAGES: &[&str] = &[
    "coreutils",
    "util-linux",
    "procps-ng",
    "openssh",
    "sudo",
    "bash",
    "systemd",
    "cronie",
    "iproute2",
    "net-tools",
    "curl",
    "wget",
    "openssl",
    "glibc",
    "shadow",
    "python",
    "perl",
    "busybox",
];

impl ArchLinux {
    pub fn default_config() -> VendorConfig {
        VendorConfig::new("https://geo.mirror.pkgbuild.com").with_items(DEFAULT_PACKAGES)
    }
}

/// The `%KEY%` sections of a `desc` file.
pub fn desc_fields(text: &str) -> BTreeMap<&str, Vec<&str>> {
    let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut key = None;
    for line in text.lines() {
        let line = line.trim_end();
        if let Some(k) = line.strip_prefix('%').and_then(|l| l.strip_suffix('%')) {
            key = Some(k);
            out.entry(k).or_default();
        } else if line.is_empty() {
            key = None;
        } else if let Some(k) = key {
            out.entry(k).or_default().push(line);
        }
    }
    out
}

/// The `desc` files of a repository database, decompressed by their magic.
fn db_descs(bytes: &[u8]) -> std::io::Result<Vec<String>> {
    let reader: Box<dyn Read + '_> = match bytes {
        [0x1f, 0x8b, ..] => Box::new(flate2::read::MultiGzDecoder::new(bytes)),
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Box::new(zstd::stream::read::Decoder::new(bytes)?),
        [0xfd, b'7', b'z', b'X', b'Z', ..] => {
            Box::new(liblzma::read::XzDecoder::new_multi_decoder(bytes))
        }
        _ => Box::new(bytes),
    };
    let mut archive = tar::Archive::new(reader.take(MAX_DB_BYTES));
    let mut out = Vec::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        if entry.path_bytes().ends_with(b"/desc") {
            let mut text = String::new();
            entry.read_to_string(&mut text)?;
            out.push(text);
        }
    }
    Ok(out)
}

#[async_trait]
impl Fetcher for ArchLinux {
    fn id(&self) -> &str {
        "archlinux"
    }

    fn vendor(&self) -> &str {
        "Arch Linux"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let mut out = Vec::new();
        let mut failures = Vec::new();
        for repo in REPOS {
            let dir = format!("{}/{repo}/os/x86_64", ctx.base_url());
            let url = format!("{dir}/{repo}.db");
            let descs = match ctx.get_bytes(&url, None).await {
                Ok(bytes) => db_descs(&bytes)
                    .map_err(|e| FetchError::malformed(&url, format!("unreadable database: {e}"))),
                Err(e) => Err(e),
            };
            let descs = match descs {
                Ok(d) => d,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            for text in &descs {
                let f = desc_fields(text);
                let one = |k: &str| f.get(k).and_then(|v| v.first().copied());
                let Some(name) = one("NAME") else { continue };
                if !ctx.config.items.iter().any(|i| i == name) {
                    continue;
                }
                let (Some(file), Some(version), Some(sha256)) = (
                    one("FILENAME"),
                    one("VERSION"),
                    one("SHA256SUM").and_then(|h| hex_digest(h, 64)),
                ) else {
                    ctx.note(FetchError::malformed(
                        &url,
                        format!("{name}: incomplete desc"),
                    ));
                    continue;
                };
                if file.contains('/') {
                    continue;
                }
                let arch = match one("ARCH") {
                    Some("x86_64") => Arch::Amd64,
                    Some("any") => Arch::Universal,
                    _ => continue,
                };
                out.push(Artifact {
                    vendor: self.vendor().into(),
                    executable_name: file.into(),
                    version: version.into(),
                    platform: Platform::Linux,
                    arch,
                    url: format!("{dir}/{file}"),
                    published: PublishedHashes {
                        sha256: Some(sha256),
                        ..Default::default()
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
    fn desc_sections_parse() {
        let f = desc_fields(
            "%FILENAME%\ncoreutils-9.5-2-x86_64.pkg.tar.zst\n\n%NAME%\ncoreutils\n\n\
             %DEPENDS%\nglibc\nacl\n\n",
        );
        assert_eq!(f["NAME"], ["coreutils"]);
        assert_eq!(f["DEPENDS"], ["glibc", "acl"]);
    }
}
