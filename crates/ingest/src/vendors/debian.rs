//! Debian packages from the official mirror network, following the archive's signed chain.
//!
//! `https://deb.debian.org/debian/dists/stable/InRelease` is the `Release` file of the current
//! stable release (the `stable` alias follows each new release), cleartext-signed with the
//! archive keys ([`crate::openpgp`]; keys in `keys/`). Its `SHA256:` section lists each index
//! as ` <sha256> <size> main/binary-amd64/Packages.xz`. Each `Packages` index is a list of
//! deb822 stanzas (`Package`, `Version`, `Architecture`, `Filename`, `SHA256`), and each
//! `.deb` named there is an artifact with its SHA-256; the pipeline then reads the files of
//! its `data.tar.*` as members ([`crate::members`]). Format: Debian Policy 5, deb(5) and
//! <https://wiki.debian.org/DebianRepository/Format>.
//!
//! Which packages: the configured list (by default the tools attackers replace or imitate);
//! each package's newest version in the index is taken, for each architecture followed.

use std::collections::BTreeMap;
use std::io::Read;

use async_trait::async_trait;
use model::{Arch, Platform};

use crate::fetch::{Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig};
use crate::formats::{file_name, hex_digest};
use crate::openpgp::Keyring;

/// The archive keys that sign Debian's `InRelease` files (see `keys/SOURCE.md`).
pub const ARCHIVE_KEYS: &[&str] = &[include_str!(
    "../../keys/debian-archive-bookworm-automatic.asc"
)];

/// Architectures followed, with the arch of their records.
const ARCHES: &[(&str, Arch)] = &[("amd64", Arch::Amd64), ("arm64", Arch::Arm64)];

/// Largest decompressed `Packages` index read (a full `main` is about 70 MB).
const MAX_INDEX_BYTES: u64 = 512 << 20;

/// A Debian-format repository: Debian itself, or one signed with another keyring.
pub struct Debian {
    keyring: Keyring,
    suite: &'static str,
}

impl Debian {
    /// Debian with its archive keys.
    pub fn new() -> Self {
        Self::with_keys(ARCHIVE_KEYS)
    }

    /// A repository signed with these armored keys (tests use a key made at test time).
    pub fn with_keys(armored: &[&str]) -> Self {
        // The shipped keys are checked by a test; a key that fails to parse leaves an
        // empty keyring, against which every InRelease fails to verify.
        let keyring = Keyring::from_armored(armored).unwrap_or_else(|e| {
            tracing::error!(error = %e, "archive keyring unreadable");
            Keyring::empty()
        });
        Self {
            keyring,
            suite: "stable",
        }
    }

    pub fn default_config() -> VendorConfig {
        VendorConfig::new("https://deb.debian.org/debian").with_items(DEFAULT_PACKAGES)
    }
}

impl Default for Debian {
    fn default() -> Self {
        Self::new()
    }
}

/// Binary packages holding what attackers replace or imitate on servers.
pub const DEFAULT_PACKAGES: &[&str] = &[
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
    "python3.13-minimal",
    "perl-base",
    "busybox",
];

/// The fields of a deb822 paragraph (continuation lines dropped).
pub(crate) fn paragraphs(text: &str) -> impl Iterator<Item = BTreeMap<&str, &str>> {
    text.split("\n\n").map(|block| {
        block
            .lines()
            .filter(|l| !l.starts_with([' ', '\t']))
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect()
    })
}

/// One index listed in a `Release` file's `SHA256:` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub sha256: String,
    pub size: u64,
    pub path: String,
}

/// The `SHA256:` section of a `Release` file.
pub fn release_sha256(release: &str) -> Vec<IndexEntry> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in release.lines() {
        if !line.starts_with(' ') {
            inside = line.trim_end() == "SHA256:";
            continue;
        }
        if !inside {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(hash), Some(size), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if let (Some(sha256), Ok(size)) = (hex_digest(hash, 64), size.parse()) {
            out.push(IndexEntry {
                sha256,
                size,
                path: path.to_owned(),
            });
        }
    }
    out
}

/// Where one `Packages` index is and what its records are.
#[derive(Clone, Copy)]
struct Index<'a> {
    url: &'a str,
    entry: &'a IndexEntry,
    /// Root of the `Filename` paths.
    files: &'a str,
    vendor: &'a str,
}

/// Decompresses an index by its name, within [`MAX_INDEX_BYTES`].
fn decompress(path: &str, bytes: &[u8]) -> std::io::Result<String> {
    let mut text = String::new();
    let reader: Box<dyn Read + '_> = if path.ends_with(".xz") {
        Box::new(liblzma::read::XzDecoder::new_multi_decoder(bytes))
    } else if path.ends_with(".gz") {
        Box::new(flate2::read::MultiGzDecoder::new(bytes))
    } else {
        Box::new(bytes)
    };
    reader.take(MAX_INDEX_BYTES).read_to_string(&mut text)?;
    Ok(text)
}

#[async_trait]
impl Fetcher for Debian {
    fn id(&self) -> &str {
        "debian"
    }

    fn vendor(&self) -> &str {
        "Debian"
    }

    async fn discover(&self, ctx: &FetchContext) -> Result<Vec<Artifact>, FetchError> {
        let (out, failures) = self
            .suite(
                ctx,
                ctx.base_url(),
                ctx.files_url(),
                self.suite,
                self.vendor(),
            )
            .await?;
        ctx.settle(out, failures)
    }
}

impl Debian {
    /// The followed packages of one suite of the repository at `root` (`<root>/dists/<suite>/`),
    /// their `.deb` under `files`, as records of `vendor`. An `InRelease` that does not
    /// verify is an error; an index that cannot be read is one of the failures returned
    /// beside what the other indexes gave.
    pub(crate) async fn suite(
        &self,
        ctx: &FetchContext,
        root: &str,
        files: &str,
        suite: &str,
        vendor: &str,
    ) -> Result<(Vec<Artifact>, Vec<FetchError>), FetchError> {
        let url = format!("{root}/dists/{suite}/InRelease");
        let signed = ctx.get_text(&url).await?;
        // Nothing from the repository is trusted unless this verifies.
        let release = self
            .keyring
            .verify_cleartext(&signed)
            .map_err(|e| FetchError::malformed(&url, e.to_string()))?;
        let fields = paragraphs(&release).next().unwrap_or_default();
        let listed_arches: Vec<&str> = fields
            .get("Architectures")
            .map(|a| a.split_whitespace().collect())
            .unwrap_or_default();
        let indexes = release_sha256(&release);
        if indexes.is_empty() {
            return Err(FetchError::malformed(&url, "no SHA256 section"));
        }
        let wanted: Vec<&str> = ctx.config.items.iter().map(String::as_str).collect();
        let mut out = Vec::new();
        let mut failures = Vec::new();
        for &(deb_arch, arch) in ARCHES {
            if !listed_arches.contains(&deb_arch) {
                continue;
            }
            // The smallest encoding the Release file vouches for.
            let base = format!("main/binary-{deb_arch}/Packages");
            let Some(entry) = [".xz", ".gz", ""]
                .iter()
                .find_map(|ext| indexes.iter().find(|e| e.path == format!("{base}{ext}")))
            else {
                failures.push(FetchError::malformed(&url, format!("{base} not listed")));
                continue;
            };
            let index_url = format!("{root}/dists/{suite}/{}", entry.path);
            let at = Index {
                url: &index_url,
                entry,
                files,
                vendor,
            };
            match self.packages(ctx, at, &wanted, arch).await {
                Ok(found) => out.extend(found),
                Err(e) => failures.push(e),
            }
        }
        Ok((out, failures))
    }

    async fn packages(
        &self,
        ctx: &FetchContext,
        at: Index<'_>,
        wanted: &[&str],
        arch: Arch,
    ) -> Result<Vec<Artifact>, FetchError> {
        let Index {
            url,
            entry,
            files,
            vendor,
        } = at;
        let bytes = ctx.get_bytes(url, None).await?;
        let digest = hex::encode(aws_lc_rs::digest::digest(
            &aws_lc_rs::digest::SHA256,
            &bytes,
        ));
        if digest != entry.sha256 || bytes.len() as u64 != entry.size {
            return Err(FetchError::malformed(
                url,
                format!(
                    "index does not match the signed Release (SHA-256 {digest}, {} bytes; \
                     Release says {} and {} bytes): possible tampering",
                    bytes.len(),
                    entry.sha256,
                    entry.size
                ),
            ));
        }
        let text = decompress(&entry.path, &bytes)
            .map_err(|e| FetchError::malformed(url, format!("undecodable index: {e}")))?;
        // The newest version of each wanted package.
        let mut newest: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
        for p in paragraphs(&text) {
            let Some(&name) = p.get("Package") else {
                continue;
            };
            if !wanted.contains(&name) {
                continue;
            }
            let newer = newest.get(name).is_none_or(|known| {
                let (a, b) = (p.get("Version"), known.get("Version"));
                let (a, b) = (a.copied().unwrap_or(""), b.copied().unwrap_or(""));
                model::version::compare("Debian", a, b).is_gt()
            });
            if newer {
                newest.insert(name, p);
            }
        }
        let mut out = Vec::new();
        for (name, p) in newest {
            let (Some(version), Some(filename), Some(sha256)) = (
                p.get("Version"),
                p.get("Filename"),
                p.get("SHA256").and_then(|h| hex_digest(h, 64)),
            ) else {
                ctx.note(FetchError::malformed(
                    url,
                    format!("{name}: incomplete stanza"),
                ));
                continue;
            };
            let arch = if p.get("Architecture") == Some(&"all") {
                Arch::Universal
            } else {
                arch
            };
            out.push(Artifact {
                vendor: vendor.into(),
                executable_name: file_name(filename).into(),
                version: (*version).into(),
                platform: Platform::Linux,
                arch,
                url: format!("{files}/{}", filename.trim_start_matches('/')),
                published: PublishedHashes {
                    sha256: Some(sha256),
                    ..Default::default()
                },
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_archive_key_is_debians() {
        let keyring = Keyring::from_armored(ARCHIVE_KEYS).unwrap();
        assert_eq!(
            keyring.fingerprints(),
            ["B8B80B5B623EAB6AD8775C45B7C5D7D6350947F8"]
        );
    }

    #[test]
    fn release_sections_and_paragraphs_parse() {
        let release = "Origin: Debian\nCodename: trixie\nArchitectures: all amd64 arm64\n\
            MD5Sum:\n 0123 12 main/binary-amd64/Packages\nSHA256:\n \
            aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 1234 main/binary-amd64/Packages.xz\n \
            short 1 bad\n";
        let entries = release_sha256(release);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].path, "main/binary-amd64/Packages.xz");
        assert_eq!(entries[0].size, 1234);
        let first = paragraphs(release).next().unwrap();
        assert_eq!(first["Codename"], "trixie");
    }
}
