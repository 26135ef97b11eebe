//! The administrative commands print their result on stdout and no info logs unless
//! `RUST_LOG` asks; `admin add-key` gives an existing account another key.

use std::process::{Command, Output, Stdio};

fn knowngood(data: &std::path::Path, args: &[&str], rust_log: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_knowngood"));
    c.args(args)
        .arg("--data-dir")
        .arg(data)
        .env_remove("KNOWNGOOD_CONFIG")
        .env_remove("KNOWNGOOD_LOG_FORMAT")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    if let Some(level) = rust_log {
        c.env("RUST_LOG", level);
    }
    c.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn admin_commands_print_results_and_add_keys_to_an_account() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    // The result alone: a key on stdout, nothing logged.
    let out = knowngood(&data, &["admin", "bootstrap"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).trim().starts_with("platform."));
    assert!(
        !text(&out.stderr).contains("INFO"),
        "no info logs: {}",
        text(&out.stderr)
    );
    let out = knowngood(
        &data,
        &[
            "admin",
            "create-account",
            "--team",
            "tour-team",
            "--tier",
            "teams",
            "--role",
            "analyst",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let analyst = text(&out.stdout).trim().to_string();
    assert!(analyst.starts_with("tour-team."), "{analyst}");
    assert!(!text(&out.stderr).contains("INFO"), "{}", text(&out.stderr));
    // The same account refuses to be created twice; add-key gives it an account admin.
    let out = knowngood(
        &data,
        &[
            "admin",
            "create-account",
            "--team",
            "tour-team",
            "--tier",
            "teams",
        ],
        None,
    );
    assert!(!out.status.success());
    let out = knowngood(
        &data,
        &[
            "admin",
            "add-key",
            "--team",
            "tour-team",
            "--role",
            "account_admin",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let admin = text(&out.stdout).trim().to_string();
    assert!(
        admin.starts_with("tour-team.") && admin != analyst,
        "{admin}"
    );
    assert_eq!(text(&out.stdout).lines().count(), 1);
    // No such account; a platform role for a customer account.
    let out = knowngood(&data, &["admin", "add-key", "--team", "no-such-team"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no account \"no-such-team\""),
        "{}",
        text(&out.stderr)
    );
    let out = knowngood(
        &data,
        &[
            "admin",
            "add-key",
            "--team",
            "tour-team",
            "--role",
            "platform_admin",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("not a role for a customer account"),
        "{}",
        text(&out.stderr)
    );
    // Asked for, the logs are there.
    let out = knowngood(
        &data,
        &[
            "admin",
            "add-key",
            "--team",
            "tour-team",
            "--role",
            "auditor",
        ],
        Some("info"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("INFO"), "{}", text(&out.stderr));
}
