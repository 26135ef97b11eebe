//! The bytes of a generation's files, mapped or resident in anonymous memory.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use memmap2::{Advice, Mmap, MmapOptions};
use sha2::{Digest, Sha256};

use crate::error::{Error, IoContext, Result};

const HUGE_PAGE: usize = 2 << 20;

/// Files are read and hashed in pieces that stay in the CPU cache between the two.
const READ_CHUNK: usize = 1 << 20;

pub(crate) enum Region {
    /// Empty files cannot be mapped.
    Empty,
    Mapped(Mmap),
    /// Anonymous memory, read-only once filled; the data starts at `start`, aligned to a
    /// huge page when it is large enough to use one.
    Resident {
        map: Mmap,
        start: usize,
        len: usize,
    },
}

impl Region {
    pub(crate) fn map(path: &Path) -> Result<Region> {
        let file = File::open(path).at(path)?;
        if file.metadata().at(path)?.len() == 0 {
            return Ok(Region::Empty);
        }
        // SAFETY: generation files are never modified after they are renamed into place
        // (new data always goes to a new generation directory), so the mapping stays valid;
        // deleting the directory does not invalidate an existing mapping on Linux.
        let map = unsafe { Mmap::map(&file) }.at(path)?;
        // Lookups touch a few bytes at random: read-ahead would only waste memory.
        let _ = map.advise(Advice::Random);
        Ok(Region::Mapped(map))
    }

    /// Reads the `len` bytes of a file into fresh anonymous memory, feeding them to
    /// `hasher` as they arrive (one read serves both loading and verification).
    pub(crate) fn load(
        dir: &Path,
        path: &Path,
        len: u64,
        hasher: Option<&mut Sha256>,
    ) -> Result<Region> {
        let mut file = File::open(path).at(path)?;
        Self::anon(dir, len, |out| read_into(&mut file, path, out, hasher))
    }

    /// A resident copy of `bytes`.
    pub(crate) fn copy_of(dir: &Path, bytes: &[u8]) -> Result<Region> {
        Self::anon(dir, bytes.len() as u64, |out| {
            out.copy_from_slice(bytes);
            Ok(())
        })
    }

    /// `len` bytes of anonymous memory filled by `fill`, on transparent huge pages from
    /// 2 MiB up. Allocation failures name the generation `dir`.
    fn anon(dir: &Path, len: u64, fill: impl FnOnce(&mut [u8]) -> Result<()>) -> Result<Region> {
        let no_memory = |detail: String| Error::NoMemory {
            dir: dir.to_path_buf(),
            needed: len,
            detail,
        };
        let len = usize::try_from(len).map_err(|_| no_memory("too large to address".into()))?;
        if len == 0 {
            return Ok(Region::Empty);
        }
        // Room to start on a huge-page boundary whatever address the kernel picks.
        let huge = len >= HUGE_PAGE;
        let map_len = if huge {
            len.div_ceil(HUGE_PAGE) * HUGE_PAGE + HUGE_PAGE
        } else {
            len
        };
        let mut map = MmapOptions::new()
            .len(map_len)
            .map_anon()
            .map_err(|e| no_memory(e.to_string()))?;
        let start = if huge {
            let at = map.as_ptr() as usize;
            at.next_multiple_of(HUGE_PAGE) - at
        } else {
            0
        };
        // Before the first touch, so that page faults allocate whole huge pages. Without
        // transparent huge pages this fails and 4 KiB pages serve, only slower.
        #[cfg(target_os = "linux")]
        if huge {
            let _ = map.advise(Advice::HugePage);
        }
        fill(&mut map[start..start + len])?;
        let map = map
            .make_read_only()
            .map_err(|e| no_memory(format!("cannot make it read-only: {e}")))?;
        Ok(Region::Resident { map, start, len })
    }

    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Region::Empty => &[],
            Region::Mapped(m) => m,
            Region::Resident { map, start, len } => &map[*start..*start + *len],
        }
    }
}

/// Reads exactly `out.len()` bytes, hashing them on the way when asked.
pub(crate) fn read_into(
    file: &mut File,
    path: &Path,
    out: &mut [u8],
    mut hasher: Option<&mut Sha256>,
) -> Result<()> {
    for chunk in out.chunks_mut(READ_CHUNK) {
        file.read_exact(chunk).at(path)?;
        if let Some(h) = hasher.as_deref_mut() {
            h.update(&*chunk);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_copies_start_on_a_huge_page_boundary() {
        let dir = Path::new("/corpus/gen-00000001");
        let big: Vec<u8> = (0..5 * HUGE_PAGE + 123).map(|i| (i % 251) as u8).collect();
        let region = Region::copy_of(dir, &big).unwrap();
        assert_eq!(region.bytes(), &big[..]);
        assert_eq!(region.bytes().as_ptr() as usize % HUGE_PAGE, 0);
        let small = Region::copy_of(dir, b"abc").unwrap();
        assert_eq!(small.bytes(), b"abc");
        assert!(Region::copy_of(dir, &[]).unwrap().bytes().is_empty());
    }

    #[test]
    fn loading_hashes_what_it_reads_and_reports_short_files() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("data");
        let data: Vec<u8> = (0..3 * READ_CHUNK + 7).map(|i| (i % 13) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let mut hasher = Sha256::new();
        let region = Region::load(tmp.path(), &path, data.len() as u64, Some(&mut hasher)).unwrap();
        assert_eq!(region.bytes(), &data[..]);
        assert_eq!(hasher.finalize(), Sha256::digest(&data));
        let short = Region::load(tmp.path(), &path, data.len() as u64 + 1, None);
        assert!(matches!(short, Err(Error::Io { .. })));
    }
}
