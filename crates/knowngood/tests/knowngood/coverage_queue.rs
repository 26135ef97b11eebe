//! The coverage queue from the command line with the real binary: `ingest --from-sbom`
//! queues a bill of materials' versions and records them at once; `ingest --queue` shows
//! each version's state and why a failed one failed. The PyPI channel points at plain HTTP
//! on a closed loopback port (channels fetch over HTTPS only), so recording fails without
//! leaving the machine.

use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_knowngood");

fn knowngood(data: &Path, config: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env("KNOWNGOOD_CONFIG", config)
        .env("RUST_LOG", "warn")
        .env_remove("KNOWNGOOD_DATA_DIR")
        .env_remove("KNOWNGOOD_DATABASE_URL")
        .env_remove("KNOWNGOOD_HMAC_SECRET")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .stdin(Stdio::null())
        .output()
        .expect("run knowngood")
}

/// A port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn from_sbom_queues_and_queue_lists_each_state_with_the_failure() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("knowngood.toml");
    std::fs::write(
        &config,
        format!(
            "[vendors.pypi]\nbase_url = \"http://127.0.0.1:{}\"\n",
            closed_port()
        ),
    )
    .unwrap();
    let sbom = dir.path().join("fleet.cdx.json");
    std::fs::write(
        &sbom,
        serde_json::json!({
            "bomFormat": "CycloneDX",
            "specVersion": "1.6",
            "version": 1,
            "components": [
                {"type": "library", "name": "cffi", "purl": "pkg:pypi/cffi@1.16.0"},
                {"type": "library", "name": "lodash", "purl": "pkg:npm/lodash@4.17.20"},
                {"type": "library", "name": "guava", "purl": "pkg:maven/com.google.guava/guava@33.0.0-jre"},
            ],
        })
        .to_string(),
    )
    .unwrap();

    // Nothing queued yet: an empty list.
    let empty = knowngood(&data, &config, &["ingest", "--queue"]);
    assert!(
        empty.status.success(),
        "{}",
        String::from_utf8_lossy(&empty.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&empty.stdout), "");
    assert!(String::from_utf8_lossy(&empty.stderr).contains("0 queued, 0 done, 0 failed"));

    let sbom_arg = sbom.to_str().unwrap();
    let run = knowngood(
        &data,
        &config,
        &["ingest", "--vendor", "pypi", "--from-sbom", sbom_arg],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains(
            "3 components: 2 queued, 0 already queued, 0 known, 0 refused, 1 not followed"
        ),
        "{stdout}"
    );
    // The PyPI channel could not be reached: the run fails and says so.
    assert!(!run.status.success(), "{stdout}");

    let listed = knowngood(&data, &config, &["ingest", "--queue"]);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let stdout = String::from_utf8_lossy(&listed.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    // npm's channel was not asked to run: still waiting.
    assert_eq!(lines[0], "npm     lodash 4.17.20 queued");
    assert!(
        lines[1].starts_with("pypi    cffi 1.16.0 failed: "),
        "{stdout}"
    );
    assert!(
        lines[1].contains("127.0.0.1"),
        "the failure names what failed: {stdout}"
    );
    assert!(
        String::from_utf8_lossy(&listed.stderr).contains("1 queued, 0 done, 1 failed"),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );

    // Listing takes no other mode.
    let both = knowngood(&data, &config, &["ingest", "--queue", "--list"]);
    assert_eq!(both.status.code(), Some(2));
}
