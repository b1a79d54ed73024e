//! Keyspace notifications (`notify-keyspace-events`): Pub/Sub messages about writes to keys.
//!
//! An event of class C (generic, string, list, ...) named `ev` on key `k` of database `d` is
//! published, when C is enabled, as `ev` on `__keyspace@d__:k` (flag K) and as `k` on
//! `__keyevent@d__:ev` (flag E), exactly as Redis does. The flags string parses and renders
//! as Redis's does (an "A" stands for every class but `m` and `n`, and CONFIG GET shows it).
//!
//! **Cost when off.** The flags live in the configuration's hot atomics: [`notify`] is one
//! relaxed load and a branch, and is called at the write sites (cmd/*.rs) after the change,
//! where Redis calls its own.
//!
//! **Events born in the engine.** Keys expire (on access or in the active cycle), get created
//! and are missed inside `DbView`, not in a command's code. The engine records those events
//! in its database ([`darner_engine::db::Event`]) only while the server asks for them (a mask
//! shared through [`attach`], kept current by CONFIG SET); the server publishes the record
//! before any event of its own ([`notify`] drains it first), when the command's `ShardCtx`
//! is dropped (before its reply can reach the client) and at the end of every event-loop turn
//! (the active expiry cycle), so every notification leaves the key's owning thread in the
//! order the changes happened: an `expired` found by a command's lookup comes before that
//! command's own events, as in Redis. Pub/Sub keeps one publisher thread's messages in order.

use crate::pubsub::{self, Kind};
use crate::shard::{Shard, ShardCtx};
use crate::shared::Shared;
use darner_engine::db::Event;
use std::sync::atomic::Ordering;

/// K: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// E: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// g: generic commands (DEL, EXPIRE, RENAME, ...).
pub const GENERIC: u32 = 1 << 2;
/// $: string commands.
pub const STRING: u32 = 1 << 3;
/// l: list commands.
pub const LIST: u32 = 1 << 4;
/// s: set commands.
pub const SET: u32 = 1 << 5;
/// h: hash commands.
pub const HASH: u32 = 1 << 6;
/// z: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// x: a key expired.
pub const EXPIRED: u32 = 1 << 8;
/// e: a key was evicted (no eviction in Darner yet: never emitted).
pub const EVICTED: u32 = 1 << 9;
/// t: stream commands (no streams in Darner yet).
pub const STREAM: u32 = 1 << 10;
/// m: a read missed (not part of A).
pub const KEY_MISS: u32 = 1 << 11;
/// d: module events (no modules).
pub const MODULE: u32 = 1 << 13;
/// n: a key was created (not part of A).
pub const NEW: u32 = 1 << 14;
/// A: every class but `m` and `n`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The error CONFIG SET gives for a bad flags string.
pub const ERR_FLAGS: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// Parses a flags string; None when it has a character that is not a flag (case matters).
pub fn parse(s: &str) -> Option<u32> {
    let mut f = 0;
    for c in s.bytes() {
        f |= match c {
            b'A' => ALL,
            b'g' => GENERIC,
            b'$' => STRING,
            b'l' => LIST,
            b's' => SET,
            b'h' => HASH,
            b'z' => ZSET,
            b'x' => EXPIRED,
            b'e' => EVICTED,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b't' => STREAM,
            b'm' => KEY_MISS,
            b'd' => MODULE,
            b'n' => NEW,
            _ => return None,
        };
    }
    Some(f)
}

/// The flags as CONFIG GET shows them: "A" when every class of A is on (and then no `n`,
/// as Redis shows it), else the classes in a fixed order; then K, E and m.
pub fn render(f: u32) -> String {
    let mut s = String::new();
    if f & ALL == ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if f & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if f & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// The engine events worth recording under flags `f`: none unless something is published.
pub fn engine_mask(f: u32) -> u32 {
    if f & (KEYSPACE | KEYEVENT) == 0 {
        return 0;
    }
    let mut m = 0;
    for (class, ev) in [
        (EXPIRED, Event::Expired),
        (NEW, Event::New),
        (KEY_MISS, Event::Miss),
        (HASH, Event::FieldsExpired),
        (GENERIC, Event::Deleted),
        (EVICTED, Event::Evicted),
    ] {
        if f & class != 0 {
            m |= ev.bit();
        }
    }
    m
}

/// The class and name under which an engine event is published.
fn engine_event(ev: Event) -> (u32, &'static str) {
    match ev {
        Event::Expired => (EXPIRED, "expired"),
        Event::New => (NEW, "new"),
        Event::Miss => (KEY_MISS, "keymiss"),
        Event::FieldsExpired => (HASH, "hexpired"),
        Event::Deleted => (GENERIC, "del"),
        Event::Evicted => (EVICTED, "evicted"),
    }
}

#[inline]
fn flags(shared: &Shared) -> u32 {
    shared.config.hot.notify_flags.load(Ordering::Relaxed)
}

/// Whether any notification may be published (a command may then order its work so that
/// its events leave in Redis's order).
pub fn enabled(shared: &Shared) -> bool {
    flags(shared) & (KEYSPACE | KEYEVENT) != 0
}

/// Notifies event `event` of class `class` on `key` in the command's database. Call it after
/// the change, where Redis notifies.
#[inline]
pub fn notify(ctx: &mut ShardCtx, class: u32, event: &str, key: &[u8]) {
    let f = flags(ctx.shared);
    if f & class != 0 {
        notify_in(ctx, ctx.db, f, event, key);
    }
}

/// [`notify`] for a key of another database (MOVE, COPY ... DB).
#[inline]
pub fn notify_db(ctx: &mut ShardCtx, db: usize, class: u32, event: &str, key: &[u8]) {
    let f = flags(ctx.shared);
    if f & class != 0 {
        notify_in(ctx, db, f, event, key);
    }
}

#[cold]
fn notify_in(ctx: &mut ShardCtx, db: usize, f: u32, event: &str, key: &[u8]) {
    flush(ctx.shared, ctx.shard);
    publish(ctx.shared, f, db, event, key);
}

/// Publishes one event on the channels the flags ask for.
fn publish(shared: &Shared, f: u32, db: usize, event: &str, key: &[u8]) {
    if f & KEYSPACE != 0 {
        let mut chan = format!("__keyspace@{db}__:").into_bytes();
        chan.extend_from_slice(key);
        pubsub::publish(shared, Kind::Channel, &chan, event.as_bytes(), None);
    }
    if f & KEYEVENT != 0 {
        let chan = format!("__keyevent@{db}__:{event}");
        pubsub::publish(shared, Kind::Channel, chan.as_bytes(), key, None);
    }
}

/// Publishes the events the engine recorded in this shard's databases (expired keys, new
/// keys, misses, hash fields expired by the active cycle), oldest first. Called before each
/// of a command's own notifications and once per event-loop turn.
pub fn flush(shared: &Shared, shard: &mut Shard) {
    // One load at the end of a loop turn when nothing was recorded (not a look at each of
    // the 16 databases).
    if !shard.events_recorded.load(Ordering::Relaxed) {
        return;
    }
    shard.events_recorded.store(false, Ordering::Relaxed);
    let f = flags(shared);
    for (i, db) in shard.dbs.iter_mut().enumerate() {
        let Some(events) = db.take_events() else {
            continue;
        };
        for (ev, key) in events {
            let (class, name) = engine_event(ev);
            if f & class != 0 {
                publish(shared, f, i, name, &key);
            }
        }
    }
}

/// Every command's engine events leave before its reply can: a command runs in a `ShardCtx`
/// (inline, in a batch from another thread, in a transaction's hop, or serving a blocked
/// client), and the context publishes what the engine recorded when the command is done with
/// it, so a lookup's `expired` precedes anything the reply lets a client do. One relaxed load
/// when no engine event is wanted.
impl Drop for ShardCtx<'_> {
    fn drop(&mut self) {
        done(self);
    }
}

/// Publishes the engine events of the work done in `ctx` so far; for work whose result
/// leaves while the context lives (a transaction's hop: its result must not overtake them).
#[inline]
pub fn done(ctx: &mut ShardCtx) {
    if ctx.shared.config.hot.notify_events.load(Ordering::Relaxed) != 0 {
        flush(ctx.shared, ctx.shard);
    }
}

/// Makes the shard's databases record the engine events the configuration asks for.
pub fn attach(shared: &Shared, shard: &mut Shard) {
    for db in &mut shard.dbs {
        db.record_events(
            shared.config.hot.notify_events.clone(),
            shard.events_recorded.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_render_like_redis() {
        let r = |s: &str| render(parse(s).unwrap());
        assert_eq!(r(""), "");
        assert_eq!(r("AKE"), "AKE");
        assert_eq!(r("KEA"), "AKE");
        assert_eq!(r("gKn"), "gnK");
        assert_eq!(r("Anm"), "Am");
        assert_eq!(r("A$"), "A");
        assert_eq!(r("g$lshzxetd"), "A");
        assert_eq!(r("Ex$g"), "g$xE");
        assert_eq!(r("mKEzh"), "hzKEm");
        assert_eq!(parse("xyz"), None);
        assert_eq!(parse("ke"), None);
        assert_eq!(parse("K E"), None);
    }

    #[test]
    fn engine_records_nothing_unless_published() {
        assert_eq!(engine_mask(parse("Ax").unwrap()), 0);
        let m = engine_mask(parse("Ex").unwrap());
        assert_eq!(m, Event::Expired.bit());
        let m = engine_mask(parse("KAn").unwrap());
        assert!(m & Event::New.bit() != 0 && m & Event::Miss.bit() == 0);
    }
}
