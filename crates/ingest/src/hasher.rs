//! One-pass SHA-256, SHA-1 and MD5 of a byte stream.
//!
//! Each algorithm runs on its own thread, so the pass costs about as much as the slowest
//! algorithm (MD5) rather than the sum of the three. All three come from AWS-LC: its SHA
//! uses the CPU's SHA extensions, and its MD5 is x86-64 assembly, about 30 % faster here
//! than the portable Rust MD5 (and than `md5sum`), which matters because MD5 sets the pace.
//!
//! Input is copied into 1 MiB pieces that the three threads share through bounded channels,
//! so a fast producer waits for the slowest hasher and memory stays at a few pieces whatever
//! the stream's length. Pieces are recycled once all three threads are done with them: a
//! network read into freshly allocated memory pays a page fault and the kernel's zeroing of
//! every page, which cost more than the copy (about a third of a CPU second per GB here),
//! while a recycled piece is already mapped and often still in cache. Nothing is written to
//! disk.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use aws_lc_rs::digest;
use bytes::Bytes;
use model::{HashAlgo, HashValue};
use tokio::sync::mpsc;

/// Size of the pieces handed to the hash threads.
const PIECE: usize = 1 << 20;
/// Pieces queued per algorithm before the producer waits.
const CHANNEL_PIECES: usize = 8;

/// The three digests of one stream, as lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digests {
    pub sha256: String,
    pub sha1: String,
    pub md5: String,
}

impl Digests {
    /// The computed value of one algorithm.
    pub fn get(&self, algo: HashAlgo) -> &str {
        match algo {
            HashAlgo::Sha256 => &self.sha256,
            HashAlgo::Sha1 => &self.sha1,
            HashAlgo::Md5 => &self.md5,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HasherError {
    #[error("the {0} hashing thread stopped unexpectedly")]
    WorkerFailed(&'static str),
    #[error("could not start a hashing thread: {0}")]
    Spawn(#[from] std::io::Error),
}

/// MD5 from AWS-LC (aws-lc-rs offers no MD5).
struct Md5(aws_lc_sys::MD5_CTX);

impl Md5 {
    fn new() -> Self {
        let mut ctx = aws_lc_sys::MD5_CTX {
            h: [0; 4],
            Nl: 0,
            Nh: 0,
            data: [0; 64],
            num: 0,
        };
        // SAFETY: `ctx` is a valid MD5_CTX that the call initialises; it cannot fail.
        unsafe { aws_lc_sys::MD5_Init(&mut ctx) };
        Self(ctx)
    }

    fn update(&mut self, data: &[u8]) {
        // SAFETY: the context was initialised by `new`; `data` is valid for its length.
        unsafe { aws_lc_sys::MD5_Update(&mut self.0, data.as_ptr().cast(), data.len()) };
    }

    fn finish(mut self) -> [u8; 16] {
        let mut out = [0u8; 16];
        // SAFETY: the context was initialised by `new`; `out` has MD5's 16 bytes.
        unsafe { aws_lc_sys::MD5_Final(out.as_mut_ptr(), &mut self.0) };
        out
    }
}

/// The running state of one algorithm.
enum State {
    Sha256(digest::Context),
    Sha1(digest::Context),
    Md5(Md5),
}

impl State {
    fn name(&self) -> &'static str {
        match self {
            State::Sha256(_) => "SHA-256",
            State::Sha1(_) => "SHA-1",
            State::Md5(_) => "MD5",
        }
    }

    fn update(&mut self, data: &[u8]) {
        match self {
            State::Sha256(c) | State::Sha1(c) => c.update(data),
            State::Md5(m) => m.update(data),
        }
    }

    fn finish(self) -> String {
        match self {
            State::Sha256(c) | State::Sha1(c) => hex::encode(c.finish().as_ref()),
            State::Md5(m) => hex::encode(m.finish()),
        }
    }
}

/// Piece buffers no hash thread holds any more, ready for reuse.
type FreePieces = Arc<Mutex<Vec<Vec<u8>>>>;

/// A full piece on its way to the three threads; its buffer goes back to the free list
/// when the last of them drops it.
struct Piece {
    buf: Vec<u8>,
    free: FreePieces,
}

impl AsRef<[u8]> for Piece {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Piece {
    fn drop(&mut self) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        // A poisoned lock only means the buffer is not reused.
        if let Ok(mut free) = self.free.lock() {
            free.push(buf);
        }
    }
}

struct Worker {
    name: &'static str,
    tx: mpsc::Sender<Bytes>,
    handle: JoinHandle<String>,
}

impl Worker {
    fn spawn(mut state: State) -> Result<Self, HasherError> {
        let name = state.name();
        let (tx, mut rx) = mpsc::channel::<Bytes>(CHANNEL_PIECES);
        let handle = std::thread::Builder::new()
            .name(format!("hash-{name}"))
            .spawn(move || {
                while let Some(chunk) = rx.blocking_recv() {
                    state.update(&chunk);
                }
                state.finish()
            })?;
        Ok(Self { name, tx, handle })
    }

    /// Closes the channel and waits for the thread to drain it.
    fn finish(self) -> Result<String, HasherError> {
        drop(self.tx);
        self.handle
            .join()
            .map_err(|_| HasherError::WorkerFailed(self.name))
    }
}

/// Computes SHA-256, SHA-1 and MD5 of a stream in one pass, one thread per algorithm.
///
/// Feed the bytes in order with [`update`](Self::update), then call
/// [`finish`](Self::finish) (the tests also drive it from plain threads). Dropping the hasher without finishing stops its threads.
pub(crate) struct TripleHasher {
    workers: [Worker; 3],
    /// The piece being filled.
    filling: Vec<u8>,
    free: FreePieces,
    size: u64,
}

impl TripleHasher {
    pub fn new() -> Result<Self, HasherError> {
        let workers = [
            Worker::spawn(State::Sha256(digest::Context::new(&digest::SHA256)))?,
            Worker::spawn(State::Sha1(digest::Context::new(
                &digest::SHA1_FOR_LEGACY_USE_ONLY,
            )))?,
            Worker::spawn(State::Md5(Md5::new()))?,
        ];
        Ok(Self {
            workers,
            filling: Vec::with_capacity(PIECE),
            free: FreePieces::default(),
            size: 0,
        })
    }

    /// Adds bytes to the stream, waiting while the slowest thread is behind.
    pub async fn update(&mut self, mut data: &[u8]) -> Result<(), HasherError> {
        while let Some(piece) = self.fill(&mut data) {
            self.send(&piece).await?;
        }
        Ok(())
    }

    /// Like [`update`](Self::update) for code outside an async runtime (the tests).
    ///
    /// # Panics
    /// When called from within an async runtime (tokio forbids blocking there).
    #[cfg(test)]
    fn update_blocking(&mut self, mut data: &[u8]) -> Result<(), HasherError> {
        while let Some(piece) = self.fill(&mut data) {
            self.send_blocking(&piece)?;
        }
        Ok(())
    }

    async fn send(&self, piece: &Bytes) -> Result<(), HasherError> {
        for w in &self.workers {
            // Cloning `Bytes` shares the piece; only a reference count changes.
            w.tx.send(piece.clone())
                .await
                .map_err(|_| HasherError::WorkerFailed(w.name))?;
        }
        Ok(())
    }

    #[cfg(test)]
    fn send_blocking(&self, piece: &Bytes) -> Result<(), HasherError> {
        for w in &self.workers {
            w.tx.blocking_send(piece.clone())
                .map_err(|_| HasherError::WorkerFailed(w.name))?;
        }
        Ok(())
    }

    /// Copies from `data` into the piece being filled; returns the piece once it is full.
    fn fill(&mut self, data: &mut &[u8]) -> Option<Bytes> {
        let take = (PIECE - self.filling.len()).min(data.len());
        self.filling.extend_from_slice(&data[..take]);
        *data = &data[take..];
        self.size += take as u64;
        (self.filling.len() == PIECE).then(|| self.take_piece())
    }

    /// The piece being filled, replaced by a recycled (or new) empty one.
    fn take_piece(&mut self) -> Bytes {
        let recycled = self.free.lock().ok().and_then(|mut free| free.pop());
        let next = recycled.unwrap_or_else(|| Vec::with_capacity(PIECE));
        let buf = std::mem::replace(&mut self.filling, next);
        Bytes::from_owner(Piece {
            buf,
            free: Arc::clone(&self.free),
        })
    }

    /// Bytes fed so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Hands over the last partial piece, closes the channels and collects the digests.
    ///
    /// Joining blocks while the threads drain their last few queued pieces.
    pub async fn finish(mut self) -> Result<Digests, HasherError> {
        if !self.filling.is_empty() {
            let last = self.take_piece();
            self.send(&last).await?;
        }
        self.join()
    }

    /// Like [`finish`](Self::finish) for code outside an async runtime (the tests).
    #[cfg(test)]
    fn finish_blocking(mut self) -> Result<Digests, HasherError> {
        if !self.filling.is_empty() {
            let last = self.take_piece();
            self.send_blocking(&last)?;
        }
        self.join()
    }

    fn join(self) -> Result<Digests, HasherError> {
        let [sha256, sha1, md5] = self.workers.map(Worker::finish);
        Ok(Digests {
            sha256: sha256?,
            sha1: sha1?,
            md5: md5?,
        })
    }
}

/// What a [`MemberHasher`] thread receives: bytes of the current file, or the end of it
/// with where to send that file's digest.
enum MemberMsg {
    Data(Bytes),
    End(std::sync::mpsc::SyncSender<String>),
}

/// SHA-256, SHA-1 and MD5 of many files in turn (the members of an archive), on three
/// threads kept for the whole archive, so a small file costs no thread start. Feed a file
/// with [`update`](Self::update), end it with [`finish_file`](Self::finish_file), repeat.
/// For plain threads only (it blocks while a hash thread is behind).
pub(crate) struct MemberHasher {
    workers: Vec<(
        &'static str,
        std::sync::mpsc::SyncSender<MemberMsg>,
        JoinHandle<()>,
    )>,
}

impl MemberHasher {
    pub fn new() -> Result<Self, HasherError> {
        let fresh: [fn() -> State; 3] = [
            || State::Sha256(digest::Context::new(&digest::SHA256)),
            || State::Sha1(digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY)),
            || State::Md5(Md5::new()),
        ];
        let mut workers = Vec::with_capacity(3);
        for make in fresh {
            let name = make().name();
            let (tx, rx) = std::sync::mpsc::sync_channel::<MemberMsg>(CHANNEL_PIECES);
            let handle = std::thread::Builder::new()
                .name(format!("member-{name}"))
                .spawn(move || {
                    let mut state = make();
                    while let Ok(msg) = rx.recv() {
                        match msg {
                            MemberMsg::Data(chunk) => state.update(&chunk),
                            MemberMsg::End(reply) => {
                                let done = std::mem::replace(&mut state, make());
                                // The caller gone means the archive was abandoned.
                                let _ = reply.send(done.finish());
                            }
                        }
                    }
                })?;
            workers.push((name, tx, handle));
        }
        Ok(Self { workers })
    }

    /// Adds the next bytes of the current file. `chunk` is shared, not copied.
    pub fn update(&mut self, chunk: Bytes) -> Result<(), HasherError> {
        for (name, tx, _) in &self.workers {
            tx.send(MemberMsg::Data(chunk.clone()))
                .map_err(|_| HasherError::WorkerFailed(name))?;
        }
        Ok(())
    }

    /// Ends the current file and returns its digests; the threads start on the next one.
    pub(crate) fn finish_file(&mut self) -> Result<Digests, HasherError> {
        let mut replies = Vec::with_capacity(3);
        for (name, tx, _) in &self.workers {
            let (reply_tx, reply_rx) = std::sync::mpsc::sync_channel(1);
            tx.send(MemberMsg::End(reply_tx))
                .map_err(|_| HasherError::WorkerFailed(name))?;
            replies.push((*name, reply_rx));
        }
        let mut out = replies
            .into_iter()
            .map(|(name, rx)| rx.recv().map_err(|_| HasherError::WorkerFailed(name)));
        let mut next = || {
            out.next()
                .unwrap_or(Err(HasherError::WorkerFailed("member")))
        };
        Ok(Digests {
            sha256: next()?,
            sha1: next()?,
            md5: next()?,
        })
    }
}

impl Drop for MemberHasher {
    fn drop(&mut self) {
        for (_, tx, handle) in std::mem::take(&mut self.workers) {
            drop(tx);
            let _ = handle.join();
        }
    }
}

/// A vendor-published hash that disagrees with the bytes the service downloaded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PublishedHashError {
    #[error(
        "published {algo} {published} does not match computed {computed}: the download or the \
         published value may have been tampered with"
    )]
    Mismatch {
        algo: &'static str,
        published: String,
        computed: String,
    },
    #[error("published hash is unusable: {0}")]
    Invalid(String),
}

/// Checks a vendor-published hash (MD5, SHA-1 or SHA-256, told apart by length, any case)
/// against the computed digests. `None` (nothing published) passes.
pub fn verify_published(
    published: Option<&str>,
    computed: &Digests,
) -> Result<(), PublishedHashError> {
    let Some(published) = published else {
        return Ok(());
    };
    let value =
        HashValue::parse(published).map_err(|e| PublishedHashError::Invalid(e.to_string()))?;
    let expected = computed.get(value.algo());
    if value.as_str() == expected {
        Ok(())
    } else {
        Err(PublishedHashError::Mismatch {
            algo: algo_name(value.algo()),
            published: value.as_str().to_owned(),
            computed: expected.to_owned(),
        })
    }
}

fn algo_name(algo: HashAlgo) -> &'static str {
    match algo {
        HashAlgo::Sha256 => "SHA-256",
        HashAlgo::Sha1 => "SHA-1",
        HashAlgo::Md5 => "MD5",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use md5::Digest as _;
    use rand::RngCore;

    fn hash_chunks(chunks: &[&[u8]]) -> Digests {
        let mut h = TripleHasher::new().unwrap();
        for c in chunks {
            h.update_blocking(c).unwrap();
        }
        h.finish_blocking().unwrap()
    }

    #[test]
    fn empty_input_gives_the_known_vectors() {
        let d = hash_chunks(&[]);
        assert_eq!(
            d.sha256,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(d.sha1, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(d.md5, "d41d8cd98f00b204e9800998ecf8427e");
    }

    #[test]
    fn abc_gives_the_known_vectors_however_it_is_split() {
        for chunks in [&[&b"abc"[..]][..], &[b"a", b"", b"bc"], &[b"ab", b"c"]] {
            let d = hash_chunks(chunks);
            assert_eq!(
                d.sha256,
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
            );
            assert_eq!(d.sha1, "a9993e364706816aba3e25717850c26c9cd0d89d");
            assert_eq!(d.md5, "900150983cd24fb0d6963f7d28e17f72");
        }
    }

    #[test]
    fn multi_megabyte_random_buffer_matches_single_threaded_hashers() {
        let mut buf = vec![0u8; 5 * 1024 * 1024 + 12_345];
        rand::rng().fill_bytes(&mut buf);

        let mut h = TripleHasher::new().unwrap();
        // Irregular chunk sizes, some spanning piece boundaries.
        let mut at = 0;
        let mut step = 1;
        while at < buf.len() {
            let end = (at + step).min(buf.len());
            h.update_blocking(&buf[at..end]).unwrap();
            at = end;
            step = step * 7 % 300_007 + 1;
        }
        assert_eq!(h.size(), buf.len() as u64);
        let d = h.finish_blocking().unwrap();

        assert_eq!(d.sha256, hex::encode(sha2::Sha256::digest(&buf)));
        assert_eq!(d.sha1, hex::encode(sha1::Sha1::digest(&buf)));
        assert_eq!(d.md5, hex::encode(md5::Md5::digest(&buf)));
    }

    #[test]
    fn published_hashes_are_checked_by_length_and_case_insensitively() {
        let d = hash_chunks(&[b"abc"]);
        assert_eq!(verify_published(None, &d), Ok(()));
        assert_eq!(verify_published(Some(&d.sha256.to_uppercase()), &d), Ok(()));
        assert_eq!(verify_published(Some(&d.sha1), &d), Ok(()));
        assert_eq!(verify_published(Some(&format!(" {} ", d.md5)), &d), Ok(()));
    }

    #[test]
    fn mismatch_names_both_values() {
        let d = hash_chunks(&[b"abc"]);
        let wrong = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let err = verify_published(Some(wrong), &d).unwrap_err();
        assert_eq!(
            err,
            PublishedHashError::Mismatch {
                algo: "SHA-256",
                published: wrong.into(),
                computed: d.sha256.clone(),
            }
        );
        let msg = err.to_string();
        assert!(msg.contains(wrong) && msg.contains(&d.sha256), "{msg}");
        assert!(msg.contains("tampered"), "{msg}");
    }

    #[test]
    fn unusable_published_values_are_errors_not_passes() {
        let d = hash_chunks(&[b"abc"]);
        for bad in ["", "xyz", &"g".repeat(64)] {
            assert!(matches!(
                verify_published(Some(bad), &d),
                Err(PublishedHashError::Invalid(_))
            ));
        }
    }
}

/// The three digests of a reader in one pass on the calling thread, and its length: for
/// callers that hash many files at once (`knowngood scan`), where parallelism comes from
/// hashing several files side by side rather than three threads per file. Each piece read
/// is fed to the three algorithms in cache-sized slices, so it is read from memory once.
pub fn digest_reader(
    reader: &mut impl std::io::Read,
    buf: &mut [u8],
) -> std::io::Result<(Digests, u64)> {
    /// Fits in L1/L2 with room to spare: the second and third algorithms find it cached.
    const SLICE: usize = 32 * 1024;
    let mut states = [
        State::Sha256(digest::Context::new(&digest::SHA256)),
        State::Sha1(digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY)),
        State::Md5(Md5::new()),
    ];
    let mut len = 0u64;
    loop {
        let n = match reader.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        len += n as u64;
        for slice in buf[..n].chunks(SLICE) {
            for state in &mut states {
                state.update(slice);
            }
        }
    }
    let [sha256, sha1, md5] = states.map(State::finish);
    Ok((Digests { sha256, sha1, md5 }, len))
}

#[cfg(test)]
mod reader_tests {
    use super::*;

    #[test]
    fn one_pass_digests_match_known_values() {
        let data = b"abc".repeat(50_000);
        let mut buf = vec![0u8; 4096];
        let (d, len) = digest_reader(&mut &data[..], &mut buf).unwrap();
        assert_eq!(len, 150_000);
        let sha256 = hex::encode(digest::digest(&digest::SHA256, &data).as_ref());
        assert_eq!(d.sha256, sha256);
        let (empty, _) = digest_reader(&mut &b""[..], &mut buf).unwrap();
        assert_eq!(empty.md5, "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(empty.sha1, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    }
}
