//! Reply lines during the handshake and before the snapshot: bytes up to `\n`, without the
//! `\r` before it (Redis's `syncReadLine`), bounded in length.

/// The longest line accepted. Redis reads these lines into buffers of 256 (replies) and 1024
/// (the snapshot's header) bytes; a longer one is not a primary speaking the protocol.
pub const MAX_LINE: usize = 1024;

/// A line being gathered across reads.
#[derive(Debug, Default, Clone)]
pub struct LineReader {
    buf: Vec<u8>,
}

/// A line longer than [`MAX_LINE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineTooLong;

impl LineReader {
    /// Takes bytes from `input` until a line ends: `Ok((consumed, Some(line)))`, or
    /// `Ok((input.len(), None))` when the line goes on.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Vec<u8>>), LineTooLong> {
        match input.iter().position(|&b| b == b'\n') {
            Some(at) => {
                if self.buf.len() + at > MAX_LINE {
                    return Err(LineTooLong);
                }
                self.buf.extend_from_slice(&input[..at]);
                let mut line = std::mem::take(&mut self.buf);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                Ok((at + 1, Some(line)))
            }
            None => {
                if self.buf.len() + input.len() > MAX_LINE {
                    return Err(LineTooLong);
                }
                self.buf.extend_from_slice(input);
                Ok((input.len(), None))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_split_across_reads_comes_whole_without_its_terminator() {
        let mut r = LineReader::default();
        assert_eq!(r.feed(b"+PO").unwrap(), (3, None));
        assert_eq!(r.feed(b"NG\r\nrest").unwrap(), (4, Some(b"+PONG".to_vec())));
        assert_eq!(r.feed(b"\n").unwrap(), (1, Some(Vec::new())));
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut r = LineReader::default();
        assert_eq!(r.feed(&[b'x'; MAX_LINE]).unwrap().0, MAX_LINE);
        assert_eq!(r.feed(b"x"), Err(LineTooLong));
    }
}
