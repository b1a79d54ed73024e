//! One thread: an event loop (epoll through mio), the connections it accepted, the shard it
//! owns, and the executor of its transaction tasks.
//!
//! Each loop iteration: wait for socket events or messages (or the next cron tick); read and
//! parse requests; run each command inline when its shard is this thread's and unlocked,
//! otherwise batch it per remote shard (one message per shard per read); drain the inbox and
//! the local queue, polling tasks whose hops completed; write what every connection has ready.

use crate::cmd::{self, Command, ConnCtx, Handler};
use crate::conn::{ClientState, Conn, ReplyMode};
use crate::exec::{self, post, Executor, Tx, LOCAL, THREAD};
use crate::log;
use crate::msg::{BatchItem, ConnRef, Msg};
use crate::shard::{Shard, ShardCtx};
use crate::shared::{bump, ClientHandle, Shared, SlowlogEntry};
use bytes::{Bytes, BytesMut};
use darner_commands::flags;
use darner_engine::Clock;
use darner_resp::{Limits, ReplyWriter, RequestParser};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use smallvec::SmallVec;

mod scheduling;
mod stats;
use stats::{account, record, record_stats, slowlog_push, Lap};
pub use stats::{calibrate_clock, feed_monitors, record_in_exec};
use std::io::{ErrorKind, Write};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAKER: Token = Token(usize::MAX);
/// Redis's reply to DEBUG while `enable-debug-command` does not allow it.
const ERR_DEBUG_NOT_ALLOWED: &[u8] = b"ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";
/// Redis's reply to MODULE LOAD / LOADEX / UNLOAD while `enable-module-command` does not allow it.
const ERR_MODULE_NOT_ALLOWED: &[u8] = b"ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";
const LISTENER_BASE: usize = usize::MAX - 64;
/// The loop's alarm clock (the cron and blocked clients' timeouts).
const ALARM: Token = Token(LISTENER_BASE - 1);
/// Stop reading a client's requests while this much output waits for it (backpressure: a
/// client that does not read cannot make the server buffer without bound).
const OUTPUT_BACKPRESSURE: usize = 64 << 20;
const READ_CHUNK: usize = 16 * 1024;
/// Bytes read from one connection per loop turn before others get theirs (16 KiB, as Redis
/// reads per event: with 64 KiB, a client streaming a pipeline doubled the p99.9 of others).
const READ_BUDGET: usize = 16 * 1024;

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
    /// Single-shard commands waiting to be sent, per shard (filled while one read is parsed).
    batches: Vec<Vec<BatchItem>>,
    /// Connections with output to write or input to resume.
    dirty: Vec<usize>,
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
            shared,
            poll,
            listeners,
            conns: slab::Slab::new(),
            next_gen: 0,
            rx,
            exec: Executor::default(),
            dirty: Vec::new(),
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
            stop: false,
        };
        crate::notify::attach(&w.shared, &mut w.shard);
        let bcast = w.shared.tracking.prefixes.active_flag();
        for db in &mut w.shard.dbs {
            db.collect_written_while(bcast.clone());
            // A CLIENT PAUSE freezes expiry, as in Redis (nothing is written while paused).
            db.freeze_expiry_until(w.shared.pause_until.clone());
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
            let busy = self.exec.has_ready()
                || LOCAL.with(|l| !l.borrow().is_empty())
                || !self.more_input.is_empty()
                || !self.shard.dying.is_empty();
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
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != ErrorKind::Interrupted {
                    log::warning(&format!("poll failed: {e}"));
                }
            }
            // One clock read per turn: the commands of a turn share Redis's "cached time".
            self.loop_now = Instant::now();
            self.now_ms = Shared::now_ms();
            exec::fire_timers(self.loop_now);
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
            self.flush_dirty();
            self.bury_graveyards();
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

    // ---- accepting ----

    fn accept(&mut self, li: usize) {
        loop {
            // A listener CONFIG SET closed in this turn may still have had an event.
            let Some((_, l)) = self.listeners.get(li) else {
                return;
            };
            let (sock, peer) = match l.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => {
                    log::warning(&format!("Accepting client connection: {e}"));
                    return;
                }
            };
            self.new_conn(sock, peer);
        }
    }

    fn new_conn(&mut self, mut sock: TcpStream, peer: std::net::SocketAddr) {
        let hot = &self.shared.config.hot;
        let max = hot.maxclients.load(Ordering::Relaxed) as usize;
        if self.shared.connected.load(Ordering::Relaxed) >= max {
            let _ = sock.write_all(b"-ERR max number of clients reached\r\n");
            bump(&self.shared.stats[self.id].rejected_connections, 1);
            return;
        }
        if hot.protected_mode.load(Ordering::Relaxed)
            && !hot.has_password.load(Ordering::Relaxed)
            && !peer.ip().is_loopback()
        {
            let _ = sock.write_all(
                b"-DENIED Darner is running in protected mode because protected mode is enabled and no password is set for the default user. Connect from the loopback interface, or set a password with requirepass.\r\n",
            );
            bump(&self.shared.stats[self.id].rejected_connections, 1);
            return;
        }
        let _ = sock.set_nodelay(true);
        let keepalive = hot.tcp_keepalive.load(Ordering::Relaxed);
        if keepalive > 0 {
            let s = socket2::SockRef::from(&sock);
            let ka = socket2::TcpKeepalive::new().with_time(Duration::from_secs(keepalive as u64));
            let _ = s.set_tcp_keepalive(&ka);
        }
        self.shared.connected.fetch_add(1, Ordering::Relaxed);
        bump(&self.shared.stats[self.id].connections, 1);
        let id = self.shared.next_client_id.fetch_add(1, Ordering::Relaxed);
        // The slot and generation the connection will have (nothing is inserted before it).
        let slot = ConnRef {
            idx: self.conns.vacant_entry().key() as u32,
            gen: self.next_gen.wrapping_add(1),
        };
        let handle = Arc::new(ClientHandle {
            id,
            thread: self.id,
            conn: slot,
            kill: Default::default(),
        });
        self.shared
            .clients
            .lock()
            .unwrap()
            .insert(id, handle.clone());
        let laddr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
        use std::os::fd::AsRawFd;
        let fd = sock.as_raw_fd();
        let entry = self.conns.vacant_entry();
        let key = entry.key();
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut sock, Token(key), Interest::READABLE)
        {
            log::warning(&format!("register client: {e}"));
            self.shared.connected.fetch_sub(1, Ordering::Relaxed);
            self.shared.clients.lock().unwrap().remove(&id);
            return;
        }
        self.next_gen = self.next_gen.wrapping_add(1);
        let authenticated = !hot.has_password.load(Ordering::Relaxed);
        entry.insert(Conn {
            sock,
            gen: self.next_gen,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            parser: RequestParser::new(),
            out: Vec::new(),
            out_pos: 0,
            fence: None,
            fences: 0,
            next_seq: 0,
            done_seq: 0,
            pending: Default::default(),
            stream: Default::default(),
            in_tx: false,
            paused: None,
            parsed: Default::default(),
            protocol_error: None,
            state: ClientState {
                id,
                authenticated,
                addr: peer.to_string(),
                laddr,
                local: peer.ip().is_loopback(),
                fd,
                created_ms: Shared::now_ms(),
                last_cmd: "NULL",
                conn: ConnRef {
                    idx: key as u32,
                    gen: self.next_gen,
                },
                ..Default::default()
            },
            handle,
            last_interaction: Instant::now(),
            soft_limit_since: None,
            closing: false,
            read_paused: false,
            want_write: false,
            after: Vec::new(),
        });
        self.shared.stats[self.id]
            .clients
            .fetch_add(1, Ordering::Relaxed);
    }

    // ---- reading and parsing ----

    /// Reads what the socket has and runs the requests. `closing`: the event reported the
    /// peer's FIN, so read on until end of file instead of stopping at the first short read.
    fn read(&mut self, c: usize, closing: bool) {
        if let Some(eof) = self.fill(c, closing) {
            self.after_fill(c, eof);
        }
    }

    /// The reading half of [`Worker::read`]: fills the connection's buffer from its socket.
    /// Returns whether the peer closed, or None when there is nothing more to do for `c`
    /// (gone, paused, or closed for an oversized query buffer).
    fn fill(&mut self, c: usize, closing: bool) -> Option<bool> {
        let limit = self
            .shared
            .config
            .hot
            .client_query_buffer_limit
            .load(Ordering::Relaxed) as usize;
        let conn = self.conns.get_mut(c)?;
        if conn.read_paused {
            return None;
        }
        let mut eof = false;
        let mut total = 0;
        loop {
            if total >= READ_BUDGET && !closing {
                // Fairness: a client streaming a huge pipeline gets one budget per loop turn
                // (like Redis's 16 KB per read event), so other clients' requests are served
                // in between instead of waiting behind thousands of its commands.
                self.more_input.push(c);
                break;
            }
            let need = conn
                .parser
                .bytes_needed()
                .unwrap_or(0)
                .clamp(READ_CHUNK, 1 << 20);
            // Each batch's bytes are split off the front of the buffer, so its spare room
            // shrinks by what was consumed; reclaiming it (BytesMut::reserve) waits until a
            // quarter of a chunk is left rather than running after every request.
            let spare = conn.rbuf.capacity() - conn.rbuf.len();
            if spare < READ_CHUNK / 4 || (need > READ_CHUNK && spare < need) {
                conn.rbuf.reserve(need);
            }
            let spare = conn.rbuf.spare_capacity_mut();
            let asked = spare.len();
            // recv takes the uninitialized spare capacity as MaybeUninit bytes, so no zeroing
            // and no reference to uninitialized memory as &mut [u8].
            match crate::sys::recv(&conn.sock, spare) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    // SAFETY: the kernel initialized n bytes at the end of the buffer.
                    unsafe { conn.rbuf.set_len(conn.rbuf.len() + n) };
                    total += n;
                    // Checked after every read (as Redis does), not before the next one: the
                    // read that crosses the limit may be the last the peer causes, and
                    // edge-triggered readiness brings no further turn for this connection.
                    if conn.rbuf.len() > limit {
                        log::notice(&format!(
                            "Closing client that reached max query buffer length: id={} addr={} (qbuf initial bytes: {:?})",
                            conn.state.id,
                            conn.state.addr,
                            String::from_utf8_lossy(&conn.rbuf[..conn.rbuf.len().min(64)])
                        ));
                        bump(&self.shared.stats[self.id].net_input, total as u64);
                        self.close(c);
                        return None;
                    }
                    // A short read drained the socket: data arriving later raises a new
                    // edge-triggered event, so the extra read that would only say
                    // WouldBlock is skipped (one syscall less per request when unpipelined).
                    if n < asked && !closing {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    eof = true;
                    break;
                }
            }
        }
        bump(&self.shared.stats[self.id].net_input, total as u64);
        if total > 0 {
            conn.last_interaction = self.loop_now;
        }
        Some(eof)
    }

    /// The running half of [`Worker::read`]: runs what was read, then handles the peer's EOF.
    fn after_fill(&mut self, c: usize, eof: bool) {
        self.process(c);
        if eof {
            if let Some(conn) = self.conns.get_mut(c) {
                if conn.in_tx || !conn.pending.is_empty() {
                    // Let in-flight work finish; close once its replies are flushed. A client
                    // blocked on keys stops waiting now (nothing may be popped for it).
                    conn.closing = true;
                    let id = conn.state.id;
                    self.dirty.push(c);
                    crate::blocking::cancel(&self.shared, id);
                } else {
                    self.close(c);
                }
            }
        }
    }

    fn limits(&self, authenticated: bool) -> Limits {
        Limits {
            max_bulk_len: self
                .shared
                .config
                .hot
                .proto_max_bulk_len
                .load(Ordering::Relaxed) as usize,
            authenticated,
            ..Limits::default()
        }
    }

    /// Parses and dispatches every complete request in the connection's buffer.
    /// Whether the connection must not run more commands now (a transaction task of its own
    /// is running, it is closing or paused, or its output is backed up).
    fn held(&mut self, c: usize) -> bool {
        let conn = &mut self.conns[c];
        if conn.in_tx
            || conn.closing
            || conn.paused.is_some()
            || conn.state.close_after_reply
            || conn.stream.wait
        {
            return true;
        }
        if conn.out_len() > OUTPUT_BACKPRESSURE {
            conn.read_paused = true;
            return true;
        }
        false
    }

    /// Parses and dispatches every complete request in the connection's buffer.
    ///
    /// Requests are parsed a batch at a time and the batch's bytes are frozen once, so each
    /// request costs no buffer split of its own (arguments are slices of the frozen batch).
    /// Requests parsed but not yet run when the connection is held (MULTI/EXEC task, QUIT,
    /// CLIENT PAUSE) wait in `conn.parsed`, in order.
    fn process(&mut self, c: usize) {
        self.lap = Lap::start();
        loop {
            if !self.conns.contains(c) {
                return;
            }
            // Requests left over from an earlier batch go first.
            while let Some(args) = self.conns[c].parsed.pop_front() {
                if self.held(c) {
                    self.conns[c].parsed.push_front(args);
                    self.send_batches();
                    self.dirty.push(c);
                    return;
                }
                self.dispatch(c, &cmd::views(&args), Owner::Owned(&args));
                if !self.conns.contains(c) {
                    return;
                }
            }
            if self.held(c) || self.conns[c].protocol_error.is_some() {
                break;
            }
            let auth = self.conns[c].state.authenticated;
            let limits = self.limits(auth);
            let conn = &mut self.conns[c];
            // Parse a batch: several requests only once authenticated (AUTH changes the
            // limits that apply to the requests after it).
            let max = if auth { 256 } else { 1 };
            let mut requests: SmallVec<[(darner_resp::Request, usize); 4]> = SmallVec::new();
            let mut off = 0;
            let mut error = None;
            // (A parse of no new bytes could only say "incomplete": not asked.)
            while requests.len() < max && off < conn.rbuf.len() {
                match conn.parser.parse(&conn.rbuf[off..], &limits) {
                    Ok(Some(req)) => {
                        let at = off;
                        off += req.consumed;
                        requests.push((req, at));
                    }
                    Ok(None) => {
                        // Bytes that only held empty requests go with the batch, so they
                        // cannot pile up.
                        off += conn.parser.take_skipped();
                        break;
                    }
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
            let frozen: Bytes = conn.rbuf.split_to(off).freeze();
            let parsed_any = !requests.is_empty();
            if requests.len() > 1 {
                self.prefetch_keys(c, &requests, &frozen);
            }
            // Drained in place: moving the batch (inline array included) would copy it.
            let mut batch = requests.drain(..);
            for (req, at) in batch.by_ref() {
                if !req.args.is_empty() {
                    // Borrowed views of the frozen batch: a command that runs inline (most do)
                    // needs no owned copy and no reference count.
                    let args: SmallVec<[&[u8]; 8]> = req
                        .args
                        .iter()
                        .map(|a| match a {
                            darner_resp::Arg::Range(r) => &frozen[at + r.start..at + r.end],
                            darner_resp::Arg::Owned(v) => &v[..],
                        })
                        .collect();
                    self.dispatch(c, &args, Owner::Frozen(&frozen));
                }
                if let Some(conn) = self.conns.get_mut(c) {
                    conn.parser.recycle(req.args);
                }
                if !self.conns.contains(c) {
                    return;
                }
                if self.held(c) {
                    break;
                }
            }
            // Whatever the batch still holds waits for its turn.
            for (req, at) in batch {
                let args: Vec<Bytes> = req
                    .args
                    .into_iter()
                    .map(|a| match a {
                        darner_resp::Arg::Range(r) => frozen.slice(at + r.start..at + r.end),
                        darner_resp::Arg::Owned(v) => Bytes::from(v),
                    })
                    .collect();
                if !args.is_empty() {
                    self.conns[c].parsed.push_back(args);
                }
            }
            if let Some(e) = error {
                // Commands before the malformed one run first; the error is answered after
                // them (below, or when the connection resumes).
                self.conns[c].protocol_error = Some(e);
                break;
            }
            // Nothing left to parse (the usual end of an unpipelined request).
            if !parsed_any || self.conns[c].rbuf.is_empty() {
                break;
            }
        }
        if let Some(conn) = self.conns.get_mut(c) {
            // Not after QUIT or a kill: Redis would not have read that far.
            let quiet = conn.closing || conn.state.close_after_reply;
            if conn.parsed.is_empty() && !conn.in_tx && conn.paused.is_none() && !quiet {
                if let Some(e) = conn.protocol_error.take() {
                    self.protocol_error(c, e);
                }
            }
        }
        self.send_batches();
        self.dirty.push(c);
    }

    /// Starts loading the table buckets of the keys that the first buffered request of each of
    /// `conns` names (its second argument, found without a full parse: a wrong guess only
    /// costs a prefetch), when they are on this thread's shard; then their entries.
    fn prefetch_first_keys(&self, conns: &[(usize, bool)]) {
        let mut hashes: SmallVec<[(usize, u64); 64]> = SmallVec::new();
        for &(c, _) in conns {
            let Some(conn) = self.conns.get(c) else {
                continue;
            };
            if let Some(key) = darner_resp::peek_second_arg(&conn.rbuf) {
                if cmd::shard_of(key, self.shared.threads) == self.id {
                    let db = conn.state.db;
                    hashes.push((db, self.shard.dbs[db].prefetch(key)));
                }
            }
        }
        for (db, h) in hashes {
            self.shard.dbs[db].prefetch_entry(h);
        }
    }

    /// Starts loading the table buckets of a pipeline's keys on this thread's shard before its
    /// commands run, so that their cache misses overlap instead of coming one after another.
    fn prefetch_keys(&self, c: usize, requests: &[(darner_resp::Request, usize)], frozen: &Bytes) {
        let db = &self.shard.dbs[self.conns[c].state.db];
        let mut hashes = [0u64; 64];
        let mut n = 0;
        // First the buckets of all the keys, then (buckets arriving meanwhile) their entries.
        for (req, at) in requests {
            let (Some(darner_resp::Arg::Range(name)), Some(darner_resp::Arg::Range(key))) =
                (req.args.first(), req.args.get(1))
            else {
                continue;
            };
            let Some(spec) = darner_commands::lookup(&frozen[at + name.start..at + name.end])
            else {
                continue;
            };
            if spec.first_key != 1 {
                continue;
            }
            let key = &frozen[at + key.start..at + key.end];
            if cmd::shard_of(key, self.shared.threads) == self.id && n < hashes.len() {
                hashes[n] = db.prefetch(key);
                n += 1;
            }
        }
        for &h in &hashes[..n] {
            db.prefetch_entry(h);
        }
    }

    /// Replies Redis's protocol error (after the replies already due) and closes once written.
    fn protocol_error(&mut self, c: usize, e: darner_resp::ProtocolError) {
        let conn = &mut self.conns[c];
        let msg = e.message_bytes();
        log::verbose(&format!(
            "Protocol error ({}) from client: id={}",
            String::from_utf8_lossy(&msg),
            conn.state.id
        ));
        let reply = cmd::with_writer(false, |w| w.error(&msg));
        let seq = conn.expect(false);
        conn.deliver(seq, reply);
        conn.closing = true;
        // Closing after the replies due, not a hang-up: a stream before it is not cancelled.
        conn.state.close_after_reply = true;
        conn.rbuf.clear();
        self.dirty.push(c);
    }

    fn send_batches(&mut self) {
        for s in 0..self.batches.len() {
            if self.batches[s].is_empty() {
                continue;
            }
            let items = std::mem::take(&mut self.batches[s]);
            post(
                &self.shared,
                s,
                Msg::Batch {
                    from: self.id,
                    items,
                },
            );
        }
    }

    // ---- dispatch ----

    fn reply_error_now(&mut self, c: usize, msg: &[u8]) {
        let conn = &mut self.conns[c];
        let reply = cmd::with_writer(conn.state.resp3, |w| w.error(msg));
        self.shared.record_error(&reply);
        bump(&self.shared.stats[self.id].total_error_replies, 1);
        let suppress = take_suppress(&mut conn.state);
        let seq = conn.expect(suppress);
        conn.deliver(seq, reply);
    }

    /// Refuses a command the way Redis's rejectCommand does: inside MULTI the transaction is
    /// flagged (EXEC will fail), and a refused EXEC itself discards the transaction with an
    /// EXECABORT that carries the reason.
    fn reject(&mut self, c: usize, spec: Option<&darner_commands::CommandSpec>, msg: &[u8]) {
        let conn = &mut self.conns[c];
        if spec.is_some_and(|s| s.full_name == "exec") {
            // Even outside MULTI, as Redis's execCommandAbort (which also unwatches).
            conn.state.multi = None;
            conn.state.multi_dirty = false;
            conn.state.unwatch();
            let reason = msg.strip_prefix(b"ERR ").unwrap_or(msg);
            let mut m = b"EXECABORT Transaction discarded because of: ".to_vec();
            m.extend_from_slice(reason);
            self.reply_error_now(c, &m);
            return;
        }
        if conn.state.in_multi() {
            conn.state.multi_dirty = true;
        }
        self.reply_error_now(c, msg);
    }

    /// Whether connection `c` may run a protected command: DEBUG by `enable-debug-command`,
    /// MODULE LOAD/LOADEX/UNLOAD by `enable-module-command`; yes, or local and the client
    /// connected from the loopback interface (Redis's rule).
    fn protected_allowed(&self, c: usize, module: bool) -> bool {
        let hot = &self.shared.config.hot;
        let setting = if module {
            &hot.enable_module_command
        } else {
            &hot.enable_debug_command
        };
        match setting.load(Ordering::Relaxed) {
            1 => true,
            2 => self.conns[c].state.local,
            _ => false,
        }
    }

    fn dispatch(&mut self, c: usize, args: &[&[u8]], owner: Owner<'_>) {
        bump(&self.shared.stats[self.id].commands, 1);
        // Look the command up.
        let Some(mut spec) = darner_commands::lookup(args[0]) else {
            let msg = unknown_command(args);
            self.reject(c, None, &msg);
            return;
        };
        // A container that also works alone (COMMAND) has a handler of its own.
        let alone = args.len() < 2 && cmd::registry().get(spec).is_some();
        if spec.is_container() && !alone {
            if args.len() < 2 {
                let e = cmd::arity_error(spec);
                self.reject(c, Some(spec), &e);
                return;
            }
            match darner_commands::lookup_subcommand(spec, args[1]) {
                Some(sub) => spec = sub,
                None => {
                    let mut msg = b"ERR unknown subcommand '".to_vec();
                    msg.extend_from_slice(c_str(args[1], 128));
                    msg.extend_from_slice(
                        format!("'. Try {} HELP.", spec.name.to_ascii_uppercase()).as_bytes(),
                    );
                    self.reject(c, None, &msg);
                    return;
                }
            }
        }
        let Some(cmd) = cmd::registry().get(spec) else {
            // Unreachable while every table entry has a handler (a unit test checks it).
            let msg = unknown_command(args);
            self.reject(c, None, &msg);
            return;
        };
        if !spec.arity_ok(args.len()) {
            let e = cmd::arity_error(spec);
            bump(&self.shared.stats[self.id].cmd[cmd.id].rejected, 1);
            self.reject(c, Some(spec), &e);
            return;
        }
        if !self.conns[c].state.authenticated && !spec.has(flags::NO_AUTH) {
            self.reject(c, Some(spec), b"NOAUTH Authentication required.");
            return;
        }
        if spec.has(flags::PROTECTED) {
            let module = spec.full_name.starts_with("module|");
            if !self.protected_allowed(c, module) {
                bump(&self.shared.stats[self.id].cmd[cmd.id].rejected, 1);
                let msg = if module {
                    ERR_MODULE_NOT_ALLOWED
                } else {
                    ERR_DEBUG_NOT_ALLOWED
                };
                self.reject(c, Some(spec), msg);
                return;
            }
        }
        let conn = &mut self.conns[c];
        // RESP2 subscribe mode: only the commands that manage subscriptions (Redis's rule).
        if !conn.state.resp3
            && conn.state.subscribed()
            && !matches!(
                spec.full_name,
                "subscribe"
                    | "ssubscribe"
                    | "psubscribe"
                    | "unsubscribe"
                    | "sunsubscribe"
                    | "punsubscribe"
                    | "ping"
                    | "quit"
                    | "reset"
            )
        {
            let msg = format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                spec.full_name
            );
            self.reject(c, Some(spec), msg.as_bytes());
            return;
        }
        let conn = &mut self.conns[c];
        conn.state.last_cmd = spec.full_name;
        // Client tracking: whether this command records the keys it reads, and the client as
        // a reader and a writer. CLIENT CACHING's flag covers the next command, or a whole
        // MULTI ... EXEC, and CLIENT commands leave it in place (Redis's rule).
        let mut track = None;
        let mut remembers = false;
        if conn.state.tracking.is_some() {
            remembers = crate::tracking::remembers(&conn.state);
            track = crate::tracking::reader_of(&conn.state, self.id)
                .map(|r| (r, remembers && spec.has(flags::READONLY)));
            if (!conn.state.in_multi() || matches!(spec.full_name, "exec" | "discard"))
                && spec.full_name != "multi"
                && !spec.full_name.starts_with("client|")
            {
                conn.state.caching = false;
            }
        }

        // MULTI: queue everything but the commands that act on the transaction itself.
        if conn.state.in_multi()
            && !matches!(
                spec.full_name,
                "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
            )
        {
            if spec.has(flags::NO_MULTI) {
                conn.state.multi_dirty = true;
                self.reply_error_now(c, b"ERR Command not allowed inside a transaction");
                return;
            }
            conn.state
                .multi
                .as_mut()
                .unwrap()
                .push((cmd, owner.own(args)));
            let resp3 = conn.state.resp3;
            let reply = cmd::with_writer(resp3, |w| w.simple(b"QUEUED"));
            let suppress = take_suppress(&mut conn.state);
            let seq = conn.expect(suppress);
            conn.deliver(seq, reply);
            return;
        }
        // CLIENT PAUSE holds commands back (all, or only writes).
        let now = self.now_ms;
        // Writes and commands that may replicate (PUBLISH, PFCOUNT, ...), and EXEC of a
        // transaction holding one, as Redis 7.2 holds them.
        let is_write = spec.has(flags::WRITE)
            || spec.has(flags::MAY_REPLICATE)
            || (spec.full_name == "exec" && multi_has_writes(&conn.state));
        if self.shared.paused(now, is_write) && !matches!(spec.full_name, "client|unpause") {
            conn.paused = Some(owner.own(args));
            // Counted as blocked (INFO blocked_clients), as Redis counts postponed clients.
            crate::blocking::BLOCKED_CLIENTS.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Handler::Key(_) = cmd.handler {
            if self.stream_park(c, cmd, args, owner) {
                return;
            }
        }
        // EXEC shows after its commands, as in Redis (cmd/transactions.rs).
        if spec.full_name != "exec" {
            feed_monitors(&self.shared, spec, &self.conns[c].state, args);
        }
        match cmd.handler {
            Handler::Conn(f) => self.run_conn(c, cmd, f, args),
            Handler::Key(f) => {
                let shard = cmd::key_shard(spec, args, self.shared.threads, self.id);
                let inline = shard == self.id && self.admits_inline(cmd, args);
                let conn = &mut self.conns[c];
                if inline {
                    let suppress = take_suppress(&mut conn.state);
                    if self.stream_start(c, cmd, args, suppress) {
                        // A streamed read is tracked too (its key is locked until the stream
                        // ends, so recording it now misses no write).
                        if let Some((r, true)) = track {
                            self.remember_keys(spec, args, r);
                        }
                        return;
                    }
                    let conn = &mut self.conns[c];
                    let clock = Clock {
                        touch: !conn.state.no_touch,
                        ..Clock::at(now)
                    };
                    let mut ctx = ShardCtx {
                        shard: &mut self.shard,
                        db: conn.state.db,
                        clock,
                        resp3: conn.state.resp3,
                        shared: &self.shared,
                    };
                    // In order and not suppressed (the usual case): write straight into the
                    // output buffer; otherwise into a reply that waits for its turn.
                    let direct = conn.pending.is_empty() && !suppress;
                    let mut waiting = Vec::new();
                    let (buf, at) = if direct {
                        let at = conn.out.len();
                        (&mut conn.out, at)
                    } else {
                        (&mut waiting, 0)
                    };
                    let resp3 = conn.state.resp3;
                    run_handler(
                        f,
                        &mut ctx,
                        args,
                        &mut ReplyWriter::new(buf, resp3),
                        at,
                        cmd,
                    );
                    let reply = &buf[at..];
                    account(
                        &self.shared,
                        self.id,
                        &mut self.lap,
                        cmd,
                        reply,
                        &conn.state,
                        args,
                    );
                    if direct {
                        conn.next_seq += 1;
                        conn.done_seq += 1;
                    } else {
                        let seq = conn.expect(suppress);
                        conn.deliver(seq, waiting);
                    }
                    // The command is done on its shard (its keyspace events go out: notify.rs).
                    drop(ctx);
                    // Writes first (a read that expired the key invalidates earlier reads),
                    // then this read is recorded.
                    if self.shard.tracking.collecting || self.shared.tracking.prefixes.active() {
                        let writer = track.map(|(r, _)| crate::tracking::Writer {
                            id: r.id,
                            noloop: r.noloop,
                            at: Some((r.conn, self.conns[c].next_seq - 1)),
                        });
                        self.drain_written(writer);
                    }
                    // Blocked clients this write woke are served before its reply leaves;
                    // a BLMOVE pushing on another shard holds that reply (blocking.rs).
                    if !self.shard.blocked.is_empty() {
                        let movers =
                            crate::blocking::serve_ready(&mut self.shard, &self.shared, now, None);
                        if !movers.is_empty() {
                            let conn = &mut self.conns[c];
                            conn.set_fence(if direct { at } else { conn.out.len() });
                            let cr = ConnRef {
                                idx: c as u32,
                                gen: conn.gen,
                            };
                            self.spawn_movers(movers, Some((self.id, Msg::Unfence { conn: cr })));
                        }
                    }
                    if let Some((r, true)) = track {
                        self.remember_keys(spec, args, r);
                    }
                } else {
                    let suppress = take_suppress(&mut conn.state);
                    let seq = conn.expect(suppress);
                    self.batches[shard].push(BatchItem {
                        conn: ConnRef {
                            idx: c as u32,
                            gen: conn.gen,
                        },
                        seq,
                        db: conn.state.db,
                        resp3: conn.state.resp3,
                        touch: !conn.state.no_touch,
                        cmd,
                        args: owner.own(args),
                        track,
                    });
                }
            }
            Handler::Tx(f, locks) => {
                // Everything this connection sent before must reach its shards first.
                self.send_batches();
                let conn = &mut self.conns[c];
                let plan = cmd::transactions::reservation(
                    cmd,
                    args,
                    locks,
                    &conn.state,
                    self.shared.threads,
                    self.id,
                );
                // Keys a tracking client reads in this transaction: recorded on their shards
                // while the transaction still holds them.
                // (EXEC records each queued read as it runs: cmd/transactions.rs.)
                let reader = track.filter(|_| remembers).map(|(r, _)| r);
                let tracked: Vec<(usize, Bytes)> = match reader {
                    Some(_) if spec.full_name != "exec" => {
                        crate::tracking::read_keys(spec, args, self.shared.threads)
                    }
                    _ => Vec::new(),
                };
                let suppress = take_suppress(&mut conn.state);
                let seq = conn.expect(suppress);
                conn.in_tx = true;
                let tx = Tx::new(self.shared.clone(), conn.state.clone());
                tx.set_track(reader);
                let conn_ref = ConnRef {
                    idx: c as u32,
                    gen: conn.gen,
                };
                let shared = self.shared.clone();
                let thread = self.id;
                let args = owner.own(args);
                self.exec.spawn(async move {
                    let start = Instant::now();
                    tx.reserve(plan).await;
                    let reply = f(tx.clone(), args.clone()).await;
                    if let (Some(r), false, false) = (reader, tracked.is_empty(), tx.remembered()) {
                        crate::tracking::remember_in_tx(&tx, tracked, r).await;
                    }
                    // Clients blocked on keys it wrote are served before it lets go of its
                    // shards, and its reply waits for their moves to other shards.
                    let woken = crate::blocking::serve_before_release(&tx).await;
                    tx.release();
                    for w in woken {
                        w.await;
                    }
                    let client = tx.into_client();
                    let err = (reply.first() == Some(&b'-')).then(|| reply.clone());
                    record(
                        &shared,
                        thread,
                        cmd,
                        start.elapsed().as_micros() as u64,
                        err.as_deref(),
                        &client,
                        &cmd::views(&args),
                    );
                    post(
                        &shared,
                        thread,
                        Msg::TxDone {
                            conn: conn_ref,
                            seq,
                            reply,
                            client: Box::new(client),
                        },
                    );
                });
            }
        }
    }

    fn run_conn(&mut self, c: usize, cmd: &'static Command, f: cmd::ConnFn, args: &[&[u8]]) {
        let conn = &mut self.conns[c];
        let suppress = take_suppress(&mut conn.state);
        let was_monitor = conn.state.monitor;
        let mut out = Vec::new();
        {
            let mut w = ReplyWriter::new(&mut out, conn.state.resp3);
            let mut ctx = ConnCtx {
                client: &mut conn.state,
                shared: &self.shared,
                thread: self.id,
            };
            let name = cmd.spec.full_name;
            if contained(name, || f(&mut ctx, args, &mut w)).is_none() {
                w.out.clear();
                w.error(internal_error(name).as_bytes());
            }
        }
        // As for TxDone: a command that made this client a monitor (MONITOR) is counted here.
        if conn.state.monitor && !was_monitor {
            self.shared.monitors.fetch_add(1, Ordering::Relaxed);
        }
        account(
            &self.shared,
            self.id,
            &mut self.lap,
            cmd,
            &out,
            &conn.state,
            args,
        );
        // CLIENT REPLY ON / RESET turned replies back on: their own reply is sent. Pub/Sub
        // confirmations are pushes, which CLIENT REPLY OFF / SKIP do not silence (Redis 7.2).
        let suppress = suppress
            && !conn.state.force_reply
            && !matches!(
                cmd.spec.full_name,
                "subscribe"
                    | "psubscribe"
                    | "ssubscribe"
                    | "unsubscribe"
                    | "punsubscribe"
                    | "sunsubscribe"
            );
        let seq = conn.expect(suppress);
        conn.deliver(seq, out);
        if conn.push_own(seq) {
            self.dirty.push(c);
        }
        if conn.state.close_after_reply {
            conn.closing = true;
        }
    }

    // ---- messages ----

    /// Drains the inbox and the local queue and polls woken tasks until nothing is left.
    fn pump(&mut self) {
        loop {
            let mut progress = false;
            // Every sender sets `notified` after its message is in the channel (and wakes
            // this thread when it flips it), so a clear flag means nothing to receive yet:
            // the usual turn of an unpipelined client skips the channel. A message whose
            // flag lands just after this load wakes the next turn.
            let inbox = &self.shared.inboxes[self.id];
            // Cleared by a swap, not a store: the swap takes part in the senders' order of
            // `notified`, so a message whose sender saw the flag still set is in the channel
            // when the drain below looks (a plain store could become visible after the
            // channel was read, leaving that message stranded with the flag clear).
            if inbox.notified.load(Ordering::Acquire)
                && inbox.notified.swap(false, Ordering::SeqCst)
            {
                while let Ok(m) = self.rx.try_recv() {
                    self.handle(m);
                    // What handling `m` posted to this thread goes before the next message
                    // from another thread, which it may have caused (a keyspace notification
                    // published by a batch precedes what the batch's reply lets a client send).
                    while let Some(m) = LOCAL.with(|l| l.borrow_mut().pop_front()) {
                        self.handle(m);
                    }
                    progress = true;
                }
            }
            while let Some(m) = LOCAL.with(|l| l.borrow_mut().pop_front()) {
                self.handle(m);
                progress = true;
            }
            if self.exec.has_ready() {
                self.exec.run_ready();
                progress = true;
            }
            let resume = std::mem::take(&mut self.resume);
            for c in resume {
                self.process(c);
                progress = true;
            }
            if !progress {
                break;
            }
        }
        self.stream_turn_end();
    }

    fn handle(&mut self, m: Msg) {
        match m {
            Msg::Batch { from, items } => {
                self.admit_batch(from, items, false);
            }
            Msg::BatchDone { buf, items } => {
                for (cr, seq, s, e, slow) in items {
                    if let Some(call) = slow {
                        let state = self
                            .conns
                            .get(cr.idx as usize)
                            .filter(|c| c.gen == cr.gen)
                            .map(|c| &c.state);
                        slowlog_push(&self.shared, call.0, &cmd::views(&call.1), state);
                    }
                    if let Some(conn) = self.conn_mut(cr) {
                        conn.deliver(seq, buf[s as usize..e as usize].to_vec());
                        self.dirty.push(cr.idx as usize);
                    }
                }
            }
            Msg::Schedule(s) => self.on_schedule(s),
            Msg::Released => self.sweep_lingering(),
            Msg::Run {
                tx,
                db,
                resp3,
                writer,
                f,
            } => self.on_run(tx, db, resp3, writer, f),
            Msg::Release { tx } => {
                let granted = self.shard.lock.sched.release(tx);
                self.after_change(granted);
            }
            Msg::Unpaused => {
                // CLIENT UNPAUSE: held commands run now, not at the next cron tick.
                let held: Vec<usize> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.paused.is_some())
                    .map(|(k, _)| k)
                    .collect();
                self.retry_paused(held);
            }
            Msg::Thread { f } => {
                let mut ctx = ThreadCtx {
                    id: self.id,
                    conns: &mut self.conns,
                    shared: &self.shared,
                    listeners: &mut self.listeners,
                    registry: self.poll.registry(),
                };
                contained("thread step", || f(&mut ctx));
                // A closure may have marked connections for closing (CLIENT KILL).
                let kill: Vec<usize> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.handle.kill.load(Ordering::Relaxed))
                    .map(|(k, _)| k)
                    .collect();
                for k in kill {
                    self.conns[k].closing = true;
                    self.dirty.push(k);
                }
            }
            Msg::HopDone { task, slot, result } => {
                exec::fill_slot(slot, result);
                self.exec.wake(task);
            }
            Msg::Unfence { conn } => {
                if let Some(cn) = self.conn_mut(conn) {
                    cn.lift_fence();
                    self.dirty.push(conn.idx as usize);
                }
            }
            Msg::TxDone {
                conn,
                seq,
                reply,
                client,
            } => {
                if let Some(cn) = self
                    .conns
                    .get_mut(conn.idx as usize)
                    .filter(|c| c.gen == conn.gen)
                {
                    let was_monitor = cn.state.monitor;
                    cn.state = *client;
                    if cn.state.monitor && !was_monitor {
                        self.shared.monitors.fetch_add(1, Ordering::Relaxed);
                    }
                    cn.in_tx = false;
                    cn.deliver(seq, reply);
                    if cn.push_own(seq) {
                        self.dirty.push(conn.idx as usize);
                    }
                    if cn.state.close_after_reply {
                        cn.closing = true;
                    }
                    self.dirty.push(conn.idx as usize);
                    self.resume.push(conn.idx as usize);
                }
            }
            Msg::StreamChunk {
                conn,
                seq,
                bytes,
                last,
                flow,
            } => self.stream_chunk(conn, seq, &bytes, last, flow),
            Msg::StreamTick => self.stream_tick(),
            Msg::Monitor { line } => {
                let ids: Vec<usize> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.state.monitor)
                    .map(|(k, _)| k)
                    .collect();
                for k in ids {
                    self.conns[k].out.extend_from_slice(&line);
                    self.dirty.push(k);
                }
            }
            Msg::Invalidate { what, table, conns } => {
                for (cr, after) in conns {
                    self.invalidate_conn(cr, &what, table, after);
                }
            }
            Msg::InvalidateRedirected { what, conn } => {
                if let Some(cn) = self.conn_mut(conn) {
                    let (resp3, subscribed) = (cn.state.resp3, cn.state.subscribed());
                    if let Some(f) = crate::tracking::frame(resp3, subscribed, &what) {
                        cn.push(f, None);
                        self.dirty.push(conn.idx as usize);
                    }
                }
            }
            Msg::TrackingFlush => {
                let ids: Vec<ConnRef> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.state.tracking.is_some())
                    .map(|(k, c)| ConnRef {
                        idx: k as u32,
                        gen: c.gen,
                    })
                    .collect();
                for cr in ids {
                    self.invalidate_conn(cr, &crate::tracking::Invalid::All, false, None);
                }
            }
            Msg::TrackingForget { id } => self.shard.tracking.forget(id),
            Msg::Publish { msg, targets } => {
                for t in targets {
                    let Some(conn) = self.conn_mut(t.conn) else {
                        continue;
                    };
                    let pattern = t.pattern.as_deref();
                    if crate::pubsub::still_subscribed(&conn.state, &msg, pattern) {
                        let resp3 = conn.state.resp3;
                        let mut w = ReplyWriter::new(&mut conn.out, resp3);
                        crate::pubsub::write_frame(&mut w, &msg, pattern);
                        self.dirty.push(t.conn.idx as usize);
                    }
                }
            }
            Msg::Shutdown => self.stop = true,
        }
    }

    fn conn_mut(&mut self, r: ConnRef) -> Option<&mut Conn> {
        self.conns
            .get_mut(r.idx as usize)
            .filter(|c| c.gen == r.gen)
    }

    fn run_shard_fn(
        &mut self,
        db: usize,
        resp3: bool,
        writer: Option<crate::tracking::Writer>,
        f: crate::msg::ShardFn,
    ) {
        let mut ctx = ShardCtx {
            shard: &mut self.shard,
            db,
            clock: Clock::at(Shared::now_ms()),
            resp3,
            shared: &self.shared,
        };
        contained("shard step", || f(&mut ctx));
        drop(ctx);
        self.drain_written(writer);
        for (k, r) in std::mem::take(&mut self.shard.tracking.deferred) {
            crate::tracking::remember(&mut self.shard, &k, r);
        }
        // A transaction's serving step may have left second steps to run (blocking.rs).
        for m in crate::blocking::take_stashed() {
            self.exec.spawn(m);
        }
    }

    // ---- client tracking (tracking.rs) ----

    /// Records the keys a tracking client's read-only command read on this shard.
    fn remember_keys(
        &mut self,
        spec: &darner_commands::CommandSpec,
        args: &[&[u8]],
        r: crate::tracking::Reader,
    ) {
        let mut idx = Vec::new();
        darner_commands::key_indices(spec, args, &mut idx);
        for i in idx {
            crate::tracking::remember(&mut self.shard, args[i], r);
        }
    }

    /// Invalidates the keys written since the last call: their readers are told (except a
    /// NOLOOP `writer`) and forgotten; keys under broadcast prefixes are gathered for the end
    /// of the turn.
    fn drain_written(&mut self, writer: Option<crate::tracking::Writer>) {
        if !self.shard.tracking.collecting {
            // A prefix added by another thread since this shard last looked: its databases
            // noted the writes already (the shared flag), so from now on they are drained.
            if !self.shared.tracking.prefixes.active() {
                return;
            }
            crate::tracking::collect(&mut self.shard, true);
        }
        let prefixes = self.shared.tracking.prefixes.count() > 0;
        for db in 0..self.shard.dbs.len() {
            if !self.shard.dbs[db].has_written() {
                continue;
            }
            for (k, expired) in self.shard.dbs[db].take_written() {
                if let Some(readers) = self.shard.tracking.take(&k) {
                    self.invalidate_readers(&k, &readers, writer);
                }
                if prefixes {
                    // An expiry has no writer: NOLOOP does not hide it (Redis: the key is
                    // deleted on behalf of no client).
                    let by = match writer {
                        Some(w) if w.noloop && !expired => w.id,
                        _ => 0,
                    };
                    for p in self.shared.tracking.prefixes.matching(&k) {
                        // Once an expiry or another client's write is due (0), it stays due.
                        self.shard
                            .tracking
                            .bcast
                            .entry(p)
                            .or_default()
                            .entry(Bytes::copy_from_slice(&k))
                            .and_modify(|w| {
                                if *w != 0 {
                                    *w = by
                                }
                            })
                            .or_insert(by);
                    }
                }
            }
        }
    }

    /// End of a loop turn: writes not yet drained (expiry, served blocked clients), the
    /// turn's broadcast messages, and whether the shard keeps noting writes.
    fn tracking_turn(&mut self) {
        self.drain_written(None);
        // A transaction's broadcast keys leave together when it releases the shard (its
        // steps may span several turns; Redis sends what one command changed in one message).
        if !self.shard.tracking.bcast.is_empty() && self.shard.lock.sched.idle() {
            for (prefix, keys) in std::mem::take(&mut self.shard.tracking.bcast) {
                for r in self.shared.tracking.prefixes.readers(&prefix) {
                    let ks: Vec<Bytes> = keys
                        .iter()
                        .filter(|(_, w)| !(r.noloop && **w == r.id))
                        .map(|(k, _)| k.clone())
                        .collect();
                    if !ks.is_empty() {
                        post(
                            &self.shared,
                            r.thread,
                            Msg::Invalidate {
                                what: crate::tracking::Invalid::Keys(ks),
                                table: false,
                                conns: vec![(r.conn, None)],
                            },
                        );
                    }
                }
            }
        }
        let want = !self.shard.tracking.is_empty() || self.shared.tracking.prefixes.count() > 0;
        crate::tracking::collect(&mut self.shard, want);
        self.shared.tracking.keys[self.id].store(self.shard.tracking.keys(), Ordering::Relaxed);
        self.shared.tracking.items[self.id].store(self.shard.tracking.items(), Ordering::Relaxed);
    }

    /// Tells the readers of a written key, except a NOLOOP writer: those of this thread at
    /// once (a client's own write is followed by its invalidation, before its next reply, as
    /// in Redis), the others by a message to their thread.
    fn invalidate_readers(
        &mut self,
        key: &[u8],
        readers: &[crate::tracking::Reader],
        writer: Option<crate::tracking::Writer>,
    ) {
        type PerThread = SmallVec<[(usize, Vec<(ConnRef, Option<u64>)>); 2]>;
        let mut remote: PerThread = SmallVec::new();
        let what = crate::tracking::Invalid::Keys(vec![Bytes::copy_from_slice(key)]);
        for r in readers {
            let own = writer.filter(|w| w.id == r.id);
            if own.is_some_and(|w| w.noloop) {
                continue;
            }
            let after = own.and_then(|w| w.at).map(|(_, seq)| seq);
            if r.thread == self.id {
                self.invalidate_conn(r.conn, &what, true, after);
                continue;
            }
            match remote.iter_mut().find(|(t, _)| *t == r.thread) {
                Some((_, v)) => v.push((r.conn, after)),
                None => remote.push((r.thread, vec![(r.conn, after)])),
            }
        }
        for (t, conns) in remote {
            post(
                &self.shared,
                t,
                Msg::Invalidate {
                    what: what.clone(),
                    table: true,
                    conns,
                },
            );
        }
    }

    /// Delivers an invalidation to one of this thread's connections, following its redirect;
    /// `after`: the sequence number of the reply it must follow (None: all owed replies).
    fn invalidate_conn(
        &mut self,
        cr: ConnRef,
        what: &crate::tracking::Invalid,
        table: bool,
        after: Option<u64>,
    ) {
        let Some(conn) = self
            .conns
            .get_mut(cr.idx as usize)
            .filter(|c| c.gen == cr.gen)
        else {
            return;
        };
        let resp3 = conn.state.resp3;
        let Some(t) = conn.state.tracking.as_mut() else {
            return;
        };
        if table && t.bcast {
            return;
        }
        if t.redirect != 0 {
            let target = self
                .shared
                .clients
                .lock()
                .unwrap()
                .get(&t.redirect)
                .map(|h| (h.thread, h.conn));
            match target {
                Some((thread, to)) => post(
                    &self.shared,
                    thread,
                    Msg::InvalidateRedirected {
                        what: what.clone(),
                        conn: to,
                    },
                ),
                None => {
                    t.broken_redirect = true;
                    if resp3 {
                        let f = crate::tracking::broken_frame(t.redirect);
                        conn.push(f, after);
                        self.dirty.push(cr.idx as usize);
                    }
                }
            }
        } else if let Some(f) = crate::tracking::frame(resp3, false, what) {
            conn.push(f, after);
            self.dirty.push(cr.idx as usize);
        }
    }

    fn exec_batch(&mut self, from: usize, items: Vec<BatchItem>) {
        let mut held: Vec<crate::blocking::Mover> = Vec::new();
        let mut buf = Vec::new();
        let mut done = Vec::with_capacity(items.len());
        let now = Shared::now_ms();
        let mut lap = Lap::start();
        for it in items {
            let Handler::Key(f) = it.cmd.handler else {
                continue;
            };
            if self
                .shard
                .streams
                .must_wait(from, it.conn, it.db, it.cmd, &it.args)
            {
                self.shard.streams.park(from, it);
                continue;
            }
            let start_at = buf.len();
            let mut ctx = ShardCtx {
                shard: &mut self.shard,
                db: it.db,
                clock: Clock {
                    touch: it.touch,
                    ..Clock::at(now)
                },
                resp3: it.resp3,
                shared: &self.shared,
            };
            let views = cmd::views(&it.args);
            let dest = crate::stream::Dest {
                thread: from,
                conn: it.conn,
                seq: it.seq,
            };
            if crate::stream::candidate(it.cmd) {
                // A list written in this batch may have blocked clients to serve first.
                let movers = crate::blocking::serve_ready(ctx.shard, &self.shared, now, None);
                held.extend(movers);
            }
            if crate::stream::try_start(&mut ctx, it.cmd, &views, dest) {
                drop(ctx);
                if let Some((r, true)) = it.track {
                    self.remember_keys(it.cmd.spec, &views, r);
                }
                record_stats(&self.shared, self.id, it.cmd, lap.lap(), None, &views, None);
                continue;
            }
            let mut w = ReplyWriter::new(&mut buf, it.resp3);
            run_handler(f, &mut ctx, &views, &mut w, start_at, it.cmd);
            drop(ctx);
            self.drain_written(it.track.map(|(r, _)| crate::tracking::Writer {
                id: r.id,
                noloop: r.noloop,
                at: Some((it.conn, it.seq)),
            }));
            if let Some((r, true)) = it.track {
                self.remember_keys(it.cmd.spec, &views, r);
            }
            let err = (buf.get(start_at) == Some(&b'-')).then(|| buf[start_at..].to_vec());
            let slow = record_stats(
                &self.shared,
                self.id,
                it.cmd,
                lap.lap(),
                err.as_deref(),
                &views,
                None,
            );
            drop(views);
            let slow = slow.map(|us| Box::new((us, it.args)));
            done.push((it.conn, it.seq, start_at as u32, buf.len() as u32, slow));
        }
        // Blocked clients these writes woke are served before the batch's replies leave; a
        // BLMOVE's push on another shard holds the replies until it is done (blocking.rs).
        // (Keys a transaction holds wait for it: blocking::serve_ready.)
        held.extend(crate::blocking::serve_ready(
            &mut self.shard,
            &self.shared,
            now,
            None,
        ));
        if done.is_empty() {
            self.spawn_movers(held, None);
        } else if held.is_empty() {
            post(&self.shared, from, Msg::BatchDone { buf, items: done });
        } else {
            let batch = Msg::BatchDone { buf, items: done };
            self.spawn_movers(held, Some((from, batch)));
        }
    }

    /// Runs the second steps of served blocked clients (blocking.rs) as a task; when they
    /// are all done, posts `then` (a held reply, or a fence's lift) to its thread.
    fn spawn_movers(&mut self, movers: Vec<crate::blocking::Mover>, then: Option<(usize, Msg)>) {
        if movers.is_empty() {
            if let Some((t, m)) = then {
                post(&self.shared, t, m);
            }
            return;
        }
        let shared = self.shared.clone();
        self.exec.spawn(async move {
            for m in movers {
                m.await;
            }
            if let Some((t, m)) = then {
                post(&shared, t, m);
            }
        });
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

    // ---- streamed replies (stream.rs) ----

    /// Holds connection `c` when its single-shard command, about to run inline on this
    /// thread's shard, touches a streamed key (or an earlier command of its waits there): the
    /// request goes back to the front of its queue and runs when a stream ends.
    fn stream_park(
        &mut self,
        c: usize,
        cmd: &'static Command,
        args: &[&[u8]],
        owner: Owner<'_>,
    ) -> bool {
        if self.shard.streams.idle() || !self.shard.lock.free() {
            return false;
        }
        if cmd::key_shard(cmd.spec, args, self.shared.threads, self.id) != self.id {
            return false;
        }
        let conn = &mut self.conns[c];
        let me = ConnRef {
            idx: c as u32,
            gen: conn.gen,
        };
        if !self
            .shard
            .streams
            .must_wait(self.id, me, conn.state.db, cmd, args)
        {
            return false;
        }
        conn.parsed.push_front(owner.own(args));
        conn.stream.wait = true;
        self.shard.streams.wait(me);
        // It is counted when it runs (dispatch counted it already).
        let n = &self.shared.stats[self.id].commands;
        n.store(n.load(Ordering::Relaxed).wrapping_sub(1), Ordering::Relaxed);
        true
    }

    /// Starts a stream for connection `c`'s command when it is a big whole-collection read
    /// (stream.rs decides); its reply then arrives in chunks.
    fn stream_start(
        &mut self,
        c: usize,
        cmd: &'static Command,
        args: &[&[u8]],
        suppress: bool,
    ) -> bool {
        if !crate::stream::candidate(cmd) {
            return false;
        }
        // Clients blocked on keys written earlier in this turn are served first (blocking.rs),
        // so that no pop changes a list once it is streamed.
        let movers = crate::blocking::serve_ready(&mut self.shard, &self.shared, self.now_ms, None);
        self.spawn_movers(movers, None);
        let conn = &mut self.conns[c];
        let dest = crate::stream::Dest {
            thread: self.id,
            conn: ConnRef {
                idx: c as u32,
                gen: conn.gen,
            },
            seq: conn.next_seq,
        };
        let mut ctx = ShardCtx {
            shard: &mut self.shard,
            db: conn.state.db,
            clock: Clock {
                touch: !conn.state.no_touch,
                ..Clock::at(self.now_ms)
            },
            resp3: conn.state.resp3,
            shared: &self.shared,
        };
        if !crate::stream::try_start(&mut ctx, cmd, args, dest) {
            return false;
        }
        conn.expect(suppress);
        account(
            &self.shared,
            self.id,
            &mut self.lap,
            cmd,
            b"",
            &conn.state,
            args,
        );
        true
    }

    fn stream_chunk(
        &mut self,
        conn: ConnRef,
        seq: u64,
        bytes: &[u8],
        last: bool,
        flow: Option<Arc<crate::stream::Flow>>,
    ) {
        match self.conn_mut(conn) {
            Some(cn) => {
                cn.deliver_part(seq, bytes, last);
                self.dirty.push(conn.idx as usize);
                if let Some(flow) = flow {
                    self.inbound.open(conn, seq, flow);
                } else if last {
                    self.inbound.close(conn, seq);
                }
            }
            None => {
                if let Some(flow) = flow {
                    let v = crate::stream::Verdict::Cancel;
                    self.inbound
                        .decide(&self.shared, conn, seq, &flow, v, self.now_ms);
                }
            }
        }
    }

    /// One step of this shard's streams per loop turn; when one ends, what waited runs again.
    fn stream_tick(&mut self) {
        self.shard.streams.ticking = false;
        if self.shard.streams.last_turn == Some(self.loop_now) || !self.shard.lock.sched.idle() {
            return; // stepped this turn already (stream_turn_end queues the next tick)
        }
        self.shard.streams.last_turn = Some(self.loop_now);
        if !crate::stream::step(&mut self.shard, &self.shared, Shared::now_ms()) {
            return;
        }
        let (parked, waiters) = self.shard.streams.take_waiting();
        for (from, item) in parked {
            self.exec_batch(from, vec![item]);
        }
        for r in waiters {
            if let Some(cn) = self.conn_mut(r) {
                cn.stream.wait = false;
                self.resume.push(r.idx as usize);
            }
        }
        if self.shard.streams.idle() {
            // Transactions' parts that waited for the streams are scheduled, in order.
            for m in std::mem::take(&mut self.shard.streams.tx_waiting) {
                self.handle(m);
            }
        }
    }

    /// At the end of a pump: queue the next step while streams can run; give the streams of
    /// this thread's connections a credit once their last chunk left (flow control), and
    /// cancel those whose connection went away (EOF, kill, closed).
    fn stream_turn_end(&mut self) {
        use crate::stream::{Verdict, PARTIAL_MAX};
        if !self.inbound.is_empty() {
            for (r, seq, flow) in self.inbound.waiting() {
                let c = r.idx as usize;
                let mut verdict = Verdict::Wait;
                if let Some(cn) = self.conn_mut(r) {
                    if seq < cn.done_seq {
                        verdict = Verdict::Cancel; // its reply was completed already
                    } else if cn.handle.kill.load(Ordering::Relaxed)
                        || (cn.closing && !cn.state.close_after_reply)
                    {
                        // What is left of the reply will not come: complete it so the
                        // connection can close.
                        cn.deliver_part(seq, &[], true);
                        self.dirty.push(c);
                        verdict = Verdict::Cancel;
                    } else if cn.done_seq != seq {
                        // Behind other replies: it may buffer up to PARTIAL_MAX.
                        let buffered: usize = cn
                            .stream
                            .partial
                            .iter()
                            .filter(|(s, _)| *s == seq)
                            .map(|(_, b)| b.len())
                            .sum();
                        if buffered < PARTIAL_MAX {
                            verdict = Verdict::Credit;
                        }
                    } else {
                        if cn.out_len() > 0 {
                            // Send it now; if the socket is full, its writable event brings
                            // this connection back here.
                            self.flush(c);
                        }
                        verdict = match self.conn_mut(r) {
                            Some(cn) if cn.out_len() == 0 => Verdict::Credit,
                            Some(_) => Verdict::Wait,
                            None => Verdict::Cancel,
                        };
                    }
                } else {
                    verdict = Verdict::Cancel;
                }
                let now = Shared::now_ms();
                self.inbound
                    .decide(&self.shared, r, seq, &flow, verdict, now);
            }
        }
        let streams = &mut self.shard.streams;
        if streams.runnable() && !streams.ticking {
            streams.ticking = true;
            LOCAL.with(|l| l.borrow_mut().push_back(Msg::StreamTick));
        }
    }

    // ---- writing ----

    fn flush_dirty(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for c in dirty.drain(..) {
            self.flush(c);
        }
        self.dirty = dirty;
    }

    fn flush(&mut self, c: usize) {
        let Some(conn) = self.conns.get_mut(c) else {
            return;
        };
        let mut written = 0;
        let end = conn.sendable_end();
        while conn.out_pos < end {
            match crate::sys::send(&conn.sock, &conn.out[conn.out_pos..end]) {
                Ok(0) => break,
                Ok(n) => {
                    conn.out_pos += n;
                    written += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.close(c);
                    return;
                }
            }
        }
        bump(&self.shared.stats[self.id].net_output, written as u64);
        if conn.out_pos == conn.out.len() {
            conn.out.clear();
            conn.out_pos = 0;
            if conn.fence.is_some() {
                conn.fence = Some(0);
            }
            if conn.out.capacity() > 1 << 20 {
                conn.out = Vec::new();
            }
        }
        // Ask for writable events only while output is stuck: with them always on, every ACK
        // of a reply would wake the loop for nothing (edge-triggered EPOLLOUT).
        let stuck = conn.out_pos < conn.sendable_end();
        if stuck != conn.want_write {
            let interest = if stuck {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if self
                .poll
                .registry()
                .reregister(&mut conn.sock, Token(c), interest)
                .is_ok()
            {
                conn.want_write = stuck;
            }
        }
        if conn.read_paused && conn.out_len() < OUTPUT_BACKPRESSURE / 2 {
            conn.read_paused = false;
            self.read(c, true);
            return;
        }
        let conn = &mut self.conns[c];
        if (conn.closing || conn.state.close_after_reply)
            && conn.out_len() == 0
            && conn.pending.is_empty()
            && !conn.in_tx
        {
            self.close(c);
            return;
        }
        // Output buffer limits: the pubsub class for subscribers (32mb hard, 8mb for 60 s by
        // default), the normal class otherwise (0 = unlimited, Redis's default).
        let conn = &mut self.conns[c];
        let hot = &self.shared.config.hot;
        let class = if conn.state.subscribed() {
            &hot.obuf_pubsub
        } else {
            &hot.obuf_normal
        };
        let (hard, soft, secs) = crate::config::Config::obuf_limits(class);
        let used = conn.out_len() as u64;
        let over_hard = hard > 0 && used > hard;
        let over_soft = soft > 0 && used > soft;
        if over_soft {
            let since = *conn.soft_limit_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_secs(secs) {
                self.kill_for_obuf(c);
                return;
            }
        } else {
            conn.soft_limit_since = None;
        }
        if over_hard {
            self.kill_for_obuf(c);
        }
    }

    fn kill_for_obuf(&mut self, c: usize) {
        let conn = &self.conns[c];
        log::warning(&format!(
            "Client id={} addr={} scheduled to be closed ASAP for overcoming of output buffer limits.",
            conn.state.id, conn.state.addr
        ));
        self.close(c);
    }

    fn close(&mut self, c: usize) {
        if !self.conns.contains(c) {
            return;
        }
        let mut conn = self.conns.remove(c);
        let _ = self.poll.registry().deregister(&mut conn.sock);
        self.shared.connected.fetch_sub(1, Ordering::Relaxed);
        self.shared.clients.lock().unwrap().remove(&conn.state.id);
        self.shared.stats[self.id]
            .clients
            .fetch_sub(1, Ordering::Relaxed);
        if conn.state.monitor {
            self.shared.monitors.fetch_sub(1, Ordering::Relaxed);
        }
        crate::pubsub::forget(&self.shared, &mut conn.state);
        crate::tracking::disable(&self.shared, &mut conn.state);
        if conn.in_tx {
            // A blocked client that goes away stops waiting (its task then cleans up).
            crate::blocking::cancel(&self.shared, conn.state.id);
        }
        if conn.paused.is_some() {
            crate::blocking::BLOCKED_CLIENTS.fetch_sub(1, Ordering::Relaxed);
        }
    }

    // ---- periodic work ----

    fn cron(&mut self) {
        self.cron_count += 1;
        if self.id == 0 {
            cmd::server::cron(&self.shared);
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
        if self.shared.active_expire_enabled.load(Ordering::Relaxed) && self.shard.lock.sched.idle()
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
        // Idle timeouts, kills and paused clients.
        let timeout = hot.timeout.load(Ordering::Relaxed);
        let mut close = Vec::new();
        let mut retry = Vec::new();
        for (k, conn) in self.conns.iter() {
            let idle_out = timeout > 0
                && !conn.state.monitor
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

/// Takes the "skip this reply" decision for the command being dispatched (CLIENT REPLY).
fn take_suppress(state: &mut ClientState) -> bool {
    state.force_reply = false;
    match state.reply_mode {
        ReplyMode::On => false,
        ReplyMode::Off => true,
        // CLIENT REPLY SKIP (which sets SkipThis after its own suppression decision was taken)
        // silences the next command only.
        ReplyMode::SkipThis => {
            state.reply_mode = ReplyMode::On;
            true
        }
    }
}

fn multi_has_writes(state: &ClientState) -> bool {
    state.multi.as_ref().is_some_and(|q| {
        q.iter()
            .any(|(c, _)| c.spec.has(flags::WRITE) || c.spec.has(flags::MAY_REPLICATE))
    })
}

/// The bytes of `b` as C's `%.Ns` prints them: up to the first NUL, at most `max` bytes.
fn c_str(b: &[u8], max: usize) -> &[u8] {
    let end = b.iter().position(|&x| x == 0).unwrap_or(b.len()).min(max);
    &b[..end]
}

/// Where owned copies of a request's arguments come from when the command cannot run on the
/// borrowed views right away (it travels to another shard's thread, waits in a MULTI queue or
/// behind CLIENT PAUSE, or becomes a transaction task).
#[derive(Clone, Copy)]
enum Owner<'a> {
    /// Views into this frozen batch (or, for an argument the parser had to assemble, not).
    Frozen(&'a Bytes),
    /// Views of these owned arguments.
    Owned(&'a [Bytes]),
}

impl Owner<'_> {
    fn own(self, args: &[&[u8]]) -> Vec<Bytes> {
        match self {
            Owner::Owned(v) => v.to_vec(),
            Owner::Frozen(f) => {
                let range = f.as_ptr_range();
                args.iter()
                    .map(|a| {
                        let inside = !a.is_empty()
                            && range.contains(&a.as_ptr())
                            && a.as_ptr_range().end <= range.end;
                        if inside {
                            f.slice_ref(a)
                        } else {
                            Bytes::copy_from_slice(a)
                        }
                    })
                    .collect()
            }
        }
    }
}

/// Redis's unknown-command error: the name (128 bytes at most) and the arguments while their
/// quoted list stays under 128 bytes, each cut to fit, all as C strings (a NUL ends one).
fn unknown_command(args: &[&[u8]]) -> Vec<u8> {
    let mut m = b"ERR unknown command '".to_vec();
    m.extend_from_slice(c_str(args[0], 128));
    m.extend_from_slice(b"', with args beginning with: ");
    let mut list: Vec<u8> = Vec::new();
    for a in &args[1..] {
        if list.len() >= 128 {
            break;
        }
        let room = 128 - list.len();
        list.push(b'\'');
        list.extend_from_slice(c_str(a, room));
        list.extend_from_slice(b"' ");
    }
    m.extend_from_slice(&list);
    m
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

/// Runs a single-shard handler; on a contained panic, replaces its partial reply (from `at`)
/// with an error.
fn run_handler(
    f: cmd::KeyFn,
    ctx: &mut ShardCtx,
    args: &[&[u8]],
    w: &mut ReplyWriter,
    at: usize,
    cmd: &Command,
) {
    if contained(cmd.spec.full_name, || f(ctx, args, w)).is_none() {
        w.out.truncate(at);
        w.error(internal_error(cmd.spec.full_name).as_bytes());
    }
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
