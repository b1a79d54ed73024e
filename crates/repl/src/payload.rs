//! The snapshot a primary sends for a full sync, as the replica receives it, and its framing
//! on the primary's side.
//!
//! Two framings exist (Redis 7.2's `readSyncBulkPayload`). Disk-based: `$<length>\r\n` and
//! then exactly that many bytes of RDB, after which the command stream follows at once.
//! Diskless (`repl-diskless-sync`, for replicas that sent `REPLCONF capa eof`): the primary
//! does not know the length in advance, so it sends `$EOF:<40 random bytes>\r\n`, the RDB, and
//! the same 40 bytes again; it sends nothing more until the replica's first `REPLCONF ACK`,
//! so the mark is the last thing received. Before the header, lines holding only `\n` are the
//! primary's keep-alives while it prepares the snapshot; a `-` line is an error that ends the
//! attempt.
//!
//! [`PayloadReader`] hands the RDB bytes out as they come, never holding more than the 40
//! bytes that may be the mark, so a snapshot of any size costs a fixed amount of memory here;
//! what the caller does with them (a temp file, or the loader fed directly) is its business.

use crate::line::LineReader;

/// The mark's length.
pub const MARK_LEN: usize = 40;

/// How the snapshot is framed, once its header is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framing {
    Length(u64),
    Mark([u8; MARK_LEN]),
}

/// A reason the snapshot cannot be received: the link is dropped (Redis's log line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadError(pub String);

#[derive(Debug)]
enum State {
    Header(LineReader),
    Length { left: u64 },
    Mark { mark: [u8; MARK_LEN], held: Vec<u8> },
    Done,
}

/// Receives a snapshot: the header, then the RDB bytes.
#[derive(Debug)]
pub struct PayloadReader {
    state: State,
    framing: Option<Framing>,
}

impl Default for PayloadReader {
    fn default() -> Self {
        PayloadReader {
            state: State::Header(LineReader::default()),
            framing: None,
        }
    }
}

/// Where the reader stands after taking bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// More bytes are needed.
    More,
    /// The snapshot is complete; bytes past `consumed` belong to the command stream.
    Done,
}

impl PayloadReader {
    /// The framing, once the header has been read (for the log line: "receiving N bytes" or
    /// "receiving streamed RDB").
    pub fn framing(&self) -> Option<&Framing> {
        self.framing.as_ref()
    }

    /// Takes bytes from the primary, calling `rdb` with each run of snapshot bytes in order.
    /// Returns the bytes consumed and whether the snapshot is complete.
    pub fn feed(
        &mut self,
        input: &[u8],
        rdb: &mut dyn FnMut(&[u8]),
    ) -> Result<(usize, Progress), PayloadError> {
        let mut used = 0;
        loop {
            match &mut self.state {
                State::Header(line) => {
                    if used == input.len() {
                        return Ok((used, Progress::More));
                    }
                    let (n, got) = line.feed(&input[used..]).map_err(|_| {
                        PayloadError(
                            "Bad protocol from MASTER: the snapshot's header line is too long"
                                .into(),
                        )
                    })?;
                    used += n;
                    let Some(line) = got else { continue };
                    if let Some(framing) = header(&line)? {
                        self.state = match framing {
                            Framing::Length(0) => State::Done,
                            Framing::Length(left) => State::Length { left },
                            Framing::Mark(mark) => State::Mark {
                                mark,
                                held: Vec::with_capacity(MARK_LEN * 2),
                            },
                        };
                        self.framing = Some(framing);
                    }
                }
                State::Length { left } => {
                    let n = (input.len() - used).min(usize::try_from(*left).unwrap_or(usize::MAX));
                    if n > 0 {
                        rdb(&input[used..used + n]);
                    }
                    used += n;
                    *left -= n as u64;
                    if *left == 0 {
                        self.state = State::Done;
                    } else {
                        return Ok((used, Progress::More));
                    }
                }
                State::Mark { mark, held } => {
                    // The mark may start in `held` (the last bytes kept back) or in the input.
                    let fresh = &input[used..];
                    if let Some(end) = find_mark(held, fresh, mark) {
                        // `end`: bytes of `fresh` up to and including the mark.
                        let payload_len = held.len() + end - MARK_LEN;
                        let from_held = payload_len.min(held.len());
                        rdb(&held[..from_held]);
                        if payload_len > held.len() {
                            rdb(&fresh[..payload_len - held.len()]);
                        }
                        used += end;
                        self.state = State::Done;
                        continue;
                    }
                    // No mark yet: everything but the last MARK_LEN - 1 bytes is snapshot.
                    held.extend_from_slice(fresh);
                    used = input.len();
                    if held.len() >= MARK_LEN {
                        let out = held.len() - (MARK_LEN - 1);
                        rdb(&held[..out]);
                        held.drain(..out);
                    }
                    return Ok((used, Progress::More));
                }
                State::Done => return Ok((used, Progress::Done)),
            }
        }
    }
}

/// The header line: None for a keep-alive.
fn header(line: &[u8]) -> Result<Option<Framing>, PayloadError> {
    let text = || String::from_utf8_lossy(line).into_owned();
    match line.first() {
        None => Ok(None),
        Some(b'-') => Err(PayloadError(format!(
            "MASTER aborted replication with an error: {}",
            String::from_utf8_lossy(&line[1..])
        ))),
        Some(b'$') => {
            if let Some(mark) = line[1..].strip_prefix(b"EOF:") {
                if mark.len() >= MARK_LEN {
                    let mut m = [0u8; MARK_LEN];
                    m.copy_from_slice(&mark[..MARK_LEN]);
                    return Ok(Some(Framing::Mark(m)));
                }
            }
            match std::str::from_utf8(&line[1..]).ok().and_then(|s| s.parse::<u64>().ok()) {
                Some(n) => Ok(Some(Framing::Length(n))),
                None => Err(PayloadError(format!(
                    "Bad protocol from MASTER, the snapshot's length is not a number (we received '{}')",
                    text()
                ))),
            }
        }
        Some(_) => Err(PayloadError(format!(
            "Bad protocol from MASTER, the first byte is not '$' (we received '{}'), are you sure the host and port are right?",
            text()
        ))),
    }
}

/// Where `mark` ends in `held ++ fresh`, as a count of `fresh`'s bytes, if it ends in `fresh`.
/// (`held` is shorter than the mark, so the mark cannot lie wholly inside it.) The first
/// appearance: the starts in `held` are tried first, byte by byte, then those in `fresh` with
/// Horspool's skips (a diskless snapshot is scanned whole: a byte-by-byte scan of it cost the
/// replica about as much as the rest of the transfer).
fn find_mark(held: &[u8], fresh: &[u8], mark: &[u8; MARK_LEN]) -> Option<usize> {
    let total = held.len() + fresh.len();
    let at = |i: usize| {
        if i < held.len() {
            held[i]
        } else {
            fresh[i - held.len()]
        }
    };
    if let Some(start) = (0..held.len())
        .take_while(|&start| start + MARK_LEN <= total)
        .find(|&start| (0..MARK_LEN).all(|k| at(start + k) == mark[k]))
    {
        return Some(start + MARK_LEN - held.len());
    }
    horspool(fresh, mark).map(|start| start + MARK_LEN)
}

/// The first position of `pat` in `hay` (Boyer-Moore-Horspool: the window moves by how far
/// its last byte is from the end of the pattern, which never skips a match).
fn horspool(hay: &[u8], pat: &[u8; MARK_LEN]) -> Option<usize> {
    let mut skip = [MARK_LEN; 256];
    for (i, &b) in pat[..MARK_LEN - 1].iter().enumerate() {
        skip[b as usize] = MARK_LEN - 1 - i;
    }
    let mut i = 0;
    while i + MARK_LEN <= hay.len() {
        let last = hay[i + MARK_LEN - 1];
        if last == pat[MARK_LEN - 1] && hay[i..i + MARK_LEN] == pat[..] {
            return Some(i);
        }
        i += skip[last as usize];
    }
    None
}

/// The header of a diskless snapshot sent with `mark`.
pub fn mark_header(mark: &[u8; MARK_LEN]) -> Vec<u8> {
    let mut out = b"$EOF:".to_vec();
    out.extend_from_slice(mark);
    out.extend_from_slice(b"\r\n");
    out
}

/// The header of a snapshot of `len` bytes.
pub fn length_header(len: u64) -> Vec<u8> {
    format!("${len}\r\n").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receive(input: &[u8], piece: usize) -> (Result<(usize, Progress), PayloadError>, Vec<u8>) {
        let mut r = PayloadReader::default();
        let mut got = Vec::new();
        let mut used = 0;
        let mut last = Ok((0, Progress::More));
        for chunk in input.chunks(piece.max(1)) {
            last = r.feed(chunk, &mut |b| got.extend_from_slice(b));
            match &last {
                Ok((n, Progress::Done)) => {
                    used += n;
                    return (Ok((used, Progress::Done)), got);
                }
                Ok((n, Progress::More)) => used += n,
                Err(_) => return (last, got),
            }
        }
        (last.map(|(_, p)| (used, p)), got)
    }

    #[test]
    fn a_length_framed_snapshot_ends_after_its_length_in_any_pieces() {
        let input = b"\n\n$9\r\nREDIS0011*1\r\n$4\r\nPING\r\n";
        for piece in 1..input.len() {
            let (r, got) = receive(input, piece);
            assert_eq!(got, b"REDIS0011", "piece {piece}");
            assert_eq!(
                r.unwrap(),
                (input.len() - 14, Progress::Done),
                "piece {piece}"
            );
        }
    }

    #[test]
    fn a_mark_framed_snapshot_ends_at_its_mark_in_any_pieces() {
        let mark = [b'm'; MARK_LEN];
        let mut input = mark_header(&mark);
        let body: Vec<u8> = (0..300u32).map(|i| (i % 7) as u8 + b'a').collect();
        input.extend_from_slice(&body);
        input.extend_from_slice(&mark);
        for piece in 1..input.len() {
            let (r, got) = receive(&input, piece);
            assert_eq!(got, body, "piece {piece}");
            assert_eq!(r.unwrap(), (input.len(), Progress::Done), "piece {piece}");
        }
    }

    /// Regression (from the property test): the snapshot ends at the mark's first
    /// appearance, so a body whose tail and the mark together hold the mark earlier ends
    /// early, as Redis's replica does. A real mark is 40 random characters, which makes
    /// this as likely as guessing it.
    #[test]
    fn a_snapshot_ends_at_the_first_appearance_of_its_mark() {
        let mark = [b'7'; MARK_LEN];
        let mut input = mark_header(&mark);
        input.extend_from_slice(b"abc7");
        input.extend_from_slice(&mark);
        for piece in 1..input.len() {
            let (r, got) = receive(&input, piece);
            assert_eq!(got, b"abc", "piece {piece}");
            assert_eq!(
                r.unwrap(),
                (input.len() - 1, Progress::Done),
                "piece {piece}"
            );
        }
    }

    #[test]
    fn the_primary_s_error_and_garbage_end_the_attempt() {
        let mut r = PayloadReader::default();
        assert_eq!(
            r.feed(b"-ERR oops\r\n", &mut |_| {}),
            Err(PayloadError(
                "MASTER aborted replication with an error: ERR oops".into()
            ))
        );
        let mut r = PayloadReader::default();
        assert!(r
            .feed(b"+OK\r\n", &mut |_| {})
            .unwrap_err()
            .0
            .contains("the first byte is not '$'"));
        let mut r = PayloadReader::default();
        assert!(r.feed(b"$x\r\n", &mut |_| {}).is_err());
    }

    #[test]
    fn the_skipping_search_finds_the_first_mark_a_byte_by_byte_scan_finds() {
        let mark: [u8; MARK_LEN] = *b"0123456789abcdef0123456789abcdef01234567";
        let naive = |hay: &[u8]| hay.windows(MARK_LEN).position(|w| w == mark);
        // Haystacks of hex-like bytes (the mark's alphabet, where skips are shortest) with
        // the mark, parts of it and repeats planted at varied places.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..2000 {
            let len = (next() % 300) as usize;
            let mut hay: Vec<u8> = (0..len)
                .map(|_| b"0123456789abcdef\r\n"[(next() % 18) as usize])
                .collect();
            if round % 2 == 0 && len > MARK_LEN {
                let at = (next() as usize) % (len - MARK_LEN);
                let keep = MARK_LEN - (next() as usize % 3) * (round % 3);
                hay[at..at + keep].copy_from_slice(&mark[..keep]);
            }
            assert_eq!(horspool(&hay, &mark), naive(&hay), "{hay:?}");
        }
    }
}
