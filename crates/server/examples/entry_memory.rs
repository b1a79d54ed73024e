//! Memory per key of the keyspace alone (no sockets): 1,000,000 keys `key:%08d` with
//! 16-byte values, RSS and allocator growth per key. `cargo run --release --example entry_memory`.
use darner_engine::{Clock, Db, Entry};
fn main() {
    let r0 = darner_server::alloc::rss();
    let u0 = darner_server::alloc::used_memory();
    let mut db = Db::new();
    let mut v = db.view(Clock::at(0));
    for i in 0..1_000_000u32 {
        let k = format!("key:{i:08}");
        v.set(Entry::new_str(
            k.as_bytes(),
            b"vvvvvvvvvvvvvvvv",
            None,
            false,
            0,
        ));
    }
    let r1 = darner_server::alloc::rss();
    let u1 = darner_server::alloc::used_memory();
    println!(
        "rss +{:.1} B/key, used +{:.1} B/key",
        (r1 - r0) as f64 / 1e6,
        (u1 - u0) as f64 / 1e6
    );
}
