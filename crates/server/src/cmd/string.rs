//! String commands: GET/SET and friends, counters, ranges, MGET/MSET, LCS, and (in
//! `string/bits.rs`) the bitmap commands. Reply types, error texts and the order in which
//! errors are detected follow Redis 7.2's t_string.c and bitops.c.
//!
//! Encodings: OBJECT ENCODING derives "raw" from [`Entry::is_raw`]. Values written whole (SET,
//! GETSET, MSET, INCR*, APPEND to a new key) are stored non-raw, as Redis's
//! `tryObjectEncoding` would store them; values edited in place (APPEND, SETRANGE, SETBIT,
//! BITFIELD) or built by BITOP are raw, as Redis's `dbUnshareStringValue` / `createObject` make
//! them.

mod bits;
pub(super) mod ld;

use super::generic::by_shard;
use super::{Locks, Reg, TxFuture, ERR_NOT_FLOAT, ERR_NOT_INT, ERR_OVERFLOW, ERR_SYNTAX};
use crate::exec::Tx;
use crate::notify::{notify, GENERIC, STRING};
use crate::sched::Intents;
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_engine::{DbView, Entry, ValueType};
use darner_resp::ReplyWriter;
use std::sync::atomic::Ordering;

pub fn register(r: &mut Reg) {
    r.key("get", get);
    r.key("set", set);
    r.key("setnx", setnx);
    r.key("setex", setex);
    r.key("psetex", psetex);
    r.key("getset", getset);
    r.key("getdel", getdel);
    r.key("getex", getex);
    r.parts("mget", mget, mget_one_shard);
    r.parts("mset", mset, mset_one_shard);
    r.parts("msetnx", msetnx, msetnx_one_shard);
    r.key("append", append);
    r.key("strlen", strlen);
    r.key("getrange", getrange);
    r.key("substr", getrange);
    r.key("setrange", setrange);
    r.key("incr", incr);
    r.key("decr", decr);
    r.key("incrby", incrby);
    r.key("decrby", decrby);
    r.key("incrbyfloat", incrbyfloat);
    r.tx("lcs", Locks::Keys, lcs);
    bits::register(r);
}

const ERR_WRONGTYPE: &[u8] = super::ERR_WRONGTYPE;
const ERR_TOO_BIG: &[u8] = b"ERR string exceeds maximum allowed size (proto-max-bulk-len)";
/// The reply when growing a string within proto-max-bulk-len fails for memory (a
/// proto-max-bulk-len raised past what the machine holds). Redis aborts the process there.
const ERR_NO_MEMORY: &[u8] = b"ERR Insufficient memory, failed allocating the string";

/// Grows `s` to `len` bytes with zeros (SETRANGE, SETBIT, BITFIELD); false, with `s`
/// unchanged, when the memory cannot be had, so that the command answers [`ERR_NO_MEMORY`]
/// instead of the allocator aborting the server.
fn grow_zeroed(s: &mut Vec<u8>, len: usize) -> bool {
    if let Some(more) = len.checked_sub(s.len()) {
        if s.try_reserve_exact(more).is_err() {
            return false;
        }
        s.resize(len, 0);
    }
    true
}

// ---- shared helpers -------------------------------------------------------------------------

/// What Redis's C code sees of an argument it compares with `strcasecmp`: the bytes before
/// the first NUL.
fn cstr(a: &[u8]) -> &[u8] {
    match a.iter().position(|&c| c == 0) {
        Some(i) => &a[..i],
        None => a,
    }
}

/// Case-insensitive keyword match, C-string style.
fn kw(a: &[u8], word: &[u8]) -> bool {
    cstr(a).eq_ignore_ascii_case(word)
}

fn is_str(e: &Entry) -> bool {
    e.value_type() == ValueType::String
}

/// Redis's `proto-max-bulk-len`: the largest string value a command may build.
fn max_len(ctx: &ShardCtx) -> i64 {
    ctx.shared
        .config
        .hot
        .proto_max_bulk_len
        .load(Ordering::Relaxed)
}

/// Redis's `checkStringLength`: whether `size + append` bytes fit.
fn len_ok(ctx: &ShardCtx, size: u64, append: u64) -> bool {
    size.checked_add(append)
        .is_some_and(|t| t <= max_len(ctx).max(0) as u64)
}

/// A string entry edited in place from the start: raw, its bytes out of line (no copy of
/// `value`).
fn raw_entry(key: &[u8], value: Vec<u8>, expire: Option<i64>, clock: u16) -> Entry {
    let mut e = Entry::new_str(key, b"", expire, true, clock);
    *e.str_mut() = value;
    e
}

/// Writes `v` in decimal into `buf` (no allocation), returning the text.
fn itoa(v: i64, buf: &mut [u8; 24]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

// ---- SET and its option parser ---------------------------------------------------------------

const F_NX: u16 = 1;
const F_XX: u16 = 1 << 1;
const F_GET: u16 = 1 << 2;
const F_KEEPTTL: u16 = 1 << 3;
const F_PERSIST: u16 = 1 << 4;
const F_EX: u16 = 1 << 5;
const F_PX: u16 = 1 << 6;
const F_EXAT: u16 = 1 << 7;
const F_PXAT: u16 = 1 << 8;

/// Redis's `parseExtendedStringArgumentsOrReply` for SET (`is_set`) and GETEX: the flags and
/// the expire argument, or Err for a syntax error. Repeating an option is allowed (the last
/// value wins); conflicting ones are not.
fn parse_ext<'a>(
    args: &[&'a [u8]],
    from: usize,
    is_set: bool,
) -> Result<(u16, Option<&'a [u8]>), ()> {
    let mut flags = 0u16;
    let mut expire = None;
    let mut j = from;
    while j < args.len() {
        let opt = cstr(args[j]);
        let next = args.get(j + 1);
        let up = |s: &[u8]| opt.eq_ignore_ascii_case(s);
        if is_set && up(b"NX") && flags & F_XX == 0 {
            flags |= F_NX;
        } else if is_set && up(b"XX") && flags & F_NX == 0 {
            flags |= F_XX;
        } else if is_set && up(b"GET") {
            flags |= F_GET;
        } else if is_set
            && up(b"KEEPTTL")
            && flags & (F_PERSIST | F_EX | F_EXAT | F_PX | F_PXAT) == 0
        {
            flags |= F_KEEPTTL;
        } else if !is_set
            && up(b"PERSIST")
            && flags & (F_EX | F_EXAT | F_PX | F_PXAT | F_KEEPTTL) == 0
        {
            flags |= F_PERSIST;
        } else if let (true, Some(n)) = (up(b"EX"), next) {
            if flags & (F_KEEPTTL | F_PERSIST | F_EXAT | F_PX | F_PXAT) != 0 {
                return Err(());
            }
            flags |= F_EX;
            expire = Some(n);
            j += 1;
        } else if let (true, Some(n)) = (up(b"PX"), next) {
            if flags & (F_KEEPTTL | F_PERSIST | F_EX | F_EXAT | F_PXAT) != 0 {
                return Err(());
            }
            flags |= F_PX;
            expire = Some(n);
            j += 1;
        } else if let (true, Some(n)) = (up(b"EXAT"), next) {
            if flags & (F_KEEPTTL | F_PERSIST | F_EX | F_PX | F_PXAT) != 0 {
                return Err(());
            }
            flags |= F_EXAT;
            expire = Some(n);
            j += 1;
        } else if let (true, Some(n)) = (up(b"PXAT"), next) {
            if flags & (F_KEEPTTL | F_PERSIST | F_EX | F_EXAT | F_PX) != 0 {
                return Err(());
            }
            flags |= F_PXAT;
            expire = Some(n);
            j += 1;
        } else {
            return Err(());
        }
        j += 1;
    }
    Ok((flags, expire.copied()))
}

/// Redis's `getExpireMillisecondsOrReply`: the absolute expiry in unix ms, or the error text.
/// `invalid` is the command's "invalid expire time" error.
fn expire_at(
    arg: &[u8],
    flags: u16,
    now: i64,
    invalid: &'static [u8],
) -> Result<i64, &'static [u8]> {
    let v = super::parse_int(arg).ok_or(ERR_NOT_INT)?;
    let seconds = flags & (F_EX | F_EXAT) != 0;
    if v <= 0 || (seconds && v > i64::MAX / 1000) {
        return Err(invalid);
    }
    let mut ms = if seconds { v * 1000 } else { v };
    if flags & (F_EX | F_PX) != 0 {
        // Redis adds and checks the sign of the (wrapped) sum: an overflow is invalid.
        ms = ms.checked_add(now).ok_or(invalid)?;
    }
    if ms <= 0 {
        return Err(invalid);
    }
    Ok(ms)
}

fn get(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match ctx.db().get(args[1]) {
        None => w.null(),
        Some(e) if !is_str(e) => w.error(ERR_WRONGTYPE),
        Some(e) => w.bulk(e.str_value()),
    }
}

fn set(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    if args.len() == 3 {
        // The hot path: no options, nothing to parse.
        ctx.db().set_str(args[1], args[2], None);
        notify(ctx, STRING, "set", args[1]);
        return w.ok();
    }
    let Ok((flags, expire)) = parse_ext(args, 3, true) else {
        return w.error(ERR_SYNTAX);
    };
    set_generic(
        ctx,
        flags,
        args[1],
        args[2],
        expire,
        b"ERR invalid expire time in 'set' command",
        w,
    );
}

/// Redis's `setGenericCommand`: replies OK (or, with GET, the old value) when it set the key,
/// a null when NX/XX prevented it.
fn set_generic(
    ctx: &mut ShardCtx,
    flags: u16,
    key: &[u8],
    value: &[u8],
    expire: Option<&[u8]>,
    invalid: &'static [u8],
    w: &mut ReplyWriter,
) {
    let now = ctx.now_ms();
    let when = match expire {
        None => None,
        Some(a) => match expire_at(a, flags, now, invalid) {
            Ok(ms) => Some(ms),
            Err(e) => return w.error(e),
        },
    };
    let mut db = ctx.db();
    let found = if flags & F_GET != 0 {
        match db.get(key) {
            None => {
                w.null();
                false
            }
            Some(e) if !is_str(e) => return w.error(ERR_WRONGTYPE),
            Some(e) => {
                w.bulk(e.str_value());
                true
            }
        }
    } else {
        db.exists(key)
    };
    if (flags & F_NX != 0 && found) || (flags & F_XX != 0 && !found) {
        if flags & F_GET == 0 {
            w.null();
        }
        ctx.propagate_nothing();
        return;
    }
    let ttl = if flags & F_KEEPTTL != 0 {
        db.expire_of(key).flatten()
    } else {
        when
    };
    db.set_str(key, value, ttl);
    if let (Some(at), true) = (when, flags & F_PXAT == 0 && ctx.propagating()) {
        // A TTL other than PXAT's is written as `SET key value PXAT <ms>` (Redis 7.2: the
        // other options are spent, the key is set), which replays the same at any time.
        let mut v = super::argv(&[b"SET", key, value, b"PXAT"]);
        v.push(super::num_arg(at));
        ctx.propagate(v);
    }
    notify(ctx, STRING, "set", key);
    if when.is_some() {
        notify(ctx, GENERIC, "expire", key);
    }
    if flags & F_GET == 0 {
        w.ok();
    }
}

fn setnx(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    if db.exists(args[1]) {
        return w.int(0);
    }
    db.set_str(args[1], args[2], None);
    notify(ctx, STRING, "set", args[1]);
    w.int(1);
}

fn setex(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    set_generic(
        ctx,
        F_EX,
        args[1],
        args[3],
        Some(args[2]),
        b"ERR invalid expire time in 'setex' command",
        w,
    );
}

fn psetex(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    set_generic(
        ctx,
        F_PX,
        args[1],
        args[3],
        Some(args[2]),
        b"ERR invalid expire time in 'psetex' command",
        w,
    );
}

fn getset(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    match db.get(args[1]) {
        None => w.null(),
        Some(e) if !is_str(e) => return w.error(ERR_WRONGTYPE),
        Some(e) => w.bulk(e.str_value()),
    }
    db.set_str(args[1], args[2], None);
    // Written as SET (Redis 7.2).
    ctx.propagate_args(&[b"SET", args[1], args[2]]);
    notify(ctx, STRING, "set", args[1]);
}

fn getdel(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    match db.get(args[1]) {
        None => {
            ctx.propagate_nothing();
            return w.null();
        }
        Some(e) if !is_str(e) => return w.error(ERR_WRONGTYPE),
        Some(e) => w.bulk(e.str_value()),
    }
    db.delete(args[1]);
    // Written as DEL (Redis 7.2).
    ctx.propagate_args(&[b"DEL", args[1]]);
    notify(ctx, GENERIC, "del", args[1]);
}

fn getex(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let Ok((flags, expire)) = parse_ext(args, 2, false) else {
        return w.error(ERR_SYNTAX);
    };
    let now = ctx.now_ms();
    let key = &args[1];
    let mut db = ctx.db();
    // Redis looks the key up before it validates the expire time.
    let e = match db.get(key) {
        None => {
            ctx.propagate_nothing();
            return w.null();
        }
        Some(e) if !is_str(e) => return w.error(ERR_WRONGTYPE),
        Some(e) => e,
    };
    let when = match expire {
        None => None,
        Some(a) => match expire_at(a, flags, now, b"ERR invalid expire time in 'getex' command") {
            Ok(ms) => Some(ms),
            Err(e) => return w.error(e),
        },
    };
    w.bulk(e.str_value());
    // What is written: DEL for a key a past time deleted, PEXPIREAT for a TTL set, PERSIST
    // for one removed, nothing for a plain read (Redis 7.2).
    if let Some(ms) = when {
        // An absolute time already past deletes the key (set_expire does that), but on a
        // replica, where the key waits for its primary's DEL.
        let gone = ms <= now && !db.expiry_held();
        db.set_expire(key, Some(ms));
        if gone {
            ctx.propagate_args(&[b"DEL", key]);
        } else if ctx.propagating() {
            let mut v = super::argv(&[b"PEXPIREAT", key]);
            v.push(super::num_arg(ms));
            ctx.propagate(v);
        }
        let event = if gone { "del" } else { "expire" };
        notify(ctx, GENERIC, event, key);
    } else if flags & F_PERSIST != 0 && db.expire_of(key).flatten().is_some() {
        db.set_expire(key, None);
        ctx.propagate_args(&[b"PERSIST", key]);
        notify(ctx, GENERIC, "persist", key);
    } else {
        ctx.propagate_nothing();
    }
}

// ---- MGET / MSET / MSETNX -------------------------------------------------------------------

fn mget(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let keys = &args[1..];
        let groups = by_shard(&tx, keys);
        if groups.len() == 1 {
            // All keys on one shard: it writes the whole reply.
            let ks: Vec<Bytes> = keys.to_vec();
            let intents = Intents::of_reads(&ks, tx.tracks_reads());
            return tx
                .run_parts(vec![(groups[0].0, intents, move |ctx: &mut ShardCtx| {
                    ctx.prefetch(&ks);
                    let mut out = Vec::new();
                    let resp3 = ctx.resp3;
                    let mut db = ctx.db();
                    let mut w = ReplyWriter::new(&mut out, resp3);
                    w.array(ks.len());
                    for k in &ks {
                        match db.get(k) {
                            Some(e) if is_str(e) => w.bulk(e.str_value()),
                            _ => w.null(),
                        }
                    }
                    out
                })])
                .await
                .pop()
                .unwrap_or_default();
        }
        // Each shard encodes its keys' replies into one buffer and says where each ends. The
        // keys move into the parts (the reply is assembled by position).
        let nkeys = keys.len();
        let mut args = args;
        let plan: Vec<_> = groups
            .iter()
            .map(|(s, idx)| {
                let ks: Vec<Bytes> = idx
                    .iter()
                    .map(|&i| std::mem::take(&mut args[1 + i]))
                    .collect();
                let intents = Intents::of_reads(&ks, tx.tracks_reads());
                (*s, intents, move |ctx: &mut ShardCtx| mget_part(ctx, &ks))
            })
            .collect();
        let mut parts: Vec<(usize, usize, usize)> = vec![(0, 0, 0); nkeys];
        let mut bufs = Vec::with_capacity(groups.len());
        for (g, (buf, ends)) in tx.run_parts(plan).await.into_iter().enumerate() {
            let mut start = 0;
            for (j, &i) in groups[g].1.iter().enumerate() {
                parts[i] = (g, start, ends[j]);
                start = ends[j];
            }
            bufs.push(buf);
        }
        let total: usize = bufs.iter().map(Vec::len).sum();
        let mut out = Vec::with_capacity(total + 16);
        ReplyWriter::new(&mut out, tx.resp3()).array(nkeys);
        for (g, s, e) in parts {
            out.extend_from_slice(&bufs[g][s..e]);
        }
        out
    })
}

/// One shard's share of a multi-shard MGET: each key's reply, encoded one after the other,
/// and where each ends (the coordinator assembles the array by key position). Shared by the
/// transaction form and the direct path of a plain MGET (worker/direct.rs).
pub fn mget_part(ctx: &mut ShardCtx, ks: &[Bytes]) -> (Vec<u8>, Vec<usize>) {
    ctx.prefetch(ks);
    let mut buf = Vec::with_capacity(ks.len() * 40);
    let mut ends = Vec::with_capacity(ks.len());
    let resp3 = ctx.resp3;
    let mut db = ctx.db();
    let mut w = ReplyWriter::new(&mut buf, resp3);
    for k in ks {
        match db.get(k) {
            Some(e) if is_str(e) => w.bulk(e.str_value()),
            _ => w.null(),
        }
        ends.push(w.out.len());
    }
    (buf, ends)
}

/// One shard's share of a multi-shard MSET: its pairs set in order (clearing TTLs, as SET
/// does). Shared by the transaction form and the direct path (worker/direct.rs).
pub fn mset_part(ctx: &mut ShardCtx, pairs: &[(Bytes, Bytes)]) {
    let keys: smallvec::SmallVec<[&Bytes; 16]> = pairs.iter().map(|(k, _)| k).collect();
    ctx.prefetch(&keys);
    for (k, v) in pairs {
        ctx.db().set_str(k, v, None);
        notify(ctx, STRING, "set", k);
    }
}

/// One shard's share of an MSET: its shard, its keys' intents, its pairs.
type PairsPart = (usize, Intents, Vec<(Bytes, Bytes)>);

/// Sets the pairs `args[1..]` (MSET's), one one-shot part per shard. The arguments move into
/// the parts, none copied: each part owns its pairs, and the intents only fingerprints.
async fn set_pairs(tx: &Tx, args: Vec<Bytes>) {
    let shards: smallvec::SmallVec<[usize; 16]> = args[1..]
        .iter()
        .step_by(2)
        .map(|k| tx.shard_of(k))
        .collect();
    let mut parts: smallvec::SmallVec<[PairsPart; 4]> = smallvec::SmallVec::new();
    let mut rest = args.into_iter().skip(1);
    for (n, &s) in shards.iter().enumerate() {
        let (Some(k), Some(v)) = (rest.next(), rest.next()) else {
            break;
        };
        let i = match parts.iter().position(|p| p.0 == s) {
            Some(i) => i,
            None => {
                // Sized once for this shard's pairs: growing them pair by pair was a few
                // reallocations per part, a visible share of a cross-shard MSET's CPU.
                let here = shards[n..].iter().filter(|&&t| t == s).count();
                let mut intents = Intents::default();
                intents.keys.reserve_exact(here);
                parts.push((s, intents, Vec::with_capacity(here)));
                parts.len() - 1
            }
        };
        parts[i].1.push(&k, true);
        parts[i].2.push((k, v));
    }
    let plan: Vec<_> = parts
        .into_iter()
        .map(|(s, mut intents, pairs)| {
            intents.normalize();
            (s, intents, move |ctx: &mut ShardCtx| mset_part(ctx, &pairs))
        })
        .collect();
    tx.run_parts(plan).await;
}

fn mset_arity_ok(args: &[Bytes]) -> bool {
    args.len() % 2 == 1
}

// The single-shard forms (every key on one shard: inline or batched like GET, no transaction).

fn mget_one_shard(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let keys = &args[1..];
    ctx.prefetch(keys);
    w.array(keys.len());
    let mut db = ctx.db();
    for k in keys {
        match db.get(k) {
            Some(e) if is_str(e) => w.bulk(e.str_value()),
            _ => w.null(),
        }
    }
}

fn set_pairs_here(ctx: &mut ShardCtx, args: &[&[u8]]) {
    let keys: smallvec::SmallVec<[&[u8]; 16]> = args[1..].iter().step_by(2).copied().collect();
    ctx.prefetch(&keys);
    for pair in args[1..].chunks_exact(2) {
        ctx.db().set_str(pair[0], pair[1], None);
        notify(ctx, STRING, "set", pair[0]);
    }
}

fn mset_one_shard(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    if args.len().is_multiple_of(2) {
        return w.error(b"ERR wrong number of arguments for 'mset' command");
    }
    set_pairs_here(ctx, args);
    w.ok();
}

fn msetnx_one_shard(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    if args.len().is_multiple_of(2) {
        return w.error(b"ERR wrong number of arguments for 'msetnx' command");
    }
    let mut db = ctx.db();
    if args[1..].iter().step_by(2).any(|k| db.exists(k)) {
        return w.int(0);
    }
    set_pairs_here(ctx, args);
    w.int(1);
}

fn mset(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        if !mset_arity_ok(&args) {
            return super::with_writer(resp3, |w| {
                w.error(b"ERR wrong number of arguments for 'mset' command")
            });
        }
        set_pairs(&tx, args).await;
        super::with_writer(resp3, |w| w.ok())
    })
}

fn msetnx(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        if !mset_arity_ok(&args) {
            return super::with_writer(resp3, |w| {
                w.error(b"ERR wrong number of arguments for 'msetnx' command")
            });
        }
        // The check comes with the reservation, which keeps its answer true until the writes.
        let keys: Vec<Bytes> = args[1..].iter().step_by(2).cloned().collect();
        let checks: Vec<_> = by_shard(&tx, &keys)
            .into_iter()
            .map(|(s, idx)| {
                let ks: Vec<Bytes> = idx.iter().map(|&i| keys[i].clone()).collect();
                let intents = Intents::of_keys(&ks, true);
                (s, intents, move |ctx: &mut ShardCtx| {
                    let mut db = ctx.db();
                    ks.iter().any(|k| db.exists(k))
                })
            })
            .collect();
        let any = tx.reserve_then(checks).await.into_iter().any(|x| x);
        if any {
            return super::with_writer(resp3, |w| w.int(0));
        }
        set_pairs(&tx, args).await;
        super::with_writer(resp3, |w| w.int(1))
    })
}

// ---- APPEND, STRLEN, GETRANGE, SETRANGE ------------------------------------------------------

fn append(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let (key, val) = (&args[1], &args[2]);
    let cur = match ctx.db().peek(key) {
        None => None,
        Some(e) if !is_str(e) => return w.error(ERR_WRONGTYPE),
        Some(e) => Some(e.str_value().len()),
    };
    match cur {
        None => {
            // A new key stores the argument as SET would (not raw).
            ctx.db().set_str(key, val, None);
            notify(ctx, STRING, "append", key);
            w.int(val.len() as i64);
        }
        Some(len) => {
            if !len_ok(ctx, len as u64, val.len() as u64) {
                return w.error(ERR_TOO_BIG);
            }
            let mut db = ctx.db();
            let Some(e) = db.get_mut(key) else {
                return w.error(ERR_WRONGTYPE); // unreachable: checked above
            };
            let s = e.str_mut();
            s.extend_from_slice(val);
            w.int(s.len() as i64);
            notify(ctx, STRING, "append", key);
        }
    }
}

fn strlen(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match ctx.db().get(args[1]) {
        None => w.int(0),
        Some(e) if !is_str(e) => w.error(ERR_WRONGTYPE),
        Some(e) => w.int(e.str_value().len() as i64),
    }
}

fn getrange(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let (Some(mut start), Some(mut end)) = (super::parse_int(args[2]), super::parse_int(args[3]))
    else {
        return w.error(ERR_NOT_INT);
    };
    let mut db = ctx.db();
    let s = match db.get(args[1]) {
        None => return w.bulk(b""),
        Some(e) if !is_str(e) => return w.error(ERR_WRONGTYPE),
        Some(e) => e.str_value(),
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return w.bulk(b"");
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        w.bulk(b"");
    } else {
        w.bulk(&s[start as usize..=end as usize]);
    }
}

fn setrange(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let (key, val) = (&args[1], &args[3]);
    let Some(offset) = super::parse_int(args[2]) else {
        return w.error(ERR_NOT_INT);
    };
    if offset < 0 {
        return w.error(b"ERR offset is out of range");
    }
    let offset = offset as u64;
    let lru = ctx.clock.lru;
    let cur = match ctx.db().peek(key) {
        None => None,
        Some(e) if !is_str(e) => return w.error(ERR_WRONGTYPE),
        Some(e) => Some(e.str_value().len()),
    };
    if val.is_empty() {
        // Nothing to write: the current length, and no modification at all.
        ctx.unchanged_write();
        return w.int(cur.unwrap_or(0) as i64);
    }
    if !len_ok(ctx, offset, val.len() as u64) {
        return w.error(ERR_TOO_BIG);
    }
    let (off, end) = (offset as usize, offset as usize + val.len());
    match cur {
        None => {
            let mut v = Vec::new();
            if !grow_zeroed(&mut v, end) {
                return w.error(ERR_NO_MEMORY);
            }
            v[off..].copy_from_slice(val);
            ctx.db().set(raw_entry(key, v, None, lru));
            notify(ctx, STRING, "setrange", key);
            w.int(end as i64);
        }
        Some(_) => {
            let mut db = ctx.db();
            let Some(e) = db.get_mut(key) else {
                return w.error(ERR_WRONGTYPE); // unreachable: checked above
            };
            let s = e.str_mut();
            if !grow_zeroed(s, end) {
                return w.error(ERR_NO_MEMORY);
            }
            s[off..end].copy_from_slice(val);
            w.int(s.len() as i64);
            notify(ctx, STRING, "setrange", key);
        }
    }
}

// ---- counters -------------------------------------------------------------------------------

/// The current value of a counter and its TTL, or the error to reply.
fn counter(db: &mut DbView, key: &[u8]) -> Result<(Option<i64>, Option<i64>), &'static [u8]> {
    match db.peek(key) {
        None => Ok((None, None)),
        Some(e) if !is_str(e) => Err(ERR_WRONGTYPE),
        Some(e) => match super::parse_int(e.str_value()) {
            Some(v) => Ok((Some(v), e.expire())),
            None => Err(ERR_NOT_INT),
        },
    }
}

fn incr_by(ctx: &mut ShardCtx, key: &[u8], by: i64, w: &mut ReplyWriter) {
    let mut db = ctx.db();
    let (old, ttl) = match counter(&mut db, key) {
        Ok(x) => x,
        Err(e) => return w.error(e),
    };
    let Some(new) = old.unwrap_or(0).checked_add(by) else {
        return w.error(ERR_OVERFLOW);
    };
    let mut buf = [0u8; 24];
    // The value is replaced (keeping its TTL), as Redis's dbReplaceValue does.
    db.set_str(key, itoa(new, &mut buf), ttl);
    notify(ctx, STRING, "incrby", key);
    w.int(new);
}

fn incr(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    incr_by(ctx, args[1], 1, w);
}

fn decr(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    incr_by(ctx, args[1], -1, w);
}

fn incrby(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match super::parse_int(args[2]) {
        None => w.error(ERR_NOT_INT),
        Some(by) => incr_by(ctx, args[1], by, w),
    }
}

fn decrby(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match super::parse_int(args[2]) {
        None => w.error(ERR_NOT_INT),
        Some(i64::MIN) => w.error(b"ERR decrement would overflow"),
        Some(by) => incr_by(ctx, args[1], -by, w),
    }
}

fn incrbyfloat(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let key = &args[1];
    let lru = ctx.clock.lru;
    let mut db = ctx.db();
    let (cur, ttl) = match db.peek(key) {
        None => (ld::Ld::Zero(false), None),
        Some(e) if !is_str(e) => return w.error(ERR_WRONGTYPE),
        Some(e) => match ld::parse(e.str_value()) {
            Some(v) => (v, e.expire()),
            None => return w.error(ERR_NOT_FLOAT),
        },
    };
    let Some(by) = ld::parse(args[2]) else {
        return w.error(ERR_NOT_FLOAT);
    };
    let sum = ld::add(cur, by);
    if matches!(sum, ld::Ld::Inf(_) | ld::Ld::Nan) {
        return w.error(b"ERR increment would produce NaN or Infinity");
    }
    let mut text = Vec::with_capacity(32);
    ld::format(sum, &mut text);
    // Redis stores INCRBYFLOAT's result as a plain string: never int-encoded.
    let mut e = Entry::new_str(key, &text, ttl, false, lru);
    e.mark_not_int();
    db.set(e);
    // Written as `SET key <result> KEEPTTL` (Redis 7.2): float arithmetic may differ where
    // the log is replayed.
    ctx.propagate_args(&[b"SET", key, &text, b"KEEPTTL"]);
    notify(ctx, STRING, "incrbyfloat", key);
    // A bulk string in RESP3 too: Redis replies with the stored text.
    w.bulk(&text);
}

// ---- fetching values for multi-key commands ------------------------------------------------

/// A key's value as a multi-key command reads it.
enum Fetched {
    Missing,
    WrongType,
    Str(Vec<u8>),
}

/// Reads `keys` (one hop per shard, in parallel) and returns their values in key order.
async fn fetch_strings(tx: &Tx, keys: &[Bytes]) -> Vec<Fetched> {
    let groups = by_shard(tx, keys);
    let hops: Vec<_> = groups
        .iter()
        .map(|(s, idx)| {
            let ks: Vec<Bytes> = idx.iter().map(|&i| keys[i].clone()).collect();
            tx.run(*s, move |ctx| {
                let mut db = ctx.db();
                ks.iter()
                    .map(|k| match db.get(k) {
                        None => Fetched::Missing,
                        Some(e) if !is_str(e) => Fetched::WrongType,
                        Some(e) => Fetched::Str(e.str_value().to_vec()),
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut out: Vec<Fetched> = (0..keys.len()).map(|_| Fetched::Missing).collect();
    for (g, hop) in hops.into_iter().enumerate() {
        for (v, &i) in hop.await.into_iter().zip(&groups[g].1) {
            out[i] = v;
        }
    }
    out
}

// ---- LCS ------------------------------------------------------------------------------------

fn lcs(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let max = tx
            .shared()
            .config
            .hot
            .proto_max_bulk_len
            .load(Ordering::Relaxed);
        let vals = fetch_strings(&tx, &args[1..3]).await;
        let mut it = vals.into_iter().map(|v| match v {
            Fetched::Missing => Ok(Vec::new()),
            Fetched::WrongType => Err(()),
            Fetched::Str(s) => Ok(s),
        });
        let (Some(Ok(a)), Some(Ok(b))) = (it.next(), it.next()) else {
            return super::with_writer(resp3, |w| {
                w.error(b"ERR The specified keys must contain string values")
            });
        };
        super::with_writer(resp3, |w| lcs_reply(&a, &b, &args, max, w))
    })
}

fn lcs_reply(a: &[u8], b: &[u8], args: &[Bytes], max: i64, w: &mut ReplyWriter) {
    let (mut getlen, mut getidx, mut withmatchlen) = (false, false, false);
    let mut minmatchlen: i64 = 0;
    let mut j = 3;
    while j < args.len() {
        let opt = &args[j];
        let more = j + 1 < args.len();
        if kw(opt, b"IDX") {
            getidx = true;
        } else if kw(opt, b"LEN") {
            getlen = true;
        } else if kw(opt, b"WITHMATCHLEN") {
            withmatchlen = true;
        } else if kw(opt, b"MINMATCHLEN") && more {
            match super::parse_int(&args[j + 1]) {
                None => return w.error(ERR_NOT_INT),
                Some(v) => minmatchlen = v.max(0),
            }
            j += 1;
        } else {
            return w.error(ERR_SYNTAX);
        }
        j += 1;
    }
    if getidx && getlen {
        return w.error(b"ERR If you want both the length and indexes, please just use IDX.");
    }
    if a.len() as u64 >= u32::MAX as u64 - 1 || b.len() as u64 >= u32::MAX as u64 - 1 {
        return w.error(b"ERR String too long for LCS");
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    if cells.saturating_mul(4) > max.max(0) as u64 {
        return w.error(
            b"ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        );
    }
    let mut table: Vec<u32> = Vec::new();
    if table.try_reserve_exact(cells as usize).is_err() {
        return w.error(b"ERR Insufficient memory, failed allocating transient memory for LCS");
    }
    table.resize(cells as usize, 0);
    let at = |i: usize, j: usize| j + i * (blen + 1);
    for i in 1..=alen {
        for j in 1..=blen {
            table[at(i, j)] = if a[i - 1] == b[j - 1] {
                table[at(i - 1, j - 1)] + 1
            } else {
                table[at(i - 1, j)].max(table[at(i, j - 1)])
            };
        }
    }
    let total = table[at(alen, blen)];
    let mut idx = total as usize;
    let computelcs = getidx || !getlen;
    let mut result = if computelcs {
        vec![0u8; idx]
    } else {
        Vec::new()
    };
    // Matches, collected as Redis emits them (from the end of the strings backwards).
    let mut matches: Vec<[u32; 5]> = Vec::new();
    let (mut arange_start, mut arange_end, mut brange_start, mut brange_end) =
        (alen as u32, 0u32, 0u32, 0u32);
    let (mut i, mut j) = (alen, blen);
    while computelcs && i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            if arange_start == alen as u32 {
                arange_start = (i - 1) as u32;
                arange_end = (i - 1) as u32;
                brange_start = (j - 1) as u32;
                brange_end = (j - 1) as u32;
            } else if arange_start == i as u32 && brange_start == j as u32 {
                arange_start -= 1;
                brange_start -= 1;
            } else {
                emit = true;
            }
            if arange_start == 0 || brange_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table[at(i - 1, j)] > table[at(i, j - 1)] {
                i -= 1;
            } else {
                j -= 1;
            }
            if arange_start != alen as u32 {
                emit = true;
            }
        }
        let match_len = arange_end.wrapping_sub(arange_start).wrapping_add(1);
        if emit {
            if getidx && (minmatchlen == 0 || match_len as i64 >= minmatchlen) {
                matches.push([
                    arange_start,
                    arange_end,
                    brange_start,
                    brange_end,
                    match_len,
                ]);
            }
            arange_start = alen as u32;
        }
    }
    if getidx {
        w.map(2);
        w.bulk(b"matches");
        w.array(matches.len());
        for m in &matches {
            w.array(if withmatchlen { 3 } else { 2 });
            w.array(2);
            w.int(m[0] as i64);
            w.int(m[1] as i64);
            w.array(2);
            w.int(m[2] as i64);
            w.int(m[3] as i64);
            if withmatchlen {
                w.int(m[4] as i64);
            }
        }
        w.bulk(b"len");
        w.int(total as i64);
    } else if getlen {
        w.int(idx as i64);
    } else {
        w.bulk(&result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcs_of(a: &[u8], b: &[u8], opts: &[&str], resp3: bool) -> Vec<u8> {
        let mut args: Vec<Bytes> = vec!["LCS".into(), "a".into(), "b".into()];
        args.extend(opts.iter().map(|o| Bytes::from(o.to_string())));
        let mut out = Vec::new();
        lcs_reply(
            a,
            b,
            &args,
            512 << 20,
            &mut ReplyWriter::new(&mut out, resp3),
        );
        out
    }

    #[test]
    fn lcs_reply_shapes_match_redis() {
        // Replies captured from redis-server for ohmytext / mynewtext.
        let (a, b) = (&b"ohmytext"[..], &b"mynewtext"[..]);
        assert_eq!(lcs_of(a, b, &[], true), b"$6\r\nmytext\r\n");
        assert_eq!(lcs_of(a, b, &["LEN"], true), b":6\r\n");
        assert_eq!(
            lcs_of(a, b, &["IDX"], true),
            &b"%2\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n"[..]
        );
        assert_eq!(
            lcs_of(a, b, &["IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"], true),
            &b"%2\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n"[..]
        );
        assert_eq!(
            lcs_of(a, b, &["IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"], false),
            &b"*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n"[..]
        );
        assert_eq!(
            lcs_of(b"", b"", &["IDX"], true),
            b"%2\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n"
        );
        // The transient table is bounded by proto-max-bulk-len.
        let mut out = Vec::new();
        let args: Vec<Bytes> = vec!["LCS".into(), "a".into(), "b".into()];
        lcs_reply(
            &[1; 100],
            &[2; 100],
            &args,
            1000,
            &mut ReplyWriter::new(&mut out, false),
        );
        assert_eq!(
            out,
            b"-ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len\r\n"
        );
    }

    #[test]
    fn set_option_parser() {
        let ok = |s: &str, set: bool| {
            let args: Vec<&[u8]> = s.split(' ').map(|x| x.as_bytes()).collect();
            parse_ext(&args, 3, set).map(|(f, e)| (f, e.map(<[u8]>::to_vec)))
        };
        assert_eq!(ok("SET k v", true), Ok((0, None)));
        assert_eq!(
            ok("SET k v nx get px 5", true),
            Ok((F_NX | F_GET | F_PX, Some(b"5".to_vec())))
        );
        assert_eq!(
            ok("SET k v EX 1 EX 2", true),
            Ok((F_EX, Some(b"2".to_vec())))
        );
        assert!(ok("SET k v NX XX", true).is_err());
        assert!(ok("SET k v KEEPTTL EX 1", true).is_err());
        assert!(ok("SET k v EX", true).is_err());
        assert!(ok("SET k v PERSIST", true).is_err());
        assert_eq!(ok("GETEX k x PERSIST", false), Ok((F_PERSIST, None)));
        assert!(ok("GETEX k x NX", false).is_err());
        assert_eq!(expire_at(b"10", F_EX, 1000, b"bad"), Ok(11_000));
        assert_eq!(expire_at(b"10", F_PXAT, 1000, b"bad"), Ok(10));
        assert_eq!(expire_at(b"0", F_PX, 1000, b"bad"), Err(&b"bad"[..]));
        assert_eq!(expire_at(b"x", F_PX, 1000, b"bad"), Err(ERR_NOT_INT));
        assert_eq!(
            expire_at(b"9223372036854775807", F_PX, 1, b"bad"),
            Err(&b"bad"[..])
        );
        let mut buf = [0u8; 24];
        assert_eq!(itoa(i64::MIN, &mut buf), b"-9223372036854775808");
        assert_eq!(itoa(0, &mut buf), b"0");
        assert_eq!(itoa(42, &mut buf), b"42");
    }
}
