//! The in-memory index of a key table: where each key's bucket starts, compact enough to stay
//! in the CPU cache so that a lookup's first memory access is a cache hit.

use std::borrow::Cow;
use std::path::Path;

use crate::error::Result;
use crate::region::Region;

/// At most 2^24 buckets: 16 MiB of offsets plus at most 1 MiB of anchors, which stays in
/// the last-level cache (32 MiB on our build machines) while lookups run. At the full NSRL
/// size that makes a bucket about 4 rows, so the first read of rows is 3 to 4 cache lines
/// rather than the 7 to 8 of a 2^21-bucket index that fits the L2 cache: the saved DRAM
/// lines cost more than the index's L3 hits (batch lookups at 74 million hashes: 282-296 ns
/// per hash with 2^21 buckets, 261-271 ns with 2^24, other code equal).
const MAX_BITS: u32 = 24;
/// Buckets per anchor: at most 2^6.
const MAX_GROUP_BITS: u32 = 6;
/// When the compact form cannot describe the table (keys far from uniform), a plain table of
/// at most 2^20 starts (4 MiB).
const MAX_PLAIN_BITS: u32 = 20;

/// The start of bucket `j` (the first row whose key has `j` as its top `bits` bits) is the
/// linear interpolation between the anchors of its group, plus a small signed offset. Hash
/// values are uniform, so the offsets are a few rows: one byte each.
///
/// Both arrays live in anonymous memory, the offsets of a large table on a huge page of
/// their own: they are read on every lookup, and 512 entries of 4 KiB pages would compete
/// for the TLB with the tables'. Public for the vendor lookup index (the `lookup` crate),
/// whose digest tables have the same bucket starts.
pub struct Index {
    /// `u32` starts of every `2^group_bits`-th bucket, then the row count twice.
    anchors: Region,
    /// `i8` per bucket: start minus interpolation (the end needs none). Empty for a plain
    /// table, where every bucket has an anchor.
    offsets: Region,
    bits: u32,
    group_bits: u32,
}

/// An index under construction.
struct Parts {
    anchors: Vec<u32>,
    offsets: Vec<i8>,
    bits: u32,
    group_bits: u32,
}

impl Index {
    /// From the starts of the on-disk bucket table: `2^disk_bits + 1` values, checked to rise
    /// from 0 to the row count. Allocation failures name the generation `dir`.
    pub fn new(dir: &Path, starts: &[u32], disk_bits: u32) -> Result<Index> {
        let bits = disk_bits.min(MAX_BITS);
        let parts = (1..=MAX_GROUP_BITS.min(bits))
            .rev()
            .find_map(|group_bits| Parts::compact(starts, disk_bits, bits, group_bits))
            .unwrap_or_else(|| Parts::plain(starts, disk_bits));
        let anchors: Vec<u8> = parts.anchors.iter().flat_map(|a| a.to_le_bytes()).collect();
        let offsets: Vec<u8> = parts.offsets.iter().map(|&o| o as u8).collect();
        Ok(Index {
            anchors: Region::copy_of(dir, &anchors)?,
            offsets: Region::copy_of(dir, &offsets)?,
            bits: parts.bits,
            group_bits: parts.group_bits,
        })
    }

    pub(crate) fn buckets(&self) -> u64 {
        1 << self.bits
    }

    #[inline]
    fn anchor(&self, group: usize) -> Option<u64> {
        let b = self.anchors.bytes().get(group * 4..group * 4 + 4)?;
        Some(u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
    }

    #[inline]
    fn predicted(&self, j: usize) -> Option<usize> {
        interpolate(
            self.anchor(j >> self.group_bits)?,
            self.anchor((j >> self.group_bits) + 1)?,
            j,
            self.group_bits,
        )
    }

    #[inline]
    fn start(&self, j: usize) -> Option<usize> {
        let offset = self
            .offsets
            .bytes()
            .get(j)
            .map_or(0, |&o| isize::from(o as i8));
        self.predicted(j)?.checked_add_signed(offset)
    }

    #[inline]
    fn bucket(&self, prefix: u64) -> usize {
        (prefix >> (64 - self.bits)) as usize
    }

    /// For a key whose first eight bytes read big-endian are `prefix`: its bucket's row range
    /// and where in it the key would sit if the keys were evenly spread.
    #[inline]
    pub fn locate(&self, prefix: u64) -> Option<(usize, usize, usize)> {
        let j = self.bucket(prefix);
        let (lo, hi) = (self.start(j)?, self.start(j + 1)?);
        let fraction = (prefix << self.bits) >> 32;
        let guess = lo + ((fraction * hi.saturating_sub(lo) as u64) >> 32) as usize;
        Some((lo, hi, guess))
    }

    /// Asks for the cache lines [`Index::locate`] will read.
    #[inline]
    pub fn prefetch(&self, prefix: u64) {
        let j = self.bucket(prefix);
        crate::prefetch::prefetch(self.anchors.bytes(), (j >> self.group_bits) * 4);
        crate::prefetch::prefetch(self.offsets.bytes(), j);
    }
}

impl Parts {
    /// The starts at `bits` bits: every `2^(disk_bits - bits)`-th on-disk start (all of
    /// them, not copied, at the disk's bits).
    fn sample(starts: &[u32], disk_bits: u32, bits: u32) -> Cow<'_, [u32]> {
        if bits == disk_bits {
            return Cow::Borrowed(starts);
        }
        starts
            .iter()
            .step_by(1 << (disk_bits - bits))
            .copied()
            .collect()
    }

    /// `None` when an offset does not fit in a byte.
    fn compact(starts: &[u32], disk_bits: u32, bits: u32, group_bits: u32) -> Option<Parts> {
        let fine = Self::sample(starts, disk_bits, bits);
        let groups = (fine.len() - 1) >> group_bits;
        let mut anchors: Vec<u32> = (0..=groups).map(|g| fine[g << group_bits]).collect();
        anchors.push(*fine.last()?);
        let mut index = Parts {
            anchors,
            offsets: Vec::with_capacity(fine.len()),
            bits,
            group_bits,
        };
        // The end's offset is always 0 (its anchor is the row count): not stored.
        for (j, &start) in fine[..fine.len() - 1].iter().enumerate() {
            let offset = i64::from(start)
                - i64::try_from(interpolate(
                    u64::from(index.anchors[j >> group_bits]),
                    u64::from(index.anchors[(j >> group_bits) + 1]),
                    j,
                    group_bits,
                )?)
                .ok()?;
            index.offsets.push(i8::try_from(offset).ok()?);
        }
        Some(index)
    }

    fn plain(starts: &[u32], disk_bits: u32) -> Parts {
        let bits = disk_bits.min(MAX_PLAIN_BITS);
        let mut anchors = Self::sample(starts, disk_bits, bits).into_owned();
        anchors.push(anchors.last().copied().unwrap_or(0));
        Parts {
            anchors,
            offsets: Vec::new(),
            bits,
            group_bits: 0,
        }
    }
}

/// The start that bucket `j` would have if the rows of its group (between anchors `a` and `b`)
/// were evenly spread.
#[inline]
fn interpolate(a: u64, b: u64, j: usize, group_bits: u32) -> Option<usize> {
    let within = (j & ((1 << group_bits) - 1)) as u64;
    usize::try_from(a + ((b.saturating_sub(a) * within) >> group_bits)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bucket starts of `keys` (sorted prefixes) at `bits` bits, as the on-disk table has them.
    fn starts_of(keys: &[u64], bits: u32) -> Vec<u32> {
        (0..=1u64 << bits)
            .map(|j| keys.iter().take_while(|&&k| (k >> (64 - bits)) < j).count() as u32)
            .collect()
    }

    fn check(keys: &[u64], disk_bits: u32) -> Index {
        let starts = starts_of(keys, disk_bits);
        let index = Index::new(Path::new("/"), &starts, disk_bits).unwrap();
        let exact = starts_of(keys, index.bits);
        for (j, &s) in exact.iter().enumerate() {
            assert_eq!(index.start(j), Some(s as usize), "bucket {j}");
        }
        for (i, &k) in keys.iter().enumerate() {
            let (lo, hi, guess) = index.locate(k).unwrap();
            assert!(lo <= i && i < hi && lo <= guess && guess < hi);
        }
        index
    }

    #[test]
    fn uniform_keys_get_the_compact_form() {
        let mut state = 1u64;
        let mut keys: Vec<u64> = (0..20_000)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                state
            })
            .collect();
        keys.sort_unstable();
        let index = check(&keys, 12);
        assert_eq!((index.bits, index.group_bits), (12, 6));
        assert_eq!(index.offsets.bytes().len(), 4096);
    }

    #[test]
    fn crowded_keys_fall_back_to_a_plain_table() {
        // All keys in one bucket: no byte offset can describe the jump.
        let keys: Vec<u64> = (0..1000).map(|i| (5u64 << 52) + i).collect();
        let index = check(&keys, 12);
        assert_eq!(index.group_bits, 0);
        assert!(index.offsets.bytes().is_empty());
        // Tiny tables and empty ones.
        check(&[1 << 63], 1);
        check(&[], 1);
        check(&[], 24);
    }
}
