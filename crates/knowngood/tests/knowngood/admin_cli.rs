//! The administrative commands print their result on stdout and no info logs unless
//! `RUST_LOG` asks; `admin add-key` gives an existing account another key, `admin invite`
//! a person whose code the running service redeems.

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

/// Status and body of a JSON POST to `base` (`http://host:port`).
fn post_json(base: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (
        status,
        text.split_once("\r\n\r\n")
            .map(|x| x.1)
            .unwrap_or("")
            .to_string(),
    )
}

#[test]
fn admin_invite_adds_a_person_to_an_existing_account() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let invite = |args: &[&str]| {
        let mut all = vec!["admin", "invite"];
        all.extend_from_slice(args);
        knowngood(&data, &all, None)
    };
    // No such account yet.
    let out = invite(&[
        "--team",
        "soc",
        "--name",
        "Ana",
        "--contact",
        "ana@example.org",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no account \"soc\""),
        "{}",
        text(&out.stderr)
    );
    let out = knowngood(
        &data,
        &[
            "admin",
            "create-account",
            "--team",
            "soc",
            "--tier",
            "teams",
            "--role",
            "analyst",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    // A platform role, an empty name: refused, nothing printed on stdout.
    let out = invite(&[
        "--team",
        "soc",
        "--role",
        "platform_admin",
        "--name",
        "Ana",
        "--contact",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).is_empty());
    let out = invite(&[
        "--team",
        "soc",
        "--name",
        " ",
        "--contact",
        "ana@example.org",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("display_name"),
        "{}",
        text(&out.stderr)
    );

    let out = invite(&[
        "--team",
        "soc",
        "--role",
        "auditor",
        "--name",
        "Ana",
        "--contact",
        "ana@example.org",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let code = text(&out.stdout).trim().to_string();
    assert_eq!(
        text(&out.stdout).lines().count(),
        1,
        "the code alone on stdout"
    );
    let said = text(&out.stderr);
    assert!(
        said.contains("Ana (auditor) in soc") && said.contains("/console/invite"),
        "{said}"
    );

    // The running service redeems it once, into the account with the invited role.
    let server = crate::verify_cli::serve(&data);
    let (status, body) = post_json(
        &server.base,
        "/api/v1/auth/invite",
        &format!("{{\"code\":\"{code}\"}}"),
    );
    assert_eq!(status, 200, "{body}");
    let token: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        token["token"].as_str().is_some_and(|t| !t.is_empty()),
        "{body}"
    );
    let (status, _) = post_json(
        &server.base,
        "/api/v1/auth/invite",
        &format!("{{\"code\":\"{code}\"}}"),
    );
    assert_eq!(status, 401, "an invite code works once");
}
