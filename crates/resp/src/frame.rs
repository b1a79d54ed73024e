//! Generic RESP2/RESP3 values: [`Frame`], [`decode`] and [`encode`].
//!
//! This is the reply side of the protocol, for clients, tests, proxies and
//! differential testing. It is not resumable: [`decode`] re-reads a frame
//! from its first byte until it is complete, which is fine for replies read
//! by tests and tools but not meant for the server's request path (see
//! [`crate::RequestParser`]).

use bytes::Bytes;

use crate::error::ProtocolError;
use crate::limits::Limits;
use crate::num::{format_double, parse_i64_lenient, write_i64, write_u64};
use crate::scan::find2;

/// Deepest aggregate nesting [`decode`] accepts.
pub const MAX_DEPTH: usize = 512;

/// Most elements [`decode`] reserves room for up front, whatever count an
/// aggregate claims.
const PREALLOC_CAP: usize = 1024;

/// A RESP2/RESP3 value.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// `+text` (RESP2/3).
    Simple(Bytes),
    /// `-text` (RESP2/3); also what a RESP3 blob error `!` decodes to.
    Error(Bytes),
    /// `:n`.
    Integer(i64),
    /// `$len` + bytes.
    Bulk(Bytes),
    /// `$-1` (RESP2 null).
    NullBulk,
    /// `*-1` (RESP2 null array).
    NullArray,
    /// `_` (RESP3 null).
    Null,
    /// `*n`.
    Array(Vec<Frame>),
    /// `%n` (RESP3).
    Map(Vec<(Frame, Frame)>),
    /// `~n` (RESP3).
    Set(Vec<Frame>),
    /// `|n` (RESP3). Decoded as a frame of its own: the value it annotates
    /// is the next frame in the stream.
    Attribute(Vec<(Frame, Frame)>),
    /// `>n` (RESP3).
    Push(Vec<Frame>),
    /// `,repr` (RESP3).
    Double(f64),
    /// `#t` / `#f` (RESP3).
    Boolean(bool),
    /// `(digits` (RESP3).
    BigNumber(Bytes),
    /// `=len` + `fmt:text` (RESP3).
    Verbatim {
        /// The three-byte format, e.g. `txt` or `mkd`.
        format: [u8; 3],
        /// The text after `fmt:`.
        text: Bytes,
    },
}

/// Decodes one frame at the start of `buf`.
///
/// Returns `Ok(None)` while the frame is incomplete, or the frame and the
/// number of bytes it used. Every line must end in CRLF. Claimed lengths and
/// counts are checked against `limits.max_bulk_len` /
/// `limits.max_multibulk_len` (`authenticated` is ignored); nothing is
/// reserved for data that has not arrived. Nesting deeper than
/// [`MAX_DEPTH`] is an error, as are streamed types (`$?`, `*?`, ...). A
/// RESP3 blob error (`!len`) decodes to [`Frame::Error`].
pub fn decode(buf: &[u8], limits: &Limits) -> Result<Option<(Frame, usize)>, ProtocolError> {
    let mut d = Decoder { buf, limits };
    d.frame(0, 0)
}

struct Decoder<'a> {
    buf: &'a [u8],
    limits: &'a Limits,
}

type Step<T> = Result<Option<T>, ProtocolError>;

impl Decoder<'_> {
    /// The line starting at `pos` (without CRLF) and the offset after it.
    fn line(&self, pos: usize) -> Step<(&[u8], usize)> {
        let buf = self.buf;
        match find2(buf, pos, b'\r', b'\n') {
            Some(i) => {
                if buf[i] == b'\n' {
                    return Err(ProtocolError::ExpectedCrlf);
                }
                match buf.get(i + 1) {
                    None => Ok(None),
                    Some(b'\n') => Ok(Some((&buf[pos..i], i + 2))),
                    Some(_) => Err(ProtocolError::ExpectedCrlf),
                }
            }
            None => {
                if buf.len() - pos > self.limits.max_bulk_len.max(64 * 1024) {
                    Err(ProtocolError::LineTooLong)
                } else {
                    Ok(None)
                }
            }
        }
    }

    /// A length line for bulk-like types: `Some(None)` for `-1`.
    fn bulk_len(&self, line: &[u8], allow_null: bool) -> Result<Option<usize>, ProtocolError> {
        if line == b"?" {
            return Err(ProtocolError::StreamedNotSupported);
        }
        match parse_i64_lenient(line) {
            Some(-1) if allow_null => Ok(None),
            Some(n) if n >= 0 && n as u64 <= self.limits.max_bulk_len as u64 => {
                Ok(Some(n as usize))
            }
            _ => Err(ProtocolError::InvalidBulkLength),
        }
    }

    /// A count line for aggregates: `Some(None)` for `-1`.
    fn count(&self, line: &[u8], allow_null: bool) -> Result<Option<usize>, ProtocolError> {
        if line == b"?" {
            return Err(ProtocolError::StreamedNotSupported);
        }
        match parse_i64_lenient(line) {
            Some(-1) if allow_null => Ok(None),
            Some(n) if n >= 0 && n as u64 <= self.limits.max_multibulk_len as u64 => {
                Ok(Some(n as usize))
            }
            _ => Err(ProtocolError::InvalidMultibulkLength),
        }
    }

    /// `len` payload bytes at `pos` followed by CRLF.
    fn payload(&self, pos: usize, len: usize) -> Step<(&[u8], usize)> {
        let buf = self.buf;
        let avail = buf.len() - pos;
        if avail < len || avail - len < 2 {
            return Ok(None);
        }
        if &buf[pos + len..pos + len + 2] != b"\r\n" {
            return Err(ProtocolError::ExpectedCrlf);
        }
        Ok(Some((&buf[pos..pos + len], pos + len + 2)))
    }

    fn items(&mut self, mut pos: usize, n: usize, depth: usize) -> Step<(Vec<Frame>, usize)> {
        let mut v = Vec::with_capacity(n.min(PREALLOC_CAP));
        for _ in 0..n {
            let Some((f, next)) = self.frame(pos, depth)? else {
                return Ok(None);
            };
            v.push(f);
            pos = next;
        }
        Ok(Some((v, pos)))
    }

    fn pairs(
        &mut self,
        mut pos: usize,
        n: usize,
        depth: usize,
    ) -> Step<(Vec<(Frame, Frame)>, usize)> {
        let mut v = Vec::with_capacity(n.min(PREALLOC_CAP));
        for _ in 0..n {
            let Some((k, next)) = self.frame(pos, depth)? else {
                return Ok(None);
            };
            let Some((val, next)) = self.frame(next, depth)? else {
                return Ok(None);
            };
            v.push((k, val));
            pos = next;
        }
        Ok(Some((v, pos)))
    }

    fn frame(&mut self, pos: usize, depth: usize) -> Step<(Frame, usize)> {
        let Some(&ty) = self.buf.get(pos) else {
            return Ok(None);
        };
        if !matches!(
            ty,
            b'+' | b'-'
                | b':'
                | b'$'
                | b'*'
                | b'_'
                | b','
                | b'#'
                | b'('
                | b'='
                | b'!'
                | b'%'
                | b'~'
                | b'|'
                | b'>'
        ) {
            return Err(ProtocolError::InvalidTypeByte(ty));
        }
        let Some((line, next)) = self.line(pos + 1)? else {
            return Ok(None);
        };
        let copy = Bytes::copy_from_slice;
        let frame = match ty {
            b'+' => Frame::Simple(copy(line)),
            b'-' => Frame::Error(copy(line)),
            b':' => Frame::Integer(parse_i64_lenient(line).ok_or(ProtocolError::InvalidInteger)?),
            b'_' => {
                if !line.is_empty() {
                    return Err(ProtocolError::InvalidNull);
                }
                Frame::Null
            }
            b'#' => match line {
                b"t" => Frame::Boolean(true),
                b"f" => Frame::Boolean(false),
                _ => return Err(ProtocolError::InvalidBoolean),
            },
            b',' => Frame::Double(parse_double(line).ok_or(ProtocolError::InvalidDouble)?),
            b'(' => {
                let digits = match line.first() {
                    Some(b'-' | b'+') => &line[1..],
                    _ => line,
                };
                if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                    return Err(ProtocolError::InvalidBigNumber);
                }
                Frame::BigNumber(copy(line))
            }
            b'$' | b'!' | b'=' => {
                let Some(len) = self.bulk_len(line, ty == b'$')? else {
                    return Ok(Some((Frame::NullBulk, next)));
                };
                let Some((data, end)) = self.payload(next, len)? else {
                    return Ok(None);
                };
                let frame = match ty {
                    b'$' => Frame::Bulk(copy(data)),
                    b'!' => Frame::Error(copy(data)),
                    _ => {
                        if data.len() < 4 || data[3] != b':' {
                            return Err(ProtocolError::InvalidVerbatim);
                        }
                        Frame::Verbatim {
                            format: [data[0], data[1], data[2]],
                            text: copy(&data[4..]),
                        }
                    }
                };
                return Ok(Some((frame, end)));
            }
            _ => {
                // Aggregates.
                if depth >= MAX_DEPTH {
                    return Err(ProtocolError::NestingTooDeep);
                }
                let Some(n) = self.count(line, ty == b'*')? else {
                    return Ok(Some((Frame::NullArray, next)));
                };
                let result = match ty {
                    b'%' | b'|' => self.pairs(next, n, depth + 1)?.map(|(v, end)| {
                        (
                            if ty == b'%' {
                                Frame::Map(v)
                            } else {
                                Frame::Attribute(v)
                            },
                            end,
                        )
                    }),
                    _ => self.items(next, n, depth + 1)?.map(|(v, end)| {
                        (
                            match ty {
                                b'*' => Frame::Array(v),
                                b'~' => Frame::Set(v),
                                _ => Frame::Push(v),
                            },
                            end,
                        )
                    }),
                };
                return Ok(result);
            }
        };
        Ok(Some((frame, next)))
    }
}

fn parse_double(line: &[u8]) -> Option<f64> {
    // Accept what Redis writes (`inf`, `-inf`, `nan`, decimal and exponent
    // forms) and whatever else the standard parser reads as a double.
    let s = std::str::from_utf8(line).ok()?;
    if s.is_empty() || s.starts_with(|c: char| c.is_whitespace()) {
        return None;
    }
    s.parse().ok()
}

#[inline]
fn header(out: &mut Vec<u8>, ty: u8, n: usize) {
    out.push(ty);
    write_u64(n as u64, out);
    out.extend_from_slice(b"\r\n");
}

/// Appends `line` with CR and LF replaced by spaces.
fn push_line_sanitized(out: &mut Vec<u8>, line: &[u8]) {
    if find2(line, 0, b'\r', b'\n').is_none() {
        out.extend_from_slice(line);
    } else {
        out.extend(
            line.iter()
                .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
        );
    }
}

/// Appends the RESP wire form of `frame` (RESP3 forms for RESP3 types, the
/// RESP2 forms for [`Frame::NullBulk`] and [`Frame::NullArray`]).
///
/// Two values cannot be written as they are: CR/LF inside
/// [`Frame::Simple`] are replaced by spaces, and a [`Frame::Error`] that
/// contains CR or LF is written as a RESP3 blob error (`!len`), which
/// [`decode`] reads back as the same `Frame::Error`.
pub fn encode(frame: &Frame, out: &mut Vec<u8>) {
    match frame {
        Frame::Simple(s) => {
            out.push(b'+');
            push_line_sanitized(out, s);
            out.extend_from_slice(b"\r\n");
        }
        Frame::Error(s) => {
            if find2(s, 0, b'\r', b'\n').is_some() {
                header(out, b'!', s.len());
            } else {
                out.push(b'-');
            }
            out.extend_from_slice(s);
            out.extend_from_slice(b"\r\n");
        }
        Frame::Integer(v) => {
            out.push(b':');
            write_i64(*v, out);
            out.extend_from_slice(b"\r\n");
        }
        Frame::Bulk(b) => {
            header(out, b'$', b.len());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Frame::NullBulk => out.extend_from_slice(b"$-1\r\n"),
        Frame::NullArray => out.extend_from_slice(b"*-1\r\n"),
        Frame::Null => out.extend_from_slice(b"_\r\n"),
        Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => {
            let ty = match frame {
                Frame::Array(_) => b'*',
                Frame::Set(_) => b'~',
                _ => b'>',
            };
            header(out, ty, v.len());
            for f in v {
                encode(f, out);
            }
        }
        Frame::Map(v) | Frame::Attribute(v) => {
            header(
                out,
                if matches!(frame, Frame::Map(_)) {
                    b'%'
                } else {
                    b'|'
                },
                v.len(),
            );
            for (k, val) in v {
                encode(k, out);
                encode(val, out);
            }
        }
        Frame::Double(d) => {
            out.push(b',');
            format_double(*d, out);
            out.extend_from_slice(b"\r\n");
        }
        Frame::Boolean(b) => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
        Frame::BigNumber(n) => {
            out.push(b'(');
            push_line_sanitized(out, n);
            out.extend_from_slice(b"\r\n");
        }
        Frame::Verbatim { format, text } => {
            header(out, b'=', text.len() + 4);
            out.extend_from_slice(format);
            out.push(b':');
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn dec(s: &[u8]) -> Result<Option<(Frame, usize)>, ProtocolError> {
        decode(s, &Limits::default())
    }

    fn enc(f: &Frame) -> Vec<u8> {
        let mut v = Vec::new();
        encode(f, &mut v);
        v
    }

    fn roundtrip(f: Frame, wire: &[u8]) {
        assert_eq!(enc(&f), wire, "{f:?}");
        assert_eq!(dec(wire).unwrap(), Some((f, wire.len())));
        // Every strict prefix is incomplete.
        for i in 0..wire.len() {
            assert_eq!(dec(&wire[..i]).unwrap(), None, "prefix {i} of {wire:?}");
        }
    }

    #[test]
    fn every_type_round_trips() {
        roundtrip(Frame::Simple(b("OK")), b"+OK\r\n");
        roundtrip(Frame::Simple(b("")), b"+\r\n");
        roundtrip(Frame::Error(b("ERR bad")), b"-ERR bad\r\n");
        roundtrip(Frame::Error(b("ERR a\r\nb")), b"!8\r\nERR a\r\nb\r\n");
        roundtrip(Frame::Integer(-42), b":-42\r\n");
        roundtrip(Frame::Integer(i64::MIN), b":-9223372036854775808\r\n");
        roundtrip(Frame::Bulk(b("a\r\nb")), b"$4\r\na\r\nb\r\n");
        roundtrip(Frame::Bulk(b("")), b"$0\r\n\r\n");
        roundtrip(Frame::NullBulk, b"$-1\r\n");
        roundtrip(Frame::NullArray, b"*-1\r\n");
        roundtrip(Frame::Null, b"_\r\n");
        roundtrip(
            Frame::Array(vec![Frame::Integer(1), Frame::Bulk(b("x"))]),
            b"*2\r\n:1\r\n$1\r\nx\r\n",
        );
        roundtrip(Frame::Array(vec![]), b"*0\r\n");
        roundtrip(
            Frame::Map(vec![(Frame::Simple(b("k")), Frame::Double(1.5))]),
            b"%1\r\n+k\r\n,1.5\r\n",
        );
        roundtrip(Frame::Set(vec![Frame::Boolean(true)]), b"~1\r\n#t\r\n");
        roundtrip(
            Frame::Attribute(vec![(Frame::Simple(b("ttl")), Frame::Integer(3))]),
            b"|1\r\n+ttl\r\n:3\r\n",
        );
        roundtrip(Frame::Push(vec![Frame::Boolean(false)]), b">1\r\n#f\r\n");
        roundtrip(Frame::Double(f64::INFINITY), b",inf\r\n");
        roundtrip(Frame::Double(f64::NEG_INFINITY), b",-inf\r\n");
        roundtrip(Frame::Double(1e100), b",1e+100\r\n");
        roundtrip(Frame::Double(3.0), b",3\r\n");
        roundtrip(
            Frame::BigNumber(b("-123456789012345678901234567890")),
            b"(-123456789012345678901234567890\r\n",
        );
        roundtrip(
            Frame::Verbatim {
                format: *b"txt",
                text: b("hi"),
            },
            b"=6\r\ntxt:hi\r\n",
        );
    }

    #[test]
    fn nan_double() {
        assert_eq!(enc(&Frame::Double(f64::NAN)), b",nan\r\n");
        match dec(b",nan\r\n").unwrap() {
            Some((Frame::Double(d), 6)) => assert!(d.is_nan()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn simple_with_newlines_is_sanitized() {
        assert_eq!(enc(&Frame::Simple(b("a\r\nb"))), b"+a  b\r\n");
    }

    #[test]
    fn decode_leaves_trailing_bytes() {
        assert_eq!(
            dec(b"+OK\r\n+x").unwrap(),
            Some((Frame::Simple(b("OK")), 5))
        );
    }

    #[test]
    fn decode_lenient_integers_and_doubles() {
        assert_eq!(dec(b":+5\r\n").unwrap(), Some((Frame::Integer(5), 5)));
        assert_eq!(
            dec(b",1.5e-7\r\n").unwrap(),
            Some((Frame::Double(1.5e-7), 9))
        );
        assert_eq!(dec(b",-0\r\n").unwrap().unwrap().0, Frame::Double(-0.0));
    }

    #[test]
    fn decode_errors() {
        use ProtocolError as E;
        let cases: &[(&[u8], E)] = &[
            (b"x\r\n", E::InvalidTypeByte(b'x')),
            (b"+OK\n", E::ExpectedCrlf),
            (b"+OK\rx", E::ExpectedCrlf),
            (b"$1\r\nab\r\n", E::ExpectedCrlf),
            (b":abc\r\n", E::InvalidInteger),
            (b":\r\n", E::InvalidInteger),
            (b":99999999999999999999\r\n", E::InvalidInteger),
            (b",abc\r\n", E::InvalidDouble),
            (b",\r\n", E::InvalidDouble),
            (b"#x\r\n", E::InvalidBoolean),
            (b"_x\r\n", E::InvalidNull),
            (b"(12a\r\n", E::InvalidBigNumber),
            (b"(\r\n", E::InvalidBigNumber),
            (b"=3\r\ntxt\r\n", E::InvalidVerbatim),
            (b"=4\r\ntxtx\r\n", E::InvalidVerbatim),
            (b"$?\r\n", E::StreamedNotSupported),
            (b"*?\r\n", E::StreamedNotSupported),
            (b"$-2\r\n", E::InvalidBulkLength),
            (b"$x\r\n", E::InvalidBulkLength),
            (b"!-1\r\n", E::InvalidBulkLength),
            (b"*-2\r\n", E::InvalidMultibulkLength),
            (b"%-1\r\n", E::InvalidMultibulkLength),
            (b"*\r\n", E::InvalidMultibulkLength),
        ];
        for (wire, e) in cases {
            assert_eq!(
                dec(wire),
                Err(e.clone()),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    #[test]
    fn decode_limits() {
        let l = Limits {
            max_bulk_len: 3,
            max_multibulk_len: 2,
            authenticated: true,
        };
        assert!(decode(b"$3\r\nabc\r\n", &l).unwrap().is_some());
        assert_eq!(decode(b"$4\r\n", &l), Err(ProtocolError::InvalidBulkLength));
        assert_eq!(decode(b"=8\r\n", &l), Err(ProtocolError::InvalidBulkLength));
        assert_eq!(
            decode(b"*3\r\n", &l),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            decode(b"%3\r\n", &l),
            Err(ProtocolError::InvalidMultibulkLength)
        );
    }

    #[test]
    fn huge_claims_do_not_allocate() {
        assert_eq!(dec(b"*2000000000\r\n").unwrap(), None);
        assert_eq!(dec(b"$500000000\r\n").unwrap(), None);
        assert_eq!(dec(b"%1000000000\r\n+a\r\n").unwrap(), None);
    }

    #[test]
    fn nesting_limit() {
        let mut deep = b"*1\r\n".repeat(MAX_DEPTH);
        deep.extend_from_slice(b":1\r\n");
        assert!(dec(&deep).unwrap().is_some());
        let mut too_deep = b"*1\r\n".repeat(MAX_DEPTH + 1);
        too_deep.extend_from_slice(b":1\r\n");
        assert_eq!(dec(&too_deep), Err(ProtocolError::NestingTooDeep));
        // Incomplete deep input is detected as too deep without waiting.
        assert_eq!(
            dec(&b">1\r\n".repeat(100_000)),
            Err(ProtocolError::NestingTooDeep)
        );
    }

    #[test]
    fn long_line_without_crlf() {
        let l = Limits {
            max_bulk_len: 10,
            ..Limits::default()
        };
        let mut v = b"+".to_vec();
        v.extend(std::iter::repeat_n(b'a', 70 * 1024));
        assert_eq!(decode(&v, &l), Err(ProtocolError::LineTooLong));
        assert_eq!(decode(&v, &Limits::default()), Ok(None));
    }
}
