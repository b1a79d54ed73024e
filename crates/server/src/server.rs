//! Start-up and shutdown: listeners, threads, signals.

use crate::config::Config;
use crate::log;
use crate::msg::Msg;
use crate::shared::{Inbox, Shared, ThreadStats};
use crate::worker::Worker;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Resolves the `bind` directive: addresses, "-" marking ones that may fail.
fn bind_addrs(bind: &str, port: u16) -> Vec<(SocketAddr, bool)> {
    let mut out = Vec::new();
    for word in bind.split_whitespace() {
        let (optional, a) = match word.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, word),
        };
        // Redis's wildcards: every IPv4 address, every IPv6 address.
        let a = match a {
            "*" => "0.0.0.0",
            "::*" => "::",
            a => a,
        };
        match a.parse::<std::net::IpAddr>() {
            Ok(ip) => out.push((SocketAddr::new(ip, port), optional)),
            Err(_) => out.push((
                SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), 0),
                optional,
            )),
        }
    }
    out
}

fn listener(addr: SocketAddr) -> std::io::Result<mio::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    // One listener per thread on the same port: the kernel spreads connections over them.
    s.set_reuse_port(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&addr.into())?;
    s.listen(511)?;
    s.set_nonblocking(true)?;
    Ok(mio::net::TcpListener::from_std(s.into()))
}

/// Fails when another process already listens on `addr`. Our own listeners share the port
/// through SO_REUSEPORT, which would just as silently let a second server (same user) join
/// and take half of the connections; Redis refuses to start instead, and so do we. The probe
/// binds without SO_REUSEPORT, which the kernel refuses while any socket listens there.
fn in_use_probe(addr: SocketAddr) -> std::io::Result<()> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&addr.into())
}

/// One listener per thread on each address of a `bind` value, at `port`.
pub struct Opened {
    /// Per thread: its listeners, each with its address.
    pub per_thread: Vec<Vec<(SocketAddr, mio::net::TcpListener)>>,
    /// Every address listened on, in `bind`'s order (those in `held` included).
    pub bound: Vec<SocketAddr>,
}

/// Opens `threads` listeners on each address of `bind` at `port` (none for port 0). An
/// address marked with "-" that fails is skipped (logged); any other failure closes what was
/// opened and returns the error. `held` is what the server listens on already (CONFIG SET
/// port / bind): an address in it is listed in `bound` but not opened again (the threads
/// keep their listeners there). `closing`: addresses whose listeners some threads have yet
/// to close. No in-use probe runs where a new address overlaps one of those two lists on the
/// same port (the probe would find our own listeners).
pub fn open_listeners(
    bind: &str,
    port: u16,
    threads: usize,
    held: &[SocketAddr],
    closing: &[SocketAddr],
) -> Result<Opened, String> {
    let mut per_thread: Vec<Vec<(SocketAddr, mio::net::TcpListener)>> =
        (0..threads).map(|_| Vec::new()).collect();
    let mut bound: Vec<SocketAddr> = Vec::new();
    if port == 0 {
        return Ok(Opened { per_thread, bound });
    }
    for (addr, optional) in bind_addrs(bind, port) {
        if addr.port() == 0 {
            return Err(format!("Invalid bind address '{bind}'"));
        }
        let attempt = if bound.contains(&addr) {
            // Listed twice: the second bind fails, as it would without SO_REUSEPORT.
            Err(std::io::Error::from(std::io::ErrorKind::AddrInUse))
        } else if held.contains(&addr) {
            Ok(Vec::new())
        } else {
            let overlaps = held.iter().chain(closing).any(|h| {
                h.port() == addr.port()
                    && h.is_ipv4() == addr.is_ipv4()
                    && (h.ip() == addr.ip()
                        || h.ip().is_unspecified()
                        || addr.ip().is_unspecified())
            });
            // The probe goes first: once our first listener listens, it would refuse the rest.
            let probe = if overlaps { Ok(()) } else { in_use_probe(addr) };
            probe.and_then(|()| (0..threads).map(|_| listener(addr)).collect())
        };
        match attempt {
            Ok(ls) => {
                for (t, l) in ls.into_iter().enumerate() {
                    per_thread[t].push((addr, l));
                }
                bound.push(addr);
            }
            Err(e) if optional => log::verbose(&format!(
                "Could not create server TCP listening socket {addr}: {e} (optional)"
            )),
            Err(e) => {
                return Err(format!(
                    "Could not create server TCP listening socket {addr}: {e}"
                ))
            }
        }
    }
    Ok(Opened { per_thread, bound })
}

pub fn run(config: Config, executable: String, config_file: String) -> Result<(), String> {
    darner_engine::entry::set_size_classes(crate::alloc::good_size);
    let threads = match config.get_i64("threads") {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        n => n as usize,
    };
    let databases = config.get_i64("databases") as usize;
    let port = config.get_i64("port") as u16;
    let bind = config.get("bind").unwrap_or_default();

    // Listeners for every thread, before any thread starts, so that a bind error stops start-up.
    if port == 0 || bind.split_whitespace().next().is_none() {
        // Darner has no Unix socket: nothing could ever reach it (Redis's words).
        return Err("Configured to not listen anywhere, exiting.".into());
    }
    let opened = open_listeners(&bind, port, threads, &[], &[])?;
    if opened.bound.is_empty() {
        return Err("Failed listening on any bind address".into());
    }
    let bound: Vec<String> = opened.bound.iter().map(|a| a.to_string()).collect();
    let per_thread = opened.per_thread;

    let mut polls = Vec::new();
    let mut inboxes = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..threads {
        let poll = mio::Poll::new().map_err(|e| e.to_string())?;
        let waker = Arc::new(
            mio::Waker::new(poll.registry(), mio::Token(usize::MAX)).map_err(|e| e.to_string())?,
        );
        let (tx, rx) = std::sync::mpsc::channel();
        inboxes.push(Inbox::new(tx, waker));
        receivers.push(rx);
        polls.push(poll);
    }
    let ncmds = crate::cmd::registry().list.len();
    let shared = Arc::new(Shared {
        threads,
        databases,
        inboxes,
        stats: (0..threads)
            .map(|_| ThreadStats {
                cmd: (0..ncmds).map(|_| Default::default()).collect(),
                ..Default::default()
            })
            .collect(),
        started: std::time::Instant::now(),
        started_unix: Shared::now_ms() / 1000,
        next_client_id: AtomicU64::new(1),
        connected: AtomicUsize::new(0),
        clients: Mutex::new(Default::default()),
        shutdown: AtomicBool::new(false),
        shutdown_asap: Default::default(),
        shutdown_running: AtomicBool::new(false),
        slowlog: Mutex::new(Default::default()),
        slowlog_next_id: AtomicU64::new(0),
        latency: Default::default(),
        errorstats: Mutex::new(Default::default()),
        monitors: AtomicUsize::new(0),
        pause_until: Arc::new(AtomicI64::new(0)),
        pause_writes_only: AtomicBool::new(false),
        failover: Default::default(),
        active_expire_enabled: AtomicBool::new(true),
        evict_round: Default::default(),
        listening: Mutex::new(crate::shared::Listening {
            addrs: opened.bound,
            closing: Vec::new(),
        }),
        executable,
        config_file,
        metrics: Default::default(),
        pubsub: Default::default(),
        tracking: crate::tracking::Global::new(threads),
        config,
        sequencer: Default::default(),
        scripts: crate::cmd::scripting::Scripts::new(threads),
        bgsaves: Default::default(),
        persist: crate::persist::State::new(Shared::now_ms() / 1000),
        aof: crate::aof::Aof::new(threads),
        repl: Default::default(),
    });
    // Until the data is loaded (below), commands get -LOADING: the AOF with appendonly yes
    // (Redis then ignores the RDB file), `dir/dbfilename` otherwise. With appendonly yes and
    // nothing to load too: until the AOF thread runs (aof::load_and_start creates the base
    // and the manifest first), a write would be acknowledged and never logged.
    let aof = crate::aof::open_at_startup(&shared);
    let rdb = match aof {
        Some(_) => None,
        None => crate::persist::load::open_at_startup(&shared),
    };
    shared
        .persist
        .loading
        .store(rdb.is_some() || aof.is_some(), Ordering::SeqCst);

    // Signals: SIGTERM and SIGINT shut down gracefully: thread 0's cron saves first when
    // save points are set (cmd/server.rs `finish_shutdown`), as Redis's serverCron does. A
    // SIGINT while that is under way exits at once, as in Redis.
    {
        let shared = shared.clone();
        let mut signals = signal_hook::iterator::Signals::new([
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGINT,
        ])
        .map_err(|e| e.to_string())?;
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    let int = sig == signal_hook::consts::SIGINT;
                    let pending = shared.shutdown_asap.load(Ordering::SeqCst) != 0;
                    if pending && int {
                        log::warning("You insist... exiting now.");
                        remove_bgsave_temp(&shared);
                        std::process::exit(1);
                    }
                    if pending {
                        log::warning("Received SIGTERM scheduling shutdown...");
                        continue;
                    }
                    let name = if int { "SIGINT" } else { "SIGTERM" };
                    log::warning(&format!("Received {name} scheduling shutdown..."));
                    // Thread 0's cron acts on it within a tick.
                    shared.shutdown_asap.store(sig, Ordering::SeqCst);
                }
            })
            .map_err(|e| e.to_string())?;
    }

    log::notice(&format!(
        "Server initialized with {threads} thread(s), one shard each"
    ));
    crate::alloc::mark_startup();
    // The command timer's tick rate takes 20 ms to measure: now, not in the first command.
    // After the listeners (connections wait in their backlog meanwhile), so that start-up
    // holds the port no later than before.
    crate::worker::calibrate_clock();
    let mut handles = Vec::new();
    for (i, ((poll, ls), rx)) in polls.into_iter().zip(per_thread).zip(receivers).enumerate() {
        let shared = shared.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("darner-{i}"))
                .spawn(move || match Worker::new(i, shared, poll, ls, rx) {
                    Ok(w) => w.run(),
                    Err(e) => {
                        log::warning(&format!("thread {i} failed to start: {e}"));
                        std::process::exit(1);
                    }
                })
                .map_err(|e| e.to_string())?,
        );
    }
    // The threads serve (commands without the `loading` flag get -LOADING, as in Redis) while
    // this thread reads the snapshot and hands its keys to them (persist/load.rs).
    let repl_position = rdb.and_then(|loader| crate::persist::load::at_startup(&shared, loader));
    // A primary's own file: its history is offered to its replicas (before clients write).
    let repl_position = match repl_position {
        Some(pos) if shared.config.replicaof().is_none() => {
            crate::replica::restore_primary(&shared, pos);
            None
        }
        other => other,
    };
    if let Some(aof) = aof {
        let listen = shared.listening.lock().unwrap().addrs.clone();
        crate::aof::load_and_start(&shared, aof, &listen);
    }
    shared.persist.loading.store(false, Ordering::SeqCst);
    shared.aof.ready.store(true, Ordering::Release);
    log::notice(&format!(
        "Ready to accept connections tcp on {}",
        bound.join(", ")
    ));
    // `replicaof` in the configuration: follow that primary (replica.rs).
    if let Some((host, port)) = shared.config.replicaof() {
        // A replica's own file says where its data stands in the primary's stream: the link
        // asks to continue from there (a partial resync after a restart).
        if let Some(pos) = repl_position {
            crate::replica::restore(&shared, pos);
        }
        let (_, gen) = crate::replica::set_master(&shared, host, port);
        crate::replica::start_link(&shared, gen);
    }
    for h in handles {
        let _ = h.join();
    }
    // What the threads handed over last is written and fsynced.
    shared.aof.finish();
    // A background save the shutdown stopped, or that started at its last moment, leaves
    // no temporary file behind.
    remove_bgsave_temp(&shared);
    log::warning("Darner is now ready to exit, bye bye...");
    Ok(())
}

/// Removes the background save's temporary file, if there is one.
fn remove_bgsave_temp(shared: &Shared) {
    let path = crate::persist::rdb_path(shared);
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let _ = std::fs::remove_file(dir.join(crate::bgsave::temp_file_name()));
    // And an AOF rewrite's unfinished base (aof.rs), in the working directory.
    let _ = std::fs::remove_file(crate::aof::rewrite_temp_name());
}

/// Stops every thread (SIGTERM, SHUTDOWN).
pub fn shutdown(shared: &Shared) {
    if shared.shutdown.swap(true, Ordering::SeqCst) {
        return;
    }
    for t in 0..shared.threads {
        shared.send(t, Msg::Shutdown);
    }
}
