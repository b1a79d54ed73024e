//! The I/O: one thread per `--threads`, each driving its `--connections` non-blocking sockets
//! with one mio `Poll`.
//!
//! Each connection runs operations from its [`Generator`]: one command each for SET/GET and
//! MSET/MGET, several in turn for the YCSB operations (each next command goes out when the
//! reply to the one before arrives). An operation's latency counts from its start to the reply
//! to its last command.
//!
//! Closed loop (the default): each connection keeps `--pipeline` operations in flight; one
//! that ends frees a slot that the next one fills at once; latency counts from the moment the
//! operation's first command was queued for writing.
//!
//! A YCSB run first loads its records (unless `--ycsb-no-load`): every connection inserts
//! records from one shared counter, closed loop, until all are in; then the timed run starts
//! on fresh connections.
//!
//! Open loop (`--rate N`): connection i of the C in all sends its requests at the fixed times
//! `start + (i/C + k) * C/N`, whatever the replies do, and each latency counts from the request's
//! scheduled time. A stalled server therefore shows in the percentiles as the whole wait of
//! every request that should have gone out during the stall (no coordinated omission).
//!
//! `--cluster`: the slot map is read once from the given node ([`crate::cluster`]); each
//! connection then holds one socket per primary, and each command goes to its key's primary.
//! The connection's operations (its `--pipeline` in flight, its open-loop schedule) are shared
//! by its sockets; each socket matches its replies to its own commands in FIFO order. One lost
//! socket ends the whole connection (counted as one error), as one lost socket does otherwise.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream as StdTcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use crate::cluster::{request_key, SlotMap, CLUSTER_SLOTS};
use crate::config::Config;
use crate::keys::KeyGen;
use crate::latency::Latency;
use crate::mix::Mix;
use crate::proto::parse_reply;
use crate::workload::{Generator, Next, Op, OpKind, Outcome};
use crate::ycsb::{Shared, YcsbGen};

/// One kind of operation's figures.
#[derive(Default)]
pub struct KindStats {
    pub ops: u64,
    pub errors: u64,
    pub latency: Latency,
}

/// What one thread (or, merged, the whole run) counted.
#[derive(Default)]
pub struct Stats {
    /// Operations completed.
    pub ops: u64,
    /// Replies received (more than `ops` when operations send several commands).
    pub requests: u64,
    /// Writes of the SET/GET mix: SET, MSET and DEL operations.
    pub sets: u64,
    /// Its reads: GET, MGET and EXISTS operations.
    pub gets: u64,
    /// Values (GET, MGET), keys (EXISTS: there; DEL: deleted) or records (YCSB reads) found.
    pub hits: u64,
    /// Values or records not found.
    pub misses: u64,
    /// Operations with an error reply, plus connections lost or sent garbage.
    pub errors: u64,
    pub latency: Latency,
    /// Per kind of operation, indexed by [`OpKind::index`]; `None` for kinds not run.
    pub by_kind: [Option<Box<KindStats>>; OpKind::ALL.len()],
}

impl Stats {
    pub fn merge(&mut self, o: &Stats) {
        self.ops += o.ops;
        self.requests += o.requests;
        self.sets += o.sets;
        self.gets += o.gets;
        self.hits += o.hits;
        self.misses += o.misses;
        self.errors += o.errors;
        self.latency.merge(&o.latency);
        for (mine, theirs) in self.by_kind.iter_mut().zip(&o.by_kind) {
            if let Some(t) = theirs {
                let m = mine.get_or_insert_with(Box::default);
                m.ops += t.ops;
                m.errors += t.errors;
                m.latency.merge(&t.latency);
            }
        }
    }

    /// Counts one finished operation.
    pub fn record(&mut self, kind: OpKind, o: Outcome, ns: u64) {
        self.ops += 1;
        self.latency.record_ns(ns);
        self.hits += o.hits as u64;
        self.misses += o.misses as u64;
        match kind {
            OpKind::Set | OpKind::Mset | OpKind::Del => self.sets += 1,
            OpKind::Get | OpKind::Mget | OpKind::Exists => self.gets += 1,
            _ => {}
        }
        let k = self.by_kind[kind.index()].get_or_insert_with(Box::default);
        k.ops += 1;
        k.latency.record_ns(ns);
        if !o.ok {
            self.errors += 1;
            k.errors += 1;
        }
    }
}

/// The YCSB load phase's figures.
pub struct LoadResult {
    pub records: u64,
    pub elapsed: Duration,
    pub errors: u64,
}

/// The result of a run.
pub struct RunResult {
    pub stats: Stats,
    pub elapsed: Duration,
    pub load: Option<LoadResult>,
}

/// One socket of a connection: to the server, or (`--cluster`) to one primary.
struct Link {
    stream: TcpStream,
    out: Vec<u8>,
    out_pos: usize,
    inbuf: Vec<u8>,
    /// The operation (its slot) each command in flight on this socket belongs to, oldest
    /// first: a server answers a socket's requests in order, so replies match FIFO per socket.
    inflight: VecDeque<usize>,
}

impl Link {
    fn new(stream: TcpStream) -> Link {
        Link {
            stream,
            out: Vec::new(),
            out_pos: 0,
            inbuf: Vec::new(),
            inflight: VecDeque::new(),
        }
    }

    /// Writes what it can; `Err` when the connection is gone.
    fn flush(&mut self) -> io::Result<()> {
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        }
        Ok(())
    }
}

/// One connection of `--connections`: one socket, or with `--cluster` one socket per primary
/// sharing the connection's operations (its pipeline, its open-loop schedule).
struct Conn<'m> {
    links: Vec<Link>,
    /// `--cluster`: where each request goes; `None`: everything goes to `links[0]`.
    map: Option<&'m SlotMap>,
    /// `--cluster`: a command being routed (the generator writes it here first).
    scratch: Vec<u8>,
    gen: Generator,
    /// Operations in progress: when each started (or was scheduled) and where it stands.
    slots: Vec<Option<(Instant, Op)>>,
    free: Vec<usize>,
    active: usize,
    /// Open loop: when the next operation is due.
    next_send: Instant,
    dead: bool,
    /// The generator has nothing more to send (the end of a load phase).
    exhausted: bool,
}

/// Appends the command in `scratch` to the socket of its key's primary, and notes that
/// operation `slot` waits for its reply there. Without a map everything goes to `links[0]`
/// (the generator wrote there directly and `scratch` is empty).
fn route(links: &mut [Link], map: Option<&SlotMap>, scratch: &mut Vec<u8>, slot: usize) {
    let node = match map {
        Some(m) => {
            // Single-key commands only (config refuses the rest); a request without a key
            // cannot be produced, and would go to the first primary.
            let n = request_key(scratch).map_or(0, |k| m.node_of_key(k));
            links[n].out.extend_from_slice(scratch);
            scratch.clear();
            n
        }
        None => 0,
    };
    links[node].inflight.push_back(slot);
}

impl Conn<'_> {
    /// Where the generator writes its next command.
    fn command_buf<'a>(
        links: &'a mut [Link],
        map: Option<&SlotMap>,
        scratch: &'a mut Vec<u8>,
    ) -> &'a mut Vec<u8> {
        if map.is_some() {
            scratch
        } else {
            &mut links[0].out
        }
    }

    /// Starts an operation; false when the generator has none left.
    fn begin(&mut self, at: Instant) -> bool {
        let buf = Conn::command_buf(&mut self.links, self.map, &mut self.scratch);
        let Some(op) = self.gen.begin(buf) else {
            self.exhausted = true;
            return false;
        };
        let slot = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some((at, op));
                i
            }
            None => {
                self.slots.push(Some((at, op)));
                self.slots.len() - 1
            }
        };
        route(&mut self.links, self.map, &mut self.scratch, slot);
        self.active += 1;
        true
    }

    fn flush(&mut self) -> io::Result<()> {
        for l in &mut self.links {
            l.flush()?;
        }
        Ok(())
    }

    /// Reads what has arrived on socket `link` and hands each complete reply to its
    /// operation; `Err` when the connection is gone or the server sent something that is not
    /// RESP.
    fn read_replies(
        &mut self,
        link: usize,
        stats: &mut Stats,
        deadline: Instant,
    ) -> Result<(), String> {
        let mut chunk = [0u8; 64 * 1024];
        let l = &mut self.links[link];
        loop {
            match l.stream.read(&mut chunk) {
                Ok(0) => return Err("connection closed by the server".into()),
                Ok(n) => l.inbuf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        // Taken out so that an operation's next command may be routed to any socket,
        // this one included, while its replies are read.
        let inbuf = std::mem::take(&mut self.links[link].inbuf);
        let now = Instant::now();
        let counted = now <= deadline; // after the end: not counted
        let mut pos = 0;
        let mut result = Ok(());
        loop {
            let (kind, used) = match parse_reply(&inbuf[pos..]) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    result = Err(e.0);
                    break;
                }
            };
            let reply = &inbuf[pos..pos + used];
            pos += used;
            let Some(slot) = self.links[link].inflight.pop_front() else {
                result = Err("a reply to no request".to_string());
                break;
            };
            let Some((at, op)) = self.slots[slot].as_mut() else {
                result = Err("a reply to a finished operation".to_string());
                break;
            };
            let at = *at;
            if counted {
                stats.requests += 1;
            }
            let buf = Conn::command_buf(&mut self.links, self.map, &mut self.scratch);
            match self.gen.on_reply(op, kind, reply, buf) {
                Next::More => route(&mut self.links, self.map, &mut self.scratch, slot),
                Next::Done(outcome) => {
                    let kind = op.kind;
                    self.slots[slot] = None;
                    self.free.push(slot);
                    self.active -= 1;
                    if counted {
                        let ns = now.saturating_duration_since(at).as_nanos() as u64;
                        stats.record(kind, outcome, ns);
                    }
                }
            }
        }
        let mut inbuf = inbuf;
        inbuf.drain(..pos);
        self.links[link].inbuf = inbuf;
        result
    }

    fn deregister(&mut self, poll: &Poll) {
        for l in &mut self.links {
            let _ = poll.registry().deregister(&mut l.stream);
        }
    }
}

/// Turns CLIENT TRACKING on for a fresh connection (`--tracking`), with a blocking socket.
fn track(mut s: &StdTcpStream, addr: &SocketAddr) -> Result<(), String> {
    let fail = |e: io::Error| format!("CLIENT TRACKING on {addr}: {e}");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(fail)?;
    s.write_all(b"*3\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\non\r\n")
        .map_err(fail)?;
    let mut reply = [0u8; 5];
    s.read_exact(&mut reply).map_err(fail)?;
    if &reply != b"+OK\r\n" {
        return Err(format!("CLIENT TRACKING on {addr}: {reply:?}"));
    }
    Ok(())
}

/// Reads the slot map from the node at `addr` (`--cluster`), with a blocking socket: once,
/// before the run.
fn read_slot_map(addr: SocketAddr, seed_host: &str) -> Result<SlotMap, String> {
    let fail = |e: io::Error| format!("CLUSTER SLOTS from {addr}: {e}");
    let mut s = StdTcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(fail)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(fail)?;
    s.write_all(CLUSTER_SLOTS).map_err(fail)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some((_, used)) = parse_reply(&buf).map_err(|e| format!("CLUSTER SLOTS: {}", e.0))? {
            return SlotMap::parse(&buf[..used], seed_host);
        }
        // A 16384-shard cluster's reply is a few MB; more is not a CLUSTER SLOTS reply.
        if buf.len() > 64 << 20 {
            return Err("CLUSTER SLOTS: reply over 64 MiB".into());
        }
        match s.read(&mut chunk) {
            Ok(0) => return Err(format!("CLUSTER SLOTS from {addr}: connection closed")),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(fail(e)),
        }
    }
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}:{port}: no address"))
}

/// The seed of connection `global`'s generators.
fn conn_seed(cfg: &Config, global: usize) -> u64 {
    cfg.seed
        .wrapping_add((global as u64).wrapping_mul(0x9E37_79B9))
}

/// Runs the load described by `cfg` and returns what was measured. Fails only when a
/// connection cannot be opened.
pub fn run(cfg: &Config) -> Result<RunResult, String> {
    let addr = resolve(&cfg.host, cfg.port)?;
    let map = match cfg.cluster {
        true => Some(read_slot_map(addr, &cfg.host)?),
        false => None,
    };
    let addrs = match &map {
        Some(m) => m
            .nodes
            .iter()
            .map(|(h, p)| resolve(h, *p))
            .collect::<Result<Vec<_>, _>>()?,
        None => vec![addr],
    };
    let target = Target {
        addrs: &addrs,
        map: map.as_ref(),
    };
    let total_conns = cfg.threads * cfg.connections;
    let mut load = None;
    if let Some(y) = cfg.ycsb.as_ref().filter(|y| y.load) {
        let template = YcsbGen::new(y, Shared::new(y.records), true);
        let make = |global: usize| Generator::Ycsb(template.for_connection(conn_seed(cfg, global)));
        // Bounded: a load that takes an hour has gone wrong.
        let (stats, elapsed) = run_phase(cfg, &target, &make, Duration::from_secs(3600), false)?;
        load = Some(LoadResult {
            records: stats.ops,
            elapsed,
            errors: stats.errors,
        });
    }
    let template = cfg
        .ycsb
        .as_ref()
        .map(|y| YcsbGen::new(y, Shared::new(y.records), false));
    let make = |global: usize| {
        let seed = conn_seed(cfg, global);
        match &template {
            Some(t) => Generator::Ycsb(t.for_connection(seed)),
            None => {
                // Sequential patterns start spread over the key range, one segment per
                // connection.
                let offset =
                    (cfg.key_maximum as u128 * global as u128 / total_conns as u128) as u64;
                let keys = KeyGen::new(cfg.key_pattern, cfg.key_maximum, seed, offset);
                Generator::Mix(
                    Mix::new(
                        cfg.ratio,
                        keys,
                        cfg.key_prefix.as_bytes(),
                        cfg.data_size,
                        cfg.keys_per_request,
                    )
                    .with_verbs(cfg.verbs),
                )
            }
        }
    };
    let time = Duration::from_secs_f64(cfg.test_time_s);
    let (stats, elapsed) = run_phase(cfg, &target, &make, time, cfg.rate.is_some())?;
    Ok(RunResult {
        stats,
        elapsed,
        load,
    })
}

/// One phase: connects every connection, drives them for at most `time` (less when every
/// generator runs out), and merges what the threads counted.
/// Where the connections go: the server, or every primary of a cluster and its slot map.
struct Target<'a> {
    addrs: &'a [SocketAddr],
    map: Option<&'a SlotMap>,
}

fn run_phase(
    cfg: &Config,
    target: &Target,
    make: &(dyn Fn(usize) -> Generator + Sync),
    time: Duration,
    open_loop: bool,
) -> Result<(Stats, Duration), String> {
    // Connect everything first, so that the clock starts with all connections ready.
    let mut per_thread: Vec<Vec<Vec<StdTcpStream>>> = Vec::new();
    for _ in 0..cfg.threads {
        let mut v = Vec::new();
        for _ in 0..cfg.connections {
            let mut socks = Vec::with_capacity(target.addrs.len());
            for addr in target.addrs {
                let s = StdTcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
                s.set_nodelay(true).map_err(|e| e.to_string())?;
                if cfg.tracking {
                    track(&s, addr)?;
                }
                s.set_nonblocking(true).map_err(|e| e.to_string())?;
                socks.push(s);
            }
            v.push(socks);
        }
        per_thread.push(v);
    }
    let map = target.map;
    let start = Instant::now();
    let deadline = start + time;
    let results: Vec<Result<Stats, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = per_thread
            .into_iter()
            .enumerate()
            .map(|(t, socks)| {
                scope.spawn(move || drive(cfg, t, socks, map, make, start, deadline, open_loop))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("driver thread panicked".into()))
            })
            .collect()
    });
    let elapsed = start.elapsed().min(deadline - start);
    let mut stats = Stats::default();
    for r in results {
        stats.merge(&r?);
    }
    Ok((stats, elapsed))
}

#[allow(clippy::too_many_arguments)]
fn drive(
    cfg: &Config,
    thread: usize,
    socks: Vec<Vec<StdTcpStream>>,
    map: Option<&SlotMap>,
    make: &(dyn Fn(usize) -> Generator + Sync),
    start: Instant,
    deadline: Instant,
    open_loop: bool,
) -> Result<Stats, String> {
    let total_conns = cfg.threads * cfg.connections;
    let mut poll = Poll::new().map_err(|e| e.to_string())?;
    let mut events = Events::with_capacity(1024);
    let interval = cfg
        .rate
        .filter(|_| open_loop)
        .map(|r| Duration::from_secs_f64(total_conns as f64 / r));
    let mut conns = Vec::with_capacity(socks.len());
    // Token: connection * links_per_conn + link.
    let links_per_conn = socks.first().map_or(1, Vec::len);
    for (i, conn_socks) in socks.into_iter().enumerate() {
        let global = thread * cfg.connections + i;
        let mut links = Vec::with_capacity(links_per_conn);
        for (j, s) in conn_socks.into_iter().enumerate() {
            let mut stream = TcpStream::from_std(s);
            poll.registry()
                .register(
                    &mut stream,
                    Token(i * links_per_conn + j),
                    Interest::READABLE | Interest::WRITABLE,
                )
                .map_err(|e| e.to_string())?;
            links.push(Link::new(stream));
        }
        let next_send = match interval {
            Some(iv) => start + iv.mul_f64(global as f64 / total_conns as f64),
            None => start,
        };
        conns.push(Conn {
            links,
            map,
            scratch: Vec::new(),
            gen: make(global),
            slots: Vec::new(),
            free: Vec::new(),
            active: 0,
            next_send,
            dead: false,
            exhausted: false,
        });
    }
    let mut stats = Stats::default();
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        // Start what is due and write it.
        let mut wake = deadline;
        for c in conns.iter_mut().filter(|c| !c.dead) {
            match interval {
                None => while c.active < cfg.pipeline && !c.exhausted && c.begin(now) {},
                Some(iv) => {
                    while c.next_send <= now && !c.exhausted {
                        let at = c.next_send;
                        c.begin(at);
                        c.next_send += iv;
                    }
                    wake = wake.min(c.next_send);
                }
            }
            if c.flush().is_err() {
                c.dead = true;
                stats.errors += 1;
                c.deregister(&poll);
            }
        }
        if conns
            .iter()
            .all(|c| c.dead || (c.exhausted && c.active == 0))
        {
            break;
        }
        let timeout = wake.saturating_duration_since(Instant::now());
        if let Err(e) = poll.poll(&mut events, Some(timeout)) {
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e.to_string());
            }
        }
        for ev in events.iter() {
            let (conn, link) = (ev.token().0 / links_per_conn, ev.token().0 % links_per_conn);
            let c = &mut conns[conn];
            if c.dead {
                continue;
            }
            let mut ok = true;
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                ok = c.read_replies(link, &mut stats, deadline).is_ok();
            }
            // (Commands a reply queued, on any socket, go out at the top of the loop.)
            if ok && ev.is_writable() {
                ok = c.links[link].flush().is_ok();
            }
            if !ok {
                // One lost socket ends the whole connection: its operations in flight there
                // would otherwise wait forever and hold its pipeline.
                c.dead = true;
                stats.errors += 1;
                c.deregister(&poll);
            }
        }
    }
    Ok(stats)
}
