//! The blocking list commands: BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH.
//!
//! Each first behaves as its non-blocking twin when a key can serve it now (with the shards of
//! all its keys locked); otherwise it waits in blocking.rs until a push serves it, the timeout
//! passes (a null array: Redis replies that to every timed-out blocked client, BLMOVE
//! included) or the client goes away. Inside MULTI they never block.

use super::*;
use crate::blocking::{self, BlockOp, KeyKind, Outcome};
use crate::cmd::with_writer;
use std::sync::Arc;
use std::time::Duration;

/// What a key can do for a blocked list command.
fn list_kind(ctx: &mut ShardCtx, key: &[u8]) -> KeyKind {
    match key_state(&mut ctx.db(), key) {
        KeyState::Missing => KeyKind::Missing,
        KeyState::WrongType => KeyKind::WrongType,
        KeyState::List => KeyKind::Ready,
    }
}

/// BLPOP / BRPOP (`count` None: replies `[key, element]`) and BLMPOP (`[key, [elements]]`).
#[derive(Clone, Copy)]
struct PopOp {
    left: bool,
    count: Option<usize>,
}

impl BlockOp for PopOp {
    fn kind(&self, ctx: &mut ShardCtx, key: &[u8]) -> KeyKind {
        list_kind(ctx, key)
    }

    // Written as the pop it did (Redis's blocked-client propagation): LPOP / RPOP key, with
    // the number popped for BLMPOP.
    fn serve(&self, ctx: &mut ShardCtx, key: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = ReplyWriter::new(&mut out, ctx.resp3);
        let pop: &[u8] = if self.left { b"LPOP" } else { b"RPOP" };
        match self.count {
            Some(c) => {
                let len = |ctx: &mut ShardCtx| match list_mut(&mut ctx.db(), key) {
                    Ok(Some(l)) => l.len(),
                    _ => 0,
                };
                let before = if ctx.propagating() { len(ctx) } else { 0 };
                mpop_key(ctx, key, self.left, c, &mut w);
                if ctx.propagating() {
                    let n = before.saturating_sub(len(ctx));
                    if n > 0 {
                        let mut v = crate::cmd::argv(&[pop, key]);
                        v.push(crate::cmd::num_arg(n as i64));
                        ctx.propagate(v);
                    }
                }
            }
            None => {
                let fill = fill(ctx);
                let mut db = ctx.db();
                let v = match list_mut(&mut db, key) {
                    Ok(Some(l)) => l.pop(self.left),
                    _ => None,
                };
                let gone = removed(&mut db, key, fill);
                if v.is_some() {
                    ctx.propagate_args(&[pop, key]);
                    notify_removed(ctx, key, pop_event(self.left), gone);
                }
                w.array(2);
                w.bulk(key);
                match v {
                    Some(v) => w.bulk(&v),
                    None => w.null(),
                }
            }
        }
        out
    }
}

fn bpop(tx: Tx, args: Vec<Bytes>, left: bool) -> TxFuture {
    Box::pin(async move {
        let timeout = match blocking::parse_timeout(&args[args.len() - 1]) {
            Ok(t) => t,
            Err(e) => return with_writer(tx.resp3(), |w| w.error(e)),
        };
        let keys = args[1..args.len() - 1].to_vec();
        let op = PopOp { left, count: None };
        blocking::pop_or_block(&tx, keys, timeout, Arc::new(op)).await
    })
}

pub(super) fn blpop(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    bpop(tx, args, true)
}

pub(super) fn brpop(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    bpop(tx, args, false)
}

pub(super) fn blmpop(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| with_writer(resp3, |w| w.error(e));
        let timeout = match blocking::parse_timeout(&args[1]) {
            Ok(t) => t,
            Err(e) => return err(e),
        };
        let numkeys = match parse_range(&args[2], 1, b"ERR numkeys should be greater than 0") {
            Ok(n) => n as u64,
            Err(e) => return err(e),
        };
        if numkeys >= args.len() as u64 - 3 {
            return err(ERR_SYNTAX);
        }
        let where_idx = 3 + numkeys as usize;
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
        let keys = args[3..where_idx].to_vec();
        let op = PopOp {
            left,
            count: Some(count.unwrap_or(1)),
        };
        blocking::pop_or_block(&tx, keys, timeout, Arc::new(op)).await
    })
}

/// BLMOVE / BRPOPLPUSH served from `src`. With the destination on the same shard the whole
/// move happens there; otherwise the element is taken there and pushed by the second step (on
/// the destination's shard; back into the source, and WRONGTYPE, if the destination turned out
/// to hold another type). Either way the waiter gets its final reply (`b'R'` then the reply).
struct MoveOp {
    dst: Bytes,
    dst_shard: usize,
    src_shard: usize,
    from_left: bool,
    to_left: bool,
    /// BRPOPLPUSH: written as RPOPLPUSH, as Redis does (BLMOVE as LMOVE).
    rpoplpush: bool,
}

impl MoveOp {
    fn same_shard(&self) -> bool {
        self.src_shard == self.dst_shard
    }
}

impl BlockOp for MoveOp {
    fn kind(&self, ctx: &mut ShardCtx, key: &[u8]) -> KeyKind {
        list_kind(ctx, key)
    }

    fn serve(&self, ctx: &mut ShardCtx, key: &[u8]) -> Vec<u8> {
        let side = |left: bool| -> &'static [u8] {
            if left {
                b"LEFT"
            } else {
                b"RIGHT"
            }
        };
        if self.same_shard() {
            let moved = lmove_local(ctx, key, &self.dst, self.from_left, self.to_left);
            if let Moved::Value(_) = moved {
                // Written as the LMOVE (RPOPLPUSH) it did.
                if self.rpoplpush {
                    ctx.propagate_args(&[b"RPOPLPUSH", key, &self.dst]);
                } else {
                    ctx.propagate_args(&[
                        b"LMOVE",
                        key,
                        &self.dst,
                        side(self.from_left),
                        side(self.to_left),
                    ]);
                }
            }
            let mut out = vec![b'R'];
            let mut w = ReplyWriter::new(&mut out, ctx.resp3);
            match moved {
                Moved::Null => w.null(),
                Moved::WrongType => w.error(ERR_WRONGTYPE),
                Moved::Value(v) => w.bulk(&v),
            }
            return out;
        }
        let fill = fill(ctx);
        let mut db = ctx.db();
        let v = match list_mut(&mut db, key) {
            Ok(Some(l)) => l.pop(self.from_left).unwrap_or_default(),
            _ => Vec::new(),
        };
        let gone = removed(&mut db, key, fill);
        // Across shards the pop's events leave now and the push's from the destination's
        // thread later (Redis publishes the push first). Each shard writes its half: the
        // pop here, the push (or the push back) where it happens.
        ctx.propagate_args(&[if self.from_left { b"LPOP" } else { b"RPOP" }, key]);
        notify_removed(ctx, key, pop_event(self.from_left), gone);
        v
    }

    fn second_step(
        &self,
        at: blocking::StepAt,
        element: Vec<u8>,
    ) -> Result<Vec<u8>, blocking::SecondStep> {
        if self.same_shard() {
            return Ok(element);
        }
        let (shared, db, resp3) = (at.shared.clone(), at.db, at.resp3);
        let src = Bytes::copy_from_slice(at.key);
        let (dst, to_left, from_left) = (self.dst.clone(), self.to_left, self.from_left);
        let (dst_shard, src_shard) = (self.dst_shard, self.src_shard);
        Err(Box::pin(async move {
            let v = element.clone();
            let pushed = crate::exec::run_on(&shared, dst_shard, db, resp3, move |ctx| {
                let fill = fill(ctx);
                let bytes = added_bytes(&v, false);
                let ok = push_into(&mut ctx.db(), &dst, &[&v], bytes, to_left, false, fill).is_ok();
                if ok {
                    ctx.propagate_args(&[if to_left { b"LPUSH" } else { b"RPUSH" }, &dst, &v]);
                    crate::notify::notify(ctx, crate::notify::LIST, push_event(to_left), &dst);
                }
                ok
            })
            .await;
            let mut out = vec![b'R'];
            if pushed {
                ReplyWriter::new(&mut out, resp3).bulk(&element);
                return out;
            }
            crate::exec::run_on(&shared, src_shard, db, resp3, move |ctx| {
                let fill = fill(ctx);
                let bytes = added_bytes(&element, false);
                let back = push_into(
                    &mut ctx.db(),
                    &src,
                    &[&element],
                    bytes,
                    from_left,
                    false,
                    fill,
                );
                if back.is_ok() {
                    ctx.propagate_args(&[
                        if from_left { b"LPUSH" } else { b"RPUSH" },
                        &src,
                        &element,
                    ]);
                }
            })
            .await;
            ReplyWriter::new(&mut out, resp3).error(ERR_WRONGTYPE);
            out
        }))
    }
}

async fn bmove(
    tx: &Tx,
    src: Bytes,
    dst: Bytes,
    from_left: bool,
    to_left: bool,
    timeout: Option<Duration>,
    rpoplpush: bool,
) -> Vec<u8> {
    let resp3 = tx.resp3();
    let src_kind = tx
        .run(tx.shard_of(&src), {
            let src = src.clone();
            move |ctx| list_kind(ctx, &src)
        })
        .await;
    match src_kind {
        KeyKind::WrongType => return with_writer(resp3, |w| w.error(ERR_WRONGTYPE)),
        KeyKind::Ready => {
            let side = |left: bool| Bytes::from_static(if left { b"LEFT" } else { b"RIGHT" });
            let out = lmove_generic(tx, src.clone(), dst.clone(), from_left, to_left).await;
            // Served at once: written as the LMOVE it did (coordinator_command writes no
            // blocking command).
            if crate::propagate::enabled()
                && !matches!(out.first(), Some(b'-' | b'_'))
                && !out.starts_with(b"$-1")
            {
                tx.log_command(if rpoplpush {
                    vec![Bytes::from_static(b"RPOPLPUSH"), src, dst]
                } else {
                    vec![
                        Bytes::from_static(b"LMOVE"),
                        src,
                        dst,
                        side(from_left),
                        side(to_left),
                    ]
                });
            }
            return out;
        }
        KeyKind::Missing => {}
    }
    if tx.nested() {
        return with_writer(resp3, |w| w.null());
    }
    let op = MoveOp {
        dst: dst.clone(),
        dst_shard: tx.shard_of(&dst),
        src_shard: tx.shard_of(&src),
        from_left,
        to_left,
        rpoplpush,
    };
    match blocking::block(tx, std::slice::from_ref(&src), Arc::new(op), timeout).await {
        Some(Outcome::Served { payload, .. }) if payload.first() == Some(&b'R') => {
            payload[1..].to_vec()
        }
        Some(Outcome::Unblocked { error: true }) => {
            with_writer(resp3, |w| w.error(blocking::ERR_UNBLOCKED))
        }
        _ => with_writer(resp3, |w| w.null_array()),
    }
}

pub(super) fn blmove(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let (Some(from), Some(to)) = (side(&args[3]), side(&args[4])) else {
            return with_writer(resp3, |w| w.error(ERR_SYNTAX));
        };
        let timeout = match blocking::parse_timeout(&args[5]) {
            Ok(t) => t,
            Err(e) => return with_writer(resp3, |w| w.error(e)),
        };
        bmove(
            &tx,
            args[1].clone(),
            args[2].clone(),
            from,
            to,
            timeout,
            false,
        )
        .await
    })
}

pub(super) fn brpoplpush(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let timeout = match blocking::parse_timeout(&args[3]) {
            Ok(t) => t,
            Err(e) => return with_writer(tx.resp3(), |w| w.error(e)),
        };
        bmove(
            &tx,
            args[1].clone(),
            args[2].clone(),
            false,
            true,
            timeout,
            true,
        )
        .await
    })
}
