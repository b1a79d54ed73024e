//! Multi-shard commands whose whole work is known up front, run without a task: MSET, MGET,
//! DEL, UNLINK, EXISTS and TOUCH of keys on several shards, sent by a client itself (inside
//! EXEC or a script they are steps of that transaction and keep the task path:
//! cmd/transactions.rs).
//!
//! The task path (exec.rs: a `Tx` holding a copy of the client's state, a boxed future, a
//! boxed closure and a boxed result per shard, the task re-polled as each result lands in its
//! slot) is general; these commands need none of it. Here dispatch splits the keys by shard
//! into plain data ([`Work`]: the pairs or keys each shard handles), sends one
//! `Msg::Schedule` per shard in the global order with the intents `Tx::run_parts` would give
//! them (`Part::Direct`), and notes a [`Gather`] on the connection's thread that counts the
//! shares still out. Each shard runs its share when its scheduler grants it, exactly as a
//! one-shot part (sched.rs: the intents are held until every share has run, so no other
//! command sees half of the command), serves the clients its writes woke, and posts its
//! [`Outcome`] back (`Msg::PartDone`). The last outcome completes the gather: the reply is
//! combined and delivered at the command's place in the connection's order, the command is
//! written to the AOF and the replication feed as the task's coordinator writes it (its
//! shares' writes are tagged with its transaction, which ends with the command as sent), its
//! statistics are recorded, and the connection resumes. Its later requests wait meanwhile, as
//! behind a task: a later command for this thread's shard must not run inline before this
//! command's share, which is still in this thread's inbox.
//!
//! A client that tracks keys (CLIENT TRACKING) runs here too, with the task path's
//! semantics (`Tx::run_parts` and `exec::part_job`): each share of MGET, EXISTS or TOUCH
//! records the keys it read on its shard while it still holds them (deferred to after its
//! writes' invalidations, as every shard step records), so no write can come between the
//! read and the record; whether it records is decided at dispatch as for the task
//! (`tracking::remembers`: not BCAST, OPTIN after CLIENT CACHING YES, OPTOUT unless CLIENT
//! CACHING NO, the flag consumed by this command). The shares of MSET, DEL and UNLINK name
//! the client as the writer of their invalidations, without a reply position (`at: None`,
//! as a task's parts): a NOLOOP client is not told of its own writes, and another one's own
//! invalidation is queued behind every reply it is owed, this command's included, so it
//! follows the reply as in Redis 7. An MSET of the wrong arity takes the task path (for its
//! error reply).

use super::*;
use crate::msg::{Part, Scheduled, TxId};
use crate::propagate::TxLog;
use crate::sched::{Granted, Intents, Quorum};
use stats::{ticks, us_per_tick};

/// The commands this path runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Mset,
    Mget,
    /// DEL and UNLINK.
    Del,
    Exists,
    Touch,
}

impl Kind {
    fn of(name: &str) -> Option<Kind> {
        Some(match name {
            "mset" => Kind::Mset,
            "mget" => Kind::Mget,
            "del" | "unlink" => Kind::Del,
            "exists" => Kind::Exists,
            "touch" => Kind::Touch,
            _ => return None,
        })
    }

    /// Arguments per key (MSET's keys come with their values).
    fn stride(self) -> usize {
        if self == Kind::Mset {
            2
        } else {
            1
        }
    }

    /// Whether its intents on its keys are writes (TOUCH only reads, as in `count_keys`).
    fn writes(self) -> bool {
        matches!(self, Kind::Mset | Kind::Del)
    }

    fn work(self, room: usize) -> Work {
        match self {
            Kind::Mset => Work::Set(Vec::with_capacity(room)),
            Kind::Mget => Work::Get(Vec::with_capacity(room)),
            Kind::Del => Work::Delete(Vec::with_capacity(room)),
            Kind::Exists => Work::Exists(Vec::with_capacity(room)),
            Kind::Touch => Work::Touch(Vec::with_capacity(room)),
        }
    }
}

/// What one shard does for such a command: data, not a closure (nothing boxed per share).
pub enum Work {
    /// MSET: these pairs, set in order.
    Set(Vec<(Bytes, Bytes)>),
    /// MGET: each key's reply.
    Get(Vec<Bytes>),
    /// DEL, UNLINK: the keys deleted, counted.
    Delete(Vec<Bytes>),
    /// EXISTS: the keys there, counted.
    Exists(Vec<Bytes>),
    /// TOUCH: the keys there, touched and counted.
    Touch(Vec<Bytes>),
}

impl Work {
    /// Does it (the same helpers as the commands' transaction forms: cmd/string.rs,
    /// cmd/generic.rs).
    fn run(&self, ctx: &mut ShardCtx) -> Outcome {
        fn count(ctx: &mut ShardCtx, ks: &[Bytes], f: fn(&mut ShardCtx, &[u8]) -> i64) -> Outcome {
            ctx.prefetch(ks);
            Outcome::Count(ks.iter().map(|k| f(ctx, k)).sum())
        }
        match self {
            Work::Set(pairs) => {
                cmd::string::mset_part(ctx, pairs);
                Outcome::Done
            }
            Work::Get(ks) => {
                let (buf, ends) = cmd::string::mget_part(ctx, ks);
                Outcome::Replies { buf, ends }
            }
            Work::Delete(ks) => count(ctx, ks, cmd::generic::del_key),
            Work::Exists(ks) => count(ctx, ks, cmd::generic::exists_key),
            Work::Touch(ks) => count(ctx, ks, cmd::generic::touch_key),
        }
    }

    /// The keys it reads, which a tracking client's share records (the read commands' keys,
    /// as their task form's intents list them: `Intents::of_reads`); none for writes.
    fn reads(&self) -> &[Bytes] {
        match self {
            Work::Get(ks) | Work::Exists(ks) | Work::Touch(ks) => ks,
            Work::Set(_) | Work::Delete(_) => &[],
        }
    }
}

/// What one shard's share reports back.
pub enum Outcome {
    Done,
    Count(i64),
    /// MGET: its keys' replies, encoded back to back, and where each ends.
    Replies {
        buf: Vec<u8>,
        ends: Vec<usize>,
    },
    /// Its work panicked (contained): the command answers an internal error.
    Failed,
}

/// One shard's share, as the shard's scheduler holds it until granted.
pub struct DirectPart {
    pub(super) quorum: Arc<Quorum>,
    db: usize,
    resp3: bool,
    /// Sent by this replica's primary: no key counts as expired (`Clock::from_primary`).
    from_primary: bool,
    /// Reads update the access clock (not for a CLIENT NO-TOUCH client; TOUCH always does).
    touch: bool,
    /// The tag of what it writes for the AOF and the feed (the command's transaction, its
    /// only step), when the command may write and they are on (propagate.rs).
    logged: Option<(TxId, u32)>,
    work: Work,
    /// The client as the writer of its invalidations, when it tracks keys.
    writer: Option<crate::tracking::Writer>,
    /// The client as a reader whose reads this share records, when they are recorded.
    reader: Option<crate::tracking::Reader>,
    /// Where its outcome goes: the connection's thread, its gather there, the share's index.
    back: (usize, u32, u32),
}

/// A command whose shares are out, on its connection's thread: what combining their outcomes
/// needs, and what the command does once they are all in.
pub(super) struct Gather {
    conn: ConnRef,
    seq: u64,
    cmd: &'static Command,
    kind: Kind,
    db: usize,
    resp3: bool,
    /// Shares whose outcome has not arrived.
    left: usize,
    /// DEL, EXISTS, TOUCH: the keys counted so far.
    count: i64,
    /// MGET: the share of each key, in key order, and each share's replies once arrived.
    owners: SmallVec<[u32; 16]>,
    replies: Vec<(Vec<u8>, Vec<usize>)>,
    failed: bool,
    /// The command as sent (for the AOF, the feed and the slow log).
    args: Vec<Bytes>,
    log: Option<TxLog>,
    /// When it was dispatched ([`ticks`]), for its statistics.
    started: u64,
}

impl Gather {
    /// The command's reply, from its shares' outcomes.
    fn reply(&self) -> Vec<u8> {
        if self.failed {
            let msg = internal_error(self.cmd.spec.full_name);
            return cmd::with_writer(self.resp3, |w| w.error(msg.as_bytes()));
        }
        match self.kind {
            Kind::Mset => cmd::with_writer(self.resp3, |w| w.ok()),
            Kind::Del | Kind::Exists | Kind::Touch => {
                cmd::with_writer(self.resp3, |w| w.int(self.count))
            }
            Kind::Mget => {
                let total: usize = self.replies.iter().map(|r| r.0.len()).sum();
                let mut out = Vec::with_capacity(total + 16);
                ReplyWriter::new(&mut out, self.resp3).array(self.owners.len());
                // Each share's replies are in its keys' order: the next one of each share.
                let mut next: SmallVec<[usize; 8]> = smallvec::smallvec![0; self.replies.len()];
                for &p in &self.owners {
                    let (buf, ends) = &self.replies[p as usize];
                    let j = next[p as usize];
                    next[p as usize] += 1;
                    let start = if j == 0 { 0 } else { ends[j - 1] };
                    out.extend_from_slice(&buf[start..ends[j]]);
                }
                out
            }
        }
    }
}

impl Worker {
    /// Runs connection `c`'s multi-shard command `cmd` without a task when this path knows
    /// it (see the module's doc); false when it did not (the caller takes the task path).
    /// `tracking`: the client as a tracking reader, and whether this command records its
    /// reads (`tracking::remembers`, decided before CLIENT CACHING's flag was consumed).
    /// Called with this connection's earlier commands for other shards sent (`send_batches`).
    pub(super) fn run_direct(
        &mut self,
        c: usize,
        cmd: &'static Command,
        args: &[&[u8]],
        owner: Owner<'_>,
        tracking: Option<(crate::tracking::Reader, bool)>,
    ) -> bool {
        let Some(kind) = Kind::of(cmd.spec.full_name) else {
            return false;
        };
        if kind == Kind::Mset && args.len().is_multiple_of(2) {
            return false;
        }
        // As a task's parts have them (`Tx::writer`, `Tx::run_parts`).
        let writer = tracking.map(|(r, _)| crate::tracking::Writer {
            id: r.id,
            noloop: r.noloop,
            at: None,
        });
        let reader = tracking
            .filter(|&(_, records)| records && !kind.writes())
            .map(|(r, _)| r);
        let threads = self.shared.threads;
        let stride = kind.stride();
        // Each key's share (shares in the order their shards first appear).
        let mut shards: SmallVec<[usize; 4]> = SmallVec::new();
        let mut owners: SmallVec<[u32; 16]> = SmallVec::new();
        for k in args[1..].iter().step_by(stride) {
            let s = cmd::shard_of(k, threads);
            let p = match shards.iter().position(|&x| x == s) {
                Some(p) => p,
                None => {
                    shards.push(s);
                    shards.len() - 1
                }
            };
            owners.push(p as u32);
        }
        // Each share's lists sized once.
        let mut sizes: SmallVec<[usize; 4]> = smallvec::smallvec![0; shards.len()];
        for &p in &owners {
            sizes[p as usize] += 1;
        }
        let mut shares: SmallVec<[(Intents, Work); 4]> = sizes
            .iter()
            .map(|&n| {
                let mut intents = Intents::default();
                intents.keys.reserve_exact(n);
                (intents, kind.work(n))
            })
            .collect();
        let all: Vec<Bytes> = owner.own(args);
        let write = kind.writes();
        for (i, &p) in owners.iter().enumerate() {
            let at = 1 + i * stride;
            let key = &all[at];
            let (intents, work) = &mut shares[p as usize];
            intents.push(key, write);
            match work {
                Work::Set(pairs) => pairs.push((key.clone(), all[at + 1].clone())),
                Work::Get(ks) | Work::Delete(ks) | Work::Exists(ks) | Work::Touch(ks) => {
                    ks.push(key.clone())
                }
            }
        }

        let conn = &mut self.conns[c];
        let suppress = take_suppress(&mut conn.state);
        let seq = conn.expect(suppress);
        conn.in_tx = true;
        let (db, resp3, from_primary) = (conn.state.db, conn.state.resp3, conn.state.master);
        let touch = !conn.state.no_touch;
        let conn_ref = ConnRef {
            idx: c as u32,
            gen: conn.gen,
        };
        let tx = exec::new_tx_id();
        let spec = cmd.spec;
        let log = (crate::propagate::enabled()
            && (spec.has(flags::WRITE) || spec.has(flags::MAY_REPLICATE)))
        .then(|| TxLog::new(tx));
        let logged = log.as_ref().map(|l| (l.id, l.step()));
        let nshares = shards.len();
        let gather = self.gathers.insert(Gather {
            conn: conn_ref,
            seq,
            cmd,
            kind,
            db,
            resp3,
            left: nshares,
            count: 0,
            replies: if kind == Kind::Mget {
                (0..nshares).map(|_| Default::default()).collect()
            } else {
                Vec::new()
            },
            owners: if kind == Kind::Mget {
                owners
            } else {
                SmallVec::new()
            },
            failed: false,
            args: all,
            log,
            started: ticks(),
        }) as u32;
        let quorum = Quorum::new(nshares);
        let mut msgs = Vec::with_capacity(nshares);
        for (p, ((mut intents, work), s)) in shares.into_iter().zip(shards).enumerate() {
            intents.normalize();
            let part = Part::Direct(DirectPart {
                quorum: quorum.clone(),
                db,
                resp3,
                from_primary,
                touch,
                logged,
                work,
                writer,
                reader,
                back: (self.id, gather, p as u32),
            });
            msgs.push((s, Msg::Schedule(Box::new(Scheduled { tx, intents, part }))));
        }
        if msgs.len() == 1 {
            // (Routing sends a command of one shard's keys to its single-shard form; kept
            // for safety: one share needs no global order.)
            let (s, m) = msgs.pop().expect("one share");
            post(&self.shared, s, m);
        } else {
            self.shared.send_ordered(msgs);
        }
        true
    }

    /// A share granted on this thread's shard: runs it as a one-shot part (as
    /// `exec::part_job` runs a task's), serves the clients its writes woke, counts the
    /// quorum down and posts its outcome back. Returns what its release granted.
    pub(super) fn run_direct_part(&mut self, tx: TxId, p: DirectPart) -> Vec<Granted<Part>> {
        let DirectPart {
            quorum,
            db,
            resp3,
            from_primary,
            touch,
            logged,
            work,
            writer,
            reader,
            back: (thread, gather, part),
        } = p;
        let outcome = self
            .run_on_shard(db, resp3, writer, |ctx| {
                ctx.clock.from_primary = from_primary;
                ctx.clock.touch = touch;
                let outcome = crate::propagate::in_tx(logged, || {
                    let o = work.run(ctx);
                    // Keys its share found expired: their DEL is part of the command.
                    crate::propagate::expired(ctx.shard);
                    o
                });
                // What it wrote reaches the AOF thread before its outcome reaches the
                // connection's thread, which ends the command's log after every share.
                if logged.is_some() {
                    crate::propagate::flush_here(ctx.shared);
                }
                // A tracking client's reads, recorded while the share holds its keys
                // (`run_on_shard` applies them after this step's invalidations).
                if let Some(r) = reader {
                    for k in work.reads() {
                        crate::tracking::remember_later(ctx.shard, k, r);
                    }
                }
                crate::notify::done(ctx);
                outcome
            })
            .unwrap_or(Outcome::Failed);
        // Clients blocked on keys it wrote are served before its outcome leaves.
        let movers =
            crate::blocking::serve_ready(&mut self.shard, &self.shared, self.now_ms, Some(tx));
        // Counted down before the outcome leaves: a command its reply lets a client send
        // finds the intents gone, or finished (sched.rs).
        let granted = self.one_shot_ran(tx, &quorum);
        let done = Msg::PartDone {
            gather,
            part,
            outcome,
        };
        self.spawn_movers(movers, Some((thread, done)));
        granted
    }

    /// A share's outcome, back on the connection's thread (`Msg::PartDone`); the last one
    /// completes its command.
    pub(super) fn on_part_done(&mut self, gather: u32, part: u32, outcome: Outcome) {
        let Some(g) = self.gathers.get_mut(gather as usize) else {
            return;
        };
        match outcome {
            Outcome::Done => {}
            Outcome::Count(n) => g.count += n,
            Outcome::Replies { buf, ends } => {
                if let Some(r) = g.replies.get_mut(part as usize) {
                    *r = (buf, ends);
                }
            }
            Outcome::Failed => g.failed = true,
        }
        g.left -= 1;
        if g.left == 0 {
            let g = self.gathers.remove(gather as usize);
            self.finish_gather(g);
        }
    }

    /// Every share has run: what the task did after its parts (dispatch.rs, `To::Shards`),
    /// in the same order: statistics, the AOF's and the feed's entry, the reply.
    fn finish_gather(&mut self, g: Gather) {
        let reply = g.reply();
        let us = (ticks().saturating_sub(g.started) as f64 * us_per_tick()) as u64;
        let err = (reply.first() == Some(&b'-')).then_some(&reply[..]);
        let views = cmd::views(&g.args);
        let state = self
            .conns
            .get(g.conn.idx as usize)
            .filter(|cn| cn.gen == g.conn.gen)
            .map(|cn| &cn.state);
        match state {
            Some(state) => record(&self.shared, self.id, g.cmd, us, err, state, &views),
            // Gone meanwhile: a slow call is still logged, without its client.
            None => {
                if let Some(us) = record_stats(&self.shared, self.id, g.cmd, us, err, &views, None)
                {
                    slowlog_push(&self.shared, us, &views, None);
                }
            }
        }
        drop(views);
        let failed = err.is_some();
        // A DEL that deleted nothing changed nothing: not written, not counted as a change
        // (propagate.rs, `call`).
        let unchanged = g.kind == Kind::Del && g.count == 0;
        if !failed && unchanged {
            crate::shared::bump(&self.shared.stats[self.id].undirty, 1);
        }
        if let Some(mut log) = g.log {
            if !failed && !unchanged && crate::propagate::logged_as_sent(g.cmd.spec) {
                log.command(g.db, g.args);
            }
            // The end of its transaction in the log, on this thread before the reply can
            // leave (durability.rs hands it over before the reply is written).
            drop(log);
        }
        let idx = g.conn.idx as usize;
        if let Some(cn) = self.conn_mut(g.conn) {
            cn.in_tx = false;
            cn.deliver(g.seq, reply);
            cn.push_own(g.seq);
            if cn.state.close_after_reply {
                cn.closing = true;
            }
            self.dirty.push(idx);
            self.resume.push(idx);
        }
    }
}
