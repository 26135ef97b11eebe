//! The transparency log as served: daily signed Merkle roots over the public feed (published
//! by `jobs::publish`), inclusion proofs, and a second, append-only log whose leaves are the daily roots (served as a C2SP
//! checkpoint with RFC 9162 consistency proofs) so a witness can prove no past day changed.
//!
//! Root-log leaf: SHA-256 of the day's canonical signed message, a line feed, and the
//! base64 signature; leaves in date order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use chrono::NaiveDate;
use model::{Error, HashAlgo, HashValue};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use store::roots::StoredRoot;
use tokio::sync::OnceCell;
use translog::chunk::{self, CHUNK_LEAVES, ChunkRootBuilder, ChunkedTree};
use translog::encoding::hash_to_hex;
use translog::{Hash, MerkleTree, Record, SignedRoot};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::AppState;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::QueryParams;
use crate::routing::{Api, RouteRule};

/// The transparency log's public routes.
pub(crate) fn routes(api: Api) -> Api {
    api.route(routes!(index), RouteRule::public())
        .route(routes!(key), RouteRule::public())
        .route(routes!(checkpoint), RouteRule::public())
        .route(routes!(consistency), RouteRule::public())
        .route(routes!(day), RouteRule::public())
        .route(routes!(proof), RouteRule::public())
}

/// Name of the root log in its checkpoints (the C2SP origin line).
pub const CHECKPOINT_ORIGIN: &str = "knowngood/daily-roots";
const RECENT_ROOTS: u32 = 30;

/// The trees (with their stored roots) of recently asked published days, each loaded once
/// however many proofs ask for it at the same time.
#[derive(Default)]
pub struct TreeCache(Mutex<HashMap<NaiveDate, Arc<OnceCell<Arc<DayTree>>>>>);

/// What a day's proofs need in memory: its stored root and the levels of its tree above
/// the 256-leaf chunks (`translog::chunk`), about 64 bytes per 256 leaves; never the
/// leaves, which each proof reads one chunk of from the store.
pub(crate) struct DayTree {
    /// The day's stored root, read when the day was loaded (a published day never changes:
    /// the tables are append-only).
    root: StoredRoot,
    tree: ChunkedTree,
    /// The last signature check of the day's root: (message, signature, key) and its
    /// outcome. Verifying Ed25519 costs more than the rest of a proof; the check is redone
    /// whenever any input differs (e.g. the key that `signer_of` resolves).
    signature_checked: Mutex<Option<SignatureCheck>>,
}

/// Message, signature and key of a signature check, and whether it verified.
type SignatureCheck = (String, [u8; 64], [u8; 32], bool);

impl DayTree {
    fn signature_ok(&self, signed: &SignedRoot, key: &translog::VerifyingKey) -> bool {
        let (message, key_bytes) = (signed.message(), key.to_bytes());
        let mut memo = self
            .signature_checked
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some((m, sig, k, ok)) = memo.as_ref()
            && *m == message
            && *sig == signed.signature
            && *k == key_bytes
        {
            return *ok;
        }
        let ok = signed.verify(key).is_ok();
        *memo = Some((message, signed.signature, key_bytes, ok));
        ok
    }

    /// Loads a published day: its root and chunk roots, and the size of its tree (the
    /// chunks before the last are full, the last one is read). A day published before
    /// chunk roots were stored has them computed from its leaves, a page at a time, and
    /// stored, once.
    async fn load(state: &AppState, date: NaiveDate) -> Result<Self, Error> {
        let root = stored_root(state, date).await?;
        let stored = state.store.chunk_roots(date).await?;
        let tree = match stored.len().checked_sub(1) {
            Some(last) => {
                let start = chunk::chunk_start(last as u64);
                let last_leaves = state
                    .store
                    .leaf_hashes(date, start, CHUNK_LEAVES as u32)
                    .await?
                    .len();
                ChunkedTree::new(start + last_leaves as u64, stored).ok()
            }
            None => None,
        };
        let tree = match tree {
            Some(tree) => tree,
            None => {
                let (size, computed) = chunk_roots_from_leaves(state, date).await?;
                if state.store.chunk_roots(date).await?.is_empty() {
                    state.store.store_chunk_roots(date, &computed).await?;
                } else {
                    tracing::warn!(%date, "stored chunk roots do not match the stored leaves; using roots computed from the leaves");
                }
                ChunkedTree::new(size, computed).map_err(|e| {
                    Error::internal_caused("chunk roots computed from the leaves", e)
                })?
            }
        };
        Ok(Self {
            root,
            tree,
            signature_checked: Mutex::new(None),
        })
    }
}

/// Leaves read at a time when computing a day's chunk roots.
const CHUNK_PAGE: u32 = 64 * CHUNK_LEAVES as u32;

/// A day's size and chunk roots computed from its stored leaves, in bounded memory.
async fn chunk_roots_from_leaves(
    state: &AppState,
    date: NaiveDate,
) -> Result<(u64, Vec<Hash>), Error> {
    let mut builder = ChunkRootBuilder::new();
    let mut roots = Vec::new();
    let mut size = 0u64;
    loop {
        let page = state.store.leaf_hashes(date, size, CHUNK_PAGE).await?;
        for leaf_hash in &page {
            roots.extend(builder.push(leaf_hash));
        }
        size += page.len() as u64;
        if page.len() < CHUNK_PAGE as usize {
            break;
        }
    }
    roots.extend(builder.finish());
    Ok((size, roots))
}

impl TreeCache {
    const MAX_DAYS: usize = 8;

    async fn get(&self, state: &AppState, date: NaiveDate) -> Result<Arc<DayTree>, Error> {
        let cell = {
            let mut cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() >= Self::MAX_DAYS && !cache.contains_key(&date) {
                cache.clear();
            }
            Arc::clone(cache.entry(date).or_default())
        };
        // A failed load (e.g. a day asked before its root exists) leaves the cell empty:
        // the next request tries again.
        cell.get_or_try_init(|| async { DayTree::load(state, date).await.map(Arc::new) })
            .await
            .cloned()
    }
}

fn parse_hash(hex_text: &str) -> Result<Hash, Error> {
    translog::encoding::parse_hash_hex("hash", hex_text)
        .map_err(|_| Error::internal(format!("stored hash {hex_text:?} is not valid")))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RootJson {
    pub log_date: String,
    pub merkle_root: String,
    pub entry_count: u64,
    pub prev_root: String,
    /// Base64 (standard, padded) Ed25519 signature over the canonical message.
    pub signature: String,
    /// Id of the key that signed (see /public/transparency/key).
    pub key_id: String,
    pub published_at: String,
}

impl From<&StoredRoot> for RootJson {
    fn from(r: &StoredRoot) -> Self {
        Self {
            log_date: r.log_date.to_string(),
            merkle_root: r.merkle_root.clone(),
            entry_count: r.entry_count,
            prev_root: r.prev_root.clone(),
            signature: r.signature.clone(),
            key_id: r.key_id.clone(),
            published_at: crate::api::timestamp(r.published_at),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TransparencyIndex {
    /// Base64 of the raw 32-byte Ed25519 public key.
    pub public_key: String,
    pub public_key_pem: String,
    pub key_id: String,
    /// Newest first, at most 30.
    pub roots: Vec<RootJson>,
}

/// Recent signed roots and the public key.
#[utoipa::path(get, path = "/public/transparency", tag = "transparency",
    responses((status = 200, body = TransparencyIndex)))]
pub async fn index(State(state): State<AppState>) -> ApiResult<Json<TransparencyIndex>> {
    let roots = state.store.recent_roots(RECENT_ROOTS).await?;
    Ok(Json(TransparencyIndex {
        public_key: state.log_key.public_key(),
        public_key_pem: state.log_key.public_key_pem(),
        key_id: state.log_key.key_id.clone(),
        roots: roots.iter().map(RootJson::from).collect(),
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HistoricalKey {
    pub key_id: String,
    pub public_key: String,
    /// First and last day this key signed.
    pub first_date: Option<String>,
    pub last_date: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyDocument {
    pub algorithm: &'static str,
    pub public_key: String,
    pub public_key_pem: String,
    pub key_id: String,
    /// Every key that signed a root, with the days it covered.
    pub historical_keys: Vec<HistoricalKey>,
    pub recipe: Recipe,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Recipe {
    pub steps: Vec<&'static str>,
    /// Fields of the signed message, in order, joined by line feeds.
    pub message_fields: Vec<&'static str>,
    pub message_prefix: &'static str,
    /// Fields of a leaf, in order, joined by NUL bytes.
    pub leaf_fields: Vec<&'static str>,
    pub node_hash: &'static str,
    pub empty_root: &'static str,
    pub first_prev_root: String,
    pub key_id: &'static str,
}

/// The public key and how to verify a root and a proof.
#[utoipa::path(get, path = "/public/transparency/key", tag = "transparency",
    responses((status = 200, body = KeyDocument)))]
pub async fn key(State(state): State<AppState>) -> ApiResult<Json<KeyDocument>> {
    let historical_keys = state
        .store
        .log_keys()
        .await?
        .into_iter()
        .map(|k| HistoricalKey {
            key_id: k.key_id,
            public_key: k.public_key,
            first_date: k.first_date.map(|d| d.to_string()),
            last_date: k.last_date.map(|d| d.to_string()),
        })
        .collect();
    Ok(Json(KeyDocument {
        algorithm: "Ed25519",
        public_key: state.log_key.public_key(),
        public_key_pem: state.log_key.public_key_pem(),
        key_id: state.log_key.key_id.clone(),
        historical_keys,
        recipe: Recipe {
            steps: vec![
                "Fetch the day's root: GET /public/transparency/{date}.",
                "Rebuild the message: service-transparency-v1, log_date, merkle_root, entry_count (decimal), prev_root (lowercase hex), joined by 0x0A, no trailing newline.",
                "Check the base64 signature over the message's UTF-8 bytes with the Ed25519 key named by key_id.",
                "Compute the leaf: SHA-256 of executable_name, hash_sha256, version, platform, arch joined by 0x00.",
                "Fetch GET /public/transparency/{date}/proof?sha256=<hex> and fold the audit_path per RFC 9162 section 2.1.3.2 with node = SHA-256(0x01 || left || right); the result must equal merkle_root.",
                "Check the chain: each day's prev_root equals the previous published day's merkle_root (64 zeros on the first day).",
            ],
            message_fields: vec!["log_date", "merkle_root", "entry_count", "prev_root"],
            message_prefix: translog::MESSAGE_PREFIX,
            leaf_fields: vec![
                "executable_name",
                "hash_sha256",
                "version",
                "platform",
                "arch",
            ],
            node_hash: "SHA-256(0x01 || left || right); leaves are the leaf hashes themselves, sorted bytewise and de-duplicated; tree shape per RFC 9162 section 2.1",
            empty_root: "SHA-256 of the empty string",
            first_prev_root: "0".repeat(64),
            key_id: "hex of the first 8 bytes of SHA-256 of the raw public key",
        },
    }))
}

/// Parses a `{date}`: well-formed, not in the future.
fn parse_date(state: &AppState, raw: &str) -> Result<NaiveDate, Error> {
    // Exactly YYYY-MM-DD, as in the signed message (chrono alone also takes "2025-3-1").
    let date = translog::encoding::parse_log_date(raw)
        .map_err(|_| Error::bad_request(format!("date must be YYYY-MM-DD (got {raw:?})")))?;
    if date > state.clock.now().date_naive() {
        return Err(Error::bad_request(format!("{date} is in the future")));
    }
    Ok(date)
}

async fn stored_root(state: &AppState, date: NaiveDate) -> Result<StoredRoot, Error> {
    state
        .store
        .root(date)
        .await?
        .ok_or_else(|| Error::NotFound(format!("no root was published for {date}")))
}

/// One day's signed root.
#[utoipa::path(get, path = "/public/transparency/{date}", tag = "transparency",
    params(("date" = String, Path, description = "YYYY-MM-DD")),
    responses((status = 200, body = RootJson), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn day(
    State(state): State<AppState>,
    Path(date): Path<String>,
) -> ApiResult<Json<RootJson>> {
    let date = parse_date(&state, &date)?;
    Ok(Json(RootJson::from(&stored_root(&state, date).await?)))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ProofParams {
    /// SHA-256 of the file (64 hex characters).
    sha256: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ProofRecord {
    pub executable_name: String,
    pub hash_sha256: String,
    pub version: String,
    pub platform: String,
    pub arch: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ProofJson {
    pub log_date: String,
    pub sha256: String,
    pub leaf_index: u64,
    /// For reference only: a verifier recomputes it from `record`.
    pub leaf_hash: String,
    pub tree_size: u64,
    pub audit_path: Vec<String>,
    pub merkle_root: String,
    /// The fields the leaf hash is computed from.
    pub record: ProofRecord,
    /// The audit path folds the leaf into `merkle_root`.
    pub verified: bool,
    /// That root is the stored root of the day and its signature verifies.
    pub root_matches: bool,
}

use translog::NEXT_ROOT_HEADER;

/// A refused proof: an API error, plus the date of the root the file awaits when it was
/// recorded after the day's root.
#[derive(Debug)]
pub struct ProofError {
    error: ApiError,
    next_root: Option<NaiveDate>,
}

impl From<Error> for ProofError {
    fn from(e: Error) -> Self {
        Self {
            error: ApiError(e),
            next_root: None,
        }
    }
}

impl IntoResponse for ProofError {
    fn into_response(self) -> Response {
        let mut response = self.error.into_response();
        if let Some(date) = self.next_root
            && let Ok(value) = HeaderValue::from_str(&date.to_string())
        {
            response.headers_mut().insert(NEXT_ROOT_HEADER, value);
        }
        response
    }
}

/// Why a file is not in a day's tree. A current record recorded after the day's root is
/// in the first root published after it was recorded, or, if none is yet, in the next one:
/// the answer names that root (and, when it is still to come, its date in
/// [`NEXT_ROOT_HEADER`]). Anything else is a plain "not in the tree".
async fn not_in_tree(
    state: &AppState,
    sha256: &HashValue,
    root: &StoredRoot,
) -> Result<ProofError, Error> {
    let date = root.log_date;
    let plain = Error::NotFound(format!("{sha256} is not in the tree of {date}"));
    let recorded = state
        .store
        .find_by_hashes(std::slice::from_ref(sha256), false)
        .await?
        .into_iter()
        .filter(|r| r.integrity_ok && r.record.hash_sha256 == sha256.as_str())
        .map(|r| r.valid_from)
        .filter(|at| *at > root.published_at)
        .min();
    let Some(recorded) = recorded else {
        return Ok(plain.into());
    };
    let roots = state.store.all_roots().await?;
    // Roots are appended in date order; a record is in every root published from its
    // recording on while it stays current.
    if let Some(later) = roots
        .iter()
        .find(|r| r.log_date > date && r.published_at >= recorded)
    {
        return Ok(Error::NotFound(format!(
            "{sha256} was recorded after the {date} root; it is in the {} root",
            later.log_date
        ))
        .into());
    }
    let today = state.clock.now().date_naive();
    let next = roots
        .last()
        .and_then(|r| r.log_date.succ_opt())
        .map_or(today, |after_latest| after_latest.max(today));
    Ok(ProofError {
        error: ApiError(Error::NotFound(format!(
            "{sha256} was recorded after the {date} root; it will be in the {next} root"
        ))),
        next_root: Some(next),
    })
}

/// Inclusion proof of a file's SHA-256 in a day's tree.
///
/// A file recorded after the day's root is not in its tree: the 404 says so and names the
/// root it is or will be in; while that root is still to come, the `Knowngood-Next-Root`
/// header carries its date.
#[utoipa::path(get, path = "/public/transparency/{date}/proof", tag = "transparency",
    params(("date" = String, Path, description = "YYYY-MM-DD"), ProofParams),
    responses((status = 200, body = ProofJson), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody, headers(("Knowngood-Next-Root" = String,
            description = "YYYY-MM-DD of the root a file recorded after the day's root will be in, while that root is not published")))))]
pub async fn proof(
    State(state): State<AppState>,
    Path(date): Path<String>,
    QueryParams(params): QueryParams<ProofParams>,
) -> Result<Json<ProofJson>, ProofError> {
    let date = parse_date(&state, &date)?;
    let sha256 = params
        .sha256
        .ok_or_else(|| Error::bad_request("sha256 is required"))?;
    let sha256 = HashValue::parse_as(&sha256, HashAlgo::Sha256)?;
    let day = state.trees.get(&state, date).await?;
    let root = &day.root;
    let size = day.tree.len();
    let (index, leaf) = match state.store.leaf_of(date, sha256.as_str()).await? {
        Some((index, leaf)) if index < size => (index, leaf),
        _ => return Err(not_in_tree(&state, &sha256, root).await?),
    };
    // One read of the leaf's chunk, whose leaf hashes give the lower part of the path.
    let chunk = chunk::chunk_of(index);
    let start = chunk::chunk_start(chunk);
    let hashes = state
        .store
        .leaf_hashes(date, start, chunk::chunk_len(size, chunk) as u32)
        .await?;
    let Some(leaf_hash) = hashes.get((index - start) as usize).copied() else {
        return Err(Error::internal(format!("the stored leaves of {date} have gaps")).into());
    };
    let path = day
        .tree
        .inclusion_proof(index, &hashes)
        .map_err(|e| Error::internal_caused("proof failed", e))?;
    // The root of the tree the stored leaves make: this chunk recomputed from its leaves,
    // under the stored roots of the others.
    let tree_root = translog::merkle::root_from_inclusion_proof(&leaf_hash, index, size, &path)
        .map_err(|e| Error::internal_caused("proof failed", e))?;
    let stored_root_hash = parse_hash(&root.merkle_root)?;
    // The record served must be the one the tree holds: its leaf is recomputed from the
    // stored fields, so a field changed behind the service's back does not verify.
    let record_leaf = Record {
        executable_name: &leaf.executable_name,
        hash_sha256: &leaf.hash_sha256,
        version: &leaf.version,
        platform: &leaf.platform,
        arch: &leaf.arch,
    }
    .leaf_hash()
    .ok();
    let verified = record_leaf.is_some_and(|record_leaf| {
        translog::merkle::verify_inclusion(&record_leaf, index, size, &path, &tree_root).is_ok()
    });
    let signature_ok = SignedRoot::from_encoded(
        &root.log_date.to_string(),
        &root.merkle_root,
        root.entry_count,
        &root.prev_root,
        &root.signature,
    )
    .ok()
    .zip(signer_of(&state, root).await?)
    .is_some_and(|(signed, key)| day.signature_ok(&signed, &key));
    Ok(Json(ProofJson {
        log_date: date.to_string(),
        sha256: sha256.to_string(),
        leaf_index: index,
        leaf_hash: hash_to_hex(&leaf_hash),
        tree_size: size,
        audit_path: path.iter().map(hash_to_hex).collect(),
        merkle_root: root.merkle_root.clone(),
        record: ProofRecord {
            executable_name: leaf.executable_name.clone(),
            hash_sha256: leaf.hash_sha256.clone(),
            version: leaf.version.clone(),
            platform: leaf.platform.clone(),
            arch: leaf.arch.clone(),
        },
        verified,
        root_matches: verified
            && tree_root == stored_root_hash
            && size == root.entry_count
            && signature_ok,
    }))
}

/// The public key that signed a stored root: the current key or a historical one.
async fn signer_of(
    state: &AppState,
    root: &StoredRoot,
) -> Result<Option<translog::VerifyingKey>, Error> {
    if root.key_id == state.log_key.key_id {
        return Ok(Some(state.log_key.verifying_key()));
    }
    Ok(state
        .store
        .log_keys()
        .await?
        .into_iter()
        .find(|k| k.key_id == root.key_id)
        .and_then(|k| translog::encoding::parse_public_key_base64(&k.public_key).ok()))
}

/// Leaf of the root log for one daily root.
pub fn root_log_leaf(root: &StoredRoot) -> Result<Hash, Error> {
    let signed = SignedRoot::from_encoded(
        &root.log_date.to_string(),
        &root.merkle_root,
        root.entry_count,
        &root.prev_root,
        &root.signature,
    )
    .map_err(|e| Error::internal_caused("stored root is malformed", e))?;
    let mut h = Sha256::new();
    h.update(signed.message().as_bytes());
    h.update(b"\n");
    h.update(root.signature.as_bytes());
    Ok(h.finalize().into())
}

async fn root_log(state: &AppState) -> Result<MerkleTree, Error> {
    let leaves = state
        .store
        .all_roots()
        .await?
        .iter()
        .map(root_log_leaf)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(MerkleTree::from_ordered_leaves(leaves))
}

/// The root log's latest checkpoint, a C2SP signed note (text/plain).
#[utoipa::path(get, path = "/public/transparency/checkpoint", tag = "transparency",
    responses((status = 200, description = "C2SP tlog-checkpoint signed note; key name = origin", content_type = "text/plain")))]
pub async fn checkpoint(State(state): State<AppState>) -> ApiResult<impl IntoResponse> {
    let tree = root_log(&state).await?;
    let cp = translog::Checkpoint::new(CHECKPOINT_ORIGIN, tree.len() as u64, tree.root());
    let note = translog::sign_checkpoint(&cp, CHECKPOINT_ORIGIN, state.log_key.signing_key())
        .map_err(|e| Error::internal_caused("checkpoint signing failed", e))?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], note))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ConsistencyParams {
    /// Earlier tree size (1 or more).
    first: Option<String>,
    /// Later tree size, at most the current size.
    second: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ConsistencyJson {
    pub first: u64,
    pub second: u64,
    pub first_root: String,
    pub second_root: String,
    /// RFC 9162 section 2.1.4 consistency proof, lowercase hex.
    pub proof: Vec<String>,
}

/// Consistency proof between two sizes of the root log.
#[utoipa::path(get, path = "/public/transparency/consistency", tag = "transparency",
    params(ConsistencyParams),
    responses((status = 200, body = ConsistencyJson), (status = 400, body = ErrorBody)))]
pub async fn consistency(
    State(state): State<AppState>,
    QueryParams(params): QueryParams<ConsistencyParams>,
) -> ApiResult<Json<ConsistencyJson>> {
    let size = |raw: Option<&str>, name: &str| -> Result<u64, Error> {
        raw.and_then(|s| s.trim().parse::<u64>().ok())
            .ok_or_else(|| Error::bad_request(format!("{name} must be a non-negative integer")))
    };
    let first = size(params.first.as_deref(), "first")?;
    let second = size(params.second.as_deref(), "second")?;
    let tree = root_log(&state).await?;
    if first == 0 || first > second || second > tree.len() as u64 {
        return Err(Error::bad_request(format!(
            "need 1 <= first <= second <= {} (the current size)",
            tree.len()
        ))
        .into());
    }
    let older = MerkleTree::from_ordered_leaves(tree.leaves()[..second as usize].to_vec());
    let proof = older
        .consistency_proof(first as usize)
        .map_err(|e| Error::internal_caused("consistency proof failed", e))?;
    let first_tree = MerkleTree::from_ordered_leaves(tree.leaves()[..first as usize].to_vec());
    Ok(Json(ConsistencyJson {
        first,
        second,
        first_root: hash_to_hex(&first_tree.root()),
        second_root: hash_to_hex(&older.root()),
        proof: proof.iter().map(hash_to_hex).collect(),
    }))
}
