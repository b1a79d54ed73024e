//! Fuzzes `darner_repl`: the replica's handshake and the full sync's snapshot reader never
//! panic on any bytes from a primary, and decide the same whether the bytes come whole or in
//! pieces (piece sizes taken from the input's first bytes).
//!
//! Run with `cargo +nightly fuzz run repl` from the repository root. The property tests
//! `arbitrary_bytes_never_panic_and_decide_the_same_in_pieces` and
//! `protocol_like_bytes_never_panic` in crates/repl/tests/props.rs run the same checks on
//! generated inputs under `cargo test`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    darner_repl::fuzz_support::exercise(data);
});
