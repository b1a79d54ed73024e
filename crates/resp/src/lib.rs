//! RESP (REdis Serialization Protocol) codec for Darner: request parsing,
//! reply writing and a generic RESP2/RESP3 frame codec. The crate does no
//! I/O ("sans-I/O"): it turns bytes into values and values into bytes, and
//! the server owns sockets and buffers. Reference semantics are Redis 7.2's
//! (`networking.c`, `util.c`), byte for byte where a client can tell.
//!
//! # Layout
//!
//! | module | what it is for |
//! | --- | --- |
//! | `request` | [`RequestParser`], [`Request`], [`Arg`]: the server's hot path, parsing client requests (multibulk `*2\r\n$3\r\nGET\r\n$1\r\nk\r\n` and inline `GET k\r\n`) with Redis's exact acceptance rules and error texts |
//! | `inline` | Redis's `sdssplitargs` rules for inline requests (quotes, `\xHH` escapes) |
//! | `reply` | [`ReplyWriter`]: what command handlers use to write replies, in RESP2 or RESP3 as Redis 7.2 writes them |
//! | `frame` | [`Frame`], [`decode`], [`encode`]: any RESP2/RESP3 value, for clients, tests, proxies and differential testing |
//! | [`num`] | Redis's number rules: [`parse_i64_strict`] (`string2ll`), [`parse_f64_strict`] (`string2d`), [`format_double`] (`d2string`), allocation-free integer formatting |
//! | `error` | [`ProtocolError`] and its exact reply texts |
//! | `limits` | [`Limits`] and Redis's protocol constants |
//! | `grisu` | the Grisu2 digit generation of Redis's bundled fpconv, so doubles print byte for byte as Redis prints them |
//! | `scan` | word-at-a-time byte search used by the parsers |
//! | [`fuzz_support`] | the body shared by the cargo-fuzz target and its stable stand-in test (hidden) |
//!
//! # Design
//!
//! **Resumable parsing.** A connection receives requests in arbitrary
//! pieces: a 100 MB `SET` arrives over thousands of reads, and a pipelining
//! client can split a request anywhere. Re-parsing a partial request from
//! its first byte after every read costs O(n²) on large requests and is an
//! easy denial of service. [`RequestParser`] therefore keeps its position
//! (which header it is in, how far it has scanned for the line terminator,
//! the arguments found so far) between calls, so every byte is examined
//! once: O(total bytes). The caller's side of the contract is simple: the
//! buffer passed to [`RequestParser::parse`] always starts at the first
//! unconsumed byte and only grows at the end until a request completes.
//! [`RequestParser::bytes_needed`] reports how much of a large argument is
//! still missing so the server can size its buffer once.
//!
//! **Ranges, not copies.** A parsed request's arguments are ranges into the
//! caller's buffer ([`Arg::Range`]) rather than new allocations: the parser
//! allocates only the argument vector. The server can then freeze the
//! consumed bytes into one [`Bytes`] and hand each argument out as a
//! zero-copy slice ([`Request::into_bytes`]), which is what makes a
//! `SET key <1 MB value>` store the value without copying it. Only inline
//! arguments whose bytes differ from the buffer (quotes, escapes) are
//! owned ([`Arg::Owned`]).
//!
//! **Redis's exact behaviour, including its quirks.** Clients and test
//! suites observe the parser's behaviour, so it mirrors Redis 7.2: the
//! request form is chosen by the first byte (`*` or inline); `*0`, `*-1`
//! and blank inline lines are skipped; the two bytes after a bulk payload
//! and after a header's `\r` are skipped unchecked; header lines and inline
//! requests may grow to 64 KiB ([`limits::INLINE_MAX_SIZE`]) without a
//! terminator; a NUL byte before a line's terminator makes the line
//! unterminable (Redis searches with `strchr`); an unauthenticated client
//! is limited to 10 arguments of 16 KiB. Errors carry Redis's exact text.
//!
//! **Hot path.** Header lines are found with a short byte loop followed by a
//! word-at-a-time (SWAR) search; integers are parsed in place; nothing is
//! allocated per argument; no more than [`MAX_ARGS_PREALLOC`] argument slots
//! are reserved for a count that has not been backed by data (so
//! `*1000000000\r\n` costs nothing).
//!
//! **Never panics on input.** Neither the parser nor the decoder panics on
//! any bytes (checked by property tests and a fuzz target); [`decode`]
//! limits nesting to [`MAX_DEPTH`] instead of overflowing the stack.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
mod frame;
mod grisu;
mod inline;
pub mod limits;
pub mod num;
mod reply;
mod request;
mod scan;

pub use bytes::Bytes;
pub use inline::split_args;

pub use error::ProtocolError;
pub use frame::{decode, encode, Frame, MAX_DEPTH};
pub use limits::Limits;
pub use num::{
    c_number_prefix, format_double, format_fpconv, parse_f64_strict, parse_i64_strict, strtoll,
    write_i64, write_u64,
};
pub use reply::ReplyWriter;
pub use request::{peek_second_arg, Arg, Request, RequestParser, MAX_ARGS_PREALLOC};

#[doc(hidden)]
pub mod fuzz_support;
