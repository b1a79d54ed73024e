//! RESP request encoding and a minimal reply reader (sans-I/O).
//!
//! The reader only finds where each complete reply ends and what kind it is: the load
//! generator counts replies, errors, and GET hits (a bulk string) and misses (a null); it never
//! builds values. The connections speak RESP2 (no HELLO), so RESP3 attributes (`|`), which
//! only RESP3 connections get, are not read.

/// Appends `args` as one RESP array of bulk strings (the form clients send requests in).
pub fn encode_command(args: &[&[u8]], out: &mut Vec<u8>) {
    out.push(b'*');
    push_decimal(args.len(), out);
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        push_decimal(a.len(), out);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn push_decimal(v: usize, out: &mut Vec<u8>) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    let mut v = v;
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

/// What a complete top-level reply was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+...` (e.g. `+OK`), also RESP3 `#`, `,`, `(`.
    Simple,
    /// `-...` or RESP3 `!` blob error.
    Error,
    /// `:n`.
    Integer,
    /// A bulk string with a value (`$n` or RESP3 `=`): a GET hit.
    Bulk,
    /// `$-1`, `*-1` or RESP3 `_`: a GET miss.
    Null,
    /// An array, set, map, push or attribute, with all its elements.
    Aggregate,
}

/// The server sent something that is not RESP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed(pub String);

/// Where the line starting at `from` ends: the index of its `\r`, if the `\r\n` is in `buf`.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    let rel = buf.get(from..)?.windows(2).position(|w| w == b"\r\n")?;
    Some(from + rel)
}

fn parse_len(line: &[u8]) -> Result<i64, Malformed> {
    let s = std::str::from_utf8(line).map_err(|_| Malformed("length is not UTF-8".into()))?;
    s.parse::<i64>()
        .map_err(|_| Malformed(format!("bad length {s:?}")))
}

/// Reads one complete reply at the start of `buf`.
///
/// Returns `Ok(None)` while the reply is incomplete, `Ok(Some((kind, consumed)))` once it is
/// all there. Nested aggregates are walked without recursion.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, Malformed> {
    let mut pos = 0usize;
    // Elements still to read in each open aggregate, innermost last.
    let mut pending: Vec<u64> = Vec::new();
    let mut top: Option<Reply> = None;
    loop {
        let Some(&tag) = buf.get(pos) else {
            return Ok(None);
        };
        let Some(end) = line_end(buf, pos + 1) else {
            return Ok(None);
        };
        let line = &buf[pos + 1..end];
        pos = end + 2;
        let mut children: u64 = 0;
        let kind = match tag {
            b'+' | b'#' | b',' | b'(' => Reply::Simple,
            b'-' => Reply::Error,
            b':' => Reply::Integer,
            b'_' => Reply::Null,
            b'$' | b'=' | b'!' => {
                let n = parse_len(line)?;
                if n < 0 {
                    Reply::Null
                } else {
                    let n = n as usize;
                    let body_end = match pos.checked_add(n) {
                        Some(e) => e,
                        None => return Err(Malformed("bulk length overflows".into())),
                    };
                    if buf.len() < body_end + 2 {
                        return Ok(None);
                    }
                    if &buf[body_end..body_end + 2] != b"\r\n" {
                        return Err(Malformed("bulk string without CRLF".into()));
                    }
                    pos = body_end + 2;
                    if tag == b'!' {
                        Reply::Error
                    } else {
                        Reply::Bulk
                    }
                }
            }
            b'*' | b'~' | b'>' | b'%' => {
                let n = parse_len(line)?;
                if n < 0 {
                    Reply::Null
                } else {
                    let n = n as u64;
                    children = if tag == b'%' { n * 2 } else { n };
                    Reply::Aggregate
                }
            }
            other => return Err(Malformed(format!("unexpected type byte {other:#04x}"))),
        };
        if top.is_none() {
            top = Some(kind);
        }
        if children > 0 {
            pending.push(children);
        } else {
            // A leaf (or an empty aggregate): close every aggregate it completes.
            loop {
                match pending.last_mut() {
                    None => return Ok(Some((top.unwrap_or(kind), pos))),
                    Some(left) => {
                        *left -= 1;
                        if *left > 0 {
                            break;
                        }
                        pending.pop();
                    }
                }
            }
        }
    }
}

/// The elements of a complete reply that is an array of bulk strings (or nulls), such as an
/// MGET or ZRANGEBYSCORE reply, or a request. `Ok(None)` when the reply is another kind or
/// holds something else; `Err` when it is cut short or malformed.
pub fn bulk_array(reply: &[u8]) -> Result<Option<Vec<Option<&[u8]>>>, Malformed> {
    let short = || Malformed("array cut short".into());
    if reply.first() != Some(&b'*') {
        return Ok(None);
    }
    let end = line_end(reply, 1).ok_or_else(short)?;
    let n = parse_len(&reply[1..end])?;
    let mut pos = end + 2;
    let mut items = Vec::new();
    for _ in 0..n.max(0) {
        match reply.get(pos) {
            Some(b'$') => {}
            Some(b'_') => {
                items.push(None);
                pos += 3;
                continue;
            }
            Some(_) => return Ok(None),
            None => return Err(short()),
        }
        let end = line_end(reply, pos + 1).ok_or_else(short)?;
        let len = parse_len(&reply[pos + 1..end])?;
        pos = end + 2;
        if len < 0 {
            items.push(None);
            continue;
        }
        let body = pos
            .checked_add(len as usize)
            .filter(|&e| e + 2 <= reply.len())
            .ok_or_else(short)?;
        items.push(Some(&reply[pos..body]));
        pos = body + 2;
    }
    Ok(Some(items))
}

/// The value of a complete integer reply (`:n`, such as DEL's or EXISTS's); `None` for any
/// other reply.
pub fn integer(reply: &[u8]) -> Option<i64> {
    let body = reply.strip_prefix(b":")?.strip_suffix(b"\r\n")?;
    std::str::from_utf8(body).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_command_writes_a_resp_array_of_bulk_strings() {
        let mut out = Vec::new();
        encode_command(&[b"SET", b"key:1", b""], &mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$5\r\nkey:1\r\n$0\r\n\r\n");
    }

    #[test]
    fn parse_reply_reads_each_kind_and_its_length() {
        let cases: &[(&[u8], Reply)] = &[
            (b"+OK\r\n", Reply::Simple),
            (b"-ERR no\r\n", Reply::Error),
            (b":12\r\n", Reply::Integer),
            (b"$3\r\nabc\r\n", Reply::Bulk),
            (b"$0\r\n\r\n", Reply::Bulk),
            (b"$-1\r\n", Reply::Null),
            (b"*-1\r\n", Reply::Null),
            (b"_\r\n", Reply::Null),
            (b"*0\r\n", Reply::Aggregate),
            (b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n", Reply::Aggregate),
            (b"%1\r\n+k\r\n+v\r\n", Reply::Aggregate),
            (b"!3\r\nERR\r\n", Reply::Error),
        ];
        for (bytes, kind) in cases {
            let mut buf = bytes.to_vec();
            buf.extend_from_slice(b"+NEXT\r\n");
            assert_eq!(
                parse_reply(&buf),
                Ok(Some((*kind, bytes.len()))),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn parse_reply_waits_for_every_prefix_of_a_reply() {
        let full: &[u8] = b"*3\r\n$5\r\nhello\r\n*1\r\n:7\r\n-ERR x\r\n";
        for cut in 0..full.len() {
            assert_eq!(parse_reply(&full[..cut]), Ok(None), "cut at {cut}");
        }
        assert_eq!(parse_reply(full), Ok(Some((Reply::Aggregate, full.len()))));
    }

    #[test]
    fn bulk_array_reads_values_and_nulls() {
        let r: &[u8] = b"*3\r\n$1\r\na\r\n$-1\r\n$0\r\n\r\n";
        assert_eq!(
            bulk_array(r),
            Ok(Some(vec![Some(&b"a"[..]), None, Some(&b""[..])]))
        );
        assert_eq!(bulk_array(b"*0\r\n"), Ok(Some(vec![])));
        assert_eq!(bulk_array(b"+OK\r\n"), Ok(None));
        assert_eq!(bulk_array(b"*1\r\n:1\r\n"), Ok(None));
        assert!(bulk_array(b"*2\r\n$1\r\na\r\n").is_err());
        assert!(bulk_array(b"*1\r\n$5\r\nab\r\n").is_err());
    }

    #[test]
    fn integer_reads_integer_replies_only() {
        assert_eq!(integer(b":10\r\n"), Some(10));
        assert_eq!(integer(b":-3\r\n"), Some(-3));
        assert_eq!(integer(b"+10\r\n"), None);
        assert_eq!(integer(b":x\r\n"), None);
        assert_eq!(integer(b":1"), None);
    }

    #[test]
    fn parse_reply_rejects_garbage() {
        assert!(parse_reply(b"?x\r\n").is_err());
        assert!(parse_reply(b"|1\r\n+a\r\n+b\r\n").is_err());
        assert!(parse_reply(b"$abc\r\n").is_err());
        assert!(parse_reply(b"$1\r\nabXY").is_err());
    }
}
