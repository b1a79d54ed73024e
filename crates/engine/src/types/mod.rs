//! Collection value types, one file per Redis data type (Redis's t_hash.c, t_set.c, ...).
//!
//! Each type keeps a compact encoding for small values and switches to a structure with low
//! per-element overhead when it grows past the thresholds of Redis's config names
//! (`hash-max-listpack-entries`, `set-max-intset-entries`, ...). They are plain single-threaded
//! data structures: the server's shard thread owns them through the keyspace entry.
//!
//! `hll` is the exception: a HyperLogLog is a string value in Redis's exact byte format, and
//! the module holds the functions that read and update such strings.

pub mod dense;
pub mod hash;
pub mod hll;
pub mod list;
pub mod set;
pub mod stream;
pub mod zset;

pub use hash::{Hash, HashRef};
pub use list::{List, ListSeek, QuicklistInfo};
pub use set::Set;
pub use stream::{Stream, StreamId};
pub use zset::ZSet;

/// When a collection leaves its compact encoding: the values of Redis's directives of the same
/// names (the server passes the ones in force; `Default` is Redis's defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub hash_max_listpack_entries: usize,
    pub hash_max_listpack_value: usize,
    pub set_max_intset_entries: usize,
    pub set_max_listpack_entries: usize,
    pub set_max_listpack_value: usize,
    pub zset_max_listpack_entries: usize,
    pub zset_max_listpack_value: usize,
    /// Positive: entries per list node; -1..-5: node size 4, 8, 16, 32, 64 KiB.
    pub list_max_listpack_size: i64,
    /// Nodes at each end of a quicklist kept uncompressed (0: no compression).
    pub list_compress_depth: usize,
    /// A stream node takes no more entries once it has this many bytes (0: no limit).
    pub stream_node_max_bytes: usize,
    /// ... or this many entries (0: no limit).
    pub stream_node_max_entries: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            hash_max_listpack_entries: 128,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            set_max_listpack_entries: 128,
            set_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
        }
    }
}
