//! Streamed replies: whole-collection reads of big values produced in bounded steps.
//!
//! Why: a command runs on its shard's thread to the end, and nothing else of that shard runs
//! meanwhile. For almost every command that is a few microseconds, but HGETALL of a hash of a
//! million fields is ~200 ms of work, and GETs of other keys of the shard wait all of it. So
//! the commands whose reply is a whole big collection (HGETALL, HKEYS, HVALS, SMEMBERS, a big
//! LRANGE, ZRANGE / ZREVRANGE by rank with or without WITHSCORES) become *streams* when the
//! value has more than [`STREAM_MIN`] elements, and so do XRANGE / XREVRANGE replies of more
//! than [`STREAM_MIN_ENTRIES`] entries (any bounds, with or without COUNT: the entries in the
//! range are counted first, node by node, to write the reply's length; each step then reads
//! on from the id after the last one it wrote). So do replies *made of parts* ([`Segs`]) of
//! more than [`STREAM_MIN_ENTRIES`] entries: XREAD and XREADGROUP without BLOCK whose keys
//! are on one shard (their single-shard form), of one key or several, and XINFO STREAM FULL
//! (its entries, each group's PEL, each consumer's PEL); their headers are written when the
//! command runs, and each part of entries reads on from the id after the last one it wrote.
//! XREADGROUP writes as it reads (the PELs, the group's last id, delivery counts): each step
//! makes the writes of the entries it sends, under the same lock, and a stream whose client
//! went away still runs to its end (its bytes dropped), so no client ever sees the group half
//! read and the effect is always whole (cmd/stream/read.rs, `xreadgroup_segs`). With BLOCK
//! the reply is built in one go. With keys on several shards (a transaction holding them
//! all), each big part is a stream of its key's shard run for the transaction
//! ([`start_tx_segs`]: under its intents, one at a time, in key order; see read.rs,
//! `xread_streamed`), and the transaction holds its keys here meanwhile ([`Streams::hold`]).
//! A stream writes the reply a chunk at a time,
//! one chunk (~0.2 ms of work, [`STEP_TIME`], and at most [`STEP_ELEMS`] elements or
//! [`STEP_BYTES`] bytes) per turn of the worker's loop, so every other connection's commands
//! run between two chunks.
//!
//! How the reply stays a snapshot: while a stream reads `(db, key)`, nothing may touch that
//! key. The shard's [`Streams`] is that intent lock (the active streams are the "map" of
//! streamed keys: few at a time, so a list scanned linearly). Any work that touches a streamed
//! key waits, in FIFO order, and so does everything its connection sends after it:
//! - a command of a connection of this thread, run inline: the connection is held (its
//!   request goes back to the front of `conn.parsed`, `conn.stream_wait` is set) and resumed
//!   when a stream of this shard ends (it may then hit another stream and wait again);
//! - an item of a batch from another thread: parked in [`Streams`]'s FIFO with its origin;
//!   later items of the same connection park behind it even when they touch other keys; the
//!   FIFO is re-run in order when a stream ends.
//!
//! Readers of a streamed key wait too (simplest: no reader count, and a second big read of the
//! same key simply follows the first).
//!
//! Transactions (sched.rs, shard.rs) are not scheduled on a shard with streams: their parts
//! wait in [`Streams::tx_waiting`], not in the scheduler, so the shard keeps serving
//! single-key work meanwhile; while one waits, no new stream starts (a big read then runs at
//! once, as before streams existed), so a transaction cannot starve. FLUSHALL / FLUSHDB /
//! SORT ... reserve every shard, so they wait the same way. A shard where a transaction holds
//! intents starts no stream, and commands inside MULTI/EXEC or scripts run their handlers
//! directly: their big replies are produced at once.
//!
//! Blocked clients (BLPOP, ...) whose keys were written are served before a stream starts
//! (as Redis serves them right after the write), so no pop changes a list being streamed.
//!
//! Expiry: a stream pins its key in the engine ([`darner_engine::Db::pin`]) after the
//! handler's own first step (fields and members past their TTL removed), so neither lazy nor
//! active expiry removes or changes the value while it is read: the reply is the value as it
//! was when the command ran, as Redis's would be. A key, field or member whose time passes
//! meanwhile goes at its first access or sweep after the stream ends (every command that
//! touches the key waits for the stream anyway).
//!
//! Delivery: the chunks travel as [`Msg::StreamChunk`] to the connection's thread (through the
//! local queue for a connection of this thread), which appends them to the connection's
//! output as soon as the reply's sequence number is the oldest outstanding one and buffers
//! them until then (`Conn::deliver_part`), so the stream's bytes stay in order with the
//! client's other replies, and its later replies wait behind the whole stream. The receiving
//! thread watches its open streams ([`Inbound`]): a connection that closes, hits EOF or is
//! killed cancels its stream (a shared flag the shard checks before each step), which ends it
//! and releases the key.
//!
//! Output and flow control: one chunk is in flight per stream. After each chunk the stream
//! waits for a credit ([`Flow::ready`]) that the receiving thread gives once the chunk has left
//! the connection's output buffer for the socket (it sends what is buffered itself, at the end
//! of its pump, and otherwise waits for the socket's writable event), or, for a reply not yet
//! at the head of the connection's replies, while less than [`PARTIAL_MAX`] bytes of it wait.
//! Why: without it the output buffer of a fast stream grows to the whole reply, and the
//! thread's flush then copies megabytes into the socket in one turn (measured: turns of 5-10
//! ms, the very stall streams exist to avoid), plus the copies of a growing buffer. With it a
//! big reply costs ~one chunk of memory. A client that stops reading pauses its stream, but
//! not for long: a stream that waited [`SLOW_CLIENT_MS`] for a credit gets credits from then
//! on whatever the socket does, so the rest of the reply is produced (still in steps) into the
//! client's output buffer, as Redis would have, and the key is released; a client that does not
//! read cannot keep writers of the key waiting. `client-output-buffer-limit` applies to that
//! buffer as usual (closing the client ends its stream).

use crate::cmd::Command;
use crate::msg::{BatchItem, ConnRef, Msg};
use crate::shard::{Shard, ShardCtx};
use darner_engine::types::{ListSeek, StreamId};
use darner_engine::{Clock, ValueRef};
use darner_resp::ReplyWriter;
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A collection with more elements than this (in the reply) is streamed.
pub const STREAM_MIN: usize = 8192;
/// An XRANGE / XREVRANGE reply of more entries than this is streamed (an entry is at least
/// three elements, usually many more, and decoding it costs more than a hash field).
pub const STREAM_MIN_ENTRIES: usize = 2048;
/// Bytes of a reply that may wait behind earlier replies of its connection before its stream
/// pauses (see flow control above).
pub const PARTIAL_MAX: usize = 1 << 20;

/// A stream's flow control, shared by the shard producing it and the connection's thread.
pub struct Flow {
    /// Set by the connection's thread: the client went away; the stream ends.
    pub cancel: AtomicBool,
    /// The stream may send its next chunk (cleared by the shard when it sends one).
    pub ready: AtomicBool,
    /// The thread of the shard producing the stream (to wake it).
    pub producer: usize,
    /// Receiving side only: since when (unix ms, 0: not) the stream waits for its client, and
    /// whether it waited too long and now gets credits regardless.
    pub waiting_since: std::sync::atomic::AtomicI64,
    pub unthrottled: AtomicBool,
}

/// How long a stream waits for a client that does not read before producing the rest anyway.
pub const SLOW_CLIENT_MS: i64 = 1000;

impl Flow {
    fn runnable(&self) -> bool {
        self.ready.load(Ordering::Acquire) || self.cancel.load(Ordering::Acquire)
    }
}
/// The work of one step (one step per loop turn): about this long...
const STEP_TIME: std::time::Duration = std::time::Duration::from_micros(200);
/// ...checked every this many elements...
const CHECK_EVERY: usize = 256;
/// ...and at most this many elements or bytes (values may be big). The chunk is written to
/// the client's socket in the same loop turn, and that costs about as much as producing it
/// (measured on loopback: ~1.2 µs per KB), so the byte bound caps the turn's second half: with
/// 512 KB a 10M-element LRANGE had turns of 0.7 ms (0.2 ms producing, 0.5 ms sending), with
/// 128 KB they stay near 0.35 ms.
const STEP_ELEMS: usize = 16384;
const STEP_BYTES: usize = 128 << 10;

/// Where a stream's reply goes.
#[derive(Clone, Copy, Debug)]
pub struct Dest {
    pub thread: usize,
    pub conn: ConnRef,
    pub seq: u64,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Hash {
        keys: bool,
        vals: bool,
    },
    Set,
    /// Elements from index `start`.
    List {
        start: usize,
    },
    /// Ranks `lo..hi`, from the top when `rev`.
    ZSet {
        lo: usize,
        hi: usize,
        rev: bool,
        withscores: bool,
    },
    /// XRANGE / XREVRANGE: the entries with ids in `lo..=hi`, from the top when `rev`.
    XRange {
        lo: StreamId,
        hi: StreamId,
        rev: bool,
    },
    /// A reply made of parts ([`Segs`]: XREAD, XREADGROUP, XINFO STREAM FULL).
    Segs,
}

/// One part of a reply made of parts (see [`Segs`]). `key`: an index into the stream's keys.
pub enum Seg {
    /// Bytes written as they are (headers, computed when the stream started).
    Raw(Vec<u8>),
    /// `left` entries of a stream from id `from` on (XREAD, XINFO STREAM FULL's entries).
    Entries {
        key: usize,
        from: StreamId,
        left: usize,
    },
    /// XREADGROUP `>`: the `left` entries after the group's last delivered id, each
    /// delivered to the consumer (its PEL, the group's last id) as it is written.
    GroupNew {
        key: usize,
        group: Box<[u8]>,
        consumer: Box<[u8]>,
        noack: bool,
        now: i64,
        left: usize,
    },
    /// XREADGROUP with an id: `left` of the consumer's pending entries from `from` on, each
    /// counted as delivered again as it is written.
    GroupHistory {
        key: usize,
        group: Box<[u8]>,
        consumer: Box<[u8]>,
        now: i64,
        from: StreamId,
        left: usize,
    },
    /// XINFO STREAM FULL: `left` entries of a group's PEL from `from` on.
    GroupPel {
        key: usize,
        group: Box<[u8]>,
        from: StreamId,
        left: usize,
    },
    /// XINFO STREAM FULL: `left` entries of a consumer's PEL from `from` on.
    ConsumerPel {
        key: usize,
        group: Box<[u8]>,
        consumer: Box<[u8]>,
        from: StreamId,
        left: usize,
    },
}

impl Seg {
    /// Whether producing it writes the value (it must be produced to the end even when its
    /// client went away: the command's effect is whole, as Redis's would be).
    fn writes(&self) -> bool {
        matches!(self, Seg::GroupNew { .. } | Seg::GroupHistory { .. })
    }

    fn left(&self) -> usize {
        match self {
            Seg::Raw(_) => 0,
            Seg::Entries { left, .. }
            | Seg::GroupNew { left, .. }
            | Seg::GroupHistory { left, .. }
            | Seg::GroupPel { left, .. }
            | Seg::ConsumerPel { left, .. } => *left,
        }
    }
}

/// A reply made of parts, planned by its command (cmd/stream/) when it ran: the keys whose
/// values later parts read (locked and pinned while the stream runs) and the parts in order.
#[derive(Default)]
pub struct Segs {
    keys: Vec<Box<[u8]>>,
    segs: VecDeque<Seg>,
    /// Elements (entries, PEL entries) the parts other than raw bytes will write.
    elems: usize,
}

impl Segs {
    /// The index of `key` among the stream's keys (added once).
    pub fn key(&mut self, key: &[u8]) -> usize {
        match self.keys.iter().position(|k| **k == *key) {
            Some(i) => i,
            None => {
                self.keys.push(key.into());
                self.keys.len() - 1
            }
        }
    }

    /// The raw bytes at the end of the parts, to write a header into.
    pub fn raw(&mut self) -> &mut Vec<u8> {
        if !matches!(self.segs.back(), Some(Seg::Raw(_))) {
            self.segs.push_back(Seg::Raw(Vec::new()));
        }
        match self.segs.back_mut() {
            Some(Seg::Raw(b)) => b,
            _ => unreachable!("pushed above"),
        }
    }

    /// Appends a part (one that writes nothing is left out).
    pub fn push(&mut self, seg: Seg) {
        let n = seg.left();
        if n > 0 || matches!(seg, Seg::Raw(_)) {
            self.elems += n;
            self.segs.push_back(seg);
        }
    }

    /// The elements the parts will write.
    pub fn elems(&self) -> usize {
        self.elems
    }
}

struct Stream {
    db: usize,
    /// The keys read: one, or a [`Segs`] reply's (locked and pinned while it runs).
    keys: Vec<Box<[u8]>>,
    kind: Kind,
    /// A [`Kind::Segs`] reply's parts still to write.
    segs: VecDeque<Seg>,
    resp3: bool,
    dest: Dest,
    flow: Arc<Flow>,
    /// Elements in the reply (pairs for HGETALL and WITHSCORES).
    total: usize,
    /// Elements written so far.
    done: usize,
    /// Where a hash or set resumes (its bucket); None once it ended.
    cursor: Option<usize>,
    /// Where a list's next step starts looking for its first element.
    list_seek: ListSeek,
    /// XRANGE: the id bound the next step reads from (its start, or its end when reversed);
    /// None once no id is left on that side.
    id_cursor: Option<StreamId>,
    started: bool,
    /// A transaction's part (XREAD / XREADGROUP over several shards): the task to tell when
    /// it ends (see [`start_tx_segs`]); None for a command's own stream.
    owner: Option<crate::msg::Completion>,
}

/// The streams of one shard and the work waiting for them. See the module documentation.
#[derive(Default)]
pub struct Streams {
    active: VecDeque<Stream>,
    /// Batch items (with the thread they came from) waiting for a stream to end, in order.
    parked: VecDeque<(usize, BatchItem)>,
    /// The connections (thread, connection) with parked items: their later items park too.
    parked_conns: HashSet<(usize, ConnRef)>,
    /// Connections of this thread held because a command of theirs touched a streamed key.
    waiters: Vec<ConnRef>,
    /// Transactions' parts ([`Msg::Schedule`]) waiting for this shard's streams to end.
    pub tx_waiting: VecDeque<Msg>,
    /// A [`Msg::StreamTick`] is queued.
    pub ticking: bool,
    /// The loop turn of the last step (one step per turn).
    pub last_turn: Option<std::time::Instant>,
    /// Keys held for a transaction whose reply streams in parts (`(tx, db, key)`: XREAD /
    /// XREADGROUP over several shards, see [`start_tx_segs`]) until it releases this shard:
    /// work outside transactions that touches one waits here as it does for a stream (its
    /// connection's later work behind it), not in the scheduler's FIFO, which would hold
    /// every later command of the shard for the whole reply.
    holds: Vec<(crate::msg::TxId, usize, Box<[u8]>)>,
    /// Holds were added: work deferred behind their keys' intents meanwhile waits here instead.
    pub held_new: bool,
    /// Commands wait here for a big value a background save is writing (bgsave.rs,
    /// `key_waits`): a hold on that key, tried again when the save says the value is written.
    pub snapshot_parked: bool,
    /// `appendfsync always`: the next chunks wait until this shard's changes up to this
    /// ticket are fsynced (worker/durability.rs), as every other reply does.
    pub durable_wait: Option<u64>,
}

impl Streams {
    /// No stream is running, leaving aside transactions' parts ([`start_tx_segs`]): those
    /// run under their transaction's intents, which the scheduler orders.
    pub fn idle(&self) -> bool {
        self.active.iter().all(|s| s.owner.is_some())
    }

    /// A transaction's part streams here (it may step while intents are granted: its keys
    /// are its transaction's).
    pub fn tx_streams(&self) -> bool {
        self.active.iter().any(|s| s.owner.is_some())
    }

    /// Some stream may take a step now (not all wait for their client).
    pub fn runnable(&self) -> bool {
        self.durable_wait.is_none() && self.active.iter().any(|s| s.flow.runnable())
    }

    fn streamed(&self, db: usize, key: &[u8]) -> bool {
        self.active
            .iter()
            .any(|s| s.owner.is_none() && s.db == db && s.keys.iter().any(|k| **k == *key))
            || self.held(db, key)
    }

    /// Holds `keys` (of database `db`) for transaction `tx` (see `holds`).
    pub fn hold(&mut self, tx: crate::msg::TxId, db: usize, keys: &[bytes::Bytes]) {
        for k in keys {
            self.holds.push((tx, db, k.as_ref().into()));
        }
        self.held_new = true;
    }

    /// Whether a transaction holds `key` here (see `holds`).
    pub fn held(&self, db: usize, key: &[u8]) -> bool {
        self.holds.iter().any(|(_, d, k)| *d == db && **k == *key)
    }

    pub fn has_holds(&self) -> bool {
        !self.holds.is_empty()
    }

    /// Work outside transactions waits here (a transaction's part arriving now waits behind
    /// it, in `tx_waiting`: a connection's command must not be passed by its next one).
    pub fn has_parked(&self) -> bool {
        !self.parked.is_empty()
    }

    /// Drops `tx`'s holds; whether it had some.
    pub fn release_holds(&mut self, tx: crate::msg::TxId) -> bool {
        let n = self.holds.len();
        self.holds.retain(|(t, _, _)| *t != tx);
        self.holds.len() != n
    }

    /// Whether a single-shard command of connection `conn` (of thread `from`) must wait: it
    /// touches a streamed key (`keys`: the positions of its keys among `args`), or an earlier
    /// command of its connection is waiting here.
    pub fn must_wait<A: AsRef<[u8]>>(
        &self,
        from: usize,
        conn: ConnRef,
        db: usize,
        keys: &[usize],
        args: &[A],
    ) -> bool {
        if self.idle() && self.parked.is_empty() && self.holds.is_empty() {
            return false;
        }
        if self.parked_conns.contains(&(from, conn)) {
            return true;
        }
        keys.iter().any(|&i| self.streamed(db, args[i].as_ref()))
    }

    /// Parks a batch item until a stream ends.
    pub fn park(&mut self, from: usize, item: BatchItem) {
        self.parked_conns.insert((from, item.conn));
        self.parked.push_back((from, item));
    }

    /// Notes a connection of this thread that waits for a stream to end.
    pub fn wait(&mut self, conn: ConnRef) {
        if !self.waiters.contains(&conn) {
            self.waiters.push(conn);
        }
    }

    /// Everything that waited for streams, to run again in order (it may wait again).
    pub fn take_waiting(&mut self) -> (VecDeque<(usize, BatchItem)>, Vec<ConnRef>) {
        self.parked_conns.clear();
        (
            std::mem::take(&mut self.parked),
            std::mem::take(&mut self.waiters),
        )
    }
}

/// Whether `cmd` may become a stream (a cheap check by name, before the real one).
pub fn candidate(cmd: &Command) -> bool {
    matches!(
        cmd.spec.full_name,
        "hgetall"
            | "hkeys"
            | "hvals"
            | "smembers"
            | "lrange"
            | "zrange"
            | "zrevrange"
            | "xrange"
            | "xrevrange"
            | "xread"
            | "xreadgroup"
            | "xinfo|stream"
    )
}

/// Starts a stream for a command about to run on its shard, when it is a whole-collection
/// read of a big value (see the module documentation); false: run the handler as usual.
pub fn try_start(ctx: &mut ShardCtx, cmd: &Command, args: &[&[u8]], dest: Dest) -> bool {
    if !ctx.shard.streams.tx_waiting.is_empty() || !ctx.shard.lock.sched.idle() {
        // A transaction waits for this shard (no new stream ahead of it), or holds intents
        // here (streams and granted intents never coexist: shard.rs).
        return false;
    }
    if let Some(planner) = crate::cmd::stream::segs_planner(cmd.spec.full_name) {
        return start_segs(ctx, planner, args, dest);
    }
    let Some(plan) = plan(cmd.spec.full_name, args) else {
        return false;
    };
    let key = args[1];
    let mut db = ctx.db();
    if let Plan::Hash { .. } = plan {
        // The handler's first step: fields past their TTL go (a set's lookup does the same
        // for its members). What is left is the snapshot, pinned below.
        crate::cmd::hash::expire_all_fields(&mut db, key);
    }
    let Some(e) = db.peek(key) else {
        return false;
    };
    let (kind, total) = match (plan, e.value()) {
        (Plan::Hash { keys, vals }, ValueRef::Hash(h)) => {
            if !matches!(h, darner_engine::types::HashRef::Table(_)) {
                return false;
            }
            (Kind::Hash { keys, vals }, h.len())
        }
        (Plan::Set, ValueRef::Set(s)) => (Kind::Set, s.len()),
        (Plan::List { start, end }, ValueRef::List(l)) => match clamp(start, end, l.len()) {
            Some((s, e)) => (Kind::List { start: s }, e - s + 1),
            None => return false,
        },
        (
            Plan::ZSet {
                start,
                end,
                rev,
                withscores,
            },
            ValueRef::ZSet(z),
        ) => {
            if z.encoding() != "skiplist" {
                return false;
            }
            let n = z.len();
            match clamp(start, end, n) {
                // Rank ranges count from the top when reversed.
                Some((s, e)) => {
                    let (lo, hi) = if rev { (n - 1 - e, n - s) } else { (s, e + 1) };
                    (
                        Kind::ZSet {
                            lo,
                            hi,
                            rev,
                            withscores,
                        },
                        hi - lo,
                    )
                }
                None => return false,
            }
        }
        (
            Plan::XRange {
                start,
                end,
                count,
                rev,
            },
            ValueRef::Stream(st),
        ) => {
            // COUNT 0 (a null reply) and small streams: the handler's.
            if count == 0 || st.len() <= STREAM_MIN_ENTRIES as u64 {
                return false;
            }
            let limit = u64::try_from(count).unwrap_or(u64::MAX);
            let n = st.count_range(start, end, limit);
            if n <= STREAM_MIN_ENTRIES as u64 {
                return false;
            }
            (
                Kind::XRange {
                    lo: start,
                    hi: end,
                    rev,
                },
                n as usize,
            )
        }
        _ => return false,
    };
    if total <= STREAM_MIN && !matches!(kind, Kind::XRange { .. }) {
        return false;
    }
    // The read counts as one (hit, access clock), as the handler's would.
    db.get(key);
    // Expiry must not change the value while it is read (see the module documentation).
    db.db().pin(key);
    ctx.shard.streams.active.push_back(Stream {
        db: ctx.db,
        keys: vec![key.into()],
        kind,
        segs: VecDeque::new(),
        resp3: ctx.resp3,
        dest,
        flow: new_flow(ctx.shard.id),
        total,
        done: 0,
        cursor: Some(0),
        list_seek: ListSeek::default(),
        id_cursor: match kind {
            Kind::XRange { lo, hi, rev, .. } => Some(if rev { hi } else { lo }),
            _ => None,
        },
        started: false,
        owner: None,
    });
    true
}

fn new_flow(producer: usize) -> Arc<Flow> {
    Arc::new(Flow {
        cancel: AtomicBool::new(false),
        ready: AtomicBool::new(true),
        producer,
        waiting_since: Default::default(),
        unthrottled: AtomicBool::new(false),
    })
}

/// What a command of a reply made of parts provides (cmd/stream/): `plan` looks (changing
/// nothing, counting no access) and returns the reply's parts, None when the handler must
/// answer (errors, BLOCK, ...); `begin` then applies what the command does before its reply
/// (XREADGROUP: the consumer created, its seen time) and counts its accesses.
pub struct SegsPlanner {
    pub plan: fn(&mut ShardCtx, &[&[u8]]) -> Option<Segs>,
    pub begin: fn(&mut ShardCtx, &[&[u8]]),
}

/// Starts a stream of a reply made of parts when it has more than [`STREAM_MIN_ENTRIES`]
/// elements.
fn start_segs(ctx: &mut ShardCtx, planner: SegsPlanner, args: &[&[u8]], dest: Dest) -> bool {
    let Some(segs) = (planner.plan)(ctx, args) else {
        return false;
    };
    if segs.elems <= STREAM_MIN_ENTRIES {
        return false;
    }
    (planner.begin)(ctx, args);
    let db = ctx.shard.dbs.get_mut(ctx.db).expect("selected db");
    for k in &segs.keys {
        db.pin(k);
    }
    ctx.shard.streams.active.push_back(Stream {
        db: ctx.db,
        keys: segs.keys,
        kind: Kind::Segs,
        segs: segs.segs,
        resp3: ctx.resp3,
        dest,
        flow: new_flow(ctx.shard.id),
        total: 1,
        done: 0,
        cursor: None,
        list_seek: ListSeek::default(),
        id_cursor: None,
        started: false,
        owner: None,
    });
    true
}

/// Starts the stream of one part of a transaction's reply (XREAD / XREADGROUP whose keys are
/// on several shards: cmd/stream/read.rs), on a shard the transaction holds: `segs` is written
/// to `dest`'s reply (which the transaction completes itself: no chunk is its last), then
/// `done` gets whether the client went away. Its keys are guarded by the transaction's intents
/// (nothing else touches them, and no stream of this shard's own starts while they are held),
/// and pinned by whoever planned the part (the stream unpins them when it ends). `cancel`:
/// the client went away already (a part that writes is produced all the same, unsent).
pub fn start_tx_segs(
    ctx: &mut ShardCtx,
    segs: Segs,
    dest: Dest,
    done: crate::msg::Completion,
    cancel: bool,
) {
    let flow = new_flow(ctx.shard.id);
    flow.cancel.store(cancel, Ordering::Release);
    ctx.shard.streams.active.push_back(Stream {
        db: ctx.db,
        keys: segs.keys,
        kind: Kind::Segs,
        segs: segs.segs,
        resp3: ctx.resp3,
        dest,
        flow,
        total: 1,
        done: 0,
        cursor: None,
        list_seek: ListSeek::default(),
        id_cursor: None,
        started: false,
        owner: Some(done),
    });
}

#[derive(Clone, Copy)]
enum Plan {
    Hash {
        keys: bool,
        vals: bool,
    },
    Set,
    List {
        start: i64,
        end: i64,
    },
    ZSet {
        start: i64,
        end: i64,
        rev: bool,
        withscores: bool,
    },
    /// `count`: negative when not given.
    XRange {
        start: StreamId,
        end: StreamId,
        count: i64,
        rev: bool,
    },
}

/// The streamable shape of a command, from its arguments alone; None for anything else
/// (other options, malformed numbers: the handler replies, errors included).
fn plan(name: &str, args: &[&[u8]]) -> Option<Plan> {
    let int = |a: &[u8]| crate::cmd::parse_int(a);
    let kw = |a: &[u8], k: &str| a.eq_ignore_ascii_case(k.as_bytes());
    match name {
        "hgetall" => Some(Plan::Hash {
            keys: true,
            vals: true,
        }),
        "hkeys" => Some(Plan::Hash {
            keys: true,
            vals: false,
        }),
        "hvals" => Some(Plan::Hash {
            keys: false,
            vals: true,
        }),
        "smembers" => Some(Plan::Set),
        "lrange" => Some(Plan::List {
            start: int(args[2])?,
            end: int(args[3])?,
        }),
        "zrange" | "zrevrange" => {
            let (start, end) = (int(args[2])?, int(args[3])?);
            let mut rev = name == "zrevrange";
            let mut withscores = false;
            for a in &args[4..] {
                if kw(a, "withscores") {
                    withscores = true;
                } else if !rev && kw(a, "rev") {
                    rev = true;
                } else {
                    return None; // BYSCORE, BYLEX, LIMIT, a second REV: the handler's
                }
            }
            Some(Plan::ZSet {
                start,
                end,
                rev,
                withscores,
            })
        }
        "xrange" | "xrevrange" => {
            let rev = name == "xrevrange";
            let r = crate::cmd::stream::range_args(args, rev).ok()?;
            Some(Plan::XRange {
                start: r.start,
                end: r.end,
                count: r.count,
                rev,
            })
        }
        _ => None,
    }
}

/// Redis's index clamping for LRANGE and ZRANGE by rank (the list commands' rule).
use crate::cmd::list::clamp_range as clamp;

/// Runs one step of the next stream that may take one (round robin) and posts its chunk.
/// Returns true when a stream of the shard's own ended (waiting work may now run); a
/// transaction's part tells its transaction instead.
pub fn step(shard: &mut Shard, shared: &crate::shared::Shared, now_ms: i64) -> bool {
    let streams = &mut shard.streams;
    let Some(i) = streams.active.iter().position(|s| s.flow.runnable()) else {
        return false;
    };
    streams.active.rotate_left(i);
    let mut s = streams.active.pop_front().expect("found above");
    // Its client went away: nothing more to send, but a reply that writes as it reads
    // (XREADGROUP) is produced to its end, its bytes dropped.
    let cancelled = s.flow.cancel.load(Ordering::Acquire);
    if cancelled && !s.segs.iter().any(Seg::writes) {
        return end(shard, shared, &s, true);
    }
    s.flow.ready.store(false, Ordering::Release);
    let first = !s.started;
    // Room for a whole step (plus the element that crosses the bound), so no step copies its
    // chunk while growing it.
    let mut out = Vec::with_capacity(STEP_BYTES + (16 << 10));
    let finished = produce(&mut s, shard, now_ms, &mut out);
    if cancelled {
        out.clear();
    } else {
        crate::exec::post(
            shared,
            s.dest.thread,
            Msg::StreamChunk {
                conn: s.dest.conn,
                seq: s.dest.seq,
                bytes: out,
                // A transaction's part is not its reply's end (the transaction's is).
                last: finished && s.owner.is_none(),
                end: finished,
                flow: (first && !finished).then(|| s.flow.clone()),
            },
        );
    }
    if finished {
        end(shard, shared, &s, cancelled)
    } else {
        shard.streams.active.push_back(s);
        false
    }
}

/// A stream ended (its last chunk posted): its keys are released; a transaction's part tells
/// its transaction (after its last chunk, on the same way: the transaction's next part or
/// reply follows it), with whether the client went away.
fn end(shard: &mut Shard, shared: &crate::shared::Shared, s: &Stream, cancelled: bool) -> bool {
    unpin(shard, s);
    match s.owner {
        Some(done) => {
            crate::exec::complete(shared, done, cancelled);
            false
        }
        None => true,
    }
}

fn unpin(shard: &mut Shard, s: &Stream) {
    for k in &s.keys {
        shard.dbs[s.db].unpin(k);
    }
}

/// Writes the stream's next chunk into `out`; true when the reply is complete.
fn produce(s: &mut Stream, shard: &mut Shard, now_ms: i64, out: &mut Vec<u8>) -> bool {
    if matches!(s.kind, Kind::Segs) {
        return produce_segs(s, shard, now_ms, out);
    }
    let mut w = ReplyWriter::new(out, s.resp3);
    if !s.started {
        s.started = true;
        match s.kind {
            Kind::Hash {
                keys: true,
                vals: true,
            } => w.map(s.total),
            Kind::Segs => unreachable!("produce_segs"),
            Kind::Hash { .. } | Kind::List { .. } | Kind::XRange { .. } => w.array(s.total),
            Kind::Set => w.set(s.total),
            Kind::ZSet { withscores, .. } => {
                if withscores && !s.resp3 {
                    w.array(s.total * 2)
                } else {
                    w.array(s.total)
                }
            }
        }
    }
    let mut view = shard.dbs[s.db].view(Clock::at(now_ms));
    let value = view.peek(&s.keys[0]).map(|e| e.value());
    let owed = s.total - s.done;
    let mut n = 0;
    let started = std::time::Instant::now();
    let mut check_at = CHECK_EVERY;
    // Whether the step has done its share (checked between elements or buckets).
    let mut enough = |n: usize, bytes: usize| {
        if n >= STEP_ELEMS || bytes >= STEP_BYTES {
            return true;
        }
        if n >= check_at {
            check_at = n + CHECK_EVERY;
            return started.elapsed() >= STEP_TIME;
        }
        false
    };
    match (s.kind, value) {
        (Kind::Hash { keys, vals }, Some(ValueRef::Hash(h))) => {
            while let Some(at) = s.cursor {
                s.cursor = h.for_each_from(at, 1, |k, v| {
                    if n < owed {
                        if keys {
                            w.bulk(k);
                        }
                        if vals {
                            w.bulk(v);
                        }
                        n += 1;
                    }
                });
                if enough(n, w.out.len()) {
                    break;
                }
            }
        }
        (Kind::Set, Some(ValueRef::Set(set))) => {
            while let Some(at) = s.cursor {
                s.cursor = set.for_each_from(at, 1, |m| {
                    if n < owed {
                        w.bulk(m);
                        n += 1;
                    }
                });
                if enough(n, w.out.len()) {
                    break;
                }
            }
        }
        (Kind::List { start }, Some(ValueRef::List(l))) => {
            for v in l
                .iter_from_near(start + s.done, &mut s.list_seek)
                .take(owed)
            {
                w.bulk(&v);
                n += 1;
                if enough(n, w.out.len()) {
                    break;
                }
            }
        }
        (
            Kind::ZSet {
                lo,
                hi,
                rev,
                withscores,
            },
            Some(ValueRef::ZSet(z)),
        ) => {
            // Sub-ranges of CHECK_EVERY elements (each a rank lookup, O(log n)).
            let resp3 = s.resp3;
            while n < owed {
                let k = (owed - n).min(CHECK_EVERY);
                let done = s.done + n;
                let (a, b) = if rev {
                    (hi - done - k, hi - done)
                } else {
                    (lo + done, lo + done + k)
                };
                z.range(a, b, rev, |m, score| {
                    if withscores && resp3 {
                        w.array(2);
                    }
                    w.bulk(m);
                    if withscores {
                        w.double(score);
                    }
                });
                n += k;
                if enough(n, w.out.len()) {
                    break;
                }
            }
        }
        (Kind::XRange { lo, hi, rev, .. }, Some(ValueRef::Stream(st))) => {
            if let Some(at) = s.id_cursor {
                let (a, b) = if rev { (lo, at) } else { (at, hi) };
                // An entry is its id and its fields and values, as elements.
                let mut elems = 0;
                let mut last = None;
                for e in st.range(a, b, rev).take(owed) {
                    crate::cmd::stream::write_entry(&mut w, &e);
                    n += 1;
                    elems += 1 + 2 * e.pairs.len();
                    last = Some(e.id);
                    if enough(elems, w.out.len()) {
                        break;
                    }
                }
                if let Some(id) = last {
                    s.id_cursor = if rev { id.prev() } else { id.next() };
                }
            }
        }
        _ => {}
    }
    s.done += n;
    let ended = s.done >= s.total;
    if n == 0 && s.done < s.total {
        // Unreachable while nothing can change a streamed key; keep the reply well formed.
        crate::log::warning("BUG: a streamed value changed under its stream; reply padded");
        pad(&mut w, s.kind, s.resp3, s.total - s.done);
        s.done = s.total;
        return true;
    }
    ended
}

/// Writes the next chunk of a reply made of parts ([`Kind::Segs`]) into `out`; true when the
/// reply is complete. Each part resumes where the last step left it: entries from the id after
/// the last one written, a PEL from the id after the last one, XREADGROUP `>` from the group's
/// last delivered id (which the step advanced).
fn produce_segs(s: &mut Stream, shard: &mut Shard, now_ms: i64, out: &mut Vec<u8>) -> bool {
    use crate::cmd::stream::group::{with_group, write_consumer_nack, write_group_nack};
    use crate::cmd::stream::{write_entry, write_id};
    use darner_engine::Value;
    s.started = true;
    let mut w = ReplyWriter::new(out, s.resp3);
    let mut view = shard.dbs[s.db].view(Clock::at(now_ms));
    let started = std::time::Instant::now();
    let mut check_at = CHECK_EVERY;
    // Elements written this step (an entry counts its id, fields and values, as XRANGE's).
    let mut elems = 0;
    let mut enough = |n: usize, bytes: usize| {
        if n >= STEP_ELEMS || bytes >= STEP_BYTES {
            return true;
        }
        if n >= check_at {
            check_at = n + CHECK_EVERY;
            return started.elapsed() >= STEP_TIME;
        }
        false
    };
    while let Some(seg) = s.segs.front_mut() {
        // The part's elements written by this step.
        let mut n = 0;
        match seg {
            Seg::Raw(b) => w.raw(b),
            Seg::Entries { key, from, left } => {
                if let Some(ValueRef::Stream(st)) = view.peek(&s.keys[*key]).map(|e| e.value()) {
                    for e in st.range(*from, StreamId::MAX, false).take(*left) {
                        write_entry(&mut w, &e);
                        n += 1;
                        elems += 1 + 2 * e.pairs.len();
                        *from = e.id.next().unwrap_or(StreamId::MAX);
                        if enough(elems, w.out.len()) {
                            break;
                        }
                    }
                }
            }
            Seg::GroupNew {
                key,
                group,
                consumer,
                noack,
                now,
                left,
            } => {
                let logging = crate::propagate::enabled();
                let mut aof: Vec<Vec<bytes::Bytes>> = Vec::new();
                if let Some(Value::Stream(st)) =
                    view.peek_mut(&s.keys[*key]).and_then(|e| e.heap_mut())
                {
                    let k = &s.keys[*key];
                    with_group(st, group, |st, g| {
                        let Some(start) = g.last_id.next() else {
                            return;
                        };
                        let before = g.last_id;
                        // What this step delivered goes to the AOF as XREADGROUP's does
                        // (cmd/stream/read.rs, `serve_group`): an XCLAIM per entry, then the
                        // group's new last id.
                        for e in st.range(start, StreamId::MAX, false).take(*left) {
                            st.advance_group(g, e.id);
                            write_entry(&mut w, &e);
                            if !*noack {
                                g.deliver(e.id, consumer, *now);
                                if let Some(c) = g.consumers.get_mut(&**consumer) {
                                    c.active_time = *now;
                                }
                                if logging {
                                    aof.push(crate::cmd::stream::group::xclaim_argv(
                                        k,
                                        group,
                                        e.id,
                                        &g.pel[&e.id],
                                        g.last_id,
                                    ));
                                }
                            }
                            n += 1;
                            elems += 1 + 2 * e.pairs.len();
                            if enough(elems, w.out.len()) {
                                break;
                            }
                        }
                        if logging && g.last_id != before {
                            aof.push(crate::cmd::stream::group::setid_argv(k, group, g));
                        }
                    });
                }
                for argv in aof {
                    crate::propagate::write(s.db, argv);
                }
            }
            Seg::GroupHistory {
                key,
                group,
                consumer,
                now,
                from,
                left,
            } => {
                if let Some(Value::Stream(st)) =
                    view.peek_mut(&s.keys[*key]).and_then(|e| e.heap_mut())
                {
                    with_group(st, group, |st, g| {
                        while n < *left {
                            let Some(c) = g.consumers.get(&**consumer) else {
                                break;
                            };
                            let Some(&id) = c.pel.range(*from..).next() else {
                                break;
                            };
                            match st.range(id, id, false).next() {
                                Some(e) => {
                                    write_entry(&mut w, &e);
                                    elems += 1 + 2 * e.pairs.len();
                                    if let Some(nack) = g.pel.get_mut(&id) {
                                        nack.delivery_time = *now;
                                        nack.delivery_count += 1;
                                    }
                                }
                                None => {
                                    // Deleted since it was delivered: its id and a null.
                                    w.array(2);
                                    write_id(&mut w, id);
                                    w.null_array();
                                    elems += 2;
                                }
                            }
                            n += 1;
                            *from = id.next().unwrap_or(StreamId::MAX);
                            if enough(elems, w.out.len()) {
                                break;
                            }
                        }
                    });
                }
            }
            Seg::GroupPel {
                key,
                group,
                from,
                left,
            } => {
                if let Some(ValueRef::Stream(st)) = view.peek(&s.keys[*key]).map(|e| e.value()) {
                    if let Some(g) = st.group(group) {
                        for (id, nack) in g.pel.range(*from..).take(*left) {
                            write_group_nack(&mut w, *id, nack);
                            n += 1;
                            elems += 4;
                            *from = id.next().unwrap_or(StreamId::MAX);
                            if enough(elems, w.out.len()) {
                                break;
                            }
                        }
                    }
                }
            }
            Seg::ConsumerPel {
                key,
                group,
                consumer,
                from,
                left,
            } => {
                if let Some(ValueRef::Stream(st)) = view.peek(&s.keys[*key]).map(|e| e.value()) {
                    let g = st.group(group);
                    if let Some((g, c)) = g.and_then(|g| Some((g, g.consumers.get(&**consumer)?))) {
                        for id in c.pel.range(*from..).take(*left) {
                            if let Some(nack) = g.pel.get(id) {
                                write_consumer_nack(&mut w, *id, nack);
                            }
                            n += 1;
                            elems += 3;
                            *from = id.next().unwrap_or(StreamId::MAX);
                            if enough(elems, w.out.len()) {
                                break;
                            }
                        }
                    }
                }
            }
        }
        let left = match seg {
            Seg::Raw(_) => 0,
            Seg::Entries { left, .. }
            | Seg::GroupNew { left, .. }
            | Seg::GroupHistory { left, .. }
            | Seg::GroupPel { left, .. }
            | Seg::ConsumerPel { left, .. } => {
                *left -= n;
                *left
            }
        };
        if left > 0 && n == 0 {
            // Unreachable while nothing can change a streamed key; keep the reply well formed.
            crate::log::warning("BUG: a streamed value changed under its stream; reply padded");
            for _ in 0..left {
                w.null();
            }
        } else if left > 0 {
            return false; // the step did its share
        }
        s.segs.pop_front();
        if enough(elems, w.out.len()) {
            break;
        }
    }
    s.segs.is_empty()
}

/// Writes `n` null elements of the stream's shape (see `produce`).
fn pad(w: &mut ReplyWriter, kind: Kind, resp3: bool, n: usize) {
    for _ in 0..n {
        match kind {
            Kind::Hash {
                keys: true,
                vals: true,
            } => {
                w.null();
                w.null();
            }
            Kind::ZSet {
                withscores: true, ..
            } => {
                if resp3 {
                    w.array(2);
                }
                w.null();
                w.null();
            }
            _ => w.null(),
        }
    }
}

/// The streams a thread receives for its connections (see the module documentation).
#[derive(Default)]
pub struct Inbound {
    open: Vec<(ConnRef, u64, Arc<Flow>)>,
}

/// What the receiving thread decided for one open stream (see [`Inbound::take`]).
pub enum Verdict {
    /// Wait (the chunk has not left yet).
    Wait,
    /// Send the next chunk.
    Credit,
    /// The client went away: end the stream.
    Cancel,
}

impl Inbound {
    /// Notes a stream that started sending to `conn`.
    pub fn open(&mut self, conn: ConnRef, seq: u64, flow: Arc<Flow>) {
        self.open.push((conn, seq, flow));
    }

    /// Forgets a stream that ended.
    pub fn close(&mut self, conn: ConnRef, seq: u64) {
        self.open.retain(|(c, s, _)| !(*c == conn && *s == seq));
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// The open streams that wait for a credit (or may be cancelled), to decide on.
    pub fn waiting(&self) -> Vec<(ConnRef, u64, Arc<Flow>)> {
        self.open
            .iter()
            .filter(|(_, _, f)| !f.ready.load(Ordering::Acquire))
            .cloned()
            .collect()
    }

    /// Applies a decision: a credit or a cancel wakes the producing shard's thread. A stream
    /// made to wait [`SLOW_CLIENT_MS`] gets its credit anyway (see flow control above).
    pub fn decide(
        &mut self,
        shared: &crate::shared::Shared,
        conn: ConnRef,
        seq: u64,
        flow: &Flow,
        mut v: Verdict,
        now_ms: i64,
    ) {
        if matches!(v, Verdict::Wait) {
            let since = flow.waiting_since.load(Ordering::Relaxed);
            if flow.unthrottled.load(Ordering::Relaxed) {
                v = Verdict::Credit;
            } else if since == 0 {
                flow.waiting_since.store(now_ms.max(1), Ordering::Relaxed);
            } else if now_ms - since >= SLOW_CLIENT_MS {
                flow.unthrottled.store(true, Ordering::Relaxed);
                v = Verdict::Credit;
            }
        }
        match v {
            Verdict::Wait => return,
            Verdict::Credit => {
                flow.waiting_since.store(0, Ordering::Relaxed);
                flow.ready.store(true, Ordering::Release)
            }
            Verdict::Cancel => {
                flow.cancel.store(true, Ordering::Release);
                self.close(conn, seq);
            }
        }
        crate::exec::post(shared, flow.producer, Msg::StreamTick);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamp_follows_redis() {
        assert_eq!(clamp(0, -1, 10), Some((0, 9)));
        assert_eq!(clamp(-3, -1, 10), Some((7, 9)));
        assert_eq!(clamp(5, 100, 10), Some((5, 9)));
        assert_eq!(clamp(-100, 2, 10), Some((0, 2)));
        assert_eq!(clamp(3, 2, 10), None);
        assert_eq!(clamp(10, 20, 10), None);
        assert_eq!(clamp(i64::MIN, i64::MAX, 10), Some((0, 9)));
    }

    #[test]
    fn plan_takes_only_plain_rank_ranges() {
        let a = |v: &[&'static str]| v.iter().map(|s| s.as_bytes()).collect::<Vec<&[u8]>>();
        assert!(plan("zrange", &a(&["zrange", "k", "0", "-1"])).is_some());
        assert!(plan(
            "zrange",
            &a(&["zrange", "k", "0", "-1", "REV", "withscores"])
        )
        .is_some());
        assert!(plan("zrange", &a(&["zrange", "k", "0", "-1", "rev", "rev"])).is_none());
        assert!(plan("zrange", &a(&["zrange", "k", "0", "-1", "byscore"])).is_none());
        assert!(plan("zrevrange", &a(&["zrevrange", "k", "0", "-1", "rev"])).is_none());
        assert!(plan("lrange", &a(&["lrange", "k", "x", "-1"])).is_none());
        assert!(plan("get", &a(&["get", "k"])).is_none());
        assert!(plan("xrange", &a(&["xrange", "k", "-", "+", "count"])).is_none());
    }
}
