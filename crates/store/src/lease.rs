//! Leases of scheduled jobs: each cluster job runs on one replica at a time, the holder of
//! an unexpired lease.

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, TimeDelta, Utc};

use crate::{PgStore, Result, SqliteStore, db_error};

#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Takes or renews the lease of a scheduled job until `until`; false when another
    /// holder's lease has not expired. Replicas call this before running a job, so each
    /// job runs on one replica at a time.
    async fn try_lease(
        &self,
        job: &str,
        holder: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool>;

    /// Hands the lease back (it expires at once), so another replica may take the job now.
    async fn release_lease(&self, job: &str, holder: &str, now: DateTime<Utc>) -> Result<()> {
        self.try_lease(job, holder, now - TimeDelta::seconds(1), now)
            .await
            .map(|_| ())
    }
}

macro_rules! lease_backend {
    ($store:ident) => {
        #[async_trait]
        impl LeaseStore for $store {
            async fn try_lease(
                &self,
                job: &str,
                holder: &str,
                until: DateTime<Utc>,
                now: DateTime<Utc>,
            ) -> Result<bool> {
                let taken = sqlx::query(
                    "INSERT INTO job_leases (job, holder, expires_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (job) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at \
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
        }
    };
}

lease_backend!(SqliteStore);
lease_backend!(PgStore);
