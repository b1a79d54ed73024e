//! The replica side of replication: following a primary (Redis 7.x, or anything speaking its
//! protocol) with `REPLICAOF host port` or `replicaof` in the configuration.
//!
//! # One thread per link
//!
//! A replica has one primary, so its link is one plain thread with blocking sockets and
//! timeouts ([`link_main`]), not a connection of the event loop: it connects, runs the
//! handshake of `darner_repl` (PING, AUTH, REPLCONF, PSYNC) and then either receives a
//! snapshot or continues the stream where it stopped. Each `REPLICAOF` starts a new
//! *generation*; a link thread whose generation is no longer current stops at its next
//! check (it checks before every step that changes the dataset).
//!
//! # The snapshot
//!
//! A full sync's RDB goes to `temp-<unixtime>.<pid>.rdb` in `dir` as it arrives (in bounded
//! memory: `PayloadReader`), is fsynced and renamed to `dbfilename`, as Redis does. Loading
//! is a task on thread 0 ([`Msg::Spawn`]) that reserves every shard, flushes every database
//! and loads the file (DEBUG RELOAD's path: `persist::load::reload`), then tells the link
//! thread through a channel. While it holds the shards, clients' commands wait: nobody sees
//! the old data half replaced. With `repl-diskless-load on-empty-db` and no key in any
//! database, that task starts before the RDB arrives and loads it from the link thread's
//! hands as it comes, without a file ([`start_stream_load`]).
//!
//! # The stream
//!
//! The primary's commands are applied in order through a connection of the server's own
//! (as the AOF loader replays a file): the link thread connects to a loopback listener from
//! an address the accepting thread recognizes ([`Replication::is_link`]), and that
//! connection gets Redis's master-client rights (authenticated, writes on a read-only
//! replica, no maxclients / OOM / LOADING refusal). The link thread splits the primary's
//! bytes into commands with the server's own request parser and forwards each command's
//! exact bytes; a FIFO of their lengths is popped as their replies come back, so the
//! replication offset advances by each command's length once it has been applied (inside
//! MULTI, at EXEC, as Redis counts it). `PING` and `REPLCONF` are counted without being
//! applied; `REPLCONF GETACK` is answered with `REPLCONF ACK <offset>` once the commands
//! before it are applied, and an ACK goes every second anyway. At most [`WINDOW`] commands
//! are in the server's hands at once, so the replies never pile up; while the window is
//! full the link thread waits for replies only (`wait_readable`), not on the primary's bytes
//! it will not read yet.
//!
//! # Reconnecting
//!
//! When the link drops, the primary's replication ID and the offset applied are kept (the
//! cached primary) and the thread retries every second with `PSYNC <replid> <offset + 1>`;
//! `+CONTINUE` goes on with the stream without a snapshot.
//!
//! # The backlog, chained replicas, promotion
//!
//! The primary's bytes, as they are applied, go into this server's backlog and on to its
//! own replicas unchanged (`publish`, `primary::feed_from_master`), so offsets agree down a
//! chain and a promoted replica's former siblings continue from it (PSYNC2). A sub-replica's
//! snapshot is cut while the link pauses with everything it forwarded applied
//! ([`request_hold`]). REPLICAOF NO ONE shifts the history once the old link's last
//! commands are counted ([`promote`]); a primary told REPLICAOF keeps its backlog and offers
//! its own history to the new primary.

use crate::log;
use crate::msg::Msg;
use crate::shared::Shared;
use darner_repl::handshake::{command, Config as HsConfig, Handshake, Output};
use darner_repl::payload::Progress;
use darner_repl::{Framing, History, Level, Outcome, PayloadReader, ReplId};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Redis's reply to a client's write on a read-only replica.
pub const ERR_READONLY: &[u8] = b"READONLY You can't write against a read only replica.";

/// Redis's reply while the link is down and replica-serve-stale-data is no.
pub const ERR_MASTERDOWN: &[u8] =
    b"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// Commands forwarded to the server and not yet answered, at most.
const WINDOW: usize = 1024;
/// The most the link thread reads from the primary at once (about as many SETs as
/// [`WINDOW`]).
const READ_AHEAD: usize = 64 * 1024;
/// How long the link thread waits for a socket before looking at its generation again.
const TICK: Duration = Duration::from_millis(100);

/// Where the link stands (ROLE's state and INFO's fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Waiting to (re)connect.
    Connect,
    Connecting,
    Handshake,
    /// Receiving the snapshot.
    Transfer,
    Connected,
}

impl LinkState {
    fn role_name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Handshake => "handshake",
            LinkState::Transfer => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// The primary this server follows.
#[derive(Debug, Clone)]
pub struct Master {
    pub host: String,
    pub port: u16,
    pub link: LinkState,
    /// Unix ms of the last bytes from the primary while the link is up.
    pub last_io_ms: i64,
    /// Unix seconds the link went down after being up (0: never up since REPLICAOF).
    pub down_since: i64,
    /// Stream bytes read from the primary (INFO's slave_read_repl_offset).
    pub read_offset: i64,
    /// The snapshot being received: its size (-1 when framed by an EOF mark), bytes read so
    /// far, and when bytes last came.
    pub transfer_size: i64,
    pub transfer_read: i64,
    pub transfer_last_io_ms: i64,
}

/// The replication state every thread may read (INFO, ROLE) under one lock.
pub struct State {
    /// This server's history: its ID, offset and second ID (INFO's master_replid, ...).
    pub history: History,
    pub master: Option<Master>,
    /// The primary's history as last followed: its ID and the offset applied (a PSYNC asks
    /// to continue from there).
    pub cached: Option<(ReplId, i64)>,
    /// The replicas of this server, as a primary (primary.rs).
    pub replicas: crate::primary::Replicas,
}

pub struct Replication {
    pub state: Mutex<State>,
    /// A primary is set (REPLICAOF host port): with replica-read-only, clients' writes are
    /// refused. Read on every command (one relaxed load). Shared with every database, which
    /// leaves expiring keys to the primary meanwhile (`Db::hold_expiry_while`).
    pub is_replica: Arc<AtomicBool>,
    /// Changes with each REPLICAOF: a link thread of another generation stops.
    generation: AtomicU64,
    /// The generation of the link thread that has commands in the server's hands (0: none):
    /// REPLICAOF waits until it has stopped applying them.
    applying: AtomicU64,
    /// The local address of the link's loopback connection.
    link_peer: Mutex<Option<SocketAddr>>,
    /// The link is up (streaming): with replica-serve-stale-data no, clients' commands are
    /// refused while it is not. Read on every command of a replica (one relaxed load).
    pub link_up: AtomicBool,
    /// Pauses asked of the link (a chained replica's snapshot), numbered by `hold_epoch`;
    /// `held_for`: the last number the link paused for, everything it forwarded applied.
    hold: AtomicU64,
    hold_epoch: AtomicU64,
    held_for: AtomicU64,
    /// The database the primary's stream last selected (its commands without SELECT go
    /// there): RDB's `repl-stream-db`, selected first on a new connection that continues.
    stream_db: AtomicI64,
}

impl Replication {
    pub fn new() -> Replication {
        Replication {
            state: Mutex::new(State {
                history: History::new(new_replid()),
                master: None,
                cached: None,
                replicas: Default::default(),
            }),
            is_replica: Arc::new(AtomicBool::new(false)),
            generation: AtomicU64::new(0),
            applying: AtomicU64::new(0),
            link_peer: Mutex::new(None),
            link_up: AtomicBool::new(false),
            hold: AtomicU64::new(0),
            hold_epoch: AtomicU64::new(0),
            held_for: AtomicU64::new(0),
            stream_db: AtomicI64::new(0),
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Is the peer of a new connection the link's loopback connection?
    pub fn is_link(&self, peer: &SocketAddr) -> bool {
        self.link_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            == Some(peer)
    }

    fn current(&self, gen: u64) -> bool {
        self.generation.load(Ordering::SeqCst) == gen
    }

    /// DEBUG CHANGE-REPL-ID: a new replication ID (the second one is kept, as in Redis).
    pub fn change_replid(&self) {
        self.lock().history.replid = new_replid();
    }
}

impl Default for Replication {
    fn default() -> Self {
        Replication::new()
    }
}

/// A new random replication ID.
pub fn new_replid() -> ReplId {
    let hex = crate::cmd::server::random_hex40(4);
    ReplId::parse(hex.as_bytes()).unwrap_or(ReplId::ZERO)
}

/// `replicaof`'s value as CONFIG GET shows it.
fn config_value(master: Option<(&str, u16)>) -> String {
    master.map_or(String::new(), |(h, p)| format!("{h} {p}"))
}

/// Starts following `host:port` (REPLICAOF, or `replicaof` at start-up): the old link stops
/// at once; the caller waits until it has stopped applying ([`still_applying`] with the old
/// generation, returned first), then starts the new one ([`start_link`] with the second).
pub fn set_master(shared: &Arc<Shared>, host: String, port: u16) -> (u64, u64) {
    let old;
    let gen;
    {
        let mut st = shared.repl.lock();
        if st.master.is_none() {
            // A primary becoming a replica offers its own history to the new primary
            // (Redis's replicationCacheMasterUsingMyself).
            st.cached = Some((st.history.replid, st.history.master_repl_offset));
        }
        // Its own replicas go: they sync again, with this server once its link is up
        // (Redis's disconnectSlaves). The backlog stays: a new primary that continues this
        // server's history (+CONTINUE) continues the backlog too.
        crate::primary::drop_all(&mut st.replicas);
        st.master = Some(Master {
            host: host.clone(),
            port,
            link: LinkState::Connect,
            last_io_ms: 0,
            down_since: 0,
            read_offset: 0,
            transfer_size: -1,
            transfer_read: 0,
            transfer_last_io_ms: 0,
        });
        old = shared.repl.generation.load(Ordering::SeqCst);
        gen = old + 1;
        shared.repl.generation.store(gen, Ordering::SeqCst);
        shared.repl.link_up.store(false, Ordering::SeqCst);
        shared.repl.is_replica.store(true, Ordering::SeqCst);
        log::set_role(b'S');
    }
    shared
        .config
        .store_raw("replicaof", config_value(Some((&host, port))));
    (old, gen)
}

/// The `current` primary (REPLICAOF's "Already connected" check).
pub fn following(shared: &Shared, host: &str, port: u16) -> bool {
    shared
        .repl
        .lock()
        .master
        .as_ref()
        .is_some_and(|m| m.host.eq_ignore_ascii_case(host) && m.port == port)
}

/// Starts the link thread of generation `gen` (from [`set_master`]).
pub fn start_link(shared: &Arc<Shared>, gen: u64) {
    let Some((host, port)) = shared
        .repl
        .lock()
        .master
        .as_ref()
        .map(|m| (m.host.clone(), m.port))
    else {
        return;
    };
    if !shared.repl.current(gen) {
        return;
    }
    let s = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("replica-link".into())
        .spawn(move || link_main(s, gen, host, port));
    if let Err(e) = spawned {
        log::warning(&format!("Can't start the replication link thread: {e}"));
    }
}

/// REPLICAOF NO ONE: stops the link and drops this server's replicas; the caller waits for
/// the link's last commands, then [`promote`] makes it a primary under a new ID, its old one
/// valid up to the offset reached. Returns the old link's generation.
///
/// The history shifts only in [`promote`], once the commands the link had in flight are
/// applied and counted (`hand_over_history`): the old ID then stays valid exactly up to the
/// data this server holds. Until then clients' writes are still refused (READONLY).
pub fn unset_master(shared: &Shared) -> Option<u64> {
    let mut st = shared.repl.lock();
    st.master.as_ref()?;
    st.master = None;
    st.cached = None;
    shared.repl.link_up.store(false, Ordering::SeqCst);
    // Its replicas learn the new ID by reconnecting (Redis's disconnectSlaves); they
    // continue partially.
    crate::primary::drop_all(&mut st.replicas);
    // No replica syncs until what the old link had in hand has landed (primary::settled).
    st.replicas.settling = true;
    let old = shared.repl.generation.load(Ordering::SeqCst);
    shared.repl.generation.store(old + 1, Ordering::SeqCst);
    drop(st);
    shared.config.store_raw("replicaof", String::new());
    Some(old)
}

/// The end of REPLICAOF NO ONE, once the old link is quiet: a new ID, the old one valid up
/// to the offset reached (+1), the backlog going on with this server's own stream (the feed
/// thread records from here), and clients may write. Nothing when another REPLICAOF came
/// meanwhile.
pub fn promote(shared: &Arc<Shared>) {
    let mut st = shared.repl.lock();
    if st.master.is_some() {
        return;
    }
    if st.history.backlog.is_some() {
        crate::primary::start_feed(shared);
    }
    let line = st.history.shift(new_replid());
    // Under the lock the feed thread takes: what it renders from here is this server's.
    st.replicas.settling = false;
    shared.repl.is_replica.store(false, Ordering::SeqCst);
    log::set_role(b'M');
    drop(st);
    log::warning(&line);
}

/// Asks the link to pause where everything it forwarded is applied (a chained replica's
/// snapshot is cut there); returns the number [`held`] waits for. Every request is undone
/// with [`release_hold`].
pub fn request_hold(shared: &Shared) -> u64 {
    shared.repl.hold.fetch_add(1, Ordering::SeqCst);
    shared.repl.hold_epoch.fetch_add(1, Ordering::SeqCst) + 1
}

/// Whether the link paused for request `epoch`: Some(true) paused, Some(false) not yet,
/// None when it cannot (not streaming).
pub fn held(shared: &Shared, epoch: u64) -> Option<bool> {
    if shared.repl.held_for.load(Ordering::SeqCst) >= epoch {
        return Some(true);
    }
    shared.repl.link_up.load(Ordering::SeqCst).then_some(false)
}

pub fn release_hold(shared: &Shared) {
    shared.repl.hold.fetch_sub(1, Ordering::SeqCst);
}

/// Whether the link of generation `old` still has commands in the server's hands (the
/// caller waits until not, so that nothing the old primary sent lands after its reply).
pub fn still_applying(shared: &Shared, old: u64) -> bool {
    old != 0 && shared.repl.applying.load(Ordering::SeqCst) == old
}

// ---- the link thread ----

/// Logs the lines `darner_repl` produced, at their levels (the primary's side too).
pub(crate) fn log_lines(lines: &mut Vec<(Level, String)>) {
    for (level, line) in lines.drain(..) {
        match level {
            Level::Notice => log::notice(&line),
            Level::Warning => log::warning(&line),
        }
    }
}

fn set_link(shared: &Shared, gen: u64, f: impl FnOnce(&mut Master)) {
    let mut st = shared.repl.lock();
    if !shared.repl.current(gen) {
        return;
    }
    if let Some(m) = st.master.as_mut() {
        f(m);
        shared
            .repl
            .link_up
            .store(m.link == LinkState::Connected, Ordering::SeqCst);
    }
}

fn repl_timeout(shared: &Shared) -> Duration {
    Duration::from_secs(shared.config.get_i64("repl-timeout").max(1) as u64)
}

/// Why a session ended.
enum End {
    /// The link failed or was lost: retry in a second.
    Retry,
    /// This generation is over (REPLICAOF).
    Stop,
}

fn link_main(shared: Arc<Shared>, gen: u64, host: String, port: u16) {
    let mut lb: Option<Loopback> = None;
    loop {
        if !shared.repl.current(gen) {
            break;
        }
        match session(&shared, gen, &host, port, &mut lb) {
            End::Stop => break,
            End::Retry => {
                // A FAILOVER's link that got no answer from the target: a primary again.
                if shared.repl.current(gen) && shared.failover.in_progress() {
                    crate::failover::abort(&shared, "Failover target could not be reached");
                    break;
                }
                set_link(&shared, gen, |m| m.link = LinkState::Connect);
                // Retry once a second (Redis's replicationCron), watching the generation.
                let until = Instant::now() + Duration::from_secs(1);
                while Instant::now() < until && shared.repl.current(gen) {
                    std::thread::sleep(TICK);
                }
            }
        }
    }
    drop(lb);
    *shared
        .repl
        .link_peer
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = None;
}

/// The primary's socket with what was read and not yet used.
struct Upstream {
    sock: TcpStream,
    buf: Vec<u8>,
    last_io: Instant,
}

impl Upstream {
    /// Reads what comes within [`TICK`]: Ok(false) when nothing came, Err at end of file or
    /// on an error.
    fn fill(&mut self) -> Result<bool, String> {
        let mut chunk = [0u8; 16 * 1024];
        match self.sock.read(&mut chunk) {
            Ok(0) => Err("connection closed".into()),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                self.last_io = Instant::now();
                if n == chunk.len() {
                    self.take_ready();
                }
                Ok(true)
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl Upstream {
    /// After a full read, takes what else the socket holds, up to [`READ_AHEAD`] in all,
    /// without waiting: a primary streaming hard then costs one forward to the loopback
    /// connection (one wake-up of its thread, one of this one for the replies) per
    /// READ_AHEAD bytes rather than per 16 KiB. An end of file or an error is left for the
    /// next [`Upstream::fill`] to report, after what came before it is applied.
    fn take_ready(&mut self) {
        let mut total = 0;
        while total < READ_AHEAD {
            self.buf.reserve(16 * 1024);
            let spare = self.buf.spare_capacity_mut();
            let room = spare.len().min(READ_AHEAD - total);
            match crate::sys::recv_ready(&self.sock, &mut spare[..room]) {
                Ok(0) => break,
                Ok(n) => {
                    // SAFETY: the kernel initialized n bytes at the end of the buffer.
                    unsafe { self.buf.set_len(self.buf.len() + n) };
                    total += n;
                    if n < room {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    }
}

fn session(
    shared: &Arc<Shared>,
    gen: u64,
    host: &str,
    port: u16,
    lb: &mut Option<Loopback>,
) -> End {
    set_link(shared, gen, |m| m.link = LinkState::Connecting);
    log::notice(&format!("Connecting to MASTER {host}:{port}"));
    let timeout = repl_timeout(shared);
    let addr = match (host, port).to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(a)) => a,
        Ok(None) => {
            log::warning(&format!(
                "Unable to connect to MASTER: can't resolve {host}"
            ));
            return End::Retry;
        }
        Err(e) => {
            log::warning(&format!("Unable to connect to MASTER: {e}"));
            return End::Retry;
        }
    };
    let sock = match TcpStream::connect_timeout(&addr, timeout.min(Duration::from_secs(5))) {
        Ok(s) => s,
        Err(e) => {
            log::warning(&format!("Unable to connect to MASTER: {e}"));
            return End::Retry;
        }
    };
    log::notice("MASTER <-> REPLICA sync started");
    log::notice("Non blocking connect for SYNC fired the event.");
    let _ = sock.set_nodelay(true);
    let _ = sock.set_read_timeout(Some(TICK));
    let _ = sock.set_write_timeout(Some(timeout));
    let mut up = Upstream {
        sock,
        buf: Vec::new(),
        last_io: Instant::now(),
    };
    if !shared.repl.current(gen) {
        return End::Stop;
    }
    set_link(shared, gen, |m| m.link = LinkState::Handshake);

    // The handshake.
    let cfg = handshake_config(shared);
    let mut out = Output::default();
    let mut hs = Handshake::start(cfg, &mut out);
    let outcome = loop {
        log_lines(&mut out.log);
        if !out.send.is_empty() {
            if let Err(e) = up.sock.write_all(&out.send) {
                log::warning(&format!("Failed to write to MASTER: {e}"));
                return End::Retry;
            }
            out.send.clear();
        }
        if !up.buf.is_empty() {
            match hs.feed(&up.buf, &mut out) {
                Ok((used, done)) => {
                    up.buf.drain(..used);
                    if let Some(o) = done {
                        log_lines(&mut out.log);
                        // A FAILOVER's PSYNC: the target's answer ends it (failover.rs).
                        let accepted = !matches!(o, Outcome::Sync);
                        if !crate::failover::answered(shared, accepted) {
                            return End::Stop;
                        }
                        if !out.send.is_empty() {
                            // SYNC after a refused PSYNC.
                            if let Err(e) = up.sock.write_all(&out.send) {
                                log::warning(&format!("Failed to write to MASTER: {e}"));
                                return End::Retry;
                            }
                        }
                        break o;
                    }
                    continue;
                }
                Err(_) => {
                    log_lines(&mut out.log);
                    return End::Retry;
                }
            }
        }
        if !shared.repl.current(gen) {
            return End::Stop;
        }
        match up.fill() {
            Ok(true) => {}
            Ok(false) => {
                if up.last_io.elapsed() > timeout {
                    log::warning("Timeout connecting to the MASTER...");
                    return End::Retry;
                }
            }
            Err(e) => {
                log::warning(&format!(
                    "Master did not respond to the handshake ({e}), will try later"
                ));
                return End::Retry;
            }
        }
    };

    match outcome {
        Outcome::Continue { new_id } => {
            let cached = shared.repl.lock().cached;
            let Some((cached_id, offset)) = cached else {
                return End::Retry;
            };
            {
                let mut st = shared.repl.lock();
                if !shared.repl.current(gen) {
                    return End::Stop;
                }
                // The stream goes on under the primary's history; a new ID shifts it.
                st.history.adopt(cached_id, offset);
                if let Some(id) = new_id {
                    let line = st.history.shift(id);
                    log::notice(&line);
                    // Its own replicas learn the new ID by reconnecting.
                    crate::primary::drop_all(&mut st.replicas);
                }
                // The backlog goes on with the primary's stream (kept when it ends at the
                // offset continued from: a demoted primary's own, a replica's).
                st.history.ensure_backlog(backlog_size(shared));
                let replid = st.history.replid;
                st.cached = Some((replid, offset));
            }
            if lb.is_none() {
                // A new connection goes on where the stream's database is (after a restart
                // from an RDB file: its `repl-stream-db`).
                *lb = Loopback::connect(shared);
                let db = shared.repl.stream_db.load(Ordering::SeqCst);
                if db != 0 {
                    if let Some(l) = lb.as_mut() {
                        if let Err(e) = l.select(db) {
                            log::warning(&format!(
                                "The connection applying the MASTER's stream failed: {e}"
                            ));
                            *lb = None;
                            return End::Retry;
                        }
                    }
                }
            }
            stream(shared, gen, &mut up, lb, offset)
        }
        Outcome::FullResync(parsed) => {
            // The primary's history is this replica's own (a full sync after a failed
            // PSYNC): the old data is an earlier point of the same dataset, which clients may
            // go on reading while the new one loads (Redis's async loading, swapdb only).
            let same_history =
                parsed.is_some_and(|(id, _)| id == shared.repl.lock().history.replid);
            if let Err(end) = full_sync(shared, gen, &mut up, same_history) {
                return end;
            }
            if !shared.repl.current(gen) {
                return End::Stop;
            }
            let offset = {
                let mut st = shared.repl.lock();
                // Checked under the lock REPLICAOF takes: a promotion that came during the
                // load keeps its own history (adopting the primary's after it would undo it).
                if !shared.repl.current(gen) {
                    return End::Stop;
                }
                let offset = match parsed {
                    Some((id, offset)) => {
                        st.history.adopt(id, offset);
                        st.cached = Some((id, offset));
                        offset
                    }
                    None => {
                        // Unknown history (a malformed +FULLRESYNC): nothing to continue.
                        st.cached = None;
                        st.history.master_repl_offset
                    }
                };
                // A backlog of the primary's stream from the snapshot's offset on (Redis
                // creates it after the load), for chained replicas and a promotion.
                st.history.ensure_backlog(backlog_size(shared));
                offset
            };
            // A new snapshot: the stream starts on a fresh connection (database 0).
            shared.repl.stream_db.store(0, Ordering::SeqCst);
            *lb = Loopback::connect(shared);
            stream(shared, gen, &mut up, lb, offset)
        }
        Outcome::Sync => {
            if let Err(end) = full_sync(shared, gen, &mut up, false) {
                return end;
            }
            let offset = {
                let mut st = shared.repl.lock();
                if !shared.repl.current(gen) {
                    return End::Stop;
                }
                st.cached = None;
                st.history.ensure_backlog(backlog_size(shared));
                st.history.master_repl_offset
            };
            shared.repl.stream_db.store(0, Ordering::SeqCst);
            *lb = Loopback::connect(shared);
            stream(shared, gen, &mut up, lb, offset)
        }
    }
}

/// `repl-backlog-size` as configured.
fn backlog_size(shared: &Shared) -> usize {
    shared
        .config
        .get("repl-backlog-size")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 20)
}

fn handshake_config(shared: &Shared) -> HsConfig {
    let text = |name: &str| {
        shared
            .config
            .get(name)
            .filter(|v| !v.is_empty())
            .map(String::into_bytes)
    };
    let announce = shared.config.get_i64("replica-announce-port");
    let port = if announce > 0 {
        announce
    } else {
        shared.config.get_i64("port")
    };
    HsConfig {
        masteruser: text("masteruser"),
        masterauth: text("masterauth"),
        listening_port: port.clamp(0, 65535) as u32,
        announce_ip: text("replica-announce-ip"),
        cached: shared.repl.lock().cached,
        failover: shared.failover.in_progress(),
    }
}

// ---- the snapshot ----

/// Receives the snapshot into `dbfilename` and loads it. Err: failed (logged), or stopped.
/// Where a full sync's snapshot goes as it arrives.
enum Sink {
    /// The temporary file, loaded once complete.
    File(std::io::BufWriter<std::fs::File>),
    /// Straight to a load task holding every shard (`repl-diskless-load on-empty-db`).
    Stream(StreamLoad),
    /// Straight into staging databases beside the live ones (`repl-diskless-load swapdb`).
    Swap(SwapLoad),
}

fn full_sync(
    shared: &Arc<Shared>,
    gen: u64,
    up: &mut Upstream,
    same_history: bool,
) -> Result<(), End> {
    set_link(shared, gen, |m| {
        m.link = LinkState::Transfer;
        m.transfer_size = -1;
        m.transfer_read = 0;
        m.transfer_last_io_ms = Shared::real_now_ms();
    });
    let temp = format!(
        "temp-{}.{}.rdb",
        Shared::real_now_ms() / 1000,
        std::process::id()
    );
    let remove = |why: &str| {
        log::warning(why);
        let _ = std::fs::remove_file(&temp);
        Err(End::Retry)
    };
    // Chosen once the framing is known (the log line says where the RDB goes).
    let mut sink: Option<Sink> = None;
    let mut staged: Vec<u8> = Vec::new();
    let mut reader = PayloadReader::default();
    let mut received: i64 = 0;
    let timeout = repl_timeout(shared);
    loop {
        if !up.buf.is_empty() {
            let fed = reader.feed(&up.buf, &mut |bytes| {
                staged.extend_from_slice(bytes);
                received += bytes.len() as i64;
            });
            let (used, progress) = match fed {
                Ok(r) => r,
                Err(e) => return remove(&e.0),
            };
            up.buf.drain(..used);
            if sink.is_none() {
                if let Some(f) = reader.framing() {
                    let (size, what) = match f {
                        Framing::Length(n) => (*n as i64, format!("{n} bytes from master")),
                        Framing::Mark(_) => (-1, "streamed RDB from master with EOF".to_string()),
                    };
                    let stream = match diskless_load(shared) {
                        DisklessLoad::OnEmptyDb => start_stream_load(shared, gen).map(Sink::Stream),
                        DisklessLoad::Swapdb => {
                            Some(Sink::Swap(SwapLoad::start(shared, gen, size, same_history)))
                        }
                        DisklessLoad::Disabled => None,
                    };
                    let to = if stream.is_some() { "parser" } else { "disk" };
                    log::notice(&format!(
                        "MASTER <-> REPLICA sync: receiving {what} to {to}"
                    ));
                    if matches!(stream, Some(Sink::Swap(_))) {
                        log::notice("MASTER <-> REPLICA sync: Loading DB in memory");
                    }
                    set_link(shared, gen, |m| m.transfer_size = size);
                    sink = Some(match stream {
                        Some(s) => s,
                        None => match std::fs::OpenOptions::new()
                            .write(true)
                            .create(true)
                            .truncate(true)
                            .open(&temp)
                        {
                            Ok(f) => Sink::File(std::io::BufWriter::with_capacity(1 << 20, f)),
                            Err(e) => {
                                log::warning(&format!(
                                    "Opening the temp file needed for MASTER <-> REPLICA synchronization: {e}"
                                ));
                                return Err(End::Retry);
                            }
                        },
                    });
                }
            }
            match sink.as_mut() {
                Some(Sink::File(file)) if !staged.is_empty() => {
                    if let Err(e) = file.write_all(&staged) {
                        return remove(&format!(
                            "Write error or short write writing to the DB dump file needed for MASTER <-> REPLICA synchronization: {e}"
                        ));
                    }
                    staged.clear();
                }
                // A failed send: the load stopped early, and its error says why.
                // In pieces of STREAM_PIECE bytes (fewer hand-overs between the threads).
                Some(Sink::Stream(s))
                    if (staged.len() >= STREAM_PIECE
                        || (progress == Progress::Done && !staged.is_empty()))
                        && s.data.send(std::mem::take(&mut staged)).is_err() =>
                {
                    return Err(stream_load_end(s));
                }
                _ => {}
            }
            // As a stream load's, and also what came over a while (a slow primary): the
            // load keeps pace, and its progress shows in INFO.
            if let Some(Sink::Swap(s)) = sink.as_mut() {
                if !staged.is_empty()
                    && (staged.len() >= STREAM_PIECE
                        || progress == Progress::Done
                        || s.sent.elapsed() >= TICK)
                    && !s.send(std::mem::take(&mut staged))
                {
                    return Err(s.failed());
                }
            }
            set_link(shared, gen, |m| {
                m.transfer_read = received;
                m.transfer_last_io_ms = Shared::real_now_ms();
            });
            if progress == Progress::Done {
                break;
            }
        }
        if !shared.repl.current(gen) {
            let _ = std::fs::remove_file(&temp);
            return Err(End::Stop);
        }
        match up.fill() {
            Ok(true) => {}
            Ok(false) => {
                if up.last_io.elapsed() > timeout {
                    return remove("Timeout receiving bulk data from MASTER... If the problem persists try to set the 'repl-timeout' parameter in redis.conf to a larger value.");
                }
                // Nothing came for a while: what came goes to the loader (as above).
                if let Some(Sink::Swap(s)) = sink.as_mut() {
                    if !staged.is_empty() && !s.send(std::mem::take(&mut staged)) {
                        return Err(s.failed());
                    }
                }
            }
            Err(e) => return remove(&format!("I/O error trying to sync with MASTER: {e}")),
        }
    }
    let file = match sink {
        Some(Sink::File(file)) => file,
        Some(Sink::Stream(s)) => {
            // The end of the stream: the loader has all of it.
            let StreamLoad { data, done } = s;
            drop(data);
            return match done.recv() {
                Ok(Ok(())) => {
                    log::notice("MASTER <-> REPLICA sync: Finished with success");
                    Ok(())
                }
                Ok(Err(e)) => {
                    log::warning(&e);
                    log::warning("Failed trying to load the MASTER synchronization DB from socket, check server logs.");
                    Err(End::Retry)
                }
                Err(_) => Err(End::Stop),
            };
        }
        Some(Sink::Swap(s)) => return s.finish(gen),
        None => return remove("The MASTER's snapshot ended before its header"),
    };
    let synced = file
        .into_inner()
        .map_err(|e| e.into_error())
        .and_then(|f| f.sync_all());
    if let Err(e) = synced {
        return remove(&format!(
            "Failed trying to sync the temp DB to disk in MASTER <-> REPLICA synchronization: {e}"
        ));
    }
    let target = crate::persist::rdb_path(shared);
    let renamed = {
        let (temp, target) = (temp.clone(), target.clone());
        stop_bgsave_then(shared, gen, true, move || std::fs::rename(&temp, &target))
    };
    match renamed {
        None => {
            let _ = std::fs::remove_file(&temp);
            return Err(End::Stop);
        }
        Some(Err(e)) => {
            return remove(&format!(
                "Failed trying to rename the temp DB into {} in MASTER <-> REPLICA synchronization: {e}",
                target.display()
            ));
        }
        Some(Ok(())) => {}
    }
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    } else if let Ok(d) = std::fs::File::open(".") {
        let _ = d.sync_all();
    }
    if !shared.repl.current(gen) {
        return Err(End::Stop);
    }
    if !forget_replaced_dataset(shared, gen) {
        return Err(End::Stop);
    }
    log::notice("MASTER <-> REPLICA sync: Flushing old data");
    log::notice("MASTER <-> REPLICA sync: Loading DB in memory");
    match load(shared, gen) {
        Some(Ok(())) => {
            log::notice("MASTER <-> REPLICA sync: Finished with success");
            Ok(())
        }
        Some(Err(e)) => {
            log::warning(&e);
            log::warning(
                "Failed trying to load the MASTER synchronization DB from disk, check server logs.",
            );
            Err(End::Retry)
        }
        None => Err(End::Stop),
    }
}

/// Flushes every database and loads `dbfilename` in a task holding every shard (on thread
/// 0). None: the generation changed before the task took the shards (nothing was done).
fn load(shared: &Arc<Shared>, gen: u64) -> Option<Result<(), String>> {
    let (done, wait) = std::sync::mpsc::channel::<Option<Result<(), String>>>();
    shared.send(
        0,
        Msg::Spawn {
            f: Box::new(move |shared: Arc<Shared>| {
                Box::pin(async move {
                    let tx = crate::exec::Tx::new(shared.clone(), Default::default());
                    tx.reserve(crate::cmd::transactions::every_shard(shared.threads))
                        .await;
                    let r = if shared.repl.current(gen) {
                        crate::cmd::server::flush_shards(&tx, true).await;
                        let r = crate::persist::load::reload(&tx, true, false).await;
                        after_load(&tx, &r).await;
                        Some(r)
                    } else {
                        None
                    };
                    tx.release();
                    let _ = done.send(r);
                })
            }),
        },
    );
    wait.recv().unwrap_or(None)
}

/// Stops a BGSAVE in progress before a full sync's snapshot replaces the dataset, as Redis's
/// readSyncBulkPayload kills its RDB child (with SIGUSR1: `rdb_last_bgsave_status` stays as
/// it was): the save holds the dataset about to be replaced and would otherwise put it back
/// into `dbfilename` after the primary's snapshot (a disk-based load renames it there first).
/// `tx` holds every shard: the save's writer stops, removes its temporary file and leaves
/// the status unchanged (`bgsave::stop`). Redis logs it for a disk-based load only.
async fn stop_bgsave_for_load(tx: &crate::exec::Tx, disk: bool) {
    if crate::bgsave::stop(tx).await && disk {
        log::notice(
            "Replica is about to load the RDB file received from the master, but there is a \
             background save in progress. Stopping it and removing its temp file to avoid any \
             race",
        );
    }
}

/// [`stop_bgsave_for_load`] from the link thread: in a task on thread 0 holding every shard,
/// which then runs `then` (still holding them, so no BGSAVE of the old dataset can start in
/// between). None: the generation changed before the task took the shards.
fn stop_bgsave_then<R: Send + 'static>(
    shared: &Arc<Shared>,
    gen: u64,
    disk: bool,
    then: impl FnOnce() -> R + Send + 'static,
) -> Option<R> {
    let (done, wait) = std::sync::mpsc::channel::<Option<R>>();
    shared.send(
        0,
        Msg::Spawn {
            f: Box::new(move |shared: Arc<Shared>| {
                Box::pin(async move {
                    let tx = crate::exec::Tx::new(shared.clone(), Default::default());
                    tx.reserve(crate::cmd::transactions::every_shard(shared.threads))
                        .await;
                    let r = if shared.repl.current(gen) {
                        stop_bgsave_for_load(&tx, disk).await;
                        Some(then())
                    } else {
                        None
                    };
                    tx.release();
                    let _ = done.send(r);
                })
            }),
        },
    );
    wait.recv().unwrap_or(None)
}

/// How `repl-diskless-load` has a full sync's snapshot loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DisklessLoad {
    /// To disk, then loaded from the file.
    Disabled,
    /// From the socket when the dataset is empty ([`start_stream_load`]), else to disk.
    OnEmptyDb,
    /// From the socket into staging databases, swapped in at the end ([`SwapLoad`]).
    Swapdb,
}

fn diskless_load(shared: &Shared) -> DisklessLoad {
    match shared.config.get("repl-diskless-load").as_deref() {
        Some("on-empty-db") => DisklessLoad::OnEmptyDb,
        Some("swapdb") => DisklessLoad::Swapdb,
        _ => DisklessLoad::Disabled,
    }
}

/// A snapshot loaded as it arrives: its bytes go to the load task on `data` (dropped: the
/// end), which answers on `done`.
struct StreamLoad {
    data: std::sync::mpsc::SyncSender<Vec<u8>>,
    done: std::sync::mpsc::Receiver<Result<(), String>>,
}

/// The load task's answer once it stopped (the link's stream ended early or failed).
fn stream_load_end(s: &StreamLoad) -> End {
    match s.done.recv() {
        Ok(Err(e)) => {
            log::warning(&e);
            log::warning("Failed trying to load the MASTER synchronization DB from socket, check server logs.");
            End::Retry
        }
        Ok(Ok(())) => End::Retry,
        Err(_) => End::Stop,
    }
}

/// The link thread hands a stream load the RDB in pieces of this many bytes.
const STREAM_PIECE: usize = 256 << 10;

/// Bytes of the primary's stream a reader takes from the link thread.
struct ChannelReader {
    rx: std::sync::mpsc::Receiver<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
}

impl Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.cur.len() {
            match self.rx.recv() {
                Ok(v) => {
                    self.cur = v;
                    self.pos = 0;
                }
                // The link thread is done (or gone): the end of the stream.
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.cur.len() - self.pos);
        out[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Starts a load task on thread 0 that holds every shard, as [`load`] does; if the dataset
/// is empty (`on-empty-db`: a load that fails midway then loses nothing) it loads the RDB
/// the link thread sends it as it arrives, without a file. Its tables are not presized: a
/// RESIZEDB hint is bounded by the bytes a file holds, and a stream's length is only claimed.
/// None when the dataset holds keys (or the generation changed): the sync goes to disk.
fn start_stream_load(shared: &Arc<Shared>, gen: u64) -> Option<StreamLoad> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<bool>();
    // A few pieces in flight: the socket's reading waits for the load beyond them.
    let (data_tx, data_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(16);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    shared.send(
        0,
        Msg::Spawn {
            f: Box::new(move |shared: Arc<Shared>| {
                Box::pin(async move {
                    let tx = crate::exec::Tx::new(shared.clone(), Default::default());
                    tx.reserve(crate::cmd::transactions::every_shard(shared.threads))
                        .await;
                    let keys: usize = tx
                        .run_all(|ctx| ctx.shard.dbs.iter().map(|d| d.len()).sum::<usize>())
                        .await
                        .into_iter()
                        .sum();
                    let empty = shared.repl.current(gen) && keys == 0;
                    let _ = ready_tx.send(empty);
                    if empty {
                        stop_bgsave_for_load(&tx, false).await;
                        log::notice("MASTER <-> REPLICA sync: Loading DB in memory");
                        crate::cmd::server::flush_shards(&tx, true).await;
                        let reader = ChannelReader {
                            rx: data_rx,
                            cur: Vec::new(),
                            pos: 0,
                        };
                        let loader = crate::persist::load::FileLoader::from_reader(
                            Box::new(reader),
                            "(the MASTER's stream)".to_string(),
                            0,
                            shared.threads,
                            shared.databases,
                            Shared::now_ms(),
                        );
                        let r = crate::persist::load::load_from(&tx, loader, true, false).await;
                        after_load(&tx, &r).await;
                        let _ = done_tx.send(r);
                    }
                    tx.release();
                })
            }),
        },
    );
    if ready_rx.recv() == Ok(true) {
        Some(StreamLoad {
            data: data_tx,
            done: done_rx,
        })
    } else {
        None
    }
}

/// Tells a swapdb load from the older ones that may still be winding down on the shards.
static SWAP_LOAD_IDS: AtomicU64 = AtomicU64::new(0);

/// A `repl-diskless-load swapdb` load: the link thread hands the RDB's bytes to a loader
/// thread (`data`), which decodes them and has each shard build its keys into staging
/// databases (`persist::load::feed_shards`, as lone steps between clients' commands, the
/// live databases untouched), then answers on `done`. Once the link has the whole payload
/// and the load succeeded, one task holding every shard swaps the staging databases in
/// ([`SwapLoad::finish`]). Dropped before that (the link failed, the payload was bad, a
/// REPLICAOF), it discards the staging databases: the old dataset stays as it was, and
/// so does the cached primary (a retry may continue the stream with PSYNC).
///
/// Meanwhile, when the primary's history is this replica's own, clients go on reading the
/// old dataset (`async_loading`); otherwise the old data is another history's, and they get
/// `-LOADING` as during any load (Redis's rule).
struct SwapLoad {
    shared: Arc<Shared>,
    id: u64,
    data: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
    done: std::sync::mpsc::Receiver<Result<crate::persist::load::Summary, String>>,
    started: Instant,
    /// When the loader was last handed bytes.
    sent: Instant,
    swapped: bool,
}

impl SwapLoad {
    fn start(shared: &Arc<Shared>, gen: u64, size: i64, same_history: bool) -> SwapLoad {
        // Redis stops its RDB child before an async load too (the save would write the
        // dataset being replaced); a generation over meanwhile is seen by the caller's loop.
        stop_bgsave_then(shared, gen, false, || ());
        let id = SWAP_LOAD_IDS.fetch_add(1, Ordering::SeqCst) + 1;
        let p = &shared.persist;
        p.loading_start
            .store(Shared::now_ms() / 1000, Ordering::Relaxed);
        p.loading_total_bytes
            .store(size.max(0) as u64, Ordering::Relaxed);
        p.loading_loaded_bytes.store(0, Ordering::Relaxed);
        if same_history {
            p.async_loading.store(true, Ordering::SeqCst);
        } else {
            p.loading.store(true, Ordering::SeqCst);
        }
        // As many pieces in flight as a stream load (start_stream_load).
        let (data_tx, data_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(16);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let sh = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("swapdb-load".into())
            .spawn(move || {
                let reader = ChannelReader {
                    rx: data_rx,
                    cur: Vec::new(),
                    pos: 0,
                };
                let name = "(the MASTER's stream)";
                let mut loader = crate::persist::load::FileLoader::from_reader(
                    Box::new(reader),
                    name.to_string(),
                    0,
                    sh.threads,
                    sh.databases,
                    Shared::now_ms(),
                );
                // Keys whose TTL passed wait for the primary's DEL, as in any replica load.
                loader.keep_expired();
                let progress = sh.clone();
                loader.streaming(Box::new(move |n| {
                    progress
                        .persist
                        .loading_loaded_bytes
                        .store(n, Ordering::Relaxed)
                }));
                let target = crate::persist::load::Target::Staging(id);
                let stop = || !sh.repl.current(gen);
                use crate::persist::load::{feed_shards, Fed};
                let r = match feed_shards(&sh, &mut loader, target, &stop) {
                    Ok(true) => Ok(std::mem::take(&mut loader.summary)),
                    Ok(false) => Err("The load was stopped".to_string()),
                    Err(Fed::Decode(e)) => Err(e),
                    Err(Fed::Shard(e)) => Err(format!("Failed loading the RDB file {name}: {e}")),
                };
                let _ = done_tx.send(r);
            });
        if let Err(e) = spawned {
            // No thread: `done` reports the failure at the first piece sent.
            log::warning(&format!(
                "Can't start the thread loading the MASTER's stream: {e}"
            ));
        }
        SwapLoad {
            shared: shared.clone(),
            id,
            data: Some(data_tx),
            done: done_rx,
            started: Instant::now(),
            sent: Instant::now(),
            swapped: false,
        }
    }

    /// Hands the loader the next bytes; false when it stopped (see [`SwapLoad::failed`]).
    fn send(&mut self, bytes: Vec<u8>) -> bool {
        self.sent = Instant::now();
        self.data.as_ref().is_some_and(|d| d.send(bytes).is_ok())
    }

    /// The loader stopped before the end of the payload: its error, logged.
    fn failed(&mut self) -> End {
        self.data = None;
        match self.done.recv() {
            Ok(Err(e)) => {
                log::warning(&e);
                log::warning("Failed trying to load the MASTER synchronization DB from socket, check server logs.");
                End::Retry
            }
            // The loader is gone without a word (it could not start): the link retries (a
            // REPLICAOF meanwhile ends it at its next check).
            Ok(Ok(_)) | Err(_) => End::Retry,
        }
    }

    /// The payload is complete: waits for the load, then swaps the staging databases in.
    fn finish(mut self, gen: u64) -> Result<(), End> {
        self.data = None;
        let summary = match self.done.recv() {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                log::warning(&e);
                log::warning("Failed trying to load the MASTER synchronization DB from socket, check server logs.");
                return Err(End::Retry);
            }
            Err(_) => return Err(End::Retry),
        };
        let shared = self.shared.clone();
        // As for any full sync, now that the dataset is replaced.
        if !forget_replaced_dataset(&shared, gen) {
            return Err(End::Stop);
        }
        log::notice("MASTER <-> REPLICA sync: Swapping active DB with loaded DB");
        let (tx_done, wait) = std::sync::mpsc::channel::<Option<Result<(), String>>>();
        let (id, functions) = (self.id, summary.functions.clone());
        shared.send(
            0,
            Msg::Spawn {
                f: Box::new(move |shared: Arc<Shared>| {
                    Box::pin(async move {
                        let tx = crate::exec::Tx::new(shared.clone(), Default::default());
                        tx.reserve(crate::cmd::transactions::every_shard(shared.threads))
                            .await;
                        let r = if !shared.repl.current(gen) {
                            None
                        } else if let Err(e) = shared.scripts.install_libraries(&functions, false)
                        {
                            Some(Err(format!(
                                "Failed loading the RDB file (the MASTER's stream): function library: {e}"
                            )))
                        } else {
                            swap_in_staging(&tx, id).await;
                            after_load(&tx, &Ok(())).await;
                            let p = &shared.persist;
                            p.loading.store(false, Ordering::SeqCst);
                            p.async_loading.store(false, Ordering::SeqCst);
                            Some(Ok(()))
                        };
                        tx.release();
                        let _ = tx_done.send(r);
                    })
                }),
            },
        );
        match wait.recv().unwrap_or(None) {
            Some(Ok(())) => {
                self.swapped = true;
                log::notice("MASTER <-> REPLICA sync: Discarding old DB in background");
                crate::persist::load::done_log(&shared, &summary, self.started);
                log::notice("MASTER <-> REPLICA sync: Finished with success");
                Ok(())
            }
            Some(Err(e)) => {
                log::warning(&e);
                log::warning("Failed trying to load the MASTER synchronization DB from socket, check server logs.");
                Err(End::Retry)
            }
            None => Err(End::Stop),
        }
    }
}

impl Drop for SwapLoad {
    /// A load that did not end in its swap: the loader stops (its input ends), and the
    /// staging databases go, freed in steps; the live ones were never touched.
    fn drop(&mut self) {
        if self.swapped {
            return;
        }
        self.data = None;
        let _ = self.done.recv();
        let id = self.id;
        for s in 0..self.shared.threads {
            self.shared.send(
                s,
                Msg::Run {
                    tx: None,
                    db: 0,
                    resp3: false,
                    writer: None,
                    f: Box::new(move |ctx| crate::persist::load::discard_staging(ctx, Some(id))),
                },
            );
        }
        let p = &self.shared.persist;
        p.loading.store(false, Ordering::SeqCst);
        p.async_loading.store(false, Ordering::SeqCst);
        log::notice("MASTER <-> REPLICA sync: Discarding temporary DB in background");
    }
}

/// Swaps load `id`'s staging databases in for the live ones on every shard (`tx` holds them
/// all: no client sees one shard's new data beside another's old), as SWAPDB swaps two
/// databases: watched keys live in either count as changed and blocked clients look again.
/// The old tables are freed in steps (lazyfree.rs), and tracking clients get one null
/// invalidation, as for FLUSHALL.
async fn swap_in_staging(tx: &crate::exec::Tx, id: u64) {
    tx.run_all(move |ctx| {
        let now = ctx.clock.now_ms;
        let mut staged = match ctx.shard.staging.take() {
            Some(s) if s.id == id => s.dbs,
            other => {
                // No key of the snapshot landed on this shard: its new databases are empty.
                ctx.shard.staging = other;
                Vec::new()
            }
        };
        staged.resize_with(ctx.shard.dbs.len(), darner_engine::Db::new);
        ctx.shard.tracking.clear();
        for (live, new) in ctx.shard.dbs.iter_mut().zip(staged.iter_mut()) {
            darner_engine::Db::swap(live, new, now);
            live.take_written();
            let old = new.flush();
            if !old.is_empty() {
                ctx.shard.dying.push_table(&ctx.shared.metrics, old);
            }
        }
    })
    .await;
    if tx.shared().tracking.clients.load(Ordering::Relaxed) > 0 {
        for t in 0..tx.nshards() {
            crate::exec::post(tx.shared(), t, crate::msg::Msg::TrackingFlush);
        }
    }
}

/// After a full sync's load (holding every shard): a failed one leaves the databases empty;
/// a good one is followed by an AOF rewrite when the AOF is on.
async fn after_load(tx: &crate::exec::Tx, r: &Result<(), String>) {
    let shared = tx.shared();
    if r.is_err() {
        // Never a half-loaded dataset: empty, until the next sync.
        crate::cmd::server::flush_shards(tx, true).await;
    } else if shared.aof.on.load(Ordering::Acquire) {
        // The AOF must hold the dataset just loaded, not the one it replaced (Redis's
        // restartAOFAfterSYNC): a rewrite from here, or as soon as the one running ends
        // (its cut is older).
        if crate::aof::start_rewrite(tx).await.is_err() {
            shared.aof.rewrite_scheduled.store(true, Ordering::Release);
        }
    }
}

// ---- the stream ----

/// The server's own connection the stream is applied through.
struct Loopback {
    sock: TcpStream,
    replies: Vec<u8>,
}

impl Loopback {
    fn connect(shared: &Shared) -> Option<Loopback> {
        let listen = shared.listening.lock().unwrap().addrs.clone();
        match crate::aof::connect_self(&listen, &shared.repl.link_peer) {
            Ok(sock) => {
                let _ = sock.set_read_timeout(Some(TICK));
                Some(Loopback {
                    sock,
                    replies: Vec::new(),
                })
            }
            Err(e) => {
                log::warning(&format!(
                    "Can't open the connection that applies the MASTER's stream: {e}"
                ));
                None
            }
        }
    }
}

impl Loopback {
    /// Selects `db` and waits for its reply (before any command of the stream is sent).
    fn select(&mut self, db: i64) -> Result<(), String> {
        self.sock
            .write_all(&command(&[b"SELECT", db.to_string().as_bytes()]))
            .map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.replies.ends_with(b"\r\n") {
            if Instant::now() > deadline {
                return Err("no reply to SELECT".into());
            }
            self.read_some()?;
        }
        let reply = std::mem::take(&mut self.replies);
        if reply == b"+OK\r\n" {
            Ok(())
        } else {
            Err(format!(
                "SELECT {db}: {}",
                String::from_utf8_lossy(&reply).trim_end()
            ))
        }
    }
}

/// Where this replica's data stands in its primary's stream, for a snapshot's `repl-id`,
/// `repl-offset` and `repl-stream-db` (Redis's rdbSaveInfo): known exactly when the link has
/// nothing in the server's hands: paused by [`hold_link`] while streaming (the offset
/// applied), or not streaming, where the history the next PSYNC offers (`cached`) is the
/// data's. None on a primary, while the link applies commands, and from a full sync's
/// `+FULLRESYNC` until the snapshot loaded is adopted (as Redis, whose cached master is
/// gone then): the data may be the new snapshot's while `history` is still the old one's,
/// and a restart that continued the old history over it would apply writes twice (a
/// restart from a file without the fields syncs in full).
pub struct ReplPosition {
    pub replid: ReplId,
    pub offset: i64,
    pub stream_db: i64,
}

pub fn cut_position(shared: &Shared) -> Option<ReplPosition> {
    if !shared.repl.is_replica.load(Ordering::SeqCst) {
        return None;
    }
    let st = shared.repl.lock();
    st.master.as_ref()?;
    let r = &shared.repl;
    let paused = r.hold.load(Ordering::SeqCst) > 0
        && r.held_for.load(Ordering::SeqCst) >= r.hold_epoch.load(Ordering::SeqCst);
    let stream_db = r.stream_db.load(Ordering::SeqCst);
    if paused {
        return Some(ReplPosition {
            replid: st.history.replid,
            offset: st.history.master_repl_offset,
            stream_db,
        });
    }
    let idle = r.applying.load(Ordering::SeqCst) == 0;
    let (replid, offset) = st.cached.filter(|_| idle)?;
    Some(ReplPosition {
        replid,
        offset,
        stream_db,
    })
}

/// A pause of the link ([`hold_link`]), undone when dropped.
pub struct LinkHold<'a>(&'a Shared);

impl Drop for LinkHold<'_> {
    fn drop(&mut self) {
        release_hold(self.0);
    }
}

/// How long [`hold_link`] waits for the link to pause. The pause comes once the commands
/// the link forwarded (at most `WINDOW`) are applied: quickly, unless the server is slow
/// (a loaded machine, a busy script) or holds them back (CLIENT PAUSE), and the snapshot
/// needs every shard after that anyway. A snapshot cut without the pause records no
/// position, and a restart from it syncs in full, so the wait is long (it used to be a
/// second, which a loaded machine could exceed), bounded as Redis's `shutdown-timeout`
/// (10 s by default) bounds a shutdown's wait for its replicas.
const HOLD_WAIT: Duration = Duration::from_secs(10);

/// On a replica, pauses the link where everything it forwarded is applied (waiting at most
/// [`HOLD_WAIT`]), so that a snapshot cut while the pause lasts knows its offset in the
/// primary's stream ([`cut_position`]). Call before taking every shard.
pub async fn hold_link(shared: &Shared) -> Option<LinkHold<'_>> {
    if !shared.repl.is_replica.load(Ordering::SeqCst) {
        return None;
    }
    let epoch = request_hold(shared);
    let deadline = Instant::now() + HOLD_WAIT;
    while held(shared, epoch) == Some(false) && Instant::now() < deadline {
        crate::exec::sleep_until(Instant::now() + Duration::from_millis(1)).await;
    }
    if held(shared, epoch) == Some(false) {
        log::warning(
            "The link with the MASTER did not pause in time for the snapshot: it records no \
             replication offset, a restart from it will need a full resync",
        );
    }
    Some(LinkHold(shared))
}

/// At start-up, before `replicaof` is followed: the history an RDB file of this replica
/// recorded (`repl-id`, `repl-offset`, `repl-stream-db`), so the link asks to continue it
/// (Redis's loadDataFromDisk with rsi).
pub fn restore(shared: &Shared, pos: ReplPosition) {
    let mut st = shared.repl.lock();
    st.history.adopt(pos.replid, pos.offset);
    shared.repl.stream_db.store(pos.stream_db, Ordering::SeqCst);
}

/// At start-up of a primary (no `replicaof`): the history its own file recorded (a save of a
/// primary with a backlog, bgsave.rs `start_claimed`), kept as its second ID, valid up to
/// the recorded offset + 1, under a new ID, with a backlog from there, as Redis 7's
/// loadDataFromDisk for a master: a replica that stood at that offset continues with a
/// partial resync (`+CONTINUE <newid>`). The feed starts now, before any client writes, so
/// that every write from here on is in the stream that replica continues.
pub fn restore_primary(shared: &Arc<Shared>, pos: ReplPosition) {
    {
        let mut st = shared.repl.lock();
        st.history.adopt(pos.replid, pos.offset);
        st.history.shift(new_replid());
        st.history.create_backlog(backlog_size(shared));
    }
    crate::primary::start_feed(shared);
}

/// What a command of the stream is, for the offset.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// Applied: counted once its reply came.
    Applied,
    /// Applied inside MULTI: counted at EXEC / DISCARD.
    InMulti,
    /// EXEC or DISCARD: counts the transaction.
    EndMulti,
    /// Not applied (PING, REPLCONF): counted in its turn.
    Local,
    /// REPLCONF GETACK: an ACK goes with the offset before it, then it is counted.
    GetAck,
    /// A DISCARD of our own (the link dropped inside MULTI): the transaction is not counted.
    Abandon,
}

struct Pending {
    len: i64,
    kind: Kind,
}

/// The stream's bookkeeping: the commands in flight and the offset reached.
struct Offsets {
    fifo: VecDeque<Pending>,
    /// Commands in `fifo` that wait for a reply.
    awaiting: usize,
    applied: i64,
    multi_bytes: i64,
    in_multi: bool,
    /// ACKs to send (GETACK reached).
    acks: Vec<i64>,
}

impl Offsets {
    fn push(&mut self, len: i64, kind: Kind) {
        if !matches!(kind, Kind::Local | Kind::GetAck) {
            self.awaiting += 1;
        }
        self.fifo.push_back(Pending { len, kind });
        self.settle();
    }

    /// Counts the commands at the front that need no reply.
    fn settle(&mut self) {
        while let Some(p) = self.fifo.front() {
            match p.kind {
                Kind::Local => self.applied += p.len,
                Kind::GetAck => {
                    self.acks.push(self.applied);
                    self.applied += p.len;
                }
                _ => break,
            }
            self.fifo.pop_front();
        }
    }

    /// A reply came: the oldest command waiting for one is applied.
    fn replied(&mut self) {
        self.settle();
        if let Some(p) = self.fifo.pop_front() {
            self.awaiting = self.awaiting.saturating_sub(1);
            match p.kind {
                Kind::Applied => self.applied += p.len,
                Kind::InMulti => self.multi_bytes += p.len,
                Kind::EndMulti => {
                    self.applied += self.multi_bytes + p.len;
                    self.multi_bytes = 0;
                }
                Kind::Abandon => self.multi_bytes = 0,
                Kind::Local | Kind::GetAck => {}
            }
        }
        self.settle();
    }
}

fn ack(offset: i64) -> Vec<u8> {
    command(&[b"REPLCONF", b"ACK", offset.to_string().as_bytes()])
}

/// Waits until the loopback connection `lb` or, when `up` is given, the primary's connection
/// is readable (or [`TICK`] passed). The primary's is left out while the window is full: its
/// bytes wait until replies free room, and a socket that is readable and not read would
/// make every poll return at once (the link thread spinning on a core the shards need).
fn wait_readable(up: Option<&TcpStream>, lb: &TcpStream) -> (bool, bool) {
    let mut fds = [
        libc::pollfd {
            fd: lb.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: up.map_or(-1, |s| s.as_raw_fd()),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let nfds = if up.is_some() { 2 } else { 1 };
    // SAFETY: `fds` is a valid array of two pollfd structures on this stack frame, and
    // `nfds` (at most its length) is passed with it; poll only writes their `revents` fields.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), nfds, TICK.as_millis() as libc::c_int) };
    if n <= 0 {
        return (false, false);
    }
    let ready = |f: &libc::pollfd| f.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0;
    (up.is_some() && ready(&fds[1]), ready(&fds[0]))
}

/// A full sync replaces the dataset (on disk, from the socket, or swapped in): this server's
/// replicas sync again, its backlog (of the data replaced) can no longer serve a PSYNC
/// (Redis's replicationAttachToNewMaster), nor can the history it had: a REPLICAOF that stops
/// the load half way must not continue it. False when link generation `gen` is over.
fn forget_replaced_dataset(shared: &Shared, gen: u64) -> bool {
    let mut st = shared.repl.lock();
    if !shared.repl.current(gen) {
        return false;
    }
    crate::primary::drop_all(&mut st.replicas);
    st.history.backlog = None;
    st.cached = None;
    true
}

/// Applies the primary's stream from `offset` until the link drops or the generation ends.
fn stream(
    shared: &Arc<Shared>,
    gen: u64,
    up: &mut Upstream,
    lb: &mut Option<Loopback>,
    offset: i64,
) -> End {
    let Some(l) = lb.as_mut() else {
        return End::Retry;
    };
    let now = Shared::real_now_ms();
    set_link(shared, gen, |m| {
        m.link = LinkState::Connected;
        m.last_io_ms = now;
        m.down_since = 0;
        m.read_offset = offset;
    });
    shared.repl.applying.store(gen, Ordering::SeqCst);
    let mut off = Offsets {
        fifo: VecDeque::new(),
        awaiting: 0,
        applied: offset,
        multi_bytes: 0,
        in_multi: false,
        acks: Vec::new(),
    };
    let mut read_offset = offset;
    // The primary's bytes split into commands and not yet applied: they go into the backlog
    // (and on to this server's replicas) as they are applied, so the backlog's offsets are
    // the applied ones (`publish`).
    let mut feed = Feed {
        unfed: Vec::new(),
        fed: offset,
    };
    // The loopback connection itself failed (CLIENT KILL TYPE master, say): its selected
    // database and what it had in flight are gone with it, so the stream cannot go on from
    // the offset applied; the next session asks for a full resync on a new connection.
    let mut local_lost = false;
    let mut parser = darner_resp::RequestParser::new();
    let limits = darner_resp::Limits::default();
    let timeout = repl_timeout(shared);
    let mut last_ack = Instant::now();
    let mut forward: Vec<u8> = Vec::new();
    // The first ACK at once: a primary that sent a diskless snapshot waits for it.
    let mut lost = up.sock.write_all(&ack(offset)).err().map(|e| e.to_string());
    let mut pos = 0usize;
    let end = loop {
        if lost.is_some() {
            break End::Retry;
        }
        if !shared.repl.current(gen) {
            break End::Stop;
        }
        // A chained replica's snapshot wants the link paused: nothing more is forwarded
        // until it is cut.
        let holding = shared.repl.hold.load(Ordering::SeqCst) > 0;
        // Split what came into commands, as many as the window allows.
        while !holding && off.awaiting < WINDOW && pos < up.buf.len() {
            match parser.parse(&up.buf[pos..], &limits) {
                Ok(Some(req)) => {
                    let bytes = &up.buf[pos..pos + req.consumed];
                    let name = req.arg(&up.buf[pos..], 0).unwrap_or_default();
                    let sub = req.arg(&up.buf[pos..], 1).unwrap_or_default();
                    let len = req.consumed as i64;
                    if name.eq_ignore_ascii_case(b"select") {
                        if let Some(db) = std::str::from_utf8(sub)
                            .ok()
                            .and_then(|d| d.parse::<i64>().ok())
                        {
                            shared.repl.stream_db.store(db, Ordering::SeqCst);
                        }
                    }
                    let kind = if name.eq_ignore_ascii_case(b"ping") {
                        Kind::Local
                    } else if name.eq_ignore_ascii_case(b"replconf") {
                        if sub.eq_ignore_ascii_case(b"getack") {
                            Kind::GetAck
                        } else {
                            Kind::Local
                        }
                    } else if name.eq_ignore_ascii_case(b"multi") {
                        off.in_multi = true;
                        Kind::InMulti
                    } else if off.in_multi
                        && (name.eq_ignore_ascii_case(b"exec")
                            || name.eq_ignore_ascii_case(b"discard"))
                    {
                        off.in_multi = false;
                        Kind::EndMulti
                    } else if off.in_multi {
                        Kind::InMulti
                    } else {
                        Kind::Applied
                    };
                    if !matches!(kind, Kind::Local | Kind::GetAck) {
                        forward.extend_from_slice(bytes);
                    }
                    feed.unfed.extend_from_slice(bytes);
                    parser.recycle(req.args);
                    off.push(len, kind);
                    read_offset += len;
                    pos += req.consumed;
                }
                Ok(None) => break,
                Err(e) => {
                    log::warning(&format!("Protocol error from MASTER: {}", e.message()));
                    lost = Some("protocol error".into());
                    break;
                }
            }
        }
        if pos > 0 && (pos == up.buf.len() || pos > 1 << 20) {
            up.buf.drain(..pos);
            pos = 0;
        }
        if lost.is_some() {
            break End::Retry;
        }
        // Nothing goes to the server once this generation is over.
        if !forward.is_empty() {
            if !shared.repl.current(gen) {
                break End::Stop;
            }
            if let Err(e) = l.sock.write_all(&forward) {
                log::warning(&format!(
                    "The connection applying the MASTER's stream failed: {e}"
                ));
                local_lost = true;
                break End::Retry;
            }
            forward.clear();
        }
        for a in off.acks.drain(..) {
            if let Err(e) = up.sock.write_all(&ack(a)) {
                lost = Some(e.to_string());
            }
        }
        if last_ack.elapsed() >= Duration::from_secs(1) {
            last_ack = Instant::now();
            // CONFIG SET repl-backlog-size resizes the backlog (within a second).
            let size = backlog_size(shared);
            if let Some(b) = shared.repl.lock().history.backlog.as_mut() {
                b.resize(size);
            }
            if let Err(e) = up.sock.write_all(&ack(off.applied)) {
                lost = Some(e.to_string());
            }
        }
        publish(shared, gen, &off, read_offset, up.last_io, &mut feed);
        if holding && off.awaiting == 0 {
            // Everything forwarded is applied and in the backlog: the snapshot may be cut.
            let epoch = shared.repl.hold_epoch.load(Ordering::SeqCst);
            shared.repl.held_for.store(epoch, Ordering::SeqCst);
        }
        if lost.is_some() {
            continue;
        }
        let watch_up = off.awaiting < WINDOW;
        let (up_ready, lb_ready) = wait_readable(watch_up.then_some(&up.sock), &l.sock);
        if lb_ready {
            if let Err(e) = read_replies(l, &mut off) {
                log::warning(&format!(
                    "The connection applying the MASTER's stream failed: {e}"
                ));
                local_lost = true;
                break End::Retry;
            }
        }
        if up_ready && off.awaiting < WINDOW {
            if let Err(e) = up.fill() {
                lost = Some(e);
                continue;
            }
        }
        if up.last_io.elapsed() > timeout {
            log::warning("MASTER timeout: no data nor PING received...");
            lost = Some("timeout".into());
        }
    };
    // Whatever the server has is applied before the offset is kept (or the stop answered).
    // A transaction the primary had not finished is dropped, and not counted.
    if off.in_multi && l.sock.write_all(b"*1\r\n$7\r\nDISCARD\r\n").is_ok() {
        off.push(0, Kind::Abandon);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while off.awaiting > 0 && Instant::now() < deadline {
        if read_replies(l, &mut off).is_err() {
            break;
        }
    }
    off.settle();
    if off.awaiting > 0 || local_lost {
        *lb = None;
    }
    publish(shared, gen, &off, read_offset, up.last_io, &mut feed);
    if let End::Retry = end {
        log::warning("Connection with master lost.");
        log::notice("Caching the disconnected master state.");
    }
    {
        let mut st = shared.repl.lock();
        // A pause this stream made holds no more: a snapshot cut from here takes the
        // history handed over below (`cut_position`), not whatever the link does next (a
        // full sync may replace the data before the cut).
        shared.repl.held_for.store(0, Ordering::SeqCst);
        if shared.repl.current(gen) {
            let replid = st.history.replid;
            st.cached = (!local_lost).then_some((replid, off.applied));
            if let Some(m) = st.master.as_mut() {
                m.down_since = Shared::real_now_ms() / 1000;
                m.link = LinkState::Connect;
            }
            shared.repl.link_up.store(false, Ordering::SeqCst);
        } else {
            // A REPLICAOF came (whether the link had dropped first or not).
            let broken = local_lost || off.awaiting > 0;
            hand_over_history(&mut st, shared, gen, &off, &mut feed, broken);
        }
    }
    let _ = shared
        .repl
        .applying
        .compare_exchange(gen, 0, Ordering::SeqCst, Ordering::SeqCst);
    end
}

/// The link ended (stopped, or dropped just before) and a REPLICAOF came (the generation
/// after this one; it is seen here whichever came first): the offset it
/// applied, and the backlog up to it, are what the next link offers the new primary (PSYNC
/// with this history), as Redis's cached master is the old master client's state, or where
/// a promotion shifts the history (NO ONE). Runs before the next link starts or the
/// promotion shifts (REPLICAOF waits for `applying` to clear). `broken`: what was applied
/// is not known exactly (a full sync then).
fn hand_over_history(
    st: &mut State,
    shared: &Shared,
    gen: u64,
    off: &Offsets,
    feed: &mut Feed,
    broken: bool,
) {
    if shared.repl.generation.load(Ordering::SeqCst) != gen + 1 {
        return;
    }
    // REPLICAOF NO ONE (no primary): the promotion shifts the history once this is counted.
    let promoted = st.master.is_none();
    if broken {
        st.cached = None;
        return;
    }
    let n = usize::try_from(off.applied - feed.fed)
        .unwrap_or(0)
        .min(feed.unfed.len());
    let bytes: Vec<u8> = feed.unfed.drain(..n).collect();
    feed.fed = off.applied;
    if st.history.backlog.is_some() {
        st.history.feed(&bytes);
    }
    st.history.master_repl_offset = off.applied;
    if !promoted {
        st.cached = Some((st.history.replid, off.applied));
    }
}

impl Loopback {
    /// Adds what the server answered to `replies` (nothing within the read timeout is fine).
    fn read_some(&mut self) -> Result<(), String> {
        let mut chunk = [0u8; 16 * 1024];
        match self.sock.read(&mut chunk) {
            Ok(0) => Err("closed by the server".into()),
            Ok(n) => {
                self.replies.extend_from_slice(&chunk[..n]);
                Ok(())
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Reads the replies that came and counts them.
fn read_replies(l: &mut Loopback, off: &mut Offsets) -> Result<(), String> {
    l.read_some()?;
    let limits = darner_resp::Limits::default();
    let mut used = 0;
    while let Ok(Some((frame, n))) = darner_resp::decode(&l.replies[used..], &limits) {
        used += n;
        if let darner_resp::Frame::Error(e) = &frame {
            log::warning(&format!(
                "== CRITICAL == This replica is sending an error to its master: '{}'",
                String::from_utf8_lossy(e)
            ));
        }
        off.replied();
    }
    l.replies.drain(..used);
    Ok(())
}

/// The primary's bytes on their way to the backlog: `unfed` starts at offset `fed + 1`.
struct Feed {
    unfed: Vec<u8>,
    fed: i64,
}

/// Makes the offsets visible to INFO and ROLE, and feeds what was applied since the last
/// time to the backlog and this server's replicas (chained replication).
fn publish(
    shared: &Shared,
    gen: u64,
    off: &Offsets,
    read_offset: i64,
    last_io: Instant,
    feed: &mut Feed,
) {
    let mut st = shared.repl.lock();
    if !shared.repl.current(gen) {
        return;
    }
    let applied = usize::try_from(off.applied - feed.fed)
        .unwrap_or(0)
        .min(feed.unfed.len());
    if applied > 0 {
        let bytes: Vec<u8> = feed.unfed.drain(..applied).collect();
        feed.fed = off.applied;
        if st.history.backlog.is_some() {
            crate::primary::feed_from_master(shared, &mut st, bytes);
        }
    }
    st.history.master_repl_offset = off.applied;
    let io_ms = Shared::real_now_ms() - last_io.elapsed().as_millis() as i64;
    if let Some(m) = st.master.as_mut() {
        m.read_offset = read_offset;
        m.last_io_ms = io_ms;
    }
}

// ---- introspection ----

/// ROLE's reply.
pub fn role(shared: &Shared, w: &mut darner_resp::ReplyWriter) {
    let st = shared.repl.lock();
    match &st.master {
        None => {
            w.array(3);
            w.bulk(b"master");
            w.int(st.history.master_repl_offset);
            crate::primary::role_list(&st, w);
        }
        Some(m) => {
            w.array(5);
            w.bulk(b"slave");
            w.bulk(m.host.as_bytes());
            w.int(m.port as i64);
            w.bulk(m.link.role_name().as_bytes());
            w.int(if m.link == LinkState::Connected {
                st.history.master_repl_offset
            } else {
                -1
            });
        }
    }
}

/// INFO's replication section.
pub fn info(shared: &Shared, out: &mut String) {
    use std::fmt::Write as _;
    let st = shared.repl.lock();
    let now_ms = Shared::real_now_ms();
    let h = &st.history;
    match &st.master {
        None => {
            let _ = write!(out, "role:master\r\n");
        }
        Some(m) => {
            let up = m.link == LinkState::Connected;
            let (read, applied) = if up {
                (m.read_offset, h.master_repl_offset)
            } else if let Some((_, o)) = st.cached {
                (o, o)
            } else {
                (1, 1)
            };
            let _ = write!(
                out,
                "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\n\
                 master_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\n\
                 slave_read_repl_offset:{read}\r\nslave_repl_offset:{applied}\r\n",
                m.host,
                m.port,
                if up { "up" } else { "down" },
                if up {
                    (now_ms - m.last_io_ms) / 1000
                } else {
                    -1
                },
                (m.link == LinkState::Transfer) as u8,
            );
            if m.link == LinkState::Transfer {
                let perc = if m.transfer_size > 0 {
                    m.transfer_read as f64 / m.transfer_size as f64 * 100.0
                } else {
                    0.0
                };
                let _ = write!(
                    out,
                    "master_sync_total_bytes:{}\r\nmaster_sync_read_bytes:{}\r\n\
                     master_sync_left_bytes:{}\r\nmaster_sync_perc:{perc:.2}\r\n\
                     master_sync_last_io_seconds_ago:{}\r\n",
                    m.transfer_size,
                    m.transfer_read,
                    m.transfer_size - m.transfer_read,
                    (now_ms - m.transfer_last_io_ms) / 1000
                );
            }
            if !up {
                let down = if m.down_since == 0 {
                    -1
                } else {
                    now_ms / 1000 - m.down_since
                };
                let _ = write!(out, "master_link_down_since_seconds:{down}\r\n");
            }
            let ro = shared.config.hot.replica_read_only.load(Ordering::Relaxed);
            let _ = write!(
                out,
                "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:{}\r\n",
                shared.config.get_i64("replica-priority"),
                ro as u8,
                (shared.config.get("replica-announced").as_deref() == Some("yes")) as u8
            );
        }
    }
    crate::primary::info(shared, &st, out);
    let size = shared
        .config
        .get("repl-backlog-size")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1 << 20);
    let (active, size, first, histlen) = match &h.backlog {
        Some(b) => (1, b.size(), b.first_byte_offset(), b.histlen()),
        None => (0, size, 0, 0),
    };
    let _ = write!(
        out,
        "master_failover_state:{}\r\nmaster_replid:{}\r\n\
         master_replid2:{}\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:{}\r\n\
         repl_backlog_active:{active}\r\nrepl_backlog_size:{size}\r\n\
         repl_backlog_first_byte_offset:{first}\r\nrepl_backlog_histlen:{histlen}\r\n",
        shared.failover.state_name(),
        h.replid,
        h.replid2,
        h.master_repl_offset,
        h.second_replid_offset
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets() -> Offsets {
        Offsets {
            fifo: VecDeque::new(),
            awaiting: 0,
            applied: 100,
            multi_bytes: 0,
            in_multi: false,
            acks: Vec::new(),
        }
    }

    #[test]
    fn the_offset_advances_as_replies_come_and_getack_sees_what_came_before() {
        let mut o = offsets();
        o.push(10, Kind::Applied);
        o.push(5, Kind::GetAck);
        o.push(3, Kind::Local);
        assert_eq!(o.applied, 100);
        assert!(o.acks.is_empty());
        o.replied();
        assert_eq!(o.acks, [110]);
        assert_eq!(o.applied, 118);
        assert_eq!(o.awaiting, 0);
    }

    #[test]
    fn a_transaction_counts_at_exec_and_an_abandoned_one_not_at_all() {
        let mut o = offsets();
        o.push(7, Kind::InMulti);
        o.push(20, Kind::InMulti);
        o.push(9, Kind::EndMulti);
        o.replied();
        o.replied();
        assert_eq!(o.applied, 100);
        o.replied();
        assert_eq!(o.applied, 136);
        o.push(7, Kind::InMulti);
        o.push(0, Kind::Abandon);
        o.replied();
        o.replied();
        assert_eq!(o.applied, 136);
        assert_eq!(o.multi_bytes, 0);
    }
}
