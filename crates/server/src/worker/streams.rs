//! Streamed replies (stream.rs) on the worker: holding a request that touches a streamed
//! key, starting a stream for a big whole-collection read, delivering the chunks that arrive
//! for this thread's connections, stepping this shard's streams once per turn, and flow
//! control at the end of a pump.

use super::*;

impl Worker {
    /// Holds connection `c` when its single-shard command, about to run inline on this
    /// thread's shard, touches a streamed key (or an earlier command of its waits there): the
    /// request goes back to the front of its queue and runs when a stream ends.
    pub(super) fn stream_park(
        &mut self,
        c: usize,
        routed: &Routed,
        args: &[&[u8]],
        owner: Owner<'_>,
    ) -> bool {
        let streams = &self.shard.streams;
        if (streams.idle() || !self.shard.lock.free())
            && !streams.has_holds()
            && self.shard.snapshot.is_none()
        {
            return false;
        }
        // Only a single-shard command on this thread's shard.
        if !matches!(routed.to, To::Shard(_, shard) if shard == self.id) {
            return false;
        }
        let conn = &mut self.conns[c];
        let me = ConnRef {
            idx: c as u32,
            gen: conn.gen,
        };
        let db = conn.state.db;
        if !self
            .shard
            .streams
            .must_wait(self.id, me, db, &routed.keys, args)
            && !self.snapshot_must_wait(db, &routed.keys, args)
        {
            return false;
        }
        let conn = &mut self.conns[c];
        conn.parsed.push_front(owner.own(args));
        conn.stream.wait = true;
        self.shard.streams.wait(me);
        // It is counted when it runs (dispatch counted it already).
        let n = &self.shared.stats[self.id].commands;
        n.store(n.load(Ordering::Relaxed).wrapping_sub(1), Ordering::Relaxed);
        true
    }

    /// Whether a command (keys at positions `keys` of `args`) must wait for the background
    /// save's hold on a big value of this shard (bgsave.rs, `key_waits`): it is then
    /// parked like work that touches a streamed key, and tried again when the value is
    /// written ([`Worker::snapshot_resume`]). Readers of the key wait too: the engine's read
    /// lookup goes through the same serialize-before-write guard as a write (it may touch
    /// the access clock, remove the key or its fields past their TTL), so a reader let
    /// through would have the rest of the value written in its own turn.
    pub(super) fn snapshot_must_wait<A: AsRef<[u8]>>(
        &mut self,
        db: usize,
        keys: &[usize],
        args: &[A],
    ) -> bool {
        if self.shard.snapshot.is_none() {
            return false;
        }
        let waits = keys
            .iter()
            .any(|&i| crate::bgsave::key_waits(&mut self.shard, db, args[i].as_ref()));
        self.shard.streams.snapshot_parked |= waits;
        waits
    }

    /// Once a turn while writes wait for the background save's hold: when the big value
    /// they waited for is written (or the save ended), everything parked runs again in
    /// order, as when a stream ends (what still has to wait parks again).
    pub(super) fn snapshot_resume(&mut self) {
        if !self.shard.streams.snapshot_parked || !crate::bgsave::take_released(&self.shard) {
            return;
        }
        self.shard.streams.snapshot_parked = false;
        self.resume_streams_waiting();
        // At the turn's end: the resumed connections run and their replies leave now (the
        // save may have ended, and the next wait for events may then block).
        self.pump();
        self.send_batches();
        self.flush_dirty();
    }

    /// Everything parked behind streamed or held keys runs again, in order; the
    /// transactions' parts that waited for the streams are scheduled once none runs.
    fn resume_streams_waiting(&mut self) {
        let (parked, waiters) = self.shard.streams.take_waiting();
        for (from, item) in parked {
            self.exec_batch(from, vec![item]);
        }
        for r in waiters {
            if let Some(cn) = self.conn_mut(r) {
                cn.stream.wait = false;
                self.resume.push(r.idx as usize);
            }
        }
        if self.shard.streams.idle() {
            // Transactions' parts that waited for the streams are scheduled, in order.
            for m in std::mem::take(&mut self.shard.streams.tx_waiting) {
                self.handle(m);
            }
        }
    }

    /// Starts a stream for connection `c`'s command when it is a big whole-collection read
    /// (stream.rs decides); its reply then arrives in chunks.
    pub(super) fn stream_start(
        &mut self,
        c: usize,
        cmd: &'static Command,
        args: &[&[u8]],
        suppress: bool,
    ) -> bool {
        if !crate::stream::candidate(cmd) {
            return false;
        }
        // Clients blocked on keys written earlier in this turn are served first (blocking.rs),
        // so that no pop changes a list once it is streamed.
        let movers = crate::blocking::serve_ready(&mut self.shard, &self.shared, self.now_ms, None);
        self.spawn_movers(movers, None);
        let conn = &mut self.conns[c];
        let dest = crate::stream::Dest {
            thread: self.id,
            conn: ConnRef {
                idx: c as u32,
                gen: conn.gen,
            },
            seq: conn.next_seq,
        };
        let mut ctx = ShardCtx {
            shard: &mut self.shard,
            db: conn.state.db,
            clock: Clock {
                touch: !conn.state.no_touch,
                ..Clock::at(self.now_ms)
            },
            resp3: conn.state.resp3,
            shared: &self.shared,
        };
        if !crate::stream::try_start(&mut ctx, cmd, args, dest) {
            return false;
        }
        conn.expect(suppress);
        account(
            &self.shared,
            self.id,
            &mut self.lap,
            cmd,
            b"",
            &conn.state,
            args,
        );
        true
    }

    pub(super) fn stream_chunk(
        &mut self,
        conn: ConnRef,
        seq: u64,
        bytes: &[u8],
        last: bool,
        end: bool,
        flow: Option<Arc<crate::stream::Flow>>,
    ) {
        match self.conn_mut(conn) {
            Some(cn) => {
                cn.deliver_part(seq, bytes, last);
                self.dirty.push(conn.idx as usize);
                if let Some(flow) = flow {
                    self.inbound.open(conn, seq, flow);
                } else if end {
                    // (A reply of a transaction's parts has one stream open at a time.)
                    self.inbound.close(conn, seq);
                }
            }
            None => {
                if let Some(flow) = flow {
                    let v = crate::stream::Verdict::Cancel;
                    self.inbound
                        .decide(&self.shared, conn, seq, &flow, v, self.now_ms);
                }
            }
        }
    }

    /// One step of this shard's streams per loop turn; when one ends, what waited runs again.
    pub(super) fn stream_tick(&mut self) {
        self.shard.streams.ticking = false;
        // A stream of the shard's own steps only while nothing is granted (they never
        // coexist: shard.rs); a transaction's part runs under its transaction's intents.
        let granted = !self.shard.lock.sched.idle() && !self.shard.streams.tx_streams();
        if self.shard.streams.last_turn == Some(self.loop_now) || granted {
            return; // stepped this turn already (stream_turn_end queues the next tick)
        }
        if self.streams_wait_durable() {
            return;
        }
        self.shard.streams.last_turn = Some(self.loop_now);
        if !crate::stream::step(&mut self.shard, &self.shared, Shared::now_ms()) {
            return;
        }
        self.resume_streams_waiting();
    }

    /// At the end of a pump: queue the next step while streams can run; give the streams of
    /// this thread's connections a credit once their last chunk left (flow control), and
    /// cancel those whose connection went away (EOF, kill, closed).
    pub(super) fn stream_turn_end(&mut self) {
        use crate::stream::{Verdict, PARTIAL_MAX};
        if !self.inbound.is_empty() {
            for (r, seq, flow) in self.inbound.waiting() {
                let c = r.idx as usize;
                let mut verdict = Verdict::Wait;
                if let Some(cn) = self.conn_mut(r) {
                    if seq < cn.done_seq {
                        verdict = Verdict::Cancel; // its reply was completed already
                    } else if cn.handle.kill.load(Ordering::Relaxed)
                        || (cn.closing && !cn.state.close_after_reply)
                    {
                        // What is left of the reply will not come: complete it so the
                        // connection can close.
                        cn.deliver_part(seq, &[], true);
                        self.dirty.push(c);
                        verdict = Verdict::Cancel;
                    } else if cn.done_seq != seq {
                        // Behind other replies: it may buffer up to PARTIAL_MAX.
                        let buffered: usize = cn
                            .stream
                            .partial
                            .iter()
                            .filter(|(s, _)| *s == seq)
                            .map(|(_, b)| b.len())
                            .sum();
                        if buffered < PARTIAL_MAX {
                            verdict = Verdict::Credit;
                        }
                    } else {
                        if cn.out_len() > 0 {
                            // Send it now; if the socket is full, its writable event brings
                            // this connection back here.
                            self.flush(c);
                        }
                        verdict = match self.conn_mut(r) {
                            Some(cn) if cn.out_len() == 0 => Verdict::Credit,
                            Some(_) => Verdict::Wait,
                            None => Verdict::Cancel,
                        };
                    }
                } else {
                    verdict = Verdict::Cancel;
                }
                let now = Shared::now_ms();
                self.inbound
                    .decide(&self.shared, r, seq, &flow, verdict, now);
            }
        }
        let streams = &mut self.shard.streams;
        if streams.runnable() && !streams.ticking {
            streams.ticking = true;
            LOCAL.with(|l| l.borrow_mut().push_back(Msg::StreamTick));
        }
    }
}
