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
//! - compression (`list-compress-depth` d > 0, Redis's quicklist rule): the d nodes at each end
//!   stay plain, every node between them is kept LZF-compressed ([`crate::lzf`]) when its bytes
//!   are at least `MIN_COMPRESS_BYTES` and compression saves more than `MIN_COMPRESS_IMPROVE`.
//!   The ends, where pushes and pops happen, are never compressed; an inner node is
//!   decompressed to be edited and compressed again after, and readers decompress a copy of
//!   the node they are in (one node at a time: a streamed LRANGE stays bounded per step).
//! - big elements (Redis's "plain nodes"): in a quicklist, an element of at least the packed
//!   threshold (1 GiB, `DEBUG QUICKLIST-PACKED-THRESHOLD`) gets a node of its own that nothing
//!   joins, with Redis 7.2's rules for pushes, inserts and LSET.
//!
//! Complexity: push/pop at either end O(1) amortized; index access O(nodes + node size),
//! walking from the nearer end of the list and of the node; LRANGE O(start offset + count);
//! middle insertion/removal O(nodes + node size).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::lzf;

/// One element as a reader sees it: borrowed from a plain node, copied out of a compressed one.
pub type Elem<'a> = Cow<'a, [u8]>;

/// Redis's MIN_COMPRESS_BYTES: a smaller node is not worth compressing.
const MIN_COMPRESS_BYTES: usize = 48;
/// Redis's MIN_COMPRESS_IMPROVE: compression must save more than this many bytes.
const MIN_COMPRESS_IMPROVE: usize = 8;
/// Redis's COMPRESS_MAX (16 bits of depth).
const COMPRESS_MAX: usize = (1 << 16) - 1;
/// Redis's default packed threshold: elements from 1 GiB on get a node of their own.
const PACKED_THRESHOLD_DEFAULT: usize = 1 << 30;

/// The size from which an element goes into a plain node (process-wide, as Redis's static).
static PACKED_THRESHOLD: AtomicUsize = AtomicUsize::new(PACKED_THRESHOLD_DEFAULT);

/// DEBUG QUICKLIST-PACKED-THRESHOLD (Redis's `quicklistSetPackedThreshold`): 0 restores the
/// default; above 4 GiB - 1 MiB is refused (false).
pub fn set_packed_threshold(sz: u64) -> bool {
    if sz > (1u64 << 32) - (1 << 20) {
        return false;
    }
    let sz = if sz == 0 {
        PACKED_THRESHOLD_DEFAULT
    } else {
        sz as usize
    };
    PACKED_THRESHOLD.store(sz, Ordering::Relaxed);
    true
}

#[cfg(test)]
thread_local! {
    /// A unit test's own threshold: tests run on parallel threads, the static is shared.
    static TEST_THRESHOLD: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Redis's `isLargeElement`.
fn is_large(len: usize) -> bool {
    #[cfg(test)]
    if let Some(t) = TEST_THRESHOLD.with(std::cell::Cell::get) {
        return len >= t;
    }
    len >= PACKED_THRESHOLD.load(Ordering::Relaxed)
}

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
pub(crate) fn lp_entry_size(s: &[u8]) -> usize {
    match lp_int(s) {
        Some(v) => lp_int_entry_size(v),
        None => lp_str_entry_size(s.len()),
    }
}

/// Bytes of a listpack element holding the integer `v` (1 to 9 bytes, and the back-length).
pub(crate) fn lp_int_entry_size(v: i64) -> usize {
    1 + match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        _ if i16::try_from(v).is_ok() => 3,
        _ if (-(1 << 23)..(1 << 23)).contains(&v) => 4,
        _ if i32::try_from(v).is_ok() => 5,
        _ => 9,
    }
}

/// Bytes of a listpack element holding a string of `l` bytes.
fn lp_str_entry_size(l: usize) -> usize {
    let enc = if l < 64 {
        1 + l
    } else if l < 4096 {
        2 + l
    } else {
        5 + l
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

/// One node: a run of encoded elements in `buf[start..]`, or, when `zlen > 0`, those
/// elements' `zlen` bytes LZF-compressed in `buf` (and `start` 0). Only [`List`] compresses
/// nodes; every `Node` method but `pack`/`unpack`/`unpacked` expects a plain one.
#[derive(Clone, Debug, Default)]
struct Node {
    buf: Vec<u8>,
    start: usize,
    count: usize,
    /// The size of this node as a Redis listpack (decides splits and encodings).
    lp: usize,
    /// Bytes of the elements when compressed, 0 when not.
    zlen: usize,
    /// Redis's plain node: one big element that no other element joins.
    plain: bool,
}

impl Node {
    fn new() -> Node {
        Node {
            lp: LP_OVERHEAD,
            ..Node::default()
        }
    }

    fn bytes(&self) -> &[u8] {
        debug_assert_eq!(self.zlen, 0);
        &self.buf[self.start..]
    }

    fn compressed(&self) -> bool {
        self.zlen > 0
    }

    /// Bytes of the elements, compressed or not.
    fn raw_len(&self) -> usize {
        if self.compressed() {
            self.zlen
        } else {
            self.buf.len() - self.start
        }
    }

    /// Redis's `node->sz`: the listpack's bytes, or a plain node's element length.
    fn redis_size(&self) -> usize {
        if !self.plain {
            return self.lp;
        }
        // raw = len + 2 * varint_len(len), which grows with len: one h fits.
        let raw = self.raw_len();
        (1..=10)
            .map(|h| raw.saturating_sub(2 * h))
            .find(|&l| enc_size(l) == raw)
            .unwrap_or(raw)
    }

    /// Compresses the node if that pays (Redis's `__quicklistCompressNode` rule, applied to
    /// this node's own bytes). Returns whether it is compressed.
    fn pack(&mut self) -> bool {
        if self.compressed() {
            return true;
        }
        let raw = &self.buf[self.start..];
        if raw.len() < MIN_COMPRESS_BYTES {
            return false;
        }
        // Worth it only when compressed + MIN_COMPRESS_IMPROVE < raw.
        match lzf::compress(raw, raw.len() - MIN_COMPRESS_IMPROVE - 1) {
            Some(z) => {
                self.zlen = raw.len();
                // An exact-size block (see `seal`).
                self.buf = z.as_slice().to_vec();
                self.start = 0;
                true
            }
            None => false,
        }
    }

    /// A plain copy of a compressed node (for readers, which cannot change the list).
    fn unpacked(&self) -> Node {
        let mut buf = Vec::new();
        lzf::decompress_into(&self.buf, self.zlen, &mut buf)
            .expect("a node this list compressed itself");
        Node {
            buf,
            start: 0,
            zlen: 0,
            ..*self
        }
    }

    /// Decompresses the node in place (before an edit).
    fn unpack(&mut self) {
        if self.compressed() {
            *self = self.unpacked();
        }
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
        !self.plain && !fill.exceeds(self.lp + len + SIZE_ESTIMATE_OVERHEAD, self.count + 1)
    }
}

/// Redis's `_quicklistNodeAllowMerge`.
fn allow_merge(a: &Node, b: &Node, fill: Fill) -> bool {
    !a.plain && !b.plain && !fill.exceeds(a.lp + b.lp - LP_OVERHEAD, a.count + b.count)
}

/// A list value.
#[derive(Clone, Debug, Default)]
pub struct List {
    nodes: VecDeque<Node>,
    len: usize,
    /// Redis's encoding: true for "quicklist" (nodes bounded by the fill), false for
    /// "listpack" (a single node, checked as a whole before each growth).
    quick: bool,
    /// `list-compress-depth` when the list became a quicklist (Redis keeps it in the
    /// quicklist from then on): nodes `[depth, nodes - depth)` are kept compressed.
    depth: usize,
}

/// What DEBUG OBJECT shows of a quicklist (Redis's `ql_*` fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuicklistInfo {
    pub nodes: usize,
    pub len: usize,
    /// Whether the list compresses its inner nodes (depth > 0).
    pub compressed: bool,
    /// Redis's bytes of all nodes uncompressed (listpack sizes, a plain node's element).
    pub uncompressed_size: usize,
    /// Nodes now compressed and the bytes they take (not in Redis's line).
    pub compressed_nodes: usize,
    pub compressed_bytes: usize,
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

    /// DEBUG OBJECT's quicklist fields (None for a listpack).
    pub fn quicklist_info(&self) -> Option<QuicklistInfo> {
        if !self.quick {
            return None;
        }
        let packed = self.nodes.iter().filter(|n| n.compressed());
        Some(QuicklistInfo {
            nodes: self.nodes.len(),
            len: self.len,
            compressed: self.depth != 0,
            uncompressed_size: self.nodes.iter().map(Node::redis_size).sum(),
            compressed_nodes: packed.clone().count(),
            compressed_bytes: packed.map(|n| n.buf.len()).sum(),
        })
    }

    /// Redis's growth check (`listTypeTryConvertListpack`), to call BEFORE adding `count`
    /// elements of `bytes` total length: a listpack that would pass the limit becomes a
    /// quicklist, which keeps `depth` (`list-compress-depth`) as its compression depth.
    pub fn grow_check(&mut self, bytes: usize, count: usize, fill: i64, depth: usize) {
        if self.quick {
            return;
        }
        let lp = self.nodes.front().map_or(LP_OVERHEAD, |n| n.lp);
        if Fill::new(fill).exceeds(lp.saturating_add(bytes), self.len.saturating_add(count)) {
            self.quick = true;
            self.depth = depth.min(COMPRESS_MAX);
        }
    }

    /// A list of `items` in order as Redis 7.2 loads one (RESTORE, a snapshot): a listpack
    /// when the elements fit one node within the `fill` limit, judged on their exact listpack
    /// size and count (Redis loads the payload's nodes, then `listTypeTryConversion` makes a
    /// single node within the limit a listpack: a listpack it wrote comes back as one), else a
    /// quicklist whose nodes fill as pushes fill them, compressed past `depth`.
    pub fn from_loaded<'a, I>(items: I, fill: i64, depth: usize) -> List
    where
        I: IntoIterator<Item = &'a [u8]>,
        I::IntoIter: Clone,
    {
        let items = items.into_iter();
        let (size, count) = items.clone().fold((LP_OVERHEAD, 0usize), |(s, n), e| {
            (s.saturating_add(lp_entry_size(e)), n + 1)
        });
        let mut l = List::new();
        if Fill::new(fill).exceeds(size, count) {
            l.quick = true;
            l.depth = depth.min(COMPRESS_MAX);
        }
        for e in items {
            l.push(e, false, fill);
        }
        l
    }

    /// Redis's shrink check (`listTypeTryConvertQuicklist` with `shrinking`), to call AFTER
    /// removing elements from a list that is still not empty: one node under half the limit
    /// becomes a listpack again (not a plain node).
    pub fn shrink_check(&mut self, fill: i64) {
        if !self.quick || self.nodes.len() > 1 || self.nodes.front().is_some_and(|n| n.plain) {
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

    /// Whether `k` is an inner node, which compression keeps compressed.
    fn is_inner(&self, k: usize) -> bool {
        self.depth > 0 && k >= self.depth && k + self.depth < self.nodes.len()
    }

    /// Puts node `k` in the state compression wants.
    fn fix(&mut self, k: usize) {
        if self.is_inner(k) {
            self.nodes[k].pack();
        } else {
            self.nodes[k].unpack();
        }
    }

    /// After a change in the node layout (Redis's `__quicklistCompress`): the nodes near both
    /// ends, and those within 2 of `around` (an edited node), get the state their place
    /// wants (whether a node is inner depends on its distance to the nearer end, which a change
    /// moves across `depth` only for nodes this close to an end). A node compresses when it becomes inner, not on every push to an end node.
    fn settle(&mut self, around: Option<usize>) {
        if self.depth == 0 {
            return;
        }
        // Depth + 2 from each end: an insertion adds at most two nodes at once.
        let n = self.nodes.len();
        let e = (self.depth + 2).min(n);
        for k in 0..e {
            self.fix(k);
        }
        for k in n - e..n {
            self.fix(k);
        }
        if let Some(c) = around {
            for k in c.saturating_sub(2)..(c + 3).min(n) {
                self.fix(k);
            }
        }
    }

    /// A new node holding `e` alone (a plain node when `e` is large).
    fn single(e: &[u8], plain: bool) -> Node {
        let mut n = Node::new();
        n.push_back(e);
        n.plain = plain;
        n
    }

    /// Pushes at the head (`left`) or tail. Call [`List::grow_check`] first.
    pub fn push(&mut self, e: &[u8], left: bool, fill: i64) {
        let f = self.fill_for_push(fill);
        let large = self.quick && is_large(e.len());
        let ok = !large
            && if left {
                self.nodes
                    .front()
                    .is_some_and(|n| n.allow_insert(f, e.len()))
            } else {
                self.nodes
                    .back()
                    .is_some_and(|n| n.allow_insert(f, e.len()))
            };
        if !ok {
            let n = List::single(e, large);
            if left {
                if let Some(old) = self.nodes.front_mut() {
                    old.seal();
                }
                self.nodes.push_front(n);
            } else {
                if let Some(old) = self.nodes.back_mut() {
                    old.seal();
                }
                self.nodes.push_back(n);
            }
            self.settle(None);
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
                self.settle(None);
            }
            v
        } else {
            let n = self.nodes.back_mut()?;
            let v = n.pop_back();
            if n.count == 0 {
                self.nodes.pop_back();
                self.settle(None);
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

    pub fn get(&self, i: usize) -> Option<Elem<'_>> {
        if i >= self.len {
            return None;
        }
        let (k, j) = self.locate(i);
        let n = &self.nodes[k];
        Some(if n.compressed() {
            Cow::Owned(n.unpacked().get(j).to_vec())
        } else {
            Cow::Borrowed(n.get(j))
        })
    }

    /// A reader's view of node `k`: a decompressed copy when it is compressed.
    fn open(&self, k: usize) -> Option<Node> {
        let n = &self.nodes[k];
        n.compressed().then(|| n.unpacked())
    }

    /// An iterator from element `j` of node `k`, for `left` elements.
    fn iter_at(&self, k: usize, j: usize, left: usize) -> Iter<'_> {
        let open = self.open(k);
        let pos = open.as_ref().unwrap_or(&self.nodes[k]).offset_of(j);
        Iter {
            list: self,
            node: k,
            pos,
            left,
            open,
        }
    }

    /// Elements from `i` towards the tail.
    pub fn iter_from(&self, i: usize) -> Iter<'_> {
        if i >= self.len {
            return Iter {
                list: self,
                node: self.nodes.len(),
                pos: 0,
                left: 0,
                open: None,
            };
        }
        let (k, j) = self.locate(i);
        self.iter_at(k, j, self.len - i)
    }

    /// [`List::iter_from`] for a reader that comes back for the next elements (a streamed
    /// LRANGE): `seek` remembers the node the last call started in and the index of that
    /// node's first element, so a call walks on from there over a few nodes instead of from an
    /// end of the list over up to half of them (a 10M-element list has ~50,000 nodes). A
    /// `seek` that does not fit (default, or `i` before it) falls back to `iter_from`'s walk.
    /// The list must not have changed since the last call with this `seek` (streams pin it).
    /// A call decompresses at most the nodes it reads (one at a time).
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
        self.iter_at(k, i - first, self.len - i)
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
                open: None,
            };
        }
        let (k, j) = self.locate(i);
        let open = self.open(k);
        let n = open.as_ref().unwrap_or(&self.nodes[k]);
        let pos = n.elem_at(n.offset_of(j)).2;
        RevIter {
            list: self,
            node: k,
            pos,
            left: i + 1,
            open,
        }
    }

    pub fn iter_rev(&self) -> RevIter<'_> {
        self.iter_rev_from(self.len.saturating_sub(1))
    }

    /// Replaces element `i` (in range), in its node whatever the node's size afterwards (as
    /// Redis 7.2's `quicklistReplaceEntry` does), except where a plain node is involved: a
    /// large element replacing a packed one gets a plain node of its own, a small one
    /// replacing a plain node goes where an insertion after it would. Call
    /// [`List::grow_check`] before (LSET does, even for an index out of range) and
    /// [`List::shrink_check`] after.
    pub fn set(&mut self, i: usize, e: &[u8], fill: i64) {
        let (k, j) = self.locate(i);
        let large = self.quick && is_large(e.len());
        let plain = self.nodes[k].plain;
        if plain == large {
            // In place: a packed element by a packed one, a plain node's by another large one.
            self.nodes[k].unpack();
            self.nodes[k].replace(j, e);
            self.settle(Some(k));
        } else {
            // Insert the new value after the old one, then drop the old one.
            self.insert(i, e, true, fill);
            self.remove_at(i);
        }
    }

    /// Inserts `e` before (or, with `after`, after) element `pivot` (in range), with Redis's
    /// rules for where it goes when the node is full (`_quicklistInsert`): into the node, at
    /// the end of the neighbour, in a new node, or into a split of the node; a large element
    /// gets a plain node next to the node, or between the two halves of a split. Call
    /// [`List::grow_check`] first.
    pub fn insert(&mut self, pivot: usize, e: &[u8], after: bool, fill: i64) {
        let f = self.fill_for_push(fill);
        let (k, j) = self.locate(pivot);
        self.nodes[k].unpack();
        let count = self.nodes[k].count;
        let at_tail = after && j + 1 == count;
        let at_head = !after && j == 0;
        if self.quick && is_large(e.len()) {
            if self.nodes[k].plain || at_tail || at_head {
                self.nodes
                    .insert(if after { k + 1 } else { k }, List::single(e, true));
            } else {
                // Split around the pivot: [..s), the plain node, [s..].
                let s = if after { j + 1 } else { j };
                let tail = self.nodes[k].split_off(s);
                self.nodes.insert(k + 1, List::single(e, true));
                self.nodes.insert(k + 2, tail);
            }
            self.len += 1;
            self.settle(Some(k));
            return;
        }
        let full = !self.nodes[k].allow_insert(f, e.len());
        if !full {
            self.nodes[k].insert(if after { j + 1 } else { j }, e);
        } else if at_tail {
            if k + 1 < self.nodes.len() && self.nodes[k + 1].allow_insert(f, e.len()) {
                self.nodes[k + 1].unpack();
                self.nodes[k + 1].push_front(e);
            } else {
                self.nodes.insert(k + 1, List::single(e, false));
            }
        } else if at_head {
            if k > 0 && self.nodes[k - 1].allow_insert(f, e.len()) {
                self.nodes[k - 1].unpack();
                self.nodes[k - 1].push_back(e);
            } else {
                self.nodes.insert(k, List::single(e, false));
            }
        } else if after {
            // Split: the node keeps [0..=j]; [j+1..] goes to a new node after it, headed by e.
            let tail = self.nodes[k].split_off(j + 1);
            let mut n = List::single(e, false);
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
        self.settle(Some(k));
    }

    /// Appends node `b` to node `a` (its left neighbour), both decompressed.
    fn merge_into(&mut self, a: usize, b: usize) {
        let mut nb = self.nodes.remove(b).expect("in range");
        nb.unpack();
        self.nodes[a].unpack();
        self.nodes[a].append(nb);
    }

    /// Redis's `_quicklistMergeNodes` around node `c`.
    fn merge_around(&mut self, c: usize, f: Fill) {
        let mut c = c;
        // prev_prev + prev
        if c >= 2 && allow_merge(&self.nodes[c - 2], &self.nodes[c - 1], f) {
            self.merge_into(c - 2, c - 1);
            c -= 1;
        }
        // next + next_next
        if c + 2 < self.nodes.len() && allow_merge(&self.nodes[c + 1], &self.nodes[c + 2], f) {
            self.merge_into(c + 1, c + 2);
        }
        // prev + center
        if c >= 1 && allow_merge(&self.nodes[c - 1], &self.nodes[c], f) {
            self.merge_into(c - 1, c);
            c -= 1;
        }
        // center (or the merge result) + next
        if c + 1 < self.nodes.len() && allow_merge(&self.nodes[c], &self.nodes[c + 1], f) {
            self.merge_into(c, c + 1);
        }
    }

    /// Removes element `i` (in range). Empty nodes go away; nodes are not merged (as in
    /// Redis, which keeps the layout of a list that shrinks).
    pub fn remove_at(&mut self, i: usize) {
        let (k, j) = self.locate(i);
        self.nodes[k].unpack();
        self.nodes[k].remove(j);
        if self.nodes[k].count == 0 {
            self.nodes.remove(k);
        }
        self.len -= 1;
        self.settle(Some(k));
    }

    /// LREM: removes up to `count` elements equal to `e` (0: all), from the head or, when
    /// `from_tail`, from the tail. Returns how many went. A compressed node is read from a
    /// decompressed copy, which replaces it only when something went.
    pub fn remove_eq(&mut self, e: &[u8], count: usize, from_tail: bool) -> usize {
        let mut removed = 0;
        let order: Vec<usize> = if from_tail {
            (0..self.nodes.len()).rev().collect()
        } else {
            (0..self.nodes.len()).collect()
        };
        let mut touched = false;
        for k in order {
            let budget = if count == 0 {
                usize::MAX
            } else {
                count - removed
            };
            if budget == 0 {
                break;
            }
            let hits = match self.open(k) {
                None => self.nodes[k].remove_eq(e, budget, from_tail),
                Some(mut n) => {
                    let hits = n.remove_eq(e, budget, from_tail);
                    if hits > 0 {
                        self.nodes[k] = n;
                    }
                    hits
                }
            };
            touched |= hits > 0;
            removed += hits;
        }
        let before = self.nodes.len();
        self.nodes.retain(|n| n.count > 0);
        self.len -= removed;
        if touched || self.nodes.len() != before {
            for k in 0..self.nodes.len() {
                self.fix(k);
            }
        }
        removed
    }

    /// Removes `left` elements from the head and `right` from the tail (LTRIM).
    pub fn trim(&mut self, left: usize, right: usize) {
        self.remove_front(left);
        self.remove_back(right);
        self.settle(None);
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
                front.unpack();
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
                back.unpack();
                let c = back.count;
                back.remove_range(c - n, n);
                n = 0;
            }
        }
    }

    #[cfg(test)]
    fn check(&self) {
        let mut total = 0;
        for (k, n) in self.nodes.iter().enumerate() {
            assert!(n.count > 0, "empty node");
            if n.compressed() {
                assert!(self.is_inner(k), "compressed end node {k}");
            } else if self.is_inner(k) && n.buf.len() - n.start >= MIN_COMPRESS_BYTES {
                // An inner node left plain must be one that does not compress well.
                let raw = n.bytes();
                assert!(
                    lzf::compress(raw, raw.len() - MIN_COMPRESS_IMPROVE - 1).is_none(),
                    "inner node {k} of {} left uncompressed",
                    self.nodes.len()
                );
            }
            if n.plain {
                assert!(self.quick && n.count == 1);
            }
            let open = self.open(k);
            let n = open.as_ref().unwrap_or(n);
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

/// Where [`List::iter_from_near`] starts its walk: a node and the index of its first element.
#[derive(Clone, Copy, Debug, Default)]
pub struct ListSeek {
    node: usize,
    first: usize,
}

/// Forward iterator over a list's elements.
pub struct Iter<'a> {
    list: &'a List,
    node: usize,
    pos: usize,
    left: usize,
    /// The current node decompressed, when it is compressed.
    open: Option<Node>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        if self.left == 0 {
            return None;
        }
        let list: &'a List = self.list;
        let end = match &self.open {
            Some(o) => o.buf.len(),
            None => list.nodes[self.node].buf.len(),
        };
        if self.pos >= end {
            self.node += 1;
            self.open = list.open(self.node);
            self.pos = match &self.open {
                Some(o) => o.start,
                None => list.nodes[self.node].start,
            };
        }
        self.left -= 1;
        Some(match &self.open {
            Some(o) => {
                let (a, b, next) = o.elem_at(self.pos);
                self.pos = next;
                Cow::Owned(o.buf[a..b].to_vec())
            }
            None => {
                let n = &list.nodes[self.node];
                let (a, b, next) = n.elem_at(self.pos);
                self.pos = next;
                Cow::Borrowed(&n.buf[a..b])
            }
        })
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
    /// The current node decompressed, when it is compressed.
    open: Option<Node>,
}

impl<'a> Iterator for RevIter<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        if self.left == 0 {
            return None;
        }
        let list: &'a List = self.list;
        let start = match &self.open {
            Some(o) => o.start,
            None => list.nodes[self.node].start,
        };
        if self.pos <= start {
            self.node -= 1;
            self.open = list.open(self.node);
            self.pos = match &self.open {
                Some(o) => o.buf.len(),
                None => list.nodes[self.node].buf.len(),
            };
        }
        self.left -= 1;
        let buf: &[u8] = match &self.open {
            Some(o) => &o.buf,
            None => &list.nodes[self.node].buf,
        };
        let (len, t) = read_back(buf, self.pos);
        let (a, b) = (self.pos - t - len, self.pos - t);
        self.pos -= 2 * t + len;
        Some(match &self.open {
            Some(o) => Cow::Owned(o.buf[a..b].to_vec()),
            None => Cow::Borrowed(&list.nodes[self.node].buf[a..b]),
        })
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
        l.grow_check(bytes, items.len(), fill, 0);
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
            l.grow_check(i.len(), 1, -1, 0);
            l.push(i, false, -1);
        }
        l.check();
        assert_eq!(l.iter().map(Cow::into_owned).collect::<Vec<_>>(), items);
        let mut rev = items.clone();
        rev.reverse();
        assert_eq!(l.iter_rev().map(Cow::into_owned).collect::<Vec<_>>(), rev);
    }

    #[test]
    fn memory_is_a_few_bytes_per_small_element() {
        let mut l = List::new();
        for i in 0..100_000u32 {
            let v = format!("v{i:07}");
            l.grow_check(v.len(), 1, -2, 0);
            l.push(v.as_bytes(), i % 2 == 0, -2);
        }
        l.check();
        let per = l.memory() as f64 / 100_000.0;
        assert!(per < 8.0 + 4.0, "{per} bytes per 8-byte element");
    }

    #[test]
    fn inner_nodes_compress_and_stay_readable_and_editable() {
        let mut l = List::new();
        let mut m: VecDeque<Vec<u8>> = VecDeque::new();
        for i in 0..20_000u32 {
            let e = format!("element-{}", i % 100).into_bytes();
            l.grow_check(e.len(), 1, -2, 1);
            l.push(&e, i % 3 == 0, -2);
            if i % 3 == 0 {
                m.push_front(e)
            } else {
                m.push_back(e)
            }
        }
        l.check();
        let info = l.quicklist_info().unwrap();
        assert!(info.compressed);
        assert_eq!(info.compressed_nodes, info.nodes - 2, "{info:?}");
        assert!(
            info.compressed_bytes * 4 < info.uncompressed_size,
            "{info:?}"
        );
        let plain = {
            let mut p = List::new();
            for e in &m {
                p.grow_check(e.len(), 1, -2, 0);
                p.push(e, false, -2);
            }
            p
        };
        assert!(
            l.memory() * 2 < plain.memory(),
            "{} vs {}",
            l.memory(),
            plain.memory()
        );
        assert!(l == plain);
        // Edits in the middle: LSET, LINSERT (with splits), LREM, LTRIM.
        for k in [5_000, 9_999, 12_345] {
            l.set(k, b"changed", -2);
            m[k] = b"changed".to_vec();
            l.insert(k, b"new", true, -2);
            m.insert(k + 1, b"new".to_vec());
            l.check();
        }
        assert_eq!(l.remove_eq(b"element-7", 50, false), 50);
        let mut gone = 0;
        m.retain(|e| {
            let hit = gone < 50 && e == b"element-7";
            gone += hit as usize;
            !hit
        });
        l.trim(3_000, 2_000);
        m.drain(..3_000);
        m.truncate(m.len() - 2_000);
        l.check();
        let all: Vec<Vec<u8>> = l.iter().map(Cow::into_owned).collect();
        assert_eq!(all, m.iter().cloned().collect::<Vec<_>>());
        let mut seek = ListSeek::default();
        for at in (0..m.len()).step_by(997) {
            let got: Vec<Vec<u8>> = l
                .iter_from_near(at, &mut seek)
                .take(10)
                .map(Cow::into_owned)
                .collect();
            assert_eq!(got, m.iter().skip(at).take(10).cloned().collect::<Vec<_>>());
        }
        while l.len() > 10 {
            l.pop(l.len().is_multiple_of(2));
        }
        l.check();
        assert_eq!(l.quicklist_info().unwrap().compressed_nodes, 0);
    }

    #[test]
    fn large_elements_get_plain_nodes_in_a_quicklist() {
        TEST_THRESHOLD.with(|t| t.set(Some(100)));
        let big = vec![b'x'; 150];
        // A listpack keeps a large element inside.
        let mut l = List::new();
        push_all(&mut l, &[b"a", &big, b"b"], false, 128);
        assert_eq!((l.encoding(), l.node_count()), ("listpack", 1));
        // In a quicklist it goes alone, and nothing joins it.
        let mut l = List::new();
        l.grow_check(0, 1000, 4, 0);
        push_all(&mut l, &[b"a", b"b"], false, 4);
        push_all(&mut l, &[&big], false, 4);
        push_all(&mut l, &[b"c"], false, 4);
        push_all(&mut l, &[&big], true, 4);
        assert_eq!(l.node_count(), 4);
        let info = l.quicklist_info().unwrap();
        // Plain nodes count their element's bytes.
        assert_eq!(info.uncompressed_size, 150 + (7 + 3 + 3) + 150 + (7 + 3));
        // Insert a large one inside a packed node: split around it.
        l.insert(1, &big, true, 4); // after "a"
        assert_eq!(l.node_count(), 6);
        // LSET a small value over a plain node, and a large one over a packed element.
        l.set(0, b"small", 4);
        l.set(3, &big, 4);
        l.check();
        let all: Vec<Vec<u8>> = l.iter().map(Cow::into_owned).collect();
        let want: Vec<&[u8]> = vec![b"small", b"a", &big, &big, &big, b"c"];
        assert_eq!(all, want.iter().map(|e| e.to_vec()).collect::<Vec<_>>());
        // A single plain node does not turn back into a listpack.
        let mut l = List::new();
        l.grow_check(0, 1000, 4, 0);
        push_all(&mut l, &[&big], false, 4);
        l.shrink_check(4);
        assert_eq!(l.encoding(), "quicklist");
        TEST_THRESHOLD.with(|t| t.set(None));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(bool, Vec<u8>),
        /// The same element n times (fills nodes with compressible bytes).
        PushRun(bool, Vec<u8>, usize),
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
            1 => (any::<bool>(), elem(), 1usize..60).prop_map(|(l, e, n)| Op::PushRun(l, e, n)),
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
            depth in 0usize..3,
            len in 0usize..600,
            starts in prop::collection::vec((0usize..700, 1usize..40), 1..30),
        ) {
            let mut l = List::new();
            for i in 0..len {
                let e = format!("e{i}");
                l.grow_check(e.len(), 1, fill, depth);
                l.push(e.as_bytes(), false, fill);
            }
            // Forward steps (as a stream takes them) and arbitrary jumps, one seek for all.
            let mut seek = ListSeek::default();
            let mut at = 0;
            for (jump, take) in starts {
                for i in [at, jump] {
                    let near: Vec<Elem> = l.iter_from_near(i, &mut seek).take(take).collect();
                    let far: Vec<Elem> = l.iter_from(i).take(take).collect();
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
            fill in prop_oneof![Just(1i64), Just(3), Just(8), Just(16), Just(-1)],
            depth in prop_oneof![2 => Just(0usize), 2 => Just(1), 1 => Just(2), 1 => Just(5)],
            threshold in prop_oneof![3 => Just(None), 1 => Just(Some(100usize)), 1 => Just(Some(1))],
            ops in prop::collection::vec(op(), 1..200),
        ) {
            TEST_THRESHOLD.with(|t| t.set(threshold));
            let mut l = List::new();
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            for o in ops {
                match o {
                    Op::Push(left, e) => {
                        l.grow_check(e.len(), 1, fill, depth);
                        l.push(&e, left, fill);
                        if left { m.push_front(e) } else { m.push_back(e) }
                    }
                    Op::PushRun(left, e, n) => {
                        l.grow_check(e.len() * n, n, fill, depth);
                        for _ in 0..n {
                            l.push(&e, left, fill);
                            if left { m.push_front(e.clone()) } else { m.push_back(e.clone()) }
                        }
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
                        l.grow_check(e.len(), 1, fill, depth);
                        if let Some(i) = l.index(i) {
                            l.set(i, &e, fill);
                            m[i] = e;
                            l.shrink_check(fill);
                        }
                    }
                    Op::Insert(i, after, e) => {
                        l.grow_check(e.len(), 1, fill, depth);
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
            let all: Vec<Vec<u8>> = l.iter().map(Cow::into_owned).collect();
            prop_assert_eq!(&all, &m.iter().cloned().collect::<Vec<_>>());
            let rev: Vec<Vec<u8>> = l.iter_rev().map(Cow::into_owned).collect();
            prop_assert_eq!(rev, m.iter().rev().cloned().collect::<Vec<_>>());
            for (i, v) in m.iter().enumerate() {
                let (got, first) = (l.get(i).map(Cow::into_owned), l.iter_from(i).next());
                prop_assert_eq!(got.as_ref(), Some(v));
                let first = first.map(Cow::into_owned);
                prop_assert_eq!(first.as_ref(), Some(v));
                prop_assert_eq!(l.iter_rev_from(i).count(), i + 1);
            }
        }
    }
}
