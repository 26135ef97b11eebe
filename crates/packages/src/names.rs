//! Package names per ecosystem: which strings are names, and the one form two spellings of
//! the same package share.
//!
//! - PyPI: PEP 508 names (ASCII letters, digits, `-`, `_`, `.`, starting and ending with a
//!   letter or digit), normalised per PEP 503 (lowercase, every run of `-`, `_`, `.` one `-`).
//! - npm: the registry's rules for new packages (at most 214 characters, URL-safe
//!   characters, not starting with `.` or `_`, optionally `@scope/name`), compared in lower
//!   case as the registry refuses names differing only in case.
//! - Go: module paths as `golang.org/x/mod/module.CheckPath` accepts them (a host element with
//!   a dot, then `/`-separated elements of letters, digits and `-._~`). They are case
//!   sensitive; the module proxy's escaped form (`!` before a lower-cased capital) is accepted
//!   and unescaped.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ecosystem {
    Npm,
    Pypi,
    Go,
}

impl Ecosystem {
    pub const ALL: [Ecosystem; 3] = [Ecosystem::Npm, Ecosystem::Pypi, Ecosystem::Go];

    pub fn as_str(self) -> &'static str {
        match self {
            Ecosystem::Npm => "npm",
            Ecosystem::Pypi => "pypi",
            Ecosystem::Go => "go",
        }
    }

    /// The ecosystem of a package URL type (`pkg:pypi/…`, `pkg:npm/…`, `pkg:golang/…`).
    pub fn from_purl_type(ty: &str) -> Option<Self> {
        match ty.to_ascii_lowercase().as_str() {
            "npm" => Some(Ecosystem::Npm),
            "pypi" => Some(Ecosystem::Pypi),
            "golang" | "go" => Some(Ecosystem::Go),
            _ => None,
        }
    }

    /// The ecosystem of an OSV `affected.package.ecosystem` value.
    pub fn from_osv(name: &str) -> Option<Self> {
        match name {
            "npm" => Some(Ecosystem::Npm),
            "PyPI" => Some(Ecosystem::Pypi),
            "Go" => Some(Ecosystem::Go),
            _ => None,
        }
    }

    /// The one form of a package name (see the module documentation), or why it is no name
    /// of this ecosystem.
    pub fn normalize(self, name: &str) -> Result<String, NameError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(NameError::new(self, name, "is empty"));
        }
        match self {
            Ecosystem::Pypi => pypi(name),
            Ecosystem::Npm => npm(name),
            Ecosystem::Go => go(name),
        }
    }
}

impl fmt::Display for Ecosystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Ecosystem {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "npm" => Ok(Ecosystem::Npm),
            "pypi" => Ok(Ecosystem::Pypi),
            "go" => Ok(Ecosystem::Go),
            other => Err(format!(
                "unknown ecosystem {other:?}; expected npm, pypi or go"
            )),
        }
    }
}

/// A string that is not a package name of the ecosystem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} is not a valid {ecosystem} package name: {why}")]
pub struct NameError {
    pub ecosystem: Ecosystem,
    pub name: String,
    pub why: String,
}

impl NameError {
    fn new(ecosystem: Ecosystem, name: &str, why: impl Into<String>) -> Self {
        let mut shown: String = name.chars().take(100).collect();
        if shown.len() < name.len() {
            shown.push('…');
        }
        Self {
            ecosystem,
            name: shown,
            why: why.into(),
        }
    }
}

const MAX_PYPI: usize = 200;
const MAX_NPM: usize = 214;
const MAX_GO: usize = 500;

fn pypi(name: &str) -> Result<String, NameError> {
    let e = |why: &str| NameError::new(Ecosystem::Pypi, name, why);
    if name.len() > MAX_PYPI {
        return Err(e("is longer than 200 characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(e(
            "may hold only ASCII letters, digits, '-', '_' and '.' (PEP 508)",
        ));
    }
    let (first, last) = (name.as_bytes()[0], name.as_bytes()[name.len() - 1]);
    if !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
        return Err(e("must start and end with a letter or digit (PEP 508)"));
    }
    Ok(pep503(name))
}

/// PEP 503 normalisation: lowercase, runs of `-`, `_`, `.` become one `-`.
pub fn pep503(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.extend(c.to_lowercase());
            in_run = false;
        }
    }
    out
}

fn npm_part_ok(part: &str) -> bool {
    !part.is_empty()
        && !part.starts_with('.')
        && !part.starts_with('_')
        && part.bytes().all(|b| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || matches!(
                    b,
                    b'-' | b'.' | b'_' | b'~' | b'!' | b'*' | b'\'' | b'(' | b')'
                )
        })
}

fn npm(name: &str) -> Result<String, NameError> {
    let e = |why: &str| NameError::new(Ecosystem::Npm, name, why);
    if name.len() > MAX_NPM {
        return Err(e("is longer than 214 characters"));
    }
    let lower = name.to_ascii_lowercase();
    let ok = match lower.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('/') {
            Some((scope, rest)) => npm_part_ok(scope) && npm_part_ok(rest),
            None => return Err(e("a scoped name is @scope/name")),
        },
        None => npm_part_ok(&lower),
    };
    if !ok {
        return Err(e(
            "may hold only lowercase letters, digits and - . _ ~ ! * ' ( ), not start with . or _ (npm rules)",
        ));
    }
    if matches!(lower.as_str(), "node_modules" | "favicon.ico") {
        return Err(e("is reserved"));
    }
    Ok(lower)
}

fn go(name: &str) -> Result<String, NameError> {
    let e = |why: &str| NameError::new(Ecosystem::Go, name, why);
    if name.len() > MAX_GO {
        return Err(e("is longer than 500 characters"));
    }
    let path = if name.contains('!') {
        go_unescape(name)
            .ok_or_else(|| e("'!' must precede a lowercase letter (module proxy escaping)"))?
    } else {
        name.to_string()
    };
    let mut elements = path.split('/');
    let host = elements.next().unwrap_or_default();
    if !host.contains('.')
        || !host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.'))
        || host.starts_with('-')
    {
        return Err(e(
            "the first element must be a lowercase host name with a dot (e.g. github.com)",
        ));
    }
    for element in path.split('/') {
        if element.is_empty() {
            return Err(e("has an empty path element"));
        }
        if element.starts_with('.') || element.ends_with('.') {
            return Err(e("a path element may not start or end with '.'"));
        }
        if !element
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
        {
            return Err(e(
                "path elements may hold only ASCII letters, digits and - . _ ~",
            ));
        }
    }
    Ok(path)
}

/// The module proxy's escaped form of a path: each capital letter becomes `!` and its lower
/// case, so paths differing only in case stay distinct on case-insensitive file systems.
pub fn go_escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 4);
    for c in path.chars() {
        if c.is_ascii_uppercase() {
            out.push('!');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The inverse of [`go_escape`]; None for a `!` not followed by a lowercase letter, or a
/// capital letter (never in an escaped path).
pub fn go_unescape(escaped: &str) -> Option<String> {
    let mut out = String::with_capacity(escaped.len());
    let mut chars = escaped.chars();
    while let Some(c) = chars.next() {
        match c {
            '!' => match chars.next() {
                Some(l) if l.is_ascii_lowercase() => out.push(l.to_ascii_uppercase()),
                _ => return None,
            },
            c if c.is_ascii_uppercase() => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pypi_names_normalise_per_pep_503() {
        let n = |s: &str| Ecosystem::Pypi.normalize(s).unwrap();
        assert_eq!(n("Django"), "django");
        assert_eq!(n("python_dateutil"), "python-dateutil");
        assert_eq!(n("zope.interface"), "zope-interface");
        assert_eq!(n("Foo__-.Bar"), "foo-bar");
        assert!(Ecosystem::Pypi.normalize("-leading").is_err());
        assert!(Ecosystem::Pypi.normalize("has space").is_err());
        assert!(Ecosystem::Pypi.normalize("ünicode").is_err());
    }

    #[test]
    fn npm_names_follow_registry_rules() {
        let n = |s: &str| Ecosystem::Npm.normalize(s);
        assert_eq!(n("@Types/Node").unwrap(), "@types/node");
        assert_eq!(n("lodash.merge").unwrap(), "lodash.merge");
        assert!(n("@scope").is_err());
        assert!(n(".hidden").is_err());
        assert!(n("_private").is_err());
        assert!(n("with space").is_err());
        assert!(n("node_modules").is_err());
        assert!(n(&"a".repeat(215)).is_err());
    }

    #[test]
    fn go_paths_keep_case_and_unescape() {
        let n = |s: &str| Ecosystem::Go.normalize(s);
        assert_eq!(
            n("github.com/Sirupsen/logrus").unwrap(),
            "github.com/Sirupsen/logrus"
        );
        assert_eq!(
            n("github.com/!burnt!sushi/toml").unwrap(),
            "github.com/BurntSushi/toml"
        );
        assert_eq!(
            go_escape("github.com/BurntSushi/toml"),
            "github.com/!burnt!sushi/toml"
        );
        assert!(n("nodot/module").is_err());
        assert!(n("github.com//x").is_err());
        assert!(n("github.com/a!1").is_err());
        assert!(n("GitHub.com/x").is_err());
    }
}
