//! BGSAVE without fork: a point-in-time RDB file of every shard, written while the shards go
//! on serving.
//!
//! Redis forks: the child has the parent's memory as it was, copy-on-write, and writes it
//! out. That stalls the parent while the page tables are copied and, under writes, can
//! double its memory. Here there is no second process. Instead:
//!
//! 1. **One cut.** BGSAVE is a transaction over every shard (`Locks::All`): while it holds
//!    them, no command runs anywhere, so the moment it marks the tables is one point in
//!    every shard's order (a MULTI/EXEC or MSET over several shards is wholly before it or
//!    wholly after). In that hop each shard marks each of its databases' tables
//!    ([`darner_engine::Db::snapshot_begin`]) with a sink that serializes an entry into the
//!    shard's buffer, and the transaction lets go at once.
//! 2. **Serialize before write.** From then on a write to a key the snapshot has not
//!    written yet first hands that key, as it still is, to the sink (the table's guard,
//!    table.rs "Snapshots without fork"); the rest is written by the shard's loop in
//!    bounded steps between requests ([`step`]). Keys created after the cut are recorded
//!    by the table as not the snapshot's and are not in the file; keys deleted after it
//!    were written first. A flushed database finishes its snapshot as its old table is freed.
//! 3. **One file.** Each shard sends its buffer in chunks to a writer thread, each chunk
//!    self-contained (it starts with the SELECTDB of its entries), so the chunks of several
//!    shards interleave freely. The writer puts the header, AUX fields, function
//!    libraries and each database's size (SELECTDB + RESIZEDB, the shards' counts at the
//!    cut) first, appends the chunks as they come with the CRC-64 running over them,
//!    and once every shard has said it is done writes the end and the checksum to
//!    `temp-bg-<pid>.rdb`, fsyncs it, renames it over the dump file and fsyncs the
//!    directory: a crash leaves the old file or the new one, never a part.
//!
//! A shard knows it is done when nothing but itself holds its buffer: each marked table's
//! sink holds a reference, dropped when that table's snapshot completes (written by steps,
//! by guards, or by the freeing of a flushed table).
//!
//! **Big values in steps.** A hash, set, sorted set, list or stream of more than SAVE's
//! `BIG_ELEMENTS` (persist/snapshot.rs) is not serialized when the cursor reaches it: the sink
//! takes it for later, and the shard's loop writes it [`BIG_STEP`] elements a turn (as RDB's
//! element-by-element types, a stream node by node). Until it is done, the table forces it:
//! a write to that key first has the rest written at once, from the value as it still is, so
//! the record stays the value at the cut (a stream's metadata and groups come last, so a
//! write that changes only a group is caught as well). That write would hold the whole shard
//! for as long (10 ms and more for a 1M-field hash), so a command that touches a big value the
//! save still owes waits instead ([`key_waits`], [`tx_waits`]): it is parked with the work
//! that waits for streamed keys (stream.rs, `Streams`), the value is written next in its
//! bounded steps (even while the writer is behind: the command must not wait for the disk),
//! and the command runs once it is written; the forced write remains for what cannot wait
//! (expiry, eviction, a part reserving the whole shard).
//!
//! **A big record streams.** A key's record must be contiguous in the file, so no other
//! chunk may come between its parts. One shard at a time (the pipe's lane) sends its big
//! record to the writer part by part as it is written ([`Piece::RecordStart`],
//! [`Piece::RecordPart`], [`Piece::RecordEnd`]); meanwhile the writer holds every other piece
//! back ([`FromShards`]) and writes them after the record's end. The lane's holder does only
//! its record's steps until it ends, and the others' steps wait once what is held back passes
//! [`MAX_QUEUED`]. A shard that finds the lane taken keeps its big record in parts and sends
//! it whole at its end, as all did before: a 10M-field hash's record (about 175 MiB) held
//! whole was most of the memory a BGSAVE added (bench/persistence.py at the size,
//! peak 1.12 of steady).
//!
//! **An AOF base of commands** (`aof-use-rdb-preamble no`) is this same snapshot with
//! `SnapshotOptions::form` set to `Form::Commands`: the entries are encoded as commands, each
//! chunk starts with `SELECT`, the header is [`commands_header`] and the file has no EOF or
//! checksum ([`Tail::None`]).
//!
//! Memory: the buffers in flight (a shard flushes at [`CHUNK`] bytes; while more than
//! [`MAX_QUEUED`] bytes wait for the writer thread, which a slow disk causes, the shards' own
//! steps wait too), the records of big values whose shard did not get the lane, and the
//! values that writes forced out early; no copy of the dataset.

use crate::persist::snapshot::{
    has_hash_field_ttls, is_big, may_be_big, write_select, write_small, Big, Form, SnapshotOptions,
};
use crate::shared::Shared;
use darner_engine::{Clock, Entry};
use darner_rdb::encode::FileWriter;
use darner_rdb::EncodeOptions;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A shard hands its buffer to the writer once it holds this much.
pub const CHUNK: usize = 256 << 10;
/// The buffer a shard hands on under `rdb-key-save-delay` (Redis's PROTO_IOBUF_LEN).
const DELAYED_CHUNK: usize = 16 << 10;
/// Time a shard's loop spends on its snapshot per turn. 500 µs gave a probe's GET a p99.9 of
/// 9.1 ms during BGSAVE on two cores (bench/persistence.py); 200 µs 1.2-3.1 ms, at the same
/// BGSAVE time.
const STEP_TIME: Duration = Duration::from_micros(200);
/// Keys written between two looks at the clock. 64 (about 150 µs of 1 KB values) made a
/// snapshot step take 330 µs of CPU at the median and 650 at p99 with [`STEP_TIME`] at
/// 200 µs; 16: 220 and 450 (bench/persistence.py, per-step CPU time).
const STEP_KEYS: usize = 16;
/// Elements of a big value written per step.
const BIG_STEP: usize = 1024;

/// `rdb-key-save-delay`: microseconds a shard's snapshot step sleeps after each key it
/// writes (0: none).
pub static KEY_SAVE_DELAY_US: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Seconds the cron waits after a failed background save before a save point or a
/// scheduled BGSAVE may start another (Redis's CONFIG_BGSAVE_RETRY_DELAY).
pub const RETRY_DELAY: i64 = 5;

/// Redis's refusal of writes after a failed background save (its shared.bgsaveerr).
pub const ERR_MISCONF: &[u8] = b"MISCONF Redis is configured to save RDB snapshots, but it's \
currently unable to persist to disk. Commands that may modify the data set are disabled, because \
this instance is configured to report errors during writes if RDB snapshotting fails \
(stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// Why writes are refused (Redis's writeCommandsDeniedByDiskError).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskError {
    /// The last background save failed, save points are set and
    /// stop-writes-on-bgsave-error is yes, until a save succeeds.
    Rdb,
    /// A write to the AOF (or an `everysec` fsync of it) failed with this errno, until one
    /// goes through (aof.rs `Writing::flush`).
    Aof(i32),
}

impl DiskError {
    /// The refusal: [`ERR_MISCONF`], or Redis's `MISCONF Errors writing to the AOF file: `
    /// and strerror's text.
    pub fn message(self) -> std::borrow::Cow<'static, [u8]> {
        match self {
            DiskError::Rdb => ERR_MISCONF.into(),
            DiskError::Aof(errno) => format!(
                "MISCONF Errors writing to the AOF file: {}",
                crate::log::errno_text(errno)
            )
            .into_bytes()
            .into(),
        }
    }
}

/// Redis's writeCommandsDeniedByDiskError: whether writes, and PING, are refused now, and
/// with what ([`DiskError::message`]). The RDB reason comes first, as in Redis.
#[inline]
pub fn writes_denied(shared: &Shared) -> Option<DiskError> {
    if shared.persist.last_save_failed.load(Ordering::Relaxed)
        && shared.config.hot.save_points.load(Ordering::Relaxed)
        && shared
            .config
            .hot
            .stop_writes_on_bgsave_error
            .load(Ordering::Relaxed)
    {
        return Some(DiskError::Rdb);
    }
    shared.aof.disk_error().map(DiskError::Aof)
}

/// What the process knows of its background saves (INFO persistence).
pub struct Bgsaves {
    pub in_progress: AtomicBool,
    /// Unix seconds the save in progress started (`rdb_current_bgsave_time_sec`).
    pub started: AtomicI64,
    /// Seconds the last one took (`rdb_last_bgsave_time_sec`), -1 before the first.
    pub last_secs: AtomicI64,
    /// Unix seconds of the last start (Redis's `lastbgsave_try`): after a failure, the cron
    /// starts the next one [`RETRY_DELAY`] seconds later at the soonest.
    pub last_try: AtomicI64,
    /// A BGSAVE that could not start at once (BGSAVE inside MULTI/EXEC) waits for the cron.
    pub scheduled: AtomicBool,
    /// The save in progress's stop flag ([`stop`]). The writer renames its file and
    /// records its success holding this lock, and only if the flag is not set: once [`stop`]
    /// has set it, the save in progress can no longer replace the file or the state.
    stopping: Mutex<Option<Arc<AtomicBool>>>,
}

impl Default for Bgsaves {
    fn default() -> Bgsaves {
        Bgsaves {
            in_progress: AtomicBool::new(false),
            started: AtomicI64::new(0),
            last_secs: AtomicI64::new(-1),
            last_try: AtomicI64::new(0),
            scheduled: AtomicBool::new(false),
            stopping: Mutex::new(None),
        }
    }
}

/// Bytes on their way to the writer thread at most: while more are queued, the shards' own
/// snapshot steps wait (a write's serialize-before-write still goes), so a disk slower than
/// the serializing cannot make the queue grow towards a copy of the dataset.
pub const MAX_QUEUED: usize = 16 << 20;

/// The shards' side of the way to the writer thread: the channel, and the bytes queued on it.
#[derive(Clone)]
pub struct ToWriter {
    tx: mpsc::Sender<Piece>,
    /// Bytes sent and not yet written, those held back included.
    queued: Arc<AtomicUsize>,
    /// Of those, the bytes the writer holds back while a record streams.
    held: Arc<AtomicUsize>,
    /// Set while a shard streams a big record: one at a time.
    lane: Arc<AtomicBool>,
}

/// The writer's side: gives the pieces in the file's order.
pub struct FromShards {
    rx: mpsc::Receiver<Piece>,
    queued: Arc<AtomicUsize>,
    held: Arc<AtomicUsize>,
    /// A streamed record has started and not ended: other pieces wait in `waiting`.
    open: bool,
    waiting: std::collections::VecDeque<InOrder>,
}

/// A way from the shards to the writer thread.
pub fn pipe() -> (ToWriter, FromShards) {
    let (tx, rx) = mpsc::channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let held = Arc::new(AtomicUsize::new(0));
    (
        ToWriter {
            tx,
            queued: queued.clone(),
            held: held.clone(),
            lane: Arc::new(AtomicBool::new(false)),
        },
        FromShards {
            rx,
            queued,
            held,
            open: false,
            waiting: Default::default(),
        },
    )
}

impl ToWriter {
    fn send(&self, piece: Piece) {
        self.queued.fetch_add(piece.len(), Ordering::Relaxed);
        let _ = self.tx.send(piece);
    }

    /// Whether the writer is behind by more than [`MAX_QUEUED`] bytes. For the shard that
    /// streams a record (`streaming`), what the writer holds back until that record ends does
    /// not count: its record must go on for the rest to be written.
    pub fn behind(&self, streaming: bool) -> bool {
        let queued = self.queued.load(Ordering::Relaxed);
        let waiting = if streaming {
            queued.saturating_sub(self.held.load(Ordering::Relaxed))
        } else {
            queued
        };
        waiting > MAX_QUEUED
    }

    /// Takes the lane for a streamed record; false when another shard has it.
    fn take_lane(&self) -> bool {
        self.lane
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Gives the lane back, after the record's end was sent (so a record streamed next
    /// reaches the writer after it).
    fn release_lane(&self) {
        self.lane.store(false, Ordering::Release);
    }
}

impl FromShards {
    /// The next piece in the file's order (Err: every shard's side is gone).
    pub fn recv(&mut self) -> Result<InOrder, mpsc::RecvError> {
        self.next(None).map_err(|_| mpsc::RecvError)
    }

    /// [`FromShards::recv`], waiting up to `d` for the channel.
    pub fn recv_timeout(&mut self, d: Duration) -> Result<InOrder, mpsc::RecvTimeoutError> {
        self.next(Some(d))
    }

    fn next(&mut self, wait: Option<Duration>) -> Result<InOrder, mpsc::RecvTimeoutError> {
        loop {
            if !self.open {
                if let Some(p) = self.waiting.pop_front() {
                    self.held.fetch_sub(p.bytes(), Ordering::Relaxed);
                    return Ok(p);
                }
            }
            let piece = match wait {
                None => self
                    .rx
                    .recv()
                    .map_err(|_| mpsc::RecvTimeoutError::Disconnected)?,
                Some(d) => self.rx.recv_timeout(d)?,
            };
            let ready = match piece {
                // The lane lets one record stream at a time, and its end is sent before the
                // lane is free again: a start never comes while one is open.
                Piece::RecordStart(b) => {
                    self.open = true;
                    return Ok(InOrder::Bytes(b));
                }
                Piece::RecordPart(b) => return Ok(InOrder::Bytes(b)),
                Piece::RecordEnd => {
                    self.open = false;
                    continue;
                }
                Piece::Bytes(b) => InOrder::Bytes(b),
                Piece::Record(head, parts) => InOrder::Record(head, parts),
                Piece::Done => InOrder::Done,
            };
            if !self.open {
                return Ok(ready);
            }
            self.held.fetch_add(ready.bytes(), Ordering::Relaxed);
            self.waiting.push_back(ready);
        }
    }

    /// A piece of `n` bytes is written: they no longer count as queued.
    pub fn written(&self, n: usize) {
        self.queued.fetch_sub(n, Ordering::Relaxed);
    }
}

/// What the writer is given, in the file's order ([`FromShards::recv`]).
pub enum InOrder {
    Bytes(Vec<u8>),
    /// A big value's record, in parts, and the SELECTDB before it.
    Record(Vec<u8>, Vec<Vec<u8>>),
    /// A shard has sent all it had.
    Done,
}

impl InOrder {
    /// Bytes it holds.
    pub fn bytes(&self) -> usize {
        match self {
            InOrder::Bytes(b) => b.len(),
            InOrder::Record(head, parts) => head.len() + parts.iter().map(Vec::len).sum::<usize>(),
            InOrder::Done => 0,
        }
    }
}

/// What goes to the writer thread.
enum Piece {
    Bytes(Vec<u8>),
    /// A big value's record, in parts, and the SELECTDB before it.
    Record(Vec<u8>, Vec<Vec<u8>>),
    /// A big value's record streamed by the lane's holder: the SELECTDB before it and its
    /// first bytes, ...
    RecordStart(Vec<u8>),
    /// ... its next bytes, ...
    RecordPart(Vec<u8>),
    /// ... and its end.
    RecordEnd,
    /// A shard has sent all it had.
    Done,
}

impl Piece {
    /// Bytes it holds.
    fn len(&self) -> usize {
        match self {
            Piece::Bytes(b) | Piece::RecordStart(b) | Piece::RecordPart(b) => b.len(),
            Piece::Record(head, parts) => head.len() + parts.iter().map(Vec::len).sum::<usize>(),
            Piece::RecordEnd | Piece::Done => 0,
        }
    }
}

/// A shard's side of a snapshot in progress: the buffer its tables' sinks write into.
pub struct ShardSnapshot {
    out: Arc<Mutex<ShardOut>>,
}

struct ShardOut {
    buf: Vec<u8>,
    /// Big values taken for later (database, key), in the order the cursor met them, but
    /// for the first `urgent`: those a writer waits for ([`key_waits`]), in the order they
    /// were asked for.
    later: std::collections::VecDeque<(usize, Vec<u8>)>,
    urgent: usize,
    /// The big value being written.
    current: Option<BigValue>,
    /// A writer waits for a big value ([`key_waits`]): the shard's steps write big values
    /// before the cursor's keys until it is resumed.
    waited: bool,
    /// The big value being written ended (written, forced out, gone): what waited for it
    /// may run ([`take_released`]).
    released: bool,
    /// The database of the last entry written into `buf` (a chunk starts with none).
    db: Option<usize>,
    to_writer: ToWriter,
    /// The cut's clock: entries already past their TTL then are left out.
    clock: Clock,
    /// How entries are written (SAVE's: persist/snapshot.rs).
    snap: SnapshotOptions,
    /// Set when the save is stopped: nothing more is serialized.
    stopped: Arc<AtomicBool>,
}

/// A big value being written in steps: its database, its record so far and its walk (SAVE's,
/// persist/snapshot.rs).
struct BigValue {
    db: usize,
    /// The record's end, being written.
    record: Vec<u8>,
    /// The record's parts before `record`, [`CHUNK`] bytes or so each: one growing buffer
    /// was copied whole at each doubling, and the copy of the last one (8 MiB for a 1M-field
    /// hash) held the shard for 4 ms.
    parts: Vec<Vec<u8>>,
    walk: Big,
    /// This shard holds the lane: the parts go to the writer as they fill (`started`: the
    /// record's start went).
    streaming: bool,
    started: bool,
}

impl BigValue {
    /// Writes up to `elements` more elements; true once the value is written.
    fn walk(&mut self, e: &Entry, snap: &SnapshotOptions, elements: usize) -> bool {
        let done = self.walk.walk(e, snap, elements, &mut self.record);
        if self.record.len() >= CHUNK {
            let full = std::mem::replace(&mut self.record, Vec::with_capacity(CHUNK + CHUNK / 4));
            self.parts.push(full);
        }
        done
    }
}

impl ShardOut {
    /// The table's sink: writes `e` of database `db` into the buffer, or takes a big value
    /// for later (false) unless `forced`.
    fn write(&mut self, db: usize, e: &Entry, forced: bool) -> bool {
        // A key whose TTL passed is written too, with its TTL, as Redis writes it (and as
        // SAVE does): a master loading the file drops it, a replica keeps it until its
        // primary's DEL, so a full sync leaves the replica the primary's dataset.
        if self.stopped.load(Ordering::Relaxed) {
            return true;
        }
        if self
            .current
            .as_ref()
            .is_some_and(|cur| cur.db == db && *cur.walk.key == *e.key())
        {
            // About to change while being written: the rest now, from the value as it still
            // is (streamed part by part when this shard holds the lane).
            let snap = self.snap;
            while !self
                .current
                .as_mut()
                .expect("checked")
                .walk(e, &snap, BIG_STEP)
            {
                self.stream_parts();
            }
            self.finish_big();
            return true;
        }
        if !forced && is_big(e, self.clock.now_ms) {
            self.later.push_back((db, e.key().to_vec()));
            return false;
        }
        if forced {
            // Taken for later but not started: forgotten there, written whole here.
            if let Some(i) = self
                .later
                .iter()
                .position(|(d, k)| *d == db && k.as_slice() == e.key())
            {
                self.later.remove(i);
                if i < self.urgent {
                    self.urgent -= 1;
                }
            }
        }
        self.write_whole(db, e);
        if !forced {
            // rdb-key-save-delay: a test's way to make a snapshot last (Redis sleeps in its
            // child; here the shard's step does, which ends its turn).
            let delay = KEY_SAVE_DELAY_US.load(Ordering::Relaxed);
            if delay > 0 {
                std::thread::sleep(Duration::from_micros(delay));
                // The records leave at the pace of the keys, as Redis's child hands its
                // buffer on past 16 KB (rio's PROTO_IOBUF_LEN): at [`CHUNK`], a slowed
                // snapshot would send a diskless replica its header, then nothing until near
                // its end.
                if self.buf.len() >= DELAYED_CHUNK {
                    self.send();
                }
            }
        }
        true
    }

    /// Moves the big value of `key` taken for later to the end of the urgent ones (a writer
    /// waits for it); false when it is not taken for later.
    fn promote(&mut self, db: usize, key: &[u8]) -> bool {
        let Some(i) = self
            .later
            .iter()
            .position(|(d, k)| *d == db && k.as_slice() == key)
        else {
            return false;
        };
        if i >= self.urgent {
            let item = self.later.remove(i).expect("found");
            self.later.insert(self.urgent, item);
            self.urgent += 1;
        }
        self.waited = true;
        true
    }

    /// Whether this shard streams a big record now (it holds the lane).
    fn streaming(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.streaming)
    }

    /// Sends the streamed record's full parts to the writer (its start first).
    fn stream_parts(&mut self) {
        let Some(cur) = self.current.as_mut().filter(|c| c.streaming) else {
            return;
        };
        for part in cur.parts.drain(..) {
            if cur.started {
                self.to_writer.send(Piece::RecordPart(part));
            } else {
                let mut head = Vec::with_capacity(24 + part.len());
                write_select(&mut head, cur.db, self.snap.form);
                head.extend_from_slice(&part);
                self.to_writer.send(Piece::RecordStart(head));
                cur.started = true;
            }
        }
    }

    /// Sends the finished big value's record to the writer, after what the buffer holds: the
    /// rest of a streamed one and its end (then the lane is free), or the whole record as a
    /// piece of its own (not copied into the buffer).
    fn finish_big(&mut self) {
        let Some(mut cur) = self.current.take() else {
            return;
        };
        self.released = true;
        self.send();
        if cur.streaming {
            cur.parts.push(std::mem::take(&mut cur.record));
            self.current = Some(cur);
            self.stream_parts();
            self.current = None;
            self.to_writer.send(Piece::RecordEnd);
            self.to_writer.release_lane();
            return;
        }
        let mut head = Vec::with_capacity(24);
        write_select(&mut head, cur.db, self.snap.form);
        // One piece: another shard's chunk must not come between the two.
        let mut parts = cur.parts;
        parts.push(cur.record);
        self.to_writer.send(Piece::Record(head, parts));
    }

    /// Drops the big value being written (a stopped save): a streamed record is ended, cut
    /// short (the file is not kept), so that the writer stops holding the rest back.
    fn drop_big(&mut self) -> Option<(usize, Vec<u8>)> {
        let cur = self.current.take()?;
        self.released = true;
        if cur.streaming {
            self.to_writer.send(Piece::RecordEnd);
            self.to_writer.release_lane();
        }
        Some((cur.db, cur.walk.key.to_vec()))
    }

    fn select(&mut self, db: usize) {
        if self.db != Some(db) {
            write_select(&mut self.buf, db, self.snap.form);
            self.db = Some(db);
        }
    }

    fn write_whole(&mut self, db: usize, e: &Entry) {
        let mut record = Vec::new();
        if write_small(e, &self.snap, &self.clock, &mut record) {
            self.select(db);
            self.buf.extend_from_slice(&record);
            if self.buf.len() >= CHUNK {
                self.send();
            }
        }
    }

    fn send(&mut self) {
        if !self.buf.is_empty() {
            let chunk = std::mem::take(&mut self.buf);
            self.to_writer.send(Piece::Bytes(chunk));
            self.db = None;
        }
    }
}

/// What a shard reports from the cut: whether a hash holds field TTLs (the file is then RDB
/// 12).
pub struct Marked {
    pub field_ttls: bool,
    /// Each database's keys and keys with a TTL at the cut (the file's RESIZEDB hints).
    pub sizes: Vec<(u64, u64)>,
}

/// The cut, on one shard (inside the transaction that holds every shard): marks every
/// database's table for the snapshot.
pub fn mark(
    shard: &mut crate::shard::Shard,
    to_writer: ToWriter,
    clock: Clock,
    snap: SnapshotOptions,
    stopped: Arc<AtomicBool>,
) -> Marked {
    let out = Arc::new(Mutex::new(ShardOut {
        buf: Vec::new(),
        later: Default::default(),
        urgent: 0,
        current: None,
        waited: false,
        released: false,
        db: None,
        to_writer,
        clock,
        snap,
        stopped,
    }));
    let mut field_ttls = false;
    let mut sizes = Vec::with_capacity(shard.dbs.len());
    for (j, db) in shard.dbs.iter_mut().enumerate() {
        field_ttls |= has_hash_field_ttls(db, clock.now_ms);
        sizes.push((db.len() as u64, db.expires() as u64));
        let out = out.clone();
        db.snapshot_begin(Box::new(move |e: &Entry, forced| {
            out.lock()
                .unwrap_or_else(|p| p.into_inner())
                .write(j, e, forced)
        }));
    }
    shard.snapshot = Some(ShardSnapshot { out });
    Marked { field_ttls, sizes }
}

/// Drops this shard's part of a stopped save: its tables' marks (their sinks) and its
/// buffer. Once every shard has, the writer's channel is closed and it ends.
pub fn abort(shard: &mut crate::shard::Shard) {
    if shard.snapshot.take().is_some() {
        for db in shard.dbs.iter_mut() {
            db.snapshot_abort();
        }
    }
}

/// Whether this shard's snapshot waits for its writer ([`MAX_QUEUED`] bytes on their way):
/// its loop need not spin meanwhile. Not while a command waits for a big value: that value's
/// steps go on (see [`step`]).
pub fn behind(shard: &crate::shard::Shard) -> bool {
    shard.snapshot.as_ref().is_some_and(|snap| {
        let out = snap.out.lock().unwrap_or_else(|p| p.into_inner());
        !out.waited && out.to_writer.behind(out.streaming())
    })
}

/// The shard loop's share of the snapshot: writes its tables' entries for a bounded time,
/// and once no table still owes anything, sends the rest and tells the writer. Returns true
/// while a snapshot is in progress here.
pub fn step(shard: &mut crate::shard::Shard) -> bool {
    let Some(snap) = shard.snapshot.as_ref() else {
        return false;
    };
    let out = snap.out.clone();
    let (streaming, waited, behind) = {
        let g = out.lock().unwrap_or_else(|p| p.into_inner());
        let behind = g.to_writer.behind(g.streaming());
        if behind && !g.waited {
            // The writer is behind (a slow disk): no step this turn.
            return true;
        }
        (g.streaming(), g.waited, behind)
    };
    let start = Instant::now();
    if waited {
        // A command waits for a big value: it goes first (the cursor's keys wait for no
        // one), even while the writer is behind: the command must not wait for the disk or
        // the network, and the record is the bytes its guard would have forced out at once.
        big_steps(shard, &out, start);
        if behind {
            return true;
        }
    }
    // The lane's holder writes only its record until it ends: every other piece waits for
    // that end at the writer.
    for db in shard.dbs.iter_mut().filter(|_| !streaming) {
        if start.elapsed() >= STEP_TIME {
            break;
        }
        while db.snapshot_active() {
            // True once the cursor is through (big values taken for later may remain).
            if db.snapshot_step(STEP_KEYS) || start.elapsed() >= STEP_TIME {
                break;
            }
        }
    }
    big_steps(shard, &out, start);
    drop(out);
    let Some(snap) = shard.snapshot.as_ref() else {
        return false;
    };
    if Arc::strong_count(&snap.out) > 1 {
        return true;
    }
    let mut out = snap.out.lock().unwrap_or_else(|p| p.into_inner());
    out.send();
    out.to_writer.send(Piece::Done);
    drop(out);
    shard.snapshot = None;
    false
}

/// Big values taken for later, a step at a time, until the turn's [`STEP_TIME`] is spent.
fn big_steps(shard: &mut crate::shard::Shard, out: &Arc<Mutex<ShardOut>>, start: Instant) {
    while start.elapsed() < STEP_TIME {
        let mut g = out.lock().unwrap_or_else(|p| p.into_inner());
        if g.stopped.load(Ordering::Relaxed) {
            // A stopped save writes nothing more: its big values are let go.
            let mut keys: Vec<(usize, Vec<u8>)> = g.later.drain(..).collect();
            g.urgent = 0;
            keys.extend(g.drop_big());
            g.released = true;
            drop(g);
            for (db, key) in keys {
                shard.dbs[db].snapshot_undefer(&key);
            }
            break;
        }
        if g.current.is_none() {
            let Some((db, key)) = g.later.pop_front() else {
                break;
            };
            g.urgent = g.urgent.saturating_sub(1);
            let (snap, clock) = (g.snap, g.clock);
            let Some(e) = shard.dbs[db].entry_raw(&key) else {
                continue;
            };
            let mut record = Vec::new();
            match Big::start(e, &snap, &clock, &mut record) {
                Some(walk) => {
                    let streaming = g.to_writer.take_lane();
                    if streaming {
                        // What the buffer holds goes first (its keys were met before).
                        g.send();
                    }
                    g.current = Some(BigValue {
                        db,
                        record,
                        parts: Vec::new(),
                        walk,
                        streaming,
                        started: false,
                    })
                }
                None => {
                    // Nothing left at the cut's time: nothing to write.
                    g.released = true;
                    drop(g);
                    shard.dbs[db].snapshot_undefer(&key);
                    continue;
                }
            }
        }
        let o = &mut *g;
        let snap = o.snap;
        let cur = o.current.as_mut().expect("set above");
        let db = cur.db;
        let Some(e) = shard.dbs[db].entry_raw(&cur.walk.key) else {
            o.current = None;
            o.released = true;
            continue;
        };
        if cur.walk(e, &snap, BIG_STEP) {
            let key = cur.walk.key.clone();
            o.finish_big();
            drop(g);
            shard.dbs[db].snapshot_undefer(&key);
        } else {
            o.stream_parts();
            drop(g);
            // rdb-key-save-delay: a big value's step counts as a key (a test's way to make
            // one last while writers wait for it); the sleep ends the turn.
            let delay = KEY_SAVE_DELAY_US.load(Ordering::Relaxed);
            if delay > 0 {
                std::thread::sleep(Duration::from_micros(delay));
                break;
            }
        }
    }
}

/// Whether a command touching `key` of database `db` must wait for this shard's snapshot,
/// which has not written the key's big value yet: the value is being written in steps, or
/// taken for later (it is then written next, before the others taken for later), or not
/// reached by the cursor yet (taken for later now, the same way). Without the wait, the
/// command's guard would serialize the rest of the value in its own turn (10 ms for a
/// 1M-field hash), holding every client of the shard. Reads wait too: the engine's read
/// lookup goes through the same guard (it may touch the access clock, or remove the key or
/// its fields past their TTL). The caller parks the command with the work that waits for
/// streams (worker/streams.rs) and tries it again once [`take_released`] says so; every
/// other key goes on meanwhile. A transaction's part asks [`tx_waits`]. Work that is not
/// asked (expiry or eviction removing the key, a part that reserves the whole shard, a
/// script's or EXEC's access to a key its part did not name) keeps the guard's way: the
/// rest is written at once.
pub fn key_waits(shard: &mut crate::shard::Shard, db: usize, key: &[u8]) -> bool {
    let Some(snap) = shard.snapshot.as_ref() else {
        return false;
    };
    let out = snap.out.clone();
    {
        let mut g = out.lock().unwrap_or_else(|p| p.into_inner());
        if g.stopped.load(Ordering::Relaxed) {
            return false;
        }
        if g.current
            .as_ref()
            .is_some_and(|c| c.db == db && *c.walk.key == *key)
        {
            g.waited = true;
            return true;
        }
    }
    // Every command of the shard asks while a save runs: a lookup and an O(1) count leave
    // out all but big values; the table then says whether the save still owes the value
    // (taken for later already, or taken now ahead of the cursor), and only then is the list
    // of those taken for later searched. (A value past the count but not big at the cut's
    // time, its elements' TTLs counted, is written whole now by the sink, as its guard would.)
    match shard.dbs[db].entry_raw(key) {
        Some(e) if may_be_big(e) => {}
        _ => return false,
    }
    if !shard.dbs[db].snapshot_take(key) {
        return false;
    }
    let mut g = out.lock().unwrap_or_else(|p| p.into_inner());
    g.promote(db, key)
}

/// Whether a transaction's part with `intents` must wait for this shard's snapshot: it
/// touches the big value being written or one a command waits for (reads included, as in
/// [`key_waits`]) (keys are known here by
/// their fingerprints only, so another key of the same fingerprint waits too, harmlessly).
/// A part that reserves the whole shard, or writes a big value nobody waits for yet, does
/// not wait: its guard writes the rest at once, as before.
pub fn tx_waits(shard: &crate::shard::Shard, intents: &crate::sched::Intents) -> bool {
    let Some(snap) = shard.snapshot.as_ref() else {
        return false;
    };
    if intents.whole || intents.keys.is_empty() {
        return false;
    }
    let mut g = snap.out.lock().unwrap_or_else(|p| p.into_inner());
    if g.stopped.load(Ordering::Relaxed) {
        return false;
    }
    let held = g
        .current
        .iter()
        .map(|c| &*c.walk.key)
        .chain(g.later.iter().take(g.urgent).map(|(_, k)| k.as_slice()))
        .map(crate::sched::fingerprint)
        .any(|fp| intents.keys.iter().any(|&(f, _)| f == fp));
    g.waited |= held;
    held
}

/// Whether the writers waiting for this shard's snapshot ([`key_waits`]) may try again:
/// a big value ended since the last call (the one they wait for, or one before it), or the
/// snapshot did.
pub fn take_released(shard: &crate::shard::Shard) -> bool {
    let Some(snap) = shard.snapshot.as_ref() else {
        return true;
    };
    let mut g = snap.out.lock().unwrap_or_else(|p| p.into_inner());
    let released = std::mem::take(&mut g.released);
    if released {
        // Those still waiting say so again when they are tried.
        g.waited = false;
    }
    released
}

/// BGSAVE's work once the shards are marked: the writer thread. `header` is the file's start
/// (header, AUX fields, function libraries), with a primary's replication fields put in
/// their place once the feed reached `save_cut`; `shards` how many will say they are done.
#[allow(clippy::too_many_arguments)]
pub fn spawn_writer(
    shared: Arc<Shared>,
    header: SnapshotHead,
    save_cut: Option<crate::primary::SaveCut>,
    checksum: bool,
    shards: usize,
    mut from_shards: FromShards,
    path: std::path::PathBuf,
    dirty_at_cut: u64,
    stopped: Arc<AtomicBool>,
) {
    let started = Instant::now();
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.to_path_buf())
        .unwrap_or_else(|| std::path::PathBuf::from("."));
    let tmp = dir.join(temp_file_name());
    let write = {
        let tmp = tmp.clone();
        let stopped = stopped.clone();
        move || {
            // No time limit: this thread holds nothing, and the feed's work before the cut is
            // fixed at the cut (primary.rs `SaveCut`); a stop ends the wait.
            let pos = save_cut.and_then(|c| c.position(&|| stopped.load(Ordering::Relaxed)));
            let header = header.with_position(pos.as_ref());
            write_file(
                &header,
                Tail::Rdb { checksum },
                shards,
                &mut from_shards,
                &tmp,
                &stopped,
            )
        }
    };
    std::thread::Builder::new()
        .name("darner-bgsave".into())
        .spawn(move || {
            let written = write();
            let b = &shared.bgsaves;
            let p = &shared.persist;
            // The rename and the state change under the stop lock: a stopped save changes
            // neither (bgsave::stop).
            let guard = b.stopping.lock().unwrap_or_else(|e| e.into_inner());
            let was_stopped = stopped.load(Ordering::Relaxed);
            let r = written.and_then(|file| {
                drop(file);
                if was_stopped {
                    return Err(std::io::Error::other("stopped"));
                }
                std::fs::rename(&tmp, &path)?;
                std::fs::File::open(&dir)?.sync_all()
            });
            if r.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            b.last_secs
                .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
            match r {
                _ if was_stopped => {
                    crate::log::warning("Background saving stopped before its end");
                }
                Ok(()) => {
                    p.lastsave.store(Shared::now_ms() / 1000, Ordering::Relaxed);
                    p.dirty_at_save.store(dirty_at_cut, Ordering::Relaxed);
                    p.last_save_failed.store(false, Ordering::Relaxed);
                    crate::log::notice("Background saving terminated with success");
                }
                Err(e) => {
                    p.last_save_failed.store(true, Ordering::Relaxed);
                    crate::log::warning(&format!(
                        "Background saving error: {e} (writing {} in server root dir {})",
                        tmp.display(),
                        crate::persist::cwd()
                    ));
                }
            }
            drop(guard);
            b.in_progress.store(false, Ordering::Release);
        })
        .expect("spawn the BGSAVE writer");
}

/// How a file of pieces ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tail {
    /// RDB's EOF and CRC-64 (0 without `checksum`).
    Rdb { checksum: bool },
    /// Nothing: a file of commands (an AOF base with `aof-use-rdb-preamble no`).
    None,
}

/// Writes the file the shards' pieces make to `tmp` and fsyncs it (the caller renames it,
/// or removes it on failure); stops early when `stopped` is set.
pub fn write_file(
    header: &[u8],
    tail: Tail,
    shards: usize,
    from_shards: &mut FromShards,
    tmp: &std::path::Path,
    stopped: &AtomicBool,
) -> std::io::Result<std::fs::File> {
    let checksum = match tail {
        Tail::Rdb { checksum } => checksum,
        Tail::None => false,
    };
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(tmp)?);
    // The CRC-64 runs over everything but its own 8 bytes (only when it is written).
    let sum = |crc: u64, b: &[u8]| {
        if checksum {
            darner_rdb::crc64::crc64(crc, b)
        } else {
            0
        }
    };
    let mut crc = sum(0, header);
    f.write_all(header)?;
    let mut done = 0;
    while done < shards {
        let piece = from_shards
            .recv()
            .map_err(|_| std::io::Error::other("a shard stopped before its part"))?;
        let n = piece.bytes();
        match piece {
            InOrder::Bytes(b) => {
                crc = sum(crc, &b);
                f.write_all(&b)?;
            }
            InOrder::Record(head, body) => {
                for b in std::iter::once(head).chain(body) {
                    crc = sum(crc, &b);
                    f.write_all(&b)?;
                }
            }
            InOrder::Done => done += 1,
        }
        from_shards.written(n);
        if stopped.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("stopped"));
        }
    }
    if let Tail::Rdb { .. } = tail {
        let mut end = vec![darner_rdb::opcode::EOF];
        crc = sum(crc, &end);
        end.extend_from_slice(&crc.to_le_bytes());
        f.write_all(&end)?;
    }
    let file = f.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(file)
}

/// The background save's temporary file, in `dir` (SAVE's is `temp-<pid>.rdb`).
pub fn temp_file_name() -> String {
    format!("temp-bg-{}.rdb", std::process::id())
}

/// Stops the background save in progress, if any (SHUTDOWN, FLUSHALL, as Redis kills its
/// child): from now on it can neither replace the file nor change the state INFO reports.
/// `tx` must hold every shard: each drops its part ([`abort`]), so the writer ends and
/// removes its temporary file. Returns whether one was in progress.
pub async fn stop(tx: &crate::exec::Tx) -> bool {
    if !stop_flag(tx.shared()) {
        return false;
    }
    tx.run_all(|ctx| abort(ctx.shard)).await;
    true
}

/// [`stop`]'s first half, for a caller that does not hold the shards (SHUTDOWN NOSAVE, which
/// exits at once): the save can no longer replace the file; its shards go on writing into a
/// closed channel. Returns whether one was in progress.
pub fn stop_flag(shared: &Shared) -> bool {
    let b = &shared.bgsaves;
    if let Some(f) = b
        .stopping
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
    {
        f.store(true, Ordering::Relaxed);
    }
    b.in_progress.load(Ordering::Acquire)
}

/// The file's start: header, Redis's AUX fields (`aof-base` 1 for an AOF rewrite's base),
/// the function libraries.
pub fn header_for(
    shared: &Shared,
    version: u16,
    opts: EncodeOptions,
    libraries: &[bytes::Bytes],
    aof_base: bool,
) -> SnapshotHead {
    let mut w = FileWriter::new(version, true, opts);
    let repl_slot = crate::persist::aux_fields_for(shared, &mut w, Shared::now_ms(), aof_base);
    for code in libraries {
        w.function(code);
    }
    SnapshotHead {
        bytes: w.take(),
        repl_slot,
    }
}

/// Appends SELECTDB and RESIZEDB for each database with keys (`sizes`: keys and keys with a
/// TTL by database), as Redis writes before a database's keys: a loader sizes its tables
/// from them instead of growing them as the keys come (rehashing every key at each
/// doubling: a fifth of a darner replica's CPU in a full sync of small keys). The shards'
/// pieces come after, each starting with its own SELECTDB, so a database's hint comes once
/// here, before any key of any database.
fn write_sizes(out: &mut Vec<u8>, sizes: &[(u64, u64)]) {
    for (db, &(keys, expires)) in sizes.iter().enumerate() {
        if keys > 0 {
            darner_rdb::encode::write_select_db(out, db as u64);
            darner_rdb::encode::write_resize_db(out, keys, expires);
        }
    }
}

/// A snapshot's start as taken at the cut, and where its replication AUX fields go when
/// they were not known then: on a primary, the offset of a full sync's cut is known only
/// once the feed thread reaches its barrier (after the shards are let go), while the other
/// fields (and the function libraries) must be the cut's. Redis's child knows its offset
/// at the fork and writes them in place (rdbSaveInfoAuxFields); the writer of a full sync
/// puts them in the same place before the first byte goes out (primary.rs `run_job`).
pub struct SnapshotHead {
    pub bytes: Vec<u8>,
    /// None: written already (a replica's cut, where the link paused) or not wanted (an
    /// AOF base, the command form).
    pub repl_slot: Option<usize>,
}

impl SnapshotHead {
    /// The start with the replication fields of `pos` in their place (if they have one).
    pub fn with_position(self, pos: Option<&crate::replica::ReplPosition>) -> Vec<u8> {
        match (self.repl_slot, pos) {
            (Some(at), Some(pos)) => {
                let fields = crate::persist::repl_aux(pos);
                let mut out = Vec::with_capacity(self.bytes.len() + fields.len());
                out.extend_from_slice(&self.bytes[..at]);
                out.extend_from_slice(&fields);
                out.extend_from_slice(&self.bytes[at..]);
                out
            }
            _ => self.bytes,
        }
    }
}

/// The start of an AOF base of commands: the `#TS:` annotation (`aof-timestamp-enabled`),
/// then `FUNCTION LOAD` for each library, as Redis's rewriteAppendOnlyFileRio.
pub fn commands_header(shared: &Shared, libraries: &[bytes::Bytes]) -> Vec<u8> {
    let mut out = Vec::new();
    let ts = crate::persist::yes(shared, "aof-timestamp-enabled")
        .then(|| Shared::now_ms().div_euclid(1000));
    darner_aof::rewrite::render_header(&mut out, ts, libraries);
    out
}

/// Takes the right to start a background save: false when one is in progress already.
/// Counts the attempt as Redis's rdbSaveBackground does (`rdb_saves`, the retry clock).
pub fn claim(shared: &Shared) -> bool {
    let b = &shared.bgsaves;
    // An AOF rewrite takes the same snapshot of the shards: one at a time.
    if shared.aof.rewriting.load(Ordering::Acquire) || b.in_progress.swap(true, Ordering::AcqRel) {
        return false;
    }
    let now = Shared::now_ms().div_euclid(1000);
    b.started.store(now, Ordering::Relaxed);
    b.last_try.store(now, Ordering::Relaxed);
    shared.persist.saves.fetch_add(1, Ordering::Relaxed);
    true
}

/// Starts a background save: the cut over every shard, then the writer. Err when one is in
/// progress already. `tx` must hold every shard.
pub async fn start(tx: &crate::exec::Tx) -> Result<(), &'static [u8]> {
    if tx.shared().aof.rewriting.load(Ordering::Acquire) {
        return Err(b"ERR An AOF log rewriting in progress: can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.");
    }
    if !claim(tx.shared()) {
        return Err(b"ERR Background save already in progress");
    }
    start_claimed(tx).await;
    Ok(())
}

/// [`start`] once [`claim`] succeeded.
pub async fn start_claimed(tx: &crate::exec::Tx) {
    let shared = tx.shared().clone();
    let stopped = Arc::new(AtomicBool::new(false));
    *shared
        .bgsaves
        .stopping
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = Some(stopped.clone());
    let path = crate::persist::rdb_path(&shared);
    let checksum = crate::persist::yes(&shared, "rdbchecksum");
    let snap = SnapshotOptions::from_config(&shared, Shared::now_ms());
    // Taken while every shard is held: exactly the changes the snapshot holds.
    let dirty_at_cut = crate::persist::dirty(&shared);
    // A primary's save records where it stands in its stream: its cut is a barrier there.
    let save_cut = (!tx.logging())
        .then(|| crate::primary::save_barrier(&shared))
        .flatten();
    if save_cut.is_some() {
        tx.start_repl_barrier_log();
    }
    let (header, shards, from_shards) = cut_head(tx, snap, false, stopped.clone()).await;
    if let Some(c) = &save_cut {
        tx.end_log();
        c.cut_done(&shared);
    }
    crate::log::notice("Background saving started");
    spawn_writer(
        shared.clone(),
        header,
        save_cut,
        checksum,
        shards,
        from_shards,
        path,
        dirty_at_cut,
        stopped,
    );
}

/// The cut: marks every shard's tables (the transaction holds them all) and returns the
/// file's header, how many shards will send pieces, and where the pieces arrive.
pub async fn cut(
    tx: &crate::exec::Tx,
    snap: SnapshotOptions,
    aof_base: bool,
    stopped: Arc<AtomicBool>,
) -> (Vec<u8>, usize, FromShards) {
    let (head, shards, from_shards) = cut_head(tx, snap, aof_base, stopped).await;
    (head.bytes, shards, from_shards)
}

/// [`cut`], with the start's slot for replication fields learnt later (a full sync's).
pub async fn cut_head(
    tx: &crate::exec::Tx,
    snap: SnapshotOptions,
    aof_base: bool,
    stopped: Arc<AtomicBool>,
) -> (SnapshotHead, usize, FromShards) {
    let shared = tx.shared().clone();
    let (to_writer, from_shards) = pipe();
    let marked = tx
        .run_all(move |ctx| {
            let clock = ctx.clock;
            mark(ctx.shard, to_writer.clone(), clock, snap, stopped.clone())
        })
        .await;
    let version = if marked.iter().any(|m| m.field_ttls) {
        darner_rdb::WRITTEN_VERSION_FIELD_TTL
    } else {
        darner_rdb::WRITTEN_VERSION
    };
    let libraries = shared.scripts.library_codes();
    let mut sizes: Vec<(u64, u64)> = Vec::new();
    for m in &marked {
        sizes.resize(sizes.len().max(m.sizes.len()), (0, 0));
        for (total, &(keys, expires)) in sizes.iter_mut().zip(&m.sizes) {
            total.0 += keys;
            total.1 += expires;
        }
    }
    let header = match snap.form {
        Form::Rdb => {
            let mut head = header_for(&shared, version, snap.encode, &libraries, aof_base);
            write_sizes(&mut head.bytes, &sizes);
            head
        }
        Form::Commands => SnapshotHead {
            bytes: commands_header(&shared, &libraries),
            repl_slot: None,
        },
    };
    (header, marked.len(), from_shards)
}

/// The cron's part (thread 0, each tick), as Redis's serverCron: whether to start a
/// background save now, claimed already ([`claim`]) when true. One starts when a save
/// point is met (at least its changes since the last save, more than its seconds since
/// then), or when one was scheduled; after a failed one, only [`RETRY_DELAY`] seconds after
/// its start. Never while a replica loads its primary's snapshot, async (swapdb) loads
/// included: Redis runs no serverCron during a load, so a scheduled BGSAVE or a save point
/// waits for the new dataset (and its place in the stream) instead of saving the old one
/// about to be replaced, without a replication position.
pub fn due(shared: &Shared) -> bool {
    let b = &shared.bgsaves;
    let p = &shared.persist;
    if b.in_progress.load(Ordering::Acquire)
        || p.loading.load(Ordering::Relaxed)
        || p.async_loading.load(Ordering::Relaxed)
        || shared.aof.rewriting.load(Ordering::Acquire)
    {
        return false;
    }
    let now = Shared::now_ms().div_euclid(1000);
    let may_retry = now - b.last_try.load(Ordering::Relaxed) > RETRY_DELAY
        || !p.last_save_failed.load(Ordering::Relaxed);
    if !may_retry {
        return false;
    }
    if shared.config.hot.save_points.load(Ordering::Relaxed) {
        let changes = crate::persist::changes_since_save(shared) as i64;
        let since = now - p.lastsave.load(Ordering::Relaxed);
        let points = crate::config::save_points(&shared.config.get("save").unwrap_or_default());
        if let Some(sp) = points
            .iter()
            .find(|sp| changes >= sp.changes as i64 && since > sp.seconds)
        {
            crate::log::notice(&format!(
                "{} changes in {} seconds. Saving...",
                sp.changes, sp.seconds
            ));
            return claim(shared);
        }
    }
    if b.scheduled.load(Ordering::Relaxed) && claim(shared) {
        b.scheduled.store(false, Ordering::Relaxed);
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persist::snapshot::AccessOpcode;

    /// The bytes on their way to the writer are counted: past [`MAX_QUEUED`] the shards are
    /// told the writer is behind (their steps wait), and no longer once it wrote them.
    #[test]
    fn the_pipe_counts_the_bytes_on_their_way_and_says_when_the_writer_is_behind() {
        let (to, mut from) = pipe();
        let half = MAX_QUEUED / 2 + 1;
        to.send(Piece::Bytes(vec![0; half]));
        assert!(!to.behind(false));
        to.clone().send(Piece::Record(
            vec![1; 10],
            vec![vec![2; half - 10], vec![3; 10]],
        ));
        assert!(to.behind(false));
        let first = from.recv().unwrap();
        assert_eq!(first.bytes(), half);
        from.written(first.bytes());
        assert!(!to.behind(false));
        let second = from.recv().unwrap();
        from.written(second.bytes());
        to.send(Piece::Done);
        assert_eq!(from.recv().unwrap().bytes(), 0);
        assert_eq!(from.queued.load(Ordering::Relaxed), 0);
    }

    /// While a record streams, the writer gets its start and parts at once and every other
    /// piece (another shard's chunk or whole record, a shard's end) after its end, in the
    /// order they came; what it holds back counts as queued, but not for the streaming shard,
    /// whose record must go on for the rest to be written. The lane is one shard's at a time.
    #[test]
    fn a_streamed_record_is_written_whole_before_the_pieces_that_came_during_it() {
        fn show(p: InOrder) -> Vec<u8> {
            match p {
                InOrder::Bytes(v) if v.len() < 100 => v,
                InOrder::Bytes(v) => format!("{} bytes", v.len()).into_bytes(),
                InOrder::Record(h, parts) => [h, parts.concat()].concat(),
                InOrder::Done => b"done".to_vec(),
            }
        }
        let (a, mut from) = pipe();
        let b = a.clone();
        assert!(a.take_lane());
        assert!(!b.take_lane(), "one streaming shard at a time");
        b.send(Piece::Bytes(b"before".to_vec()));
        a.send(Piece::RecordStart(b"start".to_vec()));
        b.send(Piece::Bytes(vec![7; MAX_QUEUED]));
        a.send(Piece::RecordPart(b"part1".to_vec()));
        b.send(Piece::Record(b"B".to_vec(), vec![b"whole".to_vec()]));
        b.send(Piece::Done);
        a.send(Piece::RecordPart(b"part2".to_vec()));
        let mut got = Vec::new();
        for _ in 0..4 {
            let p = from.recv().unwrap();
            from.written(p.bytes());
            got.push(show(p));
        }
        // `before` came before the start; the rest of b's waits for the record's end.
        assert_eq!(got, [&b"before"[..], b"start", b"part1", b"part2"]);
        assert!(b.behind(false), "b's held-back bytes count for b");
        assert!(!a.behind(true), "but not for the record's shard");
        a.send(Piece::RecordEnd);
        a.release_lane();
        for want in [
            format!("{MAX_QUEUED} bytes").into_bytes(),
            b"Bwhole".to_vec(),
            b"done".to_vec(),
        ] {
            let p = from.recv().unwrap();
            from.written(p.bytes());
            let v = show(p);
            assert_eq!(v, want);
        }
        assert!(!b.behind(false));
        assert_eq!(from.held.load(Ordering::Relaxed), 0);
        assert_eq!(from.queued.load(Ordering::Relaxed), 0);
        assert!(b.take_lane(), "free again after the end");
    }

    /// The big values a command waits for go to the front of those taken for later, in the
    /// order they were asked for, ahead of the cursor's order; asking again changes nothing,
    /// and a key not taken for later is not waited for here.
    #[test]
    fn big_values_waited_for_go_first_in_the_order_asked() {
        let (to_writer, _from) = pipe();
        let mut out = ShardOut {
            buf: Vec::new(),
            later: [(0, "a"), (0, "b"), (0, "c"), (1, "a"), (0, "d")]
                .map(|(db, k)| (db, k.as_bytes().to_vec()))
                .into(),
            urgent: 0,
            current: None,
            waited: false,
            released: false,
            db: None,
            to_writer,
            clock: Clock::at(0),
            snap: SnapshotOptions {
                encode: darner_rdb::EncodeOptions::default(),
                access: AccessOpcode::None,
                now_ms: 0,
                form: Form::Rdb,
            },
            stopped: Arc::new(AtomicBool::new(false)),
        };
        assert!(!out.promote(2, b"a"));
        assert!(!out.waited);
        assert!(out.promote(0, b"c"));
        assert!(out.promote(1, b"a"));
        assert!(out.promote(0, b"c"));
        assert!(out.waited);
        let order: Vec<(usize, &[u8])> = out.later.iter().map(|(d, k)| (*d, &k[..])).collect();
        let want: [(usize, &[u8]); 5] = [(0, b"c"), (1, b"a"), (0, b"a"), (0, b"b"), (0, b"d")];
        assert_eq!(order, want);
        assert_eq!(out.urgent, 2);
    }

    /// A big value's record is kept in parts of about [`CHUNK`] bytes (no buffer of the
    /// whole record to grow and copy on the shard), and the parts make the bytes one buffer
    /// would hold.
    #[test]
    fn a_big_record_is_kept_in_parts_of_a_chunk_that_make_the_whole_record() {
        let now = 1_700_000_000_000;
        let fields = (0..200_000)
            .map(|i| darner_rdb::HashField {
                field: format!("field:{i}").into_bytes(),
                value: vec![b'v'; 16],
                expire_at_ms: None,
            })
            .collect();
        let limits = darner_engine::types::Limits::default();
        let e = darner_engine::persist::entry_from_rdb(
            b"h",
            darner_rdb::Value::Hash(fields),
            None,
            0,
            &limits,
            now,
        )
        .unwrap();
        let snap = SnapshotOptions {
            encode: darner_rdb::EncodeOptions::default(),
            access: AccessOpcode::None,
            now_ms: now,
            form: Form::Rdb,
        };
        let clock = Clock::at(now);
        let mut whole = Vec::new();
        let mut walk = Big::start(&e, &snap, &clock, &mut whole).unwrap();
        while !walk.walk(&e, &snap, usize::MAX, &mut whole) {}

        let mut record = Vec::new();
        let walk = Big::start(&e, &snap, &clock, &mut record).unwrap();
        let mut big = BigValue {
            db: 0,
            record,
            parts: Vec::new(),
            walk,
            streaming: false,
            started: false,
        };
        while !big.walk(&e, &snap, BIG_STEP) {}
        assert!(big.parts.len() > 10, "{} parts", big.parts.len());
        for p in &big.parts {
            // A part ends at the first step past a chunk: one step's bytes over at most.
            assert!(
                p.len() >= CHUNK && p.len() < CHUNK + 64 * BIG_STEP,
                "{}",
                p.len()
            );
        }
        big.parts.push(big.record);
        assert_eq!(big.parts.concat(), whole);
    }
}
