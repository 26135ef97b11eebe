//! Rocky Linux (the Red Hat Enterprise Linux family) from its official mirror, following the
//! repositories' signed chain.
//!
//! Releases are discovered from the mirror's top directory listing
//! (`https://download.rockylinux.org/pub/rocky/`): each major release directory (`9/`,
//! `10/`) follows that release's newest minor. Each repository
//! (`<major>/<repo>/<arch>/os/`) has `repodata/repomd.xml` with a detached armored OpenPGP
//! signature beside it, `repodata/repomd.xml.asc`, made with the release key (keys in
//! `keys/`, [`crate::openpgp`]). Nothing from a repository is read unless that signature
//! verifies. `repomd.xml` lists the `primary` metadata with its SHA-256 (`<data
//! type="primary">`, `<checksum type="sha256">`, `<location href>`); `primary.xml` (gzip, xz,
//! zstd or bzip2) lists each package (`<name>`, `<arch>`, `<version epoch ver rel>`,
//! `<checksum type="sha256">`, `<location href>`). Each followed package's `.rpm` is an
//! artifact with that SHA-256; the pipeline then checks the package's bytes against it and
//! records the SHA-256 its header lists for each executable and library ([`crate::rpm`]).
//! Format: the `createrepo_c` repository metadata and the RPM package file format.
//!
//! Which packages: the configured list (by default the tools attackers replace or imitate);
//! each package's newest version in each repository is taken, for each architecture.

use std::collections::BTreeMap;
use std::io::Read;

use async_trait::async_trait;
use model::{Arch, Platform};

use crate::fetch::{
    Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig, resolve_url,
};
use crate::formats::{file_name, hex_digest};
use crate::openpgp::Keyring;

/// The keys that sign Rocky Linux's `repomd.xml` files (see `keys/SOURCE.md`).
pub(crate) const RELEASE_KEYS: &[&str] = &[
    include_str!("../../keys/rocky-8.asc"),
    include_str!("../../keys/rocky-9.asc"),
    include_str!("../../keys/rocky-10.asc"),
];

/// Repositories read in each release.
const REPOS: &[&str] = &["BaseOS", "AppStream"];

/// Architectures followed, with the arch of their records.
const ARCHES: &[(&str, Arch)] = &[("x86_64", Arch::Amd64), ("aarch64", Arch::Arm64)];

/// Largest decompressed `primary.xml` read (AppStream's is a few hundred MB).
const MAX_PRIMARY_BYTES: u64 = 1 << 30;

/// Packages holding what attackers replace or imitate on servers.
pub(crate) const DEFAULT_PACKAGES: &[&str] = &[
    "coreutils",
    "util-linux",
    "procps-ng",
    "openssh",
    "openssh-server",
    "openssh-clients",
    "sudo",
    "bash",
    "systemd",
    "cronie",
    "iproute",
    "net-tools",
    "curl",
    "wget",
    "openssl",
    "glibc",
    "passwd",
    "shadow-utils",
    "python3",
    "perl-interpreter",
    "busybox",
];

/// An RPM-metadata repository family signed with one keyring.
pub struct RockyLinux {
    keyring: Keyring,
}

impl RockyLinux {
    /// Rocky Linux with its release keys.
    pub fn new() -> Self {
        Self::with_keys(RELEASE_KEYS)
    }

    /// A mirror signed with these armored keys (tests use a key made at test time).
    pub fn with_keys(armored: &[&str]) -> Self {
        // The shipped keys are checked by a test; a key that fails to parse leaves an empty
        // keyring, against which every repomd.xml fails to verify.
        let keyring = Keyring::from_armored(armored).unwrap_or_else(|e| {
            tracing::error!(error = %e, "release keyring unreadable");
            Keyring::empty()
        });
        Self { keyring }
    }

    pub(crate) fn default_config() -> VendorConfig {
        VendorConfig::new("https://download.rockylinux.org/pub/rocky").with_items(DEFAULT_PACKAGES)
    }
}

impl Default for RockyLinux {
    fn default() -> Self {
        Self::new()
    }
}

/// The major releases a directory listing links to (`href="9/"`), newest first.
pub(crate) fn major_releases(listing: &str) -> Vec<u32> {
    let mut out: Vec<u32> = listing
        .split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter_map(|link| link.trim_start_matches("./").strip_suffix('/'))
        .filter(|dir| !dir.is_empty() && dir.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|dir| dir.parse().ok())
        .collect();
    out.sort_unstable_by(|a, b| b.cmp(a));
    out.dedup();
    out
}

/// The `primary` entry of a `repomd.xml`: its location and SHA-256.
pub(crate) fn primary_location(repomd: &str) -> Result<(String, String), String> {
    let doc = roxmltree::Document::parse(repomd).map_err(|e| format!("invalid XML: {e}"))?;
    let data = doc
        .descendants()
        .find(|n| n.has_tag_name("data") && n.attribute("type") == Some("primary"))
        .ok_or("no primary metadata listed")?;
    let child = |name: &str| data.children().find(|n| n.has_tag_name(name));
    let sha256 = child("checksum")
        .filter(|c| c.attribute("type") == Some("sha256"))
        .and_then(|c| c.text())
        .and_then(|t| hex_digest(t.trim(), 64))
        .ok_or("the primary metadata has no SHA-256")?;
    let href = child("location")
        .and_then(|l| l.attribute("href"))
        // Relative to the repository's root, `..` included (repository managers answer
        // such links); the file is checked against the SHA-256 given here either way.
        .filter(|h| !h.trim().is_empty() && !h.contains(':'))
        .ok_or("the primary metadata has no usable location")?;
    Ok((href.to_owned(), sha256))
}

/// One package of `primary.xml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    pub name: String,
    pub arch: String,
    /// `[epoch:]version-release`, the epoch only when not 0.
    pub version: String,
    pub sha256: String,
    pub href: String,
}

/// The `<package>` elements of `primary.xml` whose name is in `wanted`. Each element is
/// parsed on its own, so a document of hundreds of MB is never held as a tree.
pub(crate) fn primary_packages(primary: &str, wanted: &[&str]) -> Vec<Package> {
    let mut out = Vec::new();
    let mut rest = primary;
    while let Some(start) = rest.find("<package ") {
        rest = &rest[start..];
        let Some(end) = rest.find("</package>") else {
            break;
        };
        let element = &rest[..end + "</package>".len()];
        rest = &rest[end..];
        let name = element
            .split_once("<name>")
            .and_then(|(_, r)| r.split_once("</name>"))
            .map(|(n, _)| n);
        if !name.is_some_and(|n| wanted.contains(&"*") || wanted.contains(&n)) {
            continue;
        }
        if let Some(p) = package(element) {
            out.push(p);
        }
    }
    out
}

fn package(element: &str) -> Option<Package> {
    // The element's namespaces, declared as the document root declares them.
    let wrapped = format!(
        "<metadata xmlns=\"http://linux.duke.edu/metadata/common\" \
         xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\">{element}</metadata>"
    );
    let doc = roxmltree::Document::parse(&wrapped).ok()?;
    let p = doc.descendants().find(|n| n.has_tag_name("package"))?;
    if p.attribute("type") != Some("rpm") {
        return None;
    }
    let child = |name: &str| p.children().find(|n| n.has_tag_name(name));
    let text = |name: &str| child(name).and_then(|n| n.text()).map(str::trim);
    let v = child("version")?;
    let (ver, rel) = (v.attribute("ver")?, v.attribute("rel")?);
    let version = match v.attribute("epoch") {
        Some(e) if e != "0" && !e.is_empty() => format!("{e}:{ver}-{rel}"),
        _ => format!("{ver}-{rel}"),
    };
    let sha256 = child("checksum")
        .filter(|c| c.attribute("type") == Some("sha256"))
        .and_then(|c| c.text())
        .and_then(|t| hex_digest(t.trim(), 64))?;
    let href = child("location")?.attribute("href")?;
    // Resolved against the repository's root; the package is checked against its SHA-256.
    if href.trim().is_empty() || href.contains(':') {
        return None;
    }
    Some(Package {
        name: text("name")?.to_owned(),
        arch: text("arch")?.to_owned(),
        version,
        sha256,
        href: href.to_owned(),
    })
}

/// Decompresses metadata by its magic, within [`MAX_PRIMARY_BYTES`].
fn decompress(bytes: &[u8]) -> std::io::Result<String> {
    let reader: Box<dyn Read + '_> = match bytes {
        [0x1f, 0x8b, ..] => Box::new(flate2::read::MultiGzDecoder::new(bytes)),
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Box::new(zstd::stream::read::Decoder::new(bytes)?),
        [0xfd, b'7', b'z', b'X', b'Z', ..] => {
            Box::new(liblzma::read::XzDecoder::new_multi_decoder(bytes))
        }
        [b'B', b'Z', b'h', ..] => Box::new(bzip2::read::MultiBzDecoder::new(bytes)),
        _ => Box::new(bytes),
    };
    let mut text = String::new();
    reader.take(MAX_PRIMARY_BYTES).read_to_string(&mut text)?;
    Ok(text)
}

#[async_trait]
impl Fetcher for RockyLinux {
    fn id(&self) -> &str {
        "rockylinux"
    }

    fn vendor(&self) -> &str {
        "Rocky Linux"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let top = format!("{}/", ctx.base_url());
        let releases = major_releases(&ctx.get_text(&top).await?);
        if releases.is_empty() {
            return Err(FetchError::malformed(&top, "no release directory listed"));
        }
        // Names (a pinned `name=version` is followed by name: the repositories serve one
        // version of most packages) or `*`, every package.
        let items = ctx.items()?;
        let wanted: Vec<&str> = items
            .iter()
            .map(|i| i.split_once('=').map_or(i.as_str(), |(n, _)| n).trim())
            .collect();
        let mut out = Vec::new();
        let mut failures = Vec::new();
        for major in releases {
            for repo in REPOS {
                for &(rpm_arch, arch) in ARCHES {
                    let dir = format!("{}/{major}/{repo}/{rpm_arch}/os", ctx.base_url());
                    match self.repository(ctx, &dir, &wanted, rpm_arch, arch).await {
                        Ok(found) => out.extend(found),
                        Err(e) => failures.push(e),
                    }
                }
            }
        }
        ctx.settle(out, failures)
    }
}

impl RockyLinux {
    async fn repository(
        &self,
        ctx: &FetchContext,
        dir: &str,
        wanted: &[&str],
        rpm_arch: &str,
        arch: Arch,
    ) -> Result<Vec<Artifact>, FetchError> {
        let url = format!("{dir}/repodata/repomd.xml");
        let repomd = ctx.get_bytes(&url, None).await?;
        let signature = ctx.get_text(&format!("{url}.asc")).await?;
        // Nothing from the repository is trusted unless this verifies.
        self.keyring
            .verify_detached(&repomd, &signature)
            .map_err(|e| FetchError::malformed(&url, e.to_string()))?;
        let repomd = String::from_utf8(repomd)
            .map_err(|e| FetchError::malformed(&url, format!("not UTF-8: {e}")))?;
        let (href, expected) =
            primary_location(&repomd).map_err(|e| FetchError::malformed(&url, e))?;
        // Locations are relative to the repository's root (the parent of `repodata/`).
        let root = format!("{dir}/");
        let primary_url = resolve_url(&root, &href)?;
        let bytes = ctx.get_bytes(&primary_url, None).await?;
        let digest = hex::encode(aws_lc_rs::digest::digest(
            &aws_lc_rs::digest::SHA256,
            &bytes,
        ));
        if digest != expected {
            return Err(FetchError::malformed(
                &primary_url,
                format!(
                    "metadata does not match the signed repomd.xml (SHA-256 {digest}; \
                     repomd.xml says {expected}): possible tampering"
                ),
            ));
        }
        let text = decompress(&bytes)
            .map_err(|e| FetchError::malformed(&primary_url, format!("undecodable: {e}")))?;
        // The newest version of each wanted package, per arch (noarch included).
        let mut newest: BTreeMap<(String, String), Package> = BTreeMap::new();
        for p in primary_packages(&text, wanted) {
            if p.arch != rpm_arch && p.arch != "noarch" {
                continue;
            }
            let key = (p.name.clone(), p.arch.clone());
            let newer = newest.get(&key).is_none_or(|known| {
                model::version::compare("rpm", &p.version, &known.version).is_gt()
            });
            if newer {
                newest.insert(key, p);
            }
        }
        Ok(newest
            .into_values()
            .filter_map(|p| {
                let url = resolve_url(&root, &p.href).map_err(|e| ctx.note(e)).ok()?;
                Some((p, url))
            })
            .map(|(p, url)| Artifact {
                vendor: self.vendor().into(),
                executable_name: file_name(&p.href).into(),
                version: p.version,
                platform: Platform::Linux,
                arch: if p.arch == "noarch" {
                    Arch::Universal
                } else {
                    arch
                },
                url,
                published: PublishedHashes {
                    sha256: Some(p.sha256),
                    ..Default::default()
                },
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_release_keys_are_rockys() {
        let keyring = Keyring::from_armored(RELEASE_KEYS).unwrap();
        assert_eq!(
            keyring.fingerprints(),
            [
                "7051C470A929F454CEBE37B715AF5DAC6D745A60",
                "21CB256AE16FC54C6E652949702D426D350D275D",
                "FC226859C0860BF0DDB95B085B106C736FEDFC85",
            ]
        );
    }

    #[test]
    fn releases_come_from_the_listing() {
        let html = "<a href=\"../\">../</a><a href=\"10/\">10/</a><a href=\"10.0/\">10.0/</a>\
            <a href=\"8/\">8/</a><a href=\"9/\">9/</a><a href=\"RPM-GPG-KEY-Rocky-9\">key</a>";
        assert_eq!(major_releases(html), [10, 9, 8]);
    }
}
