//! The set commands (Redis's t_set.c): SADD, SREM, SCARD, SISMEMBER, SMISMEMBER, SMEMBERS,
//! SRANDMEMBER, SPOP, SSCAN on one key, and the multi-key SMOVE, SINTER, SINTERCARD,
//! SINTERSTORE, SUNION, SUNIONSTORE, SDIFF, SDIFFSTORE.
//!
//! The multi-key commands are `Tx` handlers locking their keys' shards. When every key lives
//! on one shard (the common case, and always with {hash tags}) one hop does the whole command
//! on borrowed sets. Across shards, SINTER/SINTERCARD/SDIFF copy only their base set (the
//! smallest, or the first) and ask the other shards which of its members they hold; SUNION
//! gathers copies of every set. The result is computed here and one more hop stores it.
//! Result encodings follow Redis 7.2 (see darner_engine::types::set): that is why results
//! are built through `Set::insert`, in the order Redis adds their members.
//!
//! Member TTLs (Dragonfly's SADDEX; FIELDTTL and FIELDEXPIRE in field_ttl.rs): the database
//! removes a set's expired members before any command sees the set, and deletes the key with
//! its last member (darner_engine::db), so no command here checks TTLs. Results built from
//! members (the *STORE forms, SMOVE's destination) carry no TTLs, as in Dragonfly; SPOP keeps
//! the TTLs of the members it leaves.

#[path = "field_ttl.rs"]
mod field_ttl;

use super::{Locks, Reg, TxFuture, ERR_NOT_INT, ERR_SYNTAX, ERR_WRONGTYPE};
use crate::exec::Tx;
use crate::notify::{notify, GENERIC, SET};
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_engine::types::{Limits, Set};
use darner_engine::{glob_match, Entry, Value, ValueRef};
use darner_resp::ReplyWriter;
use std::collections::{HashMap, HashSet};

pub fn register(r: &mut Reg) {
    r.key("sadd", sadd);
    r.key("srem", srem);
    r.key("scard", scard);
    r.key("sismember", sismember);
    r.key("smismember", smismember);
    r.key("smembers", smembers);
    r.key("srandmember", srandmember);
    r.key("spop", spop);
    r.key("sscan", sscan);
    r.tx("smove", Locks::Keys, smove);
    r.tx("sinter", Locks::Keys, sinter);
    r.tx("sintercard", Locks::Keys, sintercard);
    r.tx("sinterstore", Locks::Keys, sinterstore);
    r.tx("sunion", Locks::Keys, sunion);
    r.tx("sunionstore", Locks::Keys, sunionstore);
    r.tx("sdiff", Locks::Keys, sdiff);
    r.tx("sdiffstore", Locks::Keys, sdiffstore);
    r.key("saddex", saddex);
    field_ttl::register(r);
}

const ERR_POSITIVE: &[u8] = b"ERR value is out of range, must be positive";
const ERR_RANDOM_RANGE: &[u8] =
    b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
const ERR_INVALID_CURSOR: &[u8] = b"ERR invalid cursor";
const ERR_NUMKEYS: &[u8] = b"ERR numkeys should be greater than 0";
const ERR_NUMKEYS_ARGS: &[u8] = b"ERR Number of keys can't be greater than number of args";
const ERR_LIMIT: &[u8] = b"ERR LIMIT can't be negative";

/// The set at `key` for reading: Ok(None) when absent, Err when another type.
fn read<'a>(ctx: &'a mut ShardCtx, key: &[u8]) -> Result<Option<&'a Set>, ()> {
    match ctx.db().into_get(key) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Set(s) => Ok(Some(s)),
            _ => Err(()),
        },
    }
}

/// Like [`read`], for commands that read named members only (SISMEMBER, SMISMEMBER): members
/// past their TTL stay in place and the caller skips them ([`Set::contains_at`]), so a big
/// set with member TTLs is not scanned whenever one of them comes due; the active cycle and
/// the next whole-set read remove them.
fn read_point<'a>(ctx: &'a mut ShardCtx, key: &[u8]) -> Result<Option<&'a Set>, ()> {
    match ctx.db().into_get_point(key) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Set(s) => Ok(Some(s)),
            _ => Err(()),
        },
    }
}

fn set_of(e: &Entry) -> Result<&Set, ()> {
    match e.value() {
        ValueRef::Set(s) => Ok(s),
        _ => Err(()),
    }
}

fn new_entry(key: &[u8], s: Set, lru: u16) -> Entry {
    Entry::new_value(key, Value::Set(s), None, lru)
}

fn reply_set(w: &mut ReplyWriter, s: &Set) {
    w.set(s.len());
    s.for_each(|m| w.bulk(m));
}

// ---------------------------------------------------------------------------------------------
// Single-key commands

fn sadd(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let lim = ctx.limits();
    let lru = ctx.clock.lru;
    let (key, members) = (args[1], &args[2..]);
    let mut db = ctx.db();
    let added = match db.get_mut_quiet(key) {
        Some(e) => match e.value_mut() {
            Some(Value::Set(s)) => {
                s.reserve(members.len(), &lim);
                members.iter().filter(|m| s.insert(m, &lim)).count()
            }
            _ => return w.error(ERR_WRONGTYPE),
        },
        None => {
            let mut s = Set::create(members[0], members.len(), &lim);
            let n = members.iter().filter(|m| s.insert(m, &lim)).count();
            db.set(new_entry(key, s, lru));
            notify(ctx, SET, "sadd", key);
            return w.int(n as i64);
        }
    };
    if added > 0 {
        db.signal(key);
        notify(ctx, SET, "sadd", key);
    }
    w.int(added as i64);
}

fn srem(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let key = args[1];
    let mut db = ctx.db();
    let (removed, empty) = match db.get_mut_quiet(key) {
        None => return w.int(0),
        Some(e) => match e.value_mut() {
            Some(Value::Set(s)) => {
                let mut n = 0;
                for m in &args[2..] {
                    if s.remove(m) {
                        n += 1;
                        if s.is_empty() {
                            break;
                        }
                    }
                }
                (n, s.is_empty())
            }
            _ => return w.error(ERR_WRONGTYPE),
        },
    };
    if empty {
        db.remove(key);
    } else if removed > 0 {
        db.signal(key);
    }
    if removed > 0 {
        notify_removed(ctx, key, "srem", empty);
    }
    w.int(removed);
}

fn scard(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match read(ctx, args[1]) {
        Ok(s) => w.int(s.map_or(0, |s| s.len() as i64)),
        Err(()) => w.error(ERR_WRONGTYPE),
    }
}

fn sismember(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let now = ctx.clock.now_ms;
    match read_point(ctx, args[1]) {
        Ok(s) => w.int(s.is_some_and(|s| s.contains_at(args[2], now)) as i64),
        Err(()) => w.error(ERR_WRONGTYPE),
    }
}

fn smismember(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let now = ctx.clock.now_ms;
    match read_point(ctx, args[1]) {
        Ok(s) => {
            w.array(args.len() - 2);
            for m in &args[2..] {
                w.int(s.is_some_and(|s| s.contains_at(m, now)) as i64);
            }
        }
        Err(()) => w.error(ERR_WRONGTYPE),
    }
}

fn smembers(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match read(ctx, args[1]) {
        Ok(None) => w.set(0),
        Ok(Some(s)) => reply_set(w, s),
        Err(()) => w.error(ERR_WRONGTYPE),
    }
}

/// A local random generator seeded from the shard's, so that a command can draw numbers
/// while it borrows a set out of the same shard context (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(ctx: &mut ShardCtx) -> Rng {
        Rng(ctx.shard.random() | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// `count` distinct random members of `s` (count < len).
fn distinct_random(rng: &mut Rng, s: &Set, count: usize) -> Vec<Vec<u8>> {
    let len = s.len();
    if count.saturating_mul(3) > len {
        // Close to the whole set: shuffle a copy and keep a prefix.
        let mut all = s.to_vec();
        for i in 0..count {
            let j = i + (rng.next() % (len - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(count);
        return all;
    }
    let mut seen: HashSet<Vec<u8>> = HashSet::with_capacity(count);
    while seen.len() < count {
        if let Some(m) = s.random(rng.next()) {
            seen.insert(m);
        }
    }
    seen.into_iter().collect()
}

fn srandmember(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    if args.len() > 3 {
        return w.error(ERR_SYNTAX);
    }
    let mut rng = Rng::new(ctx);
    if args.len() == 2 {
        return match read(ctx, args[1]) {
            Ok(None) => w.null(),
            Ok(Some(s)) => match s.random(rng.next()) {
                Some(m) => w.bulk(&m),
                None => w.null(),
            },
            Err(()) => w.error(ERR_WRONGTYPE),
        };
    }
    let l = match super::parse_int(args[2]) {
        None => return w.error(ERR_NOT_INT),
        Some(i64::MIN) => return w.error(ERR_RANDOM_RANGE),
        Some(l) => l,
    };
    let (count, uniq) = (l.unsigned_abs(), l >= 0);
    let max_bytes = ctx.proto_max_bulk_len();
    let s = match read(ctx, args[1]) {
        Ok(None) => return w.array(0),
        Ok(Some(s)) => s,
        Err(()) => return w.error(ERR_WRONGTYPE),
    };
    if count == 0 {
        return w.array(0);
    }
    if !uniq || count == 1 {
        // Members may repeat: the reply's size is the count's, not the set's, so it is
        // bounded (see super::random_samples).
        return super::random_samples(
            w,
            count,
            max_bytes,
            |w| w.array(count as usize),
            |w| match s.random(rng.next()) {
                Some(m) => w.bulk(&m),
                None => w.null(),
            },
        );
    }
    let count = count as usize;
    if count >= s.len() {
        w.array(s.len());
        s.for_each(|m| w.bulk(m));
        return;
    }
    let picked = distinct_random(&mut rng, s, count);
    w.array(picked.len());
    for m in &picked {
        w.bulk(m);
    }
}

fn spop(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    if args.len() > 3 {
        return w.error(ERR_SYNTAX);
    }
    let key = args[1];
    let mut rng = Rng::new(ctx);
    let lim = ctx.limits();
    let count = if args.len() == 3 {
        match super::parse_int(args[2]) {
            Some(c) if c >= 0 => Some(c as u64),
            _ => return w.error(ERR_POSITIVE),
        }
    } else {
        None
    };
    // The members popped, for the AOF: written as SREM (the whole set as DEL), as Redis
    // 7.2 does, since the choice is random.
    let logging = ctx.propagating();
    let mut popped: Vec<Bytes> = Vec::new();
    let mut db = ctx.db();
    let s = match db.get_mut_quiet(key).map(|e| e.value_mut()) {
        None if count.is_some() => {
            ctx.propagate_nothing();
            return w.set(0);
        }
        None => {
            ctx.propagate_nothing();
            return w.null();
        }
        Some(Some(Value::Set(s))) => s,
        Some(_) => return w.error(ERR_WRONGTYPE),
    };
    let len = s.len() as u64;
    let mut whole = false;
    match count {
        None => match s.pop_random(rng.next()) {
            Some(m) => {
                w.bulk(&m);
                if logging {
                    popped.push(Bytes::from(m));
                }
            }
            None => w.null(),
        },
        Some(0) => {
            ctx.propagate_nothing();
            return w.set(0);
        }
        Some(c) if c >= len => {
            // The whole set goes.
            whole = true;
            reply_set(w, &std::mem::take(s));
        }
        Some(c) if (len - c) * 5 > c || s.has_ttls() => {
            // Pop one at a time (always with member TTLs: the members left keep theirs).
            w.set(c as usize);
            for _ in 0..c {
                if let Some(m) = s.pop_random(rng.next()) {
                    w.bulk(&m);
                    if logging {
                        popped.push(Bytes::from(m));
                    }
                }
            }
        }
        Some(c) => {
            // Most of the set goes: choose the few members that stay and build a new set of
            // them, as Redis does (a hashtable's remainder starts a fresh listpack, so the
            // encoding can become compact again, as in Redis 7.2).
            let mut kept = match s {
                Set::Ints(_) => Set::new(),
                _ => Set::new_listpack(),
            };
            for _ in 0..len - c {
                if let Some(m) = s.pop_random(rng.next()) {
                    kept.insert(&m, &lim);
                }
            }
            let old = std::mem::replace(s, kept);
            reply_set(w, &old);
            if logging {
                old.for_each(|m| popped.push(Bytes::copy_from_slice(m)));
            }
        }
    }
    let empty = s.is_empty();
    if empty {
        db.remove(key);
    } else {
        db.signal(key);
    }
    if whole {
        ctx.propagate_args(&[b"DEL", key]);
    } else if logging {
        // In SREMs of at most 1024 members, as Redis batches them.
        for batch in popped.chunks(1024) {
            let mut v = super::argv(&[b"SREM", key]);
            v.extend_from_slice(batch);
            ctx.propagate(v);
        }
    }
    notify_removed(ctx, key, "spop", empty);
}

/// The notifications of a removal from a set: `event`, then `del` if it was emptied.
fn notify_removed(ctx: &mut ShardCtx, key: &[u8], event: &str, deleted: bool) {
    notify(ctx, SET, event, key);
    if deleted {
        notify(ctx, GENERIC, "del", key);
    }
}

/// Dragonfly's bound on a member TTL in seconds (its expiry deadline limit, 2^28 - 1).
const MAX_MEMBER_TTL_SECS: i64 = (1 << 28) - 1;

/// SADDEX key [KEEPTTL] seconds member [member ...] (Dragonfly): adds members that expire
/// after `seconds`; a member already there gets the new TTL unless KEEPTTL. Replies with the
/// number of members added. The set becomes a hashtable with member TTLs (see
/// darner_engine::types::set).
fn saddex(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    // Dragonfly parses everything before it looks at the key: KEEPTTL (only right after the
    // key), the TTL, then at least one member.
    let keep = super::eq(args[2], "keepttl");
    let at = if keep { 3 } else { 2 };
    // Darner's own `PXAT <unix-ms>` in place of the seconds: the absolute form the AOF is
    // written with (docs/compatibility.md).
    let pxat = args.len() > at + 1 && super::eq(args[at], "pxat");
    let (deadline, members) = if pxat {
        match super::parse_int(args[at + 1]) {
            Some(n) if n > 0 => (Some(n), &args[at + 2..]),
            _ => return w.error(ERR_NOT_INT),
        }
    } else {
        match super::parse_int(args[at]) {
            Some(n) if (1..=MAX_MEMBER_TTL_SECS).contains(&n) => (None, &args[at + 1..]),
            _ => return w.error(ERR_NOT_INT),
        }
    };
    if members.is_empty() {
        return w.error(b"ERR wrong number of arguments for 'saddex' command");
    }
    let key = args[1];
    let lru = ctx.clock.lru;
    let mut db = ctx.db();
    let when = match deadline {
        Some(t) => t,
        None => db.now_ms() + super::parse_int(args[at]).unwrap_or(0) * 1000,
    };
    if !db.exists(key) {
        db.set(new_entry(key, Set::new(), lru));
    }
    let added = match db.get_mut_quiet(key).map(|e| e.value_mut()) {
        Some(Some(Value::Set(s))) => members
            .iter()
            .filter(|m| s.insert_expiring(m, when, keep))
            .count(),
        _ => return w.error(ERR_WRONGTYPE),
    };
    if added > 0 || !keep {
        db.signal(key);
    }
    // The active expiry cycle removes the members nobody reads again.
    db.note_field_ttls(key);
    if ctx.propagating() && !pxat {
        let mut v: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        v.splice(
            at..at + 1,
            [Bytes::from_static(b"PXAT"), super::num_arg(when)],
        );
        ctx.propagate(v);
    }
    w.int(added as i64);
}

fn sscan(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let Some(cursor) = super::parse_cursor(args[2]) else {
        return w.error(ERR_INVALID_CURSOR);
    };
    let s = match read(ctx, args[1]) {
        Ok(None) => {
            w.array(2);
            w.bulk(b"0");
            return w.array(0);
        }
        Ok(Some(s)) => s,
        Err(()) => return w.error(ERR_WRONGTYPE),
    };
    let mut count: usize = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if super::eq(args[i], "count") && more {
            match super::parse_int(args[i + 1]) {
                None => return w.error(ERR_NOT_INT),
                Some(c) if c < 1 => return w.error(ERR_SYNTAX),
                Some(c) => count = usize::try_from(c).unwrap_or(usize::MAX),
            }
        } else if super::eq(args[i], "match") && more {
            // "*" matches everything, the empty member included.
            pattern = (args[i + 1] != b"*").then_some(args[i + 1]);
        } else {
            return w.error(ERR_SYNTAX);
        }
        i += 2;
    }
    let mut found: Vec<Vec<u8>> = Vec::new();
    let next = s.scan(cursor, count, |m| {
        if pattern.is_none_or(|p| glob_match(p, m, false)) {
            found.push(m.to_vec());
        }
    });
    w.array(2);
    w.bulk(next.to_string().as_bytes());
    w.array(found.len());
    for m in &found {
        w.bulk(m);
    }
}

// ---------------------------------------------------------------------------------------------
// Multi-key commands

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The result of SINTER/SUNION/SDIFF over `sets` (None: a missing key), built as Redis 7.2
/// builds it, so that a stored result has Redis's encoding. `same[j]`: key j is key 0.
fn compute(op: Op, sets: &[Option<&Set>], same: &[bool], lim: &Limits) -> Set {
    match op {
        Op::Inter => {
            if sets.iter().any(Option::is_none) {
                return Set::new();
            }
            let mut order: Vec<&Set> = sets.iter().flatten().copied().collect();
            order.sort_by_key(|s| s.len());
            let first = order[0];
            let mut out = match first {
                Set::Ints(_) => Set::new(),
                _ => Set::new_listpack(),
            };
            first.for_each(|m| {
                if order[1..]
                    .iter()
                    .all(|s| std::ptr::eq(*s, first) || s.contains(m))
                {
                    out.insert(m, lim);
                }
            });
            // An all-integer listpack result becomes an intset, whatever the smallest set was
            // (Redis's maybeConvertToIntset on SINTERSTORE's result).
            out.compact_ints(lim);
            out
        }
        Op::Union => {
            let mut out = Set::new();
            for s in sets.iter().flatten() {
                s.for_each(|m| {
                    out.insert(m, lim);
                });
            }
            out
        }
        Op::Diff => {
            let mut out = Set::new();
            let Some(first) = sets[0] else { return out };
            if same[1..].iter().any(|&x| x) {
                return out;
            }
            let (mut one, mut two) = (0usize, 0usize);
            for s in sets.iter().flatten() {
                one += first.len();
                two += s.len();
            }
            if one / 2 <= two {
                first.for_each(|m| {
                    if !sets[1..].iter().flatten().any(|s| s.contains(m)) {
                        out.insert(m, lim);
                    }
                });
            } else {
                // Redis's second algorithm: add the first set, remove the others (the
                // result's encoding reflects the first set's size, as in Redis).
                first.for_each(|m| {
                    out.insert(m, lim);
                });
                for s in sets[1..].iter().flatten() {
                    if out.is_empty() {
                        break;
                    }
                    s.for_each(|m| {
                        out.remove(m);
                    });
                }
            }
            out
        }
    }
}

/// SINTERCARD's count, stopping at `limit` (0: no limit).
fn intercard(sets: &[Option<&Set>], limit: usize) -> usize {
    if sets.iter().any(Option::is_none) {
        return 0;
    }
    let mut order: Vec<&Set> = sets.iter().flatten().copied().collect();
    order.sort_by_key(|s| s.len());
    let first = order[0];
    let mut n = 0;
    first.for_each(|m| {
        let done = limit > 0 && n >= limit;
        if !done
            && order[1..]
                .iter()
                .all(|s| std::ptr::eq(*s, first) || s.contains(m))
        {
            n += 1;
        }
    });
    n
}

/// What a multi-key command does with the sets once it has them.
#[derive(Clone, Copy)]
enum Want {
    Reply(Op),
    Store(Op),
    Card(usize),
}

enum Outcome {
    Wrong,
    Members(Set),
    Count(usize),
    Store(Option<Set>),
}

fn evaluate(want: Want, sets: &[Option<&Set>], same: &[bool], lim: &Limits) -> Outcome {
    match want {
        Want::Card(limit) => Outcome::Count(intercard(sets, limit)),
        Want::Reply(op) => Outcome::Members(compute(op, sets, same, lim)),
        Want::Store(op) => {
            let s = compute(op, sets, same, lim);
            Outcome::Store((!s.is_empty()).then_some(s))
        }
    }
}

/// Stores a *STORE result (or deletes the destination for an empty one); returns the reply.
/// `event`: the notification of a stored result.
fn store(ctx: &mut ShardCtx, dst: &[u8], result: Option<Set>, event: &str) -> i64 {
    let lru = ctx.clock.lru;
    let mut db = ctx.db();
    match result {
        Some(s) => {
            let n = s.len() as i64;
            db.set(new_entry(dst, s, lru));
            notify(ctx, SET, event, dst);
            n
        }
        None => {
            if db.remove(dst).is_some() {
                notify(ctx, GENERIC, "del", dst);
            }
            0
        }
    }
}

/// The notification of a *STORE command's stored result.
fn store_event(want: &Want) -> &'static str {
    match want {
        Want::Store(Op::Inter) => "sinterstore",
        Want::Store(Op::Union) => "sunionstore",
        _ => "sdiffstore",
    }
}

fn write_outcome(resp3: bool, o: Outcome) -> Vec<u8> {
    super::with_writer(resp3, |w| match o {
        Outcome::Wrong => w.error(ERR_WRONGTYPE),
        Outcome::Members(s) => reply_set(w, &s),
        Outcome::Count(n) => w.int(n as i64),
        Outcome::Store(s) => w.int(s.map_or(0, |s| s.len() as i64)),
    })
}

/// Runs a multi-key set command over `keys` (stored into `dst` for the *STORE forms).
async fn multi(tx: &Tx, want: Want, keys: Vec<Bytes>, dst: Option<Bytes>) -> Vec<u8> {
    let resp3 = tx.resp3();
    let same: Vec<bool> = keys.iter().map(|k| *k == keys[0]).collect();
    let shard0 = tx.shard_of(&keys[0]);
    let one_shard = keys
        .iter()
        .chain(dst.iter())
        .all(|k| tx.shard_of(k) == shard0);
    if one_shard {
        // Everything on one shard: one hop, sets borrowed in place.
        return tx
            .run(shard0, move |ctx| {
                let lim = ctx.limits();
                let outcome = {
                    let mut db = ctx.db();
                    let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
                    let entries = db.get_many(&refs);
                    let mut sets = Vec::with_capacity(entries.len());
                    let mut wrong = false;
                    for e in entries {
                        match e.map(set_of) {
                            None => sets.push(None),
                            Some(Ok(s)) => sets.push(Some(s)),
                            Some(Err(())) => wrong = true,
                        }
                    }
                    if wrong {
                        Outcome::Wrong
                    } else {
                        evaluate(want, &sets, &same, &lim)
                    }
                };
                let outcome = match (outcome, &dst) {
                    (Outcome::Store(s), Some(d)) => {
                        Outcome::Count(store(ctx, d, s, store_event(&want)) as usize)
                    }
                    (o, _) => o,
                };
                write_outcome(ctx.resp3, outcome)
            })
            .await;
    }
    if !matches!(want, Want::Reply(Op::Union) | Want::Store(Op::Union)) {
        return filtered(tx, want, keys, dst).await;
    }
    // A union across shards: each shard sends copies of its sets, one of each key however
    // often it is named (`first_of` below points the repeats at it): naming one big set many
    // times must not multiply the memory.
    let groups = super::generic::by_shard(tx, &keys);
    let hops: Vec<_> = groups
        .into_iter()
        .map(|(s, idx)| {
            let ks: Vec<(usize, Bytes)> = idx.iter().map(|&i| (i, keys[i].clone())).collect();
            tx.run(s, move |ctx| {
                let mut out: Vec<(usize, Result<Option<Set>, ()>)> = Vec::new();
                let mut copied: HashSet<Bytes> = HashSet::new();
                for (i, k) in ks {
                    if copied.insert(k.clone()) {
                        let got = read(ctx, &k).map(|s| s.cloned());
                        out.push((i, got));
                    }
                }
                out
            })
        })
        .collect();
    let mut owned: Vec<Option<Set>> = (0..keys.len()).map(|_| None).collect();
    let mut wrong = false;
    for h in hops {
        for (i, got) in h.await {
            match got {
                Ok(s) => owned[i] = s,
                Err(()) => wrong = true,
            }
        }
    }
    if wrong {
        return write_outcome(resp3, Outcome::Wrong);
    }
    let lim = tx.shared().config.hot.limits();
    // A key named again was copied once, at its first index: point every naming at that
    // copy (by a map: a search per key would be quadratic in the number of keys).
    let mut first: HashMap<&Bytes, usize> = HashMap::with_capacity(keys.len());
    let first_of: Vec<usize> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| *first.entry(k).or_insert(i))
        .collect();
    let sets: Vec<Option<&Set>> = first_of.iter().map(|&i| owned[i].as_ref()).collect();
    let outcome = evaluate(want, &sets, &same, &lim);
    match (outcome, dst) {
        (Outcome::Store(s), Some(d)) => {
            let ev = store_event(&want);
            let n = tx
                .run(tx.shard_of(&d), move |ctx| store(ctx, &d, s, ev))
                .await;
            super::with_writer(resp3, |w| w.int(n))
        }
        (o, _) => write_outcome(resp3, o),
    }
}

/// SINTER, SINTERCARD and SDIFF (and the *STORE forms) across shards, without copying any
/// set but one: the shards first report their sets' sizes, then the base set (the smallest
/// for an intersection, the first for a difference) is copied, and each other shard says
/// which of its members its own sets hold. The result is then built as [`compute`] would.
async fn filtered(tx: &Tx, want: Want, keys: Vec<Bytes>, dst: Option<Bytes>) -> Vec<u8> {
    let resp3 = tx.resp3();
    let op = match want {
        Want::Card(_) => Op::Inter,
        Want::Reply(op) | Want::Store(op) => op,
    };
    let groups = super::generic::by_shard(tx, &keys);
    let hops: Vec<_> = groups
        .iter()
        .map(|(s, idx)| {
            let ks: Vec<(usize, Bytes)> = idx.iter().map(|&i| (i, keys[i].clone())).collect();
            tx.run(*s, move |ctx| {
                ks.into_iter()
                    .map(|(i, k)| (i, read(ctx, &k).map(|s| s.map(Set::len))))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut lens: Vec<Option<usize>> = vec![None; keys.len()];
    let mut wrong = false;
    for h in hops {
        for (i, got) in h.await {
            match got {
                Ok(l) => lens[i] = l,
                Err(()) => wrong = true,
            }
        }
    }
    if wrong {
        return write_outcome(resp3, Outcome::Wrong);
    }
    let empty = match op {
        Op::Inter => lens.iter().any(Option::is_none),
        _ => lens[0].is_none() || keys[1..].iter().any(|k| *k == keys[0]),
    };
    let finish = |result: Set| async {
        let outcome = match want {
            Want::Card(_) => Outcome::Count(result.len()),
            Want::Reply(_) => Outcome::Members(result),
            Want::Store(_) => Outcome::Store((!result.is_empty()).then_some(result)),
        };
        match (outcome, dst.clone()) {
            (Outcome::Store(s), Some(d)) => {
                let ev = store_event(&want);
                let n = tx
                    .run(tx.shard_of(&d), move |ctx| store(ctx, &d, s, ev))
                    .await;
                super::with_writer(resp3, |w| w.int(n))
            }
            (o, _) => write_outcome(resp3, o),
        }
    };
    if empty {
        return finish(Set::new()).await;
    }
    // The base set: the smallest (the first of equal sizes) or the first key.
    let base = match op {
        Op::Inter => (0..keys.len()).min_by_key(|&i| lens[i]).unwrap_or(0),
        _ => 0,
    };
    let bk = keys[base].clone();
    let base_set: Set = tx
        .run(tx.shard_of(&bk), move |ctx| {
            ctx.db()
                .peek(&bk)
                .and_then(|e| set_of(e).ok().cloned())
                .unwrap_or_default()
        })
        .await;
    let members = std::sync::Arc::new(base_set.to_vec());
    // Intersection: a member stays if every other set holds it; difference: it goes if any
    // other set holds it.
    let others: Vec<Bytes> = keys
        .iter()
        .enumerate()
        .filter(|&(i, k)| i != base && *k != keys[base] && lens[i].is_some())
        .map(|(_, k)| k.clone())
        .collect();
    let inter = op == Op::Inter;
    let hops: Vec<_> = super::generic::by_shard(tx, &others)
        .into_iter()
        .map(|(s, idx)| {
            let ks: Vec<Bytes> = idx.iter().map(|&i| others[i].clone()).collect();
            let ms = members.clone();
            tx.run(s, move |ctx| {
                let mut db = ctx.db();
                let refs: Vec<&[u8]> = ks.iter().map(|k| &k[..]).collect();
                let sets: Vec<&Set> = db
                    .get_many(&refs)
                    .into_iter()
                    .flatten()
                    .filter_map(|e| set_of(e).ok())
                    .collect();
                ms.iter()
                    .map(|m| {
                        if inter {
                            sets.iter().all(|s| s.contains(m))
                        } else {
                            sets.iter().any(|s| s.contains(m))
                        }
                    })
                    .collect::<Vec<bool>>()
            })
        })
        .collect();
    let mut hit = vec![inter; members.len()];
    for h in hops {
        for (i, b) in h.await.into_iter().enumerate() {
            if inter {
                hit[i] &= b;
            } else {
                hit[i] |= b;
            }
        }
    }
    let lim = tx.shared().config.hot.limits();
    let result = match (op, want) {
        (_, Want::Card(limit)) => {
            let n = hit.iter().filter(|&&b| b).count();
            let n = if limit > 0 { n.min(limit) } else { n };
            // Only the count is used.
            return write_outcome(resp3, Outcome::Count(n));
        }
        (Op::Inter, _) => {
            let mut out = match base_set {
                Set::Ints(_) => Set::new(),
                _ => Set::new_listpack(),
            };
            for (m, _) in members.iter().zip(&hit).filter(|(_, &b)| b) {
                out.insert(m, &lim);
            }
            out.compact_ints(&lim);
            out
        }
        _ => {
            let len0 = lens[0].unwrap_or(0);
            let present = lens.iter().flatten().count();
            let two: usize = lens.iter().flatten().sum();
            let mut out = Set::new();
            if len0 * present / 2 <= two {
                for (m, _) in members.iter().zip(&hit).filter(|(_, &b)| !b) {
                    out.insert(m, &lim);
                }
            } else {
                for m in members.iter() {
                    out.insert(m, &lim);
                }
                for (m, _) in members.iter().zip(&hit).filter(|(_, &b)| b) {
                    out.remove(m);
                }
            }
            out
        }
    };
    finish(result).await
}

fn sinter(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move { multi(&tx, Want::Reply(Op::Inter), args[1..].to_vec(), None).await })
}

fn sunion(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move { multi(&tx, Want::Reply(Op::Union), args[1..].to_vec(), None).await })
}

fn sdiff(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move { multi(&tx, Want::Reply(Op::Diff), args[1..].to_vec(), None).await })
}

fn store_cmd(tx: Tx, args: Vec<Bytes>, op: Op) -> TxFuture {
    Box::pin(async move {
        let dst = args[1].clone();
        multi(&tx, Want::Store(op), args[2..].to_vec(), Some(dst)).await
    })
}

fn sinterstore(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    store_cmd(tx, args, Op::Inter)
}

fn sunionstore(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    store_cmd(tx, args, Op::Union)
}

fn sdiffstore(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    store_cmd(tx, args, Op::Diff)
}

fn sintercard(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| super::with_writer(resp3, |w| w.error(e));
        let numkeys = match super::parse_int(&args[1]) {
            Some(n) if n >= 1 => n as u64,
            _ => return err(ERR_NUMKEYS),
        };
        if numkeys > (args.len() - 2) as u64 {
            return err(ERR_NUMKEYS_ARGS);
        }
        let numkeys = numkeys as usize;
        let mut limit = 0usize;
        let mut j = 2 + numkeys;
        while j < args.len() {
            if super::eq(&args[j], "limit") && j + 1 < args.len() {
                match super::parse_int(&args[j + 1]) {
                    Some(l) if l >= 0 => limit = usize::try_from(l).unwrap_or(usize::MAX),
                    _ => return err(ERR_LIMIT),
                }
                j += 2;
            } else {
                return err(ERR_SYNTAX);
            }
        }
        multi(&tx, Want::Card(limit), args[2..2 + numkeys].to_vec(), None).await
    })
}

/// What SMOVE finds at its source.
enum Src {
    Missing,
    Wrong,
    Has(bool),
}

fn smove(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let (src, dst, member) = (args[1].clone(), args[2].clone(), args[3].clone());
        let (ss, ds) = (tx.shard_of(&src), tx.shard_of(&dst));
        if ss == ds {
            return tx
                .run(ss, move |ctx| {
                    let n = smove_local(ctx, &src, &dst, &member);
                    super::with_writer(ctx.resp3, |w| match n {
                        Some(n) => w.int(n),
                        None => w.error(ERR_WRONGTYPE),
                    })
                })
                .await;
        }
        let (s2, m2, d2) = (src.clone(), member.clone(), dst.clone());
        let src_hop = tx.run(ss, move |ctx| match read(ctx, &s2) {
            Ok(None) => Src::Missing,
            Ok(Some(s)) => Src::Has(s.contains(&m2)),
            Err(()) => Src::Wrong,
        });
        let dst_hop = tx.run(ds, move |ctx| read(ctx, &d2).is_ok());
        let (found, dst_ok) = (src_hop.await, dst_hop.await);
        let reply = |n: i64| super::with_writer(resp3, |w| w.int(n));
        match found {
            Src::Missing => return reply(0),
            Src::Wrong => return super::with_writer(resp3, |w| w.error(ERR_WRONGTYPE)),
            _ if !dst_ok => return super::with_writer(resp3, |w| w.error(ERR_WRONGTYPE)),
            Src::Has(false) => return reply(0),
            Src::Has(true) => {}
        }
        let m2 = member.clone();
        tx.run(ss, move |ctx| {
            remove_member(ctx, &src, &m2);
        })
        .await;
        tx.run(ds, move |ctx| {
            add_member(ctx, &dst, &member);
        })
        .await;
        reply(1)
    })
}

/// Removes `m` from the set at `key` (deleting an emptied set).
fn remove_member(ctx: &mut ShardCtx, key: &[u8], m: &[u8]) -> bool {
    let mut db = ctx.db();
    let (removed, empty) = match db.get_mut_quiet(key).map(|e| e.value_mut()) {
        Some(Some(Value::Set(s))) => (s.remove(m), s.is_empty()),
        _ => return false,
    };
    if empty {
        db.remove(key);
    } else if removed {
        db.signal(key);
    }
    if removed {
        notify_removed(ctx, key, "srem", empty);
    }
    removed
}

/// Adds `m` to the set at `key`, creating it as Redis's SMOVE does (setTypeCreate with a
/// hint of one member). The caller checked the type.
fn add_member(ctx: &mut ShardCtx, key: &[u8], m: &[u8]) {
    let lim = ctx.limits();
    let lru = ctx.clock.lru;
    let mut db = ctx.db();
    let added = match db.get_mut_quiet(key).map(|e| e.value_mut()) {
        Some(Some(Value::Set(s))) => s.insert(m, &lim),
        Some(_) => false,
        None => {
            let mut s = Set::create(m, 1, &lim);
            s.insert(m, &lim);
            db.set(new_entry(key, s, lru));
            notify(ctx, SET, "sadd", key);
            return;
        }
    };
    if added {
        db.signal(key);
        notify(ctx, SET, "sadd", key);
    }
}

/// SMOVE with both keys on this shard: None for WRONGTYPE.
fn smove_local(ctx: &mut ShardCtx, src: &[u8], dst: &[u8], m: &[u8]) -> Option<i64> {
    let has = match read(ctx, src) {
        Ok(None) => return Some(0),
        Ok(Some(s)) => s.contains(m),
        Err(()) => return None,
    };
    read(ctx, dst).ok()?;
    if src == dst {
        return Some(has as i64);
    }
    if !has {
        return Some(0);
    }
    remove_member(ctx, src, m);
    add_member(ctx, dst, m);
    Some(1)
}
