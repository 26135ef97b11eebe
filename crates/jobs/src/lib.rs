//! The cluster jobs: work that one replica at a time runs on a schedule, under a lease in
//! the database.
//!
//! - [`refresh`]: the daily vendor refresh (`vendor.refresh:<day>`), which also takes the
//!   [`coverage`] queue;
//! - [`publish`]: the daily transparency root (`translog.publish`);
//! - [`corpus_release`]: new NSRL releases from the drop directory or the release URL
//!   (`corpus.import`);
//! - [`revocation`]: the signing-certificate CRL check (`revocation.check:<interval start>`);
//! - [`advisories`]: OSV advisories downloaded from configured URLs and imported
//!   (`advisories.refresh:<interval start>`);
//! - [`compaction`]: vendor records stored in an older form rewritten compact, while any
//!   are left (`records.compact:<hour>`).
//!
//! A job is a [`Job`]: a name, [`Job::due`] (has its time come, and under which lease) and
//! [`Job::run`]. A [`Runner`] holds the jobs; the server's upkeep loop calls
//! [`Runner::start_due`] every minute, which starts each due job in its own task once this
//! replica holds its lease, never two runs of one job at once in a process. Jobs see a
//! [`JobContext`], never the HTTP state; the CLI calls the same functions.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_trait::async_trait;
use chrono::{DateTime, NaiveTime, Utc};
use model::{Clock, Error};
use store::Store;
use tracing::Instrument as _;

pub mod advisories;
pub mod compaction;
pub mod corpus_release;
pub mod coverage;
pub mod publish;
pub mod refresh;
pub mod revocation;

pub use publish::LogKey;

/// What the jobs need to know of the deployment.
#[derive(Debug, Clone)]
pub struct JobSettings {
    /// UTC time of day after which the day's transparency root is published, once the
    /// day's vendor refresh (when on) has ended.
    pub translog_publish_at: NaiveTime,
    /// UTC time of day of the vendor refresh; None (the library default, so embedding
    /// and tests never reach out to vendors) turns it off. The binary defaults to 02:00.
    pub daily_refresh: Option<NaiveTime>,
    pub refresh: refresh::RefreshOptions,
    /// A directory where new NSRL RDS v3 releases (`*.db`) are dropped; a file newer than
    /// the live corpus generation is imported, then swapped in. None = imports by hand only.
    pub corpus_import_dir: Option<PathBuf>,
    /// A URL checked on a schedule for a new NSRL release (see [`corpus_release`]); None =
    /// no fetching.
    pub corpus_release: Option<corpus_release::ReleaseSource>,
    /// The revocation check's schedule and limits; its outbound client follows
    /// `refresh.outbound` (http allowed for CRLs).
    pub revocation: revocation::RevocationOptions,
    /// OSV advisory URLs downloaded and imported on a schedule; None = imports by hand
    /// only.
    pub advisories: Option<advisories::AdvisorySource>,
}

impl Default for JobSettings {
    fn default() -> Self {
        Self {
            translog_publish_at: NaiveTime::from_hms_opt(2, 30, 0).unwrap_or_default(),
            daily_refresh: None,
            refresh: refresh::RefreshOptions::default(),
            corpus_import_dir: None,
            corpus_release: None,
            revocation: revocation::RevocationOptions::default(),
            advisories: None,
        }
    }
}

/// Everything a job may use.
#[derive(Clone)]
pub struct JobContext {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub settings: Arc<JobSettings>,
    /// Signs the daily transparency roots.
    pub log_key: Arc<LogKey>,
    /// The NSRL reference corpus, when one is configured.
    pub corpus: Option<Arc<corpus::Corpus>>,
    /// Names this process when it takes a job's lease.
    pub replica_id: String,
    /// Held while this process imports a corpus release, whoever started the import.
    pub corpus_importing: Arc<tokio::sync::Mutex<()>>,
}

impl JobContext {
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        settings: JobSettings,
        log_key: Arc<LogKey>,
    ) -> Self {
        Self {
            store,
            clock,
            settings: Arc::new(settings),
            log_key,
            corpus: None,
            replica_id: store::new_id(),
            corpus_importing: Arc::default(),
        }
    }

    /// Imports new NSRL releases into this corpus.
    pub fn with_corpus(mut self, corpus: Arc<corpus::Corpus>) -> Self {
        self.corpus = Some(corpus);
        self
    }
}

/// A lease a job must hold to run: whoever takes it first runs the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The lease's name in the database.
    pub name: String,
    pub holder: String,
    /// The end of the run's slot: once the run ends, the lease stays held until then, so
    /// no replica runs the job again in the slot. While the run goes on, the lease is held
    /// [`LEASE_HEARTBEAT`] at a time.
    pub until: DateTime<Utc>,
}

impl Due {
    /// Due in the slot of `interval` (aligned to the Unix epoch) that holds `now`, under
    /// the lease `<job>:<slot start>`: whoever claims the slot's lease first runs the job
    /// once in that slot (a fresh holder name each time it is asked).
    pub fn each_interval(
        job: &str,
        interval: std::time::Duration,
        now: DateTime<Utc>,
    ) -> Option<Self> {
        let secs = i64::try_from(interval.as_secs()).unwrap_or(i64::MAX).max(1);
        let start = now.timestamp().div_euclid(secs) * secs;
        let from = DateTime::from_timestamp(start, 0)?;
        let until = DateTime::from_timestamp(start.saturating_add(secs), 0)?;
        Some(Due::Leased(Lease {
            name: format!("{job}:{}", model::record::rfc3339(from)),
            holder: store::new_id(),
            until,
        }))
    }
}

/// How long a running job holds its lease between renewals. A replica that dies mid-run
/// stops renewing, so another replica takes the job over within this time.
pub const LEASE_HEARTBEAT: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// How often a running job renews its lease: a few times per heartbeat, so one slow
/// database round trip does not lose it.
const RENEW_EVERY: std::time::Duration = std::time::Duration::from_secs(15);

impl Lease {
    /// The expiry to hold the lease until while the run goes on at `now`.
    fn beat(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        self.until.min(now + LEASE_HEARTBEAT)
    }
}

/// Renews a running job's lease in the background until dropped (when the run ends, or
/// with the process).
pub(crate) struct Heartbeat(tokio::task::JoinHandle<()>);

impl Heartbeat {
    pub(crate) fn start(ctx: &JobContext, lease: Lease) -> Self {
        let (store, clock) = (ctx.store.clone(), ctx.clock.clone());
        Self(tokio::spawn(async move {
            let mut every = tokio::time::interval(RENEW_EVERY);
            every.tick().await;
            loop {
                every.tick().await;
                let now = clock.now();
                match store
                    .try_lease(&lease.name, &lease.holder, lease.beat(now), now)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(lease = %lease.name, "another replica took the job's lease")
                    }
                    Err(e) => {
                        tracing::warn!(lease = %lease.name, error = %e, "cannot renew the job's lease")
                    }
                }
            }
        }))
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why a job should start now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// Once this replica holds the lease.
    Leased(Lease),
    /// At once: the job takes its lease itself, when it finds work.
    Now,
}

/// A scheduled cluster job.
#[async_trait]
pub trait Job: Send + Sync {
    /// Names the job in logs (the `job` span's `name`).
    fn name(&self) -> &'static str;

    /// Whether the job should start at `now`, and under which lease; None = not now.
    /// Asked every minute while no run of the job is going on in this process.
    async fn due(&self, ctx: &JobContext, now: DateTime<Utc>) -> Result<Option<Due>, Error>;

    /// One run; `now` is when it was found due.
    async fn run(&self, ctx: &JobContext, now: DateTime<Utc>) -> Result<(), Error>;
}

/// The jobs of a process, and which of them run now.
pub struct Runner {
    jobs: Vec<Scheduled>,
}

/// A job with its running flag and its run counts.
struct Scheduled {
    job: Arc<dyn Job>,
    running: Arc<AtomicBool>,
    stats: Arc<RunStats>,
}

/// Runs of one job in this process since start.
#[derive(Debug, Default)]
pub struct RunStats {
    pub succeeded: AtomicU64,
    pub failed: AtomicU64,
    /// Time spent in runs that ended, microseconds.
    pub micros: AtomicU64,
}

impl Default for Runner {
    /// The cluster jobs: vendor refresh, transparency publication, NSRL release import,
    /// revocation check, advisory refresh, compaction of older records.
    fn default() -> Self {
        Self::new(vec![
            Arc::new(refresh::RefreshJob),
            Arc::new(publish::PublishJob),
            Arc::new(corpus_release::CorpusReleaseJob::default()),
            Arc::new(revocation::RevocationJob),
            Arc::new(advisories::AdvisoryJob),
            Arc::new(compaction::CompactionJob),
        ])
    }
}

impl Runner {
    pub fn new(jobs: Vec<Arc<dyn Job>>) -> Self {
        Self {
            jobs: jobs
                .into_iter()
                .map(|job| Scheduled {
                    job,
                    running: Arc::default(),
                    stats: Arc::default(),
                })
                .collect(),
        }
    }

    /// Each job's name and its runs in this process.
    pub fn stats(&self) -> impl Iterator<Item = (&'static str, &RunStats)> {
        self.jobs.iter().map(|s| (s.job.name(), &*s.stats))
    }

    /// A run of the named job is going on in this process.
    pub fn is_running(&self, name: &str) -> bool {
        self.jobs
            .iter()
            .any(|s| s.job.name() == name && s.running.load(Ordering::Acquire))
    }

    /// Starts, each in its own task, every job that is due at `now`, not running in this
    /// process, and whose lease this replica takes. A leased run renews its lease every
    /// few seconds ([`LEASE_HEARTBEAT`]); its end is noted on the lease, which then stays
    /// held until the end of the slot ([`store::LeaseStore::finish_lease`]). Returns the
    /// runs started.
    pub async fn start_due(
        &self,
        ctx: &JobContext,
        now: DateTime<Utc>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut started = Vec::new();
        for Scheduled {
            job,
            running,
            stats,
        } in &self.jobs
        {
            if running.load(Ordering::Acquire) {
                continue;
            }
            let name = job.name();
            let due = match job.due(ctx, now).await {
                Ok(Some(due)) => due,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(job = name, error = %e, "cannot tell whether the job is due; will try again");
                    continue;
                }
            };
            if let Due::Leased(lease) = &due {
                match ctx
                    .store
                    .try_lease(&lease.name, &lease.holder, lease.beat(now), now)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        tracing::warn!(job = name, error = %e, "cannot take the job's lease; will try again");
                        continue;
                    }
                }
            }
            if running.swap(true, Ordering::AcqRel) {
                continue;
            }
            let running = Running(running.clone());
            let (job, ctx, stats) = (job.clone(), ctx.clone(), stats.clone());
            let span = tracing::info_span!("job", name);
            started.push(tokio::spawn(
                async move {
                    let _running = running;
                    let heartbeat = match &due {
                        Due::Leased(lease) => Some(Heartbeat::start(&ctx, lease.clone())),
                        Due::Now => None,
                    };
                    let began = std::time::Instant::now();
                    tracing::info!("job started");
                    let outcome = job.run(&ctx, now).await;
                    let elapsed = began.elapsed();
                    stats.micros.fetch_add(
                        u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
                        Ordering::Relaxed,
                    );
                    match outcome {
                        Ok(()) => {
                            stats.succeeded.fetch_add(1, Ordering::Relaxed);
                            tracing::info!(seconds = elapsed.as_secs(), outcome = "ok", "job finished")
                        }
                        Err(e) => {
                            stats.failed.fetch_add(1, Ordering::Relaxed);
                            tracing::error!(seconds = elapsed.as_secs(), outcome = "failed", error = %e, "job finished")
                        }
                    }
                    // Whatever the outcome: jobs that wait for this one wait for its end,
                    // and the slot is done.
                    drop(heartbeat);
                    if let Due::Leased(lease) = &due
                        && let Err(e) = ctx
                            .store
                            .finish_lease(&lease.name, &lease.holder, ctx.clock.now(), lease.until)
                            .await
                    {
                        tracing::warn!(error = %e, "cannot note the end of the run on its lease");
                    }
                }
                .instrument(span),
            ));
        }
        started
    }
}

/// Clears a job's running flag when its run ends, even by a panic.
struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}
