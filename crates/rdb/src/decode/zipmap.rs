//! Zipmaps (RDB type 9, hashes from Redis before 2.6): `zmlen: u8` (the count, or 254 for
//! "count it"), then field/value pairs and `0xFF`. A length is one byte below 254, or `0xFE`
//! and a u32 LE; a value's length is followed by a "free" byte: that many unused bytes after
//! the value. Checked as Redis does: everything inside the blob, not empty, the count (unless
//! 254), nothing after the terminator.

const BIGLEN: u8 = 254;
const END: u8 = 0xFF;

/// Validates `zm` and returns its field/value pairs in order.
#[allow(clippy::type_complexity)]
pub(crate) fn parse(zm: &[u8]) -> Result<Vec<(&[u8], &[u8])>, &'static str> {
    const PAST: &str = "zipmap entry runs past the end";
    if zm.len() < 2 {
        return Err("zipmap shorter than its header");
    }
    let mut p = 1usize;
    let len_at = |p: usize| -> Result<(usize, usize), &'static str> {
        match *zm.get(p).ok_or(PAST)? {
            b if b < BIGLEN => Ok((b as usize, 1)),
            BIGLEN => {
                let d = zm.get(p + 1..p + 5).ok_or(PAST)?;
                Ok((u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize, 5))
            }
            _ => Err("zipmap length where the end marker is not allowed"),
        }
    };
    let mut out = Vec::new();
    while *zm.get(p).ok_or(PAST)? != END {
        let (flen, n) = len_at(p)?;
        p += n;
        let field = zm.get(p..p.checked_add(flen).ok_or(PAST)?).ok_or(PAST)?;
        p += flen;
        let (vlen, n) = len_at(p)?;
        p += n;
        let free = *zm.get(p).ok_or(PAST)? as usize;
        p += 1;
        let value = zm.get(p..p.checked_add(vlen).ok_or(PAST)?).ok_or(PAST)?;
        p = p
            .checked_add(vlen + free)
            .filter(|&q| q < zm.len())
            .ok_or(PAST)?;
        out.push((field, value));
    }
    if out.is_empty() {
        return Err("empty zipmap");
    }
    if zm[0] != BIGLEN && zm[0] as usize != out.len() {
        return Err("zipmap count does not match its entries");
    }
    if p != zm.len() - 1 {
        return Err("zipmap has bytes after its end");
    }
    Ok(out)
}

/// Test helper: a zipmap of `pairs`, each value followed by `free` unused bytes.
#[cfg(test)]
pub(crate) fn build(pairs: &[(&[u8], &[u8])], free: u8) -> Vec<u8> {
    let mut b = vec![pairs.len().min(BIGLEN as usize) as u8];
    let len = |b: &mut Vec<u8>, n: usize| {
        if n < BIGLEN as usize {
            b.push(n as u8);
        } else {
            b.push(BIGLEN);
            b.extend_from_slice(&(n as u32).to_le_bytes());
        }
    };
    for (f, v) in pairs {
        len(&mut b, f.len());
        b.extend_from_slice(f);
        len(&mut b, v.len());
        b.push(free);
        b.extend_from_slice(v);
        b.extend(std::iter::repeat_n(0u8, free as usize));
    }
    b.push(END);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_with_free_bytes_and_long_values() {
        let long = vec![b'v'; 300];
        let pairs: Vec<(&[u8], &[u8])> = vec![(b"a", b"1"), (b"bb", &long), (b"", b"")];
        assert_eq!(parse(&build(&pairs, 2)).unwrap(), pairs);
        let zm = build(&pairs, 0);
        for cut in 0..zm.len() {
            assert!(parse(&zm[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn wrong_count_empty_and_trailing_bytes_are_refused() {
        let mut zm = build(&[(b"a", b"1")], 0);
        zm[0] = 2;
        assert_eq!(parse(&zm), Err("zipmap count does not match its entries"));
        assert_eq!(parse(&[0, END]), Err("empty zipmap"));
        let mut zm = build(&[(b"a", b"1")], 0);
        zm.push(0);
        assert_eq!(parse(&zm), Err("zipmap has bytes after its end"));
    }
}
