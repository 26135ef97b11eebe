//! Leases of scheduled jobs: each cluster job runs on one replica at a time, the holder of
//! an unexpired lease. A lease also notes when the run under it ended, so another job can
//! wait for it.

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

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
                let taken = sqlx::query(
                    "INSERT INTO job_leases (job, holder, expires_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (job) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, \
                     finished_at = NULL \
                     WHERE job_leases.holder = excluded.holder OR job_leases.expires_at < $4",
                )
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
                sqlx::query(
                    "UPDATE job_leases SET finished_at = $3, expires_at = $4 WHERE job = $1 AND holder = $2",
                )
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
                let row: Option<$row> = sqlx::query(
                    "SELECT job, holder, expires_at, finished_at FROM job_leases WHERE job = $1",
                )
                .bind(job)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
                row.map(|r| Self::lease_from_row(&r)).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn recent_leases(&self, limit: u32) -> Result<Vec<JobLease>> {
                let rows: Vec<$row> = sqlx::query(
                    "SELECT job, holder, expires_at, finished_at FROM job_leases \
                     ORDER BY expires_at DESC, job LIMIT $1",
                )
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                rows.iter().map(Self::lease_from_row).collect()
            }
        }

        impl $store {
            fn lease_from_row(r: &$row) -> Result<JobLease> {
                Ok(JobLease {
                    job: r.try_get("job").map_err(db_error)?,
                    holder: r.try_get("holder").map_err(db_error)?,
                    expires_at: r.try_get("expires_at").map_err(db_error)?,
                    finished_at: r.try_get("finished_at").map_err(db_error)?,
                })
            }
        }
    };
}

lease_backend!(SqliteStore, SqliteRow);
lease_backend!(PgStore, PgRow);
