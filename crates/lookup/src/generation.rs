//! Vendor record generations: one immutable, memory-mapped file holding every verified
//! record of a store scan, the base the lookup index answers from.
//!
//! # File format (version 2)
//! Little-endian. A header at offset 0, then sections, each starting on a 4 KiB boundary:
//!
//! | section | content |
//! |---|---|
//! | entries | one entry per verified record, in the scan's (id) order, each starting on an 8-byte boundary: SHA-256, SHA-1, MD5, flags (has SHA-1, has MD5, current, has size, id is hex), platform, size, `u40` offsets of the vendor and version in the strings, then the executable name (LEB128 length, UTF-8), `valid_from` (µs) and the record id (16 bytes when it is 32 lowercase hex digits, else LEB128 length and UTF-8). What a lookup reports lies in the entry's first bytes, so a hit reads one place; an entry is named by its offset / 8 |
//! | `<alg>` rows | SHA-256, SHA-1, MD5 tables: one 20-byte row per (digest, record): the digest's first 16 bytes then the entry's `u32` name, sorted by the whole digest and, among equal digests, best first (current before superseded, newest `valid_from`, smallest id), so a lookup takes the first row of its digest whose entry holds the whole digest (the first, but for a collision of 16 bytes) |
//! | `<alg>` buckets | `2^b + 1` `u32` row starts by the digest's top `b` bits (as the corpus's), `b` sized for 4-8 rows a bucket |
//! | strings | LEB128 length then UTF-8 bytes: vendors and versions, interned (up to a bound) |
//! | order | every entry's `u32` name in scan order, so that a record is found by its id |
//!
//! The header holds a magic, the format version, the records epoch the scan started at, a
//! fingerprint of the store (SHA-256 of its first record id), the counts, the sections, the
//! SHA-256 of everything after the header, and a SHA-256 of the header itself. Opening
//! checks all of it, so a truncated or damaged file is refused; lookups bound-check every
//! offset besides, so they can only miss, never panic.
//!
//! # Writing
//! [`Writer`] takes records in id order with bounded memory: entries and strings go straight
//! to work files, the digest rows into external sorts (sorted chunks spilled as runs, then a
//! k-way merge, as the corpus import does). [`Writer::finish`] assembles the file in a
//! `.tmp-vendor-<seq>` work directory under `merge.lock`, fsyncs it, renames it to
//! `vendor-<seq>.gen` and fsyncs the directory. A work directory found while holding the
//! lock is a crashed merge's and is removed.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use corpus::prefetch::{prefetch, prefetch_range};
use corpus::{BucketIndex, FixedSorter};
use memmap2::Mmap;
use model::{HashAlgo, HashRecord, HashValue, Platform, RecordStatus};
use sha2::{Digest as _, Sha256};

use crate::vendor_index::{DigestBytes, Key, VendorMatch, key_of};

const MAGIC: [u8; 8] = *b"KGVNDGEN";
pub(crate) const FORMAT_VERSION: u32 = 2;
/// Sections start on page boundaries; the header takes the first page.
const ALIGN: u64 = 4096;
const HEADER_FIELDS: usize = 512;

const E_SHA1: usize = 32;
const E_MD5: usize = 52;
const E_FLAGS: usize = 68;
const E_PLATFORM: usize = 69;
const E_SIZE: usize = 70;
const E_VENDOR: usize = 78;
const E_VERSION: usize = 83;
/// The executable name's length, then the name, `valid_from` and the id.
const E_NAME: usize = 88;
/// Entries start on multiples of this; an entry's `u32` name is its offset divided by it.
const ENTRY_ALIGN: usize = 8;
/// The smallest entry: an empty name and id, padded.
const MIN_ENTRY_BYTES: u64 = (E_NAME + 1 + 8 + 1).next_multiple_of(ENTRY_ALIGN) as u64;
/// Bytes of an entry a batch lookup asks for ahead: the fixed part and a name of up to 39
/// bytes (longer names cost one more read).
const ENTRY_PREFETCH: usize = 128;

const F_SHA1: u8 = 1;
const F_MD5: u8 = 2;
const F_CURRENT: u8 = 4;
const F_SIZE: u8 = 8;
const F_ID_HEX: u8 = 16;

/// Digest bytes of the three tables (SHA-256, SHA-1, MD5) and where entries hold them.
const DIGEST_LEN: [usize; 3] = [32, 20, 16];
const E_DIGEST: [usize; 3] = [0, E_SHA1, E_MD5];
/// A row keeps a digest's first 16 bytes and the entry's `u32` name: enough to tell
/// digests apart but for a collision, which the entry's full digest settles (a lookup reads
/// the entry anyway). Shorter rows make a lookup's first read of rows fewer cache lines.
const ROW_KEY: usize = 16;
const ROW_LEN: usize = ROW_KEY + 4;
/// Rank bytes (current flag, inverted `valid_from`) then the record's place in id order.
const RANK_LEN: usize = 9 + 4;
const MAX_BUCKET_BITS: u32 = 24;
/// Hashes per round of the batch lookup (as the corpus's).
const ROUND: usize = 64;
/// Half-width of the first read around the interpolated row, in standard deviations of a
/// bucket (see the corpus's `WINDOW`).
const WINDOW: f64 = 0.8;
/// Interned strings kept in memory while writing: beyond this many, strings are written
/// as they come, so memory stays bounded whatever the store holds.
const MAX_INTERNED: usize = 1 << 20;
const IO_BUF: usize = 256 << 10;
/// The generation is written in pieces of this size at multiples of it: the page cache then
/// holds it in 2 MiB folios, which the mapping (advised for huge pages) maps whole, so
/// lookups rarely miss the TLB. Smaller writes leave 4 KiB pages.
const FILE_CHUNK: usize = 4 << 20;

/// The lock a writer holds on the generation directory, and the prefixes of its files.
const LOCK_FILE: &str = "merge.lock";
const TMP_PREFIX: &str = ".tmp-vendor-";
const GEN_PREFIX: &str = "vendor-";
const GEN_SUFFIX: &str = ".gen";

/// The digest table (and any per-kind slot) of `algo`: SHA-256, SHA-1, MD5.
pub(crate) fn table_of(algo: HashAlgo) -> usize {
    match algo {
        HashAlgo::Sha256 => 0,
        HashAlgo::Sha1 => 1,
        HashAlgo::Md5 => 2,
    }
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

/// About 4-8 rows a bucket, at most 2^24 buckets.
fn bucket_bits(rows: u64) -> u32 {
    let ceil_log2 = 64 - rows.saturating_sub(1).leading_zeros();
    ceil_log2.saturating_sub(3).clamp(1, MAX_BUCKET_BITS)
}

/// The first eight bytes of a digest as a big-endian number.
#[inline]
fn prefix(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = key.len().min(8);
    bytes[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(bytes)
}

fn put_u40(out: &mut [u8], value: u64) {
    out[..5].copy_from_slice(&value.to_le_bytes()[..5]);
}

fn get_u40(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..5].copy_from_slice(&bytes[..5]);
    u64::from_le_bytes(b)
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn get_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().take(10).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// A record id of 32 lowercase hex digits (as the store makes them) as its 16 bytes.
fn hex_id(id: &str) -> Option<[u8; 16]> {
    decode::<16>(id).filter(|_| !id.bytes().any(|b| b.is_ascii_uppercase()))
}

/// Rank bytes that sort best first: current, then the newest.
fn rank_bytes(current: bool, valid_from_micros: i64) -> [u8; 9] {
    let mut out = [0u8; 9];
    out[0] = u8::from(!current);
    let ordered = (valid_from_micros as u64) ^ (1 << 63);
    out[1..].copy_from_slice(&(!ordered).to_be_bytes());
    out
}

/// What identifies the store a generation was written from: the SHA-256 of its first
/// record id (ids are random), zeros for an empty store. Records written later may sort
/// before that id, so a start looks for it among the store's first ids.
pub(crate) fn fingerprint(first_id: Option<&str>) -> [u8; 32] {
    first_id.map_or([0; 32], |id| Sha256::digest(id.as_bytes()).into())
}

// ---------------------------------------------------------------------------------------
// Header
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Header {
    flags: u32,
    epoch: u64,
    records: u64,
    created_unix: u64,
    fingerprint: [u8; 32],
    rows: [u64; 3],
    distinct: [u64; 3],
    bits: [u32; 3],
    /// (offset, length): entries, then rows and buckets of each table, strings, order.
    sections: [(u64, u64); SECTIONS],
    file_len: u64,
    body_sha256: [u8; 32],
}

/// Entries are sorted by id bytes: the record of an id is found by bisection.
const H_IDS_SORTED: u32 = 1;

const S_ENTRIES: usize = 0;
const S_STRINGS: usize = 7;
const S_ORDER: usize = 8;
const SECTIONS: usize = 9;
fn s_rows(t: usize) -> usize {
    1 + 2 * t
}
fn s_buckets(t: usize) -> usize {
    2 + 2 * t
}

impl Header {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_FIELDS + 32);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        for v in [self.epoch, self.records, self.created_unix, self.file_len] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.fingerprint);
        for t in 0..3 {
            out.extend_from_slice(&self.rows[t].to_le_bytes());
            out.extend_from_slice(&self.distinct[t].to_le_bytes());
            out.extend_from_slice(&self.bits[t].to_le_bytes());
        }
        for (offset, len) in self.sections {
            out.extend_from_slice(&offset.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
        }
        out.extend_from_slice(&self.body_sha256);
        out.resize(HEADER_FIELDS, 0);
        let sum: [u8; 32] = Sha256::digest(&out).into();
        out.extend_from_slice(&sum);
        out
    }

    fn decode(bytes: &[u8]) -> io::Result<Header> {
        if bytes.len() < HEADER_FIELDS + 32 || bytes[..8] != MAGIC {
            return Err(invalid("not a vendor generation (bad magic)"));
        }
        let sum: [u8; 32] = Sha256::digest(&bytes[..HEADER_FIELDS]).into();
        if bytes[HEADER_FIELDS..HEADER_FIELDS + 32] != sum {
            return Err(invalid("header checksum mismatch"));
        }
        let mut at = 8;
        let mut take = |n: usize| {
            let s = &bytes[at..at + n];
            at += n;
            s
        };
        let u32_at = |s: &[u8]| u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        let u64_at = |s: &[u8]| {
            let mut b = [0u8; 8];
            b.copy_from_slice(s);
            u64::from_le_bytes(b)
        };
        let version = u32_at(take(4));
        if version != FORMAT_VERSION {
            return Err(invalid(format!(
                "format version {version} (expected {FORMAT_VERSION})"
            )));
        }
        let mut h = Header {
            flags: u32_at(take(4)),
            ..Header::default()
        };
        h.epoch = u64_at(take(8));
        h.records = u64_at(take(8));
        h.created_unix = u64_at(take(8));
        h.file_len = u64_at(take(8));
        h.fingerprint.copy_from_slice(take(32));
        for t in 0..3 {
            h.rows[t] = u64_at(take(8));
            h.distinct[t] = u64_at(take(8));
            h.bits[t] = u32_at(take(4));
        }
        for s in 0..SECTIONS {
            h.sections[s] = (u64_at(take(8)), u64_at(take(8)));
        }
        h.body_sha256.copy_from_slice(take(32));
        Ok(h)
    }

    /// Every section inside the file, of the size its counts give.
    fn check(&self) -> io::Result<()> {
        if self.records >= u64::from(u32::MAX) {
            return Err(invalid("too many records"));
        }
        let expect = |s: usize, len: Option<u64>, what: &str| -> io::Result<()> {
            let (offset, actual) = self.sections[s];
            if Some(actual) != len
                || !offset.is_multiple_of(ALIGN)
                || offset < ALIGN
                || offset
                    .checked_add(actual)
                    .is_none_or(|end| end > self.file_len)
            {
                return Err(invalid(format!(
                    "{what} section has the wrong size or place"
                )));
            }
            Ok(())
        };
        // Entries vary in size: at least the smallest each, and every one named by a `u32`.
        let entries = self.sections[S_ENTRIES].1;
        if !entries.is_multiple_of(ENTRY_ALIGN as u64)
            || entries > u64::from(u32::MAX) * ENTRY_ALIGN as u64
            || self
                .records
                .checked_mul(MIN_ENTRY_BYTES)
                .is_none_or(|least| entries < least)
        {
            return Err(invalid("entries section has the wrong size"));
        }
        expect(S_ENTRIES, Some(entries), "entries")?;
        expect(S_ORDER, self.records.checked_mul(4), "order")?;
        for t in 0..3 {
            if !(1..=MAX_BUCKET_BITS).contains(&self.bits[t]) || self.distinct[t] > self.rows[t] {
                return Err(invalid("bad table shape"));
            }
            expect(s_rows(t), self.rows[t].checked_mul(ROW_LEN as u64), "rows")?;
            expect(
                s_buckets(t),
                Some(((1u64 << self.bits[t]) + 1) * 4),
                "buckets",
            )?;
        }
        let strings = self.sections[S_STRINGS].1;
        expect(S_STRINGS, Some(strings), "strings")
    }
}

// ---------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------

/// A file that counts and hashes what is written to it, written in [`FILE_CHUNK`] pieces.
struct HashingWriter {
    file: File,
    buf: Vec<u8>,
    hasher: Sha256,
    written: u64,
}

impl HashingWriter {
    /// A new file; its first page is left for the header (not part of the body's checksum).
    fn create(path: &Path) -> io::Result<HashingWriter> {
        let mut buf = Vec::with_capacity(FILE_CHUNK);
        buf.resize(ALIGN as usize, 0);
        Ok(HashingWriter {
            file: File::create(path)?,
            buf,
            hasher: Sha256::new(),
            written: ALIGN,
        })
    }

    fn write(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        self.hasher.update(bytes);
        self.written += bytes.len() as u64;
        while !bytes.is_empty() {
            let n = (FILE_CHUNK - self.buf.len()).min(bytes.len());
            self.buf.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.buf.len() == FILE_CHUNK {
                self.file.write_all(&self.buf)?;
                self.buf.clear();
            }
        }
        Ok(())
    }

    /// Writes what is buffered; returns the file and the body's checksum.
    fn finish(mut self) -> io::Result<(File, [u8; 32])> {
        self.file.write_all(&self.buf)?;
        Ok((self.file, self.hasher.finalize().into()))
    }

    fn pad(&mut self) -> io::Result<()> {
        let pad = self.written.next_multiple_of(ALIGN) - self.written;
        self.write(&vec![0u8; pad as usize])
    }

    /// Copies a work file in as a section; returns (offset, length).
    fn copy_section(&mut self, path: &Path) -> io::Result<(u64, u64)> {
        let offset = self.written;
        let mut input = File::open(path)?;
        let mut buf = vec![0u8; IO_BUF];
        loop {
            let n = input.read(&mut buf)?;
            if n == 0 {
                break;
            }
            self.write(&buf[..n])?;
        }
        let section = (offset, self.written - offset);
        self.pad()?;
        Ok(section)
    }
}

/// Writes one generation from verified records given in id order, in bounded memory.
pub(crate) struct Writer {
    dir: PathBuf,
    work: PathBuf,
    seq: u64,
    /// Held until the generation is renamed into place.
    _lock: File,
    entries: BufWriter<File>,
    entries_len: u64,
    /// Every entry's name, in scan order.
    order: BufWriter<File>,
    strings: BufWriter<File>,
    strings_len: u64,
    interned: HashMap<Box<str>, u64>,
    scratch: Vec<u8>,
    sha256: FixedSorter<{ 32 + RANK_LEN }>,
    sha1: FixedSorter<{ 20 + RANK_LEN }>,
    md5: FixedSorter<{ 16 + RANK_LEN }>,
    records: u32,
    last_id: Option<Box<str>>,
    ids_sorted: bool,
}

impl Writer {
    /// Starts a generation in `dir` (created if missing), waiting for any other writer of
    /// the directory; sorts spill when they pass `budget_bytes` together, less the file's
    /// write buffer.
    pub(crate) fn create(dir: &Path, budget_bytes: usize) -> io::Result<Writer> {
        let budget_bytes = budget_bytes
            .saturating_sub(FILE_CHUNK)
            .max(budget_bytes / 2);
        std::fs::create_dir_all(dir)?;
        let lock = lock_dir(dir, true)?.ok_or_else(|| io::Error::other("lock not taken"))?;
        remove_stale_work(dir)?;
        let seq = newest_seq(dir)? + 1;
        let work = dir.join(format!("{TMP_PREFIX}{seq:08}"));
        std::fs::create_dir(&work)?;
        let file = |name: &str| -> io::Result<BufWriter<File>> {
            Ok(BufWriter::with_capacity(
                IO_BUF,
                File::create(work.join(name))?,
            ))
        };
        Ok(Writer {
            entries: file("entries")?,
            entries_len: 0,
            order: file("order")?,
            strings: file("strings")?,
            strings_len: 0,
            interned: HashMap::new(),
            scratch: Vec::new(),
            sha256: FixedSorter::new(&work, "sha256", budget_bytes / 2),
            sha1: FixedSorter::new(&work, "sha1", budget_bytes / 4),
            md5: FixedSorter::new(&work, "md5", budget_bytes / 4),
            records: 0,
            last_id: None,
            ids_sorted: true,
            dir: dir.to_path_buf(),
            work,
            seq,
            _lock: lock,
        })
    }

    fn string(&mut self, s: &str) -> io::Result<u64> {
        let at = self.strings_len;
        self.scratch.clear();
        put_varint(&mut self.scratch, s.len() as u64);
        self.scratch.extend_from_slice(s.as_bytes());
        self.strings.write_all(&self.scratch)?;
        self.strings_len += self.scratch.len() as u64;
        Ok(at)
    }

    fn interned(&mut self, s: &str) -> io::Result<u64> {
        if let Some(&at) = self.interned.get(s) {
            return Ok(at);
        }
        let at = self.string(s)?;
        if self.interned.len() < MAX_INTERNED {
            self.interned.insert(s.into(), at);
        }
        Ok(at)
    }

    /// Adds a record (verified: the caller leaves out those failing their HMAC). Records
    /// come in id order; one whose SHA-256 does not decode names nothing and is left out.
    pub(crate) fn push(&mut self, record: &HashRecord) -> io::Result<()> {
        let r = &record.record;
        let Some(sha256) = decode::<32>(&r.hash_sha256) else {
            return Ok(());
        };
        let sha1 = r.hash_sha1.as_deref().and_then(decode::<20>);
        let md5 = r.hash_md5.as_deref().and_then(decode::<16>);
        if self.records == u32::MAX - 1 {
            return Err(io::Error::other("too many records for one generation"));
        }
        let handle = u32::try_from(self.entries_len / ENTRY_ALIGN as u64)
            .ok()
            .filter(|&h| h < u32::MAX)
            .ok_or_else(|| io::Error::other("too many records for one generation"))?;
        self.records += 1;
        if let Some(last) = &self.last_id
            && last.as_bytes() >= record.id.as_bytes()
        {
            self.ids_sorted = false;
        }
        self.last_id = Some(record.id.as_str().into());

        let current = record.status == RecordStatus::Current;
        let valid_from = record.valid_from.timestamp_micros();
        let mut entry = [0u8; E_NAME];
        entry[..32].copy_from_slice(&sha256);
        let mut flags = 0u8;
        if let Some(d) = sha1 {
            entry[E_SHA1..E_SHA1 + 20].copy_from_slice(&d);
            flags |= F_SHA1;
        }
        if let Some(d) = md5 {
            entry[E_MD5..E_MD5 + 16].copy_from_slice(&d);
            flags |= F_MD5;
        }
        if current {
            flags |= F_CURRENT;
        }
        if let Some(size) = r.size {
            entry[E_SIZE..E_SIZE + 8].copy_from_slice(&size.to_le_bytes());
            flags |= F_SIZE;
        }
        let hex_id = hex_id(&record.id);
        if hex_id.is_some() {
            flags |= F_ID_HEX;
        }
        entry[E_FLAGS] = flags;
        entry[E_PLATFORM] = Platform::ALL
            .iter()
            .position(|p| *p == r.platform)
            .unwrap_or(0) as u8;
        let vendor = self.interned(&r.vendor)?;
        let version = self.interned(&r.version)?;
        put_u40(&mut entry[E_VENDOR..], vendor);
        put_u40(&mut entry[E_VERSION..], version);
        let out = &mut self.scratch;
        out.clear();
        out.extend_from_slice(&entry);
        put_varint(out, r.executable_name.len() as u64);
        out.extend_from_slice(r.executable_name.as_bytes());
        out.extend_from_slice(&valid_from.to_le_bytes());
        match hex_id {
            Some(id) => out.extend_from_slice(&id),
            None => {
                put_varint(out, record.id.len() as u64);
                out.extend_from_slice(record.id.as_bytes());
            }
        }
        out.resize(out.len().next_multiple_of(ENTRY_ALIGN), 0);
        self.entries.write_all(out)?;
        self.entries_len += out.len() as u64;
        self.order.write_all(&handle.to_le_bytes())?;

        let rank = rank_bytes(current, valid_from);
        let mut tail = [0u8; RANK_LEN];
        tail[..9].copy_from_slice(&rank);
        // Entries are written in scan order: among equals the first scanned ranks first.
        tail[9..].copy_from_slice(&handle.to_be_bytes());
        self.sha256.push(row_key(&sha256, &tail))?;
        if let Some(d) = sha1 {
            self.sha1.push(row_key(&d, &tail))?;
        }
        if let Some(d) = md5 {
            self.md5.push(row_key(&d, &tail))?;
        }
        Ok(())
    }

    /// Drops the work files of a merge that will not finish.
    pub(crate) fn abandon(self) {
        let work = self.work.clone();
        drop(self);
        let _ = std::fs::remove_dir_all(work);
    }

    /// Writes the file, fsyncs it and renames it into place; returns its path. `epoch` is
    /// the records epoch read before the scan, `fingerprint` the store's.
    pub(crate) fn finish(mut self, epoch: u64, fingerprint: [u8; 32]) -> io::Result<PathBuf> {
        self.entries.flush()?;
        self.order.flush()?;
        self.strings.flush()?;
        let tmp = self.work.join("generation");
        let mut out = HashingWriter::create(&tmp)?;
        let mut header = Header {
            flags: if self.ids_sorted { H_IDS_SORTED } else { 0 },
            epoch,
            records: u64::from(self.records),
            created_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            fingerprint,
            ..Header::default()
        };
        header.sections[S_ENTRIES] = out.copy_section(&self.work.join("entries"))?;
        write_table(&mut out, &mut header, &self.work, 0, self.sha256)?;
        write_table(&mut out, &mut header, &self.work, 1, self.sha1)?;
        write_table(&mut out, &mut header, &self.work, 2, self.md5)?;
        header.sections[S_STRINGS] = out.copy_section(&self.work.join("strings"))?;
        header.sections[S_ORDER] = out.copy_section(&self.work.join("order"))?;
        header.file_len = out.written;
        let (mut file, body_sha256) = out.finish()?;
        header.body_sha256 = body_sha256;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&header.encode())?;
        file.sync_all()?;
        drop(file);
        let path = self
            .dir
            .join(format!("{GEN_PREFIX}{:08}{GEN_SUFFIX}", self.seq));
        std::fs::rename(&tmp, &path)?;
        sync_dir(&self.dir)?;
        let _ = std::fs::remove_dir_all(&self.work);
        Ok(path)
    }
}

fn row_key<const W: usize>(digest: &[u8], tail: &[u8; RANK_LEN]) -> [u8; W] {
    let mut rec = [0u8; W];
    rec[..digest.len()].copy_from_slice(digest);
    rec[digest.len()..].copy_from_slice(tail);
    rec
}

/// Streams a sorted table (by full digest, then rank) into the file as rows (the digest's
/// first bytes, entry name), then its buckets.
fn write_table<const W: usize>(
    out: &mut HashingWriter,
    header: &mut Header,
    work: &Path,
    t: usize,
    sorter: FixedSorter<W>,
) -> io::Result<()> {
    let digest_len = DIGEST_LEN[t];
    let rows = sorter.len();
    let bits = bucket_bits(rows);
    // Bucket starts as the sorted rows pass (their buckets only rise), to a work file: no
    // table of them in memory while the sort merges.
    let buckets_path = work.join(format!("buckets-{t}"));
    let mut buckets = BufWriter::with_capacity(IO_BUF, File::create(&buckets_path)?);
    let mut next_bucket = 0u64;
    let mut written_rows = 0u32;
    let offset = out.written;
    let mut distinct = 0u64;
    let mut last = [0u8; 32];
    let mut row = [0u8; ROW_LEN];
    sorter.finish(|rec| {
        let digest = &rec[..digest_len];
        if distinct == 0 || last[..digest_len] != *digest {
            distinct += 1;
            last[..digest_len].copy_from_slice(digest);
        }
        row[..ROW_KEY].copy_from_slice(&digest[..ROW_KEY]);
        let index = &rec[W - 4..];
        let index = u32::from_be_bytes([index[0], index[1], index[2], index[3]]);
        row[ROW_KEY..].copy_from_slice(&index.to_le_bytes());
        let bucket = prefix(digest) >> (64 - bits);
        while next_bucket <= bucket {
            buckets.write_all(&written_rows.to_le_bytes())?;
            next_bucket += 1;
        }
        written_rows += 1;
        out.write(&row)
    })?;
    while next_bucket <= 1 << bits {
        buckets.write_all(&written_rows.to_le_bytes())?;
        next_bucket += 1;
    }
    buckets.flush()?;
    drop(buckets);
    header.sections[s_rows(t)] = (offset, out.written - offset);
    out.pad()?;
    header.rows[t] = rows;
    header.distinct[t] = distinct;
    header.bits[t] = bits;
    header.sections[s_buckets(t)] = out.copy_section(&buckets_path)?;
    std::fs::remove_file(&buckets_path)
}

fn decode<const N: usize>(hex: &str) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    (hex.len() == 2 * N && model::hash::decode_hex(hex.as_bytes(), &mut out)).then_some(out)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Takes the directory's writer lock (`wait`: until free); `None` when busy and not waiting.
fn lock_dir(dir: &Path, wait: bool) -> io::Result<Option<File>> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))?;
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let op = if wait {
            libc::LOCK_EX
        } else {
            libc::LOCK_EX | libc::LOCK_NB
        };
        // SAFETY: flock on a descriptor this function owns; the lock goes with the file.
        if unsafe { libc::flock(file.as_raw_fd(), op) } != 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return Ok(None);
            }
            return Err(e);
        }
    }
    Ok(Some(file))
}

/// Removes the work directories of merges that died (called with the lock held: no live
/// writer has one).
fn remove_stale_work(dir: &Path) -> io::Result<usize> {
    let mut removed = 0;
    for item in std::fs::read_dir(dir)? {
        let item = item?;
        if item.file_name().to_string_lossy().starts_with(TMP_PREFIX) {
            let path = item.path();
            let gone = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            match gone {
                Ok(()) => removed += 1,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot remove a crashed merge's files")
                }
            }
        }
    }
    Ok(removed)
}

/// Removes crashed merges' work files unless a merge is running now; how many.
pub(crate) fn clean(dir: &Path) -> io::Result<usize> {
    if !dir.exists() {
        return Ok(0);
    }
    match lock_dir(dir, false)? {
        Some(_lock) => remove_stale_work(dir),
        None => Ok(0),
    }
}

/// The generations in `dir`, newest first.
pub(crate) fn generations(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut found = Vec::new();
    if !dir.exists() {
        return Ok(found);
    }
    for item in std::fs::read_dir(dir)? {
        let item = item?;
        let name = item.file_name().to_string_lossy().into_owned();
        if let Some(seq) = name
            .strip_prefix(GEN_PREFIX)
            .and_then(|s| s.strip_suffix(GEN_SUFFIX))
            .and_then(|s| s.parse::<u64>().ok())
        {
            found.push((seq, item.path()));
        }
    }
    found.sort_by_key(|g| Reverse(g.0));
    Ok(found)
}

fn newest_seq(dir: &Path) -> io::Result<u64> {
    Ok(generations(dir)?.first().map_or(0, |g| g.0))
}

/// Deletes the generations older than `keep` (a mapping of one stays valid after the file
/// goes).
pub(crate) fn remove_older(dir: &Path, keep: &Path) {
    let Ok(all) = generations(dir) else { return };
    let Some(keep_seq) = all.iter().find(|g| g.1 == keep).map(|g| g.0) else {
        return;
    };
    for (seq, path) in all {
        if seq < keep_seq
            && let Err(e) = std::fs::remove_file(&path)
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove an old vendor generation");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

struct Table {
    rows: (usize, usize),
    /// The bucket starts (checked at open) as the corpus keeps its own: about a byte a
    /// bucket, so that a lookup's first read stays in the CPU cache.
    index: BucketIndex,
    window: usize,
}

/// One generation, mapped read-only.
pub struct Generation {
    path: PathBuf,
    /// Kept open, so that the checksum can be verified after the file was replaced.
    file: File,
    header: Header,
    map: Mmap,
    entries: (usize, usize),
    strings: (usize, usize),
    order: (usize, usize),
    tables: [Table; 3],
}

impl std::fmt::Debug for Generation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generation")
            .field("path", &self.path)
            .field("records", &self.header.records)
            .field("epoch", &self.header.epoch)
            .finish()
    }
}

impl Generation {
    /// Opens a generation file; with `verify`, reads it all once to check its checksum.
    /// A file that is truncated, damaged or of another format is an `InvalidData` error.
    pub fn open(path: &Path, verify: bool) -> io::Result<Generation> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        let mut head = vec![0u8; HEADER_FIELDS + 32];
        if len < ALIGN {
            return Err(invalid("truncated header"));
        }
        file.read_exact(&mut head)?;
        let header = Header::decode(&head)?;
        if header.file_len != len {
            return Err(invalid(format!(
                "{len} bytes, the header says {}",
                header.file_len
            )));
        }
        header.check()?;
        if verify {
            verify_body(&file, &header)?;
        }
        // SAFETY: generation files are never written after they are renamed into place
        // (a merge writes a new file), so the mapping stays valid; deleting the file does
        // not invalidate an existing mapping on Linux.
        let map = unsafe { Mmap::map(&file)? };
        // Lookups read a few bytes at random: read-ahead would only waste memory.
        let _ = map.advise(memmap2::Advice::Random);
        // Where the kernel can back file pages with huge pages, fewer TLB misses.
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        let range = |s: usize| -> (usize, usize) {
            let (offset, len) = header.sections[s];
            (offset as usize, len as usize)
        };
        let mut tables = Vec::with_capacity(3);
        for t in 0..3 {
            let (at, blen) = range(s_buckets(t));
            let bytes = &map[at..at + blen];
            // SAFETY: any four bytes are a valid `u32`; `align_to` gives only the aligned
            // middle, and the section starts on a page boundary, so it is all of it.
            let (head, aligned, tail) = unsafe { bytes.align_to::<u32>() };
            let copied: Vec<u32>;
            let starts: &[u32] =
                if cfg!(target_endian = "little") && head.is_empty() && tail.is_empty() {
                    aligned
                } else {
                    copied = bytes
                        .chunks_exact(4)
                        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect();
                    &copied
                };
            if starts.first() != Some(&0)
                || starts.last().map(|&s| u64::from(s)) != Some(header.rows[t])
                || starts.windows(2).any(|w| w[0] > w[1])
            {
                return Err(invalid("bucket table does not cover the rows"));
            }
            let per_bucket = header.rows[t] as f64 / (1u64 << header.bits[t]) as f64;
            let index = BucketIndex::new(path, starts, header.bits[t])
                .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e.to_string()))?;
            tables.push(Table {
                rows: range(s_rows(t)),
                index,
                window: (WINDOW * per_bucket.sqrt()).ceil() as usize + 1,
            });
        }
        let tables: [Table; 3] = tables
            .try_into()
            .map_err(|_| invalid("three tables expected"))?;
        Ok(Generation {
            path: path.to_path_buf(),
            file,
            entries: range(S_ENTRIES),
            strings: range(S_STRINGS),
            order: range(S_ORDER),
            header,
            map,
            tables,
        })
    }

    /// Reads the whole body once (with `read`, so its pages are not mapped into this
    /// process) and checks it against the header's checksum.
    pub fn verify(&self) -> io::Result<()> {
        verify_body(&self.file, &self.header)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The records epoch the scan it was written from started at.
    pub fn epoch(&self) -> u64 {
        self.header.epoch
    }

    pub(crate) fn fingerprint(&self) -> [u8; 32] {
        self.header.fingerprint
    }

    /// Verified records in it.
    pub fn records(&self) -> u64 {
        self.header.records
    }

    /// Distinct digests of the three kinds.
    pub fn hashes(&self) -> u64 {
        self.header.distinct.iter().sum()
    }

    /// The file's size in bytes.
    pub fn bytes(&self) -> u64 {
        self.header.file_len
    }

    fn rows(&self, t: usize) -> &[u8] {
        let (at, len) = self.tables[t].rows;
        &self.map[at..at + len]
    }

    fn key_at(&self, t: usize, i: usize) -> Option<&[u8]> {
        let at = i.checked_mul(ROW_LEN)?;
        self.rows(t).get(at..at + ROW_KEY)
    }

    fn pointer(&self, t: usize, i: usize) -> Option<u32> {
        let at = i.checked_mul(ROW_LEN)? + ROW_KEY;
        let p = self.rows(t).get(at..at + 4)?;
        Some(u32::from_le_bytes([p[0], p[1], p[2], p[3]]))
    }

    /// Entry `e`'s digest of table `t`'s kind, if it has one.
    fn entry_digest(&self, t: usize, e: u32) -> Option<&[u8]> {
        let entry = self.entry(e)?;
        let has = [
            true,
            entry[E_FLAGS] & F_SHA1 != 0,
            entry[E_FLAGS] & F_MD5 != 0,
        ];
        has[t].then(|| &entry[E_DIGEST[t]..E_DIGEST[t] + DIGEST_LEN[t]])
    }

    /// The first of the rows from `row` on sharing `digest`'s key whose entry holds the
    /// whole digest: rows of one digest are together, best first.
    fn confirm(&self, t: usize, digest: &[u8], row: usize) -> Option<u32> {
        let key = &digest[..ROW_KEY];
        (row..)
            .take_while(|&i| self.key_at(t, i) == Some(key))
            .filter_map(|i| self.pointer(t, i))
            .find(|&e| self.entry_digest(t, e) == Some(digest))
    }

    /// The key's bucket as a row range, and where in it the key would sit if the keys
    /// were evenly spread.
    #[inline]
    fn locate(&self, t: usize, prefix: u64) -> Option<(usize, usize, usize)> {
        self.tables[t].index.locate(prefix)
    }

    #[inline]
    fn window(&self, t: usize, lo: usize, hi: usize, guess: usize) -> (usize, usize) {
        let w = self.tables[t].window;
        (
            guess.saturating_sub(w).max(lo),
            guess.saturating_add(w + 1).min(hi),
        )
    }

    /// The first row of `key` in bucket rows `lo..hi`, scanning the window `a..b` first.
    fn first_row(
        &self,
        t: usize,
        key: &[u8],
        (lo, hi, a, b): (usize, usize, usize, usize),
    ) -> Option<usize> {
        let head = prefix(key);
        for i in a..b {
            let row = self.key_at(t, i)?;
            match prefix(row).cmp(&head).then_with(|| row.cmp(key)) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal if i == a && a > lo => {
                    // Rows of the same digest may start before the window.
                    return self.lower_bound(t, key, lo, a + 1);
                }
                std::cmp::Ordering::Equal => return Some(i),
                std::cmp::Ordering::Greater if i == a && a > lo => {
                    return self.lower_bound(t, key, lo, a);
                }
                std::cmp::Ordering::Greater => return None,
            }
        }
        if b < hi {
            self.lower_bound(t, key, b, hi)
        } else {
            None
        }
    }

    /// The first row of `key` among the sorted rows `lo..hi`.
    fn lower_bound(&self, t: usize, key: &[u8], mut lo: usize, mut hi: usize) -> Option<usize> {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.key_at(t, mid)? < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (self.key_at(t, lo) == Some(key)).then_some(lo)
    }

    fn span(&self, t: usize, key: &[u8]) -> Option<(usize, usize, usize, usize)> {
        let (lo, hi, guess) = self.locate(t, prefix(key))?;
        let (a, b) = self.window(t, lo, hi, guess);
        Some((lo, hi, a, b))
    }

    /// Every entry naming the digest, best first.
    pub(crate) fn naming(&self, key: &Key) -> Vec<u32> {
        let t = table_of(key.0);
        let digest = &key.1[..DIGEST_LEN[t]];
        let row_key = &digest[..ROW_KEY];
        let Some(first) = self
            .span(t, row_key)
            .and_then(|span| self.first_row(t, row_key, span))
        else {
            return Vec::new();
        };
        (first..)
            .take_while(|&i| self.key_at(t, i) == Some(row_key))
            .filter_map(|i| self.pointer(t, i))
            .filter(|&e| self.entry_digest(t, e) == Some(digest))
            .collect()
    }

    /// Every distinct digest of `algo`'s table, in ascending byte order, each with whether
    /// its first row (its best record: current ones rank first) is a current record: the
    /// current records' digests are those marked `true`. A walk over the mapped rows that
    /// reads each row's entry (for the whole digest and its flags) and holds nothing per
    /// digest.
    pub fn distinct_digests(&self, algo: HashAlgo) -> impl Iterator<Item = (&[u8], bool)> + '_ {
        let t = table_of(algo);
        let mut last: Option<&[u8]> = None;
        self.rows(t).chunks_exact(ROW_LEN).filter_map(move |row| {
            let e = u32::from_le_bytes(row[ROW_KEY..].try_into().ok()?);
            let digest = self.entry_digest(t, e)?;
            if last == Some(digest) {
                return None;
            }
            last = Some(digest);
            Some((digest, self.rank(e).0))
        })
    }

    /// The entry each hash names, in order, overlapping their memory accesses: each step
    /// (bucket start, rows, entry, strings) is prefetched for a round of hashes before any
    /// is read.
    pub fn get_batch(&self, batch: &[HashValue]) -> Vec<Option<u32>> {
        let mut out = Vec::with_capacity(batch.len());
        for round in batch.chunks(ROUND) {
            let mut prefixes = [0u64; ROUND];
            for (i, h) in round.iter().enumerate() {
                let t = table_of(h.algo());
                prefixes[i] = prefix(h.digest());
                self.tables[t].index.prefetch(prefixes[i]);
            }
            let mut spans = [None; ROUND];
            for (i, h) in round.iter().enumerate() {
                let t = table_of(h.algo());
                if let Some((lo, hi, guess)) = self.locate(t, prefixes[i]) {
                    let (a, b) = self.window(t, lo, hi, guess);
                    prefetch_range(self.rows(t), a * ROW_LEN, b * ROW_LEN);
                    spans[i] = Some((lo, hi, a, b));
                }
            }
            let mut found = [u32::MAX; ROUND];
            let mut rows = [0usize; ROUND];
            let entries = self.entries_bytes();
            for (i, h) in round.iter().enumerate() {
                let t = table_of(h.algo());
                if let Some((row, e)) = spans[i]
                    .and_then(|span| self.first_row(t, &h.digest()[..ROW_KEY], span))
                    .and_then(|row| Some((row, self.pointer(t, row)?)))
                {
                    (found[i], rows[i]) = (e, row);
                    let at = e as usize * ENTRY_ALIGN;
                    prefetch_range(entries, at, at + ENTRY_PREFETCH);
                }
            }
            // The entry confirms the whole digest; vendors and versions are interned, so
            // mostly cached already.
            let strings = self.strings_bytes();
            for (i, h) in round.iter().enumerate() {
                if found[i] == u32::MAX {
                    continue;
                }
                let t = table_of(h.algo());
                if self.entry_digest(t, found[i]) != Some(h.digest()) {
                    found[i] = self.confirm(t, h.digest(), rows[i]).unwrap_or(u32::MAX);
                }
                if let Some(entry) = self.entry(found[i]) {
                    prefetch(strings, get_u40(&entry[E_VENDOR..]) as usize);
                    prefetch(strings, get_u40(&entry[E_VERSION..]) as usize);
                }
            }
            out.extend(
                found
                    .iter()
                    .take(round.len())
                    .map(|&e| (e != u32::MAX).then_some(e)),
            );
        }
        out
    }

    fn entries_bytes(&self) -> &[u8] {
        &self.map[self.entries.0..self.entries.0 + self.entries.1]
    }

    fn strings_bytes(&self) -> &[u8] {
        &self.map[self.strings.0..self.strings.0 + self.strings.1]
    }

    /// Entry `e` and whatever follows it in the section; `None` unless its fixed part and
    /// name's length are there.
    fn entry(&self, e: u32) -> Option<&[u8]> {
        let at = (e as usize).checked_mul(ENTRY_ALIGN)?;
        self.entries_bytes().get(at..).filter(|b| b.len() > E_NAME)
    }

    /// A string of the strings section; `None` when damaged.
    fn string(&self, offset: u64) -> Option<&str> {
        read_str(self.strings_bytes(), usize::try_from(offset).ok()?).map(|(s, _)| s)
    }

    /// Entry `e`'s `valid_from` and record id, which follow its name.
    fn tail(&self, e: u32) -> Option<(i64, RecordId<'_>)> {
        let entry = self.entry(e)?;
        let (_, at) = read_str(entry, E_NAME)?;
        let valid_from = i64::from_le_bytes(entry.get(at..at + 8)?.try_into().ok()?);
        let at = at + 8;
        let id = if entry[E_FLAGS] & F_ID_HEX != 0 {
            let mut hex = [0u8; 32];
            for (pair, b) in hex.chunks_exact_mut(2).zip(entry.get(at..at + 16)?) {
                pair[0] = HEX_DIGITS[usize::from(b >> 4)];
                pair[1] = HEX_DIGITS[usize::from(b & 0x0f)];
            }
            RecordId::Hex(hex)
        } else {
            RecordId::Text(read_str(entry, at)?.0)
        };
        Some((valid_from, id))
    }

    /// The record id of entry `e` ("" when damaged).
    pub(crate) fn id(&self, e: u32) -> RecordId<'_> {
        self.tail(e).map_or(RecordId::Text(""), |(_, id)| id)
    }

    /// Current first, then the newest.
    pub(crate) fn rank(&self, e: u32) -> (bool, i64) {
        match (self.entry(e), self.tail(e)) {
            (Some(entry), Some((valid_from, _))) => (entry[E_FLAGS] & F_CURRENT != 0, valid_from),
            _ => (false, i64::MIN),
        }
    }

    fn digests(entry: &[u8]) -> DigestBytes {
        let mut sha256 = [0u8; 32];
        sha256.copy_from_slice(&entry[..32]);
        let flags = entry[E_FLAGS];
        DigestBytes {
            sha256,
            sha1: (flags & F_SHA1 != 0)
                .then(|| entry[E_SHA1..E_SHA1 + 20].try_into().unwrap_or([0; 20])),
            md5: (flags & F_MD5 != 0)
                .then(|| entry[E_MD5..E_MD5 + 16].try_into().unwrap_or([0; 16])),
        }
    }

    /// The hashes entry `e` names.
    pub(crate) fn keys(&self, e: u32) -> Vec<Key> {
        let Some(entry) = self.entry(e) else {
            return Vec::new();
        };
        let d = Self::digests(entry);
        let mut keys = vec![key_of(HashAlgo::Sha256, &d.sha256)];
        keys.extend(d.sha1.map(|s| key_of(HashAlgo::Sha1, &s)));
        keys.extend(d.md5.map(|m| key_of(HashAlgo::Md5, &m)));
        keys
    }

    /// What a lookup reports of entry `e`; `None` when the file is damaged there.
    pub fn matched(&self, e: u32) -> Option<VendorMatch<'_>> {
        let entry = self.entry(e)?;
        let flags = entry[E_FLAGS];
        Some(VendorMatch {
            vendor: self.string(get_u40(&entry[E_VENDOR..]))?,
            executable_name: read_str(entry, E_NAME)?.0,
            version: self.string(get_u40(&entry[E_VERSION..]))?,
            platform: *Platform::ALL.get(usize::from(entry[E_PLATFORM]))?,
            current: flags & F_CURRENT != 0,
            digests: Self::digests(entry),
            size: (flags & F_SIZE != 0).then(|| {
                u64::from_le_bytes(entry[E_SIZE..E_SIZE + 8].try_into().unwrap_or([0; 8]))
            }),
        })
    }

    /// The entry of the `i`-th record scanned.
    fn ordered(&self, i: u32) -> Option<u32> {
        let at = self.order.0 + i as usize * 4;
        let b = self
            .map
            .get(at..(at + 4).min(self.order.0 + self.order.1))?;
        Some(u32::from_le_bytes(b.try_into().ok()?))
    }

    /// The entry of record `id`: by bisection when the scan gave ids in byte order,
    /// otherwise by a linear search (only for a record that now fails its HMAC).
    pub(crate) fn entry_of_id(&self, id: &str) -> Option<u32> {
        let n = self.header.records as u32;
        if self.header.flags & H_IDS_SORTED != 0 {
            let (mut lo, mut hi) = (0u32, n);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                let e = self.ordered(mid)?;
                match self.id(e).as_str().as_bytes().cmp(id.as_bytes()) {
                    std::cmp::Ordering::Less => lo = mid + 1,
                    std::cmp::Ordering::Greater => hi = mid,
                    std::cmp::Ordering::Equal => return Some(e),
                }
            }
            return None;
        }
        (0..n)
            .filter_map(|i| self.ordered(i))
            .find(|&e| self.id(e).as_str() == id)
    }
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// A record id as an entry holds it: 32 hex digits kept as bytes, or the text.
pub(crate) enum RecordId<'a> {
    Hex([u8; 32]),
    Text(&'a str),
}

impl RecordId<'_> {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            RecordId::Hex(hex) => std::str::from_utf8(hex).unwrap_or(""),
            RecordId::Text(text) => text,
        }
    }
}

/// The LEB128-prefixed UTF-8 string at `bytes[at..]` and where it ends; `None` when damaged.
fn read_str(bytes: &[u8], at: usize) -> Option<(&str, usize)> {
    let (len, used) = get_varint(bytes.get(at..)?)?;
    let start = at.checked_add(used)?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    Some((std::str::from_utf8(bytes.get(start..end)?).ok()?, end))
}

fn verify_body(file: &File, header: &Header) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = ALIGN;
    while at < header.file_len {
        let n = file.read_at(&mut buf, at)?;
        if n == 0 {
            return Err(invalid("truncated"));
        }
        hasher.update(&buf[..n]);
        at += n as u64;
    }
    if <[u8; 32]>::from(hasher.finalize()) != header.body_sha256 {
        return Err(invalid("checksum mismatch"));
    }
    Ok(())
}

/// Opens the newest generation in `dir` that opens and checks; refused ones are logged
/// and left for the next merge to remove.
pub(crate) fn open_newest(dir: &Path, verify: bool) -> Option<Generation> {
    let all = match generations(dir) {
        Ok(all) => all,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot list vendor generations");
            return None;
        }
    };
    for (_, path) in all {
        match Generation::open(&path, verify) {
            Ok(g) => return Some(g),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "vendor generation refused")
            }
        }
    }
    None
}

/// Writes a generation from `records` (verified ones kept; given in id order, as a store
/// scan gives them) into `dir`, as a merge does: for tests, tools and benchmarks.
pub fn write_records(
    dir: &Path,
    records: impl IntoIterator<Item = impl std::borrow::Borrow<HashRecord>>,
    epoch: u64,
    budget_bytes: usize,
) -> io::Result<PathBuf> {
    let mut writer = Writer::create(dir, budget_bytes)?;
    let mut first = None;
    for r in records {
        let r = r.borrow();
        if first.is_none() {
            first = Some(r.id.clone());
        }
        if r.integrity_ok {
            writer.push(r)?;
        }
    }
    writer.finish(epoch, fingerprint(first.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_damage() {
        let mut h = Header {
            flags: 1,
            epoch: 7,
            records: 3,
            file_len: 1 << 20,
            ..Header::default()
        };
        h.sections[0] = (4096, 318);
        h.fingerprint[5] = 9;
        let bytes = h.encode();
        assert_eq!(Header::decode(&bytes).unwrap(), h);
        let mut bad = bytes.clone();
        bad[20] ^= 1;
        assert!(
            Header::decode(&bad)
                .unwrap_err()
                .to_string()
                .contains("checksum")
        );
        let mut other = bytes;
        other[0] = b'X';
        assert!(
            Header::decode(&other)
                .unwrap_err()
                .to_string()
                .contains("magic")
        );
    }

    fn record(n: u64, sha256: String, sha1: Option<String>, current: bool, day: i64) -> HashRecord {
        use chrono::TimeZone;
        let at = chrono::Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
            + chrono::Duration::days(day);
        HashRecord {
            id: format!("{n:032x}"),
            record: model::NewRecord {
                vendor: format!("Vendor {}", n % 5),
                executable_name: format!("file{n}.bin"),
                version: format!("{}.0", n % 7),
                platform: Platform::ALL[(n % 5) as usize],
                arch: model::Arch::Amd64,
                hash_sha256: sha256,
                hash_sha1: sha1,
                hash_md5: None,
                source_url: String::new(),
                download_verified: true,
                sig_signer: None,
                sig_issuer: None,
                sig_serial: None,
                sig_thumbprint: None,
                size: n.is_multiple_of(3).then_some(n * 10),
            },
            family: String::new(),
            status: if current {
                RecordStatus::Current
            } else {
                RecordStatus::Superseded
            },
            valid_from: at,
            valid_until: None,
            added_at: at,
            cert_revoked_at: None,
            integrity_ok: !n.is_multiple_of(17),
        }
    }

    fn hex(n: u64, len: usize) -> String {
        let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut out = String::new();
        while out.len() < len {
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            out.push_str(&format!("{:016x}", z ^ (z >> 31)));
        }
        out.truncate(len);
        out
    }

    /// Thousands of records, a tenth of them sharing a digest with others, written with
    /// sorts small enough to spill: every digest answers as the database would, and a
    /// damaged or truncated copy is refused.
    #[test]
    fn a_generation_round_trips_and_refuses_damage() {
        let records: Vec<HashRecord> = (0..6000u64)
            .map(|n| {
                let shared = n.is_multiple_of(10);
                let sha256 = hex(if shared { n % 40 } else { 1000 + n }, 64);
                let sha1 = (!n.is_multiple_of(4))
                    .then(|| hex(if shared { n % 30 } else { 90_000 + n }, 40));
                record(n, sha256, sha1, n % 3 != 1, (n % 11) as i64)
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = write_records(dir.path(), &records, 42, 4096).unwrap();
        let g = Generation::open(&path, true).unwrap();
        assert_eq!(g.epoch(), 42);
        assert_eq!(g.fingerprint(), fingerprint(Some(&records[0].id)));
        let verified = records.iter().filter(|r| r.integrity_ok).count() as u64;
        assert_eq!(g.records(), verified);
        let mut batch: Vec<HashValue> = Vec::new();
        for r in &records {
            batch.push(HashValue::parse(&r.record.hash_sha256).unwrap());
            if let Some(h) = &r.record.hash_sha1 {
                batch.push(HashValue::parse(h).unwrap());
            }
        }
        batch.push(HashValue::parse(&hex(5, 32)).unwrap());
        batch.push(HashValue::parse(&hex(7_777_777, 64)).unwrap());
        let found = g.get_batch(&batch);
        for (h, e) in batch.iter().zip(found) {
            let want = crate::vendor_index::best_match(h, &records);
            assert_eq!(e.and_then(|e| g.matched(e)), want, "{}", h.as_str());
            let naming = g.naming(&key_of(h.algo(), h.digest()));
            assert_eq!(naming.first().copied(), e);
        }
        // Every verified record is found by its id, with its rank; the others are not.
        for r in &records {
            let e = g.entry_of_id(&r.id);
            assert_eq!(e.is_some(), r.integrity_ok, "{}", r.id);
            if let Some(e) = e {
                assert_eq!(g.id(e).as_str(), r.id);
                assert_eq!(
                    g.rank(e),
                    (
                        r.status == RecordStatus::Current,
                        r.valid_from.timestamp_micros()
                    )
                );
            }
        }
        let bytes = std::fs::read(&path).unwrap();
        let damaged = dir.path().join("damaged.gen");
        let mut copy = bytes.clone();
        copy[bytes.len() - 10] ^= 1;
        std::fs::write(&damaged, &copy).unwrap();
        let e = Generation::open(&damaged, true).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        std::fs::write(&damaged, &bytes[..bytes.len() - 4096]).unwrap();
        let e = Generation::open(&damaged, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        std::fs::write(&damaged, &bytes[..100]).unwrap();
        assert!(Generation::open(&damaged, false).is_err());
    }

    /// Ids that are not 32 lowercase hex digits, out of byte order: kept as text, found
    /// by a linear search, and the names long and short as written.
    #[test]
    fn text_ids_and_long_names_round_trip() {
        let ids = ["r-2", "ABCDEF0123456789ABCDEF0123456789", "", "r-1"];
        let records: Vec<HashRecord> = ids
            .iter()
            .enumerate()
            .map(|(n, id)| {
                let mut r = record(n as u64 + 1, hex(n as u64, 64), None, true, 1);
                r.id = (*id).to_string();
                r.integrity_ok = true;
                r.record.executable_name = "long/".repeat(n * 40) + "x.bin";
                r
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = write_records(dir.path(), &records, 1, 1 << 16).unwrap();
        let g = Generation::open(&path, true).unwrap();
        for r in &records {
            let e = g.entry_of_id(&r.id).unwrap();
            assert_eq!(g.id(e).as_str(), r.id);
            let m = g.matched(e).unwrap();
            assert_eq!(m.executable_name, r.record.executable_name);
            assert_eq!(m.vendor, r.record.vendor);
            assert_eq!(m.version, r.record.version);
        }
        assert_eq!(g.entry_of_id("r-3"), None);
    }

    /// A file of the previous format (its header otherwise whole) is refused by its version.
    #[test]
    fn an_older_format_is_refused() {
        let records: Vec<HashRecord> = (1..20u64)
            .map(|n| record(n, hex(n, 64), None, true, 1))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = write_records(dir.path(), &records, 1, 1 << 16).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        let sum: [u8; 32] = Sha256::digest(&bytes[..HEADER_FIELDS]).into();
        bytes[HEADER_FIELDS..HEADER_FIELDS + 32].copy_from_slice(&sum);
        std::fs::write(&path, &bytes).unwrap();
        let e = Generation::open(&path, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("format version 1"), "{e}");
    }

    #[test]
    fn rank_bytes_sort_the_best_first() {
        let mut ranks = [
            rank_bytes(false, 5),
            rank_bytes(true, -3),
            rank_bytes(true, 10),
            rank_bytes(false, -1),
        ];
        ranks.sort();
        assert_eq!(
            ranks,
            [
                rank_bytes(true, 10),
                rank_bytes(true, -3),
                rank_bytes(false, 5),
                rank_bytes(false, -1)
            ]
        );
    }
}
