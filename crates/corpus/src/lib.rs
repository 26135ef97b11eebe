//! The NSRL reference corpus of knowngood: import from NIST RDS v3 SQLite databases, an
//! immutable on-disk index loaded into memory (or mapped), lookups by SHA-256 / SHA-1 / MD5,
//! and generations swapped atomically while lookups continue.
//!
//! No server, async runtime or project database here: the crate reads SQLite files (rusqlite)
//! and writes plain files.
//!
//! # Import
//! [`import`] reads one or more RDS v3 databases. The layout is detected from the schema:
//! *minimal* has a `FILE` table plus the `DISTINCT_HASH` view; *full* has `FILE` and `PKG` as
//! views over normalised tables (`METADATA`, `PACKAGE_OBJECT`, `APPLICATION`, ...). Both are
//! read through `FILE(sha256, sha1, md5, file_name, package_id)` and
//! `PKG(package_id, name, version)`; anything else is [`Error::UnrecognisedSchema`].
//!
//! Each input has a source: `nsrl_minimal` / `nsrl_full` for the modern set, `nsrl_<set>` for
//! android, ios and legacy. A hash found in several inputs keeps the richest source: full layout
//! before minimal, then modern, android, ios, legacy. Among the rows of the winning source the
//! representative row is the one with the smallest `file_name` bytes, then the smallest
//! product bytes. `product_name` is `PKG.name PKG.version` (the smallest by bytes when a package
//! has several PKG rows). Hashes are stored as bytes, so upper/lowercase input does not matter.
//!
//! Memory stays bounded whatever the input size (see [`ImportOptions::memory_budget`]): rows are
//! collected in a buffer, sorted, reduced to one row per SHA-256 and spilled as sorted runs into
//! the new generation's temporary directory, while the next buffer fills (a second thread sorts).
//! A k-way merge then yields the distinct SHA-256 in order; the SHA-1 and MD5 tables are built
//! the same way with fixed-width external sorts.
//!
//! # On-disk format (format version 1)
//! A generation is a directory `gen-<seq>` (eight decimal digits) under the corpus root. All
//! integers are little-endian unless said otherwise.
//!
//! | file | content |
//! |---|---|
//! | `sha256.rows` | `N` rows of 32 bytes: the distinct SHA-256 values, sorted bytewise. Row `i` describes metadata row `i` (the pointer is implicit). |
//! | `sha1.rows` | rows of 24 bytes: SHA-1 (20 bytes) + `u32` metadata row index, sorted by SHA-1. |
//! | `md5.rows` | rows of 20 bytes: MD5 (16 bytes) + `u32` metadata row index, sorted by MD5. |
//! | `<alg>.buckets` | `2^b + 1` `u32` values: entry `p` is the first row whose key prefix is `>= p`, where the prefix is the first 4 key bytes read big-endian, shifted right by `32 - b`; the last entry is the row count. `b` (1..=24) is chosen per table so that a bucket holds about 4-8 rows. |
//! | `meta.rows` | `N` rows of 10 bytes: source id (`u8`, index into the manifest's `sources`), `file_name` offset (`u40`), `product_name` offset (`u32`) into the string pool. |
//! | `strings.pool` | de-duplicated UTF-8 strings, each a LEB128 length followed by its bytes; all product names come first (hence their 32-bit offsets), then file names. |
//! | `manifest.json` | format version, generation name, `imported_at`, counts, table shapes, sources with counts, RDS versions (from each input's `VERSION` table when present), the inputs, and the byte size and SHA-256 of every other file. |
//!
//! When a SHA-1 or MD5 value belongs to several SHA-256 (a collision), the lowest metadata row
//! wins.
//!
//! # Lookups
//! At the full NSRL size (tens of millions of hashes, several GB of tables) nearly every
//! access a lookup makes is a cache miss that goes to DRAM, so its cost is the number of
//! *dependent* accesses, each of which also pays for address translation. Three things keep
//! that number and that price low:
//!
//! - **An index that stays in the CPU cache.** Opening derives from each `<alg>.buckets` (up
//!   to 64 MiB, which would cost a DRAM access of its own) a compact index of at most 2^24
//!   buckets: one `u32` start per 64 buckets and a one-byte correction per bucket to the
//!   linear interpolation between them, at most 17 MiB per table, which stays in the
//!   last-level cache. Hash values are uniform, so the corrections are small; a table they
//!   cannot describe gets a plain table of at most 2^20 starts instead. The format is
//!   unchanged: the index is rebuilt at every open.
//! - **Interpolation inside the bucket.** The key's position is interpolated from its bits
//!   below the bucket's, and only a window of about 1.6 standard deviations (plus a row) on
//!   each side is fetched, all its cache lines at once: every extra line costs more than the
//!   rare second read it saves, a binary search of the rest of the bucket. Rows are compared
//!   by their first eight bytes as one number first, which nearly always decides. A miss
//!   then costs one DRAM access; a SHA-256 hit two (row `i` is metadata row `i`, so the
//!   window's metadata is fetched together with the rows, then the file-name string;
//!   product names are few and stay cached); a SHA-1 or MD5 hit three.
//!   [`Generation::lookup_batch`] overlaps these accesses across a round of 64 hashes with
//!   prefetches, so a 100-hash request pays for far fewer than 100 chains.
//! - **Resident memory on huge pages** ([`Memory::Resident`], the default). With 4 KiB pages
//!   each of those accesses also misses the TLB, and the page walk is itself made of memory
//!   accesses (more so in a virtual machine): a random read in 4 GB took 530 ns with 4 KiB
//!   pages and 340 ns with huge pages on our 2-core build machines. Opening reads the
//!   tables into anonymous memory advised for transparent huge pages (2 MiB), verifying the
//!   checksums on the bytes as they are read; a few thousand TLB entries then cover the
//!   generation. The kernel cannot reclaim anonymous memory without swap, so hot lookups
//!   never wait for the disk, even where the kernel proactively reclaims page cache it sees
//!   as cold (DAMON, as on our build machines): a table probed at random looks cold page by
//!   page. The price is the generation's size in RAM (at most 86 bytes per distinct hash plus
//!   the string pool, twice while a reload opens the next generation) and a read of every
//!   file at open; when `MemAvailable` is short, opening fails with [`Error::NoMemory`] rather
//!   than risking the OOM killer, and a reload keeps the live generation.
//!   [`Memory::Mapped`] maps the files instead: instant, no memory of its own, for tools,
//!   tests and small machines.
//!
//! # Generations
//! The root holds `gen-<seq>` directories, a `CURRENT` file naming the live one, an
//! `IMPORT.lock` file, and `.tmp-gen-<seq>` directories while an import runs. An import holds
//! the lock, writes into `.tmp-gen-<seq>` (sorted runs included), fsyncs every file, writes the
//! manifest, renames the directory to `gen-<seq>`, re-opens it, then replaces `CURRENT`
//! atomically (write a temporary file, fsync, rename, fsync the directory). A killed import
//! leaves only a `.tmp-*` directory, never read and removed by the next open or import.
//!
//! [`Corpus`] holds the live [`Generation`] in an `ArcSwap`: [`Corpus::reload`] opens the
//! generation named by `CURRENT` and swaps it in; lookups holding the old `Arc` finish on it and
//! the old directory is deleted when the last `Arc` drops. Opening checks the manifest, every
//! file size and the bucket tables; [`Verify::Full`] (the default) also re-hashes every file
//! (about 1.5 GB/s with SHA extensions, so a few seconds for the full NSRL; when resident, on
//! the one read that loads the file). [`Verify::Sizes`] skips the hashing for a fast start.
//! Lookups never trust the files: every offset is bounds-checked, so a damaged file gives
//! misses, never a panic. [`OpenOptions`] chooses the checks and the [`Memory`] mode for
//! every generation a [`Corpus`] opens; [`Generation::open`] (used by the import to check
//! what it wrote) maps the files.

mod corpus;
mod error;
mod format;
mod generation;
mod hash;
mod import;
mod index;
pub mod prefetch;
mod progress;
mod rds;
mod region;
mod sort;
pub mod synth;

pub use corpus::Corpus;
pub use error::{Error, Result};
pub use format::{GenerationInfo, RdsVersion, SourceCount};
pub use generation::{Entry, Generation, Memory, OpenOptions, Verify};
pub use hash::{HashAlg, HashBytes};
pub use import::{ImportOptions, import, import_with};
pub use index::Index as BucketIndex;
pub use progress::{NoProgress, Phase, Progress, TerminalProgress};
pub use rds::{Layout, SetName};
pub use sort::FixedSorter;
