//! Big values leave the keyspace on the request path but are freed in steps between requests
//! (lazyfree.rs): INFO memory's `lazyfreed_objects` counts them. Small ones are freed on the
//! spot and not counted.

use crate::common::Server;
use std::time::{Duration, Instant};

fn lazyfreed(c: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("lazyfreed_objects:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn until_lazyfreed(c: &mut redis::Connection, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while lazyfreed(c) < n {
        assert!(
            Instant::now() < deadline,
            "lazyfreed_objects never reached {n}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn big_hash(c: &mut redis::Connection, key: &str, fields: usize) {
    let pairs: Vec<(String, String)> = (0..fields).map(|i| (format!("f{i}"), "v".into())).collect();
    let _: () = redis::cmd("HSET").arg(key).arg(&pairs).query(c).unwrap();
}

#[test]
fn big_values_are_freed_in_the_background() {
    let s = Server::start(&[]);
    let mut c = s.client();
    assert_eq!(lazyfreed(&mut c), 0);
    // Small: freed at once, not counted.
    big_hash(&mut c, "small", 10);
    let _: i64 = redis::cmd("DEL").arg("small").query(&mut c).unwrap();
    // DEL, UNLINK, an overwrite and an expiry of big hashes, a big set and a big list.
    big_hash(&mut c, "h1", 5000);
    let n: i64 = redis::cmd("DEL").arg("h1").query(&mut c).unwrap();
    assert_eq!(n, 1);
    until_lazyfreed(&mut c, 1);
    big_hash(&mut c, "h2", 5000);
    let _: i64 = redis::cmd("UNLINK").arg("h2").query(&mut c).unwrap();
    until_lazyfreed(&mut c, 2);
    big_hash(&mut c, "h3", 5000);
    let _: () = redis::cmd("SET")
        .arg("h3")
        .arg("now a string")
        .query(&mut c)
        .unwrap();
    until_lazyfreed(&mut c, 3);
    big_hash(&mut c, "h4", 5000);
    let _: i64 = redis::cmd("PEXPIRE")
        .arg("h4")
        .arg(1)
        .query(&mut c)
        .unwrap();
    until_lazyfreed(&mut c, 4); // by the active expiry cycle
    let members: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
    let _: i64 = redis::cmd("SADD")
        .arg("s")
        .arg(&members)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("RPUSH")
        .arg("l")
        .arg(&members)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("DEL").arg("s").arg("l").query(&mut c).unwrap();
    until_lazyfreed(&mut c, 6);
    let _: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(lazyfreed(&mut c), 6, "the small hash was not counted");
}
