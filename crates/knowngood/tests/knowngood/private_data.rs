//! What the binary shows and leaves on disk: `--help` never prints a secret taken from the
//! environment, and the data dir, database and secrets it creates are for its user only.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
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

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn bootstrap_creates_its_data_for_its_user_only() {
    let scratch = tempfile::tempdir().unwrap();
    // Looser than the binary's own: the test's umask must not be what makes it pass.
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = scratch.path().join("d");
    let out = knowngood(&["admin", "bootstrap", "--data-dir", data.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(mode(&data), 0o700, "data dir");
    let db = data.join("knowngood.db");
    assert_eq!(mode(&db), 0o600, "database");
    for suffix in ["-wal", "-shm"] {
        let side = data.join(format!("knowngood.db{suffix}"));
        if side.exists() {
            assert_eq!(mode(&side), 0o600, "{}", side.display());
        }
    }
    let secrets = data.join("secrets");
    assert_eq!(mode(&secrets), 0o700, "secrets dir");
    let mut files = 0;
    for entry in std::fs::read_dir(&secrets).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            files += 1;
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }
    assert!(files >= 3, "secrets generated: {files}");
}

#[test]
fn an_open_data_dir_is_named_in_a_warning() {
    let scratch = tempfile::tempdir().unwrap();
    let data = scratch.path().join("open");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = knowngood(&["admin", "bootstrap", "--data-dir", data.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let canonical = data.canonicalize().unwrap();
    assert!(
        stderr.contains("open to group or others")
            && (stderr.contains(data.to_str().unwrap())
                || stderr.contains(canonical.to_str().unwrap())),
        "{stderr}"
    );
    // Left as it was: the operator decides.
    assert_eq!(mode(&data), 0o755);
}
