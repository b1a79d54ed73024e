//! Fuzzes `darner-proxy`'s config file reader (redis.conf syntax: quotes, `\xHH` escapes): any
//! text gives a config or an error, never a panic.
//!
//! Run with `cargo +nightly fuzz run proxy_config` from the repository root. The property test
//! `arbitrary_files_never_panic` in crates/proxy/src/config.rs runs the same check on generated
//! inputs under `cargo test`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    darner_proxy::fuzz_support::exercise_config(data);
});
