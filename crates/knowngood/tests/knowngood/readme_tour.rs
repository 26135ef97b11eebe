//! README's "A five-minute tour", run as written: its shell block is read from README.md,
//! each command run with `bash -euo pipefail` against a real `knowngood serve` on a fresh
//! data dir whose vendor channels are unreachable. Only what a test must is rewritten: the
//! binary instead of `cargo run`, the server's address, and `curl -s` as `curl -sf` so an
//! error status fails the command.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_knowngood");
const CARGO_RUN: &str = "cargo run -q --release -p knowngood --";

/// The ```sh block under the tour's heading.
fn tour_block(readme: &str) -> Vec<String> {
    let mut lines = readme
        .lines()
        .skip_while(|l| l.trim() != "## A five-minute tour")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .skip_while(|l| l.trim() != "```sh")
        .skip(1);
    let block: Vec<String> = lines
        .by_ref()
        .take_while(|l| l.trim() != "```")
        .map(str::to_string)
        .collect();
    assert!(
        !block.is_empty(),
        "README.md has no ```sh block in its tour"
    );
    block
}

/// The block's commands: comments and blank lines dropped, continuation lines joined to
/// their command, a here-document kept with the command that opens it.
fn commands(block: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = block.iter();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut command = line.clone();
        while command.ends_with('\\') {
            let next = lines.next().expect("a continuation line");
            command.push('\n');
            command.push_str(next);
        }
        if let Some(word) = heredoc_word(&command) {
            loop {
                let next = lines.next().expect("the end of a here-document");
                command.push('\n');
                command.push_str(next);
                if next.trim() == word {
                    break;
                }
            }
        }
        out.push(command);
    }
    out
}

/// The terminator of a here-document the command opens (`<<'WORD'`, `<<"WORD"`, `<<WORD`).
fn heredoc_word(command: &str) -> Option<String> {
    let rest = command.split_once("<<")?.1.trim_start();
    let word: String = rest
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// Names the block assigns (`KEY=$(...)`), carried from one command to the next.
fn assigned_names(commands: &[String]) -> Vec<String> {
    let mut names: Vec<String> = commands
        .iter()
        .filter_map(|c| {
            let (name, _) = c.split_once('=')?;
            let ok = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            ok.then(|| name.to_string())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// What a test must change: the binary for `cargo run`, the test server's address, and
/// curl failing on an error status.
fn rewrite(command: &str, addr: &str) -> String {
    command
        .replace(CARGO_RUN, &format!("'{BIN}'"))
        .replace("localhost:8080", addr)
        .replace("127.0.0.1:8080", addr)
        .replace("curl -s ", "curl -sf ")
}

/// `knowngood serve`, killed when dropped.
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
        .expect("free port")
}

/// Every command's environment: the data dir and nothing else from `KNOWNGOOD_*`; loopback
/// never through a proxy.
fn env_for(c: &mut Command, data: &Path) {
    for var in [
        "KNOWNGOOD_CONFIG",
        "KNOWNGOOD_DATABASE_URL",
        "KNOWNGOOD_LISTEN",
        "KNOWNGOOD_REDIS_URL",
        "KNOWNGOOD_CORPUS_RELEASE_URL",
        "KNOWNGOOD_EXTRA_CA_FILE",
        "KNOWNGOOD_HMAC_SECRET",
        "KNOWNGOOD_JWT_PRIVATE_KEY_PEM",
        "KNOWNGOOD_LOG_SIGNING_KEY",
    ] {
        c.env_remove(var);
    }
    c.env("KNOWNGOOD_DATA_DIR", data)
        .env("RUST_LOG", "warn")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .stdin(Stdio::null());
}

fn serve(data: &Path, addr: &str) -> Server {
    let mut c = Command::new(BIN);
    c.arg("serve");
    env_for(&mut c, data);
    // The vendor channels are unreachable: every outbound HTTPS request goes to a closed
    // loopback port, so the daily refresh (due after 02:00 UTC) tries and fails offline.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let child = c
        .env("KNOWNGOOD_LISTEN", addr)
        .env("HTTPS_PROXY", &closed)
        .env("https_proxy", &closed)
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn knowngood serve");
    let mut server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(addr).is_err()
        || !Command::new("curl")
            .args(["-sf", "-o", "/dev/null", &format!("http://{addr}/readyz")])
            .status()
            .is_ok_and(|s| s.success())
    {
        if let Some(status) = server.0.try_wait().expect("try_wait") {
            panic!("knowngood serve exited early: {status}");
        }
        assert!(Instant::now() < deadline, "{addr} never became ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    server
}

#[test]
fn the_readme_tour_runs_as_written() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md");
    let commands = commands(&tour_block(&readme));
    assert!(
        commands
            .iter()
            .any(|c| c.contains(&format!("{CARGO_RUN} verify"))),
        "the tour verifies a file: {commands:#?}"
    );
    let names = assigned_names(&commands);
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("knowngood-data");
    let state = tmp.path().join("tour-state.sh");
    std::fs::write(&state, "").unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let _server = serve(&data, &addr);

    // Variables a command sets are saved for the next one, as in one terminal.
    let save = names
        .iter()
        .map(|n| format!("if [ -n \"${{{n}+x}}\" ]; then declare -p {n}; fi"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut outputs = Vec::new();
    for command in &commands {
        assert!(
            !rewrite(command, &addr).contains("cargo "),
            "the tour runs the binary as `{CARGO_RUN} …`: {command}"
        );
        let script = format!(
            "source '{}'\n{}\n{{\n:\n{save}\n}} > '{}'\n",
            state.display(),
            rewrite(command, &addr),
            state.display()
        );
        let mut c = Command::new("bash");
        c.args(["-euo", "pipefail", "-c", &script])
            .current_dir(tmp.path());
        env_for(&mut c, &data);
        let out = c.output().expect("run bash");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(
            out.status.success(),
            "README tour command failed ({}):\n{command}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            out.status
        );
        if std::env::var_os("TOUR_ECHO").is_some() {
            eprintln!("$ {command}\n{stdout}");
        }
        outputs.push((command, stdout));
        if command.contains("import-records") {
            // The service sees records written by another process within half a second
            // (it polls the records epoch); a reader of the tour is slower than that.
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    let (_, verified) = outputs
        .iter()
        .rfind(|(c, _)| c.contains(&format!("{CARGO_RUN} verify")))
        .expect("a verify command");
    for line in ["ok   signature of the ", "ok   leaf ", "ok   audit path "] {
        assert!(
            verified.lines().any(|l| l.starts_with(line)),
            "verify printed no {line:?} line:\n{verified}"
        );
    }
    // The imported file is the one the lookup recognises.
    let (_, lookup) = outputs
        .iter()
        .find(|(c, _)| c.contains("/api/v1/intel/lookup"))
        .expect("a lookup");
    assert!(lookup.contains("known_vendor_release"), "{lookup}");
}
