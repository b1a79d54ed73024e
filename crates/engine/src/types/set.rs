//! The set value type.
//!
//! Placeholder representation until the set commands are built (issue 3): no command
//! creates a set yet, so nothing reaches this code from the network.

/// A set value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Set {
    items: Vec<Vec<u8>>,
}

impl Set {
    pub fn new() -> Set {
        Set::default()
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
        "set"
    }

    /// Approximate heap bytes used.
    pub fn memory(&self) -> usize {
        self.items.iter().map(|i| i.capacity() + 24).sum()
    }
}
