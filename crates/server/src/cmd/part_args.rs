//! A transaction part's arguments, owned by the part that carries them to another thread.
//!
//! Why: a request's arguments are slices of the connection's read buffer and share its one
//! reference count. Moved as they are into the parts of a multi-shard command (an MSET of 10
//! keys over 8 shards runs on six or seven threads), each is dropped on another core: an
//! atomic decrement of that one count from there, contending with the connection's thread
//! taking the next request's slices: a profile of MSET of 10 keys at 8 threads on 16 cores
//! (perf, cpu-clock) had 3.2% of the server's CPU in those drops. A copy of a few dozen bytes
//! costs less than one contended cache line, so small arguments are copied into one buffer
//! per part, and the originals are dropped on the connection's thread; large ones
//! (a copy would cost more than the count) still travel as shared slices.

use bytes::Bytes;
use smallvec::SmallVec;

/// Arguments up to this size are copied.
const COPY_MAX: usize = 256;

enum Item {
    /// `buf[start..end]`.
    Copied(u32, u32),
    Shared(Bytes),
}

/// Owned arguments in the order pushed; read them with [`PartArgs::get`] / [`PartArgs::iter`].
#[derive(Default)]
pub struct PartArgs {
    buf: Vec<u8>,
    items: SmallVec<[Item; 8]>,
}

impl PartArgs {
    pub fn new() -> PartArgs {
        PartArgs::default()
    }

    /// Takes `a` (its drop, when copied, happens here, on the connection's thread).
    pub fn push(&mut self, a: Bytes) {
        if a.len() <= COPY_MAX && self.buf.len() + a.len() <= u32::MAX as usize {
            let start = self.buf.len() as u32;
            self.buf.extend_from_slice(&a);
            self.items.push(Item::Copied(start, self.buf.len() as u32));
        } else {
            self.items.push(Item::Shared(a));
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn get(&self, i: usize) -> &[u8] {
        match &self.items[i] {
            Item::Copied(s, e) => &self.buf[*s as usize..*e as usize],
            Item::Shared(b) => b,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.items.len()).map(|i| self.get(i))
    }

    /// The arguments as a vector of borrowed slices (for prefetching and the like).
    pub fn views(&self) -> SmallVec<[&[u8]; 16]> {
        self.iter().collect()
    }
}

impl FromIterator<Bytes> for PartArgs {
    fn from_iter<I: IntoIterator<Item = Bytes>>(iter: I) -> PartArgs {
        let mut p = PartArgs::new();
        for a in iter {
            p.push(a);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_arguments_are_copied_and_large_ones_shared_in_order() {
        let big = Bytes::from(vec![7u8; COPY_MAX + 1]);
        let args = [
            Bytes::from_static(b"k1"),
            big.clone(),
            Bytes::new(),
            Bytes::from_static(b"v"),
        ];
        let p: PartArgs = args.iter().cloned().collect();
        assert_eq!(p.len(), 4);
        let got: Vec<&[u8]> = p.iter().collect();
        let want: Vec<&[u8]> = args.iter().map(|a| a.as_ref()).collect();
        assert_eq!(got, want);
        assert!(matches!(p.items[0], Item::Copied(..)));
        assert!(matches!(p.items[1], Item::Shared(_)));
        // The shared one is the same allocation, not a copy.
        assert_eq!(p.get(1).as_ptr(), big.as_ptr());
    }
}
