//! The worker's side of client tracking (the tables and frames are in crate::tracking):
//! recording what tracking clients read on this shard, invalidating the keys written
//! (readers on this thread at once, others by message, redirects followed), and the end of
//! a turn's broadcast (BCAST) messages.

use super::*;

impl Worker {
    /// Records the keys a tracking client's read-only command read on this shard (`keys`:
    /// their positions among `args`).
    pub(super) fn remember_keys(
        &mut self,
        keys: &[usize],
        args: &[&[u8]],
        r: crate::tracking::Reader,
    ) {
        for &i in keys {
            crate::tracking::remember(&mut self.shard, args[i], r);
        }
    }

    /// Invalidates the keys written since the last call: their readers are told (except a
    /// NOLOOP `writer`) and forgotten; keys under broadcast prefixes are gathered for the end
    /// of the turn.
    pub(super) fn drain_written(&mut self, writer: Option<crate::tracking::Writer>) {
        if !self.shard.tracking.collecting {
            // A prefix added by another thread since this shard last looked: its databases
            // noted the writes already (the shared flag), so from now on they are drained.
            if !self.shared.tracking.prefixes.active() {
                return;
            }
            crate::tracking::collect(&mut self.shard, true);
        }
        let prefixes = self.shared.tracking.prefixes.count() > 0;
        for db in 0..self.shard.dbs.len() {
            if !self.shard.dbs[db].has_written() {
                continue;
            }
            for (k, expired) in self.shard.dbs[db].take_written() {
                if let Some(readers) = self.shard.tracking.take(&k) {
                    self.invalidate_readers(&k, &readers, writer);
                }
                if prefixes {
                    // An expiry has no writer: NOLOOP does not hide it (Redis: the key is
                    // deleted on behalf of no client).
                    let by = match writer {
                        Some(w) if w.noloop && !expired => w.id,
                        _ => 0,
                    };
                    for p in self.shared.tracking.prefixes.matching(&k) {
                        // Once an expiry or another client's write is due (0), it stays due.
                        self.shard
                            .tracking
                            .bcast
                            .entry(p)
                            .or_default()
                            .entry(Bytes::copy_from_slice(&k))
                            .and_modify(|w| {
                                if *w != 0 {
                                    *w = by
                                }
                            })
                            .or_insert(by);
                    }
                }
            }
        }
    }

    /// End of a loop turn: writes not yet drained (expiry, served blocked clients), the
    /// turn's broadcast messages, and whether the shard keeps noting writes.
    pub(super) fn tracking_turn(&mut self) {
        self.drain_written(None);
        // A transaction's broadcast keys leave together when it is done with the shard (its
        // steps may span several turns; Redis sends what one command changed in one message).
        // A multi-shard command's part that ran here before its last part ran elsewhere holds
        // its keys until then: this shard asks to be woken then, or they would wait for its
        // next message (sched.rs: the end of such a command sends none by itself).
        let sched = &self.shard.lock.sched;
        if !self.shard.tracking.bcast.is_empty()
            && (sched.idle() || sched.holders_done_or_wake(self.id))
        {
            for (prefix, keys) in std::mem::take(&mut self.shard.tracking.bcast) {
                for r in self.shared.tracking.prefixes.readers(&prefix) {
                    let ks: Vec<Bytes> = keys
                        .iter()
                        .filter(|(_, w)| !(r.noloop && **w == r.id))
                        .map(|(k, _)| k.clone())
                        .collect();
                    if !ks.is_empty() {
                        post(
                            &self.shared,
                            r.thread,
                            Msg::Invalidate {
                                what: crate::tracking::Invalid::Keys(ks),
                                table: false,
                                conns: vec![(r.conn, None)],
                            },
                        );
                    }
                }
            }
        }
        let want = !self.shard.tracking.is_empty() || self.shared.tracking.prefixes.count() > 0;
        crate::tracking::collect(&mut self.shard, want);
        self.shared.tracking.keys[self.id].store(self.shard.tracking.keys(), Ordering::Relaxed);
        self.shared.tracking.items[self.id].store(self.shard.tracking.items(), Ordering::Relaxed);
    }

    /// Tells the readers of a written key, except a NOLOOP writer: those of this thread at
    /// once (a client's own write is followed by its invalidation, before its next reply, as
    /// in Redis), the others by a message to their thread.
    pub(super) fn invalidate_readers(
        &mut self,
        key: &[u8],
        readers: &[crate::tracking::Reader],
        writer: Option<crate::tracking::Writer>,
    ) {
        type PerThread = SmallVec<[(usize, Vec<(ConnRef, Option<u64>)>); 2]>;
        let mut remote: PerThread = SmallVec::new();
        let what = crate::tracking::Invalid::Keys(vec![Bytes::copy_from_slice(key)]);
        for r in readers {
            let own = writer.filter(|w| w.id == r.id);
            if own.is_some_and(|w| w.noloop) {
                continue;
            }
            let after = own.and_then(|w| w.at).map(|(_, seq)| seq);
            if r.thread == self.id {
                self.invalidate_conn(r.conn, &what, true, after);
                continue;
            }
            match remote.iter_mut().find(|(t, _)| *t == r.thread) {
                Some((_, v)) => v.push((r.conn, after)),
                None => remote.push((r.thread, vec![(r.conn, after)])),
            }
        }
        for (t, conns) in remote {
            post(
                &self.shared,
                t,
                Msg::Invalidate {
                    what: what.clone(),
                    table: true,
                    conns,
                },
            );
        }
    }

    /// Delivers an invalidation to one of this thread's connections, following its redirect;
    /// `after`: the sequence number of the reply it must follow (None: all owed replies).
    pub(super) fn invalidate_conn(
        &mut self,
        cr: ConnRef,
        what: &crate::tracking::Invalid,
        table: bool,
        after: Option<u64>,
    ) {
        let Some(conn) = self
            .conns
            .get_mut(cr.idx as usize)
            .filter(|c| c.gen == cr.gen)
        else {
            return;
        };
        let resp3 = conn.state.resp3;
        let Some(t) = conn.state.tracking.as_mut() else {
            return;
        };
        if table && t.bcast {
            return;
        }
        if t.redirect != 0 {
            let target = self
                .shared
                .clients
                .lock()
                .unwrap()
                .get(&t.redirect)
                .map(|h| (h.thread, h.conn));
            match target {
                Some((thread, to)) => post(
                    &self.shared,
                    thread,
                    Msg::InvalidateRedirected {
                        what: what.clone(),
                        conn: to,
                        null_resp3: resp3,
                    },
                ),
                None => {
                    t.broken_redirect = true;
                    if resp3 {
                        let f = crate::tracking::broken_frame(t.redirect);
                        conn.push(f, after);
                        self.dirty.push(cr.idx as usize);
                    }
                }
            }
        } else if let Some(f) = crate::tracking::frame(resp3, false, what, resp3) {
            conn.push(f, after);
            self.dirty.push(cr.idx as usize);
        }
    }
}
