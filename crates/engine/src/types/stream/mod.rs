//! The stream value type (Redis 7.2's t_stream.c): entries of field/value pairs keyed by
//! 128-bit ids (`ms-seq`), appended in increasing id order, read by id ranges, deleted one by
//! one or trimmed from the front.
//!
//! Why this shape. A stream is append-only at its tail, read by ranges, and shrinks from its
//! head; entries of one stream nearly always have the same field names, and consecutive ids
//! are close to each other. One heap object per entry (a `BTreeMap<Id, Vec<(field, value)>>`)
//! would cost the 16-byte id, a vector header, an allocation per field and value, and the tree's
//! per-element overhead: well over 100 bytes for an entry of five small fields. So, as Redis
//! does with its radix tree of listpacks, entries are packed into **nodes**:
//!
//! - a node is ONE byte buffer holding up to `stream-node-max-entries` entries (100) or about
//!   `stream-node-max-bytes` bytes (4096), whichever comes first: Redis's rule, with the bytes
//!   counted as the listpack Redis would have built for the same entries (each node keeps that
//!   size), so that nodes close where Redis's do and approximate (`~`) trims, which remove
//!   whole nodes, remove the same entries as in Redis. Nodes sit in a `BTreeMap` keyed by their *master id*, the id of the entry that
//!   opened the node; every id in a node is at least its master id and below the next node's.
//!   A B-tree of a few entries per 100 stream entries costs about one byte per entry, and finds
//!   the node of an id in O(log n) - what Redis's radix tree gives, with less code.
//! - the buffer starts with the *master fields*: the field names of the node's first entry.
//!   Each entry then is `head, [varint ms delta], [varint seq], values...` when its fields are
//!   the master fields (the usual case: the field names are stored once per node), or
//!   `head, ..., varint(n), (field, value)*n` otherwise. The id is coded from the previous
//!   entry's: `head` holds the flags (deleted, same fields, "implied sequence") and, in 5
//!   bits, the ms delta; the sequence is implied (the previous plus 1 in the same ms, 0 in a
//!   later one) or follows. So the id of an entry added with `*` costs one byte. Values are
//!   `varint(len*2) bytes`, or `varint(zigzag*2+1)` for a canonical integer (Redis's listpack
//!   also stores those as integers). An entry of five 7-digit numbers under the master's
//!   fields takes 21 bytes; Redis's listpack entry about 33 (every element carries a header
//!   and a back-length, and each entry four more elements: flags, two deltas and a count).
//!   1,000,000 such entries: RSS growth 0.75x Redis 7.0's (`bench/stream_memory.py`; 21 bytes
//!   per entry allocated, the rest is the allocator's rounding of ~2 KiB node buffers).
//! - deleting an entry (XDEL, an exact trim inside a node) sets the deleted flag in place,
//!   as Redis does: the node keeps the bytes until all its entries are deleted, and then goes
//!   as a whole. The node counts its live entries and all its entries.
//! - only the tail node grows (`Vec` doubling, amortized O(1) appends); when a new node is
//!   opened the previous one is shrunk to its exact size, so only one node per stream carries
//!   slack.
//!
//! Reads decode one node at a time (at most 100 entries): a range read is O(log n + count +
//! node size), backward reads decode the node's entries and walk them in reverse.
//!
//! The stream keeps Redis's metadata: length, last id (the top, even after it was deleted),
//! first id, the greatest deleted id (`max-deleted-entry-id`), and how many entries were ever
//! added (`entries-added`), which consumer groups use to compute their lag.

pub mod group;

pub use group::{Consumer, Group, Nack};

use std::borrow::Cow;
use std::collections::BTreeMap;

/// A stream entry id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next id (Redis's streamIncrID); None past the greatest.
    pub fn next(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous id (Redis's streamDecrID); None before 0-0.
    pub fn prev(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// `ms-seq`, as replies show it.
    pub fn to_bytes(self) -> Vec<u8> {
        format!("{}-{}", self.ms, self.seq).into_bytes()
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Node size limits: Redis's `stream-node-max-bytes` and `stream-node-max-entries` (0: no
/// limit of that kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeLimits {
    pub max_bytes: usize,
    pub max_entries: usize,
}

impl Default for NodeLimits {
    fn default() -> NodeLimits {
        NodeLimits {
            max_bytes: 4096,
            max_entries: 100,
        }
    }
}

/// How XADD / XTRIM trim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Remove the entries with a smaller id.
    MinId(StreamId),
}

/// An entry's first byte: these flags, and in its top 5 bits the ms delta from the previous
/// entry (31: the delta follows as a varint).
const DELETED: u8 = 1;
const SAME_FIELDS: u8 = 2;
/// No sequence varint follows: the sequence is the previous one plus 1 (same ms) or 0 (a
/// later ms); for the first entry of a node, the id is the master id.
const IMPLIED: u8 = 4;
const DMS_ESCAPE: u64 = 31;

fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

/// Reads a varint written by `put_varint` (the buffer is ours: always well formed).
fn get_varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = b[*pos];
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn put_str(b: &mut Vec<u8>, s: &[u8]) {
    put_varint(b, s.len() as u64);
    b.extend_from_slice(s);
}

fn get_str<'a>(b: &'a [u8], pos: &mut usize) -> &'a [u8] {
    let n = get_varint(b, pos) as usize;
    let s = &b[*pos..*pos + n];
    *pos += n;
    s
}

/// The integer a value spells canonically (as Redis's string2ll accepts it and writes it
/// back: no sign on zero, no leading zeros), if it does.
fn canonical_int(s: &[u8]) -> Option<i64> {
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    if s.is_empty() || s.len() > 20 || digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits[0] == b'0' && (digits.len() > 1 || s.len() > 1) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// A value: `varint(len * 2) bytes`, or, for a canonical integer whose zigzag form is below
/// 2^62, `varint(zigzag * 2 + 1)` (a 7-digit number takes 4 bytes instead of 8).
fn put_val(b: &mut Vec<u8>, s: &[u8]) {
    if let Some(v) = canonical_int(s) {
        let z = ((v << 1) ^ (v >> 63)) as u64;
        if z < 1 << 62 {
            put_varint(b, z * 2 + 1);
            return;
        }
    }
    put_varint(b, s.len() as u64 * 2);
    b.extend_from_slice(s);
}

fn get_val<'a>(b: &'a [u8], pos: &mut usize) -> Cow<'a, [u8]> {
    let h = get_varint(b, pos);
    if h & 1 == 1 {
        let z = h >> 1;
        let v = ((z >> 1) as i64) ^ -((z & 1) as i64);
        Cow::Owned(v.to_string().into_bytes())
    } else {
        let n = (h >> 1) as usize;
        let s = &b[*pos..*pos + n];
        *pos += n;
        Cow::Borrowed(s)
    }
}

/// One node: the master fields, then its entries (see the module comment).
#[derive(Clone, Debug, PartialEq)]
struct Node {
    buf: Vec<u8>,
    /// Entries not deleted.
    live: u32,
    /// All entries, deleted ones included.
    count: u32,
    /// The id of its last entry, deleted or not (the next entry's id is coded from it).
    last: StreamId,
    /// The size this node would have as Redis's listpack, less its two counters (see
    /// [`Node::lp_bytes`]): nodes close where Redis's listpacks would, so that `~` trims and
    /// XINFO's figures match Redis's.
    lp_body: u32,
}

/// Bytes of a listpack element holding the integer `v`.
fn lp_int(v: i64) -> usize {
    crate::types::list::lp_int_entry_size(v)
}

/// One entry as a reader sees it: its id and its field/value pairs, borrowed from the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryRef<'a> {
    pub id: StreamId,
    /// Field names borrowed from the node; values borrowed, or decoded (integers).
    pub pairs: Vec<(&'a [u8], Cow<'a, [u8]>)>,
}

/// One entry's head as a node walk finds it, deleted or not: where its head byte is, its
/// flags, its id, and where its fields and values begin.
#[derive(Clone, Copy, Debug)]
struct Head {
    at: usize,
    flags: u8,
    id: StreamId,
    body: usize,
}

impl Head {
    fn deleted(&self) -> bool {
        self.flags & DELETED != 0
    }
}

/// The heads of a node's entries, in id order: each entry's values are skipped, not decoded.
struct Heads<'a> {
    b: &'a [u8],
    pos: usize,
    nfields: usize,
    prev: Option<StreamId>,
    master: StreamId,
}

fn skip_val(b: &[u8], pos: &mut usize) {
    let h = get_varint(b, pos);
    if h & 1 == 0 {
        *pos += (h >> 1) as usize;
    }
}

impl Iterator for Heads<'_> {
    type Item = Head;
    fn next(&mut self) -> Option<Head> {
        let b = self.b;
        if self.pos >= b.len() {
            return None;
        }
        let at = self.pos;
        let flags = b[at];
        let mut pos = at + 1;
        let mut dms = u64::from(flags >> 3);
        if dms == DMS_ESCAPE {
            dms = get_varint(b, &mut pos);
        }
        let seq_code = if flags & IMPLIED != 0 {
            0
        } else {
            get_varint(b, &mut pos)
        };
        let id = match self.prev {
            None => self.master,
            Some(p) if dms == 0 => StreamId::new(p.ms, p.seq + seq_code + 1),
            Some(p) => StreamId::new(p.ms + dms, seq_code),
        };
        self.prev = Some(id);
        let body = pos;
        if flags & SAME_FIELDS != 0 {
            for _ in 0..self.nfields {
                skip_val(b, &mut pos);
            }
        } else {
            let n = get_varint(b, &mut pos);
            for _ in 0..n {
                let len = get_varint(b, &mut pos) as usize;
                pos += len;
                skip_val(b, &mut pos);
            }
        }
        self.pos = pos;
        Some(Head {
            at,
            flags,
            id,
            body,
        })
    }
}

impl Node {
    fn new(master: &[(&[u8], &[u8])]) -> Node {
        let mut buf = Vec::new();
        put_varint(&mut buf, master.len() as u64);
        for (f, _) in master {
            put_str(&mut buf, f);
        }
        // Header (6) and end (1), then the master entry: field count, names, terminator.
        let lp_body = 7
            + lp_int(master.len() as i64)
            + master
                .iter()
                .map(|(f, _)| crate::types::list::lp_entry_size(f))
                .sum::<usize>()
            + lp_int(0);
        Node {
            buf,
            live: 0,
            count: 0,
            last: StreamId::MIN,
            lp_body: lp_body as u32,
        }
    }

    /// The master fields, and where the entries begin.
    fn master(&self) -> (Vec<&[u8]>, usize) {
        let mut pos = 0;
        let n = get_varint(&self.buf, &mut pos) as usize;
        let mut fields = Vec::with_capacity(n);
        for _ in 0..n {
            fields.push(get_str(&self.buf, &mut pos));
        }
        (fields, pos)
    }

    /// Appends entry `id` (at least `master_id`, above the node's last).
    fn append(&mut self, master_id: StreamId, id: StreamId, pairs: &[(&[u8], &[u8])]) {
        let same = {
            let mut pos = 0;
            let n = get_varint(&self.buf, &mut pos) as usize;
            n == pairs.len()
                && pairs
                    .iter()
                    .all(|(f, _)| get_str(&self.buf, &mut pos) == *f)
        };
        let mut flags = if same { SAME_FIELDS } else { 0 };
        // The id, relative to the previous entry's (the first entry's is the master id).
        let (dms, seq_code) = if self.count == 0 {
            debug_assert_eq!(id, master_id);
            (0, 0)
        } else if id.ms == self.last.ms {
            (0, id.seq - self.last.seq - 1)
        } else {
            (id.ms - self.last.ms, id.seq)
        };
        if seq_code == 0 {
            flags |= IMPLIED;
        }
        let out = &mut self.buf;
        if dms < DMS_ESCAPE {
            out.push(flags | (dms as u8) << 3);
        } else {
            out.push(flags | (DMS_ESCAPE as u8) << 3);
            put_varint(out, dms);
        }
        if seq_code != 0 {
            put_varint(out, seq_code);
        }
        if same {
            for (_, v) in pairs {
                put_val(out, v);
            }
        } else {
            put_varint(out, pairs.len() as u64);
            for (f, v) in pairs {
                put_str(out, f);
                put_val(out, v);
            }
        }
        // Redis's listpack entry: flags, ms and seq differences from the master id, the
        // fields when they are not the master's, the values, and the element count.
        let lp = crate::types::list::lp_entry_size;
        let mut lp_entry = lp_int(i64::from(flags & SAME_FIELDS))
            + lp_int(id.ms.wrapping_sub(master_id.ms) as i64)
            + lp_int(id.seq.wrapping_sub(master_id.seq) as i64)
            + pairs.iter().map(|(_, v)| lp(v)).sum::<usize>();
        let mut elements = pairs.len() + 3;
        if !same {
            lp_entry +=
                lp_int(pairs.len() as i64) + pairs.iter().map(|(f, _)| lp(f)).sum::<usize>();
            elements += pairs.len() + 1;
        }
        lp_entry += lp_int(elements as i64);
        self.lp_body = self.lp_body.saturating_add(lp_entry as u32);
        self.live += 1;
        self.count += 1;
        self.last = id;
    }

    /// The size of this node as Redis's listpack (its live and deleted counters included).
    fn lp_bytes(&self) -> usize {
        self.lp_body as usize
            + lp_int(i64::from(self.live))
            + lp_int(i64::from(self.count - self.live))
    }

    /// The heads of every entry of the node, deleted ones included, in id order.
    fn heads(&self, master_id: StreamId) -> Heads<'_> {
        let mut pos = 0;
        let nfields = get_varint(&self.buf, &mut pos) as usize;
        for _ in 0..nfields {
            let n = get_varint(&self.buf, &mut pos) as usize;
            pos += n;
        }
        Heads {
            b: &self.buf,
            pos,
            nfields,
            prev: None,
            master: master_id,
        }
    }

    /// The field/value pairs of the entry at `h` (`fields`: the master fields).
    fn pairs<'a>(&'a self, fields: &[&'a [u8]], h: &Head) -> Vec<(&'a [u8], Cow<'a, [u8]>)> {
        let b = &self.buf[..];
        let mut pos = h.body;
        if h.flags & SAME_FIELDS != 0 {
            fields.iter().map(|f| (*f, get_val(b, &mut pos))).collect()
        } else {
            let n = get_varint(b, &mut pos) as usize;
            (0..n)
                .map(|_| {
                    let f = get_str(b, &mut pos);
                    (f, get_val(b, &mut pos))
                })
                .collect()
        }
    }

    fn mark_deleted(&mut self, pos: usize) {
        self.buf[pos] |= DELETED;
        self.live -= 1;
    }
}

/// A stream.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Stream {
    nodes: BTreeMap<StreamId, Node>,
    len: u64,
    /// The greatest id ever added (or set by XSETID).
    pub last_id: StreamId,
    /// The first live entry's id (0-0 while the stream never had one; Redis's `first_id`).
    pub first_id: StreamId,
    /// The greatest id deleted (XDEL, XTRIM) or set by XSETID ... MAXDELETEDID.
    pub max_deleted_id: StreamId,
    /// Entries ever added (XSETID ... ENTRIESADDED may set it).
    pub entries_added: u64,
    /// Consumer groups, by name (created on demand: a stream without groups pays a pointer).
    pub groups: Option<Box<BTreeMap<Vec<u8>, Group>>>,
}

/// Entries of a stream in an id range, forward or backward. Entries are decoded one at a
/// time as the walk reaches them; a backward walk first lists the heads of the node it is in.
pub struct Range<'a> {
    nodes: Box<dyn Iterator<Item = (&'a StreamId, &'a Node)> + 'a>,
    cur: Option<Cur<'a>>,
    start: StreamId,
    end: StreamId,
    rev: bool,
    /// No entry after the current node's can match.
    done: bool,
}

/// The node a [`Range`] is in.
struct Cur<'a> {
    node: &'a Node,
    fields: Vec<&'a [u8]>,
    fwd: Option<Heads<'a>>,
    back: Vec<Head>,
}

impl<'a> Iterator for Range<'a> {
    type Item = EntryRef<'a>;
    fn next(&mut self) -> Option<EntryRef<'a>> {
        loop {
            if let Some(c) = &mut self.cur {
                let h = match &mut c.fwd {
                    Some(f) => f.next(),
                    None => c.back.pop(),
                };
                match h {
                    None => self.cur = None,
                    Some(h) if h.deleted() => {}
                    Some(h) if !self.rev && h.id > self.end => {
                        self.cur = None;
                        self.done = true;
                    }
                    Some(h) if self.rev && h.id < self.start => {
                        self.cur = None;
                        self.done = true;
                    }
                    Some(h) if h.id < self.start || h.id > self.end => {}
                    Some(h) => {
                        return Some(EntryRef {
                            id: h.id,
                            pairs: c.node.pairs(&c.fields, &h),
                        })
                    }
                }
                continue;
            }
            if self.done {
                return None;
            }
            let (master, node) = self.nodes.next()?;
            if self.rev && *master <= self.start {
                self.done = true;
            }
            let (fields, _) = node.master();
            let (fwd, back) = if self.rev {
                (None, node.heads(*master).collect())
            } else {
                (Some(node.heads(*master)), Vec::new())
            };
            self.cur = Some(Cur {
                node,
                fields,
                fwd,
                back,
            });
        }
    }
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    /// Live entries.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Nodes (XINFO STREAM's `radix-tree-nodes` / DEBUG's node count).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes from the first whose master id is at least `from`, each as (master id, the
    /// id of its last entry, deleted or not): `range(master, last)` gives its live entries,
    /// at least one (a node left with none is removed). A snapshot writes a big stream node
    /// by node, [`Stream::node_count`] of them.
    pub fn node_spans(&self, from: StreamId) -> impl Iterator<Item = (StreamId, StreamId)> + '_ {
        self.nodes.range(from..).map(|(k, n)| (*k, n.last))
    }

    /// The greatest id the stream's nodes hold, deleted entries included. XSETID ...
    /// MAXDELETEDID can move `last_id` below it; XADD must still add above it.
    pub fn stored_top(&self) -> Option<StreamId> {
        self.nodes.last_key_value().map(|(_, n)| n.last)
    }

    /// Appends an entry with id `id`, which must be greater than [`Stream::last_id`] and
    /// than [`Stream::stored_top`] (the caller checks; XADD answers an error otherwise).
    pub fn append(&mut self, id: StreamId, pairs: &[(&[u8], &[u8])], lim: NodeLimits) {
        debug_assert!(id > self.last_id || (self.last_id == StreamId::MIN && self.len == 0));
        debug_assert!(self.stored_top().is_none_or(|top| id > top));
        // Redis's rule: the listpack's bytes plus the new strings' lengths.
        let strings: usize = pairs.iter().map(|(f, v)| f.len() + v.len()).sum();
        let need_new = match self.nodes.last_key_value() {
            None => true,
            Some((_, n)) => {
                (lim.max_bytes != 0 && n.lp_bytes() + strings >= lim.max_bytes)
                    || (lim.max_entries != 0 && n.count as usize >= lim.max_entries)
            }
        };
        if need_new {
            if let Some(mut last) = self.nodes.last_entry() {
                // A copy, not shrink_to_fit: an allocator may keep a block that shrinks by
                // less than half where it is (mimalloc does), and the node would keep the
                // doubled capacity.
                let buf = &mut last.get_mut().buf;
                if buf.capacity() > buf.len() {
                    *buf = buf.as_slice().to_vec();
                }
            }
            self.nodes.insert(id, Node::new(pairs));
        }
        let mut tail = self.nodes.last_entry().expect("a tail node");
        let master = *tail.key();
        tail.get_mut().append(master, id, pairs);
        if self.len == 0 {
            self.first_id = id;
        }
        self.len += 1;
        self.last_id = id;
        self.entries_added += 1;
    }

    /// The live entries with ids in `start..=end`, forward (or backward with `rev`).
    pub fn range(&self, start: StreamId, end: StreamId, rev: bool) -> Range<'_> {
        let empty = Range {
            nodes: Box::new(std::iter::empty()),
            cur: None,
            start,
            end,
            rev,
            done: false,
        };
        if start > end || self.len == 0 {
            return empty;
        }
        // The node that may hold `start`: the last one whose master id is at most `start`.
        let from = self
            .nodes
            .range(..=start)
            .next_back()
            .map_or(StreamId::MIN, |(k, _)| *k);
        let nodes: Box<dyn Iterator<Item = (&StreamId, &Node)>> = if rev {
            Box::new(self.nodes.range(..=end).rev())
        } else {
            Box::new(self.nodes.range(from..=end))
        };
        Range { nodes, ..empty }
    }

    /// How many live entries have ids in `start..=end`, counted up to `limit` (the answer is
    /// at most `limit`). A node wholly inside the range counts by its live counter; only the
    /// nodes at the range's ends are walked, so this is O(log n + nodes in the range), not
    /// O(entries): a streamed XRANGE sizes its reply header with it before writing entries.
    pub fn count_range(&self, start: StreamId, end: StreamId, limit: u64) -> u64 {
        if start > end || self.len == 0 || limit == 0 {
            return 0;
        }
        let from = self
            .nodes
            .range(..=start)
            .next_back()
            .map_or(StreamId::MIN, |(k, _)| *k);
        let mut n = 0u64;
        for (&master, node) in self.nodes.range(from..=end) {
            n += if master >= start && node.last <= end {
                u64::from(node.live)
            } else {
                node.heads(master)
                    .filter(|h| !h.deleted() && h.id >= start && h.id <= end)
                    .count() as u64
            };
            if n >= limit {
                return limit;
            }
        }
        n
    }

    /// All live entries, in id order.
    pub fn iter(&self) -> Range<'_> {
        self.range(StreamId::MIN, StreamId::MAX, false)
    }

    /// The first (or, `last`, the last) live entry.
    pub fn edge(&self, last: bool) -> Option<EntryRef<'_>> {
        self.range(StreamId::MIN, StreamId::MAX, last).next()
    }

    /// Whether a live entry has id `id`.
    pub fn contains(&self, id: StreamId) -> bool {
        self.range(id, id, false).next().is_some()
    }

    /// Recomputes `first_id` from the entries (0-0 once the stream is empty, as XDEL and
    /// trims leave it in Redis).
    fn update_first(&mut self) {
        self.first_id = self.edge(false).map_or(StreamId::MIN, |e| e.id);
    }

    /// Deletes entry `id`; whether it was there. Updates `max_deleted_id` and `first_id`.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&master, node)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        let Some(pos) = node
            .heads(master)
            .take_while(|h| h.id <= id)
            .find(|h| h.id == id && !h.deleted())
            .map(|h| h.at)
        else {
            return false;
        };
        node.mark_deleted(pos);
        if node.live == 0 {
            self.nodes.remove(&master);
        }
        self.len -= 1;
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        if id == self.first_id {
            self.update_first();
        }
        true
    }

    /// Trims from the head (Redis's streamTrim): with `approx`, only whole nodes go; `limit`
    /// (0: none) bounds the entries removed, counted by whole nodes. Returns how many entries
    /// were removed.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut removed = 0u64;
        loop {
            if let Trim::MaxLen(max) = how {
                if self.len <= max {
                    break;
                }
            }
            let Some((&master, node)) = self.nodes.first_key_value() else {
                break;
            };
            let live = u64::from(node.live);
            if limit != 0 && removed + live > limit {
                break;
            }
            let whole = match how {
                Trim::MaxLen(max) => self.len - live >= max,
                Trim::MinId(min) => node.last < min,
            };
            if whole {
                self.nodes.remove(&master);
                self.len -= live;
                removed += live;
                continue;
            }
            if approx {
                break;
            }
            // Mark entries deleted inside this node, then stop: enough was there.
            let node = self.nodes.get_mut(&master).expect("first node");
            let raws: Vec<(usize, bool, StreamId)> = node
                .heads(master)
                .map(|h| (h.at, h.deleted(), h.id))
                .collect();
            for (pos, deleted, id) in raws {
                match how {
                    Trim::MaxLen(max) if self.len <= max => break,
                    Trim::MinId(min) if id >= min => break,
                    _ => {}
                }
                if !deleted {
                    node.mark_deleted(pos);
                    self.len -= 1;
                    removed += 1;
                }
            }
            if node.live == 0 {
                self.nodes.remove(&master);
            }
            break;
        }
        if self.len == 0 {
            self.first_id = StreamId::MIN;
        } else if removed > 0 {
            self.update_first();
        }
        removed
    }

    /// Approximate heap bytes.
    pub fn memory(&self) -> usize {
        // A B-tree leaf holds up to 11 keys and values; count a slot per node and a little.
        let per_node = std::mem::size_of::<StreamId>() + std::mem::size_of::<Node>() + 8;
        self.nodes
            .values()
            .map(|n| n.buf.capacity() + per_node)
            .sum::<usize>()
            + self.groups.as_ref().map_or(0, |g| {
                g.iter().map(|(k, v)| k.len() + v.memory() + 48).sum()
            })
    }

    /// Frees about `budget` nodes from the back (lazy freeing); 0 once little is left.
    pub fn free_step(&mut self, budget: usize) -> usize {
        let mut n = 0;
        while n < budget && self.nodes.len() > 1 {
            self.nodes.pop_last();
            n += 1;
        }
        n
    }

    /// The consumer groups (empty when none).
    pub fn groups(&self) -> impl Iterator<Item = (&Vec<u8>, &Group)> {
        self.groups.iter().flat_map(|g| g.iter())
    }

    pub fn group(&self, name: &[u8]) -> Option<&Group> {
        self.groups.as_ref()?.get(name)
    }

    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        self.groups.as_mut()?.get_mut(name)
    }

    /// Checks the node bookkeeping (tests).
    #[cfg(test)]
    fn check(&self) {
        let mut total = 0u64;
        let mut prev: Option<StreamId> = None;
        for (m, n) in &self.nodes {
            let raw: Vec<Head> = n.heads(*m).collect();
            assert_eq!(raw.len(), n.count as usize);
            assert_eq!(raw.iter().filter(|r| !r.deleted()).count(), n.live as usize);
            assert!(n.live > 0, "an empty node stayed");
            assert_eq!(raw[0].id, *m);
            assert_eq!(raw.last().map(|r| r.id), Some(n.last));
            for r in &raw {
                if let Some(p) = prev {
                    assert!(r.id > p);
                }
                prev = Some(r.id);
            }
            total += u64::from(n.live);
        }
        assert_eq!(total, self.len);
    }
}

#[cfg(test)]
mod tests;
