//! Darner's end-to-end tests in Rust: each module starts the real `darner` binary (through
//! `common::Server`) and speaks to it over TCP, with a raw RESP client or the `redis` crate.
//!
//! Layout: `common/` (the server harness and the raw client), then one module per command
//! group or subsystem. They are one test binary rather than one per file: the 22 binaries
//! each compiled the harness and the `redis` crate's generics and were linked one by one,
//! some 160 s of CPU in a clean CI build; one binary is a fraction of that.

mod common;

mod blocking;
mod connection;
mod core;
mod generic;
mod geo;
mod hash;
mod hash_ttl;
mod hyperloglog;
mod lazyfree;
mod list;
mod listen;
mod notifications;
mod pubsub;
mod scheduler;
mod server;
mod set;
mod set_ttl;
mod sort;
mod sorted_set;
mod stream;
mod string;
mod tracking;
