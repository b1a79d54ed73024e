//! The stream commands (Redis 7.2's t_stream.c): XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM,
//! XSETID, XREAD (blocking included), and the consumer group commands in `group.rs`. Reply
//! types, error texts and the order in which errors are detected follow Redis. The data
//! structure is `darner_engine::types::Stream`.
//!
//! XREAD and XREADGROUP may name keys on several shards: they are transaction tasks (as BLPOP)
//! that look at every key with the keys' shards reserved, and block through blocking.rs.
//! Without BLOCK and with all their keys on one shard they run a single-shard form (the same
//! steps, on the spot), as MGET does: no reservation, no hop, half the cost.

pub mod group;
mod read;

pub use read::{may_block, parse_read};

use super::{eq, parse_int, Reg, ERR_NOT_INT, ERR_SYNTAX, ERR_WRONGTYPE};
use crate::cmd::Locks;
use crate::notify::{notify, STREAM};
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_engine::types::stream::{EntryRef, NodeLimits, Trim};
use darner_engine::types::{Stream, StreamId};
use darner_engine::{DbView, Entry, Value, ValueRef};
use darner_resp::ReplyWriter;

pub fn register(r: &mut Reg) {
    r.key("xadd", xadd);
    r.key("xlen", xlen);
    r.key("xrange", xrange);
    r.key("xrevrange", xrevrange);
    r.key("xdel", xdel);
    r.key("xtrim", xtrim);
    r.key("xsetid", xsetid);
    r.tx_single("xread", Locks::Keys, read::xread, read::xread_single);
    group::register(r);
}

/// The planner of a command whose big reply is streamed in parts (stream.rs): XREAD,
/// XREADGROUP (without BLOCK, on one shard) and XINFO STREAM FULL.
pub fn segs_planner(name: &str) -> Option<crate::stream::SegsPlanner> {
    use crate::stream::SegsPlanner;
    match name {
        "xread" => Some(SegsPlanner {
            plan: read::xread_segs,
            begin: read::xread_begin,
        }),
        "xreadgroup" => Some(SegsPlanner {
            plan: read::xreadgroup_segs,
            begin: read::xreadgroup_begin,
        }),
        "xinfo|stream" => Some(SegsPlanner {
            plan: group::xinfo_full_segs,
            begin: group::xinfo_full_begin,
        }),
        _ => None,
    }
}

pub const ERR_INVALID_ID: &[u8] = b"ERR Invalid stream ID specified as stream command argument";

/// The key holds another type.
pub struct WrongType;

/// The stream at `key` to read (counts a hit or a miss).
pub fn read<'a>(db: &'a mut DbView<'_>, key: &[u8]) -> Result<Option<&'a Stream>, WrongType> {
    match db.get(key) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Stream(s) => Ok(Some(s)),
            _ => Err(WrongType),
        },
    }
}

/// The stream at `key` to modify. Quiet: the caller signals once it changed something.
/// The running stream command succeeded and changed nothing (XACK of ids not pending, XDEL of
/// missing ids, XGROUP DESTROY of a missing group...): Redis's `server.dirty` did not move,
/// so it is neither counted as a change nor written. Stream commands say it themselves:
/// a consumer group's changes do not signal the key, so `darner_engine::keys_written`
/// cannot tell (propagate.rs, `changed_something`).
pub fn unchanged(ctx: &ShardCtx) {
    ctx.unchanged_write();
    ctx.propagate_nothing();
}

pub fn write<'a>(db: &'a mut DbView<'_>, key: &[u8]) -> Result<Option<&'a mut Stream>, WrongType> {
    match db.get_mut_quiet(key) {
        None => Ok(None),
        Some(e) => match e.heap_mut() {
            Some(Value::Stream(s)) => Ok(Some(s)),
            _ => Err(WrongType),
        },
    }
}

/// Like [`write`], creating an empty stream when the key is absent.
pub fn write_or_create<'a>(
    db: &'a mut DbView<'_>,
    key: &[u8],
) -> Result<&'a mut Stream, WrongType> {
    if !db.exists(key) {
        let lru = db.clock.lru;
        db.set(Entry::new_value(
            key,
            Value::Stream(Box::default()),
            None,
            lru,
        ));
    }
    write(db, key).map(|s| s.expect("just created"))
}

/// The node limits in force (`stream-node-max-bytes`, `stream-node-max-entries`).
pub fn node_limits(ctx: &ShardCtx) -> NodeLimits {
    let l = ctx.limits();
    NodeLimits {
        max_bytes: l.stream_node_max_bytes,
        max_entries: l.stream_node_max_entries,
    }
}

/// Redis's string2ull: a plain non-negative integer, or what strtoull takes whole (leading
/// blanks, a sign, digits; a `-` negates modulo 2^64).
fn parse_u64(b: &[u8]) -> Option<u64> {
    if let Some(v) = parse_int(b) {
        return u64::try_from(v).ok();
    }
    let (i, neg) = darner_resp::c_number_prefix(b);
    if i >= b.len() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in &b[i..] {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// A parsed id and whether its sequence part was given (`ms-*` in XADD leaves it to the
/// server).
#[derive(Clone, Copy, Debug)]
pub struct ParsedId {
    pub id: StreamId,
    pub seq_given: bool,
}

/// Redis's streamGenericParseIDOrReply: `ms`, `ms-seq`, and unless `strict` `-` and `+`;
/// `missing_seq` is the sequence of an id given as `ms` alone; `seq_star` accepts `ms-*`.
pub fn parse_id(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    seq_star: bool,
) -> Result<ParsedId, &'static [u8]> {
    let given = |id| ParsedId {
        id,
        seq_given: true,
    };
    if arg.len() > 127 {
        return Err(ERR_INVALID_ID);
    }
    if !strict && arg == b"-" {
        return Ok(given(StreamId::MIN));
    }
    if !strict && arg == b"+" {
        return Ok(given(StreamId::MAX));
    }
    match arg.iter().position(|&c| c == b'-') {
        Some(dash) => {
            let ms = parse_u64(&arg[..dash]).ok_or(ERR_INVALID_ID)?;
            let rest = &arg[dash + 1..];
            if seq_star && rest == b"*" {
                return Ok(ParsedId {
                    id: StreamId::new(ms, 0),
                    seq_given: false,
                });
            }
            let seq = parse_u64(rest).ok_or(ERR_INVALID_ID)?;
            Ok(given(StreamId::new(ms, seq)))
        }
        None => {
            let ms = parse_u64(arg).ok_or(ERR_INVALID_ID)?;
            Ok(given(StreamId::new(ms, missing_seq)))
        }
    }
}

/// A strict id (no `-` / `+`), as most commands take.
pub fn parse_strict(arg: &[u8]) -> Result<StreamId, &'static [u8]> {
    parse_id(arg, 0, true, false).map(|p| p.id)
}

/// A list of ids (XDEL, XACK), each as [`parse_strict`]: all of them, or the first error.
pub fn parse_strict_all(args: &[&[u8]]) -> Result<Vec<StreamId>, &'static [u8]> {
    args.iter().map(|a| parse_strict(a)).collect()
}

/// Redis's streamParseIntervalIDOrReply: an id, or `(id` for an exclusive bound.
fn parse_interval(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), &'static [u8]> {
    if arg.len() > 1 && arg[0] == b'(' {
        Ok((parse_id(&arg[1..], missing_seq, true, false)?.id, true))
    } else {
        Ok((parse_id(arg, missing_seq, false, false)?.id, false))
    }
}

/// A long long argument (getLongLongFromObjectOrReply).
fn parse_ll(arg: &[u8]) -> Result<i64, &'static [u8]> {
    parse_int(arg).ok_or(ERR_NOT_INT)
}

/// Writes an id as a bulk string.
pub fn write_id(w: &mut ReplyWriter, id: StreamId) {
    w.bulk(format!("{}-{}", id.ms, id.seq).as_bytes());
}

/// One entry: `[id, [field, value, ...]]`.
pub fn write_entry(w: &mut ReplyWriter, e: &EntryRef<'_>) {
    w.array(2);
    write_id(w, e.id);
    w.array(e.pairs.len() * 2);
    for (f, v) in &e.pairs {
        w.bulk(f);
        w.bulk(v);
    }
}

/// Entries of `s` in `start..=end` (backward with `rev`), at most `count` (0: all), as an
/// array. Returns how many.
pub fn write_range(
    w: &mut ReplyWriter,
    s: &Stream,
    start: StreamId,
    end: StreamId,
    count: usize,
    rev: bool,
) -> usize {
    let entries: Vec<EntryRef<'_>> = if count == 0 {
        s.range(start, end, rev).collect()
    } else {
        s.range(start, end, rev).take(count).collect()
    };
    w.array(entries.len());
    for e in &entries {
        write_entry(w, e);
    }
    entries.len()
}

// ---- XADD, XTRIM ---------------------------------------------------------------------------------

/// The trimming and XADD options (Redis's streamAddTrimArgs).
struct AddTrim {
    trim: Option<Trim>,
    approx: bool,
    limit: u64,
    nomkstream: bool,
    /// XADD's id (None: `*`).
    id: Option<ParsedId>,
}

/// Redis's streamParseAddOrTrimArgsOrReply: the options from `args[2]` on; returns them and
/// the index of XADD's id argument (or of the end, for XTRIM).
fn parse_add_trim(
    args: &[&[u8]],
    xadd: bool,
    max_entries: usize,
) -> Result<(AddTrim, usize), &'static [u8]> {
    let mut a = AddTrim {
        trim: None,
        approx: false,
        limit: 0,
        nomkstream: false,
        id: None,
    };
    let mut limit_given = false;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args[i];
        if xadd && opt == b"*" {
            break;
        } else if (eq(opt, "maxlen") || eq(opt, "minid")) && more > 0 {
            if a.trim.is_some() {
                return Err(b"ERR syntax error, MAXLEN and MINID options at the same time are not compatible");
            }
            a.approx = false;
            let next = args[i + 1];
            if more >= 2 && next == b"~" {
                a.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            if eq(opt, "maxlen") {
                let n = parse_ll(args[i + 1])?;
                if n < 0 {
                    return Err(b"ERR The MAXLEN argument must be >= 0.");
                }
                a.trim = Some(Trim::MaxLen(n as u64));
            } else {
                a.trim = Some(Trim::MinId(parse_strict(args[i + 1])?));
            }
            i += 1;
        } else if eq(opt, "limit") && more > 0 {
            let n = parse_ll(args[i + 1])?;
            if n < 0 {
                return Err(b"ERR The LIMIT argument must be >= 0.");
            }
            a.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && eq(opt, "nomkstream") {
            a.nomkstream = true;
        } else if xadd {
            a.id = Some(parse_id(opt, 0, true, true)?);
            break;
        } else {
            return Err(ERR_SYNTAX);
        }
        i += 1;
    }
    if a.limit != 0 && a.trim.is_none() {
        return Err(
            b"ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        );
    }
    if !xadd && a.trim.is_none() {
        return Err(b"ERR syntax error, XTRIM must be called with a trimming strategy");
    }
    if limit_given {
        if !a.approx {
            return Err(b"ERR syntax error, LIMIT cannot be used without the special ~ option");
        }
    } else if a.approx {
        let l = 100 * max_entries as u64;
        a.limit = if l == 0 { 10_000 } else { l.min(1_000_000) };
    } else {
        a.limit = 0;
    }
    Ok((a, i))
}

/// XADD's or XTRIM's arguments as written to the AOF (Redis 7.2): the id the entry got in
/// place of a generated or partial one (`id`: its index and value), and an approximate trim
/// as the exact one it came to (`=` and the length left, or the first id left), without
/// LIMIT. Only options are rewritten: their order and everything else is kept.
fn exact_add_trim(
    args: &[&[u8]],
    id: Option<(usize, StreamId)>,
    approx: bool,
    s: &Stream,
) -> Vec<Bytes> {
    let mut v: Vec<Bytes> = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        if let Some((_, id)) = id.filter(|&(at, _)| at == i) {
            v.push(Bytes::from(id.to_bytes()));
            v.extend(args[i + 1..].iter().map(|a| Bytes::copy_from_slice(a)));
            break;
        }
        if approx && i >= 2 && (eq(a, "maxlen") || eq(a, "minid")) && i + 1 < args.len() {
            let skip = usize::from(args[i + 1] == b"~" || args[i + 1] == b"=");
            let first = s.edge(false).map(|e| e.id);
            match (eq(a, "minid"), first) {
                (true, Some(first)) => {
                    v.push(Bytes::copy_from_slice(a));
                    v.push(Bytes::from_static(b"="));
                    v.push(Bytes::from(first.to_bytes()));
                }
                _ => {
                    v.push(Bytes::from_static(b"MAXLEN"));
                    v.push(Bytes::from_static(b"="));
                    v.push(Bytes::from(s.len().to_string()));
                }
            }
            i += 2 + skip;
            continue;
        }
        if approx && i >= 2 && eq(a, "limit") && i + 1 < args.len() {
            i += 2;
            continue;
        }
        v.push(Bytes::copy_from_slice(a));
        i += 1;
    }
    v
}

fn xadd(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let lim = node_limits(ctx);
    let (opts, id_at) = match parse_add_trim(args, true, lim.max_entries) {
        Ok(v) => v,
        Err(e) => return w.error(e),
    };
    let fields = &args[(id_at + 1).min(args.len())..];
    if fields.len() < 2 || !fields.len().is_multiple_of(2) {
        return w.error(b"ERR wrong number of arguments for 'xadd' command");
    }
    if let Some(p) = opts.id {
        if p.seq_given && p.id == StreamId::MIN {
            return w.error(b"ERR The ID specified in XADD must be greater than 0-0");
        }
    }
    let key = args[1];
    let now = ctx.now_ms();
    let logging = ctx.propagating();
    let mut db = ctx.db();
    let s = if opts.nomkstream {
        match write(&mut db, key) {
            Ok(Some(s)) => s,
            Ok(None) => {
                unchanged(ctx);
                return w.null();
            }
            Err(WrongType) => return w.error(ERR_WRONGTYPE),
        }
    } else {
        match write_or_create(&mut db, key) {
            Ok(s) => s,
            Err(WrongType) => return w.error(ERR_WRONGTYPE),
        }
    };
    if s.last_id == StreamId::MAX {
        return w
            .error(b"ERR The stream has exhausted the last possible ID, unable to add more items");
    }
    let last = s.last_id;
    let id = match opts.id {
        None => {
            let ms = now.max(0) as u64;
            if ms > last.ms {
                Some(StreamId::new(ms, 0))
            } else {
                last.next()
            }
        }
        Some(p) if p.seq_given => Some(p.id),
        Some(p) if p.id.ms == last.ms => {
            if last.seq == u64::MAX {
                None
            } else {
                Some(StreamId::new(last.ms, last.seq + 1))
            }
        }
        Some(p) => Some(p.id),
    };
    // Above what the nodes hold too (XSETID ... MAXDELETEDID can move the last id below a
    // deleted entry's; Redis would then store an id out of order).
    let floor = s.stored_top().map_or(last, |t| t.max(last));
    let id =
        match id {
            Some(id) if id > floor => id,
            _ => return w.error(
                b"ERR The ID specified in XADD is equal or smaller than the target stream top item",
            ),
        };
    let pairs: Vec<(&[u8], &[u8])> = fields.chunks(2).map(|p| (p[0], p[1])).collect();
    s.append(id, &pairs, lim);
    write_id(w, id);
    let trimmed = match opts.trim {
        Some(t) => s.trim(t, opts.approx, opts.limit),
        None => 0,
    };
    let generated = !opts.id.is_some_and(|p| p.seq_given);
    let aof = (logging && (generated || opts.approx))
        .then(|| exact_add_trim(args, generated.then_some((id_at, id)), opts.approx, s));
    db.signal(key);
    if let Some(v) = aof {
        ctx.propagate(v);
    }
    notify(ctx, STREAM, "xadd", key);
    if trimmed > 0 {
        notify(ctx, STREAM, "xtrim", key);
    }
}

fn xtrim(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let lim = node_limits(ctx);
    // The options first: a missing key answers 0 only to a well-formed command.
    let opts = match parse_add_trim(args, false, lim.max_entries) {
        Ok((o, _)) => o,
        Err(e) => return w.error(e),
    };
    let key = args[1];
    let mut db = ctx.db();
    let s = match write(&mut db, key) {
        Ok(Some(s)) => s,
        Ok(None) => return w.int(0),
        Err(WrongType) => return w.error(ERR_WRONGTYPE),
    };
    let n = s.trim(opts.trim.expect("a strategy"), opts.approx, opts.limit);
    w.int(n as i64);
    let aof = (n > 0 && opts.approx).then(|| exact_add_trim(args, None, true, s));
    if n > 0 {
        db.signal(key);
        if let Some(v) = aof {
            ctx.propagate(v);
        }
        notify(ctx, STREAM, "xtrim", key);
    } else {
        ctx.propagate_nothing();
        ctx.unchanged_write();
    }
}

// ---- XLEN, XRANGE, XREVRANGE --------------------------------------------------------------------

fn xlen(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match read(&mut ctx.db(), args[1]) {
        Ok(s) => w.int(s.map_or(0, |s| s.len() as i64)),
        Err(WrongType) => w.error(ERR_WRONGTYPE),
    }
}

/// XRANGE / XREVRANGE's arguments: the inclusive id bounds and the COUNT (negative: none;
/// Redis takes a negative COUNT as 0).
pub struct RangeArgs {
    pub start: StreamId,
    pub end: StreamId,
    pub count: i64,
}

/// Parses XRANGE's (or, `rev`, XREVRANGE's) arguments after the key, with Redis's errors in
/// Redis's order. Shared by the handler and the streamed reply (stream.rs).
pub fn range_args(args: &[&[u8]], rev: bool) -> Result<RangeArgs, &'static [u8]> {
    let (start_arg, end_arg) = if rev {
        (args[3], args[2])
    } else {
        (args[2], args[3])
    };
    let start = match parse_interval(start_arg, 0)? {
        (id, false) => id,
        (id, true) => id
            .next()
            .ok_or(&b"ERR invalid start ID for the interval"[..])?,
    };
    let end = match parse_interval(end_arg, u64::MAX)? {
        (id, false) => id,
        (id, true) => id
            .prev()
            .ok_or(&b"ERR invalid end ID for the interval"[..])?,
    };
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if eq(args[j], "count") && j + 1 < args.len() {
            count = parse_ll(args[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(ERR_SYNTAX);
        }
    }
    Ok(RangeArgs { start, end, count })
}

fn range_generic(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter, rev: bool) {
    let RangeArgs { start, end, count } = match range_args(args, rev) {
        Ok(r) => r,
        Err(e) => return w.error(e),
    };
    let mut db = ctx.db();
    let s = match read(&mut db, args[1]) {
        Ok(Some(s)) => s,
        Ok(None) => return w.array(0),
        Err(WrongType) => return w.error(ERR_WRONGTYPE),
    };
    if count == 0 {
        return w.null_array();
    }
    let count = if count < 0 { 0 } else { count as usize };
    write_range(w, s, start, end, count, rev);
}

fn xrange(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    range_generic(ctx, args, w, false)
}

fn xrevrange(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    range_generic(ctx, args, w, true)
}

// ---- XDEL, XSETID ---------------------------------------------------------------------------------

fn xdel(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let key = args[1];
    let mut db = ctx.db();
    let s = match write(&mut db, key) {
        Ok(Some(s)) => s,
        Ok(None) => return w.int(0),
        Err(WrongType) => return w.error(ERR_WRONGTYPE),
    };
    let ids = match parse_strict_all(&args[2..]) {
        Ok(ids) => ids,
        Err(e) => return w.error(e),
    };
    let deleted = ids.into_iter().filter(|&id| s.delete(id)).count();
    w.int(deleted as i64);
    if deleted > 0 {
        db.signal(key);
        notify(ctx, STREAM, "xdel", key);
    } else {
        unchanged(ctx);
    }
}

fn xsetid(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let id = match parse_strict(args[2]) {
        Ok(id) => id,
        Err(e) => return w.error(e),
    };
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if eq(args[i], "entriesadded") && more > 0 {
            match parse_ll(args[i + 1]) {
                Ok(n) if n < 0 => return w.error(b"ERR entries_added must be positive"),
                Ok(n) => entries_added = Some(n as u64),
                Err(e) => return w.error(e),
            }
        } else if eq(args[i], "maxdeletedid") && more > 0 {
            match parse_strict(args[i + 1]) {
                Ok(m) if id < m => {
                    return w.error(
                        b"ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                    )
                }
                Ok(m) => max_deleted = m,
                Err(e) => return w.error(e),
            }
        } else {
            return w.error(ERR_SYNTAX);
        }
        i += 2;
    }
    let key = args[1];
    let mut db = ctx.db();
    let s = match write(&mut db, key) {
        Ok(Some(s)) => s,
        Ok(None) => return w.error(super::ERR_NO_SUCH_KEY),
        Err(WrongType) => return w.error(ERR_WRONGTYPE),
    };
    if id < s.max_deleted_id {
        return w
            .error(b"ERR The ID specified in XSETID is smaller than current max_deleted_entry_id");
    }
    if !s.is_empty() {
        let top = s.edge(true).map_or(StreamId::MIN, |e| e.id);
        if id < top {
            return w.error(
                b"ERR The ID specified in XSETID is smaller than the target stream top item",
            );
        }
        if entries_added.is_some_and(|n| s.len() > n) {
            return w.error(
                b"ERR The entries_added specified in XSETID is smaller than the target stream length",
            );
        }
    }
    s.last_id = id;
    if let Some(n) = entries_added {
        s.entries_added = n;
    }
    if max_deleted != StreamId::MIN {
        s.max_deleted_id = max_deleted;
    }
    db.signal(key);
    notify(ctx, STREAM, "xsetid", key);
    w.simple(b"OK");
}
