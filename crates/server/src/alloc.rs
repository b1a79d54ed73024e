//! The global allocator: mimalloc (fine-grained small size classes: a 33-byte entry block
//! costs 40 bytes, not 48), wrapped to count bytes in use for INFO's `used_memory`.
//!
//! Counting must not become a point of contention between threads, so each thread adds to
//! one of 64 cache-line-padded counters picked by a thread-local index; INFO sums them. A
//! block freed on another thread than the one that allocated it is fine: only the sum matters.
//!
//! The first 63 threads each own a counter outright and update it with a plain load and store
//! (no locked read-modify-write: two of those per SET were 3% of a pipelined SET's CPU time);
//! any further threads share the last counter and add to it atomically.

use libmimalloc_sys as ffi;
use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

#[repr(align(64))]
struct Padded(AtomicIsize);

const SLOTS: usize = 64;
/// The counter shared by every thread past the first `SLOTS - 1`.
const SHARED_SLOT: usize = SLOTS - 1;
static COUNTERS: [Padded; SLOTS] = [const { Padded(AtomicIsize::new(0)) }; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn slot() -> usize {
    // try_with: during thread teardown the TLS may be gone; fall back to the shared slot.
    SLOT.try_with(|s| {
        let mut v = s.get();
        if v == usize::MAX {
            v = NEXT_SLOT.fetch_add(1, Ordering::Relaxed).min(SHARED_SLOT);
            s.set(v);
        }
        v
    })
    .unwrap_or(SHARED_SLOT)
}

/// Adds `n` to this thread's counter.
#[inline]
fn add(n: isize) {
    let i = slot();
    let c = &COUNTERS[i].0;
    if i == SHARED_SLOT {
        c.fetch_add(n, Ordering::Relaxed);
    } else {
        // Only this thread ever writes counter `i`, so load-then-store loses nothing; readers
        // (INFO) see either value, both of which were true at some moment.
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }
}

pub struct Counting;

/// Every mimalloc block is aligned to the machine word at least (its size classes are word
/// multiples), so a layout that asks for no more than that takes the plain entry points.
/// Why not `mi_malloc_aligned` for everything (the `mimalloc` crate's way): its fast path
/// only serves a size class whose free list is already filled; otherwise, for a block size
/// that is not a power of two, it falls back to over-allocating `size + align - 1` bytes.
/// A request's short-lived vector took that path every time (~150 instructions instead of
/// ~20), and a 40-byte keyspace entry could land in the 48-byte class.
const WORD: usize = std::mem::size_of::<usize>();

/// The largest alignment mimalloc gives a block by its size alone: a block whose size is a
/// power of two up to this is aligned to its size, and one whose size is a multiple of this
/// is aligned to this (its `mi_malloc_is_naturally_aligned`).
const NATURAL_ALIGN: usize = 4096;

/// What plain `mi_malloc` is asked for to serve `size` bytes aligned to `align`: a size whose
/// block mimalloc aligns that much by itself; None past [`NATURAL_ALIGN`] (those layouts take
/// `mi_malloc_aligned`). Why not `mi_malloc_aligned` for every alignment above a word: it
/// over-allocates `size + align - 1` bytes whenever its fast path misses (always above 1 KiB),
/// in a size class that the counters did not see. The keyspace table's full-grown segment, 8
/// KiB of 64-aligned buckets, took a 10 KiB block (25% of the table unaccounted for and
/// wasted: 2 MB of RSS over used_memory in a 64 MB cache, bench/eviction.py), and a
/// 16-aligned entry of a size class that is not a power of two (80, 96, 112 bytes...) took
/// the next class up whenever its class's current page was full.
///
/// Every block of 16 bytes or more is 16-aligned (the classes are multiples of 16 from there,
/// and pages start their blocks 16-aligned); above that, a power-of-two class is aligned to
/// itself up to 4 KiB and a class that is a multiple of 4 KiB to 4 KiB, so the request is
/// rounded up to the smallest such class. `requests_give_aligned_blocks_of_their_class`
/// checks it against mimalloc.
#[inline]
fn request(size: usize, align: usize) -> Option<usize> {
    if align <= 16 {
        return Some(if align <= WORD { size } else { size.max(16) });
    }
    if align > NATURAL_ALIGN {
        return None;
    }
    let n = size.max(align);
    let c = class_size(n);
    if c.is_power_of_two() || c.is_multiple_of(NATURAL_ALIGN) {
        return Some(n);
    }
    let p = c.next_power_of_two();
    Some(if p <= NATURAL_ALIGN {
        p
    } else {
        c.next_multiple_of(NATURAL_ALIGN)
    })
}

/// The bytes a block of a layout that [`request`] has no size for is counted as, the same at
/// its allocation and its free: what mimalloc says is usable from its (aligned) address.
///
/// # Safety
/// `p` must be a live block of this allocator.
unsafe fn usable(p: *mut c_void) -> usize {
    // SAFETY: the caller's contract; mi_usable_size only reads the block's page.
    unsafe { ffi::mi_usable_size(p) }
}

// SAFETY: every method forwards to mimalloc's malloc/zalloc/realloc/free with a size whose block
// mimalloc aligns as the layout asks (`request`), or to their `_aligned` forms (alignments past
// 4 KiB); mi_free takes blocks from both. The bookkeeping only touches plain atomics.
unsafe impl GlobalAlloc for Counting {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: see the impl comment; a null result is passed on as GlobalAlloc requires.
        unsafe {
            match request(l.size(), l.align()) {
                Some(n) => counted(ffi::mi_malloc(n), class_size(n) as isize),
                None => counted_usable(ffi::mi_malloc_aligned(l.size(), l.align())),
            }
        }
    }
    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        let n = match request(l.size(), l.align()) {
            Some(n) => class_size(n),
            // SAFETY: `p` is live until the mi_free below.
            None => unsafe { usable(p as *mut c_void) },
        };
        add(-(n as isize));
        // SAFETY: `p` came from one of this allocator's methods, all of which mi_free accepts.
        unsafe { ffi::mi_free(p as *mut c_void) }
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: as for alloc.
        unsafe {
            match request(l.size(), l.align()) {
                Some(n) => counted(ffi::mi_zalloc(n), class_size(n) as isize),
                None => counted_usable(ffi::mi_zalloc_aligned(l.size(), l.align())),
            }
        }
    }
    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `p` is a live block of layout `l` from this allocator. With a `request`
        // size, mi_realloc either keeps the block (aligned already) or moves the bytes to a
        // block of that size, which mimalloc aligns as `l` asks; otherwise the `_aligned`
        // form keeps `l`'s alignment.
        unsafe {
            match (request(l.size(), l.align()), request(new_size, l.align())) {
                (Some(old), Some(new)) => counted(
                    ffi::mi_realloc(p as *mut c_void, new),
                    class_size(new) as isize - class_size(old) as isize,
                ),
                _ => {
                    let before = usable(p as *mut c_void) as isize;
                    let q = ffi::mi_realloc_aligned(p as *mut c_void, new_size, l.align());
                    if q.is_null() {
                        return q as *mut u8;
                    }
                    counted(q, usable(q) as isize - before)
                }
            }
        }
    }
}

/// Counts a block that an `_aligned` entry point returned (null: nothing).
///
/// # Safety
/// `p` is null or a live block of this allocator.
unsafe fn counted_usable(p: *mut c_void) -> *mut u8 {
    if p.is_null() {
        return p as *mut u8;
    }
    // SAFETY: the caller's contract.
    counted(p, unsafe { usable(p) } as isize)
}

/// The bytes mimalloc really reserves for a request of `n` bytes (its size class), computed
/// inline (no call): what the counters count, as Redis counts a block's usable size
/// (zmalloc_size), so that `used_memory` and maxmemory's budget include the rounding up to a
/// class (a 120-byte entry takes 128 bytes: 6% of a cache of such keys), and the budget bounds
/// the resident memory (evict.rs). Alloc and free count the same function of the same size,
/// so the counters balance whatever it returns. mimalloc's classes: 8 bytes, then 16-byte
/// steps up to 64, then four per power of two; beyond 512 KiB, whole pages.
/// `class_size_is_mimallocs` checks it against `mi_good_size`.
#[inline]
fn class_size(n: usize) -> usize {
    if n <= 64 {
        return if n <= WORD { WORD } else { (n + 15) & !15 };
    }
    let w = n.div_ceil(WORD);
    if n > 512 << 10 {
        return n.next_multiple_of(4096);
    }
    let v = w - 1;
    let b = usize::BITS - 1 - v.leading_zeros();
    (((v >> (b - 2)) + 1) << (b - 2)) * WORD
}

/// Counts `grown` bytes for a block an allocation path returned; a null result (nothing
/// allocated, the old block untouched) counts nothing and is passed on.
fn counted(p: *mut c_void, grown: isize) -> *mut u8 {
    if !p.is_null() {
        add(grown);
    }
    p as *mut u8
}

/// Bytes currently allocated by the process through Rust's allocator.
pub fn used_memory() -> usize {
    // Only the counters handed out so far (one per thread that allocated): fewer cache lines
    // to read, for the eviction check that sums them every millisecond (evict.rs).
    let n = NEXT_SLOT.load(Ordering::Relaxed).min(SLOTS);
    COUNTERS[..n]
        .iter()
        .map(|c| c.0.load(Ordering::Relaxed))
        .sum::<isize>()
        .max(0) as usize
}

/// This thread's own counter: what it allocated minus what it freed, since it started (any
/// value, negative too; only its changes mean something). The eviction check measures what
/// a step freed with it, without reading other threads' counters (evict.rs).
pub fn thread_counter() -> isize {
    COUNTERS[slot()].0.load(Ordering::Relaxed)
}

/// Memory in use once the server was set up, before any client (MEMORY STATS'
/// `startup.allocated`).
static STARTUP: AtomicUsize = AtomicUsize::new(0);

/// Records the memory in use at start-up (see [`startup_memory`]).
pub fn mark_startup() {
    STARTUP.store(used_memory(), Ordering::Relaxed);
}

/// The resident set size and the bytes in use once every thread runs (their stacks, heaps
/// and buffers are resident by then), before any client: the base of [`sample_rss_overhead`].
static BASE_RSS: AtomicUsize = AtomicUsize::new(0);
static BASE_USED: AtomicUsize = AtomicUsize::new(0);

/// Takes the base of [`sample_rss_overhead`]: called once, by the first cron tick.
pub fn mark_rss_base() {
    BASE_RSS.store(rss(), Ordering::Relaxed);
    BASE_USED.store(used_memory(), Ordering::Relaxed);
}

/// Resident memory that the counters do not explain: how much more the resident set grew
/// since start-up than the bytes in use did (allocator fragmentation: pages kept for the
/// size classes that churn, metadata), as last sampled by [`sample_rss_overhead`].
static RSS_OVERHEAD: AtomicUsize = AtomicUsize::new(0);
/// The reference resident set size of [`sample_rss_overhead`].
static LAST_RSS: AtomicUsize = AtomicUsize::new(0);

/// One sample (one read of /proc/self/statm): the unexplained resident memory now, and
/// whether the resident set grew by `step` bytes or more since it last did (or since it was
/// last lower). Called by the cron of one thread, about ten times a second, while a
/// maxmemory is set.
pub fn sample_rss_overhead(step: usize) -> (usize, bool) {
    let rss = rss();
    if rss == 0 {
        // No /proc: nothing is added.
        return (0, false);
    }
    let grown = rss.saturating_sub(BASE_RSS.load(Ordering::Relaxed));
    let used = used_memory().saturating_sub(BASE_USED.load(Ordering::Relaxed));
    let overhead = grown.saturating_sub(used);
    RSS_OVERHEAD.store(overhead, Ordering::Relaxed);
    // LAST_RSS is the reference: it follows the resident set down at once, and up only by
    // whole steps (so a slow climb still counts, and noise does not).
    let reference = LAST_RSS.load(Ordering::Relaxed);
    let growing = reference != 0 && rss >= reference + step;
    if growing || rss < reference || reference == 0 {
        LAST_RSS.store(rss, Ordering::Relaxed);
    }
    (overhead, growing)
}

/// The memory in use when the server had started (0 before that).
pub fn startup_memory() -> usize {
    STARTUP.load(Ordering::Relaxed)
}

/// Gives the pages that freed blocks left empty back to the system, for this thread's heap.
/// Called by each worker's cron about once a second. Why: mimalloc returns empty pages to the
/// system as a side effect of later allocations, so a thread that went idle right after a
/// load or a big DEL kept that memory resident (335 MB after a 5M-field hash was deleted, 20
/// MB a second later with this). Cheap because big values are freed by the thread that owns
/// them (lazyfree.rs): measured at most 0.6 ms right after that DEL. Blocks freed by another
/// thread would have to be walked one by one here (35 ms for that hash when a background
/// thread freed it), and a forced collect purges everything at once (36 ms): neither is done.
pub fn release_free_pages() {
    // SAFETY: mi_collect only walks and trims the calling thread's own heap; it has no
    // preconditions and touches no memory the program still uses.
    unsafe { libmimalloc_sys::mi_collect(false) }
}

/// MEMORY PURGE, on each thread: collects this thread's heap thoroughly (`force`: abandoned
/// pages, delayed frees and purges too), giving every empty page back to the system now.
pub fn purge() {
    // SAFETY: as in release_free_pages; force only makes the walk thorough.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// MEMORY MALLOC-STATS: mimalloc's statistics report, as it prints it.
pub fn malloc_stats() -> String {
    unsafe extern "C" fn collect(msg: *const std::ffi::c_char, arg: *mut c_void) {
        // SAFETY: mimalloc passes a NUL-terminated message and our own `arg`, a live
        // `*mut String` for the duration of mi_stats_print_out.
        unsafe {
            let out = &mut *(arg as *mut String);
            out.push_str(&std::ffi::CStr::from_ptr(msg).to_string_lossy());
        }
    }
    let mut out = String::new();
    // SAFETY: the callback only appends to `out`, which outlives the call; mimalloc calls it
    // synchronously, on this thread, before returning.
    unsafe {
        libmimalloc_sys::mi_stats_print_out(Some(collect), &mut out as *mut String as *mut c_void)
    };
    out
}

/// mimalloc v3's `mi_option_purge_delay`: its place in the C enum `mi_option_e` (the sys
/// crate's constants skip it). `purge_delay_option_is_the_documented_one` checks it.
const PURGE_DELAY: ffi::mi_option_t = 15;

/// How many shards are freeing big values in steps, and mimalloc's purge delay from before
/// the first of them started.
static BULK_FREEING: std::sync::Mutex<(usize, std::ffi::c_long)> = std::sync::Mutex::new((0, 0));

/// Called when a shard starts freeing a big value in steps (lazyfree.rs), paired with
/// [`end_bulk_free`]. Why: mimalloc gives freed pages back to the system ("purges" them) a
/// second after they were freed (its `purge_delay`, 1000 ms in this version), so a big value
/// freed in steps was purged all at once by the once-a-second collect after the last step:
/// 13-28 ms in one loop turn for a 10M-field hash (`madvise` of ~650 MB). While a shard frees in
/// steps, pages are purged as they empty, inside the steps' time budget.
pub fn begin_bulk_free() {
    let mut g = BULK_FREEING.lock().unwrap_or_else(|e| e.into_inner());
    if g.0 == 0 {
        // SAFETY: mi_option_get/set read and write one option word; any value is allowed.
        unsafe {
            g.1 = ffi::mi_option_get(PURGE_DELAY);
            ffi::mi_option_set(PURGE_DELAY, 0);
        }
    }
    g.0 += 1;
}

/// See [`begin_bulk_free`]: the last shard to finish puts the purge delay back.
pub fn end_bulk_free() {
    let mut g = BULK_FREEING.lock().unwrap_or_else(|e| e.into_inner());
    g.0 = g.0.saturating_sub(1);
    if g.0 == 0 {
        // SAFETY: as in begin_bulk_free.
        unsafe { ffi::mi_option_set(PURGE_DELAY, g.1) };
    }
}

/// mimalloc's size class of an allocation of `n` bytes: what it really reserves. Given to the
/// engine at start-up (`darner_engine::entry::set_size_classes`), so that a keyspace block
/// that shrinks into a smaller class moves there, as a fresh block would be sized.
pub fn good_size(n: usize) -> usize {
    // SAFETY: mi_good_size computes on its argument only; it reads and writes no memory.
    unsafe { libmimalloc_sys::mi_good_size(n) }
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
    fn class_size_is_mimallocs() {
        for n in (1..600_000).step_by(7).chain(1..5000) {
            assert_eq!(super::class_size(n), super::good_size(n), "{n}");
        }
    }

    #[test]
    fn counts_allocations() {
        // The test binary uses the counting allocator too (see main.rs / lib.rs). The count is
        // the process's, and the other tests of this binary run on other threads meanwhile:
        // one of them freeing a lot between the two reads hides the 10 MiB (a run of the whole
        // suite failed so), so some try of twenty must see it.
        let mut seen = Vec::new();
        for _ in 0..20 {
            let before = super::used_memory();
            let v = vec![0u8; 10 << 20];
            let during = super::used_memory();
            drop(v);
            if during >= before + (10 << 20) - 4096 {
                return;
            }
            seen.push((before, during));
        }
        panic!("a 10 MiB allocation never showed in the count: {seen:?}");
    }

    #[test]
    fn requests_give_aligned_blocks_of_their_class() {
        // Every layout up to 4 KiB alignment is served by plain malloc of `request`'s size: the
        // block must be aligned as asked and be exactly the class the counters count (a
        // fallback to over-allocation, as mi_malloc_aligned does, would give a bigger block:
        // 10 KiB for the table's 8 KiB segments of 64-aligned buckets).
        use std::alloc::{GlobalAlloc, Layout};
        let a = super::Counting;
        let sizes = (1..300usize).chain((300..20_000).step_by(97)).chain([
            4096,
            8192,
            8193,
            12_288,
            65_536,
            100_000,
            600_000,
            1 << 20,
        ]);
        for align in [1usize, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096] {
            for size in sizes.clone() {
                let l = Layout::from_size_align(size, align).unwrap();
                let n = super::request(size, align).unwrap();
                // Several blocks, so that some come from a page's free list and some do not.
                let blocks: Vec<*mut u8> = (0..4)
                    .map(|_| {
                        // SAFETY: a non-zero size; freed below with the same layout.
                        unsafe { a.alloc(l) }
                    })
                    .collect();
                for &p in &blocks {
                    assert!(
                        !p.is_null() && (p as usize).is_multiple_of(align),
                        "{size} {align}"
                    );
                    // SAFETY: a live block of this allocator.
                    let usable = unsafe { libmimalloc_sys::mi_usable_size(p as *const _) };
                    // (Past 512 KiB mimalloc's block is its own page, sized in 64 KiB
                    // slices: bigger than mi_good_size says.)
                    if n <= 512 << 10 {
                        assert_eq!(usable, super::class_size(n), "{size} {align}");
                    }
                    assert!(usable >= size);
                }
                for p in blocks {
                    // SAFETY: allocated above with `l`, freed once.
                    unsafe { a.dealloc(p, l) };
                }
            }
        }
        // Past 4 KiB of alignment: the aligned entry point, counted by its usable size.
        assert_eq!(super::request(100, 8192), None);
    }

    #[test]
    fn every_alignment_and_path_gives_usable_aligned_blocks() {
        use std::alloc::{GlobalAlloc, Layout};
        let a = super::Counting;
        for align in [1usize, 2, 8, 16, 64, 4096, 8192, 1 << 16] {
            for size in [1usize, 7, 24, 40, 100, 1000, 8192, 70_000] {
                let l = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero sizes; every block is written within its size, checked
                // for alignment, grown with realloc under the same layout and freed once.
                unsafe {
                    let z = a.alloc_zeroed(l);
                    assert!(
                        !z.is_null() && (z as usize).is_multiple_of(align),
                        "{size} {align}"
                    );
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                    a.dealloc(z, l);
                    let p = a.alloc(l);
                    assert!(
                        !p.is_null() && (p as usize).is_multiple_of(align),
                        "{size} {align}"
                    );
                    std::ptr::write_bytes(p, 0xa5, size);
                    let q = a.realloc(p, l, size * 3);
                    assert!(
                        !q.is_null() && (q as usize).is_multiple_of(align),
                        "{size} {align}"
                    );
                    assert!(std::slice::from_raw_parts(q, size)
                        .iter()
                        .all(|&b| b == 0xa5));
                    std::ptr::write_bytes(q, 0x5a, size * 3);
                    a.dealloc(q, Layout::from_size_align(size * 3, align).unwrap());
                }
            }
        }
    }

    #[test]
    fn purge_delay_option_is_the_documented_one() {
        // The option at this index must be the purge delay: this mimalloc's default for it is
        // 1000 ms (options.c). (The test binary does not set MIMALLOC_PURGE_DELAY.)
        // SAFETY: reading an option has no preconditions.
        let v = unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY) };
        assert_eq!(v, 1000);
        super::begin_bulk_free();
        super::begin_bulk_free();
        // SAFETY: as above.
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY) },
            0
        );
        super::end_bulk_free();
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY) },
            0
        );
        super::end_bulk_free();
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY) },
            1000
        );
        let blocks: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 256 << 10]).collect();
        super::begin_bulk_free();
        drop(blocks);
        super::end_bulk_free();
    }

    #[test]
    fn released_pages_are_reusable() {
        // Blocks freed by another thread, then a collect by the owner, then new allocations
        // in the same size classes: everything stays usable. (No used_memory check: tests
        // run in parallel and the counter is the process's.)
        let blocks: Vec<Vec<u8>> = (0..256).map(|i| vec![i as u8; 64 << 10]).collect();
        std::thread::spawn(move || drop(blocks)).join().unwrap();
        super::release_free_pages();
        let again: Vec<Vec<u8>> = (0..256).map(|i| vec![i as u8; 64 << 10]).collect();
        assert!(again
            .iter()
            .enumerate()
            .all(|(i, b)| b.iter().all(|&x| x == i as u8)));
        drop(again);
        super::release_free_pages();
    }

    #[test]
    fn counts_on_more_threads_than_counters() {
        // 80 threads: past the 63 owned counters, the rest share one and add atomically.
        let before = super::used_memory();
        let (tx, rx) = std::sync::mpsc::channel();
        let release = std::sync::Arc::new(std::sync::Barrier::new(81));
        let handles: Vec<_> = (0..80)
            .map(|_| {
                let tx = tx.clone();
                let release = release.clone();
                std::thread::spawn(move || {
                    let v = vec![1u8; 1 << 20];
                    tx.send(()).unwrap();
                    release.wait();
                    drop(v);
                })
            })
            .collect();
        for _ in 0..80 {
            rx.recv().unwrap();
        }
        let during = super::used_memory();
        release.wait();
        for h in handles {
            h.join().unwrap();
        }
        assert!(
            during >= before + (80 << 20) - (4 << 20),
            "{before} {during}"
        );
        assert!(super::used_memory() < during - (40 << 20));
    }
}
