//! HyperLogLog, in Redis's exact string format.
//!
//! A HyperLogLog is a plain string value (TYPE says "string"; GET returns its bytes), so it
//! travels between Redis and Darner as bytes: a client may GET one from Redis and SET it here.
//! That only works if the bytes mean the same thing, so this module follows Redis's format and
//! algorithms to the bit (they are facts about a data format, published in Redis's
//! documentation and in the papers it cites):
//!
//! ```text
//! header (16 bytes)  "HYLL", encoding (0 dense, 1 sparse), 3 unused bytes, 8 bytes of cached
//!                    cardinality, little endian; the top bit of the last byte set = stale
//! dense              16,384 registers of 6 bits, packed LSB first (12,288 bytes)
//! sparse             run-length opcodes over the registers:
//!                    00xxxxxx           ZERO:  1..64 registers at 0
//!                    01xxxxxx yyyyyyyy  XZERO: 1..16,384 registers at 0
//!                    1vvvvvxx           VAL:   1..4 registers at value 1..32
//! ```
//!
//! An element is hashed with MurmurHash64A (seed 0xadc83b19); the low 14 bits pick the
//! register, and the register keeps the longest run of trailing zero bits (plus one) seen in
//! the remaining 50. A new HyperLogLog is sparse (18 bytes); it becomes dense when a register
//! needs a value above 32 or the sparse form would outgrow `hll-sparse-max-bytes`. The
//! cardinality estimate is Ertl's improved estimator ("New cardinality estimation algorithms
//! for HyperLogLog sketches", 2017), the one Redis uses since 5.0; the same registers give the
//! same estimate here and there. Sparse updates split one opcode into at most five bytes and
//! then merge equal neighbouring VAL opcodes exactly as Redis does, so the same sequence of
//! PFADDs yields the same bytes.

/// Register index bits.
const P: u32 = 14;
/// Number of registers.
pub const REGISTERS: usize = 1 << P;
/// Bits of the hash left for the run of zeros.
const Q: u32 = 64 - P;
const BITS: usize = 6;
const REGISTER_MAX: u8 = (1 << BITS) - 1;
pub const HDR_SIZE: usize = 16;
pub const DENSE_SIZE: usize = HDR_SIZE + (REGISTERS * BITS).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;

const XZERO_BIT: u8 = 0x40;
const VAL_BIT: u8 = 0x80;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
// A new HyperLogLog's single XZERO opcode covers every register.
const _: () = assert!(REGISTERS <= XZERO_MAX_LEN);

/// The error Redis answers for a HyperLogLog whose sparse data does not add up.
pub const ERR_CORRUPT: &[u8] = b"INVALIDOBJ Corrupted HLL object detected";
/// The error for a string that is not a HyperLogLog at all.
pub const ERR_NOT_HLL: &[u8] = b"WRONGTYPE Key is not a valid HyperLogLog string value.";

/// The data was not a well-formed HyperLogLog.
#[derive(Debug, PartialEq, Eq)]
pub struct Corrupt;

/// MurmurHash64A (Austin Appleby), as Redis computes it on little-endian machines.
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element goes to and the value it offers that register.
pub fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The top bit guarantees a 1 within Q bits, so the count is at most Q + 1.
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// A new, empty HyperLogLog: sparse, one XZERO opcode over every register, cache valid at 0.
pub fn new_sparse() -> Vec<u8> {
    let mut v = Vec::with_capacity(HDR_SIZE + 2);
    v.extend_from_slice(b"HYLL");
    v.push(SPARSE);
    v.extend_from_slice(&[0; 11]);
    push_xzero(&mut v, REGISTERS);
    v
}

/// Whether `v` passes Redis's checks for a HyperLogLog string (magic, encoding, dense size).
/// Sparse data is only checked when it is used.
pub fn is_valid(v: &[u8]) -> bool {
    v.len() >= HDR_SIZE
        && &v[..4] == b"HYLL"
        && v[4] <= SPARSE
        && (v[4] != DENSE || v.len() == DENSE_SIZE)
}

fn is_dense(v: &[u8]) -> bool {
    v[4] == DENSE
}

/// The cached cardinality, when it is valid.
pub fn cached(v: &[u8]) -> Option<u64> {
    let card = u64::from_le_bytes(v[8..16].try_into().expect("8 bytes"));
    (v[15] & 0x80 == 0).then_some(card)
}

pub fn set_cache(v: &mut [u8], card: u64) {
    v[8..16].copy_from_slice(&card.to_le_bytes());
}

pub fn invalidate_cache(v: &mut [u8]) {
    v[15] |= 0x80;
}

// ---- dense registers ----

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let bit = i * BITS;
    let (byte, fb) = (bit / 8, bit % 8);
    let b0 = regs[byte] as u16;
    // The last register's second byte lies past the array: Redis reads the string's
    // terminating zero there and masks its bits away; zero is what it contributes here too.
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u16;
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX as u16) as u8
}

fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let bit = i * BITS;
    let (byte, fb) = (bit / 8, bit % 8);
    let v = val as u16;
    regs[byte] &= !((REGISTER_MAX as u16) << fb) as u8;
    regs[byte] |= (v << fb) as u8;
    if let Some(b1) = regs.get_mut(byte + 1) {
        let fb8 = 8 - fb;
        *b1 &= !((REGISTER_MAX as u16) >> fb8) as u8;
        *b1 |= (v >> fb8) as u8;
    }
}

/// Raises register `i` to `count` if that is larger; returns whether it changed.
fn dense_raise(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_set(regs, i, count);
        true
    } else {
        false
    }
}

// ---- sparse opcodes ----

fn is_zero(b: u8) -> bool {
    b & 0xc0 == 0
}

fn is_xzero(b: u8) -> bool {
    b & 0xc0 == XZERO_BIT
}

fn is_val(b: u8) -> bool {
    b & VAL_BIT != 0
}

fn zero_len(b: u8) -> usize {
    (b & 0x3f) as usize + 1
}

fn xzero_len(b0: u8, b1: u8) -> usize {
    ((((b0 & 0x3f) as usize) << 8) | b1 as usize) + 1
}

fn val_value(b: u8) -> u8 {
    ((b >> 2) & 0x1f) + 1
}

fn val_len(b: u8) -> usize {
    (b & 0x3) as usize + 1
}

fn val_op(value: u8, len: usize) -> u8 {
    ((value - 1) << 2 | (len as u8 - 1)) | VAL_BIT
}

fn push_xzero(out: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    out.push((l >> 8) as u8 | XZERO_BIT);
    out.push((l & 0xff) as u8);
}

/// Zero registers as one ZERO or XZERO opcode (the split of step D, as Redis writes it).
fn push_zeros(out: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        push_xzero(out, len);
    } else {
        out.push((len - 1) as u8);
    }
}

/// One decoded opcode: its length in bytes, how many registers it covers and their value.
fn opcode(s: &[u8], p: usize) -> Result<(usize, usize, u8), Corrupt> {
    let b = s[p];
    if is_zero(b) {
        Ok((1, zero_len(b), 0))
    } else if is_val(b) {
        Ok((1, val_len(b), val_value(b)))
    } else {
        let b1 = *s.get(p + 1).ok_or(Corrupt)?;
        Ok((2, xzero_len(b, b1), 0))
    }
}

/// Calls `f(first_register, run_length, value)` for every opcode; checks that they cover
/// exactly the registers.
fn for_each_run(sparse: &[u8], mut f: impl FnMut(usize, usize, u8)) -> Result<(), Corrupt> {
    let (mut p, mut idx) = (0, 0);
    while p < sparse.len() {
        let (oplen, run, val) = opcode(sparse, p)?;
        if idx + run > REGISTERS {
            return Err(Corrupt);
        }
        f(idx, run, val);
        idx += run;
        p += oplen;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    Ok(())
}

/// Converts a sparse HyperLogLog to dense in place (header and cache kept).
pub fn to_dense(v: &mut Vec<u8>) -> Result<(), Corrupt> {
    if is_dense(v) {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR_SIZE].copy_from_slice(&v[..HDR_SIZE]);
    dense[4] = DENSE;
    {
        let regs = &mut dense[HDR_SIZE..];
        for_each_run(&v[HDR_SIZE..], |first, run, val| {
            if val != 0 {
                for i in first..first + run {
                    dense_set(regs, i, val);
                }
            }
        })?;
    }
    *v = dense;
    Ok(())
}

/// Redis's hllSparseSet: raises register `index` to `count`. Ok(true) when it changed. May
/// promote the value to dense (`max_sparse`: hll-sparse-max-bytes).
fn sparse_set(
    v: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_sparse: usize,
) -> Result<bool, Corrupt> {
    if count > VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    // Step 1: find the opcode covering the register.
    let end = v.len();
    let mut p = HDR_SIZE;
    let mut first = 0;
    let mut prev: Option<usize> = None;
    let mut span = 0;
    let mut oplen = 1;
    while p < end {
        let (len, run, _) = opcode(v, p)?;
        oplen = len;
        span = run;
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    if span == 0 || p >= end {
        return Err(Corrupt);
    }
    let b = v[p];
    let (zero, xzero) = (is_zero(b), is_xzero(b));
    // Step 2: the trivial cases, changed in place.
    let mut updated_in_place = false;
    if is_val(b) {
        let old = val_value(b);
        if old >= count {
            return Ok(false);
        }
        if span == 1 {
            v[p] = val_op(count, 1);
            updated_in_place = true;
        }
    }
    if zero && span == 1 {
        v[p] = val_op(count, 1);
        updated_in_place = true;
    }
    if !updated_in_place {
        // Step 3: split the opcode into at most five bytes.
        let last = first + span - 1;
        let mut seq: Vec<u8> = Vec::with_capacity(5);
        if zero || xzero {
            if index != first {
                push_zeros(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                push_zeros(&mut seq, last - index);
            }
        } else {
            let cur = val_value(b);
            if index != first {
                seq.push(val_op(cur, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(cur, last - index));
            }
        }
        let old_len = if xzero { 2 } else { 1 };
        if seq.len() > old_len && v.len() + seq.len() - old_len > max_sparse {
            return promote(v, index, count);
        }
        v.splice(p..p + oplen, seq);
    }
    // Step 4: merge equal neighbouring VAL opcodes, up to five opcodes from the previous one.
    let mut p = prev.unwrap_or(HDR_SIZE);
    let mut scan = 5;
    while p < v.len() && scan > 0 {
        scan -= 1;
        let b = v[p];
        if is_xzero(b) {
            p += 2;
            continue;
        } else if is_zero(b) {
            p += 1;
            continue;
        }
        if p + 1 < v.len() && is_val(v[p + 1]) {
            let (v1, v2) = (val_value(b), val_value(v[p + 1]));
            if v1 == v2 {
                let len = val_len(b) + val_len(v[p + 1]);
                if len <= VAL_MAX_LEN {
                    v[p + 1] = val_op(v1, len);
                    v.remove(p);
                    // Try the merged opcode against its right neighbour too.
                    continue;
                }
            }
        }
        p += 1;
    }
    invalidate_cache(v);
    Ok(true)
}

fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    to_dense(v)?;
    let changed = dense_raise(&mut v[HDR_SIZE..], index, count);
    debug_assert!(changed, "a promotion always raises the register");
    Ok(changed)
}

/// Raises register `index` to `count` in either encoding; Ok(true) when it changed.
pub fn raise(v: &mut Vec<u8>, index: usize, count: u8, max_sparse: usize) -> Result<bool, Corrupt> {
    if is_dense(v) {
        Ok(dense_raise(&mut v[HDR_SIZE..], index, count))
    } else {
        sparse_set(v, index, count, max_sparse)
    }
}

/// PFADD of one element: Ok(true) when a register changed.
pub fn add(v: &mut Vec<u8>, element: &[u8], max_sparse: usize) -> Result<bool, Corrupt> {
    let (index, count) = pattern(element);
    raise(v, index, count, max_sparse)
}

/// Merges `v`'s registers into `max` (one byte per register): max[i] = max(max[i], reg[i]).
pub fn merge_into(max: &mut [u8; REGISTERS], v: &[u8]) -> Result<(), Corrupt> {
    if is_dense(v) {
        let regs = &v[HDR_SIZE..];
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(regs, i));
        }
        Ok(())
    } else {
        for_each_run(&v[HDR_SIZE..], |first, run, val| {
            for m in &mut max[first..first + run] {
                *m = (*m).max(val);
            }
        })
    }
}

/// The registers of `v`, one byte each.
pub fn registers(v: &[u8]) -> Result<Box<[u8; REGISTERS]>, Corrupt> {
    let mut max = Box::new([0u8; REGISTERS]);
    merge_into(&mut max, v)?;
    Ok(max)
}

/// The cardinality estimate of a set of registers (Ertl's improved estimator, as Redis).
pub fn count_registers(regs: &[u8; REGISTERS]) -> u64 {
    let mut histogram = [0u32; 64];
    for &r in regs.iter() {
        histogram[r as usize & 63] += 1;
    }
    estimate(&histogram)
}

fn estimate(h: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q as usize + 1] as f64) / m);
    for j in (1..=Q as usize).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    // 1 / (2 ln 2): the estimator's constant for an infinite number of registers.
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    (ALPHA_INF * m * m / z).round() as u64
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// The cardinality estimate of one HyperLogLog (ignoring its cache).
pub fn count(v: &[u8]) -> Result<u64, Corrupt> {
    let mut histogram = [0u32; 64];
    if is_dense(v) {
        let regs = &v[HDR_SIZE..];
        for i in 0..REGISTERS {
            histogram[dense_get(regs, i) as usize] += 1;
        }
    } else {
        for_each_run(&v[HDR_SIZE..], |_, run, val| {
            histogram[val as usize] += run as u32;
        })?;
    }
    Ok(estimate(&histogram))
}

/// Writes the registers `max` into `v` (PFMERGE's destination), in its encoding (promoting a
/// sparse one when a register needs it).
pub fn store_registers(
    v: &mut Vec<u8>,
    max: &[u8; REGISTERS],
    max_sparse: usize,
) -> Result<(), Corrupt> {
    for (i, &m) in max.iter().enumerate() {
        if m != 0 {
            raise(v, i, m, max_sparse)?;
        }
    }
    invalidate_cache(v);
    Ok(())
}

// ---- PFDEBUG, PFSELFTEST ----

/// Whether `v` (a valid HyperLogLog) uses the sparse encoding.
pub fn is_sparse(v: &[u8]) -> bool {
    v[4] == SPARSE
}

/// PFDEBUG DECODE: a sparse value's opcodes as Redis writes them, space-separated: `z:<len>`
/// (ZERO), `Z:<len>` (XZERO), `v:<value>,<len>` (VAL). Walks the bytes without validating
/// them, as Redis does (an XZERO cut short reads a zero second byte, Redis's terminator).
pub fn decode_sparse(v: &[u8]) -> String {
    let s = &v[HDR_SIZE.min(v.len())..];
    let mut out = String::new();
    let mut p = 0;
    while p < s.len() {
        let b = s[p];
        if !out.is_empty() {
            out.push(' ');
        }
        if is_zero(b) {
            out.push_str(&format!("z:{}", zero_len(b)));
            p += 1;
        } else if is_xzero(b) {
            let b1 = s.get(p + 1).copied().unwrap_or(0);
            out.push_str(&format!("Z:{}", xzero_len(b, b1)));
            p += 2;
        } else {
            out.push_str(&format!("v:{},{}", val_value(b), val_len(b)));
            p += 1;
        }
    }
    out
}

/// PFSELFTEST's two checks, as Redis runs them: (1) a thousand rounds of random values
/// written to every dense register and read back; (2) ten million distinct elements added to
/// a dense register array and to a HyperLogLog that starts sparse, checking at 1, 10, 100, ...
/// that the HyperLogLog is still sparse while it should be (`max_sparse`:
/// hll-sparse-max-bytes), that both estimates agree, and that the error stays within six
/// standard errors (one at cardinality 10). `seed` varies the elements and values. The error
/// is Redis's reply text.
pub fn selftest(mut seed: u64, max_sparse: usize) -> Result<(), String> {
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut regs = vec![0u8; DENSE_SIZE - HDR_SIZE];
    let mut bytes = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, b) in bytes.iter_mut().enumerate() {
            let r = (rand() & REGISTER_MAX as u64) as u8;
            *b = r;
            dense_set(&mut regs, i, r);
        }
        for (i, &b) in bytes.iter().enumerate() {
            let got = dense_get(&regs, i);
            if got != b {
                return Err(format!(
                    "TESTFAILED Register {i} should be {b} but is {got}"
                ));
            }
        }
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..4].copy_from_slice(b"HYLL");
    dense[4] = DENSE;
    let mut hll = new_sparse();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let base = rand();
    for j in 1..=10_000_000u64 {
        let ele = (j ^ base).to_le_bytes();
        let (index, rank) = pattern(&ele);
        dense_raise(&mut dense[HDR_SIZE..], index, rank);
        if raise(&mut hll, index, rank, max_sparse).is_err() {
            return Err("TESTFAILED sparse representation corrupted".into());
        }
        if j != checkpoint {
            continue;
        }
        if (j as usize) < max_sparse / 2 && !is_sparse(&hll) {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let card = count(&dense).map_err(|_| "TESTFAILED dense/sparse disagree".to_string())?;
        if count(&hll) != Ok(card) {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let abserr = (checkpoint as i64 - card as i64).unsigned_abs();
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        if abserr > maxerr {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn murmur_known_values() {
        // Reference values of MurmurHash64A with seed 0xadc83b19 (from the algorithm's C code).
        assert_eq!(murmur64a(b"", 0), 0);
        assert_ne!(murmur64a(b"a", 0xadc83b19), murmur64a(b"b", 0xadc83b19));
        // Every tail length takes its own branch.
        let data = b"0123456789abcdef";
        let all: std::collections::HashSet<u64> = (0..=16)
            .map(|n| murmur64a(&data[..n], 0xadc83b19))
            .collect();
        assert_eq!(all.len(), 17);
    }

    #[test]
    fn new_is_the_18_byte_sparse_form() {
        let v = new_sparse();
        assert_eq!(v.len(), 18);
        assert_eq!(&v[..5], b"HYLL\x01");
        assert_eq!(&v[16..], &[0x7f, 0xff]);
        assert!(is_valid(&v));
        assert_eq!(cached(&v), Some(0));
        assert_eq!(count(&v), Ok(0));
    }

    #[test]
    fn dense_registers_round_trip_at_every_bit_offset() {
        let mut regs = vec![0u8; DENSE_SIZE - HDR_SIZE];
        for i in 0..REGISTERS {
            dense_set(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8, "register {i}");
        }
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut s = new_sparse();
        let mut d = new_sparse();
        to_dense(&mut d).unwrap();
        assert_eq!(d.len(), DENSE_SIZE);
        for i in 0..2000u32 {
            let e = format!("element:{i}");
            assert_eq!(
                add(&mut s, e.as_bytes(), 3000).unwrap(),
                add(&mut d, e.as_bytes(), 3000).unwrap()
            );
        }
        assert_eq!(registers(&s).unwrap(), registers(&d).unwrap());
        assert_eq!(count(&s).unwrap(), count(&d).unwrap());
    }

    #[test]
    fn estimates_are_close() {
        let mut v = new_sparse();
        for i in 0..100_000u32 {
            add(&mut v, &i.to_le_bytes(), 3000).unwrap();
        }
        assert!(is_dense(&v));
        let c = count(&v).unwrap() as f64;
        assert!((c - 100_000.0).abs() / 100_000.0 < 0.03, "{c}");
    }

    #[test]
    fn corrupt_sparse_data_is_detected() {
        let mut v = new_sparse();
        v.truncate(17); // an XZERO opcode cut in half
        assert_eq!(count(&v), Err(Corrupt));
        let mut v = new_sparse();
        v[16] = 0x40; // XZERO of 1..: does not cover all registers
        assert_eq!(count(&v), Err(Corrupt));
        // A register past what the opcodes cover cannot be set either.
        assert_eq!(raise(&mut v, REGISTERS - 1, 3, 3000), Err(Corrupt));
    }

    proptest! {
        #[test]
        fn sparse_updates_keep_a_valid_run_length_encoding(
            ops in proptest::collection::vec((0usize..REGISTERS, 1u8..40), 1..300)
        ) {
            let mut v = new_sparse();
            let mut model = [0u8; REGISTERS];
            for (i, c) in ops {
                let changed = raise(&mut v, i, c, 3000).unwrap();
                prop_assert_eq!(changed, c > model[i]);
                model[i] = model[i].max(c);
                prop_assert_eq!(&*registers(&v).unwrap(), &model);
            }
        }
    }

    #[test]
    fn decode_lists_opcodes() {
        let mut v = new_sparse();
        assert_eq!(decode_sparse(&v), "Z:16384");
        raise(&mut v, 100, 3, 3000).unwrap();
        assert_eq!(decode_sparse(&v), "Z:100 v:3,1 Z:16283");
        raise(&mut v, 101, 3, 3000).unwrap();
        raise(&mut v, 103, 1, 3000).unwrap();
        assert_eq!(decode_sparse(&v), "Z:100 v:3,2 z:1 v:1,1 Z:16280");
        // A truncated XZERO reads a zero second byte; nothing panics on junk.
        assert_eq!(
            decode_sparse(&[b'H', b'Y', b'L', b'L', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x41]),
            "Z:257"
        );
        assert_eq!(decode_sparse(b"HYLL"), "");
    }

    #[test]
    fn selftest_passes() {
        assert_eq!(selftest(0x9e37_79b9_7f4a_7c15, 3000), Ok(()));
    }
}
