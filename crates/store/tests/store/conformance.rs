//! Conformance suite: every test runs against SQLite and, when
//! `KNOWNGOOD_TEST_POSTGRES_URL` is set, PostgreSQL (see the `testkit` crate).
//!
//! The bodies are written once against a `testkit::Db` (an `Arc<dyn Store>` over a fresh
//! database); `testkit::backend_tests!` instantiates each as `sqlite::<name>` and
//! `postgres::<name>`.

use chrono::{DateTime, NaiveDate, Utc};
use model::TenantKind;
use model::{
    Arch, HashRecord, HashValue, NewRecord, Platform, RecordSigner, RecordStatus, Role, Tier,
};
use store::stix_objects::ChangePosition;
use store::{
    AddedPosition, ExportCursor, ExportQuery, HistoryQuery, NewApiKey, RecordOutcome, Store,
};
use testkit::{Db, go, hex_of, putty, rec, t};

const SECRET: &[u8] = testkit::RECORD_SECRET;

testkit::backend_tests!(
    first_insert_is_current,
    new_version_supersedes_current,
    platform_arch_and_vendor_are_separate_families,
    rerecording_identical_file_is_unchanged,
    same_version_new_hash_reports_hash_changed,
    invalid_records_are_rejected_and_change_nothing,
    concurrent_versions_leave_one_current,
    a_large_import_of_release_after_release_keeps_each_history,
    concurrent_batches_each_get_their_own_outcomes,
    concurrent_advisory_imports_all_succeed,
    find_by_each_hash_kind,
    find_superseded_only_when_asked,
    history_by_any_filename_newest_first,
    history_by_bare_name_with_filters_and_paging,
    export_day_bounds_are_inclusive,
    export_keyset_paging_returns_every_row_once,
    export_filters,
    stats_count_current_records,
    tampered_row_fails_integrity_once,
    different_secret_fails_every_record,
    accounts_create_and_look_up_keys,
    accounts_conflicts,
    concurrent_platform_tenants_admit_one,
    vendor_health_runs_and_counts,
    data_survives_close_and_reopen,
    migrations_are_idempotent,
    concurrent_first_open_migrates_once,
    an_archives_members_share_one_stored_source,
    derived_names_are_stored_only_where_they_differ,
    digests_sharing_their_first_bytes_are_told_apart,
    job_lease_admits_one_holder_until_expiry,
    a_released_lease_is_free_at_once,
    a_lease_notes_when_its_run_ended,
    download_audit_filters_and_pages,
    signing_certificates_keep_their_crl_urls,
    revocations_set_cert_revoked_at_and_filter_literally,
    records_epoch_moves_with_writes_and_reaches_other_stores,
    records_after_pages_through_every_record,
    current_records_page_by_date_added_both_ways,
    records_changed_after_an_epoch_are_the_rows_written_since,
    older_version_never_supersedes_newer,
    a_past_version_starts_at_its_release_date,
    replayed_versions_fit_between_neighbours,
    batch_out_of_order_keeps_version_order,
    a_batch_fits_older_versions_into_a_stored_history,
    a_republished_file_offered_again_is_unchanged,
    the_current_file_offered_again_is_unchanged_unless_its_row_was_forged,
    stats_count_verified_hashes_and_real_platforms,
    names_match_by_unicode_case_folding,
    name_keys_of_existing_rows_are_backfilled,
    deceptive_names_and_plain_http_are_rejected_whole_batch,
    each_record_is_added_after_the_previous_one,
    concurrent_usage_flushes_in_any_order_all_count,
    concurrent_guesses_never_exceed_the_mfa_budget,
    executable_names_by_prefix_are_folded_bounded_and_literal,
    stix_objects_are_found_by_key_and_the_position_only_moves_on,
    concurrent_coverage_requests_beside_a_writer_all_succeed,
    concurrent_key_and_settings_changes_beside_a_writer_all_succeed,
    concurrent_invites_and_second_factors_beside_a_writer_all_succeed,
    concurrent_stix_notes_beside_a_writer_all_succeed,
    concurrent_root_publications_beside_a_writer_all_succeed,
);

// ---------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------

fn day(s: &str) -> NaiveDate {
    s.parse().expect("bad date")
}

fn hv(s: &str) -> HashValue {
    HashValue::parse(s).expect("valid hash")
}

async fn insert(store: &dyn Store, r: NewRecord, now: DateTime<Utc>) -> String {
    match store.record(r, now).await.expect("record") {
        RecordOutcome::Inserted { id, .. } => id,
        other => panic!("expected Inserted, got {other:?}"),
    }
}

/// The record with this id, whatever its state (looked up by its SHA-256).
async fn by_id(store: &dyn Store, id: &str, sha256: &str) -> HashRecord {
    let found = store
        .find_by_hashes(&[hv(sha256)], true)
        .await
        .expect("find_by_hashes");
    found
        .into_iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("record {id} not found"))
}

fn ids(records: &[HashRecord]) -> Vec<&str> {
    records.iter().map(|r| r.id.as_str()).collect()
}

fn versions(records: &[HashRecord]) -> Vec<&str> {
    records.iter().map(|r| r.record.version.as_str()).collect()
}

fn history_query(executable: &str) -> HistoryQuery {
    HistoryQuery {
        executable: executable.into(),
        platform: None,
        arch: None,
        limit: 100,
        offset: 0,
    }
}

fn export_query(from: &str, to: &str) -> ExportQuery {
    ExportQuery {
        executable: None,
        platform: None,
        arch: None,
        from: day(from),
        to: day(to),
    }
}

/// Pages through an export with `limit` rows per page; every row in order.
async fn export_all(store: &dyn Store, q: &ExportQuery, limit: u32) -> Vec<HashRecord> {
    let mut all: Vec<HashRecord> = Vec::new();
    let mut cursor: Option<ExportCursor> = None;
    for _ in 0..1000 {
        let page = store
            .export_page(q, cursor.as_ref(), limit)
            .await
            .expect("export_page");
        assert!(page.len() <= limit as usize, "page larger than its limit");
        let Some(last) = page.last() else { break };
        cursor = Some(ExportCursor {
            valid_from: last.valid_from,
            id: last.id.clone(),
        });
        let short = page.len() < limit as usize;
        all.extend(page);
        if short {
            break;
        }
    }
    all
}

// ---------------------------------------------------------------------------------------
// record()
// ---------------------------------------------------------------------------------------

async fn first_insert_is_current(db: Db) {
    let s = &*db.store;
    let mut r = go("1.23.4", 1);
    // Submitted uppercase; stored lowercase.
    r.hash_sha256 = r.hash_sha256.to_uppercase();
    r.hash_sha1 = r.hash_sha1.map(|h| h.to_uppercase());
    let now = t("2025-01-02T03:04:05.123456789Z");
    let outcome = s.record(r.clone(), now).await.expect("record");
    let RecordOutcome::Inserted {
        id,
        superseded,
        hash_changed,
    } = outcome
    else {
        panic!("expected Inserted, got {outcome:?}")
    };
    assert_eq!(superseded, None);
    assert!(!hash_changed);

    let current = s
        .current_records(Some("GO1.23.4.WINDOWS-AMD64.MSI"))
        .await
        .expect("current_records");
    assert_eq!(current.len(), 1, "{current:?}");
    let c = &current[0];
    assert_eq!(c.id, id);
    assert_eq!(c.status, RecordStatus::Current);
    assert_eq!(c.valid_until, None);
    // Stored with microsecond precision on both backends.
    assert_eq!(c.valid_from, t("2025-01-02T03:04:05.123456Z"));
    assert!(c.integrity_ok);
    assert_eq!(c.family, "go{version}.windows-amd64.msi");
    assert_eq!(c.record, r.clone().validate().unwrap());
    assert_eq!(c.record.hash_sha256, hex_of(1, 64));
    assert_eq!(c.record.hash_sha1.as_deref(), Some(hex_of(1, 40).as_str()));
    assert_eq!(c.cert_revoked_at, None);
    assert_eq!(s.integrity_failures(), 0);
}

async fn new_version_supersedes_current(db: Db) {
    let s = &*db.store;
    let t1 = t("2025-01-01T02:00:00.250Z");
    let t2 = t("2025-02-01T02:00:00.000001Z");
    let old = insert(s, go("1.23.4", 1), t1).await;
    let outcome = s.record(go("1.23.5", 2), t2).await.expect("record");
    let RecordOutcome::Inserted {
        id: new,
        superseded,
        hash_changed,
    } = outcome
    else {
        panic!("expected Inserted, got {outcome:?}")
    };
    assert_eq!(superseded.as_deref(), Some(old.as_str()));
    assert!(!hash_changed, "a new version is not a republish");

    let old_rec = by_id(s, &old, &hex_of(1, 64)).await;
    let new_rec = by_id(s, &new, &hex_of(2, 64)).await;
    assert_eq!(old_rec.status, RecordStatus::Superseded);
    assert_eq!(old_rec.valid_from, t1);
    assert_eq!(old_rec.valid_until, Some(t2));
    assert_eq!(new_rec.status, RecordStatus::Current);
    assert_eq!(new_rec.valid_until, None);
    assert_eq!(old_rec.valid_until, Some(new_rec.valid_from));
    assert!(old_rec.integrity_ok && new_rec.integrity_ok);

    let current = s.current_records(None).await.unwrap();
    assert_eq!(ids(&current), vec![new.as_str()]);
    // The old filename no longer names a current record.
    assert!(
        s.current_records(Some("go1.23.4.windows-amd64.msi"))
            .await
            .unwrap()
            .is_empty()
    );

    // A third version supersedes the second, not the first again.
    let t3 = t("2025-03-01T02:00:00Z");
    let third = s.record(go("1.24.0", 3), t3).await.unwrap();
    assert!(
        matches!(&third, RecordOutcome::Inserted { superseded: Some(p), .. } if *p == new),
        "{third:?}"
    );
    assert_eq!(by_id(s, &old, &hex_of(1, 64)).await.valid_until, Some(t2));
    assert_eq!(by_id(s, &new, &hex_of(2, 64)).await.valid_until, Some(t3));
    assert_eq!(s.stats().await.unwrap().total_records, 1);
}

async fn platform_arch_and_vendor_are_separate_families(db: Db) {
    let s = &*db.store;
    let now = t("2025-01-01T00:00:00Z");
    insert(s, go("1.23.4", 1), now).await;
    let others = [
        rec(
            "Go",
            "go1.23.5.linux-amd64.tar.gz",
            "1.23.5",
            Platform::Linux,
            Arch::Amd64,
            2,
        ),
        rec(
            "Go",
            "go1.23.5.windows-arm64.msi",
            "1.23.5",
            Platform::Windows,
            Arch::Arm64,
            3,
        ),
        putty("0.81", Arch::Amd64, 4),
        // Same file name (same family string), other arch.
        putty("0.82", Arch::X86, 5),
        // Same family, platform and arch, other vendor.
        rec(
            "Mirror",
            "putty.exe",
            "0.83",
            Platform::Windows,
            Arch::Amd64,
            6,
        ),
    ];
    for r in others {
        let outcome = s.record(r, now).await.unwrap();
        assert!(
            matches!(
                outcome,
                RecordOutcome::Inserted {
                    superseded: None,
                    hash_changed: false,
                    ..
                }
            ),
            "{outcome:?}"
        );
    }
    let current = s.current_records(None).await.unwrap();
    assert_eq!(current.len(), 6);
    assert!(current.iter().all(|r| r.status == RecordStatus::Current));
    assert_eq!(s.current_records(Some("putty.exe")).await.unwrap().len(), 3);
}

async fn rerecording_identical_file_is_unchanged(db: Db) {
    let s = &*db.store;
    let t1 = t("2025-01-01T00:00:00Z");
    let id = insert(s, go("1.23.4", 1), t1).await;
    let again = s
        .record(go("1.23.4", 1), t("2025-01-02T00:00:00Z"))
        .await
        .unwrap();
    assert_eq!(again, RecordOutcome::Unchanged { id: id.clone() });
    // Differing only in hex case is the same file.
    let mut upper = go("1.23.4", 1);
    upper.hash_sha256 = upper.hash_sha256.to_uppercase();
    upper.hash_md5 = upper.hash_md5.map(|h| h.to_uppercase());
    let again = s.record(upper, t("2025-01-03T00:00:00Z")).await.unwrap();
    assert_eq!(again, RecordOutcome::Unchanged { id: id.clone() });

    let current = s.current_records(None).await.unwrap();
    assert_eq!(ids(&current), vec![id.as_str()]);
    assert_eq!(
        current[0].valid_from, t1,
        "unchanged must not move valid_from"
    );
    assert_eq!(
        s.history(&history_query("go1.23.4.windows-amd64.msi"))
            .await
            .unwrap()
            .total,
        1
    );
}

async fn same_version_new_hash_reports_hash_changed(db: Db) {
    let s = &*db.store;
    let old = insert(s, go("1.23.4", 1), t("2025-01-01T00:00:00Z")).await;
    let outcome = s
        .record(go("1.23.4", 2), t("2025-01-02T00:00:00Z"))
        .await
        .unwrap();
    let RecordOutcome::Inserted {
        id: new,
        superseded,
        hash_changed,
    } = outcome
    else {
        panic!("expected Inserted, got {outcome:?}")
    };
    assert_eq!(superseded.as_deref(), Some(old.as_str()));
    assert!(
        hash_changed,
        "a republish under the same version must be reported"
    );
    let current = s.current_records(None).await.unwrap();
    assert_eq!(ids(&current), vec![new.as_str()]);
    assert_eq!(current[0].record.hash_sha256, hex_of(2, 64));
    assert_eq!(
        by_id(s, &old, &hex_of(1, 64)).await.status,
        RecordStatus::Superseded
    );
    // A metadata-only change (same hashes, new URL) supersedes but is no hash change.
    let mut moved = go("1.23.4", 2);
    moved.source_url = "https://mirror.example/go1.23.4.windows-amd64.msi".into();
    let outcome = s.record(moved, t("2025-01-03T00:00:00Z")).await.unwrap();
    assert!(
        matches!(&outcome, RecordOutcome::Inserted { superseded: Some(p), hash_changed: false, .. } if *p == new),
        "{outcome:?}"
    );
}

async fn invalid_records_are_rejected_and_change_nothing(db: Db) {
    let s = &*db.store;
    let t1 = t("2025-01-01T00:00:00Z");
    let id = insert(s, go("1.23.4", 1), t1).await;

    let mut bad_hex = go("1.23.5", 2);
    bad_hex.hash_sha256 = "zz".repeat(32);
    let mut short_sha1 = go("1.23.5", 2);
    short_sha1.hash_sha1 = Some("abc".into());
    let mut bad_md5 = go("1.23.5", 2);
    bad_md5.hash_md5 = Some("g".repeat(32));
    let mut control = go("1.23.5", 2);
    control.executable_name = "go1.23.5.windows-amd64\n.msi".into();
    let mut nul = go("1.23.5", 2);
    nul.executable_name = "go1.23.5\0.msi".into();
    let mut no_version = go("1.23.5", 2);
    no_version.version = " ".into();
    let mut no_name = go("1.23.5", 2);
    no_name.executable_name = String::new();

    for (what, r) in [
        ("bad sha256 hex", bad_hex),
        ("short sha1", short_sha1),
        ("bad md5 hex", bad_md5),
        ("newline in name", control),
        ("NUL in name", nul),
        ("blank version", no_version),
        ("empty name", no_name),
    ] {
        let err = s
            .record(r, t("2025-01-02T00:00:00Z"))
            .await
            .expect_err(what);
        assert!(
            matches!(err, model::Error::BadRequest(_)),
            "{what}: {err:?}"
        );
    }

    // The existing current record was neither superseded nor joined by anything.
    let all = s
        .history(&history_query("go1.23.4.windows-amd64.msi"))
        .await
        .unwrap();
    assert_eq!(all.total, 1);
    assert_eq!(ids(&all.items), vec![id.as_str()]);
    assert_eq!(all.items[0].status, RecordStatus::Current);
    assert_eq!(all.items[0].valid_until, None);
    let everything = s
        .export_count(&export_query("2000-01-01", "2100-01-01"), u64::MAX)
        .await
        .unwrap();
    assert_eq!(everything, 1);
}

async fn deceptive_names_and_plain_http_are_rejected_whole_batch(db: Db) {
    let s = &*db.store;
    let now = t("2025-01-01T00:00:00Z");
    let mut bidi = go("1.23.5", 2);
    bidi.executable_name = "go1.23.5\u{202E}ism.exe".into();
    let mut zero_width = go("1.23.5", 2);
    zero_width.vendor = "G\u{200B}o".into();
    let mut bom = go("1.23.5", 2);
    bom.version = "\u{FEFF}1.23.5".into();
    let mut long = go("1.23.5", 2);
    long.executable_name = format!("{}.msi", "x".repeat(252));
    let mut http = go("1.23.5", 2);
    http.source_url = "http://go.dev/dl/go1.23.5.windows-amd64.msi".into();
    for (what, bad) in [
        ("bidi override in name", bidi),
        ("zero-width in vendor", zero_width),
        ("BOM in version", bom),
        ("256-byte name", long),
        ("plain http source", http),
    ] {
        let err = s.record(bad.clone(), now).await.expect_err(what);
        assert!(
            matches!(err, model::Error::BadRequest(_)),
            "{what}: {err:?}"
        );
        // In a batch, one bad record refuses the whole batch.
        let err = s
            .record_many(
                vec![go("1.23.4", 1), putty("0.81", Arch::Amd64, 3), bad],
                now,
            )
            .await
            .expect_err(what);
        assert!(
            matches!(err, model::Error::BadRequest(_)),
            "{what}: {err:?}"
        );
    }
    assert_eq!(
        s.export_count(&export_query("2000-01-01", "2100-01-01"), u64::MAX)
            .await
            .unwrap(),
        0
    );
}

/// Advisory imports read what is stored, then write: imports running at once (the daily
/// refresh and `advisories import` beside a running service) each take the write lock
/// before their first read, so none is refused for a snapshot another has made stale.
async fn concurrent_advisory_imports_all_succeed(db: Db) {
    let s = db.store.clone();
    let now = t("2025-01-01T00:00:00Z");
    let imports = (0..8).map(|i| {
        let s = s.clone();
        async move {
            let row = store::packages::AdvisoryRow {
                id: format!("GHSA-test-{i}"),
                modified: "2025-01-01T00:00:00Z".to_string(),
                document: format!(r#"{{"id":"GHSA-test-{i}"}}"#),
                packages: vec![("npm".to_string(), format!("package-{i}"))],
            };
            s.import_advisories(&[row], now).await
        }
    });
    for result in futures::future::join_all(imports).await {
        assert_eq!(result.expect("a concurrent import failed"), 1);
    }
    let packages: Vec<(String, String)> = (0..8)
        .map(|i| ("npm".to_string(), format!("package-{i}")))
        .collect();
    assert_eq!(s.advisories_for(&packages).await.unwrap().len(), 8);
}

/// An import larger than the store plans at once (several thousand records), as a
/// history import sends it: every file of one release, then every file of the next. Each
/// outcome answers its own record in call order, each newer version supersedes the one
/// before, and a file sent again at the end is unchanged.
async fn a_large_import_of_release_after_release_keeps_each_history(db: Db) {
    const FILES: u64 = 4_000;
    let file = |f: u64, release: u64| {
        rec(
            "Debian",
            &format!("usr/lib/libtool{f}.so.1"),
            &format!("1.{release}-1"),
            Platform::Linux,
            Arch::Amd64,
            release * 1_000_000 + f,
        )
    };
    let now = t("2025-01-01T00:00:00Z");
    let mut records: Vec<NewRecord> = (1..=3)
        .flat_map(|release| (0..FILES).map(move |f| file(f, release)))
        .collect();
    records.push(file(17, 3));
    let outcomes = db
        .store
        .record_many(records, now)
        .await
        .expect("record_many");
    assert_eq!(outcomes.len(), 3 * FILES as usize + 1);
    let inserted = |i: usize| match &outcomes[i] {
        RecordOutcome::Inserted { id, superseded, .. } => (id.clone(), superseded.clone()),
        other => panic!("record {i}: expected Inserted, got {other:?}"),
    };
    for f in 0..FILES as usize {
        let (first, none) = inserted(f);
        assert_eq!(none, None, "file {f}: the first release supersedes nothing");
        let (second, superseded) = inserted(FILES as usize + f);
        assert_eq!(
            superseded,
            Some(first),
            "file {f}: release 2 supersedes release 1"
        );
        let (_, superseded) = inserted(2 * FILES as usize + f);
        assert_eq!(
            superseded,
            Some(second),
            "file {f}: release 3 supersedes release 2"
        );
    }
    let (third_of_17, _) = inserted(2 * FILES as usize + 17);
    assert_eq!(
        outcomes.last(),
        Some(&RecordOutcome::Unchanged { id: third_of_17 })
    );
    let history = db
        .store
        .history(&history_query("usr/lib/libtool17.so.1"))
        .await
        .unwrap();
    assert_eq!(history.total, 3);
    let current: Vec<_> = history
        .items
        .iter()
        .filter(|r| r.status == RecordStatus::Current)
        .map(|r| r.record.version.as_str())
        .collect();
    assert_eq!(current, ["1.3-1"]);
}

async fn concurrent_versions_leave_one_current(db: Db) {
    let s = db.store.clone();
    let base = t("2025-01-01T00:00:00Z");
    let tasks = (0..6u64).map(|i| {
        let s = s.clone();
        let now = base + chrono::Duration::milliseconds(i as i64);
        async move { s.record(go(&format!("1.30.{i}"), 100 + i), now).await }
    });
    let results = futures::future::join_all(tasks).await;
    for r in &results {
        assert!(r.is_ok(), "concurrent record() failed: {r:?}");
    }
    let history = s
        .history(&history_query("go1.30.0.windows-amd64.msi"))
        .await
        .unwrap();
    assert_eq!(history.total, 6);
    let current: Vec<_> = history
        .items
        .iter()
        .filter(|r| r.status == RecordStatus::Current)
        .collect();
    assert_eq!(current.len(), 1, "exactly one current record");
    assert_eq!(current[0].valid_until, None);
    for r in history
        .items
        .iter()
        .filter(|r| r.status == RecordStatus::Superseded)
    {
        let until = r.valid_until.expect("superseded record has valid_until");
        assert!(
            history.items.iter().any(|n| n.valid_from == until),
            "valid_until of {} matches some version's valid_from",
            r.record.version
        );
    }
}

/// Archives recorded at once (a refresh's artifacts, each archive's files in one
/// `record_many`) beside single `record` calls, all in the same families: each call gets
/// the outcomes of its own records, in order, and the histories end as version order says.
async fn concurrent_batches_each_get_their_own_outcomes(db: Db) {
    let s = db.store.clone();
    let base = t("2025-01-01T00:00:00Z");
    let batches = (0..8u64).map(|i| {
        let s = s.clone();
        let now = base + chrono::Duration::milliseconds(i as i64);
        let files = vec![
            go(&format!("1.30.{i}"), 100 + i),
            putty(&format!("0.8{i}"), Arch::Amd64, 200 + i),
        ];
        async move {
            let outcomes = s.record_many(files.clone(), now).await;
            (files, outcomes)
        }
    });
    let singles = (0..4u64).map(|i| {
        let s = s.clone();
        let file = putty(&format!("0.7{i}"), Arch::Arm64, 300 + i);
        async move { (file.clone(), s.record(file, base).await) }
    });
    let (batches, singles) = futures::future::join(
        futures::future::join_all(batches),
        futures::future::join_all(singles),
    )
    .await;
    let mut written: Vec<(NewRecord, RecordOutcome)> = Vec::new();
    for (files, outcomes) in batches {
        let outcomes = outcomes.expect("concurrent record_many");
        assert_eq!(outcomes.len(), files.len(), "one outcome a record");
        written.extend(files.into_iter().zip(outcomes));
    }
    for (file, outcome) in singles {
        written.push((file, outcome.expect("concurrent record")));
    }
    for (file, outcome) in &written {
        assert!(outcome.inserted(), "{outcome:?}");
        let stored = by_id(&*s, outcome.id(), &file.hash_sha256).await;
        assert_eq!(
            stored.record.version, file.version,
            "its own record's outcome"
        );
    }
    for (name, newest, arch, total) in [
        ("go1.30.0.windows-amd64.msi", "1.30.7", Arch::Amd64, 8),
        ("putty.exe", "0.87", Arch::Amd64, 12),
        ("putty.exe", "0.73", Arch::Arm64, 12),
    ] {
        let history = s.history(&history_query(name)).await.unwrap();
        assert_eq!(history.total, total, "{name}");
        let current: Vec<_> = history
            .items
            .iter()
            .filter(|r| r.status == RecordStatus::Current)
            .map(|r| (r.record.version.as_str(), r.record.arch))
            .collect();
        assert!(current.contains(&(newest, arch)), "{name}: {current:?}");
    }
}

/// The whole family's history (newest first) holds together: one current record, newest;
/// each record ends exactly where the next newer one starts; `valid_from` strictly falls.
fn assert_history_chain(items: &[HashRecord]) {
    assert!(!items.is_empty());
    assert_eq!(items[0].status, RecordStatus::Current, "{items:#?}");
    assert_eq!(items[0].valid_until, None);
    for w in items.windows(2) {
        let (newer, older) = (&w[0], &w[1]);
        assert_eq!(older.status, RecordStatus::Superseded, "{items:#?}");
        assert_eq!(
            older.valid_until,
            Some(newer.valid_from),
            "no gap or overlap between {} and {}",
            older.record.version,
            newer.record.version
        );
        assert!(older.valid_from < newer.valid_from, "{items:#?}");
    }
}

/// A past version recorded with its release date as `now` (a history horizon, a pin)
/// starts its history then, ends where the next newer version starts, and leaves the
/// current record as it was.
async fn a_past_version_starts_at_its_release_date(db: Db) {
    let s = &*db.store;
    let recorded = t("2025-06-01T00:00:00Z");
    let tool = |v: &str, seed| rec("Tool", "tool.exe", v, Platform::Windows, Arch::Amd64, seed);
    let newest = insert(s, tool("3.0", 1), recorded).await;
    let oldest = insert(s, tool("1.0", 2), t("2023-03-02T16:05:12Z")).await;
    let middle = insert(s, tool("2.0", 3), t("2024-06-04T19:51:59Z")).await;
    let oldest = by_id(s, &oldest, &hex_of(2, 64)).await;
    let middle = by_id(s, &middle, &hex_of(3, 64)).await;
    assert_eq!(
        (oldest.valid_from, oldest.valid_until),
        (t("2023-03-02T16:05:12Z"), Some(t("2024-06-04T19:51:59Z")))
    );
    assert_eq!(
        (middle.valid_from, middle.valid_until),
        (t("2024-06-04T19:51:59Z"), Some(recorded))
    );
    assert_eq!(
        (oldest.status, middle.status),
        (RecordStatus::Superseded, RecordStatus::Superseded)
    );
    let current = s.current_records(Some("tool.exe")).await.unwrap();
    assert_eq!(ids(&current), vec![newest.as_str()]);
    assert_eq!(current[0].valid_from, recorded);
    let history = s.history(&history_query("tool.exe")).await.unwrap();
    assert_eq!(versions(&history.items), vec!["3.0", "2.0", "1.0"]);
}

async fn older_version_never_supersedes_newer(db: Db) {
    let s = &*db.store;
    let t1 = t("2025-01-01T00:00:00Z");
    let tool = |v: &str, seed| rec("Tool", "tool.exe", v, Platform::Windows, Arch::Amd64, seed);
    let new = insert(s, tool("2.0", 1), t1).await;
    let outcome = s
        .record(tool("1.0", 2), t("2025-02-01T00:00:00Z"))
        .await
        .unwrap();
    let RecordOutcome::Inserted {
        id: old,
        superseded,
        hash_changed,
    } = outcome
    else {
        panic!("expected Inserted, got {outcome:?}")
    };
    assert_eq!(superseded, None, "an older version supersedes nothing");
    assert!(!hash_changed);
    let current = s.current_records(Some("tool.exe")).await.unwrap();
    assert_eq!(ids(&current), vec![new.as_str()]);
    assert_eq!(
        current[0].valid_from, t1,
        "the current record keeps its interval"
    );
    // 2.0 is still what a lookup of its hash answers; 1.0 only historically.
    let found = s
        .find_by_hashes(&[hv(&hex_of(1, 64))], false)
        .await
        .unwrap();
    assert_eq!(ids(&found), vec![new.as_str()]);
    assert!(
        s.find_by_hashes(&[hv(&hex_of(2, 64))], false)
            .await
            .unwrap()
            .is_empty()
    );
    let old_rec = by_id(s, &old, &hex_of(2, 64)).await;
    assert_eq!(old_rec.status, RecordStatus::Superseded);
    assert_eq!(old_rec.valid_until, Some(t1));
    assert!(old_rec.integrity_ok);
    let history = s.history(&history_query("tool.exe")).await.unwrap();
    assert_eq!(versions(&history.items), vec!["2.0", "1.0"]);
    assert_history_chain(&history.items);

    // Dotted numeric: 1.10 is newer than 1.9 whichever arrives first.
    insert(s, tool("1.10", 3), t("2025-03-01T00:00:00Z")).await;
    insert(s, tool("1.9", 4), t("2025-03-02T00:00:00Z")).await;
    // Go release candidates come before the release.
    insert(s, go("1.22.0", 5), t1).await;
    let rc = s
        .record(go("1.22rc1", 6), t("2025-03-03T00:00:00Z"))
        .await
        .unwrap();
    assert!(
        matches!(
            rc,
            RecordOutcome::Inserted {
                superseded: None,
                ..
            }
        ),
        "{rc:?}"
    );
    let go_history = s
        .history(&history_query("go1.22rc1.windows-amd64.msi"))
        .await
        .unwrap();
    assert_eq!(versions(&go_history.items), vec!["1.22.0", "1.22rc1"]);
    assert_history_chain(&go_history.items);
    let history = s.history(&history_query("tool.exe")).await.unwrap();
    assert_eq!(versions(&history.items), vec!["2.0", "1.10", "1.9", "1.0"]);
    assert_history_chain(&history.items);
    assert_eq!(s.stats().await.unwrap().total_records, 2);
}

async fn replayed_versions_fit_between_neighbours(db: Db) {
    let s = &*db.store;
    let p = |v: &str, seed| putty(v, Arch::Amd64, seed);
    insert(s, p("0.81", 81), t("2024-04-15T00:00:00Z")).await;
    insert(s, p("0.83", 83), t("2025-02-08T00:00:00Z")).await;
    // Replays of older releases, in no particular order.
    for (v, seed, at) in [
        ("0.80", 80, "2025-03-01T00:00:00Z"),
        ("0.82", 82, "2025-03-02T00:00:00Z"),
        ("0.79", 79, "2025-03-03T00:00:00Z"),
        ("0.79.5", 795, "2025-03-04T00:00:00Z"),
    ] {
        let outcome = s.record(p(v, seed), t(at)).await.unwrap();
        assert!(
            matches!(
                outcome,
                RecordOutcome::Inserted {
                    superseded: None,
                    ..
                }
            ),
            "{v}: {outcome:?}"
        );
    }
    // Replaying one again records nothing.
    let again = s
        .record(p("0.80", 80), t("2025-03-05T00:00:00Z"))
        .await
        .unwrap();
    assert!(
        matches!(again, RecordOutcome::Unchanged { .. }),
        "{again:?}"
    );
    let history = s.history(&history_query("putty.exe")).await.unwrap();
    assert_eq!(
        versions(&history.items),
        vec!["0.83", "0.82", "0.81", "0.80", "0.79.5", "0.79"]
    );
    assert_history_chain(&history.items);
    // Versions the replay did not touch keep their start.
    assert_eq!(history.items[0].valid_from, t("2025-02-08T00:00:00Z"));
    assert_eq!(history.items[2].valid_from, t("2024-04-15T00:00:00Z"));
    let current = s.current_records(Some("putty.exe")).await.unwrap();
    assert_eq!(versions(&current), vec!["0.83"]);
    // The lookup answers the newest; the historical lookup finds the replayed ones.
    assert_eq!(
        versions(
            &s.find_by_hashes(&[hv(&hex_of(83, 64))], false)
                .await
                .unwrap()
        ),
        vec!["0.83"]
    );
    assert_eq!(
        versions(
            &s.find_by_hashes(&[hv(&hex_of(80, 64))], true)
                .await
                .unwrap()
        ),
        vec!["0.80"]
    );
    // The export (oldest first by valid_from) runs in version order too.
    let mut q = export_query("2024-01-01", "2025-12-31");
    q.executable = Some("putty.exe".into());
    assert_eq!(
        versions(&export_all(s, &q, 2).await),
        vec!["0.79", "0.79.5", "0.80", "0.81", "0.82", "0.83"]
    );
}

async fn batch_out_of_order_keeps_version_order(db: Db) {
    let s = &*db.store;
    let now = t("2025-01-01T00:00:00Z");
    let p = |v: &str, seed| putty(v, Arch::Amd64, seed);
    let outcomes = s
        .record_many(
            vec![p("0.81", 81), p("0.80", 80), p("0.9", 9), p("0.82", 82)],
            now,
        )
        .await
        .unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, RecordOutcome::Inserted { .. }))
    );
    let history = s.history(&history_query("putty.exe")).await.unwrap();
    assert_eq!(
        versions(&history.items),
        vec!["0.82", "0.81", "0.80", "0.9"]
    );
    assert_history_chain(&history.items);
    // Re-running the same batch records nothing.
    let outcomes = s
        .record_many(
            vec![p("0.81", 81), p("0.80", 80), p("0.9", 9), p("0.82", 82)],
            now,
        )
        .await
        .unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, RecordOutcome::Unchanged { .. })),
        "{outcomes:?}"
    );
    assert_eq!(
        s.history(&history_query("putty.exe")).await.unwrap().total,
        4
    );
}

/// A batch over stored histories: a newer version supersedes the current record, an older
/// one is fitted between its stored neighbours, and each family's chain stays unbroken.
async fn a_batch_fits_older_versions_into_a_stored_history(db: Db) {
    let s = &*db.store;
    let p = |v: &str, seed| putty(v, Arch::Amd64, seed);
    let stored = s
        .record_many(
            vec![p("0.80", 80), p("0.82", 82)],
            t("2025-01-01T00:00:00Z"),
        )
        .await
        .unwrap();
    let RecordOutcome::Inserted { id: current, .. } = &stored[1] else {
        panic!("{stored:?}")
    };
    let outcomes = s
        .record_many(
            vec![p("0.83", 83), p("0.81", 81), p("0.84", 84)],
            t("2025-02-01T00:00:00Z"),
        )
        .await
        .unwrap();
    assert!(
        matches!(&outcomes[0], RecordOutcome::Inserted { superseded: Some(id), .. } if id == current),
        "{outcomes:?}"
    );
    assert!(
        matches!(
            &outcomes[1],
            RecordOutcome::Inserted {
                superseded: None,
                ..
            }
        ),
        "{outcomes:?}"
    );
    let history = s.history(&history_query("putty.exe")).await.unwrap();
    assert_eq!(
        versions(&history.items),
        vec!["0.84", "0.83", "0.82", "0.81", "0.80"]
    );
    assert_history_chain(&history.items);
}

/// A build replaced under the same version (a republish) and then offered again, as a
/// mirror that still serves it would, is a file the history already holds.
async fn a_republished_file_offered_again_is_unchanged(db: Db) {
    let s = &*db.store;
    let first = insert(s, go("1.23.4", 1), t("2025-01-01T00:00:00Z")).await;
    insert(s, go("1.23.4", 2), t("2025-01-02T00:00:00Z")).await;
    let again = s
        .record_many(vec![go("1.23.4", 1)], t("2025-01-03T00:00:00Z"))
        .await
        .unwrap();
    assert_eq!(again, vec![RecordOutcome::Unchanged { id: first }]);
    let history = s
        .history(&history_query("go1.23.4.windows-amd64.msi"))
        .await
        .unwrap();
    assert_eq!(history.total, 2);
    assert_eq!(history.items[0].record.hash_sha256, hex_of(2, 64));
}

/// Overwrites the HMAC of the row `id`, as someone with write access to the database could.
async fn forge_hmac(db: &Db, id: &str) -> u64 {
    db.exec(
        &format!(
            "UPDATE hash_records SET hmac = {} WHERE id = {}",
            db.backend.bytes_literal(&hex_of(7, 64)),
            db.backend.unhex("$1")
        ),
        &[id],
    )
    .await
}

/// A refresh offers the current file again: unchanged, as long as its stored row verifies.
/// When the current row's HMAC was forged, the file is judged against the rest of the
/// history: a genuine copy there (the same file recorded before from another URL) makes it
/// unchanged, else the genuine file replaces the forged row.
async fn the_current_file_offered_again_is_unchanged_unless_its_row_was_forged(db: Db) {
    let s = &*db.store;
    let first = insert(s, go("1.23.4", 1), t("2025-01-01T00:00:00Z")).await;
    let mut moved = go("1.23.4", 1);
    moved.source_url = "https://mirror.example/go1.23.4.windows-amd64.msi".into();
    let current = insert(s, moved.clone(), t("2025-01-02T00:00:00Z")).await;
    let again = s
        .record_many(vec![moved.clone()], t("2025-01-03T00:00:00Z"))
        .await
        .unwrap();
    assert_eq!(
        again,
        vec![RecordOutcome::Unchanged {
            id: current.clone()
        }]
    );

    assert_eq!(forge_hmac(&db, &current).await, 1);
    let again = s
        .record_many(vec![moved.clone()], t("2025-01-04T00:00:00Z"))
        .await
        .unwrap();
    assert_eq!(again, vec![RecordOutcome::Unchanged { id: first.clone() }]);

    assert_eq!(forge_hmac(&db, &first).await, 1);
    let again = s
        .record_many(vec![moved], t("2025-01-05T00:00:00Z"))
        .await
        .unwrap();
    assert!(
        matches!(&again[0], RecordOutcome::Inserted { superseded: Some(id), .. } if *id == current),
        "a forged current row must not count as unchanged: {again:?}"
    );
    let found = s
        .find_by_hashes(&[hv(&hex_of(1, 64))], false)
        .await
        .unwrap();
    assert!(
        found
            .iter()
            .any(|r| r.integrity_ok && r.status == RecordStatus::Current)
    );
}

// ---------------------------------------------------------------------------------------
// find_by_hashes()
// ---------------------------------------------------------------------------------------

async fn find_by_each_hash_kind(db: Db) {
    let s = &*db.store;
    let now = t("2025-01-01T00:00:00Z");
    let full = insert(s, go("1.23.4", 1), now).await;
    let mut manifest = rec(
        "npm",
        "lodash (npm)",
        "4.17.21",
        Platform::Universal,
        Arch::Universal,
        2,
    );
    manifest.hash_sha1 = None;
    manifest.hash_md5 = None;
    let manifest_id = insert(s, manifest, now).await;

    for (what, h) in [
        ("sha256", hex_of(1, 64)),
        ("sha1", hex_of(1, 40)),
        ("md5", hex_of(1, 32)),
        ("sha256 uppercase", hex_of(1, 64).to_uppercase()),
        (
            "md5 padded",
            format!("  {}\n", hex_of(1, 32).to_uppercase()),
        ),
    ] {
        let found = s.find_by_hashes(&[hv(&h)], false).await.unwrap();
        assert_eq!(ids(&found), vec![full.as_str()], "by {what}");
        assert!(found[0].integrity_ok);
        assert_eq!(
            found[0].record.executable_name,
            "go1.23.4.windows-amd64.msi"
        );
    }

    // Several kinds at once; a record matched by two of its hashes comes back once.
    let found = s
        .find_by_hashes(
            &[hv(&hex_of(1, 64)), hv(&hex_of(1, 40)), hv(&hex_of(2, 64))],
            false,
        )
        .await
        .unwrap();
    let mut got = ids(&found);
    got.sort_unstable();
    let mut want = vec![full.as_str(), manifest_id.as_str()];
    want.sort_unstable();
    assert_eq!(got, want);

    // Unknown hashes, and a manifest-only record's absent SHA-1/MD5, match nothing.
    let unknown = [
        hv(&hex_of(99, 64)),
        hv(&hex_of(99, 40)),
        hv(&hex_of(2, 40)),
        hv(&hex_of(2, 32)),
    ];
    assert!(s.find_by_hashes(&unknown, true).await.unwrap().is_empty());
    assert!(s.find_by_hashes(&[], true).await.unwrap().is_empty());
}

async fn find_superseded_only_when_asked(db: Db) {
    let s = &*db.store;
    let old = insert(s, go("1.23.4", 1), t("2025-01-01T00:00:00Z")).await;
    let new = insert(s, go("1.23.5", 2), t("2025-02-01T00:00:00Z")).await;
    for h in [hex_of(1, 64), hex_of(1, 40), hex_of(1, 32)] {
        assert!(
            s.find_by_hashes(&[hv(&h)], false).await.unwrap().is_empty(),
            "superseded record found without include_superseded by {h}"
        );
        let found = s.find_by_hashes(&[hv(&h)], true).await.unwrap();
        assert_eq!(ids(&found), vec![old.as_str()]);
        assert_eq!(found[0].status, RecordStatus::Superseded);
        assert_eq!(found[0].valid_until, Some(t("2025-02-01T00:00:00Z")));
    }
    let both = s
        .find_by_hashes(&[hv(&hex_of(1, 64)), hv(&hex_of(2, 64))], false)
        .await
        .unwrap();
    assert_eq!(ids(&both), vec![new.as_str()]);
    let both = s
        .find_by_hashes(&[hv(&hex_of(1, 64)), hv(&hex_of(2, 64))], true)
        .await
        .unwrap();
    assert_eq!(both.len(), 2);
}

// ---------------------------------------------------------------------------------------
// history()
// ---------------------------------------------------------------------------------------

async fn history_by_any_filename_newest_first(db: Db) {
    let s = &*db.store;
    let t1 = t("2025-01-01T00:00:00Z");
    let t2 = t("2025-01-01T00:00:00.5Z");
    let t3 = t("2025-01-01T00:00:01Z");
    insert(s, go("1.23.3", 1), t1).await;
    insert(s, go("1.23.4", 2), t2).await;
    insert(s, go("1.23.5", 3), t3).await;
    // Other families must not leak in.
    insert(
        s,
        rec(
            "Go",
            "go1.23.5.linux-amd64.tar.gz",
            "1.23.5",
            Platform::Linux,
            Arch::Amd64,
            4,
        ),
        t3,
    )
    .await;
    insert(s, putty("0.81", Arch::Amd64, 5), t3).await;

    for name in [
        "go1.23.3.windows-amd64.msi",
        "go1.23.5.windows-amd64.msi",
        "GO1.23.4.Windows-AMD64.msi",
    ] {
        let page = s.history(&history_query(name)).await.unwrap();
        assert_eq!(page.total, 3, "by {name}");
        assert_eq!(
            versions(&page.items),
            vec!["1.23.5", "1.23.4", "1.23.3"],
            "by {name}"
        );
        let st: Vec<_> = page.items.iter().map(|r| r.status).collect();
        assert_eq!(
            st,
            vec![
                RecordStatus::Current,
                RecordStatus::Superseded,
                RecordStatus::Superseded
            ]
        );
        assert_eq!(page.items[0].valid_until, None);
        assert_eq!(page.items[1].valid_until, Some(t3));
        assert_eq!(page.items[2].valid_until, Some(t2));
        assert_eq!(page.items[2].valid_from, t1);
        assert!(page.items.iter().all(|r| r.integrity_ok));
    }
    let none = s.history(&history_query("notepad.exe")).await.unwrap();
    assert_eq!(none.total, 0);
    assert!(none.items.is_empty());
}

async fn history_by_bare_name_with_filters_and_paging(db: Db) {
    let s = &*db.store;
    insert(s, putty("0.80", Arch::Amd64, 1), t("2024-06-01T00:00:00Z")).await;
    insert(s, putty("0.81", Arch::Amd64, 2), t("2024-07-01T00:00:00Z")).await;
    insert(s, putty("0.81", Arch::X86, 3), t("2024-07-02T00:00:00Z")).await;
    insert(s, putty("0.81", Arch::Arm64, 4), t("2024-07-03T00:00:00Z")).await;
    insert(
        s,
        rec(
            "PuTTY",
            "pscp.exe",
            "0.81",
            Platform::Windows,
            Arch::Amd64,
            5,
        ),
        t("2024-07-04T00:00:00Z"),
    )
    .await;

    let all = s.history(&history_query("PuTTY.exe")).await.unwrap();
    assert_eq!(all.total, 4);
    let order: Vec<_> = all
        .items
        .iter()
        .map(|r| (r.record.version.as_str(), r.record.arch))
        .collect();
    assert_eq!(
        order,
        vec![
            ("0.81", Arch::Arm64),
            ("0.81", Arch::X86),
            ("0.81", Arch::Amd64),
            ("0.80", Arch::Amd64)
        ]
    );

    let mut q = history_query("putty.exe");
    q.arch = Some(Arch::Amd64);
    let amd64 = s.history(&q).await.unwrap();
    assert_eq!(amd64.total, 2);
    assert_eq!(versions(&amd64.items), vec!["0.81", "0.80"]);

    q.platform = Some(Platform::Windows);
    q.arch = Some(Arch::X86);
    let x86 = s.history(&q).await.unwrap();
    assert_eq!(x86.total, 1);
    assert_eq!(x86.items[0].record.arch, Arch::X86);

    q.platform = Some(Platform::Linux);
    q.arch = None;
    let linux = s.history(&q).await.unwrap();
    assert_eq!(linux.total, 0);
    assert!(linux.items.is_empty());

    // limit/offset page through the same order; total is the whole match.
    let mut q = history_query("putty.exe");
    q.limit = 2;
    q.offset = 1;
    let page = s.history(&q).await.unwrap();
    assert_eq!(page.total, 4);
    assert_eq!(ids(&page.items), ids(&all.items[1..3]));
    q.offset = 3;
    let page = s.history(&q).await.unwrap();
    assert_eq!(ids(&page.items), ids(&all.items[3..]));
    q.offset = 10;
    let page = s.history(&q).await.unwrap();
    assert_eq!(page.total, 4);
    assert!(page.items.is_empty());
}

async fn names_match_by_unicode_case_folding(db: Db) {
    let s = &*db.store;
    let now = t("2025-03-10T12:00:00Z");
    let r = |name: &str, v: &str, seed| rec("V", name, v, Platform::Windows, Arch::Amd64, seed);
    let elan = insert(s, r("Élan.exe", "1.0", 1), now).await;
    insert(s, r("Σίσυφος.exe", "1.0", 2), now).await;
    insert(s, r("Программа.exe", "1.0", 3), now).await;
    insert(s, r("elan.exe", "1.0", 4), now).await; // another name: no accent

    let q = export_query("2025-03-10", "2025-03-10");
    for (wanted, spellings) in [
        (
            "Élan.exe",
            &[
                "Élan.exe",
                "élan.exe",
                "E\u{301}lan.exe",
                "ÉLAN.EXE",
                "e\u{301}LAN.exe",
            ][..],
        ),
        (
            "Σίσυφος.exe",
            &["ΣΊΣΥΦΟΣ.EXE", "σίσυφος.exe", "Σι\u{301}συφος.exe"][..],
        ),
        ("Программа.exe", &["ПРОГРАММА.EXE", "программа.exe"][..]),
    ] {
        for name in spellings {
            let current = s.current_records(Some(name)).await.unwrap();
            assert_eq!(current.len(), 1, "hash of the day by {name:?}");
            assert_eq!(current[0].record.executable_name, wanted);
            let history = s.history(&history_query(name)).await.unwrap();
            assert_eq!(history.total, 1, "history by {name:?}");
            assert_eq!(history.items[0].record.executable_name, wanted);
            let mut q = q.clone();
            q.executable = Some((*name).to_string());
            assert_eq!(
                s.export_count(&q, u64::MAX).await.unwrap(),
                1,
                "export by {name:?}"
            );
            assert_eq!(
                export_all(s, &q, 10).await[0].record.executable_name,
                wanted
            );
        }
    }
    // The decomposed spelling of a newer version is the same executable: it supersedes.
    let outcome = s
        .record(
            r("E\u{301}LAN.exe", "2.0", 5),
            now + chrono::Duration::hours(1),
        )
        .await
        .unwrap();
    assert!(
        matches!(&outcome, RecordOutcome::Inserted { superseded: Some(p), .. } if *p == elan),
        "{outcome:?}"
    );
    let history = s.history(&history_query("élan.exe")).await.unwrap();
    assert_eq!(versions(&history.items), vec!["2.0", "1.0"]);
    assert_eq!(s.current_records(Some("ELAN.exe")).await.unwrap().len(), 1);
}

async fn name_keys_of_existing_rows_are_backfilled(db: Db) {
    let s = &*db.store;
    let now = t("2025-03-10T12:00:00Z");
    let id = insert(
        s,
        rec(
            "V",
            "E\u{301}lan.exe",
            "1.0",
            Platform::Windows,
            Arch::Amd64,
            1,
        ),
        now,
    )
    .await;
    // As a row written before names had keys: no key, family lowercased only.
    let n = db
        .exec(
            &format!(
                "UPDATE hash_records SET name_key = NULL, family = $1 WHERE id = {}",
                db.backend.unhex("$2")
            ),
            &["e\u{301}lan.exe", &id],
        )
        .await;
    assert_eq!(n, 1);
    let reopened = db.open(SECRET).await;
    let current = reopened.current_records(Some("Élan.exe")).await.unwrap();
    assert_eq!(ids(&current), vec![id.as_str()]);
    assert_eq!(current[0].family, "\u{e9}lan.exe");
    let history = reopened.history(&history_query("ÉLAN.EXE")).await.unwrap();
    assert_eq!(history.total, 1);
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM hash_records WHERE name_key IS NULL")
            .await,
        0
    );
    reopened.close().await;
}

// ---------------------------------------------------------------------------------------
// export_count() / export_page()
// ---------------------------------------------------------------------------------------

async fn export_day_bounds_are_inclusive(db: Db) {
    let s = &*db.store;
    let rows = [
        ("2025-03-09T23:59:59.999999Z", false),
        ("2025-03-10T00:00:00Z", true),
        ("2025-03-11T12:00:00Z", true),
        ("2025-03-12T23:59:59.999999Z", true),
        ("2025-03-13T00:00:00Z", false),
    ];
    let mut inside = Vec::new();
    for (i, (at, included)) in rows.iter().enumerate() {
        let name = format!("tool{i}.exe");
        let id = insert(
            s,
            rec("V", &name, "1", Platform::Linux, Arch::Amd64, i as u64),
            t(at),
        )
        .await;
        if *included {
            inside.push(id);
        }
    }
    let q = export_query("2025-03-10", "2025-03-12");
    assert_eq!(s.export_count(&q, u64::MAX).await.unwrap(), 3);
    // Counting stops at the bound asked for.
    assert_eq!(s.export_count(&q, 2).await.unwrap(), 2);
    let got = export_all(s, &q, 100).await;
    assert_eq!(
        ids(&got),
        inside.iter().map(String::as_str).collect::<Vec<_>>()
    );

    // A single day covers the whole of it.
    let q = export_query("2025-03-12", "2025-03-12");
    assert_eq!(s.export_count(&q, u64::MAX).await.unwrap(), 1);
    let q = export_query("2025-03-13", "2025-03-13");
    assert_eq!(s.export_count(&q, u64::MAX).await.unwrap(), 1);
    assert_eq!(export_all(s, &q, 10).await.len(), 1);
    let q = export_query("2025-03-14", "2025-03-20");
    assert_eq!(s.export_count(&q, u64::MAX).await.unwrap(), 0);
    assert!(export_all(s, &q, 10).await.is_empty());
}

async fn export_keyset_paging_returns_every_row_once(db: Db) {
    let s = &*db.store;
    // Whole and fractional seconds mixed (SQLite stores them as text), and ties in
    // valid_from that only the id can order.
    let times = [
        "2025-03-11T08:00:00.5Z",
        "2025-03-11T08:00:00Z",
        "2025-03-11T07:59:59.999999Z",
        "2025-03-11T08:00:00.000001Z",
        "2025-03-11T08:00:00.1Z",
        "2025-03-10T00:00:00Z",
        "2025-03-11T09:00:00Z",
        "2025-03-11T09:00:00Z",
        "2025-03-11T09:00:00Z",
        "2025-03-12T23:00:00.123456Z",
    ];
    let mut expected: Vec<(DateTime<Utc>, String)> = Vec::new();
    for (i, at) in times.iter().enumerate() {
        let name = format!("tool{i}.exe");
        let id = insert(
            s,
            rec("V", &name, "1", Platform::Linux, Arch::Amd64, i as u64),
            t(at),
        )
        .await;
        expected.push((t(at), id));
    }
    // Superseding is history too: both versions are exported.
    let id = insert(
        s,
        rec("V", "tool0.exe", "2", Platform::Linux, Arch::Amd64, 50),
        t("2025-03-11T10:00:00Z"),
    )
    .await;
    expected.push((t("2025-03-11T10:00:00Z"), id));
    expected.sort();
    let expected: Vec<&str> = expected.iter().map(|(_, id)| id.as_str()).collect();

    let q = export_query("2025-03-10", "2025-03-12");
    assert_eq!(
        s.export_count(&q, u64::MAX).await.unwrap(),
        expected.len() as u64
    );
    for limit in [1, 2, 3, 4, 100] {
        let got = export_all(s, &q, limit).await;
        assert_eq!(ids(&got), expected, "page size {limit}");
    }
    let got = export_all(s, &q, 100).await;
    assert!(
        got.windows(2)
            .all(|w| (w[0].valid_from, &w[0].id) < (w[1].valid_from, &w[1].id))
    );
    assert_eq!(
        got.iter()
            .filter(|r| r.status == RecordStatus::Superseded)
            .count(),
        1
    );
}

async fn export_filters(db: Db) {
    let s = &*db.store;
    let now = t("2025-03-10T12:00:00Z");
    insert(s, putty("0.80", Arch::Amd64, 1), now).await;
    insert(
        s,
        putty("0.81", Arch::Amd64, 2),
        now + chrono::Duration::hours(1),
    )
    .await;
    insert(s, putty("0.81", Arch::X86, 3), now).await;
    insert(s, go("1.23.4", 4), now).await;
    insert(s, go("1.23.5", 5), now + chrono::Duration::hours(1)).await;

    let mut q = export_query("2025-03-10", "2025-03-10");
    assert_eq!(s.export_count(&q, u64::MAX).await.unwrap(), 5);
    q.executable = Some("PUTTY.EXE".into());
    assert_eq!(s.export_count(&q, u64::MAX).await.unwrap(), 3);
    q.arch = Some(Arch::Amd64);
    assert_eq!(s.export_count(&q, u64::MAX).await.unwrap(), 2);
    let got = export_all(s, &q, 1).await;
    assert_eq!(versions(&got), vec!["0.80", "0.81"]);
    q.executable = Some("go1.23.4.windows-amd64.msi".into());
    q.arch = None;
    q.platform = Some(Platform::Windows);
    assert_eq!(s.export_count(&q, u64::MAX).await.unwrap(), 2);
    assert_eq!(
        versions(&export_all(s, &q, 10).await),
        vec!["1.23.4", "1.23.5"]
    );
    q.platform = Some(Platform::Darwin);
    assert_eq!(s.export_count(&q, u64::MAX).await.unwrap(), 0);
    assert!(export_all(s, &q, 10).await.is_empty());
}

// ---------------------------------------------------------------------------------------
// stats()
// ---------------------------------------------------------------------------------------

async fn stats_count_current_records(db: Db) {
    let s = &*db.store;
    let empty = s.stats().await.unwrap();
    assert_eq!(
        (
            empty.known_good_hashes,
            empty.total_vendors,
            empty.total_platforms,
            empty.total_records
        ),
        (0, 0, 0, 0)
    );
    let now = t("2025-01-01T00:00:00Z");
    insert(s, go("1.23.4", 1), now).await; // superseded below: not counted
    insert(s, go("1.23.5", 2), now + chrono::Duration::days(1)).await;
    insert(s, putty("0.81", Arch::X86, 3), now).await;
    insert(
        s,
        rec("Tool", "tool", "1.0", Platform::Linux, Arch::Arm64, 4),
        now,
    )
    .await;
    // The same file from another vendor: one more record, no new hash.
    insert(
        s,
        rec("Mirror", "tool", "1.0", Platform::Darwin, Arch::Arm64, 4),
        now,
    )
    .await;

    let st = s.stats().await.unwrap();
    assert_eq!(
        st.known_good_hashes, 3,
        "distinct sha256 of current records"
    );
    assert_eq!(st.total_records, 4);
    assert_eq!(st.total_vendors, 4);
    assert_eq!(st.total_platforms, 3);
}

async fn stats_count_verified_hashes_and_real_platforms(db: Db) {
    let s = &*db.store;
    let now = t("2025-01-01T00:00:00Z");
    insert(s, go("1.23.4", 1), now).await;
    let tampered = insert(
        s,
        rec("Tool", "tool", "1.0", Platform::Linux, Arch::Arm64, 2),
        now,
    )
    .await;
    for (name, vendor, seed) in [("lodash (npm)", "npm", 3), ("requests (pypi)", "pypi", 4)] {
        insert(
            s,
            rec(
                vendor,
                name,
                "1.0.0",
                Platform::Universal,
                Arch::Universal,
                seed,
            ),
            now,
        )
        .await;
    }
    let st = s.stats().await.unwrap();
    assert_eq!(st.known_good_hashes, 4);
    assert_eq!(
        st.total_platforms, 2,
        "windows and linux; universal is no platform"
    );

    let forged = hex_of(666, 64);
    let n = db
        .exec(
            &format!(
                "UPDATE hash_records SET hash_sha256 = {} WHERE id = {}",
                db.backend.bytes_literal(&forged),
                db.backend.unhex("$1")
            ),
            &[&tampered],
        )
        .await;
    assert_eq!(n, 1);
    let st = s.stats().await.unwrap();
    assert_eq!(
        st.known_good_hashes, 3,
        "a record failing its HMAC check is no known-good hash"
    );
    assert_eq!(st.total_platforms, 1, "only the tampered record was linux");
    assert_eq!(st.total_records, 4);
}

// ---------------------------------------------------------------------------------------
// HMAC integrity
// ---------------------------------------------------------------------------------------

async fn tampered_row_fails_integrity_once(db: Db) {
    let s = &*db.store;
    let now = t("2025-01-01T00:00:00Z");
    let victim = insert(s, go("1.23.4", 1), now).await;
    let bystander = insert(s, putty("0.81", Arch::Amd64, 2), now).await;
    assert_eq!(s.integrity_failures(), 0);

    let forged = hex_of(666, 64);
    let n = db
        .exec(
            &format!(
                "UPDATE hash_records SET hash_sha256 = {} WHERE id = {}",
                db.backend.bytes_literal(&forged),
                db.backend.unhex("$1")
            ),
            &[&victim],
        )
        .await;
    assert_eq!(n, 1);

    let found = s.find_by_hashes(&[hv(&forged)], false).await.unwrap();
    assert_eq!(ids(&found), vec![victim.as_str()]);
    assert!(
        !found[0].integrity_ok,
        "tampered record must fail verification"
    );
    assert_eq!(s.integrity_failures(), 1);
    // Read again, by other routes: still one failing record.
    let found = s.find_by_hashes(&[hv(&forged)], true).await.unwrap();
    assert!(!found[0].integrity_ok);
    let current = s.current_records(None).await.unwrap();
    for r in &current {
        assert_eq!(r.integrity_ok, r.id != victim, "{}", r.id);
    }
    assert!(current.iter().any(|r| r.id == bystander));
    assert_eq!(s.integrity_failures(), 1);

    // Re-recording the genuine file is not "unchanged": it replaces the tampered row.
    let outcome = s
        .record(go("1.23.4", 1), now + chrono::Duration::hours(1))
        .await
        .unwrap();
    let RecordOutcome::Inserted { id, superseded, .. } = outcome else {
        panic!("a tampered current record must not count as unchanged: {outcome:?}")
    };
    assert_eq!(superseded.as_deref(), Some(victim.as_str()));
    let genuine = s
        .find_by_hashes(&[hv(&hex_of(1, 64))], false)
        .await
        .unwrap();
    assert_eq!(ids(&genuine), vec![id.as_str()]);
    assert!(genuine[0].integrity_ok);
    assert_eq!(s.integrity_failures(), 1);

    // A forged HMAC column fails too.
    db.exec(
        &format!(
            "UPDATE hash_records SET hmac = {} WHERE id = {}",
            db.backend.bytes_literal(&hex_of(7, 64)),
            db.backend.unhex("$1")
        ),
        &[&bystander],
    )
    .await;
    let b = s
        .find_by_hashes(&[hv(&hex_of(2, 64))], false)
        .await
        .unwrap();
    assert!(!b[0].integrity_ok);
    assert_eq!(s.integrity_failures(), 2);
}

async fn different_secret_fails_every_record(db: Db) {
    let s = &*db.store;
    let now = t("2025-01-01T00:00:00Z");
    insert(s, go("1.23.4", 1), now).await;
    insert(s, go("1.23.5", 2), now + chrono::Duration::days(1)).await;
    insert(s, putty("0.81", Arch::Amd64, 3), now).await;

    let other = db.open(b"some-other-secret").await;
    let current = other.current_records(None).await.unwrap();
    assert_eq!(current.len(), 2);
    assert!(current.iter().all(|r| !r.integrity_ok));
    let old = other
        .find_by_hashes(&[hv(&hex_of(1, 64))], true)
        .await
        .unwrap();
    assert!(!old[0].integrity_ok);
    assert_eq!(other.integrity_failures(), 3);
    // Reading again does not count again.
    other.current_records(None).await.unwrap();
    assert_eq!(other.integrity_failures(), 3);
    other.close().await;

    // The right secret still verifies every record.
    assert!(
        s.current_records(None)
            .await
            .unwrap()
            .iter()
            .all(|r| r.integrity_ok)
    );
    assert_eq!(s.integrity_failures(), 0);
}

// ---------------------------------------------------------------------------------------
// Accounts
// ---------------------------------------------------------------------------------------

fn key(team: &str, n: u64, role: Role) -> NewApiKey {
    NewApiKey {
        key_id: format!("kid_{team}_{n}"),
        team_id: team.into(),
        key_hash: hex_of(1000 + n, 64),
        role,
        label: format!("key {n}"),
    }
}

async fn accounts_create_and_look_up_keys(db: Db) {
    let s = &*db.store;
    let now = t("2025-01-01T00:00:00.987654321Z");
    s.create_tenant_with_key(
        "ops",
        TenantKind::Platform,
        Tier::Enterprise,
        key("ops", 1, Role::PlatformOwner),
        now,
    )
    .await
    .unwrap();
    s.create_tenant_with_key(
        "acme",
        TenantKind::Customer,
        Tier::Basic,
        key("acme", 2, Role::AccountAdmin),
        now,
    )
    .await
    .unwrap();

    let p = s
        .key_by_hash(&hex_of(1001, 64))
        .await
        .unwrap()
        .expect("platform key");
    assert_eq!(p.key_id, "kid_ops_1");
    assert_eq!(p.team_id, "ops");
    assert_eq!(p.role, Role::PlatformOwner);
    assert_eq!(p.tier, Tier::Enterprise);
    assert_eq!(p.tenant_kind, TenantKind::Platform);
    assert!(!p.revoked && !p.suspended);

    let c = s
        .key_by_hash(&hex_of(1002, 64))
        .await
        .unwrap()
        .expect("customer key");
    assert_eq!(
        (c.team_id.as_str(), c.role, c.tier),
        ("acme", Role::AccountAdmin, Tier::Basic)
    );
    assert_eq!(c.tenant_kind, TenantKind::Customer);
    assert_eq!(c.key_hash, hex_of(1002, 64));

    let tenant = s.tenant("acme").await.unwrap().expect("tenant");
    assert_eq!(tenant.kind, TenantKind::Customer);
    assert_eq!(tenant.tier, Tier::Basic);
    assert!(!tenant.suspended);
    assert_eq!(tenant.created_at, t("2025-01-01T00:00:00.987654Z"));

    assert_eq!(s.key_by_hash(&hex_of(4242, 64)).await.unwrap(), None);
    assert_eq!(s.key_by_hash("").await.unwrap(), None);
    assert_eq!(s.tenant("nobody").await.unwrap(), None);
}

/// Two replicas flush usage counts for the same rows at once, in different orders (each
/// from its own hash map): both flushes succeed and every count lands. (On PostgreSQL,
/// rows written in the order given deadlocked and one flush failed.)
async fn concurrent_usage_flushes_in_any_order_all_count(db: Db) {
    use store::admin::UsageDelta;
    let s = &*db.store;
    let d = day("2025-01-01");
    let rows: Vec<UsageDelta> = (0..40)
        .map(|i| UsageDelta {
            team_id: "acme".into(),
            day: d,
            endpoint: format!("GET /api/v1/e{i:02}"),
            count: 1,
        })
        .collect();
    let reversed: Vec<UsageDelta> = rows.iter().rev().cloned().collect();
    for _ in 0..20 {
        let (a, b) = tokio::join!(s.add_usage(&rows), s.add_usage(&reversed));
        a.unwrap();
        b.unwrap();
    }
    let counts = s.usage_by_endpoint("acme", d, d).await.unwrap();
    assert_eq!(counts.len(), 40);
    assert!(counts.iter().all(|(_, n)| *n == 40), "{counts:?}");
}

async fn accounts_conflicts(db: Db) {
    let s = &*db.store;
    let now = t("2025-01-01T00:00:00Z");
    s.create_tenant_with_key(
        "ops",
        TenantKind::Platform,
        Tier::Enterprise,
        key("ops", 1, Role::PlatformOwner),
        now,
    )
    .await
    .unwrap();
    s.create_tenant_with_key(
        "acme",
        TenantKind::Customer,
        Tier::Teams,
        key("acme", 2, Role::AccountAdmin),
        now,
    )
    .await
    .unwrap();

    // A second platform tenant, under a new name.
    let err = s
        .create_tenant_with_key(
            "ops2",
            TenantKind::Platform,
            Tier::Enterprise,
            key("ops2", 3, Role::PlatformOwner),
            now,
        )
        .await
        .expect_err("second platform tenant");
    assert!(matches!(err, model::Error::Conflict(_)), "{err:?}");
    // A duplicate team, of either kind.
    for kind in [TenantKind::Customer, TenantKind::Platform] {
        let err = s
            .create_tenant_with_key("acme", kind, Tier::Free, key("acme", 4, Role::Analyst), now)
            .await
            .expect_err("duplicate team");
        assert!(matches!(err, model::Error::Conflict(_)), "{err:?}");
    }
    // Nothing of the refused attempts was kept.
    assert_eq!(s.tenant("ops2").await.unwrap(), None);
    assert_eq!(s.key_by_hash(&hex_of(1003, 64)).await.unwrap(), None);
    assert_eq!(s.key_by_hash(&hex_of(1004, 64)).await.unwrap(), None);
    assert_eq!(s.tenant("acme").await.unwrap().unwrap().tier, Tier::Teams);
    // More customers are fine.
    s.create_tenant_with_key(
        "globex",
        TenantKind::Customer,
        Tier::Free,
        key("globex", 5, Role::Analyst),
        now,
    )
    .await
    .unwrap();
    assert!(s.key_by_hash(&hex_of(1005, 64)).await.unwrap().is_some());
}

async fn concurrent_platform_tenants_admit_one(db: Db) {
    let now = t("2025-01-01T00:00:00Z");
    let attempts = (0..4u64).map(|i| {
        let s = db.store.clone();
        async move {
            let team = format!("ops{i}");
            let k = key(&team, 10 + i, Role::PlatformOwner);
            s.create_tenant_with_key(&team, TenantKind::Platform, Tier::Enterprise, k, now)
                .await
        }
    });
    let results = futures::future::join_all(attempts).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 1, "exactly one platform tenant: {results:?}");
    for r in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(matches!(r, model::Error::Conflict(_)), "{r:?}");
    }
    let mut platform = 0;
    for i in 0..4u64 {
        if let Some(p) = db.store.key_by_hash(&hex_of(1010 + i, 64)).await.unwrap() {
            assert_eq!(p.tenant_kind, TenantKind::Platform);
            platform += 1;
        }
    }
    assert_eq!(platform, 1);
}

// ---------------------------------------------------------------------------------------
// Vendor health
// ---------------------------------------------------------------------------------------

async fn vendor_health_runs_and_counts(db: Db) {
    let s = &*db.store;
    assert!(s.vendor_health().await.unwrap().is_empty());
    let t1 = t("2025-01-01T02:00:00.000001Z");
    let t2 = t("2025-01-02T02:00:00Z");
    insert(s, go("1.23.4", 1), t1).await;
    insert(s, go("1.23.5", 2), t2).await;
    insert(
        s,
        rec(
            "Go",
            "go1.23.5.linux-amd64.tar.gz",
            "1.23.5",
            Platform::Linux,
            Arch::Amd64,
            3,
        ),
        t2,
    )
    .await;
    insert(s, putty("0.81", Arch::Amd64, 4), t1).await;

    s.record_vendor_run("Go", None, t1).await.unwrap();
    s.record_vendor_run("Go", Some("HTTP 503 from go.dev"), t2)
        .await
        .unwrap();
    s.record_vendor_run("Zoom", None, t2).await.unwrap();

    let health = s.vendor_health().await.unwrap();
    let names: Vec<_> = health.iter().map(|h| h.vendor.as_str()).collect();
    assert_eq!(names, vec!["Go", "PuTTY", "Zoom"]);

    let go_h = &health[0];
    assert_eq!(go_h.records, 2, "current records only");
    assert_eq!(go_h.last_success_at, Some(t1));
    assert_eq!(go_h.last_error_at, Some(t2));
    assert_eq!(go_h.last_error.as_deref(), Some("HTTP 503 from go.dev"));

    let putty_h = &health[1];
    assert_eq!(putty_h.records, 1);
    assert_eq!(
        (putty_h.last_success_at, putty_h.last_error_at),
        (None, None)
    );

    let zoom = &health[2];
    assert_eq!(zoom.records, 0);
    assert_eq!(zoom.last_success_at, Some(t2));
    assert_eq!(zoom.last_error, None);

    // A later success moves last_success_at and keeps the last error on record.
    let t3 = t("2025-01-03T02:00:00Z");
    s.record_vendor_run("Go", None, t3).await.unwrap();
    let go_h = s.vendor_health().await.unwrap().remove(0);
    assert_eq!(go_h.last_success_at, Some(t3));
    assert_eq!(go_h.last_error_at, Some(t2));
    s.ping().await.unwrap();
}

// ---------------------------------------------------------------------------------------
// Durability and migrations
// ---------------------------------------------------------------------------------------

async fn data_survives_close_and_reopen(db: Db) {
    let now = t("2025-01-01T00:00:00Z");
    let (old, new) = {
        let s = &*db.store;
        let old = insert(s, go("1.23.4", 1), now).await;
        let new = insert(s, go("1.23.5", 2), now + chrono::Duration::days(1)).await;
        s.create_tenant_with_key(
            "acme",
            TenantKind::Customer,
            Tier::Basic,
            key("acme", 1, Role::Analyst),
            now,
        )
        .await
        .unwrap();
        s.record_vendor_run("Go", None, now).await.unwrap();
        s.close().await;
        (old, new)
    };
    assert!(
        db.store.ping().await.is_err(),
        "a closed store must not answer"
    );

    let s = db.open(SECRET).await;
    let h = s
        .history(&history_query("go1.23.4.windows-amd64.msi"))
        .await
        .unwrap();
    assert_eq!(ids(&h.items), vec![new.as_str(), old.as_str()]);
    assert!(h.items.iter().all(|r| r.integrity_ok));
    assert_eq!(
        h.items[1].valid_until,
        Some(now + chrono::Duration::days(1))
    );
    assert_eq!(s.integrity_failures(), 0);
    assert!(s.key_by_hash(&hex_of(1001, 64)).await.unwrap().is_some());
    assert_eq!(
        s.vendor_health().await.unwrap()[0].last_success_at,
        Some(now)
    );
    // And it keeps working after the reopen.
    assert_eq!(
        s.record(go("1.23.5", 2), now + chrono::Duration::days(2))
            .await
            .unwrap(),
        RecordOutcome::Unchanged { id: new.clone() }
    );
    s.close().await;
}

async fn migrations_are_idempotent(db: Db) {
    let before = db.scalar("SELECT COUNT(*) FROM schema_migrations").await;
    assert!(before >= 1);
    insert(&*db.store, go("1.23.4", 1), t("2025-01-01T00:00:00Z")).await;
    // A second store while the first is open, then a third after both closed.
    let second = db.open(SECRET).await;
    assert_eq!(second.current_records(None).await.unwrap().len(), 1);
    second.close().await;
    db.store.close().await;
    let third = db.open(SECRET).await;
    assert_eq!(third.current_records(None).await.unwrap().len(), 1);
    third.close().await;
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM schema_migrations").await,
        before
    );
}

async fn concurrent_first_open_migrates_once(db: Db) {
    // Several processes (replicas, or server and CLI) starting on one empty database. The
    // race is narrow (on SQLite, the switch of a new file to WAL mode): ten rounds on fresh
    // databases failed four runs in five before the store waited out that switch.
    for _ in 0..10 {
        let url = db.scratch.new_url().await;
        let opens = (0..6).map(|_| store::open(&url, RecordSigner::new(SECRET)));
        let stores = futures::future::join_all(opens).await;
        let mut opened = Vec::new();
        for s in stores {
            opened.push(s.expect("concurrent open of a fresh database"));
        }
        insert(&*opened[0], go("1.23.4", 1), t("2025-01-01T00:00:00Z")).await;
        for s in &opened {
            assert_eq!(s.current_records(None).await.unwrap().len(), 1);
            s.close().await;
        }
    }
}

async fn an_archives_members_share_one_stored_source(db: Db) {
    // The members of a package name its URL once, whatever the call that records them; each
    // record reads back the URL it was given, and its HMAC (over that URL) verifies.
    let s = db.store.as_ref();
    let archive = "https://deb.example/debian/pool/main/c/coreutils/coreutils_9.1-1_amd64.deb";
    let member = |path: &str, seed| {
        let mut r = rec("Debian", path, "9.1-1", Platform::Linux, Arch::Amd64, seed);
        r.source_url = format!("{archive}#{path}");
        r
    };
    let first = vec![member("usr/bin/ls", 1), member("usr/bin/cp", 2)];
    s.record_many(first, t("2025-01-01T00:00:00Z"))
        .await
        .expect("record_many");
    // Another call, a name outside ASCII, a path the URL spells encoded, and a download of
    // the same site beside them.
    let mut encoded = member("usr/share/doc/read me", 5);
    encoded.source_url = format!("{archive}#usr/share/doc/read%20me");
    let later = vec![member("usr/share/locale/ü/dd", 3), go("1.23.4", 4), encoded];
    s.record_many(later, t("2025-01-02T00:00:00Z"))
        .await
        .expect("record_many");
    assert_eq!(db.scalar("SELECT COUNT(*) FROM record_sources").await, 2);

    let stored = s.current_records(None).await.unwrap();
    assert_eq!(stored.len(), 5);
    for r in &stored {
        let name = r.record.executable_name.as_str();
        let expected = if name.starts_with("go") {
            format!("https://downloads.example/Go/{name}")
        } else {
            format!("{archive}#{}", name.replace(' ', "%20"))
        };
        assert_eq!(r.record.source_url, expected);
        assert!(r.integrity_ok, "{name}");
    }
    // A URL that ends in the record's name keeps the name once; the encoded one keeps its
    // rest.
    assert_eq!(
        db.scalar(
            "SELECT COUNT(*) FROM hash_records WHERE source_rest_is_name AND source_url = ''"
        )
        .await,
        4
    );
    assert_eq!(
        db.scalar(
            "SELECT COUNT(*) FROM hash_records \
             WHERE source_url = 'usr/share/doc/read%20me' AND NOT source_rest_is_name"
        )
        .await,
        1
    );

    // A source is never rewritten: one change would move the URL of every member.
    for change in [
        "UPDATE record_sources SET url = 'https://evil.example/x.deb#'",
        "DELETE FROM record_sources",
    ] {
        let refused = testkit::db::exec(db.backend, &db.url, change, &[]).await;
        assert!(refused.is_err(), "{change} was allowed");
    }
    let again = s.current_records(None).await.unwrap();
    assert_eq!(again, stored);

    // Telling a member's row that its URL no longer ends in its name changes the URL it
    // reads back, which its HMAC no longer covers.
    testkit::db::exec(
        db.backend,
        &db.url,
        "UPDATE hash_records SET source_rest_is_name = FALSE \
         WHERE executable_name = 'usr/bin/ls'",
        &[],
    )
    .await
    .expect("update");
    let ls = s.current_records(Some("usr/bin/ls")).await.unwrap();
    assert_eq!(ls.len(), 1);
    assert_eq!(ls[0].record.source_url, format!("{archive}#"));
    assert!(!ls[0].integrity_ok);
}

async fn derived_names_are_stored_only_where_they_differ(db: Db) {
    // A record's name key (its name folded) and family (its name key without the version)
    // are stored as '' where they equal what they come from. Every query by name must still
    // find the record by any spelling, and a newer version must still supersede its family.
    let s = db.store.as_ref();
    let ls = rec(
        "Debian",
        "coreutils/usr/bin/ls",
        "9.1-1",
        Platform::Linux,
        Arch::Amd64,
        1,
    );
    let procmon = |version: &str, seed| {
        rec(
            "Sysinternals",
            "Procmon64.exe",
            version,
            Platform::Windows,
            Arch::Amd64,
            seed,
        )
    };
    s.record_many(
        vec![ls, procmon("4.01", 2), go("1.23.4", 3)],
        t("2025-01-01T00:00:00Z"),
    )
    .await
    .expect("record_many");
    let mut stored = testkit::db::text_rows(
        db.backend,
        &db.url,
        "SELECT executable_name, name_key, family FROM hash_records",
        &[],
    )
    .await;
    stored.sort();
    assert_eq!(
        stored,
        [
            ["Procmon64.exe", "procmon64.exe", ""],
            ["coreutils/usr/bin/ls", "", ""],
            [
                "go1.23.4.windows-amd64.msi",
                "",
                "go{version}.windows-amd64.msi"
            ],
        ]
    );

    // Newer versions supersede: the family is found whether stored or derived.
    for (newer, seed) in [(procmon("4.02", 4), 4), (go("1.23.5", 5), 5)] {
        let outcome = s
            .record(newer, t("2025-01-02T00:00:00Z"))
            .await
            .expect("record");
        assert!(
            matches!(
                outcome,
                RecordOutcome::Inserted {
                    superseded: Some(_),
                    ..
                }
            ),
            "version {seed}: {outcome:?}"
        );
    }
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM hash_records WHERE status = 'current'")
            .await,
        3
    );
    let go_family = s
        .current_in_families(&[(
            "Go".to_string(),
            "go{version}.windows-amd64.msi".to_string(),
        )])
        .await
        .expect("families");
    assert_eq!(versions_of(&go_family), ["1.23.5"]);

    // Every spelling of a name finds its history and its suggestions.
    for (name, expected) in [
        ("PROCMON64.EXE", vec!["4.02", "4.01"]),
        ("CoreUtils/usr/bin/LS", vec!["9.1-1"]),
        ("go1.23.4.windows-amd64.msi", vec!["1.23.5", "1.23.4"]),
    ] {
        let history = s
            .history(&HistoryQuery {
                executable: name.into(),
                limit: 10,
                ..HistoryQuery::default()
            })
            .await
            .expect("history");
        assert_eq!(versions_of(&history.items), expected, "{name}");
    }
    for (prefix, expected) in [
        ("PROCM", vec!["Procmon64.exe"]),
        ("coreutils/usr/b", vec!["coreutils/usr/bin/ls"]),
    ] {
        let names = s.executable_names_with_prefix(prefix, 10).await.unwrap();
        assert_eq!(names, expected, "{prefix}");
    }
}

fn versions_of(records: &[HashRecord]) -> Vec<&str> {
    records.iter().map(|r| r.record.version.as_str()).collect()
}

async fn digests_sharing_their_first_bytes_are_told_apart(db: Db) {
    // The digest indexes key on a digest's first 8 bytes; a lookup, and the count of known
    // hashes, must still tell apart two files whose digests only begin alike.
    let s = db.store.as_ref();
    let shared = |digest: String| format!("{}{}", &hex_of(99, 16), &digest[16..]);
    let alike = |mut r: NewRecord| {
        r.hash_sha256 = shared(r.hash_sha256);
        r.hash_sha1 = r.hash_sha1.map(shared);
        r.hash_md5 = r.hash_md5.map(shared);
        r
    };
    let (putty_80, go_123) = (alike(putty("0.80", Arch::Amd64, 1)), alike(go("1.23.4", 2)));
    s.record_many(
        vec![putty_80.clone(), go_123.clone()],
        t("2025-01-01T00:00:00Z"),
    )
    .await
    .expect("record_many");
    assert_eq!(s.stats().await.unwrap().known_good_hashes, 2);

    for (asked, expected) in [
        (putty_80.hash_sha256.clone(), "putty.exe"),
        (
            go_123.hash_sha1.clone().unwrap(),
            "go1.23.4.windows-amd64.msi",
        ),
        (putty_80.hash_md5.clone().unwrap(), "putty.exe"),
    ] {
        let found = s.find_by_hashes(&[hv(&asked)], true).await.unwrap();
        let names: Vec<&str> = found
            .iter()
            .map(|r| r.record.executable_name.as_str())
            .collect();
        assert_eq!(names, vec![expected], "{asked}");
    }
    // Same first bytes, stored by neither.
    let stranger = shared(hex_of(3, 64));
    assert!(
        s.find_by_hashes(&[hv(&stranger)], true)
            .await
            .unwrap()
            .is_empty()
    );

    // PuTTY 0.81 supersedes 0.80: its SHA-256 is no longer current anywhere, though Go's
    // begins alike.
    s.record_many(
        vec![putty("0.81", Arch::Amd64, 4)],
        t("2025-02-01T00:00:00Z"),
    )
    .await
    .expect("record_many");
    assert_eq!(s.stats().await.unwrap().known_good_hashes, 2);
    let found = s
        .find_by_hashes(&[hv(&putty_80.hash_sha256)], false)
        .await
        .unwrap();
    assert!(found.is_empty(), "{found:?}");
}

// ---------------------------------------------------------------------------------------
// Job leases
// ---------------------------------------------------------------------------------------

async fn job_lease_admits_one_holder_until_expiry(db: Db) {
    let s = db.store.as_ref();
    let now = t("2026-01-01T02:00:00Z");
    let until = t("2026-01-01T02:10:00Z");
    assert!(
        s.try_lease("refresh", "replica-a", until, now)
            .await
            .unwrap()
    );
    // Another replica is refused while the lease runs; the holder may renew.
    assert!(
        !s.try_lease("refresh", "replica-b", until, now)
            .await
            .unwrap()
    );
    assert!(
        s.try_lease("refresh", "replica-a", t("2026-01-01T02:20:00Z"), now)
            .await
            .unwrap()
    );
    // Other jobs are independent.
    assert!(
        s.try_lease("translog", "replica-b", until, now)
            .await
            .unwrap()
    );
    // After expiry another replica takes over.
    let later = t("2026-01-01T02:21:00Z");
    assert!(
        s.try_lease("refresh", "replica-b", t("2026-01-01T02:31:00Z"), later)
            .await
            .unwrap()
    );
    assert!(
        !s.try_lease("refresh", "replica-a", t("2026-01-01T02:31:00Z"), later)
            .await
            .unwrap()
    );
}

async fn a_released_lease_is_free_at_once(db: Db) {
    let s = db.store.as_ref();
    let now = t("2026-01-01T02:00:00Z");
    let until = t("2026-01-01T02:30:00Z");
    assert!(
        s.try_lease("corpus", "replica-a", until, now)
            .await
            .unwrap()
    );
    // Releasing someone else's lease changes nothing.
    s.release_lease("corpus", "replica-b", now).await.unwrap();
    assert!(
        !s.try_lease("corpus", "replica-b", until, now)
            .await
            .unwrap()
    );
    s.release_lease("corpus", "replica-a", now).await.unwrap();
    assert!(
        s.try_lease("corpus", "replica-b", until, now)
            .await
            .unwrap()
    );
}

async fn a_lease_notes_when_its_run_ended(db: Db) {
    let s = db.store.as_ref();
    let now = t("2026-01-01T02:00:00Z");
    let until = t("2026-01-02T00:00:00Z");
    // A run holds its lease a minute at a time (renewed while it runs)...
    let beat = t("2026-01-01T02:01:00Z");
    assert_eq!(s.lease("refresh:2026-01-01").await.unwrap(), None);
    assert!(
        s.try_lease("refresh:2026-01-01", "replica-a", beat, now)
            .await
            .unwrap()
    );
    let running = store::JobLease {
        job: "refresh:2026-01-01".into(),
        holder: "replica-a".into(),
        expires_at: beat,
        finished_at: None,
    };
    assert_eq!(
        s.lease("refresh:2026-01-01").await.unwrap(),
        Some(running.clone())
    );
    // Only the holder ends its run.
    let end = t("2026-01-01T02:00:40Z");
    s.finish_lease("refresh:2026-01-01", "replica-b", end, until)
        .await
        .unwrap();
    assert_eq!(
        s.lease("refresh:2026-01-01").await.unwrap(),
        Some(running.clone())
    );
    // ...and, once the run ends, keeps it until the end of its slot.
    s.finish_lease("refresh:2026-01-01", "replica-a", end, until)
        .await
        .unwrap();
    let finished = store::JobLease {
        expires_at: until,
        finished_at: Some(end),
        ..running.clone()
    };
    assert_eq!(s.lease("refresh:2026-01-01").await.unwrap(), Some(finished));
    // Still held after the run's minute: nobody else runs the job in its slot.
    let later = t("2026-01-01T03:00:00Z");
    assert!(
        !s.try_lease("refresh:2026-01-01", "replica-b", until, later)
            .await
            .unwrap()
    );
    // Renewing starts a new run.
    assert!(
        s.try_lease("refresh:2026-01-01", "replica-a", until, later)
            .await
            .unwrap()
    );
    let renewed = store::JobLease {
        expires_at: until,
        ..running
    };
    assert_eq!(s.lease("refresh:2026-01-01").await.unwrap(), Some(renewed));
}

// ---------------------------------------------------------------------------------------
// Ingestion bookkeeping
// ---------------------------------------------------------------------------------------

async fn download_audit_filters_and_pages(db: Db) {
    use store::downloads::{DownloadAudit, DownloadQuery};
    let s = db.store.as_ref();
    for (i, (vendor, at)) in [
        ("Go", "2026-01-01T10:00:00Z"),
        ("npm", "2026-01-02T10:00:00Z"),
        ("Go", "2026-01-03T10:00:00Z"),
    ]
    .into_iter()
    .enumerate()
    {
        s.record_download(&DownloadAudit {
            vendor: vendor.into(),
            downloaded_at: t(at),
            url: format!("https://example.test/{i}"),
            size_bytes: 1000 + i as u64,
            hash_record_id: format!("rec{i}"),
        })
        .await
        .unwrap();
    }
    let all = s
        .downloads(&DownloadQuery {
            limit: 50,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.total, 3);
    assert_eq!(all.items[0].hash_record_id, "rec2", "newest first");
    let go = s
        .downloads(&DownloadQuery {
            vendor: Some("go".into()),
            limit: 50,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(go.total, 2);
    let window = s
        .downloads(&DownloadQuery {
            from: Some(t("2026-01-02T00:00:00Z")),
            until: Some(t("2026-01-02T23:59:59Z")),
            limit: 50,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(window.total, 1);
    assert_eq!(window.items[0].size_bytes, 1001);
    let page = s
        .downloads(&DownloadQuery {
            limit: 1,
            offset: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((page.total, page.items.len()), (3, 1));
    assert_eq!(page.items[0].hash_record_id, "rec1");
}

async fn signing_certificates_keep_their_crl_urls(db: Db) {
    use store::downloads::SigningCert;
    let s = db.store.as_ref();
    let cert = SigningCert {
        thumbprint: "AB".repeat(20),
        signer: "CN=Example Signer,O=Example\\, Inc.".into(),
        issuer: "CN=Example CA".into(),
        serial: "8A01".into(),
        crl_urls: vec!["http://crl.example.test/ca.crl".into()],
        issuer_cert: Some(vec![0x30, 0x03, 0x02, 0x01, 0x01]),
    };
    s.signing_cert_seen(&cert, t("2026-01-01T00:00:00Z"))
        .await
        .unwrap();
    // Seen again with another distribution point: one row, the new URLs.
    let again = SigningCert {
        crl_urls: vec![
            "http://crl.example.test/ca.crl".into(),
            "http://crl2.example.test/ca.crl".into(),
        ],
        ..cert.clone()
    };
    s.signing_cert_seen(&again, t("2026-01-02T00:00:00Z"))
        .await
        .unwrap();
    let certs = s.signing_certs().await.unwrap();
    assert_eq!(certs.len(), 1);
    assert_eq!(certs[0].thumbprint, "ab".repeat(20), "stored lowercase");
    assert_eq!(certs[0].serial, "8a01");
    assert_eq!(certs[0].crl_urls, again.crl_urls);
    assert_eq!(certs[0].signer, cert.signer);
}

// ---------------------------------------------------------------------------------------
// records epoch and full scans (the in-memory lookup index builds on these)
// ---------------------------------------------------------------------------------------

async fn records_epoch_moves_with_writes_and_reaches_other_stores(db: Db) {
    let a = &*db.store;
    let b = db.open(SECRET).await;
    let start = a.records_epoch();
    assert_eq!(
        b.records_epoch(),
        start,
        "a new store starts at the database's epoch"
    );

    insert(a, go("1.23.4", 1), t("2025-01-01T00:00:00Z")).await;
    let after_one = a.records_epoch();
    assert!(
        after_one > start,
        "a write moves the writer's epoch at once"
    );
    assert_eq!(
        b.records_epoch(),
        start,
        "the other store has not polled yet"
    );
    assert_eq!(b.poll_records_epoch().await.expect("poll"), after_one);
    assert_eq!(b.records_epoch(), after_one);

    // An unchanged re-record and an empty batch move nothing.
    a.record(go("1.23.4", 1), t("2025-01-02T00:00:00Z"))
        .await
        .expect("record");
    a.record_many(Vec::new(), t("2025-01-02T00:00:00Z"))
        .await
        .expect("record_many");
    assert_eq!(a.poll_records_epoch().await.expect("poll"), after_one);

    // A batch written through the other store moves both, once polled.
    b.record_many(
        vec![go("1.23.5", 2), putty("0.81", Arch::Amd64, 3)],
        t("2025-01-03T00:00:00Z"),
    )
    .await
    .expect("record_many");
    assert!(b.records_epoch() > after_one);
    assert_eq!(a.records_epoch(), after_one);
    assert_eq!(
        a.poll_records_epoch().await.expect("poll"),
        b.records_epoch()
    );

    // A fresh store on the same database starts where the database is.
    let c = db.open(SECRET).await;
    assert_eq!(c.records_epoch(), b.records_epoch());
}

/// Every record changed after `epoch`, read in pages of two.
async fn changed_after(s: &dyn Store, epoch: u64) -> Vec<HashRecord> {
    let mut seen = Vec::new();
    let (mut epoch, mut after) = (epoch, None::<String>);
    loop {
        let page = s
            .records_changed_after(epoch, after.as_deref(), 2)
            .await
            .expect("records_changed_after");
        let Some((last_epoch, last)) = page.last() else {
            break;
        };
        (epoch, after) = (*last_epoch, Some(last.id.clone()));
        seen.extend(page.into_iter().map(|(_, r)| r));
    }
    seen.sort_by(|a, b| a.id.cmp(&b.id));
    seen
}

async fn records_changed_after_an_epoch_are_the_rows_written_since(db: Db) {
    let s = &*db.store;
    let e0 = s.records_epoch();
    let v21 = insert(s, go("1.21.0", 10), t("2025-02-01T00:00:00Z")).await;
    let e1 = s.records_epoch();
    assert_eq!(ids(&changed_after(s, e0).await), [v21.as_str()]);
    assert!(changed_after(s, e1).await.is_empty());

    // A supersession changes the old current record too.
    let v22 = insert(s, go("1.22.0", 11), t("2025-02-02T00:00:00Z")).await;
    let e2 = s.records_epoch();
    let mut want = vec![v21.clone(), v22.clone()];
    want.sort();
    let changed = changed_after(s, e1).await;
    assert_eq!(ids(&changed), want);
    let old = changed.iter().find(|r| r.id == v21).expect("old record");
    assert_eq!(old.status, RecordStatus::Superseded);

    // An older version arriving later, fitted in before 1.21.0: the new row, and any row
    // whose interval moved.
    let v20 = insert(s, go("1.20.0", 12), t("2025-02-03T00:00:00Z")).await;
    let changed = changed_after(s, e2).await;
    assert!(ids(&changed).contains(&v20.as_str()));
    assert!(
        !ids(&changed).contains(&v22.as_str()),
        "the current record is untouched"
    );
    let e3 = s.records_epoch();

    // A batch: both rows it wrote, and nothing when it records nothing new.
    let outcomes = s
        .record_many(
            vec![go("1.22.0", 11), putty("0.81", Arch::Arm64, 20)],
            t("2025-02-04T00:00:00Z"),
        )
        .await
        .expect("record_many");
    let e4 = s.records_epoch();
    assert_eq!(changed_after(s, e3).await.len(), 1, "{outcomes:?}");
    assert_eq!(changed_after(s, e0).await.len(), 4);
    s.record_many(vec![go("1.22.0", 11)], t("2025-02-05T00:00:00Z"))
        .await
        .expect("record_many");
    assert_eq!(s.records_epoch(), e4);
    assert!(changed_after(s, e4).await.is_empty());

    // Another store on the same database sees the same rows, verified as read.
    let other = db.open(b"another-secret").await;
    let page = other
        .records_changed_after(e2, None, 10)
        .await
        .expect("records_changed_after");
    assert_eq!(page.len(), changed_after(s, e2).await.len());
    assert!(page.iter().all(|(e, r)| *e > e2 && !r.integrity_ok));
}

async fn records_after_pages_through_every_record(db: Db) {
    let s = &*db.store;
    let mut written = Vec::new();
    for (i, v) in ["1.21.0", "1.22.0", "1.23.0"].iter().enumerate() {
        written.push(insert(s, go(v, 10 + i as u64), t("2025-02-01T00:00:00Z")).await);
    }
    written.push(insert(s, putty("0.81", Arch::Arm64, 20), t("2025-02-02T00:00:00Z")).await);
    written.sort();

    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = s
            .records_after(after.as_deref(), 3)
            .await
            .expect("records_after");
        assert!(page.len() <= 3);
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        seen.extend(page);
    }
    assert_eq!(ids(&seen), written, "every record once, in id order");
    let superseded = seen
        .iter()
        .filter(|r| r.status == RecordStatus::Superseded)
        .count();
    assert_eq!(superseded, 2, "superseded records are included");
    assert!(seen.iter().all(|r| r.integrity_ok));

    // Rows are verified as they are read.
    let other = db.open(b"another-secret").await;
    let page = other.records_after(None, 10).await.expect("records_after");
    assert_eq!(page.len(), 4);
    assert!(page.iter().all(|r| !r.integrity_ok));
}

/// Current records in date-added order, oldest first after a position and newest first
/// before one: superseded records are left out, every current one is read once, and
/// records added between pages come after the oldest-first walk's position.
async fn current_records_page_by_date_added_both_ways(db: Db) {
    let s = &*db.store;
    let at = t("2025-02-01T00:00:00Z");
    insert(s, go("1.21.0", 10), at).await;
    s.record_many(
        vec![
            go("1.22.0", 11),
            putty("0.81", Arch::Amd64, 20),
            putty("0.81", Arch::Arm64, 21),
        ],
        at,
    )
    .await
    .expect("batch");
    let position = |r: &HashRecord| AddedPosition {
        added_at: r.added_at,
        id: r.id.clone(),
    };

    let mut oldest_first = Vec::new();
    let mut after: Option<AddedPosition> = None;
    loop {
        let page = s
            .current_records_added_after(after.as_ref(), 2)
            .await
            .expect("oldest first");
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = Some(position(last));
        oldest_first.extend(page);
        if oldest_first.len() == 2 {
            // A record added between pages is read after those already read.
            insert(s, putty("0.81", Arch::X86, 22), at).await;
        }
    }
    assert_eq!(
        oldest_first.len(),
        4,
        "three current records and the new one"
    );
    assert!(
        oldest_first
            .iter()
            .all(|r| r.status == RecordStatus::Current)
    );
    assert!(
        oldest_first
            .windows(2)
            .all(|w| w[0].added_at < w[1].added_at)
    );
    assert_eq!(oldest_first[3].record.arch, Arch::X86);
    assert_eq!(
        oldest_first[..3]
            .iter()
            .filter(|r| r.record.vendor == "PuTTY")
            .count(),
        2,
        "the batch's records, in whatever order it added them"
    );

    let mut newest_first = Vec::new();
    let mut before: Option<AddedPosition> = None;
    loop {
        let page = s
            .current_records_added_before(before.as_ref(), 3)
            .await
            .expect("newest first");
        let Some(last) = page.last() else { break };
        before = Some(position(last));
        newest_first.extend(page);
    }
    newest_first.reverse();
    assert_eq!(ids(&newest_first), ids(&oldest_first));

    // The current records of a release's family: every arch, none of another family.
    let family = oldest_first[3].family.clone();
    let release = s
        .current_in_families(&[("PuTTY".to_string(), family)])
        .await
        .expect("families");
    assert_eq!(release.len(), 3);
    assert!(release.iter().all(|r| r.record.vendor == "PuTTY"));
    assert!(
        s.current_in_families(&[])
            .await
            .expect("no families")
            .is_empty()
    );
}

/// `added_at`: distinct per record, increasing in commit order, at least the step apart,
/// even for one batch and when the clock stands still or runs back; superseding a record
/// leaves its `added_at` alone.
async fn each_record_is_added_after_the_previous_one(db: Db) {
    let s = &*db.store;
    let at = t("2025-03-01T12:00:00Z");
    let step = chrono::Duration::microseconds(model::record::ADDED_AT_STEP_MICROS);
    let first = insert(s, putty("0.80", Arch::Amd64, 1), at).await;
    s.record_many(
        vec![
            putty("0.80", Arch::X86, 2),
            putty("0.80", Arch::Arm64, 3),
            go("1.23.0", 4),
        ],
        at,
    )
    .await
    .expect("record_many");
    // A clock that went back an hour.
    let late = insert(s, go("1.24.0", 5), at - chrono::Duration::hours(1)).await;
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let page = s.records_after(after.as_deref(), 100).await.expect("page");
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        all.extend(page);
    }
    assert_eq!(all.len(), 5);
    all.sort_by_key(|r| r.added_at);
    assert_eq!(all[0].id, first);
    assert_eq!(
        all[0].added_at, at,
        "the first record is added when it is stored"
    );
    assert_eq!(all[4].id, late, "the last one stored is the last added");
    for pair in all.windows(2) {
        assert!(pair[1].added_at >= pair[0].added_at + step, "{pair:?}");
    }
    // Superseded by the later Go version, the first Go record keeps its date added.
    let go_first = all.iter().find(|r| r.record.version == "1.23.0").unwrap();
    assert_eq!(go_first.status, RecordStatus::Superseded);
    assert!(go_first.added_at < all[4].added_at);
}

async fn revocations_set_cert_revoked_at_and_filter_literally(db: Db) {
    use store::revocations::{Revocation, RevocationQuery};
    let s = db.store.as_ref();
    let now = t("2026-01-10T00:00:00Z");
    let (a, b) = ("aa".repeat(20), "bb".repeat(20));
    let mut signed = putty("0.80", Arch::Amd64, 1);
    signed.sig_thumbprint = Some(a.clone());
    let primary = match s.record(signed, now).await.unwrap() {
        RecordOutcome::Inserted { id, .. } => id,
        other => panic!("{other:?}"),
    };
    // Signed by `b` only in a nested signature.
    let nested = match s.record(putty("0.80", Arch::X86, 2), now).await.unwrap() {
        RecordOutcome::Inserted { id, .. } => id,
        other => panic!("{other:?}"),
    };
    s.record_signed_by(&nested, &b).await.unwrap();
    let epoch = s.records_epoch();
    let revoke = |thumbprint: &str, signer: &str, day: &str| Revocation {
        thumbprint: thumbprint.into(),
        signer: signer.into(),
        issuer: "CN=CA".into(),
        serial: "01".into(),
        revoked_at: t(day),
        reason: "certificateHold".into(),
        crl_url: "http://crl.example/ca.crl".into(),
    };
    assert!(
        s.revoke(
            &revoke(&a, "CN=100% Real_Signer", "2026-01-05T10:00:00Z"),
            now
        )
        .await
        .unwrap()
    );
    assert!(
        !s.revoke(
            &revoke(&a, "CN=100% Real_Signer", "2026-01-05T10:00:00Z"),
            now
        )
        .await
        .unwrap(),
        "unchanged"
    );
    assert!(
        s.revoke(&revoke(&b, "CN=Other Signer", "2026-01-07T00:00:00Z"), now)
            .await
            .unwrap()
    );
    assert!(s.records_epoch() > epoch, "the feed caches must notice");
    let revoked_at = |id: String| async move {
        s.records_after(None, 10)
            .await
            .unwrap()
            .into_iter()
            .find(|r| r.id == id)
            .map(|r| (r.cert_revoked_at, r.integrity_ok))
            .unwrap()
    };
    assert_eq!(
        revoked_at(primary.clone()).await,
        (Some(t("2026-01-05T10:00:00Z")), true)
    );
    assert_eq!(
        revoked_at(nested.clone()).await,
        (Some(t("2026-01-07T00:00:00Z")), true)
    );

    let total = |signer: &str| {
        let q = RevocationQuery {
            signer: Some(signer.into()),
            limit: 50,
            ..Default::default()
        };
        async move { s.revocation_history(&q).await.unwrap().total }
    };
    assert_eq!(total("100% real").await, 1, "case-insensitive");
    assert_eq!(total("0%").await, 1);
    assert_eq!(total("0%r").await, 0, "% is not a wildcard");
    assert_eq!(total("l_s").await, 1);
    assert_eq!(total("r_s").await, 0, "_ is not a wildcard");
    let q = RevocationQuery {
        since: Some(t("2026-01-06T00:00:00Z")),
        limit: 50,
        ..Default::default()
    };
    let page = s.revocation_history(&q).await.unwrap();
    assert_eq!(
        (page.total, page.items[0].thumbprint.as_str()),
        (1, b.as_str())
    );

    assert!(s.release(&a, now).await.unwrap());
    assert!(!s.release(&a, now).await.unwrap(), "nothing left in force");
    assert_eq!(revoked_at(primary).await, (None, true));
    let released = s.revocation(&a).await.unwrap().unwrap();
    assert_eq!(released.released_at, Some(now));
    assert_eq!(s.revocations_in_force().await.unwrap().len(), 1);
}

/// 200 guesses of one subject's second-factor budget taken at once (on one store, and on a
/// second store over the same database, as two replicas): exactly five are taken, none
/// fails; the five settled wrong lock the subject out once; the lock refuses every guess
/// until it ends; a right code (clear) gives the budget back.
async fn concurrent_guesses_never_exceed_the_mfa_budget(db: Db) {
    use store::users::FailureBudget;
    let budget = FailureBudget {
        budget: 5,
        window: chrono::Duration::minutes(15),
        lock: chrono::Duration::minutes(15),
    };
    let replica = db.open(SECRET).await;
    let stores = [db.store.clone(), replica];
    let now = t("2025-01-01T00:00:00Z");
    let subject = "key:key_guess";
    let takes = (0..200).map(|i| {
        let s = stores[i % 2].clone();
        async move { s.mfa_take_guess(subject, now, budget).await }
    });
    let results = futures::future::join_all(takes).await;
    let taken = results.iter().filter(|r| matches!(r, Ok(None))).count();
    let errors: Vec<_> = results.iter().filter(|r| r.is_err()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(taken, 5, "guesses taken out of 200 at once");
    // Refusals say until when: the end of the window.
    assert!(results.iter().all(|r| match r {
        Ok(Some(until)) => *until == now + budget.window,
        _ => true,
    }));

    // The five settle wrong at once: one of them locks the subject out.
    let later = now + chrono::Duration::seconds(1);
    let settles = (0..5).map(|i| {
        let s = stores[i % 2].clone();
        async move { s.mfa_settle_failure(subject, later, budget).await.unwrap() }
    });
    let locks: Vec<_> = futures::future::join_all(settles)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(locks, vec![later + budget.lock]);
    let s = &*db.store;
    assert_eq!(
        s.mfa_locked_until(subject, later).await.unwrap(),
        Some(later + budget.lock)
    );
    assert_eq!(
        s.mfa_take_guess(subject, later + chrono::Duration::minutes(14), budget)
            .await
            .unwrap(),
        Some(later + budget.lock)
    );
    // After the lock-out a fresh budget of five.
    let after = later + budget.lock;
    for _ in 0..5 {
        assert_eq!(
            s.mfa_take_guess(subject, after, budget).await.unwrap(),
            None
        );
    }
    assert!(
        s.mfa_take_guess(subject, after, budget)
            .await
            .unwrap()
            .is_some()
    );
    // A right code gives the budget back.
    s.clear_mfa_failures(subject).await.unwrap();
    assert_eq!(
        s.mfa_take_guess(subject, after, budget).await.unwrap(),
        None
    );
    // A window without a lock-out ends after its 15 minutes.
    for _ in 0..4 {
        s.mfa_take_guess(subject, after, budget).await.unwrap();
    }
    assert!(
        s.mfa_take_guess(subject, after, budget)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        s.mfa_take_guess(subject, after + budget.window, budget)
            .await
            .unwrap(),
        None
    );
    // Other subjects have their own budget.
    assert_eq!(
        s.mfa_take_guess("user:other", after, budget).await.unwrap(),
        None
    );
}

async fn executable_names_by_prefix_are_folded_bounded_and_literal(db: Db) {
    let s = &*db.store;
    let now = t("2025-03-10T12:00:00Z");
    let r = |name: &str, v: &str, seed| rec("V", name, v, Platform::Windows, Arch::Amd64, seed);
    insert(s, r("PuTTY.exe", "0.81", 1), now).await;
    // A newer version of the same name is one suggestion, not two.
    insert(
        s,
        r("PuTTY.exe", "0.82", 2),
        now + chrono::Duration::hours(1),
    )
    .await;
    insert(s, r("puttygen.exe", "0.82", 3), now).await;
    insert(s, r("pu_tty.exe", "1.0", 4), now).await;
    insert(s, r("50%off.exe", "1.0", 5), now).await;
    insert(s, r("500.exe", "1.0", 6), now).await;
    insert(s, r("Élan.exe", "1.0", 7), now).await;
    // Beside a prefix's last character, the one after it ('0' follows '/').
    insert(s, r("pu/x.exe", "1.0", 8), now).await;
    insert(s, r("pu0.exe", "1.0", 9), now).await;
    for i in 0..12u64 {
        insert(s, r(&format!("zz{i:02}.exe"), "1.0", 100 + i), now).await;
    }
    let names = |prefix: &'static str, limit| async move {
        let mut got = s.executable_names_with_prefix(prefix, limit).await.unwrap();
        got.sort();
        got
    };

    // Case-folded both ways; one spelling per name.
    assert_eq!(names("PUTT", 10).await, vec!["PuTTY.exe", "puttygen.exe"]);
    assert_eq!(names("élan", 10).await, vec!["Élan.exe"]);
    // LIKE's wildcards in the prefix are plain text.
    assert_eq!(names("pu_", 10).await, vec!["pu_tty.exe"]);
    assert_eq!(names("50%", 10).await, vec!["50%off.exe"]);
    assert_eq!(names("5%", 10).await, Vec::<String>::new());
    assert_eq!(names("%", 10).await, Vec::<String>::new());
    assert_eq!(names("__", 10).await, Vec::<String>::new());
    // Too short a prefix matches nothing, and the answer is bounded.
    assert_eq!(names("p", 10).await, Vec::<String>::new());
    assert_eq!(names("zz", 3).await.len(), 3);
    assert_eq!(
        names("zz", 1000).await.len(),
        store::MAX_NAME_SUGGESTIONS as usize
    );
    assert_eq!(names("nothing", 10).await, Vec::<String>::new());
    // Exactly the names that start with the prefix, however the backend bounds the search.
    assert_eq!(names("pu/", 10).await, vec!["pu/x.exe"]);
    assert_eq!(names("PU0", 10).await, vec!["pu0.exe"]);
    assert_eq!(names("pu", 10).await.len(), 5);

    // The console's search by name prefix: the current record of each name.
    let search = store::CurrentSearch {
        name_prefix: Some("PUTT".into()),
        ..Default::default()
    };
    let found = s.search_current(&search, 10).await.unwrap();
    let found: Vec<(&str, &str)> = found
        .iter()
        .map(|r| (r.record.executable_name.as_str(), r.record.version.as_str()))
        .collect();
    assert_eq!(found, [("PuTTY.exe", "0.82"), ("puttygen.exe", "0.82")]);
}

async fn stix_objects_are_found_by_key_and_the_position_only_moves_on(db: Db) {
    let s = &*db.store;
    assert_eq!(
        s.stix_object_position().await.unwrap(),
        ChangePosition::default()
    );
    let a = insert(s, go("1.21.0", 10), t("2025-02-01T00:00:00Z")).await;
    let b = insert(s, putty("0.81", Arch::Arm64, 11), t("2025-02-01T00:00:01Z")).await;
    let to = ChangePosition {
        epoch: s.records_epoch(),
        after_id: Some(b.clone()),
    };
    // Keys of both signs; an id that is no record id is not noted; a pair noted twice once.
    let named = [
        (7_i64, a.as_str()),
        (7, b.as_str()),
        (i64::MIN, b.as_str()),
        (7, a.as_str()),
    ];
    s.note_stix_objects(&named, &to).await.unwrap();
    s.note_stix_objects(&[(9, "not-a-record-id")], &to)
        .await
        .unwrap();
    let mut found = ids(&s.records_naming_stix_object(7, 10).await.unwrap())
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
    found.sort();
    let mut want = vec![a.clone(), b.clone()];
    want.sort();
    assert_eq!(found, want);
    assert_eq!(
        ids(&s.records_naming_stix_object(i64::MIN, 10).await.unwrap()),
        [b.as_str()]
    );
    assert_eq!(s.records_naming_stix_object(7, 1).await.unwrap().len(), 1);
    assert!(
        s.records_naming_stix_object(9, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        s.records_naming_stix_object(8, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(s.stix_object_position().await.unwrap(), to);

    // Another catch-up that read less must not move the position back.
    let behind = ChangePosition {
        epoch: to.epoch,
        after_id: Some(String::new()),
    };
    s.note_stix_objects(&[], &behind).await.unwrap();
    s.note_stix_objects(&[], &ChangePosition::default())
        .await
        .unwrap();
    assert_eq!(s.stix_object_position().await.unwrap(), to);
    let further = ChangePosition {
        epoch: to.epoch + 1,
        after_id: None,
    };
    s.note_stix_objects(&[], &further).await.unwrap();
    assert_eq!(s.stix_object_position().await.unwrap(), further);
    // No id is the whole epoch: a position inside it is behind.
    let inside = ChangePosition {
        epoch: further.epoch,
        after_id: Some(b.clone()),
    };
    s.note_stix_objects(&[], &inside).await.unwrap();
    assert_eq!(s.stix_object_position().await.unwrap(), further);
}

// ---------------------------------------------------------------------------------------
// Writes beside another writer: the running service records vendor files every few
// seconds, and a transaction that read before that commit must still write after it.
// ---------------------------------------------------------------------------------------

/// Runs `calls` all at once while another writer keeps recording new versions of a vendor
/// file (at least one), as discovery does in the running service; their results.
async fn beside_a_writer<F: std::future::Future>(
    s: &std::sync::Arc<dyn Store>,
    calls: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = AtomicBool::new(false);
    let calls = async {
        let results = futures::future::join_all(calls).await;
        done.store(true, Ordering::Release);
        results
    };
    let recorded = |s: std::sync::Arc<dyn Store>| async move {
        let history = s.history(&history_query("writer.exe")).await;
        history.expect("history").total
    };
    let before = recorded(s.clone()).await;
    let writer = async {
        let mut n = before;
        while n == before || !done.load(Ordering::Acquire) {
            let r = rec(
                "Writer Corp",
                "writer.exe",
                &format!("1.{n}.0"),
                Platform::Windows,
                Arch::Amd64,
                90_000 + n,
            );
            let now = t("2025-01-01T00:00:00Z") + chrono::Duration::seconds(n as i64);
            s.record(r, now).await.expect("the other writer failed");
            n += 1;
            // A pause between writes, as between a vendor's files: SQLite's busy wait is
            // not fair, and a writer that never pauses starves whoever waits behind it.
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        n
    };
    let (results, written) = tokio::join!(calls, writer);
    assert_eq!(
        recorded(s.clone()).await,
        written,
        "every version the writer recorded"
    );
    results
}

/// Coverage requests read each version's state, then queue it: eight requesters at once,
/// five requests each naming a version of their own and one they all share, beside
/// another writer. None is refused; the shared version is new to exactly one request.
async fn concurrent_coverage_requests_beside_a_writer_all_succeed(db: Db) {
    use store::coverage::CoverageItem;
    let s = db.store.clone();
    let now = t("2025-03-10T08:00:00Z");
    let item = |name: String| CoverageItem {
        ecosystem: "pypi".into(),
        name,
        version: "1.0.0".into(),
    };
    let requesters = (0..8).map(|i| {
        let s = s.clone();
        async move {
            let mut answers = Vec::new();
            for round in 0..5 {
                let items = [item(format!("own-{i}-{round}")), item("shared".into())];
                answers.push(s.queue_coverage(&items, now).await);
            }
            answers
        }
    });
    let mut new_shared = 0;
    for answer in beside_a_writer(&s, requesters).await.into_iter().flatten() {
        let before = answer.expect("a coverage request was refused");
        assert_eq!(before[0], None, "a version of its own was new");
        new_shared += usize::from(before[1].is_none());
    }
    assert_eq!(new_shared, 1);
    assert_eq!(s.queued_coverage("pypi", 100).await.unwrap().len(), 41);
}

/// Administrators changing keys, grants, suspension and platform settings at once while
/// usage is flushed, beside another writer: every change lands and each moves the
/// access epoch once.
async fn concurrent_key_and_settings_changes_beside_a_writer_all_succeed(db: Db) {
    use store::admin::{GrantRow, UsageDelta};
    use store::staff::StoredSettings;
    let s = db.store.clone();
    let now = t("2025-01-01T00:00:00Z");
    s.create_tenant_with_key(
        "acme",
        TenantKind::Customer,
        Tier::Teams,
        key("acme", 0, Role::AccountAdmin),
        now,
    )
    .await
    .unwrap();
    let epoch = s.auth_epoch().await.unwrap();
    let grant = |role| GrantRow {
        role,
        expires_at: None,
        granted_by: "kid_acme_0".into(),
        granted_at: now,
    };
    let admins = (1..=8u64).map(|i| {
        let (s, grant) = (s.clone(), grant);
        async move {
            let kid = format!("kid_acme_{i}");
            s.insert_key(key("acme", i, Role::Analyst), now).await?;
            s.put_grant(&kid, &grant(Role::Auditor)).await?;
            s.put_grant(&kid, &grant(Role::ClientLiaison)).await?;
            assert!(s.delete_grant(&kid, Role::ClientLiaison).await?);
            s.update_key(&kid, Some(&format!("renamed {i}")), None)
                .await?;
            s.reissue_key(&kid, key("acme", 100 + i, Role::Analyst), now)
                .await?;
            s.set_suspended("acme", i % 2 == 0).await?;
            s.put_platform_settings(&StoredSettings {
                document: "{}".into(),
                updated_at: now,
                updated_by: kid,
            })
            .await?;
            s.add_usage(&[UsageDelta {
                team_id: "acme".into(),
                day: now.date_naive(),
                endpoint: "GET /api/v1/hashes".into(),
                count: 1,
            }])
            .await?;
            Ok::<_, model::Error>(())
        }
    });
    for result in beside_a_writer(&s, admins).await {
        result.expect("an access change was refused");
    }
    // Eight changes moved the epoch per administrator (the usage flush moves none).
    assert_eq!(s.auth_epoch().await.unwrap(), epoch + 8 * 8);
    let keys = s.list_keys(Some("acme")).await.unwrap();
    assert_eq!(keys.len(), 17, "the first key, 8 revoked, 8 reissued");
    for i in 1..=8u64 {
        let old = keys.iter().find(|k| k.key_id == format!("kid_acme_{i}"));
        let old = old.expect("the reissued key is kept");
        assert!(old.revoked_at.is_some());
        assert_eq!(old.label, format!("renamed {i}"));
        let new = keys
            .iter()
            .find(|k| k.key_id == format!("kid_acme_{}", 100 + i));
        let new = new.expect("the new key");
        assert_eq!(new.revoked_at, None);
        let roles: Vec<Role> = new.grants.iter().map(|g| g.role).collect();
        assert_eq!(roles, [Role::Auditor], "the grants moved to the new key");
    }
    let settings = s.platform_settings().await.unwrap().expect("settings");
    assert!(settings.updated_by.starts_with("kid_acme_"));
    let usage = s
        .usage_by_endpoint("acme", now.date_naive(), now.date_naive())
        .await
        .unwrap();
    assert_eq!(usage, [("GET /api/v1/hashes".to_string(), 8)]);
}

/// Invites redeemed twice at once, recovery codes replaced and second factors moved,
/// beside another writer: each invite makes one user, and every write lands.
async fn concurrent_invites_and_second_factors_beside_a_writer_all_succeed(db: Db) {
    use store::users::NewInvite;
    let s = db.store.clone();
    let now = t("2025-01-01T00:00:00Z");
    s.create_tenant_with_key(
        "acme",
        TenantKind::Customer,
        Tier::Teams,
        key("acme", 0, Role::AccountAdmin),
        now,
    )
    .await
    .unwrap();
    for i in 0..8u64 {
        s.create_invite(&NewInvite {
            invite_id: format!("inv-{i}"),
            code_hash: hex_of(3000 + i, 64),
            team_id: "acme".into(),
            role: Role::Analyst,
            display_name: format!("User {i}"),
            contact: format!("user{i}@acme.example"),
            created_by: "kid_acme_0".into(),
            created_at: now,
            expires_at: now + chrono::Duration::days(7),
        })
        .await
        .unwrap();
    }
    let redeems = (0..16u64).map(|n| {
        let s = s.clone();
        async move {
            let code = hex_of(3000 + n / 2, 64);
            s.redeem_invite(&code, &format!("user-{n}"), now).await
        }
    });
    let mut users = Vec::new();
    for (n, redeemed) in (0..).zip(beside_a_writer(&s, redeems).await) {
        let redeemed = redeemed.expect("a redemption was refused");
        if let Some((user, membership)) = redeemed {
            assert_eq!(user.display_name, format!("User {}", n / 2));
            assert_eq!(
                (membership.team_id.as_str(), membership.role),
                ("acme", Role::Analyst)
            );
            users.push(user.user_id);
        }
    }
    assert_eq!(users.len(), 8, "each invite makes one user");

    let factors = users.iter().map(|user| {
        let s = s.clone();
        async move {
            let (from, to) = (format!("key:{user}"), format!("user:{user}"));
            let codes: Vec<String> = (0..3).map(|c| format!("{user}-code-{c}")).collect();
            s.replace_recovery_codes(&from, &codes).await?;
            s.replace_recovery_codes(&from, &codes).await?;
            s.move_second_factors(&from, &to).await
        }
    });
    for moved in beside_a_writer(&s, factors).await {
        moved.expect("a second-factor change was refused");
    }
    for user in &users {
        let left = |subject: String| {
            let s = s.clone();
            async move { s.recovery_codes_left(&subject).await.unwrap() }
        };
        assert_eq!(left(format!("key:{user}")).await, 0);
        assert_eq!(left(format!("user:{user}")).await, 3);
    }
}

/// Catch-ups noting which records name which STIX objects, all at once beside another
/// writer: every pair is noted and the position is the furthest one.
async fn concurrent_stix_notes_beside_a_writer_all_succeed(db: Db) {
    let s = db.store.clone();
    let id = insert(&*s, go("1.21.0", 10), t("2025-02-01T00:00:00Z")).await;
    let notes = (1..=8i64).map(|object| {
        let (s, id) = (s.clone(), id.clone());
        async move {
            let to = ChangePosition {
                epoch: object as u64,
                after_id: None,
            };
            s.note_stix_objects(&[(object, id.as_str())], &to).await
        }
    });
    for noted in beside_a_writer(&s, notes).await {
        noted.expect("a note was refused");
    }
    for object in 1..=8 {
        let found = s.records_naming_stix_object(object, 10).await.unwrap();
        assert_eq!(ids(&found), [id.as_str()]);
    }
    assert_eq!(
        s.stix_object_position().await.unwrap(),
        ChangePosition {
            epoch: 8,
            after_id: None
        }
    );
}

/// Replicas publishing the same day's root at once, then filling its chunk roots, day
/// after day beside another writer: none is refused, all see the one root stored.
async fn concurrent_root_publications_beside_a_writer_all_succeed(db: Db) {
    use crate::translog_chunks::{date, hashes, leaf, root};
    let s = db.store.clone();
    for (n, day) in ["2025-03-10", "2025-03-11", "2025-03-12"]
        .into_iter()
        .enumerate()
    {
        // A leaf leaves each day, two enter.
        let mut rows: Vec<_> = (n as u64..n as u64 + 5 + n as u64)
            .map(|i| leaf(i, i))
            .collect();
        rows.sort_by(|a, b| a.leaf_hash.cmp(&b.leaf_hash));
        let want = root(day, &rows);
        let publications = (0..4).map(|_| {
            let (s, want, rows) = (s.clone(), want.clone(), rows.clone());
            async move { s.publish_root(&want, &rows).await }
        });
        for published in beside_a_writer(&s, publications).await {
            assert_eq!(published.expect("a publication was refused"), want);
        }
        let chunks = s.chunk_roots(date(day)).await.unwrap();
        assert_eq!(chunks, translog::chunk::chunk_roots(&hashes(&rows)));
        let fills = (0..4).map(|_| {
            let s = s.clone();
            async move { s.store_chunk_roots(date(day), &[[7u8; 32]]).await }
        });
        for filled in beside_a_writer(&s, fills).await {
            filled.expect("filling chunk roots was refused");
        }
        assert_eq!(
            s.chunk_roots(date(day)).await.unwrap(),
            chunks,
            "never replaced"
        );
        let stored = s.leaves(date(day)).await.unwrap();
        assert_eq!(stored, rows);
    }
}
