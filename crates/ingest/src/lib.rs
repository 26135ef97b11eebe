//! Ingest of knowngood: turning vendor downloads into hash records.
//!
//! - [`hasher`]: [`TripleHasher`], SHA-256, SHA-1 and MD5 in one pass with one thread per
//!   algorithm, and [`verify_published`] to compare a vendor-published hash with the result.
//! - [`download`]: [`download_and_hash`] streams an HTTP(S) body through the hasher within
//!   size and time limits, never writing the content to disk, and reads the Authenticode
//!   signer of PE files on the way.
//! - [`authenticode`]: signer extraction from PE bytes, in memory ([`extract_signer`]) or
//!   from a stream ([`SignatureCapture`]).
//!
//! Vendor fetchers, version discovery, the download audit row and record upserts come later
//! and will build on these pieces.

pub mod authenticode;
pub mod download;
pub mod hasher;

pub use authenticode::{AuthenticodeError, SignatureCapture, SignerInfo, extract_signer};
pub use download::{DownloadError, DownloadLimits, Downloaded, download_and_hash};
pub use hasher::{Digests, HasherError, PublishedHashError, TripleHasher, verify_published};
