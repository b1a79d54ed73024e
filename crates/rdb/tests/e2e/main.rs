//! The RDB crate's integration tests, one test binary (four binaries each compiled the shared
//! helpers and proptest's generics and were linked on their own).
//!
//! Layout: `common/` (fixture readers, a redis-server harness, a seeded RNG), `fixtures`
//! (every fixture file and DUMP payload decoded against its manifest), `fixture_bytes` (the
//! encodings inside the fixtures, byte by byte), `roundtrip` (encode then decode, property
//! tests), `redis_loads_ours` (what Darner writes, loaded by Debian's redis-server).

mod common;

mod fixture_bytes;
mod fixtures;
mod redis_loads_ours;
mod roundtrip;
