//! The transport: slow and numerous clients (header and body read timeouts, connection
//! caps), the headers every answer carries, and over-large request heads. Raw sockets where
//! a client must misbehave; bounds are generous multiples of the configured timeouts.

use std::time::Duration;

use model::{Role, Tier};
use reqwest::Method;
use serde_json::{Value, json};
use testkit::{Backend, TestApp};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

fn addr(app: &TestApp) -> String {
    app.base.trim_start_matches("http://").to_string()
}

/// Reads until the peer closes (or errors); None if it is still open after `within`.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut seen = Vec::new();
    let read_all = async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read_all).await.ok()?;
    Some(seen)
}

/// One keep-alive request on an open socket; the status line of the answer.
async fn request_on(stream: &mut TcpStream, path: &str) -> String {
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .expect("an answer in time")
            .unwrap();
        assert!(n > 0, "closed without an answer");
        seen.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&seen);
    text.lines().next().unwrap_or("").to_string()
}

#[tokio::test]
async fn a_half_sent_header_is_closed_after_the_header_timeout() {
    testkit::run(
        Backend::Sqlite,
        "half_sent_header",
        |s: &mut server::Settings| s.connections.header_read_timeout = Duration::from_secs(1),
        |app: TestApp| async move {
            let mut stream = TcpStream::connect(addr(&app)).await.unwrap();
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Slow: ")
                .await
                .unwrap();
            let seen = closed_within(&mut stream, Duration::from_secs(5)).await;
            assert!(seen.is_some(), "still open 5 s after a 1 s header timeout");
            // A silent connection is closed the same way.
            let mut silent = TcpStream::connect(addr(&app)).await.unwrap();
            assert!(
                closed_within(&mut silent, Duration::from_secs(5))
                    .await
                    .is_some()
            );
            // The server still serves.
            assert_eq!(app.get("/healthz").await.status, 200);
        },
    )
    .await;
}

#[tokio::test]
async fn connections_beyond_the_per_address_cap_are_closed() {
    const CAP: usize = 4;
    testkit::run(
        Backend::Sqlite,
        "per_address_cap",
        |s: &mut server::Settings| s.connections.max_per_address = CAP,
        |app: TestApp| async move {
            let mut held = Vec::new();
            for _ in 0..CAP {
                let mut s = TcpStream::connect(addr(&app)).await.unwrap();
                // Answered, so admitted before the next one is opened.
                assert_eq!(request_on(&mut s, "/healthz").await, "HTTP/1.1 200 OK");
                held.push(s);
            }
            for extra in 0..3 {
                let mut s = TcpStream::connect(addr(&app)).await.unwrap();
                let _ = s
                    .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
                    .await;
                let seen = closed_within(&mut s, Duration::from_secs(5)).await;
                assert_eq!(
                    seen.as_deref(),
                    Some(&b""[..]),
                    "connection {extra} over the cap was not closed unanswered"
                );
            }
            // The cap's worth stay usable.
            for s in &mut held {
                assert_eq!(request_on(s, "/healthz").await, "HTTP/1.1 200 OK");
            }
            // A closed connection frees its place.
            drop(held.pop());
            let mut again = None;
            for _ in 0..50 {
                let mut s = TcpStream::connect(addr(&app)).await.unwrap();
                let _ = s
                    .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
                    .await;
                let seen = closed_within(&mut s, Duration::from_secs(5)).await.unwrap();
                if seen.starts_with(b"HTTP/1.1 200") {
                    again = Some(());
                    break;
                }
                // The server may not have seen the close yet.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(again.is_some(), "a freed place was never reused");
        },
    )
    .await;
}

#[tokio::test]
async fn connections_beyond_the_total_cap_are_closed() {
    testkit::run(
        Backend::Sqlite,
        "total_cap",
        |s: &mut server::Settings| s.connections.max_total = 2,
        |app: TestApp| async move {
            let mut held = Vec::new();
            for _ in 0..2 {
                let mut s = TcpStream::connect(addr(&app)).await.unwrap();
                assert_eq!(request_on(&mut s, "/healthz").await, "HTTP/1.1 200 OK");
                held.push(s);
            }
            let mut s = TcpStream::connect(addr(&app)).await.unwrap();
            let seen = closed_within(&mut s, Duration::from_secs(5)).await;
            assert_eq!(seen.as_deref(), Some(&b""[..]));
            for s in &mut held {
                assert_eq!(request_on(s, "/healthz").await, "HTTP/1.1 200 OK");
            }
        },
    )
    .await;
}

#[tokio::test]
async fn a_trickled_body_gets_a_json_408() {
    testkit::run(
        Backend::Sqlite,
        "trickled_body",
        |s: &mut server::Settings| s.connections.body_read_timeout = Duration::from_secs(1),
        |app: TestApp| async move {
            let key = app.analyst().await;
            let stream = TcpStream::connect(addr(&app)).await.unwrap();
            let (mut reader, mut writer) = stream.into_split();
            writer
                .write_all(
                    format!(
                        "POST /api/v1/intel/lookup HTTP/1.1\r\nHost: test\r\nX-API-Key: {key}\r\n\
                         Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
                    )
                    .as_bytes(),
                )
                .await
                .unwrap();
            // A byte every 300 ms: never 1 s without data, but far from 200 bytes in 1 s.
            let trickle = tokio::spawn(async move {
                for b in b"{\"hashes\": [\"".iter().cycle().take(40) {
                    if writer.write_all(&[*b]).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                writer
            });
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            let answer = tokio::time::timeout(Duration::from_secs(8), async {
                loop {
                    match reader.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
            })
            .await;
            trickle.abort();
            assert!(answer.is_ok(), "no answer 8 s into a 1 s body timeout");
            let text = String::from_utf8_lossy(&seen).to_string();
            assert!(text.starts_with("HTTP/1.1 408"), "{text}");
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(
                head.to_ascii_lowercase()
                    .contains("content-type: application/json"),
                "{head}"
            );
            let body: Value = serde_json::from_str(body).unwrap();
            assert_eq!(body["error"], "request timeout", "{body}");
            assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
        },
    )
    .await;
}

#[tokio::test]
async fn every_answer_is_nosniff_and_per_caller_answers_are_not_stored() {
    testkit::run(
        Backend::Sqlite,
        "security_headers",
        |_: &mut server::Settings| {},
        |app: TestApp| async move {
            let header = |r: &testkit::Resp, name: &str| {
                r.headers.get(name).map(|v| v.to_str().unwrap().to_string())
            };
            let health = app.get("/healthz").await;
            assert_eq!(
                header(&health, "x-content-type-options").as_deref(),
                Some("nosniff")
            );
            assert_eq!(header(&health, "cache-control"), None);
            let missing = app.get("/no/such/route").await;
            assert_eq!(missing.status, 404);
            assert_eq!(
                header(&missing, "x-content-type-options").as_deref(),
                Some("nosniff")
            );

            let admin = app.account("acme", Role::AccountAdmin, Tier::Teams).await;
            let token = app
                .call(Method::POST, "/api/v1/auth/token", Some(&admin), None)
                .await;
            assert_eq!(token.status, 200, "{}", token.text);
            let issued = app
                .send(
                    Method::POST,
                    "/api/v1/admin/keys",
                    &admin,
                    Some(json!({"role": "analyst"})),
                )
                .await;
            assert_eq!(issued.status, 201, "{}", issued.text);
            let refused = app.get("/api/v1/intel/stats").await;
            assert_eq!(refused.status, 401);
            for r in [&token, &issued, &refused] {
                assert_eq!(
                    header(r, "cache-control").as_deref(),
                    Some("no-store"),
                    "{r:?}"
                );
                assert_eq!(
                    header(r, "x-content-type-options").as_deref(),
                    Some("nosniff")
                );
            }
        },
    )
    .await;
}

#[tokio::test]
async fn over_large_heads_are_refused_as_json_where_the_server_can() {
    testkit::run(
        Backend::Sqlite,
        "over_large_heads",
        |_: &mut server::Settings| {},
        |app: TestApp| async move {
            let long = format!("/healthz?q={}", "a".repeat(10_000));
            let r = app.get(&long).await;
            r.assert_error(414, "uri too long");
            assert_eq!(r.headers.get("x-content-type-options").unwrap(), "nosniff");

            let client = reqwest::Client::builder().no_proxy().build().unwrap();
            let r = client
                .get(format!("{}/healthz", app.base))
                .header("X-Pad", "b".repeat(20_000))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 431);
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["error"], "request header fields too large", "{body}");

            // Past what the HTTP layer buffers, it answers 431 itself, with the same body.
            let r = client
                .get(format!("{}/healthz", app.base))
                .header("X-Pad", "c".repeat(100_000))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 431);
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["error"], "request header fields too large", "{body}");
        },
    )
    .await;
}

/// Raw request heads the HTTP layer refuses before the application sees them: each answer
/// still carries the JSON error body, and the server keeps serving.
#[tokio::test]
async fn unparseable_heads_get_json_error_bodies() {
    testkit::run(
        Backend::Sqlite,
        "unparseable_heads",
        |_: &mut server::Settings| {},
        |app: TestApp| async move {
            let long_target = format!("GET /healthz?q={} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(100_000));
            let heads: [(&[u8], u16, &str); 5] = [
                (b"GET /\xff HTTP/1.1\r\nHost: t\r\n\r\n", 400, "bad request"),
                (b"GET /a\x00b HTTP/1.1\r\nHost: t\r\n\r\n", 400, "bad request"),
                (
                    b"POST /api/v1/intel/lookup HTTP/1.1\r\nHost: t\r\nContent-Length: 12abc\r\n\r\n",
                    400,
                    "bad request",
                ),
                (
                    b"POST /api/v1/intel/lookup HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                    400,
                    "bad request",
                ),
                (long_target.as_bytes(), 414, "uri too long"),
            ];
            for (head, status, error) in heads {
                let mut stream = TcpStream::connect(addr(&app)).await.unwrap();
                stream.write_all(head).await.unwrap();
                let seen = closed_within(&mut stream, Duration::from_secs(10))
                    .await
                    .expect("the server answers and closes");
                let text = String::from_utf8_lossy(&seen);
                let (answer_head, body) = text.split_once("\r\n\r\n").expect("an answer");
                assert!(
                    answer_head.starts_with(&format!("HTTP/1.1 {status} ")),
                    "{answer_head}"
                );
                assert!(
                    answer_head.to_ascii_lowercase().contains("content-type: application/json"),
                    "{answer_head}"
                );
                let body: Value = serde_json::from_str(body).expect("a JSON body");
                assert_eq!(body["error"], error, "{body}");
                assert!(body["message"].is_string(), "{body}");
            }
            assert_eq!(app.get("/healthz").await.status, 200);
        },
    )
    .await;
}
