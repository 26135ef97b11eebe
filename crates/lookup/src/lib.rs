//! Classifying submitted hashes: vendor releases first (from the [`VendorIndex`], a mapped
//! generation file and an in-memory delta over it, caught up with the store's changes first
//! if it is behind; from the database only while there is no index), then the reference
//! corpus, else unknown.
//!
//! A [`Classifier`] is cheap to clone and shared by every request. Its answers borrow their
//! text from the index, the records read for the request or the corpus generation, so
//! [`Classifier::classify`] returns a [`Classified`] that holds those sources, and the
//! per-hash [`Verdict`]s borrow from it: no copies per hit.

use std::sync::Arc;

use corpus::{Corpus, Generation};
use model::{Classification, Error, HashRecord, HashValue};
use store::{RecordsListener, Store};

pub mod generation;
pub mod vendor_index;

pub use vendor_index::{
    CurrentDigests, DigestBytes, FreshIndex, VendorIndex, VendorMatch, best_match,
};

/// The classification pipeline: the vendor index, the store behind it and the optional
/// reference corpus.
#[derive(Clone)]
pub struct Classifier {
    index: Arc<VendorIndex>,
    store: Arc<dyn Store>,
    corpus: Option<Arc<Corpus>>,
    /// Kept alive here: the store holds it only weakly.
    _listener: Arc<dyn RecordsListener>,
}

/// Applies each new records epoch to the index before the store shows it.
struct IndexListener {
    index: std::sync::Weak<VendorIndex>,
    store: std::sync::Weak<dyn Store>,
}

#[async_trait::async_trait]
impl RecordsListener for IndexListener {
    async fn before_epoch(&self, epoch: u64) {
        let (Some(index), Some(store)) = (self.index.upgrade(), self.store.upgrade()) else {
            return;
        };
        // A failure leaves the index behind; the lookup path then catches up as before.
        if let Err(e) = index.catch_up_to(&store, epoch).await {
            tracing::warn!(error = %e, "vendor lookup index could not follow a write");
        }
    }
}

impl Classifier {
    /// A classifier over `store` with an empty index (started on first use or by
    /// [`rebuild`](Self::rebuild)) whose generations go to a private temporary directory,
    /// and no corpus.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self::with_index(store, VendorIndex::default(), None)
    }

    fn with_index(store: Arc<dyn Store>, index: VendorIndex, corpus: Option<Arc<Corpus>>) -> Self {
        let index = Arc::new(index);
        // The index catches up with each write before the store shows its epoch, so a
        // lookup never waits for a catch-up (and its query) itself.
        let listener: Arc<dyn RecordsListener> = Arc::new(IndexListener {
            index: Arc::downgrade(&index),
            store: Arc::downgrade(&store),
        });
        store.listen_to_records(Arc::downgrade(&listener));
        Self {
            index,
            store,
            corpus,
            _listener: listener,
        }
    }

    /// The same classifier with a new, empty index that keeps its generations in `dir`,
    /// so that a restart maps the newest one instead of scanning the store.
    pub fn with_generation_dir(self, dir: impl Into<std::path::PathBuf>) -> Self {
        Self::with_index(self.store, VendorIndex::with_dir(dir), self.corpus)
    }

    /// Answers `known_file` from this corpus too; the index is kept.
    pub fn with_corpus(mut self, corpus: Arc<Corpus>) -> Self {
        self.corpus = Some(corpus);
        self
    }

    pub fn index(&self) -> &Arc<VendorIndex> {
        &self.index
    }

    /// Applies the store's changes to the index in the background if it is behind.
    pub fn catch_up(&self) {
        self.index.catch_up(&self.store);
    }

    /// Starts a rebuild unless one is running or it is too soon (see
    /// [`VendorIndex::rebuild_in_background`]).
    pub fn rebuild_in_background(&self) {
        self.index.rebuild_in_background(&self.store);
    }

    /// The index's periodic upkeep: start, merge when the delta is large, rolling HMAC
    /// re-verification (see [`VendorIndex::upkeep`]).
    pub fn upkeep(&self) {
        self.index.upkeep(&self.store);
    }

    /// Makes the index current now, on this task (mapping the newest generation at first,
    /// else writing one); returns the number of hashes indexed.
    pub async fn rebuild(&self) -> Result<usize, Error> {
        self.index.rebuild(&self.store).await
    }

    /// Classifies `batch` (parsed, sorted and distinct). Superseded vendor records match
    /// only when `historical`. A stale index is caught up here (one indexed query); the
    /// database answers only when there is no index yet. The in-memory work happens in
    /// [`Classified::results`].
    pub async fn classify(
        &self,
        batch: Vec<HashValue>,
        historical: bool,
    ) -> Result<Classified, Error> {
        let index = self.index.lookup(&self.store, &batch).await;
        let records = match &index {
            Some(_) => Vec::new(),
            // Verified records only; `best_match` picks as the index would.
            None => self.store.find_by_hashes(&batch, historical).await?,
        };
        Ok(Classified {
            batch,
            historical,
            index,
            records,
            generation: self.corpus.as_ref().and_then(|c| c.current()),
        })
    }
}

/// One batch with the sources its answers borrow from.
pub struct Classified {
    batch: Vec<HashValue>,
    historical: bool,
    /// The index, when it was fresh; otherwise `records` holds the database's answer.
    index: Option<FreshIndex>,
    records: Vec<HashRecord>,
    generation: Option<Arc<Generation>>,
}

/// What a hash was found to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// A verified vendor record; superseded only on a historical lookup.
    VendorRelease(VendorMatch<'a>),
    /// A file of the reference corpus.
    File(corpus::Entry<'a>),
    Unknown,
}

impl Verdict<'_> {
    pub fn classification(&self) -> Classification {
        match self {
            Verdict::VendorRelease(_) => Classification::KnownVendorRelease,
            Verdict::File(_) => Classification::KnownFile,
            Verdict::Unknown => Classification::Unknown,
        }
    }
}

impl Classified {
    /// Whether the vendor records came from the index rather than the database.
    pub fn from_index(&self) -> bool {
        self.index.is_some()
    }

    /// The hashes as submitted to [`Classifier::classify`].
    pub fn batch(&self) -> &[HashValue] {
        &self.batch
    }

    /// Every hash of the batch with its verdict, in batch order. Each call looks the batch
    /// up again (microseconds, all in memory).
    pub fn results(&self) -> Vec<(&HashValue, Verdict<'_>)> {
        let batch = &self.batch;
        let vendor = match &self.index {
            Some(index) => index.get_batch(batch, self.historical),
            None => batch.iter().map(|h| best_match(h, &self.records)).collect(),
        };
        let mut verdicts: Vec<Option<Verdict<'_>>> = vendor
            .into_iter()
            .map(|m| m.map(Verdict::VendorRelease))
            .collect();
        // The reference corpus for the rest, in one prefetching batch; it is in memory, so
        // this is safe on an async thread.
        if let Some(g) = &self.generation {
            let rest: Vec<usize> = (0..batch.len())
                .filter(|&i| verdicts[i].is_none())
                .collect();
            // Every parsed hash has a digest's length, so none is dropped and indexes line up.
            let keys: Vec<corpus::HashBytes> = rest
                .iter()
                .filter_map(|&i| corpus::HashBytes::from_slice(batch[i].digest()))
                .collect();
            let found = if keys.len() == rest.len() {
                g.lookup_batch(&keys)
            } else {
                Vec::new()
            };
            for (&i, entry) in rest.iter().zip(found) {
                verdicts[i] = entry.map(Verdict::File);
            }
        }
        batch
            .iter()
            .zip(verdicts)
            .map(|(hash, v)| (hash, v.unwrap_or(Verdict::Unknown)))
            .collect()
    }
}
