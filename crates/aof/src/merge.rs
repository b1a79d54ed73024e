//! One log from many shards: the order in which the server's threads' writes go to the AOF.
//!
//! Every shard records what it changed, in the order it changed it, as a *stream* of items
//! it hands over in chunks. The AOF must be one sequence that agrees with every stream's own
//! order, and in which a transaction that wrote on several shards is one MULTI/EXEC block.
//! Commands of different shards touch different keys, so any interleaving of the streams is a
//! valid log, except around multi-shard transactions: a transaction's block must sit after
//! everything each of its shards did before it and before everything they did after it.
//!
//! So a shard puts a [`Item::Marker`] in its stream where a transaction first ran on it, and
//! the transaction's own commands as [`Item::TxCmd`]s (tagged with the transaction and its
//! step, the order of its commands). The thread that coordinated the transaction ends it with
//! [`Item::TxDone`] in its own stream, carrying the commands it writes itself (a multi-shard
//! MSET, RENAME, ...), and only after every shard's part of it has been handed over: when
//! `TxDone` arrives, everything of the transaction is here. A stream stops at a marker until
//! its transaction is done and every stream holding one of its markers has it in front;
//! then the block (every part's commands in step order) is emitted and the markers removed.
//! The scheduler gives conflicting transactions the same order on every shard, so the
//! streams never wait for each other in a cycle; if they ever did, the transaction done first
//! is emitted anyway ([`Merger::drain`]) rather than stopping the log.
//!
//! Each chunk has a ticket (the shard's own counter). [`Merger::done_ticket`] says up to
//! which ticket a stream's items have all been emitted: the server acknowledges a write under
//! `appendfsync always` once the fsync after that emission is done.

use bytes::Bytes;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A command and its database (None: one for no database, such as FLUSHALL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cmd {
    pub db: Option<u32>,
    pub argv: Vec<Bytes>,
}

/// Commands of one database already in AOF form (rendered where they ran, without SELECT): a
/// shard's consecutive commands outside transactions, written as they are. Rendering them on
/// the shard's thread, straight from the request's arguments, spares each command a copy of
/// its arguments as separately allocated strings (freed on the AOF thread) and the merger
/// one item per command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub db: Option<u32>,
    pub resp: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A command on its own.
    Cmd(Cmd),
    /// Commands on their own, rendered.
    Run(Run),
    /// Commands that must be written as one MULTI/EXEC (a script or transaction that ran on
    /// this shard alone).
    Block(Vec<Cmd>),
    /// Where transaction `tx` first ran on this shard.
    Marker { tx: u64 },
    /// A command transaction `tx` ran on this shard at step `step`.
    TxCmd { tx: u64, step: u32, cmd: Cmd },
    /// Transaction `tx` is over; `cmds` are the commands its coordinator writes, each with its
    /// step. With `barrier`, [`Output::Barrier`] follows its block: the log is cut there (an
    /// AOF rewrite's point in time, whose transaction holds every shard).
    TxDone {
        tx: u64,
        cmds: Vec<(u32, Cmd)>,
        barrier: bool,
    },
}

/// What the merger emits, in log order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Cmd(Cmd),
    Run(Run),
    /// Commands to write as one MULTI/EXEC (one command: written alone).
    Block(Vec<Cmd>),
    /// Everything before it in the log was done before a barrier transaction, everything
    /// after it after.
    Barrier,
}

struct Queued {
    ticket: u64,
    item: Item,
}

struct Done {
    ticket: u64,
    stream: usize,
    cmds: Vec<(u32, Cmd)>,
    barrier: bool,
    /// Arrival order, for the cycle breaker.
    seq: u64,
}

#[derive(Default)]
struct Stream {
    queue: VecDeque<Queued>,
    /// Items not emitted yet, per ticket.
    open: BTreeMap<u64, usize>,
    last_ticket: u64,
}

impl Stream {
    fn settle(&mut self, ticket: u64) {
        if let Some(n) = self.open.get_mut(&ticket) {
            *n -= 1;
            if *n == 0 {
                self.open.remove(&ticket);
            }
        }
    }
}

/// The streams of every shard, merged into one log.
pub struct Merger {
    streams: Vec<Stream>,
    done: HashMap<u64, Done>,
    done_seq: u64,
}

impl Merger {
    pub fn new(streams: usize) -> Merger {
        Merger {
            streams: (0..streams).map(|_| Stream::default()).collect(),
            done: HashMap::new(),
            done_seq: 0,
        }
    }

    /// Hands over a chunk of `stream`'s items; `ticket` must grow from chunk to chunk.
    pub fn push(&mut self, stream: usize, ticket: u64, items: Vec<Item>) {
        let st = &mut self.streams[stream];
        st.last_ticket = st.last_ticket.max(ticket);
        if items.is_empty() {
            return;
        }
        *st.open.entry(ticket).or_default() += items.len();
        for item in items {
            match item {
                Item::TxDone { tx, cmds, barrier } => {
                    self.done_seq += 1;
                    self.done.insert(
                        tx,
                        Done {
                            ticket,
                            stream,
                            cmds,
                            barrier,
                            seq: self.done_seq,
                        },
                    );
                }
                item => st.queue.push_back(Queued { ticket, item }),
            }
        }
    }

    /// Up to which ticket everything `stream` handed over has been emitted.
    pub fn done_ticket(&self, stream: usize) -> u64 {
        let st = &self.streams[stream];
        match st.open.keys().next() {
            Some(&t) => t.saturating_sub(1),
            None => st.last_ticket,
        }
    }

    /// Whether items wait (a stream stopped at a transaction not done yet).
    pub fn is_waiting(&self) -> bool {
        self.streams.iter().any(|s| !s.queue.is_empty()) || !self.done.is_empty()
    }

    /// Emits everything that can go now, in log order.
    pub fn drain(&mut self, out: &mut impl FnMut(Output)) {
        loop {
            let mut progress = false;
            for s in 0..self.streams.len() {
                progress |= self.drain_plain(s, out);
            }
            for s in 0..self.streams.len() {
                let Some(Queued {
                    item: Item::Marker { tx },
                    ..
                }) = self.streams[s].queue.front()
                else {
                    continue;
                };
                let tx = *tx;
                if self.ready(tx) {
                    self.emit(tx, out);
                    progress = true;
                }
            }
            if !progress {
                // Every stream stopped: a transaction whose markers all lead can always go;
                // if none can, the streams wait for each other, and the oldest transaction
                // that is done goes first rather than the log stopping for good.
                let stuck = self.streams.iter().all(|s| {
                    matches!(
                        s.queue.front(),
                        None | Some(Queued {
                            item: Item::Marker { .. },
                            ..
                        })
                    )
                });
                let heads_done = self.streams.iter().any(|s| {
                    matches!(s.queue.front(), Some(Queued { item: Item::Marker { tx }, .. }) if self.done.contains_key(tx))
                });
                if stuck && heads_done {
                    let oldest = self
                        .streams
                        .iter()
                        .filter_map(|s| match s.queue.front() {
                            Some(Queued {
                                item: Item::Marker { tx },
                                ..
                            }) => self.done.get(tx).map(|d| (d.seq, *tx)),
                            _ => None,
                        })
                        .min();
                    if let Some((_, tx)) = oldest {
                        self.emit(tx, out);
                        continue;
                    }
                }
                // A transaction with no marker anywhere (it ran on no shard of these
                // streams, or only on its coordinator's): nothing orders it but its TxDone.
                let lone: Vec<u64> = self
                    .done
                    .keys()
                    .copied()
                    .filter(|tx| !self.has_marker(*tx))
                    .collect();
                if lone.is_empty() {
                    return;
                }
                let mut lone: Vec<(u64, u64)> = lone
                    .into_iter()
                    .map(|tx| (self.done[&tx].seq, tx))
                    .collect();
                lone.sort_unstable();
                for (_, tx) in lone {
                    self.emit(tx, out);
                }
            }
        }
    }

    fn drain_plain(&mut self, s: usize, out: &mut impl FnMut(Output)) -> bool {
        let mut progress = false;
        let st = &mut self.streams[s];
        while let Some(q) = st.queue.front() {
            match q.item {
                Item::Marker { .. } => break,
                _ => {
                    let q = st.queue.pop_front().expect("front");
                    st.settle(q.ticket);
                    progress = true;
                    match q.item {
                        Item::Cmd(c) => out(Output::Cmd(c)),
                        Item::Run(r) => out(Output::Run(r)),
                        Item::Block(b) => out(Output::Block(b)),
                        // A transaction's command whose marker went already (the cycle
                        // breaker): it follows the block.
                        Item::TxCmd { cmd, .. } => out(Output::Cmd(cmd)),
                        Item::Marker { .. } | Item::TxDone { .. } => unreachable!(),
                    }
                }
            }
        }
        progress
    }

    fn has_marker(&self, tx: u64) -> bool {
        self.streams.iter().any(|s| {
            s.queue
                .iter()
                .any(|q| matches!(q.item, Item::Marker { tx: t } if t == tx))
        })
    }

    /// Done, and every stream that holds a marker of it has one in front.
    fn ready(&self, tx: u64) -> bool {
        if !self.done.contains_key(&tx) {
            return false;
        }
        self.streams.iter().all(|s| {
            let front = matches!(s.queue.front(), Some(Queued { item: Item::Marker { tx: t }, .. }) if *t == tx);
            front
                || !s
                    .queue
                    .iter()
                    .any(|q| matches!(q.item, Item::Marker { tx: t } if t == tx))
        })
    }

    /// Writes transaction `tx`'s block and takes its items out of every stream.
    fn emit(&mut self, tx: u64, out: &mut impl FnMut(Output)) {
        let Some(done) = self.done.remove(&tx) else {
            return;
        };
        let mut cmds: Vec<(u32, usize, Cmd)> = Vec::new();
        let mut n = 0;
        for st in &mut self.streams {
            let mut keep = VecDeque::with_capacity(st.queue.len());
            for q in std::mem::take(&mut st.queue) {
                match q.item {
                    Item::Marker { tx: t } if t == tx => st.settle(q.ticket),
                    Item::TxCmd { tx: t, step, cmd } if t == tx => {
                        st.settle(q.ticket);
                        cmds.push((step, n, cmd));
                        n += 1;
                    }
                    item => keep.push_back(Queued {
                        ticket: q.ticket,
                        item,
                    }),
                }
            }
            st.queue = keep;
        }
        for (step, cmd) in done.cmds {
            cmds.push((step, n, cmd));
            n += 1;
        }
        self.streams[done.stream].settle(done.ticket);
        // Steps in order; within a step, shards' commands in stream order.
        cmds.sort_by_key(|(step, i, _)| (*step, *i));
        let cmds: Vec<Cmd> = cmds.into_iter().map(|(_, _, c)| c).collect();
        match cmds.len() {
            0 => {}
            1 => out(Output::Cmd(cmds.into_iter().next().expect("one"))),
            _ => out(Output::Block(cmds)),
        }
        if done.barrier {
            out(Output::Barrier);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(s: &str) -> Cmd {
        Cmd {
            db: Some(0),
            argv: s
                .split(' ')
                .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                .collect(),
        }
    }

    fn text(o: &Output) -> String {
        let one = |c: &Cmd| {
            c.argv
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        match o {
            Output::Cmd(c) => one(c),
            Output::Block(b) => format!("[{}]", b.iter().map(one).collect::<Vec<_>>().join("; ")),
            Output::Run(r) => format!("run {}", String::from_utf8_lossy(&r.resp)),
            Output::Barrier => "|".into(),
        }
    }

    fn run(s: &str) -> Item {
        Item::Run(Run {
            db: Some(0),
            resp: s.as_bytes().to_vec(),
        })
    }

    fn drain(m: &mut Merger) -> Vec<String> {
        let mut v = Vec::new();
        m.drain(&mut |o| v.push(text(&o)));
        v
    }

    #[test]
    fn plain_commands_pass_in_stream_order() {
        let mut m = Merger::new(2);
        m.push(
            0,
            1,
            vec![Item::Cmd(cmd("SET a 1")), Item::Cmd(cmd("SET a 2"))],
        );
        m.push(1, 1, vec![Item::Cmd(cmd("SET b 1"))]);
        let out = drain(&mut m);
        assert_eq!(out.len(), 3);
        let a1 = out.iter().position(|s| s == "SET a 1").unwrap();
        let a2 = out.iter().position(|s| s == "SET a 2").unwrap();
        assert!(a1 < a2);
        assert_eq!(m.done_ticket(0), 1);
        assert_eq!(m.done_ticket(1), 1);
        assert!(!m.is_waiting());
    }

    #[test]
    fn rendered_runs_keep_their_place_around_a_transaction() {
        let mut m = Merger::new(2);
        m.push(
            0,
            1,
            vec![
                run("a0"),
                Item::Marker { tx: 4 },
                Item::TxCmd {
                    tx: 4,
                    step: 0,
                    cmd: cmd("SET a 1"),
                },
                run("a9"),
            ],
        );
        assert_eq!(drain(&mut m), vec!["run a0"]);
        assert_eq!(m.done_ticket(0), 0);
        m.push(
            1,
            1,
            vec![Item::TxDone {
                tx: 4,
                cmds: vec![],
                barrier: false,
            }],
        );
        assert_eq!(drain(&mut m), vec!["SET a 1", "run a9"]);
        assert_eq!(m.done_ticket(0), 1);
        assert!(!m.is_waiting());
    }

    #[test]
    fn a_transaction_waits_for_its_done_and_sits_between_before_and_after() {
        let mut m = Merger::new(3);
        // Shard 0 ran "SET a 0", then tx 7's part, then "SET a 9".
        m.push(
            0,
            1,
            vec![
                Item::Cmd(cmd("SET a 0")),
                Item::Marker { tx: 7 },
                Item::TxCmd {
                    tx: 7,
                    step: 1,
                    cmd: cmd("SET a 1"),
                },
                Item::Cmd(cmd("SET a 9")),
            ],
        );
        m.push(
            1,
            1,
            vec![
                Item::Marker { tx: 7 },
                Item::TxCmd {
                    tx: 7,
                    step: 0,
                    cmd: cmd("SET b 1"),
                },
            ],
        );
        assert_eq!(drain(&mut m), vec!["SET a 0"]);
        assert_eq!(m.done_ticket(0), 0);
        // The coordinator (thread 2) ends it.
        m.push(
            2,
            5,
            vec![Item::TxDone {
                tx: 7,
                cmds: vec![],
                barrier: false,
            }],
        );
        assert_eq!(m.done_ticket(2), 4);
        assert_eq!(drain(&mut m), vec!["[SET b 1; SET a 1]", "SET a 9"]);
        assert_eq!(m.done_ticket(0), 1);
        assert_eq!(m.done_ticket(2), 5);
        assert!(!m.is_waiting());
    }

    #[test]
    fn coordinator_commands_go_in_step_order_with_the_parts() {
        let mut m = Merger::new(2);
        m.push(0, 1, vec![Item::Marker { tx: 3 }]);
        m.push(1, 1, vec![Item::Marker { tx: 3 }]);
        m.push(
            0,
            2,
            vec![Item::TxDone {
                tx: 3,
                cmds: vec![(0, cmd("MSET a 1 b 2"))],
                barrier: false,
            }],
        );
        assert_eq!(drain(&mut m), vec!["MSET a 1 b 2"]);
        assert!(!m.is_waiting());
    }

    #[test]
    fn a_cycle_does_not_stop_the_log() {
        let mut m = Merger::new(2);
        m.push(0, 1, vec![Item::Marker { tx: 1 }, Item::Marker { tx: 2 }]);
        m.push(1, 1, vec![Item::Marker { tx: 2 }, Item::Marker { tx: 1 }]);
        m.push(
            0,
            2,
            vec![
                Item::TxDone {
                    tx: 1,
                    cmds: vec![(0, cmd("X 1"))],
                    barrier: false,
                },
                Item::TxDone {
                    tx: 2,
                    cmds: vec![(0, cmd("X 2"))],
                    barrier: false,
                },
            ],
        );
        assert_eq!(drain(&mut m), vec!["X 1", "X 2"]);
        assert!(!m.is_waiting());
        assert_eq!(m.done_ticket(0), 2);
        assert_eq!(m.done_ticket(1), 1);
    }

    #[test]
    fn a_transaction_with_no_marker_goes_when_done() {
        let mut m = Merger::new(1);
        m.push(
            0,
            1,
            vec![Item::TxDone {
                tx: 9,
                cmds: vec![(0, cmd("FLUSHALL"))],
                barrier: false,
            }],
        );
        assert_eq!(drain(&mut m), vec!["FLUSHALL"]);
    }

    #[test]
    fn a_barrier_cuts_the_log_between_before_and_after() {
        let mut m = Merger::new(2);
        m.push(
            0,
            1,
            vec![
                Item::Cmd(cmd("SET a 1")),
                Item::Marker { tx: 5 },
                Item::Cmd(cmd("SET a 2")),
            ],
        );
        m.push(
            1,
            1,
            vec![Item::Cmd(cmd("SET b 1")), Item::Marker { tx: 5 }],
        );
        m.push(
            1,
            2,
            vec![
                Item::TxDone {
                    tx: 5,
                    cmds: vec![],
                    barrier: true,
                },
                Item::Cmd(cmd("SET b 2")),
            ],
        );
        let out = drain(&mut m);
        let bar = out.iter().position(|s| s == "|").unwrap();
        for before in ["SET a 1", "SET b 1"] {
            assert!(out.iter().position(|s| s == before).unwrap() < bar);
        }
        for after in ["SET a 2", "SET b 2"] {
            assert!(out.iter().position(|s| s == after).unwrap() > bar);
        }
    }
}
