//! Text encodings of hashes, dates, signatures and keys.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::NaiveDate;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::merkle::Hash;

/// A string that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("{field}: not valid hex")]
    InvalidHex { field: &'static str },
    #[error("{field}: not valid standard padded base64")]
    InvalidBase64 { field: &'static str },
    #[error("{field}: expected {expected} bytes, got {actual}")]
    WrongLength {
        field: &'static str,
        expected: usize,
        actual: usize,
    },
    #[error("log_date: expected YYYY-MM-DD, got {0:?}")]
    InvalidDate(String),
    #[error("public key: {0}")]
    InvalidPublicKey(String),
    #[error("signing key: {0}")]
    InvalidSigningKey(String),
}

/// Lowercase hex of a hash.
pub fn hash_to_hex(hash: &Hash) -> String {
    hex::encode(hash)
}

/// Decodes 64 hex characters (either case) into a hash.
pub fn parse_hash_hex(field: &'static str, s: &str) -> Result<Hash, FormatError> {
    let bytes = hex::decode(s).map_err(|_| FormatError::InvalidHex { field })?;
    to_array(field, &bytes)
}

/// Decodes a list of hex hashes such as an audit path.
pub fn parse_hash_list_hex<S: AsRef<str>>(
    field: &'static str,
    items: &[S],
) -> Result<Vec<Hash>, FormatError> {
    items
        .iter()
        .map(|s| parse_hash_hex(field, s.as_ref()))
        .collect()
}

fn to_array<const N: usize>(field: &'static str, bytes: &[u8]) -> Result<[u8; N], FormatError> {
    bytes.try_into().map_err(|_| FormatError::WrongLength {
        field,
        expected: N,
        actual: bytes.len(),
    })
}

/// Standard padded base64 (RFC 4648 section 4).
pub fn base64_encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Strict standard padded base64 decoding (padding required, no
/// whitespace, canonical trailing bits).
pub fn base64_decode(field: &'static str, s: &str) -> Result<Vec<u8>, FormatError> {
    STANDARD
        .decode(s)
        .map_err(|_| FormatError::InvalidBase64 { field })
}

/// Decodes a base64 value that must be exactly `N` bytes.
pub fn base64_decode_array<const N: usize>(
    field: &'static str,
    s: &str,
) -> Result<[u8; N], FormatError> {
    to_array(field, &base64_decode(field, s)?)
}

/// Parses a log date written exactly as `YYYY-MM-DD`.
pub fn parse_log_date(s: &str) -> Result<NaiveDate, FormatError> {
    let bad = || FormatError::InvalidDate(s.to_owned());
    let shape_ok = s.len() == 10
        && s.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    if !shape_ok {
        return Err(bad());
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|_| bad())
}

/// Formats a log date as `YYYY-MM-DD` (the form used in signed messages).
pub fn format_log_date(date: NaiveDate) -> String {
    date.format("%Y-%m-%d").to_string()
}

/// Base64 of the 64-byte Ed25519 signature.
pub fn signature_to_base64(signature: &[u8; 64]) -> String {
    base64_encode(signature)
}

/// Parses a base64 Ed25519 signature (must decode to 64 bytes).
pub fn parse_signature_base64(s: &str) -> Result<[u8; 64], FormatError> {
    base64_decode_array("signature", s)
}

/// Base64 of the 32 raw public key bytes (`public_key`).
pub fn public_key_to_base64(key: &VerifyingKey) -> String {
    base64_encode(key.as_bytes())
}

/// Parses `public_key`: base64 of 32 raw bytes that must be a valid point.
pub fn parse_public_key_base64(s: &str) -> Result<VerifyingKey, FormatError> {
    let raw: [u8; 32] = base64_decode_array("public_key", s)?;
    VerifyingKey::from_bytes(&raw).map_err(|e| FormatError::InvalidPublicKey(e.to_string()))
}

/// SPKI PEM (`-----BEGIN PUBLIC KEY-----`, LF line endings) (`public_key_pem`).
pub fn public_key_to_pem(key: &VerifyingKey) -> String {
    // Encoding a valid 32-byte key into SPKI cannot fail; fall back to an
    // empty string rather than panic if the encoder ever says otherwise.
    key.to_public_key_pem(LineEnding::LF).unwrap_or_default()
}

/// Parses an SPKI PEM Ed25519 public key.
pub fn parse_public_key_pem(pem: &str) -> Result<VerifyingKey, FormatError> {
    VerifyingKey::from_public_key_pem(pem.trim())
        .map_err(|e| FormatError::InvalidPublicKey(e.to_string()))
}

/// Key id: lowercase hex of the first 8 bytes of SHA-256 over the 32 raw
/// public key bytes (16 hex characters). A label, not a security check.
pub fn key_id(key: &VerifyingKey) -> String {
    let digest = Sha256::digest(key.as_bytes());
    hex::encode(&digest[..8])
}

/// A fresh signing key from 32 bytes of the thread-local CSPRNG.
pub fn generate_signing_key() -> SigningKey {
    let mut seed: [u8; 32] = rand::random();
    let key = SigningKey::from_bytes(&seed);
    seed.fill(0);
    key
}

/// Parses a PKCS#8 PEM Ed25519 private key (`-----BEGIN PRIVATE KEY-----`).
pub fn parse_signing_key_pem(pem: &str) -> Result<SigningKey, FormatError> {
    SigningKey::from_pkcs8_pem(pem.trim())
        .map_err(|e| FormatError::InvalidSigningKey(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_hex_round_trip_and_errors() {
        let h = [0xabu8; 32];
        let s = hash_to_hex(&h);
        assert_eq!(s, "ab".repeat(32));
        assert_eq!(parse_hash_hex("x", &s), Ok(h));
        assert_eq!(parse_hash_hex("x", &s.to_uppercase()), Ok(h));
        assert_eq!(
            parse_hash_hex("x", "zz"),
            Err(FormatError::InvalidHex { field: "x" })
        );
        assert_eq!(
            parse_hash_hex("x", "abcd"),
            Err(FormatError::WrongLength {
                field: "x",
                expected: 32,
                actual: 2
            })
        );
        assert!(parse_hash_list_hex("audit_path", &[s.as_str(), "00"]).is_err());
    }

    #[test]
    fn dates_are_strict() {
        let d = parse_log_date("2024-02-29").unwrap();
        assert_eq!(format_log_date(d), "2024-02-29");
        for bad in [
            "2023-02-29",
            "2024-2-29",
            "2024-02-29 ",
            "24-02-29",
            "2024/02/29",
            "+2024-02-2",
            "２０２４-02-29",
        ] {
            assert!(parse_log_date(bad).is_err(), "{bad}");
        }
        assert_eq!(
            format_log_date(parse_log_date("0999-01-01").unwrap()),
            "0999-01-01"
        );
    }

    #[test]
    fn base64_is_strict_standard_padded() {
        assert_eq!(base64_decode("f", "AAE=").unwrap(), vec![0, 1]);
        assert!(base64_decode("f", "AAE").is_err());
        assert!(base64_decode("f", "AA-_").is_err());
        assert!(
            base64_decode("f", "AAF=").is_err(),
            "non-canonical trailing bits"
        );
        assert!(parse_signature_base64(&base64_encode(&[0u8; 63])).is_err());
    }

    #[test]
    fn key_encodings_round_trip() {
        let sk = SigningKey::from_bytes(&[7u8; 32]);
        let vk = sk.verifying_key();
        let b64 = public_key_to_base64(&vk);
        assert_eq!(base64_decode("k", &b64).unwrap().len(), 32);
        assert_eq!(parse_public_key_base64(&b64).unwrap(), vk);
        let pem = public_key_to_pem(&vk);
        assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----\n"), "{pem}");
        assert_eq!(parse_public_key_pem(&pem).unwrap(), vk);
        let id = key_id(&vk);
        assert_eq!(id.len(), 16);
        assert_eq!(id, hex::encode(&Sha256::digest(vk.as_bytes())[..8]));
        assert!(parse_public_key_base64("AAAA").is_err());
        assert!(
            parse_public_key_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
                .is_err()
        );
    }

    #[test]
    fn signing_key_pem_and_generation() {
        use ed25519_dalek::pkcs8::EncodePrivateKey;
        let sk = generate_signing_key();
        assert_ne!(sk.to_bytes(), generate_signing_key().to_bytes());
        let pem = sk.to_pkcs8_pem(LineEnding::LF).unwrap();
        assert_eq!(
            parse_signing_key_pem(&pem).unwrap().to_bytes(),
            sk.to_bytes()
        );
        assert!(parse_signing_key_pem("garbage").is_err());
    }
}
