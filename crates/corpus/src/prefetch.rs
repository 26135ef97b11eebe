//! Cache prefetch hints: lookups ask for the lines they will read next, for several hashes or
//! tables at once, so that the memory accesses overlap instead of following one another.
//! Public for the vendor lookup index (the `lookup` crate), which batches the same way.

/// Prefetches the cache line holding `items[i]`, if it exists.
#[inline(always)]
pub fn prefetch<T>(items: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(p) = items.get(i) {
        // SAFETY: a prefetch is a hint that cannot fault; SSE is part of the x86_64 baseline
        // and the pointer comes from a live slice.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (p as *const T).cast::<i8>(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (items, i);
}

/// Prefetches every cache line of `bytes[start..end]`.
#[inline(always)]
pub fn prefetch_range(bytes: &[u8], start: usize, end: usize) {
    if start >= end {
        return;
    }
    let mut at = start;
    while at < end {
        prefetch(bytes, at);
        at += 64;
    }
    prefetch(bytes, end - 1);
}
