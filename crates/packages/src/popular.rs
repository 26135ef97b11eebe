//! Popular package names: the dated lists shipped in `data/` (or a refreshed copy), and the
//! known-name set the analysis compares against.
//!
//! A list file is UTF-8 text: `#` comment lines (source and date), a `name<TAB>rank` header,
//! then one `name<TAB>rank` line per package, rank 1 the most used. [`PopularList::parse`]
//! also reads the registries' own listings the lists are built from: a PyPI table with a
//! `rank_among_…` column, an npm table with a `downloads_a_month` column (rows with
//! fewer than [`MIN_MONTHLY_DOWNLOADS`] downloads, and the registry's security holding
//! packages that replace removed malware, are left out), or a Go table with a `dependents`
//! column (how many modules require each one, most first).
//!
//! Every listed name is *known*: people install it. The first [`TARGET_NAMES`] of a list
//! are also the *targets* look-alikes are compared with, and the names up to
//! [`WIDE_TARGET_NAMES`] targets of the strongest checks only; the rest are known through
//! their own standing (an established package is no squat of its neighbour) without being
//! compared with.

use std::collections::HashMap;

use crate::names::Ecosystem;

/// The lists shipped with the service.
pub const SHIPPED_PYPI: &str = include_str!("../data/pypi-popular.tsv");
pub const SHIPPED_NPM: &str = include_str!("../data/npm-popular.tsv");
pub const SHIPPED_GO: &str = include_str!("../data/go-popular.tsv");
/// The owners of the most-starred Go repositories: established publishers, whether or not
/// their modules are dependencies anyone ranks (most are applications).
pub const SHIPPED_GO_OWNERS: &str = include_str!("../data/go-established-owners.tsv");
/// The packages of the npm scopes of large organisations that publish under their scope only,
/// down to a few hundred downloads a month: an unscoped copy of one is dependency confusion.
pub const SHIPPED_NPM_ORG_SCOPES: &str = include_str!("../data/npm-org-scopes.tsv");

/// The most names a list keeps (the most popular ones).
pub const MAX_NAMES: usize = 150_000;
/// The most popular names of each list, the ones look-alikes are compared with.
pub const TARGET_NAMES: usize = 15_000;
/// The names after the first [`TARGET_NAMES`], up to this rank, are targets of the
/// look-alike checks that long-tail names rarely match by chance (separators, affixes,
/// look-alike characters, swapped neighbours), not of the other edits.
pub const WIDE_TARGET_NAMES: usize = 25_000;
/// The fewest monthly downloads that make a package of a downloads listing established.
pub const MIN_MONTHLY_DOWNLOADS: u64 = 10_000;

/// One ecosystem's popular names, in rank order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PopularList {
    pub ecosystem: Ecosystem,
    /// Comment lines (without `# `): where the list comes from and when.
    pub header: Vec<String>,
    /// Normalised names, most popular first; ranks are 1-based positions.
    pub names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("popular-name list, line {line}: {why}")]
pub struct ListError {
    pub line: usize,
    pub why: String,
}

impl PopularList {
    pub fn shipped(ecosystem: Ecosystem) -> Self {
        let text = match ecosystem {
            Ecosystem::Pypi => SHIPPED_PYPI,
            Ecosystem::Npm => SHIPPED_NPM,
            Ecosystem::Go => SHIPPED_GO,
        };
        // The shipped files are checked by a test; a damaged one yields an empty list
        // rather than a panic.
        Self::parse(ecosystem, text).unwrap_or(Self {
            ecosystem,
            header: Vec::new(),
            names: Vec::new(),
        })
    }

    /// Reads a list in its own format or a registry listing (see the module documentation).
    /// Names that are not valid for the ecosystem are skipped (registries keep a few legacy
    /// names); a line without the expected columns is an error.
    pub fn parse(ecosystem: Ecosystem, text: &str) -> Result<Self, ListError> {
        let mut header = Vec::new();
        // name, score, higher is better, fewest downloads a month
        let mut columns: Option<(usize, usize, bool, u64)> = None;
        // Version and summary columns of a registry listing, if any.
        let mut described: (Option<usize>, Option<usize>) = (None, None);
        let mut scored: Vec<(String, u64)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            if let Some(comment) = line.strip_prefix('#') {
                header.push(comment.trim().to_string());
                continue;
            }
            if line.trim().is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split('\t').collect();
            let Some((name_col, score_col, higher_better, floor)) = columns else {
                let find = |pred: &dyn Fn(&str) -> bool| fields.iter().position(|f| pred(f));
                let name = find(&|f| f == "name" || f == "module").ok_or_else(|| ListError {
                    line: line_no,
                    why: "the header names no `name` column".into(),
                })?;
                let (score, higher, floor) =
                    if let Some(c) = find(&|f| f == "rank" || f.starts_with("rank_")) {
                        (c, false, 0)
                    } else if let Some(c) = find(&|f| f.starts_with("downloads")) {
                        (c, true, MIN_MONTHLY_DOWNLOADS)
                    } else if let Some(c) = find(&|f| f.starts_with("dependents")) {
                        // Go has no download counts: modules requiring it, from the module index.
                        (c, true, 0)
                    } else {
                        return Err(ListError {
                            line: line_no,
                            why: "the header names no `rank`, `downloads…` or `dependents…` column"
                                .into(),
                        });
                    };
                columns = Some((name, score, higher, floor));
                described = (
                    find(&|f| f == "version"),
                    find(&|f| f.starts_with("summary")),
                );
                continue;
            };
            let (Some(name), Some(score)) = (fields.get(name_col), fields.get(score_col)) else {
                return Err(ListError {
                    line: line_no,
                    why: format!(
                        "expected at least {} tab-separated fields",
                        name_col.max(score_col) + 1
                    ),
                });
            };
            // Registry listings leave the score empty for packages outside the ranking.
            if score.trim().is_empty() {
                continue;
            }
            let score: u64 = score.trim().parse().map_err(|_| ListError {
                line: line_no,
                why: format!("{score:?} is not a whole number"),
            })?;
            if score < floor {
                continue;
            }
            // npm replaces removed malware with a security holding package, which keeps
            // being downloaded by whatever still depends on the malware.
            let field = |c: Option<usize>| c.and_then(|c| fields.get(c)).copied().unwrap_or("");
            if field(described.0).contains("-security")
                || field(described.1)
                    .to_ascii_lowercase()
                    .contains("security holding")
            {
                continue;
            }
            let Ok(name) = ecosystem.normalize(name) else {
                continue;
            };
            scored.push((
                name,
                if higher_better {
                    u64::MAX - score
                } else {
                    score
                },
            ));
        }
        if columns.is_none() {
            return Err(ListError {
                line: 0,
                why: "no header line (`name<TAB>rank`)".into(),
            });
        }
        scored.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        let mut seen = std::collections::HashSet::new();
        let names: Vec<String> = scored
            .into_iter()
            .filter_map(|(n, _)| seen.insert(n.clone()).then_some(n))
            .take(MAX_NAMES)
            .collect();
        Ok(Self {
            ecosystem,
            header,
            names,
        })
    }

    /// The list in its own format, with `header` lines as comments.
    pub fn to_tsv(&self) -> String {
        let mut out = String::new();
        for h in &self.header {
            out.push_str("# ");
            out.push_str(h);
            out.push('\n');
        }
        out.push_str("name\trank\n");
        for (i, n) in self.names.iter().enumerate() {
            out.push_str(n);
            out.push('\t');
            out.push_str(&(i + 1).to_string());
            out.push('\n');
        }
        out
    }
}

/// `github.com/<owner>` (lower case) of every shipped established Go publisher.
pub fn established_go_owners() -> impl Iterator<Item = String> {
    SHIPPED_GO_OWNERS
        .lines()
        .filter(|line| !line.starts_with('#'))
        .skip(1) // the column header
        .filter_map(|line| line.split('\t').next())
        .filter(|owner| !owner.is_empty())
        .map(|owner| format!("github.com/{}", owner.to_ascii_lowercase()))
}

/// The scoped names of the shipped npm organisation scopes, most downloaded first. Shipped
/// only: `refresh-popular` replaces the popular lists, which these complement.
pub fn npm_organisation_packages() -> impl Iterator<Item = &'static str> {
    SHIPPED_NPM_ORG_SCOPES
        .lines()
        .filter(|line| !line.starts_with('#'))
        .skip(1) // the column header
        .filter_map(|line| line.split('\t').next())
        .filter(|name| name.starts_with('@'))
}

/// Every known name of the ecosystems: popular names with their rank, and names tracked by
/// the service (known, without a rank).
#[derive(Debug, Clone, Default)]
pub struct KnownNames {
    ranks: HashMap<Ecosystem, HashMap<Box<str>, u32>>,
    /// The targets: the first [`WIDE_TARGET_NAMES`] of each list.
    lists: HashMap<Ecosystem, Vec<String>>,
    /// npm scopes holding at least one listed package.
    scopes: HashMap<Box<str>, u32>,
}

impl KnownNames {
    /// The shipped lists of every ecosystem.
    pub fn shipped() -> Self {
        Self::from_lists(Ecosystem::ALL.iter().map(|e| PopularList::shipped(*e)))
    }

    pub fn from_lists(lists: impl IntoIterator<Item = PopularList>) -> Self {
        let mut known = Self::default();
        for list in lists {
            let ranks = known.ranks.entry(list.ecosystem).or_default();
            ranks.reserve(list.names.len());
            for (i, name) in list.names.iter().enumerate() {
                let rank = u32::try_from(i + 1).unwrap_or(u32::MAX);
                ranks.entry(name.as_str().into()).or_insert(rank);
                if list.ecosystem == Ecosystem::Npm
                    && let Some(scope) = name
                        .strip_prefix('@')
                        .and_then(|n| n.split_once('/'))
                        .map(|(scope, _)| scope)
                {
                    known.scopes.entry(scope.into()).or_insert(rank);
                }
            }
            let mut targets = list.names;
            targets.truncate(WIDE_TARGET_NAMES);
            targets.shrink_to_fit();
            known.lists.insert(list.ecosystem, targets);
        }
        known
    }

    /// The rank of a popular name (1 = most popular); None for names outside the list.
    pub fn rank(&self, ecosystem: Ecosystem, name: &str) -> Option<u32> {
        self.ranks.get(&ecosystem)?.get(name).copied()
    }

    /// The most popular names of the ecosystem (at most [`WIDE_TARGET_NAMES`]), most popular
    /// first: the names look-alikes are compared with.
    pub fn popular(&self, ecosystem: Ecosystem) -> &[String] {
        self.lists.get(&ecosystem).map_or(&[], Vec::as_slice)
    }

    /// Every listed name of the ecosystem (targets and established packages), in no order.
    pub fn names(&self, ecosystem: Ecosystem) -> impl Iterator<Item = &str> {
        self.ranks
            .get(&ecosystem)
            .into_iter()
            .flatten()
            .map(|(n, _)| &**n)
    }

    /// How many names of the ecosystem are listed (targets and established packages).
    pub fn len(&self, ecosystem: Ecosystem) -> usize {
        self.ranks.get(&ecosystem).map_or(0, HashMap::len)
    }

    /// The rank of the most popular listed npm package under `@scope` (None when the
    /// scope holds no listed package). npm scopes belong to one user or organisation, so
    /// a scope holding established packages is that organisation's own.
    pub fn npm_scope_rank(&self, scope: &str) -> Option<u32> {
        self.scopes.get(scope).copied()
    }

    /// The npm scopes holding at least one listed package.
    pub fn npm_scopes(&self) -> impl Iterator<Item = &str> {
        self.scopes.keys().map(|s| &**s)
    }

    pub fn is_empty(&self) -> bool {
        self.lists.values().all(Vec::is_empty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_go_owners_are_read_with_their_source() {
        assert!(SHIPPED_GO_OWNERS.starts_with("# "), "a source header");
        let owners: Vec<String> = established_go_owners().collect();
        assert!(owners.len() >= 90, "{}", owners.len());
        assert!(owners.contains(&"github.com/gohugoio".to_string()));
        assert!(
            !owners.iter().any(|o| o == "github.com/owner"),
            "the header is no owner"
        );
    }

    #[test]
    fn shipped_organisation_scopes_are_read_with_their_source() {
        assert!(
            SHIPPED_NPM_ORG_SCOPES
                .lines()
                .any(|l| l.starts_with("# Source: npm registry")),
            "a source header"
        );
        let names: Vec<&str> = npm_organisation_packages().collect();
        assert!(names.len() > 1_000, "{}", names.len());
        assert!(names.contains(&"@azure/core-auth"));
        // Every name is scoped, valid, and no copy of an unscoped name (`@types`).
        for n in &names {
            assert_eq!(Ecosystem::Npm.normalize(n).as_deref(), Ok(*n));
            assert!(!n.starts_with("@types/"), "{n}");
        }
    }

    #[test]
    fn shipped_lists_parse_with_their_source() {
        for e in Ecosystem::ALL {
            let list = PopularList::parse(
                e,
                match e {
                    Ecosystem::Pypi => SHIPPED_PYPI,
                    Ecosystem::Npm => SHIPPED_NPM,
                    Ecosystem::Go => SHIPPED_GO,
                },
            )
            .unwrap();
            assert!(list.names.len() > 100, "{e}");
            assert!(list.header.iter().any(|h| h.starts_with("Source:")), "{e}");
        }
        // The Go list ranks by its `rank` column: rows without a dependents count (the
        // second ranking's, which publishes none) keep their place.
        let go = PopularList::parse(Ecosystem::Go, SHIPPED_GO).unwrap();
        let rows: Vec<&str> = SHIPPED_GO
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .skip(1)
            .map(|l| l.split('\t').next().unwrap_or_default())
            .collect();
        assert_eq!(go.names, rows);
        let known = KnownNames::shipped();
        assert_eq!(known.rank(Ecosystem::Pypi, "boto3"), Some(1));
        assert!(known.rank(Ecosystem::Npm, "lodash").is_some());
        assert!(
            known
                .rank(Ecosystem::Go, "github.com/stretchr/testify")
                .is_some()
        );
    }

    #[test]
    fn registry_listings_are_ranked() {
        let pypi = "name\tversion\tmonth\trank_among_15000_most_downloaded\tsummary\n\
                    Requests\t2\t2026-01\t2\tx\nboto3\t1\t2026-01\t1\ty\nobscure\t1\t2020-01\t\tz\n";
        let list = PopularList::parse(Ecosystem::Pypi, pypi).unwrap();
        assert_eq!(list.names, ["boto3", "requests"]);
        let npm = "name\tversion\tdownloads_a_month\tsummary\nlodash\t4\t50000\t\n\
                   semver\t7\t90000\t\nobscure\t1\t9999\t\n\
                   crossenv\t0.0.2-security\t10533\tsecurity holding package\n";
        let list = PopularList::parse(Ecosystem::Npm, npm).unwrap();
        // Below the download threshold, or malware npm replaced: not established.
        assert_eq!(list.names, ["semver", "lodash"]);
        let again = PopularList::parse(Ecosystem::Npm, &list.to_tsv()).unwrap();
        assert_eq!(again.names, list.names);
        // A Go table of direct dependents: most required first, no download floor.
        let go = "module\tdependents\ngithub.com/pkg/errors\t92491\n\
                  github.com/stretchr/testify\t259237\ngithub.com/tiny/one\t12\n";
        let list = PopularList::parse(Ecosystem::Go, go).unwrap();
        assert_eq!(
            list.names,
            [
                "github.com/stretchr/testify",
                "github.com/pkg/errors",
                "github.com/tiny/one"
            ]
        );
        assert!(PopularList::parse(Ecosystem::Npm, "just text\n").is_err());
        assert!(PopularList::parse(Ecosystem::Npm, "name\trank\nx\tnot-a-number\n").is_err());
    }
}
