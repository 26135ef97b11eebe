//! The server's integration tests, one binary: each module runs its tests on both storage
//! backends through `testkit::backend_tests!` against a real server over HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

mod access_control;
mod api;
mod bundle;
mod corpus_release;
mod hashlookup;
mod refresh;
mod staff;
mod transparency;
mod transport;
