//! Migrations over data the store wrote before them: a database of each backend migrated to
//! 0020 and loaded with rows the store wrote then (`fixtures/records_before_0021.sql`) is
//! opened by today's store, which migrates it and must go on reading, verifying, counting
//! and recording as before.

use model::{Arch, HashValue, RecordSigner, RecordStatus};
use store::{HistoryQuery, RecordOutcome};
use testkit::{Backend, Db, putty, t};

const BEFORE_0021: &str = include_str!("fixtures/records_before_0021.sql");

testkit::backend_tests!(records_written_before_0021_survive_it);

/// Runs `sql` (several statements) on a raw connection.
pub(crate) async fn raw(backend: Backend, url: &str, sql: &str) {
    use sqlx::Connection as _;
    let sql = sqlx::AssertSqlSafe(sql.to_string());
    match backend {
        Backend::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(url).await.expect("connect");
            sqlx::raw_sql(sql).execute(&mut c).await.expect("raw sql");
            c.close().await.ok();
        }
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
            sqlx::raw_sql(sql).execute(&mut c).await.expect("raw sql");
            c.close().await.ok();
        }
    }
}

/// Applies the backend's migrations numbered below `version`, as the store of that time did
/// on open, noting each in `schema_migrations`.
pub(crate) async fn migrate_below(backend: Backend, url: &str, version: i64) {
    raw(
        backend,
        url,
        "CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY)",
    )
    .await;
    migrate_from(backend, url, 0, version).await;
}

/// Applies the backend's migrations numbered `from` to below `below` over a database
/// [`migrate_below`] built, as the store of that time did on open.
pub(crate) async fn migrate_from(backend: Backend, url: &str, from: i64, below: i64) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend.name());
    let mut files: Vec<(i64, std::path::PathBuf)> = std::fs::read_dir(&dir)
        .expect("migrations")
        .map(|e| e.expect("entry").path())
        .filter_map(|p| {
            let n = p.file_name()?.to_str()?.split('_').next()?.parse().ok()?;
            Some((n, p))
        })
        .filter(|(n, _)| (from..below).contains(n))
        .collect();
    files.sort();
    for (n, path) in files {
        let sql = std::fs::read_to_string(&path).expect("read migration");
        raw(backend, url, &sql).await;
        raw(
            backend,
            url,
            &format!("INSERT INTO schema_migrations (version) VALUES ({n})"),
        )
        .await;
    }
}

async fn records_written_before_0021_survive_it(db: Db) {
    let url = db.scratch.new_url().await;
    migrate_below(db.backend, &url, 21).await;
    raw(db.backend, &url, BEFORE_0021).await;
    let store = store::open(&url, RecordSigner::new(testkit::RECORD_SECRET))
        .await
        .expect("open migrates");

    // Every row reads back and verifies; the counts kept before the migration still hold.
    let all = store.records_after(None, 1000).await.expect("records");
    assert_eq!(all.len(), 15);
    assert!(all.iter().all(|r| r.integrity_ok), "{all:?}");
    assert_eq!(store.integrity_failures(), 0);
    let stats = store.stats().await.expect("stats");
    assert_eq!(
        (
            stats.total_records,
            stats.known_good_hashes,
            stats.total_vendors,
            stats.total_platforms
        ),
        (8, 7, 6, 3)
    );
    let signed = all
        .iter()
        .find(|r| r.record.version == "3.2")
        .expect("signed record");
    let sha1 = HashValue::parse(signed.record.hash_sha1.as_deref().expect("sha1")).unwrap();
    let found = store.find_by_hashes(&[sha1], false).await.expect("find");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id, signed.id);

    // Recording goes on: a newer version supersedes the current one, and with a clock behind
    // the stored rows the new record is still added after every one of them.
    let latest_added = all.iter().map(|r| r.added_at).max().expect("rows");
    let current = all
        .iter()
        .find(|r| {
            r.record.executable_name == "putty.exe"
                && r.record.arch == Arch::Amd64
                && r.status == RecordStatus::Current
        })
        .expect("current putty");
    let outcome = store
        .record(putty("0.82", Arch::Amd64, 5), t("2025-01-01T00:00:00Z"))
        .await
        .expect("record");
    let RecordOutcome::Inserted {
        id,
        superseded: Some(superseded),
        ..
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(superseded, current.id);
    let history = store
        .history(&HistoryQuery {
            executable: "putty.exe".into(),
            arch: Some(Arch::Amd64),
            limit: 10,
            ..HistoryQuery::default()
        })
        .await
        .expect("history");
    let versions: Vec<&str> = history
        .items
        .iter()
        .map(|r| r.record.version.as_str())
        .collect();
    assert_eq!(versions, ["0.82", "0.81", "0.80", "0.79"]);
    let new = &history.items[0];
    assert_eq!(new.id, id);
    assert!(
        new.added_at
            >= latest_added + chrono::Duration::microseconds(model::record::ADDED_AT_STEP_MICROS),
        "{} after {latest_added}",
        new.added_at
    );
    assert_eq!(store.stats().await.expect("stats").total_records, 8);
    store.close().await;

    // The index that only found the latest date added is gone; the narrowed ones serve the
    // queries above.
    let indexes_sql = match db.backend {
        Backend::Sqlite => {
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'hash_records'"
        }
        Backend::Postgres => {
            "SELECT indexname::text FROM pg_indexes WHERE tablename = 'hash_records' \
             AND schemaname = current_schema()"
        }
    };
    let indexes: Vec<String> = testkit::db::text_rows(db.backend, &url, indexes_sql, &[])
        .await
        .into_iter()
        .flatten()
        .collect();
    assert!(
        indexes.contains(&"hash_records_family".to_string()),
        "{indexes:?}"
    );
    assert!(
        !indexes.contains(&"hash_records_added_at".to_string()),
        "{indexes:?}"
    );

    // Opening again migrates nothing more.
    let again = store::open(&url, RecordSigner::new(testkit::RECORD_SECRET))
        .await
        .expect("reopen");
    assert_eq!(
        again
            .records_after(None, 1000)
            .await
            .expect("records")
            .len(),
        16
    );
    again.close().await;
}
