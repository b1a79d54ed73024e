//! [`ReplyScanner`]: where a backend's reply ends, without building it.
//!
//! Most replies pass from a backend to a client unchanged, so the proxy only needs each reply's
//! length to cut the backend's stream into replies and match them, in order, to the requests
//! in flight. `darner_resp::decode` would build every value and re-read a reply from its first
//! byte after each read, O(n²) on a large reply arriving in pieces. The scanner instead keeps
//! two numbers between reads: the offset of the next value header and how many values are
//! still owed. An aggregate header adds its element count to what is owed (twice that for a
//! map; an attribute adds without being a value itself), so nesting needs no stack and a
//! hostile depth costs nothing. A bulk payload is skipped by its length, never scanned.

use darner_resp::{Limits, ProtocolError};

/// Resumable end-of-reply finder; one per backend connection.
#[derive(Debug, Default, Clone)]
pub struct ReplyScanner {
    /// Offset of the next header to read, from the start of the reply.
    pos: usize,
    /// Values still to read; 0 between replies (the next call starts a reply).
    owed: u64,
    /// How far the search for the current header's `\n` has looked.
    searched: usize,
}

/// Longest header or simple line accepted (Redis's inline limit): a backend that sends more
/// without a line end is broken.
const MAX_LINE: usize = 64 * 1024 * 1024;

impl ReplyScanner {
    /// A scanner between replies.
    pub fn new() -> Self {
        Self::default()
    }

    /// The length of the reply at the start of `buf`, once all of it is there. `buf` must start
    /// at the reply's first byte and only grow between calls until a length is returned; the
    /// scanner is then ready for the next reply. An error is final for the connection.
    pub fn next(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<usize>, ProtocolError> {
        if self.owed == 0 {
            self.owed = 1;
            self.pos = 0;
            self.searched = 0;
        }
        while self.owed > 0 {
            let start = self.pos;
            let Some(&ty) = buf.get(start) else {
                return Ok(None);
            };
            let from = self.searched.max(start + 1);
            let nl = match buf
                .get(from..)
                .and_then(|b| b.iter().position(|&c| c == b'\n'))
            {
                Some(i) => from + i,
                None => {
                    self.searched = buf.len();
                    if buf.len() - start > MAX_LINE {
                        return Err(ProtocolError::LineTooLong);
                    }
                    return Ok(None);
                }
            };
            if nl < start + 2 || buf[nl - 1] != b'\r' {
                return Err(ProtocolError::ExpectedCrlf);
            }
            let line = &buf[start + 1..nl - 1];
            let after = nl + 1;
            let count = || -> Result<i64, ProtocolError> {
                std::str::from_utf8(line)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                    .filter(|&n| n >= -1)
                    .ok_or(ProtocolError::InvalidMultibulkLength)
            };
            match ty {
                b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => {
                    self.owed -= 1;
                    self.pos = after;
                }
                b'$' | b'!' | b'=' => {
                    let n = count().map_err(|_| ProtocolError::InvalidBulkLength)?;
                    if n < 0 {
                        self.owed -= 1;
                        self.pos = after;
                    } else {
                        let n = n as usize;
                        if n > limits.max_bulk_len {
                            return Err(ProtocolError::InvalidBulkLength);
                        }
                        let end = after + n + 2;
                        if buf.len() < end {
                            // The header is read again when more arrives: O(1), the payload
                            // itself is never scanned.
                            self.searched = start;
                            return Ok(None);
                        }
                        if &buf[end - 2..end] != b"\r\n" {
                            return Err(ProtocolError::ExpectedCrlf);
                        }
                        self.owed -= 1;
                        self.pos = end;
                    }
                }
                b'*' | b'~' | b'>' | b'%' | b'|' => {
                    let n = count()?;
                    if n > 0 && n as u64 > limits.max_multibulk_len as u64 {
                        return Err(ProtocolError::InvalidMultibulkLength);
                    }
                    let elems = match ty {
                        b'%' | b'|' => (n.max(0) as u64) * 2,
                        _ => n.max(0) as u64,
                    };
                    // An attribute annotates the value after it: it is not that value.
                    let consumes = u64::from(ty != b'|');
                    self.owed = self.owed - consumes + elems;
                    self.pos = after;
                }
                other => return Err(ProtocolError::InvalidTypeByte(other)),
            }
            self.searched = self.pos;
        }
        Ok(Some(self.pos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use darner_resp::{encode, Bytes, Frame};
    use proptest::prelude::*;

    fn frame() -> impl Strategy<Value = Frame> {
        let leaf = prop_oneof![
            "[a-z ]{0,8}".prop_map(|s| Frame::Simple(Bytes::from(s))),
            "[A-Z ]{1,8}".prop_map(|s| Frame::Error(Bytes::from(s))),
            any::<i64>().prop_map(Frame::Integer),
            proptest::collection::vec(any::<u8>(), 0..20).prop_map(|v| Frame::Bulk(Bytes::from(v))),
            Just(Frame::NullBulk),
            Just(Frame::NullArray),
            Just(Frame::Null),
            any::<bool>().prop_map(Frame::Boolean),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Frame::Array),
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Frame::Set),
                proptest::collection::vec((inner.clone(), inner.clone()), 0..3)
                    .prop_map(Frame::Map),
            ]
        })
    }

    proptest! {
        /// Fed a stream of replies in pieces of any size, the scanner finds exactly the
        /// boundaries the full decoder finds.
        #[test]
        fn boundaries_match_the_decoder(frames in proptest::collection::vec(frame(), 1..5),
                                        step in 1usize..17) {
            let mut wire = Vec::new();
            let mut ends = Vec::new();
            for f in &frames {
                encode(f, &mut wire);
                ends.push(wire.len());
            }
            let limits = Limits::default();
            let mut s = ReplyScanner::new();
            let (mut start, mut have, mut found) = (0usize, 0usize, Vec::new());
            while start < wire.len() {
                have = (have + step).min(wire.len());
                while let Some(n) = s.next(&wire[start..have], &limits).unwrap() {
                    start += n;
                    found.push(start);
                    if start >= have { break; }
                }
            }
            prop_assert_eq!(found, ends);
        }

        /// Any bytes: an answer or an error, never a panic.
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = ReplyScanner::new().next(&bytes, &Limits::default());
        }
    }

    #[test]
    fn attribute_is_not_the_value() {
        let mut s = ReplyScanner::new();
        let wire = b"|1\r\n+a\r\n:1\r\n:2\r\n:3\r\n";
        assert_eq!(s.next(wire, &Limits::default()).unwrap(), Some(16));
    }

    #[test]
    fn big_claims_reserve_nothing() {
        let mut s = ReplyScanner::new();
        assert_eq!(
            s.next(b"*2000000000\r\n", &Limits::default()).unwrap(),
            None
        );
        assert!(ReplyScanner::new()
            .next(b"$9999999999999\r\n", &Limits::default())
            .is_err());
    }
}
