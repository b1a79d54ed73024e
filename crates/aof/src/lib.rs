//! Redis 7's multi-part append-only file, sans I/O: the manifest of an AOF directory
//! (`appenddirname`), the RESP command files it lists, and the rules by which Redis 7.2 loads,
//! truncates and writes them. No files, no sockets, no keyspace: the server reads the
//! directory, feeds bytes in, applies the commands that come out, and writes the bytes this
//! crate renders.
//!
//! # Layout
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`manifest`] | [`Manifest`]: parsing (`file <name> seq <n> type <b\|h\|i>` lines, Redis's quoting, validation and error texts), rendering, the file names Redis generates (`<appendfilename>.<seq>.base.rdb`, `.base.aof`, `.incr.aof`, `.manifest`), and the manifest's life: new incr file, rewrite done, history removed |
//! | [`reader`] | [`Reader`]: incremental reading of a RESP file (incr or base) into commands with their offsets, `#TS:` annotations, MULTI/EXEC and truncation ([`Ending`]) as `loadSingleAppendOnlyFile` handles them, format errors with their offsets, the log lines Redis writes; [`detect_format`] (RDB or RESP base) |
//! | [`merge`] | [`Merger`]: the shards' streams of commands merged into one log that agrees with each shard's order, multi-shard transactions as one block, tickets for acknowledging after the fsync |
//! | [`writer`] | [`Writer`]: commands rendered as Redis appends them, SELECT when the database changes, MULTI/EXEC around transactions, `#TS:` annotations |
//! | [`rewrite`] | a rewrite's base as commands (`aof-use-rdb-preamble no`): a key's value (`darner_rdb::Value`) as the commands that rebuild it, big collections element by element ([`rewrite::Collection`]), 64 elements per command |
//! | [`fuzz_support`] | the checks shared by the cargo-fuzz target and its stable stand-in test (hidden) |
//!
//! An AOF directory holds a manifest, at most one base file (an RDB when
//! `aof-use-rdb-preamble yes`, which the server hands to the RDB loader; RESP commands
//! otherwise, which [`rewrite`] renders and the reader reads like an incr file), and
//! incr files; loading reads the base, then each incr file in order. Only the last file may be
//! truncated ([`reader::TRUNCATED_NOT_LAST`]).
//!
//! # Why sans I/O
//!
//! The formats here are small; what makes AOF code hard is everything around them: files that
//! grow while they are read, a process killed between a write and an fsync, a rename that
//! must be atomic, a manifest that must never point at a file that is not there yet. Those are
//! the server's concerns, and they are different on every path that touches the files:
//! loading at start-up reads files front to back; the append path writes from a shard's event
//! loop under an fsync policy; a rewrite writes a base in the background while the manifest
//! changes under it; `redis-check-aof`-like tools and tests read files that a test cut in the
//! middle. If the format code did its own reading and writing it would have to serve all of
//! them, and each would bend it a little.
//!
//! So this crate only turns bytes into values and values into bytes. The reader takes bytes
//! in whatever pieces the caller happens to read (a 64 KiB buffer, a whole file, one byte at
//! a time) and gives the same commands for every split, which the property tests check and
//! the fuzz target hammers; nothing in it can block, and it can be run over a slice in a test
//! without a temporary directory. The writer appends to a `Vec<u8>` that the server flushes
//! when its fsync policy says so. The manifest is a value: the server copies it, changes the
//! copy (new base, new incr file), renders it, writes the bytes to a temporary file, fsyncs,
//! renames, and only then replaces its own copy, which is how Redis keeps the manifest
//! consistent with the directory after a crash at any point. Errors are data too: a truncated
//! file says where Redis would cut it and renders the exact lines Redis logs, and the server
//! decides, from `aof-load-truncated`, whether to cut and go on or to stop.
//!
//! The price is that the caller drives: it must call [`Reader::finish`] at the end of a file
//! (a short read and a clean end differ only there), and it owns the offsets it gets back.
//! Those are small duties next to a format that can be tested exhaustively on its own.

pub mod manifest;
pub mod merge;
pub mod reader;
pub mod rewrite;
pub mod writer;

#[doc(hidden)]
pub mod fuzz_support;

pub use bytes::Bytes;
pub use manifest::{AofInfo, FileType, Manifest, ManifestError, ManifestErrorKind};
pub use merge::{Cmd, Item, Merger, Output, Run};
pub use reader::{
    detect_format, read_all, tx_role, Ending, Entry, EntryKind, Event, FileFormat, FormatError,
    FormatErrorKind, Reader, TxRole,
};
pub use writer::{render_command, render_select, render_timestamp, Writer};
