//! The append-only file in the server: loading Redis 7's multi-part AOF directory at
//! start-up, and writing every change to it from one thread.
//!
//! **Writing.** The shards record their changes (propagate.rs) and hand them over in chunks
//! through one channel to the AOF thread, which merges them into one log
//! (`darner_aof::Merger`: each shard's order kept, a multi-shard transaction as one MULTI/EXEC
//! block), renders it (`darner_aof::Writer`: SELECT when the database changes, `#TS:`
//! annotations) and appends it to the last incr file, `write(2)` once per batch of chunks.
//! `appendfsync everysec` fsyncs at most once a second and `no` never (the kernel decides);
//! neither makes anyone wait. `always` fsyncs after every write and then publishes, per
//! thread, the last chunk that fsync covered ([`Aof::durable`]): a thread holds every reply it
//! produced while a chunk of its is not covered yet, and sends them when the AOF thread says
//! so (worker/durability.rs). That is group commit: while one fsync runs, every thread goes on
//! serving, and all the chunks handed over meanwhile share the next fsync, so 50 clients
//! writing at once need a few fsyncs, not 50. A failed write is kept and tried again, and
//! refuses writes meanwhile; under `always` it ends the process (`Writing::flush`).
//!
//! **Loading.** The manifest lists a base (an RDB file when `aof-use-rdb-preamble yes` wrote
//! it, loaded by the RDB loader; or RESP commands, written with `no`) and incr files of RESP
//! commands. Commands are
//! replayed through a connection of the server's own: the start-up thread connects to one of
//! the listeners from a port it bound first, and the thread that accepts a connection from
//! exactly that address gives it the AOF client's rights (no -LOADING, no AUTH, no OOM; as
//! Redis's fake AOF client). So a command in the file runs exactly as a client's would: its
//! shard, MULTI/EXEC, scripts, everything. Replies are read and counted; an unknown command is
//! a fatal error as in Redis. While loading, the clock commands see is frozen before any TTL
//! in the file (Redis does not expire keys while loading): a key written with a TTL and
//! changed later is changed, not recreated, whatever the time of the load.

use crate::log;
use crate::msg::Msg;
use crate::shared::Shared;
use darner_aof::{Item, Manifest, Merger, Output};
use std::cell::RefCell;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the AOF thread receives.
pub enum ToAof {
    /// A thread's recorded changes.
    Chunk {
        thread: usize,
        ticket: u64,
        items: Vec<Item>,
    },
    /// A rewrite's base is written to `tmp` (or failed): it becomes the base once the log
    /// has been cut at barrier number `barrier`.
    RewriteDone {
        tmp: PathBuf,
        result: Result<(), String>,
        barrier: u64,
        started: Instant,
    },
    /// Write what is left, fsync, and end (CONFIG SET appendonly no, exit).
    Stop,
}

/// What the AOF thread shares with the others.
pub struct Aof {
    sender: Mutex<Option<Sender<ToAof>>>,
    /// Per thread: the last ticket whose chunk is written (and fsynced, under `always`).
    pub durable: Vec<AtomicU64>,
    /// Per thread: it holds replies until its chunks are fsynced (worker/durability.rs).
    pub holding: Vec<AtomicBool>,
    /// The AOF is being written.
    pub on: AtomicBool,
    pub current_size: AtomicU64,
    pub base_size: AtomicU64,
    /// The AOF's size after the last rewrite (or at start-up): auto rewrites grow from it.
    pub rewrite_base_size: AtomicU64,
    /// The errno of the last failed write to the incr file, 0 once a write went through
    /// (Redis's aof_last_write_status and aof_last_write_errno).
    pub write_errno: AtomicI32,
    /// The errno of the last failed fsync under `everysec`, 0 once one went through (Redis's
    /// aof_bio_fsync_status and aof_bio_fsync_errno).
    pub fsync_errno: AtomicI32,
    /// Bytes the AOF thread could not write yet (INFO's aof_buffer_length).
    pub buffer_length: AtomicU64,
    /// The address the start-up thread's replay connection comes from.
    pub loader_peer: Mutex<Option<SocketAddr>>,
    /// A rewrite is in progress (its base being written), or scheduled (a BGSAVE runs).
    pub rewriting: AtomicBool,
    pub rewrite_scheduled: AtomicBool,
    /// Unix seconds the rewrite in progress started; seconds the last one took (-1: none).
    pub rewrite_started: AtomicI64,
    pub last_rewrite_secs: AtomicI64,
    pub last_rewrite_failed: AtomicBool,
    pub rewrites: AtomicU64,
    pub rewrite_failures_in_a_row: AtomicU64,
    /// Barriers (rewrite cuts) asked for so far.
    barriers: AtomicU64,
    /// Changes each time the AOF thread is replaced (threads renew their channel copy).
    generation: AtomicU64,
    /// CONFIG SET appendonly yes is being carried out.
    switching: AtomicBool,
    /// Start-up is over (the cron switches the AOF on or off only then).
    pub ready: AtomicBool,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

thread_local! {
    /// This thread's copy of the channel, and the generation of the AOF it belongs to.
    static SENDER: RefCell<(u64, Option<Sender<ToAof>>)> = const { RefCell::new((0, None)) };
}

impl Aof {
    pub fn new(threads: usize) -> Aof {
        Aof {
            sender: Mutex::new(None),
            durable: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            holding: (0..threads).map(|_| AtomicBool::new(false)).collect(),
            on: AtomicBool::new(false),
            current_size: AtomicU64::new(0),
            base_size: AtomicU64::new(0),
            rewrite_base_size: AtomicU64::new(0),
            write_errno: AtomicI32::new(0),
            fsync_errno: AtomicI32::new(0),
            buffer_length: AtomicU64::new(0),
            loader_peer: Mutex::new(None),
            rewriting: AtomicBool::new(false),
            rewrite_scheduled: AtomicBool::new(false),
            rewrite_started: AtomicI64::new(0),
            last_rewrite_secs: AtomicI64::new(-1),
            last_rewrite_failed: AtomicBool::new(false),
            rewrites: AtomicU64::new(0),
            rewrite_failures_in_a_row: AtomicU64::new(0),
            barriers: AtomicU64::new(0),
            generation: AtomicU64::new(1),
            switching: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            writer: Mutex::new(None),
        }
    }

    /// Hands a thread's chunk to the AOF thread (dropped when the AOF is off).
    pub fn hand_over(&self, thread: usize, ticket: u64, items: Vec<Item>) {
        SENDER.with(|s| {
            let mut s = s.borrow_mut();
            let generation = self.generation.load(Ordering::Acquire);
            if s.0 != generation {
                *s = (
                    generation,
                    self.sender
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone(),
                );
            }
            if let Some(tx) = s.1.as_ref() {
                let _ = tx.send(ToAof::Chunk {
                    thread,
                    ticket,
                    items,
                });
            }
        });
    }

    /// Whether replies wait for the fsync (`appendfsync always` with the AOF on).
    pub fn acks_wait(&self, shared: &Shared) -> bool {
        self.on.load(Ordering::Relaxed)
            && shared.config.hot.appendfsync.load(Ordering::Relaxed) == 2
    }

    /// The AOF's half of Redis's writeCommandsDeniedByDiskError: with the AOF on, the errno
    /// of a write to the incr file (or an `everysec` fsync) that failed and has not gone
    /// through since.
    #[inline]
    pub fn disk_error(&self) -> Option<i32> {
        if !self.on.load(Ordering::Relaxed) {
            return None;
        }
        let write = self.write_errno.load(Ordering::Relaxed);
        if write != 0 {
            return Some(write);
        }
        let fsync = self.fsync_errno.load(Ordering::Relaxed);
        (fsync != 0).then_some(fsync)
    }

    /// INFO's aof_last_write_status: a failed write or fsync not gone through since.
    pub fn last_write_failed(&self) -> bool {
        self.write_errno.load(Ordering::Relaxed) != 0
            || self.fsync_errno.load(Ordering::Relaxed) != 0
    }

    /// Is the peer of a new connection the start-up thread's replay connection?
    pub fn is_loader(&self, peer: &SocketAddr) -> bool {
        self.loader_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            == Some(peer)
    }

    /// At exit or CONFIG SET appendonly no: recording stops, the AOF thread writes what it
    /// has, fsyncs, and ends; replies held for an fsync go.
    pub fn finish(&self) {
        // Replicas keep recording on (primary.rs).
        crate::propagate::set_enabled(crate::primary::feeding());
        self.on.store(false, Ordering::SeqCst);
        if let Some(tx) = self.sender.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = tx.send(ToAof::Stop);
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Some(h) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }
}

fn yes(shared: &Shared, name: &str) -> bool {
    crate::persist::yes(shared, name)
}

fn dir_name(shared: &Shared) -> PathBuf {
    PathBuf::from(
        shared
            .config
            .get("appenddirname")
            .unwrap_or_else(|| "appendonlydir".into()),
    )
}

fn file_name(shared: &Shared) -> String {
    shared
        .config
        .get("appendfilename")
        .unwrap_or_else(|| "appendonly.aof".into())
}

fn path_of(dir: &Path, name: &[u8]) -> PathBuf {
    dir.join(String::from_utf8_lossy(name).as_ref())
}

/// What start-up found: the manifest (empty when there is no AOF yet).
pub struct Startup {
    manifest: Manifest,
}

/// Reads the manifest when `appendonly yes` (None when the AOF is off). Exits on a bad one,
/// with Redis's message.
pub fn open_at_startup(shared: &Shared) -> Option<Startup> {
    if !yes(shared, "appendonly") {
        return None;
    }
    let manifest =
        read_manifest(&dir_name(shared), &file_name(shared)).unwrap_or_else(|e| fatal(&e));
    Some(Startup { manifest })
}

fn fatal(msg: &str) -> ! {
    log::warning(msg);
    std::process::exit(1);
}

/// Loads every file the manifest lists (the threads answer -LOADING meanwhile), then opens
/// the incr file to append to and starts the AOF thread. Exits on any error.
pub fn load_and_start(shared: &Arc<Shared>, mut st: Startup, listen: &[SocketAddr]) {
    let dir = dir_name(shared);
    let name = file_name(shared);
    let start = Instant::now();
    let files: Vec<darner_aof::AofInfo> = st.manifest.files_to_load().cloned().collect();
    let total = files.len();
    for (i, info) in files.iter().enumerate() {
        let path = path_of(&dir, &info.name);
        let last = i + 1 == total;
        let head = read_head(&path);
        match head {
            None if info.file_type == darner_aof::FileType::Base || !last => fatal(&format!(
                "Can't open the append-only file {}: No such file or directory",
                path.display()
            )),
            None => continue,
            Some(h) if h.is_empty() => {
                log::notice(&format!(
                    "DB loaded from {} file {}: {:.3} seconds",
                    kind_name(info),
                    String::from_utf8_lossy(&info.name),
                    0.0
                ));
                continue;
            }
            Some(h) => {
                if darner_aof::detect_format(&h) == darner_aof::FileFormat::Rdb {
                    let now = Shared::now_ms();
                    let loader = crate::persist::load::FileLoader::open(
                        &path,
                        shared.threads,
                        shared.databases,
                        now,
                    )
                    .unwrap_or_else(|e| fatal(&e));
                    if let Some(mut l) = loader {
                        l.keep_expired();
                        crate::persist::load::load_file(shared, l, &path);
                    }
                } else {
                    // Nothing expires while the commands run (see the essay).
                    crate::shared::freeze_clock(Some(0));
                    replay(shared, &path, last, listen);
                    crate::shared::freeze_clock(None);
                }
            }
        }
        if info.file_type == darner_aof::FileType::Base {
            let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            shared.aof.base_size.store(size, Ordering::Relaxed);
        }
        log::notice(&format!(
            "DB loaded from {} file {}: {:.3} seconds",
            kind_name(info),
            String::from_utf8_lossy(&info.name),
            start.elapsed().as_secs_f64()
        ));
    }
    if total > 0 {
        log::notice(&format!(
            "DB loaded from append only file: {:.3} seconds",
            start.elapsed().as_secs_f64()
        ));
    }
    start_writing(shared, &mut st.manifest, &dir, &name);
}

fn kind_name(info: &darner_aof::AofInfo) -> &'static str {
    match info.file_type {
        darner_aof::FileType::Base => "base",
        darner_aof::FileType::History => "history",
        darner_aof::FileType::Incr => "incr",
    }
}

/// The first bytes of a file (None: no such file).
fn read_head(path: &Path) -> Option<Vec<u8>> {
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => fatal(&format!(
            "Fatal error: can't open the append log file {} for reading: {e}",
            path.display()
        )),
    };
    let mut head = vec![0u8; 5];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => fatal(&format!(
                "Unrecoverable error reading {}: {e}",
                path.display()
            )),
        }
    }
    head.truncate(n);
    Some(head)
}

/// Commands sent before their replies are read.
const REPLAY_WINDOW: usize = 512;

/// Replays a RESP file through a connection of the server's own (see the essay).
fn replay(shared: &Arc<Shared>, path: &Path, last: bool, listen: &[SocketAddr]) {
    let file_label = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut sock = connect_loader(shared, listen)
        .unwrap_or_else(|e| fatal(&format!("Can't replay {}: {e}", path.display())));
    let mut f = std::fs::File::open(path).unwrap_or_else(|e| {
        fatal(&format!(
            "Fatal error: can't open the append log file {} for reading: {e}",
            path.display()
        ))
    });
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    let p = &shared.persist;
    p.loading_total_bytes.store(size, Ordering::Relaxed);
    let mut reader = darner_aof::Reader::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut out: Vec<u8> = Vec::new();
    let mut replies = Replies::default();
    let mut sent = 0usize;
    let mut read_bytes = 0u64;
    let mut eof = false;
    loop {
        match reader.next_event() {
            Ok(darner_aof::Event::Entry(e)) => {
                if let Some(argv) = e.argv() {
                    darner_aof::render_command(&mut out, argv);
                    sent += 1;
                    if sent - replies.count >= REPLAY_WINDOW {
                        send_and_wait(
                            &mut sock,
                            &mut out,
                            &mut replies,
                            sent - REPLAY_WINDOW / 2,
                            &file_label,
                        );
                    }
                }
            }
            Ok(darner_aof::Event::NeedData) if !eof => {
                let n = f.read(&mut buf).unwrap_or_else(|e| {
                    fatal(&format!(
                        "Unrecoverable error reading the append only file {file_label}: {e}"
                    ))
                });
                read_bytes += n as u64;
                p.loading_loaded_bytes.store(read_bytes, Ordering::Relaxed);
                if n == 0 {
                    eof = true;
                    reader.finish();
                } else {
                    reader.feed(&buf[..n]);
                }
            }
            Ok(darner_aof::Event::NeedData) => {
                reader.finish();
            }
            Ok(darner_aof::Event::End(ending)) => {
                if let Some(to) = ending.truncate_to() {
                    if !last {
                        fatal(darner_aof::reader::TRUNCATED_NOT_LAST);
                    }
                    if !yes(shared, "aof-load-truncated") {
                        if let Some(lines) = ending.fatal_message(&file_label) {
                            for l in lines {
                                log::warning(&l);
                            }
                        }
                        std::process::exit(1);
                    }
                    for l in ending.log_lines(&file_label) {
                        log::warning(&l);
                    }
                    // The commands of an unfinished MULTI were never sent as a block; cut the
                    // file where the last whole command ended, as Redis does.
                    if let Err(e) = std::fs::OpenOptions::new()
                        .write(true)
                        .open(path)
                        .and_then(|f| f.set_len(to).and_then(|_| f.sync_all()))
                    {
                        fatal(&format!("Error truncating the AOF file {file_label}: {e}"));
                    }
                }
                break;
            }
            Err(e) => {
                log::warning(&e.log_line(&file_label));
                fatal(&format!(
                    "Bad file format reading the append only file {file_label}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>"
                ));
            }
        }
    }
    send_and_wait(&mut sock, &mut out, &mut replies, sent, &file_label);
    let _ = sock.shutdown(std::net::Shutdown::Both);
}

#[derive(Default)]
struct Replies {
    buf: Vec<u8>,
    count: usize,
}

/// Sends what is buffered and reads replies until `upto` have come.
fn send_and_wait(
    sock: &mut std::net::TcpStream,
    out: &mut Vec<u8>,
    replies: &mut Replies,
    upto: usize,
    file: &str,
) {
    if !out.is_empty() {
        sock.write_all(out)
            .unwrap_or_else(|e| fatal(&format!("AOF replay connection failed: {e}")));
        out.clear();
    }
    let limits = darner_resp::Limits::default();
    let mut chunk = vec![0u8; 1 << 16];
    while replies.count < upto {
        let mut used = 0;
        while let Ok(Some((frame, n))) = darner_resp::decode(&replies.buf[used..], &limits) {
            used += n;
            replies.count += 1;
            if let darner_resp::Frame::Error(e) = &frame {
                if e.starts_with(b"ERR unknown command") {
                    fatal(&format!(
                        "Unknown command reading the append only file {file}: {}",
                        String::from_utf8_lossy(e)
                    ));
                }
            }
        }
        replies.buf.drain(..used);
        if replies.count >= upto {
            break;
        }
        let n = sock
            .read(&mut chunk)
            .unwrap_or_else(|e| fatal(&format!("AOF replay connection failed: {e}")));
        if n == 0 {
            fatal("AOF replay connection closed by the server");
        }
        replies.buf.extend_from_slice(&chunk[..n]);
    }
}

/// Connects to the server itself from an address the accepting thread recognizes.
fn connect_loader(shared: &Shared, listen: &[SocketAddr]) -> Result<std::net::TcpStream, String> {
    connect_self(listen, &shared.aof.loader_peer)
}

/// Connects to one of the server's own listeners (`listen`), first storing in `peer` the
/// local address it connects from, for the accepting thread to recognize the connection
/// (the AOF replay, the replica's link: replica.rs).
pub fn connect_self(
    listen: &[SocketAddr],
    peer: &Mutex<Option<SocketAddr>>,
) -> Result<std::net::TcpStream, String> {
    let target = listen
        .iter()
        .find(|a| a.ip().is_loopback())
        .or_else(|| listen.first())
        .copied()
        .ok_or("no TCP listener to connect to")?;
    let domain = socket2::Domain::for_address(target);
    let s = socket2::Socket::new(domain, socket2::Type::STREAM, None).map_err(|e| e.to_string())?;
    let local: SocketAddr = SocketAddr::new(
        if target.ip().is_unspecified() {
            match target {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            }
        } else {
            target.ip()
        },
        0,
    );
    s.bind(&local.into()).map_err(|e| e.to_string())?;
    let me = s
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .ok_or("no local address")?;
    *peer.lock().unwrap_or_else(|e| e.into_inner()) = Some(me);
    let to = SocketAddr::new(local.ip(), target.port());
    s.connect(&to.into()).map_err(|e| e.to_string())?;
    let _ = s.set_nodelay(true);
    Ok(s.into())
}

/// Opens the file to append to (creating the directory, an empty base and the first incr
/// file when there is no AOF yet, as Redis does on start-up), writes the manifest, and starts
/// the AOF thread.
fn start_writing(shared: &Arc<Shared>, manifest: &mut Manifest, dir: &Path, name: &str) {
    *shared
        .aof
        .loader_peer
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = None;
    if let Err(e) = std::fs::create_dir_all(dir) {
        fatal(&format!(
            "Can't open or create append-only dir {}: {e}",
            dir.display()
        ));
    }
    let mut changed = false;
    if manifest.is_empty() {
        // Nothing in memory yet: the base is an empty dataset (an RDB file, or with
        // `aof-use-rdb-preamble no` a file of commands: the libraries, if any).
        let rdb = yes(shared, "aof-use-rdb-preamble");
        let base = manifest.new_base(name.as_bytes(), rdb).name.clone();
        let path = path_of(dir, &base);
        let bytes = if rdb {
            empty_rdb(shared)
        } else {
            crate::bgsave::commands_header(shared, &shared.scripts.library_codes())
        };
        if let Err(e) = write_synced(&path, &bytes) {
            fatal(&format!(
                "Can't create the AOF base file {}: {e}",
                path.display()
            ));
        }
        shared
            .aof
            .base_size
            .store(bytes.len() as u64, Ordering::Relaxed);
        log::notice(&format!(
            "Creating AOF base file {} on server start",
            String::from_utf8_lossy(&base)
        ));
        changed = true;
    }
    let had_incr = !manifest.incr.is_empty();
    let incr = manifest.last_or_new_incr(name.as_bytes()).name.clone();
    if !had_incr {
        log::notice(&format!(
            "Creating AOF incr file {} on server start",
            String::from_utf8_lossy(&incr)
        ));
        changed = true;
    }
    let ipath = path_of(dir, &incr);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&ipath)
        .unwrap_or_else(|e| {
            fatal(&format!(
                "Can't open the append-only file {}: {e}",
                ipath.display()
            ))
        });
    if changed {
        if let Err(e) = persist_manifest(dir, name, manifest) {
            fatal(&format!("Can't persist the AOF manifest: {e}"));
        }
    }
    // Every listed file counts (Redis's aof_current_size at start-up).
    let size: u64 = manifest
        .files_to_load()
        .filter_map(|f| std::fs::metadata(path_of(dir, &f.name)).ok())
        .map(|m| m.len())
        .sum();
    shared.aof.current_size.store(size, Ordering::Relaxed);
    shared.aof.rewrite_base_size.store(size, Ordering::Relaxed);
    spawn_writer(
        shared,
        Writing {
            manifest: manifest.clone(),
            dir: dir.to_path_buf(),
            name: name.to_string(),
            incr_size: file.metadata().map_or(0, |m| m.len()),
            file,
            barriers_seen: 0,
            pending_done: None,
            unwritten: Vec::new(),
            error_logged: None,
            cut_unwritten: false,
            written_db: None,
        },
    );
}

/// Starts the AOF thread over `writing` and turns recording on.
fn spawn_writer(shared: &Arc<Shared>, writing: Writing) {
    let (tx, rx) = std::sync::mpsc::channel();
    *shared.aof.sender.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
    shared.aof.generation.fetch_add(1, Ordering::AcqRel);
    shared.aof.on.store(true, Ordering::SeqCst);
    crate::propagate::set_enabled(true);
    let sh = shared.clone();
    let h = std::thread::Builder::new()
        .name("aof".into())
        .spawn(move || writer_loop(sh, rx, writing))
        .unwrap_or_else(|e| fatal(&format!("Can't start the AOF thread: {e}")));
    *shared.aof.writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
}

/// The AOF thread's files: the manifest it keeps current, and the incr file it appends to.
struct Writing {
    manifest: Manifest,
    dir: PathBuf,
    name: String,
    file: std::fs::File,
    /// Barriers the log has been cut at.
    barriers_seen: u64,
    /// A rewrite's base that waits for its barrier.
    pending_done: Option<(PathBuf, Result<(), String>, u64, Instant)>,
    /// What could not be written yet (a failed write, see [`Writing::flush`]).
    unwritten: Vec<u8>,
    /// The incr file's size as written by this thread (a short write is cut back to it).
    incr_size: u64,
    /// When a write error was last logged (Redis logs one per 30 seconds).
    error_logged: Option<Instant>,
    /// The log was cut for a rewrite while what came before the cut was not written yet: it
    /// goes to the new incr file, so that rewrite's base (which holds it) must not be used.
    cut_unwritten: bool,
    /// The database selected where the written part of the incr file ends.
    written_db: Option<u32>,
}

impl Writing {
    /// The log's cut for a rewrite: what follows goes to a new incr file, which the
    /// manifest lists from now on (a crash during the rewrite loads old base, old incr
    /// files, then this one).
    ///
    /// What the old file could not take (a failed write) is written to the new one at once
    /// (`db`: the database selected at the cut): true when bytes reached it.
    fn rotate(&mut self, shared: &Shared, w: &mut darner_aof::Writer, db: Option<u32>) -> bool {
        self.barriers_seen += 1;
        if let Err(e) = self.file.sync_data() {
            log::warning(&format!("Can't persist the AOF file before a rewrite: {e}"));
        }
        let mut next = self.manifest.clone();
        let incr = next.new_incr(self.name.as_bytes()).name.clone();
        let path = path_of(&self.dir, &incr);
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|f| {
                persist_manifest(&self.dir, &self.name, &next)?;
                Ok(f)
            });
        let mut wrote = false;
        match opened {
            Ok(f) => {
                self.file = f;
                self.incr_size = 0;
                if !self.unwritten.is_empty() {
                    // What the old file did not take goes first into the new one (read
                    // from database 0 on, as every file is).
                    self.cut_unwritten = true;
                    if let Some(db) = self.written_db {
                        let mut head = Vec::new();
                        darner_aof::render_select(&mut head, db);
                        head.append(&mut self.unwritten);
                        self.unwritten = head;
                    }
                }
                self.written_db = None;
                self.manifest = next;
                w.force_select();
                log::notice(&format!(
                    "Creating AOF incr file {} on background rewrite",
                    String::from_utf8_lossy(&incr)
                ));
                wrote = self.flush(shared, Vec::new(), db);
            }
            Err(e) => {
                // The rewrite fails (its base would lose what the old incr file gets next).
                log::warning(&format!("Can't open new incr AOF {}: {e}", path.display()));
                self.barriers_seen = u64::MAX;
            }
        }
        self.try_finish(shared);
        wrote
    }

    fn rewrite_done(
        &mut self,
        shared: &Shared,
        tmp: PathBuf,
        result: Result<(), String>,
        barrier: u64,
        started: Instant,
    ) {
        self.pending_done = Some((tmp, result, barrier, started));
        self.try_finish(shared);
    }

    /// Installs a finished rewrite's base once the log has been cut for it.
    fn try_finish(&mut self, shared: &Shared) {
        let Some((_, _, barrier, _)) = &self.pending_done else {
            return;
        };
        if self.barriers_seen < *barrier {
            return;
        }
        let (tmp, result, _, started) = self.pending_done.take().expect("pending");
        let result = if self.barriers_seen == u64::MAX {
            self.barriers_seen = 0;
            Err("the AOF could not be cut for the rewrite".to_string())
        } else if std::mem::take(&mut self.cut_unwritten) {
            Err("the AOF could not be written up to the rewrite's cut".to_string())
        } else {
            result
        };
        let result = result.and_then(|()| {
            install_base(&self.dir, &self.name, &mut self.manifest, &tmp, true)
                .map_err(|e| e.to_string())
        });
        if result.is_ok() {
            let base = self
                .manifest
                .base
                .as_ref()
                .and_then(|b| std::fs::metadata(path_of(&self.dir, &b.name)).ok())
                .map_or(0, |m| m.len());
            let incr = self.file.metadata().map(|m| m.len()).unwrap_or(0);
            shared.aof.base_size.store(base, Ordering::Relaxed);
            shared
                .aof
                .current_size
                .store(base + incr, Ordering::Relaxed);
            shared
                .aof
                .rewrite_base_size
                .store(base + incr, Ordering::Relaxed);
        }
        rewrite_finished(shared, &tmp, result, started);
    }
}

/// A rewrite's base at `tmp` becomes the manifest's base; the incr files it holds (all
/// but the one being written, with `keep_last`) become history and are deleted (Redis's
/// backgroundRewriteDoneHandler and aofDelHistoryFiles).
fn install_base(
    dir: &Path,
    name: &str,
    manifest: &mut Manifest,
    tmp: &Path,
    keep_last: bool,
) -> std::io::Result<()> {
    let mut next = manifest.clone();
    // Named for what it holds (`.base.rdb` or `.base.aof`), whatever the directive says now.
    let rdb = holds_rdb(tmp)?;
    let base = next.new_base(name.as_bytes(), rdb).name.clone();
    next.mark_rewritten_incr_as_history(keep_last);
    std::fs::rename(tmp, path_of(dir, &base))?;
    persist_manifest(dir, name, &next)?;
    *manifest = next;
    let history = manifest.take_history();
    if !history.is_empty() {
        for h in &history {
            let _ = std::fs::remove_file(path_of(dir, &h.name));
        }
        persist_manifest(dir, name, manifest)?;
    }
    Ok(())
}

/// Whether the file at `path` is an RDB file (else commands).
fn holds_rdb(path: &Path) -> std::io::Result<bool> {
    let mut head = Vec::with_capacity(5);
    std::fs::File::open(path)?.take(5).read_to_end(&mut head)?;
    Ok(darner_aof::detect_format(&head) == darner_aof::FileFormat::Rdb)
}

/// Records a rewrite's end (INFO persistence) and logs it as Redis does.
fn rewrite_finished(shared: &Shared, tmp: &Path, result: Result<(), String>, started: Instant) {
    let a = &shared.aof;
    a.last_rewrite_secs
        .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
    match result {
        Ok(()) => {
            a.last_rewrite_failed.store(false, Ordering::Relaxed);
            a.rewrite_failures_in_a_row.store(0, Ordering::Relaxed);
            a.rewrites.fetch_add(1, Ordering::Relaxed);
            log::notice("Background AOF rewrite terminated with success");
            log::notice("Background AOF rewrite finished successfully");
        }
        Err(e) => {
            let _ = std::fs::remove_file(tmp);
            a.last_rewrite_failed.store(true, Ordering::Relaxed);
            a.rewrite_failures_in_a_row.fetch_add(1, Ordering::Relaxed);
            log::warning(&format!("Background AOF rewrite failed: {e}"));
        }
    }
    a.rewriting.store(false, Ordering::Release);
}

/// An RDB file of no keys, as an AOF base (`aof-base 1`).
fn empty_rdb(shared: &Shared) -> Vec<u8> {
    let encode = darner_rdb::EncodeOptions {
        compression: yes(shared, "rdbcompression"),
    };
    let mut w = darner_rdb::encode::FileWriter::new(
        darner_rdb::WRITTEN_VERSION,
        yes(shared, "rdbchecksum"),
        encode,
    );
    crate::persist::aux_fields_for(shared, &mut w, Shared::now_ms(), true);
    for code in shared.scripts.library_codes() {
        w.function(&code);
    }
    let mut out = w.take();
    out.extend_from_slice(&w.finish());
    out
}

/// Writes `bytes` to `path` through a temp file, fsynced and renamed.
fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        "temp-{}-{}",
        std::process::id(),
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    sync_dir(dir);
    Ok(())
}

fn sync_dir(dir: &Path) {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Writes the manifest: temp file, fsync, rename, directory fsync (Redis's
/// `persistAofManifest`).
fn persist_manifest(dir: &Path, name: &str, m: &Manifest) -> std::io::Result<()> {
    let path = path_of(dir, &darner_aof::manifest::manifest_name(name.as_bytes()));
    write_synced(&path, &m.render())
}

/// The AOF thread: merges, writes, fsyncs, publishes; cuts the log for rewrites.
fn writer_loop(shared: Arc<Shared>, rx: Receiver<ToAof>, mut st: Writing) {
    let threads = shared.threads;
    let mut merger = Merger::new(threads);
    let mut w = darner_aof::Writer::new(yes(&shared, "aof-timestamp-enabled"));
    let mut buf: Vec<u8> = Vec::new();
    let mut last_fsync = Instant::now();
    let mut unsynced = false;
    let mut published = vec![0u64; threads];
    let mut open = true;
    let mut busy = false;
    while open {
        // `everysec` and `no`: nothing waits for this thread, so while the shards keep handing
        // chunks over it lets them gather for a moment instead of being woken for each one (a
        // shard hands one over per loop turn: thousands of wake-ups a second, whose context
        // switches cost more than the writing itself). Under `always` the replies wait for it:
        // it wakes at once.
        if busy
            && st.unwritten.is_empty()
            && shared.config.hot.appendfsync.load(Ordering::Relaxed) != 2
        {
            std::thread::sleep(GATHER);
        }
        let wait = if !st.unwritten.is_empty() {
            // A failed write is tried again soon (Redis: before every event loop sleep).
            RETRY_WRITE
        } else if unsynced {
            Duration::from_secs(1).saturating_sub(last_fsync.elapsed())
        } else {
            Duration::from_secs(1)
        };
        let mut got = Vec::new();
        match rx.recv_timeout(wait.max(Duration::from_millis(1))) {
            Ok(c) => got.push(c),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => open = false,
        }
        loop {
            match rx.try_recv() {
                Ok(c) => got.push(c),
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        busy = !got.is_empty();
        let mut dones = Vec::new();
        for m in got {
            match m {
                ToAof::Chunk {
                    thread,
                    ticket,
                    items,
                } => merger.push(thread, ticket, items),
                ToAof::RewriteDone {
                    tmp,
                    result,
                    barrier,
                    started,
                } => dones.push((tmp, result, barrier, started)),
                ToAof::Stop => open = false,
            }
        }
        let now_secs = Shared::now_ms() / 1000;
        w.set_timestamps(yes(&shared, "aof-timestamp-enabled"));
        // Written in pieces: a barrier switches files between two of them.
        // Each with the database selected at its end.
        let mut pieces: Vec<(Vec<u8>, Option<u32>)> = Vec::new();
        merger.drain(&mut |o| match o {
            Output::Cmd(c) => w.append(&mut buf, c.db, &c.argv, now_secs),
            Output::Run(r) => w.append_rendered(&mut buf, r.db, &r.resp, now_secs),
            Output::Block(cmds) => {
                let list: Vec<(u32, &[bytes::Bytes])> = cmds
                    .iter()
                    .map(|c| (c.db.unwrap_or(0), &c.argv[..]))
                    .collect();
                w.append_transaction(&mut buf, &list, now_secs)
            }
            Output::Barrier => pieces.push((std::mem::take(&mut buf), w.selected_db())),
        });
        let cuts = pieces.len();
        pieces.push((std::mem::take(&mut buf), w.selected_db()));
        for (i, (piece, db)) in pieces.into_iter().enumerate() {
            // Also when there is nothing new: what a failed write left is tried again.
            if st.flush(&shared, piece, db) {
                unsynced = true;
            }
            if i < cuts {
                // The old file is fsynced; the new one holds what the old one did not take.
                unsynced = st.rotate(&shared, &mut w, db);
                last_fsync = Instant::now();
            }
        }
        for (tmp, result, barrier, started) in dones {
            st.rewrite_done(&shared, tmp, result, barrier, started);
        }
        let policy = shared.config.hot.appendfsync.load(Ordering::Relaxed);
        let sync_now = unsynced
            && (policy == 2
                || (policy == 1 && last_fsync.elapsed() >= Duration::from_secs(1))
                || !open);
        if sync_now {
            sync(&shared, &st.file, policy);
            unsynced = false;
            last_fsync = Instant::now();
        }
        // Under `always` a chunk counts once fsynced; otherwise once written.
        if policy != 2 || !unsynced {
            for (t, last) in published.iter_mut().enumerate() {
                let d = merger.done_ticket(t);
                if d > *last {
                    *last = d;
                    shared.aof.durable[t].store(d, Ordering::SeqCst);
                    if shared.aof.holding[t].load(Ordering::SeqCst) {
                        shared.send(t, Msg::AofSynced);
                    }
                }
            }
        }
    }
    let _ = st.file.sync_data();
    if let Some((tmp, _, _, started)) = st.pending_done.take() {
        rewrite_finished(&shared, &tmp, Err("the AOF was turned off".into()), started);
    }
    // Nothing waits for this AOF's fsyncs any more.
    for t in 0..threads {
        shared.aof.durable[t].store(u64::MAX, Ordering::SeqCst);
        shared.send(t, Msg::AofSynced);
    }
}

/// How soon a failed write is tried again.
const RETRY_WRITE: Duration = Duration::from_millis(100);

/// How long the AOF thread lets chunks gather between two batches while they keep coming,
/// under `everysec` and `no` (see `writer_loop`).
const GATHER: Duration = Duration::from_millis(1);
/// Seconds between two logs of a failing write (Redis's AOF_WRITE_LOG_ERROR_RATE).
const WRITE_ERROR_LOG_RATE: Duration = Duration::from_secs(30);

impl Writing {
    /// Appends `piece` (rendered up to database `db`) to what waits, and writes that to the
    /// incr file: true when bytes reached it. As Redis's flushAppendOnlyFile: a failed write
    /// under `always` ends the process (its replies wait for this write, and the changes are
    /// made: they can neither be acknowledged nor undone); otherwise the error is recorded
    /// (writes are refused, bgsave.rs `writes_denied`), a short write is cut back off the file
    /// (or, if that fails, kept and the rest waits), and what was not written waits for the
    /// next try. The first write that goes through clears the error.
    fn flush(&mut self, shared: &Shared, piece: Vec<u8>, db: Option<u32>) -> bool {
        if self.unwritten.is_empty() {
            self.unwritten = piece;
        } else {
            self.unwritten.extend_from_slice(&piece);
        }
        if self.unwritten.is_empty() {
            return false;
        }
        let a = &shared.aof;
        let (written, error) = write_some(&self.file, &self.unwritten);
        let Some(error) = error else {
            self.wrote(shared, written);
            self.unwritten.clear();
            self.written_db = db;
            a.buffer_length.store(0, Ordering::Relaxed);
            if a.write_errno.swap(0, Ordering::Relaxed) != 0 {
                log::warning("AOF write error looks solved, Redis can write again.");
            }
            return true;
        };
        let can_log = self
            .error_logged
            .is_none_or(|t| t.elapsed() > WRITE_ERROR_LOG_RATE);
        if can_log {
            self.error_logged = Some(Instant::now());
        }
        let mut kept = written;
        let errno = if written == 0 {
            if can_log {
                log::warning(&format!(
                    "Error writing to the AOF file: {}",
                    log::strerror(&error)
                ));
            }
            error.raw_os_error().unwrap_or(libc::EIO)
        } else {
            if can_log {
                log::warning(&format!(
                    "Short write while writing to the AOF file: (nwritten={written}, expected={})",
                    self.unwritten.len()
                ));
            }
            match self.file.set_len(self.incr_size) {
                Ok(()) => kept = 0,
                Err(e) if can_log => log::warning(&format!(
                    "Could not remove short write from the append-only file.  Redis may refuse \
                     to load the AOF the next time it starts.  ftruncate: {}",
                    log::strerror(&e)
                )),
                Err(_) => {}
            }
            libc::ENOSPC
        };
        if shared.config.hot.appendfsync.load(Ordering::Relaxed) == 2 {
            fatal("Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...");
        }
        a.write_errno.store(errno, Ordering::Relaxed);
        if kept > 0 {
            self.wrote(shared, kept);
            self.unwritten.drain(..kept);
        }
        a.buffer_length
            .store(self.unwritten.len() as u64, Ordering::Relaxed);
        kept > 0
    }

    fn wrote(&mut self, shared: &Shared, n: usize) {
        self.incr_size += n as u64;
        shared
            .aof
            .current_size
            .fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Writes as much of `buf` as the file takes (Redis's aofWrite: a short write is followed
/// by another until an error): the bytes written, and the error that stopped it.
fn write_some(mut file: &std::fs::File, buf: &[u8]) -> (usize, Option<std::io::Error>) {
    let mut done = 0;
    while done < buf.len() {
        match file.write(&buf[done..]) {
            Ok(0) => return (done, Some(std::io::Error::from_raw_os_error(libc::ENOSPC))),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}

/// The fsync `appendfsync` calls for. Under `always` a failure ends the process, as a failed
/// write does; under `everysec` it is recorded (writes are refused until an fsync goes
/// through), as Redis's background fsync does, which also ignores EBADF and EINVAL.
fn sync(shared: &Shared, file: &std::fs::File, policy: u8) {
    let a = &shared.aof;
    match file.sync_data() {
        Err(e) if policy == 2 => fatal(&format!(
            "Can't persist AOF for fsync error when the AOF fsync policy is 'always': {}. Exiting...",
            log::strerror(&e)
        )),
        Err(e) if !matches!(e.raw_os_error(), Some(libc::EBADF | libc::EINVAL)) => {
            let errno = e.raw_os_error().unwrap_or(libc::EIO);
            if a.fsync_errno.swap(errno, Ordering::Relaxed) == 0 {
                log::warning(&format!(
                    "Fail to fsync the AOF file: {}",
                    log::strerror(&e)
                ));
            }
        }
        _ => a.fsync_errno.store(0, Ordering::Relaxed),
    }
}

pub const ERR_REWRITING: &[u8] = b"ERR Background append only file rewriting already in progress";

/// How BGREWRITEAOF went.
pub enum Rewrite {
    Started,
    /// A BGSAVE runs: the cron starts the rewrite after it.
    Scheduled,
}

/// Starts a rewrite without fork: `tx` holds every shard. The base is a snapshot of that
/// instant (the BGSAVE machinery, bgsave.rs, writing an RDB with `aof-base 1`, or with
/// `aof-use-rdb-preamble no` the commands that rebuild each key), and the log is
/// cut at the same instant (the transaction is a barrier in the AOF thread's merge): what
/// follows goes to a new incr file, opened before the rewrite goes on. When the base is
/// written, it becomes the manifest's base and the incr files it holds are deleted.
pub async fn start_rewrite(tx: &crate::exec::Tx) -> Result<Rewrite, &'static [u8]> {
    let shared = tx.shared().clone();
    let a = &shared.aof;
    if a.rewriting.load(Ordering::Acquire) {
        return Err(ERR_REWRITING);
    }
    if shared.bgsaves.in_progress.load(Ordering::Acquire) {
        a.rewrite_scheduled.store(true, Ordering::Release);
        return Ok(Rewrite::Scheduled);
    }
    let on = a.on.load(Ordering::Acquire);
    let barrier = if on {
        tx.start_barrier_log();
        a.barriers.fetch_add(1, Ordering::AcqRel) + 1
    } else {
        0
    };
    rewrite_at_cut(tx, on, barrier).await
}

/// The rewrite from the cut on (`tx` holds every shard): with `on`, the AOF thread installs
/// the base once the log has been cut at `barrier` (0: it was started at the cut).
async fn rewrite_at_cut(
    tx: &crate::exec::Tx,
    on: bool,
    barrier: u64,
) -> Result<Rewrite, &'static [u8]> {
    let shared = tx.shared().clone();
    let a = &shared.aof;
    a.rewrite_scheduled.store(false, Ordering::Release);
    a.rewriting.store(true, Ordering::Release);
    a.rewrite_started
        .store(Shared::now_ms() / 1000, Ordering::Relaxed);
    let started = Instant::now();
    let mut snap =
        crate::persist::snapshot::SnapshotOptions::from_config(&shared, Shared::now_ms());
    // `aof-use-rdb-preamble` as it is now: an RDB base, or one of commands.
    let tail = if yes(&shared, "aof-use-rdb-preamble") {
        crate::bgsave::Tail::Rdb {
            checksum: yes(&shared, "rdbchecksum"),
        }
    } else {
        snap.form = crate::persist::snapshot::Form::Commands;
        crate::bgsave::Tail::None
    };
    let (header, shards, mut from_shards) =
        crate::bgsave::cut(tx, snap, true, Arc::new(AtomicBool::new(false))).await;
    // The cut's end in the log: every shard's marker is in, the transaction's end follows.
    tx.end_log();
    log::notice("Background append only file rewriting started");
    let tmp = PathBuf::from(rewrite_temp_name());
    let sh = shared.clone();
    std::thread::Builder::new()
        .name("aof-rewrite".into())
        .spawn(move || {
            let result = crate::bgsave::write_file(
                &header,
                tail,
                shards,
                &mut from_shards,
                &tmp,
                &AtomicBool::new(false),
            )
            .map(drop)
            .map_err(|e| e.to_string());
            if result.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            if on {
                let sent = sh
                    .aof
                    .sender
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                    .map(|s| {
                        s.send(ToAof::RewriteDone {
                            tmp: tmp.clone(),
                            result: result.clone(),
                            barrier,
                            started,
                        })
                        .is_ok()
                    })
                    .unwrap_or(false);
                if !sent {
                    rewrite_finished(&sh, &tmp, Err("the AOF was turned off".into()), started);
                }
            } else {
                // No AOF thread: the manifest on disk is changed here (no incr file stays).
                let dir = dir_name(&sh);
                let name = file_name(&sh);
                let result = result.and_then(|()| {
                    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
                    let mut m = read_manifest(&dir, &name)?;
                    install_base(&dir, &name, &mut m, &tmp, false).map_err(|e| e.to_string())
                });
                rewrite_finished(&sh, &tmp, result, started);
            }
        })
        .map_err(|_| &b"ERR Can't start the rewrite thread"[..])?;
    Ok(Rewrite::Started)
}

/// A rewrite's base while it is written, in the working directory (Redis's name).
pub fn rewrite_temp_name() -> String {
    format!("temp-rewriteaof-bg-{}.aof", std::process::id())
}

/// The manifest in `dir` (an empty one when there is none). A bad one: Redis's lines are
/// logged, and the error names the file.
fn read_manifest(dir: &Path, name: &str) -> Result<Manifest, String> {
    let mpath = path_of(dir, &darner_aof::manifest::manifest_name(name.as_bytes()));
    match std::fs::read(&mpath) {
        Ok(bytes) => Manifest::parse(&bytes).map_err(|e| {
            for l in e.log_lines() {
                log::warning(&l);
            }
            format!(
                "Failed to load the manifest file {}: {}",
                mpath.display(),
                e.message()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Manifest::new()),
        Err(e) => Err(format!(
            "Fatal error: can't open the AOF manifest {}: {e}",
            mpath.display()
        )),
    }
}

/// Thread 0's cron: a rewrite scheduled behind a BGSAVE, or one the AOF's growth calls for
/// (`auto-aof-rewrite-percentage` over the size after the last rewrite, past
/// `auto-aof-rewrite-min-size`), as a task holding every shard.
pub fn cron(
    shared: &Arc<Shared>,
) -> Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>> {
    let a = &shared.aof;
    if !a.ready.load(Ordering::Acquire) {
        return None;
    }
    let want = shared.config.hot.appendonly.load(Ordering::Relaxed);
    let on = a.on.load(Ordering::Acquire);
    if !want && on {
        log::notice("AOF was disabled by CONFIG SET appendonly no");
        a.finish();
        return None;
    }
    if a.rewriting.load(Ordering::Acquire) || shared.bgsaves.in_progress.load(Ordering::Acquire) {
        return None;
    }
    if want && !on && !a.switching.swap(true, Ordering::AcqRel) {
        let shared = shared.clone();
        return Some(Box::pin(async move {
            let tx = crate::exec::Tx::new(shared.clone(), Default::default());
            tx.reserve(crate::cmd::transactions::every_shard(shared.threads))
                .await;
            if let Err(e) = switch_on(&tx).await {
                log::warning(&e);
                // Not retried every tick: CONFIG SET appendonly yes again tries again.
                shared.config.hot.appendonly.store(false, Ordering::Relaxed);
            }
            tx.release();
            shared.aof.switching.store(false, Ordering::Release);
        }));
    }
    let due = a.rewrite_scheduled.load(Ordering::Acquire) || {
        let pct = shared.config.get_i64("auto-aof-rewrite-percentage");
        let min = shared.config.get_i64("auto-aof-rewrite-min-size").max(0) as u64;
        let size = a.current_size.load(Ordering::Relaxed);
        let base = a.rewrite_base_size.load(Ordering::Relaxed).max(1);
        a.on.load(Ordering::Relaxed)
            && pct > 0
            && size > min
            && (size * 100 / base).saturating_sub(100) >= pct as u64
            // After a failed rewrite, wait before the next (Redis: AOF_WAIT_REWRITE_DELAY).
            && (a.rewrite_failures_in_a_row.load(Ordering::Relaxed) == 0
                || Shared::now_ms() / 1000 - a.rewrite_started.load(Ordering::Relaxed) >= 60)
    };
    if !due {
        return None;
    }
    if !a.rewrite_scheduled.load(Ordering::Relaxed) {
        log::notice(&format!(
            "Starting automatic rewriting of AOF on {}% growth",
            (a.current_size.load(Ordering::Relaxed) * 100
                / a.rewrite_base_size.load(Ordering::Relaxed).max(1))
            .saturating_sub(100)
        ));
    }
    let shared = shared.clone();
    Some(Box::pin(async move {
        let tx = crate::exec::Tx::new(shared.clone(), Default::default());
        tx.reserve(crate::cmd::transactions::every_shard(shared.threads))
            .await;
        let _ = start_rewrite(&tx).await;
        tx.release();
    }))
}

/// CONFIG SET appendonly yes (`tx` holds every shard): from this instant on every change is
/// recorded into a new incr file, and a rewrite writes the base of this same instant; the
/// manifest names them once the base is written (a crash before that leaves the old
/// manifest, as Redis's temporary incr file does).
async fn switch_on(tx: &crate::exec::Tx) -> Result<(), String> {
    let shared = tx.shared().clone();
    let dir = dir_name(&shared);
    let name = file_name(&shared);
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "Can't open or create append-only dir {}: {e}",
            dir.display()
        )
    })?;
    let mut manifest = read_manifest(&dir, &name)?;
    let incr = manifest.new_incr(name.as_bytes()).name.clone();
    let path = path_of(&dir, &incr);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| {
            format!(
                "Redis needs to enable the AOF but can't open the append only file {}: {e}",
                path.display()
            )
        })?;
    shared.aof.current_size.store(0, Ordering::Relaxed);
    // A new file: the errors of the last one no longer refuse writes (Redis's
    // startAppendOnly).
    if shared.aof.fsync_errno.swap(0, Ordering::Relaxed) != 0 {
        log::warning("AOF reopen, just ignore the AOF fsync error in bio job");
    }
    if shared.aof.write_errno.swap(0, Ordering::Relaxed) != 0 {
        log::warning("AOF reopen, just ignore the last error.");
    }
    spawn_writer(
        &shared,
        Writing {
            manifest,
            dir,
            name,
            file,
            barriers_seen: 0,
            pending_done: None,
            unwritten: Vec::new(),
            incr_size: 0,
            error_logged: None,
            cut_unwritten: false,
            written_db: None,
        },
    );
    log::notice("AOF was enabled by CONFIG SET appendonly yes");
    rewrite_at_cut(tx, true, 0)
        .await
        .map(|_| ())
        .map_err(|e| String::from_utf8_lossy(e).into_owned())
}
