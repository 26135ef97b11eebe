//! The binary's integration tests, one test binary: each runs the real `knowngood`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

mod admin_cli;
mod architecture;
mod coverage_queue;
mod import_records;
mod ingest_list;
mod operations;
mod packages_cli;
mod private_data;
mod readme_tour;
mod replicas;
mod scan_cli;
mod verify_cli;
