//! The checks run by the cargo-fuzz targets `proxy_http` and `proxy_config`
//! (`fuzz/fuzz_targets/`) and by their stable stand-in property tests. Not part of the API.

use crate::config;
use crate::metrics::{HttpAnswer, HttpHead, MAX_HTTP_HEAD};

/// Feeds `chunks` one after another to a fresh [`HttpHead`], as the endpoint does, checking
/// after each that the buffer stays within [`MAX_HTTP_HEAD`]; the answer at the end of the
/// stream.
pub fn http_answer<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> HttpAnswer {
    let mut head = HttpHead::new();
    for chunk in chunks {
        let answer = head.feed(chunk);
        assert!(
            head.buffered() <= MAX_HTTP_HEAD,
            "{} bytes held",
            head.buffered()
        );
        if let Some(answer) = answer {
            return answer;
        }
    }
    head.at_eof()
}

/// `data`'s first 4 bytes give piece sizes (1 to 97, in turn); the rest is the stream. The
/// metrics endpoint's request head reader must not panic, must hold at most
/// [`MAX_HTTP_HEAD`] bytes, and must answer the same whole, in those pieces and byte by byte.
/// The stream is also checked repeated past the limit, which random inputs seldom reach.
pub fn exercise_http(data: &[u8]) {
    let (sizes, stream) = data.split_at(data.len().min(4));
    check_http(sizes, stream);
    if !stream.is_empty() {
        check_http(sizes, &stream.repeat(MAX_HTTP_HEAD / stream.len() + 2));
    }
}

fn check_http(sizes: &[u8], stream: &[u8]) {
    let whole = http_answer([stream]);
    let mut pieces = Vec::new();
    let mut rest = stream;
    let mut turn = 0;
    while !rest.is_empty() {
        let size = sizes
            .get(turn % sizes.len().max(1))
            .map_or(rest.len(), |&s| usize::from(s) % 97 + 1);
        let (piece, after) = rest.split_at(rest.len().min(size));
        pieces.push(piece);
        rest = after;
        turn += 1;
    }
    assert_eq!(http_answer(pieces), whole, "in pieces");
    assert_eq!(http_answer(stream.chunks(1)), whole, "byte by byte");
    // A complete head within the limit is never refused as too large, nor one past it taken.
    let within = &stream[..stream.len().min(MAX_HTTP_HEAD)];
    let complete = within.windows(4).any(|w| w == b"\r\n\r\n");
    assert_eq!(
        whole == HttpAnswer::TooLarge,
        !complete && stream.len() >= MAX_HTTP_HEAD,
        "{whole:?}"
    );
}

/// `data` (lossily UTF-8) as the proxy's config file: reading it never panics, whatever it
/// holds; every line either splits into words or is refused with a reason.
pub fn exercise_config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = config::parse_with(&["f".to_string()], |_| Ok(text.to_string()));
    for line in text.lines() {
        let _ = config::split_args(line);
    }
}
