//! `knowngood scan` and `knowngood lookup` with the real binary against a running server
//! holding a vendor release (current and superseded builds) and a reference corpus, over a
//! directory of known, corpus and unknown files plus paths that cannot be hashed.
//!
//! The tests run as root, which reads any file whatever its mode, so "unreadable" is made
//! real by paths whose open fails for everyone: a dangling symlink and a symlink loop.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use model::{Arch, Platform};
use serde_json::Value;
use testkit::{Backend, Scratch, TestApp};

const BIN: &str = env!("CARGO_BIN_EXE_knowngood");

struct Digests {
    sha256: String,
    sha1: String,
    md5: String,
}

fn digests(bytes: &[u8]) -> Digests {
    let mut buf = vec![0u8; 4096];
    let (d, _) = ingest::hasher::digest_reader(&mut &bytes[..], &mut buf).unwrap();
    Digests {
        sha256: d.sha256,
        sha1: d.sha1,
        md5: d.md5,
    }
}

fn vendor_record(version: &str, d: &Digests) -> model::NewRecord {
    let mut r = testkit::fixtures::rec(
        "PuTTY",
        "putty.exe",
        version,
        Platform::Windows,
        Arch::Amd64,
        1,
    );
    r.hash_sha256 = d.sha256.clone();
    r.hash_sha1 = Some(d.sha1.clone());
    r.hash_md5 = Some(d.md5.clone());
    r
}

struct Fixture {
    app: TestApp,
    key: String,
    dir: tempfile::TempDir,
    _corpus: tempfile::TempDir,
    /// Holds the database: dropping it removes it.
    _scratch: Scratch,
    unknown_sha256: String,
}

async fn fixture(name: &str) -> Option<Fixture> {
    let scratch = Scratch::new(Backend::Sqlite, name).await?;
    let current = b"putty 0.82 build".to_vec();
    let superseded = b"putty 0.81 build".to_vec();
    let in_corpus = b"a file every Windows install has".to_vec();
    let unknown = b"nobody knows this one".to_vec();

    // The reference corpus: one file.
    let corpus_dir = tempfile::tempdir().unwrap();
    let c = digests(&in_corpus);
    let db = corpus_dir.path().join("modern_minimal.db");
    corpus::synth::write_rows(
        &db,
        corpus::Layout::Minimal,
        &[corpus::synth::FileRow {
            sha256: c.sha256.clone(),
            sha1: c.sha1.clone(),
            md5: c.md5.clone(),
            file_name: "kernel32.dll".into(),
            file_size: in_corpus.len() as i64,
            package_id: 1,
        }],
        &[corpus::synth::Package {
            package_id: 1,
            name: "Windows".into(),
            version: "11".into(),
        }],
    )
    .unwrap();
    let root = corpus_dir.path().join("corpus");
    corpus::import(&[(db, corpus::SetName::Modern)], &root, &corpus::NoProgress).unwrap();
    let corpus = Arc::new(corpus::Corpus::open(&root).unwrap());

    let app = TestApp::on(&scratch, testkit::test_settings(), Some(corpus)).await;
    let key = app.analyst().await;
    app.record(vendor_record("0.81", &digests(&superseded)))
        .await;
    app.record(vendor_record("0.82", &digests(&current))).await;

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("putty.exe"), &current).unwrap();
    std::fs::create_dir(p.join("old")).unwrap();
    std::fs::write(p.join("old/putty-0.81.exe"), &superseded).unwrap();
    std::fs::write(p.join("kernel32.dll"), &in_corpus).unwrap();
    std::fs::write(p.join("mystery.bin"), &unknown).unwrap();
    // Unreadable for root too: open fails on a dangling symlink and on a loop.
    std::os::unix::fs::symlink(p.join("missing"), p.join("dangling.lnk")).unwrap();
    std::os::unix::fs::symlink(p.join("loop-b"), p.join("loop-a")).unwrap();
    std::os::unix::fs::symlink(p.join("loop-a"), p.join("loop-b")).unwrap();
    // A symlink to a directory above: not followed.
    std::os::unix::fs::symlink(p, p.join("old/up")).unwrap();
    // A symlink to a known file is hashed as that file.
    std::os::unix::fs::symlink(p.join("putty.exe"), p.join("putty-link.exe")).unwrap();
    let fifo = Command::new("mkfifo").arg(p.join("pipe")).status().unwrap();
    assert!(fifo.success());
    Some(Fixture {
        app,
        key,
        dir,
        _corpus: corpus_dir,
        _scratch: scratch,
        unknown_sha256: digests(&unknown).sha256,
    })
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs the binary off the async threads (the server answers on them).
async fn knowngood(args: Vec<String>, key: Option<&str>, stdin: Option<&str>) -> Run {
    let key = key.map(str::to_owned);
    let stdin = stdin.map(str::to_owned);
    tokio::task::spawn_blocking(move || {
        let mut c = Command::new(BIN);
        c.args(&args)
            .env("RUST_LOG", "warn")
            .env_remove("KNOWNGOOD_API_KEY")
            .env_remove("KNOWNGOOD_SERVER")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(key) = key {
            c.env("KNOWNGOOD_API_KEY", key);
        }
        c.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = c.spawn().unwrap();
        if let Some(text) = stdin {
            use std::io::Write as _;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        let out = child.wait_with_output().unwrap();
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

fn scan_args(f: &Fixture, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["scan".to_string(), "--server".into(), f.app.base.clone()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(f.dir.path().display().to_string());
    args
}

fn row<'a>(rows: &'a [Value], dir: &Path, name: &str) -> &'a Value {
    let path = dir.join(name).display().to_string();
    rows.iter()
        .find(|r| r["path"] == path.as_str())
        .unwrap_or_else(|| panic!("no row for {name}: {rows:?}"))
}

#[tokio::test]
async fn scan_reports_every_path_and_never_stops() {
    let Some(f) = fixture("scan_reports_every_path").await else {
        return;
    };
    let run = knowngood(scan_args(&f, &["--format", "jsonl"]), Some(&f.key), None).await;
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (summary, rows) = lines.split_last().unwrap();
    let dir = f.dir.path();
    let current = row(rows, dir, "putty.exe");
    assert_eq!(current["status"], "known_vendor_release");
    assert_eq!(current["version"], "0.82");
    assert!(current.get("superseded").is_none());
    assert_eq!(current["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(current["sha1"].as_str().unwrap().len(), 40);
    assert_eq!(current["md5"].as_str().unwrap().len(), 32);
    let old = row(rows, dir, "old/putty-0.81.exe");
    assert_eq!(old["status"], "known_vendor_release");
    assert_eq!(old["version"], "0.81");
    assert_eq!(old["superseded"], true);
    assert_eq!(
        row(rows, dir, "putty-link.exe")["status"],
        "known_vendor_release"
    );
    let known = row(rows, dir, "kernel32.dll");
    assert_eq!(known["status"], "known_file");
    assert_eq!(known["file_name"], "kernel32.dll");
    let mystery = row(rows, dir, "mystery.bin");
    assert_eq!(mystery["status"], "unknown");
    assert_eq!(mystery["sha256"], f.unknown_sha256.as_str());
    for name in ["dangling.lnk", "loop-a", "loop-b"] {
        let r = row(rows, dir, name);
        assert_eq!(r["status"], "unreadable", "{name}: {r}");
        assert!(r["reason"].as_str().unwrap().len() > 3);
    }
    assert!(
        row(rows, dir, "loop-a")["reason"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("symbolic links"),
    );
    let pipe = row(rows, dir, "pipe");
    assert_eq!(pipe["status"], "special");
    assert!(pipe["reason"].as_str().unwrap().contains("FIFO"));
    assert_eq!(row(rows, dir, "old/up")["status"], "skipped");
    let s = &summary["summary"];
    assert_eq!(s["known_vendor_release"], 3);
    assert_eq!(s["superseded"], 1);
    assert_eq!(s["known_file"], 1);
    assert_eq!(s["unknown"], 1);
    assert_eq!(s["unreadable"], 3);
    assert_eq!(s["special"], 1);
    assert_eq!(s["skipped"], 1);
    assert_eq!(s["files"], 5);

    // --fail-on-unknown: the same report, then exit 4.
    let run = knowngood(
        scan_args(&f, &["--format", "csv", "--fail-on-unknown"]),
        Some(&f.key),
        None,
    )
    .await;
    assert_eq!(run.code, Some(4), "{}\n{}", run.stdout, run.stderr);
    let mut lines = run.stdout.lines();
    assert!(lines.next().unwrap().starts_with("status,path,size,sha256"));
    assert_eq!(run.stdout.lines().count(), 1 + rows.len());
    assert!(run.stdout.contains(&format!(
        "\"unknown\",\"{}",
        dir.join("mystery.bin").display()
    )));
    assert!(run.stderr.contains("1 unknown"), "{}", run.stderr);

    // The table: a header, one meaning per column, each unknown file named by path, and
    // a summary.
    let run = knowngood(scan_args(&f, &[]), Some(&f.key), None).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["STATUS", "SOURCE", "NAME", "VERSION", "NOTE", "PATH"],
        "{}",
        run.stdout
    );
    // Cells line up under their header.
    let column = |name: &str| lines[0].find(name).unwrap();
    let cells = |file: &str| {
        let line = lines
            .iter()
            .find(|l| l.ends_with(file))
            .unwrap_or_else(|| panic!("no line for {file}: {}", run.stdout));
        let at = |name: &str| {
            line[column(name)..]
                .split("  ")
                .next()
                .unwrap()
                .trim()
                .to_string()
        };
        (
            at("STATUS"),
            at("SOURCE"),
            at("NAME"),
            at("VERSION"),
            at("NOTE"),
        )
    };
    assert_eq!(
        cells("/putty.exe"),
        (
            "known_vendor_release".into(),
            "PuTTY".into(),
            "putty.exe".into(),
            "0.82".into(),
            "-".into()
        )
    );
    let (status, _, _, version, note) = cells("old/putty-0.81.exe");
    assert_eq!(
        (status.as_str(), version.as_str()),
        ("known_vendor_release", "0.81")
    );
    assert_eq!(note, "superseded by a newer release");
    let (status, _, name, _, _) = cells("kernel32.dll");
    assert_eq!(
        (status.as_str(), name.as_str()),
        ("known_file", "kernel32.dll")
    );
    let (status, source, name, version, _) = cells("mystery.bin");
    assert_eq!(
        (
            status.as_str(),
            source.as_str(),
            name.as_str(),
            version.as_str()
        ),
        ("unknown", "-", "-", "-")
    );
    let (status, _, _, _, note) = cells("pipe");
    assert_eq!(status, "special");
    assert!(note.contains("FIFO"), "{note}");
    assert!(lines.last().unwrap().contains("1 unknown"));
    // No progress bar off a terminal.
    assert!(!run.stderr.contains("files/s"), "{}", run.stderr);

    // A path that does not exist is an error, not a row.
    let missing = f.dir.path().join("no-such-dir");
    let run = knowngood(
        vec![
            "scan".into(),
            "--server".into(),
            f.app.base.clone(),
            missing.display().to_string(),
        ],
        Some(&f.key),
        None,
    )
    .await;
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr
            .contains(&format!("{}: no such file or directory", missing.display())),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn the_key_comes_from_the_environment_or_a_file_only() {
    let Some(f) = fixture("scan_key_sources").await else {
        return;
    };
    let run = knowngood(scan_args(&f, &[]), None, None).await;
    assert_eq!(run.code, Some(1));
    assert!(run.stderr.contains("KNOWNGOOD_API_KEY"), "{}", run.stderr);
    // There is no flag for the key itself.
    let run = knowngood(scan_args(&f, &["--key", &f.key]), None, None).await;
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    let key_file = f.dir.path().join("..").join("kg-key-file");
    std::fs::write(&key_file, format!("{}\n", f.key)).unwrap();
    let args = scan_args(&f, &["--key-file", key_file.to_str().unwrap()]);
    let run = knowngood(args, None, None).await;
    std::fs::remove_file(&key_file).unwrap();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    // A bad key is the server's 401, reported.
    let run = knowngood(scan_args(&f, &[]), Some("nope.nope"), None).await;
    assert_eq!(run.code, Some(1));
    assert!(run.stderr.contains("401"), "{}", run.stderr);
}

/// In front of the test server: every other lookup request (the first of each batch) is
/// refused `429` with `Retry-After: 1`, the rest are passed through. Counts both.
#[derive(Clone)]
struct Throttle {
    upstream: String,
    http: reqwest::Client,
    requests: Arc<AtomicUsize>,
    refused: Arc<AtomicUsize>,
}

async fn throttled(
    axum::extract::State(t): axum::extract::State<Throttle>,
    request: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let n = t.requests.fetch_add(1, Ordering::SeqCst);
    if n % 2 == 0 {
        t.refused.fetch_add(1, Ordering::SeqCst);
        return (
            axum::http::StatusCode::TOO_MANY_REQUESTS,
            [(axum::http::header::RETRY_AFTER, "1")],
            axum::Json(serde_json::json!({"error": "rate_limited"})),
        )
            .into_response();
    }
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let mut forward = t.http.request(
        parts.method.clone(),
        format!("{}{}", t.upstream, parts.uri.path()),
    );
    for name in ["x-api-key", "content-type"] {
        if let Some(v) = parts.headers.get(name) {
            forward = forward.header(name, v.as_bytes());
        }
    }
    let answer = forward.body(body).send().await.unwrap();
    let status = answer.status().as_u16();
    let bytes = answer.bytes().await.unwrap();
    (
        axum::http::StatusCode::from_u16(status).unwrap(),
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        bytes,
    )
        .into_response()
}

#[tokio::test]
async fn scan_waits_out_retry_after_and_classifies_every_file() {
    let Some(f) = fixture("scan_retry_after").await else {
        return;
    };
    // 251 distinct files: three batches of lookups, each refused once before it passes.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("putty.exe"), b"putty 0.82 build").unwrap();
    std::fs::write(
        dir.path().join("kernel32.dll"),
        b"a file every Windows install has",
    )
    .unwrap();
    for i in 0..249 {
        std::fs::write(
            dir.path().join(format!("u{i:03}.bin")),
            format!("unknown {i}"),
        )
        .unwrap();
    }
    let throttle = Throttle {
        upstream: f.app.base.clone(),
        http: reqwest::Client::new(),
        requests: Arc::default(),
        refused: Arc::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front = format!("http://{}", listener.local_addr().unwrap());
    let router = axum::Router::new()
        .fallback(throttled)
        .with_state(throttle.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });

    let started = std::time::Instant::now();
    let args = vec![
        "scan".to_string(),
        "--server".into(),
        front,
        "--format".into(),
        "jsonl".into(),
        "--progress-every".into(),
        "1".into(),
        dir.path().display().to_string(),
    ];
    let run = knowngood(args, Some(&f.key), None).await;
    let took = started.elapsed();
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(throttle.refused.load(Ordering::SeqCst), 3);
    assert_eq!(throttle.requests.load(Ordering::SeqCst), 6);
    // Three waits of a second each, each said as a log line (stderr is no terminal).
    assert!(took >= std::time::Duration::from_secs(3), "{took:?}");
    let waits: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("rate limited by the server: waiting 1 s as its Retry-After says"))
        .collect();
    assert_eq!(waits.len(), 3, "{}", run.stderr);
    for line in &waits {
        let stamp = line.split_whitespace().next().unwrap();
        assert!(
            chrono::DateTime::parse_from_rfc3339(stamp).is_ok(),
            "a log line starts with its time: {line}"
        );
    }
    // And a progress line every second meanwhile.
    let progress: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("knowngood scan: 251/251 paths hashed"))
        .collect();
    assert!(progress.len() >= 2, "{}", run.stderr);
    assert!(
        progress.iter().any(|l| l.contains("hashes looked up")),
        "{}",
        run.stderr
    );
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (summary, rows) = lines.split_last().unwrap();
    assert_eq!(rows.len(), 251);
    assert_eq!(
        row(rows, dir.path(), "putty.exe")["status"],
        "known_vendor_release"
    );
    assert_eq!(
        row(rows, dir.path(), "kernel32.dll")["status"],
        "known_file"
    );
    let s = &summary["summary"];
    assert_eq!(s["files"], 251);
    assert_eq!(s["known_vendor_release"], 1);
    assert_eq!(s["known_file"], 1);
    assert_eq!(s["unknown"], 249);
}

#[tokio::test]
async fn lookup_takes_arguments_or_stdin() {
    let Some(f) = fixture("lookup_cli").await else {
        return;
    };
    let known = digests(b"putty 0.82 build");
    let run = knowngood(
        vec![
            "lookup".into(),
            "--server".into(),
            f.app.base.clone(),
            known.sha1.to_uppercase(),
            f.unknown_sha256.clone(),
        ],
        Some(&f.key),
        None,
    )
    .await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout
            .contains(&format!("{}  known_vendor_release", known.sha1))
    );
    assert!(run.stdout.contains("PuTTY putty.exe 0.82"));
    assert!(
        run.stdout
            .contains(&format!("{}  unknown", f.unknown_sha256))
    );
    let run = knowngood(
        vec![
            "lookup".into(),
            "--server".into(),
            f.app.base.clone(),
            "--json".into(),
            "-".into(),
        ],
        Some(&f.key),
        Some(&format!("{}\n{}\n", known.md5, f.unknown_sha256)),
    )
    .await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let answer: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        answer["results"][&known.md5]["classification"],
        "known_vendor_release"
    );
    assert_eq!(
        answer["results"][&f.unknown_sha256]["classification"],
        "unknown"
    );
    let run = knowngood(
        vec![
            "lookup".into(),
            "--server".into(),
            f.app.base.clone(),
            "xyz".into(),
        ],
        Some(&f.key),
        None,
    )
    .await;
    assert_eq!(run.code, Some(1));
    assert!(run.stderr.contains("xyz"), "{}", run.stderr);
}

/// Runs the binary synchronously with no server settings from the environment.
fn offline_run(args: &[&str]) -> Run {
    let out = Command::new(BIN)
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("KNOWNGOOD_API_KEY")
        .env_remove("KNOWNGOOD_DATABASE_URL")
        .env_remove("KNOWNGOOD_CONFIG")
        .env_remove("KNOWNGOOD_DATA_DIR")
        .env_remove("KNOWNGOOD_HMAC_SECRET")
        .env_remove("KNOWNGOOD_LOG_SIGNING_KEY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn offline_bundle_exports_verifies_and_scans_with_no_server() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let data_s = data.to_str().unwrap().to_owned();
    let vendor_file = b"putty 0.82 build".to_vec();
    let corpus_file = b"a file every Windows install has".to_vec();
    let (v, c) = (digests(&vendor_file), digests(&corpus_file));

    // A vendor record, the day's root, and a reference corpus, through the CLI.
    let records = tmp.path().join("records.jsonl");
    let line = serde_json::json!({
        "vendor": "PuTTY", "executable_name": "putty.exe", "version": "0.82",
        "platform": "windows", "arch": "amd64", "hash_sha256": v.sha256,
        "hash_sha1": v.sha1, "hash_md5": v.md5,
        "source_url": "https://the.earth.li/putty.exe", "download_verified": true,
        "sig_signer": null, "sig_issuer": null, "sig_serial": null, "sig_thumbprint": null,
    });
    std::fs::write(&records, format!("{line}\n")).unwrap();
    let r = offline_run(&[
        "admin",
        "import-records",
        "--data-dir",
        &data_s,
        records.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // No root yet: the export says what to do.
    let out = tmp.path().join("bundle");
    let out_s = out.to_str().unwrap().to_owned();
    let r = offline_run(&["bundle", "export", "--data-dir", &data_s, &out_s]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("translog publish"), "{}", r.stderr);
    let r = offline_run(&["translog", "publish", "--data-dir", &data_s]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let db = tmp.path().join("modern_minimal.db");
    corpus::synth::write_rows(
        &db,
        corpus::Layout::Minimal,
        &[corpus::synth::FileRow {
            sha256: c.sha256.clone(),
            sha1: c.sha1.clone(),
            md5: c.md5.clone(),
            file_name: "kernel32.dll".into(),
            file_size: corpus_file.len() as i64,
            package_id: 1,
        }],
        &[corpus::synth::Package {
            package_id: 1,
            name: "Windows".into(),
            version: "11".into(),
        }],
    )
    .unwrap();
    let r = offline_run(&[
        "nsrl",
        "import",
        "--data-dir",
        &data_s,
        db.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let r = offline_run(&["bundle", "export", "--data-dir", &data_s, &out_s]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for name in [
        "manifest.json",
        "manifest.sig",
        "feed.jsonl",
        "root.json",
        "key.json",
        "vendor-sha256.bloom",
        "vendor-sha1.bloom",
        "vendor-md5.bloom",
        "corpus-sha256.bloom",
        "corpus-sha1.bloom",
        "corpus-md5.bloom",
    ] {
        assert!(out.join(name).is_file(), "{name}");
    }
    // Written for the exporting user only, unless --mode says otherwise.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out.join("manifest.json")), 0o600);
    let shared = tmp.path().join("shared-bundle");
    let r = offline_run(&[
        "bundle",
        "export",
        "--data-dir",
        &data_s,
        "--mode",
        "0644",
        shared.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for entry in std::fs::read_dir(&shared).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(mode(&path), 0o644, "{}", path.display());
    }
    assert_eq!(mode(&shared), 0o755);
    let r = offline_run(&[
        "bundle",
        "export",
        "--data-dir",
        &data_s,
        "--mode",
        "rw-r--r--",
        shared.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("not an octal file mode"), "{}", r.stderr);
    let key: Value = serde_json::from_slice(&std::fs::read(out.join("key.json")).unwrap()).unwrap();
    let key = key["public_key"].as_str().unwrap().to_owned();

    let r = offline_run(&["verify", "--bundle", &out_s, "--trust-key", &key]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("bundle verified"), "{}", r.stdout);
    // Another key is refused.
    let other = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
    let r = offline_run(&["verify", "--bundle", &out_s, "--trust-key", other]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);

    // Scan offline: vendor from the feed list, corpus from the filter, unknown.
    let files = tmp.path().join("files");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("putty.exe"), &vendor_file).unwrap();
    std::fs::write(files.join("kernel32.dll"), &corpus_file).unwrap();
    std::fs::write(files.join("mystery.bin"), b"nobody knows").unwrap();
    let scan = |bundle: &str| {
        offline_run(&[
            "scan",
            "--offline",
            bundle,
            "--trust-key",
            &key,
            "--format",
            "jsonl",
            files.to_str().unwrap(),
        ])
    };
    let r = scan(&out_s);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let rows: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        row(&rows, &files, "putty.exe")["status"],
        "known_vendor_release"
    );
    assert_eq!(row(&rows, &files, "putty.exe")["version"], "0.82");
    assert_eq!(row(&rows, &files, "putty.exe")["vendor"], "PuTTY");
    assert_eq!(row(&rows, &files, "kernel32.dll")["status"], "known_file");
    // The table names the vendor, the name and the version, as online.
    let r = offline_run(&[
        "scan",
        "--offline",
        &out_s,
        "--trust-key",
        &key,
        files.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let line = r.stdout.lines().find(|l| l.ends_with("putty.exe")).unwrap();
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        cells[..4],
        ["known_vendor_release", "PuTTY", "putty.exe", "0.82"],
        "{}",
        r.stdout
    );
    assert_eq!(row(&rows, &files, "mystery.bin")["status"], "unknown");

    // Offline --packages: a package version is known from the bundle's feed list.
    let root = tmp.path().join("root");
    dpkg_root(
        &root,
        &[
            (
                "putty",
                "0.82",
                &[
                    ("/usr/bin/putty.exe", &vendor_file),
                    ("/usr/bin/pscp.exe", b"pscp, patched"),
                ],
            ),
            ("other", "1.0-1", &[("/usr/bin/other", b"other")]),
        ],
    );
    let r = offline_run(&[
        "scan",
        "--offline",
        &out_s,
        "--trust-key",
        &key,
        "--format",
        "jsonl",
        "--packages",
        "--packages-root",
        root.to_str().unwrap(),
        root.join("usr").to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let rows: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let bin = root.join("usr/bin");
    assert_eq!(
        row(&rows, &bin, "putty.exe")["status"],
        "known_vendor_release"
    );
    assert_eq!(row(&rows, &bin, "pscp.exe")["status"], "modified");
    assert_eq!(row(&rows, &bin, "other")["status"], "not_covered");
    assert_eq!(row(&rows, &bin, "other")["package_version"], "1.0-1");

    // A tampered bundle is refused before any file is classified.
    let feed = out.join("feed.jsonl");
    let text = std::fs::read_to_string(&feed).unwrap();
    std::fs::write(&feed, text.replace("0.82", "0.99")).unwrap();
    let r = scan(&out_s);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("refused"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    let r = offline_run(&["verify", "--bundle", &out_s, "--trust-key", &key]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("feed.jsonl"), "{}", r.stderr);
}

/// An installed package: name, version, and its files (absolute path, contents).
type DpkgPackage<'a> = (&'a str, &'a str, &'a [(&'a str, &'a [u8])]);

/// A Debian system root for `scan --packages`: dpkg's `status` and `info/*.list` files
/// and the files they list, merged-`/usr` (`bin` is a symlink to `usr/bin`).
/// The words of the `n`th row after the header of a table run's per-package summary.
fn package_table_row(stdout: &str, n: usize) -> Vec<&str> {
    let header = stdout
        .lines()
        .position(|l| l.starts_with("PACKAGE"))
        .unwrap_or_else(|| panic!("{stdout}"));
    stdout
        .lines()
        .nth(header + n)
        .unwrap_or_else(|| panic!("{stdout}"))
        .split_whitespace()
        .collect()
}

fn dpkg_root(root: &Path, packages: &[DpkgPackage]) {
    let info = root.join("var/lib/dpkg/info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
    let mut status = String::new();
    for (name, version, files) in packages {
        status.push_str(&format!(
            "Package: {name}\nStatus: install ok installed\nPriority: optional\nArchitecture: amd64\n\
             Version: {version}\nDescription: {name}\n more text\n\n"
        ));
        let mut list = String::from("/.\n/usr\n/usr/bin\n");
        for (path, bytes) in *files {
            std::fs::write(root.join(path.trim_start_matches('/')), bytes).unwrap();
            list.push_str(&format!("{path}\n"));
        }
        std::fs::write(info.join(format!("{name}.list")), list).unwrap();
    }
    // A package removed but for its configuration owns nothing on disk.
    status.push_str("Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n\n");
    std::fs::write(root.join("var/lib/dpkg/status"), status).unwrap();
}

fn debian_record(package: &str, version: &str, bytes: &[u8]) -> model::NewRecord {
    let d = digests(bytes);
    let mut r = testkit::fixtures::rec(
        "Debian",
        &format!("{package}_{version}_amd64.deb"),
        version,
        Platform::Linux,
        Arch::Amd64,
        1,
    );
    r.hash_sha256 = d.sha256;
    r.hash_sha1 = Some(d.sha1);
    r.hash_md5 = Some(d.md5);
    r
}

#[tokio::test]
async fn scan_packages_tells_modified_from_not_covered() {
    let Some(scratch) = Scratch::new(Backend::Sqlite, "scan_packages").await else {
        return;
    };
    let app = TestApp::on(&scratch, testkit::test_settings(), None).await;
    let key = app.analyst().await;
    // The service knows coreutils 9.1-1+deb12u1 (ls and cat as built) and mawk 1.3.4-1,
    // not the installed mawk 1.3.4-2 nor anything of "tool".
    let (ls, cat) = (b"genuine ls".as_slice(), b"genuine cat".as_slice());
    app.record(debian_record("coreutils", "9.1-1+deb12u1", ls))
        .await;
    app.record(debian_record("coreutils", "9.1-1+deb12u1", cat))
        .await;
    let awk = b"mawk as built for 1.3.4-1".as_slice();
    app.record(debian_record("mawk", "1.3.4-1", awk)).await;

    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let altered_cat = b"genuine cat, with a backdoor".as_slice();
    dpkg_root(
        &root,
        &[
            // dpkg lists /bin/cat; the scan finds it as usr/bin/cat.
            (
                "coreutils",
                "9.1-1+deb12u1",
                &[("/usr/bin/ls", ls), ("/bin/cat", altered_cat)],
            ),
            (
                "mawk",
                "1.3.4-2",
                &[("/usr/bin/mawk", awk), ("/usr/bin/awk-helper", b"helper")],
            ),
            ("tool", "2.0-1", &[("/usr/bin/tool", b"a tool")]),
        ],
    );
    std::fs::write(root.join("usr/bin/stray"), b"owned by no package").unwrap();
    // A symlink no package owns (as alternatives are) counts as the file it points to.
    std::os::unix::fs::symlink("awk-helper", root.join("usr/bin/awk")).unwrap();
    let usr = root.join("usr");
    let args = |extra: &[&str]| {
        let mut a: Vec<String> = vec!["scan".into(), "--server".into(), app.base.clone()];
        a.extend(extra.iter().map(|s| s.to_string()));
        a.push(usr.display().to_string());
        a
    };
    let root_s = root.display().to_string();

    // Without --packages an altered file is only "unknown".
    let run = knowngood(args(&["--format", "jsonl"]), Some(&key), None).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!run.stdout.contains("modified"), "{}", run.stdout);

    let run = knowngood(
        args(&[
            "--format",
            "jsonl",
            "--packages",
            "--packages-root",
            &root_s,
        ]),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_path = |name: &str| {
        let path = usr.join(name).display().to_string();
        lines
            .iter()
            .find(|l| l["path"] == path.as_str())
            .unwrap_or_else(|| panic!("no row for {name}: {}", run.stdout))
    };
    assert_eq!(by_path("bin/ls")["status"], "known_vendor_release");
    let cat_row = by_path("bin/cat");
    assert_eq!(cat_row["status"], "modified", "{cat_row}");
    assert_eq!(cat_row["package"], "coreutils");
    assert_eq!(cat_row["package_version"], "9.1-1+deb12u1");
    // A known file of another version of the package does not make this one known.
    assert_eq!(by_path("bin/mawk")["status"], "known_vendor_release");
    let helper = by_path("bin/awk-helper");
    assert_eq!(helper["status"], "not_covered", "{helper}");
    assert_eq!(helper["package_version"], "1.3.4-2");
    assert_eq!(by_path("bin/awk")["status"], "not_covered");
    assert_eq!(by_path("bin/awk")["package"], "mawk");
    let tool = by_path("bin/tool");
    assert_eq!(tool["status"], "not_covered");
    assert_eq!(tool["package"], "tool");
    assert_eq!(by_path("bin/stray")["status"], "unknown");
    assert!(by_path("bin/stray").get("package").is_none());
    let packages: Vec<&Value> = lines
        .iter()
        .filter_map(|l| l.get("package"))
        .filter(|p| p.is_object())
        .collect();
    assert_eq!(
        packages,
        [
            &serde_json::json!({"package": "coreutils", "version": "9.1-1+deb12u1", "files": 2, "known": 1, "modified": 1, "not_covered": 0}),
            &serde_json::json!({"package": "mawk", "version": "1.3.4-2", "files": 3, "known": 1, "modified": 0, "not_covered": 2}),
            &serde_json::json!({"package": "tool", "version": "2.0-1", "files": 1, "known": 0, "modified": 0, "not_covered": 1}),
        ]
    );
    let summary = &lines.last().unwrap()["summary"];
    assert_eq!(summary["unknown"], 1, "{summary}");
    assert_eq!(summary["modified"], 1);
    assert_eq!(summary["not_covered"], 3);

    // The table names the package and version, and ends with the coverage per package
    // (`--dpkg-root` is the flag's earlier spelling, still accepted).
    let run = knowngood(
        args(&["--packages", "--dpkg-root", &root_s]),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let cat_line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("modified"))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(
        cat_line.contains("coreutils") && cat_line.contains("9.1-1+deb12u1"),
        "{cat_line}"
    );
    assert!(
        cat_line.contains("differs from the genuine build"),
        "{cat_line}"
    );
    let tool_line = package_table_row(&run.stdout, 3);
    assert_eq!(tool_line, ["tool", "2.0-1", "1", "0", "0", "1"]);
    assert!(
        run.stdout.trim_end().ends_with("1 modified, 3 not covered"),
        "{}",
        run.stdout
    );

    // --fail-on-unknown: a modified file is exit 5, not covered alone exit 4.
    let run = knowngood(
        args(&[
            "--packages",
            "--packages-root",
            &root_s,
            "--fail-on-unknown",
        ]),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(run.code, Some(5), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("1 modified file(s)"), "{}", run.stderr);
    let mut only_tool = args(&[
        "--packages",
        "--packages-root",
        &root_s,
        "--fail-on-unknown",
    ]);
    only_tool.pop();
    only_tool.push(usr.join("bin/tool").display().to_string());
    let run = knowngood(only_tool, Some(&key), None).await;
    assert_eq!(run.code, Some(4), "{}\n{}", run.stdout, run.stderr);

    // No package database: said before anything is hashed.
    let bare = tmp.path().join("bare");
    std::fs::create_dir(&bare).unwrap();
    let bare_s = bare.display().to_string();
    let run = knowngood(
        args(&["--packages", "--packages-root", &bare_s]),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr.contains("no package database")
            && run
                .stderr
                .contains(&format!("{bare_s}/var/lib/dpkg/status"))
            && run
                .stderr
                .contains(&format!("{bare_s}/var/lib/rpm/rpmdb.sqlite")),
        "{}",
        run.stderr
    );
}

/// An installed RPM package: name, epoch, version, release, arch, and its files (absolute
/// path, contents).
type RpmPackage<'a> = (
    &'a str,
    Option<u32>,
    &'a str,
    &'a str,
    &'a str,
    &'a [(&'a str, &'a [u8])],
);

/// One header tag: its type and data (`RPM_STRING_TYPE` 6, `RPM_INT32_TYPE` 4,
/// `RPM_STRING_ARRAY_TYPE` 8) and value count.
struct Tag {
    tag: u32,
    kind: u32,
    count: u32,
    data: Vec<u8>,
}

fn string_tag(tag: u32, s: &str) -> Tag {
    let mut data = s.as_bytes().to_vec();
    data.push(0);
    Tag {
        tag,
        kind: 6,
        count: 1,
        data,
    }
}

fn strings_tag(tag: u32, list: &[String]) -> Tag {
    Tag {
        tag,
        kind: 8,
        count: list.len() as u32,
        data: list.iter().flat_map(|s| s.bytes().chain([0])).collect(),
    }
}

fn int32_tag(tag: u32, list: &[u32]) -> Tag {
    Tag {
        tag,
        kind: 4,
        count: list.len() as u32,
        data: list.iter().flat_map(|n| n.to_be_bytes()).collect(),
    }
}

/// A header as rpm stores it in `rpmdb.sqlite`'s `Packages.blob`, laid out as rpm's
/// `headerExport` (lib/header.c) writes it; see the RPM file format
/// (https://rpm-software-management.github.io/rpm/manual/format_v4.html) and its immutable
/// header regions (hregions.md). No 8-byte magic: the index entry count and data length
/// (big-endian `u32`), then 16-byte index entries (tag, type, offset, count), then the data.
/// The package's own tags form the immutable region: its first index entry is
/// `HEADERIMMUTABLE` (63, `RPM_BIN_TYPE` 7, count 16) pointing at a 16-byte trailer after the
/// region's data, whose offset field is minus the region's index size (entries times 16).
/// Tags rpm adds at install time (`INSTALLTIME` 1008, `INSTALLCOLOR` 1127, `INSTALLTID`
/// 1128) follow the region, in the index and in the data. Values are big-endian and aligned
/// to their type (INT32 to 4 bytes); each part's entries are sorted by tag.
fn rpm_header_blob(mut region: Vec<Tag>, mut installed: Vec<Tag>) -> Vec<u8> {
    region.sort_by_key(|t| t.tag);
    installed.sort_by_key(|t| t.tag);
    let mut data: Vec<u8> = Vec::new();
    let mut index: Vec<[u32; 4]> = vec![[0; 4]];
    let place = |t: &Tag, data: &mut Vec<u8>| {
        if t.kind == 4 {
            data.resize(data.len().div_ceil(4) * 4, 0);
        }
        let entry = [t.tag, t.kind, data.len() as u32, t.count];
        data.extend(&t.data);
        entry
    };
    for t in &region {
        index.push(place(t, &mut data));
    }
    // The region: entry and trailer.
    let region_entries = index.len() as i32;
    index[0] = [63, 7, data.len() as u32, 16];
    for v in [63u32, 7, (-(region_entries * 16)) as u32, 16] {
        data.extend(v.to_be_bytes());
    }
    for t in &installed {
        index.push(place(t, &mut data));
    }
    let mut blob = Vec::new();
    blob.extend((index.len() as u32).to_be_bytes());
    blob.extend((data.len() as u32).to_be_bytes());
    for entry in &index {
        for v in entry {
            blob.extend(v.to_be_bytes());
        }
    }
    blob.extend(data);
    blob
}

/// The RPM database a root holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RpmDb {
    /// `rpmdb.sqlite` (RPM 4.16 and later: Rocky Linux 9).
    Sqlite,
    /// BerkeleyDB's `Packages` (RPM 4.15 and older: Rocky Linux 8).
    BerkeleyDb,
}

/// A Rocky Linux root for `scan --packages`: rpm's database (`var/lib/rpm/rpmdb.sqlite` with
/// rpm's `Packages` table as rpm 4.16 and later's sqlite backend creates it, as on Rocky
/// Linux 9; or BerkeleyDB's `var/lib/rpm/Packages`, as on Rocky Linux 8) holding each
/// package's header, the files they list, merged-`/usr` (`bin` is a symlink to `usr/bin`),
/// plus an imported signing key's `gpg-pubkey` entry as rpm keeps it.
fn rpm_root(root: &Path, db: RpmDb, packages: &[RpmPackage]) {
    std::fs::create_dir_all(root.join("var/lib/rpm")).unwrap();
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
    let installed = || {
        vec![
            int32_tag(1008, &[1_700_000_000]),
            int32_tag(1127, &[1]),
            int32_tag(1128, &[1_700_000_000]),
        ]
    };
    let mut blobs = vec![(
        "gpg-pubkey".to_string(),
        rpm_header_blob(
            vec![
                string_tag(1000, "gpg-pubkey"),
                string_tag(1001, "350d275d"),
                string_tag(1002, "6279464b"),
                string_tag(
                    1004,
                    "Rocky Enterprise Software Foundation - Release key 2022",
                ),
            ],
            installed(),
        ),
    )];
    for (name, epoch, version, release, arch, files) in packages {
        // Directories once each, in order of first use; each file names its directory.
        let (mut dirs, mut bases, mut indexes) = (Vec::<String>::new(), Vec::new(), Vec::new());
        for (path, bytes) in *files {
            std::fs::write(root.join(path.trim_start_matches('/')), bytes).unwrap();
            let (dir, base) = path.rsplit_once('/').unwrap();
            let dir = format!("{dir}/");
            let i = dirs.iter().position(|d| *d == dir).unwrap_or_else(|| {
                dirs.push(dir);
                dirs.len() - 1
            });
            indexes.push(i as u32);
            bases.push(base.to_string());
        }
        let mut tags = vec![
            string_tag(1000, name),
            string_tag(1001, version),
            string_tag(1002, release),
            string_tag(1004, &format!("{name}, as installed")),
            string_tag(1022, arch),
            int32_tag(1116, &indexes),
            strings_tag(1117, &bases),
            strings_tag(1118, &dirs),
        ];
        if let Some(e) = epoch {
            tags.push(int32_tag(1003, &[*e]));
        }
        blobs.push((name.to_string(), rpm_header_blob(tags, installed())));
    }
    if db == RpmDb::BerkeleyDb {
        let blobs: Vec<&[u8]> = blobs.iter().map(|(_, b)| b.as_slice()).collect();
        std::fs::write(
            root.join("var/lib/rpm/Packages"),
            testkit::rpmdb::berkeley_packages(4096, false, &blobs),
        )
        .unwrap();
        return;
    }
    let db = rusqlite::Connection::open(root.join("var/lib/rpm/rpmdb.sqlite")).unwrap();
    db.execute_batch(
        "CREATE TABLE 'Packages' (hnum INTEGER PRIMARY KEY AUTOINCREMENT,blob BLOB NOT NULL);
         CREATE TABLE 'Name' (key 'TEXT' NOT NULL, hnum INTEGER NOT NULL, idx INTEGER NOT NULL,
             FOREIGN KEY (hnum) REFERENCES 'Packages'(hnum));",
    )
    .unwrap();
    for (i, (name, blob)) in blobs.iter().enumerate() {
        db.execute("INSERT INTO Packages (blob) VALUES (?1)", [blob])
            .unwrap();
        db.execute(
            "INSERT INTO Name (key, hnum, idx) VALUES (?1, ?2, 0)",
            rusqlite::params![name, i as i64 + 1],
        )
        .unwrap();
    }
}

/// A record of a file of a Rocky Linux package, as ingest makes them from the package's
/// header: the path as its name, `[epoch:]version-release` as its version (the epoch only
/// when not 0), the header's SHA-256 only.
fn rocky_record(package: &str, version: &str, path: &str, bytes: &[u8]) -> model::NewRecord {
    let path = path.trim_start_matches('/');
    let mut r = testkit::fixtures::rec(
        "Rocky Linux",
        path,
        version,
        Platform::Linux,
        Arch::Amd64,
        1,
    );
    r.hash_sha256 = digests(bytes).sha256;
    r.hash_sha1 = None;
    r.hash_md5 = None;
    r.download_verified = false;
    let file_version = version.rsplit(':').next().unwrap();
    r.source_url = format!(
        "https://download.rockylinux.org/pub/rocky/9/BaseOS/x86_64/os/Packages/{}/\
         {package}-{file_version}.x86_64.rpm#{path}",
        &package[..1]
    );
    r
}

#[tokio::test]
async fn scan_packages_reads_the_rpm_database() {
    let Some(scratch) = Scratch::new(Backend::Sqlite, "scan_packages_rpm").await else {
        return;
    };
    let app = TestApp::on(&scratch, testkit::test_settings(), None).await;
    let key = app.analyst().await;
    // The service knows bash 5.1.8-9.el9 and vim-minimal 2:8.2.2637-20.el9_1 (epoch 2, a
    // release with `_`), and coreutils 8.32-33.el9, not the installed 8.32-34.el9, nor
    // anything of "tool".
    let bash = b"genuine bash".as_slice();
    app.record(rocky_record("bash", "5.1.8-9.el9", "/usr/bin/bash", bash))
        .await;
    let bashbug = b"genuine bashbug".as_slice();
    app.record(rocky_record(
        "bash",
        "5.1.8-9.el9",
        "/usr/bin/bashbug",
        bashbug,
    ))
    .await;
    let vi = b"genuine vi".as_slice();
    let vim = "2:8.2.2637-20.el9_1";
    app.record(rocky_record("vim-minimal", vim, "/usr/bin/vi", vi))
        .await;
    let ls = b"ls as built for 8.32-33.el9".as_slice();
    app.record(rocky_record("coreutils", "8.32-33.el9", "/usr/bin/ls", ls))
        .await;

    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let installed: &[RpmPackage] = &[
        (
            "bash",
            None,
            "5.1.8",
            "9.el9",
            "x86_64",
            &[
                ("/usr/bin/bash", bash),
                ("/usr/bin/bashbug", b"genuine bashbug, with a backdoor"),
            ],
        ),
        (
            "vim-minimal",
            Some(2),
            "8.2.2637",
            "20.el9_1",
            "x86_64",
            &[("/usr/bin/vi", vi), ("/usr/bin/rvi", b"rvi, altered")],
        ),
        (
            "coreutils",
            Some(0),
            "8.32",
            "34.el9",
            "x86_64",
            &[("/usr/bin/ls", ls), ("/usr/bin/cat", b"cat of 8.32-34.el9")],
        ),
        (
            "tool",
            None,
            "2.0",
            "1.el9",
            "noarch",
            &[("/usr/bin/tool", b"a tool")],
        ),
    ];
    rpm_root(&root, RpmDb::Sqlite, installed);
    std::fs::write(root.join("usr/bin/stray"), b"owned by no package").unwrap();
    let usr = root.join("usr");
    let args = |extra: &[&str]| {
        let mut a: Vec<String> = vec!["scan".into(), "--server".into(), app.base.clone()];
        a.extend(extra.iter().map(|s| s.to_string()));
        a.push(usr.display().to_string());
        a
    };
    let root_s = root.display().to_string();

    let run = knowngood(
        args(&[
            "--format",
            "jsonl",
            "--packages",
            "--packages-root",
            &root_s,
        ]),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let sqlite_jsonl = run.stdout.clone();
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_path = |name: &str| {
        let path = usr.join(name).display().to_string();
        lines
            .iter()
            .find(|l| l["path"] == path.as_str())
            .unwrap_or_else(|| panic!("no row for {name}: {}", run.stdout))
    };
    assert_eq!(by_path("bin/bash")["status"], "known_vendor_release");
    assert_eq!(by_path("bin/bash")["version"], "5.1.8-9.el9");
    let bashbug = by_path("bin/bashbug");
    assert_eq!(bashbug["status"], "modified", "{bashbug}");
    assert_eq!(bashbug["package"], "bash");
    assert_eq!(bashbug["package_version"], "5.1.8-9.el9");
    // The epoch is part of the installed version, as in the records.
    let rvi = by_path("bin/rvi");
    assert_eq!(rvi["status"], "modified", "{rvi}");
    assert_eq!(rvi["package_version"], vim);
    // A known file of another version of the package does not make this one known; an
    // epoch of 0 is no epoch.
    assert_eq!(by_path("bin/ls")["status"], "known_vendor_release");
    let cat = by_path("bin/cat");
    assert_eq!(cat["status"], "not_covered", "{cat}");
    assert_eq!(cat["package"], "coreutils");
    assert_eq!(cat["package_version"], "8.32-34.el9");
    assert_eq!(by_path("bin/tool")["status"], "not_covered");
    assert_eq!(by_path("bin/tool")["package_version"], "2.0-1.el9");
    assert_eq!(by_path("bin/stray")["status"], "unknown");
    assert!(by_path("bin/stray").get("package").is_none());
    let packages: Vec<&Value> = lines
        .iter()
        .filter_map(|l| l.get("package"))
        .filter(|p| p.is_object())
        .collect();
    assert_eq!(
        packages,
        [
            &serde_json::json!({"package": "bash", "version": "5.1.8-9.el9", "files": 2, "known": 1, "modified": 1, "not_covered": 0}),
            &serde_json::json!({"package": "coreutils", "version": "8.32-34.el9", "files": 2, "known": 1, "modified": 0, "not_covered": 1}),
            &serde_json::json!({"package": "tool", "version": "2.0-1.el9", "files": 1, "known": 0, "modified": 0, "not_covered": 1}),
            &serde_json::json!({"package": "vim-minimal", "version": vim, "files": 2, "known": 1, "modified": 1, "not_covered": 0}),
        ]
    );
    let summary = &lines.last().unwrap()["summary"];
    assert_eq!(summary["unknown"], 1, "{summary}");
    assert_eq!(summary["modified"], 2);
    assert_eq!(summary["not_covered"], 2);

    // The table names the package and version, and ends with the coverage per package.
    let run = knowngood(
        args(&["--packages", "--packages-root", &root_s]),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let bashbug_line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("modified") && l.contains("bashbug"))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(
        bashbug_line.contains("bash") && bashbug_line.contains("5.1.8-9.el9"),
        "{bashbug_line}"
    );
    let tool_line = package_table_row(&run.stdout, 3);
    assert_eq!(tool_line, ["tool", "2.0-1.el9", "1", "0", "0", "1"]);
    assert!(
        run.stdout.trim_end().ends_with("2 modified, 2 not covered"),
        "{}",
        run.stdout
    );

    // A corrupt header: a clear error naming the database, before anything is hashed.
    let db = rusqlite::Connection::open(root.join("var/lib/rpm/rpmdb.sqlite")).unwrap();
    db.execute(
        "INSERT INTO Packages (blob) VALUES (?1)",
        [&[0u8, 0, 0, 9, 0, 0, 0, 1][..]],
    )
    .unwrap();
    drop(db);
    let run = knowngood(
        args(&["--packages", "--packages-root", &root_s]),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr.contains("reading the RPM database")
            && run.stderr.contains("rpmdb.sqlite")
            && run.stderr.contains("package 6"),
        "{}",
        run.stderr
    );

    // Rocky Linux 8's BerkeleyDB database: the same packages, the same answers.
    let rocky8 = tmp.path().join("rocky8");
    rpm_root(&rocky8, RpmDb::BerkeleyDb, installed);
    std::fs::write(rocky8.join("usr/bin/stray"), b"owned by no package").unwrap();
    assert!(!rocky8.join("var/lib/rpm/rpmdb.sqlite").exists());
    let rocky8_s = rocky8.display().to_string();
    let mut rocky8_args = args(&[
        "--format",
        "jsonl",
        "--packages",
        "--packages-root",
        &rocky8_s,
    ]);
    *rocky8_args.last_mut().unwrap() = rocky8.join("usr").display().to_string();
    let run = knowngood(rocky8_args, Some(&key), None).await;
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let rows = |jsonl: &str| -> Vec<Value> {
        jsonl
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|l| l.get("summary").is_none())
            .collect()
    };
    assert_eq!(
        rows(&run.stdout),
        rows(&sqlite_jsonl.replace(&root_s, &rocky8_s)),
        "{}",
        run.stdout
    );
    let summary: Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["summary"]["modified"], 2, "{summary}");
    assert_eq!(summary["summary"]["not_covered"], 2);

    // A corrupt BerkeleyDB file: a clear error naming it.
    let packages = rocky8.join("var/lib/rpm/Packages");
    let mut bytes = std::fs::read(&packages).unwrap();
    bytes.truncate(bytes.len() - 4096);
    std::fs::write(&packages, bytes).unwrap();
    let run = knowngood(
        args(&["--packages", "--packages-root", &rocky8_s]),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert!(
        run.stderr.contains("reading the RPM database")
            && run.stderr.contains("var/lib/rpm/Packages"),
        "{}",
        run.stderr
    );

    // ndb's Packages.db is named, not read.
    let ndb = tmp.path().join("ndb");
    std::fs::create_dir_all(ndb.join("usr/lib/sysimage/rpm")).unwrap();
    std::fs::write(ndb.join("usr/lib/sysimage/rpm/Packages.db"), [0u8; 64]).unwrap();
    let ndb_s = ndb.display().to_string();
    let run = knowngood(
        args(&["--packages", "--packages-root", &ndb_s]),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert!(
        run.stderr.contains("usr/lib/sysimage/rpm/Packages.db")
            && run.stderr.contains("ndb")
            && run.stderr.contains("only rpmdb.sqlite"),
        "{}",
        run.stderr
    );
}
