//! Allocations per operation, for the `count-allocs` feature.
//!
//! The SDK's cost over a hand-written client (issue #18, target 4) showed in profiles
//! as the allocator more than as any one function, so the load generator can count
//! the allocations its process makes over the measured window. Counting is the global
//! allocator's job, so the feature installs [`Counting`] around the process's allocator
//! in `main.rs`; without the feature this module is not built and the report leaves
//! the figures out.
//! The counters are two relaxed atomic adds per allocation: cheap, but not free, so
//! a counting build's throughput is not compared with a plain build's.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

/// A global allocator that counts the allocations (and reallocations, which may move)
/// and their bytes that it passes on to `A`.
pub struct Counting<A>(pub A);

// SAFETY: every call is passed to `A` unchanged; the counters only observe.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract is `A::alloc`'s.
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { self.0.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `A` through this allocator.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: as for `dealloc`.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

fn count(bytes: usize) {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
}

/// Allocations and bytes allocated so far in this process (the process's allocator is
/// a [`Counting`] one when this module is built).
pub fn snapshot() -> (u64, u64) {
    (
        ALLOCATIONS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    )
}
