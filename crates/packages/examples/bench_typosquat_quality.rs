//! Typosquat detection quality on labelled real names, per ecosystem. Parts 1 to 4 were looked
//! at while setting the rules and their rank limits (tuned); part 5 was not (held out):
//!
//! 1. **Confirmed squats** (recall): malicious look-alikes from public reports and registry
//!    advisories (`bench/typosquat-cases.tsv` rows labelled `malicious`, and
//!    `bench/confirmed-squats.tsv`), each with its source. Also the false-alarm rate on the
//!    legitimate popular look-alike pairs of `typosquat-cases.tsv`.
//! 2. **Real project dependencies** (false alarms): every dependency named in the lockfiles
//!    of well-known projects (`bench/lockfile-deps-{npm,pypi,go}.tsv`, sources in their
//!    headers), flagged `typosquat`.
//! 3. **Registry sample** (false alarms): a seeded sample of registry names outside the
//!    shipped lists (`bench/registry-sample.tsv`), flagged `typosquat`, with 30 examples.
//!    3b. **Established unlisted names** (false alarms): PyPI projects and npm packages
//!    outside the shipped lists that the Debian archive packages
//!    (`bench/popular-unlisted.tsv`), flagged `typosquat`.
//!
//! 4. **Formerly held-out squats** (recall, tuned): `bench/heldout-squats.tsv`, confirmed
//!    squats of the ecosyste.ms dataset, held out until 2026-11-27 and tuned against since
//!    (rules were set from these rows once part 5 was added), over all rows and over the rows
//!    whose target is a listed name (the detector knows no other). Misses with `--show`.
//!
//! 5. **Untouched held-out squats** (recall, measured only): `bench/untouched-squats.tsv`,
//!    confirmed npm and PyPI squats of the Typomind paper's malicious-package archive, built
//!    before the rules of 2026-11-27 and its rows never read while changing them (two later
//!    rules, an npm scoped name published without its scope and a name of a large
//!    organisation's npm scope published without it, were added knowing its per-technique
//!    counts); over all rows, over the rows whose target is listed, and per technique.
//!    `--tuning` leaves this part out (for runs made while changing rules); `--show` lists
//!    its misses too.
//!
//! Goals: recall >= 90 %, <= 0.3 % of real dependencies and <= 1 % of sampled names flagged.
//! The detector runs on the shipped popular-name lists only; this program is the only
//! reader of the evaluation files. It also prints the time to build the detector and the
//! resident memory it adds.
//!
//! cargo run --release -p packages --example bench_typosquat_quality [-- --show] [--tuning]

#![allow(clippy::unwrap_used, clippy::expect_used)] // benchmarks fail loudly

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use packages::{Detector, Ecosystem, KnownNames, Risk};

const GOAL_RECALL: f64 = 90.0;
const GOAL_DEPS: f64 = 0.3;
const GOAL_SAMPLE: f64 = 1.0;

fn bench_file(name: &str) -> String {
    let path = format!("{}/bench/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Data rows (after comments and the header) split on tabs.
fn rows(text: &str) -> Vec<Vec<&str>> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .skip(1)
        .map(|l| l.split('\t').collect())
        .collect()
}

fn pct(n: usize, d: usize) -> f64 {
    if d == 0 {
        0.0
    } else {
        n as f64 * 100.0 / d as f64
    }
}

fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Judge {
    detector: Detector,
    none: HashSet<String>,
}

impl Judge {
    /// The verdict's risk and a one-line account of it.
    fn judge(&self, e: Ecosystem, name: &str) -> (Risk, String) {
        match self.detector.analyse(e, name, &self.none, false) {
            Ok(v) => (
                v.risk,
                format!(
                    "{} {} ({})",
                    v.risk.as_str(),
                    v.nearest_known.unwrap_or_default(),
                    v.reason
                ),
            ),
            Err(err) => (Risk::Clear, format!("refused: {err}")),
        }
    }
}

fn main() {
    let show = std::env::args().any(|a| a == "--show");
    let tuning = std::env::args().any(|a| a == "--tuning");
    let before = resident_kib();
    let start = Instant::now();
    let detector = Detector::new(KnownNames::shipped());
    let built = start.elapsed();
    let grown = resident_kib().saturating_sub(before);
    println!(
        "detector: built in {:.0} ms, resident memory +{:.1} MiB ({} npm, {} pypi, {} go names)",
        built.as_secs_f64() * 1e3,
        grown as f64 / 1024.0,
        detector.known().len(Ecosystem::Npm),
        detector.known().len(Ecosystem::Pypi),
        detector.known().len(Ecosystem::Go),
    );
    let judge = Judge {
        detector,
        none: HashSet::new(),
    };
    let mut met = true;

    // 1. Confirmed squats.
    let cases = bench_file("typosquat-cases.tsv");
    let confirmed = bench_file("confirmed-squats.tsv");
    let mut squats: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut pairs: Vec<(String, String)> = Vec::new();
    for f in rows(&cases) {
        let [eco, name, label, target, ..] = f[..] else {
            panic!("malformed case: {f:?}");
        };
        match label {
            "malicious" => {
                squats.insert((eco.into(), name.into()), target.into());
            }
            "legitimate" => pairs.push((eco.into(), name.into())),
            other => panic!("unknown label {other}"),
        }
    }
    for f in rows(&confirmed) {
        let [eco, name, target, ..] = f[..] else {
            panic!("malformed squat: {f:?}");
        };
        squats.insert((eco.into(), name.into()), target.into());
    }
    println!("\n1. confirmed squats from public reports (recall: flagged typosquat; tuned)");
    let mut tally: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for ((eco, name), target) in &squats {
        let (risk, said) = judge.judge(eco.parse().unwrap(), name);
        let caught = risk == Risk::Typosquat;
        let t = tally.entry(eco).or_default();
        t.0 += 1;
        t.1 += usize::from(caught);
        if show || !caught {
            let mark = if caught { "ok  " } else { "MISS" };
            println!("   {mark} {eco:4} {name} (imitates {target}): {said}");
        }
    }
    for (eco, (n, caught)) in &tally {
        let r = pct(*caught, *n);
        met &= r >= GOAL_RECALL;
        println!(
            "   {eco:4} {caught:4} of {n:4} caught  recall {r:5.1} %  (goal >= {GOAL_RECALL} %)"
        );
    }
    let mut alarms: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (eco, name) in &pairs {
        let (risk, said) = judge.judge(eco.parse().unwrap(), name);
        let alarm = !matches!(risk, Risk::Known | Risk::Clear);
        let t = alarms.entry(eco).or_default();
        t.0 += 1;
        t.1 += usize::from(alarm);
        if alarm {
            println!("   ALARM {eco:4} {name} (legitimate popular look-alike): {said}");
        }
    }
    for (eco, (n, flagged)) in &alarms {
        println!(
            "   {eco:4} legitimate popular look-alike pairs: {flagged} of {n} flagged ({:.1} %)",
            pct(*flagged, *n)
        );
    }

    // 2. Dependencies of real projects.
    println!("\n2. dependencies in lockfiles of well-known projects (flagged typosquat; tuned)");
    for eco in ["npm", "pypi", "go"] {
        let text = bench_file(&format!("lockfile-deps-{eco}.tsv"));
        let e: Ecosystem = eco.parse().unwrap();
        let (mut n, mut flagged, mut unlisted) = (0, 0, 0);
        for f in rows(&text) {
            n += 1;
            unlisted += usize::from(judge.detector.known().rank(e, f[0]).is_none());
            let (risk, said) = judge.judge(e, f[0]);
            if risk == Risk::Typosquat {
                flagged += 1;
                println!(
                    "   FLAG {eco:4} {} ({}): {said}",
                    f[0],
                    f.get(1).unwrap_or(&"")
                );
            }
        }
        let r = pct(flagged, n);
        met &= r <= GOAL_DEPS;
        // A listed name is never flagged: over the others, the rate the lists do not hide.
        println!(
            "   {eco:4} {flagged:4} of {n:5} flagged  {r:5.2} %  (goal <= {GOAL_DEPS} %); \
             of the {unlisted} the shipped lists do not hold: {:.2} %",
            pct(flagged, unlisted)
        );
    }

    // 3. Registry sample.
    println!(
        "\n3. seeded sample of registry names outside the shipped lists (flagged typosquat; tuned)"
    );
    let text = bench_file("registry-sample.tsv");
    let mut tally: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut examples: Vec<String> = Vec::new();
    let mut listed_since: BTreeMap<&str, usize> = BTreeMap::new();
    let sample_start = Instant::now();
    let mut sampled = 0usize;
    for f in rows(&text) {
        let [eco, name, ..] = f[..] else {
            panic!("malformed sample: {f:?}");
        };
        let e: Ecosystem = eco.parse().unwrap();
        // Drawn from outside the lists of its day; a list that grew since may hold it.
        if judge.detector.known().rank(e, name).is_some() {
            *listed_since.entry(eco).or_default() += 1;
            continue;
        }
        sampled += 1;
        let (risk, said) = judge.judge(e, name);
        let t = tally.entry(eco).or_default();
        t.0 += 1;
        if risk == Risk::Typosquat {
            t.1 += 1;
            examples.push(format!("{eco:4} {name}: {said}"));
        }
    }
    let per_name = sample_start.elapsed().as_secs_f64() * 1e6 / sampled.max(1) as f64;
    // Examples spread over the ecosystems' flags, in file order.
    let step = if show {
        1
    } else {
        (examples.len() / 30).max(1)
    };
    for e in examples
        .iter()
        .step_by(step)
        .take(if show { usize::MAX } else { 30 })
    {
        println!("   FLAG {e}");
    }
    for (eco, (n, flagged)) in &tally {
        let r = pct(*flagged, *n);
        met &= r <= GOAL_SAMPLE;
        let skipped = listed_since.get(eco).copied().unwrap_or(0);
        println!(
            "   {eco:4} {flagged:4} of {n:5} flagged  {r:5.2} %  (goal <= {GOAL_SAMPLE} %; \
             {skipped} sampled names the shipped lists now hold left out)"
        );
    }
    println!("   analysis time: {per_name:.1} µs a name (mean over the sample, one thread)");

    // 3b. Established names outside the lists.
    println!(
        "\n3b. established names outside the shipped lists, packaged by the Debian archive (flagged typosquat; tuned)"
    );
    let text = bench_file("popular-unlisted.tsv");
    let mut tally: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for f in rows(&text) {
        let [eco, name, package, ..] = f[..] else {
            panic!("malformed established name: {f:?}");
        };
        let (risk, said) = judge.judge(eco.parse().unwrap(), name);
        let t = tally.entry(eco).or_default();
        t.0 += 1;
        if risk == Risk::Typosquat {
            t.1 += 1;
            println!("   FLAG {eco:4} {name} ({package}): {said}");
        }
    }
    for (eco, (n, flagged)) in &tally {
        let r = pct(*flagged, *n);
        met &= r <= GOAL_SAMPLE;
        println!("   {eco:4} {flagged:4} of {n:5} flagged  {r:5.2} %  (goal <= {GOAL_SAMPLE} %)");
    }

    // 4. Held-out squats.
    println!(
        "\n4. formerly held-out confirmed squats (recall; tuned: rules set from these since 2026-11-27)"
    );
    let mut recall = Recall::default();
    let text = bench_file("heldout-squats.tsv");
    for f in rows(&text) {
        let [eco, name, target, technique, ..] = f[..] else {
            panic!("malformed held-out squat: {f:?}");
        };
        recall.judge(&judge, show, [eco, name, target, technique]);
    }
    recall.print();

    // 5. Untouched held-out squats.
    if tuning {
        println!("\n5. untouched held-out squats: not measured (--tuning)");
    } else {
        untouched(&judge, show);
    }

    println!("\ngoals {}", if met { "met" } else { "NOT met" });
}

/// Recall over squats whose target is known: per ecosystem, (rows, caught, rows with a
/// listed target, caught among those).
#[derive(Default)]
struct Recall<'a>(BTreeMap<&'a str, [usize; 4]>);

impl<'a> Recall<'a> {
    /// Judges one `[ecosystem, name, target, technique]` row; whether it was caught.
    fn judge(
        &mut self,
        judge: &Judge,
        show: bool,
        [eco, name, target, technique]: [&'a str; 4],
    ) -> bool {
        let e: Ecosystem = eco.parse().unwrap();
        let listed = e
            .normalize(target)
            .is_ok_and(|t| judge.detector.known().rank(e, &t).is_some());
        let (risk, said) = judge.judge(e, name);
        let caught = risk == Risk::Typosquat;
        let t = self.0.entry(eco).or_default();
        t[0] += 1;
        t[1] += usize::from(caught);
        t[2] += usize::from(listed);
        t[3] += usize::from(caught && listed);
        if show {
            let mark = if caught { "ok  " } else { "MISS" };
            let list = if listed { "" } else { ", target not listed" };
            println!("   {mark} {eco:4} {name} (imitates {target}, {technique}{list}): {said}");
        }
        caught
    }

    fn print(&self) {
        for (eco, [n, caught, listed, caught_listed]) in &self.0 {
            println!(
                "   {eco:4} {caught:4} of {n:4} caught  recall {:5.1} %;  target listed: {caught_listed:4} of {listed:4}  recall {:5.1} %",
                pct(*caught, *n),
                pct(*caught_listed, *listed)
            );
        }
    }
}

/// Part 5: `bench/untouched-squats.tsv`, recall over all rows, over the rows whose target is
/// listed, and per technique (the source's categories).
fn untouched(judge: &Judge, show: bool) {
    println!(
        "\n5. untouched held-out squats (recall; held out: rows never read while changing rules)"
    );
    let mut recall = Recall::default();
    let mut by_technique: BTreeMap<(&str, &str), (usize, usize)> = BTreeMap::new();
    let text = bench_file("untouched-squats.tsv");
    for f in rows(&text) {
        let [eco, name, target, technique, ..] = f[..] else {
            panic!("malformed untouched squat: {f:?}");
        };
        let caught = recall.judge(judge, show, [eco, name, target, technique]);
        let k = by_technique.entry((eco, technique)).or_default();
        k.0 += 1;
        k.1 += usize::from(caught);
    }
    recall.print();
    for ((eco, technique), (n, caught)) in &by_technique {
        println!("   {eco:4} {technique}: {caught} of {n}");
    }
}
