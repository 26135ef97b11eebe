//! The cluster jobs without HTTP: the runner (leases, no overlapping runs, the `job` span)
//! and when each job is due. Every test runs on SQLite in a fresh temporary directory.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, NaiveTime, Utc};
use jobs::{Due, Job, JobContext, JobSettings, LogKey, Runner};
use model::{Clock as _, Error, FixedClock};

fn t(s: &str) -> DateTime<Utc> {
    s.parse()
        .unwrap_or_else(|e| panic!("bad timestamp {s:?}: {e}"))
}

fn at(h: u32, m: u32) -> NaiveTime {
    NaiveTime::from_hms_opt(h, m, 0).expect("time")
}

/// A replica's job context over a fresh SQLite database.
struct Env {
    ctx: JobContext,
    clock: Arc<FixedClock>,
    dir: tempfile::TempDir,
}

impl Env {
    async fn new(settings: JobSettings) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("kg.db").display());
        let store = store::open(&url, model::RecordSigner::new(b"jobs-test"))
            .await
            .expect("open store");
        let clock = Arc::new(FixedClock::new(t("2026-03-10T00:00:00Z")));
        let ctx = JobContext::new(
            store,
            clock.clone(),
            settings,
            Arc::new(LogKey::new(&[7; 32])),
        );
        Self { ctx, clock, dir }
    }

    /// Another replica over the same database.
    fn replica(&self) -> JobContext {
        JobContext {
            replica_id: store::new_id(),
            corpus_importing: Arc::default(),
            ..self.ctx.clone()
        }
    }
}

/// Log lines written while the returned guard lives (this thread only: the tests run on
/// the current-thread runtime, so spawned runs log here too).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let logs = self.clone();
        tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_writer(move || logs.clone())
                .with_ansi(false)
                .finish(),
        )
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn finish(runs: Vec<tokio::task::JoinHandle<()>>) {
    for run in runs {
        run.await.expect("job run");
    }
}

mod runner {
    use super::*;

    /// Due whenever asked, under one lease; each run waits until let go, then succeeds or
    /// fails as told.
    struct Probe {
        runs: Mutex<u32>,
        release: tokio::sync::Semaphore,
        fail: bool,
    }

    impl Probe {
        fn new(fail: bool) -> Arc<Self> {
            Arc::new(Self {
                runs: Mutex::new(0),
                release: tokio::sync::Semaphore::new(0),
                fail,
            })
        }

        fn runs(&self) -> u32 {
            *self.runs.lock().expect("runs")
        }
    }

    #[async_trait::async_trait]
    impl Job for Probe {
        fn name(&self) -> &'static str {
            "probe"
        }

        async fn due(&self, ctx: &JobContext, now: DateTime<Utc>) -> Result<Option<Due>, Error> {
            Ok(Some(Due::Leased(jobs::Lease {
                name: "probe".into(),
                holder: ctx.replica_id.clone(),
                until: now + chrono::Duration::minutes(10),
            })))
        }

        async fn run(&self, _ctx: &JobContext, _now: DateTime<Utc>) -> Result<(), Error> {
            *self.runs.lock().expect("runs") += 1;
            self.release.acquire().await.expect("semaphore").forget();
            if self.fail {
                return Err(Error::internal("the probe failed"));
            }
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_due_job_runs_once_at_a_time_under_its_lease_in_a_span() {
        let env = Env::new(JobSettings::default()).await;
        let logs = Logs::default();
        let _capture = logs.capture();
        let probe = Probe::new(false);
        let runner = Runner::new(vec![probe.clone()]);
        let now = env.clock.now();

        let runs = runner.start_due(&env.ctx, now).await;
        assert_eq!(runs.len(), 1);
        tokio::task::yield_now().await;
        assert!(runner.is_running("probe"));
        // No second run in this process while one goes on.
        assert!(runner.start_due(&env.ctx, now).await.is_empty());
        // Nor on another replica: this one holds the lease.
        let other = Runner::new(vec![probe.clone()]);
        assert!(other.start_due(&env.replica(), now).await.is_empty());

        probe.release.add_permits(1);
        finish(runs).await;
        assert!(!runner.is_running("probe"));
        assert_eq!(probe.runs(), 1);
        let text = logs.text();
        assert!(text.contains("job{name=\"probe\"}: "), "{text}");
        assert!(text.contains("job started"), "{text}");
        assert!(
            text.contains("job finished") && text.contains("outcome=\"ok\""),
            "{text}"
        );

        // The holder renews its lease and runs again.
        let runs = runner.start_due(&env.ctx, now).await;
        probe.release.add_permits(1);
        finish(runs).await;
        assert_eq!(probe.runs(), 2);
    }

    #[tokio::test]
    async fn a_failed_run_is_logged_and_the_job_may_run_again() {
        let env = Env::new(JobSettings::default()).await;
        let logs = Logs::default();
        let _capture = logs.capture();
        let probe = Probe::new(true);
        let runner = Runner::new(vec![probe.clone()]);
        probe.release.add_permits(2);
        finish(runner.start_due(&env.ctx, env.clock.now()).await).await;
        let text = logs.text();
        assert!(
            text.contains("outcome=\"failed\"") && text.contains("the probe failed"),
            "{text}"
        );
        assert!(!runner.is_running("probe"));
        finish(runner.start_due(&env.ctx, env.clock.now()).await).await;
        assert_eq!(probe.runs(), 2);
    }
}

mod refresh {
    use super::*;
    use jobs::refresh::RefreshJob;

    #[tokio::test]
    async fn due_daily_after_its_time_under_the_days_lease() {
        let off = Env::new(JobSettings::default()).await;
        assert_eq!(
            RefreshJob
                .due(&off.ctx, t("2026-03-10T23:00:00Z"))
                .await
                .expect("due"),
            None
        );

        let env = Env::new(JobSettings {
            daily_refresh: Some(at(2, 0)),
            ..JobSettings::default()
        })
        .await;
        let due = |now| RefreshJob.due(&env.ctx, now);
        assert_eq!(due(t("2026-03-10T01:59:59Z")).await.expect("due"), None);
        match due(t("2026-03-10T02:00:00Z")).await.expect("due") {
            Some(Due::Leased(lease)) => {
                assert_eq!(lease.name, "vendor.refresh:2026-03-10");
                assert_eq!(lease.until, t("2026-03-11T00:00:00Z"));
            }
            other => panic!("expected a leased run, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn one_replica_claims_the_days_refresh() {
        let env = Env::new(JobSettings {
            daily_refresh: Some(at(2, 0)),
            // No vendor is asked: every fetcher is turned off.
            refresh: jobs::refresh::RefreshOptions {
                vendors: jobs::refresh::vendor_ids()
                    .into_iter()
                    .map(|id| {
                        let off = jobs::refresh::VendorOverride {
                            enabled: Some(false),
                            ..Default::default()
                        };
                        (id, off)
                    })
                    .collect(),
                ..Default::default()
            },
            ..JobSettings::default()
        })
        .await;
        let now = t("2026-03-10T02:01:00Z");
        let runner = Runner::default();
        let runs = runner.start_due(&env.ctx, now).await;
        assert_eq!(runs.len(), 1);
        finish(runs).await;
        // Done for the day, here and on every other replica.
        assert!(runner.start_due(&env.ctx, now).await.is_empty());
        assert!(
            Runner::default()
                .start_due(&env.replica(), now)
                .await
                .is_empty()
        );
        // The next day's is a new lease.
        assert_eq!(
            runner
                .start_due(&env.ctx, t("2026-03-11T02:00:00Z"))
                .await
                .len(),
            1
        );
    }
}

mod publish {
    use super::*;
    use jobs::publish::{PublishJob, publish_day};

    #[tokio::test]
    async fn due_after_its_time_until_the_days_root_exists() {
        let env = Env::new(JobSettings::default()).await;
        let due = |now| PublishJob.due(&env.ctx, now);
        assert_eq!(due(t("2026-03-10T02:29:59Z")).await.expect("due"), None);
        match due(t("2026-03-10T02:30:00Z")).await.expect("due") {
            Some(Due::Leased(lease)) => {
                assert_eq!(lease.name, "translog.publish");
                assert_eq!(lease.holder, env.ctx.replica_id);
                assert_eq!(lease.until, t("2026-03-10T02:40:00Z"));
            }
            other => panic!("expected a leased run, got {other:?}"),
        }
        publish_day(
            env.ctx.store.as_ref(),
            &env.ctx.log_key,
            t("2026-03-10T02:30:00Z"),
            t("2026-03-10T00:00:00Z").date_naive(),
        )
        .await
        .expect("publish");
        assert_eq!(due(t("2026-03-10T02:31:00Z")).await.expect("due"), None);
    }

    #[tokio::test]
    async fn the_runner_publishes_todays_root() {
        let env = Env::new(JobSettings::default()).await;
        let now = t("2026-03-10T02:30:00Z");
        finish(Runner::default().start_due(&env.ctx, now).await).await;
        let root = env
            .ctx
            .store
            .root(now.date_naive())
            .await
            .expect("root")
            .expect("published");
        assert_eq!(root.published_at, now);
        assert_eq!(root.key_id, env.ctx.log_key.key_id);
    }
}

mod corpus_release {
    use super::*;
    use jobs::corpus_release::CorpusReleaseJob;

    #[tokio::test]
    async fn looks_hourly_when_there_is_somewhere_to_look() {
        let env = Env::new(JobSettings::default()).await;
        let corpus =
            Arc::new(corpus::Corpus::open(&env.dir.path().join("corpus")).expect("corpus"));
        let job = CorpusReleaseJob::default();
        let now = t("2026-03-10T05:00:00Z");
        // Nowhere to look, or nothing to import into.
        assert_eq!(job.due(&env.ctx, now).await.expect("due"), None);
        let drop_dir = env.dir.path().join("drop");
        std::fs::create_dir_all(&drop_dir).expect("drop dir");
        let mut ctx = env.ctx.clone();
        ctx.settings = Arc::new(JobSettings {
            corpus_import_dir: Some(drop_dir),
            ..JobSettings::default()
        });
        assert_eq!(job.due(&ctx, now).await.expect("due"), None);

        let ctx = ctx.with_corpus(corpus);
        assert_eq!(job.due(&ctx, now).await.expect("due"), Some(Due::Now));
        let minutes = |m| now + chrono::Duration::minutes(m);
        assert_eq!(job.due(&ctx, minutes(59)).await.expect("due"), None);
        assert_eq!(
            job.due(&ctx, minutes(60)).await.expect("due"),
            Some(Due::Now)
        );
        // An empty drop directory: a run finds nothing and takes no lease.
        finish(
            Runner::new(vec![Arc::new(CorpusReleaseJob::default())])
                .start_due(&ctx, now)
                .await,
        )
        .await;
        assert!(
            ctx.store
                .try_lease("corpus.import", "someone-else", minutes(30), now)
                .await
                .expect("lease")
        );
    }
}
