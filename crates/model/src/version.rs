//! Version order per vendor: which of two versions of one executable is the newer.
//!
//! Ecosystems keep their own rules: PEP 440 for `pypi`, SemVer for `npm` and Go modules
//! (`go`), dpkg rules (`epoch:upstream-revision`) for distribution packages. Every other
//! vendor uses a dotted-numeric order that knows pre-release tags (`1.10 > 1.9`,
//! `go1.22rc1 < go1.22.0`, `0.81 > 0.80`). A version an ecosystem's parser refuses falls back
//! to the dotted-numeric order. `Equal` means the versions do not differ by these rules; the
//! caller then falls back to release date, then arrival order.

use std::cmp::Ordering;

/// Compares two versions of one vendor's executable.
pub fn compare(vendor: &str, a: &str, b: &str) -> Ordering {
    let (a, b) = (a.trim(), b.trim());
    if a == b {
        return Ordering::Equal;
    }
    let vendor = vendor.trim();
    match vendor {
        "pypi" => match (Pep440::parse(a), Pep440::parse(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => generic(a, b),
        },
        "npm" | "go" => match (SemVer::parse(a), SemVer::parse(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => generic(a, b),
        },
        _ if DISTRIBUTIONS.iter().any(|d| d.eq_ignore_ascii_case(vendor)) => debian(a, b),
        _ => generic(a, b),
    }
}

/// [`compare`], then the vendor's release dates where both are known.
pub fn compare_released<T: Ord>(
    vendor: &str,
    a: (&str, Option<T>),
    b: (&str, Option<T>),
) -> Ordering {
    compare(vendor, a.0, b.0).then_with(|| match (a.1, b.1) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => Ordering::Equal,
    })
}

/// Vendors whose versions follow distribution package rules.
const DISTRIBUTIONS: &[&str] = &[
    "debian",
    "ubuntu",
    "deb",
    "dpkg",
    "apt",
    "rpm",
    "fedora",
    "rhel",
    "redhat",
    "centos",
    "rocky",
    "rocky linux",
    "almalinux",
    "suse",
    "opensuse",
    "arch linux",
];

/// Compares digit strings of any length numerically.
fn cmp_digits(x: &str, y: &str) -> Ordering {
    let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
    x.len().cmp(&y.len()).then_with(|| x.cmp(y))
}

// ---------------------------------------------------------------------------------------
// Dotted numeric with pre-release tags (the default)
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Num(String),
    Word(String),
}

impl Ord for Token {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Token::Num(x), Token::Num(y)) => cmp_digits(x, y),
            (Token::Word(x), Token::Word(y)) => x.cmp(y),
            // `1.0.a` < `1.0.1`: a word is a weaker step than a number.
            (Token::Num(_), Token::Word(_)) => Ordering::Greater,
            (Token::Word(_), Token::Num(_)) => Ordering::Less,
        }
    }
}

impl PartialOrd for Token {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

fn tokens(s: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut digits = false;
    for c in s.chars() {
        if !c.is_alphanumeric() {
            flush(&mut out, &mut cur, digits);
            continue;
        }
        let d = c.is_ascii_digit();
        if !cur.is_empty() && d != digits {
            flush(&mut out, &mut cur, digits);
        }
        digits = d;
        cur.extend(c.to_lowercase());
    }
    flush(&mut out, &mut cur, digits);
    out
}

fn flush(out: &mut Vec<Token>, cur: &mut String, digits: bool) {
    if !cur.is_empty() {
        let t = std::mem::take(cur);
        out.push(if digits {
            Token::Num(t)
        } else {
            Token::Word(t)
        });
    }
}

/// Where a suffix puts a version relative to its release: development builds, alphas,
/// betas and release candidates before it; anything else (`esr`, `-1`, `p2`) after.
fn suffix_rank(first: Option<&Token>) -> i8 {
    match first {
        None => 0,
        Some(Token::Num(_)) => 1,
        Some(Token::Word(w)) => match w.as_str() {
            "dev" | "snapshot" | "nightly" => -4,
            "alpha" | "a" => -3,
            "beta" | "b" => -2,
            "rc" | "c" | "cr" | "pre" | "preview" => -1,
            "final" | "ga" | "release" | "stable" => 0,
            _ => 1,
        },
    }
}

/// `(release numbers, suffix tokens)` of `go1.22.0`, `v20.1.0`, `0.81`, `128.0esr`.
fn split_generic(v: &str) -> (Vec<String>, Vec<Token>) {
    let v = v.split('+').next().unwrap_or(v);
    let lower = v.to_lowercase();
    let mut s = lower.as_str();
    for prefix in ["go", "v"] {
        if let Some(rest) = s.strip_prefix(prefix)
            && rest.starts_with(|c: char| c.is_ascii_digit())
        {
            s = rest;
            break;
        }
    }
    let mut release = Vec::new();
    let mut rest = s;
    loop {
        let n = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if n == 0 {
            break;
        }
        release.push(rest[..n].to_string());
        rest = &rest[n..];
        match rest.strip_prefix('.') {
            Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) => rest = r,
            _ => break,
        }
    }
    (release, tokens(rest))
}

fn generic(a: &str, b: &str) -> Ordering {
    let (ra, sa) = split_generic(a);
    let (rb, sb) = split_generic(b);
    let n = ra.len().max(rb.len());
    for i in 0..n {
        let x = ra.get(i).map_or("0", String::as_str);
        let y = rb.get(i).map_or("0", String::as_str);
        let o = cmp_digits(x, y);
        if o != Ordering::Equal {
            return o;
        }
    }
    suffix_rank(sa.first())
        .cmp(&suffix_rank(sb.first()))
        .then_with(|| sa.cmp(&sb))
}

// ---------------------------------------------------------------------------------------
// SemVer 2.0.0 (npm, Go modules)
// ---------------------------------------------------------------------------------------

#[derive(Debug, PartialEq, Eq)]
struct SemVer<'a> {
    core: [u64; 3],
    pre: Vec<&'a str>,
}

impl<'a> SemVer<'a> {
    fn parse(v: &'a str) -> Option<Self> {
        let v = v.strip_prefix(['v', '=']).unwrap_or(v);
        let v = v.split('+').next()?;
        let (core, pre) = match v.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (v, None),
        };
        let mut parts = core.split('.');
        let mut nums = [0u64; 3];
        for n in &mut nums {
            let p = parts.next()?;
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            *n = p.parse().ok()?;
        }
        if parts.next().is_some() {
            return None;
        }
        let pre = match pre {
            Some(p) => {
                let ids: Vec<&str> = p.split('.').collect();
                if ids.iter().any(|i| {
                    i.is_empty() || !i.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                }) {
                    return None;
                }
                ids
            }
            None => Vec::new(),
        };
        Some(Self { core: nums, pre })
    }
}

impl Ord for SemVer<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.core.cmp(&other.core).then_with(|| {
            match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => return Ordering::Equal,
                (true, false) => return Ordering::Greater,
                (false, true) => return Ordering::Less,
                _ => {}
            }
            for (x, y) in self.pre.iter().zip(&other.pre) {
                let num = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
                let o = match (num(x), num(y)) {
                    (true, true) => cmp_digits(x, y),
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    (false, false) => x.cmp(y),
                };
                if o != Ordering::Equal {
                    return o;
                }
            }
            self.pre.len().cmp(&other.pre.len())
        })
    }
}

impl PartialOrd for SemVer<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

// ---------------------------------------------------------------------------------------
// PEP 440 (PyPI)
// ---------------------------------------------------------------------------------------

/// Below, at, or above every value: PEP 440's implicit bounds for absent segments.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Bound<T> {
    Low,
    At(T),
    High,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum LocalPart {
    // Words order before numbers in a local label.
    Word(String),
    Num(u64),
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Pep440 {
    epoch: u64,
    release: Vec<u64>,
    pre: Bound<(u8, u64)>,
    post: Bound<u64>,
    dev: Bound<u64>,
    local: Vec<LocalPart>,
}

impl Pep440 {
    fn parse(v: &str) -> Option<Self> {
        let v = v.to_ascii_lowercase();
        let v = v.strip_prefix('v').unwrap_or(&v);
        let (v, local) = match v.split_once('+') {
            Some((v, l)) => (v, Some(l)),
            None => (v, None),
        };
        let (epoch, mut s) = match v.split_once('!') {
            Some((e, rest)) => (e.parse().ok()?, rest),
            None => (0, v),
        };
        let mut release = Vec::new();
        loop {
            let n = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if n == 0 {
                return None;
            }
            release.push(s[..n].parse().ok()?);
            s = &s[n..];
            match s.strip_prefix('.') {
                Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) => s = r,
                _ => break,
            }
        }
        while release.len() > 1 && release.last() == Some(&0) {
            release.pop();
        }
        let mut pre = None;
        let mut post = None;
        let mut dev = None;
        let strip_sep = |s: &str| s.strip_prefix(['.', '-', '_']).unwrap_or(s).len();
        let number = |s: &str| -> (Option<u64>, usize) {
            let skip = s.len() - strip_sep(s);
            let t = &s[skip..];
            let n = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if n == 0 {
                (Some(0), 0)
            } else {
                (t[..n].parse().ok(), skip + n)
            }
        };
        // Pre-release.
        {
            let skip = s.len() - strip_sep(s);
            let t = &s[skip..];
            for (word, kind) in [
                ("alpha", 0u8),
                ("beta", 1),
                ("preview", 2),
                ("pre", 2),
                ("rc", 2),
                ("a", 0),
                ("b", 1),
                ("c", 2),
            ] {
                if let Some(rest) = t.strip_prefix(word) {
                    let (n, used) = number(rest);
                    pre = Some((kind, n?));
                    s = &rest[used..];
                    break;
                }
            }
        }
        // Post-release: `.post1`, `-r2`, or the implicit `-1`.
        {
            let skip = s.len() - strip_sep(s);
            let t = &s[skip..];
            let mut matched = false;
            for word in ["post", "rev", "r"] {
                if let Some(rest) = t.strip_prefix(word) {
                    let (n, used) = number(rest);
                    post = Some(n?);
                    s = &rest[used..];
                    matched = true;
                    break;
                }
            }
            if !matched
                && let Some(rest) = s.strip_prefix('-')
                && rest.starts_with(|c: char| c.is_ascii_digit())
            {
                let (n, used) = number(rest);
                post = Some(n?);
                s = &rest[used..];
            }
        }
        // Development release.
        {
            let skip = s.len() - strip_sep(s);
            let t = &s[skip..];
            if let Some(rest) = t.strip_prefix("dev") {
                let (n, used) = number(rest);
                dev = Some(n?);
                s = &rest[used..];
            }
        }
        if !s.is_empty() {
            return None;
        }
        let local = match local {
            Some(l) => l
                .split(['.', '-', '_'])
                .map(|p| {
                    if p.is_empty() {
                        None
                    } else if p.bytes().all(|b| b.is_ascii_digit()) {
                        p.parse().ok().map(LocalPart::Num)
                    } else if p.bytes().all(|b| b.is_ascii_alphanumeric()) {
                        Some(LocalPart::Word(p.to_string()))
                    } else {
                        None
                    }
                })
                .collect::<Option<Vec<_>>>()?,
            None => Vec::new(),
        };
        Some(Self {
            epoch,
            release,
            pre: match (pre, post, dev) {
                (Some(p), _, _) => Bound::At(p),
                // `1.0.dev1` sorts before `1.0a1`.
                (None, None, Some(_)) => Bound::Low,
                (None, _, _) => Bound::High,
            },
            post: post.map_or(Bound::Low, Bound::At),
            dev: dev.map_or(Bound::High, Bound::At),
            local,
        })
    }
}

// ---------------------------------------------------------------------------------------
// Distribution packages (dpkg's algorithm; RPM's epoch:version-release has the same shape)
// ---------------------------------------------------------------------------------------

fn debian(a: &str, b: &str) -> Ordering {
    let (ea, ua, ra) = split_debian(a);
    let (eb, ub, rb) = split_debian(b);
    cmp_digits(ea, eb)
        .then_with(|| verrevcmp(ua, ub))
        .then_with(|| verrevcmp(ra, rb))
}

fn split_debian(v: &str) -> (&str, &str, &str) {
    let (epoch, rest) = match v.split_once(':') {
        Some((e, r)) if !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()) => (e, r),
        _ => ("0", v),
    };
    match rest.rsplit_once('-') {
        Some((u, r)) => (epoch, u, r),
        None => (epoch, rest, ""),
    }
}

/// dpkg's `verrevcmp`: `~` before everything (even the end), letters before other symbols.
fn verrevcmp(a: &str, b: &str) -> Ordering {
    fn order(c: Option<u8>) -> i32 {
        match c {
            None => 0,
            Some(b'~') => -1,
            Some(c) if c.is_ascii_digit() => 0,
            Some(c) if c.is_ascii_alphabetic() => i32::from(c),
            Some(c) => i32::from(c) + 256,
        }
    }
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    let digit = |s: &[u8], k: usize| s.get(k).is_some_and(u8::is_ascii_digit);
    while i < a.len() || j < b.len() {
        while (i < a.len() && !digit(a, i)) || (j < b.len() && !digit(b, j)) {
            let (x, y) = (order(a.get(i).copied()), order(b.get(j).copied()));
            if x != y {
                return x.cmp(&y);
            }
            i += 1;
            j += 1;
        }
        while a.get(i) == Some(&b'0') {
            i += 1;
        }
        while b.get(j) == Some(&b'0') {
            j += 1;
        }
        let mut first_diff = Ordering::Equal;
        while digit(a, i) && digit(b, j) {
            if first_diff == Ordering::Equal {
                first_diff = a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
        if digit(a, i) {
            return Ordering::Greater;
        }
        if digit(b, j) {
            return Ordering::Less;
        }
        if first_diff != Ordering::Equal {
            return first_diff;
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real version strings, oldest first, per vendor.
    const TABLES: &[(&str, &[&str])] = &[
        ("PuTTY", &["0.76", "0.78", "0.79", "0.80", "0.81", "0.82"]),
        (
            "Go",
            &[
                "go1.9",
                "go1.9.7",
                "go1.10",
                "go1.21rc2",
                "go1.21.0",
                "go1.21.1",
                "go1.22rc1",
                "go1.22rc2",
                "1.22.0",
                "go1.22.1",
                "go1.23.4",
                "go1.23.10",
            ],
        ),
        ("Tool", &["1.0", "1.9", "1.10", "1.10.1", "2.0"]),
        (
            "Node.js",
            &["v9.11.2", "v18.20.4", "v20.1.0", "v20.10.0", "v23.3.0"],
        ),
        (
            "Mozilla",
            &[
                "128.0",
                "128.5.1esr",
                "129.0b3",
                "129.0b9",
                "129.0",
                "133.0",
                "134.0.1",
            ],
        ),
        ("7-Zip", &["9.20", "19.00", "23.01", "24.08", "24.09"]),
        (
            "npm",
            &[
                "1.0.0-alpha",
                "1.0.0-alpha.1",
                "1.0.0-alpha.beta",
                "1.0.0-beta",
                "1.0.0-beta.2",
                "1.0.0-beta.11",
                "1.0.0-rc.1",
                "1.0.0",
                "4.17.9",
                "4.17.21",
                "10.0.0",
            ],
        ),
        (
            "go",
            &[
                "v0.0.0-20190308221718-c2843e01d9a2",
                "v0.0.0-20240101000000-abcdefabcdef",
                "v0.3.0",
                "v0.14.0",
                "v0.21.0",
                "v1.0.0-rc.1",
                "v1.0.0",
            ],
        ),
        (
            "pypi",
            &[
                "1.0.dev456",
                "1.0a1",
                "1.0a2.dev456",
                "1.0a12.dev456",
                "1.0a12",
                "1.0b1.dev456",
                "1.0b2",
                "1.0b2.post345.dev456",
                "1.0b2.post345",
                "1.0rc1.dev456",
                "1.0rc1",
                "1.0",
                "1.0+abc.5",
                "1.0+abc.7",
                "1.0+5",
                "1.0.post456.dev34",
                "1.0.post456",
                "1.0.15",
                "1.1.dev1",
                "2.31.0",
                "2.32.3",
                "1!0.1",
            ],
        ),
        (
            "debian",
            &[
                "1.0~rc1-1",
                "1.0-1",
                "1.0-1ubuntu0.1",
                "1.0-2",
                "1.0a-1",
                "1.0+dfsg-1",
                "1.2.10-1",
                "2.0-1",
                "1:0.9-1",
            ],
        ),
        ("rpm", &["1.0-1.el9", "1.0-2.el9", "1.1-1.el9", "2:0.1-1"]),
    ];

    #[test]
    fn tables_are_in_order_for_every_pair() {
        for (vendor, versions) in TABLES {
            for (i, a) in versions.iter().enumerate() {
                assert_eq!(compare(vendor, a, a), Ordering::Equal, "{vendor} {a}");
                for b in &versions[i + 1..] {
                    assert_eq!(compare(vendor, a, b), Ordering::Less, "{vendor}: {a} < {b}");
                    assert_eq!(
                        compare(vendor, b, a),
                        Ordering::Greater,
                        "{vendor}: {b} > {a}"
                    );
                }
            }
        }
    }

    #[test]
    fn equivalent_spellings_are_equal() {
        assert_eq!(compare("Go", "go1.21.0", "1.21.0"), Ordering::Equal);
        assert_eq!(compare("Tool", "1.0", "1.0.0"), Ordering::Equal);
        assert_eq!(compare("npm", "1.0.0+build.1", "1.0.0"), Ordering::Equal);
        assert_eq!(compare("pypi", "1.0.0", "1.0"), Ordering::Equal);
        assert_eq!(compare("pypi", "1.0-alpha-1", "1.0a1"), Ordering::Equal);
        assert_eq!(compare("pypi", "1.0-1", "1.0.post1"), Ordering::Equal);
        assert_eq!(compare("debian", "0:1.0-1", "1.0-1"), Ordering::Equal);
    }

    #[test]
    fn unparsable_ecosystem_versions_fall_back_to_dotted_numeric() {
        assert_eq!(compare("npm", "1.10", "1.9"), Ordering::Greater);
        assert_eq!(compare("pypi", "2024.1~x", "2023.12~x"), Ordering::Greater);
        assert_eq!(compare("Vendor", "", "1"), Ordering::Less);
    }

    #[test]
    fn ordering_is_a_total_order_on_mixed_strings() {
        // Antisymmetry and transitivity over every triple of a mixed bag.
        let bag = [
            "1",
            "1.0",
            "1.0rc1",
            "1.0-1",
            "1.0.1",
            "v1.2",
            "go1.2",
            "1.2b",
            "1.2.a",
            "abc",
            "1.0esr",
            "1.0+x",
            "0.9~1",
            "10",
            "1.0.0-beta.2",
        ];
        for vendor in ["Tool", "npm", "pypi", "debian"] {
            for a in bag {
                for b in bag {
                    assert_eq!(
                        compare(vendor, a, b),
                        compare(vendor, b, a).reverse(),
                        "{vendor}: {a} vs {b}"
                    );
                    for c in bag {
                        if compare(vendor, a, b) != Ordering::Greater
                            && compare(vendor, b, c) != Ordering::Greater
                        {
                            assert_ne!(
                                compare(vendor, a, c),
                                Ordering::Greater,
                                "{vendor}: {a} <= {b} <= {c}"
                            );
                        }
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// Dotted numeric versions order as their number tuples (missing parts are zero;
        /// not so for dpkg, where `1.2 < 1.2.0`), and a pre-release orders before its release.
        #[test]
        fn dotted_numeric_orders_as_tuples(
            a in proptest::collection::vec(0u32..30, 1..5),
            b in proptest::collection::vec(0u32..30, 1..5),
            vendor in proptest::sample::select(vec!["PuTTY", "Go", "npm", "pypi"]),
        ) {
            let text = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(".");
            let pad = |v: &[u32]| {
                let mut v = v.to_vec();
                v.resize(5, 0);
                v
            };
            let (ta, tb) = (text(&a), text(&b));
            // SemVer needs three parts; shorter ones fall back to dotted numeric.
            proptest::prop_assert_eq!(compare(vendor, &ta, &tb), pad(&a).cmp(&pad(&b)));
            let rc = if vendor == "npm" { format!("{ta}-rc.1") } else { format!("{ta}rc1") };
            proptest::prop_assert_eq!(compare(vendor, &rc, &ta), Ordering::Less);
        }

        /// Any two strings compare antisymmetrically, on every scheme.
        #[test]
        fn antisymmetric_on_any_text(
            a in "[0-9a-z.~+:-]{0,12}",
            b in "[0-9a-z.~+:-]{0,12}",
            vendor in proptest::sample::select(vec!["PuTTY", "npm", "pypi", "debian"]),
        ) {
            proptest::prop_assert_eq!(compare(vendor, &a, &b), compare(vendor, &b, &a).reverse());
        }
    }

    #[test]
    fn release_dates_break_ties_only() {
        assert_eq!(
            compare_released("Tool", ("1.0", Some(2)), ("1.0.0", Some(1))),
            Ordering::Greater
        );
        assert_eq!(
            compare_released("Tool", ("1.1", Some(1)), ("1.0", Some(2))),
            Ordering::Greater
        );
        assert_eq!(
            compare_released::<u8>("Tool", ("1.0", None), ("1.0", Some(2))),
            Ordering::Equal
        );
    }
}
