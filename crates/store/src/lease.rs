//! Leases of scheduled jobs: each cluster job runs on one replica at a time, the holder of
//! an unexpired lease. A lease also notes when the run under it ended, so another job can
//! wait for it.

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::backend::Columns;
use crate::{PgStore, Result, SqliteStore, db_error};

/// A lease as it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLease {
    pub job: String,
    pub holder: String,
    pub expires_at: DateTime<Utc>,
    /// When the holder's run ended; None while it runs (or if it never ended).
    pub finished_at: Option<DateTime<Utc>>,
}

#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Takes or renews the lease of a scheduled job until `until`; false when another
    /// holder's lease has not expired. Replicas call this before running a job, so each
    /// job runs on one replica at a time. Taking or renewing starts a run: the lease is no
    /// longer finished.
    async fn try_lease(
        &self,
        job: &str,
        holder: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool>;

    /// Hands the lease back (it expires at once), so another replica may take the job now.
    #[tracing::instrument(level = "debug", skip_all)]
    async fn release_lease(&self, job: &str, holder: &str, now: DateTime<Utc>) -> Result<()> {
        self.try_lease(job, holder, now - TimeDelta::seconds(1), now)
            .await
            .map(|_| ())
    }

    /// Notes that the holder's run ended at `now` and keeps the lease held until
    /// `keep_until` (the end of the run's slot, so no replica runs it again in that slot).
    /// Nothing happens when `holder` does not hold it.
    async fn finish_lease(
        &self,
        job: &str,
        holder: &str,
        now: DateTime<Utc>,
        keep_until: DateTime<Utc>,
    ) -> Result<()>;

    /// The job's lease; None if it was never taken.
    async fn lease(&self, job: &str) -> Result<Option<JobLease>>;

    /// The leases that expire last, newest first: what ran or runs lately, for staff.
    async fn recent_leases(&self, limit: u32) -> Result<Vec<JobLease>>;
}

/// Takes the lease when it is free, expired (`$4` now) or already the holder's.
const TAKE_LEASE: &str = "INSERT INTO job_leases (job, holder, expires_at) VALUES ($1, $2, $3) \
     ON CONFLICT (job) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, \
     finished_at = NULL \
     WHERE job_leases.holder = excluded.holder OR job_leases.expires_at < $4";
const FINISH_LEASE: &str =
    "UPDATE job_leases SET finished_at = $3, expires_at = $4 WHERE job = $1 AND holder = $2";
const LEASE: &str = "SELECT job, holder, expires_at, finished_at FROM job_leases WHERE job = $1";
const RECENT_LEASES: &str = "SELECT job, holder, expires_at, finished_at FROM job_leases \
     ORDER BY expires_at DESC, job LIMIT $1";

fn lease_from_row(r: &impl Columns) -> Result<JobLease> {
    Ok(JobLease {
        job: r.text("job")?,
        holder: r.text("holder")?,
        expires_at: r.time("expires_at")?,
        finished_at: r.opt_time("finished_at")?,
    })
}

macro_rules! lease_backend {
    ($store:ident, $row:ty) => {
        #[async_trait]
        impl LeaseStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn try_lease(
                &self,
                job: &str,
                holder: &str,
                until: DateTime<Utc>,
                now: DateTime<Utc>,
            ) -> Result<bool> {
                let taken = sqlx::query(TAKE_LEASE)
                    .bind(job)
                    .bind(holder)
                    .bind(until.trunc_subsecs(6))
                    .bind(now.trunc_subsecs(6))
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?
                    .rows_affected();
                Ok(taken == 1)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn finish_lease(
                &self,
                job: &str,
                holder: &str,
                now: DateTime<Utc>,
                keep_until: DateTime<Utc>,
            ) -> Result<()> {
                sqlx::query(FINISH_LEASE)
                    .bind(job)
                    .bind(holder)
                    .bind(now.trunc_subsecs(6))
                    .bind(keep_until.trunc_subsecs(6))
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn lease(&self, job: &str) -> Result<Option<JobLease>> {
                let row: Option<$row> = sqlx::query(LEASE)
                    .bind(job)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(lease_from_row).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn recent_leases(&self, limit: u32) -> Result<Vec<JobLease>> {
                let rows: Vec<$row> = sqlx::query(RECENT_LEASES)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(lease_from_row).collect()
            }
        }
    };
}

lease_backend!(SqliteStore, SqliteRow);
lease_backend!(PgStore, PgRow);
