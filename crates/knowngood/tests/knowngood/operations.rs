//! Operating the real binary: the metrics listener on its own address, and draining on
//! SIGTERM (`/readyz` 503 while requests are still served, then a clean exit).

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_knowngood");

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// HTTP status of a GET, or None when nothing answers.
fn status(url: &str) -> Option<u16> {
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "2",
            url,
        ])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .parse()
        .ok()
        .filter(|c| *c != 0)
}

fn body(url: &str) -> String {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "5", url])
        .output()
        .unwrap();
    assert!(out.status.success(), "GET {url} failed");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn metrics_listener_and_draining_on_sigterm() {
    let data = tempfile::tempdir().unwrap();
    let (api, metrics) = (free_port(), free_port());
    let config = data.path().join("knowngood.toml");
    std::fs::write(
        &config,
        "[connections]\ndrain_grace_secs = 3\n[schedule]\ndaily_refresh = \"off\"\n",
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .arg("serve")
        .env_remove("KNOWNGOOD_DATABASE_URL")
        .env_remove("KNOWNGOOD_REDIS_URL")
        .env("KNOWNGOOD_DATA_DIR", data.path().join("data"))
        .env("KNOWNGOOD_CONFIG", &config)
        .env("KNOWNGOOD_LISTEN", format!("127.0.0.1:{api}"))
        .env("KNOWNGOOD_METRICS_LISTEN", format!("127.0.0.1:{metrics}"))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let ready = format!("http://127.0.0.1:{api}/readyz");
    let deadline = Instant::now() + Duration::from_secs(60);
    while status(&ready) != Some(200) {
        assert!(child.try_wait().unwrap().is_none(), "serve exited early");
        assert!(Instant::now() < deadline, "never ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        status(&format!("http://127.0.0.1:{api}/healthz")),
        Some(200)
    );
    let text = body(&format!("http://127.0.0.1:{metrics}/metrics"));
    assert!(
        text.contains(
            r#"knowngood_http_requests_total{method="GET",route="/readyz",status="2xx"}"#
        ),
        "{text}"
    );
    assert!(text.contains("knowngood_database_up 1"), "{text}");
    // The API address does not serve metrics, and the metrics address nothing else.
    assert_eq!(
        status(&format!("http://127.0.0.1:{api}/metrics")),
        Some(404)
    );
    assert_eq!(
        status(&format!("http://127.0.0.1:{metrics}/readyz")),
        Some(404)
    );

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // Draining: not ready, but still serving, for the grace period.
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut seen = None;
    while Instant::now() < deadline {
        seen = status(&ready);
        if seen == Some(503) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(seen, Some(503), "/readyz during the drain");
    assert_eq!(
        status(&format!("http://127.0.0.1:{api}/healthz")),
        Some(200),
        "still serving"
    );
    // Then a clean exit.
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "no exit after the drain");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(exit.success(), "{exit}");
}

/// `knowngood serve` on a fresh data dir; the child and its API address.
fn serve(data: &std::path::Path, config: &std::path::Path) -> (std::process::Child, String) {
    let api = free_port();
    let mut child = Command::new(BIN)
        .arg("serve")
        .env_remove("KNOWNGOOD_DATABASE_URL")
        .env_remove("KNOWNGOOD_REDIS_URL")
        .env("KNOWNGOOD_DATA_DIR", data)
        .env("KNOWNGOOD_CONFIG", config)
        .env("KNOWNGOOD_LISTEN", format!("127.0.0.1:{api}"))
        .env(
            "KNOWNGOOD_METRICS_LISTEN",
            format!("127.0.0.1:{}", free_port()),
        )
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{api}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while status(&format!("{base}/readyz")) != Some(200) {
        assert!(child.try_wait().unwrap().is_none(), "serve exited early");
        assert!(Instant::now() < deadline, "never ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    (child, base)
}

/// Status and body of a GET with an API key.
fn get_with_key(base: &str, path: &str, key: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}", "--max-time", "5"])
        .args(["-H", &format!("X-API-Key: {key}")])
        .arg(format!("{base}{path}"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.parse().unwrap(), body.to_string())
}

/// Usage counts reach the database within a second: after `kill -9` a second after the
/// last request, the restarted server reports every request made before it.
#[test]
fn usage_counts_survive_kill_9_after_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("knowngood.toml");
    std::fs::write(&config, "[schedule]\ndaily_refresh = \"off\"\n").unwrap();
    let (mut child, base) = serve(&data, &config);
    let created = Command::new(BIN)
        .args(["admin", "create-account", "--team", "acme-soc"])
        .args(["--tier", "basic", "--role", "analyst"])
        .env_remove("KNOWNGOOD_DATABASE_URL")
        .env("KNOWNGOOD_DATA_DIR", &data)
        .env("KNOWNGOOD_CONFIG", &config)
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    let stdout = String::from_utf8(created.stdout).unwrap();
    let key = stdout.lines().last().unwrap().trim().to_string();
    const REQUESTS: u64 = 40;
    for _ in 0..REQUESTS {
        assert_eq!(get_with_key(&base, "/api/v1/intel/stats", &key).0, 200);
    }
    std::thread::sleep(Duration::from_millis(1100));
    assert!(
        Command::new("kill")
            .args(["-KILL", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    child.wait().unwrap();

    let (mut child, base) = serve(&data, &config);
    let (code, body) = get_with_key(&base, "/api/v1/admin/usage", &key);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(code, 200, "{body}");
    let usage: serde_json::Value = serde_json::from_str(&body).unwrap();
    let stats = usage["by_endpoint"]["GET /api/v1/intel/stats"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(stats, REQUESTS, "requests lost to the crash: {body}");
}
