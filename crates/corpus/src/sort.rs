//! External sorting: in-memory buffers sorted and spilled as runs, then a k-way merge.
//!
//! Two kinds: [`RowBuffer`] runs hold one candidate row per SHA-256 (variable length, with a
//! file name); [`FixedSorter`] sorts fixed-width records (SHA-1 or MD5 + row index).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};

const IO_BUF: usize = 1 << 20;
/// rank, sha1, md5, product id, name length.
const FIXED_PART: usize = 1 + 20 + 16 + 4 + 2;
/// Where the name length sits in a record.
const NAME_LEN_AT: usize = FIXED_PART - 2;
const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// A candidate row for one SHA-256.
#[derive(Clone, Copy)]
pub(crate) struct Candidate<'a> {
    /// Source precedence, 0 = richest.
    pub rank: u8,
    pub sha1: &'a [u8],
    pub md5: &'a [u8],
    /// Product ids are assigned in byte order of the product strings.
    pub product: u32,
    pub name: &'a [u8],
}

impl Candidate<'_> {
    /// Richest source first, then the smallest file name, then the smallest product.
    fn better_than(&self, other: &Candidate<'_>) -> bool {
        (self.rank, self.name, self.product) < (other.rank, other.name, other.product)
    }

    fn decode(rec: &[u8]) -> Candidate<'_> {
        Candidate {
            rank: rec[0],
            sha1: &rec[1..21],
            md5: &rec[21..37],
            product: u32::from_le_bytes([rec[37], rec[38], rec[39], rec[40]]),
            // rec[41..43] is the name length.
            name: &rec[FIXED_PART..],
        }
    }
}

#[derive(Clone, Copy)]
struct Slot {
    key: [u8; 32],
    off: u32,
}

/// Rows gathered in memory before being sorted and spilled; never grows past its budget.
pub(crate) struct RowBuffer {
    slots: Vec<Slot>,
    data: Vec<u8>,
}

impl RowBuffer {
    pub fn with_budget(bytes: usize) -> RowBuffer {
        // About 36 bytes of slot per ~60 bytes of row data.
        let slots = (bytes / 100 * 37 / SLOT_BYTES).max(16);
        let data = (bytes - (slots * SLOT_BYTES).min(bytes)).clamp(1 << 17, u32::MAX as usize); // room for the longest row
        RowBuffer {
            slots: Vec::with_capacity(slots),
            data: Vec::with_capacity(data),
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Adds a row; `false` (nothing added) when the buffer is full.
    pub fn push(&mut self, key: &[u8; 32], c: &Candidate<'_>) -> bool {
        let name = &c.name[..c.name.len().min(u16::MAX as usize)];
        if self.slots.len() == self.slots.capacity()
            || self.data.len() + FIXED_PART + name.len() > self.data.capacity()
        {
            return false;
        }
        let off = self.data.len() as u32;
        self.data.push(c.rank);
        self.data.extend_from_slice(c.sha1);
        self.data.extend_from_slice(c.md5);
        self.data.extend_from_slice(&c.product.to_le_bytes());
        self.data
            .extend_from_slice(&(name.len() as u16).to_le_bytes());
        self.data.extend_from_slice(name);
        self.slots.push(Slot { key: *key, off });
        true
    }

    fn record(&self, off: u32) -> &[u8] {
        let off = off as usize;
        let len = u16::from_le_bytes([
            self.data[off + NAME_LEN_AT],
            self.data[off + NAME_LEN_AT + 1],
        ]) as usize;
        &self.data[off..off + FIXED_PART + len]
    }

    /// Sorts by SHA-256, keeps the best candidate of each, writes a run file; returns its
    /// record count.
    pub fn spill(&mut self, path: &Path) -> Result<u64> {
        let mut slots = std::mem::take(&mut self.slots);
        slots.sort_unstable_by_key(|s| s.key);
        let mut out = BufWriter::with_capacity(IO_BUF, File::create(path).at(path)?);
        let mut written = 0u64;
        let mut i = 0;
        while i < slots.len() {
            let key = slots[i].key;
            let mut best = self.record(slots[i].off);
            let mut j = i + 1;
            while j < slots.len() && slots[j].key == key {
                let other = self.record(slots[j].off);
                if Candidate::decode(other).better_than(&Candidate::decode(best)) {
                    best = other;
                }
                j += 1;
            }
            out.write_all(&key).at(path)?;
            out.write_all(best).at(path)?;
            written += 1;
            i = j;
        }
        out.flush().at(path)?;
        slots.clear();
        self.slots = slots;
        self.data.clear();
        Ok(written)
    }
}

struct RunReader {
    path: PathBuf,
    input: BufReader<File>,
    key: [u8; 32],
    /// The record after the key: fixed part then name.
    rec: Vec<u8>,
}

impl RunReader {
    fn open(path: &Path) -> Result<RunReader> {
        Ok(RunReader {
            path: path.to_path_buf(),
            input: BufReader::with_capacity(IO_BUF, File::open(path).at(path)?),
            key: [0; 32],
            rec: Vec::with_capacity(256),
        })
    }

    /// Loads the next record; `false` at the end of the run.
    fn advance(&mut self) -> Result<bool> {
        if self.input.fill_buf().at(&self.path)?.is_empty() {
            return Ok(false);
        }
        self.input.read_exact(&mut self.key).at(&self.path)?;
        self.rec.resize(FIXED_PART, 0);
        self.input.read_exact(&mut self.rec).at(&self.path)?;
        let len = u16::from_le_bytes([self.rec[NAME_LEN_AT], self.rec[NAME_LEN_AT + 1]]) as usize;
        self.rec.resize(FIXED_PART + len, 0);
        self.input
            .read_exact(&mut self.rec[FIXED_PART..])
            .at(&self.path)?;
        Ok(true)
    }
}

/// Merges sorted runs, calling `emit` once per distinct SHA-256 (ascending) with its best
/// candidate.
pub(crate) fn merge_runs(
    runs: &[PathBuf],
    mut emit: impl FnMut(&[u8; 32], &Candidate<'_>) -> Result<()>,
) -> Result<()> {
    let mut readers = Vec::with_capacity(runs.len());
    let mut heap = BinaryHeap::with_capacity(runs.len());
    for path in runs {
        let mut reader = RunReader::open(path)?;
        if reader.advance()? {
            heap.push(Reverse((reader.key, readers.len())));
        }
        readers.push(reader);
    }
    let mut group = Vec::with_capacity(runs.len());
    while let Some(Reverse((key, first))) = heap.pop() {
        group.clear();
        group.push(first);
        let mut best = first;
        while let Some(Reverse((next_key, _))) = heap.peek() {
            if *next_key != key {
                break;
            }
            if let Some(Reverse((_, j))) = heap.pop() {
                let better = Candidate::decode(&readers[j].rec)
                    .better_than(&Candidate::decode(&readers[best].rec));
                if better {
                    best = j;
                }
                group.push(j);
            }
        }
        emit(&key, &Candidate::decode(&readers[best].rec))?;
        for &j in &group {
            if readers[j].advance()? {
                heap.push(Reverse((readers[j].key, j)));
            }
        }
    }
    Ok(())
}

/// External sort of fixed-width records, compared bytewise: sorted in memory in chunks of at
/// most `budget_bytes`, spilled as runs under `dir`, then merged. Used by the corpus import
/// and by the vendor index's generations (`lookup`).
pub struct FixedSorter<const W: usize> {
    buf: Vec<[u8; W]>,
    /// Records held in memory before a spill.
    cap: usize,
    dir: PathBuf,
    prefix: &'static str,
    runs: Vec<PathBuf>,
    len: u64,
}

impl<const W: usize> FixedSorter<W> {
    pub fn new(dir: &Path, prefix: &'static str, budget_bytes: usize) -> FixedSorter<W> {
        FixedSorter {
            buf: Vec::new(),
            cap: (budget_bytes / W).max(1024),
            dir: dir.to_path_buf(),
            prefix,
            runs: Vec::new(),
            len: 0,
        }
    }

    /// Records pushed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, rec: [u8; W]) -> Result<()> {
        if self.buf.len() == self.cap {
            self.spill()?;
        }
        if self.buf.len() == self.buf.capacity() {
            // Grown by doubling, never past the budget.
            let more = self.buf.len().max(1024).min(self.cap - self.buf.len());
            self.buf.reserve_exact(more);
        }
        self.buf.push(rec);
        self.len += 1;
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        self.buf.sort_unstable();
        let path = self
            .dir
            .join(format!("{}-{}.run", self.prefix, self.runs.len()));
        let mut out = BufWriter::with_capacity(IO_BUF, File::create(&path).at(&path)?);
        for rec in &self.buf {
            out.write_all(rec).at(&path)?;
        }
        out.flush().at(&path)?;
        self.buf.clear();
        self.runs.push(path);
        Ok(())
    }

    /// Calls `emit` for every record in ascending order (duplicates included).
    pub fn finish<E: From<Error>>(
        mut self,
        mut emit: impl FnMut(&[u8; W]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        if self.runs.is_empty() {
            self.buf.sort_unstable();
            return self.buf.iter().try_for_each(emit);
        }
        if !self.buf.is_empty() {
            self.spill()?;
        }
        self.buf = Vec::new();
        let mut readers = Vec::with_capacity(self.runs.len());
        let mut heap = BinaryHeap::with_capacity(self.runs.len());
        for path in &self.runs {
            let mut input = BufReader::with_capacity(IO_BUF, File::open(path).at(path)?);
            if let Some(rec) = read_fixed::<W>(&mut input, path)? {
                heap.push(Reverse((rec, readers.len())));
            }
            readers.push((input, path));
        }
        while let Some(Reverse((rec, i))) = heap.pop() {
            emit(&rec)?;
            let (input, path) = &mut readers[i];
            if let Some(next) = read_fixed::<W>(input, path)? {
                heap.push(Reverse((next, i)));
            }
        }
        for path in &self.runs {
            std::fs::remove_file(path).at(path)?;
        }
        Ok(())
    }
}

fn read_fixed<const W: usize>(input: &mut BufReader<File>, path: &Path) -> Result<Option<[u8; W]>> {
    if input.fill_buf().at(path)?.is_empty() {
        return Ok(None);
    }
    let mut rec = [0u8; W];
    input.read_exact(&mut rec).at(path)?;
    Ok(Some(rec))
}

#[cfg(test)]
mod tests {

    use super::*;

    fn cand<'a>(rank: u8, name: &'a [u8], product: u32) -> Candidate<'a> {
        Candidate {
            rank,
            sha1: &[1; 20],
            md5: &[2; 16],
            product,
            name,
        }
    }

    #[test]
    fn runs_merge_to_best_candidate_per_key() {
        let dir = tempfile::tempdir().unwrap();
        let mut buf = RowBuffer::with_budget(1 << 16);
        let mut runs = Vec::new();
        // Key 5 appears in both runs; rank 0 must win over a smaller name with rank 1.
        for (i, (key, rank, name)) in [(5u8, 1u8, &b"a"[..]), (3, 0, b"x"), (5, 1, b"b")]
            .into_iter()
            .enumerate()
        {
            assert!(buf.push(&[key; 32], &cand(rank, name, i as u32)));
        }
        runs.push(dir.path().join("r0"));
        assert_eq!(buf.spill(&runs[0]).unwrap(), 2);
        assert!(buf.push(&[5; 32], &cand(0, b"zz", 9)));
        assert!(buf.push(&[9; 32], &cand(2, b"q", 1)));
        runs.push(dir.path().join("r1"));
        buf.spill(&runs[1]).unwrap();

        let mut seen = Vec::new();
        merge_runs(&runs, |key, c| {
            seen.push((key[0], c.rank, c.name.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![
                (3, 0, b"x".to_vec()),
                (5, 0, b"zz".to_vec()),
                (9, 2, b"q".to_vec())
            ]
        );
    }

    #[test]
    fn fixed_sorter_spills_and_merges_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut sorter = FixedSorter::<4>::new(dir.path(), "t", 0);
        let mut expected = Vec::new();
        for i in (0..5000u32).rev() {
            let rec = (i.wrapping_mul(2_654_435_761)).to_be_bytes();
            sorter.push(rec).unwrap();
            expected.push(rec);
        }
        assert!(sorter.runs.len() >= 4);
        expected.sort_unstable();
        let mut got = Vec::new();
        sorter
            .finish(|r| {
                got.push(*r);
                Ok::<_, Error>(())
            })
            .unwrap();
        assert_eq!(got, expected);
    }
}
