//! What one connection sends (sans-I/O): operations of one or more commands, each next
//! command possibly depending on the reply to the one before (a YCSB scan reads the keys its
//! range returned). The driver keeps the operations in flight and hands each reply to its own.

use crate::mix::{Mix, Op as MixOp};
use crate::proto::{bulk_array, integer, Reply};
use crate::ycsb::{Progress, Step, YcsbGen, YcsbOp};

/// The kinds of operation, each measured on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Set,
    Get,
    Mset,
    Mget,
    Exists,
    Del,
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

impl OpKind {
    pub const ALL: [OpKind; 11] = [
        OpKind::Set,
        OpKind::Get,
        OpKind::Mset,
        OpKind::Mget,
        OpKind::Exists,
        OpKind::Del,
        OpKind::Read,
        OpKind::Update,
        OpKind::Insert,
        OpKind::Scan,
        OpKind::ReadModifyWrite,
    ];

    pub fn index(self) -> usize {
        OpKind::ALL.iter().position(|&k| k == self).unwrap_or(0)
    }

    /// The name in reports (YCSB's, in lower case, for its operations).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Set => "set",
            OpKind::Get => "get",
            OpKind::Mset => "mset",
            OpKind::Mget => "mget",
            OpKind::Exists => "exists",
            OpKind::Del => "del",
            OpKind::Read => "read",
            OpKind::Update => "update",
            OpKind::Insert => "insert",
            OpKind::Scan => "scan",
            OpKind::ReadModifyWrite => "read-modify-write",
        }
    }

    pub fn is_write(self) -> bool {
        matches!(
            self,
            OpKind::Set | OpKind::Mset | OpKind::Del | OpKind::Update | OpKind::Insert
        )
    }
}

/// An operation in progress.
#[derive(Debug)]
pub struct Op {
    pub kind: OpKind,
    step: Option<Step>,
}

/// How an operation ended: `ok` unless a reply was an error; the values (GET, MGET), keys
/// (EXISTS, DEL: those there, or deleted) or records (YCSB reads, scans) found and not found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Outcome {
    pub ok: bool,
    pub hits: u32,
    pub misses: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The operation's next command was appended to the output.
    More,
    Done(Outcome),
}

/// One connection's operations.
#[derive(Debug)]
pub enum Generator {
    Mix(Mix),
    Ycsb(YcsbGen),
}

impl Generator {
    /// Starts an operation: appends its first command to `out`. `None` when there is nothing
    /// more to do (the end of a YCSB load phase).
    pub fn begin(&mut self, out: &mut Vec<u8>) -> Option<Op> {
        match self {
            Generator::Mix(m) => {
                let kind = match m.next_request(out) {
                    MixOp::Set => OpKind::Set,
                    MixOp::Get => OpKind::Get,
                    MixOp::Mset => OpKind::Mset,
                    MixOp::Mget => OpKind::Mget,
                    MixOp::Exists => OpKind::Exists,
                    MixOp::Del => OpKind::Del,
                };
                Some(Op { kind, step: None })
            }
            Generator::Ycsb(y) => {
                let (op, step) = y.begin(out)?;
                let kind = match op {
                    YcsbOp::Read => OpKind::Read,
                    YcsbOp::Update => OpKind::Update,
                    YcsbOp::Insert => OpKind::Insert,
                    YcsbOp::Scan => OpKind::Scan,
                    YcsbOp::ReadModifyWrite => OpKind::ReadModifyWrite,
                };
                Some(Op {
                    kind,
                    step: Some(step),
                })
            }
        }
    }

    /// The reply to the last command `op` sent: its kind and its bytes.
    pub fn on_reply(&mut self, op: &mut Op, kind: Reply, reply: &[u8], out: &mut Vec<u8>) -> Next {
        let ok = kind != Reply::Error;
        match (&mut *self, op.step.as_mut()) {
            (Generator::Ycsb(y), Some(step)) => match y.on_reply(step, kind, reply, out) {
                Progress::More => Next::More,
                Progress::Done { ok, found } => Next::Done(Outcome {
                    ok,
                    hits: found as u32,
                    misses: !found as u32,
                }),
            },
            _ => {
                let (hits, misses) = match (op.kind, kind) {
                    (OpKind::Get, Reply::Bulk) => (1, 0),
                    (OpKind::Get, Reply::Null) => (0, 1),
                    (OpKind::Mget, Reply::Aggregate) => match bulk_array(reply) {
                        Ok(Some(items)) => {
                            let hits = items.iter().filter(|i| i.is_some()).count() as u32;
                            (hits, items.len() as u32 - hits)
                        }
                        _ => (0, 0),
                    },
                    (OpKind::Exists | OpKind::Del, Reply::Integer) => {
                        let asked = match self {
                            Generator::Mix(m) => m.per_request() as i64,
                            Generator::Ycsb(_) => 0,
                        };
                        let found = integer(reply).unwrap_or(0).clamp(0, asked);
                        (found as u32, (asked - found) as u32)
                    }
                    _ => (0, 0),
                };
                Next::Done(Outcome { ok, hits, misses })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{KeyGen, KeyPattern};
    use crate::mix::{Ratio, Verbs};

    fn mix(ratio: &str, per_request: usize) -> Generator {
        let keys = KeyGen::new(KeyPattern::Sequential, 100, 0, 0);
        Generator::Mix(Mix::new(
            Ratio::parse(ratio).unwrap(),
            keys,
            b"k:",
            1,
            per_request,
        ))
    }

    #[test]
    fn del_and_exists_count_the_keys_deleted_or_there_out_of_those_sent() {
        let keys = KeyGen::new(KeyPattern::Sequential, 100, 0, 0);
        let mut g = Generator::Mix(
            Mix::new(Ratio::parse("0:1").unwrap(), keys, b"k:", 1, 10).with_verbs(Verbs::MsetDel),
        );
        let mut out = Vec::new();
        let mut mset = g.begin(&mut out).unwrap();
        let mut del = g.begin(&mut out).unwrap();
        assert_eq!((mset.kind, del.kind), (OpKind::Mset, OpKind::Del));
        let done = |ok, hits, misses| Next::Done(Outcome { ok, hits, misses });
        assert_eq!(
            g.on_reply(&mut mset, Reply::Simple, b"+OK\r\n", &mut out),
            done(true, 0, 0)
        );
        assert_eq!(
            g.on_reply(&mut del, Reply::Integer, b":7\r\n", &mut out),
            done(true, 7, 3)
        );
        assert_eq!(
            g.on_reply(&mut del, Reply::Error, b"-ERR x\r\n", &mut out),
            done(false, 0, 0)
        );
        let keys = KeyGen::new(KeyPattern::Sequential, 100, 0, 0);
        let mut g = Generator::Mix(
            Mix::new(Ratio::parse("0:1").unwrap(), keys, b"k:", 1, 3).with_verbs(Verbs::Exists),
        );
        let mut exists = g.begin(&mut out).unwrap();
        assert_eq!(exists.kind, OpKind::Exists);
        assert_eq!(
            g.on_reply(&mut exists, Reply::Integer, b":3\r\n", &mut out),
            done(true, 3, 0)
        );
    }

    #[test]
    fn single_command_operations_end_with_their_reply() {
        let mut g = mix("1:1", 1);
        let mut out = Vec::new();
        let mut set = g.begin(&mut out).unwrap();
        let mut get = g.begin(&mut out).unwrap();
        assert_eq!((set.kind, get.kind), (OpKind::Set, OpKind::Get));
        let done = |ok, hits, misses| Next::Done(Outcome { ok, hits, misses });
        assert_eq!(
            g.on_reply(&mut set, Reply::Simple, b"+OK\r\n", &mut out),
            done(true, 0, 0)
        );
        assert_eq!(
            g.on_reply(&mut get, Reply::Bulk, b"$1\r\nx\r\n", &mut out),
            done(true, 1, 0)
        );
        assert_eq!(
            g.on_reply(&mut get, Reply::Null, b"$-1\r\n", &mut out),
            done(true, 0, 1)
        );
        assert_eq!(
            g.on_reply(&mut get, Reply::Error, b"-ERR x\r\n", &mut out),
            done(false, 0, 0)
        );
    }

    #[test]
    fn mget_counts_each_key_found_or_missing() {
        let mut g = mix("0:1", 3);
        let mut out = Vec::new();
        let mut op = g.begin(&mut out).unwrap();
        assert_eq!(op.kind, OpKind::Mget);
        let reply = b"*3\r\n$1\r\na\r\n$-1\r\n$1\r\nb\r\n";
        assert_eq!(
            g.on_reply(&mut op, Reply::Aggregate, reply, &mut out),
            Next::Done(Outcome {
                ok: true,
                hits: 2,
                misses: 1
            })
        );
    }
}
