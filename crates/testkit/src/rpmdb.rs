//! rpm's BerkeleyDB `Packages` file, written for the readers of installed RPM packages.

/// A page's header: LSN, page number, previous and next page, entries, free-space offset,
/// level and type.
const PAGE_HEADER: usize = 26;
/// The magic number of a hash database's metadata page.
const HASH_MAGIC: u32 = 0x0006_1561;
/// Page types: a hash bucket's page, an overflow page, the hash metadata.
const P_HASH: u8 = 13;
const P_OVERFLOW: u8 = 7;
const P_HASHMETA: u8 = 8;
/// Item types: bytes inline, or off-page (first overflow page, length).
const H_KEYDATA: u8 = 1;
const H_OFFPAGE: u8 = 3;

/// rpm's `Packages` holding these headers (package numbers from 1) as BerkeleyDB 5.3 writes
/// a hash database (`dbinc/db_page.h`; rpm's own reader of it is `lib/backend/bdb_ro.c`),
/// in pages of `page_size` bytes, big- or little-endian. Page 0 is the metadata (magic
/// `0x061561`, hash version 9, page size, last page, two buckets: `max_bucket` 1, masks 1
/// and 0, spares mapping bucket 0 to page 1 and bucket 1 to page 2). Pages 1 and 2 are the
/// buckets' hash pages: the page header, the items' offsets, and the items packed from the
/// page's end, key then value, sorted by key; a key is the package number (4 bytes, inline),
/// in the bucket BerkeleyDB's default hash of its bytes names; key 0 holds the next package
/// number inline; each header is an off-page item whose bytes fill a chain of overflow
/// pages (the bytes on the page in the header's free-space field). Compared with a file
/// `db5.3_load` wrote; such files pass `db5.3_verify` and read with rpm's `bdb_ro` backend.
pub fn berkeley_packages(page_size: usize, big_endian: bool, blobs: &[&[u8]]) -> Vec<u8> {
    let put32 = |page: &mut [u8], at: usize, v: u32| {
        let b = if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        page[at..at + 4].copy_from_slice(&b);
    };
    let put16 = |page: &mut [u8], at: usize, v: usize| {
        let v = u16::try_from(v).unwrap();
        let b = if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        page[at..at + 2].copy_from_slice(&b);
    };
    let order = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    // Pages 1 and 2 are the buckets; overflow pages follow.
    let mut pages: Vec<Vec<u8>> = vec![vec![0; page_size]; 3];
    let mut buckets: [Vec<(Vec<u8>, Vec<u8>)>; 2] = Default::default();
    let next = u32::try_from(blobs.len()).unwrap() + 1;
    let mut items = vec![(order(0).to_vec(), [&[H_KEYDATA][..], &order(next)].concat())];
    for (i, blob) in blobs.iter().enumerate() {
        let first = u32::try_from(pages.len()).unwrap();
        let chunks: Vec<&[u8]> = blob.chunks(page_size - PAGE_HEADER).collect();
        for (j, chunk) in chunks.iter().enumerate() {
            let number = first + u32::try_from(j).unwrap();
            let mut page = vec![0u8; page_size];
            put32(&mut page, 8, number);
            put32(&mut page, 12, if j == 0 { 0 } else { number - 1 });
            put32(
                &mut page,
                16,
                if j + 1 == chunks.len() { 0 } else { number + 1 },
            );
            put16(&mut page, 20, 1);
            put16(&mut page, 22, chunk.len());
            page[25] = P_OVERFLOW;
            page[PAGE_HEADER..PAGE_HEADER + chunk.len()].copy_from_slice(chunk);
            pages.push(page);
        }
        let mut offpage = vec![H_OFFPAGE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        put32(&mut offpage, 4, first);
        put32(&mut offpage, 8, u32::try_from(blob.len()).unwrap());
        items.push((order(u32::try_from(i).unwrap() + 1).to_vec(), offpage));
    }
    for (key, value) in items {
        // BerkeleyDB's default hash (FNV-1 style) of the key's bytes, masked to the two
        // buckets.
        let hash = key
            .iter()
            .fold(0u32, |h, &b| h.wrapping_mul(16_777_619) ^ u32::from(b));
        let mut item = vec![H_KEYDATA];
        item.extend(&key);
        buckets[(hash & 1) as usize].push((item, value));
    }
    for (b, entries) in buckets.iter_mut().enumerate() {
        entries.sort();
        let page = &mut pages[b + 1];
        let mut low = page_size;
        let mut offsets = Vec::new();
        for (key, value) in entries.iter() {
            for item in [key, value] {
                low -= item.len();
                page[low..low + item.len()].copy_from_slice(item);
                offsets.push(low);
            }
        }
        assert!(
            PAGE_HEADER + offsets.len() * 2 <= low,
            "the fixture fits its pages"
        );
        put32(page, 8, u32::try_from(b).unwrap() + 1);
        put16(page, 20, offsets.len());
        put16(page, 22, low);
        page[25] = P_HASH;
        for (i, at) in offsets.iter().enumerate() {
            put16(page, PAGE_HEADER + i * 2, *at);
        }
    }
    let last = u32::try_from(pages.len()).unwrap() - 1;
    let meta = &mut pages[0];
    put32(meta, 12, HASH_MAGIC);
    put32(meta, 16, 9); // hash version
    put32(meta, 20, u32::try_from(page_size).unwrap());
    meta[25] = P_HASHMETA;
    put32(meta, 32, last);
    put32(meta, 40, next); // key count
    put32(meta, 44, next); // record count
    meta[52..72].copy_from_slice(b"knowngood-test-uid!!");
    put32(meta, 72, 1); // max_bucket
    put32(meta, 76, 1); // high_mask
    put32(meta, 80, 0); // low_mask
    put32(meta, 88, next); // nelem
    put32(meta, 92, 0x5e68_8dd1); // h_charkey: the default hash of its check string
    put32(meta, 96, 1); // spares: bucket 0 is page 1, bucket 1 page 2
    put32(meta, 100, 1);
    pages.concat()
}
