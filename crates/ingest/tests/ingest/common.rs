//! Helpers of the download tests: a loopback HTTP server, a client and limits.

use std::time::Duration;

use ingest::DownloadLimits;
pub use testkit::vendor::{http_client as client, serve_router as serve};

/// Generous limits for a test, with short timeouts.
pub fn limits() -> DownloadLimits {
    DownloadLimits {
        max_bytes: 1 << 30,
        connect_timeout: Duration::from_secs(5),
        total_timeout: Duration::from_secs(20),
        max_signature_bytes: 1 << 20,
    }
}
