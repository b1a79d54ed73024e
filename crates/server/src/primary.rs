//! The primary side of replication: SYNC / PSYNC / REPLCONF, and the stream of changes to
//! replicas (Redis 7.2's `replication.c`, master half).
//!
//! **The stream.** The shards already record what they change for the AOF (propagate.rs);
//! while replicas are served, every chunk a shard hands over also goes to the *feed thread*
//! here, which has a merger of its own (`darner_aof::Merger`: each shard's order kept, a
//! multi-shard transaction as one MULTI/EXEC block) and a writer of its own
//! (`darner_aof::Writer`, without `#TS:` annotations, its own selected database). What it
//! renders is the replication stream: it advances the history's offset and goes into the
//! backlog (`darner_repl::History::feed`), and to every online replica, as a message to the
//! replica connection's thread, which appends it to that connection's output (as MONITOR
//! lines reach monitors). The feed thread starts with the first replica and runs from then on,
//! as Redis keeps its backlog: recording stays on.
//!
//! **Full sync.** A replica that needs one waits (`Phase::WaitStart`, a keep-alive newline a
//! second) until its PSYNC handler may start a snapshot ([`poll_start`], as Redis's
//! replicationCron): at once for a disk-based one; for a diskless one (`repl-diskless-sync`
//! yes and every waiting replica said `REPLCONF capa eof`) once the longest-waiting replica
//! waited `repl-diskless-sync-delay` seconds or `repl-diskless-sync-max-replicas` replicas
//! wait; and only while no other BGSAVE, AOF rewrite or full sync takes a snapshot. The
//! handler then holds every shard (`Locks::All`), so it is a point in time: every replica
//! waiting takes part ([`take_waiting`]), and it takes a fork-less snapshot there (bgsave.rs
//! `cut`); its transaction is a *barrier* in the feed's merge (an item only the feed sees: the
//! AOF's merge has barriers of its own, for rewrites, which the feed does not see). When the
//! feed thread reaches the barrier it knows the stream's offset at the cut: everything before
//! it is in the snapshot, everything after it is buffered for each replica of the snapshot.
//!
//! *Disk-based* ([`run_job`]): a thread writes the snapshot to a temporary file (as BGSAVE
//! does), and a thread per replica sends `+FULLRESYNC <replid> <offset-at-the-cut>` (not for
//! SYNC), newlines as keep-alives while the file is written, then `$<len>\r\n` and the file in
//! pieces of [`PIECE`] bytes, straight to the socket (a duplicate of the connection's
//! descriptor: nothing else writes to the connection meanwhile). A replica that asks while
//! the file is written shares it (Redis's "Waiting for end of BGSAVE for SYNC"): it takes the
//! cut's offset and the stream buffered since from a replica of the same snapshot; the file
//! goes once every replica sharing it has opened it.
//!
//! *Diskless* ([`diskless_job`]): one thread sends every replica of the snapshot
//! `+FULLRESYNC`, `$EOF:<40 random hex characters>\r\n`, the RDB as the shards serialize it
//! (no file) and the mark again. The shards' queue to it is bounded (bgsave.rs
//! `MAX_QUEUED`: their steps wait); it takes the next piece while the replicas have less than
//! [`DISKLESS_LOW`] bytes waiting (the slowest, or the fastest when the replica class has a
//! hard output limit: then one that falls behind the fastest by more than the limit is
//! dropped), and drops a replica whose socket takes nothing for `repl-timeout`.
//!
//! Then the stream buffered since the cut, until the buffer is empty (under the lock the feed
//! thread takes to add to it): the replica is online and the stream goes through its
//! connection's thread from then on. A buffer over the replica class's hard output limit
//! drops the replica, as Redis does.
//!
//! **Partial resync.** `History::psync` decides; `+CONTINUE` and the backlog from the asked
//! offset are posted to the connection's thread under the lock the feed thread holds while
//! it sends, so nothing is lost or doubled between the two.
//!
//! **Chained.** A replica serves replicas too: its link thread (replica.rs) feeds its
//! primary's stream, as applied, to the history and to them ([`feed_from_master`]); a full
//! sync's cut is where the link paused with everything it forwarded applied
//! ([`chained_cut`]), not a barrier of the feed, which ignores what a replica records.

use crate::msg::{ConnRef, Msg};
use crate::shared::Shared;
use darner_aof::{Item, Merger, Output};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The bytes of the snapshot file sent to the socket at a time.
pub const PIECE: usize = 64 * 1024;

/// Redis's refusal of writes with too few good replicas (min-replicas-to-write).
pub const ERR_NOREPLICAS: &[u8] = b"NOREPLICAS Not enough good replicas to write.";

/// A chunk of a thread's recorded changes, for the feed thread.
pub struct Chunk {
    pub thread: usize,
    pub ticket: u64,
    pub items: Vec<Item>,
}

/// What the feed thread is told.
enum FeedMsg {
    Chunk(Chunk),
    /// WAIT: the stream's offset once everything each thread handed over up to its ticket
    /// (`tickets`, by thread) is in the stream, delivered to `done`.
    Offset {
        tickets: Vec<u64>,
        done: crate::msg::Completion,
    },
    /// WAIT blocked: replicas are asked for an acknowledgement (`REPLCONF GETACK *`).
    GetAck,
    /// A fence ([`fence`]): answered once everything sent before it is rendered.
    Fence(Sender<()>),
    /// CLIENT UNPAUSE: a GETACK held back by the pause goes now ([`unpaused`]).
    Unpaused,
}

static FEED: OnceLock<Sender<FeedMsg>> = OnceLock::new();

/// Whether the feed thread runs (recording must stay on).
pub fn feeding() -> bool {
    FEED.get().is_some()
}

/// Hands a thread's chunk to the feed thread (nothing when it does not run).
pub fn hand_over(thread: usize, ticket: u64, items: Vec<Item>) {
    if let Some(tx) = FEED.get() {
        let _ = tx.send(FeedMsg::Chunk(Chunk {
            thread,
            ticket,
            items,
        }));
    }
}

/// Where a replica is in its sync.
#[derive(Debug)]
pub enum Phase {
    /// Waits for a snapshot to start (since `.0`): `repl-diskless-sync-delay`, or another
    /// background save in progress ([`poll_start`]).
    WaitStart(Instant),
    /// Waits for the feed thread to reach its snapshot's cut (barrier number `.0`).
    WaitCut(u64),
    /// The snapshot is written and sent; the stream after the cut is buffered here.
    Buffering(Vec<u8>),
    /// The stream goes to the connection's thread.
    Online,
}

/// A replica connection.
pub struct Replica {
    pub client_id: u64,
    thread: usize,
    conn: ConnRef,
    /// A duplicate of the connection's socket: the sync thread writes the snapshot with it,
    /// and dropping the replica shuts the socket down.
    sock: Arc<TcpStream>,
    pub ip: String,
    pub port: i64,
    pub phase: Phase,
    /// INFO's state while the snapshot is made (wait_bgsave) or sent (send_bulk).
    pub sending: bool,
    /// The stream's offset at the snapshot's cut (known once the feed reached it).
    pub cut_offset: Option<i64>,
    pub ack_offset: i64,
    pub ack_ms: i64,
    /// It said `REPLCONF capa eof` (it can take a diskless snapshot).
    eof: bool,
    /// PSYNC (false: SYNC, which gets no `+FULLRESYNC`).
    psync: bool,
    /// The snapshot job it takes part in (0: none yet).
    job: u64,
    /// The last keep-alive newline sent while it waits for its snapshot to start.
    keepalive: Instant,
    /// REPLCONF ACKs received.
    acks: u64,
    /// Its diskless snapshot is sent: the stream waits for its first ACK (a replica finds the
    /// EOF mark at the end of what it reads, so nothing may follow the mark before).
    await_ack: bool,
}

impl Replica {
    /// The replica `req`'s connection becomes, in `phase`, acknowledged up to `ack_offset`.
    fn new(
        req: &Request,
        sock: Arc<TcpStream>,
        ip: String,
        port: i64,
        phase: Phase,
        ack_offset: i64,
    ) -> Replica {
        Replica {
            client_id: req.client_id,
            thread: req.thread,
            conn: req.conn,
            sock,
            ip,
            port,
            phase,
            sending: false,
            cut_offset: None,
            ack_offset,
            ack_ms: Shared::real_now_ms(),
            eof: false,
            psync: req.psync.is_some(),
            job: 0,
            keepalive: Instant::now(),
            acks: 0,
            await_ack: false,
        }
    }
}

/// What REPLCONF said before PSYNC.
#[derive(Default, Clone)]
pub struct Handshake {
    pub port: i64,
    pub ip: Option<String>,
    pub psync2: bool,
    pub eof: bool,
}

/// The primary's replicas and counters (in replica.rs `State`, under its lock).
#[derive(Default)]
pub struct Replicas {
    pub list: Vec<Replica>,
    pub handshakes: HashMap<u64, Handshake>,
    /// Barriers asked for so far, and reached by the feed thread.
    barriers: u64,
    reached: u64,
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// REPLICAOF NO ONE is waiting for the old link's last commands (and a snapshot it may be
    /// loading): no replica may take a snapshot before they land.
    pub settling: bool,
    /// Clients blocked in WAIT.
    waits: Vec<Waiting>,
    /// The stream's offset at the end of the last data the feed thread sent (the PING and
    /// GETACK after it not counted: a replica acknowledges a GETACK only up to its start):
    /// what WAIT waits for.
    data_offset: i64,
    /// Since when a primary with a backlog has had no replica (repl-backlog-ttl), as the
    /// feed thread saw it.
    alone_since: Option<Instant>,
    /// Snapshot jobs started so far (their numbers).
    jobs: u64,
    /// The disk-based snapshot being written, which a replica that asks now shares.
    disk_job: Option<DiskJob>,
    /// Saves of this primary's own cut at a barrier (their numbers), waiting for its offset.
    save_cuts: Vec<(u64, Arc<std::sync::OnceLock<i64>>)>,
}

/// Where a save of a primary's own dataset stands in its stream, as Redis's rdbPopulateSaveInfo
/// records it when the primary has a backlog (so that, restarted from the file, it can offer
/// its replicas a partial resync): the replication ID at the cut, and the offset there.
///
/// Why the offset is not known at the cut itself: the stream's bytes are rendered by the
/// feed thread alone (SELECTs inserted, multi-shard transactions wrapped in MULTI/EXEC, in
/// the merged order), from what the threads hand over; at the cut some of what precedes it
/// is still on its way (this transaction's own end, which closes the barrier, and chunks
/// in the feed's queue), so its length, and the offset, exist only once the feed has merged
/// and rendered up to the barrier. What it has to render before the barrier is fixed at
/// the cut: everything was recorded before it (the cut held every shard) and the
/// coordinator hands its end over at once ([`SaveCut::cut_done`]). So a wait for it is
/// bounded by the feed's work already queued, never by later writes; and it need not be
/// taken while holding the shards except by SAVE, which holds them anyway. The replication
/// AUX fields come first in an RDB file, before the keys, so a file's start waits for it
/// (BGSAVE's writer thread, which holds nothing; the keys wait in the shards' bounded
/// queue meanwhile).
pub struct SaveCut {
    replid: darner_repl::ReplId,
    offset: Arc<std::sync::OnceLock<i64>>,
}

/// Set when the feed thread ended (it never does but by a panic): nothing reaches a
/// barrier any more.
static FEED_GONE: AtomicBool = AtomicBool::new(false);

impl SaveCut {
    /// Called by the cut's coordinator right after it ended its log (`Tx::end_log`), still
    /// holding every shard: the transaction's end, which closes the barrier, goes to the
    /// feed now rather than at the end of the thread's loop turn.
    pub fn cut_done(&self, shared: &Shared) {
        crate::propagate::flush_here(shared);
    }

    /// The position, once the feed reached the cut (None at once when the feed thread is
    /// gone, or when `stopped` says the save was stopped).
    fn ready(&self, stopped: &dyn Fn() -> bool) -> Option<Option<crate::replica::ReplPosition>> {
        if let Some(&offset) = self.offset.get() {
            return Some(Some(crate::replica::ReplPosition {
                replid: self.replid,
                offset,
                stream_db: 0,
            }));
        }
        (FEED_GONE.load(Ordering::Acquire) || stopped()).then_some(None)
    }

    /// Waits for the feed to reach the cut (see the type's note: bounded by the feed's
    /// queued work). None when the feed thread is gone or `stopped` becomes true.
    pub fn position(&self, stopped: &dyn Fn() -> bool) -> Option<crate::replica::ReplPosition> {
        loop {
            if let Some(pos) = self.ready(stopped) {
                return pos;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// [`SaveCut::position`] from a task (it yields while it waits).
    pub async fn position_async(&self) -> Option<crate::replica::ReplPosition> {
        loop {
            if let Some(pos) = self.ready(&|| false) {
                return pos;
            }
            crate::exec::sleep_until(Instant::now() + Duration::from_millis(1)).await;
        }
    }
}

/// Numbers a barrier for a save's cut, when this server is a primary whose stream is fed
/// into a backlog (Redis writes the fields only then: without a backlog a replica syncs in
/// full anyway). Called holding every shard, like [`take_waiting`], so that the feed meets
/// the barriers in the order of their numbers; the caller makes its cut a barrier
/// (`Tx::start_repl_barrier_log`). Database 0 is right for the stream after the cut, which
/// selects its database first (the barrier forces it).
pub fn save_barrier(shared: &Shared) -> Option<SaveCut> {
    if !feeding() || shared.repl.is_replica.load(Ordering::SeqCst) {
        return None;
    }
    let mut st = shared.repl.lock();
    if st.master.is_some() || st.replicas.settling || st.history.backlog.is_none() {
        return None;
    }
    st.replicas.barriers += 1;
    let n = st.replicas.barriers;
    let offset = Arc::new(std::sync::OnceLock::new());
    st.replicas.save_cuts.push((n, offset.clone()));
    Some(SaveCut {
        replid: st.history.replid,
        offset,
    })
}

/// A client blocked in WAIT: until `num` replicas acknowledged `offset`.
struct Waiting {
    offset: i64,
    num: i64,
    waiter: Arc<crate::blocking::Waiter>,
}

impl Replicas {
    fn get(&self, client_id: u64) -> Option<&Replica> {
        self.list.iter().find(|r| r.client_id == client_id)
    }

    fn get_mut(&mut self, client_id: u64) -> Option<&mut Replica> {
        self.list.iter_mut().find(|r| r.client_id == client_id)
    }

    fn remove(&mut self, client_id: u64) -> Option<Replica> {
        let i = self.list.iter().position(|r| r.client_id == client_id)?;
        Some(self.list.remove(i))
    }

    /// The online replicas whose last acknowledgement is at most `max_lag` seconds old
    /// (Redis's good replicas, for min-replicas-to-write).
    pub fn good(&self, max_lag: i64) -> i64 {
        let now = Shared::real_now_ms();
        self.list
            .iter()
            .filter(|r| matches!(r.phase, Phase::Online) && (now - r.ack_ms) / 1000 <= max_lag)
            .count() as i64
    }

    /// The online replicas that acknowledged `offset` (Redis's replicationCountAcksByOffset).
    pub fn acked(&self, offset: i64) -> i64 {
        self.list
            .iter()
            .filter(|r| matches!(r.phase, Phase::Online) && r.ack_offset >= offset)
            .count() as i64
    }

    /// Answers the WAIT clients that have their replicas now, with the count; forgets the
    /// ones whose wait ended otherwise.
    fn serve_waits(&mut self, shared: &Shared) {
        if self.waits.is_empty() {
            return;
        }
        let mut waits = std::mem::take(&mut self.waits);
        waits.retain(|w| {
            if w.waiter.is_claimed() {
                return false;
            }
            let n = self.acked(w.offset);
            if n >= w.num {
                w.waiter
                    .serve_other(shared, format!(":{n}\r\n").into_bytes());
                return false;
            }
            true
        });
        self.waits = waits;
    }
}

/// The settings of min-replicas-to-write / min-replicas-max-lag when both are on.
fn min_replicas(shared: &Shared) -> Option<(i64, i64)> {
    let hot = &shared.config.hot;
    let n = hot.min_replicas_to_write.load(Ordering::Relaxed);
    let lag = hot.min_replicas_max_lag.load(Ordering::Relaxed);
    (n > 0 && lag > 0).then_some((n, lag))
}

/// Whether writes are refused now for too few good replicas (Redis's
/// checkGoodReplicasStatus, negated): never on a replica, nor with min-replicas-to-write or
/// min-replicas-max-lag at 0.
pub fn too_few_good_replicas(shared: &Shared) -> bool {
    let Some((n, lag)) = min_replicas(shared) else {
        return false;
    };
    if shared.repl.is_replica.load(Ordering::Relaxed) {
        return false;
    }
    let st = shared.repl.lock();
    st.master.is_none() && st.replicas.good(lag) < n
}

/// WAIT's offset: the stream's offset once what every thread recorded so far (the client's
/// writes among it) is in the stream. Each thread hands over what it recorded and says up to
/// which ticket; the feed thread answers once it has merged all of it.
pub async fn wait_offset(tx: &crate::exec::Tx) -> i64 {
    let shared = tx.shared().clone();
    let hops: Vec<_> = (0..shared.threads)
        .map(|t| {
            let sh = shared.clone();
            tx.on_thread(t, move |_| {
                crate::propagate::flush(&sh, t);
                crate::propagate::last_ticket()
            })
        })
        .collect();
    let tickets = crate::exec::join(hops).await;
    let (done, offset) = crate::exec::pending::<i64>();
    let sent = FEED
        .get()
        .is_some_and(|f| f.send(FeedMsg::Offset { tickets, done }).is_ok());
    if !sent {
        offset.forget();
        return shared.repl.lock().data_offset();
    }
    offset.await
}

/// A client blocks in WAIT until `num` replicas acknowledged `offset`: registered, and the
/// replicas are asked for an acknowledgement. Served at once when they did meanwhile.
pub fn add_wait(shared: &Shared, offset: i64, num: i64, waiter: Arc<crate::blocking::Waiter>) {
    let mut st = shared.repl.lock();
    st.replicas.waits.push(Waiting {
        offset,
        num,
        waiter,
    });
    st.replicas.serve_waits(shared);
    drop(st);
    if let Some(f) = FEED.get() {
        let _ = f.send(FeedMsg::GetAck);
    }
}

/// CLIENT UNPAUSE ended a pause: the GETACK that WAIT asked for meanwhile is sent now.
pub fn unpaused() {
    if let Some(f) = FEED.get() {
        let _ = f.send(FeedMsg::Unpaused);
    }
}

/// How long a CLIENT PAUSE (WRITE or ALL) still holds the replication stream, in ms: None
/// when none is in force.
fn pause_left(shared: &Shared) -> Option<i64> {
    let left = shared.pause_until.load(Ordering::Relaxed) - Shared::now_ms();
    (left > 0).then_some(left)
}

/// Forgets the WAIT clients whose wait is over.
pub fn drop_waits(shared: &Shared) {
    shared
        .repl
        .lock()
        .replicas
        .waits
        .retain(|w| !w.waiter.is_claimed());
}

impl crate::replica::State {
    /// WAIT's offset now: the end of the last data in the stream.
    pub fn data_offset(&self) -> i64 {
        self.replicas
            .data_offset
            .min(self.history.master_repl_offset)
    }
}

/// A connection closed: it is no replica any more.
pub fn forget(shared: &Shared, client_id: u64) {
    let mut st = shared.repl.lock();
    st.replicas.handshakes.remove(&client_id);
    if let Some(r) = st.replicas.remove(client_id) {
        crate::log::notice(&format!(
            "Connection with replica {}:{} lost.",
            r.ip, r.port
        ));
        // A sync thread writing to its duplicate of the socket stops at once.
        drop_replica(&r);
    }
}

fn drop_replica(r: &Replica) {
    let _ = r.sock.shutdown(std::net::Shutdown::Both);
}

/// REPLICAOF NO ONE is done: replicas may sync.
pub fn settled(shared: &Shared) {
    shared.repl.lock().replicas.settling = false;
}

/// Drops every replica (this server starts following a primary: Redis's disconnectSlaves).
pub fn drop_all(replicas: &mut Replicas) {
    for r in replicas.list.drain(..) {
        crate::log::notice(&format!(
            "Connection with replica {}:{} lost.",
            r.ip, r.port
        ));
        drop_replica(&r);
    }
}

/// Starts the feed thread (once) and turns recording on.
pub fn start_feed(shared: &Arc<Shared>) {
    if feeding() {
        return;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    if FEED.set(tx).is_err() {
        return;
    }
    crate::propagate::set_enabled(true);
    let sh = shared.clone();
    std::thread::Builder::new()
        .name("repl-feed".into())
        .spawn(move || feed_loop(sh, rx))
        .expect("the replication feed thread starts");
}

fn feed_loop(shared: Arc<Shared>, rx: Receiver<FeedMsg>) {
    // A save waiting for a barrier stops waiting if this thread ever ends (a panic).
    struct Gone;
    impl Drop for Gone {
        fn drop(&mut self) {
            FEED_GONE.store(true, Ordering::Release);
        }
    }
    let _gone = Gone;
    let mut merger = Merger::new(shared.threads);
    // The last ticket received from each thread, and WAIT's requests: each thread's ticket
    // to see emitted (at most the last received: a chunk handed over before the feed ran
    // never comes), and where the offset goes.
    let mut received = vec![0u64; shared.threads];
    let mut offsets: Vec<(Vec<u64>, crate::msg::Completion)> = Vec::new();
    let mut getack = false;
    let mut w = darner_aof::Writer::new(false);
    let mut buf: Vec<u8> = Vec::new();
    let mut last_ping = Instant::now();
    let mut last_resize = Instant::now();
    let mut fences: Vec<Sender<()>> = Vec::new();
    loop {
        // A GETACK held back by a pause goes when the pause ends.
        let wait = match pause_left(&shared).filter(|_| getack) {
            Some(ms) => Duration::from_millis(ms as u64 + 1).min(Duration::from_secs(1)),
            None => Duration::from_secs(1),
        };
        let mut take = |m: FeedMsg| match m {
            FeedMsg::Chunk(c) => {
                received[c.thread] = received[c.thread].max(c.ticket);
                merger.push(c.thread, c.ticket, c.items);
            }
            FeedMsg::Offset { mut tickets, done } => {
                for (t, r) in tickets.iter_mut().zip(&received) {
                    *t = (*t).min(*r);
                }
                offsets.push((tickets, done));
            }
            FeedMsg::GetAck => getack = true,
            FeedMsg::Fence(f) => fences.push(f),
            FeedMsg::Unpaused => {}
        };
        match rx.recv_timeout(wait) {
            Ok(m) => take(m),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        while let Ok(m) = rx.try_recv() {
            take(m);
        }
        // Pieces, each but the last ended by a barrier.
        let mut pieces: Vec<Vec<u8>> = Vec::new();
        merger.drain(&mut |o| match o {
            Output::Cmd(c) => w.append(&mut buf, c.db, &c.argv, 0),
            Output::Run(r) => w.append_rendered(&mut buf, r.db, &r.resp, 0),
            Output::Block(cmds) => {
                let list: Vec<(u32, &[bytes::Bytes])> = cmds
                    .iter()
                    .map(|c| (c.db.unwrap_or(0), &c.argv[..]))
                    .collect();
                w.append_transaction(&mut buf, &list, 0)
            }
            Output::Barrier => {
                pieces.push(std::mem::take(&mut buf));
                // A replica starts from its snapshot with database 0 selected: the stream
                // after a cut says which database it writes to (Redis's slaveseldb = -1).
                w.force_select();
            }
        });
        let cuts = pieces.len();
        let last = std::mem::take(&mut buf);
        // PING and GETACK go as a piece of their own after the data: WAIT's offset is the
        // end of the data (a replica acknowledges a GETACK only up to its start).
        let mut control = Vec::new();
        let size = if last_resize.elapsed() >= Duration::from_secs(1) {
            last_resize = Instant::now();
            backlog_size(&shared)
        } else {
            None
        };
        let mut st = shared.repl.lock();
        // CONFIG SET repl-backlog-size resizes the backlog (within a second).
        if let (Some(size), Some(b)) = (size, st.history.backlog.as_mut()) {
            b.resize(size);
        }
        let hot = &shared.config.hot;
        let period = hot.repl_ping_period.load(Ordering::Relaxed).max(1) as u64;
        if last_ping.elapsed() >= Duration::from_secs(period) {
            last_ping = Instant::now();
            if !st.replicas.list.is_empty() {
                darner_aof::writer::render_command(&mut control, &[b"PING"]);
            }
        }
        // Once per turn, however many WAIT clients blocked in it (Redis: once per event loop
        // turn, in beforeSleep). Not while a CLIENT PAUSE is in force: the stream's offset
        // stays put during a pause (what a failover waits for the replicas to reach), as
        // Redis's pause holds the GETACK back (PAUSE_ACTION_REPLICA); WAIT is still served
        // by the replicas' ACKs of every second, and the GETACK goes when the pause ends.
        if getack && pause_left(&shared).is_none() {
            getack = false;
            if !st.replicas.list.is_empty() {
                darner_aof::writer::render_command(
                    &mut control,
                    &[&b"REPLCONF"[..], b"GETACK", b"*"],
                );
            }
        }
        pieces.push(last);
        pieces.push(control);
        let hard = crate::config::Config::obuf_limits(&shared.config.hot.obuf_replica).0;
        // While this server follows a primary, what it records (the primary's stream applied)
        // is no stream of its own: the offset is the primary's (and until a promotion has
        // counted the old link's last commands).
        let following = st.master.is_some() || st.replicas.settling;
        backlog_ttl(
            &mut st,
            hot.repl_backlog_ttl.load(Ordering::Relaxed),
            following,
        );
        for (i, piece) in pieces.into_iter().enumerate() {
            if !piece.is_empty() && !following {
                st.history.feed(&piece);
                if i <= cuts {
                    st.replicas.data_offset = st.history.master_repl_offset;
                }
                distribute(&shared, &mut st.replicas, piece, hard);
            }
            if i < cuts {
                st.replicas.reached += 1;
                let reached = st.replicas.reached;
                let offset = st.history.master_repl_offset;
                for r in st.replicas.list.iter_mut() {
                    if matches!(r.phase, Phase::WaitCut(b) if b == reached) {
                        r.phase = Phase::Buffering(Vec::new());
                        r.cut_offset = Some(offset);
                    }
                }
                st.replicas.save_cuts.retain(|(n, slot)| {
                    if *n == reached {
                        let _ = slot.set(offset);
                    }
                    *n > reached
                });
            }
        }
        // WAIT's offsets, for the requests whose threads' chunks are all in the stream now.
        if !offsets.is_empty() {
            let offset = st.data_offset();
            offsets.retain(|(tickets, done)| {
                let merged = tickets
                    .iter()
                    .enumerate()
                    .all(|(t, &k)| merger.done_ticket(t) >= k);
                if merged {
                    deliver(&shared, *done, offset);
                }
                !merged
            });
        }
        drop(st);
        for f in fences.drain(..) {
            let _ = f.send(());
        }
    }
}

/// A fence through the feed: the receiver gets `()` once everything the shards handed over
/// before it is rendered (None when the feed does not run). A promotion waits for it, so
/// that what the old link applied, recorded while following, is never taken for this
/// server's own stream.
pub fn fence() -> Option<std::sync::mpsc::Receiver<()>> {
    let tx = FEED.get()?;
    let (done, wait) = std::sync::mpsc::channel();
    tx.send(FeedMsg::Fence(done)).ok()?;
    Some(wait)
}

/// Sends the stream's next bytes to every replica: buffered for one whose snapshot is on its
/// way, posted to the connection's thread for one online; a buffer over `hard` bytes drops
/// its replica.
fn distribute(shared: &Shared, replicas: &mut Replicas, piece: Vec<u8>, hard: u64) {
    if replicas.list.is_empty() {
        return;
    }
    let piece = Arc::new(piece);
    let mut over = Vec::new();
    for r in replicas.list.iter_mut() {
        match &mut r.phase {
            Phase::WaitStart(_) | Phase::WaitCut(_) => {}
            Phase::Buffering(b) => {
                b.extend_from_slice(&piece);
                if hard > 0 && b.len() as u64 > hard {
                    over.push(r.client_id);
                }
            }
            Phase::Online => shared.send(
                r.thread,
                Msg::ReplicaData {
                    conn: r.conn,
                    bytes: piece.clone(),
                },
            ),
        }
    }
    for id in over {
        if let Some(r) = replicas.remove(id) {
            crate::log::warning(&format!(
                "Client id={id} addr={}:{} scheduled to be closed ASAP for overcoming of output buffer limits.",
                r.ip, r.port
            ));
            drop_replica(&r);
        }
    }
}

/// Chained replication: a replica's link hands over its primary's stream as applied, byte
/// for byte; it goes into this server's backlog and on to its own replicas unchanged, so
/// that their offsets are the primary's (Redis's replicationFeedStreamFromMasterStream).
pub fn feed_from_master(shared: &Shared, st: &mut crate::replica::State, bytes: Vec<u8>) {
    if bytes.is_empty() {
        return;
    }
    st.history.feed(&bytes);
    let hard = crate::config::Config::obuf_limits(&shared.config.hot.obuf_replica).0;
    distribute(shared, &mut st.replicas, bytes, hard);
}

/// A replica's own replica takes its snapshot where the link paused, at the offset applied
/// (replica.rs `request_hold`): from there the stream it needs is buffered. Called holding
/// every shard; the job of that one replica (diskless when configured and it said `capa
/// eof`), None when it went away meanwhile.
pub fn chained_job(shared: &Shared, client_id: u64) -> Option<Job> {
    let (diskless, _, _) = diskless_config(shared);
    let mut st = shared.repl.lock();
    let offset = st.history.master_repl_offset;
    let reps = &mut st.replicas;
    reps.jobs += 1;
    let id = reps.jobs;
    let r = reps.get_mut(client_id)?;
    r.phase = Phase::Buffering(Vec::new());
    r.cut_offset = Some(offset);
    r.job = id;
    let diskless = diskless && r.eof;
    if !diskless {
        reps.disk_job = Some(DiskJob::new(id));
    }
    Some(Job {
        id,
        diskless,
        targets: vec![client_id],
    })
}

/// repl-backlog-ttl: a primary whose backlog has had no replica for more than `ttl` seconds
/// (0: never) frees it, and starts a new history (Redis's replicationCron: without a backlog
/// the offset stands still, so the old ID could not be continued safely). A replica keeps
/// its backlog: it may be promoted.
fn backlog_ttl(st: &mut crate::replica::State, ttl: i64, following: bool) {
    if !st.replicas.list.is_empty() || following || st.history.backlog.is_none() {
        st.replicas.alone_since = None;
        return;
    }
    let since = *st.replicas.alone_since.get_or_insert_with(Instant::now);
    if ttl > 0 && since.elapsed().as_secs() as i64 > ttl {
        st.history.restart(crate::replica::new_replid());
        st.history.backlog = None;
        st.replicas.alone_since = None;
        crate::log::notice(&format!(
            "Replication backlog freed after {ttl} seconds without connected replicas."
        ));
    }
}

/// Sends a result to a task from outside the worker threads.
fn deliver<R: Send + 'static>(shared: &Shared, done: crate::msg::Completion, r: R) {
    shared.send(
        done.thread,
        Msg::HopDone {
            task: done.task,
            slot: done.slot,
            result: Box::new(r),
        },
    );
}

/// REPLCONF's options, applied to the connection `client_id` (a replica or one becoming one).
pub fn replconf(shared: &Arc<Shared>, client_id: u64, opts: Vec<darner_repl::replconf::Opt>) {
    use darner_repl::replconf::Opt;
    let mut st = shared.repl.lock();
    for o in opts {
        match o {
            Opt::ListeningPort(p) => st.replicas.handshakes.entry(client_id).or_default().port = p,
            Opt::IpAddress(ip) => {
                st.replicas.handshakes.entry(client_id).or_default().ip =
                    Some(String::from_utf8_lossy(&ip).into_owned())
            }
            Opt::CapaPsync2 => st.replicas.handshakes.entry(client_id).or_default().psync2 = true,
            Opt::Ack { offset, .. } => {
                if let Some(r) = st.replicas.get_mut(client_id) {
                    r.ack_offset = r.ack_offset.max(offset);
                    r.ack_ms = Shared::real_now_ms();
                    r.acks += 1;
                    if std::mem::take(&mut r.await_ack) {
                        spawn_go_online(shared, client_id, r.sock.clone());
                    }
                }
                st.replicas.serve_waits(shared);
            }
            Opt::CapaEof => st.replicas.handshakes.entry(client_id).or_default().eof = true,
            Opt::GetAck | Opt::RdbOnly(_) | Opt::RdbFilterOnly { .. } => {}
        }
    }
}

/// What the caller of [`psync`] learns.
pub struct Request<'a> {
    pub shared: &'a Arc<Shared>,
    pub client_id: u64,
    pub thread: usize,
    pub conn: ConnRef,
    /// The connection's socket (it stays open while the handler runs).
    pub fd: i32,
    /// The peer's address (ip:port).
    pub addr: &'a str,
    /// None: SYNC.
    pub psync: Option<(&'a [u8], i64)>,
}

/// How PSYNC / SYNC goes on.
pub enum Started {
    /// `+CONTINUE` and the backlog are on their way (posted to the connection's thread).
    Continue,
    /// A full sync: the transaction must now hold every shard, number its cut
    /// ([`number_cut`]), be the barrier and take the snapshot ([`full_sync`]).
    Full,
    /// A full sync from a replica (chained): the link must pause at an offset it applied
    /// (replica.rs `request_hold`) while the transaction takes every shard and the snapshot
    /// ([`chained_job`], then [`run_job`]).
    FullChained,
    Error(&'static [u8]),
}

/// The primary's decision on PSYNC / SYNC, with the replica registered.
pub fn psync(req: &Request) -> Started {
    let shared = req.shared;
    // SAFETY: `fd` is the socket of the connection running this command; it stays open
    // while the command runs (the connection waits for its own transaction), and the
    // duplicate made here is owned from then on.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(req.fd) };
    let Ok(owned) = fd.try_clone_to_owned() else {
        return Started::Error(b"ERR can't duplicate the replica's socket");
    };
    let sock = Arc::new(TcpStream::from(owned));
    let mut st = shared.repl.lock();
    // A replica serves its own replicas while its link is up (chained replication).
    let chained = st.master.is_some();
    if st.replicas.settling
        || st
            .master
            .as_ref()
            .is_some_and(|m| m.link != crate::replica::LinkState::Connected)
    {
        return Started::Error(b"NOMASTERLINK Can't SYNC while not connected with my master");
    }
    let hs = st
        .replicas
        .handshakes
        .remove(&req.client_id)
        .unwrap_or_default();
    let ip = hs.ip.clone().unwrap_or_else(|| {
        req.addr
            .rsplit_once(':')
            .map_or(req.addr, |(ip, _)| ip)
            .to_string()
    });
    let name = format!("{ip}:{}", hs.port);
    let mut log = Vec::new();
    let mut partial_err = false;
    if let Some((id, offset)) = req.psync {
        match st.history.psync(id, offset, hs.psync2, &name, &mut log) {
            darner_repl::PsyncAnswer::Continue { reply, from } => {
                let mut bytes = reply;
                let (a, b) = st
                    .history
                    .backlog
                    .as_ref()
                    .and_then(|bl| bl.read_from(from))
                    .expect("psync checked the backlog covers the offset");
                let sent = a.len() + b.len();
                bytes.extend_from_slice(a);
                bytes.extend_from_slice(b);
                shared.send(
                    req.thread,
                    Msg::ReplicaData {
                        conn: req.conn,
                        bytes: Arc::new(bytes),
                    },
                );
                st.replicas.list.push(Replica::new(
                    req,
                    sock,
                    ip,
                    hs.port,
                    Phase::Online,
                    offset - 1,
                ));
                st.replicas.sync_partial_ok += 1;
                drop(st);
                if !chained {
                    start_feed(shared);
                }
                crate::log::notice(&format!("Replica {name} asks for synchronization"));
                crate::log::notice(&darner_repl::History::continue_log(&name, sent, from));
                return Started::Continue;
            }
            darner_repl::PsyncAnswer::FullResync { partial_err: e } => partial_err = e,
        }
    }
    drop(st);
    crate::log::notice(&format!("Replica {name} asks for synchronization"));
    crate::replica::log_lines(&mut log);
    let mut st = shared.repl.lock();
    st.replicas.sync_full += 1;
    if partial_err {
        st.replicas.sync_partial_err += 1;
    }
    if chained {
        // The snapshot is cut where the link pauses, at an offset of the primary's stream.
        st.replicas
            .list
            .push(Replica::new(req, sock, ip, hs.port, Phase::WaitCut(0), 0));
        return Started::FullChained;
    }
    if st.history.backlog.is_none() {
        // The first replica: a new history begins with the backlog (Redis's
        // createReplicationBacklog after changeReplicationId / clearReplicationId2).
        st.history.restart(crate::replica::new_replid());
        st.history
            .create_backlog(backlog_size(shared).unwrap_or(1 << 20));
        crate::log::notice(&format!(
            "Replication backlog created, my new replication IDs are '{}' and '{}'",
            st.history.replid, st.history.replid2
        ));
    }
    let mut r = Replica::new(req, sock, ip, hs.port, Phase::WaitStart(Instant::now()), 0);
    r.eof = hs.eof;
    st.replicas.list.push(r);
    drop(st);
    start_feed(shared);
    Started::Full
}

/// `repl-backlog-size` as configured now.
fn backlog_size(shared: &Shared) -> Option<usize> {
    shared
        .config
        .get("repl-backlog-size")
        .and_then(|v| v.parse().ok())
}

/// A disk-based snapshot's file: removed once the last sync that shares it has opened it
/// (or given up).
struct SyncFile(std::path::PathBuf);

impl Drop for SyncFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The end of a disk-based snapshot's writing, once known.
#[derive(Default)]
struct Written {
    result: Mutex<Option<Result<(), String>>>,
    cv: Condvar,
}

impl Written {
    fn set(&self, r: Result<(), String>) {
        *self.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        self.cv.notify_all();
    }

    /// Waits up to `d` for the end: None while the file is still being written.
    fn wait(&self, d: Duration) -> Option<Result<(), String>> {
        let g = self.result.lock().unwrap_or_else(|e| e.into_inner());
        let (g, _) = self
            .cv
            .wait_timeout_while(g, d, |r| r.is_none())
            .unwrap_or_else(|e| e.into_inner());
        g.clone()
    }
}

/// A disk-based snapshot being written for replicas (Redis's BGSAVE with target disk).
#[derive(Clone)]
struct DiskJob {
    id: u64,
    file: Arc<SyncFile>,
    written: Arc<Written>,
}

impl DiskJob {
    /// Job `id`'s file, `temp-<pid>-repl-<id>.rdb` in `dir`, not written yet.
    fn new(id: u64) -> DiskJob {
        let path = format!("temp-{}-repl-{id}.rdb", std::process::id());
        DiskJob {
            id,
            file: Arc::new(SyncFile(path.into())),
            written: Default::default(),
        }
    }
}

/// What the PSYNC handler does next while its replica waits for a snapshot ([`poll_start`]).
pub enum Poll {
    /// Wait a moment and ask again.
    Wait,
    /// The right to a snapshot is claimed (`bgsave::claim`): hold every shard, then
    /// [`take_waiting`].
    Start,
    /// Nothing more to do here: the replica shares a snapshot another started, or is gone.
    Done,
}

/// `repl-diskless-sync`, `repl-diskless-sync-delay` and `repl-diskless-sync-max-replicas`.
fn diskless_config(shared: &Shared) -> (bool, Duration, usize) {
    let num = |n: &str| {
        shared
            .config
            .get(n)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (
        crate::persist::yes(shared, "repl-diskless-sync"),
        Duration::from_secs(num("repl-diskless-sync-delay")),
        num("repl-diskless-sync-max-replicas") as usize,
    )
}

/// Whether the snapshot for the replica just registered by [`psync`] waits for
/// `repl-diskless-sync-delay` (Redis logs it).
pub fn log_delay(shared: &Shared, client_id: u64) {
    let (diskless, delay, _) = diskless_config(shared);
    let eof = shared
        .repl
        .lock()
        .replicas
        .get(client_id)
        .is_some_and(|r| r.eof);
    if diskless && eof && !delay.is_zero() {
        crate::log::notice("Delay next BGSAVE for diskless SYNC");
    }
}

/// Asked by the PSYNC handler of a replica waiting for its snapshot (as Redis's
/// replicationCron does for replicas in WAIT_BGSAVE_START): sends a keep-alive newline a
/// second; attaches the replica to a disk-based snapshot being written, if any (it then gets
/// that snapshot's offset, buffer and file); otherwise says whether a snapshot starts now:
/// at once for a disk-based one, and for a diskless one (every waiting replica said `capa
/// eof` and `repl-diskless-sync` is yes) once the longest-waiting replica waited
/// `repl-diskless-sync-delay`, or `repl-diskless-sync-max-replicas` replicas wait.
pub fn poll_start(shared: &Arc<Shared>, client_id: u64) -> Poll {
    let (diskless, delay, max) = diskless_config(shared);
    let mut st = shared.repl.lock();
    let reps = &mut st.replicas;
    let Some(r) = reps.get_mut(client_id) else {
        return Poll::Done;
    };
    if !matches!(r.phase, Phase::WaitStart(_)) {
        return Poll::Done;
    }
    if r.keepalive.elapsed() >= Duration::from_secs(1) {
        r.keepalive = Instant::now();
        // Under the lock: nothing else writes to the socket before the snapshot starts.
        let _ = (&*r.sock).write(b"\n");
    }
    if let Some(job) = reps.disk_job.clone() {
        if attach(reps, client_id, &job) {
            drop(st);
            crate::log::notice("Waiting for end of BGSAVE for SYNC");
            spawn_disk_sender(shared, client_id, job);
            return Poll::Done;
        }
    }
    let (mut count, mut all_eof, mut oldest) = (0, true, Duration::ZERO);
    for r in &reps.list {
        if let Phase::WaitStart(since) = r.phase {
            count += 1;
            all_eof &= r.eof;
            oldest = oldest.max(since.elapsed());
        }
    }
    let now = !(diskless && all_eof) || oldest >= delay || (max > 0 && count >= max);
    if now && crate::bgsave::claim(shared) {
        Poll::Start
    } else {
        Poll::Wait
    }
}

/// The replica `client_id` joins the disk-based snapshot `job` in progress: it takes the
/// state of a replica already in it (its cut, and the stream buffered since). False when no
/// replica of the job is left to copy.
fn attach(reps: &mut Replicas, client_id: u64, job: &DiskJob) -> bool {
    let Some((phase, cut)) = reps
        .list
        .iter()
        .filter(|r| r.job == job.id && !r.sending)
        .find_map(|r| match &r.phase {
            Phase::WaitCut(n) => Some((Phase::WaitCut(*n), r.cut_offset)),
            Phase::Buffering(b) => Some((Phase::Buffering(b.clone()), r.cut_offset)),
            _ => None,
        })
    else {
        return false;
    };
    let Some(r) = reps.get_mut(client_id) else {
        return false;
    };
    r.phase = phase;
    r.cut_offset = cut;
    r.job = job.id;
    true
}

/// A snapshot for the replicas waiting when it started.
pub struct Job {
    id: u64,
    /// Sent straight to the replicas' sockets (else written to a file first).
    pub diskless: bool,
    targets: Vec<u64>,
}

impl Job {
    /// Redis's name of the target, for `Starting BGSAVE for SYNC with target: ...`.
    pub fn target(&self) -> &'static str {
        if self.diskless {
            "replicas sockets"
        } else {
            "disk"
        }
    }
}

/// Called holding every shard, after [`Poll::Start`]: every replica waiting for a snapshot
/// takes part in this one, whose cut gets the next barrier number (the feed thread meets
/// the barriers in the order of their numbers). Diskless when `repl-diskless-sync` is yes
/// and each of them said `capa eof`. None when no replica waits any more.
pub fn take_waiting(shared: &Shared) -> Option<Job> {
    let (diskless, _, _) = diskless_config(shared);
    let mut st = shared.repl.lock();
    let reps = &mut st.replicas;
    let waiting = |r: &Replica| matches!(r.phase, Phase::WaitStart(_));
    let targets: Vec<u64> = reps
        .list
        .iter()
        .filter(|r| waiting(r))
        .map(|r| r.client_id)
        .collect();
    if targets.is_empty() {
        return None;
    }
    let diskless = diskless && reps.list.iter().filter(|r| waiting(r)).all(|r| r.eof);
    reps.barriers += 1;
    reps.jobs += 1;
    let (n, id) = (reps.barriers, reps.jobs);
    for r in reps.list.iter_mut().filter(|r| waiting(r)) {
        r.phase = Phase::WaitCut(n);
        r.job = id;
    }
    if !diskless {
        reps.disk_job = Some(DiskJob::new(id));
    }
    Some(Job {
        id,
        diskless,
        targets,
    })
}

/// The snapshot after the cut: its pieces come from the shards on `from_shards`. Diskless,
/// one thread sends them to every replica of the job as they come; disk-based, one thread
/// writes the file and each replica's own thread sends it (replicas that ask meanwhile
/// share it). `stopped` stops the shards' serializing (every replica of a diskless job gone).
pub fn run_job(
    shared: &Arc<Shared>,
    job: Job,
    header: crate::bgsave::SnapshotHead,
    shards: usize,
    mut from_shards: crate::bgsave::FromShards,
    stopped: Arc<AtomicBool>,
) {
    let sh = shared.clone();
    let spawned = if job.diskless {
        std::thread::Builder::new()
            .name("repl-diskless".into())
            .spawn(move || {
                let header = header_at_cut(&sh, job.id, header);
                diskless_job(&sh, &job.targets, header, shards, from_shards, &stopped)
            })
            .map(drop)
    } else {
        let dj = shared
            .repl
            .lock()
            .replicas
            .disk_job
            .clone()
            .filter(|j| j.id == job.id);
        let Some(dj) = dj else {
            shared.bgsaves.in_progress.store(false, Ordering::Release);
            return;
        };
        for &t in &job.targets {
            spawn_disk_sender(shared, t, dj.clone());
        }
        let checksum = crate::persist::yes(shared, "rdbchecksum");
        std::thread::Builder::new()
            .name("repl-rdb".into())
            .spawn(move || {
                let header = header_at_cut(&sh, dj.id, header);
                let r = crate::bgsave::write_file(
                    &header,
                    crate::bgsave::Tail::Rdb { checksum },
                    shards,
                    &mut from_shards,
                    &dj.file.0,
                    &AtomicBool::new(false),
                )
                .map(drop)
                .map_err(|e| e.to_string());
                // The snapshot is taken: another BGSAVE, rewrite or full sync may start.
                sh.bgsaves.in_progress.store(false, Ordering::Release);
                {
                    // No replica joins it from now on.
                    let mut st = sh.repl.lock();
                    if st.replicas.disk_job.as_ref().is_some_and(|j| j.id == dj.id) {
                        st.replicas.disk_job = None;
                    }
                }
                dj.written.set(r);
            })
            .map(drop)
    };
    if spawned.is_err() {
        // The snapshot's claim goes with it (the shards' pieces have no reader).
        shared.bgsaves.in_progress.store(false, Ordering::Release);
        let mut st = shared.repl.lock();
        st.replicas.disk_job = None;
        let gone: Vec<u64> = st
            .replicas
            .list
            .iter()
            .filter(|r| matches!(r.phase, Phase::WaitCut(_) | Phase::Buffering(_)))
            .map(|r| r.client_id)
            .collect();
        for id in gone {
            if let Some(r) = st.replicas.remove(id) {
                drop_replica(&r);
            }
        }
    }
}

/// The snapshot's start with its replication fields (Redis's full-sync RDB has them: a
/// replica that keeps it as its file and restarts before a save of its own continues
/// partially from them): the primary's replication ID and the stream's offset at job
/// `job`'s cut, waited for until the feed thread reaches it, and database 0 as the stream
/// after a cut selects its database first (Redis's slaveseldb -1, saved as 0). Without
/// them when every replica of the job went away before (nobody gets the snapshot then).
fn header_at_cut(shared: &Shared, job: u64, head: crate::bgsave::SnapshotHead) -> Vec<u8> {
    if head.repl_slot.is_none() {
        return head.bytes;
    }
    let pos = loop {
        {
            let st = shared.repl.lock();
            let mut of_job = st.replicas.list.iter().filter(|r| r.job == job).peekable();
            if of_job.peek().is_none() {
                break None;
            }
            if let Some(offset) = of_job.find_map(|r| r.cut_offset) {
                break Some(crate::replica::ReplPosition {
                    replid: st.history.replid,
                    offset,
                    stream_db: 0,
                });
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    head.with_position(pos.as_ref())
}

/// The end of a replica's sync: logged, and the replica dropped on failure.
fn finish(shared: &Shared, client_id: u64, result: Result<(), String>) {
    let mut st = shared.repl.lock();
    match result {
        Ok(()) => {
            if let Some(r) = st.replicas.get(client_id) {
                crate::log::notice(&format!(
                    "Synchronization with replica {}:{} succeeded",
                    r.ip, r.port
                ));
            }
        }
        Err(e) => {
            if let Some(r) = st.replicas.remove(client_id) {
                crate::log::warning(&format!(
                    "Full synchronization with replica {}:{} failed: {e}",
                    r.ip, r.port
                ));
                drop_replica(&r);
            }
        }
    }
}

fn spawn_disk_sender(shared: &Arc<Shared>, client_id: u64, job: DiskJob) {
    let sh = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("repl-sync".into())
        .spawn(move || {
            let r = disk_sender(&sh, client_id, job);
            finish(&sh, client_id, r);
        });
    if spawned.is_err() {
        finish(
            shared,
            client_id,
            Err("no thread to send the snapshot".into()),
        );
    }
}

/// The replica's socket, or an error when it is gone.
fn sock_of(shared: &Shared, client_id: u64) -> Result<Arc<TcpStream>, String> {
    shared
        .repl
        .lock()
        .replicas
        .get(client_id)
        .map(|r| r.sock.clone())
        .ok_or_else(|| "the replica went away".to_string())
}

/// Waits for the feed thread to reach the replica's cut: the replication id, the offset at
/// the cut and whether the replica asked with PSYNC.
fn wait_cut(shared: &Shared, client_id: u64) -> Result<(darner_repl::ReplId, i64, bool), String> {
    loop {
        {
            let st = shared.repl.lock();
            let r = st.replicas.get(client_id).ok_or("the replica went away")?;
            if let Some(o) = r.cut_offset {
                return Ok((st.history.replid, o, r.psync));
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A replica's share of a disk-based snapshot: `+FULLRESYNC` at the cut's offset, newlines
/// while the file is written, `$<len>` and the file, then the stream buffered since the cut.
fn disk_sender(shared: &Arc<Shared>, client_id: u64, job: DiskJob) -> Result<(), String> {
    let sock = sock_of(shared, client_id)?;
    let (replid, offset, psync) = wait_cut(shared, client_id)?;
    if psync {
        let line = format!("+FULLRESYNC {replid} {offset}\r\n");
        send_all(&sock, line.as_bytes())?;
    }
    // Keep-alives while the file is written (Redis sends a newline once a second).
    let written = loop {
        match job.written.wait(Duration::from_secs(1)) {
            Some(r) => break r,
            None => {
                sock_of(shared, client_id)?;
                send_all(&sock, b"\n")?;
            }
        }
    };
    written?;
    set_sending(shared, client_id);
    let mut file = std::fs::File::open(&job.file.0).map_err(|e| e.to_string())?;
    // Open: the file may go once every replica sharing it has it open.
    drop(job);
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    send_all(&sock, &darner_repl::payload::length_header(len))?;
    let mut piece = vec![0u8; PIECE];
    let mut left = len;
    while left > 0 {
        let n = file.read(&mut piece).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the snapshot file ended early".into());
        }
        send_all(&sock, &piece[..n])?;
        left = left.saturating_sub(n as u64);
    }
    go_online(shared, client_id, &sock)
}

/// After its snapshot, the stream buffered since the cut, until nothing is buffered: then
/// the replica is online (the feed thread sends it the stream from then on).
fn go_online(shared: &Shared, client_id: u64, sock: &TcpStream) -> Result<(), String> {
    loop {
        let pending = {
            let mut st = shared.repl.lock();
            let r = st
                .replicas
                .get_mut(client_id)
                .ok_or("the replica went away")?;
            match &mut r.phase {
                Phase::Buffering(b) if b.is_empty() => {
                    r.phase = Phase::Online;
                    r.sending = false;
                    return Ok(());
                }
                Phase::Buffering(b) => std::mem::take(b),
                _ => return Err("the replica is in no state to go online".into()),
            }
        };
        send_all(sock, &pending)?;
    }
}

/// [`go_online`] on a thread of its own (called holding the replication lock).
fn spawn_go_online(shared: &Arc<Shared>, client_id: u64, sock: Arc<TcpStream>) {
    let sh = shared.clone();
    let dup = sock.clone();
    let spawned = std::thread::Builder::new()
        .name("repl-sync".into())
        .spawn(move || {
            let r = go_online(&sh, client_id, &sock);
            finish(&sh, client_id, r);
        });
    if spawned.is_err() {
        // The connection closes, and its end forgets the replica.
        let _ = dup.shutdown(std::net::Shutdown::Both);
    }
}

/// Snapshot bytes waiting for a replica's socket below which a diskless transfer takes the
/// next piece from the shards (their queue, `bgsave::MAX_QUEUED`, bounds the rest).
const DISKLESS_LOW: usize = 1 << 20;

/// A replica's side of a diskless transfer: what its socket has not taken yet.
struct Target {
    id: u64,
    sock: Arc<TcpStream>,
    out: Vec<u8>,
    sent: usize,
    /// The last time the socket took bytes, or had nothing to take.
    progress: Instant,
    /// The replica's ACKs before its snapshot.
    acks: u64,
}

impl Target {
    fn left(&self) -> usize {
        self.out.len() - self.sent
    }

    /// Writes what the socket takes now; true when it took something.
    fn flush(&mut self) -> Result<bool, String> {
        let mut any = false;
        while self.sent < self.out.len() {
            match (&*self.sock).write(&self.out[self.sent..]) {
                Ok(0) => return Err("the connection closed".into()),
                Ok(n) => {
                    self.sent += n;
                    any = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.to_string()),
            }
        }
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
            self.progress = Instant::now();
        } else if self.sent >= DISKLESS_LOW {
            self.out.drain(..self.sent);
            self.sent = 0;
        }
        if any {
            self.progress = Instant::now();
        }
        Ok(any)
    }
}

/// A diskless transfer (Redis's BGSAVE with target replicas sockets): to each replica of the
/// job `+FULLRESYNC` at the cut's offset, `$EOF:<mark>`, the RDB as the shards serialize it,
/// and the mark; then its own thread sends it the stream buffered since the cut. The next
/// piece is taken from the shards once each replica (with a hard output limit of 0: the
/// slowest; otherwise the fastest) has less than [`DISKLESS_LOW`] bytes waiting; a replica
/// that falls behind by more than the replica class's hard output limit is dropped, and so
/// is one whose socket takes nothing for `repl-timeout` seconds.
fn diskless_job(
    shared: &Arc<Shared>,
    ids: &[u64],
    header: Vec<u8>,
    shards: usize,
    mut from_shards: crate::bgsave::FromShards,
    stopped: &AtomicBool,
) {
    use crate::bgsave::InOrder;
    let mark_text = crate::cmd::server::random_hex40(0xd15c);
    let mut mark = [0u8; darner_repl::payload::MARK_LEN];
    mark.copy_from_slice(&mark_text.as_bytes()[..darner_repl::payload::MARK_LEN]);
    let checksum = crate::persist::yes(shared, "rdbchecksum");
    let sum = |crc: u64, b: &[u8]| {
        if checksum {
            darner_rdb::crc64::crc64(crc, b)
        } else {
            0
        }
    };
    let timeout = Duration::from_secs(
        shared
            .config
            .get("repl-timeout")
            .and_then(|v| v.parse().ok())
            .unwrap_or(60),
    );
    let mut targets = Vec::new();
    for &id in ids {
        let (Ok((replid, offset, psync)), Ok(sock)) = (wait_cut(shared, id), sock_of(shared, id))
        else {
            continue;
        };
        let mut out = Vec::new();
        if psync {
            out.extend_from_slice(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes());
        }
        out.extend_from_slice(&darner_repl::payload::mark_header(&mark));
        out.extend_from_slice(&header);
        let acks = {
            let mut st = shared.repl.lock();
            st.replicas.get_mut(id).map_or(0, |r| {
                r.sending = true;
                r.acks
            })
        };
        targets.push(Target {
            id,
            sock,
            out,
            sent: 0,
            progress: Instant::now(),
            acks,
        });
    }
    let mut crc = sum(0, &header);
    let (mut done, mut ended) = (0, false);
    loop {
        let hard = crate::config::Config::obuf_limits(&shared.config.hot.obuf_replica).0;
        {
            // A closed connection or CLIENT KILL removes a replica.
            let st = shared.repl.lock();
            targets.retain(|t| st.replicas.get(t.id).is_some());
        }
        if targets.is_empty() {
            break;
        }
        let lefts = targets.iter().map(Target::left);
        let gate = if hard > 0 { lefts.min() } else { lefts.max() }.unwrap_or(0);
        if !ended && gate < DISKLESS_LOW {
            match from_shards.recv_timeout(Duration::from_millis(10)) {
                Ok(piece) => {
                    let bytes = match piece {
                        InOrder::Bytes(b) => b,
                        InOrder::Record(head, parts) => {
                            let mut b = head;
                            for p in parts {
                                b.extend_from_slice(&p);
                            }
                            b
                        }
                        InOrder::Done => {
                            done += 1;
                            Vec::new()
                        }
                    };
                    from_shards.written(bytes.len());
                    crc = sum(crc, &bytes);
                    for t in &mut targets {
                        t.out.extend_from_slice(&bytes);
                    }
                    if done == shards {
                        let mut end = vec![darner_rdb::opcode::EOF];
                        crc = sum(crc, &end);
                        end.extend_from_slice(&crc.to_le_bytes());
                        end.extend_from_slice(&mark);
                        for t in &mut targets {
                            t.out.extend_from_slice(&end);
                        }
                        ended = true;
                        // The snapshot is taken: another may start.
                        shared.bgsaves.in_progress.store(false, Ordering::Release);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    for t in &targets {
                        finish(shared, t.id, Err("a shard stopped before its part".into()));
                    }
                    shared.bgsaves.in_progress.store(false, Ordering::Release);
                    return;
                }
            }
        }
        let mut progressed = false;
        let mut failed = Vec::new();
        let mut finished = Vec::new();
        for t in &mut targets {
            if let Err(e) = t.flush().map(|p| progressed |= p) {
                failed.push((t.id, e));
            }
        }
        // How far each replica is behind the fastest.
        let fastest = targets.iter().map(Target::left).min().unwrap_or(0);
        for t in &targets {
            if failed.iter().any(|(id, _)| *id == t.id) {
                continue;
            }
            if hard > 0 && (t.left() - fastest) as u64 > hard {
                failed.push((t.id, String::new()));
            } else if t.progress.elapsed() > timeout {
                failed.push((t.id, "timeout writing to the replica".into()));
            } else if ended && t.left() == 0 {
                finished.push(t.id);
            }
        }
        for (id, e) in failed {
            targets.retain(|t| t.id != id);
            if e.is_empty() {
                let mut st = shared.repl.lock();
                if let Some(r) = st.replicas.remove(id) {
                    crate::log::warning(&format!(
                        "Client id={id} addr={}:{} scheduled to be closed ASAP for overcoming of output buffer limits.",
                        r.ip, r.port
                    ));
                    drop_replica(&r);
                }
            } else {
                finish(shared, id, Err(e));
            }
        }
        for id in finished {
            let Some(i) = targets.iter().position(|t| t.id == id) else {
                continue;
            };
            let t = targets.remove(i);
            let mut st = shared.repl.lock();
            if let Some(r) = st.replicas.get_mut(id) {
                crate::log::notice(&format!(
                    "Streamed RDB transfer with replica {}:{} succeeded (socket). Waiting for REPLCONF ACK from replica to enable streaming",
                    r.ip, r.port
                ));
                // The stream buffered since the cut follows the replica's first ACK.
                if r.acks > t.acks {
                    spawn_go_online(shared, id, t.sock);
                } else {
                    r.await_ack = true;
                }
            }
        }
        if !progressed && !targets.is_empty() && (ended || gate >= DISKLESS_LOW) {
            wait_writable(&targets);
        }
    }
    if !ended {
        // Every replica is gone: the shards stop serializing; their pieces are let go.
        stopped.store(true, Ordering::Relaxed);
        while done < shards {
            match from_shards.recv() {
                Ok(InOrder::Done) => done += 1,
                Ok(piece) => from_shards.written(piece.bytes()),
                Err(_) => break,
            }
        }
        shared.bgsaves.in_progress.store(false, Ordering::Release);
    }
}

/// Waits (up to 10 ms) for one of the targets' sockets to take more.
fn wait_writable(targets: &[Target]) {
    use std::os::fd::AsRawFd;
    let mut fds: Vec<libc::pollfd> = targets
        .iter()
        .filter(|t| t.left() > 0)
        .map(|t| libc::pollfd {
            fd: t.sock.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        })
        .collect();
    if fds.is_empty() {
        std::thread::sleep(Duration::from_millis(1));
        return;
    }
    // SAFETY: `fds` is a valid array of `fds.len()` pollfds for the duration of the call.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 10) };
}

fn set_sending(shared: &Shared, client_id: u64) {
    let mut st = shared.repl.lock();
    if let Some(r) = st.replicas.get_mut(client_id) {
        r.sending = true;
    }
}

/// Writes all of `bytes` to the non-blocking socket, waiting for it to take them (up to
/// repl-timeout's default of 60 s without progress).
fn send_all(sock: &TcpStream, mut bytes: &[u8]) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let mut stalled = Instant::now();
    while !bytes.is_empty() {
        match (&*sock).write(bytes) {
            Ok(0) => return Err("the connection closed".into()),
            Ok(n) => {
                bytes = &bytes[n..];
                stalled = Instant::now();
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if stalled.elapsed() > Duration::from_secs(60) {
                    return Err("timeout writing to the replica".into());
                }
                let mut pfd = libc::pollfd {
                    fd: sock.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: `pfd` is one valid pollfd for the duration of the call, and the
                // count passed is 1.
                unsafe { libc::poll(&mut pfd, 1, 100) };
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// INFO replication's replica lines and backlog fields.
pub fn info(shared: &Shared, st: &crate::replica::State, out: &mut String) {
    use std::fmt::Write as _;
    let now = Shared::real_now_ms();
    let _ = write!(out, "connected_slaves:{}\r\n", st.replicas.list.len());
    if let Some((_, lag)) = min_replicas(shared) {
        let _ = write!(out, "min_slaves_good_slaves:{}\r\n", st.replicas.good(lag));
    }
    for (i, r) in st.replicas.list.iter().enumerate() {
        let state = match (&r.phase, r.sending) {
            (Phase::Online, _) => "online",
            (_, true) => "send_bulk",
            _ => "wait_bgsave",
        };
        let _ = write!(
            out,
            "slave{i}:ip={},port={},state={state},offset={},lag={}\r\n",
            r.ip,
            r.port,
            r.ack_offset.max(0),
            (now - r.ack_ms) / 1000
        );
    }
}

/// FAILOVER's look-up of a replica by the address it announced (Redis's findReplica): its
/// acknowledged offset and whether it is online.
pub fn find(replicas: &Replicas, host: &str, port: u16) -> Option<(i64, bool)> {
    replicas
        .list
        .iter()
        .find(|r| r.ip.eq_ignore_ascii_case(host) && r.port == port as i64)
        .map(|r| (r.ack_offset, matches!(r.phase, Phase::Online)))
}

/// FAILOVER without TO: the first online replica that acknowledged `offset`.
pub fn synced_replica(replicas: &Replicas, offset: i64) -> Option<(String, u16)> {
    replicas
        .list
        .iter()
        .find(|r| matches!(r.phase, Phase::Online) && r.ack_offset == offset)
        .map(|r| (r.ip.clone(), u16::try_from(r.port).unwrap_or(0)))
}

/// ROLE's replica list: `[ip, port, offset]` of each online replica.
pub fn role_list(st: &crate::replica::State, w: &mut darner_resp::ReplyWriter) {
    let online: Vec<&Replica> = st
        .replicas
        .list
        .iter()
        .filter(|r| matches!(r.phase, Phase::Online))
        .collect();
    w.array(online.len());
    for r in online {
        w.array(3);
        w.bulk(r.ip.as_bytes());
        w.bulk(r.port.to_string().as_bytes());
        w.bulk(r.ack_offset.max(0).to_string().as_bytes());
    }
}
