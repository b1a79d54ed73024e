//! The large encoding ("skiplist" for OBJECT ENCODING): a skiplist with spans, its nodes in an
//! index-based arena, plus a chained hash index over the same nodes for member -> node.
//!
//! Each node is stored once and holds its member, score, backward link, hash-chain link and
//! its levels (next index, span). Spans give rank <-> node in O(log n). The hash index is a
//! power-of-two array of chain heads; SCAN walks it with Redis's reverse-binary cursor, which
//! returns every member present for a whole iteration even when the array grows or shrinks
//! between calls.

use std::hash::BuildHasher;

pub(super) const NIL: u32 = u32::MAX;
const HEAD: u32 = 0;
const MAX_LEVEL: usize = 32;

/// One level of a node: the next node on that level, how many ranks it skips, and (a copy
/// of) the next node's score, so a descent decides most steps without loading the next node
/// (one cache miss per step instead of two: the levels live apart from the nodes).
#[derive(Clone, Copy, Debug)]
struct Link {
    next: u32,
    span: u32,
    score: f64,
}

const NO_LINK: Link = Link {
    next: NIL,
    span: 0,
    score: 0.0,
};

#[derive(Clone, Debug)]
struct Node {
    member: Box<[u8]>,
    score: f64,
    back: u32,
    hnext: u32,
    levels: Box<[Link]>,
}

#[derive(Clone, Debug)]
pub(super) struct Big {
    nodes: Vec<Node>,
    free: Vec<u32>,
    tail: u32,
    level: usize,
    len: usize,
    buckets: Vec<u32>,
    hasher: foldhash::fast::FixedState,
    rng: u64,
}

#[inline]
fn less(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> bool {
    s1 < s2 || (s1 == s2 && m1 < m2)
}

impl Big {
    /// See [`crate::value::Value::free_step`]: drops nodes from the end of the arena (two
    /// allocations each).
    pub(super) fn free_step(&mut self, budget: usize) -> usize {
        let k = (budget / 2).max(1).min(self.nodes.len());
        self.nodes.truncate(self.nodes.len() - k);
        self.len = 0;
        2 * k
    }

    pub fn with_capacity(n: usize) -> Big {
        let head = Node {
            member: Box::new([]),
            score: 0.0,
            back: NIL,
            hnext: NIL,
            levels: vec![NO_LINK; MAX_LEVEL].into_boxed_slice(),
        };
        let mut nodes = Vec::with_capacity(n.min(1 << 20) + 1);
        nodes.push(head);
        // A per-set seed: chain lengths do not depend on a guessable function.
        let seed = &nodes as *const _ as u64 ^ 0x9e37_79b9_7f4a_7c15;
        Big {
            nodes,
            free: Vec::new(),
            tail: NIL,
            level: 1,
            len: 0,
            buckets: vec![NIL; n.clamp(4, 1 << 20).next_power_of_two()],
            hasher: foldhash::fast::FixedState::with_seed(seed),
            rng: seed | 1,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn memory(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self
                .nodes
                .iter()
                .map(|n| n.member.len() + n.levels.len() * 8)
                .sum::<usize>()
            + self.buckets.capacity() * 4
            + self.free.capacity() * 4
    }

    fn random_level(&mut self) -> usize {
        let mut lvl = 1;
        loop {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            // p = 1/4 per level, as Redis's skiplist.
            if self.rng & 3 != 0 || lvl >= MAX_LEVEL {
                return lvl;
            }
            lvl += 1;
        }
    }

    // ---- hash index ------------------------------------------------------------------------

    #[inline]
    fn bucket_of(&self, m: &[u8]) -> usize {
        (self.hasher.hash_one(m) as usize) & (self.buckets.len() - 1)
    }

    pub fn find(&self, m: &[u8]) -> Option<u32> {
        let mut i = self.buckets[self.bucket_of(m)];
        while i != NIL {
            let n = &self.nodes[i as usize];
            if &*n.member == m {
                return Some(i);
            }
            i = n.hnext;
        }
        None
    }

    fn hash_insert(&mut self, idx: u32) {
        let b = self.bucket_of(&self.nodes[idx as usize].member);
        self.nodes[idx as usize].hnext = self.buckets[b];
        self.buckets[b] = idx;
    }

    fn hash_remove(&mut self, idx: u32) {
        let b = self.bucket_of(&self.nodes[idx as usize].member);
        let next = self.nodes[idx as usize].hnext;
        if self.buckets[b] == idx {
            self.buckets[b] = next;
            return;
        }
        let mut i = self.buckets[b];
        while i != NIL {
            if self.nodes[i as usize].hnext == idx {
                self.nodes[i as usize].hnext = next;
                return;
            }
            i = self.nodes[i as usize].hnext;
        }
    }

    fn rehash(&mut self, size: usize) {
        self.buckets = vec![NIL; size];
        let mut i = self.nodes[HEAD as usize].levels[0].next;
        while i != NIL {
            self.hash_insert(i);
            i = self.nodes[i as usize].levels[0].next;
        }
    }

    /// Rebuilds the arena when most of its slots are free (a set that shrank a lot gives its
    /// memory back). Keeps the hash function, so a SCAN in progress still sees everything.
    fn maybe_compact(&mut self) {
        if self.free.len() <= 64 || self.free.len() < self.len * 2 {
            return;
        }
        let mut items = Vec::with_capacity(self.len);
        let mut i = self.nodes[HEAD as usize].levels[0].next;
        while i != NIL {
            let n = &mut self.nodes[i as usize];
            items.push((std::mem::take(&mut n.member), n.score));
            i = n.levels[0].next;
        }
        let (hasher, rng) = (self.hasher, self.rng);
        *self = Big::with_capacity(items.len());
        self.hasher = hasher;
        self.rng = rng;
        // Largest first: each insert stops at the head.
        for (m, s) in items.into_iter().rev() {
            self.nodes.push(Node {
                member: m,
                score: s,
                back: NIL,
                hnext: NIL,
                levels: Box::new([]),
            });
            let x = (self.nodes.len() - 1) as u32;
            self.link(x);
            self.hash_insert(x);
            self.maybe_resize();
        }
    }

    fn maybe_resize(&mut self) {
        let cap = self.buckets.len();
        if self.len > cap {
            self.rehash(cap * 2);
        } else if cap > 4 && self.len * 8 < cap {
            self.rehash((self.len * 2).next_power_of_two().max(4));
        }
    }

    // ---- skiplist --------------------------------------------------------------------------

    #[inline]
    fn lv(&self, i: u32, l: usize) -> Link {
        self.nodes[i as usize].levels[l]
    }

    /// Whether the node `l` leads to sorts before (score, member).
    #[inline]
    fn next_before(&self, l: Link, score: f64, member: &[u8]) -> bool {
        l.score < score || (l.score == score && &*self.nodes[l.next as usize].member < member)
    }

    #[inline]
    fn key(&self, i: u32) -> (f64, &[u8]) {
        let n = &self.nodes[i as usize];
        (n.score, &n.member)
    }

    pub fn get(&self, i: u32) -> (&[u8], f64) {
        let n = &self.nodes[i as usize];
        (&n.member, n.score)
    }

    pub fn next(&self, i: u32) -> u32 {
        self.nodes[i as usize].levels[0].next
    }

    pub fn prev(&self, i: u32) -> u32 {
        self.nodes[i as usize].back
    }

    /// Links node `x` (member and score set, levels empty) into the skiplist.
    fn link(&mut self, x: u32) {
        let mut update = [HEAD; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        // Taken out for the walk (no copy), put back below.
        let member = std::mem::take(&mut self.nodes[x as usize].member);
        let score = self.nodes[x as usize].score;
        let mut cur = HEAD;
        for i in (0..self.level).rev() {
            rank[i] = if i == self.level - 1 { 0 } else { rank[i + 1] };
            loop {
                let l = self.lv(cur, i);
                if l.next == NIL || !self.next_before(l, score, &member) {
                    break;
                }
                rank[i] += l.span;
                cur = l.next;
            }
            update[i] = cur;
        }
        let lvl = self.random_level();
        if lvl > self.level {
            for i in self.level..lvl {
                rank[i] = 0;
                update[i] = HEAD;
                self.nodes[HEAD as usize].levels[i].span = self.len as u32;
            }
            self.level = lvl;
        }
        let mut levels = vec![NO_LINK; lvl];
        for (i, l) in levels.iter_mut().enumerate() {
            let u = self.lv(update[i], i);
            l.next = u.next;
            l.score = u.score;
            l.span = u.span - (rank[0] - rank[i]);
            let ul = &mut self.nodes[update[i] as usize].levels[i];
            ul.next = x;
            ul.score = score;
            ul.span = rank[0] - rank[i] + 1;
        }
        for (i, &u) in update.iter().enumerate().take(self.level).skip(lvl) {
            self.nodes[u as usize].levels[i].span += 1;
        }
        let next0 = levels[0].next;
        let n = &mut self.nodes[x as usize];
        n.member = member;
        n.levels = levels.into_boxed_slice();
        n.back = if update[0] == HEAD { NIL } else { update[0] };
        if next0 != NIL {
            self.nodes[next0 as usize].back = x;
        } else {
            self.tail = x;
        }
        self.len += 1;
    }

    /// The update path of node `x` (the last node before it on each level).
    fn path_to(&self, x: u32) -> [u32; MAX_LEVEL] {
        let (score, member) = self.key(x);
        let mut update = [HEAD; MAX_LEVEL];
        let mut cur = HEAD;
        for i in (0..self.level).rev() {
            loop {
                let l = self.lv(cur, i);
                if l.next == NIL || !self.next_before(l, score, member) {
                    break;
                }
                cur = l.next;
            }
            update[i] = cur;
        }
        update
    }

    /// Unlinks node `x` from the skiplist, given its update path.
    fn unlink_with(&mut self, x: u32, update: &[u32; MAX_LEVEL]) {
        for (i, &u) in update.iter().enumerate().take(self.level) {
            let ul = self.lv(u, i);
            if ul.next == x {
                let xl = self.lv(x, i);
                let l = &mut self.nodes[u as usize].levels[i];
                l.span = ul.span + xl.span - 1;
                l.next = xl.next;
                l.score = xl.score;
            } else {
                self.nodes[u as usize].levels[i].span -= 1;
            }
        }
        let (next0, back) = (self.lv(x, 0).next, self.nodes[x as usize].back);
        if next0 != NIL {
            self.nodes[next0 as usize].back = back;
        } else {
            self.tail = back;
        }
        while self.level > 1 && self.lv(HEAD, self.level - 1).next == NIL {
            self.level -= 1;
        }
        self.nodes[x as usize].levels = Box::new([]);
        self.len -= 1;
    }

    fn alloc(&mut self, member: &[u8], score: f64) -> u32 {
        let node = Node {
            member: member.into(),
            score,
            back: NIL,
            hnext: NIL,
            levels: Box::new([]),
        };
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Adds a member that is not present.
    pub fn insert(&mut self, member: &[u8], score: f64) {
        let x = self.alloc(member, score);
        self.link(x);
        self.hash_insert(x);
        self.maybe_resize();
    }

    /// Changes the score of node `x`.
    pub fn update(&mut self, x: u32, score: f64) {
        let path = self.path_to(x);
        self.unlink_with(x, &path);
        self.nodes[x as usize].score = score;
        self.link(x);
    }

    fn release(&mut self, x: u32) {
        self.hash_remove(x);
        self.nodes[x as usize].member = Box::new([]);
        self.free.push(x);
    }

    pub fn remove_node(&mut self, x: u32) {
        let path = self.path_to(x);
        self.unlink_with(x, &path);
        self.release(x);
        self.maybe_resize();
        self.maybe_compact();
    }

    /// Removes the elements of ranks `start..end` (0-based, end exclusive).
    pub fn remove_ranks(&mut self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        // The path to rank `start`, then delete forward along it.
        let mut update = [HEAD; MAX_LEVEL];
        let mut cur = HEAD;
        let mut traversed = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let l = self.lv(cur, i);
                if l.next == NIL || traversed + l.span as usize > start {
                    break;
                }
                traversed += l.span as usize;
                cur = l.next;
            }
            update[i] = cur;
        }
        let mut x = self.lv(cur, 0).next;
        for _ in start..end {
            if x == NIL {
                break;
            }
            let next = self.lv(x, 0).next;
            self.unlink_with(x, &update);
            self.release(x);
            x = next;
        }
        self.maybe_resize();
        self.maybe_compact();
    }

    /// The node at 0-based rank `r`.
    pub fn at_rank(&self, r: usize) -> u32 {
        if r >= self.len {
            return NIL;
        }
        let target = r + 1;
        let mut cur = HEAD;
        let mut traversed = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let l = self.lv(cur, i);
                if l.next == NIL || traversed + l.span as usize > target {
                    break;
                }
                traversed += l.span as usize;
                cur = l.next;
            }
            if traversed == target {
                return cur;
            }
        }
        NIL
    }

    /// The 0-based rank of node `x`.
    pub fn rank_of(&self, x: u32) -> usize {
        let (score, member) = self.key(x);
        let mut cur = HEAD;
        let mut traversed = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let l = self.lv(cur, i);
                if l.next == NIL {
                    break;
                }
                let (s, m) = self.key(l.next);
                if less(score, member, s, m) {
                    break;
                }
                traversed += l.span as usize;
                cur = l.next;
            }
            if cur == x {
                return traversed - 1;
            }
        }
        traversed.saturating_sub(1)
    }

    /// How many elements satisfy `pred`, which must hold for a prefix of the order.
    pub fn partition_point(&self, pred: impl Fn(f64, &[u8]) -> bool) -> usize {
        let mut cur = HEAD;
        let mut traversed = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let l = self.lv(cur, i);
                if l.next == NIL {
                    break;
                }
                let (s, m) = self.key(l.next);
                if !pred(s, m) {
                    break;
                }
                traversed += l.span as usize;
                cur = l.next;
            }
        }
        traversed
    }

    #[cfg(test)]
    pub fn first(&self) -> u32 {
        self.lv(HEAD, 0).next
    }

    /// One SCAN step: visits whole buckets until about `count` members are seen.
    pub fn scan(&self, mut cursor: u64, count: usize, mut f: impl FnMut(&[u8], f64)) -> u64 {
        let mask = (self.buckets.len() - 1) as u64;
        let mut seen = 0usize;
        loop {
            let mut i = self.buckets[(cursor & mask) as usize];
            while i != NIL {
                let n = &self.nodes[i as usize];
                f(&n.member, n.score);
                seen += 1;
                i = n.hnext;
            }
            // Reverse-binary increment over the bits of the mask.
            cursor |= !mask;
            cursor = cursor.reverse_bits().wrapping_add(1).reverse_bits();
            if cursor == 0 || seen >= count {
                return cursor;
            }
        }
    }

    /// Checks the structure's invariants (tests).
    #[cfg(test)]
    pub fn check(&self) {
        for l in self.nodes[HEAD as usize].levels[..self.level].iter() {
            if l.next != NIL {
                assert_eq!(
                    l.score.to_bits(),
                    self.nodes[l.next as usize].score.to_bits()
                );
            }
        }
        let mut n = 0;
        let mut i = self.first();
        let mut prev = NIL;
        while i != NIL {
            assert_eq!(self.nodes[i as usize].back, prev);
            if prev != NIL {
                let (s0, m0) = self.key(prev);
                let (s1, m1) = self.key(i);
                assert!(less(s0, m0, s1, m1));
            }
            assert_eq!(self.rank_of(i), n);
            assert_eq!(self.at_rank(n), i);
            assert_eq!(self.find(&self.nodes[i as usize].member), Some(i));
            for l in self.nodes[i as usize].levels.iter() {
                if l.next != NIL {
                    assert_eq!(
                        l.score.to_bits(),
                        self.nodes[l.next as usize].score.to_bits()
                    );
                }
            }
            prev = i;
            i = self.next(i);
            n += 1;
        }
        assert_eq!(self.tail, prev);
        assert_eq!(n, self.len);
    }
}
