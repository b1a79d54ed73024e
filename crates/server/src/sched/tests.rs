//! A model of the scheduling protocol around [`Sched`]: shards with FIFO inboxes, a global
//! sequencer, one-shot transactions (released by their quorum), reservations (granted, run
//! step by step, released by message) and single-key commands outside transactions, under
//! random message interleavings. Every run must finish (no deadlock, nothing left waiting),
//! its history must be conflict-serializable with the transactions in the sequencer's order,
//! and no operation may observe a transaction's write before that transaction has finished.

use super::*;
use std::collections::{HashMap, HashSet, VecDeque};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    OneShot,
    Reserve,
}

/// What runs on a shard: a transaction (by index) or a single-key command (by index).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Who {
    Tx(usize),
    Cmd(usize),
}

struct Txn {
    kind: Kind,
    /// Per shard: its keys (key number, write).
    parts: Vec<(usize, Vec<(usize, bool)>)>,
    whole: Vec<usize>,
    quorum: Option<Arc<Quorum>>,
    granted: usize,
    stepped: usize,
    released: usize,
    finished: bool,
}

enum Msg {
    Schedule { tx: usize },
    Step { tx: usize },
    Release { tx: usize },
    Wake,
    Cmd { id: usize, key: usize, write: bool },
}

/// Work outside the scheduler waiting on a shard, in arrival order.
enum Deferred {
    Cmd { id: usize, key: usize, write: bool },
    Part { tx: usize },
}

enum Back {
    Granted { tx: usize },
    Stepped { tx: usize },
}

struct Model {
    shards: usize,
    nkeys: usize,
    rng: Rng,
    sched: Vec<Sched<()>>,
    inbox: Vec<VecDeque<Msg>>,
    back: VecDeque<Back>,
    deferred: Vec<VecDeque<Deferred>>,
    /// Arrival order on each shard's inbox: a transaction's part's stamp, per (tx, shard);
    /// a command's stamp.
    tx_arrival: HashMap<(usize, usize), u64>,
    cmd_arrival: HashMap<usize, u64>,
    stamp: u64,
    txns: Vec<Txn>,
    /// Per key: the last writer, and every access in order (who, write).
    last_writer: Vec<Option<Who>>,
    history: Vec<Vec<(Who, bool)>>,
    cmds: usize,
    cmds_done: usize,
}

fn key_bytes(k: usize) -> bytes::Bytes {
    bytes::Bytes::from(format!("k{k}"))
}

impl Model {
    fn new(seed: u64) -> Model {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let shards = 1 + rng.below(4);
        let nkeys = 2 + rng.below(6);
        Model {
            shards,
            nkeys,
            rng,
            sched: (0..shards).map(|_| Sched::default()).collect(),
            inbox: (0..shards).map(|_| VecDeque::new()).collect(),
            back: VecDeque::new(),
            deferred: (0..shards).map(|_| VecDeque::new()).collect(),
            tx_arrival: HashMap::new(),
            cmd_arrival: HashMap::new(),
            stamp: 0,
            txns: Vec::new(),
            last_writer: vec![None; nkeys],
            history: vec![Vec::new(); nkeys],
            cmds: 0,
            cmds_done: 0,
        }
    }

    fn shard_of(&self, k: usize) -> usize {
        k % self.shards
    }

    fn intents(&self, tx: usize, shard: usize) -> Intents {
        let t = &self.txns[tx];
        if t.whole.contains(&shard) {
            return Intents::whole();
        }
        let mut i = Intents::default();
        for (s, keys) in &t.parts {
            if *s == shard {
                for &(k, w) in keys {
                    i.add(&key_bytes(k), w);
                }
            }
        }
        i
    }

    /// A new transaction: its parts posted to every shard at once (the sequencer).
    fn issue(&mut self) {
        let kind = if self.rng.below(2) == 0 {
            Kind::OneShot
        } else {
            Kind::Reserve
        };
        let n = 1 + self.rng.below(4);
        let mut by_shard: Vec<(usize, Vec<(usize, bool)>)> = Vec::new();
        for _ in 0..n {
            let k = self.rng.below(self.nkeys);
            let w = self.rng.below(2) == 0;
            let s = self.shard_of(k);
            match by_shard.iter_mut().find(|(x, _)| *x == s) {
                Some((_, ks)) => match ks.iter_mut().find(|(x, _)| *x == k) {
                    Some(e) => e.1 |= w,
                    None => ks.push((k, w)),
                },
                None => by_shard.push((s, vec![(k, w)])),
            }
        }
        let mut whole = Vec::new();
        if kind == Kind::Reserve && self.rng.below(8) == 0 {
            whole.push(by_shard[0].0);
        }
        let parts = by_shard.len();
        let tx = self.txns.len();
        self.txns.push(Txn {
            kind,
            quorum: (kind == Kind::OneShot).then(|| Quorum::new(parts)),
            parts: by_shard,
            whole,
            granted: 0,
            stepped: 0,
            released: 0,
            finished: false,
        });
        for i in 0..parts {
            let s = self.txns[tx].parts[i].0;
            self.stamp += 1;
            self.tx_arrival.insert((tx, s), self.stamp);
            self.inbox[s].push_back(Msg::Schedule { tx });
        }
    }

    fn command(&mut self) {
        let key = self.rng.below(self.nkeys);
        let write = self.rng.below(2) == 0;
        let id = self.cmds;
        self.cmds += 1;
        let s = self.shard_of(key);
        self.stamp += 1;
        self.cmd_arrival.insert(id, self.stamp);
        self.inbox[s].push_back(Msg::Cmd { id, key, write });
    }

    fn access(&mut self, who: Who, key: usize, write: bool) {
        // Isolation: what this observes was written by a finished transaction (or itself).
        if let Some(Who::Tx(w)) = self.last_writer[key] {
            if Who::Tx(w) != who {
                assert!(
                    self.txns[w].finished,
                    "{who:?} saw key {key} written by unfinished tx {w}"
                );
            }
        }
        self.history[key].push((who, write));
        if write {
            self.last_writer[key] = Some(who);
        }
    }

    fn run_part(&mut self, tx: usize, shard: usize) {
        let keys: Vec<(usize, bool)> = self.txns[tx]
            .parts
            .iter()
            .filter(|(s, _)| *s == shard)
            .flat_map(|(_, ks)| ks.clone())
            .collect();
        for (k, w) in keys {
            self.access(Who::Tx(tx), k, w);
        }
    }

    /// Parts granted by a release or sweep on `shard`.
    fn granted(&mut self, shard: usize, g: Vec<Granted<()>>) {
        for g in g {
            self.on_grant(shard, g.tx as usize);
        }
        self.retry_deferred(shard);
        // What still waits may now wait behind parts just granted: their quorums must know.
        if self.sched[shard].len().1 > 0 || !self.deferred[shard].is_empty() {
            self.wait_here(shard);
        }
    }

    fn on_grant(&mut self, shard: usize, tx: usize) {
        match self.txns[tx].kind {
            Kind::Reserve => self.back.push_back(Back::Granted { tx }),
            Kind::OneShot => {
                self.run_part(tx, shard);
                let q = self.txns[tx].quorum.clone().unwrap();
                if let Some(bits) = q.part_done() {
                    self.txns[tx].finished = true;
                    for s in waiter_shards(bits, self.shards) {
                        if s != shard {
                            self.inbox[s].push_back(Msg::Wake);
                        }
                    }
                    let g = self.sched[shard].release(tx as TxId);
                    self.granted(shard, g);
                }
            }
        }
    }

    fn wait_here(&mut self, shard: usize) {
        if !self.sched[shard].wait_for_holders(shard) {
            let g = self.sched[shard].sweep();
            self.granted(shard, g);
        }
    }

    fn retry_deferred(&mut self, shard: usize) {
        while let Some(front) = self.deferred[shard].front() {
            let (id, key, write) = match *front {
                Deferred::Cmd { id, key, write } => (id, key, write),
                Deferred::Part { tx } => {
                    self.deferred[shard].pop_front();
                    self.schedule(shard, tx);
                    continue;
                }
            };
            if self.sched[shard].blocks_key(&key_bytes(key), write) {
                self.wait_here(shard);
                if self.sched[shard].blocks_key(&key_bytes(key), write) {
                    return;
                }
                continue;
            }
            self.deferred[shard].pop_front();
            self.access(Who::Cmd(id), key, write);
            self.cmds_done += 1;
        }
    }

    fn schedule(&mut self, shard: usize, tx: usize) {
        let intents = self.intents(tx, shard);
        let q = self.txns[tx].quorum.clone();
        if self.sched[shard]
            .schedule(tx as TxId, intents, q, ())
            .is_some()
        {
            self.on_grant(shard, tx);
        } else {
            self.wait_here(shard);
        }
    }

    fn deliver(&mut self, shard: usize) {
        let m = self.inbox[shard].pop_front().unwrap();
        match m {
            Msg::Schedule { tx } => {
                let g = self.sched[shard].sweep();
                self.granted(shard, g);
                if self.deferred[shard].is_empty() {
                    self.schedule(shard, tx);
                } else {
                    // Behind the commands that wait here (they arrived first).
                    self.deferred[shard].push_back(Deferred::Part { tx });
                    self.retry_deferred(shard);
                }
            }
            Msg::Step { tx } => {
                assert!(self.sched[shard].holds(tx as TxId), "step without grant");
                self.run_part(tx, shard);
                self.back.push_back(Back::Stepped { tx });
            }
            Msg::Release { tx } => {
                let g = self.sched[shard].release(tx as TxId);
                self.txns[tx].released += 1;
                if self.txns[tx].released == self.txns[tx].parts.len() {
                    // (finished is set when the coordinator sends the releases)
                }
                self.granted(shard, g);
            }
            Msg::Wake => {
                let g = self.sched[shard].sweep();
                self.granted(shard, g);
            }
            Msg::Cmd { id, key, write } => {
                let g = self.sched[shard].sweep();
                self.granted(shard, g);
                if !self.deferred[shard].is_empty()
                    || self.sched[shard].blocks_key(&key_bytes(key), write)
                {
                    self.deferred[shard].push_back(Deferred::Cmd { id, key, write });
                    self.retry_deferred(shard);
                } else {
                    self.access(Who::Cmd(id), key, write);
                    self.cmds_done += 1;
                }
            }
        }
    }

    fn coordinator(&mut self) {
        let i = self.rng.below(self.back.len());
        let b = self.back.remove(i).unwrap();
        match b {
            Back::Granted { tx } => {
                let t = &mut self.txns[tx];
                t.granted += 1;
                if t.granted == t.parts.len() {
                    let shards: Vec<usize> = t.parts.iter().map(|p| p.0).collect();
                    for s in shards {
                        self.inbox[s].push_back(Msg::Step { tx });
                    }
                }
            }
            Back::Stepped { tx } => {
                let t = &mut self.txns[tx];
                t.stepped += 1;
                if t.stepped == t.parts.len() {
                    // Its reply may leave now: it is finished for every observer from here.
                    t.finished = true;
                    let shards: Vec<usize> = t.parts.iter().map(|p| p.0).collect();
                    for s in shards {
                        self.inbox[s].push_back(Msg::Release { tx });
                    }
                }
            }
        }
    }

    fn run(&mut self, txns: usize, cmds: usize) {
        let mut issued = 0;
        let mut sent = 0;
        loop {
            let busy: Vec<usize> = (0..self.shards)
                .filter(|&s| !self.inbox[s].is_empty())
                .collect();
            let mut choices = busy.len() + usize::from(!self.back.is_empty());
            if issued < txns {
                choices += 1;
            }
            if sent < cmds {
                choices += 1;
            }
            if choices == 0 {
                break;
            }
            let mut c = self.rng.below(choices);
            if c < busy.len() {
                self.deliver(busy[c]);
                continue;
            }
            c -= busy.len();
            if !self.back.is_empty() {
                if c == 0 {
                    self.coordinator();
                    continue;
                }
                c -= 1;
            }
            if issued < txns && c == 0 {
                self.issue();
                issued += 1;
                continue;
            }
            self.command();
            sent += 1;
        }
    }

    fn check(&self) {
        // Everything finished: no deadlock, nothing left behind.
        for (i, t) in self.txns.iter().enumerate() {
            assert!(t.finished, "tx {i} never finished");
        }
        assert_eq!(self.cmds_done, self.cmds, "commands left waiting");
        for s in 0..self.shards {
            assert!(self.deferred[s].is_empty());
            assert_eq!(self.sched[s].len().1, 0, "parts left waiting on shard {s}");
            // Reservations are all released; quorum holders may linger until a sweep.
            let mut sched_left = self.sched[s].len().0;
            if sched_left > 0 {
                assert!(self.sched[s].sweepable());
                sched_left = 0;
            }
            assert_eq!(sched_left, 0);
        }
        // Conflict serializability: the precedence graph has no cycle, and between two
        // transactions it follows the sequencer's order.
        let mut edges: HashMap<Who, HashSet<Who>> = HashMap::new();
        for h in &self.history {
            for (i, &(a, aw)) in h.iter().enumerate() {
                for &(b, bw) in &h[i + 1..] {
                    if a != b && (aw || bw) {
                        if let (Who::Tx(x), Who::Tx(y)) = (a, b) {
                            assert!(x < y, "tx {y} ran before tx {x} on a shared key");
                        }
                        edges.entry(a).or_default().insert(b);
                    }
                }
            }
        }
        // A command that arrived on a shard before a transaction's part for a key they both
        // touch (one writing) ran first: a connection's commands keep their order.
        for (k, h) in self.history.iter().enumerate() {
            let s = self.shard_of(k);
            for (i, &(a, aw)) in h.iter().enumerate() {
                for &(b, bw) in &h[i + 1..] {
                    if let (Who::Tx(t), Who::Cmd(c), true) = (a, b, aw || bw) {
                        assert!(
                            self.tx_arrival[&(t, s)] < self.cmd_arrival[&c],
                            "command {c} arrived before tx {t} on key {k} but ran after it"
                        );
                    }
                }
            }
        }
        // Depth-first search for a cycle.
        let mut state: HashMap<Who, u8> = HashMap::new();
        fn visit(n: Who, e: &HashMap<Who, HashSet<Who>>, st: &mut HashMap<Who, u8>) {
            match st.get(&n) {
                Some(1) => panic!("cycle through {n:?}"),
                Some(2) => return,
                _ => {}
            }
            st.insert(n, 1);
            if let Some(next) = e.get(&n) {
                for &m in next {
                    visit(m, e, st);
                }
            }
            st.insert(n, 2);
        }
        let nodes: Vec<Who> = edges.keys().copied().collect();
        for n in nodes {
            visit(n, &edges, &mut state);
        }
    }
}

fn run_seed(seed: u64) {
    let mut m = Model::new(seed);
    let txns = 1 + m.rng.below(12);
    let cmds = m.rng.below(12);
    m.run(txns, cmds);
    m.check();
}

#[test]
fn random_transactions_under_random_interleavings_are_serializable() {
    // SCHED_SEEDS=1000000 for a longer search than the default run's.
    let seeds: u64 = std::env::var("SCHED_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    for seed in 0..seeds {
        let r = std::panic::catch_unwind(|| run_seed(seed));
        if r.is_err() {
            panic!("failing seed: {seed}");
        }
    }
}

#[test]
fn a_waiting_part_is_granted_in_arrival_order() {
    let mut s: Sched<u32> = Sched::default();
    let mut w = Intents::default();
    w.add(&key_bytes(1), true);
    assert_eq!(s.schedule(1, w.clone(), None, 1), Some(1));
    assert_eq!(s.schedule(2, w.clone(), None, 2), None);
    assert_eq!(s.schedule(3, w.clone(), None, 3), None);
    // A read of another key passes; a whole-shard part waits behind everything.
    let mut r = Intents::default();
    r.add(&key_bytes(2), false);
    assert_eq!(s.schedule(4, r.clone(), None, 4), Some(4));
    assert_eq!(s.schedule(5, Intents::whole(), None, 5), None);
    assert_eq!(
        s.schedule(6, r, None, 6),
        None,
        "behind the waiting whole-shard part"
    );
    let g: Vec<u32> = s.release(1).into_iter().map(|g| g.part).collect();
    assert_eq!(g, vec![2]);
    let g: Vec<u32> = s.release(2).into_iter().map(|g| g.part).collect();
    assert_eq!(g, vec![3]);
    s.release(3);
    let g: Vec<u32> = s.release(4).into_iter().map(|g| g.part).collect();
    assert_eq!(g, vec![5]);
    let g: Vec<u32> = s.release(5).into_iter().map(|g| g.part).collect();
    assert_eq!(g, vec![6]);
    s.release(6);
    assert!(s.idle());
}

#[test]
fn readers_share_a_key_and_a_writer_waits_for_them() {
    let mut s: Sched<u32> = Sched::default();
    let mut r = Intents::default();
    r.add(&key_bytes(1), false);
    let mut w = Intents::default();
    w.add(&key_bytes(1), true);
    assert!(s.schedule(1, r.clone(), None, 1).is_some());
    assert!(s.schedule(2, r.clone(), None, 2).is_some());
    assert!(!s.blocks_key(b"k1", false));
    assert!(s.blocks_key(b"k1", true));
    assert!(s.schedule(3, w, None, 3).is_none());
    assert!(s.release(1).is_empty());
    assert_eq!(s.release(2).len(), 1);
    assert!(s.blocks_key(b"k1", false));
}

#[test]
fn a_quorum_holder_goes_at_the_sweep_after_its_last_part() {
    let mut s: Sched<u32> = Sched::default();
    let q = Quorum::new(2);
    let mut w = Intents::default();
    w.add(&key_bytes(1), true);
    assert!(s.schedule(1, w.clone(), Some(q.clone()), 1).is_some());
    assert_eq!(q.part_done(), None);
    assert!(s.schedule(2, w, None, 2).is_none());
    assert!(s.wait_for_holders(3), "still running elsewhere");
    assert!(s.sweep().is_empty());
    // The other shard runs the last part and learns who to wake.
    assert_eq!(q.part_done(), Some(1 << 3));
    let g: Vec<u32> = s.sweep().into_iter().map(|g| g.part).collect();
    assert_eq!(g, vec![2]);
}

#[test]
fn holders_done_or_wake_asks_an_unfinished_quorum_to_wake_the_shard() {
    let mut s: Sched<u32> = Sched::default();
    assert!(s.holders_done_or_wake(2), "nothing held");
    let q = Quorum::new(2);
    let mut w = Intents::default();
    w.add(&key_bytes(1), true);
    assert!(s.schedule(1, w, Some(q.clone()), 1).is_some());
    assert_eq!(q.part_done(), None);
    assert!(!s.holders_done_or_wake(2), "its other part has not run");
    // The last part, elsewhere, is told to wake shard 2; then the holder counts as done
    // before any sweep.
    assert_eq!(q.part_done(), Some(1 << 2));
    assert!(s.holders_done_or_wake(2));
    assert!(!s.idle());
    // A reservation is released by a message: never done here.
    let mut r = Intents::default();
    r.add(&key_bytes(5), false);
    assert!(s.schedule(3, r, None, 3).is_some());
    assert!(!s.holders_done_or_wake(2));
}

#[test]
fn every_thread_computes_the_same_fingerprint() {
    let here: Vec<u64> = (0..100).map(|k| fingerprint(&key_bytes(k))).collect();
    let there = std::thread::spawn(|| {
        (0..100)
            .map(|k| fingerprint(&key_bytes(k)))
            .collect::<Vec<u64>>()
    })
    .join()
    .unwrap();
    assert_eq!(here, there);
    // Distinct keys, distinct fingerprints (64 bits: a collision among 100 would be a bug).
    let distinct: std::collections::HashSet<u64> = here.iter().copied().collect();
    assert_eq!(distinct.len(), 100);
}

#[test]
fn trim_gives_back_the_room_a_big_transaction_left_and_keeps_what_is_held() {
    let mut s: Sched<u32> = Sched::default();
    // A big MSET's part: thousands of keys granted, then released.
    let big = Intents::of_keys(&(0..5000).map(key_bytes).collect::<Vec<_>>(), true);
    assert!(s.schedule(1, big, None, 1).is_some());
    let grown = s.key_capacity();
    assert!(grown >= 5000);
    // Trimming while the keys are held changes nothing.
    s.trim();
    assert_eq!(s.key_capacity(), grown);
    assert!(s.release(1).is_empty());
    // A small transaction holds two keys; the room goes, its intents stay.
    let mut w = Intents::default();
    w.add(&key_bytes(7), true);
    w.add(&key_bytes(8), false);
    assert!(s.schedule(2, w, None, 2).is_some());
    s.trim();
    assert!(
        s.key_capacity() < grown / 8,
        "{} of {grown}",
        s.key_capacity()
    );
    assert!(s.blocks_key(&key_bytes(7), false));
    assert!(s.blocks_key(&key_bytes(8), true));
    assert!(!s.blocks_key(&key_bytes(8), false));
    assert!(!s.blocks_key(&key_bytes(9), true));
    let mut w2 = Intents::default();
    w2.add(&key_bytes(7), false);
    assert!(
        s.schedule(3, w2, None, 3).is_none(),
        "still conflicts after the trim"
    );
    let g: Vec<u32> = s.release(2).into_iter().map(|g| g.part).collect();
    assert_eq!(g, vec![3]);
}
