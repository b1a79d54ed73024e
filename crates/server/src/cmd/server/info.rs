//! INFO, CONFIG RESETSTAT, and the metrics INFO samples over time.
//!
//! INFO's text is built on the connection's thread from the shared statistics (`Shared`), one
//! hop per shard for what only shards know (key counts, expired keys, hits and misses), and one
//! hop per thread for what only a thread knows about its connections (WATCHing clients, buffer
//! sizes). All hops of a request are in flight at once.
//!
//! Fields that describe features Darner has not built (persistence, replication, pub/sub,
//! tracking, blocking) report the values Redis reports with the feature idle, which is the
//! truth here. Fields Darner cannot measure are left out rather than invented.

use crate::alloc;
use crate::cmd::{registry, with_writer, Locks, Reg, TxFuture};
use crate::exec::Tx;
use crate::shared::Shared;
use bytes::Bytes;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub fn register(r: &mut Reg) {
    r.tx("info", Locks::None, info);
    r.tx("config|resetstat", Locks::None, resetstat);
}

// ---- metrics ----

const SAMPLES: usize = 16;
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// What the samples follow: the counters of commands, input bytes, output bytes and event loop
/// turns (sampled as per-second rates), and of the event loop's µs (sampled as µs per turn).
const COMMANDS: usize = 0;
const NET_INPUT: usize = 1;
const NET_OUTPUT: usize = 2;
const LOOP_TURNS: usize = 3;
const LOOP_USEC: usize = 4;
const SAMPLED: usize = 5;

/// Sampled every 100 ms and averaged over the last 16 samples (as Redis's `instantaneous_*`
/// fields are): per-second rates of counters, and the event loop's µs per turn (the time
/// counter's growth over the turn counter's in each sample, as Redis computes it).
#[derive(Default)]
struct Samples {
    last: Option<(Instant, [u64; SAMPLED])>,
    rates: [[f64; SAMPLES]; SAMPLED],
    next: usize,
}

/// Server-wide figures INFO reports that nothing else keeps.
#[derive(Default)]
pub struct Metrics {
    /// The most memory seen in use (sampled by the cron and by INFO).
    pub mem_peak: AtomicUsize,
    /// Keys of flushed databases waiting to be freed in the background, and freed so far.
    pub lazyfree_pending: AtomicU64,
    pub lazyfreed: AtomicU64,
    samples: Mutex<Samples>,
    /// run_id: random, fixed for the life of the process.
    run_id: OnceLock<String>,
}

impl Metrics {
    /// The memory in use now and the peak (which it updates).
    pub fn note_memory(&self) -> (usize, usize) {
        let used = alloc::used_memory();
        let peak = self.mem_peak.fetch_max(used, Ordering::Relaxed).max(used);
        (used, peak)
    }

    fn rate(&self, which: usize) -> f64 {
        let s = self.samples.lock().unwrap();
        s.rates[which].iter().sum::<f64>() / SAMPLES as f64
    }

    fn run_id(&self) -> &str {
        self.run_id.get_or_init(|| random_hex40(1))
    }
}

/// Periodic work for INFO (run by thread 0's cron): the memory peak and the rate samples.
pub fn cron(shared: &Shared) {
    let m = &shared.metrics;
    m.note_memory();
    let now = Instant::now();
    let mut cur = [0; SAMPLED];
    cur[COMMANDS] = shared.sum(|t| &t.commands);
    cur[NET_INPUT] = shared.sum(|t| &t.net_input);
    cur[NET_OUTPUT] = shared.sum(|t| &t.net_output);
    cur[LOOP_TURNS] = shared.sum(|t| &t.eventloop_cycles);
    cur[LOOP_USEC] = shared.sum(|t| &t.eventloop_usec);
    let mut s = m.samples.lock().unwrap();
    match s.last {
        Some((at, _)) if now.duration_since(at) < SAMPLE_EVERY => {}
        Some((at, prev)) => {
            let secs = now.duration_since(at).as_secs_f64();
            let i = s.next;
            // After CONFIG RESETSTAT the counters restart from zero: count that as none.
            let grew = |k: usize| cur[k].saturating_sub(prev[k]) as f64;
            for k in [COMMANDS, NET_INPUT, NET_OUTPUT, LOOP_TURNS] {
                s.rates[k][i] = grew(k) / secs;
            }
            let turns = grew(LOOP_TURNS);
            s.rates[LOOP_USEC][i] = if turns > 0.0 {
                grew(LOOP_USEC) / turns
            } else {
                0.0
            };
            s.next = (i + 1) % SAMPLES;
            s.last = Some((now, cur));
        }
        None => s.last = Some((now, cur)),
    }
}

/// 40 random hex digits (run_id, master_replid), from the standard library's randomly keyed
/// hasher.
pub fn random_hex40(salt: u64) -> String {
    use std::hash::{BuildHasher, Hasher};
    let rs = std::collections::hash_map::RandomState::new();
    let mut out = String::with_capacity(48);
    for i in 0..3u64 {
        let mut h = rs.build_hasher();
        h.write_u64(salt);
        h.write_u64(i);
        h.write_u128(Shared::now_us() as u128);
        h.write_u32(std::process::id());
        let _ = write!(out, "{:016x}", h.finish());
    }
    out.truncate(40);
    out
}

// ---- sections ----

const SERVER: u16 = 1 << 0;
const CLIENTS: u16 = 1 << 1;
const MEMORY: u16 = 1 << 2;
const PERSISTENCE: u16 = 1 << 3;
const STATS: u16 = 1 << 4;
const REPLICATION: u16 = 1 << 5;
const CPU: u16 = 1 << 6;
const MODULES: u16 = 1 << 7;
const COMMANDSTATS: u16 = 1 << 8;
const ERRORSTATS: u16 = 1 << 9;
const CLUSTER: u16 = 1 << 10;
const KEYSPACE: u16 = 1 << 11;
const LATENCYSTATS: u16 = 1 << 12;
const ALL: u16 = (1 << 13) - 1;
/// Redis 7's default set: everything but commandstats and latencystats.
const DEFAULT: u16 = ALL & !COMMANDSTATS & !LATENCYSTATS;

/// Section names as INFO takes them, in the order INFO prints them.
const SECTIONS: [(&str, &str, u16); 13] = [
    ("server", "Server", SERVER),
    ("clients", "Clients", CLIENTS),
    ("memory", "Memory", MEMORY),
    ("persistence", "Persistence", PERSISTENCE),
    ("stats", "Stats", STATS),
    ("replication", "Replication", REPLICATION),
    ("cpu", "CPU", CPU),
    ("modules", "Modules", MODULES),
    ("commandstats", "Commandstats", COMMANDSTATS),
    ("errorstats", "Errorstats", ERRORSTATS),
    ("latencystats", "Latencystats", LATENCYSTATS),
    ("cluster", "Cluster", CLUSTER),
    ("keyspace", "Keyspace", KEYSPACE),
];

/// The sections asked for; unknown names are ignored (Redis replies with what it knows).
fn parse_sections(args: &[Bytes]) -> u16 {
    if args.is_empty() {
        return DEFAULT;
    }
    let mut want = 0;
    for a in args {
        let a = a.to_ascii_lowercase();
        want |= match &a[..] {
            b"default" => DEFAULT,
            b"all" | b"everything" => ALL,
            name => SECTIONS
                .iter()
                .find(|(n, _, _)| n.as_bytes() == name)
                .map_or(0, |s| s.2),
        };
    }
    want
}

/// What one shard knows: per database (keys, keys with a TTL), then expired keys, hits and
/// misses over all its databases.
struct ShardInfo {
    dbs: Vec<(usize, usize)>,
    expired: u64,
    /// Keys a writable replica's clients gave a TTL, which it expires itself.
    replica_ttl_keys: u64,
    hits: u64,
    misses: u64,
}

/// What one thread knows about its connections.
#[derive(Default)]
struct ThreadInfo {
    watching_clients: usize,
    watched_keys: usize,
    max_input: usize,
    max_output: usize,
}

fn info(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let want = parse_sections(&args[1..]);
        let threads: Vec<_> = if want & CLIENTS != 0 {
            (0..tx.nshards())
                .map(|t| {
                    tx.on_thread(t, |ctx| {
                        let mut ti = ThreadInfo::default();
                        for (_, c) in ctx.conns.iter() {
                            if !c.state.watched.is_empty() {
                                ti.watching_clients += 1;
                                ti.watched_keys += c.state.watched.len();
                            }
                            ti.max_input = ti.max_input.max(c.rbuf.len());
                            ti.max_output = ti.max_output.max(c.out_len());
                        }
                        ti
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        let shards = if want & (STATS | KEYSPACE) != 0 {
            tx.run_all(|ctx| ShardInfo {
                dbs: ctx
                    .shard
                    .dbs
                    .iter()
                    .map(|db| (db.len(), db.expires()))
                    .collect(),
                expired: ctx.shard.dbs.iter().map(|db| db.expired_total).sum(),
                replica_ttl_keys: ctx
                    .shard
                    .dbs
                    .iter()
                    .map(|db| db.replica_ttl_keys() as u64)
                    .sum(),
                hits: ctx.shard.dbs.iter().map(|db| db.hits).sum(),
                misses: ctx.shard.dbs.iter().map(|db| db.misses).sum(),
            })
            .await
        } else {
            Vec::new()
        };
        // As in Redis, where a write is in the stream before its reply leaves, the primary's
        // `master_repl_offset` covers every write already answered: the threads hand over
        // what they recorded and the feed thread merges it first (WAIT's offset). Without
        // this a client comparing offsets (a test's "replica caught up") could see the
        // replica equal to a primary that had not yet counted its last writes.
        if want & REPLICATION != 0
            && crate::primary::feeding()
            && !tx.shared().repl.is_replica.load(Ordering::SeqCst)
        {
            crate::primary::wait_offset(&tx).await;
        }
        let mut conns = ThreadInfo::default();
        for h in threads {
            let t = h.await;
            conns.watching_clients += t.watching_clients;
            conns.watched_keys += t.watched_keys;
            conns.max_input = conns.max_input.max(t.max_input);
            conns.max_output = conns.max_output.max(t.max_output);
        }
        let text = render(tx.shared(), want, &shards, &conns);
        with_writer(tx.resp3(), |w| w.verbatim(b"txt", text.as_bytes()))
    })
}

/// Redis's bytesToHuman.
fn human(n: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 10, "K"),
        (1 << 20, "M"),
        (1 << 30, "G"),
        (1 << 40, "T"),
        (1 << 50, "P"),
    ];
    if n < 1024 {
        return format!("{n}B");
    }
    for (i, (unit, suffix)) in UNITS.iter().enumerate() {
        if i + 1 == UNITS.len() || n < UNITS[i + 1].0 {
            return format!("{:.2}{suffix}", n as f64 / *unit as f64);
        }
    }
    unreachable!()
}

fn read_proc(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// User and system CPU seconds of the process and of its waited-for children, from
/// /proc/self/stat (clock ticks of 1/100 s, Linux's USER_HZ).
fn cpu_times() -> [f64; 4] {
    let stat = read_proc("/proc/self/stat");
    // Fields after the command name, which is in parentheses and may contain anything.
    let rest = stat.rsplit_once(')').map_or("", |r| r.1);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // rest[0] is field 3 (state): utime, stime, cutime, cstime are fields 14-17.
    let at = |i: usize| f.get(i - 3).copied().unwrap_or(0.0) / 100.0;
    [at(14), at(15), at(16), at(17)]
}

fn total_system_memory() -> u64 {
    read_proc("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Per-command statistics summed over threads: (calls, usec, rejected, failed).
fn cmd_totals(shared: &Shared, id: usize) -> [u64; 4] {
    let mut t = [0u64; 4];
    for s in &shared.stats {
        let c = &s.cmd[id];
        for (slot, a) in t
            .iter_mut()
            .zip([&c.calls, &c.usec, &c.rejected, &c.failed])
        {
            *slot += a.load(Ordering::Relaxed);
        }
    }
    t
}

/// redis_build_id: a hex digest of the version (FNV-1a), fixed per build like Redis's.
fn build_id() -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in crate::DARNER_VERSION.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// A command's latency histogram summed over threads.
pub fn latency_counts(shared: &Shared, id: usize) -> crate::latency::Counts {
    let mut counts = crate::latency::Counts::new();
    for s in &shared.stats {
        s.cmd[id].hist.add_to(&mut counts.0);
    }
    counts
}

fn render(shared: &Shared, want: u16, shards: &[ShardInfo], conns: &ThreadInfo) -> String {
    let mut s = String::with_capacity(4096);
    let mut first = true;
    macro_rules! line {
        ($($arg:tt)*) => {{
            let _ = write!(s, $($arg)*);
            s.push_str("\r\n");
        }};
    }
    let hot = &shared.config.hot;
    for (_, title, bit) in SECTIONS {
        if want & bit == 0 {
            continue;
        }
        if !first {
            s.push_str("\r\n");
        }
        first = false;
        line!("# {title}");
        match bit {
            SERVER => {
                let now_us = Shared::now_us();
                let uptime = shared.started.elapsed().as_secs();
                let hz = hot.hz.load(Ordering::Relaxed);
                let os = format!(
                    "{} {} {}",
                    read_proc("/proc/sys/kernel/ostype").trim(),
                    read_proc("/proc/sys/kernel/osrelease").trim(),
                    std::env::consts::ARCH
                );
                line!("redis_version:{}", crate::REDIS_COMPAT_VERSION);
                line!("darner_version:{}", crate::DARNER_VERSION);
                line!("redis_git_sha1:00000000");
                line!("redis_git_dirty:0");
                line!("redis_build_id:{}", build_id());
                line!("redis_mode:standalone");
                line!("os:{os}");
                line!("arch_bits:{}", usize::BITS);
                line!("monotonic_clock:POSIX clock_gettime");
                line!("multiplexing_api:epoll");
                // Rust's atomics follow the C11 memory model; Redis prints 0.0.0 when not
                // built by GCC.
                line!("atomicvar_api:c11-builtin");
                line!("gcc_version:0.0.0");
                line!("process_id:{}", std::process::id());
                line!("process_supervised:no");
                line!("run_id:{}", shared.metrics.run_id());
                line!("tcp_port:{}", shared.config.get_i64("port"));
                line!("server_time_usec:{now_us}");
                line!("uptime_in_seconds:{uptime}");
                line!("uptime_in_days:{}", uptime / 86400);
                line!("hz:{hz}");
                line!("configured_hz:{}", shared.config.get_i64("hz"));
                // Redis's LRU clock: seconds, modulo 2^24.
                line!("lru_clock:{}", (now_us / 1_000_000) & ((1 << 24) - 1));
                line!("executable:{}", shared.executable);
                line!("config_file:{}", shared.config_file);
                line!("io_threads_active:0");
                let mut listener = String::from("listener0:name=tcp");
                for b in shared
                    .config
                    .get("bind")
                    .unwrap_or_default()
                    .split_whitespace()
                {
                    let _ = write!(listener, ",bind={b}");
                }
                line!("{listener},port={}", shared.config.get_i64("port"));
                line!("server_threads:{}", shared.threads);
            }
            CLIENTS => {
                line!(
                    "connected_clients:{}",
                    shared.connected.load(Ordering::Relaxed)
                );
                line!("cluster_connections:0");
                line!("maxclients:{}", hot.maxclients.load(Ordering::Relaxed));
                line!("client_recent_max_input_buffer:{}", conns.max_input);
                line!("client_recent_max_output_buffer:{}", conns.max_output);
                let blocked = crate::blocking::BLOCKED_CLIENTS.load(Ordering::Relaxed);
                line!("blocked_clients:{blocked}");
                line!(
                    "tracking_clients:{}",
                    shared.tracking.clients.load(Ordering::Relaxed)
                );
                line!("pubsub_clients:{}", shared.pubsub.clients());
                line!("watching_clients:{}", conns.watching_clients);
                // Every blocked client with a timeout has a timer (with 0 = forever, none).
                line!("clients_in_timeout_table:0");
                line!("total_watched_keys:{}", conns.watched_keys);
                line!("total_blocking_keys:0");
                line!("total_blocking_keys_on_nokey:0");
            }
            MEMORY => {
                let (used, peak) = shared.metrics.note_memory();
                let rss = alloc::rss();
                let sys = total_system_memory();
                line!("used_memory:{used}");
                line!("used_memory_human:{}", human(used as u64));
                line!("used_memory_rss:{rss}");
                line!("used_memory_rss_human:{}", human(rss as u64));
                line!("used_memory_peak:{peak}");
                line!("used_memory_peak_human:{}", human(peak as u64));
                line!(
                    "used_memory_peak_perc:{:.2}%",
                    used as f64 * 100.0 / peak.max(1) as f64
                );
                // No scripting yet: no Lua VM, no scripts, no functions.
                line!("used_memory_lua:0");
                line!("used_memory_vm_eval:0");
                line!("used_memory_lua_human:0B");
                line!("used_memory_scripts_eval:0");
                line!("number_of_cached_scripts:0");
                line!("number_of_functions:0");
                line!("number_of_libraries:0");
                line!("used_memory_vm_functions:0");
                line!("used_memory_vm_total:0");
                line!("used_memory_vm_total_human:0B");
                line!("used_memory_functions:0");
                line!("used_memory_scripts:0");
                line!("used_memory_scripts_human:0B");
                line!("total_system_memory:{sys}");
                line!("total_system_memory_human:{}", human(sys));
                let hot = &shared.config.hot;
                let maxmemory = hot.maxmemory.load(Ordering::Relaxed);
                line!("maxmemory:{maxmemory}");
                line!("maxmemory_human:{}", human(maxmemory));
                line!(
                    "maxmemory_policy:{}",
                    crate::config::MAXMEMORY_POLICIES
                        [hot.maxmemory_policy.load(Ordering::Relaxed) as usize]
                );
                line!(
                    "mem_fragmentation_ratio:{:.2}",
                    rss as f64 / used.max(1) as f64
                );
                line!("mem_fragmentation_bytes:{}", rss as i64 - used as i64);
                // No AOF, no replicas, no replication backlog, no cluster bus.
                line!("mem_not_counted_for_evict:0");
                line!("mem_replication_backlog:0");
                line!("mem_total_replication_buffers:0");
                line!("mem_clients_slaves:0");
                line!("mem_cluster_links:0");
                line!("mem_aof_buffer:0");
                line!("mem_allocator:mimalloc");
                line!("active_defrag_running:0");
                line!(
                    "lazyfree_pending_objects:{}",
                    shared.metrics.lazyfree_pending.load(Ordering::Relaxed)
                );
                line!(
                    "lazyfreed_objects:{}",
                    shared.metrics.lazyfreed.load(Ordering::Relaxed)
                );
            }
            PERSISTENCE => {
                let p = &shared.persist;
                let loading = p.loading.load(Ordering::Relaxed);
                let async_loading = p.async_loading.load(Ordering::Relaxed);
                line!("loading:{}", loading as u8);
                line!("async_loading:{}", async_loading as u8);
                if loading || async_loading {
                    // Redis's loading fields, while a file loads (persist/load.rs).
                    let start = p.loading_start.load(Ordering::Relaxed);
                    let total = p.loading_total_bytes.load(Ordering::Relaxed);
                    // A stream framed by an EOF mark has no known size (total 0): its bytes
                    // read so far are still shown.
                    let loaded = p.loading_loaded_bytes.load(Ordering::Relaxed);
                    let done = if total == 0 {
                        loaded
                    } else {
                        loaded.min(total)
                    };
                    let perc = if total == 0 {
                        0.0
                    } else {
                        done as f64 * 100.0 / total as f64
                    };
                    let elapsed = (Shared::now_ms() / 1000 - start).max(0);
                    let eta = if done == 0 || total == 0 {
                        1
                    } else {
                        ((total - done) as f64 / (done as f64 / elapsed.max(1) as f64)) as i64
                    };
                    line!("loading_start_time:{start}");
                    line!("loading_total_bytes:{total}");
                    line!("loading_rdb_used_mem:0");
                    line!("loading_loaded_bytes:{done}");
                    line!("loading_loaded_perc:{perc:.2}");
                    line!("loading_eta_seconds:{eta}");
                }
                // No fork, ever: no copy-on-write.
                let bg = &shared.bgsaves;
                let bg_running = bg.in_progress.load(Ordering::Acquire);
                line!("current_cow_peak:0");
                line!("current_cow_size:0");
                line!("current_cow_size_age:0");
                line!("current_fork_perc:0.00");
                line!("current_save_keys_processed:0");
                line!("current_save_keys_total:0");
                line!(
                    "rdb_changes_since_last_save:{}",
                    crate::persist::changes_since_save(shared)
                );
                line!("rdb_bgsave_in_progress:{}", bg_running as u8);
                line!("rdb_last_save_time:{}", p.lastsave.load(Ordering::Relaxed));
                line!(
                    "rdb_last_bgsave_status:{}",
                    if p.last_save_failed.load(Ordering::Relaxed) {
                        "err"
                    } else {
                        "ok"
                    }
                );
                line!(
                    "rdb_last_bgsave_time_sec:{}",
                    bg.last_secs.load(Ordering::Relaxed)
                );
                let current = if bg_running {
                    (Shared::now_ms().div_euclid(1000) - bg.started.load(Ordering::Relaxed)).max(0)
                } else {
                    -1
                };
                line!("rdb_current_bgsave_time_sec:{current}");
                line!("rdb_saves:{}", p.saves.load(Ordering::Relaxed));
                line!("rdb_last_cow_size:0");
                line!(
                    "rdb_last_load_keys_expired:{}",
                    p.last_load_expired.load(Ordering::Relaxed)
                );
                line!(
                    "rdb_last_load_keys_loaded:{}",
                    p.last_load_keys.load(Ordering::Relaxed)
                );
                let a = &shared.aof;
                let on = a.on.load(Ordering::Relaxed);
                let rewriting = a.rewriting.load(Ordering::Relaxed);
                let status = |failed: bool| if failed { "err" } else { "ok" };
                line!("aof_enabled:{}", u8::from(on));
                line!("aof_rewrite_in_progress:{}", u8::from(rewriting));
                line!(
                    "aof_rewrite_scheduled:{}",
                    u8::from(a.rewrite_scheduled.load(Ordering::Relaxed))
                );
                line!(
                    "aof_last_rewrite_time_sec:{}",
                    a.last_rewrite_secs.load(Ordering::Relaxed)
                );
                let current = if rewriting {
                    crate::shared::Shared::now_ms() / 1000
                        - a.rewrite_started.load(Ordering::Relaxed)
                } else {
                    -1
                };
                line!("aof_current_rewrite_time_sec:{current}");
                line!(
                    "aof_last_bgrewrite_status:{}",
                    status(a.last_rewrite_failed.load(Ordering::Relaxed))
                );
                line!("aof_rewrites:{}", a.rewrites.load(Ordering::Relaxed));
                line!(
                    "aof_rewrites_consecutive_failures:{}",
                    a.rewrite_failures_in_a_row.load(Ordering::Relaxed)
                );
                line!("aof_last_write_status:{}", status(a.last_write_failed()));
                line!("aof_last_cow_size:0");
                line!("module_fork_in_progress:0");
                line!("module_fork_last_cow_size:0");
                if on {
                    line!(
                        "aof_current_size:{}",
                        a.current_size.load(Ordering::Relaxed)
                    );
                    line!("aof_base_size:{}", a.base_size.load(Ordering::Relaxed));
                    line!(
                        "aof_pending_rewrite:{}",
                        u8::from(a.rewrite_scheduled.load(Ordering::Relaxed))
                    );
                    line!(
                        "aof_buffer_length:{}",
                        a.buffer_length.load(Ordering::Relaxed)
                    );
                    line!("aof_pending_bio_fsync:0");
                    line!("aof_delayed_fsync:0");
                }
            }
            STATS => {
                let m = &shared.metrics;
                let sum = |f: fn(&ShardInfo) -> u64| shards.iter().map(f).sum::<u64>();
                line!(
                    "total_connections_received:{}",
                    shared.sum(|t| &t.connections)
                );
                line!("total_commands_processed:{}", shared.sum(|t| &t.commands));
                line!(
                    "instantaneous_ops_per_sec:{}",
                    m.rate(COMMANDS).round() as u64
                );
                line!("total_net_input_bytes:{}", shared.sum(|t| &t.net_input));
                line!("total_net_output_bytes:{}", shared.sum(|t| &t.net_output));
                line!("total_net_repl_input_bytes:0");
                line!("total_net_repl_output_bytes:0");
                line!("instantaneous_input_kbps:{:.2}", m.rate(NET_INPUT) / 1024.0);
                line!(
                    "instantaneous_output_kbps:{:.2}",
                    m.rate(NET_OUTPUT) / 1024.0
                );
                line!("instantaneous_input_repl_kbps:0.00");
                line!("instantaneous_output_repl_kbps:0.00");
                line!(
                    "rejected_connections:{}",
                    shared.sum(|t| &t.rejected_connections)
                );
                let (full, ok, err) = {
                    let st = shared.repl.lock();
                    let r = &st.replicas;
                    (r.sync_full, r.sync_partial_ok, r.sync_partial_err)
                };
                line!("sync_full:{full}");
                line!("sync_partial_ok:{ok}");
                line!("sync_partial_err:{err}");
                line!("expired_keys:{}", sum(|s| s.expired));
                line!(
                    "expired_time_cap_reached_count:{}",
                    shared.sum(|t| &t.expire_cycle_time_cap)
                );
                line!(
                    "expire_cycle_cpu_milliseconds:{}",
                    shared.sum(|t| &t.expire_cycle_usec) / 1000
                );
                line!("evicted_keys:{}", shared.sum(|t| &t.evicted_keys));
                line!("evicted_clients:0");
                // No client eviction (maxmemory-clients), MIGRATE, replicas or active defrag yet.
                line!("total_eviction_exceeded_time:0");
                line!("current_eviction_exceeded_time:0");
                line!("keyspace_hits:{}", sum(|s| s.hits));
                line!("keyspace_misses:{}", sum(|s| s.misses));
                use crate::pubsub::Kind;
                line!("pubsub_channels:{}", shared.pubsub.distinct(Kind::Channel));
                line!("pubsub_patterns:{}", shared.pubsub.distinct(Kind::Pattern));
                line!(
                    "pubsubshard_channels:{}",
                    shared.pubsub.distinct(Kind::Shard)
                );
                line!("latest_fork_usec:0");
                line!("total_forks:0");
                line!("migrate_cached_sockets:0");
                line!("slave_expires_tracked_keys:{}", sum(|s| s.replica_ttl_keys));
                line!("active_defrag_hits:0");
                line!("active_defrag_misses:0");
                line!("active_defrag_key_hits:0");
                line!("active_defrag_key_misses:0");
                line!("total_active_defrag_time:0");
                line!("current_active_defrag_time:0");
                line!("tracking_total_keys:{}", shared.tracking.total_keys());
                line!("tracking_total_items:{}", shared.tracking.total_items());
                line!(
                    "tracking_total_prefixes:{}",
                    shared.tracking.prefixes.count()
                );
                line!(
                    "total_error_replies:{}",
                    shared.sum(|t| &t.total_error_replies)
                );
                // Errors in what a master or the AOF sent, and sanitized RESTORE payloads:
                // neither exists here.
                line!("unexpected_error_replies:0");
                line!("dump_payload_sanitizations:0");
                line!("io_threaded_reads_processed:0");
                line!("io_threaded_writes_processed:0");
                // The event loop: turns and their time summed over the threads (a turn's time
                // runs from the end of its wait for events); commands' time as in commandstats.
                line!("eventloop_cycles:{}", shared.sum(|t| &t.eventloop_cycles));
                line!(
                    "eventloop_duration_sum:{}",
                    shared.sum(|t| &t.eventloop_usec)
                );
                let cmd_usec: u64 = registry()
                    .list
                    .iter()
                    .map(|c| cmd_totals(shared, c.id)[1])
                    .sum();
                line!("eventloop_duration_cmd_sum:{cmd_usec}");
                line!(
                    "instantaneous_eventloop_cycles_per_sec:{}",
                    m.rate(LOOP_TURNS).round() as u64
                );
                line!(
                    "instantaneous_eventloop_duration_usec:{}",
                    m.rate(LOOP_USEC).round() as u64
                );
                // Darner's own: the longest turn of any thread since start or CONFIG
                // RESETSTAT, in µs: how long a client could have waited behind other work.
                let max = shared
                    .stats
                    .iter()
                    .map(|t| t.eventloop_max_usec.load(Ordering::Relaxed))
                    .max()
                    .unwrap_or(0);
                line!("darner_eventloop_duration_max:{max}");
            }
            REPLICATION => crate::replica::info(shared, &mut s),
            CPU => {
                let [user, sys, cuser, csys] = cpu_times();
                line!("used_cpu_sys:{sys:.6}");
                line!("used_cpu_user:{user:.6}");
                line!("used_cpu_sys_children:{csys:.6}");
                line!("used_cpu_user_children:{cuser:.6}");
            }
            MODULES => {}
            COMMANDSTATS => {
                for c in &registry().list {
                    let [calls, usec, rejected, failed] = cmd_totals(shared, c.id);
                    if calls == 0 && rejected == 0 && failed == 0 {
                        continue;
                    }
                    let per = if calls == 0 {
                        0.0
                    } else {
                        usec as f64 / calls as f64
                    };
                    line!(
                        "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per:.2},rejected_calls={rejected},failed_calls={failed}",
                        c.spec.full_name
                    );
                }
            }
            ERRORSTATS => {
                for (prefix, n) in shared.errorstats.lock().unwrap().iter() {
                    line!("errorstat_{prefix}:count={n}");
                }
            }
            LATENCYSTATS if hot.latency_tracking.load(Ordering::Relaxed) => {
                let wanted = crate::config::percentiles(
                    &shared
                        .config
                        .get("latency-tracking-info-percentiles")
                        .unwrap_or_default(),
                )
                .unwrap_or_default();
                for c in &registry().list {
                    let counts = latency_counts(shared, c.id);
                    if counts.total() == 0 {
                        continue;
                    }
                    let _ = write!(s, "latency_percentiles_usec_{}:", c.spec.full_name);
                    for (i, p) in wanted.iter().enumerate() {
                        if i > 0 {
                            s.push(',');
                        }
                        let _ = write!(
                            s,
                            "p{}={:.3}",
                            crate::config::percentile_text(*p),
                            counts.percentile_us(*p)
                        );
                    }
                    s.push_str("\r\n");
                }
            }
            CLUSTER => line!("cluster_enabled:0"),
            KEYSPACE => {
                for db in 0..shared.databases {
                    let (keys, expires) = shards.iter().fold((0, 0), |acc, s| {
                        let d = s.dbs.get(db).copied().unwrap_or_default();
                        (acc.0 + d.0, acc.1 + d.1)
                    });
                    if keys > 0 {
                        line!("db{db}:keys={keys},expires={expires},avg_ttl=0");
                    }
                }
            }
            _ => {}
        }
    }
    s
}

// ---- CONFIG RESETSTAT ----

fn resetstat(tx: Tx, _args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        // Each thread zeroes its own counters (only the owner writes them), each shard its
        // databases' hit/miss/expiry counts.
        let threads: Vec<_> = (0..tx.nshards())
            .map(|t| tx.on_thread(t, |ctx| ctx.shared.stats[ctx.id].reset()))
            .collect();
        tx.run_all(|ctx| {
            for db in ctx.shard.dbs.iter_mut() {
                db.expired_total = 0;
                db.hits = 0;
                db.misses = 0;
            }
        })
        .await;
        for h in threads {
            h.await;
        }
        let shared = tx.shared();
        shared.errorstats.lock().unwrap().clear();
        shared
            .metrics
            .mem_peak
            .store(alloc::used_memory(), Ordering::Relaxed);
        with_writer(tx.resp3(), |w| w.ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(1023), "1023B");
        assert_eq!(human(917000), "895.51K");
        assert_eq!(human(12242944), "11.68M");
        assert_eq!(human(25274793984), "23.54G");
    }

    #[test]
    fn sections() {
        let b =
            |v: &[&str]| -> Vec<Bytes> { v.iter().map(|s| Bytes::from(s.to_string())).collect() };
        assert_eq!(parse_sections(&[]), DEFAULT);
        assert_eq!(parse_sections(&b(&["ALL"])), ALL);
        assert_eq!(parse_sections(&b(&["cpu", "Server"])), CPU | SERVER);
        assert_eq!(parse_sections(&b(&["nosuch"])), 0);
        assert_eq!(
            parse_sections(&b(&["default", "commandstats", "latencystats"])),
            ALL
        );
    }

    #[test]
    fn ids_are_hex() {
        let id = random_hex40(7);
        assert_eq!(id.len(), 40);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(id, random_hex40(8));
    }

    #[test]
    fn cpu_is_read() {
        let [user, sys, _, _] = cpu_times();
        assert!(user >= 0.0 && sys >= 0.0);
    }
}
