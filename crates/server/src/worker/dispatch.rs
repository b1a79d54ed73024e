//! The request path: parsing a connection's buffered requests a batch at a time, then each
//! request's dispatch: command lookup and the checks that may refuse it (arity, AUTH,
//! protected commands, RESP2 subscribe mode), MULTI queueing, CLIENT PAUSE, and then where
//! it runs: a connection command here, a single-shard command inline on this thread's shard
//! or batched to its shard's thread, a multi-shard MSET, MGET, DEL, ... sent to its shards
//! directly (direct.rs), any other transaction as a task of this thread's executor.

use super::*;

/// Redis's reply to DEBUG while `enable-debug-command` does not allow it.
const ERR_DEBUG_NOT_ALLOWED: &[u8] = b"ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";
/// Redis's reply to MODULE LOAD / LOADEX / UNLOAD while `enable-module-command` does not allow it.
const ERR_MODULE_NOT_ALLOWED: &[u8] = b"ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

impl Worker {
    /// Parses and dispatches every complete request in the connection's buffer.
    ///
    /// Requests are parsed a batch at a time and the batch's bytes are frozen once, so each
    /// request costs no buffer split of its own (arguments are slices of the frozen batch).
    /// Requests parsed but not yet run when the connection is held (MULTI/EXEC task, QUIT,
    /// CLIENT PAUSE) wait in `conn.parsed`, in order.
    pub(super) fn process(&mut self, c: usize) {
        self.lap = Lap::start();
        loop {
            if !self.conns.contains(c) {
                return;
            }
            // Requests left over from an earlier batch go first.
            while let Some(args) = self.conns[c].parsed.pop_front() {
                if self.held(c) {
                    self.conns[c].parsed.push_front(args);
                    self.send_batches();
                    self.dirty.push(c);
                    return;
                }
                self.dispatch(c, &cmd::views(&args), Owner::Owned(&args));
                if !self.conns.contains(c) {
                    return;
                }
            }
            if self.held(c) || self.conns[c].protocol_error.is_some() {
                break;
            }
            let auth = self.conns[c].state.authenticated;
            let limits = self.limits(auth);
            let conn = &mut self.conns[c];
            // Parse a batch: several requests only once authenticated (AUTH changes the
            // limits that apply to the requests after it).
            let max = if auth { 256 } else { 1 };
            let mut requests: SmallVec<[(darner_resp::Request, usize); 4]> = SmallVec::new();
            let mut off = 0;
            let mut error = None;
            // (A parse of no new bytes could only say "incomplete": not asked.)
            while requests.len() < max && off < conn.rbuf.len() {
                match conn.parser.parse(&conn.rbuf[off..], &limits) {
                    Ok(Some(req)) => {
                        let at = off;
                        off += req.consumed;
                        requests.push((req, at));
                    }
                    Ok(None) => {
                        // Bytes that only held empty requests go with the batch, so they
                        // cannot pile up.
                        off += conn.parser.take_skipped();
                        break;
                    }
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
            let frozen: Bytes = conn.rbuf.split_to(off).freeze();
            let parsed_any = !requests.is_empty();
            if requests.len() > 1 {
                self.prefetch_keys(c, &requests, &frozen);
            }
            // Drained in place: moving the batch (inline array included) would copy it.
            let mut batch = requests.drain(..);
            for (req, at) in batch.by_ref() {
                if !req.args.is_empty() {
                    // Borrowed views of the frozen batch: a command that runs inline (most do)
                    // needs no owned copy and no reference count.
                    let args: SmallVec<[&[u8]; 8]> = req
                        .args
                        .iter()
                        .map(|a| match a {
                            darner_resp::Arg::Range(r) => &frozen[at + r.start..at + r.end],
                            darner_resp::Arg::Owned(v) => &v[..],
                        })
                        .collect();
                    self.dispatch(c, &args, Owner::Frozen(&frozen));
                }
                if let Some(conn) = self.conns.get_mut(c) {
                    conn.parser.recycle(req.args);
                }
                if !self.conns.contains(c) {
                    return;
                }
                if self.held(c) {
                    break;
                }
            }
            // Whatever the batch still holds waits for its turn.
            for (req, at) in batch {
                let args: Vec<Bytes> = req
                    .args
                    .into_iter()
                    .map(|a| match a {
                        darner_resp::Arg::Range(r) => frozen.slice(at + r.start..at + r.end),
                        darner_resp::Arg::Owned(v) => Bytes::from(v),
                    })
                    .collect();
                if !args.is_empty() {
                    self.conns[c].parsed.push_back(args);
                }
            }
            if let Some(e) = error {
                // Commands before the malformed one run first; the error is answered after
                // them (below, or when the connection resumes).
                self.conns[c].protocol_error = Some(e);
                break;
            }
            // Nothing left to parse (the usual end of an unpipelined request).
            if !parsed_any || self.conns[c].rbuf.is_empty() {
                break;
            }
        }
        if let Some(conn) = self.conns.get_mut(c) {
            // Not after QUIT or a kill: Redis would not have read that far.
            let quiet = conn.closing || conn.state.close_after_reply;
            if conn.parsed.is_empty() && !conn.in_tx && conn.paused.is_none() && !quiet {
                if let Some(e) = conn.protocol_error.take() {
                    self.protocol_error(c, e);
                }
            }
        }
        // (Its commands for other shards wait in `batches` with those of the turn's other
        // connections: the turn sends them, one message per shard: `send_batches`.)
        self.dirty.push(c);
    }

    /// Replies Redis's protocol error (after the replies already due) and closes once written.
    pub(super) fn protocol_error(&mut self, c: usize, e: darner_resp::ProtocolError) {
        let conn = &mut self.conns[c];
        let msg = e.message_bytes();
        log::verbose(&format!(
            "Protocol error ({}) from client: id={}",
            String::from_utf8_lossy(&msg),
            conn.state.id
        ));
        let reply = cmd::with_writer(false, |w| w.error(&msg));
        let seq = conn.expect(false);
        conn.deliver(seq, reply);
        conn.closing = true;
        // Closing after the replies due, not a hang-up: a stream before it is not cancelled.
        conn.state.close_after_reply = true;
        conn.rbuf.clear();
        self.dirty.push(c);
    }

    /// Posts the commands waiting for other shards, one message per shard. Called once the
    /// turn's connections have been read (so the commands of every client read in a turn
    /// travel together: with unpipelined clients, one message per shard per turn rather than
    /// one per client), after the pump's resumed connections, at the end of the turn, and
    /// before a connection's commands take another path to a shard (a transaction) so that
    /// they arrive in the connection's order.
    pub(super) fn send_batches(&mut self) {
        for s in 0..self.batches.len() {
            if self.batches[s].is_empty() {
                continue;
            }
            // (The allocation comes back with the replies, for the next batch: BatchDone.)
            let items = std::mem::take(&mut self.batches[s]);
            post(
                &self.shared,
                s,
                Msg::Batch {
                    from: self.id,
                    items,
                    spare: self.spare_replies[s].take(),
                },
            );
        }
    }

    // ---- dispatch ----

    pub(super) fn reply_error_now(&mut self, c: usize, msg: &[u8]) {
        let conn = &mut self.conns[c];
        let reply = cmd::with_writer(conn.state.resp3, |w| w.error(msg));
        self.shared.record_error(&reply);
        bump(&self.shared.stats[self.id].total_error_replies, 1);
        let suppress = take_suppress(&mut conn.state);
        let seq = conn.expect(suppress);
        conn.deliver(seq, reply);
    }

    /// Refuses a command the way Redis's rejectCommand does: inside MULTI the transaction is
    /// flagged (EXEC will fail), and a refused EXEC itself discards the transaction with an
    /// EXECABORT that carries the reason.
    pub(super) fn reject(
        &mut self,
        c: usize,
        spec: Option<&darner_commands::CommandSpec>,
        msg: &[u8],
    ) {
        let conn = &mut self.conns[c];
        if spec.is_some_and(|s| s.full_name == "exec") {
            // Even outside MULTI, as Redis's execCommandAbort (which also unwatches).
            conn.state.multi = None;
            conn.state.multi_dirty = false;
            conn.state.unwatch();
            let reason = msg.strip_prefix(b"ERR ").unwrap_or(msg);
            let mut m = b"EXECABORT Transaction discarded because of: ".to_vec();
            m.extend_from_slice(reason);
            self.reply_error_now(c, &m);
            return;
        }
        if conn.state.in_multi() {
            conn.state.multi_dirty = true;
        }
        self.reply_error_now(c, msg);
    }

    /// Whether connection `c` may run a protected command: DEBUG by `enable-debug-command`,
    /// MODULE LOAD/LOADEX/UNLOAD by `enable-module-command`; yes, or local and the client
    /// connected from the loopback interface (Redis's rule).
    pub(super) fn protected_allowed(&self, c: usize, module: bool) -> bool {
        let hot = &self.shared.config.hot;
        let setting = if module {
            &hot.enable_module_command
        } else {
            &hot.enable_debug_command
        };
        match setting.load(Ordering::Relaxed) {
            1 => true,
            2 => self.conns[c].state.local,
            _ => false,
        }
    }

    pub(super) fn dispatch(&mut self, c: usize, args: &[&[u8]], owner: Owner<'_>) {
        bump(&self.shared.stats[self.id].commands, 1);
        // Look the command up.
        let Some(mut spec) = darner_commands::lookup(args[0]) else {
            let msg = unknown_command(args);
            self.reject(c, None, &msg);
            return;
        };
        // A container that also works alone (COMMAND) has a handler of its own.
        let alone = args.len() < 2 && cmd::registry().get(spec).is_some();
        if spec.is_container() && !alone {
            if args.len() < 2 {
                let e = cmd::arity_error(spec);
                self.reject(c, Some(spec), &e);
                return;
            }
            match darner_commands::lookup_subcommand(spec, args[1]) {
                Some(sub) => spec = sub,
                None => {
                    let mut msg = b"ERR unknown subcommand '".to_vec();
                    msg.extend_from_slice(c_str(args[1], 128));
                    msg.extend_from_slice(
                        format!("'. Try {} HELP.", spec.name.to_ascii_uppercase()).as_bytes(),
                    );
                    self.reject(c, None, &msg);
                    return;
                }
            }
        }
        let Some(cmd) = cmd::registry().get(spec) else {
            // Unreachable while every table entry has a handler (a unit test checks it).
            let msg = unknown_command(args);
            self.reject(c, None, &msg);
            return;
        };
        if !spec.arity_ok(args.len()) {
            let e = cmd::arity_error(spec);
            bump(&self.shared.stats[self.id].cmd[cmd.id].rejected, 1);
            self.reject(c, Some(spec), &e);
            return;
        }
        if !self.conns[c].state.authenticated && !spec.has(flags::NO_AUTH) {
            self.reject(c, Some(spec), b"NOAUTH Authentication required.");
            return;
        }
        // While the dataset loads, only commands flagged `loading` (PING, INFO, ...).
        if !spec.has(flags::LOADING)
            && self.shared.persist.loading.load(Ordering::Relaxed)
            && !self.conns[c].state.must_obey()
        {
            self.reject(
                c,
                Some(spec),
                b"LOADING Redis is loading the dataset in memory",
            );
            return;
        }
        // While a replica loads beside its old dataset (repl-diskless-load swapdb), the
        // commands Redis flags no-async-loading (REPLICAOF, SYNC, ...) wait for its end.
        if spec.has(flags::NO_ASYNC_LOADING)
            && self.shared.persist.async_loading.load(Ordering::Relaxed)
            && !self.conns[c].state.must_obey()
        {
            self.reject(
                c,
                Some(spec),
                b"LOADING Redis is loading the dataset in memory",
            );
            return;
        }
        // A script past busy-reply-threshold: only allow-busy commands (SCRIPT KILL, ...).
        if !spec.has(flags::ALLOW_BUSY) {
            let threshold = self
                .shared
                .config
                .hot
                .busy_reply_threshold
                .load(Ordering::Relaxed);
            if let Some(e) = self.shared.scripts.busy(threshold) {
                self.reject(c, Some(spec), e);
                return;
            }
        }
        if spec.has(flags::PROTECTED) {
            let module = spec.full_name.starts_with("module|");
            if !self.protected_allowed(c, module) {
                bump(&self.shared.stats[self.id].cmd[cmd.id].rejected, 1);
                let msg = if module {
                    ERR_MODULE_NOT_ALLOWED
                } else {
                    ERR_DEBUG_NOT_ALLOWED
                };
                self.reject(c, Some(spec), msg);
                return;
            }
        }
        // maxmemory (evict.rs): this shard keeps its part of the budget before any command;
        // out of memory with nothing to evict, a command that may grow memory is refused,
        // and inside MULTI any command but EXEC / DISCARD / QUIT / RESET (Redis's rules).
        let oom = self.shared.config.hot.maxmemory.load(Ordering::Relaxed) != 0
            && !self.conns[c].state.must_obey()
            && self.evict_check(false);
        if oom != self.conns[c].state.oom_at_dispatch {
            self.conns[c].state.oom_at_dispatch = oom;
        }
        if oom {
            let state = &self.conns[c].state;
            let refuse = spec.has(flags::DENYOOM)
                || (spec.full_name == "exec" && multi_has_denyoom(state))
                || (state.in_multi()
                    && !matches!(spec.full_name, "exec" | "discard" | "quit" | "reset"));
            if refuse {
                bump(&self.shared.stats[self.id].cmd[cmd.id].rejected, 1);
                self.reject(c, Some(spec), crate::evict::ERR_OOM);
                return;
            }
        }
        // After a failed background save or AOF write (bgsave.rs `writes_denied`): writes,
        // EXEC of a transaction holding one, and PING are refused, as Redis's processCommand
        // does.
        if let Some(denied) = crate::bgsave::writes_denied(&self.shared) {
            let write = is_write(spec, &self.conns[c].state);
            if write || spec.full_name == "ping" {
                bump(&self.shared.stats[self.id].cmd[cmd.id].rejected, 1);
                self.reject(c, Some(spec), &denied.message());
                return;
            }
        }
        // min-replicas-to-write (primary.rs): with too few good replicas, writes and EXEC of
        // a transaction holding one get NOREPLICAS (after MISCONF, as in Redis's
        // processCommand; inside MULTI the transaction is then aborted at EXEC). The AOF's
        // replay is never refused (Redis loads it without processCommand).
        if self
            .shared
            .config
            .hot
            .min_replicas_to_write
            .load(Ordering::Relaxed)
            > 0
            && !self.conns[c].state.must_obey()
            && is_write(spec, &self.conns[c].state)
            && crate::primary::too_few_good_replicas(&self.shared)
        {
            bump(&self.shared.stats[self.id].cmd[cmd.id].rejected, 1);
            self.reject(c, Some(spec), crate::primary::ERR_NOREPLICAS);
            return;
        }
        // A read-only replica: clients' writes, and EXEC of a transaction holding one, get
        // READONLY (after MISCONF, as in Redis's processCommand); the primary's stream not.
        if self.shared.repl.is_replica.load(Ordering::Relaxed)
            && self
                .shared
                .config
                .hot
                .replica_read_only
                .load(Ordering::Relaxed)
            && !self.conns[c].state.must_obey()
        {
            let write = is_write(spec, &self.conns[c].state);
            if write {
                bump(&self.shared.stats[self.id].cmd[cmd.id].rejected, 1);
                self.reject(c, Some(spec), crate::replica::ERR_READONLY);
                return;
            }
        }
        // A replica whose link is down, with replica-serve-stale-data no: only the commands
        // with the stale flag (and EXEC of a transaction of such commands) run, as in
        // Redis's processCommand.
        if self.shared.repl.is_replica.load(Ordering::Relaxed)
            && !self.shared.repl.link_up.load(Ordering::Relaxed)
            && !self
                .shared
                .config
                .hot
                .replica_serve_stale_data
                .load(Ordering::Relaxed)
            && !self.conns[c].state.must_obey()
        {
            let state = &self.conns[c].state;
            let deny =
                !spec.has(flags::STALE) || (spec.full_name == "exec" && multi_has_non_stale(state));
            if deny {
                bump(&self.shared.stats[self.id].cmd[cmd.id].rejected, 1);
                self.reject(c, Some(spec), crate::replica::ERR_MASTERDOWN);
                return;
            }
        }
        let conn = &mut self.conns[c];
        // RESP2 subscribe mode: only the commands that manage subscriptions (Redis's rule).
        if !conn.state.resp3
            && conn.state.subscribed()
            && !matches!(
                spec.full_name,
                "subscribe"
                    | "ssubscribe"
                    | "psubscribe"
                    | "unsubscribe"
                    | "sunsubscribe"
                    | "punsubscribe"
                    | "ping"
                    | "quit"
                    | "reset"
            )
        {
            let msg = format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                spec.full_name
            );
            self.reject(c, Some(spec), msg.as_bytes());
            return;
        }
        let conn = &mut self.conns[c];
        conn.state.last_cmd = spec.full_name;
        // Client tracking: whether this command records the keys it reads, and the client as
        // a reader and a writer. CLIENT CACHING's flag covers the next command, or a whole
        // MULTI ... EXEC, and CLIENT commands leave it in place (Redis's rule).
        let mut track = None;
        let mut remembers = false;
        if conn.state.tracking.is_some() {
            remembers = crate::tracking::remembers(&conn.state);
            track = crate::tracking::reader_of(&conn.state, self.id)
                .map(|r| (r, remembers && spec.has(flags::READONLY)));
            if (!conn.state.in_multi() || matches!(spec.full_name, "exec" | "discard"))
                && spec.full_name != "multi"
                && !spec.full_name.starts_with("client|")
            {
                conn.state.caching = false;
            }
        }

        // MULTI: queue everything but the commands that act on the transaction itself.
        if conn.state.in_multi()
            && !matches!(
                spec.full_name,
                "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
            )
        {
            if spec.has(flags::NO_MULTI) {
                conn.state.multi_dirty = true;
                self.reply_error_now(c, b"ERR Command not allowed inside a transaction");
                return;
            }
            conn.state
                .multi
                .as_mut()
                .unwrap()
                .push((cmd, owner.own(args)));
            let resp3 = conn.state.resp3;
            let reply = cmd::with_writer(resp3, |w| w.simple(b"QUEUED"));
            let suppress = take_suppress(&mut conn.state);
            let seq = conn.expect(suppress);
            conn.deliver(seq, reply);
            return;
        }
        // CLIENT PAUSE holds commands back (all, or only writes).
        let now = self.now_ms;
        // Writes and commands that may replicate (PUBLISH, PFCOUNT, ...), and EXEC of a
        // transaction holding one, as Redis 7.2 holds them.
        let is_write = spec.has(flags::WRITE)
            || spec.has(flags::MAY_REPLICATE)
            || (spec.full_name == "exec" && multi_has_writes(&conn.state));
        if self.shared.paused(now, is_write) && !matches!(spec.full_name, "client|unpause") {
            conn.paused = Some(owner.own(args));
            // Counted as blocked (INFO blocked_clients), as Redis counts postponed clients.
            crate::blocking::BLOCKED_CLIENTS.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // Where it runs and the positions of its keys, found once (route.rs).
        let routed = self.route(c, cmd, args);
        if self.stream_park(c, &routed, args, owner) {
            return;
        }
        // EXEC shows after its commands, as in Redis (cmd/transactions.rs).
        if spec.full_name != "exec" {
            feed_monitors(&self.shared, spec, &self.conns[c].state, args);
        }
        let Routed { cmd, keys, to } = routed;
        match to {
            To::Conn(f) => self.run_conn(c, cmd, f, args),
            To::Shard(f, shard) => {
                let db = self.conns[c].state.db;
                let inline = shard == self.id && self.admits_inline(cmd, db, args, &keys);
                let conn = &mut self.conns[c];
                if inline {
                    let suppress = take_suppress(&mut conn.state);
                    if self.stream_start(c, cmd, args, suppress) {
                        // A streamed read is tracked too (its key is locked until the stream
                        // ends, so recording it now misses no write).
                        if let Some((r, true)) = track {
                            self.remember_keys(&keys, args, r);
                        }
                        return;
                    }
                    let conn = &mut self.conns[c];
                    let clock = Clock {
                        touch: !conn.state.no_touch,
                        from_primary: conn.state.master,
                        ..Clock::at(now)
                    };
                    let mut ctx = ShardCtx {
                        shard: &mut self.shard,
                        db: conn.state.db,
                        clock,
                        resp3: conn.state.resp3,
                        shared: &self.shared,
                    };
                    // In order and not suppressed (the usual case): write straight into the
                    // output buffer; otherwise into a reply that waits for its turn.
                    let direct = conn.pending.is_empty() && !suppress;
                    let mut waiting = Vec::new();
                    let (buf, at) = if direct {
                        let at = conn.out.len();
                        (&mut conn.out, at)
                    } else {
                        (&mut waiting, 0)
                    };
                    let resp3 = conn.state.resp3;
                    run_handler(
                        f,
                        &mut ctx,
                        args,
                        &mut ReplyWriter::new(buf, resp3),
                        at,
                        cmd,
                    );
                    let reply = &buf[at..];
                    account(
                        &self.shared,
                        self.id,
                        &mut self.lap,
                        cmd,
                        reply,
                        &conn.state,
                        args,
                    );
                    if direct {
                        conn.next_seq += 1;
                        conn.done_seq += 1;
                    } else {
                        let seq = conn.expect(suppress);
                        conn.deliver(seq, waiting);
                    }
                    // The command is done on its shard (its keyspace events go out: notify.rs).
                    drop(ctx);
                    // Writes first (a read that expired the key invalidates earlier reads),
                    // then this read is recorded.
                    if self.shard.tracking.collecting || self.shared.tracking.prefixes.active() {
                        let writer = track.map(|(r, _)| crate::tracking::Writer {
                            id: r.id,
                            noloop: r.noloop,
                            at: Some((r.conn, self.conns[c].next_seq - 1)),
                        });
                        self.drain_written(writer);
                    }
                    // Blocked clients this write woke are served before its reply leaves;
                    // a BLMOVE pushing on another shard holds that reply (blocking.rs).
                    if !self.shard.blocked.is_empty() {
                        let movers =
                            crate::blocking::serve_ready(&mut self.shard, &self.shared, now, None);
                        if !movers.is_empty() {
                            let conn = &mut self.conns[c];
                            conn.set_fence(if direct { at } else { conn.out.len() });
                            let cr = ConnRef {
                                idx: c as u32,
                                gen: conn.gen,
                            };
                            self.spawn_movers(movers, Some((self.id, Msg::Unfence { conn: cr })));
                        }
                    }
                    if let Some((r, true)) = track {
                        self.remember_keys(&keys, args, r);
                    }
                } else {
                    let suppress = take_suppress(&mut conn.state);
                    let seq = conn.expect(suppress);
                    self.batches[shard].push(BatchItem {
                        conn: ConnRef {
                            idx: c as u32,
                            gen: conn.gen,
                        },
                        seq,
                        db: conn.state.db,
                        resp3: conn.state.resp3,
                        touch: !conn.state.no_touch,
                        from_primary: conn.state.master,
                        cmd,
                        args: owner.own(args),
                        keys,
                        track,
                    });
                }
            }
            To::Shards(f, plan) => {
                // Everything this connection sent before must reach its shards first.
                self.send_batches();
                // MSET, MGET, DEL, ... across shards: no task (direct.rs).
                let tracking = track.map(|(r, _)| (r, remembers));
                if self.run_direct(c, cmd, args, owner, tracking) {
                    return;
                }
                let conn = &mut self.conns[c];
                // Keys a tracking client reads in this transaction: recorded on their shards
                // while the transaction still holds them.
                // (EXEC records each queued read as it runs: cmd/transactions.rs; one-shot
                // parts record theirs as they run: Tx::run_parts.)
                let reader = track.filter(|_| remembers).map(|(r, _)| r);
                let parts = matches!(cmd.handler, Handler::Tx(_, cmd::Locks::Parts));
                let tracked: Vec<(usize, Bytes)> = match reader {
                    Some(_) if spec.full_name != "exec" && !parts => {
                        crate::tracking::read_keys(spec, args, &keys, self.shared.threads)
                    }
                    _ => Vec::new(),
                };
                let suppress = take_suppress(&mut conn.state);
                let seq = conn.expect(suppress);
                conn.in_tx = true;
                let tx = Tx::new(self.shared.clone(), conn.state.clone());
                if crate::propagate::enabled()
                    && (spec.has(flags::WRITE)
                        || spec.has(flags::MAY_REPLICATE)
                        || spec.full_name == "exec")
                {
                    tx.start_log();
                }
                tx.set_track(reader);
                let conn_ref = ConnRef {
                    idx: c as u32,
                    gen: conn.gen,
                };
                tx.set_dest(crate::stream::Dest {
                    thread: self.id,
                    conn: conn_ref,
                    seq,
                });
                let shared = self.shared.clone();
                let thread = self.id;
                let args: Vec<Bytes> = owner.own(args);
                self.exec.spawn(async move {
                    let start = Instant::now();
                    tx.reserve(plan).await;
                    let reply = f(tx.clone(), args.clone()).await;
                    if reply.first() != Some(&b'-') {
                        crate::propagate::coordinator_command(&tx, cmd.spec, &args);
                        if cmd.spec.has(flags::WRITE)
                            && !crate::propagate::changed_something(cmd.spec, tx.wrote_keys())
                        {
                            // Not one of `server.dirty`'s changes (record counts the call).
                            crate::shared::bump(&shared.stats[thread].undirty, 1);
                        }
                    }
                    if let (Some(r), false) = (reader, tracked.is_empty()) {
                        crate::tracking::remember_in_tx(&tx, tracked, r).await;
                    }
                    // Clients blocked on keys it wrote are served before it lets go of its
                    // shards, and its reply waits for their moves to other shards.
                    let woken = crate::blocking::serve_before_release(&tx).await;
                    tx.release();
                    tx.end_log();
                    for w in woken {
                        w.await;
                    }
                    let client = tx.into_client();
                    let err = (reply.first() == Some(&b'-')).then(|| reply.clone());
                    record(
                        &shared,
                        thread,
                        cmd,
                        start.elapsed().as_micros() as u64,
                        err.as_deref(),
                        &client,
                        &cmd::views(&args),
                    );
                    post(
                        &shared,
                        thread,
                        Msg::TxDone {
                            conn: conn_ref,
                            seq,
                            reply,
                            client: Box::new(client),
                        },
                    );
                });
            }
        }
    }

    pub(super) fn run_conn(
        &mut self,
        c: usize,
        cmd: &'static Command,
        f: cmd::ConnFn,
        args: &[&[u8]],
    ) {
        let conn = &mut self.conns[c];
        let suppress = take_suppress(&mut conn.state);
        let was_monitor = conn.state.monitor;
        let mut out = Vec::new();
        {
            let mut w = ReplyWriter::new(&mut out, conn.state.resp3);
            let mut ctx = ConnCtx {
                client: &mut conn.state,
                shared: &self.shared,
                thread: self.id,
            };
            let name = cmd.spec.full_name;
            if contained(name, || f(&mut ctx, args, &mut w)).is_none() {
                w.out.clear();
                w.error(internal_error(name).as_bytes());
            }
        }
        // As for TxDone: a command that made this client a monitor (MONITOR) is counted here.
        if conn.state.monitor && !was_monitor {
            self.shared.monitors.fetch_add(1, Ordering::Relaxed);
        }
        account(
            &self.shared,
            self.id,
            &mut self.lap,
            cmd,
            &out,
            &conn.state,
            args,
        );
        // CLIENT REPLY ON / RESET turned replies back on: their own reply is sent. Pub/Sub
        // confirmations are pushes, which CLIENT REPLY OFF / SKIP do not silence (Redis 7.2).
        let suppress = suppress
            && !conn.state.force_reply
            && !matches!(
                cmd.spec.full_name,
                "subscribe"
                    | "psubscribe"
                    | "ssubscribe"
                    | "unsubscribe"
                    | "punsubscribe"
                    | "sunsubscribe"
            );
        let seq = conn.expect(suppress);
        conn.deliver(seq, out);
        if conn.push_own(seq) {
            self.dirty.push(c);
        }
        if conn.state.close_after_reply {
            conn.closing = true;
        }
    }
}

/// Takes the "skip this reply" decision for the command being dispatched (CLIENT REPLY).
pub(super) fn take_suppress(state: &mut ClientState) -> bool {
    state.force_reply = false;
    match state.reply_mode {
        ReplyMode::On => false,
        ReplyMode::Off => true,
        // CLIENT REPLY SKIP (which sets SkipThis after its own suppression decision was taken)
        // silences the next command only.
        ReplyMode::SkipThis => {
            state.reply_mode = ReplyMode::On;
            true
        }
    }
}

/// Whether a queued command of the client's transaction may grow memory (EXEC is then refused
/// when out of memory, as Redis checks the transaction's accumulated flags).
fn multi_has_denyoom(state: &ClientState) -> bool {
    state
        .multi
        .as_ref()
        .is_some_and(|q| q.iter().any(|(c, _)| c.spec.has(flags::DENYOOM)))
}

fn multi_has_non_stale(state: &ClientState) -> bool {
    state
        .multi
        .as_ref()
        .is_some_and(|q| q.iter().any(|(c, _)| !c.spec.has(flags::STALE)))
}

fn multi_has_writes(state: &ClientState) -> bool {
    state.multi.as_ref().is_some_and(|q| {
        q.iter()
            .any(|(c, _)| c.spec.has(flags::WRITE) || c.spec.has(flags::MAY_REPLICATE))
    })
}

/// The bytes of `b` as C's `%.Ns` prints them: up to the first NUL, at most `max` bytes.
fn c_str(b: &[u8], max: usize) -> &[u8] {
    let end = b.iter().position(|&x| x == 0).unwrap_or(b.len()).min(max);
    &b[..end]
}

/// Where owned copies of a request's arguments come from when the command cannot run on the
/// borrowed views right away (it travels to another shard's thread, waits in a MULTI queue or
/// behind CLIENT PAUSE, or becomes a transaction task).
#[derive(Clone, Copy)]
pub(super) enum Owner<'a> {
    /// Views into this frozen batch (or, for an argument the parser had to assemble, not).
    Frozen(&'a Bytes),
    /// Views of these owned arguments.
    Owned(&'a [Bytes]),
}

impl Owner<'_> {
    pub(super) fn own<C: FromIterator<Bytes>>(self, args: &[&[u8]]) -> C {
        match self {
            Owner::Owned(v) => v.iter().cloned().collect(),
            Owner::Frozen(f) => {
                let range = f.as_ptr_range();
                args.iter()
                    .map(|a| {
                        let inside = !a.is_empty()
                            && range.contains(&a.as_ptr())
                            && a.as_ptr_range().end <= range.end;
                        if inside {
                            f.slice_ref(a)
                        } else {
                            Bytes::copy_from_slice(a)
                        }
                    })
                    .collect()
            }
        }
    }
}

/// Redis's unknown-command error: the name (128 bytes at most) and the arguments while their
/// quoted list stays under 128 bytes, each cut to fit, all as C strings (a NUL ends one).
fn unknown_command(args: &[&[u8]]) -> Vec<u8> {
    let mut m = b"ERR unknown command '".to_vec();
    m.extend_from_slice(c_str(args[0], 128));
    m.extend_from_slice(b"', with args beginning with: ");
    let mut list: Vec<u8> = Vec::new();
    for a in &args[1..] {
        if list.len() >= 128 {
            break;
        }
        let room = 128 - list.len();
        list.push(b'\'');
        list.extend_from_slice(c_str(a, room));
        list.extend_from_slice(b"' ");
    }
    m.extend_from_slice(&list);
    m
}

/// Runs a single-shard handler; on a contained panic, replaces its partial reply (from `at`)
/// with an error.
pub(super) fn run_handler(
    f: cmd::KeyFn,
    ctx: &mut ShardCtx,
    args: &[&[u8]],
    w: &mut ReplyWriter,
    at: usize,
    cmd: &Command,
) {
    // What it wrote goes to the AOF unless it failed (its reply an error).
    let (ran, _) = crate::propagate::call(
        ctx,
        cmd.spec,
        args,
        |ctx| {
            let ran = contained(cmd.spec.full_name, || f(ctx, args, w));
            let failed = ran.is_none() || w.out.get(at) == Some(&b'-');
            (ran, failed)
        },
        |r| r.1,
    );
    if ran.is_none() {
        w.out.truncate(at);
        w.error(internal_error(cmd.spec.full_name).as_bytes());
    }
}

/// Redis's `is_write_command` in processCommand: a write command, or EXEC of a transaction
/// that queued one.
fn is_write(spec: &darner_commands::CommandSpec, state: &crate::conn::ClientState) -> bool {
    spec.has(flags::WRITE)
        || (spec.full_name == "exec"
            && state
                .multi
                .as_ref()
                .is_some_and(|q| q.iter().any(|(c, _)| c.spec.has(flags::WRITE))))
}
