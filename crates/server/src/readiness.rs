//! Whether the database answers, as `/readyz` and the metrics report it: one cheap
//! statement with a short timeout, its answer kept briefly so that probes from a load
//! balancer (or a burst of them) cost one round trip per half second at most, and a
//! database that went away is noticed within a second without any request hanging on it.

use std::time::{Duration, Instant};

use store::Store;

/// How long an answer is reused.
const FRESH_FOR: Duration = Duration::from_millis(500);
/// Longest wait for the database's answer; past it the database counts as down.
const PING_TIMEOUT: Duration = Duration::from_secs(1);

/// The last answer and when it was had.
#[derive(Debug, Default)]
pub struct DatabaseCheck {
    last: tokio::sync::Mutex<Option<(Instant, bool)>>,
}

impl DatabaseCheck {
    /// True when the database answered a statement within [`PING_TIMEOUT`], lately.
    pub async fn up(&self, store: &dyn Store) -> bool {
        // One probe at a time: callers arriving meanwhile take its answer.
        let mut last = self.last.lock().await;
        if let Some((at, up)) = *last
            && at.elapsed() < FRESH_FOR
        {
            return up;
        }
        let up = matches!(
            tokio::time::timeout(PING_TIMEOUT, store.ping()).await,
            Ok(Ok(()))
        );
        *last = Some((Instant::now(), up));
        up
    }
}
