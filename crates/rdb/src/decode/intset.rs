//! Intsets (RDB type 11): `encoding: u32 LE` (2, 4 or 8 bytes per value), `length: u32 LE`,
//! then the values little-endian. Checked as Redis's deep sanitization does: a known
//! encoding, a size that matches the length exactly, not empty, values strictly ascending
//! (sorted and unique).

/// Validates `is` and returns its values in order.
pub(crate) fn parse(is: &[u8]) -> Result<Vec<i64>, &'static str> {
    if is.len() < 8 {
        return Err("intset shorter than its header");
    }
    let width = u32::from_le_bytes([is[0], is[1], is[2], is[3]]) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err("intset with an invalid encoding");
    }
    let count = u32::from_le_bytes([is[4], is[5], is[6], is[7]]) as u64;
    if 8 + count * width as u64 != is.len() as u64 {
        return Err("intset size does not match its length");
    }
    if count == 0 {
        return Err("empty intset");
    }
    let mut out = Vec::with_capacity(count as usize);
    for c in is[8..].chunks_exact(width) {
        let v = match width {
            2 => i16::from_le_bytes([c[0], c[1]]) as i64,
            4 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64,
            _ => i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        };
        if out.last().is_some_and(|&p| p >= v) {
            return Err("intset values not sorted or not unique");
        }
        out.push(v);
    }
    Ok(out)
}

/// Test helper: an intset of `values` with `width` bytes each.
#[cfg(test)]
pub(crate) fn build(width: u32, values: &[i64]) -> Vec<u8> {
    let mut b = width.to_le_bytes().to_vec();
    b.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        b.extend_from_slice(&v.to_le_bytes()[..width as usize]);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_width() {
        assert_eq!(parse(&build(2, &[-3, 0, 7])).unwrap(), vec![-3, 0, 7]);
        assert_eq!(
            parse(&build(4, &[i32::MIN as i64, 1])).unwrap(),
            vec![i32::MIN as i64, 1]
        );
        assert_eq!(
            parse(&build(8, &[i64::MIN, i64::MAX])).unwrap(),
            vec![i64::MIN, i64::MAX]
        );
    }

    #[test]
    fn unsorted_duplicate_empty_and_bad_sizes_are_refused() {
        assert_eq!(
            parse(&build(2, &[5, 3])),
            Err("intset values not sorted or not unique")
        );
        assert_eq!(
            parse(&build(2, &[3, 3])),
            Err("intset values not sorted or not unique")
        );
        assert_eq!(parse(&build(2, &[])), Err("empty intset"));
        assert_eq!(
            parse(&build(3, &[1])),
            Err("intset with an invalid encoding")
        );
        let mut b = build(4, &[1, 2]);
        b[4] = 0xff; // a length the blob cannot hold
        assert_eq!(parse(&b), Err("intset size does not match its length"));
        let b = build(8, &[1, 2, 3]);
        for cut in 0..b.len() {
            assert!(parse(&b[..cut]).is_err());
        }
    }
}
