//! Fuzzes `darner_engine::lzf`: any bytes given to the decompressor with any expected length
//! give a stream of exactly that length or an error, never a panic; and what the compressor
//! writes decompresses to its input.
//!
//! Run with `cargo +nightly fuzz run lzf` from the repository root. The property tests in
//! crates/engine/src/lzf.rs check the same on generated inputs under `cargo test`.

#![no_main]

use darner_engine::lzf;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first two bytes are the length the caller expects (RDB and quicklist nodes store it).
    if let [a, b, stream @ ..] = data {
        let len = u16::from_le_bytes([*a, *b]) as usize;
        if let Ok(out) = lzf::decompress(stream, len) {
            assert_eq!(out.len(), len);
        }
    }
    if let Some(packed) = lzf::compress(data, data.len()) {
        assert_eq!(lzf::decompress(&packed, data.len()).as_deref(), Ok(data));
    }
});
