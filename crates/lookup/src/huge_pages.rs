//! Large arrays on transparent huge pages.
//!
//! The lookup index reads a few bytes at random from hundreds of megabytes. With 4 KiB pages
//! nearly every such read also misses the TLB, and in a virtual machine the page walk costs
//! several more memory accesses; 2 MiB pages cover the index with a few hundred TLB
//! entries. The memory must be advised before it is first touched, hence these
//! constructors. Where the kernel has transparent huge pages off, the advice is ignored.

const HUGE_PAGE: usize = 2 << 20;

/// `len` copies of `value`.
pub fn filled<T: Copy>(len: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    advise(&v);
    v.resize(len, value);
    v
}

/// A copy of `items`.
pub fn copy<T: Copy>(items: &[T]) -> Vec<T> {
    let mut v = Vec::with_capacity(items.len());
    advise(&v);
    v.extend_from_slice(items);
    v
}

/// Advises the huge pages wholly inside the vector's allocation.
fn advise<T>(v: &Vec<T>) {
    let bytes = v.capacity() * size_of::<T>();
    if bytes < HUGE_PAGE {
        return;
    }
    let start = (v.as_ptr() as usize).next_multiple_of(HUGE_PAGE);
    let end = (v.as_ptr() as usize + bytes) / HUGE_PAGE * HUGE_PAGE;
    #[cfg(target_os = "linux")]
    if end > start {
        // SAFETY: the range lies inside an allocation this vector owns; MADV_HUGEPAGE only
        // changes how the kernel backs it, never its contents, and failure is harmless.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, end);
}
