//! What the binary shows: `--help` never prints a secret taken from the environment.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_knowngood");

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
        .env_remove("KNOWNGOOD_CORPUS_RELEASE_URL")
        .env_remove("KNOWNGOOD_HMAC_SECRET")
        .env_remove("KNOWNGOOD_JWT_PRIVATE_KEY_PEM")
        .env_remove("KNOWNGOOD_LOG_SIGNING_KEY")
        .stdin(Stdio::null());
    c
}

#[test]
fn help_never_shows_a_database_password_from_the_environment() {
    for args in [
        &["serve", "--help"][..],
        &["admin", "bootstrap", "--help"],
        &["ingest", "--help"],
    ] {
        let out = knowngood(args)
            .env(
                "KNOWNGOOD_DATABASE_URL",
                "postgres://kg:S3cretPw@db.internal/knowngood",
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        let shown = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(shown.contains("KNOWNGOOD_DATABASE_URL"), "{shown}");
        assert!(!shown.contains("S3cretPw"), "{args:?}: {shown}");
    }
}
