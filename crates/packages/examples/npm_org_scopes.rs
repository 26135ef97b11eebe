//! Writes `data/npm-org-scopes.tsv`: the packages of the npm scopes of large organisations
//! that publish under their scope only, from an npm registry downloads listing (a table with
//! `name`, `version`, `downloads_a_month` and `summary` columns, every package with a few
//! hundred downloads a month or more) and the shipped npm list.
//!
//! An organisation scope has at least [`MIN_PACKAGES`] packages in the listing, at least
//! [`MIN_DOWNLOADS`] downloads a month together, and at most [`MAX_SHARED`] of its name
//! parts also the names of unscoped packages of the shipped list (`@types` copies every
//! name; a fifth of `@storybook`'s are unscoped packages too). Of these scopes
//! every package of the listing is kept whose name part no other scope there uses
//! (`vite-plugin`, `design-system`, `api-client` are everyone's).
//!
//! cargo run -p packages --example npm_org_scopes -- LISTING AS_OF > crates/packages/data/npm-org-scopes.tsv

#![allow(clippy::unwrap_used, clippy::expect_used)] // a data tool fails loudly

use std::collections::{BTreeMap, HashMap, HashSet};

use packages::{Ecosystem, PopularList};

const MIN_PACKAGES: usize = 10;
const MIN_DOWNLOADS: u64 = 10_000_000;
const MAX_SHARED: f64 = 0.05;

#[derive(Default)]
struct Scope {
    packages: Vec<(String, u64)>,
    downloads: u64,
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listing, as_of] = &args[..] else {
        panic!("usage: npm_org_scopes LISTING AS_OF");
    };
    let text = std::fs::read_to_string(listing).unwrap();
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |pred: &dyn Fn(&str) -> bool| header.iter().position(|f| pred(f)).unwrap();
    let (name_col, version_col) = (col(&|f| f == "name"), col(&|f| f == "version"));
    let downloads_col = col(&|f| f.starts_with("downloads"));
    let summary_col = col(&|f| f.starts_with("summary"));
    let listed: HashSet<String> = PopularList::shipped(Ecosystem::Npm)
        .names
        .into_iter()
        .collect();

    let (mut rows, mut least) = (0usize, u64::MAX);
    let mut scopes: BTreeMap<String, Scope> = BTreeMap::new();
    let mut scopes_of_part: HashMap<String, usize> = HashMap::new();
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        let field = |c: usize| f.get(c).copied().unwrap_or("");
        let Ok(downloads) = field(downloads_col).trim().parse::<u64>() else {
            continue;
        };
        // Security holding packages replace removed malware (see `PopularList::parse`).
        if field(version_col).contains("-security")
            || field(summary_col)
                .to_ascii_lowercase()
                .contains("security holding")
        {
            continue;
        }
        let Ok(name) = Ecosystem::Npm.normalize(field(name_col)) else {
            continue;
        };
        rows += 1;
        least = least.min(downloads);
        let Some((scope, part)) = name.strip_prefix('@').and_then(|n| n.split_once('/')) else {
            continue;
        };
        *scopes_of_part.entry(part.to_string()).or_default() += 1;
        let s = scopes.entry(scope.to_string()).or_default();
        s.downloads += downloads;
        s.packages.push((name.clone(), downloads));
    }

    let mut chosen: Vec<(&str, usize, u64, usize)> = Vec::new();
    let mut kept: Vec<(&str, u64)> = Vec::new();
    for (scope, s) in &scopes {
        let part = |n: &str| n.split_once('/').map_or("", |(_, p)| p).to_string();
        let shared = s
            .packages
            .iter()
            .filter(|(n, _)| listed.contains(&part(n)))
            .count();
        if s.packages.len() < MIN_PACKAGES
            || s.downloads < MIN_DOWNLOADS
            || shared as f64 > MAX_SHARED * s.packages.len() as f64
        {
            continue;
        }
        chosen.push((scope, s.packages.len(), s.downloads, shared));
        kept.extend(
            s.packages
                .iter()
                .filter(|(n, _)| scopes_of_part.get(&part(n)) == Some(&1))
                .map(|(n, d)| (n.as_str(), *d)),
        );
    }
    kept.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    chosen.sort_by_key(|s| std::cmp::Reverse(s.2));

    println!(
        "# Packages of the npm scopes of large organisations that publish under their scope only"
    );
    println!(
        "# ({} packages of {} scopes), most downloaded first: an unscoped copy of one of their",
        thousands(kept.len() as u64),
        chosen.len()
    );
    println!("# names is dependency confusion (the scope-dropping check of src/typosquat.rs).");
    println!(
        "# Source: npm registry monthly download counts (api.npmjs.org/downloads), as of {as_of}:"
    );
    println!(
        "# {} packages with {least} downloads a month or more (security holding packages left out).",
        thousands(rows as u64)
    );
    println!(
        "# Rule: a scope with at least {MIN_PACKAGES} packages there, {} downloads a month",
        thousands(MIN_DOWNLOADS)
    );
    println!(
        "# together, and at most {:.0} % of its name parts also names of unscoped packages of",
        MAX_SHARED * 100.0
    );
    println!(
        "# npm-popular.tsv; of such a scope, every package whose name part no other scope uses."
    );
    println!("# Built by: cargo run -p packages --example npm_org_scopes -- LISTING {as_of}");
    println!("# Scopes (packages, downloads a month, name parts listed unscoped):");
    for chunk in chosen.chunks(3) {
        let line: Vec<String> = chunk
            .iter()
            .map(|(s, n, d, shared)| format!("@{s} ({n}, {}, {shared})", thousands(*d)))
            .collect();
        println!("#   {}", line.join("; "));
    }
    println!("name\tdownloads_a_month");
    for (name, downloads) in kept {
        println!("{name}\t{downloads}");
    }
}
