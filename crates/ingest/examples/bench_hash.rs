//! The one-pass triple hasher against `sha256sum`, `sha1sum` and `md5sum` run one after the
//! other on the same bytes (from a tmpfs file), in the same run.
//!
//! ```text
//! cargo run --release -p ingest --example bench_hash -- [MiB, default 1024] [chunk KiB, default 64]
//! ```
//!
//! The goal: the triple hasher costs about as much as the slowest single algorithm (MD5), so
//! the printed ratio (triple time / slowest tool time) should be close to 1.

use std::error::Error;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use aws_lc_rs::digest;
use bytes::Bytes;
use ingest::TripleHasher;
use md5::Digest as _;
use rand::RngCore;

/// Each measurement is the best of this many runs.
const RUNS: usize = 3;

fn best(
    mut f: impl FnMut() -> Result<String, Box<dyn Error>>,
) -> Result<(Duration, String), Box<dyn Error>> {
    let mut fastest = Duration::MAX;
    let mut out = String::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        out = f()?;
        fastest = fastest.min(started.elapsed());
    }
    Ok((fastest, out))
}

fn tool(name: &str, path: &Path) -> Result<String, Box<dyn Error>> {
    let out = Command::new(name).arg(path).output()?;
    if !out.status.success() {
        return Err(format!("{name} failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    let text = String::from_utf8(out.stdout)?;
    Ok(text
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned())
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let mib: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1024);
    let chunk_kib: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(64);
    let size = mib << 20;
    let chunk = (chunk_kib << 10).max(1);

    let mut data = vec![0u8; size];
    rand::rng().fill_bytes(&mut data);
    let data = Bytes::from(data);

    // tmpfs keeps the baseline tools off the disk, as the hasher is.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let file = tempfile::NamedTempFile::new_in(&dir)?;
    std::fs::write(file.path(), &data)?;

    println!(
        "{mib} MiB of random bytes, {chunk_kib} KiB chunks, best of {RUNS} runs, file in {}",
        dir.display()
    );
    let mb = size as f64 / 1e6;
    let report = |label: &str, t: Duration| {
        println!(
            "{label:<28} {:>8.3} s {:>8.0} MB/s",
            t.as_secs_f64(),
            mb / t.as_secs_f64()
        );
    };

    let (triple_time, sums) = best(|| {
        let mut h = TripleHasher::new()?;
        let mut at = 0;
        while at < data.len() {
            let end = (at + chunk).min(data.len());
            h.update_blocking(data.slice(at..end))?;
            at = end;
        }
        let d = h.finish()?;
        Ok(format!("{} {} {}", d.sha256, d.sha1, d.md5))
    })?;
    report("triple hasher (3 threads)", triple_time);

    // The same algorithms one at a time in this process, for reference.
    let single = |algo: &'static digest::Algorithm| {
        let data = &data;
        best(move || {
            let mut c = digest::Context::new(algo);
            for piece in data.chunks(chunk) {
                c.update(piece);
            }
            Ok(hex::encode(c.finish().as_ref()))
        })
    };
    report("aws-lc-rs SHA-256 alone", single(&digest::SHA256)?.0);
    report(
        "aws-lc-rs SHA-1 alone",
        single(&digest::SHA1_FOR_LEGACY_USE_ONLY)?.0,
    );
    let (md5_time, _) = best(|| {
        let mut m = md5::Md5::new();
        for piece in data.chunks(chunk) {
            m.update(piece);
        }
        Ok(hex::encode(m.finalize()))
    })?;
    report("md-5 MD5 alone", md5_time);

    let mut slowest_tool = Duration::ZERO;
    let mut tool_total = Duration::ZERO;
    let mut tool_sums = Vec::new();
    for name in ["sha256sum", "sha1sum", "md5sum"] {
        let (t, sum) = best(|| tool(name, file.path()))?;
        report(name, t);
        slowest_tool = slowest_tool.max(t);
        tool_total += t;
        tool_sums.push(sum);
    }
    report("the three tools in sequence", tool_total);

    if sums != tool_sums.join(" ") {
        return Err(format!(
            "digests differ: triple {sums}, tools {}",
            tool_sums.join(" ")
        )
        .into());
    }
    println!(
        "ratio triple / slowest tool = {:.2}; triple / three tools in sequence = {:.2} (digests agree)",
        triple_time.as_secs_f64() / slowest_tool.as_secs_f64(),
        triple_time.as_secs_f64() / tool_total.as_secs_f64()
    );
    Ok(())
}
