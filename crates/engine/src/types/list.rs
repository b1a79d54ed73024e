//! The list value type: a deque of compact nodes (Redis's quicklist idea).
//!
//! Why this shape: a list is mostly pushed and popped at its ends, and read by ranges. One
//! heap object per element (a `VecDeque<Vec<u8>>`) costs 24 bytes of header plus an allocation
//! (16+ bytes with its rounding) per element; a plain byte buffer is compact but makes the far
//! end O(n). So elements are packed into nodes, each node ONE byte buffer of bounded size, and
//! the nodes sit in a `VecDeque`:
//!
//! - an element is `varint(len) bytes varint_rev(len)`: the length before the data lets a walk go
//!   forward, the mirrored length after it lets a walk go backward (listpack's back-length
//!   idea). A small element costs its bytes plus 2: memory per element is data + 2 bytes, plus
//!   about 40 bytes per node (a few hundred elements share one node).
//! - a node keeps free room at both ends: elements live in `buf[start..]`, so a pop at either end
//!   is O(1) (the front one just moves `start`), a push at the back is `Vec::push`, and a push at
//!   the front writes into the room before `start` (grown geometrically when it runs out:
//!   amortized O(1)). When a node stops being an end node its spare room is released.
//! - the node size limit is Redis's `list-max-listpack-size` rule, applied to the size the
//!   node WOULD have as a Redis listpack (each node tracks that number, `lp`), so that the
//!   node layout, and with it OBJECT ENCODING, follows Redis 7.2 for pushes, pops, trims and
//!   removals: a list is "listpack" while it is one node that Redis 7.2 would keep as a plain
//!   listpack, "quicklist" once a growth check says the listpack would pass the limit, and back
//!   to "listpack" when it shrinks to one node under half the limit (Redis 7.2's rules in
//!   t_list.c: conversions only in `grow_check` and `shrink_check`, called by the commands at
//!   the points where Redis calls them).
//!
//! Complexity: push/pop at either end O(1) amortized; index access O(nodes + node size),
//! walking from the nearer end of the list and of the node; LRANGE O(start offset + count);
//! middle insertion/removal O(nodes + node size).

use std::collections::VecDeque;

/// Redis listpack header (total bytes u32 + count u16) and end marker.
const LP_OVERHEAD: usize = 7;
/// Redis's SIZE_SAFETY_LIMIT: a count-limited node never grows past this many bytes.
const SIZE_SAFETY_LIMIT: usize = 8192;
/// Redis's SIZE_ESTIMATE_OVERHEAD: allowance for one entry's header when checking a push.
const SIZE_ESTIMATE_OVERHEAD: usize = 8;

/// A node limit from `list-max-listpack-size` (Redis's `quicklistNodeLimit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill {
    /// Byte limit (usize::MAX when limited by count).
    size: usize,
    /// Entry limit (usize::MAX when limited by size).
    count: usize,
}

impl Fill {
    pub fn new(fill: i64) -> Fill {
        if fill >= 0 {
            Fill {
                size: usize::MAX,
                count: (fill.max(1) as u64).min(u32::MAX as u64) as usize,
            }
        } else {
            // -1..-5: 4..64 KiB; anything more negative is 64 KiB, as in Redis.
            let level = ((-(fill + 1)) as u64).min(4) as u32;
            Fill {
                size: 4096 << level,
                count: u32::MAX as usize,
            }
        }
    }

    /// Redis's `quicklistNodeExceedsLimit`.
    fn exceeds(self, sz: usize, count: usize) -> bool {
        if self.size != usize::MAX {
            sz > self.size
        } else {
            sz > SIZE_SAFETY_LIMIT || count > self.count
        }
    }
}

/// Bytes Redis's listpack uses for `s` (encoding, data and back-length), so that nodes are
/// split where Redis would split them.
fn lp_entry_size(s: &[u8]) -> usize {
    let enc = match lp_int(s) {
        Some(v) if (0..=127).contains(&v) => 1,
        Some(v) if (-4096..=4095).contains(&v) => 2,
        Some(v) if i16::try_from(v).is_ok() => 3,
        Some(v) if (-(1 << 23)..(1 << 23)).contains(&v) => 4,
        Some(v) if i32::try_from(v).is_ok() => 5,
        Some(_) => 9,
        None => {
            let l = s.len();
            if l < 64 {
                1 + l
            } else if l < 4096 {
                2 + l
            } else {
                5 + l
            }
        }
    };
    let back = if enc <= 127 {
        1
    } else if enc < 16383 {
        2
    } else if enc < 2097151 {
        3
    } else if enc < 268435455 {
        4
    } else {
        5
    };
    enc + back
}

/// Whether listpack stores `s` as an integer (canonical decimal text of an i64).
fn lp_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, d) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if !matches!(d.first(), Some(b'1'..=b'9')) {
        return None;
    }
    let mut v: u64 = 0;
    for &c in d {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Our own bytes for one element.
fn enc_size(len: usize) -> usize {
    len + 2 * varint_len(len)
}

/// Writes `varint(len) data varint_rev(len)` into `out` (exactly `enc_size(data.len())` bytes).
fn encode_into(out: &mut [u8], data: &[u8]) {
    let len = data.len();
    let h = varint_len(len);
    let mut v = len;
    for i in 0..h {
        let more = if i + 1 < h { 0x80 } else { 0 };
        let b = (v & 0x7f) as u8 | more;
        out[i] = b;
        // The trailer is the same bytes in reverse order, so a backward walk meets the
        // low-order group first.
        out[h + len + (h - 1 - i)] = b;
        v >>= 7;
    }
    out[h..h + len].copy_from_slice(data);
}

/// (len, header bytes) of the element starting at `p`.
fn read_fwd(buf: &[u8], p: usize) -> (usize, usize) {
    let (mut v, mut shift, mut i) = (0usize, 0, 0);
    loop {
        let b = buf[p + i];
        v |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b & 0x80 == 0 {
            return (v, i);
        }
        shift += 7;
    }
}

/// (len, trailer bytes) of the element ending at `q`.
fn read_back(buf: &[u8], q: usize) -> (usize, usize) {
    let (mut v, mut shift, mut i) = (0usize, 0, 0);
    loop {
        i += 1;
        let b = buf[q - i];
        v |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            return (v, i);
        }
        shift += 7;
    }
}

/// One node: a run of encoded elements in `buf[start..]`.
#[derive(Clone, Debug, Default)]
struct Node {
    buf: Vec<u8>,
    start: usize,
    count: usize,
    /// The size of this node as a Redis listpack (decides splits and encodings).
    lp: usize,
}

impl Node {
    fn new() -> Node {
        Node {
            lp: LP_OVERHEAD,
            ..Node::default()
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Byte range of the element whose encoding starts at absolute offset `p`, and where the
    /// next one starts.
    fn elem_at(&self, p: usize) -> (usize, usize, usize) {
        let (len, h) = read_fwd(&self.buf, p);
        (p + h, p + h + len, p + 2 * h + len)
    }

    /// Absolute offset of element `i` (or the end for `i == count`), from the nearer end.
    fn offset_of(&self, i: usize) -> usize {
        if i <= self.count / 2 {
            let mut p = self.start;
            for _ in 0..i {
                p = self.elem_at(p).2;
            }
            p
        } else {
            let mut q = self.buf.len();
            for _ in i..self.count {
                let (len, t) = read_back(&self.buf, q);
                q -= 2 * t + len;
            }
            q
        }
    }

    fn get(&self, i: usize) -> &[u8] {
        let (a, b, _) = self.elem_at(self.offset_of(i));
        &self.buf[a..b]
    }

    fn push_back(&mut self, e: &[u8]) {
        let n = enc_size(e.len());
        let at = self.buf.len();
        self.buf.resize(at + n, 0);
        encode_into(&mut self.buf[at..], e);
        self.count += 1;
        self.lp += lp_entry_size(e);
    }

    fn push_front(&mut self, e: &[u8]) {
        let n = enc_size(e.len());
        if self.start < n {
            // Out of room at the front: move the elements up, leaving room that grows with
            // the node (geometric, so a run of front pushes is amortized O(1)).
            let used = self.buf.len() - self.start;
            let gap = n + used / 2 + 16;
            let mut nb = Vec::with_capacity(gap + used);
            nb.resize(gap, 0);
            nb.extend_from_slice(&self.buf[self.start..]);
            self.buf = nb;
            self.start = gap;
        }
        self.start -= n;
        let s = self.start;
        encode_into(&mut self.buf[s..s + n], e);
        self.count += 1;
        self.lp += lp_entry_size(e);
    }

    fn pop_front(&mut self) -> Vec<u8> {
        let (a, b, next) = self.elem_at(self.start);
        let v = self.buf[a..b].to_vec();
        self.start = next;
        self.count -= 1;
        self.lp -= lp_entry_size(&v);
        if self.count == 0 {
            self.buf.clear();
            self.start = 0;
        } else if self.start > self.buf.len() / 2 && self.start > 64 {
            // Mostly empty at the front: give the room back to the elements' side.
            self.compact();
        }
        v
    }

    fn pop_back(&mut self) -> Vec<u8> {
        let q = self.buf.len();
        let (len, t) = read_back(&self.buf, q);
        let v = self.buf[q - t - len..q - t].to_vec();
        self.buf.truncate(q - 2 * t - len);
        self.count -= 1;
        self.lp -= lp_entry_size(&v);
        if self.count == 0 {
            self.buf.clear();
            self.start = 0;
        }
        v
    }

    /// Drops the room before the elements.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    /// Releases all spare room (a node that is no longer at an end of the list).
    fn seal(&mut self) {
        self.compact();
        if self.buf.capacity() - self.buf.len() > self.buf.len() / 16 {
            // A fresh exact-size copy, not `shrink_to_fit`: an allocator keeps a block that
            // shrinks by less than half where it is (mimalloc does), so a node doubled to
            // ~8 KiB of room for 7 KiB of elements kept its 10 KiB block (a list of 1 KB
            // elements cost 1.55x Redis's memory).
            self.buf = self.buf.as_slice().to_vec();
        }
    }

    fn insert(&mut self, i: usize, e: &[u8]) {
        if i == 0 {
            return self.push_front(e);
        }
        if i == self.count {
            return self.push_back(e);
        }
        let p = self.offset_of(i);
        let n = enc_size(e.len());
        let mut tmp = vec![0u8; n];
        encode_into(&mut tmp, e);
        self.buf.splice(p..p, tmp);
        self.count += 1;
        self.lp += lp_entry_size(e);
    }

    fn remove(&mut self, i: usize) {
        let p = self.offset_of(i);
        let (a, b, next) = self.elem_at(p);
        self.lp -= lp_entry_size(&self.buf[a..b]);
        self.buf.drain(p..next);
        self.count -= 1;
    }

    fn replace(&mut self, i: usize, e: &[u8]) {
        let p = self.offset_of(i);
        let (a, b, next) = self.elem_at(p);
        self.lp = self.lp - lp_entry_size(&self.buf[a..b]) + lp_entry_size(e);
        let mut tmp = vec![0u8; enc_size(e.len())];
        encode_into(&mut tmp, e);
        self.buf.splice(p..next, tmp);
    }

    /// Removes `n` elements starting at `i`.
    fn remove_range(&mut self, i: usize, n: usize) {
        if n == 0 {
            return;
        }
        let p = self.offset_of(i);
        let mut q = p;
        let mut lp = 0;
        for _ in 0..n {
            let (a, b, next) = self.elem_at(q);
            lp += lp_entry_size(&self.buf[a..b]);
            q = next;
        }
        self.buf.drain(p..q);
        self.count -= n;
        self.lp -= lp;
        if self.count == 0 {
            self.buf.clear();
            self.start = 0;
        }
    }

    /// Removes up to `max` elements equal to `e`, scanning from the head or the tail, in one
    /// pass over the buffer. Returns how many went.
    fn remove_eq(&mut self, e: &[u8], max: usize, from_tail: bool) -> usize {
        let mut spans = Vec::with_capacity(self.count);
        let mut p = self.start;
        for _ in 0..self.count {
            let (a, b, next) = self.elem_at(p);
            spans.push((p, next, &self.buf[a..b] == e));
            p = next;
        }
        let mut hits = 0;
        let mut drop = vec![false; spans.len()];
        let idx: Box<dyn Iterator<Item = usize>> = if from_tail {
            Box::new((0..spans.len()).rev())
        } else {
            Box::new(0..spans.len())
        };
        for i in idx {
            if hits == max {
                break;
            }
            if spans[i].2 {
                drop[i] = true;
                hits += 1;
            }
        }
        if hits == 0 {
            return 0;
        }
        let mut nb = Vec::with_capacity(self.buf.len() - self.start);
        for (i, &(a, b, _)) in spans.iter().enumerate() {
            if !drop[i] {
                nb.extend_from_slice(&self.buf[a..b]);
            }
        }
        self.lp -= hits * lp_entry_size(e);
        self.count -= hits;
        self.buf = nb;
        self.start = 0;
        hits
    }

    /// Splits off elements `[i..]` into a new node.
    fn split_off(&mut self, i: usize) -> Node {
        let p = self.offset_of(i);
        let mut other = Node::new();
        other.buf = self.buf[p..].to_vec();
        other.count = self.count - i;
        let mut q = 0;
        for _ in 0..other.count {
            let (a, b, next) = other.elem_at(q);
            other.lp += lp_entry_size(&other.buf[a..b]);
            q = next;
        }
        self.buf.truncate(p);
        self.count = i;
        self.lp -= other.lp - LP_OVERHEAD;
        other
    }

    /// Appends all of `other`'s elements.
    fn append(&mut self, other: Node) {
        self.buf.extend_from_slice(other.bytes());
        self.count += other.count;
        self.lp += other.lp - LP_OVERHEAD;
    }

    /// Redis's `_quicklistNodeAllowInsert` for an element of `len` bytes.
    fn allow_insert(&self, fill: Fill, len: usize) -> bool {
        !fill.exceeds(self.lp + len + SIZE_ESTIMATE_OVERHEAD, self.count + 1)
    }
}

/// Redis's `_quicklistNodeAllowMerge`.
fn allow_merge(a: &Node, b: &Node, fill: Fill) -> bool {
    !fill.exceeds(a.lp + b.lp - LP_OVERHEAD, a.count + b.count)
}

/// A list value.
#[derive(Clone, Debug, Default)]
pub struct List {
    nodes: VecDeque<Node>,
    len: usize,
    /// Redis's encoding: true for "quicklist" (nodes bounded by the fill), false for
    /// "listpack" (a single node, checked as a whole before each growth).
    quick: bool,
}

impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl List {
    /// See [`crate::value::Value::free_step`]: drops nodes from the back (one allocation
    /// each).
    pub(crate) fn free_step(&mut self, budget: usize) -> usize {
        let k = budget.max(1).min(self.nodes.len());
        self.nodes.truncate(self.nodes.len() - k);
        self.len = 0;
        k
    }

    pub fn new() -> List {
        List::default()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// OBJECT ENCODING's name for the current representation.
    pub fn encoding(&self) -> &'static str {
        if self.quick {
            "quicklist"
        } else {
            "listpack"
        }
    }

    /// Approximate heap bytes used.
    pub fn memory(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.nodes.iter().map(|n| n.buf.capacity()).sum::<usize>()
    }

    /// Nodes in use (for tests and DEBUG-style introspection).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Redis's growth check (`listTypeTryConvertListpack`), to call BEFORE adding `count`
    /// elements of `bytes` total length: a listpack that would pass the limit becomes a
    /// quicklist.
    pub fn grow_check(&mut self, bytes: usize, count: usize, fill: i64) {
        if self.quick {
            return;
        }
        let lp = self.nodes.front().map_or(LP_OVERHEAD, |n| n.lp);
        if Fill::new(fill).exceeds(lp.saturating_add(bytes), self.len.saturating_add(count)) {
            self.quick = true;
        }
    }

    /// Redis's shrink check (`listTypeTryConvertQuicklist` with `shrinking`), to call AFTER
    /// removing elements from a list that is still not empty: one node under half the limit
    /// becomes a listpack again.
    pub fn shrink_check(&mut self, fill: i64) {
        if !self.quick || self.nodes.len() > 1 {
            return;
        }
        let f = Fill::new(fill);
        let lp = self.nodes.front().map_or(LP_OVERHEAD, |n| n.lp);
        if lp <= f.size / 2 && self.len <= f.count / 2 {
            self.quick = false;
        }
    }

    fn fill_for_push(&self, fill: i64) -> Fill {
        if self.quick {
            Fill::new(fill)
        } else {
            // A listpack is one node whatever its size (its limit is the growth check).
            Fill {
                size: usize::MAX - 1,
                count: usize::MAX,
            }
        }
    }

    /// Pushes at the head (`left`) or tail. Call [`List::grow_check`] first.
    pub fn push(&mut self, e: &[u8], left: bool, fill: i64) {
        let f = self.fill_for_push(fill);
        let ok = if left {
            self.nodes
                .front()
                .is_some_and(|n| n.allow_insert(f, e.len()))
        } else {
            self.nodes
                .back()
                .is_some_and(|n| n.allow_insert(f, e.len()))
        };
        if !ok {
            let mut n = Node::new();
            if left {
                if let Some(old) = self.nodes.front_mut() {
                    old.seal();
                }
                n.push_front(e);
                self.nodes.push_front(n);
            } else {
                if let Some(old) = self.nodes.back_mut() {
                    old.seal();
                }
                n.push_back(e);
                self.nodes.push_back(n);
            }
        } else if left {
            self.nodes[0].push_front(e);
        } else {
            let last = self.nodes.len() - 1;
            self.nodes[last].push_back(e);
        }
        self.len += 1;
    }

    /// Pops from the head (`left`) or tail. Call [`List::shrink_check`] afterwards if the
    /// list is not empty (once per command, as Redis does).
    pub fn pop(&mut self, left: bool) -> Option<Vec<u8>> {
        let v = if left {
            let n = self.nodes.front_mut()?;
            let v = n.pop_front();
            if n.count == 0 {
                self.nodes.pop_front();
            }
            v
        } else {
            let n = self.nodes.back_mut()?;
            let v = n.pop_back();
            if n.count == 0 {
                self.nodes.pop_back();
            }
            v
        };
        self.len -= 1;
        Some(v)
    }

    /// Pops up to `count` elements, in pop order.
    pub fn pop_many(&mut self, left: bool, count: usize) -> Vec<Vec<u8>> {
        let n = count.min(self.len);
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            match self.pop(left) {
                Some(v) => out.push(v),
                None => break,
            }
        }
        out
    }

    /// The node holding element `i` and the element's index in it, found from the nearer end.
    fn locate(&self, i: usize) -> (usize, usize) {
        if i < self.len / 2 {
            let mut i = i;
            for (k, n) in self.nodes.iter().enumerate() {
                if i < n.count {
                    return (k, i);
                }
                i -= n.count;
            }
        } else {
            let mut back = self.len - i; // 1-based distance from the tail
            for (k, n) in self.nodes.iter().enumerate().rev() {
                if back <= n.count {
                    return (k, n.count - back);
                }
                back -= n.count;
            }
        }
        unreachable!("index checked against the length")
    }

    /// Resolves a Redis index (negative counts from the tail).
    pub fn index(&self, i: i64) -> Option<usize> {
        let len = self.len as i64;
        let i = if i < 0 { len.checked_add(i)? } else { i };
        (0..len).contains(&i).then_some(i as usize)
    }

    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if i >= self.len {
            return None;
        }
        let (k, j) = self.locate(i);
        Some(self.nodes[k].get(j))
    }

    /// Elements from `i` towards the tail.
    pub fn iter_from(&self, i: usize) -> Iter<'_> {
        if i >= self.len {
            return Iter {
                list: self,
                node: self.nodes.len(),
                pos: 0,
                left: 0,
            };
        }
        let (k, j) = self.locate(i);
        Iter {
            list: self,
            node: k,
            pos: self.nodes[k].offset_of(j),
            left: self.len - i,
        }
    }

    /// [`List::iter_from`] for a reader that comes back for the next elements (a streamed
    /// LRANGE): `seek` remembers the node the last call started in and the index of that
    /// node's first element, so a call walks on from there over a few nodes instead of from an
    /// end of the list over up to half of them (a 10M-element list has ~50,000 nodes). A
    /// `seek` that does not fit (default, or `i` before it) falls back to `iter_from`'s walk.
    /// The list must not have changed since the last call with this `seek` (streams pin it).
    pub fn iter_from_near(&self, i: usize, seek: &mut ListSeek) -> Iter<'_> {
        if i >= self.len {
            return self.iter_from(i);
        }
        let (mut k, mut first) = (seek.node, seek.first);
        if first <= i {
            while k < self.nodes.len() && i >= first + self.nodes[k].count {
                first += self.nodes[k].count;
                k += 1;
            }
        }
        if k >= self.nodes.len() || first > i {
            // No usable seek: walk from the nearer end.
            let (node, j) = self.locate(i);
            (k, first) = (node, i - j);
        }
        *seek = ListSeek { node: k, first };
        Iter {
            list: self,
            node: k,
            pos: self.nodes[k].offset_of(i - first),
            left: self.len - i,
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// Elements from `i` towards the head.
    pub fn iter_rev_from(&self, i: usize) -> RevIter<'_> {
        if i >= self.len {
            return RevIter {
                list: self,
                node: 0,
                pos: 0,
                left: 0,
            };
        }
        let (k, j) = self.locate(i);
        let n = &self.nodes[k];
        RevIter {
            list: self,
            node: k,
            pos: n.elem_at(n.offset_of(j)).2,
            left: i + 1,
        }
    }

    pub fn iter_rev(&self) -> RevIter<'_> {
        self.iter_rev_from(self.len.saturating_sub(1))
    }

    /// Replaces element `i` (in range), in its node whatever the node's size afterwards (as
    /// Redis 7.2's `quicklistReplaceEntry` does below its 1 GiB "plain node" threshold). Call
    /// [`List::grow_check`] before (LSET does, even for an index out of range) and
    /// [`List::shrink_check`] after.
    pub fn set(&mut self, i: usize, e: &[u8]) {
        let (k, j) = self.locate(i);
        self.nodes[k].replace(j, e);
    }

    /// Inserts `e` before (or, with `after`, after) element `pivot` (in range), with Redis's
    /// rules for where it goes when the node is full (`_quicklistInsert`): into the node, at
    /// the end of the neighbour, in a new node, or into a split of the node. Call
    /// [`List::grow_check`] first.
    pub fn insert(&mut self, pivot: usize, e: &[u8], after: bool, fill: i64) {
        let f = self.fill_for_push(fill);
        let (k, j) = self.locate(pivot);
        let full = !self.nodes[k].allow_insert(f, e.len());
        let count = self.nodes[k].count;
        if !full {
            self.nodes[k].insert(if after { j + 1 } else { j }, e);
        } else if after && j + 1 == count {
            if k + 1 < self.nodes.len() && self.nodes[k + 1].allow_insert(f, e.len()) {
                self.nodes[k + 1].push_front(e);
            } else {
                let mut n = Node::new();
                n.push_back(e);
                self.nodes.insert(k + 1, n);
            }
        } else if !after && j == 0 {
            if k > 0 && self.nodes[k - 1].allow_insert(f, e.len()) {
                self.nodes[k - 1].push_back(e);
            } else {
                let mut n = Node::new();
                n.push_back(e);
                self.nodes.insert(k, n);
            }
        } else if after {
            // Split: the node keeps [0..=j]; [j+1..] goes to a new node after it, headed by e.
            let tail = self.nodes[k].split_off(j + 1);
            let mut n = Node::new();
            n.push_back(e);
            n.append(tail);
            self.nodes.insert(k + 1, n);
            self.merge_around(k, f);
        } else {
            // Split: [0..j) and then e go to a new node before the node, which keeps [j..].
            let tail = self.nodes[k].split_off(j);
            let mut head = std::mem::replace(&mut self.nodes[k], tail);
            head.push_back(e);
            self.nodes.insert(k, head);
            self.merge_around(k + 1, f);
        }
        self.len += 1;
    }

    /// Redis's `_quicklistMergeNodes` around node `c`.
    fn merge_around(&mut self, c: usize, f: Fill) {
        let mut c = c;
        // prev_prev + prev
        if c >= 2 && allow_merge(&self.nodes[c - 2], &self.nodes[c - 1], f) {
            let b = self.nodes.remove(c - 1).expect("in range");
            self.nodes[c - 2].append(b);
            c -= 1;
        }
        // next + next_next
        if c + 2 < self.nodes.len() && allow_merge(&self.nodes[c + 1], &self.nodes[c + 2], f) {
            let b = self.nodes.remove(c + 2).expect("in range");
            self.nodes[c + 1].append(b);
        }
        // prev + center
        if c >= 1 && allow_merge(&self.nodes[c - 1], &self.nodes[c], f) {
            let b = self.nodes.remove(c).expect("in range");
            self.nodes[c - 1].append(b);
            c -= 1;
        }
        // center (or the merge result) + next
        if c + 1 < self.nodes.len() && allow_merge(&self.nodes[c], &self.nodes[c + 1], f) {
            let b = self.nodes.remove(c + 1).expect("in range");
            self.nodes[c].append(b);
        }
    }

    /// Removes element `i` (in range). Empty nodes go away; nodes are not merged (as in
    /// Redis, which keeps the layout of a list that shrinks).
    pub fn remove_at(&mut self, i: usize) {
        let (k, j) = self.locate(i);
        self.nodes[k].remove(j);
        if self.nodes[k].count == 0 {
            self.nodes.remove(k);
        }
        self.len -= 1;
    }

    /// LREM: removes up to `count` elements equal to `e` (0: all), from the head or, when
    /// `from_tail`, from the tail. Returns how many went.
    pub fn remove_eq(&mut self, e: &[u8], count: usize, from_tail: bool) -> usize {
        let mut removed = 0;
        let order: Vec<usize> = if from_tail {
            (0..self.nodes.len()).rev().collect()
        } else {
            (0..self.nodes.len()).collect()
        };
        for k in order {
            let budget = if count == 0 {
                usize::MAX
            } else {
                count - removed
            };
            if budget == 0 {
                break;
            }
            removed += self.nodes[k].remove_eq(e, budget, from_tail);
        }
        self.nodes.retain(|n| n.count > 0);
        self.len -= removed;
        removed
    }

    /// Removes `left` elements from the head and `right` from the tail (LTRIM).
    pub fn trim(&mut self, left: usize, right: usize) {
        self.remove_front(left);
        self.remove_back(right);
    }

    fn remove_front(&mut self, mut n: usize) {
        n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let front = self.nodes.front_mut().expect("counted");
            if front.count <= n {
                n -= front.count;
                self.nodes.pop_front();
            } else {
                front.remove_range(0, n);
                n = 0;
            }
        }
    }

    fn remove_back(&mut self, mut n: usize) {
        n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let back = self.nodes.back_mut().expect("counted");
            if back.count <= n {
                n -= back.count;
                self.nodes.pop_back();
            } else {
                let c = back.count;
                back.remove_range(c - n, n);
                n = 0;
            }
        }
    }

    #[cfg(test)]
    fn check(&self) {
        let mut total = 0;
        for n in &self.nodes {
            assert!(n.count > 0, "empty node");
            let mut p = n.start;
            let mut lp = LP_OVERHEAD;
            for _ in 0..n.count {
                let (a, b, next) = n.elem_at(p);
                lp += lp_entry_size(&n.buf[a..b]);
                p = next;
            }
            assert_eq!(p, n.buf.len());
            assert_eq!(lp, n.lp);
            total += n.count;
        }
        assert_eq!(total, self.len);
        if !self.quick {
            assert!(self.nodes.len() <= 1);
        }
    }
}

/// Forward iterator over a list's elements.
/// Where [`List::iter_from_near`] starts its walk: a node and the index of its first element.
#[derive(Clone, Copy, Debug, Default)]
pub struct ListSeek {
    node: usize,
    first: usize,
}

pub struct Iter<'a> {
    list: &'a List,
    node: usize,
    pos: usize,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let mut n = &self.list.nodes[self.node];
        if self.pos >= n.buf.len() {
            self.node += 1;
            n = &self.list.nodes[self.node];
            self.pos = n.start;
        }
        let (a, b, next) = n.elem_at(self.pos);
        self.pos = next;
        self.left -= 1;
        Some(&n.buf[a..b])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// Backward iterator over a list's elements.
pub struct RevIter<'a> {
    list: &'a List,
    node: usize,
    /// End of the next element to return.
    pos: usize,
    left: usize,
}

impl<'a> Iterator for RevIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let mut n = &self.list.nodes[self.node];
        if self.pos <= n.start {
            self.node -= 1;
            n = &self.list.nodes[self.node];
            self.pos = n.buf.len();
        }
        let (len, t) = read_back(&n.buf, self.pos);
        let v = &n.buf[self.pos - t - len..self.pos - t];
        self.pos -= 2 * t + len;
        self.left -= 1;
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn push_all(l: &mut List, items: &[&[u8]], left: bool, fill: i64) {
        let bytes = items.iter().map(|i| i.len()).sum();
        l.grow_check(bytes, items.len(), fill);
        for i in items {
            l.push(i, left, fill);
        }
    }

    #[test]
    fn lp_sizes_follow_listpack() {
        assert_eq!(lp_entry_size(b"1"), 2);
        assert_eq!(lp_entry_size(b"127"), 2);
        assert_eq!(lp_entry_size(b"128"), 3);
        assert_eq!(lp_entry_size(b"-4096"), 3);
        assert_eq!(lp_entry_size(b"40000"), 5);
        assert_eq!(lp_entry_size(b"9223372036854775807"), 10);
        assert_eq!(lp_entry_size(b"01"), 4);
        assert_eq!(lp_entry_size(b"-0"), 4);
        assert_eq!(lp_entry_size(b"a"), 3);
        assert_eq!(lp_entry_size(&[b'x'; 63]), 65);
        assert_eq!(lp_entry_size(&[b'x'; 64]), 67);
        assert_eq!(lp_entry_size(&[b'x'; 200]), 204);
        assert_eq!(lp_entry_size(&[b'x'; 4096]), 4096 + 5 + 2);
    }

    #[test]
    fn fill_follows_quicklist_node_limit() {
        assert_eq!(Fill::new(-1).size, 4096);
        assert_eq!(Fill::new(-2).size, 8192);
        assert_eq!(Fill::new(-5).size, 65536);
        assert_eq!(Fill::new(i64::MIN).size, 65536);
        assert_eq!(Fill::new(0).count, 1);
        assert_eq!(Fill::new(128).count, 128);
        assert_eq!(Fill::new(i64::MAX).count, u32::MAX as usize);
        // A count-limited node still stops at 8 KiB.
        assert!(Fill::new(1000).exceeds(8193, 1));
        assert!(!Fill::new(1000).exceeds(8192, 1000));
        assert!(Fill::new(1000).exceeds(100, 1001));
        let mut l = List::new();
        assert_eq!(l.pop(true), None);
        assert_eq!(l.get(0), None);
        assert_eq!(l.iter_from(5).next(), None);
        assert_eq!(l.iter_rev().next(), None);
        push_all(&mut l, &[b"a"], false, 0);
        assert_eq!(l.index(i64::MIN), None);
        assert_eq!(l.index(-1), Some(0));
        assert_eq!(l.iter_rev_from(3).next(), None);
    }

    #[test]
    fn encodings_follow_redis_72() {
        // Count limit 4: listpack up to 4 entries, quicklist beyond; back at <= 2.
        let mut l = List::new();
        push_all(&mut l, &[b"a", b"b", b"c", b"d"], false, 4);
        assert_eq!(l.encoding(), "listpack");
        push_all(&mut l, &[b"e"], false, 4);
        assert_eq!(l.encoding(), "quicklist");
        assert_eq!(l.node_count(), 2);
        l.pop(true);
        l.shrink_check(4);
        assert_eq!(l.encoding(), "quicklist");
        l.pop(true);
        l.pop(true);
        l.pop(true);
        l.shrink_check(4);
        assert_eq!(l.encoding(), "listpack");
        l.check();
        // Size limit 8 KiB: 7 + sum of lengths decides the growth.
        let mut l = List::new();
        let big = vec![b'x'; 8185];
        push_all(&mut l, &[&big], true, -2);
        assert_eq!(l.encoding(), "listpack");
        push_all(&mut l, &[b""], true, -2);
        assert_eq!(l.encoding(), "quicklist");
    }

    #[test]
    fn binary_and_big_elements_round_trip() {
        let mut l = List::new();
        let items: Vec<Vec<u8>> = vec![
            vec![],
            vec![0, 0x80, 0xff],
            vec![7u8; 127],
            vec![9u8; 128],
            vec![1u8; 70_000],
        ];
        for i in &items {
            l.grow_check(i.len(), 1, -1);
            l.push(i, false, -1);
        }
        l.check();
        assert_eq!(l.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), items);
        let mut rev = items.clone();
        rev.reverse();
        assert_eq!(l.iter_rev().map(<[u8]>::to_vec).collect::<Vec<_>>(), rev);
    }

    #[test]
    fn memory_is_a_few_bytes_per_small_element() {
        let mut l = List::new();
        for i in 0..100_000u32 {
            let v = format!("v{i:07}");
            l.grow_check(v.len(), 1, -2);
            l.push(v.as_bytes(), i % 2 == 0, -2);
        }
        l.check();
        let per = l.memory() as f64 / 100_000.0;
        assert!(per < 8.0 + 4.0, "{per} bytes per 8-byte element");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(bool, Vec<u8>),
        Pop(bool, usize),
        Set(i64, Vec<u8>),
        Insert(usize, bool, Vec<u8>),
        RemoveAt(usize),
        RemoveEq(Vec<u8>, usize, bool),
        Trim(usize, usize),
    }

    fn elem() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => prop::collection::vec(b'a'..b'd', 0..3),
            2 => (0i64..300).prop_map(|i| i.to_string().into_bytes()),
            1 => prop::collection::vec(any::<u8>(), 0..300),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (any::<bool>(), elem()).prop_map(|(l, e)| Op::Push(l, e)),
            2 => (any::<bool>(), 0usize..5).prop_map(|(l, n)| Op::Pop(l, n)),
            2 => (-40i64..40, elem()).prop_map(|(i, e)| Op::Set(i, e)),
            3 => (0usize..100, any::<bool>(), elem()).prop_map(|(i, a, e)| Op::Insert(i, a, e)),
            1 => (0usize..100).prop_map(Op::RemoveAt),
            1 => (elem(), 0usize..3, any::<bool>()).prop_map(|(e, c, t)| Op::RemoveEq(e, c, t)),
            1 => (0usize..3, 0usize..3).prop_map(|(a, b)| Op::Trim(a, b)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(100))]
        #[test]
        fn reads_that_come_back_see_what_iter_from_sees(
            fill in prop_oneof![Just(1i64), Just(3), Just(-1)],
            len in 0usize..600,
            starts in prop::collection::vec((0usize..700, 1usize..40), 1..30),
        ) {
            let mut l = List::new();
            for i in 0..len {
                let e = format!("e{i}");
                l.grow_check(e.len(), 1, fill);
                l.push(e.as_bytes(), false, fill);
            }
            // Forward steps (as a stream takes them) and arbitrary jumps, one seek for all.
            let mut seek = ListSeek::default();
            let mut at = 0;
            for (jump, take) in starts {
                for i in [at, jump] {
                    let near: Vec<&[u8]> = l.iter_from_near(i, &mut seek).take(take).collect();
                    let far: Vec<&[u8]> = l.iter_from(i).take(take).collect();
                    prop_assert_eq!(near, far, "from {}", i);
                }
                at += take;
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn behaves_like_a_vecdeque(
            fill in prop_oneof![Just(1i64), Just(3), Just(8), Just(-1)],
            ops in prop::collection::vec(op(), 1..200),
        ) {
            let mut l = List::new();
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            for o in ops {
                match o {
                    Op::Push(left, e) => {
                        l.grow_check(e.len(), 1, fill);
                        l.push(&e, left, fill);
                        if left { m.push_front(e) } else { m.push_back(e) }
                    }
                    Op::Pop(left, n) => {
                        let got = l.pop_many(left, n);
                        let want: Vec<Vec<u8>> = (0..n)
                            .filter_map(|_| if left { m.pop_front() } else { m.pop_back() })
                            .collect();
                        prop_assert_eq!(got, want);
                        if !l.is_empty() { l.shrink_check(fill) }
                    }
                    Op::Set(i, e) => {
                        l.grow_check(e.len(), 1, fill);
                        if let Some(i) = l.index(i) {
                            l.set(i, &e);
                            m[i] = e;
                            l.shrink_check(fill);
                        }
                    }
                    Op::Insert(i, after, e) => {
                        l.grow_check(e.len(), 1, fill);
                        if !m.is_empty() {
                            let i = i % m.len();
                            l.insert(i, &e, after, fill);
                            m.insert(if after { i + 1 } else { i }, e);
                        }
                    }
                    Op::RemoveAt(i) => {
                        if !m.is_empty() {
                            let i = i % m.len();
                            l.remove_at(i);
                            m.remove(i);
                        }
                    }
                    Op::RemoveEq(e, c, tail) => {
                        let n = l.remove_eq(&e, c, tail);
                        let mut removed = 0;
                        let idx: Vec<usize> = if tail { (0..m.len()).rev().collect() } else { (0..m.len()).collect() };
                        let mut keep = vec![true; m.len()];
                        for i in idx {
                            if c != 0 && removed == c { break; }
                            if m[i] == e { keep[i] = false; removed += 1; }
                        }
                        let mut k = keep.into_iter();
                        m.retain(|_| k.next().unwrap());
                        prop_assert_eq!(n, removed);
                    }
                    Op::Trim(a, b) => {
                        l.trim(a, b);
                        for _ in 0..a { m.pop_front(); }
                        for _ in 0..b { m.pop_back(); }
                    }
                }
                l.check();
                prop_assert_eq!(l.len(), m.len());
                if fill > 0 && l.encoding() == "quicklist" {
                    for n in &l.nodes { prop_assert!(n.count <= fill as usize); }
                }
            }
            let all: Vec<Vec<u8>> = l.iter().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(&all, &m.iter().cloned().collect::<Vec<_>>());
            let rev: Vec<Vec<u8>> = l.iter_rev().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(rev, m.iter().rev().cloned().collect::<Vec<_>>());
            for (i, v) in m.iter().enumerate() {
                prop_assert_eq!(l.get(i), Some(&v[..]));
                prop_assert_eq!(l.iter_from(i).next(), Some(&v[..]));
                prop_assert_eq!(l.iter_rev_from(i).count(), i + 1);
            }
        }
    }
}
