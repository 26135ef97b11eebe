//! The transparency log primitives' integration tests, one binary: property tests, chunked
//! proofs, signed roots, and public test vectors.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests and benchmarks fail loudly

mod chunks;
mod properties;
mod signatures;
mod vectors;
