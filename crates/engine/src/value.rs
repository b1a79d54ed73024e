//! A value stored out of line: a string that grew (APPEND, SETRANGE, SETBIT) or a collection.
//!
//! Small strings and small (listpack) hashes live inside the entry's block (see `entry.rs`);
//! everything else is one boxed [`Value`] the block points to, so the table slot and the entry
//! stay small whatever the type.

use crate::types::{Hash, List, Set, ZSet};

/// The type of a value, as TYPE reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    String,
    List,
    Set,
    ZSet,
    Hash,
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
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::Str(_) => ValueType::String,
            Value::Hash(_) => ValueType::Hash,
            Value::List(_) => ValueType::List,
            Value::Set(_) => ValueType::Set,
            Value::ZSet(_) => ValueType::ZSet,
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
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
