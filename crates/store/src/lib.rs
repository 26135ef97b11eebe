//! Storage for knowngood: one trait per aggregate, two implementations.
//!
//! [`open`] picks the backend from the URL (`sqlite:` or `postgres:`), applies that
//! backend's migrations and returns a [`Store`]. Both backends run the same SQL (runtime
//! queries with `$N` placeholders, which SQLite accepts), generated from one body by the
//! `backend!` macro, so they cannot drift apart; the conformance suite in
//! `tests/store/conformance.rs` runs against both.
//!
//! Vendor records are HMAC-signed on write and verified on every read. A record that fails
//! verification comes back with `integrity_ok = false`, is logged, and is counted by
//! [`Store::integrity_failures`].

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use model::{
    Arch, HashRecord, HashValue, NewRecord, Platform, RecordSigner, Role, TenantKind, Tier,
};

pub mod admin;
mod backend;
pub mod coverage;
pub mod downloads;
mod error;
mod lease;
mod migrate;
pub mod packages;
mod record_writes;
pub mod revocations;
pub mod roots;
pub mod staff;
pub mod users;

pub use backend::{PgStore, SqliteStore};
pub use error::{StoreError, unavailable_errors};
pub use lease::{JobLease, LeaseStore};

/// The most names [`RecordStore::executable_names_with_prefix`] answers.
pub const MAX_NAME_SUGGESTIONS: u32 = 10;
/// The shortest prefix [`RecordStore::executable_names_with_prefix`] searches by.
pub const MIN_NAME_PREFIX_CHARS: usize = 2;

pub type Result<T, E = model::Error> = std::result::Result<T, E>;

/// A page of results and the total number of matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: u64,
}

/// What recording a record did to the history of its executable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordOutcome {
    /// A new record (current, or superseded when older than the current version); the id
    /// of the record it superseded, if any.
    Inserted {
        id: String,
        superseded: Option<String>,
        /// The superseded record had the same version but a different SHA-256: a
        /// republish, which ingest must report rather than pass over.
        hash_changed: bool,
    },
    /// The same file is already recorded: the current record, or a superseded one with the
    /// same version and hashes.
    Unchanged { id: String },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryQuery {
    /// Any version's filename, or the bare name of an unversioned file.
    pub executable: String,
    pub platform: Option<Platform>,
    pub arch: Option<Arch>,
    pub limit: u32,
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportQuery {
    pub executable: Option<String>,
    pub platform: Option<Platform>,
    pub arch: Option<Arch>,
    /// Inclusive UTC days bounding `valid_from`.
    pub from: NaiveDate,
    pub to: NaiveDate,
}

/// Keyset position in the public feed's order (executable name, platform, arch, id): the
/// last record of the previous page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedPosition {
    pub executable_name: String,
    pub platform: String,
    pub arch: String,
    pub id: String,
}

/// Keyset position of an export stream: the last row sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportCursor {
    pub valid_from: DateTime<Utc>,
    pub id: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordStats {
    /// Distinct SHA-256 over current records whose HMAC verifies.
    pub known_good_hashes: u64,
    /// Vendors with a current record.
    pub total_vendors: u64,
    /// Platforms (never `universal`) of current records whose HMAC verifies.
    pub total_platforms: u64,
    /// Current records.
    pub total_records: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    pub team_id: String,
    pub kind: TenantKind,
    pub tier: Tier,
    pub suspended: bool,
    pub created_at: DateTime<Utc>,
}

/// An API key as stored: its public id and the HMAC of the secret key, never the key.
#[derive(Clone, PartialEq, Eq)]
pub struct NewApiKey {
    pub key_id: String,
    pub team_id: String,
    pub key_hash: String,
    pub role: Role,
    pub label: String,
}

impl std::fmt::Debug for NewApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewApiKey")
            .field("key_id", &self.key_id)
            .field("team_id", &self.team_id)
            .field("role", &self.role)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// Who a key belongs to and what it may do, as authentication needs it.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyPrincipal {
    pub key_id: String,
    pub key_hash: String,
    pub team_id: String,
    pub role: Role,
    pub tier: Tier,
    pub tenant_kind: TenantKind,
    pub revoked: bool,
    pub suspended: bool,
}

impl std::fmt::Debug for KeyPrincipal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPrincipal")
            .field("key_id", &self.key_id)
            .field("team_id", &self.team_id)
            .field("role", &self.role)
            .field("tier", &self.tier)
            .field("revoked", &self.revoked)
            .field("suspended", &self.suspended)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorHealth {
    pub vendor: String,
    pub last_success_at: Option<DateTime<Utc>>,
    pub last_error_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    /// Current records of this vendor.
    pub records: u64,
}

/// Vendor hash records and their history.
#[async_trait]
pub trait RecordStore: Send + Sync {
    /// Records a file. A version of the same family (vendor, family, platform, arch) at
    /// least as new as the current one (`model::version::compare`) supersedes the current
    /// record in the same transaction: its status becomes `superseded` and its `valid_until`
    /// the new record's `valid_from` (`now`, or a microsecond after the current record's
    /// start). An older version is inserted as superseded, ending where the next newer
    /// version starts (and starting at `now` when that is earlier: the channel's release
    /// date of a past version), so history order by `valid_from` is version order. A file
    /// already in the history (same version and hashes) is `Unchanged`.
    async fn record(&self, record: NewRecord, now: DateTime<Utc>) -> Result<RecordOutcome>;

    /// Records a batch in one transaction, in order, each exactly as [`record`] would
    /// (a later record of a family supersedes an earlier one of the same batch). All or
    /// nothing: an invalid record or a database error records none. One outcome per record.
    ///
    /// [`record`]: RecordStore::record
    async fn record_many(
        &self,
        records: Vec<NewRecord>,
        now: DateTime<Utc>,
    ) -> Result<Vec<RecordOutcome>>;

    /// Current records, optionally only those whose executable name equals `executable`
    /// case-insensitively; ordered by executable name.
    async fn current_records(&self, executable: Option<&str>) -> Result<Vec<HashRecord>>;

    /// At most `limit` current records in the public feed's order (executable name,
    /// platform, arch, id), those after `after`; a walk over every page reads each current
    /// record once, in bounded memory, whatever their number.
    async fn current_records_page(
        &self,
        after: Option<&FeedPosition>,
        limit: u32,
    ) -> Result<Vec<HashRecord>>;

    /// Records with any of the hashes (SHA-256, SHA-1 or MD5 by length); superseded
    /// records only when asked.
    async fn find_by_hashes(
        &self,
        hashes: &[HashValue],
        include_superseded: bool,
    ) -> Result<Vec<HashRecord>>;

    /// Every version of the executable's family, newest first.
    async fn history(&self, query: &HistoryQuery) -> Result<Page<HashRecord>>;

    /// How many records an export would return.
    async fn export_count(&self, query: &ExportQuery) -> Result<u64>;

    /// One page of an export in (valid_from, id) order, after the cursor.
    async fn export_page(
        &self,
        query: &ExportQuery,
        after: Option<&ExportCursor>,
        limit: u32,
    ) -> Result<Vec<HashRecord>>;

    async fn stats(&self) -> Result<RecordStats>;

    /// Distinct executable names (one spelling each) whose case-folded name starts with
    /// `prefix` ([`model::name_key`]), in name-key order; at most `limit` (capped at
    /// [`MAX_NAME_SUGGESTIONS`]). A prefix under [`MIN_NAME_PREFIX_CHARS`] characters
    /// matches nothing; `%`, `_` and `\` in it are plain text.
    async fn executable_names_with_prefix(&self, prefix: &str, limit: u32) -> Result<Vec<String>>;

    /// Every record, current and superseded, in id order after `after`, at most `limit`:
    /// the pages an in-memory view of all records is built from.
    async fn records_after(&self, after: Option<&str>, limit: u32) -> Result<Vec<HashRecord>>;

    /// Records written (inserted, superseded, interval fitted) by a transaction whose
    /// records epoch is above `epoch`, each with that epoch, in (epoch, id) order, at most
    /// `limit`: what an in-memory view tagged with `epoch` must apply to reflect the store.
    /// The next page is `(last epoch, Some(last id))`. Every write up to the epoch this
    /// store reports is included; later ones may be too.
    async fn records_changed_after(
        &self,
        epoch: u64,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(u64, HashRecord)>>;
}

/// Tenants (accounts) and their API keys.
#[async_trait]
pub trait AccountStore: Send + Sync {
    /// Creates a tenant together with its first key, atomically. `Conflict` if the team
    /// exists, or if `kind` is platform and a platform tenant already exists.
    async fn create_tenant_with_key(
        &self,
        team_id: &str,
        kind: TenantKind,
        tier: Tier,
        key: NewApiKey,
        now: DateTime<Utc>,
    ) -> Result<()>;

    async fn tenant(&self, team_id: &str) -> Result<Option<Tenant>>;

    /// The key whose HMAC is `key_hash`, with its tenant's tier and state.
    async fn key_by_hash(&self, key_hash: &str) -> Result<Option<KeyPrincipal>>;
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

/// Something derived from the records (the lookup index) that catches up with each new
/// records epoch before it becomes visible.
#[async_trait]
pub trait RecordsListener: Send + Sync {
    /// The records up to `epoch` are committed; `records_epoch()` shows it once this returns.
    async fn before_epoch(&self, epoch: u64);
}

/// The whole store.
#[async_trait]
pub trait Store:
    RecordStore
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

/// The connection pool: open connections, of which idle, and its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    pub size: u32,
    pub idle: u32,
    pub max: u32,
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
