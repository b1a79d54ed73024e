//! darner-bench: a closed- and open-loop load generator for RESP servers.
//!
//! Layout:
//! - [`proto`]: RESP request encoding and a minimal reply reader that counts complete replies
//!   in a byte buffer (errors, hits and misses apart); sans-I/O.
//! - [`cluster`]: `--cluster`: the slot map from a CLUSTER SLOTS reply and the node each
//!   request goes to; sans-I/O.
//! - [`keys`]: key-pattern generators (uniform, sequential, Gaussian, Zipf), deterministic
//!   from a seed; sans-I/O.
//! - [`mix`]: the command mix (SET:GET ratio, data size, keys per request for MSET/MGET) that
//!   picks and encodes each request.
//! - [`ycsb`]: YCSB's core workloads A–F as YCSB's Redis binding sends them (key choice,
//!   operation mix, the commands of each operation); sans-I/O.
//! - [`workload`]: a connection's operations (one command, or several in turn whose next one
//!   may depend on a reply), the interface between the generators and the driver; sans-I/O.
//! - [`latency`]: latency recording in an HdrHistogram, merged across threads.
//! - [`config`]: the command line.
//! - [`driver`]: the I/O: one thread per `--threads`, each driving its connections with mio,
//!   closed loop (`--pipeline` requests in flight per connection) or open loop (`--rate`).
//! - [`report`]: the result as a human table or one JSON object.
//!
//! `src/main.rs` is the binary: parse, run, print.

pub mod cluster;
pub mod config;
pub mod driver;
pub mod keys;
pub mod latency;
pub mod mix;
pub mod proto;
pub mod report;
pub mod workload;
pub mod ycsb;
