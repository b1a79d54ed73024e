//! LZF, the small LZ77 compressor Redis uses for quicklist nodes (`list-compress-depth`) and
//! for strings in RDB files, in its exact stream format, so that what one side writes the
//! other reads.
//!
//! The format is a run of items, each introduced by a control byte `c`:
//! - `c < 32`: a literal run: the next `c + 1` bytes are copied to the output.
//! - otherwise a back-reference: `len = c >> 5` (when 7, one more byte is added to it), then one
//!   byte `lo`; the item copies `len + 2` bytes starting `((c & 31) << 8) + lo + 1` bytes back in
//!   the output (the copy may overlap what it writes: a run of one repeated byte).
//!
//! So a match is 3..=264 bytes long and at most 8192 bytes back. The compressor is a greedy
//! single-pass matcher over a small hash table of 3-byte prefixes; its output is not byte for
//! byte liblzf's (the format does not need that), only decodable by any LZF decoder.
//!
//! The decompressor treats its input as hostile (RDB files, DUMP payloads): every read and
//! every back-reference is checked, the output never grows past the length the caller
//! expects, and a bad stream is an error, never a panic.

/// Longest literal run one control byte covers.
const MAX_LIT: usize = 32;
/// Farthest a back-reference reaches.
const MAX_OFF: usize = 1 << 13;
/// Longest match: 7 + 255 in the length fields, plus the implied 2.
const MAX_REF: usize = 7 + 255 + 2;
/// Back-references this long or shorter are copied as one fixed-size block when they can.
const SHORT_REF: usize = 16;
/// Most bytes one input byte can stand for (a 3-byte reference to 264 bytes, rounded up).
const MAX_EXPANSION: usize = 88;

/// Why a stream did not decompress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The stream ends inside an item, or a reference points before the start of the output.
    Corrupt,
    /// The stream decodes to more, or fewer, bytes than expected.
    Length,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Error::Corrupt => "corrupt LZF stream",
            Error::Length => "LZF stream of the wrong length",
        })
    }
}

impl std::error::Error for Error {}

fn hash3(v: u32, bits: u32) -> usize {
    (v.wrapping_mul(2_654_435_761) >> (32 - bits)) as usize
}

/// The three bytes at `at` as one number (a match's prefix, and its hash's input).
#[inline(always)]
fn prefix3(input: &[u8], at: usize) -> u32 {
    let b = &input[at..at + 3];
    (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32
}

/// Appends literal runs for `lit`; false when the output would pass `limit`.
fn literals(out: &mut Vec<u8>, lit: &[u8], limit: usize) -> bool {
    let need = lit.len() + lit.len().div_ceil(MAX_LIT);
    if out.len() + need > limit {
        return false;
    }
    for run in lit.chunks(MAX_LIT) {
        out.push((run.len() - 1) as u8);
        out.extend_from_slice(run);
    }
    true
}

/// How many bytes at `c` equal those at `i` (`c < i`), at most `max` (`i + max <=
/// input.len()`).
#[inline(always)]
fn match_len(input: &[u8], c: usize, i: usize, max: usize) -> usize {
    let word = |at: usize| u64::from_le_bytes(input[at..at + 8].try_into().expect("8 bytes"));
    let mut len = 0;
    while len + 8 <= max {
        let x = word(c + len) ^ word(i + len);
        if x != 0 {
            // Little-endian: the first differing byte holds the lowest set bit.
            return len + (x.trailing_zeros() / 8) as usize;
        }
        len += 8;
    }
    while len < max && input[c + len] == input[i + len] {
        len += 1;
    }
    len
}

/// Most entries the match table has (13 bits of hash).
const TABLE_BITS: u32 = 13;

/// The match table, kept by each thread from one call to the next: clearing (or allocating)
/// it for every string cost more than compressing a 1 KB value. Instead each call owns the
/// numbers above `base`: an entry holds `base + position + 1`, and an entry at or below
/// `base` was written by an earlier call and counts as empty, as a cleared one would.
struct Table {
    slots: Vec<usize>,
    base: usize,
}

thread_local! {
    static TABLE: std::cell::RefCell<Table> = const {
        std::cell::RefCell::new(Table { slots: Vec::new(), base: 0 })
    };
}

/// Compresses `input`. None when the result would be longer than `limit` bytes (the caller's
/// "not worth it": Redis keeps a node or a string uncompressed then), so the work stops early.
pub fn compress(input: &[u8], limit: usize) -> Option<Vec<u8>> {
    // Incompressible input costs one control byte per 32 bytes.
    let mut out = Vec::with_capacity(limit.min(input.len() + input.len() / MAX_LIT + 1));
    compress_into(input, limit, &mut out).then_some(out)
}

/// [`compress`], appending to `out`; false (and `out` as it was) when the result would be
/// longer than `limit` bytes.
pub fn compress_into(input: &[u8], limit: usize, out: &mut Vec<u8>) -> bool {
    let at = out.len();
    let ok = TABLE.with(|t| match t.try_borrow_mut() {
        Ok(mut t) => {
            let t = &mut *t;
            if t.slots.is_empty() {
                t.slots = vec![0; 1 << TABLE_BITS];
            }
            if t.base.checked_add(input.len() + 1).is_none() {
                t.slots.fill(0);
                t.base = 0;
            }
            let base = t.base;
            t.base += input.len() + 1;
            compress_with(input, limit, out, at, &mut t.slots, base)
        }
        // Not reachable (nothing here calls back in), but a table of its own is correct.
        Err(_) => compress_with(input, limit, out, at, &mut vec![0; 1 << TABLE_BITS], 0),
    });
    if !ok {
        out.truncate(at);
    }
    ok
}

/// The greedy matcher: appends to `out` (whose first `at` bytes are the caller's), `table`
/// holding positions as `base + position + 1` (at or below `base`: empty).
fn compress_with(
    input: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
    at: usize,
    table: &mut [usize],
    base: usize,
) -> bool {
    let n = input.len();
    // A table sized to the input: a small input (a 48-byte node) hashes into few slots, so
    // its matches are those of a table of that size.
    let bits = (usize::BITS - n.max(256).leading_zeros()).min(TABLE_BITS);
    let table = &mut table[..1 << bits];
    let limit = limit.saturating_add(at);
    let (mut i, mut lit) = (0, 0);
    while i + 3 <= n {
        let h = hash3(prefix3(input, i), bits);
        let cand = table[h];
        table[h] = base + i + 1;
        if cand > base {
            let c = cand - base - 1;
            let dist = i - c;
            // Checking the prefix and measuring the match in one go (8 bytes a step) leaves
            // one unpredictable branch per candidate, `len >= 3`, where comparing three bytes
            // and then extending byte by byte had two or three: on text that barely
            // compresses (a 1 KB value of hex digits) the mispredictions were most of the
            // compressor's time.
            let len = if dist <= MAX_OFF {
                match_len(input, c, i, MAX_REF.min(n - i))
            } else {
                0
            };
            if len >= 3 {
                let (l, off) = (len - 2, dist - 1);
                let item = if l < 7 { 2 } else { 3 };
                if !literals(out, &input[lit..i], limit) || out.len() + item > limit {
                    return false;
                }
                if l < 7 {
                    out.push((l << 5 | off >> 8) as u8);
                } else {
                    out.push((7 << 5 | off >> 8) as u8);
                    out.push((l - 7) as u8);
                }
                out.push(off as u8);
                // Positions inside the match become candidates too (better ratio on runs).
                for j in i + 1..(i + len).min(n - 2) {
                    table[hash3(prefix3(input, j), bits)] = base + j + 1;
                }
                i += len;
                lit = i;
                continue;
            }
        }
        i += 1;
    }
    literals(out, &input[lit..], limit)
}

/// Decompresses `input`, which must decode to exactly `len` bytes, into `out` (cleared first).
/// Allocates at most what `input` can decode to, whatever `len` claims.
///
/// The output is sized once and written by index: pushing item by item checked the
/// capacity per item and copied a run of a few bytes through a `memcpy` call, and a 1 KB
/// value of barely compressible text is a hundred such items (a tenth of a replica's load).
pub fn decompress_into(input: &[u8], len: usize, out: &mut Vec<u8>) -> Result<(), Error> {
    // No valid stream decodes to more than this, so it bounds the buffer and every check.
    let cap = len.min(input.len().saturating_mul(MAX_EXPANSION));
    out.clear();
    out.resize(cap, 0);
    let res = decompress_items(input, &mut out[..]);
    let op = match res {
        Ok(op) | Err((_, op)) => op,
    };
    out.truncate(op);
    match res {
        Ok(op) if op == len => Ok(()),
        Ok(_) => Err(Error::Length),
        Err((e, _)) => Err(e),
    }
}

/// Decodes `input` into `out` (`out.len()` the most it may hold: the expected length, or
/// less where no stream of this size could reach that): the bytes written, or the error and
/// the bytes written before it.
fn decompress_items(input: &[u8], out: &mut [u8]) -> Result<usize, (Error, usize)> {
    let cap = out.len();
    let (mut ip, mut op) = (0, 0);
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < MAX_LIT {
            let run = ctrl + 1;
            if ip + run > input.len() {
                return Err((Error::Corrupt, op));
            }
            if op + run > cap {
                return Err((Error::Length, op));
            }
            if ip + MAX_LIT <= input.len() && op + MAX_LIT <= cap {
                // A fixed-size copy is two vector moves where one of `run` bytes is a call to
                // memcpy, for runs of a few bytes. The bytes past the run are either written
                // again by the items that follow or cut off (an output that ends before
                // `len` is an error).
                out[op..op + MAX_LIT].copy_from_slice(&input[ip..ip + MAX_LIT]);
            } else {
                out[op..op + run].copy_from_slice(&input[ip..ip + run]);
            }
            op += run;
            ip += run;
        } else {
            let mut l = ctrl >> 5;
            if l == 7 {
                l += *input.get(ip).ok_or((Error::Corrupt, op))? as usize;
                ip += 1;
            }
            let lo = *input.get(ip).ok_or((Error::Corrupt, op))? as usize;
            ip += 1;
            let l = l + 2;
            let dist = ((ctrl & 0x1f) << 8) + lo + 1;
            if dist > op {
                return Err((Error::Corrupt, op));
            }
            if op + l > cap {
                return Err((Error::Length, op));
            }
            let from = op - dist;
            if dist >= SHORT_REF && l <= SHORT_REF && op + SHORT_REF <= cap {
                // As for literals: a fixed size, what it writes past `l` rewritten or cut
                // off. `dist` at least the size, so it reads only bytes already written.
                let chunk: [u8; SHORT_REF] = out[from..from + SHORT_REF].try_into().expect("16");
                out[op..op + SHORT_REF].copy_from_slice(&chunk);
            } else if dist >= l {
                out.copy_within(from..from + l, op);
            } else {
                // Overlapping: each byte may be one this item just wrote.
                for k in 0..l {
                    out[op + k] = out[from + k];
                }
            }
            op += l;
        }
    }
    Ok(op)
}

/// [`decompress_into`] into a new buffer.
pub fn decompress(input: &[u8], len: usize) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    decompress_into(input, len, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The compressor as it was before its table became per-thread: the reference the
    /// output must equal byte for byte (RDB files and DUMP payloads stay what they were).
    fn reference_compress(input: &[u8], limit: usize) -> Option<Vec<u8>> {
        fn hash3(b: &[u8], bits: u32) -> usize {
            let v = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
            (v.wrapping_mul(2_654_435_761) >> (32 - bits)) as usize
        }
        let n = input.len();
        let mut out = Vec::new();
        let bits = (usize::BITS - n.max(256).leading_zeros()).min(13);
        let mut table = vec![0usize; 1 << bits];
        let (mut i, mut lit) = (0, 0);
        while i + 3 <= n {
            let h = hash3(&input[i..], bits);
            let cand = table[h];
            table[h] = i + 1;
            if cand > 0 {
                let c = cand - 1;
                let dist = i - c;
                if dist <= MAX_OFF && input[c..c + 3] == input[i..i + 3] {
                    let max = MAX_REF.min(n - i);
                    let mut len = 3;
                    while len < max && input[c + len] == input[i + len] {
                        len += 1;
                    }
                    let (l, off) = (len - 2, dist - 1);
                    let item = if l < 7 { 2 } else { 3 };
                    if !literals(&mut out, &input[lit..i], limit) || out.len() + item > limit {
                        return None;
                    }
                    if l < 7 {
                        out.push((l << 5 | off >> 8) as u8);
                    } else {
                        out.push((7 << 5 | off >> 8) as u8);
                        out.push((l - 7) as u8);
                    }
                    out.push(off as u8);
                    for j in i + 1..(i + len).min(n - 2) {
                        table[hash3(&input[j..], bits)] = j + 1;
                    }
                    i += len;
                    lit = i;
                    continue;
                }
            }
            i += 1;
        }
        literals(&mut out, &input[lit..], limit).then_some(out)
    }

    fn round_trip(data: &[u8]) -> Vec<u8> {
        let z = compress(data, usize::MAX).expect("no limit");
        assert_eq!(decompress(&z, data.len()).unwrap(), data);
        z
    }

    #[test]
    fn format_items_decode_as_specified() {
        // A literal run of 3, then a reference 3 back of length 2+2=4 (overlapping the run
        // it copies), then a long reference: c=0xE0 (len 7 + 1 = 8, +2 = 10, offset 0 -> 1).
        let z = [2, b'a', b'b', b'c', (2 << 5), 2, 0xE0, 1, 0];
        let out = decompress(&z, 3 + 4 + 10).unwrap();
        assert_eq!(&out, b"abcabcaaaaaaaaaaa");
        // Farthest reference: offset 8191 -> 8192 back.
        let mut z = Vec::new();
        for _ in 0..256 {
            z.push(31);
            z.extend(std::iter::repeat_n(b'x', 32));
        }
        z.extend([(1 << 5) | 0x1f, 0xff]);
        assert_eq!(decompress(&z, 8192 + 3).unwrap().len(), 8195);
    }

    #[test]
    fn the_table_numbers_start_over_when_they_would_overflow() {
        let data: Vec<u8> = (0..3000u32)
            .map(|i| b"abcabd-xyz"[(i % 10) as usize])
            .collect();
        let expected = reference_compress(&data, usize::MAX);
        compress(&data, usize::MAX);
        TABLE.with(|t| t.borrow_mut().base = usize::MAX - 10);
        assert_eq!(compress(&data, usize::MAX), expected);
        assert!(TABLE.with(|t| t.borrow().base) <= data.len() + 1);
        assert_eq!(compress(&data, usize::MAX), expected);
    }

    #[test]
    fn hostile_streams_are_errors() {
        assert_eq!(decompress(&[], 0), Ok(vec![]));
        assert_eq!(decompress(&[], 1), Err(Error::Length));
        // Truncated literal, truncated reference, reference before the start.
        assert_eq!(decompress(&[5, b'a'], 6), Err(Error::Corrupt));
        assert_eq!(decompress(&[0, b'a', 0xE0], 20), Err(Error::Corrupt));
        assert_eq!(decompress(&[0, b'a', 0x20], 20), Err(Error::Corrupt));
        assert_eq!(decompress(&[0, b'a', 0x20, 1], 20), Err(Error::Corrupt));
        // More than announced, less than announced.
        assert_eq!(decompress(&[1, b'a', b'b'], 1), Err(Error::Length));
        assert_eq!(
            decompress(&[0, b'a', 0xE0, 255, 0], 100),
            Err(Error::Length)
        );
        assert_eq!(decompress(&[1, b'a', b'b'], 3), Err(Error::Length));
        // A huge claimed length does not make a huge allocation.
        let mut out = Vec::new();
        assert_eq!(
            decompress_into(&[0, b'a'], usize::MAX, &mut out),
            Err(Error::Length)
        );
        assert!(out.capacity() < 1024);
    }

    #[test]
    fn repetitive_data_shrinks_and_random_data_respects_the_limit() {
        let data: Vec<u8> = (0..10_000).map(|i| b"element-"[i % 8]).collect();
        let z = round_trip(&data);
        assert!(z.len() < data.len() / 20, "{}", z.len());
        let run = vec![0u8; 100_000];
        assert!(round_trip(&run).len() < 100_000 / 80);
        // Incompressible: at most one control byte per 32, and a limit below that fails.
        let mut x = 0x9E37_79B9u32;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        let z = round_trip(&noise);
        assert!(z.len() <= 4096 + 4096 / 32);
        assert_eq!(compress(&noise, 4000), None);
        assert_eq!(compress(b"", 0), Some(vec![]));
        round_trip(b"a");
        round_trip(b"ab");
        round_trip(b"aaa");
        round_trip(b"aaaa");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        #[test]
        fn round_trips(
            data in prop_oneof![
                prop::collection::vec(any::<u8>(), 0..2000),
                prop::collection::vec(0u8..3, 0..20_000),
                (prop::collection::vec(any::<u8>(), 1..40), 1usize..600)
                    .prop_map(|(p, n)| p.repeat(n)),
            ],
            limit in prop_oneof![Just(usize::MAX), 0usize..3000],
        ) {
            // The per-thread table, left over from other inputs, changes nothing: the same
            // bytes as a fresh table's, appended after what `out` held.
            let expected = reference_compress(&data, limit);
            prop_assert_eq!(&compress(&data, limit), &expected);
            let mut out = b"prefix".to_vec();
            prop_assert_eq!(compress_into(&data, limit, &mut out), expected.is_some());
            prop_assert_eq!(&out[..6], b"prefix");
            prop_assert_eq!(&out[6..], expected.as_deref().unwrap_or(b""));
            match compress(&data, limit) {
                Some(z) => {
                    prop_assert!(z.len() <= limit);
                    prop_assert_eq!(&decompress(&z, data.len()).unwrap(), &data);
                    // The fixed-size copies write past an item's end: a stream one byte short
                    // of, or past, the length expected is still an error.
                    prop_assert_eq!(decompress(&z, data.len() + 1), Err(Error::Length));
                    if !data.is_empty() {
                        prop_assert!(decompress(&z, data.len() - 1).is_err());
                    }
                }
                None => {
                    let z = compress(&data, usize::MAX).unwrap();
                    prop_assert!(z.len() > limit);
                }
            }
        }

        #[test]
        fn garbage_never_panics(
            z in prop::collection::vec(any::<u8>(), 0..300),
            len in prop_oneof![0usize..5000, Just(usize::MAX)],
        ) {
            let mut out = Vec::new();
            if decompress_into(&z, len, &mut out).is_ok() {
                prop_assert_eq!(out.len(), len);
            }
            prop_assert!(out.len() <= len.min(z.len() * MAX_EXPANSION));
        }
    }
}
