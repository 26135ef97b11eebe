//! The vendor index over generation files and a real store (SQLite in a temporary
//! directory): restarts map the newest generation, merges swap while lookups go on, a
//! crashed merge and a damaged generation are passed over, and the rolling re-verification
//! takes records that fail their HMAC out of the answers.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{TimeZone, Utc};
use lookup::VendorIndex;
use model::{Arch, HashValue, NewRecord, Platform, RecordSigner};
use sha2::{Digest as _, Sha256};
use store::Store;

const SECRET: &[u8] = b"generation tests record secret";

async fn open_store(dir: &Path, secret: &[u8]) -> Arc<dyn Store> {
    let url = format!("sqlite://{}?mode=rwc", dir.join("records.db").display());
    store::open(&url, RecordSigner::new(secret)).await.unwrap()
}

fn digest(seed: u64, len: usize) -> String {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5555;
    let mut out = String::new();
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.push_str(&format!("{state:016x}"));
    }
    out.truncate(len);
    out
}

/// Version `v` of tool `i`.
fn new_record(i: u64, v: u64) -> NewRecord {
    let version = format!("1.{v}.0");
    NewRecord {
        vendor: format!("Vendor {}", i % 3),
        executable_name: format!("tool{i}-{version}.exe"),
        version,
        platform: Platform::Windows,
        arch: Arch::Amd64,
        hash_sha256: digest(i * 1000 + v, 64),
        hash_sha1: Some(digest(i * 1000 + v + 7_000_000, 40)),
        hash_md5: i
            .is_multiple_of(2)
            .then(|| digest(i * 1000 + v + 9_000_000, 32)),
        source_url: format!("https://example.com/tool{i}"),
        download_verified: true,
        sig_signer: None,
        sig_issuer: None,
        sig_serial: None,
        sig_thumbprint: None,
        size: Some(1000 + i),
    }
}

async fn record(store: &Arc<dyn Store>, i: u64, v: u64) {
    let day = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::days(v as i64);
    store.record(new_record(i, v), day).await.unwrap();
}

/// What the index answers for `hex` (historical), as "name current".
async fn answer(index: &Arc<VendorIndex>, store: &Arc<dyn Store>, hex: &str) -> Option<String> {
    let batch = vec![HashValue::parse(hex).unwrap()];
    let fresh = index
        .lookup(store, &batch)
        .await
        .expect("the index answers");
    let found = fresh.get_batch(&batch, true);
    found[0].map(|m| format!("{} {}", m.executable_name, m.current))
}

async fn fill(store: &Arc<dyn Store>, tools: u64, versions: u64) {
    for v in 0..versions {
        for i in 0..tools {
            record(store, i, v).await;
        }
    }
}

/// A store of `tools` files of one version and the generation merged from it, its index
/// dropped: (the directory of both, the generations' directory, the store, the file).
async fn merged(tools: u64) -> (tempfile::TempDir, PathBuf, Arc<dyn Store>, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let gens = tmp.path().join("gens");
    let store = open_store(tmp.path(), SECRET).await;
    fill(&store, tools, 1).await;
    let index = Arc::new(VendorIndex::with_dir(&gens));
    index.rebuild(&store).await.unwrap();
    let (file, _, _) = index.generation().unwrap();
    (tmp, gens, store, file)
}

#[tokio::test]
async fn a_restart_maps_the_generation_and_replays_what_came_after() {
    let tmp = tempfile::tempdir().unwrap();
    let gens = tmp.path().join("vendor-generations");
    let store = open_store(tmp.path(), SECRET).await;
    fill(&store, 20, 2).await;
    let index = Arc::new(VendorIndex::with_dir(&gens));
    assert_eq!(index.rebuild(&store).await.unwrap(), 40 + 40 + 20);
    assert_eq!(index.merges(), 1);
    let (first, records, _) = index.generation().unwrap();
    assert_eq!(records, 40);
    drop(index);

    // Written while the first process is gone: a new version of tool 3.
    record(&store, 3, 2).await;
    let restarted = Arc::new(VendorIndex::with_dir(&gens));
    restarted.rebuild(&store).await.unwrap();
    assert_eq!(restarted.merges(), 0, "nothing is rebuilt at start");
    assert_eq!(restarted.generation().unwrap().0, first);
    assert!(restarted.is_fresh(&store));
    assert_eq!(
        restarted.delta_records(),
        2,
        "the new version and the one it superseded"
    );
    assert_eq!(
        answer(&restarted, &store, &digest(3002, 64))
            .await
            .as_deref(),
        Some("tool3-1.2.0.exe true")
    );
    assert_eq!(
        answer(&restarted, &store, &digest(3001 + 7_000_000, 40))
            .await
            .as_deref(),
        Some("tool3-1.1.0.exe false"),
        "superseded by the replayed change"
    );
    assert_eq!(
        answer(&restarted, &store, &digest(5001, 64))
            .await
            .as_deref(),
        Some("tool5-1.1.0.exe true")
    );

    // Another database in the same directory: the generation is not its own.
    let other_tmp = tempfile::tempdir().unwrap();
    let other = open_store(other_tmp.path(), SECRET).await;
    record(&other, 1, 0).await;
    let elsewhere = Arc::new(VendorIndex::with_dir(&gens));
    elsewhere.rebuild(&other).await.unwrap();
    assert_eq!(
        elsewhere.merges(),
        1,
        "a generation of another store is not used"
    );
    assert_eq!(answer(&elsewhere, &other, &digest(5001, 64)).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_keep_answering_while_a_merge_swaps_generations() {
    let tmp = tempfile::tempdir().unwrap();
    let gens = tmp.path().join("gens");
    let store = open_store(tmp.path(), SECRET).await;
    fill(&store, 200, 3).await;
    let index = Arc::new(VendorIndex::with_dir(&gens));
    index.rebuild(&store).await.unwrap();
    let (first, _, _) = index.generation().unwrap();
    for i in 0..50 {
        record(&store, i, 3).await;
    }
    let merging = {
        let (index, store) = (Arc::clone(&index), Arc::clone(&store));
        tokio::spawn(async move { index.merge(&store).await })
    };
    let mut rounds = 0;
    while !merging.is_finished() || rounds < 5 {
        for i in [0u64, 49, 150, 199] {
            let v = if i < 50 { 3 } else { 2 };
            assert_eq!(
                answer(&index, &store, &digest(i * 1000 + v, 64))
                    .await
                    .as_deref(),
                Some(format!("tool{i}-1.{v}.0.exe true").as_str()),
                "round {rounds}"
            );
        }
        rounds += 1;
        tokio::task::yield_now().await;
    }
    merging.await.unwrap().unwrap();
    let (second, records, _) = index.generation().unwrap();
    assert_ne!(first, second);
    assert_eq!(records, 650);
    assert_eq!(index.delta_records(), 0);
    assert!(
        !first.exists(),
        "the old generation is deleted once replaced"
    );
    assert_eq!(
        answer(&index, &store, &digest(7002, 64)).await.as_deref(),
        Some("tool7-1.2.0.exe false")
    );
}

#[tokio::test]
async fn a_crashed_merge_and_a_damaged_generation_are_passed_over() {
    let (_tmp, gens, store, good) = merged(30).await;

    // A merge killed half-way leaves its work directory; a newer file is cut short.
    let leftover = gens.join(".tmp-vendor-00000005");
    std::fs::create_dir(&leftover).unwrap();
    std::fs::write(leftover.join("entries"), vec![1u8; 5000]).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let truncated = gens.join("vendor-00000007.gen");
    std::fs::write(&truncated, &bytes[..bytes.len() - 100]).unwrap();

    let restarted = Arc::new(VendorIndex::with_dir(&gens));
    restarted.rebuild(&store).await.unwrap();
    assert_eq!(restarted.merges(), 0);
    assert_eq!(
        restarted.generation().unwrap().0,
        good,
        "the older, whole one"
    );
    assert!(!leftover.exists(), "the crashed merge's files are removed");
    assert_eq!(
        answer(&restarted, &store, &digest(12000, 64))
            .await
            .as_deref(),
        Some("tool12-1.0.0.exe true")
    );
    drop(restarted);

    // Every generation damaged: a new one is written from the store.
    std::fs::remove_file(&truncated).unwrap();
    let mut damaged = bytes.clone();
    let at = damaged.len() / 2;
    damaged[at] ^= 0x40;
    std::fs::write(&good, &damaged).unwrap();
    let rebuilt = Arc::new(VendorIndex::with_dir(&gens));
    rebuilt.rebuild(&store).await.unwrap();
    assert_eq!(rebuilt.merges(), 1, "the damaged generation is refused");
    assert_eq!(
        answer(&rebuilt, &store, &digest(12000, 64))
            .await
            .as_deref(),
        Some("tool12-1.0.0.exe true")
    );
}

#[tokio::test]
async fn a_generation_of_an_older_format_is_refused_and_replaced() {
    let (_tmp, gens, store, old) = merged(30).await;

    // The file as the previous format version labelled it, its header checksum whole.
    let mut bytes = std::fs::read(&old).unwrap();
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    let sum: [u8; 32] = Sha256::digest(&bytes[..512]).into();
    bytes[512..544].copy_from_slice(&sum);
    std::fs::write(&old, &bytes).unwrap();

    let restarted = Arc::new(VendorIndex::with_dir(&gens));
    restarted.rebuild(&store).await.unwrap();
    assert_eq!(restarted.merges(), 1, "the older format is refused");
    assert_ne!(restarted.generation().unwrap().0, old);
    assert!(!old.exists(), "the refused file is removed after the merge");
    assert_eq!(
        answer(&restarted, &store, &digest(12000, 64))
            .await
            .as_deref(),
        Some("tool12-1.0.0.exe true")
    );
}

#[tokio::test]
async fn rolling_reverification_takes_failing_records_out_of_the_answers() {
    let (tmp, gens, _store, _) = merged(10).await;

    // The same database read with another key: every stored HMAC now fails, as if the
    // rows had been altered behind the service's back after the generation was written.
    let tampered = open_store(tmp.path(), b"another key").await;
    let index = Arc::new(VendorIndex::with_dir(&gens));
    index.rebuild(&tampered).await.unwrap();
    assert_eq!(index.merges(), 0);
    let hex = digest(4000, 64);
    assert!(
        answer(&index, &tampered, &hex).await.is_some(),
        "not re-verified yet"
    );
    assert_eq!(index.reverify(&tampered, 4).await.unwrap(), 4);
    assert_eq!(index.reverified(), 4);
    assert_eq!(index.reverify_failures(), 4);
    assert_eq!(
        index.reverify(&tampered, 100).await.unwrap(),
        6,
        "the rest of the pass"
    );
    assert_eq!(index.reverify_failures(), 10);
    assert_eq!(answer(&index, &tampered, &hex).await, None);
    // The next pass starts over from the first record.
    assert_eq!(index.reverify(&tampered, 3).await.unwrap(), 3);
}
