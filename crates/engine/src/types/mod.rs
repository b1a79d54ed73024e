//! Collection value types, one file per Redis data type (Redis's t_hash.c, t_set.c, ...).
//!
//! Each type keeps a compact encoding for small values and switches to a structure with low
//! per-element overhead when it grows past the thresholds of Redis's config names
//! (`hash-max-listpack-entries`, `set-max-intset-entries`, ...). They are plain single-threaded
//! data structures: the server's shard thread owns them through the keyspace entry.

pub mod hash;
pub mod list;
pub mod set;
pub mod zset;

pub use hash::Hash;
pub use list::List;
pub use set::Set;
pub use zset::ZSet;
