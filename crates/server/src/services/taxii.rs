//! The TAXII collection read from the store: one page, or one object, from the current
//! records in the order they were added, a chunk at a time, so no answer holds more than a
//! chunk of records whatever their number.
//!
//! An object several current records share (an identical file, the software of a release
//! built for several arches, the relationship between the two) is listed once, with the
//! earliest added verified record that names it. Which records may share an object with a
//! record is known from the record itself: the same contributing hash (the file) or the
//! same vendor and family (the software), both found through the store's indexes.
//!
//! One object by id is found through a table of the store that maps each object's key to
//! the records that name it, filled from the records' changes by [`ObjectIndex`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use feeds::stix::{self, RecordObjectIds, StixObject};
use feeds::taxii::{Page, PageBuilder, Query};
use model::{Error, HashRecord, HashValue, RecordStatus};
use store::stix_objects::ChangePosition;
use store::{AddedPosition, Store};
use tokio::sync::Mutex;

/// Records read from the store at a time.
const CHUNK: u32 = 200;

/// Most records one listing examines: a filter that matches little (`match[type]=software`)
/// cannot make one request walk the whole collection; the page ends early with `more` and
/// a `next` that resumes after the last object examined.
const RECORD_BUDGET: usize = 10_000;

/// One page of the collection's objects for `query`.
pub async fn page(store: &dyn Store, query: &Query) -> Result<Page, Error> {
    let mut builder = PageBuilder::new(query, None);
    for object in stix::preamble() {
        builder.offer(object);
    }
    let mut walk = Walk::from(builder.records_from());
    let mut cut_short = false;
    while !builder.is_full() {
        if walk.examined >= RECORD_BUDGET {
            cut_short = true;
            break;
        }
        let Some(objects) = walk.next_chunk(store).await? else {
            break;
        };
        for object in objects {
            builder.offer(object);
        }
    }
    Ok(builder.finish(cut_short))
}

/// Most records that may name one object: the records of one release (its software and
/// the file's relationship to it), plus any whose keys collide.
const NAMING_AT_MOST: u32 = 1_000;

/// Most changed records a lookup by id notes itself before answering. A larger backlog
/// (the first start after an upgrade, with every record to note) is left to the
/// background catch-up, and the lookup answers 503 until it is done.
const LOOKUP_BUDGET: usize = 20_000;

/// How long a lookup by id waits for a catch-up already running in this process.
const WAIT_FOR_CATCH_UP: Duration = Duration::from_secs(2);

/// Changed records read at a time while noting their objects.
const NOTE_PAGE: u32 = 1_000;

/// The object with this id, if the collection holds it: found through the store's table
/// of which records name which object ([`ObjectIndex`]), caught up first, then given by
/// the earliest added verified current record that names it, as the listing gives it.
pub async fn object(
    store: &Arc<dyn Store>,
    index: &Arc<ObjectIndex>,
    id: &str,
) -> Result<Option<StixObject>, Error> {
    if let Some(object) = stix::preamble().into_iter().find(|o| o.id == id) {
        return Ok(Some(object));
    }
    let Some(key) = stix::object_key(id) else {
        return Ok(None);
    };
    if index.is_behind(store.as_ref()) {
        let caught_up = match tokio::time::timeout(WAIT_FOR_CATCH_UP, index.noting.lock()).await {
            Ok(_noting) => index.catch_up(store.as_ref(), Some(LOOKUP_BUDGET)).await?,
            Err(_) => false,
        };
        if !caught_up {
            index.follow(store);
            return Err(Error::Unavailable(
                "the collection's objects are still being indexed by id; try again shortly".into(),
            ));
        }
    }
    let mut naming = store
        .records_naming_stix_object(key, NAMING_AT_MOST)
        .await?;
    naming.retain(|r| r.status == RecordStatus::Current && r.integrity_ok);
    naming.sort_by(|a, b| (a.added_at, &a.id).cmp(&(b.added_at, &b.id)));
    Ok(naming
        .iter()
        .find_map(|r| stix::record_objects(r).into_iter().find(|o| o.id == id)))
}

/// Keeps the store's table of which records name which object following the records'
/// changes: in the background after each new records epoch (and, on the first start
/// after an upgrade, through every record), and before a lookup by id.
#[derive(Default)]
pub struct ObjectIndex {
    /// Held while noting: one catch-up at a time in this process.
    noting: Mutex<()>,
    /// A records epoch the table is known to include (0 until the first catch-up).
    followed: AtomicU64,
}

impl ObjectIndex {
    fn is_behind(&self, store: &dyn Store) -> bool {
        self.followed.load(Ordering::Acquire) < store.records_epoch()
    }

    /// Catches up in a task of its own unless the table is current or a catch-up runs.
    pub fn follow(self: &Arc<Self>, store: &Arc<dyn Store>) {
        if !self.is_behind(store.as_ref()) {
            return;
        }
        let (index, store) = (self.clone(), store.clone());
        tokio::spawn(async move {
            let Ok(_noting) = index.noting.try_lock() else {
                return;
            };
            if let Err(e) = index.catch_up(store.as_ref(), None).await {
                tracing::warn!(error = %e, "TAXII object index could not follow the records");
            }
        });
    }

    /// Notes the objects of the records changed since the stored position, at most
    /// `budget` records (`None`: all); true once the table includes the records epoch
    /// this began at. Callers hold `noting`.
    async fn catch_up(&self, store: &dyn Store, budget: Option<usize>) -> Result<bool, Error> {
        let target = store.records_epoch();
        if self.followed.load(Ordering::Acquire) >= target {
            return Ok(true);
        }
        let mut position = store.stix_object_position().await?;
        let mut noted = 0usize;
        loop {
            let changed = store
                .records_changed_after(position.epoch, position.after_id.as_deref(), NOTE_PAGE)
                .await?;
            let Some((epoch, last)) = changed.last() else {
                break;
            };
            let ids: Vec<(RecordObjectIds, &str)> = changed
                .iter()
                .map(|(_, r)| (RecordObjectIds::of(r), r.id.as_str()))
                .collect();
            let named: Vec<(i64, &str)> = ids
                .iter()
                .flat_map(|(objects, record)| {
                    objects
                        .all()
                        .into_iter()
                        .filter_map(|object| Some((stix::object_key(object)?, *record)))
                })
                .collect();
            position = ChangePosition {
                epoch: *epoch,
                after_id: Some(last.id.clone()),
            };
            store.note_stix_objects(&named, &position).await?;
            noted += changed.len();
            if changed.len() < NOTE_PAGE as usize {
                break;
            }
            if budget.is_some_and(|budget| noted >= budget) {
                return Ok(false);
            }
            if noted.is_multiple_of(1_000_000) {
                tracing::info!(records = noted, "TAXII object index: records noted so far");
            }
        }
        self.followed.fetch_max(target, Ordering::AcqRel);
        Ok(true)
    }
}

/// A read of the collection's records in date-added order.
struct Walk {
    after: Option<AddedPosition>,
    done: bool,
    examined: usize,
}

impl Walk {
    /// From the records added at `from` or later (`None`: from the first).
    fn from(from: Option<DateTime<Utc>>) -> Self {
        Self {
            // Every id sorts after the empty one, so records added at `from` are included.
            after: from.map(|added_at| AddedPosition {
                added_at,
                id: String::new(),
            }),
            done: false,
            examined: 0,
        }
    }

    /// The objects of the next chunk of records, in date-added order, shared ones only
    /// with the record they belong to; `None` after the last record.
    async fn next_chunk(&mut self, store: &dyn Store) -> Result<Option<Vec<StixObject>>, Error> {
        if self.done {
            return Ok(None);
        }
        let records = store
            .current_records_added_after(self.after.as_ref(), CHUNK)
            .await?;
        self.done = records.len() < CHUNK as usize;
        let Some(last) = records.last() else {
            return Ok(None);
        };
        self.after = Some(AddedPosition {
            added_at: last.added_at,
            id: last.id.clone(),
        });
        self.examined += records.len();
        let verified: Vec<&HashRecord> = records.iter().filter(|r| r.integrity_ok).collect();
        let owners = owners(store, &verified).await?;
        let mut objects = Vec::with_capacity(verified.len() * 5);
        for record in verified {
            let position = (record.added_at, record.id.as_str());
            objects.extend(stix::record_objects(record).into_iter().filter(|o| {
                owners
                    .get(&o.id)
                    .is_none_or(|(at, id)| (*at, id.as_str()) >= position)
            }));
        }
        Ok(Some(objects))
    }
}

/// For every object the records name, the earliest added verified current record that
/// names it too, as (added_at, id).
async fn owners(
    store: &dyn Store,
    records: &[&HashRecord],
) -> Result<HashMap<String, (DateTime<Utc>, String)>, Error> {
    let mut hashes = Vec::with_capacity(records.len());
    let mut families = Vec::with_capacity(records.len());
    for r in records {
        let n = &r.record;
        // Records sharing the file observable share its id's hash.
        if let Ok(hash) = HashValue::parse(stix::contributing_hash(r).1) {
            hashes.push(hash);
        }
        families.push((n.vendor.clone(), r.family.clone()));
    }
    families.sort();
    families.dedup();
    let mut sharing = store.find_by_hashes(&hashes, false).await?;
    sharing.extend(store.current_in_families(&families).await?);
    let mut owners: HashMap<String, (DateTime<Utc>, String)> = HashMap::new();
    for candidate in sharing.iter().filter(|c| c.integrity_ok) {
        for object in stix::record_objects(candidate) {
            let position = (candidate.added_at, candidate.id.clone());
            owners
                .entry(object.id)
                .and_modify(|owner| {
                    if position < *owner {
                        *owner = position.clone();
                    }
                })
                .or_insert(position);
        }
    }
    Ok(owners)
}
