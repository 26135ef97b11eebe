//! Merkle tree shape, roots and proofs per RFC 9162 section 2.1.
//!
//! Leaves are used as given (they already are SHA-256 leaf hashes, see
//! [`crate::leaf`]); interior nodes are `SHA-256(0x01 || left || right)`.

use crate::sha;

/// A SHA-256 output: a leaf hash, an interior node or a root.
pub type Hash = [u8; 32];

/// Byte prepended to the two children of an interior node.
pub const NODE_PREFIX: u8 = 0x01;

/// Root of the empty tree: SHA-256 of the empty string.
pub const EMPTY_ROOT: Hash = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

/// Why a proof could not be generated or did not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("leaf index {index} is not below tree size {size}")]
    IndexOutOfRange { index: u64, size: u64 },
    #[error("proof has more hashes than the tree shape allows")]
    PathTooLong,
    #[error("proof has fewer hashes than the tree shape requires")]
    PathTooShort,
    #[error("consistency proof is empty although the sizes differ")]
    EmptyProof,
    #[error("sizes {old} -> {new} admit no consistency proof (need 0 < old <= new)")]
    InvalidSizes { old: u64, new: u64 },
    #[error("sizes are equal, so the consistency proof must be empty")]
    UnexpectedProof,
    #[error("proof does not reproduce the old root")]
    OldRootMismatch,
    #[error("proof does not reproduce the expected root")]
    RootMismatch,
}

/// Interior node hash: `SHA-256(0x01 || left || right)`.
///
/// The preimage is always 65 bytes, so its padded form is always the same
/// two blocks; they are built directly and fed to the compression function
/// (plain SHA-256, minus the streaming hasher's buffering), the hot loop
/// of every root computation.
#[inline]
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut msg = [0u8; 2 * sha::BLOCK_LEN];
    msg[0] = NODE_PREFIX;
    msg[1..33].copy_from_slice(left);
    msg[33..65].copy_from_slice(right);
    sha::sha256_short(&mut msg, 65)
}

/// Sorts leaf hashes bytewise and removes duplicates: the daily leaf order.
pub fn sorted_unique_leaves(mut leaves: Vec<Hash>) -> Vec<Hash> {
    if leaves.len() < 1 << 16 {
        leaves.sort_unstable();
    } else {
        leaves = bucket_sort(&leaves);
    }
    leaves.dedup();
    leaves
}

/// Sort for large sets of SHA-256 outputs: they are uniform, so one
/// counting pass on the first two bytes splits them into 65,536 buckets of
/// a few entries each, which are then sorted on their own. Same result as
/// a comparison sort, several times fewer 32-byte comparisons.
fn bucket_sort(leaves: &[Hash]) -> Vec<Hash> {
    let bucket = |h: &Hash| usize::from(u16::from_be_bytes([h[0], h[1]]));
    let mut starts = vec![0usize; (1 << 16) + 1];
    for h in leaves {
        starts[bucket(h) + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut next = starts.clone();
    let mut out = vec![[0u8; 32]; leaves.len()];
    for h in leaves {
        let slot = &mut next[bucket(h)];
        out[*slot] = *h;
        *slot += 1;
    }
    // Within a bucket the first two bytes are equal: compare the next eight
    // as one integer and fall back to the full hash only on a tie.
    let key = |h: &Hash| u64::from_be_bytes([h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9]]);
    for range in starts.windows(2) {
        out[range[0]..range[1]].sort_unstable_by(|a, b| key(a).cmp(&key(b)).then_with(|| a.cmp(b)));
    }
    out
}

/// Merkle tree hash (RFC 9162 `MTH`) of `leaves` taken in the given order.
///
/// Iterative and allocation-free: see [`RootBuilder`].
pub fn merkle_root(leaves: &[Hash]) -> Hash {
    let mut builder = RootBuilder::new();
    for leaf in leaves {
        builder.push(leaf);
    }
    builder.root()
}

/// The root of a tree whose leaves arrive one at a time, in tree order, in
/// constant memory: a stack of at most 64 complete subtree roots, merged as
/// soon as two of equal height meet, then folded right to left, which yields
/// exactly the RFC shape (split at the largest power of two below n, odd node
/// promoted, never duplicated). A day's root over any number of leaves
/// streamed from disk needs nothing more.
#[derive(Clone)]
pub struct RootBuilder {
    stack: [Hash; 64],
    depth: usize,
    len: u64,
}

impl Default for RootBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl RootBuilder {
    pub fn new() -> Self {
        Self {
            stack: [[0u8; 32]; 64],
            depth: 0,
            len: 0,
        }
    }

    /// Appends the next leaf.
    pub fn push(&mut self, leaf: &Hash) {
        self.stack[self.depth] = *leaf;
        self.depth += 1;
        self.len += 1;
        // After leaf i, (i + 1).trailing_zeros() pairs of equal-height subtrees complete.
        for _ in 0..self.len.trailing_zeros() {
            self.depth -= 1;
            self.stack[self.depth - 1] =
                node_hash(&self.stack[self.depth - 1], &self.stack[self.depth]);
        }
    }

    /// Leaves pushed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The root of the leaves pushed so far ([`EMPTY_ROOT`] for none).
    pub fn root(&self) -> Hash {
        if self.depth == 0 {
            return EMPTY_ROOT;
        }
        let mut acc = self.stack[self.depth - 1];
        for node in self.stack[..self.depth - 1].iter().rev() {
            acc = node_hash(node, &acc);
        }
        acc
    }
}

/// Largest power of two strictly smaller than `n` (n >= 2).
fn split_point(n: usize) -> usize {
    debug_assert!(n >= 2);
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
}

/// Smallest `h` with `2^h >= n` (n >= 1).
fn ceil_log2(n: usize) -> u32 {
    if n <= 1 {
        0
    } else {
        usize::BITS - (n - 1).leading_zeros()
    }
}

/// RFC 9162 2.1.3.1 `PATH(m, D[start:end])`, with `m` absolute. `root_of`
/// returns the root of a subtree range; the recursion depth is at most 64.
fn rfc_path(
    m: usize,
    start: usize,
    end: usize,
    root_of: &dyn Fn(usize, usize) -> Hash,
    out: &mut Vec<Hash>,
) {
    if end - start <= 1 {
        return;
    }
    let mid = start + split_point(end - start);
    if m < mid {
        rfc_path(m, start, mid, root_of, out);
        out.push(root_of(mid, end));
    } else {
        rfc_path(m, mid, end, root_of, out);
        out.push(root_of(start, mid));
    }
}

/// RFC 9162 2.1.4.1 `SUBPROOF(m, D[start:end], b)`, with `m` absolute.
fn rfc_subproof(
    m: usize,
    start: usize,
    end: usize,
    complete: bool,
    root_of: &dyn Fn(usize, usize) -> Hash,
    out: &mut Vec<Hash>,
) {
    if m == end {
        if !complete {
            out.push(root_of(start, end));
        }
        return;
    }
    let mid = start + split_point(end - start);
    if m <= mid {
        rfc_subproof(m, start, mid, complete, root_of, out);
        out.push(root_of(mid, end));
    } else {
        rfc_subproof(m, mid, end, false, root_of, out);
        out.push(root_of(start, mid));
    }
}

fn check_index(index: usize, size: usize) -> Result<(), ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange {
            index: index as u64,
            size: size as u64,
        });
    }
    Ok(())
}

fn check_old_size(old_size: usize, size: usize) -> Result<(), ProofError> {
    if old_size == 0 || old_size > size {
        return Err(ProofError::InvalidSizes {
            old: old_size as u64,
            new: size as u64,
        });
    }
    Ok(())
}

/// Audit path for `leaves[index]` (RFC 9162 2.1.3.1), deepest sibling first.
/// Costs O(n) hashing; use [`MerkleTree`] to serve many proofs.
pub fn inclusion_proof(leaves: &[Hash], index: usize) -> Result<Vec<Hash>, ProofError> {
    check_index(index, leaves.len())?;
    let mut out = Vec::new();
    rfc_path(
        index,
        0,
        leaves.len(),
        &|a, b| merkle_root(&leaves[a..b]),
        &mut out,
    );
    Ok(out)
}

/// Consistency proof from the first `old_size` leaves to all of `leaves`
/// (RFC 9162 2.1.4.1). Empty when `old_size == leaves.len()`.
pub fn consistency_proof(leaves: &[Hash], old_size: usize) -> Result<Vec<Hash>, ProofError> {
    check_old_size(old_size, leaves.len())?;
    let mut out = Vec::new();
    rfc_subproof(
        old_size,
        0,
        leaves.len(),
        true,
        &|a, b| merkle_root(&leaves[a..b]),
        &mut out,
    );
    Ok(out)
}

/// Recomputes the root from a leaf hash and its audit path, exactly as
/// RFC 9162 2.1.3.2: the index must be below the size, every path element
/// must be consumed and `sn` must end at 0.
pub fn root_from_inclusion_proof(
    leaf: &Hash,
    index: u64,
    size: u64,
    path: &[Hash],
) -> Result<Hash, ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let (mut fnode, mut snode) = (index, size - 1);
    let mut r = *leaf;
    for p in path {
        if snode == 0 {
            return Err(ProofError::PathTooLong);
        }
        if fnode & 1 == 1 || fnode == snode {
            r = node_hash(p, &r);
            if fnode & 1 == 0 {
                // fnode is a right-edge node promoted without a sibling: skip those levels.
                while fnode & 1 == 0 && fnode != 0 {
                    fnode >>= 1;
                    snode >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    if snode != 0 {
        return Err(ProofError::PathTooShort);
    }
    Ok(r)
}

/// Verifies an inclusion proof against a trusted root (RFC 9162 2.1.3.2).
pub fn verify_inclusion(
    leaf: &Hash,
    index: u64,
    size: u64,
    path: &[Hash],
    root: &Hash,
) -> Result<(), ProofError> {
    if root_from_inclusion_proof(leaf, index, size, path)? != *root {
        return Err(ProofError::RootMismatch);
    }
    Ok(())
}

/// Verifies that the tree `(new_size, new_root)` extends `(old_size,
/// old_root)` (RFC 9162 2.1.4.2). Equal sizes need an empty proof and equal
/// roots; a proof from the empty tree is meaningless and rejected.
pub fn verify_consistency(
    old_size: u64,
    new_size: u64,
    proof: &[Hash],
    old_root: &Hash,
    new_root: &Hash,
) -> Result<(), ProofError> {
    if old_size == 0 || old_size > new_size {
        return Err(ProofError::InvalidSizes {
            old: old_size,
            new: new_size,
        });
    }
    if old_size == new_size {
        if !proof.is_empty() {
            return Err(ProofError::UnexpectedProof);
        }
        if old_root != new_root {
            return Err(ProofError::RootMismatch);
        }
        return Ok(());
    }
    // Step 1.
    let Some((first, rest)) = proof.split_first() else {
        return Err(ProofError::EmptyProof);
    };
    // Step 2: when old_size is a power of two the old root is the implicit first element.
    let (seed, rest) = if old_size.is_power_of_two() {
        (old_root, proof)
    } else {
        (first, rest)
    };
    // Steps 3 and 4.
    let (mut fnode, mut snode) = (old_size - 1, new_size - 1);
    while fnode & 1 == 1 {
        fnode >>= 1;
        snode >>= 1;
    }
    // Step 5.
    let (mut fr, mut sr) = (*seed, *seed);
    // Step 6.
    for c in rest {
        if snode == 0 {
            return Err(ProofError::PathTooLong);
        }
        if fnode & 1 == 1 || fnode == snode {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            if fnode & 1 == 0 {
                while fnode & 1 == 0 && fnode != 0 {
                    fnode >>= 1;
                    snode >>= 1;
                }
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    // Step 7.
    if snode != 0 {
        return Err(ProofError::PathTooShort);
    }
    if fr != *old_root {
        return Err(ProofError::OldRootMismatch);
    }
    if sr != *new_root {
        return Err(ProofError::RootMismatch);
    }
    Ok(())
}

/// A tree that keeps every level in memory (about 2n hashes) so that roots
/// and proofs cost O(log n) after an O(n) build.
#[derive(Debug, Clone)]
pub struct MerkleTree {
    /// `levels[0]` are the leaves; node `j` of level `h` is the root of
    /// leaves `[j * 2^h, min((j + 1) * 2^h, n))`, which is exactly an RFC
    /// 9162 subtree whenever the range is one the RFC recursion visits.
    levels: Vec<Vec<Hash>>,
    sorted: bool,
}

impl MerkleTree {
    /// Builds the daily tree: leaves sorted bytewise and de-duplicated.
    pub fn from_leaf_hashes(leaves: Vec<Hash>) -> Self {
        Self::build(sorted_unique_leaves(leaves), true)
    }

    /// Builds a tree over leaves in the order given (no sorting).
    pub fn from_ordered_leaves(leaves: Vec<Hash>) -> Self {
        Self::build(leaves, false)
    }

    fn build(leaves: Vec<Hash>, sorted: bool) -> Self {
        let mut levels = vec![leaves];
        while let Some(level) = levels.last().filter(|l| l.len() > 1) {
            let next: Vec<Hash> = level
                .chunks(2)
                .map(|pair| match pair {
                    [left, right] => node_hash(left, right),
                    // Odd node out: promoted unchanged, never duplicated.
                    [only] => *only,
                    _ => unreachable!("chunks(2) yields one or two items"),
                })
                .collect();
            levels.push(next);
        }
        Self { levels, sorted }
    }

    /// Number of leaves.
    pub fn len(&self) -> usize {
        self.levels[0].len()
    }

    /// True for the empty tree.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The leaves in tree order.
    pub fn leaves(&self) -> &[Hash] {
        &self.levels[0]
    }

    /// Root hash (`EMPTY_ROOT` for no leaves).
    pub fn root(&self) -> Hash {
        match self.levels.last().and_then(|l| l.first()) {
            Some(root) => *root,
            None => EMPTY_ROOT,
        }
    }

    /// Position of a leaf hash, if present.
    pub fn leaf_index(&self, leaf: &Hash) -> Option<usize> {
        if self.sorted {
            self.leaves().binary_search(leaf).ok()
        } else {
            self.leaves().iter().position(|l| l == leaf)
        }
    }

    /// Root of an RFC subtree range (see the `levels` invariant).
    fn subtree_root(&self, start: usize, end: usize) -> Hash {
        let height = ceil_log2(end - start);
        debug_assert_eq!(start % (1 << height), 0, "range not aligned");
        self.levels[height as usize][start >> height]
    }

    /// Audit path for leaf `index`, identical to [`inclusion_proof`].
    pub fn inclusion_proof(&self, index: usize) -> Result<Vec<Hash>, ProofError> {
        check_index(index, self.len())?;
        let mut out = Vec::new();
        rfc_path(
            index,
            0,
            self.len(),
            &|a, b| self.subtree_root(a, b),
            &mut out,
        );
        Ok(out)
    }

    /// Consistency proof from the first `old_size` leaves, identical to [`consistency_proof`].
    pub fn consistency_proof(&self, old_size: usize) -> Result<Vec<Hash>, ProofError> {
        check_old_size(old_size, self.len())?;
        let mut out = Vec::new();
        rfc_subproof(
            old_size,
            0,
            self.len(),
            true,
            &|a, b| self.subtree_root(a, b),
            &mut out,
        );
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    #[test]
    fn streamed_root_equals_the_root_of_every_prefix() {
        let leaves: Vec<Hash> = (0u32..300)
            .map(|i| Sha256::digest(i.to_be_bytes()).into())
            .collect();
        let mut builder = RootBuilder::new();
        assert_eq!(builder.root(), EMPTY_ROOT);
        for (n, leaf) in leaves.iter().enumerate() {
            builder.push(leaf);
            assert_eq!(builder.len(), n as u64 + 1);
            assert_eq!(
                builder.root(),
                MerkleTree::from_ordered_leaves(leaves[..=n].to_vec()).root(),
                "{} leaves",
                n + 1
            );
        }
    }

    fn h(i: u32) -> Hash {
        Sha256::digest(i.to_be_bytes()).into()
    }

    /// Direct transcription of the RFC 9162 MTH recursion, as an oracle.
    fn mth_recursive(d: &[Hash]) -> Hash {
        match d.len() {
            0 => EMPTY_ROOT,
            1 => d[0],
            n => {
                let k = split_point(n);
                node_hash(&mth_recursive(&d[..k]), &mth_recursive(&d[k..]))
            }
        }
    }

    #[test]
    fn empty_root_is_sha256_of_nothing() {
        let want: Hash = Sha256::digest(b"").into();
        assert_eq!(EMPTY_ROOT, want);
        assert_eq!(merkle_root(&[]), want);
        assert_eq!(MerkleTree::from_ordered_leaves(vec![]).root(), want);
    }

    #[test]
    fn split_point_is_largest_power_below() {
        for (n, k) in [(2, 1), (3, 2), (4, 2), (5, 4), (8, 4), (9, 8), (1000, 512)] {
            assert_eq!(split_point(n), k, "n={n}");
        }
    }

    #[test]
    fn node_hash_prefixes_0x01() {
        let (l, r) = (h(1), h(2));
        let mut hasher = Sha256::new();
        hasher.update([1u8]);
        hasher.update(l);
        hasher.update(r);
        let want: Hash = hasher.finalize().into();
        assert_eq!(node_hash(&l, &r), want);
    }

    #[test]
    fn stack_root_and_levels_match_recursive_definition() {
        let leaves: Vec<Hash> = (0..300).map(h).collect();
        for n in 0..=leaves.len() {
            let want = mth_recursive(&leaves[..n]);
            assert_eq!(merkle_root(&leaves[..n]), want, "n={n}");
            assert_eq!(
                MerkleTree::from_ordered_leaves(leaves[..n].to_vec()).root(),
                want,
                "n={n}"
            );
        }
    }

    #[test]
    fn tree_proofs_equal_slice_proofs() {
        let leaves: Vec<Hash> = (0..70).map(h).collect();
        for n in 1..=leaves.len() {
            let tree = MerkleTree::from_ordered_leaves(leaves[..n].to_vec());
            for i in 0..n {
                assert_eq!(
                    tree.inclusion_proof(i),
                    inclusion_proof(&leaves[..n], i),
                    "n={n} i={i}"
                );
            }
            for m in 1..=n {
                assert_eq!(
                    tree.consistency_proof(m),
                    consistency_proof(&leaves[..n], m),
                    "n={n} m={m}"
                );
            }
        }
    }

    #[test]
    fn bucket_sort_equals_comparison_sort() {
        // Includes skewed inputs (shared prefixes, duplicates) that defeat the buckets.
        let mut leaves: Vec<Hash> = (0..70_000).map(h).collect();
        leaves.extend((0..5_000u32).map(|i| {
            let mut x = [0u8; 32];
            x[31] = i as u8;
            x
        }));
        let mut want = leaves.clone();
        want.sort_unstable();
        want.dedup();
        assert_eq!(sorted_unique_leaves(leaves), want);
    }

    #[test]
    fn sorted_unique_sorts_and_dedups() {
        let leaves = vec![h(3), h(1), h(3), h(2), h(1)];
        let out = sorted_unique_leaves(leaves);
        assert_eq!(out.len(), 3);
        assert!(out.windows(2).all(|w| w[0] < w[1]));
        let tree = MerkleTree::from_leaf_hashes(vec![h(3), h(1), h(3)]);
        assert_eq!(tree.len(), 2);
        assert_eq!(
            tree.leaf_index(&h(3)),
            tree.leaves().iter().position(|l| *l == h(3))
        );
        assert_eq!(tree.leaf_index(&h(9)), None);
    }

    #[test]
    fn out_of_range_requests_are_errors() {
        let leaves: Vec<Hash> = (0..5).map(h).collect();
        assert_eq!(
            inclusion_proof(&leaves, 5),
            Err(ProofError::IndexOutOfRange { index: 5, size: 5 })
        );
        assert!(inclusion_proof(&[], 0).is_err());
        assert!(consistency_proof(&leaves, 0).is_err());
        assert!(consistency_proof(&leaves, 6).is_err());
        assert_eq!(consistency_proof(&leaves, 5), Ok(vec![]));
        let tree = MerkleTree::from_ordered_leaves(leaves);
        assert!(tree.inclusion_proof(7).is_err());
        assert!(tree.consistency_proof(0).is_err());
    }

    #[test]
    fn single_leaf_tree() {
        let leaf = h(7);
        assert_eq!(merkle_root(&[leaf]), leaf);
        assert_eq!(inclusion_proof(&[leaf], 0), Ok(vec![]));
        assert_eq!(verify_inclusion(&leaf, 0, 1, &[], &leaf), Ok(()));
        assert_eq!(
            verify_inclusion(&leaf, 0, 1, &[leaf], &leaf),
            Err(ProofError::PathTooLong)
        );
        assert_eq!(
            verify_inclusion(&leaf, 1, 1, &[], &leaf),
            Err(ProofError::IndexOutOfRange { index: 1, size: 1 })
        );
    }

    #[test]
    fn huge_sizes_and_long_paths_do_not_panic() {
        let leaf = h(1);
        let path = vec![h(2); 200];
        assert!(verify_inclusion(&leaf, u64::MAX - 1, u64::MAX, &path, &leaf).is_err());
        assert!(verify_inclusion(&leaf, 0, u64::MAX, &[], &leaf).is_err());
        assert!(verify_consistency(1, u64::MAX, &path, &leaf, &leaf).is_err());
        assert!(verify_consistency(u64::MAX - 1, u64::MAX, &path, &leaf, &leaf).is_err());
        assert!(verify_consistency(u64::MAX, u64::MAX, &[], &leaf, &leaf).is_ok());
    }
}
