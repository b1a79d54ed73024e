//! darner-engine: the data, apart from any socket or thread.
//!
//! Layout:
//! - [`entry`]: one key, its TTL, access clock and value in one compact heap block.
//! - [`table`]: the per-database hash table (extendible hashing over bounded segments, so it
//!   grows without an O(n) pause) and its SCAN order; `bucket`: one segment, cache-line buckets.
//! - [`db`]: a database: lazy and active expiry, WATCH bookkeeping, and `DbView`, the only way
//!   commands read and write keys.
//! - [`value`]: out-of-line values (grown strings, collections) and their types;
//!   [`types`]: the collection types, one file each (hash, list, set, sorted set).
//! - [`persist`]: conversion between values and the RDB value model (`darner_rdb::Value`), for
//!   DUMP / RESTORE, SAVE and loading: encodings chosen on load as commands would choose them.
//! - [`glob`]: Redis's glob matching (KEYS, SCAN MATCH, CONFIG GET).
//! - [`lzf`]: the LZF compression format (quicklist nodes), re-exported from `darner_rdb`.
//!
//! A shard (owned by exactly one server thread) is a `Vec<Db>`; this crate knows nothing of
//! threads: everything here is single-threaded and property-tested against simple models.

pub mod access;
mod bucket;
pub mod db;
pub mod entry;
pub mod glob;
/// LZF lives with the RDB format (`darner_rdb::lzf`); list nodes use it too.
pub use darner_rdb::lzf;
pub mod persist;
pub mod table;
pub mod types;
pub mod value;

pub use db::{keys_written, Clock, Db, DbView, Expired, WatchFlag, SCAN_DONE};
pub use entry::{Entry, ValueRef};
pub use glob::glob_match;
pub use table::hash_key;
pub use value::{Value, ValueType};

/// Starts loading the cache line at `p` (a hint: no fault, no architectural memory access).
#[cfg(target_arch = "x86_64")]
pub(crate) fn prefetch_line(p: *const u8) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: PREFETCHT0 is part of SSE, which every x86-64 CPU has; it never faults, even on
    // an invalid address, and changes nothing but the cache (p is a live bucket anyway).
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) };
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn prefetch_line(_p: *const u8) {}
