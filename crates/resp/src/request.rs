//! The resumable request parser (the server's hot path).

use std::ops::Range;

use bytes::Bytes;

use crate::error::ProtocolError;
use crate::inline::split_inline;
use crate::limits::{
    Limits, INLINE_MAX_SIZE, UNAUTHENTICATED_MAX_ARGS, UNAUTHENTICATED_MAX_BULK_LEN,
};
use crate::num::parse_i64_strict;
use crate::scan::{strchr, CFind};

/// Largest number of argument slots reserved up front for a multibulk
/// request, whatever count it claims (Redis uses the same bound).
pub const MAX_ARGS_PREALLOC: usize = 1024;

/// One argument of a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// The argument is exactly these bytes of the parsed buffer.
    Range(Range<usize>),
    /// The argument's bytes (an inline argument that used quotes, whose bytes
    /// differ from the buffer's).
    Owned(Vec<u8>),
}

impl Arg {
    /// The argument's bytes; `buf` is the buffer the request was parsed from.
    ///
    /// # Panics
    /// If `buf` is not (a prefix-preserving extension of) that buffer and the
    /// range falls outside it.
    #[inline]
    pub fn as_slice<'a>(&'a self, buf: &'a [u8]) -> &'a [u8] {
        match self {
            Arg::Range(r) => &buf[r.clone()],
            Arg::Owned(v) => v,
        }
    }

    /// Length of the argument in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            Arg::Range(r) => r.len(),
            Arg::Owned(v) => v.len(),
        }
    }

    /// Whether the argument is the empty string.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A complete request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The arguments; never empty (requests without arguments are skipped).
    pub args: Vec<Arg>,
    /// Bytes of the buffer this request used, counted from the start of the
    /// buffer passed to [`RequestParser::parse`]: skipped empty requests
    /// before it, the request itself and its terminator.
    pub consumed: usize,
    /// Whether the request used the inline form (`PING\r\n`).
    pub inline: bool,
}

impl Request {
    /// The arguments as [`Bytes`]. `frozen` must hold the same bytes as the
    /// parsed buffer for at least `buf[..consumed]` (typically
    /// `buf.split_to(consumed).freeze()`): ranges become zero-copy slices of
    /// it, owned arguments are moved.
    ///
    /// # Panics
    /// If `frozen` is shorter than an argument's range.
    pub fn into_bytes(self, frozen: &Bytes) -> Vec<Bytes> {
        self.args
            .into_iter()
            .map(|a| match a {
                Arg::Range(r) => frozen.slice(r),
                Arg::Owned(v) => Bytes::from(v),
            })
            .collect()
    }

    /// Argument `i` as a slice of `buf` (the parsed buffer), if it exists.
    #[inline]
    pub fn arg<'a>(&'a self, buf: &'a [u8], i: usize) -> Option<&'a [u8]> {
        self.args.get(i).map(|a| a.as_slice(buf))
    }

    /// Number of arguments.
    #[inline]
    pub fn len(&self) -> usize {
        self.args.len()
    }

    /// Always false for a request returned by the parser.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between requests: the next byte decides the form.
    Idle,
    /// Looking for the `\n` that ends an inline request starting at `pos`.
    Inline,
    /// Looking for the `\r` that ends the `*<n>` line starting at `pos`.
    Count,
    /// Looking for the `\r` that ends the `$<n>` line starting at `pos`.
    BulkLen,
    /// Waiting for `len` bytes (+ 2 for CRLF) starting at `pos`.
    BulkData { len: usize },
}

/// A resumable request parser, one per connection. See the crate
/// documentation for the contract and the reasons behind it.
#[derive(Debug, Clone)]
pub struct RequestParser {
    state: State,
    /// Offset of the first byte of the request in progress (after skipped
    /// empty requests).
    start: usize,
    /// Offset where the current state's element starts.
    pos: usize,
    /// Bytes before this offset are known not to hold the terminator that
    /// the current line state looks for.
    scan: usize,
    /// A NUL byte precedes the terminator of the current line: as with C's
    /// `strchr`, the line can never complete.
    nul_blocked: bool,
    /// Bulk arguments still expected by the multibulk request in progress.
    remaining: usize,
    /// Arguments parsed so far.
    args: Vec<Arg>,
    /// Length of the buffer at the last call.
    seen: usize,
    /// A protocol error is final: it is returned again by every later call.
    error: Option<ProtocolError>,
}

impl Default for RequestParser {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestParser {
    /// A parser expecting the first byte of a request.
    pub fn new() -> Self {
        RequestParser {
            state: State::Idle,
            start: 0,
            pos: 0,
            scan: 0,
            nul_blocked: false,
            remaining: 0,
            args: Vec::new(),
            seen: 0,
            error: None,
        }
    }

    /// Forgets any partial request and any error.
    pub fn reset(&mut self) {
        *self = Self::new();
    }

    fn reset_keep_capacity(&mut self) {
        self.state = State::Idle;
        self.start = 0;
        self.pos = 0;
        self.scan = 0;
        self.nul_blocked = false;
        self.remaining = 0;
        self.seen = 0;
    }

    /// Tries to parse one request at the start of `buf`.
    ///
    /// `buf` must begin at the first byte not yet consumed, and between
    /// calls it may only grow at the end (the caller never drops bytes of a
    /// request in progress). On `Ok(Some(req))` the caller drops
    /// `req.consumed` bytes; the parser is then ready for the next request.
    /// `Ok(None)` means more data is needed; the bytes already examined are
    /// not examined again. An `Err` is final: the server replies with its
    /// message and closes the connection; later calls return it again.
    ///
    /// Never panics: a caller that breaks the contract gets meaningless
    /// results, not a crash.
    pub fn parse(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<Request>, ProtocolError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if buf.len() < self.seen {
            // Contract violation (the buffer shrank): start over rather than
            // index past the end.
            self.args.clear();
            self.reset_keep_capacity();
        }
        self.seen = buf.len();
        match self.run(buf, limits) {
            Err(e) => {
                self.error = Some(e.clone());
                self.args = Vec::new();
                Err(e)
            }
            ok => ok,
        }
    }

    /// Hands back a finished request's argument vector (emptied) so that the next request
    /// reuses its allocation instead of allocating a new one.
    pub fn recycle(&mut self, mut args: Vec<Arg>) {
        args.clear();
        if self.args.is_empty() && self.args.capacity() < args.capacity() {
            self.args = args;
        }
    }

    /// How many more bytes the request in progress needs at least, when
    /// known: while waiting for a bulk argument, the rest of it plus its
    /// CRLF (so the server can grow its buffer once). `None` otherwise.
    pub fn bytes_needed(&self) -> Option<usize> {
        match self.state {
            State::BulkData { len } => Some(
                self.pos
                    .saturating_add(len)
                    .saturating_add(2)
                    .saturating_sub(self.seen),
            ),
            _ => None,
        }
    }

    /// After `Ok(None)`, the number of leading bytes of the buffer that
    /// belonged only to skipped empty requests (empty inline lines, `*0`,
    /// `*-1`). The caller may drop them from the front of its buffer before
    /// the next call; the parser's positions are rebased accordingly. This
    /// keeps a client that sends nothing but empty lines from growing the
    /// buffer. Using it is optional.
    pub fn take_skipped(&mut self) -> usize {
        if self.error.is_some() {
            return 0;
        }
        let base = match self.state {
            State::Idle => self.pos,
            _ => self.start,
        };
        if base == 0 {
            return 0;
        }
        self.start = self.start.saturating_sub(base);
        self.pos -= base;
        self.scan = self.scan.saturating_sub(base);
        self.seen = self.seen.saturating_sub(base);
        for a in &mut self.args {
            if let Arg::Range(r) = a {
                *r = r.start.saturating_sub(base)..r.end.saturating_sub(base);
            }
        }
        base
    }

    fn finish(&mut self, end: usize, inline: bool) -> Request {
        let args = std::mem::take(&mut self.args);
        self.reset_keep_capacity();
        Request {
            args,
            consumed: end,
            inline,
        }
    }

    fn run(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<Request>, ProtocolError> {
        loop {
            match self.state {
                State::Idle => {
                    let Some(&first) = buf.get(self.pos) else {
                        return Ok(None);
                    };
                    self.start = self.pos;
                    self.scan = self.pos;
                    self.nul_blocked = false;
                    self.state = if first == b'*' {
                        State::Count
                    } else {
                        State::Inline
                    };
                }
                State::Inline => match self.inline(buf)? {
                    None => return Ok(None),
                    Some(None) => continue,
                    Some(done) => return Ok(done),
                },
                State::Count => {
                    let (n, cr) = if let Some((v, cr)) = Self::fast_header(buf, self.pos) {
                        (Some(v as i64), cr)
                    } else {
                        let Some(cr) = self.find_cr(buf, ProtocolError::TooBigMbulkCount)? else {
                            return Ok(None);
                        };
                        (
                            parse_i64_strict(buf.get(self.pos + 1..cr).unwrap_or(&[])),
                            cr,
                        )
                    };
                    let max = i64::try_from(limits.max_multibulk_len).unwrap_or(i64::MAX);
                    let n = match n {
                        Some(n) if n <= max => n,
                        _ => return Err(ProtocolError::InvalidMultibulkLength),
                    };
                    if !limits.authenticated && n > UNAUTHENTICATED_MAX_ARGS as i64 {
                        return Err(ProtocolError::UnauthenticatedMultibulkLength);
                    }
                    self.pos = cr + 2;
                    if n <= 0 {
                        // `*0` / `*-1`: no request; skip it as Redis does.
                        self.state = State::Idle;
                        continue;
                    }
                    let n = n as usize;
                    self.remaining = n;
                    self.args.clear();
                    self.args.reserve(n.min(MAX_ARGS_PREALLOC));
                    self.state = State::BulkLen;
                    self.scan = self.pos;
                    self.nul_blocked = false;
                }
                State::BulkLen => {
                    let fast = if buf.get(self.pos) == Some(&b'$') {
                        Self::fast_header(buf, self.pos)
                    } else {
                        None
                    };
                    let (parsed, cr) = if let Some((v, cr)) = fast {
                        (Some(v as i64), cr)
                    } else {
                        let Some(cr) = self.find_cr(buf, ProtocolError::TooBigBulkCount)? else {
                            return Ok(None);
                        };
                        let first = buf[self.pos];
                        if first != b'$' {
                            return Err(ProtocolError::ExpectedDollar(first));
                        }
                        (
                            parse_i64_strict(buf.get(self.pos + 1..cr).unwrap_or(&[])),
                            cr,
                        )
                    };
                    let len = match parsed {
                        Some(l) if l >= 0 && (l as u64) <= limits.max_bulk_len as u64 => l as usize,
                        _ => return Err(ProtocolError::InvalidBulkLength),
                    };
                    if !limits.authenticated && len > UNAUTHENTICATED_MAX_BULK_LEN {
                        return Err(ProtocolError::UnauthenticatedBulkLength);
                    }
                    self.pos = cr + 2;
                    self.state = State::BulkData { len };
                }
                State::BulkData { len } => {
                    // Tight loop over the arguments whose headers and data
                    // are already buffered; anything unusual goes back to
                    // the general states above.
                    let mut pos = self.pos;
                    let mut len = len;
                    loop {
                        let avail = buf.len() - pos;
                        if avail < len || avail - len < 2 {
                            self.pos = pos;
                            self.state = State::BulkData { len };
                            return Ok(None);
                        }
                        // Like Redis, the two bytes after the payload are
                        // skipped without checking that they are CRLF.
                        self.args.push(Arg::Range(pos..pos + len));
                        pos += len + 2;
                        self.remaining -= 1;
                        if self.remaining == 0 {
                            return Ok(Some(self.finish(pos, false)));
                        }
                        if buf.get(pos) == Some(&b'$') {
                            if let Some((v, cr)) = Self::fast_header(buf, pos) {
                                let ok = v <= limits.max_bulk_len as u64
                                    && (limits.authenticated
                                        || v <= UNAUTHENTICATED_MAX_BULK_LEN as u64);
                                if ok {
                                    len = v as usize;
                                    pos = cr + 2;
                                    continue;
                                }
                            }
                        }
                        self.pos = pos;
                        self.state = State::BulkLen;
                        self.scan = pos;
                        self.nul_blocked = false;
                        break;
                    }
                }
            }
        }
    }

    /// Fast path for the usual header `<type><digits>\r?`: a canonical
    /// non-negative number of at most 18 digits directly followed by `\r`
    /// and one more byte. Returns the value and the index of `\r`; `None`
    /// sends the caller to the general path (which handles every other case,
    /// including errors, identically to Redis).
    #[inline(always)]
    fn fast_header(buf: &[u8], pos: usize) -> Option<(u64, usize)> {
        let digits = buf.get(pos + 1..)?;
        let mut v: u64 = 0;
        let mut n = 0;
        while n < digits.len() && n < 19 {
            let d = digits[n].wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            v = v * 10 + u64::from(d);
            n += 1;
        }
        if n == 0 || n > 18 || (n > 1 && digits[0] == b'0') {
            return None;
        }
        let cr = pos + 1 + n;
        if buf.get(cr) == Some(&b'\r') && cr + 1 < buf.len() {
            Some((v, cr))
        } else {
            None
        }
    }

    /// Finds the `\r` ending the header line that starts at `pos`, as
    /// Redis's `strchr(querybuf + qb_pos, '\r')` would, and makes sure the
    /// byte after it (taken to be `\n`, unchecked, as Redis does) has
    /// arrived. `too_big` is returned when no `\r` is found and more than
    /// 64 KiB are buffered.
    #[inline]
    fn find_cr(
        &mut self,
        buf: &[u8],
        too_big: ProtocolError,
    ) -> Result<Option<usize>, ProtocolError> {
        let found = if self.nul_blocked {
            CFind::Nul
        } else {
            strchr(buf, self.scan, b'\r')
        };
        match found {
            CFind::Found(cr) => {
                self.scan = cr;
                if cr + 1 >= buf.len() {
                    Ok(None)
                } else {
                    Ok(Some(cr))
                }
            }
            other => {
                if other == CFind::Nul {
                    self.nul_blocked = true;
                }
                self.scan = buf.len();
                if buf.len() - self.pos > INLINE_MAX_SIZE {
                    Err(too_big)
                } else {
                    Ok(None)
                }
            }
        }
    }

    /// Handles an inline request starting at `pos`. `Ok(None)` from the
    /// outer `Option` means "need more data"; `Ok(Some(None))` means an
    /// empty line was skipped and parsing continues at `pos`.
    #[allow(clippy::option_option)]
    fn inline(&mut self, buf: &[u8]) -> Result<Option<Option<Request>>, ProtocolError> {
        let found = if self.nul_blocked {
            CFind::Nul
        } else {
            strchr(buf, self.scan, b'\n')
        };
        let nl = match found {
            CFind::Found(nl) => nl,
            other => {
                if other == CFind::Nul {
                    self.nul_blocked = true;
                }
                self.scan = buf.len();
                if buf.len() - self.pos > INLINE_MAX_SIZE {
                    return Err(ProtocolError::TooBigInlineRequest);
                }
                return Ok(None);
            }
        };
        let line_end = if nl > self.pos && buf[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        self.args.clear();
        if split_inline(&buf[self.pos..line_end], self.pos, &mut self.args).is_err() {
            return Err(ProtocolError::UnbalancedQuotes);
        }
        if self.args.is_empty() {
            // An empty line: no request, skipped as Redis does.
            self.pos = nl + 1;
            self.state = State::Idle;
            return Ok(Some(None));
        }
        Ok(Some(Some(self.finish(nl + 1, true))))
    }
}

/// The second argument of the first request in `buf` (the key of most commands) when its
/// headers and that argument are buffered, read without parsing the rest or allocating;
/// `None` for anything else (inline, incomplete, a header the fast path does not take). For
/// a guess ahead of the real parse (the server prefetches that key's table bucket): the
/// parser, not this, decides what the request is.
pub fn peek_second_arg(buf: &[u8]) -> Option<&[u8]> {
    let header = |at: usize, prefix: u8| -> Option<(usize, usize)> {
        if *buf.get(at)? != prefix {
            return None;
        }
        let (v, cr) = RequestParser::fast_header(buf, at)?;
        Some((usize::try_from(v).ok()?, cr + 2))
    };
    let (count, p) = header(0, b'*')?;
    if count < 2 {
        return None;
    }
    let (name_len, p) = header(p, b'$')?;
    let (key_len, p) = header(p.checked_add(name_len)?.checked_add(2)?, b'$')?;
    buf.get(p..p.checked_add(key_len)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::INLINE_MAX_SIZE;

    type Parsed = (bool, Vec<Vec<u8>>, usize);

    fn parse_with(buf: &[u8], limits: &Limits) -> Result<Option<Parsed>, ProtocolError> {
        let mut p = RequestParser::new();
        Ok(p.parse(buf, limits)?.map(|r| {
            let args = r.args.iter().map(|a| a.as_slice(buf).to_vec()).collect();
            (r.inline, args, r.consumed)
        }))
    }

    fn parse(buf: &[u8]) -> Result<Option<Parsed>, ProtocolError> {
        parse_with(buf, &Limits::default())
    }

    fn args(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn unauth() -> Limits {
        Limits {
            authenticated: false,
            ..Limits::default()
        }
    }

    #[test]
    fn multibulk_basic() {
        let buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        assert_eq!(
            parse(buf).unwrap(),
            Some((false, args(&["GET", "k"]), buf.len()))
        );
        let buf = b"*1\r\n$0\r\n\r\n";
        assert_eq!(parse(buf).unwrap(), Some((false, args(&[""]), buf.len())));
        let buf = b"*1\r\n$4\r\na\r\nb\r\n";
        assert_eq!(
            parse(buf).unwrap(),
            Some((false, vec![b"a\r\nb".to_vec()], buf.len()))
        );
    }

    #[test]
    fn pipelined_requests_one_at_a_time() {
        let buf = b"*1\r\n$4\r\nPING\r\nPING\r\n*1\r\n$4\r\nPING\r\n";
        let mut p = RequestParser::new();
        let l = Limits::default();
        let r = p.parse(buf, &l).unwrap().unwrap();
        assert_eq!((r.consumed, r.inline), (14, false));
        let rest = &buf[14..];
        let r = p.parse(rest, &l).unwrap().unwrap();
        assert_eq!((r.consumed, r.inline), (6, true));
        let rest = &rest[6..];
        let r = p.parse(rest, &l).unwrap().unwrap();
        assert_eq!(r.consumed, rest.len());
        assert_eq!(p.parse(&[], &l).unwrap(), None);
    }

    #[test]
    fn inline_forms() {
        assert_eq!(
            parse(b"PING\r\n").unwrap(),
            Some((true, args(&["PING"]), 6))
        );
        assert_eq!(parse(b"PING\n").unwrap(), Some((true, args(&["PING"]), 5)));
        assert_eq!(
            parse(b"set a \"b c\"\r\n").unwrap(),
            Some((true, args(&["set", "a", "b c"]), 13))
        );
        assert_eq!(
            parse(b"get \"\\x41\"\n").unwrap(),
            Some((true, args(&["get", "A"]), 11))
        );
        // A lone \r is part of the line (a blank), not a terminator.
        assert_eq!(
            parse(b"a\rb\n").unwrap(),
            Some((true, args(&["a", "b"]), 4))
        );
        assert_eq!(parse(b"PING").unwrap(), None);
        assert_eq!(parse(b"PING\r").unwrap(), None);
        // Any first byte other than '*' means inline, even '$'.
        assert_eq!(parse(b"$3\r\n").unwrap(), Some((true, args(&["$3"]), 4)));
    }

    #[test]
    fn inline_args_are_ranges_unless_quoted() {
        let buf = b"set k \"v\"\r\n";
        let r = RequestParser::new()
            .parse(buf, &Limits::default())
            .unwrap()
            .unwrap();
        assert_eq!(
            r.args,
            vec![
                Arg::Range(0..3),
                Arg::Range(4..5),
                Arg::Owned(b"v".to_vec())
            ]
        );
    }

    #[test]
    fn empty_requests_are_skipped() {
        assert_eq!(parse(b"\r\n").unwrap(), None);
        assert_eq!(parse(b"\n\n   \r\n\t\n").unwrap(), None);
        assert_eq!(parse(b"*0\r\n").unwrap(), None);
        assert_eq!(parse(b"*-1\r\n").unwrap(), None);
        assert_eq!(parse(b"*-100\r\n").unwrap(), None);
        let buf = b"\r\n*0\r\n  \n*-1\r\nPING\r\n";
        assert_eq!(
            parse(buf).unwrap(),
            Some((true, args(&["PING"]), buf.len()))
        );
        let buf = b"\n*1\r\n$1\r\nx\r\n";
        assert_eq!(parse(buf).unwrap(), Some((false, args(&["x"]), buf.len())));
        // After `*0`, a `$` line is an inline request, as in Redis.
        let buf = b"*0\r\n$1\r\n";
        assert_eq!(parse(buf).unwrap(), Some((true, args(&["$1"]), buf.len())));
    }

    #[test]
    fn multibulk_count_errors() {
        for buf in [
            &b"*abc\r\n"[..],
            b"*\r\n",
            b"*01\r\n",
            b"*+1\r\n",
            b"*-0\r\n",
            b"* 1\r\n",
            b"*1 \r\n",
            b"*2147483648\r\n",
            b"*99999999999999999999\r\n",
        ] {
            assert_eq!(
                parse(buf),
                Err(ProtocolError::InvalidMultibulkLength),
                "{:?}",
                String::from_utf8_lossy(buf)
            );
        }
        // INT_MAX itself is accepted (and nothing is reserved for it).
        assert_eq!(parse(b"*2147483647\r\n").unwrap(), None);
    }

    #[test]
    fn custom_multibulk_limit() {
        let l = Limits {
            max_multibulk_len: 3,
            ..Limits::default()
        };
        assert_eq!(parse_with(b"*3\r\n", &l).unwrap(), None);
        assert_eq!(
            parse_with(b"*4\r\n", &l),
            Err(ProtocolError::InvalidMultibulkLength)
        );
    }

    #[test]
    fn bulk_length_errors() {
        for buf in [
            &b"*1\r\n$abc\r\n"[..],
            b"*1\r\n$\r\n",
            b"*1\r\n$-1\r\n",
            b"*1\r\n$-5\r\n",
            b"*1\r\n$01\r\n",
            b"*1\r\n$+1\r\n",
            b"*1\r\n$536870913\r\n",
            b"*1\r\n$9223372036854775808\r\n",
        ] {
            assert_eq!(
                parse(buf),
                Err(ProtocolError::InvalidBulkLength),
                "{:?}",
                String::from_utf8_lossy(buf)
            );
        }
        assert_eq!(parse(b"*1\r\n$536870912\r\n").unwrap(), None);
        let l = Limits {
            max_bulk_len: 3,
            ..Limits::default()
        };
        assert!(parse_with(b"*1\r\n$3\r\nabc\r\n", &l).unwrap().is_some());
        assert_eq!(
            parse_with(b"*1\r\n$4\r\n", &l),
            Err(ProtocolError::InvalidBulkLength)
        );
    }

    #[test]
    fn expected_dollar() {
        assert_eq!(
            parse(b"*1\r\nfoo\r\n"),
            Err(ProtocolError::ExpectedDollar(b'f'))
        );
        assert_eq!(
            parse(b"*2\r\n*1\r\n"),
            Err(ProtocolError::ExpectedDollar(b'*'))
        );
        assert_eq!(
            parse(b"*1\r\n\r\n"),
            Err(ProtocolError::ExpectedDollar(b'\r'))
        );
        assert_eq!(
            parse(b"*1\r\n:1\r\n").unwrap_err().message(),
            "ERR Protocol error: expected '$', got ':'"
        );
        assert_eq!(
            parse(b"*1\r\n\r\n").unwrap_err().message(),
            "ERR Protocol error: expected '$', got ' '"
        );
        // The check waits for the whole header line.
        assert_eq!(parse(b"*1\r\nfoo").unwrap(), None);
        assert_eq!(parse(b"*1\r\nfoo\r").unwrap(), None);
        assert_eq!(
            parse(b"*2\r\n$1\r\na\r\nx\r\n"),
            Err(ProtocolError::ExpectedDollar(b'x'))
        );
    }

    #[test]
    fn too_big_headers_and_inline() {
        let mut v = b"*".to_vec();
        v.resize(INLINE_MAX_SIZE, b'1');
        assert_eq!(parse(&v).unwrap(), None);
        v.push(b'1');
        assert_eq!(parse(&v), Err(ProtocolError::TooBigMbulkCount));

        let mut v = b"*1\r\n$".to_vec();
        v.resize(4 + INLINE_MAX_SIZE, b'1');
        assert_eq!(parse(&v).unwrap(), None);
        v.push(b'1');
        assert_eq!(parse(&v), Err(ProtocolError::TooBigBulkCount));
        // Even when the header would not start with '$'.
        let mut v = b"*1\r\n".to_vec();
        v.resize(5 + INLINE_MAX_SIZE, b'x');
        assert_eq!(parse(&v), Err(ProtocolError::TooBigBulkCount));

        let mut v = vec![b'a'; INLINE_MAX_SIZE];
        assert_eq!(parse(&v).unwrap(), None);
        v.push(b'a');
        assert_eq!(parse(&v), Err(ProtocolError::TooBigInlineRequest));
        // A long line is fine when its newline is already there.
        let mut v = vec![b'a'; 3 * INLINE_MAX_SIZE];
        v.push(b'\n');
        assert_eq!(parse(&v).unwrap().unwrap().1[0].len(), 3 * INLINE_MAX_SIZE);
        // Measured from the start of the request, after skipped lines.
        let mut v = b"\r\n\r\n".to_vec();
        v.resize(4 + INLINE_MAX_SIZE, b'a');
        assert_eq!(parse(&v).unwrap(), None);
    }

    #[test]
    fn unbalanced_quotes() {
        for buf in [&b"set a \"b\r\n"[..], b"'x\n", b"\"a\"b\n"] {
            assert_eq!(parse(buf), Err(ProtocolError::UnbalancedQuotes));
        }
        assert_eq!(
            parse(b"\"\n").unwrap_err().message(),
            "ERR Protocol error: unbalanced quotes in request"
        );
    }

    #[test]
    fn unauthenticated_limits() {
        let l = unauth();
        assert_eq!(parse_with(b"*10\r\n", &l).unwrap(), None);
        assert_eq!(
            parse_with(b"*11\r\n", &l),
            Err(ProtocolError::UnauthenticatedMultibulkLength)
        );
        assert_eq!(
            parse_with(b"*11\r\n", &l).unwrap_err().message(),
            "ERR Protocol error: unauthenticated multibulk length"
        );
        assert_eq!(parse_with(b"*1\r\n$16384\r\n", &l).unwrap(), None);
        assert_eq!(
            parse_with(b"*1\r\n$16385\r\n", &l),
            Err(ProtocolError::UnauthenticatedBulkLength)
        );
        assert_eq!(
            parse_with(b"*1\r\n$16385\r\n", &l).unwrap_err().message(),
            "ERR Protocol error: unauthenticated bulk length"
        );
        // The general checks come first.
        assert_eq!(
            parse_with(b"*2147483648\r\n", &l),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            parse_with(b"*1\r\n$536870913\r\n", &l),
            Err(ProtocolError::InvalidBulkLength)
        );
        // Skipped and inline requests are not limited.
        assert_eq!(parse_with(b"*-1000\r\n", &l).unwrap(), None);
        let line = "a ".repeat(20) + "\n";
        assert_eq!(
            parse_with(line.as_bytes(), &l).unwrap().unwrap().1.len(),
            20
        );
    }

    #[test]
    fn crlf_after_header_and_payload_is_not_checked() {
        // Redis skips two bytes after each header's '\r' and after each
        // payload without looking at them.
        let buf = b"*2\rX$3\rYfooAB$1\r\nxZZ";
        assert_eq!(
            parse(buf).unwrap(),
            Some((false, args(&["foo", "x"]), buf.len()))
        );
    }

    #[test]
    fn nul_before_terminator_blocks_the_line() {
        // Redis finds line ends with strchr, which stops at a NUL byte.
        assert_eq!(parse(b"PI\0NG\r\n").unwrap(), None);
        assert_eq!(parse(b"*1\0\r\n$1\r\nx\r\n").unwrap(), None);
        assert_eq!(parse(b"*1\r\n$1\0\r\nx\r\n").unwrap(), None);
        let mut v = b"PI\0NG\r\n".to_vec();
        v.resize(INLINE_MAX_SIZE + 1, b'x');
        assert_eq!(parse(&v), Err(ProtocolError::TooBigInlineRequest));
        let mut v = b"*1\0\r\n".to_vec();
        v.resize(INLINE_MAX_SIZE + 1, b'x');
        assert_eq!(parse(&v), Err(ProtocolError::TooBigMbulkCount));
        // NUL inside a bulk payload is just data; after the header's \r it
        // does not matter either.
        let buf = b"*1\r\n$3\r\na\0b\r\n";
        assert_eq!(
            parse(buf).unwrap(),
            Some((false, vec![b"a\0b".to_vec()], buf.len()))
        );
        assert_eq!(parse(b"PING\r\n\0").unwrap().unwrap().2, 6);
    }

    #[test]
    fn fast_path_defers_errors_to_general_path() {
        // Headers after the first argument take the fast path when they are
        // plain; limits and malformed numbers must still give Redis's errors.
        let l = unauth();
        assert_eq!(
            parse_with(b"*2\r\n$1\r\na\r\n$16385\r\n", &l),
            Err(ProtocolError::UnauthenticatedBulkLength)
        );
        let small = Limits {
            max_bulk_len: 4,
            ..Limits::default()
        };
        assert_eq!(
            parse_with(b"*2\r\n$1\r\na\r\n$5\r\n", &small),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(
            parse(b"*2\r\n$1\r\na\r\n$00\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(
            parse(b"*2\r\n$1\r\na\r\n$1x\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(parse(b"*2\r\n$1\r\na\r\n$1\r").unwrap(), None);
        assert_eq!(parse(b"*2\r\n$1\r\na\r\n$").unwrap(), None);
        assert_eq!(
            parse(b"*2\r\n$1\r\na\r\n$1234567890123456789\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(
            parse(b"*00\r\n"),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            parse(b"*1234567890123456789\r\n"),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        // 18 digits: the largest the fast path takes.
        assert_eq!(
            parse(b"*123456789012345678\r\n"),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            parse(b"*1\r\n$123456789012345678\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
    }

    #[test]
    fn regression_byte_after_header_cr_is_skipped_unchecked() {
        // Found while writing the tests: `*1\r\r\n` is a valid count of 1
        // (the byte after '\r' is skipped whatever it is), so the next header
        // starts at the '\n'. Checked against a real Redis server.
        assert_eq!(parse(b"*1\r\r\n").unwrap(), None);
        let e = parse(b"*1\r\r\n$4\r\nPING\r\n").unwrap_err();
        assert_eq!(e, ProtocolError::ExpectedDollar(b'\n'));
        assert_eq!(e.message(), "ERR Protocol error: expected '$', got ' '");
    }

    #[test]
    fn regression_unauthenticated_errors_have_their_own_text() {
        // The brief expected "invalid multibulk length" / "invalid bulk
        // length" here; Redis (since 6.2.6, including 7.2) answers with the
        // "unauthenticated" texts.
        let l = unauth();
        assert_eq!(
            parse_with(b"*11\r\n", &l).unwrap_err().message(),
            "ERR Protocol error: unauthenticated multibulk length"
        );
        assert_eq!(
            parse_with(b"*1\r\n$16385\r\n", &l).unwrap_err().message(),
            "ERR Protocol error: unauthenticated bulk length"
        );
    }

    #[test]
    fn huge_count_reserves_little() {
        let mut p = RequestParser::new();
        assert_eq!(
            p.parse(b"*1000000000\r\n", &Limits::default()).unwrap(),
            None
        );
        assert!(p.args.capacity() <= MAX_ARGS_PREALLOC);
        assert_eq!(
            p.parse(b"*1000000000\r\n$1\r\na\r\n", &Limits::default())
                .unwrap(),
            None
        );
        assert_eq!(p.args.len(), 1);
    }

    #[test]
    fn bytes_needed_for_big_bulk() {
        let mut p = RequestParser::new();
        let l = Limits::default();
        assert_eq!(p.bytes_needed(), None);
        assert_eq!(p.parse(b"*2\r\n$3\r\nSET\r\n$1", &l).unwrap(), None);
        assert_eq!(p.bytes_needed(), None);
        assert_eq!(p.parse(b"*2\r\n$3\r\nSET\r\n$10\r\nabc", &l).unwrap(), None);
        assert_eq!(p.bytes_needed(), Some(9));
        assert_eq!(
            p.parse(b"*2\r\n$3\r\nSET\r\n$10\r\nabcdefghij\r", &l)
                .unwrap(),
            None
        );
        assert_eq!(p.bytes_needed(), Some(1));
        let r = p
            .parse(b"*2\r\n$3\r\nSET\r\n$10\r\nabcdefghij\r\n", &l)
            .unwrap()
            .unwrap();
        assert_eq!(r.args.len(), 2);
        assert_eq!(p.bytes_needed(), None);
    }

    #[test]
    fn resumes_without_rescanning() {
        // A 60 KB inline line fed one byte at a time: quadratic rescanning
        // would take billions of steps.
        let mut data = vec![b'a'; 60_000];
        data.push(b'\n');
        let mut p = RequestParser::new();
        let l = Limits::default();
        for end in 1..data.len() {
            assert_eq!(p.parse(&data[..end], &l).unwrap(), None);
        }
        let r = p.parse(&data, &l).unwrap().unwrap();
        assert_eq!(r.args, vec![Arg::Range(0..60_000)]);
    }

    #[test]
    fn take_skipped_rebases() {
        let mut p = RequestParser::new();
        let l = Limits::default();
        let mut buf = b"\r\n*0\r\n\n*2\r\n$1\r\na\r\n$1".to_vec();
        assert_eq!(p.parse(&buf, &l).unwrap(), None);
        let n = p.take_skipped();
        assert_eq!(n, 7);
        buf.drain(..n);
        assert_eq!(p.take_skipped(), 0);
        buf.extend_from_slice(b"\r\nb\r\n");
        let r = p.parse(&buf, &l).unwrap().unwrap();
        assert_eq!(r.consumed, buf.len());
        let got: Vec<&[u8]> = r.args.iter().map(|a| a.as_slice(&buf)).collect();
        assert_eq!(got, vec![&b"a"[..], b"b"]);
        // Only blank lines: everything can go.
        let mut p = RequestParser::new();
        assert_eq!(p.parse(b"\r\n\r\n", &l).unwrap(), None);
        assert_eq!(p.take_skipped(), 4);
        assert_eq!(p.parse(b"", &l).unwrap(), None);
    }

    #[test]
    fn into_bytes_is_zero_copy() {
        let buf = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
        let r = RequestParser::new()
            .parse(buf, &Limits::default())
            .unwrap()
            .unwrap();
        let frozen = Bytes::copy_from_slice(&buf[..r.consumed]);
        assert_eq!(r.arg(buf, 1), Some(&b"key"[..]));
        assert_eq!(r.arg(buf, 2), None);
        assert_eq!(r.len(), 2);
        let out = r.into_bytes(&frozen);
        assert_eq!(
            out,
            vec![Bytes::from_static(b"GET"), Bytes::from_static(b"key")]
        );
        assert_eq!(out[1].as_ptr(), frozen[17..].as_ptr());
        let buf = b"set \"a b\" c\n";
        let r = RequestParser::new()
            .parse(buf, &Limits::default())
            .unwrap()
            .unwrap();
        let out = r.into_bytes(&Bytes::copy_from_slice(buf));
        assert_eq!(
            out,
            vec![
                Bytes::from_static(b"set"),
                Bytes::from_static(b"a b"),
                Bytes::from_static(b"c")
            ]
        );
    }

    #[test]
    fn errors_are_sticky() {
        let mut p = RequestParser::new();
        let l = Limits::default();
        let e = p.parse(b"*x\r\n", &l).unwrap_err();
        assert_eq!(p.parse(b"*x\r\n", &l), Err(e.clone()));
        assert_eq!(p.parse(b"PING\r\n", &l), Err(e));
        p.reset();
        assert!(p.parse(b"PING\r\n", &l).unwrap().is_some());
    }

    #[test]
    fn shrinking_buffer_does_not_panic() {
        // Contract violation: results are meaningless but there is no panic.
        let mut p = RequestParser::new();
        let l = Limits::default();
        assert_eq!(p.parse(b"*2\r\n$3\r\nfoo\r\n$5\r\nab", &l).unwrap(), None);
        let _ = p.parse(b"*2", &l);
        let _ = p.parse(b"\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r", &l);
        let _ = p.parse(b"", &l);
        let mut p = RequestParser::new();
        assert_eq!(p.parse(b"*2\r\n$3\r", &l).unwrap(), None);
        let _ = p.parse(b"\r\r\r\r\r\r\r", &l);
    }
}

#[cfg(test)]
mod peek_tests {
    use super::peek_second_arg;

    #[test]
    fn finds_the_second_argument_of_a_complete_array_only() {
        assert_eq!(
            peek_second_arg(b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n"),
            Some(&b"key"[..])
        );
        assert_eq!(
            peek_second_arg(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n"),
            Some(&b"k"[..])
        );
        assert_eq!(
            peek_second_arg(b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n"),
            Some(&b""[..])
        );
        for bad in [
            &b""[..],
            b"PING\r\n",
            b"*1\r\n$4\r\nPING\r\n",
            b"*2\r\n$3\r\nGET\r\n$3\r\nke",
            b"*2\r\n$3\r\nGET\r\n",
            b"*2\r\n$99999999999999999999\r\nGET",
            b"*2\r\n$-1\r\n",
            b"*x\r\n",
        ] {
            assert_eq!(peek_second_arg(bad), None, "{bad:?}");
        }
    }
}
