//! One database of one shard, and the view through which commands use it.
//!
//! Every read goes through [`DbView::get`], which expires a key lazily: an expired key is never
//! returned by any command. Every write goes through a `DbView` method that also "touches" the
//! key: WATCHing clients are marked dirty here, in one place, so no command can forget to.

use crate::entry::Entry;
use crate::table::{Found, Table, Upsert, SCAN_END};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;

/// A WATCHing client's dirty flag; set when any watched key is modified.
pub type WatchFlag = Arc<AtomicBool>;

#[derive(Default)]
pub struct Db {
    table: Table,
    /// How many entries carry a TTL (INFO keyspace's `expires`).
    expires: usize,
    signals: Signals,
    /// Where the active expiry sweep resumes.
    sweep_at: usize,
    /// Statistics for INFO: keys expired (lazily or actively), read hits and misses.
    pub expired_total: u64,
    pub hits: u64,
    pub misses: u64,
    /// Big values that left the keyspace, to be freed off the request path (the server takes
    /// them with [`Db::take_graveyard`]).
    graveyard: Vec<Entry>,
    /// Keys of hashes that were given field TTLs and of sets that were given member TTLs,
    /// for the active cycle's field sweep (stale names are dropped when the sweep finds no
    /// such value), and where the sweep resumes.
    field_ttl_keys: Vec<Box<[u8]>>,
    field_ttl_set: HashSet<Box<[u8]>>,
    field_sweep_at: usize,
    /// Hash fields and set members removed because their TTL passed.
    pub expired_fields: u64,
    /// Keys that expiry leaves alone for now, TTL passed or not: a streamed reply is reading
    /// them (the server's stream.rs; few at a time, so a list). See [`Db::pin`].
    pinned: Vec<Box<[u8]>>,
    /// When expiry is frozen: for every access (CLIENT PAUSE), or for reads only (a replica).
    freeze: Freeze,
    /// Keys a writable replica's own clients gave a TTL (replica-read-only no), which it
    /// expires itself ([`Db::expire_replica_keys`]), as Redis's replicas do (its
    /// rememberSlaveKeyWithExpire / expireSlaveKeys): no DEL of the primary's will ever
    /// come for a key the primary never had. Names only; one found without a TTL is dropped
    /// by the sweep. Where the sweep resumes.
    replica_ttl_keys: Vec<Box<[u8]>>,
    replica_ttl_set: HashSet<Box<[u8]>>,
    replica_sweep_at: usize,
    /// Copies of sets without their members past their TTL, that a replica's client read
    /// (a replica removes no member itself: see [`shadow_of`]); valid until the next view.
    shadows: Vec<Entry>,
}

/// When a key whose TTL passed stays in place, shared with the server.
#[derive(Default)]
struct Freeze {
    /// Until when (unix ms) expiry is frozen for every access ([`Db::freeze_expiry_until`]).
    until: Option<Arc<AtomicI64>>,
    /// While set, this server follows a primary ([`Db::hold_expiry_while`]): reads and the
    /// active cycles leave expired keys in place; writes still reclaim them.
    held: Option<Arc<AtomicBool>>,
}

impl Freeze {
    /// Whether a read at `now_ms` leaves an expired key in place (it reads as missing).
    #[inline]
    fn for_reads(&self, now_ms: i64) -> bool {
        self.for_writes(now_ms) || self.held()
    }

    /// Whether expiry is the primary's (this server is a replica).
    #[inline]
    fn held(&self) -> bool {
        self.held
            .as_ref()
            .is_some_and(|h| h.load(Ordering::Relaxed))
    }

    /// Whether a write at `now_ms` leaves an expired key in place.
    #[inline]
    fn for_writes(&self, now_ms: i64) -> bool {
        self.until
            .as_ref()
            .is_some_and(|f| now_ms < f.load(Ordering::Relaxed))
    }
}

/// Values whose freeing costs more than this many element frees go to the graveyard (Redis's
/// LAZYFREE_THRESHOLD); smaller ones are freed on the spot.
pub const LAZYFREE_THRESHOLD: usize = 64;

/// Frees `e` now if that is cheap, or keeps it for the background.
fn bury(graveyard: &mut Vec<Entry>, e: Entry) {
    if e.free_effort() > LAZYFREE_THRESHOLD {
        graveyard.push(e);
    }
}

/// Who wants to know that a key was written: WATCHing clients, and clients blocked on the key
/// (BLPOP and friends; the server keeps them, this only knows which keys have some).
#[derive(Default)]
struct Signals {
    watchers: HashMap<Box<[u8]>, Vec<Watch>>,
    blocked: HashSet<Box<[u8]>>,
    /// Keys with blocked clients written since the server last looked ([`Db::take_ready`]).
    ready: Vec<Box<[u8]>>,
    /// Client tracking is in use on this shard: every written key is noted in `written`
    /// for the server to invalidate ([`Db::take_written`]).
    collect: bool,
    /// The same, set by another thread at any moment (a client turning on broadcast
    /// tracking): a write that starts after that client's +OK must be noted even if this
    /// thread has not run since ([`Db::collect_written_while`]).
    collect_shared: Arc<AtomicBool>,
    /// Written keys, each with whether its TTL removed it (an expiry has no writer: a NOLOOP
    /// client whose read found the key expired is still told).
    written: Vec<(Box<[u8]>, bool)>,
    /// Keyspace events for the server's notifications ([`Db::take_events`]).
    events: Events,
}

/// One client's WATCH of a key.
struct Watch {
    flag: WatchFlag,
    /// The key was present but past its TTL when WATCHed: its removal by expiry (or a
    /// flush) is no change (Redis: the key did not logically exist, and still does not).
    expired: bool,
}

thread_local! {
    /// Keys written on this thread so far ([`Signals::touch`]; not those their TTL removed).
    static KEYS_WRITTEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many times a key was written on this thread (a shard is a thread) since it started:
/// every change of a key's value or TTL, its creation and its deletion signal the key (as
/// Redis's signalModifiedKey, which WATCH relies on), and removals by TTL are not counted. A
/// write command during which this did not move changed nothing, so the server neither
/// counts it as a change (`rdb_changes_since_last_save`) nor writes it to the AOF, as Redis,
/// whose `server.dirty` does not move then (DEL of a missing key, SREM from a missing set).
/// A write may also signal its key without changing it (a mutable look-up signals before
/// the command knows): this counts what may have changed, never less.
pub fn keys_written() -> u64 {
    KEYS_WRITTEN.with(|c| c.get())
}

impl Signals {
    /// Marks the clients WATCHing `key` dirty (and forgets them: one write is enough), and
    /// notes the key as ready when clients are blocked on it.
    fn touch(&mut self, key: &[u8]) {
        KEYS_WRITTEN.with(|c| c.set(c.get() + 1));
        if !self.watchers.is_empty() {
            if let Some(list) = self.watchers.remove(key) {
                for w in list {
                    w.flag.store(true, Ordering::Relaxed);
                }
            }
        }
        self.touch_others(key);
    }

    /// What a write signals besides WATCH: blocked clients' readiness, tracking.
    fn touch_others(&mut self, key: &[u8]) {
        if !self.blocked.is_empty() && self.blocked.contains(key) {
            self.ready.push(key.into());
        }
        if self.collect || self.collect_shared.load(Ordering::Acquire) {
            self.written.push((key.into(), false));
        }
    }

    /// [`Signals::touch`] for a key (or fields) removed by its TTL.
    fn touch_expired(&mut self, key: &[u8]) {
        if !self.watchers.is_empty() {
            self.expire_watches(key);
        }
        let before = self.written.len();
        self.touch_others(key);
        if let Some(w) = self.written.get_mut(before) {
            w.1 = true;
        }
    }

    /// The watches of `key` when it goes by its TTL (or by a flush): a client that WATCHed it
    /// when it was already past its TTL sees no change and from now on watches an absent key;
    /// every other watcher is marked dirty and forgotten.
    fn expire_watches(&mut self, key: &[u8]) {
        let Some(list) = self.watchers.get_mut(key) else {
            return;
        };
        list.retain_mut(|w| {
            if w.expired {
                w.expired = false;
                true
            } else {
                w.flag.store(true, Ordering::Relaxed);
                false
            }
        });
        if list.is_empty() {
            self.watchers.remove(key);
        }
    }
}

/// A keyspace event that happens inside the engine rather than in a command's own code, for
/// the server's keyspace notifications (`notify-keyspace-events`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A key was removed because its TTL passed (found on access, or by the active cycle).
    Expired,
    /// A key was created (it held no live value before).
    New,
    /// A read found no live key.
    Miss,
    /// A hash lost fields to their TTL (in the active cycle, or on access: see
    /// [`DbView::record_event`]).
    FieldsExpired,
    /// A hash left empty by expired fields was deleted.
    Deleted,
    /// A key was evicted to keep memory under maxmemory ([`Db::evict`]).
    Evicted,
}

impl Event {
    /// This event's bit in the mask of wanted events.
    pub const fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// Which events to record (a mask of [`Event::bit`]s shared with the server's configuration,
/// read with one relaxed load) and those recorded since the server last took them. Unbound,
/// nothing is recorded.
#[derive(Default)]
struct Events {
    wanted: Option<Arc<AtomicU32>>,
    /// Set when an event is recorded (shared by the databases of one shard, so that the
    /// end of a loop turn learns with one load whether any of them has events).
    recorded: Option<Arc<AtomicBool>>,
    log: Vec<(Event, Box<[u8]>)>,
    /// While this flag is set, what TTLs remove (keys, hash fields, set members) is also
    /// noted in `expired`, in the order it goes ([`Db::log_expired_while`]: the server writes
    /// it to its AOF).
    expired_wanted: Option<&'static AtomicBool>,
    expired: Vec<Expired>,
}

/// What a TTL removed, for the AOF ([`Db::take_expired`]): a load replays the log with
/// nothing expiring, so each removal is written as the command that does it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expired {
    /// A key (DEL): one past its TTL, or a hash or set all of whose fields (members) were due
    /// at once and went whole.
    Key(Box<[u8]>),
    /// Fields of the hash at the key (HDEL, one per field, as Redis 7.4 propagates them).
    /// The last field of a hash takes the key with it, as HDEL does.
    Fields(Box<[u8]>, Vec<Box<[u8]>>),
    /// Members of the set at the key (SREM, one per member).
    Members(Box<[u8]>, Vec<Box<[u8]>>),
}

impl Events {
    /// Whether what TTLs remove is noted now ([`Db::log_expired_while`]).
    #[inline]
    fn logging_expired(&self) -> bool {
        self.expired_wanted
            .is_some_and(|w| w.load(Ordering::Relaxed))
    }

    /// Notes a removal by TTL (while noting them).
    fn log_expired(&mut self, what: Expired) {
        if self.logging_expired() {
            self.expired.push(what);
        }
    }

    #[inline]
    fn record(&mut self, ev: Event, key: &[u8]) {
        if ev == Event::Expired && self.logging_expired() {
            self.expired.push(Expired::Key(key.into()));
        }
        if let Some(w) = &self.wanted {
            if w.load(Ordering::Relaxed) & ev.bit() != 0 {
                self.log.push((ev, key.into()));
                if let Some(r) = &self.recorded {
                    r.store(true, Ordering::Relaxed);
                }
            }
        }
    }
}

/// Whether `key` is pinned ([`Db::pin`]): one emptiness test when nothing is.
#[inline]
fn is_pinned(pinned: &[Box<[u8]>], key: &[u8]) -> bool {
    !pinned.is_empty() && pinned.iter().any(|k| **k == *key)
}

/// Books a key found expired on access (the entry `e`, already out of the table): counts it
/// and marks its watchers. Takes the fields apart so callers can hold other borrows of the Db.
fn reclaimed(
    expires: &mut usize,
    expired_total: &mut u64,
    signals: &mut Signals,
    graveyard: &mut Vec<Entry>,
    key: &[u8],
    e: Entry,
) {
    *expires -= 1;
    *expired_total += 1;
    bury(graveyard, e);
    signals.touch_expired(key);
    signals.events.record(Event::Expired, key);
}

/// Lazy expiry of set members (SADDEX, FIELDEXPIRE): removes the members of the set in `e`
/// whose TTL has passed, before any command sees it. O(1) unless a member is due (one flag
/// test for an inline string). A set left empty is marked expired (the caller then reports the
/// key as missing): every path treats the key as gone, and the usual reclaiming (its next
/// lookup, or the active cycle) counts and frees it. Returns true when it did that.
fn expire_members(
    e: &mut Entry,
    now_ms: i64,
    expires: &mut usize,
    expired_fields: &mut u64,
    signals: &mut Signals,
    key: &[u8],
) -> bool {
    use crate::value::Value;
    // Only sets are swept here; `value_mut` would move a small inline hash out of line.
    if e.value_type() != crate::value::ValueType::Set {
        return false;
    }
    let emptied = match e.value_mut() {
        // Every member due: the set goes whole as an expired key (its members are freed in
        // steps with it, not removed one by one here).
        Some(Value::Set(s)) if s.all_due(now_ms) => {
            *expired_fields += s.len() as u64;
            true
        }
        Some(Value::Set(s)) if s.due(now_ms) => {
            // `due` may be a stale bound: then nothing goes and nothing is signalled.
            let log = signals.events.logging_expired();
            let mut names: Vec<Box<[u8]>> = Vec::new();
            let gone = s.remove_all_expired_with(now_ms, &mut |m| {
                if log {
                    names.push(m.into())
                }
            });
            if gone == 0 {
                return false;
            }
            *expired_fields += gone as u64;
            // A set left empty goes as an expired key: its reclaiming writes DEL, which
            // stands for these members' SREMs too.
            let empty = s.is_empty();
            if !empty {
                signals
                    .events
                    .log_expired(Expired::Members(key.into(), names));
            }
            empty
        }
        _ => return false,
    };
    signals.touch_expired(key);
    if emptied {
        if e.expire().is_none() {
            *expires += 1;
        }
        e.set_expire(Some(now_ms.saturating_sub(1)));
    }
    emptied
}

/// What a client's read on a replica sees of the set in `e`, whose members past their TTL
/// stay until the primary's SREM (as hash fields do in Redis 7.4, whose replicas delete no
/// field themselves): None when no member is due (read `e` itself), else a copy without
/// them (Some(None): none left, the key reads as missing). The copy costs O(n), and only
/// while the primary's SREMs are on their way.
fn shadow_of(e: &Entry, now_ms: i64) -> Option<Option<Entry>> {
    use crate::value::Value;
    match e.value() {
        crate::ValueRef::Set(s) if s.due(now_ms) => {}
        _ => return None,
    }
    let mut copy = e.clone_as(e.key());
    let gone = match copy.value_mut() {
        Some(Value::Set(s)) => {
            let gone = s.remove_all_expired(now_ms);
            if s.is_empty() {
                return Some(None);
            }
            gone
        }
        _ => 0,
    };
    (gone > 0).then_some(Some(copy))
}

/// Whether every field of the hash, or member of the set, in `e` has a TTL that has passed
/// (O(1); false when unsure).
fn all_elements_due(e: &Entry, now_ms: i64) -> bool {
    use crate::ValueRef;
    match e.value() {
        ValueRef::Hash(h) => h.all_due(now_ms),
        ValueRef::Set(s) => s.all_due(now_ms),
        _ => false,
    }
}

/// How many fields or members the hash or set in `e` holds.
fn element_count(e: &Entry) -> usize {
    use crate::ValueRef;
    match e.value() {
        ValueRef::Hash(h) => h.len(),
        ValueRef::Set(s) => s.len(),
        _ => 0,
    }
}

/// Whether the value of `e` has hash fields or set members with a TTL (such a key belongs in
/// the field-sweep registry, whatever path stored it: COPY, RENAME, MOVE ...).
fn has_field_ttls(e: &Entry) -> bool {
    match e.value() {
        crate::entry::ValueRef::Set(s) => s.has_ttls(),
        crate::entry::ValueRef::Hash(h) => h.has_ttls(),
        _ => false,
    }
}

/// The time and access clock a command runs with.
#[derive(Clone, Copy, Debug, Default)]
pub struct Clock {
    /// Unix time in milliseconds.
    pub now_ms: i64,
    /// Seconds, wrapping: the LRU clock stored in entries.
    pub lru: u16,
    /// Whether reads update the access clock (false for CLIENT NO-TOUCH clients).
    pub touch: bool,
    /// Under an LFU policy: its parameters, and `lru` is a new key's counter (access.rs).
    pub lfu: Option<crate::access::Lfu>,
    /// The command comes from this replica's primary: no key counts as expired, as for
    /// Redis's master client (the primary, which ran it first, found the keys live; only its
    /// DEL removes a key here).
    pub from_primary: bool,
}

impl Clock {
    #[inline]
    pub fn at(now_ms: i64) -> Clock {
        let lfu = crate::access::lfu_at(now_ms);
        Clock {
            now_ms,
            lru: match lfu {
                Some(l) => l.init(),
                None => ((now_ms / 1000) & 0xffff) as u16,
            },
            touch: true,
            lfu,
            from_primary: false,
        }
    }

    /// The time TTLs are compared with: never reached for a command from the primary.
    #[inline]
    pub fn ttl_now(&self) -> i64 {
        if self.from_primary {
            i64::MIN
        } else {
            self.now_ms
        }
    }

    /// An entry's access clock after an access (LRU: now; LFU: its counter incremented).
    #[inline]
    pub fn touched(&self, old: u16) -> u16 {
        match self.lfu {
            None => self.lru,
            Some(l) => l.touched(old),
        }
    }

    /// How evictable an entry's clock makes it under the current mode, higher first: its
    /// idle seconds (LRU), or 255 minus its decayed counter (LFU), as Redis's pool ranks.
    pub fn eviction_score(&self, entry_clock: u16) -> u64 {
        match self.lfu {
            None => self.idle_secs(entry_clock),
            Some(l) => 255 - l.counter(entry_clock) as u64,
        }
    }

    /// Seconds since an entry's access clock.
    pub fn idle_secs(&self, entry_clock: u16) -> u64 {
        self.lru.wrapping_sub(entry_clock) as u64
    }
}

impl Db {
    pub fn new() -> Db {
        Db::default()
    }

    /// Sizes an empty keyspace for about `n` keys (see [`Table::reserve`]).
    pub fn reserve(&mut self, n: usize) {
        self.table.reserve(n);
    }

    /// Keys, counting expired keys not yet reclaimed (as Redis's DBSIZE does).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Hints the CPU to load the bucket of `key` (pipelined commands overlap their misses);
    /// returns the key's hash for [`Db::prefetch_entry`].
    pub fn prefetch(&self, key: &[u8]) -> u64 {
        self.table.prefetch(key)
    }

    /// Second step of a prefetch: the entry the bucket points at.
    pub fn prefetch_entry(&self, hash: u64) {
        self.table.prefetch_entry(hash);
    }

    pub fn expires(&self) -> usize {
        self.expires
    }

    /// Bytes of the keyspace table's own structure (see [`Table::overhead`]).
    pub fn table_overhead(&self) -> usize {
        self.table.overhead()
    }

    /// Every entry present, logically expired ones not yet reclaimed included, without
    /// touching anything (DEBUG DIGEST, which in Redis walks the table as it is).
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.table.iter()
    }

    /// One step of a walk over every entry present, logically expired ones included, in SCAN
    /// order from position `cursor` (0 starts; [`SCAN_DONE`] means done), visiting roughly
    /// `count` entries; returns where to resume. Touches nothing: a snapshot (which, like
    /// Redis's, writes expired keys with their TTL and lets the loading side drop them).
    pub fn scan_all(&self, cursor: u64, count: usize, f: impl FnMut(&Entry)) -> u64 {
        self.table.scan(cursor, count, f)
    }

    /// The keys of the hashes and sets registered as having field (member) TTLs, stale names
    /// included (a snapshot checks each one to know whether the file needs RDB 12).
    pub fn field_ttl_keys(&self) -> impl Iterator<Item = &[u8]> {
        self.field_ttl_keys.iter().map(|k| &k[..])
    }

    /// The entry of `key` if present, even logically expired, without touching it (DEBUG
    /// DIGEST-VALUE works on logically expired keys in Redis).
    pub fn entry_raw(&self, key: &[u8]) -> Option<&Entry> {
        self.table.get(key)
    }

    /// Notes that clients are blocked on `key` (writes to it will make it ready).
    pub fn block_on(&mut self, key: &[u8]) {
        if !self.signals.blocked.contains(key) {
            self.signals.blocked.insert(key.into());
        }
    }

    /// No client is blocked on `key` any more.
    pub fn unblock(&mut self, key: &[u8]) {
        self.signals.blocked.remove(key);
    }

    /// Puts back a key [`Db::take_ready`] gave but that could not be served yet (a
    /// transaction holds it): it is given again by the next call.
    pub fn requeue_ready(&mut self, key: Box<[u8]>) {
        self.signals.ready.push(key);
    }

    /// Keys with blocked clients written since the last call, in the order of the writes
    /// (repeats possible).
    pub fn take_ready(&mut self) -> Option<Vec<Box<[u8]>>> {
        if self.signals.ready.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.signals.ready))
        }
    }

    /// Pins `key`: until [`Db::unpin`], neither its TTL nor its fields' or members' TTLs remove
    /// anything from it (lazily or in the active cycle). Why: a streamed reply (HGETALL of a
    /// big hash, ...) reads the value over many loop turns as the snapshot of the moment it
    /// started, and commands that touch the key wait for it; expiry is the one thing that
    /// would otherwise change the value under it. A key whose time passed meanwhile expires
    /// at its first access or sweep after the unpin. Pins nest (one per stream).
    pub fn pin(&mut self, key: &[u8]) {
        self.pinned.push(key.into());
    }

    /// Takes back one [`Db::pin`] of `key`.
    pub fn unpin(&mut self, key: &[u8]) {
        if let Some(i) = self.pinned.iter().position(|k| **k == *key) {
            self.pinned.swap_remove(i);
        }
    }

    /// How many hashes and sets are known to have field or member TTLs.
    pub fn field_ttl_hashes(&self) -> usize {
        self.field_ttl_keys.len()
    }

    /// One step of the active field-expiry cycle: visits up to `keys` hashes and sets that
    /// have field (member) TTLs and removes their expired fields (a bounded number of buckets
    /// each); a value left empty is deleted. Returns (keys visited, fields removed).
    pub fn active_expire_fields(&mut self, now_ms: i64, keys: usize) -> (usize, usize) {
        use crate::value::Value;
        let mut visited = 0;
        let mut removed = 0;
        if self.freeze.for_reads(now_ms) {
            return (0, 0);
        }
        while visited < keys && !self.field_ttl_keys.is_empty() {
            if self.field_sweep_at >= self.field_ttl_keys.len() {
                self.field_sweep_at = 0;
            }
            let i = self.field_sweep_at;
            visited += 1;
            let key = self.field_ttl_keys[i].clone();
            if is_pinned(&self.pinned, &key) {
                self.field_sweep_at += 1;
                continue;
            }
            // The names of the fields (members) removed, for the AOF while it is on.
            let log = self.signals.events.logging_expired();
            let mut names: Vec<Box<[u8]>> = Vec::new();
            let mut note = |f: &[u8]| {
                if log {
                    names.push(f.into())
                }
            };
            let (gone, empty, keep) = match self.table.get_mut(&key) {
                // Every field (member) due: the value goes whole, freed in steps from the
                // graveyard like an expired key's (and written as DEL).
                Some(e) if !e.is_expired(now_ms) && all_elements_due(e, now_ms) => {
                    self.signals.events.log_expired(Expired::Key(key.clone()));
                    (element_count(e), true, false)
                }
                // Through the guard: a small hash stays inline in its entry.
                Some(e)
                    if !e.is_expired(now_ms) && e.value_type() == crate::value::ValueType::Hash =>
                {
                    match e.hash_mut() {
                        Some(mut h) => {
                            let gone = h.remove_expired_with(now_ms, 16, &mut note);
                            if gone > 0 {
                                let f = std::mem::take(&mut names);
                                self.signals
                                    .events
                                    .log_expired(Expired::Fields(key.clone(), f));
                            }
                            (gone, h.is_empty(), h.has_ttls())
                        }
                        None => (0, false, false),
                    }
                }
                Some(e) if !e.is_expired(now_ms) => match e.value_mut() {
                    // As for hashes: a few buckets of the set's table a step. A set they
                    // leave empty goes with its last SREM, as SREM's would.
                    Some(Value::Set(s)) => {
                        let gone = s.remove_expired_with(now_ms, 16, &mut note);
                        if gone > 0 {
                            let m = std::mem::take(&mut names);
                            self.signals
                                .events
                                .log_expired(Expired::Members(key.clone(), m));
                        }
                        (gone, s.is_empty(), s.has_ttls())
                    }
                    _ => (0, false, false),
                },
                _ => (0, false, false),
            };
            removed += gone;
            self.expired_fields += gone as u64;
            if gone > 0 {
                self.signals.events.record(Event::FieldsExpired, &key);
            }
            if empty {
                self.signals.events.record(Event::Deleted, &key);
                if let Some(e) = self.table.remove(&key) {
                    if e.expire().is_some() {
                        self.expires -= 1;
                    }
                    bury(&mut self.graveyard, e);
                }
            }
            if gone > 0 {
                self.signals.touch_expired(&key);
            }
            if keep && !empty {
                self.field_sweep_at += 1;
            } else {
                self.field_ttl_keys.swap_remove(i);
                self.field_ttl_set.remove(&key);
            }
        }
        (visited, removed)
    }

    /// The big values freed since the last call, for the server to drop in steps.
    pub fn take_graveyard(&mut self) -> Option<Vec<Entry>> {
        if self.graveyard.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.graveyard))
        }
    }

    /// Turns on (or off) the noting of written keys, for client tracking's invalidations.
    pub fn collect_written(&mut self, on: bool) {
        self.signals.collect = on;
        if !on {
            self.signals.written.clear();
        }
    }

    /// Also notes written keys while `flag` is set, whatever [`Db::collect_written`] says: a
    /// flag another thread may set at any moment, and the write after it is still noted.
    pub fn collect_written_while(&mut self, flag: Arc<AtomicBool>) {
        self.signals.collect_shared = flag;
    }

    /// Keys written (changed, deleted or expired) since the last call, while collecting, each
    /// with whether its TTL removed it.
    pub fn take_written(&mut self) -> Vec<(Box<[u8]>, bool)> {
        std::mem::take(&mut self.signals.written)
    }

    pub fn has_written(&self) -> bool {
        !self.signals.written.is_empty()
    }

    pub fn view(&mut self, clock: Clock) -> DbView<'_> {
        if !self.shadows.is_empty() {
            self.shadows.clear();
        }
        DbView {
            db: self,
            clock,
            created: None,
        }
    }

    fn touch(&mut self, key: &[u8]) {
        self.signals.touch(key);
    }

    /// Registers a WATCH on `key` and tells whether the key is live at `now_ms`. Nothing is
    /// removed: a key past its TTL stays until something else finds it, and its removal by
    /// expiry will be no change for this watch (Redis's rule).
    pub fn watch(&mut self, key: &[u8], flag: WatchFlag, now_ms: i64) -> bool {
        let (live, expired) = match self.table.get(key) {
            Some(e) if e.is_expired(now_ms) => (false, true),
            Some(_) => (true, false),
            None => (false, false),
        };
        let list = self.signals.watchers.entry(key.into()).or_default();
        // Drop registrations of clients that are gone or already unwatched.
        list.retain(|w| Arc::strong_count(&w.flag) > 1);
        list.push(Watch { flag, expired });
        live
    }

    /// Whether some client WATCHes `key` (a script that may be undone and re-run does not
    /// write such a key before it holds every shard: an undone write would still have
    /// failed that client's EXEC).
    pub fn has_watchers(&self, key: &[u8]) -> bool {
        !self.signals.watchers.is_empty() && self.signals.watchers.contains_key(key)
    }

    /// Forgets watches whose clients are gone (called from the periodic cycle).
    pub fn prune_watchers(&mut self) {
        self.signals.watchers.retain(|_, list| {
            list.retain(|w| Arc::strong_count(&w.flag) > 1);
            !list.is_empty()
        });
    }

    /// SWAPDB: exchanges the keys of `a` and `b` (with their TTL and field-TTL bookkeeping).
    /// What belongs to the database index stays: WATCHes, blocked clients, statistics. As in
    /// Redis, a watched key of either database whose value changes under its name (it is
    /// live in either database at `now_ms`) marks its watchers dirty, and a key that clients
    /// are blocked on and that exists in either database is signalled ready: the server
    /// serves them if its new value suits them, and tells a blocked XREADGROUP whose stream
    /// went (Redis 7.2 signals a key that vanished or changed as deleted).
    pub fn swap(a: &mut Db, b: &mut Db, now_ms: i64) {
        let touched_a = a.watched_live_in(a, b, now_ms);
        let touched_b = b.watched_live_in(b, a, now_ms);
        a.mark_watchers(touched_a);
        b.mark_watchers(touched_b);
        a.signal_blocked_in(b);
        b.signal_blocked_in(a);
        std::mem::swap(&mut a.table, &mut b.table);
        std::mem::swap(&mut a.expires, &mut b.expires);
        std::mem::swap(&mut a.sweep_at, &mut b.sweep_at);
        std::mem::swap(&mut a.field_ttl_keys, &mut b.field_ttl_keys);
        std::mem::swap(&mut a.field_ttl_set, &mut b.field_ttl_set);
        std::mem::swap(&mut a.field_sweep_at, &mut b.field_sweep_at);
    }

    /// SWAPDB of a database with itself (Redis allows it): its watched keys that are live
    /// count as changed.
    pub fn swap_with_itself(&mut self, now_ms: i64) {
        let touched = self.watched_live_in(self, self, now_ms);
        self.mark_watchers(touched);
    }

    /// The keys watched in `self` that are live in `x` or in `y`.
    fn watched_live_in(&self, x: &Db, y: &Db, now_ms: i64) -> Vec<Box<[u8]>> {
        let live = |db: &Db, k: &[u8]| db.table.get(k).is_some_and(|e| !e.is_expired(now_ms));
        self.signals
            .watchers
            .keys()
            .filter(|k| live(x, k) || live(y, k))
            .cloned()
            .collect()
    }

    fn mark_watchers(&mut self, keys: Vec<Box<[u8]>>) {
        for k in keys {
            if let Some(list) = self.signals.watchers.remove(&k) {
                for w in list {
                    w.flag.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    /// Signals ready every key with blocked clients that exists here or in `other`.
    fn signal_blocked_in(&mut self, other: &Db) {
        for k in &self.signals.blocked {
            if self.table.get(k).is_some() || other.table.get(k).is_some() {
                self.signals.ready.push(k.clone());
            }
        }
    }

    /// Starts a fork-less snapshot of this database as it is now (BGSAVE): every entry goes
    /// to `sink` once, as it was at this moment, through [`Db::snapshot_step`] and the guards
    /// of the writes that change it first ([`Table::snapshot_begin`]). Entries past their TTL
    /// go too: the sink decides (a loader drops them).
    pub fn snapshot_begin(&mut self, sink: crate::table::SnapshotSink) {
        self.table.snapshot_begin(sink);
    }

    /// Ends the snapshot in progress unwritten (see [`Table::snapshot_abort`]).
    pub fn snapshot_abort(&mut self) {
        self.table.snapshot_abort();
    }

    /// The sink wrote the big value of `key` it had taken for later (see
    /// [`crate::table::SnapshotSink`]).
    pub fn snapshot_undefer(&mut self, key: &[u8]) {
        self.table.snapshot_undefer(key);
    }

    /// Hands `key` to the snapshot's sink ahead of its cursor, not forced; true when the sink
    /// took it for later (see [`Table::snapshot_take`]).
    pub fn snapshot_take(&mut self, key: &[u8]) -> bool {
        self.table.snapshot_take(key)
    }

    /// Writes about `count` more entries of the snapshot in progress; true once its cursor
    /// is through (see [`Table::snapshot_step`]).
    pub fn snapshot_step(&mut self, count: usize) -> bool {
        self.table.snapshot_step(count)
    }

    /// Whether a snapshot of this database's table is in progress. (A table flushed while
    /// one was keeps it, and finishes it as it is freed.)
    pub fn snapshot_active(&self) -> bool {
        self.table.snapshot_active()
    }

    /// Empties the database, marking watchers of existing keys dirty and signalling the keys
    /// clients are blocked on that existed as ready (as Redis 7.2 signals them deleted: a
    /// blocked XREADGROUP is told its stream went; other waiters find nothing and wait on).
    /// Returns the old table so the caller can free a big one off the request path.
    pub fn flush(&mut self) -> Table {
        for k in &self.signals.blocked {
            if self.table.get(k).is_some() {
                self.signals.ready.push(k.clone());
            }
        }
        if !self.signals.watchers.is_empty() {
            let keys: Vec<Box<[u8]>> = self.signals.watchers.keys().cloned().collect();
            for k in keys {
                if self.table.get(&k).is_some() {
                    // A watch of a key that was already past its TTL sees no change.
                    self.signals.expire_watches(&k);
                    self.signals.touch_others(&k);
                }
            }
        }
        self.expires = 0;
        self.sweep_at = 0;
        // Redis forgets its replica-owned keys on FLUSHALL and on a full sync's load; a
        // FLUSHDB leaves names its sweep drops a tick later: forgetting them here is the same.
        self.replica_ttl_keys = Vec::new();
        self.replica_ttl_set = HashSet::new();
        self.replica_sweep_at = 0;
        std::mem::take(&mut self.table)
    }

    /// Calls `f` with up to `want` live entries from a random place (`r`), only those with
    /// a TTL when `volatile` (the eviction sampler; see [`Table::sample`]). Pinned keys
    /// (being streamed) are skipped. Returns how many `f` saw.
    pub fn sample(
        &self,
        r: u64,
        want: usize,
        volatile: bool,
        now_ms: i64,
        mut f: impl FnMut(&Entry),
    ) -> usize {
        if self.table.is_empty() || (volatile && self.expires == 0) {
            return 0;
        }
        // Buckets hold 4-6 entries; volatile keys may be rare among all: look further.
        let max_buckets = if volatile { 64 } else { want.max(1) };
        self.table.sample(r, want, max_buckets, |e| {
            let ok = (!volatile || e.expire().is_some())
                && !e.is_expired(now_ms)
                && !is_pinned(&self.pinned, e.key());
            if ok {
                f(e);
            }
            ok
        })
    }

    /// One live entry picked at random (`r`), only one with a TTL when `volatile`, not a
    /// pinned one: RANDOMKEY's pick, which finds an entry however sparse the table is (a
    /// bucket sample may land on empty buckets only), tried a few times against expired,
    /// pinned or TTL-less picks.
    pub fn random_entry(&self, mut r: u64, volatile: bool, now_ms: i64) -> Option<&Entry> {
        if volatile && self.expires == 0 {
            return None;
        }
        for _ in 0..16 {
            let e = self.table.random(r)?;
            if (!volatile || e.expire().is_some())
                && !e.is_expired(now_ms)
                && !is_pinned(&self.pinned, e.key())
            {
                return Some(e);
            }
            r = r
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        }
        None
    }

    /// Evicts `key` (maxmemory): removes it whatever its TTL, marks its watchers, notes it
    /// for tracking's invalidations, records the `evicted` event, and frees its value (big
    /// values in steps, through the graveyard). False if absent or pinned (a streamed reply
    /// is reading it).
    pub fn evict(&mut self, key: &[u8]) -> bool {
        if is_pinned(&self.pinned, key) {
            return false;
        }
        let Some(e) = self.table.remove(key) else {
            return false;
        };
        if e.expire().is_some() {
            self.expires -= 1;
        }
        self.touch(key);
        self.signals.events.record(Event::Evicted, key);
        bury(&mut self.graveyard, e);
        true
    }

    /// One step of the active expiry cycle: removes expired keys from about `budget` entries.
    /// Returns (entries visited, keys expired).
    pub fn active_expire(&mut self, now_ms: i64, budget: usize) -> (usize, usize) {
        if self.expires == 0 || self.freeze.for_reads(now_ms) {
            return (0, 0);
        }
        let mut expired_keys: Vec<Entry> = Vec::new();
        let (next, visited) = self.table.sweep(
            self.sweep_at,
            budget,
            |e| e.is_expired(now_ms) && !is_pinned(&self.pinned, e.key()),
            |e| expired_keys.push(e),
        );
        self.sweep_at = next;
        let n = expired_keys.len();
        self.expires -= n;
        self.expired_total += n as u64;
        for e in expired_keys {
            self.signals.touch_expired(e.key());
            self.signals.events.record(Event::Expired, e.key());
            bury(&mut self.graveyard, e);
        }
        (visited, n)
    }
}

impl Db {
    /// The copy a replica's client read of `key` made ([`shadow_of`]), if any.
    fn shadow(&self, key: &[u8]) -> Option<&Entry> {
        self.shadows.iter().rev().find(|e| e.key() == key)
    }

    /// How many keys this replica's own clients gave a TTL it expires itself (INFO's
    /// `slave_expires_tracked_keys`, stale names not swept yet included, as Redis counts).
    pub fn replica_ttl_keys(&self) -> usize {
        self.replica_ttl_keys.len()
    }

    /// The replica's own active expiry: visits up to `keys` of the keys its clients gave a
    /// TTL ([`Db::replica_ttl_keys`]) and removes those past it, as the active cycle would
    /// (counted in `expired_total`, written as DEL); a name whose key has no TTL any more is
    /// forgotten. Nothing while a pause freezes expiry, nor for a primary (whose active
    /// cycle expires every key). Returns (keys visited, keys expired).
    pub fn expire_replica_keys(&mut self, now_ms: i64, keys: usize) -> (usize, usize) {
        let (mut visited, mut expired) = (0, 0);
        if !self.freeze.held() || self.freeze.for_writes(now_ms) {
            return (0, 0);
        }
        // Each name at most once a call.
        let keys = keys.min(self.replica_ttl_keys.len());
        while visited < keys && !self.replica_ttl_keys.is_empty() {
            if self.replica_sweep_at >= self.replica_ttl_keys.len() {
                self.replica_sweep_at = 0;
            }
            let i = self.replica_sweep_at;
            visited += 1;
            let key = &self.replica_ttl_keys[i];
            let due = match self.table.get(key) {
                // Not due yet, or read by a streamed reply now: looked at again next tick.
                Some(e)
                    if e.expire().is_some()
                        && (!e.is_expired(now_ms) || is_pinned(&self.pinned, key)) =>
                {
                    self.replica_sweep_at += 1;
                    continue;
                }
                Some(e) => e.expire().is_some(),
                None => false,
            };
            let key = self.replica_ttl_keys.swap_remove(i);
            self.replica_ttl_set.remove(&key);
            if due {
                if let Some(e) = self.table.remove(&key) {
                    expired += 1;
                    reclaimed(
                        &mut self.expires,
                        &mut self.expired_total,
                        &mut self.signals,
                        &mut self.graveyard,
                        &key,
                        e,
                    );
                }
            }
        }
        (visited, expired)
    }

    /// Binds the time (unix ms, shared with the server) until which expiry is frozen: while
    /// it is ahead, a key whose TTL passed is neither removed on access (it reads as
    /// missing) nor by the active cycle, so nothing is written (CLIENT PAUSE, as Redis
    /// freezes expiry during a pause).
    pub fn freeze_expiry_until(&mut self, until: Arc<AtomicI64>) {
        self.freeze.until = Some(until);
    }

    /// Binds the flag (shared with the server) that is set while this server is a replica:
    /// a key whose TTL passed then reads as missing but stays (the active cycles skip it too)
    /// until the primary's DEL removes it, or a write to the key reclaims it, as a Redis
    /// replica leaves expiring to its primary.
    pub fn hold_expiry_while(&mut self, held: Arc<AtomicBool>) {
        self.freeze.held = Some(held);
    }

    /// Has this database record the [`Event`]s whose bits are set in `wanted` (the server
    /// keeps the mask current as its configuration changes), and set `recorded` when it
    /// records one (the caller clears it when it takes the events).
    pub fn record_events(&mut self, wanted: Arc<AtomicU32>, recorded: Arc<AtomicBool>) {
        self.signals.events.wanted = Some(wanted);
        self.signals.events.recorded = Some(recorded);
    }

    /// Whether `ev` is recorded now.
    pub fn want(&self, ev: Event) -> bool {
        self.signals
            .events
            .wanted
            .as_ref()
            .is_some_and(|w| w.load(Ordering::Relaxed) & ev.bit() != 0)
    }

    /// Notes what TTLs remove while `flag` is set: keys, hash fields and set members, lazily
    /// or by the active cycles, in the order they go ([`Db::take_expired`]).
    pub fn log_expired_while(&mut self, flag: &'static AtomicBool) {
        self.signals.events.expired_wanted = Some(flag);
    }

    /// What TTLs removed since the last call (while noting it), oldest first.
    pub fn take_expired(&mut self) -> Vec<Expired> {
        if self.signals.events.expired.is_empty() {
            Vec::new()
        } else {
            std::mem::take(&mut self.signals.events.expired)
        }
    }

    /// The events recorded since the last call, oldest first.
    pub fn take_events(&mut self) -> Option<Vec<(Event, Box<[u8]>)>> {
        if self.signals.events.log.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.signals.events.log))
        }
    }
}

/// A database seen at one instant by one command.
pub struct DbView<'a> {
    db: &'a mut Db,
    pub clock: Clock,
    /// Under LFU, the hash of the key this view last created: a command that creates a key
    /// and then edits it (HSET, RPUSH ... on a new key) counts no access to it, as in Redis
    /// where the new value is written once.
    created: Option<u64>,
}

impl<'a> DbView<'a> {
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms
    }

    /// The live entry for `key`, reclaiming it first if it has expired (which counts as a
    /// modification for WATCH), unless expiry is frozen for this kind of access (`write`).
    /// One hash and one probe.
    fn live(&mut self, key: &[u8], write: bool) -> Option<&mut Entry> {
        let now = self.clock.ttl_now();
        let db = &mut *self.db;
        let freeze = &db.freeze;
        let frozen = |t| {
            if write {
                freeze.for_writes(t)
            } else {
                freeze.for_reads(t)
            }
        };
        // A replica's client reads members past their TTL as gone but removes none.
        let shadow = !write && !self.clock.from_primary && db.freeze.held();
        match db.table.find_live(key, now, &db.pinned, frozen) {
            Found::Live(e) if shadow && !db.field_ttl_keys.is_empty() => match shadow_of(e, now) {
                None => Some(e),
                Some(None) => None,
                Some(Some(copy)) => {
                    db.shadows.push(copy);
                    db.shadows.last_mut()
                }
            },
            Found::Live(e) => {
                // Why the registry test: a database without field TTLs pays one comparison.
                if !db.field_ttl_keys.is_empty()
                    && !is_pinned(&db.pinned, key)
                    && expire_members(
                        e,
                        now,
                        &mut db.expires,
                        &mut db.expired_fields,
                        &mut db.signals,
                        key,
                    )
                {
                    return None;
                }
                Some(e)
            }
            Found::Missing | Found::Frozen => None,
            Found::Expired(e) => {
                reclaimed(
                    &mut db.expires,
                    &mut db.expired_total,
                    &mut db.signals,
                    &mut db.graveyard,
                    key,
                    e,
                );
                None
            }
        }
    }

    /// A live entry; updates its access clock and the hit/miss counters.
    pub fn get(&mut self, key: &[u8]) -> Option<&Entry> {
        self.lookup(key, true)
    }

    /// Like [`DbView::get`], but the members of a set whose TTL passed are left in place: for
    /// a caller that reads named members only and skips the expired ones itself
    /// ([`crate::types::Set::contains_at`]), so that SISMEMBER pays nothing for members
    /// that came due (their removal is the active cycle's or the next whole-set read's).
    pub fn get_point(&mut self, key: &[u8]) -> Option<&Entry> {
        self.lookup(key, false)
    }

    /// [`DbView::get_point`], with the lifetime of the view's database.
    pub fn into_get_point(mut self, key: &[u8]) -> Option<&'a Entry> {
        self.get_point(key)?;
        let db: &'a Db = self.db;
        db.table.get(key)
    }

    fn lookup(&mut self, key: &[u8], sweep_members: bool) -> Option<&Entry> {
        let (clock, touch, now) = (self.clock, self.clock.touch, self.clock.ttl_now());
        let db = &mut *self.db;
        let freeze = &db.freeze;
        // A replica's client reads members past their TTL as gone but removes none.
        let shadow = sweep_members && !clock.from_primary && freeze.held();
        match db
            .table
            .find_live(key, now, &db.pinned, |t| freeze.for_reads(t))
        {
            Found::Live(e) if shadow && !db.field_ttl_keys.is_empty() => {
                if touch {
                    e.set_clock(clock.touched(e.clock()));
                }
                match shadow_of(e, now) {
                    None => {
                        db.hits += 1;
                        Some(e)
                    }
                    Some(None) => {
                        db.misses += 1;
                        db.signals.events.record(Event::Miss, key);
                        None
                    }
                    Some(Some(copy)) => {
                        db.hits += 1;
                        db.shadows.push(copy);
                        db.shadows.last()
                    }
                }
            }
            Found::Live(e) => {
                // Why the registry test: a database without field TTLs pays one comparison.
                if sweep_members
                    && !db.field_ttl_keys.is_empty()
                    && !is_pinned(&db.pinned, key)
                    && expire_members(
                        e,
                        now,
                        &mut db.expires,
                        &mut db.expired_fields,
                        &mut db.signals,
                        key,
                    )
                {
                    db.misses += 1;
                    return None;
                }
                db.hits += 1;
                if touch {
                    e.set_clock(clock.touched(e.clock()));
                }
                Some(e)
            }
            Found::Missing | Found::Frozen => {
                db.misses += 1;
                db.signals.events.record(Event::Miss, key);
                None
            }
            Found::Expired(e) => {
                db.misses += 1;
                reclaimed(
                    &mut db.expires,
                    &mut db.expired_total,
                    &mut db.signals,
                    &mut db.graveyard,
                    key,
                    e,
                );
                db.signals.events.record(Event::Miss, key);
                None
            }
        }
    }

    /// A live entry without updating its access clock (OBJECT, TYPE-like introspection, TTL).
    pub fn peek(&mut self, key: &[u8]) -> Option<&Entry> {
        self.live(key, false).map(|e| &*e)
    }

    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.live(key, false).is_some()
    }

    /// A live entry to modify in place. Counts as a write: watchers are marked dirty. The
    /// caller must not change the entry's TTL through it (use [`DbView::set_expire`]).
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let (clock, now) = (self.clock, self.clock.ttl_now());
        let fresh = self.just_created(key);
        let db = &mut *self.db;
        let freeze = &db.freeze;
        match db
            .table
            .find_live(key, now, &db.pinned, |t| freeze.for_writes(t))
        {
            Found::Live(e) => {
                // Why the registry test: a database without field TTLs pays one comparison.
                if !db.field_ttl_keys.is_empty()
                    && !is_pinned(&db.pinned, key)
                    && expire_members(
                        e,
                        now,
                        &mut db.expires,
                        &mut db.expired_fields,
                        &mut db.signals,
                        key,
                    )
                {
                    return None;
                }
                db.signals.touch(key);
                if !fresh {
                    e.set_clock(clock.touched(e.clock()));
                }
                Some(e)
            }
            Found::Missing | Found::Frozen => None,
            Found::Expired(e) => {
                reclaimed(
                    &mut db.expires,
                    &mut db.expired_total,
                    &mut db.signals,
                    &mut db.graveyard,
                    key,
                    e,
                );
                None
            }
        }
    }

    /// Stores `entry` under a key that holds nothing, expired or not: loading a file, where a
    /// key already there is an error. One table probe, where a lookup then [`DbView::set`]
    /// took two (a tenth of a load's CPU). Gives `entry` back, nothing stored, if the key is
    /// there.
    pub fn set_absent(&mut self, entry: Entry) -> Result<(), Entry> {
        let has_ttl = entry.expire().is_some();
        let field_ttls = has_field_ttls(&entry);
        let created = self.clock.lfu.map(|_| crate::table::hash_key(entry.key()));
        let key = (field_ttls || self.db.want(Event::New)).then(|| entry.key().to_vec());
        self.db.touch(entry.key());
        self.db.table.insert_absent(entry)?;
        if has_ttl {
            self.db.expires += 1;
        }
        if let Some(k) = key {
            if field_ttls {
                self.note_field_ttls(&k);
            }
            if self.db.want(Event::New) {
                self.db.signals.events.record(Event::New, &k);
            }
        }
        self.created = created;
        Ok(())
    }

    /// Inserts or replaces an entry (its key is the entry's own). Returns the live entry it
    /// replaced, if any.
    /// Stores `entry`, replacing (and freeing) any value the key had. Returns whether a live
    /// key was replaced.
    pub fn set(&mut self, mut entry: Entry) -> bool {
        let has_ttl = entry.expire().is_some();
        let created = self.clock.lfu.map(|_| crate::table::hash_key(entry.key()));
        if self.clock.lfu.is_some() {
            // A replaced key's LFU counter carries over (see set_str).
            let now = self.clock.ttl_now();
            if let Some(o) = self
                .db
                .table
                .get(entry.key())
                .filter(|o| !o.is_expired(now))
            {
                entry.set_clock(self.clock.touched(o.clock()));
            }
        }
        if has_field_ttls(&entry) {
            self.note_field_ttls(entry.key());
        }
        if has_ttl {
            self.note_replica_ttl(entry.key());
        }
        self.db.touch(entry.key());
        let key = self.db.want(Event::New).then(|| entry.key().to_vec());
        let old = self.db.table.insert(entry);
        if has_ttl {
            self.db.expires += 1;
        }
        let live = match old {
            Some(o) => {
                if o.expire().is_some() {
                    self.db.expires -= 1;
                }
                let live = !o.is_expired(self.clock.ttl_now());
                if !live {
                    self.db.signals.events.record(Event::Expired, o.key());
                }
                bury(&mut self.db.graveyard, o);
                live
            }
            None => false,
        };
        if let (false, Some(k)) = (live, key) {
            self.db.signals.events.record(Event::New, &k);
        }
        if !live {
            self.created = created;
        }
        live
    }

    /// Deletes a live key and frees its value (in the background when it is big). Returns
    /// whether there was one.
    pub fn delete(&mut self, key: &[u8]) -> bool {
        match self.remove(key) {
            Some(e) => {
                self.dispose(e);
                true
            }
            None => false,
        }
    }

    /// Frees an entry taken out of the keyspace: now if cheap, in the background if big.
    pub fn dispose(&mut self, e: Entry) {
        bury(&mut self.db.graveyard, e);
    }

    /// SET without options: stores `value` under `key` with the given TTL, in the existing
    /// block when it has the same layout (see [`Entry::overwrite_str`]). Returns whether a live
    /// key was replaced.
    pub fn set_str(&mut self, key: &[u8], value: &[u8], expire: Option<i64>) -> bool {
        let (clock, lru, now) = (self.clock, self.clock.lru, self.clock.ttl_now());
        if expire.is_some() {
            self.note_replica_ttl(key);
        }
        self.db.touch(key);
        let db = &mut *self.db;
        let mut was_live = false;
        let mut was_expired = false;
        // The clock the value gets: an overwrite keeps the key's LFU counter, counting the
        // write as an access (Redis's lookupKeyWrite, then dbSetValue keeps `lru`).
        let c = std::cell::Cell::new(lru);
        let done = db.table.upsert(
            key,
            |e| {
                was_live = !e.is_expired(now);
                was_expired = !was_live;
                if clock.lfu.is_some() && was_live {
                    c.set(clock.touched(e.clock()));
                }
                e.overwrite_str(value, expire, c.get())
            },
            || Entry::new_str(key, value, expire, false, c.get()),
        );
        // An in-place update keeps the TTL's presence, so the count of keys with one holds.
        match done {
            Upsert::Updated => {}
            Upsert::Replaced(old) => {
                if old.expire().is_some() {
                    db.expires -= 1;
                }
                if expire.is_some() {
                    db.expires += 1;
                }
                bury(&mut db.graveyard, old);
            }
            Upsert::Inserted => {
                if expire.is_some() {
                    db.expires += 1;
                }
            }
        }
        if was_expired {
            db.signals.events.record(Event::Expired, key);
        }
        if !was_live {
            db.signals.events.record(Event::New, key);
        }
        was_live
    }

    /// Removes a live key, returning its entry.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        self.live(key, true)?;
        let e = self.db.table.remove(key)?;
        if e.expire().is_some() {
            self.db.expires -= 1;
        }
        self.db.touch(key);
        Some(e)
    }

    /// Whether expiry is the primary's ([`Db::hold_expiry_while`]): a TTL set in the past
    /// then keeps the key, logically expired, until the primary deletes it (Redis's
    /// checkAlreadyExpired is false on a replica).
    pub fn expiry_held(&self) -> bool {
        self.db.freeze.held()
    }

    /// Sets or clears a live key's TTL (absolute unix ms). Returns false if the key is absent.
    /// A TTL in the past deletes the key, as Redis does, unless expiry is held.
    pub fn set_expire(&mut self, key: &[u8], when: Option<i64>) -> bool {
        if self.live(key, true).is_none() {
            return false;
        }
        if let Some(w) = when {
            if w <= self.clock.now_ms && !self.expiry_held() {
                self.delete(key);
                return true;
            }
        }
        self.db.touch(key);
        let e = self.db.table.get_mut(key).expect("checked live");
        match (e.expire().is_some(), when.is_some()) {
            (false, true) => self.db.expires += 1,
            (true, false) => self.db.expires -= 1,
            _ => {}
        }
        e.set_expire(when);
        if when.is_some() {
            self.note_replica_ttl(key);
        }
        true
    }

    /// Notes `key`, just given a TTL, as one this replica expires itself when the write came
    /// from one of its own clients (a writable replica's; [`Db::expire_replica_keys`]). As
    /// Redis: a key the primary gave a TTL waits for the primary's DEL.
    fn note_replica_ttl(&mut self, key: &[u8]) {
        if self.clock.from_primary || !self.db.freeze.held() {
            return;
        }
        let db = &mut *self.db;
        if !db.replica_ttl_set.contains(key) {
            db.replica_ttl_set.insert(key.into());
            db.replica_ttl_keys.push(key.into());
        }
    }

    /// Whether `key` is present but logically expired (not reclaimed yet). Does not reclaim it.
    pub fn expired_in_place(&self, key: &[u8]) -> bool {
        self.db
            .table
            .get(key)
            .is_some_and(|e| e.is_expired(self.clock.now_ms))
    }

    /// The TTL of a live key: None if absent, Some(None) if persistent.
    pub fn expire_of(&mut self, key: &[u8]) -> Option<Option<i64>> {
        self.peek(key).map(|e| e.expire())
    }

    pub fn len(&self) -> usize {
        self.db.len()
    }

    pub fn is_empty(&self) -> bool {
        self.db.is_empty()
    }

    /// One SCAN step over this database; see [`Table::scan`]. Expired keys are skipped.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&Entry)) -> u64 {
        let now = self.clock.now_ms;
        self.db.table.scan(cursor, count, |e| {
            if !e.is_expired(now) {
                f(e)
            }
        })
    }

    /// [`DbView::scan`], also showing the entries past their TTL (`true`): SCAN removes
    /// those it visits that match its pattern, as Redis does.
    pub fn scan_with_expired(
        &self,
        cursor: u64,
        count: usize,
        mut f: impl FnMut(&Entry, bool),
    ) -> u64 {
        let now = self.clock.now_ms;
        self.db
            .table
            .scan(cursor, count, |e| f(e, e.is_expired(now)))
    }

    /// Every live entry (KEYS).
    pub fn for_each(&self, mut f: impl FnMut(&Entry)) {
        let now = self.clock.now_ms;
        for e in self.db.table.iter() {
            if !e.is_expired(now) {
                f(e);
            }
        }
    }

    /// A random live key (RANDOMKEY), trying a bounded number of times past expired ones.
    pub fn random_key(&mut self, mut r: u64) -> Option<Vec<u8>> {
        for _ in 0..100 {
            let key = self.db.table.random(r)?.key().to_vec();
            if self.exists(&key) {
                return Some(key);
            }
            r = r.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        None
    }

    pub fn db(&mut self) -> &mut Db {
        self.db
    }

    /// A live entry to edit in place with no access counted and no watcher marked: for the
    /// later steps of a streamed reply that writes as it reads (XREADGROUP), whose access was
    /// counted once when it started.
    pub fn peek_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.live(key, true)
    }

    /// Like [`DbView::get_mut`] (a live entry to edit in place, access clock updated) but
    /// without marking watchers: for commands that may leave the value as it was (SETBIT or
    /// BITFIELD writing the bits already there, a failed type check), which Redis does not
    /// signal. The caller must call [`DbView::signal`] once it has changed the value.
    pub fn get_mut_quiet(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let clock = self.clock;
        let fresh = self.just_created(key);
        let e = self.live(key, true)?;
        if !fresh {
            e.set_clock(clock.touched(e.clock()));
        }
        Some(e)
    }

    /// Whether `key` is the one this view created last (LFU only: see `created`).
    fn just_created(&self, key: &[u8]) -> bool {
        self.created.is_some() && self.created == Some(crate::table::hash_key(key))
    }

    /// Marks the watchers of `key` dirty: the write signal for edits made through
    /// [`DbView::get_mut_quiet`].
    pub fn signal(&mut self, key: &[u8]) {
        self.db.touch(key);
    }

    /// False when no hash or set of this database has field (member) TTLs: every hash and set
    /// that has them is in the active cycle's registry ([`DbView::note_field_ttls`]), so an
    /// empty registry lets a command skip its lazy field-expiry lookup.
    pub fn may_have_field_ttls(&self) -> bool {
        !self.db.field_ttl_keys.is_empty()
    }

    /// Notes that the hash at `key` has fields with a TTL, so that the active cycle sweeps it.
    pub fn note_field_ttls(&mut self, key: &[u8]) {
        let db = &mut *self.db;
        if !db.field_ttl_set.contains(key) {
            db.field_ttl_set.insert(key.into());
            db.field_ttl_keys.push(key.into());
        }
    }

    /// Several live entries at once, for commands that read many keys together (SINTER,
    /// SUNION, ...). Each key is looked up as by [`DbView::get`] (expiry, hit/miss counters,
    /// access clock); a key may appear more than once.
    pub fn get_many(&mut self, keys: &[&[u8]]) -> Vec<Option<&Entry>> {
        // What each lookup found: a replica's client may read a set as missing whose
        // members are all past their TTL, though it stays in the table.
        let found: Vec<bool> = keys.iter().map(|k| self.get(k).is_some()).collect();
        let db = &*self.db;
        let now = self.clock.now_ms;
        // A set emptied by member expiry is left marked expired by `get`.
        keys.iter()
            .zip(found)
            .map(|(k, found)| {
                found
                    .then(|| db.shadow(k).or_else(|| db.table.get(k)))
                    .flatten()
                    .filter(|e| !e.is_expired(now))
            })
            .collect()
    }

    /// [`DbView::get`] that consumes the view, so the entry can outlive it (a helper that
    /// looks a key up and hands back the value it holds).
    pub fn into_get(mut self, key: &[u8]) -> Option<&'a Entry> {
        // None for a set that member expiry emptied (left marked expired in the table).
        self.get(key)?;
        let db: &'a Db = self.db;
        db.shadow(key).or_else(|| db.table.get(key))
    }

    /// Records an engine-level event that a caller detected itself (a hash's fields expired
    /// on access), for the server's keyspace notifications; nothing if it is not wanted.
    pub fn record_event(&mut self, ev: Event, key: &[u8]) {
        self.db.signals.events.record(ev, key);
    }

    /// Whether what TTLs remove is noted for the AOF now ([`Db::log_expired_while`]): a
    /// command that removes expired fields itself collects their names only then.
    pub fn logging_expired(&self) -> bool {
        self.db.signals.events.logging_expired()
    }

    /// Notes a removal by TTL that a command made itself (a hash's lazy field expiry), in
    /// order with the engine's own ([`Db::take_expired`]); nothing while not noting.
    pub fn log_expired(&mut self, what: Expired) {
        self.db.signals.events.log_expired(what);
    }
}

/// Iteration is over when a cursor position reaches this value.
pub const SCAN_DONE: u64 = SCAN_END;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    fn s(k: &[u8], v: &[u8], exp: Option<i64>) -> Entry {
        Entry::new_str(k, v, exp, false, 0)
    }

    #[test]
    fn lazy_expiry_hides_and_reclaims() {
        let mut db = Db::new();
        db.view(Clock::at(1000)).set(s(b"a", b"1", Some(1500)));
        assert_eq!(db.expires(), 1);
        assert!(db.view(Clock::at(1500)).get(b"a").is_some());
        assert!(db.view(Clock::at(1501)).get(b"a").is_none());
        assert_eq!(db.len(), 0);
        assert_eq!(db.expires(), 0);
    }

    #[test]
    fn active_expiry_reclaims_without_access() {
        let mut db = Db::new();
        for i in 0..1000 {
            let exp = if i % 2 == 0 { Some(10) } else { None };
            db.view(Clock::at(0))
                .set(s(format!("k{i}").as_bytes(), b"v", exp));
        }
        assert_eq!(db.expires(), 500);
        let (_, n) = db.active_expire(11, 10_000);
        assert_eq!(n, 500);
        assert_eq!(db.len(), 500);
        assert_eq!(db.expires(), 0);
    }

    #[test]
    fn point_reads_of_a_set_leave_expired_members_for_later() {
        use crate::types::{Limits, Set};
        use crate::value::Value;
        let mut set = Set::new();
        for i in 0..1000 {
            set.insert(format!("m{i}").as_bytes(), &Limits::default());
        }
        set.insert_expiring(b"short", 10, false);
        let mut db = Db::new();
        {
            let mut v = db.view(Clock::at(0));
            v.set(Entry::new_value(b"s", Value::Set(set), None, 0));
            v.note_field_ttls(b"s");
        }
        let len = |db: &mut Db, point: bool| {
            let mut v = db.view(Clock::at(20));
            let e = if point {
                v.get_point(b"s")
            } else {
                v.get(b"s")
            };
            match e.unwrap().value() {
                crate::entry::ValueRef::Set(s) => (s.len(), s.contains_at(b"short", 20)),
                _ => unreachable!(),
            }
        };
        // The member is due: a point read sees it as gone without touching the set...
        assert_eq!(len(&mut db, true), (1001, false));
        // ...a whole-set read removes it.
        assert_eq!(len(&mut db, false), (1000, false));
        assert_eq!(db.expired_fields, 1);
    }

    #[test]
    fn a_held_expiry_hides_expired_keys_from_reads_and_lets_writes_reclaim_them() {
        let held = Arc::new(AtomicBool::new(true));
        let mut db = Db::new();
        db.hold_expiry_while(held.clone());
        for k in [&b"a"[..], b"b", b"c", b"d"] {
            db.view(Clock::at(0)).set(s(k, b"v", Some(10)));
        }
        // Reads and the active cycles see nothing and remove nothing.
        assert!(db.view(Clock::at(20)).get(b"a").is_none());
        assert!(!db.view(Clock::at(20)).exists(b"b"));
        assert!(db.view(Clock::at(20)).peek(b"b").is_none());
        assert_eq!(db.active_expire(20, 100), (0, 0));
        assert_eq!((db.len(), db.expires()), (4, 4));
        // Writes reclaim what they touch (a DEL of it answers 0, as for any expired key).
        assert!(!db.view(Clock::at(20)).delete(b"a"));
        assert!(db.view(Clock::at(20)).get_mut(b"b").is_none());
        assert!(!db.view(Clock::at(20)).set(s(b"c", b"new", None)));
        assert_eq!((db.len(), db.expires()), (2, 1));
        assert_eq!(db.expired_total, 2);
        // Released (a promotion), expiry is the primary's again.
        held.store(false, Ordering::Relaxed);
        assert_eq!(db.active_expire(20, 100).1, 1);
        assert_eq!((db.len(), db.expires()), (1, 0));
    }

    #[test]
    fn commands_from_the_primary_see_no_key_expired() {
        let held = Arc::new(AtomicBool::new(true));
        let mut db = Db::new();
        db.hold_expiry_while(held);
        db.view(Clock::at(0)).set(s(b"k", b"v", Some(10)));
        let primary = Clock {
            from_primary: true,
            ..Clock::at(20)
        };
        // The primary found the key live when it ran the command: so does the replica.
        assert!(db.view(primary).get(b"k").is_some());
        assert!(db.view(primary).get_mut(b"k").is_some());
        assert!(
            db.view(primary).set_str(b"k", b"w", Some(10)),
            "a live key replaced"
        );
        assert!(
            db.view(Clock::at(20)).get(b"k").is_none(),
            "a client still sees it gone"
        );
        assert!(db.view(primary).delete(b"k"));
        assert_eq!((db.len(), db.expires()), (0, 0));
    }

    #[test]
    fn a_replica_hides_set_members_past_their_ttl_but_removes_none() {
        use crate::types::{Limits, Set};
        use crate::value::Value;
        let mut set = Set::new();
        set.insert(b"stays", &Limits::default());
        set.insert_expiring(b"short", 10, false);
        let mut gone = Set::new();
        gone.insert_expiring(b"only", 10, false);
        let mut db = Db::new();
        db.hold_expiry_while(Arc::new(AtomicBool::new(true)));
        {
            let mut v = db.view(Clock::at(0));
            v.set(Entry::new_value(b"s", Value::Set(set), None, 0));
            v.note_field_ttls(b"s");
            v.set(Entry::new_value(b"g", Value::Set(gone), None, 0));
            v.note_field_ttls(b"g");
        }
        let members = |e: Option<&Entry>| match e.map(|e| e.value()) {
            Some(crate::entry::ValueRef::Set(s)) => Some(s.len()),
            None => None,
            _ => unreachable!(),
        };
        let mut v = db.view(Clock::at(20));
        assert_eq!(members(v.get(b"s")), Some(1));
        assert_eq!(members(v.get(b"g")), None);
        assert!(!v.exists(b"g"));
        assert_eq!(members(v.peek(b"s")), Some(1));
        let many: Vec<_> = v.get_many(&[b"s", b"g"]).into_iter().map(members).collect();
        assert_eq!(many, vec![Some(1), None]);
        assert_eq!(members(db.view(Clock::at(20)).into_get(b"s")), Some(1));
        // Nothing removed: the primary's commands still see every member.
        let primary = Clock {
            from_primary: true,
            ..Clock::at(20)
        };
        assert_eq!(members(db.view(primary).get(b"s")), Some(2));
        assert_eq!(members(db.view(primary).get(b"g")), Some(1));
        assert_eq!((db.expired_fields, db.len()), (0, 2));
        // Nor does the active cycle.
        assert_eq!(db.active_expire_fields(20, 10), (0, 0));
    }

    #[test]
    fn a_replica_expires_the_keys_its_own_clients_gave_a_ttl() {
        let held = Arc::new(AtomicBool::new(true));
        let mut db = Db::new();
        db.hold_expiry_while(held);
        let primary = Clock {
            from_primary: true,
            ..Clock::at(0)
        };
        db.view(primary).set(s(b"theirs", b"v", Some(10)));
        db.view(Clock::at(0)).set(s(b"mine", b"v", Some(10)));
        db.view(Clock::at(0)).set_str(b"mine2", b"v", Some(50));
        db.view(Clock::at(0)).set(s(b"persisted", b"v", None));
        assert!(db.view(Clock::at(0)).set_expire(b"persisted", Some(10)));
        assert!(db.view(Clock::at(0)).set_expire(b"persisted", None));
        assert_eq!(db.replica_ttl_keys(), 3);
        // Only its own due key goes; the primary's waits for a DEL; the one made
        // persistent is forgotten; the one not due stays noted.
        assert_eq!(db.active_expire(20, 100), (0, 0));
        assert_eq!(db.expire_replica_keys(20, 100), (3, 1));
        assert_eq!((db.len(), db.expired_total), (3, 1));
        assert!(db.table.get(b"mine").is_none());
        assert!(db.table.get(b"theirs").is_some());
        assert_eq!(db.replica_ttl_keys(), 1);
        assert_eq!(db.expire_replica_keys(60, 100), (1, 1));
        assert_eq!((db.len(), db.expires(), db.replica_ttl_keys()), (2, 1, 0));
        // A flush forgets the names.
        db.view(Clock::at(60)).set(s(b"again", b"v", Some(100)));
        assert_eq!(db.replica_ttl_keys(), 1);
        db.flush();
        assert_eq!(db.replica_ttl_keys(), 0);
    }

    #[test]
    fn a_primary_notes_no_replica_keys() {
        let mut db = Db::new();
        db.hold_expiry_while(Arc::new(AtomicBool::new(false)));
        db.view(Clock::at(0)).set(s(b"k", b"v", Some(10)));
        assert_eq!(db.replica_ttl_keys(), 0);
        assert_eq!(db.expire_replica_keys(20, 100), (0, 0));
    }

    #[test]
    fn a_pinned_key_outlives_its_ttl_until_unpinned() {
        let mut db = Db::new();
        db.view(Clock::at(0)).set(s(b"k", b"v", Some(10)));
        db.view(Clock::at(0)).set(s(b"other", b"v", Some(10)));
        db.pin(b"k");
        assert_eq!(db.active_expire(20, 100).1, 1, "only the unpinned key goes");
        assert!(db.view(Clock::at(20)).get(b"k").is_some());
        assert!(db.view(Clock::at(20)).exists(b"k"));
        db.pin(b"k");
        db.unpin(b"k");
        assert!(db.view(Clock::at(20)).get(b"k").is_some(), "pins nest");
        db.unpin(b"k");
        assert!(db.view(Clock::at(20)).get(b"k").is_none());
        assert_eq!((db.len(), db.expires()), (0, 0));
    }

    #[test]
    fn watchers_see_writes_and_expiry() {
        let mut db = Db::new();
        let f = WatchFlag::default();
        db.watch(b"k", f.clone(), 0);
        db.view(Clock::at(0)).get(b"k");
        assert!(!f.load(Ordering::Relaxed));
        db.view(Clock::at(0)).set(s(b"k", b"v", Some(5)));
        assert!(f.load(Ordering::Relaxed));
        let g = WatchFlag::default();
        db.watch(b"k", g.clone(), 0);
        db.active_expire(6, 100);
        assert!(g.load(Ordering::Relaxed));
    }

    #[test]
    fn set_expire_in_past_deletes_and_counts() {
        let mut db = Db::new();
        let mut v = db.view(Clock::at(100));
        v.set(s(b"k", b"v", None));
        assert!(v.set_expire(b"k", Some(200)));
        assert_eq!(v.expire_of(b"k"), Some(Some(200)));
        assert!(v.set_expire(b"k", None));
        assert_eq!(v.expire_of(b"k"), Some(None));
        assert!(v.set_expire(b"k", Some(50)));
        assert_eq!(v.expire_of(b"k"), None);
        assert!(!v.set_expire(b"k", Some(500)));
        assert_eq!(db.expires(), 0);
    }

    #[test]
    fn quiet_edits_signal_only_when_asked() {
        let mut db = Db::new();
        db.view(Clock::at(0)).set(s(b"k", b"v", Some(50)));
        let f = WatchFlag::default();
        db.watch(b"k", f.clone(), 0);
        {
            let mut v = db.view(Clock::at(10));
            v.get_mut_quiet(b"k").unwrap().str_mut().push(b'!');
        }
        assert!(!f.load(Ordering::Relaxed));
        db.view(Clock::at(10)).signal(b"k");
        assert!(f.load(Ordering::Relaxed));
        let mut v = db.view(Clock::at(10));
        assert_eq!(v.get(b"k").unwrap().str_value(), b"v!");
        assert!(v.get_mut_quiet(b"nope").is_none());
        // Expired keys are not returned.
        assert!(db.view(Clock::at(51)).get_mut_quiet(b"k").is_none());
        assert_eq!(db.len(), 0);
    }

    fn set_entry(k: &[u8], members: &[(&[u8], Option<i64>)]) -> Entry {
        use crate::types::{Limits, Set};
        use crate::value::Value;
        let mut s = Set::new();
        for (m, at) in members {
            match at {
                Some(at) => s.insert_expiring(m, *at, false),
                None => s.insert(m, &Limits::default()),
            };
        }
        Entry::new_value(k, Value::Set(s), None, 0)
    }

    fn members(db: &mut Db, now: i64, k: &[u8]) -> Option<Vec<Vec<u8>>> {
        match db.view(Clock::at(now)).get(k)?.value() {
            crate::entry::ValueRef::Set(s) => {
                let mut v = s.to_vec();
                v.sort();
                Some(v)
            }
            _ => None,
        }
    }

    #[test]
    fn set_members_expire_lazily_and_take_the_key_with_them() {
        let mut db = Db::new();
        db.view(Clock::at(0)).set(set_entry(
            b"s",
            &[(b"a", Some(100)), (b"b", Some(200)), (b"c", None)],
        ));
        // Stored with member TTLs: registered for the sweep.
        assert_eq!(db.field_ttl_hashes(), 1);
        let f = WatchFlag::default();
        db.watch(b"s", f.clone(), 0);
        assert_eq!(members(&mut db, 99, b"s").unwrap().len(), 3);
        assert!(!f.load(Ordering::Relaxed));
        assert_eq!(
            members(&mut db, 100, b"s"),
            Some(vec![b"b".to_vec(), b"c".to_vec()])
        );
        assert!(f.load(Ordering::Relaxed));
        assert_eq!(db.expired_fields, 1);
        // Every path sees the key gone once its last member expired.
        db.view(Clock::at(0))
            .set(set_entry(b"t", &[(b"x", Some(50))]));
        assert!(db.view(Clock::at(49)).exists(b"t"));
        assert!(!db.view(Clock::at(50)).exists(b"t"));
        assert_eq!(db.len(), 2);
        assert!(db.view(Clock::at(51)).get(b"t").is_none());
        assert_eq!(db.len(), 1);
        db.view(Clock::at(0))
            .set(set_entry(b"u", &[(b"x", Some(50))]));
        {
            let mut v = db.view(Clock::at(60));
            let got = v.get_many(&[b"u", b"s"]);
            assert!(got[0].is_none() && got[1].is_some());
        }
        assert!(db.view(Clock::at(60)).into_get(b"u").is_none());
        assert_eq!(db.expires(), 0);
        assert_eq!(db.view(Clock::at(60)).expire_of(b"s"), Some(None));
    }

    #[test]
    fn a_stale_member_bound_neither_removes_nor_signals() {
        let mut db = Db::new();
        db.view(Clock::at(0))
            .set(set_entry(b"s", &[(b"a", Some(100)), (b"b", None)]));
        // A later TTL leaves the table's lower bound at 100.
        if let Some(crate::value::Value::Set(s)) = db
            .view(Clock::at(0))
            .get_mut_quiet(b"s")
            .and_then(|e| e.value_mut())
        {
            assert!(s.set_expiry(b"a", Some(500)));
        }
        let f = WatchFlag::default();
        db.watch(b"s", f.clone(), 0);
        assert_eq!(members(&mut db, 200, b"s").unwrap().len(), 2);
        assert!(!f.load(Ordering::Relaxed));
        assert_eq!(members(&mut db, 500, b"s"), Some(vec![b"b".to_vec()]));
        assert!(f.load(Ordering::Relaxed));
    }

    #[test]
    fn the_field_sweep_removes_set_members_and_emptied_sets() {
        let mut db = Db::new();
        let many: Vec<(Vec<u8>, Option<i64>)> = (0..100)
            .map(|i| (format!("m{i}").into_bytes(), Some(10 + i)))
            .collect();
        let refs: Vec<(&[u8], Option<i64>)> = many.iter().map(|(m, e)| (&m[..], *e)).collect();
        db.view(Clock::at(0)).set(set_entry(b"big", &refs));
        db.view(Clock::at(0))
            .set(set_entry(b"keep", &[(b"a", Some(10)), (b"b", None)]));
        let mut removed = 0;
        for _ in 0..20 {
            removed += db.active_expire_fields(1000, 2).1;
        }
        assert_eq!(removed, 101);
        assert_eq!(db.len(), 1);
        assert_eq!(db.field_ttl_hashes(), 0);
        assert_eq!(members(&mut db, 1000, b"keep"), Some(vec![b"b".to_vec()]));
    }

    #[test]
    fn replacing_an_expired_key_is_not_replacing_a_live_one() {
        let mut db = Db::new();
        db.view(Clock::at(0)).set(s(b"k", b"old", Some(5)));
        assert!(!db.view(Clock::at(10)).set(s(b"k", b"new", None)));
        assert!(db.view(Clock::at(10)).set(s(b"k", b"newer", None)));
        assert_eq!(db.expires(), 0);
        // Small values are freed on the spot: nothing waits in the graveyard.
        assert!(db.view(Clock::at(10)).delete(b"k"));
        assert!(!db.view(Clock::at(10)).delete(b"k"));
        assert!(db.take_graveyard().is_none());
    }

    #[test]
    fn ttl_removals_are_noted_in_order_only_while_logging() {
        use crate::types::{Hash, Limits};
        static LOGGING: AtomicBool = AtomicBool::new(false);
        fn hash_entry(k: &[u8], due: &[&[u8]]) -> Entry {
            let mut h = Hash::new();
            h.set(b"g", b"1", &Limits::default());
            for f in due {
                h.set_expiring(f, b"v", 5, &Limits::default());
            }
            Entry::new_value(k, Value::Hash(h), None, 0)
        }
        let fill = |db: &mut Db, p: &str| {
            let k = |n: &str| format!("{p}{n}").into_bytes();
            let mut v = db.view(Clock::at(0));
            v.set(s(&k("key"), b"v", Some(5)));
            v.set(set_entry(&k("set"), &[(b"m", Some(5)), (b"n", None)]));
            v.set(set_entry(&k("swept"), &[(b"m", Some(5)), (b"n", None)]));
            v.set(set_entry(&k("gone"), &[(b"m", Some(5))]));
            v.set(hash_entry(&k("hash"), &[b"f", b"e"]));
        };
        let run = |db: &mut Db, p: &str| {
            let k = |n: &str| format!("{p}{n}").into_bytes();
            let mut v = db.view(Clock::at(10));
            assert!(v.get(&k("key")).is_none());
            assert!(v.get(&k("set")).is_some());
            // Every member due: the set goes as an expired key once reclaimed.
            assert!(v.get(&k("gone")).is_none());
            assert!(v.get(&k("gone")).is_none());
            let mut removed = 0;
            for _ in 0..10 {
                removed += db.active_expire_fields(10, 10).1;
            }
            assert_eq!(
                removed, 3,
                "the swept set's member and the hash's two fields"
            );
        };
        let mut db = Db::new();
        db.log_expired_while(&LOGGING);
        fill(&mut db, "a");
        run(&mut db, "a");
        assert!(
            db.take_expired().is_empty(),
            "the flag is off: nothing noted"
        );
        LOGGING.store(true, Ordering::Relaxed);
        fill(&mut db, "b");
        run(&mut db, "b");
        let b = |n: &str| Box::<[u8]>::from(format!("b{n}").as_bytes());
        let one = |m: &[u8]| vec![Box::<[u8]>::from(m)];
        let mut got = db.take_expired();
        // The sweep's order among keys is its registry's: compare it as a set.
        let swept: HashSet<_> = got.drain(3..).collect();
        assert_eq!(
            got,
            [
                Expired::Key(b("key")),
                Expired::Members(b("set"), one(b"m")),
                Expired::Key(b("gone")),
            ]
        );
        let mut fields = vec![Box::<[u8]>::from(&b"e"[..]), Box::from(&b"f"[..])];
        let hash = swept.iter().find_map(|e| match e {
            Expired::Fields(k, f) if *k == b("hash") => Some(f.clone()),
            _ => None,
        });
        let mut hash = hash.expect("the hash's fields");
        hash.sort();
        fields.sort();
        assert_eq!(hash, fields);
        assert!(swept.contains(&Expired::Members(b("swept"), one(b"m"))));
        assert_eq!(swept.len(), 2);
        assert!(db.take_expired().is_empty(), "taken");
        LOGGING.store(false, Ordering::Relaxed);
    }

    #[test]
    fn events_are_recorded_only_when_wanted() {
        let ev = |db: &mut Db| -> Vec<(Event, Vec<u8>)> {
            db.take_events()
                .unwrap_or_default()
                .into_iter()
                .map(|(e, k)| (e, k.to_vec()))
                .collect()
        };
        let mut db = Db::new();
        db.view(Clock::at(0)).set(s(b"a", b"v", Some(5)));
        assert!(ev(&mut db).is_empty(), "unbound: nothing recorded");
        let mask = Arc::new(AtomicU32::new(0));
        db.record_events(mask.clone(), Default::default());
        db.view(Clock::at(0)).set(s(b"b", b"v", None));
        assert!(ev(&mut db).is_empty(), "bound, nothing wanted");
        let all = Event::Expired.bit() | Event::New.bit() | Event::Miss.bit();
        mask.store(all, Ordering::Relaxed);
        db.view(Clock::at(10)).get(b"a");
        db.view(Clock::at(10)).set_str(b"c", b"v", None);
        db.view(Clock::at(10)).set_str(b"c", b"w", None);
        db.view(Clock::at(10)).set(s(b"d", b"v", Some(15)));
        db.active_expire(20, 100);
        use Event::*;
        assert_eq!(
            ev(&mut db),
            [
                (Expired, b"a".to_vec()),
                (Miss, b"a".to_vec()),
                (New, b"c".to_vec()),
                (New, b"d".to_vec()),
                (Expired, b"d".to_vec()),
            ]
        );
        // A write over a key whose TTL passed expires it, then creates it.
        db.view(Clock::at(20)).set_str(b"e", b"v", Some(25));
        db.view(Clock::at(30)).set_str(b"e", b"v", None);
        assert_eq!(
            ev(&mut db),
            [
                (New, b"e".to_vec()),
                (Expired, b"e".to_vec()),
                (New, b"e".to_vec())
            ]
        );
    }
}
