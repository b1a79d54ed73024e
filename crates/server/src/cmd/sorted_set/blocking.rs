//! The blocking sorted set commands: BZPOPMIN, BZPOPMAX, BZMPOP.
//!
//! As the blocking list commands (cmd/list/blocking.rs): served at once when a key holds
//! members (the shards of all the keys locked), otherwise waiting in crates/server/src/blocking.rs
//! until a ZADD (or any write that leaves members) serves it, the timeout passes (a null array)
//! or the client goes away. Inside MULTI they never block.

use super::write;
use crate::blocking::{self, BlockOp, KeyKind};
use crate::cmd::{with_writer, Locks, Reg, TxFuture, ERR_SYNTAX};
use crate::exec::Tx;
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_resp::ReplyWriter;
use std::sync::Arc;

pub fn register(r: &mut Reg) {
    r.tx("bzpopmin", Locks::Keys, bzpopmin);
    r.tx("bzpopmax", Locks::Keys, bzpopmax);
    r.tx("bzmpop", Locks::Keys, bzmpop);
}

/// What a key can do for a blocked sorted set pop.
fn zset_kind(ctx: &mut ShardCtx, key: &[u8]) -> KeyKind {
    match write(&mut ctx.db(), key) {
        Err(()) => KeyKind::WrongType,
        Ok(None) => KeyKind::Missing,
        Ok(Some(_)) => KeyKind::Ready,
    }
}

/// BZPOPMIN / BZPOPMAX (`count` None: replies `[key, member, score]`) and BZMPOP
/// (`[key, [[member, score], ...]]`).
#[derive(Clone, Copy)]
struct ZPopOp {
    max: bool,
    count: Option<usize>,
}

impl BlockOp for ZPopOp {
    fn kind(&self, ctx: &mut ShardCtx, key: &[u8]) -> KeyKind {
        zset_kind(ctx, key)
    }

    fn serve(&self, ctx: &mut ShardCtx, key: &[u8]) -> Vec<u8> {
        let items = super::pop_notify(ctx, key, self.max, self.count.unwrap_or(1));
        // Written as the pop it did (Redis's blocked-client propagation): ZPOPMIN / ZPOPMAX
        // key, with the number popped for BZMPOP.
        if !items.is_empty() && ctx.propagating() {
            let pop: &[u8] = if self.max { b"ZPOPMAX" } else { b"ZPOPMIN" };
            let mut v = crate::cmd::argv(&[pop, key]);
            if self.count.is_some() {
                v.push(crate::cmd::num_arg(items.len() as i64));
            }
            ctx.propagate(v);
        }
        let mut out = Vec::new();
        let mut w = ReplyWriter::new(&mut out, ctx.resp3);
        match self.count {
            None => {
                w.array(3);
                w.bulk(key);
                match items.first() {
                    Some((m, s)) => {
                        w.bulk(m);
                        w.double(*s);
                    }
                    None => {
                        w.null();
                        w.null();
                    }
                }
            }
            Some(_) => {
                w.array(2);
                w.bulk(key);
                w.array(items.len());
                for (m, s) in &items {
                    w.array(2);
                    w.bulk(m);
                    w.double(*s);
                }
            }
        }
        out
    }
}

fn bzpop(tx: Tx, args: Vec<Bytes>, max: bool) -> TxFuture {
    Box::pin(async move {
        let timeout = match blocking::parse_timeout(&args[args.len() - 1]) {
            Ok(t) => t,
            Err(e) => return with_writer(tx.resp3(), |w| w.error(e)),
        };
        let keys = args[1..args.len() - 1].to_vec();
        let op = ZPopOp { max, count: None };
        blocking::pop_or_block(&tx, keys, timeout, Arc::new(op)).await
    })
}

fn bzpopmin(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    bzpop(tx, args, false)
}

fn bzpopmax(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    bzpop(tx, args, true)
}

fn kw(a: &[u8], word: &str) -> bool {
    a.eq_ignore_ascii_case(word.as_bytes())
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
fn bzmpop(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| with_writer(resp3, |w| w.error(e));
        let timeout = match blocking::parse_timeout(&args[1]) {
            Ok(t) => t,
            Err(e) => return err(e),
        };
        let numkeys = match crate::cmd::parse_int(&args[2]) {
            Some(n) if n >= 1 => n as u64,
            _ => return err(b"ERR numkeys should be greater than 0"),
        };
        let where_idx = numkeys.saturating_add(3);
        if where_idx >= args.len() as u64 {
            return err(ERR_SYNTAX);
        }
        let where_idx = where_idx as usize;
        let max = if kw(&args[where_idx], "min") {
            false
        } else if kw(&args[where_idx], "max") {
            true
        } else {
            return err(ERR_SYNTAX);
        };
        let mut count: Option<u64> = None;
        let mut j = where_idx + 1;
        while j < args.len() {
            if count.is_none() && kw(&args[j], "count") && j + 1 < args.len() {
                match crate::cmd::parse_int(&args[j + 1]) {
                    Some(c) if c >= 1 => count = Some(c as u64),
                    _ => return err(b"ERR count should be greater than 0"),
                }
                j += 2;
            } else {
                return err(ERR_SYNTAX);
            }
        }
        let count = count.unwrap_or(1).min(usize::MAX as u64) as usize;
        let keys = args[3..where_idx].to_vec();
        let op = ZPopOp {
            max,
            count: Some(count),
        };
        blocking::pop_or_block(&tx, keys, timeout, Arc::new(op)).await
    })
}
