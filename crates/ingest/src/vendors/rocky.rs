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
//! each package's newest version in each repository is taken, for each architecture; a
//! pinned `name=version` (`[epoch:]version-release`, as `rpm -qa --qf
//! '%{NAME}=%{VERSION}-%{RELEASE}\n'` prints it) takes exactly that version, and a pin no
//! followed repository lists is reported as not listed.
//!
//! Pinned versions of older minor releases (`snapshot_url`, unset by default): the mirror
//! serves only each major's current minor (its listing links `9.6/` beside `9/`), while Rocky
//! Linux keeps every older minor release in its vault with the same layout and signatures
//! (`https://dl.rockylinux.org/vault/rocky/<major>.<minor>/<repo>/<arch>/os/`). With the vault
//! configured, a pin the followed repositories do not list is looked for in the older minors
//! of each followed major, newest first (at the current 9.6: 9.5, 9.4, ... 9.0; at most
//! [`MAX_VAULT_MINORS`] of them), in the same repositories and architectures, each read
//! through the same signed chain and keys as a live one; the first minor listing the pinned
//! version gives its packages, recorded as those of a live pin. A repository a minor does not
//! have (HTTP 404) is skipped; one whose signature or metadata does not verify records
//! nothing. A pin found nowhere is reported as listed by neither, naming the minors tried.

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

/// Most older minor releases of one major looked for in the vault.
const MAX_VAULT_MINORS: u32 = 20;

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

/// The directories a listing links to (`href="9/"` gives `9`).
fn listed_dirs(listing: &str) -> impl Iterator<Item = &str> {
    listing
        .split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter_map(|link| link.trim_start_matches("./").strip_suffix('/'))
}

fn number(text: &str) -> Option<u32> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// The major releases a directory listing links to (`href="9/"`), newest first.
pub(crate) fn major_releases(listing: &str) -> Vec<u32> {
    let mut out: Vec<u32> = listed_dirs(listing).filter_map(number).collect();
    out.sort_unstable_by(|a, b| b.cmp(a));
    out.dedup();
    out
}

/// The current (newest) minor release of each major a listing links to (`href="9.6/"`).
pub(crate) fn current_minors(listing: &str) -> BTreeMap<u32, u32> {
    let mut out = BTreeMap::new();
    for dir in listed_dirs(listing) {
        let Some((major, minor)) = dir.split_once('.') else {
            continue;
        };
        if let (Some(major), Some(minor)) = (number(major), number(minor)) {
            let current = out.entry(major).or_insert(minor);
            *current = (*current).max(minor);
        }
    }
    out
}

/// The older minor releases of `major` to look for in the vault at the current `minor`,
/// newest first, at most [`MAX_VAULT_MINORS`].
fn older_minors(major: u32, minor: u32) -> impl Iterator<Item = String> {
    (minor.saturating_sub(MAX_VAULT_MINORS)..minor)
        .rev()
        .map(move |m| format!("{major}.{m}"))
}

/// Whether a package's `[epoch:]version-release` is the pinned one (given with or without
/// the epoch: `rpm -qa --qf '%{VERSION}-%{RELEASE}'` prints none).
fn is_pinned_version(version: &str, pin: &str) -> bool {
    version == pin || version.split_once(':').is_some_and(|(_, v)| v == pin)
}

/// The configured items: names followed (`*`: every package) and pinned versions by name.
struct Selection {
    wanted: Vec<String>,
    pins: BTreeMap<String, String>,
}

impl Selection {
    fn from_items(items: &[String]) -> Self {
        let mut wanted = Vec::new();
        let mut pins = BTreeMap::new();
        for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
            let (name, pin) = match item.split_once('=') {
                Some((n, v)) => (n.trim(), Some(v.trim())),
                None => (item, None),
            };
            if let Some(pin) = pin.filter(|v| !v.is_empty()) {
                pins.insert(name.to_owned(), pin.to_owned());
            }
            wanted.push(name.to_owned());
        }
        Self { wanted, pins }
    }
}

/// One repository of a release to read: its root and the architecture followed.
#[derive(Clone, Copy)]
struct Repository<'a> {
    dir: &'a str,
    rpm_arch: &'a str,
    arch: Arch,
}

/// What the repositories read gave: artifacts, the pinned names found, the failures.
#[derive(Default)]
struct Found {
    artifacts: Vec<Artifact>,
    pins_found: std::collections::BTreeSet<String>,
    failures: Vec<FetchError>,
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
        let listing = ctx.get_text(&top).await?;
        let releases = major_releases(&listing);
        if releases.is_empty() {
            return Err(FetchError::malformed(&top, "no release directory listed"));
        }
        let selection = Selection::from_items(&ctx.items()?);
        let mut found = Found::default();
        for &major in &releases {
            let root = format!("{}/{major}", ctx.base_url());
            self.read_release(
                ctx,
                &root,
                &selection.wanted,
                &selection.pins,
                &mut found,
                false,
            )
            .await;
        }
        let Found {
            mut artifacts,
            pins_found,
            mut failures,
        } = found;
        let missing: BTreeMap<String, String> = selection
            .pins
            .into_iter()
            .filter(|(name, _)| !pins_found.contains(name))
            .collect();
        if !missing.is_empty() {
            let shown: Vec<String> = releases.iter().map(u32::to_string).collect();
            let listed_by = format!(
                "the followed repos of {} ({})",
                ctx.base_url(),
                shown.join(", ")
            );
            let vault = ctx
                .config
                .snapshot_url
                .as_deref()
                .map(|u| u.trim_end_matches('/'));
            let (missing, listed_by) = match vault {
                None => (missing, listed_by),
                Some(vault) => {
                    let minors = current_minors(&listing);
                    let (missing, tried) = self
                        .vault(
                            ctx,
                            vault,
                            &releases,
                            &minors,
                            missing,
                            &mut artifacts,
                            &mut failures,
                        )
                        .await;
                    let tried = if tried.is_empty() {
                        "no older minor release known".to_owned()
                    } else {
                        tried.join(", ")
                    };
                    (
                        missing,
                        format!("{listed_by}, nor by the vault at {vault} ({tried})"),
                    )
                }
            };
            for (name, version) in missing {
                failures.push(FetchError::NotListed {
                    item: format!("{name}={version}"),
                    listed_by: listed_by.clone(),
                });
            }
        }
        ctx.settle(artifacts, failures)
    }
}

impl RockyLinux {
    /// Every followed repository and architecture of the release at `root` (`<base>/9` or
    /// `<vault>/9.5`). A repository that answers 404 is skipped when `skip_absent` (a vault
    /// minor without it); any other failure is one of `found`'s.
    async fn read_release(
        &self,
        ctx: &FetchContext,
        root: &str,
        wanted: &[String],
        pins: &BTreeMap<String, String>,
        found: &mut Found,
        skip_absent: bool,
    ) {
        let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
        for repo in REPOS {
            for &(rpm_arch, arch) in ARCHES {
                let dir = format!("{root}/{repo}/{rpm_arch}/os");
                let repository = Repository {
                    dir: &dir,
                    rpm_arch,
                    arch,
                };
                match self.repository(ctx, repository, &wanted, pins).await {
                    Ok((artifacts, pins_found)) => {
                        found.artifacts.extend(artifacts);
                        found.pins_found.extend(pins_found);
                    }
                    Err(e) if skip_absent && e.is_not_found() => {
                        tracing::debug!(%dir, "not in the vault");
                    }
                    Err(e) => found.failures.push(e),
                }
            }
        }
    }

    /// Looks for the `missing` pins in the vault's older minor releases of each followed
    /// major, newest first, stopping for each pin at the first minor that lists it. Returns
    /// the pins found nowhere and the minors tried.
    #[allow(clippy::too_many_arguments)]
    async fn vault(
        &self,
        ctx: &FetchContext,
        vault: &str,
        majors: &[u32],
        minors: &BTreeMap<u32, u32>,
        mut missing: BTreeMap<String, String>,
        artifacts: &mut Vec<Artifact>,
        failures: &mut Vec<FetchError>,
    ) -> (BTreeMap<String, String>, Vec<String>) {
        let mut tried = Vec::new();
        for major in majors {
            let Some(&current) = minors.get(major) else {
                tracing::debug!(major, "no minor release listed: the vault is not read");
                continue;
            };
            for release in older_minors(*major, current) {
                if missing.is_empty() {
                    return (missing, tried);
                }
                let wanted: Vec<String> = missing.keys().cloned().collect();
                let mut found = Found::default();
                let root = format!("{vault}/{release}");
                self.read_release(ctx, &root, &wanted, &missing, &mut found, true)
                    .await;
                tried.push(release);
                artifacts.extend(found.artifacts);
                failures.extend(found.failures);
                missing.retain(|name, _| !found.pins_found.contains(name));
            }
        }
        (missing, tried)
    }

    /// The verified packages of one repository: `repomd.xml` checked against its detached
    /// signature with the release keys, then `primary.xml` against the SHA-256 it lists.
    /// Returns the repository's root (that of the `location href`s) and the packages named
    /// in `wanted`.
    async fn signed_packages(
        &self,
        ctx: &FetchContext,
        dir: &str,
        wanted: &[&str],
    ) -> Result<(String, Vec<Package>), FetchError> {
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
        Ok((root, primary_packages(&text, wanted)))
    }

    /// The artifacts of one repository: per wanted package and arch (noarch included), the
    /// pinned version if pinned, else the newest; and the pinned names it listed.
    async fn repository(
        &self,
        ctx: &FetchContext,
        repository: Repository<'_>,
        wanted: &[&str],
        pins: &BTreeMap<String, String>,
    ) -> Result<(Vec<Artifact>, Vec<String>), FetchError> {
        let Repository {
            dir,
            rpm_arch,
            arch,
        } = repository;
        let (root, packages) = self.signed_packages(ctx, dir, wanted).await?;
        let mut newest: BTreeMap<(String, String), Package> = BTreeMap::new();
        for p in packages {
            if p.arch != rpm_arch && p.arch != "noarch" {
                continue;
            }
            if let Some(pin) = pins.get(&p.name)
                && !is_pinned_version(&p.version, pin)
            {
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
        let pins_found = newest
            .values()
            .filter(|p| pins.contains_key(&p.name))
            .map(|p| p.name.clone())
            .collect();
        let artifacts = newest
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
            .collect();
        Ok((artifacts, pins_found))
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
        let html = "<a href=\"9/\">9/</a><a href=\"9.5/\">9.5/</a><a href=\"9.6/\">9.6/</a>\
            <a href=\"8.10/\">8.10/</a><a href=\"8.9/\">8.9/</a><a href=\"x.1/\">x.1/</a>";
        assert_eq!(
            current_minors(html).into_iter().collect::<Vec<_>>(),
            [(8, 10), (9, 6)]
        );
    }

    #[test]
    fn older_minors_are_newest_first_and_bounded() {
        assert_eq!(
            older_minors(9, 6).collect::<Vec<_>>(),
            ["9.5", "9.4", "9.3", "9.2", "9.1", "9.0"]
        );
        assert_eq!(older_minors(10, 0).count(), 0);
        let many: Vec<String> = older_minors(9, 40).collect();
        assert_eq!(
            (many.len(), many[0].as_str(), many[19].as_str()),
            (20, "9.39", "9.20")
        );
    }

    #[test]
    fn a_pin_names_the_version_with_or_without_its_epoch() {
        assert!(is_pinned_version("8.32-39.el9", "8.32-39.el9"));
        assert!(is_pinned_version("1:3.0.7-27.el9", "3.0.7-27.el9"));
        assert!(is_pinned_version("1:3.0.7-27.el9", "1:3.0.7-27.el9"));
        assert!(!is_pinned_version("8.32-39.el9", "8.32-3"));
    }
}
