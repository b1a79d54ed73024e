//! Fuzzes `darner_aof`: the manifest parser and the AOF reader never panic on any bytes; a
//! manifest the parser accepts renders to bytes that parse back to it; and the reader gives
//! the same commands, offsets and ending (or error) whether the bytes come whole or in pieces
//! (piece sizes taken from the input's first bytes).
//!
//! Run with `cargo +nightly fuzz run aof` from the repository root. The property test
//! `arbitrary_bytes_never_panic_and_read_the_same_in_pieces` in crates/aof/tests/e2e/props.rs runs
//! the same checks on generated inputs under `cargo test`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    darner_aof::fuzz_support::exercise(data);
});
