//! The sorted set commands (Redis 7.2's t_zset.c): reply types, error texts and the order in
//! which errors are detected follow Redis. Single-key commands are `Key` handlers; the ones
//! that may take keys on several shards (ZUNIONSTORE, ZRANGESTORE, ZMPOP, ...) are `Tx`
//! handlers that lock every key's shard, so they are atomic.
//!
//! Not here yet: BZPOPMIN, BZPOPMAX, BZMPOP (they need the blocking machinery).

mod blocking;
mod multi;

use super::{Reg, ERR_NOT_FLOAT, ERR_NOT_INT, ERR_SYNTAX, ERR_WRONGTYPE};
use crate::notify::{self, notify, GENERIC, ZSET};
use crate::shard::ShardCtx;
use darner_engine::types::zset::{AddFlags, Added};
use darner_engine::types::{Limits, ZSet};
use darner_engine::{glob_match, DbView, Entry, Value, ValueRef};
use darner_resp::ReplyWriter;

pub fn register(r: &mut Reg) {
    r.key("zadd", zadd);
    r.key("zincrby", zincrby);
    r.key("zrem", zrem);
    r.key("zcard", zcard);
    r.key("zscore", zscore);
    r.key("zmscore", zmscore);
    r.key("zcount", zcount);
    r.key("zlexcount", zlexcount);
    r.key("zrank", zrank);
    r.key("zrevrank", zrevrank);
    r.key("zrange", zrange);
    r.key("zrevrange", zrevrange);
    r.key("zrangebyscore", zrangebyscore);
    r.key("zrevrangebyscore", zrevrangebyscore);
    r.key("zrangebylex", zrangebylex);
    r.key("zrevrangebylex", zrevrangebylex);
    r.key("zremrangebyrank", zremrangebyrank);
    r.key("zremrangebyscore", zremrangebyscore);
    r.key("zremrangebylex", zremrangebylex);
    r.key("zpopmin", zpopmin);
    r.key("zpopmax", zpopmax);
    r.key("zrandmember", zrandmember);
    r.key("zscan", zscan);
    multi::register(r);
    blocking::register(r);
}

const ERR_NAN: &[u8] = b"ERR resulting score is not a number (NaN)";
const ERR_MINMAX_FLOAT: &[u8] = b"ERR min or max is not a float";
const ERR_MINMAX_LEX: &[u8] = b"ERR min or max not valid string range item";
const ERR_POSITIVE: &[u8] = b"ERR value is out of range, must be positive";
const ERR_INVALID_CURSOR: &[u8] = b"ERR invalid cursor";

// ---- shared helpers -------------------------------------------------------------------------

/// The bytes before the first NUL: what Redis's C string functions see of an argument.
fn cstr(a: &[u8]) -> &[u8] {
    match a.iter().position(|&c| c == 0) {
        Some(i) => &a[..i],
        None => a,
    }
}

/// Case-insensitive keyword match, C-string style (`strcasecmp`).
fn kw(a: &[u8], word: &str) -> bool {
    cstr(a).eq_ignore_ascii_case(word.as_bytes())
}

/// Looks up a sorted set for reading: Ok(None) when missing, Err on another type.
fn read<'a>(db: &'a mut DbView<'_>, key: &[u8]) -> Result<Option<&'a ZSet>, ()> {
    match db.get(key) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::ZSet(z) => Ok(Some(z)),
            _ => Err(()),
        },
    }
}

/// The sorted set at `key`, for a write that may leave it unchanged (signal with
/// `db.signal` once it changed).
pub(crate) fn write<'a>(db: &'a mut DbView<'_>, key: &[u8]) -> Result<Option<&'a mut ZSet>, ()> {
    match db.get_mut_quiet(key) {
        None => Ok(None),
        Some(e) => match e.value_mut() {
            Some(Value::ZSet(z)) => Ok(Some(z)),
            _ => Err(()),
        },
    }
}

/// The notifications of a removal from a sorted set: `event`, then `del` if it was emptied.
pub(crate) fn notify_removed(ctx: &mut ShardCtx, key: &[u8], event: &str, deleted: bool) {
    notify(ctx, ZSET, event, key);
    if deleted {
        notify(ctx, GENERIC, "del", key);
    }
}

/// [`pop`] with its notifications (`zpopmin` / `zpopmax`, then `del` for an emptied set).
pub(crate) fn pop_notify(
    ctx: &mut ShardCtx,
    key: &[u8],
    max: bool,
    count: usize,
) -> Vec<(Vec<u8>, f64)> {
    let items = pop(&mut ctx.db(), key, max, count);
    if !items.is_empty() && notify::enabled(ctx.shared) {
        let gone = !ctx.db().exists(key);
        notify_removed(ctx, key, if max { "zpopmax" } else { "zpopmin" }, gone);
    }
    items
}

/// After a write that removed elements: signals the key, and deletes it if now empty.
fn after_removal(db: &mut DbView, key: &[u8], empty: bool) {
    if empty {
        db.remove(key);
    } else {
        db.signal(key);
    }
}

/// Redis's `getLongFromObjectOrReply`.
fn long_arg(a: &[u8]) -> Result<i64, &'static [u8]> {
    super::parse_int(a).ok_or(ERR_NOT_INT)
}

/// `strtod` as Redis's range parser uses it (no errno check): leading C spaces allowed,
/// overflow to infinity and underflow to zero accepted, an empty string is 0; NaN and
/// trailing bytes are refused.
fn strtod_range(a: &[u8]) -> Option<f64> {
    let s = cstr(a);
    if s.is_empty() {
        return Some(0.0);
    }
    let t = &s[s
        .iter()
        .position(|&c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?..];
    if let Some(v) = darner_resp::parse_f64_strict(t) {
        return Some(v);
    }
    // Out of range for the strict parser: a well-formed decimal whose value overflows or
    // underflows. Rust's parser gives the infinity or zero strtod gives.
    let body = t
        .strip_prefix(b"-")
        .or_else(|| t.strip_prefix(b"+"))
        .unwrap_or(t);
    let mut i = 0;
    let mut digits = 0;
    while i < body.len() && body[i].is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if i < body.len() && body[i] == b'.' {
        i += 1;
        while i < body.len() && body[i].is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 || i >= body.len() || (body[i] | 0x20) != b'e' {
        return None;
    }
    i += 1;
    if i < body.len() && (body[i] == b'+' || body[i] == b'-') {
        i += 1;
    }
    let exp_start = i;
    while i < body.len() && body[i].is_ascii_digit() {
        i += 1;
    }
    if i == exp_start || i != body.len() {
        return None;
    }
    std::str::from_utf8(t).ok()?.parse::<f64>().ok()
}

/// A score range: `(min`/`min` and `(max`/`max` (Redis's zrangespec).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScoreRange {
    min: f64,
    max: f64,
    minex: bool,
    maxex: bool,
}

fn parse_score_bound(a: &[u8]) -> Option<(f64, bool)> {
    let (ex, body) = match a.first() {
        Some(b'(') => (true, &a[1..]),
        _ => (false, a),
    };
    let v = strtod_range(body)?;
    if v.is_nan() {
        return None;
    }
    Some((v, ex))
}

fn parse_score_range(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
    let (min, minex) = parse_score_bound(min)?;
    let (max, maxex) = parse_score_bound(max)?;
    Some(ScoreRange {
        min,
        max,
        minex,
        maxex,
    })
}

impl ScoreRange {
    /// Ranks `lo..hi` of the elements in range.
    fn ranks(&self, z: &ZSet) -> (usize, usize) {
        let r = *self;
        let lo = z.partition_point(|s, _| if r.minex { s <= r.min } else { s < r.min });
        let hi = z.partition_point(|s, _| if r.maxex { s < r.max } else { s <= r.max });
        (lo, hi.max(lo))
    }
}

/// One end of a lex range.
#[derive(Clone, Debug)]
pub(crate) enum Lex {
    Min,
    Max,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

fn parse_lex_bound(a: &[u8]) -> Option<Lex> {
    match a.first() {
        Some(b'+') if a.len() == 1 || a[1] == 0 => Some(Lex::Max),
        Some(b'-') if a.len() == 1 || a[1] == 0 => Some(Lex::Min),
        Some(b'(') => Some(Lex::Excl(a[1..].to_vec())),
        Some(b'[') => Some(Lex::Incl(a[1..].to_vec())),
        _ => None,
    }
}

#[derive(Clone, Debug)]
pub(crate) struct LexRange {
    min: Lex,
    max: Lex,
}

fn parse_lex_range(min: &[u8], max: &[u8]) -> Option<LexRange> {
    Some(LexRange {
        min: parse_lex_bound(min)?,
        max: parse_lex_bound(max)?,
    })
}

impl LexRange {
    /// Ranks `lo..hi` of the elements in range (members compared as bytes; meaningful, as in
    /// Redis, when all scores are equal).
    fn ranks(&self, z: &ZSet) -> (usize, usize) {
        let lo = z.partition_point(|_, m| match &self.min {
            Lex::Min => false,
            Lex::Max => true,
            Lex::Incl(v) => m < &v[..],
            Lex::Excl(v) => m <= &v[..],
        });
        let hi = z.partition_point(|_, m| match &self.max {
            Lex::Min => false,
            Lex::Max => true,
            Lex::Incl(v) => m <= &v[..],
            Lex::Excl(v) => m < &v[..],
        });
        (lo, hi.max(lo))
    }
}

/// Writes a (member, score) list as Redis's range replies do: RESP2 a flat array, RESP3 an
/// array of [member, score] pairs; without scores, an array of members.
fn write_items(w: &mut ReplyWriter, items: &[(Vec<u8>, f64)], withscores: bool) {
    if withscores && !w.resp3 {
        w.array(items.len() * 2);
    } else {
        w.array(items.len());
    }
    for (m, s) in items {
        if withscores && w.resp3 {
            w.array(2);
        }
        w.bulk(m);
        if withscores {
            w.double(*s);
        }
    }
}

// ---- ZADD, ZINCRBY ----------------------------------------------------------------------------

fn zadd(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zadd_generic(ctx, args, w, false)
}

fn zincrby(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zadd_generic(ctx, args, w, true)
}

fn zadd_generic(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter, zincrby: bool) {
    let key = args[1];
    let mut f = AddFlags {
        incr: zincrby,
        ..AddFlags::default()
    };
    let mut ch = false;
    let mut idx = 2;
    while idx < args.len() {
        let o = args[idx];
        if kw(o, "nx") {
            f.nx = true;
        } else if kw(o, "xx") {
            f.xx = true;
        } else if kw(o, "ch") {
            ch = true;
        } else if kw(o, "incr") {
            f.incr = true;
        } else if kw(o, "gt") {
            f.gt = true;
        } else if kw(o, "lt") {
            f.lt = true;
        } else {
            break;
        }
        idx += 1;
    }
    let rest = args.len() - idx;
    if rest % 2 == 1 || rest == 0 {
        return w.error(ERR_SYNTAX);
    }
    let elements = rest / 2;
    if f.nx && f.xx {
        return w.error(b"ERR XX and NX options at the same time are not compatible");
    }
    if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
        return w.error(b"ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && elements > 1 {
        return w.error(b"ERR INCR option supports a single increment-element pair");
    }
    let mut scores = Vec::with_capacity(elements);
    for j in 0..elements {
        match darner_resp::parse_f64_strict(args[idx + j * 2]) {
            Some(s) => scores.push(s),
            None => return w.error(ERR_NOT_FLOAT),
        }
    }
    let limits = ctx.limits();
    let lru = ctx.clock.lru;
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
    let mut last = 0.0;
    let mut nan = false;
    let pairs: Vec<(&[u8], f64)> = scores
        .iter()
        .enumerate()
        .map(|(j, &sc)| (args[idx + 1 + j * 2], sc))
        .collect();
    let mut apply = |z: &mut ZSet| {
        for a in z.add_many(&pairs, f, &limits) {
            match a {
                Added::Nan => nan = true,
                Added::Nop => {}
                Added::New(s) => {
                    added += 1;
                    processed += 1;
                    last = s;
                }
                Added::Updated(s) => {
                    updated += 1;
                    processed += 1;
                    last = s;
                }
                Added::Same(s) => {
                    processed += 1;
                    last = s;
                }
            }
        }
    };
    let mut db = ctx.db();
    match write(&mut db, key) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(Some(z)) => {
            z.maybe_convert(elements, &limits);
            apply(z);
            if added + updated > 0 {
                db.signal(key);
            }
        }
        Ok(None) => {
            if !f.xx {
                let mut z = ZSet::create(elements, args[idx + 1].len(), &limits);
                apply(&mut z);
                if !z.is_empty() {
                    db.set(Entry::new_value(key, Value::ZSet(z), None, lru));
                }
            }
        }
    }
    if added + updated > 0 {
        notify(ctx, ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    if nan {
        return w.error(ERR_NAN);
    }
    if f.incr {
        if processed > 0 {
            w.double(last)
        } else {
            w.null()
        }
    } else {
        w.int(if ch { added + updated } else { added })
    }
}

// ---- ZREM, ZCARD, ZSCORE, ZMSCORE, ZRANK ----------------------------------------------------

fn zrem(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let key = args[1];
    let mut db = ctx.db();
    let (deleted, empty) = match write(&mut db, key) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(None) => return w.int(0),
        Ok(Some(z)) => {
            let mut n = 0;
            for m in &args[2..] {
                if z.remove(m) {
                    n += 1;
                    if z.is_empty() {
                        break;
                    }
                }
            }
            (n, z.is_empty())
        }
    };
    if deleted > 0 {
        after_removal(&mut db, key, empty);
        notify_removed(ctx, key, "zrem", empty);
    }
    w.int(deleted)
}

fn zcard(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match read(&mut ctx.db(), args[1]) {
        Err(()) => w.error(ERR_WRONGTYPE),
        Ok(None) => w.int(0),
        Ok(Some(z)) => w.int(z.len() as i64),
    }
}

fn zscore(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match read(&mut ctx.db(), args[1]) {
        Err(()) => w.error(ERR_WRONGTYPE),
        Ok(None) => w.null(),
        Ok(Some(z)) => match z.score(args[2]) {
            Some(s) => w.double(s),
            None => w.null(),
        },
    }
}

fn zmscore(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    let z = match read(&mut db, args[1]) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(z) => z,
    };
    w.array(args.len() - 2);
    for m in &args[2..] {
        match z.and_then(|z| z.score(m)) {
            Some(s) => w.double(s),
            None => w.null(),
        }
    }
}

fn zrank(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zrank_generic(ctx, args, w, false)
}

fn zrevrank(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zrank_generic(ctx, args, w, true)
}

fn zrank_generic(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter, rev: bool) {
    if args.len() > 4 {
        return w.error(&super::arity_error(
            darner_commands::lookup_full_name(if rev { b"zrevrank" } else { b"zrank" })
                .expect("in the table"),
        ));
    }
    let withscore = match args.get(3) {
        None => false,
        Some(a) if kw(a, "withscore") => true,
        Some(_) => return w.error(ERR_SYNTAX),
    };
    let mut db = ctx.db();
    let z = match read(&mut db, args[1]) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(None) => return if withscore { w.null_array() } else { w.null() },
        Ok(Some(z)) => z,
    };
    match z.rank(args[2]) {
        None => {
            if withscore {
                w.null_array()
            } else {
                w.null()
            }
        }
        Some((r, s)) => {
            let r = if rev { z.len() - 1 - r } else { r };
            if withscore {
                w.array(2);
                w.int(r as i64);
                w.double(s);
            } else {
                w.int(r as i64);
            }
        }
    }
}

// ---- ZCOUNT, ZLEXCOUNT ----------------------------------------------------------------------

fn zcount(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let Some(range) = parse_score_range(args[2], args[3]) else {
        return w.error(ERR_MINMAX_FLOAT);
    };
    match read(&mut ctx.db(), args[1]) {
        Err(()) => w.error(ERR_WRONGTYPE),
        Ok(None) => w.int(0),
        Ok(Some(z)) => {
            let (lo, hi) = range.ranks(z);
            w.int((hi - lo) as i64)
        }
    }
}

fn zlexcount(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let Some(range) = parse_lex_range(args[2], args[3]) else {
        return w.error(ERR_MINMAX_LEX);
    };
    match read(&mut ctx.db(), args[1]) {
        Err(()) => w.error(ERR_WRONGTYPE),
        Ok(None) => w.int(0),
        Ok(Some(z)) => {
            let (lo, hi) = range.ranks(z);
            w.int((hi - lo) as i64)
        }
    }
}

// ---- the ZRANGE family ----------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

/// A parsed ZRANGE-like request.
#[derive(Clone, Debug)]
pub(crate) enum Bounds {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

#[derive(Clone, Debug)]
pub(crate) struct RangeReq {
    pub bounds: Bounds,
    pub rev: bool,
    pub withscores: bool,
    offset: i64,
    limit: i64,
}

/// Redis's `zrangeGenericCommand` argument parsing: `args[start]` is the source key.
pub(crate) fn parse_range(
    args: &[&[u8]],
    start: usize,
    store: bool,
    mut rangetype: RangeType,
    rev_fixed: Option<bool>,
) -> Result<RangeReq, Vec<u8>> {
    let (mut minidx, mut maxidx) = (start + 1, start + 2);
    let mut withscores = false;
    let mut offset = 0i64;
    let mut limit = -1i64;
    let mut rev = rev_fixed;
    let mut j = start + 3;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = args[j];
        if !store && kw(a, "withscores") {
            withscores = true;
        } else if kw(a, "limit") && left >= 2 {
            offset = long_arg(args[j + 1]).map_err(|e| e.to_vec())?;
            limit = long_arg(args[j + 2]).map_err(|e| e.to_vec())?;
            j += 2;
        } else if rev.is_none() && kw(a, "rev") {
            rev = Some(true);
        } else if rangetype == RangeType::Auto && kw(a, "bylex") {
            rangetype = RangeType::Lex;
        } else if rangetype == RangeType::Auto && kw(a, "byscore") {
            rangetype = RangeType::Score;
        } else {
            return Err(ERR_SYNTAX.to_vec());
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    if rangetype == RangeType::Auto {
        rangetype = RangeType::Rank;
    }
    if limit != -1 && rangetype == RangeType::Rank {
        return Err(b"ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX".to_vec());
    }
    if withscores && rangetype == RangeType::Lex {
        return Err(
            b"ERR syntax error, WITHSCORES not supported in combination with BYLEX".to_vec(),
        );
    }
    if rev && rangetype != RangeType::Rank {
        std::mem::swap(&mut minidx, &mut maxidx);
    }
    let bounds = match rangetype {
        RangeType::Score => Bounds::Score(
            parse_score_range(args[minidx], args[maxidx])
                .ok_or_else(|| ERR_MINMAX_FLOAT.to_vec())?,
        ),
        RangeType::Lex => Bounds::Lex(
            parse_lex_range(args[minidx], args[maxidx]).ok_or_else(|| ERR_MINMAX_LEX.to_vec())?,
        ),
        _ => Bounds::Rank(
            long_arg(args[minidx]).map_err(|e| e.to_vec())?,
            long_arg(args[maxidx]).map_err(|e| e.to_vec())?,
        ),
    };
    Ok(RangeReq {
        bounds,
        rev,
        withscores,
        offset,
        limit,
    })
}

/// Sanitises a rank range as Redis does: Some(start, end) inclusive, or None when empty.
fn rank_bounds(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let llen = len as i64;
    let mut start = if start < 0 { llen + start } else { start };
    let mut end = if end < 0 { llen + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= llen {
        return None;
    }
    if end >= llen {
        end = llen - 1;
    }
    Some((start as usize, end as usize))
}

/// The elements a range request selects, in reply order.
pub(crate) fn range_items(z: &ZSet, req: &RangeReq) -> Vec<(Vec<u8>, f64)> {
    let (lo, hi) = match &req.bounds {
        Bounds::Rank(s, e) => match rank_bounds(*s, *e, z.len()) {
            None => return Vec::new(),
            Some((s, e)) => {
                // Rank ranges count from the end when reversed.
                if req.rev {
                    let n = z.len();
                    (n - 1 - e, n - s)
                } else {
                    (s, e + 1)
                }
            }
        },
        Bounds::Score(r) => r.ranks(z),
        Bounds::Lex(r) => r.ranks(z),
    };
    let (lo, hi) = if matches!(req.bounds, Bounds::Rank(..)) {
        (lo, hi)
    } else {
        // LIMIT: a negative offset selects nothing, a negative count means all.
        if req.offset < 0 {
            return Vec::new();
        }
        let avail = hi - lo;
        let off = (req.offset as u64).min(avail as u64) as usize;
        let n = if req.limit < 0 {
            avail - off
        } else {
            (req.limit as u64).min((avail - off) as u64) as usize
        };
        if req.rev {
            (hi - off - n, hi - off)
        } else {
            (lo + off, lo + off + n)
        }
    };
    let mut out = Vec::with_capacity(hi.saturating_sub(lo));
    z.range(lo, hi, req.rev, |m, s| out.push((m.to_vec(), s)));
    out
}

fn zrange_reply(
    ctx: &mut ShardCtx,
    args: &[&[u8]],
    w: &mut ReplyWriter,
    t: RangeType,
    rev: Option<bool>,
) {
    let req = match parse_range(args, 1, false, t, rev) {
        Ok(r) => r,
        Err(e) => return w.error(&e),
    };
    match read(&mut ctx.db(), args[1]) {
        Err(()) => w.error(ERR_WRONGTYPE),
        Ok(None) => w.array(0),
        Ok(Some(z)) => {
            let items = range_items(z, &req);
            write_items(w, &items, req.withscores);
        }
    }
}

fn zrange(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zrange_reply(ctx, args, w, RangeType::Auto, None)
}

fn zrevrange(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zrange_reply(ctx, args, w, RangeType::Rank, Some(true))
}

fn zrangebyscore(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zrange_reply(ctx, args, w, RangeType::Score, Some(false))
}

fn zrevrangebyscore(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zrange_reply(ctx, args, w, RangeType::Score, Some(true))
}

fn zrangebylex(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zrange_reply(ctx, args, w, RangeType::Lex, Some(false))
}

fn zrevrangebylex(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zrange_reply(ctx, args, w, RangeType::Lex, Some(true))
}

// ---- ZREMRANGEBY* ---------------------------------------------------------------------------

fn zremrange(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter, t: RangeType) {
    let bounds = match t {
        RangeType::Score => match parse_score_range(args[2], args[3]) {
            Some(r) => Bounds::Score(r),
            None => return w.error(ERR_MINMAX_FLOAT),
        },
        RangeType::Lex => match parse_lex_range(args[2], args[3]) {
            Some(r) => Bounds::Lex(r),
            None => return w.error(ERR_MINMAX_LEX),
        },
        _ => match (long_arg(args[2]), long_arg(args[3])) {
            (Ok(s), Ok(e)) => Bounds::Rank(s, e),
            (Err(e), _) | (_, Err(e)) => return w.error(e),
        },
    };
    let key = args[1];
    let mut db = ctx.db();
    let (n, empty) = match write(&mut db, key) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(None) => return w.int(0),
        Ok(Some(z)) => {
            let (lo, hi) = match &bounds {
                Bounds::Rank(s, e) => match rank_bounds(*s, *e, z.len()) {
                    None => return w.int(0),
                    Some((s, e)) => (s, e + 1),
                },
                Bounds::Score(r) => r.ranks(z),
                Bounds::Lex(r) => r.ranks(z),
            };
            (z.remove_ranks(lo, hi), z.is_empty())
        }
    };
    if n > 0 {
        after_removal(&mut db, key, empty);
        let event = match t {
            RangeType::Score => "zremrangebyscore",
            RangeType::Lex => "zremrangebylex",
            _ => "zremrangebyrank",
        };
        notify_removed(ctx, key, event, empty);
    }
    w.int(n as i64)
}

fn zremrangebyrank(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zremrange(ctx, args, w, RangeType::Rank)
}

fn zremrangebyscore(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zremrange(ctx, args, w, RangeType::Score)
}

fn zremrangebylex(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zremrange(ctx, args, w, RangeType::Lex)
}

// ---- ZPOPMIN, ZPOPMAX ------------------------------------------------------------------------

/// Pops up to `count` elements from the low (or high, `max`) end of the set at `key`, which
/// must be a sorted set or missing; deletes the key when it empties.
pub(crate) fn pop(db: &mut DbView, key: &[u8], max: bool, count: usize) -> Vec<(Vec<u8>, f64)> {
    let (items, empty) = match write(db, key) {
        Ok(Some(z)) => {
            let n = count.min(z.len());
            let (lo, hi) = if max { (z.len() - n, z.len()) } else { (0, n) };
            let mut items = Vec::with_capacity(n);
            z.range(lo, hi, max, |m, s| items.push((m.to_vec(), s)));
            z.remove_ranks(lo, hi);
            (items, z.is_empty())
        }
        _ => return Vec::new(),
    };
    if !items.is_empty() {
        after_removal(db, key, empty);
    }
    items
}

fn zpop(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter, max: bool) {
    if args.len() > 3 {
        return w.error(ERR_SYNTAX);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match super::parse_int(a) {
            None => return w.error(ERR_POSITIVE),
            Some(c) if c < 0 => return w.error(ERR_POSITIVE),
            Some(c) => Some(c as u64),
        },
    };
    // A write lookup (Redis's lookupKeyWrite): no hit/miss counted.
    match write(&mut ctx.db(), args[1]) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(None) => return w.array(0),
        Ok(Some(_)) => {}
    }
    if count == Some(0) {
        return w.array(0);
    }
    let n = count.unwrap_or(1).min(usize::MAX as u64) as usize;
    let items = pop_notify(ctx, args[1], max, n);
    if count.is_some() {
        write_items(w, &items, true);
    } else {
        // Without COUNT: a flat [member, score] in both protocols.
        w.array(items.len() * 2);
        for (m, s) in &items {
            w.bulk(m);
            w.double(*s);
        }
    }
}

fn zpopmin(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zpop(ctx, args, w, false)
}

fn zpopmax(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    zpop(ctx, args, w, true)
}

// ---- ZRANDMEMBER -----------------------------------------------------------------------------

fn zrandmember(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    if args.len() == 2 {
        let r = ctx.shard.random();
        return match read(&mut ctx.db(), args[1]) {
            Err(()) => w.error(ERR_WRONGTYPE),
            Ok(None) => w.null(),
            Ok(Some(z)) => {
                let i = (r % z.len() as u64) as usize;
                z.range(i, i + 1, false, |m, _| w.bulk(m));
            }
        };
    }
    let l = match super::parse_int(args[2]) {
        None => return w.error(ERR_NOT_INT),
        Some(i64::MIN) => {
            return w.error(
                b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            )
        }
        Some(l) => l,
    };
    let withscores = match args.len() {
        3 => false,
        4 if kw(args[3], "withscores") => true,
        _ => return w.error(ERR_SYNTAX),
    };
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
        return w.error(b"ERR value is out of range");
    }
    let seed = ctx.shard.random();
    let max_bytes = ctx.proto_max_bulk_len();
    let mut db = ctx.db();
    let z = match read(&mut db, args[1]) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(None) => return w.array(0),
        Ok(Some(z)) => z,
    };
    let mut rng = Rng(seed | 1);
    let size = z.len();
    let count = l.unsigned_abs();
    if count == 0 {
        return w.array(0);
    }
    let head = |w: &mut ReplyWriter, n: usize| {
        if withscores && !w.resp3 {
            w.array(n * 2)
        } else {
            w.array(n)
        }
    };
    let item = |w: &mut ReplyWriter, m: &[u8], s: f64| {
        if withscores && w.resp3 {
            w.array(2);
        }
        w.bulk(m);
        if withscores {
            w.double(s);
        }
    };
    if l < 0 || count == 1 {
        // Samples with repetition: a reply bounded by super::random_samples.
        let header = |w: &mut ReplyWriter| head(w, count as usize);
        if size <= 512 {
            // Small: index a decoded copy (no per-pick decode).
            let all = z.to_vec();
            super::random_samples(w, count, max_bytes, header, |w| {
                let (m, s) = &all[rng.below(size)];
                item(w, m, *s);
            });
        } else {
            super::random_samples(w, count, max_bytes, header, |w| {
                let i = rng.below(size);
                z.range(i, i + 1, false, |m, s| item(w, m, s));
            });
        }
        return;
    }
    let count = count.min(size as u64) as usize;
    head(w, count);
    if count == size {
        // The whole set, highest score first (Redis walks it from the tail here).
        z.range(0, size, true, |m, s| item(w, m, s));
        return;
    }
    // Distinct picks: a partial Fisher-Yates shuffle over the ranks.
    let mut ranks: Vec<usize> = (0..size).collect();
    for i in 0..count {
        let j = i + rng.below(size - i);
        ranks.swap(i, j);
    }
    let mut picked = ranks[..count].to_vec();
    picked.sort_unstable();
    let all_small = size <= 512;
    if all_small {
        let all = z.to_vec();
        for r in picked {
            item(w, &all[r].0, all[r].1);
        }
    } else {
        for r in picked {
            z.range(r, r + 1, false, |m, s| item(w, m, s));
        }
    }
}

/// A small generator for one command's random picks, seeded from the shard's.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

// ---- ZSCAN -----------------------------------------------------------------------------------

fn zscan(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let Some(cursor) = super::parse_cursor(args[2]) else {
        return w.error(ERR_INVALID_CURSOR);
    };
    let mut db = ctx.db();
    let z = match read(&mut db, args[1]) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(None) => {
            w.array(2);
            w.bulk(b"0");
            return w.array(0);
        }
        Ok(Some(z)) => z,
    };
    let mut count = 10usize;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if kw(args[i], "count") && more {
            match super::parse_int(args[i + 1]) {
                None => return w.error(ERR_NOT_INT),
                Some(c) if c < 1 => return w.error(ERR_SYNTAX),
                Some(c) => count = usize::try_from(c).unwrap_or(usize::MAX),
            }
        } else if kw(args[i], "match") && more {
            pattern = (args[i + 1] != b"*").then_some(args[i + 1]);
        } else {
            return w.error(ERR_SYNTAX);
        }
        i += 2;
    }
    let mut found: Vec<(Vec<u8>, f64)> = Vec::new();
    let next = z.scan(cursor, count, |m, s| {
        if pattern.is_none_or(|p| glob_match(p, m, false)) {
            found.push((m.to_vec(), s));
        }
    });
    w.array(2);
    let mut buf = [0u8; 24];
    w.bulk(u64_text(next, &mut buf));
    w.array(found.len() * 2);
    let mut text = Vec::with_capacity(32);
    for (m, s) in &found {
        w.bulk(m);
        // Scores are bulk strings here in both protocols (Redis formats them as text).
        text.clear();
        darner_resp::format_double(*s, &mut text);
        w.bulk(&text);
    }
}

fn u64_text(mut v: u64, buf: &mut [u8; 24]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

/// The thresholds a store command's result is encoded with.
pub(crate) fn store_set(items: &[(Vec<u8>, f64)], limits: &Limits) -> ZSet {
    let refs: Vec<(&[u8], f64)> = items.iter().map(|(m, s)| (&m[..], *s)).collect();
    ZSet::from_sorted(&refs, limits)
}
