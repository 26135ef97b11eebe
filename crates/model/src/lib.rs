//! Domain types and rules of knowngood, free of I/O.
//!
//! Everything that the store, the server and the CLI must agree on lives here: how a
//! submitted hash is parsed, what a hash record is and how it is signed, which platforms,
//! tiers, roles and permissions exist, and the error kinds every layer reports.

pub mod clock;
pub mod error;
pub mod failure;
pub mod hash;
pub mod record;
pub mod redact;
pub mod roles;
pub mod staff;
pub mod version;

pub use clock::{Clock, FixedClock, SystemClock};
pub use error::{Error, shown};
pub use failure::{CheckFailure, ProblemKind};
pub use hash::{HashAlgo, HashValue};
pub use record::{
    Arch, Classification, DownloadAudit, HashRecord, NewRecord, Platform, RecordOutcome,
    RecordSigner, RecordStatus, family_of, name_key,
};
pub use redact::{redact_url, redact_urls};
pub use roles::{Permission, Role, TenantKind, Tier};
pub use staff::{ImpersonationMode, PlatformSettings};
