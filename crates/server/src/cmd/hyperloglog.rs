//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, and the testing ones PFDEBUG and PFSELFTEST.
//!
//! A HyperLogLog is a string value in Redis's byte format (darner_engine::types::hll), so these
//! commands read and edit string entries. PFADD touches one key and runs on its shard. PFCOUNT
//! and PFMERGE may name keys on several shards: they are transaction tasks that collect the
//! registers of every key (one hop per shard, each merging its own keys into one register
//! array), combine them, and for PFMERGE write the destination in a last hop. PFCOUNT of a
//! single key also refreshes the key's cached cardinality, as Redis does, which counts as a
//! write for WATCH.

use super::generic::by_shard;
use super::{eq, ConnCtx, Locks, Reg, TxFuture, ERR_WRONGTYPE};
use crate::exec::Tx;
use crate::notify::{notify, STRING};
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_engine::types::hll::{self, REGISTERS};
use darner_engine::{Entry, ValueType};
use darner_resp::ReplyWriter;
use std::sync::atomic::Ordering;

pub fn register(r: &mut Reg) {
    r.key("pfadd", pfadd);
    r.tx("pfcount", Locks::Keys, pfcount);
    r.tx("pfmerge", Locks::Keys, pfmerge);
    r.key("pfdebug", pfdebug);
    r.conn("pfselftest", pfselftest);
}

fn max_sparse(ctx: &ShardCtx) -> usize {
    ctx.shared
        .config
        .hot
        .hll_sparse_max_bytes
        .load(Ordering::Relaxed)
        .max(0) as usize
}

/// Redis's isHLLObjectOrReply: the error for a value that is not a HyperLogLog.
fn check(e: &Entry) -> Result<(), &'static [u8]> {
    if e.value_type() != ValueType::String {
        return Err(ERR_WRONGTYPE);
    }
    if !hll::is_valid(e.str_value()) {
        return Err(hll::ERR_NOT_HLL);
    }
    Ok(())
}

fn pfadd(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let max = max_sparse(ctx);
    let lru = ctx.clock.lru;
    let key = args[1];
    let mut db = ctx.db();
    let Some(e) = db.get_mut_quiet(key) else {
        // A new HyperLogLog counts as an update even with no element.
        let mut v = hll::new_sparse();
        for el in &args[2..] {
            if hll::add(&mut v, el, max).is_err() {
                return w.error(hll::ERR_CORRUPT);
            }
        }
        hll::invalidate_cache(&mut v);
        db.set(Entry::new_str(key, &v, None, true, lru));
        notify(ctx, STRING, "pfadd", key);
        return w.int(1);
    };
    if let Err(err) = check(e) {
        return w.error(err);
    }
    let v = e.str_mut();
    let mut updated = false;
    for el in &args[2..] {
        match hll::add(v, el, max) {
            Ok(changed) => updated |= changed,
            Err(_) => return w.error(hll::ERR_CORRUPT),
        }
    }
    if updated {
        hll::invalidate_cache(v);
        db.signal(key);
        notify(ctx, STRING, "pfadd", key);
    }
    w.int(updated as i64)
}

/// What one shard contributes: its keys' registers merged, whether any was dense, and the
/// first failing key (by argument position) with its error.
struct Collected {
    registers: Box<[u8; REGISTERS]>,
    any_dense: bool,
    error: Option<(usize, &'static [u8])>,
}

/// Merges the registers of `keys` (argument positions `idx`) on this shard.
fn collect(ctx: &mut ShardCtx, keys: &[(usize, Bytes)]) -> Collected {
    let mut out = Collected {
        registers: Box::new([0u8; REGISTERS]),
        any_dense: false,
        error: None,
    };
    let mut db = ctx.db();
    for (i, k) in keys {
        let Some(e) = db.get(k) else {
            continue; // a missing key is an empty HyperLogLog
        };
        let failed = match check(e) {
            Err(err) => Some(err),
            Ok(()) => {
                let v = e.str_value();
                out.any_dense |= v[4] == 0;
                hll::merge_into(&mut out.registers, v)
                    .err()
                    .map(|_| hll::ERR_CORRUPT)
            }
        };
        if let Some(err) = failed {
            out.error = Some((*i, err));
            break; // Redis stops at the first bad key
        }
    }
    out
}

/// Collects the registers of `keys` over all their shards, as if read in argument order.
async fn collect_all(tx: &Tx, keys: &[Bytes]) -> Result<(Box<[u8; REGISTERS]>, bool), Vec<u8>> {
    let hops: Vec<_> = by_shard(tx, keys)
        .into_iter()
        .map(|(s, idx)| {
            let ks: Vec<(usize, Bytes)> = idx.iter().map(|&i| (i, keys[i].clone())).collect();
            tx.run(s, move |ctx| collect(ctx, &ks))
        })
        .collect();
    let mut registers = Box::new([0u8; REGISTERS]);
    let mut any_dense = false;
    let mut first_error: Option<(usize, &'static [u8])> = None;
    for hop in hops {
        let c = hop.await;
        for (m, r) in registers.iter_mut().zip(c.registers.iter()) {
            *m = (*m).max(*r);
        }
        any_dense |= c.any_dense;
        if let Some((i, e)) = c.error {
            if first_error.is_none_or(|(j, _)| i < j) {
                first_error = Some((i, e));
            }
        }
    }
    match first_error {
        Some((_, e)) => Err(e.to_vec()),
        None => Ok((registers, any_dense)),
    }
}

fn error_reply(resp3: bool, e: &[u8]) -> Vec<u8> {
    super::with_writer(resp3, |w| w.error(e))
}

fn pfcount(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.client().resp3;
        if args.len() == 2 {
            let key = args[1].clone();
            let shard = tx.shard_of(&key);
            return tx
                .run(shard, move |ctx| {
                    super::with_writer(ctx.resp3, |w| count_one(ctx, &key, w))
                })
                .await;
        }
        match collect_all(&tx, &args[1..]).await {
            Err(e) => error_reply(resp3, &e),
            Ok((registers, _)) => {
                super::with_writer(resp3, |w| w.int(hll::count_registers(&registers) as i64))
            }
        }
    })
}

/// PFCOUNT of one key: the cached cardinality, or a fresh count stored in the cache.
fn count_one(ctx: &mut ShardCtx, key: &[u8], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    let Some(e) = db.get(key) else {
        return w.int(0);
    };
    if let Err(err) = check(e) {
        return w.error(err);
    }
    if let Some(card) = hll::cached(e.str_value()) {
        return w.int(card as i64);
    }
    let Some(e) = db.get_mut_quiet(key) else {
        return w.int(0);
    };
    let v = e.str_mut();
    match hll::count(v) {
        Err(_) => w.error(hll::ERR_CORRUPT),
        Ok(card) => {
            hll::set_cache(v, card);
            db.signal(key);
            w.int(card as i64)
        }
    }
}

fn pfmerge(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.client().resp3;
        // The destination's own registers take part in the merge (Redis reads it first).
        let (registers, any_dense) = match collect_all(&tx, &args[1..]).await {
            Ok(r) => r,
            Err(e) => return error_reply(resp3, &e),
        };
        let dest = args[1].clone();
        let shard = tx.shard_of(&dest);
        tx.run(shard, move |ctx| {
            let max = max_sparse(ctx);
            let lru = ctx.clock.lru;
            let resp3 = ctx.resp3;
            let mut db = ctx.db();
            let mut fresh = None;
            let v = match db.get_mut(&dest) {
                // Checked during the collection, and the shard is locked since.
                Some(e) => e.str_mut(),
                None => fresh.insert(hll::new_sparse()),
            };
            let stored = if any_dense { hll::to_dense(v) } else { Ok(()) }
                .and_then(|()| hll::store_registers(v, &registers, max));
            if stored.is_err() {
                return error_reply(resp3, hll::ERR_CORRUPT);
            }
            if let Some(v) = fresh {
                db.set(Entry::new_str(&dest, &v, None, true, lru));
            }
            notify(ctx, STRING, "pfadd", &dest);
            super::with_writer(resp3, |w| w.ok())
        })
        .await
    })
}

/// PFDEBUG <GETREG|DECODE|ENCODING|TODENSE> key. GETREG and TODENSE turn a sparse value
/// dense in place (as Redis does; not a write for WATCH, as in Redis). The key's checks come
/// before the subcommand's.
fn pfdebug(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let (sub, key) = (args[1], args[2]);
    let mut db = ctx.db();
    let Some(e) = db.get_mut_quiet(key) else {
        return w.error(b"ERR The specified key does not exist");
    };
    if let Err(err) = check(e) {
        return w.error(err);
    }
    if eq(sub, "getreg") {
        let v = e.str_mut();
        if hll::to_dense(v).is_err() {
            return w.error(hll::ERR_CORRUPT);
        }
        match hll::registers(v) {
            Ok(regs) => {
                w.array(REGISTERS);
                for &r in regs.iter() {
                    w.int(r as i64);
                }
            }
            Err(_) => w.error(hll::ERR_CORRUPT),
        }
    } else if eq(sub, "decode") {
        let v = e.str_value();
        if !hll::is_sparse(v) {
            return w.error(b"ERR HLL encoding is not sparse");
        }
        w.bulk(hll::decode_sparse(v).as_bytes());
    } else if eq(sub, "encoding") {
        w.simple(if hll::is_sparse(e.str_value()) {
            b"sparse"
        } else {
            b"dense"
        });
    } else if eq(sub, "todense") {
        if !hll::is_sparse(e.str_value()) {
            return w.int(0);
        }
        if hll::to_dense(e.str_mut()).is_err() {
            return w.error(hll::ERR_CORRUPT);
        }
        w.int(1);
    } else {
        let msg = format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(&sub[..sub.len().min(128)])
        );
        w.error(msg.as_bytes());
    }
}

/// PFSELFTEST: Redis's self-test of the register code and of the estimator's error (see
/// `hll::selftest`). Like Redis, it keeps the connection's thread busy while it runs (a
/// fraction of a second).
fn pfselftest(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    let max = ctx
        .shared
        .config
        .hot
        .hll_sparse_max_bytes
        .load(Ordering::Relaxed)
        .max(0) as usize;
    let seed = crate::shared::Shared::now_us() as u64 | 1;
    match hll::selftest(seed, max) {
        Ok(()) => w.ok(),
        Err(e) => w.error(e.as_bytes()),
    }
}
