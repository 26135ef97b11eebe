//! Bloom filters in the DCSO v1 binary format, the format DCSO's `bloom` (Go) and `flor`
//! (Python) and CIRCL hashlookup's tools read and write.
//!
//! Layout (DCSO/bloom `bloom.go`, `Write`/`Read`; DCSO/flor `flor/filter.py`), every field
//! a little-endian 64-bit word: `flags` (low byte = version 1), `n` (capacity), `p` (the
//! false-positive rate, f64 bits), `k` (hash functions), `m` (bits), `N` (elements added);
//! then ceil(m / 64) little-endian u64 words of bits; then free trailing data.
//!
//! Fingerprint (`bloom.go` `Fingerprint`, `flor/filter.py` `fingerprint`): h = FNV-1 64
//! (`hash/fnv.New64`: multiply, then xor; not FNV-1a) of the value, reduced mod
//! M = 18446744073709551557; then k times h = (h * G, wrapping at 64 bits) mod M with
//! G = 18446744073709550147, and bit h mod m is set: word (bit / 64), bit (bit % 64).
//! Sizing (`Initialize`): m = ceil(|n ln p| / ln(2)^2), k = ceil(ln(2) m / n).

use thiserror::Error;

const MODULUS: u64 = 18_446_744_073_709_551_557;
const GENERATOR: u64 = 18_446_744_073_709_550_147;
const FNV_OFFSET: u64 = 14_695_981_039_346_656_037;
const FNV_PRIME: u64 = 1_099_511_628_211;
#[cfg(test)]
const HEADER_BYTES: usize = 48;

#[derive(Debug, Error, PartialEq, Eq)]
pub(crate) enum BloomError {
    #[error("the filter is truncated")]
    Truncated,
    #[error("the filter's version flag is {0}, not 1")]
    Version(u64),
    #[error("the filter's dimensions are not valid (k = {k}, m = {m})")]
    Dimensions { k: u64, m: u64 },
}

/// A DCSO v1 Bloom filter.
#[derive(Debug, Clone, PartialEq)]
pub struct BloomFilter {
    capacity: u64,
    false_positive_rate: f64,
    k: u64,
    m: u64,
    count: u64,
    words: Vec<u64>,
}

/// FNV-1, 64 bits.
pub(crate) fn fnv1_64(value: &[u8]) -> u64 {
    value
        .iter()
        .fold(FNV_OFFSET, |h, &b| h.wrapping_mul(FNV_PRIME) ^ u64::from(b))
}

impl BloomFilter {
    /// An empty filter for `capacity` values at false-positive rate `p` (0 < p < 1).
    pub(crate) fn new(capacity: u64, p: f64) -> Self {
        let n = capacity.max(1);
        let m = (n as f64 * p.ln() / std::f64::consts::LN_2.powi(2))
            .abs()
            .ceil()
            .max(64.0);
        let k = (std::f64::consts::LN_2 * m / n as f64).ceil().max(1.0);
        let m = m as u64;
        Self {
            capacity: n,
            false_positive_rate: p,
            k: k as u64,
            m,
            count: 0,
            words: vec![0; m.div_ceil(64) as usize],
        }
    }

    pub fn false_positive_rate(&self) -> f64 {
        self.false_positive_rate
    }

    /// Values added (those that set at least one new bit, as DCSO counts).
    pub fn count(&self) -> u64 {
        self.count
    }

    fn bits(&self, value: &[u8]) -> impl Iterator<Item = u64> + use<> {
        let m = self.m;
        let mut h = fnv1_64(value) % MODULUS;
        (0..self.k).map(move |_| {
            h = h.wrapping_mul(GENERATOR) % MODULUS;
            h % m
        })
    }

    pub(crate) fn add(&mut self, value: &[u8]) {
        let mut new = false;
        for bit in self.bits(value) {
            let (word, mask) = ((bit / 64) as usize, 1u64 << (bit % 64));
            if let Some(w) = self.words.get_mut(word) {
                new |= *w & mask == 0;
                *w |= mask;
            }
        }
        if new {
            self.count += 1;
        }
    }

    pub fn contains(&self, value: &[u8]) -> bool {
        self.bits(value).all(|bit| {
            self.words
                .get((bit / 64) as usize)
                .is_some_and(|w| w & (1u64 << (bit % 64)) != 0)
        })
    }

    /// The filter's bytes.
    #[cfg(test)]
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.byte_len() as usize);
        // Writing into a Vec cannot fail.
        let _ = self.write_to(&mut out);
        out
    }

    /// Length of [`to_bytes`](Self::to_bytes).
    #[cfg(test)]
    pub(crate) fn byte_len(&self) -> u64 {
        HEADER_BYTES as u64 + self.words.len() as u64 * 8
    }

    /// Writes the filter's bytes to `out` a piece at a time, without a second copy of
    /// the bit array in memory.
    pub(crate) fn write_to(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        for field in [
            1,
            self.capacity,
            self.false_positive_rate.to_bits(),
            self.k,
            self.m,
            self.count,
        ] {
            out.write_all(&field.to_le_bytes())?;
        }
        let mut piece = Vec::with_capacity(64 << 10);
        for words in self.words.chunks(8 << 10) {
            piece.clear();
            for w in words {
                piece.extend_from_slice(&w.to_le_bytes());
            }
            out.write_all(&piece)?;
        }
        Ok(())
    }

    /// Reads a filter; trailing data after the bit words is ignored.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Result<Self, BloomError> {
        let word = |i: usize| -> Result<u64, BloomError> {
            let b = bytes.get(i * 8..i * 8 + 8).ok_or(BloomError::Truncated)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            Ok(u64::from_le_bytes(a))
        };
        let flags = word(0)?;
        if flags & 0xff != 1 {
            return Err(BloomError::Version(flags & 0xff));
        }
        let (capacity, p, k, m, count) = (
            word(1)?,
            f64::from_bits(word(2)?),
            word(3)?,
            word(4)?,
            word(5)?,
        );
        if k == 0 || k > 64 || m == 0 || m > (bytes.len() as u64).saturating_mul(8) {
            return Err(BloomError::Dimensions { k, m });
        }
        let n_words = m.div_ceil(64) as usize;
        let words = (0..n_words)
            .map(|i| word(6 + i))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            capacity,
            false_positive_rate: p,
            k,
            m,
            count,
            words,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1_matches_the_reference_values() {
        // FNV-1 64 of "" is the offset basis; of "a", from the FNV reference test vectors.
        assert_eq!(fnv1_64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1_64(b"a"), 0xaf63bd4c8601b7be);
    }

    #[test]
    fn round_trip_and_membership() {
        let mut f = BloomFilter::new(1000, 0.001);
        for i in 0..1000u32 {
            f.add(format!("{i:040X}").as_bytes());
        }
        let bytes = f.to_bytes();
        let g = BloomFilter::from_bytes(&bytes).unwrap();
        assert_eq!(f, g);
        assert!((0..1000u32).all(|i| g.contains(format!("{i:040X}").as_bytes())));
        let false_hits = (1000..21000u32)
            .filter(|i| g.contains(format!("{i:040X}").as_bytes()))
            .count();
        assert!(false_hits < 60, "{false_hits} false positives in 20000");
        assert_eq!(
            BloomFilter::from_bytes(&bytes[..40]),
            Err(BloomError::Truncated)
        );
    }
}
