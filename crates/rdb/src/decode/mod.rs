//! The RDB decoder: DUMP payloads ([`decode_dump_payload`]) and files ([`FileDecoder`],
//! [`decode_file`]).
//!
//! # Why it is shaped like this
//!
//! **Sans I/O and incremental.** A file can be many GB and is read by a server that must not
//! block its shard or hold the whole file in memory, so the file decoder never reads: it is
//! given the bytes at hand and answers either "an item, and it took this many bytes" or
//! "I need at least N more bytes" ([`Step`]). The caller keeps one buffer, drops what was
//! consumed, reads more when asked, and can yield between items. The decoder keeps no copy
//! of the input; its state between calls is a few numbers (offset, running CRC, the db, and
//! for a collection in progress how many elements are left). An item is parsed from the
//! start each time it is retried, and nothing in the decoder changes until it is complete,
//! so a short read is never an error, only a request for more.
//!
//! **Big values in steps.** Collections stored element by element (lists, sets, sorted sets
//! and hashes in their plain forms, quicklists, Redis 7.4's hashes with field TTLs) are the
//! ones that get big: Redis writes small collections as one listpack instead. Past
//! [`FileDecoder::set_inline_limit`] elements (or quicklist nodes) such a key comes as
//! [`Item::KeyStart`], then [`Item::Elements`] batches, then [`Item::KeyEnd`], so a
//! 10M-field hash needs the decoder to hold one batch, not the hash, and the caller's
//! buffer to hold one element, not the value. In that mode, refusing duplicate members or
//! fields is the consumer's job (it is inserting them into its own hash table anyway);
//! [`decode_file`] does it. Values stored as one blob (listpacks, intsets, ziplists,
//! zipmaps) and streams come whole as [`Item::Key`]: their size is bounded by the writer's
//! conversion thresholds, and a stream's groups refer to its entries.
//!
//! **Hostile input.** Files and DUMP payloads come from outside (RESTORE takes any bytes).
//! Every read is bounds-checked; a claimed length is never used to allocate before the
//! bytes are there (capacities are capped by what the input could hold, and LZF output by
//! what its input can expand to); a count that the rest of a complete payload could not
//! hold is refused up front. Embedded encodings are validated entry by entry as Redis does
//! with `sanitize-dump-payload yes`: listpack and ziplist headers, terminators, every
//! entry's bounds and back-length / previous-length, counts; intsets sorted and unique;
//! duplicate set members, hash fields and zset members; stream listpacks against their
//! master entries; NaN scores. Nothing panics; every error carries the offset (in the file
//! or payload) where it was found. For a problem inside an embedded blob (a listpack in a
//! string, possibly LZF-compressed) the offset is that of the string holding it.
//!
//! **Empty keys.** Redis skips empty collections when it loads a file and refuses them in
//! RESTORE; the file decoder reports them as [`Item::EmptyKey`], the DUMP decoder as bad
//! data. A stream with no entries is not empty in this sense (it is a valid key).

mod file;
mod intset;
mod listpack;
mod reader;
mod stream;
mod value;
mod ziplist;
mod zipmap;

pub use file::{
    decode_file, decode_file_in_pieces, Checksum, Collector, DecodedFile, FileDecoder, FileInfo,
    Item, KeyStart, Step, DEFAULT_BATCH_LIMIT, DEFAULT_INLINE_LIMIT,
};
pub use value::Kind;

use crate::{crc64::crc64, Error, ErrorKind, Value, MAX_VERSION};
use reader::Reader;

/// RESTORE's reply when the payload's version is too new or its checksum is wrong.
pub const ERR_DUMP_VERSION_OR_CHECKSUM: &str = "ERR DUMP payload version or checksum are wrong";
/// RESTORE's reply when the payload's object does not decode.
pub const ERR_BAD_DATA_FORMAT: &str = "ERR Bad data format";

/// Why a DUMP payload was refused, in Redis's two categories.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DumpError {
    /// Shorter than the 10-byte footer, a version above [`MAX_VERSION`], or a CRC that does
    /// not match (Redis checks it even when it is 0; only files may have checksums off).
    VersionOrChecksum,
    /// The object does not decode; the error says where and why.
    BadData(Error),
}

impl DumpError {
    /// The error reply Redis gives for it.
    pub fn message(&self) -> &'static str {
        match self {
            DumpError::VersionOrChecksum => ERR_DUMP_VERSION_OR_CHECKSUM,
            DumpError::BadData(_) => ERR_BAD_DATA_FORMAT,
        }
    }
}

impl std::fmt::Display for DumpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DumpError::VersionOrChecksum => f.write_str(self.message()),
            DumpError::BadData(e) => write!(f, "{}: {e}", self.message()),
        }
    }
}

impl std::error::Error for DumpError {}

/// Decodes a DUMP payload: `[type][object][version: u16 LE][CRC-64: u64 LE]`, the CRC over
/// everything before it. Returns the value and the payload's RDB version.
///
/// As Redis's RESTORE: bytes between the object and the footer are ignored, and the object
/// must not need the footer's bytes.
pub fn decode_dump_payload(payload: &[u8]) -> Result<(Value, u16), DumpError> {
    let n = payload.len();
    if n < 10 {
        return Err(DumpError::VersionOrChecksum);
    }
    let version = u16::from_le_bytes([payload[n - 10], payload[n - 9]]);
    if version > MAX_VERSION {
        return Err(DumpError::VersionOrChecksum);
    }
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&payload[n - 8..]);
    if crc64(0, &payload[..n - 8]) != u64::from_le_bytes(crc) {
        return Err(DumpError::VersionOrChecksum);
    }
    let body = &payload[..n - 10];
    let mut r = Reader::complete(body, 0);
    let end = body.len() as u64;
    let t = r.u8().map_err(|f| DumpError::BadData(f.into_error(end)))?;
    match value::read_value(&mut r, t) {
        Ok(Some(v)) => Ok((v, version)),
        Ok(None) => Err(DumpError::BadData(Error {
            offset: 0,
            kind: ErrorKind::Corrupt("empty key"),
        })),
        Err(f) => Err(DumpError::BadData(f.into_error(end))),
    }
}

/// One entry of a listpack or ziplist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl Elem<'_> {
    /// The bytes Redis replies for it (integers as decimal text).
    pub(crate) fn to_vec(self) -> Vec<u8> {
        match self {
            Elem::Int(i) => i.to_string().into_bytes(),
            Elem::Str(s) => s.to_vec(),
        }
    }

    /// Its integer value: an integer entry, or a string that is exactly a 64-bit integer's
    /// canonical decimal form (as Redis's `lpGetIntegerIfValid`).
    pub(crate) fn int(&self) -> Option<i64> {
        match *self {
            Elem::Int(i) => Some(i),
            Elem::Str(s) => {
                let v: i64 = std::str::from_utf8(s).ok()?.parse().ok()?;
                (v.to_string().as_bytes() == s).then_some(v)
            }
        }
    }
}

#[cfg(test)]
mod tests;
