//! The x87 80-bit `long double` arithmetic INCRBYFLOAT is defined by.
//!
//! Redis parses both operands with `strtold`, adds them as `long double` (64-bit significand on
//! x86-64) and prints the sum with `"%.17Lf"`, trailing zeros removed. An `f64` gives different
//! text (`10.5 + 0.1` prints `10.59999999999999964` in double precision but `10.6` here), so
//! this module emulates the format exactly: correctly rounded parsing (round half to even, as
//! glibc), one correctly rounded addition, and an exact decimal rendering rounded half to even
//! at 17 fractional digits (as glibc's printf). A tiny arbitrary-precision integer does the
//! exact parts; inputs are bounded by Redis's 5119-byte limit, so the work is bounded too.

use std::cmp::Ordering;

/// An extended-precision value: `(-1)^neg * mant * 2^exp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ld {
    Zero(bool),
    Fin { neg: bool, mant: u64, exp: i32 },
    Inf(bool),
    Nan,
}

/// Exponent of the smallest subnormal (`2^-16445`): every finite value is a multiple of it.
const MIN_EXP: i64 = -16445;
/// Largest exponent with a 64-bit significand (largest finite value just under `2^16384`).
const MAX_EXP: i64 = 16320;
/// Redis's `MAX_LONG_DOUBLE_CHARS`: longer texts are not valid floats.
const MAX_CHARS: usize = 5 * 1024;

// ---------------------------------------------------------------------------------------------
// A minimal unsigned big integer (little-endian 32-bit limbs, no high zero limbs).

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bits(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as u64 - 1) * 32 + (32 - top.leading_zeros() as u64),
        }
    }

    fn bit(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        limb < self.0.len() && self.0[limb] >> (i % 32) & 1 == 1
    }

    /// Whether any bit below position `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let full = ((i / 32) as usize).min(self.0.len());
        if self.0[..full].iter().any(|&l| l != 0) {
            return true;
        }
        let rem = i % 32;
        full < self.0.len() && rem > 0 && self.0[full] & ((1u32 << rem) - 1) != 0
    }

    /// Bits `[from, from + 64)` as an integer.
    fn extract_u64(&self, from: u64) -> u64 {
        let mut v = 0u64;
        for k in 0..64 {
            if self.bit(from + k) {
                v |= 1 << k;
            }
        }
        v
    }

    fn to_u64(&self) -> u64 {
        self.extract_u64(0)
    }

    fn shl(&self, n: u64) -> Big {
        if self.is_zero() {
            return Big::default();
        }
        let limbs = (n / 32) as usize;
        let s = (n % 32) as u32;
        let mut out = vec![0u32; limbs];
        out.reserve(self.0.len() + 1);
        if s == 0 {
            out.extend_from_slice(&self.0);
        } else {
            let mut carry = 0u32;
            for &l in &self.0 {
                out.push((l << s) | carry);
                carry = l >> (32 - s);
            }
            out.push(carry);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn shr(&self, n: u64) -> Big {
        let limbs = (n / 32) as usize;
        if limbs >= self.0.len() {
            return Big::default();
        }
        let s = (n % 32) as u32;
        let src = &self.0[limbs..];
        let mut out = Vec::with_capacity(src.len());
        for i in 0..src.len() {
            let lo = src[i] >> s;
            let hi = if s > 0 && i + 1 < src.len() {
                src[i + 1] << (32 - s)
            } else {
                0
            };
            out.push(lo | hi);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn mul_small_add(&mut self, m: u32, a: u32) {
        let mut carry = a as u64;
        for l in self.0.iter_mut() {
            let v = *l as u64 * m as u64 + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    /// Divides in place by `d`, returning the remainder.
    fn div_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.0.iter_mut().rev() {
            let cur = (rem << 32) | *l as u64;
            *l = (cur / d as u64) as u32;
            rem = cur % d as u64;
        }
        self.trim();
        rem as u32
    }

    fn add(&self, o: &Big) -> Big {
        let n = self.0.len().max(o.0.len());
        let mut out = Vec::with_capacity(n + 1);
        let mut carry = 0u64;
        for i in 0..n {
            let v = *self.0.get(i).unwrap_or(&0) as u64 + *o.0.get(i).unwrap_or(&0) as u64 + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        out.push(carry as u32);
        let mut b = Big(out);
        b.trim();
        b
    }

    /// `self - o`; requires `self >= o`.
    fn sub(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let mut v = self.0[i] as i64 - *o.0.get(i).unwrap_or(&0) as i64 - borrow;
            borrow = 0;
            if v < 0 {
                v += 1 << 32;
                borrow = 1;
            }
            out.push(v as u32);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    fn pow10(k: u64) -> Big {
        let mut b = Big::from_u64(1);
        let mut left = k;
        while left >= 9 {
            b.mul_small_add(1_000_000_000, 0);
            left -= 9;
        }
        b.mul_small_add(10u32.pow(left as u32), 0);
        b
    }

    /// Quotient (small: at most 127 bits) and whether a remainder is left.
    fn div_rem_small_quotient(&self, v: &Big) -> (Big, bool) {
        if self.cmp(v) == Ordering::Less {
            return (Big::default(), !self.is_zero());
        }
        let qb = self.bits() - v.bits();
        debug_assert!(qb < 127);
        let mut r = self.clone();
        let mut q = 0u128;
        for i in (0..=qb).rev() {
            let t = v.shl(i);
            if r.cmp(&t) != Ordering::Less {
                r = r.sub(&t);
                q |= 1 << i;
            }
        }
        let mut b = Big(vec![
            q as u32,
            (q >> 32) as u32,
            (q >> 64) as u32,
            (q >> 96) as u32,
        ]);
        b.trim();
        (b, !r.is_zero())
    }

    fn to_decimal(&self, out: &mut Vec<u8>) {
        if self.is_zero() {
            out.push(b'0');
            return;
        }
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.div_small(1_000_000_000));
        }
        let mut first = true;
        for c in chunks.iter().rev() {
            let s = if first {
                c.to_string()
            } else {
                format!("{c:09}")
            };
            first = false;
            out.extend_from_slice(s.as_bytes());
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// Rounds `big * 2^e` (plus a nonzero amount below `2^e` when `sticky`) to the nearest
/// representable value, ties to even. When `sticky`, `big` must carry at least 66 bits.
fn round(neg: bool, big: &Big, e: i64, sticky: bool) -> Ld {
    if big.is_zero() {
        return Ld::Zero(neg);
    }
    let n = big.bits() as i64;
    let mut exp = (e + n - 64).max(MIN_EXP);
    let shift = exp - e;
    let mut q;
    let up;
    if shift <= 0 {
        q = big.to_u64() << (-shift);
        up = false;
    } else {
        let s = shift as u64;
        q = if s >= n as u64 { 0 } else { big.extract_u64(s) };
        let half = big.bit(s - 1);
        let low = sticky || big.any_below(s - 1);
        up = half && (low || q & 1 == 1);
    }
    if up {
        q = q.wrapping_add(1);
        if q == 0 {
            q = 1 << 63;
            exp += 1;
        }
    }
    if q == 0 {
        return Ld::Zero(neg);
    }
    if exp > MAX_EXP {
        return Ld::Inf(neg);
    }
    Ld::Fin {
        neg,
        mant: q,
        exp: exp as i32,
    }
}

fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// Parses a float with Redis's `string2ld` rules (`strtold` over the whole text; refuses
/// empty or over-long text, a leading space, trailing bytes, NaN, and overflow or underflow
/// to zero). `inf` is accepted, as `strtold` accepts it.
pub fn parse(s: &[u8]) -> Option<Ld> {
    if s.is_empty() || s.len() >= MAX_CHARS {
        return None;
    }
    // Redis hands strtold a C string and then requires it to have consumed all `slen` bytes:
    // an embedded NUL stops the conversion short, so the text is refused.
    if s.contains(&0) {
        return None;
    }
    if is_c_space(s[0]) {
        return None;
    }
    let (neg, body) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
        return Some(Ld::Inf(neg));
    }
    let r = if body.len() > 2 && body[0] == b'0' && (body[1] | 0x20) == b'x' {
        parse_hex(neg, &body[2..])?
    } else {
        parse_dec(neg, body)?
    };
    match r {
        Ld::Inf(_) | Ld::Nan => None,
        other => Some(other),
    }
}

/// Digits then an optional exponent with sign; the exponent saturates (a huge one is an
/// overflow or underflow either way).
fn parse_exp(b: &[u8]) -> Option<i64> {
    let (neg, d) = match b.first()? {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    if d.is_empty() || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: i64 = 0;
    for &c in d {
        v = (v * 10 + (c - b'0') as i64).min(1_000_000_000);
    }
    Some(if neg { -v } else { v })
}

fn parse_dec(neg: bool, b: &[u8]) -> Option<Ld> {
    let mut i = 0;
    let mut digits: Vec<u8> = Vec::new();
    let mut exp10: i64 = 0;
    let mut seen = false;
    while i < b.len() && b[i].is_ascii_digit() {
        seen = true;
        if !(digits.is_empty() && b[i] == b'0') {
            digits.push(b[i] - b'0');
        }
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            seen = true;
            if !(digits.is_empty() && b[i] == b'0') {
                digits.push(b[i] - b'0');
            }
            exp10 -= 1;
            i += 1;
        }
    }
    if !seen {
        return None;
    }
    if i < b.len() {
        if b[i] | 0x20 != b'e' {
            return None;
        }
        exp10 += parse_exp(&b[i + 1..])?;
    }
    if digits.is_empty() {
        return Some(Ld::Zero(neg));
    }
    // exp10 counted every fractional digit, including leading zeros that were dropped.
    while digits.last() == Some(&0) {
        digits.pop();
        exp10 += 1;
    }
    let nd = digits.len() as i64;
    // Decide obvious overflow (max ~1.19e4932) and underflow (min ~3.6e-4951) up front.
    if nd - 1 + exp10 > 4940 {
        return Some(Ld::Inf(neg));
    }
    if nd + exp10 < -4960 {
        return Some(Ld::Inf(neg)); // underflow: refused, see below
    }
    let mut d = Big::default();
    for chunk in digits.chunks(9) {
        let mut v = 0u32;
        for &c in chunk {
            v = v * 10 + c as u32;
        }
        d.mul_small_add(10u32.pow(chunk.len() as u32), v);
    }
    let r = if exp10 >= 0 {
        let big = mul(&d, &Big::pow10(exp10 as u64));
        round(neg, &big, 0, false)
    } else {
        let v = Big::pow10((-exp10) as u64);
        // Scale the numerator so the quotient has 68 bits: enough for rounding.
        let diff = d.bits() as i64 - v.bits() as i64;
        let shift = 68 - diff;
        let (n, e, dropped) = if shift >= 0 {
            (d.shl(shift as u64), -shift, false)
        } else {
            let s = (-shift) as u64;
            (d.shr(s), -shift, d.any_below(s))
        };
        let (q, rem) = n.div_rem_small_quotient(&v);
        round(neg, &q, e, rem || dropped)
    };
    // A nonzero text that rounds to zero is an underflow (ERANGE): refused like overflow.
    Some(match r {
        Ld::Zero(_) => Ld::Inf(neg),
        other => other,
    })
}

fn mul(a: &Big, b: &Big) -> Big {
    let mut out = vec![0u32; a.0.len() + b.0.len() + 1];
    for (i, &x) in a.0.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &y) in b.0.iter().enumerate() {
            let v = out[i + j] as u64 + x as u64 * y as u64 + carry;
            out[i + j] = v as u32;
            carry = v >> 32;
        }
        let mut k = i + b.0.len();
        while carry > 0 {
            let v = out[k] as u64 + carry;
            out[k] = v as u32;
            carry = v >> 32;
            k += 1;
        }
    }
    let mut r = Big(out);
    r.trim();
    r
}

fn parse_hex(neg: bool, b: &[u8]) -> Option<Ld> {
    let mut i = 0;
    let mut h = Big::default();
    let mut e: i64 = 0;
    let mut seen = false;
    while i < b.len() && b[i].is_ascii_hexdigit() {
        seen = true;
        h.mul_small_add(16, (b[i] as char).to_digit(16)?);
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_hexdigit() {
            seen = true;
            h.mul_small_add(16, (b[i] as char).to_digit(16)?);
            e -= 4;
            i += 1;
        }
    }
    if !seen {
        return None;
    }
    if i < b.len() {
        if b[i] | 0x20 != b'p' {
            return None;
        }
        e += parse_exp(&b[i + 1..])?;
    }
    if h.is_zero() {
        return Some(Ld::Zero(neg));
    }
    let top = h.bits() as i64 + e; // the value is below 2^top and at least 2^(top-1)
    if top - 1 > 16383 {
        return Some(Ld::Inf(neg));
    }
    if top < MIN_EXP - 2 {
        return Some(Ld::Inf(neg)); // underflow: refused (see parse_dec)
    }
    Some(match round(neg, &h, e, false) {
        Ld::Zero(_) => Ld::Inf(neg),
        other => other,
    })
}

fn magnitude(mant: u64, exp: i32, base: i64) -> Big {
    Big::from_u64(mant).shl((exp as i64 - base) as u64)
}

/// `a + b` rounded to nearest, ties to even (x87 in its default mode).
pub fn add(a: Ld, b: Ld) -> Ld {
    match (a, b) {
        (Ld::Nan, _) | (_, Ld::Nan) => Ld::Nan,
        (Ld::Inf(x), Ld::Inf(y)) => {
            if x == y {
                Ld::Inf(x)
            } else {
                Ld::Nan
            }
        }
        (Ld::Inf(x), _) | (_, Ld::Inf(x)) => Ld::Inf(x),
        (Ld::Zero(x), Ld::Zero(y)) => Ld::Zero(x && y),
        (Ld::Zero(_), v) | (v, Ld::Zero(_)) => v,
        (
            Ld::Fin {
                neg: na,
                mant: ma,
                exp: ea,
            },
            Ld::Fin {
                neg: nb,
                mant: mb,
                exp: eb,
            },
        ) => {
            // Order by exponent: (hi) has the larger one.
            let ((nh, mh, eh), (nl, ml, el)) = if ea >= eb {
                ((na, ma, ea), (nb, mb, eb))
            } else {
                ((nb, mb, eb), (na, ma, ea))
            };
            let d = eh as i64 - el as i64;
            let (big_h, big_l, base) = if d <= 200 {
                (magnitude(mh, eh, el as i64), Big::from_u64(ml), el as i64)
            } else {
                // The small operand lies far below half an ulp of the large one: any value
                // strictly between 0 and a quarter ulp rounds the same way, so use 1 there.
                let base = eh as i64 - 130;
                (magnitude(mh, eh, base), Big::from_u64(1), base)
            };
            if nh == nl {
                round(nh, &big_h.add(&big_l), base, false)
            } else {
                match big_h.cmp(&big_l) {
                    Ordering::Equal => Ld::Zero(false),
                    Ordering::Greater => round(nh, &big_h.sub(&big_l), base, false),
                    Ordering::Less => round(nl, &big_l.sub(&big_h), base, false),
                }
            }
        }
    }
}

/// Appends the text Redis stores for a finite value: `"%.17Lf"` without trailing zeros (and
/// without a trailing dot), `-0` written as `0`.
pub fn format(v: Ld, out: &mut Vec<u8>) {
    let start = out.len();
    let (neg, mant, exp) = match v {
        Ld::Zero(neg) => (neg, 0u64, 0i32),
        Ld::Fin { neg, mant, exp } => (neg, mant, exp),
        // Never stored (INCRBYFLOAT refuses them); written as printf would.
        Ld::Inf(neg) => {
            out.extend_from_slice(if neg { b"-inf" } else { b"inf" });
            return;
        }
        Ld::Nan => {
            out.extend_from_slice(b"nan");
            return;
        }
    };
    if neg {
        out.push(b'-');
    }
    if exp >= 0 {
        // An integer: no fractional digits survive.
        Big::from_u64(mant).shl(exp as u64).to_decimal(out);
    } else {
        let k = (-exp) as u32;
        let (mut int, frac) = if k >= 64 {
            (0u64, mant)
        } else {
            (mant >> k, mant & ((1u64 << k) - 1))
        };
        const SCALE: u128 = 100_000_000_000_000_000; // 10^17
        let prod = frac as u128 * SCALE; // < 2^121
        let mut q = 0u128;
        if k < 128 {
            q = prod >> k;
            let rem = prod & ((1u128 << k) - 1);
            let half = 1u128 << (k - 1);
            if rem > half || (rem == half && q & 1 == 1) {
                q += 1;
            }
        }
        // (k >= 128: prod < 2^121 < half an ulp of the last digit: rounds to 0.)
        if q == SCALE {
            q = 0;
            int += 1;
        }
        out.extend_from_slice(int.to_string().as_bytes());
        if q != 0 {
            let s = format!("{q:017}");
            out.push(b'.');
            out.extend_from_slice(s.trim_end_matches('0').as_bytes());
        }
    }
    if &out[start..] == b"-0" {
        out.truncate(start);
        out.push(b'0');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(a: &str, b: &str) -> Option<String> {
        let x = parse(a.as_bytes())?;
        let y = parse(b.as_bytes())?;
        let s = add(x, y);
        if matches!(s, Ld::Inf(_) | Ld::Nan) {
            return Some("ERR".into());
        }
        let mut out = Vec::new();
        format(s, &mut out);
        Some(String::from_utf8(out).unwrap())
    }

    #[test]
    fn matches_redis_on_x86_64() {
        // Expected values taken from redis-server (x86-64, glibc).
        let cases = [
            ("10.5", "0.1", "10.6"),
            ("0", "5.0e3", "5000"),
            ("0", "1e20", "100000000000000000000"),
            ("0", "0.000003814697265625", "0.00000381469726562"),
            ("0", "1e-30", "0"),
            ("0", "-1e-30", "0"),
            ("0", "0x1p3", "8"),
            ("1.5", "inf", "ERR"),
            ("0", "-0", "0"),
            ("3", "-3", "0"),
            ("0.1", "0.2", "0.3"),
            ("1", "-0.9", "0.1"),
        ];
        for (a, b, want) in cases {
            assert_eq!(incr(a, b).as_deref(), Some(want), "{a} + {b}");
        }
    }

    #[test]
    fn refusals() {
        for bad in [
            "", " 1", "1 ", "abc", "1e", "1e+", ".", "nan", "-nan", "0x", "1.2.3", "1e5000",
            "1e-5000", "--1", "+-1",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
        // regression (differential fuzz): an embedded NUL is refused, as string2ld refuses it.
        assert_eq!(parse(b"\0abc"), None);
        assert_eq!(parse(b"1\0"), None);
        let mut long = vec![b'0'; 5119];
        long[5118] = b'1';
        assert_eq!(parse(&long), parse(b"1"));
        long.push(b'0');
        assert!(parse(&long).is_none());
        // 5119 nines: far beyond the largest long double.
        assert!(parse(&[b'9'; 5119]).is_none());
        assert_eq!(parse(b"-inf"), Some(Ld::Inf(true)));
    }

    #[test]
    fn huge_and_tiny_values_do_not_panic() {
        let mut out = Vec::new();
        let max = parse(b"1.18973149535723176502e4932").unwrap();
        format(max, &mut out);
        assert!(out.len() > 4900);
        assert!(parse(b"1.2e4932").is_none());
        let tiny = parse(b"4e-4951").unwrap();
        assert!(matches!(tiny, Ld::Fin { .. }));
        out.clear();
        format(tiny, &mut out);
        assert_eq!(out, b"0");
        let tiny = format!("0.{}1", "0".repeat(4940));
        assert!(matches!(parse(tiny.as_bytes()), Some(Ld::Fin { .. })));
        let underflow = format!("0.{}1", "0".repeat(5000));
        assert!(parse(underflow.as_bytes()).is_none());
        let big_digits = format!("{}e-4990", "9".repeat(5000));
        let mut out = Vec::new();
        format(parse(big_digits.as_bytes()).unwrap(), &mut out);
        assert_eq!(out, b"10000000000");
    }
}
