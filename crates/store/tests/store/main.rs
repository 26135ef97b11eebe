//! The store's integration tests, one binary: the conformance suite on both backends, the
//! transparency log's chunk roots and stored-once leaves, and durability of SQLite under SIGKILL.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

mod conformance;
mod coverage_queue;
mod kill;
mod migration;
mod schema;
mod translog_chunks;
mod translog_entries;
