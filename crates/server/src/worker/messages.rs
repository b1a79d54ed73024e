//! Messages between threads (msg.rs): draining this thread's inbox and local queue and
//! polling the tasks they woke (`pump`), handling each message (`handle`), running a batch
//! of single-shard commands sent by another thread (`exec_batch`) and delivering its replies
//! (`BatchDone`), running transaction steps (`run_shard_fn`), and the tasks that move served
//! blocked clients' values (`spawn_movers`). The scheduler's messages are in scheduling.rs.

use super::*;

/// How many returned reply buffers a shard keeps for its next batches (one per peer that
/// sends it batches is enough; more only stand by).
const MAX_REPLY_SPARES: usize = 8;

/// A reply buffer bigger than this is not sent back for reuse (it is freed where it was read).
const MAX_SPARE_REPLY_BYTES: usize = 256 * 1024;

impl Worker {
    // ---- messages ----

    /// Drains the inbox and the local queue and polls woken tasks until nothing is left.
    pub(super) fn pump(&mut self) {
        loop {
            let mut progress = false;
            // Every sender sets `notified` after its message is in the channel (and wakes
            // this thread when it flips it), so a clear flag means nothing to receive yet:
            // the usual turn of an unpipelined client skips the channel. A message whose
            // flag lands just after this load wakes the next turn.
            let inbox = &self.shared.inboxes[self.id];
            // Cleared by a swap, not a store: the swap takes part in the senders' order of
            // `notified`, so a message whose sender saw the flag still set is in the channel
            // when the drain below looks (a plain store could become visible after the
            // channel was read, leaving that message stranded with the flag clear).
            if inbox.notified.load(Ordering::Acquire)
                && inbox.notified.swap(false, Ordering::SeqCst)
            {
                while let Ok(m) = self.rx.try_recv() {
                    self.handle(m);
                    // What handling `m` posted to this thread goes before the next message
                    // from another thread, which it may have caused (a keyspace notification
                    // published by a batch precedes what the batch's reply lets a client send).
                    while let Some(m) = LOCAL.with(|l| l.borrow_mut().pop_front()) {
                        self.handle(m);
                    }
                    progress = true;
                }
            }
            while let Some(m) = LOCAL.with(|l| l.borrow_mut().pop_front()) {
                self.handle(m);
                progress = true;
            }
            if self.exec.has_ready() {
                self.exec.run_ready();
                progress = true;
            }
            let resume = std::mem::take(&mut self.resume);
            for c in resume {
                self.process(c);
                progress = true;
            }
            self.send_batches();
            if !progress {
                break;
            }
        }
        self.stream_turn_end();
    }

    pub(super) fn handle(&mut self, m: Msg) {
        match m {
            Msg::Batch { from, items, spare } => {
                if let Some(spare) = spare {
                    if self.reply_spares.len() < MAX_REPLY_SPARES {
                        self.reply_spares.push(spare);
                    }
                }
                self.admit_batch(from, items, false);
            }
            Msg::BatchDone {
                shard,
                mut replies,
                mut spent,
            } => {
                let buf = &replies.buf;
                for (cr, seq, s, e, slow) in replies.items.drain(..) {
                    if let Some(call) = slow {
                        let state = self
                            .conns
                            .get(cr.idx as usize)
                            .filter(|c| c.gen == cr.gen)
                            .map(|c| &c.state);
                        slowlog_push(&self.shared, call.0, &cmd::views(&call.1), state);
                    }
                    if let Some(conn) = self.conn_mut(cr) {
                        conn.deliver_slice(seq, &buf[s as usize..e as usize]);
                        self.dirty.push(cr.idx as usize);
                    }
                }
                spent.clear();
                let next = &mut self.batches[shard];
                if next.is_empty() && next.capacity() < spent.capacity() {
                    *next = spent;
                }
                // The buffers go back with the next batch to that shard (unless outsized: a
                // huge reply's buffer is not kept for ever).
                if replies.buf.capacity() <= MAX_SPARE_REPLY_BYTES {
                    replies.buf.clear();
                    self.spare_replies[shard] = Some(replies);
                }
            }
            Msg::Schedule(s) => self.on_schedule(s),
            Msg::Released => self.sweep_lingering(),
            Msg::Run {
                tx,
                db,
                resp3,
                writer,
                f,
            } => self.on_run(tx, db, resp3, writer, f),
            Msg::Release { tx } => {
                self.release_holds(tx);
                let granted = self.shard.lock.sched.release(tx);
                self.after_change(granted);
            }
            Msg::Unpaused => {
                // CLIENT UNPAUSE: held commands run now, not at the next cron tick.
                let held: Vec<usize> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.paused.is_some())
                    .map(|(k, _)| k)
                    .collect();
                self.retry_paused(held);
            }
            Msg::Thread { f } => {
                let mut ctx = ThreadCtx {
                    id: self.id,
                    conns: &mut self.conns,
                    shared: &self.shared,
                    listeners: &mut self.listeners,
                    registry: self.poll.registry(),
                };
                contained("thread step", || f(&mut ctx));
                // A closure may have marked connections for closing (CLIENT KILL).
                let kill: Vec<usize> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.handle.kill.load(Ordering::Relaxed))
                    .map(|(k, _)| k)
                    .collect();
                for k in kill {
                    self.conns[k].closing = true;
                    self.dirty.push(k);
                }
            }
            Msg::HopDone { task, slot, result } => {
                exec::fill_slot(slot, result);
                self.exec.wake(task);
            }
            Msg::PartDone {
                gather,
                part,
                outcome,
            } => self.on_part_done(gather, part, outcome),
            Msg::Unfence { conn } => {
                if let Some(cn) = self.conn_mut(conn) {
                    cn.lift_fence();
                    self.dirty.push(conn.idx as usize);
                }
            }
            Msg::TxDone {
                conn,
                seq,
                reply,
                client,
            } => {
                if let Some(cn) = self
                    .conns
                    .get_mut(conn.idx as usize)
                    .filter(|c| c.gen == conn.gen)
                {
                    let was_monitor = cn.state.monitor;
                    cn.state = *client;
                    if cn.state.monitor && !was_monitor {
                        self.shared.monitors.fetch_add(1, Ordering::Relaxed);
                    }
                    cn.in_tx = false;
                    cn.deliver(seq, reply);
                    if cn.push_own(seq) {
                        self.dirty.push(conn.idx as usize);
                    }
                    if cn.state.close_after_reply {
                        cn.closing = true;
                    }
                    self.dirty.push(conn.idx as usize);
                    self.resume.push(conn.idx as usize);
                }
            }
            Msg::StreamChunk {
                conn,
                seq,
                bytes,
                last,
                end,
                flow,
            } => self.stream_chunk(conn, seq, &bytes, last, end, flow),
            Msg::StreamTick => self.stream_tick(),
            Msg::Evict => {
                self.evict_check(false);
            }
            Msg::AofSynced => self.release_durable(),
            Msg::ReplicaData { conn, bytes } => {
                if let Some(cn) = self.conn_mut(conn) {
                    cn.out.extend_from_slice(&bytes);
                    self.dirty.push(conn.idx as usize);
                }
            }
            Msg::Monitor { line } => {
                let ids: Vec<usize> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.state.monitor)
                    .map(|(k, _)| k)
                    .collect();
                for k in ids {
                    self.conns[k].out.extend_from_slice(&line);
                    self.dirty.push(k);
                }
            }
            Msg::Invalidate { what, table, conns } => {
                for (cr, after) in conns {
                    self.invalidate_conn(cr, &what, table, after);
                }
            }
            Msg::InvalidateRedirected {
                what,
                conn,
                null_resp3,
            } => {
                if let Some(cn) = self.conn_mut(conn) {
                    let (resp3, subscribed) = (cn.state.resp3, cn.state.subscribed());
                    if let Some(f) = crate::tracking::frame(resp3, subscribed, &what, null_resp3) {
                        cn.push(f, None);
                        self.dirty.push(conn.idx as usize);
                    }
                }
            }
            Msg::TrackingFlush => {
                let ids: Vec<ConnRef> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.state.tracking.is_some())
                    .map(|(k, c)| ConnRef {
                        idx: k as u32,
                        gen: c.gen,
                    })
                    .collect();
                for cr in ids {
                    self.invalidate_conn(cr, &crate::tracking::Invalid::All, false, None);
                }
            }
            Msg::TrackingForget { id } => self.shard.tracking.forget(id),
            Msg::Publish { msg, targets } => {
                for t in targets {
                    let Some(conn) = self.conn_mut(t.conn) else {
                        continue;
                    };
                    let pattern = t.pattern.as_deref();
                    if crate::pubsub::still_subscribed(&conn.state, &msg, pattern) {
                        let resp3 = conn.state.resp3;
                        let mut w = ReplyWriter::new(&mut conn.out, resp3);
                        crate::pubsub::write_frame(&mut w, &msg, pattern);
                        self.dirty.push(t.conn.idx as usize);
                    }
                }
            }
            Msg::Spawn { f } => {
                let task = f(self.shared.clone());
                self.exec.spawn(task);
            }
            Msg::Shutdown => self.stop = true,
        }
    }

    pub(super) fn conn_mut(&mut self, r: ConnRef) -> Option<&mut Conn> {
        self.conns
            .get_mut(r.idx as usize)
            .filter(|c| c.gen == r.gen)
    }

    pub(super) fn run_shard_fn(
        &mut self,
        db: usize,
        resp3: bool,
        writer: Option<crate::tracking::Writer>,
        f: crate::msg::ShardFn,
    ) {
        self.run_on_shard(db, resp3, writer, f);
        if std::mem::take(&mut self.shard.streams.held_new) {
            // Work deferred behind the keys just held waits for them aside instead.
            self.after_change(Vec::new());
        }
        // A transaction's serving step may have left second steps to run (blocking.rs).
        for m in crate::blocking::take_stashed() {
            self.exec.spawn(m);
        }
    }

    /// Runs `f` on this thread's shard in database `db`, then sends the invalidations its
    /// writes owe (`writer`: the client, if it tracks keys) and records the reads it left for
    /// tracking. None when `f` panicked (contained: the step's task never resumes).
    pub(super) fn run_on_shard<R>(
        &mut self,
        db: usize,
        resp3: bool,
        writer: Option<crate::tracking::Writer>,
        f: impl FnOnce(&mut ShardCtx) -> R,
    ) -> Option<R> {
        let mut ctx = ShardCtx {
            shard: &mut self.shard,
            db,
            clock: Clock::at(self.now_ms),
            resp3,
            shared: &self.shared,
        };
        let r = contained("shard step", || f(&mut ctx));
        drop(ctx);
        self.drain_written(writer);
        for (k, r) in std::mem::take(&mut self.shard.tracking.deferred) {
            crate::tracking::remember(&mut self.shard, &k, r);
        }
        r
    }

    /// Starts loading the table buckets, then the entries, of a batch's first keys, so that
    /// the items find them in cache (as a connection's own pipeline does: conn_io.rs).
    fn prefetch_batch(&self, items: &[BatchItem]) {
        let mut hashes = [(0usize, 0u64); 64];
        let mut n = 0;
        for it in items.iter().take(hashes.len()) {
            if let Some(&k) = it.keys.first() {
                hashes[n] = (it.db, self.shard.dbs[it.db].prefetch(&it.args[k]));
                n += 1;
            }
        }
        for &(db, h) in &hashes[..n] {
            self.shard.dbs[db].prefetch_entry(h);
        }
    }

    pub(super) fn exec_batch(&mut self, from: usize, items: Vec<BatchItem>) {
        if items.len() > 1 {
            self.prefetch_batch(&items);
        }
        // This shard keeps its part of maxmemory before the batch's commands run (the
        // sender checked the whole process's state and refused what it had to: evict.rs).
        if self.shared.config.hot.maxmemory.load(Ordering::Relaxed) != 0 {
            self.evict_check(false);
        }
        let mut held: Vec<crate::blocking::Mover> = Vec::new();
        // Room for a short reply each (a GET's bulk string of a small value): few regrowths;
        // in the buffers an earlier batch's replies came back in, when there are some.
        let mut replies = self.reply_spares.pop().unwrap_or_default();
        replies.buf.reserve(items.len() * 48);
        replies.items.reserve(items.len());
        let ReplyBufs { buf, items: done } = &mut *replies;
        let now = self.now_ms;
        let mut lap = Lap::start();
        let mut items = items;
        // Items that must wait for a stream, parked (in order) once the others have run.
        let mut parked: SmallVec<[usize; 2]> = SmallVec::new();
        for (i, it) in items.iter_mut().enumerate() {
            let Some(f) = it.cmd.key_fn() else {
                continue;
            };
            if self
                .shard
                .streams
                .must_wait(from, it.conn, it.db, &it.keys, &it.args)
                || self.snapshot_must_wait(it.db, &it.keys, &it.args)
            {
                parked.push(i);
                continue;
            }
            let start_at = buf.len();
            let mut ctx = ShardCtx {
                shard: &mut self.shard,
                db: it.db,
                clock: Clock {
                    touch: it.touch,
                    from_primary: it.from_primary,
                    ..Clock::at(now)
                },
                resp3: it.resp3,
                shared: &self.shared,
            };
            let views = cmd::views(&it.args);
            let dest = crate::stream::Dest {
                thread: from,
                conn: it.conn,
                seq: it.seq,
            };
            if crate::stream::candidate(it.cmd) {
                // A list written in this batch may have blocked clients to serve first.
                let movers = crate::blocking::serve_ready(ctx.shard, &self.shared, now, None);
                held.extend(movers);
            }
            if crate::stream::try_start(&mut ctx, it.cmd, &views, dest) {
                drop(ctx);
                if let Some((r, true)) = it.track {
                    self.remember_keys(&it.keys, &views, r);
                }
                record_stats(&self.shared, self.id, it.cmd, lap.lap(), None, &views, None);
                continue;
            }
            let mut w = ReplyWriter::new(buf, it.resp3);
            run_handler(f, &mut ctx, &views, &mut w, start_at, it.cmd);
            drop(ctx);
            self.drain_written(it.track.map(|(r, _)| crate::tracking::Writer {
                id: r.id,
                noloop: r.noloop,
                at: Some((it.conn, it.seq)),
            }));
            if let Some((r, true)) = it.track {
                self.remember_keys(&it.keys, &views, r);
            }
            let err = (buf.get(start_at) == Some(&b'-')).then(|| buf[start_at..].to_vec());
            let slow = record_stats(
                &self.shared,
                self.id,
                it.cmd,
                lap.lap(),
                err.as_deref(),
                &views,
                None,
            );
            drop(views);
            let slow = slow.map(|us| Box::new((us, std::mem::take(&mut it.args).into_vec())));
            done.push((it.conn, it.seq, start_at as u32, buf.len() as u32, slow));
        }
        for (n, i) in parked.into_iter().enumerate() {
            let it = items.remove(i - n);
            self.shard.streams.park(from, it);
        }
        // Blocked clients these writes woke are served before the batch's replies leave; a
        // BLMOVE's push on another shard holds the replies until it is done (blocking.rs).
        // (Keys a transaction holds wait for it: blocking::serve_ready.)
        held.extend(crate::blocking::serve_ready(
            &mut self.shard,
            &self.shared,
            now,
            None,
        ));
        if replies.items.is_empty() {
            if self.reply_spares.len() < MAX_REPLY_SPARES {
                replies.buf.clear();
                self.reply_spares.push(replies);
            }
            self.spawn_movers(held, None);
            return;
        }
        let batch = Msg::BatchDone {
            shard: self.id,
            replies,
            spent: items,
        };
        if held.is_empty() {
            self.post_reply(from, batch);
        } else {
            self.spawn_movers(held, Some((from, batch)));
        }
    }

    /// Runs the second steps of served blocked clients (blocking.rs) as a task; when they
    /// are all done, posts `then` (a held reply, or a fence's lift) to its thread.
    pub(super) fn spawn_movers(
        &mut self,
        movers: Vec<crate::blocking::Mover>,
        then: Option<(usize, Msg)>,
    ) {
        if movers.is_empty() {
            if let Some((t, m)) = then {
                post(&self.shared, t, m);
            }
            return;
        }
        let shared = self.shared.clone();
        self.exec.spawn(async move {
            for m in movers {
                m.await;
            }
            if let Some((t, m)) = then {
                post(&shared, t, m);
            }
        });
    }
}
