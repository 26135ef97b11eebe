//! Signing-certificate revocation: which certificates signed which records, the CRL cache
//! per distribution-point URL, and revocations found on verified CRLs with their history.
//!
//! A record's `cert_revoked_at` is derived here and only here: the earliest revocation
//! date among the unreleased revocations of the certificates that signed it (its
//! `sig_thumbprint`, and every certificate of `record_signatures`: nested signatures too).
//! It lies outside the record HMAC (which covers what ingest observed), so setting and
//! clearing it never breaks verification. Changing it moves the records epoch, so caches of
//! the public feed notice.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::AssertSqlSafe;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::backend::{Columns, micros};
use crate::{Page, PgStore, Result, SqliteStore, db_error};

/// What is kept of one CRL URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrlCache {
    pub url: String,
    /// Issuer DN (RFC 4514) of the certificates that name this URL.
    pub issuer: String,
    /// The last CRL that verified, as fetched.
    pub body: Option<Vec<u8>>,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    /// Lowercase hex of the last verified CRL number.
    pub crl_number: Option<String>,
    pub this_update: Option<DateTime<Utc>>,
    pub next_update: Option<DateTime<Utc>>,
    /// When a CRL last verified (fetched, or confirmed unchanged by a 304).
    pub last_good_at: Option<DateTime<Utc>>,
    pub last_checked_at: Option<DateTime<Utc>>,
    pub last_error_at: Option<DateTime<Utc>>,
    /// Cleared by the next good check.
    pub last_error: Option<String>,
}

/// A revocation read from a verified CRL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    pub thumbprint: String,
    pub signer: String,
    pub issuer: String,
    pub serial: String,
    pub revoked_at: DateTime<Utc>,
    /// RFC 5280 reason name.
    pub reason: String,
    pub crl_url: String,
}

/// A revocation as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokedCert {
    pub thumbprint: String,
    pub signer: String,
    pub issuer: String,
    pub serial: String,
    pub revoked_at: DateTime<Utc>,
    pub reason: String,
    pub check_method: String,
    pub recorded_at: DateTime<Utc>,
    /// When a hold was lifted; None while in force.
    pub released_at: Option<DateTime<Utc>>,
    /// Vendors of the records signed with the certificate.
    pub affected_vendors: Vec<String>,
    /// A current record was signed with it.
    pub currently_active: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RevocationQuery {
    /// Inclusive bounds on `revoked_at`.
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    /// Case-insensitive substring of the signer.
    pub signer: Option<String>,
    pub limit: u32,
    pub offset: u64,
}

#[async_trait]
pub trait RevocationStore: Send + Sync {
    /// Notes that `thumbprint` signed the record (primary or nested signature).
    async fn record_signed_by(&self, record_id: &str, thumbprint: &str) -> Result<()>;
    async fn crl_cache(&self, url: &str) -> Result<Option<CrlCache>>;
    /// Every CRL URL's state, by URL.
    async fn crl_caches(&self) -> Result<Vec<CrlCache>>;
    async fn save_crl_cache(&self, cache: &CrlCache) -> Result<()>;
    /// Records a revocation (or a changed reason or date of the one in force) and sets
    /// `cert_revoked_at` on the records the certificate signed. False when nothing changed.
    async fn revoke(&self, revocation: &Revocation, now: DateTime<Utc>) -> Result<bool>;
    /// Lifts the revocation in force (a hold released), keeping it as history, and
    /// recomputes `cert_revoked_at` of its records. False when none was in force.
    async fn release(&self, thumbprint: &str, now: DateTime<Utc>) -> Result<bool>;
    /// Reason and date of each revocation in force, by thumbprint (no record is read).
    async fn revocations_in_force(
        &self,
    ) -> Result<std::collections::HashMap<String, (String, DateTime<Utc>)>>;
    /// Revocations in force.
    async fn active_revocations(&self) -> Result<Vec<RevokedCert>>;
    /// Every revocation, released ones too, newest `revoked_at` first.
    async fn revocation_history(&self, query: &RevocationQuery) -> Result<Page<RevokedCert>>;
    /// The revocation of a certificate: the one in force, else the latest released one.
    async fn revocation(&self, thumbprint: &str) -> Result<Option<RevokedCert>>;
}

const REVOKED_COLUMNS: &str = "thumbprint, signer, issuer, serial, revoked_at, reason, \
     check_method, recorded_at, released_at";

const CRL_COLUMNS: &str = "url, issuer, body, etag, last_modified, crl_number, this_update, \
     next_update, last_good_at, last_checked_at, last_error_at, last_error";

/// Records signed with `$1`. A union of two indexed lookups: written as
/// `sig_thumbprint = $1 OR id IN (…)`, PostgreSQL cannot use an index for an OR with a
/// subquery and scans every record.
const SIGNED_BY: &str = "id IN (SELECT h.id FROM hash_records h WHERE h.sig_thumbprint = $1 \
     UNION ALL SELECT s.record_id FROM record_signatures s WHERE s.thumbprint = $1)";

/// `cert_revoked_at` of a record from the revocations in force.
const DERIVED_REVOKED_AT: &str = "(SELECT MIN(r.revoked_at) FROM revoked_certificates r \
     WHERE r.released_at IS NULL AND (r.thumbprint = hash_records.sig_thumbprint OR r.thumbprint IN \
     (SELECT s.thumbprint FROM record_signatures s WHERE s.record_id = hash_records.id)))";

/// A LIKE pattern matching `text` anywhere, with LIKE's wildcards taken literally.
fn contains_pattern(text: &str) -> String {
    let escaped = text
        .to_lowercase()
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("%{escaped}%")
}

const HISTORY_FILTER: &str = "($1 IS NULL OR revoked_at >= $1) AND ($2 IS NULL OR revoked_at <= $2) \
     AND ($3 IS NULL OR lower(signer) LIKE $3 ESCAPE '\\')";

const RECORD_SIGNED_BY: &str = "INSERT INTO record_signatures (record_id, thumbprint) \
     VALUES ($1, $2) ON CONFLICT DO NOTHING";
const REVOCATION_IN_FORCE: &str = "SELECT id, reason, revoked_at FROM revoked_certificates \
     WHERE thumbprint = $1 AND released_at IS NULL";
/// A hold made final (RFC 5280 5.3.1), or a corrected date.
const AMEND_REVOCATION: &str = "UPDATE revoked_certificates SET reason = $1, revoked_at = $2, \
     crl_url = $3 WHERE id = $4";
const INSERT_REVOCATION: &str = "INSERT INTO revoked_certificates (thumbprint, signer, issuer, \
     serial, revoked_at, reason, check_method, crl_url, recorded_at) \
     VALUES ($1, $2, $3, $4, $5, $6, 'crl', $7, $8)";
const RELEASE: &str = "UPDATE revoked_certificates SET released_at = $1 \
     WHERE thumbprint = $2 AND released_at IS NULL";
const REVOCATIONS_IN_FORCE: &str = "SELECT thumbprint, reason, revoked_at \
     FROM revoked_certificates WHERE released_at IS NULL";

/// Vendors of the records signed with `$1`, and whether one of them is current.
fn impact_sql() -> String {
    format!(
        "SELECT vendor, MAX(CASE WHEN status = 'current' THEN 1 ELSE 0 END) AS active \
         FROM hash_records WHERE {SIGNED_BY} GROUP BY vendor ORDER BY vendor"
    )
}

fn derive_revoked_at_sql() -> String {
    format!("UPDATE hash_records SET cert_revoked_at = {DERIVED_REVOKED_AT} WHERE {SIGNED_BY}")
}

/// Tags the records signed with `$1` with the records epoch `$2`.
fn tag_changed_sql() -> String {
    format!("UPDATE hash_records SET changed_epoch = $2 WHERE {SIGNED_BY}")
}

fn crl_cache_sql() -> String {
    format!("SELECT {CRL_COLUMNS} FROM crl_cache WHERE url = $1")
}

fn crl_caches_sql() -> String {
    format!("SELECT {CRL_COLUMNS} FROM crl_cache ORDER BY issuer, url")
}

fn save_crl_cache_sql() -> String {
    format!(
        "INSERT INTO crl_cache ({CRL_COLUMNS}) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         ON CONFLICT (url) DO UPDATE SET issuer = excluded.issuer, body = excluded.body, \
         etag = excluded.etag, last_modified = excluded.last_modified, \
         crl_number = excluded.crl_number, this_update = excluded.this_update, \
         next_update = excluded.next_update, last_good_at = excluded.last_good_at, \
         last_checked_at = excluded.last_checked_at, last_error_at = excluded.last_error_at, \
         last_error = excluded.last_error"
    )
}

fn active_revocations_sql() -> String {
    format!(
        "SELECT {REVOKED_COLUMNS} FROM revoked_certificates WHERE released_at IS NULL \
         ORDER BY revoked_at DESC, id DESC"
    )
}

fn history_count_sql() -> String {
    format!("SELECT COUNT(*) FROM revoked_certificates WHERE {HISTORY_FILTER}")
}

fn history_page_sql() -> String {
    format!(
        "SELECT {REVOKED_COLUMNS} FROM revoked_certificates WHERE {HISTORY_FILTER} \
         ORDER BY revoked_at DESC, id DESC LIMIT $4 OFFSET $5"
    )
}

/// The revocation in force of `$1`, else its latest released one.
fn revocation_sql() -> String {
    format!(
        "SELECT {REVOKED_COLUMNS} FROM revoked_certificates WHERE thumbprint = $1 \
         ORDER BY CASE WHEN released_at IS NULL THEN 0 ELSE 1 END, released_at DESC, id DESC \
         LIMIT 1"
    )
}

fn revoked_from_row(r: &impl Columns) -> Result<RevokedCert> {
    Ok(RevokedCert {
        thumbprint: r.text("thumbprint")?,
        signer: r.text("signer")?,
        issuer: r.text("issuer")?,
        serial: r.text("serial")?,
        revoked_at: r.time("revoked_at")?,
        reason: r.text("reason")?,
        check_method: r.text("check_method")?,
        recorded_at: r.time("recorded_at")?,
        released_at: r.opt_time("released_at")?,
        affected_vendors: Vec::new(),
        currently_active: false,
    })
}

fn crl_from_row(r: &impl Columns) -> Result<CrlCache> {
    Ok(CrlCache {
        url: r.text("url")?,
        issuer: r.text("issuer")?,
        body: r.opt_bytes("body")?,
        etag: r.opt_text("etag")?,
        last_modified: r.opt_text("last_modified")?,
        crl_number: r.opt_text("crl_number")?,
        this_update: r.opt_time("this_update")?,
        next_update: r.opt_time("next_update")?,
        last_good_at: r.opt_time("last_good_at")?,
        last_checked_at: r.opt_time("last_checked_at")?,
        last_error_at: r.opt_time("last_error_at")?,
        last_error: r.opt_text("last_error")?,
    })
}

/// Adds the vendors of `impact_sql` rows to the certificate.
fn add_impact(cert: &mut RevokedCert, rows: &[impl Columns]) -> Result<()> {
    for r in rows {
        cert.affected_vendors.push(r.text("vendor")?);
        cert.currently_active |= r.int4("active")? == 1;
    }
    Ok(())
}

fn in_force_from_row(r: &impl Columns) -> Result<(String, (String, DateTime<Utc>))> {
    Ok((
        r.text("thumbprint")?,
        (r.text("reason")?, r.time("revoked_at")?),
    ))
}

macro_rules! revocation_backend {
    ($store:ident, $db:ty, $row:ty) => {
        impl $store {
            /// Fills in the vendors of the records each certificate signed and whether one
            /// of them is current.
            async fn with_impact(&self, mut certs: Vec<RevokedCert>) -> Result<Vec<RevokedCert>> {
                for cert in &mut certs {
                    let rows: Vec<$row> = sqlx::query(AssertSqlSafe(impact_sql()))
                        .bind(&cert.thumbprint)
                        .fetch_all(&self.pool)
                        .await
                        .map_err(db_error)?;
                    add_impact(cert, &rows)?;
                }
                Ok(certs)
            }

            /// Recomputes `cert_revoked_at` of every record the certificate signed, in the
            /// transaction, moving the records epoch and tagging those rows with it: two
            /// set-based statements, whatever the number of records. Returns the new epoch,
            /// if the certificate signed any record.
            async fn refresh_revoked_at(
                conn: &mut <$db as sqlx::Database>::Connection,
                thumbprint: &str,
            ) -> Result<Option<u64>> {
                let updated = sqlx::query(AssertSqlSafe(derive_revoked_at_sql()))
                    .bind(thumbprint)
                    .execute(&mut *conn)
                    .await
                    .map_err(db_error)?
                    .rows_affected();
                if updated == 0 {
                    return Ok(None);
                }
                let epoch = Self::bump_records_epoch(&mut *conn).await?;
                sqlx::query(AssertSqlSafe(tag_changed_sql()))
                    .bind(thumbprint)
                    .bind(i64::try_from(epoch).unwrap_or(i64::MAX))
                    .execute(&mut *conn)
                    .await
                    .map_err(db_error)?;
                Ok(Some(epoch))
            }
        }

        #[async_trait]
        impl RevocationStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn record_signed_by(&self, record_id: &str, thumbprint: &str) -> Result<()> {
                sqlx::query(RECORD_SIGNED_BY)
                    .bind(crate::records::id_bytes(record_id)?)
                    .bind(thumbprint.to_ascii_lowercase())
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn crl_cache(&self, url: &str) -> Result<Option<CrlCache>> {
                let row: Option<$row> = sqlx::query(AssertSqlSafe(crl_cache_sql()))
                    .bind(url)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                row.as_ref().map(crl_from_row).transpose()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn crl_caches(&self) -> Result<Vec<CrlCache>> {
                let rows: Vec<$row> = sqlx::query(AssertSqlSafe(crl_caches_sql()))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(crl_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn save_crl_cache(&self, c: &CrlCache) -> Result<()> {
                sqlx::query(AssertSqlSafe(save_crl_cache_sql()))
                    .bind(&c.url)
                    .bind(&c.issuer)
                    .bind(c.body.as_deref())
                    .bind(&c.etag)
                    .bind(&c.last_modified)
                    .bind(&c.crl_number)
                    .bind(c.this_update.map(micros))
                    .bind(c.next_update.map(micros))
                    .bind(c.last_good_at.map(micros))
                    .bind(c.last_checked_at.map(micros))
                    .bind(c.last_error_at.map(micros))
                    .bind(&c.last_error)
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn revoke(&self, r: &Revocation, now: DateTime<Utc>) -> Result<bool> {
                let thumbprint = r.thumbprint.to_ascii_lowercase();
                let revoked_at = micros(r.revoked_at);
                let mut tx = Self::write_tx(&self.pool).await?;
                let current: Option<$row> = sqlx::query(REVOCATION_IN_FORCE)
                    .bind(&thumbprint)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_error)?;
                match current {
                    Some(row) => {
                        let reason = row.text("reason")?;
                        let at = row.time("revoked_at")?;
                        if reason == r.reason && at == revoked_at {
                            return Ok(false);
                        }
                        sqlx::query(AMEND_REVOCATION)
                            .bind(&r.reason)
                            .bind(revoked_at)
                            .bind(&r.crl_url)
                            .bind(row.int("id")?)
                            .execute(&mut *tx)
                            .await
                            .map_err(db_error)?;
                    }
                    None => {
                        sqlx::query(INSERT_REVOCATION)
                            .bind(&thumbprint)
                            .bind(&r.signer)
                            .bind(&r.issuer)
                            .bind(r.serial.to_ascii_lowercase())
                            .bind(revoked_at)
                            .bind(&r.reason)
                            .bind(&r.crl_url)
                            .bind(micros(now))
                            .execute(&mut *tx)
                            .await
                            .map_err(db_error)?;
                    }
                }
                let epoch = Self::refresh_revoked_at(&mut tx, &thumbprint).await?;
                tx.commit().await.map_err(db_error)?;
                if let Some(epoch) = epoch {
                    self.publish_records_epoch(epoch).await;
                }
                Ok(true)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn release(&self, thumbprint: &str, now: DateTime<Utc>) -> Result<bool> {
                let thumbprint = thumbprint.to_ascii_lowercase();
                let mut tx = Self::write_tx(&self.pool).await?;
                let released = sqlx::query(RELEASE)
                    .bind(micros(now))
                    .bind(&thumbprint)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?
                    .rows_affected();
                if released == 0 {
                    return Ok(false);
                }
                let epoch = Self::refresh_revoked_at(&mut tx, &thumbprint).await?;
                tx.commit().await.map_err(db_error)?;
                if let Some(epoch) = epoch {
                    self.publish_records_epoch(epoch).await;
                }
                Ok(true)
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn revocations_in_force(
                &self,
            ) -> Result<std::collections::HashMap<String, (String, DateTime<Utc>)>> {
                let rows: Vec<$row> = sqlx::query(REVOCATIONS_IN_FORCE)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(in_force_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn active_revocations(&self) -> Result<Vec<RevokedCert>> {
                let rows: Vec<$row> = sqlx::query(AssertSqlSafe(active_revocations_sql()))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                let certs = rows
                    .iter()
                    .map(revoked_from_row)
                    .collect::<Result<Vec<_>>>()?;
                self.with_impact(certs).await
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn revocation_history(&self, q: &RevocationQuery) -> Result<Page<RevokedCert>> {
                let signer = q.signer.as_deref().map(contains_pattern);
                let total: i64 = sqlx::query_scalar(AssertSqlSafe(history_count_sql()))
                    .bind(q.since.map(micros))
                    .bind(q.until.map(micros))
                    .bind(&signer)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error)?;
                let rows: Vec<$row> = sqlx::query(AssertSqlSafe(history_page_sql()))
                    .bind(q.since.map(micros))
                    .bind(q.until.map(micros))
                    .bind(&signer)
                    .bind(i64::from(q.limit))
                    .bind(i64::try_from(q.offset).unwrap_or(i64::MAX))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                let certs = rows
                    .iter()
                    .map(revoked_from_row)
                    .collect::<Result<Vec<_>>>()?;
                Ok(Page {
                    items: self.with_impact(certs).await?,
                    total: u64::try_from(total).unwrap_or(0),
                })
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn revocation(&self, thumbprint: &str) -> Result<Option<RevokedCert>> {
                let row: Option<$row> = sqlx::query(AssertSqlSafe(revocation_sql()))
                    .bind(thumbprint.to_ascii_lowercase())
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error)?;
                let Some(row) = row else { return Ok(None) };
                let cert = revoked_from_row(&row)?;
                Ok(self.with_impact(vec![cert]).await?.pop())
            }
        }
    };
}

revocation_backend!(SqliteStore, sqlx::Sqlite, SqliteRow);
revocation_backend!(PgStore, sqlx::Postgres, PgRow);
