//! End-to-end tests of PFADD, PFCOUNT and PFMERGE over TCP with the `redis` crate. Byte-level
//! agreement with Redis (the sparse and dense encodings, promotion, error texts) is checked by
//! the differential scenarios in tests/diff_scenarios_hyperloglog.py; these tests cover the
//! estimates, keys spread over threads, and what WATCH sees.

use crate::common::Server;
use redis::Value;

fn within(estimate: i64, truth: i64, rel: f64) -> bool {
    ((estimate - truth).abs() as f64) / (truth as f64) <= rel
}

#[test]
fn estimates_across_encodings_and_shards() {
    let s = Server::start(&[]);
    let mut c = s.client();
    // Keys a..h land on both threads' shards.
    let keys: Vec<String> = "abcdefgh".chars().map(|k| k.to_string()).collect();
    for (n, k) in keys.iter().enumerate() {
        let elems: Vec<String> = (0..(n + 1) * 2000).map(|i| format!("{k}:{i}")).collect();
        for chunk in elems.chunks(500) {
            let _: i64 = redis::cmd("PFADD").arg(k).arg(chunk).query(&mut c).unwrap();
        }
        let est: i64 = redis::cmd("PFCOUNT").arg(k).query(&mut c).unwrap();
        assert!(within(est, ((n + 1) * 2000) as i64, 0.02), "{k}: {est}");
    }
    // The union of disjoint sets over every shard, without and with a missing key.
    let total: i64 = (1..=8).map(|n| n * 2000).sum();
    let est: i64 = redis::cmd("PFCOUNT").arg(&keys).query(&mut c).unwrap();
    assert!(within(est, total, 0.02), "union {est}");
    let est2: i64 = redis::cmd("PFCOUNT")
        .arg(&keys)
        .arg("missing")
        .query(&mut c)
        .unwrap();
    assert_eq!(est, est2);
    // PFMERGE into a key on one shard from keys on all shards gives the same registers.
    let ok: String = redis::cmd("PFMERGE")
        .arg("dest")
        .arg(&keys)
        .query(&mut c)
        .unwrap();
    assert_eq!(ok, "OK");
    let merged: i64 = redis::cmd("PFCOUNT").arg("dest").query(&mut c).unwrap();
    assert_eq!(merged, est);
    // Adding elements already counted changes nothing.
    let changed: i64 = redis::cmd("PFADD")
        .arg("a")
        .arg("a:1")
        .arg("a:2")
        .query(&mut c)
        .unwrap();
    assert_eq!(changed, 0);
    let t: String = redis::cmd("TYPE").arg("dest").query(&mut c).unwrap();
    assert_eq!(t, "string");
}

#[test]
fn errors_name_the_first_bad_key() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let _: () = redis::cmd("SET")
        .arg("str")
        .arg("plain")
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("PFADD").arg("h").arg("x").query(&mut c).unwrap();
    let e = redis::cmd("PFCOUNT")
        .arg("h")
        .arg("str")
        .query::<i64>(&mut c)
        .unwrap_err();
    assert_eq!(e.code(), Some("WRONGTYPE"));
    let e = redis::cmd("PFMERGE")
        .arg("out")
        .arg("h")
        .arg("str")
        .query::<String>(&mut c)
        .unwrap_err();
    assert_eq!(e.code(), Some("WRONGTYPE"));
    // A failed merge creates nothing.
    let n: i64 = redis::cmd("EXISTS").arg("out").query(&mut c).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn watch_sees_updates_and_cache_refreshes_only() {
    let s = Server::start(&[]);
    let mut a = s.client();
    let mut b = s.client();
    let _: i64 = redis::cmd("PFADD").arg("k").arg("x").query(&mut a).unwrap();
    let exec = |a: &mut redis::Connection, b: &mut redis::Connection, other: &[&str]| -> Value {
        let _: () = redis::cmd("WATCH").arg("k").query(a).unwrap();
        let _: Value = redis::cmd(other[0]).arg(&other[1..]).query(b).unwrap();
        let _: () = redis::cmd("MULTI").query(a).unwrap();
        let _: Value = redis::cmd("PING").query(a).unwrap();
        redis::cmd("EXEC").query(a).unwrap()
    };
    // The first PFCOUNT after an add refreshes the cached cardinality: a write, as in Redis.
    assert_eq!(exec(&mut a, &mut b, &["PFCOUNT", "k"]), Value::Nil);
    // With the cache valid, PFCOUNT changes nothing.
    assert_ne!(exec(&mut a, &mut b, &["PFCOUNT", "k"]), Value::Nil);
    // PFADD of an element already counted changes nothing either; a new one does.
    assert_ne!(exec(&mut a, &mut b, &["PFADD", "k", "x"]), Value::Nil);
    assert_eq!(exec(&mut a, &mut b, &["PFADD", "k", "y"]), Value::Nil);
    assert_eq!(exec(&mut a, &mut b, &["PFMERGE", "k", "k"]), Value::Nil);
}
