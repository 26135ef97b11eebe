//! Client-side verification of what a server returns: signed roots,
//! inclusion proofs for a record, and the day-to-day chain.

use chrono::NaiveDate;
use ed25519_dalek::VerifyingKey;

use crate::encoding::{self, FormatError};
use crate::leaf::{LeafError, Record};
use crate::merkle::{self, Hash, ProofError};
use crate::signed_root::SignedRoot;

/// Which check failed. Each variant names exactly one check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("signature over the daily root does not verify with the given public key")]
    BadSignature,
    #[error("record cannot form a leaf: {0}")]
    InvalidRecord(#[from] LeafError),
    #[error(
        "server leaf hash {claimed} differs from the one recomputed from the record fields {computed}"
    )]
    LeafHashMismatch { computed: String, claimed: String },
    #[error("proof is for {response} but the signed root is for {signed}")]
    DateMismatch {
        signed: NaiveDate,
        response: NaiveDate,
    },
    #[error("server-reported merkle_root differs from the signed root")]
    ServerRootMismatch,
    #[error("proof tree_size {response} differs from the signed entry_count {signed}")]
    TreeSizeMismatch { signed: u64, response: u64 },
    #[error("audit path is malformed: {0}")]
    ProofInvalid(ProofError),
    #[error("audit path leads to a root different from the signed merkle_root")]
    RootMismatch,
    #[error("chain broken at {date}: prev_root differs from the previous day's merkle_root")]
    ChainBroken { date: NaiveDate },
    #[error("chain out of order at {date}: dates must strictly increase")]
    ChainOutOfOrder { date: NaiveDate },
}

/// The fields of an inclusion-proof response. `leaf_hash` and `merkle_root`
/// are what the server claims; they are compared, never trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InclusionResponse {
    pub log_date: NaiveDate,
    pub leaf_index: u64,
    pub tree_size: u64,
    pub audit_path: Vec<Hash>,
    pub leaf_hash: Option<Hash>,
    pub merkle_root: Option<Hash>,
}

impl InclusionResponse {
    /// Parses the text form served by the API (hex hashes, `YYYY-MM-DD`).
    pub fn from_encoded<S: AsRef<str>>(
        log_date: &str,
        leaf_index: u64,
        tree_size: u64,
        audit_path_hex: &[S],
        leaf_hash_hex: Option<&str>,
        merkle_root_hex: Option<&str>,
    ) -> Result<Self, FormatError> {
        Ok(Self {
            log_date: encoding::parse_log_date(log_date)?,
            leaf_index,
            tree_size,
            audit_path: encoding::parse_hash_list_hex("audit_path", audit_path_hex)?,
            leaf_hash: leaf_hash_hex
                .map(|s| encoding::parse_hash_hex("leaf_hash", s))
                .transpose()?,
            merkle_root: merkle_root_hex
                .map(|s| encoding::parse_hash_hex("merkle_root", s))
                .transpose()?,
        })
    }
}

/// Verifies a signed root's signature.
pub fn verify_signed_root(public_key: &VerifyingKey, root: &SignedRoot) -> Result<(), VerifyError> {
    root.verify(public_key)
}

/// Full check that `record` is in the day's signed tree. In order:
/// signature, record validity, leaf hash recomputed from the fields (and
/// compared with the server's claim), dates, server root claim, tree size
/// against `entry_count`, then the RFC 9162 audit path against the signed
/// root. Returns the recomputed leaf hash.
pub fn verify_inclusion_response(
    public_key: &VerifyingKey,
    signed_root: &SignedRoot,
    record: &Record<'_>,
    response: &InclusionResponse,
) -> Result<Hash, VerifyError> {
    signed_root.verify(public_key)?;
    let leaf = record.leaf_hash()?;
    if let Some(claimed) = response.leaf_hash
        && claimed != leaf
    {
        return Err(VerifyError::LeafHashMismatch {
            computed: encoding::hash_to_hex(&leaf),
            claimed: encoding::hash_to_hex(&claimed),
        });
    }
    if response.log_date != signed_root.log_date {
        return Err(VerifyError::DateMismatch {
            signed: signed_root.log_date,
            response: response.log_date,
        });
    }
    if response
        .merkle_root
        .is_some_and(|claimed| claimed != signed_root.merkle_root)
    {
        return Err(VerifyError::ServerRootMismatch);
    }
    if response.tree_size != signed_root.entry_count {
        return Err(VerifyError::TreeSizeMismatch {
            signed: signed_root.entry_count,
            response: response.tree_size,
        });
    }
    merkle::verify_inclusion(
        &leaf,
        response.leaf_index,
        response.tree_size,
        &response.audit_path,
        &signed_root.merkle_root,
    )
    .map_err(|e| match e {
        ProofError::RootMismatch => VerifyError::RootMismatch,
        other => VerifyError::ProofInvalid(other),
    })?;
    Ok(leaf)
}

/// Checks the links of consecutive roots (oldest first): dates strictly
/// increase and each `prev_root` equals the previous `merkle_root`.
/// Signatures are not checked here; see [`verify_chain`].
pub fn check_chain_links(roots: &[SignedRoot]) -> Result<(), VerifyError> {
    for pair in roots.windows(2) {
        let (prev, next) = (&pair[0], &pair[1]);
        if next.log_date <= prev.log_date {
            return Err(VerifyError::ChainOutOfOrder {
                date: next.log_date,
            });
        }
        if next.prev_root != prev.merkle_root {
            return Err(VerifyError::ChainBroken {
                date: next.log_date,
            });
        }
    }
    Ok(())
}

/// Verifies every signature, then the chain links (oldest first).
pub fn verify_chain(public_key: &VerifyingKey, roots: &[SignedRoot]) -> Result<(), VerifyError> {
    for root in roots {
        root.verify(public_key)?;
    }
    check_chain_links(roots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::MerkleTree;
    use crate::signed_root::GENESIS_PREV_ROOT;
    use ed25519_dalek::SigningKey;

    const SHAS: [&str; 3] = [
        "1111111111111111111111111111111111111111111111111111111111111111",
        "2222222222222222222222222222222222222222222222222222222222222222",
        "3333333333333333333333333333333333333333333333333333333333333333",
    ];

    fn record(i: usize) -> Record<'static> {
        Record {
            executable_name: "tool.exe",
            hash_sha256: SHAS[i],
            version: "1.0",
            platform: "linux",
            arch: "amd64",
        }
    }

    struct Fixture {
        key: SigningKey,
        root: SignedRoot,
        tree: MerkleTree,
    }

    fn fixture() -> Fixture {
        let key = SigningKey::from_bytes(&[9u8; 32]);
        let leaves = (0..3).map(|i| record(i).leaf_hash().unwrap()).collect();
        let tree = MerkleTree::from_leaf_hashes(leaves);
        let date = encoding::parse_log_date("2024-05-02").unwrap();
        let root = SignedRoot::sign(
            &key,
            date,
            tree.root(),
            tree.len() as u64,
            GENESIS_PREV_ROOT,
        );
        Fixture { key, root, tree }
    }

    fn response(f: &Fixture, rec: &Record<'_>) -> InclusionResponse {
        let leaf = rec.leaf_hash().unwrap();
        let index = f.tree.leaf_index(&leaf).unwrap();
        InclusionResponse {
            log_date: f.root.log_date,
            leaf_index: index as u64,
            tree_size: f.tree.len() as u64,
            audit_path: f.tree.inclusion_proof(index).unwrap(),
            leaf_hash: Some(leaf),
            merkle_root: Some(f.tree.root()),
        }
    }

    #[test]
    fn happy_path_and_each_failure() {
        let f = fixture();
        let pk = f.key.verifying_key();
        let rec = record(1);
        let good = response(&f, &rec);
        assert_eq!(
            verify_inclusion_response(&pk, &f.root, &rec, &good),
            Ok(rec.leaf_hash().unwrap())
        );

        let other_pk = SigningKey::from_bytes(&[8u8; 32]).verifying_key();
        assert_eq!(
            verify_inclusion_response(&other_pk, &f.root, &rec, &good),
            Err(VerifyError::BadSignature)
        );

        let bad_rec = Record {
            executable_name: "a\u{0}b",
            ..rec
        };
        assert!(matches!(
            verify_inclusion_response(&pk, &f.root, &bad_rec, &good),
            Err(VerifyError::InvalidRecord(_))
        ));

        // A different record with the server's (valid) leaf hash: recomputation catches it.
        let lying = Record {
            version: "2.0",
            ..rec
        };
        assert!(matches!(
            verify_inclusion_response(&pk, &f.root, &lying, &good),
            Err(VerifyError::LeafHashMismatch { .. })
        ));
        // Same, without the server's claim: the path no longer leads to the root.
        let no_claim = InclusionResponse {
            leaf_hash: None,
            ..good.clone()
        };
        assert_eq!(
            verify_inclusion_response(&pk, &f.root, &lying, &no_claim),
            Err(VerifyError::RootMismatch)
        );

        let wrong_date = InclusionResponse {
            log_date: f.root.log_date.succ_opt().unwrap(),
            ..good.clone()
        };
        assert!(matches!(
            verify_inclusion_response(&pk, &f.root, &rec, &wrong_date),
            Err(VerifyError::DateMismatch { .. })
        ));

        let server_root = InclusionResponse {
            merkle_root: Some([0u8; 32]),
            ..good.clone()
        };
        assert_eq!(
            verify_inclusion_response(&pk, &f.root, &rec, &server_root),
            Err(VerifyError::ServerRootMismatch)
        );

        let size = InclusionResponse {
            tree_size: 4,
            ..good.clone()
        };
        assert_eq!(
            verify_inclusion_response(&pk, &f.root, &rec, &size),
            Err(VerifyError::TreeSizeMismatch {
                signed: 3,
                response: 4
            })
        );

        let index = InclusionResponse {
            leaf_index: 3,
            ..good.clone()
        };
        assert_eq!(
            verify_inclusion_response(&pk, &f.root, &rec, &index),
            Err(VerifyError::ProofInvalid(ProofError::IndexOutOfRange {
                index: 3,
                size: 3
            }))
        );

        let mut short = good.clone();
        short.audit_path.pop();
        assert_eq!(
            verify_inclusion_response(&pk, &f.root, &rec, &short),
            Err(VerifyError::ProofInvalid(ProofError::PathTooShort))
        );

        let mut flipped = good.clone();
        flipped.audit_path[0][5] ^= 1;
        assert_eq!(
            verify_inclusion_response(&pk, &f.root, &rec, &flipped),
            Err(VerifyError::RootMismatch)
        );
    }

    #[test]
    fn from_encoded_parses_hex() {
        let f = fixture();
        let good = response(&f, &record(0));
        let path: Vec<String> = good.audit_path.iter().map(encoding::hash_to_hex).collect();
        let leaf = good.leaf_hash.map(|h| encoding::hash_to_hex(&h));
        let root = encoding::hash_to_hex(&f.tree.root());
        let parsed = InclusionResponse::from_encoded(
            "2024-05-02",
            good.leaf_index,
            3,
            &path,
            leaf.as_deref(),
            Some(&root),
        )
        .unwrap();
        assert_eq!(parsed, good);
        assert!(InclusionResponse::from_encoded("2024-05-02", 0, 3, &["00"], None, None).is_err());
    }

    #[test]
    fn chain_checks() {
        let key = SigningKey::from_bytes(&[5u8; 32]);
        let pk = key.verifying_key();
        let d = |s| encoding::parse_log_date(s).unwrap();
        let day1 = SignedRoot::sign(&key, d("2024-01-01"), [1; 32], 1, GENESIS_PREV_ROOT);
        let day2 = SignedRoot::sign(&key, d("2024-01-02"), [2; 32], 2, day1.merkle_root);
        let day3 = SignedRoot::sign(&key, d("2024-01-03"), [3; 32], 3, day2.merkle_root);
        assert_eq!(
            verify_chain(&pk, &[day1.clone(), day2.clone(), day3.clone()]),
            Ok(())
        );
        assert_eq!(verify_chain(&pk, &[]), Ok(()));

        let forked = SignedRoot::sign(&key, d("2024-01-03"), [3; 32], 3, [9; 32]);
        assert_eq!(
            verify_chain(&pk, &[day1.clone(), day2.clone(), forked]),
            Err(VerifyError::ChainBroken {
                date: d("2024-01-03")
            })
        );
        assert_eq!(
            verify_chain(&pk, &[day1.clone(), day3.clone()]),
            Err(VerifyError::ChainBroken {
                date: d("2024-01-03")
            })
        );
        assert_eq!(
            check_chain_links(&[day2.clone(), day1.clone()]),
            Err(VerifyError::ChainOutOfOrder {
                date: d("2024-01-01")
            })
        );
        let mut tampered = day2.clone();
        tampered.entry_count += 1;
        assert_eq!(
            verify_chain(&pk, &[day1, tampered, day3]),
            Err(VerifyError::BadSignature)
        );
    }
}
