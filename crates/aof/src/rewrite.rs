//! An AOF base written as commands (`aof-use-rdb-preamble no`): values in, RESP commands
//! out, as Redis's `rewriteAppendOnlyFileRio` writes them.
//!
//! The base starts with a `#TS:` annotation when `aof-timestamp-enabled` is on and a
//! `FUNCTION LOAD` for each function library ([`render_header`]); then, per database that
//! holds keys, `SELECT <db>` and every key: a string as `SET`, a list as `RPUSH`, a set as
//! `SADD`, a sorted set as `ZADD` (scores in Redis 7.2's `fpconv` digits), a hash as `HMSET`,
//! each of at most [`ITEMS_PER_CMD`] elements; a stream as `XADD` per entry (the `XADD ...
//! MAXLEN 0` trick for one with none), `XSETID` with its entries-added count and max deleted
//! id, and per consumer group `XGROUP CREATE ... ENTRIESREAD`, an `XCLAIM ... TIME RETRYCOUNT
//! JUSTID FORCE` per pending entry and `XGROUP CREATECONSUMER` for a consumer without any; a
//! key with a TTL ends with `PEXPIREAT`. Hash fields with a TTL are written as Redis 7.4
//! writes them (`HSET` and `HPEXPIREAT key ms FIELDS 1 field`), set members with a TTL as
//! Darner's `SADDEX key PXAT ms member ...` (one command per run of members with the same
//! TTL).
//!
//! A collection too big to be held whole is written element by element: [`Collection`]
//! takes its elements in any number of calls and emits a command each time it holds
//! [`ITEMS_PER_CMD`] of them, which is what the server's snapshot walk feeds it, a bounded
//! number of elements per step. [`render_key`] is the same for a value given whole.
//!
//! Which database a command belongs to, the order of the keys, and where the bytes go are
//! the caller's: each part of a base it writes starts with [`crate::render_select`].

use crate::writer::render_command;
use darner_rdb::{Stream, StreamEntry, StreamId, Value};

/// Elements per variadic command (Redis's `AOF_REWRITE_ITEMS_PER_CMD`).
pub const ITEMS_PER_CMD: usize = 64;

/// The start of a base: the `#TS:` annotation (with `timestamp`), then `FUNCTION LOAD` for
/// each library's code.
pub fn render_header<L: AsRef<[u8]>>(out: &mut Vec<u8>, timestamp: Option<i64>, libraries: &[L]) {
    if let Some(ts) = timestamp {
        crate::writer::render_timestamp(out, ts);
    }
    for code in libraries {
        render_command(out, &[&b"FUNCTION"[..], b"LOAD", code.as_ref()]);
    }
}

/// `PEXPIREAT key ms`.
pub fn render_pexpireat(out: &mut Vec<u8>, key: &[u8], ms: i64) {
    render_command(out, &[&b"PEXPIREAT"[..], key, &int(ms)]);
}

fn int(v: i64) -> Vec<u8> {
    let mut b = Vec::with_capacity(20);
    darner_resp::write_i64(v, &mut b);
    b
}

fn id(i: StreamId) -> Vec<u8> {
    let mut b = Vec::with_capacity(41);
    darner_resp::write_u64(i.ms, &mut b);
    b.push(b'-');
    darner_resp::write_u64(i.seq, &mut b);
    b
}

/// The commands that rebuild `key` holding `value`, with its TTL (absolute unix ms).
pub fn render_key(out: &mut Vec<u8>, key: &[u8], value: &Value, expire_at_ms: Option<i64>) {
    match value {
        Value::String(s) => render_command(out, &[&b"SET"[..], key, s]),
        Value::List(l) => {
            let mut c = Collection::new(Kind::List, key);
            for e in l {
                c.list_element(out, e);
            }
            c.finish(out);
        }
        Value::Set(s) => {
            let mut c = Collection::new(Kind::Set, key);
            for m in s {
                c.set_member(out, m, None);
            }
            c.finish(out);
        }
        Value::SetWithTtl(s) => {
            let mut c = Collection::new(Kind::Set, key);
            for (m, t) in s {
                c.set_member(out, m, *t);
            }
            c.finish(out);
        }
        Value::SortedSet(z) => {
            let mut c = Collection::new(Kind::ZSet, key);
            for (m, s) in z {
                c.zset_member(out, m, *s);
            }
            c.finish(out);
        }
        Value::Hash(h) => {
            let mut c = Collection::new(Kind::Hash, key);
            for f in h {
                c.hash_field(out, &f.field, &f.value, f.expire_at_ms);
            }
            c.finish(out);
        }
        Value::Stream(s) => render_stream(out, key, s),
    }
    if let Some(ms) = expire_at_ms {
        render_pexpireat(out, key, ms);
    }
}

/// What a [`Collection`] builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    List,
    Set,
    ZSet,
    Hash,
}

impl Kind {
    fn command(self) -> &'static [u8] {
        match self {
            Kind::List => b"RPUSH",
            Kind::Set => b"SADD",
            Kind::ZSet => b"ZADD",
            Kind::Hash => b"HMSET",
        }
    }
}

/// A collection written element by element: elements without a TTL are batched into
/// variadic commands of at most [`ITEMS_PER_CMD`] elements; call [`Collection::finish`]
/// after the last one.
#[derive(Debug)]
pub struct Collection {
    kind: Kind,
    key: Box<[u8]>,
    /// The arguments of the command being filled (each a RESP bulk string).
    args: Vec<u8>,
    /// Their count and the elements they hold.
    argc: usize,
    items: usize,
    /// Set members with a TTL: the run being filled (`SADDEX key PXAT ms ...`).
    ttl_run: Option<u64>,
    ttl_args: Vec<u8>,
    ttl_items: usize,
}

impl Collection {
    pub fn new(kind: Kind, key: &[u8]) -> Collection {
        Collection {
            kind,
            key: key.into(),
            args: Vec::new(),
            argc: 0,
            items: 0,
            ttl_run: None,
            ttl_args: Vec::new(),
            ttl_items: 0,
        }
    }

    /// The key it writes.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    fn arg(&mut self, a: &[u8]) {
        bulk(&mut self.args, a);
        self.argc += 1;
    }

    fn item_done(&mut self, out: &mut Vec<u8>) {
        self.items += 1;
        if self.items == ITEMS_PER_CMD {
            self.flush(out);
        }
    }

    fn flush(&mut self, out: &mut Vec<u8>) {
        if self.items == 0 {
            return;
        }
        header(out, 2 + self.argc, self.kind.command(), &self.key);
        out.extend_from_slice(&self.args);
        self.args.clear();
        self.argc = 0;
        self.items = 0;
    }

    fn flush_ttl_run(&mut self, out: &mut Vec<u8>) {
        let Some(ms) = self.ttl_run.take() else {
            return;
        };
        header(out, 4 + self.ttl_items, b"SADDEX", &self.key);
        bulk(out, b"PXAT");
        bulk(out, &int(ms as i64));
        out.extend_from_slice(&self.ttl_args);
        self.ttl_args.clear();
        self.ttl_items = 0;
    }

    /// A list's next element (from the head).
    pub fn list_element(&mut self, out: &mut Vec<u8>, e: &[u8]) {
        self.arg(e);
        self.item_done(out);
    }

    /// A set member, with its TTL (absolute unix ms) if it has one.
    pub fn set_member(&mut self, out: &mut Vec<u8>, m: &[u8], ttl: Option<u64>) {
        match ttl {
            None => {
                self.arg(m);
                self.item_done(out);
            }
            Some(ms) => {
                if self.ttl_run != Some(ms) || self.ttl_items == ITEMS_PER_CMD {
                    self.flush_ttl_run(out);
                    self.ttl_run = Some(ms);
                }
                bulk(&mut self.ttl_args, m);
                self.ttl_items += 1;
            }
        }
    }

    /// A sorted set member and its score.
    pub fn zset_member(&mut self, out: &mut Vec<u8>, m: &[u8], score: f64) {
        let mut s = Vec::with_capacity(24);
        darner_resp::num::format_fpconv(score, &mut s);
        self.arg(&s);
        self.arg(m);
        self.item_done(out);
    }

    /// A hash field and its value, with the field's TTL (absolute unix ms) if it has one.
    pub fn hash_field(&mut self, out: &mut Vec<u8>, f: &[u8], v: &[u8], ttl: Option<u64>) {
        match ttl {
            None => {
                self.arg(f);
                self.arg(v);
                self.item_done(out);
            }
            Some(ms) => {
                render_command(out, &[&b"HSET"[..], &self.key, f, v]);
                render_command(
                    out,
                    &[
                        &b"HPEXPIREAT"[..],
                        &self.key,
                        &int(ms as i64),
                        b"FIELDS",
                        b"1",
                        f,
                    ],
                );
            }
        }
    }

    /// Writes what is still batched.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        self.flush(out);
        self.flush_ttl_run(out);
    }
}

fn bulk(out: &mut Vec<u8>, a: &[u8]) {
    out.push(b'$');
    darner_resp::write_u64(a.len() as u64, out);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(a);
    out.extend_from_slice(b"\r\n");
}

/// `*<argc>`, the command's name and the key.
fn header(out: &mut Vec<u8>, argc: usize, name: &[u8], key: &[u8]) {
    out.push(b'*');
    darner_resp::write_u64(argc as u64, out);
    out.extend_from_slice(b"\r\n");
    bulk(out, name);
    bulk(out, key);
}

/// A stream: its entries, its metadata, its consumer groups with their consumers and
/// pending entries (Redis's `rewriteStreamObject`).
pub fn render_stream(out: &mut Vec<u8>, key: &[u8], s: &Stream) {
    if s.entries.is_empty() {
        // An empty stream: add an entry and trim it at once.
        render_command(
            out,
            &[
                &b"XADD"[..],
                key,
                b"MAXLEN",
                b"0",
                &id(StreamId { ms: 0, seq: 1 }),
                b"x",
                b"y",
            ],
        );
    }
    for e in &s.entries {
        render_stream_entry(out, key, e);
    }
    render_stream_tail(out, key, s);
}

/// One entry of a stream written in parts: its XADD ([`render_stream`] is the entries' XADDs
/// in id order, then [`render_stream_tail`]; a stream with no entry goes whole).
pub fn render_stream_entry(out: &mut Vec<u8>, key: &[u8], e: &StreamEntry) {
    header(out, 3 + 2 * e.fields.len(), b"XADD", key);
    bulk(out, &id(e.id));
    for (f, v) in &e.fields {
        bulk(out, f);
        bulk(out, v);
    }
}

/// The end of a stream written in parts, after its entries: its metadata (XSETID) and its
/// consumer groups with their consumers and pending entries (`s.entries` is not used).
pub fn render_stream_tail(out: &mut Vec<u8>, key: &[u8], s: &Stream) {
    render_command(
        out,
        &[
            &b"XSETID"[..],
            key,
            &id(s.last_id),
            b"ENTRIESADDED",
            &int(s.entries_added as i64),
            b"MAXDELETEDID",
            &id(s.max_deleted_id),
        ],
    );
    let mut groups: Vec<_> = s.groups.iter().collect();
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    for g in groups {
        let read = g.entries_read.map_or(-1, |n| n as i64);
        render_command(
            out,
            &[
                &b"XGROUP"[..],
                b"CREATE",
                key,
                &g.name,
                &id(g.last_delivered_id),
                b"ENTRIESREAD",
                &int(read),
            ],
        );
        let mut pel: Vec<_> = g.pending.iter().collect();
        pel.sort_by_key(|p| p.id);
        let mut consumers: Vec<_> = g.consumers.iter().collect();
        consumers.sort_by(|a, b| a.name.cmp(&b.name));
        for c in consumers {
            let mut claimed = false;
            for pid in &c.pending {
                let Ok(i) = pel.binary_search_by_key(pid, |p| p.id) else {
                    continue;
                };
                let p = pel[i];
                render_command(
                    out,
                    &[
                        &b"XCLAIM"[..],
                        key,
                        &g.name,
                        &c.name,
                        b"0",
                        &id(p.id),
                        b"TIME",
                        &int(p.delivery_time_ms as i64),
                        b"RETRYCOUNT",
                        &int(p.delivery_count as i64),
                        b"JUSTID",
                        b"FORCE",
                    ],
                );
                claimed = true;
            }
            if !claimed {
                render_command(
                    out,
                    &[&b"XGROUP"[..], b"CREATECONSUMER", key, &g.name, &c.name],
                );
            }
        }
    }
}
