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
