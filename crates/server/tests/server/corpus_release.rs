//! The NSRL release job end to end: `jobs::corpus_release::check_release` fetches a release
//! from a loopback plain-HTTP mirror (the client is injected through the refresh options, as
//! in the vendor refresh tests), imports it into the reference corpus of a temporary data
//! directory, and the tests check what a user notices: `known_file` lookups and the
//! generation on /public/status, what is requested and when, and that a broken release
//! leaves the live generation and no files behind.
//!
//! Releases are synthetic RDS v3 databases (`corpus::synth`, real schema) of a few thousand
//! hashes, zipped the way NIST ships them. The server's clock is frozen and moved by hand.
//!
//! Each test runs as `sqlite::<name>` and `postgres::<name>` (the job's lease lives in the
//! database).

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono::Duration;
use corpus::Layout;
use jobs::corpus_release::{ReleaseCheck, ReleaseSource, STATE_FILE, check_release};
use serde_json::{Value, json};
use testkit::TestApp;

testkit::backend_tests!(
    a_zipped_release_is_imported_and_answers_lookups,
    a_bare_database_is_imported_too,
    an_unchanged_release_is_not_imported_again,
    a_broken_release_leaves_the_live_generation_and_no_files,
    a_release_is_not_requested_before_it_is_due,
    releases_over_the_size_limits_are_refused,
    another_replica_holding_the_job_keeps_this_one_out,
);

const RELEASE_PATH: &str = "/nsrl/RDS_2025.03.1_modern_minimal.zip";
const LAST_MODIFIED: &str = "Mon, 03 Mar 2025 12:00:00 GMT";
const QUARTER: i64 = 90;

// ---------------------------------------------------------------------------------------
// Releases

/// A synthetic RDS v3 database: `n` distinct files made from `seed`.
struct Rds {
    bytes: Vec<u8>,
    seed: u64,
    n: u64,
}

impl Rds {
    fn new(n: u64, seed: u64) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rds.db");
        corpus::synth::write_rds(&path, Layout::Minimal, n, seed).expect("synthetic RDS");
        Self {
            bytes: std::fs::read(&path).expect("read RDS"),
            seed,
            n,
        }
    }

    /// SHA-256, SHA-1 and MD5 (lowercase hex) of the `i`-th file.
    fn hashes(&self, i: u64) -> [String; 3] {
        let h = corpus::synth::hashes_of(self.seed, self.n, i);
        [
            hex::encode(h.sha256),
            hex::encode(h.sha1),
            hex::encode(h.md5),
        ]
    }

    fn sha256(&self, i: u64) -> String {
        let [sha256, _, _] = self.hashes(i);
        sha256
    }
}

/// The mirror's ETag for a body: new bytes, new tag.
fn etag_of(body: &[u8]) -> String {
    use sha2::Digest as _;
    format!("\"{}\"", &hex::encode(sha2::Sha256::digest(body))[..16])
}

fn zip_of(members: &[(&str, &[u8])], method: zip::CompressionMethod) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(method);
    for (name, bytes) in members {
        writer.start_file(*name, options).expect("zip member");
        writer.write_all(bytes).expect("zip write");
    }
    writer.finish().expect("zip finish").into_inner()
}

/// A release as NIST lays it out: a folder with the modern and android databases and a
/// README.
fn release_zip(modern: &Rds, android: &Rds) -> Vec<u8> {
    zip_of(
        &[
            ("RDS_2025.03.1/README.txt", b"NSRL RDS 2025.03.1".as_slice()),
            (
                "RDS_2025.03.1/RDS_2025.03.1_modern_minimal.db",
                &modern.bytes,
            ),
            (
                "RDS_2025.03.1/RDS_2025.03.1_android_minimal.db",
                &android.bytes,
            ),
        ],
        zip::CompressionMethod::Deflated,
    )
}

// ---------------------------------------------------------------------------------------
// The loopback mirror

#[derive(Clone)]
enum Reply {
    /// The bytes with their ETag and a Last-Modified; a request naming the ETag gets 304.
    Release(Vec<u8>),
    /// The bytes without validators.
    Plain(Vec<u8>),
    Status(u16),
}

/// What the mirror was asked.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    if_none_match: Option<String>,
    if_modified_since: Option<String>,
}

#[derive(Clone)]
struct Mirror {
    base: String,
    reply: Arc<Mutex<Reply>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Mirror {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind mirror");
        let mirror = Self {
            base: format!("http://{}", listener.local_addr().expect("mirror address")),
            reply: Arc::new(Mutex::new(Reply::Status(404))),
            seen: Arc::default(),
        };
        let served = mirror.clone();
        let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
            let served = served.clone();
            async move { served.answer(&uri, &headers) }
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        mirror
    }

    fn serve(&self, reply: Reply) {
        *self.reply.lock().unwrap() = reply;
    }

    fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn answer(&self, uri: &Uri, headers: &HeaderMap) -> Response {
        let get = |name| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let seen = Seen {
            path: uri.path().to_string(),
            if_none_match: get(header::IF_NONE_MATCH),
            if_modified_since: get(header::IF_MODIFIED_SINCE),
        };
        self.seen.lock().unwrap().push(seen.clone());
        if seen.path != RELEASE_PATH {
            return StatusCode::NOT_FOUND.into_response();
        }
        let reply = self.reply.lock().unwrap().clone();
        match reply {
            Reply::Release(body) if seen.if_none_match == Some(etag_of(&body)) => {
                (StatusCode::NOT_MODIFIED, [(header::ETAG, etag_of(&body))]).into_response()
            }
            Reply::Release(body) => (
                [
                    (header::CONTENT_TYPE, "application/zip".to_string()),
                    (header::ETAG, etag_of(&body)),
                    (header::LAST_MODIFIED, LAST_MODIFIED.to_string()),
                ],
                body,
            )
                .into_response(),
            Reply::Plain(body) => {
                ([(header::CONTENT_TYPE, "application/octet-stream")], body).into_response()
            }
            Reply::Status(code) => (
                StatusCode::from_u16(code).expect("status"),
                "the mirror is broken",
            )
                .into_response(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// One test's server, data directory and mirror

struct Case {
    app: TestApp,
    mirror: Mirror,
    /// The data directory: the corpus root is `corpus/` in it.
    data: PathBuf,
    key: String,
    _dir: tempfile::TempDir,
}

impl testkit::Fixture for Case {
    type Config = server::Settings;

    fn config() -> server::Settings {
        testkit::test_settings()
    }

    async fn start(scratch: &Arc<testkit::Scratch>, mut settings: server::Settings) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().to_path_buf();
        let corpus = corpus::Corpus::open_with(
            &data.join("corpus"),
            corpus::OpenOptions {
                verify: corpus::Verify::Full,
                memory: corpus::Memory::Mapped,
            },
        )
        .expect("open corpus");
        let mirror = Mirror::start().await;
        let url = format!("{}{RELEASE_PATH}", mirror.base)
            .parse()
            .expect("release URL");
        settings.jobs.corpus_release = Some(ReleaseSource {
            connect_timeout: std::time::Duration::from_secs(10),
            stall_timeout: std::time::Duration::from_secs(10),
            total_timeout: std::time::Duration::from_secs(60),
            ..ReleaseSource::new(url)
        });
        settings.jobs.refresh.client = Some(
            reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("client"),
        );
        let app = TestApp::on(scratch, settings, Some(Arc::new(corpus))).await;
        let key = app.analyst().await;
        Case {
            app,
            mirror,
            data,
            key,
            _dir: dir,
        }
    }

    fn store(&self) -> Arc<dyn store::Store> {
        self.app.store.clone()
    }
}

impl Case {
    async fn check(&self) -> ReleaseCheck {
        check_release(&self.app.state.jobs).await
    }

    /// Checks and expects a new generation; returns its name.
    async fn import(&self) -> String {
        match self.check().await {
            ReleaseCheck::Imported { generation, .. } => generation,
            other => panic!("expected an import, got {other:?}"),
        }
    }

    /// Checks and expects a failure; returns its message.
    async fn fail(&self) -> String {
        match self.check().await {
            ReleaseCheck::Failed { error } => error,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    fn advance_days(&self, days: i64) {
        self.app.clock.advance(Duration::days(days));
    }

    /// `reference_corpus` of /public/status.
    async fn status(&self) -> Value {
        let r = self.app.get("/public/status").await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()["components"]["reference_corpus"].clone()
    }

    async fn live_generation(&self) -> Value {
        self.status().await["generation"].clone()
    }

    /// The lookup result of each hash.
    async fn lookup(&self, hashes: &[String]) -> Vec<Value> {
        let r = self
            .app
            .post_with(
                "/api/v1/intel/lookup",
                &self.key,
                json!({ "hashes": hashes }).to_string(),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        let body = r.json();
        hashes
            .iter()
            .map(|h| body["results"][h.as_str()].clone())
            .collect()
    }

    async fn classifications(&self, hashes: &[String]) -> Vec<String> {
        self.lookup(hashes)
            .await
            .iter()
            .map(|r| r["classification"].as_str().unwrap_or("?").to_string())
            .collect()
    }

    /// Files in the data directory besides the database's, the corpus and the job's state
    /// file, plus anything in the corpus root but its generations and bookkeeping.
    fn strays(&self) -> BTreeSet<String> {
        let names = |dir: &std::path::Path| -> BTreeSet<String> {
            std::fs::read_dir(dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect()
        };
        let mut strays: BTreeSet<String> = names(&self.data)
            .into_iter()
            .filter(|n| n != "corpus" && n != STATE_FILE)
            .collect();
        strays.extend(
            names(&self.data.join("corpus"))
                .into_iter()
                .filter(|n| !n.starts_with("gen-") && n != "CURRENT" && n != "IMPORT.lock")
                .map(|n| format!("corpus/{n}")),
        );
        strays
    }

    /// Generation directories on disk.
    fn generations(&self) -> BTreeSet<String> {
        std::fs::read_dir(self.data.join("corpus"))
            .expect("corpus root")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("gen-"))
            .collect()
    }
}

fn all(value: &str, n: usize) -> Vec<String> {
    vec![value.to_string(); n]
}

// ---------------------------------------------------------------------------------------
// The tests

async fn a_zipped_release_is_imported_and_answers_lookups(case: Case) {
    let (modern, android) = (Rds::new(2000, 1), Rds::new(300, 2));
    case.mirror
        .serve(Reply::Release(release_zip(&modern, &android)));
    let sample = [modern.sha256(0), modern.sha256(1234), android.sha256(299)];
    assert_eq!(case.classifications(&sample).await, all("unknown", 3));
    assert_eq!(case.live_generation().await, Value::Null);

    // Never fetched: due at once.
    let generation = case.import().await;

    let status = case.status().await;
    assert_eq!(status["generation"], json!(generation), "{status}");
    assert_eq!(status["entries"], 2300, "{status}");
    let sources: BTreeSet<&str> = status["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(sources, BTreeSet::from(["nsrl_minimal", "nsrl_android"]));

    // Each database kept its set, named by the member's file name.
    let [sha256, sha1, md5] = modern.hashes(777);
    let results = case
        .lookup(&[sha256, sha1, md5, android.sha256(5), "ab".repeat(32)])
        .await;
    for r in &results[..3] {
        assert_eq!(r["classification"], "known_file", "{r}");
        assert_eq!(r["source"], "nsrl_minimal", "{r}");
        assert!(
            r["file_name"].as_str().is_some_and(|n| !n.is_empty()),
            "{r}"
        );
    }
    assert_eq!(results[3]["classification"], "known_file");
    assert_eq!(results[3]["source"], "nsrl_android");
    assert_eq!(results[4]["classification"], "unknown");

    let requests = case.mirror.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].if_none_match, None);
    assert_eq!(requests[0].if_modified_since, None);
    // The download and the extracted databases are gone.
    assert_eq!(case.strays(), BTreeSet::new());
}

async fn a_bare_database_is_imported_too(case: Case) {
    let rds = Rds::new(1500, 4);
    case.mirror.serve(Reply::Plain(rds.bytes.clone()));
    let generation = case.import().await;
    assert_eq!(case.live_generation().await, json!(generation));
    let results = case.lookup(&[rds.sha256(0), rds.sha256(1499)]).await;
    for r in &results {
        assert_eq!(r["classification"], "known_file", "{r}");
        // The modern set: the URL's file name says so.
        assert_eq!(r["source"], "nsrl_minimal", "{r}");
    }
    assert_eq!(case.strays(), BTreeSet::new());
}

async fn an_unchanged_release_is_not_imported_again(case: Case) {
    let (modern, android) = (Rds::new(2000, 1), Rds::new(300, 2));
    let zip = release_zip(&modern, &android);
    case.mirror.serve(Reply::Release(zip.clone()));
    let first = case.import().await;

    // A quarter later the conditional request says nothing changed.
    case.advance_days(QUARTER);
    assert_eq!(case.check().await, ReleaseCheck::Unchanged);
    let requests = case.mirror.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[1].if_none_match, Some(etag_of(&zip)));
    assert_eq!(
        requests[1].if_modified_since.as_deref(),
        Some(LAST_MODIFIED)
    );
    assert_eq!(case.live_generation().await, json!(first));
    assert_eq!(case.generations(), BTreeSet::from([first.clone()]));

    // A mirror that ignores validators sends the same bytes: still no second import.
    case.mirror.serve(Reply::Plain(zip));
    case.advance_days(QUARTER);
    assert_eq!(case.check().await, ReleaseCheck::Unchanged);
    assert_eq!(case.mirror.requests().len(), 3);
    assert_eq!(case.live_generation().await, json!(first));
    assert_eq!(case.generations(), BTreeSet::from([first]));
    assert_eq!(
        case.classifications(&[modern.sha256(9)]).await,
        ["known_file"]
    );
    assert_eq!(case.strays(), BTreeSet::new());
}

async fn a_broken_release_leaves_the_live_generation_and_no_files(case: Case) {
    let (modern, android) = (Rds::new(2000, 1), Rds::new(300, 2));
    case.mirror
        .serve(Reply::Release(release_zip(&modern, &android)));
    let live = case.import().await;
    let live_hashes = [modern.sha256(3), android.sha256(4)];

    let next = Rds::new(2500, 3);
    let next_zip = release_zip(&next, &android);
    let half_db = &next.bytes[..next.bytes.len() / 2];
    let not_rds = foreign_sqlite().await;
    let broken: Vec<(&str, Reply, &str)> = vec![
        ("HTTP 500", Reply::Status(500), "HTTP 500"),
        (
            "a truncated zip",
            Reply::Plain(next_zip[..next_zip.len() / 2].to_vec()),
            "zip archive",
        ),
        (
            "a truncated database",
            Reply::Plain(zip_of(
                &[("RDS_2025.06.1_modern_minimal.db", half_db)],
                zip::CompressionMethod::Deflated,
            )),
            "NSRL import failed",
        ),
        (
            "an SQLite file that is not RDS",
            Reply::Plain(zip_of(
                &[("RDS_2025.06.1_modern_minimal.db", &not_rds)],
                zip::CompressionMethod::Deflated,
            )),
            "NSRL import failed",
        ),
        (
            "a zip without a database",
            Reply::Plain(zip_of(
                &[("README.txt", b"nothing here".as_slice())],
                zip::CompressionMethod::Deflated,
            )),
            "holds no RDS database",
        ),
        (
            "an HTML page",
            Reply::Plain(b"<html>Access denied</html>".to_vec()),
            "neither a zip archive nor an SQLite database",
        ),
    ];
    case.advance_days(QUARTER);
    for (what, reply, says) in broken {
        case.mirror.serve(reply);
        let asked = case.mirror.requests().len();
        let error = case.fail().await;
        assert!(error.contains(says), "{what}: {error}");
        assert_eq!(case.mirror.requests().len(), asked + 1, "{what}");
        assert_eq!(case.live_generation().await, json!(live), "{what}");
        assert_eq!(
            case.classifications(&live_hashes).await,
            all("known_file", 2),
            "{what}"
        );
        assert_eq!(case.strays(), BTreeSet::new(), "{what}");
        assert_eq!(case.generations(), BTreeSet::from([live.clone()]), "{what}");

        // Not retried at once: a release of many GB is not fetched again every hour.
        let check = case.check().await;
        assert!(
            matches!(check, ReleaseCheck::NotDue { .. }),
            "{what}: {check:?}"
        );
        assert_eq!(case.mirror.requests().len(), asked + 1, "{what}");
        case.advance_days(1);
    }

    // Once the mirror is mended the next check imports the new release.
    case.mirror.serve(Reply::Release(next_zip));
    let generation = case.import().await;
    assert_ne!(generation, live);
    assert_eq!(case.live_generation().await, json!(generation));
    assert_eq!(
        case.classifications(&[next.sha256(2499), modern.sha256(3)])
            .await,
        ["known_file", "unknown"]
    );
    assert_eq!(case.strays(), BTreeSet::new());
}

/// A sound SQLite database that is not an RDS one.
async fn foreign_sqlite() -> Vec<u8> {
    use sqlx::Connection as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("notes.db");
    let mut db = sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=rwc", path.display()))
        .await
        .expect("create SQLite file");
    sqlx::raw_sql(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL); \
         INSERT INTO notes (body) VALUES ('not a hash set');",
    )
    .execute(&mut db)
    .await
    .expect("fill SQLite file");
    db.close().await.expect("close SQLite file");
    std::fs::read(&path).expect("read SQLite file")
}

async fn a_release_is_not_requested_before_it_is_due(case: Case) {
    let (modern, android) = (Rds::new(2000, 1), Rds::new(300, 2));
    case.mirror
        .serve(Reply::Release(release_zip(&modern, &android)));
    case.import().await;
    let due = testkit::start_time() + Duration::days(QUARTER);

    assert_eq!(case.check().await, ReleaseCheck::NotDue { next_at: due });
    case.advance_days(QUARTER - 1);
    assert_eq!(case.check().await, ReleaseCheck::NotDue { next_at: due });
    // Another replica sharing the data directory knows it too (the schedule is on disk).
    let replica = case.app.replica().await;
    assert_eq!(
        check_release(&replica.state.jobs).await,
        ReleaseCheck::NotDue { next_at: due }
    );
    replica.store.close().await;
    assert_eq!(case.mirror.requests().len(), 1);

    case.advance_days(1);
    assert_eq!(case.check().await, ReleaseCheck::Unchanged);
    assert_eq!(case.mirror.requests().len(), 2);
    assert_eq!(
        case.check().await,
        ReleaseCheck::NotDue {
            next_at: due + Duration::days(QUARTER)
        }
    );
}

async fn releases_over_the_size_limits_are_refused(case: Case) {
    let rds = Rds::new(3000, 5);
    let name = "RDS_2025.03.1_modern_minimal.db";
    let deflated = zip_of(&[(name, &rds.bytes)], zip::CompressionMethod::Deflated);
    let stored = zip_of(&[(name, &rds.bytes)], zip::CompressionMethod::Stored);
    // A limit the deflated archive fits under but neither the stored one nor the database.
    let limit = ((deflated.len() + rds.bytes.len()) / 2) as u64;
    assert!(
        (deflated.len() as u64) < limit && limit < rds.bytes.len() as u64,
        "deflated {} stored {} db {}",
        deflated.len(),
        stored.len(),
        rds.bytes.len()
    );
    let mut settings = (*case.app.state.jobs.settings).clone();
    if let Some(source) = settings.corpus_release.as_mut() {
        source.max_download_bytes = limit;
        source.max_extracted_bytes = limit;
    }
    let mut state = case.app.state.jobs.clone();
    state.settings = Arc::new(settings);
    let fail = || async {
        match check_release(&state).await {
            ReleaseCheck::Failed { error } => error,
            other => panic!("expected a failure, got {other:?}"),
        }
    };

    case.mirror.serve(Reply::Release(stored));
    let error = fail().await;
    assert!(error.contains("download limit"), "{error}");
    assert_eq!(case.strays(), BTreeSet::new());

    case.advance_days(1);
    case.mirror.serve(Reply::Release(deflated));
    let error = fail().await;
    assert!(error.contains("extraction limit"), "{error}");
    assert_eq!(case.strays(), BTreeSet::new());
    assert_eq!(case.live_generation().await, Value::Null);
    assert_eq!(case.classifications(&[rds.sha256(0)]).await, ["unknown"]);
}

async fn another_replica_holding_the_job_keeps_this_one_out(case: Case) {
    let (modern, android) = (Rds::new(2000, 1), Rds::new(300, 2));
    case.mirror
        .serve(Reply::Release(release_zip(&modern, &android)));
    let now = testkit::start_time();
    assert!(
        case.app
            .store
            .try_lease("corpus.import", "replica-b", now + Duration::hours(1), now)
            .await
            .expect("lease")
    );
    assert_eq!(case.check().await, ReleaseCheck::Busy);
    assert!(case.mirror.requests().is_empty());
    assert_eq!(case.live_generation().await, Value::Null);

    // The other replica went away; its lease ran out.
    case.app.clock.advance(Duration::hours(2));
    let generation = case.import().await;
    assert_eq!(case.live_generation().await, json!(generation));
    assert_eq!(case.mirror.requests().len(), 1);
}
