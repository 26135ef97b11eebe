//! File names, row shapes and the manifest of a generation (see the crate docs).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub const FORMAT_VERSION: u32 = 1;
pub const MANIFEST: &str = "manifest.json";
pub const META_ROWS: &str = "meta.rows";
pub const STRINGS: &str = "strings.pool";
pub const META_ROW_BYTES: usize = 10;
/// The largest bucket table: 2^24 entries.
pub const MAX_BUCKET_BITS: u32 = 24;

/// The three key tables: (file stem, key bytes, row bytes). SHA-256 rows carry no pointer.
pub const TABLES: [(&str, usize, usize); 3] =
    [("sha256", 32, 32), ("sha1", 20, 24), ("md5", 16, 20)];

pub fn rows_file(stem: &str) -> String {
    format!("{stem}.rows")
}

pub fn buckets_file(stem: &str) -> String {
    format!("{stem}.buckets")
}

/// Every data file of a generation, in a fixed order.
pub fn data_files() -> Vec<String> {
    let mut files = Vec::new();
    for (stem, _, _) in TABLES {
        files.push(rows_file(stem));
        files.push(buckets_file(stem));
    }
    files.push(META_ROWS.to_string());
    files.push(STRINGS.to_string());
    files
}

/// About 4-8 rows per bucket (a few adjacent cache lines to scan; the offsets then cost
/// under 1 byte per row), at most 2^24 buckets (64 MiB of offsets).
pub fn bucket_bits(rows: u64) -> u32 {
    let ceil_log2 = 64 - rows.saturating_sub(1).leading_zeros();
    ceil_log2.saturating_sub(3).clamp(1, MAX_BUCKET_BITS)
}

/// Bucket of a key: its first four bytes, big-endian, top `bits` bits.
#[inline]
pub fn bucket_of(key: &[u8], bits: u32) -> usize {
    let mut prefix = [0u8; 4];
    let n = key.len().min(4);
    prefix[..n].copy_from_slice(&key[..n]);
    (u32::from_be_bytes(prefix) >> (32 - bits)) as usize
}

/// Folds per-prefix counts (gathered at `counts.len() = 2^k` buckets, `k >= bits`) into
/// `2^bits + 1` start offsets.
pub fn bucket_offsets(counts: &[u32], bits: u32) -> Vec<u32> {
    let group = (counts.len() >> bits).max(1);
    let mut offsets = Vec::with_capacity((1 << bits) + 1);
    let mut total = 0u32;
    for chunk in counts.chunks(group) {
        offsets.push(total);
        total += chunk.iter().sum::<u32>();
    }
    offsets.push(total);
    offsets
}

pub fn put_u40(out: &mut [u8], value: u64) {
    out[..5].copy_from_slice(&value.to_le_bytes()[..5]);
}

pub fn get_u40(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..5].copy_from_slice(&bytes[..5]);
    u64::from_le_bytes(b)
}

pub const MAX_U40: u64 = (1 << 40) - 1;

/// LEB128 length prefix of a pool string.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
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

/// Returns the value and the bytes it took; `None` if cut short or over 10 bytes.
pub fn get_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().take(10).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct TableInfo {
    pub rows: u64,
    pub bucket_bits: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileInfo {
    pub bytes: u64,
    pub sha256: String,
}

/// One source of the corpus and how many distinct SHA-256 report it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SourceCount {
    pub source: String,
    pub entries: u64,
}

/// The `VERSION` row of one input (fields absent from the table are `None`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RdsVersion {
    /// Input file name (no directory).
    pub file: String,
    pub source: String,
    pub layout: String,
    pub version: Option<String>,
    pub build_set: Option<String>,
    pub build_date: Option<String>,
    pub release_date: Option<String>,
    pub description: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct InputInfo {
    pub file: String,
    pub source: String,
    pub layout: String,
    pub file_rows: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub format_version: u32,
    pub generation: String,
    pub imported_at: DateTime<Utc>,
    /// Distinct SHA-256 = metadata rows.
    pub entries: u64,
    pub sha256: TableInfo,
    pub sha1: TableInfo,
    pub md5: TableInfo,
    /// Indexed by the source id of metadata rows.
    pub sources: Vec<SourceCount>,
    pub rds_versions: Vec<RdsVersion>,
    pub inputs: Vec<InputInfo>,
    pub files: BTreeMap<String, FileInfo>,
}

impl Manifest {
    pub fn table(&self, stem: &str) -> Option<&TableInfo> {
        match stem {
            "sha256" => Some(&self.sha256),
            "sha1" => Some(&self.sha1),
            "md5" => Some(&self.md5),
            _ => None,
        }
    }

    pub fn info(&self) -> GenerationInfo {
        GenerationInfo {
            generation: self.generation.clone(),
            entries: self.entries,
            sha1_entries: self.sha1.rows,
            md5_entries: self.md5.rows,
            sources: self.sources.clone(),
            rds_versions: self.rds_versions.clone(),
            imported_at: self.imported_at,
            bytes_on_disk: self.files.values().map(|f| f.bytes).sum(),
        }
    }
}

/// What a status page shows about a generation.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct GenerationInfo {
    /// Directory name, `gen-<seq>`.
    pub generation: String,
    /// Distinct SHA-256 values.
    pub entries: u64,
    pub sha1_entries: u64,
    pub md5_entries: u64,
    pub sources: Vec<SourceCount>,
    pub rds_versions: Vec<RdsVersion>,
    pub imported_at: DateTime<Utc>,
    /// Data files only (the manifest excluded).
    pub bytes_on_disk: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bits_follow_size() {
        assert_eq!(bucket_bits(0), 1);
        assert_eq!(bucket_bits(1_000_000), 17);
        assert_eq!(bucket_bits(74_000_000), 24);
    }

    #[test]
    fn offsets_fold_counts() {
        let mut counts = vec![0u32; 1 << MAX_BUCKET_BITS];
        counts[0] = 2;
        counts[(1 << MAX_BUCKET_BITS) - 1] = 3;
        let offsets = bucket_offsets(&counts, 1);
        assert_eq!(offsets, vec![0, 2, 5]);
        assert_eq!(bucket_of(&[0xff, 0, 0, 0], 1), 1);
        assert_eq!(bucket_of(&[0x7f, 0xff, 0, 0], 1), 0);
    }

    #[test]
    fn varint_round_trip() {
        for v in [0u64, 1, 127, 128, 300, 1 << 40] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(get_varint(&buf), Some((v, buf.len())));
        }
        assert_eq!(get_varint(&[0x80]), None);
    }
}
