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
//!
//! Pinned versions the archive no longer serves (`snapshot_url`, unset by default): a host
//! that is not fully up to date runs builds no followed suite lists any more. With a
//! snapshot service configured (`https://snapshot.debian.org`), such a pin is looked up in
//! its machine-readable API, `/mr/binary/<name>/<version>/binfiles?fileinfo=1`, which names
//! each file of that version by architecture and SHA-1, and the archive (`debian`,
//! `debian-security`) and moment (`first_seen`, `YYYYMMDDTHHMMSSZ`) it was first seen in
//! (format: <https://salsa.debian.org/snapshot-team/snapshot/-/blob/master/API>). The
//! archive as it stood then, `/archive/<archive>/<first_seen>/`, is then read through the
//! same signed chain as the live one: the configured releases' suites there (the release
//! and `-updates` in `debian`, `-security` in `debian-security`), each `InRelease` checked
//! against the same shipped keys, the `Packages` index against the signed Release, the
//! version's stanza, and its `.deb` against the index's SHA-256. The API's answer only says
//! where to look: a file it places elsewhere than the signed index does is refused. The
//! records are those of a live pin (vendor `Debian <release>`, the pinned version); a
//! version the service does not know either is reported as listed by neither.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use async_trait::async_trait;
use model::{Arch, Platform};
use serde::Deserialize;

use crate::fetch::{
    Artifact, FetchContext, FetchError, Fetcher, PublishedHashes, VendorConfig, resolve_url,
};
use crate::formats::{encode_segment, file_name, hex_digest};
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
                match self
                    .read_suite(ctx, suite, keyring, &selection, ARCHES)
                    .await
                {
                    Ok(found) => {
                        out.extend(found.artifacts);
                        pins_found.extend(found.pins_found);
                        failures.extend(found.failures);
                    }
                    Err(e) => failures.push(e),
                }
            }
        }
        let snapshot = ctx
            .config
            .snapshot_url
            .as_deref()
            .map(|u| u.trim_end_matches('/'));
        for (name, pin) in &selection.names {
            let Some(version) = pin else { continue };
            if pins_found.contains(name) {
                continue;
            }
            let item = format!("{name}={version}");
            let listed_by = format!("the followed suites of {root} ({})", releases.join(", "));
            let Some(snapshot) = snapshot else {
                failures.push(FetchError::NotListed { item, listed_by });
                continue;
            };
            let pinned = Pinned {
                name,
                version,
                listed_by: &listed_by,
            };
            match self.snapshot(ctx, snapshot, pinned, &releases).await {
                Ok(artifacts) if artifacts.is_empty() => failures.push(FetchError::NotListed {
                    item,
                    listed_by: format!("{listed_by}, nor by the snapshot service at {snapshot}"),
                }),
                Ok(artifacts) => out.extend(artifacts),
                Err(e) => failures.push(e),
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
        self.read_suite(ctx, suite, &self.keyring, &selection, ARCHES)
            .await
    }

    /// The followed packages of one suite, read for `arches` (those of [`ARCHES`] wanted).
    async fn read_suite(
        &self,
        ctx: &FetchContext,
        suite: Suite<'_>,
        keyring: &Keyring,
        selection: &Selection,
        arches: &[(&str, Arch)],
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
        for &(deb_arch, arch) in arches {
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

/// A pinned version looked up at the snapshot service, and what the followed suites were.
#[derive(Clone, Copy)]
struct Pinned<'a> {
    name: &'a str,
    version: &'a str,
    /// The followed suites that do not list it, as a problem names them.
    listed_by: &'a str,
}

/// The snapshot service's answer to `/mr/binary/<name>/<version>/binfiles?fileinfo=1`
/// (<https://salsa.debian.org/snapshot-team/snapshot/-/blob/master/API>): the files of that
/// binary version, by architecture and SHA-1, and where each SHA-1 was first seen.
#[derive(Debug, Deserialize)]
struct BinFiles {
    result: Vec<BinFile>,
    fileinfo: BTreeMap<String, Vec<FileInfo>>,
}

#[derive(Debug, Deserialize)]
struct BinFile {
    architecture: String,
    hash: String,
}

#[derive(Debug, Deserialize)]
struct FileInfo {
    archive_name: String,
    first_seen: String,
    name: String,
    path: String,
}

/// The archives of the snapshot service read, with the keys of each and the suites of a
/// release each has (`<release><suffix>`).
const SNAPSHOT_ARCHIVES: &[(&str, &[&str])] = &[
    ("debian", &["", "-updates"]),
    ("debian-security", &["-security"]),
];

/// One file of a pinned version as the snapshot service places it: in which archive and at
/// which moment its signed chain is read, and where in that archive it is.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SnapshotFile {
    /// `amd64`, `arm64` or `all`.
    deb_arch: String,
    archive: &'static str,
    first_seen: String,
    /// `pool/main/c/coreutils/coreutils_9.1-1_amd64.deb`.
    filename: String,
}

/// A snapshot service timestamp, `YYYYMMDDTHHMMSSZ`, and a real moment.
fn snapshot_timestamp(ts: &str) -> bool {
    let b = ts.as_bytes();
    b.len() == 16
        && b[8] == b'T'
        && b[15] == b'Z'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit)
        && chrono::NaiveDateTime::parse_from_str(ts, "%Y%m%dT%H%M%SZ").is_ok()
}

/// The files of the answer for the followed architectures, each placed in an archive read
/// at a valid moment. An answer that names a file it gives no valid place for is an error
/// (nothing of the version is taken from it).
fn snapshot_files(url: &str, answer: &BinFiles) -> Result<Vec<SnapshotFile>, FetchError> {
    let bad = |reason: String| FetchError::malformed(url, reason);
    let mut out = Vec::new();
    for file in &answer.result {
        let deb_arch = file.architecture.as_str();
        if deb_arch != "all" && !ARCHES.iter().any(|(a, _)| *a == deb_arch) {
            continue;
        }
        let sha1 = hex_digest(&file.hash, 40)
            .ok_or_else(|| bad(format!("{} is not a SHA-1", model::shown(&file.hash))))?;
        let places = answer
            .fileinfo
            .iter()
            .find(|(hash, _)| hash.eq_ignore_ascii_case(&sha1))
            .map(|(_, places)| places)
            .ok_or_else(|| bad(format!("no fileinfo for {sha1}")))?;
        let mut known = None;
        for place in places {
            let Some(&(archive, _)) = SNAPSHOT_ARCHIVES
                .iter()
                .find(|(a, _)| *a == place.archive_name)
            else {
                continue;
            };
            if !snapshot_timestamp(&place.first_seen) {
                return Err(bad(format!(
                    "{sha1}: first_seen {} is not a YYYYMMDDTHHMMSSZ timestamp",
                    model::shown(&place.first_seen)
                )));
            }
            let path = place.path.trim_matches('/');
            if place.name.is_empty() || place.name.contains('/') || path.is_empty() {
                return Err(bad(format!("{sha1}: no usable path and name")));
            }
            known.get_or_insert(SnapshotFile {
                deb_arch: deb_arch.to_owned(),
                archive,
                first_seen: place.first_seen.clone(),
                filename: format!("{path}/{}", place.name),
            });
        }
        let Some(known) = known else {
            let names: Vec<String> = places
                .iter()
                .map(|p| model::shown(&p.archive_name))
                .collect();
            return Err(bad(format!(
                "{sha1} ({deb_arch}) was seen only in archive_name {}, which is not read \
                 (only debian and debian-security are)",
                names.join(", ")
            )));
        };
        if !out.contains(&known) {
            out.push(known);
        }
    }
    Ok(out)
}

impl Debian {
    /// The `.deb`s of a pinned version the followed suites do not list, read from the
    /// snapshot service at `snapshot`: where its API places each file, then the archive as it
    /// stood then through the same signed chain as the live one (the releases' suites in that
    /// archive, under the same keys). Empty when the service does not know the version for
    /// the followed architectures. Any failure along the way is an error, and nothing of the
    /// version is taken.
    async fn snapshot(
        &self,
        ctx: &FetchContext,
        snapshot: &str,
        pinned: Pinned<'_>,
        releases: &[String],
    ) -> Result<Vec<Artifact>, FetchError> {
        let Pinned {
            name,
            version,
            listed_by,
        } = pinned;
        let url = format!(
            "{snapshot}/mr/binary/{}/{}/binfiles?fileinfo=1",
            encode_segment(name),
            encode_segment(version)
        );
        // Within the document size limit, as every channel document.
        let answer: BinFiles = match ctx.get_json(&url, Some("application/json")).await {
            Ok(answer) => answer,
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let files = snapshot_files(&url, &answer)?;
        let mut moments: BTreeMap<(&str, &str), Vec<&SnapshotFile>> = BTreeMap::new();
        for file in &files {
            moments
                .entry((file.archive, file.first_seen.as_str()))
                .or_default()
                .push(file);
        }
        let selection = Selection {
            names: [(name.to_owned(), Some(version.to_owned()))].into(),
            ..Selection::default()
        };
        let mut out: Vec<Artifact> = Vec::new();
        let mut read = Vec::new();
        for ((archive, first_seen), files) in moments {
            let root = format!("{snapshot}/archive/{archive}/{first_seen}");
            let (keyring, suffixes) = match SNAPSHOT_ARCHIVES.iter().find(|(a, _)| *a == archive) {
                Some(&("debian-security", suffixes)) => (&self.security_keyring, suffixes),
                Some(&(_, suffixes)) => (&self.keyring, suffixes),
                None => continue,
            };
            // An `all` package is listed in every architecture's index.
            let arches: Vec<(&str, Arch)> = ARCHES
                .iter()
                .filter(|(a, _)| {
                    files
                        .iter()
                        .any(|f| f.deb_arch == *a || f.deb_arch == "all")
                })
                .copied()
                .collect();
            for codename in releases {
                let vendor = format!("{} {codename}", self.vendor());
                for suffix in suffixes {
                    let suite_name = format!("{codename}{suffix}");
                    let suite = Suite {
                        root: &root,
                        name: &suite_name,
                        vendor: &vendor,
                    };
                    let found = match self
                        .read_suite(ctx, suite, keyring, &selection, &arches)
                        .await
                    {
                        Ok(found) => found,
                        // A suite the archive did not have then.
                        Err(e) if e.is_not_found() => continue,
                        Err(e) => return Err(e),
                    };
                    read.push(format!("{archive}/{first_seen} {suite_name}"));
                    if let Some(e) = found.failures.into_iter().next() {
                        return Err(e);
                    }
                    for artifact in found.artifacts {
                        check_snapshot_place(&url, &root, &artifact, &files)?;
                        if !out.contains(&artifact) {
                            out.push(artifact);
                        }
                    }
                }
            }
        }
        if out.is_empty() && !files.is_empty() {
            let listed_by = if read.is_empty() {
                format!(
                    "{listed_by}, nor by the snapshot service at {snapshot}, whose archive had \
                     none of these releases' suites where it was first seen"
                )
            } else {
                format!(
                    "{listed_by}, nor by the signed suites of the snapshot service at \
                     {snapshot} where it was first seen ({})",
                    read.join(", ")
                )
            };
            return Err(FetchError::NotListed {
                item: format!("{name}={version}"),
                listed_by,
            });
        }
        Ok(out)
    }
}

/// The signed index's `.deb` of an architecture is where the snapshot service places that
/// architecture's file: otherwise the service and the signed chain disagree, and the
/// version is refused. The API's SHA-1 is not made a published hash of the artifact: a
/// published hash is recorded as is when the file is not downloaded (members off, or a
/// download that fails), and this one is vouched for by no signature; the `.deb` is
/// checked against the signed SHA-256 and recorded with the digests of its own bytes.
fn check_snapshot_place(
    url: &str,
    root: &str,
    artifact: &Artifact,
    files: &[&SnapshotFile],
) -> Result<(), FetchError> {
    let deb_arch = match artifact.arch {
        Arch::Universal => "all",
        arch => ARCHES
            .iter()
            .find(|(_, a)| *a == arch)
            .map_or("", |(d, _)| *d),
    };
    let placed = files
        .iter()
        .filter(|f| f.deb_arch == deb_arch)
        .map(|f| resolve_url(&format!("{root}/"), &f.filename))
        .collect::<Result<Vec<_>, _>>()?;
    if placed.contains(&artifact.url) {
        return Ok(());
    }
    Err(FetchError::malformed(
        url,
        format!(
            "the signed index lists {} for {deb_arch}, where the snapshot service places \
             no file of this version: refused",
            artifact.url
        ),
    ))
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
    fn snapshot_timestamps_and_path_segments_are_strict() {
        assert!(snapshot_timestamp("20230610T031425Z"));
        for bad in [
            "2023-06-10T03:14:25Z",
            "20230610T031425",
            "20230610t031425Z",
            "20231310T031425Z",
            "20230610T251425Z",
            "2023061OT031425Z",
            "../../../../etc",
            "",
        ] {
            assert!(!snapshot_timestamp(bad), "{bad}");
        }
        assert_eq!(
            encode_segment("1:2.41-12+deb13u5~1"),
            "1%3A2.41-12%2Bdeb13u5~1"
        );
        assert_eq!(encode_segment("a/b c?d#e%"), "a%2Fb%20c%3Fd%23e%25");
    }

    #[test]
    fn snapshot_files_keep_followed_arches_in_read_archives() {
        let sha = |c: char| c.to_string().repeat(40);
        let answer = format!(
            r#"{{"result": [{{"architecture": "amd64", "hash": "{a}"}},
                {{"architecture": "s390x", "hash": "{b}"}},
                {{"architecture": "all", "hash": "{c}"}}],
              "fileinfo": {{
                "{a}": [{{"archive_name": "debian-ports", "first_seen": "bad", "name": "x", "path": "/p"}},
                        {{"archive_name": "debian", "first_seen": "20230610T031425Z",
                          "name": "p_1_amd64.deb", "path": "/pool/main/p/p", "size": 1}}],
                "{c}": [{{"archive_name": "debian-security", "first_seen": "20240101T000000Z",
                          "name": "p-doc_1_all.deb", "path": "/pool/updates/main/p/p/"}}]}}}}"#,
            a = sha('a'),
            b = sha('b'),
            c = sha('c')
        );
        let answer: BinFiles = serde_json::from_str(&answer).unwrap();
        let files = snapshot_files("u", &answer).unwrap();
        assert_eq!(
            files,
            [
                SnapshotFile {
                    deb_arch: "amd64".into(),
                    archive: "debian",
                    first_seen: "20230610T031425Z".into(),
                    filename: "pool/main/p/p/p_1_amd64.deb".into(),
                },
                SnapshotFile {
                    deb_arch: "all".into(),
                    archive: "debian-security",
                    first_seen: "20240101T000000Z".into(),
                    filename: "pool/updates/main/p/p/p-doc_1_all.deb".into(),
                },
            ]
        );
        let only_ports = format!(
            r#"{{"result": [{{"architecture": "arm64", "hash": "{a}"}}],
              "fileinfo": {{"{a}": [{{"archive_name": "debian-ports",
                "first_seen": "20230610T031425Z", "name": "x", "path": "/p"}}]}}}}"#,
            a = sha('a')
        );
        let answer: BinFiles = serde_json::from_str(&only_ports).unwrap();
        let e = snapshot_files("u", &answer).unwrap_err().to_string();
        assert!(e.contains("\"debian-ports\", which is not read"), "{e}");
        let unplaced = format!(
            r#"{{"result": [{{"architecture": "arm64", "hash": "{a}"}}], "fileinfo": {{}}}}"#,
            a = sha('a')
        );
        let answer: BinFiles = serde_json::from_str(&unplaced).unwrap();
        let e = snapshot_files("u", &answer).unwrap_err().to_string();
        assert!(e.contains("no fileinfo"), "{e}");
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
