//! Splitting of inline requests, following Redis's `sdssplitargs`.
//!
//! Rules (byte-for-byte what Redis does):
//! * blanks between arguments are C `isspace` bytes (space, `\t`, `\n`,
//!   `\v`, `\f`, `\r`); an unquoted argument ends only at space, `\t`, `\n`,
//!   `\r` or the end of the line (so `a\vb` is one argument);
//! * `"..."` understands `\xHH` and `\n \r \t \b \a`; any other escaped byte
//!   stands for itself;
//! * `'...'` understands only `\'`;
//! * a quote may start in the middle of an argument (`ab"c d"` is `abc d`),
//!   but a closing quote must be followed by a blank or the end of the line;
//! * an unterminated quote is an error.
//!
//! Unquoted arguments are returned as ranges of the input; arguments that
//! involved quotes are returned as owned bytes.

use crate::num::is_c_space;
use crate::request::Arg;

#[inline]
fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[inline]
fn ends_unquoted(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// Splits `line` (which never contains the request's final `\n`, nor a NUL
/// byte) and appends its arguments to `out`; ranges are offset by `base`.
/// Returns `Err(())` for unbalanced quotes.
pub(crate) fn split_inline(line: &[u8], base: usize, out: &mut Vec<Arg>) -> Result<(), ()> {
    let n = line.len();
    // The C code reads a NUL terminator past the end.
    let at = |j: usize| -> u8 { line.get(j).copied().unwrap_or(0) };
    let mut i = 0;
    loop {
        while i < n && is_c_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Ok(());
        }
        let start = i;
        while i < n && !ends_unquoted(line[i]) && line[i] != b'"' && line[i] != b'\'' {
            i += 1;
        }
        if i >= n || ends_unquoted(line[i]) {
            out.push(Arg::Range(base + start..base + i));
            i += 1; // skip the terminator (or step past the end)
            continue;
        }
        // The argument involves quotes: build it byte by byte.
        let mut cur = line[start..i].to_vec();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            let c = at(i);
            let mut done = false;
            if in_dq {
                if c == b'\\' && at(i + 1) == b'x' {
                    if let (Some(h), Some(l)) = (hex_digit(at(i + 2)), hex_digit(at(i + 3))) {
                        cur.push(h * 16 + l);
                        i += 3;
                    } else {
                        cur.push(b'x');
                        i += 1;
                    }
                } else if c == b'\\' && at(i + 1) != 0 {
                    i += 1;
                    cur.push(match at(i) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    let next = at(i + 1);
                    if next != 0 && !is_c_space(next) {
                        return Err(());
                    }
                    done = true;
                } else if c == 0 {
                    return Err(());
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if c == b'\\' && at(i + 1) == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    let next = at(i + 1);
                    if next != 0 && !is_c_space(next) {
                        return Err(());
                    }
                    done = true;
                } else if c == 0 {
                    return Err(());
                } else {
                    cur.push(c);
                }
            } else {
                match c {
                    b' ' | b'\t' | b'\n' | b'\r' | 0 => done = true,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    _ => cur.push(c),
                }
            }
            if i < n {
                i += 1;
            }
            if done {
                break;
            }
        }
        out.push(Arg::Owned(cur));
    }
}

/// [`split_inline`] into owned arguments: Redis's `sdssplitargs` for other line formats that
/// use it (the AOF manifest). `line` must hold no NUL byte (a C string). None for unbalanced
/// quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    split_inline(line, 0, &mut out).ok()?;
    Some(out.into_iter().map(|a| a.as_slice(line).to_vec()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &[u8]) -> Result<Vec<Vec<u8>>, ()> {
        split_args(line).ok_or(())
    }

    fn ok(line: &str, want: &[&str]) {
        let got = split(line.as_bytes()).unwrap_or_else(|_| panic!("{line:?} failed"));
        let want: Vec<Vec<u8>> = want.iter().map(|s| s.as_bytes().to_vec()).collect();
        assert_eq!(got, want, "{line:?}");
    }

    #[test]
    fn plain() {
        ok("", &[]);
        ok("   ", &[]);
        ok("PING", &["PING"]);
        ok("set a b", &["set", "a", "b"]);
        ok("  set   a\tb  ", &["set", "a", "b"]);
        ok("\x0b\x0cget k", &["get", "k"]);
        ok("a\x0bb", &["a\x0bb"]);
        ok("a\rb", &["a", "b"]);
    }

    #[test]
    fn double_quotes() {
        ok(r#"set a "b c""#, &["set", "a", "b c"]);
        ok(r#""""#, &[""]);
        ok(
            r#""a\nb\rc\td\be\af\"g\\h\qi""#,
            &["a\nb\rc\td\x08e\x07f\"g\\hqi"],
        );
        ok(r#""\x41\x6a\x4A""#, &["AjJ"]);
        ok(r#""\x4""#, &["x4"]);
        ok(r#""\xzz""#, &["xzz"]);
        ok(r#"ab"c d" e"#, &["abc d", "e"]);
        ok("\"a\"\x0bb", &["a", "b"]);
    }

    #[test]
    fn single_quotes() {
        ok(r"'a b'", &["a b"]);
        ok(r"'it\'s'", &["it's"]);
        ok(r"'a\nb'", &["a\\nb"]);
        ok(r#"'a"b'"#, &["a\"b"]);
        ok(r#""a'b""#, &["a'b"]);
    }

    #[test]
    fn unbalanced() {
        for line in [
            r#"""#,
            r#""abc"#,
            r#""abc"d"#,
            r#"'abc"#,
            r#"'abc'd"#,
            r#""abc\"#,
            r"'abc\'",
            r#"set "a"b"#,
        ] {
            assert!(split(line.as_bytes()).is_err(), "{line:?}");
        }
    }

    #[test]
    fn plain_args_are_ranges_quoted_are_owned() {
        let mut out = Vec::new();
        split_inline(br#"get "k""#, 10, &mut out).unwrap();
        assert_eq!(out, vec![Arg::Range(10..13), Arg::Owned(b"k".to_vec())]);
    }
}
