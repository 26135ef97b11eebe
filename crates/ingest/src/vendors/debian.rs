//! Debian packages from the official mirror network and the security archive, following
//! the archives' signed chains, for every supported release.
//!
//! Releases: `releases = ["supported"]` (the default) is oldstable and stable, whose code
//! names are read from the archive's own signed `dists/oldstable/InRelease` and
//! `dists/stable/InRelease` (`Codename:`), never configured; code names (`bookworm`,
//! `trixie`) restrict or extend the set. For each release three suites are read: the release
//! itself and `<release>-updates` from the archive (`https://deb.debian.org/debian`), and
//! `<release>-security` from the security archive
//! (`https://security.debian.org/debian-security`, signed with the security archive keys).
//!
//! Each suite's `InRelease` is its `Release` file cleartext-signed ([`crate::openpgp`]; keys in
//! `keys/`). Its `SHA256:` section lists each index as
//! ` <sha256> <size> main/binary-amd64/Packages.xz`. Each `Packages` index is a list of deb822
//! stanzas (`Package`, `Version`, `Architecture`, `Priority`, `Filename`, `SHA256`), and each
//! `.deb` named there is an artifact with its SHA-256; the pipeline then reads the files of
//! its `data.tar.*` as members ([`crate::members`]), checked against the package's own
//! `md5sums`. Format: Debian Policy 5, deb(5) and
//! <https://wiki.debian.org/DebianRepository/Format>.
//!
//! Records carry their release in their vendor (`Debian bookworm`, `Debian trixie`): the
//! builds of one file in two releases are two histories, each with its own current record,
//! and within a release the newest build of the three suites is current (a security update
//! supersedes the release build, which stays in the history).
//!
//! Which packages ([`Selection`]): `@base`, the base system by Debian's own definition
//! (`Priority: required`, `important` and `standard`), plus the tools attackers replace or
//! imitate (the default); `*`, every binary package of `main`; names, optionally pinned
//! `name=version`, from `items` and `items_file`. Each package's newest version in an index
//! is taken (a pinned one: exactly that version), for each architecture followed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use async_trait::async_trait;
use model::{Arch, Platform};

use crate::fetch::{
    Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig, resolve_url,
};
use crate::formats::{file_name, hex_digest};
use crate::openpgp::Keyring;

/// The archive keys that sign Debian's `InRelease` files (see `keys/SOURCE.md`).
pub(crate) const ARCHIVE_KEYS: &[&str] = &[
    include_str!("../../keys/debian-archive-bookworm-automatic.asc"),
    include_str!("../../keys/debian-archive-trixie-automatic.asc"),
];

/// The keys that sign the security archive's `InRelease` files (see `keys/SOURCE.md`).
pub(crate) const SECURITY_KEYS: &[&str] = &[
    include_str!("../../keys/debian-archive-bookworm-security-automatic.asc"),
    include_str!("../../keys/debian-archive-trixie-security-automatic.asc"),
];

/// Architectures followed, with the arch of their records.
const ARCHES: &[(&str, Arch)] = &[("amd64", Arch::Amd64), ("arm64", Arch::Arm64)];

/// Largest decompressed `Packages` index read (a full `main` is about 70 MB).
const MAX_INDEX_BYTES: u64 = 512 << 20;

/// The item that stands for the base system.
pub(crate) const BASE_SYSTEM: &str = "@base";

/// The priorities of Debian's (and Ubuntu's) base system.
const BASE_PRIORITIES: &[&str] = &["required", "important", "standard"];

/// The `releases` entry that stands for every supported release.
pub(crate) const SUPPORTED: &str = "supported";

/// The suites `supported` stands for, resolved to code names from their Release files.
const SUPPORTED_ALIASES: &[&str] = &["oldstable", "stable"];

/// A Debian-format repository: Debian itself, or one signed with another keyring.
pub struct Debian {
    keyring: Keyring,
    security_keyring: Keyring,
}

fn keyring(armored: &[&str]) -> Keyring {
    // The shipped keys are checked by a test; a key that fails to parse leaves an empty
    // keyring, against which every InRelease fails to verify.
    Keyring::from_armored(armored).unwrap_or_else(|e| {
        tracing::error!(error = %e, "archive keyring unreadable");
        Keyring::empty()
    })
}

impl Debian {
    /// Debian with its archive and security archive keys.
    pub fn new() -> Self {
        Self {
            keyring: keyring(ARCHIVE_KEYS),
            security_keyring: keyring(SECURITY_KEYS),
        }
    }

    /// Repositories (archive and security archive) signed with these armored keys (tests
    /// use a key made at test time).
    pub fn with_keys(armored: &[&str]) -> Self {
        Self {
            keyring: keyring(armored),
            security_keyring: keyring(armored),
        }
    }

    pub(crate) fn default_config() -> VendorConfig {
        let mut items = vec![BASE_SYSTEM];
        items.extend_from_slice(DEFAULT_PACKAGES);
        let mut config = VendorConfig::new("https://deb.debian.org/debian").with_items(&items);
        config.releases = vec![SUPPORTED.into()];
        config.security_url = Some("https://security.debian.org/debian-security".into());
        config
    }
}

impl Default for Debian {
    fn default() -> Self {
        Self::new()
    }
}

/// Binary packages holding what attackers replace or imitate on servers, followed besides
/// the base system.
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
    "python3.11-minimal",
    "python3.13-minimal",
    "perl-base",
    "busybox",
];

/// Which packages of an index are followed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Selection {
    /// `*`: every package.
    pub all: bool,
    /// `@base`: packages whose priority is `required`, `important` or `standard`.
    pub base: bool,
    /// Names, each with a pinned version or none (the newest).
    pub names: BTreeMap<String, Option<String>>,
}

impl Selection {
    /// From configured items (`*`, `@base`, `name`, `name=version`).
    pub(crate) fn from_items(items: &[String]) -> Self {
        let mut out = Self::default();
        for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
            match item {
                "*" => out.all = true,
                BASE_SYSTEM => out.base = true,
                _ => {
                    let (name, pin) = match item.split_once('=') {
                        Some((n, v)) => (n.trim(), Some(v.trim().to_owned())),
                        None => (item, None),
                    };
                    out.names
                        .insert(name.to_owned(), pin.filter(|v| !v.is_empty()));
                }
            }
        }
        out
    }

    /// Whether a stanza is followed, and the version it must have (pinned) if any.
    fn wants(&self, name: &str, priority: Option<&str>) -> Option<Option<&str>> {
        if let Some(pin) = self.names.get(name) {
            return Some(pin.as_deref());
        }
        let base = self.base && priority.is_some_and(|p| BASE_PRIORITIES.contains(&p));
        (self.all || base).then_some(None)
    }
}

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
pub(crate) struct IndexEntry {
    pub sha256: String,
    pub size: u64,
    pub path: String,
}

/// The `SHA256:` section of a `Release` file.
pub(crate) fn release_sha256(release: &str) -> Vec<IndexEntry> {
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

/// One suite of a repository to read.
#[derive(Clone, Copy)]
pub(crate) struct Suite<'a> {
    /// The repository's root (`<root>/dists/<suite>/`), also the root of `Filename`s.
    pub root: &'a str,
    pub name: &'a str,
    /// The vendor of its records.
    pub vendor: &'a str,
}

/// What one suite gave: its artifacts, the packages pinned and found, and the failures of
/// indexes that could not be read.
#[derive(Default)]
pub(crate) struct SuiteFound {
    pub artifacts: Vec<Artifact>,
    pub pins_found: BTreeSet<String>,
    pub failures: Vec<FetchError>,
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
        let selection = Selection::from_items(&ctx.items()?);
        let root = ctx.base_url().to_owned();
        let security = ctx
            .config
            .security_url
            .as_deref()
            .map(|u| u.trim_end_matches('/').to_owned());
        let mut failures = Vec::new();
        let releases = self.releases(ctx, &root, &mut failures).await;
        if releases.is_empty() {
            return Err(failures
                .into_iter()
                .next()
                .unwrap_or_else(|| FetchError::malformed(&root, "no release to follow")));
        }
        let mut out = Vec::new();
        let mut pins_found = BTreeSet::new();
        for codename in &releases {
            let vendor = format!("{} {codename}", self.vendor());
            let updates = format!("{codename}-updates");
            let security_suite = format!("{codename}-security");
            let mut suites = vec![
                (
                    Suite {
                        root: &root,
                        name: codename,
                        vendor: &vendor,
                    },
                    &self.keyring,
                ),
                (
                    Suite {
                        root: &root,
                        name: &updates,
                        vendor: &vendor,
                    },
                    &self.keyring,
                ),
            ];
            if let Some(security) = &security {
                let suite = Suite {
                    root: security,
                    name: &security_suite,
                    vendor: &vendor,
                };
                suites.push((suite, &self.security_keyring));
            }
            for (suite, keyring) in suites {
                match self.read_suite(ctx, suite, keyring, &selection).await {
                    Ok(found) => {
                        out.extend(found.artifacts);
                        pins_found.extend(found.pins_found);
                        failures.extend(found.failures);
                    }
                    Err(e) => failures.push(e),
                }
            }
        }
        for (name, pin) in &selection.names {
            if let Some(version) = pin
                && !pins_found.contains(name)
            {
                failures.push(FetchError::NotListed {
                    item: format!("{name}={version}"),
                    listed_by: format!("the followed suites of {root} ({})", releases.join(", ")),
                });
            }
        }
        ctx.settle(out, failures)
    }
}

impl Debian {
    /// The code names of the configured releases (`supported`: oldstable and stable), each
    /// read from its suite's signed Release file, oldest first, each once. A release whose
    /// Release file cannot be read is a failure beside the others.
    async fn releases(
        &self,
        ctx: &FetchContext,
        root: &str,
        failures: &mut Vec<FetchError>,
    ) -> Vec<String> {
        let mut configured: Vec<&str> = Vec::new();
        for release in &ctx.config.releases {
            match release.trim() {
                SUPPORTED => configured.extend_from_slice(SUPPORTED_ALIASES),
                "" => {}
                r => configured.push(r),
            }
        }
        if configured.is_empty() {
            configured.extend_from_slice(SUPPORTED_ALIASES);
        }
        let mut out: Vec<String> = Vec::new();
        for suite in configured {
            if !valid_suite(suite) {
                failures.push(FetchError::Setting {
                    setting: "releases",
                    reason: format!("{} is not a code name", model::shown(suite)),
                });
                continue;
            }
            let release = match self.release(ctx, root, suite, &self.keyring).await {
                Ok((_, release)) => release,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            let fields = paragraphs(&release).next().unwrap_or_default();
            match fields.get("Codename").copied().filter(|c| valid_suite(c)) {
                Some(codename) if !out.iter().any(|c| c == codename) => out.push(codename.into()),
                Some(_) => {}
                None => failures.push(FetchError::malformed(
                    &format!("{root}/dists/{suite}/InRelease"),
                    "no Codename",
                )),
            }
        }
        out
    }

    /// The verified `Release` text of `<root>/dists/<suite>/`, with its URL.
    async fn release(
        &self,
        ctx: &FetchContext,
        root: &str,
        suite: &str,
        keyring: &Keyring,
    ) -> Result<(String, String), FetchError> {
        let url = format!("{root}/dists/{suite}/InRelease");
        let signed = ctx.get_text(&url).await?;
        // Nothing from the repository is trusted unless this verifies.
        let release = keyring
            .verify_cleartext(&signed)
            .map_err(|e| FetchError::malformed(&url, e.to_string()))?;
        Ok((url, release))
    }

    /// The followed packages of one suite of the repository at `root` (`<root>/dists/<suite>/`),
    /// their `.deb` under `files`, as records of `vendor`. An `InRelease` that does not
    /// verify is an error; an index that cannot be read is one of the failures returned
    /// beside what the other indexes gave.
    pub(crate) async fn suite(
        &self,
        ctx: &FetchContext,
        root: &str,
        suite: &str,
        vendor: &str,
    ) -> Result<SuiteFound, FetchError> {
        let selection = Selection::from_items(&ctx.items()?);
        let suite = Suite {
            root,
            name: suite,
            vendor,
        };
        self.read_suite(ctx, suite, &self.keyring, &selection).await
    }

    async fn read_suite(
        &self,
        ctx: &FetchContext,
        suite: Suite<'_>,
        keyring: &Keyring,
        selection: &Selection,
    ) -> Result<SuiteFound, FetchError> {
        let (url, release) = self.release(ctx, suite.root, suite.name, keyring).await?;
        let fields = paragraphs(&release).next().unwrap_or_default();
        let listed_arches: Vec<&str> = fields
            .get("Architectures")
            .map(|a| a.split_whitespace().collect())
            .unwrap_or_default();
        let indexes = release_sha256(&release);
        if indexes.is_empty() {
            return Err(FetchError::malformed(&url, "no SHA256 section"));
        }
        let mut found = SuiteFound::default();
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
                found
                    .failures
                    .push(FetchError::malformed(&url, format!("{base} not listed")));
                continue;
            };
            let index_url = format!("{}/dists/{}/{}", suite.root, suite.name, entry.path);
            let at = Index {
                url: &index_url,
                entry,
                files: suite.root,
                vendor: suite.vendor,
            };
            match self.packages(ctx, at, selection, arch, &mut found).await {
                Ok(()) => {}
                Err(e) => found.failures.push(e),
            }
        }
        Ok(found)
    }

    async fn packages(
        &self,
        ctx: &FetchContext,
        at: Index<'_>,
        selection: &Selection,
        arch: Arch,
        found: &mut SuiteFound,
    ) -> Result<(), FetchError> {
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
        // The newest version of each wanted package (a pinned one: that version).
        let mut newest: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
        for p in paragraphs(&text) {
            let Some(&name) = p.get("Package") else {
                continue;
            };
            let Some(pin) = selection.wants(name, p.get("Priority").copied()) else {
                continue;
            };
            let version = p.get("Version").copied().unwrap_or("");
            if let Some(pin) = pin {
                if version == pin {
                    newest.insert(name, p);
                }
                continue;
            }
            let newer = newest.get(name).is_none_or(|known| {
                let known = known.get("Version").copied().unwrap_or("");
                model::version::compare("Debian", version, known).is_gt()
            });
            if newer {
                newest.insert(name, p);
            }
        }
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
            // `Filename` is relative to the archive's root (apt appends it to the root).
            let file_url = match resolve_url(&format!("{files}/"), filename.trim_start_matches('/'))
            {
                Ok(u) => u,
                Err(e) => {
                    ctx.note(e);
                    continue;
                }
            };
            if selection.names.get(name).is_some_and(Option::is_some) {
                found.pins_found.insert(name.to_owned());
            }
            let arch = if p.get("Architecture") == Some(&"all") {
                Arch::Universal
            } else {
                arch
            };
            found.artifacts.push(Artifact {
                vendor: vendor.into(),
                executable_name: file_name(filename).into(),
                version: (*version).into(),
                platform: Platform::Linux,
                arch,
                url: file_url,
                published: PublishedHashes {
                    sha256: Some(sha256),
                    ..Default::default()
                },
            });
        }
        Ok(())
    }
}

/// A suite or code name as the archive spells them (`bookworm`, `trixie-security`).
fn valid_suite(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_archive_key_is_debians() {
        let keyring = Keyring::from_armored(ARCHIVE_KEYS).unwrap();
        assert_eq!(
            keyring.fingerprints(),
            [
                "B8B80B5B623EAB6AD8775C45B7C5D7D6350947F8",
                "04B54C3CDCA79751B16BC6B5225629DF75B188BD"
            ]
        );
    }

    #[test]
    fn the_shipped_security_keys_are_debians() {
        let keyring = Keyring::from_armored(SECURITY_KEYS).unwrap();
        assert_eq!(
            keyring.fingerprints(),
            [
                "05AB90340C0C5E797F44A8C8254CF3B5AEC0A8F0",
                "5E04A1E3223A19A20706E20F9904613D4CCE68C6"
            ]
        );
    }

    #[test]
    fn items_select_by_name_pin_priority_or_all() {
        let items: Vec<String> = ["@base", "curl", "libc-bin=2.41-12+deb13u5", " "]
            .map(String::from)
            .to_vec();
        let s = Selection::from_items(&items);
        assert_eq!(s.wants("curl", Some("optional")), Some(None));
        assert_eq!(
            s.wants("libc-bin", Some("required")),
            Some(Some("2.41-12+deb13u5"))
        );
        assert_eq!(s.wants("dash", Some("required")), Some(None));
        assert_eq!(s.wants("less", Some("important")), Some(None));
        assert_eq!(s.wants("nginx", Some("optional")), None);
        assert_eq!(s.wants("nginx", None), None);
        let all = Selection::from_items(&["*".to_owned()]);
        assert_eq!(all.wants("nginx", Some("optional")), Some(None));
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
