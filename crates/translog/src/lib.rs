//! # knowngood transparency log
//!
//! Pure primitives (no I/O) shared by the server, which publishes one signed
//! Merkle root per day over its public feed, and by the CLI verifier, which
//! checks those roots and inclusion proofs. This documentation is the format
//! specification; every byte below is normative.
//!
//! ## Leaf hash ([`leaf`])
//!
//! One leaf per record of the day's public feed:
//!
//! ```text
//! leaf = SHA-256( executable_name || 0x00 || hash_sha256 || 0x00 || version || 0x00 || platform || 0x00 || arch )
//! ```
//!
//! Fields are UTF-8 text; `hash_sha256` is the file's SHA-256 as 64
//! lowercase hex characters (the text, not the 32 bytes). There is **no**
//! 0x00 domain prefix (unlike RFC 6962): the 32-byte value above is used
//! as the tree leaf as is. Domain separation from interior nodes instead
//! comes from strict field rules, enforced by [`leaf::Record::validate`]:
//! no field may contain a control character (Unicode Cc, so in particular
//! no 0x00 separator), the executable name is non-empty and `hash_sha256`
//! is exactly 64 lowercase hex characters. A leaf preimage is therefore at
//! least 69 bytes, never the 65-byte `0x01 || left || right` of a node.
//! Verifiers recompute the leaf hash from the record fields and never use
//! a leaf hash supplied by a server.
//!
//! ## Daily tree ([`merkle`])
//!
//! * Leaves: the day's leaf hashes sorted bytewise (as unsigned bytes) with
//!   duplicates removed ([`merkle::sorted_unique_leaves`]). `entry_count`
//!   is the number of leaves after de-duplication.
//! * Shape: RFC 9162 section 2.1. For n > 1 leaves, with k the largest
//!   power of two strictly smaller than n,
//!   `MTH(D[n]) = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n]))`;
//!   `MTH` of one leaf is the leaf itself; the empty tree's root is
//!   `SHA-256("")` = `e3b0c442…b855`. The last node is never duplicated.
//! * Inclusion proofs: the RFC 9162 2.1.3.1 audit path, deepest sibling
//!   first, verified by the 2.1.3.2 algorithm (index must be below the
//!   size, every path element consumed, `sn` ends at 0).
//! * Consistency proofs: RFC 9162 2.1.4 (generation 2.1.4.1, verification
//!   2.1.4.2). Equal sizes require an empty proof and equal roots; a proof
//!   from size 0 is rejected as meaningless. Each day's tree is built
//!   afresh from that day's sorted leaves, so consecutive days are
//!   *not* append-only extensions of each other; the days are linked by
//!   the signed hash chain below instead.
//!
//! * Chunks ([`chunk`]): the aligned runs of [`chunk::CHUNK_LEAVES`] leaves (and the
//!   last, shorter one) are nodes of the tree, and the tree above them is the same shape
//!   over the chunk roots, so a server proves a leaf from its chunk's leaves and the chunk
//!   roots alone. This changes nothing a verifier sees.
//!
//! Node hashing equals RFC 6962's, so public RFC 6962 test vectors that
//! start from leaf hashes (transparency-dev/merkle) apply unchanged.
//!
//! An RFC 9162 inclusion proof does not bind the tree size on its own (the
//! path for leaf 0 of a 5-leaf tree also verifies for size 6 against the
//! same root), so a verifier must take the size from signed data: the
//! client API requires `tree_size == entry_count` of the signed root.
//!
//! SHA-256 of leaf and node preimages is computed by padding the short
//! message in a stack buffer and calling the `sha2` compression function
//! directly (FIPS 180-4 padding; tested against `Sha256::digest` for every
//! length); the output is ordinary SHA-256.
//!
//! ## Signed daily root ([`signed_root`])
//!
//! The signed message is exactly five lines joined by 0x0A, no trailing
//! newline:
//!
//! ```text
//! service-transparency-v1
//! {log_date: YYYY-MM-DD}
//! {merkle_root: 64 lowercase hex}
//! {entry_count: decimal, no leading zeros}
//! {prev_root: 64 lowercase hex}
//! ```
//!
//! `prev_root` is the previous day's `merkle_root`; on the first day it is
//! 64 `0` characters. The signature is Ed25519 (RFC 8032, verified with
//! strict rules) over the UTF-8 bytes of that message, encoded as standard
//! padded base64 of the 64 signature bytes. The public key is published as
//! base64 of its 32 raw bytes and as SPKI PEM. The key id is the lowercase
//! hex of the first 8 bytes of SHA-256 over the 32 raw public key bytes
//! (16 hex characters); it names a key, it does not authenticate it.
//! A chain of roots is valid when every signature verifies, dates
//! strictly increase and each `prev_root` equals the previous day's
//! `merkle_root` ([`verify::verify_chain`]).
//!
//! ## Checkpoints ([`checkpoint`])
//!
//! The same root can also be published as a C2SP `tlog-checkpoint` inside
//! a C2SP `signed-note`:
//!
//! ```text
//! <origin>
//! <tree size, decimal>
//! <root hash, standard base64>
//!
//! — <key name> <base64(key ID || 64-byte Ed25519 signature)>
//! ```
//!
//! The signature covers the note text (the lines above the blank line,
//! including the final newline). The key ID is the first 4 bytes of
//! `SHA-256(key name || 0x0A || 0x01 || 32-byte public key)`. Because each
//! day is an independent tree, use one origin per day, for example
//! `<host>/transparency/<YYYY-MM-DD>`. Note: the checkpoint's root is this
//! crate's tree (unprefixed leaves), not an RFC 6962 tree over the records.
//!
//! ## Verifying as a client ([`verify`])
//!
//! [`verify::verify_inclusion_response`] checks, in this order, and
//! reports the first failure as a [`VerifyError`] variant: the root's
//! signature (`BadSignature`), the record fields (`InvalidRecord`), the
//! recomputed leaf hash against the server's claim (`LeafHashMismatch`),
//! the dates (`DateMismatch`), the server's root claim
//! (`ServerRootMismatch`), `tree_size == entry_count`
//! (`TreeSizeMismatch`), the proof's structure (`ProofInvalid`) and
//! finally the computed root (`RootMismatch`).

pub mod checkpoint;
pub mod chunk;
pub mod encoding;
pub mod leaf;
pub mod merkle;
mod sha;
pub mod signed_root;
pub mod verify;

pub use checkpoint::{Checkpoint, NoteError, open_checkpoint, sign_checkpoint};
pub use encoding::FormatError;
pub use leaf::{LeafError, Record, leaf_hash, validate_executable_name};
pub use merkle::{
    EMPTY_ROOT, Hash, MerkleTree, ProofError, RootBuilder, consistency_proof, inclusion_proof,
    merkle_root, node_hash, sorted_unique_leaves, verify_consistency, verify_inclusion,
};
pub use signed_root::{GENESIS_PREV_ROOT, MESSAGE_PREFIX, SignedRoot, canonical_message};
pub use verify::{
    InclusionResponse, VerifyError, check_chain_links, verify_chain, verify_inclusion_response,
    verify_signed_root,
};

/// Re-exported so callers use the same Ed25519 types as this crate.
pub use ed25519_dalek::{SigningKey, VerifyingKey};

/// Header of an inclusion proof's 404 for a file recorded after the day's root and in no
/// published root yet: the date (`YYYY-MM-DD`) of the root it will be in.
pub const NEXT_ROOT_HEADER: &str = "knowngood-next-root";
