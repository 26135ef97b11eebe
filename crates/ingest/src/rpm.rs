//! RPM packages: the files a package installs, with the SHA-256 its header lists for each.
//!
//! An RPM file is a 96-byte lead (magic `ed ab ee db`), a signature header padded to a
//! multiple of 8 bytes, the main header, then the compressed cpio payload. Both headers share
//! one layout: magic `8e ad e8 01`, four reserved bytes, the index entry count and the data
//! size (big-endian `u32`), then 16-byte index entries (tag, type, offset, count) and the data
//! store they point into. The main header lists every file of the package: `BASENAMES`,
//! `DIRNAMES` and `DIRINDEXES` name it, `FILEMODES` and `FILEFLAGS` say what it is,
//! `FILESIZES` (or `LONGFILESIZES`) its size and `FILEDIGESTS` its digest as hex, in the
//! algorithm `FILEDIGESTALGO` names (8: SHA-256; absent: MD5). The RPM database keeps each
//! installed package's main header without its magic and reserved bytes
//! ([`parse_installed`]).
//!
//! The whole package is streamed once through the [`TripleHasher`] (to check the hash the
//! repository metadata lists) while the headers are kept from its first bytes; the payload
//! is hashed, never decompressed. Only once the package's bytes match the published hash are
//! the header's per-file digests trusted ([`crate::pipeline`]).

use chrono::{DateTime, Utc};
use model::Clock;
use tokio::time::timeout_at;

use crate::download::{DownloadError, DownloadLimits};
use crate::hasher::{Digests, TripleHasher};

const LEAD_MAGIC: [u8; 4] = [0xed, 0xab, 0xee, 0xdb];
const HEADER_MAGIC: [u8; 4] = [0x8e, 0xad, 0xe8, 0x01];
const LEAD_BYTES: usize = 96;
/// Magic, reserved, index count, data size.
const INTRO_BYTES: usize = 16;

/// Largest header (index and data) read. Real main headers are tens to hundreds of KiB; a
/// package with many thousands of files reaches a few MiB.
pub const MAX_HEADER_BYTES: usize = 64 << 20;

const TAG_NAME: u32 = 1000;
const TAG_VERSION: u32 = 1001;
const TAG_RELEASE: u32 = 1002;
const TAG_EPOCH: u32 = 1003;
const TAG_ARCH: u32 = 1022;
const TAG_FILESIZES: u32 = 1028;
const TAG_FILEMODES: u32 = 1030;
const TAG_FILEDIGESTS: u32 = 1035;
const TAG_FILEFLAGS: u32 = 1037;
const TAG_DIRINDEXES: u32 = 1116;
const TAG_BASENAMES: u32 = 1117;
const TAG_DIRNAMES: u32 = 1118;
const TAG_LONGFILESIZES: u32 = 5008;
const TAG_FILEDIGESTALGO: u32 = 5011;

const TYPE_INT16: u32 = 3;
const TYPE_INT32: u32 = 4;
const TYPE_INT64: u32 = 5;
const TYPE_STRING: u32 = 6;
const TYPE_STRING_ARRAY: u32 = 8;
const TYPE_I18NSTRING: u32 = 9;

/// `FILEDIGESTALGO` value of SHA-256 (the OpenPGP hash algorithm number).
pub(crate) const DIGEST_SHA256: u32 = 8;
/// `FILEFLAGS` bit of a file the package claims but does not carry.
const FLAG_GHOST: u32 = 1 << 6;
const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpmError {
    #[error("not an RPM package: {0}")]
    NotRpm(&'static str),
    #[error("RPM header unreadable: {0}")]
    Header(String),
    #[error("RPM header larger than {MAX_HEADER_BYTES} bytes")]
    HeaderTooLarge,
    #[error("the RPM header lists file digests in algorithm {0}, not SHA-256")]
    NotSha256(u32),
}

/// One file a package installs, as its header lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpmFile {
    /// Absolute path (`/usr/bin/ls`).
    pub path: String,
    pub mode: u32,
    pub size: u64,
    /// Lowercase hex SHA-256.
    pub sha256: String,
}

impl RpmFile {
    /// A file a host runs or loads: a regular file with an execute bit, or a shared library.
    pub fn is_executable(&self) -> bool {
        let name = self.path.rsplit('/').next().unwrap_or("");
        self.mode & 0o111 != 0 || name.ends_with(".so") || name.contains(".so.")
    }
}

/// What the main header says of a package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpmHeader {
    pub name: String,
    pub version: String,
    pub release: String,
    /// Every regular file the package carries (ghosts left out), with its SHA-256.
    pub files: Vec<RpmFile>,
}

/// Where the main header ends, once `head` holds the package up to there: `Ok(None)` means
/// more bytes are needed.
pub fn header_end(head: &[u8]) -> Result<Option<usize>, RpmError> {
    if head.len() < LEAD_BYTES {
        return Ok(None);
    }
    if head[..4] != LEAD_MAGIC {
        return Err(RpmError::NotRpm("no lead magic"));
    }
    let Some(sig_len) = structure_len(&head[LEAD_BYTES..])? else {
        return Ok(None);
    };
    let main_at = LEAD_BYTES + sig_len.div_ceil(8) * 8;
    let Some(main_len) = structure_len(head.get(main_at..).unwrap_or_default())? else {
        return Ok(None);
    };
    let end = main_at + main_len;
    Ok((head.len() >= end).then_some(end))
}

/// The length of a header structure starting at `at`, once its intro is there.
fn structure_len(at: &[u8]) -> Result<Option<usize>, RpmError> {
    if at.len() < INTRO_BYTES {
        return Ok(None);
    }
    if at[..4] != HEADER_MAGIC {
        return Err(RpmError::NotRpm("no header magic"));
    }
    let entries = be32(at, 8) as usize;
    let data = be32(at, 12) as usize;
    let len = entries
        .checked_mul(16)
        .and_then(|n| n.checked_add(data))
        .and_then(|n| n.checked_add(INTRO_BYTES))
        .filter(|&n| n <= MAX_HEADER_BYTES)
        .ok_or(RpmError::HeaderTooLarge)?;
    Ok(Some(len))
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// One index entry of a header.
#[derive(Debug, Clone, Copy)]
struct Entry {
    kind: u32,
    offset: usize,
    count: usize,
}

/// A parsed header structure: its index by tag, and its data store.
struct Structure<'a> {
    entries: Vec<(u32, Entry)>,
    data: &'a [u8],
}

impl<'a> Structure<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Self, RpmError> {
        let len = structure_len(bytes)?.ok_or(RpmError::NotRpm("truncated header"))?;
        let bytes = bytes
            .get(..len)
            .ok_or(RpmError::NotRpm("truncated header"))?;
        Self::parse_bare(&bytes[HEADER_MAGIC.len() + 4..])
    }

    /// A structure without its magic and reserved bytes (as the RPM database keeps it): the
    /// index entry count and data size, the index, then the data.
    fn parse_bare(bytes: &'a [u8]) -> Result<Self, RpmError> {
        const COUNTS: usize = 8;
        if bytes.len() < COUNTS {
            return Err(RpmError::NotRpm("truncated header"));
        }
        let count = be32(bytes, 0) as usize;
        let len = count
            .checked_mul(16)
            .and_then(|n| n.checked_add(be32(bytes, 4) as usize))
            .and_then(|n| n.checked_add(COUNTS))
            .filter(|&n| n <= MAX_HEADER_BYTES)
            .ok_or(RpmError::HeaderTooLarge)?;
        let bytes = bytes
            .get(..len)
            .ok_or(RpmError::NotRpm("truncated header"))?;
        let data = &bytes[COUNTS + count * 16..];
        let entries = (0..count)
            .map(|i| {
                let at = COUNTS + i * 16;
                (
                    be32(bytes, at),
                    Entry {
                        kind: be32(bytes, at + 4),
                        offset: be32(bytes, at + 8) as usize,
                        count: be32(bytes, at + 12) as usize,
                    },
                )
            })
            .collect();
        Ok(Self { entries, data })
    }

    fn entry(&self, tag: u32) -> Option<Entry> {
        self.entries
            .iter()
            .find(|(t, _)| *t == tag)
            .map(|(_, e)| *e)
    }

    fn bad(tag: u32, why: &str) -> RpmError {
        RpmError::Header(format!("tag {tag}: {why}"))
    }

    /// `count` NUL-terminated strings from the entry's offset.
    fn strings(&self, tag: u32) -> Result<Option<Vec<&'a str>>, RpmError> {
        let Some(e) = self.entry(tag) else {
            return Ok(None);
        };
        if !matches!(e.kind, TYPE_STRING | TYPE_STRING_ARRAY | TYPE_I18NSTRING) {
            return Err(Self::bad(tag, "not a string"));
        }
        let mut rest = self
            .data
            .get(e.offset..)
            .ok_or_else(|| Self::bad(tag, "offset past the data"))?;
        // A STRING has one value whatever its count says.
        let n = if e.kind == TYPE_STRING { 1 } else { e.count };
        let mut out = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            let end = rest
                .iter()
                .position(|&b| b == 0)
                .ok_or_else(|| Self::bad(tag, "unterminated string"))?;
            let s = std::str::from_utf8(&rest[..end]).map_err(|_| Self::bad(tag, "not UTF-8"))?;
            out.push(s);
            rest = &rest[end + 1..];
        }
        Ok(Some(out))
    }

    fn string(&self, tag: u32) -> Result<Option<&'a str>, RpmError> {
        Ok(self.strings(tag)?.and_then(|v| v.first().copied()))
    }

    /// Integers of the entry's type (16, 32 or 64 bits), widened.
    fn ints(&self, tag: u32) -> Result<Option<Vec<u64>>, RpmError> {
        let Some(e) = self.entry(tag) else {
            return Ok(None);
        };
        let width = match e.kind {
            TYPE_INT16 => 2,
            TYPE_INT32 => 4,
            TYPE_INT64 => 8,
            _ => return Err(Self::bad(tag, "not an integer")),
        };
        let bytes = e
            .count
            .checked_mul(width)
            .and_then(|n| self.data.get(e.offset..e.offset.checked_add(n)?))
            .ok_or_else(|| Self::bad(tag, "values past the data"))?;
        Ok(Some(
            bytes
                .chunks_exact(width)
                .map(|c| c.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b)))
                .collect(),
        ))
    }
}

/// Where a header's files are: `DIRNAMES`, and for each file (in `BASENAMES` order) the
/// index of its directory among them (`DIRINDEXES`).
struct FileDirs<'a> {
    dirnames: Vec<&'a str>,
    indexes: Vec<u64>,
}

impl<'a> FileDirs<'a> {
    /// Both tags, which a header that lists files must have.
    fn read(h: &Structure<'a>) -> Result<Self, RpmError> {
        let missing = |tag: u32| RpmError::Header(format!("tag {tag} missing"));
        let dirnames = h
            .strings(TAG_DIRNAMES)?
            .ok_or_else(|| missing(TAG_DIRNAMES))?;
        let indexes = h
            .ints(TAG_DIRINDEXES)?
            .ok_or_else(|| missing(TAG_DIRINDEXES))?;
        Ok(Self { dirnames, indexes })
    }

    /// How many files the indexes cover.
    fn count(&self) -> usize {
        self.indexes.len()
    }

    /// The directory of file `i`, as `DIRNAMES` spells it.
    fn dir(&self, i: usize) -> Result<&'a str, RpmError> {
        self.indexes
            .get(i)
            .and_then(|&d| usize::try_from(d).ok())
            .and_then(|d| self.dirnames.get(d).copied())
            .ok_or_else(|| RpmError::Header(format!("file {i}: directory index out of range")))
    }
}

/// Parses the main header of a package whose first bytes (at least up to [`header_end`])
/// are `head`.
pub fn parse_header(head: &[u8]) -> Result<RpmHeader, RpmError> {
    let end = header_end(head)?.ok_or(RpmError::NotRpm("truncated"))?;
    let sig_len = structure_len(&head[LEAD_BYTES..])?.unwrap_or_default();
    let main_at = LEAD_BYTES + sig_len.div_ceil(8) * 8;
    let main = Structure::parse(&head[main_at..end])?;
    let required = |tag: u32, v: Option<&'_ str>| {
        v.map(str::to_owned)
            .ok_or_else(|| RpmError::Header(format!("tag {tag} missing")))
    };
    let name = required(TAG_NAME, main.string(TAG_NAME)?)?;
    let version = required(TAG_VERSION, main.string(TAG_VERSION)?)?;
    let release = required(TAG_RELEASE, main.string(TAG_RELEASE)?)?;
    let Some(basenames) = main.strings(TAG_BASENAMES)? else {
        // A package without files (a meta package).
        return Ok(RpmHeader {
            name,
            version,
            release,
            files: Vec::new(),
        });
    };
    let algo = main
        .ints(TAG_FILEDIGESTALGO)?
        .and_then(|v| v.first().copied())
        .unwrap_or(1);
    if algo != u64::from(DIGEST_SHA256) {
        return Err(RpmError::NotSha256(u32::try_from(algo).unwrap_or(u32::MAX)));
    }
    let n = basenames.len();
    let missing = |tag: u32| RpmError::Header(format!("tag {tag} missing"));
    let dirs = FileDirs::read(&main)?;
    let modes = main
        .ints(TAG_FILEMODES)?
        .ok_or_else(|| missing(TAG_FILEMODES))?;
    let digests = main
        .strings(TAG_FILEDIGESTS)?
        .ok_or_else(|| missing(TAG_FILEDIGESTS))?;
    let sizes = match main.ints(TAG_LONGFILESIZES)? {
        Some(long) => long,
        None => main
            .ints(TAG_FILESIZES)?
            .ok_or_else(|| missing(TAG_FILESIZES))?,
    };
    let flags = main.ints(TAG_FILEFLAGS)?.unwrap_or_else(|| vec![0; n]);
    if [
        dirs.count(),
        modes.len(),
        digests.len(),
        sizes.len(),
        flags.len(),
    ]
    .iter()
    .any(|&len| len != n)
    {
        return Err(RpmError::Header(
            "file tags disagree on the file count".into(),
        ));
    }
    let mut files = Vec::new();
    for i in 0..n {
        let mode = u32::try_from(modes[i]).unwrap_or_default();
        if mode & S_IFMT != S_IFREG || flags[i] & u64::from(FLAG_GHOST) != 0 {
            continue;
        }
        let dir = dirs.dir(i)?;
        let sha256 = crate::formats::hex_digest(digests[i], 64).ok_or_else(|| {
            RpmError::Header(format!("{dir}{}: not a SHA-256 digest", basenames[i]))
        })?;
        files.push(RpmFile {
            path: format!("{dir}{}", basenames[i]),
            mode,
            size: sizes[i],
            sha256,
        });
    }
    Ok(RpmHeader {
        name,
        version,
        release,
        files,
    })
}

/// A package as the RPM database records it installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledRpm {
    pub name: String,
    /// `EPOCH`, when the header has one.
    pub epoch: Option<u32>,
    pub version: String,
    pub release: String,
    /// `ARCH` (empty when absent, as for `gpg-pubkey`).
    pub arch: String,
    /// Every path the package owns (`/usr/bin/ls`), of any kind, ghosts included.
    pub paths: Vec<String>,
}

/// Parses a header as the RPM database keeps it (a `Packages.blob` of `rpmdb.sqlite`):
/// the header structure without its 8 magic and reserved bytes.
pub fn parse_installed(blob: &[u8]) -> Result<InstalledRpm, RpmError> {
    let h = Structure::parse_bare(blob)?;
    let required = |tag: u32| -> Result<String, RpmError> {
        h.string(tag)?
            .map(str::to_owned)
            .ok_or_else(|| RpmError::Header(format!("tag {tag} missing")))
    };
    let epoch = match h.ints(TAG_EPOCH)?.as_deref() {
        None | Some([]) => None,
        Some([e, ..]) => {
            Some(u32::try_from(*e).map_err(|_| Structure::bad(TAG_EPOCH, "epoch out of range"))?)
        }
    };
    let mut package = InstalledRpm {
        name: required(TAG_NAME)?,
        epoch,
        version: required(TAG_VERSION)?,
        release: required(TAG_RELEASE)?,
        arch: h.string(TAG_ARCH)?.unwrap_or_default().to_owned(),
        paths: Vec::new(),
    };
    let Some(basenames) = h.strings(TAG_BASENAMES)? else {
        return Ok(package);
    };
    let dirs = FileDirs::read(&h)?;
    if dirs.count() != basenames.len() {
        return Err(RpmError::Header(
            "file tags disagree on the file count".into(),
        ));
    }
    // Paths share their directories in the header: bound what they expand to.
    let mut total = 0usize;
    let mut paths = Vec::with_capacity(basenames.len());
    for (i, base) in basenames.iter().enumerate() {
        let dir = dirs.dir(i)?;
        total = total.saturating_add(dir.len() + base.len());
        if total > MAX_HEADER_BYTES {
            return Err(RpmError::HeaderTooLarge);
        }
        paths.push(format!("{dir}{base}"));
    }
    package.paths = paths;
    Ok(package)
}

/// A package downloaded and hashed, with what its header says.
#[derive(Debug)]
pub(crate) struct ScannedRpm {
    pub digests: Digests,
    pub size_bytes: u64,
    pub downloaded_at: DateTime<Utc>,
    /// The header, or why it could not be read (the package's hashes stand either way).
    pub header: Result<RpmHeader, RpmError>,
}

/// Downloads a package within `limits`, hashing all of it (SHA-256, SHA-1, MD5) and keeping
/// only its first bytes, up to the end of the main header. Nothing touches disk.
pub(crate) async fn download_rpm(
    client: &reqwest::Client,
    url: &str,
    limits: &DownloadLimits,
    clock: &dyn Clock,
) -> Result<ScannedRpm, DownloadError> {
    let (mut body, deadline) = crate::download::open(client, url, limits).await?;
    let body = async {
        let mut hasher = TripleHasher::new()?;
        let mut head: Vec<u8> = Vec::new();
        // Ok(Some(end)) once the headers are all in `head`; Err once they cannot be.
        let mut state: Result<Option<usize>, RpmError> = Ok(None);
        while let Some(chunk) = body
            .chunk()
            .await
            .map_err(|e| DownloadError::body(url, e))?
        {
            if matches!(state, Ok(None)) {
                let room = (MAX_HEADER_BYTES * 2 + LEAD_BYTES).saturating_sub(head.len());
                head.extend_from_slice(&chunk[..chunk.len().min(room)]);
                state = header_end(&head);
            }
            hasher.update(&chunk).await?;
        }
        let size = hasher.size();
        let header = match state {
            Ok(Some(_)) => parse_header(&head),
            Ok(None) => Err(RpmError::NotRpm("the package ends inside its headers")),
            Err(e) => Err(e),
        };
        Ok::<_, DownloadError>((hasher.finish().await?, size, header))
    };
    let (digests, size_bytes, header) =
        timeout_at(deadline, body)
            .await
            .map_err(|_| DownloadError::Timeout {
                url: url.into(),
                timeout: limits.total_timeout,
            })??;
    Ok(ScannedRpm {
        digests,
        size_bytes,
        downloaded_at: clock.now(),
        header,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_and_foreign_bytes_are_told_apart() {
        assert_eq!(header_end(&[0xed, 0xab, 0xee, 0xdb]), Ok(None));
        assert_eq!(
            header_end(&[0u8; 200]),
            Err(RpmError::NotRpm("no lead magic"))
        );
        let mut lead = vec![0u8; 96];
        lead[..4].copy_from_slice(&LEAD_MAGIC);
        lead.extend([0x8e, 0xad, 0xe8, 0x01, 0, 0, 0, 0]);
        lead.extend(u32::MAX.to_be_bytes());
        lead.extend(1u32.to_be_bytes());
        assert_eq!(header_end(&lead), Err(RpmError::HeaderTooLarge));
    }
}
