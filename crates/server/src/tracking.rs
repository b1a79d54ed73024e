//! Client-side caching: CLIENT TRACKING's tables and invalidation messages.
//!
//! A tracking client caches what it reads; the server must tell it when any of that changes.
//! Redis keeps one table, key name → ids of the clients that read it. Here every shard keeps
//! the part of that table for its own keys ([`Table`]), so recording a read and invalidating on
//! a write are shard-local, like the data: the read is recorded where the command ran (inline,
//! in a batch from another thread, or in a transaction's hop while the shard is locked, so no
//! write can slip between the read and its recording), and the shard's databases note every
//! written, deleted or expired key (`Db::collect_written`, on only while the table or a
//! broadcast prefix exists). After each command the worker takes those keys out of the table
//! and posts one invalidation per key to the threads of the clients that read it; it forgets
//! them (a client reads again to be told again), as Redis does.
//!
//! Broadcasting mode (BCAST) needs no table: the prefixes are process-wide ([`Prefixes`]), and
//! each shard gathers the written keys that match a prefix during one loop turn and sends them
//! to the prefix's clients in one message per prefix at the end of the turn (Redis gathers per
//! event-loop iteration of its single thread; here per turn of the shard's thread).
//!
//! Delivery happens on the client's thread (worker.rs): a RESP3 client gets an `invalidate`
//! push on its own connection, queued behind every reply it is still owed so that a read
//! answered before the write never arrives after the invalidation (which would leave a stale
//! value in its cache); a client with REDIRECT has it forwarded to the target connection (RESP3
//! push, or a `__redis__:invalidate` Pub/Sub message for a RESP2 subscriber); a lost target marks
//! the redirect broken. FLUSHDB/FLUSHALL empty every table and send every tracking client one
//! invalidation with a null key list.
//!
//! The table is bounded by `tracking-table-max-keys`, a limit for the whole server: over it,
//! the cron invalidates keys until it is back under. A client that disconnects or turns
//! tracking off is forgotten from every shard's table by the cron, one part per tick (the
//! table is split into parts so that this never scans it all at once).

use crate::msg::{ConnRef, Msg};
use crate::shared::Shared;
use bytes::Bytes;
use smallvec::SmallVec;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// A client's tracking settings (CLIENT TRACKING ON ...); absent while tracking is off.
#[derive(Clone, Debug, Default)]
pub struct Tracking {
    /// Client id invalidations go to (0: this connection).
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    pub prefixes: Vec<Bytes>,
    /// The redirect target was gone when an invalidation was due (flag `R`).
    pub broken_redirect: bool,
}

/// A tracking client as the tables record it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reader {
    pub id: u64,
    pub thread: usize,
    pub conn: ConnRef,
    pub noloop: bool,
}

/// The clients that read one key.
pub type Readers = SmallVec<[Reader; 2]>;

/// Parts a shard's table is split into (the cron sweeps one per tick).
const PARTS: usize = 64;

/// A part of a table: foldhash, seeded per map (std's SipHash was most of the cost of
/// recording a read).
type Part = HashMap<Box<[u8]>, Readers, foldhash::fast::RandomState>;

/// One shard's table: key name → clients that read it since it last changed.
pub struct Table {
    parts: Vec<Part>,
    hasher: foldhash::fast::FixedState,
    keys: usize,
    items: usize,
    /// Clients to purge (disconnected or tracking off): `sweeping` is being removed part by
    /// part from `sweep_at`; `next` waits for the following pass.
    sweeping: HashSet<u64>,
    next: HashSet<u64>,
    sweep_at: usize,
    /// Broadcast keys gathered this turn: prefix → key → its last writer (NOLOOP), in key
    /// order (the order Redis's radix tree sends them in).
    pub bcast: HashMap<Bytes, BTreeMap<Bytes, u64>>,
    /// The shard's databases note written keys (the table or some prefix is in use).
    pub collecting: bool,
    /// Reads recorded by a shard step, applied after its writes ([`remember_later`]).
    pub deferred: Vec<(Bytes, Reader)>,
}

impl Default for Table {
    fn default() -> Table {
        Table {
            parts: (0..PARTS).map(|_| Part::default()).collect(),
            hasher: Default::default(),
            keys: 0,
            items: 0,
            sweeping: HashSet::new(),
            next: HashSet::new(),
            sweep_at: 0,
            bcast: HashMap::new(),
            collecting: false,
            deferred: Vec::new(),
        }
    }
}

impl Table {
    fn part(&self, key: &[u8]) -> usize {
        (self.hasher.hash_one(key) as usize) % PARTS
    }

    pub fn is_empty(&self) -> bool {
        self.keys == 0
    }

    pub fn keys(&self) -> usize {
        self.keys
    }

    pub fn items(&self) -> usize {
        self.items
    }

    /// Records that `r` read `key`.
    pub fn remember(&mut self, key: &[u8], r: Reader) {
        let p = self.part(key);
        let readers = match self.parts[p].get_mut(key) {
            Some(v) => v,
            None => {
                self.keys += 1;
                self.parts[p].entry(key.into()).or_default()
            }
        };
        // Sorted by client id: a hot key read by many clients is checked in log time.
        if let Err(at) = readers.binary_search_by_key(&r.id, |x| x.id) {
            readers.insert(at, r);
            self.items += 1;
        }
    }

    /// Takes the readers of a written key (the key is forgotten).
    pub fn take(&mut self, key: &[u8]) -> Option<Readers> {
        let p = self.part(key);
        let v = self.parts[p].remove(key)?;
        self.keys -= 1;
        self.items -= v.len();
        Some(v)
    }

    /// Empties the table (FLUSHDB / FLUSHALL).
    pub fn clear(&mut self) {
        for p in &mut self.parts {
            *p = Part::default();
        }
        self.keys = 0;
        self.items = 0;
    }

    /// Schedules a client's entries for removal.
    pub fn forget(&mut self, id: u64) {
        if self.keys > 0 {
            self.next.insert(id);
        }
    }

    /// One step of the purge of forgotten clients: one part per call.
    pub fn sweep_step(&mut self) {
        if self.sweeping.is_empty() {
            if self.next.is_empty() {
                return;
            }
            self.sweeping = std::mem::take(&mut self.next);
            self.sweep_at = 0;
        }
        let dead = &self.sweeping;
        let mut removed_keys = 0;
        let mut removed_items = 0;
        self.parts[self.sweep_at].retain(|_, readers| {
            let before = readers.len();
            readers.retain(|r| !dead.contains(&r.id));
            removed_items += before - readers.len();
            if readers.is_empty() {
                removed_keys += 1;
                false
            } else {
                true
            }
        });
        self.keys -= removed_keys;
        self.items -= removed_items;
        self.sweep_at += 1;
        if self.sweep_at == PARTS {
            self.sweeping.clear();
            self.sweep_at = 0;
        }
    }

    /// Takes up to `n` keys out of the table, for `tracking-table-max-keys`: they are
    /// invalidated as if written.
    pub fn evict(&mut self, n: usize) -> Vec<(Box<[u8]>, Readers)> {
        let mut out = Vec::new();
        for p in 0..PARTS {
            while out.len() < n {
                let Some(k) = self.parts[p].keys().next().cloned() else {
                    break;
                };
                let v = self.parts[p].remove(&k).expect("just seen");
                self.keys -= 1;
                self.items -= v.len();
                out.push((k, v));
            }
            if out.len() >= n {
                break;
            }
        }
        out
    }
}

/// Broadcasting clients by prefix, process-wide.
#[derive(Default)]
pub struct Prefixes {
    map: RwLock<HashMap<Bytes, Vec<Reader>>>,
    /// Distinct prefixes (lets writes skip the map when there are none).
    count: AtomicUsize,
    /// Some prefix exists: every shard's databases note written keys while this is set, from
    /// the moment it is set (`Db::collect_written_while`), so a write sent after a client's
    /// CLIENT TRACKING ... BCAST has answered +OK is broadcast whatever thread runs it.
    active: Arc<AtomicBool>,
}

impl Prefixes {
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn add(&self, prefix: &Bytes, r: Reader) {
        let mut m = self.map.write().unwrap_or_else(|e| e.into_inner());
        let v = m.entry(prefix.clone()).or_default();
        if v.is_empty() {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
        v.retain(|x| x.id != r.id);
        v.push(r);
        self.active.store(true, Ordering::Release);
    }

    pub fn remove(&self, prefix: &[u8], id: u64) {
        let mut m = self.map.write().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = m.get_mut(prefix) {
            v.retain(|x| x.id != id);
            if v.is_empty() {
                m.remove(prefix);
                self.count.fetch_sub(1, Ordering::Relaxed);
                if m.is_empty() {
                    self.active.store(false, Ordering::Release);
                }
            }
        }
    }

    /// The flag that is set while some prefix exists, for the databases to watch.
    pub fn active_flag(&self) -> Arc<AtomicBool> {
        self.active.clone()
    }

    /// Whether some prefix exists (an acquire load: sees a prefix added by another thread
    /// before the write being looked at).
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// The prefixes `key` starts with.
    pub fn matching(&self, key: &[u8]) -> Vec<Bytes> {
        let m = self.map.read().unwrap_or_else(|e| e.into_inner());
        m.keys().filter(|p| key.starts_with(p)).cloned().collect()
    }

    pub fn readers(&self, prefix: &[u8]) -> Vec<Reader> {
        let m = self.map.read().unwrap_or_else(|e| e.into_inner());
        m.get(prefix).cloned().unwrap_or_default()
    }
}

/// Tracking state every thread sees.
#[derive(Default)]
pub struct Global {
    /// Clients with tracking on (INFO tracking_clients).
    pub clients: AtomicUsize,
    pub prefixes: Prefixes,
    /// Per shard: keys and items in its table (INFO tracking_total_keys / _items).
    pub keys: Vec<AtomicUsize>,
    pub items: Vec<AtomicUsize>,
}

impl Global {
    pub fn new(shards: usize) -> Global {
        Global {
            keys: (0..shards).map(|_| AtomicUsize::new(0)).collect(),
            items: (0..shards).map(|_| AtomicUsize::new(0)).collect(),
            ..Default::default()
        }
    }

    pub fn total_keys(&self) -> usize {
        self.keys.iter().map(|k| k.load(Ordering::Relaxed)).sum()
    }

    pub fn total_items(&self) -> usize {
        self.items.iter().map(|k| k.load(Ordering::Relaxed)).sum()
    }
}

/// What an invalidation says: some keys, or (after a flush) everything.
#[derive(Debug, Clone)]
pub enum Invalid {
    Keys(Vec<Bytes>),
    All,
}

/// The reader a client is, if it records reads at all (tracking on, not BCAST).
pub fn reader_of(state: &crate::conn::ClientState, thread: usize) -> Option<Reader> {
    let t = state.tracking.as_ref()?;
    Some(Reader {
        id: state.id,
        thread,
        conn: state.conn,
        noloop: t.noloop,
    })
}

/// Whether a read-only command of this client records its keys now: tracking on in the
/// default mode, and OPTIN given CLIENT CACHING YES / OPTOUT not given CLIENT CACHING NO.
pub fn remembers(state: &crate::conn::ClientState) -> bool {
    match state.tracking.as_ref() {
        Some(t) if !t.bcast => !((t.optin && !state.caching) || (t.optout && state.caching)),
        _ => false,
    }
}

/// Records that `r` read `key` on this shard, and makes the shard note writes from now on.
pub fn remember(shard: &mut crate::shard::Shard, key: &[u8], r: Reader) {
    shard.tracking.remember(key, r);
    collect(shard, true);
}

/// Turns the noting of written keys on or off for all of a shard's databases.
pub fn collect(shard: &mut crate::shard::Shard, on: bool) {
    if shard.tracking.collecting != on {
        shard.tracking.collecting = on;
        for db in &mut shard.dbs {
            db.collect_written(on);
        }
    }
}

/// The keys a read-only command reads, with their shards (`keys`: the positions of its keys,
/// [`darner_commands::key_positions`]).
pub fn read_keys<A: AsRef<[u8]>>(
    spec: &darner_commands::CommandSpec,
    args: &[A],
    keys: &[usize],
    shards: usize,
) -> Vec<(usize, Bytes)> {
    if !spec.has(darner_commands::flags::READONLY) {
        return Vec::new();
    }
    keys.iter()
        .map(|&i| {
            let k = args[i].as_ref();
            (crate::cmd::shard_of(k, shards), Bytes::copy_from_slice(k))
        })
        .collect()
}

/// Records a read made inside a shard step; applied by the worker once the step's writes
/// are invalidated (a read that expired the key must not invalidate itself).
pub fn remember_later(shard: &mut crate::shard::Shard, key: &[u8], r: Reader) {
    shard
        .tracking
        .deferred
        .push((Bytes::copy_from_slice(key), r));
}

/// Records a transaction's reads on their shards (it still holds their locks, so no write
/// comes between the read and the record).
pub async fn remember_in_tx(tx: &crate::exec::Tx, keys: Vec<(usize, Bytes)>, r: Reader) {
    let mut by_shard: BTreeMap<usize, Vec<Bytes>> = BTreeMap::new();
    for (s, k) in keys {
        by_shard.entry(s).or_default().push(k);
    }
    let hops: Vec<_> = by_shard
        .into_iter()
        .map(|(s, keys)| {
            tx.run(s, move |ctx| {
                for k in &keys {
                    remember_later(ctx.shard, k, r);
                }
            })
        })
        .collect();
    for h in hops {
        h.await;
    }
}

/// The client whose command wrote, as invalidation needs it: a NOLOOP client is not told of
/// its own writes; and a client told of its own write gets the invalidation right after that
/// command's reply (`at`: its connection and the reply's sequence number, when known).
#[derive(Clone, Copy, Debug)]
pub struct Writer {
    pub id: u64,
    pub noloop: bool,
    pub at: Option<(ConnRef, u64)>,
}

/// Writes an invalidation frame for a client (`resp3`: the target's protocol): a RESP3 push,
/// or (RESP2, only to a redirect target in subscribe mode) a message on
/// `__redis__:invalidate`. None: nothing can be sent. A flush's null is written in the
/// tracking client's protocol (`null_resp3`), as Redis writes it.
pub fn frame(resp3: bool, subscribed: bool, what: &Invalid, null_resp3: bool) -> Option<Vec<u8>> {
    let keys = match what {
        Invalid::Keys(keys) => Some(keys.as_slice()),
        Invalid::All => None,
    };
    darner_commands::tracking::invalidation_frame(keys, resp3, subscribed, null_resp3)
}

/// The push a RESP3 client gets when its redirect target is gone.
pub fn broken_frame(redirect: u64) -> Vec<u8> {
    darner_commands::tracking::redirect_broken_frame(redirect)
}

/// Turns tracking off for a client: BCAST prefixes dropped, its table entries purged by the
/// shards' crons.
pub fn disable(shared: &Shared, state: &mut crate::conn::ClientState) {
    let Some(t) = state.tracking.take() else {
        return;
    };
    state.caching = false;
    shared.tracking.clients.fetch_sub(1, Ordering::Relaxed);
    for p in &t.prefixes {
        shared.tracking.prefixes.remove(p, state.id);
    }
    if !t.bcast {
        let id = state.id;
        for s in 0..shared.threads {
            crate::exec::post(shared, s, Msg::TrackingForget { id });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(id: u64) -> Reader {
        Reader {
            id,
            thread: 0,
            conn: ConnRef::default(),
            noloop: false,
        }
    }

    #[test]
    fn remember_take_and_counts() {
        let mut t = Table::default();
        t.remember(b"a", reader(1));
        t.remember(b"a", reader(1));
        t.remember(b"a", reader(2));
        t.remember(b"b", reader(1));
        assert_eq!((t.keys(), t.items()), (2, 3));
        let r = t.take(b"a").unwrap();
        assert_eq!(r.len(), 2);
        assert!(t.take(b"a").is_none());
        assert_eq!((t.keys(), t.items()), (1, 1));
    }

    #[test]
    fn forgotten_clients_are_swept_part_by_part() {
        let mut t = Table::default();
        for i in 0..1000u32 {
            t.remember(&i.to_be_bytes(), reader(1));
            t.remember(&i.to_be_bytes(), reader(2));
        }
        t.forget(1);
        for _ in 0..PARTS {
            t.sweep_step();
        }
        assert_eq!((t.keys(), t.items()), (1000, 1000));
        t.forget(2);
        for _ in 0..PARTS {
            t.sweep_step();
        }
        assert!(t.is_empty());
        assert_eq!(t.items(), 0);
    }

    #[test]
    fn evict_takes_keys_out() {
        let mut t = Table::default();
        for i in 0..100u32 {
            t.remember(&i.to_be_bytes(), reader(1));
        }
        let out = t.evict(30);
        assert_eq!(out.len(), 30);
        assert_eq!(t.keys(), 70);
    }

    #[test]
    fn frames() {
        let keys = Invalid::Keys(vec![Bytes::from_static(b"k")]);
        assert_eq!(
            frame(true, false, &keys, true).unwrap(),
            b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
        );
        assert_eq!(
            frame(false, true, &Invalid::All, false).unwrap(),
            b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
        );
        // A flush's null in the tracking client's protocol, not the target's.
        assert_eq!(
            frame(false, true, &Invalid::All, true).unwrap(),
            b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n_\r\n"
        );
        assert!(frame(false, false, &keys, false).is_none());
    }
}
