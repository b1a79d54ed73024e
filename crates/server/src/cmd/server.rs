//! Server commands: COMMAND, INFO, DBSIZE, FLUSHDB, FLUSHALL, TIME, CONFIG, SLOWLOG, MONITOR,
//! SHUTDOWN, DEBUG, SAVE, LASTSAVE.
//!
//! - `server/command.rs`: COMMAND and its subcommands (the command table as Redis prints it).
//! - `server/info.rs`: INFO, CONFIG RESETSTAT and the sampled metrics INFO reports.
//! - `server/config.rs`: CONFIG GET / SET / REWRITE / HELP.
//! - `server/debug.rs`: DEBUG and its subcommands (DIGEST, PROTOCOL, OBJECT, SLEEP, ...).
//! - `server/lolwut.rs`: LOLWUT.
//! - `server/memory.rs`: MEMORY USAGE / STATS / DOCTOR / MALLOC-STATS / PURGE / HELP.
//! - `server/module.rs`: MODULE (no module is ever loaded).
//! - this file: the rest, and the HELP reply shared by the server commands.
//!
//! Where a command needs every shard (DBSIZE, FLUSHALL, INFO's keyspace) it is a `Tx` handler
//! that sends one hop per shard, all in flight at once.

mod command;
mod config;
mod debug;
mod info;
mod latency;
mod lolwut;
mod memory;
mod module;
mod replication;

pub use info::{cron, random_hex40, Metrics};

use super::{eq, with_writer, ConnCtx, Locks, Reg, TxFuture};
use crate::exec::Tx;
use crate::log;
use crate::shared::Shared;
use bytes::Bytes;
use darner_engine::table::Table;
use darner_resp::ReplyWriter;
use std::sync::atomic::Ordering;

pub fn register(r: &mut Reg) {
    command::register(r);
    config::register(r);
    info::register(r);
    latency::register(r);
    r.tx("dbsize", Locks::None, dbsize);
    r.tx("flushdb", Locks::All, flushdb);
    r.tx("flushall", Locks::All, flushall);
    r.tx("swapdb", Locks::All, swapdb);
    r.conn("time", time);
    r.conn("lastsave", lastsave);
    r.tx("bgsave", Locks::All, bgsave);
    r.tx("bgrewriteaof", Locks::All, bgrewriteaof);
    r.tx("save", Locks::All, save);
    r.conn("slowlog|get", slowlog_get);
    r.conn("slowlog|len", slowlog_len);
    r.conn("slowlog|reset", slowlog_reset);
    r.conn("slowlog|help", slowlog_help);
    r.conn("monitor", monitor);
    r.tx("shutdown", Locks::None, shutdown);
    debug::register(r);
    lolwut::register(r);
    memory::register(r);
    module::register(r);
    replication::register(r);
}

/// Writes a HELP reply the way Redis's `addReplyHelp` shapes it: a header naming the command
/// (as typed, upper-cased), the given lines, and the HELP entry, each a status reply.
pub fn help_reply(w: &mut ReplyWriter, command: &[u8], lines: &[&str]) {
    w.array(lines.len() + 3);
    let mut head = command.to_ascii_uppercase();
    head.extend_from_slice(b" <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    w.simple(&head);
    for l in lines {
        w.simple(l.as_bytes());
    }
    w.simple(b"HELP");
    w.simple(b"    Prints this help.");
}

/// Redis's reply for a known command given a subcommand it does not have (or the wrong
/// number of arguments for one): the subcommand as typed, the command upper-cased.
pub fn subcommand_error(w: &mut ReplyWriter, command: &[u8], sub: &[u8]) {
    let msg = format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)]),
        String::from_utf8_lossy(command).to_ascii_uppercase()
    );
    w.error(msg.as_bytes());
}

// ---- DBSIZE, FLUSHDB, FLUSHALL ----

fn dbsize(tx: Tx, _args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let n: usize = tx
            .run_all(|ctx| ctx.shard.dbs[ctx.db].len())
            .await
            .into_iter()
            .sum();
        with_writer(tx.resp3(), |w| w.int(n as i64))
    })
}

/// FLUSHDB / FLUSHALL's optional argument (ASYNC or SYNC: both free in steps, see
/// lazyfree.rs); false for a syntax error.
fn flush_mode_ok(args: &[Bytes]) -> bool {
    match args.len() {
        1 => true,
        2 => eq(&args[1], "async") || eq(&args[1], "sync"),
        _ => false,
    }
}

async fn flush(tx: &Tx, args: &[Bytes], all: bool) -> Vec<u8> {
    let resp3 = tx.resp3();
    if !flush_mode_ok(args) {
        return with_writer(resp3, |w| w.error(super::ERR_SYNTAX));
    }
    if all {
        // As Redis 7.2's FLUSHALL: a background save in progress is stopped (it would write
        // the data back), and with save points the empty dataset is saved at once.
        crate::bgsave::stop(tx).await;
    }
    flush_shards(tx, all).await;
    let shared = tx.shared();
    if all
        && shared.config.hot.save_points.load(Ordering::Relaxed)
        && crate::persist::save_at_cut(tx, flushall_cut(tx, args))
            .await
            .is_ok()
    {
        // The save leaves no change unsaved, this FLUSHALL included (Redis's rdbSave sets
        // `server.dirty` to 0 after the flush counted its keys): the call's own count,
        // added when it returns, is taken back.
        let thread = crate::exec::THREAD.with(|t| t.get());
        crate::shared::bump(&shared.stats[thread].undirty, 1);
    }
    with_writer(resp3, |w| w.ok())
}

/// The cut of FLUSHALL's save on a primary with a backlog, which records its place in the
/// stream as Redis's (rdbPopulateSaveInfo): this FLUSHALL's own transaction, its log ended
/// here with the FLUSHALL in it (what its coordinator would write after the handler) and
/// made a barrier, so the file's offset is the stream's just after this FLUSHALL: the empty
/// dataset it saves. (Redis takes its offset before the FLUSHALL is propagated, which a
/// restart then replays on the empty data; here the restarted primary stands where its
/// replicas stand after it, so they continue partially.) None inside EXEC or a script, whose
/// log holds other commands and must end with them: that save records no position.
fn flushall_cut(tx: &Tx, args: &[Bytes]) -> Option<crate::primary::SaveCut> {
    if tx.nested() || !tx.logging() {
        return None;
    }
    let cut = crate::primary::save_barrier(tx.shared())?;
    tx.log_command(args.to_vec());
    tx.start_repl_barrier_log();
    tx.end_log();
    cut.cut_done(tx.shared());
    Some(cut)
}

/// Empties every shard's databases (`all`) or the client's one, each shard freeing the old
/// tables in steps; tracking clients get their null invalidation. (FLUSHDB, FLUSHALL,
/// DEBUG RELOAD.)
pub async fn flush_shards(tx: &Tx, all: bool) {
    tx.run_all(move |ctx| {
        // Client tracking: every table is emptied and every tracking client told (below),
        // with one null invalidation, as Redis does for FLUSHDB and FLUSHALL alike.
        ctx.shard.tracking.clear();
        let flushed: Vec<Table> = if all {
            ctx.shard.dbs.iter_mut().map(|db| db.flush()).collect()
        } else {
            vec![ctx.shard.dbs[ctx.db].flush()]
        };
        for db in ctx.shard.dbs.iter_mut() {
            db.take_written();
        }
        // Each shard frees its old tables in steps (lazyfree.rs), whatever their size: a
        // table of a few keys may hold one huge value. (SYNC and ASYNC alike: see
        // docs/compatibility.md.)
        for t in flushed.into_iter().filter(|t| !t.is_empty()) {
            ctx.shard.dying.push_table(&ctx.shared.metrics, t);
        }
    })
    .await;
    if tx.shared().tracking.clients.load(Ordering::Relaxed) > 0 {
        for t in 0..tx.nshards() {
            crate::exec::post(tx.shared(), t, crate::msg::Msg::TrackingFlush);
        }
    }
}

fn flushdb(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move { flush(&tx, &args, false).await })
}

fn flushall(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move { flush(&tx, &args, true).await })
}

// ---- SWAPDB ----

/// SWAPDB index1 index2: every shard swaps its two databases while the command holds every
/// shard, so no client sees one shard swapped and another not.
fn swapdb(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| with_writer(resp3, |w| w.error(e));
        // Redis reads each index as a C int, with its own error.
        let index = |a: &[u8]| super::parse_int(a).filter(|&i| i32::try_from(i).is_ok());
        let Some(a) = index(&args[1]) else {
            return err(b"ERR invalid first DB index");
        };
        let Some(b) = index(&args[2]) else {
            return err(b"ERR invalid second DB index");
        };
        let n = tx.shared().databases as i64;
        if a < 0 || a >= n || b < 0 || b >= n {
            return err(b"ERR DB index is out of range");
        }
        let (a, b) = (a.min(b) as usize, a.max(b) as usize);
        tx.run_all(move |ctx| {
            let now = ctx.clock.now_ms;
            if a == b {
                ctx.shard.dbs[a].swap_with_itself(now);
            } else {
                let (lo, hi) = ctx.shard.dbs.split_at_mut(b);
                darner_engine::Db::swap(&mut lo[a], &mut hi[0], now);
            }
            // Client tracking (beyond Redis, which sends nothing): the keys of both databases
            // changed value under the same names, so every table is emptied and every
            // tracking client gets a null invalidation, as for FLUSHDB.
            if a != b {
                ctx.shard.tracking.clear();
            }
        })
        .await;
        if a != b && tx.shared().tracking.clients.load(Ordering::Relaxed) > 0 {
            for t in 0..tx.nshards() {
                crate::exec::post(tx.shared(), t, crate::msg::Msg::TrackingFlush);
            }
        }
        with_writer(resp3, |w| w.ok())
    })
}

// ---- SAVE, TIME, LASTSAVE ----

/// SAVE: the whole dataset to `dir/dbfilename`, holding every shard meanwhile (persist/).
fn save(tx: Tx, _args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        if tx.shared().bgsaves.in_progress.load(Ordering::Acquire) {
            return with_writer(tx.resp3(), |w| {
                w.error(b"ERR Background save already in progress")
            });
        }
        tx.shared().persist.saves.fetch_add(1, Ordering::Relaxed);
        let r = crate::persist::save(&tx).await;
        with_writer(tx.resp3(), |w| match r {
            Ok(()) => w.ok(),
            Err(_) => w.error(b"ERR"),
        })
    })
}

fn time(_: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    let us = Shared::now_us();
    w.array(2);
    w.bulk((us / 1_000_000).to_string().as_bytes());
    w.bulk((us % 1_000_000).to_string().as_bytes());
}

/// The unix time of the last successful save (the start time before the first, as Redis).
fn lastsave(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    w.int(ctx.shared.persist.lastsave.load(Ordering::Relaxed));
}

// ---- BGSAVE ----

/// BGSAVE [SCHEDULE]: a point-in-time snapshot written while the shards serve (bgsave.rs).
/// As in Redis, one inside MULTI/EXEC is scheduled: the cron starts it. SCHEDULE matters in
/// Redis only while another child process (an AOF rewrite) runs, which Darner does not have.
fn bgsave(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        if args.len() > 2 || (args.len() == 2 && !eq(&args[1], "schedule")) {
            return with_writer(resp3, |w| w.error(super::ERR_SYNTAX));
        }
        let b = &tx.shared().bgsaves;
        if tx.nested() && !b.in_progress.load(Ordering::Acquire) {
            b.scheduled.store(true, Ordering::Relaxed);
            return with_writer(resp3, |w| w.simple(b"Background saving scheduled"));
        }
        match crate::bgsave::start(&tx).await {
            Ok(()) => with_writer(resp3, |w| w.simple(b"Background saving started")),
            Err(e) => with_writer(resp3, |w| w.error(e)),
        }
    })
}

fn bgrewriteaof(tx: Tx, _args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        match crate::aof::start_rewrite(&tx).await {
            Ok(crate::aof::Rewrite::Started) => with_writer(resp3, |w| {
                w.simple(b"Background append only file rewriting started")
            }),
            Ok(crate::aof::Rewrite::Scheduled) => with_writer(resp3, |w| {
                w.simple(b"Background append only file rewriting scheduled")
            }),
            Err(e) => with_writer(resp3, |w| w.error(e)),
        }
    })
}

// ---- SLOWLOG ----

fn slowlog_get(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    if args.len() > 3 {
        return subcommand_error(w, args[0], args[1]);
    }
    let log = ctx.shared.slowlog.lock().unwrap();
    let count = match args.get(2) {
        None => 10,
        Some(a) => match super::parse_int(a) {
            Some(-1) => log.len(),
            Some(n) if n >= 0 => n as usize,
            _ => return w.error(b"ERR count should be greater than or equal to -1"),
        },
    };
    let n = count.min(log.len());
    w.array(n);
    for e in log.iter().take(n) {
        w.array(6);
        w.int(e.id as i64);
        w.int(e.time);
        w.int(e.micros as i64);
        w.array(e.args.len());
        for a in &e.args {
            w.bulk(a);
        }
        w.bulk(e.addr.as_bytes());
        w.bulk(e.name.as_bytes());
    }
}

fn slowlog_len(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    w.int(ctx.shared.slowlog.lock().unwrap().len() as i64);
}

fn slowlog_reset(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    ctx.shared.slowlog.lock().unwrap().clear();
    w.ok();
}

fn slowlog_help(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    help_reply(
        w,
        args[0],
        &[
            "GET [<count>]",
            "    Return the <count> most recent slow log entries (10 by default, -1 for all),",
            "    newest first. Each entry holds: id, unix time, duration in microseconds,",
            "    the command's arguments, the client's address and the client's name.",
            "LEN",
            "    Return the number of entries in the slow log.",
            "RESET",
            "    Empty the slow log.",
        ],
    );
}

// ---- MONITOR ----

fn monitor(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    // Already monitoring: Redis ignores the command and sends nothing.
    if ctx.client.monitor {
        return;
    }
    // The dispatcher counts monitors (`Shared::monitors`) when a command turns the flag on, on
    // the connection path and the transaction path alike; closing the connection uncounts it.
    ctx.client.monitor = true;
    w.ok();
}

// ---- SHUTDOWN ----

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. A transaction task (reserving nothing) so
/// that SHUTDOWN SAVE can take every shard for its snapshot; SHUTDOWN NOSAVE stays allowed
/// under a busy script.
fn shutdown(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| with_writer(resp3, |w| w.error(e));
        let (mut nosave, mut save, mut now, mut force, mut abort) =
            (false, false, false, false, false);
        for a in &args[1..] {
            if eq(a, "nosave") {
                nosave = true;
            } else if eq(a, "save") {
                save = true;
            } else if eq(a, "now") {
                now = true;
            } else if eq(a, "force") {
                force = true;
            } else if eq(a, "abort") {
                abort = true;
            } else {
                return err(super::ERR_SYNTAX);
            }
        }
        if (abort && (nosave || save || now || force)) || (nosave && save) {
            return err(super::ERR_SYNTAX);
        }
        if abort {
            // Shutdown here is immediate: there is never one in progress to abort.
            return err(b"ERR No shutdown in progress.");
        }
        let shared = tx.shared().clone();
        if let Some(e) = super::scripting::shutdown_refused(&shared, nosave) {
            return err(e);
        }
        // Every shard, for the save (and to stop a background save's shards); not for
        // NOSAVE, which stays allowed under a busy script that holds them.
        let points = shared.config.hot.save_points.load(Ordering::Relaxed);
        let hold = save || (points && !nosave);
        // On a replica the link pauses first, so the file records where its data stands
        // in the primary's stream (a restart continues from there).
        let _link = if hold {
            crate::replica::hold_link(&shared).await
        } else {
            None
        };
        if hold {
            tx.reserve(super::transactions::every_shard(tx.nshards()))
                .await;
        }
        if !finish_shutdown(&tx, hold, nosave, save, force).await {
            log::warning(
                "Errors trying to shut down the server. Check the logs for more information.",
            );
            return err(b"ERR Errors trying to SHUTDOWN. Check logs.");
        }
        // Success: no reply, the connection closes with the server (as in Redis).
        crate::server::shutdown(&shared);
        Vec::new()
    })
}

/// Redis's finishShutdown, for SHUTDOWN and for SIGTERM / SIGINT: stops a background save
/// in progress (its temporary file removed), then saves when asked to (`save`) or when save
/// points are set and NOSAVE was not given, never while the dataset is loading. False when
/// the save failed and `force` was not given: the server then goes on. `held`: `tx` holds
/// every shard (needed to save). The threads are stopped by the caller.
pub async fn finish_shutdown(tx: &Tx, held: bool, nosave: bool, save: bool, force: bool) -> bool {
    let shared = tx.shared().clone();
    log::warning("User requested shutdown...");
    let (mut nosave, mut save) = (nosave, save);
    if shared.persist.loading.load(Ordering::Relaxed) {
        (nosave, save) = (true, false);
    }
    let stopped = if held {
        crate::bgsave::stop(tx).await
    } else {
        crate::bgsave::stop_flag(&shared)
    };
    if stopped {
        log::warning("There is a background save in progress. Stopping it!");
        let tmp = crate::persist::rdb_path(&shared)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."))
            .join(crate::bgsave::temp_file_name());
        let _ = std::fs::remove_file(tmp);
    }
    let points = shared.config.hot.save_points.load(Ordering::Relaxed);
    if held && ((points && !nosave) || save) {
        log::notice("Saving the final RDB snapshot before exiting.");
        if crate::persist::save(tx).await.is_err() {
            if !force {
                log::warning("Error trying to save the DB, can't exit.");
                return false;
            }
            log::warning("Error trying to save the DB. Exit anyway.");
        }
    }
    true
}
