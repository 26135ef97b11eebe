//! Arch Linux packages from the official mirror, through the repository databases.
//!
//! `https://geo.mirror.pkgbuild.com/<repo>/os/x86_64/<repo>.db` is a compressed tar (gzip, or
//! zstd/xz) with one `<name>-<version>/desc` per package: `%KEY%` lines, each followed by its
//! values and a blank line (`%FILENAME%`, `%NAME%`, `%VERSION%`, `%SHA256SUM%`, `%ARCH%`;
//! pacman's `repo-add`, <https://wiki.archlinux.org/title/Pacman>). Each followed package's
//! `.pkg.tar.zst` is an artifact with its SHA-256; the pipeline reads its files as members.
//! Arch is a rolling release: the databases are the current release.
//!
//! Which packages: `@base` (the default, with the tools attackers replace or imitate) is the
//! `base` package and its dependencies, transitively ([`base_closure`]); `*` every package
//! of `core` and `extra`; names from `items` and `items_file`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use async_trait::async_trait;
use model::{Arch, Platform};

use crate::fetch::{
    Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig, resolve_url,
};
use crate::formats::hex_digest;
use crate::vendors::debian::BASE_SYSTEM;

pub(crate) struct ArchLinux;

/// Repositories read, in order.
const REPOS: &[&str] = &["core", "extra"];

/// Largest decompressed database read (`extra.db` is tens of MB).
const MAX_DB_BYTES: u64 = 512 << 20;

/// Packages holding what attackers replace or imitate on servers.
pub(crate) const DEFAULT_PACKAGES: &[&str] = &[
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
    /// The base system (`base` and its dependencies) and the tools attackers replace.
    pub(crate) fn default_config() -> VendorConfig {
        let mut items = vec![BASE_SYSTEM];
        items.extend_from_slice(DEFAULT_PACKAGES);
        VendorConfig::new("https://geo.mirror.pkgbuild.com").with_items(&items)
    }
}

/// The `%KEY%` sections of a `desc` file.
pub(crate) fn desc_fields(text: &str) -> BTreeMap<&str, Vec<&str>> {
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

/// The packages `@base` stands for: the `base` package and everything it depends on,
/// transitively, a dependency naming a package or something one provides (`sh` is
/// provided by `bash`), version constraints (`glibc>=2.40`) ignored.
pub(crate) fn base_closure<'a>(descs: &[BTreeMap<&'a str, Vec<&'a str>>]) -> BTreeSet<&'a str> {
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, f) in descs.iter().enumerate() {
        if let Some(name) = f.get("NAME").and_then(|v| v.first()) {
            by_name.entry(name).or_insert(i);
        }
    }
    for (i, f) in descs.iter().enumerate() {
        for provided in f.get("PROVIDES").into_iter().flatten() {
            by_name.entry(strip_constraint(provided)).or_insert(i);
        }
    }
    let mut out = BTreeSet::new();
    let mut todo = vec!["base"];
    while let Some(dep) = todo.pop() {
        let Some(&i) = by_name.get(strip_constraint(dep)) else {
            continue;
        };
        let Some(&name) = descs[i].get("NAME").and_then(|v| v.first()) else {
            continue;
        };
        if out.insert(name) {
            todo.extend(descs[i].get("DEPENDS").into_iter().flatten().copied());
        }
    }
    out
}

fn strip_constraint(dep: &str) -> &str {
    dep.split(['<', '>', '=', ':']).next().unwrap_or(dep).trim()
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
        let items = ctx.items()?;
        let all = items.iter().any(|i| i == "*");
        let base = items.iter().any(|i| i == BASE_SYSTEM);
        let named: BTreeMap<&str, Option<&str>> = items
            .iter()
            .filter(|i| *i != "*" && *i != BASE_SYSTEM)
            .map(|i| match i.split_once('=') {
                Some((n, v)) => (n.trim(), Some(v.trim())),
                None => (i.trim(), None),
            })
            .collect();
        let mut failures = Vec::new();
        // Every repository's database first: `base`'s dependencies span them.
        let mut read: Vec<(String, String, Vec<String>)> = Vec::new();
        for repo in REPOS {
            let dir = format!("{}/{repo}/os/x86_64", ctx.base_url());
            let url = format!("{dir}/{repo}.db");
            let descs = match ctx.get_bytes(&url, None).await {
                Ok(bytes) => db_descs(&bytes)
                    .map_err(|e| FetchError::malformed(&url, format!("unreadable database: {e}"))),
                Err(e) => Err(e),
            };
            match descs {
                Ok(d) => read.push((dir, url, d)),
                Err(e) => failures.push(e),
            }
        }
        let parsed: Vec<Vec<BTreeMap<&str, Vec<&str>>>> = read
            .iter()
            .map(|(_, _, descs)| descs.iter().map(|t| desc_fields(t)).collect())
            .collect();
        let closure = if base {
            let flat: Vec<BTreeMap<&str, Vec<&str>>> = parsed.iter().flatten().cloned().collect();
            base_closure(&flat)
        } else {
            BTreeSet::new()
        };
        let mut out = Vec::new();
        for ((dir, url, _), descs) in read.iter().zip(&parsed) {
            for f in descs {
                let one = |k: &str| f.get(k).and_then(|v| v.first().copied());
                let Some(name) = one("NAME") else { continue };
                let pin = named.get(name).copied();
                if !(all || pin.is_some() || closure.contains(name)) {
                    continue;
                }
                let (Some(file), Some(version), Some(sha256)) = (
                    one("FILENAME"),
                    one("VERSION"),
                    one("SHA256SUM").and_then(|h| hex_digest(h, 64)),
                ) else {
                    ctx.note(FetchError::malformed(
                        url,
                        format!("{name}: incomplete desc"),
                    ));
                    continue;
                };
                if let Some(Some(pinned)) = pin
                    && pinned != version
                {
                    // A rolling release serves one version of each package.
                    ctx.note(FetchError::malformed(
                        url,
                        format!("{name}={pinned}: the repository serves {version} only"),
                    ));
                    continue;
                }
                if file.contains('/') {
                    continue;
                }
                let arch = match one("ARCH") {
                    Some("x86_64") => Arch::Amd64,
                    Some("any") => Arch::Universal,
                    _ => continue,
                };
                let file_url = match resolve_url(&format!("{dir}/"), file) {
                    Ok(u) => u,
                    Err(e) => {
                        ctx.note(e);
                        continue;
                    }
                };
                out.push(Artifact {
                    vendor: self.vendor().into(),
                    executable_name: file.into(),
                    version: version.into(),
                    platform: Platform::Linux,
                    arch,
                    url: file_url,
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

    #[test]
    fn base_is_the_closure_of_its_dependencies() {
        let texts = [
            "%NAME%\nbase\n\n%DEPENDS%\nbash\ncoreutils>=9\nsh\n\n",
            "%NAME%\nbash\n\n%PROVIDES%\nsh\n\n%DEPENDS%\nglibc\nreadline>=7.0\n\n",
            "%NAME%\ncoreutils\n\n%DEPENDS%\nglibc\nacl\n\n",
            "%NAME%\nglibc\n\n",
            "%NAME%\nreadline\n\n",
            "%NAME%\nnginx\n\n%DEPENDS%\nglibc\n\n",
        ];
        let descs: Vec<_> = texts.iter().map(|t| desc_fields(t)).collect();
        let closure: Vec<&str> = base_closure(&descs).into_iter().collect();
        assert_eq!(closure, ["base", "bash", "coreutils", "glibc", "readline"]);
    }
}
