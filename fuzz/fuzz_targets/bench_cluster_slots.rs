//! Fuzzes `darner-bench --cluster`'s reading of a `CLUSTER SLOTS` reply (the node it was
//! pointed at answers it, so it is input like any other): any bytes give a slot map or an
//! error, never a panic, and a map routes every slot to one of its nodes.
//!
//! Run with `cargo +nightly fuzz run bench_cluster_slots` from the repository root. The
//! property tests `parse_never_panics_on_garbage` and `parse_never_panics_on_a_damaged_reply`
//! in crates/bench/src/cluster.rs run the same check on generated inputs under `cargo test`.

#![no_main]

use darner_bench::cluster::{request_key, SlotMap};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(map) = SlotMap::parse(data, "127.0.0.1") {
        for slot in [0u16, 1, 5460, 5461, 10922, 16383] {
            let _ = map.node_of_slot(slot);
        }
        let _ = map.node_of_key(data);
    }
    let _ = request_key(data);
});
