//! A client connection: its socket buffers, its reply ordering, and its state.
//!
//! Replies must leave in request order even though commands of one pipeline may run on
//! different shards and finish out of order. Each command gets a sequence number; a reply for
//! the oldest outstanding number goes straight to the output buffer, a later one waits in
//! `pending` until the ones before it arrive. When nothing is outstanding (the common case),
//! a command that runs inline writes its reply directly into the output buffer.
//!
//! A streamed reply (stream.rs) arrives in parts: `deliver_part` appends a part to the output
//! at once when its sequence number is the oldest outstanding one, and otherwise buffers it
//! in `partial` until the replies before it are out; later replies wait for its last part.

use crate::cmd::Command;
use crate::shared::ClientHandle;
use bytes::{Bytes, BytesMut};
use darner_engine::WatchFlag;
use mio::net::TcpStream;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReplyMode {
    #[default]
    On,
    Off,
    /// Skip the next command's reply (CLIENT REPLY SKIP).
    SkipThis,
}

/// A key watched by WATCH: database, key, and whether it existed (unexpired) at WATCH time.
#[derive(Clone, Debug)]
pub struct Watched {
    pub db: usize,
    pub key: Bytes,
    pub existed: bool,
}

/// The per-client state commands read and change. Cloned into a transaction task and adopted
/// back when it ends (the connection runs nothing else meanwhile).
#[derive(Clone, Debug, Default)]
pub struct ClientState {
    pub id: u64,
    pub db: usize,
    pub resp3: bool,
    pub authenticated: bool,
    /// The start-up thread's AOF replay connection (aof.rs): Redis's fake AOF client, which
    /// no -LOADING, AUTH or OOM refusal stops.
    pub loader: bool,
    /// The replica's link applying its primary's stream (replica.rs): Redis's master client,
    /// with the same rights as the AOF client, and writes on a read-only replica.
    pub master: bool,
    pub name: String,
    pub lib_name: String,
    pub lib_ver: String,
    /// The peer's and the local address, as CLIENT LIST shows them. Shared, not owned: every
    /// multi-shard command's task works on a copy of its client's state (exec.rs `Tx`), and
    /// copying two strings was two allocations and two frees per MSET/MGET/DEL.
    pub addr: std::sync::Arc<str>,
    pub laddr: std::sync::Arc<str>,
    /// Connected from the loopback interface (what `enable-debug-command local` allows).
    pub local: bool,
    pub fd: i32,
    /// Over maxmemory with nothing to evict when this client's current command was dispatched
    /// (Redis's `pre_command_oom_state`): a script then may not start a write that could grow
    /// memory until it has written (cmd/scripting.rs).
    pub oom_at_dispatch: bool,
    pub no_evict: bool,
    pub no_touch: bool,
    pub reply_mode: ReplyMode,
    /// Send this command's reply even if CLIENT REPLY OFF/SKIP was to suppress it: set by
    /// CLIENT REPLY ON and by RESET under OFF (Redis clears the flag before replying).
    /// Cleared when the next command is dispatched.
    pub force_reply: bool,
    /// Commands queued by MULTI (None when not in MULTI).
    pub multi: Option<Vec<(&'static Command, Vec<Bytes>)>>,
    /// A queued command was refused: EXEC must fail with EXECABORT.
    pub multi_dirty: bool,
    pub watched: Vec<Watched>,
    pub watch_flag: Option<WatchFlag>,
    /// Close the connection once this reply is written (QUIT, protocol errors, KILL).
    pub close_after_reply: bool,
    pub monitor: bool,
    /// A replica of this server (PSYNC / SYNC made it one: primary.rs).
    pub replica: bool,
    /// It sent REPLCONF (what it said is kept until it closes: primary.rs).
    pub replconf: bool,
    /// Pub/Sub subscriptions (None until the first SUBSCRIBE: most clients never have any).
    pub pubsub: Option<Box<crate::pubsub::Subscriptions>>,
    /// CLIENT TRACKING settings (None: tracking off).
    pub tracking: Option<Box<crate::tracking::Tracking>>,
    /// CLIENT CACHING YES (OPTIN) / NO (OPTOUT) given for the next command or transaction.
    pub caching: bool,
    /// The connection this state belongs to (where pub/sub messages for it are delivered).
    pub conn: crate::msg::ConnRef,
    pub created_ms: i64,
    pub last_cmd: &'static str,
    /// Pushes to this client made by its own running command (a PUBLISH to a channel it is
    /// subscribed to, also inside EXEC): sent right after that command's reply, as Redis 7.2
    /// does, not inside it.
    pub own_pushes: Vec<u8>,
}

impl ClientState {
    /// The server must run what this client sends (Redis's mustObeyClient): the AOF replay
    /// and the primary's stream.
    pub fn must_obey(&self) -> bool {
        self.loader || self.master
    }

    pub fn in_multi(&self) -> bool {
        self.multi.is_some()
    }

    /// Subscriptions of one kind.
    pub fn subscriptions(&self, kind: crate::pubsub::Kind) -> usize {
        self.pubsub.as_ref().map_or(0, |s| s.count(kind))
    }

    /// Subscribed to anything: Redis's CLIENT_PUBSUB (RESP2 subscribe mode, flag `P`, client
    /// type pubsub and its output buffer limits).
    pub fn subscribed(&self) -> bool {
        use crate::pubsub::Kind;
        [Kind::Channel, Kind::Pattern, Kind::Shard]
            .iter()
            .any(|&k| self.subscriptions(k) > 0)
    }

    /// Forgets WATCHed keys (UNWATCH, EXEC, DISCARD, RESET).
    pub fn unwatch(&mut self) {
        self.watched.clear();
        self.watch_flag = None;
    }

    /// CLIENT LIST's flags field (letters in Redis's order).
    pub fn flags_string(&self) -> String {
        let mut f = String::new();
        if self.monitor {
            f.push('O');
        } else if self.replica {
            f.push('S');
        }
        if self.master {
            f.push('M');
        }
        if self.subscribed() {
            f.push('P');
        }
        if self.multi.is_some() {
            f.push('x');
        }
        if let Some(t) = &self.tracking {
            f.push('t');
            if t.broken_redirect {
                f.push('R');
            }
            if t.bcast {
                f.push('B');
            }
        }
        if self
            .watch_flag
            .as_ref()
            .is_some_and(|w| w.load(std::sync::atomic::Ordering::Relaxed))
        {
            f.push('d');
        }
        if self.close_after_reply {
            f.push('c');
        }
        if self.no_evict {
            f.push('e');
        }
        if self.no_touch {
            f.push('T');
        }
        if f.is_empty() {
            f.push('N');
        }
        f
    }
}

/// A connection's share of streamed replies (stream.rs).
#[derive(Default)]
pub struct StreamState {
    /// Parts of streamed replies received before their turn: (seq, bytes so far).
    pub partial: Vec<(u64, Vec<u8>)>,
    /// A command touched a key being streamed on this thread's shard: the connection waits
    /// (its request is first in `parsed`) until a stream ends.
    pub wait: bool,
}

/// Output of a connection that waits for the fsync of the AOF chunks it may reveal.
#[derive(Default)]
pub struct DurableHold {
    /// Output before this offset has been through the check; after it, it waits for it.
    pub decided: usize,
    /// (ticket, offset): output from the offset on waits until this thread's chunk `ticket`
    /// is fsynced.
    pub waits: VecDeque<(u64, usize)>,
}

pub struct Conn {
    pub sock: TcpStream,
    pub gen: u32,
    pub rbuf: BytesMut,
    pub parser: darner_resp::RequestParser,
    pub out: Vec<u8>,
    /// How much of `out` has been written to the socket.
    pub out_pos: usize,
    /// Output from this offset on waits (a write whose woken BLMOVE still pushes on another
    /// shard: its reply leaves once that is done, blocking.rs), while `fences` are up.
    pub fence: Option<usize>,
    pub fences: u32,
    /// appendfsync always: output that waits for the AOF's fsync (worker/durability.rs).
    pub durable_hold: Option<Box<DurableHold>>,
    pub next_seq: u64,
    pub done_seq: u64,
    /// Replies for sequence numbers done_seq.. (None: not arrived yet); bool: suppressed.
    pub pending: VecDeque<(Option<Vec<u8>>, bool)>,
    /// Streamed replies' parts and waits (stream.rs).
    pub stream: StreamState,
    /// A multi-shard command of this connection is running (a transaction task, or a
    /// command whose shares are out: worker/direct.rs): input waits.
    pub in_tx: bool,
    /// A command held back by CLIENT PAUSE, to retry.
    pub paused: Option<Vec<Bytes>>,
    /// Requests parsed but not run yet (the connection was held in the middle of a batch).
    pub parsed: VecDeque<Vec<Bytes>>,
    /// A protocol error found after requests that must run first.
    pub protocol_error: Option<darner_resp::ProtocolError>,
    pub state: ClientState,
    pub handle: Arc<ClientHandle>,
    pub last_interaction: Instant,
    /// When the output buffer first went over the soft limit.
    pub soft_limit_since: Option<Instant>,
    /// Stop reading and close once the output is flushed.
    pub closing: bool,
    /// Reading paused because output is backed up.
    pub read_paused: bool,
    /// Registered for writable events (only while output could not be written at once).
    pub want_write: bool,
    /// Pushes to send right after the reply of a sequence number (see [`Conn::push`]).
    pub after: Vec<(u64, Vec<u8>)>,
}

/// A query buffer idle this long gives back its spare room (Redis: 2 s).
const QUERY_BUFFER_IDLE: Duration = Duration::from_secs(2);

/// The bytes a request takes in RESP (`*N`, then `$len` and the bytes of each argument).
fn resp_len(args: &[Bytes]) -> usize {
    let digits = |n: usize| n.checked_ilog10().unwrap_or(0) as usize + 1;
    3 + digits(args.len())
        + args
            .iter()
            .map(|a| 5 + digits(a.len()) + a.len())
            .sum::<usize>()
}

impl Conn {
    /// The query buffer as CLIENT LIST shows it: (qbuf, qbuf-free). Bytes read and not yet
    /// run: those not parsed yet, and the requests parsed but held (MULTI/EXEC task, stream
    /// wait), counted as they came in RESP; free: the buffer's spare room.
    pub fn query_buffer(&self) -> (usize, usize) {
        let held: usize = self.parsed.iter().map(|a| resp_len(a)).sum();
        (
            self.rbuf.len() + held,
            self.rbuf.capacity() - self.rbuf.len(),
        )
    }

    /// Gives back the query buffer's spare room once the client has sent nothing for
    /// [`QUERY_BUFFER_IDLE`] (Redis's clientsCronResizeQueryBuffer): a connection that once
    /// sent one huge command does not keep its big buffer. What is buffered is kept.
    pub fn shrink_idle_query_buffer(&mut self, now: Instant) {
        let spare = self.rbuf.capacity() - self.rbuf.len();
        if spare > 4096 && now.saturating_duration_since(self.last_interaction) > QUERY_BUFFER_IDLE
        {
            self.rbuf = if self.rbuf.is_empty() {
                BytesMut::new()
            } else {
                BytesMut::from(&self.rbuf[..])
            };
        }
    }

    /// Records a reply for `seq`; moves every reply that is now in order to the output.
    pub fn deliver(&mut self, seq: u64, reply: Vec<u8>) {
        if seq < self.done_seq {
            return;
        }
        let i = (seq - self.done_seq) as usize;
        if i >= self.pending.len() {
            return;
        }
        let mut reply = reply;
        if !self.stream.partial.is_empty() {
            // The end of a reply whose parts streamed ahead of it (a transaction's: XREAD of
            // several shards), kept while earlier replies are owed.
            if let Some(at) = self.stream.partial.iter().position(|(s, _)| *s == seq) {
                let (_, mut whole) = self.stream.partial.swap_remove(at);
                whole.extend_from_slice(&reply);
                reply = whole;
            }
        }
        self.pending[i].0 = Some(reply);
        self.advance();
    }

    /// As [`Conn::deliver`], from a borrowed reply: copied straight into the output when it is
    /// the next one due (the usual case), with no buffer of its own.
    pub fn deliver_slice(&mut self, seq: u64, reply: &[u8]) {
        if seq == self.done_seq && self.pending.front().is_some_and(|p| p.0.is_none()) {
            if !self.pending[0].1 {
                self.out.extend_from_slice(reply);
            }
            // Complete and empty: `advance` retires it (and what follows) without copying.
            self.pending[0].0 = Some(Vec::new());
            self.advance();
            return;
        }
        self.deliver(seq, reply.to_vec());
    }

    /// Moves every complete reply that is now in order to the output, then what has arrived
    /// of the (streamed) reply that is next.
    fn advance(&mut self) {
        while let Some((Some(_), _)) = self.pending.front() {
            let (r, suppressed) = self.pending.pop_front().unwrap();
            if !suppressed {
                self.out.extend_from_slice(&r.unwrap());
            }
            if !self.after.is_empty() {
                let done = self.done_seq;
                self.after.retain_mut(|(s, bytes)| {
                    if *s == done {
                        self.out.append(bytes);
                        false
                    } else {
                        true
                    }
                });
            }
            self.done_seq += 1;
        }
        if !self.stream.partial.is_empty() {
            let head = self.done_seq;
            if let Some(i) = self.stream.partial.iter().position(|(s, _)| *s == head) {
                let (_, part) = self.stream.partial.swap_remove(i);
                if !self.pending.front().is_some_and(|p| p.1) {
                    self.out.extend_from_slice(&part);
                }
            }
        }
    }

    /// Records a part of the streamed reply `seq` (complete with the `last` part): straight to
    /// the output when `seq` is the oldest outstanding reply, otherwise kept until it is.
    pub fn deliver_part(&mut self, seq: u64, part: &[u8], last: bool) {
        if seq < self.done_seq {
            return;
        }
        let i = (seq - self.done_seq) as usize;
        if i >= self.pending.len() {
            return;
        }
        if i == 0 {
            if !self.pending[0].1 {
                self.out.extend_from_slice(part);
            }
            if last {
                self.pending[0].0 = Some(Vec::new());
                self.advance();
            }
            return;
        }
        let at = match self.stream.partial.iter().position(|(s, _)| *s == seq) {
            Some(at) => at,
            None => {
                self.stream.partial.push((seq, Vec::new()));
                self.stream.partial.len() - 1
            }
        };
        self.stream.partial[at].1.extend_from_slice(part);
        if last {
            let (_, whole) = self.stream.partial.swap_remove(at);
            self.pending[i].0 = Some(whole);
        }
    }

    /// Queues a push (a tracking invalidation) behind every reply this client is still owed,
    /// so a value read before a change never arrives after the change's invalidation.
    /// With `after`: behind the reply with that sequence number instead (the client's own
    /// write, whose later replies must come after the push).
    pub fn push(&mut self, bytes: Vec<u8>, after: Option<u64>) {
        let at = match after {
            Some(seq) if seq >= self.done_seq => seq,
            Some(_) => {
                self.out.extend_from_slice(&bytes);
                return;
            }
            None if self.pending.is_empty() => {
                self.out.extend_from_slice(&bytes);
                return;
            }
            None => self.next_seq - 1,
        };
        match self.after.iter_mut().find(|(s, _)| *s == at) {
            Some((_, b)) => b.extend_from_slice(&bytes),
            None => self.after.push((at, bytes)),
        }
    }

    /// Reserves a sequence number for a reply that will arrive later.
    pub fn expect(&mut self, suppressed: bool) -> u64 {
        let s = self.next_seq;
        self.next_seq += 1;
        self.pending.push_back((None, suppressed));
        s
    }

    /// Whether a reply written now would be in order.
    pub fn in_order(&self) -> bool {
        self.pending.is_empty()
    }

    /// Bytes waiting to be written.
    pub fn out_len(&self) -> usize {
        self.out.len() - self.out_pos
    }

    /// Sends the pushes this client's own command made (`ClientState::own_pushes`) right
    /// after that command's reply `seq`. Returns whether there were any.
    pub fn push_own(&mut self, seq: u64) -> bool {
        if self.state.own_pushes.is_empty() {
            return false;
        }
        let pushes = std::mem::take(&mut self.state.own_pushes);
        self.push(pushes, Some(seq));
        true
    }

    /// Holds back the output from offset `at` of `out` on (and all output added later) until
    /// every fence set is lifted.
    pub fn set_fence(&mut self, at: usize) {
        self.fence = Some(self.fence.map_or(at, |f| f.min(at)));
        self.fences += 1;
    }

    pub fn lift_fence(&mut self) {
        self.fences = self.fences.saturating_sub(1);
        if self.fences == 0 {
            self.fence = None;
        }
    }

    /// Where the output that may be sent now ends.
    pub fn sendable_end(&self) -> usize {
        let end = self.fence.map_or(self.out.len(), |f| f.min(self.out.len()));
        match &self.durable_hold {
            None => end,
            Some(h) => h.waits.front().map_or(h.decided, |w| w.1).min(end),
        }
    }
}
