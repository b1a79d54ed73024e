//! The sorted set commands over several keys: ZUNION/ZINTER/ZDIFF (and their STORE forms),
//! ZINTERCARD, ZRANGESTORE, ZMPOP. They are `Tx` handlers: every key's shard is locked for
//! the whole command, the sources are read with one hop per shard, and the result is computed
//! here and stored with one more hop, so the command is atomic even across shards.
//!
//! As in Redis, the inputs of ZUNION/ZINTER/ZDIFF (and their STORE forms) and ZINTERCARD may
//! also be plain sets: every member counts with score 1 (then weighted). ZRANGESTORE and ZMPOP
//! take sorted sets only.

use super::{
    kw, long_arg, parse_range, range_items, read, write_items, RangeType, ERR_SYNTAX, ERR_WRONGTYPE,
};
use crate::cmd::generic::by_shard;
use crate::cmd::{views, with_writer, Locks, Reg, TxFuture};
use crate::exec::Tx;
use crate::notify::{notify, GENERIC, ZSET};
use bytes::Bytes;
use darner_engine::{DbView, Entry, Value, ValueRef};
use std::collections::HashMap;
use std::sync::Arc;

pub fn register(r: &mut Reg) {
    r.tx("zunion", Locks::Keys, zunion);
    r.tx("zinter", Locks::Keys, zinter);
    r.tx("zdiff", Locks::Keys, zdiff);
    r.tx("zunionstore", Locks::Keys, zunionstore);
    r.tx("zinterstore", Locks::Keys, zinterstore);
    r.tx("zdiffstore", Locks::Keys, zdiffstore);
    r.tx("zintercard", Locks::Keys, zintercard);
    r.tx("zrangestore", Locks::Keys, zrangestore);
    r.tx("zmpop", Locks::Keys, zmpop);
}

/// Elements copied off a shard, in set order.
type Items = Vec<(Vec<u8>, f64)>;

/// One input of a set operation, copied off its shard: once per key, however often the
/// command names it (the namings share the copy).
#[derive(Clone)]
enum Src {
    Missing,
    WrongType,
    Items(Arc<Items>),
}

/// One input of ZUNION/ZINTER/ZDIFF/ZINTERCARD as Redis's `zuiNext` sees it: a sorted set's
/// elements, or a plain set's members each with score 1 (any encoding: intset members come
/// out as their decimal text, which is how a set member compares with a sorted set member).
/// Another type is WRONGTYPE.
fn read_input(db: &mut DbView<'_>, key: &[u8]) -> Src {
    match db.get(key) {
        None => Src::Missing,
        Some(e) => match e.value() {
            ValueRef::ZSet(z) => Src::Items(Arc::new(z.to_vec())),
            ValueRef::Set(s) => {
                let mut items = Vec::with_capacity(s.len());
                s.for_each(|m| items.push((m.to_vec(), 1.0)));
                Src::Items(Arc::new(items))
            }
            _ => Src::WrongType,
        },
    }
}

/// One lookup table per distinct input (a key named many times shares its copy, and its
/// table), and for each input the index of its table.
#[allow(clippy::type_complexity)]
fn lookup_tables(inputs: &[(Arc<Items>, f64)]) -> (Vec<HashMap<&[u8], f64>>, Vec<usize>) {
    let mut built: HashMap<*const Items, usize> = HashMap::new();
    let mut tables: Vec<HashMap<&[u8], f64>> = Vec::new();
    let which = inputs
        .iter()
        .map(|(v, _)| {
            *built.entry(Arc::as_ptr(v)).or_insert_with(|| {
                tables.push(v.iter().map(|(m, s)| (&m[..], *s)).collect());
                tables.len() - 1
            })
        })
        .collect();
    (tables, which)
}

/// Reads every key (one hop per shard, all hops in flight at once), in argument order.
async fn read_sources(tx: &Tx, keys: &[Bytes]) -> Vec<Src> {
    let hops: Vec<_> = by_shard(tx, keys)
        .into_iter()
        .map(|(s, idx)| {
            let ks: Vec<Bytes> = idx.iter().map(|&i| keys[i].clone()).collect();
            let hop = tx.run(s, move |ctx| {
                let mut db = ctx.db();
                let mut read: HashMap<&Bytes, Src> = HashMap::new();
                ks.iter()
                    .map(|k| {
                        read.entry(k)
                            .or_insert_with(|| read_input(&mut db, k))
                            .clone()
                    })
                    .collect::<Vec<Src>>()
            });
            (idx, hop)
        })
        .collect();
    let mut out: Vec<Src> = (0..keys.len()).map(|_| Src::Missing).collect();
    for (idx, hop) in hops {
        for (i, s) in idx.into_iter().zip(hop.await) {
            out[i] = s;
        }
    }
    out
}

/// Stores `items` (sorted) at `dst`, or deletes `dst` when empty. Returns the reply count.
/// `cmd`: the command's name, which is the notification of a stored result.
async fn store(tx: &Tx, dst: Bytes, items: Vec<(Vec<u8>, f64)>, cmd: &[u8]) -> i64 {
    let n = items.len() as i64;
    let event = String::from_utf8_lossy(cmd).to_ascii_lowercase();
    tx.run(tx.shard_of(&dst), move |ctx| {
        if items.is_empty() {
            if ctx.db().remove(&dst).is_some() {
                notify(ctx, GENERIC, "del", &dst);
            }
        } else {
            let z = super::store_set(&items, &ctx.limits());
            let lru = ctx.clock.lru;
            ctx.db()
                .set(Entry::new_value(&dst, Value::ZSet(z), None, lru));
            notify(ctx, ZSET, &event, &dst);
        }
    })
    .await;
    n
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggr {
    Sum,
    Min,
    Max,
}

fn aggregate(target: &mut f64, v: f64, a: Aggr) {
    match a {
        Aggr::Sum => {
            *target += v;
            // inf + -inf: Redis keeps the convention of 0.
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggr::Min => {
            if v < *target {
                *target = v
            }
        }
        Aggr::Max => {
            if v > *target {
                *target = v
            }
        }
    }
}

fn sort_items(items: &mut [(Vec<u8>, f64)]) {
    items.sort_unstable_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
}

/// Redis's `zunionInterDiffGenericCommand`. `numkeys_at` is 1, or 2 for the STORE forms
/// (`args[1]` is then the destination).
fn set_op(tx: Tx, args: Vec<Bytes>, op: Op, store_to: bool, card_only: bool) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| with_writer(resp3, |w| w.error(e));
        let a = views(&args);
        let numkeys_at = if store_to { 2 } else { 1 };
        let setnum = match long_arg(a[numkeys_at]) {
            Ok(n) => n,
            Err(e) => return err(e),
        };
        if setnum < 1 {
            let name = String::from_utf8_lossy(a[0]).to_lowercase();
            return err(
                format!("ERR at least 1 input key is needed for '{name}' command").as_bytes(),
            );
        }
        if setnum as u64 > (a.len() - numkeys_at - 1) as u64 {
            return err(ERR_SYNTAX);
        }
        let setnum = setnum as usize;
        let keys: Vec<Bytes> = args[numkeys_at + 1..numkeys_at + 1 + setnum].to_vec();
        let srcs = read_sources(&tx, &keys).await;
        if srcs.iter().any(|s| matches!(s, Src::WrongType)) {
            return err(ERR_WRONGTYPE);
        }
        // Options come after the type checks, as in Redis.
        let mut weights = vec![1.0f64; setnum];
        let mut aggr = Aggr::Sum;
        let mut withscores = false;
        let mut limit: u64 = 0;
        let mut j = numkeys_at + 1 + setnum;
        while j < a.len() {
            let remaining = a.len() - j;
            if op != Op::Diff && !card_only && remaining > setnum && kw(a[j], "weights") {
                j += 1;
                for wt in weights.iter_mut() {
                    match darner_resp::parse_f64_strict(a[j]) {
                        Some(v) => *wt = v,
                        None => return err(b"ERR weight value is not a float"),
                    }
                    j += 1;
                }
            } else if op != Op::Diff && !card_only && remaining >= 2 && kw(a[j], "aggregate") {
                aggr = if kw(a[j + 1], "sum") {
                    Aggr::Sum
                } else if kw(a[j + 1], "min") {
                    Aggr::Min
                } else if kw(a[j + 1], "max") {
                    Aggr::Max
                } else {
                    return err(ERR_SYNTAX);
                };
                j += 2;
            } else if !store_to && !card_only && kw(a[j], "withscores") {
                withscores = true;
                j += 1;
            } else if card_only && remaining >= 2 && kw(a[j], "limit") {
                match super::super::parse_int(a[j + 1]) {
                    Some(l) if l >= 0 => limit = l as u64,
                    _ => return err(b"ERR LIMIT can't be negative"),
                }
                j += 2;
            } else {
                return err(ERR_SYNTAX);
            }
        }
        // Inputs as (items, weight); missing keys are empty.
        let mut inputs: Vec<(Arc<Items>, f64)> = srcs
            .into_iter()
            .zip(weights)
            .map(|(s, w)| match s {
                Src::Items(v) => (v, w),
                _ => (Arc::default(), w),
            })
            .collect();
        let mut result: Vec<(Vec<u8>, f64)> = Vec::new();
        let mut count: u64 = 0;
        match op {
            Op::Inter => {
                inputs.sort_by_key(|i| i.0.len());
                if !inputs[0].0.is_empty() {
                    let (tables, which) = lookup_tables(&inputs[1..]);
                    let w0 = inputs[0].1;
                    for (m, s) in inputs[0].0.iter().rev() {
                        let mut score = w0 * s;
                        if score.is_nan() {
                            score = 0.0;
                        }
                        let mut all = true;
                        for (k, &t) in which.iter().enumerate() {
                            match tables[t].get(&m[..]) {
                                Some(v) => aggregate(&mut score, v * inputs[k + 1].1, aggr),
                                None => {
                                    all = false;
                                    break;
                                }
                            }
                        }
                        if !all {
                            continue;
                        }
                        if card_only {
                            count += 1;
                            if limit > 0 && count >= limit {
                                break;
                            }
                        } else {
                            result.push((m.clone(), score));
                        }
                    }
                }
            }
            Op::Union => {
                inputs.sort_by_key(|i| i.0.len());
                let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
                for (items, wt) in &inputs {
                    for (m, s) in items.iter().rev() {
                        let mut score = wt * s;
                        if score.is_nan() {
                            score = 0.0;
                        }
                        match acc.get_mut(m) {
                            Some(t) => aggregate(t, score, aggr),
                            None => {
                                acc.insert(m.clone(), score);
                            }
                        }
                    }
                }
                result = acc.into_iter().collect();
            }
            Op::Diff => {
                let (others, _) = lookup_tables(&inputs[1..]);
                result = inputs[0]
                    .0
                    .iter()
                    .filter(|(m, _)| !others.iter().any(|o| o.contains_key(&m[..])))
                    .cloned()
                    .collect();
            }
        }
        if card_only {
            return with_writer(resp3, |w| w.int(count as i64));
        }
        sort_items(&mut result);
        if store_to {
            let n = store(&tx, args[1].clone(), result, &args[0]).await;
            return with_writer(resp3, |w| w.int(n));
        }
        with_writer(resp3, |w| write_items(w, &result, withscores))
    })
}

fn zunion(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    set_op(tx, args, Op::Union, false, false)
}

fn zinter(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    set_op(tx, args, Op::Inter, false, false)
}

fn zdiff(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    set_op(tx, args, Op::Diff, false, false)
}

fn zunionstore(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    set_op(tx, args, Op::Union, true, false)
}

fn zinterstore(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    set_op(tx, args, Op::Inter, true, false)
}

fn zdiffstore(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    set_op(tx, args, Op::Diff, true, false)
}

fn zintercard(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    set_op(tx, args, Op::Inter, false, true)
}

/// ZRANGESTORE dst src min max [BYSCORE | BYLEX] [REV] [LIMIT offset count]
fn zrangestore(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let req = match parse_range(&views(&args), 2, true, RangeType::Auto, None) {
            Ok(r) => r,
            Err(e) => return with_writer(resp3, |w| w.error(&e)),
        };
        let src = args[2].clone();
        let got = tx
            .run(tx.shard_of(&src), move |ctx| {
                match read(&mut ctx.db(), &src) {
                    Err(()) => Err(()),
                    Ok(None) => Ok(Vec::new()),
                    Ok(Some(z)) => {
                        let mut items = range_items(z, &req);
                        // Stored in set order whatever the direction.
                        if req.rev {
                            items.reverse();
                        }
                        Ok(items)
                    }
                }
            })
            .await;
        match got {
            Err(()) => with_writer(resp3, |w| w.error(ERR_WRONGTYPE)),
            Ok(items) => {
                let n = store(&tx, args[1].clone(), items, &args[0]).await;
                with_writer(resp3, |w| w.int(n))
            }
        }
    })
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
fn zmpop(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| with_writer(resp3, |w| w.error(e));
        let a = views(&args);
        let numkeys = match super::super::parse_int(a[1]) {
            Some(n) if n >= 1 => n as u64,
            _ => return err(b"ERR numkeys should be greater than 0"),
        };
        let where_idx = numkeys.saturating_add(2);
        if where_idx >= a.len() as u64 {
            return err(ERR_SYNTAX);
        }
        let where_idx = where_idx as usize;
        let max = if kw(a[where_idx], "min") {
            false
        } else if kw(a[where_idx], "max") {
            true
        } else {
            return err(ERR_SYNTAX);
        };
        let mut count: Option<u64> = None;
        let mut j = where_idx + 1;
        while j < a.len() {
            if count.is_none() && kw(a[j], "count") && j + 1 < a.len() {
                match super::super::parse_int(a[j + 1]) {
                    Some(c) if c >= 1 => count = Some(c as u64),
                    _ => return err(b"ERR count should be greater than 0"),
                }
                j += 2;
            } else {
                return err(ERR_SYNTAX);
            }
        }
        let count = count.unwrap_or(1).min(usize::MAX as u64) as usize;
        for key in &args[2..where_idx] {
            let k = key.clone();
            let got = tx
                .run(tx.shard_of(&k), move |ctx| {
                    match super::write(&mut ctx.db(), &k) {
                        Err(()) => Err(()),
                        Ok(None) => Ok(None),
                        Ok(Some(_)) => Ok(Some(super::pop_notify(ctx, &k, max, count))),
                    }
                })
                .await;
            match got {
                Err(()) => return err(ERR_WRONGTYPE),
                Ok(None) => continue,
                Ok(Some(items)) => {
                    return with_writer(resp3, |w| {
                        w.array(2);
                        w.bulk(key);
                        w.array(items.len());
                        for (m, s) in &items {
                            w.array(2);
                            w.bulk(m);
                            w.double(*s);
                        }
                    })
                }
            }
        }
        with_writer(resp3, |w| w.null_array())
    })
}
