//! The RDB encoder: what Darner writes for SAVE / BGSAVE, DUMP and (later) a replication full
//! sync, in a form every Redis the project targets loads.
//!
//! # Why RDB version 10
//!
//! A snapshot is only useful if the servers people run next to Darner can read it. Redis 7.0
//! writes version 10; 7.2 and Valkey 8 write 11 and 7.4 writes 12, and each of them still
//! loads version 10 (a loader takes every older version). Version 11 adds nothing the data
//! needs (its one new type, the set listpack, is a denser form of sets that 10 already writes
//! as intsets or member lists), so writing 10 costs nothing and buys 7.0. The only thing 10
//! cannot hold is a hash field TTL (HEXPIRE, Redis 7.4): such a hash is written with 7.4's
//! types 24/25 and the file or payload says version 12, which only 7.4 and later load, as in
//! Redis itself.
//!
//! # Which encodings
//!
//! The loader of each version accepts a fixed set of object types, so the encoder picks, per
//! value, one that Redis 7.0 knows and that it would itself have written for a value like it
//! under its default configuration, so a loaded key ends up in the encoding Redis would have
//! given it:
//!
//! - strings: an int8/16/32 when the text is a canonical integer that fits, else LZF when it
//!   is long enough and compression saves a few bytes (`rdbcompression`), else verbatim;
//! - small hashes (≤ 512 fields of ≤ 64 bytes), sorted sets (≤ 128 members of ≤ 64 bytes)
//!   and lists (one listpack of ≤ 8 KiB) as a listpack: types 16, 17, and 18 (a quicklist of
//!   one packed node). The listpack is built byte for byte as Redis's `lpAppend` would, so a
//!   loaded value is usable as is;
//! - sets as an intset (11) when every member is an integer and there are ≤ 512, else as a
//!   member list (2); version 10 has no set listpack;
//! - streams as type 19 (STREAM_LISTPACKS_2, with the 7.0 metadata: first id, max deleted
//!   id, entries added, per-group entries read), nodes cut as XADD would cut them;
//! - Darner's sets with member TTLs as its own type 200, which no Redis loads (see
//!   docs/compatibility.md).
//!
//! # Why big values go element by element
//!
//! A big collection (a 10M-field hash) is written as a count followed by its elements: types
//! 4 (hash), 2 (set), 5 (sorted set with binary scores), 24 (hash with field TTLs) and 1
//! (list). Each element is independent, so the server can write the value in bounded steps
//! between other work, never holding a copy of the whole value, and the loader rebuilds the
//! encoding it wants. A big list uses the old type 1 (count + strings), not a quicklist,
//! because a quicklist starts with its node count, which is only known once the whole list has
//! been cut into nodes; Redis 7.0, 7.2, 7.4 and Valkey 8 all still load type 1.
//!
//! Small values are encoded whole ([`encode_value`]); the `begin_*` functions and their
//! per-element companions are the incremental path, and [`FileWriter`] frames a whole file
//! while keeping its running checksum.

mod file;
mod listpack;
mod value;
mod writer;

pub use file::{
    write_aux, write_eof, write_expire_ms, write_freq, write_function, write_header, write_idle,
    write_key, write_resize_db, write_select_db, FileWriter,
};
pub use listpack::Listpack;
pub use value::{
    begin_hash, begin_hash_with_ttl, begin_list, begin_set, begin_set_with_ttl, begin_stream,
    begin_zset, encode_value, end_stream, hash_field, hash_field_with_ttl, list_element,
    object_type_of, required_version, set_member, set_with_ttl_member, stream_node, zset_member,
    HASH_LISTPACK_MAX_ENTRIES, HASH_LISTPACK_MAX_VALUE, LIST_NODE_MAX_BYTES,
    SET_INTSET_MAX_ENTRIES, STREAM_NODE_MAX_BYTES, STREAM_NODE_MAX_ENTRIES,
    ZSET_LISTPACK_MAX_ENTRIES, ZSET_LISTPACK_MAX_VALUE,
};
pub use writer::{
    parse_canonical_i64, score_text, write_binary_double, write_len, write_ms, write_string,
};

use crate::crc64::crc64;
use crate::Value;

/// How to encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodeOptions {
    /// LZF-compress strings where it pays (`rdbcompression`, on by default as in Redis).
    pub compression: bool,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions { compression: true }
    }
}

/// A DUMP payload: the object type byte, the object, the RDB version (2 bytes LE: 10, or 12
/// for a hash with field TTLs) and the CRC-64 of all of it (8 bytes LE).
pub fn dump_payload(value: &Value, compression: bool) -> Vec<u8> {
    let mut out = vec![0];
    out[0] = encode_value(value, &EncodeOptions { compression }, &mut out);
    out.extend_from_slice(&required_version(value).to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}
