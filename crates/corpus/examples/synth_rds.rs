//! Writes a synthetic NSRL RDS v3 SQLite database.
//!
//! `cargo run --release -p corpus --example synth_rds -- --out PATH [--layout minimal|full]
//!  [--n N] [--seed S] [--rows-per-hash R]`

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

use std::path::PathBuf;
use std::time::Instant;

use corpus::Layout;
use corpus::synth::{SynthOptions, write_rds_with};

fn main() {
    let mut out: Option<PathBuf> = None;
    let mut options = SynthOptions {
        layout: Layout::Minimal,
        n_distinct: 1_000_000,
        seed: 7,
        rows_per_hash: 6,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_default();
        let number = || value.replace('_', "").parse::<u64>().ok();
        match flag.as_str() {
            "--out" => out = Some(PathBuf::from(&value)),
            "--layout" if value == "minimal" => options.layout = Layout::Minimal,
            "--layout" if value == "full" => options.layout = Layout::Full,
            "--n" if number().is_some() => options.n_distinct = number().unwrap_or(0),
            "--seed" if number().is_some() => options.seed = number().unwrap_or(0),
            "--rows-per-hash" if number().is_some() => {
                options.rows_per_hash = number().unwrap_or(6).clamp(1, 1000) as u32;
            }
            _ => usage(&format!("bad argument {flag} {value}")),
        }
    }
    let Some(out) = out else {
        usage("--out is required")
    };
    let started = Instant::now();
    match write_rds_with(&out, &options) {
        Ok(stats) => {
            let secs = started.elapsed().as_secs_f64();
            println!(
                "{}: {} FILE rows, {} distinct SHA-256, {} packages in {secs:.1} s ({:.0} rows/s)",
                out.display(),
                stats.file_rows,
                stats.distinct_sha256,
                stats.packages,
                stats.file_rows as f64 / secs
            );
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "{problem}\nusage: synth_rds --out PATH [--layout minimal|full] [--n N] [--seed S] [--rows-per-hash R]"
    );
    std::process::exit(2);
}
