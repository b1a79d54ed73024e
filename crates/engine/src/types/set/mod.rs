//! The set value type (Redis's t_set.c), in three encodings chosen by Redis 7.2's rules.
//!
//! - `intset`: every member is an integer in canonical form (Redis's string2ll: no sign but
//!   `-`, no leading zero, no "-0") and there are at most `set-max-intset-entries` of them. A
//!   sorted `Vec<i64>`: 8 bytes a member, membership by binary search, ordered replies as Redis.
//! - `listpack`: at most `set-max-listpack-entries` members of at most
//!   `set-max-listpack-value` bytes. One byte buffer of (varint length, bytes) entries: 1 byte
//!   of overhead a member, linear search (the set is small by definition).
//! - `hashtable`: anything bigger. [`MemberTable`] (see table.rs), a bucketed table of
//!   exact-size byte chunks: about 2 bytes of overhead a member plus bucket and directory
//!   costs (about 16 bytes in all for a 10-byte member), O(1) lookups and inserts, and growth
//!   one bucket at a time.
//!
//! Conversions follow Redis 7.2 exactly (they are visible through OBJECT ENCODING): a new set
//! is an intset if its first member is an integer and the command adds at most
//! set-max-intset-entries members, else a listpack if it adds at most set-max-listpack-entries,
//! else a hashtable; an intset that takes a non-integer becomes a listpack when it is small
//! enough (fewer than set-max-listpack-entries members, the new member and the widest integer
//! within set-max-listpack-value bytes) and a hashtable otherwise; an intset that outgrows
//! set-max-intset-entries becomes a hashtable; a listpack that would outgrow its limits becomes
//! a hashtable. Removing members never converts back; commands that build a new set (the
//! *STORE commands, SPOP with a big count) choose its encoding as Redis does, through the
//! constructors here.
//!
//! The hashtable encoding sits behind the small [`MemberTable`] interface (insert, remove,
//! contains, for_each, random, scan) so that it can be replaced by a shared dense table.
//!
//! **Member TTLs** (Dragonfly's SADDEX and FIELDEXPIRE; Redis has none). A set whose member
//! gets a TTL becomes [`Set::Expiring`]: its members move to the hashes' [`DenseTable`]
//! (dense.rs, with empty values), which keeps a TTL inline after its element behind a flag
//! bit: a member with a TTL costs 8 bytes more, one without nothing more, and a member of this
//! table costs about one byte more than in a [`MemberTable`] (its empty value's length).
//! Measured through INFO memory, 100,000 11-byte members: 17 bytes a member in a plain
//! hashtable set, 24 when SADDEX gave each a TTL. The
//! table counts its TTLs and indexes them by bucket, so "is any member due?" is O(1) and
//! removing the due members visits only the buckets that hold them (dense.rs), as for
//! hashes; the active cycle removes them a few buckets at a time. A set without TTLs is untouched: same three encodings, same
//! 32-byte `Set`, and a database holding no field TTLs does not even look at its sets for
//! them. OBJECT ENCODING reports "hashtable", as Dragonfly does (it converts an intset or
//! listpack to its hash table on SADDEX). The set stays in this encoding when its last TTL
//! goes (Redis's never-back rule; and a set going to and from one TTL must not be copied each
//! time).
//!
//! Expired members are not removed here by themselves: the database removes them before any
//! command sees the set ([`Set::due`], [`Set::remove_all_expired`]; crates/engine/src/db.rs)
//! and its active cycle sweeps sets with TTLs in bounded steps ([`Set::remove_expired`]). A
//! copy of the value (COPY, RENAME, MOVE) keeps the TTLs; a result computed from members (the
//! *STORE commands, SMOVE's destination) has none, as in Dragonfly.

mod table;

pub use table::MemberTable;

use super::dense::DenseTable;
use super::Limits;

/// A set value.
#[derive(Clone)]
pub enum Set {
    Ints(Vec<i64>),
    Pack(Pack),
    /// Boxed so that a small set (the common case) costs a 32-byte `Set`.
    Table(Box<MemberTable>),
    /// A hashtable whose members may carry TTLs (see the module essay): members are the
    /// keys of a [`DenseTable`], with empty values.
    Expiring(Box<DenseTable>),
}

/// The listpack encoding: (varint length, bytes) entries in insertion order.
#[derive(Clone, Default)]
pub struct Pack {
    buf: Vec<u8>,
    n: usize,
}

fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

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

impl Pack {
    fn iter(&self) -> PackIter<'_> {
        PackIter {
            b: &self.buf,
            at: 0,
        }
    }

    /// Byte range of the entry holding `m`.
    fn find(&self, m: &[u8]) -> Option<(usize, usize)> {
        let mut at = 0;
        while at < self.buf.len() {
            let start = at;
            let len = get_varint(&self.buf, &mut at);
            if len == m.len() && &self.buf[at..at + len] == m {
                return Some((start, at + len));
            }
            at += len;
        }
        None
    }

    fn push(&mut self, m: &[u8]) {
        put_varint(&mut self.buf, m.len());
        self.buf.extend_from_slice(m);
        self.n += 1;
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        match self.find(m) {
            Some((s, e)) => {
                self.buf.drain(s..e);
                self.n -= 1;
                if self.buf.capacity() > 2 * self.buf.len() + 64 {
                    self.buf.shrink_to_fit();
                }
                true
            }
            None => false,
        }
    }
}

struct PackIter<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Iterator for PackIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.at >= self.b.len() {
            return None;
        }
        let len = get_varint(self.b, &mut self.at);
        let m = &self.b[self.at..self.at + len];
        self.at += len;
        Some(m)
    }
}

/// Redis's string2ll: the integer `b` spells in canonical form, if any.
pub fn canonical_int(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    if b == b"0" {
        return Some(0);
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut v: i128 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i128::from(c - b'0');
    }
    let v = if neg { -v } else { v };
    i64::try_from(v).ok()
}

/// Formats `v` into `buf`, returning the digits.
pub fn format_int(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Characters of `v` written in decimal (Redis's sdigits10).
fn digits10(v: i64) -> usize {
    let mut buf = [0u8; 20];
    format_int(v, &mut buf).len()
}

/// set-max-intset-entries as Redis applies it (capped at 2^30).
fn intset_max(lim: &Limits) -> usize {
    lim.set_max_intset_entries.min(1 << 30)
}

impl Default for Set {
    fn default() -> Self {
        Set::Ints(Vec::new())
    }
}

impl Set {
    /// An empty intset (the start of a *STORE result, as Redis's createIntsetObject).
    pub fn new() -> Set {
        Set::Ints(Vec::new())
    }

    /// An empty listpack.
    pub fn new_listpack() -> Set {
        Set::Pack(Pack::default())
    }

    /// A new, empty set for a command about to add `hint` members, the first being `first`
    /// (Redis's setTypeCreate).
    pub fn create(first: &[u8], hint: usize, lim: &Limits) -> Set {
        if canonical_int(first).is_some() && hint <= intset_max(lim) {
            Set::Ints(Vec::new())
        } else if hint <= lim.set_max_listpack_entries {
            Set::Pack(Pack::default())
        } else {
            Set::Table(Box::default())
        }
    }

    /// Before adding `hint` members to an existing set: converts to a hashtable at once when
    /// they could not fit the compact encoding (Redis's setTypeMaybeConvert).
    pub fn reserve(&mut self, hint: usize, lim: &Limits) {
        let convert = match self {
            Set::Ints(_) => hint > intset_max(lim),
            Set::Pack(_) => hint > lim.set_max_listpack_entries,
            Set::Table(_) | Set::Expiring(_) => false,
        };
        if convert {
            self.convert_to_table();
        }
    }

    /// A listpack or hash table of canonical integers becomes an intset when it fits one
    /// (Redis 7.2's maybeConvertToIntset on SINTERSTORE's result, whatever its encoding).
    pub fn compact_ints(&mut self, lim: &Limits) {
        // A listpack or a hash table (a result past set-max-listpack-entries); not a set
        // with member TTLs, which an intset cannot hold.
        if !matches!(self, Set::Pack(_) | Set::Table(_)) || self.len() > intset_max(lim) {
            return;
        }
        let mut v = Vec::with_capacity(self.len());
        let mut all = true;
        self.for_each(|m| match canonical_int(m) {
            Some(i) if all => v.push(i),
            _ => all = false,
        });
        if all {
            v.sort_unstable();
            *self = Set::Ints(v);
        }
    }

    fn convert_to_table(&mut self) {
        let mut t = MemberTable::new();
        self.for_each(|m| {
            t.insert(m);
        });
        *self = Set::Table(Box::new(t));
    }

    pub fn len(&self) -> usize {
        match self {
            Set::Ints(v) => v.len(),
            Set::Pack(p) => p.n,
            Set::Table(t) => t.len(),
            Set::Expiring(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING's name for the current representation.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Ints(_) => "intset",
            Set::Pack(_) => "listpack",
            Set::Table(_) | Set::Expiring(_) => "hashtable",
        }
    }

    /// Approximate heap bytes used.
    pub fn memory(&self) -> usize {
        match self {
            Set::Ints(v) => v.capacity() * 8,
            Set::Pack(p) => p.buf.capacity(),
            Set::Table(t) => t.memory(),
            Set::Expiring(t) => std::mem::size_of::<DenseTable>() + t.memory(),
        }
    }

    /// Whether `m` is a member whose TTL, if any, is after `now_ms` (for reads of named
    /// members that leave expired ones in place: `DbView::get_point`).
    pub fn contains_at(&self, m: &[u8], now_ms: i64) -> bool {
        match self {
            Set::Expiring(t) => t.get(m).is_some_and(|(_, e)| e.is_none_or(|e| e > now_ms)),
            s => s.contains(m),
        }
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match self {
            Set::Ints(v) => canonical_int(m).is_some_and(|i| v.binary_search(&i).is_ok()),
            Set::Pack(p) => p.find(m).is_some(),
            Set::Table(t) => t.contains(m),
            Set::Expiring(t) => t.get(m).is_some(),
        }
    }

    /// Adds `m` (converting as Redis's setTypeAdd does); false if it was already a member.
    pub fn insert(&mut self, m: &[u8], lim: &Limits) -> bool {
        match self {
            Set::Ints(v) => {
                if let Some(i) = canonical_int(m) {
                    let Err(at) = v.binary_search(&i) else {
                        return false;
                    };
                    v.insert(at, i);
                    if v.len() > intset_max(lim) {
                        self.convert_to_table();
                    }
                    return true;
                }
                let widest = match (v.first(), v.last()) {
                    (Some(&a), Some(&b)) => digits10(a).max(digits10(b)),
                    _ => 0,
                };
                if v.len() < lim.set_max_listpack_entries
                    && m.len() <= lim.set_max_listpack_value
                    && widest <= lim.set_max_listpack_value
                {
                    let mut p = Pack::default();
                    let mut buf = [0u8; 20];
                    for &i in v.iter() {
                        p.push(format_int(i, &mut buf));
                    }
                    p.push(m);
                    *self = Set::Pack(p);
                } else {
                    self.convert_to_table();
                    self.insert(m, lim);
                }
                true
            }
            Set::Pack(p) => {
                if p.find(m).is_some() {
                    return false;
                }
                if p.n < lim.set_max_listpack_entries && m.len() <= lim.set_max_listpack_value {
                    p.push(m);
                } else {
                    self.convert_to_table();
                    self.insert(m, lim);
                }
                true
            }
            Set::Table(t) => t.insert(m),
            // A member already there keeps its TTL (Dragonfly's SADD).
            Set::Expiring(t) => t.get(m).is_none() && t.insert(m, b"", None),
        }
    }

    /// Removes `m`; false if it was not a member. Never changes the encoding.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            Set::Ints(v) => match canonical_int(m).map(|i| v.binary_search(&i)) {
                Some(Ok(at)) => {
                    v.remove(at);
                    true
                }
                _ => false,
            },
            Set::Pack(p) => p.remove(m),
            Set::Table(t) => t.remove(m),
            Set::Expiring(t) => t.remove(m).is_some(),
        }
    }

    /// Every member (integers of an intset in ascending order, as Redis).
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        match self {
            Set::Ints(v) => {
                let mut buf = [0u8; 20];
                for &i in v {
                    f(format_int(i, &mut buf));
                }
            }
            Set::Pack(p) => p.iter().for_each(f),
            Set::Table(t) => t.for_each(f),
            Set::Expiring(t) => t.iter().for_each(|(m, _, _)| f(m)),
        }
    }

    /// Every member, copied.
    pub fn to_vec(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(|m| out.push(m.to_vec()));
        out
    }

    /// A member chosen from the random number `r`; None when empty.
    pub fn random(&self, r: u64) -> Option<Vec<u8>> {
        match self {
            Set::Ints(v) if !v.is_empty() => {
                let mut buf = [0u8; 20];
                Some(format_int(v[(r % v.len() as u64) as usize], &mut buf).to_vec())
            }
            Set::Pack(p) if p.n > 0 => p.iter().nth((r % p.n as u64) as usize).map(<[u8]>::to_vec),
            Set::Table(t) => t.random(r).map(<[u8]>::to_vec),
            Set::Expiring(t) => {
                // The dense table draws several numbers: a generator seeded by `r`.
                let mut x = r | 1;
                t.random(|| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                })
                .map(|(m, _, _)| m.to_vec())
            }
            _ => None,
        }
    }

    /// Removes and returns a random member.
    pub fn pop_random(&mut self, r: u64) -> Option<Vec<u8>> {
        let m = self.random(r)?;
        self.remove(&m);
        Some(m)
    }

    /// One SSCAN step. The compact encodings return everything at once with cursor 0, as
    /// Redis does; a hashtable walks its directory (see [`MemberTable::scan`]).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8])) -> u64 {
        match self {
            Set::Table(t) => t.scan(cursor, count, f),
            Set::Expiring(t) => t.scan(cursor, count, |(m, _, _)| f(m)),
            _ => {
                self.for_each(f);
                0
            }
        }
    }
}

/// Member TTLs.
impl Set {
    /// Whether some member carries a TTL.
    pub fn has_ttls(&self) -> bool {
        matches!(self, Set::Expiring(t) if t.expiring() > 0)
    }

    /// Whether a member's TTL may be at or before `now_ms`: O(1), false for a set without
    /// TTLs; true only when some member is due or a lower bound went stale (the next
    /// [`Set::remove_all_expired`] makes it exact).
    pub fn due(&self, now_ms: i64) -> bool {
        matches!(self, Set::Expiring(t) if t.may_have_expired(now_ms))
    }

    /// `None`: not a member; `Some(None)`: no TTL; `Some(Some(ms))`: expires at `ms`.
    pub fn expiry_of(&self, m: &[u8]) -> Option<Option<i64>> {
        match self {
            Set::Expiring(t) => t.get(m).map(|(_, e)| e),
            s => s.contains(m).then_some(None),
        }
    }

    /// Makes this set able to hold member TTLs (its members move to a dense table).
    fn make_expiring(&mut self) -> &mut DenseTable {
        if !matches!(self, Set::Expiring(_)) {
            let mut t = DenseTable::new();
            self.for_each(|m| {
                t.insert(m, b"", None);
            });
            *self = Set::Expiring(Box::new(t));
        }
        match self {
            Set::Expiring(t) => t,
            _ => unreachable!("just made expiring"),
        }
    }

    /// Sets or clears the TTL (absolute unix ms) of a present member. Returns false if `m` is
    /// not a member.
    pub fn set_expiry(&mut self, m: &[u8], at: Option<i64>) -> bool {
        if !self.contains(m) {
            return false;
        }
        match (self, at) {
            (Set::Expiring(t), _) => t.set_expiry(m, at),
            (s, Some(at)) => s.make_expiring().set_expiry(m, Some(at)),
            // No TTL to clear.
            (_, None) => true,
        }
    }

    /// SADDEX: adds `m` expiring at `at` (unix ms). A member already there gets the new TTL
    /// unless `keep_ttl`. Returns whether `m` is new.
    pub fn insert_expiring(&mut self, m: &[u8], at: i64, keep_ttl: bool) -> bool {
        let t = self.make_expiring();
        if t.get(m).is_some() {
            if !keep_ttl {
                t.set_expiry(m, Some(at));
            }
            return false;
        }
        t.insert(m, b"", Some(at))
    }

    /// One bounded step of the active cycle: visits up to `max_buckets` of the table's
    /// buckets that hold members whose TTL is at or before `now_ms`, and removes those.
    /// Returns how many it removed.
    pub fn remove_expired(&mut self, now_ms: i64, max_buckets: usize) -> usize {
        self.remove_expired_with(now_ms, max_buckets, &mut |_| {})
    }

    /// [`Set::remove_expired`], passing each removed member to `gone`.
    pub fn remove_expired_with(
        &mut self,
        now_ms: i64,
        max_buckets: usize,
        gone: &mut dyn FnMut(&[u8]),
    ) -> usize {
        match self {
            Set::Expiring(t) => super::dense::named(t.remove_expired(now_ms, max_buckets), gone),
            _ => 0,
        }
    }

    /// Whether every member has a TTL at or before `now_ms` (O(1); false when unsure): the
    /// set may then go whole, as an expired key does, instead of member by member.
    pub fn all_due(&self, now_ms: i64) -> bool {
        matches!(self, Set::Expiring(t) if t.all_due(now_ms))
    }

    /// Removes every member whose TTL is at or before `now_ms`: O(1) unless one may be due
    /// ([`Set::due`]), then a visit of the buckets that hold due members. Returns how many
    /// it removed.
    pub fn remove_all_expired(&mut self, now_ms: i64) -> usize {
        self.remove_all_expired_with(now_ms, &mut |_| {})
    }

    /// [`Set::remove_all_expired`], passing each removed member to `gone`.
    pub fn remove_all_expired_with(&mut self, now_ms: i64, gone: &mut dyn FnMut(&[u8])) -> usize {
        match self {
            Set::Expiring(t) if t.may_have_expired(now_ms) => {
                let n = t.buckets();
                super::dense::named(t.remove_expired(now_ms, n), gone)
            }
            _ => 0,
        }
    }

    /// Every (member, expiry) of the members with a TTL.
    pub fn ttls(&self) -> Vec<(Vec<u8>, i64)> {
        match self {
            Set::Expiring(t) => t
                .iter()
                .filter_map(|(m, _, e)| e.map(|e| (m.to_vec(), e)))
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl PartialEq for Set {
    fn eq(&self, other: &Set) -> bool {
        if self.len() != other.len() {
            return false;
        }
        let mut all = true;
        self.for_each(|m| all &= other.contains(m));
        all
    }
}

impl std::fmt::Debug for Set {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Set({}, {} members)", self.encoding(), self.len())
    }
}

// ---- Resumable iteration (streamed replies) -------------------------------------------------

impl Set {
    /// Resumable [`Set::for_each`]: visits members from position `at` (0 to start) until at
    /// least `min` were visited; returns where to resume (None: done). A listpack is visited
    /// whole. Valid only while the set is not modified between calls.
    pub fn for_each_from(&self, at: usize, min: usize, mut f: impl FnMut(&[u8])) -> Option<usize> {
        match self {
            Set::Ints(v) => {
                let end = at.saturating_add(min.max(1)).min(v.len());
                let mut buf = [0u8; 20];
                for &i in v.get(at..end).unwrap_or(&[]) {
                    f(format_int(i, &mut buf));
                }
                (end < v.len()).then_some(end)
            }
            Set::Pack(p) => {
                if at == 0 {
                    p.iter().for_each(f);
                }
                None
            }
            Set::Table(t) => t.for_each_from(at, min, f),
            Set::Expiring(t) => t.for_each_from(at, min, |(m, _, _)| f(m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn lim(ints: usize, entries: usize, value: usize) -> Limits {
        Limits {
            set_max_intset_entries: ints,
            set_max_listpack_entries: entries,
            set_max_listpack_value: value,
            ..Limits::default()
        }
    }

    fn members(s: &Set) -> BTreeSet<Vec<u8>> {
        s.to_vec().into_iter().collect()
    }

    #[test]
    fn canonical_ints_follow_string2ll() {
        for (s, v) in [
            (&b"0"[..], Some(0)),
            (b"-1", Some(-1)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-0", None),
            (b"01", None),
            (b"+1", None),
            (b" 1", None),
            (b"1 ", None),
            (b"", None),
            (b"-", None),
            (b"1.0", None),
        ] {
            assert_eq!(canonical_int(s), v, "{s:?}");
        }
        let mut buf = [0u8; 20];
        assert_eq!(format_int(i64::MIN, &mut buf), b"-9223372036854775808");
        assert_eq!(format_int(0, &mut buf), b"0");
        assert_eq!(digits10(-100), 4);
    }

    #[test]
    fn creation_follows_the_first_member_and_the_hint() {
        let l = Limits::default();
        assert_eq!(Set::create(b"1", 1, &l).encoding(), "intset");
        assert_eq!(Set::create(b"1", 512, &l).encoding(), "intset");
        assert_eq!(Set::create(b"1", 513, &l).encoding(), "hashtable");
        assert_eq!(Set::create(b"a", 128, &l).encoding(), "listpack");
        assert_eq!(Set::create(b"a", 129, &l).encoding(), "hashtable");
        assert_eq!(Set::create(b"01", 1, &l).encoding(), "listpack");
        let mut s = Set::create(b"1", 1, &l);
        s.insert(b"1", &l);
        s.reserve(200, &l);
        assert_eq!(s.encoding(), "intset");
        s.reserve(513, &l);
        assert_eq!(s.encoding(), "hashtable");
        let mut p = Set::create(b"a", 1, &l);
        p.insert(b"a", &l);
        p.reserve(129, &l);
        assert_eq!(p.encoding(), "hashtable");
    }

    #[test]
    fn conversions_at_the_thresholds() {
        let l = Limits::default();
        // intset -> hashtable past 512 integers.
        let mut s = Set::new();
        for i in 0..512 {
            s.insert(i.to_string().as_bytes(), &l);
        }
        assert_eq!(s.encoding(), "intset");
        s.insert(b"512", &l);
        assert_eq!(s.encoding(), "hashtable");
        // intset of 127 -> listpack on a string; of 128 -> hashtable.
        for (n, enc) in [(127, "listpack"), (128, "hashtable")] {
            let mut s = Set::new();
            for i in 0..n {
                s.insert(i.to_string().as_bytes(), &l);
            }
            s.insert(b"x", &l);
            assert_eq!(s.encoding(), enc, "{n}");
            assert_eq!(s.len(), n + 1);
        }
        // A long string turns an intset into a hashtable; wide integers count too.
        let mut s = Set::new();
        s.insert(b"1", &l);
        s.insert(&[b'a'; 65], &l);
        assert_eq!(s.encoding(), "hashtable");
        let small = lim(512, 128, 3);
        let mut s = Set::new();
        s.insert(b"1000", &small);
        s.insert(b"ab", &small);
        assert_eq!(s.encoding(), "hashtable");
        let mut s = Set::new();
        s.insert(b"-99", &small);
        s.insert(b"ab", &small);
        assert_eq!(s.encoding(), "listpack");
        // listpack -> hashtable on the 129th member or a 65-byte one.
        let mut s = Set::new_listpack();
        for i in 0..128 {
            s.insert(format!("m{i}").as_bytes(), &l);
        }
        assert_eq!(s.encoding(), "listpack");
        s.insert(b"m0", &l);
        assert_eq!(s.encoding(), "listpack");
        s.insert(b"m128", &l);
        assert_eq!(s.encoding(), "hashtable");
        let mut s = Set::new_listpack();
        s.insert(&[b'a'; 64], &l);
        assert_eq!(s.encoding(), "listpack");
        s.insert(&[b'a'; 65], &l);
        assert_eq!(s.encoding(), "hashtable");
        // Never back.
        for i in 0..129 {
            s.remove(format!("m{i}").as_bytes());
        }
        s.remove(&[b'a'; 65]);
        assert_eq!((s.encoding(), s.len()), ("hashtable", 1));
        // An all-integer listpack can become an intset (SINTERSTORE's result).
        let mut p = Set::new_listpack();
        p.insert(b"3", &l);
        p.insert(b"-1", &l);
        p.compact_ints(&l);
        assert_eq!(p.encoding(), "intset");
        assert_eq!(p.to_vec(), vec![b"-1".to_vec(), b"3".to_vec()]);
        let mut q = Set::new_listpack();
        q.insert(b"3", &l);
        q.insert(b"03", &l);
        q.compact_ints(&l);
        assert_eq!(q.encoding(), "listpack");
    }

    #[test]
    fn random_and_pop() {
        let l = Limits::default();
        for n in [1usize, 5, 300, 1000] {
            for kind in 0..2 {
                let mut s = Set::new();
                let mut model = BTreeSet::new();
                for i in 0..n {
                    let m = if kind == 0 {
                        i.to_string()
                    } else {
                        format!("s{i}")
                    };
                    s.insert(m.as_bytes(), &l);
                    model.insert(m.into_bytes());
                }
                for r in 0..50u64 {
                    let m = s.random(r.wrapping_mul(0x9E3779B97F4A7C15)).unwrap();
                    assert!(model.contains(&m));
                }
                let mut r = 7u64;
                while let Some(m) = s.pop_random(r) {
                    r = r.wrapping_mul(6364136223846793005).wrapping_add(1);
                    assert!(model.remove(&m));
                }
                assert!(model.is_empty());
                assert!(s.random(1).is_none());
            }
        }
    }

    #[test]
    fn ttls_cost_nothing_until_used() {
        // A set value stays 32 bytes; only a set given TTLs moves to the dense table.
        assert_eq!(std::mem::size_of::<Set>(), 32);
        let l = Limits::default();
        let mut s = Set::create(b"1", 2, &l);
        s.insert(b"1", &l);
        s.insert(b"2", &l);
        assert!(!s.has_ttls() && !s.due(i64::MAX));
        assert_eq!(s.expiry_of(b"1"), Some(None));
        assert_eq!(s.expiry_of(b"3"), None);
        assert!(!s.set_expiry(b"3", Some(10)));
        assert!(s.set_expiry(b"1", Some(10)));
        assert_eq!((s.encoding(), s.has_ttls()), ("hashtable", true));
        assert_eq!(s.expiry_of(b"1"), Some(Some(10)));
        assert_eq!(s.expiry_of(b"2"), Some(None));
        // SADDEX: new members, the TTL of old ones replaced unless KEEPTTL.
        assert!(s.insert_expiring(b"x", 20, false));
        assert!(!s.insert_expiring(b"x", 30, true));
        assert_eq!(s.expiry_of(b"x"), Some(Some(20)));
        assert!(!s.insert_expiring(b"x", 5, false));
        // SADD leaves a TTL alone.
        assert!(!s.insert(b"x", &l));
        assert_eq!(s.expiry_of(b"x"), Some(Some(5)));
        assert!(!s.due(4) && s.due(5));
        assert_eq!(s.remove_all_expired(4), 0);
        assert_eq!(s.remove_all_expired(10), 2);
        assert_eq!(s.to_vec(), vec![b"2".to_vec()]);
        // The last TTL gone: still a hashtable, never a compact encoding.
        assert!(!s.has_ttls() && !s.due(i64::MAX));
        assert_eq!(s.encoding(), "hashtable");
        assert!(s.set_expiry(b"2", Some(1)));
        assert!(s.set_expiry(b"2", None));
        assert!(!s.has_ttls());
        assert!(s.set_expiry(b"2", Some(1)));
        assert!(s.remove(b"2"));
        assert!(!s.has_ttls() && s.is_empty());
        // A copy keeps the TTLs.
        let mut p = Set::new_listpack();
        p.insert_expiring(b"a", 7, false);
        let c = p.clone();
        assert_eq!(c.ttls(), vec![(b"a".to_vec(), 7)]);
    }

    fn rank(enc: &str) -> u8 {
        match enc {
            "intset" => 0,
            "listpack" => 1,
            _ => 2,
        }
    }

    proptest! {
        /// Against a BTreeSet model with small limits so that every conversion happens:
        /// same members, the encoding invariants hold, and the encoding never goes back.
        #[test]
        fn model(ops in proptest::collection::vec((0u8..4, 0u8..3, 0u16..40), 1..400),
                 ints in 1usize..20, entries in 1usize..20, value in 1usize..6) {
            let l = lim(ints, entries, value);
            let member = |kind: u8, k: u16| -> Vec<u8> {
                match kind {
                    0 => (k as i64 - 20).to_string().into_bytes(),
                    1 => format!("s{k}").into_bytes(),
                    _ => vec![b'\x00'; k as usize % 8],
                }
            };
            let (k0, m0) = (ops[0].1, ops[0].2);
            let mut s = Set::create(&member(k0, m0), 1, &l);
            let mut model = BTreeSet::new();
            let mut last = rank(s.encoding());
            for (op, kind, k) in ops {
                let m = member(kind, k);
                match op {
                    0 | 1 => prop_assert_eq!(s.insert(&m, &l), model.insert(m.clone())),
                    2 => prop_assert_eq!(s.remove(&m), model.remove(&m)),
                    _ => prop_assert_eq!(s.contains(&m), model.contains(&m)),
                }
                prop_assert_eq!(s.len(), model.len());
                let r = rank(s.encoding());
                prop_assert!(r >= last);
                last = r;
                match &s {
                    Set::Ints(v) => {
                        prop_assert!(v.len() <= ints);
                        prop_assert!(v.windows(2).all(|w| w[0] < w[1]));
                    }
                    Set::Pack(p) => {
                        prop_assert!(p.n <= entries);
                        prop_assert!(p.iter().all(|m| m.len() <= value));
                    }
                    Set::Table(_) | Set::Expiring(_) => {}
                }
            }
            prop_assert_eq!(members(&s), model);
        }

        /// Member TTLs against a model of member -> optional expiry: SADD, SADDEX (with and
        /// without KEEPTTL), SREM, FIELDEXPIRE, SPOP and expiry sweeps at rising times.
        #[test]
        fn ttl_model(ops in proptest::collection::vec((0u8..7, 0u16..30, 0i64..40), 1..300)) {
            let l = lim(4, 4, 4);
            let mut s = Set::new();
            let mut model: std::collections::BTreeMap<Vec<u8>, Option<i64>> = Default::default();
            let mut now = 0i64;
            for (op, k, t) in ops {
                let m = if k % 2 == 0 { k.to_string().into_bytes() } else { format!("m{k}").into_bytes() };
                match op {
                    0 => {
                        let new = !model.contains_key(&m);
                        if new {
                            model.insert(m.clone(), None);
                        }
                        prop_assert_eq!(s.insert(&m, &l), new);
                    }
                    1 | 2 => {
                        let keep = op == 2;
                        let at = now + t;
                        let new = !model.contains_key(&m);
                        if new || !keep {
                            model.insert(m.clone(), Some(at));
                        }
                        prop_assert_eq!(s.insert_expiring(&m, at, keep), new);
                    }
                    3 => prop_assert_eq!(s.remove(&m), model.remove(&m).is_some()),
                    4 => {
                        let at = (t % 3 != 0).then_some(now + t);
                        let there = model.contains_key(&m);
                        if there {
                            model.insert(m.clone(), at);
                        }
                        prop_assert_eq!(s.set_expiry(&m, at), there);
                    }
                    5 => {
                        if let Some(p) = s.pop_random(t as u64 * 7919) {
                            prop_assert!(model.remove(&p).is_some());
                        }
                    }
                    _ => {
                        now += t / 4;
                        let due: Vec<Vec<u8>> = model.iter()
                            .filter(|(_, e)| e.is_some_and(|e| e <= now))
                            .map(|(m, _)| m.clone()).collect();
                        // A lower bound: it may say "due" when nothing is, never the reverse.
                        prop_assert!(due.is_empty() || s.due(now));
                        let n = s.remove_all_expired(now);
                        prop_assert_eq!(n, due.len());
                        for m in due {
                            model.remove(&m);
                        }
                    }
                }
                prop_assert_eq!(s.len(), model.len());
                prop_assert_eq!(s.has_ttls(), model.values().any(Option::is_some));
                // `due` is a lower bound: never false while a member is due.
                let now_due = model.values().flatten().any(|&e| e <= now);
                prop_assert!(!now_due || s.due(now));
                for (m, e) in &model {
                    prop_assert_eq!(s.expiry_of(m), Some(*e));
                }
            }
            prop_assert_eq!(members(&s), model.keys().cloned().collect::<BTreeSet<_>>());
        }
    }
}

#[cfg(test)]
mod resumable_tests {
    use super::*;

    #[test]
    fn for_each_from_in_steps_equals_for_each_in_every_encoding() {
        let lim = Limits::default();
        for (n, ints) in [
            (100usize, true),
            (100, false),
            (3_000, true),
            (3_000, false),
        ] {
            let mut s = Set::new();
            for i in 0..n {
                let m = if ints { i.to_string() } else { format!("m{i}") };
                s.insert(m.as_bytes(), &lim);
            }
            let all = s.to_vec();
            for step in [1, 7, 5_000] {
                let mut got = Vec::new();
                let mut at = Some(0);
                while let Some(from) = at {
                    at = s.for_each_from(from, step, |m| got.push(m.to_vec()));
                }
                assert_eq!(got, all, "n {n} ints {ints} step {step} {}", s.encoding());
            }
        }
    }
}
