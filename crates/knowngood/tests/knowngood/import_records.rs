//! `knowngood admin import-records` with the real binary: a file is checked whole before
//! anything is recorded, recorded in one transaction, and a re-run records nothing twice.

use std::path::Path;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_knowngood");

fn import(data: &Path, file: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .args(["admin", "import-records", "--data-dir"])
        .arg(data)
        .arg(file)
        .env("RUST_LOG", "warn")
        .env_remove("KNOWNGOOD_DATA_DIR")
        .env_remove("KNOWNGOOD_CONFIG")
        .env_remove("KNOWNGOOD_DATABASE_URL")
        .env_remove("KNOWNGOOD_HMAC_SECRET")
        .stdin(Stdio::null())
        .output()
        .expect("run knowngood");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn line(name: &str, version: &str, seed: u8, url: &str) -> String {
    serde_json::json!({
        "vendor": "PuTTY",
        "executable_name": name,
        "version": version,
        "platform": "windows",
        "arch": "amd64",
        "hash_sha256": format!("{seed:02x}").repeat(32),
        "source_url": url,
        "download_verified": false,
    })
    .to_string()
}

fn write(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").expect("write file");
}

#[test]
fn import_is_atomic_validated_and_idempotent() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let file = tmp.path().join("records.jsonl");
    let good = [
        line(
            "putty.exe",
            "0.81",
            1,
            "https://the.earth.li/putty/0.81/putty.exe",
        ),
        line(
            "pscp.exe",
            "0.81",
            2,
            "https://the.earth.li/putty/0.81/pscp.exe",
        ),
    ];

    // Two good lines, then bad ones: each run fails naming the line, and records nothing.
    for (bad, words) in [
        (
            line("plink.exe", "0.81", 3, "http://the.earth.li/plink.exe"),
            &["line 3", "https"][..],
        ),
        (
            line("plink\u{202E}exe.txt", "0.81", 3, "https://x.example/p"),
            &["line 3", "U+202E"][..],
        ),
        (
            line("plink\u{200B}.exe", "0.81", 3, "https://x.example/p"),
            &["line 3", "U+200B"][..],
        ),
        (
            line(&"p".repeat(256), "0.81", 3, "https://x.example/p"),
            &["line 3", "255 bytes"][..],
        ),
        (
            line("plink.exe", "0.81\u{7}", 3, "https://x.example/p"),
            &["line 3", "version"][..],
        ),
        ("{not json".to_string(), &["line 3", "not a record"][..]),
    ] {
        write(&file, &[good[0].clone(), good[1].clone(), bad]);
        let (code, stdout, stderr) = import(&data, &file);
        assert_ne!(code, Some(0), "{stdout}{stderr}");
        for w in words {
            assert!(stderr.contains(w), "error should name {w:?}: {stderr}");
        }
    }
    // Nothing was recorded by the failed runs: the good lines are all new.
    write(&file, &good);
    let (code, stdout, stderr) = import(&data, &file);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("2 recorded, 0 unchanged"), "{stdout}");

    // A re-run, and a replay with an older version after a newer one, record nothing twice.
    let mut more = good.to_vec();
    more.push(line(
        "putty.exe",
        "0.80",
        4,
        "https://the.earth.li/putty/0.80/putty.exe",
    ));
    write(&file, &more);
    let (code, stdout, stderr) = import(&data, &file);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("1 recorded, 2 unchanged"), "{stdout}");
    let (code, stdout, stderr) = import(&data, &file);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("0 recorded, 3 unchanged"), "{stdout}");
}
