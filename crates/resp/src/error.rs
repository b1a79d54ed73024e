//! Protocol errors and the exact text Redis replies with for each.

use std::fmt;

/// A protocol error. The request parser's errors carry Redis 7.2's exact
/// reply text (see [`ProtocolError::message`]); after one of them the server
/// sends the message and closes the connection. The remaining variants are
/// produced only by the generic frame decoder ([`crate::decode`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// `*<n>` is not a valid integer or exceeds the multibulk limit.
    InvalidMultibulkLength,
    /// `$<n>` is not a valid integer, is negative, or exceeds `max_bulk_len`.
    InvalidBulkLength,
    /// More than 10 arguments from a client that has not authenticated.
    UnauthenticatedMultibulkLength,
    /// An argument longer than 16384 bytes from a client that has not
    /// authenticated.
    UnauthenticatedBulkLength,
    /// An element of a multibulk request did not start with `$`; holds the
    /// byte found instead.
    ExpectedDollar(u8),
    /// No `\r` in the 64 KiB after `*`.
    TooBigMbulkCount,
    /// No `\r` in the 64 KiB after a bulk header starts.
    TooBigBulkCount,
    /// No `\n` in the 64 KiB of an inline request.
    TooBigInlineRequest,
    /// An inline request with an unterminated quote, or a closing quote not
    /// followed by a space.
    UnbalancedQuotes,
    /// Decoder: an unknown type byte at the start of a frame.
    InvalidTypeByte(u8),
    /// Decoder: a line or a bulk payload not followed by `\r\n`.
    ExpectedCrlf,
    /// Decoder: malformed `:` integer.
    InvalidInteger,
    /// Decoder: malformed `,` double.
    InvalidDouble,
    /// Decoder: `#` not followed by exactly `t` or `f`.
    InvalidBoolean,
    /// Decoder: `_` followed by something.
    InvalidNull,
    /// Decoder: malformed `(` big number.
    InvalidBigNumber,
    /// Decoder: `=` payload shorter than 4 bytes or without `:` at index 3.
    InvalidVerbatim,
    /// Decoder: streamed strings/aggregates (`$?`, `*?`, ...) are not
    /// supported.
    StreamedNotSupported,
    /// Decoder: aggregates nested deeper than [`crate::MAX_DEPTH`].
    NestingTooDeep,
    /// Decoder: a simple line longer than `max_bulk_len` without `\r\n`.
    LineTooLong,
}

impl ProtocolError {
    /// The error reply's text without the leading `-` and the final CRLF,
    /// e.g. `ERR Protocol error: invalid bulk length`. Exact for every byte
    /// except a non-ASCII byte in [`ProtocolError::ExpectedDollar`], which
    /// is shown as U+FFFD here; [`ProtocolError::message_bytes`] has the
    /// exact bytes Redis sends.
    pub fn message(&self) -> String {
        String::from_utf8_lossy(&self.message_bytes()).into_owned()
    }

    /// The exact bytes of the error reply, without the leading `-` and the
    /// final CRLF.
    pub fn message_bytes(&self) -> Vec<u8> {
        const P: &str = "ERR Protocol error: ";
        let tail: &str = match self {
            ProtocolError::InvalidMultibulkLength => "invalid multibulk length",
            ProtocolError::InvalidBulkLength => "invalid bulk length",
            ProtocolError::UnauthenticatedMultibulkLength => "unauthenticated multibulk length",
            ProtocolError::UnauthenticatedBulkLength => "unauthenticated bulk length",
            ProtocolError::ExpectedDollar(b) => {
                // addReplyErrorFormat turns CR and LF into spaces.
                let shown = if *b == b'\r' || *b == b'\n' { b' ' } else { *b };
                let mut v = Vec::with_capacity(48);
                v.extend_from_slice(P.as_bytes());
                v.extend_from_slice(b"expected '$', got '");
                v.push(shown);
                v.push(b'\'');
                return v;
            }
            ProtocolError::TooBigMbulkCount => "too big mbulk count string",
            ProtocolError::TooBigBulkCount => "too big bulk count string",
            ProtocolError::TooBigInlineRequest => "too big inline request",
            ProtocolError::UnbalancedQuotes => "unbalanced quotes in request",
            ProtocolError::InvalidTypeByte(b) => {
                let shown = if b.is_ascii_graphic() || *b == b' ' {
                    *b
                } else {
                    b'?'
                };
                let mut v = Vec::with_capacity(48);
                v.extend_from_slice(P.as_bytes());
                v.extend_from_slice(b"invalid frame type byte '");
                v.push(shown);
                v.push(b'\'');
                return v;
            }
            ProtocolError::ExpectedCrlf => "expected CRLF",
            ProtocolError::InvalidInteger => "invalid integer",
            ProtocolError::InvalidDouble => "invalid double",
            ProtocolError::InvalidBoolean => "invalid boolean",
            ProtocolError::InvalidNull => "invalid null",
            ProtocolError::InvalidBigNumber => "invalid big number",
            ProtocolError::InvalidVerbatim => "invalid verbatim string",
            ProtocolError::StreamedNotSupported => "streamed types are not supported",
            ProtocolError::NestingTooDeep => "nesting too deep",
            ProtocolError::LineTooLong => "line too long",
        };
        let mut v = Vec::with_capacity(P.len() + tail.len());
        v.extend_from_slice(P.as_bytes());
        v.extend_from_slice(tail.as_bytes());
        v
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for ProtocolError {}

#[cfg(test)]
mod tests {
    use super::ProtocolError as E;

    #[test]
    fn every_message_text() {
        let cases: &[(E, &str)] = &[
            (
                E::InvalidMultibulkLength,
                "ERR Protocol error: invalid multibulk length",
            ),
            (
                E::InvalidBulkLength,
                "ERR Protocol error: invalid bulk length",
            ),
            (
                E::UnauthenticatedMultibulkLength,
                "ERR Protocol error: unauthenticated multibulk length",
            ),
            (
                E::UnauthenticatedBulkLength,
                "ERR Protocol error: unauthenticated bulk length",
            ),
            (
                E::ExpectedDollar(b'x'),
                "ERR Protocol error: expected '$', got 'x'",
            ),
            (
                E::ExpectedDollar(b'*'),
                "ERR Protocol error: expected '$', got '*'",
            ),
            (
                E::ExpectedDollar(b'\r'),
                "ERR Protocol error: expected '$', got ' '",
            ),
            (
                E::ExpectedDollar(b'\n'),
                "ERR Protocol error: expected '$', got ' '",
            ),
            (
                E::TooBigMbulkCount,
                "ERR Protocol error: too big mbulk count string",
            ),
            (
                E::TooBigBulkCount,
                "ERR Protocol error: too big bulk count string",
            ),
            (
                E::TooBigInlineRequest,
                "ERR Protocol error: too big inline request",
            ),
            (
                E::UnbalancedQuotes,
                "ERR Protocol error: unbalanced quotes in request",
            ),
            (
                E::InvalidTypeByte(b'x'),
                "ERR Protocol error: invalid frame type byte 'x'",
            ),
            (
                E::InvalidTypeByte(0),
                "ERR Protocol error: invalid frame type byte '?'",
            ),
            (E::ExpectedCrlf, "ERR Protocol error: expected CRLF"),
            (E::InvalidInteger, "ERR Protocol error: invalid integer"),
            (E::InvalidDouble, "ERR Protocol error: invalid double"),
            (E::InvalidBoolean, "ERR Protocol error: invalid boolean"),
            (E::InvalidNull, "ERR Protocol error: invalid null"),
            (
                E::InvalidBigNumber,
                "ERR Protocol error: invalid big number",
            ),
            (
                E::InvalidVerbatim,
                "ERR Protocol error: invalid verbatim string",
            ),
            (
                E::StreamedNotSupported,
                "ERR Protocol error: streamed types are not supported",
            ),
            (E::NestingTooDeep, "ERR Protocol error: nesting too deep"),
            (E::LineTooLong, "ERR Protocol error: line too long"),
        ];
        for (e, text) in cases {
            assert_eq!(e.message(), *text);
            assert_eq!(e.message_bytes(), text.as_bytes());
            assert_eq!(e.to_string(), *text);
        }
    }

    #[test]
    fn expected_dollar_keeps_raw_high_byte() {
        let e = E::ExpectedDollar(0xff);
        assert_eq!(
            e.message_bytes(),
            b"ERR Protocol error: expected '$', got '\xff'"
        );
        assert_eq!(
            e.message(),
            "ERR Protocol error: expected '$', got '\u{fffd}'"
        );
    }
}
