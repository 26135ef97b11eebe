//! The local package database, read for `knowngood scan --packages`: which installed
//! package (and version) owns each scanned file.
//!
//! dpkg (Debian, Ubuntu): `<root>/var/lib/dpkg/status` lists the packages with their
//! state, architecture and version; `<root>/var/lib/dpkg/info/<package>[:<arch>].list`
//! the paths each one installed. Only packages whose files are on disk are read
//! (`config-files` and `not-installed` own nothing). The RPM database is not read yet.
//!
//! Paths are compared after resolving the symlinks of their directory on both sides, so
//! a file dpkg lists as `/bin/ls` is found when scanned as `/usr/bin/ls` on a merged-`/usr`
//! system. A scanned symlink that no package owns is looked up as the file it points to
//! (`/usr/bin/awk` through `/etc/alternatives` is `mawk`'s). Diversions are not read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

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
    /// Reads dpkg's database of the system at `root` (`/` for this host).
    pub(crate) fn open(root: &Path) -> Result<Self> {
        let admin = root.join("var/lib/dpkg");
        let status_path = admin.join("status");
        let status = match std::fs::read(&status_path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
                "--packages: no dpkg database at {} (only dpkg's database is read; \
                 the RPM database is not read yet)",
                status_path.display()
            ),
            Err(e) => {
                return Err(e).with_context(|| format!("reading {}", status_path.display()));
            }
        };
        let mut db = PackagesDb {
            packages: parse_status(&status),
            owners: HashMap::new(),
            dirs: Default::default(),
        };
        for (i, package) in db.packages.iter().enumerate() {
            let qualified = admin
                .join("info")
                .join(format!("{}:{}.list", package.name, package.arch));
            let plain = admin.join("info").join(format!("{}.list", package.name));
            let list = match std::fs::read(&qualified).or_else(|_| std::fs::read(&plain)) {
                Ok(bytes) => bytes,
                // A package with no list (a metapackage's may be absent) owns nothing.
                Err(_) => continue,
            };
            for line in String::from_utf8_lossy(&list).lines() {
                let Some(relative) = line.strip_prefix('/') else {
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
        Ok(db)
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

/// Whether a record's version is the installed package version.
///
/// The rule: the installed version appears in the record's version as a whole token,
/// delimited by the string's ends or by characters a Debian version cannot contain
/// (anything but letters, digits and `.+~:-`). So `2.36-9+deb12u4` matches the records
/// `2.36-9+deb12u4`, `2.36-9+deb12u4 (bookworm)` and `bookworm/2.36-9+deb12u4`, but never
/// `2.36-9+deb12u40` or `12.36-9+deb12u4`. An epoch (`1:`) missing on one side only is
/// ignored, as file names in the archive drop it.
pub(crate) fn version_matches(record: &str, installed: &str) -> bool {
    let installed = installed.trim();
    if installed.is_empty() {
        return false;
    }
    record_tokens(record).any(|token| {
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

fn version_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '~' | ':' | '-')
}

fn record_tokens(record: &str) -> impl Iterator<Item = &str> {
    record
        .split(|c: char| !version_char(c))
        .filter(|t| !t.is_empty())
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
            assert!(version_matches(record, "2.36-9+deb12u4"), "{record}");
        }
        for record in ["2.36-9+deb12u40", "12.36-9+deb12u4", "2.36-9", "", "2.36"] {
            assert!(!version_matches(record, "2.36-9+deb12u4"), "{record}");
        }
        assert!(version_matches("1:9.1-1", "1:9.1-1"));
        assert!(version_matches("9.1-1", "1:9.1-1"));
        assert!(version_matches("1:9.1-1", "9.1-1"));
        assert!(!version_matches("2:9.1-1x", "1:9.1-1"));
        assert!(!version_matches("anything", ""));
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
