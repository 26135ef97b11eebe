//! Inclusion proofs from one chunk of leaves and the roots of all chunks, so a server can
//! prove a leaf of a day of any size without holding the day's leaves.
//!
//! A chunk is an aligned run of [`CHUNK_LEAVES`] leaves (`[j * C, (j + 1) * C)`), the last
//! one possibly shorter. Because `C` is a power of two and every RFC 9162 split of a range
//! longer than `C` is at a multiple of `C` (the largest power of two below the length, at
//! least `C`), every chunk is a node of the day's tree, and the tree above the chunks is
//! the same split rule applied to the chunk roots taken as leaves as they are (leaves of
//! this log are never re-hashed, see [`crate::merkle`]). Hence:
//!
//! * the day's root is [`merkle_root`] of its chunk roots ([`root_from_chunk_roots`]);
//! * a leaf's audit path is its path inside its chunk followed by its chunk's path among
//!   the chunk roots ([`inclusion_proof_chunked`], [`ChunkedTree::inclusion_proof`]).
//!
//! The chunk size is part of what a server stores (one root per chunk), so it is fixed.
//! It is 256: a proof reads and hashes one chunk (255 node hashes, a few tens of
//! microseconds, and one database range read of 256 rows, well under a millisecond),
//! while the roots kept per day stay a small fraction of the leaves (100 million leaves
//! give 390,625 chunk roots, 12.5 MB, about 25 MB with the levels above them). A chunk of
//! 1024 would keep a quarter of that but make every proof read and hash four times more.

use crate::merkle::{self, Hash, MerkleTree, ProofError, RootBuilder, merkle_root};

/// Leaves per chunk (a power of two).
pub const CHUNK_LEAVES: usize = 256;

/// Number of chunks of a tree of `tree_size` leaves (the last one may be partial).
pub fn chunk_count(tree_size: u64) -> u64 {
    tree_size.div_ceil(CHUNK_LEAVES as u64)
}

/// The chunk holding leaf `index`.
pub fn chunk_of(index: u64) -> u64 {
    index / CHUNK_LEAVES as u64
}

/// Index of the first leaf of chunk `chunk`.
pub fn chunk_start(chunk: u64) -> u64 {
    chunk.saturating_mul(CHUNK_LEAVES as u64)
}

/// Number of leaves of chunk `chunk` in a tree of `tree_size` leaves (0 past the end).
pub fn chunk_len(tree_size: u64, chunk: u64) -> usize {
    let start = chunk_start(chunk);
    // At most CHUNK_LEAVES, so the conversion cannot fail.
    usize::try_from(tree_size.saturating_sub(start).min(CHUNK_LEAVES as u64)).unwrap_or(0)
}

/// Chunk roots of a tree whose leaves arrive one at a time, in tree order, in constant
/// memory: [`push`](ChunkRootBuilder::push) returns the root of each chunk as its last
/// leaf arrives, [`finish`](ChunkRootBuilder::finish) the root of a last, partial chunk.
#[derive(Clone, Default)]
pub struct ChunkRootBuilder {
    chunk: RootBuilder,
}

impl ChunkRootBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the next leaf; the root of its chunk when this leaf completes it.
    pub fn push(&mut self, leaf: &Hash) -> Option<Hash> {
        self.chunk.push(leaf);
        if self.chunk.len() < CHUNK_LEAVES as u64 {
            return None;
        }
        let root = self.chunk.root();
        self.chunk = RootBuilder::new();
        Some(root)
    }

    /// The root of the last chunk if it is partial (no root when the leaves filled their
    /// last chunk, or when there were none).
    pub fn finish(self) -> Option<Hash> {
        (!self.chunk.is_empty()).then(|| self.chunk.root())
    }
}

/// The chunk roots of `leaves` (in tree order).
pub fn chunk_roots(leaves: &[Hash]) -> Vec<Hash> {
    leaves.chunks(CHUNK_LEAVES).map(merkle_root).collect()
}

/// The tree's root from its chunk roots ([`merkle::EMPTY_ROOT`] for none).
pub fn root_from_chunk_roots(chunk_roots: &[Hash]) -> Hash {
    merkle_root(chunk_roots)
}

/// Fails unless `chunk_roots` are as many as the chunks of `tree_size` leaves.
fn check_chunk_roots(tree_size: u64, chunk_roots: usize) -> Result<(), ProofError> {
    let want = chunk_count(tree_size);
    match (chunk_roots as u64).cmp(&want) {
        std::cmp::Ordering::Less => Err(ProofError::PathTooShort),
        std::cmp::Ordering::Greater => Err(ProofError::PathTooLong),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

/// Path of leaf `index` inside its chunk, whose leaves are `chunk_leaves`; checks they
/// number what a tree of `tree_size` leaves puts in that chunk.
fn path_in_chunk(
    tree_size: u64,
    index: u64,
    chunk_leaves: &[Hash],
) -> Result<Vec<Hash>, ProofError> {
    if index >= tree_size {
        return Err(ProofError::IndexOutOfRange {
            index,
            size: tree_size,
        });
    }
    let want = chunk_len(tree_size, chunk_of(index));
    if chunk_leaves.len() != want {
        return Err(if chunk_leaves.len() < want {
            ProofError::PathTooShort
        } else {
            ProofError::PathTooLong
        });
    }
    // Below CHUNK_LEAVES, so it fits.
    let offset = (index - chunk_start(chunk_of(index))) as usize;
    merkle::inclusion_proof(chunk_leaves, offset)
}

/// Audit path of leaf `index` in a tree of `tree_size` leaves (equal to
/// [`merkle::inclusion_proof`] over all of them) from the leaves of its chunk and the roots
/// of every chunk. Costs O(chunk + chunk roots) hashing; [`ChunkedTree`] serves many proofs
/// over the same chunk roots in O(chunk) each.
pub fn inclusion_proof_chunked(
    tree_size: u64,
    index: u64,
    chunk_leaf_hashes: &[Hash],
    chunk_roots: &[Hash],
) -> Result<Vec<Hash>, ProofError> {
    check_chunk_roots(tree_size, chunk_roots.len())?;
    let mut path = path_in_chunk(tree_size, index, chunk_leaf_hashes)?;
    // The chunk index is below the number of chunk roots, itself a slice length.
    let chunk = chunk_of(index) as usize;
    path.extend(merkle::inclusion_proof(chunk_roots, chunk)?);
    Ok(path)
}

/// A day's tree as a server keeps it: its size and the levels above its chunks (about two
/// hashes per chunk), never its leaves.
#[derive(Debug, Clone)]
pub struct ChunkedTree {
    size: u64,
    upper: MerkleTree,
}

impl ChunkedTree {
    /// The tree of `tree_size` leaves whose chunk roots are `chunk_roots`, in order.
    pub fn new(tree_size: u64, chunk_roots: Vec<Hash>) -> Result<Self, ProofError> {
        check_chunk_roots(tree_size, chunk_roots.len())?;
        Ok(Self {
            size: tree_size,
            upper: MerkleTree::from_ordered_leaves(chunk_roots),
        })
    }

    /// Number of leaves.
    pub fn len(&self) -> u64 {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The roots of the chunks, in order.
    pub fn chunk_roots(&self) -> &[Hash] {
        self.upper.leaves()
    }

    /// Root hash (`EMPTY_ROOT` for no leaves).
    pub fn root(&self) -> Hash {
        self.upper.root()
    }

    /// Audit path of leaf `index` from the leaves of its chunk, identical to
    /// [`inclusion_proof_chunked`] and so to [`merkle::inclusion_proof`].
    pub fn inclusion_proof(
        &self,
        index: u64,
        chunk_leaves: &[Hash],
    ) -> Result<Vec<Hash>, ProofError> {
        let mut path = path_in_chunk(self.size, index, chunk_leaves)?;
        path.extend(self.upper.inclusion_proof(chunk_of(index) as usize)?);
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::{EMPTY_ROOT, verify_inclusion};
    use sha2::{Digest, Sha256};

    fn leaves(n: usize) -> Vec<Hash> {
        (0..n as u64)
            .map(|i| Sha256::digest(i.to_be_bytes()).into())
            .collect()
    }

    #[test]
    fn chunk_geometry() {
        let c = CHUNK_LEAVES as u64;
        assert!(CHUNK_LEAVES.is_power_of_two());
        assert_eq!(chunk_count(0), 0);
        assert_eq!(chunk_count(1), 1);
        assert_eq!(chunk_count(c), 1);
        assert_eq!(chunk_count(c + 1), 2);
        assert_eq!((chunk_of(c - 1), chunk_of(c)), (0, 1));
        assert_eq!(chunk_len(c + 3, 0), CHUNK_LEAVES);
        assert_eq!(chunk_len(c + 3, 1), 3);
        assert_eq!(chunk_len(c + 3, 2), 0);
    }

    #[test]
    fn streamed_chunk_roots_equal_the_slices_roots() {
        for n in [
            0,
            1,
            CHUNK_LEAVES - 1,
            CHUNK_LEAVES,
            CHUNK_LEAVES + 1,
            3 * CHUNK_LEAVES + 7,
        ] {
            let leaves = leaves(n);
            let mut builder = ChunkRootBuilder::new();
            let mut streamed: Vec<Hash> = leaves.iter().filter_map(|l| builder.push(l)).collect();
            streamed.extend(builder.finish());
            assert_eq!(streamed, chunk_roots(&leaves), "n={n}");
            assert_eq!(streamed.len() as u64, chunk_count(n as u64), "n={n}");
        }
    }

    #[test]
    fn empty_tree() {
        assert_eq!(root_from_chunk_roots(&[]), EMPTY_ROOT);
        let tree = ChunkedTree::new(0, vec![]).unwrap();
        assert!(tree.is_empty());
        assert_eq!(tree.root(), EMPTY_ROOT);
        assert_eq!(
            tree.inclusion_proof(0, &[]),
            Err(ProofError::IndexOutOfRange { index: 0, size: 0 })
        );
    }

    #[test]
    fn wrong_inputs_are_errors() {
        let all = leaves(CHUNK_LEAVES + 3);
        let roots = chunk_roots(&all);
        let size = all.len() as u64;
        assert!(ChunkedTree::new(size, roots[..1].to_vec()).is_err());
        assert!(ChunkedTree::new(size - 3, roots.clone()).is_err());
        assert!(inclusion_proof_chunked(size, 0, &all[..CHUNK_LEAVES], &roots[..1]).is_err());
        let tree = ChunkedTree::new(size, roots).unwrap();
        // The partial chunk must hold exactly its three leaves.
        assert!(
            tree.inclusion_proof(size - 1, &all[CHUNK_LEAVES..size as usize - 1])
                .is_err()
        );
        assert!(
            tree.inclusion_proof(size - 1, &all[..CHUNK_LEAVES])
                .is_err()
        );
        assert!(tree.inclusion_proof(size, &all[CHUNK_LEAVES..]).is_err());
        let path = tree
            .inclusion_proof(size - 1, &all[CHUNK_LEAVES..])
            .unwrap();
        assert_eq!(
            verify_inclusion(&all[size as usize - 1], size - 1, size, &path, &tree.root()),
            Ok(())
        );
    }
}
