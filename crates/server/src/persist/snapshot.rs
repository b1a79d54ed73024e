//! The per-shard snapshot serializer: a resumable cursor that writes one database of one
//! shard as RDB bytes, in bounded steps.
//!
//! The same walk writes an AOF base of commands (`aof-use-rdb-preamble no`, [`Form::Commands`]):
//! each key as the commands that rebuild it (`darner_aof::rewrite`), a big collection through a
//! `darner_aof::rewrite::Collection` that emits a command every 64 elements the walk gives it,
//! and its PEXPIREAT after the last; no opcodes, no RDB types.
//!
//! # Why a cursor, when SAVE could just loop
//!
//! SAVE holds every shard (a transaction over all of them) and asks each for its keys until
//! none are left, so a plain loop would do for it. A fork-less BGSAVE cannot loop: each shard
//! must go on serving clients while it writes its part, a step between two turns of its event
//! loop, and no step may take longer than the other work can wait (Darner's rule: nothing
//! stalls). So the serializer is written once, as the bounded step BGSAVE needs, and SAVE is
//! simply the driver that calls it back to back. One shape, one code path to test.
//!
//! # What a step does
//!
//! [`DbCursor::step`] appends at most about `budget` bytes to the caller's buffer and returns
//! whether the database is finished. The cursor holds no reference into the table (a step
//! ends by returning, and the shard thread does whatever it wants before the next one), only
//! positions:
//!
//! - the position in the table's SCAN order ([`Db::scan_all`]: the top 32 bits of the key's
//!   hash, which do not move when a segment splits), so a key present for the whole walk is
//!   written exactly once, as SCAN guarantees;
//! - the keys the last scan step found too big to write in one go, waiting their turn;
//! - the big value in progress: its key, and the element position its `*_from` walk
//!   (`darner_engine::persist`) returned (a stream's: the next node's master id).
//!
//! A small value (up to [`BIG_ELEMENTS`] elements, any string) is written whole, in the
//! encoding Redis 7.0 would choose (`darner_rdb::encode_value`: listpacks, intsets).
//! A bigger hash, set, sorted set or list is written element by element (types 4 / 24, 2 /
//! 200, 5 and 1: a count, then independent elements), a bounded number of elements per step,
//! so a 10M-field hash never sits whole in the buffer and never holds a step for long.
//!
//! A stream of more than [`BIG_ELEMENTS`] live entries goes node by node. Its type (19,
//! `STREAM_LISTPACKS_2`, which Redis 7.0 reads) starts with the number of listpack nodes, then
//! each node (master id, listpack), then the length, ids, entries added and consumer groups.
//! The node count is known up front because the nodes written are the stream's own
//! (`Stream::node_count`; a node always holds a live entry), each as a listpack of its live
//! entries (`darner_engine::persist::stream_nodes_from`, resuming at a node's master id): the
//! header and count in the first step, whole nodes until about the step's entry bound in each
//! next one, and the metadata and groups (PELs, consumers) whole in a last step. Redis keeps a
//! loaded file's nodes, so it ends up with the same nodes. A small stream is converted whole
//! and cut into nodes by Redis's default node limits. As commands, a big stream goes the same
//! way: its entries' XADDs node by node, then XSETID and its groups (XGROUP CREATE, XCLAIM,
//! XGROUP CREATECONSUMER) in a last step: the commands `darner_aof::rewrite::render_stream`
//! gives the whole value. A node is the unit of a step: with `stream-node-max-entries` and
//! `-bytes` both 0, a stream is one node, written in one step.
//!
//! # What stays the driver's business
//!
//! Each key goes as Redis's `rdbSaveKeyValuePair` writes it: its expiry in ms (expired keys
//! included, as Redis writes them: the loading side drops them), the `IDLE` opcode under an
//! LRU `maxmemory-policy` or `FREQ` under an LFU one, the type byte, the key, the object.
//! Hash fields and set members whose TTL has passed are left out, and a collection left with
//! nothing is not written (`darner_engine::persist`'s rule). The header, AUX fields, function
//! libraries, `SELECTDB` / `RESIZEDB` (which need every shard's counts) and the EOF with its
//! CRC-64 are the driver's (`persist::save`), which feeds the bytes to a
//! `darner_rdb::encode::FileWriter`.
//!
//! **Consistency is the driver's too.** Between two steps the values the cursor still has to
//! write must not change: SAVE holds every shard for its whole run; a fork-less BGSAVE must
//! serialize a key (or a big value's remaining elements) before a command changes it
//! (serialize-before-write) and skip it when the cursor gets there. [`DbCursor::written`]
//! tells whether the cursor has passed a key already, by its SCAN position, which is what
//! such a hook needs.

use darner_aof::rewrite::{self as cmds, Collection};
use darner_engine::entry::ValueRef;
use darner_engine::persist::{
    hash_fields, hash_fields_from, list_elements_from, live_len, set_has_live_ttls,
    set_members_from, stream_header, stream_nodes_from, to_rdb, zset_members_from,
};
use darner_engine::types::stream::StreamId;
use darner_engine::{Clock, Db, Entry, SCAN_DONE};
use darner_rdb::encode::{self as enc};
use darner_rdb::{object_type as ot, EncodeOptions};
use std::collections::VecDeque;

/// Values with more elements than this are written element by element, in steps.
pub const BIG_ELEMENTS: usize = 1024;

/// Elements of a big value written between two budget checks.
const ELEMENTS_PER_CHECK: usize = 256;

/// Keys a scan step visits between two budget checks.
const KEYS_PER_SCAN: usize = 64;

/// Which access opcode goes before each key, by `maxmemory-policy` (Redis writes `IDLE`
/// under an LRU policy, `FREQ` under an LFU one, neither otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessOpcode {
    None,
    Idle,
    Freq,
}

impl AccessOpcode {
    /// The opcode for a `maxmemory-policy` name.
    pub fn for_policy(policy: &str) -> AccessOpcode {
        if policy.ends_with("-lru") {
            AccessOpcode::Idle
        } else if policy.ends_with("-lfu") {
            AccessOpcode::Freq
        } else {
            AccessOpcode::None
        }
    }
}

/// What a snapshot's entries are written as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// RDB records (SAVE, BGSAVE, an AOF base with `aof-use-rdb-preamble yes`).
    Rdb,
    /// The commands that rebuild each key (an AOF base with `aof-use-rdb-preamble no`:
    /// `darner_aof::rewrite`).
    Commands,
}

/// How a snapshot is written.
#[derive(Clone, Copy, Debug)]
pub struct SnapshotOptions {
    /// `rdbcompression`.
    pub encode: EncodeOptions,
    pub access: AccessOpcode,
    /// The snapshot's time: field and member TTLs at or before it are left out.
    pub now_ms: i64,
    pub form: Form,
}

impl SnapshotOptions {
    /// The options the configuration gives now (`rdbcompression`, `maxmemory-policy`), at
    /// `now_ms`: SAVE's, BGSAVE's and an AOF rewrite's.
    pub fn from_config(shared: &crate::shared::Shared, now_ms: i64) -> SnapshotOptions {
        let policy = shared.config.get("maxmemory-policy").unwrap_or_default();
        SnapshotOptions {
            encode: EncodeOptions {
                compression: super::yes(shared, "rdbcompression"),
            },
            access: AccessOpcode::for_policy(&policy),
            now_ms,
            form: Form::Rdb,
        }
    }
}

/// Appends the start of a part of database `db`: RDB's `SELECTDB`, or `SELECT`.
pub(crate) fn write_select(out: &mut Vec<u8>, db: usize, form: Form) {
    match form {
        Form::Rdb => enc::write_select_db(out, db as u64),
        Form::Commands => darner_aof::render_select(out, db as u32),
    }
}

/// A big value being written element by element (SAVE's cursor and BGSAVE's shards).
#[derive(Debug)]
pub(crate) struct Big {
    pub(crate) key: Box<[u8]>,
    kind: BigKind,
    /// Where its walk resumes (None: every element written).
    at: Option<usize>,
    /// A stream's next node, by master id (None: every node written, the tail remains).
    node: Option<StreamId>,
    /// Written as commands ([`Form::Commands`]): the command being filled.
    commands: Option<Collection>,
}

#[derive(Clone, Copy, Debug)]
enum BigKind {
    Hash,
    /// A hash with field TTLs (type 24): the smallest TTL the header gave.
    HashTtl(u64),
    Set,
    /// Darner's set with member TTLs (type 200).
    SetTtl,
    ZSet,
    List,
    /// Type 19, node by node: the node count, the nodes, then the metadata and groups.
    Stream,
}

/// The resumable writer of one shard's part of one database (see the module essay).
#[derive(Debug)]
pub struct DbCursor {
    db: usize,
    opts: SnapshotOptions,
    /// The next SCAN position ([`SCAN_DONE`]: the scan is over).
    scan: u64,
    /// Big keys the scan passed, written before the scan goes on.
    queue: VecDeque<Box<[u8]>>,
    big: Option<Big>,
    keys: u64,
}

impl DbCursor {
    /// A cursor at the start of database `db`.
    pub fn new(db: usize, opts: SnapshotOptions) -> DbCursor {
        DbCursor {
            db,
            opts,
            scan: 0,
            queue: VecDeque::new(),
            big: None,
            keys: 0,
        }
    }

    /// The database this cursor writes.
    pub fn db(&self) -> usize {
        self.db
    }

    /// Keys written so far.
    pub fn keys_written(&self) -> u64 {
        self.keys
    }

    /// Whether the cursor is past the SCAN position of the key with hash `hash`
    /// (`darner_engine::hash_key`) and its value is no longer in progress: a write to that key
    /// now cannot change what the snapshot holds.
    pub fn written(&self, hash: u64, key: &[u8]) -> bool {
        let pos = hash >> 32;
        let in_progress = self.big.as_ref().is_some_and(|b| *b.key == *key)
            || self.queue.iter().any(|k| **k == *key);
        pos < self.scan && !in_progress
    }

    /// Whether the last step ended inside a big value's record (the next steps continue it).
    pub fn in_record(&self) -> bool {
        self.big.is_some()
    }

    /// Whether every key has been written.
    pub fn done(&self) -> bool {
        self.scan >= SCAN_DONE && self.queue.is_empty() && self.big.is_none()
    }

    /// Appends about `budget` bytes (at least one key or a few elements) of the database to
    /// `out`; returns true once everything is written. `db` must be this cursor's database,
    /// unchanged since the last step in every part not yet written; `clock` gives the access
    /// clock's reading (idle times, LFU counters).
    pub fn step(&mut self, db: &Db, clock: &Clock, out: &mut Vec<u8>, budget: usize) -> bool {
        let limit = out.len().saturating_add(budget.max(1));
        while out.len() < limit {
            if self.big.is_some() {
                self.big_step(db, out, limit);
            } else if let Some(key) = self.queue.pop_front() {
                if let Some(e) = db.entry_raw(&key) {
                    self.start_big(e, clock, out);
                }
            } else if self.scan < SCAN_DONE {
                let mut big = Vec::new();
                let (opts, keys) = (self.opts, &mut self.keys);
                self.scan = db.scan_all(self.scan, KEYS_PER_SCAN, |e| {
                    if is_big(e, opts.now_ms) {
                        big.push(Box::<[u8]>::from(e.key()));
                    } else if write_small(e, &opts, clock, out) {
                        *keys += 1;
                    }
                });
                self.queue.extend(big);
            } else {
                break;
            }
        }
        self.done()
    }

    /// Writes a big value's header and makes it the one in progress; a value with nothing
    /// left to write is skipped.
    fn start_big(&mut self, e: &Entry, clock: &Clock, out: &mut Vec<u8>) {
        if let Some(big) = Big::start(e, &self.opts, clock, out) {
            self.keys += 1;
            self.big = Some(big);
        }
    }

    /// Writes elements of the big value in progress until the buffer reaches `limit` or the
    /// value is finished.
    fn big_step(&mut self, db: &Db, out: &mut Vec<u8>, limit: usize) {
        let Some(big) = self.big.as_mut() else {
            return;
        };
        // The value cannot have gone (see the module essay); if it did, stop writing it.
        let Some(e) = db.entry_raw(&big.key) else {
            self.big = None;
            return;
        };
        while out.len() < limit {
            if big.walk(e, &self.opts, ELEMENTS_PER_CHECK, out) {
                self.big = None;
                return;
            }
        }
    }
}

impl Big {
    /// Writes the header of big value `e` (opcodes, type, key, count) and returns its walk;
    /// None, writing nothing, when it has no element left at the snapshot's time.
    pub(crate) fn start(
        e: &Entry,
        opts: &SnapshotOptions,
        clock: &Clock,
        out: &mut Vec<u8>,
    ) -> Option<Big> {
        let now = opts.now_ms;
        let n = live_len(e.value(), now) as u64;
        if n == 0 {
            return None;
        }
        let kind = match e.value() {
            ValueRef::Hash(h) if h.has_ttls() => {
                match hash_fields(h, now).filter_map(|(_, _, t)| t).min() {
                    Some(min) => BigKind::HashTtl(min),
                    None => BigKind::Hash,
                }
            }
            ValueRef::Hash(_) => BigKind::Hash,
            ValueRef::Set(s) if set_has_live_ttls(s, now) => BigKind::SetTtl,
            ValueRef::Set(_) => BigKind::Set,
            ValueRef::ZSet(_) => BigKind::ZSet,
            ValueRef::List(_) => BigKind::List,
            ValueRef::Stream(_) => BigKind::Stream,
            // Never big (see `is_big`).
            ValueRef::Str(_) => return None,
        };
        let ty = match kind {
            BigKind::Hash => ot::HASH,
            BigKind::HashTtl(_) => ot::HASH_METADATA,
            BigKind::Set => ot::SET,
            BigKind::SetTtl => ot::DARNER_SET_TTL,
            BigKind::ZSet => ot::ZSET_2,
            BigKind::List => ot::LIST,
            BigKind::Stream => ot::STREAM_LISTPACKS_2,
        };
        if opts.form == Form::Commands {
            let ck = match kind {
                BigKind::Hash | BigKind::HashTtl(_) => cmds::Kind::Hash,
                BigKind::Set | BigKind::SetTtl => cmds::Kind::Set,
                BigKind::ZSet => cmds::Kind::ZSet,
                BigKind::List => cmds::Kind::List,
                // Node by node: its entries' XADDs, then the tail.
                BigKind::Stream => {
                    return Some(Big {
                        key: e.key().into(),
                        kind,
                        at: Some(0),
                        node: Some(StreamId::MIN),
                        commands: None,
                    })
                }
            };
            return Some(Big {
                key: e.key().into(),
                kind,
                at: Some(0),
                node: None,
                commands: Some(Collection::new(ck, e.key())),
            });
        }
        write_modifiers(e, opts, clock, out);
        enc::write_key(out, ty, e.key(), &opts.encode);
        match kind {
            BigKind::HashTtl(min) => enc::begin_hash_with_ttl(out, min, n),
            BigKind::Hash => enc::begin_hash(out, n),
            BigKind::Set => enc::begin_set(out, n),
            BigKind::SetTtl => enc::begin_set_with_ttl(out, n),
            BigKind::ZSet => enc::begin_zset(out, n),
            BigKind::List => enc::begin_list(out, n),
            BigKind::Stream => {
                let nodes = match e.value() {
                    ValueRef::Stream(s) => s.node_count(),
                    _ => 0,
                };
                enc::begin_stream(out, nodes as u64);
            }
        }
        Some(Big {
            key: e.key().into(),
            kind,
            at: Some(0),
            node: Some(StreamId::MIN),
            commands: None,
        })
    }

    /// Writes about `n` more elements of `e` (the value this walk started on, unchanged
    /// since); true once every element is written.
    pub(crate) fn walk(
        &mut self,
        e: &Entry,
        opts: &SnapshotOptions,
        n: usize,
        out: &mut Vec<u8>,
    ) -> bool {
        let (now, o) = (opts.now_ms, opts.encode);
        let Some(at) = self.at else {
            return true;
        };
        if let Some(c) = self.commands.as_mut() {
            self.at = match e.value() {
                ValueRef::Hash(h) => {
                    hash_fields_from(h, at, n, now, |f, v, t| c.hash_field(out, f, v, t))
                }
                ValueRef::Set(s) => set_members_from(s, at, n, now, |m, t| c.set_member(out, m, t)),
                ValueRef::ZSet(z) => zset_members_from(z, at, n, |m, s| c.zset_member(out, m, s)),
                ValueRef::List(l) => list_elements_from(l, at, n, |x| c.list_element(out, x)),
                _ => None,
            };
            if self.at.is_none() {
                c.finish(out);
                if let Some(t) = e.expire() {
                    cmds::render_pexpireat(out, e.key(), t);
                }
            }
            return self.at.is_none();
        }
        self.at = match (self.kind, e.value()) {
            (BigKind::Hash, ValueRef::Hash(h)) => {
                hash_fields_from(h, at, n, now, |f, v, _| enc::hash_field(out, f, v, &o))
            }
            (BigKind::HashTtl(min), ValueRef::Hash(h)) => {
                hash_fields_from(h, at, n, now, |f, v, t| {
                    enc::hash_field_with_ttl(out, min, f, v, t, &o)
                })
            }
            (BigKind::Set, ValueRef::Set(s)) => {
                set_members_from(s, at, n, now, |m, _| enc::set_member(out, m, &o))
            }
            (BigKind::SetTtl, ValueRef::Set(s)) => set_members_from(s, at, n, now, |m, t| {
                enc::set_with_ttl_member(out, m, t, &o)
            }),
            (BigKind::ZSet, ValueRef::ZSet(z)) => {
                zset_members_from(z, at, n, |m, s| enc::zset_member(out, m, s, &o))
            }
            (BigKind::List, ValueRef::List(l)) => {
                list_elements_from(l, at, n, |x| enc::list_element(out, x, &o))
            }
            // Whole nodes until about `n` entries, then the tail in a step of its own.
            (BigKind::Stream, ValueRef::Stream(st)) => match (self.node, opts.form) {
                (Some(from), Form::Rdb) => {
                    self.node = stream_nodes_from(st, from, n, |es| enc::stream_node(out, es, &o));
                    Some(at)
                }
                (Some(from), Form::Commands) => {
                    self.node = stream_nodes_from(st, from, n, |es| {
                        for x in es {
                            cmds::render_stream_entry(out, e.key(), x);
                        }
                    });
                    Some(at)
                }
                (None, Form::Rdb) => {
                    enc::end_stream(out, &stream_header(st), st.len(), &o);
                    None
                }
                (None, Form::Commands) => {
                    cmds::render_stream_tail(out, e.key(), &stream_header(st));
                    if let Some(t) = e.expire() {
                        cmds::render_pexpireat(out, e.key(), t);
                    }
                    None
                }
            },
            _ => None,
        };
        self.at.is_none()
    }
}

/// Whether `e` is written in steps: a collection of more than [`BIG_ELEMENTS`] elements (a
/// stream's live entries).
/// Whether `e` may be big ([`is_big`] at some time): its elements counted without looking
/// at their TTLs, O(1) (a bound of the count [`is_big`] makes in one pass when some have TTLs).
pub(crate) fn may_be_big(e: &Entry) -> bool {
    let n = match e.value() {
        ValueRef::Str(_) => return false,
        ValueRef::Hash(h) => h.len(),
        ValueRef::List(l) => l.len(),
        ValueRef::Set(s) => s.len(),
        ValueRef::ZSet(z) => z.len(),
        ValueRef::Stream(s) => s.len() as usize,
    };
    n > BIG_ELEMENTS
}

pub(crate) fn is_big(e: &Entry, now_ms: i64) -> bool {
    match e.value() {
        ValueRef::Str(_) => false,
        v => live_len(v, now_ms) > BIG_ELEMENTS,
    }
}

/// The opcodes before a key: its expiry, then its idle time or LFU counter.
pub(crate) fn write_modifiers(e: &Entry, opts: &SnapshotOptions, clock: &Clock, out: &mut Vec<u8>) {
    if let Some(at) = e.expire() {
        enc::write_expire_ms(out, at.max(0) as u64);
    }
    match opts.access {
        AccessOpcode::None => {}
        AccessOpcode::Idle => enc::write_idle(out, clock.idle_secs(e.clock())),
        AccessOpcode::Freq => {
            let freq = match clock.lfu {
                Some(l) => l.counter(e.clock()),
                None => e.clock() as u8,
            };
            enc::write_freq(out, freq);
        }
    }
}

/// Writes a small key whole; false when there was nothing to write (a collection whose every
/// field or member has expired).
pub(crate) fn write_small(
    e: &Entry,
    opts: &SnapshotOptions,
    clock: &Clock,
    out: &mut Vec<u8>,
) -> bool {
    let value = to_rdb(e.value(), opts.now_ms);
    if value.is_empty_collection() {
        return false;
    }
    if opts.form == Form::Commands {
        cmds::render_key(out, e.key(), &value, e.expire());
        return true;
    }
    write_modifiers(e, opts, clock, out);
    let ty = enc::object_type_of(&value);
    enc::write_key(out, ty, e.key(), &opts.encode);
    enc::encode_value(&value, &opts.encode, out);
    true
}

/// Whether database `db` holds a hash with a field TTL still to come at `now_ms`: the file
/// then needs RDB 12 (Redis 7.4's types 24 / 25). Looks only at the keys registered as having
/// field TTLs.
pub fn has_hash_field_ttls(db: &Db, now_ms: i64) -> bool {
    db.field_ttl_keys().any(|k| {
        db.entry_raw(k).is_some_and(|e| match e.value() {
            ValueRef::Hash(h) => {
                h.has_ttls() && hash_fields(h, now_ms).any(|(_, _, t)| t.is_some())
            }
            _ => false,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use darner_rdb::{HashField, Value};

    /// A database with small and big values of every type, field and member TTLs, key TTLs.
    fn sample_db(now: i64) -> Db {
        let mut db = Db::new();
        let limits = darner_engine::types::Limits::default();
        let clock = Clock::at(now);
        let s = |n: usize, p: &str| (0..n).map(|i| format!("{p}{i}").into_bytes()).collect();
        let hash = |n: usize, ttl: bool| {
            Value::Hash(
                (0..n)
                    .map(|i| HashField {
                        field: format!("f{i}").into_bytes(),
                        value: vec![b'v'; i % 7],
                        expire_at_ms: (ttl && i % 3 == 0).then_some(now as u64 + 1_000_000),
                    })
                    .collect(),
            )
        };
        let mut values: Vec<(String, Value, Option<i64>)> = vec![
            ("str".into(), Value::String(b"hello".to_vec()), None),
            (
                "int".into(),
                Value::String(b"12345".to_vec()),
                Some(now + 50_000),
            ),
            ("list:small".into(), Value::List(s(10, "e")), None),
            ("list:big".into(), Value::List(s(5000, "e")), None),
            ("set:small".into(), Value::Set(s(10, "m")), None),
            ("set:big".into(), Value::Set(s(3000, "m")), None),
            (
                "set:ttl:big".into(),
                Value::SetWithTtl(
                    (0..2000)
                        .map(|i| (format!("m{i}").into_bytes(), Some(now as u64 + 99_000)))
                        .collect(),
                ),
                None,
            ),
            (
                "zset:big".into(),
                Value::SortedSet(
                    (0..3000)
                        .map(|i| (format!("m{i}").into_bytes(), i as f64))
                        .collect(),
                ),
                None,
            ),
            ("hash:small".into(), hash(10, false), None),
            ("hash:big".into(), hash(4000, false), None),
            ("hash:ttl:big".into(), hash(3000, true), Some(now + 1)),
        ];
        for i in 0..2000 {
            values.push((format!("k{i}"), Value::String(vec![b'x'; i % 50]), None));
        }
        for (k, v, ttl) in values {
            let e = darner_engine::persist::entry_from_rdb(k.as_bytes(), v, ttl, 0, &limits, now)
                .unwrap();
            db.view(clock).set(e);
        }
        db
    }

    fn write(db: &Db, now: i64, budget: usize) -> (Vec<u8>, u64, usize) {
        write_as(db, now, budget, Form::Rdb)
    }

    fn write_as(db: &Db, now: i64, budget: usize, form: Form) -> (Vec<u8>, u64, usize) {
        let opts = SnapshotOptions {
            encode: EncodeOptions::default(),
            access: AccessOpcode::None,
            now_ms: now,
            form,
        };
        let mut c = DbCursor::new(0, opts);
        let (mut out, mut steps) = (Vec::new(), 0);
        while !c.step(db, &Clock::at(now), &mut out, budget) {
            steps += 1;
            assert!(steps < 10_000_000);
        }
        (out, c.keys_written(), steps)
    }

    #[test]
    fn tiny_steps_write_the_same_bytes_as_one_step_and_the_file_decodes_to_the_values() {
        let now = 1_700_000_000_000;
        let db = sample_db(now);
        let (whole, keys, one) = write(&db, now, usize::MAX);
        assert_eq!(one, 0);
        assert_eq!(keys, db.len() as u64);
        let (stepped, keys2, many) = write(&db, now, 1);
        assert!(many > 100, "{many} steps");
        assert_eq!(keys2, keys);
        assert_eq!(stepped, whole);

        let mut file = Vec::new();
        enc::write_header(&mut file, 12);
        enc::write_select_db(&mut file, 0);
        file.extend_from_slice(&whole);
        enc::write_eof(&mut file, true);
        let (_, entries, _) = darner_rdb::decode_file(&file).unwrap();
        assert_eq!(entries.len(), db.len());
        for e in entries {
            let mine = db.entry_raw(&e.key).unwrap();
            assert_eq!(
                e.expire_at_ms.map(|t| t as i64),
                mine.expire(),
                "{:?}",
                e.key
            );
            let mut want = to_rdb(mine.value(), now);
            let mut got = e.value;
            for v in [&mut want, &mut got] {
                match v {
                    Value::Set(m) => m.sort(),
                    Value::SetWithTtl(m) => m.sort(),
                    Value::Hash(f) => f.sort_by(|a, b| a.field.cmp(&b.field)),
                    Value::SortedSet(m) => m.sort_by(|a, b| a.0.cmp(&b.0)),
                    _ => {}
                }
            }
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&e.key));
        }
    }

    #[test]
    fn commands_in_tiny_steps_are_the_commands_of_one_step_64_elements_at_most() {
        let now = 1_700_000_000_000;
        let db = sample_db(now);
        let (whole, keys, _) = write_as(&db, now, usize::MAX, Form::Commands);
        assert_eq!(keys, db.len() as u64);
        let (stepped, _, many) = write_as(&db, now, 1, Form::Commands);
        assert!(many > 100, "{many} steps");
        assert_eq!(stepped, whole);
        // Per key: the elements its commands carry, and its TTL.
        let (entries, _) = darner_aof::read_all(&whole).unwrap();
        let mut elements: std::collections::HashMap<Vec<u8>, usize> = Default::default();
        let mut ttls: std::collections::HashMap<Vec<u8>, i64> = Default::default();
        for e in &entries {
            let a = e.argv().unwrap();
            let key = a[1].to_vec();
            let n = match &a[0][..] {
                b"RPUSH" | b"SADD" => a.len() - 2,
                b"ZADD" | b"HMSET" => (a.len() - 2) / 2,
                b"SADDEX" => a.len() - 4,
                b"HSET" => 1,
                b"SET" | b"HPEXPIREAT" => 0,
                b"PEXPIREAT" => {
                    ttls.insert(key, std::str::from_utf8(&a[2]).unwrap().parse().unwrap());
                    continue;
                }
                other => panic!("{:?}", String::from_utf8_lossy(other)),
            };
            assert!(n <= darner_aof::rewrite::ITEMS_PER_CMD, "{n}");
            *elements.entry(key).or_default() += n;
        }
        assert_eq!(elements.len(), db.len());
        for (k, n) in &elements {
            let e = db.entry_raw(k).unwrap();
            let want = match e.value() {
                ValueRef::Str(_) => 0,
                v => live_len(v, now),
            };
            assert_eq!(*n, want, "{:?}", String::from_utf8_lossy(k));
            assert_eq!(ttls.get(k).copied(), e.expire());
        }
    }

    /// A database holding one stream of `n` entries (some with their own field names), a
    /// consumer group with pending entries and two consumers, and every 7th entry from 1000
    /// on deleted (nodes keep deleted entries).
    fn stream_db(now: i64, n: u64) -> Db {
        use darner_rdb::StreamId as Id;
        use darner_rdb::{PendingEntry, Stream, StreamConsumer, StreamEntry, StreamGroup};
        let id = |i: u64| Id {
            ms: 1000 + i,
            seq: i % 3,
        };
        let entries: Vec<StreamEntry> = (0..n)
            .map(|i| StreamEntry {
                id: id(i),
                fields: if i % 50 == 0 {
                    vec![(format!("other{i}").into_bytes(), b"x".to_vec())]
                } else {
                    vec![
                        (b"a".to_vec(), i.to_string().into_bytes()),
                        (b"b".to_vec(), vec![b'v'; (i % 40) as usize]),
                    ]
                },
            })
            .collect();
        let owner = |i: u64| if i.is_multiple_of(2) { "alice" } else { "bob" };
        let pending: Vec<PendingEntry> = (10..400)
            .map(|i| PendingEntry {
                id: id(i),
                delivery_time_ms: now as u64 - i,
                delivery_count: i % 4 + 1,
                consumer: owner(i).as_bytes().to_vec(),
            })
            .collect();
        let consumers = ["alice", "bob"]
            .iter()
            .map(|c| StreamConsumer {
                name: c.as_bytes().to_vec(),
                seen_time_ms: now as u64 - 5,
                active_time_ms: now as u64 - 5,
                pending: pending
                    .iter()
                    .filter(|p| p.consumer == c.as_bytes())
                    .map(|p| p.id)
                    .collect(),
            })
            .collect();
        let stream = Stream {
            length: n,
            last_id: id(n - 1),
            first_id: id(0),
            max_deleted_id: Id::default(),
            entries_added: n,
            groups: vec![StreamGroup {
                name: b"g".to_vec(),
                last_delivered_id: id(399),
                entries_read: Some(400),
                pending,
                consumers,
            }],
            entries,
        };
        let limits = darner_engine::types::Limits::default();
        let mut e = darner_engine::persist::entry_from_rdb(
            b"stream",
            Value::Stream(Box::new(stream)),
            None,
            0,
            &limits,
            now,
        )
        .unwrap();
        let Some(darner_engine::Value::Stream(st)) = e.value_mut() else {
            panic!("not a stream");
        };
        for i in (1000..n).step_by(7) {
            let i = id(i);
            assert!(st.delete(StreamId::new(i.ms, i.seq)));
        }
        let mut db = Db::new();
        db.view(Clock::at(now)).set(e);
        db
    }

    fn decode_one(record: &[u8]) -> darner_rdb::Entry {
        let mut file = Vec::new();
        enc::write_header(&mut file, 10);
        enc::write_select_db(&mut file, 0);
        file.extend_from_slice(record);
        enc::write_eof(&mut file, true);
        let (_, mut entries, _) = darner_rdb::decode_file(&file).unwrap();
        assert_eq!(entries.len(), 1);
        entries.pop().unwrap()
    }

    #[test]
    fn a_big_stream_in_tiny_steps_loads_as_the_whole_value_with_its_groups_or_gives_its_commands() {
        let now = 1_700_000_000_000;
        let db = stream_db(now, 5000);
        let e = db.entry_raw(b"stream").unwrap();
        let ValueRef::Stream(st) = e.value() else {
            panic!("not a stream");
        };
        assert!(st.len() > BIG_ELEMENTS as u64);
        let opts = SnapshotOptions {
            encode: EncodeOptions::default(),
            access: AccessOpcode::None,
            now_ms: now,
            form: Form::Rdb,
        };
        assert!(is_big(e, now));
        let mut whole = Vec::new();
        assert!(write_small(e, &opts, &Clock::at(now), &mut whole));

        let (stepped, keys, many) = write(&db, now, 1);
        assert_eq!(keys, 1);
        // Whole nodes until about 256 entries a step, then the tail.
        assert!(many as u64 > st.len() / 512, "{many} steps");
        let (one, _, _) = write(&db, now, usize::MAX);
        assert_eq!(stepped, one);

        let (a, b) = (decode_one(&stepped), decode_one(&whole));
        assert_eq!(stepped[0], ot::STREAM_LISTPACKS_2);
        assert_eq!(a.value, b.value);
        assert_eq!(a.value, to_rdb(e.value(), now));
        let Value::Stream(s) = &a.value else {
            panic!("not a stream");
        };
        assert_eq!(s.entries.len() as u64, st.len());
        assert_eq!(s.groups[0].pending.len(), 390);
        assert_eq!(s.groups[0].consumers.len(), 2);

        // As commands: the XADDs node by node, then the tail, as the whole value's commands.
        let opts = SnapshotOptions {
            form: Form::Commands,
            ..opts
        };
        let mut whole = Vec::new();
        assert!(write_small(e, &opts, &Clock::at(now), &mut whole));
        let (stepped, _, many) = write_as(&db, now, 1, Form::Commands);
        assert!(many as u64 > st.len() / 512, "{many} steps");
        assert_eq!(stepped, whole);
    }

    #[test]
    fn field_ttls_are_found_for_the_file_version() {
        let now = 1_700_000_000_000;
        let db = sample_db(now);
        assert!(has_hash_field_ttls(&db, now));
        // Every field TTL passed: RDB 10 is enough.
        assert!(!has_hash_field_ttls(&db, now + 2_000_000));
        assert!(!has_hash_field_ttls(&Db::new(), now));
    }
}
