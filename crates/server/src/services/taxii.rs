//! The TAXII collection read from the store: one page, or one object, from the current
//! records in the order they were added, a chunk at a time, so no answer holds more than a
//! chunk of records whatever their number.
//!
//! An object several current records share (an identical file, the software of a release
//! built for several arches, the relationship between the two) is listed once, with the
//! earliest added verified record that names it. Which records may share an object with a
//! record is known from the record itself: the same contributing hash (the file) or the
//! same vendor and family (the software), both found through the store's indexes.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use feeds::stix::{self, StixObject};
use feeds::taxii::{Page, PageBuilder, Query};
use model::{Error, HashRecord, HashValue};
use store::{AddedPosition, Store};

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

/// The object with this id, if the collection holds it.
pub async fn object(store: &dyn Store, id: &str) -> Result<Option<StixObject>, Error> {
    if let Some(object) = stix::preamble().into_iter().find(|o| o.id == id) {
        return Ok(Some(object));
    }
    // Object ids are digests of what they describe, so the record is found by reading.
    let mut walk = Walk::from(None);
    while let Some(objects) = walk.next_chunk(store).await? {
        if let Some(object) = objects.into_iter().find(|o| o.id == id) {
            return Ok(Some(object));
        }
    }
    Ok(None)
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
