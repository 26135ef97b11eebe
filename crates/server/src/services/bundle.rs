//! The vendor-release part of the offline bundle: the vendor filters, built from the
//! vendor lookup index, and the day's feed list, read from the store a page at a time. The
//! bundle route and `knowngood bundle export` both write it through [`write_vendor_part`].

use std::sync::Arc;

use model::Error;

/// A stored leaf's fields, as the bundle's feed list holds them.
fn leaf_fields(leaf: &store::roots::LeafRow) -> translog::Record<'_> {
    translog::Record {
        executable_name: &leaf.executable_name,
        hash_sha256: &leaf.hash_sha256,
        version: &leaf.version,
        platform: &leaf.platform,
        arch: &leaf.arch,
    }
}

/// Leaves read from the store per page of the feed list.
const LEAF_PAGE: u32 = 5_000;

/// The vendor-release part of a bundle as written: the vendor filters and the feed list.
pub struct VendorPart<W> {
    /// `vendor-sha256.bloom`, `vendor-sha1.bloom`, `vendor-md5.bloom`.
    pub filters: Vec<bundle::WrittenFilter>,
    /// `feed.jsonl`.
    pub feed: bundle::FileEntry,
    /// The writers `open` gave, in the order of `filters`, then the feed list's.
    pub writers: Vec<W>,
}

pub(crate) fn built_error(e: bundle::BundleError) -> Error {
    Error::internal_caused("the bundle could not be built", e)
}

pub(crate) fn stopped(e: tokio::task::JoinError) -> Error {
    Error::internal_caused("the bundle build stopped", e)
}

/// Writes the vendor filters and the feed list of `date`, each to the writer `open` gives
/// for its file name. The filters come from the vendor lookup index (caught up with the
/// store first, made now if there is none): its mapped generation and delta walked in
/// digest order, one filter at a time. The feed list is the day's leaves in tree order,
/// read a page at a time, each with the vendor of the current verified record naming its
/// SHA-256 (from the same index). Memory: one filter's bit array at a time, a page of
/// leaves, and the delta's hashes; nothing per record of the generation.
pub async fn write_vendor_part<W, F>(
    store: &Arc<dyn store::Store>,
    index: &Arc<lookup::VendorIndex>,
    date: chrono::NaiveDate,
    mut open: F,
) -> Result<VendorPart<W>, Error>
where
    W: std::io::Write + Send + 'static,
    F: FnMut(&str) -> std::io::Result<W> + Send + 'static,
{
    let digests = index.current_digests(store).await?;
    let (filters, mut writers, feed, open) = tokio::task::spawn_blocking(move || {
        let (filters, writers) = bundle::write_vendor_filters(
            |algo, each: &mut dyn FnMut(&[u8])| digests.for_each(algo, each),
            &mut open,
        )?;
        let feed = open(bundle::FEED_FILE)
            .map_err(|e| bundle::BundleError::Io(bundle::FEED_FILE.to_owned(), e))?;
        Ok::<_, bundle::BundleError>((filters, writers, bundle::FeedWriter::new(feed), open))
    })
    .await
    .map_err(stopped)?
    .map_err(built_error)?;
    drop(open);
    let mut feed = Some(feed);
    let mut from = 0u64;
    loop {
        let page = store.leaves_page(date, from, LEAF_PAGE).await?;
        if page.is_empty() {
            break;
        }
        from += page.len() as u64;
        let vendors = leaf_vendors(store, index, &page).await?;
        let mut writer = feed
            .take()
            .ok_or_else(|| Error::internal("no feed writer"))?;
        feed = Some(
            tokio::task::spawn_blocking(move || {
                for (leaf, vendor) in page.iter().zip(vendors) {
                    writer.push(&leaf_fields(leaf), vendor.as_deref())?;
                }
                Ok::<_, bundle::BundleError>(writer)
            })
            .await
            .map_err(stopped)?
            .map_err(built_error)?,
        );
    }
    let writer = feed.ok_or_else(|| Error::internal("no feed writer"))?;
    let (feed, file) = tokio::task::spawn_blocking(move || writer.finish())
        .await
        .map_err(stopped)?
        .map_err(built_error)?;
    writers.push(file);
    Ok(VendorPart {
        filters,
        feed,
        writers,
    })
}

/// The vendor of the current verified record naming each leaf's SHA-256, in order.
async fn leaf_vendors(
    store: &Arc<dyn store::Store>,
    index: &Arc<lookup::VendorIndex>,
    page: &[store::roots::LeafRow],
) -> Result<Vec<Option<String>>, Error> {
    let parsed: Vec<Option<model::HashValue>> = page
        .iter()
        .map(|l| model::HashValue::parse(&l.hash_sha256).ok())
        .collect();
    let batch: Vec<model::HashValue> = parsed.iter().flatten().cloned().collect();
    let fresh = index
        .lookup(store, &batch)
        .await
        .ok_or_else(|| Error::internal("the vendor lookup index is not available"))?;
    let mut found = fresh
        .get_batch(&batch, false)
        .into_iter()
        .map(|m| m.map(|m| m.vendor.to_owned()));
    Ok(parsed
        .iter()
        .map(|p| p.as_ref().and_then(|_| found.next().flatten()))
        .collect())
}
