//! Storage for knowngood: one trait per aggregate, two implementations.
//!
//! [`open`] picks the backend from the URL (`sqlite:` or `postgres:`), applies that
//! backend's migrations and returns a [`Store`]. Each aggregate has one file holding its
//! trait, its SQL and its implementation for both backends (`records.rs`, `accounts.rs`,
//! `health.rs`, `admin.rs`, …). Both backends run the same SQL (runtime queries with `$N`
//! placeholders, which SQLite accepts; a name-prefix search alone adds a range on SQLite,
//! `records::PrefixSearch`, the statements that bind hundreds of values mark them `?` on
//! SQLite, `backend::Params`, and the compaction's rewrite moves a row on SQLite,
//! `record_compaction`) and the same row mapping, from plain functions that a
//! thin macro per aggregate calls for each backend, so they cannot drift apart; the
//! conformance suite in `tests/store/conformance.rs` runs against both.
//!
//! Vendor records are HMAC-signed on write and verified on every read. A record that fails
//! verification comes back with `integrity_ok = false`, is logged, and is counted by
//! [`Store::integrity_failures`].

use std::sync::Arc;

use async_trait::async_trait;
use model::RecordSigner;

// A record's name key and family, as SQL. Each is stored as '' when it equals what it is
// derived from (most names are lower case and carry no version, so the two copies cost as
// much as the name itself); their indexes are on these expressions, which queries must
// spell exactly so for the planner to use them (migration 0031).
macro_rules! name_key_sql {
    () => {
        "COALESCE(NULLIF(name_key, ''), executable_name)"
    };
}
macro_rules! family_sql {
    () => {
        "COALESCE(NULLIF(family, ''), NULLIF(name_key, ''), executable_name)"
    };
}

mod accounts;
pub mod admin;
mod backend;
pub mod coverage;
pub mod downloads;
mod error;
mod health;
mod lease;
mod migrate;
mod nodelay;
pub mod packages;
mod record_compaction;
mod record_writes;
mod records;
pub mod revocations;
pub mod roots;
pub mod staff;
pub mod stix_objects;
pub mod users;

pub use accounts::{AccountStore, KeyPrincipal, NewApiKey, Tenant};
pub use backend::{PgStore, SqliteStore};
pub use error::{StoreError, unavailable_errors};
pub use health::{HealthStore, PoolStats, VendorHealth};
pub use lease::{JobLease, LeaseStore};
pub use record_compaction::{CompactionProgress, RecordCompactionStore};
pub use records::{
    AddedPosition, CurrentSearch, ExportCursor, ExportQuery, FeedPosition, HistoryQuery,
    MAX_NAME_SUGGESTIONS, MIN_NAME_PREFIX_CHARS, RecordOutcome, RecordStats, RecordStore,
    RecordsListener,
};

pub type Result<T, E = model::Error> = std::result::Result<T, E>;

/// A page of results and the total number of matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: u64,
}

/// The whole store.
#[async_trait]
pub trait Store:
    RecordStore
    + RecordCompactionStore
    + AccountStore
    + HealthStore
    + admin::AdminStore
    + roots::RootStore
    + downloads::DownloadStore
    + revocations::RevocationStore
    + packages::PackageStore
    + coverage::CoverageStore
    + LeaseStore
    + staff::StaffStore
    + stix_objects::StixObjectStore
    + users::UserStore
{
    /// Distinct records whose HMAC failed verification since start.
    fn integrity_failures(&self) -> u64;

    /// The records epoch as this process last saw it: a database counter that moves with
    /// every write of new records, so in-memory views of the records (lookup index, feed
    /// caches) can tell they are stale without asking the database. Writes through this
    /// process move it at once; other replicas' writes show after [`poll_records_epoch`].
    ///
    /// [`poll_records_epoch`]: Store::poll_records_epoch
    fn records_epoch(&self) -> u64;

    /// Reads the records epoch from the database (other replicas' writes) and returns it.
    async fn poll_records_epoch(&self) -> Result<u64>;

    /// Tells `listener` of every records epoch before [`records_epoch`](Store::records_epoch)
    /// shows it (this process's writes, and other replicas' found by the poll), so that a view
    /// of the records can catch up before anyone asks it. One listener; a new one replaces it.
    fn listen_to_records(&self, listener: std::sync::Weak<dyn RecordsListener>);

    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// Waits for in-flight statements and closes every connection.
    async fn close(&self);
}

/// How the store uses its database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// Longest wait for a connection from the pool (connecting included) before a
    /// statement fails as unavailable; the bound on how long a request can wait for a
    /// database that went away.
    pub acquire_timeout: std::time::Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            acquire_timeout: std::time::Duration::from_secs(5),
        }
    }
}

/// Opens the store named by the URL, applying its migrations.
pub async fn open(url: &str, signer: RecordSigner) -> Result<Arc<dyn Store>> {
    open_with(url, signer, StoreOptions::default()).await
}

/// [`open`] with these options.
pub async fn open_with(
    url: &str,
    signer: RecordSigner,
    options: StoreOptions,
) -> Result<Arc<dyn Store>> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::connect(url, signer).await?))
    } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        Ok(Arc::new(PgStore::connect_with(url, signer, options).await?))
    } else {
        // A configuration mistake of the operator's, not a caller's bad request.
        Err(StoreError::Config(format!(
            "database URL must start with sqlite: or postgres: (got {:?})",
            url.split(':').next().unwrap_or("")
        ))
        .into())
    }
}

/// A fresh opaque identifier.
pub fn new_id() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// A driver error, classified ([`StoreError`]) and mapped to the domain's kinds.
pub(crate) fn db_error(e: sqlx::Error) -> model::Error {
    StoreError::from(e).into()
}
