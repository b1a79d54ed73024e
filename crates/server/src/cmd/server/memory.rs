//! MEMORY: USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP.
//!
//! Figures are Darner's own: MEMORY USAGE is what the key's entry block and its value's
//! allocations take here (Darner's encodings, mimalloc's sizes), not what Redis would spend
//! on the same data; MEMORY STATS uses Redis 7.2's field names with Darner's figures where
//! they mean something, and 0 where Darner has no such structure (see docs/compatibility.md).

use super::help_reply;
use crate::alloc;
use crate::cmd::{eq, parse_int, with_writer, ConnCtx, Locks, Reg, TxFuture};
use crate::cmd::{ERR_NOT_INT, ERR_SYNTAX};
use crate::exec::Tx;
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_resp::ReplyWriter;

pub fn register(r: &mut Reg) {
    r.key("memory|usage", usage);
    r.tx("memory|stats", Locks::None, stats);
    r.conn("memory|doctor", doctor);
    r.conn("memory|malloc-stats", malloc_stats);
    r.tx("memory|purge", Locks::None, purge);
    r.conn("memory|help", help);
}

/// A key's share of its table bucket: a 64-byte cache line holds seven entry pointers and
/// their tags.
const SLOT_BYTES: usize = 64 / 7;

/// MEMORY USAGE key [SAMPLES count]. Darner measures the whole value (its sizes are kept, not
/// sampled), so SAMPLES is only checked as Redis checks it. Like Redis, a logically expired
/// key not yet reclaimed still answers.
fn usage(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut j = 3;
    while j < args.len() {
        if eq(args[j], "samples") && j + 1 < args.len() {
            match parse_int(args[j + 1]) {
                None => return w.error(ERR_NOT_INT),
                Some(n) if n < 0 => return w.error(ERR_SYNTAX),
                Some(_) => {}
            }
            j += 2;
        } else {
            return w.error(ERR_SYNTAX);
        }
    }
    match ctx.shard.dbs[ctx.db].entry_raw(args[2]) {
        Some(e) => w.int((e.memory() + SLOT_BYTES) as i64),
        None => w.null(),
    }
}

/// MEMORY STATS: Redis 7.2's map, in its order.
fn stats(tx: Tx, _args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        // Per shard, per database: keys and the table's own bytes.
        let parts: Vec<Vec<(usize, usize)>> = tx
            .run_all(|ctx| {
                ctx.shard
                    .dbs
                    .iter()
                    .map(|db| (db.len(), db.table_overhead()))
                    .collect()
            })
            .await;
        let ndb = parts.first().map_or(0, Vec::len);
        let dbs: Vec<(usize, usize, usize)> = (0..ndb)
            .map(|j| {
                let keys = parts.iter().map(|p| p[j].0).sum();
                let overhead = parts.iter().map(|p| p[j].1).sum();
                (j, keys, overhead)
            })
            .filter(|&(_, keys, _)| keys > 0)
            .collect();
        let (used, peak) = tx.shared().metrics.note_memory();
        let startup = alloc::startup_memory().min(used);
        let rss = alloc::rss();
        let tables: usize = dbs.iter().map(|d| d.2).sum();
        let keys: usize = dbs.iter().map(|d| d.1).sum();
        let overhead = startup + tables;
        let net = used.saturating_sub(startup);
        let dataset = used.saturating_sub(overhead);
        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let diff = |a: usize, b: usize| a as i64 - b as i64;
        with_writer(tx.resp3(), |w| {
            w.map(27 + dbs.len());
            let int = |w: &mut ReplyWriter, k: &str, v: i64| {
                w.bulk(k.as_bytes());
                w.int(v);
            };
            int(w, "peak.allocated", peak as i64);
            int(w, "total.allocated", used as i64);
            int(w, "startup.allocated", startup as i64);
            for k in [
                "replication.backlog",
                "clients.slaves",
                "clients.normal",
                "cluster.links",
                "aof.buffer",
                "lua.caches",
                "functions.caches",
            ] {
                int(w, k, 0);
            }
            for &(j, _, ov) in &dbs {
                w.bulk(format!("db.{j}").as_bytes());
                w.map(2);
                int(w, "overhead.hashtable.main", ov as i64);
                // The TTL lives in the entry: there is no second table.
                int(w, "overhead.hashtable.expires", 0);
            }
            int(w, "overhead.total", overhead as i64);
            int(w, "keys.count", keys as i64);
            int(
                w,
                "keys.bytes-per-key",
                net.checked_div(keys).unwrap_or(0) as i64,
            );
            int(w, "dataset.bytes", dataset as i64);
            w.bulk(b"dataset.percentage");
            w.double(ratio(dataset, net) * 100.0);
            w.bulk(b"peak.percentage");
            w.double(ratio(used, peak) * 100.0);
            // mimalloc keeps no separate "active" figure: allocated stands in for it.
            int(w, "allocator.allocated", used as i64);
            int(w, "allocator.active", used as i64);
            int(w, "allocator.resident", rss as i64);
            w.bulk(b"allocator-fragmentation.ratio");
            w.double(1.0);
            int(w, "allocator-fragmentation.bytes", 0);
            w.bulk(b"allocator-rss.ratio");
            w.double(ratio(rss, used));
            int(w, "allocator-rss.bytes", diff(rss, used));
            w.bulk(b"rss-overhead.ratio");
            w.double(1.0);
            int(w, "rss-overhead.bytes", 0);
            w.bulk(b"fragmentation");
            w.double(ratio(rss, used));
            int(w, "fragmentation.bytes", diff(rss, used));
        })
    })
}

/// MEMORY DOCTOR: a short report in Darner's words, from the same figures.
fn doctor(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    let (used, peak) = ctx.shared.metrics.note_memory();
    let rss = alloc::rss();
    let report = if used < 5 << 20 {
        "Memory doctor: this instance uses under 5 MB; there is too little data to diagnose anything.\n".to_string()
    } else {
        let mut issues = Vec::new();
        if peak > used + used / 2 {
            issues.push(format!(
                " * Peak memory: the peak ({peak} bytes) is more than 150% of the memory in use now ({used} bytes); the allocator gives freed pages back to the system within about a second.\n"
            ));
        }
        if rss > used + used / 2 && rss - used > 10 << 20 {
            issues.push(format!(
                " * High fragmentation: the process's resident memory ({rss} bytes) is more than 150% of the memory in use ({used} bytes). MEMORY PURGE returns empty pages to the system now.\n"
            ));
        }
        if issues.is_empty() {
            "Memory doctor: no memory problem found.\n".to_string()
        } else {
            format!("Memory doctor found these issues:\n\n{}", issues.concat())
        }
    };
    w.verbatim(b"txt", report.as_bytes());
}

/// MEMORY MALLOC-STATS: mimalloc's own report.
fn malloc_stats(_: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    let s = alloc::malloc_stats();
    if s.is_empty() {
        w.verbatim(b"txt", b"Stats not supported for the current allocator");
    } else {
        w.verbatim(b"txt", s.as_bytes());
    }
}

/// MEMORY PURGE: every thread collects its own heap (mimalloc's heaps are per thread).
fn purge(tx: Tx, _args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let hops: Vec<_> = (0..tx.nshards())
            .map(|t| tx.on_thread(t, |_| alloc::purge()))
            .collect();
        for h in hops {
            h.await;
        }
        with_writer(tx.resp3(), |w| w.ok())
    })
}

fn help(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    help_reply(
        w,
        args[0],
        &[
            "DOCTOR",
            "    Report memory problems found, if any.",
            "MALLOC-STATS",
            "    The allocator's (mimalloc's) statistics report.",
            "PURGE",
            "    Make every thread give its allocator's empty pages back to the system.",
            "STATS",
            "    Figures about the server's memory use.",
            "USAGE <key> [SAMPLES <count>]",
            "    Bytes used by <key>: its entry and its value. SAMPLES is accepted; Darner",
            "    measures the whole value.",
        ],
    );
}
