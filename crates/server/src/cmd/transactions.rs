//! MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! MULTI queues commands in the client's state. EXEC runs them as one transaction task: it
//! locks every shard the queued commands (and the WATCHed keys) live on, in ascending order,
//! checks the WATCHed keys, then runs each queued command on its shard in turn. Because all
//! those shards stay locked until the end, no other client observes part of the transaction,
//! and shards it does not touch keep serving.
//!
//! WATCH registers a dirty flag with each key's shard; any write, delete or expiry of the key
//! sets it (`darner_engine::Db::touch`). A key that existed at WATCH time and has logically
//! expired by EXEC also aborts the transaction, as in Redis 7.

use super::{Command, ConnCtx, Handler, Locks, Reg, TxFuture};
use crate::conn::{ClientState, Watched};
use crate::exec::{Tx, THREAD};
use crate::sched::Intents;
use bytes::Bytes;
use darner_engine::WatchFlag;
use darner_resp::ReplyWriter;
use std::sync::atomic::Ordering;

pub fn register(r: &mut Reg) {
    r.conn("multi", multi);
    r.conn("discard", discard);
    r.conn("unwatch", unwatch);
    r.tx("watch", Locks::Keys, watch);
    r.tx("exec", Locks::Queued, exec);
}

fn multi(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    if ctx.client.in_multi() {
        return w.error(b"ERR MULTI calls can not be nested");
    }
    ctx.client.multi = Some(Vec::new());
    ctx.client.multi_dirty = false;
    w.ok();
}

fn discard(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    if !ctx.client.in_multi() {
        return w.error(b"ERR DISCARD without MULTI");
    }
    ctx.client.multi = None;
    ctx.client.multi_dirty = false;
    ctx.client.unwatch();
    w.ok();
}

fn unwatch(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    ctx.client.unwatch();
    w.ok();
}

fn watch(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        if tx.client().in_multi() {
            return super::with_writer(resp3, |w| {
                w.error(b"ERR WATCH inside MULTI is not allowed")
            });
        }
        let flag: WatchFlag = tx
            .client()
            .watch_flag
            .get_or_insert_with(Default::default)
            .clone();
        let db = tx.db();
        let hops: Vec<_> = args[1..]
            .iter()
            .map(|key| {
                let (k, f) = (key.clone(), flag.clone());
                tx.run(tx.shard_of(key), move |ctx| {
                    let now = ctx.now_ms();
                    ctx.shard.dbs[db].watch(&k, f, now)
                })
            })
            .collect();
        for (key, hop) in args[1..].iter().zip(hops) {
            let existed = hop.await;
            tx.client().watched.push(Watched {
                db,
                key: key.clone(),
                existed,
            });
        }
        super::with_writer(resp3, |w| w.ok())
    })
}

/// What a transaction task reserves before its handler runs (sched.rs): per shard, the keys of
/// the command (`Locks::Keys`), every shard whole (`Locks::All`), nothing (`Locks::None`, and
/// `Locks::Parts`, whose handler schedules its own one-shot parts), or for EXEC the keys of
/// every queued command and the WATCHed keys; a queued command that is not bound to its keys
/// (KEYS, FLUSHALL) makes EXEC reserve every shard whole.
pub fn reservation(
    cmd: &Command,
    args: &[&[u8]],
    keys: &[usize],
    locks: Locks,
    state: &ClientState,
    shards: usize,
    here: usize,
) -> Vec<(usize, Intents)> {
    let mut plan: Vec<(usize, Intents)> = Vec::new();
    match locks {
        Locks::None | Locks::Parts => {}
        Locks::All => return every_shard(shards),
        Locks::Keys => {
            let write = !cmd.spec.has(darner_commands::flags::READONLY);
            for &i in keys {
                add_key(&mut plan, shards, args[i], write);
            }
        }
        Locks::Queued => {
            for w in &state.watched {
                add_key(&mut plan, shards, &w.key, false);
            }
            if let Some(q) = &state.multi {
                for (cmd, args) in q {
                    match cmd.handler {
                        Handler::Conn(_) => {}
                        Handler::Key(_) | Handler::Tx(_, Locks::Keys | Locks::Parts) => {
                            let idx = darner_commands::key_positions(cmd.spec, args);
                            if idx.is_empty() && matches!(cmd.handler, Handler::Key(_)) {
                                // A keyless command runs on this thread's shard (run_in_tx)
                                // and may look at any of its keys.
                                shard_entry(&mut plan, here).whole = true;
                            }
                            let write = !cmd.spec.has(darner_commands::flags::READONLY);
                            for i in idx {
                                add_key(&mut plan, shards, args[i].as_ref(), write);
                            }
                        }
                        Handler::Tx(..) => return every_shard(shards),
                    }
                }
            }
        }
    }
    for (_, i) in plan.iter_mut() {
        i.normalize();
    }
    plan
}

pub fn every_shard(shards: usize) -> Vec<(usize, Intents)> {
    (0..shards).map(|s| (s, Intents::whole())).collect()
}

fn shard_entry(plan: &mut Vec<(usize, Intents)>, shard: usize) -> &mut Intents {
    let i = match plan.iter().position(|(s, _)| *s == shard) {
        Some(i) => i,
        None => {
            plan.push((shard, Intents::default()));
            plan.len() - 1
        }
    };
    &mut plan[i].1
}

fn add_key(plan: &mut Vec<(usize, Intents)>, shards: usize, key: &[u8], write: bool) {
    let e = shard_entry(plan, super::shard_of(key, shards));
    if !e.whole {
        e.push(key, write);
    }
}

/// A single-shard command inside a transaction: its shard, and the step that runs it there and
/// returns its reply.
pub fn key_step(
    tx: &Tx,
    cmd: &'static Command,
    f: super::KeyFn,
    args: Vec<Bytes>,
) -> (
    usize,
    impl FnOnce(&mut crate::shard::ShardCtx) -> Vec<u8> + Send + 'static,
) {
    let keys = darner_commands::key_positions(cmd.spec, &args);
    let here = THREAD.with(|t| t.get());
    let shard = super::key_shard(cmd.spec, &args, &keys, tx.nshards(), here);
    // Client tracking: a queued read is recorded as it runs, as in Redis (a write queued
    // after it in the same transaction then invalidates it).
    let track = tx
        .track()
        .filter(|_| cmd.spec.has(darner_commands::flags::READONLY));
    let step = move |ctx: &mut crate::shard::ShardCtx| {
        let views = super::views(&args);
        let reply = crate::propagate::call(
            ctx,
            cmd.spec,
            &views,
            |ctx| super::with_writer(ctx.resp3, |w| f(ctx, &views, w)),
            |r: &Vec<u8>| r.first() == Some(&b'-'),
        );
        if let Some(r) = track {
            for (_, k) in crate::tracking::read_keys(cmd.spec, &views, &keys, 1) {
                crate::tracking::remember_later(ctx.shard, &k, r);
            }
        }
        reply
    };
    (shard, step)
}

/// Runs one command inside a transaction whose locks are held; returns its reply.
pub async fn run_in_tx(tx: &Tx, cmd: &'static Command, args: Vec<Bytes>) -> Vec<u8> {
    match cmd.handler {
        Handler::Conn(f) => {
            let resp3 = tx.resp3();
            let out = {
                let mut client = tx.client();
                let shared = tx.shared().clone();
                let mut ctx = ConnCtx {
                    client: &mut client,
                    shared: &shared,
                    thread: THREAD.with(|t| t.get()),
                };
                super::with_writer(resp3, |w| f(&mut ctx, &super::views(&args), w))
            };
            let db = tx.client().db;
            tx.set_db(db);
            out
        }
        Handler::Key(f) => {
            let (shard, step) = key_step(tx, cmd, f, args);
            tx.run(shard, step).await
        }
        Handler::Tx(f, _) => {
            // Whether this command changed something is what its own steps wrote, not the
            // transaction's earlier commands (a DEL of missing keys after a SET changed
            // nothing: neither written nor counted, as in Redis).
            let wrote_before = tx.take_wrote_keys();
            tx.set_nested(true);
            let reply = f(tx.clone(), args.clone()).await;
            tx.set_nested(false);
            if reply.first() != Some(&b'-') {
                crate::propagate::coordinator_command(tx, cmd.spec, &args);
                if cmd.spec.has(darner_commands::flags::WRITE)
                    && !crate::propagate::changed_something(cmd.spec, tx.wrote_keys())
                {
                    // Not one of `server.dirty`'s changes (record_in_exec counts the call).
                    let thread = THREAD.with(|t| t.get());
                    crate::shared::bump(&tx.shared().stats[thread].undirty, 1);
                }
            }
            if wrote_before {
                tx.note_wrote_keys();
            }
            if let Some(r) = tx.track() {
                let at = darner_commands::key_positions(cmd.spec, &args);
                let keys = crate::tracking::read_keys(cmd.spec, &args, &at, tx.nshards());
                if !keys.is_empty() {
                    crate::tracking::remember_in_tx(tx, keys, r).await;
                }
            }
            reply
        }
    }
}

fn exec(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let reply = exec_queue(tx.clone(), args.clone()).await;
        // MONITOR shows EXEC after the commands it ran, as Redis does.
        let spec = darner_commands::lookup(b"exec").expect("exec is in the table");
        crate::worker::feed_monitors(tx.shared(), spec, &tx.client(), &super::views(&args));
        reply
    })
}

fn exec_queue(tx: Tx, _args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let (queue, dirty) = {
            let mut c = tx.client();
            if !c.in_multi() {
                return super::with_writer(resp3, |w| w.error(b"ERR EXEC without MULTI"));
            }
            let q = c.multi.take().unwrap_or_default();
            let d = c.multi_dirty;
            c.multi_dirty = false;
            (q, d)
        };
        if dirty {
            tx.client().unwatch();
            return super::with_writer(resp3, |w| {
                w.error(b"EXECABORT Transaction discarded because of previous errors.")
            });
        }
        // WATCH: a write or expiry since WATCH set the flag; a key that existed then and has
        // logically expired now (not yet reclaimed) also counts as changed, and so do set
        // members past their TTL that no command removed yet (SISMEMBER skips them without
        // removing them): the lookup below removes them, which sets the flag.
        // One time for the whole transaction (Redis's command time snapshot): a key set with
        // a TTL by one queued command does not expire before the next one reads it.
        tx.freeze_clock(crate::shared::Shared::now_ms());
        let watched = std::mem::take(&mut tx.client().watched);
        let flagged = |tx: &Tx| {
            tx.client()
                .watch_flag
                .as_ref()
                .is_some_and(|f| f.load(Ordering::Relaxed))
        };
        let mut aborted = flagged(&tx);
        if !aborted {
            for wk in watched.iter().filter(|w| w.existed) {
                let (db, key) = (wk.db, wk.key.clone());
                let expired = tx
                    .run(tx.shard_of(&wk.key), move |ctx| {
                        let mut view = ctx.db_at(db);
                        view.expired_in_place(&key) || view.peek(&key).is_none()
                    })
                    .await;
                if expired {
                    aborted = true;
                    break;
                }
            }
            aborted = aborted || flagged(&tx);
        }
        tx.client().unwatch();
        if aborted {
            return super::with_writer(resp3, |w| w.null_array());
        }
        let mut out = super::with_writer(resp3, |w| w.array(queue.len()));
        for (cmd, args) in queue {
            tx.next_step();
            // Each queued command counts in INFO commandstats / errorstats and the slow log,
            // as in Redis (EXEC itself is never slow-logged).
            let started = std::time::Instant::now();
            let reply = run_in_tx(&tx, cmd, args.clone()).await;
            // MONITOR: as Redis shows a command run by EXEC, once run (a SELECT shows the
            // database it selected).
            crate::worker::feed_monitors(tx.shared(), cmd.spec, &tx.client(), &super::views(&args));
            let us = started.elapsed().as_micros() as u64;
            crate::worker::record_in_exec(tx.shared(), cmd, us, &reply, &args, &tx.client());
            out.extend_from_slice(&reply);
        }
        out
    })
}
