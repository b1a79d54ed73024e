//! The I/O: one thread per `--threads`, each driving its `--connections` non-blocking sockets
//! with one mio `Poll`.
//!
//! Closed loop (the default): each connection keeps `--pipeline` requests in flight; a reply
//! frees a slot that the next request fills at once; latency counts from the moment the request
//! was queued for writing.
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
use crate::mix::{Mix, Op};
use crate::proto::{parse_reply, Reply};

/// What one thread (or, merged, the whole run) counted.
#[derive(Default)]
pub struct Stats {
    /// Replies received.
    pub ops: u64,
    pub sets: u64,
    pub gets: u64,
    /// GETs answered with a value.
    pub hits: u64,
    /// GETs answered with a null.
    pub misses: u64,
    /// Error replies, plus connections lost or sent garbage.
    pub errors: u64,
    pub latency: Latency,
}

impl Stats {
    pub fn merge(&mut self, o: &Stats) {
        self.ops += o.ops;
        self.sets += o.sets;
        self.gets += o.gets;
        self.hits += o.hits;
        self.misses += o.misses;
        self.errors += o.errors;
        self.latency.merge(&o.latency);
    }
}

/// The result of a run.
pub struct RunResult {
    pub stats: Stats,
    pub elapsed: Duration,
}

struct Conn {
    stream: TcpStream,
    mix: Mix,
    out: Vec<u8>,
    out_pos: usize,
    inbuf: Vec<u8>,
    /// When each request in flight was sent (or scheduled), and what it was, oldest first.
    inflight: VecDeque<(Instant, Op)>,
    /// Open loop: when the next request is due.
    next_send: Instant,
    dead: bool,
}

impl Conn {
    fn queue(&mut self, at: Instant) {
        let op = self.mix.next_request(&mut self.out);
        self.inflight.push_back((at, op));
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

    /// Reads what has arrived and counts the complete replies; `Err` when the connection is
    /// gone or the server sent something that is not RESP.
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
        let mut pos = 0;
        while let Some((kind, used)) = parse_reply(&self.inbuf[pos..]).map_err(|e| e.0)? {
            pos += used;
            let Some((sent, op)) = self.inflight.pop_front() else {
                return Err("a reply to no request".into());
            };
            if now > deadline {
                continue; // after the end: not counted
            }
            stats.ops += 1;
            stats
                .latency
                .record_ns(now.saturating_duration_since(sent).as_nanos() as u64);
            match op {
                Op::Set => stats.sets += 1,
                Op::Get => stats.gets += 1,
            }
            match (kind, op) {
                (Reply::Error, _) => stats.errors += 1,
                (Reply::Bulk, Op::Get) => stats.hits += 1,
                (Reply::Null, Op::Get) => stats.misses += 1,
                _ => {}
            }
        }
        self.inbuf.drain(..pos);
        Ok(())
    }
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
    let deadline = start + Duration::from_secs_f64(cfg.test_time_s);
    let results: Vec<Result<Stats, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = per_thread
            .into_iter()
            .enumerate()
            .map(|(t, socks)| {
                scope.spawn(move || drive(cfg, t, socks, total_conns, start, deadline))
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
    Ok(RunResult { stats, elapsed })
}

fn drive(
    cfg: &Config,
    thread: usize,
    socks: Vec<StdTcpStream>,
    total_conns: usize,
    start: Instant,
    deadline: Instant,
) -> Result<Stats, String> {
    let mut poll = Poll::new().map_err(|e| e.to_string())?;
    let mut events = Events::with_capacity(1024);
    let interval = cfg
        .rate
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
        let seed = cfg
            .seed
            .wrapping_add((global as u64).wrapping_mul(0x9E37_79B9));
        // Sequential patterns start spread over the key range, one segment per connection.
        let offset = (cfg.key_maximum as u128 * global as u128 / total_conns as u128) as u64;
        let keys = KeyGen::new(cfg.key_pattern, cfg.key_maximum, seed, offset);
        let mix = Mix::new(cfg.ratio, keys, cfg.key_prefix.as_bytes(), cfg.data_size);
        let next_send = match interval {
            Some(iv) => start + iv.mul_f64(global as f64 / total_conns as f64),
            None => start,
        };
        conns.push(Conn {
            stream,
            mix,
            out: Vec::new(),
            out_pos: 0,
            inbuf: Vec::new(),
            inflight: VecDeque::new(),
            next_send,
            dead: false,
        });
    }
    let mut stats = Stats::default();
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        // Queue what is due and write it.
        let mut wake = deadline;
        for c in conns.iter_mut().filter(|c| !c.dead) {
            match interval {
                None => {
                    while c.inflight.len() < cfg.pipeline {
                        c.queue(now);
                    }
                }
                Some(iv) => {
                    while c.next_send <= now {
                        let at = c.next_send;
                        c.queue(at);
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
        if conns.iter().all(|c| c.dead) {
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
