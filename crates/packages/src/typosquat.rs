//! How a package name relates to the names people mean to install.
//!
//! A name is `known` when it is a popular name (shipped lists) or one the service tracks:
//! a popular name stays `known` even when it is close to another popular name (`attrs` and
//! `cattrs`), since both are what people install. Any other name is compared with the
//! *targets*, the most popular names of its ecosystem, through the transformations real
//! attacks use: separator changes, visually similar characters (`rn`/`m`, `l`/`1`/`I`,
//! `0`/`o`, Unicode confusables), word reordering, npm scope confusion, added or removed
//! affixes, on npm a name of a large organisation's scope published without it, Go module
//! owner and host look-alikes, and single edits (omission, repetition,
//! insertion, transposition, keyboard-adjacent or other substitution), plus two edits for
//! long names of very popular packages, separators changed together with one edit, words
//! made plural or singular, two vowels changed, on npm a name spelt as it sounds, and on
//! PyPI a long name with a letter appended or dropped at its end or one of the first 3,000
//! with a letter inserted inside, a letter moved two places, two of the most popular
//! names run together, a glued abbreviation spelt out (`fairsequence`), a word put in
//! front of a long name ending in a language word (`plain-crypto-js`), and a versioned
//! popular name written without its number beside one of the most popular
//! (`beautifulsoup-requests`). The rank decides how
//! close is too close: short names and less popular targets need a closer match, which
//! keeps legitimate neighbours of popular names from being flagged. On npm, whose
//! 88,000 listed names share their words, a weaker match also counts when it coins a
//! spelling no listed name uses (`js-sha7`), and not when it lands on a word other packages
//! use (`test-each`). Nothing here knows any malicious name.

use std::collections::{HashMap, HashSet};

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use crate::names::{Ecosystem, NameError};
use crate::popular::{KnownNames, TARGET_NAMES, established_go_owners, npm_organisation_packages};

/// Targets of single edits to short names (fewer than [`SHORT_NAME`] characters): names up
/// to this rank. Longer names and the look-alike checks compare with every listed name.
pub const SHORT_EDIT_RANK: u32 = 500;
const SHORT_NAME: usize = 6;
/// Targets of the weak single edits (see [`WEAK_EDIT_RANK`]) to short names: names up to
/// this rank.
const SHORT_WEAK_EDIT_RANK: u32 = 100;
/// Targets of two-edit checks: names up to this rank.
pub const TWO_EDIT_RANK: u32 = 100;
/// Targets of the weak single edits (a character substituted by one neither next to it on
/// the keyboard nor alike, or inserted without repeating a neighbour; an affix around a
/// misspelling): names up to this rank. Long-tail names are one such edit from some listed
/// name far more often than a squatter picks a less popular target.
pub const WEAK_EDIT_RANK: u32 = 500;
/// An affix alone (`mysqljs`) imitates short names (under 4 characters) only up to this rank.
const SHORT_CORE_RANK: u32 = 3_000;
/// A popular name with a word added (see `word_added`): names up to this rank, at least
/// this long without separators.
const WORD_ADDED_RANK: u32 = 3_000;
const MIN_WORD_RUN_LEN: usize = 5;
/// A word in front of a popular name as it is written (see `word_in_front`): names at least
/// this long without separators.
const MIN_WORD_IN_FRONT_LEN: usize = 7;
/// A name of at least this many words is distinctive: platform or release words after it
/// imitate it at any target rank (see `generic_words_added`).
const DISTINCTIVE_WORDS: usize = 3;
/// The very most popular names: added after an unversioned popular name (see
/// `unversioned_with_popular`).
const MOST_POPULAR_RANK: u32 = 50;
/// An abbreviation spelt out (see `abbreviation_spelt_out`) only after at least this much
/// of the name.
const MIN_ABBREVIATED_HEAD_LEN: usize = 3;
/// Three edits (see `garbled`): names up to this rank, at least this long, and candidates
/// at least this long.
const GARBLED_RANK: u32 = 200;
const MIN_GARBLED_TARGET_LEN: usize = 10;
const MIN_GARBLED_LEN: usize = 7;
/// Four edits (see `rewritten_middle`) only when the target's last four characters end
/// fewer than this many listed names: an ending many names share (`tools`, `core`) says
/// nothing about which one is meant.
const COMMON_ENDING: usize = 20;
/// Plural or singular words (see `number_changed`) only in names of at most this many words.
const MAX_NUMBER_WORDS: usize = 4;
/// Two vowels changed (see `vowels_changed`) only in names at least this long.
const MIN_VOWELS_CHANGED_LEN: usize = 6;
/// Names shorter than this are never compared by edit distance (too many short names are
/// one edit apart).
const MIN_EDIT_LEN: usize = 4;
/// The shortest name part of a scoped npm name whose unscoped copy is a scope-dropping
/// look-alike (it must also have three words): shorter ones, and names of one or two words,
/// are everyday names unrelated packages often took first (`parser`, `preferences`,
/// `zod-validator`, `json-reporter`).
const MIN_SCOPE_DROPPED_LEN: usize = 8;
/// The fewest words of a name part of an organisation scope (see
/// [`crate::popular::npm_organisation_packages`]) whose unscoped copy is a scope-dropping
/// look-alike. Such an organisation publishes under its scope only, and the shipped name
/// parts are those no other scope uses; still, of the one-word ones 7 of 208 are also
/// unscoped packages of the registry's download counts outside the popular list (`secrets`,
/// `inbox`), of the longer ones 21 of 6,725.
const MIN_ORG_SCOPE_DROPPED_WORDS: usize = 2;
/// Two edits only for names at least this long (shorter names are two edits from many:
/// `colormap` and `colorama`, `pandas-f` and `pandas`).
const MIN_TWO_EDIT_LEN: usize = 9;
/// PyPI: a letter appended to or dropped from the end of a listed name (see
/// `letter_appended` and `Detector::edits`) imitates it past the most popular names only
/// when the result is at least this long. PyPI's list has no vocabulary to tell a coined
/// spelling from a word (its names are often one glued word), and shorter names are names
/// of their own that way (`falconz`, `injectq`, `network` beside `networkx`).
const MIN_END_EDIT_LEN: usize = 8;
/// PyPI: a letter inserted inside a name (neither before its first character nor after its
/// last, nor a separator) imitates names past the most popular up to this rank, when the
/// result is at least [`MIN_INSERTED_LEN`] long (`pygacme` for `pygame`). Past it, and at
/// either end, long-tail names are one such letter from a listed one by chance
/// (`pymarkdownlint` beside `pymarkdownlnt`, `pyverbs` beside `pyvers`, `udatetime`).
const INSERTED_INSIDE_RANK: u32 = 3_000;
const MIN_INSERTED_LEN: usize = 7;
/// npm: a leading word at most this long (`js-`, `ng-`, `vue-`) is a namespace the rest of
/// the name follows; its first letter replaced into a word no listed name uses imitates
/// the name at any rank (see `Detector::edits`).
const MAX_LEADING_WORD_LEN: usize = 3;
/// A letter moved two places (see `Detector::letter_moved`): of any target when the name is
/// at least [`MIN_MOVED_LEN`] long, of the first [`WEAK_EDIT_RANK`] names when it is at least
/// [`MIN_SHORT_MOVED_LEN`] long. Shorter ones land on names of their own (`staroid` beside
/// `astroid`, a sampled PyPI name).
const MIN_MOVED_LEN: usize = 8;
const MIN_SHORT_MOVED_LEN: usize = 6;
/// Go repository names shorter than this are generic (see `Targets::go_distinctive`).
const DISTINCTIVE_REPO_LEN: usize = 8;
/// A distinctive Go repository published under another owner imitates modules up to this
/// rank only: past it, a project's own fork or a module moved to a new owner
/// (`gohugoio/httpcache`, `oapi-codegen/oapi-codegen`) is far more common than a squat.
/// A look-alike owner or host counts at any rank.
const OTHER_OWNER_RANK: u32 = 500;
/// Affix removal must leave at least this much of a name.
const MIN_CORE_LEN: usize = 2;
/// An affix plus an edit only for cores at least this long.
const MIN_EDITED_CORE_LEN: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Risk {
    Known,
    Typosquat,
    DependencyConfusion,
    Clear,
}

impl Risk {
    pub const ALL: [Risk; 4] = [
        Risk::Known,
        Risk::Typosquat,
        Risk::DependencyConfusion,
        Risk::Clear,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Known => "known",
            Risk::Typosquat => "typosquat",
            Risk::DependencyConfusion => "dependency_confusion",
            Risk::Clear => "clear",
        }
    }
}

/// The analysis of one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameVerdict {
    /// The name as the ecosystem compares it.
    pub name: String,
    pub risk: Risk,
    /// The known name it is close to (typosquat), or the public name an internal one
    /// collides with (dependency confusion).
    pub nearest_known: Option<String>,
    /// Edit distance to `nearest_known`.
    pub distance: Option<u32>,
    pub reason: String,
}

/// A typosquat verdict: `name` imitates `target`, for `reason`.
fn typosquat_of(name: &str, target: &str, reason: String) -> NameVerdict {
    NameVerdict {
        name: name.to_string(),
        risk: Risk::Typosquat,
        distance: Some(osa(name, target)),
        nearest_known: Some(target.to_string()),
        reason,
    }
}

/// Per-ecosystem lookup tables over the target names.
#[derive(Debug, Default)]
struct Targets {
    /// (name, rank), most popular first.
    names: Vec<(String, u32)>,
    /// Keys of the look-alike transformations -> index into `names` of the most popular
    /// target with that key.
    squashed: HashMap<String, usize>,
    skeleton: HashMap<String, usize>,
    words: HashMap<String, usize>,
    cores: HashMap<String, usize>,
    /// npm: name part of scoped targets -> their indexes; unscoped names -> index.
    scoped_by_name: HashMap<String, Vec<usize>>,
    /// npm: `scope` and `name` of scoped targets run together, separators removed.
    scope_folded: HashMap<String, usize>,
    /// npm: the name part of every scoped name of the first
    /// [`crate::popular::WIDE_TARGET_NAMES`] (not only the targets) outside `@types`, of
    /// three words or more and at least [`MIN_SCOPE_DROPPED_LEN`] long -> index of the most
    /// popular. The listed scoped names past them add no squat of the tuned sets and an
    /// unscoped name of the registry sample (`react-native-link-preview`).
    scope_dropped: HashMap<String, usize>,
    /// npm: the name part of every shipped package of an organisation scope, of at least
    /// [`MIN_ORG_SCOPE_DROPPED_WORDS`] words and [`MIN_SCOPE_DROPPED_LEN`] characters -> its
    /// scoped name (the most downloaded). These scopes' packages are shipped down to a few
    /// hundred downloads a month, past the popular list; borrowed from the shipped file.
    org_scope_dropped: HashMap<&'static str, &'static str>,
    /// Go: the path after host and owner -> indexes.
    go_by_repo: HashMap<String, Vec<usize>>,
    /// Go: the path in lower case -> indexes, most popular first.
    go_by_folded: HashMap<String, Vec<usize>>,
    /// Go: the path without its major version (`/vN`, `gopkg.in/…​.vN`) -> index.
    go_by_base: HashMap<String, usize>,
    /// Go: repository names (lower case, without major version) held by one owner among
    /// the targets, at least [`DISTINCTIVE_REPO_LEN`] long: only these are judged
    /// "published under another owner" (`errors`, `testify`, `backoff` are everyone's).
    go_distinctive: HashSet<String>,
    /// Go: `host/owner` (lower case) of every target and of the shipped established
    /// publishers (owners of the most-starred Go repositories): an established owner's
    /// other modules are its own forks and implementations (`gohugoio/httpcache`), not
    /// look-alikes under another owner.
    go_owners: HashSet<String>,
    /// Go: the targets are module paths (owners publish several look-alike paths).
    is_go: bool,
    is_pypi: bool,
    /// npm: names are built from words many packages share (88,000 listed names), so a
    /// changed word that no listed name uses marks a coined misspelling. PyPI's list is too
    /// short, and its names too often one glued word (`pyldap`, `snimpy`), for that.
    words_tell: bool,
    /// Targets after the first [`TARGET_NAMES`] (up to [`crate::popular::WIDE_TARGET_NAMES`]) by their
    /// letters in sorted order, for the swapped-neighbours check: only the separator,
    /// look-alike character, affix and swap checks compare with these.
    wide_by_letters: HashMap<String, Vec<u32>>,
    /// Targets up to rank `GARBLED_RANK`, at least `MIN_GARBLED_TARGET_LEN` long, by their
    /// first character and last three (see `garbled`).
    by_ends: HashMap<String, Vec<u32>>,
    /// The same targets written as one word whose last four characters are no common
    /// ending, by their first two characters and last four (see `rewritten_middle`).
    by_head_tail: HashMap<String, Vec<u32>>,
    /// Targets up to [`WEAK_EDIT_RANK`], at least [`MIN_VOWELS_CHANGED_LEN`] long, by their
    /// letters with every vowel masked (see `vowels_changed`).
    by_consonants: HashMap<String, Vec<u32>>,
    /// npm: unscoped targets at least [`MIN_VOWELS_CHANGED_LEN`] long by how they sound
    /// (see [`sound`]).
    by_sound: HashMap<String, Vec<u32>>,
    /// Deletion neighbourhoods: of every target (one deletion), and of the targets up to
    /// [`TWO_EDIT_RANK`] as long as two-edit candidates can be (two deletions).
    one_edit: DeletionIndex,
    two_edits: DeletionIndex,
    /// One deletion of the targets written with separators, separators removed (see
    /// `Detector::separated_edit`).
    separated_one_edit: DeletionIndex,
}

/// Deletion keys -> indexes of the targets reaching them. A query probes it with up to a
/// few hundred keys, so it is kept small and flat: a 64-bit hash of each key (not the key)
/// maps to a range of one shared list. Two keys sharing a hash only add candidates, and
/// every candidate is measured by edit distance, so the answers are those of an exact index.
///
/// Most probed keys are in no target's neighbourhood; a bit array of 16 bits per key (one
/// bit set per key hash, about 6 % false hits) answers those from a few hundred kilobytes
/// instead of a miss in the larger map.
#[derive(Debug, Default)]
struct DeletionIndex {
    ranges: HashMap<u64, (u32, u32), std::hash::BuildHasherDefault<Prehashed>>,
    postings: Vec<u32>,
    bits: Vec<u64>,
}

impl DeletionIndex {
    /// From (key hash, target index) pairs.
    fn build(mut pairs: Vec<(u64, u32)>) -> Self {
        pairs.sort_unstable();
        pairs.dedup();
        let words = (pairs.len() * 16 / 64).next_power_of_two().max(1);
        let mut index = Self {
            ranges: HashMap::default(),
            postings: Vec::with_capacity(pairs.len()),
            bits: vec![0; words],
        };
        for group in pairs.chunk_by(|a, b| a.0 == b.0) {
            let start = u32::try_from(index.postings.len()).unwrap_or(u32::MAX);
            index.postings.extend(group.iter().map(|&(_, i)| i));
            let len = u32::try_from(group.len()).unwrap_or(u32::MAX);
            index.ranges.insert(group[0].0, (start, len));
            let (word, bit) = index.bit(group[0].0);
            index.bits[word] |= bit;
        }
        index
    }

    /// The word and bit of a key hash (its high bits: the map uses the low ones).
    fn bit(&self, h: u64) -> (usize, u64) {
        let slots = (self.bits.len() * 64) as u64;
        let slot = (h >> 32) % slots.max(1);
        ((slot / 64) as usize, 1 << (slot % 64))
    }

    fn get(&self, key: &str) -> &[u32] {
        let h = key_hash(key);
        let (word, bit) = self.bit(h);
        if self.bits.get(word).is_none_or(|w| w & bit == 0) {
            return &[];
        }
        match self.ranges.get(&h) {
            Some(&(start, len)) => {
                let (start, len) = (start as usize, len as usize);
                self.postings.get(start..start + len).unwrap_or(&[])
            }
            None => &[],
        }
    }
}

/// A multiply-rotate hash over 8-byte words with a final mix (the keys come from the name
/// lists and their deletions, not from callers, so there is nothing to flood).
fn key_hash(key: &str) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let bytes = key.as_bytes();
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    // SplitMix64's finaliser: every bit of the hash depends on every bit of the state.
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The hasher of a map keyed by [`key_hash`] values: they are hashes already.
#[derive(Default)]
struct Prehashed(u64);

impl std::hash::Hasher for Prehashed {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = i;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The typosquat and dependency-confusion analysis over a set of known names.
#[derive(Debug)]
pub struct Detector {
    known: KnownNames,
    targets: HashMap<Ecosystem, Targets>,
    vocabulary: Vocabulary,
}

impl Detector {
    pub fn new(known: KnownNames) -> Self {
        let targets = Ecosystem::ALL
            .iter()
            .map(|&e| (e, Targets::build(e, &known)))
            .collect();
        let vocabulary = Vocabulary::build(&known);
        Self {
            known,
            targets,
            vocabulary,
        }
    }

    pub fn known(&self) -> &KnownNames {
        &self.known
    }

    /// Analyses `raw` as a name of `ecosystem`. `tracked` holds the normalised names the
    /// service tracks; `internal` says the caller listed the name as one of its own. A
    /// string that is no name of the ecosystem is an error, unless it is one after
    /// replacing look-alike Unicode characters: that is itself the attack.
    pub fn analyse(
        &self,
        ecosystem: Ecosystem,
        raw: &str,
        tracked: &HashSet<String>,
        internal: bool,
    ) -> Result<NameVerdict, NameError> {
        let name = match ecosystem.normalize(raw) {
            Ok(name) => name,
            Err(e) => {
                let plain = unconfuse(raw.trim());
                if plain == raw.trim() {
                    return Err(e);
                }
                let Ok(name) = ecosystem.normalize(&plain) else {
                    return Err(e);
                };
                let nearest = if self.is_known(ecosystem, &name, tracked) {
                    Some(name.clone())
                } else {
                    self.lookalike(ecosystem, &name, &name)
                        .and_then(|v| v.nearest_known)
                };
                return Ok(NameVerdict {
                    distance: nearest.as_deref().map(|n| osa(raw.trim(), n)),
                    name: raw.trim().to_string(),
                    risk: Risk::Typosquat,
                    reason: match &nearest {
                        Some(n) => format!("Unicode look-alike characters imitate {n}"),
                        None => "Unicode look-alike characters in place of ASCII ones".into(),
                    },
                    nearest_known: nearest,
                });
            }
        };
        let public = self.is_known(ecosystem, &name, tracked);
        if internal {
            return Ok(if public {
                NameVerdict {
                    risk: Risk::DependencyConfusion,
                    nearest_known: Some(name.clone()),
                    distance: Some(0),
                    reason: format!(
                        "internal name also exists in the public {ecosystem} registry; an install may resolve to the public package"
                    ),
                    name,
                }
            } else {
                NameVerdict {
                    risk: Risk::Clear,
                    nearest_known: None,
                    distance: None,
                    reason: "internal name not found among known public names".into(),
                    name,
                }
            });
        }
        if public {
            let reason = match self.known.rank(ecosystem, &name) {
                Some(rank) if rank as usize <= TARGET_NAMES => {
                    format!("popular {ecosystem} package (rank {rank})")
                }
                Some(rank) => format!(
                    "established {ecosystem} package (rank {rank} by downloads): an established package is not a squat of its neighbours"
                ),
                None => "package tracked by the service".to_string(),
            };
            return Ok(NameVerdict {
                nearest_known: Some(name.clone()),
                distance: Some(0),
                risk: Risk::Known,
                reason,
                name,
            });
        }
        if ecosystem == Ecosystem::Go
            && let Some((module, how)) = self.go_within_known(&name, tracked)
        {
            return Ok(NameVerdict {
                risk: Risk::Known,
                distance: Some(0),
                reason: how,
                nearest_known: Some(module),
                name,
            });
        }
        if ecosystem == Ecosystem::Npm
            && let Some(v) = self.npm_own_scope(&name, tracked)
        {
            return Ok(v);
        }
        Ok(self
            .lookalike(ecosystem, raw.trim(), &name)
            .unwrap_or(NameVerdict {
                risk: Risk::Clear,
                nearest_known: None,
                distance: None,
                reason: "not close to any popular name".into(),
                name,
            }))
    }

    fn is_known(&self, ecosystem: Ecosystem, name: &str, tracked: &HashSet<String>) -> bool {
        self.known.rank(ecosystem, name).is_some() || tracked.contains(name)
    }

    /// A package inside a known Go module, or another major version of one (`/v5` of a
    /// known `/v4`, `gopkg.in/yaml.v1` of a known `yaml.v3`): with the module's owner, so
    /// published by the same people. Returns the module and the reason.
    fn go_within_known(&self, path: &str, tracked: &HashSet<String>) -> Option<(String, String)> {
        let t = self.targets.get(&Ecosystem::Go);
        let mut prefix = path;
        loop {
            if prefix != path && self.is_known(Ecosystem::Go, prefix, tracked) {
                return Some((
                    prefix.to_string(),
                    format!("package or major version of the known module {prefix}"),
                ));
            }
            let (base, major) = go_major(prefix);
            if let Some(t) = t
                && let Some(&i) = t.go_by_base.get(base)
                && let target = &t.names[i].0
                && target != prefix
            {
                {
                    let version = match major {
                        Some(v) => format!("major version {v}"),
                        None => "the first major version".to_string(),
                    };
                    let what = if prefix == path { "" } else { "a package of " };
                    return Some((
                        target.clone(),
                        format!(
                            "{what}{version} of the known module {target}: a major-version suffix is a version, not a typo"
                        ),
                    ));
                }
            }
            match prefix.rsplit_once('/') {
                Some((parent, _)) => prefix = parent,
                None => return None,
            }
        }
    }

    /// npm names that are not squats by who publishes them: `@types/<x>` is judged by the
    /// package it types, and a scope holding established packages is its organisation's own
    /// (npm scopes belong to one user or organisation).
    fn npm_own_scope(&self, name: &str, tracked: &HashSet<String>) -> Option<NameVerdict> {
        let (scope, bare) = scoped(name)?;
        let clear = |reason: String| NameVerdict {
            name: name.to_string(),
            risk: Risk::Clear,
            nearest_known: None,
            distance: None,
            reason,
        };
        if scope == "types" {
            // DefinitelyTyped writes `@scope/pkg` as `@types/scope__pkg`.
            let typed = match bare.split_once("__") {
                Some((s, n)) => format!("@{s}/{n}"),
                None => bare.to_string(),
            };
            if self.is_known(Ecosystem::Npm, &typed, tracked) {
                return Some(clear(format!(
                    "type definitions for the known package {typed} (@types is published by DefinitelyTyped)"
                )));
            }
            return Some(match self.lookalike(Ecosystem::Npm, &typed, &typed) {
                Some(v) => {
                    let target = v.nearest_known.unwrap_or_default();
                    NameVerdict {
                        name: name.to_string(),
                        risk: Risk::Typosquat,
                        distance: Some(osa(&typed, &target)),
                        reason: format!(
                            "type definitions named after a look-alike of {target} ({})",
                            v.reason
                        ),
                        nearest_known: Some(target),
                    }
                }
                None => clear(format!(
                    "type definitions for {typed}, which is not close to any popular name"
                )),
            });
        }
        let rank = self.known.npm_scope_rank(scope)?;
        Some(clear(format!(
            "published under @{scope}, the scope of established packages (the most popular at rank {rank}); an npm scope belongs to one organisation"
        )))
    }

    /// The first look-alike relation to a target, checked from the most telling technique
    /// to the least.
    fn lookalike(&self, ecosystem: Ecosystem, raw: &str, name: &str) -> Option<NameVerdict> {
        let t = self.targets.get(&ecosystem)?;
        let verdict = |idx: usize, reason: String| {
            let target = &t.names[idx].0;
            Some(typosquat_of(name, target, reason))
        };
        let other = |idx: Option<&usize>| idx.copied().filter(|&i| t.names[i].0 != name);
        // PyPI: separators and the py/python affixes are how authors spell their own
        // projects (`jsonrpc` and `json-rpc`, `pyxattr` beside `xattr`, `python-ldap` beside
        // `pyldap`), so alone they imitate only the most popular names.
        let pypi_ok = |i: &usize| ecosystem != Ecosystem::Pypi || t.names[*i].1 <= WEAK_EDIT_RANK;

        // npm has refused names differing from an existing one only in punctuation since
        // 2017, so a separator variant published there is as old as its neighbour; past the
        // first targets that neighbour has no more standing than the candidate (`ansi-up`
        // beside `ansi_up`, both packaged by distributions).
        let npm_ok =
            |i: &usize| ecosystem != Ecosystem::Npm || t.names[*i].1 as usize <= TARGET_NAMES;
        if let Some(i) = other(t.squashed.get(&squash(name)))
            .filter(pypi_ok)
            .filter(npm_ok)
        {
            return verdict(
                i,
                format!("separator changed or removed ({})", t.names[i].0),
            );
        }
        if ecosystem == Ecosystem::Go
            && let Some(v) = go_lookalike(t, name)
        {
            return Some(v);
        }
        // Look-alike characters only: the same letters with other separators are the
        // separator check's.
        if let Some(i) = other(t.skeleton.get(&squash(&skeleton(raw))))
            .filter(|&i| squash(&t.names[i].0) != squash(name))
        {
            return verdict(
                i,
                format!(
                    "visually similar characters (rn/m, l/1/I, 0/o) imitate {}",
                    t.names[i].0
                ),
            );
        }
        if let Some(key) = words_key(name)
            && let Some(i) = other(t.words.get(&key))
            && words(name) != words(&t.names[i].0)
        {
            return verdict(i, format!("words of {} reordered", t.names[i].0));
        }
        if ecosystem == Ecosystem::Npm
            && let Some(v) = self.npm_scope(t, name)
        {
            return Some(v);
        }
        for core in cores(ecosystem, name) {
            if let Some(i) = other(t.cores.get(&core)).filter(pypi_ok)
                && (core.chars().count() >= MIN_EDIT_LEN || t.names[i].1 <= SHORT_CORE_RANK)
            {
                let target = &t.names[i].0;
                let how = if name.len() > target.len() {
                    "added to"
                } else {
                    "changed on"
                };
                return verdict(i, format!("affix {how} {target}"));
            }
        }
        if ecosystem != Ecosystem::Go
            && let Some(v) = word_added(t, name)
                .or_else(|| generic_words_added(t, name))
                .or_else(|| word_in_front(t, name))
                .or_else(|| abbreviation_spelt_out(t, name))
                .or_else(|| unversioned_with_popular(t, name))
                .or_else(|| number_changed(t, name))
                .or_else(|| self.names_glued(ecosystem, name))
        {
            return Some(v);
        }
        if let Some(v) = self.edits(t, name) {
            return Some(v);
        }
        if !t.is_go
            && let Some(v) = self
                .separated_edit(t, name)
                .or_else(|| self.sounds_alike(t, name))
        {
            return Some(v);
        }
        if !t.is_go
            && let Some(v) = garbled(t, name)
                .or_else(|| rewritten_middle(t, name))
                .or_else(|| vowels_changed(t, name))
                .or_else(|| letter_appended(t, name))
                .or_else(|| self.letter_moved(ecosystem, name))
        {
            return Some(v);
        }
        // Established names beyond the targets: two neighbours swapped (`ffmepg`).
        if name.chars().count() >= MIN_EDIT_LEN
            && let Some(&i) = t
                .wide_by_letters
                .get(&sorted_letters(name))
                .into_iter()
                .flatten()
                .find(|&&i| {
                    let target = &t.names[i as usize].0;
                    osa_bounded(name, target, 1) == Some(1)
                        && edit_kind(name, target) == "neighbouring characters swapped"
                })
        {
            let target = &t.names[i as usize].0;
            return verdict(
                i as usize,
                format!("neighbouring characters swapped of {target}"),
            );
        }
        // An affix around a misspelt name (`matplatlib-plus`): of the most popular names, or
        // on npm of any target when the misspelling is coined (`ethetsjs`).
        for core in cores(ecosystem, name) {
            if core.chars().count() >= MIN_EDITED_CORE_LEN
                && let Some(target) = self
                    .edits(t, &core)
                    .filter(|v| v.distance == Some(1))
                    .and_then(|v| v.nearest_known)
                    .or_else(|| self.short_core_coined(t, &core))
            {
                let popular = self
                    .known
                    .rank(ecosystem, &target)
                    .is_some_and(|r| r <= WEAK_EDIT_RANK)
                    && !is_weak_edit(edit_kind(&core, &target));
                let coined = t.words_tell && self.vocabulary.coined(&core, &target);
                if !popular && !coined {
                    continue;
                }
                return Some(typosquat_of(
                    name,
                    &target,
                    if popular {
                        format!("affix added to a misspelling of {target}")
                    } else {
                        format!(
                            "affix added to a misspelling of {target} ({core}, a spelling no listed npm name uses)"
                        )
                    },
                ));
            }
        }
        None
    }

    /// npm: the listed name a short core (under [`SHORT_NAME`] characters, what is left of
    /// a name without its affix) is one edit from, past the first 500 names the edit check
    /// compares short names with, when the core is a spelling no listed name uses (`ethes`
    /// of `ethesjs` for `ethers`). A short name alone is a name of its own as often as not
    /// (`smash`, packaged by Debian, beside `slash`); with an affix a coined core says
    /// which package it is meant for.
    fn short_core_coined(&self, t: &Targets, core: &str) -> Option<String> {
        if !t.words_tell || core.chars().count() >= SHORT_NAME {
            return None;
        }
        let mut best: Option<usize> = None;
        for_each_deletion(core, 1, |key| {
            for &i in t.one_edit.get(key) {
                let i = i as usize;
                let target = &t.names[i].0;
                // A number after a name names a successor (see `Detector::edits`).
                let numbered = core.len() == target.len() + 1
                    && core.starts_with(target.as_str())
                    && core.ends_with(|c: char| c.is_ascii_digit());
                if best.is_none_or(|b| i < b)
                    && scoped(target).is_none()
                    && !numbered
                    && osa_bounded(core, target, 1) == Some(1)
                    && self.vocabulary.coined(core, target)
                {
                    best = Some(i);
                }
            }
        });
        best.map(|i| t.names[i].0.clone())
    }

    /// A target written with separators, its separators changed or removed and one
    /// character edited (`npmrunnall` for `npm-run-all`): of the first 500 names with an
    /// edit typing makes, or on npm of any target when the result coins a spelling no
    /// listed name uses.
    fn separated_edit(&self, t: &Targets, name: &str) -> Option<NameVerdict> {
        let flat = squash(name);
        if flat.chars().count() < MIN_EDITED_CORE_LEN {
            return None;
        }
        let mut candidates: Vec<usize> = Vec::new();
        for_each_deletion(&flat, 1, |key| {
            candidates.extend(t.separated_one_edit.get(key).iter().map(|&i| i as usize));
        });
        candidates.sort_unstable();
        candidates.dedup();
        for i in candidates {
            let (target, rank) = (&t.names[i].0, t.names[i].1);
            let target_flat = squash(target);
            // Same separators: a plain edit, the edit check's.
            if target.starts_with("@types/")
                || name.len() - flat.len() == target.len() - target_flat.len()
                    && osa_bounded(name, target, 1).is_some()
                || osa_bounded(&flat, &target_flat, 1) != Some(1)
            {
                continue;
            }
            // A number after a name names a successor or a port (see `Detector::edits`).
            if flat.len() == target_flat.len() + 1
                && flat.starts_with(target_flat.as_str())
                && flat.ends_with(|c: char| c.is_ascii_digit())
            {
                continue;
            }
            let kind = edit_kind(&flat, &target_flat);
            let popular = rank <= WEAK_EDIT_RANK && !is_weak_edit(kind);
            let coined = t.words_tell && self.vocabulary.coined(name, target);
            if !popular && !coined {
                continue;
            }
            return Some(typosquat_of(
                name,
                target,
                if popular {
                    format!("separators of {target} changed and {kind}")
                } else {
                    format!(
                        "separators of {target} changed and {kind}, into a spelling no listed npm name uses"
                    )
                },
            ));
        }
        None
    }

    /// Two of the first [`WEAK_EDIT_RANK`] names written together without a separator, each
    /// at least [`MIN_EDIT_LEN`] long (`torchtriton`, published on PyPI to take the place of
    /// PyTorch's own nightly dependency): a name presenting itself as both packages'. Past the
    /// first 500, legitimate projects are named that way (`psycopg2cffi`, packaged by Debian).
    fn names_glued(&self, ecosystem: Ecosystem, name: &str) -> Option<NameVerdict> {
        let popular = |part: &str| {
            part.chars().count() >= MIN_EDIT_LEN
                && self
                    .known
                    .rank(ecosystem, part)
                    .is_some_and(|r| r <= WEAK_EDIT_RANK)
        };
        if name.starts_with('@') {
            return None;
        }
        let (head, tail) = name
            .char_indices()
            .skip(1)
            .map(|(at, _)| name.split_at(at))
            .find(|(head, tail)| popular(head) && popular(tail))?;
        Some(typosquat_of(
            name,
            tail,
            format!(
                "the popular names {head} and {tail} run together: a package presenting itself as {tail} for {head}"
            ),
        ))
    }

    /// A target with one letter moved two places, over the letter beside it (`botoceor` for
    /// `botocore`): a finger pressing a key too late or too early, two edits the edit checks
    /// do not reach for names this short. Of any target for names of [`MIN_MOVED_LEN`] or
    /// more, of the first [`WEAK_EDIT_RANK`] for names of [`MIN_SHORT_MOVED_LEN`] or more.
    fn letter_moved(&self, ecosystem: Ecosystem, name: &str) -> Option<NameVerdict> {
        let chars: Vec<char> = name.chars().collect();
        if chars.len() < MIN_SHORT_MOVED_LEN {
            return None;
        }
        let limit = if chars.len() >= MIN_MOVED_LEN {
            TARGET_NAMES as u32
        } else {
            WEAK_EDIT_RANK
        };
        let mut moved = String::with_capacity(name.len());
        for from in 0..chars.len() {
            if !chars[from].is_ascii_alphanumeric() {
                continue;
            }
            for to in [from.checked_sub(2), Some(from + 2)].into_iter().flatten() {
                if to >= chars.len() {
                    continue;
                }
                let c = chars[from];
                moved.clear();
                for (i, &x) in chars.iter().enumerate() {
                    match (i == from, i == to) {
                        (true, _) => {}
                        (false, true) if to < from => moved.extend([c, x]),
                        (false, true) => moved.extend([x, c]),
                        (false, false) => moved.push(x),
                    }
                }
                if let Some(rank) = self.known.rank(ecosystem, &moved)
                    && rank <= limit
                    && moved != name
                    && !moved.starts_with("@types/")
                    && osa_bounded(name, &moved, 1).is_none()
                {
                    return Some(typosquat_of(
                        name,
                        &moved,
                        format!("a letter of {moved} moved two places ({c})"),
                    ));
                }
            }
        }
        None
    }

    /// npm: a target spelt as it sounds (`deezcord.js` for `discord.js`: `z` for `s`, `k`
    /// for `c`, `f` for `ph`, with other vowels or letters doubled or not), two or three
    /// edits away, into a spelling no listed npm name uses. One edit is the edit check's.
    fn sounds_alike(&self, t: &Targets, name: &str) -> Option<NameVerdict> {
        if !t.words_tell || name.chars().count() < MIN_VOWELS_CHANGED_LEN {
            return None;
        }
        let flat = squash(name);
        for &i in t.by_sound.get(&sound(name)).into_iter().flatten() {
            let target = &t.names[i as usize].0;
            let Some(d) = osa_bounded(&flat, &squash(target), 3) else {
                continue;
            };
            // A consonant swapped for one that sounds alike is what makes it a homophone;
            // other vowels alone are `vowels_changed`'s (`prouter` is no `prettier`).
            if d >= 2
                && sound_letters(name) != sound_letters(target)
                && self.vocabulary.coined(name, target)
            {
                return Some(typosquat_of(
                    name,
                    target,
                    format!(
                        "{target} spelt as it sounds (s/z, c/k, f/ph), into a spelling no listed npm name uses"
                    ),
                ));
            }
        }
        None
    }

    fn npm_scope(&self, t: &Targets, name: &str) -> Option<NameVerdict> {
        let verdict = |idx: usize, reason: String| {
            let target = &t.names[idx].0;
            Some(typosquat_of(name, target, reason))
        };
        if let Some((scope, bare)) = scoped(name) {
            let same_name = t.scoped_by_name.get(bare).map_or(&[][..], Vec::as_slice);
            // `@typescript_eslinter/eslint` for `eslint`: a popular name under a look-alike
            // of an established scope. A popular name under any other scope is a fork or a
            // wrapper as often as not, and says nothing by itself.
            if let Some(&i) = same_name.iter().find(|&&i| scoped(&t.names[i].0).is_none())
                && bare.len() >= MIN_EDIT_LEN
                && let Some(like) = self.lookalike_scope(scope)
            {
                return verdict(
                    i,
                    format!(
                        "unscoped package {} under the scope @{scope}, a look-alike of the established scope @{like}",
                        t.names[i].0
                    ),
                );
            }
            // `@typescript_eslinter/eslint` style: a look-alike of a popular scope.
            for &i in same_name {
                if let Some((their_scope, _)) = scoped(&t.names[i].0)
                    && their_scope != scope
                    && scope_distance(their_scope, scope).is_some()
                {
                    return verdict(i, format!("look-alike scope of {}", t.names[i].0));
                }
            }
        } else {
            // `scope-name` or `scopename` for `@scope/name`.
            if let Some(&i) = t.scope_folded.get(&squash(name)) {
                return verdict(i, format!("scope of {} folded into the name", t.names[i].0));
            }
            // `core-rest-pipeline` for `@azure/core-rest-pipeline`: a scoped name published
            // without its scope catches every install that loses the scope (a typed
            // command, a manifest edited by hand).
            if let Some(&i) = t.scope_dropped.get(name) {
                return verdict(
                    i,
                    format!(
                        "scope of {} dropped: an unscoped copy of an established scoped name",
                        t.names[i].0
                    ),
                );
            }
            // `core-auth` for `@azure/core-auth`: an organisation publishing under its scope
            // only owns its names of two words too, down to its least downloaded packages.
            // The name itself, when listed, is established and never gets here.
            if let Some(target) = t.org_scope_dropped.get(name) {
                let scope = scoped(target).map_or("", |(s, _)| s);
                return Some(typosquat_of(
                    name,
                    target,
                    format!(
                        "scope of {target} dropped: an unscoped copy of a package of @{scope}, an organisation that publishes under its scope only"
                    ),
                ));
            }
        }
        None
    }

    /// npm: `name` is `target` with the first letter of its short leading word (at most
    /// [`MAX_LEADING_WORD_LEN`] long, the name having more words) replaced, into a word no
    /// listed name uses (`zs-sha3` for `js-sha3`). The rest of the name, what identifies the
    /// package, is kept whole. A one-word name with another first letter is a word of its
    /// own as often as not (`qclone` beside `fclone`, `prouter` beside `trouter`).
    fn leading_word_coined(&self, name: &str, target: &str) -> bool {
        let theirs = words(target);
        theirs.len() >= 2
            && theirs[0].chars().count() <= MAX_LEADING_WORD_LEN
            && name.chars().next() != target.chars().next()
            && rest(name) == rest(target)
            && self.vocabulary.coined(name, target)
    }

    /// A scope of the most popular npm packages that `scope` imitates (see
    /// [`scope_distance`]).
    fn lookalike_scope(&self, scope: &str) -> Option<String> {
        self.known
            .npm_scopes()
            .filter(|s| {
                *s != scope
                    && self
                        .known
                        .npm_scope_rank(s)
                        .is_some_and(|r| r as usize <= TARGET_NAMES)
            })
            .filter_map(|s| scope_distance(s, scope).map(|d| (d, s)))
            .min()
            .map(|(_, s)| s.to_string())
    }

    /// The most popular target one edit away (two for long names of very popular ones),
    /// found through indexes of the targets' deletions (a candidate and a target within
    /// `k` edits share a string reached by at most `k` deletions from each), then measured.
    fn edits(&self, t: &Targets, name: &str) -> Option<NameVerdict> {
        let len = name.chars().count();
        if len < MIN_EDIT_LEN {
            return None;
        }
        let consider = |best: &mut Option<(u32, usize)>, index: &DeletionIndex, max: u32| {
            // Every target sharing a key, once each, then measured.
            let mut candidates: Vec<usize> = Vec::new();
            for_each_deletion(name, max as usize, |key| {
                candidates.extend(index.get(key).iter().map(|&i| i as usize));
            });
            candidates.sort_unstable();
            candidates.dedup();
            for i in candidates {
                if len < SHORT_NAME && t.names[i].1 > SHORT_EDIT_RANK {
                    continue;
                }
                // Type packages are judged by the package they type.
                if t.names[i].0.starts_with("@types/") {
                    continue;
                }
                let (target, rank) = (&t.names[i].0, t.names[i].1);
                // Separators only: the separator check's, not a misspelling.
                if squash(name) == squash(target) {
                    continue;
                }
                let Some(d) = osa_bounded(name, target, max) else {
                    continue;
                };
                // Past the most popular names, a weak edit imitates only when it coins a
                // spelling no listed name uses: long-tail names one such edit from a listed
                // one are words of their own far more often.
                if d == 1
                    && rank > WEAK_EDIT_RANK
                    && is_weak_edit(edit_kind(name, target))
                    && !(t.words_tell && self.vocabulary.coined(name, target))
                    && !pypi_inserted_inside(t, name, target, rank)
                {
                    continue;
                }
                // Short names are one weak edit from many others (`pako`, `mako`; `qpack`,
                // `hpack`): only the most popular short names are imitated that way.
                if d == 1
                    && len < SHORT_NAME
                    && rank > SHORT_WEAK_EDIT_RANK
                    && is_weak_edit(edit_kind(name, target))
                {
                    continue;
                }
                // A number after a name (`httpx2`) names a successor or a port, not a typo.
                if d == 1
                    && name.len() == target.len() + 1
                    && name.starts_with(target.as_str())
                    && name.ends_with(|c: char| c.is_ascii_digit())
                {
                    continue;
                }
                // A name inside a longer one, one character off its start or end: past the
                // most popular names, the shorter one is its own project (`daemon` and
                // `zdaemon`, `readability` and `breadability`), and the name without a
                // number the one its numbered successor followed (`tinycss`, `tinycss2`).
                if d == 1
                    && target.len() == name.len() + 1
                    && (target.starts_with(name) || target.ends_with(name))
                {
                    let numbered =
                        target.starts_with(name) && target.ends_with(|c: char| c.is_ascii_digit());
                    let beyond = if numbered {
                        TWO_EDIT_RANK
                    } else {
                        WEAK_EDIT_RANK
                    };
                    // A shorter name no listed name uses as a word is the longer one cut
                    // short (`aioconsol`), not a project of its own; so is, on PyPI, a
                    // long name with its last letter dropped (see [`MIN_END_EDIT_LEN`]).
                    if rank > beyond
                        && !pypi_cut_short(t, name, target)
                        && (numbered || !t.words_tell || !self.vocabulary.coined(name, target))
                    {
                        continue;
                    }
                }
                if d >= 1
                    && rank > prefix_rank(name, target, d)
                    && !(d == 1 && t.words_tell && self.leading_word_coined(name, target))
                {
                    continue;
                }
                // Two module paths of one owner are that owner's, not a squat.
                if t.is_go
                    && let (Some((h, o, _)), Some((th, to, _))) = (go_parts(name), go_parts(target))
                    && h.eq_ignore_ascii_case(th)
                    && o == to
                {
                    continue;
                }
                if d > 0 && best.is_none_or(|(bd, bi)| (d, i) < (bd, bi)) {
                    *best = Some((d, i));
                }
            }
        };
        let mut best: Option<(u32, usize)> = None;
        consider(&mut best, &t.one_edit, 1);
        if best.is_none() && len >= MIN_TWO_EDIT_LEN {
            consider(&mut best, &t.two_edits, 2);
        }
        let (d, i) = best?;
        let target = &t.names[i].0;
        Some(NameVerdict {
            name: name.to_string(),
            risk: Risk::Typosquat,
            distance: Some(d),
            nearest_known: Some(target.clone()),
            reason: if d == 1 {
                let kind = edit_kind(name, target);
                // Said when the coined spelling is what let the edit count.
                let cut_short = target.len() == name.len() + 1
                    && (target.starts_with(name) || target.ends_with(name));
                let coined = t.words_tell
                    && t.names[i].1 > WEAK_EDIT_RANK
                    && (is_weak_edit(kind) || cut_short)
                    && self.vocabulary.coined(name, target);
                let past_popular = t.names[i].1 > WEAK_EDIT_RANK;
                if past_popular && t.words_tell && self.leading_word_coined(name, target) {
                    format!(
                        "first letter of {target}'s leading word {} replaced, into a spelling no listed npm name uses",
                        words(target)[0]
                    )
                } else if past_popular && cut_short && pypi_cut_short(t, name, target) {
                    format!(
                        "last letter of {target} dropped (a name of {MIN_END_EDIT_LEN} characters or more)"
                    )
                } else if coined {
                    format!("{kind} of {target}, into a spelling no listed npm name uses")
                } else if past_popular && pypi_inserted_inside(t, name, target, t.names[i].1) {
                    format!(
                        "{kind} inside {target} (one of the first {INSERTED_INSIDE_RANK} PyPI names, the result {MIN_INSERTED_LEN} characters or more)"
                    )
                } else {
                    format!("{kind} of {target}")
                }
            } else {
                format!("two edits from {target}")
            },
        })
    }
}

/// The least popular target an edit at the front of a name, or a spelling variant, still
/// imitates (see `Detector::edits`); `u32::MAX` for other edits. Projects are named with a
/// letter or two in front of another name (`ujson`, `mujson`; `txrequests` for Twisted;
/// `asgiproxy` beside `wsgiproxy`) and in the other spelling (`colormap`, `colourmap`), so
/// these imitate only the most popular names: a letter replaced at the front or a spelling
/// variant up to [`WEAK_EDIT_RANK`], a letter added in front up to
/// [`SHORT_WEAK_EDIT_RANK`] (up to [`WEAK_EDIT_RANK`] when it repeats the next letter or
/// is its keyboard neighbour: `rrequests`), two letters added in front never.
fn prefix_rank(name: &str, target: &str, d: u32) -> u32 {
    match d {
        1 if rest(name) == target => {
            if is_weak_edit(edit_kind(name, target)) {
                SHORT_WEAK_EDIT_RANK
            } else {
                WEAK_EDIT_RANK
            }
        }
        1 if rest(name) == rest(target) && !rest(name).is_empty() => WEAK_EDIT_RANK,
        1 if name.replace("our", "or") == target.replace("our", "or") => WEAK_EDIT_RANK,
        2 if rest(rest(name)) == target => 0,
        _ => u32::MAX,
    }
}

/// The string after its first character.
fn rest(s: &str) -> &str {
    s.char_indices().nth(1).map_or("", |(i, _)| &s[i..])
}

/// Calls `f` with the string and every string made from it by deleting up to `k` (1 or 2)
/// characters, reusing one buffer. A string reached in several ways is passed each time.
fn for_each_deletion(s: &str, k: usize, mut f: impl FnMut(&str)) {
    f(s);
    if k == 0 {
        return;
    }
    // Byte offsets of each character, and the end.
    let at: Vec<usize> = s
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()))
        .collect();
    let n = at.len() - 1;
    let mut buf = String::with_capacity(s.len());
    for i in 0..n {
        buf.clear();
        buf.push_str(&s[..at[i]]);
        buf.push_str(&s[at[i + 1]..]);
        f(&buf);
        if k >= 2 {
            for j in i + 1..n {
                buf.clear();
                buf.push_str(&s[..at[i]]);
                buf.push_str(&s[at[i + 1]..at[j]]);
                buf.push_str(&s[at[j + 1]..]);
                f(&buf);
            }
        }
    }
}

impl Targets {
    fn build(ecosystem: Ecosystem, known: &KnownNames) -> Self {
        let mut t = Targets {
            is_go: ecosystem == Ecosystem::Go,
            is_pypi: ecosystem == Ecosystem::Pypi,
            words_tell: ecosystem == Ecosystem::Npm,
            ..Targets::default()
        };
        let (mut one_edit, mut two_edits) = (Vec::new(), Vec::new());
        let mut separated_one_edit = Vec::new();
        let mut long_words: Vec<u32> = Vec::new();
        let mut owners: HashMap<String, HashSet<String>> = HashMap::new();
        for (i, name) in known.popular(ecosystem).iter().enumerate() {
            let rank = u32::try_from(i + 1).unwrap_or(u32::MAX);
            t.names.push((name.clone(), rank));
            t.squashed.entry(squash(name)).or_insert(i);
            t.skeleton.entry(squash(&skeleton(name))).or_insert(i);
            if name.chars().count() >= MIN_CORE_LEN {
                t.cores.entry(name.clone()).or_insert(i);
            }
            for core in cores(ecosystem, name) {
                t.cores.entry(core).or_insert(i);
            }
            let len = name.chars().count();
            let at = u32::try_from(i).unwrap_or(u32::MAX);
            if ecosystem == Ecosystem::Npm
                && let Some((scope, bare)) = scoped(name)
                && scope != "types"
                && bare.chars().count() >= MIN_SCOPE_DROPPED_LEN
                && bare.split(['-', '.', '_']).count() >= 3
            {
                t.scope_dropped.entry(bare.to_string()).or_insert(i);
            }
            if i >= TARGET_NAMES {
                if len >= MIN_EDIT_LEN {
                    t.wide_by_letters
                        .entry(sorted_letters(name))
                        .or_default()
                        .push(at);
                }
                continue;
            }
            if let Some(key) = words_key(name) {
                t.words.entry(key).or_insert(i);
            }
            if t.words_tell && scoped(name).is_none() && len >= MIN_VOWELS_CHANGED_LEN {
                t.by_sound.entry(sound(name)).or_default().push(at);
            }
            if rank <= WEAK_EDIT_RANK && len >= MIN_VOWELS_CHANGED_LEN {
                t.by_consonants
                    .entry(consonants(name))
                    .or_default()
                    .push(at);
            }
            if rank <= GARBLED_RANK && len >= MIN_GARBLED_TARGET_LEN {
                t.by_ends.entry(ends_key(name)).or_default().push(at);
                if squash(name) == *name {
                    long_words.push(at);
                }
            }
            if len >= MIN_EDIT_LEN {
                for_each_deletion(name, 1, |key| one_edit.push((key_hash(key), at)));
            }
            // Past the first 500 only npm's coined misspellings count (see
            // `Detector::separated_edit`); scoped names are the scope checks'.
            let flat = squash(name);
            if (t.words_tell || rank <= WEAK_EDIT_RANK)
                && !t.is_go
                && scoped(name).is_none()
                && flat != *name
                && flat.chars().count() >= MIN_EDIT_LEN
            {
                for_each_deletion(&flat, 1, |key| {
                    separated_one_edit.push((key_hash(key), at));
                });
            }
            if rank <= TWO_EDIT_RANK && len + 2 >= MIN_TWO_EDIT_LEN {
                for_each_deletion(name, 2, |key| two_edits.push((key_hash(key), at)));
            }
            match ecosystem {
                Ecosystem::Npm => {
                    let bare = scoped(name).map_or(name.as_str(), |(_, b)| b);
                    t.scoped_by_name
                        .entry(bare.to_string())
                        .or_default()
                        .push(i);
                    if let Some((scope, bare)) = scoped(name) {
                        t.scope_folded
                            .entry(squash(&format!("{scope}{bare}")))
                            .or_insert(i);
                    }
                }
                Ecosystem::Go => {
                    t.go_by_folded
                        .entry(name.to_ascii_lowercase())
                        .or_default()
                        .push(i);
                    t.go_by_base
                        .entry(go_major(name).0.to_string())
                        .or_insert(i);
                    if let Some((host, owner, repo)) = go_parts(name) {
                        owners
                            .entry(strip_major(repo).to_ascii_lowercase())
                            .or_default()
                            .insert(owner.to_ascii_lowercase());
                        t.go_owners
                            .insert(format!("{host}/{owner}").to_ascii_lowercase());
                    }
                    if let Some((_, _, repo)) = go_parts(name) {
                        t.go_by_repo
                            .entry(strip_major(repo).to_string())
                            .or_default()
                            .push(i);
                    }
                }
                Ecosystem::Pypi => {}
            }
        }
        if t.is_go {
            t.go_owners.extend(established_go_owners());
        }
        if ecosystem == Ecosystem::Npm {
            for name in npm_organisation_packages() {
                if let Some((_, bare)) = scoped(name)
                    && bare.chars().count() >= MIN_SCOPE_DROPPED_LEN
                    && bare.split(['-', '.', '_']).count() >= MIN_ORG_SCOPE_DROPPED_WORDS
                {
                    t.org_scope_dropped.entry(bare).or_insert(name);
                }
            }
        }
        t.go_distinctive = owners
            .into_iter()
            .filter(|(repo, owners)| {
                owners.len() == 1 && repo.chars().count() >= DISTINCTIVE_REPO_LEN
            })
            .map(|(repo, _)| repo)
            .collect();
        // How many listed names end in each long one-word target's last four characters.
        let mut endings: HashMap<String, usize> = long_words
            .iter()
            .map(|&i| (tail(&t.names[i as usize].0, 4), 0))
            .collect();
        for (name, _) in &t.names {
            if let Some(n) = endings.get_mut(&tail(&squash(name), 4)) {
                *n += 1;
            }
        }
        for i in long_words {
            let name = &t.names[i as usize].0;
            if endings
                .get(&tail(name, 4))
                .is_some_and(|&n| n < COMMON_ENDING)
            {
                t.by_head_tail
                    .entry(head_tail_key(name))
                    .or_default()
                    .push(i);
            }
        }
        t.one_edit = DeletionIndex::build(one_edit);
        t.separated_one_edit = DeletionIndex::build(separated_one_edit);
        t.two_edits = DeletionIndex::build(two_edits);
        t
    }
}

/// Every word (see [`words`]) of every listed npm name: spellings some package uses.
#[derive(Debug, Default)]
struct Vocabulary(HashSet<Box<str>>);

impl Vocabulary {
    fn build(known: &KnownNames) -> Self {
        Self(
            known
                .names(Ecosystem::Npm)
                .flat_map(words)
                .map(Box::from)
                .collect(),
        )
    }

    /// Whether `name` differs from `target` only in words no listed name uses: a
    /// misspelling coined for the look-alike (`pygacme`, `js-sha7`) rather than a word of its
    /// own that happens to be one edit away (`test-each` beside `jest-each`, `mkdirs`).
    fn coined(&self, name: &str, target: &str) -> bool {
        let theirs = words(target);
        let mut changed = words(name)
            .into_iter()
            .filter(|w| !theirs.contains(w))
            .peekable();
        changed.peek().is_some() && changed.all(|w| !self.0.contains(w))
    }
}

/// How far `scope` is from the established scope `theirs`, separators aside, when close
/// enough to imitate it: one edit for scopes under 10 characters, two for longer ones; none
/// for scopes under 6 characters (`@nx`, `@odx`, `@anev` are many organisations' initials).
fn scope_distance(theirs: &str, scope: &str) -> Option<u32> {
    let (a, b) = (squash(theirs), squash(scope));
    let len = a.chars().count().min(b.chars().count());
    if len < 6 {
        return None;
    }
    let max = if len < 10 { 1 } else { 2 };
    osa_bounded(&a, &b, max)
}

fn scoped(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix('@')?.split_once('/')
}

/// `host`, `owner`, and the rest of a Go module path.
fn go_parts(path: &str) -> Option<(&str, &str, &str)> {
    let mut it = path.splitn(3, '/');
    let host = it.next()?;
    let owner = it.next()?;
    let rest = it.next().unwrap_or("");
    Some((host, owner, rest))
}

fn strip_major(repo: &str) -> &str {
    match repo.rsplit_once('/') {
        Some((base, v))
            if v.len() > 1 && v.starts_with('v') && v[1..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => repo,
    }
}

/// A Go module path without its major-version suffix, and the major version: `/vN`
/// (N >= 2) at the end, or `.vN` ending a `gopkg.in` path (N >= 0).
fn go_major(path: &str) -> (&str, Option<&str>) {
    let digits = |v: &str| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
    if let Some((base, v)) = path.rsplit_once('/')
        && let Some(n) = v.strip_prefix('v')
        && digits(n)
        && base.contains('/')
    {
        return (base, Some(v));
    }
    if path.starts_with("gopkg.in/")
        && let Some((base, n)) = path.rsplit_once(".v")
        && digits(n)
        && !base.ends_with('/')
    {
        return (base, Some(&path[base.len() + 1..]));
    }
    (path, None)
}

/// A Go path imitating a popular module: its owner or host altered, or its repository
/// published under another owner.
fn go_lookalike(t: &Targets, name: &str) -> Option<NameVerdict> {
    let (host, owner, repo) = go_parts(name)?;
    let repo_key = strip_major(repo);
    let verdict = |idx: usize, reason: String| {
        let target = &t.names[idx].0;
        Some(typosquat_of(name, target, reason))
    };
    // Case variants of the whole path (`Sirupsen` for `sirupsen`).
    if let Some(&i) = t
        .go_by_folded
        .get(&name.to_ascii_lowercase())
        .into_iter()
        .flatten()
        .find(|&&i| t.names[i].0 != name)
    {
        return verdict(i, format!("letter case changed from {}", t.names[i].0));
    }
    if repo_key.is_empty() {
        return None;
    }
    let established = t
        .go_owners
        .contains(&format!("{host}/{owner}").to_ascii_lowercase());
    for &i in t.go_by_repo.get(repo_key).map_or(&[][..], Vec::as_slice) {
        let Some((t_host, t_owner, _)) = go_parts(&t.names[i].0) else {
            continue;
        };
        if t_host == host && t_owner != owner && !established {
            let (mine, theirs) = (owner.to_ascii_lowercase(), t_owner.to_ascii_lowercase());
            // Short owners are one or two edits from many others.
            let close = if theirs.len() < 6 { 1 } else { 2 };
            let reason = if osa(&theirs, &mine) <= close
                || (theirs.len() >= 4 && mine.contains(&theirs))
            {
                format!("look-alike owner of {}", t.names[i].0)
            } else if t.names[i].1 <= OTHER_OWNER_RANK
                && t.go_distinctive.contains(&repo_key.to_ascii_lowercase())
            {
                format!(
                    "repository of {} published under another owner (a name no other popular module uses)",
                    t.names[i].0
                )
            } else {
                continue;
            };
            return verdict(i, reason);
        }
        if t_host != host && t_owner == owner && osa(t_host, host) <= 2 {
            return verdict(i, format!("look-alike host of {}", t.names[i].0));
        }
    }
    None
}

/// A popular name ending in a language word, that word split off and another word put in
/// front (`easy-day-js` for `dayjs`). A word in front of a name as it is written
/// (`select-react-redux`) or split elsewhere (`gnosis-date-parser`) names wrappers and forks
/// as often as not (a long name ending in a language word aside: see `word_in_front`).
fn word_added(t: &Targets, name: &str) -> Option<NameVerdict> {
    if scoped(name).is_some() {
        return None;
    }
    let parts: Vec<&str> = name.split(['-', '_', '.']).collect();
    if parts.len() < 3 || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let end = parts.len();
    if !LANGUAGE_WORDS.contains(&parts[end - 1]) {
        return None;
    }
    // Leaving at least one word in front (the whole name is the separator check's).
    for start in 1..end - 1 {
        let run = &parts[start..end];
        let key = run.concat();
        if key.chars().count() < MIN_WORD_RUN_LEN {
            continue;
        }
        let Some(&i) = t.squashed.get(&key) else {
            continue;
        };
        let (target, rank) = (&t.names[i].0, t.names[i].1);
        if rank > WORD_ADDED_RANK {
            continue;
        }
        if words(target).len() == run.len() {
            continue;
        }
        let reason = format!("{target} with its language word split off and a word added in front");
        return Some(typosquat_of(name, target, reason));
    }
    None
}

/// A name of the most popular ones (up to [`WEAK_EDIT_RANK`], at least four letters), or
/// any target of [`DISTINCTIVE_WORDS`] words or more, followed only by words that name a
/// platform, a build or a release rather than a purpose (`requests-darwin-lite`,
/// `urllib3-fixed`, `pillow-simd`, `eslint-config-airbnb-compat`): a package presenting
/// itself as a variant of the popular one. Companion packages name what they add
/// (`requests-toolbelt`, `pytest-cov`).
fn generic_words_added(t: &Targets, name: &str) -> Option<NameVerdict> {
    if scoped(name).is_some() {
        return None;
    }
    let parts: Vec<&str> = name.split(['-', '_', '.']).collect();
    if parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    for end in (1..parts.len()).rev() {
        let added = &parts[end..];
        if !added.iter().all(|w| GENERIC_WORDS.contains(w)) {
            break;
        }
        let head = &name[..parts[..end].iter().map(|p| p.len() + 1).sum::<usize>() - 1];
        let Some(&i) = t.squashed.get(&squash(head)) else {
            continue;
        };
        let (target, rank) = (&t.names[i].0, t.names[i].1);
        // A name of three words or more is distinctive enough at any target rank
        // (`eslint-config-airbnb-compat`): no other project's name shares its words.
        let distinctive = words(target).len() >= DISTINCTIVE_WORDS && rank as usize <= TARGET_NAMES;
        if (rank > WEAK_EDIT_RANK && !distinctive) || squash(target).chars().count() < MIN_EDIT_LEN
        {
            continue;
        }
        let how = if rank > WEAK_EDIT_RANK {
            "a listed name of three words or more"
        } else {
            "a very popular package"
        };
        return Some(typosquat_of(
            name,
            target,
            format!(
                "{target} with words naming a platform or release added (-{}): an unofficial variant of {how}",
                added.join("-")
            ),
        ));
    }
    None
}

/// Words naming a platform, a build or a release, not a purpose (see
/// `generic_words_added`). `nightly` and `beta` are left out: projects publish those
/// channels themselves.
const GENERIC_WORDS: &[&str] = &[
    "compat", "darwin", "dev", "fix", "fixed", "latest", "light", "linux", "lite", "mac", "macos",
    "new", "official", "osx", "patched", "simd", "update", "updated", "win", "win32", "win64",
    "windows",
];

/// A name of two words or more ending in a language word, of the first
/// [`WORD_ADDED_RANK`], with one word put in front of it as it is written
/// (`plain-crypto-js` for `crypto-js`), when the name is at least [`MIN_WORD_IN_FRONT_LEN`]
/// long without separators. Shorter ones are parts other projects build their names on
/// (`edge-core-js`, sampled from the registry, beside `core-js`).
fn word_in_front(t: &Targets, name: &str) -> Option<NameVerdict> {
    if scoped(name).is_some() {
        return None;
    }
    let parts: Vec<&str> = name.split(['-', '_', '.']).collect();
    if parts.len() < 3
        || parts.iter().any(|p| p.is_empty())
        || !LANGUAGE_WORDS.contains(&parts[parts.len() - 1])
    {
        return None;
    }
    let key = parts[1..].concat();
    let &i = t.squashed.get(&key)?;
    let (target, rank) = (&t.names[i].0, t.names[i].1);
    // The target's own words, only one added: a word split elsewhere is `word_added`'s.
    if rank > WORD_ADDED_RANK
        || words(target).len() != parts.len() - 1
        || key.chars().count() < MIN_WORD_IN_FRONT_LEN
    {
        return None;
    }
    Some(typosquat_of(
        name,
        target,
        format!(
            "{target} with a word added in front ({}-): a name ending in a language word, kept as it is written",
            parts[0]
        ),
    ))
}

/// A listed one-word name whose glued abbreviation is spelt out in place (`fairsequence`
/// for `fairseq`): read aloud, it is the same name. Written apart (`plugin-library`, sampled
/// from the registry, beside `pluginlib`) it is a description of a project of its own.
fn abbreviation_spelt_out(t: &Targets, name: &str) -> Option<NameVerdict> {
    if squash(name) != name {
        return None;
    }
    for (short, full) in ABBREVIATIONS {
        let Some(head) = name.strip_suffix(full) else {
            continue;
        };
        if head.chars().count() < MIN_ABBREVIATED_HEAD_LEN {
            continue;
        }
        let Some(&i) = t.squashed.get(&format!("{head}{short}")) else {
            continue;
        };
        let (target, rank) = (&t.names[i].0, t.names[i].1);
        if rank as usize > TARGET_NAMES {
            continue;
        }
        return Some(typosquat_of(
            name,
            target,
            format!("{target} with its abbreviation {short} spelt out ({full})"),
        ));
    }
    None
}

/// Abbreviations names end in, and the words they stand for (see `abbreviation_spelt_out`).
const ABBREVIATIONS: &[(&str, &str)] = &[
    ("app", "application"),
    ("async", "asynchronous"),
    ("auth", "authentication"),
    ("conf", "config"),
    ("config", "configuration"),
    ("crypto", "cryptography"),
    ("db", "database"),
    ("dev", "development"),
    ("doc", "document"),
    ("docs", "documents"),
    ("env", "environment"),
    ("fmt", "format"),
    ("gen", "generator"),
    ("img", "image"),
    ("info", "information"),
    ("lang", "language"),
    ("lib", "library"),
    ("msg", "message"),
    ("num", "number"),
    ("pkg", "package"),
    ("proto", "protocol"),
    ("req", "request"),
    ("seq", "sequence"),
    ("stats", "statistics"),
    ("str", "string"),
    ("util", "utility"),
    ("utils", "utilities"),
];

/// One of the first [`WEAK_EDIT_RANK`] names ending in its version number (`beautifulsoup4`,
/// `psycopg2`), written without it, and one of the first [`MOST_POPULAR_RANK`] names added
/// after a separator (`beautifulsoup-requests`): the name people say for the package,
/// presented as its bridge to another very popular one. A listed name written as it is
/// followed by a popular one is a project's own companion as often as not
/// (`graphene-pandas`, sampled from the registry).
fn unversioned_with_popular(t: &Targets, name: &str) -> Option<NameVerdict> {
    if scoped(name).is_some() {
        return None;
    }
    let (head, tail) = name.split_once(['-', '_', '.'])?;
    let &j = t.squashed.get(tail)?;
    if t.names[j].1 > MOST_POPULAR_RANK
        || t.names[j].0 != tail
        || head.chars().count() < MIN_EDIT_LEN
    {
        return None;
    }
    for digit in '0'..='9' {
        let versioned = format!("{head}{digit}");
        let Some(&i) = t.squashed.get(&versioned) else {
            continue;
        };
        let (target, rank) = (&t.names[i].0, t.names[i].1);
        if rank <= WEAK_EDIT_RANK && *target == versioned {
            return Some(typosquat_of(
                name,
                target,
                format!(
                    "{target} without its version number ({head}) and the popular name {tail} added: a package presenting itself as {target} for {tail}"
                ),
            ));
        }
    }
    None
}

/// A long name of the most popular ones misspelt beyond two edits but kept recognisable:
/// its first letter and its last three kept, at most three edits in between (`mplatlib` for
/// `matplotlib`). A number after the name is set aside. Not for Go paths: one owner's
/// modules share host, owner and endings (`copystructure`, `mapstructure`).
fn garbled(t: &Targets, name: &str) -> Option<NameVerdict> {
    let name_core = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let len = name_core.chars().count();
    if len < MIN_GARBLED_LEN {
        return None;
    }
    for &i in t.by_ends.get(&ends_key(name_core)).into_iter().flatten() {
        let target = &t.names[i as usize].0;
        if let Some(d) = osa_bounded(name_core, target, 3)
            && d == 3
        {
            return Some(typosquat_of(
                name,
                target,
                format!("three edits from {target}, keeping its first letter and its ending"),
            ));
        }
    }
    None
}

/// A long one-word name of the most popular ones with its middle rewritten: its first two
/// characters and its last four kept, four edits in between, no longer than the name
/// (`maratlib` for `matplotlib`). Only targets whose ending few listed names share (see
/// [`COMMON_ENDING`]); a number after the name is set aside.
fn rewritten_middle(t: &Targets, name: &str) -> Option<NameVerdict> {
    let name_core = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let len = name_core.chars().count();
    if len < MIN_GARBLED_LEN || squash(name_core) != name_core {
        return None;
    }
    for &i in t
        .by_head_tail
        .get(&head_tail_key(name_core))
        .into_iter()
        .flatten()
    {
        let target = &t.names[i as usize].0;
        if len <= target.chars().count() && osa_bounded(name_core, target, 4) == Some(4) {
            return Some(typosquat_of(
                name,
                target,
                format!(
                    "{target} with its middle rewritten: its first two letters and its ending ({}) kept, four edits in between",
                    tail(target, 4)
                ),
            ));
        }
    }
    None
}

/// A name of the most popular ones (up to [`WEAK_EDIT_RANK`]) with two of its vowels
/// changed and nothing else (`chokader` for `chokidar`): it reads and sounds alike. One
/// vowel changed is an edit the deletion index finds.
fn vowels_changed(t: &Targets, name: &str) -> Option<NameVerdict> {
    if name.chars().count() < MIN_VOWELS_CHANGED_LEN {
        return None;
    }
    for &i in t.by_consonants.get(&consonants(name)).into_iter().flatten() {
        let target = &t.names[i as usize].0;
        let changed = name
            .chars()
            .zip(target.chars())
            .filter(|(a, b)| a != b)
            .count();
        if changed == 2 {
            return Some(NameVerdict {
                name: name.to_string(),
                risk: Risk::Typosquat,
                distance: Some(2),
                nearest_known: Some(target.clone()),
                reason: format!("two vowels of {target} changed"),
            });
        }
    }
    None
}

/// PyPI: a listed one-word name with a letter appended (`pytorchb`, `fairseqn`), at any
/// rank when the result is at least [`MIN_END_EDIT_LEN`] long (up to [`WEAK_EDIT_RANK`]
/// the edit check finds it at any length). Not an `s` (a plural names a project of its
/// own), a digit (a successor or a port) or the last letter again (a repetition, the edit
/// check's).
fn letter_appended(t: &Targets, name: &str) -> Option<NameVerdict> {
    if !t.is_pypi || name.chars().count() < MIN_END_EDIT_LEN {
        return None;
    }
    let mut chars = name.chars();
    let last = chars.next_back()?;
    let head = chars.as_str();
    if !last.is_ascii_lowercase() || last == 's' || head.ends_with(last) || squash(head) != head {
        return None;
    }
    let &i = t.squashed.get(head)?;
    let target = &t.names[i].0;
    if target != head {
        return None;
    }
    Some(typosquat_of(
        name,
        target,
        format!(
            "{target} with a letter appended ({last}): a name of {MIN_END_EDIT_LEN} characters or more with a letter past its end"
        ),
    ))
}

/// PyPI: `name` is `target`, ranked at most [`INSERTED_INSIDE_RANK`], with one letter
/// inserted between two of its characters, and at least [`MIN_INSERTED_LEN`] long.
fn pypi_inserted_inside(t: &Targets, name: &str, target: &str, rank: u32) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (name.chars().collect(), target.chars().collect());
    if !t.is_pypi
        || rank > INSERTED_INSIDE_RANK
        || a.len() < MIN_INSERTED_LEN
        || a.len() != b.len() + 1
    {
        return false;
    }
    let at = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .unwrap_or(b.len());
    at > 0 && at < b.len() && a[at].is_ascii_alphabetic() && a[at + 1..] == b[at..]
}

/// PyPI: `name` is `target` (one word, no number at its end) with its last letter dropped,
/// and at least [`MIN_END_EDIT_LEN`] long (`aioconsol` for `aioconsole`).
fn pypi_cut_short(t: &Targets, name: &str, target: &str) -> bool {
    t.is_pypi
        && !target.ends_with(|c: char| c.is_ascii_digit())
        && name.chars().count() >= MIN_END_EDIT_LEN
        && squash(target) == target
        && target.chars().count() == name.chars().count() + 1
        && target.starts_with(name)
}

/// How a name sounds, roughly: separators dropped, `ph` as `f`, `z` as `s`, `k` and `q` as
/// `c`, every run of vowels (and `y`) one `*`, doubled letters single.
fn sound(name: &str) -> String {
    let plain = squash(name).replace("ph", "f");
    let mut out = String::with_capacity(plain.len());
    for c in plain.chars() {
        let c = match c {
            'z' => 's',
            'k' | 'q' => 'c',
            c if is_vowel(c) || c == 'y' => '*',
            c => c,
        };
        if !out.ends_with(c) {
            out.push(c);
        }
    }
    out
}

/// The consonants of a name as written, doubled ones single: what [`sound`] maps.
fn sound_letters(name: &str) -> String {
    let mut out = String::new();
    for c in squash(name).chars() {
        if !is_vowel(c) && c != 'y' && !out.ends_with(c) {
            out.push(c);
        }
    }
    out
}

/// A name with every vowel masked: names differing only in vowels share it.
fn consonants(name: &str) -> String {
    name.chars()
        .map(|c| if is_vowel(c) { '*' } else { c })
        .collect()
}

/// The last `n` characters of a name.
fn tail(name: &str, n: usize) -> String {
    let mut chars: Vec<char> = name.chars().rev().take(n).collect();
    chars.reverse();
    chars.into_iter().collect()
}

/// The first two characters and the last four of a name (see `rewritten_middle`).
fn head_tail_key(name: &str) -> String {
    name.chars().take(2).collect::<String>() + &tail(name, 4)
}

/// The first character and the last three of a name (see `garbled`).
fn ends_key(name: &str) -> String {
    let tail: Vec<char> = name.chars().rev().take(3).collect();
    name.chars().take(1).chain(tail.into_iter().rev()).collect()
}

/// The name's characters in sorted order: a name with two characters swapped has the same.
fn sorted_letters(name: &str) -> String {
    let mut chars: Vec<char> = name.chars().collect();
    chars.sort_unstable();
    chars.into_iter().collect()
}

/// The name without separators.
fn squash(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '-' | '_' | '.'))
        .collect()
}

/// The name as it looks: look-alike letters and digits folded to one form (`I`, `1` -> `l`,
/// `0` -> `o`, `rn` -> `m`, `vv` -> `w`), Unicode confusables to ASCII, lower case.
fn skeleton(raw: &str) -> String {
    let plain = unconfuse(raw);
    let folded: String = plain
        .chars()
        .map(|c| match c {
            'I' | '1' | '|' => 'l',
            '0' => 'o',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    folded.replace("rn", "m").replace("vv", "w")
}

/// Unicode look-alikes replaced by the ASCII letters they imitate; accents dropped.
fn unconfuse(raw: &str) -> String {
    raw.nfkd()
        .filter(|c| !is_combining_mark(*c))
        .map(|c| match c {
            'а' | 'α' => 'a',
            'с' | 'ϲ' => 'c',
            'ԁ' => 'd',
            'е' | 'ε' => 'e',
            'һ' | 'հ' => 'h',
            'і' | 'ι' | 'ı' => 'i',
            'ј' => 'j',
            'κ' | 'к' => 'k',
            'ӏ' | 'ⅼ' => 'l',
            'о' | 'ο' | 'օ' => 'o',
            'р' | 'ρ' => 'p',
            'ԛ' => 'q',
            'ѕ' => 's',
            'τ' | 'т' => 't',
            'υ' | 'ս' => 'u',
            'ν' | 'ѵ' => 'v',
            'ԝ' | 'ω' => 'w',
            'х' | 'χ' => 'x',
            'у' | 'γ' => 'y',
            'А' | 'Α' => 'A',
            'В' | 'Β' => 'B',
            'Е' | 'Ε' => 'E',
            'К' | 'Κ' => 'K',
            'М' | 'Μ' => 'M',
            'Н' | 'Η' => 'H',
            'О' | 'Ο' => 'O',
            'Р' | 'Ρ' => 'P',
            'С' => 'C',
            'Т' | 'Τ' => 'T',
            'Х' | 'Χ' => 'X',
            c => c,
        })
        .collect()
}

/// The words of a name, in order.
fn words(name: &str) -> Vec<&str> {
    name.split(['-', '_', '.', '/', '@'])
        .filter(|w| !w.is_empty())
        .collect()
}

/// The words of a multi-word name in sorted order.
fn words_key(name: &str) -> Option<String> {
    let mut words = words(name);
    if words.len() < 2 {
        return None;
    }
    words.sort_unstable();
    Some(words.join("-"))
}

/// Words naming a language or runtime, glued to popular names (`dayjs`, `pyyaml`).
const LANGUAGE_WORDS: &[&str] = &["js", "node", "py", "python"];

const PREFIXES: &[&str] = &[
    "python3-", "python-", "python", "py3-", "py-", "py", "node-", "node", "js-",
];
/// Language and registry words squatters add (`mysqljs`, `twilio-npm`, `python3-dateutil`);
/// generic ones (`-utils`, `-cli`, `-lite`, `2`) name most legitimate companion packages.
const SUFFIXES: &[&str] = &[
    "-python3", "-python", "-py3", "-py", "py", "-nodejs", "-node", "-js", ".js", "js", "-npm",
    "npm", "-plus",
];

/// The name with one affix removed at either end, or both (each at least
/// [`MIN_CORE_LEN`] long).
fn cores(ecosystem: Ecosystem, name: &str) -> Vec<String> {
    if ecosystem == Ecosystem::Go || scoped(name).is_some() {
        return Vec::new();
    }
    let ok = |s: &str| s.chars().count() >= MIN_CORE_LEN;
    let mut out = Vec::new();
    let mut heads = vec![name];
    for p in PREFIXES {
        if let Some(rest) = name.strip_prefix(p)
            && ok(rest)
        {
            heads.push(rest);
        }
    }
    for head in heads {
        if head != name {
            out.push(head.to_string());
        }
        for s in SUFFIXES {
            if let Some(rest) = head.strip_suffix(s)
                && ok(rest)
            {
                out.push(rest.trim_end_matches(['-', '.', '_']).to_string());
            }
        }
    }
    out.retain(|c| ok(c));
    out.dedup();
    out
}

/// Optimal string alignment distance (edits: insert, delete, substitute, swap neighbours).
pub fn osa(a: &str, b: &str) -> u32 {
    osa_bounded(a, b, u32::MAX).unwrap_or(u32::MAX)
}

/// [`osa`] when at most `max`, else None (stops as soon as the bound is passed).
fn osa_bounded(a: &str, b: &str, max: u32) -> Option<u32> {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let (n, m) = (a.len(), b.len());
    if n.abs_diff(m) > max as usize {
        return None;
    }
    let mut prev2 = vec![0u32; m + 1];
    let mut prev: Vec<u32> = (0..=m as u32).collect();
    let mut cur = vec![0u32; m + 1];
    for i in 1..=n {
        cur[0] = i as u32;
        let mut row_min = cur[0];
        for j in 1..=m {
            let cost = u32::from(a[i - 1] != b[j - 1]);
            let mut v = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(prev2[j - 2] + 1);
            }
            cur[j] = v;
            row_min = row_min.min(v);
        }
        if row_min > max {
            return None;
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    (prev[m] <= max).then_some(prev[m])
}

/// A multi-word target with some of its words made plural or singular by an `s`
/// (`sphinx-rtd-themes`, `importlibs-resource`): the same package by its description, not a
/// name of its own. Words of at least [`MIN_EDIT_LEN`] letters; a one-word name is left to
/// the other checks (`pyvers` and `pyverbs` are two projects).
fn number_changed(t: &Targets, name: &str) -> Option<NameVerdict> {
    let mine = words(name);
    if mine.len() < 2 || mine.len() > MAX_NUMBER_WORDS || scoped(name).is_some() {
        return None;
    }
    let toggles =
        |w: &str| w.chars().count() >= MIN_EDIT_LEN && w.chars().all(|c| c.is_ascii_alphabetic());
    // Every choice of words to toggle, but none.
    for mask in 1u32..1 << mine.len() {
        let mut variant = String::with_capacity(name.len() + mine.len());
        let mut ok = true;
        for (k, w) in mine.iter().enumerate() {
            if mask & 1 << k == 0 {
                variant.push_str(w);
            } else if !toggles(w) {
                ok = false;
                break;
            } else if let Some(singular) = w.strip_suffix('s') {
                if singular.ends_with('s') {
                    ok = false;
                    break;
                }
                variant.push_str(singular);
            } else {
                variant.push_str(w);
                variant.push('s');
            }
        }
        if !ok {
            continue;
        }
        let Some(&i) = t.squashed.get(&variant) else {
            continue;
        };
        let (target, rank) = (&t.names[i].0, t.names[i].1);
        if rank as usize > TARGET_NAMES || words(target).len() != mine.len() {
            continue;
        }
        return Some(typosquat_of(
            name,
            target,
            format!("words of {target} made plural or singular"),
        ));
    }
    None
}

/// Single edits typing errors rarely make, or long-tail names often are: a character
/// replaced by one neither next to it on the keyboard, alike, nor a vowel for a vowel, or
/// one added without repeating a neighbour (`awaiter`, `clifft` are words and names).
fn is_weak_edit(kind: &str) -> bool {
    matches!(
        kind,
        "character substituted" | "character inserted" | "keyboard-adjacent character inserted"
    )
}

/// Names the single edit turning `target` into `name`.
fn edit_kind(name: &str, target: &str) -> &'static str {
    let a: Vec<char> = name.chars().collect();
    let b: Vec<char> = target.chars().collect();
    let first = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    if a.len() + 1 == b.len() {
        return "character omitted";
    }
    if a.len() == b.len() + 1 {
        let extra = a[first];
        let before = first.checked_sub(1).map(|i| a[i]);
        let after = a.get(first + 1).copied();
        if before == Some(extra) || after == Some(extra) {
            return "character repeated";
        }
        // A finger catching the key beside the one meant (`sqliter`): an extra character
        // next to a neighbour on the keyboard.
        if [before, after]
            .into_iter()
            .flatten()
            .any(|n| keyboard_adjacent(n, extra))
        {
            return "keyboard-adjacent character inserted";
        }
        return "character inserted";
    }
    if first + 1 < a.len() && a[first] == b[first + 1] && a[first + 1] == b[first] {
        return "neighbouring characters swapped";
    }
    match (a.get(first), b.get(first)) {
        (Some(&x), Some(&y)) if keyboard_adjacent(x, y) => {
            "keyboard-adjacent character substituted"
        }
        (Some(&x), Some(&y)) if visually_similar(x, y) => "visually similar character substituted",
        // One vowel for another (`matplatlib`) reads alike and is a common misspelling.
        (Some(&x), Some(&y)) if is_vowel(x) && is_vowel(y) => "vowel substituted",
        _ => "character substituted",
    }
}

fn is_vowel(c: char) -> bool {
    matches!(c, 'a' | 'e' | 'i' | 'o' | 'u')
}

fn visually_similar(a: char, b: char) -> bool {
    const GROUPS: &[&str] = &["il1|", "o0", "s5", "z2", "b6", "g9q", "uv", "mn"];
    GROUPS.iter().any(|g| g.contains(a) && g.contains(b))
}

/// Neighbours on a QWERTY keyboard.
fn keyboard_adjacent(a: char, b: char) -> bool {
    const ROWS: [&str; 4] = ["1234567890-", "qwertyuiop", "asdfghjkl", "zxcvbnm"];
    // Each row's offset to the left edge, in quarter keys.
    const OFFSET: [i32; 4] = [0, 2, 3, 5];
    let pos = |c: char| {
        ROWS.iter().enumerate().find_map(|(r, row)| {
            row.find(c)
                .map(|col| (r as i32, col as i32 * 4 + OFFSET[r]))
        })
    };
    match (pos(a), pos(b)) {
        (Some((ra, xa)), Some((rb, xb))) => {
            (ra == rb && (xa - xb).abs() == 4) || ((ra - rb).abs() == 1 && (xa - xb).abs() <= 3)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::popular::PopularList;

    fn detector() -> Detector {
        let list = |e, names: &[&str]| PopularList {
            ecosystem: e,
            header: vec![],
            names: names.iter().map(|s| s.to_string()).collect(),
        };
        Detector::new(KnownNames::from_lists([
            list(
                Ecosystem::Pypi,
                &[
                    "requests",
                    "attrs",
                    "cattrs",
                    "python-dateutil",
                    "jellyfish",
                    "colorama",
                    "matplotlib",
                    "beautifulsoup4",
                    "toml",
                    "tomli",
                ],
            ),
            list(
                Ecosystem::Npm,
                &[
                    "lodash",
                    "cross-env",
                    "@typescript-eslint/eslint-plugin",
                    "react",
                    "@babel/core",
                    "mongoose",
                ],
            ),
            list(
                Ecosystem::Go,
                &[
                    "github.com/stretchr/testify",
                    "github.com/boltdb/bolt",
                    "github.com/sirupsen/logrus",
                ],
            ),
        ]))
    }

    fn check(e: Ecosystem, name: &str) -> NameVerdict {
        detector().analyse(e, name, &HashSet::new(), false).unwrap()
    }

    #[test]
    fn popular_neighbours_are_both_known() {
        for n in ["attrs", "cattrs", "toml", "tomli"] {
            assert_eq!(check(Ecosystem::Pypi, n).risk, Risk::Known, "{n}");
        }
    }

    #[test]
    fn techniques_are_named() {
        let cases = [
            (Ecosystem::Pypi, "reqeusts", "requests", "swapped"),
            (Ecosystem::Pypi, "requets", "requests", "omitted"),
            (Ecosystem::Pypi, "requestss", "requests", "repeated"),
            (Ecosystem::Pypi, "requesrs", "requests", "keyboard"),
            (Ecosystem::Pypi, "jeIlyfish", "jellyfish", "visually"),
            (
                Ecosystem::Pypi,
                "python3-dateutil",
                "python-dateutil",
                "affix",
            ),
            (
                Ecosystem::Pypi,
                "dateutil-python",
                "python-dateutil",
                "reordered",
            ),
            (Ecosystem::Pypi, "colourama", "colorama", "inserted"),
            (
                Ecosystem::Pypi,
                "beautiful-soup4",
                "beautifulsoup4",
                "separator",
            ),
            (Ecosystem::Pypi, "requests-py", "requests", "affix"),
            (Ecosystem::Npm, "crossenv", "cross-env", "separator"),
            (Ecosystem::Npm, "lodash-js", "lodash", "affix"),
            (
                Ecosystem::Npm,
                "@typescript_eslinter/eslint-plugin",
                "@typescript-eslint/eslint-plugin",
                "scope",
            ),
            (Ecosystem::Npm, "babel-core", "@babel/core", "scope"),
            (Ecosystem::Npm, "mongose", "mongoose", "omitted"),
            (
                Ecosystem::Go,
                "github.com/boltdb-go/bolt",
                "github.com/boltdb/bolt",
                "owner",
            ),
            (
                Ecosystem::Go,
                "github.com/Sirupsen/logrus",
                "github.com/sirupsen/logrus",
                "case",
            ),
            (
                Ecosystem::Go,
                "githb.com/stretchr/testify",
                "github.com/stretchr/testify",
                "host",
            ),
        ];
        for (e, name, target, technique) in cases {
            let v = check(e, name);
            assert_eq!(v.risk, Risk::Typosquat, "{name}: {v:?}");
            assert_eq!(v.nearest_known.as_deref(), Some(target), "{name}: {v:?}");
            assert!(v.reason.contains(technique), "{name}: {v:?}");
            assert!(v.distance.is_some_and(|d| d > 0), "{name}");
        }
    }

    #[test]
    fn unicode_confusables_are_typosquats() {
        let v = check(Ecosystem::Pypi, "rеquests"); // Cyrillic е
        assert_eq!(v.risk, Risk::Typosquat);
        assert_eq!(v.nearest_known.as_deref(), Some("requests"));
        assert!(v.reason.contains("Unicode"));
        assert!(
            detector()
                .analyse(Ecosystem::Pypi, "日本", &HashSet::new(), false)
                .is_err()
        );
    }

    #[test]
    fn unrelated_and_internal_names() {
        assert_eq!(
            check(Ecosystem::Pypi, "my-unrelated-tool").risk,
            Risk::Clear
        );
        assert_eq!(
            check(Ecosystem::Go, "github.com/stretchr/testify/assert").risk,
            Risk::Known
        );
        let d = detector();
        let v = d
            .analyse(Ecosystem::Pypi, "requests", &HashSet::new(), true)
            .unwrap();
        assert_eq!(v.risk, Risk::DependencyConfusion);
        let v = d
            .analyse(Ecosystem::Pypi, "acme-billing", &HashSet::new(), true)
            .unwrap();
        assert_eq!(v.risk, Risk::Clear);
        let tracked: HashSet<String> = ["acme-billing".to_string()].into();
        let v = d
            .analyse(Ecosystem::Pypi, "acme-billing", &tracked, false)
            .unwrap();
        assert_eq!(v.risk, Risk::Known);
    }

    #[test]
    fn deletions_reach_every_shorter_string() {
        let mut seen = std::collections::BTreeSet::new();
        for_each_deletion("abcd", 2, |k| {
            seen.insert(k.to_string());
        });
        let expected = [
            "abcd", "bcd", "acd", "abd", "abc", "cd", "bd", "bc", "ad", "ac", "ab",
        ];
        assert_eq!(seen, expected.iter().map(|s| s.to_string()).collect());
        let mut one = Vec::new();
        for_each_deletion("éa", 1, |k| one.push(k.to_string()));
        assert_eq!(one, ["éa", "a", "é"]);
    }

    fn list(e: Ecosystem, names: &[&str]) -> PopularList {
        PopularList {
            ecosystem: e,
            header: vec![],
            names: names.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn rules_detector() -> Detector {
        Detector::new(KnownNames::from_lists([
            list(
                Ecosystem::Npm,
                &[
                    "prettier",
                    "eslint",
                    "openai",
                    "html-tags",
                    "react",
                    "lodash",
                    "ws",
                    "jws",
                    "@types/ws",
                    "@babel/core",
                    "@prettier/plugin-xml",
                    "@eslint/js",
                    "@azure/core-auth",
                    "@typescript-eslint/parser",
                ],
            ),
            list(
                Ecosystem::Go,
                &[
                    "github.com/cenkalti/backoff/v4",
                    "go.etcd.io/etcd/client/v3",
                    "gopkg.in/yaml.v3",
                    "github.com/pkg/errors",
                    "github.com/mitchellh/mapstructure",
                    "github.com/alpha/prometheus-client",
                    "github.com/beta/prometheus-client",
                ],
            ),
        ]))
    }

    fn verdict_of(d: &Detector, e: Ecosystem, name: &str) -> NameVerdict {
        d.analyse(e, name, &HashSet::new(), false).unwrap()
    }

    #[test]
    fn npm_weak_edits_past_the_most_popular_need_a_coined_spelling() {
        let late = ["js-sha3", "jest-each", "aioconsole", "zdaemon", "ethers"];
        let common = ["test-utils", "daemon-tools"];
        let npm = ranked(Ecosystem::Npm, &common, WEAK_EDIT_RANK as usize, &late);
        // A substitution into a spelling no listed name uses.
        let v = verdict_of(&npm, Ecosystem::Npm, "js-sha7");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("js-sha3"));
        assert!(v.reason.contains("no listed npm name uses"), "{v:?}");
        // `test` is a word other packages use: a name of its own.
        let v = verdict_of(&npm, Ecosystem::Npm, "test-each");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
        // A name cut short into no word is a look-alike; into a word, its own.
        let v = verdict_of(&npm, Ecosystem::Npm, "aioconsol");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(
            v.reason.contains("character omitted of aioconsole"),
            "{v:?}"
        );
        assert_eq!(verdict_of(&npm, Ecosystem::Npm, "daemon").risk, Risk::Clear);
        // An affix around a coined misspelling of a less popular name.
        let v = verdict_of(&npm, Ecosystem::Npm, "ethetsjs");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(
            v.reason
                .contains("affix added to a misspelling of ethers (ethets,"),
            "{v:?}"
        );
        // PyPI names are too often one glued word for the test: unchanged there. A long
        // name cut short is a look-alike there by its length (see `MIN_END_EDIT_LEN`).
        let pypi = ranked(Ecosystem::Pypi, &common, WEAK_EDIT_RANK as usize, &late);
        assert_eq!(
            verdict_of(&pypi, Ecosystem::Pypi, "js-sha7").risk,
            Risk::Clear
        );
        let v = verdict_of(&pypi, Ecosystem::Pypi, "aioconsol");
        assert!(
            v.reason.contains("last letter of aioconsole dropped"),
            "{v:?}"
        );
        assert_eq!(
            verdict_of(&pypi, Ecosystem::Pypi, "daemon").risk,
            Risk::Clear
        );
    }

    #[test]
    fn npm_separator_variants_past_the_targets_are_as_old_as_their_neighbour() {
        let d = ranked(Ecosystem::Npm, &["cross-env"], TARGET_NAMES, &["ansi_up"]);
        let v = verdict_of(&d, Ecosystem::Npm, "ansi-up");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
        let v = verdict_of(&d, Ecosystem::Npm, "crossenv");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(v.reason.starts_with("separator changed"), "{v:?}");
    }

    #[test]
    fn words_made_plural_or_singular_at_any_rank() {
        let late = ["sphinx-rtd-theme", "importlib-resources", "figlet"];
        let d = ranked(Ecosystem::Pypi, &[], WEAK_EDIT_RANK as usize, &late);
        let v = verdict_of(&d, Ecosystem::Pypi, "sphinx_rtd_themes");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(
            v.reason,
            "words of sphinx-rtd-theme made plural or singular"
        );
        let v = verdict_of(&d, Ecosystem::Pypi, "importlib-resource");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        let v = verdict_of(&d, Ecosystem::Pypi, "importlibs-resource");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("importlib-resources"));
        // A one-word name is left to the other checks.
        assert_eq!(verdict_of(&d, Ecosystem::Pypi, "figlets").risk, Risk::Clear);
    }

    #[test]
    fn two_vowels_changed_of_the_most_popular_names() {
        let d = ranked(
            Ecosystem::Npm,
            &["chokidar"],
            WEAK_EDIT_RANK as usize,
            &["mongoose"],
        );
        let v = verdict_of(&d, Ecosystem::Npm, "chokader");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.reason, "two vowels of chokidar changed");
        // Three vowels changed, or a less popular name: not this check's.
        assert_eq!(verdict_of(&d, Ecosystem::Npm, "chakuder").risk, Risk::Clear);
        assert_eq!(verdict_of(&d, Ecosystem::Npm, "mangeose").risk, Risk::Clear);
    }

    #[test]
    fn separators_changed_and_one_edit() {
        let late = ["npm-run-all", "babel-cli", "ts-jest"];
        let common = ["tstest-helpers"];
        let npm = ranked(Ecosystem::Npm, &common, WEAK_EDIT_RANK as usize, &late);
        let v = verdict_of(&npm, Ecosystem::Npm, "npmrunnall");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(
            v.reason
                .starts_with("separators of npm-run-all changed and character repeated, into"),
            "{v:?}"
        );
        let v = verdict_of(&npm, Ecosystem::Npm, "babelcl");
        assert_eq!(v.nearest_known.as_deref(), Some("babel-cli"), "{v:?}");
        // A number after the name names a successor (fillers without digits, so that `2`
        // is no listed word).
        let mut names: Vec<String> = (0..WEAK_EDIT_RANK)
            .map(|i| {
                format!("fill-{}", char::from(b'a' + (i % 26) as u8)).repeat(1 + i as usize / 26)
            })
            .collect();
        names.push("babel-cli".into());
        let lettered = Detector::new(KnownNames::from_lists([PopularList {
            ecosystem: Ecosystem::Npm,
            header: vec![],
            names,
        }]));
        let v = verdict_of(&lettered, Ecosystem::Npm, "babel-cli-2");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
        let v = verdict_of(&lettered, Ecosystem::Npm, "babelclii");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        // A word other packages use is a name of its own.
        let v = verdict_of(&npm, Ecosystem::Npm, "tstest");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
        // PyPI: only the first 500 names, with an edit typing makes.
        let pypi = ranked(Ecosystem::Pypi, &[], 2 * TWO_EDIT_RANK as usize, &late);
        let v = verdict_of(&pypi, Ecosystem::Pypi, "npmrunnall");
        assert_eq!(
            v.reason,
            "separators of npm-run-all changed and character repeated"
        );
        let pypi = ranked(Ecosystem::Pypi, &[], WEAK_EDIT_RANK as usize, &late);
        let v = verdict_of(&pypi, Ecosystem::Pypi, "npmrunnall");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
    }

    #[test]
    fn npm_names_spelt_as_they_sound() {
        let late = ["discord.js", "prettier"];
        let npm = ranked(Ecosystem::Npm, &[], WEAK_EDIT_RANK as usize, &late);
        let v = verdict_of(&npm, Ecosystem::Npm, "deezcord.js");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("discord.js"));
        assert!(v.reason.contains("spelt as it sounds"), "{v:?}");
        // Other vowels alone are no homophone.
        let v = verdict_of(&npm, Ecosystem::Npm, "prouter");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
        let pypi = ranked(Ecosystem::Pypi, &[], WEAK_EDIT_RANK as usize, &late);
        let v = verdict_of(&pypi, Ecosystem::Pypi, "deezcord.js");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
    }

    #[test]
    fn go_major_versions_are_versions() {
        let d = rules_detector();
        for (name, module, said) in [
            (
                "github.com/cenkalti/backoff/v5",
                "github.com/cenkalti/backoff/v4",
                "major version v5",
            ),
            (
                "github.com/cenkalti/backoff",
                "github.com/cenkalti/backoff/v4",
                "first major version",
            ),
            (
                "go.etcd.io/etcd/client/v2",
                "go.etcd.io/etcd/client/v3",
                "major version v2",
            ),
            ("gopkg.in/yaml.v1", "gopkg.in/yaml.v3", "major version v1"),
        ] {
            let v = verdict_of(&d, Ecosystem::Go, name);
            assert_eq!(v.risk, Risk::Known, "{name}: {v:?}");
            assert_eq!(v.nearest_known.as_deref(), Some(module), "{name}");
            assert!(v.reason.contains(said), "{name}: {}", v.reason);
        }
        // Another owner's repository of the same name is no version of it.
        let v = verdict_of(&d, Ecosystem::Go, "github.com/cenkalt1/backoff/v5");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(v.reason.contains("owner"), "{}", v.reason);
    }

    #[test]
    fn go_another_owner_only_for_distinctive_repositories() {
        let d = rules_detector();
        // Generic names: short, or held by several owners among the popular modules.
        for name in [
            "github.com/someone/errors",
            "github.com/gamma/prometheus-client",
        ] {
            let v = verdict_of(&d, Ecosystem::Go, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
        let v = verdict_of(&d, Ecosystem::Go, "github.com/someone/mapstructure");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(
            v.nearest_known.as_deref(),
            Some("github.com/mitchellh/mapstructure")
        );
        assert!(v.reason.contains("another owner"), "{}", v.reason);
        // A look-alike owner is judged whatever the repository's name.
        let v = verdict_of(&d, Ecosystem::Go, "github.com/pkgg/errors");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(v.reason.contains("look-alike owner"), "{}", v.reason);
        // Two modules of one owner are that owner's.
        let v = verdict_of(&d, Ecosystem::Go, "github.com/pkg/errorz");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
    }

    #[test]
    fn go_owners_of_the_most_starred_repositories_publish_their_own() {
        let d = Detector::new(KnownNames::from_lists([PopularList {
            ecosystem: Ecosystem::Go,
            header: vec![],
            names: vec!["github.com/gregjones/httpcache".to_string()],
        }]));
        // Hugo's owner lists no module, but its application is among the most starred.
        let v = verdict_of(&d, Ecosystem::Go, "github.com/gohugoio/httpcache");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
        let v = verdict_of(&d, Ecosystem::Go, "github.com/gohugoi0/httpcache");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
    }

    #[test]
    fn go_owners_of_popular_modules_publish_their_own() {
        let d = Detector::new(KnownNames::from_lists([PopularList {
            ecosystem: Ecosystem::Go,
            header: vec![],
            names: vec![
                "github.com/mitchellh/hashstructure".to_string(),
                "github.com/gohugoio/hugo".to_string(),
            ],
        }]));
        // The owner of a popular module: its copy of another repository is its own fork.
        let v = verdict_of(&d, Ecosystem::Go, "github.com/gohugoio/hashstructure");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
        // The same repository under an owner with nothing popular of its own still imitates.
        let v = verdict_of(&d, Ecosystem::Go, "github.com/someone/hashstructure");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        let v = verdict_of(&d, Ecosystem::Go, "github.com/mitchelh/hashstructure");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(v.reason.contains("look-alike owner"), "{}", v.reason);
    }

    #[test]
    fn go_another_owner_only_for_the_most_popular_modules() {
        let mut names = vec!["github.com/mitchellh/mapstructure".to_string()];
        names.extend(
            (names.len()..OTHER_OWNER_RANK as usize)
                .map(|i| format!("github.com/filler/module-{i}")),
        );
        names.push("github.com/gregjones/httpcache".to_string());
        let d = Detector::new(KnownNames::from_lists([PopularList {
            ecosystem: Ecosystem::Go,
            header: vec![],
            names,
        }]));
        let v = verdict_of(&d, Ecosystem::Go, "github.com/someone/mapstructure");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(v.reason.contains("another owner"), "{}", v.reason);
        // Past the limit, another owner's copy is a fork or a move (`gohugoio/httpcache`)...
        let v = verdict_of(&d, Ecosystem::Go, "github.com/gohugoio/httpcache");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
        // ...while a look-alike owner still imitates the module.
        let v = verdict_of(&d, Ecosystem::Go, "github.com/gregjone/httpcache");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(v.reason.contains("look-alike owner"), "{}", v.reason);
    }

    #[test]
    fn npm_own_scopes_are_their_organisations() {
        let d = rules_detector();
        for (name, scope) in [
            ("@prettier/html-tags", "@prettier"),
            ("@eslint/css", "@eslint"),
            ("@azure/openai", "@azure"),
            ("@babel/cor", "@babel"),
        ] {
            let v = verdict_of(&d, Ecosystem::Npm, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
            assert!(v.reason.contains(scope), "{name}: {}", v.reason);
            assert!(v.reason.contains("organisation"), "{name}: {}", v.reason);
        }
        // A popular name under some other scope is not flagged for that alone ...
        let v = verdict_of(&d, Ecosystem::Npm, "@acme/lodash");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
        // ... but under a look-alike of an established scope it is.
        let v = verdict_of(&d, Ecosystem::Npm, "@typescript_eslinter/eslint");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(v.reason.contains("@typescript-eslint"), "{}", v.reason);
    }

    #[test]
    fn npm_scoped_names_published_without_their_scope() {
        let d = Detector::new(KnownNames::from_lists([list(
            Ecosystem::Npm,
            &[
                "@azure/core-rest-pipeline",
                "@azure-rest/ai-document-translator",
                "@azure/core-auth",
                "@hono/zod-validator",
                "@capacitor/preferences",
                "@types/node-fetch-native",
            ],
        )]));
        for (name, target) in [
            ("core-rest-pipeline", "@azure/core-rest-pipeline"),
            (
                "ai-document-translator",
                "@azure-rest/ai-document-translator",
            ),
        ] {
            let v = verdict_of(&d, Ecosystem::Npm, name);
            assert_eq!(v.risk, Risk::Typosquat, "{name}: {v:?}");
            assert_eq!(v.nearest_known.as_deref(), Some(target), "{name}: {v:?}");
            assert!(v.reason.contains("dropped"), "{name}: {}", v.reason);
        }
        // Names of one or two words are everyday names many unrelated packages took first
        // (`preferences`, `zod-validator`), and `@types/<x>` names the package `x` itself.
        // (`core-auth` is an organisation scope's: see the next test.)
        for name in ["zod-validator", "preferences", "node-fetch-native"] {
            let v = verdict_of(&d, Ecosystem::Npm, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
    }

    #[test]
    fn npm_organisation_names_published_without_their_scope() {
        // The shipped organisation scopes count whatever the popular list holds.
        let d = Detector::new(KnownNames::from_lists([list(
            Ecosystem::Npm,
            &["@hono/zod-validator"],
        )]));
        for (name, target) in [
            // Two words, in the popular list (which the rule for listed names leaves to
            // names of three words).
            ("core-auth", "@azure/core-auth"),
            // Under the popular list's 10,000 downloads a month.
            ("communication-rooms", "@azure/communication-rooms"),
        ] {
            let v = verdict_of(&d, Ecosystem::Npm, name);
            assert_eq!(v.risk, Risk::Typosquat, "{name}: {v:?}");
            assert_eq!(v.nearest_known.as_deref(), Some(target), "{name}: {v:?}");
            assert!(
                v.reason.contains(&format!("scope of {target} dropped"))
                    && v.reason
                        .contains("organisation that publishes under its scope only"),
                "{name}: {}",
                v.reason
            );
        }
        // Scopes of other publishers (`@hono`, `@yamada-ui`: fewer packages or downloads,
        // or names shared with unscoped packages) and one-word names (`@azure/avocado`
        // beside the unscoped `avocado`) are not an organisation's alone.
        for name in ["zod-validator", "use-focus-visible", "avocado", "eventgrid"] {
            let v = verdict_of(&d, Ecosystem::Npm, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
        // A listed unscoped name is established in its own right.
        let d = Detector::new(KnownNames::from_lists([list(
            Ecosystem::Npm,
            &["lodash", "core-auth"],
        )]));
        let v = verdict_of(&d, Ecosystem::Npm, "core-auth");
        assert_eq!(v.risk, Risk::Known, "{v:?}");
        assert!(v.reason.contains("popular npm package"), "{}", v.reason);
    }

    #[test]
    fn npm_types_are_judged_by_the_typed_package() {
        let d = rules_detector();
        for (name, typed) in [("@types/jws", "jws"), ("@types/babel__core", "@babel/core")] {
            let v = verdict_of(&d, Ecosystem::Npm, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
            assert!(
                v.reason
                    .contains(&format!("type definitions for the known package {typed}")),
                "{name}: {}",
                v.reason
            );
        }
        let v = verdict_of(&d, Ecosystem::Npm, "@types/lodahs");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("lodash"));
        assert!(
            v.reason
                .contains("type definitions named after a look-alike of lodash")
        );
        let v = verdict_of(&d, Ecosystem::Npm, "@types/zz-private-thing");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
    }

    #[test]
    fn an_established_candidate_is_no_squat_of_its_neighbour() {
        // `lodahs` one swap from `lodash`: a squat, unless it is established itself.
        let mut names = vec!["lodash".to_string()];
        names.extend((1..TARGET_NAMES).map(|i| format!("filler-package-{i}")));
        let without = Detector::new(KnownNames::from_lists([PopularList {
            ecosystem: Ecosystem::Npm,
            header: vec![],
            names: names.clone(),
        }]));
        let v = verdict_of(&without, Ecosystem::Npm, "lodahs");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        names.push("lodahs".to_string());
        let with = Detector::new(KnownNames::from_lists([PopularList {
            ecosystem: Ecosystem::Npm,
            header: vec![],
            names,
        }]));
        let v = verdict_of(&with, Ecosystem::Npm, "lodahs");
        assert_eq!(v.risk, Risk::Known, "{v:?}");
        assert!(
            v.reason.contains("established npm package (rank 15001"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn weak_edits_only_against_the_most_popular_names() {
        let mut names = vec!["mkdirp".to_string(), "httpx".to_string()];
        names.extend((2..WEAK_EDIT_RANK as usize).map(|i| format!("filler-package-{i}")));
        names.push("jest-each".to_string());
        let d = Detector::new(KnownNames::from_lists([PopularList {
            ecosystem: Ecosystem::Pypi,
            header: vec![],
            names,
        }]));
        // A substitution typing rarely makes, against a less popular name: not enough.
        assert_eq!(
            verdict_of(&d, Ecosystem::Pypi, "test-each").risk,
            Risk::Clear
        );
        // Against a top name it is.
        let v = verdict_of(&d, Ecosystem::Pypi, "mkdirs");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(v.reason.contains("character substituted of mkdirp"));
        // A number after a name is a successor's name, not a typo.
        assert_eq!(verdict_of(&d, Ecosystem::Pypi, "httpx2").risk, Risk::Clear);
    }

    /// A list of `names` at ranks 1.., then filler names up to `filler_to`, then `late`.
    fn ranked(e: Ecosystem, names: &[&str], filler_to: usize, late: &[&str]) -> Detector {
        let mut all: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        all.extend((all.len()..filler_to).map(|i| format!("filler-package-{i}")));
        all.extend(late.iter().map(|s| s.to_string()));
        Detector::new(KnownNames::from_lists([PopularList {
            ecosystem: e,
            header: vec![],
            names: all,
        }]))
    }

    #[test]
    fn a_vowel_for_a_vowel_is_a_misspelling_at_any_rank() {
        let d = ranked(
            Ecosystem::Pypi,
            &["matplotlib"],
            WEAK_EDIT_RANK as usize,
            &["jest-each"],
        );
        let v = verdict_of(&d, Ecosystem::Pypi, "jest-eech");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(
            v.reason.contains("vowel substituted of jest-each"),
            "{}",
            v.reason
        );
        // Any other letter, past the most popular names: not enough.
        assert_eq!(
            verdict_of(&d, Ecosystem::Pypi, "jest-ebch").risk,
            Risk::Clear
        );
        // With an affix around it.
        let v = verdict_of(&d, Ecosystem::Pypi, "matplatlib-plus");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("matplotlib"));
        assert!(
            v.reason.contains("misspelling of matplotlib"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn an_extra_key_beside_a_neighbour_is_named() {
        assert_eq!(
            edit_kind("sqliter", "sqlite"),
            "keyboard-adjacent character inserted"
        );
        assert_eq!(edit_kind("sqlitex", "sqlite"), "character inserted");
        // Past the most popular names it stays too weak: `awaiter` is a word.
        let d = ranked(
            Ecosystem::Pypi,
            &["requests"],
            WEAK_EDIT_RANK as usize,
            &["waiter"],
        );
        assert_eq!(verdict_of(&d, Ecosystem::Pypi, "awaiter").risk, Risk::Clear);
        let v = verdict_of(&d, Ecosystem::Pypi, "requestrs");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(
            v.reason
                .contains("keyboard-adjacent character inserted of requests"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn a_language_word_split_off_with_a_word_in_front() {
        let d = ranked(
            Ecosystem::Npm,
            &["dayjs", "react-redux", "dateparser"],
            3,
            &[],
        );
        let v = verdict_of(&d, Ecosystem::Npm, "easy-day-js");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("dayjs"));
        assert!(v.reason.contains("language word split off"), "{}", v.reason);
        // A word in front of a name as written, or a name split elsewhere: wrappers, forks.
        for name in ["select-react-redux", "gnosis-date-parser", "my-dayjs"] {
            assert_eq!(
                verdict_of(&d, Ecosystem::Npm, name).risk,
                Risk::Clear,
                "{name}"
            );
        }
    }

    #[test]
    fn established_names_past_the_targets_meet_the_strong_checks_only() {
        let d = ranked(
            Ecosystem::Npm,
            &["lodash"],
            TARGET_NAMES,
            &["ffmpeg", "proxy"],
        );
        for (name, how) in [
            ("ffmepg", "neighbouring characters swapped of ffmpeg"),
            ("nodeffmpeg", "affix added to ffmpeg"),
            ("proxy.js", "affix added to proxy"),
        ] {
            let v = verdict_of(&d, Ecosystem::Npm, name);
            assert_eq!(v.risk, Risk::Typosquat, "{name}: {v:?}");
            assert!(v.reason.contains(how), "{name}: {}", v.reason);
        }
        // Other single edits compare with the first TARGET_NAMES only.
        for name in ["ffmpek", "fmpeg", "ffmpegg"] {
            assert_eq!(
                verdict_of(&d, Ecosystem::Npm, name).risk,
                Risk::Clear,
                "{name}"
            );
        }
    }

    #[test]
    fn three_edits_keep_a_popular_long_name_recognisable() {
        let d = ranked(Ecosystem::Pypi, &["matplotlib", "setuptools"], 3, &[]);
        let v = verdict_of(&d, Ecosystem::Pypi, "mplatlib");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("matplotlib"));
        assert!(
            v.reason.contains("three edits from matplotlib"),
            "{}",
            v.reason
        );
        // Another ending or first letter: not this rule.
        for name in ["mplatlob", "xplatlib"] {
            assert_eq!(
                verdict_of(&d, Ecosystem::Pypi, name).risk,
                Risk::Clear,
                "{name}"
            );
        }
        // Go: one owner's modules share their endings.
        let d = ranked(
            Ecosystem::Go,
            &["github.com/mitchellh/mapstructure"],
            1,
            &[],
        );
        let v = verdict_of(&d, Ecosystem::Go, "github.com/mitchellh/copystructure");
        assert_ne!(v.risk, Risk::Typosquat, "{v:?}");
    }

    #[test]
    fn a_rewritten_middle_keeps_a_distinctive_ending() {
        let d = ranked(
            Ecosystem::Pypi,
            &["matplotlib", "setuptools", "pytools", "gitools"],
            3,
            &[],
        );
        for name in ["maratlib", "maratlib1"] {
            let v = verdict_of(&d, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Typosquat, "{name}: {v:?}");
            assert_eq!(v.nearest_known.as_deref(), Some("matplotlib"));
            assert!(v.reason.contains("middle rewritten"), "{}", v.reason);
            assert!(v.reason.contains("(tlib)"), "{}", v.reason);
        }
        // Five edits, another second letter, longer than the name, or separators: no.
        for name in ["mrxxtlib", "mxratlib", "maraxxxxtlib", "mara-tlib"] {
            assert_eq!(
                verdict_of(&d, Ecosystem::Pypi, name).risk,
                Risk::Clear,
                "{name}"
            );
        }
        // An ending many listed names share says nothing: `ools` ends 20 of them here.
        let mut names = vec!["setuptools".to_string()];
        names.extend((0..19).map(|i| format!("x{i}tools")));
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let d = ranked(Ecosystem::Pypi, &names, 20, &[]);
        let v = verdict_of(&d, Ecosystem::Pypi, "sexxxxools");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
        // With 19 it would be: the same name against a distinctive ending.
        let d = ranked(Ecosystem::Pypi, &names[..19], 19, &[]);
        let v = verdict_of(&d, Ecosystem::Pypi, "sexxxxools");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
    }

    #[test]
    fn platform_or_release_words_after_a_very_popular_name() {
        let d = ranked(
            Ecosystem::Pypi,
            &["requests", "urllib3", "six"],
            WEAK_EDIT_RANK as usize,
            &["flask-sqlalchemy"],
        );
        for (name, added) in [
            ("requests-darwin-lite", "(-darwin-lite)"),
            ("urllib3-fixed", "(-fixed)"),
            ("requests_windows", "(-windows)"),
        ] {
            let v = verdict_of(&d, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Typosquat, "{name}: {v:?}");
            assert!(v.reason.contains(added), "{name}: {}", v.reason);
            assert!(v.reason.contains("unofficial variant"), "{}", v.reason);
        }
        // A word naming a purpose, a release channel projects publish themselves, a name
        // past the most popular ones, or a name too short to tell: no.
        for name in [
            "requests-toolbelt",
            "requests-darwin-client",
            "requests-nightly",
            "flask-sqlalchemy-lite",
            "six-lite",
        ] {
            assert_eq!(
                verdict_of(&d, Ecosystem::Pypi, name).risk,
                Risk::Clear,
                "{name}"
            );
        }
        let d = ranked(Ecosystem::Npm, &["react"], 1, &[]);
        let v = verdict_of(&d, Ecosystem::Npm, "react-latest");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
    }

    #[test]
    fn pypi_separators_and_py_affixes_imitate_only_the_most_popular_names() {
        let d = ranked(
            Ecosystem::Pypi,
            &["setuptools", "python-dateutil"],
            WEAK_EDIT_RANK as usize,
            &["json-rpc", "xattr", "python-ldap"],
        );
        for (name, how) in [
            ("setup-tools", "separator changed or removed (setuptools)"),
            ("python3-dateutil", "affix added to python-dateutil"),
        ] {
            let v = verdict_of(&d, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Typosquat, "{name}: {v:?}");
            assert!(v.reason.contains(how), "{name}: {}", v.reason);
        }
        // Past them, neither a separator (nor the edit deleting it) nor a py affix.
        for name in ["jsonrpc", "js-onrpc", "pyxattr", "pyldap"] {
            let v = verdict_of(&d, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
        // npm keeps the separator check at every rank.
        let d = ranked(
            Ecosystem::Npm,
            &["lodash"],
            TARGET_NAMES - 1,
            &["socket.io"],
        );
        let v = verdict_of(&d, Ecosystem::Npm, "socket-io");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
    }

    #[test]
    fn a_name_inside_a_longer_one_is_its_own_past_the_most_popular() {
        let d = ranked(
            Ecosystem::Pypi,
            &["urllib3", "networkx", "tinycss2"],
            WEAK_EDIT_RANK as usize,
            &["zdaemon", "breadability", "pystray", "webdav4"],
        );
        // The most popular: a character off either end is still a squat.
        for (name, target) in [("urllib", "urllib3"), ("network", "networkx")] {
            let v = verdict_of(&d, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Typosquat, "{name}: {v:?}");
            assert_eq!(v.nearest_known.as_deref(), Some(target));
        }
        // Past them (a numbered successor: past the first 100), its own project.
        let d2 = ranked(
            Ecosystem::Pypi,
            &["urllib3"],
            TWO_EDIT_RANK as usize,
            &["tinycss2"],
        );
        assert_eq!(
            verdict_of(&d2, Ecosystem::Pypi, "tinycss").risk,
            Risk::Clear
        );
        for name in ["daemon", "readability", "webdav"] {
            let v = verdict_of(&d, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
        // A character omitted inside the name is a misspelling at any rank.
        let v = verdict_of(&d, Ecosystem::Pypi, "pytray");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
    }

    #[test]
    fn short_names_meet_weak_edits_of_the_first_hundred_only() {
        let d = ranked(Ecosystem::Pypi, &["yarl"], 100, &["mako", "pypdf"]);
        let v = verdict_of(&d, Ecosystem::Pypi, "yara");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        // `mako` is past the first hundred: `pako` is no squat of it.
        assert_eq!(verdict_of(&d, Ecosystem::Pypi, "pako").risk, Risk::Clear);
        // A keyboard slip still is, up to SHORT_EDIT_RANK.
        let v = verdict_of(&d, Ecosystem::Pypi, "pypff");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(v.reason.contains("keyboard-adjacent"), "{}", v.reason);
    }

    #[test]
    fn letters_in_front_and_other_spellings_imitate_only_the_most_popular() {
        let d = ranked(
            Ecosystem::Pypi,
            &["requests", "colorama", "websockets"],
            WEAK_EDIT_RANK as usize,
            &["ujson", "asgiproxy", "armourfix", "termcolor"],
        );
        // The most popular names: a letter in front, the first letter replaced, the other
        // spelling, all squats.
        for (name, target) in [
            ("rrequests", "requests"),
            ("dequests", "requests"),
            ("colourama", "colorama"),
            ("gwebsockets", "websockets"),
        ] {
            let v = verdict_of(&d, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Typosquat, "{name}: {v:?}");
            assert_eq!(v.nearest_known.as_deref(), Some(target), "{name}");
        }
        // Past them: projects named with a prefix letter, another first letter, the other
        // spelling; and two letters in front of any name.
        for name in [
            "mujson",
            "wsgiproxy",
            "armorfix",
            "xtermcolor",
            "txrequests",
        ] {
            let v = verdict_of(&d, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
        assert_eq!(prefix_rank("requestz", "requests", 1), u32::MAX);
        assert_eq!(prefix_rank("xujson", "ujson", 1), SHORT_WEAK_EDIT_RANK);
        assert_eq!(prefix_rank("tzrequests", "requests", 2), 0);
    }

    #[test]
    fn two_edits_only_for_names_of_nine_characters_or_more() {
        let d = ranked(Ecosystem::Pypi, &["colorama", "beautifulsoup4"], 2, &[]);
        // Eight characters: `colormap` is a word, two edits from `colorama`.
        assert_eq!(
            verdict_of(&d, Ecosystem::Pypi, "colormap").risk,
            Risk::Clear
        );
        let v = verdict_of(&d, Ecosystem::Pypi, "beatifulsop4");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.reason, "two edits from beautifulsoup4");
    }

    #[test]
    fn pypi_a_letter_appended_to_or_dropped_from_a_long_name_at_any_rank() {
        let d = ranked(
            Ecosystem::Pypi,
            &["requests"],
            WEAK_EDIT_RANK as usize,
            &[
                "pytorch",
                "fairseq",
                "aioconsole",
                "falcon",
                "inject",
                "networkx",
                "tinycss2",
            ],
        );
        for (name, target) in [
            ("pytorchb", "pytorch"),
            ("fairseqn", "fairseq"),
            ("aioconsol", "aioconsole"),
        ] {
            let v = verdict_of(&d, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Typosquat, "{name}: {v:?}");
            assert_eq!(v.nearest_known.as_deref(), Some(target), "{name}");
        }
        // Shorter names are names of their own that way (a sampled registry name and a
        // Debian-packaged one); a plural, a number or a cut-off number are not a stray key.
        for name in [
            "falconz", "injectq", "network", "pytorchs", "pytorch2", "tinycss",
        ] {
            let v = verdict_of(&d, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
    }

    #[test]
    fn pypi_a_letter_inserted_inside_a_name_of_the_first_3000() {
        let d = ranked(
            Ecosystem::Pypi,
            &["requests"],
            WEAK_EDIT_RANK as usize,
            &["pygame", "datetime", "bleak"],
        );
        let v = verdict_of(&d, Ecosystem::Pypi, "PyGacme");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("pygame"));
        assert!(v.reason.contains("inserted inside pygame"), "{v:?}");
        // A letter in front is a project's own prefix (`udatetime`, packaged by Debian); a
        // result under seven characters is a name of its own.
        for name in ["udatetime", "blepak"] {
            let v = verdict_of(&d, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
        // Past rank 3,000 the same insertion is a neighbour by chance (`pyverbs`, packaged
        // by Debian, beside `pyvers`).
        let late = ranked(
            Ecosystem::Pypi,
            &["requests"],
            INSERTED_INSIDE_RANK as usize,
            &["pygame", "pyvers"],
        );
        for name in ["pygacme", "pyverbs"] {
            let v = verdict_of(&late, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
    }

    #[test]
    fn a_letter_moved_two_places() {
        let d = ranked(
            Ecosystem::Pypi,
            &["botocore", "pandas"],
            WEAK_EDIT_RANK as usize,
            &["astroid", "ruamel-yaml"],
        );
        let v = verdict_of(&d, Ecosystem::Pypi, "botoceor");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("botocore"));
        assert_eq!(v.reason, "a letter of botocore moved two places (e)");
        // Six letters are enough for the most popular names.
        let v = verdict_of(&d, Ecosystem::Pypi, "padnas");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        let v = verdict_of(&d, Ecosystem::Pypi, "ruamle-yaml");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        // Past them, a seven-letter name is a project of its own (`staroid`, sampled from
        // the registry, beside `astroid`).
        let v = verdict_of(&d, Ecosystem::Pypi, "staroid");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
    }

    #[test]
    fn npm_an_affix_around_a_short_coined_misspelling_past_the_first_500() {
        let d = ranked(
            Ecosystem::Npm,
            &["lodash"],
            WEAK_EDIT_RANK as usize,
            &["ethers", "slash", "smash-utils"],
        );
        let v = verdict_of(&d, Ecosystem::Npm, "ethesjs");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("ethers"));
        assert!(
            v.reason
                .contains("ethes, a spelling no listed npm name uses"),
            "{v:?}"
        );
        // A word listed names use is a name of its own with an affix too, and a short name
        // without an affix stays clear (`smash`, packaged by Debian, beside `slash`).
        for name in ["node-smash", "ethes", "smash"] {
            let v = verdict_of(&d, Ecosystem::Npm, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
    }

    #[test]
    fn two_of_the_first_500_names_run_together() {
        let d = ranked(
            Ecosystem::Pypi,
            &["torch", "triton", "cffi", "numpy", "io"],
            WEAK_EDIT_RANK as usize,
            &["psycopg2"],
        );
        let v = verdict_of(&d, Ecosystem::Pypi, "torchtriton");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("triton"));
        assert!(v.reason.contains("torch and triton run together"), "{v:?}");
        // A name past the first 500 (`psycopg2cffi`, packaged by Debian), or a part too
        // short to tell, is a project's own name.
        for name in ["psycopg2cffi", "numpyio"] {
            let v = verdict_of(&d, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
    }

    #[test]
    fn npm_a_short_leading_word_with_another_first_letter_into_a_coined_word() {
        let d = ranked(
            Ecosystem::Npm,
            &["lodash"],
            WEAK_EDIT_RANK as usize,
            &["js-sha3", "fclone", "trouter", "ns-utils"],
        );
        let v = verdict_of(&d, Ecosystem::Npm, "zs-sha3");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("js-sha3"));
        assert!(v.reason.contains("leading word js"), "{v:?}");
        // A word listed names use (`ns`), and one-word names with another first letter
        // (both from the registry sample), are names of their own.
        for name in ["ns-sha3", "qclone", "prouter"] {
            let v = verdict_of(&d, Ecosystem::Npm, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
    }

    #[test]
    fn build_and_compat_words_and_distinctive_names_past_the_most_popular() {
        let d = ranked(Ecosystem::Pypi, &["pillow"], 1, &[]);
        let v = verdict_of(&d, Ecosystem::Pypi, "pillow-simd");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert!(v.reason.contains("(-simd)"), "{v:?}");
        let d = ranked(
            Ecosystem::Npm,
            &["lodash"],
            WEAK_EDIT_RANK as usize,
            &["eslint-config-airbnb", "react-redux"],
        );
        let v = verdict_of(&d, Ecosystem::Npm, "eslint-config-airbnb-compat");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("eslint-config-airbnb"));
        assert!(v.reason.contains("three words or more"), "{v:?}");
        // A word naming a purpose, or a name of two words past the most popular: no.
        for name in ["eslint-config-airbnb-typescript", "react-redux-compat"] {
            let v = verdict_of(&d, Ecosystem::Npm, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
    }

    #[test]
    fn a_word_in_front_of_a_long_name_ending_in_a_language_word() {
        let d = ranked(
            Ecosystem::Npm,
            &["lodash"],
            WEAK_EDIT_RANK as usize,
            &["crypto-js", "core-js"],
        );
        let v = verdict_of(&d, Ecosystem::Npm, "plain-crypto-js");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("crypto-js"));
        assert!(v.reason.contains("word added in front (plain-)"), "{v:?}");
        // A short name is a part other projects build on (`edge-core-js`, sampled).
        let v = verdict_of(&d, Ecosystem::Npm, "edge-core-js");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
    }

    #[test]
    fn an_abbreviation_spelt_out_in_a_one_word_name() {
        let d = ranked(
            Ecosystem::Pypi,
            &["requests"],
            WEAK_EDIT_RANK as usize,
            &["fairseq", "pluginlib"],
        );
        let v = verdict_of(&d, Ecosystem::Pypi, "fairsequence");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("fairseq"));
        assert!(v.reason.contains("seq spelt out (sequence)"), "{v:?}");
        // Written apart, it describes a project of its own (`plugin-library`, sampled).
        let v = verdict_of(&d, Ecosystem::Pypi, "plugin-library");
        assert_eq!(v.risk, Risk::Clear, "{v:?}");
    }

    #[test]
    fn an_unversioned_popular_name_with_another_most_popular_one() {
        let d = ranked(
            Ecosystem::Pypi,
            &["requests", "pandas", "beautifulsoup4", "graphene"],
            WEAK_EDIT_RANK as usize,
            &["beautifulsoup"],
        );
        let v = verdict_of(&d, Ecosystem::Pypi, "beautifulsoup-requests");
        assert_eq!(v.risk, Risk::Typosquat, "{v:?}");
        assert_eq!(v.nearest_known.as_deref(), Some("beautifulsoup4"));
        assert!(v.reason.contains("without its version number"), "{v:?}");
        // A popular name as it is written with another (`graphene-pandas`, sampled), or an
        // unversioned name with a word of its own: no.
        for name in ["graphene-pandas", "beautifulsoup-parser"] {
            let v = verdict_of(&d, Ecosystem::Pypi, name);
            assert_eq!(v.risk, Risk::Clear, "{name}: {v:?}");
        }
    }

    #[test]
    fn osa_distance() {
        assert_eq!(osa("requests", "reqeusts"), 1);
        assert_eq!(osa("abc", "abc"), 0);
        assert_eq!(osa("kitten", "sitting"), 3);
        assert_eq!(osa_bounded("kitten", "sitting", 2), None);
    }
}
