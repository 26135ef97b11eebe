//! Migrations over data the store wrote before them: a database of each backend migrated to
//! 0020 and loaded with rows the store wrote then (`fixtures/records_before_0021.sql`) is
//! opened by today's store, which migrates it and must go on reading, verifying, counting
//! and recording as before. The same rows at schema 26, digests and HMACs as hex, read
//! back the same once 0027 stores them as bytes; the same rows at schema 27, ids as hex and
//! (on SQLite) times as RFC 3339 text, read back the same once 0028 stores ids as bytes and
//! times as integer microseconds.

use model::{Arch, HashValue, RecordSigner, RecordStatus};
use store::{HistoryQuery, RecordOutcome, RecordStats};
use testkit::{Backend, Db, putty, t};

const BEFORE_0021: &str = include_str!("fixtures/records_before_0021.sql");

testkit::backend_tests!(
    records_written_before_0021_survive_it,
    records_stored_as_hex_read_the_same_as_bytes,
    a_digest_not_in_lowercase_hex_fails_0027,
    record_ids_and_times_read_the_same_once_compact,
    an_id_or_time_of_another_shape_fails_0028,
    older_rows_are_compacted_online_and_read_the_same,
    a_new_database_has_nothing_to_compact,
);

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
    let id = supersede_current_putty(&*store, &all, "2025-01-01T00:00:00Z").await;
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

/// The fixture's rows loaded into a database at schema 26 (digests and HMACs as lowercase
/// hex text, as the service wrote them), with the latest date added the service kept.
async fn records_at_schema_26(db: &Db) -> String {
    let url = db.scratch.new_url().await;
    migrate_below(db.backend, &url, 27).await;
    raw(db.backend, &url, BEFORE_0021).await;
    raw(
        db.backend,
        &url,
        "UPDATE records_added SET added_at = (SELECT MAX(added_at) FROM hash_records)",
    )
    .await;
    url
}

/// (records, known-good hashes, vendors, platforms) of `stats`.
fn counted(stats: &RecordStats) -> (u64, u64, u64, u64) {
    (
        stats.total_records,
        stats.known_good_hashes,
        stats.total_vendors,
        stats.total_platforms,
    )
}

/// The Debian record, the only linux one: changed behind the service's back at schema 26.
const TAMPERED_AT_26: &str = "3dc80512c7118df0a0d043435156c09e";

/// Records stored by schema 26 read back the same once 0027 stores their digests and
/// HMACs as bytes: each field, each HMAC verified, found by each of its digests; a record
/// flagged by the trigger before (its counted SHA-256 as hex) is still discounted, and the
/// triggers made again flag changes and deletions after.
async fn records_stored_as_hex_read_the_same_as_bytes(db: Db) {
    let url = records_at_schema_26(&db).await;
    let stored_sql = "SELECT id, hash_sha256, COALESCE(hash_sha1, ''), COALESCE(hash_md5, ''), \
                      hmac FROM hash_records ORDER BY id";
    let before = testkit::db::text_rows(db.backend, &url, stored_sql, &[]).await;
    assert_eq!(before.len(), 15);
    // A signed field changed behind the service's back at schema 26: the trigger notes the
    // row with the SHA-256 it was counted under, as hex.
    let n = testkit::db::exec(
        db.backend,
        &url,
        "UPDATE hash_records SET version = '9.9' WHERE id = $1",
        &[TAMPERED_AT_26],
    )
    .await
    .expect("tamper");
    assert_eq!(n, 1);
    let flagged = testkit::db::text_rows(
        db.backend,
        &url,
        "SELECT counted_sha256 FROM records_unverified",
        &[],
    )
    .await;
    assert_eq!(flagged.len(), 1);
    assert_eq!(flagged[0][0].len(), 64, "{flagged:?}");

    let store = store::open(&url, RecordSigner::new(testkit::RECORD_SECRET))
        .await
        .expect("open migrates");
    // Stored as bytes of each digest's length, the HMAC's too.
    let bytes_of = match db.backend {
        Backend::Sqlite => "typeof({c}) = 'blob' AND length({c})",
        Backend::Postgres => "octet_length({c})",
    };
    for (column, bytes, rows) in [
        ("hash_sha256", 32, before.len()),
        (
            "hash_sha1",
            20,
            before.iter().filter(|r| !r[2].is_empty()).count(),
        ),
        (
            "hash_md5",
            16,
            before.iter().filter(|r| !r[3].is_empty()).count(),
        ),
        ("hmac", 32, before.len()),
    ] {
        let sql = format!(
            "SELECT COUNT(*) FROM hash_records WHERE {} = {bytes}",
            bytes_of.replace("{c}", column)
        );
        assert_eq!(
            testkit::db::scalar(db.backend, &url, &sql).await,
            rows as i64,
            "{sql}"
        );
    }
    assert!(
        before.iter().any(|r| r[2].is_empty()),
        "a record without SHA-1"
    );
    // Each value is the bytes its hex spelled, the tampered record's HMAC too.
    let hex_of_column = |c: &str| match db.backend {
        Backend::Sqlite => format!("COALESCE(lower(hex({c})), '')"),
        Backend::Postgres => format!("COALESCE(encode({c}, 'hex'), '')"),
    };
    // (Ids are bytes too since 0028.)
    let stored_hex_sql = format!(
        "SELECT {}, {}, {}, {}, {} FROM hash_records ORDER BY id",
        hex_of_column("id"),
        hex_of_column("hash_sha256"),
        hex_of_column("hash_sha1"),
        hex_of_column("hash_md5"),
        hex_of_column("hmac")
    );
    let after = testkit::db::text_rows(db.backend, &url, &stored_hex_sql, &[]).await;
    assert_eq!(after, before);

    let all = store.records_after(None, 1000).await.expect("records");
    assert_eq!(all.len(), 15);
    for (row, record) in before.iter().zip(&all) {
        let r = &record.record;
        assert_eq!(row[0], record.id);
        assert_eq!(row[1], r.hash_sha256, "{}", record.id);
        assert_eq!(
            row[2],
            r.hash_sha1.clone().unwrap_or_default(),
            "{}",
            record.id
        );
        assert_eq!(
            row[3],
            r.hash_md5.clone().unwrap_or_default(),
            "{}",
            record.id
        );
        // The HMAC read back is the one signed: it verifies, unless the row was changed.
        assert_eq!(
            record.integrity_ok,
            record.id != TAMPERED_AT_26,
            "{}",
            record.id
        );
        if record.integrity_ok {
            assert_eq!(
                RecordSigner::new(testkit::RECORD_SECRET).sign(&record.id, r),
                row[4],
                "{}",
                record.id
            );
        }
        // Found by each of its digests.
        let digests = [
            Some(&r.hash_sha256),
            r.hash_sha1.as_ref(),
            r.hash_md5.as_ref(),
        ];
        for digest in digests.into_iter().flatten() {
            let found = store
                .find_by_hashes(&[HashValue::parse(digest).unwrap()], true)
                .await
                .expect("find");
            assert!(
                found.iter().any(|f| f.id == record.id),
                "{digest}: {found:?}"
            );
        }
    }
    // The tampered record is no known-good hash and linux no platform: the SHA-256 it
    // was counted under, converted, is looked up again.
    let stats = store.stats().await.expect("stats");
    assert_eq!(counted(&stats), (8, 6, 6, 2));

    // The triggers made again on the new table: a signed field changed, then a record
    // deleted, behind the service's back.
    let tool = all
        .iter()
        .find(|r| r.record.version == "3.2")
        .expect("signed record");
    for sql in [
        "UPDATE hash_records SET source_url = 'https://example.com/x' WHERE id = {id}",
        "DELETE FROM hash_records WHERE id = {id}",
    ] {
        let sql = sql.replace("{id}", &db.backend.unhex("$1"));
        let n = testkit::db::exec(db.backend, &url, &sql, &[&tool.id])
            .await
            .expect(&sql);
        assert_eq!(n, 1, "{sql}");
    }
    let stats = store.stats().await.expect("stats");
    assert_eq!(counted(&stats), (7, 5, 5, 2));
    store.close().await;
}

/// A digest or HMAC that is not lowercase hex of its length fails 0027, which leaves the
/// database at schema 26 with the value as it was, rather than storing something else.
async fn a_digest_not_in_lowercase_hex_fails_0027(db: Db) {
    for (column, value) in [
        ("hash_md5", "not hex, though 32 characters.."),
        ("hash_sha1", "43E7028BF2E3B5529DD4DF947BD7AD262C093FCB"),
        ("hmac", "abc"),
        ("hash_sha256", "00"),
    ] {
        let url = records_at_schema_26(&db).await;
        refused_keeping_schema(&db, &url, column, value, 26).await;
    }
}

/// The fixture's rows at schema 27 (digests as bytes; ids as hex, times as the service
/// wrote them), one of them also noted as signed by a certificate (`record_signatures`).
async fn records_at_schema_27(db: &Db) -> String {
    let url = records_at_schema_26(db).await;
    migrate_from(db.backend, &url, 27, 28).await;
    raw(
        db.backend,
        &url,
        &format!(
            "INSERT INTO record_signatures (record_id, thumbprint) VALUES ('{SIGNED}', 'ab12')"
        ),
    )
    .await;
    url
}

/// The signed record of the fixture.
const SIGNED: &str = "4066b1343505d1030f8711bc3f8d3d7a";

/// Records stored by schema 27 read back the same once 0028 stores their ids as 16 bytes
/// and (on SQLite) their times as integer microseconds: every id and time, in the same
/// orders; the ids naming records elsewhere converted alike; recording and the triggers
/// go on.
async fn record_ids_and_times_read_the_same_once_compact(db: Db) {
    let url = records_at_schema_27(&db).await;
    let times = match db.backend {
        Backend::Sqlite => "valid_from, COALESCE(valid_until, ''), COALESCE(added_at, '')",
        Backend::Postgres => {
            "CAST(valid_from AS TEXT), COALESCE(CAST(valid_until AS TEXT), ''), \
             COALESCE(CAST(added_at AS TEXT), '')"
        }
    };
    let before = testkit::db::text_rows(
        db.backend,
        &url,
        &format!("SELECT id, {times} FROM hash_records ORDER BY id"),
        &[],
    )
    .await;
    assert_eq!(before.len(), 15);
    let parse = |text: &str| -> Option<chrono::DateTime<chrono::Utc>> {
        if text.is_empty() {
            return None;
        }
        let text = text.replace(' ', "T");
        // PostgreSQL shows the offset as "+00".
        let text = if text.ends_with("+00") {
            format!("{text}:00")
        } else {
            text
        };
        Some(
            chrono::DateTime::parse_from_rfc3339(&text)
                .unwrap_or_else(|e| panic!("{text}: {e}"))
                .to_utc(),
        )
    };
    // A superseded record keeps its interval to the microsecond.
    assert!(
        before
            .iter()
            .any(|r| r[1].contains(".999999") || r[2].contains(".999999")),
        "{before:?}"
    );

    let store = store::open(&url, RecordSigner::new(testkit::RECORD_SECRET))
        .await
        .expect("open migrates");
    let all = store.records_after(None, 1000).await.expect("records");
    assert_eq!(all.len(), 15);
    for (row, record) in before.iter().zip(&all) {
        assert_eq!(row[0], record.id);
        assert_eq!(parse(&row[1]), Some(record.valid_from), "{}", record.id);
        assert_eq!(parse(&row[2]), record.valid_until, "{}", record.id);
        assert_eq!(
            parse(&row[3]).unwrap_or(record.valid_from),
            record.added_at,
            "{}",
            record.id
        );
        assert!(record.integrity_ok, "{}", record.id);
    }
    // Stored as 16 bytes (and integers), in the record and where a record is named.
    let (id_bytes, time_check) = match db.backend {
        Backend::Sqlite => (
            "typeof(id) = 'blob' AND length(id) = 16",
            "typeof(valid_from) = 'integer'",
        ),
        Backend::Postgres => ("octet_length(id) = 16", "valid_from IS NOT NULL"),
    };
    let sql = format!("SELECT COUNT(*) FROM hash_records WHERE {id_bytes} AND {time_check}");
    assert_eq!(testkit::db::scalar(db.backend, &url, &sql).await, 15);
    let signed = testkit::db::text_rows(
        db.backend,
        &url,
        &format!(
            "SELECT {}, thumbprint FROM record_signatures",
            db.backend.hex("record_id")
        ),
        &[],
    )
    .await;
    assert_eq!(signed, [[SIGNED.to_string(), "ab12".to_string()]]);

    // The orders by date added, and a keyset walk by id, are as before.
    let mut by_added = all.clone();
    by_added.sort_by(|a, b| (a.added_at, &a.id).cmp(&(b.added_at, &b.id)));
    let walked = store
        .current_records_added_after(None, 100)
        .await
        .expect("added");
    let current: Vec<&str> = by_added
        .iter()
        .filter(|r| r.status == RecordStatus::Current)
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(
        walked.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        current
    );
    let second_page = store
        .records_after(Some(&all[6].id), 100)
        .await
        .expect("page");
    assert_eq!(second_page.len(), 8);
    assert_eq!(second_page[0].id, all[7].id);
    // A cursor holding something other than a record id is refused, not compared.
    let forged = store.records_after(Some("not-an-id"), 10).await;
    assert_eq!(forged.expect_err("forged").code(), "bad request");

    // Recording goes on, superseding a converted record; the triggers flag a change made
    // behind the service's back.
    supersede_current_putty(&*store, &all, "2025-06-01T00:00:00Z").await;
    let before = store.stats().await.expect("stats");
    let n = testkit::db::exec(
        db.backend,
        &url,
        &format!(
            "UPDATE hash_records SET version = '9.9' WHERE id = {}",
            db.backend.unhex("$1")
        ),
        &[SIGNED],
    )
    .await
    .expect("tamper");
    assert_eq!(n, 1);
    let after = store.stats().await.expect("stats");
    assert_eq!(after.known_good_hashes, before.known_good_hashes - 1);
    store.close().await;
}

/// Rows still stored as written before 0029 and 0031 (whole source URLs; name key and family
/// whole) in a database today's store migrated: the background walk rewrites them compact,
/// a batch at a time, and every record reads, verifies and counts as before. Nothing is
/// noted as changed behind the service's back and the records epoch stays, while a real
/// change to a rewritten row's URL is still noted; recording goes on.
async fn older_rows_are_compacted_online_and_read_the_same(db: Db) {
    let url = records_at_schema_27(&db).await;
    let store = store::open(&url, RecordSigner::new(testkit::RECORD_SECRET))
        .await
        .expect("open migrates");
    let count = |sql: &'static str| {
        let url = url.clone();
        async move { testkit::db::scalar(db.backend, &url, sql).await }
    };
    let before = store.records_after(None, 1000).await.expect("records");
    assert_eq!(before.len(), 15);
    assert!(before.iter().all(|r| r.integrity_ok));
    let stats = counted(&store.stats().await.expect("stats"));
    let epoch = store.poll_records_epoch().await.expect("epoch");
    let go_before = go_history(&*store).await;
    assert_eq!(go_before.len(), 3, "the Go MSI's family: {go_before:?}");
    const WHOLE_URLS: &str = "SELECT COUNT(*) FROM hash_records WHERE source_id IS NULL";
    const WHOLE_KEYS: &str =
        "SELECT COUNT(*) FROM hash_records WHERE name_key <> '' AND name_key = executable_name";
    const WHOLE_FAMILIES: &str = "SELECT COUNT(*) FROM hash_records WHERE family <> '' \
         AND family = COALESCE(NULLIF(name_key, ''), executable_name)";
    // Rows whose URL ends in their name, and those that keep the name once (0033).
    const RESTS_AS_NAME: &str = "SELECT COUNT(*) FROM hash_records WHERE source_rest_is_name";
    const ENDS_IN_NAME: &str = "SELECT COUNT(*) FROM hash_records \
         WHERE source_url LIKE '%/' || executable_name OR source_url LIKE '%#' || executable_name";
    let ending_in_name = count(ENDS_IN_NAME).await;
    assert!(ending_in_name > 0);
    assert_eq!(count(RESTS_AS_NAME).await, 0);
    assert_eq!(count(WHOLE_URLS).await, 15);
    assert!(count(WHOLE_KEYS).await > 0);
    assert!(count(WHOLE_FAMILIES).await > 0);
    let progress = store.compaction_progress().await.expect("progress");
    assert!(!progress.done && progress.walked == 0.0 && progress.rewritten == 0);

    // Batches of 4: the walk takes four, the last one short, moving forward each time.
    let mut steps = Vec::new();
    loop {
        let step = store.compact_older_records(4).await.expect("compact");
        steps.push(step);
        if step.done || steps.len() > 10 {
            break;
        }
    }
    assert_eq!(steps.len(), 4, "{steps:?}");
    assert!(
        steps.windows(2).all(|w| w[0].walked < w[1].walked),
        "{steps:?}"
    );
    assert_eq!(steps[0].rewritten, 4);
    let last = steps[3];
    assert!(
        last.done && last.walked == 1.0 && last.rewritten == 15,
        "{last:?}"
    );
    assert_eq!(count(WHOLE_URLS).await, 0);
    assert_eq!(count(RESTS_AS_NAME).await, ending_in_name);
    assert_eq!(count(WHOLE_KEYS).await, 0);
    assert_eq!(count(WHOLE_FAMILIES).await, 0);
    // Once done, the walk stays done and rewrites nothing.
    assert_eq!(store.compact_older_records(4).await.expect("again"), last);

    let after = store.records_after(None, 1000).await.expect("records");
    assert_eq!(after, before);
    assert!(after.iter().all(|r| r.integrity_ok));
    assert_eq!(counted(&store.stats().await.expect("stats")), stats);
    assert_eq!(count("SELECT COUNT(*) FROM records_unverified").await, 0);
    assert_eq!(store.poll_records_epoch().await.expect("epoch"), epoch);
    assert_eq!(go_history(&*store).await, go_before);

    // Recording goes on over the rewritten rows; changing a rewritten row's URL behind the
    // service's back is still noted (its record no longer counts as known good).
    supersede_current_putty(&*store, &after, "2025-06-01T00:00:00Z").await;
    let known = store.stats().await.expect("stats").known_good_hashes;
    let n = testkit::db::exec(
        db.backend,
        &url,
        &format!(
            "UPDATE hash_records SET source_url = 'evil.exe', source_rest_is_name = FALSE \
             WHERE id = {}",
            db.backend.unhex("$1")
        ),
        &[SIGNED],
    )
    .await
    .expect("tamper");
    assert_eq!(n, 1);
    assert_eq!(
        store.stats().await.expect("stats").known_good_hashes,
        known - 1
    );
    store.close().await;
}

/// The history of the fixture's Go MSI, a family whose name holds its version.
async fn go_history(store: &dyn store::Store) -> Vec<model::HashRecord> {
    let query = HistoryQuery {
        executable: "go1.22.2.windows-amd64.msi".into(),
        limit: 10,
        ..HistoryQuery::default()
    };
    store.history(&query).await.expect("history").items
}

/// A database created by today's store holds only compact rows: the walk is done from the
/// start.
async fn a_new_database_has_nothing_to_compact(db: Db) {
    let url = db.scratch.new_url().await;
    let store = store::open(&url, RecordSigner::new(testkit::RECORD_SECRET))
        .await
        .expect("open");
    let progress = store.compaction_progress().await.expect("progress");
    assert!(progress.done && progress.walked == 1.0 && progress.rewritten == 0);
    store
        .record(putty("0.81", Arch::Amd64, 1), t("2025-01-01T00:00:00Z"))
        .await
        .expect("record");
    assert_eq!(
        store.compact_older_records(100).await.expect("compact"),
        progress
    );
    store.close().await;
}

/// An id that is not 32 lowercase hex digits, or (on SQLite) a time of a shape the service
/// never wrote, fails 0028, which leaves the database at schema 27 with the value as it was.
async fn an_id_or_time_of_another_shape_fails_0028(db: Db) {
    let mut cases = vec![
        ("id", "4066B1343505D1030F8711BC3F8D3D7A"),
        ("id", "4066b1343505d1030f8711bc3f8d3d"),
    ];
    if db.backend == Backend::Sqlite {
        cases.push(("valid_from", "2025-03-01 09:00:00"));
        cases.push(("added_at", "2025-03-01T09:00:00.0001+00:00"));
    }
    for (column, value) in cases {
        let url = records_at_schema_27(&db).await;
        refused_keeping_schema(&db, &url, column, value, 27).await;
    }
}

/// Writes `value` into `column` of the signed record of a database at schema `schema`, then
/// asserts that opening it fails on the next migration and leaves the schema and the value
/// as they were.
async fn refused_keeping_schema(db: &Db, url: &str, column: &str, value: &str, schema: i64) {
    let sql = format!("UPDATE hash_records SET {column} = $1 WHERE id = $2");
    testkit::db::exec(db.backend, url, &sql, &[value, SIGNED])
        .await
        .expect("write the bad value");
    let refused = store::open(url, RecordSigner::new(testkit::RECORD_SECRET)).await;
    assert!(refused.is_err(), "{column} {value:?} was migrated");
    let version = testkit::db::scalar(
        db.backend,
        url,
        "SELECT MAX(version) FROM schema_migrations",
    )
    .await;
    assert_eq!(version, schema, "{column}");
    let kept = testkit::db::text_rows(
        db.backend,
        url,
        &format!(
            "SELECT CAST(COUNT(*) AS TEXT) FROM hash_records WHERE CAST({column} AS TEXT) = $1"
        ),
        &[value],
    )
    .await;
    assert_eq!(kept, [["1"]], "{column} {value:?}");
}

/// Records PuTTY 0.82 (amd64) at `now` and asserts that it supersedes the current amd64
/// PuTTY among `stored`, the fixture's rows as read back; the new record's id.
async fn supersede_current_putty(
    store: &dyn store::Store,
    stored: &[model::HashRecord],
    now: &str,
) -> String {
    let current = stored
        .iter()
        .find(|r| {
            r.record.executable_name == "putty.exe"
                && r.record.arch == Arch::Amd64
                && r.status == RecordStatus::Current
        })
        .expect("current putty");
    let outcome = store
        .record(putty("0.82", Arch::Amd64, 5), t(now))
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
    id
}
