//! The signed offline bundle: what an analyst needs to classify hashes with no server.
//!
//! A bundle is a directory:
//! - `vendor-sha256.bloom`, `vendor-sha1.bloom`, `vendor-md5.bloom`: DCSO v1 Bloom filters
//!   ([`BloomFilter`]) over the current, verified vendor records, each digest inserted as
//!   uppercase hex ASCII (as CIRCL's tools insert SHA-1s);
//! - `corpus-sha256.bloom`, `corpus-sha1.bloom`, `corpus-md5.bloom` (when a reference
//!   corpus is loaded): the same over the reference corpus;
//! - `feed.jsonl`: the exact records of the day's transparency tree (the leaf fields:
//!   executable name, SHA-256, version, platform, arch), one JSON object a line;
//! - `root.json`: that day's signed root as the API serves it;
//! - `manifest.json`: dataset date, counts, false-positive rate, sources, each file's
//!   SHA-256 and size, and the `log_date` and `merkle_root` of the day's root;
//! - `manifest.sig`: an Ed25519 signature by the transparency log's key over the context
//!   `knowngood-offline-bundle-manifest-v1\n` followed by the bytes of `manifest.json`. The
//!   context keeps this signature from ever being mistaken for a root signature, whose
//!   message starts `service-transparency-v1`.
//!
//! The filters and the feed list are the large part (a filter takes about 2.4 bytes per
//! distinct digest: some 530 MB for a 74-million-file corpus), so none of them is built in
//! memory as a whole. [`write_corpus_filters`] builds the corpus filters one at a time
//! straight from the memory-mapped corpus tables, [`write_vendor_filters`] the vendor
//! filters one at a time from a walk over the current records' digests in byte order (the
//! server's and the CLI's come from the mapped vendor lookup generation and its delta),
//! and [`FeedWriter`] writes the feed list a leaf at a time; each is written to disk as
//! it is finished, hashing the bytes on the way, so building holds one filter's bit array
//! and nothing per hash or per record; [`build`] then lists them in the manifest by the
//! SHA-256 and size found while writing.
//!
//! [`verify_dir`] checks, with nothing but the log's public key: the manifest signature,
//! every file's SHA-256, the root's signature, and that the Merkle root rebuilt from
//! `feed.jsonl` equals the signed one.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use chrono::{DateTime, Utc};
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use thiserror::Error;

mod bloom;

pub use bloom::BloomFilter;
pub use ed25519_dalek as ed25519;

/// What the manifest signature covers, before the manifest's bytes.
pub(crate) const MANIFEST_CONTEXT: &[u8] = b"knowngood-offline-bundle-manifest-v1\n";
pub(crate) const FORMAT: u32 = 1;
/// False-positive rate of every filter.
pub(crate) const FALSE_POSITIVE_RATE: f64 = 0.0001;
pub(crate) const MANIFEST: &str = "manifest.json";
pub(crate) const SIGNATURE: &str = "manifest.sig";
pub(crate) const FEED: &str = "feed.jsonl";
pub(crate) const ROOT: &str = "root.json";
/// The log's public key, for a user who has not pinned one: trusting it is trusting the
/// bundle's source, which `--trust-key` avoids.
pub(crate) const KEY: &str = "key.json";

#[derive(Debug, Error)]
pub enum BundleError {
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0}")]
    Invalid(String),
    #[error("the bundle does not verify: {0}")]
    Verification(String),
}

fn invalid(what: impl Into<String>) -> BundleError {
    BundleError::Invalid(what.into())
}

fn failed(what: impl Into<String>) -> BundleError {
    BundleError::Verification(what.into())
}

/// One file of the bundle as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub sha256: String,
    pub bytes: u64,
}

/// The signed description of a bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// The UTC day the bundle was made.
    pub dataset_date: String,
    pub created_at: String,
    /// The transparency root the feed list corresponds to.
    pub log_date: String,
    pub merkle_root: String,
    pub entry_count: u64,
    /// The log key that signed the root and this manifest.
    pub key_id: String,
    pub false_positive_rate: f64,
    /// Distinct digests per filter (file name without `.bloom` -> count).
    pub counts: BTreeMap<String, u64>,
    /// Where the data comes from: `knowngood vendor releases`, and the reference corpus
    /// generation when included.
    pub sources: Vec<String>,
    pub files: BTreeMap<String, FileEntry>,
}

/// The day's signed root, as `GET /public/transparency/roots/{date}` gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootDoc {
    pub log_date: String,
    pub merkle_root: String,
    pub entry_count: u64,
    pub prev_root: String,
    pub signature: String,
    pub key_id: String,
}

/// One record of the day's tree: the leaf fields, and the vendor that published it (not a
/// leaf field, so not in the root; the manifest signature covers it with the file). A
/// bundle written before the vendor was listed has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedRecord {
    pub executable_name: String,
    pub hash_sha256: String,
    pub version: String,
    pub platform: String,
    pub arch: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
}

/// A bundle's small files in memory, before they are written or served: all but the
/// filters and the feed list, which were written to disk beforehand (the manifest lists
/// them).
#[derive(Debug, Clone)]
pub struct Bundle {
    pub files: BTreeMap<String, Vec<u8>>,
}

/// What the bundle is made from.
pub struct Inputs<'a> {
    /// The vendor filters, already written ([`write_vendor_filters`]).
    pub vendor: &'a [WrittenFilter],
    /// The day's signed root the feed list is the tree of.
    pub root: &'a RootDoc,
    /// The feed list of that day's leaves, already written ([`FeedWriter`]).
    pub feed: &'a FileEntry,
    /// The reference corpus's filters, already written ([`write_corpus_filters`]).
    pub corpus: Option<&'a CorpusFilters>,
    pub now: DateTime<Utc>,
}

/// A digest as uppercase hex ASCII in `out` (digests are at most 32 bytes).
fn upper_hex<'o>(digest: &[u8], out: &'o mut [u8; 64]) -> &'o [u8] {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let n = digest.len().min(32);
    for (i, b) in digest[..n].iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(b & 0xf)];
    }
    &out[..2 * n]
}

/// A walk over a filter's digests: calls its argument with each.
type Walk<'a> = dyn Fn(&mut dyn FnMut(&[u8])) + 'a;

/// A filter over the digests `walk` gives (walked twice: once to size the filter, once to
/// fill it), and how many it gave. The filter's element count depends on the order the
/// digests come in: ascending byte order, each once.
fn filter_of(walk: &Walk<'_>) -> (BloomFilter, u64) {
    let mut capacity = 0u64;
    walk(&mut |_| capacity += 1);
    let mut filter = BloomFilter::new(capacity.max(1000), FALSE_POSITIVE_RATE);
    let mut text = [0u8; 64];
    walk(&mut |v| filter.add(upper_hex(v, &mut text)));
    (filter, capacity)
}

/// The reference corpus's filters, written to disk by [`write_corpus_filters`].
#[derive(Debug, Clone)]
pub struct CorpusFilters {
    /// The corpus generation they were built from.
    pub generation: String,
    pub filters: Vec<WrittenFilter>,
}

/// One filter file as written.
#[derive(Debug, Clone)]
pub struct WrittenFilter {
    /// `corpus-sha256.bloom`, `corpus-sha1.bloom` or `corpus-md5.bloom`.
    pub name: String,
    /// The file's SHA-256 and size, as the manifest lists them.
    pub entry: FileEntry,
    /// Distinct digests inserted.
    pub count: u64,
}

/// Bytes on their way to a file, hashed and counted as they pass.
struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    bytes: u64,
}

impl<W: std::io::Write> std::io::Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W: std::io::Write> HashingWriter<std::io::BufWriter<W>> {
    fn new(inner: W) -> Self {
        Self {
            inner: std::io::BufWriter::with_capacity(1 << 20, inner),
            hasher: Sha256::new(),
            bytes: 0,
        }
    }

    /// Flushes; the SHA-256 and size of what passed, and the writer.
    fn finish(mut self) -> std::io::Result<(FileEntry, W)> {
        self.flush()?;
        let entry = FileEntry {
            sha256: hex::encode(self.hasher.finalize()),
            bytes: self.bytes,
        };
        let inner = self.inner.into_inner().map_err(|e| e.into_error())?;
        Ok((entry, inner))
    }
}

/// Builds the filter `stem` over the digests `walk` gives and writes it to the writer
/// `open` gives for its file name; the filter's bits are dropped once written.
fn write_filter<W: std::io::Write>(
    stem: &str,
    walk: &Walk<'_>,
    open: &mut impl FnMut(&str) -> std::io::Result<W>,
) -> Result<(WrittenFilter, W), BundleError> {
    let name = format!("{stem}.bloom");
    let io = |e| BundleError::Io(name.clone(), e);
    let (filter, count) = filter_of(walk);
    let mut out = HashingWriter::new(open(&name).map_err(io)?);
    filter.write_to(&mut out).map_err(io)?;
    drop(filter);
    let (entry, writer) = out.finish().map_err(io)?;
    Ok((WrittenFilter { name, entry, count }, writer))
}

/// Builds the reference corpus's three filters one after the other, straight from the
/// generation's (memory-mapped, sorted, distinct) digest tables, and writes each to the
/// writer `open` gives for its file name as soon as it is complete; the writers come back
/// in that order (`corpus-sha256.bloom`, `corpus-sha1.bloom`, `corpus-md5.bloom`).
/// Memory: one filter's bit array at a time (about 2.4 bytes per digest at the bundle's
/// false-positive rate), nothing per hash.
pub fn write_corpus_filters<W: std::io::Write>(
    generation: &corpus::Generation,
    mut open: impl FnMut(&str) -> std::io::Result<W>,
) -> Result<(CorpusFilters, Vec<W>), BundleError> {
    let mut filters = Vec::with_capacity(3);
    let mut writers = Vec::with_capacity(3);
    for (stem, alg) in [
        ("corpus-sha256", corpus::HashAlg::Sha256),
        ("corpus-sha1", corpus::HashAlg::Sha1),
        ("corpus-md5", corpus::HashAlg::Md5),
    ] {
        let walk = |each: &mut dyn FnMut(&[u8])| generation.keys(alg).for_each(each);
        let (filter, writer) = write_filter(stem, &walk, &mut open)?;
        filters.push(filter);
        writers.push(writer);
    }
    Ok((
        CorpusFilters {
            generation: generation.name().to_owned(),
            filters,
        },
        writers,
    ))
}

/// Builds the three vendor filters one after the other and writes each to the writer
/// `open` gives for its file name as soon as it is complete; filters and writers come
/// back in that order (`vendor-sha256.bloom`, `vendor-sha1.bloom`, `vendor-md5.bloom`).
/// `digests(kind, each)` calls `each` with every distinct digest of that kind of a
/// current vendor record whose HMAC verifies, in ascending byte order; it is called twice
/// per kind (to count, then to fill). Memory: one filter's bit array at a time, nothing
/// per hash here.
pub fn write_vendor_filters<W: std::io::Write>(
    digests: impl Fn(model::HashAlgo, &mut dyn FnMut(&[u8])),
    mut open: impl FnMut(&str) -> std::io::Result<W>,
) -> Result<(Vec<WrittenFilter>, Vec<W>), BundleError> {
    let mut filters = Vec::with_capacity(3);
    let mut writers = Vec::with_capacity(3);
    for (stem, algo) in [
        ("vendor-sha256", model::HashAlgo::Sha256),
        ("vendor-sha1", model::HashAlgo::Sha1),
        ("vendor-md5", model::HashAlgo::Md5),
    ] {
        let walk = |each: &mut dyn FnMut(&[u8])| digests(algo, each);
        let (filter, writer) = write_filter(stem, &walk, &mut open)?;
        filters.push(filter);
        writers.push(writer);
    }
    Ok((filters, writers))
}

/// [`write_vendor_filters`] into files of `dir` (created if missing).
pub fn write_vendor_filters_into(
    digests: impl Fn(model::HashAlgo, &mut dyn FnMut(&[u8])),
    dir: &Path,
) -> Result<Vec<WrittenFilter>, BundleError> {
    std::fs::create_dir_all(dir).map_err(|e| BundleError::Io(dir.display().to_string(), e))?;
    let (filters, _files) =
        write_vendor_filters(digests, |name| std::fs::File::create(dir.join(name)))?;
    Ok(filters)
}

/// The file name of the feed list, for the writer [`FeedWriter`] writes to.
pub const FEED_FILE: &str = FEED;

/// `feed.jsonl` written a leaf at a time, in tree order, each with its record's vendor;
/// hashed and counted on the way for the manifest.
pub struct FeedWriter<W: std::io::Write> {
    out: HashingWriter<std::io::BufWriter<W>>,
    line: Vec<u8>,
}

impl<W: std::io::Write> FeedWriter<W> {
    pub fn new(inner: W) -> Self {
        Self {
            out: HashingWriter::new(inner),
            line: Vec::new(),
        }
    }

    /// Writes one leaf's line; `vendor` is that of the current record the leaf names.
    pub fn push(
        &mut self,
        leaf: &translog::Record<'_>,
        vendor: Option<&str>,
    ) -> Result<(), BundleError> {
        let record = FeedRecord {
            executable_name: leaf.executable_name.to_owned(),
            hash_sha256: leaf.hash_sha256.to_owned(),
            version: leaf.version.to_owned(),
            platform: leaf.platform.to_owned(),
            arch: leaf.arch.to_owned(),
            vendor: vendor.map(str::to_owned),
        };
        self.line.clear();
        serde_json::to_writer(&mut self.line, &record).map_err(|e| invalid(e.to_string()))?;
        self.line.push(b'\n');
        self.out
            .write_all(&self.line)
            .map_err(|e| BundleError::Io(FEED.to_owned(), e))
    }

    /// Flushes; the file's SHA-256 and size as the manifest lists them, and the writer.
    pub fn finish(self) -> Result<(FileEntry, W), BundleError> {
        self.out
            .finish()
            .map_err(|e| BundleError::Io(FEED.to_owned(), e))
    }
}

/// [`write_corpus_filters`] into files of `dir` (created if missing).
pub fn write_corpus_filters_into(
    generation: &corpus::Generation,
    dir: &Path,
) -> Result<CorpusFilters, BundleError> {
    std::fs::create_dir_all(dir).map_err(|e| BundleError::Io(dir.display().to_string(), e))?;
    let (filters, _files) =
        write_corpus_filters(generation, |name| std::fs::File::create(dir.join(name)))?;
    Ok(filters)
}

/// Builds the bundle's files and signs the manifest with the log key.
pub fn build(inputs: &Inputs<'_>, key: &SigningKey, key_id: &str) -> Result<Bundle, BundleError> {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut counts = BTreeMap::new();
    let mut sources = vec!["knowngood vendor releases".to_owned()];
    // Written already; listed by what was found while writing them.
    let mut written: BTreeMap<String, FileEntry> = BTreeMap::new();
    written.insert(FEED.to_owned(), inputs.feed.clone());
    let corpus = inputs
        .corpus
        .map(|c| c.filters.as_slice())
        .unwrap_or_default();
    for f in inputs.vendor.iter().chain(corpus) {
        let stem = f.name.strip_suffix(".bloom").unwrap_or(&f.name);
        counts.insert(stem.to_owned(), f.count);
        written.insert(f.name.clone(), f.entry.clone());
    }
    if let Some(c) = inputs.corpus {
        sources.push(format!("reference corpus {}", c.generation));
    }
    let root = inputs.root;
    files.insert(
        ROOT.to_owned(),
        serde_json::to_vec_pretty(root).map_err(|e| invalid(e.to_string()))?,
    );
    let public = serde_json::json!({
        "key_id": key_id,
        "public_key": B64.encode(key.verifying_key().to_bytes()),
    });
    files.insert(
        KEY.to_owned(),
        serde_json::to_vec_pretty(&public).map_err(|e| invalid(e.to_string()))?,
    );
    let manifest = Manifest {
        format: FORMAT,
        dataset_date: inputs.now.date_naive().format("%Y-%m-%d").to_string(),
        created_at: inputs
            .now
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        log_date: root.log_date.clone(),
        merkle_root: root.merkle_root.clone(),
        entry_count: root.entry_count,
        key_id: key_id.to_owned(),
        false_positive_rate: FALSE_POSITIVE_RATE,
        counts,
        sources,
        files: files
            .iter()
            .map(|(name, bytes)| {
                (
                    name.clone(),
                    FileEntry {
                        sha256: hex::encode(Sha256::digest(bytes)),
                        bytes: bytes.len() as u64,
                    },
                )
            })
            .chain(written)
            .collect(),
    };
    let manifest_bytes =
        serde_json::to_vec_pretty(&manifest).map_err(|e| invalid(e.to_string()))?;
    let signature = key.sign(&signed_message(&manifest_bytes));
    let sig = serde_json::json!({
        "key_id": key_id,
        "signature": B64.encode(signature.to_bytes()),
    });
    files.insert(MANIFEST.to_owned(), manifest_bytes);
    files.insert(
        SIGNATURE.to_owned(),
        serde_json::to_vec_pretty(&sig).map_err(|e| invalid(e.to_string()))?,
    );
    Ok(Bundle { files })
}

fn signed_message(manifest: &[u8]) -> Vec<u8> {
    let mut message = MANIFEST_CONTEXT.to_vec();
    message.extend_from_slice(manifest);
    message
}

impl Bundle {
    /// Writes every file into `dir` (created if missing).
    pub fn write(&self, dir: &Path) -> Result<(), BundleError> {
        std::fs::create_dir_all(dir).map_err(|e| BundleError::Io(dir.display().to_string(), e))?;
        for (name, bytes) in &self.files {
            let path = dir.join(name);
            std::fs::write(&path, bytes)
                .map_err(|e| BundleError::Io(path.display().to_string(), e))?;
        }
        Ok(())
    }
}

/// A bundle whose every check passed.
#[derive(Debug)]
pub struct Verified {
    pub manifest: Manifest,
    pub feed: Vec<FeedRecord>,
    pub filters: BTreeMap<String, BloomFilter>,
    /// Feed records by SHA-256.
    by_sha256: std::collections::HashMap<String, usize>,
}

fn read(dir: &Path, name: &str) -> Result<Vec<u8>, BundleError> {
    let path = dir.join(name);
    std::fs::read(&path).map_err(|e| BundleError::Io(path.display().to_string(), e))
}

/// Parses a base64 Ed25519 public key (32 bytes).
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, BundleError> {
    let bytes = B64
        .decode(text.trim())
        .map_err(|_| invalid("the public key is not base64"))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| invalid("the public key is not 32 bytes"))?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| invalid("the public key is not an Ed25519 key"))
}

/// The public key the bundle carries (`key.json`).
pub fn bundled_key(dir: &Path) -> Result<VerifyingKey, BundleError> {
    let doc: serde_json::Value =
        serde_json::from_slice(&read(dir, KEY)?).map_err(|e| invalid(format!("{KEY}: {e}")))?;
    parse_public_key(doc["public_key"].as_str().unwrap_or_default())
}

/// Checks the bundle in `dir` against the log's public key: the manifest signature,
/// every listed file's SHA-256 and size (and that no filter or feed file is unlisted), the
/// root signature, and the Merkle root rebuilt from the feed list.
pub fn verify_dir(dir: &Path, key: &VerifyingKey) -> Result<Verified, BundleError> {
    let manifest = signed_manifest(dir, key)?;
    let contents = signed_files(dir, &manifest)?;
    let (root, signed) = signed_root(&contents, &manifest, key)?;
    let feed = feed_of_root(&contents, &root, &signed)?;
    let mut filters = BTreeMap::new();
    for (name, bytes) in &contents {
        if let Some(stem) = name.strip_suffix(".bloom") {
            let filter =
                BloomFilter::from_bytes(bytes).map_err(|e| invalid(format!("{name}: {e}")))?;
            filters.insert(stem.to_owned(), filter);
        }
    }
    let by_sha256 = feed
        .iter()
        .enumerate()
        .map(|(i, r)| (r.hash_sha256.clone(), i))
        .collect();
    Ok(Verified {
        manifest,
        feed,
        filters,
        by_sha256,
    })
}

/// `manifest.json`, once its signature verifies with `key` and its format is known.
fn signed_manifest(dir: &Path, key: &VerifyingKey) -> Result<Manifest, BundleError> {
    let manifest_bytes = read(dir, MANIFEST)?;
    let sig: serde_json::Value = serde_json::from_slice(&read(dir, SIGNATURE)?)
        .map_err(|e| invalid(format!("{SIGNATURE}: {e}")))?;
    let sig_bytes = sig["signature"]
        .as_str()
        .and_then(|s| B64.decode(s).ok())
        .and_then(|b| <[u8; 64]>::try_from(b).ok())
        .ok_or_else(|| invalid(format!("{SIGNATURE} holds no signature")))?;
    key.verify_strict(
        &signed_message(&manifest_bytes),
        &Signature::from_bytes(&sig_bytes),
    )
    .map_err(|_| failed("the manifest signature does not verify with the log key"))?;
    let manifest: Manifest =
        serde_json::from_slice(&manifest_bytes).map_err(|e| invalid(format!("{MANIFEST}: {e}")))?;
    if manifest.format != FORMAT {
        return Err(invalid(format!(
            "bundle format {} is not {FORMAT}",
            manifest.format
        )));
    }
    Ok(manifest)
}

/// The files the manifest lists, each as signed (the corpus filters may be absent), and
/// no unlisted filter or feed list beside them.
fn signed_files(dir: &Path, manifest: &Manifest) -> Result<BTreeMap<String, Vec<u8>>, BundleError> {
    let mut contents = BTreeMap::new();
    for (name, entry) in &manifest.files {
        if name.contains('/') || name.starts_with('.') {
            return Err(failed(format!(
                "the manifest names a file outside the bundle: {name}"
            )));
        }
        // The reference-corpus filters are a separate, authenticated download: a bundle
        // may come without them. Any that is present must be the one signed.
        if name.starts_with("corpus-") && !dir.join(name).exists() {
            continue;
        }
        let bytes = read(dir, name)?;
        if bytes.len() as u64 != entry.bytes || hex::encode(Sha256::digest(&bytes)) != entry.sha256
        {
            return Err(failed(format!(
                "{name} is not the file the manifest signed"
            )));
        }
        contents.insert(name.clone(), bytes);
    }
    let entries =
        std::fs::read_dir(dir).map_err(|e| BundleError::Io(dir.display().to_string(), e))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if (name.ends_with(".bloom") || name == FEED) && !manifest.files.contains_key(&name) {
            return Err(failed(format!(
                "{name} is not listed in the signed manifest"
            )));
        }
    }
    Ok(contents)
}

/// The root: signed by the same key, and the one the manifest names.
fn signed_root(
    contents: &BTreeMap<String, Vec<u8>>,
    manifest: &Manifest,
    key: &VerifyingKey,
) -> Result<(RootDoc, translog::SignedRoot), BundleError> {
    let root_bytes = contents
        .get(ROOT)
        .ok_or_else(|| failed(format!("the manifest lists no {ROOT}")))?;
    let root: RootDoc =
        serde_json::from_slice(root_bytes).map_err(|e| invalid(format!("{ROOT}: {e}")))?;
    let signed = translog::SignedRoot::from_encoded(
        &root.log_date,
        &root.merkle_root,
        root.entry_count,
        &root.prev_root,
        &root.signature,
    )
    .map_err(|e| invalid(format!("{ROOT}: {e}")))?;
    signed
        .verify(key)
        .map_err(|_| failed("the day's root signature does not verify with the log key"))?;
    if root.log_date != manifest.log_date || root.merkle_root != manifest.merkle_root {
        return Err(failed("the manifest names another root than root.json"));
    }
    Ok((root, signed))
}

/// The feed list, once it rebuilds the signed root.
fn feed_of_root(
    contents: &BTreeMap<String, Vec<u8>>,
    root: &RootDoc,
    signed: &translog::SignedRoot,
) -> Result<Vec<FeedRecord>, BundleError> {
    let feed_bytes = contents
        .get(FEED)
        .ok_or_else(|| failed(format!("the manifest lists no {FEED}")))?;
    let mut feed = Vec::new();
    let mut leaves = Vec::new();
    for (n, line) in feed_bytes.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let record: FeedRecord = serde_json::from_slice(line)
            .map_err(|e| invalid(format!("{FEED} line {}: {e}", n + 1)))?;
        let leaf = translog::Record {
            executable_name: &record.executable_name,
            hash_sha256: &record.hash_sha256,
            version: &record.version,
            platform: &record.platform,
            arch: &record.arch,
        }
        .leaf_hash()
        .map_err(|e| invalid(format!("{FEED} line {}: {e}", n + 1)))?;
        leaves.push(leaf);
        feed.push(record);
    }
    let leaves = translog::merkle::sorted_unique_leaves(leaves);
    let rebuilt = translog::merkle::merkle_root(&leaves);
    if leaves.len() as u64 != signed.entry_count || rebuilt != signed.merkle_root {
        return Err(failed(format!(
            "the feed list rebuilds root {} of {} leaves, not the signed {} of {}",
            hex::encode(rebuilt),
            leaves.len(),
            root.merkle_root,
            root.entry_count
        )));
    }
    Ok(feed)
}

/// An offline answer for one digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfflineVerdict<'a> {
    /// In the day's feed list: exact.
    Feed(&'a FeedRecord),
    /// In a vendor filter (current releases), but not the feed list: probably a vendor
    /// release recorded after the day's root (false-positive rate as the manifest says).
    VendorFilter,
    /// In a reference corpus filter (false-positive rate as the manifest says).
    CorpusFilter,
    Unknown,
}

impl Verified {
    /// Classifies a lowercase hex digest of 32, 40 or 64 characters.
    pub fn classify(&self, digest_hex: &str) -> OfflineVerdict<'_> {
        if let Some(r) = self
            .by_sha256
            .get(digest_hex)
            .and_then(|&i| self.feed.get(i))
        {
            return OfflineVerdict::Feed(r);
        }
        let algo = match digest_hex.len() {
            64 => "sha256",
            40 => "sha1",
            32 => "md5",
            _ => return OfflineVerdict::Unknown,
        };
        let upper = digest_hex.to_ascii_uppercase();
        let hit = |part: &str| {
            self.filters
                .get(&format!("{part}-{algo}"))
                .is_some_and(|f| f.contains(upper.as_bytes()))
        };
        if hit("vendor") {
            OfflineVerdict::VendorFilter
        } else if hit("corpus") {
            OfflineVerdict::CorpusFilter
        } else {
            OfflineVerdict::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::*;

    /// A leaf's fields: name, SHA-256.
    fn leaf(name: &str, seed: u8) -> (String, String) {
        (name.to_owned(), hex::encode([seed; 32]))
    }

    fn record<'a>((name, sha256): &'a (String, String)) -> translog::Record<'a> {
        translog::Record {
            executable_name: name,
            hash_sha256: sha256,
            version: "1.0",
            platform: "windows",
            arch: "amd64",
        }
    }

    fn bundle_dir() -> (tempfile::TempDir, VerifyingKey) {
        let key = SigningKey::from_bytes(&[7; 32]);
        let fields = [leaf("a.exe", 1), leaf("b.exe", 2), leaf("c.exe", 3)];
        let leaves: Vec<translog::Record<'_>> = fields.iter().map(record).collect();
        let hashes: Vec<translog::merkle::Hash> =
            leaves.iter().map(|l| l.leaf_hash().unwrap()).collect();
        let hashes = translog::merkle::sorted_unique_leaves(hashes);
        let date = NaiveDate::from_ymd_opt(2026, 1, 2).unwrap();
        let signed = translog::SignedRoot::sign(
            &key,
            date,
            translog::merkle::merkle_root(&hashes),
            3,
            translog::GENESIS_PREV_ROOT,
        );
        let root = RootDoc {
            log_date: date.format("%Y-%m-%d").to_string(),
            merkle_root: signed.merkle_root_hex(),
            entry_count: 3,
            prev_root: signed.prev_root_hex(),
            signature: signed.signature_base64(),
            key_id: "k1".into(),
        };
        let dir = tempfile::tempdir().unwrap();
        let vendor = write_vendor_filters_into(|_, _| {}, dir.path()).unwrap();
        let mut feed = FeedWriter::new(std::fs::File::create(dir.path().join(FEED)).unwrap());
        for leaf in &leaves {
            feed.push(leaf, None).unwrap();
        }
        let (feed, _) = feed.finish().unwrap();
        let inputs = Inputs {
            vendor: &vendor,
            root: &root,
            feed: &feed,
            corpus: None,
            now: Utc::now(),
        };
        build(&inputs, &key, "k1")
            .unwrap()
            .write(dir.path())
            .unwrap();
        (dir, key.verifying_key())
    }

    #[test]
    fn a_bundle_verifies_and_classifies_from_its_feed() {
        let (dir, key) = bundle_dir();
        let v = verify_dir(dir.path(), &key).unwrap();
        assert_eq!(v.feed.len(), 3);
        let sha = hex::encode([2u8; 32]);
        assert!(
            matches!(v.classify(&sha), OfflineVerdict::Feed(r) if r.executable_name == "b.exe")
        );
        assert_eq!(v.classify(&hex::encode([9u8; 32])), OfflineVerdict::Unknown);
    }

    #[test]
    fn any_change_or_another_key_fails() {
        let (dir, key) = bundle_dir();
        let other = SigningKey::from_bytes(&[8; 32]).verifying_key();
        assert!(matches!(
            verify_dir(dir.path(), &other),
            Err(BundleError::Verification(_))
        ));
        // A feed record changed: the file no longer matches the manifest.
        let feed = dir.path().join(FEED);
        let text = std::fs::read_to_string(&feed).unwrap();
        std::fs::write(&feed, text.replace("b.exe", "evil.exe")).unwrap();
        assert!(matches!(
            verify_dir(dir.path(), &key),
            Err(BundleError::Verification(_))
        ));
        std::fs::write(&feed, text).unwrap();
        verify_dir(dir.path(), &key).unwrap();
        // An extra filter that the manifest does not list.
        std::fs::write(dir.path().join("extra.bloom"), b"x").unwrap();
        assert!(matches!(
            verify_dir(dir.path(), &key),
            Err(BundleError::Verification(_))
        ));
        std::fs::remove_file(dir.path().join("extra.bloom")).unwrap();
        // The manifest edited.
        let manifest = dir.path().join(MANIFEST);
        let text = std::fs::read_to_string(&manifest).unwrap();
        std::fs::write(&manifest, text.replace("\"format\": 1", "\"format\":1")).unwrap();
        assert!(matches!(
            verify_dir(dir.path(), &key),
            Err(BundleError::Verification(_))
        ));
    }
}
