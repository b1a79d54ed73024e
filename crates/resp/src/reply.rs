//! [`ReplyWriter`]: how command handlers write replies.

use crate::num::{format_double, write_i64, write_u64};
use crate::scan::find2;

/// Appends replies to a buffer in the connection's protocol version.
/// Where RESP2 and RESP3 differ, each method writes what Redis 7.2 writes.
#[derive(Debug)]
pub struct ReplyWriter<'a> {
    /// The output buffer; replies are appended.
    pub out: &'a mut Vec<u8>,
    /// Whether the connection speaks RESP3 (after `HELLO 3`).
    pub resp3: bool,
}

impl<'a> ReplyWriter<'a> {
    /// A writer appending to `out`.
    #[inline]
    pub fn new(out: &'a mut Vec<u8>, resp3: bool) -> Self {
        ReplyWriter { out, resp3 }
    }

    #[inline]
    fn header(&mut self, ty: u8, n: usize) {
        self.out.reserve(24);
        self.out.push(ty);
        write_u64(n as u64, self.out);
        self.out.extend_from_slice(b"\r\n");
    }

    /// Appends `line` with CR and LF turned into spaces, then CRLF.
    #[inline]
    fn sanitized_line(&mut self, line: &[u8]) {
        self.out.reserve(line.len() + 2);
        if find2(line, 0, b'\r', b'\n').is_none() {
            self.out.extend_from_slice(line);
        } else {
            self.out.extend(
                line.iter()
                    .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
            );
        }
        self.out.extend_from_slice(b"\r\n");
    }

    /// `+s\r\n`. CR/LF inside `s` become spaces (they would break the
    /// stream).
    #[inline]
    pub fn simple(&mut self, s: &[u8]) {
        self.out.push(b'+');
        self.sanitized_line(s);
    }

    /// `+OK\r\n`.
    #[inline]
    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }

    /// `-msg\r\n`. `msg` includes its code, e.g. `b"ERR syntax error"` or
    /// `b"WRONGTYPE Operation against a key holding the wrong kind of
    /// value"`; a leading `-` is not doubled. CR/LF inside become spaces, as
    /// Redis does for formatted errors.
    #[inline]
    pub fn error(&mut self, msg: &[u8]) {
        if msg.first() != Some(&b'-') {
            self.out.push(b'-');
        }
        self.sanitized_line(msg);
    }

    /// `:v\r\n`.
    #[inline]
    pub fn int(&mut self, v: i64) {
        self.out.reserve(24);
        self.out.push(b':');
        write_i64(v, self.out);
        self.out.extend_from_slice(b"\r\n");
    }

    /// `$len\r\nb\r\n`.
    #[inline]
    pub fn bulk(&mut self, b: &[u8]) {
        self.out.reserve(b.len() + 24);
        self.header(b'$', b.len());
        self.out.extend_from_slice(b);
        self.out.extend_from_slice(b"\r\n");
    }

    /// Null bulk: RESP2 `$-1\r\n`, RESP3 `_\r\n`.
    #[inline]
    pub fn null(&mut self) {
        self.out
            .extend_from_slice(if self.resp3 { b"_\r\n" } else { b"$-1\r\n" });
    }

    /// Null array: RESP2 `*-1\r\n`, RESP3 `_\r\n`.
    #[inline]
    pub fn null_array(&mut self) {
        self.out
            .extend_from_slice(if self.resp3 { b"_\r\n" } else { b"*-1\r\n" });
    }

    /// `*len\r\n`; `len` elements must follow.
    #[inline]
    pub fn array(&mut self, len: usize) {
        self.header(b'*', len);
    }

    /// RESP3 `%pairs\r\n`, RESP2 `*<2*pairs>\r\n`; `pairs` key/value pairs
    /// must follow.
    #[inline]
    pub fn map(&mut self, pairs: usize) {
        if self.resp3 {
            self.header(b'%', pairs);
        } else {
            self.header(b'*', pairs.saturating_mul(2));
        }
    }

    /// RESP3 `~len\r\n`, RESP2 `*len\r\n`.
    #[inline]
    pub fn set(&mut self, len: usize) {
        self.header(if self.resp3 { b'~' } else { b'*' }, len);
    }

    /// RESP3 `>len\r\n`, RESP2 `*len\r\n`.
    #[inline]
    pub fn push(&mut self, len: usize) {
        self.header(if self.resp3 { b'>' } else { b'*' }, len);
    }

    /// RESP3 `|pairs\r\n`: an attribute (out-of-band metadata) of `pairs` key/value pairs,
    /// which must follow, then the reply it annotates. RESP2 has no attributes: there this
    /// writes nothing, and the caller must not write the pairs either (Redis sends RESP2
    /// clients the plain reply alone).
    #[inline]
    pub fn attribute(&mut self, pairs: usize) {
        if self.resp3 {
            self.header(b'|', pairs);
        }
    }

    /// A double, formatted by [`crate::format_double`]: RESP3 `,repr\r\n`,
    /// RESP2 a bulk string of the same text (`$3\r\n3.5\r\n`, `$3\r\ninf\r\n`).
    pub fn double(&mut self, v: f64) {
        if self.resp3 {
            self.out.push(b',');
            format_double(v, self.out);
            self.out.extend_from_slice(b"\r\n");
        } else {
            // Format in place, then move the `$len\r\n` header in front
            // of the (at most 24-byte) text.
            let start = self.out.len();
            format_double(v, self.out);
            let len = self.out.len() - start;
            let before = self.out.len();
            self.header(b'$', len);
            let header_len = self.out.len() - before;
            self.out[start..].rotate_right(header_len);
            self.out.extend_from_slice(b"\r\n");
        }
    }

    /// RESP3 `#t\r\n` / `#f\r\n`, RESP2 `:1\r\n` / `:0\r\n`.
    #[inline]
    pub fn boolean(&mut self, b: bool) {
        self.out.extend_from_slice(match (self.resp3, b) {
            (true, true) => b"#t\r\n",
            (true, false) => b"#f\r\n",
            (false, true) => b":1\r\n",
            (false, false) => b":0\r\n",
        });
    }

    /// RESP3 `=len\r\nfmt:text\r\n`, RESP2 a bulk string of `text`.
    pub fn verbatim(&mut self, format: &[u8; 3], text: &[u8]) {
        if self.resp3 {
            self.out.reserve(text.len() + 28);
            self.header(b'=', text.len() + 4);
            self.out.extend_from_slice(format);
            self.out.push(b':');
            self.out.extend_from_slice(text);
            self.out.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text);
        }
    }

    /// RESP3 `(digits\r\n`, RESP2 a bulk string of `digits`.
    pub fn big_number(&mut self, digits: &[u8]) {
        if self.resp3 {
            self.out.push(b'(');
            self.sanitized_line(digits);
        } else {
            self.bulk(digits);
        }
    }

    /// Appends pre-encoded bytes as they are.
    #[inline]
    pub fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(f: impl Fn(&mut ReplyWriter<'_>)) -> (Vec<u8>, Vec<u8>) {
        let mut a = Vec::new();
        f(&mut ReplyWriter::new(&mut a, false));
        let mut b = Vec::new();
        f(&mut ReplyWriter::new(&mut b, true));
        (a, b)
    }

    fn check(f: impl Fn(&mut ReplyWriter<'_>), resp2: &[u8], resp3: &[u8]) {
        let (a, b) = both(f);
        assert_eq!(
            (String::from_utf8_lossy(&a), String::from_utf8_lossy(&b)),
            (
                String::from_utf8_lossy(resp2),
                String::from_utf8_lossy(resp3)
            )
        );
    }

    #[test]
    fn simple_ok_error() {
        check(|w| w.simple(b"PONG"), b"+PONG\r\n", b"+PONG\r\n");
        check(|w| w.simple(b"a\r\nb"), b"+a  b\r\n", b"+a  b\r\n");
        check(|w| w.ok(), b"+OK\r\n", b"+OK\r\n");
        check(
            |w| w.error(b"ERR syntax error"),
            b"-ERR syntax error\r\n",
            b"-ERR syntax error\r\n",
        );
        check(
            |w| w.error(b"-NOAUTH x"),
            b"-NOAUTH x\r\n",
            b"-NOAUTH x\r\n",
        );
        check(
            |w| w.error(b"ERR a\nb\rc"),
            b"-ERR a b c\r\n",
            b"-ERR a b c\r\n",
        );
        check(|w| w.error(b""), b"-\r\n", b"-\r\n");
    }

    #[test]
    fn attribute_bignum_verbatim() {
        check(|w| w.attribute(1), b"", b"|1\r\n");
        check(
            |w| w.big_number(b"1234567999999999999999999999999999999"),
            b"$37\r\n1234567999999999999999999999999999999\r\n",
            b"(1234567999999999999999999999999999999\r\n",
        );
        check(
            |w| w.verbatim(b"txt", b"This is a verbatim\nstring"),
            b"$25\r\nThis is a verbatim\nstring\r\n",
            b"=29\r\ntxt:This is a verbatim\nstring\r\n",
        );
    }

    #[test]
    fn ints_and_bulks() {
        check(|w| w.int(0), b":0\r\n", b":0\r\n");
        check(|w| w.int(-7), b":-7\r\n", b":-7\r\n");
        check(
            |w| w.int(i64::MIN),
            b":-9223372036854775808\r\n",
            b":-9223372036854775808\r\n",
        );
        check(
            |w| w.int(i64::MAX),
            b":9223372036854775807\r\n",
            b":9223372036854775807\r\n",
        );
        check(|w| w.bulk(b"hello"), b"$5\r\nhello\r\n", b"$5\r\nhello\r\n");
        check(|w| w.bulk(b""), b"$0\r\n\r\n", b"$0\r\n\r\n");
    }

    #[test]
    fn nulls() {
        check(|w| w.null(), b"$-1\r\n", b"_\r\n");
        check(|w| w.null_array(), b"*-1\r\n", b"_\r\n");
    }

    #[test]
    fn aggregates() {
        check(|w| w.array(3), b"*3\r\n", b"*3\r\n");
        check(|w| w.array(0), b"*0\r\n", b"*0\r\n");
        check(|w| w.map(2), b"*4\r\n", b"%2\r\n");
        check(|w| w.set(5), b"*5\r\n", b"~5\r\n");
        check(|w| w.push(3), b"*3\r\n", b">3\r\n");
    }

    #[test]
    fn doubles() {
        check(|w| w.double(3.5), b"$3\r\n3.5\r\n", b",3.5\r\n");
        check(|w| w.double(3.0), b"$1\r\n3\r\n", b",3\r\n");
        check(|w| w.double(f64::INFINITY), b"$3\r\ninf\r\n", b",inf\r\n");
        check(
            |w| w.double(f64::NEG_INFINITY),
            b"$4\r\n-inf\r\n",
            b",-inf\r\n",
        );
        check(|w| w.double(f64::NAN), b"$3\r\nnan\r\n", b",nan\r\n");
        check(|w| w.double(1e100), b"$6\r\n1e+100\r\n", b",1e+100\r\n");
        check(|w| w.double(-0.0), b"$2\r\n-0\r\n", b",-0\r\n");
        check(
            |w| w.double(0.1 + 0.2),
            b"$19\r\n0.30000000000000004\r\n",
            b",0.30000000000000004\r\n",
        );
        // Appends after existing content.
        let mut v = b"x".to_vec();
        ReplyWriter::new(&mut v, false).double(2.5);
        assert_eq!(v, b"x$3\r\n2.5\r\n");
    }

    #[test]
    fn booleans_verbatim_bignum_raw() {
        check(|w| w.boolean(true), b":1\r\n", b"#t\r\n");
        check(|w| w.boolean(false), b":0\r\n", b"#f\r\n");
        check(
            |w| w.verbatim(b"txt", b"Some string"),
            b"$11\r\nSome string\r\n",
            b"=15\r\ntxt:Some string\r\n",
        );
        check(
            |w| w.big_number(b"1234567890123456789012"),
            b"$22\r\n1234567890123456789012\r\n",
            b"(1234567890123456789012\r\n",
        );
        check(|w| w.raw(b"+QUEUED\r\n"), b"+QUEUED\r\n", b"+QUEUED\r\n");
    }
}
