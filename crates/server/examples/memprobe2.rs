fn main() {
    let r0 = darner_server::alloc::rss();
    let mut v: Vec<Box<[u8]>> = Vec::with_capacity(1_000_000);
    for _ in 0..1_000_000u32 {
        v.push(vec![1u8; 24].into_boxed_slice());
    }
    let r1 = darner_server::alloc::rss();
    println!(
        "rss +{:.1} B/key (8 of them the Vec)",
        (r1 - r0) as f64 / 1e6
    );
}
