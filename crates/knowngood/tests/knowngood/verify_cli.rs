//! `knowngood verify` end to end with the real binary: records imported and roots published
//! over three consecutive days (`admin import-records`, `translog publish --date`), a real
//! `knowngood serve`, then the verifier against it, online, with `--save`, and offline
//! from saved documents that are then tampered with, one check at a time.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use chrono::{NaiveDate, Utc};
use serde_json::Value;
use testkit::{Backend, Scratch};

const BIN: &str = env!("CARGO_BIN_EXE_knowngood");
const ZEROS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A command of the binary with no configuration from the environment.
fn knowngood(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("RUST_LOG", "warn")
        .env_remove("KNOWNGOOD_DATA_DIR")
        .env_remove("KNOWNGOOD_CONFIG")
        .env_remove("KNOWNGOOD_DATABASE_URL")
        .env_remove("KNOWNGOOD_LISTEN")
        .env_remove("KNOWNGOOD_REDIS_URL")
        .env_remove("KNOWNGOOD_HMAC_SECRET")
        .env_remove("KNOWNGOOD_JWT_PRIVATE_KEY_PEM")
        .env_remove("KNOWNGOOD_LOG_SIGNING_KEY")
        .stdin(Stdio::null());
    c
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn of(out: Output) -> Self {
        Self {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    #[track_caller]
    fn ok(&self, what: &str) -> &Self {
        assert_eq!(
            self.code,
            Some(0),
            "{what} failed\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Asserts a failure whose message contains every one of `words` (case-insensitive).
    #[track_caller]
    fn fails_naming(&self, what: &str, words: &[&str]) -> &Self {
        assert!(
            self.code.is_some_and(|c| c != 0),
            "{what} should fail\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        let err = self.stderr.to_lowercase();
        for w in words {
            assert!(
                err.contains(&w.to_lowercase()),
                "{what}: the error should name {w:?}\nstderr:\n{}",
                self.stderr
            );
        }
        self
    }
}

fn run(args: &[&str]) -> Run {
    Run::of(knowngood(args).output().expect("run knowngood"))
}

/// A record line for `admin import-records`.
fn record_line(name: &str, version: &str, platform: &str, arch: &str, sha: &str) -> String {
    serde_json::json!({
        "vendor": "Example Corp",
        "executable_name": name,
        "version": version,
        "platform": platform,
        "arch": arch,
        "hash_sha256": sha,
        "hash_sha1": null,
        "hash_md5": null,
        "source_url": format!("https://downloads.example/{name}"),
        "download_verified": true,
        "sig_signer": null,
        "sig_issuer": null,
        "sig_serial": null,
        "sig_thumbprint": null,
    })
    .to_string()
}

/// Deterministic, random-looking SHA-256-shaped hex.
fn sha_of(seed: u8) -> String {
    let mut x = u64::from(seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x6b6e_6f77;
    let mut out = String::new();
    while out.len() < 64 {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.push_str(&format!("{:016x}", z ^ (z >> 31)));
    }
    out
}

/// `knowngood serve`, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Status and body of a plain HTTP/1.1 GET.
fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
    Ok((status, body.to_string()))
}

pub(crate) fn serve(data: &Path) -> Server {
    serve_with(data, &[])
}

/// `serve` with more arguments (e.g. `--database-url`).
pub(crate) fn serve_with(data: &Path, more: &[&str]) -> Server {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut args = vec![
        "serve",
        "--listen",
        &addr,
        "--data-dir",
        data.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(more);
    // The vendor channels are unreachable: every outbound HTTPS request goes to a closed
    // loopback port, so the daily refresh of the embedded defaults fails offline.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let child = knowngood(&args)
        .env("HTTPS_PROXY", &closed)
        .env("https_proxy", &closed)
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn knowngood serve");
    let mut server = Server {
        child,
        base: format!("http://{addr}"),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok((200, _)) = http_get(&addr, "/readyz") {
            return server;
        }
        if let Some(status) = server.child.try_wait().expect("try_wait") {
            panic!("knowngood serve exited early: {status}");
        }
        assert!(Instant::now() < deadline, "{addr} never became ready");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The files `--save` writes.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn write_json(path: &Path, v: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// A copy of the saved documents with one of them changed by `edit`.
fn tampered(saved: &Path, dir: &Path, file: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    copy_dir(saved, dir);
    let path = dir.join(file);
    let mut v = read_json(&path);
    edit(&mut v);
    write_json(&path, &v);
    dir.to_path_buf()
}

/// One hex character of `h` changed.
fn flip_hex(h: &str) -> String {
    let mut chars: Vec<char> = h.chars().collect();
    chars[10] = if chars[10] == '0' { '1' } else { '0' };
    chars.into_iter().collect()
}

struct Day {
    date: NaiveDate,
    /// SHA-256 of each leaf of the day.
    shas: Vec<String>,
}

#[test]
fn verify_against_a_real_server_and_offline() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let data_s = data.to_str().unwrap().to_string();
    let today = Utc::now().date_naive();
    let dates = [
        today - chrono::Duration::days(2),
        today - chrono::Duration::days(1),
        today,
    ];

    // Day 1: tool-a 1.0 and tool-b 1.0; day 2: tool-a 1.1 supersedes 1.0, tool-c 1.0 is
    // new; day 3: tool-b 1.1 supersedes 1.0, tool-d 1.0 is new.
    let (a10, b10, a11, c10, b11, d10) = (
        sha_of(1),
        sha_of(2),
        sha_of(3),
        sha_of(4),
        sha_of(5),
        sha_of(6),
    );
    let imports = [
        vec![
            record_line("tool-a", "1.0", "linux", "amd64", &a10),
            record_line("tool-b.exe", "1.0", "windows", "amd64", &b10),
        ],
        vec![
            record_line("tool-a", "1.1", "linux", "amd64", &a11),
            record_line("tool-c", "1.0", "darwin", "arm64", &c10),
        ],
        vec![
            record_line("tool-b.exe", "1.1", "windows", "amd64", &b11),
            record_line("tool-d", "1.0", "universal", "universal", &d10),
        ],
    ];
    let leaves = [
        vec![a10.clone(), b10.clone()],
        vec![a11.clone(), b10.clone(), c10.clone()],
        vec![a11.clone(), c10.clone(), b11.clone(), d10.clone()],
    ];
    let mut days = Vec::new();
    let mut prev_root = ZEROS.to_string();
    for (i, date) in dates.iter().enumerate() {
        let file = tmp.path().join(format!("day{i}.jsonl"));
        std::fs::write(&file, imports[i].join("\n") + "\n").unwrap();
        let r = run(&[
            "admin",
            "import-records",
            "--data-dir",
            &data_s,
            file.to_str().unwrap(),
        ]);
        r.ok("import-records");
        assert!(r.stdout.contains("2 recorded"), "{}", r.stdout);
        let date_s = date.to_string();
        let r = run(&[
            "translog",
            "publish",
            "--data-dir",
            &data_s,
            "--date",
            &date_s,
        ]);
        r.ok("translog publish");
        // "<date> <n> entries root <hex> prev <hex>"
        let words: Vec<&str> = r.stdout.split_whitespace().collect();
        assert_eq!(words.len(), 7, "{}", r.stdout);
        assert_eq!(words[0], date_s);
        assert_eq!(words[1], leaves[i].len().to_string(), "{}", r.stdout);
        assert_eq!(words[6], prev_root, "day {i} chains to the one before");
        prev_root = words[4].to_string();
        // Publishing again prints the same root.
        let again = run(&[
            "translog",
            "publish",
            "--data-dir",
            &data_s,
            "--date",
            &date_s,
        ]);
        again.ok("translog publish again");
        assert_eq!(again.stdout, r.stdout);
        days.push(Day {
            date: *date,
            shas: leaves[i].clone(),
        });
    }

    let server = serve(&data);
    let base = server.base.clone();

    // Every leaf of every day verifies, with the chain two days back.
    for (i, day) in days.iter().enumerate() {
        let date = day.date.to_string();
        for sha in &day.shas {
            let r = run(&[
                "verify", "--server", &base, "--sha256", sha, "--date", &date, "--chain", "2",
            ]);
            r.ok(&format!("verify {sha} on {date}"));
            let lines: Vec<&str> = r.stdout.lines().collect();
            assert_eq!(lines.len(), 4, "{}", r.stdout);
            assert!(lines.iter().all(|l| l.starts_with("ok ")), "{}", r.stdout);
            assert!(
                lines[0].contains(&format!("signature of the {date} root")),
                "{}",
                r.stdout
            );
            assert!(lines[1].starts_with("ok   leaf "), "{}", r.stdout);
            assert!(
                lines[2].contains(&format!("of {}", day.shas.len())),
                "{}",
                r.stdout
            );
            assert!(
                lines[3].contains(&format!("chain of {} roots back to the first day", i + 1)),
                "{}",
                r.stdout
            );
        }
    }
    // Without --date: the latest day.
    let r = run(&["verify", "--server", &base, "--sha256", &d10]);
    r.ok("verify latest");
    assert!(r.stdout.contains(&today.to_string()), "{}", r.stdout);
    // A pinned key: the service's own key passes, any other fails naming the key.
    let addr = base.trim_start_matches("http://");
    let (_, key_text) = http_get(addr, "/public/transparency/key").unwrap();
    let key_doc: serde_json::Value = serde_json::from_str(&key_text).unwrap_or_default();
    let real_key = key_doc["public_key"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!real_key.is_empty(), "{key_doc}");
    let pinned = run(&[
        "verify",
        "--server",
        &base,
        "--sha256",
        &d10,
        "--trust-key",
        &real_key,
    ]);
    pinned.ok("verify with the pinned key");
    assert!(!pinned.stderr.contains("warning"), "{}", pinned.stderr);
    // Without a pinned key it still verifies, and says whose key it trusted.
    let unpinned = run(&["verify", "--server", &base, "--sha256", &d10]);
    unpinned.ok("verify trusting the server's key");
    assert!(
        unpinned.stderr.contains(&format!(
            "warning: no --trust-key given; checking against the key the server publishes ({real_key})"
        )),
        "{}",
        unpinned.stderr
    );
    let other_key = "A".repeat(43) + "=";
    run(&[
        "verify",
        "--server",
        &base,
        "--sha256",
        &d10,
        "--trust-key",
        &other_key,
    ])
    .fails_naming(
        "a root signed by an untrusted key",
        &["key", "not a trusted key"],
    );
    // Upper-case input names the same file.
    let upper = b11.to_ascii_uppercase();
    run(&["verify", "--server", &base, "--sha256", &upper]).ok("upper-case sha256");

    // Not in the tree: never recorded, or superseded before that day.
    let today_s = today.to_string();
    for (sha, date) in [
        (sha_of(99), today_s.clone()),
        (a10.clone(), today_s.clone()),
        (d10.clone(), dates[0].to_string()),
    ] {
        run(&[
            "verify", "--server", &base, "--sha256", &sha, "--date", &date, "--chain", "2",
        ])
        .fails_naming(&format!("{sha} on {date}"), &["inclusion", &sha]);
    }
    // A day without a root.
    let before = (dates[0] - chrono::Duration::days(1)).to_string();
    run(&[
        "verify", "--server", &base, "--sha256", &a10, "--date", &before,
    ])
    .fails_naming("day without a root", &[&before]);

    // --save, then --offline from the saved documents alone.
    let saved = tmp.path().join("saved");
    let saved_s = saved.to_str().unwrap().to_string();
    let online = run(&[
        "verify", "--server", &base, "--sha256", &b11, "--date", &today_s, "--chain", "2",
        "--save", &saved_s,
    ]);
    online.ok("verify --save");
    for f in [
        "key.json".to_string(),
        "proof.json".to_string(),
        format!("root-{}.json", dates[0]),
        format!("root-{}.json", dates[1]),
        format!("root-{}.json", dates[2]),
    ] {
        assert!(saved.join(&f).is_file(), "--save wrote no {f}");
    }
    // The documents of another day, saved for a file of both days.
    let saved_d2 = tmp.path().join("saved-d2");
    run(&[
        "verify",
        "--server",
        &base,
        "--sha256",
        &a11,
        "--date",
        &dates[1].to_string(),
        "--save",
        saved_d2.to_str().unwrap(),
    ])
    .ok("verify day 2 --save");
    drop(server);
    let offline_args = |dir: &str| -> Vec<String> {
        [
            "verify",
            "--offline",
            dir,
            "--sha256",
            &b11,
            "--date",
            &today_s,
            "--chain",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let runv = |args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&refs)
    };
    let offline = runv(offline_args(&saved_s));
    offline.ok("verify --offline (server stopped)");
    assert_eq!(offline.stdout, online.stdout);

    // Tampered documents, each failure naming its check.
    let proof = read_json(&saved.join("proof.json"));
    assert!(
        proof["audit_path"].as_array().unwrap().len() >= 2,
        "{proof}"
    );
    let root_file = format!("root-{today}.json");
    let earlier_file = format!("root-{}.json", dates[1]);
    let first_file = format!("root-{}.json", dates[0]);
    let (first_s, earlier_s) = (dates[0].to_string(), dates[1].to_string());
    let cases: Vec<(&str, PathBuf, Vec<&str>)> = vec![
        (
            "record version",
            tampered(&saved, &tmp.path().join("t-version"), "proof.json", |v| {
                v["record"]["version"] = "9.9".into();
            }),
            vec!["FAILED inclusion", "leaf hash"],
        ),
        (
            "record name",
            tampered(&saved, &tmp.path().join("t-name"), "proof.json", |v| {
                v["record"]["executable_name"] = "tool-evil".into();
            }),
            vec!["FAILED inclusion", "leaf hash"],
        ),
        (
            "record version with the server's leaf hash dropped",
            tampered(
                &saved,
                &tmp.path().join("t-version-nohash"),
                "proof.json",
                |v| {
                    v["record"]["version"] = "9.9".into();
                    v.as_object_mut().unwrap().remove("leaf_hash");
                },
            ),
            vec!["FAILED inclusion", "root"],
        ),
        (
            "audit path hash",
            tampered(&saved, &tmp.path().join("t-path"), "proof.json", |v| {
                let h = v["audit_path"][1].as_str().unwrap().to_string();
                v["audit_path"][1] = flip_hex(&h).into();
            }),
            vec!["FAILED inclusion", "audit path", "root"],
        ),
        (
            "leaf index",
            tampered(&saved, &tmp.path().join("t-index"), "proof.json", |v| {
                let i = v["leaf_index"].as_u64().unwrap();
                v["leaf_index"] = (i ^ 1).into();
            }),
            vec!["FAILED inclusion", "root"],
        ),
        (
            "tree size",
            tampered(&saved, &tmp.path().join("t-size"), "proof.json", |v| {
                v["tree_size"] = 5.into();
            }),
            vec!["FAILED inclusion", "tree_size"],
        ),
        (
            "saved root's merkle_root",
            tampered(&saved, &tmp.path().join("t-root"), &root_file, |v| {
                let h = v["merkle_root"].as_str().unwrap().to_string();
                v["merkle_root"] = flip_hex(&h).into();
            }),
            vec!["FAILED signature", &today_s],
        ),
        (
            "saved root's signature",
            tampered(&saved, &tmp.path().join("t-sig"), &root_file, |v| {
                let other = read_json(&saved.join(&earlier_file));
                v["signature"] = other["signature"].clone();
            }),
            vec!["FAILED signature", &today_s],
        ),
        (
            "saved root's entry_count",
            tampered(&saved, &tmp.path().join("t-count"), &root_file, |v| {
                v["entry_count"] = 5.into();
            }),
            vec!["FAILED signature"],
        ),
        (
            "an earlier day's merkle_root",
            tampered(&saved, &tmp.path().join("t-earlier"), &earlier_file, |v| {
                let h = v["merkle_root"].as_str().unwrap().to_string();
                v["merkle_root"] = flip_hex(&h).into();
            }),
            vec!["FAILED signature", &earlier_s],
        ),
        (
            "the first day's prev_root",
            tampered(&saved, &tmp.path().join("t-first"), &first_file, |v| {
                v["prev_root"] = flip_hex(ZEROS).into();
            }),
            vec!["FAILED signature", &first_s],
        ),
        (
            "an earlier day replaced by another validly signed day",
            tampered(&saved, &tmp.path().join("t-swap"), &first_file, |v| {
                *v = read_json(&saved.join(&earlier_file));
            }),
            vec!["FAILED chain"],
        ),
        (
            "a key that does not match its id",
            tampered(&saved, &tmp.path().join("t-key"), "key.json", |v| {
                let own = v["public_key"].as_str().unwrap().to_string();
                let mut bytes: Vec<char> = own.chars().collect();
                bytes[3] = if bytes[3] == 'A' { 'B' } else { 'A' };
                let swapped: String = bytes.into_iter().collect();
                v["public_key"] = swapped.clone().into();
                for k in v["historical_keys"].as_array_mut().unwrap() {
                    k["public_key"] = swapped.clone().into();
                }
            }),
            vec!["key"],
        ),
    ];
    for (what, dir, words) in cases {
        runv(offline_args(dir.to_str().unwrap())).fails_naming(what, &words);
    }
    // Day 2's signed root and proof passed off as today's: every signature and the path
    // are genuine, but they are not about the day asked.
    let dir = tmp.path().join("t-date");
    copy_dir(&saved_d2, &dir);
    std::fs::copy(
        saved_d2.join(format!("root-{}.json", dates[1])),
        dir.join(&root_file),
    )
    .unwrap();
    run(&[
        "verify",
        "--offline",
        dir.to_str().unwrap(),
        "--sha256",
        &a11,
        "--date",
        &today_s,
    ])
    .fails_naming(
        "another day's root",
        &["FAILED root", &dates[1].to_string()],
    );
    // A chain that skips the tampered days is still fine: --chain 0 ignores earlier roots.
    let dir = tmp.path().join("t-earlier");
    let mut args = offline_args(dir.to_str().unwrap());
    args.truncate(7);
    runv(args).ok("offline without the chain");
}

/// A file recorded after the latest root: `verify` says it is not yet in a signed root,
/// names the root it will be in and exits 3, while a hash never recorded fails with 1.
/// Once that root is published the file verifies, and the earlier day's failure names it.
/// On SQLite, and on PostgreSQL when its test URL is set.
#[test]
fn a_file_recorded_after_the_root_awaits_the_next_one() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        awaits_the_next_root(backend);
    }
}

fn awaits_the_next_root(backend: Backend) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let name = "verify_cli::a_file_recorded_after_the_root_awaits_the_next_one";
    let Some(scratch) = runtime.block_on(Scratch::new(backend, name)) else {
        return;
    };
    let db_url = runtime.block_on(scratch.new_url());
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let data_s = data.to_str().unwrap().to_string();
    let db = [
        "--data-dir",
        data_s.as_str(),
        "--database-url",
        db_url.as_str(),
    ];
    let with_db = |args: &[&str]| -> Run {
        let mut all = args.to_vec();
        all.extend_from_slice(&db);
        run(&all)
    };
    let today = Utc::now().date_naive();
    let yesterday = (today - chrono::Duration::days(1)).to_string();
    let today_s = today.to_string();
    let import = |i: u8, name: &str, sha: &str| {
        let file = tmp.path().join(format!("import{i}.jsonl"));
        std::fs::write(
            &file,
            record_line(name, "1.0", "linux", "amd64", sha) + "\n",
        )
        .unwrap();
        with_db(&["admin", "import-records", file.to_str().unwrap()]).ok("import-records");
    };
    let (early, late) = (sha_of(41), sha_of(42));
    import(0, "tool-early", &early);
    with_db(&["translog", "publish", "--date", &yesterday]).ok("publish yesterday");
    import(1, "tool-late", &late);

    let server = serve_with(&data, &["--database-url", &db_url]);
    let base = server.base.clone();
    let verify = |sha: &str, more: &[&str]| {
        let mut args = vec!["verify", "--server", base.as_str(), "--sha256", sha];
        args.extend_from_slice(more);
        run(&args)
    };
    verify(&early, &[]).ok("the early file");
    let r = verify(&late, &[]);
    assert_eq!(
        r.code,
        Some(3),
        "a late file is not a failure\nstdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    assert!(
        r.stderr.contains(&format!(
            "not yet in a signed root: recorded after the {yesterday} root; it will be in the {today_s} root"
        )),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("FAILED"), "{}", r.stderr);
    let r = verify(&sha_of(43), &[]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    r.fails_naming("a file never recorded", &["FAILED inclusion", &sha_of(43)]);
    assert!(!r.stderr.contains("not yet"), "{}", r.stderr);

    // Today's root holds it.
    with_db(&["translog", "publish"]).ok("publish today");
    verify(&late, &["--chain", "1"]).ok("the late file in today's root");
    let r = verify(&late, &["--date", &yesterday]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    r.fails_naming(
        "the late file in yesterday's root",
        &["FAILED inclusion", &format!("it is in the {today_s} root")],
    );
    drop(server);
    runtime.block_on(scratch.cleanup());
}
