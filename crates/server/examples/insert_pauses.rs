//! The longest single insert while a keyspace grows to 10,000,000 keys (segment splits are the
//! only O(segment) step; nothing is O(keyspace)). `cargo run --release --example insert_pauses`.
use darner_engine::{Clock, Db, Entry};
use std::time::Instant;

fn main() {
    let mut db = Db::new();
    let mut v = db.view(Clock::at(0));
    let mut worst = std::time::Duration::ZERO;
    let mut slow = 0u32;
    let t0 = Instant::now();
    for i in 0..10_000_000u32 {
        let k = format!("key:{i:010}");
        let t = Instant::now();
        v.set(Entry::new_str(
            k.as_bytes(),
            b"vvvvvvvvvvvvvvvv",
            None,
            false,
            0,
        ));
        let d = t.elapsed();
        if d.as_micros() > 100 {
            slow += 1;
        }
        if d > worst {
            worst = d;
            if d.as_millis() >= 1 {
                println!("new worst {:?} at key {}", d, i);
            }
        }
        if (i + 1) % 2_000_000 == 0 {
            println!(
                "{:>10} keys: worst insert so far {:?}, inserts over 100us: {slow}",
                i + 1,
                worst
            );
        }
    }
    println!("total {:?}", t0.elapsed());
}
