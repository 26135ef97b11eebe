//! Chunked proofs equal whole-tree proofs: for tree sizes around and far above the chunk
//! size, the root from chunk roots and the audit path from one chunk's leaves plus the
//! chunk roots are exactly `MerkleTree`'s, and verify against it.

use proptest::prelude::*;
use sha2::{Digest, Sha256};
use translog::chunk::{
    CHUNK_LEAVES, ChunkRootBuilder, ChunkedTree, chunk_count, chunk_of, chunk_roots, chunk_start,
    inclusion_proof_chunked, root_from_chunk_roots,
};
use translog::{Hash, MerkleTree, verify_inclusion};

const C: usize = CHUNK_LEAVES;

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

/// The chunk roots as a publisher computes them: streamed, one leaf at a time.
fn streamed_chunk_roots(leaves: &[Hash]) -> Vec<Hash> {
    let mut builder = ChunkRootBuilder::new();
    let mut roots: Vec<Hash> = leaves.iter().filter_map(|l| builder.push(l)).collect();
    roots.extend(builder.finish());
    roots
}

fn chunk_leaves(all: &[Hash], index: usize) -> &[Hash] {
    let start = chunk_start(chunk_of(index as u64)) as usize;
    &all[start..(start + C).min(all.len())]
}

/// Checks every index in `indexes` of an `n`-leaf tree.
fn check(seed: u64, n: usize, indexes: impl Iterator<Item = usize>) {
    let all = leaves(seed, n);
    let tree = MerkleTree::from_ordered_leaves(all.clone());
    let roots = streamed_chunk_roots(&all);
    assert_eq!(roots, chunk_roots(&all), "n={n}");
    assert_eq!(roots.len() as u64, chunk_count(n as u64), "n={n}");
    assert_eq!(root_from_chunk_roots(&roots), tree.root(), "n={n}");
    let chunked = ChunkedTree::new(n as u64, roots.clone()).unwrap();
    assert_eq!(chunked.root(), tree.root(), "n={n}");
    assert_eq!(chunked.len(), n as u64);
    for i in indexes {
        let want = tree.inclusion_proof(i).unwrap();
        let chunk = chunk_leaves(&all, i);
        let path = inclusion_proof_chunked(n as u64, i as u64, chunk, &roots).unwrap();
        assert_eq!(path, want, "n={n} i={i}");
        assert_eq!(
            chunked.inclusion_proof(i as u64, chunk).unwrap(),
            want,
            "n={n} i={i}"
        );
        assert_eq!(
            verify_inclusion(&all[i], i as u64, n as u64, &path, &tree.root()),
            Ok(()),
            "n={n} i={i}"
        );
    }
}

#[test]
fn every_index_of_sizes_around_the_chunk_boundaries() {
    for n in [
        1,
        2,
        3,
        C - 1,
        C,
        C + 1,
        2 * C - 1,
        2 * C,
        2 * C + 3,
        3 * C,
        4 * C + 1,
        5 * C + 77,
    ] {
        check(n as u64, n, 0..n);
    }
}

#[test]
fn sizes_far_above_the_chunk() {
    // Many chunks, with and without a partial last one; the first, last and boundary
    // leaves, and a stride through the rest.
    for n in [64 * C, 64 * C + 1, 100 * C + 255, 257 * C + 3] {
        let edges = [0, 1, C - 1, C, n / 2, n - C, n - 2, n - 1];
        check(n as u64, n, edges.into_iter().chain((0..n).step_by(97)));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_sizes_and_indexes(seed: u64, n in 1usize..(24 * C), picks in prop::collection::vec(any::<prop::sample::Index>(), 1..12)) {
        check(seed, n, picks.iter().map(|p| p.index(n)));
    }

    #[test]
    fn a_wrong_chunk_does_not_verify(seed: u64, n in (C + 1)..(6 * C), pick: prop::sample::Index) {
        // The path from the neighbouring chunk's leaves cannot prove this leaf.
        let all = leaves(seed, n);
        let i = pick.index(n);
        let roots = chunk_roots(&all);
        let other = if chunk_of(i as u64) == 0 { i + C } else { i - C };
        let wrong = chunk_leaves(&all, other.min(n - 1));
        if wrong.len() == chunk_leaves(&all, i).len() {
            let path = inclusion_proof_chunked(n as u64, i as u64, wrong, &roots).unwrap();
            prop_assert!(verify_inclusion(&all[i], i as u64, n as u64, &path, &root_from_chunk_roots(&roots)).is_err());
        }
    }
}
