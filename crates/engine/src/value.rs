//! A value stored out of line: a string that grew (APPEND, SETRANGE, SETBIT) or a collection.
//!
//! Small strings and small (listpack) hashes live inside the entry's block (see `entry.rs`);
//! everything else is one boxed [`Value`] the block points to, so the table slot and the entry
//! stay small whatever the type.

use crate::types::{Hash, List, Set, Stream, ZSet};

/// The type of a value, as TYPE reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    String,
    List,
    Set,
    ZSet,
    Hash,
    Stream,
}

impl ValueType {
    /// TYPE's reply (and SCAN TYPE's argument).
    pub fn name(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::List => "list",
            ValueType::Set => "set",
            ValueType::ZSet => "zset",
            ValueType::Hash => "hash",
            ValueType::Stream => "stream",
        }
    }

    /// The type named `name` (case-insensitive), as SCAN TYPE accepts it.
    pub fn by_name(name: &[u8]) -> Option<ValueType> {
        [
            ValueType::String,
            ValueType::List,
            ValueType::Set,
            ValueType::ZSet,
            ValueType::Hash,
            ValueType::Stream,
        ]
        .into_iter()
        .find(|t| t.name().as_bytes().eq_ignore_ascii_case(name))
    }
}

/// An out-of-line value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(Vec<u8>),
    Hash(Hash),
    /// Boxed: `List` is 48 bytes and would make every value (a small hash, a small set) cost
    /// that much; a list then pays one extra small allocation.
    List(Box<List>),
    Set(Set),
    ZSet(ZSet),
    /// Boxed: a stream's metadata is about 100 bytes.
    Stream(Box<Stream>),
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::Str(_) => ValueType::String,
            Value::Hash(_) => ValueType::Hash,
            Value::List(_) => ValueType::List,
            Value::Set(_) => ValueType::Set,
            Value::ZSet(_) => ValueType::ZSet,
            Value::Stream(_) => ValueType::Stream,
        }
    }

    /// OBJECT ENCODING of a collection ("raw" for an out-of-line string).
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(_) => "raw",
            Value::Hash(h) => h.encoding(),
            Value::List(l) => l.encoding(),
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
            Value::Stream(_) => "stream",
        }
    }

    /// Approximate heap bytes used beyond the `Value` itself.
    pub fn memory(&self) -> usize {
        match self {
            Value::Str(s) => s.capacity(),
            Value::Hash(h) => h.memory(),
            Value::List(l) => l.memory(),
            Value::Set(s) => s.memory(),
            Value::ZSet(z) => z.memory(),
            Value::Stream(s) => std::mem::size_of::<Stream>() + s.memory(),
        }
    }

    /// Elements in a collection (bytes for a string).
    pub fn len(&self) -> usize {
        match self {
            Value::Str(s) => s.len(),
            Value::Hash(h) => h.len(),
            Value::List(l) => l.len(),
            Value::Set(s) => s.len(),
            Value::ZSet(z) => z.len(),
            Value::Stream(s) => s.len() as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frees part of a value that is being thrown away (the server's lazy freeing): about
    /// `budget` allocations, from the back of its storage. Returns how many it freed; 0 once
    /// what is left is one or a few allocations, cheap to drop at once. The value is only fit
    /// to be dropped afterwards (its indexes point at freed parts).
    pub fn free_step(&mut self, budget: usize) -> usize {
        match self {
            Value::Hash(Hash::Table(t)) => t.free_step(budget),
            Value::Set(Set::Table(t)) => t.free_step(budget),
            Value::Set(Set::Expiring(t)) => t.free_step(budget),
            Value::List(l) => l.free_step(budget),
            Value::ZSet(z) => z.free_step(budget),
            Value::Stream(s) => s.free_step(budget),
            _ => 0,
        }
    }

    /// Roughly how many frees dropping this value takes (Redis's lazyfreeGetFreeEffort): one
    /// for a string, the element count for a collection (an upper bound: compact encodings
    /// are a single buffer).
    pub fn free_effort(&self) -> usize {
        match self {
            Value::Str(_) => 1,
            _ => self.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::Entry;
    use crate::table::Table;
    use crate::types::zset::AddFlags;
    use crate::types::Limits;

    fn big_values() -> Vec<Value> {
        let lim = Limits::default();
        let mut h = Hash::new();
        let mut s = Set::default();
        let mut l = List::default();
        l.grow_check(1 << 20, 5000, lim.list_max_listpack_size, 0);
        let mut z = ZSet::new();
        for i in 0..5000 {
            let m = format!("member:{i}");
            h.set(m.as_bytes(), b"v", &lim);
            s.insert(m.as_bytes(), &lim);
            l.push(m.as_bytes(), false, lim.list_max_listpack_size);
            z.add(m.as_bytes(), i as f64, AddFlags::default(), &lim);
        }
        vec![
            Value::Hash(h),
            Value::Set(s),
            Value::List(Box::new(l)),
            Value::ZSet(z),
        ]
    }

    #[test]
    fn big_values_are_freed_in_bounded_steps() {
        for mut v in big_values() {
            let name = v.encoding();
            let mut steps = 0;
            loop {
                let n = v.free_step(4);
                assert!(n <= 4, "{name}: {n} in one step");
                if n == 0 {
                    break;
                }
                steps += 1;
                assert!(steps < 10_000, "{name} never ends");
            }
            assert!(steps > 1, "{name}: freed in {steps} steps");
            drop(v);
        }
    }

    #[test]
    fn a_flushed_table_is_drained_segment_by_segment() {
        let mut t = Table::new();
        for i in 0..20_000 {
            let k = format!("key:{i}");
            t.insert(Entry::new_str(k.as_bytes(), b"v", None, false, 0));
        }
        let (mut seen, mut steps) = (0, 0);
        while !t.drain_step(1, |_| seen += 1) {
            steps += 1;
        }
        assert_eq!(seen, 20_000);
        assert_eq!(t.len(), 0);
        assert!(steps > 4, "{steps} steps");
    }
}
