//! The shared client cache (`proxy-cache yes`): replies to a few read-only single-key commands,
//! one cache for all of the proxy's threads ([`Store`]: shards by key, each behind a lock),
//! reached through each thread's [`Cache`] handle (its fills waiting for their PTTL, its
//! counters), bounded in bytes and evicted with CLOCK per shard (a second chance for entries
//! read since the hand last passed).
//!
//! # Why shared, when the proxy's threads share nothing else
//!
//! The first cache was per thread, lock-free on the request path. Under the workload it is for
//! (a few hot keys, some writes) that cost more than the locks it saved: every write of a hot
//! key emptied it from every thread's cache, and each thread paid a node round trip (and a
//! PTTL) to fill it again, so a 90/10 Zipf mix over six threads hit 55% of the time. Shared,
//! a key is filled once for all threads. A lookup holds its shard's lock for a hash probe and
//! a copy of the reply; with 64 shards the threads rarely meet on one.
//!
//! # Coherence
//!
//! A fill travels on the thread's RESP3 shared connection to the key's primary, which has
//! `CLIENT TRACKING on` (default mode): the node remembers that this connection read the key
//! and pushes `>invalidate [key]` on it once the key changes (a write by anyone, an expiry, an
//! eviction), or `>invalidate _` when the node is flushed. So every entry was read on a
//! connection that will hear about the next change of its key. Four gaps remain, and each has
//! its rule here:
//!
//! * **Invalidation before the reply.** A read in flight may have read the old value while
//!   the invalidation of its key is already here (a write between the read and its reply
//!   being seen, a lazily expired key whose invalidation Redis writes before the reply). Each
//!   fill takes a ticket when it is sent; an invalidation raises its key's `valid_from` to the
//!   next ticket, so any fill of that key sent before it is dropped when its reply comes.
//! * **Writes through the proxy.** They invalidate their keys here when they are sent (a
//!   pipelined `SET k; GET k` must not answer the GET from the cache) and again when their reply
//!   comes (a fill sent after the write on another connection may have run before it on the
//!   node): once a client has its write's reply, no entry older than the write is left and no
//!   fill that could have read before it will be stored, whatever the node's invalidation is
//!   doing. Until then the writer itself gets no hit (the server's `Client::writes`): an entry
//!   filled meanwhile may predate its write. Commands whose keys are not known (EXEC,
//!   FLUSHALL, a script without keys) flush the cache.
//! * **Expiry.** The node invalidates a key past its TTL only once it deletes it (on access,
//!   or when its active expiry cycle gets to it). Each fill is followed by `PTTL key` on the
//!   same connection, and its entry is a miss from its deadline on ([`Cache::finish_ttl`]).
//! * **The connection or the topology changing.** The node's tracking table belongs to the
//!   connection: when it goes, the node's entries go, whichever thread filled them
//!   ([`Cache::flush_node`]). An entry is served only while its node still owns the key's slot
//!   (in the serving thread's map).
//!
//! **Joined misses.** When a cacheable read misses while a fill of the same request (same
//! key, same [`signature`]) is in flight to the node that owns the key's slot now, sent by any
//! thread, the read waits for that fill instead of reading the key itself ([`Cache::join`]):
//! after a write of a hot key, its readers' concurrent misses cost the node one read, not
//! one each. It is answered with the fill's reply only where a hit on the entry that fill
//! stores would be right, which takes three things. The reader may hit at all: no write of
//! its own in flight (`Client::writes`), not a tracking client (its read must be recorded
//! on its own thread's connection), not inside a transaction or behind requests of its own
//! still waiting to be sent. The fill is valid when the reader joins it: its ticket is not
//! below its key's `valid_from` (no invalidation, no write planned or answered through the
//! proxy since it was sent, which may have run on the node after the fill's read), and the
//! reader came after it was sent, so the fill is no older than a hit would be. And the fill
//! is still valid when its PTTL's reply comes, with its deadline not passed: exactly the
//! test that keeps its entry ([`Cache::finish_fill`]). Otherwise (invalidated, flushed, its
//! connection lost, an error or a redirect, the key expired) its joiners are sent to the
//! node as ordinary misses. Either way the outcome is posted to the joiner's thread
//! ([`Cache::take_joined`]; a thread whose client joined a fill of another thread is woken),
//! which answers the client in its protocol ([`for_protocol`]) in its pipeline's place, or
//! sends the read ahead of the client's later requests, which wait behind a joined read
//! (`must_wait`) so that none overtakes it, a write of the same key included.
//!
//! Sharing keeps each rule: an entry filled on any thread's connection is invalidated when that
//! connection hears of its key's change, which is as soon as any thread could; the tickets are
//! one sequence for all threads, so a write answered on one thread drops a fill in flight on
//! another. One thing does not carry over: a proxy client's own CLIENT TRACKING hears of a key
//! through its thread's connection, so a hit records a tracking client's read only on an entry
//! its own thread's connection read (`Entry::trackers`); elsewhere the read goes to the node.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use darner_commands::{flags, key_positions, lookup, lookup_subcommand};

use crate::route::{Plan, Target};
use crate::slots::SlotMap;

/// Per entry, counted on top of its bytes (the map's slot, the ring's, the allocations'
/// headers), so that many tiny entries cannot go far past the bound.
const ENTRY_OVERHEAD: usize = 96;

/// The commands whose replies are cached. Each is read-only, reads one key, and its reply
/// depends on nothing but that key's value and the arguments (no clock, no randomness, no
/// other key), so a reply stays right until the key changes, which the node's tracking
/// reports. Their replies are also encoded alike in RESP2 and RESP3 but for the null (`_` /
/// `$-1`), which [`for_protocol`] converts: one entry serves clients of both protocols.
/// HGETALL, SMEMBERS, ZSCORE and the like are left out because their RESP3 replies (map, set,
/// double) would need converting; GETEX, GETDEL and OBJECT have side effects or report on the
/// node rather than the value.
pub const CACHEABLE: &[(&str, usize)] = &[
    ("get", 2),
    ("strlen", 2),
    ("getrange", 4),
    ("exists", 2),
    ("type", 2),
    ("hget", 3),
    ("hexists", 3),
    ("hlen", 2),
    ("hstrlen", 3),
    ("llen", 2),
    ("scard", 2),
    ("sismember", 3),
    ("zcard", 2),
];

/// Whether `args` is a request whose reply may be cached (its key is `args[1]`).
pub fn cacheable(args: &[&[u8]]) -> bool {
    let Some(name) = args.first() else {
        return false;
    };
    CACHEABLE
        .iter()
        .any(|&(n, argc)| argc == args.len() && n.as_bytes().eq_ignore_ascii_case(name))
}

/// The identity of a cacheable request within its key's entry: the lower-cased name and the
/// arguments after the key (`GET k` and `get k` share an entry).
pub fn signature(args: &[&[u8]]) -> Vec<u8> {
    let mut parts: Vec<Vec<u8>> = Vec::with_capacity(args.len());
    parts.push(
        args.first()
            .map_or_else(Vec::new, |n| n.to_ascii_lowercase()),
    );
    parts.extend(args.iter().skip(2).map(|a| a.to_vec()));
    crate::route::encode_request(&parts)
}

/// What a request may change in the keyspace, as far as the cache is concerned.
#[derive(Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing (a read, a connection command).
    None,
    /// These keys.
    Keys(Vec<Vec<u8>>),
    /// Keys it does not name (EXEC, FLUSHALL, a script without keys, an unknown command).
    All,
}

/// What `args` may change. Writes are the table's `write` commands and those that may
/// replicate (scripts, functions); EXEC applies writes queued earlier, whose keys are not
/// kept, so it counts as changing anything.
pub fn effect(args: &[&[u8]]) -> Effect {
    let Some(name) = args.first() else {
        return Effect::None;
    };
    if name.eq_ignore_ascii_case(b"exec") {
        return Effect::All;
    }
    let Some(mut spec) = lookup(name) else {
        return Effect::All;
    };
    if spec.is_container() {
        match args.get(1).and_then(|sub| lookup_subcommand(spec, sub)) {
            Some(s) => spec = s,
            None => return Effect::None,
        }
    }
    let writes = spec.has(flags::WRITE) || spec.has(flags::MAY_REPLICATE);
    // PUBLISH may replicate (to the node's replicas) but touches no key.
    if !writes || spec.has(flags::PUBSUB) {
        return Effect::None;
    }
    let keys: Vec<Vec<u8>> = key_positions(spec, args)
        .iter()
        .filter_map(|&i| args.get(i).map(|k| k.to_vec()))
        .collect();
    if keys.is_empty() {
        Effect::All
    } else {
        Effect::Keys(keys)
    }
}

/// A cached reply (RESP3-encoded, as the tracking connection read it) in the client's
/// protocol: only the null differs for [`CACHEABLE`]'s replies.
pub fn for_protocol(reply: &[u8], resp3: bool) -> Vec<u8> {
    if !resp3 && reply == b"_\r\n" {
        return b"$-1\r\n".to_vec();
    }
    reply.to_vec()
}

/// Whether a reply may be kept: a value, not an error (WRONGTYPE may stop being one) nor
/// anything this cache does not know how to convert.
fn storable(reply: &[u8]) -> bool {
    matches!(reply.first(), Some(b'$' | b':' | b'+' | b'_'))
}

/// Whether `reply` is what [`CACHEABLE`]'s commands answer for a key that does not exist
/// (null, 0, `none`, the empty string).
fn absent(reply: &[u8]) -> bool {
    matches!(reply, b"_\r\n" | b":0\r\n" | b"+none\r\n" | b"$0\r\n\r\n")
}

/// The arguments of a request the proxy encoded itself (`*n` of `$len` bulks); `None` for
/// anything else.
pub fn request_args(payload: &[u8]) -> Option<Vec<&[u8]>> {
    fn line(buf: &[u8], at: usize) -> Option<(usize, usize)> {
        let end = at + buf.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
        let n = std::str::from_utf8(&buf[at + 1..end]).ok()?.parse().ok()?;
        Some((n, end + 2))
    }
    if payload.first() != Some(&b'*') {
        return None;
    }
    let (n, mut at) = line(payload, 0)?;
    let mut out = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        if payload.get(at) != Some(&b'$') {
            return None;
        }
        let (len, start) = line(payload, at)?;
        out.push(payload.get(start..start.checked_add(len)?)?);
        at = start + len + 2;
    }
    Some(out)
}

/// What a push frame on a tracking connection says.
#[derive(Debug, PartialEq, Eq)]
pub enum Push {
    /// `>invalidate [keys]`: these keys changed.
    Keys(Vec<Vec<u8>>),
    /// `>invalidate _`: the node was flushed, everything it told this connection about is gone.
    All,
    /// Not an invalidation.
    Other,
}

/// Reads a push frame.
pub fn invalidation(frame: &darner_resp::Frame) -> Push {
    use darner_resp::Frame;
    let Frame::Push(items) = frame else {
        return Push::Other;
    };
    match items.as_slice() {
        [Frame::Bulk(kind) | Frame::Simple(kind), keys]
            if kind.eq_ignore_ascii_case(b"invalidate") =>
        {
            match keys {
                Frame::Array(keys) | Frame::Set(keys) => Push::Keys(
                    keys.iter()
                        .filter_map(|k| match k {
                            Frame::Bulk(b) | Frame::Simple(b) => Some(b.to_vec()),
                            _ => None,
                        })
                        .collect(),
                ),
                _ => Push::All,
            }
        }
        _ => Push::Other,
    }
}

/// Whether two topologies give every slot the same owner (a refresh from another node lists the
/// nodes in another order: that is no change, and must not flush the cache every time).
pub fn same_owners(a: &crate::slots::SlotMap, b: &crate::slots::SlotMap) -> bool {
    (0..darner_commands::SLOTS).all(|slot| a.owner(slot) == b.owner(slot))
}

/// What [`plan`] decided.
#[derive(Debug)]
pub struct Planned {
    /// The plan: the original one, or the cached reply.
    pub plan: Plan,
    /// The request writes.
    pub writes: bool,
    /// It missed and joined a fill in flight ([`Cache::join`]): the id its outcome will
    /// come under. It is not sent (`plan` says how, should the fill be dropped).
    pub joined: Option<u64>,
}

/// With the cache on: a cacheable request whose reply is cached is answered from it (when
/// `may_hit`: the client has no write in flight); one that misses joins a fill of the same
/// request in flight if `may_join` (see [`Cache::join`]); any request's writes drop their
/// keys' entries now, before a later request of the same pipeline can be answered from them.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    cache: &mut Cache,
    map: &SlotMap,
    args: &[&[u8]],
    plan: Plan,
    resp3: bool,
    may_hit: bool,
    tracked_read: bool,
    may_join: bool,
) -> Planned {
    let done = |plan, writes| Planned {
        plan,
        writes,
        joined: None,
    };
    if let Plan::Reply { .. } = plan {
        return done(plan, false);
    }
    if cache.apply(effect(args)) {
        return done(plan, true);
    }
    if !cacheable(args) {
        return done(plan, false);
    }
    if !may_hit {
        cache.stats.misses += 1;
        return done(plan, false);
    }
    if let Plan::Forward { parts, .. } = &plan {
        if let [part] = parts.as_slice() {
            let owner = match &part.target {
                Target::Slot(slot) => map.owner(*slot),
                _ => None,
            };
            let now = Instant::now();
            let sig = signature(args);
            let hit = cache.get(args[1], &sig, owner, now, resp3, tracked_read);
            if let Some(bytes) = hit {
                return done(
                    Plan::Reply {
                        bytes,
                        close: false,
                    },
                    false,
                );
            }
            // A tracking client's read is not joined: its key must be recorded as read when
            // its reply comes, as on the connection that read it.
            if may_join && !tracked_read {
                if let Some(id) = cache.join(args[1], &sig, owner) {
                    return Planned {
                        plan,
                        writes: false,
                        joined: Some(id),
                    };
                }
            }
        }
    }
    done(plan, false)
}

/// A cacheable read sent on a tracking connection: what its reply needs to be kept. While it
/// lives it is a fill in flight of its key (its shard counts it): answered, or dropped
/// unanswered (its connection lost, its request failed), it stops being one.
pub struct Fill {
    ticket: u64,
    key: Vec<u8>,
    signature: Vec<u8>,
    store: Arc<Store>,
    /// Counted out by [`Cache::finish_fill`] already (or else by its drop).
    done: bool,
}

impl std::fmt::Debug for Fill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fill")
            .field("ticket", &self.ticket)
            .field("key", &String::from_utf8_lossy(&self.key))
            .finish()
    }
}

impl Fill {
    /// The PTTL of the fill's key, sent right behind it on the same connection, and the
    /// ticket its reply is matched by ([`Cache::finish_ttl`]).
    pub fn ttl_request(&self) -> (Ticket, Vec<u8>) {
        (
            Ticket(self.ticket),
            crate::route::encode_request(&[&b"PTTL"[..], &self.key]),
        )
    }
}

impl Drop for Fill {
    fn drop(&mut self) {
        if !self.done {
            // Unanswered (its connection lost, its request failed): its joiners go to the
            // node themselves.
            let (_, joiners) = self.store.shard(&self.key).end_fill(&self.key, self.ticket);
            self.store.resolve(joiners, None);
        }
    }
}

/// A request waiting for a fill in flight instead of reading its key itself: the thread that
/// owns its client, and its id there ([`Cache::join`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Joiner {
    thread: usize,
    id: u64,
}

/// A joined request's outcome, posted to its thread ([`Cache::take_joined`]): the fill's
/// reply (RESP3-encoded, as the tracking connection read it), or `None`: the fill was
/// dropped, and the request goes to the node as an ordinary miss.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// What [`Cache::join`] returned.
    pub id: u64,
    /// The reply.
    pub reply: Option<Arc<Vec<u8>>>,
}

/// A fill in flight that later requests may join: it was sent to `node` (the key's primary,
/// on its tracking connection) for `signature`.
struct Open {
    ticket: u64,
    signature: Vec<u8>,
    node: String,
    joiners: Vec<Joiner>,
}

/// The cache's counters since they were last taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Requests answered from the cache.
    pub hits: u64,
    /// Cacheable requests sent to a node.
    pub misses: u64,
    /// Entries dropped for room.
    pub evictions: u64,
    /// Entries (or in-flight fills) dropped because their key changed, a node was flushed or
    /// lost.
    pub invalidations: u64,
    /// Requests answered by a fill in flight they joined (counted in `hits` too).
    pub joins: u64,
}

impl CacheStats {
    /// Adds `o`.
    pub fn add(&mut self, o: &CacheStats) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.evictions += o.evictions;
        self.invalidations += o.invalidations;
        self.joins += o.joins;
    }

    /// Whether anything was counted.
    pub fn any(&self) -> bool {
        *self != CacheStats::default()
    }
}

struct Entry {
    node: String,
    /// When the key's TTL runs out (no sooner than the node deletes it): from then on the
    /// entry is a miss, whether or not the node has deleted the key yet.
    expires: Option<Instant>,
    /// (request, reply): the key's cached replies, one per distinct request (GET, HGET f...).
    replies: Vec<(Vec<u8>, Vec<u8>)>,
    bytes: usize,
    /// Read since the CLOCK hand last passed it.
    referenced: bool,
    /// The threads (bit `t` for thread `t` < 64) whose tracking connection read the key for
    /// it, so will hear of its next change: a hit records a tracking client's read only on one
    /// of them (the invalidation reaches the client through its own thread's connection).
    trackers: u64,
}

/// Fills of one key in flight.
struct Fills {
    outstanding: u32,
    /// Fills with a smaller ticket read before an invalidation: their replies are dropped.
    valid_from: u64,
    /// Those that may be joined (a fill sent by the server: its node is known), with their
    /// joiners.
    open: Vec<Open>,
}

/// A fill in flight, as its PTTL's reply names it ([`Cache::finish_ttl`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket(u64);

/// Entries below this many bytes of bound per shard are not worth another lock: a small cache
/// has fewer shards (one under 256 KiB).
const MIN_SHARD_BYTES: usize = 256 << 10;

/// Shards at most: enough that threads rarely wait for one another on a lock (a lookup holds
/// one for a hash probe and a copy of the reply).
const MAX_SHARDS: usize = 64;

/// The cache all of the proxy's threads share, in shards by key, each behind its own lock.
///
/// One cache rather than one per thread, because a key's entry is filled once for every
/// thread: with per-thread caches, each write of a hot key emptied it from every thread's
/// cache and every thread paid a node round trip to fill it again (a 90/10 Zipf mix over six
/// threads hit 55% of the time). The tickets that order fills against invalidations are one
/// sequence for all threads, so a write answered on one thread drops a fill in flight on any
/// other.
pub struct Store {
    shards: Box<[Mutex<Shard>]>,
    hasher: std::collections::hash_map::RandomState,
    next_ticket: AtomicU64,
    /// Fills with a smaller ticket were in flight at a flush: dropped.
    valid_from_all: AtomicU64,
    /// Each thread's joined requests whose fill is over ([`Cache::take_joined`]).
    inboxes: Box<[Mutex<Vec<Joined>>]>,
    /// Wakes thread `t`'s event loop after a post to its inbox from another thread.
    wake: std::sync::OnceLock<Box<dyn Fn(usize) + Send + Sync>>,
}

impl Store {
    /// A cache of at most `max_bytes` (over all its shards).
    pub fn new(max_bytes: usize) -> Store {
        let n = (max_bytes / MIN_SHARD_BYTES).clamp(1, MAX_SHARDS);
        Store {
            shards: (0..n)
                .map(|_| {
                    Mutex::new(Shard {
                        max_bytes: max_bytes / n,
                        used: 0,
                        entries: HashMap::new(),
                        ring: VecDeque::new(),
                        fills: HashMap::new(),
                    })
                })
                .collect(),
            hasher: Default::default(),
            next_ticket: AtomicU64::new(0),
            valid_from_all: AtomicU64::new(0),
            inboxes: Box::new([]),
            wake: std::sync::OnceLock::new(),
        }
    }

    /// For `threads` threads (one inbox of joined requests each: a handle for a thread past
    /// them never joins).
    pub fn with_threads(mut self, threads: usize) -> Store {
        self.inboxes = (0..threads).map(|_| Mutex::new(Vec::new())).collect();
        self
    }

    /// How a post to another thread's inbox wakes its event loop (set once).
    pub fn set_wake(&self, wake: impl Fn(usize) + Send + Sync + 'static) {
        let _ = self.wake.set(Box::new(wake));
    }

    /// Posts a fill's outcome to its joiners' threads, and wakes them: the posting thread too
    /// (a fill dropped while its loop sends, after it read its inbox for the turn, must not
    /// wait for the loop's next event).
    fn resolve(&self, joiners: Vec<Joiner>, reply: Option<Arc<Vec<u8>>>) {
        if joiners.is_empty() {
            return;
        }
        let mut woken: u64 = 0;
        for j in joiners {
            let Some(inbox) = self.inboxes.get(j.thread) else {
                continue;
            };
            inbox
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Joined {
                    id: j.id,
                    reply: reply.clone(),
                });
            let bit = 1u64.checked_shl(j.thread as u32).unwrap_or(0);
            if bit == 0 || woken & bit == 0 {
                woken |= bit;
                if let Some(wake) = self.wake.get() {
                    wake(j.thread);
                }
            }
        }
    }

    fn shard(&self, key: &[u8]) -> MutexGuard<'_, Shard> {
        use std::hash::BuildHasher;
        let i = self.hasher.hash_one(key) as usize % self.shards.len();
        // A thread that panicked holding it left a consistent map (no step of a method below
        // can panic halfway); the proxy goes on rather than losing its cache.
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    fn each_shard(&self, mut f: impl FnMut(&mut Shard)) {
        for s in self.shards.iter() {
            f(&mut s.lock().unwrap_or_else(|e| e.into_inner()));
        }
    }

    /// Fills with a ticket taken so far are dropped when their replies come.
    fn drop_fills_in_flight(&self) {
        let next = self.next_ticket.load(Ordering::SeqCst);
        self.valid_from_all.fetch_max(next, Ordering::SeqCst);
    }
}

/// One shard's entries and fills in flight.
struct Shard {
    max_bytes: usize,
    used: usize,
    entries: HashMap<Vec<u8>, Entry>,
    /// CLOCK's ring of keys (a key may be there more than once after it was dropped and
    /// cached again, or not at all any more: both are skipped; compacted when it outgrows the
    /// entries).
    ring: VecDeque<Vec<u8>>,
    fills: HashMap<Vec<u8>, Fills>,
}

impl Shard {
    /// Fill `ticket` of `key` is over; its key's `valid_from`, and the fill's joiners.
    fn end_fill(&mut self, key: &[u8], ticket: u64) -> (u64, Vec<Joiner>) {
        let Some(f) = self.fills.get_mut(key) else {
            return (u64::MAX, Vec::new());
        };
        let valid_from = f.valid_from;
        let joiners = match f.open.iter().position(|o| o.ticket == ticket) {
            Some(i) => f.open.swap_remove(i).joiners,
            None => Vec::new(),
        };
        f.outstanding = f.outstanding.saturating_sub(1);
        if f.outstanding == 0 {
            self.fills.remove(key);
        }
        (valid_from, joiners)
    }

    /// Keeps `reply`; whether it was kept, and the entries evicted for room.
    fn insert(
        &mut self,
        key: &[u8],
        node: &str,
        request: &[u8],
        reply: &[u8],
        expires: Option<Instant>,
        tracker: u64,
    ) -> (bool, u64) {
        let size = request.len() + reply.len() + 32;
        // One entry larger than an eighth of the shard would evict most of it: not kept.
        if size + key.len() + ENTRY_OVERHEAD > self.max_bytes / 8 {
            return (false, 0);
        }
        match self.entries.get_mut(key) {
            Some(e) if e.node == node => {
                if let Some(i) = e.replies.iter().position(|(r, _)| r == request) {
                    let (r, v) = e.replies.swap_remove(i);
                    let old = r.len() + v.len() + 32;
                    e.bytes -= old;
                    self.used -= old;
                }
                e.replies.push((request.to_vec(), reply.to_vec()));
                // The key's TTL can change only by a write, whose invalidation would have
                // dropped the entry: both reads saw the same TTL, up to the clock's progress.
                e.expires = match (e.expires, expires) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                e.trackers |= tracker;
                e.bytes += size;
                self.used += size;
            }
            _ => {
                self.remove(key);
                let bytes = size + key.len() + ENTRY_OVERHEAD;
                self.entries.insert(
                    key.to_vec(),
                    Entry {
                        node: node.to_string(),
                        expires,
                        replies: vec![(request.to_vec(), reply.to_vec())],
                        bytes,
                        referenced: false,
                        trackers: tracker,
                    },
                );
                self.used += bytes;
                self.ring.push_back(key.to_vec());
            }
        }
        let evicted = self.evict();
        (self.entries.contains_key(key), evicted)
    }

    /// CLOCK: the hand drops the first entry not read since it last passed. Returns how many
    /// went.
    fn evict(&mut self) -> u64 {
        let mut evicted = 0;
        while self.used > self.max_bytes {
            let Some(k) = self.ring.pop_front() else {
                break;
            };
            let Some(e) = self.entries.get_mut(&k) else {
                continue;
            };
            if e.referenced {
                e.referenced = false;
                self.ring.push_back(k);
                continue;
            }
            self.remove(&k);
            evicted += 1;
        }
        if self.ring.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            let mut seen = std::collections::HashSet::new();
            self.ring
                .retain(|k| entries.contains_key(k) && seen.insert(k.clone()));
        }
        evicted
    }

    fn remove(&mut self, key: &[u8]) -> bool {
        match self.entries.remove(key) {
            Some(e) => {
                self.used -= e.bytes;
                true
            }
            None => false,
        }
    }
}

/// One thread's handle on the shared [`Store`]: its fills waiting for their PTTL and its
/// counters.
pub struct Cache {
    store: Arc<Store>,
    /// This thread's bit in [`Entry::trackers`] (0 from thread 64 on: never counted).
    tracker: u64,
    /// This thread's number (its inbox of joined requests).
    thread: usize,
    /// The id of this thread's next joined request.
    next_join: u64,
    /// Fills whose reply came and whose PTTL reply has not (by ticket): see [`Cache::hold`].
    held: HashMap<u64, (Box<Fill>, Vec<u8>)>,
    stats: CacheStats,
}

impl Cache {
    /// A cache of at most `max_bytes` for one thread (a [`Store`] of its own).
    pub fn new(max_bytes: usize) -> Cache {
        Cache::handle(Arc::new(Store::new(max_bytes).with_threads(1)), 0)
    }

    /// Thread `thread`'s handle on `store`.
    pub fn handle(store: Arc<Store>, thread: usize) -> Cache {
        Cache {
            store,
            tracker: 1u64.checked_shl(thread as u32).unwrap_or(0),
            thread,
            next_join: 0,
            held: HashMap::new(),
            stats: CacheStats::default(),
        }
    }

    /// The reply cached for `request` (whose key is `key`) in the client's protocol (`resp3`),
    /// if its entry was read from `owner` (the node that owns the key's slot now), the key's
    /// TTL has not run out at `now`, and, for a client whose reads are tracked
    /// (`tracked_read`), this thread's connection tracks the key.
    pub fn get(
        &mut self,
        key: &[u8],
        request: &[u8],
        owner: Option<&str>,
        now: Instant,
        resp3: bool,
        tracked_read: bool,
    ) -> Option<Vec<u8>> {
        let tracker = self.tracker;
        let mut s = self.store.shard(key);
        if s.entries
            .get(key)
            .and_then(|e| e.expires)
            .is_some_and(|t| now >= t)
        {
            // Past its TTL: gone for a client of the node, though the node may not have
            // deleted it yet (its deletion's invalidation comes when it does).
            s.remove(key);
            self.stats.invalidations += 1;
        }
        let found = s.entries.get_mut(key).and_then(|e| {
            if Some(e.node.as_str()) != owner || (tracked_read && e.trackers & tracker == 0) {
                return None;
            }
            e.referenced = true;
            e.replies
                .iter()
                .find(|(r, _)| r == request)
                .map(|(_, v)| for_protocol(v, resp3))
        });
        drop(s);
        match &found {
            Some(_) => self.stats.hits += 1,
            None => self.stats.misses += 1,
        }
        found
    }

    /// A fill for `payload` (a request the proxy encoded), if it is a cacheable read; sent to
    /// `node` (when known: requests of other clients may then join it, [`Cache::join`]).
    pub fn fill_for(&mut self, payload: &[u8], node: Option<&str>) -> Option<Box<Fill>> {
        let args = request_args(payload).filter(|args| cacheable(args))?;
        Some(Box::new(self.start_fill(args[1], signature(&args), node)))
    }

    /// A cacheable `request` of `key` that missed (from a client allowed a hit: no write of
    /// its own in flight, not tracking) waits for a fill of the same request in flight, sent
    /// to `owner` (the node that owns the key's slot now) by any thread, that is still valid
    /// (no invalidation of its key since it was sent): the id under which its outcome will
    /// be posted to this thread ([`Cache::take_joined`]). The fill's reply then answers it if
    /// the fill is kept as valid when its PTTL's reply comes (what a hit on the entry it
    /// stores would give); otherwise the request is sent as an ordinary miss.
    pub fn join(&mut self, key: &[u8], request: &[u8], owner: Option<&str>) -> Option<u64> {
        let owner = owner?;
        if self.thread >= self.store.inboxes.len() {
            return None;
        }
        let all = self.store.valid_from_all.load(Ordering::SeqCst);
        let mut s = self.store.shard(key);
        let f = s.fills.get_mut(key)?;
        let valid_from = f.valid_from.max(all);
        // The latest such fill: the likeliest to be valid still when its reply comes.
        let open = f
            .open
            .iter_mut()
            .filter(|o| o.ticket >= valid_from && o.node == owner && o.signature == request)
            .max_by_key(|o| o.ticket)?;
        let id = self.next_join;
        self.next_join += 1;
        open.joiners.push(Joiner {
            thread: self.thread,
            id,
        });
        drop(s);
        // Counted when its outcome comes (`settle_joined`): a hit, or a miss.
        self.stats.misses = self.stats.misses.saturating_sub(1);
        Some(id)
    }

    /// This thread's joined requests whose fill is over, since the last call.
    pub fn take_joined(&mut self) -> Vec<Joined> {
        let Some(inbox) = self.store.inboxes.get(self.thread) else {
            return Vec::new();
        };
        std::mem::take(&mut *inbox.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Counts a joined request's outcome: answered by its fill (a hit) or sent (a miss).
    pub fn count_joined(&mut self, answered: bool) {
        if answered {
            self.stats.hits += 1;
            self.stats.joins += 1;
        } else {
            self.stats.misses += 1;
        }
    }

    /// A client's reply as it comes (`payload`: its request, `fill`: the fill it was): a
    /// fill's is held until its PTTL's reply comes ([`Cache::finish_ttl`]); any other request's keys are dropped
    /// again (a write's, since a fill on another connection may have read before it; a read's
    /// that did not fill, since it may have seen a newer value than an entry filled on another
    /// connection). Either way, once the client has its reply, no entry older than what it saw
    /// is left.
    pub fn settle(&mut self, fill: Option<Box<Fill>>, payload: &[u8], reply: &[u8]) {
        if let Some(f) = fill {
            self.hold(f, reply);
            return;
        }
        let Some(args) = request_args(payload) else {
            return;
        };
        if cacheable(&args) {
            self.invalidate(args[1]);
        } else {
            self.apply(effect(&args));
        }
    }

    /// Drops what `effect` may have changed; whether it writes.
    fn apply(&mut self, effect: Effect) -> bool {
        match effect {
            Effect::None => false,
            Effect::Keys(keys) => {
                keys.iter().for_each(|k| self.invalidate(k));
                true
            }
            Effect::All => {
                self.flush_all();
                true
            }
        }
    }

    /// A fill's reply came; its PTTL, sent right behind it on the same connection, has not.
    fn hold(&mut self, fill: Box<Fill>, reply: &[u8]) {
        self.held.insert(fill.ticket, (fill, reply.to_vec()));
    }

    /// The reply to the PTTL sent behind fill `ticket` (queued at `sent`) came: the fill is
    /// kept, with the key's deadline, unless its key changed since the fill was sent.
    ///
    /// The node ran the PTTL at or after `sent`, so `sent` plus the TTL is no later than the
    /// node's own expiry time: the entry stops being served no later than the key would. Both
    /// requests ran on the node back to back on one connection; a change of the key between
    /// them (another client's write, an expiry) was pushed to this connection and raised the
    /// key's `valid_from` before this reply was read, dropping the fill. The one exception is
    /// the PTTL expiring the key itself, whose invalidation Redis sends after the PTTL's
    /// reply: then PTTL says -2 (no key) while the read saw a value, and the fill is dropped.
    pub fn finish_ttl(&mut self, ticket: &Ticket, node: &str, ttl: &[u8], sent: Instant) -> bool {
        let Some((f, reply)) = self.held.remove(&ticket.0) else {
            // Forgotten by a flush: it was in flight then.
            return false;
        };
        let ms = std::str::from_utf8(ttl)
            .ok()
            .and_then(|t| t.strip_prefix(':'))
            .and_then(|t| t.strip_suffix("\r\n"))
            .and_then(|t| t.parse::<i64>().ok());
        let expires = match ms {
            Some(-1) => Some(None),
            Some(-2) if absent(&reply) => Some(None),
            Some(ms) if ms >= 0 => Some(sent.checked_add(Duration::from_millis(ms as u64))),
            // No key though the read saw one, or an error (a redirect: the fill's reply was
            // one too): not kept.
            _ => None,
        };
        match expires {
            Some(expires) => self.finish_fill(*f, node, &reply, expires),
            None => self.finish_fill(*f, node, b"", None),
        }
    }

    /// A fill of `key` for `request` ([`signature`]) is being sent (not joinable).
    pub fn begin_fill(&mut self, key: &[u8], request: Vec<u8>) -> Fill {
        self.start_fill(key, request, None)
    }

    /// A fill of `key` for `request` is being sent, to `node` if known (then joinable).
    fn start_fill(&mut self, key: &[u8], request: Vec<u8>, node: Option<&str>) -> Fill {
        let mut s = self.store.shard(key);
        // Under the shard's lock: an invalidation of the key (which reads the next ticket
        // under the same lock) is either before this fill, or sees a later ticket than its.
        let ticket = self.store.next_ticket.fetch_add(1, Ordering::SeqCst);
        let f = s.fills.entry(key.to_vec()).or_insert(Fills {
            outstanding: 0,
            valid_from: 0,
            open: Vec::new(),
        });
        f.outstanding += 1;
        if let Some(node) = node {
            f.open.push(Open {
                ticket,
                signature: request.clone(),
                node: node.to_string(),
                joiners: Vec::new(),
            });
        }
        drop(s);
        Fill {
            ticket,
            key: key.to_vec(),
            signature: request,
            store: self.store.clone(),
            done: false,
        }
    }

    /// A fill's reply came (from `node`): it is kept unless its key changed (or the cache was
    /// flushed) since the fill was sent. Returns whether it was kept.
    pub fn finish_fill(
        &mut self,
        mut fill: Fill,
        node: &str,
        reply: &[u8],
        expires: Option<Instant>,
    ) -> bool {
        fill.done = true;
        let mut s = self.store.shard(&fill.key);
        let (valid_from, joiners) = s.end_fill(&fill.key, fill.ticket);
        let valid = fill.ticket >= valid_from
            && fill.ticket >= self.store.valid_from_all.load(Ordering::SeqCst);
        if !valid || !storable(reply) {
            drop(s);
            self.store.resolve(joiners, None);
            return false;
        }
        let (kept, evicted) = s.insert(
            &fill.key,
            node,
            &fill.signature,
            reply,
            expires,
            self.tracker,
        );
        drop(s);
        self.stats.evictions += evicted;
        // Its joiners get what a hit on its entry would give them now: the reply, unless the
        // key's TTL ran out meanwhile (a reply too large to keep is as right as one kept).
        let live = expires.is_none_or(|t| Instant::now() < t);
        let reply = live.then(|| Arc::new(reply.to_vec()));
        self.store.resolve(joiners, reply);
        kept
    }

    /// `key` changed (or may have): its entry goes, and its fills in flight (on any thread)
    /// will be dropped.
    pub fn invalidate(&mut self, key: &[u8]) {
        let mut s = self.store.shard(key);
        let mut dropped = s.remove(key);
        if let Some(f) = s.fills.get_mut(key) {
            f.valid_from = self.store.next_ticket.load(Ordering::SeqCst);
            dropped = true;
        }
        self.stats.invalidations += u64::from(dropped);
    }

    /// Everything goes (keys unknown to the proxy changed, the topology changed), and every
    /// fill in flight.
    pub fn flush_all(&mut self) {
        // Before the entries go: a fill stored between the two would outlive the flush.
        self.store.drop_fills_in_flight();
        let mut dropped = 0;
        self.store.each_shard(|s| {
            dropped += (s.entries.len() + s.fills.len()) as u64;
            s.entries.clear();
            s.ring.clear();
            s.used = 0;
        });
        self.stats.invalidations += dropped;
    }

    /// `node`'s entries go (a connection whose tracking kept them right is gone, or the node
    /// was flushed: whichever thread's connection filled them), and every fill in flight
    /// (cheaper than remembering fills' nodes, and this is rare).
    pub fn flush_node(&mut self, node: &str) {
        self.store.drop_fills_in_flight();
        let mut dropped = 0;
        self.store.each_shard(|s| {
            let before = s.entries.len();
            s.entries.retain(|_, e| e.node != node);
            s.used = s.entries.values().map(|e| e.bytes).sum();
            dropped += (before - s.entries.len() + s.fills.len()) as u64;
        });
        self.stats.invalidations += dropped;
        // Their PTTLs' replies may never come (the connection is gone).
        self.held.clear();
    }

    /// What was counted since the last call.
    pub fn take_stats(&mut self) -> CacheStats {
        std::mem::take(&mut self.stats)
    }

    /// Bytes held (entries and their overhead), over every thread.
    pub fn used(&self) -> usize {
        let mut used = 0;
        self.store.each_shard(|s| used += s.used);
        used
    }

    /// Keys held, over every thread.
    pub fn len(&self) -> usize {
        let mut n = 0;
        self.store.each_shard(|s| n += s.entries.len());
        n
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills in flight, over every thread.
    #[cfg(test)]
    fn fills_in_flight(&self) -> usize {
        let mut n = 0;
        self.store.each_shard(|s| n += s.fills.len());
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use darner_resp::{decode, Limits};

    const N: &str = "127.0.0.1:7000";

    /// A fill's reply, then its PTTL's (no TTL).
    fn settle_fill(c: &mut Cache, fill: Option<Box<Fill>>, payload: &[u8], reply: &[u8]) {
        let ticket = fill.as_ref().map(|f| f.ttl_request().0);
        c.settle(fill, payload, reply);
        if let Some(t) = ticket {
            c.finish_ttl(&t, N, b":-1\r\n", Instant::now());
        }
    }

    fn fill(c: &mut Cache, key: &str, reply: &str) -> bool {
        let t = c.begin_fill(key.as_bytes(), b"get".to_vec());
        c.finish_fill(t, N, reply.as_bytes(), None)
    }

    #[test]
    fn a_fill_is_served_while_its_node_owns_the_key() {
        let mut c = Cache::new(1 << 20);
        assert!(fill(&mut c, "k", "$1\r\nv\r\n"));
        assert_eq!(
            c.get(b"k", b"get", Some(N), Instant::now(), true, false),
            Some(b"$1\r\nv\r\n".to_vec())
        );
        assert_eq!(
            c.get(
                b"k",
                b"get",
                Some("127.0.0.1:7001"),
                Instant::now(),
                true,
                false
            ),
            None
        );
        assert_eq!(
            c.get(b"k", b"strlen", Some(N), Instant::now(), true, false),
            None
        );
        let s = c.take_stats();
        assert_eq!((s.hits, s.misses), (1, 2));
    }

    #[test]
    fn an_invalidation_while_a_fill_is_in_flight_drops_its_reply() {
        let mut c = Cache::new(1 << 20);
        let early = c.begin_fill(b"k", b"get".to_vec());
        c.invalidate(b"k");
        let late = c.begin_fill(b"k", b"get".to_vec());
        assert!(!c.finish_fill(early, N, b"$3\r\nold\r\n", None));
        assert_eq!(
            c.get(b"k", b"get", Some(N), Instant::now(), true, false),
            None
        );
        // Sent after the invalidation: it read the new value.
        assert!(c.finish_fill(late, N, b"$3\r\nnew\r\n", None));
        assert_eq!(
            c.get(b"k", b"get", Some(N), Instant::now(), true, false),
            Some(b"$3\r\nnew\r\n".to_vec())
        );
        assert!(c.fills_in_flight() == 0);
    }

    #[test]
    fn flushes_drop_entries_and_fills_in_flight() {
        let mut c = Cache::new(1 << 20);
        assert!(fill(&mut c, "a", ":1\r\n"));
        let t = c.begin_fill(b"b", b"get".to_vec());
        c.flush_node(N);
        assert!(c.is_empty());
        assert!(!c.finish_fill(t, N, b":2\r\n", None));
        assert!(fill(&mut c, "a", ":1\r\n"));
        let t = c.begin_fill(b"b", b"get".to_vec());
        c.flush_all();
        assert!(!c.finish_fill(t, N, b":2\r\n", None));
        assert_eq!(c.used(), 0);
    }

    #[test]
    fn an_entry_is_a_miss_once_its_ttl_runs_out() {
        let mut c = Cache::new(1 << 20);
        let payload = crate::route::encode_request(&["GET", "k"]);
        let ttl = |c: &mut Cache, value: &[u8], pttl: &[u8], sent: Instant| {
            let fill = c.fill_for(&payload, None).expect("cacheable");
            let (t, req) = fill.ttl_request();
            assert_eq!(req, crate::route::encode_request(&["PTTL", "k"]));
            c.settle(Some(fill), &payload, value);
            c.finish_ttl(&t, N, pttl, sent)
        };
        let sent = Instant::now();
        assert!(ttl(&mut c, b"$1\r\nv\r\n", b":50\r\n", sent));
        let at = |ms| sent + Duration::from_millis(ms);
        assert!(
            c.get(b"k", b"get k", Some(N), at(49), true, false)
                .is_none(),
            "other request"
        );
        let sig = signature(&[b"GET", b"k"]);
        assert!(c.get(b"k", &sig, Some(N), at(49), true, false).is_some());
        assert!(c.get(b"k", &sig, Some(N), at(50), true, false).is_none());
        assert!(c.is_empty(), "dropped when found past its deadline");
        // No TTL: kept until invalidated.
        assert!(ttl(&mut c, b"$1\r\nv\r\n", b":-1\r\n", sent));
        assert!(c
            .get(b"k", &sig, Some(N), at(1 << 40), true, false)
            .is_some());
        // No key at the PTTL: kept only if the read saw none either (the PTTL expired it
        // itself otherwise, and its invalidation comes after).
        assert!(!ttl(&mut c, b"$1\r\nv\r\n", b":-2\r\n", sent));
        assert!(ttl(&mut c, b"_\r\n", b":-2\r\n", sent));
        assert!(!ttl(&mut c, b"_\r\n", b"-MOVED 1 127.0.0.1:7001\r\n", sent));
        // An invalidation between the read's reply and the PTTL's drops the fill.
        let fill = c.fill_for(&payload, None).expect("cacheable");
        let (t, _) = fill.ttl_request();
        c.settle(Some(fill), &payload, b"$1\r\nv\r\n");
        c.invalidate(b"k");
        assert!(!c.finish_ttl(&t, N, b":-1\r\n", sent));
        assert!(c.fills_in_flight() == 0 && c.held.is_empty());
        // A flush forgets held fills.
        let fill = c.fill_for(&payload, None).expect("cacheable");
        let (t, _) = fill.ttl_request();
        c.settle(Some(fill), &payload, b"$1\r\nv\r\n");
        c.flush_node(N);
        assert!(c.held.is_empty());
        assert!(!c.finish_ttl(&t, N, b":-1\r\n", sent));
    }

    #[test]
    fn errors_are_not_cached() {
        let mut c = Cache::new(1 << 20);
        assert!(!fill(&mut c, "k", "-WRONGTYPE x\r\n"));
        assert!(c.is_empty());
    }

    #[test]
    fn clock_keeps_the_bound_and_spares_what_was_read() {
        let mut c = Cache::new(64 * 1024);
        let value = format!("${}\r\n{}\r\n", 500, "x".repeat(500));
        assert!(fill(&mut c, "hot", &value));
        for i in 0..1000 {
            fill(&mut c, &format!("k{i}"), &value);
            assert!(
                c.get(b"hot", b"get", Some(N), Instant::now(), true, false)
                    .is_some(),
                "at {i}"
            );
            assert!(c.used() <= 64 * 1024);
        }
        assert!(c.take_stats().evictions > 800);
        let len = c.len();
        assert!(c.store.shard(b"hot").ring.len() <= 2 * len + 64);
        // Too large for the cache: not kept.
        let big = format!("${}\r\n{}\r\n", 9000, "x".repeat(9000));
        assert!(!fill(&mut c, "big", &big));
    }

    #[test]
    fn several_requests_of_one_key_share_its_entry() {
        let mut c = Cache::new(1 << 20);
        let t = c.begin_fill(b"h", b"hget h a".to_vec());
        assert!(c.finish_fill(t, N, b"$1\r\n1\r\n", None));
        let t = c.begin_fill(b"h", b"hlen h".to_vec());
        assert!(c.finish_fill(t, N, b":2\r\n", None));
        let used = c.used();
        let t = c.begin_fill(b"h", b"hlen h".to_vec());
        assert!(c.finish_fill(t, N, b":3\r\n", None));
        assert_eq!(c.used(), used);
        assert_eq!(
            c.get(b"h", b"hlen h", Some(N), Instant::now(), true, false),
            Some(b":3\r\n".to_vec())
        );
        c.invalidate(b"h");
        assert_eq!(
            c.get(b"h", b"hget h a", Some(N), Instant::now(), true, false),
            None
        );
        assert_eq!(c.used(), 0);
    }

    #[test]
    fn which_requests_are_cacheable_and_what_writes_change() {
        let a =
            |s: &'static str| -> Vec<&'static [u8]> { s.split(' ').map(str::as_bytes).collect() };
        assert!(cacheable(&a("GET k")));
        assert!(cacheable(&a("hget k f")));
        assert!(!cacheable(&a("EXISTS a b")));
        assert!(!cacheable(&a("GETEX k")));
        assert!(!cacheable(&a("SET k v")));
        assert_eq!(effect(&a("GET k")), Effect::None);
        assert_eq!(effect(&a("SET k v")), Effect::Keys(vec![b"k".to_vec()]));
        assert_eq!(
            effect(&a("MSET a 1 b 2")),
            Effect::Keys(vec![b"a".to_vec(), b"b".to_vec()])
        );
        assert_eq!(effect(&a("EVAL s 1 k")), Effect::Keys(vec![b"k".to_vec()]));
        assert_eq!(effect(&a("EVAL s 0")), Effect::All);
        assert_eq!(effect(&a("EXEC")), Effect::All);
        assert_eq!(effect(&a("FLUSHALL")), Effect::All);
        assert_eq!(effect(&a("PUBLISH c m")), Effect::None);
        assert_eq!(effect(&a("PING")), Effect::None);
        assert_eq!(effect(&a("OBJECT ENCODING k")), Effect::None);
    }

    #[test]
    fn the_request_and_reply_paths() {
        use crate::route::{encode_request, Part};
        use crate::Merge;
        let mut map = SlotMap::default();
        map.assign(0, darner_commands::SLOTS - 1, N);
        let get = |key: &str| {
            let payload = encode_request(&["GET", key]);
            let plan = Plan::Forward {
                parts: vec![Part {
                    target: Target::Slot(darner_commands::key_slot(key.as_bytes())),
                    payload: payload.clone(),
                }],
                merge: Merge::Passthrough,
            };
            (payload, plan)
        };
        let args =
            |s: &'static str| -> Vec<&'static [u8]> { s.split(' ').map(str::as_bytes).collect() };
        let mut c = Cache::new(1 << 20);
        // A miss, then its fill's reply is kept and answers the next GET, in either protocol.
        let (payload, p) = get("k");
        let p = plan(&mut c, &map, &args("GET k"), p, true, true, false, true);
        assert!(matches!(p.plan, Plan::Forward { .. }) && !p.writes && p.joined.is_none());
        let fill = c.fill_for(&payload, None);
        assert!(fill.is_some());
        settle_fill(&mut c, fill, &payload, b"_\r\n");
        let hit = |c: &mut Cache, resp3: bool, may_hit: bool| match plan(
            c,
            &map,
            &args("GET k"),
            get("k").1,
            resp3,
            may_hit,
            false,
            true,
        )
        .plan
        {
            Plan::Reply { bytes, .. } => Some(bytes),
            _ => None,
        };
        assert_eq!(hit(&mut c, true, true), Some(b"_\r\n".to_vec()));
        assert_eq!(hit(&mut c, false, true), Some(b"$-1\r\n".to_vec()));
        // Not for a client with a write in flight, nor once another node owns the slot.
        assert_eq!(hit(&mut c, true, false), None);
        let mut moved = map.clone();
        moved.assign(0, darner_commands::SLOTS - 1, "127.0.0.1:7001");
        assert!(matches!(
            plan(
                &mut c,
                &moved,
                &args("GET k"),
                get("k").1,
                true,
                true,
                false,
                true
            )
            .plan,
            Plan::Forward { .. }
        ));
        let s = c.take_stats();
        assert_eq!((s.hits, s.misses), (2, 3));
        // A write drops the entry when it is planned, and again when its reply comes.
        let set = encode_request(&["SET", "k", "v"]);
        let writes = plan(
            &mut c,
            &map,
            &args("SET k v"),
            get("k").1,
            true,
            true,
            false,
            true,
        )
        .writes;
        assert!(writes);
        assert_eq!(hit(&mut c, true, true), None);
        let fill = c.fill_for(&payload, None);
        c.settle(None, &set, b"+OK\r\n");
        settle_fill(&mut c, fill, &payload, b"$1\r\nv\r\n");
        assert_eq!(
            hit(&mut c, true, true),
            None,
            "in flight when the write was answered"
        );
        // A read's reply that did not fill drops what another connection filled.
        let fill = c.fill_for(&payload, None);
        settle_fill(&mut c, fill, &payload, b"$1\r\nv\r\n");
        assert!(hit(&mut c, true, true).is_some());
        c.settle(None, &payload, b"$1\r\nw\r\n");
        assert_eq!(hit(&mut c, true, true), None);
        // Not a cacheable read: no fill.
        assert!(c.fill_for(&set, None).is_none());
        assert!(c
            .fill_for(&encode_request(&["MGET", "a", "b"]), None)
            .is_none());
    }

    #[test]
    fn requests_and_invalidations_are_read_back() {
        let payload = crate::route::encode_request(&["HGET", "k", "f"]);
        assert_eq!(request_args(&payload), Some(vec![&b"HGET"[..], b"k", b"f"]));
        assert_eq!(request_args(b"*2\r\n$3\r\nGET\r\n$9\r\nk\r\n"), None);
        assert_eq!(request_args(b"PING\r\n"), None);
        let push = |w: &[u8]| decode(w, &Limits::default()).unwrap().unwrap().0;
        assert_eq!(
            invalidation(&push(
                b">2\r\n$10\r\ninvalidate\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"
            )),
            Push::Keys(vec![b"a".to_vec(), b"b".to_vec()])
        );
        assert_eq!(
            invalidation(&push(b">2\r\n$10\r\ninvalidate\r\n_\r\n")),
            Push::All
        );
        assert_eq!(
            invalidation(&push(b">2\r\n$7\r\nmessage\r\n_\r\n")),
            Push::Other
        );
        assert_eq!(for_protocol(b"_\r\n", false), b"$-1\r\n");
        assert_eq!(for_protocol(b"_\r\n", true), b"_\r\n");
    }

    #[test]
    fn threads_share_entries_fills_and_invalidations() {
        let store = Arc::new(Store::new(1 << 20).with_threads(4));
        let (mut a, mut b) = (Cache::handle(store.clone(), 0), Cache::handle(store, 1));
        let now = Instant::now();
        let t = a.begin_fill(b"k", b"get".to_vec());
        assert!(a.finish_fill(t, N, b"$1\r\nv\r\n", None));
        // Filled once, for both threads.
        assert_eq!(
            b.get(b"k", b"get", Some(N), now, true, false),
            Some(b"$1\r\nv\r\n".to_vec())
        );
        // A tracking client hits only on what its own thread's connection read.
        assert_eq!(b.get(b"k", b"get", Some(N), now, true, true), None);
        assert!(a.get(b"k", b"get", Some(N), now, true, true).is_some());
        // A write answered on one thread drops a fill in flight on the other.
        let early = a.begin_fill(b"k", b"get".to_vec());
        b.invalidate(b"k");
        assert_eq!(a.get(b"k", b"get", Some(N), now, true, false), None);
        assert!(!a.finish_fill(early, N, b"$3\r\nold\r\n", None));
        // A fill dropped unanswered (its connection lost) is no longer in flight.
        let lost = b.begin_fill(b"k", b"get".to_vec());
        assert_eq!(a.fills_in_flight(), 1);
        drop(lost);
        assert_eq!(a.fills_in_flight(), 0);
        // One thread's connection to a node lost: the node's entries go for every thread.
        let t = b.begin_fill(b"k", b"get".to_vec());
        assert!(b.finish_fill(t, N, b"$1\r\nw\r\n", None));
        a.flush_node(N);
        assert!(b.is_empty());
    }

    /// A fill sent by thread `c` for `GET key` to `N`, as the server sends it (joinable).
    fn sent_fill(c: &mut Cache, key: &str) -> (Box<Fill>, Vec<u8>) {
        let payload = crate::route::encode_request(&["GET", key]);
        (c.fill_for(&payload, Some(N)).expect("cacheable"), payload)
    }

    /// Its reply, then its PTTL's (`pttl`).
    fn answer_fill(c: &mut Cache, sent: (Box<Fill>, Vec<u8>), reply: &[u8], pttl: &[u8]) -> bool {
        let (fill, payload) = sent;
        let (t, _) = fill.ttl_request();
        c.settle(Some(fill), &payload, reply);
        c.finish_ttl(&t, N, pttl, Instant::now())
    }

    #[test]
    fn a_miss_joins_a_fill_in_flight_on_any_thread() {
        let store = Arc::new(Store::new(1 << 20).with_threads(3));
        let woken = Arc::new(Mutex::new(Vec::new()));
        let w = woken.clone();
        store.set_wake(move |t| w.lock().unwrap().push(t));
        let (mut a, mut b) = (
            Cache::handle(store.clone(), 0),
            Cache::handle(store.clone(), 1),
        );
        let get = signature(&[b"GET", b"k"]);
        assert_eq!(a.join(b"k", &get, Some(N)), None, "nothing in flight");
        let sent = sent_fill(&mut a, "k");
        // Same request, same node: joined, from either thread; not another request, nor a
        // fill from a node that no longer owns the slot.
        let ja = a.join(b"k", &get, Some(N)).expect("joins");
        let jb = b.join(b"k", &get, Some(N)).expect("joins");
        assert_eq!(b.join(b"k", &signature(&[b"STRLEN", b"k"]), Some(N)), None);
        assert_eq!(b.join(b"k", &get, Some("127.0.0.1:7001")), None);
        assert_eq!(b.join(b"k", &get, None), None);
        // A fill the server did not send (its node unknown) is not joined.
        let other = a.begin_fill(b"j", get.clone());
        assert_eq!(a.join(b"j", &get, Some(N)), None);
        drop(other);
        assert!(answer_fill(&mut a, sent, b"$1\r\nv\r\n", b":-1\r\n"));
        let reply = Some(Arc::new(b"$1\r\nv\r\n".to_vec()));
        assert_eq!(
            a.take_joined(),
            vec![Joined {
                id: ja,
                reply: reply.clone()
            }]
        );
        assert_eq!(b.take_joined(), vec![Joined { id: jb, reply }]);
        assert!(a.take_joined().is_empty() && b.take_joined().is_empty());
        // Each joiner's thread was woken, once.
        assert_eq!(*woken.lock().unwrap(), vec![0, 1]);
        // Counted as one hit each (the miss `plan` counted is taken back by `join`).
        b.count_joined(true);
        let s = b.take_stats();
        assert_eq!((s.hits, s.joins), (1, 1));
    }

    #[test]
    fn joiners_of_a_dropped_fill_are_sent_to_the_node() {
        let store = Arc::new(Store::new(1 << 20).with_threads(2));
        let (mut a, mut b) = (Cache::handle(store.clone(), 0), Cache::handle(store, 1));
        let get = signature(&[b"GET", b"k"]);
        let gone = |c: &mut Cache, id| {
            assert_eq!(c.take_joined(), vec![Joined { id, reply: None }]);
        };
        // Its connection lost: dropped unanswered.
        let (fill, _) = sent_fill(&mut a, "k");
        let j = b.join(b"k", &get, Some(N)).unwrap();
        drop(fill);
        gone(&mut b, j);
        // Its key invalidated after the join, before its reply (a write answered meanwhile).
        let sent = sent_fill(&mut a, "k");
        let j = b.join(b"k", &get, Some(N)).unwrap();
        a.invalidate(b"k");
        assert!(!answer_fill(&mut a, sent, b"$3\r\nold\r\n", b":-1\r\n"));
        gone(&mut b, j);
        // ... or between its reply and its PTTL's.
        let (fill, payload) = sent_fill(&mut a, "k");
        let j = b.join(b"k", &get, Some(N)).unwrap();
        let (t, _) = fill.ttl_request();
        a.settle(Some(fill), &payload, b"$3\r\nold\r\n");
        b.invalidate(b"k");
        assert!(!a.finish_ttl(&t, N, b":-1\r\n", Instant::now()));
        gone(&mut b, j);
        // An error, a redirect.
        let sent = sent_fill(&mut a, "k");
        let j = b.join(b"k", &get, Some(N)).unwrap();
        assert!(!answer_fill(&mut a, sent, b"-WRONGTYPE x\r\n", b":-1\r\n"));
        gone(&mut b, j);
        let sent = sent_fill(&mut a, "k");
        let j = b.join(b"k", &get, Some(N)).unwrap();
        assert!(!answer_fill(
            &mut a,
            sent,
            b"-MOVED 1 127.0.0.1:7001\r\n",
            b"-MOVED 1 127.0.0.1:7001\r\n"
        ));
        gone(&mut b, j);
        // The node lost (its PTTL's reply never comes), a flush.
        let (fill, payload) = sent_fill(&mut a, "k");
        let j = b.join(b"k", &get, Some(N)).unwrap();
        a.settle(Some(fill), &payload, b"$1\r\nv\r\n");
        a.flush_node(N);
        gone(&mut b, j);
        let sent = sent_fill(&mut a, "k");
        let j = b.join(b"k", &get, Some(N)).unwrap();
        b.flush_all();
        assert!(!answer_fill(&mut a, sent, b"$1\r\nv\r\n", b":-1\r\n"));
        gone(&mut b, j);
        // The key's TTL ran out by the PTTL's reply: a hit would miss.
        let sent = sent_fill(&mut a, "k");
        let j = b.join(b"k", &get, Some(N)).unwrap();
        let (fill, payload) = sent;
        let (t, _) = fill.ttl_request();
        a.settle(Some(fill), &payload, b"$1\r\nv\r\n");
        let long_ago = Instant::now() - Duration::from_millis(100);
        a.finish_ttl(&t, N, b":5\r\n", long_ago);
        gone(&mut b, j);
        assert_eq!(a.fills_in_flight(), 0);
        // A reply too large to keep still answers its joiners (it is as right as a hit).
        let mut small = Cache::handle(Arc::new(Store::new(4096).with_threads(1)), 0);
        let sent = sent_fill(&mut small, "k");
        let j = small.join(b"k", &get, Some(N)).unwrap();
        let big = format!("$2000\r\n{}\r\n", "x".repeat(2000));
        assert!(!answer_fill(&mut small, sent, big.as_bytes(), b":-1\r\n"));
        assert_eq!(
            small.take_joined(),
            vec![Joined {
                id: j,
                reply: Some(Arc::new(big.into_bytes()))
            }]
        );
    }

    #[test]
    fn a_fill_invalidated_before_the_miss_is_not_joined() {
        let store = Arc::new(Store::new(1 << 20).with_threads(2));
        let (mut a, mut b) = (Cache::handle(store.clone(), 0), Cache::handle(store, 1));
        let get = signature(&[b"GET", b"k"]);
        let early = sent_fill(&mut a, "k");
        // A write of `k` planned or answered (or the node's invalidation) after the fill was
        // sent: the fill may have read before it, so a later miss may not take its reply.
        b.invalidate(b"k");
        assert_eq!(b.join(b"k", &get, Some(N)), None);
        // A fill sent after it may be joined, not the early one.
        let late = sent_fill(&mut a, "k");
        let j = b.join(b"k", &get, Some(N)).unwrap();
        assert!(!answer_fill(&mut a, early, b"$3\r\nold\r\n", b":-1\r\n"));
        assert!(b.take_joined().is_empty(), "not the early fill's joiner");
        assert!(answer_fill(&mut a, late, b"$3\r\nnew\r\n", b":-1\r\n"));
        assert_eq!(
            b.take_joined(),
            vec![Joined {
                id: j,
                reply: Some(Arc::new(b"$3\r\nnew\r\n".to_vec()))
            }]
        );
        // A flush too.
        let sent = sent_fill(&mut a, "k");
        a.flush_all();
        assert_eq!(b.join(b"k", &get, Some(N)), None);
        drop(sent);
        assert!(b.take_joined().is_empty());
    }

    #[test]
    fn plan_joins_only_a_miss_that_may_hit() {
        use crate::route::{encode_request, Part};
        use crate::Merge;
        let mut map = SlotMap::default();
        map.assign(0, darner_commands::SLOTS - 1, N);
        let args: Vec<&[u8]> = vec![b"GET", b"k"];
        let forward = || Plan::Forward {
            parts: vec![Part {
                target: Target::Slot(darner_commands::key_slot(b"k")),
                payload: encode_request(&["GET", "k"]),
            }],
            merge: Merge::Passthrough,
        };
        let mut c = Cache::new(1 << 20);
        let sent = sent_fill(&mut c, "k");
        let joined = |c: &mut Cache, may_hit, tracked, may_join| {
            let p = plan(c, &map, &args, forward(), true, may_hit, tracked, may_join);
            assert!(matches!(p.plan, Plan::Forward { .. }));
            p.joined
        };
        // A client with a write in flight, a tracking client's read, a read that must not
        // join (behind deferred requests): sent.
        assert_eq!(joined(&mut c, false, false, true), None);
        assert_eq!(joined(&mut c, true, true, true), None);
        assert_eq!(joined(&mut c, true, false, false), None);
        let j = joined(&mut c, true, false, true).expect("joins");
        let s = c.take_stats();
        assert_eq!(
            (s.hits, s.misses),
            (0, 3),
            "the joined read is not counted yet"
        );
        assert!(answer_fill(&mut c, sent, b"$1\r\nv\r\n", b":-1\r\n"));
        assert_eq!(
            c.take_joined(),
            vec![Joined {
                id: j,
                reply: Some(Arc::new(b"$1\r\nv\r\n".to_vec()))
            }]
        );
    }

    /// The joined reads of `c` answered so far: each is one of `waiting` (taken out), and a
    /// version (`:n`) answered is at least the one answered to a writer before it joined.
    /// Returns how many were answered by their fill.
    fn check_joined(c: &mut Cache, waiting: &mut HashMap<u64, u64>) -> u64 {
        let mut answered = 0;
        for j in c.take_joined() {
            let floor = waiting.remove(&j.id).expect("a join of this thread");
            if let Some(r) = j.reply {
                let v: u64 = std::str::from_utf8(&r[1..r.len() - 2])
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!(v >= floor, "joined read {v} after {floor} answered");
                answered += 1;
            }
        }
        answered
    }

    /// As below, with misses joining fills in flight on any thread: a joined read answered
    /// with a version older than a write answered before it joined would be a bug.
    #[test]
    fn no_joined_read_is_older_than_a_write_answered_before_it() {
        use std::sync::atomic::AtomicU64;
        let store = Arc::new(Store::new(1 << 20).with_threads(4));
        let node = Arc::new(AtomicU64::new(0));
        let answered = Arc::new(AtomicU64::new(0));
        let payload = crate::route::encode_request(&["GET", "k"]);
        let sig = signature(&[b"GET", b"k"]);
        let workers: Vec<_> = (0..4)
            .map(|t| {
                let (store, node, answered) = (store.clone(), node.clone(), answered.clone());
                let (payload, sig) = (payload.clone(), sig.clone());
                std::thread::spawn(move || {
                    let mut c = Cache::handle(store, t);
                    // Joined reads: id -> the newest version answered when they joined.
                    let mut waiting: HashMap<u64, u64> = HashMap::new();
                    let (mut joined, mut answered_joins) = (0u64, 0u64);
                    let mut seed = 0x2545_f491_4f6c_dd1du64 ^ (t as u64 + 1);
                    for _ in 0..20_000 {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        let floor = answered.load(Ordering::SeqCst);
                        // Fewer writes than below: a joiner loops on while its fill is out,
                        // and most fills would be invalidated before their reply.
                        if seed.is_multiple_of(200) {
                            c.invalidate(b"k");
                            let v = node.fetch_add(1, Ordering::SeqCst) + 1;
                            c.invalidate(b"k");
                            answered.fetch_max(v, Ordering::SeqCst);
                        } else if c
                            .get(b"k", &sig, Some(N), Instant::now(), true, false)
                            .is_none()
                        {
                            if let Some(id) = c.join(b"k", &sig, Some(N)) {
                                joined += 1;
                                waiting.insert(id, floor);
                            } else {
                                let f = c.fill_for(&payload, Some(N)).unwrap();
                                // Other threads may join while it is "in flight".
                                std::thread::yield_now();
                                let v = node.load(Ordering::SeqCst);
                                c.finish_fill(*f, N, format!(":{v}\r\n").as_bytes(), None);
                            }
                        }
                        answered_joins += check_joined(&mut c, &mut waiting);
                    }
                    (c, waiting, joined, answered_joins)
                })
            })
            .collect();
        let mut total = (0, 0);
        // All done before any inbox is read: a thread still running may post to another's.
        let done: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        for (mut c, mut waiting, joined, mut answered_joins) in done {
            answered_joins += check_joined(&mut c, &mut waiting);
            assert!(
                waiting.is_empty(),
                "every joined read has its outcome: {} left of {joined}",
                waiting.len()
            );
            total.0 += joined;
            total.1 += answered_joins;
        }
        assert_eq!(store.shard(b"k").fills.len(), 0);
        // Not asserted > 0: whether threads meet on a fill depends on the scheduler.
        eprintln!("joined {}, answered by their fill {}", total.0, total.1);
    }

    /// Threads fill, read and write one key at random against a model node (a version
    /// number): once a write's reply has reached its client (its invalidation done), no read
    /// that starts later on any thread is answered with an older version.
    #[test]
    fn no_thread_reads_older_than_a_write_answered_before() {
        use std::sync::atomic::AtomicU64;
        let store = Arc::new(Store::new(1 << 20).with_threads(4));
        // The node's value, and the newest version whose writer has had its reply.
        let node = Arc::new(AtomicU64::new(0));
        let answered = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = (0..4)
            .map(|t| {
                let (store, node, answered) = (store.clone(), node.clone(), answered.clone());
                std::thread::spawn(move || {
                    let mut c = Cache::handle(store, t);
                    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 + 1);
                    for _ in 0..20_000 {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        let floor = answered.load(Ordering::SeqCst);
                        match seed % 10 {
                            0 => {
                                // A write through the proxy: dropped when sent, run on the
                                // node, dropped again when its reply comes.
                                c.invalidate(b"k");
                                let v = node.fetch_add(1, Ordering::SeqCst) + 1;
                                c.invalidate(b"k");
                                answered.fetch_max(v, Ordering::SeqCst);
                            }
                            _ => {
                                let now = Instant::now();
                                match c.get(b"k", b"get", Some(N), now, true, false) {
                                    Some(r) => {
                                        let v: u64 = std::str::from_utf8(&r[1..r.len() - 2])
                                            .unwrap()
                                            .parse()
                                            .unwrap();
                                        assert!(v >= floor, "read {v} after {floor} answered");
                                    }
                                    None => {
                                        let f = c.begin_fill(b"k", b"get".to_vec());
                                        let v = node.load(Ordering::SeqCst);
                                        assert!(v >= floor);
                                        c.finish_fill(f, N, format!(":{v}\r\n").as_bytes(), None);
                                    }
                                }
                            }
                        }
                    }
                    c.take_stats()
                })
            })
            .collect();
        let mut stats = CacheStats::default();
        for w in workers {
            stats.add(&w.join().unwrap());
        }
        assert!(stats.hits > 0 && stats.misses > 0, "{stats:?}");
    }
}
