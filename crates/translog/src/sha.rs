//! One-shot SHA-256 of short messages straight through the compression
//! function of the `sha2` crate.
//!
//! Leaf and node preimages are small and hashed millions of times a day;
//! padding them in a stack buffer and calling `compress256` skips the
//! streaming hasher's buffering and is measurably faster (see
//! `examples/bench_tree.rs`). The padding is the standard FIPS 180-4
//! section 5.1.1 padding; tests compare against `Sha256::digest` for every
//! supported length.

use sha2::digest::generic_array::GenericArray;

use crate::merkle::Hash;

pub(crate) const BLOCK_LEN: usize = 64;

/// SHA-256 initial hash value (FIPS 180-4 section 5.3.3).
const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// Longest message [`sha256_short`] accepts in a buffer of `capacity` bytes:
/// the padding needs at least 9 bytes (0x80 and the 64-bit bit length).
pub(crate) const fn max_message_len(capacity: usize) -> usize {
    capacity - 9
}

/// SHA-256 of `buf[..len]`. The bytes after the message are overwritten
/// with the padding. `N` must be a multiple of 64 and `len` at most
/// `max_message_len(N)`; callers guarantee both (checked in debug builds,
/// and a too-long `len` panics on slicing rather than hashing garbage).
pub(crate) fn sha256_short<const N: usize>(buf: &mut [u8; N], len: usize) -> Hash {
    debug_assert!(N.is_multiple_of(BLOCK_LEN) && len <= max_message_len(N));
    let end = (len + 9).div_ceil(BLOCK_LEN) * BLOCK_LEN;
    buf[len] = 0x80;
    buf[len + 1..end - 8].fill(0);
    buf[end - 8..end].copy_from_slice(&(len as u64 * 8).to_be_bytes());
    let mut state = IV;
    for block in buf[..end].chunks_exact(BLOCK_LEN) {
        sha2::compress256(
            &mut state,
            std::slice::from_ref(GenericArray::from_slice(block)),
        );
    }
    let mut out = [0u8; 32];
    for (chunk, word) in out.chunks_exact_mut(4).zip(state) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    #[test]
    fn matches_streaming_sha256_for_every_length() {
        let data: Vec<u8> = (0..320u32)
            .map(|i| (i.wrapping_mul(167) >> 3) as u8)
            .collect();
        for len in 0..=max_message_len(320) {
            let mut buf = [0xffu8; 320];
            buf[..len].copy_from_slice(&data[..len]);
            let want: Hash = Sha256::digest(&data[..len]).into();
            assert_eq!(sha256_short(&mut buf, len), want, "len {len}");
        }
        let mut two = [0u8; 128];
        for len in 0..=max_message_len(128) {
            let want: Hash = Sha256::digest(&two[..len]).into();
            assert_eq!(sha256_short(&mut two, len), want, "len {len}");
            two = [0u8; 128];
        }
    }
}
