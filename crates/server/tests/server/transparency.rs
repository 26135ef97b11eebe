//! The transparency log end to end, on each storage backend: daily roots published over
//! three days of ingestion, the public routes, inclusion proofs checked with the
//! independent verifier of the `translog` crate, the append-only tables, tampering behind
//! the service's back (a leaf's stored entry, a removed exit, a moved chunk start), the
//! root log's checkpoint and consistency proofs, key rotation, and proofs in days of
//! several 256-leaf chunks (including days published before chunk roots were stored).
//!
//! Each test is an `async fn(TestApp)`; `testkit::backend_tests!` instantiates it as
//! `sqlite::<name>` and `postgres::<name>` (the latter ignored unless
//! `KNOWNGOOD_TEST_POSTGRES_URL` was set when the tests were built).

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::NaiveDate;
use jobs::LogKey;
use jobs::publish::publish_day;
use model::{Arch, Clock as _, NewRecord, Platform};
use serde_json::Value;
use server::CHECKPOINT_ORIGIN;
use sha2::{Digest as _, Sha256};
use sqlx::{Connection as _, PgConnection, SqliteConnection};
use store::roots::StoredRoot;
use testkit::{Backend, TestApp, go, hex_of, putty, pypi, rec, t};
use translog::encoding::{
    hash_to_hex, key_id, parse_hash_hex, parse_public_key_base64, parse_public_key_pem,
};
use translog::verify::{InclusionResponse, VerifyError};
use translog::{Hash, MerkleTree, NEXT_ROOT_HEADER, Record, SignedRoot, SigningKey, VerifyingKey};

testkit::backend_tests!(
    daily_roots_chain_over_distinct_leaves,
    publishing_a_day_again_returns_the_stored_root,
    index_key_and_day_routes,
    proofs_verify_independently,
    route_errors,
    recorded_after_the_days_root,
    translog_tables_are_append_only,
    tampered_leaf_fields_are_caught,
    replaced_leaf_and_rewritten_root_are_caught,
    removed_exit_is_caught,
    moved_chunk_start_is_caught,
    forged_day_is_caught,
    checkpoint_and_consistency,
    key_rotation_keeps_old_days_verifiable,
    proofs_straddling_chunk_boundaries,
    days_published_before_chunk_roots_get_them,
);

/// The seed of the key the harness gives the server (`testkit::app_state`).
const KEY_A: [u8; 32] = [7; 32];
/// The key of a later rotation.
const KEY_B: [u8; 32] = [9; 32];
/// A key the service never had.
const ATTACKER: [u8; 32] = [66; 32];

const ZEROS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn d(s: &str) -> NaiveDate {
    s.parse().unwrap_or_else(|e| panic!("bad date {s:?}: {e}"))
}

fn vk(seed: &[u8; 32]) -> VerifyingKey {
    SigningKey::from_bytes(seed).verifying_key()
}

// ---------------------------------------------------------------------------------------
// Expected leaves, computed from the records ingested, never from what the server says
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Leaf {
    name: String,
    sha: String,
    version: String,
    platform: String,
    arch: String,
}

impl Leaf {
    fn of(r: &NewRecord) -> Self {
        Self {
            name: r.executable_name.clone(),
            sha: r.hash_sha256.clone(),
            version: r.version.clone(),
            platform: r.platform.as_str().into(),
            arch: r.arch.as_str().into(),
        }
    }

    fn record(&self) -> Record<'_> {
        Record {
            executable_name: &self.name,
            hash_sha256: &self.sha,
            version: &self.version,
            platform: &self.platform,
            arch: &self.arch,
        }
    }

    fn hash(&self) -> Hash {
        self.record().leaf_hash().expect("valid leaf")
    }
}

fn expected_root(leaves: &BTreeSet<Leaf>) -> Hash {
    MerkleTree::from_leaf_hashes(leaves.iter().map(Leaf::hash).collect()).root()
}

/// One published day of the three-day scenario.
struct Day {
    date: NaiveDate,
    /// The distinct leaves of the day's public feed.
    leaves: BTreeSet<Leaf>,
    /// The stored root as `publish_day` returned it.
    root: StoredRoot,
    /// The root log's checkpoint fetched right after publishing (what a witness keeps).
    checkpoint: String,
}

impl Day {
    fn leaf(&self, sha: &str) -> &Leaf {
        self.leaves
            .iter()
            .find(|l| l.sha == sha)
            .unwrap_or_else(|| panic!("{sha} is not a leaf of {}", self.date))
    }
}

const D1: &str = "2025-03-10";
const D2: &str = "2025-03-11";
const D3: &str = "2025-03-12";

// The records of the scenario (seeds name their SHA-256 through `hex_of`).
fn putty_080_amd64() -> NewRecord {
    putty("0.80", Arch::Amd64, 1)
}
fn putty_080_arm64() -> NewRecord {
    putty("0.80", Arch::Arm64, 2)
}
fn go_1234() -> NewRecord {
    go("1.23.4", 3)
}
/// The same file as `putty_080_amd64` from a mirror vendor: its own current record, the
/// same leaf.
fn mirror_putty_080_amd64() -> NewRecord {
    rec(
        "Mirror",
        "putty.exe",
        "0.80",
        Platform::Windows,
        Arch::Amd64,
        1,
    )
}
fn putty_081_amd64() -> NewRecord {
    putty("0.81", Arch::Amd64, 11)
}
fn go_1235() -> NewRecord {
    go("1.23.5", 12)
}
fn requests() -> NewRecord {
    pypi("requests", "2.32.0", 21)
}
fn putty_081_arm64() -> NewRecord {
    putty("0.81", Arch::Arm64, 22)
}

fn sha(r: NewRecord) -> String {
    r.hash_sha256
}

async fn publish_with(app: &TestApp, seed: &[u8; 32], date: NaiveDate) -> StoredRoot {
    publish_day(
        app.store.as_ref(),
        &LogKey::new(seed),
        app.clock.now(),
        date,
    )
    .await
    .unwrap_or_else(|e| panic!("publish {date}: {e}"))
}

async fn publish(app: &TestApp, date: NaiveDate) -> StoredRoot {
    publish_with(app, &KEY_A, date).await
}

/// Three consecutive days of ingestion, each published in the morning:
///
/// * day 1: PuTTY 0.80 amd64 and arm64, Go 1.23.4, and the mirror's copy of PuTTY 0.80
///   amd64 (four current records, three distinct leaves);
/// * day 2: PuTTY 0.81 amd64 and Go 1.23.5 supersede their 0.80 and 1.23.4 (the mirror's
///   copy stays current): four leaves;
/// * day 3: requests 2.32.0 and PuTTY 0.81 arm64 (superseding 0.80 arm64): five leaves.
async fn three_days(app: &TestApp) -> Vec<Day> {
    let mut days = Vec::new();
    let mut current: Vec<NewRecord> = Vec::new();
    let plan: [(&str, Vec<NewRecord>); 3] = [
        (
            D1,
            vec![
                putty_080_amd64(),
                putty_080_arm64(),
                go_1234(),
                mirror_putty_080_amd64(),
            ],
        ),
        (D2, vec![putty_081_amd64(), go_1235()]),
        (D3, vec![requests(), putty_081_arm64()]),
    ];
    for (date, records) in plan {
        app.clock.set(t(&format!("{date}T08:00:00Z")));
        for r in records {
            current.retain(|c| {
                !(c.vendor == r.vendor
                    && c.family() == r.family()
                    && c.platform == r.platform
                    && c.arch == r.arch)
            });
            current.push(r.clone());
            app.record(r).await;
        }
        let date = d(date);
        let root = publish(app, date).await;
        let checkpoint = app.get("/public/transparency/checkpoint").await;
        assert_eq!(checkpoint.status, 200, "{}", checkpoint.text);
        days.push(Day {
            date,
            leaves: current.iter().map(Leaf::of).collect(),
            root,
            checkpoint: checkpoint.text,
        });
    }
    assert_eq!(
        days.iter().map(|d| d.leaves.len()).collect::<Vec<_>>(),
        [3, 4, 5],
        "scenario"
    );
    days
}

// ---------------------------------------------------------------------------------------
// The independent verifier's view of the JSON documents
// ---------------------------------------------------------------------------------------

fn s<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("no text field {field:?} in {v}"))
}

fn u(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no number field {field:?} in {v}"))
}

/// A root document (`/public/transparency/{date}` or an entry of the index).
fn signed(root: &Value) -> SignedRoot {
    SignedRoot::from_encoded(
        s(root, "log_date"),
        s(root, "merkle_root"),
        u(root, "entry_count"),
        s(root, "prev_root"),
        s(root, "signature"),
    )
    .unwrap_or_else(|e| panic!("malformed root {root}: {e}"))
}

fn signed_stored(root: &StoredRoot) -> SignedRoot {
    SignedRoot::from_encoded(
        &root.log_date.to_string(),
        &root.merkle_root,
        root.entry_count,
        &root.prev_root,
        &root.signature,
    )
    .expect("stored root is well-formed")
}

fn proof_record(proof: &Value) -> Record<'_> {
    let r = &proof["record"];
    Record {
        executable_name: s(r, "executable_name"),
        hash_sha256: s(r, "hash_sha256"),
        version: s(r, "version"),
        platform: s(r, "platform"),
        arch: s(r, "arch"),
    }
}

fn inclusion(proof: &Value) -> InclusionResponse {
    let path: Vec<&str> = proof["audit_path"]
        .as_array()
        .unwrap_or_else(|| panic!("no audit_path in {proof}"))
        .iter()
        .map(|h| h.as_str().expect("hex"))
        .collect();
    InclusionResponse::from_encoded(
        s(proof, "log_date"),
        u(proof, "leaf_index"),
        u(proof, "tree_size"),
        &path,
        proof["leaf_hash"].as_str(),
        proof["merkle_root"].as_str(),
    )
    .unwrap_or_else(|e| panic!("malformed proof {proof}: {e}"))
}

/// What a client does: the signed root of the day and the proof, checked with the public
/// key and the record fields alone.
fn verify_proof(key: &VerifyingKey, root: &Value, proof: &Value) -> Result<Hash, VerifyError> {
    translog::verify_inclusion_response(key, &signed(root), &proof_record(proof), &inclusion(proof))
}

async fn get_json(app: &TestApp, path: &str) -> Value {
    let r = app.get(path).await;
    assert_eq!(r.status, 200, "{path}: {}", r.text);
    r.json()
}

async fn day_doc(app: &TestApp, date: NaiveDate) -> Value {
    get_json(app, &format!("/public/transparency/{date}")).await
}

async fn proof_doc(app: &TestApp, date: NaiveDate, sha256: &str) -> Value {
    get_json(
        app,
        &format!("/public/transparency/{date}/proof?sha256={sha256}"),
    )
    .await
}

/// Root-log leaf, recomputed from the published fields (see `routes::transparency`).
fn root_log_leaf(root: &Value) -> Hash {
    let mut h = Sha256::new();
    h.update(signed(root).message().as_bytes());
    h.update(b"\n");
    h.update(s(root, "signature").as_bytes());
    h.finalize().into()
}

// ---------------------------------------------------------------------------------------
// Raw SQL behind the store's back
// ---------------------------------------------------------------------------------------

/// Runs statements on a fresh raw connection; the database's error text on failure.
async fn raw(app: &TestApp, sql: &str) -> Result<u64, String> {
    let sql = sqlx::AssertSqlSafe(sql.to_string());
    match app.backend {
        Backend::Sqlite => {
            let mut c = SqliteConnection::connect(&app.url)
                .await
                .expect("raw connect");
            let r = sqlx::raw_sql(sql).execute(&mut c).await;
            c.close().await.ok();
            r.map(|r| r.rows_affected()).map_err(|e| e.to_string())
        }
        Backend::Postgres => {
            let mut c = PgConnection::connect(&app.url).await.expect("raw connect");
            let r = sqlx::raw_sql(sql).execute(&mut c).await;
            c.close().await.ok();
            r.map(|r| r.rows_affected()).map_err(|e| e.to_string())
        }
    }
}

/// The SQL literal of a stored hash (the log stores its hashes as their bytes).
fn bytes(app: &TestApp, hex: &str) -> String {
    app.backend.bytes_literal(hex)
}

async fn raw_ok(app: &TestApp, sql: &str) -> u64 {
    raw(app, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// What an intruder with database access does first: removes the append-only guards.
async fn drop_guards(app: &TestApp) {
    let sql = match app.backend {
        Backend::Sqlite => {
            "DROP TRIGGER translog_roots_no_update; DROP TRIGGER translog_roots_no_delete; \
             DROP TRIGGER translog_entries_no_update; DROP TRIGGER translog_entries_no_delete; \
             DROP TRIGGER translog_exits_no_update; DROP TRIGGER translog_exits_no_delete; \
             DROP TRIGGER translog_chunk_starts_no_update; \
             DROP TRIGGER translog_chunk_starts_no_delete;"
        }
        Backend::Postgres => {
            "DROP TRIGGER translog_roots_no_change ON translog_roots; \
             DROP TRIGGER translog_entries_no_change ON translog_entries; \
             DROP TRIGGER translog_exits_no_change ON translog_exits; \
             DROP TRIGGER translog_chunk_starts_no_change ON translog_chunk_starts;"
        }
    };
    raw_ok(app, sql).await;
}

// ---------------------------------------------------------------------------------------
// Publishing
// ---------------------------------------------------------------------------------------

async fn daily_roots_chain_over_distinct_leaves(app: TestApp) {
    let days = three_days(&app).await;
    let key = vk(&KEY_A);
    let mut prev = ZEROS.to_string();
    for day in &days {
        let r = &day.root;
        assert_eq!(r.log_date, day.date);
        assert_eq!(r.prev_root, prev, "{} chains to the day before", day.date);
        assert_eq!(
            r.entry_count,
            day.leaves.len() as u64,
            "{}: entry_count counts distinct leaves",
            day.date
        );
        assert_eq!(
            r.merkle_root,
            hash_to_hex(&expected_root(&day.leaves)),
            "{}: root over the sorted, de-duplicated leaves",
            day.date
        );
        assert_eq!(r.key_id, key_id(&key));
        assert_eq!(r.published_at.date_naive(), day.date);
        signed_stored(r).verify(&key).expect("signature");
        prev = r.merkle_root.clone();
    }
    // Day 1 has four current records but three leaves: the mirror's copy is the same leaf.
    assert_eq!(days[0].root.entry_count, 3);
    assert_eq!(app.store.current_records(None).await.unwrap().len(), 5);
    let chain: Vec<SignedRoot> = days.iter().map(|d| signed_stored(&d.root)).collect();
    translog::verify_chain(&key, &chain).expect("chain");

    // The stored leaves are the tree in order, with the record fields.
    for day in &days {
        let stored = app.store.leaves(day.date).await.unwrap();
        let mut sorted: Vec<Hash> = day.leaves.iter().map(Leaf::hash).collect();
        sorted.sort();
        let got: Vec<Hash> = stored
            .iter()
            .map(|l| parse_hash_hex("leaf", &l.leaf_hash).unwrap())
            .collect();
        assert_eq!(got, sorted, "{}: leaves sorted bytewise", day.date);
        for l in &stored {
            let leaf = day.leaf(&l.hash_sha256);
            assert_eq!(
                (&l.executable_name, &l.version, &l.platform, &l.arch),
                (&leaf.name, &leaf.version, &leaf.platform, &leaf.arch)
            );
        }
    }
}

async fn publishing_a_day_again_returns_the_stored_root(app: TestApp) {
    let days = three_days(&app).await;
    // The feed changes after the last publication...
    app.record(putty("0.82", Arch::Amd64, 31)).await;
    app.record(go("1.24.0", 32)).await;
    app.clock.set(t("2025-03-12T23:59:00Z"));
    // ...yet every published day keeps its root, whoever publishes it again, whenever.
    for day in &days {
        assert_eq!(publish(&app, day.date).await, day.root);
        assert_eq!(publish_with(&app, &KEY_B, day.date).await, day.root);
    }
    assert_eq!(app.store.all_roots().await.unwrap().len(), 3);
    // A new day covers the new feed and chains to day 3.
    app.clock.set(t("2025-03-13T08:00:00Z"));
    let day4 = publish(&app, d("2025-03-13")).await;
    assert_eq!(day4.prev_root, days[2].root.merkle_root);
    assert_eq!(day4.entry_count, 5);
    assert_ne!(day4.merkle_root, days[2].root.merkle_root);
}

// ---------------------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------------------

async fn index_key_and_day_routes(app: TestApp) {
    let days = three_days(&app).await;
    let key = vk(&KEY_A);

    let index = get_json(&app, "/public/transparency").await;
    assert_eq!(
        parse_public_key_base64(s(&index, "public_key")).unwrap(),
        key
    );
    assert_eq!(
        parse_public_key_pem(s(&index, "public_key_pem")).unwrap(),
        key
    );
    assert_eq!(s(&index, "key_id"), key_id(&key));
    let roots = index["roots"].as_array().expect("roots");
    let dates: Vec<&str> = roots.iter().map(|r| s(r, "log_date")).collect();
    assert_eq!(dates, [D3, D2, D1], "newest first");
    for (doc, day) in roots.iter().zip(days.iter().rev()) {
        assert_root_doc(doc, &day.root);
    }

    let doc = get_json(&app, "/public/transparency/key").await;
    assert_eq!(s(&doc, "algorithm"), "Ed25519");
    assert_eq!(parse_public_key_base64(s(&doc, "public_key")).unwrap(), key);
    assert_eq!(
        parse_public_key_pem(s(&doc, "public_key_pem")).unwrap(),
        key
    );
    assert!(s(&doc, "public_key_pem").starts_with("-----BEGIN PUBLIC KEY-----"));
    assert_eq!(s(&doc, "key_id"), key_id(&key));
    assert_eq!(s(&doc, "key_id").len(), 16);
    let historical = doc["historical_keys"].as_array().expect("historical_keys");
    assert_eq!(historical.len(), 1, "{doc}");
    assert_eq!(s(&historical[0], "key_id"), key_id(&key));
    assert_eq!(
        parse_public_key_base64(s(&historical[0], "public_key")).unwrap(),
        key
    );
    assert_eq!(s(&historical[0], "first_date"), D1);
    assert_eq!(s(&historical[0], "last_date"), D3);
    let recipe = &doc["recipe"];
    assert!(!recipe["steps"].as_array().expect("steps").is_empty());
    assert_eq!(s(recipe, "message_prefix"), translog::MESSAGE_PREFIX);
    assert_eq!(
        recipe["message_fields"],
        serde_json::json!(["log_date", "merkle_root", "entry_count", "prev_root"])
    );
    assert_eq!(
        recipe["leaf_fields"],
        serde_json::json!([
            "executable_name",
            "hash_sha256",
            "version",
            "platform",
            "arch"
        ])
    );
    assert_eq!(s(recipe, "first_prev_root"), ZEROS);

    for day in &days {
        let doc = day_doc(&app, day.date).await;
        assert_root_doc(&doc, &day.root);
        signed(&doc)
            .verify(&key)
            .expect("signature of the served root");
    }
    let chain: Vec<SignedRoot> = roots.iter().rev().map(signed).collect();
    translog::verify_chain(&key, &chain).expect("served chain");
}

#[track_caller]
fn assert_root_doc(doc: &Value, root: &StoredRoot) {
    assert_eq!(s(doc, "log_date"), root.log_date.to_string());
    assert_eq!(s(doc, "merkle_root"), root.merkle_root);
    assert_eq!(u(doc, "entry_count"), root.entry_count);
    assert_eq!(s(doc, "prev_root"), root.prev_root);
    assert_eq!(s(doc, "signature"), root.signature);
    assert_eq!(s(doc, "key_id"), root.key_id);
    assert!(doc["published_at"].is_string(), "{doc}");
}

async fn proofs_verify_independently(app: TestApp) {
    let days = three_days(&app).await;
    let key = vk(&KEY_A);
    for day in &days {
        let root = day_doc(&app, day.date).await;
        let mut indexes = BTreeSet::new();
        for leaf in &day.leaves {
            let proof = proof_doc(&app, day.date, &leaf.sha).await;
            assert_eq!(proof["verified"], true, "{proof}");
            assert_eq!(proof["root_matches"], true, "{proof}");
            assert_eq!(s(&proof, "log_date"), day.date.to_string());
            assert_eq!(s(&proof, "sha256"), leaf.sha);
            assert_eq!(s(&proof, "merkle_root"), day.root.merkle_root);
            assert_eq!(u(&proof, "tree_size"), day.root.entry_count);
            assert_eq!(proof_record(&proof), leaf.record(), "record fields");
            let computed = verify_proof(&key, &root, &proof)
                .unwrap_or_else(|e| panic!("{} {}: {e}", day.date, leaf.sha));
            assert_eq!(computed, leaf.hash());
            assert_eq!(s(&proof, "leaf_hash"), hash_to_hex(&leaf.hash()));
            indexes.insert(u(&proof, "leaf_index"));
            // A proof does not verify under another key.
            assert_eq!(
                verify_proof(&vk(&KEY_B), &root, &proof),
                Err(VerifyError::BadSignature)
            );
        }
        assert_eq!(
            indexes,
            (0..day.leaves.len() as u64).collect(),
            "{}: one index per leaf",
            day.date
        );
    }
    // Upper-case hex names the same file.
    let upper = sha(putty_081_arm64()).to_ascii_uppercase();
    let proof = proof_doc(&app, days[2].date, &upper).await;
    assert_eq!(s(&proof, "sha256"), sha(putty_081_arm64()));
    assert_eq!(proof["root_matches"], true);
    // The duplicated leaf (PuTTY 0.80 amd64 from two vendors) is one leaf with one proof.
    let proof = proof_doc(&app, days[0].date, &sha(mirror_putty_080_amd64())).await;
    assert_eq!(u(&proof, "tree_size"), 3);
    verify_proof(&key, &day_doc(&app, days[0].date).await, &proof).expect("duplicate leaf");
    // Superseded files stay provable on the days they were current.
    proof_doc(&app, days[0].date, &sha(go_1234())).await;
    proof_doc(&app, days[1].date, &sha(putty_080_arm64())).await;
}

async fn route_errors(app: TestApp) {
    let days = three_days(&app).await;
    let member = sha(requests());
    for bad in [
        "2025-3-12",
        "20250312",
        "2025-03-12x",
        "2025-13-01",
        "2025-02-30",
        "12-03-2025",
        "yesterday",
        "%20",
    ] {
        let r = app.get(&format!("/public/transparency/{bad}")).await;
        r.assert_error(400, "bad request");
        let r = app
            .get(&format!("/public/transparency/{bad}/proof?sha256={member}"))
            .await;
        r.assert_error(400, "bad request");
    }
    // The clock is on day 3: day 4 is in the future.
    for future in ["2025-03-13", "2026-01-01"] {
        let r = app.get(&format!("/public/transparency/{future}")).await;
        r.assert_error(400, "bad request");
        assert!(r.message().contains("future"), "{}", r.text);
        app.get(&format!(
            "/public/transparency/{future}/proof?sha256={member}"
        ))
        .await
        .assert_error(400, "bad request");
    }
    // A past day without a root.
    for unknown in ["2025-03-09", "2024-02-29"] {
        app.get(&format!("/public/transparency/{unknown}"))
            .await
            .assert_error(404, "not found");
        app.get(&format!(
            "/public/transparency/{unknown}/proof?sha256={member}"
        ))
        .await
        .assert_error(404, "not found");
    }
    let proof = |q: &str| format!("/public/transparency/{}/proof{q}", days[2].date);
    for bad in [
        "?sha256=",
        "?sha256=xyz",
        &format!("?sha256={}", &member[..63]),
        &format!("?sha256={member}0"),
        &format!("?sha256={}g", &member[..63]),
        &format!("?sha256={}", &member[..40]),
        &format!("?sha256={}", &member[..32]),
    ] {
        app.get(&proof(bad)).await.assert_error(400, "bad request");
    }
    for missing in ["", "?sha=abc", "?sha256"] {
        let r = app.get(&proof(missing)).await;
        r.assert_error(400, "bad request");
    }
    // Well-formed but not in that day's tree: never recorded, or superseded before it.
    for absent in [hex_of(999, 64), sha(putty_080_arm64()), sha(go_1234())] {
        let r = app.get(&proof(&format!("?sha256={absent}"))).await;
        r.assert_error(404, "not found");
        assert!(r.message().contains(&absent), "{}", r.text);
    }
    app.get(&format!(
        "/public/transparency/{}/proof?sha256={}",
        days[0].date,
        sha(requests())
    ))
    .await
    .assert_error(404, "not found");
}

/// A file recorded after the day's root is not in its tree: the proof's 404 says so and
/// names the next day's root (also in the `Knowngood-Next-Root` header), which then holds
/// it. A hash the service does not know, or a superseded one, stays a plain 404.
async fn recorded_after_the_days_root(app: TestApp) {
    let days = three_days(&app).await;
    let next_day = d("2025-03-13");
    let late = pypi("late-package", "1.0.0", 31);
    let late_sha = sha(late.clone());
    app.clock.set(t(&format!("{D3}T10:00:00Z")));
    app.record(late).await;
    let proof_of = |date: NaiveDate, sha256: &str| {
        format!("/public/transparency/{date}/proof?sha256={sha256}")
    };
    let next_root = |r: &testkit::Resp| {
        r.headers
            .get(NEXT_ROOT_HEADER)
            .map(|v| v.to_str().unwrap().to_string())
    };

    let r = app.get(&proof_of(days[2].date, &late_sha)).await;
    r.assert_error(404, "not found");
    assert_eq!(
        r.message(),
        format!("{late_sha} was recorded after the {D3} root; it will be in the {next_day} root")
    );
    assert_eq!(next_root(&r).as_deref(), Some("2025-03-13"));
    // Asked of an earlier day, the root it awaits is the same.
    let r = app.get(&proof_of(days[0].date, &late_sha)).await;
    r.assert_error(404, "not found");
    assert!(
        r.message()
            .contains(&format!("recorded after the {D1} root")),
        "{}",
        r.text
    );
    assert_eq!(next_root(&r).as_deref(), Some("2025-03-13"));
    // Unknown, and superseded before the day: plain.
    for absent in [hex_of(998, 64), sha(putty_080_arm64())] {
        let r = app.get(&proof_of(days[2].date, &absent)).await;
        r.assert_error(404, "not found");
        assert_eq!(r.message(), format!("{absent} is not in the tree of {D3}"));
        assert_eq!(next_root(&r), None, "{absent}");
    }

    // The next day's root holds it; the earlier day's 404 now names that root.
    app.clock.set(t("2025-03-13T08:00:00Z"));
    let root = publish(&app, next_day).await;
    let proof = proof_doc(&app, next_day, &late_sha).await;
    assert_eq!(proof["root_matches"], true, "{proof}");
    verify_proof(&vk(&KEY_A), &day_doc(&app, next_day).await, &proof).expect("late record");
    assert_eq!(u(&proof, "tree_size"), root.entry_count);
    let r = app.get(&proof_of(days[2].date, &late_sha)).await;
    r.assert_error(404, "not found");
    assert_eq!(
        r.message(),
        format!("{late_sha} was recorded after the {D3} root; it is in the {next_day} root")
    );
    assert_eq!(next_root(&r), None);
}

// ---------------------------------------------------------------------------------------
// Append-only storage and tampering
// ---------------------------------------------------------------------------------------

async fn translog_tables_are_append_only(app: TestApp) {
    let days = three_days(&app).await;
    let before_roots = app.store.all_roots().await.unwrap();
    let before_leaves = app.store.leaves(days[0].date).await.unwrap();
    let zeros = bytes(&app, ZEROS);
    for sql in [
        format!("UPDATE translog_roots SET merkle_root = '{ZEROS}' WHERE log_date = '{D1}'"),
        "UPDATE translog_roots SET entry_count = entry_count + 1".to_string(),
        format!("DELETE FROM translog_roots WHERE log_date = '{D3}'"),
        "DELETE FROM translog_roots".to_string(),
        format!("UPDATE translog_entries SET version = '6.6.6' WHERE entered = '{D1}'"),
        format!("UPDATE translog_entries SET leaf_hash = {zeros}"),
        format!("DELETE FROM translog_entries WHERE entered = '{D1}'"),
        "DELETE FROM translog_entries".to_string(),
        format!("UPDATE translog_exits SET last_day = '{D3}'"),
        "DELETE FROM translog_exits".to_string(),
        format!("UPDATE translog_chunk_starts SET leaf_hash = {zeros}"),
        format!("DELETE FROM translog_chunk_starts WHERE log_date = '{D1}'"),
    ]
    .into_iter()
    .chain(
        (app.backend == Backend::Postgres)
            .then(|| {
                [
                    "translog_roots",
                    "translog_entries",
                    "translog_exits",
                    "translog_chunk_starts",
                    "translog_chunks",
                ]
                .map(|table| format!("TRUNCATE {table} CASCADE"))
            })
            .into_iter()
            .flatten(),
    ) {
        let err = raw(&app, &sql)
            .await
            .expect_err(&format!("{sql} must be refused"));
        assert!(err.contains("append-only"), "{sql}: {err}");
    }
    // A second row for a published day is refused too.
    let err = raw(
        &app,
        &format!(
            "INSERT INTO translog_roots (log_date, merkle_root, entry_count, prev_root, \
             signature, key_id, published_at) VALUES ('{D1}', '{ZEROS}', 0, '{ZEROS}', 'x', 'y', \
             '2025-03-10T09:00:00+00:00')"
        ),
    )
    .await
    .expect_err("duplicate day");
    assert!(!err.is_empty());
    // Through the store, publishing over a day keeps the first root and its leaves.
    let forged = StoredRoot {
        merkle_root: ZEROS.into(),
        entry_count: 0,
        ..days[0].root.clone()
    };
    assert_eq!(
        app.store.publish_root(&forged, &[]).await.unwrap(),
        days[0].root
    );
    assert_eq!(app.store.all_roots().await.unwrap(), before_roots);
    assert_eq!(app.store.leaves(days[0].date).await.unwrap(), before_leaves);
    // And the service still proves what it signed.
    let proof = proof_doc(&app, days[0].date, &sha(go_1234())).await;
    assert_eq!(proof["root_matches"], true);
}

async fn tampered_leaf_fields_are_caught(app: TestApp) {
    let days = three_days(&app).await;
    let key = vk(&KEY_A);
    drop_guards(&app).await;
    // Go 1.23.5, which entered on day 2, becomes "1.23.6" in the stored leaf; its leaf
    // hash column is left alone, so the stored tree still folds to the signed root.
    let target = sha(go_1235());
    let n = raw_ok(
        &app,
        &format!(
            "UPDATE translog_entries SET version = '1.23.6' \
             WHERE entered = '{D2}' AND hash_sha256 = {}",
            bytes(&app, &target)
        ),
    )
    .await;
    assert_eq!(n, 1);
    let root = day_doc(&app, days[1].date).await;
    let proof = proof_doc(&app, days[1].date, &target).await;
    assert_eq!(s(&proof["record"], "version"), "1.23.6");
    assert_eq!(proof["verified"], false, "{proof}");
    assert_eq!(proof["root_matches"], false, "{proof}");
    let err = verify_proof(&key, &root, &proof).expect_err("tampered record");
    assert!(
        matches!(err, VerifyError::LeafHashMismatch { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("leaf hash"), "{err}");
    // Untouched leaves of the same day still verify.
    let other = proof_doc(&app, days[1].date, &sha(putty_081_amd64())).await;
    assert_eq!(other["root_matches"], true);
    verify_proof(&key, &root, &other).expect("untouched leaf");
}

async fn replaced_leaf_and_rewritten_root_are_caught(app: TestApp) {
    let days = three_days(&app).await;
    let key = vk(&KEY_A);
    drop_guards(&app).await;

    // Day 3: requests 2.32.0 (which entered then) is replaced by a consistent forged leaf
    // (fields and hash).
    let evil = Leaf {
        name: "requests (pypi)".into(),
        sha: hex_of(666, 64),
        version: "2.32.0".into(),
        platform: "universal".into(),
        arch: "universal".into(),
    };
    let n = raw_ok(
        &app,
        &format!(
            "UPDATE translog_entries SET hash_sha256 = {}, leaf_hash = {} \
             WHERE entered = '{D3}' AND hash_sha256 = {}",
            bytes(&app, &evil.sha),
            bytes(&app, &hash_to_hex(&evil.hash())),
            bytes(&app, &sha(requests()))
        ),
    )
    .await;
    assert_eq!(n, 1);
    let root = day_doc(&app, days[2].date).await;
    let proof = proof_doc(&app, days[2].date, &evil.sha).await;
    assert_eq!(proof_record(&proof), evil.record());
    assert_eq!(proof["root_matches"], false, "{proof}");
    assert_eq!(
        verify_proof(&key, &root, &proof),
        Err(VerifyError::RootMismatch)
    );
    // Every other leaf of the day is now in a tree that is not the signed one either.
    let other = proof_doc(&app, days[2].date, &sha(putty_081_arm64())).await;
    assert_eq!(other["root_matches"], false, "{other}");
    assert_eq!(
        verify_proof(&key, &root, &other),
        Err(VerifyError::RootMismatch)
    );
    app.get(&format!(
        "/public/transparency/{D3}/proof?sha256={}",
        sha(requests())
    ))
    .await
    .assert_error(404, "not found");

    // Day 1: the root row itself is rewritten to the root of a tree without Go 1.23.4.
    let mut fewer = days[0].leaves.clone();
    fewer.retain(|l| l.sha != sha(go_1234()));
    let forged_root = hash_to_hex(&expected_root(&fewer));
    raw_ok(
        &app,
        &format!(
            "UPDATE translog_roots SET merkle_root = '{forged_root}', entry_count = 2 \
             WHERE log_date = '{D1}'"
        ),
    )
    .await;
    let root = day_doc(&app, days[0].date).await;
    assert_eq!(s(&root, "merkle_root"), forged_root);
    assert_eq!(
        signed(&root).verify(&key),
        Err(VerifyError::BadSignature),
        "a rewritten root no longer carries a valid signature"
    );
    let proof = proof_doc(&app, days[0].date, &sha(putty_080_arm64())).await;
    assert_eq!(proof["root_matches"], false, "{proof}");
    assert_eq!(
        verify_proof(&key, &root, &proof),
        Err(VerifyError::BadSignature)
    );
    // Day 2 untouched.
    let proof = proof_doc(&app, days[1].date, &sha(go_1235())).await;
    assert_eq!(proof["root_matches"], true);
    verify_proof(&key, &day_doc(&app, days[1].date).await, &proof).expect("day 2");
}

async fn removed_exit_is_caught(app: TestApp) {
    let days = three_days(&app).await;
    let key = vk(&KEY_A);
    drop_guards(&app).await;
    // Go 1.23.4 left after day 1; without its exit it is back in days 2 and 3.
    let n = raw_ok(
        &app,
        &format!(
            "DELETE FROM translog_exits WHERE last_day = '{D1}' AND leaf_hash = {}",
            bytes(&app, &hash_to_hex(&Leaf::of(&go_1234()).hash()))
        ),
    )
    .await;
    assert_eq!(n, 1);
    for day in &days[1..] {
        let root = day_doc(&app, day.date).await;
        for file in [sha(go_1234()), sha(go_1235())] {
            let proof = proof_doc(&app, day.date, &file).await;
            assert_eq!(proof["root_matches"], false, "{proof}");
            assert_eq!(u(&proof, "tree_size"), day.leaves.len() as u64 + 1);
            assert_eq!(
                verify_proof(&key, &root, &proof),
                Err(VerifyError::TreeSizeMismatch {
                    signed: day.leaves.len() as u64,
                    response: day.leaves.len() as u64 + 1,
                })
            );
        }
    }
    // Day 1 untouched.
    let proof = proof_doc(&app, days[0].date, &sha(go_1234())).await;
    assert_eq!(proof["root_matches"], true);
    verify_proof(&key, &day_doc(&app, days[0].date).await, &proof).expect("day 1");
}

async fn moved_chunk_start_is_caught(app: TestApp) {
    let records = bulk(0, 2 * CHUNK as u64 + 3);
    publish_records(&app, D1, records.clone()).await;
    let leaves = tree_order(&records);
    let key = vk(&KEY_A);
    drop_guards(&app).await;
    // The second chunk now starts one leaf later: its first leaf counts in the first chunk.
    let n = raw_ok(
        &app,
        &format!(
            "UPDATE translog_chunk_starts SET leaf_hash = {} \
             WHERE log_date = '{D1}' AND chunk_index = 1",
            bytes(&app, &hash_to_hex(&leaves[CHUNK + 1].hash()))
        ),
    )
    .await;
    assert_eq!(n, 1);
    let root = day_doc(&app, d(D1)).await;
    for i in [CHUNK, CHUNK + 1, CHUNK + 2] {
        let proof = proof_doc(&app, d(D1), &leaves[i].sha).await;
        assert_eq!(proof["root_matches"], false, "leaf {i}: {proof}");
        assert!(verify_proof(&key, &root, &proof).is_err(), "leaf {i}");
    }
    // The chunks it did not move still prove what was signed.
    for i in [0, 2 * CHUNK + 1] {
        let proof = proof_doc(&app, d(D1), &leaves[i].sha).await;
        assert_eq!(proof["root_matches"], true, "leaf {i}: {proof}");
        assert_eq!(u(&proof, "leaf_index"), i as u64);
        verify_proof(&key, &root, &proof).expect("unmoved chunk");
    }
}

async fn forged_day_is_caught(app: TestApp) {
    let days = three_days(&app).await;
    let key = vk(&KEY_A);
    // A witness keeps the latest checkpoint (three days).
    let witnessed = translog::open_checkpoint(&days[2].checkpoint, CHECKPOINT_ORIGIN, &key)
        .expect("checkpoint");
    assert_eq!(witnessed.tree_size, 3);

    // An intruder inserts a day before the first one, with one leaf of their choice (an
    // entry that leaves after that day, and the day's one chunk), signed with their own key
    // but labelled with the service's key id.
    let evil = Leaf {
        name: "putty.exe".into(),
        sha: hex_of(667, 64),
        version: "0.79".into(),
        platform: "windows".into(),
        arch: "amd64".into(),
    };
    let date = d("2025-03-09");
    let forged = SignedRoot::sign(
        &SigningKey::from_bytes(&ATTACKER),
        date,
        evil.hash(),
        1,
        translog::GENESIS_PREV_ROOT,
    );
    let sql = format!(
        "INSERT INTO translog_roots (log_date, merkle_root, entry_count, prev_root, signature, \
         key_id, published_at) VALUES ('{date}', '{}', 1, '{ZEROS}', '{}', '{}', \
         '2025-03-09T08:00:00+00:00'); \
         INSERT INTO translog_entries (leaf_hash, entered, executable_name, hash_sha256, \
         version, platform, arch) VALUES ({leaf}, '{date}', '{}', {}, '{}', 'windows', \
         'amd64'); \
         INSERT INTO translog_exits (leaf_hash, entered, last_day) \
         VALUES ({leaf}, '{date}', '{date}'); \
         INSERT INTO translog_chunk_starts (log_date, chunk_index, leaf_hash) \
         VALUES ('{date}', 0, {leaf});",
        forged.merkle_root_hex(),
        forged.signature_base64(),
        key_id(&key),
        evil.name,
        bytes(&app, &evil.sha),
        evil.version,
        leaf = bytes(&app, &hash_to_hex(&evil.hash())),
    );
    raw_ok(&app, &sql).await;

    let root = day_doc(&app, date).await;
    assert_eq!(signed(&root).verify(&key), Err(VerifyError::BadSignature));
    let proof = proof_doc(&app, date, &evil.sha).await;
    // The audit path is fine (the one-leaf tree is what the row claims)...
    assert_eq!(proof["verified"], true, "{proof}");
    // ...but the root is not one the service signed.
    assert_eq!(proof["root_matches"], false, "{proof}");
    assert_eq!(
        verify_proof(&key, &root, &proof),
        Err(VerifyError::BadSignature)
    );
    // Day 1 does not chain to it.
    let chain = [signed(&root), signed_stored(&days[0].root)];
    assert_eq!(
        translog::check_chain_links(&chain),
        Err(VerifyError::ChainBroken { date: days[0].date })
    );
    // The root log now holds four leaves with the forgery first: the witness's checkpoint
    // of three days is not a prefix of it.
    let note = app.get("/public/transparency/checkpoint").await.text;
    let now = translog::open_checkpoint(&note, CHECKPOINT_ORIGIN, &key).expect("checkpoint");
    assert_eq!(now.tree_size, 4);
    let c = get_json(&app, "/public/transparency/consistency?first=3&second=4").await;
    let proof: Vec<Hash> = c["proof"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| parse_hash_hex("proof", h.as_str().unwrap()).unwrap())
        .collect();
    assert!(
        translog::verify_consistency(3, 4, &proof, &witnessed.root_hash, &now.root_hash).is_err(),
        "the rewrite of history must not look like an append"
    );
}

// ---------------------------------------------------------------------------------------
// Root log
// ---------------------------------------------------------------------------------------

async fn checkpoint_and_consistency(app: TestApp) {
    let days = three_days(&app).await;
    let key = vk(&KEY_A);
    let index = get_json(&app, "/public/transparency").await;
    let mut docs: Vec<Value> = index["roots"].as_array().unwrap().clone();
    docs.reverse();
    let leaves: Vec<Hash> = docs.iter().map(root_log_leaf).collect();

    // Each day's checkpoint, kept by a witness as it came.
    let mut roots = Vec::new();
    for (i, day) in days.iter().enumerate() {
        let cp = translog::open_checkpoint(&day.checkpoint, CHECKPOINT_ORIGIN, &key)
            .unwrap_or_else(|e| panic!("checkpoint after {}: {e}", day.date));
        assert_eq!(cp.origin, CHECKPOINT_ORIGIN);
        assert_eq!(cp.tree_size, i as u64 + 1, "tree size = number of days");
        assert_eq!(
            cp.root_hash,
            MerkleTree::from_ordered_leaves(leaves[..=i].to_vec()).root(),
            "root over the daily roots in date order"
        );
        assert!(
            translog::open_checkpoint(&day.checkpoint, CHECKPOINT_ORIGIN, &vk(&KEY_B)).is_err(),
            "another key must not open it"
        );
        assert!(translog::open_checkpoint(&day.checkpoint, "other/origin", &key).is_err());
        roots.push(cp.root_hash);
    }
    let latest = app.get("/public/transparency/checkpoint").await;
    assert!(
        latest.content_type().starts_with("text/plain"),
        "{latest:?}"
    );
    assert_eq!(latest.text, days[2].checkpoint);

    for first in 1..=3u64 {
        for second in first..=3u64 {
            let c = get_json(
                &app,
                &format!("/public/transparency/consistency?first={first}&second={second}"),
            )
            .await;
            assert_eq!(u(&c, "first"), first);
            assert_eq!(u(&c, "second"), second);
            let first_root = parse_hash_hex("first_root", s(&c, "first_root")).unwrap();
            let second_root = parse_hash_hex("second_root", s(&c, "second_root")).unwrap();
            assert_eq!(first_root, roots[first as usize - 1]);
            assert_eq!(second_root, roots[second as usize - 1]);
            let proof: Vec<Hash> = c["proof"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| parse_hash_hex("proof", h.as_str().unwrap()).unwrap())
                .collect();
            translog::verify_consistency(first, second, &proof, &first_root, &second_root)
                .unwrap_or_else(|e| panic!("{first}->{second}: {e}"));
            if first < second {
                let mut wrong = roots[first as usize - 1];
                wrong[0] ^= 1;
                assert!(
                    translog::verify_consistency(first, second, &proof, &wrong, &second_root)
                        .is_err()
                );
            }
        }
    }
    for bad in [
        "",
        "?first=1",
        "?second=2",
        "?first=0&second=2",
        "?first=3&second=2",
        "?first=1&second=4",
        "?first=x&second=2",
        "?first=-1&second=2",
    ] {
        app.get(&format!("/public/transparency/consistency{bad}"))
            .await
            .assert_error(400, "bad request");
    }
}

// ---------------------------------------------------------------------------------------
// Key rotation
// ---------------------------------------------------------------------------------------

/// A second server over the same store with its own state (as a replica restarted with a
/// new log key would be).
struct Replica {
    base: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    client: reqwest::Client,
}

impl Replica {
    async fn start(app: &TestApp, log_key: LogKey) -> Self {
        let mut state =
            testkit::app_state(app.store.clone(), app.hasher.clone(), app.clock.clone());
        state.log_key = Arc::new(log_key);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server::serve(listener, server::router(state), async {
            let _ = rx.await;
        }));
        Self {
            base,
            shutdown: Some(tx),
            task,
            client: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("client"),
        }
    }

    async fn get_json(&self, path: &str) -> Value {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request");
        let status = r.status();
        let text = r.text().await.expect("body");
        assert_eq!(status, 200, "{path}: {text}");
        serde_json::from_str(&text).expect("JSON")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.abort();
    }
}

async fn key_rotation_keeps_old_days_verifiable(app: TestApp) {
    let (a, b) = (vk(&KEY_A), vk(&KEY_B));
    app.clock.set(t(&format!("{D1}T08:00:00Z")));
    app.record(putty_080_amd64()).await;
    app.record(go_1234()).await;
    let r1 = publish_with(&app, &KEY_A, d(D1)).await;
    app.clock.set(t(&format!("{D2}T08:00:00Z")));
    app.record(putty_081_amd64()).await;
    let r2 = publish_with(&app, &KEY_B, d(D2)).await;
    assert_eq!(r1.key_id, key_id(&a));
    assert_eq!(r2.key_id, key_id(&b));
    assert_eq!(
        r2.prev_root, r1.merkle_root,
        "the chain crosses the rotation"
    );

    let replica = Replica::start(&app, LogKey::new(&KEY_B)).await;
    for (doc, current) in [
        (get_json(&app, "/public/transparency/key").await, a),
        (replica.get_json("/public/transparency/key").await, b),
    ] {
        assert_eq!(
            parse_public_key_base64(s(&doc, "public_key")).unwrap(),
            current
        );
        assert_eq!(s(&doc, "key_id"), key_id(&current));
        let historical: Vec<(String, String, String)> = doc["historical_keys"]
            .as_array()
            .expect("historical_keys")
            .iter()
            .map(|k| {
                let pk = parse_public_key_base64(s(k, "public_key")).unwrap();
                assert_eq!(key_id(&pk), s(k, "key_id"), "id derived from the key");
                (
                    s(k, "key_id").to_string(),
                    s(k, "first_date").to_string(),
                    s(k, "last_date").to_string(),
                )
            })
            .collect();
        assert_eq!(
            historical,
            [
                (key_id(&a), D1.to_string(), D1.to_string()),
                (key_id(&b), D2.to_string(), D2.to_string()),
            ],
            "{doc}"
        );
    }

    // The day-1 proof from the replica with the new key still matches, with the old key.
    let root1 = replica
        .get_json(&format!("/public/transparency/{D1}"))
        .await;
    let proof1 = replica
        .get_json(&format!(
            "/public/transparency/{D1}/proof?sha256={}",
            sha(go_1234())
        ))
        .await;
    assert_eq!(proof1["root_matches"], true, "{proof1}");
    verify_proof(&a, &root1, &proof1).expect("day 1 under key A");
    assert_eq!(
        verify_proof(&b, &root1, &proof1),
        Err(VerifyError::BadSignature)
    );
    // And the old server proves day 2 with the new key it only knows from the store.
    let root2 = day_doc(&app, d(D2)).await;
    let proof2 = proof_doc(&app, d(D2), &sha(putty_081_amd64())).await;
    assert_eq!(proof2["root_matches"], true, "{proof2}");
    verify_proof(&b, &root2, &proof2).expect("day 2 under key B");
    // Each root verifies with the key its key_id names; the links hold across keys.
    signed(&root1).verify(&a).expect("day 1");
    signed(&root2).verify(&b).expect("day 2");
    translog::check_chain_links(&[signed(&root1), signed(&root2)]).expect("links");
    // The replica's checkpoint is signed with its key.
    let note = replica
        .client
        .get(format!("{}/public/transparency/checkpoint", replica.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let cp = translog::open_checkpoint(&note, CHECKPOINT_ORIGIN, &b).expect("key B");
    assert_eq!(cp.tree_size, 2);
    assert!(translog::open_checkpoint(&note, CHECKPOINT_ORIGIN, &a).is_err());
}

// ---------------------------------------------------------------------------------------
// Days of several chunks
// ---------------------------------------------------------------------------------------

const CHUNK: usize = translog::chunk::CHUNK_LEAVES;

/// `n` distinct files, each the one current record of its own executable.
fn bulk(first: u64, n: u64) -> Vec<NewRecord> {
    (first..first + n)
        .map(|i| {
            rec(
                "Bulk",
                &format!("tool-{i}.exe"),
                "1.0",
                Platform::Windows,
                Arch::Amd64,
                10_000 + i,
            )
        })
        .collect()
}

/// The leaves of `records` in tree order (sorted by leaf hash).
fn tree_order(records: &[NewRecord]) -> Vec<Leaf> {
    let mut leaves: Vec<Leaf> = records.iter().map(Leaf::of).collect();
    leaves.sort_by_key(Leaf::hash);
    leaves.dedup();
    leaves
}

/// Records `records` and publishes `date` over them.
async fn publish_records(app: &TestApp, date: &str, records: Vec<NewRecord>) -> StoredRoot {
    app.clock.set(t(&format!("{date}T08:00:00Z")));
    app.store
        .record_many(records, app.clock.now())
        .await
        .expect("record");
    publish(app, d(date)).await
}

/// The leaves on both sides of every chunk boundary, and the first and last, are proved
/// at their positions in `leaves` (the day's whole tree) and verify against the signed
/// root with the independent verifier.
async fn check_chunk_boundary_proofs(app: &TestApp, date: NaiveDate, leaves: &[Leaf]) {
    let key = vk(&KEY_A);
    let root = day_doc(app, date).await;
    let n = leaves.len();
    let tree = MerkleTree::from_ordered_leaves(leaves.iter().map(Leaf::hash).collect());
    assert_eq!(s(&root, "merkle_root"), hash_to_hex(&tree.root()));
    let mut picks = BTreeSet::from([0, n / 2, n - 1]);
    for boundary in (CHUNK..n).step_by(CHUNK) {
        picks.extend([boundary - 1, boundary, (boundary + 1).min(n - 1)]);
    }
    for i in picks {
        let proof = proof_doc(app, date, &leaves[i].sha).await;
        assert_eq!(u(&proof, "leaf_index"), i as u64, "{date} leaf {i}");
        assert_eq!(u(&proof, "tree_size"), n as u64, "{date} leaf {i}");
        assert_eq!(proof["verified"], true, "{proof}");
        assert_eq!(proof["root_matches"], true, "{proof}");
        let path: Vec<String> = tree
            .inclusion_proof(i)
            .unwrap()
            .iter()
            .map(hash_to_hex)
            .collect();
        assert_eq!(
            proof["audit_path"],
            serde_json::json!(path),
            "{date} leaf {i}"
        );
        assert_eq!(
            verify_proof(&key, &root, &proof),
            Ok(leaves[i].hash()),
            "{date} leaf {i}"
        );
    }
}

async fn proofs_straddling_chunk_boundaries(app: TestApp) {
    // A day one leaf past a chunk, then a day of two full chunks and three leaves.
    let first = bulk(0, CHUNK as u64 + 1);
    let root = publish_records(&app, D1, first.clone()).await;
    assert_eq!(root.entry_count, CHUNK as u64 + 1);
    let second = bulk(CHUNK as u64 + 1, CHUNK as u64 + 2);
    let root = publish_records(&app, D2, second.clone()).await;
    assert_eq!(root.entry_count, 2 * CHUNK as u64 + 3);

    let day1 = tree_order(&first);
    let day2 = tree_order(&[first, second].concat());
    // Publishing stored each day's chunk roots.
    for (date, leaves) in [(D1, &day1), (D2, &day2)] {
        let hashes: Vec<Hash> = leaves.iter().map(Leaf::hash).collect();
        assert_eq!(
            app.store.chunk_roots(d(date)).await.unwrap(),
            translog::chunk::chunk_roots(&hashes),
            "{date}"
        );
    }
    check_chunk_boundary_proofs(&app, d(D1), &day1).await;
    check_chunk_boundary_proofs(&app, d(D2), &day2).await;
    // A file of neither day is still a 404.
    app.get(&format!(
        "/public/transparency/{D2}/proof?sha256={}",
        hex_of(999_999, 64)
    ))
    .await
    .assert_error(404, "not found");
}

async fn days_published_before_chunk_roots_get_them(app: TestApp) {
    let records = bulk(0, 2 * CHUNK as u64 + 3);
    publish_records(&app, D1, records.clone()).await;
    let leaves = tree_order(&records);
    let hashes: Vec<Hash> = leaves.iter().map(Leaf::hash).collect();
    let want = translog::chunk::chunk_roots(&hashes);
    assert_eq!(app.store.chunk_roots(d(D1)).await.unwrap(), want);

    // The chunk roots are append-only like the rest of the log...
    let delete = format!("DELETE FROM translog_chunks WHERE log_date = '{D1}'");
    for sql in [
        delete.clone(),
        format!(
            "UPDATE translog_chunks SET chunk_root = {}",
            bytes(&app, ZEROS)
        ),
    ] {
        let err = raw(&app, &sql)
            .await
            .expect_err(&format!("{sql} must be refused"));
        assert!(err.contains("append-only"), "{sql}: {err}");
    }
    // ...so a day published before they were stored is made by removing the guard.
    let drop = match app.backend {
        Backend::Sqlite => "DROP TRIGGER translog_chunks_no_delete",
        Backend::Postgres => "DROP TRIGGER translog_chunks_no_change ON translog_chunks",
    };
    raw_ok(&app, drop).await;
    assert_eq!(raw_ok(&app, &delete).await, want.len() as u64);
    assert!(app.store.chunk_roots(d(D1)).await.unwrap().is_empty());

    // Its proofs are the same, and the first one stored the day's chunk roots.
    check_chunk_boundary_proofs(&app, d(D1), &leaves).await;
    assert_eq!(app.store.chunk_roots(d(D1)).await.unwrap(), want);
}
