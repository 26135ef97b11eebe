//! Durability under SIGKILL on SQLite: a record the store said it committed is there after
//! the process is killed without warning, and the database is intact and writable.
//!
//! The test re-executes its own binary as a writer child (selected by
//! `KNOWNGOOD_KILL_WRITER_DB`), in which two tasks record in a loop and print
//! `COMMITTED <id> <sha256>` after each `record()` returns. The parent reads about 200 of
//! them, SIGKILLs the child mid-write, reopens the database and checks every printed id.
//! It does this for several rounds on the same file, so each writer starts from the WAL a
//! killed one left behind.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader};
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use model::{Arch, HashValue, NewRecord, Platform, RecordSigner, RecordStatus};
use sqlx::{Connection as _, SqliteConnection};
use store::{HistoryQuery, RecordOutcome};

const WRITER_ENV: &str = "KNOWNGOOD_KILL_WRITER_DB";
const ROUND_ENV: &str = "KNOWNGOOD_KILL_WRITER_ROUND";
// The child runs only this test of the suite's binary.
const TEST_NAME: &str = "kill::sigkill_loses_no_committed_record";
const SECRET: &[u8] = b"kill-test-secret";
/// Records to see committed before each kill.
const WANT: usize = 200;
const ROUNDS: u64 = 3;
const WRITERS: u64 = 2;

fn url(path: &str) -> String {
    format!("sqlite://{path}?mode=rwc")
}

/// The SHA-256 of writer `w`'s `n`th record; both are recoverable from it.
fn sha(w: u64, n: u64) -> String {
    format!("{:064x}", (w << 32) | n)
}

fn writer_and_n(sha: &str) -> (u64, u64) {
    let seed = u64::from_str_radix(&sha[48..], 16).expect("seed");
    (seed >> 32, seed & 0xffff_ffff)
}

/// Writer `w`'s `n`th record: every fourth starts a new family, the rest supersede the
/// family's current version (an UPDATE and an INSERT in one transaction).
fn record(w: u64, n: u64) -> NewRecord {
    let family = n / 4;
    let version = format!("{w}.{family}.{n}");
    NewRecord {
        vendor: format!("Vendor{w}"),
        executable_name: format!("tool{w}-{family}-{version}.exe"),
        version,
        platform: Platform::Windows,
        arch: Arch::Amd64,
        hash_sha256: sha(w, n),
        hash_sha1: None,
        hash_md5: None,
        source_url: format!("https://example.invalid/{w}/{n}"),
        download_verified: true,
        sig_signer: None,
        sig_issuer: None,
        sig_serial: None,
        sig_thumbprint: None,
        size: None,
    }
}

fn at(n: u64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(1_750_000_000 + n as i64, 0).expect("timestamp")
}

/// The child: concurrent writers recording until killed.
fn writer(path: &str, round: u64) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let store = store::open(&url(path), RecordSigner::new(SECRET))
            .await
            .expect("writer: open store");
        let tasks: Vec<_> = (0..WRITERS)
            .map(|i| {
                let store = store.clone();
                let w = round * WRITERS + i;
                tokio::spawn(async move {
                    for n in 0.. {
                        let r = record(w, n);
                        let sha = r.hash_sha256.clone();
                        match store.record(r, at(n)).await.expect("writer: record") {
                            RecordOutcome::Inserted { id, .. } => {
                                println!("COMMITTED {id} {sha}");
                            }
                            other => panic!("writer: unexpected {other:?}"),
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("writer task");
        }
    });
}

/// Runs one writer child until it has printed `WANT` records, SIGKILLs it, and adds every
/// record it printed to `committed` (id -> SHA-256).
fn kill_a_writer(path: &str, round: u64, committed: &mut BTreeMap<String, String>) {
    let mut child = Command::new(std::env::current_exe().expect("current exe"))
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env(WRITER_ENV, path)
        .env(ROUND_ENV, round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn writer");

    // Lines are read on a thread so that a stuck child cannot hang the test.
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut printed = 0;
    let mut take = |line: String, printed: &mut usize| {
        if let Some(rest) = line.strip_prefix("COMMITTED ") {
            let (id, sha) = rest.split_once(' ').expect("id and hash");
            committed.insert(id.to_string(), sha.to_string());
            *printed += 1;
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => take(line, &mut printed),
            Err(_) => {
                let _ = child.kill();
                panic!("round {round}: the writer printed too few records within 60 s");
            }
        }
        if printed >= WANT {
            break;
        }
    }

    // SIGKILL, mid-write: the writers never pause.
    child.kill().expect("SIGKILL the writer");
    let status = child.wait().expect("wait for writer");
    assert_eq!(
        status.signal(),
        Some(9),
        "the writer died of SIGKILL: {status:?}"
    );
    // Whatever it printed before dying was committed too.
    reader.join().expect("reader thread");
    for line in rx.try_iter() {
        take(line, &mut printed);
    }
    eprintln!("round {round}: killed the writer after {printed} committed records");
}

/// Reopens the database and checks that every committed record is there and intact, that
/// history is consistent, and that the file passes SQLite's integrity check.
async fn verify(path: &str, committed: &BTreeMap<String, String>) {
    let store = store::open(&url(path), RecordSigner::new(SECRET))
        .await
        .expect("reopen after SIGKILL");

    let hashes: Vec<HashValue> = committed
        .values()
        .map(|s| HashValue::parse(s).expect("hash"))
        .collect();
    let mut found = BTreeMap::new();
    for chunk in hashes.chunks(100) {
        for r in store.find_by_hashes(chunk, true).await.expect("find") {
            found.insert(r.id.clone(), r);
        }
    }
    for (id, sha) in committed {
        let r = found
            .get(id)
            .unwrap_or_else(|| panic!("committed record {id} lost after SIGKILL"));
        assert_eq!(&r.record.hash_sha256, sha);
        assert!(r.integrity_ok, "{id} fails HMAC verification");
    }
    assert_eq!(store.integrity_failures(), 0);

    // History is consistent: one current version per family, each superseded entry
    // closed at its successor's start.
    let families: BTreeSet<(u64, u64)> = committed
        .values()
        .map(|s| writer_and_n(s))
        .map(|(w, n)| (w, n / 4))
        .collect();
    for (w, family) in families {
        let page = store
            .history(&HistoryQuery {
                executable: record(w, family * 4).executable_name,
                platform: None,
                arch: None,
                limit: 200,
                offset: 0,
            })
            .await
            .expect("history");
        assert!(!page.items.is_empty() && page.items.len() <= 4);
        assert_eq!(
            page.items[0].status,
            RecordStatus::Current,
            "writer {w} family {family}"
        );
        assert!(
            page.items[1..]
                .iter()
                .all(|r| r.status == RecordStatus::Superseded),
            "writer {w} family {family}: one current version"
        );
        for pair in page.items.windows(2) {
            assert_eq!(pair[1].valid_until, Some(pair[0].valid_from));
        }
    }
    store.close().await;

    let mut conn = SqliteConnection::connect(&url(path))
        .await
        .expect("raw connect");
    let check: Vec<String> = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_all(&mut conn)
        .await
        .expect("integrity_check");
    assert_eq!(check, ["ok"]);
    conn.close().await.ok();
}

#[test]
fn sigkill_loses_no_committed_record() {
    if let Ok(path) = std::env::var(WRITER_ENV) {
        let round = std::env::var(ROUND_ENV)
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        writer(&path, round);
        return;
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kill.db");
    let path = path.to_str().expect("utf-8 path").to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let mut committed = BTreeMap::new();
    for round in 0..ROUNDS {
        kill_a_writer(&path, round, &mut committed);
        rt.block_on(verify(&path, &committed));
    }
    assert!(committed.len() >= WANT * ROUNDS as usize);

    // Still writable after all that.
    rt.block_on(async {
        let store = store::open(&url(&path), RecordSigner::new(SECRET))
            .await
            .expect("reopen");
        let r = record(99, 0);
        let outcome = store.record(r.clone(), at(0)).await.expect("write");
        let RecordOutcome::Inserted { id, .. } = outcome else {
            panic!("expected Inserted, got {outcome:?}")
        };
        let again = store
            .find_by_hashes(&[HashValue::parse(&r.hash_sha256).unwrap()], false)
            .await
            .expect("find");
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].id, id);
        store.close().await;
    });
}
