//! One segment of the keyspace table: open addressing over 64-byte buckets.
//!
//! A bucket is one cache line: seven 1-byte tags and seven 8-byte entry pointers. A lookup
//! reads the bucket its hash names (one cache miss for tags and pointers together), compares
//! the tags, and follows the pointer whose tag matches (the second and last miss: the entry
//! block itself). A general-purpose Swiss table keeps tags and pointers in separate arrays,
//! which costs one more miss per lookup; on a GET that is served from memory in about a
//! microsecond, each miss is a tenth of the time.
//!
//! Probing is linear over buckets. A tag is 0 for an empty slot, 1 for a slot whose entry was
//! removed (a tombstone: probes go on past it, inserts reuse it), and `0x80 | 7 hash bits`
//! otherwise. A probe sequence ends at the first bucket with an empty slot. Rebuilding (to
//! grow, or to clear tombstones) reinserts every entry. The segment never holds more than 6 of
//! every 7 slots (live or tombstoned), so a probe always ends.
//!
//! No unsafe code: a slot is an `Option<Entry>`, which is pointer-sized.

use crate::entry::Entry;
use crate::prefetch_line;

const EMPTY: u8 = 0;
const TOMB: u8 = 1;
const SLOTS: usize = 7;

#[repr(C, align(64))]
struct Bucket {
    tags: [u8; SLOTS],
    slots: [Option<Entry>; SLOTS],
}

impl Bucket {
    fn new() -> Bucket {
        Bucket {
            tags: [EMPTY; SLOTS],
            slots: [const { None }; SLOTS],
        }
    }
}

/// Where an entry sits: bucket and slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pos(usize, usize);

pub(crate) struct Segment {
    buckets: Vec<Bucket>,
    len: usize,
    tombs: usize,
}

impl Segment {
    /// Bytes this segment's buckets take (MEMORY STATS' table overhead).
    pub(crate) fn memory(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>() + std::mem::size_of::<Segment>()
    }
}

fn tag_of(sh: u64) -> u8 {
    0x80 | (sh >> 57) as u8
}

/// Most slots (live plus tombstones) a segment of `buckets` buckets may use: 6 of every 7.
fn max_used(buckets: usize) -> usize {
    buckets * (SLOTS - 1)
}

impl Segment {
    pub(crate) fn new() -> Segment {
        Segment {
            buckets: Vec::new(),
            len: 0,
            tombs: 0,
        }
    }

    /// An empty segment of `buckets` buckets (a power of two).
    pub(crate) fn with_buckets(buckets: usize) -> Segment {
        debug_assert!(buckets.is_power_of_two());
        Segment {
            buckets: (0..buckets).map(|_| Bucket::new()).collect(),
            len: 0,
            tombs: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Whether one more insert needs a rebuild first.
    pub(crate) fn full(&self) -> bool {
        self.len + self.tombs + 1 > max_used(self.buckets.len())
    }

    /// Finds the entry for `key`, whose slot hash is `sh`.
    pub(crate) fn find(&self, sh: u64, key: &[u8]) -> Option<Pos> {
        let n = self.buckets.len();
        if n == 0 {
            return None;
        }
        let tag = tag_of(sh);
        let mask = n - 1;
        let mut b = sh as usize & mask;
        for _ in 0..n {
            let bucket = &self.buckets[b];
            for i in 0..SLOTS {
                if bucket.tags[i] == tag {
                    if let Some(e) = &bucket.slots[i] {
                        if e.key() == key {
                            return Some(Pos(b, i));
                        }
                    }
                }
            }
            if bucket.tags.contains(&EMPTY) {
                return None;
            }
            b = (b + 1) & mask;
        }
        None
    }

    /// Hints the CPU to load the bucket `sh` starts at (pipelined lookups overlap their
    /// misses: the bucket is in cache by the time the command runs).
    pub(crate) fn prefetch(&self, sh: u64) {
        let n = self.buckets.len();
        if n == 0 {
            return;
        }
        let bucket: *const Bucket = &self.buckets[sh as usize & (n - 1)];
        prefetch_line(bucket.cast());
    }

    /// Hints the CPU to load the entry block that `sh`'s tag points at in its first bucket
    /// (call after [`Segment::prefetch`] had time to bring the bucket in).
    pub(crate) fn prefetch_entry(&self, sh: u64) {
        let n = self.buckets.len();
        if n == 0 {
            return;
        }
        let bucket = &self.buckets[sh as usize & (n - 1)];
        let tag = tag_of(sh);
        for i in 0..SLOTS {
            if bucket.tags[i] == tag {
                if let Some(e) = &bucket.slots[i] {
                    e.prefetch();
                    return;
                }
            }
        }
    }

    pub(crate) fn at(&self, p: Pos) -> &Entry {
        self.buckets[p.0].slots[p.1].as_ref().expect("live slot")
    }

    pub(crate) fn at_mut(&mut self, p: Pos) -> &mut Entry {
        self.buckets[p.0].slots[p.1].as_mut().expect("live slot")
    }

    /// Removes the entry at `p`, leaving a tombstone.
    pub(crate) fn take(&mut self, p: Pos) -> Entry {
        let bucket = &mut self.buckets[p.0];
        bucket.tags[p.1] = TOMB;
        self.len -= 1;
        self.tombs += 1;
        bucket.slots[p.1].take().expect("live slot")
    }

    /// Inserts an entry whose key is not in the segment. The caller made room (`full()` false).
    pub(crate) fn insert_absent(&mut self, sh: u64, e: Entry) {
        debug_assert!(!self.full());
        let mask = self.buckets.len() - 1;
        let mut b = sh as usize & mask;
        loop {
            let bucket = &mut self.buckets[b];
            if let Some(i) = bucket.tags.iter().position(|&t| t == EMPTY || t == TOMB) {
                if bucket.tags[i] == TOMB {
                    self.tombs -= 1;
                }
                bucket.tags[i] = tag_of(sh);
                bucket.slots[i] = Some(e);
                self.len += 1;
                return;
            }
            b = (b + 1) & mask;
        }
    }

    /// Rebuilds with `buckets` buckets (dropping tombstones); `slot_hash` gives each entry's
    /// slot hash.
    pub(crate) fn rebuild(&mut self, buckets: usize, slot_hash: impl Fn(&Entry) -> u64) {
        let old = std::mem::replace(self, Segment::with_buckets(buckets));
        for e in old.into_entries() {
            let sh = slot_hash(&e);
            self.insert_absent(sh, e);
        }
    }

    /// Every entry, consuming the segment.
    pub(crate) fn into_entries(self) -> impl Iterator<Item = Entry> {
        self.buckets
            .into_iter()
            .flat_map(|b| b.slots.into_iter().flatten())
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.buckets.iter().flat_map(|b| b.slots.iter().flatten())
    }

    /// Removes the entries `remove` picks, handing each to `removed`.
    pub(crate) fn remove_if(
        &mut self,
        mut remove: impl FnMut(&Entry) -> bool,
        mut removed: impl FnMut(Entry),
    ) {
        for bucket in &mut self.buckets {
            for i in 0..SLOTS {
                if bucket.slots[i].as_ref().is_some_and(&mut remove) {
                    bucket.tags[i] = TOMB;
                    self.len -= 1;
                    self.tombs += 1;
                    removed(bucket.slots[i].take().expect("checked"));
                }
            }
        }
    }

    /// The entries of bucket `i` (for sampling a random place).
    pub(crate) fn bucket(&self, i: usize) -> impl Iterator<Item = &Entry> {
        self.buckets[i].slots.iter().flatten()
    }

    /// The `i`-th entry in slot order (for picking a random one).
    pub(crate) fn nth(&self, i: usize) -> Option<&Entry> {
        self.iter().nth(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_is_harmless() {
        let mut s = Segment::new();
        s.prefetch(12345); // no buckets yet
        s.rebuild(2, |_| 0);
        s.insert_absent(7, e("x"));
        for h in [0u64, 1, 7, u64::MAX] {
            s.prefetch(h);
            s.prefetch_entry(h);
        }
        assert_eq!(s.len(), 1);
    }

    fn e(k: &str) -> Entry {
        Entry::new_str(k.as_bytes(), b"v", None, false, 0)
    }

    fn sh(k: &str) -> u64 {
        crate::table::hash_key(k.as_bytes()).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    #[test]
    fn a_bucket_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Bucket>(), 64);
        assert_eq!(std::mem::align_of::<Bucket>(), 64);
    }

    #[test]
    fn insert_find_take_and_tombstones() {
        let mut s = Segment::with_buckets(4);
        for i in 0..24 {
            let k = format!("k{i}");
            assert!(!s.full());
            s.insert_absent(sh(&k), e(&k));
        }
        assert!(s.full());
        for i in 0..24 {
            let k = format!("k{i}");
            let p = s.find(sh(&k), k.as_bytes()).expect("present");
            assert_eq!(s.at(p).key(), k.as_bytes());
        }
        let p = s.find(sh("k3"), b"k3").unwrap();
        assert_eq!(s.take(p).key(), b"k3");
        assert!(s.find(sh("k3"), b"k3").is_none());
        assert_eq!(s.len(), 23);
        // Every other key is still found past the tombstone, which still counts as used.
        for i in (0..24).filter(|&i| i != 3) {
            let k = format!("k{i}");
            assert!(s.find(sh(&k), k.as_bytes()).is_some());
        }
        assert!(s.full());
        s.rebuild(8, |x| sh(std::str::from_utf8(x.key()).unwrap()));
        s.insert_absent(sh("new"), e("new"));
        assert!(s.find(sh("new"), b"new").is_some());
        assert_eq!(s.len(), 24);
        assert_eq!(s.iter().count(), 24);
        let mut gone = 0;
        s.remove_if(|x| x.key().len() == 2, |_| gone += 1);
        // k0..k9 but k3 (taken above) have two-byte keys.
        assert_eq!(gone, 9);
        assert_eq!(s.len(), 15);
    }
}
