//! The transaction scheduler of one shard: key-level intent locks granted in one global order
//! (VLL: Ren, Thomson, Abadi, "Lightweight Locking for Main Memory Database Systems", VLDB
//! 2012; Dragonfly schedules its transactions the same way). Sans-I/O: the worker owns one
//! [`Sched`] per shard and feeds it the messages; the model test at the bottom drives it with
//! random transactions and random message interleavings.
//!
//! Why: a command on keys of several shards must look atomic and isolated, as everything does
//! in Redis, without stopping the shards it does not touch. The first design took each shard's
//! lock by message, one shard after the other in ascending order (ordered acquisition rules
//! out deadlock), then ran, then released: a transaction over two shards paid three round
//! trips and a release, and held whole shards, so every other command of those shards waited.
//!
//! How:
//! - **One order.** A transaction over several shards takes the global sequencer's mutex
//!   (`exec.rs`), posts one `Schedule` message to each of its shards, and lets go. Messages on
//!   one inbox arrive in the order they were sent, so every shard sees the multi-shard
//!   transactions in the same relative order: the mutex's. A single-shard transaction needs no
//!   mutex: one shard's arrival order is all that orders it.
//! - **Intents, not shard locks.** A part declares its keys (read or write), or the whole
//!   shard. It is granted when nothing granted conflicts with it *and* no earlier waiting part
//!   does; otherwise it waits in the shard's FIFO. So a part waits only behind earlier
//!   transactions on the same keys, and conflicting transactions run in the global order on
//!   every shard: the conflict graph follows that order, has no cycle, and the execution is
//!   serializable. No part waits for a later one, so there is no deadlock (the earliest
//!   unfinished transaction can always run).
//! - **Work known up front runs in that one message.** MSET, MGET, DEL, EXISTS, UNLINK, TOUCH:
//!   the part carries its closure, runs when granted and sends its result back. Its intents
//!   stay held until every part of the transaction has run (a shared [`Quorum`] counts them
//!   down), so no command sees half of it, and no later one (whose reply could show it) sees
//!   it before its last part has run: what Redis's single thread gives, strict serializability.
//!   The release costs no message: a shard drops intents whose quorum reached zero when it
//!   next looks ([`Sched::sweep`]); only a shard with work waiting behind them asks for a
//!   wake-up ([`Quorum::wait`]), sent by the shard that runs the last part.
//! - **Reservations.** MULTI/EXEC, WATCH, blocking commands, RENAME, and every other
//!   multi-step handler reserve their shards (one message each, granted in parallel), run
//!   their steps, and release with one message each.
//! - **Commands outside transactions** (the single-key fast path) do not queue here: they run
//!   unless a *granted* intent covers their key, in which case they wait (the worker defers
//!   them in FIFO order with everything that arrives after them). A part that waits has not
//!   run anything yet, so letting single-key work pass it is safe.

use smallvec::SmallVec;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

pub type TxId = u64;

/// A key's 64-bit fingerprint: what intents lock. Computed once, where the transaction is
/// planned, from the key's bytes with a hash seeded once per process, so that every thread
/// computes the same one. Two keys with one fingerprint only make their transactions wait for
/// each other (a needless conflict), never miss a real one; with 64 bits that is rare enough
/// not to matter, and the seed keeps clients from choosing colliding keys. Locking
/// fingerprints instead of the keys' bytes spares each intent a reference-counted copy of its
/// key (an atomic increment where the plan is made, and a decrement on the shard thread that
/// drops it), and makes the shard's lock table a map of integers.
pub fn fingerprint(key: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    static SEED: std::sync::OnceLock<foldhash::fast::FixedState> = std::sync::OnceLock::new();
    SEED.get_or_init(|| {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()).rotate_left(32);
        foldhash::fast::FixedState::with_seed(seed)
    })
    .hash_one(key)
}

/// What a part of a transaction locks on one shard. Keys are locked in every database at once
/// (a transaction may SELECT, MOVE or COPY ... DB between its keys; the same name in two
/// databases then conflicts needlessly, which is rare and harmless).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Intents {
    /// The whole shard (FLUSHALL, SORT with patterns, keyless commands in EXEC, ...).
    pub whole: bool,
    /// Keys' fingerprints ([`fingerprint`]), each with whether it is written; none twice.
    pub keys: SmallVec<[(u64, bool); 4]>,
    /// The keys a tracking client's read command reads here, by name (CLIENT TRACKING
    /// records them on the shard while they are held: `Tx::run_parts`); empty otherwise.
    pub reads: Vec<bytes::Bytes>,
}

impl Intents {
    pub fn whole() -> Intents {
        Intents {
            whole: true,
            ..Intents::default()
        }
    }

    /// `keys`, all read, by a command whose reads are tracked when `tracked` (see `reads`).
    pub fn of_reads(keys: &[bytes::Bytes], tracked: bool) -> Intents {
        let mut i = Intents::of_keys(keys, false);
        if tracked {
            i.reads = keys.to_vec();
        }
        i
    }

    /// Adds a key (a write wins over a read of the same key). Linear in the keys so far: for
    /// many keys, [`Intents::push`] them and [`Intents::normalize`] once.
    pub fn add(&mut self, key: &[u8], write: bool) {
        let fp = fingerprint(key);
        match self.keys.iter_mut().find(|(k, _)| *k == fp) {
            Some(e) => e.1 |= write,
            None => self.keys.push((fp, write)),
        }
    }

    /// Adds a key that may already be there (see [`Intents::normalize`]).
    pub fn push(&mut self, key: &[u8], write: bool) {
        self.keys.push((fingerprint(key), write));
    }

    /// `keys`, all read or all written.
    pub fn of_keys<K: AsRef<[u8]>>(keys: &[K], write: bool) -> Intents {
        let mut i = Intents::default();
        for k in keys {
            i.push(k.as_ref(), write);
        }
        i.normalize();
        i
    }

    /// Merges repeated keys (a write wins).
    pub fn normalize(&mut self) {
        if self.keys.len() < 2 {
            return;
        }
        self.keys
            .sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        // Sorted with the write first among equal keys: keeping the first of each keeps it.
        self.keys.dedup_by(|b, a| a.0 == b.0);
    }

    fn conflicts(&self, other: &Intents) -> bool {
        if self.whole || other.whole {
            return true;
        }
        if self.keys.len() * other.keys.len() > 256 {
            let (small, big) = if self.keys.len() < other.keys.len() {
                (self, other)
            } else {
                (other, self)
            };
            let map: HashMap<u64, bool, FingerprintHasher> = big.keys.iter().copied().collect();
            return small
                .keys
                .iter()
                .any(|(k, w)| map.get(k).is_some_and(|ow| *w || *ow));
        }
        self.keys
            .iter()
            .any(|(k, w)| other.keys.iter().any(|(ok, ow)| (*w || *ow) && ok == k))
    }
}

/// Maps keyed by fingerprints need no hashing of their own: a fingerprint already is a
/// well-mixed hash.
type FingerprintHasher = std::hash::BuildHasherDefault<PassThrough>;

#[derive(Default)]
struct PassThrough(u64);

impl std::hash::Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64s are hashed here; any other input still gets a deterministic value.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// [`Sched::trim`] shrinks the granted-intents map only past this much room (a map this small
/// stays in cache anyway; shrinking it would only cost regrowth), down to this much.
const TRIM_ABOVE: usize = 1024;
const TRIM_TO: usize = 64;

/// The parts of one transaction that are still to run, and the shards waiting for all of them
/// to have run (to drop the intents the ones that ran hold).
#[derive(Debug)]
pub struct Quorum {
    remaining: AtomicU32,
    /// Shards to tell when `remaining` reaches zero: bit `s` for shard `s`, bit 63 for every
    /// shard from 63 on (they are all told).
    waiters: AtomicU64,
}

impl Quorum {
    pub fn new(parts: usize) -> Arc<Quorum> {
        Arc::new(Quorum {
            remaining: AtomicU32::new(parts as u32),
            waiters: AtomicU64::new(0),
        })
    }

    pub fn complete(&self) -> bool {
        self.remaining.load(Ordering::SeqCst) == 0
    }

    /// One part has run. When it was the last: the shards to wake (a bit set, see `waiters`).
    pub fn part_done(&self) -> Option<u64> {
        if self.remaining.fetch_sub(1, Ordering::SeqCst) == 1 {
            Some(self.waiters.swap(0, Ordering::SeqCst))
        } else {
            None
        }
    }

    /// Asks for shard `shard` to be woken when the last part has run; false when it has run
    /// already (the caller sweeps instead of waiting). Both sides use SeqCst, so either the
    /// last part sees this bit or this sees `remaining` at zero.
    pub fn wait(&self, shard: usize) -> bool {
        self.waiters
            .fetch_or(1u64 << shard.min(63), Ordering::SeqCst);
        !self.complete()
    }
}

/// The shards in a waiter bit set (see [`Quorum::part_done`]), out of `nshards`.
pub fn waiter_shards(bits: u64, nshards: usize) -> impl Iterator<Item = usize> {
    (0..nshards).filter(move |&s| bits & (1u64 << s.min(63)) != 0)
}

#[derive(Default, Clone, Copy, Debug)]
struct Count {
    writers: u32,
    readers: u32,
}

struct Holder {
    tx: TxId,
    intents: Intents,
    /// Released when every part of its transaction has run (no release message).
    quorum: Option<Arc<Quorum>>,
}

struct Waiting<P> {
    tx: TxId,
    intents: Intents,
    quorum: Option<Arc<Quorum>>,
    part: P,
}

/// One shard's granted intents and waiting parts. `P` is what a part carries (the worker's
/// closure or grant completion).
pub struct Sched<P> {
    /// Granted intents by key fingerprint.
    keys: HashMap<u64, Count, FingerprintHasher>,
    whole: bool,
    holders: Vec<Holder>,
    waiting: VecDeque<Waiting<P>>,
}

impl<P> Default for Sched<P> {
    fn default() -> Self {
        Sched {
            keys: HashMap::default(),
            whole: false,
            holders: Vec::new(),
            waiting: VecDeque::new(),
        }
    }
}

/// A part granted: its transaction and payload.
pub struct Granted<P> {
    pub tx: TxId,
    pub part: P,
}

impl<P> Sched<P> {
    /// Nothing held (nothing waits either: a part waits only behind something held).
    pub fn idle(&self) -> bool {
        self.holders.is_empty()
    }

    pub fn holds(&self, tx: TxId) -> bool {
        self.holders.iter().any(|h| h.tx == tx)
    }

    /// Holders and waiting parts (INFO, tests).
    pub fn len(&self) -> (usize, usize) {
        (self.holders.len(), self.waiting.len())
    }

    /// Whether a command outside transactions on `key` must wait (after a sweep).
    pub fn blocks_key(&self, key: &[u8], write: bool) -> bool {
        if self.whole {
            return true;
        }
        if self.keys.is_empty() {
            return false;
        }
        match self.keys.get(&fingerprint(key)) {
            None => false,
            Some(c) => c.writers > 0 || (write && c.readers > 0),
        }
    }

    /// Whether a key is held by a transaction other than `me` (any, for None).
    pub fn held_by_other(&self, key: &[u8], me: Option<TxId>) -> bool {
        let fp = fingerprint(key);
        self.holders.iter().any(|h| {
            Some(h.tx) != me && (h.whole() || h.intents.keys.iter().any(|(k, _)| *k == fp))
        })
    }

    fn granted_conflict(&self, i: &Intents) -> bool {
        if i.whole {
            return !self.holders.is_empty();
        }
        if self.whole {
            return true;
        }
        i.keys.iter().any(|(k, w)| match self.keys.get(k) {
            None => false,
            Some(c) => c.writers > 0 || (*w && c.readers > 0),
        })
    }

    fn grant(&mut self, tx: TxId, intents: Intents, quorum: Option<Arc<Quorum>>) {
        if intents.whole {
            self.whole = true;
        }
        for (k, w) in &intents.keys {
            let c = self.keys.entry(*k).or_default();
            if *w {
                c.writers += 1;
            } else {
                c.readers += 1;
            }
        }
        self.holders.push(Holder {
            tx,
            intents,
            quorum,
        });
    }

    /// A part arrives (in the global order). Granted now: its payload back, to run. Otherwise
    /// it waits, and a later [`Sched::release`] or [`Sched::sweep`] grants it.
    ///
    /// A part with a quorum that is granted and then runs should call [`Sched::ran`].
    pub fn schedule(
        &mut self,
        tx: TxId,
        intents: Intents,
        quorum: Option<Arc<Quorum>>,
        part: P,
    ) -> Option<P> {
        let blocked = self.granted_conflict(&intents)
            || self.waiting.iter().any(|w| w.intents.conflicts(&intents));
        if blocked {
            self.waiting.push_back(Waiting {
                tx,
                intents,
                quorum,
                part,
            });
            None
        } else {
            self.grant(tx, intents, quorum);
            Some(part)
        }
    }

    /// Drops `tx`'s intents and grants, in order, the waiting parts that no longer conflict
    /// with anything granted or with an earlier waiting part.
    pub fn release(&mut self, tx: TxId) -> Vec<Granted<P>> {
        let Some(i) = self.holders.iter().position(|h| h.tx == tx) else {
            return Vec::new();
        };
        let h = self.holders.swap_remove(i);
        self.drop_intents(&h.intents);
        self.grant_waiting()
    }

    /// Releases every holder whose transaction's parts have all run.
    pub fn sweep(&mut self) -> Vec<Granted<P>> {
        let mut any = false;
        let mut i = 0;
        while i < self.holders.len() {
            if self.holders[i]
                .quorum
                .as_ref()
                .is_some_and(|q| q.complete())
            {
                let h = self.holders.swap_remove(i);
                self.drop_intents(&h.intents);
                any = true;
            } else {
                i += 1;
            }
        }
        if any {
            self.grant_waiting()
        } else {
            Vec::new()
        }
    }

    /// Gives back the room of the granted-intents map when it holds far fewer keys than it
    /// has room for (the worker's cron calls it). A map never shrinks by itself: one MSET of
    /// thousands of keys (or a burst of them, as a bulk load pipelines) leaves it with room
    /// for all of them for ever, and every later intent then lands on a random line of that
    /// room: a likely cache miss per key granted and per key released. (Measured on the 2-core
    /// machine, MSETs of 10 keys over two shards after a load by MSETs of 1,000: the
    /// scheduler's functions took ~5% of the server's CPU in `perf`, `grant` 2.4%; trimmed,
    /// `grant` took 2.0%, a gain below that machine's noise in CPU per operation.) Run once a
    /// cron tick, a workload that keeps needing the room grows it again at most that often.
    pub fn trim(&mut self) {
        let (len, cap) = (self.keys.len(), self.keys.capacity());
        if cap > TRIM_ABOVE && len * 8 < cap {
            self.keys.shrink_to((len * 2).max(TRIM_TO));
        }
    }

    /// Room for granted intents' keys (tests).
    pub fn key_capacity(&self) -> usize {
        self.keys.capacity()
    }

    /// Whether a sweep could release something now.
    pub fn sweepable(&self) -> bool {
        self.holders
            .iter()
            .any(|h| h.quorum.as_ref().is_some_and(|q| q.complete()))
    }

    /// Whether every holder here is a transaction whose parts have all run (its intents not
    /// yet swept); if not, makes sure shard `shard` is woken when that changes: an unfinished
    /// quorum holder is asked to wake it, a reservation's release is a message anyway. For
    /// what waits for the commands holding this shard to be done, such as BCAST's messages
    /// (worker/tracking.rs): a shard whose part ran before the last one, elsewhere, gets no
    /// other turn when it finishes.
    pub fn holders_done_or_wake(&self, shard: usize) -> bool {
        let mut done = true;
        for h in &self.holders {
            match &h.quorum {
                None => done = false,
                Some(q) if !q.complete() && q.wait(shard) => done = false,
                Some(_) => {}
            }
        }
        done
    }

    /// Asks every unfinished quorum holder to wake shard `shard` when it finishes (something
    /// here waits behind them). False when one finished meanwhile: sweep now instead.
    pub fn wait_for_holders(&self, shard: usize) -> bool {
        let mut all_pending = true;
        for h in &self.holders {
            if let Some(q) = &h.quorum {
                all_pending &= q.wait(shard);
            }
        }
        all_pending
    }

    fn drop_intents(&mut self, intents: &Intents) {
        if intents.whole {
            self.whole = false;
        }
        for (k, w) in &intents.keys {
            if let Some(c) = self.keys.get_mut(k) {
                if *w {
                    c.writers -= 1;
                } else {
                    c.readers -= 1;
                }
                if c.writers == 0 && c.readers == 0 {
                    self.keys.remove(k);
                }
            }
        }
    }

    fn grant_waiting(&mut self) -> Vec<Granted<P>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.waiting.len() {
            let w = &self.waiting[i];
            let blocked = self.granted_conflict(&w.intents)
                || self
                    .waiting
                    .iter()
                    .take(i)
                    .any(|e| e.intents.conflicts(&w.intents));
            if blocked {
                i += 1;
                continue;
            }
            let w = self.waiting.remove(i).expect("index in range");
            self.grant(w.tx, w.intents, w.quorum);
            out.push(Granted {
                tx: w.tx,
                part: w.part,
            });
        }
        out
    }
}

impl Holder {
    fn whole(&self) -> bool {
        self.intents.whole
    }
}

#[cfg(test)]
mod tests;
