//! One thread: an event loop (epoll through mio), the connections it accepted, the shard it
//! owns, and the executor of its transaction tasks.
//!
//! Each loop iteration: wait for socket events or messages (or the next cron tick); read and
//! parse requests; run each command inline when its shard is this thread's and no transaction
//! holds its keys,
//! otherwise batch it per remote shard (one message per shard per read); drain the inbox and
//! the local queue, polling tasks whose hops completed; write what every connection has ready.
//!
//! This file holds the `Worker` itself, its construction, the loop (`run`) and the cron; the
//! rest is split by role, each file an `impl Worker` block:
//! - conn_io.rs: accepting, reading, prefetching, writing, backpressure, closing;
//! - dispatch.rs: parsing a connection's requests and dispatching each (the request path);
//! - route.rs: a request's route, found once: its key positions and where it runs;
//! - direct.rs: multi-shard MSET, MGET, DEL, ... run without a task;
//! - messages.rs: the inbox and local queue, batches from other threads, transaction steps;
//! - scheduling.rs: the transaction scheduler's messages (`Msg::Schedule` / `Run` /
//!   `Release` / `Released`) and the work that waits behind granted intents;
//! - streams.rs: streamed replies;
//! - tracking.rs: client tracking's invalidations;
//! - stats.rs: per-command accounting, the slow log and MONITOR lines.

use crate::cmd::{self, Command, ConnCtx, Handler};
use crate::conn::{ClientState, Conn, ReplyMode};
use crate::exec::{self, post, Executor, Tx, LOCAL, THREAD};
use crate::log;
use crate::msg::{BatchItem, ConnRef, Msg, ReplyBufs};
use crate::shard::{Shard, ShardCtx};
use crate::shared::{bump, ClientHandle, Shared, SlowlogEntry};
use bytes::{Bytes, BytesMut};
use darner_commands::flags;
use darner_engine::Clock;
use darner_resp::{Limits, ReplyWriter, RequestParser};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use smallvec::SmallVec;

mod conn_io;
pub mod direct;
mod dispatch;
mod durability;
mod messages;
mod route;
mod scheduling;
mod stats;
mod streams;
mod tracking;
use dispatch::{run_handler, take_suppress, Owner};
use route::{Routed, To};
use stats::{account, record, record_stats, slowlog_push, Lap};
pub use stats::{calibrate_clock, feed_monitors, record_in_exec};
use std::io::{ErrorKind, Write};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAKER: Token = Token(usize::MAX);
const LISTENER_BASE: usize = usize::MAX - 64;
/// The loop's alarm clock (the cron and blocked clients' timeouts).
const ALARM: Token = Token(LISTENER_BASE - 1);

/// What a [`Msg::Thread`] closure sees: this thread's connections.
pub struct ThreadCtx<'a> {
    pub id: usize,
    pub conns: &'a mut slab::Slab<Conn>,
    pub shared: &'a Shared,
    /// This thread's listeners, each with its address (CONFIG SET port / bind swaps them).
    listeners: &'a mut Vec<(std::net::SocketAddr, TcpListener)>,
    registry: &'a mio::Registry,
}

impl ThreadCtx<'_> {
    /// CONFIG SET port / bind: closes this thread's listeners on the addresses in `removed`
    /// and starts accepting on `add` (already listening: connections wait in their backlog
    /// until now). A connection still in a closed listener's backlog is refused, as Redis's
    /// are when it closes its old listeners.
    pub fn swap_listeners(
        &mut self,
        removed: &[std::net::SocketAddr],
        add: Vec<(std::net::SocketAddr, TcpListener)>,
    ) {
        // Tokens follow the positions in the list: every listener registers anew.
        for (_, l) in self.listeners.iter_mut() {
            let _ = self.registry.deregister(l);
        }
        self.listeners.retain(|(a, _)| !removed.contains(a));
        if !removed.is_empty() {
            // Closed here: one thread fewer to wait for (see `Listening::closing`).
            let mut l = self.shared.listening.lock().unwrap();
            for a in removed {
                if let Some(c) = l.closing.iter_mut().find(|(c, _)| c == a) {
                    c.1 -= 1;
                }
            }
            l.closing.retain(|(_, left)| *left > 0);
        }
        self.listeners.extend(add);
        for (i, (a, l)) in self.listeners.iter_mut().enumerate() {
            if let Err(e) = self
                .registry
                .register(l, Token(LISTENER_BASE + i), Interest::READABLE)
            {
                log::warning(&format!("Registering the listener on {a}: {e}"));
            }
        }
    }
}

pub struct Worker {
    id: usize,
    shared: Arc<Shared>,
    poll: Poll,
    listeners: Vec<(std::net::SocketAddr, TcpListener)>,
    conns: slab::Slab<Conn>,
    next_gen: u32,
    rx: Receiver<Msg>,
    shard: Shard,
    exec: Executor,
    /// Multi-shard commands of this thread's connections whose shares are out (direct.rs).
    gathers: slab::Slab<direct::Gather>,
    /// Single-shard commands waiting to be sent, per shard (filled while one read is parsed).
    batches: Vec<Vec<BatchItem>>,
    /// Per shard, the reply buffers of its last `BatchDone`, emptied, to go back with the next
    /// batch to it (msg.rs, `ReplyBufs`).
    spare_replies: Vec<Option<Box<ReplyBufs>>>,
    /// Reply buffers that came back with batches, for this shard's next batches' replies.
    /// (Boxed: they travel in messages as they are, so keeping the box spares an allocation.)
    #[allow(clippy::vec_box)]
    reply_spares: Vec<Box<ReplyBufs>>,
    /// Connections with output to write or input to resume.
    dirty: Vec<usize>,
    /// appendfsync always: connections with output waiting for an fsync, and replies to
    /// other threads waiting for one (ticket, thread, message): durability.rs.
    held_conns: Vec<usize>,
    held_msgs: std::collections::VecDeque<(u64, usize, Msg)>,
    resume: Vec<usize>,
    /// When the cron runs next (one period, 1000/hz ms, after it last ran).
    next_cron: Instant,
    /// Rings when the cron or a timer is due, so that an idle loop sleeps without a timeout.
    alarm: crate::sys::Alarm,
    /// This shard is freeing big values in steps (see `alloc::begin_bulk_free`).
    bulk_freeing: bool,
    cron_count: u64,
    /// Unix ms, read once per batch of requests (commands of one read share a clock, as the
    /// commands of one call share Redis's cached time).
    now_ms: i64,
    /// Times commands for INFO commandstats and the slow log.
    lap: Lap,
    /// When the current loop turn started (poll returned): one clock read per turn for
    /// timeouts, idle times and the cron.
    loop_now: Instant,
    /// Argument vectors to reuse.
    /// Connections whose socket may hold more than the last turn's read budget.
    more_input: Vec<usize>,
    /// Streamed replies arriving for this thread's connections (stream.rs).
    inbound: crate::stream::Inbound,
    /// maxmemory: this shard's eviction state (evict.rs).
    evict: crate::evict::Evictor,
    stop: bool,
}

impl Worker {
    pub fn new(
        id: usize,
        shared: Arc<Shared>,
        poll: Poll,
        listeners: Vec<(std::net::SocketAddr, TcpListener)>,
        rx: Receiver<Msg>,
    ) -> std::io::Result<Worker> {
        let mut w = Worker {
            id,
            shard: Shard::new(id, shared.databases),
            batches: (0..shared.threads).map(|_| Vec::new()).collect(),
            spare_replies: (0..shared.threads).map(|_| None).collect(),
            reply_spares: Vec::new(),
            shared,
            poll,
            listeners,
            conns: slab::Slab::new(),
            next_gen: 0,
            rx,
            exec: Executor::default(),
            gathers: slab::Slab::new(),
            dirty: Vec::new(),
            held_conns: Vec::new(),
            held_msgs: Default::default(),
            resume: Vec::new(),
            next_cron: Instant::now(),
            alarm: crate::sys::Alarm::new()?,
            bulk_freeing: false,
            cron_count: 0,
            now_ms: Shared::now_ms(),
            lap: Lap::start(),
            loop_now: Instant::now(),
            more_input: Vec::new(),
            inbound: Default::default(),
            evict: Default::default(),
            stop: false,
        };
        crate::notify::attach(&w.shared, &mut w.shard);
        let bcast = w.shared.tracking.prefixes.active_flag();
        for db in &mut w.shard.dbs {
            db.collect_written_while(bcast.clone());
            // The AOF writes keys removed by their TTL as DEL (propagate.rs).
            db.log_expired_while(&crate::propagate::ENABLED);
            // A CLIENT PAUSE freezes expiry, as in Redis (nothing is written while paused).
            db.freeze_expiry_until(w.shared.pause_until.clone());
            // A replica leaves expiring keys to its primary's DELs, as Redis's replicas do.
            db.hold_expiry_while(w.shared.repl.is_replica.clone());
        }
        w.poll.registry().register(
            &mut mio::unix::SourceFd(&std::os::fd::AsRawFd::as_raw_fd(&w.alarm)),
            ALARM,
            Interest::READABLE,
        )?;
        for (i, (_, l)) in w.listeners.iter_mut().enumerate() {
            w.poll
                .registry()
                .register(l, Token(LISTENER_BASE + i), Interest::READABLE)?;
        }
        Ok(w)
    }

    pub fn run(mut self) {
        THREAD.with(|t| t.set(self.id));
        let mut events = Events::with_capacity(1024);
        while !self.stop {
            // A background save whose writer (or diskless transfer) is behind takes no step:
            // the thread looks again in a millisecond instead of spinning.
            let snapshot_waits =
                self.shard.snapshot.is_some() && crate::bgsave::behind(&self.shard);
            let busy = self.exec.has_ready()
                || exec::turn_waiting()
                || LOCAL.with(|l| !l.borrow().is_empty())
                || !self.more_input.is_empty()
                || !self.shard.dying.is_empty()
                || (self.shard.snapshot.is_some() && !snapshot_waits)
                || self.evict.pending;
            let hz = self
                .shared
                .config
                .hot
                .hz
                .load(Ordering::Relaxed)
                .clamp(1, 500) as u64;
            let period = Duration::from_millis(1000 / hz);
            // Idle, the thread sleeps without a timeout (see `sys::Alarm`): the alarm rings for
            // the cron or the nearest timer (blocked clients' timeouts, ms precision).
            let timeout = if busy {
                Some(Duration::ZERO)
            } else if snapshot_waits {
                Some(Duration::from_millis(1))
            } else {
                // The turn's clock, a little behind: the alarm may ring that much late.
                let now = self.loop_now;
                let due = exec::next_timer().map_or(self.next_cron, |t| t.min(self.next_cron));
                if due <= now {
                    Some(Duration::ZERO)
                } else {
                    match self.alarm.set(due, now) {
                        Ok(()) => None,
                        Err(_) => Some(due - now),
                    }
                }
            };
            // A wait that may block tells senders so (shared.rs, `Inbox`): only then do they
            // pay for a wake-up; a message posted since the last drain means no blocking.
            let inbox = &self.shared.inboxes[self.id];
            let may_block = timeout != Some(Duration::ZERO);
            let timeout = if may_block && !inbox.may_sleep() {
                Some(Duration::ZERO)
            } else {
                timeout
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != ErrorKind::Interrupted {
                    log::warning(&format!("poll failed: {e}"));
                }
            }
            if may_block {
                self.shared.inboxes[self.id].awake();
            }
            // One clock read per turn: the commands of a turn share Redis's "cached time".
            self.loop_now = Instant::now();
            self.now_ms = Shared::now_ms();
            exec::fire_timers(self.loop_now);
            // A busy script that gave the thread this turn resumes after its sockets are read.
            exec::start_turn();
            crate::evict::publish_evictable(&self.shard, &self.shared);
            if self.shared.config.hot.maxmemory.load(Ordering::Relaxed) != 0 {
                self.evict_check(false);
            }
            // Read every ready socket first, start loading the keys their first requests
            // name, then run the requests: unpipelined clients' table lookups overlap their
            // cache misses instead of taking them one after another.
            let mut filled: SmallVec<[(usize, bool); 64]> = SmallVec::new();
            for ev in events.iter() {
                match ev.token() {
                    WAKER => {}
                    ALARM => self.alarm.rang(),
                    Token(t) if t >= LISTENER_BASE => self.accept(t - LISTENER_BASE),
                    Token(c) => {
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            if let Some(eof) = self.fill(c, ev.is_read_closed() || ev.is_error()) {
                                filled.push((c, eof));
                            }
                        }
                        if ev.is_writable() {
                            self.dirty.push(c);
                        }
                    }
                }
            }
            if filled.len() > 1 {
                self.prefetch_first_keys(&filled);
            }
            for &(c, eof) in filled.iter() {
                self.after_fill(c, eof);
            }
            // Connections that had more input than one turn's budget get another turn.
            for c in std::mem::take(&mut self.more_input) {
                self.read(c, false);
            }
            self.send_batches();
            self.pump();
            // Intents of transactions that finished meanwhile (sched.rs: no message says so).
            self.sweep_lingering();
            if self.shard.lock.free() {
                // Keys written this turn may serve blocked clients (blocking.rs); their
                // results go to tasks on this or other threads.
                let movers =
                    crate::blocking::serve_ready(&mut self.shard, &self.shared, self.now_ms, None);
                self.spawn_movers(movers, None);
                self.pump();
            }
            if self.loop_now >= self.next_cron {
                self.next_cron = self.loop_now + period;
                self.cron();
            }
            // Keyspace events the engine recorded this turn (expiry, lazy and active).
            crate::notify::flush(&self.shared, &mut self.shard);
            // Keys written this turn (the cron's expiries included) are invalidated now,
            // not at the next wake-up.
            self.tracking_turn();
            // What those posted to this thread (its own clients' invalidations, events).
            if LOCAL.with(|l| !l.borrow().is_empty()) {
                self.pump();
            }
            // Keys that expired this turn outside a command (active expiry, a blocked client
            // served, ...), then what this turn recorded, go to the AOF now.
            crate::propagate::expired(&mut self.shard);
            for (to, m) in crate::exec::take_held_results() {
                self.post_reply(to, m);
            }
            self.send_batches();
            self.flush_dirty();
            if crate::propagate::pending() {
                crate::propagate::flush(&self.shared, self.id);
            }
            self.bury_graveyards();
            // A background save's part on this shard (bgsave.rs), a bounded step a turn.
            if self.shard.snapshot.is_some() {
                crate::bgsave::step(&mut self.shard);
            }
            // Commands that waited for a big value the save was writing (bgsave.rs,
            // `key_waits`) run again once it is written.
            self.snapshot_resume();
            self.count_turn();
        }
        // Shutdown: close every client.
        let ids: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for c in ids {
            self.flush(c);
            self.close(c);
        }
    }

    /// Counts the turn that ends now (INFO's `eventloop_*` fields): its time runs from the
    /// end of the wait for events, so sleeping is not counted.
    fn count_turn(&self) {
        let usec = self.loop_now.elapsed().as_micros() as u64;
        let st = &self.shared.stats[self.id];
        bump(&st.eventloop_cycles, 1);
        bump(&st.eventloop_usec, usec);
        if usec > st.eventloop_max_usec.load(Ordering::Relaxed) {
            st.eventloop_max_usec.store(usec, Ordering::Relaxed);
        }
    }

    /// Moves the big values that left the keyspace this turn into the shard's freeing queue,
    /// and frees a step's worth of that queue (lazyfree.rs).
    fn bury_graveyards(&mut self) {
        for db in &mut self.shard.dbs {
            if let Some(g) = db.take_graveyard() {
                self.shard.dying.push_entries(&self.shared.metrics, g);
            }
        }
        if !self.shard.dying.is_empty() {
            if !self.bulk_freeing {
                self.bulk_freeing = true;
                crate::alloc::begin_bulk_free();
            }
            self.shard
                .dying
                .step(&self.shared.metrics, crate::lazyfree::STEP_TIME);
        }
        if self.bulk_freeing && self.shard.dying.is_empty() {
            self.bulk_freeing = false;
            crate::alloc::end_bulk_free();
        }
    }

    /// maxmemory (evict.rs): evicts this shard's keys while it owes its part of the budget.
    /// Returns true when the process is over it with nothing left to evict anywhere.
    /// `refresh`: read every thread's memory counter now, not only once a millisecond.
    #[inline(never)]
    pub(super) fn evict_check(&mut self, refresh: bool) -> bool {
        let v = self
            .evict
            .check(&mut self.shard, &self.shared, self.loop_now, refresh);
        // Evicted keys' invalidations are no client's write (NOLOOP hides none of them).
        if v.evicted {
            self.drain_written(None);
        }
        if v.wake {
            for t in (0..self.shared.threads).filter(|&t| t != self.id) {
                self.shared.send(t, Msg::Evict);
            }
        }
        v.oom
    }

    // ---- periodic work ----

    /// Thread 0's share of Redis's serverCron for persistence: the shutdown a SIGTERM or
    /// SIGINT asked for (saving first when save points are set), and the background saves
    /// that save points or BGSAVE inside MULTI/EXEC call for (bgsave.rs `due`). Each is a
    /// task holding every shard, as the commands that do the same.
    fn persistence_cron(&mut self) {
        let shared = self.shared.clone();
        let every = crate::cmd::transactions::every_shard(shared.threads);
        let sig = shared.shutdown_asap.load(Ordering::SeqCst);
        if sig != 0 {
            if !shared.shutdown_running.swap(true, Ordering::SeqCst) {
                // Under a busy script, which holds the shards, the server stops as for
                // SHUTDOWN NOSAVE (docs/compatibility.md); otherwise it takes every shard to
                // save (with save points) or to stop a background save.
                let busy = cmd::scripting::shutdown_refused(&shared, false).is_some();
                let hold = !busy
                    && (shared.config.hot.save_points.load(Ordering::Relaxed)
                        || shared.bgsaves.in_progress.load(Ordering::Acquire));
                self.exec.spawn(async move {
                    let tx = crate::exec::Tx::new(shared.clone(), Default::default());
                    // A replica's link pauses first (the file records its stream offset).
                    let _link = if hold {
                        crate::replica::hold_link(&shared).await
                    } else {
                        None
                    };
                    if hold {
                        tx.reserve(every).await;
                    }
                    let ok = cmd::server::finish_shutdown(&tx, hold, busy, false, false).await;
                    tx.release();
                    if ok {
                        crate::server::shutdown(&shared);
                    } else {
                        let name = if sig == signal_hook::consts::SIGINT {
                            "SIGINT"
                        } else {
                            "SIGTERM"
                        };
                        log::warning(&format!(
                            "{name} received but errors trying to shut down the server, check \
                             the logs for more information"
                        ));
                        shared.shutdown_asap.store(0, Ordering::SeqCst);
                        shared.shutdown_running.store(false, Ordering::SeqCst);
                    }
                });
                self.pump();
            }
            return;
        }
        if crate::bgsave::due(&shared) {
            self.exec.spawn(async move {
                let tx = crate::exec::Tx::new(shared.clone(), Default::default());
                // On a replica the link pauses for the cut, so the file records where its
                // data stands in the primary's stream (a restart continues from there).
                let link = crate::replica::hold_link(&shared).await;
                tx.reserve(every).await;
                crate::bgsave::start_claimed(&tx).await;
                drop(link);
                tx.release();
            });
            self.pump();
        }
    }

    fn cron(&mut self) {
        self.cron_count += 1;
        self.evict_check(true);
        if self.id == 0 {
            cmd::server::cron(&self.shared);
            // The AOF: switched on or off by CONFIG SET, a rewrite due (aof.rs).
            if let Some(task) = crate::aof::cron(&self.shared) {
                self.exec.spawn(task);
            }
            if self.cron_count == 1 {
                crate::alloc::mark_rss_base();
            }
            let max = self.shared.config.hot.maxmemory.load(Ordering::Relaxed);
            if max > 0 {
                crate::evict::sample_overhead(max);
            }
            self.persistence_cron();
        }
        let now = Shared::now_ms();
        let shared = self.shared.clone();
        let hot = &shared.config.hot;
        // About once a second: this thread's empty allocator pages go back to the system.
        if self
            .cron_count
            .is_multiple_of(hot.hz.load(Ordering::Relaxed).clamp(1, 500) as u64)
        {
            crate::alloc::release_free_pages();
        }
        // Client tracking: purge clients that stopped tracking, one part of the table per
        // tick; keep the whole server's table under tracking-table-max-keys. The shards'
        // counts are published at the end of each turn; the excess is taken from the
        // highest shard down (a shard evicts what the shards above it cannot cover), so two
        // shards that look at the same counts never both evict the same excess.
        self.shard.tracking.sweep_step();
        let max = hot.tracking_table_max_keys.load(Ordering::Relaxed) as usize;
        if max > 0 && !self.shard.tracking.is_empty() {
            let own = self.shard.tracking.keys();
            let shared = self.shared.clone();
            let counts = &shared.tracking.keys;
            let count = |j: usize| counts[j].load(Ordering::Relaxed);
            let above: usize = (self.id + 1..counts.len()).map(count).sum();
            let below: usize = (0..self.id).map(count).sum();
            let excess = (own + above + below).saturating_sub(max);
            let mine = excess.saturating_sub(above).min(own);
            for (k, readers) in self.shard.tracking.evict(mine.min(100_000)) {
                self.invalidate_readers(&k, &readers, None);
            }
            counts[self.id].store(self.shard.tracking.keys(), Ordering::Relaxed);
        }
        // Active expiry: bounded by time (25% of a tick at effort 1, like Redis) and by entries.
        // Not while the data loads: Redis expires nothing then (an AOF's later commands may
        // still change a key its base holds past its TTL).
        if self.shared.active_expire_enabled.load(Ordering::Relaxed)
            && self.shard.lock.sched.idle()
            && !self.shared.persist.loading.load(Ordering::Relaxed)
        {
            let hz = hot.hz.load(Ordering::Relaxed).clamp(1, 500) as u64;
            let effort = hot
                .active_expire_effort
                .load(Ordering::Relaxed)
                .clamp(1, 10) as u64;
            let budget_us = 1_000_000 * (25 + 2 * (effort - 1)) / hz / 100;
            let started = Instant::now();
            let deadline = started + Duration::from_micros(budget_us);
            let max_visit = 20_000 * effort as usize;
            let mut capped = false;
            for db in &mut self.shard.dbs {
                let mut visited_total = 0;
                loop {
                    let (visited, expired) = db.active_expire(now, 1000);
                    visited_total += visited;
                    if visited == 0 {
                        break;
                    }
                    if Instant::now() >= deadline {
                        capped = true;
                        break;
                    }
                    let plenty = expired * 10 > visited;
                    if !plenty && visited_total >= max_visit.min(db.len()) {
                        break;
                    }
                }
                // A writable replica's own keys with a TTL (its cycle above leaves every other
                // key to the primary's DEL): each at most once per tick, as time allows.
                let mut left = db.replica_ttl_keys().min(max_visit);
                while left > 0 && Instant::now() < deadline {
                    let (visited, _) = db.expire_replica_keys(now, left.min(64));
                    if visited == 0 {
                        break;
                    }
                    left -= visited.min(left);
                }
                // Hash fields past their TTL: each hash with field TTLs at most once per tick,
                // within what is left of the time budget.
                let mut left = db.field_ttl_hashes().min(max_visit);
                while left > 0 && Instant::now() < deadline {
                    let (visited, _) = db.active_expire_fields(now, left.min(64));
                    if visited == 0 {
                        break;
                    }
                    left -= visited.min(left);
                }
            }
            // The latency monitor's "expire-cycle" event, as Redis times its active cycle.
            let us = started.elapsed().as_micros() as u64;
            crate::latency::monitor(&self.shared, "expire-cycle", us);
            let st = &self.shared.stats[self.id];
            bump(&st.expire_cycle_usec, us);
            bump(&st.expire_cycle_time_cap, capped as u64);
        }
        if self.cron_count.is_multiple_of(100) {
            for db in &mut self.shard.dbs {
                db.prune_watchers();
            }
        }
        self.shard.lock.sched.trim();
        // Idle timeouts, kills and paused clients.
        let timeout = hot.timeout.load(Ordering::Relaxed);
        let mut close = Vec::new();
        let mut retry = Vec::new();
        for (k, conn) in self.conns.iter() {
            let idle_out = timeout > 0
                && !conn.state.monitor
                && !conn.state.master
                && !conn.state.replica
                && !conn.in_tx
                && conn.last_interaction.elapsed() > Duration::from_secs(timeout as u64);
            if conn.handle.kill.load(Ordering::Relaxed) || idle_out {
                close.push(k);
            } else if conn.paused.is_some() {
                retry.push(k);
            }
        }
        for k in close {
            self.close(k);
        }
        for (_, conn) in self.conns.iter_mut() {
            conn.shrink_idle_query_buffer(self.loop_now);
        }
        self.retry_paused(retry);
        self.pump();
        self.flush_dirty();
    }

    /// Dispatches again the commands CLIENT PAUSE held for connections `ks` (those still
    /// paused are held again).
    fn retry_paused(&mut self, ks: Vec<usize>) {
        self.now_ms = Shared::now_ms();
        for k in ks {
            if let Some(args) = self.conns.get_mut(k).and_then(|c| c.paused.take()) {
                crate::blocking::BLOCKED_CLIENTS.fetch_sub(1, Ordering::Relaxed);
                self.dispatch(k, &cmd::views(&args), Owner::Owned(&args));
                if self.conns.get(k).is_some_and(|c| c.paused.is_none()) {
                    self.resume.push(k);
                }
                self.send_batches();
                self.dirty.push(k);
            }
        }
    }
}

/// Runs `f`, containing a panic: a bug in one command must not take down the thread (and with
/// it every key of its shard and every client of its loop). Returns None when `f` panicked.
fn contained<R>(what: &str, f: impl FnOnce() -> R) -> Option<R> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(_) => {
            log::warning(&format!("BUG: a panic was contained while running {what}"));
            None
        }
    }
}

fn internal_error(name: &str) -> String {
    format!("ERR internal error while running '{name}' (see the server log)")
}

#[cfg(test)]
mod tests {
    use super::contained;

    #[test]
    fn a_panicking_step_is_contained() {
        assert_eq!(contained("ok", || 7), Some(7));
        let r: Option<()> = contained("boom", || panic!("deliberate"));
        assert!(r.is_none());
    }
}
