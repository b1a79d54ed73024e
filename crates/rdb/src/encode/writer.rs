//! The RDB's primitive items, as Redis writes them: length encoding, strings (with the
//! integer and LZF special encodings), binary doubles, millisecond times, and the two number
//! formats the object encodings borrow from Redis's utilities (canonical integers, the text of
//! a double in a sorted-set listpack).

use crate::lzf;

/// Lengths below this fit one byte (`00xxxxxx`).
const LEN_6BIT_MAX: u64 = (1 << 6) - 1;
/// Lengths below this fit two bytes (`01xxxxxx xxxxxxxx`).
const LEN_14BIT_MAX: u64 = (1 << 14) - 1;
/// `10000000` + 4 bytes big-endian.
const LEN_32BIT: u8 = 0x80;
/// `10000001` + 8 bytes big-endian.
const LEN_64BIT: u8 = 0x81;
/// `11xxxxxx`: a special string encoding follows; the low bits say which.
const ENC_INT8: u8 = 0xC0;
const ENC_INT16: u8 = 0xC1;
const ENC_INT32: u8 = 0xC2;
const ENC_LZF: u8 = 0xC3;

/// Strings this long or shorter may be integer-encoded (Redis tries `len <= 11`).
const INT_ENCODING_MAX_LEN: usize = 11;
/// LZF is only tried on strings longer than this (Redis: shorter ones never compress).
const LZF_MIN_LEN: usize = 20;
/// A compressed string must be at least this much shorter than the original.
const LZF_MIN_SAVING: usize = 4;

/// Appends `len` in the RDB's length encoding (6, 14, 32 or 64 bits).
pub fn write_len(out: &mut Vec<u8>, len: u64) {
    if len <= LEN_6BIT_MAX {
        out.push(len as u8);
    } else if len <= LEN_14BIT_MAX {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u32::MAX as u64 {
        out.push(LEN_32BIT);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(LEN_64BIT);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// The integer `s` spells, if it is the canonical decimal text of an i64: no sign other
/// than a leading `-`, no leading zeros, no spaces, not `-0` (Redis's `string2ll`, which
/// decides every integer encoding: RDB strings, listpack entries, intset members).
pub fn parse_canonical_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s {
        [b'0'] => return Some(0),
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 || !(b'1'..=b'9').contains(&digits[0]) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// Appends `v` as an int8/16/32-encoded string; false (nothing written) when it does not fit
/// 32 bits.
pub fn write_int_encoded(out: &mut Vec<u8>, v: i64) -> bool {
    if let Ok(b) = i8::try_from(v) {
        out.push(ENC_INT8);
        out.push(b as u8);
    } else if let Ok(h) = i16::try_from(v) {
        out.push(ENC_INT16);
        out.extend_from_slice(&h.to_le_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(ENC_INT32);
        out.extend_from_slice(&w.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// Appends a string the way Redis's `rdbSaveRawString` does: as an int8/16/32 when it is the
/// canonical text of an integer that fits, else LZF-compressed when `compression` is on, it is
/// longer than 20 bytes and compression saves at least 4 bytes, else verbatim.
pub fn write_string(out: &mut Vec<u8>, s: &[u8], compression: bool) {
    if s.len() <= INT_ENCODING_MAX_LEN {
        if let Some(v) = parse_canonical_i64(s) {
            if write_int_encoded(out, v) {
                return;
            }
        }
    }
    if compression && s.len() > LZF_MIN_LEN {
        // Compressed in place at the end of `out`, its header appended after it and rotated
        // to the front: no buffer of its own per string (the snapshot writes millions).
        let at = out.len();
        if lzf::compress_into(s, s.len() - LZF_MIN_SAVING, out) {
            let clen = out.len() - at;
            out.push(ENC_LZF);
            write_len(out, clen as u64);
            write_len(out, s.len() as u64);
            let header = out.len() - at - clen;
            out[at..].rotate_right(header);
            return;
        }
    }
    write_raw_string(out, s);
}

/// Appends a string verbatim (length + bytes), never integer-encoded or compressed.
pub fn write_raw_string(out: &mut Vec<u8>, s: &[u8]) {
    write_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Appends a double as 8 bytes little-endian IEEE-754 (RDB 8+ sorted-set scores).
pub fn write_binary_double(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(&v.to_bits().to_le_bytes());
}

/// Appends a unix time in milliseconds as 8 bytes little-endian.
pub fn write_ms(out: &mut Vec<u8>, ms: u64) {
    out.extend_from_slice(&ms.to_le_bytes());
}

/// The text Redis 7.0 stores for a score in a sorted-set listpack (its `d2string`): `inf`,
/// `-inf`, `0` / `-0`, the integer when the value is integral and within ±2^52, otherwise
/// C's `%.17g`. Redis 7.2 switched to the shortest round-trip text; both parse back to the
/// same double, and 7.0's form is what an RDB 10 file holds.
pub fn score_text(v: f64) -> Vec<u8> {
    const SAFE: f64 = 4_503_599_627_370_496.0; // 2^52
    if v.is_nan() {
        return b"nan".to_vec();
    }
    if v.is_infinite() {
        return if v < 0.0 {
            b"-inf".to_vec()
        } else {
            b"inf".to_vec()
        };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            b"-0".to_vec()
        } else {
            b"0".to_vec()
        };
    }
    if v > -(SAFE - 1.0) && v < SAFE && v == v.trunc() {
        return (v as i64).to_string().into_bytes();
    }
    format_g17(v).into_bytes()
}

/// C's `printf("%.17g", v)` for a finite, non-zero `v`.
fn format_g17(v: f64) -> String {
    const P: i32 = 17;
    // The exponent `%e` would print with P significant digits decides the style.
    let sci = format!("{:.*e}", (P - 1) as usize, v);
    let (mant, exp) = sci.split_once('e').expect("exponent");
    let x: i32 = exp.parse().expect("exponent digits");
    if !(-4..P).contains(&x) {
        let mant = strip_fraction_zeros(mant);
        let sign = if x < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", x.abs())
    } else {
        let fixed = format!("{:.*}", (P - 1 - x) as usize, v);
        strip_fraction_zeros(&fixed).to_string()
    }
}

/// Drops trailing zeros of a fraction, and the point when nothing is left after it.
fn strip_fraction_zeros(s: &str) -> &str {
    if !s.contains('.') {
        return s;
    }
    s.trim_end_matches('0').trim_end_matches('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn len_bytes(len: u64) -> Vec<u8> {
        let mut out = Vec::new();
        write_len(&mut out, len);
        out
    }

    #[test]
    fn length_encoding_at_every_boundary() {
        assert_eq!(len_bytes(0), [0x00]);
        assert_eq!(len_bytes(63), [0x3f]);
        assert_eq!(len_bytes(64), [0x40, 0x40]);
        assert_eq!(len_bytes(16383), [0x7f, 0xff]);
        assert_eq!(len_bytes(16384), [0x80, 0, 0, 0x40, 0]);
        assert_eq!(len_bytes(u32::MAX as u64), [0x80, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            len_bytes(u32::MAX as u64 + 1),
            [0x81, 0, 0, 0, 1, 0, 0, 0, 0]
        );
        assert_eq!(
            len_bytes(u64::MAX),
            [0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
    }

    #[test]
    fn canonical_integers_only() {
        for (s, v) in [
            ("0", Some(0)),
            ("7", Some(7)),
            ("-1", Some(-1)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("007", None),
            ("00", None),
            ("-0", None),
            ("+1", None),
            (" 1", None),
            ("1 ", None),
            ("1.5", None),
            ("1e3", None),
            ("-", None),
            ("", None),
            ("99999999999999999999", None),
        ] {
            assert_eq!(parse_canonical_i64(s.as_bytes()), v, "{s:?}");
        }
    }

    fn string_bytes(s: &[u8], compression: bool) -> Vec<u8> {
        let mut out = Vec::new();
        write_string(&mut out, s, compression);
        out
    }

    #[test]
    fn strings_take_the_integer_encodings_when_canonical_and_within_32_bits() {
        assert_eq!(string_bytes(b"0", true), [0xc0, 0]);
        assert_eq!(string_bytes(b"-128", true), [0xc0, 0x80]);
        assert_eq!(string_bytes(b"127", true), [0xc0, 0x7f]);
        assert_eq!(string_bytes(b"128", true), [0xc1, 0x80, 0]);
        assert_eq!(string_bytes(b"-32768", true), [0xc1, 0, 0x80]);
        assert_eq!(string_bytes(b"32768", true), [0xc2, 0, 0x80, 0, 0]);
        assert_eq!(string_bytes(b"-2147483648", true), [0xc2, 0, 0, 0, 0x80]);
        // Past 32 bits, and non-canonical texts, stay strings.
        assert_eq!(string_bytes(b"2147483648", true), b"\x0a2147483648");
        assert_eq!(string_bytes(b"007", true), b"\x03007");
        assert_eq!(string_bytes(b"-0", true), b"\x02-0");
        assert_eq!(string_bytes(b"", true), [0]);
    }

    #[test]
    fn strings_are_compressed_only_past_20_bytes_and_when_it_saves_4() {
        let a21 = [b'a'; 21];
        let got = string_bytes(&a21, true);
        assert_eq!(got[0], 0xc3);
        let mut rest = &got[1..];
        let clen = rest[0] as usize;
        assert_eq!(rest[1], 21);
        rest = &rest[2..];
        assert_eq!(rest.len(), clen);
        assert_eq!(lzf::decompress(rest, 21).unwrap(), a21);
        // 20 bytes are never compressed, nor is anything with compression off.
        assert_eq!(string_bytes(&[b'a'; 20], true)[0], 20);
        assert_eq!(string_bytes(&a21, false)[0], 21);
        // Incompressible data stays verbatim.
        let noise: Vec<u8> = (0..64u32)
            .map(|i| (i * 97 + 13) as u8 ^ (i >> 2) as u8)
            .collect();
        let got = string_bytes(&noise, true);
        assert_eq!(&got[..2], &[0x40, 64]);
        assert_eq!(&got[2..], &noise[..]);
    }

    #[test]
    fn score_text_is_redis_7_0_d2string() {
        for (v, s) in [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (-3.0, "-3"),
            (2.5, "2.5"),
            (-3.75, "-3.75"),
            (0.1, "0.10000000000000001"),
            (1e300, "1.0000000000000001e+300"),
            (5e-324, "4.9406564584124654e-324"),
            (1e-10, "1e-10"),
            (f64::MAX, "1.7976931348623157e+308"),
            (4503599627370496.0, "4503599627370496"),
            (4503599627370495.0, "4503599627370495"),
            (9007199254740992.0, "9007199254740992"),
            (1e17, "1e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(String::from_utf8(score_text(v)).unwrap(), s, "{v:e}");
        }
    }
}
