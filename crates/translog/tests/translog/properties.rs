//! Property tests over random trees of up to a few hundred leaves.

use proptest::prelude::*;
use sha2::{Digest, Sha256};
use translog::{
    Hash, MerkleTree, ProofError, consistency_proof, inclusion_proof, merkle_root,
    sorted_unique_leaves, verify_consistency, verify_inclusion,
};

/// `count` distinct pseudo-random leaves derived from `seed`.
fn leaves(seed: u64, count: usize) -> Vec<Hash> {
    (0..count as u64)
        .map(|i| {
            let mut h = Sha256::new();
            h.update(seed.to_le_bytes());
            h.update(i.to_le_bytes());
            h.finalize().into()
        })
        .collect()
}

/// Length of RFC 9162 `PATH(m, D[n])`, straight from its recursive definition.
fn rfc_path_len(m: usize, n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    let k = 1 << (usize::BITS - 1 - (n - 1).leading_zeros());
    if m < k {
        1 + rfc_path_len(m, k)
    } else {
        1 + rfc_path_len(m - k, n - k)
    }
}

fn flip(hash: &Hash, byte: usize, bit: u8) -> Hash {
    let mut out = *hash;
    out[byte] ^= 1 << bit;
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_inclusion_proof_verifies(seed: u64, n in 1usize..400) {
        let leaves = leaves(seed, n);
        let tree = MerkleTree::from_ordered_leaves(leaves.clone());
        let root = tree.root();
        prop_assert_eq!(root, merkle_root(&leaves));
        for (i, leaf) in leaves.iter().enumerate() {
            let path = tree.inclusion_proof(i).unwrap();
            prop_assert_eq!(verify_inclusion(leaf, i as u64, n as u64, &path, &root), Ok(()));
        }
    }

    #[test]
    fn tampered_inclusion_proofs_fail(seed: u64, n in 1usize..300, pick: prop::sample::Index, bit in 0u8..8) {
        let all = leaves(seed, n);
        let leaves = &all[..];
        let root = merkle_root(leaves);
        let i = pick.index(n);
        let (index, size) = (i as u64, n as u64);
        let path = inclusion_proof(leaves, i).unwrap();
        prop_assert_eq!(path.len(), rfc_path_len(i, n));
        let leaf = leaves[i];

        // Any byte of any path element.
        for k in 0..path.len() {
            for byte in 0..32 {
                let mut bad = path.clone();
                bad[k] = flip(&bad[k], byte, bit);
                prop_assert!(verify_inclusion(&leaf, index, size, &bad, &root).is_err());
            }
        }
        // Any byte of the leaf or the root.
        for byte in 0..32 {
            prop_assert!(verify_inclusion(&flip(&leaf, byte, bit), index, size, &path, &root).is_err());
            prop_assert!(verify_inclusion(&leaf, index, size, &path, &flip(&root, byte, bit)).is_err());
        }
        // Any other index.
        for j in (0..n).filter(|&j| j != i) {
            prop_assert!(verify_inclusion(&leaf, j as u64, size, &path, &root).is_err(), "index {} accepted for {}", j, i);
        }
        // Extra, missing, reordered elements.
        let mut longer = path.clone();
        longer.push(root);
        prop_assert!(verify_inclusion(&leaf, index, size, &longer, &root).is_err());
        if !path.is_empty() {
            prop_assert_eq!(
                verify_inclusion(&leaf, index, size, &path[..path.len() - 1], &root),
                Err(ProofError::PathTooShort)
            );
        }
        if path.len() >= 2 && path[0] != path[1] {
            let mut swapped = path.clone();
            swapped.swap(0, 1);
            prop_assert!(verify_inclusion(&leaf, index, size, &swapped, &root).is_err());
        }
        // A wrong size fails whenever it changes the proof's shape. (RFC 9162
        // inclusion proofs do not bind the size by themselves, see
        // `inclusion_proof_does_not_bind_size`; verifiers take the size from
        // the signed root.)
        for other in (1..=2 * n).filter(|&s| s != n) {
            let shape_differs = i >= other || rfc_path_len(i, other) != path.len();
            if shape_differs {
                prop_assert!(verify_inclusion(&leaf, index, other as u64, &path, &root).is_err());
            }
        }
    }

    #[test]
    fn consistency_proofs_verify_and_tampering_fails(
        seed: u64, n in 1usize..300, pick: prop::sample::Index, bit in 0u8..8,
    ) {
        let leaves = leaves(seed, n);
        let tree = MerkleTree::from_ordered_leaves(leaves.clone());
        let m = 1 + pick.index(n);
        let (old, new) = (merkle_root(&leaves[..m]), tree.root());
        let proof = consistency_proof(&leaves, m).unwrap();
        prop_assert_eq!(&tree.consistency_proof(m).unwrap(), &proof);
        prop_assert_eq!(verify_consistency(m as u64, n as u64, &proof, &old, &new), Ok(()));

        for k in 0..proof.len() {
            for byte in 0..32 {
                let mut bad = proof.clone();
                bad[k] = flip(&bad[k], byte, bit);
                prop_assert!(verify_consistency(m as u64, n as u64, &bad, &old, &new).is_err());
            }
        }
        for byte in 0..32 {
            prop_assert!(verify_consistency(m as u64, n as u64, &proof, &flip(&old, byte, bit), &new).is_err());
            prop_assert!(verify_consistency(m as u64, n as u64, &proof, &old, &flip(&new, byte, bit)).is_err());
        }
        if !proof.is_empty() {
            prop_assert!(verify_consistency(m as u64, n as u64, &proof[1..], &old, &new).is_err());
            let mut longer = proof.clone();
            longer.push(new);
            prop_assert!(verify_consistency(m as u64, n as u64, &longer, &old, &new).is_err());
        }
        // Roots of other sizes are not accepted as the old root.
        for other in (1..n).filter(|&o| o != m) {
            let other_root = merkle_root(&leaves[..other]);
            if other_root != old {
                prop_assert!(verify_consistency(m as u64, n as u64, &proof, &other_root, &new).is_err());
            }
        }
    }

    #[test]
    fn consistency_between_all_sizes_of_small_trees(seed: u64, n in 1usize..40) {
        let leaves = leaves(seed, n);
        let roots: Vec<Hash> = (0..=n).map(|k| merkle_root(&leaves[..k])).collect();
        for new in 1..=n {
            for old in 1..=new {
                let proof = consistency_proof(&leaves[..new], old).unwrap();
                prop_assert_eq!(
                    verify_consistency(old as u64, new as u64, &proof, &roots[old], &roots[new]),
                    Ok(())
                );
            }
        }
    }

    #[test]
    fn sorted_unique_is_a_sorted_set(raw in prop::collection::vec(0u8..16, 0..200)) {
        // Few distinct values so that duplicates are common.
        let input: Vec<Hash> = raw.iter().map(|&b| [b; 32]).collect();
        let out = sorted_unique_leaves(input.clone());
        prop_assert!(out.windows(2).all(|w| w[0] < w[1]));
        let mut expected = input;
        expected.sort();
        expected.dedup();
        prop_assert_eq!(&out, &expected);
        // Order of the input does not change the daily root.
        let mut reversed = raw.clone();
        reversed.reverse();
        let again = sorted_unique_leaves(reversed.iter().map(|&b| [b; 32]).collect());
        prop_assert_eq!(merkle_root(&out), merkle_root(&again));
    }

    #[test]
    fn malformed_proofs_never_panic(
        index: u64, size: u64, path in prop::collection::vec(any::<[u8; 32]>(), 0..80),
        old: u64, new: u64,
    ) {
        let _ = verify_inclusion(&[0; 32], index, size, &path, &[1; 32]);
        let _ = verify_consistency(old, new, &path, &[0; 32], &[1; 32]);
    }
}

/// Documents a property of RFC 9162 itself: the audit path for leaf 0 of
/// a 5-leaf tree also verifies as a proof in a 6-leaf tree with the same
/// root, because both sizes give the same left/right shape. The size must
/// therefore come from signed data (`entry_count`), which
/// `verify_inclusion_response` enforces.
#[test]
fn inclusion_proof_does_not_bind_size() {
    let leaves = leaves(7, 5);
    let root = merkle_root(&leaves);
    let path = inclusion_proof(&leaves, 0).unwrap();
    assert_eq!(verify_inclusion(&leaves[0], 0, 5, &path, &root), Ok(()));
    assert_eq!(verify_inclusion(&leaves[0], 0, 6, &path, &root), Ok(()));
}
