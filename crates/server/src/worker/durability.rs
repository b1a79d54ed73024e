//! `appendfsync always`: no reply leaves before the fsync that covers what it may show.
//!
//! A thread's changes go to the AOF thread in chunks numbered by a per-thread ticket
//! (propagate.rs); the AOF thread publishes, per thread, the last ticket an fsync covered
//! (`Aof::durable`) and sends `Msg::AofSynced`. Before a connection's output is sent, the
//! bytes produced since the last look are checked: if this thread has handed over a chunk not
//! fsynced yet (after handing over what it recorded so far), those bytes wait for that ticket
//! (`Conn::durable_hold`); everything else goes. The same holds for the replies this shard
//! sends back to other threads' connections (`BatchDone`). A reply may thus wait for a write
//! it does not depend on (one of another client in the same turn), as in Redis, where every
//! reply of an event-loop turn waits for the turn's fsync; in exchange no reply ever shows a
//! write that a crash could still lose. A streamed reply's chunks (stream.rs) are produced
//! only while everything this shard handed over is fsynced: the shard's streams wait
//! (`Streams::durable_wait`) until it is.

use super::Worker;
use crate::conn::DurableHold;
use crate::msg::Msg;
use std::sync::atomic::Ordering;

impl Worker {
    /// Hands this thread's recorded changes over, and returns the last ticket handed over.
    fn hand_over_log(&mut self) -> u64 {
        crate::propagate::flush(&self.shared, self.id);
        crate::propagate::last_ticket()
    }

    fn durable(&self) -> u64 {
        self.shared.aof.durable[self.id].load(Ordering::Acquire)
    }

    /// Checks connection `c`'s output produced since the last look (see the essay).
    pub(super) fn gate_output(&mut self, c: usize) {
        let waits = self.shared.aof.acks_wait(&self.shared);
        let ticket = if waits { self.hand_over_log() } else { 0 };
        let durable = self.durable();
        let Some(conn) = self.conns.get_mut(c) else {
            return;
        };
        let len = conn.out.len();
        let hold = conn
            .durable_hold
            .get_or_insert_with(|| Box::new(DurableHold::default()));
        if len > hold.decided {
            if waits && ticket > durable {
                hold.waits.push_back((ticket, hold.decided));
            }
            hold.decided = len;
        }
        while hold.waits.front().is_some_and(|w| w.0 <= durable) {
            hold.waits.pop_front();
        }
        if hold.waits.is_empty() {
            if !waits {
                conn.durable_hold = None;
            }
        } else if !self.held_conns.contains(&c) {
            self.held_conns.push(c);
            let first = hold.waits.front().map_or(0, |w| w.0);
            self.note_holding(first);
        }
    }

    /// Tells the AOF thread this thread waits for its fsyncs. The flag is set, then the
    /// published ticket read again (both sequentially consistent, as the AOF thread's store
    /// of the ticket and its read of the flag): an fsync that finished in between is seen
    /// here if the AOF thread did not see the flag.
    fn note_holding(&mut self, ticket: u64) {
        self.shared.aof.holding[self.id].store(true, Ordering::SeqCst);
        if self.shared.aof.durable[self.id].load(Ordering::SeqCst) >= ticket {
            crate::exec::post(&self.shared, self.id, Msg::AofSynced);
        }
    }

    /// Posts a reply for another thread's connection, held while it may show a change not
    /// fsynced yet.
    pub(super) fn post_reply(&mut self, to: usize, m: Msg) {
        if self.shared.aof.acks_wait(&self.shared) || !self.held_msgs.is_empty() {
            let ticket = self.hand_over_log();
            if ticket > self.durable() || !self.held_msgs.is_empty() {
                self.held_msgs.push_back((ticket, to, m));
                self.note_holding(ticket);
                return;
            }
        }
        crate::exec::post(&self.shared, to, m);
    }

    /// Whether this shard's streams must wait before their next chunk, which may show a change
    /// of this shard not fsynced yet; if so, they wait until [`Worker::release_durable`].
    pub(super) fn streams_wait_durable(&mut self) -> bool {
        if !self.shared.aof.acks_wait(&self.shared) {
            return false;
        }
        let ticket = self.hand_over_log();
        if ticket <= self.durable() {
            return false;
        }
        self.shard.streams.durable_wait = Some(ticket);
        self.note_holding(ticket);
        true
    }

    /// The AOF thread fsynced more: what waited for it goes.
    pub(super) fn release_durable(&mut self) {
        let durable = self.durable();
        if self
            .shard
            .streams
            .durable_wait
            .is_some_and(|t| t <= durable)
        {
            // The next pump's end queues their next step.
            self.shard.streams.durable_wait = None;
        }
        while self.held_msgs.front().is_some_and(|h| h.0 <= durable) {
            let (_, to, m) = self.held_msgs.pop_front().expect("front");
            crate::exec::post(&self.shared, to, m);
        }
        let held = std::mem::take(&mut self.held_conns);
        for c in held {
            let Some(conn) = self.conns.get_mut(c) else {
                continue;
            };
            let Some(hold) = conn.durable_hold.as_mut() else {
                continue;
            };
            let before = hold.waits.len();
            while hold.waits.front().is_some_and(|w| w.0 <= durable) {
                hold.waits.pop_front();
            }
            if hold.waits.len() != before {
                self.dirty.push(c);
            }
            if !hold.waits.is_empty() {
                self.held_conns.push(c);
            }
        }
        if self.held_conns.is_empty()
            && self.held_msgs.is_empty()
            && self.shard.streams.durable_wait.is_none()
        {
            self.shared.aof.holding[self.id].store(false, Ordering::SeqCst);
        }
    }
}
