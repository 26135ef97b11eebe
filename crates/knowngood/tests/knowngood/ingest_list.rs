//! `knowngood ingest --list`: every vendor channel and distribution, each named in the
//! vendor table of docs/vendors.md.

use std::process::{Command, Stdio};

#[test]
fn ingest_list_shows_every_channel_and_the_readme_names_each() {
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_knowngood"))
        .args(["ingest", "--list", "--data-dir"])
        .arg(data.path().join("never-created"))
        .env_remove("KNOWNGOOD_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !data.path().join("never-created/knowngood.db").exists(),
        "listing creates no database"
    );
    let listed = String::from_utf8(out.stdout).unwrap();
    let mut lines = listed.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap()
        .split("  ")
        .filter(|c| !c.is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(header, ["ID", "KIND", "VENDOR", "FOLLOWS", "LAST RESULT"]);
    let rows: Vec<&str> = lines.collect();
    let ids: Vec<&str> = rows
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    // Each channel: its kind, what it follows, its last result (none run here).
    let debian = rows.iter().find(|l| l.starts_with("debian ")).unwrap();
    assert!(debian.contains("distribution"), "{debian}");
    assert!(debian.contains("https://"), "{debian}");
    assert!(debian.trim_end().ends_with("never run"), "{debian}");
    let pypi = rows.iter().find(|l| l.starts_with("pypi ")).unwrap();
    assert!(pypi.contains("package registry"), "{pypi}");
    assert!(ids.len() >= 40, "{ids:?}");
    // Three distribution families: Debian (Debian, Ubuntu), Red Hat (Rocky Linux), Arch.
    for family in ["debian", "ubuntu", "rockylinux", "archlinux"] {
        assert!(ids.contains(&family), "{family}");
    }
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/vendors.md"
    ))
    .unwrap();
    let table: String = doc
        .lines()
        .skip_while(|l| !l.starts_with("| Kind | Channels"))
        .take_while(|l| l.starts_with('|'))
        .collect();
    for id in &ids {
        assert!(
            table.contains(&format!("`{id}`")),
            "{id} missing from the vendor table of docs/vendors.md"
        );
    }
}
