//! MD5 of sixteen independent messages at once, one per 32-bit lane of an AVX-512
//! register.
//!
//! MD5 is a chain of 64 dependent steps per 64-byte block, so one message runs at the
//! latency of that chain (about 5 cycles a byte here) whatever the CPU's width. Sixteen
//! messages in the lanes of one register run the same chain for all of them at once:
//! `scan` hashes many files, so it gives each lane a file and gets sixteen blocks for
//! roughly the time of one. The boolean functions are single `vpternlogd` instructions
//! and the rotations `vprold`; each message word is gathered from the sixteen lanes'
//! blocks.
//!
//! The algorithm is RFC 1321's: state `A, B, C, D`, four rounds of sixteen steps, the
//! sine-derived constants and the padding (a 1 bit, zeros, the length in bits as a
//! little-endian 64-bit number).

/// Lanes per register.
pub(crate) const LANES: usize = 16;

/// The initial state (RFC 1321, section 3.3).
pub(crate) const IV: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

/// `T[i] = floor(2^32 * |sin(i + 1)|)` (RFC 1321, section 3.4); f64 is exact enough for
/// all 64 (the tests compare whole digests with an independent MD5).
pub(crate) fn constants() -> [u32; 64] {
    let mut t = [0u32; 64];
    for (i, v) in t.iter_mut().enumerate() {
        *v = (((i + 1) as f64).sin().abs() * 4_294_967_296.0) as u32;
    }
    t
}

/// Whether this CPU can run [`Md5x16`].
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The running state of sixteen MD5 computations, lane by lane.
pub(crate) struct Md5x16 {
    /// `state[w][lane]`: word `w` (A, B, C, D) of each lane.
    pub(crate) state: [[u32; LANES]; 4],
    t: [u32; 64],
}

impl Md5x16 {
    pub(crate) fn new() -> Self {
        Self {
            state: [
                [IV[0]; LANES],
                [IV[1]; LANES],
                [IV[2]; LANES],
                [IV[3]; LANES],
            ],
            t: constants(),
        }
    }

    /// Starts lane `lane` on a new message.
    pub(crate) fn reset(&mut self, lane: usize) {
        for (w, iv) in IV.iter().enumerate() {
            self.state[w][lane] = *iv;
        }
    }

    /// The digest of lane `lane`, once its padded message has been compressed.
    pub(crate) fn digest(&self, lane: usize) -> [u8; 16] {
        let mut out = [0u8; 16];
        for w in 0..4 {
            out[4 * w..4 * w + 4].copy_from_slice(&self.state[w][lane].to_le_bytes());
        }
        out
    }

    /// Compresses `blocks` consecutive 64-byte blocks of every lane in `active` (bit
    /// `i` for lane `i`): lane `i`'s start at `arena[offsets[i]..]`. Lanes outside
    /// `active` read nothing and keep their state.
    ///
    /// # Panics
    /// When an active lane's blocks run past the end of `arena`, or the CPU lacks
    /// AVX-512F (check [`available`] first).
    pub(crate) fn compress(
        &mut self,
        arena: &[u8],
        offsets: &[usize; LANES],
        active: u16,
        blocks: usize,
    ) {
        let span = blocks * 64;
        assert!(arena.len() <= i32::MAX as usize, "the arena is too large");
        for (i, &at) in offsets.iter().enumerate() {
            if active & (1 << i) != 0 {
                assert!(at + span <= arena.len(), "lane {i} reads past the arena");
            }
        }
        assert!(available(), "AVX-512F is not available");
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F is present (checked above) and every word gathered for an
        // active lane lies in `arena` (checked above; offsets fit in 32-bit indices);
        // inactive lanes are masked out of the gathers.
        unsafe {
            avx512::compress(self, arena, offsets, active, blocks);
        }
    }
}

impl Default for Md5x16 {
    fn default() -> Self {
        Self::new()
    }
}

/// Writes MD5's padding for a message of `total` bytes after its last partial block:
/// `tail` is that block's bytes (fewer than 64), `out` receives one or two whole blocks.
/// Returns how many bytes of `out` it filled (64 or 128).
pub(crate) fn pad(tail: &[u8], total: u64, out: &mut [u8; 128]) -> usize {
    let n = tail.len().min(63);
    out.fill(0);
    out[..n].copy_from_slice(&tail[..n]);
    out[n] = 0x80;
    let len = if n < 56 { 64 } else { 128 };
    out[len - 8..len].copy_from_slice(&total.wrapping_mul(8).to_le_bytes());
    len
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{LANES, Md5x16};

    const F: i32 = 0xCA; // b ? c : d
    const G: i32 = 0xE4; // d ? b : c
    const H: i32 = 0x96; // b ^ c ^ d
    const I: i32 = 0x39; // c ^ (b | !d)

    macro_rules! step {
        ($imm:expr, $a:ident, $b:ident, $c:ident, $d:ident, $kw:expr, $s:literal) => {
            let f = _mm512_ternarylogic_epi32::<{ $imm }>($b, $c, $d);
            $a = _mm512_add_epi32(
                $b,
                _mm512_rol_epi32::<$s>(_mm512_add_epi32(_mm512_add_epi32($a, f), $kw)),
            );
        };
    }

    /// See [`Md5x16::compress`].
    ///
    /// # Safety
    /// The CPU has AVX-512F; for every lane in `active`,
    /// `offsets[i] + blocks * 64 <= arena.len()`, and `arena.len() <= i32::MAX`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn compress(
        md: &mut Md5x16,
        arena: &[u8],
        offsets: &[usize; LANES],
        active: u16,
        blocks: usize,
    ) {
        let load = |words: &[u32; LANES]| {
            // SAFETY: `words` is 64 readable bytes; unaligned loads are allowed.
            unsafe { _mm512_loadu_si512(words.as_ptr().cast()) }
        };
        let mut a = load(&md.state[0]);
        let mut b = load(&md.state[1]);
        let mut c = load(&md.state[2]);
        let mut d = load(&md.state[3]);
        let mut index = [0i32; LANES];
        for (x, &at) in index.iter_mut().zip(offsets) {
            *x = at as i32;
        }
        // SAFETY: `index` is 64 readable bytes.
        let mut base = unsafe { _mm512_loadu_si512(index.as_ptr().cast()) };
        let step4 = _mm512_set1_epi32(4);
        let step64 = _mm512_set1_epi32(64);
        let k: [__m512i; 64] = std::array::from_fn(|i| _mm512_set1_epi32(md.t[i] as i32));
        let ptr = arena.as_ptr();
        for _ in 0..blocks {
            let mut w = [_mm512_setzero_si512(); 16];
            let mut at = base;
            for word in &mut w {
                // SAFETY: an active lane i reads 4 bytes at offsets[i] + 64 * block + 4 * j,
                // within `arena` by the caller's guarantee; inactive lanes read nothing.
                *word = unsafe {
                    _mm512_mask_i32gather_epi32::<1>(_mm512_setzero_si512(), active, at, ptr.cast())
                };
                at = _mm512_add_epi32(at, step4);
            }
            base = _mm512_add_epi32(base, step64);
            let (aa, bb, cc, dd) = (a, b, c, d);
            let kw = |i: usize, g: usize| _mm512_add_epi32(k[i], w[g]);
            for j in 0..4 {
                let i = 4 * j;
                step!(F, a, b, c, d, kw(i, i), 7);
                step!(F, d, a, b, c, kw(i + 1, i + 1), 12);
                step!(F, c, d, a, b, kw(i + 2, i + 2), 17);
                step!(F, b, c, d, a, kw(i + 3, i + 3), 22);
            }
            for j in 0..4 {
                let i = 16 + 4 * j;
                let g = |i: usize| (5 * i + 1) % 16;
                step!(G, a, b, c, d, kw(i, g(i)), 5);
                step!(G, d, a, b, c, kw(i + 1, g(i + 1)), 9);
                step!(G, c, d, a, b, kw(i + 2, g(i + 2)), 14);
                step!(G, b, c, d, a, kw(i + 3, g(i + 3)), 20);
            }
            for j in 0..4 {
                let i = 32 + 4 * j;
                let g = |i: usize| (3 * i + 5) % 16;
                step!(H, a, b, c, d, kw(i, g(i)), 4);
                step!(H, d, a, b, c, kw(i + 1, g(i + 1)), 11);
                step!(H, c, d, a, b, kw(i + 2, g(i + 2)), 16);
                step!(H, b, c, d, a, kw(i + 3, g(i + 3)), 23);
            }
            for j in 0..4 {
                let i = 48 + 4 * j;
                let g = |i: usize| (7 * i) % 16;
                step!(I, a, b, c, d, kw(i, g(i)), 6);
                step!(I, d, a, b, c, kw(i + 1, g(i + 1)), 10);
                step!(I, c, d, a, b, kw(i + 2, g(i + 2)), 15);
                step!(I, b, c, d, a, kw(i + 3, g(i + 3)), 21);
            }
            a = _mm512_add_epi32(a, aa);
            b = _mm512_add_epi32(b, bb);
            c = _mm512_add_epi32(c, cc);
            d = _mm512_add_epi32(d, dd);
        }
        for (w, v) in [a, b, c, d].into_iter().enumerate() {
            let old = load(&md.state[w]);
            let kept = _mm512_mask_blend_epi32(active, old, v);
            // SAFETY: `state[w]` is 64 writable bytes.
            unsafe { _mm512_storeu_si512(md.state[w].as_mut_ptr().cast(), kept) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(data: &[u8]) -> String {
        let mut buf = vec![0u8; 4096];
        let (d, _) = ingest::hasher::digest_reader(&mut &data[..], &mut buf).unwrap();
        d.md5
    }

    #[test]
    fn sixteen_lanes_match_a_reference_md5_at_every_length() {
        if !available() {
            return;
        }
        // Lengths around the padding edges (55, 56, 63, 64, ...) and longer messages,
        // sixteen at a time in one arena, each padded in place.
        let lengths: Vec<usize> = (0..200)
            .chain([1000, 4095, 4096, 65_536, 100_003])
            .collect();
        let mut seed = 0x1234_5678_u32;
        for group in lengths.chunks(LANES) {
            let room = group.iter().max().unwrap() + 128;
            let mut arena = vec![0u8; room * LANES];
            let mut messages = Vec::new();
            let mut offsets = [0usize; LANES];
            let mut blocks = [0usize; LANES];
            for (lane, &len) in group.iter().enumerate() {
                let msg: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                        (seed >> 24) as u8
                    })
                    .collect();
                let at = lane * room;
                let whole = len / 64 * 64;
                arena[at..at + whole].copy_from_slice(&msg[..whole]);
                let mut padded = [0u8; 128];
                let n = pad(&msg[whole..], len as u64, &mut padded);
                arena[at + whole..at + whole + n].copy_from_slice(&padded[..n]);
                offsets[lane] = at;
                blocks[lane] = (whole + n) / 64;
                messages.push(msg);
            }
            // Lanes of different lengths: compress in rounds of the shortest remaining.
            let mut md = Md5x16::new();
            let mut left = blocks;
            loop {
                let active: u16 = (0..group.len())
                    .filter(|&l| left[l] > 0)
                    .fold(0, |m, l| m | 1 << l);
                if active == 0 {
                    break;
                }
                let n = (0..group.len())
                    .filter(|&l| left[l] > 0)
                    .map(|l| left[l])
                    .min()
                    .unwrap();
                md.compress(&arena, &offsets, active, n);
                for l in 0..group.len() {
                    if left[l] > 0 {
                        left[l] -= n;
                        offsets[l] += n * 64;
                    }
                }
            }
            for (lane, msg) in messages.iter().enumerate() {
                assert_eq!(
                    hex::encode(md.digest(lane)),
                    reference(msg),
                    "length {}",
                    msg.len()
                );
            }
        }
    }

    #[test]
    fn known_answers() {
        if !available() {
            return;
        }
        // RFC 1321, appendix A.5.
        let cases: [(&[u8], &str); 3] = [
            (b"", "d41d8cd98f00b204e9800998ecf8427e"),
            (b"abc", "900150983cd24fb0d6963f7d28e17f72"),
            (
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        let mut arena = vec![0u8; 256 * LANES];
        let mut offsets = [0usize; LANES];
        let mut blocks = 0;
        for (lane, (msg, _)) in cases.iter().enumerate() {
            let at = lane * 256;
            let whole = msg.len() / 64 * 64;
            arena[at..at + whole].copy_from_slice(&msg[..whole]);
            let mut padded = [0u8; 128];
            let n = pad(&msg[whole..], msg.len() as u64, &mut padded);
            arena[at + whole..at + whole + n].copy_from_slice(&padded[..n]);
            offsets[lane] = at;
            blocks = (whole + n) / 64;
            assert!(lane < 2 || blocks == 2);
        }
        let mut md = Md5x16::new();
        // The first two are one block each; the third two.
        md.compress(&arena, &offsets, 0b011, 1);
        md.compress(&arena, &offsets, 0b100, blocks);
        for (lane, (_, want)) in cases.iter().enumerate() {
            assert_eq!(hex::encode(md.digest(lane)), *want);
        }
    }
}
