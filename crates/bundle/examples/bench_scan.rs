//! `knowngood scan` against `md5sum` alone over the same files, and offline classification
//! per hash against the server's lookup route, in one run.
//!
//! ```text
//! cargo build --release -p knowngood && \
//!   cargo run --release -p bundle --example bench_scan -- [--files 10000] [--mib 2048] [--dir /tmp/kg-bench-scan]
//! ```
//!
//! 1. Generates `--files` files of random bytes totalling `--mib` MiB under `--dir`, reads
//!    them once so they are in the page cache, and writes a signed bundle beside them.
//!    Then, best of three each: `md5sum` over every file (one process, as a user would
//!    run it) and `knowngood scan --offline` over the tree (walk, SHA-256 + SHA-1 + MD5 of
//!    every file, classification, CSV to /dev/null). Prints md5sum time / scan time: the
//!    goal is >= 0.85. The tree is deleted at the end.
//! 2. Classifies 1,000,000 SHA-256s (half in the bundle) offline, and the same hashes, 100
//!    per request over four connections, through `POST /api/v1/intel/lookup` of a server
//!    on loopback; prints hashes per second of each and their ratio.
//!
//! The binary is the release `knowngood` beside this example's directory.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use chrono::Utc;
use rand::RngCore as _;

const RUNS: usize = 3;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn knowngood_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("knowngood");
    assert!(
        bin.is_file(),
        "no knowngood binary at {}: cargo build --release -p knowngood first",
        bin.display()
    );
    bin
}

fn best_of(mut run: impl FnMut()) -> f64 {
    (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            run();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn generate(dir: &Path, files: usize, mib: usize) -> Vec<PathBuf> {
    let per_file = (mib << 20) / files.max(1);
    let mut rng = rand::rng();
    let mut buf = vec![0u8; per_file];
    let mut paths = Vec::with_capacity(files);
    for i in 0..files {
        let sub = dir.join(format!("d{:03}", i / 100));
        std::fs::create_dir_all(&sub).unwrap();
        rng.fill_bytes(&mut buf);
        let path = sub.join(format!("f{i:05}.bin"));
        std::fs::write(&path, &buf).unwrap();
        paths.push(path);
    }
    paths
}

/// A bundle signed by a fresh key, whose feed names `known` SHA-256s.
fn write_bundle(dir: &Path, known: &[String]) -> String {
    let key = ed25519_dalek::SigningKey::from_bytes(&rand::random::<[u8; 32]>());
    let names: Vec<String> = (0..known.len()).map(|i| format!("tool{i}.exe")).collect();
    let leaves: Vec<translog::Record<'_>> = names
        .iter()
        .zip(known)
        .map(|(name, sha)| translog::Record {
            executable_name: name,
            hash_sha256: sha,
            version: "1.0",
            platform: "windows",
            arch: "amd64",
        })
        .collect();
    let hashes: Vec<_> = leaves.iter().map(|l| l.leaf_hash().unwrap()).collect();
    let hashes = translog::merkle::sorted_unique_leaves(hashes);
    let date = Utc::now().date_naive();
    let signed = translog::SignedRoot::sign(
        &key,
        date,
        translog::merkle::merkle_root(&hashes),
        hashes.len() as u64,
        translog::GENESIS_PREV_ROOT,
    );
    let root = bundle::RootDoc {
        log_date: date.format("%Y-%m-%d").to_string(),
        merkle_root: signed.merkle_root_hex(),
        entry_count: hashes.len() as u64,
        prev_root: signed.prev_root_hex(),
        signature: signed.signature_base64(),
        key_id: "bench".into(),
    };
    let vendor = bundle::write_vendor_filters_into(|_, _| {}, dir).unwrap();
    let mut feed =
        bundle::FeedWriter::new(std::fs::File::create(dir.join(bundle::FEED_FILE)).unwrap());
    for leaf in &leaves {
        feed.push(leaf, None).unwrap();
    }
    let (feed, _) = feed.finish().unwrap();
    let inputs = bundle::Inputs {
        vendor: &vendor,
        root: &root,
        feed: &feed,
        corpus: None,
        now: Utc::now(),
    };
    bundle::build(&inputs, &key, "bench")
        .unwrap()
        .write(dir)
        .unwrap();
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(key.verifying_key().to_bytes())
}

fn main() {
    let files: usize = arg("--files").map_or(10_000, |v| v.parse().unwrap());
    let mib: usize = arg("--mib").map_or(2048, |v| v.parse().unwrap());
    let dir = PathBuf::from(arg("--dir").unwrap_or_else(|| "/tmp/kg-bench-scan".into()));
    let bin = knowngood_bin();
    let _ = std::fs::remove_dir_all(&dir);
    let tree = dir.join("tree");
    let bundle_dir = dir.join("bundle");

    println!(
        "generating {files} files, {mib} MiB, under {}",
        tree.display()
    );
    let paths = generate(&tree, files, mib);
    // Into the page cache, and the SHA-256s of a few for the bundle's feed.
    let mut known = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let bytes = std::fs::read(p).unwrap();
        if i % 10 == 0 {
            known.push(hex::encode(sha2::Digest::finalize(
                <sha2::Sha256 as sha2::Digest>::new_with_prefix(&bytes),
            )));
        }
    }
    let trust = write_bundle(&bundle_dir, &known);

    let list = dir.join("files.txt");
    let mut f = std::fs::File::create(&list).unwrap();
    for p in &paths {
        writeln!(f, "{}", p.display()).unwrap();
    }
    drop(f);
    let md5sum = best_of(|| {
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!("xargs -a {} md5sum > /dev/null", list.display()))
            .status()
            .unwrap();
        assert!(status.success());
    });
    let scan = best_of(|| {
        let out = Command::new(&bin)
            .args(["scan", "--offline"])
            .arg(&bundle_dir)
            .args(["--trust-key", &trust, "--format", "csv"])
            .arg(&tree)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    let gb = (mib as f64) * 1.048_576 / 1000.0;
    println!(
        "md5sum alone: {md5sum:.2} s ({:.0} MB/s); knowngood scan --offline (SHA-256+SHA-1+MD5, classify): {scan:.2} s ({:.0} MB/s)",
        gb * 1000.0 / md5sum,
        gb * 1000.0 / scan
    );
    println!("ratio md5sum / scan = {:.2} (goal >= 0.85)", md5sum / scan);
    std::fs::remove_dir_all(&dir).unwrap();

    // Per-hash offline classification.
    let offline_dir = tempfile::tempdir().unwrap();
    let known: Vec<String> = (0..10_000u32)
        .map(|i| {
            hex::encode(sha2::Digest::finalize(
                <sha2::Sha256 as sha2::Digest>::new_with_prefix(i.to_le_bytes()),
            ))
        })
        .collect();
    let key = write_bundle(offline_dir.path(), &known);
    let verified =
        bundle::verify_dir(offline_dir.path(), &bundle::parse_public_key(&key).unwrap()).unwrap();
    let queries: Vec<String> = (0..1_000_000u32)
        .map(|i| {
            if i % 2 == 0 {
                known[(i as usize / 2) % known.len()].clone()
            } else {
                hex::encode(rand::random::<[u8; 32]>())
            }
        })
        .collect();
    let t = Instant::now();
    let hits = queries
        .iter()
        .filter(|q| !matches!(verified.classify(q), bundle::OfflineVerdict::Unknown))
        .count();
    let offline_rate = queries.len() as f64 / t.elapsed().as_secs_f64();
    assert!(hits >= queries.len() / 2);
    println!("offline classification: {offline_rate:.0} hashes/s");
    let server_rate = server_rate(&bin, &queries[..200_000]);
    println!(
        "server lookup route (100 per request, 4 connections, loopback): {server_rate:.0} hashes/s; offline / server = {:.1}",
        offline_rate / server_rate
    );
}

/// Hashes per second through `POST /api/v1/intel/lookup` of a `knowngood serve` on
/// loopback (a fresh data dir, limits lifted, the records imported first).
fn server_rate(bin: &Path, queries: &[String]) -> f64 {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let config = work.path().join("kg.toml");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        &config,
        format!("listen = \"127.0.0.1:{port}\"\n[limits]\nauthenticated_per_key = 100000000\n"),
    )
    .unwrap();
    let kg = |args: &[&str]| {
        let out = Command::new(bin)
            .args(args)
            .arg("--data-dir")
            .arg(&data)
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    kg(&["admin", "bootstrap"]);
    let key = kg(&[
        "admin",
        "create-account",
        "--team",
        "bench",
        "--tier",
        "enterprise",
        "--role",
        "analyst",
    ]);
    let mut server = Command::new(bin)
        .args(["serve", "--data-dir"])
        .arg(&data)
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let rate = rt.block_on(async {
        let client = reqwest::Client::new();
        for _ in 0..100 {
            if client
                .get(format!("{base}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let batches: Vec<Vec<String>> = queries.chunks(100).map(<[String]>::to_vec).collect();
        let per_worker = batches.len().div_ceil(4);
        let t = Instant::now();
        let mut tasks = Vec::new();
        for chunk in batches.chunks(per_worker) {
            let chunk = chunk.to_vec();
            let client = client.clone();
            let (base, key) = (base.clone(), key.clone());
            tasks.push(tokio::spawn(async move {
                for batch in chunk {
                    let r = client
                        .post(format!("{base}/api/v1/intel/lookup"))
                        .header("X-API-Key", &key)
                        .json(&serde_json::json!({ "hashes": batch }))
                        .send()
                        .await
                        .unwrap();
                    assert!(r.status().is_success(), "{}", r.status());
                    r.bytes().await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        queries.len() as f64 / t.elapsed().as_secs_f64()
    });
    let _ = server.kill();
    let _ = server.wait();
    rate
}
