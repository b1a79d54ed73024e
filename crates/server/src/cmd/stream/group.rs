//! Consumer groups: XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO (XREADGROUP is in
//! read.rs, with XREAD). Reply shapes, error texts and the order of the checks follow Redis
//! 7.2's t_stream.c; the lag and entries-read bookkeeping is
//! `darner_engine::types::stream::group`.

use super::{
    parse_id, parse_interval, parse_ll, parse_strict, write, write_entry, write_id, WrongType,
};
use crate::cmd::server::{help_reply, subcommand_error};
use crate::cmd::{eq, ConnCtx, Locks, Reg, ERR_NO_SUCH_KEY, ERR_SYNTAX, ERR_WRONGTYPE};
use crate::notify::{notify, STREAM};
use crate::shard::ShardCtx;
use crate::stream::{Seg, Segs};
use bytes::Bytes;
use darner_engine::types::stream::{Consumer, Group, Nack};
use darner_engine::types::{Stream, StreamId};
use darner_engine::{Entry, Value, ValueRef};
use darner_resp::ReplyWriter;
use std::collections::BTreeMap;

/// Redis's `streamPropagateXCLAIM`: the XCLAIM that redoes a delivery or a claim of `id` (or
/// removes it from the PEL where the entry was deleted) exactly whenever it is replayed: the
/// pending entry's owner, time and count, and the group's last id.
pub fn xclaim_argv(
    key: &[u8],
    group: &[u8],
    id: StreamId,
    nack: &Nack,
    last: StreamId,
) -> Vec<Bytes> {
    let mut v = crate::cmd::argv(&[b"XCLAIM", key, group, &nack.consumer, b"0"]);
    v.push(Bytes::from(id.to_bytes()));
    v.push(Bytes::from_static(b"TIME"));
    v.push(crate::cmd::num_arg(nack.delivery_time));
    v.push(Bytes::from_static(b"RETRYCOUNT"));
    v.push(Bytes::from(nack.delivery_count.to_string()));
    v.push(Bytes::from_static(b"FORCE"));
    v.push(Bytes::from_static(b"JUSTID"));
    v.push(Bytes::from_static(b"LASTID"));
    v.push(Bytes::from(last.to_bytes()));
    v
}

/// Redis's `streamPropagateGroupID`: `XGROUP SETID key group <last id> ENTRIESREAD <n>`
/// (-1 for an unknown count).
pub fn setid_argv(key: &[u8], group: &[u8], g: &Group) -> Vec<Bytes> {
    let mut v = crate::cmd::argv(&[b"XGROUP", b"SETID", key, group]);
    v.push(Bytes::from(g.last_id.to_bytes()));
    v.push(Bytes::from_static(b"ENTRIESREAD"));
    v.push(match g.entries_read {
        Some(n) => Bytes::from(n.to_string()),
        None => Bytes::from_static(b"-1"),
    });
    v
}

/// `XGROUP CREATECONSUMER key group consumer`, for a consumer created by a command whose
/// other writes do not create it on replay.
pub fn createconsumer_argv(key: &[u8], group: &[u8], consumer: &[u8]) -> Vec<Bytes> {
    crate::cmd::argv(&[b"XGROUP", b"CREATECONSUMER", key, group, consumer])
}

pub fn register(r: &mut Reg) {
    r.key("xgroup|create", xgroup_create);
    r.key("xgroup|setid", xgroup_setid);
    r.key("xgroup|destroy", xgroup_destroy);
    r.key("xgroup|createconsumer", xgroup_createconsumer);
    r.key("xgroup|delconsumer", xgroup_delconsumer);
    r.conn("xgroup|help", xgroup_help);
    r.key("xack", xack);
    r.key("xpending", xpending);
    r.key("xclaim", xclaim);
    r.key("xautoclaim", xautoclaim);
    r.key("xinfo|stream", xinfo_stream);
    r.key("xinfo|groups", xinfo_groups);
    r.key("xinfo|consumers", xinfo_consumers);
    r.conn("xinfo|help", xinfo_help);
    r.tx_single(
        "xreadgroup",
        Locks::Keys,
        super::read::xreadgroup,
        super::read::xreadgroup_single,
    );
}

/// `-NOGROUP` for XPENDING, XCLAIM and XAUTOCLAIM.
pub fn nogroup_key_or_group(key: &[u8], group: &[u8]) -> Vec<u8> {
    let mut e = b"NOGROUP No such key '".to_vec();
    e.extend_from_slice(key);
    e.extend_from_slice(b"' or consumer group '");
    e.extend_from_slice(group);
    e.push(b'\'');
    e
}

/// `-NOGROUP` for XGROUP and XINFO CONSUMERS.
fn nogroup_for_key(key: &[u8], group: &[u8]) -> Vec<u8> {
    let mut e = b"NOGROUP No such consumer group '".to_vec();
    e.extend_from_slice(group);
    e.extend_from_slice(b"' for key name '");
    e.extend_from_slice(key);
    e.push(b'\'');
    e
}

/// Creates `name` in `g` if it is not there (notifying `xgroup-createconsumer`, as Redis's
/// streamCreateConsumer does); whether it was created.
pub fn ensure_consumer(g: &mut Group, name: &[u8], now: i64) -> bool {
    if g.consumers.contains_key(name) {
        return false;
    }
    g.consumers.insert(name.to_vec(), Consumer::new(now));
    true
}

/// Runs `f` with the stream and one of its groups borrowed apart (the group is taken out of
/// the stream for the call).
pub fn with_group<R>(
    s: &mut Stream,
    name: &[u8],
    f: impl FnOnce(&Stream, &mut Group) -> R,
) -> Option<R> {
    let mut groups = s.groups.take()?;
    let r = groups.get_mut(name).map(|g| f(s, g));
    s.groups = Some(groups);
    r
}

// ---- XGROUP ------------------------------------------------------------------------------------

/// What XGROUP's common preamble found (Redis's xgroupCommand before the dispatch).
struct XGroupArgs {
    mkstream: bool,
    entries_read: Option<u64>,
}

/// XGROUP's options from `args[5]` on: MKSTREAM (CREATE), ENTRIESREAD (CREATE, SETID).
fn xgroup_options(args: &[&[u8]], w: &mut ReplyWriter) -> Option<XGroupArgs> {
    let mut a = XGroupArgs {
        mkstream: false,
        entries_read: None,
    };
    let create = eq(args[1], "create");
    let setid = eq(args[1], "setid");
    let mut i = 5;
    while i < args.len() {
        if create && eq(args[i], "mkstream") {
            a.mkstream = true;
            i += 1;
        } else if (create || setid) && eq(args[i], "entriesread") && i + 1 < args.len() {
            match parse_ll(args[i + 1]) {
                Ok(-1) => a.entries_read = None,
                Ok(n) if n < 0 => {
                    w.error(b"ERR value for ENTRIESREAD must be positive or -1");
                    return None;
                }
                Ok(n) => a.entries_read = Some(n as u64),
                Err(e) => {
                    w.error(e);
                    return None;
                }
            }
            i += 2;
        } else {
            subcommand_error(w, args[0], args[1]);
            return None;
        }
    }
    Some(a)
}

/// The stream of an XGROUP subcommand: `Err(())` once an error was written.
fn xgroup_stream<'a>(
    db: &'a mut darner_engine::DbView<'_>,
    key: &[u8],
    w: &mut ReplyWriter,
) -> Result<Option<&'a mut Stream>, ()> {
    match write(db, key) {
        Ok(s) => Ok(s),
        Err(WrongType) => {
            w.error(ERR_WRONGTYPE);
            Err(())
        }
    }
}

const ERR_XGROUP_NO_KEY: &[u8] = b"ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";

fn xgroup_create(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let Some(opts) = xgroup_options(args, w) else {
        return;
    };
    let (key, name) = (args[2], args[3]);
    let mut db = ctx.db();
    let exists = match xgroup_stream(&mut db, key, w) {
        Err(()) => return,
        Ok(s) => s.is_some(),
    };
    if !exists && !opts.mkstream {
        return w.error(ERR_XGROUP_NO_KEY);
    }
    if !(5..=8).contains(&args.len()) {
        return subcommand_error(w, args[0], args[1]);
    }
    let id = if args[4] == b"$" {
        match write(&mut db, key) {
            Ok(Some(s)) => s.last_id,
            _ => StreamId::MIN,
        }
    } else {
        match parse_strict(args[4]) {
            Ok(id) => id,
            Err(e) => return w.error(e),
        }
    };
    if !exists {
        let lru = db.clock.lru;
        db.set(Entry::new_value(
            key,
            Value::Stream(Box::default()),
            None,
            lru,
        ));
    }
    let s = match write(&mut db, key) {
        Ok(Some(s)) => s,
        _ => return,
    };
    let groups = s.groups.get_or_insert_with(Box::default);
    if groups.contains_key(name) {
        return w.error(b"BUSYGROUP Consumer Group name already exists");
    }
    groups.insert(name.to_vec(), Group::new(id, opts.entries_read));
    w.simple(b"OK");
    notify(ctx, STREAM, "xgroup-create", key);
}

/// The group of an XGROUP subcommand that needs one (SETID, CREATECONSUMER, DELCONSUMER):
/// the preamble's errors written, or the stream.
fn xgroup_needs_group<'a>(
    db: &'a mut darner_engine::DbView<'_>,
    args: &[&[u8]],
    w: &mut ReplyWriter,
) -> Option<&'a mut Stream> {
    let s = match xgroup_stream(db, args[2], w) {
        Err(()) => return None,
        Ok(None) => {
            w.error(ERR_XGROUP_NO_KEY);
            return None;
        }
        Ok(Some(s)) => s,
    };
    if s.group(args[3]).is_none() {
        w.error(&nogroup_for_key(args[2], args[3]));
        return None;
    }
    Some(s)
}

fn xgroup_setid(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let Some(opts) = xgroup_options(args, w) else {
        return;
    };
    let mut db = ctx.db();
    let Some(s) = xgroup_needs_group(&mut db, args, w) else {
        return;
    };
    if args.len() != 5 && args.len() != 7 {
        return subcommand_error(w, args[0], args[1]);
    }
    let id = if args[4] == b"$" {
        s.last_id
    } else {
        match parse_id(args[4], 0, false, false) {
            Ok(p) => p.id,
            Err(e) => return w.error(e),
        }
    };
    let g = s.group_mut(args[3]).expect("checked");
    g.last_id = id;
    g.entries_read = opts.entries_read;
    w.simple(b"OK");
    notify(ctx, STREAM, "xgroup-setid", args[2]);
}

fn xgroup_destroy(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    if xgroup_options(args, w).is_none() {
        return;
    }
    let key = args[2];
    let mut db = ctx.db();
    let s = match xgroup_stream(&mut db, key, w) {
        Err(()) => return,
        Ok(None) => return w.error(ERR_XGROUP_NO_KEY),
        Ok(Some(s)) => s,
    };
    if args.len() != 4 {
        return subcommand_error(w, args[0], args[1]);
    }
    let removed = s
        .groups
        .as_mut()
        .is_some_and(|g| g.remove(args[3]).is_some());
    if removed {
        // Wakes XREADGROUP clients blocked on the group: they get -NOGROUP.
        db.signal(key);
        w.int(1);
        notify(ctx, STREAM, "xgroup-destroy", key);
    } else {
        w.int(0);
        super::unchanged(ctx);
    }
}

/// CREATECONSUMER / DELCONSUMER: the group `args[3]` of stream `args[2]`, or None with the
/// error replied (options, key, group and argument count checked in Redis's order).
fn xgroup_consumer_group<'a>(
    db: &'a mut darner_engine::DbView<'_>,
    args: &[&[u8]],
    w: &mut ReplyWriter,
) -> Option<&'a mut Group> {
    xgroup_options(args, w)?;
    let s = xgroup_needs_group(db, args, w)?;
    if args.len() != 5 {
        subcommand_error(w, args[0], args[1]);
        return None;
    }
    s.group_mut(args[3])
}

fn xgroup_createconsumer(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let now = crate::shared::recorded_time(ctx.now_ms());
    let mut db = ctx.db();
    let Some(g) = xgroup_consumer_group(&mut db, args, w) else {
        return;
    };
    let created = ensure_consumer(g, args[4], now);
    w.int(i64::from(created));
    if created {
        notify(ctx, STREAM, "xgroup-createconsumer", args[2]);
    } else {
        super::unchanged(ctx);
    }
}

fn xgroup_delconsumer(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    let Some(g) = xgroup_consumer_group(&mut db, args, w) else {
        return;
    };
    match g.remove_consumer(args[4]) {
        Some(pending) => {
            w.int(pending as i64);
            notify(ctx, STREAM, "xgroup-delconsumer", args[2]);
        }
        None => {
            w.int(0);
            super::unchanged(ctx);
        }
    }
}

fn xgroup_help(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    help_reply(
        w,
        args[0],
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    );
}

// ---- XACK, XPENDING ----------------------------------------------------------------------------

fn xack(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    let s = match write(&mut db, args[1]) {
        Err(WrongType) => return w.error(ERR_WRONGTYPE),
        Ok(s) => s,
    };
    // No key or group: nothing acknowledged, the ids unchecked (as Redis).
    let n = match s.and_then(|s| s.group_mut(args[2])) {
        Some(g) => match super::parse_strict_all(&args[3..]) {
            Ok(ids) => ids.into_iter().filter(|&id| g.ack(id)).count(),
            Err(e) => return w.error(e),
        },
        None => 0,
    };
    w.int(n as i64);
    if n == 0 {
        super::unchanged(ctx);
    }
}

fn xpending(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let (key, group) = (args[1], args[2]);
    if args.len() != 3 && !(6..=9).contains(&args.len()) {
        return w.error(ERR_SYNTAX);
    }
    let mut range = None;
    let mut min_idle = 0i64;
    if args.len() >= 6 {
        let mut at = 3;
        if eq(args[3], "idle") {
            match parse_ll(args[4]) {
                Ok(v) => min_idle = v,
                Err(e) => return w.error(e),
            }
            if args.len() < 8 {
                return w.error(ERR_SYNTAX);
            }
            at += 2;
        }
        let count = match parse_ll(args[at + 2]) {
            Ok(c) => c.max(0) as u64,
            Err(e) => return w.error(e),
        };
        let start = match parse_interval(args[at], 0) {
            Ok((id, false)) => id,
            Ok((id, true)) => match id.next() {
                Some(id) => id,
                None => return w.error(b"ERR invalid start ID for the interval"),
            },
            Err(e) => return w.error(e),
        };
        let end = match parse_interval(args[at + 1], u64::MAX) {
            Ok((id, false)) => id,
            Ok((id, true)) => match id.prev() {
                Some(id) => id,
                None => return w.error(b"ERR invalid end ID for the interval"),
            },
            Err(e) => return w.error(e),
        };
        range = Some((start, end, count, args.get(at + 3).copied()));
    }
    let now = ctx.now_ms();
    let mut db = ctx.db();
    let g = match super::read(&mut db, key) {
        Err(WrongType) => return w.error(ERR_WRONGTYPE),
        Ok(s) => s.and_then(|s| s.group(group)),
    };
    let Some(g) = g else {
        return w.error(&nogroup_key_or_group(key, group));
    };
    let Some((start, end, mut count, consumer)) = range else {
        w.array(4);
        w.int(g.pel.len() as i64);
        match (g.pel.keys().next(), g.pel.keys().next_back()) {
            (Some(&first), Some(&last)) => {
                write_id(w, first);
                write_id(w, last);
                let owners: Vec<(&Vec<u8>, &Consumer)> = g
                    .consumers
                    .iter()
                    .filter(|(_, c)| !c.pel.is_empty())
                    .collect();
                w.array(owners.len());
                for (name, c) in owners {
                    w.array(2);
                    w.bulk(name);
                    w.bulk(c.pel.len().to_string().as_bytes());
                }
            }
            _ => {
                w.null();
                w.null();
                w.null_array();
            }
        }
        return;
    };
    let ids: Vec<StreamId> = match consumer {
        Some(c) => match g.consumers.get(c) {
            None => return w.array(0),
            Some(c) => c.pel.iter().copied().collect(),
        },
        None => g.pel.keys().copied().collect(),
    };
    let mut out: Vec<(StreamId, &[u8], i64, u64)> = Vec::new();
    if start <= end {
        for id in ids {
            if count == 0 || id > end {
                break;
            }
            if id < start {
                continue;
            }
            let n = &g.pel[&id];
            if min_idle != 0 && now - n.delivery_time < min_idle {
                continue;
            }
            count -= 1;
            out.push((
                id,
                &n.consumer,
                (now - n.delivery_time).max(0),
                n.delivery_count,
            ));
        }
    }
    w.array(out.len());
    for (id, c, idle, deliveries) in out {
        w.array(4);
        write_id(w, id);
        w.bulk(c);
        w.int(idle);
        w.int(deliveries as i64);
    }
}

// ---- XCLAIM, XAUTOCLAIM ------------------------------------------------------------------------

/// XCLAIM / XAUTOCLAIM's stream, which must have `group`; None with the error replied.
fn stream_with_group<'a>(
    db: &'a mut darner_engine::DbView<'_>,
    key: &[u8],
    group: &[u8],
    w: &mut ReplyWriter,
) -> Option<&'a mut Stream> {
    match write(db, key) {
        Err(WrongType) => {
            w.error(ERR_WRONGTYPE);
            None
        }
        Ok(Some(s)) if s.group(group).is_some() => Some(s),
        Ok(_) => {
            w.error(&nogroup_key_or_group(key, group));
            None
        }
    }
}

fn xclaim(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let (key, group, consumer) = (args[1], args[2], args[3]);
    let now = crate::shared::recorded_time(ctx.now_ms());
    let logging = ctx.propagating();
    let mut db = ctx.db();
    let Some(s) = stream_with_group(&mut db, key, group, w) else {
        return;
    };
    let min_idle = match super::parse_int(args[4]) {
        Some(v) => v.max(0),
        None => return w.error(b"ERR Invalid min-idle-time argument for XCLAIM"),
    };
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match parse_strict(args[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let (mut force, mut justid) = (false, false);
    let mut retrycount: Option<u64> = None;
    let mut delivery: Option<i64> = None;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args[j];
        let int_opt = |a: &[u8], what: &str| {
            super::parse_int(a).ok_or_else(|| {
                format!("ERR Invalid {what} option argument for XCLAIM").into_bytes()
            })
        };
        if eq(opt, "force") {
            force = true;
        } else if eq(opt, "justid") {
            justid = true;
        } else if eq(opt, "idle") && more > 0 {
            j += 1;
            match int_opt(args[j], "IDLE") {
                Ok(v) => delivery = Some(now.wrapping_sub(v)),
                Err(e) => return w.error(&e),
            }
        } else if eq(opt, "time") && more > 0 {
            j += 1;
            match int_opt(args[j], "TIME") {
                Ok(v) => delivery = Some(v),
                Err(e) => return w.error(&e),
            }
        } else if eq(opt, "retrycount") && more > 0 {
            j += 1;
            match int_opt(args[j], "RETRYCOUNT") {
                // A negative count is as none given (Redis's -1 default).
                Ok(v) => retrycount = u64::try_from(v).ok(),
                Err(e) => return w.error(&e),
            }
        } else if eq(opt, "lastid") && more > 0 {
            j += 1;
            match parse_strict(args[j]) {
                Ok(id) => last_id = id,
                Err(e) => return w.error(e),
            }
        } else {
            let mut e = b"ERR Unrecognized XCLAIM option '".to_vec();
            e.extend_from_slice(opt);
            e.push(b'\'');
            return w.error(&e);
        }
        j += 1;
    }
    let delivery = match delivery {
        Some(t) if t >= 0 && t <= now => t,
        _ => now,
    };
    let mut created = false;
    let mut reply = Vec::new();
    let mut rw = ReplyWriter::new(&mut reply, w.resp3);
    let mut n = 0;
    // What is written (Redis 7.2): an XCLAIM with every detail per entry claimed or dropped
    // from the PEL, else XGROUP SETID when LASTID moved the group.
    let mut aof: Vec<Vec<Bytes>> = Vec::new();
    // LASTID moved the group, or an entry was dropped from the PEL (deleted from the stream).
    let mut changed = false;
    with_group(s, group, |s, g| {
        let moved = last_id > g.last_id;
        if moved {
            g.last_id = last_id;
            changed = true;
        }
        created = ensure_consumer(g, consumer, now);
        g.consumers.get_mut(consumer).expect("created").seen_time = now;
        for id in ids {
            if !s.contains(id) {
                if let (true, Some(nack)) = (logging, g.pel.get(&id)) {
                    aof.push(xclaim_argv(key, group, id, nack, g.last_id));
                }
                changed |= g.ack(id);
                continue;
            }
            // A FORCE-created entry has no owner yet: no idle check, no transfer.
            let fresh = match g.pel.entry(id) {
                std::collections::btree_map::Entry::Occupied(_) => false,
                std::collections::btree_map::Entry::Vacant(v) => {
                    if !force {
                        continue;
                    }
                    v.insert(darner_engine::types::stream::Nack {
                        consumer: consumer.to_vec(),
                        delivery_time: now,
                        delivery_count: 1,
                    });
                    true
                }
            };
            if fresh {
                g.consumers
                    .get_mut(consumer)
                    .expect("created")
                    .pel
                    .insert(id);
            } else {
                let idle = now - g.pel[&id].delivery_time;
                if min_idle != 0 && idle < min_idle {
                    continue;
                }
                g.transfer(id, consumer);
            }
            let nack = g.pel.get_mut(&id).expect("pending");
            nack.delivery_time = delivery;
            match retrycount {
                Some(c) => nack.delivery_count = c,
                None if !justid => nack.delivery_count += 1,
                None => {}
            }
            if logging {
                aof.push(xclaim_argv(key, group, id, nack, g.last_id));
            }
            if justid {
                write_id(&mut rw, id);
            } else {
                let e = s.range(id, id, false).next().expect("exists");
                write_entry(&mut rw, &e);
            }
            n += 1;
            g.consumers.get_mut(consumer).expect("created").active_time = now;
        }
        if logging && aof.is_empty() {
            if moved {
                aof.push(setid_argv(key, group, g));
            }
            if created {
                aof.push(createconsumer_argv(key, group, consumer));
            }
        }
    });
    w.array(n);
    w.raw(&reply);
    if n == 0 && !changed && !created {
        // Claimed nothing (no id pending, none idle enough): Redis's `server.dirty` did not
        // move.
        super::unchanged(ctx);
    } else if aof.is_empty() {
        ctx.propagate_nothing();
    }
    for v in aof {
        ctx.propagate(v);
    }
    if created {
        notify(ctx, STREAM, "xgroup-createconsumer", key);
    }
}

fn xautoclaim(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let (key, group, consumer) = (args[1], args[2], args[3]);
    let min_idle = match super::parse_int(args[4]) {
        Some(v) => v.max(0),
        None => return w.error(b"ERR Invalid min-idle-time argument for XAUTOCLAIM"),
    };
    let start = match parse_interval(args[5], 0) {
        Ok((id, false)) => id,
        Ok((id, true)) => match id.next() {
            Some(id) => id,
            None => return w.error(b"ERR invalid start ID for the interval"),
        },
        Err(e) => return w.error(e),
    };
    let mut count: u64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if eq(args[j], "count") && more > 0 {
            let max = (i64::MAX / 16) as u64;
            match super::parse_int(args[j + 1]) {
                Some(c) if c >= 1 && (c as u64) <= max => count = c as u64,
                _ => return w.error(b"ERR COUNT must be > 0"),
            }
            j += 1;
        } else if eq(args[j], "justid") {
            justid = true;
        } else {
            return w.error(ERR_SYNTAX);
        }
        j += 1;
    }
    let now = ctx.now_ms();
    let logging = ctx.propagating();
    let mut aof: Vec<Vec<Bytes>> = Vec::new();
    let mut db = ctx.db();
    let Some(s) = stream_with_group(&mut db, key, group, w) else {
        return;
    };
    let mut created = false;
    let mut claimed = Vec::new();
    let mut cw = ReplyWriter::new(&mut claimed, w.resp3);
    let mut n = 0;
    let mut deleted = Vec::new();
    let mut cursor = StreamId::MIN;
    with_group(s, group, |s, g| {
        created = ensure_consumer(g, consumer, now);
        g.consumers.get_mut(consumer).expect("created").seen_time = now;
        let pending: Vec<StreamId> = g.pel.range(start..).map(|(id, _)| *id).collect();
        let mut attempts = count.saturating_mul(10);
        let mut i = 0;
        while attempts > 0 && count > 0 && i < pending.len() {
            attempts -= 1;
            let id = pending[i];
            i += 1;
            if !s.contains(id) {
                if let (true, Some(nack)) = (logging, g.pel.get(&id)) {
                    aof.push(xclaim_argv(key, group, id, nack, g.last_id));
                }
                g.ack(id);
                deleted.push(id);
                count -= 1;
                continue;
            }
            let nack = &g.pel[&id];
            if min_idle != 0 && now - nack.delivery_time < min_idle {
                continue;
            }
            g.transfer(id, consumer);
            let nack = g.pel.get_mut(&id).expect("pending");
            nack.delivery_time = now;
            if !justid {
                nack.delivery_count += 1;
            }
            if logging {
                aof.push(xclaim_argv(key, group, id, nack, g.last_id));
            }
            if justid {
                write_id(&mut cw, id);
            } else {
                let e = s.range(id, id, false).next().expect("exists");
                write_entry(&mut cw, &e);
            }
            n += 1;
            count -= 1;
            g.consumers.get_mut(consumer).expect("created").active_time = now;
        }
        cursor = pending.get(i).copied().unwrap_or(StreamId::MIN);
        if logging && created && aof.is_empty() {
            aof.push(createconsumer_argv(key, group, consumer));
        }
    });
    // Written as Redis 7.2 does: one XCLAIM per entry claimed or dropped.
    if n == 0 && deleted.is_empty() && !created {
        // Claimed and dropped nothing: Redis's `server.dirty` did not move.
        super::unchanged(ctx);
    } else if aof.is_empty() {
        ctx.propagate_nothing();
    }
    for v in aof {
        ctx.propagate(v);
    }
    w.array(3);
    write_id(w, cursor);
    w.array(n);
    w.raw(&claimed);
    w.array(deleted.len());
    for id in deleted {
        write_id(w, id);
    }
    if created {
        notify(ctx, STREAM, "xgroup-createconsumer", key);
    }
}

// ---- XINFO -------------------------------------------------------------------------------------

/// XINFO's stream: "no such key" when missing.
fn info_stream<'a>(
    db: &'a mut darner_engine::DbView<'_>,
    key: &[u8],
    w: &mut ReplyWriter,
) -> Option<&'a Stream> {
    match super::read(db, key) {
        Ok(Some(s)) => Some(s),
        Ok(None) => {
            w.error(ERR_NO_SUCH_KEY);
            None
        }
        Err(WrongType) => {
            w.error(ERR_WRONGTYPE);
            None
        }
    }
}

fn opt_int(w: &mut ReplyWriter, v: Option<i64>) {
    match v {
        Some(v) => w.int(v),
        None => w.null(),
    }
}

/// The radix tree figures Redis reports: one key per node, and (an estimate of the tree's
/// inner nodes) one node more.
fn tree_figures(s: &Stream) -> (i64, i64) {
    let keys = s.node_count() as i64;
    (keys, keys + 1)
}

fn xinfo_stream(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut full = false;
    let mut count: i64 = 10;
    let opts = &args[3..];
    if !opts.is_empty() {
        if (opts.len() != 1 && opts.len() != 3) || !eq(opts[0], "full") {
            return subcommand_error(w, args[0], args[1]);
        }
        full = true;
        if opts.len() == 3 {
            if !eq(opts[1], "count") {
                return subcommand_error(w, args[0], args[1]);
            }
            match parse_ll(opts[2]) {
                Ok(c) => count = if c < 0 { 10 } else { c },
                Err(e) => return w.error(e),
            }
        }
    }
    let mut db = ctx.db();
    let Some(s) = info_stream(&mut db, args[2], w) else {
        return;
    };
    info_stream_head(w, s, full);
    if !full {
        w.bulk(b"groups");
        w.int(s.groups().count() as i64);
        for (name, last) in [(&b"first-entry"[..], false), (b"last-entry", true)] {
            w.bulk(name);
            match s.edge(last) {
                Some(e) => write_entry(w, &e),
                None => w.null(),
            }
        }
        return;
    }
    let limit = if count == 0 {
        usize::MAX
    } else {
        count as usize
    };
    w.bulk(b"entries");
    super::write_range(w, s, StreamId::MIN, StreamId::MAX, count as usize, false);
    w.bulk(b"groups");
    let groups: Vec<(&Vec<u8>, &Group)> = s.groups().collect();
    w.array(groups.len());
    for (name, g) in groups {
        info_group_head(w, s, name, g);
        let pel: Vec<_> = g.pel.iter().take(limit).collect();
        w.array(pel.len());
        for (id, n) in pel {
            write_group_nack(w, *id, n);
        }
        w.bulk(b"consumers");
        w.array(g.consumers.len());
        for (cname, c) in &g.consumers {
            info_consumer_head(w, cname, c);
            let pel: Vec<_> = c.pel.iter().take(limit).collect();
            w.array(pel.len());
            for id in pel {
                write_consumer_nack(w, *id, &g.pel[id]);
            }
        }
    }
}

/// XINFO STREAM's map header and its figures up to `recorded-first-entry-id` (FULL: 9
/// fields, then `entries` and `groups`; otherwise 10, then the group count and edge entries).
pub fn info_stream_head(w: &mut ReplyWriter, s: &Stream, full: bool) {
    let (keys, nodes) = tree_figures(s);
    w.map(if full { 9 } else { 10 });
    w.bulk(b"length");
    w.int(s.len() as i64);
    w.bulk(b"radix-tree-keys");
    w.int(keys);
    w.bulk(b"radix-tree-nodes");
    w.int(nodes);
    w.bulk(b"last-generated-id");
    write_id(w, s.last_id);
    w.bulk(b"max-deleted-entry-id");
    write_id(w, s.max_deleted_id);
    w.bulk(b"entries-added");
    w.int(s.entries_added as i64);
    w.bulk(b"recorded-first-entry-id");
    write_id(w, s.first_id);
}

/// XINFO STREAM FULL: a group's map up to its `pending` key (its PEL and then its
/// `consumers` follow).
pub fn info_group_head(w: &mut ReplyWriter, s: &Stream, name: &[u8], g: &Group) {
    w.map(7);
    w.bulk(b"name");
    w.bulk(name);
    w.bulk(b"last-delivered-id");
    write_id(w, g.last_id);
    w.bulk(b"entries-read");
    opt_int(w, g.entries_read.map(|n| n as i64));
    w.bulk(b"lag");
    opt_int(w, s.group_lag(g));
    w.bulk(b"pel-count");
    w.int(g.pel.len() as i64);
    w.bulk(b"pending");
}

/// XINFO STREAM FULL: one entry of a group's PEL.
pub fn write_group_nack(w: &mut ReplyWriter, id: StreamId, n: &Nack) {
    w.array(4);
    write_id(w, id);
    w.bulk(&n.consumer);
    w.int(n.delivery_time);
    w.int(n.delivery_count as i64);
}

/// XINFO STREAM FULL: a consumer's map up to its `pending` key (its PEL follows).
pub fn info_consumer_head(w: &mut ReplyWriter, name: &[u8], c: &Consumer) {
    w.map(5);
    w.bulk(b"name");
    w.bulk(name);
    w.bulk(b"seen-time");
    w.int(c.seen_time);
    w.bulk(b"active-time");
    w.int(c.active_time);
    w.bulk(b"pel-count");
    w.int(c.pel.len() as i64);
    w.bulk(b"pending");
}

/// XINFO STREAM FULL: one entry of a consumer's PEL (`n`: the group's entry for it).
pub fn write_consumer_nack(w: &mut ReplyWriter, id: StreamId, n: &Nack) {
    w.array(3);
    write_id(w, id);
    w.int(n.delivery_time);
    w.int(n.delivery_count as i64);
}

/// XINFO STREAM FULL's COUNT (10 when not given or negative, 0: everything), or None when
/// the arguments are not FULL's (the handler answers).
fn full_count(args: &[&[u8]]) -> Option<i64> {
    match &args[3..] {
        [full] if eq(full, "full") => Some(10),
        [full, c, n] if eq(full, "full") && eq(c, "count") => {
            parse_ll(n).ok().map(|c| if c < 0 { 10 } else { c })
        }
        _ => None,
    }
}

/// XINFO STREAM FULL as a streamed reply (stream.rs) when its entries and PEL entries are more
/// than [`crate::stream::STREAM_MIN_ENTRIES`]: the headers (the stream's, each group's and
/// consumer's figures) are written at once, the entries and each PEL in steps, read on from
/// the id after the last one sent (nothing changes the key meanwhile: it is locked). None:
/// the handler answers.
pub(super) fn xinfo_full_segs(ctx: &mut ShardCtx, args: &[&[u8]]) -> Option<Segs> {
    let count = full_count(args)?;
    let limit = if count == 0 {
        usize::MAX
    } else {
        count as usize
    };
    let resp3 = ctx.resp3;
    let mut db = ctx.db();
    let Some(ValueRef::Stream(s)) = db.peek(args[2]).map(|e| e.value()) else {
        return None;
    };
    let entries = s.count_range(StreamId::MIN, StreamId::MAX, limit as u64) as usize;
    let pels: usize = s
        .groups()
        .map(|(_, g)| {
            g.pel.len().min(limit)
                + g.consumers
                    .values()
                    .map(|c| c.pel.len().min(limit))
                    .sum::<usize>()
        })
        .sum();
    if entries + pels <= crate::stream::STREAM_MIN_ENTRIES {
        return None;
    }
    let mut segs = Segs::default();
    let key = segs.key(args[2]);
    let mut w = ReplyWriter::new(segs.raw(), resp3);
    info_stream_head(&mut w, s, true);
    w.bulk(b"entries");
    w.array(entries);
    segs.push(Seg::Entries {
        key,
        from: StreamId::MIN,
        left: entries,
    });
    let mut w = ReplyWriter::new(segs.raw(), resp3);
    w.bulk(b"groups");
    w.array(s.groups().count());
    for (name, g) in s.groups() {
        let mut w = ReplyWriter::new(segs.raw(), resp3);
        info_group_head(&mut w, s, name, g);
        let n = g.pel.len().min(limit);
        w.array(n);
        segs.push(Seg::GroupPel {
            key,
            group: name[..].into(),
            from: StreamId::MIN,
            left: n,
        });
        let mut w = ReplyWriter::new(segs.raw(), resp3);
        w.bulk(b"consumers");
        w.array(g.consumers.len());
        for (cname, c) in &g.consumers {
            let mut w = ReplyWriter::new(segs.raw(), resp3);
            info_consumer_head(&mut w, cname, c);
            let n = c.pel.len().min(limit);
            w.array(n);
            segs.push(Seg::ConsumerPel {
                key,
                group: name[..].into(),
                consumer: cname[..].into(),
                from: StreamId::MIN,
                left: n,
            });
        }
    }
    Some(segs)
}

/// A streamed XINFO STREAM FULL's access: one read of the key.
pub(super) fn xinfo_full_begin(ctx: &mut ShardCtx, args: &[&[u8]]) {
    ctx.db().get(args[2]);
}

fn xinfo_groups(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    let Some(s) = info_stream(&mut db, args[2], w) else {
        return;
    };
    let groups: Vec<(&Vec<u8>, &Group)> = s.groups().collect();
    w.array(groups.len());
    for (name, g) in groups {
        w.map(6);
        w.bulk(b"name");
        w.bulk(name);
        w.bulk(b"consumers");
        w.int(g.consumers.len() as i64);
        w.bulk(b"pending");
        w.int(g.pel.len() as i64);
        w.bulk(b"last-delivered-id");
        write_id(w, g.last_id);
        w.bulk(b"entries-read");
        opt_int(w, g.entries_read.map(|n| n as i64));
        w.bulk(b"lag");
        opt_int(w, s.group_lag(g));
    }
}

fn xinfo_consumers(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let now = ctx.now_ms();
    let mut db = ctx.db();
    let Some(s) = info_stream(&mut db, args[2], w) else {
        return;
    };
    let Some(g) = s.group(args[3]) else {
        return w.error(&nogroup_for_key(args[2], args[3]));
    };
    let consumers: &BTreeMap<Vec<u8>, Consumer> = &g.consumers;
    w.array(consumers.len());
    for (name, c) in consumers {
        w.map(4);
        w.bulk(b"name");
        w.bulk(name);
        w.bulk(b"pending");
        w.int(c.pel.len() as i64);
        w.bulk(b"idle");
        w.int((now - c.seen_time).max(0));
        w.bulk(b"inactive");
        w.int(if c.active_time == -1 {
            -1
        } else {
            now - c.active_time
        });
    }
}

fn xinfo_help(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    help_reply(
        w,
        args[0],
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    );
}
