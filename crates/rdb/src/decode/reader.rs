//! The byte reader under every decoder: RDB lengths, strings (plain, int8/16/32, LZF), doubles
//! (text and binary) and times, over a slice that may end early.
//!
//! A read that runs past the end of the slice is not an error here but [`Fail::Need`] with
//! how many more bytes it needs: the file decoder turns that into "read more and call again",
//! whole-buffer callers (DUMP payloads, embedded blobs) into [`ErrorKind::Truncated`]. Nothing
//! is allocated from a length before the bytes it claims are present in the slice.

use crate::{lzf, Error, ErrorKind};

/// Why a read stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fail {
    /// The slice ends early: at least this many more bytes are needed (never 0).
    Need(u64),
    /// The data is wrong.
    Bad(Error),
}

pub(crate) type R<T> = Result<T, Fail>;

impl Fail {
    /// A whole-buffer caller's view: running out of bytes is truncation at `end`.
    pub(crate) fn into_error(self, end: u64) -> Error {
        match self {
            Fail::Need(_) => Error {
                offset: end,
                kind: ErrorKind::Truncated,
            },
            Fail::Bad(e) => e,
        }
    }
}

/// An RDB length field: a plain length, or (top bits `11`) a special string encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Len {
    Plain(u64),
    Encoded(u8),
}

pub(crate) const ENC_INT8: u8 = 0;
pub(crate) const ENC_INT16: u8 = 1;
pub(crate) const ENC_INT32: u8 = 2;
pub(crate) const ENC_LZF: u8 = 3;

/// A cursor over `buf`, whose first byte is at absolute offset `base` (in the file or payload).
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
    /// The buffer holds everything there is (a DUMP payload, an embedded blob): counts can be
    /// checked against what is left.
    complete: bool,
}

impl<'a> Reader<'a> {
    /// A reader over part of a stream that may continue past `buf`.
    pub(crate) fn new(buf: &'a [u8], base: u64) -> Self {
        Reader {
            buf,
            pos: 0,
            base,
            complete: false,
        }
    }

    /// A reader over a buffer that holds all there is.
    pub(crate) fn complete(buf: &'a [u8], base: u64) -> Self {
        Reader {
            buf,
            pos: 0,
            base,
            complete: true,
        }
    }

    /// Bytes read so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Absolute offset of the next byte.
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// An error of `kind` at absolute offset `at`.
    pub(crate) fn fail_at(at: u64, kind: ErrorKind) -> Fail {
        Fail::Bad(Error { offset: at, kind })
    }

    /// A corruption error at the current offset.
    pub(crate) fn corrupt(&self, what: &'static str) -> Fail {
        Self::fail_at(self.offset(), ErrorKind::Corrupt(what))
    }

    pub(crate) fn take(&mut self, n: u64) -> R<&'a [u8]> {
        let rem = self.remaining() as u64;
        if n > rem {
            return Err(Fail::Need(n - rem));
        }
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> R<[u8; N]> {
        let s = self.take(N as u64)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> R<u8> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn u64_le(&mut self) -> R<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub(crate) fn u64_be(&mut self) -> R<u64> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// A length field, which may instead announce a special string encoding.
    pub(crate) fn len_or_encoding(&mut self) -> R<Len> {
        let at = self.offset();
        let b = self.u8()?;
        Ok(match b >> 6 {
            0 => Len::Plain((b & 0x3f) as u64),
            1 => Len::Plain((((b & 0x3f) as u64) << 8) | self.u8()? as u64),
            2 => match b {
                0x80 => Len::Plain(u32::from_be_bytes(self.array()?) as u64),
                0x81 => Len::Plain(self.u64_be()?),
                _ => {
                    return Err(Self::fail_at(
                        at,
                        ErrorKind::Corrupt("unknown length encoding"),
                    ))
                }
            },
            _ => Len::Encoded(b & 0x3f),
        })
    }

    /// A plain length (a count, a size, an id part).
    pub(crate) fn length(&mut self) -> R<u64> {
        let at = self.offset();
        match self.len_or_encoding()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(_) => Err(Self::fail_at(
                at,
                ErrorKind::Corrupt("string encoding where a length was expected"),
            )),
        }
    }

    /// A count of items that each take at least `min_bytes` bytes. When the whole value is in
    /// the buffer (`complete`), a count the rest of the buffer could not hold is refused here;
    /// otherwise the missing bytes show up as [`Fail::Need`] when they are read.
    pub(crate) fn count(&mut self, min_bytes: u64) -> R<u64> {
        let at = self.offset();
        let n = self.length()?;
        if self.complete && n.saturating_mul(min_bytes) > self.remaining() as u64 {
            return Err(Self::fail_at(
                at,
                ErrorKind::Corrupt("count larger than the data can hold"),
            ));
        }
        Ok(n)
    }

    /// A capacity to reserve for `n` items of at least `min_bytes` each: never more than the
    /// bytes at hand can hold, whatever `n` claims.
    pub(crate) fn capacity(&self, n: u64, min_bytes: u64) -> usize {
        n.min(self.remaining() as u64 / min_bytes.max(1)) as usize
    }

    /// A string in any of its encodings; integers come back as decimal text.
    pub(crate) fn string(&mut self) -> R<Vec<u8>> {
        let at = self.offset();
        match self.len_or_encoding()? {
            Len::Plain(n) => Ok(self.take(n)?.to_vec()),
            Len::Encoded(ENC_INT8) => Ok((self.u8()? as i8).to_string().into_bytes()),
            Len::Encoded(ENC_INT16) => {
                Ok(i16::from_le_bytes(self.array()?).to_string().into_bytes())
            }
            Len::Encoded(ENC_INT32) => {
                Ok(i32::from_le_bytes(self.array()?).to_string().into_bytes())
            }
            Len::Encoded(ENC_LZF) => {
                let clen = self.length()?;
                let len = self.length()?;
                let packed = self.take(clen)?;
                if len == 0 {
                    return Err(Self::fail_at(
                        at,
                        ErrorKind::Corrupt("LZF string of length 0"),
                    ));
                }
                let len = usize::try_from(len)
                    .map_err(|_| Self::fail_at(at, ErrorKind::Corrupt("LZF length too big")))?;
                lzf::decompress(packed, len)
                    .map_err(|_| Self::fail_at(at, ErrorKind::Corrupt("invalid LZF string")))
            }
            Len::Encoded(_) => Err(Self::fail_at(
                at,
                ErrorKind::Corrupt("unknown string encoding"),
            )),
        }
    }

    /// A double as RDB's legacy text form (ZSET type 3): one length byte, 253 NaN, 254 +inf,
    /// 255 -inf, else that many ASCII bytes.
    pub(crate) fn text_double(&mut self) -> R<f64> {
        let at = self.offset();
        let n = self.u8()?;
        match n {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            _ => {
                let s = self.take(n as u64)?;
                parse_double(s)
                    .ok_or_else(|| Self::fail_at(at, ErrorKind::Corrupt("invalid double value")))
            }
        }
    }

    /// A binary double, 8 bytes little-endian (ZSET_2).
    pub(crate) fn binary_double(&mut self) -> R<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// A time in ms, 8 bytes little-endian signed; negative times (long past) become 0.
    pub(crate) fn millis(&mut self) -> R<u64> {
        Ok(i64::from_le_bytes(self.array()?).max(0) as u64)
    }

    /// A time in seconds (old EXPIRETIME), 4 bytes little-endian signed, as ms.
    pub(crate) fn seconds_as_millis(&mut self) -> R<u64> {
        Ok((i32::from_le_bytes(self.array()?) as i64 * 1000).max(0) as u64)
    }
}

/// Parses a score or double written as text (`strtod` on what Redis writes: decimal and
/// exponent forms, `inf`, `-inf`, `nan`). None for anything else.
pub(crate) fn parse_double(s: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(s).ok()?;
    if s.is_empty() || s.len() > 256 {
        return None;
    }
    s.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read<T>(bytes: &[u8], f: impl FnOnce(&mut Reader) -> R<T>) -> R<T> {
        f(&mut Reader::new(bytes, 100))
    }

    #[test]
    fn lengths_of_every_width() {
        assert_eq!(read(&[0x05], |r| r.length()), Ok(5));
        assert_eq!(read(&[0x41, 0x02], |r| r.length()), Ok(0x102));
        assert_eq!(read(&[0x80, 0, 1, 0, 0], |r| r.length()), Ok(65536));
        assert_eq!(
            read(&[0x81, 0, 0, 0, 1, 0, 0, 0, 0], |r| r.length()),
            Ok(1 << 32)
        );
        assert_eq!(
            read(&[0x82], |r| r.length()),
            Err(Reader::fail_at(
                100,
                ErrorKind::Corrupt("unknown length encoding")
            ))
        );
        assert!(matches!(read(&[0xc0], |r| r.length()), Err(Fail::Bad(_))));
    }

    #[test]
    fn short_input_says_how_much_more_it_needs() {
        assert_eq!(read(&[0x80, 0], |r| r.length()), Err(Fail::Need(3)));
        assert_eq!(read(&[0x05, b'a'], |r| r.string()), Err(Fail::Need(4)));
        // A huge claimed length is a need, not an allocation.
        assert_eq!(
            read(
                &[0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                |r| r.string()
            ),
            Err(Fail::Need(u64::MAX))
        );
    }

    #[test]
    fn integer_encoded_strings_come_back_as_decimal_text() {
        assert_eq!(read(&[0xc0, 0x80], |r| r.string()), Ok(b"-128".to_vec()));
        assert_eq!(
            read(&[0xc1, 0x00, 0x80], |r| r.string()),
            Ok(b"-32768".to_vec())
        );
        assert_eq!(
            read(&[0xc2, 0xff, 0xff, 0xff, 0x7f], |r| r.string()),
            Ok(b"2147483647".to_vec())
        );
        assert!(matches!(read(&[0xc4], |r| r.string()), Err(Fail::Bad(_))));
    }

    #[test]
    fn lzf_strings_decompress_and_bad_ones_are_refused() {
        let data = b"abcabcabcabcabcabcabcabcabcabcabcabc".to_vec();
        let packed = lzf::compress(&data, data.len()).unwrap();
        let mut enc = vec![0xc3, packed.len() as u8, data.len() as u8];
        enc.extend_from_slice(&packed);
        assert_eq!(read(&enc, |r| r.string()), Ok(data.clone()));
        // Wrong uncompressed length.
        enc[2] += 1;
        assert!(matches!(read(&enc, |r| r.string()), Err(Fail::Bad(_))));
        // Length 0.
        assert!(matches!(
            read(&[0xc3, 1, 0, 0], |r| r.string()),
            Err(Fail::Bad(_))
        ));
    }

    #[test]
    fn doubles_text_and_binary() {
        assert_eq!(read(&[254], |r| r.text_double()), Ok(f64::INFINITY));
        assert_eq!(read(&[255], |r| r.text_double()), Ok(f64::NEG_INFINITY));
        assert!(read(&[253], |r| r.text_double()).unwrap().is_nan());
        assert_eq!(read(&[3, b'1', b'.', b'5'], |r| r.text_double()), Ok(1.5));
        assert!(matches!(
            read(&[2, b'x', b'y'], |r| r.text_double()),
            Err(Fail::Bad(_))
        ));
        let mut b = (-0.0f64).to_le_bytes().to_vec();
        let d = read(&b, |r| r.binary_double()).unwrap();
        assert!(d == 0.0 && d.is_sign_negative());
        b.pop();
        assert_eq!(read(&b, |r| r.binary_double()), Err(Fail::Need(1)));
    }

    #[test]
    fn times() {
        assert_eq!(read(&1234i64.to_le_bytes(), |r| r.millis()), Ok(1234));
        assert_eq!(read(&(-5i64).to_le_bytes(), |r| r.millis()), Ok(0));
        assert_eq!(
            read(&7i32.to_le_bytes(), |r| r.seconds_as_millis()),
            Ok(7000)
        );
    }
}
