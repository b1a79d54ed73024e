//! The worker's side of the transaction scheduler (sched.rs, shard.rs): transactions' parts
//! arriving for this thread's shard, their grants and releases, and the work outside
//! transactions that waits behind granted intents.
//!
//! Invariants kept here:
//! - A part is scheduled in the order its message arrived, and not while this shard streams
//!   (it waits in `Streams::tx_waiting` instead).
//! - Work outside transactions (batches from other threads, lone steps) runs in arrival
//!   order: once one waits, everything after it waits too (a connection's later commands must
//!   not pass its earlier ones).
//! - Whenever something waits, every unfinished quorum holder knows to wake this shard
//!   ([`crate::sched::Quorum::wait`]): otherwise a part whose last sibling ran on another
//!   thread would hold its keys until some unrelated message arrived.

use super::Worker;
use crate::cmd::Command;
use crate::exec::{self, post};
use crate::msg::{BatchItem, Msg, Part, Scheduled, TxId};
use crate::sched::{waiter_shards, Granted};
use darner_commands::flags;
use std::collections::VecDeque;

impl Worker {
    /// A transaction's part for this shard (Msg::Schedule).
    pub(super) fn on_schedule(&mut self, s: Box<Scheduled>) {
        // A part that writes a big value the background save is writing (or a writer waits
        // for) waits for it like a write outside transactions (bgsave.rs, `tx_waits`),
        // rather than have the rest of the value serialized in its own turn.
        let save_holds =
            self.shard.snapshot.is_some() && crate::bgsave::tx_waits(&self.shard, &s.intents);
        let streams = &mut self.shard.streams;
        if !streams.idle() || !streams.tx_waiting.is_empty() || streams.has_parked() || save_holds {
            streams.snapshot_parked |= save_holds;
            streams.tx_waiting.push_back(Msg::Schedule(s));
            return;
        }
        if self.shard.lock.sched.sweepable() {
            self.sweep_lingering();
        }
        if !self.shard.lock.deferred.is_empty() {
            // Behind the work outside transactions that waits here: a connection's command
            // deferred here must run before the transaction it sent next.
            self.shard.lock.deferred.push_back(Msg::Schedule(s));
            self.after_change(Vec::new());
            return;
        }
        let more = self.schedule_part(s);
        self.after_change(more);
    }

    /// Enters a part into the scheduler; granted, it starts at once. Returns what starting it
    /// granted in turn.
    fn schedule_part(&mut self, s: Box<Scheduled>) -> Vec<Granted<Part>> {
        let Scheduled { tx, intents, part } = *s;
        let quorum = match &part {
            Part::OneShot { quorum, .. } => Some(quorum.clone()),
            Part::Direct(p) => Some(p.quorum.clone()),
            Part::Reserve { .. } => None,
        };
        match self.shard.lock.sched.schedule(tx, intents, quorum, part) {
            Some(part) => self.start_part(tx, part),
            None => Vec::new(),
        }
    }

    /// A granted part: a reservation is told; a one-shot part runs, serves the clients its
    /// writes woke, and sends its result. Returns what its release granted (when it was its
    /// transaction's last part).
    fn start_part(&mut self, tx: TxId, part: Part) -> Vec<Granted<Part>> {
        match part {
            Part::Reserve { done, first: None } => {
                exec::complete(&self.shared, done, ());
                Vec::new()
            }
            Part::Reserve {
                done,
                first: Some((db, resp3, writer, f)),
            } => {
                if let Some(result) = self.run_on_shard(db, resp3, writer, f) {
                    let reply = Msg::HopDone {
                        task: done.task,
                        slot: done.slot,
                        result,
                    };
                    post(&self.shared, done.thread, reply);
                }
                Vec::new()
            }
            Part::OneShot {
                quorum,
                db,
                resp3,
                writer,
                f,
                done,
            } => {
                let result = self.run_on_shard(db, resp3, writer, f);
                // Clients blocked on keys it wrote are served before its result leaves.
                let movers = crate::blocking::serve_ready(
                    &mut self.shard,
                    &self.shared,
                    self.now_ms,
                    Some(tx),
                );
                // Counted down before the result leaves: a command its reply lets a client send
                // finds the intents gone, or finished (sched.rs).
                let granted = self.one_shot_ran(tx, &quorum);
                let reply = result.map(|result| {
                    let m = Msg::HopDone {
                        task: done.task,
                        slot: done.slot,
                        result,
                    };
                    (done.thread, m)
                });
                self.spawn_movers(movers, reply);
                granted
            }
            Part::Direct(p) => self.run_direct_part(tx, p),
        }
    }

    /// A one-shot part of transaction `tx` has run here: counts its quorum down; after the
    /// last part (of all shards), releases its intents here and wakes the other shards that
    /// wait for it. Returns what the release granted.
    pub(super) fn one_shot_ran(
        &mut self,
        tx: TxId,
        quorum: &crate::sched::Quorum,
    ) -> Vec<Granted<Part>> {
        let Some(bits) = quorum.part_done() else {
            return Vec::new();
        };
        for s in waiter_shards(bits, self.shared.threads) {
            if s != self.id {
                post(&self.shared, s, Msg::Released);
            }
        }
        self.shard.lock.sched.release(tx)
    }

    /// After intents were granted or released: runs what was granted (and what that grants in
    /// turn), then the deferred work that can run now; if something still waits, makes sure a
    /// wake-up will come.
    pub(super) fn after_change(&mut self, granted: Vec<Granted<Part>>) {
        let mut work: VecDeque<Granted<Part>> = granted.into();
        loop {
            while let Some(g) = work.pop_front() {
                work.extend(self.start_part(g.tx, g.part));
            }
            self.retry_deferred();
            let (_, waiting) = self.shard.lock.sched.len();
            if waiting == 0 && self.shard.lock.deferred.is_empty() {
                return;
            }
            if self.shard.lock.sched.wait_for_holders(self.id) {
                return;
            }
            // One finished meanwhile (its last part ran on another thread after the deferred
            // work above found its keys held, and before this shard asked to be told): release
            // it now, and look at the deferred work again even when the release granted no
            // waiting part. That finisher saw no request to wake this shard, so nothing else
            // would: with no intent left here, the turns' sweeps skip an idle scheduler, and
            // the deferred work (a client's pipeline) would wait for the next message to
            // arrive, for ever once the load stops.
            work.extend(self.shard.lock.sched.sweep());
        }
    }

    /// Releases the intents of transactions whose parts have all run (Msg::Released, the end
    /// of a loop turn, or before work that would wait behind them).
    ///
    /// Deferred work with nothing held here runs too: it can only be left so by a release
    /// that did not look at it, and each loop turn comes here, so such work waits at most a
    /// turn instead of until the next message (a safety net under [`Worker::after_change`]).
    pub(super) fn sweep_lingering(&mut self) {
        if self.shard.lock.sched.idle() && self.shard.lock.deferred.is_empty() {
            return;
        }
        let granted = self.shard.lock.sched.sweep();
        self.after_change(granted);
    }

    /// Runs deferred work in order until the first that must still wait. A transaction's part
    /// met there enters the scheduler (and runs if granted, with what that grants: parts that
    /// wait in the scheduler are older than any deferred work).
    fn retry_deferred(&mut self) {
        while let Some(m) = self.shard.lock.deferred.pop_front() {
            match m {
                Msg::Schedule(s) => {
                    let mut work: VecDeque<Granted<Part>> = self.schedule_part(s).into();
                    while let Some(g) = work.pop_front() {
                        work.extend(self.start_part(g.tx, g.part));
                    }
                }
                Msg::Batch { from, items, .. } => {
                    let ran = self.admit_batch(from, items, true);
                    if !ran {
                        return;
                    }
                }
                Msg::Run {
                    tx,
                    db,
                    resp3,
                    writer,
                    f,
                } => {
                    if !self.shard.lock.sched.idle() {
                        self.shard.lock.deferred.push_front(Msg::Run {
                            tx,
                            db,
                            resp3,
                            writer,
                            f,
                        });
                        return;
                    }
                    self.run_shard_fn(db, resp3, writer, f);
                }
                _ => {}
            }
        }
    }

    /// Whether a command outside transactions (in database `db`) with keys at positions
    /// `idx` of `args` may not run now. A key a transaction holds for its streamed reply
    /// does not count: the command waits for it as for a stream (stream.rs, `Streams::hold`),
    /// without holding up the shard's other work.
    fn blocked(&self, cmd: &Command, db: usize, args: &[impl AsRef<[u8]>], idx: &[usize]) -> bool {
        let sched = &self.shard.lock.sched;
        if sched.idle() {
            return false;
        }
        if idx.is_empty() {
            return true; // keyless: it may look at anything
        }
        let write = !cmd.spec.has(flags::READONLY);
        let streams = &self.shard.streams;
        idx.iter().any(|&i| {
            let k = args[i].as_ref();
            sched.blocks_key(k, write) && !(streams.has_holds() && streams.held(db, k))
        })
    }

    /// A transaction released this shard: the work that waited for its holds (stream.rs,
    /// `Streams::hold`) goes first in the deferred work, in order, the transactions' parts
    /// that waited behind it after; all run as the release allows.
    pub(super) fn release_holds(&mut self, tx: TxId) {
        if !self.shard.streams.release_holds(tx) {
            return;
        }
        let (parked, waiters) = self.shard.streams.take_waiting();
        for (from, item) in parked.into_iter().rev() {
            self.shard.lock.deferred.push_front(Msg::Batch {
                from,
                items: vec![item],
                spare: None,
            });
        }
        for r in waiters {
            if let Some(cn) = self.conn_mut(r) {
                cn.stream.wait = false;
                self.resume.push(r.idx as usize);
            }
        }
        let waiting = std::mem::take(&mut self.shard.streams.tx_waiting);
        self.shard.lock.deferred.extend(waiting);
    }

    /// A single-shard command of this thread's connection, about to run inline: whether it
    /// may (nothing deferred, and no granted intent on its keys).
    pub(super) fn admits_inline(
        &mut self,
        cmd: &Command,
        db: usize,
        args: &[&[u8]],
        keys: &[usize],
    ) -> bool {
        if self.shard.lock.free() {
            return true;
        }
        if !self.shard.lock.deferred.is_empty() {
            return false;
        }
        if self.shard.lock.sched.sweepable() {
            self.sweep_lingering();
        }
        self.shard.lock.deferred.is_empty() && !self.blocked(cmd, db, args, keys)
    }

    /// Runs a batch's items up to the first that must wait; that one and the rest wait (at the
    /// front of the deferred work when `front`, the batch came from there). Returns whether
    /// the whole batch ran.
    pub(super) fn admit_batch(
        &mut self,
        from: usize,
        mut items: Vec<BatchItem>,
        front: bool,
    ) -> bool {
        if !front {
            // (From the deferred queue, the caller has swept: sweeping here would run deferred
            // work ahead of this batch.)
            if self.shard.lock.sched.sweepable() {
                self.sweep_lingering();
            }
            if !self.shard.lock.deferred.is_empty() {
                self.shard.lock.deferred.push_back(Msg::Batch {
                    from,
                    items,
                    spare: None,
                });
                self.after_change(Vec::new());
                return false;
            }
        }
        let cut = items
            .iter()
            .position(|it| self.blocked(it.cmd, it.db, &it.args, &it.keys));
        let rest = cut.map(|i| items.split_off(i));
        if !items.is_empty() {
            self.exec_batch(from, items);
        }
        match rest {
            None => true,
            Some(rest) => {
                let m = Msg::Batch {
                    from,
                    items: rest,
                    spare: None,
                };
                if front {
                    self.shard.lock.deferred.push_front(m);
                } else {
                    self.shard.lock.deferred.push_back(m);
                    self.after_change(Vec::new());
                }
                false
            }
        }
    }

    /// A step for this shard: a transaction's (runs when it holds intents here) or a lone one
    /// (runs when nothing is held or deferred).
    pub(super) fn on_run(
        &mut self,
        tx: Option<TxId>,
        db: usize,
        resp3: bool,
        writer: Option<crate::tracking::Writer>,
        f: crate::msg::ShardFn,
    ) {
        if let Some(id) = tx {
            if self.shard.lock.sched.holds(id) {
                self.run_shard_fn(db, resp3, writer, f);
                return;
            }
        }
        if !self.shard.lock.free() {
            self.sweep_lingering();
        }
        if self.shard.lock.free() {
            self.run_shard_fn(db, resp3, writer, f);
        } else {
            self.shard.lock.deferred.push_back(Msg::Run {
                tx: None,
                db,
                resp3,
                writer,
                f,
            });
            self.after_change(Vec::new());
        }
    }
}
