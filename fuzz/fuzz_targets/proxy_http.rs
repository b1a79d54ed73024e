//! Fuzzes the request head reader of `darner-proxy`'s Prometheus endpoint (`/metrics`, reachable
//! over the network): no panic, at most `MAX_HTTP_HEAD` bytes held, and the same answer whole,
//! in pieces (sizes taken from the input's first bytes) and byte by byte; also for the input
//! repeated past the 8 KiB limit, which random inputs seldom reach.
//!
//! Run with `cargo +nightly fuzz run proxy_http` from the repository root. The property test
//! `http_head_arbitrary_bytes_never_panic_and_cut_the_same` in crates/proxy/src/metrics.rs runs
//! the same checks on generated inputs under `cargo test`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    darner_proxy::fuzz_support::exercise_http(data);
});
