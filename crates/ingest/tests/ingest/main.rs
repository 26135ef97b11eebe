//! Ingest's integration tests, one binary: downloads and their hashing, Authenticode
//! extraction, streaming memory, and every vendor fetcher against a fake channel.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

mod common;
mod concurrency;
mod vendor_support;

mod archlinux;
mod authenticode;
mod debian;
mod download;
mod members;
mod mirrors;
mod package_pins;
mod rockylinux;
mod stream_memory;
mod ubuntu;
mod vendors;
