//! The replication backlog: the last `repl-backlog-size` bytes of the replication stream, so
//! that a replica that lost its link for a moment (or the replicas of a primary that was just
//! promoted) can continue from the offset it reached instead of loading a whole snapshot.
//!
//! Offsets are the stream's, as Redis counts them: the first byte ever written to the stream
//! of a history has offset `master_repl_offset + 1` at the time the backlog was created, and a
//! replica that processed everything up to offset `n` asks for `n + 1`. The backlog remembers
//! the offset of its oldest byte ([`Backlog::first_byte_offset`], INFO's
//! `repl_backlog_first_byte_offset`) and how many bytes it holds ([`Backlog::histlen`]), so it
//! can serve any offset in `first_byte_offset ..= first_byte_offset + histlen` (the last one:
//! nothing to send yet, the replica is up to date).
//!
//! Memory grows with what was written, up to the configured size, and never beyond it: a
//! backlog of 1 GB configured on an idle server costs nothing. Once full, it is a ring over one
//! allocation (new bytes overwrite the oldest), so feeding the stream never allocates.

/// Redis's smallest backlog (`CONFIG_REPL_BACKLOG_MIN_SIZE`): a smaller `repl-backlog-size`
/// is raised to it.
pub const MIN_SIZE: usize = 16 * 1024;

/// The last `size` bytes of the replication stream.
#[derive(Debug, Clone)]
pub struct Backlog {
    /// The bytes, in stream order from `head` (wrapping) once `data.len() == size`, from 0
    /// before that.
    data: Vec<u8>,
    /// Index in `data` of the oldest byte (0 until the ring is full).
    head: usize,
    size: usize,
    /// The stream offset of the oldest byte held.
    first: i64,
}

impl Backlog {
    /// An empty backlog of `size` bytes (at least [`MIN_SIZE`]) whose first byte will have
    /// offset `next_offset` (`master_repl_offset + 1`).
    pub fn new(size: usize, next_offset: i64) -> Backlog {
        Backlog {
            data: Vec::new(),
            head: 0,
            size: size.max(MIN_SIZE),
            first: next_offset,
        }
    }

    /// The configured size (INFO's `repl_backlog_size`).
    pub fn size(&self) -> usize {
        self.size
    }

    /// Bytes held (INFO's `repl_backlog_histlen`).
    pub fn histlen(&self) -> usize {
        self.data.len()
    }

    /// The stream offset of the oldest byte held (INFO's `repl_backlog_first_byte_offset`).
    pub fn first_byte_offset(&self) -> i64 {
        self.first
    }

    /// The offset the next byte fed will have.
    pub fn next_offset(&self) -> i64 {
        self.first + self.data.len() as i64
    }

    /// Appends the stream's next bytes, dropping the oldest beyond the size.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if self.data.len() < self.size {
            let k = bytes.len().min(self.size - self.data.len());
            self.data.extend_from_slice(&bytes[..k]);
            bytes = &bytes[k..];
            if bytes.is_empty() {
                return;
            }
        }
        // Full: the new bytes overwrite the oldest.
        let size = self.size;
        self.first += bytes.len() as i64;
        if bytes.len() >= size {
            self.data.copy_from_slice(&bytes[bytes.len() - size..]);
            self.head = 0;
            return;
        }
        let tail = (size - self.head).min(bytes.len());
        self.data[self.head..self.head + tail].copy_from_slice(&bytes[..tail]);
        let rest = bytes.len() - tail;
        self.data[..rest].copy_from_slice(&bytes[tail..]);
        self.head = (self.head + bytes.len()) % size;
    }

    /// Whether a replica asking for `offset` (the first byte it lacks) can be served from
    /// here: Redis's `psync_offset >= repl_backlog->offset && psync_offset <= offset + histlen`.
    pub fn covers(&self, offset: i64) -> bool {
        offset >= self.first && offset <= self.next_offset()
    }

    /// The bytes from stream offset `offset` to the end, as two slices (the ring may wrap);
    /// None when [`Backlog::covers`] is false.
    pub fn read_from(&self, offset: i64) -> Option<(&[u8], &[u8])> {
        if !self.covers(offset) {
            return None;
        }
        let skip = (offset - self.first) as usize;
        // The ring's oldest bytes run from `head` to the end, the newest from 0 to `head`.
        let (newest, oldest) = self.data.split_at(self.head);
        if skip < oldest.len() {
            Some((&oldest[skip..], newest))
        } else {
            Some((&newest[skip - oldest.len()..], &[]))
        }
    }

    /// Changes the size (CONFIG SET repl-backlog-size), keeping the newest bytes that fit.
    pub fn resize(&mut self, size: usize) {
        let size = size.max(MIN_SIZE);
        if size == self.size {
            return;
        }
        let keep = self.data.len().min(size);
        let drop = self.data.len() - keep;
        let (a, b) = self
            .read_from(self.first)
            .expect("the first offset is covered");
        let mut data = Vec::with_capacity(keep);
        if drop < a.len() {
            data.extend_from_slice(&a[drop..]);
            data.extend_from_slice(b);
        } else {
            data.extend_from_slice(&b[drop - a.len()..]);
        }
        self.data = data;
        self.head = 0;
        self.first += drop as i64;
        self.size = size;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(b: &Backlog, from: i64) -> Vec<u8> {
        let (x, y) = b.read_from(from).unwrap();
        [x, y].concat()
    }

    #[test]
    fn a_new_backlog_serves_only_its_next_offset() {
        let b = Backlog::new(MIN_SIZE, 101);
        assert_eq!((b.first_byte_offset(), b.histlen()), (101, 0));
        assert!(b.covers(101));
        assert!(!b.covers(100) && !b.covers(102));
        assert_eq!(all(&b, 101), b"");
    }

    #[test]
    fn a_full_backlog_keeps_the_newest_bytes_across_the_wrap() {
        let mut b = Backlog::new(MIN_SIZE, 1);
        let stream: Vec<u8> = (0..MIN_SIZE * 3 + 17).map(|i| (i % 251) as u8).collect();
        for piece in stream.chunks(1000) {
            b.feed(piece);
        }
        let first = (stream.len() - MIN_SIZE) as i64 + 1;
        assert_eq!(b.first_byte_offset(), first);
        assert_eq!(b.histlen(), MIN_SIZE);
        assert_eq!(all(&b, first), &stream[stream.len() - MIN_SIZE..]);
        assert_eq!(
            all(&b, first + 5000),
            &stream[stream.len() - MIN_SIZE + 5000..]
        );
        assert!(!b.covers(first - 1));
    }

    #[test]
    fn resizing_keeps_the_newest_bytes_that_fit() {
        let mut b = Backlog::new(MIN_SIZE * 2, 1);
        let stream: Vec<u8> = (0..MIN_SIZE * 5).map(|i| (i % 253) as u8).collect();
        b.feed(&stream);
        b.resize(MIN_SIZE);
        assert_eq!(b.histlen(), MIN_SIZE);
        let first = b.first_byte_offset();
        assert_eq!(all(&b, first), &stream[stream.len() - MIN_SIZE..]);
        b.feed(b"abc");
        assert_eq!(b.next_offset(), stream.len() as i64 + 4);
    }

    #[test]
    fn a_size_under_the_minimum_is_raised_to_it() {
        assert_eq!(Backlog::new(10, 1).size(), MIN_SIZE);
    }
}
