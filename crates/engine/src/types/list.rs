//! The list value type.
//!
//! Placeholder representation until the list commands are built (issue 3): no command
//! creates a list yet, so nothing reaches this code from the network.

/// A list value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct List {
    items: Vec<Vec<u8>>,
}

impl List {
    pub fn new() -> List {
        List::default()
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
        "list"
    }

    /// Approximate heap bytes used.
    pub fn memory(&self) -> usize {
        self.items.iter().map(|i| i.capacity() + 24).sum()
    }
}
