//! Redis's RDB format, sans I/O: the file Darner snapshots to and loads from, the payload of
//! DUMP / RESTORE, and (later) the body of a replication full sync. No sockets, no files, no
//! keyspace: the decoder reads byte slices and says how much it consumed, the encoder appends
//! to a `Vec<u8>`, and the server converts between [`Value`] and its own value types.
//!
//! # Layout
//!
//! | module | what it is for |
//! | --- | --- |
//! | `lib` (this file) | format constants ([`opcode`], [`object_type`], versions), the value model ([`Value`], [`Stream`], ...), [`Error`] |
//! | [`crc64`] | the CRC-64 trailer of files and DUMP payloads |
//! | [`lzf`] | LZF, for compressed strings (and the engine's compressed list nodes) |
//! | [`encode`] (`mod.rs`) | the encoder: why version 10 and these encodings, [`EncodeOptions`], [`dump_payload`] |
//! | `encode/writer.rs` | primitives: lengths, strings (int8/16/32, LZF), binary doubles, ms times, 7.0's score text |
//! | `encode/listpack.rs` | [`encode::Listpack`]: Redis's listpack format byte for byte |
//! | `encode/value.rs` | objects: [`encode_value`] for every [`Value`], the element-by-element `begin_*` writers, streams |
//! | `encode/file.rs` | file framing (header, AUX, SELECTDB, expiries, EOF + CRC) and [`encode::FileWriter`] |
//! | [`decode`] (`decode/mod.rs`) | the decoder: DUMP payloads ([`decode_dump_payload`]), files ([`FileDecoder`], incremental; [`decode_file`]); why it is shaped so |
//! | `decode/reader.rs` | lengths, strings (int8/16/32, LZF), doubles, times over input that may end early |
//! | `decode/value.rs` | one value by object type; element-by-element types read one unit at a time |
//! | `decode/listpack.rs`, `ziplist.rs`, `intset.rs`, `zipmap.rs` | the embedded encodings, validated as Redis's deep sanitization does |
//! | `decode/stream.rs` | streams: listpack nodes, metadata, consumer groups |
//! | `decode/file.rs` | the file state machine ([`Step`], [`Item`]) and [`decode_file`] |
//!
//! # The value model
//!
//! [`Value`] is what a key holds, independent of both Redis's encodings (listpack, intset,
//! quicklist, hashtable ...) and Darner's in-memory ones: the decoder turns every encoding of a
//! type into the same variant, and the encoder picks the encoding from the value (a listpack for
//! small collections, plain element-by-element types for big ones, which it can write in bounded
//! steps). Integers stored in integer encodings come back as their decimal text, as Redis
//! replies them, so a string is always bytes.
//!
//! # Hostile input
//!
//! Files and DUMP payloads come from outside. A length field is never trusted for an
//! allocation: buffers grow with what is actually read, a count larger than the remaining input
//! can hold is an error, nested encodings (a listpack inside a string) are checked entry by
//! entry, and no input makes the decoder panic. Every error names the offset where it was
//! found.

pub mod crc64;
pub mod decode;
pub mod encode;
pub mod lzf;

pub use decode::{
    decode_dump_payload, decode_file, decode_file_in_pieces, Checksum, Collector, DumpError,
    FileDecoder, FileInfo, Item, KeyStart, Kind, Step, ERR_BAD_DATA_FORMAT,
    ERR_DUMP_VERSION_OR_CHECKSUM,
};
pub use encode::{dump_payload, encode_value, EncodeOptions};

/// The RDB version Darner writes when the data needs nothing newer: Redis 7.0's, which Redis
/// 7.0, 7.2, 7.4 and Valkey 8 all load.
pub const WRITTEN_VERSION: u16 = 10;
/// The version Darner writes when a hash has field TTLs (Redis 7.4's types 24 and 25).
pub const WRITTEN_VERSION_FIELD_TTL: u16 = 12;
/// The newest version the decoder loads.
pub const MAX_VERSION: u16 = 12;

/// Opcodes: bytes that take the place of an object type at the top level of a file.
pub mod opcode {
    /// Module auxiliary data (unsupported: no modules).
    pub const MODULE_AUX: u8 = 247;
    /// Idle time of the next key (LRU), a length in seconds.
    pub const IDLE: u8 = 248;
    /// Access frequency of the next key (LFU), one byte.
    pub const FREQ: u8 = 249;
    /// An auxiliary field: two strings.
    pub const AUX: u8 = 250;
    /// Hash table size hints for the current database: two lengths.
    pub const RESIZEDB: u8 = 251;
    /// Expiry of the next key in milliseconds, 8 bytes little-endian.
    pub const EXPIRETIME_MS: u8 = 252;
    /// Expiry of the next key in seconds, 4 bytes little-endian (old files).
    pub const EXPIRETIME: u8 = 253;
    /// Switches to a database: a length.
    pub const SELECTDB: u8 = 254;
    /// End of the file (then the 8-byte checksum from version 5 on).
    pub const EOF: u8 = 255;
    /// A function library (Redis 7.0 GA and later): its code as a string.
    pub const FUNCTION2: u8 = 245;
    /// A function library in the Redis 7.0 release-candidate format (refused, as Redis does).
    pub const FUNCTION_PRE_GA: u8 = 246;
    /// Cluster slot information (Redis 7.4 / Valkey 8): slot id, slot size, expires size.
    pub const SLOT_INFO: u8 = 244;
}

/// Object types: the byte before a key (and the first byte of a DUMP payload).
pub mod object_type {
    pub const STRING: u8 = 0;
    /// A linked list of strings (legacy; still loaded, and a simple way to write a big list).
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    /// Sorted set with scores as strings (legacy).
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    /// Sorted set with binary double scores.
    pub const ZSET_2: u8 = 5;
    pub const MODULE_PRE_GA: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const SET_LISTPACK: u8 = 20;
    pub const STREAM_LISTPACKS_3: u8 = 21;
    /// Redis 7.4 pre-release hash-with-metadata types (never in a GA file; refused).
    pub const HASH_METADATA_PRE_GA: u8 = 22;
    pub const HASH_LISTPACK_EX_PRE_GA: u8 = 23;
    /// Redis 7.4: a hashtable hash with per-field TTLs.
    pub const HASH_METADATA: u8 = 24;
    /// Redis 7.4: a listpack hash with per-field TTLs.
    pub const HASH_LISTPACK_EX: u8 = 25;
    /// Darner's own type: a set whose members may have TTLs (SADDEX). No Redis loads it; a file
    /// holding one is written with Darner's version marker (see docs/compatibility.md).
    pub const DARNER_SET_TTL: u8 = 200;
}

/// A key's value, whatever encoding it had in the file.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Bytes (integer encodings come back as decimal text).
    String(Vec<u8>),
    /// Elements in order.
    List(Vec<Vec<u8>>),
    /// Members, in the file's order (no duplicates: the decoder refuses them).
    Set(Vec<Vec<u8>>),
    /// Members and their TTLs (absolute unix ms, `None` for no TTL): Darner's SADDEX sets.
    SetWithTtl(Vec<(Vec<u8>, Option<u64>)>),
    /// Members and scores, in the file's order (no duplicate members).
    SortedSet(Vec<(Vec<u8>, f64)>),
    /// Fields, in the file's order (no duplicate fields).
    Hash(Vec<HashField>),
    /// A stream with its consumer groups.
    Stream(Box<Stream>),
}

impl Value {
    /// A collection with no element (a string or a stream never counts as empty: an empty
    /// stream is still a key).
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::String(_) | Value::Stream(_) => false,
            Value::List(x) | Value::Set(x) => x.is_empty(),
            Value::SetWithTtl(x) => x.is_empty(),
            Value::SortedSet(x) => x.is_empty(),
            Value::Hash(x) => x.is_empty(),
        }
    }
}

/// One hash field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashField {
    pub field: Vec<u8>,
    pub value: Vec<u8>,
    /// The field's TTL as an absolute unix time in ms (Redis 7.4 HPEXPIREAT), if it has one.
    pub expire_at_ms: Option<u64>,
}

/// A stream entry id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

/// One stream entry: its id and field/value pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamEntry {
    pub id: StreamId,
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A stream as XINFO STREAM FULL shows it: entries, metadata and consumer groups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stream {
    /// Live entries in id order.
    pub entries: Vec<StreamEntry>,
    /// Number of live entries (equals `entries.len()` in a valid file).
    pub length: u64,
    pub last_id: StreamId,
    /// First id ever added and not trimmed (`recorded-first-entry-id`); RDB 10+.
    pub first_id: StreamId,
    /// `max-deleted-entry-id`; RDB 10+.
    pub max_deleted_id: StreamId,
    /// `entries-added`; RDB 10+.
    pub entries_added: u64,
    pub groups: Vec<StreamGroup>,
}

/// A consumer group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamGroup {
    pub name: Vec<u8>,
    pub last_delivered_id: StreamId,
    /// `entries-read`; `None` where Redis stores its "unknown" value (-1 / SCG_INVALID_ENTRIES_READ).
    pub entries_read: Option<u64>,
    /// The group's pending entries list, in id order.
    pub pending: Vec<PendingEntry>,
    pub consumers: Vec<StreamConsumer>,
}

/// One entry of a group's PEL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingEntry {
    pub id: StreamId,
    /// Last delivery time, unix ms.
    pub delivery_time_ms: u64,
    pub delivery_count: u64,
    /// The consumer that owns it (from the consumers' own PELs in the file).
    pub consumer: Vec<u8>,
}

/// A consumer of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamConsumer {
    pub name: Vec<u8>,
    /// `seen-time`, unix ms.
    pub seen_time_ms: u64,
    /// `active-time`, unix ms (RDB type 21; the seen time for older files, as Redis does).
    pub active_time_ms: u64,
    /// Ids of the entries this consumer owns, in id order.
    pub pending: Vec<StreamId>,
}

/// A key as the file stores it.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub db: u32,
    pub key: Vec<u8>,
    /// Absolute unix time in ms.
    pub expire_at_ms: Option<u64>,
    /// LRU idle seconds (`IDLE` opcode), if given.
    pub idle_seconds: Option<u64>,
    /// LFU counter (`FREQ` opcode), if given.
    pub lfu_freq: Option<u8>,
    pub value: Value,
}

/// Why a file or payload did not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// Offset in the input (file or payload) where the problem was found.
    pub offset: u64,
    pub kind: ErrorKind,
}

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Not an RDB file (no `REDIS` magic) or an unparseable version.
    BadMagic,
    /// A version newer than [`MAX_VERSION`].
    UnsupportedVersion(u16),
    /// An object type or opcode this decoder does not know (modules, pre-GA types).
    UnsupportedType(u8),
    /// The input ends inside an item.
    Truncated,
    /// The checksum trailer does not match.
    BadChecksum,
    /// Anything structurally wrong: bad length encoding, listpack/ziplist/intset that fails
    /// validation, duplicate members, counts that do not match, LZF errors ...
    Corrupt(&'static str),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            ErrorKind::BadMagic => {
                write!(f, "not an RDB file (bad magic) at offset {}", self.offset)
            }
            ErrorKind::UnsupportedVersion(v) => {
                write!(
                    f,
                    "can't handle RDB format version {v} (offset {})",
                    self.offset
                )
            }
            ErrorKind::UnsupportedType(t) => {
                write!(f, "unknown RDB object type {t} at offset {}", self.offset)
            }
            ErrorKind::Truncated => {
                write!(f, "unexpected end of RDB data at offset {}", self.offset)
            }
            ErrorKind::BadChecksum => write!(f, "wrong RDB checksum (offset {})", self.offset),
            ErrorKind::Corrupt(what) => write!(f, "bad RDB data at offset {}: {what}", self.offset),
        }
    }
}

impl std::error::Error for Error {}
