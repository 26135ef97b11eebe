//! The Ed25519-signed daily root and its hash chain.

use chrono::NaiveDate;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};

use crate::encoding::{self, FormatError};
use crate::merkle::Hash;
use crate::verify::VerifyError;

/// First line of every signed message; versions the format.
pub const MESSAGE_PREFIX: &str = "service-transparency-v1";

/// `prev_root` of the first day: 32 zero bytes (64 `0` characters in hex).
pub const GENESIS_PREV_ROOT: Hash = [0u8; 32];

/// The exact bytes that are signed:
/// `service-transparency-v1\n{log_date}\n{merkle_root}\n{entry_count}\n{prev_root}`,
/// with the date as `YYYY-MM-DD`, hashes as lowercase hex, the count in
/// decimal, and no trailing newline.
pub fn canonical_message(
    log_date: NaiveDate,
    merkle_root: &Hash,
    entry_count: u64,
    prev_root: &Hash,
) -> String {
    format!(
        "{MESSAGE_PREFIX}\n{}\n{}\n{entry_count}\n{}",
        encoding::format_log_date(log_date),
        encoding::hash_to_hex(merkle_root),
        encoding::hash_to_hex(prev_root),
    )
}

/// One day's signed root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedRoot {
    pub log_date: NaiveDate,
    pub merkle_root: Hash,
    /// Number of leaves (after de-duplication), i.e. the tree size.
    pub entry_count: u64,
    /// The previous day's `merkle_root`, or [`GENESIS_PREV_ROOT`] on the first day.
    pub prev_root: Hash,
    /// Ed25519 signature over [`SignedRoot::message`].
    pub signature: [u8; 64],
}

impl SignedRoot {
    /// Signs a day's root.
    pub fn sign(
        key: &SigningKey,
        log_date: NaiveDate,
        merkle_root: Hash,
        entry_count: u64,
        prev_root: Hash,
    ) -> Self {
        let message = canonical_message(log_date, &merkle_root, entry_count, &prev_root);
        let signature = key.sign(message.as_bytes()).to_bytes();
        Self {
            log_date,
            merkle_root,
            entry_count,
            prev_root,
            signature,
        }
    }

    /// Parses the text form served by the API (hex hashes, base64 signature).
    pub fn from_encoded(
        log_date: &str,
        merkle_root_hex: &str,
        entry_count: u64,
        prev_root_hex: &str,
        signature_base64: &str,
    ) -> Result<Self, FormatError> {
        Ok(Self {
            log_date: encoding::parse_log_date(log_date)?,
            merkle_root: encoding::parse_hash_hex("merkle_root", merkle_root_hex)?,
            entry_count,
            prev_root: encoding::parse_hash_hex("prev_root", prev_root_hex)?,
            signature: encoding::parse_signature_base64(signature_base64)?,
        })
    }

    /// The canonical message this root's signature covers.
    pub fn message(&self) -> String {
        canonical_message(
            self.log_date,
            &self.merkle_root,
            self.entry_count,
            &self.prev_root,
        )
    }

    /// Verifies the signature with RFC 8032 strict rules (canonical `S`,
    /// no small-order key or `R`).
    pub fn verify(&self, key: &VerifyingKey) -> Result<(), VerifyError> {
        let signature = Signature::from_bytes(&self.signature);
        key.verify_strict(self.message().as_bytes(), &signature)
            .map_err(|_| VerifyError::BadSignature)
    }

    /// True on the first day of the chain.
    pub fn is_genesis(&self) -> bool {
        self.prev_root == GENESIS_PREV_ROOT
    }

    pub fn log_date_string(&self) -> String {
        encoding::format_log_date(self.log_date)
    }

    pub fn merkle_root_hex(&self) -> String {
        encoding::hash_to_hex(&self.merkle_root)
    }

    pub fn prev_root_hex(&self) -> String {
        encoding::hash_to_hex(&self.prev_root)
    }

    pub fn signature_base64(&self) -> String {
        encoding::signature_to_base64(&self.signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(s: &str) -> NaiveDate {
        encoding::parse_log_date(s).unwrap()
    }

    #[test]
    fn message_layout_is_exact() {
        let msg = canonical_message(date("2024-05-01"), &[0xab; 32], 1234, &GENESIS_PREV_ROOT);
        let want = format!(
            "service-transparency-v1\n2024-05-01\n{}\n1234\n{}",
            "ab".repeat(32),
            "0".repeat(64)
        );
        assert_eq!(msg, want);
        assert!(!msg.ends_with('\n'));
    }

    #[test]
    fn sign_verify_and_encode_round_trip() {
        let sk = SigningKey::from_bytes(&[1u8; 32]);
        let root = SignedRoot::sign(&sk, date("2024-05-01"), [2u8; 32], 10, GENESIS_PREV_ROOT);
        assert!(root.is_genesis());
        assert_eq!(root.verify(&sk.verifying_key()), Ok(()));
        let parsed = SignedRoot::from_encoded(
            &root.log_date_string(),
            &root.merkle_root_hex(),
            root.entry_count,
            &root.prev_root_hex(),
            &root.signature_base64(),
        )
        .unwrap();
        assert_eq!(parsed, root);
        let other = SigningKey::from_bytes(&[3u8; 32]).verifying_key();
        assert_eq!(root.verify(&other), Err(VerifyError::BadSignature));
    }

    #[test]
    fn from_encoded_rejects_bad_fields() {
        let h = "00".repeat(32);
        let sig = encoding::base64_encode(&[0u8; 64]);
        assert!(SignedRoot::from_encoded("2024-5-01", &h, 0, &h, &sig).is_err());
        assert!(SignedRoot::from_encoded("2024-05-01", &h[2..], 0, &h, &sig).is_err());
        assert!(SignedRoot::from_encoded("2024-05-01", &h, 0, "xy", &sig).is_err());
        assert!(SignedRoot::from_encoded("2024-05-01", &h, 0, &h, "AAAA").is_err());
        assert!(SignedRoot::from_encoded("2024-05-01", &h, 0, &h, &sig).is_ok());
    }
}
