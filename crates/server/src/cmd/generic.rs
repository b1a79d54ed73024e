//! Key commands: DEL, UNLINK, EXISTS, TOUCH, TYPE, RENAME, RENAMENX, COPY, MOVE, KEYS, SCAN,
//! RANDOMKEY, the EXPIRE / TTL family, PERSIST and OBJECT.
//!
//! Multi-key commands are `Tx` handlers: DEL, UNLINK, EXISTS and TOUCH run as one-shot parts
//! (one message per shard, sched.rs), RENAME, RENAMENX and COPY reserve their keys first (the
//! destination's part depends on what the source's found); whole-keyspace commands (KEYS,
//! SCAN, RANDOMKEY) reserve nothing and visit shards with plain hops. Commands whose keys
//! are all on one shard (MOVE included: a key's shard is the same in every database) are `Key`
//! handlers.

use super::{ConnCtx, Locks, Reg, TxFuture};
use crate::exec::Tx;
use crate::notify::{self, notify, GENERIC};
use crate::sched::Intents;
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_engine::{glob_match, Entry, SCAN_DONE};
use darner_resp::ReplyWriter;

pub fn register(r: &mut Reg) {
    r.parts("del", del, del_one_shard);
    r.parts("unlink", unlink, del_one_shard);
    r.parts("exists", exists, exists_one_shard);
    r.parts("touch", touch, touch_one_shard);
    r.key("type", type_cmd);
    r.tx("rename", Locks::Parts, rename);
    r.tx("renamenx", Locks::Parts, renamenx);
    r.tx("copy", Locks::Parts, copy);
    r.key("move", move_cmd);
    r.tx("keys", Locks::None, keys);
    r.tx("scan", Locks::None, scan);
    r.tx("randomkey", Locks::None, randomkey);
    r.key("expire", expire);
    r.key("pexpire", pexpire);
    r.key("expireat", expireat);
    r.key("pexpireat", pexpireat);
    r.key("ttl", ttl);
    r.key("pttl", pttl);
    r.key("expiretime", expiretime);
    r.key("pexpiretime", pexpiretime);
    r.key("persist", persist);
    r.key("dump", dump);
    r.key("restore", restore);
    r.key("object|encoding", object_encoding);
    r.key("object|freq", object_freq);
    r.key("object|idletime", object_idletime);
    r.key("object|refcount", object_refcount);
    r.conn("object|help", object_help);
}

const ERR_SAME_OBJECT: &[u8] = b"ERR source and destination objects are the same";
const ERR_INVALID_CURSOR: &[u8] = b"ERR invalid cursor";
const ERR_LFU_IDLE: &[u8] = b"ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
const ERR_NO_LFU: &[u8] = b"ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
/// Redis's refcount of its shared integer objects (OBJ_SHARED_REFCOUNT = INT_MAX).
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Redis shares the integer objects 0..OBJ_SHARED_INTEGERS.
const SHARED_INTEGERS: i64 = 10_000;

/// Groups argument indices by shard: (shard, indices) in ascending shard order.
/// Each group's list is sized once (MGET, DEL, EXISTS of a few keys grew theirs one index at
/// a time: a few reallocations per command on the cross-shard path).
pub fn by_shard(tx: &Tx, keys: &[Bytes]) -> Vec<(usize, Vec<usize>)> {
    let shards: smallvec::SmallVec<[usize; 16]> = keys.iter().map(|k| tx.shard_of(k)).collect();
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, &s) in shards.iter().enumerate() {
        match groups.iter_mut().find(|g| g.0 == s) {
            Some(g) => g.1.push(i),
            None => {
                let mut idx = Vec::with_capacity(shards[i..].iter().filter(|&&t| t == s).count());
                idx.push(i);
                groups.push((s, idx));
            }
        }
    }
    groups.sort_by_key(|g| g.0);
    groups
}

/// Runs `f(ctx, key)` for every key of `args[1..]` on its shard (shards in parallel, as
/// one-shot parts: one message per shard) and sums the results. `write`: whether `f` writes
/// the keys. The keys move into the parts, none copied.
async fn count_keys(
    tx: &Tx,
    mut args: Vec<Bytes>,
    write: bool,
    f: fn(&mut ShardCtx, &[u8]) -> i64,
) -> i64 {
    let groups = by_shard(tx, &args[1..]);
    let plan: Vec<_> = groups
        .into_iter()
        .map(|(s, idx)| {
            let ks: Vec<Bytes> = idx
                .iter()
                .map(|&i| std::mem::take(&mut args[1 + i]))
                .collect();
            let intents = if write {
                Intents::of_keys(&ks, true)
            } else {
                Intents::of_reads(&ks, tx.tracks_reads())
            };
            (s, intents, move |ctx: &mut ShardCtx| {
                ctx.prefetch(&ks);
                ks.iter().map(|k| f(ctx, k)).sum::<i64>()
            })
        })
        .collect();
    tx.run_parts(plan).await.into_iter().sum()
}

const ERR_NOT_C_INT: &[u8] =
    b"ERR value is out of range, value must between -2147483648 and 2147483647";

/// Parses a database index argument as Redis does (`getIntFromObjectOrReply`, then
/// `selectDb`): Err is the error reply.
fn parse_db(arg: &[u8], databases: usize) -> Result<usize, &'static [u8]> {
    match super::parse_int(arg) {
        None => Err(super::ERR_NOT_INT),
        Some(i) if i < i32::MIN as i64 || i > i32::MAX as i64 => Err(ERR_NOT_C_INT),
        Some(i) if i < 0 || i as usize >= databases => Err(super::ERR_DB_INDEX),
        Some(i) => Ok(i as usize),
    }
}

// ---------------------------------------------------------------------------------------------
// DEL, UNLINK, EXISTS, TOUCH, TYPE

// One key's work of DEL, EXISTS and TOUCH on its shard (1 when it counts), shared by their
// transaction form (`count_keys`) and the direct path of a plain command
// (worker/direct.rs).

pub fn del_key(ctx: &mut ShardCtx, k: &[u8]) -> i64 {
    let gone = ctx.db().delete(k);
    if gone {
        notify(ctx, GENERIC, "del", k);
    }
    gone as i64
}

pub fn exists_key(ctx: &mut ShardCtx, k: &[u8]) -> i64 {
    ctx.db().exists(k) as i64
}

/// `get` updates the access clock; TOUCH does so even for a CLIENT NO-TOUCH client (Redis 7.2
/// exempts touchCommand from NO-TOUCH).
pub fn touch_key(ctx: &mut ShardCtx, k: &[u8]) -> i64 {
    ctx.clock.touch = true;
    ctx.db().get(k).is_some() as i64
}

fn del(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let n = count_keys(&tx, args, true, del_key).await;
        super::with_writer(tx.resp3(), |w| w.int(n))
    })
}

/// UNLINK is DEL: both leave a big value's freeing to the background (the engine's graveyard:
/// `Db::delete`), which Redis does only for UNLINK (or with `lazyfree-lazy-user-del yes`).
fn unlink(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    del(tx, args)
}

fn exists(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let n = count_keys(&tx, args, false, exists_key).await;
        super::with_writer(tx.resp3(), |w| w.int(n))
    })
}

fn touch(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let n = count_keys(&tx, args, false, touch_key).await;
        super::with_writer(tx.resp3(), |w| w.int(n))
    })
}

// The single-shard forms (every key on one shard: inline or batched like GET, no transaction).

fn del_one_shard(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    ctx.prefetch(&args[1..]);
    let mut n = 0;
    for k in &args[1..] {
        if ctx.db().delete(k) {
            notify(ctx, GENERIC, "del", k);
            n += 1;
        }
    }
    w.int(n);
}

fn exists_one_shard(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    ctx.prefetch(&args[1..]);
    let mut db = ctx.db();
    w.int(args[1..].iter().filter(|k| db.exists(k)).count() as i64);
}

fn touch_one_shard(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    ctx.prefetch(&args[1..]);
    ctx.clock.touch = true;
    let mut db = ctx.db();
    w.int(args[1..].iter().filter(|k| db.get(k).is_some()).count() as i64);
}

fn type_cmd(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match ctx.db().peek(args[1]) {
        None => w.simple(b"none"),
        Some(e) => w.simple(e.value_type().name().as_bytes()),
    }
}

// ---------------------------------------------------------------------------------------------
// RENAME, RENAMENX, COPY, MOVE

enum Renamed {
    Yes,
    /// RENAMENX with an existing destination, or RENAMENX of a key onto itself.
    No,
    NoSuchKey,
}

/// A step of a transaction's part, boxed so that parts with different work share a plan.
type Step<R> = Box<dyn FnOnce(&mut ShardCtx) -> R + Send>;

fn written(keys: &[&Bytes]) -> Intents {
    let mut i = Intents::default();
    for k in keys {
        i.add(k, true);
    }
    i
}

async fn rename_generic(tx: &Tx, src: Bytes, dst: Bytes, nx: bool) -> Renamed {
    let (ss, ds) = (tx.shard_of(&src), tx.shard_of(&dst));
    if ss == ds {
        // One shard: one part, one message.
        let intents = written(&[&src, &dst]);
        return tx
            .run_parts(vec![(ss, intents, move |ctx: &mut ShardCtx| {
                let mut db = ctx.db();
                if !db.exists(&src) {
                    return Renamed::NoSuchKey;
                }
                if src == dst {
                    // Nothing changes, so nobody WATCHing is told.
                    return if nx { Renamed::No } else { Renamed::Yes };
                }
                if nx && db.exists(&dst) {
                    return Renamed::No;
                }
                match db.remove(&src) {
                    None => Renamed::NoSuchKey,
                    Some(e) => {
                        // Like Redis: the old destination is deleted, then the key created.
                        db.delete(&dst);
                        db.set(e.with_key(&dst));
                        notify(ctx, GENERIC, "rename_from", &src);
                        notify(ctx, GENERIC, "rename_to", &dst);
                        Renamed::Yes
                    }
                }
            })])
            .await
            .pop()
            .unwrap_or(Renamed::NoSuchKey);
    }
    let from = src.clone();
    let (s2, d2) = (src.clone(), dst.clone());
    let moved = if nx {
        // Both checks with the reservation; it keeps their answers true until the move.
        let checks: Vec<(usize, Intents, Step<bool>)> = vec![
            (
                ss,
                written(&[&src]),
                Box::new(move |ctx| ctx.db().exists(&s2)),
            ),
            (
                ds,
                written(&[&dst]),
                Box::new(move |ctx| ctx.db().exists(&d2)),
            ),
        ];
        let found = tx.reserve_then(checks).await;
        if !found[0] {
            return Renamed::NoSuchKey;
        }
        if found[1] {
            return Renamed::No;
        }
        let d2 = dst.clone();
        tx.run(ss, move |ctx| {
            ctx.db().remove(&src).map(|e| e.with_key(&d2))
        })
        .await
    } else {
        // The entry (value, TTL, access clock) leaves its shard with the reservation.
        let parts: Vec<(usize, Intents, Step<Option<Entry>>)> = vec![
            (
                ss,
                written(&[&src]),
                Box::new(move |ctx| ctx.db().remove(&src).map(|e| e.with_key(&d2))),
            ),
            (ds, written(&[&dst]), Box::new(|_| None)),
        ];
        tx.reserve_then(parts).await.swap_remove(0)
    };
    let s2 = from;
    match moved {
        None => Renamed::NoSuchKey,
        Some(e) => {
            tx.run(ds, move |ctx| {
                let mut db = ctx.db();
                db.delete(&dst);
                db.set(e);
                // Both events from the destination's thread, in Redis's order (the source
                // is locked, so nothing else happens to it in between).
                notify(ctx, GENERIC, "rename_from", &s2);
                notify(ctx, GENERIC, "rename_to", &dst);
            })
            .await;
            Renamed::Yes
        }
    }
}

fn rename(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let r = rename_generic(&tx, args[1].clone(), args[2].clone(), false).await;
        super::with_writer(tx.resp3(), |w| match r {
            Renamed::NoSuchKey => w.error(super::ERR_NO_SUCH_KEY),
            _ => w.ok(),
        })
    })
}

fn renamenx(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let r = rename_generic(&tx, args[1].clone(), args[2].clone(), true).await;
        super::with_writer(tx.resp3(), |w| match r {
            Renamed::NoSuchKey => w.error(super::ERR_NO_SUCH_KEY),
            Renamed::Yes => w.int(1),
            Renamed::No => w.int(0),
        })
    })
}

/// A copy of a live entry under `key`, as a fresh object (Redis gives the copy a new LRU).
fn copy_of(ctx: &mut ShardCtx, src: &[u8], key: &[u8]) -> Option<Entry> {
    let lru = ctx.clock.lru;
    let mut e = ctx.db().get(src)?.clone_as(key);
    e.set_clock(lru);
    Some(e)
}

/// Stores a COPY's entry in database `db` unless the key exists there and `replace` is off.
fn store_copy(ctx: &mut ShardCtx, db: usize, e: Entry, replace: bool) -> bool {
    let mut view = ctx.db_at(db);
    if !replace && view.exists(e.key()) {
        return false;
    }
    // Like Redis: a replaced destination is deleted, then the key created.
    let key = e.key().to_vec();
    view.delete(&key);
    view.set(e);
    notify::notify_db(ctx, db, GENERIC, "copy_to", &key);
    true
}

fn copy(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let src_db = tx.db();
        let mut dst_db = src_db;
        let mut replace = false;
        let mut j = 3;
        while j < args.len() {
            if super::eq(&args[j], "replace") {
                replace = true;
            } else if super::eq(&args[j], "db") && j + 1 < args.len() {
                match parse_db(&args[j + 1], tx.shared().databases) {
                    Ok(d) => dst_db = d,
                    Err(e) => return super::with_writer(resp3, |w| w.error(e)),
                }
                j += 1;
            } else {
                return super::with_writer(resp3, |w| w.error(super::ERR_SYNTAX));
            }
            j += 1;
        }
        let (src, dst) = (args[1].clone(), args[2].clone());
        if src_db == dst_db && src == dst {
            return super::with_writer(resp3, |w| w.error(ERR_SAME_OBJECT));
        }
        let (ss, ds) = (tx.shard_of(&src), tx.shard_of(&dst));
        let done = if ss == ds {
            // One shard: one part, one message.
            let intents = written(&[&src, &dst]);
            tx.run_parts(vec![(
                ss,
                intents,
                move |ctx: &mut ShardCtx| match copy_of(ctx, &src, &dst) {
                    None => false,
                    Some(e) => store_copy(ctx, dst_db, e, replace),
                },
            )])
            .await
            .pop()
            .unwrap_or(false)
        } else {
            // The copy leaves the source's shard with the reservation.
            let mut read = Intents::default();
            read.add(&src, false);
            let parts: Vec<(usize, Intents, Step<Option<Entry>>)> = vec![
                (ss, read, Box::new(move |ctx| copy_of(ctx, &src, &dst))),
                (ds, written(&[&args[2]]), Box::new(|_| None)),
            ];
            match tx.reserve_then(parts).await.swap_remove(0) {
                None => false,
                Some(e) => {
                    tx.run(ds, move |ctx| store_copy(ctx, dst_db, e, replace))
                        .await
                }
            }
        };
        super::with_writer(resp3, |w| w.int(done as i64))
    })
}

/// MOVE key db: a `Key` handler, since a key's shard is the same in every database.
fn move_cmd(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let dst = match parse_db(args[2], ctx.shared.databases) {
        Ok(d) => d,
        Err(e) => return w.error(e),
    };
    if dst == ctx.db {
        return w.error(ERR_SAME_OBJECT);
    }
    let key = &args[1];
    if !ctx.db().exists(key) || ctx.db_at(dst).exists(key) {
        return w.int(0);
    }
    match ctx.db().remove(key) {
        None => w.int(0),
        Some(e) => {
            ctx.db_at(dst).set(e);
            notify(ctx, GENERIC, "move_from", key);
            notify::notify_db(ctx, dst, GENERIC, "move_to", key);
            w.int(1)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// KEYS, SCAN, RANDOMKEY

fn keys(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let pattern = args[1].clone();
        let all = &pattern[..] == b"*";
        let per_shard: Vec<Vec<Bytes>> = tx
            .run_all(move |ctx| {
                let mut out = Vec::new();
                ctx.db().for_each(|e| {
                    if all || glob_match(&pattern, e.key(), false) {
                        out.push(Bytes::copy_from_slice(e.key()));
                    }
                });
                out
            })
            .await;
        let n: usize = per_shard.iter().map(Vec::len).sum();
        super::with_writer(tx.resp3(), |w| {
            w.array(n);
            for k in per_shard.iter().flatten() {
                w.bulk(k);
            }
        })
    })
}

/// SCAN cursor: the high bits name a shard, the low 32 bits a position in that shard's table
/// (see `darner_engine::DbView::scan`). One call visits one shard; a finished shard moves the
/// cursor to the next shard's position 0, and the last one to 0.
fn scan(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| super::with_writer(resp3, |w| w.error(e));
        let Some(cursor) = super::parse_cursor(&args[1]) else {
            return err(ERR_INVALID_CURSOR);
        };
        let mut count: i64 = 10;
        let mut pattern: Option<Bytes> = None;
        let mut type_name: Option<Bytes> = None;
        let mut i = 2;
        while i < args.len() {
            let more = i + 1 < args.len();
            if super::eq(&args[i], "count") && more {
                match super::parse_int(&args[i + 1]) {
                    None => return err(super::ERR_NOT_INT),
                    Some(c) if c < 1 => return err(super::ERR_SYNTAX),
                    Some(c) => count = c,
                }
            } else if super::eq(&args[i], "match") && more {
                // "*" matches everything: the same as no pattern.
                pattern = (&args[i + 1][..] != b"*").then(|| args[i + 1].clone());
            } else if super::eq(&args[i], "type") && more {
                type_name = Some(args[i + 1].clone());
            } else {
                return err(super::ERR_SYNTAX);
            }
            i += 2;
        }
        let shard = cursor >> 32;
        let pos = cursor & 0xffff_ffff;
        let nshards = tx.nshards() as u64;
        if shard >= nshards {
            // Not a cursor SCAN ever returned: nothing to visit.
            return super::with_writer(resp3, |w| {
                w.array(2);
                w.bulk(b"0");
                w.array(0);
            });
        }
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        // Visit the shard the cursor names; when it is finished with COUNT not used up, go on
        // to the next shards in the same call, so that an iteration ends with cursor 0 as soon
        // as the keyspace is exhausted (an empty keyspace answers 0 at once, as Redis does).
        let (mut shard, mut pos) = (shard, pos);
        let mut found: Vec<Bytes> = Vec::new();
        let mut budget = count;
        let new_cursor = loop {
            let (type_name, pattern) = (type_name.clone(), pattern.clone());
            let (next, keys, visited): (u64, Vec<Bytes>, usize) = tx
                .run(shard as usize, move |ctx| {
                    let mut out = Vec::new();
                    let mut expired = Vec::new();
                    let mut visited = 0;
                    let next = ctx.db().scan_with_expired(pos, budget, |e, gone| {
                        visited += 1;
                        if let Some(p) = &pattern {
                            if !glob_match(p, e.key(), false) {
                                return;
                            }
                        }
                        // Redis deletes the expired keys it visits that match the pattern
                        // (with or without TYPE), as a read of them would.
                        if gone {
                            expired.push(Bytes::copy_from_slice(e.key()));
                            return;
                        }
                        if let Some(t) = &type_name {
                            // An unknown type name matches nothing (Redis 7.2 does not refuse it).
                            if !t.eq_ignore_ascii_case(e.value_type().name().as_bytes()) {
                                return;
                            }
                        }
                        out.push(Bytes::copy_from_slice(e.key()));
                    });
                    let mut db = ctx.db();
                    for k in &expired {
                        db.exists(k);
                    }
                    (next, out, visited)
                })
                .await;
            found.extend(keys);
            budget = budget.saturating_sub(visited.max(1));
            if next < SCAN_DONE {
                break (shard << 32) | next;
            }
            if shard + 1 >= nshards {
                break 0;
            }
            shard += 1;
            pos = 0;
            if budget == 0 {
                break shard << 32;
            }
        };
        super::with_writer(resp3, |w| {
            w.array(2);
            w.bulk(new_cursor.to_string().as_bytes());
            w.array(found.len());
            for k in &found {
                w.bulk(k);
            }
        })
    })
}

fn randomkey(tx: Tx, _args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let picks: Vec<(usize, Option<Vec<u8>>, u64)> = tx
            .run_all(|ctx| {
                let r = ctx.shard.random();
                let choice = ctx.shard.random();
                let mut db = ctx.db();
                let len = db.len();
                (len, db.random_key(r), choice)
            })
            .await;
        // A random shard among those that have a key, weighted by their key counts so that
        // every key is about equally likely whatever the shards' sizes.
        let total: u64 = picks
            .iter()
            .filter(|p| p.1.is_some())
            .map(|p| p.0.max(1) as u64)
            .sum();
        let mut chosen: Option<&[u8]> = None;
        if total > 0 {
            let mut r = picks[0].2 % total;
            for p in &picks {
                if let Some(k) = &p.1 {
                    let weight = p.0.max(1) as u64;
                    if r < weight {
                        chosen = Some(k);
                        break;
                    }
                    r -= weight;
                }
            }
        }
        super::with_writer(tx.resp3(), |w| match chosen {
            None => w.null(),
            Some(k) => w.bulk(k),
        })
    })
}

// ---------------------------------------------------------------------------------------------
// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST

const EXPIRE_NX: u8 = 1;
const EXPIRE_XX: u8 = 2;
const EXPIRE_GT: u8 = 4;
const EXPIRE_LT: u8 = 8;

/// Redis's `parseExtendedExpireArgumentsOrReply`.
fn parse_expire_flags(args: &[&[u8]]) -> Result<u8, Vec<u8>> {
    let mut flags = 0;
    for a in args {
        flags |= if super::eq(a, "nx") {
            EXPIRE_NX
        } else if super::eq(a, "xx") {
            EXPIRE_XX
        } else if super::eq(a, "gt") {
            EXPIRE_GT
        } else if super::eq(a, "lt") {
            EXPIRE_LT
        } else {
            let mut e = b"ERR Unsupported option ".to_vec();
            e.extend_from_slice(a);
            return Err(e);
        };
    }
    if flags & EXPIRE_NX != 0 && flags & (EXPIRE_XX | EXPIRE_GT | EXPIRE_LT) != 0 {
        return Err(
            b"ERR NX and XX, GT or LT options at the same time are not compatible".to_vec(),
        );
    }
    if flags & EXPIRE_GT != 0 && flags & EXPIRE_LT != 0 {
        return Err(b"ERR GT and LT options at the same time are not compatible".to_vec());
    }
    Ok(flags)
}

/// Redis's `expireGenericCommand`. `relative`: the time is counted from now; `seconds`: the
/// unit is seconds; `name`: the command, for the overflow error.
fn expire_generic(
    ctx: &mut ShardCtx,
    args: &[&[u8]],
    w: &mut ReplyWriter,
    relative: bool,
    seconds: bool,
    name: &str,
) {
    let flags = match parse_expire_flags(&args[3..]) {
        Ok(f) => f,
        Err(e) => return w.error(&e),
    };
    let Some(mut when) = super::parse_int(args[2]) else {
        return w.error(super::ERR_NOT_INT);
    };
    let bad_time = || format!("ERR invalid expire time in '{name}' command").into_bytes();
    if seconds {
        match when.checked_mul(1000) {
            Some(ms) => when = ms,
            None => return w.error(&bad_time()),
        }
    }
    if relative {
        match when.checked_add(ctx.now_ms()) {
            Some(t) => when = t,
            None => return w.error(&bad_time()),
        }
    }
    let key = &args[1];
    let Some(current) = ctx.db().expire_of(key) else {
        ctx.propagate_nothing();
        return w.int(0);
    };
    // A key without a TTL counts as having an infinite one (Redis 7).
    let refused = (flags & EXPIRE_NX != 0 && current.is_some())
        || (flags & EXPIRE_XX != 0 && current.is_none())
        || (flags & EXPIRE_GT != 0 && current.is_none_or(|c| when <= c))
        || (flags & EXPIRE_LT != 0 && current.is_some_and(|c| when >= c));
    if refused {
        ctx.propagate_nothing();
        return w.int(0);
    }
    // A time already past deletes the key (inside `set_expire`), but on a replica, where the
    // key waits for its primary's DEL.
    let gone = when <= ctx.now_ms() && !ctx.db().expiry_held();
    ctx.db().set_expire(key, Some(when));
    if ctx.propagating() {
        // Redis 7.2 writes a DEL for a key it deleted, else PEXPIREAT with the absolute time
        // (keeping NX/XX/GT/LT), which replays the same at any time.
        if gone {
            ctx.propagate_args(&[b"DEL", key]);
        } else {
            let mut v = super::argv(&[b"PEXPIREAT", key]);
            v.push(super::num_arg(when));
            v.extend(args[3..].iter().map(|a| Bytes::copy_from_slice(a)));
            ctx.propagate(v);
        }
    }
    let event = if gone { "del" } else { "expire" };
    notify(ctx, GENERIC, event, key);
    w.int(1);
}

fn expire(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    expire_generic(ctx, args, w, true, true, "expire");
}

fn pexpire(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    expire_generic(ctx, args, w, true, false, "pexpire");
}

fn expireat(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    expire_generic(ctx, args, w, false, true, "expireat");
}

fn pexpireat(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    expire_generic(ctx, args, w, false, false, "pexpireat");
}

/// Redis's `ttlGenericCommand`: -2 when absent, -1 without a TTL, else the remaining time (or
/// the absolute time) in ms or in seconds rounded to the nearest.
fn ttl_generic(ctx: &mut ShardCtx, key: &[u8], w: &mut ReplyWriter, ms: bool, absolute: bool) {
    let now = ctx.now_ms();
    match ctx.db().expire_of(key) {
        None => w.int(-2),
        Some(None) => w.int(-1),
        Some(Some(when)) => {
            let t = if absolute {
                when
            } else {
                when.saturating_sub(now)
            }
            .max(0);
            if ms {
                w.int(t)
            } else {
                // In i128: Redis's (t+500)/1000 gives 9223372036854776 for the largest time.
                w.int(((t as i128 + 500) / 1000) as i64)
            }
        }
    }
}

fn ttl(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    ttl_generic(ctx, args[1], w, false, false);
}

fn pttl(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    ttl_generic(ctx, args[1], w, true, false);
}

fn expiretime(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    ttl_generic(ctx, args[1], w, false, true);
}

fn pexpiretime(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    ttl_generic(ctx, args[1], w, true, true);
}

fn persist(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    if let Some(Some(_)) = db.expire_of(args[1]) {
        db.set_expire(args[1], None);
        notify(ctx, GENERIC, "persist", args[1]);
        w.int(1)
    } else {
        ctx.propagate_nothing();
        w.int(0)
    }
}

// ---------------------------------------------------------------------------------------------
// DUMP / RESTORE: a value in Redis's DUMP payload format (crates/rdb: the RDB object, the RDB
// version, a CRC-64), so payloads move between Redis and Darner both ways.

fn dump(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let now = ctx.clock.now_ms;
    let mut db = ctx.db();
    let Some(e) = db.get(args[1]) else {
        return w.null();
    };
    let value = darner_engine::persist::to_rdb(e.value(), now);
    w.bulk(&darner_rdb::dump_payload(&value, true));
}

const ERR_BUSYKEY: &[u8] = b"BUSYKEY Target key name already exists.";

/// RESTORE's options, checked in Redis's order (restoreCommand).
struct RestoreArgs {
    replace: bool,
    absttl: bool,
    /// IDLETIME seconds (LRU), or FREQ (LFU): Redis takes one or the other.
    idle: Option<i64>,
    freq: Option<u8>,
}

fn parse_restore(args: &[&[u8]]) -> Result<RestoreArgs, &'static [u8]> {
    let mut r = RestoreArgs {
        replace: false,
        absttl: false,
        idle: None,
        freq: None,
    };
    let mut j = 4;
    while j < args.len() {
        let more = j + 1 < args.len();
        let a = args[j];
        if super::eq(a, "replace") {
            r.replace = true;
        } else if super::eq(a, "absttl") {
            r.absttl = true;
        } else if super::eq(a, "idletime") && more && r.freq.is_none() {
            let v = super::parse_int(args[j + 1]).ok_or(super::ERR_NOT_INT)?;
            if v < 0 {
                return Err(b"ERR Invalid IDLETIME value, must be >= 0");
            }
            r.idle = Some(v);
            j += 1;
        } else if super::eq(a, "freq") && more && r.idle.is_none() {
            let v = super::parse_int(args[j + 1]).ok_or(super::ERR_NOT_INT)?;
            if !(0..=255).contains(&v) {
                return Err(b"ERR Invalid FREQ value, must be >= 0 and <= 255");
            }
            r.freq = Some(v as u8);
            j += 1;
        } else {
            return Err(super::ERR_SYNTAX);
        }
        j += 1;
    }
    Ok(r)
}

fn restore(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let opts = match parse_restore(args) {
        Ok(o) => o,
        Err(e) => return w.error(e),
    };
    let key = args[1];
    if !opts.replace && ctx.db().exists(key) {
        return w.error(ERR_BUSYKEY);
    }
    let Some(ttl) = super::parse_int(args[2]) else {
        return w.error(super::ERR_NOT_INT);
    };
    if ttl < 0 {
        return w.error(b"ERR Invalid TTL value, must be >= 0");
    }
    let value = match darner_rdb::decode_dump_payload(args[3]) {
        Ok((value, _version)) => value,
        Err(darner_rdb::DumpError::VersionOrChecksum) => {
            return w.error(darner_rdb::ERR_DUMP_VERSION_OR_CHECKSUM.as_bytes())
        }
        Err(darner_rdb::DumpError::BadData(_)) => {
            return w.error(darner_rdb::ERR_BAD_DATA_FORMAT.as_bytes())
        }
    };
    let clock = ctx.clock;
    let limits = ctx.limits();
    let loaded = match darner_engine::persist::from_rdb(value, &limits, clock.now_ms) {
        Ok(l) => l,
        Err(_) => return w.error(darner_rdb::ERR_BAD_DATA_FORMAT.as_bytes()),
    };
    let deleted = opts.replace && ctx.db().delete(key);
    let expire = match (ttl, opts.absttl) {
        (0, _) => None,
        (t, true) => Some(t),
        (t, false) => Some(clock.now_ms.saturating_add(t)),
    };
    if expire.is_some_and(|at| at <= clock.now_ms) {
        // Already expired: Redis stores nothing, and a replaced key is gone (a `del`).
        // Redis 7.2 writes a DEL for the replaced key, else nothing.
        if deleted {
            ctx.propagate_args(&[b"DEL", key]);
            notify(ctx, GENERIC, "del", key);
        } else {
            ctx.propagate_nothing();
        }
        return w.ok();
    }
    // The access clock: IDLETIME under LRU, FREQ under LFU (Redis's objectSetLRUOrLFU
    // ignores the other one).
    let access = match (clock.lfu, opts.freq, opts.idle) {
        (Some(l), Some(f), _) => ((l.minute as u16) << 8) | f as u16,
        (None, _, Some(idle)) => clock.lru.wrapping_sub(idle.min(u16::MAX as i64) as u16),
        _ => clock.lru,
    };
    if let (Some(at), false, true) = (expire, opts.absttl, ctx.propagating()) {
        // A relative TTL is written absolute, ABSTTL added at the end (Redis 7.2).
        let mut v: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        v[2] = super::num_arg(at);
        v.push(Bytes::from_static(b"ABSTTL"));
        ctx.propagate(v);
    }
    let entry = loaded.into_entry(key, expire, access);
    ctx.db().set(entry);
    notify(ctx, GENERIC, "restore", key);
    w.ok();
}

// ---------------------------------------------------------------------------------------------
// OBJECT

fn object_encoding(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match ctx.db().peek(args[2]) {
        None => w.null(),
        Some(e) => w.bulk(e.encoding().as_bytes()),
    }
}

fn object_freq(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let clock = ctx.clock;
    // `peek`: looking counts no access. The counter decayed to now, not stored (Redis).
    match ctx.db().peek(args[2]) {
        None => w.null(),
        Some(e) => match clock.lfu {
            Some(l) => w.int(l.counter(e.clock()) as i64),
            None => w.error(ERR_NO_LFU),
        },
    }
}

fn object_idletime(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let clock = ctx.clock;
    // `peek`: looking must not reset the clock it reports.
    match ctx.db().peek(args[2]) {
        None => w.null(),
        Some(_) if clock.lfu.is_some() => w.error(ERR_LFU_IDLE),
        Some(e) => w.int(clock.idle_secs(e.clock()) as i64),
    }
}

fn object_refcount(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match ctx.db().peek(args[2]) {
        None => w.null(),
        Some(e) => {
            // Redis stores the integers 0..9999 as shared objects with a pinned refcount.
            let shared = e.encoding() == "int"
                && super::parse_int(e.str_value())
                    .is_some_and(|v| (0..SHARED_INTEGERS).contains(&v));
            w.int(if shared { SHARED_REFCOUNT } else { 1 })
        }
    }
}

fn object_help(_: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    const LINES: &[&str] = &[
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the internal representation of the value stored at <key>.",
        "FREQ <key>",
        "    Return the logarithmic access frequency counter of <key> (LFU policies only).",
        "IDLETIME <key>",
        "    Return the number of seconds since <key> was last read or written.",
        "REFCOUNT <key>",
        "    Return the reference count of the value stored at <key>.",
        "HELP",
        "    Print this help.",
    ];
    w.array(LINES.len());
    for l in LINES {
        w.simple(l.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_parsing_follows_strtoul() {
        assert_eq!(crate::cmd::parse_cursor(b""), Some(0));
        assert_eq!(crate::cmd::parse_cursor(b"0"), Some(0));
        assert_eq!(crate::cmd::parse_cursor(b"01"), Some(1));
        assert_eq!(crate::cmd::parse_cursor(b"+7"), Some(7));
        assert_eq!(crate::cmd::parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(
            crate::cmd::parse_cursor(b"18446744073709551615"),
            Some(u64::MAX)
        );
        assert_eq!(crate::cmd::parse_cursor(b"18446744073709551616"), None);
        assert_eq!(crate::cmd::parse_cursor(b"+"), None);
        assert_eq!(crate::cmd::parse_cursor(b"-"), None);
        assert_eq!(crate::cmd::parse_cursor(b" 1"), None);
        assert_eq!(crate::cmd::parse_cursor(b"1 "), None);
        assert_eq!(crate::cmd::parse_cursor(b"1x"), None);
    }

    #[test]
    fn expire_flag_rules() {
        let a =
            |v: &[&'static str]| -> Vec<&'static [u8]> { v.iter().map(|s| s.as_bytes()).collect() };
        assert_eq!(
            parse_expire_flags(&a(&["xx", "GT"])),
            Ok(EXPIRE_XX | EXPIRE_GT)
        );
        assert!(parse_expire_flags(&a(&["nx", "lt"])).is_err());
        assert!(parse_expire_flags(&a(&["gt", "lt"])).is_err());
        assert_eq!(
            parse_expire_flags(&a(&["foo"])),
            Err(b"ERR Unsupported option foo".to_vec())
        );
    }

    #[test]
    fn encodings() {
        let s = |v: &[u8], raw| Entry::new_str(b"k", v, None, raw, 0);
        assert_eq!(s(b"100", false).string_encoding(), "int");
        assert_eq!(s(b"-9223372036854775808", false).string_encoding(), "int");
        assert_eq!(s(b"9223372036854775808", false).string_encoding(), "embstr");
        assert_eq!(s(b"0100", false).string_encoding(), "embstr");
        assert_eq!(s(&[b'a'; 44], false).string_encoding(), "embstr");
        assert_eq!(s(&[b'a'; 45], false).string_encoding(), "raw");
        assert_eq!(s(b"1", true).string_encoding(), "raw");
    }
}
