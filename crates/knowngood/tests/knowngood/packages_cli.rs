//! Package intelligence through the real binary: `advisories import` (a JSON document and
//! an OSV-style `all.zip`), `packages refresh-popular`, then a served SBOM scan whose
//! contents reach neither the data dir (database included) nor the logs, even at debug
//! level.

use std::io::Write as _;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_knowngood");

/// A command of the binary over `data`, with no other configuration from the environment.
fn knowngood(data: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("KNOWNGOOD_DATA_DIR", data)
        .env("RUST_LOG", "warn")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
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

fn run(data: &Path, args: &[&str]) -> String {
    let out = knowngood(data, args).output().unwrap();
    assert!(
        out.status.success(),
        "knowngood {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

fn curl(args: &[&str]) -> String {
    let out = Command::new("curl").args(args).output().unwrap();
    assert!(out.status.success(), "curl {args:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn osv(id: &str, ecosystem: &str, name: &str, fixed: &str) -> String {
    format!(
        r#"{{"schema_version":"1.6.0","id":"{id}","modified":"2024-05-01T00:00:00Z","aliases":["CVE-2024-{id}"],
        "summary":"{name} is affected","affected":[{{"package":{{"ecosystem":"{ecosystem}","name":"{name}"}},
        "ranges":[{{"type":"ECOSYSTEM","events":[{{"introduced":"0"}},{{"fixed":"{fixed}"}}]}}]}}]}}"#
    )
}

/// Every file under `dir` with its content.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push((path, bytes));
            }
        }
    }
    out.sort();
    out
}

fn holds(bytes: &[u8], needle: &str) -> bool {
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn advisories_popular_lists_and_a_private_sbom_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    run(&data, &["admin", "bootstrap"]);
    let key = run(
        &data,
        &[
            "admin",
            "create-account",
            "--team",
            "sec-team",
            "--tier",
            "teams",
            "--role",
            "auditor",
        ],
    );
    let key = key.lines().last().unwrap().trim().to_string();

    // Advisories: one document, and an archive as OSV publishes per ecosystem (with an
    // entry of another ecosystem, which is skipped).
    let docs = tmp.path().join("osv");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("PYSEC-1.json"),
        osv("PYSEC-1", "PyPI", "Django", "4.2.11"),
    )
    .unwrap();
    let zip_path = tmp.path().join("all.zip");
    {
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&zip_path).unwrap());
        let options = zip::write::SimpleFileOptions::default();
        zip.start_file("GHSA-1.json", options).unwrap();
        zip.write_all(osv("GHSA-1", "npm", "lodash", "4.17.21").as_bytes())
            .unwrap();
        zip.start_file("DSA-1.json", options).unwrap();
        zip.write_all(osv("DSA-1", "Debian:12", "openssl", "3.0.1").as_bytes())
            .unwrap();
        zip.finish().unwrap();
    }
    let said = run(
        &data,
        &[
            "advisories",
            "import",
            docs.to_str().unwrap(),
            zip_path.to_str().unwrap(),
        ],
    );
    assert!(
        said.contains("2 advisories")
            && said.contains("2 imported")
            && said.contains("1 documents"),
        "{said}"
    );
    // What was not kept is said, with the reason and the advisory.
    assert!(
        said.contains("ecosystem Debian (only npm, PyPI and Go are analysed): 1 (DSA-1)"),
        "{said}"
    );

    // A refreshed npm list makes an obscure name popular.
    let listing = tmp.path().join("npm.tsv");
    std::fs::write(
        &listing,
        "name\tversion\tdownloads_a_month\tsummary\nzz-house-favourite\t1.0.0\t999999999\t\n",
    )
    .unwrap();
    let said = run(
        &data,
        &[
            "packages",
            "refresh-popular",
            "--ecosystem",
            "npm",
            listing.to_str().unwrap(),
        ],
    );
    assert!(said.contains("npm: 1 popular names"), "{said}");

    // Serve with every log line the service can write, into a file.
    let log_path = tmp.path().join("serve.log");
    let addr = format!("127.0.0.1:{}", free_port());
    let closed = format!("http://127.0.0.1:{}", free_port());
    let child = knowngood(&data, &["serve"])
        .env("KNOWNGOOD_LISTEN", &addr)
        .env("RUST_LOG", "debug")
        .env("HTTPS_PROXY", &closed)
        .env("https_proxy", &closed)
        .stdout(std::fs::File::create(tmp.path().join("serve.out")).unwrap())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(&addr).is_err() {
        assert!(server.0.try_wait().unwrap().is_none(), "serve exited early");
        assert!(Instant::now() < deadline, "never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
    let base = format!("http://{addr}");
    let header = format!("X-API-Key: {key}");

    let typo = curl(&[
        "-sf",
        "-H",
        &header,
        "-d",
        r#"{"packages":[{"ecosystem":"npm","name":"zz-house-favourite"},{"ecosystem":"npm","name":"zz-house-favourit"}]}"#,
        &format!("{base}/api/v1/intel/typosquat"),
    ]);
    let typo: serde_json::Value = serde_json::from_str(&typo).unwrap();
    assert_eq!(typo["results"][0]["risk"], "known", "{typo}");
    assert_eq!(typo["results"][1]["risk"], "typosquat", "{typo}");

    // Let start-up writes settle, then take the data dir as it is.
    std::thread::sleep(Duration::from_secs(3));
    let marker = "zz-confidential-internal-lib-4b1d";
    let sha = "ab".repeat(32);
    let sbom = format!(
        r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","components":[
        {{"name":"{marker}","version":"1.0.0","purl":"pkg:npm/{marker}@1.0.0","hashes":[{{"alg":"SHA-256","content":"{sha}"}}]}},
        {{"name":"lodash","version":"4.17.20","purl":"pkg:npm/lodash@4.17.20"}},
        {{"name":"django","version":"4.2.1","purl":"pkg:pypi/django@4.2.1"}}]}}"#
    );
    let before: Vec<PathBuf> = files(&data).into_iter().map(|(p, _)| p).collect();
    let report = curl(&[
        "-sf",
        "-H",
        &header,
        "--data-binary",
        &sbom,
        &format!("{base}/api/v1/intel/sbom"),
    ]);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["summary"]["components"], 3, "{report}");
    assert_eq!(report["summary"]["with_advisories"], 2, "{report}");
    assert_eq!(report["components"][1]["advisories"][0]["id"], "GHSA-1");
    assert_eq!(report["components"][2]["advisories"][0]["id"], "PYSEC-1");

    // Past the usage flush (every 2 s), then stop the server cleanly so logs are complete.
    std::thread::sleep(Duration::from_secs(3));
    stop_gracefully(&mut server);
    let after = files(&data);
    let after_paths: Vec<PathBuf> = after.iter().map(|(p, _)| p.clone()).collect();
    let new: Vec<&PathBuf> = after_paths
        .iter()
        .filter(|p| {
            !before.contains(p)
                && !p.to_string_lossy().ends_with("-shm")
                && !p.to_string_lossy().ends_with("-wal")
        })
        .collect();
    assert!(new.is_empty(), "the scan created files: {new:?}");
    for (path, bytes) in &after {
        for needle in [marker, sha.as_str()] {
            assert!(!holds(bytes, needle), "{} holds {needle}", path.display());
        }
    }
    let log = std::fs::read(&log_path).unwrap();
    assert!(
        holds(&log, "/api/v1/intel/sbom"),
        "the request was logged at all"
    );
    for needle in [marker, sha.as_str()] {
        assert!(!holds(&log, needle), "the log holds {needle}");
    }
}

/// SIGTERM (a graceful stop), then wait.
fn stop_gracefully(server: &mut Server) {
    let _ = Command::new("kill")
        .args(["-TERM", &server.0.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.0.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
}
