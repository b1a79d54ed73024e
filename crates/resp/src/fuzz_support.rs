//! The checks run by the cargo-fuzz target (`fuzz/fuzz_targets/decode.rs`)
//! and by its stable stand-in test. Not part of the API.

use crate::{decode, encode, Frame, Limits, ProtocolError, RequestParser};

/// How a byte stream ended after feeding it to a [`RequestParser`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// A protocol error (the connection would be closed).
    Error(ProtocolError),
    /// No error; this many bytes were left unconsumed.
    Pending(usize),
}

/// Requests (inline flag, arguments) parsed from a stream, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Parsed requests in order.
    pub requests: Vec<(bool, Vec<Vec<u8>>)>,
    /// How the stream ended.
    pub end: End,
}

/// Feeds `chunks` one after another to a fresh parser the way a server
/// does (append, parse until `None`, drop consumed bytes). With
/// `drop_skipped`, also drops skipped bytes via
/// [`RequestParser::take_skipped`] (then the pending count can differ).
pub fn run_parser<'a>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
    limits: &Limits,
    drop_skipped: bool,
) -> Outcome {
    let mut p = RequestParser::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut requests = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match p.parse(&buf, limits) {
                Ok(Some(req)) => {
                    assert!(req.consumed > 0 && req.consumed <= buf.len());
                    assert!(!req.args.is_empty());
                    let args = req.args.iter().map(|a| a.as_slice(&buf).to_vec()).collect();
                    requests.push((req.inline, args));
                    buf.drain(..req.consumed);
                }
                Ok(None) => {
                    if let Some(n) = p.bytes_needed() {
                        assert!(n > 0, "bytes_needed is 0 while waiting");
                    }
                    if drop_skipped {
                        let n = p.take_skipped();
                        assert!(n <= buf.len());
                        buf.drain(..n);
                    }
                    break;
                }
                Err(e) => {
                    // Errors are final and stable.
                    assert_eq!(p.parse(&buf, limits), Err(e.clone()));
                    return Outcome {
                        requests,
                        end: End::Error(e),
                    };
                }
            }
        }
    }
    Outcome {
        requests,
        end: End::Pending(buf.len()),
    }
}

fn has_nan(f: &Frame) -> bool {
    match f {
        Frame::Double(d) => d.is_nan(),
        Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => v.iter().any(has_nan),
        Frame::Map(v) | Frame::Attribute(v) => v.iter().any(|(k, x)| has_nan(k) || has_nan(x)),
        _ => false,
    }
}

/// Checks [`decode`] on `data`: no panic, sane `consumed`, and a decoded
/// frame re-encodes to something that decodes to the same frame.
pub fn check_decode(data: &[u8]) {
    let small = Limits {
        max_bulk_len: 64,
        max_multibulk_len: 8,
        authenticated: false,
    };
    let _ = decode(data, &small);
    if let Ok(Some((frame, used))) = decode(data, &Limits::default()) {
        assert!(used > 0 && used <= data.len());
        assert_eq!(
            decode(&data[..used], &Limits::default())
                .ok()
                .flatten()
                .map(|(_, u)| u),
            Some(used)
        );
        if used > 1 {
            assert_eq!(decode(&data[..used - 1], &Limits::default()), Ok(None));
        }
        if !has_nan(&frame) {
            let mut wire = Vec::new();
            encode(&frame, &mut wire);
            let again = decode(&wire, &Limits::default());
            assert_eq!(again, Ok(Some((frame, wire.len()))));
        }
    }
}

/// Checks the [`RequestParser`] on `data`: fed whole, fed in chunks whose
/// sizes are drawn from `seed`, and fed byte by byte (short inputs), it
/// yields the same requests and the same error. (Inputs over 64 KiB are
/// exempt from the comparison: Redis's "too big" errors depend on how much
/// is buffered at once.)
pub fn check_parser(data: &[u8], seed: u64) {
    for limits in [
        Limits::default(),
        Limits {
            authenticated: false,
            ..Limits::default()
        },
    ] {
        let whole = run_parser([data], &limits, false);
        let mut chunks = Vec::new();
        let mut rest = data;
        let mut s = seed | 1;
        while !rest.is_empty() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let n = ((s % 17) as usize + 1).min(rest.len());
            chunks.push(&rest[..n]);
            rest = &rest[n..];
        }
        let chunked = run_parser(chunks.iter().copied(), &limits, (seed & 2) != 0);
        if data.len() <= crate::limits::INLINE_MAX_SIZE {
            if (seed & 2) != 0 {
                assert_eq!(whole.requests, chunked.requests);
                assert_eq!(
                    matches!(whole.end, End::Error(_)),
                    matches!(chunked.end, End::Error(_))
                );
                if let End::Error(e) = &whole.end {
                    assert_eq!(&chunked.end, &End::Error(e.clone()));
                }
            } else {
                assert_eq!(whole, chunked);
            }
            if data.len() <= 96 {
                let bytewise = run_parser(data.chunks(1), &limits, false);
                assert_eq!(whole, bytewise);
            }
        }
    }
}

/// The whole fuzz target body.
pub fn exercise(data: &[u8]) {
    check_decode(data);
    let seed = data.iter().take(8).fold(0x9e37_79b9_7f4a_7c15u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    check_parser(data, seed);
}
