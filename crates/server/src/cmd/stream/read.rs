//! XREAD (and the shared argument parsing of XREADGROUP): read new entries of several
//! streams, possibly on several shards, possibly blocking until an XADD brings some.
//!
//! The command is a transaction task holding its keys' shards: one hop per shard checks each
//! key's type, resolves `$` / `+` against the stream as it is, and takes the entries after
//! the id. Errors are reported as Redis detects them, key by key in argument order (a key's
//! type before its id). With nothing to serve and BLOCK given, the client waits
//! (blocking.rs) with the resolved ids: `$` means the last id at the time it blocked.

use super::group::{createconsumer_argv, setid_argv, xclaim_argv};
use super::{parse_strict, write_entry, WrongType, ERR_INVALID_ID};
use crate::blocking::{self, BlockOp, KeyKind, Outcome};
use crate::cmd::{eq, parse_int, with_writer, TxFuture, ERR_NOT_INT, ERR_SYNTAX, ERR_WRONGTYPE};
use crate::exec::Tx;
use crate::shard::ShardCtx;
use crate::stream::{Seg, Segs};
use bytes::Bytes;
use darner_engine::types::StreamId;
use darner_engine::ValueRef;
use darner_resp::ReplyWriter;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

/// XREAD / XREADGROUP options.
pub struct ReadArgs {
    /// None: no BLOCK; Some(None): forever.
    pub block: Option<Option<Duration>>,
    /// 0: no limit.
    pub count: usize,
    /// Index of the first key.
    pub streams_at: usize,
    pub nkeys: usize,
    /// XREADGROUP: the index of the group name (the consumer's follows it).
    pub group: Option<usize>,
    pub noack: bool,
}

/// Parses a millisecond timeout (getTimeoutFromObjectOrReply with UNIT_MILLISECONDS).
fn parse_ms_timeout(arg: &[u8]) -> Result<Option<Duration>, &'static [u8]> {
    let v = parse_int(arg).ok_or(&b"ERR timeout is not an integer or out of range"[..])?;
    if v < 0 {
        return Err(b"ERR timeout is negative");
    }
    if v > i64::MAX - crate::shared::Shared::now_ms() {
        return Err(b"ERR timeout is out of range");
    }
    Ok((v > 0).then(|| Duration::from_millis(v as u64)))
}

/// Redis's option loop of xreadCommand.
pub fn parse_read<A: AsRef<[u8]>>(args: &[A], group_cmd: bool) -> Result<ReadArgs, Vec<u8>> {
    let mut r = ReadArgs {
        block: None,
        count: 0,
        streams_at: 0,
        nkeys: 0,
        group: None,
        noack: false,
    };
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = args[i].as_ref();
        if eq(o, "block") && more > 0 {
            i += 1;
            r.block = Some(parse_ms_timeout(args[i].as_ref()).map_err(|e| e.to_vec())?);
        } else if eq(o, "count") && more > 0 {
            i += 1;
            let c = parse_int(args[i].as_ref()).ok_or(ERR_NOT_INT.to_vec())?;
            r.count = usize::try_from(c.max(0)).unwrap_or(usize::MAX);
        } else if eq(o, "streams") && more > 0 {
            r.streams_at = i + 1;
            let n = args.len() - r.streams_at;
            if !n.is_multiple_of(2) {
                let (name, sym) = if group_cmd {
                    ("xreadgroup", '>')
                } else {
                    ("xread", '$')
                };
                return Err(format!(
                    "ERR Unbalanced '{name}' list of streams: for each stream key an ID or '{sym}' must be specified."
                )
                .into_bytes());
            }
            r.nkeys = n / 2;
            break;
        } else if eq(o, "group") && more >= 2 {
            if !group_cmd {
                return Err(b"ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.".to_vec());
            }
            r.group = Some(i + 1);
            i += 2;
        } else if eq(o, "noack") {
            if !group_cmd {
                return Err(b"ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.".to_vec());
            }
            r.noack = true;
        } else {
            return Err(ERR_SYNTAX.to_vec());
        }
        i += 1;
    }
    if r.streams_at == 0 {
        return Err(ERR_SYNTAX.to_vec());
    }
    if group_cmd && r.group.is_none() {
        return Err(b"ERR Missing GROUP option for XREADGROUP".to_vec());
    }
    Ok(r)
}

/// An XREAD id argument.
#[derive(Clone, Copy)]
enum IdArg {
    /// `$`: the stream's last id.
    Last,
    /// `+`: from the last entry on (Redis 7.4).
    Plus,
    Id(StreamId),
    Invalid,
}

/// What one key answered in the first look.
enum Look {
    WrongType,
    /// The id after which entries count (`$` / `+` resolved), and the `[key, entries]` part
    /// of the reply when there are entries.
    Ok(StreamId, Option<Vec<u8>>),
    /// `+` on a stream whose last id is 0-0.
    PlusZero,
    /// The id after which entries count, and how many the reply has (some): streamed later
    /// ([`xread_streamed`]); the key is pinned meanwhile.
    Later(StreamId, usize),
}

/// Writes `[key, entries]` (RESP2) or `key entries` (a map entry in RESP3) of the entries of
/// `key` after `after`, at most `count` (0: all); None when there are none.
fn entries_after(
    ctx: &mut ShardCtx,
    key: &[u8],
    after: StreamId,
    count: usize,
    resp3: bool,
) -> Result<Option<Vec<u8>>, WrongType> {
    let mut db = ctx.db();
    let Some(s) = super::read(&mut db, key)? else {
        return Ok(None);
    };
    let Some(start) = after.next() else {
        return Ok(None);
    };
    let mut it = s.range(start, StreamId::MAX, false).peekable();
    if it.peek().is_none() {
        return Ok(None);
    }
    let entries: Vec<_> = if count == 0 {
        it.collect()
    } else {
        it.take(count).collect()
    };
    let mut out = Vec::new();
    let mut w = ReplyWriter::new(&mut out, resp3);
    if !resp3 {
        w.array(2);
    }
    w.bulk(key);
    w.array(entries.len());
    for e in &entries {
        write_entry(&mut w, e);
    }
    Ok(Some(out))
}

/// The id after which XREAD's entries count, as [`look`] resolves it; None where `look` has an
/// error to give (an invalid id, `+` on a stream whose last id is 0-0).
fn resolve(s: Option<&darner_engine::types::Stream>, id: IdArg) -> Option<StreamId> {
    Some(match id {
        IdArg::Last => s.map_or(StreamId::MIN, |s| s.last_id),
        IdArg::Plus => match s {
            None => StreamId::MIN,
            Some(s) => s.last_id.prev()?,
        },
        IdArg::Id(id) => id,
        IdArg::Invalid => return None,
    })
}

/// One shard's keys of a multi-shard XREAD whose reply streams (`stream`): when they answer
/// more than [`crate::stream::STREAM_MIN_ENTRIES`] entries, each key with entries is a
/// [`Look::Later`] (counted and pinned, read later in steps); otherwise, and for errors, as
/// [`look`] answers them, at once.
fn look_shard(ctx: &mut ShardCtx, ks: &[(Bytes, IdArg)], count: usize, stream: bool) -> Vec<Look> {
    let resp3 = ctx.resp3;
    if stream {
        if let Some(looks) = look_later(ctx, ks, count) {
            return looks;
        }
    }
    ks.iter()
        .map(|(k, id)| look(ctx, k, *id, count, resp3))
        .collect()
}

fn look_later(ctx: &mut ShardCtx, ks: &[(Bytes, IdArg)], count: usize) -> Option<Vec<Look>> {
    let limit = if count == 0 { u64::MAX } else { count as u64 };
    let mut db = ctx.db();
    let mut looks = Vec::with_capacity(ks.len());
    let mut total = 0;
    for (k, id) in ks {
        let s = match db.peek(k).map(|e| e.value()) {
            None => None,
            Some(ValueRef::Stream(s)) => Some(s),
            Some(_) => return None, // WRONGTYPE: `look`'s
        };
        let after = resolve(s, *id)?;
        let n = match (s, after.next()) {
            (Some(s), Some(start)) => s.count_range(start, StreamId::MAX, limit) as usize,
            _ => 0,
        };
        total += n;
        looks.push(if n > 0 {
            Look::Later(after, n)
        } else {
            Look::Ok(after, None)
        });
    }
    if total <= crate::stream::STREAM_MIN_ENTRIES {
        return None;
    }
    for ((k, _), l) in ks.iter().zip(&looks) {
        // The read counts as one (hit, access clock), as `look`'s would.
        db.get(k);
        if matches!(l, Look::Later(..)) {
            // Until its part has streamed, expiry must not change it (stream.rs).
            db.db().pin(k);
        }
    }
    Some(looks)
}

fn look(ctx: &mut ShardCtx, key: &[u8], id: IdArg, count: usize, resp3: bool) -> Look {
    let after = {
        let mut db = ctx.db();
        let s = match super::read(&mut db, key) {
            Err(WrongType) => return Look::WrongType,
            Ok(s) => s,
        };
        match id {
            IdArg::Last => s.map_or(StreamId::MIN, |s| s.last_id),
            IdArg::Plus => match s {
                None => StreamId::MIN,
                Some(s) => match s.last_id.prev() {
                    Some(id) => id,
                    None => return Look::PlusZero,
                },
            },
            IdArg::Id(id) => id,
            IdArg::Invalid => StreamId::MIN,
        }
    };
    match entries_after(ctx, key, after, count, resp3) {
        Ok(part) => Look::Ok(after, part),
        Err(WrongType) => Look::WrongType,
    }
}

/// A client blocked in XREAD: served by the first of its keys that gets an entry after the
/// id it waits past.
struct ReadOp {
    keys: Vec<(Bytes, StreamId)>,
    count: usize,
    resp3: bool,
}

impl ReadOp {
    fn after(&self, key: &[u8]) -> Option<StreamId> {
        self.keys
            .iter()
            .find(|(k, _)| k.as_ref() == key)
            .map(|(_, id)| *id)
    }
}

impl BlockOp for ReadOp {
    fn kind(&self, ctx: &mut ShardCtx, key: &[u8]) -> KeyKind {
        let Some(after) = self.after(key) else {
            return KeyKind::Missing;
        };
        let mut db = ctx.db();
        match super::read(&mut db, key) {
            Ok(Some(s)) if !s.is_empty() && s.last_id > after => match after.next() {
                Some(start) if s.range(start, StreamId::MAX, false).next().is_some() => {
                    KeyKind::Ready
                }
                _ => KeyKind::Missing,
            },
            _ => KeyKind::Missing,
        }
    }

    fn serve(&self, ctx: &mut ShardCtx, key: &[u8]) -> Vec<u8> {
        let after = self.after(key).unwrap_or(StreamId::MAX);
        let part = entries_after(ctx, key, after, self.count, self.resp3)
            .ok()
            .flatten()
            .unwrap_or_default();
        one_stream_reply(&part, self.resp3)
    }

    fn fifo(&self) -> bool {
        false
    }
}

/// The reply of a blocked reader served with one stream's entries (`part`, that stream's
/// name-and-entries pair): a map of one in RESP3, an array of one in RESP2.
fn one_stream_reply(part: &[u8], resp3: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(part.len() + 8);
    let mut w = ReplyWriter::new(&mut out, resp3);
    if resp3 {
        w.map(1);
    } else {
        w.array(1);
    }
    out.extend_from_slice(part);
    out
}

/// XREAD's id arguments.
fn read_ids<A: AsRef<[u8]>>(args: &[A]) -> Vec<IdArg> {
    args.iter()
        .map(|a| match a.as_ref() {
            b"$" => IdArg::Last,
            b"+" => IdArg::Plus,
            b">" => IdArg::Invalid,
            a => parse_strict(a).map_or(IdArg::Invalid, IdArg::Id),
        })
        .collect()
}

/// XREAD's error after the first look, in Redis's order (key by key, the type before the
/// id), if any. `id_args`: the id arguments.
fn read_error<A: AsRef<[u8]>>(
    looks: &[Look],
    ids: &[IdArg],
    id_args: &[A],
) -> Option<&'static [u8]> {
    for (i, (l, id)) in looks.iter().zip(ids).enumerate() {
        if matches!(l, Look::WrongType) {
            return Some(ERR_WRONGTYPE);
        }
        if matches!(id, IdArg::Invalid) {
            if id_args[i].as_ref() == b">" {
                return Some(b"ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
            }
            return Some(ERR_INVALID_ID);
        }
        if matches!(l, Look::PlusZero) {
            return Some(b"ERR the stream last element ID is 0-0");
        }
    }
    None
}

/// XREAD's reply from the keys that had entries (some did).
fn write_looks(w: &mut ReplyWriter, looks: &[Look]) {
    let parts: Vec<&Vec<u8>> = looks
        .iter()
        .filter_map(|l| match l {
            Look::Ok(_, Some(p)) => Some(p),
            _ => None,
        })
        .collect();
    write_parts(w, &parts);
}

/// XREAD without BLOCK whose keys are all on one shard (routed there like GET, with no
/// transaction: `Command::single`): the same steps as [`xread`]'s, on the spot.
pub(super) fn xread_single(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let r = match parse_read(args, false) {
        Ok(r) => r,
        Err(e) => return w.error(&e),
    };
    debug_assert!(r.block.is_none(), "routed here only without BLOCK");
    let id_args = &args[r.streams_at + r.nkeys..];
    let ids = read_ids(id_args);
    let resp3 = ctx.resp3;
    let looks: Vec<Look> = args[r.streams_at..r.streams_at + r.nkeys]
        .iter()
        .zip(&ids)
        .map(|(k, id)| look(ctx, k, *id, r.count, resp3))
        .collect();
    if let Some(e) = read_error(&looks, &ids, id_args) {
        return w.error(e);
    }
    if looks.iter().any(|l| matches!(l, Look::Ok(_, Some(_)))) {
        write_looks(w, &looks);
    } else {
        w.null_array();
    }
}

pub(super) fn xread(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| with_writer(resp3, |w| w.error(e));
        let r = match parse_read(&args, false) {
            Ok(r) => r,
            Err(e) => return err(&e),
        };
        let keys: Vec<Bytes> = args[r.streams_at..r.streams_at + r.nkeys].to_vec();
        let ids = read_ids(&args[r.streams_at + r.nkeys..]);
        let count = r.count;
        // A big reply streams, its parts in key order (without BLOCK, not inside EXEC or a
        // script: see `xread_streamed`).
        let stream = r.block.is_none() && tx.stream_dest().is_some();
        // One hop per shard: each key's type, resolved id and entries.
        let groups = crate::cmd::generic::by_shard(&tx, &keys);
        let hops: Vec<_> = groups
            .iter()
            .map(|(s, idx)| {
                let ks: Vec<(Bytes, IdArg)> =
                    idx.iter().map(|&i| (keys[i].clone(), ids[i])).collect();
                tx.run(*s, move |ctx| look_shard(ctx, &ks, count, stream))
            })
            .collect();
        let mut looks: Vec<Option<Look>> = (0..keys.len()).map(|_| None).collect();
        for (g, hop) in hops.into_iter().enumerate() {
            for (j, l) in hop.await.into_iter().enumerate() {
                looks[groups[g].1[j]] = Some(l);
            }
        }
        let looks: Vec<Look> = looks.into_iter().map(|l| l.expect("looked")).collect();
        if let Some(e) = read_error(&looks, &ids, &args[r.streams_at + r.nkeys..]) {
            unpin_later(&tx, &keys, &looks).await;
            return err(e);
        }
        if looks.iter().any(|l| matches!(l, Look::Later(..))) {
            return xread_streamed(&tx, &keys, looks).await;
        }
        if looks.iter().any(|l| matches!(l, Look::Ok(_, Some(_)))) {
            let mut out = Vec::new();
            write_looks(&mut ReplyWriter::new(&mut out, resp3), &looks);
            return out;
        }
        let Some(timeout) = r.block else {
            return with_writer(resp3, |w| w.null_array());
        };
        if tx.nested() {
            return with_writer(resp3, |w| w.null_array());
        }
        let mut waits: Vec<(Bytes, StreamId)> = Vec::new();
        for (k, l) in keys.iter().zip(&looks) {
            if let Look::Ok(after, _) = l {
                if !waits.iter().any(|(w, _)| w == k) {
                    waits.push((k.clone(), *after));
                }
            }
        }
        let wait_keys: Vec<Bytes> = waits.iter().map(|(k, _)| k.clone()).collect();
        let op = ReadOp {
            keys: waits,
            count,
            resp3,
        };
        match blocking::block(&tx, &wait_keys, Arc::new(op), timeout).await {
            Some(Outcome::Served { payload, .. }) => payload,
            Some(Outcome::Unblocked { error: true }) => err(blocking::ERR_UNBLOCKED),
            _ => with_writer(resp3, |w| w.null_array()),
        }
    })
}

/// The `[key, entries]` header of one key's part of XREAD / XREADGROUP's reply (RESP3: the
/// key of a map entry, then its entries' array), for `n` entries.
fn part_header(out: &mut Vec<u8>, resp3: bool, key: &[u8], n: usize) {
    let mut w = ReplyWriter::new(out, resp3);
    if !resp3 {
        w.array(2);
    }
    w.bulk(key);
    w.array(n);
}

/// Streams one part of a multi-shard reply from `shard`, which `tx` holds: the parts `plan`
/// makes there are produced in steps (stream.rs, `start_tx_segs`) and written to the
/// client's reply; resolves, once they all left, to whether the client went away. `gone`:
/// it went already (a part that writes is produced all the same, unsent).
async fn stream_part<F>(tx: &Tx, shard: usize, gone: bool, plan: F) -> bool
where
    F: FnOnce(&mut ShardCtx) -> Segs + Send + 'static,
{
    let dest = tx.stream_dest().expect("streamed only with a destination");
    let (done, ended) = crate::exec::pending::<bool>();
    tx.run(shard, move |ctx| {
        let segs = plan(ctx);
        crate::stream::start_tx_segs(ctx, segs, dest, done, gone);
    })
    .await;
    ended.await || gone
}

/// Takes back the pins of the keys a first look pinned for a streamed part
/// ([`Look::Later`], a big XREADGROUP key) when the command ends without streaming them (an
/// error of another key).
async fn unpin_keys(tx: &Tx, keys: Vec<Bytes>) {
    let hops: Vec<_> = keys
        .into_iter()
        .map(|k| {
            tx.run(tx.shard_of(&k), move |ctx| {
                if let Some(db) = ctx.shard.dbs.get_mut(ctx.db) {
                    db.unpin(&k);
                }
            })
        })
        .collect();
    crate::exec::join(hops).await;
}

/// Holds `keys` on their shards for the transaction until it releases them (stream.rs,
/// `Streams::hold`): while its reply streams, a command outside transactions that touches one
/// waits for it as for a stream, without holding up the other work of its shard.
async fn hold_keys(tx: &Tx, keys: &[Bytes]) {
    let id = tx.id();
    let hops: Vec<_> = crate::cmd::generic::by_shard(tx, keys)
        .into_iter()
        .map(|(s, idx)| {
            let ks: Vec<Bytes> = idx.iter().map(|&i| keys[i].clone()).collect();
            tx.run(s, move |ctx| {
                let db = ctx.db;
                ctx.shard.streams.hold(id, db, &ks);
            })
        })
        .collect();
    crate::exec::join(hops).await;
}

async fn unpin_later(tx: &Tx, keys: &[Bytes], looks: &[Look]) {
    let pinned = keys
        .iter()
        .zip(looks)
        .filter(|(_, l)| matches!(l, Look::Later(..)))
        .map(|(k, _)| k.clone())
        .collect();
    unpin_keys(tx, pinned).await;
}

/// XREAD whose keys are on several shards, with a big reply (some shard's keys answer more
/// than [`crate::stream::STREAM_MIN_ENTRIES`] entries: [`Look::Later`]). The reply is the one
/// Redis sends, its keys' parts in argument order; each later part is produced in steps on its
/// shard (stream.rs, `start_tx_segs`), one shard at a time, so no shard stalls for its keys'
/// size. The transaction holds every key (read intents) from the first look to its end, so the
/// reply is each key as it was at that look: a write issued meanwhile waits, and lands after.
/// The bytes before a streamed part (the header, parts built at once) go out as its first
/// part; what follows the last one is the transaction's reply.
async fn xread_streamed(tx: &Tx, keys: &[Bytes], looks: Vec<Look>) -> Vec<u8> {
    let resp3 = tx.resp3();
    let parts = looks
        .iter()
        .filter(|l| matches!(l, Look::Ok(_, Some(_)) | Look::Later(..)))
        .count();
    hold_keys(tx, keys).await;
    let mut out = Vec::new();
    let mut w = ReplyWriter::new(&mut out, resp3);
    if resp3 {
        w.map(parts);
    } else {
        w.array(parts);
    }
    let mut gone = false;
    for (k, l) in keys.iter().zip(looks) {
        match l {
            Look::Ok(_, Some(p)) => out.extend_from_slice(&p),
            Look::Later(after, n) => {
                let prefix = std::mem::take(&mut out);
                let key = k.clone();
                gone = stream_part(tx, tx.shard_of(k), gone, move |ctx| {
                    let mut segs = Segs::default();
                    segs.raw().extend_from_slice(&prefix);
                    part_header(segs.raw(), ctx.resp3, &key, n);
                    let key = segs.key(&key);
                    segs.push(Seg::Entries {
                        key,
                        from: after.next().unwrap_or(StreamId::MAX),
                        left: n,
                    });
                    segs
                })
                .await;
            }
            _ => {}
        }
    }
    out
}

// ---- XREADGROUP ------------------------------------------------------------------------------------

/// An XREADGROUP id argument.
#[derive(Clone, Copy)]
enum GroupId {
    /// `>`: entries never delivered to the group.
    New,
    /// The consumer's pending entries after this id.
    History(StreamId),
    Dollar,
    Plus,
    Invalid,
}

/// What the first look found for one key of XREADGROUP.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GroupLook {
    WrongType,
    NoGroup,
    Ok,
}

fn nogroup_readgroup(key: &[u8], group: &[u8]) -> Vec<u8> {
    let mut e = super::group::nogroup_key_or_group(key, group);
    e.extend_from_slice(b" in XREADGROUP with GROUP option");
    e
}

fn group_look(ctx: &mut ShardCtx, key: &[u8], group: &[u8]) -> GroupLook {
    let mut db = ctx.db();
    match super::read(&mut db, key) {
        Err(WrongType) => GroupLook::WrongType,
        Ok(Some(s)) if s.group(group).is_some() => GroupLook::Ok,
        Ok(_) => GroupLook::NoGroup,
    }
}

/// What XREADGROUP reads from one key for `consumer` of `group`.
struct GroupRead<'a> {
    group: &'a [u8],
    consumer: &'a [u8],
    count: usize,
    noack: bool,
    resp3: bool,
}

/// Serves one key of XREADGROUP (Redis's streamReplyWithRange with a group, or the
/// consumer's history): returns the `[key, entries]` part of the reply, None when a `>` read
/// found nothing new, and whether it changed anything. Creates the consumer when needed.
///
/// Redis counts a change (`server.dirty`) for every key it serves, the history included even
/// when empty, and for a consumer it creates; a `>` read that finds nothing new for an
/// existing consumer changes nothing. XREADGROUP itself is never written (Redis prevents its
/// propagation): only the XCLAIMs, XGROUP SETID and XGROUP CREATECONSUMER below.
fn serve_group(
    ctx: &mut ShardCtx,
    key: &[u8],
    id: GroupId,
    r: &GroupRead<'_>,
) -> (Option<Vec<u8>>, bool) {
    let now = ctx.now_ms();
    let mut created = false;
    // What is written (Redis 7.2's streamPropagateXCLAIM / streamPropagateGroupID): an
    // XCLAIM per entry delivered, then XGROUP SETID when the group's last id moved; a
    // consumer created and not by an XCLAIM, XGROUP CREATECONSUMER. Re-reading the history
    // is not written, as in Redis.
    let logging = ctx.propagating();
    let mut aof: Vec<Vec<Bytes>> = Vec::new();
    let part = {
        let mut db = ctx.db();
        let Some(s) = super::write(&mut db, key).ok().flatten() else {
            return (None, false);
        };
        super::group::with_group(s, r.group, |s, g| {
            created = super::group::ensure_consumer(g, r.consumer, now);
            g.consumers.get_mut(r.consumer).expect("exists").seen_time = now;
            let mut out = Vec::new();
            let mut w = ReplyWriter::new(&mut out, r.resp3);
            if !r.resp3 {
                w.array(2);
            }
            w.bulk(key);
            match id {
                GroupId::History(after) => {
                    // The consumer's pending entries after the id (Redis increments it first).
                    let c = &g.consumers[r.consumer];
                    let ids: Vec<StreamId> = c
                        .pel
                        .range((Bound::Excluded(after), Bound::Unbounded))
                        .take(if r.count == 0 { usize::MAX } else { r.count })
                        .copied()
                        .collect();
                    w.array(ids.len());
                    for id in ids {
                        match s.range(id, id, false).next() {
                            Some(e) => {
                                write_entry(&mut w, &e);
                                let n = g.pel.get_mut(&id).expect("pending");
                                n.delivery_time = now;
                                n.delivery_count += 1;
                            }
                            None => {
                                w.array(2);
                                super::write_id(&mut w, id);
                                w.null_array();
                            }
                        }
                    }
                    Some(out)
                }
                _ => {
                    let top = s.edge(true)?.id;
                    if top <= g.last_id {
                        if logging && created {
                            aof.push(createconsumer_argv(key, r.group, r.consumer));
                        }
                        return None;
                    }
                    let start = g.last_id.next()?;
                    let it = s.range(start, StreamId::MAX, false);
                    let entries: Vec<_> = if r.count == 0 {
                        it.collect()
                    } else {
                        it.take(r.count).collect()
                    };
                    w.array(entries.len());
                    let before = g.last_id;
                    for e in &entries {
                        s.advance_group(g, e.id);
                        write_entry(&mut w, e);
                        if !r.noack {
                            g.deliver(e.id, r.consumer, now);
                            g.consumers.get_mut(r.consumer).expect("exists").active_time = now;
                            if logging {
                                aof.push(xclaim_argv(key, r.group, e.id, &g.pel[&e.id], g.last_id));
                            }
                        }
                    }
                    if logging {
                        if created && aof.is_empty() {
                            aof.push(createconsumer_argv(key, r.group, r.consumer));
                        }
                        if g.last_id != before {
                            aof.push(setid_argv(key, r.group, g));
                        }
                    }
                    Some(out)
                }
            }
        })
        .flatten()
    };
    if logging && created && aof.is_empty() && matches!(id, GroupId::History(_)) {
        aof.push(createconsumer_argv(key, r.group, r.consumer));
    }
    if aof.is_empty() {
        ctx.propagate_nothing();
    }
    for v in aof {
        ctx.propagate(v);
    }
    if created {
        crate::notify::notify(ctx, crate::notify::STREAM, "xgroup-createconsumer", key);
    }
    let changed = created || part.is_some();
    (part, changed)
}

/// A client blocked in XREADGROUP ... `>`: served by the first of its keys that gets an entry
/// its group has not delivered; told when the key or the group goes away.
struct GroupOp {
    keys: Vec<Bytes>,
    group: Bytes,
    consumer: Bytes,
    count: usize,
    noack: bool,
    resp3: bool,
}

/// Why a blocked XREADGROUP ends without entries.
enum GroupGone {
    /// The key or its group went (DEL, FLUSHALL, XGROUP DESTROY, SWAPDB, a new stream
    /// without the group).
    NoGroup,
    /// The key now holds another type (SET, a MULTI that deletes it and adds a set, ...).
    WrongType,
}

impl GroupOp {
    fn state(&self, ctx: &mut ShardCtx, key: &[u8]) -> Result<bool, GroupGone> {
        let mut db = ctx.db();
        match super::read(&mut db, key) {
            Ok(Some(s)) => match s.group(&self.group) {
                None => Err(GroupGone::NoGroup),
                Some(g) => Ok(s.edge(true).is_some_and(|e| e.id > g.last_id)),
            },
            Ok(None) => Err(GroupGone::NoGroup),
            Err(WrongType) => Err(GroupGone::WrongType),
        }
    }
}

impl BlockOp for GroupOp {
    fn kind(&self, ctx: &mut ShardCtx, key: &[u8]) -> KeyKind {
        if !self.keys.iter().any(|k| k.as_ref() == key) {
            return KeyKind::Missing;
        }
        match self.state(ctx, key) {
            Ok(false) => KeyKind::Missing,
            _ => KeyKind::Ready,
        }
    }

    fn serve(&self, ctx: &mut ShardCtx, key: &[u8]) -> Vec<u8> {
        let resp3 = self.resp3;
        // Redis 7.2 runs a woken XREADGROUP again: a key that went, or lost the group,
        // answers the command's NOGROUP error, one of another type WRONGTYPE.
        match self.state(ctx, key) {
            Err(GroupGone::NoGroup) => {
                return with_writer(resp3, |w| w.error(&nogroup_readgroup(key, &self.group)))
            }
            Err(GroupGone::WrongType) => return with_writer(resp3, |w| w.error(ERR_WRONGTYPE)),
            Ok(_) => {}
        }
        let r = GroupRead {
            group: &self.group,
            consumer: &self.consumer,
            count: self.count,
            noack: self.noack,
            resp3,
        };
        let part = serve_group(ctx, key, GroupId::New, &r)
            .0
            .unwrap_or_default();
        one_stream_reply(&part, resp3)
    }

    fn fifo(&self) -> bool {
        false
    }
}

/// XREADGROUP's id arguments.
fn group_ids<A: AsRef<[u8]>>(args: &[A]) -> Vec<GroupId> {
    args.iter()
        .map(|a| match a.as_ref() {
            b">" => GroupId::New,
            b"$" => GroupId::Dollar,
            b"+" => GroupId::Plus,
            // The last possible id is how Redis represents `>` itself: it reads new entries.
            a => match parse_strict(a) {
                Ok(StreamId::MAX) => GroupId::New,
                Ok(id) => GroupId::History(id),
                Err(_) => GroupId::Invalid,
            },
        })
        .collect()
}

/// XREADGROUP's error after the first look, in Redis's order (key by key: its type, its
/// group, then its id), if any.
fn group_error<A: AsRef<[u8]>>(
    looks: &[GroupLook],
    ids: &[GroupId],
    keys: &[A],
    group: &[u8],
) -> Option<Vec<u8>> {
    for (i, (l, id)) in looks.iter().zip(ids).enumerate() {
        match l {
            GroupLook::WrongType => return Some(ERR_WRONGTYPE.to_vec()),
            GroupLook::NoGroup => return Some(nogroup_readgroup(keys[i].as_ref(), group)),
            GroupLook::Ok => {}
        }
        match id {
            GroupId::Dollar => return Some(b"ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.".to_vec()),
            GroupId::Plus => return Some(b"ERR The + ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The + ID would just return an empty result set.".to_vec()),
            GroupId::Invalid => return Some(ERR_INVALID_ID.to_vec()),
            _ => {}
        }
    }
    None
}

/// The reply of keys that had something (`parts`, each a key-and-entries pair): an array of
/// them, a map in RESP3.
fn write_parts<P: AsRef<[u8]>>(w: &mut ReplyWriter, parts: &[P]) {
    if w.resp3 {
        w.map(parts.len());
    } else {
        w.array(parts.len());
    }
    for p in parts {
        w.raw(p.as_ref());
    }
}

/// XREADGROUP without BLOCK whose keys are all on one shard (routed there like GET, with no
/// transaction: `Command::single`): the same steps as [`xreadgroup`]'s, on the spot.
pub(super) fn xreadgroup_single(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let r = match parse_read(args, true) {
        Ok(r) => r,
        Err(e) => return w.error(&e),
    };
    debug_assert!(r.block.is_none(), "routed here only without BLOCK");
    let g = r.group.expect("checked");
    let keys = &args[r.streams_at..r.streams_at + r.nkeys];
    let ids = group_ids(&args[r.streams_at + r.nkeys..]);
    let looks: Vec<GroupLook> = keys.iter().map(|k| group_look(ctx, k, args[g])).collect();
    if let Some(e) = group_error(&looks, &ids, keys, args[g]) {
        return w.error(&e);
    }
    let rd = GroupRead {
        group: args[g],
        consumer: args[g + 1],
        count: r.count,
        noack: r.noack,
        resp3: ctx.resp3,
    };
    let mut changed = false;
    let parts: Vec<Vec<u8>> = keys
        .iter()
        .zip(&ids)
        .filter_map(|(k, id)| {
            let (part, c) = serve_group(ctx, k, *id, &rd);
            changed |= c;
            part
        })
        .collect();
    if !changed {
        ctx.unchanged_write();
    }
    if parts.is_empty() {
        w.null_array();
    } else {
        write_parts(w, &parts);
    }
}

/// Whether XREAD / XREADGROUP's arguments ask to block (or are malformed): such a call runs
/// as a transaction, never in its single-shard form, which cannot wait.
pub fn may_block(args: &[&[u8]], group_cmd: bool) -> bool {
    parse_read(args, group_cmd).map_or(true, |r| r.block.is_some())
}

pub(super) fn xreadgroup(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| with_writer(resp3, |w| w.error(e));
        let r = match parse_read(&args, true) {
            Ok(r) => r,
            Err(e) => return err(&e),
        };
        let g = r.group.expect("checked");
        let (group, consumer) = (args[g].clone(), args[g + 1].clone());
        let keys: Vec<Bytes> = args[r.streams_at..r.streams_at + r.nkeys].to_vec();
        let ids = group_ids(&args[r.streams_at + r.nkeys..]);
        // A big reply streams, its parts in key order (without BLOCK, not inside EXEC or a
        // script, no key named twice: see `xreadgroup_streamed`).
        let stream = r.block.is_none()
            && tx.stream_dest().is_some()
            && !keys.iter().enumerate().any(|(i, k)| keys[..i].contains(k));
        // First look: each key's type and group (and when it may stream, the entries each
        // key answers).
        let groups = crate::cmd::generic::by_shard(&tx, &keys);
        let hops: Vec<_> = groups
            .iter()
            .map(|(s, idx)| {
                let ks: Vec<(Bytes, GroupId)> =
                    idx.iter().map(|&i| (keys[i].clone(), ids[i])).collect();
                let (g, c) = (group.clone(), consumer.clone());
                let count = r.count;
                tx.run(*s, move |ctx| {
                    ks.iter()
                        .map(|(k, id)| {
                            let l = group_look(ctx, k, &g);
                            let n = match l {
                                GroupLook::Ok if stream => group_count(ctx, k, &g, &c, *id, count),
                                _ => None,
                            };
                            (l, n)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut looks = vec![GroupLook::Ok; keys.len()];
        let mut counts: Vec<Option<usize>> = vec![None; keys.len()];
        for (g, hop) in hops.into_iter().enumerate() {
            for (j, (l, n)) in hop.await.into_iter().enumerate() {
                looks[groups[g].1[j]] = l;
                counts[groups[g].1[j]] = n;
            }
        }
        let big = |n: &Option<usize>| n.is_some_and(|n| n > crate::stream::STREAM_MIN_ENTRIES);
        if let Some(e) = group_error(&looks, &ids, &keys, &group) {
            let pinned = keys.iter().zip(&counts).filter(|(_, n)| big(n));
            unpin_keys(&tx, pinned.map(|(k, _)| k.clone()).collect()).await;
            return err(&e);
        }
        if counts.iter().any(big) {
            let rd = StreamedGroupRead {
                group,
                consumer,
                count: r.count,
                noack: r.noack,
            };
            return xreadgroup_streamed(&tx, &keys, &ids, &counts, rd).await;
        }
        // Serve, key by key in argument order (a key named twice is served twice, as Redis
        // does: the second `>` finds nothing new).
        let mut parts: Vec<Option<Vec<u8>>> = Vec::with_capacity(keys.len());
        let mut changed = false;
        for (k, id) in keys.iter().zip(&ids) {
            let (k2, id, g, c) = (k.clone(), *id, group.clone(), consumer.clone());
            let (count, noack) = (r.count, r.noack);
            let part = tx
                .run(tx.shard_of(k), move |ctx| {
                    let rd = GroupRead {
                        group: &g,
                        consumer: &c,
                        count,
                        noack,
                        resp3,
                    };
                    serve_group(ctx, &k2, id, &rd)
                })
                .await;
            changed |= part.1;
            parts.push(part.0);
        }
        let parts: Vec<Vec<u8>> = parts.into_iter().flatten().collect();
        if !parts.is_empty() {
            let mut out = Vec::new();
            write_parts(&mut ReplyWriter::new(&mut out, resp3), &parts);
            return out;
        }
        // Nothing served and no consumer created: unless a wait serves it, it changed nothing
        // (not one of `server.dirty`'s changes; the call is counted on this thread, so is
        // this).
        let unchanged = || {
            if !changed {
                let thread = crate::exec::THREAD.with(|t| t.get());
                crate::shared::bump(&tx.shared().stats[thread].undirty, 1);
            }
        };
        let Some(timeout) = r.block else {
            unchanged();
            return with_writer(resp3, |w| w.null_array());
        };
        if tx.nested() {
            unchanged();
            return with_writer(resp3, |w| w.null_array());
        }
        let mut wait_keys: Vec<Bytes> = Vec::new();
        for k in &keys {
            if !wait_keys.contains(k) {
                wait_keys.push(k.clone());
            }
        }
        let op = GroupOp {
            keys: wait_keys.clone(),
            group,
            consumer,
            count: r.count,
            noack: r.noack,
            resp3,
        };
        match blocking::block(&tx, &wait_keys, Arc::new(op), timeout).await {
            Some(Outcome::Served { payload, .. }) => payload,
            // An error: not counted at all.
            Some(Outcome::Unblocked { error: true }) => err(blocking::ERR_UNBLOCKED),
            _ => {
                unchanged();
                with_writer(resp3, |w| w.null_array())
            }
        }
    })
}

/// What a key of XREADGROUP answers, when it may stream (the first look, with the
/// transaction holding it): the entries of its part (None: it has no part, a `>` read with
/// nothing new, or an id that is an error). A key that answers more than
/// [`crate::stream::STREAM_MIN_ENTRIES`] is pinned until its part has streamed.
fn group_count(
    ctx: &mut ShardCtx,
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    id: GroupId,
    count: usize,
) -> Option<usize> {
    let limit = if count == 0 { usize::MAX } else { count };
    let mut db = ctx.db();
    let Some(ValueRef::Stream(s)) = db.peek(key).map(|e| e.value()) else {
        return None;
    };
    let g = s.group(group)?;
    let n = match id {
        GroupId::New => {
            let start = g.last_id.next()?;
            match s.count_range(start, StreamId::MAX, limit as u64) as usize {
                0 => return None,
                n => n,
            }
        }
        // The pending entries after the id, as `serve_group` (a part even when none).
        GroupId::History(after) => g.consumers.get(consumer).map_or(0, |c| {
            c.pel
                .range((Bound::Excluded(after), Bound::Unbounded))
                .take(limit)
                .count()
        }),
        _ => return None,
    };
    if n > crate::stream::STREAM_MIN_ENTRIES {
        db.db().pin(key);
    }
    Some(n)
}

/// XREADGROUP's group, consumer and options, to take to the keys' shards.
struct StreamedGroupRead {
    group: Bytes,
    consumer: Bytes,
    count: usize,
    noack: bool,
}

/// XREADGROUP whose keys are on several shards, with a big reply (a key answers more than
/// [`crate::stream::STREAM_MIN_ENTRIES`] entries; `counts`: what each key answers, from the
/// first look). The reply is the one Redis sends, its keys' parts in argument order: a big
/// part is produced in steps on its key's shard (stream.rs, `start_tx_segs`), the others at
/// once, key after key. The writes (PELs, the group's last delivered id, delivery counts) are
/// made as the steps write the entries, as in the single-shard form (`xreadgroup_segs`): the
/// transaction holds every key (write intents) from the first look to its end, so nothing
/// sees a group half read, and a part whose client went away is produced all the same, its
/// bytes dropped: the effect is whole.
async fn xreadgroup_streamed(
    tx: &Tx,
    keys: &[Bytes],
    ids: &[GroupId],
    counts: &[Option<usize>],
    rd: StreamedGroupRead,
) -> Vec<u8> {
    let resp3 = tx.resp3();
    hold_keys(tx, keys).await;
    let mut out = Vec::new();
    let mut w = ReplyWriter::new(&mut out, resp3);
    let parts = counts.iter().filter(|n| n.is_some()).count();
    if resp3 {
        w.map(parts);
    } else {
        w.array(parts);
    }
    let mut gone = false;
    for ((k, id), n) in keys.iter().zip(ids).zip(counts) {
        let (key, id) = (k.clone(), *id);
        let (g, c) = (rd.group.clone(), rd.consumer.clone());
        let (count, noack) = (rd.count, rd.noack);
        match *n {
            Some(n) if n > crate::stream::STREAM_MIN_ENTRIES => {
                let prefix = std::mem::take(&mut out);
                gone = stream_part(tx, tx.shard_of(k), gone, move |ctx| {
                    let now = ctx.now_ms();
                    group_begin(ctx, &key, &g, &c, now);
                    let mut segs = Segs::default();
                    segs.raw().extend_from_slice(&prefix);
                    part_header(segs.raw(), ctx.resp3, &key, n);
                    let key = segs.key(&key);
                    let (group, consumer): (Box<[u8]>, Box<[u8]>) = ((*g).into(), (*c).into());
                    segs.push(match id {
                        GroupId::History(after) => Seg::GroupHistory {
                            key,
                            group,
                            consumer,
                            now,
                            from: after.next().unwrap_or(StreamId::MAX),
                            left: n,
                        },
                        _ => Seg::GroupNew {
                            key,
                            group,
                            consumer,
                            noack,
                            now,
                            left: n,
                        },
                    });
                    segs
                })
                .await;
            }
            _ => {
                let part = tx
                    .run(tx.shard_of(k), move |ctx| {
                        let rd = GroupRead {
                            group: &g,
                            consumer: &c,
                            count,
                            noack,
                            resp3,
                        };
                        serve_group(ctx, &key, id, &rd).0
                    })
                    .await;
                if let Some(p) = part {
                    out.extend_from_slice(&p);
                }
            }
        }
    }
    out
}

// ---- streamed replies (stream.rs) ------------------------------------------------------------

/// The reply of XREAD / XREADGROUP's keys with something to answer (`parts`: each key, and
/// how many entries it answers) as the parts of a streamed reply: the header of the array (a
/// map in RESP3) and of each key's `[key, entries]`, then `part(segs, index, key, entries)`'s
/// part of entries.
fn read_segs(
    resp3: bool,
    parts: &[(&[u8], usize)],
    mut part: impl FnMut(&mut Segs, usize, usize),
) -> Option<Segs> {
    let total: usize = parts.iter().map(|p| p.1).sum();
    if parts.is_empty() || total <= crate::stream::STREAM_MIN_ENTRIES {
        return None; // the handler's: a small reply is built at once
    }
    let mut segs = Segs::default();
    let mut w = ReplyWriter::new(segs.raw(), resp3);
    if resp3 {
        w.map(parts.len());
    } else {
        w.array(parts.len());
    }
    for (i, (key, n)) in parts.iter().enumerate() {
        part_header(segs.raw(), resp3, key, *n);
        let k = segs.key(key);
        part(&mut segs, i, k);
    }
    Some(segs)
}

/// XREAD without BLOCK on one shard as a streamed reply (stream.rs) when it answers more than
/// [`crate::stream::STREAM_MIN_ENTRIES`] entries; None: the handler answers (errors
/// included). Looks only: [`xread_begin`] counts the accesses once it streams. Nothing is
/// written, so each key's entries are read on from the id after the last one sent; the keys
/// are locked until the reply ends.
pub(super) fn xread_segs(ctx: &mut ShardCtx, args: &[&[u8]]) -> Option<Segs> {
    let r = parse_read(args, false).ok()?;
    if r.block.is_some() {
        return None;
    }
    let keys = &args[r.streams_at..r.streams_at + r.nkeys];
    let ids = read_ids(&args[r.streams_at + r.nkeys..]);
    let limit = if r.count == 0 {
        u64::MAX
    } else {
        r.count as u64
    };
    let mut parts: Vec<(&[u8], usize)> = Vec::new();
    let mut starts: Vec<StreamId> = Vec::new();
    let mut db = ctx.db();
    for (k, id) in keys.iter().zip(&ids) {
        let s = match db.peek(k).map(|e| e.value()) {
            None => None,
            Some(ValueRef::Stream(s)) => Some(s),
            Some(_) => return None, // WRONGTYPE: the handler's
        };
        // As `look` resolves it (its errors are the handler's).
        let after = match id {
            IdArg::Last => s.map_or(StreamId::MIN, |s| s.last_id),
            IdArg::Plus => match s {
                None => StreamId::MIN,
                Some(s) => s.last_id.prev()?,
            },
            IdArg::Id(id) => *id,
            IdArg::Invalid => return None,
        };
        let (Some(s), Some(start)) = (s, after.next()) else {
            continue;
        };
        let n = s.count_range(start, StreamId::MAX, limit) as usize;
        if n > 0 {
            parts.push((k, n));
            starts.push(start);
        }
    }
    let counts: Vec<usize> = parts.iter().map(|p| p.1).collect();
    read_segs(ctx.resp3, &parts, |segs, i, key| {
        segs.push(Seg::Entries {
            key,
            from: starts[i],
            left: counts[i],
        })
    })
}

/// A streamed XREAD's accesses: one read of each key, as Redis's lookup.
pub(super) fn xread_begin(ctx: &mut ShardCtx, args: &[&[u8]]) {
    let Ok(r) = parse_read(args, false) else {
        return;
    };
    let mut db = ctx.db();
    for k in &args[r.streams_at..r.streams_at + r.nkeys] {
        db.get(k);
    }
}

/// XREADGROUP without BLOCK on one shard as a streamed reply (stream.rs) when it answers more
/// than [`crate::stream::STREAM_MIN_ENTRIES`] entries; None: the handler answers (errors, a
/// key named twice, whose second read depends on the first's effect).
///
/// Consistency: XREADGROUP writes as it reads (`>` advances the group's last delivered id and
/// adds each entry to the PELs, a history read counts each entry delivered again). Those
/// writes are made by the steps, for the entries each step writes, not all at the start:
/// doing them at once would be the O(n) stall streams exist to avoid. That is atomic all the
/// same for every client: the stream holds its keys' intent lock from the first step to the
/// last (anything that touches them, XPENDING, XINFO, XACK, a transaction, DEBUG DIGEST, a
/// snapshot, waits), so nothing sees the group half read; and a reply whose client goes away
/// is produced to its end all the same, its bytes dropped (stream.rs), so the command's
/// effect is always whole, as Redis's. What happens before the reply (the consumer created,
/// its seen time) is done at once by [`xreadgroup_begin`], with the `now` the steps use.
pub(super) fn xreadgroup_segs(ctx: &mut ShardCtx, args: &[&[u8]]) -> Option<Segs> {
    let r = parse_read(args, true).ok()?;
    if r.block.is_some() {
        return None;
    }
    let g = r.group?;
    let (group, consumer) = (args[g], args[g + 1]);
    let keys = &args[r.streams_at..r.streams_at + r.nkeys];
    if keys.iter().enumerate().any(|(i, k)| keys[..i].contains(k)) {
        return None;
    }
    let ids = group_ids(&args[r.streams_at + r.nkeys..]);
    let limit = if r.count == 0 { usize::MAX } else { r.count };
    let now = ctx.now_ms();
    let mut parts: Vec<(&[u8], usize)> = Vec::new();
    let mut segs: Vec<(GroupId, StreamId)> = Vec::new();
    let mut db = ctx.db();
    for (k, id) in keys.iter().zip(&ids) {
        let Some(ValueRef::Stream(s)) = db.peek(k).map(|e| e.value()) else {
            return None; // no stream: NOGROUP or WRONGTYPE, the handler's
        };
        let grp = s.group(group)?;
        match id {
            GroupId::New => {
                let Some(start) = grp.last_id.next() else {
                    continue;
                };
                let n = s.count_range(start, StreamId::MAX, limit as u64) as usize;
                if n > 0 {
                    parts.push((k, n));
                    segs.push((*id, start));
                }
            }
            GroupId::History(after) => {
                // The pending entries after the id, as `serve_group`.
                let n = grp.consumers.get(consumer).map_or(0, |c| {
                    c.pel
                        .range((Bound::Excluded(*after), Bound::Unbounded))
                        .take(limit)
                        .count()
                });
                parts.push((k, n));
                segs.push((*id, after.next().unwrap_or(StreamId::MAX)));
            }
            _ => return None,
        }
    }
    let counts: Vec<usize> = parts.iter().map(|p| p.1).collect();
    read_segs(ctx.resp3, &parts, |out, i, key| {
        let (group, consumer): (Box<[u8]>, Box<[u8]>) = (group.into(), consumer.into());
        let left = counts[i];
        out.push(match segs[i] {
            (GroupId::New, _) => Seg::GroupNew {
                key,
                group,
                consumer,
                noack: r.noack,
                now,
                left,
            },
            (_, from) => Seg::GroupHistory {
                key,
                group,
                consumer,
                now,
                from,
                left,
            },
        })
    })
}

/// What a streamed XREADGROUP does before its reply, key by key as [`serve_group`]: one read
/// of the key, the consumer created (notified) and seen now.
pub(super) fn xreadgroup_begin(ctx: &mut ShardCtx, args: &[&[u8]]) {
    let Ok(r) = parse_read(args, true) else {
        return;
    };
    let Some(g) = r.group else {
        return;
    };
    let (group, consumer) = (args[g], args[g + 1]);
    let now = ctx.now_ms();
    for k in &args[r.streams_at..r.streams_at + r.nkeys] {
        group_begin(ctx, k, group, consumer, now);
    }
}

/// What XREADGROUP does to one key before its part of the reply (a streamed part's, as
/// [`serve_group`] does): one read of the key, the consumer created (notified) and seen now.
fn group_begin(ctx: &mut ShardCtx, k: &[u8], group: &[u8], consumer: &[u8], now: i64) {
    let created = {
        let mut db = ctx.db();
        db.get(k);
        let Some(s) = super::write(&mut db, k).ok().flatten() else {
            return;
        };
        super::group::with_group(s, group, |_, g| {
            let created = super::group::ensure_consumer(g, consumer, now);
            if let Some(c) = g.consumers.get_mut(consumer) {
                c.seen_time = now;
            }
            created
        })
        .unwrap_or(false)
    };
    if created {
        // The streamed steps write XCLAIMs, which create it on replay too; written first so
        // that a read that delivers nothing still has its consumer after a load.
        if ctx.propagating() {
            ctx.propagate(super::group::createconsumer_argv(k, group, consumer));
        }
        crate::notify::notify(ctx, crate::notify::STREAM, "xgroup-createconsumer", k);
    }
}
