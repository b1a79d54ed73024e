//! The hash commands (Redis 7.2's t_hash.c): reply types, error texts and the order in which
//! errors are detected follow Redis. The data structure is `darner_engine::types::Hash`.
//!
//! Field expiry (Redis 7.4's HEXPIRE family, HTTL family, HPERSIST): a field past its TTL is
//! removed lazily, before any hash command looks at it ([`lazy_expire`]): the named fields for
//! a command that names fields, every field for one that reads the whole hash (HLEN, HGETALL,
//! HRANDFIELD: O(n) when the hash has TTLs, O(1) otherwise); HSCAN skips them. The key goes
//! when its last field does. The server's active cycle removes the rest in steps.
//!
//! On a replica nothing is removed (Redis 7.4's rule: only the primary's HDEL removes a
//! field): a client's command finds a field past its TTL hidden where Redis's
//! `hashTypeGetValue` says "expired" (HGET, HMGET, HEXISTS, HSTRLEN, HSETNX, HINCRBY*,
//! HGETALL/HKEYS/HVALS, HTTL family and HPERSIST: -2, HGETDEL/HGETEX), and counted where
//! Redis counts it (HLEN) or samples it (HRANDFIELD); the primary's commands see every
//! field live ([`hide_due`]).
//!
//! Redis 8.0's HGETDEL, HGETEX and HSETEX (plus Dragonfly's older HSETEX form, see `hsetex`)
//! build on the same machinery: TTLs they set make a listpack "listpackex" and register the
//! hash with the active cycle.

use super::string::ld;
use super::{eq, parse_int, random_samples, Reg, ERR_NOT_INT, ERR_SYNTAX, ERR_WRONGTYPE};
use crate::notify::{notify, GENERIC, HASH};
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_engine::db::Event;
use darner_engine::entry::HashMut;
use darner_engine::types::{Hash, HashRef};
use darner_engine::{glob_match, DbView, Entry, Expired, Value, ValueRef};
use darner_resp::ReplyWriter;
use std::collections::HashSet;

pub fn register(r: &mut Reg) {
    r.key("hset", hset);
    r.key("hmset", hmset);
    r.key("hsetnx", hsetnx);
    r.key("hget", hget);
    r.key("hmget", hmget);
    r.key("hdel", hdel);
    r.key("hlen", hlen);
    r.key("hstrlen", hstrlen);
    r.key("hexists", hexists);
    r.key("hkeys", hkeys);
    r.key("hvals", hvals);
    r.key("hgetall", hgetall);
    r.key("hincrby", hincrby);
    r.key("hincrbyfloat", hincrbyfloat);
    r.key("hrandfield", hrandfield);
    r.key("hscan", hscan);
    r.key("hexpire", hexpire);
    r.key("hpexpire", hpexpire);
    r.key("hexpireat", hexpireat);
    r.key("hpexpireat", hpexpireat);
    r.key("httl", httl);
    r.key("hpttl", hpttl);
    r.key("hexpiretime", hexpiretime);
    r.key("hpexpiretime", hpexpiretime);
    r.key("hpersist", hpersist);
    r.key("hgetdel", hgetdel);
    r.key("hgetex", hgetex);
    r.key("hsetex", hsetex);
}

/// Which fields [`lazy_expire`] checks.
#[derive(Clone, Copy)]
enum Fields<'a> {
    All,
    /// These.
    Some(&'a [&'a [u8]]),
    /// The fields of `field value ...` pairs (HSET).
    Pairs(&'a [&'a [u8]]),
}

/// Lazy field expiry: removes the given fields of `key` whose TTL has passed, deleting the
/// key when none is left. A missing key, another type or a hash without TTLs is left alone
/// (one lookup). Nothing on a replica: there the commands hide such fields ([`hide_due`]).
fn lazy_expire(db: &mut DbView<'_>, key: &[u8], fields: Fields<'_>) {
    // A database without field TTLs (the usual case) is not even looked up.
    if !db.may_have_field_ttls() || db.expiry_held() {
        return;
    }
    let now = db.now_ms();
    let log = db.logging_expired();
    let Some(entry) = db.get_mut_quiet(key) else {
        return;
    };
    // Checked on the borrowed view first: a hash without field TTLs (the usual case) is
    // left alone after one lookup. A big hash all of whose fields are due goes whole, as an
    // expired key would (freed in steps, see lazyfree.rs), not field by field on the
    // request path.
    let all_due = match entry.value() {
        ValueRef::Hash(h) if h.has_ttls() => matches!(fields, Fields::All) && h.all_due(now),
        _ => return,
    };
    // The fields removed, for the AOF (HDEL each) while it is on.
    let mut names: Vec<Box<[u8]>> = Vec::new();
    // (removed any, left empty): a wholly due hash is not edited, it goes below.
    let (gone, empty) = if all_due {
        (true, true)
    } else if let Some(mut h) = entry.hash_mut() {
        let mut expire = |f: &&[u8]| {
            let gone = h.expire_field(f, now);
            if gone && log {
                names.push((*f).into());
            }
            gone
        };
        let gone = match fields {
            Fields::Some(fs) => fs.iter().filter(|f| expire(f)).count(),
            Fields::Pairs(fs) => fs.iter().step_by(2).filter(|f| expire(f)).count(),
            Fields::All => h.remove_all_expired_with(now, &mut |f| {
                if log {
                    names.push(f.into())
                }
            }),
        };
        (gone > 0, h.is_empty())
    } else {
        return;
    };
    // Written before the command (propagate::expired): HDEL per field, as Redis 7.4; a hash
    // that went whole, as DEL.
    if all_due {
        db.log_expired(Expired::Key(key.into()));
    } else if !names.is_empty() {
        db.log_expired(Expired::Fields(key.into(), names));
    }
    if gone {
        // Published before the command's own events (Redis 7.4: `hexpired`, then `del` for
        // a hash left empty).
        db.record_event(Event::FieldsExpired, key);
    }
    if empty {
        db.delete(key);
        db.record_event(Event::Deleted, key);
    } else if gone {
        db.signal(key);
    }
}

/// Removes every field of the hash at `key` whose TTL has passed, as HGETALL does first (for
/// stream.rs, which answers HGETALL of a big hash itself).
pub(crate) fn expire_all_fields(db: &mut DbView<'_>, key: &[u8]) {
    lazy_expire(db, key, Fields::All)
}

/// `Some(now)` when the command must hide the fields past their TTL itself: a client's
/// command on a replica, where [`lazy_expire`] leaves them in place until the primary's
/// HDEL (Redis 7.4's `hashTypeGetValue` answers "expired" there without deleting; for the
/// primary's own commands, every field is live).
fn hide_due(db: &DbView<'_>) -> Option<i64> {
    (db.expiry_held() && !db.clock.from_primary && db.may_have_field_ttls()).then(|| db.now_ms())
}

/// Whether a field whose expiry is `e` ([`HashRef::expiry_of`]) is hidden by `hide`.
fn hidden(e: Option<Option<i64>>, hide: Option<i64>) -> bool {
    matches!((e, hide), (Some(Some(t)), Some(now)) if t <= now)
}

/// The value of `field`, unless `hide` hides it ([`hide_due`]).
fn value<'a>(h: HashRef<'a>, field: &[u8], hide: Option<i64>) -> Option<&'a [u8]> {
    let v = h.get(field)?;
    if hide.is_some() && hidden(h.expiry_of(field), hide) {
        return None;
    }
    Some(v)
}

/// The hash at `key` without counting a hit (the caller already looked it up).
fn peek_hash<'a>(db: &'a mut DbView<'_>, key: &[u8]) -> Option<HashRef<'a>> {
    match db.peek(key)?.value() {
        ValueRef::Hash(h) => Some(h),
        _ => None,
    }
}

/// The key is of another type.
struct WrongType;

/// A hash to read (counts a hit or a miss, as Redis's lookupKeyRead).
fn read<'a>(db: &'a mut DbView<'_>, key: &[u8]) -> Result<Option<HashRef<'a>>, WrongType> {
    match db.get(key) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Hash(h) => Ok(Some(h)),
            _ => Err(WrongType),
        },
    }
}

/// A hash to modify. Quiet: the caller signals WATCHers once it has changed something.
/// A small hash is edited inside its entry (see `darner_engine::entry::HashMut`).
fn write<'a>(db: &'a mut DbView<'_>, key: &[u8]) -> Result<Option<HashMut<'a>>, WrongType> {
    match db.get_mut_quiet(key) {
        None => Ok(None),
        Some(e) => e.hash_mut().map(Some).ok_or(WrongType),
    }
}

/// Like [`write`], creating an empty hash when the key is absent (the caller then writes to
/// it, so it never stays empty).
fn write_or_create<'a>(db: &'a mut DbView<'_>, key: &[u8]) -> Result<HashMut<'a>, WrongType> {
    if !db.exists(key) {
        let lru = db.clock.lru;
        db.set(Entry::new_value(key, Value::Hash(Hash::new()), None, lru));
    }
    write(db, key).map(|h| h.expect("just created"))
}

fn wrong(w: &mut ReplyWriter) {
    w.error(ERR_WRONGTYPE)
}

fn hset_generic(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter, name: &str) -> bool {
    if !args.len().is_multiple_of(2) {
        w.error(format!("ERR wrong number of arguments for '{name}' command").as_bytes());
        return false;
    }
    let limits = ctx.limits();
    let mut db = ctx.db();
    lazy_expire(&mut db, args[1], Fields::Pairs(&args[2..]));
    let mut h = match write_or_create(&mut db, args[1]) {
        Ok(h) => h,
        Err(_) => {
            wrong(w);
            return false;
        }
    };
    h.convert_for(&limits, args[2..].iter().copied());
    let mut created = 0;
    for pair in args[2..].chunks(2) {
        created += i64::from(h.set(pair[0], pair[1], &limits));
    }
    db.signal(args[1]);
    notify(ctx, HASH, "hset", args[1]);
    if name == "hset" {
        w.int(created);
    }
    true
}

fn hset(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    hset_generic(ctx, args, w, "hset");
}

fn hmset(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    if hset_generic(ctx, args, w, "hmset") {
        w.ok();
    }
}

fn hsetnx(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let limits = ctx.limits();
    let mut db = ctx.db();
    lazy_expire(&mut db, args[1], Fields::Some(&args[2..3]));
    let hide = hide_due(&db);
    let Ok(mut h) = write_or_create(&mut db, args[1]) else {
        return wrong(w);
    };
    if h.contains(args[2]) && !hidden(h.expiry_of(args[2]), hide) {
        return w.int(0);
    }
    h.set(args[2], args[3], &limits);
    db.signal(args[1]);
    notify(ctx, HASH, "hset", args[1]);
    w.int(1);
}

fn hget(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    lazy_expire(&mut db, args[1], Fields::Some(&args[2..3]));
    let hide = hide_due(&db);
    match read(&mut db, args[1]) {
        Err(_) => wrong(w),
        Ok(h) => match h.and_then(|h| value(h, args[2], hide)) {
            Some(v) => w.bulk(v),
            None => w.null(),
        },
    }
}

fn hmget(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    lazy_expire(&mut db, args[1], Fields::Some(&args[2..]));
    let hide = hide_due(&db);
    match read(&mut db, args[1]) {
        Err(_) => wrong(w),
        Ok(h) => {
            w.array(args.len() - 2);
            for f in &args[2..] {
                match h.and_then(|h| value(h, f, hide)) {
                    Some(v) => w.bulk(v),
                    None => w.null(),
                }
            }
        }
    }
}

fn hdel(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    lazy_expire(&mut db, args[1], Fields::Some(&args[2..]));
    let (deleted, empty) = match write(&mut db, args[1]) {
        Err(_) => return wrong(w),
        Ok(None) => return w.int(0),
        Ok(Some(mut h)) => {
            let mut n = 0;
            for f in &args[2..] {
                n += i64::from(h.remove(f));
                if h.is_empty() {
                    break;
                }
            }
            (n, h.is_empty())
        }
    };
    if empty {
        db.remove(args[1]);
    } else if deleted > 0 {
        db.signal(args[1]);
    }
    if deleted > 0 {
        notify(ctx, HASH, "hdel", args[1]);
        if empty {
            notify(ctx, GENERIC, "del", args[1]);
        }
    }
    w.int(deleted);
}

fn hlen(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    lazy_expire(&mut db, args[1], Fields::All);
    match read(&mut db, args[1]) {
        Err(_) => wrong(w),
        Ok(h) => w.int(h.map_or(0, |h| h.len() as i64)),
    }
}

fn hstrlen(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    lazy_expire(&mut db, args[1], Fields::Some(&args[2..3]));
    let hide = hide_due(&db);
    match read(&mut db, args[1]) {
        Err(_) => wrong(w),
        Ok(h) => w.int(
            h.and_then(|h| value(h, args[2], hide))
                .map_or(0, |v| v.len() as i64),
        ),
    }
}

fn hexists(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    lazy_expire(&mut db, args[1], Fields::Some(&args[2..3]));
    let hide = hide_due(&db);
    match read(&mut db, args[1]) {
        Err(_) => wrong(w),
        Ok(h) => w.int(i64::from(
            h.is_some_and(|h| value(h, args[2], hide).is_some()),
        )),
    }
}

/// HKEYS, HVALS, HGETALL.
fn getall(ctx: &mut ShardCtx, key: &[u8], keys: bool, vals: bool, w: &mut ReplyWriter) {
    let mut db = ctx.db();
    lazy_expire(&mut db, key, Fields::All);
    let hide = hide_due(&db);
    let h = match read(&mut db, key) {
        Err(_) => return wrong(w),
        Ok(h) => h,
    };
    if let (Some(h), Some(now)) = (h, hide) {
        // A replica's client: the fields past their TTL are skipped, not removed.
        let live: Vec<(&[u8], &[u8])> = h
            .iter_ttl()
            .filter(|e| e.2.is_none_or(|t| t > now))
            .map(|(k, v, _)| (k, v))
            .collect();
        if keys && vals {
            w.map(live.len());
        } else {
            w.array(live.len());
        }
        for (k, v) in live {
            if keys {
                w.bulk(k);
            }
            if vals {
                w.bulk(v);
            }
        }
        return;
    }
    let n = h.map_or(0, |h| h.len());
    if keys && vals {
        w.map(n);
    } else {
        w.array(n);
    }
    if let Some(h) = h {
        for (k, v) in h.iter() {
            if keys {
                w.bulk(k);
            }
            if vals {
                w.bulk(v);
            }
        }
    }
}

fn hkeys(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    getall(ctx, args[1], true, false, w)
}

fn hvals(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    getall(ctx, args[1], false, true, w)
}

fn hgetall(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    getall(ctx, args[1], true, true, w)
}

fn hincrby(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let Some(by) = parse_int(args[3]) else {
        return w.error(ERR_NOT_INT);
    };
    let limits = ctx.limits();
    let mut db = ctx.db();
    lazy_expire(&mut db, args[1], Fields::Some(&args[2..3]));
    // A missing key is created only once the increment is known to succeed (a missing field
    // always does), so an error never leaves an empty hash behind.
    let hide = hide_due(&db);
    let old = match read(&mut db, args[1]) {
        Err(_) => return wrong(w),
        Ok(h) => match h.and_then(|h| value(h, args[2], hide)) {
            None => 0,
            Some(v) => match parse_int(v) {
                Some(v) => v,
                None => return w.error(b"ERR hash value is not an integer"),
            },
        },
    };
    let Some(new) = old.checked_add(by) else {
        return w.error(super::ERR_OVERFLOW);
    };
    let mut h = write_or_create(&mut db, args[1]).unwrap_or_else(|_| unreachable!("checked type"));
    // Redis 7.4 keeps the field's TTL on an increment (HASH_SET_KEEP_TTL).
    h.set_keep_ttl(args[2], new.to_string().as_bytes(), &limits);
    db.signal(args[1]);
    notify(ctx, HASH, "hincrby", args[1]);
    w.int(new);
}

fn hincrbyfloat(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let by = match ld::parse(args[3]) {
        None => return w.error(super::ERR_NOT_FLOAT),
        Some(ld::Ld::Inf(_) | ld::Ld::Nan) => return w.error(b"ERR value is NaN or Infinity"),
        Some(v) => v,
    };
    let limits = ctx.limits();
    let mut db = ctx.db();
    lazy_expire(&mut db, args[1], Fields::Some(&args[2..3]));
    let hide = hide_due(&db);
    let old = match read(&mut db, args[1]) {
        Err(_) => return wrong(w),
        Ok(h) => match h.and_then(|h| value(h, args[2], hide)) {
            None => ld::Ld::Zero(false),
            Some(v) => match ld::parse(v) {
                Some(v) => v,
                None => return w.error(b"ERR hash value is not a float"),
            },
        },
    };
    let sum = ld::add(old, by);
    if matches!(sum, ld::Ld::Inf(_) | ld::Ld::Nan) {
        return w.error(b"ERR increment would produce NaN or Infinity");
    }
    let mut text = Vec::with_capacity(32);
    ld::format(sum, &mut text);
    let mut h = write_or_create(&mut db, args[1]).unwrap_or_else(|_| unreachable!("checked type"));
    h.set_keep_ttl(args[2], &text, &limits);
    db.signal(args[1]);
    // Written as HSET of the result (Redis 7.2): float arithmetic may differ on replay.
    ctx.propagate_args(&[b"HSET", args[1], args[2], &text]);
    notify(ctx, HASH, "hincrbyfloat", args[1]);
    w.bulk(&text);
}

/// A small generator seeded from the shard's, so that a command can draw many numbers while
/// it borrows the database.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn pair(w: &mut ReplyWriter, k: &[u8], v: &[u8], withvalues: bool, resp3: bool) {
    if withvalues && resp3 {
        w.array(2);
    }
    w.bulk(k);
    if withvalues {
        w.bulk(v);
    }
}

fn hrandfield(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut rng = Rng(ctx.shard.random() | 1);
    let resp3 = ctx.resp3;
    if args.len() == 2 {
        let mut db = ctx.db();
        lazy_expire(&mut db, args[1], Fields::All);
        return match read(&mut db, args[1]) {
            Err(_) => wrong(w),
            Ok(None) => w.null(),
            Ok(Some(h)) => match h.random(|| rng.next()) {
                Some((k, _)) => w.bulk(k),
                None => w.null(),
            },
        };
    }
    let count = match parse_int(args[2]) {
        None => return w.error(ERR_NOT_INT),
        Some(i64::MIN) => {
            return w.error(
                b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            )
        }
        Some(c) => c,
    };
    let withvalues = args.len() == 4;
    if args.len() > 4 || (withvalues && !eq(args[3], "withvalues")) {
        return w.error(ERR_SYNTAX);
    }
    if withvalues && !(-i64::MAX / 2..=i64::MAX / 2).contains(&count) {
        return w.error(b"ERR value is out of range");
    }
    let max_bytes = ctx.proto_max_bulk_len();
    let mut db = ctx.db();
    lazy_expire(&mut db, args[1], Fields::All);
    let h = match read(&mut db, args[1]) {
        Err(_) => return wrong(w),
        Ok(None) => return w.array(0),
        Ok(Some(h)) => h,
    };
    let size = h.len() as u64;
    let want = count.unsigned_abs();
    if want == 0 || size == 0 {
        return w.array(0);
    }
    let flat = |n: u64| if withvalues && !resp3 { n * 2 } else { n } as usize;
    if count < 0 || want == 1 {
        // Samples with repetition: a reply bounded by super::random_samples.
        let head = |w: &mut ReplyWriter| w.array(flat(want));
        if let HashRef::Pack { .. } = h {
            // A linear listpack: index a snapshot instead of walking it per sample.
            let all: Vec<(&[u8], &[u8])> = h.iter().collect();
            random_samples(w, want, max_bytes, head, |w| {
                let (k, v) = all[(rng.next() % size) as usize];
                pair(w, k, v, withvalues, resp3);
            });
        } else {
            random_samples(w, want, max_bytes, head, |w| {
                let (k, v) = h.random(|| rng.next()).expect("not empty");
                pair(w, k, v, withvalues, resp3);
            });
        }
        return;
    }
    if want >= size {
        // The whole hash, in its order.
        w.array(flat(size));
        for (k, v) in h.iter() {
            pair(w, k, v, withvalues, resp3);
        }
        return;
    }
    w.array(flat(want));
    if matches!(h, HashRef::Pack { .. }) || want * 3 > size {
        // Pick `want` distinct positions (a partial shuffle) and reply in the hash's order.
        let all: Vec<(&[u8], &[u8])> = h.iter().collect();
        let mut idx: Vec<usize> = (0..all.len()).collect();
        for i in 0..want as usize {
            let j = i + (rng.next() % (idx.len() - i) as u64) as usize;
            idx.swap(i, j);
        }
        let mut chosen = idx[..want as usize].to_vec();
        chosen.sort_unstable();
        for i in chosen {
            pair(w, all[i].0, all[i].1, withvalues, resp3);
        }
    } else {
        // Few of many: draw until enough distinct fields (want < size / 3, so few repeats).
        let mut seen: HashSet<&[u8]> = HashSet::new();
        while (seen.len() as u64) < want {
            let (k, v) = h.random(|| rng.next()).expect("not empty");
            if seen.insert(k) {
                pair(w, k, v, withvalues, resp3);
            }
        }
    }
}

fn hscan(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let Some(cursor) = super::parse_cursor(args[2]) else {
        return w.error(b"ERR invalid cursor");
    };
    let mut db = ctx.db();
    let now = db.now_ms();
    let h = match read(&mut db, args[1]) {
        Err(_) => return wrong(w),
        Ok(None) => {
            w.array(2);
            w.bulk(b"0");
            return w.array(0);
        }
        Ok(Some(h)) => h,
    };
    let mut count = 10usize;
    let mut pattern: Option<&[u8]> = None;
    let mut novalues = false;
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if eq(args[i], "count") && more {
            match parse_int(args[i + 1]) {
                None => return w.error(ERR_NOT_INT),
                Some(c) if c < 1 => return w.error(ERR_SYNTAX),
                Some(c) => count = usize::try_from(c).unwrap_or(usize::MAX),
            }
            i += 2;
        } else if eq(args[i], "match") && more {
            // "*" matches everything: the same as no pattern.
            pattern = (args[i + 1] != b"*").then_some(args[i + 1]);
            i += 2;
        } else if eq(args[i], "novalues") {
            novalues = true;
            i += 1;
        } else {
            return w.error(ERR_SYNTAX);
        }
    }
    let mut found: Vec<(&[u8], &[u8])> = Vec::new();
    let next = h.scan_ttl(cursor, count, |k, v, e| {
        // An expired field is skipped, not removed: HSCAN reads (the next access removes it).
        if e.is_none_or(|e| e > now) && pattern.is_none_or(|p| glob_match(p, k, false)) {
            found.push((k, v));
        }
    });
    w.array(2);
    w.bulk(next.to_string().as_bytes());
    w.array(if novalues {
        found.len()
    } else {
        found.len() * 2
    });
    for (k, v) in found {
        w.bulk(k);
        if !novalues {
            w.bulk(v);
        }
    }
}

/// The largest absolute field expiry Redis 7.4 accepts, in unix ms (`HFE_MAX_ABS_TIME_MSEC`:
/// 2^46 - 1, about the year 4199).
const MAX_FIELD_EXPIRE_MS: i64 = (1 << 46) - 1;

/// Redis's `parseExpireTime` for field TTLs: `arg` counts seconds (`unit_ms` 1000) or
/// milliseconds (1), from `base` (now for a relative time, 0 for a unix time). Returns the
/// expiry in unix ms, or the error to reply (`name`: the command, for the range error).
fn parse_field_expire(arg: &[u8], unit_ms: i64, base: i64, name: &str) -> Result<i64, Vec<u8>> {
    let Some(mut when) = parse_int(arg) else {
        return Err(ERR_NOT_INT.to_vec());
    };
    if when < 0 {
        return Err(b"ERR invalid expire time, must be >= 0".to_vec());
    }
    let bad_time = || format!("ERR invalid expire time in '{name}' command").into_bytes();
    if unit_ms == 1000 {
        if when > MAX_FIELD_EXPIRE_MS / 1000 {
            return Err(bad_time());
        }
        when *= 1000;
    }
    if when > MAX_FIELD_EXPIRE_MS - base {
        return Err(bad_time());
    }
    Ok(when + base)
}

const ERR_NO_FIELDS: &[u8] =
    b"ERR Mandatory argument FIELDS is missing or not at the right position";
const ERR_NUMFIELDS_MISMATCH: &[u8] =
    b"ERR The `numfields` parameter must match the number of arguments";

/// The `FIELDS numfields field ...` block starting at `args[at]`: the fields, or the error
/// to reply (`bad_count`: the text for a numfields that is not a positive integer, which
/// differs between the setters and the readers in Redis 7.4).
/// `FIELDS numfields field ...` from `at`, with the fields named found expired removed first
/// (lazy expiry); None: the parse error is written.
fn expired_fields<'a>(
    db: &mut DbView<'_>,
    args: &'a [&'a [u8]],
    at: usize,
    w: &mut ReplyWriter,
) -> Option<&'a [&'a [u8]]> {
    match parse_fields(args, at, ERR_NUMFIELDS_READ) {
        Ok(fields) => {
            lazy_expire(db, args[1], Fields::Some(fields));
            Some(fields)
        }
        Err(e) => {
            w.error(e);
            None
        }
    }
}

fn parse_fields<'a>(
    args: &'a [&'a [u8]],
    at: usize,
    bad_count: &'static [u8],
) -> Result<&'a [&'a [u8]], &'static [u8]> {
    if at + 1 >= args.len() || !eq(args[at], "fields") {
        return Err(ERR_NO_FIELDS);
    }
    let n = match parse_int(args[at + 1]) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err(bad_count),
    };
    let fields = &args[at + 2..];
    if n != fields.len() as u64 {
        return Err(ERR_NUMFIELDS_MISMATCH);
    }
    Ok(fields)
}

/// HEXPIRE's optional condition.
#[derive(Clone, Copy, PartialEq)]
enum Cond {
    Always,
    Nx,
    Xx,
    Gt,
    Lt,
}

/// HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT: `unit_ms` is 1000 or 1, `relative` adds now.
fn hexpire_generic(
    ctx: &mut ShardCtx,
    args: &[&[u8]],
    w: &mut ReplyWriter,
    name: &str,
    unit_ms: i64,
    relative: bool,
) {
    let logging = ctx.propagating();
    let mut db = ctx.db();
    let now = db.now_ms();
    if write(&mut db, args[1]).is_err() {
        return wrong(w);
    }
    let base = if relative { now } else { 0 };
    let when = match parse_field_expire(args[2], unit_ms, base, name) {
        Ok(when) => when,
        Err(e) => return w.error(&e),
    };
    let a = args[3];
    let cond = if eq(a, "nx") {
        Cond::Nx
    } else if eq(a, "xx") {
        Cond::Xx
    } else if eq(a, "gt") {
        Cond::Gt
    } else if eq(a, "lt") {
        Cond::Lt
    } else {
        Cond::Always
    };
    let at = if cond == Cond::Always { 3 } else { 4 };
    let fields = match parse_fields(
        args,
        at,
        b"ERR Parameter `numFields` should be greater than 0",
    ) {
        Ok(f) => f,
        Err(e) => return w.error(e),
    };
    lazy_expire(&mut db, args[1], Fields::Some(fields));
    // A time already past removes the field on a primary only: a replica keeps it, hidden,
    // until the primary's HDEL (Redis's checkAlreadyExpired is false on a replica).
    let held = db.expiry_held();
    let Ok(Some(mut h)) = write(&mut db, args[1]) else {
        w.array(fields.len());
        for _ in fields {
            w.int(-2);
        }
        ctx.propagate_nothing();
        return;
    };
    // Redis 7.4 turns a listpack hash into "listpackex" whenever this family runs on it.
    h.mark_ex();
    let (mut changed, mut deleted) = (false, false);
    // For the AOF: the fields removed (a time already past) and those given the TTL.
    let (mut removed, mut updated): (Vec<&[u8]>, Vec<&[u8]>) = (Vec::new(), Vec::new());
    w.array(fields.len());
    for f in fields {
        let Some(prev) = h.expiry_of(f) else {
            w.int(-2);
            continue;
        };
        // No TTL counts as an infinite one: GT never holds, LT always does.
        let met = match (cond, prev) {
            (Cond::Always, _) => true,
            (Cond::Nx, p) => p.is_none(),
            (Cond::Xx, p) => p.is_some(),
            (Cond::Gt, p) => p.is_some_and(|p| when > p),
            (Cond::Lt, p) => p.is_none_or(|p| when < p),
        };
        if !met {
            w.int(0);
            continue;
        }
        changed = true;
        if when <= now && !held {
            h.remove(f);
            deleted = true;
            if logging {
                removed.push(f);
            }
            w.int(2);
        } else {
            h.set_expiry(f, Some(when));
            if logging {
                updated.push(f);
            }
            w.int(1);
        }
    }
    let with_ttls = h.has_ttls();
    let empty = h.is_empty();
    if empty {
        db.remove(args[1]);
    } else if changed {
        db.signal(args[1]);
    }
    if with_ttls {
        // The active expiry cycle removes the fields nobody reads again.
        db.note_field_ttls(args[1]);
    }
    // Written as Redis 7.4 does: HDEL of the fields a past time removed, then HPEXPIREAT
    // with the absolute time for the fields that got it (the condition kept); nothing when
    // no field changed.
    if !removed.is_empty() {
        let mut v = super::argv(&[b"HDEL", args[1]]);
        v.extend(removed.iter().map(|f| Bytes::copy_from_slice(f)));
        ctx.propagate(v);
    }
    if !updated.is_empty() {
        let mut v = super::argv(&[b"HPEXPIREAT", args[1]]);
        v.push(super::num_arg(when));
        if cond != Cond::Always {
            v.push(Bytes::copy_from_slice(args[3]));
        }
        v.push(Bytes::from_static(b"FIELDS"));
        v.push(super::num_arg(updated.len() as i64));
        v.extend(updated.iter().map(|f| Bytes::copy_from_slice(f)));
        ctx.propagate(v);
    }
    if removed.is_empty() && updated.is_empty() {
        ctx.propagate_nothing();
    }
    if changed {
        // Redis 7.4: `hdel` when a time already past removed fields, else `hexpire`; `del`
        // for a hash left empty.
        notify(ctx, HASH, if deleted { "hdel" } else { "hexpire" }, args[1]);
        if empty {
            notify(ctx, GENERIC, "del", args[1]);
        }
    }
}

fn hexpire(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    hexpire_generic(ctx, args, w, "hexpire", 1000, true)
}

fn hpexpire(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    hexpire_generic(ctx, args, w, "hpexpire", 1, true)
}

fn hexpireat(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    hexpire_generic(ctx, args, w, "hexpireat", 1000, false)
}

fn hpexpireat(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    hexpire_generic(ctx, args, w, "hpexpireat", 1, false)
}

const ERR_NUMFIELDS_READ: &[u8] = b"ERR Number of fields must be a positive integer";

/// HTTL, HPTTL, HEXPIRETIME, HPEXPIRETIME: per field -2 (no such field), -1 (no TTL) or
/// `time(expiry_ms, now_ms)`.
fn httl_generic(
    ctx: &mut ShardCtx,
    args: &[&[u8]],
    w: &mut ReplyWriter,
    time: fn(i64, i64) -> i64,
) {
    let mut db = ctx.db();
    let now = db.now_ms();
    if read(&mut db, args[1]).is_err() {
        return wrong(w);
    }
    let Some(fields) = expired_fields(&mut db, args, 2, w) else {
        return;
    };
    let hide = hide_due(&db);
    let h = peek_hash(&mut db, args[1]);
    w.array(fields.len());
    for f in fields {
        w.int(match h.and_then(|h| h.expiry_of(f)) {
            e if hidden(e, hide) => -2,
            None => -2,
            Some(None) => -1,
            Some(Some(e)) => time(e, now),
        });
    }
}

fn httl(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    // Rounded up, as Redis 7.4 does for fields (a key's TTL rounds to nearest).
    httl_generic(ctx, args, w, |e, now| (e - now + 999) / 1000)
}

fn hpttl(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    httl_generic(ctx, args, w, |e, now| e - now)
}

fn hexpiretime(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    httl_generic(ctx, args, w, |e, _| (e + 999) / 1000)
}

fn hpexpiretime(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    httl_generic(ctx, args, w, |e, _| e)
}

fn hpersist(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    if write(&mut db, args[1]).is_err() {
        return wrong(w);
    }
    let Some(fields) = expired_fields(&mut db, args, 2, w) else {
        return;
    };
    let hide = hide_due(&db);
    let Ok(Some(mut h)) = write(&mut db, args[1]) else {
        w.array(fields.len());
        for _ in fields {
            w.int(-2);
        }
        return;
    };
    let mut changed = false;
    w.array(fields.len());
    for f in fields {
        w.int(match h.expiry_of(f) {
            e if hidden(e, hide) => -2,
            None => -2,
            Some(None) => -1,
            Some(Some(_)) => {
                h.set_expiry(f, None);
                changed = true;
                1
            }
        });
    }
    if changed {
        db.signal(args[1]);
        notify(ctx, HASH, "hpersist", args[1]);
    } else {
        ctx.propagate_nothing();
    }
}

/// `NAME key [extra...] FIELDS n field...`, for the AOF.
fn fields_cmd(name: &[u8], key: &[u8], extra: &[Bytes], fields: &[&[u8]]) -> Vec<Bytes> {
    let mut v = super::argv(&[name, key]);
    v.extend_from_slice(extra);
    v.push(Bytes::from_static(b"FIELDS"));
    v.push(super::num_arg(fields.len() as i64));
    v.extend(fields.iter().map(|f| Bytes::copy_from_slice(f)));
    v
}

/// Replies `n` nulls (the fields of a missing hash).
fn nulls(w: &mut ReplyWriter, n: usize) {
    w.array(n);
    for _ in 0..n {
        w.null();
    }
}

/// HGETDEL key FIELDS numfields field ... (Redis 8.0): the values (null for a missing
/// field), the fields removed; the key goes with its last field.
fn hgetdel(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    if write(&mut db, args[1]).is_err() {
        return wrong(w);
    }
    let Some(fields) = expired_fields(&mut db, args, 2, w) else {
        return;
    };
    let hide = hide_due(&db);
    let Ok(Some(mut h)) = write(&mut db, args[1]) else {
        ctx.propagate_nothing();
        return nulls(w, fields.len());
    };
    let mut deleted = false;
    w.array(fields.len());
    for f in fields {
        let Some(v) = h.get(f).filter(|_| !hidden(h.expiry_of(f), hide)) else {
            w.null();
            continue;
        };
        w.bulk(v);
        h.remove(f);
        deleted = true;
    }
    let empty = h.is_empty();
    if empty {
        db.remove(args[1]);
    } else if deleted {
        db.signal(args[1]);
    }
    if !deleted {
        ctx.propagate_nothing();
    }
    if deleted {
        notify(ctx, HASH, "hgetdel", args[1]);
        if empty {
            notify(ctx, GENERIC, "del", args[1]);
        }
    }
}

/// What HGETEX does to the TTL of the fields it finds.
#[derive(Clone, Copy, PartialEq)]
enum GetExTtl {
    Untouched,
    Persist,
    /// Expire at this unix ms (at or before now: remove the field).
    At(i64),
}

/// HGETEX key [EX s | PX ms | EXAT unix-s | PXAT unix-ms | PERSIST] FIELDS numfields field ...
/// (Redis 8.0): the values, as HMGET; then the TTL of each field found is set or removed.
///
/// As in Redis 8.0 the option is looked for only right after the key, so a second option
/// (or any other word there) is reported as a misplaced FIELDS.
fn hgetex(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let logging = ctx.propagating();
    let mut db = ctx.db();
    let now = db.now_ms();
    if write(&mut db, args[1]).is_err() {
        return wrong(w);
    }
    let a = args[2];
    let unit = if eq(a, "ex") {
        Some((1000, now))
    } else if eq(a, "px") {
        Some((1, now))
    } else if eq(a, "exat") {
        Some((1000, 0))
    } else if eq(a, "pxat") {
        Some((1, 0))
    } else {
        None
    };
    let (ttl, at) = if let Some((unit_ms, base)) = unit {
        // The arity (-5) guarantees args[3].
        match parse_field_expire(args[3], unit_ms, base, "hgetex") {
            Ok(when) => (GetExTtl::At(when), 4),
            Err(e) => return w.error(&e),
        }
    } else if eq(a, "persist") {
        (GetExTtl::Persist, 3)
    } else {
        (GetExTtl::Untouched, 2)
    };
    if !eq(args[at], "fields") {
        return w.error(ERR_NO_FIELDS);
    }
    if at + 1 >= args.len() {
        // `HGETEX key EX 10 FIELDS`: no count at all (Redis 8.0 reads past its arguments).
        return w.error(b"ERR wrong number of arguments for 'hgetex' command");
    }
    let Some(fields) = expired_fields(&mut db, args, at, w) else {
        return;
    };
    let (hide, held) = (hide_due(&db), db.expiry_held());
    let Ok(Some(mut h)) = write(&mut db, args[1]) else {
        ctx.propagate_nothing();
        return nulls(w, fields.len());
    };
    // The fields whose TTL changed, for the AOF.
    let mut touched: Vec<&[u8]> = Vec::new();
    if ttl != GetExTtl::Untouched {
        // Redis 8 turns a listpack into "listpackex" whenever an option is given.
        h.mark_ex();
    }
    let (mut changed, mut future, mut deleted) = (false, false, false);
    w.array(fields.len());
    for f in fields {
        let Some(v) = h.get(f).filter(|_| !hidden(h.expiry_of(f), hide)) else {
            w.null();
            continue;
        };
        w.bulk(v);
        match ttl {
            GetExTtl::Untouched => {}
            GetExTtl::Persist => {
                if h.expiry_of(f).flatten().is_some() {
                    h.set_expiry(f, None);
                    changed = true;
                    touched.push(f);
                }
            }
            GetExTtl::At(when) if when <= now && !held => {
                h.remove(f);
                changed = true;
                deleted = true;
                touched.push(f);
            }
            GetExTtl::At(when) => {
                h.set_expiry(f, Some(when));
                changed = true;
                future = true;
                touched.push(f);
            }
        }
    }
    // Written as what it did to the TTLs (Redis 8): HPERSIST, HDEL for a time already
    // past, else HPEXPIREAT with the absolute time; nothing for a plain read.
    let aof = if touched.is_empty() || !logging {
        None
    } else {
        let key = args[1];
        Some(match ttl {
            GetExTtl::Persist => fields_cmd(b"HPERSIST", key, &[], &touched),
            GetExTtl::At(when) if when <= now && !held => {
                let mut v = super::argv(&[b"HDEL", key]);
                v.extend(touched.iter().map(|f| Bytes::copy_from_slice(f)));
                v
            }
            GetExTtl::At(when) => fields_cmd(b"HPEXPIREAT", key, &[super::num_arg(when)], &touched),
            GetExTtl::Untouched => unreachable!("no field touched"),
        })
    };
    let nothing = touched.is_empty();
    let event = match ttl {
        _ if deleted => "hdel",
        GetExTtl::Persist => "hpersist",
        _ => "hexpire",
    };
    let empty = h.is_empty();
    let emit = |ctx: &mut ShardCtx| {
        if nothing {
            ctx.propagate_nothing();
        } else if let Some(v) = aof {
            ctx.propagate(v);
        }
    };
    if empty {
        db.remove(args[1]);
        emit(ctx);
        notify(ctx, HASH, event, args[1]);
        notify(ctx, GENERIC, "del", args[1]);
        return;
    }
    if changed {
        db.signal(args[1]);
    }
    if future {
        // The active expiry cycle removes the fields nobody reads again.
        db.note_field_ttls(args[1]);
    }
    emit(ctx);
    if changed {
        notify(ctx, HASH, event, args[1]);
    }
}

/// What HSETEX (Redis form) does to the TTL of the fields it sets.
#[derive(Clone, Copy)]
enum SetExTtl {
    /// No option: a field set loses its TTL (as HSET).
    Clear,
    Keep,
    /// Expire at this unix ms (at or before now: the field is removed right away).
    At(i64),
}

/// The parsed options of the Redis 8 form of HSETEX.
struct SetExRedis {
    /// FNX (true) or FXX (false).
    cond: Option<bool>,
    ttl: SetExTtl,
    /// Index of the first field.
    first: usize,
}

const ERR_HSETEX_ARITY: &[u8] = b"ERR wrong number of arguments for 'hsetex' command";

/// Redis 8.0's option loop of HSETEX: options in any order up to FIELDS; the errors are
/// Redis's, in its order.
fn parse_hsetex_redis(args: &[&[u8]], now: i64) -> Result<SetExRedis, Vec<u8>> {
    let mut cond = None;
    let mut ttl = None;
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        if eq(a, "fields") {
            // Room for a count and one pair at least.
            if i + 3 >= args.len() {
                return Err(ERR_HSETEX_ARITY.to_vec());
            }
            let n = match parse_int(args[i + 1]) {
                Some(n) if (1..=i64::from(i32::MAX)).contains(&n) => n as usize,
                _ => return Err(b"ERR invalid number of fields".to_vec()),
            };
            let rest = args.len() - i - 2;
            if !rest.is_multiple_of(2) || n != rest / 2 {
                return Err(ERR_HSETEX_ARITY.to_vec());
            }
            return Ok(SetExRedis {
                cond,
                ttl: ttl.unwrap_or(SetExTtl::Clear),
                first: i + 2,
            });
        }
        let unit = if eq(a, "ex") {
            Some((1000, now))
        } else if eq(a, "px") {
            Some((1, now))
        } else if eq(a, "exat") {
            Some((1000, 0))
        } else if eq(a, "pxat") {
            Some((1, 0))
        } else {
            None
        };
        let one_ttl = b"ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified";
        if let Some((unit_ms, base)) = unit {
            if ttl.is_some() {
                return Err(one_ttl.to_vec());
            }
            if i + 1 >= args.len() {
                return Err(b"ERR missing expire time".to_vec());
            }
            ttl = Some(SetExTtl::At(parse_field_expire(
                args[i + 1],
                unit_ms,
                base,
                "hsetex",
            )?));
            i += 2;
        } else if eq(a, "keepttl") {
            if ttl.is_some() {
                return Err(one_ttl.to_vec());
            }
            ttl = Some(SetExTtl::Keep);
            i += 1;
        } else if eq(a, "fnx") || eq(a, "fxx") {
            if cond.is_some() {
                return Err(b"ERR Only one of FXX or FNX arguments can be specified".to_vec());
            }
            cond = Some(eq(a, "fnx"));
            i += 1;
        } else {
            // Redis formats the word with %s: it ends at a NUL byte.
            let word = a.split(|&c| c == 0).next().unwrap_or_default();
            return Err([&b"ERR unknown argument: "[..], word].concat());
        }
    }
    // Only options, no FIELDS: Redis's arity (-6) leaves no room for this; ours (-5, for the
    // Dragonfly form) does, so it is an arity error.
    Err(ERR_HSETEX_ARITY.to_vec())
}

/// HSETEX has two forms, told apart by what follows the key:
/// - Redis 8: `HSETEX key [FNX | FXX] [EX s | PX ms | EXAT unix-s | PXAT unix-ms | KEEPTTL]
///   FIELDS numfields field value ...`: replies 1 when the fields were set, 0 when FNX/FXX
///   stopped it.
/// - Dragonfly: `HSETEX key [NX] [KEEPTTL] seconds field value ...`: replies how many fields
///   are new, as HSET.
///
/// Rule: skip the words NX and KEEPTTL after the key; if the next argument is an integer,
/// it is the Dragonfly form (its TTL), otherwise the Redis form (whose first word there is
/// always a keyword: FNX, FXX, EX, PX, EXAT, PXAT or FIELDS, never an integer), which then
/// reports any stray word, NX included, as Redis does ("unknown argument"). No valid command
/// of one form reads as the other. The table's arity is -5 so that the shortest Dragonfly
/// command (`HSETEX key seconds field value`) gets here.
fn hsetex(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut i = 2;
    while i < args.len() && (eq(args[i], "nx") || eq(args[i], "keepttl")) {
        i += 1;
    }
    if i < args.len() && parse_int(args[i]).is_some() {
        hsetex_dragonfly(ctx, args, w, i)
    } else {
        hsetex_redis(ctx, args, w)
    }
}

fn hsetex_redis(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let logging = ctx.propagating();
    let limits = ctx.limits();
    let mut db = ctx.db();
    let now = db.now_ms();
    let opts = match parse_hsetex_redis(args, now) {
        Ok(o) => o,
        Err(e) => return w.error(&e),
    };
    let key = args[1];
    let pairs = &args[opts.first..];
    if write(&mut db, key).is_err() {
        return wrong(w);
    }
    // Expired fields count as absent for FNX / FXX.
    lazy_expire(&mut db, key, Fields::Pairs(pairs));
    if let Some(fnx) = opts.cond {
        let met = match write(&mut db, key) {
            Ok(Some(h)) => pairs.iter().step_by(2).all(|f| h.contains(f) != fnx),
            _ => fnx,
        };
        if !met {
            ctx.propagate_nothing();
            return w.int(0);
        }
    }
    let mut h = write_or_create(&mut db, key).unwrap_or_else(|_| unreachable!("checked type"));
    h.convert_for(&limits, pairs.iter().copied());
    if let SetExTtl::At(_) = opts.ttl {
        // Redis 8 turns a listpack into "listpackex" before setting the TTLs.
        h.mark_ex();
    }
    let mut future = false;
    for p in pairs.chunks(2) {
        match opts.ttl {
            SetExTtl::Clear => {
                h.set(p[0], p[1], &limits);
            }
            SetExTtl::Keep => {
                h.set_keep_ttl(p[0], p[1], &limits);
            }
            SetExTtl::At(when) if when <= now => {
                // Set, then expired at once: the set may still convert the encoding, as in
                // Redis.
                h.set_keep_ttl(p[0], p[1], &limits);
                h.remove(p[0]);
            }
            SetExTtl::At(when) => {
                h.set_expiring(p[0], p[1], when, &limits);
                future = true;
            }
        }
    }
    let empty = h.is_empty();
    if empty {
        db.remove(key);
    } else {
        db.signal(key);
        if future {
            db.note_field_ttls(key);
        }
    }
    // A relative or second TTL is written as PXAT (Redis 8); fields set and removed at once
    // by a time already past are written as HSET then HDEL of them.
    match opts.ttl {
        SetExTtl::At(when) if logging && when <= now => {
            let mut v = super::argv(&[b"HSET", key]);
            v.extend(pairs.iter().map(|f| Bytes::copy_from_slice(f)));
            ctx.propagate(v);
            let mut v = super::argv(&[b"HDEL", key]);
            v.extend(pairs.iter().step_by(2).map(|f| Bytes::copy_from_slice(f)));
            ctx.propagate(v);
        }
        SetExTtl::At(when) if logging => {
            let mut v = super::argv(&[b"HSETEX", key]);
            if let Some(fnx) = opts.cond {
                v.push(Bytes::from_static(if fnx { b"FNX" } else { b"FXX" }));
            }
            v.push(Bytes::from_static(b"PXAT"));
            v.push(super::num_arg(when));
            v.push(Bytes::from_static(b"FIELDS"));
            v.push(super::num_arg((pairs.len() / 2) as i64));
            v.extend(pairs.iter().map(|f| Bytes::copy_from_slice(f)));
            ctx.propagate(v);
        }
        _ => {}
    }
    notify(ctx, HASH, "hset", key);
    match opts.ttl {
        SetExTtl::At(when) if when <= now => notify(ctx, HASH, "hdel", key),
        SetExTtl::At(_) => notify(ctx, HASH, "hexpire", key),
        _ => {}
    }
    if empty {
        notify(ctx, GENERIC, "del", key);
    }
    w.int(1);
}

/// The largest TTL Dragonfly's HSETEX accepts, in seconds (2^26, about 776 days).
const DRAGONFLY_MAX_TTL_S: i64 = 1 << 26;

/// Dragonfly's `HSETEX key [NX] [KEEPTTL] seconds field value ...`; `ttl_at` is the index of
/// `seconds` (see [`hsetex`]). NX keeps existing fields as they are; KEEPTTL keeps the TTL
/// (or its absence) of an existing field whose value it replaces; every other field set
/// expires `seconds` from now. Replies how many fields are new.
fn hsetex_dragonfly(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter, ttl_at: usize) {
    let (mut nx, mut keepttl) = (false, false);
    for a in &args[2..ttl_at] {
        let flag = if eq(a, "nx") { &mut nx } else { &mut keepttl };
        if *flag {
            // Dragonfly's answer to a repeated flag.
            return w.error(ERR_HSETEX_ARITY);
        }
        *flag = true;
    }
    let secs = match parse_int(args[ttl_at]) {
        Some(s) if (1..=DRAGONFLY_MAX_TTL_S).contains(&s) => s,
        _ => return w.error(ERR_NOT_INT),
    };
    let pairs = &args[ttl_at + 1..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return w.error(ERR_HSETEX_ARITY);
    }
    let logging = ctx.propagating();
    let limits = ctx.limits();
    let mut db = ctx.db();
    let key = args[1];
    let when = db.now_ms() + secs * 1000;
    // For the AOF: the pairs set keeping their field's TTL, and those given the new one.
    let (mut kept, mut timed): (Vec<&[u8]>, Vec<&[u8]>) = (Vec::new(), Vec::new());
    lazy_expire(&mut db, key, Fields::Pairs(pairs));
    let Ok(mut h) = write_or_create(&mut db, key) else {
        return wrong(w);
    };
    h.convert_for(&limits, pairs.iter().copied());
    let (mut created, mut changed, mut future) = (0, false, false);
    for p in pairs.chunks(2) {
        let exists = h.contains(p[0]);
        if exists && nx {
            continue;
        }
        changed = true;
        if exists && keepttl {
            h.set_keep_ttl(p[0], p[1], &limits);
            if logging {
                kept.extend_from_slice(p);
            }
        } else {
            h.set_expiring(p[0], p[1], when, &limits);
            future = true;
            if logging {
                timed.extend_from_slice(p);
            }
        }
        created += i64::from(!exists);
    }
    if changed {
        db.signal(key);
    }
    if future {
        db.note_field_ttls(key);
    }
    // Written in Redis 8's form, which says exactly what happened to each field:
    // `HSETEX key KEEPTTL FIELDS ...` for those that kept their TTL, `HSETEX key PXAT <ms>
    // FIELDS ...` for the others.
    for (opt, set) in [
        (vec![Bytes::from_static(b"KEEPTTL")], &kept),
        (
            vec![Bytes::from_static(b"PXAT"), super::num_arg(when)],
            &timed,
        ),
    ] {
        if !set.is_empty() {
            let mut v = super::argv(&[b"HSETEX", key]);
            v.extend(opt);
            v.push(Bytes::from_static(b"FIELDS"));
            v.push(super::num_arg((set.len() / 2) as i64));
            v.extend(set.iter().map(|f| Bytes::copy_from_slice(f)));
            ctx.propagate(v);
        }
    }
    if !changed {
        ctx.propagate_nothing();
    }
    if changed {
        notify(ctx, HASH, "hset", key);
        if future {
            notify(ctx, HASH, "hexpire", key);
        }
    }
    w.int(created);
}

#[cfg(test)]
mod tests {
    use super::{parse_hsetex_redis, SetExTtl};

    fn words(s: &str) -> Vec<&[u8]> {
        s.split(' ').map(str::as_bytes).collect()
    }

    #[test]
    fn hsetex_redis_options() {
        let o = parse_hsetex_redis(&words("HSETEX k PX 5 FNX FIELDS 1 f v"), 1000).unwrap();
        assert_eq!((o.cond, o.first), (Some(true), 7));
        assert!(matches!(o.ttl, SetExTtl::At(1005)));
        let o = parse_hsetex_redis(&words("HSETEX k EXAT 2 FIELDS 1 f v"), 1000).unwrap();
        assert!(matches!(o.ttl, SetExTtl::At(2000)));
        let o = parse_hsetex_redis(&words("HSETEX k KEEPTTL FXX FIELDS 1 f v"), 0).unwrap();
        assert!(matches!(o.ttl, SetExTtl::Keep) && o.cond == Some(false));
        let o = parse_hsetex_redis(&words("HSETEX k FIELDS 2 a 1 b 2"), 0).unwrap();
        assert!(matches!(o.ttl, SetExTtl::Clear) && o.cond.is_none());
        let err = |s| String::from_utf8(parse_hsetex_redis(&words(s), 0).err().unwrap()).unwrap();
        assert_eq!(err("HSETEX k EX"), "ERR missing expire time");
        assert_eq!(err("HSETEX k a\0b"), "ERR unknown argument: a");
        assert!(err("HSETEX k FIELDS 1 a 1 b 2").starts_with("ERR wrong number"));
        assert!(err("HSETEX k FNX").starts_with("ERR wrong number"));
    }

    #[test]
    fn cursor_parsing_follows_strtoul() {
        assert_eq!(crate::cmd::parse_cursor(b""), Some(0));
        assert_eq!(crate::cmd::parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(crate::cmd::parse_cursor(b"18446744073709551616"), None);
        assert_eq!(crate::cmd::parse_cursor(b"1x"), None);
    }
}
