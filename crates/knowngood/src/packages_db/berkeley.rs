//! RPM's BerkeleyDB `Packages` database (RPM 4.15 and older: RHEL and Rocky Linux 8,
//! CentOS 7), read without BerkeleyDB.
//!
//! The file is a BerkeleyDB hash database of fixed-size pages in the byte order of the host
//! that wrote it. Page 0 is the metadata: magic `0x061561` at byte 12 (its byte order is the
//! file's), the hash version (8 to 10) at 16, the page size at 20, the last page number at 32,
//! the highest bucket at 72 and the 32 "spares" from 96 that map a bucket to its first page
//! (`bucket + spares[bits of bucket]`). Every page starts with a 26-byte header: its own
//! number at 8, the previous and next page at 12 and 16, the entry count at 20, the free-space
//! offset (on an overflow page, the bytes it holds) at 22, and the page type at 25. A bucket is
//! a chain of hash pages (types 2 and 13) linked by their next page; after the header, a hash
//! page lists its items' offsets (`u16`), alternately key and value, each item running to the
//! previous item's offset (the first to the page's end). An item is either inline (type 1,
//! then its bytes) or off-page (type 3, three unused bytes, then the first page and total
//! length of a chain of overflow pages, type 7, each holding its part after its header).
//! rpm's keys are the package number (`u32`, the file's byte order; key 0 holds the next
//! number to assign) and its values the package's header as in `rpmdb.sqlite`. Sources:
//! BerkeleyDB's `dbinc/db_page.h` and rpm's own reader of this format, `lib/backend/bdb_ro.c`.
//!
//! Everything is bounded: pages are read one at a time, every page visited at most once per
//! walk (a loop in the chains is an error), and a value longer than
//! [`ingest::rpm::MAX_HEADER_BYTES`] is refused before it is read.

use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::Path;

use anyhow::{Context as _, Result, bail, ensure};

/// Most pages read (a large host's `Packages` has a few hundred thousand of 4 KiB).
const MAX_PAGES: u64 = 1 << 23;
const HASH_MAGIC: u32 = 0x0006_1561;
const BTREE_MAGIC: u32 = 0x0005_3162;
const PAGE_HEADER: usize = 26;
const P_HASH_UNSORTED: u8 = 2;
const P_OVERFLOW: u8 = 7;
const P_HASH: u8 = 13;
const H_KEYDATA: u8 = 1;
const H_OFFPAGE: u8 = 3;

struct Db {
    file: File,
    little_endian: bool,
    page_size: usize,
    last_page: u32,
    max_bucket: u32,
    spares: [u32; 32],
}

impl Db {
    fn u32_at(&self, bytes: &[u8], at: usize) -> u32 {
        let raw = [bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]];
        if self.little_endian {
            u32::from_le_bytes(raw)
        } else {
            u32::from_be_bytes(raw)
        }
    }

    fn u16_at(&self, bytes: &[u8], at: usize) -> usize {
        let raw = [bytes[at], bytes[at + 1]];
        usize::from(if self.little_endian {
            u16::from_le_bytes(raw)
        } else {
            u16::from_be_bytes(raw)
        })
    }

    fn open(path: &Path) -> Result<Self> {
        let file = File::open(path)?;
        let mut meta = [0u8; 512];
        file.read_exact_at(&mut meta, 0)
            .context("shorter than its metadata page")?;
        let magic = [meta[12], meta[13], meta[14], meta[15]];
        let little_endian = match (u32::from_le_bytes(magic), u32::from_be_bytes(magic)) {
            (HASH_MAGIC, _) => true,
            (_, HASH_MAGIC) => false,
            (BTREE_MAGIC, _) | (_, BTREE_MAGIC) => {
                bail!("a BerkeleyDB B-tree, not the hash database rpm keeps packages in")
            }
            _ => bail!("not a BerkeleyDB hash database"),
        };
        let mut db = Db {
            file,
            little_endian,
            page_size: 0,
            last_page: 0,
            max_bucket: 0,
            spares: [0; 32],
        };
        let version = db.u32_at(&meta, 16);
        ensure!(
            (8..=10).contains(&version),
            "BerkeleyDB hash version {version} is not read (8 to 10 are)"
        );
        let page_size = db.u32_at(&meta, 20);
        ensure!(
            page_size.is_power_of_two() && (512..=65536).contains(&page_size),
            "page size {page_size} is not BerkeleyDB's"
        );
        db.page_size = page_size as usize;
        db.last_page = db.u32_at(&meta, 32);
        let pages = db.file.metadata()?.len() / u64::from(page_size);
        ensure!(
            pages <= MAX_PAGES,
            "{pages} pages, more than the {MAX_PAGES} read"
        );
        ensure!(
            u64::from(db.last_page) < pages,
            "the last page {} is past the file's end ({pages} pages)",
            db.last_page
        );
        db.max_bucket = db.u32_at(&meta, 72);
        ensure!(
            db.max_bucket < db.last_page.max(1),
            "{} buckets in {} pages",
            u64::from(db.max_bucket) + 1,
            db.last_page
        );
        for (i, spare) in db.spares.iter_mut().enumerate() {
            let at = 96 + i * 4;
            let raw = [meta[at], meta[at + 1], meta[at + 2], meta[at + 3]];
            *spare = if little_endian {
                u32::from_le_bytes(raw)
            } else {
                u32::from_be_bytes(raw)
            };
        }
        Ok(db)
    }

    /// Page `number`, checked to be in the file and to say it is that page.
    fn page(&self, number: u32, buf: &mut [u8]) -> Result<()> {
        ensure!(
            number != 0 && number <= self.last_page,
            "page {number} is outside the database (1 to {})",
            self.last_page
        );
        self.file
            .read_exact_at(buf, u64::from(number) * self.page_size as u64)
            .with_context(|| format!("reading page {number}"))?;
        ensure!(
            self.u32_at(buf, 8) == number,
            "page {number} says it is page {}",
            self.u32_at(buf, 8)
        );
        Ok(())
    }

    /// An item of a hash page: inline bytes, or an overflow chain read whole.
    fn item(&self, page: &[u8], at: usize, len: usize, visits: &mut Visits) -> Result<Vec<u8>> {
        ensure!(
            len > 0 && at + len <= page.len(),
            "an item outside its page"
        );
        match page[at] {
            H_KEYDATA => Ok(page[at + 1..at + len].to_vec()),
            H_OFFPAGE => {
                ensure!(len == 12, "an off-page item of {len} bytes, not 12");
                let first = self.u32_at(page, at + 4);
                let total = self.u32_at(page, at + 8) as usize;
                self.overflow(first, total, visits)
            }
            other => bail!("an item of type {other}, not rpm's"),
        }
    }

    fn overflow(&self, mut number: u32, total: usize, visits: &mut Visits) -> Result<Vec<u8>> {
        ensure!(
            total <= ingest::rpm::MAX_HEADER_BYTES,
            "a value of {total} bytes, more than the {} read",
            ingest::rpm::MAX_HEADER_BYTES
        );
        let mut out = Vec::with_capacity(total);
        let mut page = vec![0u8; self.page_size];
        while out.len() < total {
            visits.visit(number)?;
            self.page(number, &mut page)?;
            ensure!(
                page[25] == P_OVERFLOW,
                "page {number} of a value is not an overflow page"
            );
            let held = self.u16_at(&page, 22);
            ensure!(
                held > 0 && PAGE_HEADER + held <= self.page_size && held <= total - out.len(),
                "overflow page {number} holds {held} bytes"
            );
            out.extend_from_slice(&page[PAGE_HEADER..PAGE_HEADER + held]);
            number = self.u32_at(&page, 16);
        }
        Ok(out)
    }
}

/// Pages already read in this walk: each is read at most once, so chains cannot loop.
struct Visits(Vec<bool>);

impl Visits {
    fn visit(&mut self, page: u32) -> Result<()> {
        let seen = self
            .0
            .get_mut(page as usize)
            .with_context(|| format!("page {page} is outside the database"))?;
        ensure!(!*seen, "page {page} is reached twice: the database loops");
        *seen = true;
        Ok(())
    }
}

/// Calls `each` with every package number and header blob of rpm's BerkeleyDB `Packages`.
pub(super) fn for_each_header(
    path: &Path,
    mut each: impl FnMut(u32, &[u8]) -> Result<()>,
) -> Result<()> {
    let db = Db::open(path)?;
    let mut visits = Visits(vec![false; db.last_page as usize + 1]);
    let mut page = vec![0u8; db.page_size];
    for bucket in 0..=db.max_bucket {
        let bits = (u32::BITS - bucket.leading_zeros()) as usize;
        let mut number = db
            .spares
            .get(bits)
            .and_then(|spare| spare.checked_add(bucket))
            .context("a bucket's page is outside the database")?;
        loop {
            visits.visit(number)?;
            db.page(number, &mut page)?;
            ensure!(
                matches!(page[25], P_HASH | P_HASH_UNSORTED),
                "bucket {bucket}: page {number} is not a hash page"
            );
            let entries = db.u16_at(&page, 20);
            ensure!(
                PAGE_HEADER + entries * 2 <= db.page_size && entries % 2 == 0,
                "page {number}: {entries} entries"
            );
            let offset = |i: usize| db.u16_at(&page, PAGE_HEADER + i * 2);
            for pair in (0..entries).step_by(2) {
                let (key_at, value_at) = (offset(pair), offset(pair + 1));
                let key_end = if pair == 0 {
                    db.page_size
                } else {
                    offset(pair - 1)
                };
                ensure!(
                    value_at < key_at && key_at < key_end && key_end <= db.page_size,
                    "page {number}: entry {pair} overlaps another"
                );
                let key = db.item(&page, key_at, key_end - key_at, &mut visits)?;
                let key: [u8; 4] = key.as_slice().try_into().map_err(|_| {
                    anyhow::anyhow!("page {number}: a key of {} bytes, not 4", key.len())
                })?;
                let hnum = if db.little_endian {
                    u32::from_le_bytes(key)
                } else {
                    u32::from_be_bytes(key)
                };
                if hnum == 0 {
                    // The next package number rpm will assign.
                    continue;
                }
                let value = db.item(&page, value_at, key_at - value_at, &mut visits)?;
                each(hnum, &value)?;
            }
            number = db.u32_at(&page, 16);
            if number == 0 {
                break;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use testkit::rpmdb::berkeley_packages;

    use super::*;

    fn read(bytes: &[u8]) -> Result<Vec<(u32, Vec<u8>)>> {
        read_in(&tempfile::tempdir().unwrap(), bytes)
    }

    fn read_in(dir: &tempfile::TempDir, bytes: &[u8]) -> Result<Vec<(u32, Vec<u8>)>> {
        let path = dir.path().join("Packages");
        std::fs::write(&path, bytes).unwrap();
        let mut out = Vec::new();
        for_each_header(&path, |hnum, blob| {
            out.push((hnum, blob.to_vec()));
            Ok(())
        })?;
        out.sort();
        Ok(out)
    }

    fn blobs() -> Vec<Vec<u8>> {
        (1u8..=5)
            .map(|i| (0..1500u32).map(|j| (j as u8) ^ i).collect())
            .collect()
    }

    #[test]
    fn packages_are_read_in_either_byte_order() {
        let blobs = blobs();
        let refs: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
        let expected: Vec<(u32, Vec<u8>)> = (1..).zip(blobs.iter().cloned()).collect();
        for big_endian in [false, true] {
            for page_size in [512, 4096] {
                let file = berkeley_packages(page_size, big_endian, &refs);
                assert_eq!(read(&file).unwrap(), expected, "{page_size} {big_endian}");
            }
        }
    }

    #[test]
    fn a_corrupt_berkeley_db_is_an_error_not_a_panic() {
        let blobs = blobs();
        let refs: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
        let good = berkeley_packages(512, false, &refs);
        let err = |bytes: &[u8]| format!("{:#}", read(bytes).unwrap_err());
        // Cut short: fewer pages than the metadata says.
        assert!(err(&good[..good.len() - 512]).contains("past the file's end"));
        assert!(err(&good[..100]).contains("metadata"));
        // Not a hash database.
        let mut btree = good.clone();
        btree[12..16].copy_from_slice(&BTREE_MAGIC.to_le_bytes());
        assert!(err(&btree).contains("B-tree"));
        let mut other = good.clone();
        other[12] ^= 0xff;
        assert!(err(&other).contains("not a BerkeleyDB"));
        // A header's overflow chain that loops back on itself.
        let mut looped = good.clone();
        let first_overflow = 3 * 512;
        looped[first_overflow + 16..first_overflow + 20].copy_from_slice(&3u32.to_le_bytes());
        assert!(err(&looped).contains("twice"), "{}", err(&looped));
        // A value claiming 4 GiB.
        let mut huge = good.clone();
        let at = (1..3)
            .flat_map(|p| (p * 512..p * 512 + 512).step_by(1))
            .find(|&i| huge[i] == H_OFFPAGE && huge[i + 1..i + 4] == [0, 0, 0])
            .unwrap();
        huge[at + 8..at + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(err(&huge).contains("more than"), "{}", err(&huge));
        // A page that is not the one asked for.
        let mut moved = good.clone();
        moved[512 + 8] = 9;
        assert!(err(&moved).contains("says it is page"));
        // Any byte of the metadata's fields, a page's header, or a bucket's item offsets and
        // items replaced: an error or the packages, never a panic.
        let good = berkeley_packages(512, false, &refs[..2]);
        let pages = good.len() / 512;
        let spots = (0..128)
            .chain((1..pages).flat_map(|p| p * 512..p * 512 + PAGE_HEADER + 16))
            .chain((1..3).flat_map(|p| p * 512 + 512 - 64..p * 512 + 512));
        let dir = tempfile::tempdir().unwrap();
        for at in spots {
            for byte in [0x00, 0xff] {
                let mut bad = good.clone();
                bad[at] = byte;
                let _ = read_in(&dir, &bad);
            }
        }
    }
}
