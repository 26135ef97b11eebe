//! The daily transparency root: a signed Merkle root over the public feed, chained to the
//! previous day's root. Published by the replica holding the `translog.publish` lease once
//! the day's publication time has come and the day's vendor refresh (if on) has ended, or by
//! hand (`knowngood translog publish`).

use chrono::{DateTime, NaiveDate, Utc};
use model::Error;
use store::Store;
use store::roots::{LeafRow, StoredRoot};
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
    let records = store.current_records(None).await?;
    let mut leaves: Vec<(Hash, LeafRow)> = Vec::with_capacity(records.len());
    for r in records.iter().filter(|r| r.integrity_ok) {
        let n = &r.record;
        let record = Record {
            executable_name: &n.executable_name,
            hash_sha256: &n.hash_sha256,
            version: &n.version,
            platform: n.platform.as_str(),
            arch: n.arch.as_str(),
        };
        let hash = record
            .leaf_hash()
            .map_err(|e| Error::internal(format!("record {} cannot be a leaf: {e}", r.id)))?;
        leaves.push((
            hash,
            LeafRow {
                leaf_hash: hash_to_hex(&hash),
                executable_name: n.executable_name.clone(),
                hash_sha256: n.hash_sha256.clone(),
                version: n.version.clone(),
                platform: n.platform.as_str().into(),
                arch: n.arch.as_str().into(),
            },
        ));
    }
    leaves.sort_by_key(|a| a.0);
    leaves.dedup_by(|a, b| a.0 == b.0);
    let hashes: Vec<Hash> = leaves.iter().map(|(h, _)| *h).collect();
    let root = translog::merkle_root(&hashes);
    let prev = match store.root_before(date).await? {
        Some(p) => parse_hash(&p.merkle_root)?,
        None => translog::GENESIS_PREV_ROOT,
    };
    let signed = SignedRoot::sign(&log_key.signing, date, root, hashes.len() as u64, prev);
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
    let rows: Vec<LeafRow> = leaves.into_iter().map(|(_, row)| row).collect();
    let stored = store.publish_root(&stored, &rows).await?;
    tracing::info!(date = %date, entries = stored.entry_count, root = %stored.merkle_root, "published transparency root");
    Ok(stored)
}
