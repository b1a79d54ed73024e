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

use std::time::Instant;

use super::{error_wire, Owner, Worker};
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
        })
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
        let Owner::Client { idx, id, .. } = owner else {
            return;
        };
        if self.clients.get(idx).map(|c| c.id) != Some(id) {
            return;
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
                    self.queue_on(b, owner, payload, retry.redirects, false);
                    if let Some(f) = self.backends[b].inflight.back_mut() {
                        f.read = Some(retry);
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
