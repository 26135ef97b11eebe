//! Helpers shared by the integration tests: a loopback HTTP server and a client.

use std::net::SocketAddr;
use std::time::Duration;

use ingest::DownloadLimits;

/// Serves `app` on 127.0.0.1 at a free port for the rest of the test.
pub async fn serve(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A client that talks to loopback directly even when a proxy is configured.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// Generous limits for a test, with short timeouts.
pub fn limits() -> DownloadLimits {
    DownloadLimits {
        max_bytes: 1 << 30,
        connect_timeout: Duration::from_secs(5),
        total_timeout: Duration::from_secs(20),
        max_signature_bytes: 1 << 20,
    }
}
