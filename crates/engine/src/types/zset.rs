//! The sorted set value type.
//!
//! Placeholder representation until the sorted set commands are built (issue 3): no command
//! creates a sorted set yet, so nothing reaches this code from the network.

/// A sorted set value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZSet {
    items: Vec<Vec<u8>>,
}

impl ZSet {
    pub fn new() -> ZSet {
        ZSet::default()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// OBJECT ENCODING's name for the current representation.
    pub fn encoding(&self) -> &'static str {
        "zset"
    }

    /// Approximate heap bytes used.
    pub fn memory(&self) -> usize {
        self.items.iter().map(|i| i.capacity() + 24).sum()
    }
}
