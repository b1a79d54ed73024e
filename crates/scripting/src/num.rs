//! Number formatting as C's `printf("%.<p>g")` formats it: Lua 5.1's
//! `tostring` uses `%.14g`, `redis.call` turns number arguments into strings
//! with `%.17g`, and cjson encodes numbers with `%.14g`.

/// Appends `x` formatted as C's `%.<prec>g` (glibc spelling of the special
/// values: `inf`, `-inf`, `nan`, `-nan`).
pub fn fmt_g(x: f64, prec: usize, out: &mut Vec<u8>) {
    let prec = prec.max(1);
    if x.is_nan() {
        out.extend_from_slice(if x.is_sign_negative() {
            b"-nan"
        } else {
            b"nan"
        });
        return;
    }
    if x.is_infinite() {
        out.extend_from_slice(if x < 0.0 { b"-inf" } else { b"inf" });
        return;
    }
    if x == 0.0 {
        out.extend_from_slice(if x.is_sign_negative() { b"-0" } else { b"0" });
        return;
    }
    // The exponent %e would print decides between the two styles.
    let e = format!("{:.*e}", prec - 1, x);
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= prec as i32 {
        out.extend_from_slice(strip_zeros(mant).as_bytes());
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let a = exp.unsigned_abs();
        if a < 10 {
            out.push(b'0');
        }
        out.extend_from_slice(a.to_string().as_bytes());
    } else {
        let decimals = (prec as i32 - 1 - exp).max(0) as usize;
        let f = format!("{:.*}", decimals, x);
        out.extend_from_slice(strip_zeros(&f).as_bytes());
    }
}

/// `x` as `%.<prec>g` in a new string.
pub fn g_string(x: f64, prec: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(24);
    fmt_g(x, prec, &mut v);
    v
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// C's `(long long)x` as x86-64 computes it: out-of-range values and NaN
/// become `i64::MIN` (Redis replies `:-9223372036854775808` for
/// `return 0/0`).
pub fn c_double_to_i64(x: f64) -> i64 {
    /// 2^63, exactly representable.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if (-LIMIT..LIMIT).contains(&x) {
        x as i64
    } else {
        i64::MIN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(x: f64, p: usize) -> String {
        String::from_utf8(g_string(x, p)).unwrap()
    }

    #[test]
    fn matches_printf_g() {
        assert_eq!(g(1.0, 17), "1");
        assert_eq!(g(0.1, 17), "0.10000000000000001");
        assert_eq!(g(0.1, 14), "0.1");
        assert_eq!(g(3.5, 14), "3.5");
        assert_eq!(g(1e15, 14), "1e+15");
        assert_eq!(g(123456789012345.0, 17), "123456789012345");
        assert_eq!(
            g(1e100, 17),
            "1.0000000000000000e+100".replace(".0000000000000000", "")
        );
        assert_eq!(g(0.0001, 14), "0.0001");
        assert_eq!(g(0.00001, 14), "1e-05");
        assert_eq!(g(-2.5e-7, 3), "-2.5e-07");
        assert_eq!(g(f64::INFINITY, 14), "inf");
        assert_eq!(g(-f64::INFINITY, 14), "-inf");
        assert_eq!(g(-0.0, 14), "-0");
        assert_eq!(g(99999999999999.9, 14), "1e+14");
    }

    #[test]
    fn c_cast() {
        assert_eq!(c_double_to_i64(3.99), 3);
        assert_eq!(c_double_to_i64(-3.5), -3);
        assert_eq!(c_double_to_i64(f64::NAN), i64::MIN);
        assert_eq!(c_double_to_i64(1e300), i64::MIN);
        assert_eq!(c_double_to_i64(-1e300), i64::MIN);
    }
}
