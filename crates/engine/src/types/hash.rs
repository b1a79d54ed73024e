//! The hash value type (Redis's t_hash.c encodings).
//!
//! Two representations, as in Redis:
//! - **listpack** (small hashes): ONE exact-size byte buffer of `field, value` pairs, each
//!   string prefixed by its varint length, in insertion order (an update keeps the position,
//!   as Redis's listpack does, so HGETALL's order matches Redis's for small hashes). An element
//!   costs its bytes plus two length bytes; lookups are a linear scan, which is why the buffer
//!   is limited to `hash-max-listpack-entries` pairs of at most `hash-max-listpack-value` bytes.
//! - **hashtable** (everything else): a [`DenseTable`] (see `dense.rs`): elements back to back
//!   in small exact-size buckets under an extendible-hashing directory, ~3 bytes of overhead
//!   per element plus ~6-9 bytes of bucket/directory share, O(1) operations and no rehash pause.
//!
//! A hash converts from listpack to hashtable when it gets too many fields or a too long
//! field or value, and never back (Redis's rule).

use super::dense::DenseTable;
use super::Limits;

/// A hash value.
#[derive(Clone, Debug)]
pub enum Hash {
    /// One exact-size buffer (a boxed slice, not a Vec: 8 bytes less per hash, which keeps
    /// every keyspace value at 32 bytes).
    Pack { buf: Box<[u8]>, len: u32 },
    /// Boxed: a small hash (the common case) then costs a 32-byte `Hash`, not an 80-byte one.
    Table(Box<DenseTable>),
}

impl Default for Hash {
    fn default() -> Hash {
        Hash::new()
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], p: &mut usize) -> usize {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let c = b[*p];
        *p += 1;
        v |= u64::from(c & 0x7f) << shift;
        if c < 0x80 {
            return v as usize;
        }
        shift += 7;
    }
}

/// One pair of a listpack buffer: (start, key range, value range, end).
type PackSlot = (usize, (usize, usize), (usize, usize), usize);

fn pack_next(b: &[u8], p: usize) -> PackSlot {
    let mut q = p;
    let klen = get_varint(b, &mut q);
    let vlen = get_varint(b, &mut q);
    let k = (q, q + klen);
    let v = (k.1, k.1 + vlen);
    (p, k, v, v.1)
}

fn pack_find(b: &[u8], field: &[u8]) -> Option<PackSlot> {
    let mut p = 0;
    while p < b.len() {
        let s = pack_next(b, p);
        if &b[s.1 .0..s.1 .1] == field {
            return Some(s);
        }
        p = s.3;
    }
    None
}

fn pack_encode(out: &mut Vec<u8>, field: &[u8], value: &[u8]) {
    put_varint(out, field.len() as u64);
    put_varint(out, value.len() as u64);
    out.extend_from_slice(field);
    out.extend_from_slice(value);
}

/// Iterator over a hash's (field, value) pairs.
pub enum Iter<'a> {
    Pack(&'a [u8], usize),
    Table(Box<dyn Iterator<Item = (&'a [u8], &'a [u8])> + 'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Pack(b, p) => {
                if *p >= b.len() {
                    return None;
                }
                let s = pack_next(b, *p);
                *p = s.3;
                Some((&b[s.1 .0..s.1 .1], &b[s.2 .0..s.2 .1]))
            }
            Iter::Table(it) => it.next(),
        }
    }
}

impl Hash {
    pub fn new() -> Hash {
        Hash::Pack {
            buf: Box::default(),
            len: 0,
        }
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match self {
            Hash::Pack { len, .. } => *len as usize,
            Hash::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING's name for the current representation.
    pub fn encoding(&self) -> &'static str {
        match self {
            Hash::Pack { .. } => "listpack",
            Hash::Table(_) => "hashtable",
        }
    }

    /// Approximate heap bytes used.
    pub fn memory(&self) -> usize {
        match self {
            Hash::Pack { buf, .. } => buf.len(),
            Hash::Table(t) => std::mem::size_of::<DenseTable>() + t.memory(),
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            Hash::Pack { buf, .. } => pack_find(buf, field).map(|s| &buf[s.2 .0..s.2 .1]),
            Hash::Table(t) => t.get(field).map(|(v, _)| v),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Converts to the hashtable encoding (no-op if already there).
    pub fn convert(&mut self) {
        if let Hash::Pack { buf, .. } = self {
            let mut t = DenseTable::new();
            for (k, v) in Iter::Pack(buf, 0) {
                t.insert(k, v, None);
            }
            *self = Hash::Table(Box::new(t));
        }
    }

    /// Redis's `hashTypeTryConversion`: converts a listpack hash before a write if any of the
    /// strings about to be written is longer than `hash-max-listpack-value`.
    pub fn convert_for<'a>(&mut self, limits: &Limits, args: impl IntoIterator<Item = &'a [u8]>) {
        if matches!(self, Hash::Pack { .. })
            && args
                .into_iter()
                .any(|a| a.len() > limits.hash_max_listpack_value)
        {
            self.convert();
        }
    }

    /// Sets `field` to `value`. Returns true if the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        self.convert_for(limits, [field, value]);
        let new = match self {
            Hash::Pack { buf, len } => match pack_find(buf, field) {
                Some(s) => {
                    if s.2 .1 - s.2 .0 == value.len() {
                        buf[s.2 .0..s.2 .1].copy_from_slice(value);
                    } else {
                        let mut enc = Vec::with_capacity(field.len() + value.len() + 4);
                        pack_encode(&mut enc, field, value);
                        let mut v = std::mem::take(buf).into_vec();
                        v.splice(s.0..s.3, enc);
                        *buf = v.into_boxed_slice();
                    }
                    false
                }
                None => {
                    // Exact size: a small hash pays for its bytes only.
                    let mut v = std::mem::take(buf).into_vec();
                    v.reserve_exact(field.len() + value.len() + 4);
                    pack_encode(&mut v, field, value);
                    *buf = v.into_boxed_slice();
                    *len += 1;
                    true
                }
            },
            Hash::Table(t) => t.insert(field, value, None),
        };
        if self.len() > limits.hash_max_listpack_entries {
            self.convert();
        }
        new
    }

    /// Removes `field`. Returns whether it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Pack { buf, len } => match pack_find(buf, field) {
                Some(s) => {
                    let mut v = std::mem::take(buf).into_vec();
                    v.drain(s.0..s.3);
                    *buf = v.into_boxed_slice();
                    *len -= 1;
                    true
                }
                None => false,
            },
            Hash::Table(t) => t.remove(field).is_some(),
        }
    }

    /// Every (field, value): insertion order for a listpack, table order otherwise.
    pub fn iter(&self) -> Iter<'_> {
        match self {
            Hash::Pack { buf, .. } => Iter::Pack(buf, 0),
            Hash::Table(t) => Iter::Table(Box::new(t.iter().map(|(k, v, _)| (k, v)))),
        }
    }

    /// One HSCAN step. A listpack hash is returned whole with cursor 0 (as Redis does); a
    /// table is scanned by hash position (see `DenseTable::scan`). Returns the next cursor.
    pub fn scan<'a>(
        &'a self,
        cursor: u64,
        count: usize,
        mut f: impl FnMut(&'a [u8], &'a [u8]),
    ) -> u64 {
        match self {
            Hash::Pack { .. } => {
                for (k, v) in self.iter() {
                    f(k, v);
                }
                0
            }
            Hash::Table(t) => t.scan(cursor, count, |(k, v, _)| f(k, v)),
        }
    }

    /// A random (field, value), None when empty. `rand` yields random numbers.
    pub fn random(&self, mut rand: impl FnMut() -> u64) -> Option<(&[u8], &[u8])> {
        match self {
            Hash::Pack { len, .. } => {
                if *len == 0 {
                    return None;
                }
                let i = (rand() % u64::from(*len)) as usize;
                self.iter().nth(i)
            }
            Hash::Table(t) => t.random(rand).map(|(k, v, _)| (k, v)),
        }
    }
}

impl Hash {
    /// One bounded step of field expiry (for the server's active expiry cycle): visits up to
    /// `max_buckets` buckets of a table and removes fields whose expiry is at or before
    /// `now_ms`. Returns how many it removed. No command sets a field expiry yet (HEXPIRE is
    /// not implemented), so this finds nothing today; the entry format already carries one.
    pub fn remove_expired(&mut self, now_ms: i64, max_buckets: usize) -> usize {
        match self {
            Hash::Pack { .. } => 0,
            Hash::Table(t) => t.remove_expired(now_ms, max_buckets).len(),
        }
    }
}

impl PartialEq for Hash {
    fn eq(&self, other: &Hash) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn limits(entries: usize, value: usize) -> Limits {
        Limits {
            hash_max_listpack_entries: entries,
            hash_max_listpack_value: value,
            ..Limits::default()
        }
    }

    #[test]
    fn listpack_keeps_insertion_order_and_converts_on_count() {
        let l = limits(3, 64);
        let mut h = Hash::new();
        assert!(h.set(b"b", b"1", &l));
        assert!(h.set(b"a", b"2", &l));
        assert!(!h.set(b"b", b"333", &l));
        let pairs: Vec<_> = h.iter().collect();
        assert_eq!(
            pairs,
            vec![(&b"b"[..], &b"333"[..]), (&b"a"[..], &b"2"[..])]
        );
        assert!(h.set(b"c", b"", &l));
        assert_eq!(h.encoding(), "listpack");
        assert!(h.set(b"d", b"4", &l));
        assert_eq!(h.encoding(), "hashtable");
        // Never back.
        assert!(h.remove(b"d") && h.remove(b"c") && h.remove(b"a"));
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"b"), Some(&b"333"[..]));
    }

    #[test]
    fn a_small_hash_value_is_small() {
        assert!(std::mem::size_of::<Hash>() <= 32);
    }

    #[test]
    fn long_strings_convert() {
        let l = limits(128, 4);
        let mut h = Hash::new();
        h.set(b"f", b"1234", &l);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f", b"12345", &l);
        assert_eq!(h.encoding(), "hashtable");
        let mut h = Hash::new();
        h.set(b"fffff", b"1", &l);
        assert_eq!(h.encoding(), "hashtable");
        let mut h = Hash::new();
        h.convert_for(&l, [&b"x"[..], &b"yyyyy"[..]]);
        assert_eq!(h.encoding(), "hashtable");
    }

    #[test]
    fn listpack_scan_and_random() {
        let l = Limits::default();
        let mut h = Hash::new();
        for i in 0..10 {
            h.set(format!("f{i}").as_bytes(), b"v", &l);
        }
        let mut n = 0;
        assert_eq!(h.scan(0, 1, |_, _| n += 1), 0);
        assert_eq!(n, 10);
        let mut r = 0;
        let (k, _) = h
            .random(|| {
                r += 7;
                r
            })
            .unwrap();
        assert_eq!(k, b"f7");
        assert!(Hash::new().random(|| 1).is_none());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn behaves_like_a_hashmap(
            ops in proptest::collection::vec(
                (any::<bool>(), 0u8..60, proptest::collection::vec(any::<u8>(), 0..12)), 0..400),
            entries in 0usize..40,
            value in 0usize..10,
        ) {
            let l = limits(entries, value);
            let mut h = Hash::new();
            let mut m: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
            let mut was_table = false;
            for (ins, k, v) in ops {
                let k = vec![k];
                if ins {
                    prop_assert_eq!(h.set(&k, &v, &l), m.insert(k.clone(), v.clone()).is_none());
                    if v.len() > value { prop_assert_eq!(h.encoding(), "hashtable"); }
                } else {
                    prop_assert_eq!(h.remove(&k), m.remove(&k).is_some());
                }
                prop_assert_eq!(h.len(), m.len());
                if h.len() > entries { prop_assert_eq!(h.encoding(), "hashtable"); }
                if was_table { prop_assert_eq!(h.encoding(), "hashtable"); }
                was_table = h.encoding() == "hashtable";
            }
            let all: HashMap<Vec<u8>, Vec<u8>> = h.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
            prop_assert_eq!(all, m);
        }
    }
}
