//! `download_and_hash` against a loopback server: digests, size caps, timeouts, errors.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use crate::common::{client, limits, serve};
use axum::Router;
use axum::body::Body;
use axum::http::StatusCode;
use axum::routing::get;
use bytes::Bytes;
use chrono::{TimeZone, Utc};
use futures::{StreamExt, stream};
use ingest::{DownloadError, DownloadLimits, PublishedHashError, download_and_hash};
use model::{Clock, FixedClock};

/// A body sent in `n` chunks of `size` bytes, without a Content-Length.
fn chunked(n: usize, size: usize) -> Body {
    let chunk = Bytes::from(vec![b'x'; size]);
    Body::from_stream(stream::iter(
        (0..n).map(move |_| Ok::<_, Infallible>(chunk.clone())),
    ))
}

async fn app() -> String {
    let app = Router::new()
        .route("/abc", get(|| async { "abc" }))
        .route("/sized", get(|| async { vec![0u8; 1000] }))
        .route("/chunked", get(|| async { chunked(10, 100) }))
        .route("/missing", get(|| async { StatusCode::NOT_FOUND }))
        .route(
            "/stall",
            get(|| async {
                let first = stream::once(async { Ok::<_, Infallible>(Bytes::from_static(b"x")) });
                Body::from_stream(first.chain(stream::pending()))
            }),
        );
    format!("http://{}", serve(app).await)
}

fn clock() -> FixedClock {
    FixedClock::new(Utc.with_ymd_and_hms(2026, 5, 1, 2, 0, 0).unwrap())
}

#[tokio::test]
async fn hashes_the_body_and_stamps_the_clock() {
    let base = app().await;
    let clock = clock();
    let got = download_and_hash(&client(), &format!("{base}/abc"), &limits(), &clock)
        .await
        .unwrap();
    assert_eq!(
        got.digests.sha256,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(got.digests.sha1, "a9993e364706816aba3e25717850c26c9cd0d89d");
    assert_eq!(got.digests.md5, "900150983cd24fb0d6963f7d28e17f72");
    assert_eq!(got.size_bytes, 3);
    assert_eq!(got.downloaded_at, clock.now());
    assert_eq!(got.pe_signer, None);
    assert_eq!(got.pe_signer_error, None);

    // The vendor's published value is compared with what was downloaded.
    assert_eq!(
        ingest::verify_published(Some("900150983CD24FB0D6963F7D28E17F72"), &got.digests),
        Ok(())
    );
    let forged = "0".repeat(64);
    match ingest::verify_published(Some(&forged), &got.digests) {
        Err(PublishedHashError::Mismatch {
            published,
            computed,
            ..
        }) => {
            assert_eq!(published, forged);
            assert_eq!(computed, got.digests.sha256);
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
}

#[tokio::test]
async fn an_announced_length_over_the_cap_is_refused_before_reading() {
    let base = app().await;
    let url = format!("{base}/sized");
    let tight = DownloadLimits {
        max_bytes: 999,
        ..limits()
    };
    match download_and_hash(&client(), &url, &tight, &clock()).await {
        Err(DownloadError::AnnouncedTooLarge {
            announced, limit, ..
        }) => assert_eq!((announced, limit), (1000, 999)),
        other => panic!("expected AnnouncedTooLarge, got {other:?}"),
    }
    let exact = DownloadLimits {
        max_bytes: 1000,
        ..limits()
    };
    let got = download_and_hash(&client(), &url, &exact, &clock())
        .await
        .unwrap();
    assert_eq!(got.size_bytes, 1000);
}

#[tokio::test]
async fn a_streamed_body_past_the_cap_is_aborted() {
    let base = app().await;
    let url = format!("{base}/chunked");
    let tight = DownloadLimits {
        max_bytes: 999,
        ..limits()
    };
    let err = download_and_hash(&client(), &url, &tight, &clock())
        .await
        .unwrap_err();
    assert!(
        matches!(err, DownloadError::TooLarge { limit: 999, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("999-byte limit"), "{err}");

    let exact = DownloadLimits {
        max_bytes: 1000,
        ..limits()
    };
    let got = download_and_hash(&client(), &url, &exact, &clock())
        .await
        .unwrap();
    assert_eq!(got.size_bytes, 1000);
}

#[tokio::test]
async fn a_stalled_body_hits_the_total_timeout() {
    let base = app().await;
    let short = DownloadLimits {
        total_timeout: Duration::from_millis(300),
        ..limits()
    };
    let started = Instant::now();
    let err = download_and_hash(&client(), &format!("{base}/stall"), &short, &clock())
        .await
        .unwrap_err();
    assert!(matches!(err, DownloadError::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_server_that_never_answers_hits_the_connect_timeout() {
    // Accepts connections and never writes a byte.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let short = DownloadLimits {
        connect_timeout: Duration::from_millis(300),
        ..limits()
    };
    let err = download_and_hash(&client(), &format!("http://{addr}/"), &short, &clock())
        .await
        .unwrap_err();
    assert!(
        matches!(err, DownloadError::ConnectTimeout { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn http_errors_and_refused_connections_are_reported() {
    let base = app().await;
    let err = download_and_hash(&client(), &format!("{base}/missing"), &limits(), &clock())
        .await
        .unwrap_err();
    assert!(
        matches!(err, DownloadError::Status { status: 404, .. }),
        "{err:?}"
    );

    // A port nobody listens on: bind, learn the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = download_and_hash(
        &client(),
        &format!("http://127.0.0.1:{port}/"),
        &limits(),
        &clock(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, DownloadError::Request { .. }), "{err:?}");
}
