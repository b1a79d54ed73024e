//! The shard lock on the worker (its state is `Worker::lock`, a `ShardLock`: shard.rs): a
//! transaction's `Msg::Acquire` of this shard, its steps (`Msg::Run`) and its
//! `Msg::Release`; batches from other threads that wait while the shard is locked; and the
//! transactions that waited aside for this shard's streams to end (`streams.tx_waiting`).
//!
//! Elsewhere the lock is only read: commands run inline only while `lock.free()`
//! (dispatch.rs, streams.rs), blocked clients are served and the cron expires keys only while
//! no transaction holds the shard (mod.rs), streams do not step while it is held
//! (streams.rs), and broadcast invalidations wait for its release (tracking.rs).

use super::*;
use crate::msg::{Completion, TxId};

impl Worker {
    /// A batch of single-shard commands from thread `from`: run now, or after the
    /// transactions holding or waiting for the shard.
    pub(super) fn on_batch(&mut self, from: usize, items: Vec<BatchItem>) {
        if self.lock.free() {
            self.exec_batch(from, items);
        } else {
            self.lock.waiting.push_back(Msg::Batch { from, items });
        }
    }

    /// A transaction asks for this shard: granted now when the lock is free and no stream
    /// runs; otherwise it waits (aside for the streams, or in the lock's queue).
    pub(super) fn on_acquire(&mut self, tx: TxId, done: Completion) {
        if self.lock.free() && !self.shard.streams.idle() {
            // Not in the lock's queue: the shard keeps serving other keys (shard.rs).
            self.shard.streams.tx_waiting.push_back((tx, done));
        } else if self.lock.free() {
            self.lock.holder = Some(tx);
            post(
                &self.shared,
                done.thread,
                Msg::HopDone {
                    task: done.task,
                    slot: done.slot,
                    result: Box::new(()),
                },
            );
        } else {
            self.lock.waiting.push_back(Msg::Acquire { tx, done });
        }
    }

    /// A transaction step (`tx`: the transaction that holds the lock; None: a step of no
    /// transaction, which waits while the shard is locked).
    pub(super) fn on_run(
        &mut self,
        tx: Option<TxId>,
        db: usize,
        resp3: bool,
        writer: Option<crate::tracking::Writer>,
        f: crate::msg::ShardFn,
    ) {
        let runnable = match tx {
            Some(id) => self.lock.holder == Some(id),
            None => self.lock.free(),
        };
        if runnable {
            self.run_shard_fn(db, resp3, writer, f);
        } else {
            self.lock.waiting.push_back(Msg::Run {
                tx: None,
                db,
                resp3,
                writer,
                f,
            });
        }
    }

    /// The holder lets go: what waited runs in order, up to the next transaction, which gets
    /// the lock.
    pub(super) fn on_release(&mut self, tx: TxId) {
        if self.lock.holder == Some(tx) {
            self.lock.holder = None;
            while let Some(w) = self.lock.waiting.pop_front() {
                match w {
                    Msg::Acquire { tx, done } if !self.shard.streams.idle() => {
                        // A batch just run started a stream (shard.rs).
                        self.shard.streams.tx_waiting.push_back((tx, done));
                    }
                    Msg::Acquire { tx, done } => {
                        self.lock.holder = Some(tx);
                        post(
                            &self.shared,
                            done.thread,
                            Msg::HopDone {
                                task: done.task,
                                slot: done.slot,
                                result: Box::new(()),
                            },
                        );
                        break;
                    }
                    Msg::Batch { from, items } => self.exec_batch(from, items),
                    Msg::Run {
                        db,
                        resp3,
                        writer,
                        f,
                        ..
                    } => self.run_shard_fn(db, resp3, writer, f),
                    _ => {}
                }
            }
        }
    }

    /// After a stream step (streams.rs): once the last stream ended, with the lock free,
    /// grants it to the transactions that waited for the streams.
    pub(super) fn grant_stream_waiters(&mut self) {
        if self.shard.streams.idle() && self.lock.free() {
            // Transactions that waited for the streams: the first gets the lock, the others
            // queue behind it as usual.
            let mut waiting = std::mem::take(&mut self.shard.streams.tx_waiting);
            if let Some((tx, done)) = waiting.pop_front() {
                self.lock.holder = Some(tx);
                exec::complete(&self.shared, done, ());
            }
            for (tx, done) in waiting {
                self.lock.waiting.push_back(Msg::Acquire { tx, done });
            }
        }
    }
}
