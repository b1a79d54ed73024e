//! The proxy's counters: [`Registry`] (shared by the threads), [`Counters`] (what one thread
//! counted), the INFO sections the proxy writes itself and the Prometheus text endpoint.
//!
//! **No lock on the request path.** Each thread counts into [`Counters`] of its own, a plain
//! struct, and adds them to its slot of the registry once per event-loop turn (one uncontended
//! lock for a whole batch of requests), before that turn's replies are written: a client that
//! has seen a reply therefore sees it counted by INFO, whichever thread answers the INFO.
//! Readers (INFO, `/metrics`) lock each thread's slot in turn and add them up.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Upper bounds of the backend latency histogram's buckets, in microseconds (Prometheus's
/// usual spread, 100 µs to 10 s: a proxy hop is well under a millisecond, a stalled node
/// seconds).
pub const LATENCY_BUCKETS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// FNV-1a: the counters' keys are a few short names chosen by the proxy and the cluster, not
/// by clients, so a keyed hash buys nothing here and costs most of the counting (two lookups
/// per request on the hot path).
#[derive(Default)]
pub struct Fnv(u64);

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by names, hashed with [`Fnv`].
pub type NameMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// One backend node's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackendCounters {
    /// Replies received.
    pub replies: u64,
    /// Of those, error replies (`-ERR`, `-MOVED`, ...).
    pub errors: u64,
    /// Requests failed without a reply (connection lost, refused, timed out).
    pub failed: u64,
    /// Requests waiting for a reply now (a gauge, replaced rather than added to).
    pub in_flight: u64,
    /// Sum of the replies' latencies (queued to answered), in microseconds.
    pub latency_us: u64,
    /// Replies by latency: `buckets[i]` counts those at most `LATENCY_BUCKETS_US[i]`; the last
    /// one those above every bound.
    pub buckets: [u64; LATENCY_BUCKETS_US.len() + 1],
}

impl BackendCounters {
    /// Requests sent: answered, failed or waiting.
    pub fn requests(&self) -> u64 {
        self.replies + self.failed + self.in_flight
    }

    /// The bucket bound (µs) under which a fraction `q` of the replies came: an upper bound of
    /// that percentile, to the histogram's resolution; `None` without replies, or when it is
    /// above every bound.
    pub fn percentile_us(&self, q: f64) -> Option<u64> {
        let total: u64 = self.buckets.iter().sum();
        if total == 0 {
            return None;
        }
        let want = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want {
                return LATENCY_BUCKETS_US.get(i).copied();
            }
        }
        None
    }

    fn add(&mut self, o: &BackendCounters) {
        self.replies += o.replies;
        self.errors += o.errors;
        self.failed += o.failed;
        self.in_flight += o.in_flight;
        self.latency_us += o.latency_us;
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
    }
}

/// Something the proxy did on its own to keep clients' requests going while the cluster
/// changes: counted so that an operator can tell a resharding, a failover or a sick node from
/// the proxy's INFO and `/metrics` (how often the slot map was wrong, how often reads detoured).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A `-MOVED` reply followed: the request sent again to the slot's new owner.
    Moved,
    /// A `-ASK` reply followed: the request sent again, after ASKING, to the importing node.
    Ask,
    /// A `-TRYAGAIN` reply (a multi-key request whose keys a resharding has split between two
    /// nodes) answered by sending the request again shortly.
    TryAgain,
    /// A topology request (CLUSTER SHARDS or SLOTS) sent: periodic, after a MOVED or after a
    /// lost connection.
    TopologyRefresh,
    /// A read sent again to another node of its shard after a node failed or refused it.
    ReadRetry,
    /// A node ejected from reads (repeated failures, or a failed probe).
    Ejection,
    /// A probe (ROLE) sent to an ejected node.
    Probe,
    /// A second copy of a slow read sent to another node of its shard (`read-hedge-after`).
    HedgeSent,
    /// A hedged read answered by its second copy first.
    HedgeWon,
}

/// The events' names, in [`Event`]'s order: INFO's fields are `proxy_<name>`, Prometheus's
/// metrics `darner_proxy_<name>_total`.
pub const EVENTS: [(Event, &str, &str); 9] = [
    (Event::Moved, "redirects_moved", "MOVED redirects followed."),
    (Event::Ask, "redirects_ask", "ASK redirects followed."),
    (
        Event::TryAgain,
        "tryagain_retries",
        "Requests sent again after a TRYAGAIN reply.",
    ),
    (
        Event::TopologyRefresh,
        "topology_refreshes",
        "Topology requests (CLUSTER SHARDS or SLOTS) sent.",
    ),
    (
        Event::ReadRetry,
        "read_retries",
        "Reads sent again to another node of their shard.",
    ),
    (
        Event::Ejection,
        "node_ejections",
        "Nodes ejected from reads after repeated failures or a failed probe.",
    ),
    (Event::Probe, "node_probes", "Probes sent to ejected nodes."),
    (
        Event::HedgeSent,
        "read_hedges",
        "Second copies of slow reads sent to another node of their shard.",
    ),
    (
        Event::HedgeWon,
        "read_hedges_won",
        "Hedged reads answered by their second copy first.",
    ),
];

/// What one thread counted (or, summed, the whole proxy).
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Client connections accepted.
    pub connections_received: u64,
    /// Client connections refused (maxclients).
    pub rejected_connections: u64,
    /// Commands by name (`get`, `client|id`), as Redis's commandstats.
    pub commands: NameMap<&'static str, u64>,
    /// Per backend node (`host:port`).
    pub backends: NameMap<String, BackendCounters>,
    /// The shared client cache's hits, misses, evictions and invalidations.
    pub cache: crate::cache::CacheStats,
    /// What the proxy did about the cluster's changes, by kind.
    pub events: [u64; EVENTS.len()],
    /// Something was counted since the last [`Registry::publish`].
    dirty: bool,
}

impl Counters {
    /// A command received from a client.
    pub fn command(&mut self, name: &'static str) {
        *self.commands.entry(name).or_insert(0) += 1;
        self.dirty = true;
    }

    /// A connection accepted.
    pub fn accepted(&mut self) {
        self.connections_received += 1;
        self.dirty = true;
    }

    /// A connection refused.
    pub fn rejected(&mut self) {
        self.rejected_connections += 1;
        self.dirty = true;
    }

    /// Something the proxy did about the cluster (see [`Event`]).
    pub fn event(&mut self, e: Event) {
        self.events[e as usize] += 1;
        self.dirty = true;
    }

    /// How many `e` were counted.
    pub fn events_of(&self, e: Event) -> u64 {
        self.events[e as usize]
    }

    fn backend(&mut self, node: &str) -> &mut BackendCounters {
        self.dirty = true;
        // The key is cloned only on a node's first reply of a turn, not per reply.
        if !self.backends.contains_key(node) {
            self.backends
                .insert(node.to_string(), BackendCounters::default());
        }
        self.backends.get_mut(node).expect("inserted")
    }

    /// A reply from `node`, `waited` after its request was queued.
    pub fn reply(&mut self, node: &str, error: bool, waited: Duration) {
        let us = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
        let b = self.backend(node);
        b.replies += 1;
        b.errors += u64::from(error);
        b.latency_us = b.latency_us.saturating_add(us);
        let i = LATENCY_BUCKETS_US.partition_point(|&bound| bound < us);
        b.buckets[i] += 1;
    }

    /// What the thread's cache counted.
    pub fn cache(&mut self, stats: crate::cache::CacheStats) {
        if stats.any() {
            self.cache.add(&stats);
            self.dirty = true;
        }
    }

    /// `n` requests to `node` failed without a reply.
    pub fn failed(&mut self, node: &str, n: u64) {
        if n > 0 {
            self.backend(node).failed += n;
        }
    }

    fn add(&mut self, o: &Counters) {
        self.connections_received += o.connections_received;
        self.rejected_connections += o.rejected_connections;
        self.cache.add(&o.cache);
        for (a, b) in self.events.iter_mut().zip(&o.events) {
            *a += b;
        }
        for (k, v) in &o.commands {
            *self.commands.entry(k).or_insert(0) += v;
        }
        for (k, v) in &o.backends {
            match self.backends.get_mut(k) {
                Some(b) => b.add(v),
                None => {
                    self.backends.insert(k.clone(), v.clone());
                }
            }
        }
    }

    /// Commands processed.
    pub fn total_commands(&self) -> u64 {
        self.commands.values().sum()
    }
}

/// Everything the threads share: their published counters, the connected-clients count.
#[derive(Debug)]
pub struct Registry {
    started: Instant,
    threads: Vec<Mutex<Counters>>,
    /// Client connections open now, over every thread (maxclients is for the whole proxy).
    pub clients: AtomicUsize,
    /// The port clients connect to (INFO's tcp_port), once bound.
    pub port: AtomicU64,
}

impl Registry {
    /// A registry for `threads` threads.
    pub fn new(threads: usize) -> Arc<Registry> {
        Arc::new(Registry {
            started: Instant::now(),
            threads: (0..threads.max(1))
                .map(|_| Mutex::new(Counters::default()))
                .collect(),
            clients: AtomicUsize::new(0),
            port: AtomicU64::new(0),
        })
    }

    /// Adds what thread `t` counted since its last call to its total and starts `local`
    /// afresh; `in_flight` replaces the thread's in-flight gauges (node, requests).
    pub fn publish(&self, t: usize, local: &mut Counters, in_flight: &[(&str, u64)]) {
        if !local.dirty {
            return;
        }
        let Some(slot) = self.threads.get(t) else {
            return;
        };
        let mut total = slot.lock().unwrap_or_else(|p| p.into_inner());
        // The gauge is the thread's current figure, not a sum over turns.
        for b in total.backends.values_mut() {
            b.in_flight = 0;
        }
        total.add(local);
        for &(node, n) in in_flight {
            match total.backends.get_mut(node) {
                Some(b) => b.in_flight += n,
                None => {
                    total.backends.insert(
                        node.to_string(),
                        BackendCounters {
                            in_flight: n,
                            ..BackendCounters::default()
                        },
                    );
                }
            }
        }
        local.commands.clear();
        local.backends.clear();
        local.connections_received = 0;
        local.rejected_connections = 0;
        local.cache = Default::default();
        local.events = [0; EVENTS.len()];
        local.dirty = false;
    }

    /// The whole proxy's counters.
    pub fn snapshot(&self) -> Counters {
        let mut sum = Counters::default();
        for t in &self.threads {
            sum.add(&t.lock().unwrap_or_else(|p| p.into_inner()));
        }
        sum
    }

    /// Seconds since start.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }
}

/// What INFO's proxy sections show besides the counters.
#[derive(Clone, Debug)]
pub struct InfoContext {
    /// Event-loop threads.
    pub threads: usize,
    /// maxclients.
    pub maxclients: usize,
    /// The Redis version the proxy reports (as HELLO does).
    pub redis_version: &'static str,
}

/// The proxy's own INFO sections, in Redis's order, that `wanted` asks for (`None`: the
/// default set); the keyspace section is not among them (it comes from the backends).
pub fn info_sections(reg: &Registry, ctx: &InfoContext, wanted: &Sections) -> String {
    let c = reg.snapshot();
    let mut out: Vec<String> = Vec::new();
    let mut section = |name: &str, body: String| out.push(format!("# {name}\r\n{body}"));
    if wanted.has("server") {
        let up = reg.uptime().as_secs();
        section(
            "Server",
            format!(
                "redis_version:{}\r\ndarner_proxy_version:{}\r\nredis_mode:cluster\r\n\
                 process_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{up}\r\n\
                 uptime_in_days:{}\r\nio_threads_active:{}\r\n",
                ctx.redis_version,
                env!("CARGO_PKG_VERSION"),
                std::process::id(),
                reg.port.load(Ordering::Relaxed),
                up / 86_400,
                ctx.threads,
            ),
        );
    }
    if wanted.has("clients") {
        section(
            "Clients",
            format!(
                "connected_clients:{}\r\nmaxclients:{}\r\n",
                reg.clients.load(Ordering::Relaxed),
                ctx.maxclients
            ),
        );
    }
    if wanted.has("stats") {
        section(
            "Stats",
            format!(
                "total_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
                 rejected_connections:{}\r\n",
                c.connections_received,
                c.total_commands(),
                c.rejected_connections
            ),
        );
    }
    if wanted.has("proxy") {
        let backends: BTreeMap<&String, &BackendCounters> = c.backends.iter().collect();
        let mut body = String::new();
        for (e, name, _) in EVENTS {
            body.push_str(&format!("proxy_{name}:{}\r\n", c.events_of(e)));
        }
        body.push_str(&format!("proxy_backends:{}\r\n", backends.len()));
        for (i, (node, b)) in backends.into_iter().enumerate() {
            let avg = if b.replies > 0 {
                b.latency_us as f64 / b.replies as f64
            } else {
                0.0
            };
            // -1: no reply yet, or slower than the histogram's last bound.
            let pct = |q| b.percentile_us(q).map_or(-1, |v| v as i64);
            body.push_str(&format!(
                "backend{i}:addr={node},requests={},replies={},errors={},failed={},\
                 in_flight={},latency_usec={},latency_avg_usec={avg:.2},\
                 latency_p50_usec={},latency_p99_usec={}\r\n",
                b.requests(),
                b.replies,
                b.errors,
                b.failed,
                b.in_flight,
                b.latency_us,
                pct(0.5),
                pct(0.99),
            ));
        }
        body.push_str(&format!(
            "cache_hits:{}\r\ncache_misses:{}\r\ncache_evictions:{}\r\n\
             cache_invalidations:{}\r\ncache_joins:{}\r\n",
            c.cache.hits, c.cache.misses, c.cache.evictions, c.cache.invalidations, c.cache.joins
        ));
        section("Proxy", body);
    }
    if wanted.has("commandstats") {
        let cmds: BTreeMap<&&str, &u64> = c.commands.iter().collect();
        let body: String = cmds
            .into_iter()
            .map(|(name, calls)| format!("cmdstat_{name}:calls={calls}\r\n"))
            .collect();
        section("Commandstats", body);
    }
    out.join("\r\n")
}

/// Which INFO sections a request names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sections {
    names: Vec<String>,
    all: bool,
    default: bool,
}

/// The sections INFO shows without arguments (Redis's default set, of those the proxy has).
const DEFAULT_SECTIONS: [&str; 5] = ["server", "clients", "stats", "proxy", "keyspace"];

impl Sections {
    /// INFO's arguments (after the command name), as Redis 7 reads them: any number of section
    /// names, `default`, `all` (everything but the module sections) or `everything`.
    pub fn parse(args: &[&[u8]]) -> Sections {
        let names: Vec<String> = args
            .iter()
            .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
            .collect();
        let all = names.iter().any(|n| n == "all" || n == "everything");
        let default = names.is_empty() || names.iter().any(|n| n == "default");
        Sections {
            names,
            all,
            default,
        }
    }

    /// Whether the section is asked for.
    pub fn has(&self, section: &str) -> bool {
        self.all
            || (self.default && DEFAULT_SECTIONS.contains(&section))
            || self.names.iter().any(|n| n == section)
    }
}

/// The Prometheus text exposition of the counters.
pub fn prometheus(reg: &Registry, ctx: &InfoContext) -> String {
    let c = reg.snapshot();
    let mut o = String::new();
    let line = |o: &mut String, name: &str, kind: &str, help: &str, body: String| {
        o.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{body}"
        ));
    };
    line(
        &mut o,
        "darner_proxy_connected_clients",
        "gauge",
        "Client connections open.",
        format!(
            "darner_proxy_connected_clients {}\n",
            reg.clients.load(Ordering::Relaxed)
        ),
    );
    line(
        &mut o,
        "darner_proxy_maxclients",
        "gauge",
        "Most client connections accepted.",
        format!("darner_proxy_maxclients {}\n", ctx.maxclients),
    );
    line(
        &mut o,
        "darner_proxy_uptime_seconds",
        "gauge",
        "Seconds since the proxy started.",
        format!(
            "darner_proxy_uptime_seconds {}\n",
            reg.uptime().as_secs_f64()
        ),
    );
    line(
        &mut o,
        "darner_proxy_connections_received_total",
        "counter",
        "Client connections accepted.",
        format!(
            "darner_proxy_connections_received_total {}\n",
            c.connections_received
        ),
    );
    line(
        &mut o,
        "darner_proxy_rejected_connections_total",
        "counter",
        "Client connections refused (maxclients).",
        format!(
            "darner_proxy_rejected_connections_total {}\n",
            c.rejected_connections
        ),
    );
    for (e, name, help) in EVENTS {
        let name = format!("darner_proxy_{name}_total");
        let body = format!("{name} {}\n", c.events_of(e));
        line(&mut o, &name, "counter", help, body);
    }
    let cmds: BTreeMap<&&str, &u64> = c.commands.iter().collect();
    line(
        &mut o,
        "darner_proxy_commands_total",
        "counter",
        "Client commands by name.",
        cmds.into_iter()
            .map(|(n, v)| format!("darner_proxy_commands_total{{cmd=\"{n}\"}} {v}\n"))
            .collect(),
    );
    for (name, help, v) in [
        (
            "darner_proxy_cache_hits_total",
            "Requests answered from the shared cache.",
            c.cache.hits,
        ),
        (
            "darner_proxy_cache_misses_total",
            "Cacheable requests sent to a backend.",
            c.cache.misses,
        ),
        (
            "darner_proxy_cache_evictions_total",
            "Cache entries dropped for room.",
            c.cache.evictions,
        ),
        (
            "darner_proxy_cache_invalidations_total",
            "Cache entries or fills dropped because their key changed or a node was lost.",
            c.cache.invalidations,
        ),
        (
            "darner_proxy_cache_joins_total",
            "Cache misses answered by a fill of the same request in flight (counted as hits).",
            c.cache.joins,
        ),
    ] {
        line(&mut o, name, "counter", help, format!("{name} {v}\n"));
    }
    let backends: BTreeMap<&String, &BackendCounters> = c.backends.iter().collect();
    let per = |f: &dyn Fn(&BackendCounters) -> String, name: &str| -> String {
        backends
            .iter()
            .map(|(n, b)| format!("{name}{{backend=\"{}\"}} {}\n", escape(n), f(b)))
            .collect()
    };
    for (name, kind, help, f) in [
        (
            "darner_proxy_backend_requests_total",
            "counter",
            "Requests sent to the backend node.",
            &(|b: &BackendCounters| b.requests().to_string())
                as &dyn Fn(&BackendCounters) -> String,
        ),
        (
            "darner_proxy_backend_errors_total",
            "counter",
            "Error replies from the backend node.",
            &|b: &BackendCounters| b.errors.to_string(),
        ),
        (
            "darner_proxy_backend_failed_total",
            "counter",
            "Requests to the backend node failed without a reply (connection lost, timeout).",
            &|b: &BackendCounters| b.failed.to_string(),
        ),
        (
            "darner_proxy_backend_in_flight",
            "gauge",
            "Requests waiting for the backend node's reply.",
            &|b: &BackendCounters| b.in_flight.to_string(),
        ),
    ] {
        line(&mut o, name, kind, help, per(f, name));
    }
    let name = "darner_proxy_backend_latency_seconds";
    let mut body = String::new();
    for (n, b) in &backends {
        let n = escape(n);
        let mut cum = 0;
        for (i, bound) in LATENCY_BUCKETS_US.iter().enumerate() {
            cum += b.buckets[i];
            body.push_str(&format!(
                "{name}_bucket{{backend=\"{n}\",le=\"{}\"}} {cum}\n",
                *bound as f64 / 1e6
            ));
        }
        body.push_str(&format!(
            "{name}_bucket{{backend=\"{n}\",le=\"+Inf\"}} {}\n",
            b.replies
        ));
        body.push_str(&format!(
            "{name}_sum{{backend=\"{n}\"}} {}\n",
            b.latency_us as f64 / 1e6
        ));
        body.push_str(&format!("{name}_count{{backend=\"{n}\"}} {}\n", b.replies));
    }
    line(
        &mut o,
        name,
        "histogram",
        "Backend reply latency, from queueing the request to its reply.",
        body,
    );
    o
}

/// A label value as the exposition format wants it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The name a request counts under in commandstats (`get`, `client|id`, `cluster|slots`), as
/// Redis names them; `None` for an unknown command (Redis counts those as errors only).
pub fn command_name(args: &[&[u8]]) -> Option<&'static str> {
    let name = args.first()?;
    let Some(top) = darner_commands::lookup(name) else {
        // CLUSTER is not in the shared table; the proxy answers these subcommands itself.
        if !name.eq_ignore_ascii_case(b"cluster") {
            return None;
        }
        let sub = args.get(1)?;
        return [
            "cluster|slots",
            "cluster|shards",
            "cluster|nodes",
            "cluster|info",
            "cluster|myid",
            "cluster|keyslot",
            "cluster|countkeysinslot",
            "cluster|getkeysinslot",
        ]
        .into_iter()
        .find(|full| full.as_bytes()[8..].eq_ignore_ascii_case(sub));
    };
    if top.is_container() {
        return darner_commands::lookup_subcommand(top, args.get(1)?).map(|s| s.full_name);
    }
    Some(top.full_name)
}

/// Longest HTTP request head read from a scraper, terminator included: a Prometheus scrape's
/// head is a few hundred bytes, and the buffer never grows past this, whatever a client sends.
pub const MAX_HTTP_HEAD: usize = 8 * 1024;

/// How long a scraper may take to send its whole request head. A deadline for the whole head
/// rather than for each read: the endpoint answers one connection at a time, so a client
/// trickling a byte per read timeout would otherwise hold it for hours.
const HTTP_HEAD_DEADLINE: Duration = Duration::from_secs(2);

/// What an HTTP request head asked of the endpoint, and so how it is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpAnswer {
    /// `GET /metrics` (any query string): 200 and the metrics.
    Metrics,
    /// `GET` of another path: 404.
    NotFound,
    /// Another method: 405.
    MethodNotAllowed,
    /// A request line that is not `METHOD SP target SP HTTP/version`, or a stream that ended
    /// before its head did: 400.
    BadRequest,
    /// No end of head (an empty line) within [`MAX_HTTP_HEAD`] bytes: 431.
    TooLarge,
    /// The head did not arrive within the deadline: 408.
    Timeout,
}

impl HttpAnswer {
    fn status(self) -> &'static str {
        match self {
            HttpAnswer::Metrics => "200 OK",
            HttpAnswer::NotFound => "404 Not Found",
            HttpAnswer::MethodNotAllowed => "405 Method Not Allowed",
            HttpAnswer::BadRequest => "400 Bad Request",
            HttpAnswer::TooLarge => "431 Request Header Fields Too Large",
            HttpAnswer::Timeout => "408 Request Timeout",
        }
    }
}

/// An HTTP request head read from a stream in pieces of any size (sans I/O: the caller reads,
/// this decides). The answer depends only on the bytes, never on how they were cut, and the
/// buffer holds at most [`MAX_HTTP_HEAD`] bytes; what follows the head (a body, a pipelined
/// request) is ignored, since the endpoint answers one request and closes.
#[derive(Debug, Default)]
pub struct HttpHead {
    buf: Vec<u8>,
    answer: Option<HttpAnswer>,
}

impl HttpHead {
    /// An empty head.
    pub fn new() -> HttpHead {
        HttpHead::default()
    }

    /// Takes the next bytes of the stream; the answer once the head is complete or refused
    /// (then further bytes change nothing).
    pub fn feed(&mut self, bytes: &[u8]) -> Option<HttpAnswer> {
        if self.answer.is_some() {
            return self.answer;
        }
        // Only bytes that can still belong to the head are kept, so a head that ends within
        // the limit is found whatever arrives with its last piece.
        let take = bytes.len().min(MAX_HTTP_HEAD - self.buf.len());
        // The terminator may straddle the previous piece: look again at its last 3 bytes.
        let from = self.buf.len().saturating_sub(3);
        self.buf.extend_from_slice(&bytes[..take]);
        if let Some(at) = self.buf[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            self.answer = Some(answer_for(&self.buf[..from + at]));
        } else if self.buf.len() == MAX_HTTP_HEAD {
            self.answer = Some(HttpAnswer::TooLarge);
        }
        self.answer
    }

    /// The answer when the stream has ended: the head's, or [`HttpAnswer::BadRequest`] for a
    /// head cut short.
    pub fn at_eof(&self) -> HttpAnswer {
        self.answer.unwrap_or(HttpAnswer::BadRequest)
    }

    /// Bytes held.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

/// The answer to a complete head (without its final empty line).
fn answer_for(head: &[u8]) -> HttpAnswer {
    let line = match head.windows(2).position(|w| w == b"\r\n") {
        Some(end) => &head[..end],
        None => head,
    };
    let mut words = line.split(|&c| c == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return HttpAnswer::BadRequest;
    };
    if method.is_empty() || target.is_empty() || !version.starts_with(b"HTTP/") {
        return HttpAnswer::BadRequest;
    }
    if method != b"GET" {
        return HttpAnswer::MethodNotAllowed;
    }
    let path = target.split(|&c| c == b'?').next().unwrap_or_default();
    if path == b"/metrics" {
        HttpAnswer::Metrics
    } else {
        HttpAnswer::NotFound
    }
}

/// Serves `GET /metrics` on `listener`, one connection at a time, until the process ends (a
/// thread of its own: scrapes are rare, and the event loops never wait for them).
pub fn serve_http(listener: TcpListener, reg: Arc<Registry>, ctx: InfoContext) {
    serve_http_with(listener, reg, ctx, HTTP_HEAD_DEADLINE)
}

/// [`serve_http`] with the head's deadline given (tests use a short one).
fn serve_http_with(
    listener: TcpListener,
    reg: Arc<Registry>,
    ctx: InfoContext,
    head_deadline: Duration,
) {
    for conn in listener.incoming() {
        let Ok(sock) = conn else { continue };
        // A scraper that stops reading holds the endpoint for at most this long.
        let _ = sock.set_write_timeout(Some(head_deadline));
        let _ = answer_http(sock, &reg, &ctx, head_deadline);
    }
}

fn answer_http(
    mut sock: TcpStream,
    reg: &Registry,
    ctx: &InfoContext,
    head_deadline: Duration,
) -> io::Result<()> {
    let deadline = Instant::now() + head_deadline;
    let mut head = HttpHead::new();
    let mut buf = [0u8; 1024];
    let answer = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break HttpAnswer::Timeout;
        }
        sock.set_read_timeout(Some(left))?;
        let n = match sock.read(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                break HttpAnswer::Timeout
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break head.at_eof();
        }
        if let Some(answer) = head.feed(&buf[..n]) {
            break answer;
        }
    };
    let body = match answer {
        HttpAnswer::Metrics => prometheus(reg, ctx),
        HttpAnswer::NotFound => "not found; try /metrics\n".to_string(),
        _ => String::new(),
    };
    respond(&mut sock, answer, &body)
}

fn respond(sock: &mut TcpStream, answer: HttpAnswer, body: &str) -> io::Result<()> {
    let allow = if answer == HttpAnswer::MethodNotAllowed {
        "Allow: GET\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         {allow}Content-Length: {}\r\nConnection: close\r\n\r\n",
        answer.status(),
        body.len()
    );
    sock.write_all(head.as_bytes())?;
    sock.write_all(body.as_bytes())?;
    sock.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> InfoContext {
        InfoContext {
            threads: 2,
            maxclients: 10,
            redis_version: "7.4.0",
        }
    }

    #[test]
    fn threads_add_up_and_gauges_replace() {
        let reg = Registry::new(2);
        let mut a = Counters::default();
        a.command("get");
        a.command("get");
        a.reply("n:1", false, Duration::from_micros(150));
        a.reply("n:1", true, Duration::from_secs(20));
        reg.publish(0, &mut a, &[("n:1", 3)]);
        assert!(a.commands.is_empty() && a.backends.is_empty());
        let mut b = Counters::default();
        b.command("set");
        b.failed("n:1", 2);
        reg.publish(1, &mut b, &[]);
        let s = reg.snapshot();
        assert_eq!(s.commands["get"], 2);
        assert_eq!(s.total_commands(), 3);
        let n = &s.backends["n:1"];
        assert_eq!((n.replies, n.errors, n.failed, n.in_flight), (2, 1, 2, 3));
        assert_eq!(n.requests(), 7);
        assert_eq!(n.buckets[1], 1, "150 µs is in the 250 µs bucket");
        assert_eq!(
            n.buckets[LATENCY_BUCKETS_US.len()],
            1,
            "20 s is above them all"
        );
        assert_eq!(n.percentile_us(0.5), Some(250));
        assert_eq!(n.percentile_us(0.99), None, "above every bound");
        assert_eq!(BackendCounters::default().percentile_us(0.5), None);
        // Thread 0's next turn: nothing in flight any more.
        a.command("get");
        reg.publish(0, &mut a, &[]);
        assert_eq!(reg.snapshot().backends["n:1"].in_flight, 0);
    }

    #[test]
    fn info_and_prometheus_texts() {
        let reg = Registry::new(1);
        let mut a = Counters::default();
        a.command("client|id");
        a.reply("h:1", false, Duration::from_millis(1));
        reg.publish(0, &mut a, &[]);
        let text = info_sections(&reg, &ctx(), &Sections::parse(&[]));
        assert!(text.starts_with("# Server\r\n"), "{text}");
        assert!(text.contains("\r\n\r\n# Clients\r\nconnected_clients:0\r\nmaxclients:10\r\n"));
        assert!(text.contains("backend0:addr=h:1,requests=1,replies=1,errors=0"));
        assert!(
            !text.contains("cmdstat"),
            "commandstats is not a default section"
        );
        let text = info_sections(&reg, &ctx(), &Sections::parse(&[b"commandstats"]));
        assert_eq!(text, "# Commandstats\r\ncmdstat_client|id:calls=1\r\n");
        assert!(Sections::parse(&[b"ALL"]).has("commandstats"));
        assert!(!Sections::parse(&[b"server"]).has("keyspace"));
        let p = prometheus(&reg, &ctx());
        assert!(p.contains("darner_proxy_commands_total{cmd=\"client|id\"} 1\n"));
        assert!(p.contains(
            "darner_proxy_backend_latency_seconds_bucket{backend=\"h:1\",le=\"0.001\"} 1\n"
        ));
        assert!(p.contains(
            "darner_proxy_backend_latency_seconds_bucket{backend=\"h:1\",le=\"0.0005\"} 0\n"
        ));
        assert!(p.contains("darner_proxy_backend_latency_seconds_count{backend=\"h:1\"} 1\n"));
    }

    #[test]
    fn events_add_up_over_threads_and_show_in_info_and_prometheus() {
        let reg = Registry::new(2);
        let mut a = Counters::default();
        a.event(Event::Moved);
        a.event(Event::Ask);
        a.event(Event::Ask);
        reg.publish(0, &mut a, &[]);
        assert_eq!(a.events_of(Event::Ask), 0, "published counts start afresh");
        let mut b = Counters::default();
        b.event(Event::Ask);
        b.event(Event::TopologyRefresh);
        b.event(Event::Probe);
        reg.publish(1, &mut b, &[]);
        // A turn that counted only an event still publishes it.
        a.event(Event::Ejection);
        a.event(Event::HedgeSent);
        a.event(Event::HedgeSent);
        a.event(Event::HedgeWon);
        reg.publish(0, &mut a, &[]);
        let text = info_sections(&reg, &ctx(), &Sections::parse(&[b"proxy"]));
        for want in [
            "proxy_redirects_moved:1\r\n",
            "proxy_redirects_ask:3\r\n",
            "proxy_tryagain_retries:0\r\n",
            "proxy_topology_refreshes:1\r\n",
            "proxy_read_retries:0\r\n",
            "proxy_node_ejections:1\r\n",
            "proxy_node_probes:1\r\n",
            "proxy_read_hedges:2\r\n",
            "proxy_read_hedges_won:1\r\n",
        ] {
            assert!(text.contains(want), "{want} not in {text}");
        }
        let p = prometheus(&reg, &ctx());
        assert!(p.contains("# TYPE darner_proxy_redirects_ask_total counter\n"));
        assert!(p.contains("\ndarner_proxy_redirects_ask_total 3\n"));
        assert!(p.contains("\ndarner_proxy_read_retries_total 0\n"));
        assert!(p.contains("\ndarner_proxy_read_hedges_total 2\n"));
        assert!(p.contains("\ndarner_proxy_read_hedges_won_total 1\n"));
    }

    // ---- the /metrics request head ----

    use crate::fuzz_support::{exercise_http, http_answer};
    use proptest::prelude::*;

    fn answer(head: &[u8]) -> HttpAnswer {
        http_answer([head])
    }

    #[test]
    fn http_heads_are_answered_by_their_request_line() {
        let get = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
        assert_eq!(answer(get), HttpAnswer::Metrics);
        assert_eq!(
            answer(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            HttpAnswer::Metrics
        );
        assert_eq!(answer(b"GET /nope HTTP/1.1\r\n\r\n"), HttpAnswer::NotFound);
        assert_eq!(
            answer(b"GET /metricsx HTTP/1.1\r\n\r\n"),
            HttpAnswer::NotFound
        );
        assert_eq!(
            answer(b"POST /metrics HTTP/1.1\r\n\r\n"),
            HttpAnswer::MethodNotAllowed
        );
        for bad in [
            &b"GET /metrics\r\n\r\n"[..],
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1 x\r\n\r\n",
            b"GET /metrics FTP/1\r\n\r\n",
            b"\r\n\r\n",
        ] {
            assert_eq!(
                answer(bad),
                HttpAnswer::BadRequest,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// Found by the chunking property: the limit was checked after each 1 KiB read, before
    /// looking for the end of the head, so a head that ended within the limit was refused 431
    /// when the same read brought bytes after it (a pipelined request, a body) past the limit,
    /// and accepted when the reads were cut otherwise.
    #[test]
    fn regression_http_head_within_the_limit_is_accepted_whatever_follows_it() {
        let mut head = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
        head.resize(MAX_HTTP_HEAD - 4, b'a');
        head.extend_from_slice(b"\r\n\r\n");
        assert_eq!(head.len(), MAX_HTTP_HEAD);
        let mut stream = head.clone();
        stream.extend_from_slice(&[b'b'; 2000]);
        assert_eq!(http_answer(stream.chunks(1024)), HttpAnswer::Metrics);
        assert_eq!(http_answer([&stream[..]]), HttpAnswer::Metrics);
        // One byte more and the head is too large, however it comes.
        let mut over = head[..MAX_HTTP_HEAD - 4].to_vec();
        over.extend_from_slice(b"a\r\n\r\n");
        assert_eq!(http_answer(over.chunks(1024)), HttpAnswer::TooLarge);
        assert_eq!(http_answer(over.chunks(7)), HttpAnswer::TooLarge);
    }

    /// A stream that ended before its empty line was answered from whatever request line it
    /// had (`GET /metrics` then EOF got the metrics); a head cut short is now a bad request.
    #[test]
    fn regression_http_head_cut_short_is_a_bad_request() {
        assert_eq!(answer(b"GET /metrics HTTP/1.1\r\n"), HttpAnswer::BadRequest);
        assert_eq!(answer(b"GET /metrics"), HttpAnswer::BadRequest);
        assert_eq!(answer(b""), HttpAnswer::BadRequest);
    }

    /// A scraper trickling its head one byte per read timeout held the one-at-a-time endpoint
    /// for up to 8 KiB of read timeouts (hours at 2 s each); the head now has one deadline.
    #[test]
    fn regression_http_head_trickled_slowly_is_cut_off_by_one_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let reg = Registry::new(1);
        std::thread::spawn(move || {
            serve_http_with(listener, reg, ctx(), Duration::from_millis(300))
        });
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let t0 = Instant::now();
        let mut got = Vec::new();
        let trickle = b"GET /metrics HTTP/1.1\r\nX-Slow: "
            .iter()
            .chain(std::iter::repeat(&b'a'));
        slow.set_nonblocking(true).unwrap();
        for &b in trickle {
            // Each byte well within the 300 ms a per-read timeout would allow; none once the
            // answer is there (a byte the endpoint never reads would reset the connection).
            if !matches!(slow.peek(&mut [0]), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
                || t0.elapsed() > Duration::from_secs(3)
            {
                break;
            }
            slow.write_all(&[b]).unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
        slow.set_nonblocking(false).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        let _ = slow.read_to_end(&mut got);
        let got = String::from_utf8_lossy(&got);
        assert!(got.starts_with("HTTP/1.1 408 "), "{got:?}");
        // The endpoint is free again for the next scraper.
        let mut next = TcpStream::connect(addr).unwrap();
        next.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut text = String::new();
        next.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("darner_proxy_uptime_seconds"));
        let mut post = TcpStream::connect(addr).unwrap();
        post.write_all(b"PUT /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut text = String::new();
        post.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 405 "), "{text}");
        assert!(text.contains("\r\nAllow: GET\r\n"), "{text}");
    }

    fn valid_head() -> impl Strategy<Value = (Vec<u8>, HttpAnswer)> {
        let path = prop_oneof![
            Just(("/metrics", HttpAnswer::Metrics)),
            Just(("/metrics?a=b&c", HttpAnswer::Metrics)),
            Just(("/", HttpAnswer::NotFound)),
            Just(("/metrics/x", HttpAnswer::NotFound)),
        ];
        let header = ("[A-Za-z-]{1,12}", "[ -~]{0,40}");
        (
            prop_oneof![Just("GET"), Just("HEAD"), Just("POST")],
            path,
            prop_oneof![Just("HTTP/1.0"), Just("HTTP/1.1")],
            proptest::collection::vec(header, 0..6),
        )
            .prop_map(|(method, (path, want), version, headers)| {
                let mut h = format!("{method} {path} {version}\r\n");
                for (n, v) in headers {
                    h.push_str(&format!("{n}: {v}\r\n"));
                }
                h.push_str("\r\n");
                let want = if method == "GET" {
                    want
                } else {
                    HttpAnswer::MethodNotAllowed
                };
                (h.into_bytes(), want)
            })
    }

    /// Cuts `bytes` at the given offsets (taken modulo its length).
    fn cut(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
        let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        at.push(0);
        at.push(bytes.len());
        at.sort_unstable();
        at.windows(2).map(|w| bytes[w[0]..w[1]].to_vec()).collect()
    }

    proptest! {
        /// Any bytes: no panic, a bounded buffer, and the same answer however they are cut.
        #[test]
        fn http_head_arbitrary_bytes_never_panic_and_cut_the_same(
            data in proptest::collection::vec(any::<u8>(), 0..600),
        ) {
            exercise_http(&data);
        }

        /// A valid request, followed by anything, answers by its request line whatever cuts it.
        #[test]
        fn http_head_valid_requests_answer_the_same_in_any_pieces(
            (head, want) in valid_head(),
            after in proptest::collection::vec(any::<u8>(), 0..100),
            cuts in proptest::collection::vec(any::<usize>(), 0..12),
        ) {
            let mut stream = head.clone();
            stream.extend_from_slice(&after);
            let pieces = cut(&stream, &cuts);
            prop_assert_eq!(http_answer(pieces.iter().map(Vec::as_slice)), want);
            prop_assert_eq!(http_answer([&head[..]]), want);
        }

        /// A header longer than the limit is refused, with at most the limit held, in any pieces.
        #[test]
        fn http_head_oversized_header_is_refused_with_a_bounded_buffer(
            extra in 0usize..20_000,
            cuts in proptest::collection::vec(any::<usize>(), 0..12),
        ) {
            let mut stream = b"GET /metrics HTTP/1.1\r\nCookie: ".to_vec();
            stream.resize(MAX_HTTP_HEAD + extra, b'c');
            stream.extend_from_slice(b"\r\n\r\n");
            prop_assert_eq!(http_answer(cut(&stream, &cuts).iter().map(Vec::as_slice)),
                            HttpAnswer::TooLarge);
        }
    }
}
