//! The local package database, read for `knowngood scan --packages`: which installed
//! package (and version) owns each scanned file.
//!
//! Which database: dpkg's when `<root>/var/lib/dpkg/status` exists, else RPM's
//! `rpmdb.sqlite` (in `<root>/var/lib/rpm`, else `<root>/usr/lib/sysimage/rpm`), else RPM's
//! BerkeleyDB `Packages` there (RPM 4.15 and older: RHEL and Rocky Linux 8, CentOS 7;
//! [`berkeley`]). `ndb`'s `Packages.db` is named in an error, not read.
//!
//! dpkg (Debian, Ubuntu): `<root>/var/lib/dpkg/status` lists the packages with their
//! state, architecture and version; `<root>/var/lib/dpkg/info/<package>[:<arch>].list`
//! the paths each one installed. Only packages whose files are on disk are read
//! (`config-files` and `not-installed` own nothing).
//!
//! RPM: `rpmdb.sqlite` (RHEL and Rocky Linux 9 and later, Fedora 33 and later, openSUSE)
//! has the table `Packages(hnum, blob)`, and BerkeleyDB's `Packages` (RHEL and Rocky Linux 8)
//! the same blobs keyed by `hnum`: each installed package's header as rpm keeps it, the
//! header structure without its magic ([`ingest::rpm::parse_installed`]), whose `NAME`,
//! `EPOCH`, `VERSION`, `RELEASE` and `ARCH` are read, and its paths from `DIRNAMES`,
//! `BASENAMES` and `DIRINDEXES`. The `gpg-pubkey` entries (imported signing keys, not
//! packages) are left out. `rpmdb.sqlite` is opened read-only as immutable, so a live
//! system's database is neither locked nor changed (a transaction rpm has not yet
//! checkpointed is not seen); BerkeleyDB's file is only read, a page at a time. Every size is
//! bounded: a header of more than [`ingest::rpm::MAX_HEADER_BYTES`], more than
//! [`MAX_PACKAGES`] packages or [`MAX_PATHS`] paths, or a header whose index points outside
//! its data, is an error naming the database.
//!
//! An installed version is written as the records of its family write it
//! ([`PackagesDb::version_matches`]): dpkg's `Version`, and for RPM `[EPOCH:]VERSION-RELEASE`,
//! the epoch only when it is not 0 (`bash` `5.1.8-9.el9`, `vim-minimal` `2:8.2.2637-20.el9_1`),
//! as the Rocky Linux records are made from the repositories' metadata. The architecture is a
//! record's own field, never part of its version.
//!
//! Paths are compared after resolving the symlinks of their directory on both sides, so
//! a file dpkg lists as `/bin/ls` is found when scanned as `/usr/bin/ls` on a merged-`/usr`
//! system. A scanned symlink that no package owns is looked up as the file it points to
//! (`/usr/bin/awk` through `/etc/alternatives` is `mawk`'s). Diversions are not read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

mod berkeley;

/// Most packages read from an RPM database (a large server has a few thousand).
pub(crate) const MAX_PACKAGES: usize = 1_000_000;
/// Most paths read from an RPM database, all packages together (a large workstation has
/// under a million).
pub(crate) const MAX_PATHS: usize = 10_000_000;

/// Which package database was read: it decides how versions compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Dpkg,
    Rpm,
}

/// An installed package.
#[derive(Debug, Clone)]
pub(crate) struct Package {
    pub(crate) name: String,
    pub(crate) arch: String,
    pub(crate) version: String,
}

/// Installed packages and the files they own.
#[derive(Debug)]
pub(crate) struct PackagesDb {
    pub(crate) kind: Kind,
    pub(crate) packages: Vec<Package>,
    /// A path (directory resolved) to the packages that own it.
    owners: HashMap<PathBuf, Vec<usize>>,
    /// Directories already resolved.
    dirs: std::cell::RefCell<HashMap<PathBuf, PathBuf>>,
}

/// Package states whose files are on disk.
const ON_DISK: [&str; 6] = [
    "installed",
    "half-configured",
    "unpacked",
    "half-installed",
    "triggers-awaited",
    "triggers-pending",
];

impl PackagesDb {
    /// Reads the package database of the system at `root` (`/` for this host): dpkg's,
    /// else RPM's `rpmdb.sqlite`, else RPM's BerkeleyDB `Packages`.
    pub(crate) fn open(root: &Path) -> Result<Self> {
        let status_path = root.join("var/lib/dpkg/status");
        match std::fs::read(&status_path) {
            Ok(bytes) => return Ok(Self::dpkg(root, &String::from_utf8_lossy(&bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(e).with_context(|| format!("reading {}", status_path.display()));
            }
        }
        let rpm_dirs = [root.join("var/lib/rpm"), root.join("usr/lib/sysimage/rpm")];
        if let Some(sqlite) = rpm_dirs
            .iter()
            .map(|dir| dir.join("rpmdb.sqlite"))
            .find(|path| path.exists())
        {
            let packages = read_rpmdb(&sqlite)
                .with_context(|| format!("reading the RPM database {}", sqlite.display()))?;
            return Ok(Self::with_paths(Kind::Rpm, root, packages));
        }
        if let Some(bdb) = rpm_dirs
            .iter()
            .map(|dir| dir.join("Packages"))
            .find(|path| path.exists())
        {
            let mut packages = RpmPackages::default();
            berkeley::for_each_header(&bdb, |hnum, blob| packages.add(hnum.into(), blob))
                .with_context(|| format!("reading the RPM database {}", bdb.display()))?;
            return Ok(Self::with_paths(Kind::Rpm, root, packages.packages));
        }
        if let Some(ndb) = rpm_dirs
            .iter()
            .map(|dir| dir.join("Packages.db"))
            .find(|path| path.exists())
        {
            bail!(
                "--packages: the RPM database at {} is in the ndb format, which is not read: \
                 only rpmdb.sqlite, BerkeleyDB's Packages and dpkg's status are",
                ndb.display()
            );
        }
        bail!(
            "--packages: no package database: neither dpkg's {} nor RPM's {} exists",
            status_path.display(),
            rpm_dirs[0].join("rpmdb.sqlite").display()
        )
    }

    /// dpkg's database: `status`, then each package's `info/*.list`.
    fn dpkg(root: &Path, status: &str) -> Self {
        let info = root.join("var/lib/dpkg/info");
        let packages = parse_status(status)
            .into_iter()
            .map(|package| {
                let qualified = info.join(format!("{}:{}.list", package.name, package.arch));
                let plain = info.join(format!("{}.list", package.name));
                // A package with no list (a metapackage's may be absent) owns nothing.
                let list = std::fs::read(&qualified)
                    .or_else(|_| std::fs::read(&plain))
                    .unwrap_or_default();
                let paths = String::from_utf8_lossy(&list)
                    .lines()
                    .map(str::to_owned)
                    .collect();
                (package, paths)
            })
            .collect();
        Self::with_paths(Kind::Dpkg, root, packages)
    }

    /// The packages with the absolute paths each owns, named under `root`.
    fn with_paths(kind: Kind, root: &Path, packages: Vec<(Package, Vec<String>)>) -> Self {
        let mut db = PackagesDb {
            kind,
            packages: Vec::with_capacity(packages.len()),
            owners: HashMap::new(),
            dirs: Default::default(),
        };
        for (i, (package, paths)) in packages.into_iter().enumerate() {
            db.packages.push(package);
            for path in paths {
                let Some(relative) = path.strip_prefix('/') else {
                    continue;
                };
                if relative.is_empty() {
                    continue;
                }
                let key = db.key(&root.join(relative));
                let owners = db.owners.entry(key).or_default();
                if !owners.contains(&i) {
                    owners.push(i);
                }
            }
        }
        db
    }

    /// Whether a record's version is the installed version of package `package`
    /// ([`dpkg_version_matches`] or [`rpm_version_matches`], by the database read).
    pub(crate) fn version_matches(&self, record: &str, package: usize) -> bool {
        let installed = &self.packages[package].version;
        match self.kind {
            Kind::Dpkg => dpkg_version_matches(record, installed),
            Kind::Rpm => rpm_version_matches(record, installed),
        }
    }

    /// The packages that own a scanned path (as the scan names it).
    pub(crate) fn owners_of(&self, path: &Path) -> &[usize] {
        let Ok(absolute) = std::path::absolute(path) else {
            return &[];
        };
        if let Some(owners) = self.owners.get(&self.key(&absolute)) {
            return owners;
        }
        // A symlink no package owns (an alternative, `/usr/bin/awk`) is the file it
        // points to, which the scan hashed.
        match std::fs::canonicalize(&absolute) {
            Ok(target) if target != absolute => self.owners.get(&target).map_or(&[], Vec::as_slice),
            _ => &[],
        }
    }

    /// The path with its directory's symlinks resolved (lexical when it cannot be).
    fn key(&self, path: &Path) -> PathBuf {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return path.to_path_buf();
        };
        let mut dirs = self.dirs.borrow_mut();
        let resolved = dirs
            .entry(parent.to_path_buf())
            .or_insert_with(|| std::fs::canonicalize(parent).unwrap_or_else(|_| parent.into()));
        resolved.join(name)
    }
}

/// The packages of a dpkg `status` file whose files are on disk.
fn parse_status(text: &str) -> Vec<Package> {
    let mut packages = Vec::new();
    for stanza in text.split("\n\n") {
        let mut fields: HashMap<&str, &str> = HashMap::new();
        for line in stanza.lines() {
            if line.starts_with([' ', '\t']) {
                continue;
            }
            if let Some((name, value)) = line.split_once(':') {
                fields.insert(name.trim(), value.trim());
            }
        }
        let (Some(name), Some(version), Some(state)) = (
            fields.get("Package"),
            fields.get("Version"),
            fields
                .get("Status")
                .and_then(|s| s.split_whitespace().nth(2)),
        ) else {
            continue;
        };
        if !ON_DISK.contains(&state) {
            continue;
        }
        packages.push(Package {
            name: (*name).to_owned(),
            arch: fields.get("Architecture").copied().unwrap_or("").to_owned(),
            version: (*version).to_owned(),
        });
    }
    packages
}

/// Packages read from RPM headers, with their paths, `gpg-pubkey` left out.
#[derive(Default)]
struct RpmPackages {
    packages: Vec<(Package, Vec<String>)>,
    paths: usize,
}

impl RpmPackages {
    /// Adds the package whose header (as the database keeps it) is `blob`.
    fn add(&mut self, hnum: i64, blob: &[u8]) -> Result<()> {
        if self.packages.len() == MAX_PACKAGES {
            bail!("more than {MAX_PACKAGES} packages");
        }
        let header =
            ingest::rpm::parse_installed(blob).with_context(|| format!("package {hnum}"))?;
        if header.name == "gpg-pubkey" {
            return Ok(());
        }
        self.paths = self.paths.saturating_add(header.paths.len());
        if self.paths > MAX_PATHS {
            bail!("more than {MAX_PATHS} paths");
        }
        self.packages.push((
            Package {
                version: rpm_evr(header.epoch, &header.version, &header.release),
                name: header.name,
                arch: header.arch,
            },
            header.paths,
        ));
        Ok(())
    }
}

/// The packages of an `rpmdb.sqlite`, with their paths, `gpg-pubkey` left out.
fn read_rpmdb(path: &Path) -> Result<Vec<(Package, Vec<String>)>> {
    use rusqlite::{OpenFlags, types::ValueRef};
    // Read-only and immutable: no lock is taken and nothing (journal, WAL) is written.
    let absolute = std::path::absolute(path)?;
    let mut uri =
        url::Url::from_file_path(&absolute).map_err(|()| anyhow::anyhow!("not a file path"))?;
    uri.set_query(Some("mode=ro&immutable=1"));
    let conn = rusqlite::Connection::open_with_flags(
        uri.as_str(),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )?;
    // A blob larger than any header is not loaded: its length alone says it is refused.
    let mut statement = conn.prepare(
        "SELECT hnum, length(blob), CASE WHEN length(blob) <= ?1 THEN blob END \
         FROM Packages ORDER BY hnum",
    )?;
    let max = i64::try_from(ingest::rpm::MAX_HEADER_BYTES).unwrap_or(i64::MAX);
    let mut rows = statement.query([max])?;
    let mut packages = RpmPackages::default();
    while let Some(row) = rows.next()? {
        let hnum: i64 = row.get(0)?;
        let len: Option<i64> = row.get(1)?;
        let blob = match row.get_ref(2)? {
            ValueRef::Blob(blob) => blob,
            ValueRef::Null if len.is_some_and(|n| n > max) => bail!(
                "package {hnum}: a header of {} bytes, more than the {max} read",
                len.unwrap_or_default()
            ),
            _ => bail!("package {hnum}: the header is not a blob"),
        };
        packages.add(hnum, blob)?;
    }
    Ok(packages.packages)
}

/// Whether a record's version is the installed dpkg package version.
///
/// The rule: the installed version appears in the record's version as a whole token,
/// delimited by the string's ends or by characters a Debian version cannot contain
/// (anything but letters, digits and `.+~:-`). So `2.36-9+deb12u4` matches the records
/// `2.36-9+deb12u4`, `2.36-9+deb12u4 (bookworm)` and `bookworm/2.36-9+deb12u4`, but never
/// `2.36-9+deb12u40` or `12.36-9+deb12u4`. An epoch (`1:`) missing on one side only is
/// ignored, as file names in the archive drop it.
pub(crate) fn dpkg_version_matches(record: &str, installed: &str) -> bool {
    token_matches(record, installed, |c| {
        c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '~' | ':' | '-')
    })
}

/// Whether a record's version is the installed RPM package version, written
/// `[EPOCH:]VERSION-RELEASE` with the epoch only when not 0 ([`rpm_evr`]).
///
/// The rule is dpkg's with RPM's characters: the installed version appears in the record's
/// version as a whole token, delimited by the string's ends or by characters an RPM
/// version and release cannot contain (anything but letters, digits and `._+~^:-`). So
/// `8.32-34.el9` matches the records `8.32-34.el9` and `8.32-34.el9 (BaseOS)` but not
/// `8.32-34.el9_1` or `18.32-34.el9`. Epochs: an absent epoch is epoch 0, so a record's
/// `0:8.32-34.el9` is `8.32-34.el9`; and an epoch missing on one side only is ignored
/// (package file names drop it), so the installed `2:8.2.2637-20.el9_1` matches the record
/// `2:8.2.2637-20.el9_1` (as Rocky Linux's are made) and `8.2.2637-20.el9_1`, but not
/// `1:8.2.2637-20.el9_1`.
pub(crate) fn rpm_version_matches(record: &str, installed: &str) -> bool {
    token_matches(record, installed, |c| {
        c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '~' | '^' | ':' | '-')
    })
}

/// An RPM package's version as its family's records write it: `[EPOCH:]VERSION-RELEASE`,
/// the epoch only when it is not 0.
pub(crate) fn rpm_evr(epoch: Option<u32>, version: &str, release: &str) -> String {
    match epoch {
        Some(e) if e != 0 => format!("{e}:{version}-{release}"),
        _ => format!("{version}-{release}"),
    }
}

/// Whether `installed` is a token of `record` (tokens are runs of `version_char`), an epoch
/// missing on one side only ignored.
fn token_matches(record: &str, installed: &str, version_char: fn(char) -> bool) -> bool {
    let installed = installed.trim();
    if installed.is_empty() {
        return false;
    }
    record
        .split(|c: char| !version_char(c))
        .filter(|t| !t.is_empty())
        .any(|token| {
            token == installed
                || (has_epoch(token) != has_epoch(installed)
                    && strip_epoch(token) == strip_epoch(installed))
        })
}

fn has_epoch(version: &str) -> bool {
    strip_epoch(version).len() != version.len()
}

fn strip_epoch(version: &str) -> &str {
    match version.split_once(':') {
        Some((epoch, rest)) if !epoch.is_empty() && epoch.bytes().all(|b| b.is_ascii_digit()) => {
            rest
        }
        _ => version,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_match_as_whole_tokens() {
        for record in [
            "2.36-9+deb12u4",
            "2.36-9+deb12u4 (bookworm)",
            "bookworm/2.36-9+deb12u4",
            "2.36-9+deb12u4@bookworm-security",
        ] {
            assert!(dpkg_version_matches(record, "2.36-9+deb12u4"), "{record}");
        }
        for record in ["2.36-9+deb12u40", "12.36-9+deb12u4", "2.36-9", "", "2.36"] {
            assert!(!dpkg_version_matches(record, "2.36-9+deb12u4"), "{record}");
        }
        assert!(dpkg_version_matches("1:9.1-1", "1:9.1-1"));
        assert!(dpkg_version_matches("9.1-1", "1:9.1-1"));
        assert!(dpkg_version_matches("1:9.1-1", "9.1-1"));
        assert!(!dpkg_version_matches("2:9.1-1x", "1:9.1-1"));
        assert!(!dpkg_version_matches("anything", ""));
    }

    #[test]
    fn rpm_versions_match_with_epochs_and_underscores() {
        assert_eq!(rpm_evr(None, "5.1.8", "9.el9"), "5.1.8-9.el9");
        assert_eq!(rpm_evr(Some(0), "5.1.8", "9.el9"), "5.1.8-9.el9");
        assert_eq!(
            rpm_evr(Some(2), "8.2.2637", "20.el9_1"),
            "2:8.2.2637-20.el9_1"
        );
        for record in ["5.1.8-9.el9", "0:5.1.8-9.el9", "5.1.8-9.el9 (BaseOS)"] {
            assert!(rpm_version_matches(record, "5.1.8-9.el9"), "{record}");
        }
        for record in [
            "5.1.8-9.el9_1",
            "15.1.8-9.el9",
            "5.1.8-9",
            "1:5.1.8-9.el9x",
            "",
        ] {
            assert!(!rpm_version_matches(record, "5.1.8-9.el9"), "{record}");
        }
        let vim = "2:8.2.2637-20.el9_1";
        assert!(rpm_version_matches("2:8.2.2637-20.el9_1", vim));
        assert!(rpm_version_matches("8.2.2637-20.el9_1", vim));
        assert!(!rpm_version_matches("1:8.2.2637-20.el9_1", vim));
        assert!(!rpm_version_matches("2:8.2.2637-20.el9", vim));
        // dpkg's characters would cut `el9_1` short, making el9 match an el9_1 record.
        assert!(dpkg_version_matches("8.2.2637-20.el9_1", "8.2.2637-20.el9"));
        assert!(!rpm_version_matches("8.2.2637-20.el9_1", "8.2.2637-20.el9"));
    }

    /// A header as rpmdb.sqlite keeps it (no magic): counts, index, data. Entries are
    /// (tag, type, count, data); the data is laid out in order, INT32 aligned to 4.
    fn blob(entries: &[(u32, u32, u32, Vec<u8>)]) -> Vec<u8> {
        let (mut index, mut data) = (Vec::new(), Vec::new());
        for (tag, kind, count, bytes) in entries {
            if *kind == 4 {
                data.resize(data.len().div_ceil(4) * 4, 0);
            }
            index.extend(tag.to_be_bytes());
            index.extend(kind.to_be_bytes());
            index.extend(u32::try_from(data.len()).unwrap().to_be_bytes());
            index.extend(count.to_be_bytes());
            data.extend(bytes);
        }
        let mut out = Vec::new();
        out.extend(u32::try_from(entries.len()).unwrap().to_be_bytes());
        out.extend(u32::try_from(data.len()).unwrap().to_be_bytes());
        out.extend(index);
        out.extend(data);
        out
    }

    fn string(s: &str) -> Vec<u8> {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        v
    }

    fn strings(list: &[&str]) -> Vec<u8> {
        list.iter().flat_map(|s| string(s)).collect()
    }

    fn int32s(list: &[u32]) -> Vec<u8> {
        list.iter().flat_map(|n| n.to_be_bytes()).collect()
    }

    fn package_blob(name: &str, epoch: Option<u32>, dirindexes: &[u32]) -> Vec<u8> {
        let mut entries = vec![
            (1000, 6, 1, string(name)),
            (1001, 6, 1, string("8.2.2637")),
            (1002, 6, 1, string("20.el9_1")),
        ];
        if let Some(e) = epoch {
            entries.push((1003, 4, 1, int32s(&[e])));
        }
        entries.extend([
            (1022, 6, 1, string("x86_64")),
            (1116, 4, 3, int32s(dirindexes)),
            (1117, 8, 3, strings(&["vi", "view", "vi"])),
            (1118, 8, 2, strings(&["/usr/bin/", "/usr/libexec/"])),
        ]);
        blob(&entries)
    }

    #[test]
    fn an_rpm_header_names_its_package_and_paths() {
        let p = ingest::rpm::parse_installed(&package_blob("vim-minimal", Some(2), &[0, 0, 1]))
            .unwrap();
        assert_eq!(
            (p.name.as_str(), p.epoch, p.arch.as_str()),
            ("vim-minimal", Some(2), "x86_64")
        );
        assert_eq!(
            rpm_evr(p.epoch, &p.version, &p.release),
            "2:8.2.2637-20.el9_1"
        );
        assert_eq!(p.paths, ["/usr/bin/vi", "/usr/bin/view", "/usr/libexec/vi"]);
    }

    #[test]
    fn a_corrupt_rpm_header_is_an_error_not_a_panic() {
        let good = package_blob("vim-minimal", None, &[0, 0, 1]);
        // Cut anywhere.
        for len in 0..good.len() {
            assert!(
                ingest::rpm::parse_installed(&good[..len]).is_err(),
                "cut at {len}"
            );
        }
        // Any byte of the counts or the index replaced: an error or a header, never a panic.
        let index_end = 8 + 7 * 16;
        for at in 0..index_end {
            for byte in [0x00, 0x7f, 0xff] {
                let mut bad = good.clone();
                bad[at] = byte;
                let _ = ingest::rpm::parse_installed(&bad);
            }
        }
        let set = |entry: usize, field: usize, value: u32| {
            let mut bad = good.clone();
            let at = 8 + entry * 16 + field * 4;
            bad[at..at + 4].copy_from_slice(&value.to_be_bytes());
            ingest::rpm::parse_installed(&bad).unwrap_err().to_string()
        };
        // Huge index and data counts.
        let mut huge = good.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(ingest::rpm::parse_installed(&huge).is_err());
        let mut huge = good.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(ingest::rpm::parse_installed(&huge).is_err());
        // NAME's offset past the data; DIRINDEXES, BASENAMES and DIRNAMES counting far more
        // values than the data holds.
        assert!(set(0, 2, u32::MAX).contains("tag 1000"));
        assert!(set(4, 3, 1 << 30).contains("tag 1116"));
        assert!(set(5, 3, u32::MAX).contains("tag 1117"));
        assert!(set(6, 3, u32::MAX).contains("tag 1118"));
        // A file in a directory the header does not list.
        let far = package_blob("vim-minimal", None, &[0, 0, 9]);
        let e = ingest::rpm::parse_installed(&far).unwrap_err().to_string();
        assert!(e.contains("directory index out of range"), "{e}");
        // No NAME.
        let nameless = blob(&[(1001, 6, 1, string("1"))]);
        assert!(ingest::rpm::parse_installed(&nameless).is_err());
    }

    /// An `rpmdb.sqlite` with rpm's `Packages` table holding these blobs.
    fn rpmdb(blobs: &[rusqlite::types::Value]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let conn = rusqlite::Connection::open(dir.path().join("rpmdb.sqlite")).unwrap();
        conn.execute_batch(
            "CREATE TABLE 'Packages' (hnum INTEGER PRIMARY KEY AUTOINCREMENT,blob BLOB NOT NULL)",
        )
        .unwrap();
        for b in blobs {
            conn.execute("INSERT INTO Packages (blob) VALUES (?1)", [b])
                .unwrap();
        }
        dir
    }

    #[test]
    fn the_rpm_database_is_read_and_bounded() {
        use rusqlite::types::Value;
        let dir = rpmdb(&[
            Value::Blob(package_blob("vim-minimal", Some(2), &[0, 0, 1])),
            Value::Blob(blob(&[
                (1000, 6, 1, string("gpg-pubkey")),
                (1001, 6, 1, string("5a6340b3")),
                (1002, 6, 1, string("6229229e")),
            ])),
        ]);
        let read = read_rpmdb(&dir.path().join("rpmdb.sqlite")).unwrap();
        let names: Vec<_> = read
            .iter()
            .map(|(p, paths)| (p.name.as_str(), p.version.as_str(), paths.len()))
            .collect();
        assert_eq!(names, [("vim-minimal", "2:8.2.2637-20.el9_1", 3)]);

        let corrupt = rpmdb(&[Value::Blob(package_blob("x", None, &[0, 0, 7]))]);
        let e = format!(
            "{:#}",
            read_rpmdb(&corrupt.path().join("rpmdb.sqlite")).unwrap_err()
        );
        assert!(e.contains("package 1") && e.contains("out of range"), "{e}");
        let text = rpmdb(&[Value::Text("not a header".into())]);
        let e = read_rpmdb(&text.path().join("rpmdb.sqlite")).unwrap_err();
        assert!(e.to_string().contains("not a blob"), "{e}");
        // A blob larger than any header is refused by its length, never loaded.
        let big = rpmdb(&[]);
        let conn = rusqlite::Connection::open(big.path().join("rpmdb.sqlite")).unwrap();
        conn.execute(
            "INSERT INTO Packages (blob) VALUES (zeroblob(?1))",
            [i64::try_from(ingest::rpm::MAX_HEADER_BYTES).unwrap() + 1],
        )
        .unwrap();
        drop(conn);
        let e = read_rpmdb(&big.path().join("rpmdb.sqlite")).unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");
        // Not rpm's schema.
        let empty = tempfile::tempdir().unwrap();
        rusqlite::Connection::open(empty.path().join("rpmdb.sqlite"))
            .unwrap()
            .execute_batch("CREATE TABLE t (x)")
            .unwrap();
        assert!(read_rpmdb(&empty.path().join("rpmdb.sqlite")).is_err());
    }

    #[test]
    fn status_keeps_packages_on_disk() {
        let status = "Package: a\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.0-1\nDescription: x\n continued: line\n\n\
                      Package: b\nStatus: deinstall ok config-files\nVersion: 2\n\n\
                      Package: c\nStatus: install ok unpacked\nArchitecture: all\nVersion: 3\n";
        let p = parse_status(status);
        let names: Vec<_> = p
            .iter()
            .map(|p| (p.name.as_str(), p.version.as_str()))
            .collect();
        assert_eq!(names, [("a", "1.0-1"), ("c", "3")]);
    }
}
