//! The daily transparency root: a signed Merkle root over the public feed, chained to the
//! previous day's root. Published by the replica holding the `translog.publish` lease once
//! the day's publication time has come and the day's vendor refresh (if on) has ended, or by
//! hand (`knowngood translog publish`).

use chrono::{DateTime, NaiveDate, Utc};
use model::Error;
use store::roots::{LeafRow, StoredRoot};
use store::{FeedPosition, Store};
use translog::encoding::{hash_to_hex, key_id, public_key_to_base64, public_key_to_pem};
use translog::{Hash, Record, SignedRoot, SigningKey, VerifyingKey};

use crate::{Due, Job, JobContext, Lease};

/// [`PublishJob`]'s name and lease.
pub const JOB: &str = "translog.publish";

/// The log's signing key and what the public sees of it.
pub struct LogKey {
    signing: SigningKey,
    pub key_id: String,
}

impl LogKey {
    pub fn new(seed: &[u8; 32]) -> Self {
        let signing = SigningKey::from_bytes(seed);
        Self {
            key_id: key_id(&signing.verifying_key()),
            signing,
        }
    }

    /// Signs roots and the root log's checkpoints.
    pub fn signing_key(&self) -> &SigningKey {
        &self.signing
    }

    pub fn verifying_key(&self) -> VerifyingKey {
        self.signing.verifying_key()
    }

    pub fn public_key(&self) -> String {
        public_key_to_base64(&self.signing.verifying_key())
    }

    pub fn public_key_pem(&self) -> String {
        public_key_to_pem(&self.signing.verifying_key())
    }
}

/// Publishes today's root once its time has come and, when the daily vendor refresh is on,
/// today's refresh has ended; unless the root exists.
pub struct PublishJob;

#[async_trait::async_trait]
impl Job for PublishJob {
    fn name(&self) -> &'static str {
        JOB
    }

    async fn due(&self, ctx: &JobContext, now: DateTime<Utc>) -> Result<Option<Due>, Error> {
        let today = now.date_naive();
        if now.time() < ctx.settings.translog_publish_at || ctx.store.root(today).await?.is_some() {
            return Ok(None);
        }
        // The root covers the day's refreshed records: never one half written, nor the
        // previous day's (on a fresh install, none).
        if ctx.settings.daily_refresh.is_some()
            && !crate::refresh::ended(ctx.store.as_ref(), today).await?
        {
            return Ok(None);
        }
        Ok(Some(Due::Leased(Lease {
            name: JOB.into(),
            holder: ctx.replica_id.clone(),
            until: now + chrono::Duration::minutes(10),
        })))
    }

    async fn run(&self, ctx: &JobContext, now: DateTime<Utc>) -> Result<(), Error> {
        publish_day(ctx.store.as_ref(), &ctx.log_key, now, now.date_naive())
            .await
            .map(|_| ())
    }
}

fn parse_hash(hex_text: &str) -> Result<Hash, Error> {
    translog::encoding::parse_hash_hex("hash", hex_text)
        .map_err(|_| Error::internal(format!("stored hash {hex_text:?} is not valid")))
}

/// Publishes the day's root over the current public feed: sorted, de-duplicated leaves,
/// chained to the latest earlier root. Publishing a day again returns the stored root.
pub async fn publish_day(
    store: &dyn Store,
    log_key: &LogKey,
    now: DateTime<Utc>,
    date: NaiveDate,
) -> Result<StoredRoot, Error> {
    // A root for a day still to come would close every day before it for good.
    if date > now.date_naive() {
        return Err(Error::bad_request(format!(
            "{date} is after today ({} UTC); a day's root is published on or after that day",
            now.date_naive()
        )));
    }
    if let Some(existing) = store.root(date).await? {
        return Ok(existing);
    }
    // A day slipped in before a published one would break that day's chain.
    if let Some(latest) = store.recent_roots(1).await?.first()
        && latest.log_date > date
    {
        return Err(Error::bad_request(format!(
            "{} is already published; roots are appended in date order, so {date} can no longer be",
            latest.log_date
        )));
    }
    // Two passes over the day's leaves, sorted on disk in runs: the first computes the root,
    // the second hands them to the store, which merges them with the previous published
    // day's and writes what changed. Memory stays bounded whatever the number.
    let runs = sorted_runs(store).await?;
    let (root, entry_count) = {
        let runs = runs.try_clone()?;
        tokio::task::spawn_blocking(move || -> Result<(Hash, u64), Error> {
            let mut builder = translog::RootBuilder::new();
            for leaf in runs.merge()? {
                builder.push(&leaf?.0);
            }
            Ok((builder.root(), builder.len()))
        })
        .await
        .map_err(|e| Error::internal_caused("computing the root failed", e))??
    };
    let prev = match store.root_before(date).await? {
        Some(p) => parse_hash(&p.merkle_root)?,
        None => translog::GENESIS_PREV_ROOT,
    };
    let signed = SignedRoot::sign(&log_key.signing, date, root, entry_count, prev);
    store
        .register_log_key(&log_key.key_id, &log_key.public_key(), now)
        .await?;
    let stored = StoredRoot {
        log_date: date,
        merkle_root: signed.merkle_root_hex(),
        entry_count: signed.entry_count,
        prev_root: signed.prev_root_hex(),
        signature: signed.signature_base64(),
        key_id: log_key.key_id.clone(),
        published_at: now,
    };
    let stored = store
        .publish_root_streamed(&stored, runs.into_batches())
        .await?;
    tracing::info!(date = %date, entries = stored.entry_count, root = %stored.merkle_root, "published transparency root");
    Ok(stored)
}

/// Current records read from the store per page.
const PAGE: u32 = 5_000;
/// Leaves sorted in memory before they are written out as a run (about 200 bytes each).
const RUN_LEAVES: usize = 250_000;
/// Leaves handed to the store at a time.
const LEAF_BATCH: usize = 5_000;

/// A leaf: its hash and the fields it was computed from (name, SHA-256, version, platform,
/// arch).
type Leaf = (Hash, [String; 5]);

/// The day's leaves as sorted, de-duplicated runs in anonymous temporary files.
struct Runs(Vec<std::fs::File>);

fn io_error(e: std::io::Error) -> Error {
    Error::internal_caused("sorting the day's leaves on disk failed", e)
}

/// Reads every current record whose HMAC verifies, a page at a time, and writes their
/// leaves out in sorted runs. The next page is read while this one's leaves are hashed, so
/// the database's thread and this task work at the same time.
async fn sorted_runs(store: &dyn Store) -> Result<Runs, Error> {
    let mut files = Vec::new();
    let mut buffer: Vec<Leaf> = Vec::new();
    let mut page = store.current_records_page(None, PAGE).await?;
    while let Some(last) = page.last() {
        let after = FeedPosition {
            executable_name: last.record.executable_name.clone(),
            platform: last.record.platform.as_str().into(),
            arch: last.record.arch.as_str().into(),
            id: last.id.clone(),
        };
        let full = page.len() == PAGE as usize;
        let next = async {
            if full {
                store.current_records_page(Some(&after), PAGE).await
            } else {
                Ok(Vec::new())
            }
        };
        // `join` polls the read first: its query is with the database before the hashing,
        // which does not yield, starts.
        let (next, leaves) = futures::join!(next, async { leaves_of(page) });
        buffer.extend(leaves?);
        if buffer.len() >= RUN_LEAVES {
            files.push(write_run(std::mem::take(&mut buffer)).await?);
        }
        page = next?;
    }
    if !buffer.is_empty() {
        files.push(write_run(buffer).await?);
    }
    Ok(Runs(files))
}

/// The leaves of the records of `page` whose HMAC verifies.
fn leaves_of(page: Vec<model::HashRecord>) -> Result<Vec<Leaf>, Error> {
    page.into_iter()
        .filter(|r| r.integrity_ok)
        .map(|r| {
            let n = r.record;
            let hash = Record {
                executable_name: &n.executable_name,
                hash_sha256: &n.hash_sha256,
                version: &n.version,
                platform: n.platform.as_str(),
                arch: n.arch.as_str(),
            }
            .leaf_hash()
            .map_err(|e| Error::internal(format!("record {} cannot be a leaf: {e}", r.id)))?;
            Ok((
                hash,
                [
                    n.executable_name,
                    n.hash_sha256,
                    n.version,
                    n.platform.as_str().into(),
                    n.arch.as_str().into(),
                ],
            ))
        })
        .collect()
}

/// Sorts and de-duplicates `leaves` and writes them to a temporary file: per leaf its hash,
/// then each field as a little-endian u32 length and its bytes.
async fn write_run(mut leaves: Vec<Leaf>) -> Result<std::fs::File, Error> {
    tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
        use std::io::Write as _;
        leaves.sort_unstable_by_key(|a| a.0);
        leaves.dedup_by(|a, b| a.0 == b.0);
        let mut out = std::io::BufWriter::with_capacity(1 << 16, tempfile::tempfile()?);
        for (hash, fields) in &leaves {
            out.write_all(hash)?;
            for f in fields {
                let len = u32::try_from(f.len()).map_err(std::io::Error::other)?;
                out.write_all(&len.to_le_bytes())?;
                out.write_all(f.as_bytes())?;
            }
        }
        out.into_inner().map_err(|e| e.into_error())
    })
    .await
    .map_err(|e| Error::internal_caused("sorting the day's leaves failed", e))?
    .map_err(io_error)
}

impl Runs {
    fn try_clone(&self) -> Result<Self, Error> {
        let files = self.0.iter().map(std::fs::File::try_clone);
        Ok(Self(files.collect::<Result<_, _>>().map_err(io_error)?))
    }

    /// Every leaf of every run, in tree order, each once.
    fn merge(&self) -> Result<Merge, Error> {
        use std::io::Seek as _;
        let mut readers = Vec::with_capacity(self.0.len());
        let mut heap = std::collections::BinaryHeap::new();
        let mut heads = Vec::with_capacity(self.0.len());
        for (i, file) in self.0.iter().enumerate() {
            let mut file = file.try_clone().map_err(io_error)?;
            file.seek(std::io::SeekFrom::Start(0)).map_err(io_error)?;
            let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
            let head = read_leaf(&mut reader).map_err(io_error)?;
            if let Some((hash, _)) = &head {
                heap.push(std::cmp::Reverse((*hash, i)));
            }
            heads.push(head);
            readers.push(reader);
        }
        Ok(Merge {
            readers,
            heap,
            heads,
            last: None,
        })
    }

    /// The merged leaves as the store takes them, read on a blocking thread.
    fn into_batches(self) -> store::roots::LeafBatches {
        use futures::StreamExt as _;
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<LeafRow>, Error>>(2);
        tokio::task::spawn_blocking(move || {
            let merge = match self.merge() {
                Ok(m) => m,
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            };
            let mut batch = Vec::with_capacity(LEAF_BATCH);
            for leaf in merge {
                match leaf {
                    Ok((hash, [executable_name, hash_sha256, version, platform, arch])) => {
                        batch.push(LeafRow {
                            leaf_hash: hash_to_hex(&hash),
                            executable_name,
                            hash_sha256,
                            version,
                            platform,
                            arch,
                        });
                    }
                    Err(e) => {
                        let _ = tx.blocking_send(Err(e));
                        return;
                    }
                }
                if batch.len() == LEAF_BATCH
                    && tx.blocking_send(Ok(std::mem::take(&mut batch))).is_err()
                {
                    return;
                }
            }
            if !batch.is_empty() {
                let _ = tx.blocking_send(Ok(batch));
            }
        });
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) })
            .boxed()
    }
}

fn read_leaf(r: &mut impl std::io::Read) -> std::io::Result<Option<Leaf>> {
    let mut hash = [0u8; 32];
    match r.read_exact(&mut hash) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut field = || -> std::io::Result<String> {
        let mut len = [0u8; 4];
        r.read_exact(&mut len)?;
        let mut bytes = vec![0u8; u32::from_le_bytes(len) as usize];
        r.read_exact(&mut bytes)?;
        String::from_utf8(bytes).map_err(std::io::Error::other)
    };
    Ok(Some((
        hash,
        [field()?, field()?, field()?, field()?, field()?],
    )))
}

/// A k-way merge of sorted runs that drops a leaf equal to the one before it.
struct Merge {
    readers: Vec<std::io::BufReader<std::fs::File>>,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(Hash, usize)>>,
    heads: Vec<Option<Leaf>>,
    last: Option<Hash>,
}

impl Iterator for Merge {
    type Item = Result<Leaf, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let std::cmp::Reverse((hash, i)) = self.heap.pop()?;
            let leaf = self.heads[i].take()?;
            match read_leaf(&mut self.readers[i]) {
                Ok(next) => {
                    if let Some((h, _)) = &next {
                        self.heap.push(std::cmp::Reverse((*h, i)));
                    }
                    self.heads[i] = next;
                }
                Err(e) => return Some(Err(io_error(e))),
            }
            if self.last == Some(hash) {
                continue;
            }
            self.last = Some(hash);
            return Some(Ok(leaf));
        }
    }
}
