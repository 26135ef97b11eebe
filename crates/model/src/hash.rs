//! Submitted hash values: trimmed, lowercased, and typed by their length.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HashAlgo {
    Md5,
    Sha1,
    Sha256,
}

impl HashAlgo {
    /// Length in hex characters.
    pub const fn hex_len(self) -> usize {
        match self {
            HashAlgo::Md5 => 32,
            HashAlgo::Sha1 => 40,
            HashAlgo::Sha256 => 64,
        }
    }

    fn from_hex_len(len: usize) -> Option<Self> {
        match len {
            32 => Some(HashAlgo::Md5),
            40 => Some(HashAlgo::Sha1),
            64 => Some(HashAlgo::Sha256),
            _ => None,
        }
    }
}

/// A hash value in canonical form: lowercase hex of an MD5, SHA-1 or SHA-256 digest, and
/// the digest's bytes, decoded once when the value is parsed. Both are kept inline, so a
/// batch of values is one allocation and sorting it reads no pointers.
///
/// Values order as their hex text does (the field order below: the zeros after a shorter
/// text sort before any digit), which is the order of a lookup answer's keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HashValue {
    /// The lowercase hex, then zeros.
    hex: [u8; 64],
    algo: HashAlgo,
    /// The digest, then zeros.
    bytes: [u8; 32],
}

/// The value of each hex digit; 0xff for any other byte.
const NIBBLES: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

/// Decodes `text`, hex digits of either case, into `out`, two digits per byte; false (with
/// `out` unspecified) unless `text` is exactly `2 * out.len()` hex digits. A table lookup
/// per digit: an NSRL import decodes hundreds of millions of digests (hence `inline`, so that
/// the fixed lengths there unroll).
#[inline]
pub fn decode_hex(text: &[u8], out: &mut [u8]) -> bool {
    if text.len() != 2 * out.len() {
        return false;
    }
    let mut bad = 0u8;
    for (o, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        let (high, low) = (NIBBLES[pair[0] as usize], NIBBLES[pair[1] as usize]);
        bad |= (high | low) & 0xf0;
        *o = (high << 4) | (low & 0x0f);
    }
    bad == 0
}

impl HashValue {
    /// Parses any of the three digest kinds, deciding the kind by length.
    pub fn parse(input: &str) -> Result<Self, Error> {
        let trimmed = input.trim();
        let algo = HashAlgo::from_hex_len(trimmed.len()).ok_or_else(|| {
            Error::bad_request(format!(
                "hash {:?} must be 32, 40 or 64 hex characters (MD5, SHA-1, SHA-256), got {}",
                shorten(trimmed),
                trimmed.chars().count()
            ))
        })?;
        Self::with_algo(trimmed, algo)
    }

    /// Parses a value that must be of one kind (e.g. the `sha256` query of a proof).
    pub fn parse_as(input: &str, algo: HashAlgo) -> Result<Self, Error> {
        let trimmed = input.trim();
        if trimmed.len() != algo.hex_len() {
            return Err(Error::bad_request(format!(
                "hash {:?} must be {} hex characters",
                shorten(trimmed),
                algo.hex_len()
            )));
        }
        Self::with_algo(trimmed, algo)
    }

    /// `trimmed` has `algo`'s length.
    fn with_algo(trimmed: &str, algo: HashAlgo) -> Result<Self, Error> {
        let mut bytes = [0u8; 32];
        if !decode_hex(trimmed.as_bytes(), &mut bytes[..algo.hex_len() / 2]) {
            return Err(Error::bad_request(format!(
                "hash {:?} contains characters that are not hexadecimal",
                shorten(trimmed)
            )));
        }
        let mut hex = [0u8; 64];
        for (h, c) in hex.iter_mut().zip(trimmed.bytes()) {
            *h = c.to_ascii_lowercase();
        }
        Ok(Self { hex, algo, bytes })
    }

    pub fn algo(&self) -> HashAlgo {
        self.algo
    }

    pub fn as_str(&self) -> &str {
        // Hex digits only, checked by `with_algo`: never the empty fallback.
        std::str::from_utf8(&self.hex[..self.algo.hex_len()]).unwrap_or_default()
    }

    /// The digest's bytes.
    pub fn digest(&self) -> &[u8] {
        &self.bytes[..self.algo.hex_len() / 2]
    }
}

impl From<HashValue> for String {
    /// The lowercase hex.
    fn from(value: HashValue) -> Self {
        value.as_str().to_string()
    }
}

impl fmt::Display for HashValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Keeps error messages readable when someone submits a megabyte of text as a hash.
fn shorten(s: &str) -> String {
    const MAX: usize = 80;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let head: String = s.chars().take(MAX).collect();
        format!("{head}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_the_decoded_hex_whatever_its_case() {
        let v = HashValue::parse("00ff10Ab7C").map(|_| ()).unwrap_err();
        assert!(v.to_string().contains("32, 40 or 64"), "{v}");
        let upper = HashValue::parse(&"A9".repeat(20)).unwrap();
        assert_eq!(upper.digest(), [0xa9; 20]);
        let md5 = HashValue::parse("d41d8cd98f00b204e9800998ecf8427e").unwrap();
        assert_eq!(
            md5.digest(),
            [
                0xd4, 0x1d, 0x8c, 0xd9, 0x8f, 0x00, 0xb2, 0x04, 0xe9, 0x80, 0x09, 0x98, 0xec, 0xf8,
                0x42, 0x7e
            ]
        );
        for bad in [
            "g".repeat(32),
            format!("{}é", "0".repeat(62)),
            format!("{} 0", "0".repeat(30)),
        ] {
            assert!(HashValue::parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn values_order_as_their_hex_text() {
        // Prefixes of one another across kinds, digits against letters, and case.
        let texts = [
            "ab".repeat(16),
            "ab".repeat(20),
            "ab".repeat(32),
            format!("{}{}", "ab".repeat(16), "0".repeat(32)),
            "AB".repeat(15) + "ac",
            "0".repeat(40),
            "f".repeat(32),
            "9".repeat(64),
            "a0".repeat(16),
        ];
        let mut values: Vec<HashValue> =
            texts.iter().map(|t| HashValue::parse(t).unwrap()).collect();
        let mut by_text = values.clone();
        by_text.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        values.sort();
        assert_eq!(values, by_text);
        values.dedup();
        assert_eq!(values.len(), texts.len());
        let upper = HashValue::parse(&"AB".repeat(16)).unwrap();
        assert_eq!(upper, HashValue::parse(&"ab".repeat(16)).unwrap());
        assert_eq!(String::from(upper), "ab".repeat(16));
    }

    #[test]
    fn parses_by_length_and_lowercases() {
        let v = HashValue::parse("  D41D8CD98F00B204E9800998ECF8427E ").unwrap();
        assert_eq!(v.algo(), HashAlgo::Md5);
        assert_eq!(v.as_str(), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(
            HashValue::parse(&"a".repeat(40)).unwrap().algo(),
            HashAlgo::Sha1
        );
        assert_eq!(
            HashValue::parse(&"B".repeat(64)).unwrap().algo(),
            HashAlgo::Sha256
        );
    }

    #[test]
    fn rejects_bad_length_and_non_hex_with_a_message_naming_the_value() {
        let err = HashValue::parse("abc").unwrap_err();
        assert!(matches!(&err, Error::BadRequest(m) if m.contains("\"abc\"")));
        let err = HashValue::parse(&"g".repeat(64)).unwrap_err();
        assert!(matches!(&err, Error::BadRequest(m) if m.contains("not hexadecimal")));
        // Multibyte input must not panic on slicing.
        assert!(HashValue::parse(&"é".repeat(32)).is_err());
        assert!(HashValue::parse(&"é".repeat(500)).is_err());
    }
}
