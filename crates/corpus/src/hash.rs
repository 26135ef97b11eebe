/// Hash algorithms the corpus indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashAlg {
    Sha256,
    Sha1,
    Md5,
}

impl HashAlg {
    /// Digest length in bytes.
    pub const fn byte_len(self) -> usize {
        match self {
            HashAlg::Sha256 => 32,
            HashAlg::Sha1 => 20,
            HashAlg::Md5 => 16,
        }
    }
}

/// A hash value to look up; the algorithm follows from the length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashBytes {
    Sha256([u8; 32]),
    Sha1([u8; 20]),
    Md5([u8; 16]),
}

impl HashBytes {
    /// 32, 20 or 16 raw bytes; any other length is `None`.
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        match bytes.len() {
            32 => bytes.try_into().ok().map(HashBytes::Sha256),
            20 => bytes.try_into().ok().map(HashBytes::Sha1),
            16 => bytes.try_into().ok().map(HashBytes::Md5),
            _ => None,
        }
    }

    /// 64, 40 or 32 hex digits, either case.
    pub fn from_hex(text: &str) -> Option<Self> {
        let text = text.as_bytes();
        match text.len() {
            64 => decode_hex(text).map(HashBytes::Sha256),
            40 => decode_hex(text).map(HashBytes::Sha1),
            32 => decode_hex(text).map(HashBytes::Md5),
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            HashBytes::Sha256(b) => b,
            HashBytes::Sha1(b) => b,
            HashBytes::Md5(b) => b,
        }
    }

    pub fn alg(&self) -> HashAlg {
        match self {
            HashBytes::Sha256(_) => HashAlg::Sha256,
            HashBytes::Sha1(_) => HashAlg::Sha1,
            HashBytes::Md5(_) => HashAlg::Md5,
        }
    }

    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        hex::encode(self.as_bytes())
    }
}

/// Decodes exactly `2 * N` hex digits (either case).
pub(crate) fn decode_hex<const N: usize>(text: &[u8]) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    model::hash::decode_hex(text, &mut out).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_either_case_and_lengths() {
        let lower = "d41d8cd98f00b204e9800998ecf8427e";
        let upper = lower.to_uppercase();
        assert_eq!(HashBytes::from_hex(lower), HashBytes::from_hex(&upper));
        assert_eq!(
            HashBytes::from_hex(lower).map(|h| h.alg()),
            Some(HashAlg::Md5)
        );
        assert_eq!(
            HashBytes::from_hex(lower).map(|h| h.to_hex()).as_deref(),
            Some(lower)
        );
        assert!(HashBytes::from_hex("zz1d8cd98f00b204e9800998ecf8427e").is_none());
        assert!(HashBytes::from_hex("abc").is_none());
        assert_eq!(
            HashBytes::from_slice(&[0u8; 20]).map(|h| h.alg()),
            Some(HashAlg::Sha1)
        );
        assert!(HashBytes::from_slice(&[0u8; 21]).is_none());
    }
}
