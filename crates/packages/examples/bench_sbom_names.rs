//! Time of the in-memory parts of an SBOM scan: parsing a generated CycloneDX document of
//! about 16 MB and analysing each component's name, with the typosquat analysis of 200
//! names for comparison. The server's benchmark (`bench_packages`) measures the whole
//! request against `GET /healthz`; this one shows where that time goes.
//!
//! cargo run --release -p packages --example bench_sbom_names

#![allow(clippy::unwrap_used, clippy::expect_used)] // benchmarks fail loudly

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use packages::{Detector, Ecosystem, KnownNames, Risk};

/// Live heap bytes and their peak, to show what parsing holds beside the body.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn mib(bytes: usize) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn main() {
    let start = Instant::now();
    let detector = Detector::new(KnownNames::shipped());
    println!(
        "indexes built in {:.0} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    let popular = detector.known().popular(Ecosystem::Npm).to_vec();
    let mut doc = String::from(r#"{"bomFormat":"CycloneDX","specVersion":"1.5","components":["#);
    let mut n = 0u64;
    while doc.len() < (16 << 20) - 400 {
        let r = splitmix(n);
        let name = if n.is_multiple_of(100) {
            let base = &popular[(r % 3000) as usize];
            let at = base.find('/').map_or(1, |i| i + 2).min(base.len());
            format!("{}x{}", &base[..at], &base[at..])
        } else {
            format!("component-{n}-{r:08x}")
        };
        if n > 0 {
            doc.push(',');
        }
        doc.push_str(&format!(
            r#"{{"type":"library","name":"{name}","version":"1.{}.0","purl":"pkg:npm/{name}@1.{}.0","hashes":[{{"alg":"SHA-256","content":"{:016x}{:016x}{:016x}{:016x}"}}]}}"#,
            r % 20, r % 20, splitmix(r), splitmix(r + 1), splitmix(r + 2), splitmix(r + 3)
        ));
        n += 1;
    }
    doc.push_str("]}");

    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let t = Instant::now();
    let sbom = packages::sbom::parse(doc.as_bytes()).unwrap();
    let parse = t.elapsed();
    println!(
        "parse: peak {:.1} MiB beside the body ({:.2}x its size), {:.1} MiB held by the components",
        mib(PEAK.load(Ordering::SeqCst) - before),
        (PEAK.load(Ordering::SeqCst) - before) as f64 / doc.len() as f64,
        mib(LIVE.load(Ordering::SeqCst) - before)
    );
    let none = HashSet::new();
    let t = Instant::now();
    let mut flagged = 0;
    for c in &sbom.components {
        let v = detector
            .analyse(Ecosystem::Npm, &c.name, &none, false)
            .unwrap();
        flagged += usize::from(v.risk == Risk::Typosquat);
    }
    let names = t.elapsed();
    let t = Instant::now();
    for name in popular.iter().take(200) {
        detector
            .analyse(Ecosystem::Npm, &format!("{name}-x"), &none, false)
            .unwrap();
    }
    let typo = t.elapsed();
    println!(
        "{} components ({:.1} MiB): parse {:.0} ms, names {:.0} ms ({:.1} µs each, {flagged} typosquats); 200 typosquat names {:.1} ms",
        sbom.components.len(),
        doc.len() as f64 / f64::from(1 << 20),
        parse.as_secs_f64() * 1e3,
        names.as_secs_f64() * 1e3,
        names.as_secs_f64() * 1e6 / sbom.components.len() as f64,
        typo.as_secs_f64() * 1e3
    );
}
