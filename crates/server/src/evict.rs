//! maxmemory: keeping the whole process under its memory budget by evicting keys, the way
//! Redis 7.2 does it (evict.c), on a server whose keyspace is split over shards.
//!
//! **What is measured.** The budget is the process's: the allocator's count of bytes in use
//! (alloc.rs: every thread adds to a counter of its own, INFO's `used_memory` sums them), as
//! Redis compares `zmalloc_used_memory()` with `maxmemory` (minus the replication and AOF
//! buffers, which Darner does not have: `mem_not_counted_for_evict` is 0), **plus** the
//! resident memory that count does not explain: how much more the process's RSS grew since
//! start-up than its bytes in use did (sampled ten times a second: [`sample_overhead`] says
//! how much of it counts, and when).
//! Why: the promise is about RSS (at most 1.05 × maxmemory over the empty server's), and
//! under a cache's churn the allocator keeps partly used pages of the size classes that come
//! and go: 4-7% over the counted bytes at 64 MB (bench/eviction.py), which the counted bytes
//! alone let through. Counting what passes 3% of the budget makes Darner evict that much
//! earlier instead; where the allocator wastes little nothing changes. Redis counts only its
//! allocator's bytes.
//!
//! **Splitting the excess over shards.** Each shard evicts only its own keys, on its own
//! thread (no lock on the data path). Reading every thread's counter is 16-64 cache lines
//! that those threads keep writing, too dear for every command: a shard reads the total (a
//! *baseline*) at most once a millisecond, on every cron tick, and when its own counter says
//! it may be over (then at most every 100 µs); between baselines it reads its own counter.
//! A shard whose baseline finds the process over the budget starts an eviction *round* (one
//! process-wide record: a number and the excess) if no shard still owes anything of the
//! last round, or that one is 10 ms old, and wakes the other shards; never when no shard
//! has anything to evict, and a round that evicted nothing is followed by the next one
//! millisecond later at the soonest (otherwise shards that cannot pay would start rounds
//! and wake each other without end). Each shard takes part
//! in each round once, as soon as it sees it (a load on every check): its part is the
//! round's excess times its weight, the keys it could evict under the policy (all its keys,
//! or those with a TTL under `volatile-*`) over all shards' (each shard publishes its count
//! in `ThreadStats::evictable` every loop turn): keys are spread over shards by hash, so
//! that is about its share of the memory, and a shard with nothing evictable gets no part.
//! It then evicts until the bytes it freed cover its part (measured by its own counter
//! around each eviction, so that blocks allocated on one thread and freed on another, a
//! batch's arguments, do not count), and publishes what it still owes
//! (`ThreadStats::evict_owed`); a shard that runs out of keys gives up its part, which the
//! next round puts on the others. A new round's part replaces what a shard had left of the
//! last one, since the new excess counts that too, so the parts paid never add up to more
//! than the excess. (Why rounds: the first version had each shard take its weight of the
//! excess at each baseline; a busy shard re-baselines every millisecond while an idle one
//! evicts at its next cron tick, so the busy one took a part of the idle one's share each
//! time and emptied itself: half the hot keys of an LRU test went with the cold ones.)
//!
//! **When.** Before a command runs on this thread (Redis: before every command, in
//! processCommand), before a batch of commands from another thread runs on this shard, at
//! the start of each loop turn and on every cron tick (so an idle shard still gives back its
//! share, e.g. after CONFIG SET maxmemory shrank the budget). No shard evicts while a
//! transaction holds intents on it (as the active expiry cycle): a transaction's keys do not
//! vanish between its steps, as in Redis, where nothing is evicted inside MULTI/EXEC.
//!
//! **What.** Redis's approximated policies. Under `*-lru`, `*-lfu` and `volatile-ttl` each step
//! samples `maxmemory-samples` live keys in every non-empty database of the shard (from
//! random buckets, `Table::sample`, as Redis's dictGetSomeKeys) into a pool of the 16 best
//! candidates kept across steps, ranked by idle time, by 255 minus the decayed LFU counter, or
//! by nearness of expiry; the best candidate that still exists is evicted. `*-random` evicts a
//! random key (with a TTL, for `volatile-random`) of the databases in turn. An evicted key is
//! signalled as a write (WATCH, client tracking's invalidation) and publishes the `evicted`
//! keyspace event (class `e`).
//!
//! **Bounded work.** A step stops after Redis's time limit for `maxmemory-eviction-tenacity`
//! (500 µs at the default 10; checked every 16 keys), and the loop then does not sleep until
//! the share is freed (Redis's eviction time proc). A big value is not freed on the spot: it
//! goes through the lazy-free queue (lazyfree.rs), which a step runs in slices (its freed bytes
//! count when they are freed), so an eviction never frees a million elements at once.
//!
//! **OOM.** A command that may grow memory (`denyoom`), or any command queued inside MULTI,
//! is refused with Redis's `-OOM` error when the process is over the budget and nothing can
//! be evicted anywhere: `noeviction`, or no shard has an evictable key (`volatile-*` without
//! keys with a TTL) and no freeing is under way. Reads keep working.

use crate::shard::Shard;
use crate::shared::{bump, Shared};
use darner_engine::Clock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const ERR_OOM: &[u8] = b"OOM command not allowed when used memory > 'maxmemory'.";

/// Redis's EVPOOL_SIZE: the candidates kept between steps.
const POOL_SIZE: usize = 16;
/// How often a shard reads every thread's allocation counter.
const BASELINE_EVERY: Duration = Duration::from_millis(1);
/// How fresh a baseline must be for a shard that looks over the budget to evict on it.
const RECHECK_EVERY: Duration = Duration::from_micros(100);
/// A round that some shard has not paid for this long is replaced by a new one (whose
/// excess counts what is left of it), so that one busy or stuck shard does not hold the
/// others' growth unpaid.
const ROUND_AGE_MS: i64 = 10;
/// Samples per database per step at most, whatever maxmemory-samples says (the pool keeps 16).
const MAX_SAMPLES: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Policy {
    NoEviction,
    Lru { volatile: bool },
    Lfu { volatile: bool },
    Random { volatile: bool },
    Ttl,
}

impl Policy {
    fn of(shared: &Shared) -> Policy {
        let i = shared.config.hot.maxmemory_policy.load(Ordering::Relaxed) as usize;
        match crate::config::MAXMEMORY_POLICIES.get(i).copied() {
            Some("volatile-lru") => Policy::Lru { volatile: true },
            Some("volatile-lfu") => Policy::Lfu { volatile: true },
            Some("volatile-random") => Policy::Random { volatile: true },
            Some("volatile-ttl") => Policy::Ttl,
            Some("allkeys-lru") => Policy::Lru { volatile: false },
            Some("allkeys-lfu") => Policy::Lfu { volatile: false },
            Some("allkeys-random") => Policy::Random { volatile: false },
            _ => Policy::NoEviction,
        }
    }

    fn volatile(self) -> bool {
        match self {
            Policy::Lru { volatile } | Policy::Lfu { volatile } | Policy::Random { volatile } => {
                volatile
            }
            Policy::Ttl => true,
            Policy::NoEviction => false,
        }
    }
}

struct Candidate {
    score: u64,
    db: usize,
    key: Box<[u8]>,
}

/// The process-wide eviction round (see the essay): its number, for a cheap look on every
/// check, and its record under a lock taken once per round.
#[derive(Default)]
pub struct Round {
    id: AtomicU64,
    data: Mutex<RoundData>,
}

#[derive(Default, Clone, Copy)]
struct RoundData {
    id: u64,
    /// Bytes over the budget when it started.
    excess: u64,
    /// Unix ms.
    started_ms: i64,
    /// Every shard's evicted_keys summed when it started.
    evicted_at_start: u64,
}

fn total_evicted(shared: &Shared) -> u64 {
    shared
        .stats
        .iter()
        .map(|s| s.evicted_keys.load(Ordering::Relaxed))
        .sum()
}

/// What a check asks of the worker.
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
pub struct Verdict {
    /// Over maxmemory with nothing to evict anywhere: refuse denyoom commands.
    pub oom: bool,
    /// This shard started a round: wake the others so that they take their parts now.
    pub wake: bool,
    /// Keys were evicted (their tracking invalidations are due).
    pub evicted: bool,
}

/// One shard's eviction state (the worker owns it).
#[derive(Default)]
pub struct Evictor {
    /// Candidates, lowest score first.
    pool: Vec<Candidate>,
    /// When the baseline was taken (None: never, or maxmemory was off).
    baseline_at: Option<Instant>,
    /// When a baseline was last taken because the process looked over the budget.
    fresh_at: Option<Instant>,
    /// The process's bytes in use at the baseline.
    used: usize,
    /// The unexplained resident memory eviction counts too ([`sample_overhead`]), at the
    /// baseline.
    overhead: usize,
    /// This thread's counter at the baseline.
    counter: isize,
    /// The round this shard took part in last, and the bytes it still has to free of its
    /// part (measured by its counter around each eviction and lazy-free slice, so that
    /// blocks this thread allocated and another freed, or the reverse, do not count).
    round: u64,
    part_left: isize,
    /// What this shard last published as still owed (`ThreadStats::evict_owed`).
    owed: u64,
    /// The last step stopped at its time limit with work left: the loop should not sleep.
    pub pending: bool,
    /// The database the random policies take from next.
    next_db: usize,
}

/// The part of the unexplained resident memory that eviction counts as used now (see
/// [`sample_overhead`]).
static COUNTED_OVERHEAD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn counted_overhead() -> usize {
    COUNTED_OVERHEAD.load(Ordering::Relaxed)
}

/// Samples the resident memory the allocator's count does not explain
/// (`alloc::sample_rss_overhead`) and sets what eviction counts of it. Called by one
/// thread's cron, ten times a second, while a maxmemory is set.
///
/// The first 3% of the budget (at least 256 KiB) are left to the allocator, so a cache keeps
/// its keys where fragmentation is small (counting all of it cost an LRU cache 1% of its hit
/// ratio at 64 MB). A floor of 2 MiB, tried first, let a 16 MB cache pass the bound (1.083). Past that, the
/// counted part follows the unexplained memory up only **while the resident set grows** (by
/// steps of 0.5% of the budget, at least 256 KiB):
/// evicting frees blocks, and pages come back to the system only when wholly empty, so
/// after a shrink of maxmemory (or a burst of deletes) the unexplained part is large and
/// evicting more would not lower it: counting it then would evict every key. While the
/// resident set does not grow, the counted part decays by 0.1% of the budget a second.
/// Only eviction counts it: the OOM refusal stays Redis's (the counted bytes over the
/// budget with nothing left to evict), so a client never gets -OOM while INFO shows room.
pub fn sample_overhead(max: u64) {
    let step = (max as usize / 200).max(256 << 10);
    let (overhead, growing) = crate::alloc::sample_rss_overhead(step);
    let allowance = (max as usize * 3 / 100).max(256 << 10);
    let want = overhead.saturating_sub(allowance);
    let cur = counted_overhead();
    let next = if growing {
        cur.max(want)
    } else {
        cur.saturating_sub(max as usize / 10_000).min(want)
    };
    COUNTED_OVERHEAD.store(next, Ordering::Relaxed);
}

impl Evictor {
    /// Keeps this shard's part of the budget, evicting if needed. `refresh` forces a new
    /// baseline (the cron). Cheap when under the budget: two relaxed loads, and this thread's
    /// counter once the baseline is fresh.
    pub fn check(
        &mut self,
        shard: &mut Shard,
        shared: &Shared,
        now: Instant,
        refresh: bool,
    ) -> Verdict {
        let hot = &shared.config.hot;
        // A replica leaves evicting to its primary (replica-ignore-maxmemory, as Redis).
        let ignored = hot.replica_ignore_maxmemory.load(Ordering::Relaxed)
            && shared.repl.is_replica.load(Ordering::Relaxed);
        let max = if ignored {
            0
        } else {
            hot.maxmemory.load(Ordering::Relaxed)
        };
        let policy = Policy::of(shared);
        let mut v = Verdict::default();
        if max == 0 {
            self.pending = false;
            self.baseline_at = None;
            self.part_left = 0;
            self.publish_owed(shard, shared, 0);
            if refresh {
                // Kept current without a budget too: the first round splits by these.
                shared.stats[shard.id]
                    .evictable
                    .store(evictable(shard, policy), Ordering::Relaxed);
            }
            return v;
        }
        let max = max.min(isize::MAX as u64) as isize;
        let round = shared.evict_round.id.load(Ordering::Acquire);
        if refresh
            || round != self.round
            || self
                .baseline_at
                .is_none_or(|t| now.duration_since(t) >= BASELINE_EVERY)
        {
            v.wake |= self.take_baseline(shard, shared, policy, max, now);
        }
        if (self.used + self.overhead) as isize + crate::alloc::thread_counter() - self.counter
            > max
            && !refresh
        {
            // Over, by the baseline: look again unless it is quite fresh (what this thread
            // allocated and another freed since, a batch's arguments, counts as growth here
            // until the totals are read again).
            let real = Instant::now();
            if self
                .fresh_at
                .is_none_or(|t| real.duration_since(t) >= RECHECK_EVERY)
            {
                self.fresh_at = Some(real);
                v.wake |= self.take_baseline(shard, shared, policy, max, now);
            }
        }
        if policy != Policy::NoEviction && self.part_left > 0 && shard.lock.sched.idle() {
            v.evicted = self.step(shard, shared, policy) > 0;
        }
        self.publish_owed(shard, shared, self.part_left.max(0) as u64);
        if self.used as isize + crate::alloc::thread_counter() - self.counter <= max {
            return v;
        }
        // Still over: refused only if nothing can be evicted anywhere.
        v.oom = policy == Policy::NoEviction
            || (shared
                .stats
                .iter()
                .all(|s| s.evictable.load(Ordering::Relaxed) == 0)
                && shard.dying.is_empty());
        v
    }

    /// Reads the process's total; starts a round if it is over the budget and no shard owes
    /// anything of the last one (or that one is old), and takes part in a round this shard
    /// has not seen. Returns true when it started one.
    fn take_baseline(
        &mut self,
        shard: &Shard,
        shared: &Shared,
        policy: Policy,
        max: isize,
        now: Instant,
    ) -> bool {
        let mine = evictable(shard, policy);
        shared.stats[shard.id]
            .evictable
            .store(mine, Ordering::Relaxed);
        self.used = crate::alloc::used_memory();
        self.overhead = counted_overhead();
        self.counter = crate::alloc::thread_counter();
        self.baseline_at = Some(now);
        let raw = (self.used + self.overhead) as isize - max;
        let round = &shared.evict_round;
        let mut started = false;
        if raw <= 0 {
            // Under the budget: nobody owes anything.
            self.part_left = 0;
        } else {
            let owed: u64 = shared
                .stats
                .iter()
                .map(|s| s.evict_owed.load(Ordering::Relaxed))
                .sum();
            let now_ms = Shared::now_ms();
            // Nothing evictable anywhere: a round would ask nobody for anything, and starting
            // one per check wakes every shard, whose checks start the next (an endless
            // exchange of wake-ups that kept the loops from their sockets).
            let anything = shared
                .stats
                .iter()
                .any(|s| s.evictable.load(Ordering::Relaxed) > 0);
            let evicted = total_evicted(shared);
            let mut d = round.data.lock().unwrap_or_else(|e| e.into_inner());
            // A round that freed nothing (its victims were not to be found) is not followed
            // by the next at once: at most one such round a millisecond.
            let paid = evicted != d.evicted_at_start || now_ms > d.started_ms;
            if anything && ((owed == 0 && paid) || now_ms - d.started_ms >= ROUND_AGE_MS) {
                *d = RoundData {
                    id: d.id + 1,
                    excess: raw as u64,
                    started_ms: now_ms,
                    evicted_at_start: evicted,
                };
                round.id.store(d.id, Ordering::Release);
                started = true;
            }
        }
        let id = round.id.load(Ordering::Acquire);
        if id != self.round {
            let RoundData { id, excess, .. } =
                *round.data.lock().unwrap_or_else(|e| e.into_inner());
            self.round = id;
            let total: u64 = shared
                .stats
                .iter()
                .map(|s| s.evictable.load(Ordering::Relaxed))
                .sum();
            // This shard's weight of the round's excess, rounded up (a shard with any part
            // evicts a key at least). It replaces what was left of the last round: the new
            // excess counts that too.
            let part = if mine == 0 || total == 0 {
                0
            } else {
                (excess as f64 * mine as f64 / total as f64).ceil() as isize
            };
            self.part_left = part;
        }
        started
    }

    fn publish_owed(&mut self, shard: &Shard, shared: &Shared, owed: u64) {
        if owed != self.owed {
            self.owed = owed;
            shared.stats[shard.id]
                .evict_owed
                .store(owed, Ordering::Relaxed);
        }
    }

    /// Evicts this shard's keys until its part of the round is paid, within the tenacity's
    /// time limit; a shard that runs out of keys to evict gives up its part (the next round
    /// puts it on the others).
    fn step(&mut self, shard: &mut Shard, shared: &Shared, policy: Policy) -> u64 {
        let hot = &shared.config.hot;
        let samples = hot
            .maxmemory_samples
            .load(Ordering::Relaxed)
            .clamp(1, MAX_SAMPLES as i64) as usize;
        let limit = time_limit(hot.maxmemory_eviction_tenacity.load(Ordering::Relaxed));
        let start = Instant::now();
        let clock = Clock::at(Shared::now_ms());
        let (mut evicted, mut attempts) = (0u64, 0u64);
        self.pending = false;
        loop {
            if self.part_left <= 0 {
                break;
            }
            // A big value evicted earlier is freed in slices before more keys go: its bytes
            // count once they are really freed.
            for db in &mut shard.dbs {
                if let Some(g) = db.take_graveyard() {
                    shard.dying.push_entries(&shared.metrics, g);
                }
            }
            if !shard.dying.is_empty() {
                let left = limit
                    .unwrap_or(Duration::from_millis(1))
                    .saturating_sub(start.elapsed());
                let before = crate::alloc::thread_counter();
                shard
                    .dying
                    .step(&shared.metrics, left.max(Duration::from_micros(20)));
                self.part_left -= before - crate::alloc::thread_counter();
                if limit.is_some_and(|l| start.elapsed() >= l) {
                    self.pending = true;
                    break;
                }
                continue;
            }
            let victim = match policy {
                Policy::NoEviction => None,
                Policy::Random { volatile } => self.random_victim(shard, volatile, clock),
                _ => self.pool_victim(shard, policy, samples, clock),
            };
            let Some((db, key)) = victim else {
                // Nothing left to evict here: the next round puts the rest on the others.
                self.part_left = 0;
                break;
            };
            let before = crate::alloc::thread_counter();
            if shard.dbs[db].evict(&key) {
                evicted += 1;
                crate::propagate::evicted(db, &key);
            }
            self.part_left -= before - crate::alloc::thread_counter();
            attempts += 1;
            if attempts.is_multiple_of(16) && limit.is_some_and(|l| start.elapsed() >= l) {
                self.pending = true;
                break;
            }
        }
        if evicted > 0 {
            bump(&shared.stats[shard.id].evicted_keys, evicted);
            shared.stats[shard.id]
                .evictable
                .store(evictable(shard, policy), Ordering::Relaxed);
        }
        let us = start.elapsed().as_micros() as u64;
        crate::latency::monitor(shared, "eviction-cycle", us);
        evicted
    }

    /// Refills the pool from every non-empty database and takes the best candidate that
    /// still exists (Redis's evictionPoolPopulate and the walk of the pool from its end).
    fn pool_victim(
        &mut self,
        shard: &mut Shard,
        policy: Policy,
        samples: usize,
        clock: Clock,
    ) -> Option<(usize, Box<[u8]>)> {
        // A pool left with only stale candidates (keys deleted since) is refilled (Redis
        // samples again while keys remain).
        for _ in 0..4 {
            if let Some(v) = self.pool_pick(shard, policy, samples, clock) {
                return Some(v);
            }
        }
        None
    }

    fn pool_pick(
        &mut self,
        shard: &mut Shard,
        policy: Policy,
        samples: usize,
        clock: Clock,
    ) -> Option<(usize, Box<[u8]>)> {
        let volatile = policy.volatile();
        for i in 0..shard.dbs.len() {
            if shard.dbs[i].is_empty() || (volatile && shard.dbs[i].expires() == 0) {
                continue;
            }
            let r = shard.random();
            let pool = &mut self.pool;
            let score = |e: &darner_engine::Entry| match policy {
                Policy::Ttl => u64::MAX - e.expire().unwrap_or(0).max(0) as u64,
                _ => clock.eviction_score(e.clock()),
            };
            let seen = shard.dbs[i].sample(r, samples, volatile, clock.now_ms, |e| {
                offer(pool, score(e), i, e.key());
            });
            if seen == 0 {
                // A sparse table (most keys evicted): the sampled buckets were empty.
                let r = shard.random();
                if let Some(e) = shard.dbs[i].random_entry(r, volatile, clock.now_ms) {
                    offer(pool, score(e), i, e.key());
                }
            }
        }
        while let Some(c) = self.pool.pop() {
            let db = &shard.dbs[c.db];
            if db
                .entry_raw(&c.key)
                .is_some_and(|e| !volatile || e.expire().is_some())
            {
                return Some((c.db, c.key));
            }
        }
        None
    }

    /// A random key of the next non-empty database (round robin, as Redis's next_db).
    fn random_victim(
        &mut self,
        shard: &mut Shard,
        volatile: bool,
        clock: Clock,
    ) -> Option<(usize, Box<[u8]>)> {
        let n = shard.dbs.len();
        for _ in 0..n {
            let i = self.next_db % n;
            self.next_db = self.next_db.wrapping_add(1);
            let db = &shard.dbs[i];
            if db.is_empty() || (volatile && db.expires() == 0) {
                continue;
            }
            // A few places: volatile keys may be rare in the table (a sample looks at many
            // buckets for them).
            for _ in 0..8 {
                let r = shard.random();
                let mut key = None;
                shard.dbs[i].sample(r, 1, volatile, clock.now_ms, |e| {
                    key.get_or_insert_with(|| e.key().into());
                });
                if let Some(k) = key {
                    return Some((i, k));
                }
            }
            // A table emptied by eviction has few keys in many buckets, where a sample
            // finds nothing: then RANDOMKEY's pick, which always lands on an entry.
            let r = shard.random();
            if let Some(e) = shard.dbs[i].random_entry(r, volatile, clock.now_ms) {
                return Some((i, e.key().into()));
            }
        }
        None
    }
}

/// Publishes how many keys this shard could evict under the policy in force (each loop
/// turn: a round started by another shard splits its excess by these, so they must be
/// current when the budget appears, e.g. right after a fill and a CONFIG SET maxmemory).
pub fn publish_evictable(shard: &Shard, shared: &Shared) {
    let n = evictable(shard, Policy::of(shared));
    let slot = &shared.stats[shard.id].evictable;
    if slot.load(Ordering::Relaxed) != n {
        slot.store(n, Ordering::Relaxed);
    }
}

/// Puts a sampled key in the pool if it beats the worst candidate there (or the pool has
/// room); a key already there gets its new score.
fn offer(pool: &mut Vec<Candidate>, score: u64, db: usize, key: &[u8]) {
    if let Some(i) = pool.iter().position(|c| c.db == db && *c.key == *key) {
        pool.remove(i);
    } else if pool.len() >= POOL_SIZE {
        if pool[0].score >= score {
            return;
        }
        pool.remove(0);
    }
    let at = pool.partition_point(|c| c.score < score);
    pool.insert(
        at,
        Candidate {
            score,
            db,
            key: key.into(),
        },
    );
}

/// The keys of `shard` that `policy` may evict.
fn evictable(shard: &Shard, policy: Policy) -> u64 {
    match policy {
        Policy::NoEviction => 0,
        p if p.volatile() => shard.dbs.iter().map(|d| d.expires() as u64).sum(),
        _ => shard.dbs.iter().map(|d| d.len() as u64).sum(),
    }
}

/// Redis's evictionTimeLimitUs: 50 µs per tenacity point up to 10, then 15% more per point;
/// none at 100.
fn time_limit(tenacity: i64) -> Option<Duration> {
    let t = tenacity.clamp(0, 100);
    if t <= 10 {
        Some(Duration::from_micros(50 * t as u64))
    } else if t < 100 {
        Some(Duration::from_micros(
            (500.0 * 1.15f64.powi(t as i32 - 10)) as u64,
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_keeps_the_best_sixteen_in_order() {
        let mut pool = Vec::new();
        for i in 0..40u64 {
            offer(&mut pool, (i * 7919) % 97, 0, format!("k{i}").as_bytes());
        }
        assert_eq!(pool.len(), POOL_SIZE);
        assert!(pool.windows(2).all(|w| w[0].score <= w[1].score));
        let mut all: Vec<u64> = (0..40u64).map(|i| (i * 7919) % 97).collect();
        all.sort_unstable();
        assert_eq!(pool[0].score, all[40 - POOL_SIZE]);
        // A key offered again is rescored, not duplicated.
        offer(&mut pool, 1000, 0, b"k0");
        offer(&mut pool, 1001, 0, b"k0");
        assert_eq!(pool.iter().filter(|c| &*c.key == b"k0").count(), 1);
        assert_eq!(pool.last().unwrap().score, 1001);
    }

    #[test]
    fn tenacity_gives_redis_time_limits() {
        assert_eq!(time_limit(0), Some(Duration::ZERO));
        assert_eq!(time_limit(10), Some(Duration::from_micros(500)));
        assert_eq!(time_limit(11), Some(Duration::from_micros(575)));
        assert_eq!(time_limit(100), None);
    }
}
