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

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{TcpStream as StdTcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

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

struct Conn {
    stream: TcpStream,
    gen: Generator,
    out: Vec<u8>,
    out_pos: usize,
    inbuf: Vec<u8>,
    /// The operation (its slot) each command in flight belongs to, oldest first.
    inflight: VecDeque<usize>,
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

impl Conn {
    /// Starts an operation; false when the generator has none left.
    fn begin(&mut self, at: Instant) -> bool {
        let Some(op) = self.gen.begin(&mut self.out) else {
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
        self.inflight.push_back(slot);
        self.active += 1;
        true
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

    /// Reads what has arrived and hands each complete reply to its operation; `Err` when the
    /// connection is gone or the server sent something that is not RESP.
    fn read_replies(&mut self, stats: &mut Stats, deadline: Instant) -> Result<(), String> {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err("connection closed by the server".into()),
                Ok(n) => self.inbuf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        let now = Instant::now();
        let counted = now <= deadline; // after the end: not counted
        let mut pos = 0;
        while let Some((kind, used)) = parse_reply(&self.inbuf[pos..]).map_err(|e| e.0)? {
            let reply = &self.inbuf[pos..pos + used];
            pos += used;
            let slot = self
                .inflight
                .pop_front()
                .ok_or_else(|| "a reply to no request".to_string())?;
            let (at, op) = self.slots[slot]
                .as_mut()
                .ok_or_else(|| "a reply to a finished operation".to_string())?;
            let at = *at;
            if counted {
                stats.requests += 1;
            }
            match self.gen.on_reply(op, kind, reply, &mut self.out) {
                Next::More => self.inflight.push_back(slot),
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
        self.inbuf.drain(..pos);
        Ok(())
    }
}

/// The seed of connection `global`'s generators.
fn conn_seed(cfg: &Config, global: usize) -> u64 {
    cfg.seed
        .wrapping_add((global as u64).wrapping_mul(0x9E37_79B9))
}

/// Runs the load described by `cfg` and returns what was measured. Fails only when a
/// connection cannot be opened.
pub fn run(cfg: &Config) -> Result<RunResult, String> {
    let addr = (cfg.host.as_str(), cfg.port)
        .to_socket_addrs()
        .map_err(|e| format!("{}:{}: {e}", cfg.host, cfg.port))?
        .next()
        .ok_or_else(|| format!("{}:{}: no address", cfg.host, cfg.port))?;
    let total_conns = cfg.threads * cfg.connections;
    let mut load = None;
    if let Some(y) = cfg.ycsb.as_ref().filter(|y| y.load) {
        let template = YcsbGen::new(y, Shared::new(y.records), true);
        let make = |global: usize| Generator::Ycsb(template.for_connection(conn_seed(cfg, global)));
        // Bounded: a load that takes an hour has gone wrong.
        let (stats, elapsed) = run_phase(cfg, addr, &make, Duration::from_secs(3600), false)?;
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
    let (stats, elapsed) = run_phase(cfg, addr, &make, time, cfg.rate.is_some())?;
    Ok(RunResult {
        stats,
        elapsed,
        load,
    })
}

/// One phase: connects every connection, drives them for at most `time` (less when every
/// generator runs out), and merges what the threads counted.
fn run_phase(
    cfg: &Config,
    addr: std::net::SocketAddr,
    make: &(dyn Fn(usize) -> Generator + Sync),
    time: Duration,
    open_loop: bool,
) -> Result<(Stats, Duration), String> {
    // Connect everything first, so that the clock starts with all connections ready.
    let mut per_thread: Vec<Vec<StdTcpStream>> = Vec::new();
    for _ in 0..cfg.threads {
        let mut v = Vec::new();
        for _ in 0..cfg.connections {
            let s = StdTcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            s.set_nonblocking(true).map_err(|e| e.to_string())?;
            v.push(s);
        }
        per_thread.push(v);
    }
    let start = Instant::now();
    let deadline = start + time;
    let results: Vec<Result<Stats, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = per_thread
            .into_iter()
            .enumerate()
            .map(|(t, socks)| {
                scope.spawn(move || drive(cfg, t, socks, make, start, deadline, open_loop))
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

fn drive(
    cfg: &Config,
    thread: usize,
    socks: Vec<StdTcpStream>,
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
    for (i, s) in socks.into_iter().enumerate() {
        let global = thread * cfg.connections + i;
        let mut stream = TcpStream::from_std(s);
        poll.registry()
            .register(
                &mut stream,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| e.to_string())?;
        let next_send = match interval {
            Some(iv) => start + iv.mul_f64(global as f64 / total_conns as f64),
            None => start,
        };
        conns.push(Conn {
            stream,
            gen: make(global),
            out: Vec::new(),
            out_pos: 0,
            inbuf: Vec::new(),
            inflight: VecDeque::new(),
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
            let c = &mut conns[ev.token().0];
            if c.dead {
                continue;
            }
            let mut ok = true;
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                ok = c.read_replies(&mut stats, deadline).is_ok();
            }
            if ok && ev.is_writable() {
                ok = c.flush().is_ok();
            }
            if !ok {
                c.dead = true;
                stats.errors += 1;
                let _ = poll.registry().deregister(&mut c.stream);
            }
        }
    }
    Ok(stats)
}
