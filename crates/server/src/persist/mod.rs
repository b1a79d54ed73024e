//! RDB snapshots: SAVE, and loading `dir/dbfilename` at start-up (and for DEBUG RELOAD).
//!
//! - `snapshot.rs`: the per-shard serializer, a resumable cursor writing one database of one
//!   shard in bounded steps (its essay says why it is a cursor).
//! - `load.rs`: reading a file in pieces, routing its keys to their shards in batches, and
//!   building the entries on the shards' own threads.
//! - this file: the state INFO persistence reports, and [`save`], the driver that writes a
//!   whole file from a transaction holding every shard.
//!
//! # SAVE
//!
//! SAVE is a transaction over every shard (`Locks::All`): once it holds them, no command
//! runs anywhere until it lets go, so what it writes is one instant of the whole dataset, a
//! MULTI/EXEC over several shards wholly in it or wholly out. The driver runs on the client's
//! thread: it asks each shard for its counts (and whether a hash holds field TTLs, which makes
//! the file RDB 12), writes the header and AUX fields as Redis does, the function libraries,
//! then for each database `SELECTDB` and `RESIZEDB` (every shard's counts summed) and each
//! shard's part in hops: each shard runs its cursor for about [`STEP_BYTES`] and hands the
//! bytes back (every shard at once, each asked for its next step as soon as its last one is
//! back; a shard whose step ended inside a big value's record keeps the file until the record
//! is whole), which the driver appends to the file (the CRC-64 runs over them as
//! they pass, `darner_rdb::encode::FileWriter`). Memory stays about one step per shard, not a
//! copy of the dataset. The file is `temp-<pid>.rdb` in `dir`, fsynced, renamed to
//! `dbfilename`, and the directory fsynced, so a crash leaves the old file or the new one.

pub mod load;
pub mod snapshot;

use crate::exec::Tx;
use crate::log;
use crate::shared::Shared;
use darner_rdb::encode::FileWriter;
use snapshot::{DbCursor, SnapshotOptions};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// Bytes a shard writes per hop of SAVE.
pub const STEP_BYTES: usize = 1 << 20;

/// What INFO persistence and LASTSAVE report.
#[derive(Default)]
pub struct State {
    /// Unix seconds of the last successful save (the start time before the first one).
    pub lastsave: AtomicI64,
    /// Saves started since start (`rdb_saves`): SAVE commands and background saves, as
    /// Redis counts them (not the saves of SHUTDOWN and FLUSHALL).
    pub saves: AtomicU64,
    /// The change counter (`Shared::dirty`) at the last successful save.
    pub dirty_at_save: AtomicU64,
    /// Whether the last background save failed (`rdb_last_bgsave_status`; SAVE sets it back
    /// to ok when it succeeds, as Redis's rdbSave does).
    pub last_save_failed: AtomicBool,
    /// Set while the dataset is loading (`-LOADING`, INFO's `loading:1`).
    pub loading: AtomicBool,
    /// Set while a replica's `repl-diskless-load swapdb` load runs beside the old dataset,
    /// which clients go on reading (Redis's async loading: INFO's `async_loading:1`; only
    /// commands flagged `no-async-loading` get `-LOADING`).
    pub async_loading: AtomicBool,
    /// INFO's loading fields: start (unix s), file size, bytes read so far.
    pub loading_start: AtomicI64,
    pub loading_total_bytes: AtomicU64,
    pub loading_loaded_bytes: AtomicU64,
    /// The last load's counts (`rdb_last_load_keys_loaded` / `_expired`).
    pub last_load_keys: AtomicU64,
    pub last_load_expired: AtomicU64,
}

impl State {
    pub fn new(started_unix: i64) -> State {
        let s = State::default();
        s.lastsave.store(started_unix, Ordering::Relaxed);
        s
    }
}

/// The changes since start that count as Redis's `server.dirty`: successful calls of write
/// commands, less those that said they changed nothing; summed over threads.
pub fn dirty(shared: &Shared) -> u64 {
    let (mut d, mut u) = (0u64, 0u64);
    for s in &shared.stats {
        d = d.wrapping_add(s.dirty.load(Ordering::Relaxed));
        u = u.wrapping_add(s.undirty.load(Ordering::Relaxed));
    }
    d.saturating_sub(u)
}

/// `rdb_changes_since_last_save`.
pub fn changes_since_save(shared: &Shared) -> u64 {
    dirty(shared).saturating_sub(shared.persist.dirty_at_save.load(Ordering::Relaxed))
}

/// The file snapshots go to and load from: `dbfilename` in `dir` (the working directory).
pub fn rdb_path(shared: &Shared) -> std::path::PathBuf {
    std::path::PathBuf::from(
        shared
            .config
            .get("dbfilename")
            .unwrap_or_else(|| "dump.rdb".into()),
    )
}

pub(crate) fn yes(shared: &Shared, name: &str) -> bool {
    shared.config.get(name).as_deref() == Some("yes")
}

/// The working directory, for log lines.
pub(crate) fn cwd() -> String {
    std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// Writes the whole dataset to `dir/dbfilename`. `tx` must hold every shard. Logs as Redis
/// does and updates the state INFO reports; on failure the old file is untouched.
pub async fn save(tx: &Tx) -> Result<(), String> {
    save_at_cut(tx, None).await
}

/// [`save`], at a cut the caller made already (`cut`: FLUSHALL's, whose own transaction is
/// the barrier, see cmd/server.rs `flush`); with None the save makes its own when it can.
pub async fn save_at_cut(tx: &Tx, cut: Option<crate::primary::SaveCut>) -> Result<(), String> {
    let shared = tx.shared().clone();
    let r = save_to(tx, &rdb_path(&shared), cut).await;
    match &r {
        Ok(dirty) => {
            log::notice("DB saved on disk");
            let p = &shared.persist;
            p.lastsave.store(Shared::now_ms() / 1000, Ordering::Relaxed);
            p.dirty_at_save.store(*dirty, Ordering::Relaxed);
            p.last_save_failed.store(false, Ordering::Relaxed);
        }
        // A failed SAVE leaves `rdb_last_bgsave_status` alone, as in Redis (it describes
        // background saves, which BGSAVE will set).
        Err(e) => log::warning(e),
    }
    r.map(|_| ())
}

/// Per shard: each database's (keys, keys with a TTL), and whether a hash has field TTLs.
type Counts = (Vec<(u64, u64)>, bool);

/// [`save`] to `path`; returns the change counter as of the snapshot.
async fn save_to(
    tx: &Tx,
    path: &std::path::Path,
    given: Option<crate::primary::SaveCut>,
) -> Result<u64, String> {
    let shared = tx.shared().clone();
    let now_ms = Shared::now_ms();
    // Taken while every shard is held: exactly the changes the snapshot holds.
    let dirty = dirty(&shared);
    // A primary's save records where it stands in its stream (bgsave.rs `start_claimed`):
    // its cut is a barrier there, and the fields wait for the feed to reach it. A save
    // inside a transaction that logs (a command of EXEC or a script; FLUSHALL brings its
    // own cut) cannot end that log here: it records no position.
    let own = given.is_none() && !tx.logging();
    let save_cut = match given {
        Some(c) => Some(c),
        None if own => crate::primary::save_barrier(&shared),
        None => None,
    };
    let own = own && save_cut.is_some();
    if own {
        tx.start_repl_barrier_log();
    }
    let counts: Vec<Counts> = tx
        .run_all(move |ctx| {
            let dbs = &ctx.shard.dbs;
            let per_db = dbs
                .iter()
                .map(|d| (d.len() as u64, d.expires() as u64))
                .collect();
            let ttls = dbs.iter().any(|d| snapshot::has_hash_field_ttls(d, now_ms));
            (per_db, ttls)
        })
        .await;
    if let Some(c) = save_cut.as_ref().filter(|_| own) {
        tx.end_log();
        c.cut_done(&shared);
    }
    // SAVE holds every shard for the whole save anyway; this wait is bounded by the feed's
    // work queued before the cut, which no write can add to while the shards are held
    // (primary.rs `SaveCut`): the fields come first in the file.
    let primary = match &save_cut {
        Some(c) => c.position_async().await,
        None => None,
    };
    let version = if counts.iter().any(|c| c.1) {
        darner_rdb::WRITTEN_VERSION_FIELD_TTL
    } else {
        darner_rdb::WRITTEN_VERSION
    };
    let opts = SnapshotOptions::from_config(&shared, now_ms);
    let encode = opts.encode;

    let tmp = format!("temp-{}.rdb", std::process::id());
    let mut file = std::fs::File::create(&tmp).map_err(|e| {
        format!(
            "Failed opening the temp RDB file {tmp} (in server root dir {}) for saving: {e}",
            cwd()
        )
    })?;
    let written = async {
        let mut w = FileWriter::new(version, yes(&shared, "rdbchecksum"), encode);
        aux_fields(&shared, &mut w, now_ms, primary.as_ref());
        for code in shared.scripts.library_codes() {
            w.function(&code);
        }
        let dbs = counts.first().map_or(0, |c| c.0.len());
        for db in 0..dbs {
            let (keys, expires) = counts
                .iter()
                .fold((0, 0), |(k, e), c| (k + c.0[db].0, e + c.0[db].1));
            if keys == 0 {
                continue;
            }
            w.select_db(db as u64);
            w.resize_db(keys, expires);
            // Every shard steps at once, each asked for its next step as soon as its last one
            // is back, while the file takes the bytes. A database's keys may come from its
            // shards in any order, but a big value's record must be whole: while a shard's
            // step ends inside one, the file takes that shard's steps only.
            let step = |s: usize, c: DbCursor| {
                tx.run(s, move |ctx| {
                    let mut c = c;
                    let mut out = Vec::with_capacity(STEP_BYTES + (64 << 10));
                    let clock = ctx.clock;
                    let done = c.step(&ctx.shard.dbs[db], &clock, &mut out, STEP_BYTES);
                    (c, out, done)
                })
            };
            let n = tx.nshards();
            let mut steps: Vec<_> = (0..n)
                .map(|s| Some(step(s, DbCursor::new(db, opts))))
                .collect();
            let (mut left, mut s) = (n, 0);
            while left > 0 {
                let Some(hop) = steps[s].take() else {
                    s = (s + 1) % n;
                    continue;
                };
                let (c, bytes, done) = hop.await;
                let in_record = c.in_record();
                if done {
                    left -= 1;
                } else {
                    steps[s] = Some(step(s, c));
                }
                w.buf().extend_from_slice(&bytes);
                file.write_all(&w.take())?;
                if !in_record {
                    s = (s + 1) % n;
                }
            }
        }
        file.write_all(&w.finish())?;
        file.sync_all()
    }
    .await;
    if let Err(e) = written {
        drop(file);
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("Write error saving DB on disk: {e}"));
    }
    drop(file);
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "Error moving temp DB file {tmp} on the final destination {} (in server root dir {}): {e}",
            path.display(),
            cwd()
        ));
    }
    // The rename is durable once the directory is.
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(dirty)
}

/// The AUX fields Redis writes first (rdbSaveInfoAuxFields): version, bits, creation time,
/// memory in use, on a replica where its data stands in the primary's stream (taken now:
/// call it at the cut, see `replica::cut_position`), and `aof-base` 0 (not an AOF preamble).
pub(crate) fn aux_fields(
    shared: &Shared,
    w: &mut FileWriter,
    now_ms: i64,
    primary: Option<&crate::replica::ReplPosition>,
) {
    let slot = aux_fields_for(shared, w, now_ms, false);
    if let (Some(at), Some(pos)) = (slot, primary) {
        // In their place, before `aof-base` (the writer is fresh: nothing was taken yet).
        let fields = repl_aux(pos);
        let buf = w.buf();
        buf.splice(at..at, fields);
    }
}

/// [`aux_fields`], with `aof-base` 1 for an AOF's base file (which has no replication
/// fields, as Redis's). Returns, when the replication fields are not written (no position
/// known now) and the file is no AOF base, where in `w`'s bytes they would go: a primary's
/// full-sync snapshot learns its position only once the feed reaches its cut, and puts
/// them there then (bgsave.rs `SnapshotHead`).
pub(crate) fn aux_fields_for(
    shared: &Shared,
    w: &mut FileWriter,
    now_ms: i64,
    aof_base: bool,
) -> Option<usize> {
    w.aux(b"redis-ver", crate::REDIS_COMPAT_VERSION.as_bytes());
    w.aux(b"redis-bits", b"64");
    w.aux(b"ctime", now_ms.div_euclid(1000).to_string().as_bytes());
    w.aux(
        b"used-mem",
        crate::alloc::used_memory().to_string().as_bytes(),
    );
    let mut slot = None;
    if !aof_base {
        match crate::replica::cut_position(shared) {
            Some(pos) => w.buf().extend_from_slice(&repl_aux(&pos)),
            None => slot = Some(w.pending()),
        }
    }
    w.aux(b"aof-base", if aof_base { b"1" } else { b"0" });
    slot
}

/// The replication AUX fields of a snapshot at `pos` (Redis's rdbSaveInfoAuxFields:
/// `repl-stream-db`, `repl-id`, `repl-offset`, in this order).
pub(crate) fn repl_aux(pos: &crate::replica::ReplPosition) -> Vec<u8> {
    let mut out = Vec::new();
    darner_rdb::encode::write_aux(
        &mut out,
        b"repl-stream-db",
        pos.stream_db.to_string().as_bytes(),
    );
    darner_rdb::encode::write_aux(&mut out, b"repl-id", pos.replid.as_bytes());
    darner_rdb::encode::write_aux(&mut out, b"repl-offset", pos.offset.to_string().as_bytes());
    out
}
