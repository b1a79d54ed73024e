//! The global allocator: mimalloc (fine-grained small size classes: a 33-byte entry block
//! costs 40 bytes, not 48), wrapped to count bytes in use for INFO's `used_memory`.
//!
//! Counting must not become a point of contention between threads, so each thread adds to
//! one of 64 cache-line-padded counters picked by a thread-local index; INFO sums them. A
//! block freed on another thread than the one that allocated it is fine: only the sum matters.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

#[repr(align(64))]
struct Padded(AtomicIsize);

const SLOTS: usize = 64;
static COUNTERS: [Padded; SLOTS] = [const { Padded(AtomicIsize::new(0)) }; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn slot() -> usize {
    // try_with: during thread teardown the TLS may be gone; fall back to slot 0.
    SLOT.try_with(|s| {
        let mut v = s.get();
        if v == usize::MAX {
            v = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS;
            s.set(v);
        }
        v
    })
    .unwrap_or(0)
}

pub struct Counting;

// SAFETY: every method forwards to mimalloc with the same arguments and only adds bookkeeping
// on plain atomics; layout and pointer contracts are mimalloc's, which implements GlobalAlloc.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract (see the impl comment).
        let p = unsafe { mimalloc::MiMalloc.alloc(l) };
        if !p.is_null() {
            COUNTERS[slot()]
                .0
                .fetch_add(l.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        COUNTERS[slot()]
            .0
            .fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded contract.
        unsafe { mimalloc::MiMalloc.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { mimalloc::MiMalloc.alloc_zeroed(l) };
        if !p.is_null() {
            COUNTERS[slot()]
                .0
                .fetch_add(l.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded contract.
        let q = unsafe { mimalloc::MiMalloc.realloc(p, l, new_size) };
        if !q.is_null() {
            COUNTERS[slot()]
                .0
                .fetch_add(new_size as isize - l.size() as isize, Ordering::Relaxed);
        }
        q
    }
}

/// Bytes currently allocated by the process through Rust's allocator.
pub fn used_memory() -> usize {
    COUNTERS
        .iter()
        .map(|c| c.0.load(Ordering::Relaxed))
        .sum::<isize>()
        .max(0) as usize
}

/// Resident set size from /proc (0 where unavailable).
pub fn rss() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|x| x.parse::<usize>().ok())
        })
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_allocations() {
        // The test binary uses the counting allocator too (see main.rs / lib.rs).
        let before = super::used_memory();
        let v = vec![0u8; 10 << 20];
        let during = super::used_memory();
        drop(v);
        assert!(during >= before + (10 << 20) - 4096, "{before} {during}");
    }
}
