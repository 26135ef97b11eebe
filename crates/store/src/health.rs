//! Health of the database and of vendor ingestion (`vendor_health`): [`HealthStore`] and
//! its implementation for both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::backend::{Columns, micros};
use crate::{PgStore, Result, SqliteStore, db_error};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorHealth {
    pub vendor: String,
    pub last_success_at: Option<DateTime<Utc>>,
    pub last_error_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    /// Current records of this vendor.
    pub records: u64,
}

/// Health of the database and of vendor ingestion.
#[async_trait]
pub trait HealthStore: Send + Sync {
    /// Fails when the database cannot be reached.
    async fn ping(&self) -> Result<()>;

    /// The connection pool as it stands now (no database round trip).
    fn pool_stats(&self) -> PoolStats;

    /// Per-vendor ingestion health, with the count of current records.
    async fn vendor_health(&self) -> Result<Vec<VendorHealth>>;

    /// Notes the outcome of one vendor's ingestion run.
    async fn record_vendor_run(
        &self,
        vendor: &str,
        error: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<()>;
}

/// The connection pool: open connections, of which idle, and its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    pub size: u32,
    pub idle: u32,
    pub max: u32,
}

const PING: &str = "SELECT 1";
/// Every vendor with current records or a noted run, with its count of current records.
const VENDOR_HEALTH: &str = "SELECT v.vendor, h.last_success_at, h.last_error_at, h.last_error, \
     v.records FROM \
     (SELECT key AS vendor, n AS records FROM record_counts WHERE kind = 'vendor' \
      UNION SELECT vendor, 0 FROM vendor_health \
      WHERE vendor NOT IN (SELECT key FROM record_counts WHERE kind = 'vendor')) v \
     LEFT JOIN vendor_health h ON h.vendor = v.vendor ORDER BY v.vendor";
const VENDOR_FAILED: &str = "INSERT INTO vendor_health (vendor, last_error_at, last_error) \
     VALUES ($1, $2, $3) \
     ON CONFLICT (vendor) DO UPDATE SET last_error_at = $2, last_error = $3";
const VENDOR_SUCCEEDED: &str = "INSERT INTO vendor_health (vendor, last_success_at) \
     VALUES ($1, $2) \
     ON CONFLICT (vendor) DO UPDATE SET last_success_at = $2";

fn vendor_health_from_row(row: &impl Columns) -> Result<VendorHealth> {
    let records = row.int("records")?;
    Ok(VendorHealth {
        vendor: row.text("vendor")?,
        last_success_at: row.opt_time("last_success_at")?,
        last_error_at: row.opt_time("last_error_at")?,
        last_error: row.opt_text("last_error")?,
        records: u64::try_from(records).unwrap_or(0),
    })
}

macro_rules! health_backend {
    ($store:ident, $row:ty) => {
        #[async_trait]
        impl HealthStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn ping(&self) -> Result<()> {
                sqlx::query(PING)
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            fn pool_stats(&self) -> PoolStats {
                PoolStats {
                    size: self.pool.size(),
                    idle: u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX),
                    max: self.pool.options().get_max_connections(),
                }
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn vendor_health(&self) -> Result<Vec<VendorHealth>> {
                let rows: Vec<$row> = sqlx::query(VENDOR_HEALTH)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(vendor_health_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn record_vendor_run(
                &self,
                vendor: &str,
                error: Option<&str>,
                now: DateTime<Utc>,
            ) -> Result<()> {
                let now = micros(now);
                let query = match error {
                    Some(error) => sqlx::query(VENDOR_FAILED)
                        .bind(vendor)
                        .bind(now)
                        .bind(error),
                    None => sqlx::query(VENDOR_SUCCEEDED).bind(vendor).bind(now),
                };
                query.execute(&self.pool).await.map_err(db_error)?;
                Ok(())
            }
        }
    };
}

health_backend!(SqliteStore, SqliteRow);
health_backend!(PgStore, PgRow);
