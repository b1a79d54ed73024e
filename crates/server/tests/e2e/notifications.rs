//! End-to-end tests of keyspace notifications: `expired` from the active expiry cycle on
//! every thread (keys nobody reads again), the quota-counter pattern (INCR + EXPIRE, then
//! `expired`), the flags from the command line, and silence when notifications are off. The
//! events of every command class are compared with redis-server in
//! tests/test_notifications.py.

use crate::common::Server;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

fn q(c: &mut redis::Connection, args: &[&str]) -> redis::Value {
    redis::cmd(args[0]).arg(&args[1..]).query(c).unwrap()
}

/// The next message's (channel, payload), waiting at most 5 s.
fn next(ps: &mut redis::PubSub) -> (String, String) {
    ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let m = ps.get_message().expect("a notification within 5 s");
    (m.get_channel_name().to_string(), m.get_payload().unwrap())
}

#[test]
fn active_expiry_notifies_keys_of_every_thread() {
    let s = Server::start(&[]);
    let mut c = s.client();
    q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ex"]);
    let mut sub = s.client();
    let mut ps = sub.as_pubsub();
    ps.subscribe("__keyevent@0__:expired").unwrap();
    // Keys over both shards (distinct hash slots), never read again: only the active cycle
    // can find them.
    let keys: BTreeSet<String> = (0..40).map(|i| format!("session:{i}")).collect();
    for k in &keys {
        q(&mut c, &["SET", k, "v", "PX", "30"]);
    }
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < keys.len() && Instant::now() < deadline {
        let (chan, key) = next(&mut ps);
        assert_eq!(chan, "__keyevent@0__:expired");
        assert!(seen.insert(key), "an expired key notified twice");
    }
    assert_eq!(seen, keys);
    // And none is left.
    assert_eq!(q(&mut c, &["DBSIZE"]), redis::Value::Int(0));
}

#[test]
fn quota_counter_gets_its_expired_event() {
    let s = Server::start(&[]);
    let mut c = s.client();
    q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KA"]);
    let mut sub = s.client();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__keyspace@0__:quota:*").unwrap();
    for user in ["alice", "bob"] {
        let key = format!("quota:{user}");
        q(&mut c, &["INCR", &key]);
        q(&mut c, &["INCR", &key]);
        q(&mut c, &["PEXPIRE", &key, "50"]);
    }
    let got: Vec<(String, String)> = (0..8).map(|_| next(&mut ps)).collect();
    // Each key's own events are in command order; the two keys' may interleave.
    for user in ["alice", "bob"] {
        let chan = format!("__keyspace@0__:quota:{user}");
        let mine: Vec<&str> = got
            .iter()
            .filter(|(c, _)| *c == chan)
            .map(|(_, e)| e.as_str())
            .collect();
        assert_eq!(mine, ["incrby", "incrby", "expire", "expired"], "{user}");
    }
}

#[test]
fn flags_from_the_command_line_and_silence_when_off() {
    let s = Server::start(&["--notify-keyspace-events", "KEA"]);
    let mut c = s.client();
    assert_eq!(
        q(&mut c, &["CONFIG", "GET", "notify-keyspace-events"]),
        redis::Value::Array(vec![
            redis::Value::BulkString(b"notify-keyspace-events".to_vec()),
            redis::Value::BulkString(b"AKE".to_vec()),
        ])
    );
    let mut sub = s.client();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__key*__:*").unwrap();
    ps.subscribe("marker").unwrap();
    q(&mut c, &["SET", "k", "v"]);
    assert_eq!(next(&mut ps), ("__keyspace@0__:k".into(), "set".into()));
    assert_eq!(next(&mut ps), ("__keyevent@0__:set".into(), "k".into()));
    q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    q(&mut c, &["SET", "k", "w"]);
    q(&mut c, &["DEL", "k"]);
    q(&mut c, &["SET", "t", "v", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    q(&mut c, &["GET", "t"]);
    q(&mut c, &["PUBLISH", "marker", "end"]);
    // Nothing was published before the marker.
    assert_eq!(next(&mut ps), ("marker".into(), "end".into()));
}
