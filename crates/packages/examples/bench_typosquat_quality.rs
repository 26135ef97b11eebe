//! Typosquat detection quality over labelled real cases (`bench/typosquat-cases.tsv`):
//! per ecosystem and split, the recall on confirmed malicious look-alikes (flagged
//! `typosquat`) and the false-alarm rate on legitimate popular look-alikes (anything but
//! `known` or `clear`). The detector runs on the shipped popular-name lists only; this
//! program is the only reader of the cases.
//!
//! cargo run --release -p packages --example bench_typosquat_quality [-- --show]

#![allow(clippy::unwrap_used, clippy::expect_used)] // benchmarks fail loudly

use std::collections::{BTreeMap, HashSet};

use packages::{Detector, Ecosystem, KnownNames, Risk};

#[derive(Default)]
struct Tally {
    malicious: u32,
    caught: u32,
    legitimate: u32,
    false_alarms: u32,
}

fn pct(n: u32, d: u32) -> String {
    if d == 0 {
        "   n/a".to_string()
    } else {
        format!("{:5.1}%", f64::from(n) * 100.0 / f64::from(d))
    }
}

fn main() {
    let show = std::env::args().any(|a| a == "--show");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/typosquat-cases.tsv");
    let text = std::fs::read_to_string(path).expect("cases file");
    let detector = Detector::new(KnownNames::shipped());
    let none = HashSet::new();
    let mut tallies: BTreeMap<(String, String), Tally> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let [ecosystem, name, label, target, split, ..] = f[..] else {
            panic!("malformed case line: {line}");
        };
        let e: Ecosystem = ecosystem.parse().unwrap();
        let v = detector.analyse(e, name, &none, false);
        let risk = v.as_ref().map_or(Risk::Clear, |v| v.risk);
        let ok = match label {
            "malicious" => risk == Risk::Typosquat,
            "legitimate" => matches!(risk, Risk::Known | Risk::Clear),
            other => panic!("unknown label {other}"),
        };
        if show || !ok {
            let mark = if ok { "ok  " } else { "MISS" };
            let said = v.map_or_else(
                |e| e.to_string(),
                |v| format!("{} {:?} ({})", v.risk.as_str(), v.nearest_known, v.reason),
            );
            println!("{mark} {ecosystem:5} {label:10} {name} (target {target}): {said}");
        }
        for key in [
            (ecosystem.to_string(), split.to_string()),
            (ecosystem.to_string(), "all".to_string()),
            ("all".to_string(), "all".to_string()),
        ] {
            let t = tallies.entry(key).or_default();
            if label == "malicious" {
                t.malicious += 1;
                t.caught += u32::from(ok);
            } else {
                t.legitimate += 1;
                t.false_alarms += u32::from(!ok);
            }
        }
    }
    println!(
        "\n{:6} {:5} {:>10} {:>8} {:>12} {:>12}",
        "eco", "split", "malicious", "recall", "legitimate", "false alarm"
    );
    for ((eco, split), t) in &tallies {
        println!(
            "{eco:6} {split:5} {:>10} {:>8} {:>12} {:>12}",
            t.malicious,
            pct(t.caught, t.malicious),
            t.legitimate,
            pct(t.false_alarms, t.legitimate)
        );
    }
}
