//! The transparency log's leaves stored once, on both backends: days whose leaves enter,
//! leave and come back read back exactly as their sorted lists (leaves, pages, positions,
//! chunk hashes and roots), a day that changed nothing writes no entry or exit, days
//! written before migration 0025 (one row per leaf per day) read back the same after it,
//! and so do days stored with hex hashes (0025) once 0026 stores them as bytes.

use std::collections::BTreeSet;

use chrono::NaiveDate;
use model::RecordSigner;
use store::Store;
use store::roots::{LeafRow, StoredRoot};
use testkit::{Db, hex_of};
use translog::MerkleTree;
use translog::chunk::{CHUNK_LEAVES, ChunkedTree, chunk_roots};
use translog::encoding::hash_to_hex;

use crate::migration::{migrate_below, migrate_from, raw};
use crate::translog_chunks::{date, hashes, root};

testkit::backend_tests!(
    leaves_enter_leave_and_come_back,
    an_entry_forged_below_the_days_first_leaf_is_counted_in_it,
    days_written_before_0025_read_the_same_after_it,
    days_stored_as_hex_read_the_same_as_bytes,
);

/// The leaf of file `file`: its own executable, one version and platform.
fn leaf(file: u64) -> LeafRow {
    crate::translog_chunks::leaf(file, file)
}

/// The tree of a day over `files`: their leaves sorted by leaf hash.
fn tree(files: &BTreeSet<u64>) -> Vec<LeafRow> {
    let mut rows: Vec<LeafRow> = files.iter().map(|f| leaf(*f)).collect();
    rows.sort_by(|a, b| a.leaf_hash.cmp(&b.leaf_hash));
    rows
}

async fn rows_of(db: &Db, url: &str, table: &str) -> i64 {
    testkit::db::scalar(db.backend, url, &format!("SELECT COUNT(*) FROM {table}")).await
}

/// Every read of `day` agrees with `want`, the day's sorted leaves: all of them, pages
/// from and across chunk boundaries, every chunk's hashes, positions by SHA-256 (with the
/// proofs they give), and the chunk roots (unless `chunk_roots_stored` is false: none).
async fn check_day(store: &dyn Store, day: NaiveDate, want: &[LeafRow], chunk_roots_stored: bool) {
    let n = want.len();
    assert_eq!(store.leaves(day).await.unwrap(), want, "{day}: leaves");
    let mut pages = vec![
        (0, 5_000),
        (0, 1),
        (1, 3),
        (n.saturating_sub(1), 10),
        (n, 10),
    ];
    for boundary in (CHUNK_LEAVES..n).step_by(CHUNK_LEAVES) {
        pages.extend([(boundary - 1, 2), (boundary, 300), (boundary + 7, 256)]);
    }
    for (from, limit) in pages {
        let page = store
            .leaves_page(day, from as u64, limit as u32)
            .await
            .unwrap();
        assert_eq!(
            page,
            want[from.min(n)..(from + limit).min(n)],
            "{day}: page {from}+{limit}"
        );
    }
    let all = hashes(want);
    for start in (0..n).step_by(CHUNK_LEAVES) {
        let got = store
            .leaf_hashes(day, start as u64, CHUNK_LEAVES as u32)
            .await
            .unwrap();
        assert_eq!(
            got,
            all[start..(start + CHUNK_LEAVES).min(n)],
            "{day}: chunk at {start}"
        );
    }
    let roots = chunk_roots(&all);
    if chunk_roots_stored {
        assert_eq!(
            store.chunk_roots(day).await.unwrap(),
            roots,
            "{day}: chunk roots"
        );
    } else {
        assert!(store.chunk_roots(day).await.unwrap().is_empty(), "{day}");
    }
    let chunked = ChunkedTree::new(n as u64, roots).unwrap();
    let whole = MerkleTree::from_ordered_leaves(all.clone());
    let mut picks: BTreeSet<usize> = (0..n).step_by(13).collect();
    for boundary in (CHUNK_LEAVES..n).step_by(CHUNK_LEAVES) {
        picks.extend([boundary - 1, boundary]);
    }
    if n > 0 {
        picks.insert(n - 1);
    }
    for i in picks {
        let (index, row) = store
            .leaf_of(day, &want[i].hash_sha256)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{day}: leaf {i} not found"));
        assert_eq!((index, &row), (i as u64, &want[i]), "{day}: leaf {i}");
        let start = translog::chunk::chunk_start(translog::chunk::chunk_of(index));
        let chunk = store
            .leaf_hashes(day, start, CHUNK_LEAVES as u32)
            .await
            .unwrap();
        assert_eq!(
            chunked.inclusion_proof(index, &chunk).unwrap(),
            whole.inclusion_proof(i).unwrap(),
            "{day}: proof of leaf {i}"
        );
    }
}

async fn publish(store: &dyn Store, day: &str, rows: &[LeafRow]) -> StoredRoot {
    store.publish_root(&root(day, rows), rows).await.unwrap()
}

async fn leaves_enter_leave_and_come_back(db: Db) {
    let store = db.store.as_ref();
    let day1: BTreeSet<u64> = (0..600).collect();
    // Two days later (none published between): 11 files leave, 50 enter.
    let mut day2 = day1.clone();
    day2.retain(|f| !(10..20).contains(f) && *f != 300);
    day2.extend(1000..1050);
    // Six come back, five of the new ones leave.
    let mut day3 = day2.clone();
    day3.extend((10..15).chain([300]));
    day3.retain(|f| !(1000..1005).contains(f));
    // Nothing changes.
    let day4 = day3.clone();
    let plan = [
        ("2025-03-10", &day1, 600, 0),
        ("2025-03-12", &day2, 650, 11),
        ("2025-03-13", &day3, 656, 16),
        ("2025-03-14", &day4, 656, 16),
    ];
    for (day, files, entries, exits) in plan {
        publish(store, day, &tree(files)).await;
        assert_eq!(
            rows_of(&db, &db.url, "translog_entries").await,
            entries,
            "{day}"
        );
        assert_eq!(
            rows_of(&db, &db.url, "translog_exits").await,
            exits,
            "{day}"
        );
        check_day(store, date(day), &tree(files), true).await;
    }
    // Later days change nothing of the earlier ones.
    for (day, files, _, _) in plan {
        check_day(store, date(day), &tree(files), true).await;
    }
    // A file absent from a day has no position in it, nor does a day never published.
    assert_eq!(
        store
            .leaf_of(date("2025-03-12"), &hex_of(300, 64))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .leaf_of(date("2025-03-11"), &hex_of(1, 64))
            .await
            .unwrap(),
        None
    );
    assert!(store.leaves(date("2025-03-11")).await.unwrap().is_empty());
    assert!(
        store
            .leaves_page(date("2025-03-15"), 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Publishing a day again writes nothing.
    publish(store, "2025-03-14", &tree(&day1)).await;
    assert_eq!(rows_of(&db, &db.url, "translog_entries").await, 656);
    check_day(store, date("2025-03-14"), &tree(&day4), true).await;
    // Leaves out of tree order are refused, and store nothing.
    let mut unsorted = tree(&day4);
    unsorted.swap(3, 4);
    assert!(
        store
            .publish_root(&root("2025-03-15", &unsorted), &unsorted)
            .await
            .is_err()
    );
    assert_eq!(store.root(date("2025-03-15")).await.unwrap(), None);
    // A day before a published one would change the later day's tree: refused.
    assert!(
        store
            .publish_root(&root("2025-03-11", &tree(&day1)), &tree(&day1))
            .await
            .is_err()
    );
    check_day(store, date("2025-03-12"), &tree(&day2), true).await;
    // An empty day: every leaf leaves; they come back the day after as new entries.
    publish(store, "2025-03-15", &[]).await;
    check_day(store, date("2025-03-15"), &[], true).await;
    assert_eq!(day4.len(), 640);
    assert_eq!(rows_of(&db, &db.url, "translog_exits").await, 16 + 640);
    publish(store, "2025-03-16", &tree(&day1)).await;
    assert_eq!(rows_of(&db, &db.url, "translog_entries").await, 656 + 600);
    check_day(store, date("2025-03-16"), &tree(&day1), true).await;
    check_day(store, date("2025-03-14"), &tree(&day4), true).await;
}

/// A published day as the store wrote it before migration 0025: its root row, a row per
/// leaf, and its chunk roots unless `with_chunks` is false.
fn old_day_sql(day: &str, rows: &[LeafRow], with_chunks: bool) -> String {
    let r = root(day, rows);
    let mut sql = format!(
        "INSERT INTO translog_roots (log_date, merkle_root, entry_count, prev_root, \
         signature, key_id, published_at) VALUES ('{day}', '{}', {}, '{}', '{}', '{}', \
         '{day}T08:00:00+00:00');\n",
        r.merkle_root, r.entry_count, r.prev_root, r.signature, r.key_id
    );
    for (i, l) in rows.iter().enumerate() {
        sql.push_str(&format!(
            "INSERT INTO translog_leaves (log_date, leaf_index, leaf_hash, executable_name, \
             hash_sha256, version, platform, arch) VALUES ('{day}', {i}, '{}', '{}', '{}', \
             '{}', '{}', '{}');\n",
            l.leaf_hash, l.executable_name, l.hash_sha256, l.version, l.platform, l.arch
        ));
    }
    if with_chunks {
        for (i, c) in chunk_roots(&hashes(rows)).iter().enumerate() {
            sql.push_str(&format!(
                "INSERT INTO translog_chunks (log_date, chunk_index, chunk_root) \
                 VALUES ('{day}', {i}, '{}');\n",
                hash_to_hex(c)
            ));
        }
    }
    sql
}

/// Four days written as the service wrote them before 0025, into the database at `url`:
/// files 0-299; then, a calendar day skipped, file 5 leaves and `entering` enter; then
/// file 5 comes back and file 7 leaves; then the same leaves again, published without
/// chunk roots. Returns each day's date, files and whether its chunk roots are stored.
async fn write_old_days(
    db: &Db,
    url: &str,
    entering: std::ops::Range<u64>,
) -> [(&'static str, BTreeSet<u64>, bool); 4] {
    let day1: BTreeSet<u64> = (0..300).collect();
    let mut day2 = day1.clone();
    day2.remove(&5);
    day2.extend(entering);
    let mut day3 = day2.clone();
    day3.insert(5);
    day3.remove(&7);
    let day4 = day3.clone();
    let plan = [
        ("2025-03-10", day1, true),
        ("2025-03-12", day2, true),
        ("2025-03-13", day3, true),
        ("2025-03-14", day4, false),
    ];
    let mut sql = String::new();
    for (day, files, with_chunks) in &plan {
        sql.push_str(&old_day_sql(day, &tree(files), *with_chunks));
    }
    raw(db.backend, url, &sql).await;
    plan
}

async fn days_written_before_0025_read_the_same_after_it(db: Db) {
    let url = db.scratch.new_url().await;
    migrate_below(db.backend, &url, 25).await;
    // Ten files enter on day 2.
    let plan = write_old_days(&db, &url, 400..410).await;
    let (day3, day4) = (&plan[2].1, &plan[3].1);
    let store = store::open(&url, RecordSigner::new(testkit::RECORD_SECRET))
        .await
        .expect("open migrates");

    // Entries: the 300 first leaves, the ten of day 2, file 5 again. Exits: file 5 after
    // day 1, file 7 after day 2.
    assert_eq!(rows_of(&db, &url, "translog_entries").await, 311);
    assert_eq!(rows_of(&db, &url, "translog_exits").await, 2);
    let exits = testkit::db::scalar(
        db.backend,
        &url,
        &format!(
            "SELECT COUNT(*) FROM translog_exits WHERE (leaf_hash = {} AND last_day = \
             '2025-03-10') OR (leaf_hash = {} AND last_day = '2025-03-12')",
            db.backend.bytes_literal(&leaf(5).leaf_hash),
            db.backend.bytes_literal(&leaf(7).leaf_hash)
        ),
    )
    .await;
    assert_eq!(exits, 2);
    for (day, files, with_chunks) in &plan {
        check_day(store.as_ref(), date(day), &tree(files), *with_chunks).await;
    }
    // The old leaves are gone with their table; the new tables are append-only.
    for sql in [
        "DELETE FROM translog_entries",
        "DELETE FROM translog_exits",
        "UPDATE translog_chunk_starts SET leaf_hash = ''",
    ] {
        let err = testkit::db::exec(db.backend, &url, sql, &[])
            .await
            .expect_err(sql);
        assert!(err.contains("append-only"), "{sql}: {err}");
    }
    assert!(
        testkit::db::exec(
            db.backend,
            &url,
            "SELECT COUNT(*) FROM translog_leaves",
            &[]
        )
        .await
        .is_err()
    );
    // The next day is published over the migrated entries: file 7 comes back.
    let mut day5 = day4.clone();
    day5.insert(7);
    publish(store.as_ref(), "2025-03-15", &tree(&day5)).await;
    assert_eq!(rows_of(&db, &url, "translog_entries").await, 312);
    check_day(store.as_ref(), date("2025-03-15"), &tree(&day5), true).await;
    check_day(store.as_ref(), date("2025-03-13"), &tree(day3), true).await;
    store.close().await;
}

/// Days stored by schema 25 (hashes as 64-character hex text, written by migration 0025
/// from the days' leaves as the service then wrote them) read back the same once 0026
/// stores the hashes as bytes, and the next day is published over them.
async fn days_stored_as_hex_read_the_same_as_bytes(db: Db) {
    let url = db.scratch.new_url().await;
    migrate_below(db.backend, &url, 25).await;
    // 300 files enter on day 2, so a chunk boundary moves.
    let plan = write_old_days(&db, &url, 400..700).await;
    let (day3, day4) = (&plan[2].1, &plan[3].1);
    migrate_from(db.backend, &url, 25, 26).await;
    let hex_rows = [
        ("translog_entries", "leaf_hash", 601),
        ("translog_entries", "hash_sha256", 601),
        ("translog_exits", "leaf_hash", 2),
        ("translog_chunk_starts", "leaf_hash", 2 + 3 + 3 + 3),
        ("translog_chunks", "chunk_root", 2 + 3 + 3),
    ];
    for (table, column, rows) in hex_rows {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE length({column}) = 64");
        assert_eq!(
            testkit::db::scalar(db.backend, &url, &sql).await,
            rows,
            "{sql}"
        );
    }

    let store = store::open(&url, RecordSigner::new(testkit::RECORD_SECRET))
        .await
        .expect("open migrates");
    for (table, column, rows) in hex_rows {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE length({column}) = 32");
        assert_eq!(
            testkit::db::scalar(db.backend, &url, &sql).await,
            rows,
            "{sql}"
        );
        assert_eq!(rows_of(&db, &url, table).await, rows, "{table}");
    }
    for (day, files, with_chunks) in &plan {
        check_day(store.as_ref(), date(day), &tree(files), *with_chunks).await;
    }
    // The roots stored before read the same, and a day without chunk roots gets them.
    let day4_roots = chunk_roots(&hashes(&tree(day4)));
    store
        .store_chunk_roots(date("2025-03-14"), &day4_roots)
        .await
        .unwrap();
    check_day(store.as_ref(), date("2025-03-14"), &tree(day4), true).await;
    // The tables stay append-only.
    for sql in [
        "DELETE FROM translog_entries",
        "DELETE FROM translog_exits",
        "DELETE FROM translog_chunk_starts",
        "UPDATE translog_chunks SET chunk_root = chunk_root",
    ] {
        let err = testkit::db::exec(db.backend, &url, sql, &[])
            .await
            .expect_err(sql);
        assert!(err.contains("append-only"), "{sql}: {err}");
    }
    // The next day is published over the migrated entries: file 7 comes back, file 8
    // leaves; exits name the previous day.
    let mut day5 = day4.clone();
    day5.insert(7);
    day5.remove(&8);
    publish(store.as_ref(), "2025-03-15", &tree(&day5)).await;
    assert_eq!(rows_of(&db, &url, "translog_entries").await, 602);
    let exit = format!(
        "SELECT COUNT(*) FROM translog_exits WHERE leaf_hash = {} AND last_day = '2025-03-14'",
        db.backend.bytes_literal(&leaf(8).leaf_hash)
    );
    assert_eq!(testkit::db::scalar(db.backend, &url, &exit).await, 1);
    check_day(store.as_ref(), date("2025-03-15"), &tree(&day5), true).await;
    check_day(store.as_ref(), date("2025-03-13"), &tree(day3), true).await;
    store.close().await;
}

/// An entry written behind the service's back that sorts below the day's first leaf (below
/// every chunk start) is read as the day's leaf 0 and shifts the others, so a proof's tree
/// no longer matches the signed root, rather than the entry being silently left out.
async fn an_entry_forged_below_the_days_first_leaf_is_counted_in_it(db: Db) {
    let store = db.store.as_ref();
    let day = date("2025-03-10");
    let rows = tree(&(0..300).collect());
    publish(store, "2025-03-10", &rows).await;
    let forged = "0".repeat(64);
    let sha = hex_of(999_999, 64);
    raw(
        db.backend,
        &db.url,
        &format!(
            "INSERT INTO translog_entries (leaf_hash, entered, executable_name, hash_sha256, \
             version, platform, arch) VALUES ({}, '2025-03-10', 'forged.exe', {}, \
             '1.0', 'windows', 'amd64')",
            db.backend.bytes_literal(&forged),
            db.backend.bytes_literal(&sha)
        ),
    )
    .await;
    let (index, leaf) = store.leaf_of(day, &sha).await.unwrap().unwrap();
    assert_eq!((index, leaf.leaf_hash.as_str()), (0, forged.as_str()));
    let (index, _) = store
        .leaf_of(day, &rows[0].hash_sha256)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(index, 1, "the day's first leaf moved up by one");
    let chunk = store
        .leaf_hashes(day, 0, CHUNK_LEAVES as u32)
        .await
        .unwrap();
    assert_eq!(hash_to_hex(&chunk[0]), forged);
    assert_eq!(chunk[1..], hashes(&rows)[..CHUNK_LEAVES - 1]);
}
