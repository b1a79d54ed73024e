//! Ziplists (RDB types 10, 12, 13 and the nodes of quicklist type 14): the pre-7.0 encoding,
//! still loaded from old files and DUMP payloads, checked as Redis's deep sanitization does.
//!
//! Layout: `zlbytes: u32 LE`, `zltail: u32 LE` (offset of the last entry), `zllen: u16 LE`
//! (65535 = "count it"), entries, `0xFF`. An entry is the previous entry's size (1 byte, or
//! `0xFE` + u32 LE), an encoding (`00`/`01`/`10` + 6-bit, 14-bit big-endian or 32-bit
//! big-endian string length; `0xC0` i16, `0xD0` i32, `0xE0` i64, `0xF0` i24, `0xFE` i8,
//! `0xF1..=0xFD` the values 0-12), then the data. Checked: sizes, terminator, every entry
//! inside the blob, every previous-size field, the tail offset and the count.

use super::Elem;

const HEADER: usize = 10;
const END: u8 = 0xFF;
const BIG_PREVLEN: u8 = 0xFE;

/// Validates `zl` and returns its entries in order.
pub(crate) fn parse(zl: &[u8]) -> Result<Vec<Elem<'_>>, &'static str> {
    const PAST: &str = "ziplist entry runs past the end";
    if zl.len() < HEADER + 1 {
        return Err("ziplist shorter than its header");
    }
    let u32_at = |i: usize| u32::from_le_bytes([zl[i], zl[i + 1], zl[i + 2], zl[i + 3]]) as usize;
    if u32_at(0) != zl.len() {
        return Err("ziplist bytes do not match its size");
    }
    let tail = u32_at(4);
    let count = u16::from_le_bytes([zl[8], zl[9]]);
    let end = zl.len() - 1;
    if zl[end] != END {
        return Err("ziplist without its terminator");
    }
    let mut out = Vec::with_capacity((count as usize).min(end / 2));
    let mut p = HEADER;
    let mut prev_len = 0usize;
    let mut last = HEADER;
    while p < end {
        let s = &zl[p..end];
        let (prevlen, plen) = if s[0] < BIG_PREVLEN {
            (s[0] as usize, 1)
        } else if s[0] == BIG_PREVLEN {
            let d = s.get(1..5).ok_or(PAST)?;
            (u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize, 5)
        } else {
            return Err("ziplist entry with an invalid previous length");
        };
        if prevlen != prev_len {
            return Err("ziplist previous entry length does not match");
        }
        let e = s.get(plen..).ok_or(PAST)?;
        let b = *e.first().ok_or(PAST)?;
        let byte = |i: usize| e.get(i).copied().ok_or(PAST);
        let string = |hdr: usize, len: usize| -> Result<(Elem<'_>, usize), &'static str> {
            let data = e.get(hdr..hdr.checked_add(len).ok_or(PAST)?).ok_or(PAST)?;
            Ok((Elem::Str(data), hdr + len))
        };
        let int = |n: usize| -> Result<(Elem<'_>, usize), &'static str> {
            let d = e.get(1..1 + n).ok_or(PAST)?;
            let mut v: u64 = 0;
            for (i, &x) in d.iter().enumerate() {
                v |= (x as u64) << (8 * i);
            }
            let shift = 64 - 8 * n as u32;
            Ok((Elem::Int(((v << shift) as i64) >> shift), 1 + n))
        };
        let (elem, len) = match b >> 6 {
            0 => string(1, (b & 0x3f) as usize)?,
            1 => string(2, (((b & 0x3f) as usize) << 8) | byte(1)? as usize)?,
            // Redis masks the low bits of a string encoding byte, so any 10xxxxxx is a 32-bit length.
            2 => {
                let d = e.get(1..5).ok_or(PAST)?;
                string(5, u32::from_be_bytes([d[0], d[1], d[2], d[3]]) as usize)?
            }
            _ => match b {
                0xc0 => int(2)?,
                0xd0 => int(4)?,
                0xe0 => int(8)?,
                0xf0 => int(3)?,
                0xfe => int(1)?,
                0xf1..=0xfd => (Elem::Int((b & 0x0f) as i64 - 1), 1),
                _ => return Err("invalid ziplist entry encoding"),
            },
        };
        out.push(elem);
        last = p;
        prev_len = plen + len;
        p += prev_len;
    }
    if p != end {
        return Err(PAST);
    }
    if tail != last {
        return Err("ziplist tail offset does not point at its last entry");
    }
    if count != u16::MAX && count as usize != out.len() {
        return Err("ziplist entry count does not match its entries");
    }
    Ok(out)
}

/// Test helper: builds a ziplist from elements with Redis's encodings.
#[cfg(test)]
pub(crate) fn build(elems: &[Elem<'_>]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut prev = 0usize;
    let mut last = HEADER;
    for e in elems {
        let start = body.len();
        last = HEADER + start;
        if prev < BIG_PREVLEN as usize {
            body.push(prev as u8);
        } else {
            body.push(BIG_PREVLEN);
            body.extend_from_slice(&(prev as u32).to_le_bytes());
        }
        match *e {
            Elem::Int(v) if (0..=12).contains(&v) => body.push(0xf1 + v as u8),
            Elem::Int(v) if i8::try_from(v).is_ok() => {
                body.push(0xfe);
                body.push(v as u8);
            }
            Elem::Int(v) if i16::try_from(v).is_ok() => {
                body.push(0xc0);
                body.extend_from_slice(&(v as i16).to_le_bytes());
            }
            Elem::Int(v) if (-(1 << 23)..(1 << 23)).contains(&v) => {
                body.push(0xf0);
                body.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            Elem::Int(v) if i32::try_from(v).is_ok() => {
                body.push(0xd0);
                body.extend_from_slice(&(v as i32).to_le_bytes());
            }
            Elem::Int(v) => {
                body.push(0xe0);
                body.extend_from_slice(&v.to_le_bytes());
            }
            Elem::Str(s) if s.len() < 64 => {
                body.push(s.len() as u8);
                body.extend_from_slice(s);
            }
            Elem::Str(s) if s.len() < 16384 => {
                body.push(0x40 | (s.len() >> 8) as u8);
                body.push(s.len() as u8);
                body.extend_from_slice(s);
            }
            Elem::Str(s) => {
                body.push(0x80);
                body.extend_from_slice(&(s.len() as u32).to_be_bytes());
                body.extend_from_slice(s);
            }
        }
        prev = body.len() - start;
    }
    let mut zl = Vec::new();
    zl.extend_from_slice(&((body.len() + HEADER + 1) as u32).to_le_bytes());
    zl.extend_from_slice(&(last as u32).to_le_bytes());
    zl.extend_from_slice(&(elems.len().min(u16::MAX as usize) as u16).to_le_bytes());
    zl.extend_from_slice(&body);
    zl.push(END);
    zl
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Elem<'static>> {
        vec![
            Elem::Int(0),
            Elem::Int(12),
            Elem::Int(13),
            Elem::Int(-128),
            Elem::Int(-32768),
            Elem::Int(8_388_607),
            Elem::Int(i32::MIN as i64),
            Elem::Int(i64::MAX),
            Elem::Str(b""),
            Elem::Str(&[b'a'; 63]),
            Elem::Str(&[b'b'; 300]),
            Elem::Str(&[b'c'; 16384]),
            Elem::Str(b"end"),
        ]
    }

    #[test]
    fn every_encoding_round_trips() {
        let elems = sample();
        assert_eq!(parse(&build(&elems)).unwrap(), elems);
        assert_eq!(parse(&build(&[])).unwrap(), vec![]);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let zl = build(&sample());
        for cut in 0..zl.len() {
            assert!(parse(&zl[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn wrong_entry_count_is_refused() {
        let mut zl = build(&[Elem::Int(1), Elem::Str(b"x")]);
        zl[8] = 3;
        assert_eq!(
            parse(&zl),
            Err("ziplist entry count does not match its entries")
        );
        zl[8] = 0xff;
        zl[9] = 0xff;
        assert_eq!(parse(&zl).unwrap().len(), 2);
    }

    #[test]
    fn tail_prevlen_and_encoding_are_checked() {
        let zl = build(&[Elem::Int(1), Elem::Str(b"xy")]);
        let mut bad = zl.clone();
        bad[4] += 1;
        assert_eq!(
            parse(&bad),
            Err("ziplist tail offset does not point at its last entry")
        );
        let mut bad = zl.clone();
        bad[12] = 5; // second entry's previous length (first entry is 2 bytes)
        assert_eq!(
            parse(&bad),
            Err("ziplist previous entry length does not match")
        );
        let mut bad = zl;
        bad[11] = 0xc5;
        assert_eq!(parse(&bad), Err("invalid ziplist entry encoding"));
    }
}
