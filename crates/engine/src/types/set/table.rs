//! The big-set encoding ("hashtable" to OBJECT ENCODING): a compact bucketed hash table of
//! byte-string members, addressed through an extendible-hashing directory.
//!
//! Each bucket is one exact-size `Box<[u8]>`:
//!
//! ```text
//! [local depth: u8][count: u16 LE][tag: u8; count][len: varint, bytes]*count
//! ```
//!
//! A tag is the top byte of the member's 64-bit hash; a lookup reads the tags first and walks
//! the entries only when one matches, so a miss costs one bucket read. The directory maps the
//! low `depth` bits of a hash to a bucket index; a bucket of local depth `d` owns every
//! directory slot whose low `d` bits match its own. A full bucket splits on bit `d` into two
//! buckets of depth `d + 1` (the directory doubles first when `d` is the global depth): growth
//! touches one bucket at a time, never the whole set, so no insert pauses for an O(n) rehash
//! (the directory doubling copies 4 bytes per slot, about half a byte per member).
//!
//! Memory per member: its bytes + a one-byte length (for members under 128 bytes) + a one-byte
//! tag; per bucket of about 11 members: the 3-byte header, the allocator's rounding, 16 bytes
//! of boxed slice pointer and 4 to 8 bytes of directory. For 10-byte members that is about
//! 16 bytes each, against 50+ for a pointer-per-member hash set.
//!
//! Members are hashed with a per-table random seed (no precomputed collisions); the seed never
//! changes for the life of the table, so a hash's directory slot only ever refines, which is
//! what lets SSCAN's cursor (a reverse-binary walk over the hash bits, as Redis's dict scan)
//! return every member present for a whole iteration.

use std::hash::BuildHasher;

type Seed = foldhash::quality::RandomState;

const HDR: usize = 3;
/// A bucket that holds this many members splits before taking another.
const SPLIT_AT: usize = 16;
/// Directory depth bound: beyond it a bucket grows instead of splitting. Distinct members
/// sharing 40 hash bits in numbers are not a realistic case with a random seed; the bound only
/// keeps a pathological input from doubling the directory without end.
const MAX_DEPTH: u8 = 40;
/// A bucket never holds more than this (the count is a u16).
const MAX_COUNT: usize = u16::MAX as usize;

#[derive(Clone)]
pub struct MemberTable {
    /// Bucket index per directory slot (2^depth slots).
    dir: Vec<u32>,
    depth: u8,
    buckets: Vec<Box<[u8]>>,
    len: usize,
    seed: Seed,
}

impl Default for MemberTable {
    fn default() -> Self {
        Self::new()
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Reads a varint at `*at`, advancing it.
fn get_varint(b: &[u8], at: &mut usize) -> usize {
    let mut v = 0usize;
    let mut shift = 0;
    loop {
        let c = b[*at];
        *at += 1;
        v |= ((c & 0x7f) as usize) << shift;
        if c < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn count_of(b: &[u8]) -> usize {
    u16::from_le_bytes([b[1], b[2]]) as usize
}

fn tag_of(h: u64) -> u8 {
    (h >> 56) as u8
}

/// The members of one bucket, in order.
struct Entries<'a> {
    b: &'a [u8],
    at: usize,
    left: usize,
}

impl<'a> Iterator for Entries<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let len = get_varint(self.b, &mut self.at);
        let m = &self.b[self.at..self.at + len];
        self.at += len;
        Some(m)
    }
}

fn entries(b: &[u8]) -> Entries<'_> {
    let n = count_of(b);
    Entries {
        b,
        at: HDR + n,
        left: n,
    }
}

/// Builds a bucket of depth `depth` from (tag, member) pairs.
fn build<'a>(depth: u8, items: impl Iterator<Item = (u8, &'a [u8])> + Clone) -> Box<[u8]> {
    let (mut n, mut size) = (0usize, HDR);
    for (_, m) in items.clone() {
        n += 1;
        size += 1 + varint_len(m.len()) + m.len();
    }
    let mut out = Vec::with_capacity(size);
    out.push(depth);
    out.extend_from_slice(&(n as u16).to_le_bytes());
    out.extend(items.clone().map(|(t, _)| t));
    for (_, m) in items {
        put_varint(&mut out, m.len());
        out.extend_from_slice(m);
    }
    out.into_boxed_slice()
}

impl MemberTable {
    /// See [`crate::value::Value::free_step`]: drops buckets from the end (one allocation
    /// each).
    pub(crate) fn free_step(&mut self, budget: usize) -> usize {
        let k = budget.max(1).min(self.buckets.len());
        self.buckets.truncate(self.buckets.len() - k);
        self.len = 0;
        k
    }

    pub fn new() -> MemberTable {
        MemberTable {
            dir: vec![0],
            depth: 0,
            buckets: vec![build(0, std::iter::empty())],
            len: 0,
            seed: Seed::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn hash(&self, m: &[u8]) -> u64 {
        self.seed.hash_one(m)
    }

    fn slot(&self, h: u64) -> usize {
        (h & ((1u64 << self.depth) - 1)) as usize
    }

    /// Position (index, byte offset of the entry) of `m` in bucket `b`.
    fn find(b: &[u8], tag: u8, m: &[u8]) -> Option<(usize, usize)> {
        let n = count_of(b);
        let tags = &b[HDR..HDR + n];
        // Why: a miss (the common case of SADD of a new member) usually ends here.
        if !tags.contains(&tag) {
            return None;
        }
        let mut at = HDR + n;
        for (i, &t) in tags.iter().enumerate() {
            let start = at;
            let len = get_varint(b, &mut at);
            if t == tag && len == m.len() && &b[at..at + len] == m {
                return Some((i, start));
            }
            at += len;
        }
        None
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        let h = self.hash(m);
        let b = &self.buckets[self.dir[self.slot(h)] as usize];
        Self::find(b, tag_of(h), m).is_some()
    }

    /// Adds `m`; false if it was already a member.
    pub fn insert(&mut self, m: &[u8]) -> bool {
        let h = self.hash(m);
        loop {
            let bi = self.dir[self.slot(h)] as usize;
            let b = &self.buckets[bi];
            if Self::find(b, tag_of(h), m).is_some() {
                return false;
            }
            let n = count_of(b);
            if n >= SPLIT_AT && b[0] < MAX_DEPTH && n < MAX_COUNT {
                self.split(bi, h);
                continue;
            }
            if n >= MAX_COUNT {
                // Unreachable with a random seed; refuse rather than corrupt the count.
                return false;
            }
            let mut out = Vec::with_capacity(b.len() + 1 + varint_len(m.len()) + m.len());
            out.push(b[0]);
            out.extend_from_slice(&((n + 1) as u16).to_le_bytes());
            out.extend_from_slice(&b[HDR..HDR + n]);
            out.push(tag_of(h));
            out.extend_from_slice(&b[HDR + n..]);
            put_varint(&mut out, m.len());
            out.extend_from_slice(m);
            self.buckets[bi] = out.into_boxed_slice();
            self.len += 1;
            return true;
        }
    }

    /// Splits bucket `bi` (the bucket of hash `h`) on its next hash bit, doubling the
    /// directory first if needed.
    fn split(&mut self, bi: usize, h: u64) {
        let d = self.buckets[bi][0];
        if d == self.depth {
            self.dir.extend_from_within(..);
            self.depth += 1;
        }
        let bit = 1u64 << d;
        let old = std::mem::take(&mut self.buckets[bi]);
        let hashed: Vec<(u64, &[u8])> = entries(&old).map(|m| (self.hash(m), m)).collect();
        let low = hashed
            .iter()
            .filter(|(h, _)| h & bit == 0)
            .map(|&(h, m)| (tag_of(h), m));
        let high = hashed
            .iter()
            .filter(|(h, _)| h & bit != 0)
            .map(|&(h, m)| (tag_of(h), m));
        let nb = self.buckets.len();
        self.buckets[bi] = build(d + 1, low);
        self.buckets.push(build(d + 1, high));
        // The bucket's slots are `pattern + k * 2^d`; those with bit d set move to the new one.
        let mut i = (h & (bit - 1)) as usize;
        while i < self.dir.len() {
            if i as u64 & bit != 0 {
                self.dir[i] = nb as u32;
            }
            i += bit as usize;
        }
    }

    /// Removes `m`; false if it was not a member.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        let h = self.hash(m);
        let bi = self.dir[self.slot(h)] as usize;
        let b = &self.buckets[bi];
        let Some((idx, start)) = Self::find(b, tag_of(h), m) else {
            return false;
        };
        let n = count_of(b);
        let mut end = start;
        let len = get_varint(b, &mut end);
        end += len;
        let mut out = Vec::with_capacity(b.len() - (end - start) - 1);
        out.push(b[0]);
        out.extend_from_slice(&((n - 1) as u16).to_le_bytes());
        out.extend_from_slice(&b[HDR..HDR + idx]);
        out.extend_from_slice(&b[HDR + idx + 1..start]);
        out.extend_from_slice(&b[end..]);
        self.buckets[bi] = out.into_boxed_slice();
        self.len -= 1;
        // Why: after mass deletion most buckets are empty, which wastes memory and makes random
        // picks retry; rebuild once the set is down to ~1/8 of what its buckets were sized for
        // (amortized O(1) per removal, as a hash table shrink). Same seed: scans stay valid.
        if self.buckets.len() > 64 && self.len * 8 < self.buckets.len() * SPLIT_AT / 2 {
            self.rebuild();
        }
        true
    }

    fn rebuild(&mut self) {
        let mut fresh = MemberTable {
            dir: vec![0],
            depth: 0,
            buckets: vec![build(0, std::iter::empty())],
            len: 0,
            seed: self.seed,
        };
        self.for_each(|m| {
            fresh.insert(m);
        });
        *self = fresh;
    }

    /// Every member, in storage order.
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        for b in &self.buckets {
            for m in entries(b) {
                f(m);
            }
        }
    }

    /// A member chosen at random from `r` (roughly uniform: a random non-empty bucket, then a
    /// random member of it). None only when empty.
    pub fn random(&self, mut r: u64) -> Option<&[u8]> {
        if self.len == 0 {
            return None;
        }
        let nb = self.buckets.len() as u64;
        let mut bi = (r % nb) as usize;
        for _ in 0..64 {
            if count_of(&self.buckets[bi]) > 0 {
                break;
            }
            r = r
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            bi = ((r >> 16) % nb) as usize;
        }
        while count_of(&self.buckets[bi]) == 0 {
            bi = (bi + 1) % self.buckets.len();
        }
        let b = &self.buckets[bi];
        let k = ((r >> 24) % count_of(b) as u64) as usize;
        entries(b).nth(k)
    }

    /// One SSCAN step from `cursor`: calls `f` for the members of directory slots visited,
    /// until about `count` members were given or the walk is over; returns the next cursor
    /// (0 at the end). A slot's members are those whose low `depth` hash bits equal it: that
    /// is a property of the hash alone, so splits never move a member between slots, and the
    /// reverse-binary cursor stays right when the directory doubles (or shrinks on rebuild).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8])) -> u64 {
        let mask = (1u64 << self.depth) - 1;
        let mut v = cursor;
        let mut given = 0usize;
        let mut visited = 0usize;
        loop {
            let slot = (v & mask) as usize;
            let b = &self.buckets[self.dir[slot] as usize];
            for m in entries(b) {
                if self.hash(m) & mask == slot as u64 {
                    f(m);
                    given += 1;
                }
            }
            visited += 1;
            // Reverse-binary increment of the masked bits (Redis's dictScan cursor).
            v |= !mask;
            v = v.reverse_bits();
            v = v.wrapping_add(1);
            v = v.reverse_bits();
            if v == 0 || given >= count || visited >= count.saturating_mul(10) {
                return v;
            }
        }
    }

    /// Approximate heap bytes used.
    pub fn memory(&self) -> usize {
        // Why 8 per bucket: a small allocation's rounding and header, on average.
        self.dir.len() * 4
            + self.buckets.len() * (16 + 8)
            + self.buckets.iter().map(|b| b.len()).sum::<usize>()
    }
}

impl std::fmt::Debug for MemberTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberTable")
            .field("len", &self.len)
            .field("depth", &self.depth)
            .field("buckets", &self.buckets.len())
            .finish()
    }
}

// ---- Resumable iteration (streamed replies) -------------------------------------------------

impl MemberTable {
    /// Visits whole buckets from bucket index `from`, in [`MemberTable::for_each`]'s order,
    /// until at least `min` members were visited. Returns the bucket to resume at (None: the
    /// table ended). Valid only while the table is not modified between calls.
    pub fn for_each_from(
        &self,
        from: usize,
        min: usize,
        mut f: impl FnMut(&[u8]),
    ) -> Option<usize> {
        let mut bi = from;
        let mut n = 0;
        while bi < self.buckets.len() && n < min.max(1) {
            for m in entries(&self.buckets[bi]) {
                f(m);
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
    use std::collections::BTreeSet;

    fn all(t: &MemberTable) -> BTreeSet<Vec<u8>> {
        let mut s = BTreeSet::new();
        t.for_each(|m| {
            assert!(s.insert(m.to_vec()), "duplicate {m:?}");
        });
        s
    }

    #[test]
    fn grows_by_splits_and_shrinks_by_rebuild() {
        let mut t = MemberTable::new();
        for i in 0..20_000u32 {
            assert!(t.insert(format!("member:{i:06}").as_bytes()));
        }
        assert!(!t.insert(b"member:000007"));
        assert_eq!(t.len(), 20_000);
        assert!(t.depth > 8);
        for i in 0..20_000u32 {
            assert!(t.contains(format!("member:{i:06}").as_bytes()));
        }
        assert!(!t.contains(b"member:x"));
        // Every bucket is owned by slots matching its pattern, at its depth.
        for (slot, &bi) in t.dir.iter().enumerate() {
            let b = &t.buckets[bi as usize];
            for m in entries(b) {
                let d = b[0];
                assert_eq!(t.hash(m) & ((1 << d) - 1), slot as u64 & ((1 << d) - 1));
            }
        }
        let big = t.buckets.len();
        for i in 0..19_990u32 {
            assert!(t.remove(format!("member:{i:06}").as_bytes()));
        }
        assert!(!t.remove(b"member:000000"));
        assert!(t.buckets.len() < big / 10);
        assert_eq!(all(&t).len(), 10);
        assert!(t.random(12345).is_some());
    }

    #[test]
    fn binary_and_long_members() {
        let mut t = MemberTable::new();
        let long = vec![0xffu8; 100_000];
        assert!(t.insert(b""));
        assert!(t.insert(&long));
        assert!(t.insert(b"\x00\r\n"));
        assert!(t.contains(&long) && t.contains(b"") && t.contains(b"\x00\r\n"));
        assert!(t.remove(&long));
        assert_eq!(all(&t), [b"".to_vec(), b"\x00\r\n".to_vec()].into());
    }

    #[test]
    fn scan_returns_everything_across_growth() {
        let mut t = MemberTable::new();
        for i in 0..500u32 {
            t.insert(format!("a{i}").as_bytes());
        }
        let mut seen = BTreeSet::new();
        let mut cursor = 0;
        let mut added = 0u32;
        loop {
            cursor = t.scan(cursor, 7, |m| {
                seen.insert(m.to_vec());
            });
            // Grow the table while scanning: the original members must all be returned.
            for _ in 0..40 {
                t.insert(format!("b{added}").as_bytes());
                added += 1;
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..500u32 {
            assert!(seen.contains(format!("a{i}").as_bytes()), "missed a{i}");
        }
    }

    #[test]
    fn scan_returns_everything_across_a_shrinking_rebuild() {
        let mut t = MemberTable::new();
        for i in 0..100u32 {
            t.insert(format!("keep{i}").as_bytes());
        }
        for i in 0..20_000u32 {
            t.insert(format!("tmp{i}").as_bytes());
        }
        let depth = t.depth;
        let mut seen = BTreeSet::new();
        let mut cursor = t.scan(0, 50, |m| {
            seen.insert(m.to_vec());
        });
        for i in 0..20_000u32 {
            t.remove(format!("tmp{i}").as_bytes());
        }
        assert!(t.depth < depth, "the table was rebuilt smaller");
        while cursor != 0 {
            cursor = t.scan(cursor, 5, |m| {
                seen.insert(m.to_vec());
            });
        }
        for i in 0..100u32 {
            assert!(
                seen.contains(format!("keep{i}").as_bytes()),
                "missed keep{i}"
            );
        }
    }

    proptest! {
        #[test]
        fn model(ops in proptest::collection::vec((0u8..3, 0u16..600), 0..3000)) {
            let mut t = MemberTable::new();
            let mut m = BTreeSet::new();
            for (op, k) in ops {
                let key = format!("k{k}").into_bytes();
                match op {
                    0 | 1 => prop_assert_eq!(t.insert(&key), m.insert(key.clone())),
                    _ => prop_assert_eq!(t.remove(&key), m.remove(&key)),
                }
                prop_assert_eq!(t.len(), m.len());
            }
            prop_assert_eq!(all(&t), m.clone());
            for k in 0..600u16 {
                let key = format!("k{k}").into_bytes();
                prop_assert_eq!(t.contains(&key), m.contains(&key));
            }
            // A full scan returns every member exactly as the model has it.
            let mut seen = BTreeSet::new();
            let mut c = 0;
            loop {
                c = t.scan(c, 3, |x| { seen.insert(x.to_vec()); });
                if c == 0 { break; }
            }
            prop_assert_eq!(seen, m);
        }
    }
}

#[cfg(test)]
mod resumable_tests {
    use super::*;

    #[test]
    fn for_each_from_in_steps_equals_for_each() {
        let mut t = MemberTable::new();
        for i in 0..5_000u32 {
            t.insert(format!("m{i}").as_bytes());
        }
        let mut all = Vec::new();
        t.for_each(|m| all.push(m.to_vec()));
        for step in [1, 7, 100, 10_000] {
            let mut got = Vec::new();
            let mut at = Some(0);
            while let Some(from) = at {
                at = t.for_each_from(from, step, |m| got.push(m.to_vec()));
            }
            assert_eq!(got, all, "step {step}");
        }
    }
}
