//! Redis's replication protocol, sans I/O: what a primary and a replica say to each other
//! (Redis 7.2's `replication.c`), without sockets, files or a keyspace. The server owns the
//! connections, the snapshot and the command stream; this crate decides what the bytes mean
//! and what to answer.
//!
//! # Layout
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`history`] | [`History`]: the replication ID, the second ID a promotion keeps valid (PSYNC2), the offset, the backlog; the primary's answer to `PSYNC` ([`PsyncAnswer`]) with Redis's log lines; [`ReplId`] |
//! | [`backlog`] | [`Backlog`]: the last `repl-backlog-size` bytes of the stream, by offset, for partial resyncs |
//! | [`handshake`] | [`Handshake`]: the replica's side from `PING` to the answer to `PSYNC` (AUTH, REPLCONF listening-port / ip-address / capa, `SYNC` for a primary without PSYNC) |
//! | [`payload`] | [`PayloadReader`]: the full sync's snapshot as the replica receives it, framed by a length or by an EOF mark (diskless), in bounded memory; the headers a primary sends |
//! | [`replconf`] | `REPLCONF` options as a primary reads them, with Redis's error texts |
//! | `line` | reply lines, bounded |
//! | [`fuzz_support`] | the checks shared by the cargo-fuzz target and its stable stand-in test (hidden) |
//!
//! # Why a crate of its own
//!
//! Replication is where two servers must agree byte for byte: a Redis replica follows a
//! Darner primary and the other way round, so every line, every offset and every framing rule
//! has to be Redis's. Those rules are small and exact, and they are easiest to get right when
//! they can be tested one reply at a time, split at every byte, without two servers and a
//! network: a handshake fed its replies one byte at a time must send and decide exactly what
//! it does when they come in one piece, and a snapshot's end must be found wherever the reads
//! fall. The hard parts of replication are elsewhere (the snapshot taken without fork, one
//! ordered stream from many shards, applying that stream in order), and they belong to the
//! server; this crate keeps the protocol out of their way.
//!
//! Everything arriving here comes from another machine and is hostile until checked: lines
//! are bounded ([`line::MAX_LINE`]), a snapshot is passed through in pieces (never gathered),
//! and nothing panics on any input (the fuzz target `repl`).

pub mod backlog;
pub mod handshake;
pub mod history;
pub mod line;
pub mod payload;
pub mod replconf;

#[doc(hidden)]
pub mod fuzz_support;

pub use backlog::Backlog;
pub use handshake::{Handshake, Outcome};
pub use history::{History, PsyncAnswer, ReplId};
pub use payload::{Framing, PayloadReader};

/// A log line's level (Redis's LL_NOTICE and LL_WARNING).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Notice,
    Warning,
}
