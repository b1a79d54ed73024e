//! A connection's life on its thread: accepting it, reading its socket into the query
//! buffer (with a per-turn read budget and the query buffer limit), prefetching the keys of
//! what was read, writing its output (only while the socket takes it: writable events are
//! asked for when output is stuck), backpressure (reading stops while too much output
//! waits), output buffer limits, and closing it.

use super::*;

/// Stop reading a client's requests while this much output waits for it (backpressure: a
/// client that does not read cannot make the server buffer without bound).
const OUTPUT_BACKPRESSURE: usize = 64 << 20;
const READ_CHUNK: usize = 16 * 1024;
/// Bytes read from one connection per loop turn before others get theirs (16 KiB, as Redis
/// reads per event: with 64 KiB, a client streaming a pipeline doubled the p99.9 of others).
const READ_BUDGET: usize = 16 * 1024;

impl Worker {
    // ---- accepting ----

    pub(super) fn accept(&mut self, li: usize) {
        loop {
            // A listener CONFIG SET closed in this turn may still have had an event.
            let Some((_, l)) = self.listeners.get(li) else {
                return;
            };
            let (sock, peer) = match l.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => {
                    log::warning(&format!("Accepting client connection: {e}"));
                    return;
                }
            };
            // Redis's verbose line, as it writes it (the address without brackets): when a
            // client's connection was taken tells whether a late reply was the server's.
            log::verbose(&format!("Accepted {}:{}", peer.ip(), peer.port()));
            self.new_conn(sock, peer);
        }
    }

    pub(super) fn new_conn(&mut self, mut sock: TcpStream, peer: std::net::SocketAddr) {
        let hot = &self.shared.config.hot;
        let max = hot.maxclients.load(Ordering::Relaxed) as usize;
        let loader = self.shared.aof.is_loader(&peer);
        let master = !loader && self.shared.repl.is_link(&peer);
        if self.shared.connected.load(Ordering::Relaxed) >= max && !loader && !master {
            let _ = sock.write_all(b"-ERR max number of clients reached\r\n");
            bump(&self.shared.stats[self.id].rejected_connections, 1);
            return;
        }
        if hot.protected_mode.load(Ordering::Relaxed)
            && !hot.has_password.load(Ordering::Relaxed)
            && !peer.ip().is_loopback()
        {
            let _ = sock.write_all(
                b"-DENIED Darner is running in protected mode because protected mode is enabled and no password is set for the default user. Connect from the loopback interface, or set a password with requirepass.\r\n",
            );
            bump(&self.shared.stats[self.id].rejected_connections, 1);
            return;
        }
        let _ = sock.set_nodelay(true);
        let keepalive = hot.tcp_keepalive.load(Ordering::Relaxed);
        if keepalive > 0 {
            let s = socket2::SockRef::from(&sock);
            let ka = socket2::TcpKeepalive::new().with_time(Duration::from_secs(keepalive as u64));
            let _ = s.set_tcp_keepalive(&ka);
        }
        self.shared.connected.fetch_add(1, Ordering::Relaxed);
        bump(&self.shared.stats[self.id].connections, 1);
        let id = self.shared.next_client_id.fetch_add(1, Ordering::Relaxed);
        // The slot and generation the connection will have (nothing is inserted before it).
        let slot = ConnRef {
            idx: self.conns.vacant_entry().key() as u32,
            gen: self.next_gen.wrapping_add(1),
        };
        let handle = Arc::new(ClientHandle {
            id,
            thread: self.id,
            conn: slot,
            kill: Default::default(),
        });
        self.shared
            .clients
            .lock()
            .unwrap()
            .insert(id, handle.clone());
        let laddr: std::sync::Arc<str> = sock
            .local_addr()
            .map(|a| a.to_string().into())
            .unwrap_or_default();
        use std::os::fd::AsRawFd;
        let fd = sock.as_raw_fd();
        let entry = self.conns.vacant_entry();
        let key = entry.key();
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut sock, Token(key), Interest::READABLE)
        {
            log::warning(&format!("register client: {e}"));
            self.shared.connected.fetch_sub(1, Ordering::Relaxed);
            self.shared.clients.lock().unwrap().remove(&id);
            return;
        }
        self.next_gen = self.next_gen.wrapping_add(1);
        let authenticated = loader || master || !hot.has_password.load(Ordering::Relaxed);
        entry.insert(Conn {
            sock,
            gen: self.next_gen,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            parser: RequestParser::new(),
            out: Vec::new(),
            out_pos: 0,
            fence: None,
            fences: 0,
            durable_hold: None,
            next_seq: 0,
            done_seq: 0,
            pending: Default::default(),
            stream: Default::default(),
            in_tx: false,
            paused: None,
            parsed: Default::default(),
            protocol_error: None,
            state: ClientState {
                id,
                authenticated,
                loader,
                master,
                addr: peer.to_string().into(),
                laddr,
                local: peer.ip().is_loopback(),
                fd,
                created_ms: Shared::now_ms(),
                last_cmd: "NULL",
                conn: ConnRef {
                    idx: key as u32,
                    gen: self.next_gen,
                },
                ..Default::default()
            },
            handle,
            last_interaction: Instant::now(),
            soft_limit_since: None,
            closing: false,
            read_paused: false,
            want_write: false,
            after: Vec::new(),
        });
        self.shared.stats[self.id]
            .clients
            .fetch_add(1, Ordering::Relaxed);
    }

    // ---- reading and parsing ----

    /// Reads what the socket has and runs the requests. `closing`: the event reported the
    /// peer's FIN, so read on until end of file instead of stopping at the first short read.
    pub(super) fn read(&mut self, c: usize, closing: bool) {
        if let Some(eof) = self.fill(c, closing) {
            self.after_fill(c, eof);
        }
    }

    /// The reading half of [`Worker::read`]: fills the connection's buffer from its socket.
    /// Returns whether the peer closed, or None when there is nothing more to do for `c`
    /// (gone, paused, or closed for an oversized query buffer).
    pub(super) fn fill(&mut self, c: usize, closing: bool) -> Option<bool> {
        let limit = self
            .shared
            .config
            .hot
            .client_query_buffer_limit
            .load(Ordering::Relaxed) as usize;
        let conn = self.conns.get_mut(c)?;
        if conn.read_paused {
            return None;
        }
        let mut eof = false;
        let mut total = 0;
        loop {
            if total >= READ_BUDGET && !closing {
                // Fairness: a client streaming a huge pipeline gets one budget per loop turn
                // (like Redis's 16 KB per read event), so other clients' requests are served
                // in between instead of waiting behind thousands of its commands.
                self.more_input.push(c);
                break;
            }
            let need = conn
                .parser
                .bytes_needed()
                .unwrap_or(0)
                .clamp(READ_CHUNK, 1 << 20);
            // Each batch's bytes are split off the front of the buffer, so its spare room
            // shrinks by what was consumed; reclaiming it (BytesMut::reserve) waits until a
            // quarter of a chunk is left rather than running after every request.
            let spare = conn.rbuf.capacity() - conn.rbuf.len();
            if spare < READ_CHUNK / 4 || (need > READ_CHUNK && spare < need) {
                conn.rbuf.reserve(need);
            }
            let spare = conn.rbuf.spare_capacity_mut();
            let asked = spare.len();
            // recv takes the uninitialized spare capacity as MaybeUninit bytes, so no zeroing
            // and no reference to uninitialized memory as &mut [u8].
            match crate::sys::recv(&conn.sock, spare) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    // SAFETY: the kernel initialized n bytes at the end of the buffer.
                    unsafe { conn.rbuf.set_len(conn.rbuf.len() + n) };
                    total += n;
                    // Checked after every read (as Redis does), not before the next one: the
                    // read that crosses the limit may be the last the peer causes, and
                    // edge-triggered readiness brings no further turn for this connection.
                    if conn.rbuf.len() > limit {
                        log::notice(&format!(
                            "Closing client that reached max query buffer length: id={} addr={} (qbuf initial bytes: {:?})",
                            conn.state.id,
                            conn.state.addr,
                            String::from_utf8_lossy(&conn.rbuf[..conn.rbuf.len().min(64)])
                        ));
                        bump(&self.shared.stats[self.id].net_input, total as u64);
                        self.close(c);
                        return None;
                    }
                    // A short read drained the socket: data arriving later raises a new
                    // edge-triggered event, so the extra read that would only say
                    // WouldBlock is skipped (one syscall less per request when unpipelined).
                    if n < asked && !closing {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    eof = true;
                    break;
                }
            }
        }
        bump(&self.shared.stats[self.id].net_input, total as u64);
        if total > 0 {
            conn.last_interaction = self.loop_now;
        }
        Some(eof)
    }

    /// The running half of [`Worker::read`]: runs what was read, then handles the peer's EOF.
    pub(super) fn after_fill(&mut self, c: usize, eof: bool) {
        self.process(c);
        if eof {
            if let Some(conn) = self.conns.get_mut(c) {
                if conn.in_tx || !conn.pending.is_empty() {
                    // Let in-flight work finish; close once its replies are flushed. A client
                    // blocked on keys stops waiting now (nothing may be popped for it).
                    conn.closing = true;
                    let id = conn.state.id;
                    self.dirty.push(c);
                    crate::blocking::cancel(&self.shared, id);
                } else {
                    self.close(c);
                }
            }
        }
    }

    pub(super) fn limits(&self, authenticated: bool) -> Limits {
        Limits {
            max_bulk_len: self
                .shared
                .config
                .hot
                .proto_max_bulk_len
                .load(Ordering::Relaxed) as usize,
            authenticated,
            ..Limits::default()
        }
    }

    /// Whether the connection must not run more commands now (a transaction task of its own
    /// is running, it is closing or paused, or its output is backed up).
    pub(super) fn held(&mut self, c: usize) -> bool {
        let conn = &mut self.conns[c];
        if conn.in_tx
            || conn.closing
            || conn.paused.is_some()
            || conn.state.close_after_reply
            || conn.stream.wait
        {
            return true;
        }
        if conn.out_len() > OUTPUT_BACKPRESSURE {
            conn.read_paused = true;
            return true;
        }
        false
    }

    /// Starts loading the table buckets of the keys that the first buffered request of each of
    /// `conns` names (its second argument, found without a full parse: a wrong guess only
    /// costs a prefetch), when they are on this thread's shard; then their entries.
    pub(super) fn prefetch_first_keys(&self, conns: &[(usize, bool)]) {
        let mut hashes: SmallVec<[(usize, u64); 64]> = SmallVec::new();
        for &(c, _) in conns {
            let Some(conn) = self.conns.get(c) else {
                continue;
            };
            if let Some(key) = darner_resp::peek_second_arg(&conn.rbuf) {
                if cmd::shard_of(key, self.shared.threads) == self.id {
                    let db = conn.state.db;
                    hashes.push((db, self.shard.dbs[db].prefetch(key)));
                }
            }
        }
        for (db, h) in hashes {
            self.shard.dbs[db].prefetch_entry(h);
        }
    }

    /// Starts loading the table buckets of a pipeline's keys on this thread's shard before its
    /// commands run, so that their cache misses overlap instead of coming one after another.
    pub(super) fn prefetch_keys(
        &self,
        c: usize,
        requests: &[(darner_resp::Request, usize)],
        frozen: &Bytes,
    ) {
        let db = &self.shard.dbs[self.conns[c].state.db];
        let mut hashes = [0u64; 64];
        let mut n = 0;
        // First the buckets of all the keys, then (buckets arriving meanwhile) their entries.
        for (req, at) in requests {
            let (Some(darner_resp::Arg::Range(name)), Some(darner_resp::Arg::Range(key))) =
                (req.args.first(), req.args.get(1))
            else {
                continue;
            };
            let Some(spec) = darner_commands::lookup(&frozen[at + name.start..at + name.end])
            else {
                continue;
            };
            if spec.first_key != 1 {
                continue;
            }
            let key = &frozen[at + key.start..at + key.end];
            if cmd::shard_of(key, self.shared.threads) == self.id && n < hashes.len() {
                hashes[n] = db.prefetch(key);
                n += 1;
            }
        }
        for &h in &hashes[..n] {
            db.prefetch_entry(h);
        }
    }

    // ---- writing ----

    pub(super) fn flush_dirty(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for c in dirty.drain(..) {
            self.flush(c);
        }
        self.dirty = dirty;
    }

    pub(super) fn flush(&mut self, c: usize) {
        if self.shared.aof.acks_wait(&self.shared)
            || self
                .conns
                .get(c)
                .is_some_and(|cn| cn.durable_hold.is_some())
        {
            self.gate_output(c);
        }
        let Some(conn) = self.conns.get_mut(c) else {
            return;
        };
        let mut written = 0;
        let end = conn.sendable_end();
        while conn.out_pos < end {
            match crate::sys::send(&conn.sock, &conn.out[conn.out_pos..end]) {
                Ok(0) => break,
                Ok(n) => {
                    conn.out_pos += n;
                    written += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.close(c);
                    return;
                }
            }
        }
        bump(&self.shared.stats[self.id].net_output, written as u64);
        if conn.out_pos == conn.out.len() {
            conn.out.clear();
            conn.out_pos = 0;
            if let Some(h) = &mut conn.durable_hold {
                h.decided = 0;
            }
            if conn.fence.is_some() {
                conn.fence = Some(0);
            }
            if conn.out.capacity() > 1 << 20 {
                conn.out = Vec::new();
            }
        }
        // Ask for writable events only while output is stuck: with them always on, every ACK
        // of a reply would wake the loop for nothing (edge-triggered EPOLLOUT).
        let stuck = conn.out_pos < conn.sendable_end();
        if stuck != conn.want_write {
            let interest = if stuck {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if self
                .poll
                .registry()
                .reregister(&mut conn.sock, Token(c), interest)
                .is_ok()
            {
                conn.want_write = stuck;
            }
        }
        if conn.read_paused && conn.out_len() < OUTPUT_BACKPRESSURE / 2 {
            conn.read_paused = false;
            self.read(c, true);
            return;
        }
        let conn = &mut self.conns[c];
        if (conn.closing || conn.state.close_after_reply)
            && conn.out_len() == 0
            && conn.pending.is_empty()
            && !conn.in_tx
        {
            self.close(c);
            return;
        }
        // Output buffer limits: the pubsub class for subscribers (32mb hard, 8mb for 60 s by
        // default), the normal class otherwise (0 = unlimited, Redis's default).
        let conn = &mut self.conns[c];
        let hot = &self.shared.config.hot;
        let class = if conn.state.replica {
            &hot.obuf_replica
        } else if conn.state.subscribed() {
            &hot.obuf_pubsub
        } else {
            &hot.obuf_normal
        };
        let (hard, soft, secs) = crate::config::Config::obuf_limits(class);
        let used = conn.out_len() as u64;
        let over_hard = hard > 0 && used > hard;
        let over_soft = soft > 0 && used > soft;
        if over_soft {
            let since = *conn.soft_limit_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_secs(secs) {
                self.kill_for_obuf(c);
                return;
            }
        } else {
            conn.soft_limit_since = None;
        }
        if over_hard {
            self.kill_for_obuf(c);
        }
    }

    pub(super) fn kill_for_obuf(&mut self, c: usize) {
        let conn = &self.conns[c];
        log::warning(&format!(
            "Client id={} addr={} scheduled to be closed ASAP for overcoming of output buffer limits.",
            conn.state.id, conn.state.addr
        ));
        self.close(c);
    }

    pub(super) fn close(&mut self, c: usize) {
        if !self.conns.contains(c) {
            return;
        }
        let mut conn = self.conns.remove(c);
        let _ = self.poll.registry().deregister(&mut conn.sock);
        self.shared.connected.fetch_sub(1, Ordering::Relaxed);
        self.shared.clients.lock().unwrap().remove(&conn.state.id);
        self.shared.stats[self.id]
            .clients
            .fetch_sub(1, Ordering::Relaxed);
        if conn.state.monitor {
            self.shared.monitors.fetch_sub(1, Ordering::Relaxed);
        }
        // Before the socket closes (dropping `conn`): the replica's entry goes under the
        // replication lock, so nothing shuts down a descriptor reused meanwhile.
        if conn.state.replica || conn.state.replconf {
            crate::primary::forget(&self.shared, conn.state.id);
        }
        crate::pubsub::forget(&self.shared, &mut conn.state);
        crate::tracking::disable(&self.shared, &mut conn.state);
        if conn.in_tx {
            // A blocked client that goes away stops waiting (its task then cleans up).
            crate::blocking::cancel(&self.shared, conn.state.id);
        }
        if conn.paused.is_some() {
            crate::blocking::BLOCKED_CLIENTS.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
