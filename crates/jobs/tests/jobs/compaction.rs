//! The rewrite of vendor records stored in an older form: due only while such rows are left,
//! run under its lease by one replica, and leaving every record as it read.

use super::*;
use jobs::compaction::CompactionJob;
use model::{Arch, RecordStatus};
use testkit::{go, putty};

testkit::backend_tests!(
    older_rows_are_rewritten_by_one_replica_and_read_the_same,
    records_are_written_while_the_walk_rewrites,
);

/// Rows the store wrote compact, put back as the store wrote them before migrations 0029
/// and 0031 (whole source URL, name key and family whole): the same records, which the
/// update trigger does not note as changed.
async fn store_as_before_0029(db: &Db) {
    let rows = testkit::db::scalar(db.backend, &db.url, "SELECT COUNT(*) FROM hash_records").await;
    let put_back = testkit::db::exec(
        db.backend,
        &db.url,
        testkit::db::RECORDS_AS_BEFORE_0029,
        &[],
    )
    .await
    .unwrap();
    assert_eq!(i64::try_from(put_back).unwrap(), rows);
    let from_start = testkit::db::COMPACTION_FROM_THE_START;
    testkit::db::exec(db.backend, &db.url, from_start, &[])
        .await
        .unwrap();
}

async fn older_rows_are_rewritten_by_one_replica_and_read_the_same(db: Db) {
    let env = Env::new(&db, JobSettings::default()).await;
    let now = t("2026-03-10T07:30:00Z");
    for (record, at) in [
        (putty("0.80", Arch::Amd64, 1), "2026-01-01T00:00:00Z"),
        (putty("0.81", Arch::Amd64, 2), "2026-02-01T00:00:00Z"),
        (go("1.22.1", 3), "2026-01-01T00:00:00Z"),
        (go("1.22.2", 4), "2026-02-01T00:00:00Z"),
    ] {
        db.store.record(record, t(at)).await.unwrap();
    }
    // A database written compact has nothing to rewrite: the job is never due.
    assert_eq!(CompactionJob.due(&env.ctx, now).await.unwrap(), None);

    store_as_before_0029(&db).await;
    let whole = "SELECT COUNT(*) FROM hash_records WHERE source_id IS NULL";
    assert_eq!(testkit::db::scalar(db.backend, &db.url, whole).await, 4);
    let before = db.store.records_after(None, 100).await.unwrap();
    let known = db.store.stats().await.unwrap().known_good_hashes;
    match CompactionJob.due(&env.ctx, now).await.unwrap() {
        Some(Due::Leased(lease)) => {
            assert_eq!(lease.name, "records.compact:2026-03-10T07:00:00Z");
            assert_eq!(lease.until, t("2026-03-10T08:00:00Z"));
        }
        other => panic!("expected a leased run, got {other:?}"),
    }

    // One replica takes the lease and rewrites every row; the other finds it held.
    let runner = Runner::new(vec![Arc::new(CompactionJob)]);
    let other = Runner::new(vec![Arc::new(CompactionJob)]);
    let runs = runner.start_due(&env.ctx, now).await;
    assert_eq!(runs.len(), 1);
    assert!(other.start_due(&env.replica(), now).await.is_empty());
    finish(runs).await;
    let progress = db.store.compaction_progress().await.unwrap();
    assert!(progress.done && progress.rewritten == 4, "{progress:?}");
    assert_eq!(testkit::db::scalar(db.backend, &db.url, whole).await, 0);

    // The records read, verify and count as before; nothing was noted as changed.
    let after = db.store.records_after(None, 100).await.unwrap();
    assert_eq!(after, before);
    assert!(after.iter().all(|r| r.integrity_ok));
    assert_eq!(
        after
            .iter()
            .filter(|r| r.status == RecordStatus::Current)
            .count(),
        2
    );
    assert_eq!(db.store.stats().await.unwrap().known_good_hashes, known);
    let unverified = "SELECT COUNT(*) FROM records_unverified";
    assert_eq!(
        testkit::db::scalar(db.backend, &db.url, unverified).await,
        0
    );

    // Done: due nowhere, in this slot or a later one.
    let later = t("2026-03-10T09:00:30Z");
    assert_eq!(
        CompactionJob.due(&env.replica(), later).await.unwrap(),
        None
    );
    assert!(other.start_due(&env.replica(), later).await.is_empty());
}

/// The service goes on recording while the walk rewrites: a refresh's writes, interleaved
/// with the walk's batches, all land (neither waits the other out), and every record reads
/// and verifies afterwards, the new ones current.
async fn records_are_written_while_the_walk_rewrites(db: Db) {
    let at = t("2026-01-01T00:00:00Z");
    let files: Vec<model::NewRecord> = (0..3_000u64)
        .map(|i| {
            testkit::rec(
                "Debian bookworm",
                &format!("pkg{}/usr/bin/tool{i}", i / 8),
                "1.0-1",
                model::Platform::Linux,
                Arch::Amd64,
                i,
            )
        })
        .collect();
    db.store.record_many(files.clone(), at).await.unwrap();
    store_as_before_0029(&db).await;

    // Newer versions of a fifth of the files, recorded a package at a time while the walk
    // runs.
    let store = db.store.clone();
    let refresh = tokio::spawn(async move {
        let newer: Vec<model::NewRecord> = files
            .iter()
            .step_by(5)
            .enumerate()
            .map(|(i, r)| model::NewRecord {
                version: "2.0-1".into(),
                hash_sha256: testkit::hex_of(1_000_000 + i as u64, 64),
                ..r.clone()
            })
            .collect();
        let mut inserted = 0;
        for package in newer.chunks(8) {
            let outcomes = store
                .record_many(package.to_vec(), t("2026-02-01T00:00:00Z"))
                .await
                .unwrap();
            inserted += outcomes
                .iter()
                .filter(|o| matches!(o, store::RecordOutcome::Inserted { .. }))
                .count();
        }
        inserted
    });
    let progress = jobs::compaction::compact_older_records(db.store.as_ref())
        .await
        .unwrap();
    assert_eq!(refresh.await.unwrap(), 600);
    assert!(progress.done && progress.rewritten >= 3_000, "{progress:?}");

    let whole = "SELECT COUNT(*) FROM hash_records WHERE source_id IS NULL";
    assert_eq!(testkit::db::scalar(db.backend, &db.url, whole).await, 0);
    let all = db.store.records_after(None, 10_000).await.unwrap();
    assert_eq!(all.len(), 3_600);
    assert!(all.iter().all(|r| r.integrity_ok));
    let current_newer = all
        .iter()
        .filter(|r| r.status == RecordStatus::Current && r.record.version == "2.0-1")
        .count();
    assert_eq!(current_newer, 600);
    let unverified = "SELECT COUNT(*) FROM records_unverified";
    assert_eq!(
        testkit::db::scalar(db.backend, &db.url, unverified).await,
        0
    );
}
