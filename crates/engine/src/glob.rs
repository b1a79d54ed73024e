//! Glob-style matching with Redis's rules (KEYS, SCAN MATCH, CONFIG GET, PUBSUB patterns).
//!
//! `*` any run, `?` any byte, `[abc]`, `[^abc]`, `[a-z]` (a reversed range is accepted), and
//! `\x` for a literal x. An unterminated `[` set ends at the end of the pattern; a trailing
//! backslash matches itself. Matching is iterative with single-star backtracking, so a hostile
//! pattern such as `*a*a*a*a*b` costs O(pattern × subject), never exponential time.

/// Matches one pattern token at `p[pi..]` against byte `c`. Returns the index after the token
/// when it matches, None when it does not.
fn match_token(p: &[u8], pi: usize, c: u8, nocase: bool) -> Option<usize> {
    let fold = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    match p[pi] {
        b'?' => Some(pi + 1),
        b'\\' if pi + 1 < p.len() => (fold(p[pi + 1]) == fold(c)).then_some(pi + 2),
        b'[' => {
            let mut i = pi + 1;
            let negate = i < p.len() && p[i] == b'^';
            if negate {
                i += 1;
            }
            let mut matched = false;
            loop {
                if i >= p.len() {
                    break; // unterminated set: ends with the pattern
                }
                if p[i] == b'\\' && i + 1 < p.len() {
                    if fold(p[i + 1]) == fold(c) {
                        matched = true;
                    }
                    i += 2;
                } else if p[i] == b']' {
                    i += 1;
                    break;
                } else if i + 2 < p.len() && p[i + 1] == b'-' {
                    let (mut lo, mut hi) = (fold(p[i]), fold(p[i + 2]));
                    if lo > hi {
                        std::mem::swap(&mut lo, &mut hi);
                    }
                    let fc = fold(c);
                    if fc >= lo && fc <= hi {
                        matched = true;
                    }
                    i += 3;
                } else {
                    if fold(p[i]) == fold(c) {
                        matched = true;
                    }
                    i += 1;
                }
            }
            (matched != negate).then_some(i)
        }
        b => (fold(b) == fold(c)).then_some(pi + 1),
    }
}

/// Whether `s` matches the glob `pattern`.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    // Redis's matcher never enters its loop for an empty subject, so "" matches only the empty
    // pattern (KEYS and SCAN special-case the pattern "*" themselves: it lists everything).
    if s.is_empty() {
        return pattern.is_empty();
    }
    let (mut pi, mut si) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None; // (pattern index after the star, subject index)
    while si < s.len() {
        if pi < pattern.len() && pattern[pi] == b'*' {
            while pi < pattern.len() && pattern[pi] == b'*' {
                pi += 1;
            }
            if pi == pattern.len() {
                return true;
            }
            star = Some((pi, si));
            continue;
        }
        if pi < pattern.len() {
            if let Some(next) = match_token(pattern, pi, s[si], nocase) {
                pi = next;
                si += 1;
                continue;
            }
        }
        match star {
            Some((sp, ss)) => {
                pi = sp;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    while pi < pattern.len() && pattern[pi] == b'*' {
        pi += 1;
    }
    pi == pattern.len()
}

#[cfg(test)]
mod tests {
    use super::glob_match as m;

    #[test]
    fn redis_cases() {
        // regression (differential test): an empty subject matches only an empty pattern.
        assert!(!m(b"*", b"", false));
        assert!(!m(b"**", b"", false));
        assert!(m(b"", b"", false));
        assert!(m(b"*", b"anything", false));
        assert!(m(b"h?llo", b"hello", false));
        assert!(!m(b"h?llo", b"hllo", false));
        assert!(m(b"h*llo", b"heeeello", false));
        assert!(m(b"h[ae]llo", b"hallo", false));
        assert!(!m(b"h[ae]llo", b"hillo", false));
        assert!(m(b"h[^e]llo", b"hallo", false));
        assert!(!m(b"h[^e]llo", b"hello", false));
        assert!(m(b"h[a-b]llo", b"hbllo", false));
        assert!(m(b"h[b-a]llo", b"hallo", false));
        assert!(m(b"h\\*llo", b"h*llo", false));
        assert!(!m(b"h\\*llo", b"hello", false));
        assert!(m(b"[abc", b"a", false));
        assert!(!m(b"[]", b"a", false));
        assert!(m(b"a\\", b"a\\", false));
        assert!(m(b"*a*b", b"xxaxxbxb", false));
        assert!(!m(b"*a*b", b"xxaxxbxc", false));
        assert!(m(b"MAXMEM*", b"maxmemory", true));
        assert!(!m(b"MAXMEM*", b"maxmemory", false));
        assert!(m(b"k[\\]]", b"k]", false));
    }

    #[test]
    fn hostile_pattern_is_fast() {
        let s = vec![b'a'; 10_000];
        let p = b"*a*a*a*a*a*a*a*a*a*a*a*a*b";
        assert!(!m(p, &s, false));
    }
}
