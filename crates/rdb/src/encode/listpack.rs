//! A listpack writer producing exactly Redis's listpack format, the blob inside hash, sorted
//! set, list-node and stream-node encodings.
//!
//! Layout: a 6-byte header (total bytes, u32 LE; number of entries, u16 LE, 65535 when there
//! are 65535 or more), the entries, and a 0xFF terminator. Each entry is an encoding byte (with
//! the value or the length folded in where it fits), the data, and a "backlen": the entry's
//! length without the backlen, written big-end first in 7-bit groups, every byte but the first
//! flagged with the high bit, so a reader walking backwards can find the entry's start.
//!
//! Encodings: integers as 7-bit unsigned (`0xxxxxxx`), 13-bit (`110xxxxx` + 1 byte), 16, 24,
//! 32 and 64-bit (`0xF1`..`0xF4` + little-endian two's complement); strings with a 6-bit
//! (`10xxxxxx`), 12-bit (`1110xxxx` + 1 byte) or 32-bit (`0xF0` + u32 LE) length. Like
//! Redis's `lpAppend`, a string that is the canonical text of an i64 is stored as the integer.

use super::writer::parse_canonical_i64;

const HEADER_SIZE: usize = 6;
/// The entry count Redis writes when it does not fit the header (`LP_HDR_NUMELE_UNKNOWN`).
pub const COUNT_UNKNOWN: u16 = u16::MAX;
const EOF: u8 = 0xFF;

/// Builds one listpack; [`Listpack::finish`] returns its bytes.
#[derive(Clone, Debug)]
pub struct Listpack {
    buf: Vec<u8>,
    count: u64,
}

impl Default for Listpack {
    fn default() -> Self {
        Self::new()
    }
}

impl Listpack {
    pub fn new() -> Listpack {
        let mut buf = Vec::with_capacity(64);
        buf.resize(HEADER_SIZE, 0);
        Listpack { buf, count: 0 }
    }

    /// Number of entries so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Total size in bytes the listpack would have if finished now (header and terminator
    /// included).
    pub fn total_bytes(&self) -> usize {
        self.buf.len() + 1
    }

    /// Appends an element: as an integer when it is the canonical text of one, else as a
    /// string (Redis's `lpAppend`).
    pub fn push(&mut self, s: &[u8]) {
        match parse_canonical_i64(s) {
            Some(v) if s.len() <= 20 => self.push_int(v),
            _ => self.push_str(s),
        }
    }

    /// Appends an integer entry in its smallest encoding (Redis's `lpAppendInteger`).
    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        let b = &mut self.buf;
        if (0..=127).contains(&v) {
            b.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u64) & 0x1fff;
            b.push(0xC0 | (u >> 8) as u8);
            b.push(u as u8);
        } else if (-32768..=32767).contains(&v) {
            b.push(0xF1);
            b.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-8_388_608..=8_388_607).contains(&v) {
            b.push(0xF2);
            b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if let Ok(w) = i32::try_from(v) {
            b.push(0xF3);
            b.extend_from_slice(&w.to_le_bytes());
        } else {
            b.push(0xF4);
            b.extend_from_slice(&v.to_le_bytes());
        }
        self.end_entry(start);
    }

    /// Appends a string entry, never converted to an integer.
    pub fn push_str(&mut self, s: &[u8]) {
        let start = self.buf.len();
        let b = &mut self.buf;
        let n = s.len();
        if n < 64 {
            b.push(0x80 | n as u8);
        } else if n < 4096 {
            b.push(0xE0 | (n >> 8) as u8);
            b.push(n as u8);
        } else {
            b.push(0xF0);
            b.extend_from_slice(&(n as u32).to_le_bytes());
        }
        b.extend_from_slice(s);
        self.end_entry(start);
    }

    fn end_entry(&mut self, start: usize) {
        let len = (self.buf.len() - start) as u64;
        write_backlen(&mut self.buf, len);
        self.count += 1;
    }

    /// The finished listpack.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = self.buf.len() as u32;
        let count = if self.count >= COUNT_UNKNOWN as u64 {
            COUNT_UNKNOWN
        } else {
            self.count as u16
        };
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// Bytes `s` takes in a listpack as [`Listpack::push`] writes it (encoding, data, backlen).
pub fn entry_size(s: &[u8]) -> usize {
    let enc = match parse_canonical_i64(s) {
        Some(v) if s.len() <= 20 => int_size(v),
        _ => match s.len() {
            n if n < 64 => 1 + n,
            n if n < 4096 => 2 + n,
            n => 5 + n,
        },
    };
    enc + backlen_size(enc as u64)
}

fn int_size(v: i64) -> usize {
    match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8_388_608..=8_388_607 => 4,
        _ if i32::try_from(v).is_ok() => 5,
        _ => 9,
    }
}

fn backlen_size(l: u64) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// The backlen of an entry `l` bytes long: 7-bit groups, most significant first, every byte
/// after the first with its high bit set.
fn write_backlen(out: &mut Vec<u8>, l: u64) {
    let n = backlen_size(l);
    for i in (0..n).rev() {
        let group = ((l >> (7 * i)) & 127) as u8;
        out.push(if i == n - 1 { group } else { group | 128 });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_int(v: i64) -> Vec<u8> {
        let mut lp = Listpack::new();
        lp.push_int(v);
        let b = lp.finish();
        assert_eq!(
            u32::from_le_bytes(b[0..4].try_into().unwrap()) as usize,
            b.len()
        );
        assert_eq!(&b[4..6], &[1, 0]);
        assert_eq!(*b.last().unwrap(), 0xFF);
        b[6..b.len() - 1].to_vec()
    }

    #[test]
    fn integers_at_every_width_boundary() {
        // [encoding + data, backlen]
        assert_eq!(one_int(0), [0x00, 1]);
        assert_eq!(one_int(127), [0x7f, 1]);
        assert_eq!(one_int(128), [0xC0, 0x80, 2]);
        assert_eq!(one_int(-1), [0xDF, 0xFF, 2]);
        assert_eq!(one_int(4095), [0xCF, 0xFF, 2]);
        assert_eq!(one_int(-4096), [0xD0, 0x00, 2]);
        assert_eq!(one_int(4096), [0xF1, 0x00, 0x10, 3]);
        assert_eq!(one_int(-4097), [0xF1, 0xFF, 0xEF, 3]);
        assert_eq!(one_int(32767), [0xF1, 0xFF, 0x7F, 3]);
        assert_eq!(one_int(-32768), [0xF1, 0x00, 0x80, 3]);
        assert_eq!(one_int(32768), [0xF2, 0x00, 0x80, 0x00, 4]);
        assert_eq!(one_int(-32769), [0xF2, 0xFF, 0x7F, 0xFF, 4]);
        assert_eq!(one_int(8_388_607), [0xF2, 0xFF, 0xFF, 0x7F, 4]);
        assert_eq!(one_int(-8_388_608), [0xF2, 0x00, 0x00, 0x80, 4]);
        assert_eq!(one_int(8_388_608), [0xF3, 0x00, 0x00, 0x80, 0x00, 5]);
        assert_eq!(one_int(-8_388_609), [0xF3, 0xFF, 0xFF, 0x7F, 0xFF, 5]);
        assert_eq!(one_int(i32::MAX as i64), [0xF3, 0xFF, 0xFF, 0xFF, 0x7F, 5]);
        assert_eq!(one_int(i32::MIN as i64), [0xF3, 0x00, 0x00, 0x00, 0x80, 5]);
        let mut big = vec![0xF4];
        big.extend_from_slice(&(i32::MAX as i64 + 1).to_le_bytes());
        big.push(9);
        assert_eq!(one_int(i32::MAX as i64 + 1), big);
        let mut min = vec![0xF4];
        min.extend_from_slice(&i64::MIN.to_le_bytes());
        min.push(9);
        assert_eq!(one_int(i64::MIN), min);
        let mut max = vec![0xF4];
        max.extend_from_slice(&i64::MAX.to_le_bytes());
        max.push(9);
        assert_eq!(one_int(i64::MAX), max);
    }

    fn one_str(s: &[u8]) -> Vec<u8> {
        let mut lp = Listpack::new();
        lp.push(s);
        let b = lp.finish();
        assert_eq!(
            u32::from_le_bytes(b[0..4].try_into().unwrap()) as usize,
            b.len()
        );
        assert_eq!(entry_size(s), b.len() - 7);
        b[6..b.len() - 1].to_vec()
    }

    #[test]
    fn strings_in_every_length_class() {
        assert_eq!(one_str(b""), [0x80, 1]);
        assert_eq!(one_str(b"ab"), [0x82, b'a', b'b', 3]);
        let s63 = [b'x'; 63];
        let got = one_str(&s63);
        assert_eq!(got[0], 0x80 | 63);
        assert_eq!(got[64..], [64]);
        let s64 = [b'x'; 64];
        let got = one_str(&s64);
        assert_eq!(got[..2], [0xE0, 64]);
        assert_eq!(got[66..], [66]);
        // 126 + 2 = 128 bytes of entry: the first two-byte backlen.
        let got = one_str(&[b'y'; 126]);
        assert_eq!(got[..2], [0xE0, 126]);
        assert_eq!(got[128..], [1, 0x80]);
        let s4095 = vec![b'z'; 4095];
        let got = one_str(&s4095);
        assert_eq!(got[..2], [0xEF, 0xFF]);
        // 4097 = 0b100000_0000001: groups 32, 1.
        assert_eq!(got[4097..], [32, 0x81]);
        let s4096 = vec![b'z'; 4096];
        let got = one_str(&s4096);
        assert_eq!(got[..5], [0xF0, 0x00, 0x10, 0x00, 0x00]);
        // 4101 = 32 * 128 + 5.
        assert_eq!(got[5 + 4096..], [32, 0x85]);
        // Three-byte backlen: an entry of 16383 bytes.
        let s = vec![b'w'; 16383 - 5];
        let got = one_str(&s);
        assert_eq!(got[16383..], [0, 0xFF, 0xFF]);
        let s = vec![b'w'; 16382 - 5];
        let got = one_str(&s);
        assert_eq!(got[16382..], [0x7F, 0xFE]);
    }

    #[test]
    fn integer_like_strings_follow_string2ll() {
        assert_eq!(one_str(b"7"), [7, 1]);
        assert_eq!(one_str(b"-1"), [0xDF, 0xFF, 2]);
        assert_eq!(one_str(b"007"), [0x83, b'0', b'0', b'7', 4]);
        assert_eq!(one_str(b"-0"), [0x82, b'-', b'0', 3]);
        assert_eq!(one_str(b"+1"), [0x82, b'+', b'1', 3]);
        assert_eq!(
            one_str(b"9223372036854775808")[0],
            0x80 | 19,
            "past i64 stays a string"
        );
    }

    #[test]
    fn count_saturates_at_65535() {
        for n in [65534u32, 65535, 70000] {
            let mut lp = Listpack::new();
            for i in 0..n {
                lp.push_int((i % 100) as i64);
            }
            assert_eq!(lp.count(), n as u64);
            let b = lp.finish();
            let count = u16::from_le_bytes([b[4], b[5]]);
            assert_eq!(count as u32, n.min(65535), "{n}");
            assert_eq!(
                u32::from_le_bytes(b[0..4].try_into().unwrap()) as usize,
                b.len()
            );
            assert_eq!(b.len(), 6 + 2 * n as usize + 1);
        }
    }

    #[test]
    fn empty_listpack() {
        assert_eq!(Listpack::new().finish(), [7, 0, 0, 0, 0, 0, 0xFF]);
    }
}
