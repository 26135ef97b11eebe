//! The rewrite of vendor records stored in an older form (`records.compact`). A database
//! that was written before migrations 0029, 0031 and 0033 holds rows with their whole
//! source URL, their name three times, and an archive member's path again at the end of
//! its URL; they read the same as compact rows but take about 140 to 200 bytes more. While
//! any are left ([`store::RecordCompactionStore`]), one replica at a time walks
//! the records in batches, pausing after each as long as it took, so the service's own
//! writes always find the database free. The walk's position is kept in the database: a
//! restart, or another replica in a later slot, goes on from there. Progress is on
//! `/metrics` and the staff health route.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use model::Error;
use store::{CompactionProgress, Store};

use crate::{Due, Job, JobContext};

const JOB: &str = "records.compact";
/// A run's slot: a run still going at its end goes on (batches lock the walk's row, so a
/// run of another replica in the next slot would only take turns with it).
const SLOT: Duration = Duration::from_secs(3600);
/// Rows a batch looks at: one short write transaction.
const BATCH: u32 = 500;
/// The shortest pause between batches. A pause lasts at least as long as the batch before
/// it, so the walk holds the database's write lock at most half the time: a SQLite writer
/// waiting for it retries after sleeps of up to 100 ms, and a pause much shorter than its
/// sleep could be missed batch after batch.
const MIN_PAUSE: Duration = Duration::from_millis(10);
/// How often a long walk logs its progress.
const LOG_EVERY: Duration = Duration::from_secs(30);

/// The `records.compact` job: due while older rows are left.
pub struct CompactionJob;

#[async_trait]
impl Job for CompactionJob {
    fn name(&self) -> &'static str {
        JOB
    }

    async fn due(&self, ctx: &JobContext, now: DateTime<Utc>) -> Result<Option<Due>, Error> {
        if ctx.store.compaction_progress().await?.done {
            return Ok(None);
        }
        Ok(Due::each_interval(JOB, SLOT, now))
    }

    async fn run(&self, ctx: &JobContext, _now: DateTime<Utc>) -> Result<(), Error> {
        compact_older_records(ctx.store.as_ref()).await.map(|_| ())
    }
}

/// Rewrites every row stored in an older form, batch after batch, until the walk is done.
pub async fn compact_older_records(store: &dyn Store) -> Result<CompactionProgress, Error> {
    let started = Instant::now();
    let mut logged = Instant::now();
    loop {
        let batch = Instant::now();
        let progress = store.compact_older_records(BATCH).await?;
        if progress.done {
            tracing::info!(
                rewritten = progress.rewritten,
                elapsed_s = started.elapsed().as_secs(),
                "every vendor record is stored compact"
            );
            return Ok(progress);
        }
        if logged.elapsed() >= LOG_EVERY {
            logged = Instant::now();
            tracing::info!(
                walked_percent = format!("{:.1}", progress.walked * 100.0),
                rewritten = progress.rewritten,
                "rewriting vendor records stored in an older form"
            );
        }
        tokio::time::sleep(batch.elapsed().max(MIN_PAUSE)).await;
    }
}
