//! The compact encoding ("listpack" for OBJECT ENCODING): one exact-size byte buffer.
//!
//! ```text
//! varint count
//! per element, in (score, member) order:
//!   varint shared   bytes this member shares with the previous one's start (front coding)
//!   varint suffix   length of the rest, then the rest's bytes
//!   score code      one byte t: t < 0xF0 is the integer t - 16 (-16..=223);
//!                   t = 0xF0 + k: the top k bytes (big-endian) of the f64's bits follow,
//!                   the other bytes are zero (12.25 takes 3, 1000 takes 2)
//! ```
//!
//! Members of one set tend to share a prefix (`user:17`, `user:42`), and sorted neighbours
//! share more: front coding turns `member:0 .. member:9` into 9-byte and then 3-byte records.
//! Nothing points into the buffer, so it needs no back-lengths: reverse walks decode forward
//! into a [`Flat`] first (the set is small by construction).

/// Reads a LEB128 varint at `*p`.
#[inline]
pub(super) fn get_varint(b: &[u8], p: &mut usize) -> usize {
    let mut v = 0usize;
    let mut shift = 0;
    loop {
        let byte = b[*p];
        *p += 1;
        v |= ((byte & 0x7f) as usize) << shift;
        if byte & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

#[inline]
fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

const SMALL_BIAS: i64 = 16;
const FLOAT_TAG: u8 = 0xF0;

fn put_score(out: &mut Vec<u8>, s: f64) {
    // -0.0 is stored as 0: Redis's listpack keeps scores as text and "-0" comes back as
    // the integer 0 (a skiplist keeps the sign).
    if s.fract() == 0.0 && (-SMALL_BIAS as f64..=223.0).contains(&s) {
        out.push((s as i64 + SMALL_BIAS) as u8);
        return;
    }
    let bytes = s.to_bits().to_be_bytes();
    let k = 8 - bytes.iter().rev().take_while(|&&b| b == 0).count();
    out.push(FLOAT_TAG + k as u8);
    out.extend_from_slice(&bytes[..k]);
}

#[inline]
fn get_score(b: &[u8], p: &mut usize) -> f64 {
    let t = b[*p];
    *p += 1;
    if t < FLOAT_TAG {
        return (t as i64 - SMALL_BIAS) as f64;
    }
    let k = (t - FLOAT_TAG) as usize;
    let mut bytes = [0u8; 8];
    bytes[..k].copy_from_slice(&b[*p..*p + k]);
    *p += k;
    f64::from_bits(u64::from_be_bytes(bytes))
}

/// Number of elements of an encoded buffer.
pub(super) fn count(b: &[u8]) -> usize {
    if b.is_empty() {
        return 0;
    }
    let mut p = 0;
    get_varint(b, &mut p)
}

/// Visits the elements in order; `f` returns false to stop. The member slice is only valid
/// for the call (it is rebuilt in `scratch`).
pub(super) fn for_each(b: &[u8], mut f: impl FnMut(&[u8], f64) -> bool) {
    if b.is_empty() {
        return;
    }
    let mut p = 0;
    let n = get_varint(b, &mut p);
    let mut cur: Vec<u8> = Vec::new();
    for _ in 0..n {
        let shared = get_varint(b, &mut p);
        let suffix = get_varint(b, &mut p);
        cur.truncate(shared);
        cur.extend_from_slice(&b[p..p + suffix]);
        p += suffix;
        let s = get_score(b, &mut p);
        if !f(&cur, s) {
            return;
        }
    }
}

/// The score of `member`, comparing as it decodes (no member is rebuilt).
pub(super) fn score_of(b: &[u8], member: &[u8]) -> Option<f64> {
    if b.is_empty() {
        return None;
    }
    let mut p = 0;
    let n = get_varint(b, &mut p);
    // `m`: how many leading bytes the current member shares with `member`; `len`: its length.
    let mut m = 0usize;
    let mut len = 0usize;
    for _ in 0..n {
        let shared = get_varint(b, &mut p);
        let suffix = get_varint(b, &mut p);
        let sfx = &b[p..p + suffix];
        p += suffix;
        if shared <= m {
            // The current member is member[..shared] + sfx.
            m = shared
                + sfx
                    .iter()
                    .zip(member.get(shared..).unwrap_or(&[]))
                    .take_while(|(a, b)| a == b)
                    .count();
        }
        // shared > m: the current member repeats the previous one's byte at m, which differs
        // from member's (or member ends there): m stays.
        len = shared + suffix;
        let s = get_score(b, &mut p);
        if m == member.len() && len == member.len() {
            return Some(s);
        }
    }
    let _ = len;
    None
}

fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn score_len(s: f64) -> usize {
    let mut v = Vec::with_capacity(9);
    put_score(&mut v, s);
    v.len()
}

/// Builds a buffer from elements in (score, member) order, allocated at its exact size (a
/// first pass measures it: no reallocation, no slack).
pub(super) fn encode<'a, I>(n: usize, items: I) -> Box<[u8]>
where
    I: Iterator<Item = (&'a [u8], f64)> + Clone,
{
    if n == 0 {
        return Box::new([]);
    }
    let mut size = varint_len(n);
    let mut prev: &[u8] = &[];
    for (m, s) in items.clone() {
        let shared = prev.iter().zip(m).take_while(|(a, b)| a == b).count();
        size += varint_len(shared) + varint_len(m.len() - shared) + (m.len() - shared);
        size += score_len(s);
        prev = m;
    }
    let mut out = Vec::with_capacity(size);
    put_varint(&mut out, n);
    let mut prev: &[u8] = &[];
    for (m, s) in items {
        let shared = prev.iter().zip(m).take_while(|(a, b)| a == b).count();
        put_varint(&mut out, shared);
        put_varint(&mut out, m.len() - shared);
        out.extend_from_slice(&m[shared..]);
        put_score(&mut out, s);
        prev = m;
    }
    debug_assert_eq!(out.len(), size);
    out.into_boxed_slice()
}

/// A decoded small set: members back to back in one buffer, (score, start, end) per element.
#[derive(Default)]
pub(super) struct Flat {
    pub buf: Vec<u8>,
    pub items: Vec<(f64, u32, u32)>,
}

impl Flat {
    pub fn decode(b: &[u8]) -> Flat {
        let n = count(b);
        let mut f = Flat {
            buf: Vec::with_capacity(b.len() * 2),
            items: Vec::with_capacity(n),
        };
        for_each(b, |m, s| {
            let start = f.buf.len() as u32;
            f.buf.extend_from_slice(m);
            f.items.push((s, start, f.buf.len() as u32));
            true
        });
        f
    }

    #[inline]
    pub fn get(&self, i: usize) -> (&[u8], f64) {
        let (s, a, b) = self.items[i];
        (&self.buf[a as usize..b as usize], s)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    #[cfg(test)]
    pub fn encode(&self) -> Box<[u8]> {
        encode(self.len(), (0..self.len()).map(|i| self.get(i)))
    }

    /// The elements in order without the ones of indices `skip`, encoded.
    pub fn encode_without(&self, skip: std::ops::Range<usize>) -> Box<[u8]> {
        let n = self.len() - skip.len();
        encode(
            n,
            (0..self.len())
                .filter(move |i| !skip.contains(i))
                .map(|i| self.get(i)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_roundtrip() {
        for s in [
            0.0,
            1.0,
            -16.0,
            -17.0,
            223.0,
            224.0,
            12.25,
            1e300,
            -1e-300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.1,
            5e-324,
            1700000000.0,
        ] {
            let mut v = Vec::new();
            put_score(&mut v, s);
            let mut p = 0;
            let back = get_score(&v, &mut p);
            assert_eq!(back.to_bits(), s.to_bits(), "{s}");
            assert_eq!(p, v.len());
        }
        let mut v = Vec::new();
        put_score(&mut v, -0.0);
        let mut p = 0;
        assert_eq!(get_score(&v, &mut p).to_bits(), 0.0f64.to_bits());
        let mut v = Vec::new();
        put_score(&mut v, 5.0);
        assert_eq!(v.len(), 1);
    }

    #[test]
    fn front_coding_and_lookup() {
        let items: Vec<(&[u8], f64)> = vec![
            (b"member:0", 0.0),
            (b"member:1", 1.0),
            (b"member:10", 1.0),
            (b"mem", 2.0),
            (b"", 3.0),
            (b"zz", 3.0),
        ];
        let b = encode(items.len(), items.iter().copied());
        assert_eq!(count(&b), 6);
        for (m, s) in &items {
            assert_eq!(score_of(&b, m), Some(*s), "{:?}", m);
        }
        for m in [
            &b"member:"[..],
            b"member:2",
            b"me",
            b"member:100",
            b"z",
            b"zzz",
        ] {
            assert_eq!(score_of(&b, m), None, "{:?}", m);
        }
        let f = Flat::decode(&b);
        assert_eq!(f.len(), 6);
        assert_eq!(f.get(2), (&b"member:10"[..], 1.0));
        assert_eq!(&f.encode()[..], &b[..]);
    }
}
