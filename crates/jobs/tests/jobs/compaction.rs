//! The rewrite of vendor records stored in an older form: due only while such rows are left,
//! run under its lease by one replica, and leaving every record as it read.

use super::*;
use jobs::compaction::CompactionJob;
use model::{Arch, RecordStatus};
use testkit::{go, putty};

testkit::backend_tests!(older_rows_are_rewritten_by_one_replica_and_read_the_same,);

/// Rows the store wrote compact, put back as the store wrote them before migrations 0029
/// and 0031 (whole source URL, name key and family whole): the same records, which the
/// update trigger does not note as changed.
async fn store_as_before_0029(db: &Db) {
    const WHOLE: &str = "UPDATE hash_records SET \
         source_url = COALESCE((SELECT url FROM record_sources \
             WHERE record_sources.id = hash_records.source_id), '') || source_url, \
         source_id = NULL, \
         family = COALESCE(NULLIF(family, ''), NULLIF(name_key, ''), executable_name), \
         name_key = COALESCE(NULLIF(name_key, ''), executable_name)";
    assert_eq!(
        testkit::db::exec(db.backend, &db.url, WHOLE, &[])
            .await
            .unwrap(),
        4
    );
    testkit::db::exec(
        db.backend,
        &db.url,
        "UPDATE record_compaction SET after_id = NULL, done = FALSE",
        &[],
    )
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
