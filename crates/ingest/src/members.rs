//! Files inside archives: the executables and libraries a vendor's zip or tarball carries.
//!
//! An archive is downloaded once and streamed: the async side hashes the archive itself (to
//! check the vendor's published hash) and hands the same bytes to a scanning thread, which
//! decodes the container as it arrives (zip: local headers, stored or deflate, with or without
//! data descriptors; tar: plain, gzip, xz, bzip2 or zstd; a `.deb`'s `data.tar.*`) and hashes each regular member whose
//! first bytes say a host runs or loads it (PE, ELF, Mach-O, a `#!` script). Nothing is
//! written to disk; memory stays at a few buffers whatever the archive's size. Members are
//! only returned once the whole archive has been read, so the caller checks the archive's
//! hash before trusting any of them. Caps bound the archive, each member, the number of
//! entries and the bytes decoded (a decompression bomb stops at the cap).

use std::io::{self, BufRead, BufReader, Read};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use model::Clock;
use tokio::time::timeout_at;

use crate::authenticode::{SignatureCapture, SignerInfo};
use crate::download::{DownloadError, DownloadLimits};
use crate::hasher::{Digests, HasherError, MemberHasher, TripleHasher};

/// What kinds of file inside an archive are recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberKinds {
    pub pe: bool,
    pub elf: bool,
    pub macho: bool,
    /// Files starting with `#!`.
    pub script: bool,
}

impl MemberKinds {
    pub const ALL: Self = Self {
        pe: true,
        elf: true,
        macho: true,
        script: true,
    };
}

/// Bounds on reading the members of one archive.
#[derive(Debug, Clone)]
pub struct MemberLimits {
    /// Record files inside archives at all.
    pub enabled: bool,
    pub kinds: MemberKinds,
    /// Members recorded per archive; past it the rest of the archive is not scanned.
    pub max_members: usize,
    /// Entries (of any kind) read per archive.
    pub max_entries: usize,
    /// A larger member is read past, not recorded.
    pub max_member_bytes: u64,
    /// Bytes decoded per archive, all entries together (decompression bombs).
    pub max_decoded_bytes: u64,
}

impl Default for MemberLimits {
    fn default() -> Self {
        Self {
            enabled: true,
            kinds: MemberKinds::ALL,
            max_members: 5_000,
            max_entries: 200_000,
            max_member_bytes: 1 << 30,
            max_decoded_bytes: 16 << 30,
        }
    }
}

/// How a tarball is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Xz,
    Bzip2,
    Zstd,
}

/// The containers whose members are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveFormat {
    Zip,
    Tar(Compression),
    /// A Debian package: an `ar` archive whose `data.tar.*` member holds the files.
    Deb,
}

impl ArchiveFormat {
    /// The format a file name announces (`.zip`, `.whl`, `.nupkg`, `.tar`, `.tar.gz`/`.tgz`,
    /// `.tar.xz`/`.txz`, `.tar.bz2`/`.tbz2`, `.tar.zst`/`.tzst`), `None` for anything else.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        let name = name.to_ascii_lowercase();
        let ends = |suffixes: &[&str]| suffixes.iter().any(|s| name.ends_with(s));
        if ends(&[".deb"]) {
            Some(Self::Deb)
        } else if ends(&[".zip", ".whl", ".nupkg"]) {
            Some(Self::Zip)
        } else if ends(&[".tar"]) {
            Some(Self::Tar(Compression::None))
        } else if ends(&[".tar.gz", ".tgz"]) {
            Some(Self::Tar(Compression::Gzip))
        } else if ends(&[".tar.xz", ".txz"]) {
            Some(Self::Tar(Compression::Xz))
        } else if ends(&[".tar.bz2", ".tbz2", ".tbz"]) {
            Some(Self::Tar(Compression::Bzip2))
        } else if ends(&[".tar.zst", ".tzst"]) {
            Some(Self::Tar(Compression::Zstd))
        } else {
            None
        }
    }
}

/// What a member is, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutableKind {
    Pe,
    Elf,
    MachO,
    Script,
}

impl ExecutableKind {
    /// The kind of a file starting with `head`, when it is one `kinds` selects.
    pub(crate) fn detect(head: &[u8], kinds: MemberKinds) -> Option<Self> {
        let be32 = |at: usize| {
            head.get(at..at + 4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        };
        let kind = match head {
            [b'M', b'Z', ..] => Self::Pe,
            [0x7f, b'E', b'L', b'F', ..] => Self::Elf,
            [b'#', b'!', ..] => Self::Script,
            _ => match be32(0)? {
                0xfeed_face | 0xfeed_facf | 0xcefa_edfe | 0xcffa_edfe => Self::MachO,
                // Universal binaries share 0xcafebabe with Java class files; a fat header
                // counts its architectures (a handful), a class file has its version there.
                0xcafe_babe if be32(4).is_some_and(|n| (1..=30).contains(&n)) => Self::MachO,
                _ => return None,
            },
        };
        let wanted = match kind {
            Self::Pe => kinds.pe,
            Self::Elf => kinds.elf,
            Self::MachO => kinds.macho,
            Self::Script => kinds.script,
        };
        wanted.then_some(kind)
    }
}

/// One file inside an archive, hashed.
#[derive(Debug, Clone)]
pub struct Member {
    /// Path inside the archive, as the archive names it.
    pub path: String,
    pub kind: ExecutableKind,
    pub size: u64,
    pub digests: Digests,
    /// The Authenticode signer of a signed PE.
    pub pe_signer: Option<SignerInfo>,
}

/// What scanning an archive found.
#[derive(Debug, Clone, Default)]
pub struct MemberScan {
    pub members: Vec<Member>,
    /// Entries read (files, directories, links).
    pub entries: usize,
    /// Executable members left out: over the member size cap, or encrypted.
    pub skipped: usize,
    /// Why the scan stopped before the end of the archive (a cap, or an entry the reader
    /// cannot decode); the members before it stand.
    pub stopped: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    #[error("the archive is not a readable {format}: {reason}")]
    Unreadable {
        format: &'static str,
        reason: String,
    },
    /// A package whose files disagree with its own manifest (an Arch Linux package's
    /// `.MTREE`, a `.deb`'s `md5sums`): the package's SHA-256 matched the signed index, so
    /// its builder's file list and its files do not agree (possible tampering before
    /// signing).
    #[error("{path} does not match the package's {manifest}: {why}")]
    PackageManifestMismatch {
        path: String,
        manifest: &'static str,
        why: &'static str,
    },
    #[error("the package's .MTREE is unreadable: {0}")]
    PackageManifestUnreadable(String),
    #[error(transparent)]
    Hasher(#[from] HasherError),
}

/// Why the scan stopped early; not an error of the archive.
#[derive(Debug)]
enum Stop {
    Cap(String),
    Io(io::Error),
    Hasher(HasherError),
}

impl From<io::Error> for Stop {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<HasherError> for Stop {
    fn from(e: HasherError) -> Self {
        Self::Hasher(e)
    }
}

/// Size of the reads from a member (and of the pieces handed to the hash threads).
const CHUNK: usize = 256 << 10;

/// The largest `.MTREE` read, compressed and decompressed (a package's file list: tens of
/// kilobytes for coreutils).
const MAX_PACKAGE_MANIFEST: u64 = 8 << 20;

/// Reads every member of an archive from `reader` (the archive's bytes in order).
pub fn scan_archive(
    reader: impl Read,
    format: ArchiveFormat,
    limits: &MemberLimits,
) -> Result<MemberScan, MemberError> {
    let mut scanner = Scanner {
        limits,
        hasher: MemberHasher::new()?,
        scan: MemberScan::default(),
        decoded: 0,
        package_manifest: None,
        deb_control: None,
    };
    let reader = BufReader::with_capacity(CHUNK, reader);
    let (name, result) = match format {
        ArchiveFormat::Zip => ("zip", scanner.zip(reader)),
        ArchiveFormat::Tar(c) => ("tar", scanner.compressed_tar(reader, c)),
        ArchiveFormat::Deb => ("deb", scanner.deb(reader)),
    };
    let mut scan = scanner.scan;
    match result {
        Ok(()) => {}
        Err(Stop::Cap(why)) => scan.stopped = Some(why),
        Err(Stop::Hasher(e)) => return Err(e.into()),
        // Nothing usable read: the archive is not what its name says.
        Err(Stop::Io(e)) if scan.entries == 0 => {
            return Err(MemberError::Unreadable {
                format: name,
                reason: e.to_string(),
            });
        }
        Err(Stop::Io(e)) => scan.stopped = Some(format!("{name} entry unreadable: {e}")),
    }
    if let Some(raw) = &scanner.package_manifest {
        check_package_manifest(raw, &scan.members)?;
    }
    if let Some(control) = &scanner.deb_control {
        check_deb_md5sums(control, &scan.members)?;
    }
    Ok(scan)
}

/// Checks the members of an Arch Linux package against its `.MTREE`, the gzip-compressed
/// mtree(5) list makepkg writes of every file with its `sha256digest`: each member must be
/// listed there with the SHA-256 it hashed to.
fn check_package_manifest(raw: &[u8], members: &[Member]) -> Result<(), MemberError> {
    let unreadable = |why: String| MemberError::PackageManifestUnreadable(why);
    if raw.len() as u64 > MAX_PACKAGE_MANIFEST {
        return Err(unreadable(format!(
            "larger than {MAX_PACKAGE_MANIFEST} bytes"
        )));
    }
    let mut text = String::new();
    flate2::read::GzDecoder::new(raw)
        .take(MAX_PACKAGE_MANIFEST)
        .read_to_string(&mut text)
        .map_err(|e| unreadable(format!("not gzip-compressed text: {e}")))?;
    if !text.starts_with("#mtree") {
        return Err(unreadable("no #mtree header".into()));
    }
    let mut listed = std::collections::HashMap::new();
    for line in text.lines() {
        // `/set` and `/unset` lines give defaults; none carries a digest.
        let mut fields = line.split_ascii_whitespace();
        let Some(path) = fields.next().filter(|p| p.starts_with("./")) else {
            continue;
        };
        if let Some(sha) = fields.find_map(|f| f.strip_prefix("sha256digest=")) {
            listed.insert(mtree_unescape(&path[2..]), sha);
        }
    }
    for member in members {
        let path = member.path.trim_start_matches("./");
        let why = match listed.get(path) {
            Some(sha) if sha.eq_ignore_ascii_case(&member.digests.sha256) => continue,
            Some(_) => "a different SHA-256",
            None => "not listed",
        };
        return Err(MemberError::PackageManifestMismatch {
            path: path.to_owned(),
            manifest: ".MTREE",
            why,
        });
    }
    Ok(())
}

/// The `md5sums` and `conffiles` of a `.deb`'s control archive.
#[derive(Debug, Default)]
struct DebControl {
    md5sums: Option<String>,
    conffiles: Option<String>,
}

/// Checks the members of a `.deb` against its `md5sums` control file (`<md5>  <path>` per
/// line, as `dh_md5sums` writes it and `dpkg --verify` reads it): a member listed with
/// another MD5 disagrees; a member not listed disagrees unless it is a conffile (which
/// `md5sums` leaves out by design). A package without `md5sums` is not checked.
fn check_deb_md5sums(control: &DebControl, members: &[Member]) -> Result<(), MemberError> {
    let Some(md5sums) = &control.md5sums else {
        return Ok(());
    };
    let listed: std::collections::HashMap<&str, &str> = md5sums
        .lines()
        .filter_map(|l| l.split_once(char::is_whitespace))
        .map(|(md5, path)| (path.trim_start().trim_start_matches("./"), md5))
        .collect();
    let conffiles: std::collections::HashSet<&str> = control
        .conffiles
        .as_deref()
        .unwrap_or("")
        .lines()
        .map(|l| l.trim().trim_start_matches('/'))
        .collect();
    for member in members {
        let path = member.path.trim_start_matches("./").trim_start_matches('/');
        let why = match listed.get(path) {
            Some(md5) if md5.eq_ignore_ascii_case(&member.digests.md5) => continue,
            Some(_) => "a different MD5",
            None if conffiles.contains(path) => continue,
            None => "not listed",
        };
        return Err(MemberError::PackageManifestMismatch {
            path: path.to_owned(),
            manifest: "md5sums",
            why,
        });
    }
    Ok(())
}

/// mtree(5) writes bytes outside printable ASCII (and the space) as `\ooo` octal escapes.
fn mtree_unescape(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                let value = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(value).unwrap_or(u8::MAX));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

struct Scanner<'a> {
    limits: &'a MemberLimits,
    hasher: MemberHasher,
    scan: MemberScan,
    decoded: u64,
    /// An Arch Linux package's `.MTREE`, compressed, checked against the members at the end.
    package_manifest: Option<Vec<u8>>,
    /// A `.deb`'s control files, checked against the members at the end.
    deb_control: Option<DebControl>,
}

impl Scanner<'_> {
    fn count_entry(&mut self) -> Result<(), Stop> {
        self.scan.entries += 1;
        if self.scan.entries > self.limits.max_entries {
            return Err(Stop::Cap(format!(
                "more than {} entries",
                self.limits.max_entries
            )));
        }
        Ok(())
    }

    /// Reads one entry's content: hashed when its first bytes make it a member, read past
    /// otherwise. `drain` reads (and decodes) what is left of an entry of no interest; a zip
    /// entry of known size skips its compressed bytes instead, so the caller drains it.
    fn entry(&mut self, path: &str, content: &mut impl Read, drain: bool) -> Result<(), Stop> {
        let mut head = vec![0u8; CHUNK];
        let filled = self.read_full(content, &mut head)?;
        head.truncate(filled);
        let Some(kind) = ExecutableKind::detect(&head, self.limits.kinds) else {
            return self.drain(content, drain);
        };
        if self.scan.members.len() >= self.limits.max_members {
            return Err(Stop::Cap(format!(
                "more than {} members",
                self.limits.max_members
            )));
        }
        let mut size = head.len() as u64;
        let mut capture = (kind == ExecutableKind::Pe).then(|| SignatureCapture::new(16 << 20));
        let mut chunk = Bytes::from(head);
        loop {
            if size > self.limits.max_member_bytes {
                // Drop what was fed: the threads start the next file from scratch.
                self.hasher.finish_file()?;
                self.scan.skipped += 1;
                return self.drain(content, drain);
            }
            if let Some(c) = capture.as_mut() {
                c.push(&chunk);
            }
            let last = chunk.len() < CHUNK;
            if !chunk.is_empty() {
                self.hasher.update(chunk)?;
            }
            if last {
                break;
            }
            let mut buf = vec![0u8; CHUNK];
            let n = self.read_full(content, &mut buf)?;
            buf.truncate(n);
            size += n as u64;
            chunk = Bytes::from(buf);
        }
        let digests = self.hasher.finish_file()?;
        let pe_signer = capture.and_then(|c| c.finish().ok().flatten());
        self.scan.members.push(Member {
            path: path.to_owned(),
            kind,
            size,
            digests,
            pe_signer,
        });
        Ok(())
    }

    /// Reads what is left of an entry, counting it against the decoded-bytes cap.
    fn drain(&mut self, content: &mut impl Read, drain: bool) -> Result<(), Stop> {
        if drain {
            let mut buf = vec![0u8; CHUNK];
            while self.read_full(content, &mut buf)? > 0 {}
        }
        Ok(())
    }

    /// Fills `buf` unless the content ends first; counts decoded bytes against the cap.
    fn read_full(&mut self, r: &mut impl Read, buf: &mut [u8]) -> Result<usize, Stop> {
        let mut filled = 0;
        while filled < buf.len() {
            match r.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.decoded += filled as u64;
        if self.decoded > self.limits.max_decoded_bytes {
            return Err(Stop::Cap(format!(
                "more than {} bytes decoded",
                self.limits.max_decoded_bytes
            )));
        }
        Ok(filled)
    }

    fn compressed_tar(&mut self, reader: impl BufRead, c: Compression) -> Result<(), Stop> {
        match c {
            Compression::None => self.tar(reader),
            Compression::Gzip => self.tar(flate2::bufread::MultiGzDecoder::new(reader)),
            Compression::Xz => self.tar(liblzma::bufread::XzDecoder::new_multi_decoder(reader)),
            Compression::Bzip2 => self.tar(bzip2::bufread::MultiBzDecoder::new(reader)),
            Compression::Zstd => self.tar(zstd::stream::read::Decoder::with_buffer(reader)?),
        }
    }

    /// A `.deb` (deb(5)): `!<arch>` and 60-byte `ar` headers; `debian-binary`,
    /// `control.tar.*`, then `data.tar.*` (gz, xz, zst, bz2 or plain), whose files are the
    /// members. Nothing after it is read.
    fn deb(&mut self, mut r: impl BufRead) -> Result<(), Stop> {
        let invalid = |why: String| Stop::Io(io::Error::new(io::ErrorKind::InvalidData, why));
        let mut magic = [0u8; 8];
        r.read_exact(&mut magic)?;
        if &magic != b"!<arch>\n" {
            return Err(invalid("no ar signature".into()));
        }
        loop {
            let mut header = [0u8; 60];
            match r.read_exact(&mut header) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Err(invalid("no data.tar member".into()));
                }
                Err(e) => return Err(e.into()),
            }
            if &header[58..60] != b"`\n" {
                return Err(invalid("bad ar header".into()));
            }
            let name = String::from_utf8_lossy(&header[..16]);
            let name = name.trim_end().trim_end_matches('/');
            let size: u64 = std::str::from_utf8(&header[48..58])
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| invalid("bad ar member size".into()))?;
            let control = match name {
                "control.tar" => Some(Compression::None),
                "control.tar.gz" => Some(Compression::Gzip),
                "control.tar.xz" => Some(Compression::Xz),
                "control.tar.zst" => Some(Compression::Zstd),
                _ => None,
            };
            if let Some(c) = control {
                let mut member = (&mut r).take(size);
                self.deb_control = Some(self.control_tar(&mut member, c)?);
                // What the control reader left of the member.
                io::copy(&mut member, &mut io::sink())?;
                if size % 2 == 1 {
                    r.read_exact(&mut [0u8; 1])?;
                }
                continue;
            }
            let compression = match name {
                "data.tar" => Some(Compression::None),
                "data.tar.gz" => Some(Compression::Gzip),
                "data.tar.xz" => Some(Compression::Xz),
                "data.tar.zst" => Some(Compression::Zstd),
                "data.tar.bz2" => Some(Compression::Bzip2),
                _ => None,
            };
            let mut member = (&mut r).take(size);
            if let Some(c) = compression {
                return self.compressed_tar(member, c);
            }
            io::copy(&mut member, &mut io::sink())?;
            if size % 2 == 1 {
                r.read_exact(&mut [0u8; 1])?;
            }
        }
    }

    /// The `md5sums` and `conffiles` of a `.deb`'s control archive (each at most
    /// [`MAX_PACKAGE_MANIFEST`] bytes; a larger one is not used).
    fn control_tar(&mut self, reader: impl BufRead, c: Compression) -> Result<DebControl, Stop> {
        let reader: Box<dyn Read + '_> = match c {
            Compression::None => Box::new(reader),
            Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(reader)),
            Compression::Xz => Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(reader)),
            Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(reader)),
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(reader)?),
        };
        let mut control = DebControl::default();
        let mut archive = tar::Archive::new(reader);
        for entry in archive.entries()? {
            let mut entry = entry?;
            self.count_entry()?;
            let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let slot = match path.trim_start_matches("./") {
                "md5sums" => &mut control.md5sums,
                "conffiles" => &mut control.conffiles,
                _ => continue,
            };
            let mut raw = Vec::new();
            (&mut entry)
                .take(MAX_PACKAGE_MANIFEST + 1)
                .read_to_end(&mut raw)?;
            if raw.len() as u64 <= MAX_PACKAGE_MANIFEST {
                *slot = Some(String::from_utf8_lossy(&raw).into_owned());
            }
        }
        Ok(control)
    }

    fn tar(&mut self, reader: impl Read) -> Result<(), Stop> {
        let mut archive = tar::Archive::new(reader);
        for entry in archive.entries()? {
            let mut entry = entry?;
            self.count_entry()?;
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            if path == ".MTREE" && self.package_manifest.is_none() {
                let mut raw = Vec::new();
                (&mut entry)
                    .take(MAX_PACKAGE_MANIFEST + 1)
                    .read_to_end(&mut raw)?;
                self.package_manifest = Some(raw);
                continue;
            }
            self.entry(&path, &mut entry, true)?;
        }
        Ok(())
    }

    /// Walks a zip's local file headers in order (APPNOTE 4.3.7), up to the central
    /// directory.
    fn zip(&mut self, mut r: impl BufRead) -> Result<(), Stop> {
        const LOCAL: u32 = 0x0403_4b50;
        const CENTRAL: u32 = 0x0201_4b50;
        const END: u32 = 0x0605_4b50;
        const END64: u32 = 0x0606_4b50;
        const DESCRIPTOR: u32 = 0x0807_4b50;
        loop {
            let mut sig = [0u8; 4];
            match r.read_exact(&mut sig) {
                Ok(()) => {}
                // An archive truncated exactly after an entry (or an empty stream).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && self.scan.entries > 0 => {
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
            match u32::from_le_bytes(sig) {
                LOCAL => {}
                CENTRAL | END | END64 => return Ok(()),
                other => {
                    return Err(Stop::Io(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("unexpected signature {other:#010x}"),
                    )));
                }
            }
            self.count_entry()?;
            let mut h = [0u8; 26];
            r.read_exact(&mut h)?;
            let u16_at = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
            let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
            let (flags, method) = (u16_at(2), u16_at(4));
            let (mut compressed, mut uncompressed) = (u64::from(u32_at(14)), u64::from(u32_at(18)));
            let mut name = vec![0u8; usize::from(u16_at(22))];
            r.read_exact(&mut name)?;
            let mut extra = vec![0u8; usize::from(u16_at(24))];
            r.read_exact(&mut extra)?;
            let zip64 = zip64_sizes(&extra, &mut uncompressed, &mut compressed);
            let path = String::from_utf8_lossy(&name).into_owned();
            let encrypted = flags & 1 != 0;
            let descriptor = flags & 8 != 0;
            let is_dir = path.ends_with('/');

            if descriptor {
                // Sizes follow the data: only a self-terminating (deflate) stream can be
                // read through without the central directory.
                if method != 8 {
                    return Err(Stop::Cap(format!(
                        "{path}: method {method} with a data descriptor cannot be streamed"
                    )));
                }
                let mut inflate = flate2::bufread::DeflateDecoder::new(&mut r);
                if encrypted || is_dir {
                    self.drain(&mut inflate, true)?;
                } else {
                    self.entry(&path, &mut inflate, true)?;
                }
                drop(inflate);
                // [signature] crc32, then 4- or 8-byte sizes.
                let mut word = [0u8; 4];
                r.read_exact(&mut word)?;
                if u32::from_le_bytes(word) == DESCRIPTOR {
                    r.read_exact(&mut word)?;
                }
                let mut sizes = vec![0u8; if zip64 { 16 } else { 8 }];
                r.read_exact(&mut sizes)?;
                continue;
            }

            let mut data = (&mut r).take(compressed);
            let readable = !encrypted && !is_dir && matches!(method, 0 | 8);
            if encrypted && !is_dir {
                self.scan.skipped += 1;
            }
            if readable {
                if method == 0 {
                    self.entry(&path, &mut data, false)?;
                } else {
                    let mut inflate = flate2::bufread::DeflateDecoder::new(&mut data);
                    self.entry(&path, &mut inflate, false)?;
                }
            }
            // What is left of an entry of no interest is skipped compressed, not inflated.
            io::copy(&mut data, &mut io::sink())?;
        }
    }
}

/// Applies a zip64 extended-information field (id 1) to sizes saturated at 0xFFFFFFFF.
/// Returns whether the entry has one (its data descriptor then has 8-byte sizes).
fn zip64_sizes(extra: &[u8], uncompressed: &mut u64, compressed: &mut u64) -> bool {
    let mut rest = extra;
    while rest.len() >= 4 {
        let id = u16::from_le_bytes([rest[0], rest[1]]);
        let len = usize::from(u16::from_le_bytes([rest[2], rest[3]]));
        let Some(body) = rest.get(4..4 + len) else {
            return false;
        };
        if id == 1 {
            let mut fields = body.chunks_exact(8).map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                u64::from_le_bytes(b)
            });
            if *uncompressed == u64::from(u32::MAX)
                && let Some(v) = fields.next()
            {
                *uncompressed = v;
            }
            if *compressed == u64::from(u32::MAX)
                && let Some(v) = fields.next()
            {
                *compressed = v;
            }
            return true;
        }
        rest = &rest[4 + len..];
    }
    false
}

/// An archive downloaded, hashed and scanned in one pass.
#[derive(Debug)]
pub struct ScannedArchive {
    pub digests: Digests,
    pub size_bytes: u64,
    pub downloaded_at: DateTime<Utc>,
    /// The members, or why they could not be read (the archive's hashes stand either way).
    pub scan: Result<MemberScan, MemberError>,
}

/// Reads the bytes the download side sends, for the scanning thread.
struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(next) => self.current = next,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

/// Downloads `url` within `limits`, hashing the whole archive (SHA-256, SHA-1, MD5) while a
/// scanning thread reads its members from the same bytes. Nothing touches disk.
pub async fn download_archive(
    client: &reqwest::Client,
    url: &str,
    format: ArchiveFormat,
    limits: &DownloadLimits,
    members: &MemberLimits,
    clock: &dyn Clock,
) -> Result<ScannedArchive, DownloadError> {
    let (mut body, deadline) = crate::download::open(client, url, limits).await?;

    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let member_limits = members.clone();
    let scanner = tokio::task::spawn_blocking(move || {
        let reader = ChannelReader {
            rx,
            current: Bytes::new(),
        };
        scan_archive(reader, format, &member_limits)
    });
    let body = async {
        let mut hasher = TripleHasher::new()?;
        let mut tx = Some(tx);
        while let Some(chunk) = body
            .chunk()
            .await
            .map_err(|e| DownloadError::body(url, e))?
        {
            hasher.update(&chunk).await?;
            // A scanner that stopped (a cap, a bad entry) no longer listens; the archive
            // is still hashed to the end.
            if let Some(sender) = &tx
                && sender.send(chunk).await.is_err()
            {
                tx = None;
            }
        }
        drop(tx);
        let size = hasher.size();
        Ok::<_, DownloadError>((hasher.finish().await?, size))
    };
    let (digests, size_bytes) = match timeout_at(deadline, body).await {
        Ok(done) => done?,
        Err(_) => {
            return Err(DownloadError::Timeout {
                url: url.into(),
                timeout: limits.total_timeout,
            });
        }
    };
    let scan = scanner
        .await
        .unwrap_or_else(|_| Err(HasherError::WorkerFailed("archive scanner").into()));
    Ok(ScannedArchive {
        digests,
        size_bytes,
        downloaded_at: clock.now(),
        scan,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtree_paths_unescape_octal_bytes() {
        assert_eq!(mtree_unescape("usr/share/My\\040File"), "usr/share/My File");
        assert_eq!(
            mtree_unescape("usr/lib/caf\\303\\251.so"),
            "usr/lib/café.so"
        );
        // Not an escape: left as written.
        assert_eq!(mtree_unescape("a\\9b\\"), "a\\9b\\");
    }

    #[test]
    fn formats_come_from_names() {
        assert_eq!(
            ArchiveFormat::from_name("node-v20.11.0-win-x64.zip"),
            Some(ArchiveFormat::Zip)
        );
        assert_eq!(
            ArchiveFormat::from_name("go1.23.4.linux-amd64.tar.gz"),
            Some(ArchiveFormat::Tar(Compression::Gzip))
        );
        assert_eq!(
            ArchiveFormat::from_name("firefox-133.0.tar.XZ"),
            Some(ArchiveFormat::Tar(Compression::Xz))
        );
        assert_eq!(
            ArchiveFormat::from_name("coreutils_9.1-1_amd64.deb"),
            Some(ArchiveFormat::Deb)
        );
        assert_eq!(ArchiveFormat::from_name("putty.exe"), None);
        assert_eq!(ArchiveFormat::from_name("a.msi"), None);
    }

    #[test]
    fn kinds_come_from_magic() {
        let all = MemberKinds::ALL;
        assert_eq!(
            ExecutableKind::detect(b"MZ\x90\x00", all),
            Some(ExecutableKind::Pe)
        );
        assert_eq!(
            ExecutableKind::detect(b"\x7fELF\x02", all),
            Some(ExecutableKind::Elf)
        );
        assert_eq!(
            ExecutableKind::detect(&[0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1], all),
            Some(ExecutableKind::MachO)
        );
        assert_eq!(
            ExecutableKind::detect(&[0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 2], all),
            Some(ExecutableKind::MachO)
        );
        // A Java class file (version 52) is not a universal binary.
        assert_eq!(
            ExecutableKind::detect(&[0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 52], all),
            None
        );
        assert_eq!(
            ExecutableKind::detect(b"#!/bin/sh\n", all),
            Some(ExecutableKind::Script)
        );
        assert_eq!(ExecutableKind::detect(b"{\"name\"", all), None);
        let no_scripts = MemberKinds {
            script: false,
            ..all
        };
        assert_eq!(ExecutableKind::detect(b"#!/bin/sh\n", no_scripts), None);
    }
}
