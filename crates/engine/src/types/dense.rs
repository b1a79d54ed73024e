//! A dense byte-string table: the big encoding of hashes (field -> value) and, with empty
//! values, of sets.
//!
//! Why this shape: the product is memory. A classic chained table spends a node, two heap
//! strings and a bucket pointer per element (Redis's dict: ~135 bytes of RSS for a 36-byte field and a
//! 16-byte value). Here elements live back to back in small *buckets*, each one exact-size heap
//! chunk (`Box<[u8]>`), so an element costs its bytes plus three: a one-byte hash tag, a varint
//! field length and a varint value length (with a flag bit kept for a per-field expiry, which
//! then follows the value as 8 bytes). A bucket adds a 5-byte header, its 16-byte slot in the
//! bucket vector, its allocator rounding and ~2 directory slots of 4 bytes: about 6-7 bytes per
//! element at the usual ~16 elements per bucket. Measured (bench/big_hash.py, 10M fields of a
//! 36-byte UUID -> 16-byte value): ~70 bytes of RSS per field, Redis 7.0 ~135.
//!
//! Addressing is extendible hashing (Fagin et al., 1979): the top `depth` bits of a field's
//! 64-bit hash pick a directory slot, the slot names a bucket; a bucket that outgrows
//! [`MAX_ENTRIES`] (or [`MAX_BYTES`]) splits in two by one more hash bit, and the directory
//! doubles (copying 4-byte slots, not elements) when a bucket's depth would exceed it. No
//! operation ever moves more than one bucket's elements: no O(n) rehash pause.
//!
//! Complexity: lookup, insert and delete are O(bucket) = O(1) (a scan of ~16 entries, most
//! skipped on the tag byte, plus a memmove of the chunk on a size change). Iteration is O(n).
//!
//! Scan order is hash order: a cursor is a position in the 64-bit hash space; a call visits the
//! bucket containing it (returning only entries at or after it) and the following ones. Buckets
//! only ever split, which refines the ranges, so an element present for a whole iteration is
//! returned exactly once.
//!
//! **Entry expiries** (hash field TTLs, set member TTLs) are found without a pass over the
//! table. Why: expired entries must be gone before a command sees the value, so a big hash
//! whose fields come due one at a time was swept whole at each expiry (HLEN on 1M fields due
//! one per ms: 15 ms per call, every call). Instead each bucket has a lower bound of its
//! entries' expiries, and a min-tree over the bounds (leaves in bucket order, each node the
//! least of its two children) leads from the root to every bucket whose bound has passed in
//! O(log buckets). Visiting such a bucket removes its due entries and sets its bound exactly
//! to its earliest survivor. A bound only has to stay low enough: an entry given a later TTL
//! or removed leaves it as it was (at worst one extra bucket visit), and a split gives both
//! halves the old bucket's bound. The tree exists while some entry has an expiry: 16 bytes
//! per bucket at most (under 1.5 bytes per entry), nothing for a table without TTLs. Removing
//! what is due costs O(due buckets * (bucket + log buckets)), not O(n). (A mass expiry still
//! costs what it removes; a value all of whose elements are due at once is better expired as
//! a key.)

use crate::table::hash_key;

/// Entries that make a bucket split (one over it splits).
const MAX_ENTRIES: usize = 24;
/// Bytes that make a bucket split (if it holds at least two entries).
const MAX_BYTES: usize = 1536;
/// The deepest a bucket splits; beyond that (never with a 64-bit seeded hash in practice) a
/// bucket simply grows, so the directory size is bounded.
const MAX_DEPTH: u8 = 40;
/// Bucket header: local depth (1 byte), entry count (u32 LE).
const HDR: usize = 5;

/// The flag bit in an entry's value-length varint: an 8-byte expiry follows the value.
const HAS_EXPIRY: u64 = 1;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], p: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let c = b[*p];
        *p += 1;
        v |= u64::from(c & 0x7f) << shift;
        if c < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn tag_of(h: u64) -> u8 {
    h as u8
}

/// One decoded entry of a bucket, by byte offsets into the chunk.
#[derive(Clone, Copy)]
struct Slot {
    start: usize,
    key: (usize, usize),
    val: (usize, usize),
    expiry: Option<i64>,
    end: usize,
}

fn decode(b: &[u8], start: usize) -> Slot {
    let mut p = start + 1;
    let klen = get_varint(b, &mut p) as usize;
    let vmeta = get_varint(b, &mut p);
    let vlen = (vmeta >> 1) as usize;
    let key = (p, p + klen);
    let val = (key.1, key.1 + vlen);
    let mut end = val.1;
    let expiry = if vmeta & HAS_EXPIRY != 0 {
        let mut e = [0u8; 8];
        e.copy_from_slice(&b[end..end + 8]);
        end += 8;
        Some(i64::from_le_bytes(e))
    } else {
        None
    };
    Slot {
        start,
        key,
        val,
        expiry,
        end,
    }
}

fn encode(out: &mut Vec<u8>, tag: u8, key: &[u8], val: &[u8], expiry: Option<i64>) {
    out.push(tag);
    put_varint(out, key.len() as u64);
    put_varint(out, ((val.len() as u64) << 1) | u64::from(expiry.is_some()));
    out.extend_from_slice(key);
    out.extend_from_slice(val);
    if let Some(e) = expiry {
        out.extend_from_slice(&e.to_le_bytes());
    }
}

fn encoded_len(key: &[u8], val: &[u8], expiry: Option<i64>) -> usize {
    1 + varint_len(key.len() as u64)
        + varint_len((val.len() as u64) << 1)
        + key.len()
        + val.len()
        + if expiry.is_some() { 8 } else { 0 }
}

fn depth_of(b: &[u8]) -> u8 {
    b[0]
}

fn count_of(b: &[u8]) -> usize {
    u32::from_le_bytes([b[1], b[2], b[3], b[4]]) as usize
}

fn set_count(b: &mut [u8], n: usize) {
    b[1..5].copy_from_slice(&(n as u32).to_le_bytes());
}

fn new_chunk(depth: u8) -> Vec<u8> {
    let mut v = Vec::with_capacity(HDR);
    v.push(depth);
    v.extend_from_slice(&0u32.to_le_bytes());
    v
}

/// The entries of one chunk.
struct Entries<'a> {
    b: &'a [u8],
    p: usize,
}

impl Iterator for Entries<'_> {
    type Item = Slot;
    fn next(&mut self) -> Option<Slot> {
        if self.p >= self.b.len() {
            return None;
        }
        let s = decode(self.b, self.p);
        self.p = s.end;
        Some(s)
    }
}

fn entries(b: &[u8]) -> Entries<'_> {
    Entries { b, p: HDR }
}

/// Finds `key` (with hash tag `tag`) in a chunk.
fn find(b: &[u8], tag: u8, key: &[u8]) -> Option<Slot> {
    let mut p = HDR;
    while p < b.len() {
        if b[p] == tag {
            let s = decode(b, p);
            if &b[s.key.0..s.key.1] == key {
                return Some(s);
            }
            p = s.end;
        } else {
            // Skip without building the whole slot.
            let mut q = p + 1;
            let klen = get_varint(b, &mut q) as usize;
            let vmeta = get_varint(b, &mut q);
            p = q + klen + (vmeta >> 1) as usize + if vmeta & HAS_EXPIRY != 0 { 8 } else { 0 };
        }
    }
    None
}

/// A field's view: its value and optional expiry (unix ms).
pub type EntryRef<'a> = (&'a [u8], &'a [u8], Option<i64>);

/// The table. See the module documentation.
#[derive(Clone, Debug)]
pub struct DenseTable {
    /// Directory: slot (top `depth` bits of the hash) -> index into `buckets`.
    dir: Vec<u32>,
    buckets: Vec<Box<[u8]>>,
    depth: u8,
    len: usize,
    /// How many entries carry an expiry (0: readers can skip every expiry check).
    expiring: usize,
    /// The buckets' expiry bounds (see the module documentation); `None` while no entry has
    /// an expiry.
    due: Option<Box<DueIndex>>,
    /// An upper bound of every entry's expiry (`i64::MIN`: none): when every entry has one
    /// and the clock has passed it, the whole table is due ([`DenseTable::all_due`]).
    latest_expiry: i64,
}

/// Per-bucket lower bounds of entry expiries under a min-tree (module documentation).
#[derive(Clone, Debug)]
struct DueIndex {
    /// `tree[cap + b]`: bucket `b`'s bound (`i64::MAX`: none); `tree[j]` for `1 <= j < cap`:
    /// the least of `tree[2j]` and `tree[2j + 1]`. `tree[0]` is unused.
    tree: Vec<i64>,
    /// Leaves: a power of two, at least the number of buckets.
    cap: usize,
}

impl DueIndex {
    fn new(buckets: usize) -> DueIndex {
        let cap = buckets.max(1).next_power_of_two();
        DueIndex {
            tree: vec![i64::MAX; 2 * cap],
            cap,
        }
    }

    /// The least bound of all buckets.
    fn min(&self) -> i64 {
        self.tree[1]
    }

    fn bound(&self, b: usize) -> i64 {
        self.tree.get(self.cap + b).copied().unwrap_or(i64::MAX)
    }

    /// Makes room for bucket `b` (doubling the leaves: amortized O(1) per bucket).
    fn reserve(&mut self, b: usize) {
        if b < self.cap {
            return;
        }
        let cap = (b + 1).next_power_of_two();
        let mut tree = vec![i64::MAX; 2 * cap];
        tree[cap..cap + self.cap].copy_from_slice(&self.tree[self.cap..]);
        for j in (1..cap).rev() {
            tree[j] = tree[2 * j].min(tree[2 * j + 1]);
        }
        *self = DueIndex { tree, cap };
    }

    /// Lowers bucket `b`'s bound to `e` if that is lower.
    fn lower(&mut self, b: usize, e: i64) {
        self.reserve(b);
        let mut j = self.cap + b;
        while j >= 1 && self.tree[j] > e {
            self.tree[j] = e;
            j /= 2;
        }
    }

    /// Sets bucket `b`'s bound to `v` exactly.
    fn set(&mut self, b: usize, v: i64) {
        self.reserve(b);
        let mut j = self.cap + b;
        self.tree[j] = v;
        j /= 2;
        while j >= 1 {
            let m = self.tree[2 * j].min(self.tree[2 * j + 1]);
            if self.tree[j] == m {
                break;
            }
            self.tree[j] = m;
            j /= 2;
        }
    }

    /// The first bucket whose bound is at or before `now_ms`.
    fn first_due(&self, now_ms: i64) -> Option<usize> {
        if self.tree[1] > now_ms {
            return None;
        }
        let mut j = 1;
        while j < self.cap {
            j = if self.tree[2 * j] <= now_ms {
                2 * j
            } else {
                2 * j + 1
            };
        }
        Some(j - self.cap)
    }

    fn memory(&self) -> usize {
        self.tree.capacity() * 8
    }
}

impl Default for DenseTable {
    fn default() -> Self {
        DenseTable::new()
    }
}

impl DenseTable {
    /// See [`crate::value::Value::free_step`]: drops buckets from the end (one allocation
    /// each).
    pub(crate) fn free_step(&mut self, budget: usize) -> usize {
        let k = budget.max(1).min(self.buckets.len());
        self.buckets.truncate(self.buckets.len() - k);
        self.len = 0;
        self.due = None;
        k
    }

    pub fn new() -> DenseTable {
        DenseTable {
            dir: vec![0],
            buckets: vec![new_chunk(0).into_boxed_slice()],
            depth: 0,
            len: 0,
            expiring: 0,
            due: None,
            latest_expiry: i64::MIN,
        }
    }

    /// A table of `entries` (keys and values, no expiry) built at once by a
    /// [`DenseBuilder`]. None if a key appears twice.
    pub fn from_entries<'a>(
        entries: impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Option<DenseTable> {
        let mut b = DenseBuilder::new(entries.len());
        for (k, v) in entries {
            b.push(k, v);
        }
        b.finish()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many buckets there are.
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// How many entries carry an expiry.
    pub fn expiring(&self) -> usize {
        self.expiring
    }

    /// False when no entry can have an expiry at or before `now_ms` (O(1)).
    pub fn may_have_expired(&self, now_ms: i64) -> bool {
        self.expiring > 0 && self.due.as_ref().is_some_and(|d| d.min() <= now_ms)
    }

    /// Whether every entry has an expiry at or before `now_ms` (O(1); false when unsure): a
    /// caller may then drop the whole value as it would an expired key, instead of removing
    /// its entries one by one.
    pub fn all_due(&self, now_ms: i64) -> bool {
        self.len > 0 && self.expiring == self.len && self.latest_expiry <= now_ms
    }

    /// After `expiring` changed: the index exists exactly while some entry has an expiry.
    fn track_expiring(&mut self) {
        if self.expiring == 0 {
            self.due = None;
            self.latest_expiry = i64::MIN;
        } else if self.due.is_none() {
            self.due = Some(Box::new(DueIndex::new(self.buckets.len())));
        }
    }

    fn slot_of(&self, h: u64) -> usize {
        if self.depth == 0 {
            0
        } else {
            (h >> (64 - u32::from(self.depth))) as usize
        }
    }

    fn bucket_of(&self, h: u64) -> usize {
        self.dir[self.slot_of(h)] as usize
    }

    /// The value and expiry of `key`.
    pub fn get(&self, key: &[u8]) -> Option<(&[u8], Option<i64>)> {
        let h = hash_key(key);
        let b = &self.buckets[self.bucket_of(h)];
        find(b, tag_of(h), key).map(|s| (&b[s.val.0..s.val.1], s.expiry))
    }

    /// Inserts or replaces `key`. Returns true if the key was new.
    pub fn insert(&mut self, key: &[u8], val: &[u8], expiry: Option<i64>) -> bool {
        let h = hash_key(key);
        let new = self.insert_hashed(h, key, val, expiry);
        self.track_expiring();
        if let Some(e) = expiry {
            self.latest_expiry = self.latest_expiry.max(e);
            // After any split: the bucket that holds the entry now.
            let b = self.bucket_of(h);
            if let Some(due) = self.due.as_mut() {
                due.lower(b, e);
            }
        }
        new
    }

    fn insert_hashed(&mut self, h: u64, key: &[u8], val: &[u8], expiry: Option<i64>) -> bool {
        let bi = self.bucket_of(h);
        let tag = tag_of(h);
        let chunk = &mut self.buckets[bi];
        if let Some(s) = find(chunk, tag, key) {
            self.expiring =
                self.expiring + usize::from(expiry.is_some()) - usize::from(s.expiry.is_some());
            if s.val.1 - s.val.0 == val.len() && s.expiry.is_some() == expiry.is_some() {
                // Same layout: overwrite in place, no allocation.
                chunk[s.val.0..s.val.1].copy_from_slice(val);
                if let Some(e) = expiry {
                    chunk[s.val.1..s.val.1 + 8].copy_from_slice(&e.to_le_bytes());
                }
                return false;
            }
            let mut v = std::mem::take(chunk).into_vec();
            let mut enc = Vec::with_capacity(encoded_len(key, val, expiry));
            encode(&mut enc, tag, key, val, expiry);
            v.splice(s.start..s.end, enc);
            *chunk = v.into_boxed_slice();
            return false;
        }
        let mut v = std::mem::take(chunk).into_vec();
        v.reserve_exact(encoded_len(key, val, expiry));
        encode(&mut v, tag, key, val, expiry);
        let n = count_of(&v) + 1;
        set_count(&mut v, n);
        let too_big = n > MAX_ENTRIES || (v.len() > MAX_BYTES && n >= 2);
        *chunk = v.into_boxed_slice();
        self.len += 1;
        self.expiring += usize::from(expiry.is_some());
        if too_big {
            self.split(bi, h);
        }
        true
    }

    /// Splits bucket `bi` (reached by hash `h`) until the part holding `h` is within limits
    /// or the depth limit is reached.
    fn split(&mut self, mut bi: usize, h: u64) {
        loop {
            let ld = depth_of(&self.buckets[bi]);
            if ld >= MAX_DEPTH {
                return;
            }
            if ld == self.depth {
                // A bucket over MAX_BYTES with few entries (big values) doubles the directory
                // only while it is smaller than the table: two big entries whose hashes share
                // their first 30 bits would otherwise double it 30 times (it took 4 GiB for
                // 30,000 fields of 1 KB). Such a bucket stays big instead: at most
                // MAX_ENTRIES entries, as every bucket.
                if count_of(&self.buckets[bi]) <= MAX_ENTRIES && self.dir.len() > self.len {
                    return;
                }
                // Double the directory: slot i becomes slots 2i and 2i+1.
                let mut d = Vec::with_capacity(self.dir.len() * 2);
                for &b in &self.dir {
                    d.push(b);
                    d.push(b);
                }
                self.dir = d;
                self.depth += 1;
            }
            let old = std::mem::take(&mut self.buckets[bi]);
            let bit = 63 - u32::from(ld);
            // Each half in an exact-size block (grown by doubling, a half of big entries
            // kept up to twice its bytes: the allocator leaves a block that shrinks by less
            // than half where it is).
            let goes_low = |s: &Slot| (hash_key(&old[s.key.0..s.key.1]) >> bit) & 1 == 0;
            let low_bytes: usize = entries(&old)
                .filter(|s| goes_low(s))
                .map(|s| s.end - s.start)
                .sum();
            let mut lo = Vec::with_capacity(HDR + low_bytes);
            let mut hi = Vec::with_capacity(old.len() - low_bytes);
            lo.extend_from_slice(&new_chunk(ld + 1));
            hi.extend_from_slice(&new_chunk(ld + 1));
            let (mut nlo, mut nhi) = (0, 0);
            for s in entries(&old) {
                if goes_low(&s) {
                    lo.extend_from_slice(&old[s.start..s.end]);
                    nlo += 1;
                } else {
                    hi.extend_from_slice(&old[s.start..s.end]);
                    nhi += 1;
                }
            }
            set_count(&mut lo, nlo);
            set_count(&mut hi, nhi);
            let new_index = self.buckets.len() as u32;
            // The slots of this bucket: a run of 2^(depth - ld) starting at its prefix.
            let span = 1usize << (self.depth - ld);
            let first = (self.slot_of(h) / span) * span;
            for s in &mut self.dir[first + span / 2..first + span] {
                *s = new_index;
            }
            self.buckets[bi] = lo.into_boxed_slice();
            self.buckets.push(hi.into_boxed_slice());
            if let Some(due) = self.due.as_mut() {
                // Both halves keep the old bucket's bound (a lower bound of each).
                let bound = due.bound(bi);
                due.lower(new_index as usize, bound);
            }
            let next = if (h >> bit) & 1 == 0 {
                bi
            } else {
                new_index as usize
            };
            let b = &self.buckets[next];
            let n = count_of(b);
            if !(n > MAX_ENTRIES || (b.len() > MAX_BYTES && n >= 2)) {
                return;
            }
            bi = next;
        }
    }

    /// Removes `key`. Returns its value and expiry if it was there.
    pub fn remove(&mut self, key: &[u8]) -> Option<(Vec<u8>, Option<i64>)> {
        let h = hash_key(key);
        let bi = self.bucket_of(h);
        let chunk = &mut self.buckets[bi];
        let s = find(chunk, tag_of(h), key)?;
        let val = chunk[s.val.0..s.val.1].to_vec();
        let mut v = std::mem::take(chunk).into_vec();
        v.drain(s.start..s.end);
        let n = count_of(&v) - 1;
        set_count(&mut v, n);
        *chunk = v.into_boxed_slice();
        self.len -= 1;
        self.expiring -= usize::from(s.expiry.is_some());
        if self.expiring == 0 {
            self.due = None;
            self.latest_expiry = i64::MIN;
        }
        Some((val, s.expiry))
    }

    /// Sets or clears the expiry of a present key. Returns false if it is absent.
    pub fn set_expiry(&mut self, key: &[u8], expiry: Option<i64>) -> bool {
        let h = hash_key(key);
        let b = &self.buckets[self.bucket_of(h)];
        let Some(s) = find(b, tag_of(h), key) else {
            return false;
        };
        let val = b[s.val.0..s.val.1].to_vec();
        self.insert(key, &val, expiry);
        true
    }

    /// Every entry, in bucket order.
    pub fn iter(&self) -> impl Iterator<Item = EntryRef<'_>> {
        self.buckets.iter().flat_map(|b| {
            entries(b).map(move |s| (&b[s.key.0..s.key.1], &b[s.val.0..s.val.1], s.expiry))
        })
    }

    /// One scan step from hash position `cursor`: calls `f` on the entries of whole buckets
    /// until at least `count` were visited or the table ends. Returns the next cursor (0: done).
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, mut f: impl FnMut(EntryRef<'a>)) -> u64 {
        let mut pos = cursor;
        let mut visited = 0;
        loop {
            let b = &self.buckets[self.bucket_of(pos)];
            let ld = u32::from(depth_of(b));
            for s in entries(b) {
                let k = &b[s.key.0..s.key.1];
                // Entries before the cursor were returned by an earlier call (the bucket was
                // part of a coarser one then).
                if hash_key(k) >= pos {
                    visited += 1;
                    f((k, &b[s.val.0..s.val.1], s.expiry));
                }
            }
            // The end of this bucket's hash range.
            let next = if ld == 0 {
                None
            } else {
                let width = 1u64 << (64 - ld);
                (pos & !(width - 1)).checked_add(width)
            };
            match next {
                None => return 0,
                Some(n) => pos = n,
            }
            if visited >= count {
                return pos;
            }
        }
    }

    /// A random entry (close to uniform: a random bucket, accepted in proportion to how full
    /// it is). `rand` yields random numbers. None when empty.
    pub fn random(&self, mut rand: impl FnMut() -> u64) -> Option<EntryRef<'_>> {
        if self.len == 0 {
            return None;
        }
        for _ in 0..256 {
            let b = &self.buckets[(rand() % self.buckets.len() as u64) as usize];
            let n = count_of(b);
            if n == 0 {
                continue;
            }
            let r = rand();
            // Accept with probability n / MAX_ENTRIES (overfull buckets always).
            if n < MAX_ENTRIES && (r % MAX_ENTRIES as u64) as usize >= n {
                continue;
            }
            let i = ((r >> 32) % n as u64) as usize;
            let s = entries(b).nth(i).expect("counted");
            return Some((&b[s.key.0..s.key.1], &b[s.val.0..s.val.1], s.expiry));
        }
        // Vanishingly unlikely: fall back to the first entry of a random non-empty bucket.
        let start = (rand() % self.buckets.len() as u64) as usize;
        (0..self.buckets.len())
            .map(|i| &self.buckets[(start + i) % self.buckets.len()])
            .find(|b| count_of(b) > 0)
            .map(|b| {
                let s = entries(b).next().expect("non-empty");
                (&b[s.key.0..s.key.1], &b[s.val.0..s.val.1], s.expiry)
            })
    }

    /// Removes entries whose expiry is at or before `now_ms`, visiting at most `max_buckets`
    /// buckets, only ones that hold such entries (found through the expiry index, not by a
    /// pass). Returns the removed keys. With `max_buckets` >= [`DenseTable::buckets`] nothing
    /// due is left.
    pub fn remove_expired(&mut self, now_ms: i64, max_buckets: usize) -> Vec<Vec<u8>> {
        let mut gone = Vec::new();
        for _ in 0..max_buckets {
            let Some(bi) = self.due.as_ref().and_then(|d| d.first_due(now_ms)) else {
                break;
            };
            let b = &self.buckets[bi];
            let mut dead: Vec<Vec<u8>> = Vec::new();
            let mut earliest = i64::MAX;
            for s in entries(b) {
                match s.expiry {
                    Some(e) if e <= now_ms => dead.push(b[s.key.0..s.key.1].to_vec()),
                    Some(e) => earliest = earliest.min(e),
                    None => {}
                }
            }
            for k in dead {
                self.remove(&k);
                gone.push(k);
            }
            if let Some(due) = self.due.as_mut() {
                due.set(bi, earliest);
            }
        }
        gone
    }

    /// Heap bytes used (chunks, bucket vector, directory).
    pub fn memory(&self) -> usize {
        self.buckets.iter().map(|b| b.len()).sum::<usize>()
            + self.buckets.capacity() * std::mem::size_of::<Box<[u8]>>()
            + self.dir.capacity() * 4
            + self.due.as_ref().map_or(0, |d| d.memory())
    }
}

/// Builds a [`DenseTable`] from entries given one at a time (keys and values, no expiry),
/// without the per-insert reallocations and bucket splits of inserting them one by one. Why:
/// loading a hash of millions of fields spent most of its time in those inserts.
///
/// How: each entry is encoded once as it comes, into the staging area of its *partition*
/// (the top `bits` bits of its hash: a few thousand entries a partition for the size hint,
/// at most 256 partitions), which lets the caller free its copy as it goes.
/// [`DenseBuilder::finish`] then takes the partitions in hash order, each on its own (its
/// staging area stays in cache): sorts it by hash, refuses a repeated key, cuts it into
/// buckets where inserts would have split it (more than [`MAX_ENTRIES`] entries, or more
/// than [`MAX_BYTES`] bytes, both halves cut), and writes each bucket once. Every bucket is
/// then at least `bits` deep: a partition holding few entries (never seen with a random
/// hash seed) makes a smaller bucket than inserts would have, which is valid, as a bucket
/// after deletions.
pub struct DenseBuilder {
    bits: u32,
    /// Per partition: its entries encoded back to back, and for each (hash, offset | length
    /// << 40: see [`pack`]).
    staging: Vec<Vec<u8>>,
    index: Vec<Vec<(u64, u64)>>,
    len: usize,
}

/// Entries per partition the size hint aims at, and the most partitions (more scatter the
/// pushes over too many pages).
const PARTITION: usize = 4096;
const MAX_PARTITION_BITS: u32 = 8;

/// An entry's place in its staging area: offset (40 bits) and length (24 bits; 0: too long,
/// decode it).
fn pack(off: usize, len: usize) -> u64 {
    let len = if len < 1 << 24 { len as u64 } else { 0 };
    (off as u64) | (len << 40)
}

/// An entry's (start, end) in its staging area.
fn unpack(st: &[u8], p: u64) -> (usize, usize) {
    let off = (p & ((1 << 40) - 1)) as usize;
    match (p >> 40) as usize {
        0 => (off, decode(st, off).end),
        len => (off, off + len),
    }
}

impl DenseBuilder {
    /// A builder for about `hint` entries (a hint: nothing is allocated from it but the list
    /// of partitions).
    pub fn new(hint: usize) -> DenseBuilder {
        let mut bits = 0u32;
        while bits < MAX_PARTITION_BITS && (hint >> bits) > PARTITION {
            bits += 1;
        }
        DenseBuilder {
            bits,
            staging: (0..1usize << bits).map(|_| Vec::new()).collect(),
            index: (0..1usize << bits).map(|_| Vec::new()).collect(),
            len: 0,
        }
    }

    /// Adds an entry (a repeated key is found by [`DenseBuilder::finish`]).
    pub fn push(&mut self, key: &[u8], val: &[u8]) {
        let h = hash_key(key);
        let p = if self.bits == 0 {
            0
        } else {
            (h >> (64 - self.bits)) as usize
        };
        let st = &mut self.staging[p];
        let off = st.len();
        encode(st, tag_of(h), key, val, None);
        self.index[p].push((h, pack(off, st.len() - off)));
        self.len += 1;
    }

    /// Entries pushed so far.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The table; None if a key was pushed twice.
    pub fn finish(self) -> Option<DenseTable> {
        let n = self.len;
        // Buckets in hash order, and each one's depth (for the directory).
        let mut buckets: Vec<Box<[u8]>> = Vec::new();
        let mut depths: Vec<u8> = Vec::new();
        let mut stack: Vec<(usize, usize, u8)> = Vec::new();
        for (mut part, st) in self.index.into_iter().zip(self.staging) {
            part.sort_unstable();
            for w in part.windows(2) {
                if w[0].0 == w[1].0 {
                    // Equal hashes are adjacent; compare every pair of the run (rare).
                    let key = |p: u64| {
                        let s = decode(&st, unpack(&st, p).0);
                        &st[s.key.0..s.key.1]
                    };
                    let run: Vec<&[u8]> = part
                        .iter()
                        .filter(|o| o.0 == w[0].0)
                        .map(|o| key(o.1))
                        .collect();
                    if (1..run.len()).any(|i| run[..i].contains(&run[i])) {
                        return None;
                    }
                }
            }
            let size = |o: &(u64, u64)| {
                let (a, b) = unpack(&st, o.1);
                b - a
            };
            stack.push((0, part.len(), self.bits as u8));
            while let Some((lo, hi, ld)) = stack.pop() {
                let count = hi - lo;
                let mut bytes = 0;
                let over = count > MAX_ENTRIES || {
                    bytes = HDR + part[lo..hi].iter().map(size).sum::<usize>();
                    // As `split`: big entries alone make a bucket split only while the
                    // directory it needs stays within the table's size.
                    bytes > MAX_BYTES && count >= 2 && (1usize << (ld + 1)) <= n
                };
                if over && ld < MAX_DEPTH {
                    let bit = 63 - u32::from(ld);
                    let mid = lo + part[lo..hi].partition_point(|o| (o.0 >> bit) & 1 == 0);
                    // High half pushed first: the low half comes out first (hash order).
                    stack.push((mid, hi, ld + 1));
                    stack.push((lo, mid, ld + 1));
                    continue;
                }
                if count > MAX_ENTRIES {
                    bytes = HDR + part[lo..hi].iter().map(size).sum::<usize>();
                }
                let mut b = Vec::with_capacity(bytes.max(HDR));
                b.extend_from_slice(&new_chunk(ld));
                for o in &part[lo..hi] {
                    let (a, e) = unpack(&st, o.1);
                    b.extend_from_slice(&st[a..e]);
                }
                set_count(&mut b, count);
                buckets.push(b.into_boxed_slice());
                depths.push(ld);
            }
        }
        let depth = depths.iter().copied().max().unwrap_or(0);
        let mut dir = Vec::with_capacity(1usize << depth);
        for (i, &ld) in depths.iter().enumerate() {
            dir.extend(std::iter::repeat_n(i as u32, 1usize << (depth - ld)));
        }
        Some(DenseTable {
            dir,
            buckets,
            depth,
            len: n,
            expiring: 0,
            due: None,
            latest_expiry: i64::MIN,
        })
    }
}

impl PartialEq for DenseTable {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().all(|(k, v, e)| other.get(k) == Some((v, e)))
    }
}

/// Passes each element [`DenseTable::remove_expired`] removed to `gone`; returns how many
/// there were.
pub(crate) fn named(removed: Vec<Vec<u8>>, gone: &mut dyn FnMut(&[u8])) -> usize {
    for k in &removed {
        gone(k);
    }
    removed.len()
}

// ---- Resumable iteration (streamed replies) -------------------------------------------------

impl DenseTable {
    /// Visits whole buckets from bucket index `from`, in [`DenseTable::iter`]'s order, until at
    /// least `min` entries were visited. Returns the bucket to resume at (None: the table
    /// ended). A cursor stays valid only while the table is not modified: the server streams a
    /// big reply in steps while nothing may write the key (see the server's `stream.rs`).
    pub fn for_each_from<'a>(
        &'a self,
        from: usize,
        min: usize,
        mut f: impl FnMut(EntryRef<'a>),
    ) -> Option<usize> {
        let mut bi = from;
        let mut n = 0;
        while bi < self.buckets.len() && n < min.max(1) {
            let b = &self.buckets[bi];
            for s in entries(b) {
                f((&b[s.key.0..s.key.1], &b[s.val.0..s.val.1], s.expiry));
                n += 1;
            }
            bi += 1;
        }
        (bi < self.buckets.len()).then_some(bi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn big_values_do_not_blow_up_the_directory() {
        // Regression: buckets split on bytes alone doubled the directory for every shared
        // leading hash bit of two big entries (30,000 fields of 1 KB: a 4 GiB directory).
        let mut t = DenseTable::new();
        let val = vec![b'v'; 1000];
        for i in 0..30_000u32 {
            assert!(t.insert(format!("f{i}").as_bytes(), &val, None));
            assert!(
                t.dir.len() <= 2 * t.len().max(1),
                "directory {} for {}",
                t.dir.len(),
                t.len()
            );
        }
        for i in 0..30_000u32 {
            assert_eq!(t.get(format!("f{i}").as_bytes()), Some((&val[..], None)));
            assert!(
                count_of(&t.buckets[t.bucket_of(hash_key(format!("f{i}").as_bytes()))])
                    <= MAX_ENTRIES
            );
        }
        assert_eq!(t.len(), 30_000);
    }

    /// Every entry found, every bucket within limits, and every directory slot naming the
    /// bucket whose hash prefix it is.
    fn check_table(t: &DenseTable, entries: &[(Vec<u8>, Vec<u8>)]) {
        assert_eq!(t.len(), entries.len());
        assert_eq!(t.iter().count(), entries.len());
        for (k, v) in entries {
            assert_eq!(t.get(k), Some((&v[..], None)));
            let b = &t.buckets[t.bucket_of(hash_key(k))];
            assert!(find(b, tag_of(hash_key(k)), k).is_some());
        }
        assert_eq!(t.dir.len(), 1 << t.depth);
        for b in &t.buckets {
            assert!(count_of(b) <= MAX_ENTRIES || depth_of(b) >= MAX_DEPTH || b.len() > MAX_BYTES);
        }
    }

    #[test]
    fn built_at_once_equals_inserted_one_by_one() {
        for (n, vlen) in [
            (0usize, 1usize),
            (1, 1),
            (24, 3),
            (25, 3),
            (5_000, 8),
            (100_000, 1),
            (300, 400),
            (40, 5000),
        ] {
            let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..n)
                .map(|i| (format!("f{i}").into_bytes(), vec![(i % 251) as u8; vlen]))
                .collect();
            let refs: Vec<(&[u8], &[u8])> = entries.iter().map(|(k, v)| (&k[..], &v[..])).collect();
            let built = DenseTable::from_entries(refs.iter().copied()).unwrap();
            let mut one = DenseTable::new();
            for (k, v) in &refs {
                assert!(one.insert(k, v, None));
            }
            check_table(&built, &entries);
            assert_eq!(built, one);
            // The same buckets where only the entry count splits them (where big entries
            // split them by bytes, inserts split only the half an insert falls in).
            if vlen * MAX_ENTRIES < MAX_BYTES {
                assert_eq!(
                    built.buckets(),
                    one.buckets(),
                    "{n} entries of {vlen} bytes"
                );
                assert_eq!(built.depth, one.depth, "{n} entries of {vlen} bytes");
            }
            // And it goes on as any table.
            let mut built = built;
            assert!(built.insert(b"new", b"v", Some(7)));
            assert!(!built.insert(b"new", b"w", None));
            if n > 0 {
                assert!(built.remove(b"f0").is_some());
            }
        }
    }

    #[test]
    fn built_at_once_refuses_a_duplicate_key() {
        let refs: Vec<(&[u8], &[u8])> = vec![(b"a", b"1"), (b"b", b"2"), (b"c", b"3")];
        assert!(DenseTable::from_entries(refs.iter().copied()).is_some());
        let mut dup = refs.clone();
        dup.push((b"b", b"4"));
        assert!(DenseTable::from_entries(dup.iter().copied()).is_none());
        // Among many, in another partition than the first.
        let keys: Vec<Vec<u8>> = (0..50_000).map(|i| format!("k{i}").into_bytes()).collect();
        let mut many: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (&k[..], &b""[..])).collect();
        assert!(DenseTable::from_entries(many.iter().copied()).is_some());
        many.push((b"k49999", b"x"));
        assert!(DenseTable::from_entries(many.iter().copied()).is_none());
    }

    #[test]
    fn grows_splits_and_finds_everything() {
        let mut t = DenseTable::new();
        for i in 0..20_000u32 {
            assert!(t.insert(format!("field:{i}").as_bytes(), &i.to_le_bytes(), None));
        }
        assert_eq!(t.len(), 20_000);
        assert!(t.depth > 8);
        for i in 0..20_000u32 {
            let (v, e) = t.get(format!("field:{i}").as_bytes()).unwrap();
            assert_eq!(v, i.to_le_bytes());
            assert_eq!(e, None);
        }
        for b in &t.buckets {
            assert!(count_of(b) <= MAX_ENTRIES);
        }
        assert_eq!(t.iter().count(), 20_000);
        for i in (0..20_000u32).step_by(2) {
            assert!(t.remove(format!("field:{i}").as_bytes()).is_some());
        }
        assert_eq!(t.len(), 10_000);
        assert_eq!(t.iter().count(), 10_000);
        assert!(t.get(b"field:0").is_none());
        assert!(t.get(b"field:1").is_some());
    }

    #[test]
    fn big_values_get_their_own_buckets() {
        let mut t = DenseTable::new();
        let big = vec![7u8; 5000];
        for i in 0..50u32 {
            t.insert(&i.to_be_bytes(), &big, None);
        }
        for i in 0..50u32 {
            assert_eq!(t.get(&i.to_be_bytes()).unwrap().0, &big[..]);
        }
        // Replacing with a shorter value and back.
        t.insert(&3u32.to_be_bytes(), b"x", Some(5));
        assert_eq!(t.get(&3u32.to_be_bytes()), Some((&b"x"[..], Some(5))));
        assert!(t.set_expiry(&3u32.to_be_bytes(), None));
        assert_eq!(t.get(&3u32.to_be_bytes()), Some((&b"x"[..], None)));
    }

    #[test]
    fn scan_returns_each_survivor_once_across_splits() {
        let mut t = DenseTable::new();
        for i in 0..3000u32 {
            t.insert(&i.to_le_bytes(), b"", None);
        }
        let mut seen = HashMap::new();
        let mut cursor = 0;
        let mut next = 3000u32;
        loop {
            cursor = t.scan(cursor, 10, |(k, _, _)| {
                *seen.entry(k.to_vec()).or_insert(0) += 1
            });
            // Grow (many splits) and delete some late keys while iterating.
            for _ in 0..30 {
                t.insert(&next.to_le_bytes(), b"", None);
                next += 1;
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..3000u32 {
            assert_eq!(seen.get(i.to_le_bytes().as_slice()), Some(&1), "key {i}");
        }
        assert!(seen.values().all(|&n| n == 1));
    }

    #[test]
    fn random_reaches_every_entry() {
        let mut t = DenseTable::new();
        for i in 0..200u32 {
            t.insert(&i.to_le_bytes(), b"v", None);
        }
        let mut x = 12345u64;
        let mut rng = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut seen = std::collections::HashSet::new();
        for _ in 0..20_000 {
            seen.insert(t.random(&mut rng).unwrap().0.to_vec());
        }
        assert_eq!(seen.len(), 200);
        assert!(DenseTable::new().random(rng).is_none());
    }

    #[test]
    fn expired_entries_are_removed_in_steps() {
        let mut t = DenseTable::new();
        for i in 0..1000u32 {
            let e = (i % 3 == 0).then_some(i64::from(i));
            t.insert(&i.to_le_bytes(), b"v", e);
        }
        let mut gone = 0;
        for _ in 0..1000 {
            gone += t.remove_expired(500, 4).len();
        }
        assert_eq!(gone, 167); // 0, 3, ..., 498
        assert_eq!(t.len(), 833);
        // A full sweep learns the earliest survivor (501).
        let nb = t.buckets();
        t.remove_expired(500, nb);
        assert!(!t.may_have_expired(500));
        assert!(t.may_have_expired(501));
        assert!(!DenseTable::new().may_have_expired(i64::MAX));
    }

    #[test]
    fn a_table_knows_when_every_entry_is_due() {
        let mut t = DenseTable::new();
        assert!(!t.all_due(i64::MAX));
        for i in 0..500u32 {
            t.insert(&i.to_le_bytes(), b"v", Some(50 + i64::from(i % 50)));
        }
        assert!(t.all_due(99) && !t.all_due(98));
        t.set_expiry(&7u32.to_le_bytes(), None);
        assert!(!t.all_due(i64::MAX));
        t.set_expiry(&7u32.to_le_bytes(), Some(10));
        assert!(t.all_due(99));
        // Removing what is due visits only the buckets holding it, and learns the rest.
        let gone = t.remove_expired(60, usize::MAX).len();
        assert_eq!(gone, 500 / 50 * 11);
        assert!(!t.may_have_expired(60) && t.may_have_expired(61));
        assert_eq!(t.remove_expired(99, usize::MAX).len(), 500 - gone);
        assert!(t.is_empty() && !t.all_due(i64::MAX) && !t.may_have_expired(i64::MAX));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(Vec<u8>, Vec<u8>, Option<i64>),
        Remove(Vec<u8>),
        SetExpiry(Vec<u8>, Option<i64>),
        /// Removes what is due at this time, visiting at most this many buckets.
        Expire(i64, usize),
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        // A small key space so that replacements and removals hit.
        prop_oneof![
            (0u16..400).prop_map(|i| i.to_le_bytes().to_vec()),
            proptest::collection::vec(any::<u8>(), 0..40),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (key(), proptest::collection::vec(any::<u8>(), 0..300), proptest::option::of(expiry()))
                .prop_map(|(k, v, e)| Op::Insert(k, v, e)),
            1 => key().prop_map(Op::Remove),
            1 => (key(), proptest::option::of(expiry())).prop_map(|(k, e)| Op::SetExpiry(k, e)),
            1 => (0i64..1000, prop_oneof![1usize..4, Just(usize::MAX)])
                .prop_map(|(now, n)| Op::Expire(now, n)),
        ]
    }

    fn expiry() -> impl Strategy<Value = i64> {
        // Mostly near the clocks that Expire uses, so that entries come due.
        prop_oneof![4 => 0i64..1000, 1 => any::<i64>()]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn behaves_like_a_hashmap(ops in proptest::collection::vec(op(), 0..1500)) {
            let mut t = DenseTable::new();
            let mut m: HashMap<Vec<u8>, (Vec<u8>, Option<i64>)> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v, e) => {
                        let new = t.insert(&k, &v, e);
                        prop_assert_eq!(new, m.insert(k, (v, e)).is_none());
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(t.remove(&k), m.remove(&k));
                    }
                    Op::SetExpiry(k, e) => {
                        let present = m.get_mut(&k).map(|(_, old)| *old = e).is_some();
                        prop_assert_eq!(t.set_expiry(&k, e), present);
                    }
                    Op::Expire(now, n) => {
                        let mut gone = t.remove_expired(now, n);
                        gone.sort();
                        for k in &gone {
                            let (_, e) = m.remove(k).expect("removed a present entry");
                            prop_assert!(e.is_some_and(|e| e <= now));
                        }
                        if n == usize::MAX {
                            // Everything due went, and the index knows nothing else is due.
                            prop_assert!(m.values().all(|(_, e)| e.is_none_or(|e| e > now)));
                            prop_assert!(!t.may_have_expired(now));
                        }
                    }
                }
                prop_assert_eq!(t.len(), m.len());
                prop_assert_eq!(t.expiring(), m.values().filter(|(_, e)| e.is_some()).count());
                // The bounds never hide an entry.
                if let Some(min) = m.values().filter_map(|(_, e)| *e).min() {
                    prop_assert!(t.may_have_expired(min));
                }
                for now in [0, 500, 999, i64::MAX] {
                    if t.all_due(now) {
                        prop_assert!(!m.is_empty());
                        prop_assert!(m.values().all(|(_, e)| e.is_some_and(|e| e <= now)));
                    }
                }
            }
            for (k, (v, e)) in &m {
                prop_assert_eq!(t.get(k), Some((&v[..], *e)));
            }
            let all: HashMap<Vec<u8>, (Vec<u8>, Option<i64>)> =
                t.iter().map(|(k, v, e)| (k.to_vec(), (v.to_vec(), e))).collect();
            prop_assert_eq!(&all, &m);
            let mut scanned = HashMap::new();
            let mut c = 0;
            loop {
                c = t.scan(c, 7, |(k, v, e)| { scanned.insert(k.to_vec(), (v.to_vec(), e)); });
                if c == 0 { break; }
            }
            prop_assert_eq!(&scanned, &m);
        }
    }
}
#[cfg(test)]
mod stats {
    #[test]
    #[ignore]
    fn layout_stats() {
        let mut t = super::DenseTable::new();
        let n: u64 = std::env::var("N")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1_000_000);
        let mut x = 88172645463325252u64;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let f = format!(
                "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
                x as u32,
                (x >> 32) as u16,
                x & 0xfff,
                (x >> 12) & 0xfff,
                x >> 16
            );
            t.insert(f.as_bytes(), b"vvvvvvvvvvvvvvvv", None);
        }
        let chunk: usize = t.buckets.iter().map(|b| b.len()).sum();
        // mimalloc-like rounding: 4 bins per power of two above 64 bytes.
        let round = |s: usize| {
            if s <= 64 {
                s.div_ceil(8) * 8
            } else {
                let p = usize::BITS - 1 - (s - 1).leading_zeros();
                let step = 1usize << (p - 2);
                s.div_ceil(step) * step
            }
        };
        let rounded: usize = t.buckets.iter().map(|b| round(b.len())).sum();
        eprintln!("n={} buckets={} (cap {}) dir={} avg/bucket={:.1} chunk/field={:.1} rounded/field={:.1} vec/field={:.1} dir/field={:.1}",
            t.len(), t.buckets.len(), t.buckets.capacity(), t.dir.len(), t.len() as f64 / t.buckets.len() as f64,
            chunk as f64 / n as f64, rounded as f64 / n as f64, (t.buckets.capacity() * 16) as f64 / n as f64, (t.dir.capacity() * 4) as f64 / n as f64);
    }
}

#[cfg(test)]
mod resumable_tests {
    use super::*;

    #[test]
    fn for_each_from_in_steps_equals_iter() {
        let mut t = DenseTable::new();
        for i in 0..5_000u32 {
            t.insert(format!("f{i}").as_bytes(), format!("v{i}").as_bytes(), None);
        }
        let all: Vec<(Vec<u8>, Vec<u8>)> =
            t.iter().map(|(k, v, _)| (k.to_vec(), v.to_vec())).collect();
        for step in [1, 7, 100, 4096, 10_000] {
            let mut got = Vec::new();
            let mut at = Some(0);
            while let Some(from) = at {
                at = t.for_each_from(from, step, |(k, v, _)| got.push((k.to_vec(), v.to_vec())));
            }
            assert_eq!(got, all, "step {step}");
        }
    }
}
