//! The cluster jobs without HTTP: the runner (leases, no overlapping runs, the `job` span)
//! and when each job is due. Every test runs on both backends (`testkit::backend_tests!`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

use std::sync::{Arc, Mutex};

use chrono::{DateTime, NaiveTime, Utc};
use jobs::{Due, Job, JobContext, JobSettings, LogKey, Runner};
use model::{Clock as _, Error, FixedClock};
use testkit::{Db, t};

fn at(h: u32, m: u32) -> NaiveTime {
    NaiveTime::from_hms_opt(h, m, 0).expect("time")
}

/// A replica's job context over the test's database.
struct Env {
    ctx: JobContext,
    clock: Arc<FixedClock>,
    dir: tempfile::TempDir,
}

impl Env {
    async fn new(db: &Db, settings: JobSettings) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = db.store.clone();
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

/// Everything this test binary logs. One global subscriber: callsite interest is cached
/// process-wide, so per-test scoped subscribers would miss spans other tests hit first.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

fn logs() -> &'static Logs {
    static LOGS: std::sync::OnceLock<Logs> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing::subscriber::set_global_default(
            tracing_subscriber::fmt()
                .with_writer(move || writer.clone())
                .with_ansi(false)
                .finish(),
        )
        .expect("the only global subscriber");
        logs
    })
}

impl Logs {
    /// The lines logged in the named job's span.
    fn of_job(&self, name: &str) -> Vec<String> {
        let span = format!("job{{name=\"{name}\"}}: ");
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner()))
            .lines()
            .filter(|l| l.contains(&span))
            .map(str::to_string)
            .collect()
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

/// `name` with the test's backend: a job name of its own.
fn per_backend(name: &str, db: &Db) -> &'static str {
    format!("{name}.{}", db.backend.name()).leak()
}

async fn finish(runs: Vec<tokio::task::JoinHandle<()>>) {
    for run in runs {
        run.await.expect("job run");
    }
}

mod runner {
    use super::*;

    testkit::backend_tests!(
        a_due_job_runs_once_at_a_time_under_its_lease_in_a_span,
        a_failed_run_is_logged_and_the_job_may_run_again,
        a_run_whose_replica_dies_is_taken_over_after_the_heartbeat,
    );

    /// Due whenever asked, under one lease; each run waits until let go, then succeeds or
    /// fails as told.
    struct Probe {
        name: &'static str,
        runs: Mutex<u32>,
        release: tokio::sync::Semaphore,
        fail: bool,
    }

    impl Probe {
        fn new(name: &'static str, fail: bool) -> Arc<Self> {
            Arc::new(Self {
                name,
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
            self.name
        }

        async fn due(&self, ctx: &JobContext, now: DateTime<Utc>) -> Result<Option<Due>, Error> {
            Ok(Some(Due::Leased(jobs::Lease {
                name: self.name.into(),
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

    async fn a_due_job_runs_once_at_a_time_under_its_lease_in_a_span(db: Db) {
        let env = Env::new(&db, JobSettings::default()).await;
        let logs = logs();
        // Named per backend: both runs log to the one subscriber at once.
        let name = per_backend("probe.ok", &db);
        let probe = Probe::new(name, false);
        let runner = Runner::new(vec![probe.clone()]);
        let now = env.clock.now();

        let runs = runner.start_due(&env.ctx, now).await;
        assert_eq!(runs.len(), 1);
        tokio::task::yield_now().await;
        assert!(runner.is_running(name));
        // No second run in this process while one goes on.
        assert!(runner.start_due(&env.ctx, now).await.is_empty());
        // Nor on another replica: this one holds the lease.
        let other = Runner::new(vec![probe.clone()]);
        assert!(other.start_due(&env.replica(), now).await.is_empty());

        probe.release.add_permits(1);
        finish(runs).await;
        assert!(!runner.is_running(name));
        assert_eq!(probe.runs(), 1);
        let lines = logs.of_job(name);
        assert!(lines.iter().any(|l| l.contains("job started")), "{lines:?}");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("job finished") && l.contains("outcome=\"ok\"")),
            "{lines:?}"
        );

        // The holder renews its lease and runs again.
        let runs = runner.start_due(&env.ctx, now).await;
        probe.release.add_permits(1);
        finish(runs).await;
        assert_eq!(probe.runs(), 2);
    }

    async fn a_failed_run_is_logged_and_the_job_may_run_again(db: Db) {
        let env = Env::new(&db, JobSettings::default()).await;
        let logs = logs();
        let name = per_backend("probe.failing", &db);
        let probe = Probe::new(name, true);
        let runner = Runner::new(vec![probe.clone()]);
        probe.release.add_permits(2);
        finish(runner.start_due(&env.ctx, env.clock.now()).await).await;
        let lines = logs.of_job(name);
        assert!(
            lines
                .iter()
                .any(|l| l.contains("outcome=\"failed\"") && l.contains("the probe failed")),
            "{lines:?}"
        );
        assert!(!runner.is_running(name));
        finish(runner.start_due(&env.ctx, env.clock.now()).await).await;
        assert_eq!(probe.runs(), 2);
    }

    async fn a_run_whose_replica_dies_is_taken_over_after_the_heartbeat(db: Db) {
        let env = Env::new(&db, JobSettings::default()).await;
        let name = per_backend("probe.takeover", &db);
        let probe = Probe::new(name, false);
        let now = env.clock.now();
        let beat = jobs::LEASE_HEARTBEAT;

        let first = Runner::new(vec![probe.clone()])
            .start_due(&env.ctx, now)
            .await;
        assert_eq!(first.len(), 1);
        tokio::task::yield_now().await;
        let other = Runner::new(vec![probe.clone()]);
        let replica_b = env.replica();
        // While the holder lives, nobody else runs the job.
        assert!(
            other
                .start_due(&replica_b, now + chrono::Duration::seconds(30))
                .await
                .is_empty()
        );
        // The holder dies mid-run: its run and its lease renewals stop.
        for run in first {
            run.abort();
            assert!(run.await.unwrap_err().is_cancelled());
        }
        assert!(
            other
                .start_due(&replica_b, now + beat - chrono::Duration::seconds(1))
                .await
                .is_empty()
        );
        let taken_at = now + beat + chrono::Duration::seconds(1);
        let runs = other.start_due(&replica_b, taken_at).await;
        assert_eq!(runs.len(), 1, "another replica takes the job over");
        probe.release.add_permits(1);
        finish(runs).await;
        assert_eq!(probe.runs(), 2);
        // The finished run keeps its slot: the first replica, back, does not run it again.
        assert!(
            Runner::new(vec![probe.clone()])
                .start_due(&env.ctx, taken_at + chrono::Duration::seconds(90))
                .await
                .is_empty()
        );
    }
}

mod refresh {
    use super::*;
    use jobs::refresh::RefreshJob;

    testkit::backend_tests!(
        due_daily_after_its_time_under_the_days_lease,
        one_replica_claims_the_days_refresh,
    );

    async fn due_daily_after_its_time_under_the_days_lease(db: Db) {
        let off = Env::new(&db, JobSettings::default()).await;
        assert_eq!(
            RefreshJob
                .due(&off.ctx, t("2026-03-10T23:00:00Z"))
                .await
                .expect("due"),
            None
        );

        let env = Env::new(
            &db,
            JobSettings {
                daily_refresh: Some(at(2, 0)),
                ..JobSettings::default()
            },
        )
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

    async fn one_replica_claims_the_days_refresh(db: Db) {
        let env = Env::new(
            &db,
            JobSettings {
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
            },
        )
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

    testkit::backend_tests!(
        due_after_its_time_until_the_days_root_exists,
        the_runner_publishes_todays_root,
        a_day_after_today_is_refused,
    );

    /// Publishing tomorrow's root today would close today for good (roots are appended in
    /// date order): refused, and today stays publishable.
    async fn a_day_after_today_is_refused(db: Db) {
        let env = Env::new(&db, JobSettings::default()).await;
        let now = t("2026-03-10T23:59:00Z");
        let tomorrow = t("2026-03-11T00:00:00Z").date_naive();
        let refused = publish_day(env.ctx.store.as_ref(), &env.ctx.log_key, now, tomorrow).await;
        match refused {
            Err(model::Error::BadRequest(message)) => {
                assert!(message.contains("after today"), "{message}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(env.ctx.store.root(tomorrow).await.expect("root").is_none());
        publish_day(
            env.ctx.store.as_ref(),
            &env.ctx.log_key,
            now,
            now.date_naive(),
        )
        .await
        .expect("today is still publishable");
    }

    async fn due_after_its_time_until_the_days_root_exists(db: Db) {
        let env = Env::new(&db, JobSettings::default()).await;
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

    async fn the_runner_publishes_todays_root(db: Db) {
        let env = Env::new(&db, JobSettings::default()).await;
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

    testkit::backend_tests!(looks_hourly_when_there_is_somewhere_to_look,);

    async fn looks_hourly_when_there_is_somewhere_to_look(db: Db) {
        let env = Env::new(&db, JobSettings::default()).await;
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

mod publish_after_refresh {
    use super::*;
    use jobs::refresh::{RefreshOptions, VendorOverride, vendor_ids};

    testkit::backend_tests!(
        the_days_root_waits_for_the_days_refresh_to_end,
        a_later_refresh_time_delays_the_root_every_day,
    );

    /// Every vendor off but `go`, whose channel is `base`.
    fn only_go(base: Option<&str>) -> RefreshOptions {
        RefreshOptions {
            vendors: vendor_ids()
                .into_iter()
                .map(|id| {
                    let o = VendorOverride {
                        enabled: Some(base.is_some() && id == "go"),
                        base_url: base.map(str::to_string),
                        ..Default::default()
                    };
                    (id, o)
                })
                .collect(),
            attempts: 1,
            client: Some(
                reqwest::Client::builder()
                    .no_proxy()
                    .build()
                    .expect("client"),
            ),
            ..RefreshOptions::default()
        }
    }

    /// A vendor channel that answers nothing until let go, then drops the connection: a
    /// refresh that runs until the test says.
    async fn stalled_channel() -> (String, tokio::sync::watch::Sender<bool>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}/go", listener.local_addr().expect("addr"));
        let (release, released) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let mut released = released.clone();
                tokio::spawn(async move {
                    let _ = released.wait_for(|r| *r).await;
                    drop(socket);
                });
            }
        });
        (base, release)
    }

    async fn root_of(env: &Env, now: DateTime<Utc>) -> Option<store::roots::StoredRoot> {
        env.ctx.store.root(now.date_naive()).await.expect("root")
    }

    async fn the_days_root_waits_for_the_days_refresh_to_end(db: Db) {
        let (base, release) = stalled_channel().await;
        let env = Env::new(
            &db,
            JobSettings {
                daily_refresh: Some(at(2, 0)),
                translog_publish_at: at(2, 30),
                refresh: only_go(Some(&base)),
                ..JobSettings::default()
            },
        )
        .await;
        let runner = Runner::default();
        let (before, during) = (t("2026-03-10T01:59:00Z"), t("2026-03-10T02:30:00Z"));
        assert!(runner.start_due(&env.ctx, before).await.is_empty());

        // A fresh install at 02:30: the refresh starts; the root waits for it.
        let refresh = runner.start_due(&env.ctx, during).await;
        assert_eq!(refresh.len(), 1);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(runner.is_running(jobs::refresh::JOB));
        assert_eq!(root_of(&env, during).await, None);
        // Nor while it runs, here or on another replica.
        let later = t("2026-03-10T02:31:00Z");
        finish(runner.start_due(&env.ctx, later).await).await;
        finish(Runner::default().start_due(&env.replica(), later).await).await;
        assert_eq!(root_of(&env, later).await, None);

        // Once it has ended (here: the channel fails), the root follows.
        release.send_replace(true);
        finish(refresh).await;
        let after = t("2026-03-10T02:32:00Z");
        finish(Runner::default().start_due(&env.replica(), after).await).await;
        let root = root_of(&env, after).await.expect("published");
        assert_eq!(root.published_at, after);
    }

    async fn a_later_refresh_time_delays_the_root_every_day(db: Db) {
        let env = Env::new(
            &db,
            JobSettings {
                daily_refresh: Some(at(3, 0)),
                translog_publish_at: at(2, 30),
                refresh: only_go(None),
                ..JobSettings::default()
            },
        )
        .await;
        let runner = Runner::default();
        for day in ["2026-03-10", "2026-03-11"] {
            let at = |time: &str| {
                let now = t(&format!("{day}T{time}Z"));
                env.clock.set(now);
                now
            };
            // The publication time has come, the refresh's has not.
            assert!(runner.start_due(&env.ctx, at("02:30:00")).await.is_empty());
            assert!(runner.start_due(&env.ctx, at("02:59:00")).await.is_empty());
            assert_eq!(root_of(&env, at("02:59:00")).await, None, "{day}");
            // 03:00: the refresh (no vendor enabled: it ends at once), then the root.
            finish(runner.start_due(&env.ctx, at("03:00:00")).await).await;
            finish(runner.start_due(&env.ctx, at("03:01:00")).await).await;
            let root = root_of(&env, at("03:01:00")).await.expect("published");
            let refresh = env
                .ctx
                .store
                .lease(&jobs::refresh::day_lease(root.log_date))
                .await
                .expect("lease")
                .expect("the day's refresh");
            let ended = refresh.finished_at.expect("the refresh ended");
            assert!(root.published_at >= ended, "{day}: {root:?} {refresh:?}");
        }
    }
}
mod advisories;
mod compaction;
mod coverage_queue;
mod coverage_queue_debian;
mod registry_history;
mod revocation;
