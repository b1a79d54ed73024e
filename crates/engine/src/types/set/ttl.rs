//! Member TTLs of one set (Dragonfly's SADDEX and FIELDEXPIRE): the side structure a set
//! allocates only once a member gets a TTL (see the essay in `mod.rs`).
//!
//! Two indexes over the same (member, unix ms) pairs:
//! - `by_member`, a hash map: a member's expiry in O(1) (FIELDTTL, SADDEX KEEPTTL, SREM);
//! - `by_time`, an ordered set of (expiry, member): the next member due in O(log n), so that
//!   lazy expiry costs O(1) when nothing is due and O(k log n) for k due members, and the
//!   active sweep removes members in expiry order without scanning the set.
//!
//! Memory per member with a TTL: the member's bytes twice (one copy per index, each a boxed
//! slice with its allocation overhead) plus about 16 + 8 bytes of hash-map slot (at its load
//! factor) and 16 + 8 bytes of B-tree element with the node overhead: roughly 80 bytes + 2 x
//! its length (about 103 bytes for an 11-byte member, measured through INFO memory).

use std::collections::{BTreeSet, HashMap};

type Seed = foldhash::quality::RandomState;

#[derive(Clone, Default)]
pub struct MemberTtls {
    by_member: HashMap<Box<[u8]>, i64, Seed>,
    by_time: BTreeSet<(i64, Box<[u8]>)>,
    /// Sum of the members' lengths (for `memory` in O(1)).
    bytes: usize,
}

impl MemberTtls {
    pub fn new() -> MemberTtls {
        MemberTtls::default()
    }

    /// Members with a TTL.
    pub fn len(&self) -> usize {
        self.by_member.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_member.is_empty()
    }

    /// The expiry (unix ms) of `m`, if it has one.
    pub fn get(&self, m: &[u8]) -> Option<i64> {
        self.by_member.get(m).copied()
    }

    /// Gives `m` the expiry `at`, replacing any it had.
    pub fn set(&mut self, m: &[u8], at: i64) {
        match self.by_member.get_mut(m) {
            Some(old) => {
                if *old == at {
                    return;
                }
                let prev = std::mem::replace(old, at);
                // Why: the B-tree owns its own copy, moved from the old element to the new one.
                let key = self
                    .by_time
                    .take(&(prev, Box::from(m)))
                    .map_or_else(|| Box::from(m), |(_, k)| k);
                self.by_time.insert((at, key));
            }
            None => {
                self.bytes += m.len();
                self.by_member.insert(Box::from(m), at);
                self.by_time.insert((at, Box::from(m)));
            }
        }
    }

    /// Removes the TTL of `m`; false if it had none.
    pub fn clear(&mut self, m: &[u8]) -> bool {
        match self.by_member.remove(m) {
            Some(at) => {
                self.bytes -= m.len();
                self.by_time.remove(&(at, Box::from(m)));
                true
            }
            None => false,
        }
    }

    /// The earliest expiry, if any.
    pub fn next_due(&self) -> Option<i64> {
        self.by_time.first().map(|(t, _)| *t)
    }

    /// Removes and returns the member that expires first if its expiry is at or before
    /// `now_ms`.
    pub fn pop_due(&mut self, now_ms: i64) -> Option<Box<[u8]>> {
        if self.next_due()? > now_ms {
            return None;
        }
        let (_, m) = self.by_time.pop_first()?;
        self.by_member.remove(&m);
        self.bytes -= m.len();
        Some(m)
    }

    /// Approximate heap bytes used.
    pub fn memory(&self) -> usize {
        let bytes = 2 * self.bytes;
        // Hash-map slot (key + value + control byte) at its capacity, B-tree element plus
        // about a third of it again for node headers and slack.
        bytes + self.by_member.capacity() * 25 + self.by_time.len() * 32
    }

    /// Every (member, expiry), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], i64)> {
        self.by_member.iter().map(|(k, &v)| (&k[..], v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn set_replace_clear_and_pop_in_time_order() {
        let mut t = MemberTtls::new();
        t.set(b"a", 30);
        t.set(b"b", 10);
        t.set(b"c", 20);
        t.set(b"a", 5);
        assert_eq!((t.len(), t.get(b"a"), t.next_due()), (3, Some(5), Some(5)));
        assert!(t.clear(b"c"));
        assert!(!t.clear(b"c"));
        assert_eq!(t.pop_due(4), None);
        assert_eq!(t.pop_due(10).as_deref(), Some(&b"a"[..]));
        assert_eq!(t.pop_due(10).as_deref(), Some(&b"b"[..]));
        assert_eq!(t.pop_due(100), None);
        assert!(t.is_empty());
    }

    proptest! {
        /// Against a BTreeMap model: both indexes agree with it, and members pop in expiry
        /// order.
        #[test]
        fn model(ops in proptest::collection::vec((0u8..4, 0u8..20, 0i64..50), 1..300)) {
            let mut t = MemberTtls::new();
            let mut model: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
            for (op, k, at) in ops {
                let m = vec![b'm', k];
                match op {
                    0 | 1 => {
                        t.set(&m, at);
                        model.insert(m, at);
                    }
                    2 => prop_assert_eq!(t.clear(&m), model.remove(&m).is_some()),
                    _ => {
                        let due = model.iter().filter(|(_, &e)| e <= at).min_by_key(|(_, &e)| e)
                            .map(|(_, &e)| e);
                        match t.pop_due(at) {
                            Some(got) => {
                                let e = model.remove(&got[..]);
                                prop_assert_eq!(e, due);
                            }
                            None => prop_assert!(due.is_none()),
                        }
                    }
                }
                prop_assert_eq!(t.len(), model.len());
                prop_assert_eq!(t.by_time.len(), model.len());
                prop_assert_eq!(t.next_due(), model.values().min().copied());
                prop_assert_eq!(t.bytes, model.keys().map(Vec::len).sum::<usize>());
                for (m, e) in &model {
                    prop_assert_eq!(t.get(m), Some(*e));
                }
            }
        }
    }
}
