//! Loading an RDB file: at start-up (before the server serves commands: clients get
//! `-LOADING` meanwhile) and for DEBUG RELOAD.
//!
//! One thread reads and decodes the file in pieces ([`FileLoader`]: `darner_rdb::FileDecoder`
//! fed 1 MiB reads, so memory stays bounded by the biggest single value, not the file), drops
//! the keys whose TTL has passed (as Redis does when a master loads a file), and routes each
//! key to its shard (`cmd::shard_of`, the server's own rule) in batches. Each shard builds its
//! entries on its own thread ([`insert_batch`]: `darner_engine::persist::from_rdb` with
//! the encoding limits in force), so the values' memory belongs to the thread that will use
//! and free it, and the shards build in parallel while the reader decodes the next batches.
//! A big collection arrives from the decoder in batches of elements, and goes to its shard
//! as it comes ([`Op::Start`], [`Op::Part`]s, [`Op::End`] in the shard's batches): the
//! shard keeps the value under construction in its slot of a [`Building`]
//! (`darner_engine::persist::ValueLoader`) and puts the key in the keyspace only at its end,
//! so the build overlaps the decoding, no gathered copy of the value exists, and the key is
//! never visible half built (nor left behind by an error on the way: the slot is dropped).
//! A big hash without field TTLs is fed to `darner_engine::types::dense::DenseBuilder`
//! batch by batch (partitioned by hash as it comes; at the end each partition is sorted and
//! cut into buckets), not set field by field; the other kinds are gathered on the shard and
//! built at the end. Memory stays bounded by the batches in flight and the value in
//! progress.
//!
//! The file's RESIZEDB hint sizes each shard's keyspace before its keys come ([`Op::Reserve`]:
//! the hint split by shard, and never more keys than the file's size allows at
//! [`MIN_KEY_BYTES`] a key, so a crafted hint allocates nothing big): the keyspace's
//! segments then neither grow nor split (rehashing their entries) during the load.
//!
//! Where the time goes (a 200 MB file of 200,000 1 KB strings and a 1M-field hash, two
//! shards): on the reader, the checksum (slicing by 8, ~1 cycle a byte), LZF and the copies
//! of the decoded strings; on the shards, the keyspace inserts and the big hash's build.
//! SAVE writes the shards' keys interleaved (every shard steps at once), so the shards
//! build at once; [`IN_FLIGHT`] lets the reader run ahead of a shard busy with a big value.
//!
//! Anything wrong in the file (a bad length, a failed listpack check, a duplicate key, the
//! checksum) stops the load with a message naming the file and the offset.

use crate::log;
use crate::shard::ShardCtx;
use darner_engine::Db;
use darner_rdb::{Entry as RdbEntry, FileDecoder, Item, Step, Value};
use std::io::Read;
use std::sync::atomic::Ordering;

/// Bytes read from the file at a time.
const READ_BYTES: usize = 1 << 20;
/// A shard's batch goes when it holds this many keys or bytes.
const BATCH_KEYS: usize = 512;
const BATCH_BYTES: usize = 1 << 20;

/// Bytes a key takes in a file, at least, as far as pre-sizing goes: a RESIZEDB hint is
/// bounded by the file's size over this, so a crafted hint sizes a keyspace of at most about
/// twice the file's size (a table slot costs ~28 bytes a key when pre-sized). A real key
/// takes 3 bytes at the very least (type, key length, value length); a file of keys smaller
/// than this only gets a smaller table, which grows as it would without the hint.
const MIN_KEY_BYTES: u64 = 16;

/// How many keys ahead of its insert [`insert_batch`] prefetches a key's bucket.
const PREFETCH_AHEAD: usize = 8;

/// What the reader hands a shard, in file order.
pub enum Op {
    /// A key decoded whole.
    Key(RdbEntry),
    /// Size database `db`'s keyspace for about `keys` keys (the file's RESIZEDB hint, this
    /// shard's share, bounded by the file's size).
    Reserve { db: u32, keys: usize },
    /// A big collection starts (its value: empty, of its kind), of about this many elements
    /// (the file's claim).
    Start(RdbEntry, u64),
    /// The next elements of the big collection in progress.
    Part(Value),
    /// The big collection is complete: it goes into the keyspace now.
    End,
}

/// Each shard's big collection in progress, built as its batches come (kept between a
/// shard's batches: its thread alone touches its slot, so the locks are never contended).
pub type Building = std::sync::Arc<Vec<std::sync::Mutex<Option<Partial>>>>;

/// A big collection under construction: its key, and its value so far.
pub struct Partial {
    meta: RdbEntry,
    value: darner_engine::persist::ValueLoader,
}

/// A fresh [`Building`] for `shards` shards.
pub fn building(shards: usize) -> Building {
    std::sync::Arc::new((0..shards).map(|_| Default::default()).collect())
}

/// What a file held besides its keys, and the counts of a finished load.
#[derive(Debug, Default)]
pub struct Summary {
    pub version: u16,
    /// Function libraries' code, in file order.
    pub functions: Vec<Vec<u8>>,
    /// Keys handed to shards, and keys dropped because their TTL had passed.
    pub keys: u64,
    pub expired: u64,
    /// Empty collections skipped.
    pub empty: u64,
    /// The replication fields of a replica's file: `repl-id`, `repl-offset`,
    /// `repl-stream-db` (as they come; checked by [`Summary::repl_position`]).
    pub repl_id: Option<Vec<u8>>,
    pub repl_offset: Option<i64>,
    pub repl_stream_db: Option<i64>,
}

impl Summary {
    /// Where the replica that wrote the file stood in its primary's stream, when the file
    /// says so in full (Redis's check: an ID, an offset, a stream database that is not -1).
    pub fn repl_position(&self) -> Option<crate::replica::ReplPosition> {
        let replid = darner_repl::ReplId::parse(self.repl_id.as_deref()?)?;
        let offset = self.repl_offset.filter(|&o| o >= 0)?;
        let stream_db = self.repl_stream_db.filter(|&d| d >= 0)?;
        Some(crate::replica::ReplPosition {
            replid,
            offset,
            stream_db,
        })
    }
}

/// Reads an RDB file in pieces and hands out its keys in per-shard batches.
pub struct FileLoader {
    /// The file, or a replica's stream of the primary's snapshot (`repl-diskless-load`).
    file: Box<dyn Read + Send>,
    name: String,
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed by the decoder.
    start: usize,
    eof: bool,
    dec: FileDecoder,
    shards: usize,
    databases: usize,
    now_ms: i64,
    /// Keys past their TTL are loaded too (an AOF's base: later commands in the AOF may
    /// still change them, as Redis loads a preamble).
    keep_expired: bool,
    /// Reads what has come rather than a megabyte at a time (a replica's socket), and says
    /// how many bytes it has read after each read (INFO's loading_loaded_bytes).
    streaming: Option<Box<dyn Fn(u64) + Send>>,
    pending: Vec<(Vec<Op>, usize)>,
    /// The big key in progress: its shard (None: dropped, its TTL passed) and whether an
    /// element came yet.
    big: Option<(Option<usize>, bool)>,
    /// The database the keys that follow go to, and the file's size (bounds a RESIZEDB hint).
    db: u32,
    size: u64,
    /// Bytes read so far (INFO's loading_loaded_bytes).
    pub read: u64,
    pub summary: Summary,
    ended: bool,
}

/// A load error, with the file's name and the offset in the message.
pub type LoadError = String;

impl FileLoader {
    /// Loads keys past their TTL too (see `keep_expired`).
    pub fn keep_expired(&mut self) {
        self.keep_expired = true;
    }

    /// Opens `path` (None when there is no such file).
    pub fn open(
        path: &std::path::Path,
        shards: usize,
        databases: usize,
        now_ms: i64,
    ) -> Result<Option<FileLoader>, LoadError> {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(format!(
                    "Fatal error loading the DB, check server logs. Exiting. ({}: {e})",
                    path.display()
                ))
            }
        };
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Some(FileLoader::from_reader(
            Box::new(file),
            path.display().to_string(),
            size,
            shards,
            databases,
            now_ms,
        )))
    }

    /// Reads the RDB `reader` gives, called `name` in errors; `size`: its length in bytes if
    /// known, else 0 (it bounds a RESIZEDB hint: with 0 the tables are not presized).
    pub fn from_reader(
        file: Box<dyn Read + Send>,
        name: String,
        size: u64,
        shards: usize,
        databases: usize,
        now_ms: i64,
    ) -> FileLoader {
        FileLoader {
            file,
            db: 0,
            size,
            name,
            buf: Vec::new(),
            start: 0,
            eof: false,
            dec: FileDecoder::new(),
            shards,
            databases,
            now_ms,
            keep_expired: false,
            streaming: None,
            pending: (0..shards).map(|_| (Vec::new(), 0)).collect(),
            big: None,
            read: 0,
            summary: Summary::default(),
            ended: false,
        }
    }

    /// The file's size in bytes (0 if unknown).
    pub fn size(&self) -> u64 {
        self.size
    }

    fn fail(&self, what: impl std::fmt::Display) -> LoadError {
        format!("Failed loading the RDB file {}: {what}", self.name)
    }

    /// Reads at least `need` more bytes unless the file ends first.
    fn fill(&mut self, need: u64) -> Result<(), LoadError> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        if self.streaming.is_some() {
            return self.fill_streaming(need);
        }
        let want = need.max(READ_BYTES as u64);
        let before = self.buf.len();
        // `take` bounds the read by what the file holds, whatever length the file claims.
        let got = (&mut self.file)
            .take(want)
            .read_to_end(&mut self.buf)
            .map_err(|e| self.fail(format_args!("read error: {e}")))?;
        self.read += got as u64;
        if got == 0 || ((self.buf.len() - before) as u64) < need {
            self.eof = true;
        }
        Ok(())
    }

    /// [`FileLoader::fill`] from a stream: whatever has come, once `need` bytes have (the
    /// decoder goes on with the keys of a slow sender's bytes as they arrive, rather than
    /// wait for a megabyte). Through a scratch buffer: a stream's reads are small.
    fn fill_streaming(&mut self, need: u64) -> Result<(), LoadError> {
        let mut got: u64 = 0;
        let mut scratch = vec![0u8; 64 << 10];
        while got < need.max(1) {
            match self.file.read(&mut scratch) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&scratch[..n]);
                    got += n as u64;
                    if let Some(progress) = &self.streaming {
                        progress(self.read + got);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.fail(format_args!("read error: {e}"))),
            }
        }
        self.read += got;
        Ok(())
    }

    /// Reads a stream ([`FileLoader::fill_streaming`]), telling `progress` the bytes read.
    pub fn streaming(&mut self, progress: Box<dyn Fn(u64) + Send>) {
        self.streaming = Some(progress);
    }

    /// The next batch for a shard: (shard, entries). None once the file is done (its
    /// checksum verified); then [`FileLoader::summary`] has the rest.
    pub fn next_batch(&mut self) -> Result<Option<(usize, Vec<Op>)>, LoadError> {
        loop {
            if self.ended {
                // Flush what the shards have not been given yet.
                return Ok(self
                    .pending
                    .iter_mut()
                    .enumerate()
                    .find(|(_, p)| !p.0.is_empty())
                    .map(|(s, p)| {
                        p.1 = 0;
                        (s, std::mem::take(&mut p.0))
                    }));
            }
            let step = self
                .dec
                .next(&self.buf[self.start..])
                .map_err(|e| self.fail(e))?;
            match step {
                Step::Need(n) => {
                    if self.eof {
                        let at = self.dec.offset() + (self.buf.len() - self.start) as u64;
                        return Err(self.fail(format_args!(
                            "unexpected end of file at offset {at} (the item at offset {} is cut short)",
                            self.dec.offset()
                        )));
                    }
                    self.fill(n)?;
                }
                Step::Item { item, consumed } => {
                    self.start += consumed;
                    if let Some(shard) = self.take(item)? {
                        let p = &mut self.pending[shard];
                        p.1 = 0;
                        return Ok(Some((shard, std::mem::take(&mut p.0))));
                    }
                }
            }
        }
    }

    /// Takes one decoded item; returns a shard whose batch is full.
    fn take(&mut self, item: Item) -> Result<Option<usize>, LoadError> {
        match item {
            Item::Header { version } => {
                self.summary.version = version;
            }
            Item::Aux { key, value } => {
                let number = || std::str::from_utf8(&value).ok()?.parse::<i64>().ok();
                match &key[..] {
                    b"repl-id" => self.summary.repl_id = Some(value.to_vec()),
                    b"repl-offset" => self.summary.repl_offset = number(),
                    b"repl-stream-db" => self.summary.repl_stream_db = number(),
                    _ => {}
                }
                aux(&key, &value, self.now_ms)
            }
            Item::SelectDb(db) => {
                if db as usize >= self.databases {
                    return Err(format!(
                        "FATAL: Data file was created with a Redis server configured to handle more than {} databases. Exiting",
                        self.databases
                    ));
                }
                self.db = db;
            }
            Item::ResizeDb { db_size, .. } => {
                // A hint from the file: no more keys than the file could hold.
                let keys = db_size.min(self.size / MIN_KEY_BYTES) / self.shards as u64;
                let keys = usize::try_from(keys).unwrap_or(usize::MAX);
                for p in &mut self.pending {
                    p.0.push(Op::Reserve { db: self.db, keys });
                }
            }
            Item::SlotInfo { .. } => {}
            Item::Function { code } => self.summary.functions.push(code),
            Item::Key(e) => return Ok(self.route(e)),
            Item::KeyStart(k) => {
                let dropped =
                    !self.keep_expired && k.expire_at_ms.is_some_and(|t| (t as i64) < self.now_ms);
                if dropped {
                    self.big = Some((None, false));
                    return Ok(None);
                }
                let s = crate::cmd::shard_of(&k.key, self.shards);
                self.big = Some((Some(s), false));
                let e = RdbEntry {
                    db: k.db,
                    key: k.key,
                    expire_at_ms: k.expire_at_ms,
                    idle_seconds: k.idle_seconds,
                    lfu_freq: k.lfu_freq,
                    value: k.kind.empty(),
                };
                return Ok(self.push(s, e.key.len(), Op::Start(e, k.len_hint)));
            }
            Item::Elements(batch) => {
                if let Some((s, any)) = self.big.as_mut() {
                    *any |= !batch.is_empty_collection();
                    if let Some(s) = *s {
                        return Ok(self.push(s, approx_size(&batch), Op::Part(batch)));
                    }
                }
            }
            Item::KeyEnd => match self.big.take() {
                Some((_, false)) => self.summary.empty += 1,
                Some((None, true)) => self.summary.expired += 1,
                Some((Some(s), true)) => {
                    self.summary.keys += 1;
                    return Ok(self.push(s, 0, Op::End));
                }
                None => {}
            },
            Item::EmptyKey { .. } => self.summary.empty += 1,
            Item::End { .. } => self.ended = true,
        }
        Ok(None)
    }

    /// Drops an expired key, or adds it to its shard's batch; returns the shard if its batch
    /// is full.
    fn route(&mut self, e: RdbEntry) -> Option<usize> {
        if !self.keep_expired && e.expire_at_ms.is_some_and(|t| (t as i64) < self.now_ms) {
            self.summary.expired += 1;
            return None;
        }
        self.summary.keys += 1;
        let s = crate::cmd::shard_of(&e.key, self.shards);
        let bytes = e.key.len() + approx_size(&e.value);
        self.push(s, bytes, Op::Key(e))
    }

    /// Adds `op` (about `bytes` bytes) to shard `s`'s batch; returns `s` if the batch is full.
    fn push(&mut self, s: usize, bytes: usize, op: Op) -> Option<usize> {
        let p = &mut self.pending[s];
        p.1 += bytes;
        p.0.push(op);
        (p.0.len() >= BATCH_KEYS || p.1 >= BATCH_BYTES).then_some(s)
    }
}

/// Logs the AUX fields Redis logs while loading.
fn aux(key: &[u8], value: &[u8], now_ms: i64) {
    let v = String::from_utf8_lossy(value);
    match key {
        b"redis-ver" | b"valkey-ver" => {
            log::notice(&format!("Loading RDB produced by version {v}"))
        }
        b"ctime" => {
            let ctime: i64 = v.parse().unwrap_or(0);
            let age = (now_ms / 1000 - ctime).max(0);
            log::notice(&format!("RDB age {age} seconds"));
        }
        b"used-mem" => {
            let mem: f64 = v.parse().unwrap_or(0.0);
            log::notice(&format!(
                "RDB memory usage when created {:.2} Mb",
                mem / (1024.0 * 1024.0)
            ));
        }
        _ => {}
    }
}

/// About how many bytes a value holds (for batch sizes).
fn approx_size(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::List(x) | Value::Set(x) => x.iter().map(|e| e.len() + 16).sum(),
        Value::SetWithTtl(x) => x.iter().map(|e| e.0.len() + 24).sum(),
        Value::SortedSet(x) => x.iter().map(|e| e.0.len() + 24).sum(),
        Value::Hash(x) => x.iter().map(|f| f.field.len() + f.value.len() + 32).sum(),
        Value::Stream(s) => s.entries.len() * 64,
    }
}

/// Builds a batch's entries on their shard (run on the shard's thread). A key already there
/// is an error (Redis's "duplicated key"), or with `replace` is replaced. Errors name the key.
/// A big collection is built in `building`'s slot for this shard batch by batch, and goes
/// into the keyspace only at its end: an error on the way leaves no key behind.
pub fn insert_batch(
    ctx: &mut ShardCtx,
    batch: Vec<Op>,
    replace: bool,
    building: &Building,
    target: Target,
) -> Result<(), String> {
    let limits = ctx.limits();
    let clock = ctx.clock;
    let mut slot = building[ctx.shard.id].lock().unwrap();
    let dbs = match target {
        Target::Live => &mut ctx.shard.dbs,
        Target::Staging(id) => staging_dbs(ctx, id)?,
    };
    // The bucket of the key PREFETCH_AHEAD keys on is asked for before this key goes in:
    // each insert's first touch of its bucket was a cache miss (the keyspace is far bigger
    // than the cache), and with the misses overlapped the inserts no longer wait for them
    // one by one. The key is hashed twice, which costs less than the wait.
    let prefetch = |dbs: &[Db], op: &Op| {
        if let Op::Key(e) = op {
            if let Some(d) = dbs.get(e.db as usize) {
                d.prefetch(&e.key);
            }
        }
    };
    let mut ops: std::collections::VecDeque<Op> = batch.into();
    for op in ops.iter().take(PREFETCH_AHEAD) {
        prefetch(dbs, op);
    }
    while let Some(op) = ops.pop_front() {
        if let Some(ahead) = ops.get(PREFETCH_AHEAD - 1) {
            prefetch(dbs, ahead);
        }
        let (e, loaded) = match op {
            Op::Key(mut e) => {
                let value = std::mem::replace(&mut e.value, Value::List(Vec::new()));
                let loaded = darner_engine::persist::from_rdb(value, &limits, clock.now_ms)
                    .map_err(|m| bad_value(&e.key, e.db as usize, m))?;
                (e, loaded)
            }
            Op::Reserve { db, keys } => {
                if let Some(d) = dbs.get_mut(db as usize) {
                    d.reserve(keys);
                }
                continue;
            }
            Op::Start(mut meta, hint) => {
                let empty = std::mem::replace(&mut meta.value, Value::List(Vec::new()));
                let value = darner_engine::persist::ValueLoader::new(empty, hint);
                *slot = Some(Partial { meta, value });
                continue;
            }
            Op::Part(batch) => {
                let Some(p) = slot.as_mut() else { continue };
                if let Err(m) = p.value.push(batch, &limits) {
                    let p = slot.take().expect("checked");
                    return Err(bad_value(&p.meta.key, p.meta.db as usize, m));
                }
                continue;
            }
            Op::End => {
                let Some(p) = slot.take() else { continue };
                let db = p.meta.db as usize;
                match p.value.finish(&limits, clock.now_ms) {
                    Ok(Some(loaded)) => (p.meta, loaded),
                    Ok(None) => continue,
                    Err(m) => return Err(bad_value(&p.meta.key, db, m)),
                }
            }
        };
        let db = e.db as usize;
        if db >= dbs.len() {
            return Err(format!("key in database {db}, out of range"));
        }
        // The access clock, as RESTORE sets it: the file's LFU counter under an LFU policy,
        // its idle time under LRU (Redis's objectSetLRUOrLFU).
        let access = match (clock.lfu, e.lfu_freq, e.idle_seconds) {
            (Some(l), Some(f), _) => ((l.minute as u16) << 8) | f as u16,
            (None, _, Some(idle)) => clock.lru.wrapping_sub(idle.min(u16::MAX as u64) as u16),
            _ => clock.lru,
        };
        let expire = e
            .expire_at_ms
            .map(|t| i64::try_from(t).map_err(|_| "TTL out of range".to_string()))
            .transpose()?;
        let entry = loaded.into_entry(&e.key, expire, access);
        let mut view = dbs[db].view(clock);
        if replace {
            view.set(entry);
        } else if view.set_absent(entry).is_err() {
            return Err(format!(
                "RDB has duplicated key '{}' in DB {db}",
                String::from_utf8_lossy(&e.key)
            ));
        }
    }
    Ok(())
}

/// Where [`insert_batch`] puts the keys: the databases clients see, or the staging
/// databases of the `repl-diskless-load swapdb` load with this ID (see [`crate::shard::Staging`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Live,
    Staging(u64),
}

/// The staging databases of load `id` on this shard, created on its first batch. A load
/// winding down after a newer one started finds its batches refused (the newer load's keys
/// must not mix with its); a newer load replaces an older load's leftovers.
fn staging_dbs<'a>(ctx: &'a mut ShardCtx, id: u64) -> Result<&'a mut Vec<Db>, String> {
    match &ctx.shard.staging {
        Some(s) if s.id > id => return Err("a newer load replaced this one".to_string()),
        Some(s) if s.id == id => {}
        _ => {
            discard_staging(ctx, None);
            let n = ctx.shard.dbs.len();
            ctx.shard.staging = Some(crate::shard::Staging {
                id,
                dbs: (0..n).map(|_| Db::new()).collect(),
            });
        }
    }
    Ok(&mut ctx.shard.staging.as_mut().expect("set above").dbs)
}

/// Drops this shard's staging databases (those of load `id` only, or any with None), their
/// tables freed in steps as a flush's are (lazyfree.rs): a failed load's keys may be many.
pub fn discard_staging(ctx: &mut ShardCtx, id: Option<u64>) {
    if id.is_some_and(|id| ctx.shard.staging.as_ref().is_some_and(|s| s.id != id)) {
        return;
    }
    let Some(s) = ctx.shard.staging.take() else {
        return;
    };
    for mut db in s.dbs {
        let t = db.flush();
        if !t.is_empty() {
            ctx.shard.dying.push_table(&ctx.shared.metrics, t);
        }
    }
}

fn bad_value(key: &[u8], db: usize, m: &str) -> String {
    format!(
        "bad value of key '{}' in DB {db}: {m}",
        String::from_utf8_lossy(key)
    )
}

/// Waits for the shard batches in flight at start-up: each shard has at most this many
/// (about `BATCH_BYTES` each). Why more than a few: while one shard finishes a big value
/// (its hash's buckets cut at its end) the reader goes on decoding the next keys, many of
/// them that shard's, rather than wait.
const IN_FLIGHT: usize = 32;

/// Batches (about `BATCH_BYTES` each) waiting on one shard at most in [`load_from`]: enough
/// for the decoding never to wait on a shard that keeps up, few enough to bound what is
/// decoded and not yet inserted.
const LOAD_IN_FLIGHT: usize = 4;

/// Logs `msg` and exits with status 1 (a load that failed at start-up: nothing is served).
fn exit(msg: &str) -> ! {
    log::warning(msg);
    std::process::exit(1);
}

/// Opens `dir/dbfilename` for [`at_startup`], before the threads start (None: no file).
pub fn open_at_startup(shared: &crate::shared::Shared) -> Option<FileLoader> {
    let path = super::rdb_path(shared);
    let now = crate::shared::Shared::now_ms();
    let mut loader =
        FileLoader::open(&path, shared.threads, shared.databases, now).unwrap_or_else(|e| exit(&e));
    // Started as a replica (`replicaof`): keys whose TTL passed wait for the primary's DEL.
    if shared.config.replicaof().is_some() {
        if let Some(l) = loader.as_mut() {
            l.keep_expired();
        }
    }
    loader
}

/// Loads the file [`open_at_startup`] opened into the shards (whose threads run and answer
/// `-LOADING` meanwhile). On any error: the message is logged and the process exits with
/// status 1, before anything is served. Returns where a replica's file stood in its
/// primary's stream (see [`Summary::repl_position`]).
pub fn at_startup(
    shared: &std::sync::Arc<crate::shared::Shared>,
    loader: FileLoader,
) -> Option<crate::replica::ReplPosition> {
    let path = super::rdb_path(shared);
    load_file(shared, loader, &path)
}

/// [`at_startup`]'s load, of the file at `path` (also an AOF's RDB base: aof.rs).
pub fn load_file(
    shared: &std::sync::Arc<crate::shared::Shared>,
    mut loader: FileLoader,
    path: &std::path::Path,
) -> Option<crate::replica::ReplPosition> {
    let start = std::time::Instant::now();
    let p = &shared.persist;
    p.loading_start
        .store(loader.now_ms / 1000, Ordering::Relaxed);
    p.loading_total_bytes
        .store(loader.size(), Ordering::Relaxed);
    p.loading_loaded_bytes.store(0, Ordering::Relaxed);
    match feed_shards(shared, &mut loader, Target::Live, &|| false) {
        Ok(true) => {}
        Ok(false) => return None,
        Err(Fed::Decode(e)) => exit(&e),
        Err(Fed::Shard(e)) => exit(&format!(
            "Failed loading the RDB file {}: {e}",
            path.display()
        )),
    }
    let s = std::mem::take(&mut loader.summary);
    if let Err(e) = shared.scripts.install_libraries(&s.functions, false) {
        exit(&format!(
            "Failed loading the RDB file {}: function library: {e}",
            path.display()
        ));
    }
    done_log(shared, &s, start);
    s.repl_position()
}

/// Why [`feed_shards`] stopped: the file (the decoder's message names it) or a shard's
/// build of a key.
pub enum Fed {
    Decode(String),
    Shard(String),
}

/// Reads `loader` to its end on this (blocking) thread and has each shard insert its keys
/// into `target`, as lone steps, at most [`IN_FLIGHT`] batches a shard at once; the shards'
/// threads go on serving clients between batches. Ok(false): stopped early (the shutdown,
/// or `stop`). Returns once no batch is in flight, whatever the outcome.
pub fn feed_shards(
    shared: &std::sync::Arc<crate::shared::Shared>,
    loader: &mut FileLoader,
    target: Target,
    stop: &dyn Fn() -> bool,
) -> Result<bool, Fed> {
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Arc, Mutex};
    let p = &shared.persist;
    let in_flight: Arc<Vec<AtomicUsize>> =
        Arc::new((0..shared.threads).map(|_| AtomicUsize::new(0)).collect());
    let failed: Arc<Mutex<Option<String>>> = Default::default();
    let me = std::thread::current();
    let build = building(shared.threads);
    let halted = || shared.shutdown.load(Ordering::Relaxed) || stop();
    let drained = || {
        while in_flight.iter().any(|n| n.load(Ordering::Acquire) > 0)
            && !shared.shutdown.load(Ordering::Relaxed)
        {
            std::thread::park_timeout(std::time::Duration::from_millis(1));
        }
    };
    loop {
        let batch = match loader.next_batch() {
            Ok(b) => b,
            Err(e) => {
                drained();
                return Err(Fed::Decode(e));
            }
        };
        p.loading_loaded_bytes.store(loader.read, Ordering::Relaxed);
        let Some((s, entries)) = batch else { break };
        while in_flight[s].load(Ordering::Acquire) >= IN_FLIGHT {
            if halted() {
                drained();
                return Ok(false);
            }
            std::thread::park_timeout(std::time::Duration::from_millis(1));
        }
        if let Some(e) = failed.lock().unwrap().clone() {
            drained();
            return Err(Fed::Shard(e));
        }
        if halted() {
            drained();
            return Ok(false);
        }
        in_flight[s].fetch_add(1, Ordering::AcqRel);
        let (flight, failed, me, build) =
            (in_flight.clone(), failed.clone(), me.clone(), build.clone());
        shared.send(
            s,
            crate::msg::Msg::Run {
                tx: None,
                db: 0,
                resp3: false,
                writer: None,
                f: Box::new(move |ctx| {
                    if let Err(e) = insert_batch(ctx, entries, false, &build, target) {
                        failed.lock().unwrap().get_or_insert(e);
                    }
                    flight[s].fetch_sub(1, Ordering::AcqRel);
                    me.unpark();
                }),
            },
        );
    }
    while in_flight.iter().any(|n| n.load(Ordering::Acquire) > 0) {
        if shared.shutdown.load(Ordering::Relaxed) {
            return Ok(false);
        }
        std::thread::park_timeout(std::time::Duration::from_millis(1));
    }
    if let Some(e) = failed.lock().unwrap().clone() {
        return Err(Fed::Shard(e));
    }
    Ok(true)
}

/// The lines Redis logs at the end of a load, and the counts INFO reports.
pub fn done_log(shared: &crate::shared::Shared, s: &Summary, start: std::time::Instant) {
    log::notice(&format!(
        "Done loading RDB, keys loaded: {}, keys expired: {}.",
        s.keys, s.expired
    ));
    let p = &shared.persist;
    p.last_load_keys.store(s.keys, Ordering::Relaxed);
    p.last_load_expired.store(s.expired, Ordering::Relaxed);
    log::notice(&format!(
        "DB loaded from disk: {:.3} seconds",
        start.elapsed().as_secs_f64()
    ));
}

/// DEBUG RELOAD's load: `dir/dbfilename` into the shards `tx` holds (every one), batch by
/// batch. `merge`: a key already present is replaced (Redis's MERGE) instead of being an
/// error. Function libraries: with `flush`, the file's replace them; otherwise they are added.
pub async fn reload(tx: &crate::exec::Tx, flush: bool, merge: bool) -> Result<(), String> {
    let shared = tx.shared().clone();
    let path = super::rdb_path(&shared);
    let now = crate::shared::Shared::now_ms();
    let loader =
        FileLoader::open(&path, shared.threads, shared.databases, now)?.ok_or_else(|| {
            format!(
                "Fatal error loading the DB ({}): no such file",
                path.display()
            )
        })?;
    load_from(tx, loader, flush, merge).await
}

/// [`reload`]'s load, from any loader (a replica's diskless load gives one reading the
/// primary's stream).
pub async fn load_from(
    tx: &crate::exec::Tx,
    mut loader: FileLoader,
    flush: bool,
    merge: bool,
) -> Result<(), String> {
    let shared = tx.shared().clone();
    // A replica keeps keys whose TTL passed: its primary's DEL removes them (Redis loads
    // them unless it is a master).
    if shared.repl.is_replica.load(Ordering::SeqCst) {
        loader.keep_expired();
    }
    let start = std::time::Instant::now();
    let path = loader.name.clone();
    let build = building(shared.threads);
    // Batches go out without waiting for each to be inserted: the decoding (on this thread)
    // goes on while the other shards insert, where waiting for every batch made the load
    // one thread's work whatever the threads. A shard takes its batches in the order they
    // were sent; at most LOAD_IN_FLIGHT wait at once on any shard. On an error nothing more
    // is sent, and what was is waited for before returning (the caller empties the
    // databases after a failed load where it matters: a replica's).
    let mut in_flight = std::collections::VecDeque::new();
    let mut queued = vec![0usize; shared.threads];
    // A shard's error is of a key before any the decoder has not given yet: it wins.
    let (mut failed, mut undecodable): (Option<String>, Option<String>) = (None, None);
    loop {
        let (s, entries) = match loader.next_batch() {
            Ok(Some(b)) => b,
            Ok(None) => break,
            Err(e) => {
                undecodable = Some(e);
                break;
            }
        };
        while queued[s] >= LOAD_IN_FLIGHT && failed.is_none() {
            let (t, hop): (usize, crate::exec::Hop<Result<(), String>>) = in_flight
                .pop_front()
                .expect("a shard's batches are in flight");
            queued[t] -= 1;
            if let Err(e) = hop.await {
                failed = Some(format!("Failed loading the RDB file {path}: {e}"));
            }
        }
        if failed.is_some() {
            break;
        }
        let build = build.clone();
        in_flight.push_back((
            s,
            tx.run(s, move |ctx| {
                insert_batch(ctx, entries, merge, &build, Target::Live)
            }),
        ));
        queued[s] += 1;
    }
    for (_, hop) in in_flight {
        if let Err(e) = hop.await {
            failed.get_or_insert(format!("Failed loading the RDB file {path}: {e}"));
        }
    }
    if let Some(e) = failed.or(undecodable) {
        return Err(e);
    }
    let s = std::mem::take(&mut loader.summary);
    let mut codes: Vec<Vec<u8>> = if flush {
        Vec::new()
    } else {
        shared
            .scripts
            .library_codes()
            .iter()
            .map(|b| b.to_vec())
            .collect()
    };
    codes.extend(s.functions.iter().cloned());
    shared
        .scripts
        .install_libraries(&codes, merge)
        .map_err(|e| format!("Failed loading the RDB file {path}: function library: {e}"))?;
    done_log(&shared, &s, start);
    Ok(())
}
