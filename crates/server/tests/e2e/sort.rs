//! End-to-end tests of SORT / SORT_RO over TCP (2 threads). Keys "{a}..." and "{b}..." live
//! on different shards, so BY / GET lookups and STORE cross shards.

use crate::common::{cmd, Raw, Server};
use redis::Connection;

const WRONG: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

/// Sends each command (words split on spaces) and checks the exact reply.
fn check(r: &mut Raw, cases: &[(&str, &str)]) {
    for (req, want) in cases {
        let args: Vec<&[u8]> = req.split(' ').map(str::as_bytes).collect();
        r.roundtrip(&cmd(&args), want.as_bytes());
    }
}

fn sort(c: &mut Connection, args: &str) -> Vec<Option<String>> {
    let mut q = redis::cmd("SORT");
    for a in args.split(' ') {
        q.arg(a);
    }
    q.query(c).unwrap()
}

#[test]
fn byte_exact_replies_and_errors() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    check(
        &mut r,
        &[
            ("RPUSH l 3 1 2 10", ":4\r\n"),
            (
                "SORT l",
                "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n",
            ),
            ("SORT l DESC LIMIT 1 2", "*2\r\n$1\r\n3\r\n$1\r\n2\r\n"),
            (
                "SORT l ALPHA",
                "*4\r\n$1\r\n1\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n3\r\n",
            ),
            ("SORT l LIMIT -5 1", "*1\r\n$1\r\n1\r\n"),
            ("SORT l LIMIT 9 1", "*0\r\n"),
            ("SORT l LIMIT 0 0", "*0\r\n"),
            ("SORT l LIMIT 2 -3", "*2\r\n$1\r\n3\r\n$2\r\n10\r\n"),
            (
                "SORT l LIMIT x 1",
                "-ERR value is not an integer or out of range\r\n",
            ),
            ("SORT l LIMIT 1", "-ERR syntax error\r\n"),
            ("SORT l FOO", "-ERR syntax error\r\n"),
            ("SORT_RO l STORE d", "-ERR syntax error\r\n"),
            (
                "SORT_RO l DESC",
                "*4\r\n$2\r\n10\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n",
            ),
            ("SORT missing", "*0\r\n"),
            ("SET str x", "+OK\r\n"),
            ("SORT str", WRONG),
            ("SORT str FOO", "-ERR syntax error\r\n"),
            ("RPUSH bad 1 x", ":2\r\n"),
            (
                "SORT bad",
                "-ERR One or more scores can't be converted into double\r\n",
            ),
            ("SORT bad BY nosort", "*2\r\n$1\r\n1\r\n$1\r\nx\r\n"),
            ("SORT bad BY nosort DESC", "*2\r\n$1\r\nx\r\n$1\r\n1\r\n"),
            (
                "SORT l GET nokey_* GET #",
                "*8\r\n$-1\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n$-1\r\n$1\r\n3\r\n$-1\r\n$2\r\n10\r\n",
            ),
            ("SORT l STORE {b}d", ":4\r\n"),
            (
                "LRANGE {b}d 0 -1",
                "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n",
            ),
            ("OBJECT ENCODING {b}d", "$8\r\nlistpack\r\n"),
            ("ZADD z 2 b 1 a 3 c", ":3\r\n"),
            ("OBJECT ENCODING z", "$8\r\nlistpack\r\n"),
            (
                "SORT z BY nosort DESC LIMIT 1 5",
                "*2\r\n$1\r\nb\r\n$1\r\na\r\n",
            ),
            // Redis converts a sorted set it sorts to a skiplist.
            ("OBJECT ENCODING z", "$8\r\nskiplist\r\n"),
        ],
    );
}

#[test]
fn resp3_null_for_missing_get() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let _: () = redis::cmd("RPUSH").arg("l").arg(1).query(&mut c).unwrap();
    let mut r = s.raw();
    // HELLO 3 reply is long: switch with a pipeline and read the SORT reply after it.
    let mut req = cmd(&[b"HELLO", b"3"]);
    req.extend(cmd(&[b"PING"]));
    r.send(&req);
    // Read until the PING reply arrives (the HELLO map ends before it).
    let mut got = Vec::new();
    while !got.ends_with(b"+PONG\r\n") {
        got.extend(r.read_n(1));
    }
    r.roundtrip(
        &cmd(&[b"SORT", b"l", b"GET", b"nokey_*", b"GET", b"#"]),
        b"*2\r\n_\r\n$1\r\n1\r\n",
    );
}

#[test]
fn by_and_get_across_shards() {
    let s = Server::start(&[]);
    let mut c = s.client();
    // 200 elements; weight keys {i}w spread over both shards; weights reverse the order.
    let n = 200;
    let elems: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    let _: () = redis::cmd("RPUSH")
        .arg("src")
        .arg(&elems)
        .query(&mut c)
        .unwrap();
    for i in 0..n {
        let _: () = redis::cmd("MSET")
            .arg(format!("{{{i}}}w"))
            .arg(n - i)
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("HSET")
            .arg(format!("{{{i}}}h"))
            .arg("name")
            .arg(format!("n{i}"))
            .query(&mut c)
            .unwrap();
    }
    let got = sort(
        &mut c,
        "src BY {*}w LIMIT 0 3 GET # GET {*}h->name GET {*}w",
    );
    let want: Vec<Option<String>> = ["199", "n199", "1", "198", "n198", "2", "197", "n197", "3"]
        .iter()
        .map(|s| Some(s.to_string()))
        .collect();
    assert_eq!(got, want);
    let all = sort(&mut c, "src BY {*}w");
    assert_eq!(all.len(), n as usize);
    assert_eq!(all[0].as_deref(), Some("199"));
    assert_eq!(all[199].as_deref(), Some("0"));
    // ALPHA by hash field, and a store of GET results onto another shard.
    let n_stored: i64 = redis::cmd("SORT")
        .arg("src")
        .arg("BY")
        .arg("{*}h->name")
        .arg("ALPHA")
        .arg("LIMIT")
        .arg(0)
        .arg(3)
        .arg("GET")
        .arg("{*}h->name")
        .arg("GET")
        .arg("{*}missing")
        .arg("STORE")
        .arg("{b}out")
        .query(&mut c)
        .unwrap();
    assert_eq!(n_stored, 6);
    let stored: Vec<String> = redis::cmd("LRANGE")
        .arg("{b}out")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(stored, ["n0", "", "n1", "", "n10", ""]);
}

#[test]
fn store_replaces_clears_ttl_and_deletes_when_empty() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    check(
        &mut r,
        &[
            ("RPUSH {a}src 2 1", ":2\r\n"),
            ("SET {b}dst x EX 100", "+OK\r\n"),
            ("SORT {a}src STORE {b}dst", ":2\r\n"),
            ("TTL {b}dst", ":-1\r\n"),
            ("TYPE {b}dst", "+list\r\n"),
            ("SORT {a}src STORE {b}dst LIMIT 5 5", ":0\r\n"),
            ("EXISTS {b}dst", ":0\r\n"),
            ("SORT {a}src DESC STORE {a}src", ":2\r\n"),
            ("LRANGE {a}src 0 -1", "*2\r\n$1\r\n2\r\n$1\r\n1\r\n"),
            ("SADD {a}set b a c", ":3\r\n"),
            ("SORT {a}set BY nosort STORE {b}dst", ":3\r\n"),
            (
                "LRANGE {b}dst 0 -1",
                "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
            ),
            ("MULTI", "+OK\r\n"),
            ("SORT {a}src STORE {b}dst", "+QUEUED\r\n"),
            ("EXEC", "*1\r\n:2\r\n"),
        ],
    );
}

/// SORT locks every shard: the BY / GET lookups of one SORT see the writes of a cross-shard
/// MSET entirely or not at all.
#[test]
fn lookups_see_one_snapshot() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let _: () = redis::cmd("RPUSH")
        .arg("{a}l")
        .arg("a")
        .arg("b")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("MSET")
        .arg("{a}v")
        .arg(0)
        .arg("{b}v")
        .arg(0)
        .query(&mut c)
        .unwrap();
    let mut w = s.client();
    let writer = std::thread::spawn(move || {
        for i in 1..=400 {
            let _: () = redis::cmd("MSET")
                .arg("{a}v")
                .arg(i)
                .arg("{b}v")
                .arg(i)
                .query(&mut w)
                .unwrap();
        }
    });
    for _ in 0..400 {
        let got = sort(&mut c, "{a}l BY nosort GET {*}v");
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], got[1], "a SORT saw half of an MSET");
    }
    writer.join().unwrap();
}
