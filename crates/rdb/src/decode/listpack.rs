//! Listpacks (Redis 7's small-collection encoding, RDB types 16-18, 20, 25 and stream nodes),
//! checked the way Redis's deep sanitization checks them.
//!
//! Layout: `total_bytes: u32 LE`, `count: u16 LE` (65535 = "count it"), entries, `0xFF`. An
//! entry is an encoding byte (7-bit uint, 6/12/32-bit string lengths, 13/16/24/32/64-bit
//! ints), its data, then a back-length: the size of encoding + data in 1-5 bytes of 7 bits,
//! most significant first, every byte but the first with its top bit set (so it reads
//! backwards). Checked: the header's total against the blob, the terminator, every entry
//! inside the blob with a valid encoding and a back-length that matches it exactly, and the
//! count (unless 65535).

use super::Elem;

/// `count` value meaning "too many to store: count the entries".
const COUNT_UNKNOWN: u16 = u16::MAX;
const HEADER: usize = 6;
const EOF: u8 = 0xFF;

/// The back-length bytes Redis writes for an entry of `len` bytes (encoding + data).
fn backlen(len: usize, out: &mut [u8; 5]) -> usize {
    let l = len as u64;
    if l < 128 {
        out[0] = l as u8;
        1
    } else if l < 16384 {
        out[0] = (l >> 7) as u8;
        out[1] = (l & 127) as u8 | 128;
        2
    } else if l < 2_097_152 {
        out[0] = (l >> 14) as u8;
        out[1] = ((l >> 7) & 127) as u8 | 128;
        out[2] = (l & 127) as u8 | 128;
        3
    } else if l < 268_435_456 {
        out[0] = (l >> 21) as u8;
        out[1] = ((l >> 14) & 127) as u8 | 128;
        out[2] = ((l >> 7) & 127) as u8 | 128;
        out[3] = (l & 127) as u8 | 128;
        4
    } else {
        out[0] = (l >> 28) as u8;
        out[1] = ((l >> 21) & 127) as u8 | 128;
        out[2] = ((l >> 14) & 127) as u8 | 128;
        out[3] = ((l >> 7) & 127) as u8 | 128;
        out[4] = (l & 127) as u8 | 128;
        5
    }
}

/// Validates `lp` and returns its entries in order. The error says what is wrong; its
/// offset is the caller's (the string that held the listpack).
pub(crate) fn parse(lp: &[u8]) -> Result<Vec<Elem<'_>>, &'static str> {
    if lp.len() < HEADER + 1 {
        return Err("listpack shorter than its header");
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    if total != lp.len() {
        return Err("listpack total bytes do not match its size");
    }
    let count = u16::from_le_bytes([lp[4], lp[5]]);
    let end = lp.len() - 1;
    if lp[end] != EOF {
        return Err("listpack without its terminator");
    }
    let mut out = Vec::with_capacity((count as usize).min(end / 2));
    let mut p = HEADER;
    while p < end {
        let (elem, len) = entry(&lp[p..end])?;
        let mut want = [0u8; 5];
        let n = backlen(len, &mut want);
        let back = lp
            .get(p + len..p + len + n)
            .filter(|_| p + len + n <= end)
            .ok_or("listpack entry runs past the end")?;
        if back != &want[..n] {
            return Err("listpack entry back-length does not match");
        }
        out.push(elem);
        p += len + n;
    }
    if p != end {
        return Err("listpack entry runs past the end");
    }
    if count != COUNT_UNKNOWN && count as usize != out.len() {
        return Err("listpack count does not match its entries");
    }
    Ok(out)
}

/// One entry at the start of `s` (which stops before the terminator): its value and the size
/// of its encoding + data.
fn entry(s: &[u8]) -> Result<(Elem<'_>, usize), &'static str> {
    const PAST: &str = "listpack entry runs past the end";
    let b = s[0];
    let byte = |i: usize| s.get(i).copied().ok_or(PAST);
    let string = |hdr: usize, len: usize| {
        let data = s.get(hdr..hdr.checked_add(len).ok_or(PAST)?).ok_or(PAST)?;
        Ok((Elem::Str(data), hdr + len))
    };
    if b & 0x80 == 0 {
        return Ok((Elem::Int((b & 0x7f) as i64), 1));
    }
    if b & 0xc0 == 0x80 {
        return string(1, (b & 0x3f) as usize);
    }
    if b & 0xe0 == 0xc0 {
        let u = (((b & 0x1f) as i64) << 8) | byte(1)? as i64;
        let v = if u >= 1 << 12 { u - (1 << 13) } else { u };
        return Ok((Elem::Int(v), 2));
    }
    if b & 0xf0 == 0xe0 {
        return string(2, (((b & 0x0f) as usize) << 8) | byte(1)? as usize);
    }
    let int = |n: usize| -> Result<(Elem<'_>, usize), &'static str> {
        let d = s.get(1..1 + n).ok_or(PAST)?;
        let mut v: u64 = 0;
        for (i, &x) in d.iter().enumerate() {
            v |= (x as u64) << (8 * i);
        }
        // Sign-extend from n bytes.
        let shift = 64 - 8 * n as u32;
        Ok((Elem::Int(((v << shift) as i64) >> shift), 1 + n))
    };
    match b {
        0xf0 => {
            let d = s.get(1..5).ok_or(PAST)?;
            string(5, u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize)
        }
        0xf1 => int(2),
        0xf2 => int(3),
        0xf3 => int(4),
        0xf4 => int(8),
        _ => Err("invalid listpack entry encoding"),
    }
}

/// Test helper (and the encoder's mirror): builds a listpack from elements, choosing the
/// encodings Redis would.
#[cfg(test)]
pub(crate) fn build(elems: &[Elem<'_>]) -> Vec<u8> {
    let mut body = Vec::new();
    for e in elems {
        let start = body.len();
        match *e {
            Elem::Int(v) if (0..128).contains(&v) => body.push(v as u8),
            Elem::Int(v) if (-4096..4096).contains(&v) => {
                let u = (v as u16) & 0x1fff;
                body.push(0xc0 | (u >> 8) as u8);
                body.push(u as u8);
            }
            Elem::Int(v) if i16::try_from(v).is_ok() => {
                body.push(0xf1);
                body.extend_from_slice(&(v as i16).to_le_bytes());
            }
            Elem::Int(v) if (-(1 << 23)..(1 << 23)).contains(&v) => {
                body.push(0xf2);
                body.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            Elem::Int(v) if i32::try_from(v).is_ok() => {
                body.push(0xf3);
                body.extend_from_slice(&(v as i32).to_le_bytes());
            }
            Elem::Int(v) => {
                body.push(0xf4);
                body.extend_from_slice(&v.to_le_bytes());
            }
            Elem::Str(s) if s.len() < 64 => {
                body.push(0x80 | s.len() as u8);
                body.extend_from_slice(s);
            }
            Elem::Str(s) if s.len() < 4096 => {
                body.push(0xe0 | (s.len() >> 8) as u8);
                body.push(s.len() as u8);
                body.extend_from_slice(s);
            }
            Elem::Str(s) => {
                body.push(0xf0);
                body.extend_from_slice(&(s.len() as u32).to_le_bytes());
                body.extend_from_slice(s);
            }
        }
        let mut b = [0u8; 5];
        let n = backlen(body.len() - start, &mut b);
        body.extend_from_slice(&b[..n]);
    }
    let mut lp = Vec::with_capacity(body.len() + 7);
    lp.extend_from_slice(&((body.len() + 7) as u32).to_le_bytes());
    lp.extend_from_slice(&(elems.len().min(COUNT_UNKNOWN as usize) as u16).to_le_bytes());
    lp.extend_from_slice(&body);
    lp.push(EOF);
    lp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Elem<'static>> {
        vec![
            Elem::Int(0),
            Elem::Int(127),
            Elem::Int(-1),
            Elem::Int(4095),
            Elem::Int(-4096),
            Elem::Int(32767),
            Elem::Int(-32768),
            Elem::Int(8_388_607),
            Elem::Int(-8_388_608),
            Elem::Int(i32::MAX as i64),
            Elem::Int(i64::MIN),
            Elem::Int(i64::MAX),
            Elem::Str(b""),
            Elem::Str(b"hello"),
            Elem::Str(&[b'x'; 63]),
            Elem::Str(&[b'y'; 64]),
            Elem::Str(&[b'z'; 4095]),
            Elem::Str(&[b'w'; 4096]),
        ]
    }

    #[test]
    fn every_encoding_round_trips() {
        let elems = sample();
        let lp = build(&elems);
        assert_eq!(parse(&lp).unwrap(), elems);
    }

    #[test]
    fn backlen_widths() {
        for len in [
            1usize,
            127,
            128,
            16383,
            16384,
            2_097_151,
            2_097_152,
            268_435_456,
        ] {
            let mut b = [0u8; 5];
            let n = backlen(len, &mut b);
            // Read it back from its last byte, as Redis walks backwards.
            let mut v = 0u64;
            let mut shift = 0;
            for &x in b[..n].iter().rev() {
                v |= ((x & 127) as u64) << shift;
                shift += 7;
            }
            assert_eq!(v, len as u64);
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        let lp = build(&sample());
        for cut in 0..lp.len() {
            assert!(parse(&lp[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn wrong_count_is_refused_but_unknown_count_is_counted() {
        let mut lp = build(&[Elem::Int(1), Elem::Int(2)]);
        lp[4] = 3;
        assert_eq!(parse(&lp), Err("listpack count does not match its entries"));
        lp[4] = 0xff;
        lp[5] = 0xff;
        assert_eq!(parse(&lp).unwrap().len(), 2);
    }

    #[test]
    fn header_terminator_and_backlen_are_checked() {
        let lp = build(&[Elem::Str(b"abc"), Elem::Int(5)]);
        let mut bad = lp.clone();
        bad[0] += 1;
        assert!(parse(&bad).is_err());
        let mut bad = lp.clone();
        *bad.last_mut().unwrap() = 0;
        assert_eq!(parse(&bad), Err("listpack without its terminator"));
        let mut bad = lp.clone();
        bad[6 + 4] = 7; // the first entry's back-length
        assert_eq!(
            parse(&bad),
            Err("listpack entry back-length does not match")
        );
        let mut bad = lp.clone();
        bad[6] = 0xf5; // no such encoding
        assert_eq!(parse(&bad), Err("invalid listpack entry encoding"));
        // A 32-bit string length far past the blob.
        let mut bad = lp;
        bad[6] = 0xf0;
        assert!(parse(&bad).is_err());
    }
}
