//! Byte scanning helpers used by the parsers.
//!
//! Requests are scanned for line terminators on the hot path, so these
//! helpers look at eight bytes per step (SWAR: "SIMD within a register")
//! after a short byte-wise prefix, which is where a terminator is usually
//! found (`$3\r\n` is four bytes long).

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Bytes checked one at a time before switching to word-at-a-time scanning.
const SHORT_PREFIX: usize = 16;

/// Non-zero iff some byte of `w` is zero. The lowest set bit always belongs
/// to the lowest zero byte (a borrow can only create false positives above a
/// real zero byte).
#[inline(always)]
fn zero_bytes(w: u64) -> u64 {
    w.wrapping_sub(LO) & !w & HI
}

/// Index of the first byte at or after `from` that equals `a` or `b`.
#[inline]
pub(crate) fn find2(hay: &[u8], from: usize, a: u8, b: u8) -> Option<usize> {
    let n = hay.len();
    let mut i = from;
    let short_end = n.min(from.saturating_add(SHORT_PREFIX));
    while i < short_end {
        let c = hay[i];
        if c == a || c == b {
            return Some(i);
        }
        i += 1;
    }
    if i >= n {
        return None;
    }
    let ma = LO.wrapping_mul(u64::from(a));
    let mb = LO.wrapping_mul(u64::from(b));
    let mut chunks = hay[i..].chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let z = zero_bytes(w ^ ma) | zero_bytes(w ^ mb);
        if z != 0 {
            return Some(i + (z.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    for &c in chunks.remainder() {
        if c == a || c == b {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Result of looking for a line terminator the way C's `strchr` does on a
/// NUL-terminated buffer: a NUL byte ends the search unsuccessfully.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CFind {
    /// The terminator is at this index.
    Found(usize),
    /// Neither the terminator nor a NUL byte is in the buffer.
    NotYet,
    /// A NUL byte comes first: the terminator can never be found, whatever
    /// arrives later (Redis then waits until the line limit is exceeded).
    Nul,
}

#[inline]
pub(crate) fn strchr(hay: &[u8], from: usize, needle: u8) -> CFind {
    match find2(hay, from, needle, 0) {
        Some(i) if hay[i] == needle => CFind::Found(i),
        Some(_) => CFind::Nul,
        None => CFind::NotYet,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(hay: &[u8], from: usize, a: u8, b: u8) -> Option<usize> {
        hay.iter()
            .enumerate()
            .skip(from)
            .find(|(_, &c)| c == a || c == b)
            .map(|(i, _)| i)
    }

    #[test]
    fn find2_matches_naive_at_every_position() {
        for len in 0..80 {
            for hit in 0..=len {
                let mut v = vec![b'x'; len];
                if hit < len {
                    v[hit] = b'\r';
                }
                // A high byte that must not be confused with a match.
                if len > 3 {
                    v[len - 1] = if hit == len - 1 { b'\r' } else { 0x8d };
                }
                for from in 0..=len {
                    assert_eq!(
                        find2(&v, from, b'\r', b'\n'),
                        naive(&v, from, b'\r', b'\n'),
                        "len {len} hit {hit} from {from}"
                    );
                }
            }
        }
    }

    #[test]
    fn find2_first_of_two_needles() {
        let v = b"aaaaaaaaaaaaaaaaaaaaaaaa\naaa\raaaa";
        assert_eq!(find2(v, 0, b'\r', b'\n'), Some(24));
        assert_eq!(find2(v, 25, b'\r', b'\n'), Some(28));
        assert_eq!(find2(v, 40, b'\r', b'\n'), None);
    }

    #[test]
    fn strchr_stops_at_nul() {
        assert_eq!(strchr(b"ab\0c\r\n", 0, b'\r'), CFind::Nul);
        assert_eq!(strchr(b"abc\r\0", 0, b'\r'), CFind::Found(3));
        assert_eq!(strchr(b"abc", 0, b'\r'), CFind::NotYet);
    }
}
