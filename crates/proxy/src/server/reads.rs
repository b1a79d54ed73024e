//! The event loop's side of high availability: read-only requests sent by the read policy to
//! a replica or the primary of their slot's shard, retried on the shard's next node when the
//! one they went to fails; failures counted per node, ejected nodes probed (ROLE: a replica
//! must also be synced) before they take reads again. The decisions are in
//! [`crate::replicas`] and [`crate::health`]; this module sends what they decide.
//!
//! A read is retried only when nothing can have come of it on the failed node: its
//! connection broke (refused, closed, timed out, garbage) before its reply came, or the node
//! refused it with `-LOADING` or `-MASTERDOWN` (a replica still loading its copy, or one
//! configured not to serve stale data). A read-only command has no effect, so running it on
//! another node of the shard is safe even if the first node did run it. Writes are never
//! retried: whether the failed node applied one before its connection broke cannot be known,
//! so its client gets `-ERR upstream ...` and decides.
//!
//! **Hedged reads** (`read-hedge-after`). A read still unanswered after the budget gets a
//! second copy on another node its policy allows (the next untried, not ejected candidate);
//! whichever reply comes first answers the client, in its place in the client's pipeline (the
//! reply queue is filled by sequence number, whichever node answers). The other copy stays
//! queued on its shared connection, whose replies come in order: its reply is still read
//! there, then dropped, never given to a client. The two copies share a [`HedgeLink`]: how
//! many are still out, and whether one has answered. A copy that fails (broken connection,
//! `-LOADING`, a redirect) while the other is out is dropped, the other decides; the last one
//! out is handled as any read (retried, redirected). Bounds: one hedge per read, only for
//! reads on shared connections that the cache does not fill and no tracking client waits
//! on, and a token bucket: each hedgeable read adds `read-hedge-max-percent`/100 of a
//! token (at most [`HEDGE_BURST`] kept), each hedge takes one, so a slow cluster gets at
//! most that share more reads, not twice its load.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{error_wire, InFlight, Owner, Role, Worker};
use crate::metrics::Event;
use crate::replicas::ReadPolicy;
use crate::route::encode_request;

/// A read's retry state, travelling with it from node to node.
#[derive(Debug)]
pub(super) struct ReadRetry {
    slot: u16,
    /// The nodes it went to, in order: never twice to one.
    tried: Vec<String>,
    /// Past this, a failure goes to the client instead of to another node.
    deadline: Instant,
    resp3: bool,
    /// The `any` policy's rotation when the read started: its retries follow the same order.
    turn: usize,
    /// Redirects (TRYAGAIN included) it followed: the cap on them holds across its
    /// re-placements.
    redirects: u8,
    /// Shared with the other copy while the read is hedged (taken off when this copy's
    /// outcome is settled).
    hedge: Option<Arc<HedgeLink>>,
    /// This is the hedge (the second copy).
    second: bool,
    /// Its first node is the slot's primary whatever the policy (a cacheable read with the
    /// cache on: the primary's tracking connection fills and keeps the entry); a retry goes
    /// where the policy allows.
    primary_first: bool,
}

/// Most hedge tokens a thread keeps: the burst of hedges a slow spell may send at once after
/// a quiet one.
pub(super) const HEDGE_BURST: u32 = 100;

/// A token in hundredths, so that a read adds exactly `read-hedge-max-percent` of them.
const TOKEN: u32 = 100;

/// Most reads a thread keeps waiting for their hedge budget: past it, new reads are not
/// hedged (the queue holds a copy of each request).
const MAX_HEDGE_WAITING: usize = 10_000;

/// The two copies of a hedged read. Atomics only because a worker is built on one thread and
/// moved to its own: a link never leaves that thread.
#[derive(Debug, Default)]
pub(super) struct HedgeLink {
    /// Copies still queued on a connection.
    out: AtomicU8,
    /// One copy's reply (or its retry) answers the client: the other's is dropped.
    answered: AtomicBool,
}

/// A read waiting for its budget to run out, with what a second copy needs.
#[derive(Debug)]
struct Waiting {
    at: Instant,
    link: Arc<HedgeLink>,
    idx: usize,
    id: u64,
    seq: u64,
    part: usize,
    payload: Vec<u8>,
    slot: u16,
    resp3: bool,
    turn: usize,
    first: String,
}

/// A thread's hedging state (`read-hedge-after`).
#[derive(Debug, Default)]
pub(super) struct Hedging {
    after: Option<Duration>,
    /// Hundredths of a token added per hedgeable read (`read-hedge-max-percent`).
    rate: u32,
    /// In hundredths.
    tokens: u32,
    /// In budget order (the budget is one for all).
    waiting: VecDeque<Waiting>,
}

impl Hedging {
    pub(super) fn new(after: Option<Duration>, max_percent: u32) -> Hedging {
        Hedging {
            after,
            rate: max_percent.min(100),
            // Full, as a quiet spell leaves it: a proxy that starts (or restarts) while a node
            // is slow hedges its first reads as one that ran a while would, instead of earning
            // its first token over 100 / max_percent reads.
            tokens: HEDGE_BURST * TOKEN,
            waiting: VecDeque::new(),
        }
    }

    /// When the next waiting read's budget runs out.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.waiting.front().map(|w| w.at)
    }
}

/// A reply that does not settle a read: another node may answer it.
fn is_interim(reply: &[u8]) -> bool {
    [
        &b"-LOADING"[..],
        b"-MASTERDOWN",
        b"-MOVED ",
        b"-ASK ",
        b"-TRYAGAIN",
    ]
    .iter()
    .any(|p| reply.starts_with(p))
}

impl Worker {
    /// The retry state of a new read of `slot`.
    pub(super) fn new_read(&mut self, slot: u16, resp3: bool) -> Box<ReadRetry> {
        self.read_turn = self.read_turn.wrapping_add(1);
        Box::new(ReadRetry {
            slot,
            tried: Vec::new(),
            deadline: Instant::now() + self.read_retry_deadline,
            resp3,
            turn: self.read_turn,
            redirects: 0,
            hedge: None,
            second: false,
            primary_first: false,
        })
    }

    /// The retry state of a cacheable read with the cache on: to the primary first, then,
    /// should it fail there, to the nodes the read policy allows.
    pub(super) fn new_cached_read(&mut self, slot: u16, resp3: bool) -> Box<ReadRetry> {
        let mut r = self.new_read(slot, resp3);
        r.primary_first = true;
        r
    }

    /// A copy of a hedged read came back with `reply`: whether it is dropped (the other copy
    /// answered, or is still out and this reply would only send the read elsewhere). A copy
    /// that is kept answers the client; the other's reply will be dropped.
    pub(super) fn hedged_reply_dropped(&mut self, f: &mut InFlight, reply: &[u8]) -> bool {
        let Some(r) = f.read.as_mut() else {
            return false;
        };
        let Some(link) = r.hedge.take() else {
            return false;
        };
        let left = link.out.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
        if link.answered.load(Ordering::Relaxed) || (left > 0 && is_interim(reply)) {
            return true;
        }
        link.answered.store(true, Ordering::Relaxed);
        if r.second {
            self.counters.event(Event::HedgeWon);
        }
        false
    }

    /// After `send_read` queued the first copy of a read on `b`: it waits for the hedge
    /// budget if hedging is on and the read may be hedged.
    fn maybe_hedge_later(&mut self, b: usize, owner: (usize, u64, u64, usize), node: &str) {
        let Some(after) = self.hedging.after else {
            return;
        };
        let (idx, id, seq, part) = owner;
        let Some(be) = self.backends.get_mut(b) else {
            return;
        };
        if be.role != Role::Shared {
            return;
        }
        // A cache fill has its PTTL behind it: not hedged (the cache answers such reads).
        let Some(f) = be.inflight.back_mut() else {
            return;
        };
        if !matches!(f.owner, Owner::Client { idx: i, id: d, seq: s, part: p } if (i, d, s, p) == owner)
        {
            return;
        }
        let Some(r) = f.read.as_mut() else {
            return;
        };
        if f.fill.is_some() || r.redirects > 0 {
            return;
        }
        // Another node the policy allows besides this one: a replica, or the primary.
        let nodes = match self.map.owner(r.slot) {
            Some(p) => {
                let replicas = self.replicas.of(p).len();
                match self.read_policy {
                    ReadPolicy::Master => 0,
                    ReadPolicy::Replica => replicas,
                    _ => replicas + 1,
                }
            }
            None => 0,
        };
        if nodes < 2 {
            return;
        }
        if self
            .clients
            .get(idx)
            .is_none_or(|c| c.id != id || c.tracked.contains(&seq))
        {
            return;
        }
        self.hedging.tokens = (self.hedging.tokens + self.hedging.rate).min(HEDGE_BURST * TOKEN);
        // Reads answered before their budget leave their entries behind: those at the front
        // go now, so the queue holds about the reads in flight.
        while self.hedging.waiting.front().is_some_and(|w| {
            w.link.answered.load(Ordering::Relaxed) || w.link.out.load(Ordering::Relaxed) == 0
        }) {
            self.hedging.waiting.pop_front();
        }
        if self.hedging.waiting.len() >= MAX_HEDGE_WAITING {
            return;
        }
        let link = Arc::new(HedgeLink {
            out: AtomicU8::new(1),
            answered: AtomicBool::new(false),
        });
        r.hedge = Some(link.clone());
        self.hedging.waiting.push_back(Waiting {
            at: f.sent + after,
            link,
            idx,
            id,
            seq,
            part,
            payload: f.payload.clone(),
            slot: r.slot,
            resp3: r.resp3,
            turn: r.turn,
            first: node.to_string(),
        });
    }

    /// Sends the second copy of each read whose budget ran out unanswered, while tokens last.
    pub(super) fn send_hedges(&mut self) {
        let now = Instant::now();
        while self.hedging.waiting.front().is_some_and(|w| w.at <= now) {
            let Some(w) = self.hedging.waiting.pop_front() else {
                break;
            };
            if w.link.answered.load(Ordering::Relaxed) || w.link.out.load(Ordering::Relaxed) != 1 {
                continue;
            }
            if self.hedging.tokens < TOKEN {
                continue;
            }
            if self.clients.get(w.idx).map(|c| c.id) != Some(w.id) {
                continue;
            }
            let mut retry = Box::new(ReadRetry {
                slot: w.slot,
                tried: vec![w.first],
                deadline: now + self.read_retry_deadline,
                resp3: w.resp3,
                turn: w.turn,
                redirects: 0,
                hedge: Some(w.link.clone()),
                second: true,
                primary_first: false,
            });
            // An ejected node is no better bet than the slow one.
            let Some(node) = self
                .next_read_node(&retry)
                .filter(|n| !self.health.is_ejected(n))
            else {
                continue;
            };
            let owner = Owner::Client {
                idx: w.idx,
                id: w.id,
                seq: w.seq,
                part: w.part,
            };
            // Behind the client's own busy connection there, the copy would wait for it.
            if self.busy_dedicated(&owner, &node, w.resp3).is_some() {
                continue;
            }
            let b = match self.backend(&node, w.resp3) {
                Ok(b) => b,
                Err(_) => {
                    self.node_failed(&node);
                    continue;
                }
            };
            self.hedging.tokens -= TOKEN;
            w.link.out.fetch_add(1, Ordering::Relaxed);
            retry.tried.push(node);
            let be = &mut self.backends[b];
            // Not `queue_on`: a hedge never fills the cache.
            be.queue(owner, w.payload, 0, true, now);
            if let Some(f) = be.inflight.back_mut() {
                f.read = Some(retry);
            }
            self.dirty_backends.push(b);
            self.counters.event(Event::HedgeSent);
        }
    }

    /// A read answered `-TRYAGAIN` whose wait is over, placed again by the read policy (as a
    /// new read: the `any` policy's next turn, a fresh deadline) rather than pinned to the
    /// node that answered: a replica may answer it (a replica never answers TRYAGAIN: it does
    /// not know of the migration, and serves its copy, as any replica read during a
    /// migration), or the primary again, which answers TRYAGAIN again or sends it on with
    /// ASK. `None`: it was not a read the policy placed (the caller resends it as before).
    pub(super) fn replace_tried_again_read(
        &mut self,
        mut f: super::InFlight,
    ) -> Option<super::InFlight> {
        let Some(old) = f.read.take() else {
            return Some(f);
        };
        let mut retry = self.new_read(old.slot, old.resp3);
        retry.redirects = f.redirects.saturating_add(1);
        self.send_read(f.owner, f.payload, retry, None);
        None
    }

    /// The node a read goes to next: the policy's first untried candidate that is not
    /// ejected; an ejected one only when no other is left (it may have come back, and failing
    /// without trying would be worse).
    fn next_read_node(&self, r: &ReadRetry) -> Option<String> {
        if r.primary_first && r.tried.is_empty() {
            return self.map.owner(r.slot).map(str::to_string);
        }
        let mut ejected = None;
        for node in self
            .replicas
            .candidates(self.read_policy, &self.map, r.slot, r.turn)
        {
            if r.tried.contains(&node) {
                continue;
            }
            if !self.health.is_ejected(&node) {
                return Some(node);
            }
            ejected.get_or_insert(node);
        }
        ejected
    }

    /// Sends a read (again, after `last_error`) to the next node of its shard, or answers the
    /// client with the last error once every node was tried or the deadline passed.
    pub(super) fn send_read(
        &mut self,
        owner: Owner,
        payload: Vec<u8>,
        mut retry: Box<ReadRetry>,
        mut last_error: Option<String>,
    ) {
        let Owner::Client { idx, id, seq, part } = owner else {
            return;
        };
        if self.clients.get(idx).map(|c| c.id) != Some(id) {
            return;
        }
        if let Some(link) = retry.hedge.take() {
            // This copy failed: the other one, still out or already in, answers; if it is the
            // last, it is retried as any read, and its retry answers.
            let left = link.out.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
            if link.answered.load(Ordering::Relaxed) || left > 0 {
                return;
            }
            link.answered.store(true, Ordering::Relaxed);
        }
        loop {
            let first = retry.tried.is_empty();
            let next = if first || Instant::now() < retry.deadline {
                self.next_read_node(&retry)
            } else {
                None
            };
            let Some(node) = next else {
                let msg = match last_error {
                    Some(e) => e,
                    None if self.map.owner(retry.slot).is_none() => {
                        "CLUSTERDOWN Hash slot not served".to_string()
                    }
                    None => format!(
                        "ERR no replica of slot {}'s primary is online (read-policy replica, darner proxy)",
                        retry.slot
                    ),
                };
                return self.answer(owner, error_wire(&msg));
            };
            if !first {
                self.counters.event(Event::ReadRetry);
            }
            retry.tried.push(node.clone());
            let resp3 = retry.resp3;
            let b = match self.busy_dedicated(&owner, &node, resp3) {
                Some(b) => Ok(b),
                None => self.backend(&node, resp3),
            };
            match b {
                Ok(b) => {
                    let redirects = retry.redirects;
                    self.queue_on(b, owner, payload, redirects, false, Some(retry));
                    if first {
                        self.maybe_hedge_later(b, (idx, id, seq, part), &node);
                    }
                    return;
                }
                Err(e) => {
                    last_error = Some(format!("ERR upstream {node}: {e}"));
                    self.node_failed(&node);
                }
            }
        }
    }

    /// A read a node refused without running it (`-LOADING`, `-MASTERDOWN`) goes to the next
    /// node of its shard (`None`); anything else is the caller's to handle (`Some`).
    pub(super) fn retry_refused_read(
        &mut self,
        mut f: super::InFlight,
        reply: &[u8],
        node: &str,
    ) -> Option<super::InFlight> {
        if !(reply.starts_with(b"-LOADING") || reply.starts_with(b"-MASTERDOWN")) {
            return Some(f);
        }
        let Some(retry) = f.read.take() else {
            return Some(f);
        };
        let text = String::from_utf8_lossy(&reply[1..]);
        let msg = format!("{} (from {node})", text.trim_end());
        self.send_read(f.owner, f.payload, retry, Some(msg));
        None
    }

    /// A connection to `node` failed: count it (see [`crate::health`]).
    pub(super) fn node_failed(&mut self, node: &str) {
        if self.health.failure(node, Instant::now()) {
            self.counters.event(Event::Ejection);
            eprintln!("darner-proxy: {node} ejected from reads after repeated failures; it is probed before it takes them again");
        }
    }

    /// An ejected node's probe came back.
    pub(super) fn probe_answered(&mut self, node: &str, reply: &[u8]) {
        let ready = matches!(
            darner_resp::decode(reply, &self.limits),
            Ok(Some((frame, _))) if crate::health::probe_says_ready(&frame)
        );
        if ready {
            self.health.probe_answered(node);
            eprintln!("darner-proxy: {node} answered its probe and takes reads again");
        } else {
            self.node_failed(node);
        }
    }

    /// Sends the probe (ROLE) to each ejected node whose backoff is over (on its shared connection,
    /// opened for it); a connection that fails counts as a failed probe.
    pub(super) fn send_probes(&mut self) {
        if self.health.next_probe().is_none_or(|t| t > Instant::now()) {
            return;
        }
        for node in self.health.due_probes(Instant::now()) {
            match self.backend(&node, false) {
                Ok(b) => {
                    let be = &mut self.backends[b];
                    let probe = encode_request(crate::health::PROBE);
                    be.queue_own(Owner::Probe, &probe, Instant::now());
                    self.dirty_backends.push(b);
                    self.counters.event(Event::Probe);
                }
                Err(_) => self.node_failed(&node),
            }
        }
    }

    /// A new shared connection is told READONLY first when reads may go to replicas: a
    /// replica then answers reads of its primary's slots instead of redirecting them. It is
    /// sent to primaries too (where it changes nothing), so that a connection stays usable for
    /// reads whatever role its node takes after a failover.
    pub(super) fn readonly_on_open(&mut self, b: usize) {
        if self.read_policy == ReadPolicy::Master {
            return;
        }
        if let Some(be) = self.backends.get_mut(b) {
            be.queue_own(
                Owner::Nobody,
                &encode_request(&["READONLY"]),
                Instant::now(),
            );
        }
    }

    /// The replicas listed by a topology reply that just replaced the slot map; nodes the
    /// topology no longer names at all are forgotten by the failure books. A node it names as
    /// failed or loading stays ejected: only its probe takes it back, whatever the topology
    /// says meanwhile.
    pub(super) fn topology_replicas(
        &mut self,
        frame: &darner_resp::Frame,
        shards: bool,
        from: &str,
    ) {
        let host = super::host_of(from);
        self.replicas = if shards {
            crate::replicas::Replicas::from_cluster_shards(frame, host)
        } else {
            crate::replicas::Replicas::from_cluster_slots(frame, host)
        };
        let primaries: Vec<String> = self.map.primaries().into_iter().map(String::from).collect();
        let replicas = &self.replicas;
        self.health
            .retain(|n| primaries.iter().any(|p| p == n) || replicas.lists(n));
    }
}
