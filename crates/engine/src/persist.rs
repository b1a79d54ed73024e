//! Conversion between the engine's values and the RDB value model ([`darner_rdb::Value`]), for
//! DUMP / RESTORE, SAVE and loading a file.
//!
//! The model is encoding-free: a hash is its fields, a list its elements, and so on. Writing
//! ([`to_rdb`]) reads a value through its [`ValueRef`]; loading ([`from_rdb`]) builds the value
//! with the encoding a fresh key built by commands would get under the [`Limits`] in force,
//! which is also what Redis 7.2 reports after RESTORE of the same data: Redis converts on load
//! (a hashtable hash, set or sorted set small enough comes back as a listpack / intset, a
//! listpack past the limits as a hashtable / skiplist, a quicklist that fits one node as a
//! listpack), and the rules it applies are the commands' rules.
//!
//! # Writing
//!
//! [`to_rdb`] converts a whole value. A snapshot writes big values element by element in
//! bounded steps instead: the `*_from` functions visit a value's elements from a position and
//! return where to resume ([`hash_fields_from`] (or the iterator [`hash_fields`]), [`set_members_from`], [`zset_members_from`],
//! [`list_elements_from`], [`stream_entries_from`] or node by node [`stream_nodes_from`], with
//! [`stream_header`] for a stream's metadata and groups), and [`live_len`] gives the element
//! count the format writes first (a stream's node count: `Stream::node_count`).
//! A position stays valid only while the value is not modified.
//!
//! **Expired fields and members are left out.** A hash field or set member whose TTL is at or
//! before `now_ms` (the rule of `Hash::expire_field`) is logically gone, and is not written.
//! Redis 7.4's `rdbSaveObject` does write them (a listpackex hash's listpack as it is, every
//! entry of a hashtable hash, TTL included) and lets the loading side expire them; leaving
//! them out gives the same data to any reader and never ships a field only to delete it. Pass
//! `now_ms = i64::MIN` to keep everything, as Redis does. When every field or member of a
//! collection has expired, the result is an empty collection: the key is logically gone and
//! must not be written (the keyspace removes such keys before any command sees them, so a
//! DUMP never meets one; a snapshot may).
//!
//! # Loading
//!
//! **Expired fields and members are kept.** Redis 7.4 loads a field whose TTL has passed and
//! lets field expiry delete it; the engine can hold such fields too (the database removes due
//! fields and members before any command sees the value, and `DbView::set` registers the key
//! for the active cycle), so [`from_rdb`] keeps them and `now_ms` is not used.
//!
//! Encodings, against Redis 7.2 after RESTORE of a payload Redis wrote with the same limits:
//! - strings: "int", "embstr" or "raw" by Redis's `tryObjectEncoding` rules (a string that an
//!   APPEND made "raw" comes back "embstr" when short, as in Redis);
//! - hashes: "listpack" within hash-max-listpack-entries / -value, "hashtable" beyond; with
//!   field TTLs, "listpackex" (Redis 7.4) within the limits. The model does not carry the
//!   listpackex flag of a listpack hash whose TTLs are all gone (HPERSIST): it comes back
//!   "listpack" (Redis 7.4 writes such a hash as a listpackex and keeps the name);
//! - lists: "listpack" when every element fits one node within list-max-listpack-size (by
//!   the exact listpack size, as Redis judges a loaded single node: a listpack comes back a
//!   listpack, a quicklist left with one small node becomes one), else "quicklist" with nodes
//!   filled as pushes fill them and inner nodes compressed past list-compress-depth. Redis
//!   keeps the payload's nodes, so a quicklist whose several nodes were left half empty by
//!   removals, and which would fit one node, stays "quicklist" there and comes back
//!   "listpack" here;
//! - sets: SADD's rules for all the members at once ("intset" for canonical integers within
//!   set-max-intset-entries, else "listpack" within set-max-listpack-*, else "hashtable"). A
//!   Redis listpack set whose members all happen to be integers stays "listpack" in Redis and
//!   comes back "intset" here. Members with TTLs (Darner's SADDEX) give the TTL-capable
//!   hashtable ("hashtable"), as SADDEX does;
//! - sorted sets: "listpack" within zset-max-listpack-entries / -value, else "skiplist"
//!   (Redis's rule after loading);
//! - streams: entries appended in id order into nodes bounded by stream-node-max-*; deleted
//!   entries are not in the model, so the nodes hold only live entries.
//!
//! Errors ([`from_rdb`]): an empty collection (streams may be empty), a duplicate field or
//! member, a NaN score, a TTL past `i64::MAX`, a stream whose entries are not in increasing id
//! order or whose metadata contradicts them, and a consumer group whose PEL and consumers
//! disagree (Redis's "bad data format" cases). Nothing panics on any input.

use crate::entry::{Entry, ValueRef};
use crate::types::dense::{DenseBuilder, DenseTable};
use crate::types::hash::HashRef;
use crate::types::set::Set;
use crate::types::stream::{Consumer, EntryRef, Group, Nack, NodeLimits, StreamId};
use crate::types::{Hash, Limits, List, Stream, ZSet};
use crate::value::Value;
use darner_rdb as rdb;
use std::collections::{BTreeMap, BTreeSet, HashSet};

// ---- Writing -------------------------------------------------------------------------------

/// Whether a field or member with TTL `expiry` is gone at `now_ms`.
fn expired(expiry: Option<i64>, now_ms: i64) -> bool {
    expiry.is_some_and(|e| e <= now_ms)
}

/// A TTL as the model stores it (an absolute unix time in ms; a negative one, which no
/// command stores, as 0).
fn ttl_out(expiry: Option<i64>) -> Option<u64> {
    expiry.map(|e| u64::try_from(e).unwrap_or(0))
}

/// The model's id for an engine stream id.
fn id_out(id: StreamId) -> rdb::StreamId {
    rdb::StreamId {
        ms: id.ms,
        seq: id.seq,
    }
}

fn id_in(id: rdb::StreamId) -> StreamId {
    StreamId::new(id.ms, id.seq)
}

/// The whole value in the RDB model, without the fields and members expired at `now_ms`
/// (see the module documentation: the result may then be an empty collection).
pub fn to_rdb(value: ValueRef<'_>, now_ms: i64) -> rdb::Value {
    match value {
        ValueRef::Str(s) => rdb::Value::String(s.to_vec()),
        ValueRef::Hash(h) => {
            let mut fields = Vec::with_capacity(h.len());
            hash_fields_from(h, 0, usize::MAX, now_ms, |f, v, e| {
                fields.push(rdb::HashField {
                    field: f.to_vec(),
                    value: v.to_vec(),
                    expire_at_ms: e,
                });
            });
            rdb::Value::Hash(fields)
        }
        ValueRef::List(l) => {
            let mut out = Vec::with_capacity(l.len());
            list_elements_from(l, 0, usize::MAX, |e| out.push(e.to_vec()));
            rdb::Value::List(out)
        }
        ValueRef::Set(s) => {
            let mut out = Vec::with_capacity(s.len());
            set_members_from(s, 0, usize::MAX, now_ms, |m, e| out.push((m.to_vec(), e)));
            if out.iter().any(|(_, e)| e.is_some()) {
                rdb::Value::SetWithTtl(out)
            } else {
                rdb::Value::Set(out.into_iter().map(|(m, _)| m).collect())
            }
        }
        ValueRef::ZSet(z) => {
            let mut out = Vec::with_capacity(z.len());
            zset_members_from(z, 0, usize::MAX, |m, s| out.push((m.to_vec(), s)));
            rdb::Value::SortedSet(out)
        }
        ValueRef::Stream(s) => {
            let mut st = stream_header(s);
            st.entries.reserve(s.len() as usize);
            stream_entries_from(s, StreamId::MIN, usize::MAX, |e| st.entries.push(e));
            rdb::Value::Stream(Box::new(st))
        }
    }
}

/// How many elements [`to_rdb`] (or a walk with the `*_from` functions) yields at `now_ms`:
/// the count the format writes before the elements. O(1) unless the value has field or
/// member TTLs, then one pass. A string's length in bytes; a stream's live entries.
pub fn live_len(value: ValueRef<'_>, now_ms: i64) -> usize {
    match value {
        ValueRef::Str(s) => s.len(),
        ValueRef::Hash(h) if h.has_ttls() => h
            .iter_ttl()
            .filter(|(_, _, e)| !expired(*e, now_ms))
            .count(),
        ValueRef::Hash(h) => h.len(),
        ValueRef::List(l) => l.len(),
        ValueRef::Set(Set::Expiring(t)) => {
            t.iter().filter(|(_, _, e)| !expired(*e, now_ms)).count()
        }
        ValueRef::Set(s) => s.len(),
        ValueRef::ZSet(z) => z.len(),
        ValueRef::Stream(s) => s.len() as usize,
    }
}

/// Whether a set written at `now_ms` needs the model's [`rdb::Value::SetWithTtl`]: some member
/// that is still there has a TTL.
pub fn set_has_live_ttls(s: &Set, now_ms: i64) -> bool {
    match s {
        Set::Expiring(t) if t.expiring() > 0 => {
            t.iter().any(|(_, _, e)| e.is_some() && !expired(e, now_ms))
        }
        _ => false,
    }
}

/// A hash's (field, value, TTL) in [`to_rdb`]'s order, without the fields expired at
/// `now_ms` (an iterator borrowing the hash; [`hash_fields_from`] resumes across steps).
pub fn hash_fields<'a>(
    h: HashRef<'a>,
    now_ms: i64,
) -> impl Iterator<Item = (&'a [u8], &'a [u8], Option<u64>)> + 'a {
    h.iter_ttl()
        .filter(move |(_, _, e)| !expired(*e, now_ms))
        .map(|(f, v, e)| (f, v, ttl_out(e)))
}

/// Visits a hash's (field, value, TTL) from position `at` (0 to start) until at least `min`
/// were visited, leaving out the fields expired at `now_ms`; returns where to resume (None:
/// done). A listpack is visited whole; a table whole buckets at a time.
pub fn hash_fields_from<'a>(
    h: HashRef<'a>,
    at: usize,
    min: usize,
    now_ms: i64,
    mut f: impl FnMut(&'a [u8], &'a [u8], Option<u64>),
) -> Option<usize> {
    let mut visit = |(k, v, e): (&'a [u8], &'a [u8], Option<i64>)| {
        if !expired(e, now_ms) {
            f(k, v, ttl_out(e));
        }
    };
    match h {
        HashRef::Pack { .. } => {
            if at == 0 {
                h.iter_ttl().for_each(&mut visit);
            }
            None
        }
        HashRef::Table(t) => t.for_each_from(at, min, visit),
    }
}

/// Visits a set's members and their TTLs from position `at` (0 to start) until at least `min`
/// were visited, leaving out the members expired at `now_ms`; returns where to resume (None:
/// done).
pub fn set_members_from(
    s: &Set,
    at: usize,
    min: usize,
    now_ms: i64,
    mut f: impl FnMut(&[u8], Option<u64>),
) -> Option<usize> {
    match s {
        Set::Expiring(t) => t.for_each_from(at, min, |(m, _, e)| {
            if !expired(e, now_ms) {
                f(m, ttl_out(e));
            }
        }),
        s => s.for_each_from(at, min, |m| f(m, None)),
    }
}

/// Visits a sorted set's (member, score) in order from rank `at` (0 to start), `min` of them
/// (at least one); returns the rank to resume at (None: done).
pub fn zset_members_from(
    z: &ZSet,
    at: usize,
    min: usize,
    f: impl FnMut(&[u8], f64),
) -> Option<usize> {
    let end = at.saturating_add(min.max(1));
    z.range(at, end, false, f);
    (end < z.len()).then_some(end)
}

/// Visits a list's elements from index `at` (0 to start), `min` of them (at least one);
/// returns the index to resume at (None: done). Each call walks to `at` from the nearer end
/// (see `List::iter_from`).
pub fn list_elements_from(
    l: &List,
    at: usize,
    min: usize,
    mut f: impl FnMut(&[u8]),
) -> Option<usize> {
    let n = min.max(1);
    for e in l.iter_from(at).take(n) {
        f(&e);
    }
    let end = at.saturating_add(n);
    (end < l.len()).then_some(end)
}

/// A stream's metadata and consumer groups in the model, with no entries (`entries` empty,
/// `length` the live entry count): what a writer needs besides [`stream_entries_from`].
pub fn stream_header(s: &Stream) -> rdb::Stream {
    let groups = s
        .groups()
        .map(|(name, g)| rdb::StreamGroup {
            name: name.clone(),
            last_delivered_id: id_out(g.last_id),
            entries_read: g.entries_read,
            pending: g
                .pel
                .iter()
                .map(|(id, n)| rdb::PendingEntry {
                    id: id_out(*id),
                    // Times are 64-bit patterns in the format (-1, "never", included).
                    delivery_time_ms: n.delivery_time as u64,
                    delivery_count: n.delivery_count,
                    consumer: n.consumer.clone(),
                })
                .collect(),
            consumers: g
                .consumers
                .iter()
                .map(|(name, c)| rdb::StreamConsumer {
                    name: name.clone(),
                    seen_time_ms: c.seen_time as u64,
                    active_time_ms: c.active_time as u64,
                    pending: c.pel.iter().map(|id| id_out(*id)).collect(),
                })
                .collect(),
        })
        .collect();
    rdb::Stream {
        entries: Vec::new(),
        length: s.len(),
        last_id: id_out(s.last_id),
        first_id: id_out(s.first_id),
        max_deleted_id: id_out(s.max_deleted_id),
        entries_added: s.entries_added,
        groups,
    }
}

/// Visits a stream's live entries from id `from` (`StreamId::MIN` to start), `min` of them
/// (at least one); returns the id to resume at (None: done).
pub fn stream_entries_from(
    s: &Stream,
    from: StreamId,
    min: usize,
    mut f: impl FnMut(rdb::StreamEntry),
) -> Option<StreamId> {
    let mut it = s.range(from, StreamId::MAX, false);
    for e in it.by_ref().take(min.max(1)) {
        f(entry_out(&e));
    }
    it.next().map(|e| e.id)
}

/// A stream entry in the model.
fn entry_out(e: &EntryRef<'_>) -> rdb::StreamEntry {
    rdb::StreamEntry {
        id: id_out(e.id),
        fields: e
            .pairs
            .iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect(),
    }
}

/// Visits a stream's nodes from the first whose master id is at least `from`
/// (`StreamId::MIN` to start), each as its live entries (at least one), until `min` entries
/// (at least one node) are visited; returns the master id of the node to resume at (None:
/// every node visited). [`Stream::node_count`] nodes in all: a writer can give the count
/// first, as the RDB stream type wants.
pub fn stream_nodes_from(
    s: &Stream,
    from: StreamId,
    min: usize,
    mut f: impl FnMut(&[rdb::StreamEntry]),
) -> Option<StreamId> {
    let mut spans = s.node_spans(from);
    let mut seen = 0usize;
    let mut node = Vec::new();
    for (master, last) in spans.by_ref() {
        node.clear();
        node.extend(s.range(master, last, false).map(|e| entry_out(&e)));
        debug_assert!(!node.is_empty(), "a node with no live entry");
        f(&node);
        seen += node.len();
        if seen >= min.max(1) {
            break;
        }
    }
    spans.next().map(|(master, _)| master)
}

// ---- Loading -------------------------------------------------------------------------------

/// A loaded value, as [`Entry`] takes it.
#[derive(Debug, PartialEq)]
pub enum Loaded {
    /// A string: [`Entry::new_str`] (not "raw": the encoding follows the bytes).
    Str(Vec<u8>),
    /// A collection: [`Entry::new_value`] (a listpack hash goes inline).
    Value(Value),
}

impl Loaded {
    /// The keyspace entry for `key` holding this value, expiring at `expire` (unix ms), with
    /// access clock `clock`.
    pub fn into_entry(self, key: &[u8], expire: Option<i64>, clock: u16) -> Entry {
        match self {
            Loaded::Str(s) => Entry::new_str(key, &s, expire, false, clock),
            Loaded::Value(v) => Entry::new_value(key, v, expire, clock),
        }
    }
}

/// [`from_rdb`], then the keyspace entry for `key` expiring at `expire` (unix ms; a file's
/// `expire_at_ms`), with access clock `clock`.
pub fn entry_from_rdb(
    key: &[u8],
    value: rdb::Value,
    expire: Option<i64>,
    clock: u16,
    limits: &Limits,
    now_ms: i64,
) -> Result<Entry, &'static str> {
    Ok(from_rdb(value, limits, now_ms)?.into_entry(key, expire, clock))
}

/// Builds the engine's value from the model, in the encoding commands would give it under
/// `limits` (see the module documentation). Fields and members whose TTL passed before
/// `now_ms` are kept (the database expires them), so `now_ms` is unused for now: it is the
/// load time, for callers to pass should that choice change (Redis 8 drops such fields
/// when a master loads a file).
pub fn from_rdb(value: rdb::Value, limits: &Limits, now_ms: i64) -> Result<Loaded, &'static str> {
    let _ = now_ms;
    Ok(match value {
        rdb::Value::String(s) => Loaded::Str(s),
        rdb::Value::List(items) => Loaded::Value(Value::List(Box::new(list_in(&items, limits)?))),
        rdb::Value::Set(members) => Loaded::Value(Value::Set(set_in(&members, limits)?)),
        rdb::Value::SetWithTtl(members) => Loaded::Value(Value::Set(set_ttl_in(members, limits)?)),
        rdb::Value::SortedSet(items) => Loaded::Value(Value::ZSet(zset_in(&items, limits)?)),
        rdb::Value::Hash(fields) => Loaded::Value(Value::Hash(hash_in(&fields, limits)?)),
        rdb::Value::Stream(s) => Loaded::Value(Value::Stream(Box::new(stream_in(*s, limits)?))),
    })
}

/// A big collection loaded batch by batch, as the file decoder hands out its elements
/// (`rdb::Item::Elements`), on the thread that will own it: the value is built while the
/// file is still being read. A hash past the listpack's count goes straight into a
/// [`DenseBuilder`] (or, from its first field with a TTL, into the table by inserts, as
/// [`hash_in`] builds it); the other kinds are gathered and built at the end by
/// [`from_rdb`]. Nothing is in the keyspace until the caller inserts what
/// [`ValueLoader::finish`] gives.
pub struct ValueLoader {
    building: Building,
}

enum Building {
    Gather(rdb::Value),
    /// Fields while few; then the builder, or the table once a field has a TTL.
    Hash {
        small: Vec<rdb::HashField>,
        dense: Option<DenseBuilder>,
        table: Option<Hash>,
        hint: usize,
    },
}

impl ValueLoader {
    /// Starts a value of `empty`'s kind (an empty value, as `rdb::Kind::empty` gives), of
    /// about `hint` elements (the file's claim: used only for [`DenseBuilder`]'s partitions).
    pub fn new(empty: rdb::Value, hint: u64) -> ValueLoader {
        let building = match empty {
            rdb::Value::Hash(_) => Building::Hash {
                small: Vec::new(),
                dense: None,
                table: None,
                hint: usize::try_from(hint).unwrap_or(usize::MAX),
            },
            v => Building::Gather(v),
        };
        ValueLoader { building }
    }

    /// Adds the next batch of elements.
    pub fn push(&mut self, batch: rdb::Value, limits: &Limits) -> Result<(), &'static str> {
        match (&mut self.building, batch) {
            (Building::Gather(v), b) => append(v, b),
            (
                Building::Hash {
                    small,
                    dense,
                    table,
                    hint,
                },
                rdb::Value::Hash(fields),
            ) => {
                if dense.is_some() && fields.iter().any(|f| f.expire_at_ms.is_some()) {
                    // A field with a TTL: on by inserts from here, as hash_in would.
                    let b = dense.take().expect("checked");
                    let t = b.finish().ok_or("duplicate hash field")?;
                    *table = Some(Hash::Table(Box::new(t)));
                }
                if let Some(h) = table {
                    return hash_set_all(h, &fields, limits);
                }
                if let Some(b) = dense {
                    for f in &fields {
                        b.push(&f.field, &f.value);
                    }
                    return Ok(());
                }
                small.extend(fields);
                if small.len() > limits.hash_max_listpack_entries {
                    let fields = std::mem::take(small);
                    if fields.iter().all(|f| f.expire_at_ms.is_none()) {
                        let mut b = DenseBuilder::new((*hint).max(fields.len()));
                        for f in &fields {
                            b.push(&f.field, &f.value);
                        }
                        *dense = Some(b);
                    } else {
                        let mut h = Hash::new();
                        h.convert();
                        hash_set_all(&mut h, &fields, limits)?;
                        *table = Some(h);
                    }
                }
            }
            (Building::Hash { .. }, _) => return Err("hash batch of another type"),
        }
        Ok(())
    }

    /// The value built; None if no element came (an empty collection: not a key).
    pub fn finish(self, limits: &Limits, now_ms: i64) -> Result<Option<Loaded>, &'static str> {
        match self.building {
            Building::Gather(v) => {
                if v.is_empty_collection() {
                    return Ok(None);
                }
                from_rdb(v, limits, now_ms).map(Some)
            }
            Building::Hash {
                small,
                dense,
                table,
                ..
            } => {
                if let Some(h) = table {
                    return Ok(Some(Loaded::Value(Value::Hash(h))));
                }
                if let Some(b) = dense {
                    let t = b.finish().ok_or("duplicate hash field")?;
                    return Ok(Some(Loaded::Value(Value::Hash(Hash::Table(Box::new(t))))));
                }
                if small.is_empty() {
                    return Ok(None);
                }
                Ok(Some(Loaded::Value(Value::Hash(hash_in(&small, limits)?))))
            }
        }
    }
}

/// Sets `fields` in `h` (a table), refusing a repeated field.
fn hash_set_all(
    h: &mut Hash,
    fields: &[rdb::HashField],
    limits: &Limits,
) -> Result<(), &'static str> {
    for f in fields {
        let new = match ttl_in(f.expire_at_ms)? {
            Some(at) => h.set_expiring(&f.field, &f.value, at, limits),
            None => h.set(&f.field, &f.value, limits),
        };
        if !new {
            return Err("duplicate hash field");
        }
    }
    Ok(())
}

/// Appends a batch of elements to a value of its kind (a set whose batches turn out to
/// carry TTLs, Darner's type 200, becomes one with TTLs).
fn append(into: &mut rdb::Value, batch: rdb::Value) {
    use rdb::Value as V;
    match (into, batch) {
        (V::List(a), V::List(b)) | (V::Set(a), V::Set(b)) => a.extend(b),
        (V::SetWithTtl(a), V::SetWithTtl(b)) => a.extend(b),
        (V::SortedSet(a), V::SortedSet(b)) => a.extend(b),
        (V::Hash(a), V::Hash(b)) => a.extend(b),
        (into @ V::Set(_), V::SetWithTtl(b)) => {
            let V::Set(a) = std::mem::replace(into, V::Set(Vec::new())) else {
                return;
            };
            let mut all: Vec<(Vec<u8>, Option<u64>)> = a.into_iter().map(|m| (m, None)).collect();
            all.extend(b);
            *into = V::SetWithTtl(all);
        }
        _ => {}
    }
}

/// A TTL from the model, which the engine keeps as an i64.
fn ttl_in(ttl: Option<u64>) -> Result<Option<i64>, &'static str> {
    ttl.map(|t| i64::try_from(t).map_err(|_| "TTL out of range"))
        .transpose()
}

/// A list as Redis 7.2 loads one (see `List::from_loaded`).
fn list_in(items: &[Vec<u8>], limits: &Limits) -> Result<List, &'static str> {
    if items.is_empty() {
        return Err("empty list");
    }
    let (fill, depth) = (limits.list_max_listpack_size, limits.list_compress_depth);
    Ok(List::from_loaded(items.iter().map(|e| &e[..]), fill, depth))
}

/// A set as SADD of all its members builds it (Redis's setTypeCreate with the whole count as
/// the hint, then setTypeAdd's conversions).
fn set_in(members: &[Vec<u8>], limits: &Limits) -> Result<Set, &'static str> {
    let Some(first) = members.first() else {
        return Err("empty set");
    };
    let mut s = Set::create(first, members.len(), limits);
    for m in members {
        if !s.insert(m, limits) {
            return Err("duplicate set member");
        }
    }
    Ok(s)
}

/// A set whose members may have TTLs: the TTL-capable table when one has a TTL, as SADDEX
/// builds it; a plain set otherwise.
fn set_ttl_in(members: Vec<(Vec<u8>, Option<u64>)>, limits: &Limits) -> Result<Set, &'static str> {
    if members.iter().all(|(_, e)| e.is_none()) {
        let plain: Vec<Vec<u8>> = members.into_iter().map(|(m, _)| m).collect();
        return set_in(&plain, limits);
    }
    let mut t = DenseTable::new();
    for (m, e) in &members {
        if !t.insert(m, b"", ttl_in(*e)?) {
            return Err("duplicate set member");
        }
    }
    Ok(Set::Expiring(Box::new(t)))
}

/// A sorted set encoded by its final size, as Redis converts after loading one.
fn zset_in(items: &[(Vec<u8>, f64)], limits: &Limits) -> Result<ZSet, &'static str> {
    if items.is_empty() {
        return Err("empty sorted set");
    }
    let mut seen = HashSet::with_capacity(items.len());
    for (m, s) in items {
        if s.is_nan() {
            return Err("sorted set score is not a number");
        }
        if !seen.insert(&m[..]) {
            return Err("duplicate sorted set member");
        }
    }
    drop(seen);
    let mut sorted: Vec<(&[u8], f64)> = items.iter().map(|(m, s)| (&m[..], *s)).collect();
    // The engine's order: by score (-0 equal to 0), then member bytes.
    sorted.sort_unstable_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(b.0))
    });
    Ok(ZSet::from_sorted(&sorted, limits))
}

/// A hash as HSET of its fields in order builds it (HSETEX-like for the fields with a TTL,
/// which makes a listpack "listpackex"): Redis's conversions on load are the same.
fn hash_in(fields: &[rdb::HashField], limits: &Limits) -> Result<Hash, &'static str> {
    if fields.is_empty() {
        return Err("empty hash");
    }
    // Past the listpack's count, straight to the table (no quadratic listpack fill), built
    // at once when no field has a TTL.
    if fields.len() > limits.hash_max_listpack_entries
        && fields.iter().all(|f| f.expire_at_ms.is_none())
    {
        let pairs = fields.iter().map(|f| (&f.field[..], &f.value[..]));
        let t = DenseTable::from_entries(pairs).ok_or("duplicate hash field")?;
        return Ok(Hash::Table(Box::new(t)));
    }
    let mut h = Hash::new();
    if fields.len() > limits.hash_max_listpack_entries {
        h.convert();
    }
    hash_set_all(&mut h, fields, limits)?;
    Ok(h)
}

/// A stream: its entries appended in id order (nodes bounded by stream-node-max-*), then
/// its metadata and groups as the model has them, checked for consistency.
fn stream_in(m: rdb::Stream, limits: &Limits) -> Result<Stream, &'static str> {
    if m.length != m.entries.len() as u64 {
        return Err("stream length does not match its entries");
    }
    if m.entries_added < m.length {
        return Err("stream entries-added below its length");
    }
    let lim = NodeLimits {
        max_bytes: limits.stream_node_max_bytes,
        max_entries: limits.stream_node_max_entries,
    };
    let mut s = Stream::new();
    let mut prev: Option<StreamId> = None;
    let mut pairs: Vec<(&[u8], &[u8])> = Vec::new();
    for e in &m.entries {
        let id = id_in(e.id);
        if prev.is_some_and(|p| id <= p) {
            return Err("stream entries out of order");
        }
        prev = Some(id);
        pairs.clear();
        pairs.extend(e.fields.iter().map(|(f, v)| (&f[..], &v[..])));
        s.append(id, &pairs, lim);
    }
    let last = id_in(m.last_id);
    if prev.is_some_and(|p| last < p) {
        return Err("stream last id below its last entry");
    }
    s.last_id = last;
    s.first_id = id_in(m.first_id);
    s.max_deleted_id = id_in(m.max_deleted_id);
    s.entries_added = m.entries_added;
    if !m.groups.is_empty() {
        let mut groups = BTreeMap::new();
        for g in m.groups {
            let name = g.name.clone();
            if groups.insert(name, group_in(g)?).is_some() {
                return Err("duplicate consumer group");
            }
        }
        s.groups = Some(Box::new(groups));
    }
    Ok(s)
}

/// A consumer group: every PEL entry must belong to a consumer of the group that lists it,
/// and every id a consumer lists must be in the group's PEL under that consumer.
fn group_in(g: rdb::StreamGroup) -> Result<Group, &'static str> {
    let mut out = Group::new(id_in(g.last_delivered_id), g.entries_read);
    for p in g.pending {
        let nack = Nack {
            consumer: p.consumer,
            delivery_time: p.delivery_time_ms as i64,
            delivery_count: p.delivery_count,
        };
        if out.pel.insert(id_in(p.id), nack).is_some() {
            return Err("duplicate entry in a consumer group's PEL");
        }
    }
    for c in g.consumers {
        let mut pel = BTreeSet::new();
        for id in c.pending {
            let id = id_in(id);
            match out.pel.get(&id) {
                None => return Err("consumer pending entry not in the group's PEL"),
                Some(n) if n.consumer != c.name => {
                    return Err("consumer pending entry owned by another consumer")
                }
                Some(_) => {}
            }
            if !pel.insert(id) {
                return Err("duplicate entry in a consumer's PEL");
            }
        }
        let consumer = Consumer {
            seen_time: c.seen_time_ms as i64,
            active_time: c.active_time_ms as i64,
            pel,
        };
        if out.consumers.insert(c.name, consumer).is_some() {
            return Err("duplicate consumer");
        }
    }
    for (id, n) in &out.pel {
        match out.consumers.get(&n.consumer) {
            None => return Err("PEL entry of an unknown consumer"),
            Some(c) if !c.pel.contains(id) => {
                return Err("PEL entry missing from its consumer's PEL")
            }
            Some(_) => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
