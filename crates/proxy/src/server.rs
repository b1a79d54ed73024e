//! The proxy's I/O: one mio event loop per thread, each with its own listening socket
//! (SO_REUSEPORT, so the kernel spreads new clients over the threads), its clients, its backend
//! connections and its slot map. Everything that decides is in the sans-I/O modules; this one
//! reads, writes and keeps the books of what is in flight where.
//!
//! A client request becomes a [`ReplyQueue`] entry (its place in the client's reply order) and
//! zero or more backend requests, each remembered in its backend connection's in-flight queue
//! with the client, the entry and the part it answers. A backend answers in order, so its
//! next complete reply always belongs to the front of that queue. A client that goes away
//! leaves its in-flight requests where they are: their replies arrive, find no client with that
//! id, and are dropped, which keeps the backend stream in step.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream as StdTcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use darner_resp::{decode, encode, Bytes, Frame, Limits, RequestParser};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

use crate::auth::Credentials;
use crate::cache::{self, Cache, Fill};
use crate::config::Config;
use crate::fanout::{self, Admin};
use crate::health::Health;
use crate::merge::{Merge, ReplyQueue};
use crate::metrics::{self, Counters, Event, InfoContext, Registry};
use crate::replicas::{ReadPolicy, Replicas};
use crate::route::{
    self, encode_request, parse_redirect, Identity, Plan, Redirect, Session, Target,
};
use crate::scan::ReplyScanner;
use crate::slots::SlotMap;
use crate::tracking::{self, Reader};

mod monitor;
mod reads;
mod wait;
use reads::ReadRetry;

/// Redirects one request may follow before its error goes to the client. `-TRYAGAIN`s count
/// too: a resharding that moves a slot's keys in batches answers a multi-key request whose keys
/// are split between the two nodes with it until the last batch has moved (Redis's MIGRATE
/// pipeline: tens of milliseconds per batch), so the cap leaves room for a second or so of
/// them while still ending any redirect loop between confused nodes.
const MAX_REDIRECTS: u8 = 40;
/// How long a request answered `-TRYAGAIN` waits before it is sent again (Redis Cluster
/// clients wait about as long): the keys are being moved, and asking again at once would only
/// get the same answer.
const TRY_AGAIN_AFTER: Duration = Duration::from_millis(25);
/// Requests a client may have waiting for replies before the proxy stops reading from it: a
/// client that pipelines without reading its replies is bounded, not buffered without end.
const MAX_PENDING: usize = 1024;
/// Most bytes read from one client before its requests are processed: a client sending a
/// flood is served in turns with the others.
const CLIENT_READ_MAX: usize = 1024 * 1024;
/// Bytes read from a socket at a time.
/// Messages held for a subscriber that reads slower than they come: past this the client is
/// closed, as Redis's default `client-output-buffer-limit pubsub` hard limit (32 MB) closes a
/// subscriber of its own, rather than the proxy's memory growing without bound.
pub(crate) const SUBSCRIBER_OUT_MAX: usize = 32 * 1024 * 1024;
const READ_CHUNK: usize = 16 * 1024;
/// Keys a tracking client's transaction reads that are remembered for their invalidation after
/// EXEC; past it, EXEC is followed by the null invalidation (flush everything) instead.
const MAX_MULTI_READS: usize = 4096;
/// Idle dedicated connections kept per node (and protocol) for the next transaction or
/// blocking command: short-lived clients that use them then cost no new backend connection.
const MAX_IDLE_DEDICATED: usize = 8;
/// How often a refused backend handshake is logged (per thread).
const HANDSHAKE_WARN_EVERY: Duration = Duration::from_secs(10);
/// How soon a thread asks again after its topology request failed.
const FAILED_REFRESH_RETRY: Duration = Duration::from_millis(100);
/// How often a thread without a topology asks the seeds again.
const EMPTY_MAP_RETRY: Duration = Duration::from_millis(500);

const LISTENER: Token = Token(0);
/// Another thread posted invalidations for a redirect target of this one (see `tracking::Hub`):
/// even, out of the backends' reach (a slab index that large cannot be).
const WAKER: Token = Token(usize::MAX - 1);

fn client_token(i: usize) -> Token {
    Token(1 + 2 * i)
}

fn backend_token(i: usize) -> Token {
    Token(2 + 2 * i)
}

/// Who waits for a backend reply.
#[derive(Debug)]
enum Owner {
    /// Part `part` of request `seq` of the client at `idx` whose id is `id`.
    Client {
        idx: usize,
        id: u64,
        seq: u64,
        part: usize,
    },
    /// The ASKING before an ASK-redirected request: its `+OK` is nobody's.
    Asking,
    /// A request whose reply the client does not get: the MULTI and queued commands sent
    /// when a transaction is pinned (their `+OK`/`+QUEUED` went out already), the DISCARD of a
    /// transaction the proxy already answered.
    Nobody,
    /// The HELLO 3 (or AUTH, with backend credentials) that opens a backend connection.
    Hello,
    /// The MONITOR that opens one of the client's monitor connections.
    MonitorStart { idx: usize, id: u64 },
    /// The client's WAIT sent to node `i` of those asked (see `wait`).
    WaitAsk { idx: usize, id: u64, i: usize },
    /// A topology refresh: `CLUSTER SHARDS`, or `CLUSTER SLOTS` from a node without SHARDS.
    Topology { shards: bool },
    /// The probe (ROLE) that decides whether an ejected node takes reads again.
    Probe,
    /// The PTTL sent right behind a cache fill, which gives its entry a deadline.
    Ttl(cache::Ticket),
    /// A `CLIENT TRACKING on BCAST`: until the node answers it, BCAST clients may have
    /// missed changes on that node, so once it does they are told to flush; `all`: it
    /// switched a default-mode connection, which forgot what it tracked, so every tracking
    /// client is (see `Worker::want_backend_tracking`).
    Retracked { all: bool },
}

#[derive(Debug)]
struct InFlight {
    owner: Owner,
    /// The request, kept for a resend after a redirect.
    payload: Vec<u8>,
    redirects: u8,
    /// A redirect may resend it elsewhere (not inside a transaction, which is bound to its
    /// connection).
    resend: bool,
    /// When it was queued: the connection's oldest request is the one a stall delays.
    sent: Instant,
    /// A read that another node of its shard may answer if this one fails.
    read: Option<Box<ReadRetry>>,
    /// A cache fill: its reply may be kept (see [`cache`]).
    fill: Option<Box<Fill>>,
}

struct Client {
    sock: TcpStream,
    id: u64,
    rbuf: Vec<u8>,
    parser: RequestParser,
    out: Vec<u8>,
    queue: ReplyQueue,
    session: Session,
    /// No more requests are read (QUIT, a protocol error): close once the replies are out.
    closing: bool,
    /// Reading stopped at MAX_PENDING with the socket perhaps still readable.
    read_paused: bool,
    /// Parsing stopped at MAX_PENDING with requests perhaps still in `rbuf`.
    input_paused: bool,
    /// The backend connection its transaction is pinned to.
    pinned: Option<usize>,
    /// Every backend connection of its own (the pinned one, those of blocking commands).
    dedicated: Vec<usize>,
    /// Requests waiting for earlier ones to be answered (see `Worker::dispatch`).
    deferred: VecDeque<Outgoing>,
    /// A (P)(UN)SUBSCRIBE was parsed and left at the head of `rbuf`: once every earlier reply
    /// is out, the client becomes a passthrough (see `Worker::start_subscription`).
    /// (`Some`: where its connection goes.)
    subscribe_pending: Option<Target>,
    /// The connection the client is subscribed on: its bytes and the client's are passed
    /// through unparsed, until the client leaves.
    subscribed: Option<usize>,
    /// Its MONITOR connections (see `monitor`).
    monitor: monitor::Monitoring,
    /// Where its writes went since its last WAIT, and the WAIT being answered (see `wait`).
    waits: wait::ClientWaits,
    /// A RESP2 client's cacheable reads sent on RESP3 tracking connections (to fill the
    /// cache), not on the RESP2 ones its other requests take (their sequence numbers, in
    /// order): until they are answered, its other requests wait (`must_wait`), so none
    /// overtakes them, and they are sent only when nothing else of the client's is in flight.
    crossing: VecDeque<u64>,
    /// Its cacheable reads that joined a cache fill in flight (sequence numbers, in order; see
    /// `cache::Cache::join`): until each is answered or sent, its later requests wait
    /// (`must_wait`), so that none overtakes one the fill's drop sends to the node.
    joined: VecDeque<u64>,
    /// With the cache on, its writes not answered yet (sequence numbers, in order): while one
    /// is, the client gets no cache hit (an entry filled meanwhile on another connection may
    /// hold what the node had before the write; the client must read after its write).
    writes: VecDeque<u64>,
    /// Its requests whose keys are recorded for its CLIENT TRACKING when their replies are
    /// read (sequence numbers; see `tracking`).
    tracked: std::collections::BTreeSet<u64>,
    /// Keys its transaction read while it tracks: they are invalidated right after EXEC's
    /// reply (a transaction's connection does not track), all of them (the null
    /// invalidation) past [`MAX_MULTI_READS`].
    multi_reads: Vec<Vec<u8>>,
    multi_reads_overflow: bool,
    /// With a REDIRECT: invalidations of what it read where nothing tracks it, each sent to
    /// the target once the reply of request `seq` is complete (not before: the client would
    /// cache what it reads after being told to drop it). `None`: the null invalidation.
    redirect_after: VecDeque<(u64, Option<Vec<Vec<u8>>>)>,
}

/// What a backend connection is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Pipelined, shared by the thread's clients (in `by_node`).
    Shared,
    /// One client's: `held` while its transaction is pinned there; otherwise it goes back to
    /// the idle pool once its requests are answered.
    Dedicated { idx: usize, id: u64, held: bool },
    /// In the idle pool, clean (no MULTI, WATCH or blocked command left on it).
    Idle,
    /// A subscribed client's: past the HELLO 3 that may open it, what it sends is the client's.
    Subscriber { idx: usize, id: u64 },
    /// One of a monitoring client's: past its MONITOR's `+OK`, every line is the client's.
    Monitor { idx: usize, id: u64 },
}

struct Backend {
    sock: TcpStream,
    node: String,
    resp3: bool,
    connected: bool,
    out: Vec<u8>,
    rbuf: Vec<u8>,
    scanner: ReplyScanner,
    inflight: VecDeque<InFlight>,
    role: Role,
    /// `CLIENT TRACKING on` was sent first: the node pushes invalidations of the keys read on
    /// it (a shared RESP3 connection while the cache is on, or once a client tracks).
    tracking: bool,
    /// ... in BCAST mode (every key's change, read here or not).
    bcast: bool,
}

impl Backend {
    /// Queues `payload` for `owner` (a redirect may resend it elsewhere when `resend`).
    fn queue(
        &mut self,
        owner: Owner,
        payload: Vec<u8>,
        redirects: u8,
        resend: bool,
        sent: Instant,
    ) {
        self.out.extend_from_slice(&payload);
        self.inflight.push_back(InFlight {
            owner,
            payload,
            redirects,
            resend,
            sent,
            read: None,
            fill: None,
        });
    }

    /// Queues a request of the proxy's own (ASKING, HELLO 3, a transaction's preamble) whose
    /// reply `owner` consumes.
    fn queue_own(&mut self, owner: Owner, request: &[u8], sent: Instant) {
        self.out.extend_from_slice(request);
        self.inflight.push_back(InFlight {
            owner,
            payload: Vec::new(),
            redirects: 0,
            resend: false,
            sent,
            read: None,
            fill: None,
        });
    }
}

/// Starts the proxy: reads the topology, binds one listening socket per thread and runs the
/// threads until the process ends.
pub fn run(cfg: Config) -> io::Result<()> {
    let creds: Option<Credentials> = cfg.backend_password.clone().map(|p| {
        (
            cfg.backend_user.clone().unwrap_or_else(|| "default".into()),
            p,
        )
    });
    let (map, replicas) = match discover(&cfg.cluster, creds.as_ref()) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("darner-proxy: no topology yet ({e}); will keep asking the seeds");
            Default::default()
        }
    };
    let addr = resolve(&cfg.listen)?;
    let mut listeners = Vec::with_capacity(cfg.threads);
    let mut bound = addr;
    for _ in 0..cfg.threads {
        let l = reuseport_listener(bound)?;
        bound = l.local_addr()?;
        listeners.push(l);
    }
    let (host, _) = cfg.listen.rsplit_once(':').expect("checked by config");
    let me = Identity {
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port: bound.port(),
        node_id: node_id(bound),
    };
    eprintln!(
        "darner-proxy: listening on {bound}, {} threads, {} primaries known",
        cfg.threads,
        map.primaries().len()
    );
    let registry = Registry::new(cfg.threads);
    registry
        .port
        .store(u64::from(bound.port()), Ordering::Relaxed);
    let admin = Admin {
        requirepass: cfg.requirepass.clone().map(String::into_bytes),
        registry: registry.clone(),
        info: InfoContext {
            threads: cfg.threads,
            maxclients: cfg.maxclients,
            redis_version: route::REDIS_COMPAT_VERSION,
        },
    };
    if let Some(addr) = &cfg.metrics_listen {
        let l = std::net::TcpListener::bind(resolve(addr)?)?;
        eprintln!(
            "darner-proxy: metrics on http://{}/metrics",
            l.local_addr()?
        );
        let (reg, ctx) = (registry.clone(), admin.info.clone());
        std::thread::Builder::new()
            .name("proxy-metrics".into())
            .spawn(move || metrics::serve_http(l, reg, ctx))?;
    }
    let threads = cfg.threads as u64;
    let hub = Arc::new(tracking::Hub::new(threads));
    // One cache for every thread (see the cache module's essay).
    let cache_store = cfg
        .cache_max_memory
        .map(|m| Arc::new(cache::Store::new(m.max(1024)).with_threads(cfg.threads)));
    if let Some(store) = &cache_store {
        let hub = hub.clone();
        store.set_wake(move |t| hub.wake(t));
    }
    let mut handles = Vec::new();
    for (t, listener) in listeners.into_iter().enumerate() {
        let mut worker = Worker::new(
            listener,
            map.clone(),
            me.clone(),
            &cfg,
            t as u64,
            threads,
            cache_store.clone(),
        )?;
        hub.set_waker(t, Waker::new(worker.poll.registry(), WAKER)?);
        worker.hub = hub.clone();
        worker.admin = Some(admin.clone());
        worker.backend_creds = creds.clone();
        worker.replicas = replicas.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("proxy-{t}"))
                .spawn(move || worker.run())?,
        );
    }
    for h in handles {
        match h.join() {
            Ok(r) => r?,
            Err(_) => return Err(io::Error::other("a proxy thread panicked")),
        }
    }
    Ok(())
}

fn resolve(addr: &str) -> io::Result<SocketAddr> {
    addr.to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::other(format!("{addr}: no address")))
}

fn reuseport_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(TcpListener::from_std(s.into()))
}

/// A node id that differs between proxies and between runs (40 hex digits, as Redis's).
fn node_id(addr: SocketAddr) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(40);
    let seed = std::collections::hash_map::RandomState::new();
    for i in 0..3u64 {
        let mut h = seed.build_hasher();
        h.write_u64(i);
        h.write(addr.to_string().as_bytes());
        h.write_u32(std::process::id());
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(40);
    out
}

/// The topology from the first seed that gives one (blocking: it runs once, before any client).
fn discover(seeds: &[String], creds: Option<&Credentials>) -> Result<(SlotMap, Replicas), String> {
    let mut errors = Vec::new();
    for seed in seeds {
        match ask_topology(seed, creds) {
            Ok(m) if !m.0.primaries().is_empty() => return Ok(m),
            Ok(_) => errors.push(format!("{seed}: no slots assigned")),
            Err(e) => errors.push(format!("{seed}: {e}")),
        }
    }
    Err(errors.join("; "))
}

/// The topology from CLUSTER SHARDS, or CLUSTER SLOTS where SHARDS is unknown (before Redis 7).
fn ask_topology(seed: &str, creds: Option<&Credentials>) -> Result<(SlotMap, Replicas), String> {
    let addr = resolve(seed).map_err(|e| e.to_string())?;
    let mut s =
        StdTcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    if let Some((user, pass)) = creds {
        if let Frame::Error(e) = ask(&mut s, &["AUTH", user, pass])? {
            return Err(format!("AUTH refused: {}", String::from_utf8_lossy(&e)));
        }
    }
    let shards = ask(&mut s, &["CLUSTER", "SHARDS"])?;
    if !matches!(shards, Frame::Error(_)) {
        let map =
            SlotMap::from_cluster_shards(&shards, host_of(seed)).map_err(|e| e.to_string())?;
        return Ok((map, Replicas::from_cluster_shards(&shards, host_of(seed))));
    }
    let slots = ask(&mut s, &["CLUSTER", "SLOTS"])?;
    let map = SlotMap::from_cluster_slots(&slots, host_of(seed)).map_err(|e| e.to_string())?;
    Ok((map, Replicas::from_cluster_slots(&slots, host_of(seed))))
}

/// One request and its reply, blocking.
fn ask(s: &mut StdTcpStream, args: &[&str]) -> Result<Frame, String> {
    s.write_all(&encode_request(args))
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        if let Some((f, _)) = decode(&buf, &Limits::default()).map_err(|e| e.to_string())? {
            return Ok(f);
        }
        let n = s.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn host_of(node: &str) -> &str {
    node.rsplit_once(':').map_or(node, |(h, _)| h)
}

/// What a read found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ReadOutcome {
    /// The peer closed its side.
    Eof,
    /// Everything the socket had was read.
    Drained,
    /// `max` bytes were read and more may wait: with edge-triggered readiness no new event
    /// comes for them, so the caller must read again itself.
    Full,
}

thread_local! {
    /// Where [`read_into`] reads: zeroed once per thread, not before every read.
    static READ_SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; READ_CHUNK]);
}

/// Reads what the socket has into `buf`, up to about `max` bytes. `closing`: the event
/// reported the peer's FIN (or an error), so read on until end of file instead of stopping
/// at the first short read.
///
/// Two costs are avoided on the unpipelined path, where every request is one small read (a
/// profile of `redis-benchmark -P 1` through the proxy had 8% of its CPU in memset): the
/// bytes are read into a per-thread scratch buffer and copied (a few dozen bytes for a GET),
/// where growing `buf` by a zeroed chunk before each read cleared 16 KiB; and a read that
/// returns less than it asked for ends the loop, since such a short read drained the socket
/// and data arriving later raises a new edge-triggered event (the read that would only say
/// WouldBlock is one syscall per request). A FIN that came before the read raises no new
/// event, hence `closing`.
fn read_into(
    sock: &mut TcpStream,
    buf: &mut Vec<u8>,
    max: usize,
    closing: bool,
) -> io::Result<ReadOutcome> {
    READ_SCRATCH.with_borrow_mut(|scratch| {
        let start = buf.len();
        while buf.len() - start < max {
            match sock.read(scratch) {
                Ok(0) => return Ok(ReadOutcome::Eof),
                Ok(n) => {
                    buf.extend_from_slice(&scratch[..n]);
                    if n < scratch.len() && !closing {
                        return Ok(ReadOutcome::Drained);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(ReadOutcome::Drained),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ReadOutcome::Full)
    })
}

/// Writes as much of `out` as the socket takes; what is left stays in `out`.
fn flush(sock: &mut TcpStream, out: &mut Vec<u8>) -> io::Result<()> {
    let mut done = 0;
    let result = loop {
        if done == out.len() {
            break Ok(());
        }
        match sock.write(&out[done..]) {
            Ok(0) => break Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    out.drain(..done);
    result
}

struct Worker {
    poll: Poll,
    listener: TcpListener,
    clients: Slab<Client>,
    backends: Slab<Backend>,
    by_node: HashMap<(String, bool), usize>,
    /// Idle dedicated connections by node and protocol.
    idle: HashMap<(String, bool), Vec<usize>>,
    /// Clients with deferred requests that a reply may have freed.
    deferred_ready: Vec<usize>,
    map: SlotMap,
    /// The replicas of each primary, from the same topology replies as `map`.
    replicas: Replicas,
    /// Which nodes are ejected (see [`Health`]).
    health: Health,
    read_policy: ReadPolicy,
    read_retry_deadline: Duration,
    /// Second copies of slow reads (`read-hedge-after`; see `reads`).
    hedging: reads::Hedging,
    /// Rotates the `any` read policy's first choice.
    read_turn: usize,
    me: Identity,
    seeds: Vec<String>,
    limits: Limits,
    thread: u64,
    threads: u64,
    next_client: u64,
    any_rr: usize,
    refresh_in_flight: bool,
    /// Ask CLUSTER SHARDS (Redis 7), until a node says it does not know it.
    use_shards: bool,
    refresh_interval: Duration,
    next_refresh: Instant,
    op_timeout: Option<Duration>,
    dirty_clients: Vec<usize>,
    dirty_backends: Vec<usize>,
    /// Requests answered `-TRYAGAIN`, sent again once due (after [`TRY_AGAIN_AFTER`]), each to
    /// the node that answered (shared or the client's own connection, in its protocol); at
    /// most one per client request in flight.
    try_again: Vec<(Instant, bool, InFlight, String, bool)>,
    /// Clients with input left over from an earlier turn (a full read, or MAX_PENDING reached
    /// and since relieved): served again on the next turn, after the other ready sockets, so
    /// one flooding client cannot hold the loop.
    resume: Vec<usize>,
    /// The password, the shared counters and INFO's context (set by `run`; `None` in a
    /// worker made without them: no AUTH, nothing published).
    admin: Option<Admin>,
    /// What this thread counted since it last published.
    counters: Counters,
    maxclients: usize,
    /// The backend connections' credentials.
    backend_creds: Option<Credentials>,
    /// When a refused backend handshake was last logged.
    handshake_warned: Option<Instant>,
    /// The shared client cache (`proxy-cache yes`): this thread's share of it.
    cache: Option<Cache>,
    /// How the thread's RESP3 shared connections track: `None` (no cache, no tracking
    /// client yet), `Some(false)` (default mode), `Some(true)` (BCAST, once a client asked).
    backend_tracking: Option<bool>,
    /// Which of the thread's default-mode tracking clients read which key.
    client_tracking: tracking::Table,
    /// The thread's BCAST clients (some may have gone or turned tracking off since).
    bcast_clients: Vec<Reader>,
    /// The clients of every thread, for REDIRECT (see `tracking::Hub`).
    hub: Arc<tracking::Hub>,
    /// This thread's clients by id (a REDIRECT names its target by id).
    by_id: HashMap<u64, usize>,
    /// Its clients' reads waiting for a cache fill they joined, by join id.
    joins: HashMap<u64, JoinWait>,
}

/// A client's read waiting for a cache fill in flight (`Client::joined`).
struct JoinWait {
    idx: usize,
    id: u64,
    seq: u64,
    /// The client's protocol when it asked.
    resp3: bool,
    /// How it is sent, should the fill be dropped.
    out: Outgoing,
}

impl Worker {
    fn new(
        mut listener: TcpListener,
        map: SlotMap,
        me: Identity,
        cfg: &Config,
        thread: u64,
        threads: u64,
        cache_store: Option<Arc<cache::Store>>,
    ) -> io::Result<Worker> {
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        Ok(Worker {
            poll,
            listener,
            clients: Slab::new(),
            backends: Slab::new(),
            by_node: HashMap::new(),
            idle: HashMap::new(),
            deferred_ready: Vec::new(),
            map,
            replicas: Replicas::default(),
            health: Health::default(),
            read_policy: cfg.read_policy,
            read_retry_deadline: cfg.read_retry_deadline,
            hedging: reads::Hedging::new(cfg.read_hedge_after, cfg.read_hedge_max_percent),
            read_turn: thread as usize,
            me,
            seeds: cfg.cluster.clone(),
            limits: Limits::default(),
            thread,
            threads,
            next_client: 0,
            any_rr: thread as usize,
            refresh_in_flight: false,
            use_shards: true,
            refresh_interval: cfg.refresh_interval,
            next_refresh: Instant::now() + cfg.refresh_interval,
            op_timeout: cfg.op_timeout,
            dirty_clients: Vec::new(),
            dirty_backends: Vec::new(),
            try_again: Vec::new(),
            resume: Vec::new(),
            admin: None,
            counters: Counters::default(),
            maxclients: cfg.maxclients,
            backend_creds: None,
            handshake_warned: None,
            cache: cache_store.map(|s| Cache::handle(s, thread as usize)),
            backend_tracking: cfg.cache_max_memory.map(|_| false),
            client_tracking: tracking::Table::default(),
            bcast_clients: Vec::new(),
            hub: Arc::new(tracking::Hub::new(threads)),
            by_id: HashMap::new(),
            joins: HashMap::new(),
        })
    }

    fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        tracking::install_hub(self.hub.clone());
        loop {
            let deadline = self
                .expire_stalled()
                .map_or(self.next_refresh, |d| d.min(self.next_refresh));
            let deadline = self
                .health
                .next_probe()
                .map_or(deadline, |p| p.min(deadline));
            let deadline = self
                .try_again
                .iter()
                .map(|t| t.0)
                .min()
                .map_or(deadline, |t| t.min(deadline));
            let deadline = self
                .hedging
                .next_due()
                .map_or(deadline, |t| t.min(deadline));
            let timeout = if self.resume.is_empty() {
                deadline.saturating_duration_since(Instant::now())
            } else {
                Duration::ZERO
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for ev in events.iter() {
                let t = ev.token().0;
                if ev.token() == LISTENER {
                    self.accept();
                } else if ev.token() == WAKER {
                    // Joined reads another thread's fill settled are read below.
                    for r in self.hub.take(self.thread as usize) {
                        if r.broken {
                            self.redirect_broken(r.target, r.from);
                        } else {
                            self.deliver_redirected(&r);
                        }
                    }
                } else if t % 2 == 1 {
                    let idx = (t - 1) / 2;
                    if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                        self.client_readable(idx, ev.is_read_closed() || ev.is_error());
                    }
                    self.dirty_clients.push(idx);
                } else {
                    let idx = (t - 2) / 2;
                    self.backend_event(
                        idx,
                        ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                        ev.is_read_closed() || ev.is_error(),
                    );
                }
            }
            let mut resume = std::mem::take(&mut self.resume);
            resume.sort_unstable();
            resume.dedup();
            for idx in resume {
                let Some(c) = self.clients.get(idx) else {
                    continue;
                };
                let (parse, read) = (c.input_paused, c.read_paused);
                if parse {
                    self.process_input(idx);
                }
                if read {
                    // Read until WouldBlock: a FIN reported with the event that filled the
                    // buffer raises no new one.
                    self.client_readable(idx, true);
                }
            }
            if Instant::now() >= self.next_refresh {
                self.refresh(None);
                self.bcast_connections();
            }
            self.send_probes();
            self.resend_tried_again();
            self.send_hedges();
            self.settle_joined();
            self.run_deferred();
            // Before the replies go out: a client that saw one finds it counted.
            self.publish_counters();
            self.flush_all();
        }
    }

    /// Adds this turn's counts to the shared registry, with the requests in flight now.
    fn publish_counters(&mut self) {
        if let Some(cache) = &mut self.cache {
            self.counters.cache(cache.take_stats());
        }
        let Some(admin) = &self.admin else {
            return;
        };
        let mut in_flight: Vec<(&str, u64)> = Vec::new();
        for (_, be) in self.backends.iter() {
            let n = be.inflight.len() as u64;
            match in_flight.iter_mut().find(|(node, _)| *node == be.node) {
                Some((_, sum)) => *sum += n,
                None => in_flight.push((&be.node, n)),
            }
        }
        admin
            .registry
            .publish(self.thread as usize, &mut self.counters, &in_flight);
    }

    /// With `--op-timeout`: drops the backend connections whose oldest request has waited too
    /// long (its stream cannot be resynchronised: a late reply would answer the wrong request)
    /// and returns when the next one would be due.
    fn expire_stalled(&mut self) -> Option<Instant> {
        let limit = self.op_timeout?;
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        let mut stalled = Vec::new();
        for (b, be) in self.backends.iter() {
            // A blocking command waits as long as its client asked, and a transaction's
            // connection carries one client's requests only.
            if be.role != Role::Shared {
                continue;
            }
            if let Some(front) = be.inflight.front() {
                let due = front.sent + limit;
                if due <= now {
                    stalled.push(b);
                } else {
                    next = Some(next.map_or(due, |n| n.min(due)));
                }
            }
        }
        if stalled.is_empty() {
            return next;
        }
        for b in stalled {
            self.fail_backend(b, &format!("timed out after {} ms", limit.as_millis()));
        }
        // Failing them sent a topology refresh, whose deadline is not in `next`: look again on
        // the next turn.
        Some(now)
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut sock, _)) => {
                    let _ = sock.set_nodelay(true);
                    if !self.admit(&mut sock) {
                        continue;
                    }
                    let entry = self.clients.vacant_entry();
                    let idx = entry.key();
                    if self
                        .poll
                        .registry()
                        .register(
                            &mut sock,
                            client_token(idx),
                            Interest::READABLE | Interest::WRITABLE,
                        )
                        .is_err()
                    {
                        if let Some(admin) = &self.admin {
                            admin.registry.clients.fetch_sub(1, Ordering::Relaxed);
                        }
                        continue;
                    }
                    self.next_client += 1;
                    let id = self.next_client * self.threads + self.thread + 1 - self.threads;
                    entry.insert(Client {
                        sock,
                        id,
                        rbuf: Vec::new(),
                        parser: RequestParser::new(),
                        out: Vec::new(),
                        queue: ReplyQueue::new(),
                        session: Session {
                            id,
                            ..Session::default()
                        },
                        closing: false,
                        read_paused: false,
                        input_paused: false,
                        pinned: None,
                        dedicated: Vec::new(),
                        deferred: VecDeque::new(),
                        subscribe_pending: None,
                        subscribed: None,
                        monitor: monitor::Monitoring::default(),
                        waits: wait::ClientWaits::default(),
                        crossing: VecDeque::new(),
                        joined: VecDeque::new(),
                        writes: VecDeque::new(),
                        tracked: Default::default(),
                        multi_reads: Vec::new(),
                        multi_reads_overflow: false,
                        redirect_after: VecDeque::new(),
                    });
                    self.by_id.insert(id, idx);
                    self.hub.set_live(id, true);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // EMFILE and friends: the pending connection stays queued; try again on
                    // the next event rather than spinning.
                    eprintln!("darner-proxy: accept: {e}");
                    return;
                }
            }
        }
    }

    /// Counts a new client against maxclients; one over it gets Redis's error and is closed.
    fn admit(&mut self, sock: &mut TcpStream) -> bool {
        let Some(admin) = &self.admin else {
            return true;
        };
        let clients = &admin.registry.clients;
        if clients.fetch_add(1, Ordering::Relaxed) >= self.maxclients {
            clients.fetch_sub(1, Ordering::Relaxed);
            // Best effort, as Redis: a fresh socket's buffer takes these few bytes.
            let _ = sock.write(b"-ERR max number of clients reached\r\n");
            self.counters.rejected();
            return false;
        }
        self.counters.accepted();
        true
    }

    /// Closes a client. Its dedicated connections that are clean go back to the pool; one
    /// still blocked, or holding its MULTI or WATCH, is closed, which ends that on the node.
    fn close_client(&mut self, idx: usize) {
        if self.clients.contains(idx) {
            let mut c = self.clients.remove(idx);
            let _ = self.poll.registry().deregister(&mut c.sock);
            self.by_id.remove(&c.id);
            self.hub.set_live(c.id, false);
            if let Some(admin) = &self.admin {
                admin.registry.clients.fetch_sub(1, Ordering::Relaxed);
            }
            for b in c.dedicated {
                let Some(be) = self.backends.get_mut(b) else {
                    continue;
                };
                if be.role
                    == (Role::Dedicated {
                        idx,
                        id: c.id,
                        held: false,
                    })
                    && be.inflight.is_empty()
                {
                    self.release_to_pool(b);
                } else {
                    self.drop_backend(b);
                }
            }
        }
    }

    /// Closes a backend connection without answering anyone (its client is gone).
    fn drop_backend(&mut self, b: usize) {
        if self.backends.contains(b) {
            let mut be = self.backends.remove(b);
            let _ = self.poll.registry().deregister(&mut be.sock);
        }
    }

    /// A dedicated connection whose requests are all answered and that no transaction holds
    /// goes to the idle pool (or is closed when the pool is full).
    fn release_to_pool(&mut self, b: usize) {
        let Some(be) = self.backends.get_mut(b) else {
            return;
        };
        let Role::Dedicated {
            idx,
            id,
            held: false,
        } = be.role
        else {
            return;
        };
        if !be.inflight.is_empty() {
            return;
        }
        if let Some(c) = self.clients.get_mut(idx) {
            if c.id == id {
                c.dedicated.retain(|&d| d != b);
            }
        }
        let pool = self.idle.entry((be.node.clone(), be.resp3)).or_default();
        if pool.len() < MAX_IDLE_DEDICATED {
            be.role = Role::Idle;
            pool.push(b);
        } else {
            self.drop_backend(b);
        }
    }

    /// A connection to `node` of the client's own: from the idle pool, or a new one.
    fn dedicated(&mut self, idx: usize, node: &str, resp3: bool, held: bool) -> io::Result<usize> {
        let id = self.clients[idx].id;
        // One of its own to that node already (an EXEC or BLPOP being answered): what comes
        // next runs after it there.
        let own = self.clients[idx].dedicated.iter().copied().find(|&b| {
            self.backends.get(b).is_some_and(|be| {
                be.node == node
                    && be.resp3 == resp3
                    && be.role
                        == Role::Dedicated {
                            idx,
                            id,
                            held: false,
                        }
            })
        });
        if let Some(b) = own {
            self.backends[b].role = Role::Dedicated { idx, id, held };
            return Ok(b);
        }
        let key = (node.to_string(), resp3);
        let mut found = None;
        while let Some(b) = self.idle.get_mut(&key).and_then(Vec::pop) {
            if self.backends.get(b).is_some_and(|be| be.role == Role::Idle) {
                found = Some(b);
                break;
            }
        }
        let b = match found {
            Some(b) => b,
            None => self.open_backend(node, resp3)?,
        };
        self.backends[b].role = Role::Dedicated { idx, id, held };
        self.clients[idx].dedicated.push(b);
        Ok(b)
    }

    fn client_readable(&mut self, idx: usize, closing: bool) {
        let Some(c) = self.clients.get_mut(idx) else {
            return;
        };
        if c.closing {
            return;
        }
        if c.queue.len() >= MAX_PENDING {
            c.read_paused = true;
            return;
        }
        if c.subscribe_pending.is_some() || c.monitor.starting() || c.waits.blocked {
            // Its bytes wait for the subscription connection, or for MONITOR's `+OK`; none
            // are parsed meanwhile.
            c.read_paused = true;
            return;
        }
        if let Some(b) = c.subscribed {
            // The node reads slower than the client sends: wait for it (`flush_all` resumes).
            if self
                .backends
                .get(b)
                .is_some_and(|be| be.out.len() >= CLIENT_READ_MAX)
            {
                c.read_paused = true;
                return;
            }
        }
        match read_into(&mut c.sock, &mut c.rbuf, CLIENT_READ_MAX, closing) {
            Ok(ReadOutcome::Drained) => c.read_paused = false,
            Ok(ReadOutcome::Full) => c.read_paused = true,
            // A client that closed (or half-closed) its side is gone, as Redis treats it.
            Ok(ReadOutcome::Eof) | Err(_) => return self.close_client(idx),
        }
        if let Some(b) = c.subscribed {
            let bytes = std::mem::take(&mut c.rbuf);
            if let Some(be) = self.backends.get_mut(b) {
                be.out.extend_from_slice(&bytes);
                self.dirty_backends.push(b);
            }
            return;
        }
        self.process_input(idx);
    }

    /// Turns the client's buffered requests into replies and backend requests.
    fn process_input(&mut self, idx: usize) {
        let mut sends: Vec<Outgoing> = Vec::new();
        // A client turned its tracking on: the backend connections must track (BCAST: in
        // that mode) before its next request is sent.
        let mut wants_tracking: Option<bool> = None;
        // Keys dropped from the tracking table for room: their readers are told.
        let mut untracked: Vec<(Vec<u8>, Vec<Reader>)> = Vec::new();
        let mut reset_monitor = false;
        {
            let Some(c) = self.clients.get_mut(idx) else {
                return;
            };
            let mut consumed = 0;
            while !c.closing
                && c.queue.len() < MAX_PENDING
                && !c.monitor.starting()
                && !c.waits.blocked
            {
                let buf = &c.rbuf[consumed..];
                match c.parser.parse(buf, &self.limits) {
                    Ok(Some(req)) if c.monitor.active() => {
                        let args: Vec<&[u8]> = req.args.iter().map(|a| a.as_slice(buf)).collect();
                        match monitor::while_monitoring(&args, &mut c.session, &self.me, &self.map)
                        {
                            monitor::WhileMonitoring::Quit => {
                                c.queue.push_ready(b"+OK\r\n".to_vec(), true);
                                c.closing = true;
                            }
                            monitor::WhileMonitoring::Reset => {
                                // A client as new (RESP2, no name), unauthenticated where the
                                // proxy has a password, as RESET leaves a client of Redis.
                                let id = c.session.id;
                                c.session = Session {
                                    id,
                                    ..Session::default()
                                };
                                c.queue.push_ready(b"+RESET\r\n".to_vec(), false);
                                reset_monitor = true;
                            }
                            monitor::WhileMonitoring::Reply(bytes) => {
                                c.queue.push_ready(bytes, false);
                            }
                        }
                        consumed += req.consumed;
                        c.parser.recycle(req.args);
                        if reset_monitor {
                            break;
                        }
                    }
                    Ok(Some(req)) => {
                        let args: Vec<&[u8]> = req.args.iter().map(|a| a.as_slice(buf)).collect();
                        let resp3_before = c.session.resp3;
                        let in_multi = c.session.tx.multi;
                        // A client in tracking's default mode has its reads' keys recorded
                        // when it can hear of them: in RESP3, or through a REDIRECT (a RESP2
                        // one without has no way to get invalidations: Redis sends it none).
                        let redirecting =
                            c.session.tracking.as_ref().is_some_and(|t| t.redirect != 0);
                        let track_keys =
                            if (resp3_before || redirecting) && tracking::remembers(&c.session) {
                                tracking::read_keys(&args)
                            } else {
                                Vec::new()
                            };
                        let plan = match &self.admin {
                            Some(admin) => {
                                fanout::plan(&args, &mut c.session, &self.me, &self.map, admin)
                            }
                            None => route::plan(&args, &mut c.session, &self.me, &self.map),
                        };
                        // What NOAUTH refused is not a call (Redis counts it as rejected).
                        let counted = self.admin.as_ref().is_none_or(|a| {
                            crate::auth::authenticated(&c.session, a.requirepass.as_deref())
                        });
                        if let Some(name) = metrics::command_name(&args).filter(|_| counted) {
                            self.counters.command(name);
                        }
                        let name = args.first().copied().unwrap_or_default();
                        tracking::after_command(&mut c.session, name, in_multi);
                        match &c.session.tracking {
                            // Only CLIENT TRACKING turns it on.
                            Some(t) if name.eq_ignore_ascii_case(b"client") => {
                                if self.backend_tracking.is_none_or(|b| t.bcast && !b) {
                                    wants_tracking =
                                        Some(t.bcast || wants_tracking.unwrap_or(false));
                                }
                                let me = Reader { idx, id: c.id };
                                if t.bcast && !self.bcast_clients.contains(&me) {
                                    self.bcast_clients.push(me);
                                }
                            }
                            _ => {}
                        }
                        let forwarded = matches!(plan, Plan::Forward { .. });
                        // A read that joins a fill is answered later, or sent later should the
                        // fill be dropped: not behind requests still waiting to be sent (it
                        // would overtake them), nor on a connection of the client's own.
                        let may_join = c.deferred.is_empty() && c.pinned.is_none() && !in_multi;
                        let (plan, writes, joined) = match &mut self.cache {
                            Some(cache) => {
                                let p = cache::plan(
                                    cache,
                                    &self.map,
                                    &args,
                                    plan,
                                    c.session.resp3,
                                    c.writes.is_empty(),
                                    !track_keys.is_empty(),
                                    may_join,
                                );
                                (p.plan, p.writes, p.joined)
                            }
                            None => (plan, false, None),
                        };
                        // A shared connection's reply records the read's keys; a cache hit
                        // records them now. A read anywhere else (a transaction's or blocking
                        // command's connection, which does not track) is not tracked.
                        let tracked_here = match &plan {
                            Plan::Forward { .. } => true,
                            Plan::Reply { .. } => forwarded,
                            _ => false,
                        };
                        match plan {
                            Plan::Reply { bytes, close } => {
                                if forwarded && !track_keys.is_empty() {
                                    // A cache hit: the entry is there because the node
                                    // tracks the key for the thread's connection, which
                                    // will report its next change.
                                    let me = Reader { idx, id: c.id };
                                    for k in &track_keys {
                                        untracked.extend(self.client_tracking.remember(k, me));
                                    }
                                }
                                c.queue.push_ready(bytes, close);
                                if close {
                                    c.closing = true;
                                }
                            }
                            Plan::Forward { parts, merge } => {
                                let n = parts.len();
                                // With the cache on, a RESP2 client's cacheable read fills it
                                // too, on the tracking connection, when nothing of the client's
                                // but such reads is in flight (so it overtakes nothing); its
                                // other requests wait for them. So does a RESP2 redirecting
                                // client's, so that the node tracks it (its other reads go
                                // where nothing tracks them, and are invalidated at once).
                                let cross = !resp3_before
                                    && (self.cache.is_some() || !track_keys.is_empty())
                                    && n == 1
                                    && c.queue.pending() == c.crossing.len()
                                    && c.deferred.is_empty()
                                    && c.pinned.is_none()
                                    && cache::cacheable(&args);
                                let seq = c.queue.push_pending(merge, n);
                                if writes {
                                    c.writes.push_back(seq);
                                }
                                if cross {
                                    c.crossing.push_back(seq);
                                }
                                if !track_keys.is_empty() {
                                    c.tracked.insert(seq);
                                }
                                if joined.is_some() {
                                    c.joined.push_back(seq);
                                }
                                // With the cache on, cacheable reads go to the primary: its
                                // tracking connection keeps their entries coherent, and the
                                // cache, not replicas, takes their load. So do a tracking
                                // client's reads: the primary's connection tracks them.
                                // Such a read still fails over as any read: to the nodes
                                // the policy allows, should the primary fail it.
                                let read = if self.read_policy == ReadPolicy::Master
                                    || !crate::replicas::is_read_only(&args)
                                    || !track_keys.is_empty()
                                {
                                    Placement::Owner
                                } else if self.cache.is_some() && cache::cacheable(&args) {
                                    Placement::PrimaryFirst
                                } else {
                                    Placement::Policy
                                };
                                let out = Outgoing::Parts(seq, parts, resp3_before || cross, read);
                                match joined {
                                    Some(join) => {
                                        self.joins.insert(
                                            join,
                                            JoinWait {
                                                idx,
                                                id: c.id,
                                                seq,
                                                resp3: resp3_before,
                                                out,
                                            },
                                        );
                                    }
                                    None => sends.push(out),
                                }
                            }
                            Plan::Pinned {
                                open,
                                preamble,
                                payload,
                                reply,
                                release,
                            } => {
                                let seq = match reply {
                                    Some(bytes) => {
                                        c.queue.push_ready(bytes, false);
                                        None
                                    }
                                    None => Some(c.queue.push_pending(Merge::Passthrough, 1)),
                                };
                                if let Some(seq) = seq.filter(|_| writes) {
                                    c.writes.push_back(seq);
                                }
                                sends.push(Outgoing::Pinned {
                                    seq,
                                    open,
                                    preamble,
                                    payload,
                                    release,
                                    resp3: resp3_before,
                                });
                            }
                            Plan::Blocking { target, payload } => {
                                let seq = c.queue.push_pending(Merge::Passthrough, 1);
                                if writes {
                                    c.writes.push_back(seq);
                                }
                                sends.push(Outgoing::Blocking(seq, target, payload, resp3_before));
                            }
                            Plan::Subscribe { target } => {
                                // Left unconsumed: it is the first of the bytes passed through.
                                c.parser.recycle(req.args);
                                c.subscribe_pending = Some(target);
                                break;
                            }
                            // What follows waits for its `+OK` (`client_readable`).
                            Plan::Monitor => c.monitor.pending = true,
                            // What follows waits for its reply, as on a node.
                            Plan::Wait {
                                numreplicas,
                                timeout_ms,
                            } => {
                                let seq = c.queue.push_pending(Merge::Passthrough, 1);
                                c.waits.blocked = true;
                                sends.push(Outgoing::Wait(seq, numreplicas, timeout_ms));
                            }
                        }
                        if !track_keys.is_empty() && !tracked_here {
                            if in_multi {
                                if c.multi_reads.len() + track_keys.len() > MAX_MULTI_READS {
                                    c.multi_reads_overflow = true;
                                    c.multi_reads.clear();
                                } else if !c.multi_reads_overflow {
                                    c.multi_reads.extend(track_keys);
                                }
                            } else if redirecting {
                                // Its target is told once the reply is complete.
                                c.redirect_after
                                    .push_back((c.queue.last_seq(), Some(track_keys)));
                            } else {
                                // Told right after the reply not to keep what it read.
                                let keys = tracking::push(Some(&track_keys));
                                c.queue.push_ready(keys, false);
                            }
                        }
                        if name.eq_ignore_ascii_case(b"exec")
                            || name.eq_ignore_ascii_case(b"discard")
                        {
                            let keys = std::mem::take(&mut c.multi_reads);
                            let overflow = std::mem::take(&mut c.multi_reads_overflow);
                            if name.eq_ignore_ascii_case(b"exec") && (overflow || !keys.is_empty())
                            {
                                // After EXEC's reply: the transaction's reads are not tracked.
                                if redirecting {
                                    let keys = (!overflow).then_some(keys);
                                    c.redirect_after.push_back((c.queue.last_seq(), keys));
                                } else {
                                    let push = tracking::push((!overflow).then_some(&keys[..]));
                                    c.queue.push_ready(push, false);
                                }
                            }
                        }
                        consumed += req.consumed;
                        c.parser.recycle(req.args);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        let mut bytes = Vec::new();
                        encode(&Frame::Error(Bytes::from(e.message_bytes())), &mut bytes);
                        c.queue.push_ready(bytes, true);
                        c.closing = true;
                        break;
                    }
                }
            }
            c.rbuf.drain(..consumed);
            c.input_paused =
                !c.closing && c.subscribe_pending.is_none() && c.queue.len() >= MAX_PENDING;
            self.dirty_clients.push(idx);
        }
        if let Some(bcast) = wants_tracking {
            self.want_backend_tracking(bcast);
        }
        for (key, readers) in untracked {
            self.deliver(&readers, Some(&[key]));
        }
        self.release_redirected(idx);
        if reset_monitor {
            self.stop_monitor(idx);
            // What it sent after RESET is parsed as a client's again.
            if let Some(c) = self.clients.get_mut(idx) {
                c.input_paused = true;
            }
            self.resume.push(idx);
        }
        for out in sends {
            self.dispatch(idx, out);
        }
    }

    /// Makes the thread's RESP3 shared connections track (in BCAST mode for `bcast`), now and
    /// when opened. A default-mode connection switched to BCAST goes through `CLIENT TRACKING
    /// off` (Redis refuses to switch otherwise), which forgets what the node tracked for it:
    /// once the switch is answered, its cache entries go and every tracking client is told
    /// to flush (`Owner::Retracked`).
    fn want_backend_tracking(&mut self, bcast: bool) {
        if self.backend_tracking.is_some_and(|b| b || !bcast) {
            return;
        }
        self.backend_tracking = Some(bcast);
        let now = Instant::now();
        let shared: Vec<usize> = self
            .by_node
            .iter()
            .filter(|((_, resp3), _)| *resp3)
            .map(|(_, &b)| b)
            .collect();
        for b in shared {
            let Some(be) = self.backends.get_mut(b) else {
                continue;
            };
            if !be.tracking {
                let owner = if bcast {
                    Owner::Retracked { all: false }
                } else {
                    Owner::Hello
                };
                be.queue_own(owner, &tracking_on(bcast), now);
            } else if bcast && !be.bcast {
                be.queue_own(
                    Owner::Nobody,
                    &encode_request(&["CLIENT", "TRACKING", "off"]),
                    now,
                );
                be.queue_own(Owner::Retracked { all: true }, &tracking_on(true), now);
            }
            be.tracking = true;
            be.bcast = bcast;
            self.dirty_backends.push(b);
        }
        self.bcast_connections();
    }

    /// In BCAST mode, a tracking connection to every primary, whether any client read from it
    /// or not: a BCAST client hears of every node's changes. Called again on each refresh
    /// tick and topology change (a node that failed, a new primary).
    fn bcast_connections(&mut self) {
        if self.backend_tracking != Some(true) {
            return;
        }
        let primaries: Vec<String> = self
            .map
            .primaries()
            .into_iter()
            .map(str::to_string)
            .collect();
        for p in primaries {
            if !self.by_node.contains_key(&(p.clone(), true)) {
                // A node that cannot be reached now is tried again on the next tick.
                let _ = self.backend(&p, true);
            }
        }
    }

    /// Delivers what a backend read brought: per reader, the invalidations taken from the
    /// table in stream order (`untracked`), then BCAST clients' and the null ones (`pushes`).
    /// They go after the replies of the same read, which `handle_replies` queued first.
    fn deliver_pushes(&mut self, pushes: Vec<cache::Push>, untracked: Vec<(Reader, Vec<Vec<u8>>)>) {
        for (r, keys) in untracked {
            self.deliver(&[r], Some(&keys));
        }
        for p in pushes {
            match p {
                cache::Push::Keys(keys) => self.deliver_bcast(keys),
                cache::Push::All => self.deliver_all(false),
                cache::Push::Other => {}
            }
        }
    }

    /// Gives tracking clients an invalidation: of `keys` (`None`: the null one, flush
    /// everything) to `readers`, queued behind their replies not yet out (a client must get
    /// the reply of its read before the invalidation that followed it).
    fn deliver(&mut self, readers: &[Reader], keys: Option<&[Vec<u8>]>) {
        let frame = tracking::push(keys);
        let mut stuck = Vec::new();
        let mut redirects = Vec::new();
        for r in readers {
            let Some(c) = self.clients.get_mut(r.idx).filter(|c| c.id == r.id) else {
                continue;
            };
            let Some(t) = c.session.tracking.as_mut() else {
                continue;
            };
            let frame = if t.redirect != 0 {
                if self.hub.is_live(t.redirect) {
                    redirects.push((t.redirect, c.session.resp3, c.id));
                    continue;
                }
                // Gone: a RESP3 client hears so at each invalidation, a RESP2 one cannot.
                t.broken_redirect = true;
                if !c.session.resp3 {
                    continue;
                }
                tracking::broken_push(t.redirect)
            } else if c.session.resp3 {
                frame.clone()
            } else {
                continue;
            };
            if c.out.len() > SUBSCRIBER_OUT_MAX {
                // It does not read: bounded as a subscriber is (an invalidation cannot be
                // dropped while the client goes on).
                stuck.push(r.idx);
                continue;
            }
            if c.subscribed.is_some() {
                // Its node's bytes are passed through, a whole frame at a time, into `out`.
                c.out.extend_from_slice(&frame);
            } else {
                c.queue.push_ready(frame, false);
            }
            self.dirty_clients.push(r.idx);
        }
        for idx in stuck {
            self.close_client(idx);
        }
        for (target, from_resp3, from) in redirects {
            let r = tracking::Redirected {
                target,
                keys: keys.map(<[Vec<u8>]>::to_vec),
                from_resp3,
                from,
                broken: false,
            };
            if self.hub.thread_of(target) == self.thread as usize {
                self.deliver_redirected(&r);
            } else {
                self.hub.post(r);
            }
        }
    }

    /// An invalidation redirected to a client of this thread. One whose target left after it
    /// was posted (another thread saw the target live) goes nowhere, and its tracking client is
    /// told its redirect is broken, as a node would have at this invalidation.
    fn deliver_redirected(&mut self, r: &tracking::Redirected) {
        let found = self
            .by_id
            .get(&r.target)
            .copied()
            .filter(|&idx| self.clients.get(idx).is_some_and(|c| c.id == r.target));
        let Some(idx) = found else {
            if self.hub.thread_of(r.from) == self.thread as usize {
                self.redirect_broken(r.from, r.target);
            } else {
                self.hub.post(tracking::Redirected {
                    target: r.from,
                    keys: None,
                    from_resp3: r.from_resp3,
                    from: r.target,
                    broken: true,
                });
            }
            return;
        };
        let c = &mut self.clients[idx];
        let subscribed = c.subscribed.is_some();
        let Some(frame) =
            tracking::redirected(r.keys.as_deref(), c.session.resp3, subscribed, r.from_resp3)
        else {
            return;
        };
        if c.out.len() > SUBSCRIBER_OUT_MAX {
            return self.close_client(idx);
        }
        if subscribed {
            // Between two of the node's frames: its bytes come into `out` whole frames only.
            c.out.extend_from_slice(&frame);
        } else {
            c.queue.push_ready(frame, false);
        }
        self.dirty_clients.push(idx);
    }

    /// Tracking client `id` of this thread had an invalidation for its redirect target `gone`,
    /// which had left by the time it came: its redirect is broken (unless it redirects
    /// elsewhere now), and a RESP3 client hears so (as [`Worker::deliver`] does when it finds
    /// the target gone).
    fn redirect_broken(&mut self, id: u64, gone: u64) {
        let Some(&idx) = self.by_id.get(&id) else {
            return;
        };
        let Some(c) = self.clients.get_mut(idx).filter(|c| c.id == id) else {
            return;
        };
        let Some(t) = c.session.tracking.as_mut().filter(|t| t.redirect == gone) else {
            return;
        };
        t.broken_redirect = true;
        if !c.session.resp3 {
            return;
        }
        if c.out.len() > SUBSCRIBER_OUT_MAX {
            return self.close_client(idx);
        }
        let frame = tracking::broken_push(t.redirect);
        if c.subscribed.is_some() {
            c.out.extend_from_slice(&frame);
        } else {
            c.queue.push_ready(frame, false);
        }
        self.dirty_clients.push(idx);
    }

    /// A redirecting client's invalidations of reads nothing tracks, whose replies are now
    /// complete: to its target.
    fn release_redirected(&mut self, idx: usize) {
        let Some(c) = self.clients.get_mut(idx) else {
            return;
        };
        let me = Reader { idx, id: c.id };
        let mut due = Vec::new();
        while let Some((seq, _)) = c.redirect_after.front() {
            if !c.queue.answered(*seq) {
                break;
            }
            if let Some((_, keys)) = c.redirect_after.pop_front() {
                due.push(keys);
            }
        }
        for keys in due {
            self.deliver(&[me], keys.as_deref());
        }
    }

    /// The node's invalidation of `keys` reached the thread: each BCAST client gets those
    /// under its prefixes.
    fn deliver_bcast(&mut self, keys: Vec<Vec<u8>>) {
        if self.bcast_clients.is_empty() {
            return;
        }
        let mut to: HashMap<Reader, Vec<Vec<u8>>> = HashMap::new();
        self.bcast_clients.retain(|r| {
            self.clients.get(r.idx).is_some_and(|c| {
                c.id == r.id && c.session.tracking.as_ref().is_some_and(|t| t.bcast)
            })
        });
        for k in keys {
            for r in &self.bcast_clients {
                if self.clients[r.idx]
                    .session
                    .tracking
                    .as_ref()
                    .is_some_and(|t| t.wants(&k))
                {
                    to.entry(*r).or_default().push(k.clone());
                }
            }
        }
        for (r, keys) in to {
            self.deliver(&[r], Some(&keys));
        }
    }

    /// What the thread's tracking connections tracked is (partly) lost: every tracking client
    /// (`bcast_only`: every BCAST client) is told to flush.
    fn deliver_all(&mut self, bcast_only: bool) {
        if !bcast_only {
            self.client_tracking.clear();
        }
        let all: Vec<Reader> = self
            .clients
            .iter()
            .filter(|(_, c)| {
                c.session
                    .tracking
                    .as_ref()
                    .is_some_and(|t| t.bcast || !bcast_only)
            })
            .map(|(idx, c)| Reader { idx, id: c.id })
            .collect();
        if !all.is_empty() {
            self.deliver(&all, None);
        }
    }

    /// Sends a client's request now, or queues it behind the client's earlier ones: a request
    /// for one of its own connections waits until its requests in flight to the same node on a
    /// shared connection are answered (the new connection could otherwise overtake them: a
    /// WATCH before the SET sent ahead of it), and once one waits, the client's later requests
    /// wait behind it, so they all leave in the order sent.
    fn dispatch(&mut self, idx: usize, out: Outgoing) {
        let Some(c) = self.clients.get(idx) else {
            return;
        };
        if !c.deferred.is_empty() || self.must_wait(idx, &out) {
            self.clients[idx].deferred.push_back(out);
            return;
        }
        self.send_out(idx, out);
    }

    /// Whether `out` goes on a connection of the client's own to a node where the client
    /// still has requests in flight on a shared connection, or follows a RESP2 client's read
    /// still in flight on a tracking connection (`Client::crossing`).
    fn must_wait(&self, idx: usize, out: &Outgoing) -> bool {
        let Some(c) = self.clients.get(idx) else {
            return false;
        };
        if !c.joined.is_empty() {
            // Behind a read waiting for a fill it joined (see `Client::joined`).
            return true;
        }
        if !c.crossing.is_empty() {
            // What follows a RESP2 client's reads on tracking connections waits for them.
            return !matches!(out, Outgoing::Parts(seq, ..) if c.crossing.binary_search(seq).is_ok());
        }
        let node = match out {
            Outgoing::Parts(..) | Outgoing::Wait(..) => return false,
            Outgoing::Pinned { open, .. } => match (c.pinned, open) {
                (Some(b), _) => match self.backends.get(b) {
                    Some(be) => be.node.clone(),
                    None => return false,
                },
                (None, Some(Target::Slot(slot))) => match self.map.owner(*slot) {
                    Some(n) => n.to_string(),
                    None => return false,
                },
                (None, Some(Target::Node(n))) => n.clone(),
                // Keyless: runs on any node, no ordering with the client's keyed requests.
                (None, _) => return false,
            },
            Outgoing::Blocking(_, target, ..) => match target {
                Target::Slot(slot) => match self.map.owner(*slot) {
                    Some(n) => n.to_string(),
                    None => return false,
                },
                Target::Node(n) => n.clone(),
                Target::Any => return false,
            },
        };
        let id = c.id;
        [false, true].iter().any(|&resp3| {
            self.by_node
                .get(&(node.clone(), resp3))
                .and_then(|&b| self.backends.get(b))
                .is_some_and(|be| {
                    be.inflight.iter().any(|f| {
                        matches!(f.owner, Owner::Client { idx: i, id: d, .. } if i == idx && d == id)
                    })
                })
        })
    }

    /// The reads of this thread's clients whose joined fill is over (on any thread): each is
    /// answered with the fill's reply, in its protocol, or, the fill dropped, sent to the
    /// node as an ordinary miss, ahead of the client's requests that waited behind it.
    fn settle_joined(&mut self) {
        let Some(cache) = &mut self.cache else {
            return;
        };
        let joined = cache.take_joined();
        for j in joined {
            let Some(w) = self.joins.remove(&j.id) else {
                continue;
            };
            let Some(c) = self.clients.get_mut(w.idx).filter(|c| c.id == w.id) else {
                continue;
            };
            if let Some(i) = c.joined.iter().position(|&s| s == w.seq) {
                c.joined.remove(i);
            }
            if let Some(cache) = &mut self.cache {
                cache.count_joined(j.reply.is_some());
            }
            let owner = Owner::Client {
                idx: w.idx,
                id: w.id,
                seq: w.seq,
                part: 0,
            };
            match j.reply {
                Some(reply) => self.answer(owner, cache::for_protocol(&reply, w.resp3)),
                None => {
                    // Before what waited behind it (which came after it), after any of the
                    // client's earlier joined reads sent back there already.
                    let at = c
                        .deferred
                        .iter()
                        .position(|o| o.seq().is_none_or(|s| s > w.seq))
                        .unwrap_or(c.deferred.len());
                    c.deferred.insert(at, w.out);
                    self.deferred_ready.push(w.idx);
                }
            }
            if let Some(c) = self.clients.get(w.idx) {
                if !c.deferred.is_empty() {
                    self.deferred_ready.push(w.idx);
                }
            }
        }
    }

    /// Sends what waited in clients' `deferred` queues and may go now.
    fn run_deferred(&mut self) {
        loop {
            let mut ready = std::mem::take(&mut self.deferred_ready);
            if ready.is_empty() {
                return;
            }
            ready.sort_unstable();
            ready.dedup();
            for idx in ready {
                while let Some(front) = self.clients.get(idx).and_then(|c| c.deferred.front()) {
                    if self.must_wait(idx, front) {
                        break;
                    }
                    let out = self.clients[idx].deferred.pop_front().expect("front");
                    self.send_out(idx, out);
                }
            }
        }
    }

    fn send_out(&mut self, idx: usize, out: Outgoing) {
        let id = self.clients[idx].id;
        {
            match out {
                Outgoing::Parts(seq, parts, resp3, read) => {
                    for (part, p) in parts.into_iter().enumerate() {
                        let owner = Owner::Client { idx, id, seq, part };
                        match p.target {
                            Target::Slot(slot) if read == Placement::Policy => {
                                let retry = self.new_read(slot, resp3);
                                self.send_read(owner, p.payload, retry, None)
                            }
                            Target::Slot(slot) if read == Placement::PrimaryFirst => {
                                let retry = self.new_cached_read(slot, resp3);
                                self.send_read(owner, p.payload, retry, None)
                            }
                            target => self.send(owner, target, p.payload, resp3, 0, false),
                        }
                    }
                }
                Outgoing::Pinned {
                    seq,
                    open,
                    preamble,
                    payload,
                    release,
                    resp3,
                } => {
                    let owner = match seq {
                        Some(seq) => Owner::Client {
                            idx,
                            id,
                            seq,
                            part: 0,
                        },
                        None => Owner::Nobody,
                    };
                    self.send_pinned(idx, owner, open, preamble, payload, release, resp3);
                }
                Outgoing::Blocking(seq, target, payload, resp3) => {
                    let owner = Owner::Client {
                        idx,
                        id,
                        seq,
                        part: 0,
                    };
                    self.send_blocking(owner, target, payload, resp3, 0, false);
                }
                Outgoing::Wait(seq, numreplicas, timeout_ms) => {
                    // Sent once every earlier request is answered (`flush_all`): its writes
                    // have then run on their nodes.
                    self.clients[idx].waits.pending = Some((seq, numreplicas, timeout_ms));
                    self.dirty_clients.push(idx);
                }
            }
        }
    }

    /// The primary a target names now.
    fn node_for(&mut self, target: Target) -> Option<String> {
        match target {
            Target::Slot(slot) => self.map.owner(slot).map(str::to_string),
            Target::Node(n) => Some(n),
            Target::Any => {
                let p = self.map.primaries();
                self.any_rr = self.any_rr.wrapping_add(1);
                (!p.is_empty()).then(|| p[self.any_rr % p.len()].to_string())
            }
        }
    }

    /// Sends a transaction's request on the client's pinned connection, taking one (to the
    /// owner of `open`) if it holds none; `release` gives it back after this request.
    #[allow(clippy::too_many_arguments)]
    fn send_pinned(
        &mut self,
        idx: usize,
        owner: Owner,
        open: Option<Target>,
        preamble: Vec<Vec<u8>>,
        payload: Vec<u8>,
        release: bool,
        resp3: bool,
    ) {
        let b = match self.clients[idx].pinned {
            Some(b) => b,
            None => {
                let taken = match open.map(|t| self.node_for(t)) {
                    None => Err(
                        "ERR the transaction's backend connection was lost (darner proxy)"
                            .to_string(),
                    ),
                    Some(None) => Err("CLUSTERDOWN Hash slot not served".to_string()),
                    Some(Some(node)) => self
                        .dedicated(idx, &node, resp3, true)
                        .map_err(|e| format!("ERR upstream {node}: {e}")),
                };
                match taken {
                    Ok(b) => {
                        self.clients[idx].pinned = Some(b);
                        b
                    }
                    Err(msg) => {
                        // What the session counted on being sent is not: EXEC must fail.
                        self.clients[idx].session.tx.connection_lost();
                        return self.answer(owner, error_wire(&msg));
                    }
                }
            }
        };
        // A transaction's queued commands may travel as its preamble, or as requests whose
        // reply went out already (`Owner::Nobody`): each may write.
        let id = self.clients[idx].id;
        for p in preamble.iter().chain([&payload]) {
            self.note_write(idx, id, b, p);
        }
        let Some(be) = self.backends.get_mut(b) else {
            self.clients[idx].pinned = None;
            self.clients[idx].session.tx.connection_lost();
            return self.answer(
                owner,
                error_wire("ERR the transaction's backend connection was lost (darner proxy)"),
            );
        };
        let now = Instant::now();
        for p in preamble {
            be.queue_own(Owner::Nobody, &p, now);
        }
        be.queue(owner, payload, 0, false, now);
        if release {
            if let Role::Dedicated { held, .. } = &mut be.role {
                *held = false;
            }
            self.clients[idx].pinned = None;
        }
        self.dirty_backends.push(b);
    }

    /// Sends a blocking command on a connection of the client's own: the pinned one if it is
    /// to the same node (the client's WATCH is there), else one it already blocks on at that
    /// node (its requests stay in order), else a fresh one.
    fn send_blocking(
        &mut self,
        owner: Owner,
        target: Target,
        payload: Vec<u8>,
        resp3: bool,
        redirects: u8,
        asking: bool,
    ) {
        let Owner::Client { idx, id, .. } = owner else {
            return;
        };
        if self.clients.get(idx).map(|c| c.id) != Some(id) {
            return;
        }
        let Some(node) = self.node_for(target) else {
            return self.answer(owner, error_wire("CLUSTERDOWN Hash slot not served"));
        };
        let c = &self.clients[idx];
        let same = |b: &usize, held: bool| {
            self.backends.get(*b).is_some_and(|be| {
                be.node == node
                    && (held || be.resp3 == resp3)
                    && be.role == Role::Dedicated { idx, id, held }
            })
        };
        let existing = c
            .pinned
            .filter(|b| same(b, true))
            .or_else(|| c.dedicated.iter().copied().find(|b| same(b, false)));
        let b = match existing {
            Some(b) => b,
            None => match self.dedicated(idx, &node, resp3, false) {
                Ok(b) => b,
                Err(e) => {
                    return self.answer(owner, error_wire(&format!("ERR upstream {node}: {e}")))
                }
            },
        };
        self.queue_on(b, owner, payload, redirects, asking, None);
    }

    /// Queues a client's request on backend `b` (after ASKING when `asking`), with its retry
    /// state when it is a read placed by the read policy; a redirect may resend it elsewhere.
    fn queue_on(
        &mut self,
        b: usize,
        owner: Owner,
        payload: Vec<u8>,
        redirects: u8,
        asking: bool,
        read: Option<Box<ReadRetry>>,
    ) {
        if let Owner::Client { idx, id, .. } = owner {
            self.note_write(idx, id, b, &payload);
        }
        let be = &mut self.backends[b];
        let now = Instant::now();
        if asking {
            be.queue_own(Owner::Asking, &encode_request(&["ASKING"]), now);
        }
        // A cacheable read on a tracking connection fills the cache; not one that was
        // redirected (its node may not track it for this connection: ASK) nor the proxy's own.
        let fill = match &mut self.cache {
            Some(cache)
                if be.tracking
                    && redirects == 0
                    && !asking
                    && matches!(owner, Owner::Client { .. }) =>
            {
                cache.fill_for(&payload, Some(&be.node))
            }
            _ => None,
        };
        let ttl = fill.as_ref().map(|f| f.ttl_request());
        be.queue(owner, payload, redirects, true, now);
        if let Some(f) = be.inflight.back_mut() {
            f.fill = fill;
            // On the read, not on the PTTL a fill queues behind it.
            f.read = read;
        }
        if let Some((ticket, pttl)) = ttl {
            // On the same connection, right behind the read: the node runs the two back to
            // back, and any change of the key between them is pushed here before the PTTL's
            // reply (see `Cache::finish_ttl`).
            be.queue_own(Owner::Ttl(ticket), &pttl, now);
        }
        self.dirty_backends.push(b);
    }

    /// Sends one backend request; a request that cannot be sent is answered with the reason.
    fn send(
        &mut self,
        owner: Owner,
        target: Target,
        payload: Vec<u8>,
        resp3: bool,
        redirects: u8,
        asking: bool,
    ) {
        let Some(node) = self.node_for(target) else {
            return self.answer(owner, error_wire("CLUSTERDOWN Hash slot not served"));
        };
        let b = match self.busy_dedicated(&owner, &node, resp3) {
            Some(b) => b,
            None => match self.backend(&node, resp3) {
                Ok(b) => b,
                Err(e) => {
                    return self.answer(owner, error_wire(&format!("ERR upstream {node}: {e}")))
                }
            },
        };
        self.queue_on(b, owner, payload, redirects, asking, None);
    }

    /// A connection of the client's own to `node` with requests still in flight (an EXEC, a
    /// blocked BLPOP): the client's next request to that node follows them there, so it runs
    /// after them, as it would on one connection to a node (on a shared connection it could
    /// overtake them).
    fn busy_dedicated(&self, owner: &Owner, node: &str, resp3: bool) -> Option<usize> {
        let Owner::Client { idx, id, .. } = *owner else {
            return None;
        };
        let c = self.clients.get(idx).filter(|c| c.id == id)?;
        c.dedicated.iter().copied().find(|&b| {
            self.backends
                .get(b)
                .is_some_and(|be| be.node == node && be.resp3 == resp3 && !be.inflight.is_empty())
        })
    }

    /// The shared connection to `node` for `resp3` clients, opened if need be.
    fn backend(&mut self, node: &str, resp3: bool) -> io::Result<usize> {
        if let Some(&b) = self.by_node.get(&(node.to_string(), resp3)) {
            return Ok(b);
        }
        let b = self.open_backend(node, resp3)?;
        self.readonly_on_open(b);
        self.by_node.insert((node.to_string(), resp3), b);
        if let (true, Some(bcast)) = (resp3, self.backend_tracking) {
            // Default mode: the node tracks the keys read on this connection and pushes their
            // invalidations on it, in order with the replies (BCAST: every key's). A node that
            // refuses it (before Redis 6) fails the connection as a refused handshake.
            let be = &mut self.backends[b];
            let owner = if bcast {
                Owner::Retracked { all: false }
            } else {
                Owner::Hello
            };
            be.queue_own(owner, &tracking_on(bcast), Instant::now());
            be.tracking = true;
            be.bcast = bcast;
            self.dirty_backends.push(b);
        }
        Ok(b)
    }

    /// A new connection to `node` (HELLO 3 sent first for `resp3`, AUTH with backend
    /// credentials), shared until told otherwise.
    fn open_backend(&mut self, node: &str, resp3: bool) -> io::Result<usize> {
        let addr = resolve(node)?;
        let mut sock = TcpStream::connect(addr)?;
        let _ = sock.set_nodelay(true);
        let entry = self.backends.vacant_entry();
        let b = entry.key();
        self.poll.registry().register(
            &mut sock,
            backend_token(b),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        let mut be = Backend {
            sock,
            node: node.to_string(),
            resp3,
            connected: false,
            out: Vec::new(),
            rbuf: Vec::new(),
            scanner: ReplyScanner::new(),
            inflight: VecDeque::new(),
            role: Role::Shared,
            tracking: false,
            bcast: false,
        };
        if let Some(hello) = crate::auth::backend_handshake(resp3, self.backend_creds.as_ref()) {
            be.queue_own(Owner::Hello, &hello, Instant::now());
        }
        entry.insert(be);
        Ok(b)
    }

    fn backend_event(&mut self, b: usize, readable: bool, closing: bool) {
        let Some(be) = self.backends.get_mut(b) else {
            return;
        };
        if !be.connected {
            match be.sock.take_error() {
                Ok(Some(e)) | Err(e) => return self.fail_backend(b, &e.to_string()),
                Ok(None) => {}
            }
            match be.sock.peer_addr() {
                Ok(_) => be.connected = true,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
                Err(e) => return self.fail_backend(b, &e.to_string()),
            }
        }
        self.dirty_backends.push(b);
        if !readable {
            return;
        }
        let alive = match read_into(&mut be.sock, &mut be.rbuf, usize::MAX, closing) {
            Ok(outcome) => outcome != ReadOutcome::Eof,
            Err(e) => return self.fail_backend(b, &e.to_string()),
        };
        let mut replies = Vec::new();
        let mut start = 0;
        let mut overflowed = None;
        // What the pushes read here invalidate, for the tracking clients (delivered once the
        // loop lets go of the connection, but each in order with the replies read before it:
        // the clients' reads are recorded as their replies are scanned, below).
        let mut pushes: Vec<cache::Push> = Vec::new();
        let mut untracked: Vec<(Reader, Vec<Vec<u8>>)> = Vec::new();
        // A NOLOOP client's write whose reply was the last frame but pushes: the keys it
        // surely changed, whose pushes now are its own (see `tracking::own_write_keys`).
        let mut own_write: Option<(Reader, Vec<Vec<u8>>)> = None;
        loop {
            match be.scanner.next(&be.rbuf[start..], &self.limits) {
                Ok(Some(n)) => {
                    let reply = be.rbuf[start..start + n].to_vec();
                    start += n;
                    if be.tracking && reply.first() == Some(&b'>') {
                        // Out of band: an invalidation, never the reply to a request. Applied
                        // before the replies read with it, which only drops more fills.
                        if let Ok(Some((frame, _))) = decode(&reply, &self.limits) {
                            let push = cache::invalidation(&frame);
                            if let Some(cache) = &mut self.cache {
                                match &push {
                                    cache::Push::Keys(keys) => {
                                        keys.iter().for_each(|k| cache.invalidate(k))
                                    }
                                    cache::Push::All => cache.flush_node(&be.node),
                                    cache::Push::Other => {}
                                }
                            }
                            match push {
                                cache::Push::Keys(keys) => {
                                    // Handed to the readers recorded so far (not to those
                                    // whose reads come later in this batch).
                                    let mut to: Vec<(Reader, Vec<Vec<u8>>)> = Vec::new();
                                    for k in &keys {
                                        for r in self.client_tracking.take(k) {
                                            // Its own write: its record goes, unsaid.
                                            if own_write
                                                .as_ref()
                                                .is_some_and(|(me, ks)| *me == r && ks.contains(k))
                                            {
                                                continue;
                                            }
                                            to.push((r, vec![k.clone()]));
                                        }
                                    }
                                    untracked.extend(to);
                                    pushes.push(cache::Push::Keys(keys));
                                }
                                cache::Push::All => pushes.push(cache::Push::All),
                                cache::Push::Other => {}
                            }
                        }
                        continue;
                    }
                    own_write = None;
                    match be.inflight.pop_front() {
                        Some(f) => {
                            if let Owner::Client { idx, id, seq, .. } = f.owner {
                                // Pushes right after a write's reply are its own only where
                                // the node tracks in default mode (BCAST pushes come at the
                                // end of the node's event loop, after later replies).
                                let noloop = be.tracking
                                    && !be.bcast
                                    && self.clients.get(idx).is_some_and(|c| {
                                        c.id == id
                                            && c.session
                                                .tracking
                                                .as_ref()
                                                .is_some_and(|t| t.noloop && !t.bcast)
                                    });
                                if noloop {
                                    let keys = cache::request_args(&f.payload)
                                        .map(|a| tracking::own_write_keys(&a, &reply))
                                        .unwrap_or_default();
                                    if !keys.is_empty() {
                                        own_write = Some((Reader { idx, id }, keys));
                                    }
                                }
                                if reply.first() != Some(&b'-') {
                                    if let Some(c) = self
                                        .clients
                                        .get(idx)
                                        .filter(|c| c.id == id && c.tracked.contains(&seq))
                                    {
                                        let keys = cache::request_args(&f.payload)
                                            .map(|a| tracking::read_keys(&a))
                                            .unwrap_or_default();
                                        let me = Reader { idx, id: c.id };
                                        if be.tracking {
                                            for k in &keys {
                                                for (k, rs) in self.client_tracking.remember(k, me)
                                                {
                                                    untracked.extend(
                                                        rs.into_iter()
                                                            .map(|r| (r, vec![k.clone()])),
                                                    );
                                                }
                                            }
                                        } else if !keys.is_empty() {
                                            // Read where nothing tracks it (a connection of the
                                            // client's own): the client is told at once, after
                                            // the reply, not to keep it.
                                            untracked.push((me, keys));
                                        }
                                    }
                                }
                            }
                            replies.push(f.with_reply(reply))
                        }
                        None if matches!(be.role, Role::Monitor { .. }) => {
                            let Role::Monitor { idx, id } = be.role else {
                                unreachable!("matched above")
                            };
                            if let Some(c) = self.clients.get_mut(idx).filter(|c| c.id == id) {
                                if !c.monitor.line(&mut c.out, &reply) {
                                    overflowed = Some(idx);
                                    break;
                                }
                                self.dirty_clients.push(idx);
                            }
                        }
                        None if matches!(be.role, Role::Subscriber { .. }) => {
                            let Role::Subscriber { idx, id } = be.role else {
                                unreachable!("matched above")
                            };
                            if let Some(c) = self.clients.get_mut(idx).filter(|c| c.id == id) {
                                if c.out.len() + reply.len() > SUBSCRIBER_OUT_MAX {
                                    overflowed = Some(idx);
                                    break;
                                }
                                c.out.extend_from_slice(&reply);
                                self.dirty_clients.push(idx);
                            }
                        }
                        None => {
                            be.rbuf.drain(..start);
                            return self.fail_backend(b, "reply to no request");
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    be.rbuf.drain(..start);
                    let msg = format!("bad reply ({})", e.message());
                    self.handle_replies(b, replies);
                    self.deliver_pushes(pushes, untracked);
                    return self.fail_backend(b, &msg);
                }
            }
        }
        be.rbuf.drain(..start);
        self.handle_replies(b, replies);
        self.deliver_pushes(pushes, untracked);
        if let Some(idx) = overflowed {
            // Closing the client closes this connection too.
            return self.close_client(idx);
        }
        if !alive {
            return self.fail_backend(b, "connection closed");
        }
        self.release_to_pool(b);
    }

    fn handle_replies(&mut self, b: usize, replies: Vec<(InFlight, Vec<u8>)>) {
        let (node, resp3, shared) = match self.backends.get(b) {
            Some(be) => (be.node.clone(), be.resp3, be.role == Role::Shared),
            None => return,
        };
        if !replies.is_empty() {
            self.health.success(&node);
        }
        let mut replies = replies.into_iter();
        while let Some((mut f, reply)) = replies.next() {
            let refused = reply.first() == Some(&b'-');
            self.counters.reply(&node, refused, f.sent.elapsed());
            match f.owner {
                Owner::Hello if refused => {
                    // The node refused the proxy's credentials (or HELLO 3): nothing sent on
                    // this connection can succeed, so it fails with the reason, not NOAUTH.
                    let line = reply.split(|&c| c == b'\r').next().unwrap_or_default();
                    let reason = format!(
                        "handshake refused ({})",
                        String::from_utf8_lossy(&line[1..])
                    );
                    // A configuration error to fix: said at most every 10 s per thread.
                    let now = Instant::now();
                    if self
                        .handshake_warned
                        .is_none_or(|t| now >= t + HANDSHAKE_WARN_EVERY)
                    {
                        self.handshake_warned = Some(now);
                        eprintln!("darner-proxy: {node}: {reason}");
                    }
                    // The requests answered in this batch fail with the rest of the
                    // connection's, with the reason (their replies are NOAUTH errors).
                    if let Some(be) = self.backends.get_mut(b) {
                        for (rest, _) in replies.rev() {
                            be.inflight.push_front(rest);
                        }
                    }
                    return self.fail_backend(b, &reason);
                }
                Owner::Retracked { .. } if refused => {
                    return self.fail_backend(b, "CLIENT TRACKING on BCAST refused");
                }
                Owner::Retracked { all: true } => {
                    if let Some(cache) = &mut self.cache {
                        cache.flush_node(&node);
                    }
                    self.deliver_all(false);
                }
                Owner::Retracked { all: false } => self.deliver_all(true),
                Owner::Asking | Owner::Hello | Owner::Nobody => {}
                Owner::MonitorStart { idx, id } => self.monitor_answered(idx, id, &reply),
                Owner::WaitAsk { idx, id, i } => self.wait_answered(idx, id, i, &reply),
                Owner::Probe => self.probe_answered(&node, &reply),
                Owner::Ttl(ticket) => {
                    if let Some(cache) = &mut self.cache {
                        cache.finish_ttl(&ticket, &node, &reply, f.sent);
                    }
                }
                Owner::Topology { shards } => {
                    self.refresh_in_flight = false;
                    let Ok(Some((frame, _))) = decode(&reply, &self.limits) else {
                        continue;
                    };
                    if shards && matches!(frame, Frame::Error(_)) {
                        // A node older than Redis 7 has no CLUSTER SHARDS: ask it the old way.
                        self.use_shards = false;
                        self.refresh(Some(node.clone()));
                        continue;
                    }
                    let map = if shards {
                        SlotMap::from_cluster_shards(&frame, host_of(&node))
                    } else {
                        SlotMap::from_cluster_slots(&frame, host_of(&node))
                    };
                    match map {
                        Ok(m) if !m.primaries().is_empty() => {
                            // Entries are served only while their node owns their slot; a
                            // changed topology is also one to start afresh on. So for
                            // tracking clients: the new owner's connection has not tracked
                            // what they read.
                            if (self.cache.is_some() || self.backend_tracking.is_some())
                                && !cache::same_owners(&m, &self.map)
                            {
                                if let Some(cache) = &mut self.cache {
                                    cache.flush_all();
                                }
                                self.deliver_all(false);
                            }
                            self.map = m;
                            self.topology_replicas(&frame, shards, &node);
                            self.bcast_connections();
                            self.monitor_new_nodes();
                        }
                        Ok(_) => {}
                        Err(e) => eprintln!("darner-proxy: topology from {node}: {e}"),
                    }
                }
                Owner::Client { .. } => {
                    if self.hedged_reply_dropped(&mut f, &reply) {
                        continue;
                    }
                    if let Some(cache) = &mut self.cache {
                        cache.settle(f.fill.take(), &f.payload, &reply);
                    }
                    let f = match self.retry_refused_read(f, &reply, &node) {
                        Some(f) => f,
                        None => continue,
                    };
                    let redirect = match parse_redirect(&reply) {
                        Some(r) if f.redirects < MAX_REDIRECTS => Some(r),
                        _ => None,
                    };
                    if !f.resend {
                        // A transaction is bound to its node: the slot moving away ends it
                        // (the node flags or discards it), with an error the client can act on.
                        let msg = match redirect {
                            Some(Redirect::Moved { slot, node: to }) => {
                                let to = fill_host(to, &node);
                                self.map.assign(slot, slot, &to);
                                self.refresh(Some(to));
                                format!("ERR slot {slot} moved to another node during the transaction, which is discarded; retry it (darner proxy)")
                            }
                            Some(Redirect::Ask { slot, .. }) => format!("ERR slot {slot} is being migrated; the transaction is discarded, retry it (darner proxy)"),
                            None => {
                                self.answer(f.owner, reply);
                                continue;
                            }
                        };
                        self.answer(f.owner, error_wire(&msg));
                        continue;
                    }
                    if redirect.is_none()
                        && reply.starts_with(b"-TRYAGAIN")
                        && f.redirects < MAX_REDIRECTS
                    {
                        self.counters.event(Event::TryAgain);
                        let due = Instant::now() + TRY_AGAIN_AFTER;
                        self.try_again.push((due, shared, f, node.clone(), resp3));
                        continue;
                    }
                    match redirect {
                        Some(Redirect::Moved { slot, node: to }) => {
                            let to = fill_host(to, &node);
                            self.map.assign(slot, slot, &to);
                            self.refresh(Some(to.clone()));
                            self.counters.event(Event::Moved);
                            self.resend(shared, f, to, resp3, false);
                        }
                        Some(Redirect::Ask { node: to, .. }) => {
                            let to = fill_host(to, &node);
                            self.counters.event(Event::Ask);
                            self.resend(shared, f, to, resp3, true);
                        }
                        None => self.answer(f.owner, reply),
                    }
                }
            }
        }
    }

    /// A redirected request, sent again the way it first went (shared or dedicated).
    fn resend(&mut self, shared: bool, f: InFlight, to: String, resp3: bool, asking: bool) {
        let target = Target::Node(to);
        if shared {
            self.send(f.owner, target, f.payload, resp3, f.redirects + 1, asking);
        } else {
            self.send_blocking(f.owner, target, f.payload, resp3, f.redirects + 1, asking);
        }
    }

    /// Sends again the requests answered `-TRYAGAIN` whose wait is over: a read the policy
    /// placed is placed again by it (`replace_tried_again_read`); others go to the node that
    /// answered, after ASKING: that node either owns the slot (a migrating owner checks the
    /// keys again; ASKING changes nothing there) or imports it, where the request is accepted
    /// only after ASKING. A node that no longer does either answers MOVED, which is followed.
    fn resend_tried_again(&mut self) {
        if self.try_again.is_empty() {
            return;
        }
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.try_again)
            .into_iter()
            .partition(|t| t.0 <= now);
        self.try_again = later;
        for (_, shared, f, node, resp3) in due {
            let f = match shared {
                true => match self.replace_tried_again_read(f) {
                    Some(f) => f,
                    None => continue,
                },
                false => f,
            };
            self.resend(shared, f, node, resp3, true);
        }
    }

    /// Gives a client its reply (or part of one).
    fn answer(&mut self, owner: Owner, reply: Vec<u8>) {
        match owner {
            Owner::Client { idx, id, seq, part } => {
                if let Some(c) = self.clients.get_mut(idx) {
                    if c.id == id {
                        let reply = if let Ok(i) = c.crossing.binary_search(&seq) {
                            c.crossing.remove(i);
                            // Read on a RESP3 connection for a request made in RESP2 (a
                            // HELLO 3 after it does not change its reply); only the null
                            // differs (see cache).
                            cache::for_protocol(&reply, false)
                        } else {
                            reply
                        };
                        c.queue.fill(seq, part, reply);
                        if c.queue.answered(seq) {
                            c.tracked.remove(&seq);
                        }
                        while let Some(&w) = c.writes.front() {
                            if !c.queue.answered(w) {
                                break;
                            }
                            c.writes.pop_front();
                        }
                        self.dirty_clients.push(idx);
                        if !c.deferred.is_empty() {
                            self.deferred_ready.push(idx);
                        }
                        if !c.redirect_after.is_empty() {
                            self.release_redirected(idx);
                        }
                    }
                }
            }
            Owner::Topology { .. } => self.refresh_in_flight = false,
            Owner::WaitAsk { idx, id, i } => self.wait_answered(idx, id, i, &reply),
            Owner::Asking
            | Owner::Hello
            | Owner::Nobody
            | Owner::Probe
            | Owner::Ttl(_)
            | Owner::Retracked { .. }
            | Owner::MonitorStart { .. } => {}
        }
    }

    /// Drops a backend connection: every request in flight on it is answered with the reason
    /// (only those: other connections' clients are untouched), and the topology is re-read,
    /// since a node that went away may have been failed over.
    fn fail_backend(&mut self, b: usize, reason: &str) {
        if !self.backends.contains(b) {
            return;
        }
        let mut be = self.backends.remove(b);
        let _ = self.poll.registry().deregister(&mut be.sock);
        if be.tracking {
            // The node's tracking of what was read here ends with the connection.
            if let Some(cache) = &mut self.cache {
                cache.flush_node(&be.node);
            }
            // One that never opened tracked nothing (a node down, tried again each tick in
            // BCAST mode, must not flush every client each time).
            if be.connected {
                self.deliver_all(false);
            }
        }
        let key = (be.node.clone(), be.resp3);
        match be.role {
            Role::Shared => {
                self.by_node.remove(&key);
            }
            Role::Idle => {
                if let Some(pool) = self.idle.get_mut(&key) {
                    pool.retain(|&i| i != b);
                }
            }
            Role::Dedicated { idx, id, .. } => {
                if let Some(c) = self.clients.get_mut(idx).filter(|c| c.id == id) {
                    c.dedicated.retain(|&d| d != b);
                    if c.pinned == Some(b) {
                        c.pinned = None;
                        c.session.tx.connection_lost();
                    }
                }
            }
            Role::Subscriber { idx, id } => {
                // The client's subscriptions were on that node: it goes too (after what it
                // already got), as a client of the node would, and reconnects.
                if let Some(c) = self.clients.get_mut(idx).filter(|c| c.id == id) {
                    c.dedicated.retain(|&d| d != b);
                    c.subscribed = None;
                    c.closing = true;
                    self.dirty_clients.push(idx);
                }
            }
            Role::Monitor { idx, id } => {
                // A node it watched went away: it goes too, as a client of that node would.
                if let Some(c) = self.clients.get_mut(idx).filter(|c| c.id == id) {
                    c.dedicated.retain(|&d| d != b);
                    c.monitor.conns.retain(|&d| d != b);
                    c.monitor.waiting = 0;
                    c.closing = true;
                    self.dirty_clients.push(idx);
                }
            }
        }
        let msg = format!("ERR upstream {}: {reason}", be.node);
        self.counters.failed(&be.node, be.inflight.len() as u64);
        let was_refresh = be
            .inflight
            .iter()
            .any(|f| matches!(f.owner, Owner::Topology { .. }));
        // An idle connection the node closed (its `timeout`) failed nobody; a connection that
        // never opened, or lost requests, counts against the node.
        if !be.connected || !be.inflight.is_empty() {
            self.node_failed(&be.node);
        }
        for f in be.inflight.drain(..) {
            match f.read {
                Some(retry) => self.send_read(f.owner, f.payload, retry, Some(msg.clone())),
                None => self.answer(f.owner, error_wire(&msg)),
            }
        }
        if was_refresh {
            // The topology request itself failed: ask again shortly, not at once, or a
            // cluster refusing every connection (all nodes down, wrong backend password)
            // would be asked in a tight loop of new connections.
            self.next_refresh = self.next_refresh.min(Instant::now() + FAILED_REFRESH_RETRY);
        } else {
            self.refresh(None);
        }
    }

    /// Asks for the topology (from `from`, or the next known primary, or a seed), unless a
    /// request for it is already out.
    fn refresh(&mut self, from: Option<String>) {
        let now = Instant::now();
        if self.refresh_in_flight {
            return;
        }
        let primaries = self.map.primaries();
        self.next_refresh = now
            + if primaries.is_empty() {
                EMPTY_MAP_RETRY.min(self.refresh_interval)
            } else {
                self.refresh_interval
            };
        let node = match from {
            Some(n) => n,
            None => {
                self.any_rr = self.any_rr.wrapping_add(1);
                // An ejected node would only fail the refresh: ask another, if any.
                let asked: Vec<&str> = match primaries
                    .iter()
                    .copied()
                    .filter(|p| !self.health.is_ejected(p))
                    .collect::<Vec<_>>()
                {
                    healthy if !healthy.is_empty() => healthy,
                    _ => primaries,
                };
                if asked.is_empty() {
                    self.seeds[self.any_rr % self.seeds.len()].clone()
                } else {
                    asked[self.any_rr % asked.len()].to_string()
                }
            }
        };
        self.refresh_in_flight = true;
        self.counters.event(Event::TopologyRefresh);
        let shards = self.use_shards;
        self.send(
            Owner::Topology { shards },
            Target::Node(node),
            encode_request(&["CLUSTER", if shards { "SHARDS" } else { "SLOTS" }]),
            false,
            MAX_REDIRECTS,
            false,
        );
    }

    /// Makes a client whose earlier replies are all out a passthrough to a connection of its
    /// own to any primary, or its SSUBSCRIBE's slot's owner (in its protocol), starting with
    /// the (P|S)(UN)SUBSCRIBE left in its
    /// buffer. Nothing of it is in flight elsewhere, so nothing can overtake it.
    fn start_subscription(&mut self, idx: usize) {
        let resp3 = self.clients[idx].session.resp3;
        let id = self.clients[idx].id;
        let target = self.clients[idx]
            .subscribe_pending
            .clone()
            .unwrap_or(Target::Any);
        let Some(node) = self.node_for(target) else {
            let c = &mut self.clients[idx];
            c.subscribe_pending = None;
            c.rbuf.clear();
            c.out
                .extend_from_slice(&error_wire("CLUSTERDOWN Hash slot not served"));
            c.closing = true;
            return;
        };
        let b = match self.open_backend(&node, resp3) {
            Ok(b) => b,
            Err(e) => {
                let c = &mut self.clients[idx];
                c.subscribe_pending = None;
                c.rbuf.clear();
                c.out
                    .extend_from_slice(&error_wire(&format!("ERR upstream {node}: {e}")));
                c.closing = true;
                return;
            }
        };
        let c = &mut self.clients[idx];
        c.subscribe_pending = None;
        c.subscribed = Some(b);
        c.dedicated.push(b);
        let bytes = std::mem::take(&mut c.rbuf);
        let be = &mut self.backends[b];
        be.role = Role::Subscriber { idx, id };
        be.out.extend_from_slice(&bytes);
        self.dirty_backends.push(b);
        // What the client sent after it, unread while this waited, is read now.
        self.resume.push(idx);
    }

    /// Writes what is ready: completed replies to clients, queued requests to backends.
    fn flush_all(&mut self) {
        while !self.dirty_clients.is_empty() || !self.dirty_backends.is_empty() {
            let backends = std::mem::take(&mut self.dirty_backends);
            for b in backends {
                let Some(be) = self.backends.get_mut(b) else {
                    continue;
                };
                if !be.connected || be.out.is_empty() {
                    continue;
                }
                if let Err(e) = flush(&mut be.sock, &mut be.out) {
                    self.fail_backend(b, &e.to_string());
                    continue;
                }
                // A subscriber paused while this connection's queue was full reads again.
                if let Role::Subscriber { idx, .. } = be.role {
                    if be.out.len() < CLIENT_READ_MAX
                        && self.clients.get(idx).is_some_and(|c| c.read_paused)
                    {
                        self.resume.push(idx);
                    }
                }
            }
            let mut clients = std::mem::take(&mut self.dirty_clients);
            clients.sort_unstable();
            clients.dedup();
            for idx in clients {
                let Some(c) = self.clients.get_mut(idx) else {
                    continue;
                };
                if c.queue.drain_ready(&mut c.out) {
                    c.closing = true;
                }
                if c.subscribe_pending.is_some()
                    && !c.closing
                    && c.queue.is_empty()
                    && c.deferred.is_empty()
                {
                    self.start_subscription(idx);
                } else if c.monitor.pending
                    && !c.closing
                    && c.queue.is_empty()
                    && c.deferred.is_empty()
                {
                    self.start_monitor(idx);
                } else if c.waits.pending.is_some() && c.queue.pending() == 1 {
                    let (seq, numreplicas, timeout_ms) = c.waits.pending.take().expect("some");
                    self.start_wait(idx, seq, numreplicas, timeout_ms);
                }
                let Some(c) = self.clients.get_mut(idx) else {
                    continue;
                };
                if !c.out.is_empty() && flush(&mut c.sock, &mut c.out).is_err() {
                    self.close_client(idx);
                    continue;
                }
                if c.closing && c.queue.is_empty() && c.out.is_empty() {
                    self.close_client(idx);
                    continue;
                }
                // Room again after MAX_PENDING, or input left from a full read: next turn.
                if !c.closing && c.queue.len() < MAX_PENDING && (c.input_paused || c.read_paused) {
                    self.resume.push(idx);
                }
            }
        }
    }
}

/// Where a request's parts go on the shared connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placement {
    /// To the slot's owner (writes, and every request under the `master` policy).
    Owner,
    /// A read placed by the read policy, retried on the shard's other nodes.
    Policy,
    /// A cacheable read with the cache on: to the primary first (its tracking connection
    /// fills the cache), then retried as the policy allows.
    PrimaryFirst,
}

/// A backend request decided while a client's input was parsed, sent once it is.
enum Outgoing {
    /// Request `seq`'s parts, on the shared connections (RESP3; where a read goes).
    Parts(u64, Vec<route::Part>, bool, Placement),
    /// A transaction's request (`seq`: none when the proxy answered it itself).
    Pinned {
        seq: Option<u64>,
        open: Option<Target>,
        preamble: Vec<Vec<u8>>,
        payload: Vec<u8>,
        release: bool,
        resp3: bool,
    },
    /// A blocking command.
    Blocking(u64, Target, Vec<u8>, bool),
    /// WAIT (request `seq`): numreplicas, timeout in ms.
    Wait(u64, i64, u64),
}

impl Outgoing {
    /// The client's request it answers (none: a transaction's request the proxy answered).
    fn seq(&self) -> Option<u64> {
        match self {
            Outgoing::Parts(seq, ..) | Outgoing::Blocking(seq, ..) | Outgoing::Wait(seq, ..) => {
                Some(*seq)
            }
            Outgoing::Pinned { seq, .. } => *seq,
        }
    }
}

impl InFlight {
    fn with_reply(self, reply: Vec<u8>) -> (InFlight, Vec<u8>) {
        (self, reply)
    }
}

/// `CLIENT TRACKING on`, in BCAST mode for every key when `bcast`.
fn tracking_on(bcast: bool) -> Vec<u8> {
    if bcast {
        encode_request(&["CLIENT", "TRACKING", "on", "BCAST"])
    } else {
        encode_request(&["CLIENT", "TRACKING", "on"])
    }
}

/// A redirect's `:port` (no host) means the host of the node that sent it.
fn fill_host(to: String, from: &str) -> String {
    match to.strip_prefix(':') {
        Some(port) => format!("{}:{port}", host_of(from)),
        None => to,
    }
}

fn error_wire(msg: &str) -> Vec<u8> {
    let mut v = Vec::new();
    encode(&Frame::Error(Bytes::from(msg.to_string())), &mut v);
    v
}
