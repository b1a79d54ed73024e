//! End-to-end tests of client tracking across threads: invalidations from every shard reach a
//! client on another thread; a client that disconnects leaves nothing in the tables; the table
//! stays under `tracking-table-max-keys` (evicted keys are invalidated); and a load of 1,000
//! tracking clients and 100,000 tracked keys loses no invalidation. Replies and pushes are
//! compared byte for byte with redis-server in tests/test_tracking.py.

use crate::common::{cmd, Raw, Server};
use std::collections::HashSet;
use std::io::Read;
use std::time::{Duration, Instant};

fn info_field(c: &mut redis::Connection, field: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("all").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field}"))
        .trim()
        .parse()
        .unwrap()
}

fn eventually(mut cond: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "never saw: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A RESP3 connection with tracking on (and the given extra options).
fn tracker(s: &Server, opts: &[&[u8]]) -> Raw {
    let mut r = s.raw();
    r.hello3();
    let mut args: Vec<&[u8]> = vec![b"CLIENT", b"TRACKING", b"on"];
    args.extend_from_slice(opts);
    r.roundtrip(&cmd(&args), b"+OK\r\n");
    r
}

fn invalidation(key: &[u8]) -> Vec<u8> {
    let mut f = b">2\r\n$10\r\ninvalidate\r\n*1\r\n".to_vec();
    f.extend(format!("${}\r\n", key.len()).bytes());
    f.extend_from_slice(key);
    f.extend_from_slice(b"\r\n");
    f
}

/// Reads GET replies of missing keys (`_` in RESP3) for `n` requests.
fn read_nulls(r: &mut Raw, n: usize) {
    assert_eq!(r.read_n(3 * n), b"_\r\n".repeat(n));
}

/// Reads `n` single-key invalidation pushes and returns their keys.
fn read_invalidations(r: &mut Raw, keys: &[Vec<u8>]) -> HashSet<Vec<u8>> {
    let total: usize = keys.iter().map(|k| invalidation(k).len()).sum();
    let got = r.read_n(total);
    assert_eq!(got.len(), total, "invalidations missing");
    let mut out = HashSet::new();
    let mut at = 0;
    while at < got.len() {
        let head = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$";
        assert_eq!(&got[at..at + head.len()], head, "not an invalidation");
        at += head.len();
        let nl = got[at..].iter().position(|&b| b == b'\r').unwrap() + at;
        let len: usize = std::str::from_utf8(&got[at..nl]).unwrap().parse().unwrap();
        at = nl + 2;
        out.insert(got[at..at + len].to_vec());
        at += len + 2;
    }
    out
}

#[test]
fn invalidations_from_every_shard_reach_a_client_on_another_thread() {
    let s = Server::start(&[]);
    // Several tracking clients (spread over both threads), each reading keys of both shards.
    let keys: Vec<Vec<u8>> = (0..64).map(|i| format!("key:{i}").into_bytes()).collect();
    let mut trackers: Vec<Raw> = (0..4).map(|_| tracker(&s, &[])).collect();
    for t in trackers.iter_mut() {
        let mut pipe = Vec::new();
        for k in &keys {
            pipe.extend(cmd(&[b"GET", k]));
        }
        t.send(&pipe);
        read_nulls(t, keys.len());
    }
    let mut w = s.client();
    let mut p = redis::pipe();
    for k in &keys {
        p.cmd("SET").arg(k).arg("v").ignore();
    }
    let _: () = p.query(&mut w).unwrap();
    let want: HashSet<Vec<u8>> = keys.iter().cloned().collect();
    for t in trackers.iter_mut() {
        assert_eq!(read_invalidations(t, &keys), want);
    }
    // Forgotten after one invalidation: a second write sends nothing.
    let _: () = redis::cmd("SET")
        .arg("key:1")
        .arg("w")
        .query(&mut w)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("key:1")
        .arg("x")
        .query(&mut w)
        .unwrap();
    let t = &mut trackers[0];
    t.s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut b = [0u8; 64];
    assert!(
        t.s.read(&mut b).is_err(),
        "unexpected push after the key was forgotten"
    );
}

#[test]
fn a_client_that_disconnects_leaves_nothing_behind() {
    let s = Server::start(&["--hz", "100"]);
    let mut c = s.client();
    {
        let mut t = tracker(&s, &[]);
        let mut pipe = Vec::new();
        for i in 0..1000 {
            pipe.extend(cmd(&[b"GET", format!("k{i}").as_bytes()]));
        }
        t.send(&pipe);
        read_nulls(&mut t, 1000);
        eventually(
            || info_field(&mut c, "tracking_total_keys") == 1000,
            "1000 keys",
        );
        assert_eq!(info_field(&mut c, "tracking_total_items"), 1000);
        assert_eq!(info_field(&mut c, "tracking_clients"), 1);
    }
    eventually(
        || info_field(&mut c, "tracking_clients") == 0,
        "client gone",
    );
    eventually(
        || info_field(&mut c, "tracking_total_items") == 0,
        "its entries purged",
    );
    assert_eq!(info_field(&mut c, "tracking_total_keys"), 0);
}

#[test]
fn the_table_stays_under_tracking_table_max_keys() {
    let s = Server::start(&["--hz", "100", "--tracking-table-max-keys", "100"]);
    let mut c = s.client();
    let mut t = tracker(&s, &[]);
    let keys: Vec<Vec<u8>> = (0..1000).map(|i| format!("m{i}").into_bytes()).collect();
    let mut pipe = Vec::new();
    for k in &keys {
        pipe.extend(cmd(&[b"GET", k]));
    }
    t.send(&pipe);
    eventually(
        || info_field(&mut c, "tracking_total_keys") <= 100,
        "table back under its limit",
    );
    // The replies, and an invalidation for each evicted key (some may come between replies:
    // the cron evicts while the pipeline is answered).
    let evicted = keys.len() - info_field(&mut c, "tracking_total_keys") as usize;
    let (mut nulls, mut pushes) = (0, 0);
    let mut buf = Vec::new();
    // Generous: the loop ends as soon as everything came, and a full CI run (this binary's
    // servers beside pytest's on two cores) once took more than 5 s to deliver them.
    let deadline = Instant::now() + Duration::from_secs(30);
    while (nulls < keys.len() || pushes < evicted) && Instant::now() < deadline {
        buf.extend(t.read_n(1));
        loop {
            if buf.starts_with(b"_\r\n") {
                nulls += 1;
                buf.drain(..3);
            } else if let Some(end) = push_end(&buf) {
                pushes += 1;
                buf.drain(..end);
            } else {
                break;
            }
        }
    }
    assert_eq!(
        (nulls, pushes),
        (keys.len(), evicted),
        "table now {} keys; unparsed: {:?}",
        info_field(&mut c, "tracking_total_keys"),
        String::from_utf8_lossy(&buf[..buf.len().min(200)])
    );
}

/// The length of a complete single-key invalidation push at the start of `b`, if there is one.
fn push_end(b: &[u8]) -> Option<usize> {
    let head = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$";
    if b.len() < head.len() || !b.starts_with(head) {
        return None;
    }
    let rest = &b[head.len()..];
    let nl = rest.iter().position(|&c| c == b'\r')?;
    let len: usize = std::str::from_utf8(&rest[..nl]).ok()?.parse().ok()?;
    let end = head.len() + nl + 2 + len + 2;
    (b.len() >= end).then_some(end)
}

#[test]
fn a_thousand_tracking_clients_and_100k_keys_lose_nothing() {
    let s = Server::start(&[]);
    const CLIENTS: usize = 1000;
    const PER: usize = 100;
    let mut trackers: Vec<Raw> = (0..CLIENTS).map(|_| tracker(&s, &[])).collect();
    let key = |c: usize, j: usize| format!("load:{c}:{j}").into_bytes();
    for (c, t) in trackers.iter_mut().enumerate() {
        let mut pipe = Vec::new();
        for j in 0..PER {
            pipe.extend(cmd(&[b"GET", &key(c, j)]));
        }
        t.send(&pipe);
    }
    for t in trackers.iter_mut() {
        read_nulls(t, PER);
    }
    let mut w = s.client();
    assert_eq!(
        info_field(&mut w, "tracking_total_keys"),
        (CLIENTS * PER) as i64
    );
    for chunk in 0..CLIENTS / 100 {
        let mut p = redis::pipe();
        for c in chunk * 100..(chunk + 1) * 100 {
            for j in 0..PER {
                p.cmd("SET").arg(key(c, j)).arg("v").ignore();
            }
        }
        let _: () = p.query(&mut w).unwrap();
    }
    for (c, t) in trackers.iter_mut().enumerate() {
        let keys: Vec<Vec<u8>> = (0..PER).map(|j| key(c, j)).collect();
        let want: HashSet<Vec<u8>> = keys.iter().cloned().collect();
        assert_eq!(read_invalidations(t, &keys), want, "client {c}");
    }
    assert_eq!(info_field(&mut w, "tracking_total_keys"), 0);
}

#[test]
fn a_streamed_read_of_a_big_hash_is_tracked() {
    let s = Server::start(&[]);
    let mut w = s.client();
    let mut p = redis::pipe();
    for i in 0..20_000 {
        p.cmd("HSET")
            .arg("big")
            .arg(format!("f{i}"))
            .arg("v")
            .ignore();
    }
    let _: () = p.query(&mut w).unwrap();
    // Two clients (connections alternate between the two threads, so one reads the key on
    // its own thread and one on the other): HGETALL of 20,000 fields is streamed
    // (stream.rs), and must still be remembered.
    let mut ts: Vec<Raw> = (0..2).map(|_| tracker(&s, &[])).collect();
    let head = b"%20000\r\n";
    let body: usize = (0..20_000)
        .map(|i: usize| {
            let f = format!("f{i}");
            format!("${}\r\n{f}\r\n$1\r\nv\r\n", f.len()).len()
        })
        .sum();
    for t in ts.iter_mut() {
        t.send(&cmd(&[b"HGETALL", b"big"]));
        let mut got = Vec::new();
        while got.len() < head.len() + body {
            let more = t.read_n(1);
            assert!(!more.is_empty(), "HGETALL reply cut short");
            got.extend(more);
        }
        assert!(got.starts_with(head));
        assert_eq!(got.len(), head.len() + body);
    }
    let _: () = redis::cmd("HSET")
        .arg("big")
        .arg("f0")
        .arg("w")
        .query(&mut w)
        .unwrap();
    for t in ts.iter_mut() {
        assert_eq!(t.read_n(invalidation(b"big").len()), invalidation(b"big"));
    }
}
