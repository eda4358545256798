//! The process's heap in use, counted: the binary installs `Counting` as its global
//! allocator, and a runbook's engine stops a run whose data grows past a bound
//! (`opsbook_engine::engine`), whatever holds it — a map of large strings (Rhai checks an
//! array's or a map's total size on some assignments only), a string built by doubling.
//! Without the allocator installed (a library's own tests) `in_use` stays 0 and bounds nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

static IN_USE: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting the bytes it hands out and takes back.
pub struct Counting;

// SAFETY: every call is passed to `System` unchanged; only the count is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            IN_USE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            IN_USE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as `alloc`.
        unsafe { System.dealloc(ptr, layout) };
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            IN_USE.fetch_add(new_size, Ordering::Relaxed);
            IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

/// Has the C allocator serve every thread from two heaps. glibc gives each thread that
/// allocates an arena of its own (up to eight a core), grown a page at a time, one `mprotect`
/// each: a short run (`quick-check`, whose threads parse and prepare beside the main one)
/// spent more on those calls than on its parse. One arena for all had those threads queue for
/// its lock instead, each waking the other every few microseconds (quick-check 9.3 ms of CPU
/// against 8.1 ms with two). opsbook's threads mostly wait on the network: two heaps serve
/// the two that work at once. Called first thing, before any thread. glibc's own
/// `MALLOC_ARENA_MAX` in the environment wins.
pub fn two_heaps() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    // SAFETY: mallopt only sets an allocator parameter; it is called before other threads run.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Bytes of heap the process holds now (0 when `Counting` is not the global allocator).
pub fn in_use() -> usize {
    IN_USE.load(Ordering::Relaxed)
}
