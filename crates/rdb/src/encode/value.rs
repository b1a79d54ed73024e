//! Objects: the bytes after a key's type byte, for every [`Value`] variant, whole
//! ([`encode_value`]) or element by element (`begin_*` and the per-element functions, for the
//! server to write a big collection in bounded steps).

use super::listpack::{entry_size, Listpack};
use super::writer::{
    parse_canonical_i64, score_text, write_binary_double, write_len, write_ms, write_string,
};
use super::EncodeOptions;
use crate::{object_type as t, HashField, Stream, StreamEntry, StreamId, Value};
use crate::{WRITTEN_VERSION, WRITTEN_VERSION_FIELD_TTL};

/// Redis's default `hash-max-listpack-entries`: more fields and the hash is written field by
/// field.
pub const HASH_LISTPACK_MAX_ENTRIES: usize = 512;
/// Redis's default `hash-max-listpack-value`: a longer field or value, and the hash is written
/// field by field.
pub const HASH_LISTPACK_MAX_VALUE: usize = 64;
/// Redis's default `zset-max-listpack-entries`.
pub const ZSET_LISTPACK_MAX_ENTRIES: usize = 128;
/// Redis's default `zset-max-listpack-value` (on members).
pub const ZSET_LISTPACK_MAX_VALUE: usize = 64;
/// Redis's default `set-max-intset-entries`.
pub const SET_INTSET_MAX_ENTRIES: usize = 512;
/// A list whose listpack would be at most this big is written as one quicklist node (Redis's
/// default `list-max-listpack-size -2`, 8 KiB); a bigger one element by element.
pub const LIST_NODE_MAX_BYTES: usize = 8192;
/// Redis's default `stream-node-max-bytes` and `stream-node-max-entries`: where a stream's
/// entries are cut into nodes.
pub const STREAM_NODE_MAX_BYTES: usize = 4096;
pub const STREAM_NODE_MAX_ENTRIES: usize = 100;

/// Quicklist node container: a listpack (`QUICKLIST_NODE_CONTAINER_PACKED`).
const CONTAINER_PACKED: u64 = 2;
/// Stream entry flags.
const STREAM_ITEM_FLAG_NONE: i64 = 0;
const STREAM_ITEM_FLAG_SAMEFIELDS: i64 = 2;
/// The `entries-read` Redis stores for "unknown" (`SCG_INVALID_ENTRIES_READ`, -1 as a u64).
const ENTRIES_READ_UNKNOWN: u64 = u64::MAX;

/// The RDB version a file or DUMP payload holding `value` must declare: 12 for a hash with
/// field TTLs (types 24/25 came with Redis 7.4), else 10.
pub fn required_version(value: &Value) -> u16 {
    match value {
        Value::Hash(fields) if has_field_ttl(fields) => WRITTEN_VERSION_FIELD_TTL,
        _ => WRITTEN_VERSION,
    }
}

fn has_field_ttl(fields: &[HashField]) -> bool {
    fields.iter().any(|f| f.expire_at_ms.is_some())
}

/// The object type [`encode_value`] writes for `value` (the byte that goes before the key).
pub fn object_type_of(value: &Value) -> u8 {
    match value {
        Value::String(_) => t::STRING,
        Value::List(items) => {
            if list_fits_one_node(items) {
                t::LIST_QUICKLIST_2
            } else {
                t::LIST
            }
        }
        Value::Set(members) => {
            if intset_members(members).is_some() {
                t::SET_INTSET
            } else {
                t::SET
            }
        }
        Value::SetWithTtl(_) => t::DARNER_SET_TTL,
        Value::SortedSet(members) => {
            if zset_fits_listpack(members) {
                t::ZSET_LISTPACK
            } else {
                t::ZSET_2
            }
        }
        Value::Hash(fields) => match (has_field_ttl(fields), hash_fits_listpack(fields)) {
            (false, true) => t::HASH_LISTPACK,
            (false, false) => t::HASH,
            (true, true) => t::HASH_LISTPACK_EX,
            (true, false) => t::HASH_METADATA,
        },
        Value::Stream(_) => t::STREAM_LISTPACKS_2,
    }
}

fn list_fits_one_node(items: &[Vec<u8>]) -> bool {
    let mut total = 7usize; // header + terminator
    for e in items {
        total += entry_size(e);
        if total > LIST_NODE_MAX_BYTES {
            return false;
        }
    }
    true
}

fn hash_fits_listpack(fields: &[HashField]) -> bool {
    fields.len() <= HASH_LISTPACK_MAX_ENTRIES
        && fields.iter().all(|f| {
            f.field.len() <= HASH_LISTPACK_MAX_VALUE && f.value.len() <= HASH_LISTPACK_MAX_VALUE
        })
}

fn zset_fits_listpack(members: &[(Vec<u8>, f64)]) -> bool {
    members.len() <= ZSET_LISTPACK_MAX_ENTRIES
        && members
            .iter()
            .all(|(m, _)| m.len() <= ZSET_LISTPACK_MAX_VALUE)
}

/// The members as integers when the set can be an intset: non-empty, at most 512 members,
/// each the canonical text of an i64.
fn intset_members(members: &[Vec<u8>]) -> Option<Vec<i64>> {
    if members.is_empty() || members.len() > SET_INTSET_MAX_ENTRIES {
        return None;
    }
    members.iter().map(|m| parse_canonical_i64(m)).collect()
}

/// Appends `value`'s object (not its type byte) in the encoding [`object_type_of`] picks,
/// and returns that type.
pub fn encode_value(value: &Value, opts: &EncodeOptions, out: &mut Vec<u8>) -> u8 {
    let c = opts.compression;
    let ty = object_type_of(value);
    match value {
        Value::String(s) => write_string(out, s, c),
        Value::List(items) => {
            if ty == t::LIST_QUICKLIST_2 {
                let mut lp = Listpack::new();
                for e in items {
                    lp.push(e);
                }
                write_len(out, 1);
                write_len(out, CONTAINER_PACKED);
                write_string(out, &lp.finish(), c);
            } else {
                begin_list(out, items.len() as u64);
                for e in items {
                    list_element(out, e, opts);
                }
            }
        }
        Value::Set(members) => match intset_members(members) {
            Some(ints) => write_string(out, &intset(ints), c),
            None => {
                begin_set(out, members.len() as u64);
                for m in members {
                    set_member(out, m, opts);
                }
            }
        },
        Value::SetWithTtl(members) => {
            begin_set_with_ttl(out, members.len() as u64);
            for (m, ttl) in members {
                set_with_ttl_member(out, m, *ttl, opts);
            }
        }
        Value::SortedSet(members) => {
            if ty == t::ZSET_LISTPACK {
                let mut sorted: Vec<&(Vec<u8>, f64)> = members.iter().collect();
                sorted.sort_by(|a, b| a.1.total_cmp_redis(&b.1).then_with(|| a.0.cmp(&b.0)));
                let mut lp = Listpack::new();
                for (m, score) in sorted {
                    lp.push(m);
                    lp.push(&score_text(*score));
                }
                write_string(out, &lp.finish(), c);
            } else {
                begin_zset(out, members.len() as u64);
                for (m, score) in members {
                    zset_member(out, m, *score, opts);
                }
            }
        }
        Value::Hash(fields) => match ty {
            t::HASH_LISTPACK => {
                let mut lp = Listpack::new();
                for f in fields {
                    lp.push(&f.field);
                    lp.push(&f.value);
                }
                write_string(out, &lp.finish(), c);
            }
            t::HASH => {
                begin_hash(out, fields.len() as u64);
                for f in fields {
                    hash_field(out, &f.field, &f.value, opts);
                }
            }
            t::HASH_LISTPACK_EX => {
                let min = min_field_expire(fields).unwrap_or(0);
                // Redis keeps a listpackex ordered by TTL (the soonest first), the fields
                // without one at the end; the sort is stable, so ties keep their order.
                let mut order: Vec<&HashField> = fields.iter().collect();
                order.sort_by_key(|f| f.expire_at_ms.unwrap_or(u64::MAX));
                let mut lp = Listpack::new();
                for f in order {
                    lp.push(&f.field);
                    lp.push(&f.value);
                    lp.push_int(f.expire_at_ms.map_or(0, |ms| ms as i64));
                }
                write_ms(out, min);
                write_string(out, &lp.finish(), c);
            }
            _ => {
                let min = min_field_expire(fields).unwrap_or(0);
                begin_hash_with_ttl(out, min, fields.len() as u64);
                for f in fields {
                    hash_field_with_ttl(out, min, &f.field, &f.value, f.expire_at_ms, opts);
                }
            }
        },
        Value::Stream(s) => encode_stream(s, c, out),
    }
    ty
}

/// Score order as Redis sorts a sorted set: numerically, `-0` equal to `0`.
trait RedisScoreOrd {
    fn total_cmp_redis(&self, other: &f64) -> std::cmp::Ordering;
}

impl RedisScoreOrd for f64 {
    fn total_cmp_redis(&self, other: &f64) -> std::cmp::Ordering {
        self.partial_cmp(other)
            .unwrap_or_else(|| self.total_cmp(other))
    }
}

fn min_field_expire(fields: &[HashField]) -> Option<u64> {
    fields.iter().filter_map(|f| f.expire_at_ms).min()
}

/// An intset blob: encoding (bytes per member: 2, 4 or 8, u32 LE), member count (u32 LE),
/// then the members sorted ascending, little-endian at that width.
fn intset(mut ints: Vec<i64>) -> Vec<u8> {
    ints.sort_unstable();
    let width: usize = if ints.iter().all(|&v| i16::try_from(v).is_ok()) {
        2
    } else if ints.iter().all(|&v| i32::try_from(v).is_ok()) {
        4
    } else {
        8
    };
    let mut b = Vec::with_capacity(8 + width * ints.len());
    b.extend_from_slice(&(width as u32).to_le_bytes());
    b.extend_from_slice(&(ints.len() as u32).to_le_bytes());
    for v in ints {
        b.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    b
}

// ---------------------------------------------------------------------------------------
// Element by element. Each `begin_*` writes the count; the caller then writes exactly that
// many elements. The type byte to put before the key is given with each.
// ---------------------------------------------------------------------------------------

/// Starts a list of `len` elements, type [`object_type::LIST`](crate::object_type::LIST):
/// a count and the elements as strings. Redis 7.0 and later still load it (into a quicklist,
/// converting a small one to a listpack from 7.2 on), and unlike a quicklist it needs no node
/// count up front.
pub fn begin_list(out: &mut Vec<u8>, len: u64) {
    write_len(out, len);
}

/// One element of a list started with [`begin_list`].
pub fn list_element(out: &mut Vec<u8>, element: &[u8], opts: &EncodeOptions) {
    write_string(out, element, opts.compression);
}

/// Starts a set of `len` members, type [`object_type::SET`](crate::object_type::SET).
pub fn begin_set(out: &mut Vec<u8>, len: u64) {
    write_len(out, len);
}

/// One member of a set started with [`begin_set`].
pub fn set_member(out: &mut Vec<u8>, member: &[u8], opts: &EncodeOptions) {
    write_string(out, member, opts.compression);
}

/// Starts a sorted set of `len` members, type [`object_type::ZSET_2`](crate::object_type::ZSET_2)
/// (members in any order: the loader sorts).
pub fn begin_zset(out: &mut Vec<u8>, len: u64) {
    write_len(out, len);
}

/// One member of a sorted set started with [`begin_zset`]: the member, then its score as a
/// binary double.
pub fn zset_member(out: &mut Vec<u8>, member: &[u8], score: f64, opts: &EncodeOptions) {
    write_string(out, member, opts.compression);
    write_binary_double(out, score);
}

/// Starts a hash of `len` fields, type [`object_type::HASH`](crate::object_type::HASH).
pub fn begin_hash(out: &mut Vec<u8>, len: u64) {
    write_len(out, len);
}

/// One field of a hash started with [`begin_hash`].
pub fn hash_field(out: &mut Vec<u8>, field: &[u8], value: &[u8], opts: &EncodeOptions) {
    write_string(out, field, opts.compression);
    write_string(out, value, opts.compression);
}

/// Starts a hash with field TTLs, type
/// [`object_type::HASH_METADATA`](crate::object_type::HASH_METADATA) (RDB 12, Redis 7.4):
/// the smallest field TTL (absolute unix ms, 8 bytes LE), then the field count.
pub fn begin_hash_with_ttl(out: &mut Vec<u8>, min_expire_ms: u64, len: u64) {
    write_ms(out, min_expire_ms);
    write_len(out, len);
}

/// One field of a hash started with [`begin_hash_with_ttl`] (`min_expire_ms` as given there):
/// its TTL as a length, 0 for none or `ttl - min_expire_ms + 1`, then field and value.
pub fn hash_field_with_ttl(
    out: &mut Vec<u8>,
    min_expire_ms: u64,
    field: &[u8],
    value: &[u8],
    expire_at_ms: Option<u64>,
    opts: &EncodeOptions,
) {
    let ttl = expire_at_ms.map_or(0, |ms| ms.saturating_sub(min_expire_ms) + 1);
    write_len(out, ttl);
    write_string(out, field, opts.compression);
    write_string(out, value, opts.compression);
}

/// Starts Darner's set with member TTLs, type
/// [`object_type::DARNER_SET_TTL`](crate::object_type::DARNER_SET_TTL): the member count.
pub fn begin_set_with_ttl(out: &mut Vec<u8>, len: u64) {
    write_len(out, len);
}

/// One member of a set started with [`begin_set_with_ttl`]: the member as a string, then its
/// TTL as an absolute unix time in ms, 8 bytes LE, 0 for none.
pub fn set_with_ttl_member(
    out: &mut Vec<u8>,
    member: &[u8],
    expire_at_ms: Option<u64>,
    opts: &EncodeOptions,
) {
    write_string(out, member, opts.compression);
    write_ms(out, expire_at_ms.unwrap_or(0));
}

// ---------------------------------------------------------------------------------------
// Streams (type 19, STREAM_LISTPACKS_2).
// ---------------------------------------------------------------------------------------

/// A stream id as the 16 bytes Redis uses for rax keys: ms then seq, big-endian.
fn id_bytes(id: StreamId) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&id.ms.to_be_bytes());
    b[8..].copy_from_slice(&id.seq.to_be_bytes());
    b
}

fn encode_stream(s: &Stream, c: bool, out: &mut Vec<u8>) {
    let opts = EncodeOptions { compression: c };
    let nodes = stream_nodes(&s.entries);
    begin_stream(out, nodes.len() as u64);
    for (master, lp) in &nodes {
        write_string(out, &id_bytes(*master), c);
        write_string(out, lp, c);
    }
    end_stream(out, s, s.entries.len() as u64, &opts);
}

/// Starts a stream written node by node (type 19, [`t::STREAM_LISTPACKS_2`]): its node count.
/// Then come that many [`stream_node`] calls and one [`end_stream`]. A writer that picks the
/// node boundaries itself (a snapshot uses the stream's own nodes) knows the count up front.
pub fn begin_stream(out: &mut Vec<u8>, nodes: u64) {
    write_len(out, nodes);
}

/// One node of a stream begun with [`begin_stream`]: the master id (the first entry's) and the
/// listpack of `entries` (at least one, in id order; a node of none is not written).
pub fn stream_node(out: &mut Vec<u8>, entries: &[StreamEntry], opts: &EncodeOptions) {
    let Some(first) = entries.first() else {
        return;
    };
    write_string(out, &id_bytes(first.id), opts.compression);
    write_string(out, &stream_listpack(entries), opts.compression);
}

/// The end of a stream begun with [`begin_stream`]: its `length` (live entries), last, first
/// and max deleted ids, entries added, and its consumer groups with their PELs and consumers
/// (`s.entries` is not used).
pub fn end_stream(out: &mut Vec<u8>, s: &Stream, length: u64, opts: &EncodeOptions) {
    let c = opts.compression;
    write_len(out, length);
    write_len(out, s.last_id.ms);
    write_len(out, s.last_id.seq);
    write_len(out, s.first_id.ms);
    write_len(out, s.first_id.seq);
    write_len(out, s.max_deleted_id.ms);
    write_len(out, s.max_deleted_id.seq);
    write_len(out, s.entries_added);
    write_len(out, s.groups.len() as u64);
    for g in &s.groups {
        write_string(out, &g.name, c);
        write_len(out, g.last_delivered_id.ms);
        write_len(out, g.last_delivered_id.seq);
        write_len(out, g.entries_read.unwrap_or(ENTRIES_READ_UNKNOWN));
        write_len(out, g.pending.len() as u64);
        for p in &g.pending {
            out.extend_from_slice(&id_bytes(p.id));
            write_ms(out, p.delivery_time_ms);
            write_len(out, p.delivery_count);
        }
        write_len(out, g.consumers.len() as u64);
        for consumer in &g.consumers {
            write_string(out, &consumer.name, c);
            write_ms(out, consumer.seen_time_ms);
            write_len(out, consumer.pending.len() as u64);
            for id in &consumer.pending {
                out.extend_from_slice(&id_bytes(*id));
            }
        }
    }
}

/// Cuts the entries into nodes the way Redis's XADD does (a new node once the current one
/// holds 100 entries or the next entry would take it to 4096 bytes) and builds each node's
/// listpack. Returns (master id, listpack) pairs.
fn stream_nodes(entries: &[StreamEntry]) -> Vec<(StreamId, Vec<u8>)> {
    let mut nodes = Vec::new();
    let mut start = 0;
    while start < entries.len() {
        let first = &entries[start];
        let mut bytes = 7 + master_entry_size(first);
        let mut end = start;
        while end < entries.len() {
            let e = &entries[end];
            let data: usize = e.fields.iter().map(|(f, v)| f.len() + v.len()).sum();
            if end > start
                && (bytes + data >= STREAM_NODE_MAX_BYTES || end - start >= STREAM_NODE_MAX_ENTRIES)
            {
                break;
            }
            bytes += stream_entry_size(first, e);
            end += 1;
        }
        nodes.push((first.id, stream_listpack(&entries[start..end])));
        start = end;
    }
    nodes
}

fn int_entry_size(v: i64) -> usize {
    entry_size(v.to_string().as_bytes())
}

fn master_entry_size(first: &StreamEntry) -> usize {
    // count, deleted, field count, fields, terminator: the counts are small.
    3 * 2
        + int_entry_size(first.fields.len() as i64)
        + first
            .fields
            .iter()
            .map(|(f, _)| entry_size(f))
            .sum::<usize>()
}

fn same_fields(master: &StreamEntry, e: &StreamEntry) -> bool {
    master.fields.len() == e.fields.len()
        && master
            .fields
            .iter()
            .zip(&e.fields)
            .all(|((a, _), (b, _))| a == b)
}

fn stream_entry_size(master: &StreamEntry, e: &StreamEntry) -> usize {
    let ms = e.id.ms.wrapping_sub(master.id.ms) as i64;
    let seq = e.id.seq.wrapping_sub(master.id.seq) as i64;
    let mut n = 1 + int_entry_size(ms) + int_entry_size(seq) + 2;
    if same_fields(master, e) {
        n += e.fields.iter().map(|(_, v)| entry_size(v)).sum::<usize>();
    } else {
        n += int_entry_size(e.fields.len() as i64);
        n += e
            .fields
            .iter()
            .map(|(f, v)| entry_size(f) + entry_size(v))
            .sum::<usize>();
    }
    n
}

/// One node's listpack: the master entry (live count, deleted count 0, the first entry's
/// field names, a 0 terminator), then per entry its flags, id as a difference from the master
/// id, the values (when its field names are the master's) or the field count and pairs, and
/// its "lp-count" (how many listpack entries it took before this one).
fn stream_listpack(entries: &[StreamEntry]) -> Vec<u8> {
    let master = &entries[0];
    let mut lp = Listpack::new();
    lp.push_int(entries.len() as i64);
    lp.push_int(0);
    lp.push_int(master.fields.len() as i64);
    for (f, _) in &master.fields {
        lp.push(f);
    }
    lp.push_int(0);
    for e in entries {
        let n = e.fields.len() as i64;
        let same = same_fields(master, e);
        lp.push_int(if same {
            STREAM_ITEM_FLAG_SAMEFIELDS
        } else {
            STREAM_ITEM_FLAG_NONE
        });
        lp.push_int(e.id.ms.wrapping_sub(master.id.ms) as i64);
        lp.push_int(e.id.seq.wrapping_sub(master.id.seq) as i64);
        if same {
            for (_, v) in &e.fields {
                lp.push(v);
            }
            lp.push_int(n + 3);
        } else {
            lp.push_int(n);
            for (f, v) in &e.fields {
                lp.push(f);
                lp.push(v);
            }
            lp.push_int(2 * n + 4);
        }
    }
    lp.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: &Value) -> (u8, Vec<u8>) {
        let mut out = Vec::new();
        let ty = encode_value(v, &EncodeOptions { compression: false }, &mut out);
        assert_eq!(ty, object_type_of(v));
        (ty, out)
    }

    fn strs(n: usize, f: impl Fn(usize) -> String) -> Vec<Vec<u8>> {
        (0..n).map(|i| f(i).into_bytes()).collect()
    }

    #[test]
    fn sets_are_intsets_only_when_small_and_all_canonical_integers() {
        let (ty, out) = enc(&Value::Set(strs(3, |i| {
            (i as i64 * 1000 - 1000).to_string()
        })));
        assert_eq!(ty, t::SET_INTSET);
        // raw string of 8 + 3*2 bytes: encoding 2, count 3, -1000, 0, 1000.
        assert_eq!(out[0], 14);
        assert_eq!(&out[1..9], &[2, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(&out[9..], &[0x18, 0xfc, 0, 0, 0xe8, 0x03]);
        assert_eq!(
            enc(&Value::Set(vec![b"1".to_vec(), b"007".to_vec()])).0,
            t::SET
        );
        assert_eq!(enc(&Value::Set(strs(513, |i| i.to_string()))).0, t::SET);
        assert_eq!(
            enc(&Value::Set(strs(512, |i| i.to_string()))).0,
            t::SET_INTSET
        );
        let wide = enc(&Value::Set(vec![
            b"1".to_vec(),
            i64::MIN.to_string().into_bytes(),
        ]))
        .1;
        assert_eq!(&wide[1..5], &[8, 0, 0, 0]);
        let mid = enc(&Value::Set(vec![b"1".to_vec(), b"40000".to_vec()])).1;
        assert_eq!(&mid[1..5], &[4, 0, 0, 0]);
    }

    #[test]
    fn hashes_leave_the_listpack_past_512_fields_or_64_bytes() {
        let field = |f: &str, v: &[u8]| HashField {
            field: f.as_bytes().to_vec(),
            value: v.to_vec(),
            expire_at_ms: None,
        };
        let small: Vec<HashField> = (0..512).map(|i| field(&i.to_string(), b"v")).collect();
        assert_eq!(enc(&Value::Hash(small.clone())).0, t::HASH_LISTPACK);
        let mut big = small.clone();
        big.push(field("x", b"v"));
        assert_eq!(enc(&Value::Hash(big)).0, t::HASH);
        assert_eq!(
            enc(&Value::Hash(vec![field("a", &[b'v'; 64])])).0,
            t::HASH_LISTPACK
        );
        assert_eq!(enc(&Value::Hash(vec![field("a", &[b'v'; 65])])).0, t::HASH);
        let mut ttl = vec![field("a", b"1"), field("b", b"2")];
        ttl[1].expire_at_ms = Some(5000);
        let v = Value::Hash(ttl.clone());
        assert_eq!(required_version(&v), WRITTEN_VERSION_FIELD_TTL);
        let (ty, out) = enc(&v);
        assert_eq!(ty, t::HASH_LISTPACK_EX);
        assert_eq!(&out[..8], &5000u64.to_le_bytes());
        ttl.push(field("c", &[b'v'; 65]));
        let (ty, out) = enc(&Value::Hash(ttl));
        assert_eq!(ty, t::HASH_METADATA);
        assert_eq!(&out[..8], &5000u64.to_le_bytes());
        assert_eq!(out[8], 3);
        // a: no TTL (0), field "a", value 1 (int8).
        assert_eq!(&out[9..14], &[0, 1, b'a', 0xc0, 1]);
        // b: TTL == min -> 1.
        assert_eq!(&out[14..19], &[1, 1, b'b', 0xc0, 2]);
    }

    #[test]
    fn lists_are_one_quicklist_node_up_to_8_kib_then_plain_elements() {
        let (ty, out) = enc(&Value::List(strs(3, |i| format!("e{i}"))));
        assert_eq!(ty, t::LIST_QUICKLIST_2);
        assert_eq!(&out[..2], &[1, 2]);
        // 8 entries of 1020 bytes: 7 + 8 * (2 + 1020 + 2) = 8199 > 8192.
        let (ty, out) = enc(&Value::List(vec![vec![b'x'; 1020]; 8]));
        assert_eq!(ty, t::LIST);
        assert_eq!(out[0], 8);
        assert_eq!(
            enc(&Value::List(vec![vec![b'x'; 1020]; 7])).0,
            t::LIST_QUICKLIST_2
        );
    }

    #[test]
    fn zsets_in_a_listpack_are_sorted_by_score_then_member() {
        let v = Value::SortedSet(vec![
            (b"b".to_vec(), 1.0),
            (b"a".to_vec(), 1.0),
            (b"z".to_vec(), -0.5),
            (b"n".to_vec(), f64::NEG_INFINITY),
        ]);
        let (ty, out) = enc(&v);
        assert_eq!(ty, t::ZSET_LISTPACK);
        let mut lp = Listpack::new();
        for e in [&b"n"[..], b"-inf", b"z", b"-0.5", b"a", b"1", b"b", b"1"] {
            lp.push(e);
        }
        let mut expect = Vec::new();
        write_string(&mut expect, &lp.finish(), false);
        assert_eq!(out, expect);
        let long = Value::SortedSet(vec![(vec![b'm'; 65], 1.0)]);
        assert_eq!(enc(&long).0, t::ZSET_2);
        let many = Value::SortedSet(
            (0..129)
                .map(|i| (i.to_string().into_bytes(), 0.5))
                .collect(),
        );
        assert_eq!(enc(&many).0, t::ZSET_2);
    }

    #[test]
    fn set_with_ttl_layout() {
        let v = Value::SetWithTtl(vec![(b"a".to_vec(), Some(7)), (b"b".to_vec(), None)]);
        let (ty, out) = enc(&v);
        assert_eq!(ty, t::DARNER_SET_TTL);
        let mut expect = vec![2, 1, b'a'];
        expect.extend_from_slice(&7u64.to_le_bytes());
        expect.extend_from_slice(&[1, b'b']);
        expect.extend_from_slice(&0u64.to_le_bytes());
        assert_eq!(out, expect);
    }

    #[test]
    fn stream_nodes_cut_at_100_entries_and_4096_bytes() {
        let entry = |ms: u64, v: Vec<u8>| StreamEntry {
            id: StreamId { ms, seq: 0 },
            fields: vec![(b"f".to_vec(), v)],
        };
        let small: Vec<StreamEntry> = (0..250).map(|i| entry(i + 1, b"x".to_vec())).collect();
        let nodes = stream_nodes(&small);
        assert_eq!(nodes.len(), 3);
        assert_eq!(nodes[1].0, StreamId { ms: 101, seq: 0 });
        let big: Vec<StreamEntry> = (0..3).map(|i| entry(i + 1, vec![b'y'; 3000])).collect();
        assert_eq!(stream_nodes(&big).len(), 3);
    }
}
