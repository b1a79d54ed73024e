//! Fuzzes `darner_resp::decode` and `darner_resp::RequestParser`.
//!
//! Run with `cargo +nightly fuzz run decode` from the repository root. The
//! body is shared with the stable test `crates/resp/tests/fuzz_equivalent.rs`,
//! which runs it over 100,000 generated inputs.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    darner_resp::fuzz_support::exercise(data);
});
