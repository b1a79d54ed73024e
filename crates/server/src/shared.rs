//! State shared by all threads: configuration, the threads' inboxes, statistics, the client
//! registry, the slow log. Nothing here is on the data path: keys and values are only ever
//! touched by the shard that owns them.

use crate::config::Config;
use crate::msg::Msg;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A thread's inbox: a channel plus a waker that is poked only when the thread is asleep.
///
/// Two flags make the wake-up rare. `notified` says "the channel may hold messages": senders
/// set it after their message is in the channel, the owner clears it before it drains, and
/// skips the channel while it is clear. `sleeping` says "the owner is about to block, or is
/// blocked, in its wait for events": the owner sets it, then looks at `notified` once more and
/// blocks only if that is still clear. A sender wakes the owner only when it is the one that
/// flipped `notified` and it sees `sleeping` set. All four accesses are sequentially
/// consistent, so of an owner's (store `sleeping`, load `notified`) and a sender's (swap
/// `notified`, load `sleeping`) one pair sees the other: either the owner sees the message
/// and does not block, or the sender sees the owner asleep and wakes it. A thread that is
/// busy, however many messages it drains a turn, costs its senders no system call.
pub struct Inbox {
    pub tx: Mutex<Option<Sender<Msg>>>,
    pub waker: Arc<mio::Waker>,
    pub notified: AtomicBool,
    pub sleeping: AtomicBool,
}

impl Inbox {
    pub fn new(tx: Sender<Msg>, waker: Arc<mio::Waker>) -> Inbox {
        Inbox {
            tx: Mutex::new(Some(tx)),
            waker,
            notified: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
        }
    }

    /// After a message is in the channel: wakes the owner if this call flipped `notified`
    /// and the owner is asleep (see the type's comment).
    fn notify(&self) {
        if !self.notified.swap(true, Ordering::SeqCst) && self.sleeping.load(Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
    }

    /// The owner, before a wait for events that may block: true if it may block (nothing was
    /// posted meanwhile); then `awake` must follow the wait. False: a message is waiting, and
    /// the owner must not block.
    pub fn may_sleep(&self) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        if self.notified.load(Ordering::SeqCst) {
            self.sleeping.store(false, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// The owner, after a wait for events that `may_sleep` allowed to block.
    pub fn awake(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
    }
}

thread_local! {
    /// Per-thread clones of every inbox's sender (Sender is cheap to use but not Sync-free to
    /// share without a lock; each thread keeps its own copies).
    static SENDERS: std::cell::RefCell<Vec<Sender<Msg>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Per-command statistics of one thread (written only by that thread).
#[derive(Default)]
pub struct CmdStat {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    pub rejected: AtomicU64,
    pub failed: AtomicU64,
    /// Latency histogram (latency-tracking).
    pub hist: crate::latency::Hist,
}

/// Counters of one thread; the owner updates them with relaxed load+store (no contention),
/// INFO sums them over threads.
#[derive(Default)]
pub struct ThreadStats {
    pub commands: AtomicU64,
    pub connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub net_input: AtomicU64,
    pub net_output: AtomicU64,
    pub expired_keys: AtomicU64,
    /// The active expiry cycle: µs spent in it, and the times it stopped at its time limit.
    pub expire_cycle_usec: AtomicU64,
    pub expire_cycle_time_cap: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub total_error_replies: AtomicU64,
    /// Successful calls of write commands that changed nothing (a SETBIT of the bit's own
    /// value...): INFO's rdb_changes_since_last_save leaves them out, as Redis does.
    pub unchanged_writes: AtomicU64,
    /// Successful calls of write commands, and those of them that changed nothing, since
    /// start (not reset by CONFIG RESETSTAT): Redis's `server.dirty`, summed over threads
    /// (`persist::dirty`).
    pub dirty: AtomicU64,
    pub undirty: AtomicU64,
    /// Turns of the thread's event loop, the time they took (µs; from the end of the wait for
    /// events to the end of the turn: Redis's `eventloop_duration_sum`), and the longest one.
    pub eventloop_cycles: AtomicU64,
    pub eventloop_usec: AtomicU64,
    pub eventloop_max_usec: AtomicU64,
    pub clients: AtomicI64,
    /// Keys evicted by this shard (maxmemory), and the keys it could evict now under the
    /// policy in force, as it last published them (evict.rs splits the excess by them).
    pub evicted_keys: AtomicU64,
    pub evictable: AtomicU64,
    /// Bytes this shard still has to free of its last share of the excess (evict.rs).
    pub evict_owed: AtomicU64,
    /// When this shard last took its eviction baseline (unix ms).
    pub evict_baseline_ms: AtomicU64,
    pub cmd: Vec<CmdStat>,
}

impl ThreadStats {
    /// Zeroes the counters (CONFIG RESETSTAT). Call it on the owning thread: only the owner
    /// writes them. `clients` is a gauge, not a counter, and stays.
    pub fn reset(&self) {
        for a in [
            &self.commands,
            &self.connections,
            &self.rejected_connections,
            &self.net_input,
            &self.net_output,
            &self.expired_keys,
            &self.evicted_keys,
            &self.expire_cycle_usec,
            &self.expire_cycle_time_cap,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.total_error_replies,
            &self.unchanged_writes,
            &self.eventloop_cycles,
            &self.eventloop_usec,
            &self.eventloop_max_usec,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        for c in &self.cmd {
            for a in [&c.calls, &c.usec, &c.rejected, &c.failed] {
                a.store(0, Ordering::Relaxed);
            }
            c.hist.reset();
        }
    }
}

/// Adds to a counter owned by the current thread.
pub fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

pub struct SlowlogEntry {
    pub id: u64,
    pub time: i64,
    pub micros: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: String,
}

/// What CLIENT LIST and friends know about a client without asking its thread.
pub struct ClientHandle {
    pub id: u64,
    pub thread: usize,
    /// Its connection on that thread (where redirected invalidations go).
    pub conn: crate::msg::ConnRef,
    pub kill: AtomicBool,
}

/// The addresses the threads listen on.
#[derive(Default)]
pub struct Listening {
    /// Every thread has a listener on each (or will, once the steps sent to it have run).
    pub addrs: Vec<std::net::SocketAddr>,
    /// Addresses no longer wanted, with how many threads have yet to close their listener
    /// there (an address may be listed more than once).
    pub closing: Vec<(std::net::SocketAddr, usize)>,
}

/// The time commands see while an AOF is replayed (i64::MIN: the real time). Redis expires
/// nothing while it loads; a clock stopped before every TTL does the same here (aof.rs).
static FROZEN_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(i64::MIN);

/// Stops the clock at `ms` (None: it runs again).
pub fn freeze_clock(ms: Option<i64>) {
    FROZEN_MS.store(ms.unwrap_or(i64::MIN), Ordering::SeqCst);
}

/// A command's time `now`, or the wall clock while an AOF replay has stopped the clock: the
/// time a command records as when something happened (a pending entry's delivery time and the
/// bound XCLAIM's TIME is clamped to, a consumer's seen time). Redis's clock runs while it
/// loads, so a replayed `XCLAIM ... TIME t` keeps `t`.
pub fn recorded_time(now: i64) -> i64 {
    if FROZEN_MS.load(Ordering::Relaxed) == i64::MIN {
        now
    } else {
        Shared::real_now_ms()
    }
}

pub struct Shared {
    pub config: Config,
    pub threads: usize,
    pub databases: usize,
    pub inboxes: Vec<Inbox>,
    pub stats: Vec<ThreadStats>,
    pub started: Instant,
    pub started_unix: i64,
    pub next_client_id: AtomicU64,
    pub connected: AtomicUsize,
    pub clients: Mutex<HashMap<u64, Arc<ClientHandle>>>,
    pub shutdown: AtomicBool,
    /// A SIGTERM / SIGINT to act on (its number; 0: none): thread 0's cron runs the shutdown
    /// (Redis's `shutdown_asap`), and clears it when the shutdown fails.
    pub shutdown_asap: std::sync::atomic::AtomicI32,
    /// The cron's shutdown task is running.
    pub shutdown_running: AtomicBool,
    pub slowlog: Mutex<std::collections::VecDeque<SlowlogEntry>>,
    pub slowlog_next_id: AtomicU64,
    /// The latency monitor's events (LATENCY LATEST, HISTORY, ...).
    pub latency: crate::latency::Monitor,
    pub errorstats: Mutex<std::collections::BTreeMap<String, u64>>,
    pub monitors: AtomicUsize,
    /// CLIENT PAUSE: end time in unix ms (0 = not paused) and whether only writes are paused.
    /// (Shared with every database, whose expiry it freezes: `Db::freeze_expiry_until`.)
    pub pause_until: Arc<AtomicI64>,
    pub pause_writes_only: AtomicBool,
    /// FAILOVER's state: it holds writes back too (failover.rs).
    pub failover: crate::failover::Failover,
    pub active_expire_enabled: AtomicBool,
    /// maxmemory's eviction round, shared by the shards (evict.rs).
    pub evict_round: crate::evict::Round,
    /// Where the threads listen (CONFIG SET port / bind changes it).
    pub listening: Mutex<Listening>,
    pub executable: String,
    pub config_file: String,
    /// What INFO samples and keeps beyond the counters (memory peak, rates, lazy freeing).
    pub metrics: Arc<crate::cmd::server::Metrics>,
    /// Pub/Sub subscriptions of every client.
    pub pubsub: crate::pubsub::Registry,
    /// Client tracking's process-wide part (counters, BCAST prefixes).
    pub tracking: crate::tracking::Global,
    /// The global order of multi-shard transactions: held while one posts its parts to every
    /// shard (sched.rs).
    pub sequencer: Mutex<()>,
    /// Lua scripts: the bodies loaded on any thread, SCRIPT FLUSH, kill switches.
    pub scripts: crate::cmd::scripting::Scripts,
    /// Background saves (bgsave.rs): in progress, last status, for INFO persistence.
    pub bgsaves: crate::bgsave::Bgsaves,
    /// Snapshots: last save, loading (persist/).
    pub persist: crate::persist::State,
    /// The append-only file's writer and state (aof.rs).
    pub aof: crate::aof::Aof,
    /// Replication: this server's history, the primary it follows (replica.rs).
    pub repl: crate::replica::Replication,
}

impl Shared {
    /// Posts each message to its thread's inbox, all under the sequencer's mutex, so that every
    /// thread receives such groups in the same relative order (sched.rs); the wake-ups follow
    /// outside the mutex. A message for the calling thread goes through its inbox too (the
    /// local queue would let it pass messages already in the inbox): the caller is awake and
    /// pumps it, so it sets the flag without a wake-up.
    pub fn send_ordered(&self, msgs: Vec<(usize, Msg)>) {
        let me = crate::exec::THREAD.with(|c| c.get());
        let mut wake: smallvec::SmallVec<[usize; 8]> = smallvec::SmallVec::new();
        {
            let _order = self.sequencer.lock().unwrap_or_else(|e| e.into_inner());
            SENDERS.with(|s| {
                let mut s = s.borrow_mut();
                if s.is_empty() {
                    for inbox in &self.inboxes {
                        s.push(inbox.tx.lock().unwrap().clone().expect("inbox open"));
                    }
                }
                for (t, m) in msgs {
                    let _ = s[t].send(m);
                    wake.push(t);
                }
            });
        }
        for t in wake {
            let inbox = &self.inboxes[t];
            if t == me {
                inbox.notified.store(true, Ordering::SeqCst);
            } else {
                inbox.notify();
            }
        }
    }

    /// Sends a message to thread `t`, waking it if it is asleep.
    pub fn send(&self, t: usize, m: Msg) {
        SENDERS.with(|s| {
            let mut s = s.borrow_mut();
            if s.is_empty() {
                for inbox in &self.inboxes {
                    s.push(inbox.tx.lock().unwrap().clone().expect("inbox open"));
                }
            }
            // A send fails only when the receiving thread has exited (shutdown): drop it.
            let _ = s[t].send(m);
        });
        self.inboxes[t].notify();
    }

    /// Unix time in milliseconds. Read once per loop turn: one vDSO call, no `SystemTime`
    /// arithmetic (a subtraction and a Result per call in std).
    pub fn now_ms() -> i64 {
        let frozen = FROZEN_MS.load(Ordering::Relaxed);
        if frozen != i64::MIN {
            return frozen;
        }
        Shared::real_now_ms()
    }

    /// The wall clock, even while an AOF replay has stopped [`Shared::now_ms`] (log lines).
    pub fn real_now_ms() -> i64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime only writes the timespec it is given, which lives on this
        // stack frame; CLOCK_REALTIME exists on every Linux. Tested by `now_ms_is_unix_time`.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
    }

    pub fn now_us() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0)
    }

    pub fn sum(&self, f: impl Fn(&ThreadStats) -> &AtomicU64) -> u64 {
        self.stats
            .iter()
            .map(|s| f(s).load(Ordering::Relaxed))
            .sum()
    }

    pub fn record_error(&self, reply: &[u8]) {
        // reply is "-PREFIX rest\r\n"
        let body = &reply[1..];
        let end = body
            .iter()
            .position(|&b| b == b' ' || b == b'\r')
            .unwrap_or(body.len());
        let prefix = String::from_utf8_lossy(&body[..end]).into_owned();
        let mut m = self.errorstats.lock().unwrap();
        if m.len() < 128 || m.contains_key(&prefix) {
            *m.entry(prefix).or_insert(0) += 1;
        }
    }

    pub fn paused(&self, now: i64, is_write: bool) -> bool {
        let until = self.pause_until.load(Ordering::Relaxed);
        (until != 0 && now < until && (is_write || !self.pause_writes_only.load(Ordering::Relaxed)))
            || (is_write && self.failover.pausing())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn now_ms_is_unix_time() {
        let std_ms = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
        };
        let before = std_ms(std::time::SystemTime::now());
        let ours = super::Shared::now_ms();
        let after = std_ms(std::time::SystemTime::now());
        assert!(before <= ours && ours <= after, "{before} {ours} {after}");
    }
}
