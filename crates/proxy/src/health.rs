//! Outlier ejection: a backend whose connections fail again and again stops taking reads for a
//! while, and takes them again only after it answered a probe (ROLE) saying it is ready.
//!
//! Without it, every read routed to a node that just died would first try it (a refused
//! connection, or a wait for `op-timeout`) before its retry went elsewhere: retries keep the
//! reads from failing, ejection keeps them from all paying that detour until the topology
//! says the node is gone, which takes Redis Cluster `cluster-node-timeout` and more.
//!
//! Sans-I/O: the event loop reports failures and successes and asks which nodes are due a
//! probe; this module only keeps the books. Each thread keeps its own, as it keeps its own
//! connections.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use darner_resp::Frame;

/// Consecutive failures (a connection refused, closed, timed out, or answering garbage) that
/// eject a node. One failure is any node's bad luck (a restart, a connection reset); a few in a
/// row, with no success between them, is a node that is down.
pub const EJECT_AFTER: u32 = 3;
/// How long a first ejection lasts; each ejection that follows a failed probe doubles it.
pub const BASE_BACKOFF: Duration = Duration::from_millis(500);
/// The longest ejection: a node that comes back is found within this.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

#[derive(Clone, Debug, Default)]
struct NodeHealth {
    failures: u32,
    /// Set while ejected: when the next probe is due.
    ejected_until: Option<Instant>,
    /// The probe has been sent and not answered yet.
    probing: bool,
    /// The length of the current (or last) ejection.
    backoff: Duration,
}

/// Every node's failure count and ejection.
#[derive(Clone, Debug, Default)]
pub struct Health {
    nodes: HashMap<String, NodeHealth>,
}

impl Health {
    /// A connection to `node` failed. Returns whether this ejected it (or, while probing, kept
    /// it ejected for twice as long).
    pub fn failure(&mut self, node: &str, now: Instant) -> bool {
        let h = self.nodes.entry(node.to_string()).or_default();
        h.failures = h.failures.saturating_add(1);
        if h.ejected_until.is_some() {
            if h.probing {
                // The probe failed: eject again, for longer.
                h.probing = false;
                h.backoff = (h.backoff * 2).min(MAX_BACKOFF);
                h.ejected_until = Some(now + h.backoff);
                return true;
            }
            return false;
        }
        if h.failures >= EJECT_AFTER {
            h.backoff = BASE_BACKOFF;
            h.ejected_until = Some(now + h.backoff);
            return true;
        }
        false
    }

    /// `node` answered a request (not a probe): its failures were not consecutive.
    pub fn success(&mut self, node: &str) {
        if let Some(h) = self.nodes.get_mut(node) {
            if h.ejected_until.is_none() {
                self.nodes.remove(node);
            }
        }
    }

    /// `node` answered its probe: it takes traffic again.
    pub fn probe_answered(&mut self, node: &str) {
        self.nodes.remove(node);
    }

    /// Whether reads should avoid `node`.
    pub fn is_ejected(&self, node: &str) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|h| h.ejected_until.is_some())
    }

    /// The ejected nodes whose probe is due now; each is marked as being probed.
    pub fn due_probes(&mut self, now: Instant) -> Vec<String> {
        let mut due = Vec::new();
        for (node, h) in &mut self.nodes {
            if !h.probing && h.ejected_until.is_some_and(|t| t <= now) {
                h.probing = true;
                due.push(node.clone());
            }
        }
        due
    }

    /// When the next probe is due, if any node waits for one.
    pub fn next_probe(&self) -> Option<Instant> {
        self.nodes
            .values()
            .filter(|h| !h.probing)
            .filter_map(|h| h.ejected_until)
            .min()
    }

    /// Forgets nodes the topology no longer lists (`keep` says which it does), so that the
    /// books do not grow with every node that ever left.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.nodes.retain(|n, _| keep(n));
    }
}

/// The probe an ejected node is sent: ROLE rather than PING, because a replica that restarted
/// answers PING at once but serves its reads from an empty or stale dataset until it has
/// synced with its primary (`replica-serve-stale-data`, Redis's default).
pub const PROBE: &[&str] = &["ROLE"];

/// Whether a probe's reply says the node may take reads again: a primary; a replica whose
/// link to its primary is `connected` (synced); or a node that does not know ROLE (it
/// answers, and cannot say more). `-LOADING`, `-BUSY`, `-MASTERDOWN`, a replica still
/// connecting or syncing, and anything else say no.
pub fn probe_says_ready(reply: &Frame) -> bool {
    let text = |f: &Frame| match f {
        Frame::Bulk(b) | Frame::Simple(b) => Some(b.to_vec()),
        _ => None,
    };
    match reply {
        Frame::Array(v) => match v.first().and_then(text).as_deref() {
            Some(b"master") => true,
            Some(b"slave") => v.get(3).and_then(text).as_deref() == Some(b"connected"),
            _ => false,
        },
        Frame::Error(e) => {
            !(e.starts_with(b"LOADING") || e.starts_with(b"BUSY") || e.starts_with(b"MASTERDOWN"))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use darner_resp::Bytes;

    #[test]
    fn probe_replies() {
        let b = |s: &str| Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()));
        let replica = |state: &str| {
            Frame::Array(vec![
                b("slave"),
                b("127.0.0.1"),
                Frame::Integer(7000),
                b(state),
                Frame::Integer(10),
            ])
        };
        let err = |s: &str| Frame::Error(Bytes::copy_from_slice(s.as_bytes()));
        assert!(probe_says_ready(&Frame::Array(vec![
            b("master"),
            Frame::Integer(3),
            Frame::Array(vec![])
        ])));
        assert!(probe_says_ready(&replica("connected")));
        for state in ["connect", "connecting", "sync", "handshake"] {
            assert!(!probe_says_ready(&replica(state)), "{state}");
        }
        assert!(!probe_says_ready(&Frame::Array(vec![b("slave")])));
        assert!(!probe_says_ready(&Frame::Array(vec![b("sentinel")])));
        assert!(!probe_says_ready(&Frame::Array(vec![])));
        assert!(!probe_says_ready(&Frame::Integer(1)));
        assert!(!probe_says_ready(&err(
            "LOADING Redis is loading the dataset in memory"
        )));
        assert!(!probe_says_ready(&err(
            "BUSY Redis is busy running a script"
        )));
        assert!(probe_says_ready(&err("ERR unknown command 'ROLE'")));
    }

    #[test]
    fn ejects_after_consecutive_failures_and_probes_with_backoff() {
        let mut h = Health::default();
        let t0 = Instant::now();
        assert!(!h.failure("a", t0));
        assert!(!h.failure("a", t0));
        // A success in between: the count starts again.
        h.success("a");
        assert!(!h.failure("a", t0));
        assert!(!h.failure("a", t0));
        assert!(!h.is_ejected("a"));
        assert!(h.failure("a", t0));
        assert!(h.is_ejected("a"));
        assert!(!h.is_ejected("b"));
        // More failures while ejected change nothing; a success of an in-flight request does
        // not end the ejection either (only the probe does).
        assert!(!h.failure("a", t0));
        h.success("a");
        assert!(h.is_ejected("a"));
        assert_eq!(h.next_probe(), Some(t0 + BASE_BACKOFF));
        assert!(h.due_probes(t0).is_empty());
        let t1 = t0 + BASE_BACKOFF;
        assert_eq!(h.due_probes(t1), ["a"]);
        // Probing: not due again, still ejected.
        assert!(h.due_probes(t1).is_empty());
        assert_eq!(h.next_probe(), None);
        assert!(h.is_ejected("a"));
        // The probe fails: twice as long.
        assert!(h.failure("a", t1));
        assert_eq!(h.next_probe(), Some(t1 + BASE_BACKOFF * 2));
        let t2 = t1 + BASE_BACKOFF * 2;
        assert_eq!(h.due_probes(t2), ["a"]);
        h.probe_answered("a");
        assert!(!h.is_ejected("a"));
        assert_eq!(h.next_probe(), None);
    }

    #[test]
    fn backoff_is_capped() {
        let mut h = Health::default();
        let mut t = Instant::now();
        for _ in 0..EJECT_AFTER {
            h.failure("a", t);
        }
        for _ in 0..20 {
            t = h.next_probe().unwrap();
            assert_eq!(h.due_probes(t), ["a"]);
            assert!(h.failure("a", t));
        }
        assert_eq!(h.next_probe(), Some(t + MAX_BACKOFF));
        h.retain(|n| n != "a");
        assert!(!h.is_ejected("a"));
    }
}
