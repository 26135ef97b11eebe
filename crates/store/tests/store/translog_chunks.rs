//! The transparency log's chunk roots on both backends: stored with a day's leaves when it
//! is published, read back in order, filled in for a day published without them, never
//! replaced; and the position of a leaf by its file's SHA-256.

use chrono::NaiveDate;
use store::roots::{LeafRow, StoredRoot};
use testkit::{Db, hex_of, t};
use translog::chunk::{CHUNK_LEAVES, chunk_roots};
use translog::encoding::hash_to_hex;
use translog::{Hash, Record};

testkit::backend_tests!(
    chunk_roots_round_trip,
    missing_chunk_roots_are_filled_once,
    leaf_positions_are_the_first_of_each_file,
    a_malformed_leaf_hash_stores_nothing,
);

pub(crate) fn date(s: &str) -> NaiveDate {
    s.parse().unwrap()
}

/// The leaf of `tool-{n}.exe` with the SHA-256 `hex_of(file)`, one version and platform.
pub(crate) fn leaf(n: u64, file: u64) -> LeafRow {
    let (name, sha) = (format!("tool-{n}.exe"), hex_of(file, 64));
    let hash = Record {
        executable_name: &name,
        hash_sha256: &sha,
        version: "1.0",
        platform: "windows",
        arch: "amd64",
    }
    .leaf_hash()
    .unwrap();
    LeafRow {
        leaf_hash: hash_to_hex(&hash),
        executable_name: name,
        hash_sha256: sha,
        version: "1.0".into(),
        platform: "windows".into(),
        arch: "amd64".into(),
    }
}

/// `n` leaves in tree order; leaf `i`'s file is `hex_of(files[i])`.
fn leaves(files: impl IntoIterator<Item = u64>) -> Vec<LeafRow> {
    let mut rows: Vec<LeafRow> = (0..).zip(files).map(|(i, file)| leaf(i, file)).collect();
    rows.sort_by(|a, b| a.leaf_hash.cmp(&b.leaf_hash));
    rows
}

pub(crate) fn hashes(rows: &[LeafRow]) -> Vec<Hash> {
    rows.iter()
        .map(|r| translog::encoding::parse_hash_hex("leaf", &r.leaf_hash).unwrap())
        .collect()
}

/// A root row for `day` over `rows` (its fields are not checked by the store).
pub(crate) fn root(day: &str, rows: &[LeafRow]) -> StoredRoot {
    StoredRoot {
        log_date: date(day),
        merkle_root: hash_to_hex(&translog::merkle_root(&hashes(rows))),
        entry_count: rows.len() as u64,
        prev_root: "0".repeat(64),
        signature: "c2lnbmF0dXJl".into(),
        key_id: "0011223344556677".into(),
        published_at: t(&format!("{day}T08:00:00Z")),
    }
}

async fn chunk_roots_round_trip(db: Db) {
    let store = db.store.as_ref();
    // Sizes around the chunk boundaries, one day each (more than one insert batch of
    // chunk roots on the last day).
    let sizes = [
        0,
        1,
        CHUNK_LEAVES - 1,
        CHUNK_LEAVES,
        CHUNK_LEAVES + 1,
        2 * CHUNK_LEAVES + 3,
    ];
    for (n, size) in sizes.into_iter().enumerate() {
        let day = format!("2025-03-{:02}", 10 + n);
        let rows = leaves((0..size as u64).map(|i| 1000 * n as u64 + i));
        store.publish_root(&root(&day, &rows), &rows).await.unwrap();
        let stored = store.chunk_roots(date(&day)).await.unwrap();
        assert_eq!(stored, chunk_roots(&hashes(&rows)), "{size} leaves");
        assert_eq!(
            translog::chunk::root_from_chunk_roots(&stored),
            translog::merkle_root(&hashes(&rows)),
            "{size} leaves"
        );
    }
    assert!(
        store
            .chunk_roots(date("2025-04-01"))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn missing_chunk_roots_are_filled_once(db: Db) {
    let store = db.store.as_ref();
    let rows = leaves(0..(3 * CHUNK_LEAVES as u64));
    let want = chunk_roots(&hashes(&rows));
    // A root stored by hand with its leaves but no chunk roots, as before they existed.
    let day = date("2025-03-10");
    let r = root("2025-03-10", &rows);
    db.exec(
        &format!(
            "INSERT INTO translog_roots (log_date, merkle_root, entry_count, prev_root, \
             signature, key_id, published_at) VALUES ('{}', '{}', {}, '{}', '{}', '{}', \
             '2025-03-10T08:00:00+00:00')",
            r.log_date, r.merkle_root, r.entry_count, r.prev_root, r.signature, r.key_id
        ),
        &[],
    )
    .await;
    assert!(store.chunk_roots(day).await.unwrap().is_empty());
    store.store_chunk_roots(day, &want).await.unwrap();
    assert_eq!(store.chunk_roots(day).await.unwrap(), want);
    // Storing again (another server) keeps the first rows.
    store
        .store_chunk_roots(day, &[[0u8; 32], [1u8; 32]])
        .await
        .unwrap();
    assert_eq!(store.chunk_roots(day).await.unwrap(), want);
    // Chunk roots belong to a published day.
    assert!(
        store
            .store_chunk_roots(date("2025-03-11"), &want)
            .await
            .is_err()
    );
}

async fn leaf_positions_are_the_first_of_each_file(db: Db) {
    let store = db.store.as_ref();
    // File 7 is in two leaves (two names).
    let rows = leaves([1, 2, 7, 7, 9]);
    let day = date("2025-03-10");
    store
        .publish_root(&root("2025-03-10", &rows), &rows)
        .await
        .unwrap();
    for (i, row) in rows.iter().enumerate() {
        let first = rows
            .iter()
            .position(|r| r.hash_sha256 == row.hash_sha256)
            .unwrap();
        assert_eq!(
            store.leaf_of(day, &row.hash_sha256).await.unwrap(),
            Some((first as u64, rows[first].clone())),
            "leaf {i}"
        );
    }
    assert_eq!(store.leaf_of(day, &hex_of(3, 64)).await.unwrap(), None);
    assert_eq!(
        store
            .leaf_of(date("2025-03-11"), &rows[0].hash_sha256)
            .await
            .unwrap(),
        None
    );
    // A range of leaf hashes, in tree order, cut at the day's end.
    let hash = |r: &store::roots::LeafRow| {
        translog::encoding::parse_hash_hex("leaf_hash", &r.leaf_hash).unwrap()
    };
    let all: Vec<_> = rows.iter().map(hash).collect();
    assert_eq!(store.leaf_hashes(day, 0, 256).await.unwrap(), all);
    assert_eq!(
        store.leaf_hashes(day, 1, 2).await.unwrap(),
        all[1..3].to_vec()
    );
    assert!(store.leaf_hashes(day, 5, 256).await.unwrap().is_empty());
    assert!(
        store
            .leaf_hashes(date("2025-03-11"), 0, 256)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_malformed_leaf_hash_stores_nothing(db: Db) {
    let store = db.store.as_ref();
    let mut rows = leaves(0..5);
    let r = root("2025-03-10", &rows);
    rows[3].leaf_hash = "not hex".into();
    let day = date("2025-03-10");
    assert!(store.publish_root(&r, &rows).await.is_err());
    assert_eq!(store.root(day).await.unwrap(), None);
    assert!(store.leaves_page(day, 0, 10).await.unwrap().is_empty());
    assert!(store.chunk_roots(day).await.unwrap().is_empty());
}
