//! Storage of the transparency log: signed daily roots, the leaves each covers, and every
//! key that ever signed. Append-only: publishing a day twice returns the first root, and
//! the database refuses updates and deletes (triggers), so history cannot be rewritten
//! through the service.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, SubsecRound, Utc};
use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::{PgStore, Result, SqliteStore, db_error};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRoot {
    pub log_date: NaiveDate,
    /// Lowercase hex.
    pub merkle_root: String,
    pub entry_count: u64,
    pub prev_root: String,
    /// Base64 Ed25519 signature.
    pub signature: String,
    pub key_id: String,
    pub published_at: DateTime<Utc>,
}

/// The record fields a leaf hash is computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafRow {
    pub leaf_hash: String,
    pub executable_name: String,
    pub hash_sha256: String,
    pub version: String,
    pub platform: String,
    pub arch: String,
}

/// A day's leaves in tree order, a batch at a time.
pub type LeafBatches = futures::stream::BoxStream<'static, Result<Vec<LeafRow>>>;

/// Leaves per `INSERT` (8 values each).
const LEAF_ROWS: usize = 1000;

fn leaf_insert_sql(rows: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO translog_leaves (log_date, leaf_index, leaf_hash, executable_name, \
         hash_sha256, version, platform, arch) VALUES ",
    );
    for r in 0..rows {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        sql.push_str(&crate::backend::placeholders(r * 8 + 1, 8));
        sql.push(')');
    }
    sql
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningKeyRecord {
    pub key_id: String,
    /// Base64 of the raw 32-byte Ed25519 public key.
    pub public_key: String,
    /// First and last day this key signed (None if it has signed nothing yet).
    pub first_date: Option<NaiveDate>,
    pub last_date: Option<NaiveDate>,
}

#[async_trait]
pub trait RootStore: Send + Sync {
    /// Stores a day's root with its leaves (in tree order) unless the day is already
    /// published; returns the root that is stored for that day either way.
    async fn publish_root(&self, root: &StoredRoot, leaves: &[LeafRow]) -> Result<StoredRoot>;
    /// [`publish_root`](RootStore::publish_root) with the leaves in batches, in tree order,
    /// as the caller reads them: a day of any size is stored in bounded memory, in one
    /// transaction with its root. The batches hold `root.entry_count` leaves in all, or
    /// nothing is stored; an error from the stream stores nothing either.
    async fn publish_root_streamed(
        &self,
        root: &StoredRoot,
        leaves: LeafBatches,
    ) -> Result<StoredRoot>;
    async fn root(&self, date: NaiveDate) -> Result<Option<StoredRoot>>;
    /// The latest root of a day before `date`.
    async fn root_before(&self, date: NaiveDate) -> Result<Option<StoredRoot>>;
    /// Newest first.
    async fn recent_roots(&self, limit: u32) -> Result<Vec<StoredRoot>>;
    /// Every root, oldest first.
    async fn all_roots(&self) -> Result<Vec<StoredRoot>>;
    /// A day's leaves in tree order.
    async fn leaves(&self, date: NaiveDate) -> Result<Vec<LeafRow>>;
    async fn register_log_key(
        &self,
        key_id: &str,
        public_key: &str,
        now: DateTime<Utc>,
    ) -> Result<()>;
    async fn log_keys(&self) -> Result<Vec<SigningKeyRecord>>;
}

fn count(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

const ROOT_COLUMNS: &str =
    "log_date, merkle_root, entry_count, prev_root, signature, key_id, published_at";

macro_rules! translog_backend {
    ($store:ident, $row:ty) => {
        impl $store {
            fn root_from_row(row: &$row) -> Result<StoredRoot> {
                Ok(StoredRoot {
                    log_date: row.try_get("log_date").map_err(db_error)?,
                    merkle_root: row.try_get("merkle_root").map_err(db_error)?,
                    entry_count: count(row.try_get("entry_count").map_err(db_error)?),
                    prev_root: row.try_get("prev_root").map_err(db_error)?,
                    signature: row.try_get("signature").map_err(db_error)?,
                    key_id: row.try_get("key_id").map_err(db_error)?,
                    published_at: row.try_get("published_at").map_err(db_error)?,
                })
            }
        }

        #[async_trait]
        impl RootStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn publish_root(
                &self,
                root: &StoredRoot,
                leaves: &[LeafRow],
            ) -> Result<StoredRoot> {
                use futures::StreamExt as _;
                let batch: Result<Vec<LeafRow>> = Ok(leaves.to_vec());
                self.publish_root_streamed(root, futures::stream::iter([batch]).boxed())
                    .await
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn publish_root_streamed(
                &self,
                root: &StoredRoot,
                mut leaves: LeafBatches,
            ) -> Result<StoredRoot> {
                use futures::StreamExt as _;
                let mut tx = self.pool.begin().await.map_err(db_error)?;
                let inserted = sqlx::query(
                    "INSERT INTO translog_roots (log_date, merkle_root, entry_count, prev_root, \
                     signature, key_id, published_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
                     ON CONFLICT (log_date) DO NOTHING",
                )
                .bind(root.log_date)
                .bind(&root.merkle_root)
                .bind(i64::try_from(root.entry_count).unwrap_or(i64::MAX))
                .bind(&root.prev_root)
                .bind(&root.signature)
                .bind(&root.key_id)
                .bind(root.published_at.trunc_subsecs(6))
                .execute(&mut *tx)
                .await
                .map_err(db_error)?
                .rows_affected();
                if inserted == 1 {
                    let mut index: i64 = 0;
                    while let Some(batch) = leaves.next().await {
                        for rows in batch?.chunks(LEAF_ROWS) {
                            let sql = leaf_insert_sql(rows.len());
                            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                            for leaf in rows {
                                q = q
                                    .bind(root.log_date)
                                    .bind(index)
                                    .bind(&leaf.leaf_hash)
                                    .bind(&leaf.executable_name)
                                    .bind(&leaf.hash_sha256)
                                    .bind(&leaf.version)
                                    .bind(&leaf.platform)
                                    .bind(&leaf.arch);
                                index += 1;
                            }
                            q.execute(&mut *tx).await.map_err(db_error)?;
                        }
                    }
                    if u64::try_from(index).ok() != Some(root.entry_count) {
                        return Err(model::Error::internal(format!(
                            "the root of {} covers {} leaves but {index} were given",
                            root.log_date, root.entry_count
                        )));
                    }
                }
                tx.commit().await.map_err(db_error)?;
                self.root(root.log_date)
                    .await?
                    .ok_or_else(|| model::Error::internal("published root vanished"))
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn root(&self, date: NaiveDate) -> Result<Option<StoredRoot>> {
                let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {ROOT_COLUMNS} FROM translog_roots WHERE log_date = $1"
                )))
                .bind(date)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
                row.as_ref().map(Self::root_from_row).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn root_before(&self, date: NaiveDate) -> Result<Option<StoredRoot>> {
                let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {ROOT_COLUMNS} FROM translog_roots WHERE log_date < $1 \
                     ORDER BY log_date DESC LIMIT 1"
                )))
                .bind(date)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
                row.as_ref().map(Self::root_from_row).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn recent_roots(&self, limit: u32) -> Result<Vec<StoredRoot>> {
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {ROOT_COLUMNS} FROM translog_roots ORDER BY log_date DESC LIMIT $1"
                )))
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                rows.iter().map(Self::root_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn all_roots(&self) -> Result<Vec<StoredRoot>> {
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {ROOT_COLUMNS} FROM translog_roots ORDER BY log_date"
                )))
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                rows.iter().map(Self::root_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn leaves(&self, date: NaiveDate) -> Result<Vec<LeafRow>> {
                let rows = sqlx::query(
                    "SELECT leaf_hash, executable_name, hash_sha256, version, platform, arch \
                     FROM translog_leaves WHERE log_date = $1 ORDER BY leaf_index",
                )
                .bind(date)
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                rows.iter()
                    .map(|r| {
                        Ok(LeafRow {
                            leaf_hash: r.try_get("leaf_hash").map_err(db_error)?,
                            executable_name: r.try_get("executable_name").map_err(db_error)?,
                            hash_sha256: r.try_get("hash_sha256").map_err(db_error)?,
                            version: r.try_get("version").map_err(db_error)?,
                            platform: r.try_get("platform").map_err(db_error)?,
                            arch: r.try_get("arch").map_err(db_error)?,
                        })
                    })
                    .collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn register_log_key(
                &self,
                key_id: &str,
                public_key: &str,
                now: DateTime<Utc>,
            ) -> Result<()> {
                sqlx::query(
                    "INSERT INTO translog_keys (key_id, public_key, added_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (key_id) DO NOTHING",
                )
                .bind(key_id)
                .bind(public_key)
                .bind(now.trunc_subsecs(6))
                .execute(&self.pool)
                .await
                .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn log_keys(&self) -> Result<Vec<SigningKeyRecord>> {
                let rows = sqlx::query(
                    "SELECT k.key_id, k.public_key, MIN(r.log_date) AS first_date, \
                     MAX(r.log_date) AS last_date FROM translog_keys k \
                     LEFT JOIN translog_roots r ON r.key_id = k.key_id \
                     GROUP BY k.key_id, k.public_key, k.added_at ORDER BY k.added_at",
                )
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
                rows.iter()
                    .map(|r| {
                        Ok(SigningKeyRecord {
                            key_id: r.try_get("key_id").map_err(db_error)?,
                            public_key: r.try_get("public_key").map_err(db_error)?,
                            first_date: r.try_get("first_date").map_err(db_error)?,
                            last_date: r.try_get("last_date").map_err(db_error)?,
                        })
                    })
                    .collect()
            }
        }
    };
}

translog_backend!(SqliteStore, SqliteRow);
translog_backend!(PgStore, PgRow);
