//! What ingestion leaves behind besides records: the download audit (proof that artifacts
//! were hashed in a stream and never kept) and change alerts for republished packages.

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::backend::Columns;
use crate::{Page, PgStore, Result, SqliteStore, db_error, new_id};

pub use model::DownloadAudit;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownloadQuery {
    pub vendor: Option<String>,
    /// Inclusive bounds on `downloaded_at`.
    pub from: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    pub limit: u32,
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeAlert {
    pub id: String,
    pub ecosystem: String,
    pub package_name: String,
    pub version: String,
    pub previous_sha256: String,
    pub latest_sha256: String,
    pub observed_at: DateTime<Utc>,
}

/// A certificate that signed a downloaded PE (primary or nested signature).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningCert {
    /// Lowercase hex SHA-1 of the certificate's DER.
    pub thumbprint: String,
    pub signer: String,
    pub issuer: String,
    pub serial: String,
    pub crl_urls: Vec<String>,
    /// DER of the issuing CA's certificate, when the signature shipped it.
    pub issuer_cert: Option<Vec<u8>>,
}

#[async_trait]
pub trait DownloadStore: Send + Sync {
    /// Remembers a signing certificate (its CRL distribution points for the revocation
    /// checker); seeing it again refreshes `last_seen_at` and the URLs.
    async fn signing_cert_seen(&self, cert: &SigningCert, now: DateTime<Utc>) -> Result<()>;
    /// Every known signing certificate, by thumbprint.
    async fn signing_certs(&self) -> Result<Vec<SigningCert>>;
    async fn record_download(&self, audit: &DownloadAudit) -> Result<()>;
    /// Newest first.
    async fn downloads(&self, query: &DownloadQuery) -> Result<Page<DownloadAudit>>;
    /// Stores an alert and returns its id.
    async fn add_change_alert(&self, alert: &ChangeAlert) -> Result<String>;
}

fn count(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

const DOWNLOAD_FILTER: &str = "($1 IS NULL OR lower(vendor) = lower($1)) \
     AND ($2 IS NULL OR downloaded_at >= $2) AND ($3 IS NULL OR downloaded_at <= $3)";

const SIGNING_CERT_SEEN: &str = "INSERT INTO signing_certificates (thumbprint, signer, issuer, \
     serial, crl_urls, first_seen_at, last_seen_at, issuer_cert) \
     VALUES ($1, $2, $3, $4, $5, $6, $6, $7) \
     ON CONFLICT (thumbprint) DO UPDATE SET crl_urls = excluded.crl_urls, \
     last_seen_at = excluded.last_seen_at, \
     issuer_cert = COALESCE(excluded.issuer_cert, signing_certificates.issuer_cert)";
const SIGNING_CERTS: &str = "SELECT thumbprint, signer, issuer, serial, crl_urls, issuer_cert \
     FROM signing_certificates ORDER BY thumbprint";
const RECORD_DOWNLOAD: &str = "INSERT INTO download_audit (vendor, downloaded_at, deleted_at, \
     storage_method, url, size_bytes, hash_record_id) \
     VALUES ($1, $2, $2, 'stream', $3, $4, $5)";
const ADD_CHANGE_ALERT: &str = "INSERT INTO change_alerts (id, ecosystem, package_name, version, \
     previous_sha256, latest_sha256, observed_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";

fn downloads_count_sql() -> String {
    format!("SELECT COUNT(*) FROM download_audit WHERE {DOWNLOAD_FILTER}")
}

fn downloads_page_sql() -> String {
    format!(
        "SELECT vendor, downloaded_at, url, size_bytes, hash_record_id FROM download_audit \
         WHERE {DOWNLOAD_FILTER} ORDER BY downloaded_at DESC, id DESC LIMIT $4 OFFSET $5"
    )
}

fn cert_from_row(r: &impl Columns) -> Result<SigningCert> {
    let urls = r.text("crl_urls")?;
    Ok(SigningCert {
        thumbprint: r.text("thumbprint")?,
        signer: r.text("signer")?,
        issuer: r.text("issuer")?,
        serial: r.text("serial")?,
        crl_urls: urls
            .lines()
            .map(str::to_string)
            .filter(|u| !u.is_empty())
            .collect(),
        issuer_cert: r.opt_bytes("issuer_cert")?,
    })
}

fn download_from_row(r: &impl Columns) -> Result<DownloadAudit> {
    Ok(DownloadAudit {
        vendor: r.text("vendor")?,
        downloaded_at: r.time("downloaded_at")?,
        url: r.text("url")?,
        size_bytes: count(r.int("size_bytes")?),
        hash_record_id: r.text("hash_record_id")?,
    })
}

macro_rules! ingest_backend {
    ($store:ident, $row:ty) => {
        #[async_trait]
        impl DownloadStore for $store {
            #[tracing::instrument(level = "debug", skip_all)]
            async fn signing_cert_seen(&self, c: &SigningCert, now: DateTime<Utc>) -> Result<()> {
                let now = now.trunc_subsecs(6);
                sqlx::query(SIGNING_CERT_SEEN)
                    .bind(c.thumbprint.to_ascii_lowercase())
                    .bind(&c.signer)
                    .bind(&c.issuer)
                    .bind(c.serial.to_ascii_lowercase())
                    .bind(c.crl_urls.join("\n"))
                    .bind(now)
                    .bind(c.issuer_cert.as_deref())
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn signing_certs(&self) -> Result<Vec<SigningCert>> {
                let rows: Vec<$row> = sqlx::query(SIGNING_CERTS)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                rows.iter().map(cert_from_row).collect()
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn record_download(&self, a: &DownloadAudit) -> Result<()> {
                let at = a.downloaded_at.trunc_subsecs(6);
                sqlx::query(RECORD_DOWNLOAD)
                    .bind(&a.vendor)
                    .bind(at)
                    .bind(&a.url)
                    .bind(i64::try_from(a.size_bytes).unwrap_or(i64::MAX))
                    .bind(&a.hash_record_id)
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(())
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn downloads(&self, q: &DownloadQuery) -> Result<Page<DownloadAudit>> {
                let total: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(downloads_count_sql()))
                    .bind(&q.vendor)
                    .bind(q.from)
                    .bind(q.until)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error)?;
                let rows: Vec<$row> = sqlx::query(sqlx::AssertSqlSafe(downloads_page_sql()))
                    .bind(&q.vendor)
                    .bind(q.from)
                    .bind(q.until)
                    .bind(i64::from(q.limit))
                    .bind(i64::try_from(q.offset).unwrap_or(i64::MAX))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(Page {
                    items: rows
                        .iter()
                        .map(download_from_row)
                        .collect::<Result<Vec<_>>>()?,
                    total: count(total),
                })
            }

            #[tracing::instrument(level = "debug", skip_all)]
            async fn add_change_alert(&self, a: &ChangeAlert) -> Result<String> {
                let id = if a.id.is_empty() {
                    new_id()
                } else {
                    a.id.clone()
                };
                sqlx::query(ADD_CHANGE_ALERT)
                    .bind(&id)
                    .bind(&a.ecosystem)
                    .bind(&a.package_name)
                    .bind(&a.version)
                    .bind(&a.previous_sha256)
                    .bind(&a.latest_sha256)
                    .bind(a.observed_at.trunc_subsecs(6))
                    .execute(&self.pool)
                    .await
                    .map_err(db_error)?;
                Ok(id)
            }
        }
    };
}

ingest_backend!(SqliteStore, SqliteRow);
ingest_backend!(PgStore, PgRow);
