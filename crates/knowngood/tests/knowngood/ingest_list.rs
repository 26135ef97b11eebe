//! `knowngood ingest --list`: every vendor channel and distribution, each named in the
//! README's vendor table.

use std::process::{Command, Stdio};

#[test]
fn ingest_list_shows_every_channel_and_the_readme_names_each() {
    let out = Command::new(env!("CARGO_BIN_EXE_knowngood"))
        .args(["ingest", "--list"])
        .env_remove("KNOWNGOOD_CONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    let listed = String::from_utf8(out.stdout).unwrap();
    let ids: Vec<&str> = listed.lines().collect();
    assert!(ids.len() >= 40, "{ids:?}");
    // Three distribution families: Debian (Debian, Ubuntu), Red Hat (Rocky Linux), Arch.
    for family in ["debian", "ubuntu", "rockylinux", "archlinux"] {
        assert!(ids.contains(&family), "{family}");
    }
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let table = readme
        .split("### Vendor records")
        .nth(1)
        .and_then(|s| s.split("\n\n").nth(2))
        .unwrap();
    for id in &ids {
        assert!(
            table.contains(&format!("`{id}`")),
            "{id} missing from the README's vendor table"
        );
    }
}
