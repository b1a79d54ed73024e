//! The list commands (Redis 7.2's t_list.c): pushes, pops, ranges, index access, LINSERT, LREM,
//! LTRIM, LPOS, and the moves between keys (LMOVE, RPOPLPUSH, LMPOP), which may span shards and
//! so run as transactions over the shards of their keys.
//!
//! Order of checks, reply shapes and error texts follow Redis: arguments that Redis parses before
//! looking the key up are parsed first here too (LRANGE's indexes, LPOP's count), and those it
//! parses after (LINDEX's, LSET's index) after. Encoding conversions happen where Redis makes
//! them ([`List::grow_check`] before an addition, [`List::shrink_check`] after a removal that
//! leaves the list non-empty), so OBJECT ENCODING answers as Redis 7.2 does. The blocking
//! variants (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) are in `blocking.rs`, on the server's
//! blocking machinery (crates/server/src/blocking.rs); [`lmove_local`], [`mpop_key`] and
//! [`removed`] do their shard-side work.

use super::generic::by_shard;
use super::{Locks, Reg, TxFuture, ERR_NOT_INT, ERR_NO_SUCH_KEY, ERR_SYNTAX, ERR_WRONGTYPE};
use crate::exec::Tx;
use crate::notify::{self, notify, GENERIC, LIST};
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_engine::types::List;
use darner_engine::{DbView, Entry, Value, ValueRef, ValueType};
use darner_resp::ReplyWriter;

pub fn register(r: &mut Reg) {
    r.key("lpush", lpush);
    r.key("rpush", rpush);
    r.key("lpushx", lpushx);
    r.key("rpushx", rpushx);
    r.key("lpop", lpop);
    r.key("rpop", rpop);
    r.key("llen", llen);
    r.key("lrange", lrange);
    r.key("lindex", lindex);
    r.key("lset", lset);
    r.key("linsert", linsert);
    r.key("lrem", lrem);
    r.key("ltrim", ltrim);
    r.key("lpos", lpos);
    r.tx("lmove", Locks::Keys, lmove);
    r.tx("rpoplpush", Locks::Keys, rpoplpush);
    r.tx("lmpop", Locks::Keys, lmpop);
    r.tx("blpop", Locks::Keys, blocking::blpop);
    r.tx("brpop", Locks::Keys, blocking::brpop);
    r.tx("blmpop", Locks::Keys, blocking::blmpop);
    r.tx("blmove", Locks::Keys, blocking::blmove);
    r.tx("brpoplpush", Locks::Keys, blocking::brpoplpush);
}

mod blocking;

const ERR_OUT_OF_RANGE: &[u8] = b"ERR index out of range";
const ERR_MUST_BE_POSITIVE: &[u8] = b"ERR value is out of range, must be positive";

/// The list directives in force: `list-max-listpack-size`, and `list-compress-depth` (which
/// a list takes when it becomes a quicklist).
#[derive(Clone, Copy)]
pub(crate) struct Conf {
    pub fill: i64,
    pub depth: usize,
}

fn fill(ctx: &ShardCtx) -> Conf {
    let lim = ctx.limits();
    Conf {
        fill: lim.list_max_listpack_size,
        depth: lim.list_compress_depth,
    }
}

/// What Redis's C code sees of an argument it compares with `strcasecmp`: the bytes before
/// the first NUL.
fn kw(a: &[u8], word: &str) -> bool {
    let a = match a.iter().position(|&c| c == 0) {
        Some(i) => &a[..i],
        None => a,
    };
    a.eq_ignore_ascii_case(word.as_bytes())
}

/// LEFT / RIGHT (Redis's `getListPositionFromObjectOrReply`): true for LEFT.
fn side(a: &[u8]) -> Option<bool> {
    if kw(a, "left") {
        Some(true)
    } else if kw(a, "right") {
        Some(false)
    } else {
        None
    }
}

/// Redis's `getRangeLongFromObjectOrReply` with a custom message for both failures.
fn parse_range(a: &[u8], min: i64, msg: &'static [u8]) -> Result<i64, &'static [u8]> {
    match super::parse_int(a) {
        Some(v) if v >= min => Ok(v),
        _ => Err(msg),
    }
}

/// A key's list for writing: Ok(None) when absent, Err on another type. The access clock is
/// updated but nobody is told of a write yet (see [`DbView::signal`]).
fn list_mut<'d>(db: &'d mut DbView<'_>, key: &[u8]) -> Result<Option<&'d mut List>, ()> {
    match db.get_mut_quiet(key) {
        None => Ok(None),
        Some(e) => match e.value_mut() {
            Some(Value::List(l)) => Ok(Some(l)),
            _ => Err(()),
        },
    }
}

/// Whether a key holds something other than a list (no statistics, no clock).
fn wrong_type(db: &mut DbView<'_>, key: &[u8]) -> bool {
    db.peek(key)
        .is_some_and(|e| e.value_type() != ValueType::List)
}

/// After a removal: deletes an emptied list, or gives it Redis's chance to become a listpack.
/// Returns whether the list was deleted.
pub(crate) fn removed(db: &mut DbView<'_>, key: &[u8], conf: Conf) -> bool {
    let empty = match list_mut(db, key) {
        Ok(Some(l)) => {
            if !l.is_empty() {
                l.shrink_check(conf.fill);
            }
            l.is_empty()
        }
        _ => false,
    };
    if empty {
        db.remove(key);
    }
    db.signal(key);
    empty
}

/// The notifications of a removal from a list: `event`, then `del` if it was emptied.
pub(crate) fn notify_removed(ctx: &mut ShardCtx, key: &[u8], event: &str, deleted: bool) {
    notify(ctx, LIST, event, key);
    if deleted {
        notify(ctx, GENERIC, "del", key);
    }
}

/// Pushes `elems` onto the list at `key`, creating it; returns the new length, or Err for a
/// key of another type. With `xx` a missing key stays missing (length 0).
pub(crate) fn push_into(
    db: &mut DbView<'_>,
    key: &[u8],
    elems: &[&[u8]],
    added_bytes: usize,
    left: bool,
    xx: bool,
    conf: Conf,
) -> Result<usize, ()> {
    match list_mut(db, key)? {
        Some(l) => {
            l.grow_check(added_bytes, elems.len(), conf.fill, conf.depth);
            for e in elems {
                l.push(e, left, conf.fill);
            }
            let n = l.len();
            db.signal(key);
            Ok(n)
        }
        None if xx => Ok(0),
        None => {
            let mut l = List::new();
            l.grow_check(added_bytes, elems.len(), conf.fill, conf.depth);
            for e in elems {
                l.push(e, left, conf.fill);
            }
            let n = l.len();
            let lru = db.clock.lru;
            db.set(Entry::new_value(key, Value::List(Box::new(l)), None, lru));
            Ok(n)
        }
    }
}

// ---- LPUSH, RPUSH, LPUSHX, RPUSHX ------------------------------------------------------------

fn push_generic(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter, left: bool, xx: bool) {
    let fill = fill(ctx);
    let elems = &args[2..];
    let bytes = elems.iter().map(|e| e.len()).sum();
    match push_into(&mut ctx.db(), args[1], elems, bytes, left, xx, fill) {
        Ok(n) => {
            if n > 0 {
                notify(ctx, LIST, if left { "lpush" } else { "rpush" }, args[1]);
            }
            w.int(n as i64)
        }
        Err(()) => w.error(ERR_WRONGTYPE),
    }
}

fn lpush(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    push_generic(ctx, args, w, true, false)
}

fn rpush(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    push_generic(ctx, args, w, false, false)
}

fn lpushx(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    push_generic(ctx, args, w, true, true)
}

fn rpushx(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    push_generic(ctx, args, w, false, true)
}

// ---- LPOP, RPOP --------------------------------------------------------------------------------

fn pop_generic(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter, left: bool) {
    if args.len() > 3 {
        let name = if left { "lpop" } else { "rpop" };
        return w.error(format!("ERR wrong number of arguments for '{name}' command").as_bytes());
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match parse_range(a, 0, ERR_MUST_BE_POSITIVE) {
            Ok(c) => Some(c as usize),
            Err(e) => return w.error(e),
        },
    };
    let fill = fill(ctx);
    let key = args[1];
    let mut db = ctx.db();
    let l = match list_mut(&mut db, key) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(None) if count.is_some() => return w.null_array(),
        Ok(None) => return w.null(),
        Ok(Some(l)) => l,
    };
    match count {
        Some(0) => return w.array(0),
        None => match l.pop(left) {
            Some(v) => w.bulk(&v),
            None => return w.null(),
        },
        Some(n) => {
            let n = n.min(l.len());
            w.array(n);
            for _ in 0..n {
                match l.pop(left) {
                    Some(v) => w.bulk(&v),
                    None => break,
                }
            }
        }
    }
    let gone = removed(&mut db, key, fill);
    notify_removed(ctx, key, if left { "lpop" } else { "rpop" }, gone);
}

fn lpop(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    pop_generic(ctx, args, w, true)
}

fn rpop(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    pop_generic(ctx, args, w, false)
}

// ---- LLEN, LRANGE, LINDEX ----------------------------------------------------------------------

/// Runs `f` on the list at `key` for reading (counts a hit or a miss, as Redis's
/// `lookupKeyRead`); `missing` answers for an absent key.
fn with_list(
    ctx: &mut ShardCtx,
    key: &[u8],
    w: &mut ReplyWriter,
    missing: impl FnOnce(&mut ReplyWriter),
    f: impl FnOnce(&List, &mut ReplyWriter),
) {
    match ctx.db().get(key) {
        None => missing(w),
        Some(e) => match e.value() {
            ValueRef::List(l) => f(l, w),
            _ => w.error(ERR_WRONGTYPE),
        },
    }
}

fn llen(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    with_list(ctx, args[1], w, |w| w.int(0), |l, w| w.int(l.len() as i64))
}

/// Redis's range rule (LRANGE, LTRIM): `(start, end)` clamped, or None for an empty range.
pub(crate) fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 {
        start.saturating_add(len)
    } else {
        start
    };
    let mut end = if end < 0 {
        end.saturating_add(len)
    } else {
        end
    };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as usize, end as usize))
}

fn lrange(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let (Some(start), Some(end)) = (super::parse_int(args[2]), super::parse_int(args[3])) else {
        return w.error(ERR_NOT_INT);
    };
    with_list(
        ctx,
        args[1],
        w,
        |w| w.array(0),
        |l, w| match clamp_range(start, end, l.len()) {
            None => w.array(0),
            Some((s, e)) => {
                w.array(e - s + 1);
                for v in l.iter_from(s).take(e - s + 1) {
                    w.bulk(&v);
                }
            }
        },
    )
}

fn lindex(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let idx = args[2];
    with_list(
        ctx,
        args[1],
        w,
        |w| w.null(),
        |l, w| match super::parse_int(idx) {
            None => w.error(ERR_NOT_INT),
            Some(i) => match l.index(i).and_then(|i| l.get(i)) {
                Some(v) => w.bulk(&v),
                None => w.null(),
            },
        },
    )
}

// ---- LSET, LINSERT, LREM, LTRIM ----------------------------------------------------------------

fn lset(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let fill = fill(ctx);
    let (key, val) = (args[1], args[3]);
    let mut db = ctx.db();
    let l = match list_mut(&mut db, key) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(None) => return w.error(ERR_NO_SUCH_KEY),
        Ok(Some(l)) => l,
    };
    let Some(i) = super::parse_int(args[2]) else {
        return w.error(ERR_NOT_INT);
    };
    // Redis converts for the new value before it knows the index is valid.
    l.grow_check(val.len(), 1, fill.fill, fill.depth);
    let Some(i) = l.index(i) else {
        return w.error(ERR_OUT_OF_RANGE);
    };
    l.set(i, val, fill.fill);
    l.shrink_check(fill.fill);
    db.signal(key);
    notify(ctx, LIST, "lset", key);
    w.ok();
}

fn linsert(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let after = if kw(args[2], "after") {
        true
    } else if kw(args[2], "before") {
        false
    } else {
        return w.error(ERR_SYNTAX);
    };
    let fill = fill(ctx);
    let (key, pivot, val) = (args[1], args[3], args[4]);
    let mut db = ctx.db();
    let l = match list_mut(&mut db, key) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(None) => return w.int(0),
        Ok(Some(l)) => l,
    };
    // As Redis: the conversion is decided before the pivot is searched for.
    l.grow_check(val.len(), 1, fill.fill, fill.depth);
    let Some(at) = l.iter().position(|e| *e == *pivot) else {
        return w.int(-1);
    };
    l.insert(at, val, after, fill.fill);
    let n = l.len();
    db.signal(key);
    notify(ctx, LIST, "linsert", key);
    w.int(n as i64);
}

fn lrem(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let Some(count) = super::parse_int(args[2]) else {
        return w.error(ERR_NOT_INT);
    };
    let fill = fill(ctx);
    let key = args[1];
    let mut db = ctx.db();
    let l = match list_mut(&mut db, key) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(None) => return w.int(0),
        Ok(Some(l)) => l,
    };
    // A count beyond the list's length is "all" in effect.
    let max = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    let n = l.remove_eq(args[3], max, count < 0);
    if n > 0 {
        let gone = removed(&mut db, key, fill);
        notify_removed(ctx, key, "lrem", gone);
    }
    w.int(n as i64);
}

fn ltrim(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let (Some(start), Some(end)) = (super::parse_int(args[2]), super::parse_int(args[3])) else {
        return w.error(ERR_NOT_INT);
    };
    let fill = fill(ctx);
    let key = args[1];
    let mut db = ctx.db();
    let l = match list_mut(&mut db, key) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(None) => return w.ok(),
        Ok(Some(l)) => l,
    };
    let len = l.len();
    let (left, right) = match clamp_range(start, end, len) {
        None => (len, 0),
        Some((s, e)) => (s, len - e - 1),
    };
    l.trim(left, right);
    // Redis signals the key even when nothing was trimmed, but counts (and propagates) only
    // what it trimmed.
    let gone = removed(&mut db, key, fill);
    notify_removed(ctx, key, "ltrim", gone);
    if left + right == 0 {
        ctx.unchanged_write();
        ctx.propagate_nothing();
    }
    w.ok();
}

// ---- LPOS ----------------------------------------------------------------------------------------

fn lpos(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let (mut rank, mut count, mut maxlen): (i64, Option<usize>, usize) = (1, None, 0);
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let opt = args[j];
        if kw(opt, "rank") && more {
            j += 1;
            rank = match super::parse_int(args[j]) {
                None => return w.error(ERR_NOT_INT),
                Some(i64::MIN) => {
                    return w.error(
                        b"ERR value is out of range, value must between \
                          -9223372036854775807 and 9223372036854775807",
                    )
                }
                Some(0) => {
                    return w.error(
                        b"ERR RANK can't be zero: use 1 to start from the first match, 2 from \
                          the second ... or use negative to start from the end of the list",
                    )
                }
                Some(r) => r,
            };
        } else if kw(opt, "count") && more {
            j += 1;
            match parse_range(args[j], 0, b"ERR COUNT can't be negative") {
                Ok(c) => count = Some(c as usize),
                Err(e) => return w.error(e),
            }
        } else if kw(opt, "maxlen") && more {
            j += 1;
            match parse_range(args[j], 0, b"ERR MAXLEN can't be negative") {
                Ok(m) => maxlen = m as usize,
                Err(e) => return w.error(e),
            }
        } else {
            return w.error(ERR_SYNTAX);
        }
        j += 1;
    }
    let ele = args[2];
    let from_tail = rank < 0;
    let rank = rank.unsigned_abs();
    with_list(
        ctx,
        args[1],
        w,
        |w| match count {
            Some(_) => w.array(0),
            None => w.null(),
        },
        |l, w| {
            let len = l.len();
            let limit = if maxlen == 0 { len } else { maxlen.min(len) };
            let it: Box<dyn Iterator<Item = darner_engine::types::list::Elem>> = if from_tail {
                Box::new(l.iter_rev())
            } else {
                Box::new(l.iter())
            };
            let mut matches: u64 = 0;
            let mut found = Vec::new();
            for (i, e) in it.take(limit).enumerate() {
                if e != ele {
                    continue;
                }
                matches += 1;
                if matches < rank {
                    continue;
                }
                found.push(if from_tail { len - i - 1 } else { i });
                match count {
                    None => break,
                    Some(c) if c != 0 && found.len() >= c => break,
                    _ => {}
                }
            }
            match count {
                Some(_) => {
                    w.array(found.len());
                    for i in found {
                        w.int(i as i64);
                    }
                }
                None => match found.first() {
                    Some(&i) => w.int(i as i64),
                    None => w.null(),
                },
            }
        },
    )
}

// ---- LMOVE, RPOPLPUSH ----------------------------------------------------------------------------

pub(crate) enum Moved {
    /// The source is missing.
    Null,
    WrongType,
    Value(Vec<u8>),
}

/// Whether the popped `v` counts its bytes in the destination's growth check: Redis counts only
/// string-encoded objects, and an element popped from a quicklist that listpack stored as an
/// integer comes back as an integer object.
fn added_bytes(v: &[u8], from_quicklist: bool) -> usize {
    if from_quicklist && darner_resp::parse_i64_strict(v).is_some() && v.len() <= 20 {
        0
    } else {
        v.len()
    }
}

pub(crate) fn push_event(left: bool) -> &'static str {
    if left {
        "lpush"
    } else {
        "rpush"
    }
}

pub(crate) fn pop_event(left: bool) -> &'static str {
    if left {
        "lpop"
    } else {
        "rpop"
    }
}

/// LMOVE with both keys on this shard (possibly the same key).
pub(crate) fn lmove_local(
    ctx: &mut ShardCtx,
    src: &[u8],
    dst: &[u8],
    from_left: bool,
    to_left: bool,
) -> Moved {
    let fill = fill(ctx);
    let mut db = ctx.db();
    match key_state(&mut db, src) {
        KeyState::Missing => return Moved::Null,
        KeyState::WrongType => return Moved::WrongType,
        KeyState::List if wrong_type(&mut db, dst) => return Moved::WrongType,
        KeyState::List => {}
    }
    let (v, quick) = match list_mut(&mut db, src) {
        Err(()) => return Moved::WrongType,
        Ok(None) => return Moved::Null,
        Ok(Some(l)) => {
            let quick = l.encoding() == "quicklist";
            match l.pop(from_left) {
                Some(v) => (v, quick),
                None => return Moved::Null,
            }
        }
    };
    let bytes = added_bytes(&v, quick);
    // Cannot fail: the destination's type was checked.
    let _ = push_into(&mut db, dst, &[&v], bytes, to_left, false, fill);
    let gone = removed(&mut db, src, fill);
    // Redis's order: the push, then the pop (and the source's deletion).
    notify(ctx, LIST, push_event(to_left), dst);
    notify_removed(ctx, src, pop_event(from_left), gone);
    Moved::Value(v)
}

/// LMOVE between two shards (both locked by this transaction): both keys are checked (and the
/// element to move read) at once, then the pop and the push happen at once.
async fn lmove_across(tx: &Tx, src: Bytes, dst: Bytes, from_left: bool, to_left: bool) -> Moved {
    let (ss, ds) = (tx.shard_of(&src), tx.shard_of(&dst));
    // Round 1, both shards at once: the source's end element (and its encoding, which Redis's
    // growth check of the destination depends on) and the destination's type.
    let s2 = src.clone();
    let peek = tx.run(ss, move |ctx| match ctx.db().peek(&s2) {
        None => Err(Moved::Null),
        Some(e) => match e.value() {
            ValueRef::List(l) => {
                let v = if from_left {
                    l.get(0)
                } else {
                    l.get(l.len().saturating_sub(1))
                };
                match v {
                    Some(v) => Ok((v.to_vec(), l.encoding() == "quicklist")),
                    None => Err(Moved::Null),
                }
            }
            _ => Err(Moved::WrongType),
        },
    });
    let d2 = dst.clone();
    let dst_wrong = tx.run(ds, move |ctx| wrong_type(&mut ctx.db(), &d2));
    let (peeked, dst_wrong) = (peek.await, dst_wrong.await);
    let (v, quick) = match peeked {
        Err(m) => return m,
        Ok(_) if dst_wrong => return Moved::WrongType,
        Ok(p) => p,
    };
    // Round 2, both at once: the pop and the push. The shards stay locked from round 1, so the
    // element read is the element popped.
    let s2 = src.clone();
    let pop = tx.run(ss, move |ctx| {
        let fill = fill(ctx);
        let mut db = ctx.db();
        if let Ok(Some(l)) = list_mut(&mut db, &s2) {
            l.pop(from_left);
        }
        removed(&mut db, &s2, fill)
    });
    // With keyspace notifications on, the push waits for the pop and its thread publishes all
    // the events in Redis's order (push, pop, the source's deletion): the source is locked,
    // so nothing else can happen to it in between.
    let ordered = notify::enabled(tx.shared());
    let (gone, pop) = if ordered {
        (Some(pop.await), None)
    } else {
        (None, Some(pop))
    };
    let v2 = v.clone();
    let push = tx.run(ds, move |ctx| {
        let fill = fill(ctx);
        let bytes = added_bytes(&v2, quick);
        let _ = push_into(&mut ctx.db(), &dst, &[&v2], bytes, to_left, false, fill);
        if let Some(gone) = gone {
            notify(ctx, LIST, push_event(to_left), &dst);
            notify_removed(ctx, &src, pop_event(from_left), gone);
        }
    });
    if let Some(pop) = pop {
        pop.await;
    }
    push.await;
    Moved::Value(v)
}

async fn lmove_generic(tx: &Tx, src: Bytes, dst: Bytes, from_left: bool, to_left: bool) -> Vec<u8> {
    let resp3 = tx.resp3();
    let (ss, ds) = (tx.shard_of(&src), tx.shard_of(&dst));
    let moved = if ss == ds {
        tx.run(ss, move |ctx| {
            lmove_local(ctx, &src, &dst, from_left, to_left)
        })
        .await
    } else {
        lmove_across(tx, src, dst, from_left, to_left).await
    };
    super::with_writer(resp3, |w| match moved {
        Moved::Null => w.null(),
        Moved::WrongType => w.error(ERR_WRONGTYPE),
        Moved::Value(v) => w.bulk(&v),
    })
}

fn lmove(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let (Some(from), Some(to)) = (side(&args[3]), side(&args[4])) else {
            return super::with_writer(tx.resp3(), |w| w.error(ERR_SYNTAX));
        };
        lmove_generic(&tx, args[1].clone(), args[2].clone(), from, to).await
    })
}

fn rpoplpush(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move { lmove_generic(&tx, args[1].clone(), args[2].clone(), false, true).await })
}

// ---- LMPOP ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum KeyState {
    Missing,
    WrongType,
    List,
}

fn key_state(db: &mut DbView<'_>, key: &[u8]) -> KeyState {
    match db.peek(key) {
        None => KeyState::Missing,
        Some(e) if e.value_type() == ValueType::List => KeyState::List,
        Some(_) => KeyState::WrongType,
    }
}

/// Pops up to `count` elements from `key` (a list) and writes LMPOP's `[key, [elements]]`.
pub(crate) fn mpop_key(
    ctx: &mut ShardCtx,
    key: &[u8],
    left: bool,
    count: usize,
    w: &mut ReplyWriter,
) {
    let fill = fill(ctx);
    let mut db = ctx.db();
    let popped = match list_mut(&mut db, key) {
        Ok(Some(l)) => l.pop_many(left, count),
        _ => Vec::new(),
    };
    let gone = removed(&mut db, key, fill);
    if !popped.is_empty() {
        notify_removed(ctx, key, pop_event(left), gone);
    }
    w.array(2);
    w.bulk(key);
    w.array(popped.len());
    for v in &popped {
        w.bulk(v);
    }
}

fn lmpop(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| super::with_writer(resp3, |w| w.error(e));
        let numkeys = match parse_range(&args[1], 1, b"ERR numkeys should be greater than 0") {
            Ok(n) => n as u64,
            Err(e) => return err(e),
        };
        // Where LEFT|RIGHT must be; beyond the arguments is a syntax error (checked without
        // overflow for a huge numkeys).
        if numkeys >= args.len() as u64 - 2 {
            return err(ERR_SYNTAX);
        }
        let where_idx = 2 + numkeys as usize;
        let Some(left) = side(&args[where_idx]) else {
            return err(ERR_SYNTAX);
        };
        let mut count: Option<usize> = None;
        let mut j = where_idx + 1;
        while j < args.len() {
            if count.is_none() && kw(&args[j], "count") && j + 1 < args.len() {
                j += 1;
                match parse_range(&args[j], 1, b"ERR count should be greater than 0") {
                    Ok(c) => count = Some(usize::try_from(c).unwrap_or(usize::MAX)),
                    Err(e) => return err(e),
                }
            } else {
                return err(ERR_SYNTAX);
            }
            j += 1;
        }
        let count = count.unwrap_or(1);
        let keys: Vec<Bytes> = args[2..where_idx].to_vec();
        let groups = by_shard(&tx, &keys);
        if groups.len() == 1 {
            return tx
                .run(groups[0].0, move |ctx| {
                    let mut out = Vec::new();
                    let mut w = ReplyWriter::new(&mut out, ctx.resp3);
                    for k in &keys {
                        match key_state(&mut ctx.db(), k) {
                            KeyState::Missing => continue,
                            KeyState::WrongType => {
                                w.error(ERR_WRONGTYPE);
                                return out;
                            }
                            KeyState::List => {
                                mpop_key(ctx, k, left, count, &mut w);
                                return out;
                            }
                        }
                    }
                    w.null_array();
                    out
                })
                .await;
        }
        // Keys on several shards: learn every key's state at once, then pop from the first
        // key that exists (all the shards stay locked in between).
        let hops: Vec<_> = groups
            .iter()
            .map(|(s, idx)| {
                let ks: Vec<Bytes> = idx.iter().map(|&i| keys[i].clone()).collect();
                tx.run(*s, move |ctx| {
                    let mut db = ctx.db();
                    ks.iter().map(|k| key_state(&mut db, k)).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut states = vec![KeyState::Missing; keys.len()];
        for (g, hop) in hops.into_iter().enumerate() {
            for (j, st) in hop.await.into_iter().enumerate() {
                states[groups[g].1[j]] = st;
            }
        }
        match states.iter().position(|&s| s != KeyState::Missing) {
            None => super::with_writer(resp3, |w| w.null_array()),
            Some(i) if states[i] == KeyState::WrongType => err(ERR_WRONGTYPE),
            Some(i) => {
                let key = keys[i].clone();
                tx.run(tx.shard_of(&key), move |ctx| {
                    let mut out = Vec::new();
                    let mut w = ReplyWriter::new(&mut out, ctx.resp3);
                    mpop_key(ctx, &key, left, count, &mut w);
                    out
                })
                .await
            }
        }
    })
}
