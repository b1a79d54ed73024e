//! WAIT through the proxy. A node's WAIT counts the replicas that acknowledged the
//! replication stream up to the offset its connection had reached after the command before
//! it (every command, a PING too, moves that mark to the node's offset then). A client's
//! writes went over the proxy's connections, shared with other clients, where a WAIT would
//! hold every other client's requests behind it for up to its timeout (forever with 0).
//!
//! So once every earlier request of the client is answered (its writes ran on their nodes),
//! the proxy sends, on a connection of the client's own to each primary the client wrote to
//! since its last WAIT, `PING` then the client's WAIT: the PING moves the connection's mark
//! past the client's writes, and the node's WAIT then blocks, asks its replicas at once
//! (REPLCONF GETACK) and times out exactly as for a client of its own. The mark may also cover
//! other clients' later writes, so the count is never more than the client's own writes would
//! get (conservative). The reply is the least count; a node that fails or refuses counts 0.
//! A client that wrote nothing since its last WAIT has it sent, without the PING, to every
//! primary: what a fresh connection to a node answers. The client's later requests wait for
//! WAIT's reply, as they would on a node.

use std::time::Instant;

use darner_commands::{flags, lookup};

use super::{error_wire, Owner, Worker};
use crate::route::encode_request;

/// A client's WAIT state.
#[derive(Debug, Default)]
pub(super) struct ClientWaits {
    /// The primaries its writes went to since its last WAIT.
    pub(super) wrote: Vec<String>,
    /// A WAIT was parsed and is not answered yet: the client's later requests wait.
    pub(super) blocked: bool,
    /// That WAIT, while earlier requests of the client are still unanswered.
    pub(super) pending: Option<(u64, i64, u64)>,
    /// The WAIT being answered.
    pub(super) active: Option<Waiting>,
}

/// One WAIT being answered.
#[derive(Debug)]
pub(super) struct Waiting {
    seq: u64,
    /// Each node's count, once it answered.
    counts: Vec<Option<i64>>,
}

/// Whether a request (RESP multibulk) may write: unknown and container commands count as
/// writes, so that WAIT waits for them too.
pub(super) fn may_write(payload: &[u8]) -> bool {
    let name = (|| {
        let rest = payload.strip_prefix(b"*")?;
        let at = rest.windows(2).position(|w| w == b"\r\n")?;
        let rest = rest[at + 2..].strip_prefix(b"$")?;
        let at = rest.windows(2).position(|w| w == b"\r\n")?;
        let len: usize = std::str::from_utf8(&rest[..at]).ok()?.parse().ok()?;
        rest.get(at + 2..at + 2 + len)
    })();
    match name.and_then(lookup) {
        Some(spec) if !spec.is_container() => {
            spec.has(flags::WRITE) || spec.has(flags::MAY_REPLICATE)
        }
        _ => true,
    }
}

/// A node's count: its integer reply; an error (a demoted node, a refusal) counts 0.
fn count_of(reply: &[u8]) -> i64 {
    reply
        .strip_prefix(b":")
        .and_then(|r| r.strip_suffix(b"\r\n"))
        .and_then(|r| std::str::from_utf8(r).ok())
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

impl Worker {
    /// Notes that a client's request went to connection `b`'s node, if it may write.
    pub(super) fn note_write(&mut self, idx: usize, id: u64, b: usize, payload: &[u8]) {
        let Some(be) = self.backends.get(b) else {
            return;
        };
        let Some(c) = self.clients.get_mut(idx).filter(|c| c.id == id) else {
            return;
        };
        if !c.waits.wrote.contains(&be.node) && may_write(payload) {
            c.waits.wrote.push(be.node.clone());
        }
    }

    /// Sends the client's WAIT (request `seq`), every earlier request of its being answered.
    pub(super) fn start_wait(&mut self, idx: usize, seq: u64, numreplicas: i64, timeout_ms: u64) {
        let Some(c) = self.clients.get_mut(idx) else {
            return;
        };
        let id = c.id;
        let wrote = std::mem::take(&mut c.waits.wrote);
        let (nodes, bump) = if wrote.is_empty() {
            let all = self.map.primaries().into_iter().map(String::from).collect();
            (all, false)
        } else {
            (wrote, true)
        };
        if nodes.is_empty() {
            self.clients[idx].waits.blocked = false;
            self.resume_after_wait(idx);
            let owner = Owner::Client {
                idx,
                id,
                seq,
                part: 0,
            };
            return self.answer(owner, error_wire("CLUSTERDOWN Hash slot not served"));
        }
        let request = encode_request(&["WAIT", &numreplicas.to_string(), &timeout_ms.to_string()]);
        let mut counts = Vec::with_capacity(nodes.len());
        let now = Instant::now();
        for (i, node) in nodes.iter().enumerate() {
            match self.dedicated(idx, node, false, false) {
                Ok(b) => {
                    let be = &mut self.backends[b];
                    if bump {
                        be.queue_own(Owner::Nobody, b"*1\r\n$4\r\nPING\r\n", now);
                    }
                    be.queue_own(Owner::WaitAsk { idx, id, i }, &request, now);
                    self.dirty_backends.push(b);
                    counts.push(None);
                }
                Err(_) => counts.push(Some(0)),
            }
        }
        self.clients[idx].waits.active = Some(Waiting { seq, counts });
        self.finish_wait(idx, id);
    }

    /// Node `i`'s answer to the client's WAIT.
    pub(super) fn wait_answered(&mut self, idx: usize, id: u64, i: usize, reply: &[u8]) {
        let Some(w) = self
            .clients
            .get_mut(idx)
            .filter(|c| c.id == id)
            .and_then(|c| c.waits.active.as_mut())
        else {
            return;
        };
        if let Some(slot) = w.counts.get_mut(i) {
            *slot = Some(count_of(reply));
        }
        self.finish_wait(idx, id);
    }

    /// Answers the client's WAIT once every node has: the least count.
    fn finish_wait(&mut self, idx: usize, id: u64) {
        let Some(c) = self.clients.get_mut(idx).filter(|c| c.id == id) else {
            return;
        };
        let Some(w) = c.waits.active.as_ref() else {
            return;
        };
        if w.counts.iter().any(Option::is_none) {
            return;
        }
        let least = w.counts.iter().flatten().min().copied().unwrap_or(0);
        let seq = w.seq;
        c.waits.active = None;
        c.waits.blocked = false;
        self.resume_after_wait(idx);
        let owner = Owner::Client {
            idx,
            id,
            seq,
            part: 0,
        };
        self.answer(owner, format!(":{least}\r\n").into_bytes());
    }

    /// The client's later requests, held while WAIT waited, are read now.
    fn resume_after_wait(&mut self, idx: usize) {
        if let Some(c) = self.clients.get_mut(idx) {
            c.input_paused = true;
            self.resume.push(idx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_told_from_reads() {
        let req = |args: &[&str]| encode_request(args);
        assert!(may_write(&req(&["SET", "k", "v"])));
        assert!(may_write(&req(&["set", "k", "v"])));
        assert!(may_write(&req(&["EVAL", "return 1", "0"])));
        assert!(may_write(&req(&["NOSUCHCOMMAND"])));
        assert!(may_write(&req(&["XGROUP", "CREATE", "s", "g", "$"])));
        assert!(!may_write(&req(&["GET", "k"])));
        assert!(!may_write(&req(&["PING"])));
        assert!(may_write(b"garbage"));
    }

    #[test]
    fn counts_are_read_from_integer_replies() {
        assert_eq!(count_of(b":2\r\n"), 2);
        assert_eq!(count_of(b"-ERR x\r\n"), 0);
        assert_eq!(count_of(b":x\r\n"), 0);
    }
}
