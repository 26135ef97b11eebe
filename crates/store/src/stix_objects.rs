//! TAXII objects by id (`stix_object_records`, `stix_object_position`): which records name
//! an object, found by the object's id. The ids are digests of what the objects describe,
//! so the caller computes them from the records' changes and notes them here; the table
//! holds keys, not ids (see the migration), and the caller checks what a key finds.

use async_trait::async_trait;
use model::HashRecord;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{AssertSqlSafe, Row as _};

use crate::backend::Params;
use crate::records::RECORD_COLUMNS;
use crate::{PgStore, Result, SqliteStore, db_error};

/// How far the table has followed the records' changes: every record changed up to
/// (`epoch`, `after_id`) in `records_changed_after`'s order has its objects noted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangePosition {
    pub epoch: u64,
    pub after_id: Option<String>,
}

#[async_trait]
pub trait StixObjectStore: Send + Sync {
    /// Where noting the records' objects stands.
    async fn stix_object_position(&self) -> Result<ChangePosition>;

    /// Notes that each record names the object of its key (`(object key, record id)`),
    /// skipping pairs already noted, and moves the position to `to` unless it is already
    /// further: one transaction, so the position never runs ahead of the rows.
    async fn note_stix_objects(&self, named: &[(i64, &str)], to: &ChangePosition) -> Result<()>;

    /// The records, current or not, noted as naming an object whose key is `object_key`,
    /// at most `limit`.
    async fn records_naming_stix_object(
        &self,
        object_key: i64,
        limit: u32,
    ) -> Result<Vec<HashRecord>>;
}

/// Pairs per insert statement: two parameters each, well under both backends' limits.
const NOTE_BATCH: usize = 500;

const POSITION: &str = "SELECT epoch, after_id FROM stix_object_position WHERE id = 1";
/// Moves forward only: replicas may note the same changes at once. No `after_id` is the
/// whole epoch, after every id of it.
const MOVE_POSITION: &str = "UPDATE stix_object_position SET epoch = $1, after_id = $2 \
     WHERE id = 1 AND (epoch < $1 OR (epoch = $1 AND after_id IS NOT NULL \
     AND ($2 IS NULL OR after_id < $2)))";
const RECORD_KEYS: &str =
    "SELECT record_key FROM stix_object_records WHERE object_key = $1 LIMIT $2";

/// The insert of the `(object_key, record_key)` rows whose placeholders `values` lists.
fn note_sql(values: &str) -> String {
    format!(
        "INSERT INTO stix_object_records (object_key, record_key) VALUES {values} \
         ON CONFLICT DO NOTHING"
    )
}

/// Records whose id starts with the key's 8 bytes: `$1` those bytes (which sort before
/// every id starting with them), `$2` the same followed by eight 0xff (the last such id).
fn records_with_key_sql() -> String {
    format!("SELECT {RECORD_COLUMNS} FROM hash_records WHERE id >= $1 AND id <= $2")
}

/// The key of a record id: its first 8 bytes. Record ids are 32 lowercase hex digits
/// ([`crate::new_id`]); any other id has no key and is not noted.
fn record_key(id: &str) -> Option<i64> {
    let prefix = id.get(..16)?;
    if !prefix
        .bytes()
        .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    u64::from_str_radix(prefix, 16).ok().map(|k| k as i64)
}

/// The first 8 bytes of the ids of a key.
fn key_prefix(key: i64) -> [u8; 8] {
    (key as u64).to_be_bytes()
}

macro_rules! stix_objects_backend {
    ($store:ident, $row:ty, $params:expr) => {
        #[async_trait]
        impl StixObjectStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn stix_object_position(&self) -> Result<ChangePosition> {
                let row: $row = sqlx::query(POSITION)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error)?;
                let epoch: i64 = row.try_get("epoch").map_err(db_error)?;
                Ok(ChangePosition {
                    epoch: u64::try_from(epoch).unwrap_or_default(),
                    after_id: row.try_get("after_id").map_err(db_error)?,
                })
            }

            #[tracing::instrument(level = "debug", skip_all, fields(pairs = named.len()))]
            async fn note_stix_objects(
                &self,
                named: &[(i64, &str)],
                to: &ChangePosition,
            ) -> Result<()> {
                let keyed: Vec<(i64, i64)> = named
                    .iter()
                    .filter_map(|(object, id)| Some((*object, record_key(id)?)))
                    .collect();
                let mut tx = Self::write_tx(&self.pool).await?;
                for batch in keyed.chunks(NOTE_BATCH) {
                    let sql = note_sql(&$params.rows(batch.len(), 2));
                    let mut insert = sqlx::query(AssertSqlSafe(sql));
                    for (object, record) in batch {
                        insert = insert.bind(*object).bind(*record);
                    }
                    insert.execute(&mut *tx).await.map_err(db_error)?;
                }
                sqlx::query(MOVE_POSITION)
                    .bind(i64::try_from(to.epoch).unwrap_or(i64::MAX))
                    .bind(to.after_id.as_deref())
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                tx.commit().await.map_err(db_error)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn records_naming_stix_object(
                &self,
                object_key: i64,
                limit: u32,
            ) -> Result<Vec<HashRecord>> {
                let keys: Vec<i64> = sqlx::query_scalar(RECORD_KEYS)
                    .bind(object_key)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                let mut records = Vec::with_capacity(keys.len());
                for key in keys {
                    let prefix = key_prefix(key);
                    let rows: Vec<$row> = sqlx::query(AssertSqlSafe(records_with_key_sql()))
                        .bind(prefix.as_slice())
                        .bind([prefix, [0xff; 8]].concat())
                        .fetch_all(&self.pool)
                        .await
                        .map_err(db_error)?;
                    for row in &rows {
                        records.push(self.record_from_row(row)?);
                    }
                }
                records.truncate(limit as usize);
                Ok(records)
            }
        }
    };
}

stix_objects_backend!(SqliteStore, SqliteRow, Params::Anonymous);
stix_objects_backend!(PgStore, PgRow, Params::Numbered);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_keys_are_the_first_8_bytes_of_hex_ids() {
        let id = "0123456789abcdef0011223344556677";
        let key = record_key(id).unwrap();
        assert_eq!(key as u64, 0x0123_4567_89ab_cdef);
        assert_eq!(hex::encode(key_prefix(key)), &id[..16]);
        // The top bit set makes a negative key; its prefix is still the id's.
        let high = "f123456789abcdef0011223344556677";
        let key = record_key(high).unwrap();
        assert!(key < 0);
        assert_eq!(hex::encode(key_prefix(key)), &high[..16]);
        for no_key in ["", "0123", "0123456789ABCDEF00", "0123456789abcdeg00"] {
            assert_eq!(record_key(no_key), None, "{no_key:?}");
        }
    }
}
