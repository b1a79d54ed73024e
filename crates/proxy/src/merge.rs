//! Putting replies back together: [`Merge`] (how the parts of a split request become the one
//! reply the client asked for) and [`ReplyQueue`] (a client's replies, released in request
//! order however the backends' answers interleave).
//!
//! The merge rules are the response policies of Redis's command tips, which is what a cluster
//! client applies when it splits the same commands itself: `agg_sum` adds integers (DEL,
//! EXISTS, TOUCH, UNLINK, DBSIZE), `all_succeeded` answers the first reply when every part
//! succeeded (MSET, FLUSHALL), and a multi-shard command without a policy (MGET) answers its
//! values in the order of its keys. Any part's error is the reply: a client cannot be told that
//! half of an MSET happened, and Redis's own multi-key errors name no key either.

use std::collections::VecDeque;

use darner_resp::{decode, encode, Bytes, Frame, Limits};

/// How the parts' replies become one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Merge {
    /// One part; its reply is the client's, byte for byte.
    Passthrough,
    /// Integers added up.
    Sum,
    /// The first part's reply, once every part has succeeded.
    AllOk,
    /// Element-wise AND of integer arrays (SCRIPT EXISTS).
    LogicalAnd,
    /// Arrays concatenated (KEYS).
    Concat,
    /// A node's SCAN reply, its cursor replaced by the proxy's (primary `index` of `nodes`;
    /// see `fanout`).
    Scan {
        /// Which primary answered, in address order.
        index: usize,
        /// How many primaries there are.
        nodes: usize,
    },
    /// The first reply that is not nil (RANDOMKEY).
    FirstNonNull,
    /// INFO: the proxy's own sections, then the parts' keyspace sections added up.
    Info {
        /// The proxy's sections.
        head: String,
        /// The client speaks RESP3 (a verbatim string, as Redis's INFO).
        resp3: bool,
    },
    /// `len` values in key order: part `i` answered the keys at `positions[i]`, in that order.
    KeyOrder {
        /// Number of keys in the request.
        len: usize,
        /// For each part, where its answers go.
        positions: Vec<Vec<usize>>,
    },
}

fn upstream_error(what: &str) -> Frame {
    Frame::Error(Bytes::from(format!("ERR upstream reply {what}")))
}

/// The reply made of the parts' replies (`parts[i]` answers part `i`).
pub fn merge(how: &Merge, parts: Vec<Frame>) -> Frame {
    if let Some(e) = parts.iter().find(|f| matches!(f, Frame::Error(_))) {
        return e.clone();
    }
    match how {
        Merge::Passthrough | Merge::AllOk => parts
            .into_iter()
            .next()
            .unwrap_or_else(|| upstream_error("missing")),
        Merge::Scan { index, nodes } => match parts.into_iter().next() {
            Some(reply) => crate::fanout::merge_scan(reply, *index, *nodes),
            None => upstream_error("missing"),
        },
        Merge::FirstNonNull => crate::fanout::merge_first_non_null(parts),
        Merge::Info { head, resp3 } => crate::fanout::merge_info(parts, head, *resp3),
        Merge::Sum => {
            let mut sum = 0i64;
            for p in &parts {
                match p {
                    Frame::Integer(n) => sum = sum.saturating_add(*n),
                    _ => return upstream_error("not an integer"),
                }
            }
            Frame::Integer(sum)
        }
        Merge::LogicalAnd => {
            let mut acc: Option<Vec<i64>> = None;
            for p in &parts {
                let Frame::Array(v) = p else {
                    return upstream_error("not an array");
                };
                let mut ints = Vec::with_capacity(v.len());
                for e in v {
                    match e {
                        Frame::Integer(n) => ints.push(*n),
                        _ => return upstream_error("not an integer"),
                    }
                }
                acc = Some(match acc {
                    None => ints,
                    Some(a) if a.len() == ints.len() => a
                        .iter()
                        .zip(&ints)
                        .map(|(x, y)| i64::from(*x != 0 && *y != 0))
                        .collect(),
                    Some(_) => return upstream_error("of another length"),
                });
            }
            Frame::Array(
                acc.unwrap_or_default()
                    .into_iter()
                    .map(Frame::Integer)
                    .collect(),
            )
        }
        Merge::Concat => {
            let mut all = Vec::new();
            for p in parts {
                match p {
                    Frame::Array(v) | Frame::Set(v) => all.extend(v),
                    _ => return upstream_error("not an array"),
                }
            }
            Frame::Array(all)
        }
        Merge::KeyOrder { len, positions } => {
            let mut out: Vec<Option<Frame>> = vec![None; *len];
            for (p, pos) in parts.into_iter().zip(positions) {
                let Frame::Array(values) = p else {
                    return upstream_error("not an array");
                };
                if values.len() != pos.len() {
                    return upstream_error("of another length");
                }
                for (v, &i) in values.into_iter().zip(pos) {
                    match out.get_mut(i) {
                        Some(slot) => *slot = Some(v),
                        None => return upstream_error("out of range"),
                    }
                }
            }
            match out.into_iter().collect::<Option<Vec<_>>>() {
                Some(v) => Frame::Array(v),
                None => upstream_error("missing a key"),
            }
        }
    }
}

/// One request's place in a client's reply order.
#[derive(Debug)]
struct Entry {
    merge: Merge,
    /// Passthrough: the reply's bytes; otherwise unused.
    raw: Option<Vec<u8>>,
    /// Merged requests: each part's decoded reply.
    frames: Vec<Option<Frame>>,
    missing: usize,
    /// Close the connection once this reply is written (QUIT).
    close_after: bool,
}

/// A client's replies in request order. Requests get consecutive sequence numbers; a reply
/// (or a part of one) may arrive at any time, and [`ReplyQueue::drain_ready`] releases the
/// replies at the head that are complete, so a slow shard delays the replies after its own
/// (pipelining's contract) but never reorders them.
#[derive(Debug, Default)]
pub struct ReplyQueue {
    first_seq: u64,
    entries: VecDeque<Entry>,
    /// Entries still missing a part.
    pending: usize,
}

impl ReplyQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests still waiting for a reply or for the ones before them.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Requests still waiting for a backend's reply (not those complete behind them).
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Whether request `seq` has all its replies (or was written out already).
    pub fn answered(&self, seq: u64) -> bool {
        match seq.checked_sub(self.first_seq) {
            None => true,
            Some(i) => usize::try_from(i)
                .ok()
                .and_then(|i| self.entries.get(i))
                .is_none_or(|e| e.missing == 0),
        }
    }

    /// The sequence number of the latest request (answered already when none is owed).
    pub fn last_seq(&self) -> u64 {
        (self.first_seq + self.entries.len() as u64).saturating_sub(1)
    }

    /// Whether no reply is owed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A reply known now (answered by the proxy itself); its sequence number.
    pub fn push_ready(&mut self, reply: Vec<u8>, close_after: bool) -> u64 {
        self.entries.push_back(Entry {
            merge: Merge::Passthrough,
            raw: Some(reply),
            frames: Vec::new(),
            missing: 0,
            close_after,
        });
        self.first_seq + self.entries.len() as u64 - 1
    }

    /// A request sent as `parts` backend requests; its sequence number.
    pub fn push_pending(&mut self, merge: Merge, parts: usize) -> u64 {
        self.entries.push_back(Entry {
            merge,
            raw: None,
            frames: vec![None; parts],
            missing: parts,
            close_after: false,
        });
        self.pending += usize::from(parts > 0);
        self.first_seq + self.entries.len() as u64 - 1
    }

    /// Records part `part`'s reply (its wire bytes) for request `seq`. Unknown or already
    /// answered parts are ignored.
    pub fn fill(&mut self, seq: u64, part: usize, reply: Vec<u8>) {
        let Some(idx) = seq.checked_sub(self.first_seq) else {
            return;
        };
        let Some(e) = self.entries.get_mut(idx as usize) else {
            return;
        };
        if e.missing == 0 || part >= e.frames.len() || e.frames[part].is_some() {
            return;
        }
        if e.merge == Merge::Passthrough {
            e.raw = Some(reply);
            e.frames[part] = Some(Frame::Null);
        } else {
            let f = match decode(&reply, &Limits::default()) {
                Ok(Some((f, _))) => f,
                _ => upstream_error("undecodable"),
            };
            e.frames[part] = Some(f);
        }
        e.missing -= 1;
        self.pending -= usize::from(e.missing == 0);
    }

    /// Records an error as part `part`'s reply (the backend failed).
    pub fn fail(&mut self, seq: u64, part: usize, message: &str) {
        let mut wire = Vec::new();
        encode(&Frame::Error(Bytes::from(message.to_string())), &mut wire);
        self.fill(seq, part, wire);
    }

    /// Appends the complete replies at the head to `out`, in order; true when one of them asks
    /// for the connection to be closed after it.
    pub fn drain_ready(&mut self, out: &mut Vec<u8>) -> bool {
        while let Some(e) = self.entries.front() {
            if e.missing > 0 {
                break;
            }
            let mut e = self.entries.pop_front().expect("front exists");
            self.first_seq += 1;
            if let Some(raw) = e.raw.take() {
                out.extend_from_slice(&raw);
            } else {
                let frames = e
                    .frames
                    .into_iter()
                    .map(|f| f.unwrap_or(Frame::Null))
                    .collect();
                encode(&merge(&e.merge, frames), out);
            }
            if e.close_after {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(f: &Frame) -> Vec<u8> {
        let mut v = Vec::new();
        encode(f, &mut v);
        v
    }

    #[test]
    fn replies_leave_in_request_order() {
        let mut q = ReplyQueue::new();
        let a = q.push_pending(Merge::Passthrough, 1);
        let b = q.push_ready(b"+PONG\r\n".to_vec(), false);
        let c = q.push_pending(Merge::Sum, 2);
        let mut out = Vec::new();
        assert!(!q.drain_ready(&mut out));
        assert!(out.is_empty());
        q.fill(c, 1, b":2\r\n".to_vec());
        q.fill(a, 0, b"$1\r\nx\r\n".to_vec());
        q.drain_ready(&mut out);
        assert_eq!(out, b"$1\r\nx\r\n+PONG\r\n");
        q.fill(c, 0, b":3\r\n".to_vec());
        q.fill(c, 0, b":100\r\n".to_vec()); // a duplicate is ignored
        q.drain_ready(&mut out);
        assert_eq!(out, b"$1\r\nx\r\n+PONG\r\n:5\r\n");
        assert!(q.is_empty());
        let _ = b;
    }

    #[test]
    fn first_error_wins() {
        let parts = vec![
            Frame::Integer(1),
            Frame::Error(Bytes::from_static(b"WRONGTYPE x")),
            Frame::Error(Bytes::from_static(b"ERR y")),
        ];
        assert_eq!(
            merge(&Merge::Sum, parts),
            Frame::Error(Bytes::from_static(b"WRONGTYPE x"))
        );
    }

    #[test]
    fn pending_counts_requests_still_owed_a_part() {
        let mut q = ReplyQueue::new();
        let a = q.push_pending(Merge::Passthrough, 1);
        q.push_ready(b"+OK\r\n".to_vec(), false);
        let c = q.push_pending(Merge::Sum, 2);
        assert_eq!((q.pending(), q.len()), (2, 3));
        q.fill(c, 0, b":1\r\n".to_vec());
        q.fill(c, 0, b":1\r\n".to_vec());
        assert_eq!(q.pending(), 2);
        assert!(!q.answered(c));
        q.fill(c, 1, b":2\r\n".to_vec());
        assert_eq!(q.pending(), 1);
        assert!(q.answered(c) && !q.answered(a));
        q.fill(a, 0, b"$-1\r\n".to_vec());
        assert_eq!((q.pending(), q.len()), (0, 3));
        let mut out = Vec::new();
        q.drain_ready(&mut out);
        assert_eq!((q.pending(), q.len()), (0, 0));
        assert!(q.answered(a));
    }

    #[test]
    fn key_order_and_bad_shapes() {
        let how = Merge::KeyOrder {
            len: 3,
            positions: vec![vec![0, 2], vec![1]],
        };
        let b = |s: &'static str| Frame::Bulk(Bytes::from_static(s.as_bytes()));
        let got = merge(
            &how,
            vec![
                Frame::Array(vec![b("a"), Frame::NullBulk]),
                Frame::Array(vec![b("b")]),
            ],
        );
        assert_eq!(got, Frame::Array(vec![b("a"), b("b"), Frame::NullBulk]));
        let short = merge(
            &how,
            vec![Frame::Array(vec![b("a")]), Frame::Array(vec![b("b")])],
        );
        assert!(matches!(short, Frame::Error(_)));
        assert!(matches!(merge(&Merge::Sum, vec![b("x")]), Frame::Error(_)));
        assert_eq!(
            merge(
                &Merge::LogicalAnd,
                vec![
                    Frame::Array(vec![Frame::Integer(1), Frame::Integer(1)]),
                    Frame::Array(vec![Frame::Integer(0), Frame::Integer(1)])
                ]
            ),
            Frame::Array(vec![Frame::Integer(0), Frame::Integer(1)])
        );
    }

    #[test]
    fn failures_and_close() {
        let mut q = ReplyQueue::new();
        let a = q.push_pending(Merge::AllOk, 2);
        q.push_ready(b"+OK\r\n".to_vec(), true);
        q.push_ready(b"+never\r\n".to_vec(), false);
        q.fill(a, 0, b"+OK\r\n".to_vec());
        q.fail(a, 1, "ERR upstream 127.0.0.1:1: connection closed");
        let mut out = Vec::new();
        assert!(q.drain_ready(&mut out));
        assert_eq!(
            out,
            wire(&Frame::Error(Bytes::from_static(
                b"ERR upstream 127.0.0.1:1: connection closed"
            )))
            .into_iter()
            .chain(b"+OK\r\n".iter().copied())
            .collect::<Vec<_>>()
        );
    }
}
