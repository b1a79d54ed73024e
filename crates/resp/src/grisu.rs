//! The digit generation Redis 7.2 uses for doubles that are not integers:
//! Grisu2 (Florian Loitsch, "Printing Floating-Point Numbers Quickly and
//! Accurately with Integers", PLDI 2010), as set up in the `fpconv` library
//! Redis bundles. Grisu2 always produces digits that read back as the same
//! double, but not always the shortest or closest such digits; matching
//! Redis byte for byte means reproducing its exact choices: the same cached
//! powers of ten, the same choice among them, the same rounding of
//! products and the same final digit adjustment.

/// A floating-point number `f * 2^e` with a 64-bit significand.
#[derive(Clone, Copy, Debug)]
struct Fp {
    f: u64,
    e: i32,
}

const SIGNIFICAND_BITS: u32 = 52;
const HIDDEN_BIT: u64 = 1 << SIGNIFICAND_BITS;
const FRACTION_MASK: u64 = HIDDEN_BIT - 1;
const EXPONENT_BIAS: i32 = 1023 + 52;

/// Normalised 64-bit approximations (round to nearest) of `10^k` for
/// `k = -348, -340, ..., 340`: `10^k ≈ f * 2^e`. Generated with exact
/// rational arithmetic: `e` is chosen so that `2^63 <= 10^k / 2^e < 2^64`
/// and `f = round(10^k / 2^e)`. The test `cached_powers_are_exact`
/// re-derives every entry.
const POWERS: [(u64, i32); 87] = [
    (0xfa8fd5a0081c0288, -1220), // 10^-348
    (0xbaaee17fa23ebf76, -1193), // 10^-340
    (0x8b16fb203055ac76, -1166), // 10^-332
    (0xcf42894a5dce35ea, -1140), // 10^-324
    (0x9a6bb0aa55653b2d, -1113), // 10^-316
    (0xe61acf033d1a45df, -1087), // 10^-308
    (0xab70fe17c79ac6ca, -1060), // 10^-300
    (0xff77b1fcbebcdc4f, -1034), // 10^-292
    (0xbe5691ef416bd60c, -1007), // 10^-284
    (0x8dd01fad907ffc3c, -980),  // 10^-276
    (0xd3515c2831559a83, -954),  // 10^-268
    (0x9d71ac8fada6c9b5, -927),  // 10^-260
    (0xea9c227723ee8bcb, -901),  // 10^-252
    (0xaecc49914078536d, -874),  // 10^-244
    (0x823c12795db6ce57, -847),  // 10^-236
    (0xc21094364dfb5637, -821),  // 10^-228
    (0x9096ea6f3848984f, -794),  // 10^-220
    (0xd77485cb25823ac7, -768),  // 10^-212
    (0xa086cfcd97bf97f4, -741),  // 10^-204
    (0xef340a98172aace5, -715),  // 10^-196
    (0xb23867fb2a35b28e, -688),  // 10^-188
    (0x84c8d4dfd2c63f3b, -661),  // 10^-180
    (0xc5dd44271ad3cdba, -635),  // 10^-172
    (0x936b9fcebb25c996, -608),  // 10^-164
    (0xdbac6c247d62a584, -582),  // 10^-156
    (0xa3ab66580d5fdaf6, -555),  // 10^-148
    (0xf3e2f893dec3f126, -529),  // 10^-140
    (0xb5b5ada8aaff80b8, -502),  // 10^-132
    (0x87625f056c7c4a8b, -475),  // 10^-124
    (0xc9bcff6034c13053, -449),  // 10^-116
    (0x964e858c91ba2655, -422),  // 10^-108
    (0xdff9772470297ebd, -396),  // 10^-100
    (0xa6dfbd9fb8e5b88f, -369),  // 10^-92
    (0xf8a95fcf88747d94, -343),  // 10^-84
    (0xb94470938fa89bcf, -316),  // 10^-76
    (0x8a08f0f8bf0f156b, -289),  // 10^-68
    (0xcdb02555653131b6, -263),  // 10^-60
    (0x993fe2c6d07b7fac, -236),  // 10^-52
    (0xe45c10c42a2b3b06, -210),  // 10^-44
    (0xaa242499697392d3, -183),  // 10^-36
    (0xfd87b5f28300ca0e, -157),  // 10^-28
    (0xbce5086492111aeb, -130),  // 10^-20
    (0x8cbccc096f5088cc, -103),  // 10^-12
    (0xd1b71758e219652c, -77),   // 10^-4
    (0x9c40000000000000, -50),   // 10^4
    (0xe8d4a51000000000, -24),   // 10^12
    (0xad78ebc5ac620000, 3),     // 10^20
    (0x813f3978f8940984, 30),    // 10^28
    (0xc097ce7bc90715b3, 56),    // 10^36
    (0x8f7e32ce7bea5c70, 83),    // 10^44
    (0xd5d238a4abe98068, 109),   // 10^52
    (0x9f4f2726179a2245, 136),   // 10^60
    (0xed63a231d4c4fb27, 162),   // 10^68
    (0xb0de65388cc8ada8, 189),   // 10^76
    (0x83c7088e1aab65db, 216),   // 10^84
    (0xc45d1df942711d9a, 242),   // 10^92
    (0x924d692ca61be758, 269),   // 10^100
    (0xda01ee641a708dea, 295),   // 10^108
    (0xa26da3999aef774a, 322),   // 10^116
    (0xf209787bb47d6b85, 348),   // 10^124
    (0xb454e4a179dd1877, 375),   // 10^132
    (0x865b86925b9bc5c2, 402),   // 10^140
    (0xc83553c5c8965d3d, 428),   // 10^148
    (0x952ab45cfa97a0b3, 455),   // 10^156
    (0xde469fbd99a05fe3, 481),   // 10^164
    (0xa59bc234db398c25, 508),   // 10^172
    (0xf6c69a72a3989f5c, 534),   // 10^180
    (0xb7dcbf5354e9bece, 561),   // 10^188
    (0x88fcf317f22241e2, 588),   // 10^196
    (0xcc20ce9bd35c78a5, 614),   // 10^204
    (0x98165af37b2153df, 641),   // 10^212
    (0xe2a0b5dc971f303a, 667),   // 10^220
    (0xa8d9d1535ce3b396, 694),   // 10^228
    (0xfb9b7cd9a4a7443c, 720),   // 10^236
    (0xbb764c4ca7a44410, 747),   // 10^244
    (0x8bab8eefb6409c1a, 774),   // 10^252
    (0xd01fef10a657842c, 800),   // 10^260
    (0x9b10a4e5e9913129, 827),   // 10^268
    (0xe7109bfba19c0c9d, 853),   // 10^276
    (0xac2820d9623bf429, 880),   // 10^284
    (0x80444b5e7aa7cf85, 907),   // 10^292
    (0xbf21e44003acdd2d, 933),   // 10^300
    (0x8e679c2f5e44ff8f, 960),   // 10^308
    (0xd433179d9c8cb841, 986),   // 10^316
    (0x9e19db92b4e31ba9, 1013),  // 10^324
    (0xeb96bf6ebadf77d9, 1039),  // 10^332
    (0xaf87023b9bf0ee6b, 1066),  // 10^340
];
const FIRST_POWER: i32 = -348;
const POWER_STEP: i32 = 8;
/// The scaled upper boundary's binary exponent must land in this range.
const ALPHA: i32 = -60;
const GAMMA: i32 = -32;

/// The cached power used for a boundary with binary exponent `e`, and its
/// decimal exponent. The first guess and the direction of the search are
/// those of fpconv, which matters because two neighbouring entries can both
/// fit the range.
fn cached_power(e: i32) -> (Fp, i32) {
    let approx = (f64::from(-(e + POWERS.len() as i32)) * 0.301_029_995_663_981_14) as i32;
    let mut idx = (approx - FIRST_POWER) / POWER_STEP;
    loop {
        let i = idx.clamp(0, POWERS.len() as i32 - 1) as usize;
        let (f, pe) = POWERS[i];
        let current = e + pe + 64;
        if current < ALPHA && idx < POWERS.len() as i32 - 1 {
            idx += 1;
        } else if current > GAMMA && idx > 0 {
            idx -= 1;
        } else {
            return (Fp { f, e: pe }, FIRST_POWER + i as i32 * POWER_STEP);
        }
    }
}

/// High 64 bits of the 128-bit product, rounded half up.
#[inline]
fn mul(a: Fp, b: Fp) -> Fp {
    let p = u128::from(a.f) * u128::from(b.f) + (1u128 << 63);
    Fp {
        f: (p >> 64) as u64,
        e: a.e + b.e + 64,
    }
}

/// `|v|` as an exact `Fp` (significand with the hidden bit, unnormalised).
fn decompose(v: f64) -> Fp {
    let bits = v.to_bits();
    let frac = bits & FRACTION_MASK;
    let biased = ((bits >> SIGNIFICAND_BITS) & 0x7ff) as i32;
    if biased != 0 {
        Fp {
            f: frac + HIDDEN_BIT,
            e: biased - EXPONENT_BIAS,
        }
    } else {
        Fp {
            f: frac,
            e: 1 - EXPONENT_BIAS,
        }
    }
}

fn normalize(mut x: Fp) -> Fp {
    while x.f & HIDDEN_BIT == 0 {
        x.f <<= 1;
        x.e -= 1;
    }
    Fp {
        f: x.f << 11,
        e: x.e - 11,
    }
}

/// The midpoints to the neighbouring doubles, normalised to a common
/// exponent: (lower, upper).
fn boundaries(w: Fp) -> (Fp, Fp) {
    let mut upper = Fp {
        f: (w.f << 1) + 1,
        e: w.e - 1,
    };
    while upper.f & (HIDDEN_BIT << 1) == 0 {
        upper.f <<= 1;
        upper.e -= 1;
    }
    upper.f <<= 10;
    upper.e -= 10;
    // The gap below a power of two is half the gap above it.
    let shift = if w.f == HIDDEN_BIT { 2 } else { 1 };
    let lower_e = w.e - shift;
    let lower = Fp {
        f: ((w.f << shift) - 1) << (lower_e - upper.e),
        e: upper.e,
    };
    (lower, upper)
}

/// Moves the last digit down while that brings the digits closer to the
/// scaled value without leaving the safe interval.
fn round_last(digits: &mut [u8], delta: u64, mut rest: u64, ten_kappa: u64, dist: u64) {
    let Some(last) = digits.last_mut() else {
        return;
    };
    while rest < dist
        && delta - rest >= ten_kappa
        && (rest.wrapping_add(ten_kappa) < dist
            || dist - rest > rest.wrapping_add(ten_kappa).wrapping_sub(dist))
    {
        *last = last.wrapping_sub(1);
        rest = rest.wrapping_add(ten_kappa);
    }
}

/// Generates the digits of the scaled value (`w` between `low` and `high`).
/// Returns the number of digits written and the decimal exponent to add.
fn digit_gen(w: Fp, low: Fp, high: Fp, out: &mut [u8; 20]) -> (usize, i32) {
    let dist = high.f.wrapping_sub(w.f);
    let mut delta = high.f.wrapping_sub(low.f);
    let shift = (-high.e) as u32;
    let one = 1u64 << shift;
    let mut p1 = (high.f >> shift) as u32;
    let mut p2 = high.f & (one - 1);
    let mut n = 0usize;
    let mut kappa: i32 = 10;
    let mut div: u32 = 1_000_000_000;
    while kappa > 0 {
        let d = p1 / div;
        if (d != 0 || n != 0) && n < out.len() {
            out[n] = b'0' + d as u8;
            n += 1;
        }
        p1 -= d * div;
        kappa -= 1;
        let rest = (u64::from(p1) << shift) + p2;
        if rest <= delta {
            round_last(&mut out[..n], delta, rest, u64::from(div) << shift, dist);
            return (n, kappa);
        }
        div /= 10;
    }
    let mut unit: u64 = 10;
    loop {
        p2 = p2.wrapping_mul(10);
        delta = delta.wrapping_mul(10);
        kappa -= 1;
        let d = (p2 >> shift) as u8;
        if (d != 0 || n != 0) && n < out.len() {
            out[n] = b'0' + d;
            n += 1;
        }
        p2 &= one - 1;
        if p2 < delta || n >= out.len() {
            round_last(&mut out[..n], delta, p2, one, dist.wrapping_mul(unit));
            return (n, kappa);
        }
        unit = unit.wrapping_mul(10);
    }
}

/// Digits and decimal exponent `k` (value = digits * 10^k) that Redis
/// prints for a finite, non-zero `v` (the sign is ignored).
pub(crate) fn grisu2(v: f64, out: &mut [u8; 20]) -> (usize, i32) {
    let w = decompose(v);
    let (lower, upper) = boundaries(w);
    let w = normalize(w);
    let (c, k) = cached_power(upper.e);
    let w = mul(w, c);
    let mut upper = mul(upper, c);
    let mut lower = mul(lower, c);
    lower.f = lower.f.wrapping_add(1);
    upper.f = upper.f.wrapping_sub(1);
    let (n, kappa) = digit_gen(w, lower, upper, out);
    (n, kappa - k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Little-endian base-2^32 big integers, just enough to check the table.
    fn big_mul_small(a: &mut Vec<u32>, m: u32) {
        let mut carry = 0u64;
        for limb in a.iter_mut() {
            let v = u64::from(*limb) * u64::from(m) + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            a.push(carry as u32);
        }
    }

    fn big_from_u128(v: u128) -> Vec<u32> {
        (0..4).map(|i| (v >> (32 * i)) as u32).collect()
    }

    fn big_shl(a: &[u32], bits: usize) -> Vec<u32> {
        let mut out = vec![0u32; bits / 32];
        let s = bits % 32;
        let mut carry = 0u32;
        for &limb in a {
            if s == 0 {
                out.push(limb);
            } else {
                out.push((limb << s) | carry);
                carry = limb >> (32 - s);
            }
        }
        if carry != 0 {
            out.push(carry);
        }
        out
    }

    fn big_cmp(a: &[u32], b: &[u32]) -> std::cmp::Ordering {
        let trim = |x: &[u32]| {
            let mut n = x.len();
            while n > 0 && x[n - 1] == 0 {
                n -= 1;
            }
            x[..n].to_vec()
        };
        let (a, b) = (trim(a), trim(b));
        a.len()
            .cmp(&b.len())
            .then_with(|| a.iter().rev().cmp(b.iter().rev()))
    }

    #[test]
    fn cached_powers_are_exact() {
        // For each entry check (2f - 1) * 2^(e-1) < 10^k < (2f + 1) * 2^(e-1),
        // i.e. f is 10^k / 2^e rounded to nearest, and f is normalised.
        // Multiply through by 10^-k and/or powers of two to stay in integers.
        for (i, &(f, e)) in POWERS.iter().enumerate() {
            assert!(f >> 63 == 1, "entry {i} not normalised");
            let k = FIRST_POWER + i as i32 * POWER_STEP;
            let mut ten_k = vec![1u32];
            for _ in 0..k.unsigned_abs() {
                big_mul_small(&mut ten_k, 10);
            }
            let lo = big_from_u128(2 * u128::from(f) - 1);
            let hi = big_from_u128(2 * u128::from(f) + 1);
            // Compare A * 2^(e-1) with B where 10^k = B (k >= 0) or
            // compare A * 2^(e-1) * 10^-k with 1 (k < 0).
            let scale = |x: &[u32], extra_e: i32| -> (Vec<u32>, Vec<u32>) {
                // returns (left, right) such that the comparison is left ? right
                let mut left = x.to_vec();
                let mut right = vec![1u32];
                if k >= 0 {
                    right = ten_k.clone();
                } else {
                    for _ in 0..(-k) {
                        big_mul_small(&mut left, 10);
                    }
                }
                if extra_e >= 0 {
                    left = big_shl(&left, extra_e as usize);
                } else {
                    right = big_shl(&right, (-extra_e) as usize);
                }
                (left, right)
            };
            let (l, r) = scale(&lo, e - 1);
            assert_eq!(big_cmp(&l, &r), std::cmp::Ordering::Less, "entry {i} low");
            let (l, r) = scale(&hi, e - 1);
            assert_eq!(
                big_cmp(&l, &r),
                std::cmp::Ordering::Greater,
                "entry {i} high"
            );
        }
    }

    fn digits_of(v: f64) -> (String, i32) {
        let mut out = [0u8; 20];
        let (n, k) = grisu2(v, &mut out);
        (String::from_utf8(out[..n].to_vec()).unwrap(), k)
    }

    #[test]
    fn simple_values() {
        assert_eq!(digits_of(0.1), ("1".into(), -1));
        assert_eq!(digits_of(3.5), ("35".into(), -1));
        assert_eq!(digits_of(1e100), ("1".into(), 100));
        assert_eq!(digits_of(5e-324), ("5".into(), -324));
        assert_eq!(digits_of(f64::MAX), ("17976931348623157".into(), 292));
        assert_eq!(digits_of(0.1 + 0.2), ("30000000000000004".into(), -17));
    }
}
