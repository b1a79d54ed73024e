//! Fuzzes `darner_rdb`'s decoder: any bytes as a DUMP payload (as given, and with a correct
//! footer so the object decoder sees them) decode or fail, never panic; and any bytes as a
//! file, fed to the incremental decoder in pieces whose sizes the input chooses, give exactly
//! what decoding them whole gives.
//!
//! Run with `cargo +nightly fuzz run rdb` from the repository root. The property tests in
//! crates/rdb (src/decode/tests.rs, tests/fixtures.rs) check the same on mutated payloads
//! under `cargo test`.

#![no_main]

use darner_rdb::{crc64::crc64, decode_dump_payload, decode_file, decode_file_in_pieces};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Piece sizes for the file decoder come from the first byte; the rest is the input.
    let Some((&seed, input)) = data.split_first() else {
        return;
    };

    // As a DUMP payload, raw (the footer check answers first almost always)...
    let _ = decode_dump_payload(input);
    // ...and as `[type][object]` with a valid footer.
    let mut payload = input.to_vec();
    payload.extend_from_slice(&12u16.to_le_bytes());
    let crc = crc64(0, &payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    let _ = decode_dump_payload(&payload);

    // As a file: the input after a header (or as is when it has one), with a valid trailer.
    let file = if input.starts_with(b"REDIS") {
        input.to_vec()
    } else {
        let mut f = b"REDIS0012".to_vec();
        f.extend_from_slice(input);
        f.push(0xff);
        let crc = crc64(0, &f);
        f.extend_from_slice(&crc.to_le_bytes());
        f
    };
    let whole = decode_file(&file);
    let pieces = [1 + (seed as usize % 7), 1 + seed as usize, 3];
    let split = decode_file_in_pieces(&file, &pieces, u64::MAX, 1 << 20);
    assert_eq!(whole, split);
    // Batched collections: the same keys, or an error for the same input.
    let batched = decode_file_in_pieces(&file, &pieces, (seed % 3) as u64, 1 + (seed as usize % 5));
    match (&whole, &batched) {
        (Ok(w), Ok(b)) => assert_eq!(w, b),
        (Err(_), Err(_)) => {}
        _ => panic!("whole {whole:?} batched {batched:?}"),
    }
});
