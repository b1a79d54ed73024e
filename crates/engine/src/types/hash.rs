//! The hash value type.
//!
//! Placeholder representation until the hash commands are built (issue 3): no command
//! creates a hash yet, so nothing reaches this code from the network.

/// A hash value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hash {
    items: Vec<Vec<u8>>,
}

impl Hash {
    pub fn new() -> Hash {
        Hash::default()
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
        "hash"
    }

    /// Approximate heap bytes used.
    pub fn memory(&self) -> usize {
        self.items.iter().map(|i| i.capacity() + 24).sum()
    }
}
