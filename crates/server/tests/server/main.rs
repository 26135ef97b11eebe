//! The server's integration tests, one binary: each module runs its tests on both storage
//! backends through `testkit::backend_tests!` against a real server over HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

mod access_control;
mod api;
mod bundle;
mod console;
mod corpus_release;
mod coverage;
mod feeds;
mod hashlookup;
mod layering;
mod mfa;
mod operations;
mod packages;
mod refresh;
mod revocation;
mod staff;
mod transparency;
mod transport;
