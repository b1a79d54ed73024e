//! End-to-end tests of the key commands (DEL ... OBJECT), with replies checked byte for byte.
//!
//! Every expectation here was checked against redis-server: set `GENERIC_VS_REDIS=<port>` to
//! run this file against a running redis-server instead of darner (it is FLUSHALLed; use
//! `--test-threads 1`). Against darner, servers run with 4 threads so keys cross shards; keys
//! `{a}..`, `{b}..`, `{c}..`, `{d}..` live on four different shards.

use crate::common::{cmd, Raw, Server};
use std::collections::HashSet;
use std::net::TcpStream;
use std::time::Duration;

/// darner with 4 threads, or the redis-server named by GENERIC_VS_REDIS.
struct Target {
    _server: Option<Server>,
    port: u16,
}

fn start() -> Target {
    if let Ok(p) = std::env::var("GENERIC_VS_REDIS") {
        let t = Target {
            _server: None,
            port: p.parse().expect("GENERIC_VS_REDIS=<port>"),
        };
        t.raw().roundtrip(&cmd(&[b"FLUSHALL"]), b"+OK\r\n");
        return t;
    }
    let s = Server::start(&["--threads", "4"]);
    Target {
        port: s.port,
        _server: Some(s),
    }
}

impl Target {
    fn raw(&self) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Raw { s }
    }

    fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

fn shard(key: &str) -> usize {
    darner_commands::key_slot(key.as_bytes()) as usize % 4
}

/// Sends each command (words split on spaces) and checks the exact reply.
fn check(r: &mut Raw, cases: &[(&str, &str)]) {
    for (req, want) in cases {
        let args: Vec<&[u8]> = req.split(' ').map(str::as_bytes).collect();
        r.roundtrip(&cmd(&args), want.as_bytes());
    }
}

fn pttl(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(c).unwrap()
}

#[test]
fn del_unlink_exists_touch_type() {
    assert_eq!(
        [shard("{a}1"), shard("{b}1"), shard("{c}1")],
        [3, 0, 1],
        "keys on different shards"
    );
    let t = start();
    let mut r = t.raw();
    check(
        &mut r,
        &[
            ("SET {a}1 x", "+OK\r\n"),
            ("SET {b}1 x", "+OK\r\n"),
            ("SET {c}1 x", "+OK\r\n"),
            ("EXISTS {a}1 {b}1 {c}1 {d}1", ":3\r\n"),
            ("EXISTS {a}1 {a}1 {b}1", ":3\r\n"),
            ("EXISTS nokey", ":0\r\n"),
            ("TOUCH {a}1 {a}1 {b}1 {d}1", ":3\r\n"),
            ("TYPE {a}1", "+string\r\n"),
            ("TYPE nokey", "+none\r\n"),
            ("DEL {a}1 {b}1 {a}1 {d}1", ":2\r\n"),
            ("EXISTS {a}1 {b}1 {c}1", ":1\r\n"),
            ("UNLINK {c}1 {c}1", ":1\r\n"),
            ("UNLINK {c}1", ":0\r\n"),
            (
                "DEL",
                "-ERR wrong number of arguments for 'del' command\r\n",
            ),
            (
                "UNLINK",
                "-ERR wrong number of arguments for 'unlink' command\r\n",
            ),
            (
                "EXISTS",
                "-ERR wrong number of arguments for 'exists' command\r\n",
            ),
            (
                "TOUCH",
                "-ERR wrong number of arguments for 'touch' command\r\n",
            ),
            (
                "TYPE a b",
                "-ERR wrong number of arguments for 'type' command\r\n",
            ),
        ],
    );
}

#[test]
fn rename_and_renamenx_within_and_across_shards() {
    let t = start();
    let mut r = t.raw();
    let mut c = t.client();
    check(
        &mut r,
        &[
            ("RENAME nokey {a}x", "-ERR no such key\r\n"),
            ("RENAMENX nokey {a}x", "-ERR no such key\r\n"),
            ("RENAME nokey nokey", "-ERR no such key\r\n"),
            // Across shards ({a} and {b}), keeping the TTL.
            ("SET {a}src v1", "+OK\r\n"),
            ("PEXPIRE {a}src 100000", ":1\r\n"),
            ("RENAME {a}src {b}dst", "+OK\r\n"),
            ("EXISTS {a}src", ":0\r\n"),
            ("GET {b}dst", "$2\r\nv1\r\n"),
        ],
    );
    let p = pttl(&mut c, "{b}dst");
    assert!((90_000..=100_000).contains(&p), "pttl {p}");
    check(
        &mut r,
        &[
            // Onto an existing key with a TTL: the source's (absent) TTL wins.
            ("SET {a}plain v2", "+OK\r\n"),
            ("RENAME {a}plain {b}dst", "+OK\r\n"),
            ("GET {b}dst", "$2\r\nv2\r\n"),
            ("PTTL {b}dst", ":-1\r\n"),
            // Within a shard.
            ("RENAME {b}dst {b}other", "+OK\r\n"),
            ("GET {b}other", "$2\r\nv2\r\n"),
            ("EXISTS {b}dst", ":0\r\n"),
            // Onto itself: OK when it exists, and nothing changes.
            ("RENAME {b}other {b}other", "+OK\r\n"),
            ("GET {b}other", "$2\r\nv2\r\n"),
            ("RENAMENX {b}other {b}other", ":0\r\n"),
            // RENAMENX across and within shards.
            ("SET {c}taken t", "+OK\r\n"),
            ("RENAMENX {b}other {c}taken", ":0\r\n"),
            ("GET {c}taken", "$1\r\nt\r\n"),
            ("GET {b}other", "$2\r\nv2\r\n"),
            ("SET {b}taken t", "+OK\r\n"),
            ("RENAMENX {b}other {b}taken", ":0\r\n"),
            ("SET {b}ttl x", "+OK\r\n"),
            ("PEXPIRE {b}ttl 100000", ":1\r\n"),
            ("RENAMENX {b}ttl {d}free", ":1\r\n"),
            ("EXISTS {b}ttl", ":0\r\n"),
            ("GET {d}free", "$1\r\nx\r\n"),
            ("RENAMENX {d}free {d}free2", ":1\r\n"),
            ("GET {d}free2", "$1\r\nx\r\n"),
            (
                "RENAME a",
                "-ERR wrong number of arguments for 'rename' command\r\n",
            ),
            (
                "RENAMENX a b c",
                "-ERR wrong number of arguments for 'renamenx' command\r\n",
            ),
        ],
    );
    let p = pttl(&mut c, "{d}free2");
    assert!((90_000..=100_000).contains(&p), "pttl {p}");
}

#[test]
fn copy_and_move_between_databases() {
    let t = start();
    let mut r = t.raw();
    let mut c = t.client();
    check(
        &mut r,
        &[
            ("SET {a}k 100", "+OK\r\n"),
            ("PEXPIRE {a}k 100000", ":1\r\n"),
            (
                "COPY {a}k {a}k",
                "-ERR source and destination objects are the same\r\n",
            ),
            (
                "COPY {a}k {a}k DB 0",
                "-ERR source and destination objects are the same\r\n",
            ),
            (
                "COPY nokey nokey",
                "-ERR source and destination objects are the same\r\n",
            ),
            ("COPY {a}k {b}k DB 16", "-ERR DB index is out of range\r\n"),
            ("COPY {a}k {b}k DB -1", "-ERR DB index is out of range\r\n"),
            (
                "COPY {a}k {b}k DB x",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (
                "COPY {a}k {b}k DB 2147483648",
                "-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
            ),
            ("COPY {a}k {b}k DB", "-ERR syntax error\r\n"),
            ("COPY {a}k {b}k REPLACE foo", "-ERR syntax error\r\n"),
            ("COPY nokey {b}k", ":0\r\n"),
            // Across shards, same database.
            ("COPY {a}k {b}k", ":1\r\n"),
            ("GET {b}k", "$3\r\n100\r\n"),
            ("OBJECT ENCODING {b}k", "$3\r\nint\r\n"),
            ("SET {b}k other", "+OK\r\n"),
            ("COPY {a}k {b}k", ":0\r\n"),
            ("GET {b}k", "$5\r\nother\r\n"),
            ("COPY {a}k {b}k replace", ":1\r\n"),
            ("GET {b}k", "$3\r\n100\r\n"),
            // Same key into another database.
            ("COPY {a}k {a}k DB 1", ":1\r\n"),
            ("COPY {a}k {a}k DB 1", ":0\r\n"),
            ("COPY {a}k {a}k db 1 REPLACE", ":1\r\n"),
            ("COPY {a}k {c}k REPLACE DB 2", ":1\r\n"),
            ("SELECT 1", "+OK\r\n"),
            ("GET {a}k", "$3\r\n100\r\n"),
            ("SELECT 2", "+OK\r\n"),
            ("GET {c}k", "$3\r\n100\r\n"),
        ],
    );
    // Copies keep the TTL.
    let p = pttl(&mut c, "{b}k");
    assert!((90_000..=100_000).contains(&p), "pttl {p}");
    check(
        &mut r,
        &[
            // MOVE from db 2.
            (
                "MOVE {c}k 2",
                "-ERR source and destination objects are the same\r\n",
            ),
            ("MOVE {c}k 16", "-ERR DB index is out of range\r\n"),
            ("MOVE {c}k -1", "-ERR DB index is out of range\r\n"),
            (
                "MOVE {c}k x",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (
                "MOVE {c}k -2147483649",
                "-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
            ),
            ("MOVE nokey 0", ":0\r\n"),
            ("MOVE {c}k 0", ":1\r\n"),
            ("EXISTS {c}k", ":0\r\n"),
            ("SET {c}k here", "+OK\r\n"),
            ("MOVE {c}k 0", ":0\r\n"),
            ("GET {c}k", "$4\r\nhere\r\n"),
            ("SELECT 0", "+OK\r\n"),
            ("GET {c}k", "$3\r\n100\r\n"),
            (
                "MOVE {c}k",
                "-ERR wrong number of arguments for 'move' command\r\n",
            ),
            (
                "COPY a",
                "-ERR wrong number of arguments for 'copy' command\r\n",
            ),
        ],
    );
    // MOVE keeps the TTL.
    let p = pttl(&mut c, "{c}k");
    assert!((90_000..=100_000).contains(&p), "pttl {p}");
}

#[test]
fn expire_option_matrix() {
    let t = start();
    let mut r = t.raw();
    let mut c = t.client();
    // (options, new TTL, reply with no TTL, reply with TTL 100) for EXPIRE k <new> <options>.
    let matrix: &[(&str, i64, &str, &str)] = &[
        ("", 50, ":1\r\n", ":1\r\n"),
        ("NX", 50, ":1\r\n", ":0\r\n"),
        ("XX", 50, ":0\r\n", ":1\r\n"),
        ("GT", 50, ":0\r\n", ":0\r\n"),
        ("GT", 200, ":0\r\n", ":1\r\n"),
        ("LT", 50, ":1\r\n", ":1\r\n"),
        ("LT", 200, ":1\r\n", ":0\r\n"),
        ("XX GT", 200, ":0\r\n", ":1\r\n"),
        ("XX LT", 50, ":0\r\n", ":1\r\n"),
        ("gt xx", 50, ":0\r\n", ":0\r\n"),
        ("nx nx", 50, ":1\r\n", ":0\r\n"),
    ];
    for (opts, new, no_ttl, with_ttl) in matrix {
        for (initial, want) in [(None, no_ttl), (Some(100), with_ttl)] {
            let mut req = format!("EXPIRE k {new}");
            if !opts.is_empty() {
                req = format!("{req} {opts}");
            }
            check(&mut r, &[("SET k v", "+OK\r\n")]);
            if let Some(secs) = initial {
                check(&mut r, &[(&format!("EXPIRE k {secs}"), ":1\r\n")]);
            }
            check(&mut r, &[(&req, want)]);
            let ttl: i64 = redis::cmd("TTL").arg("k").query(&mut c).unwrap();
            let expect = if *want == ":1\r\n" {
                *new
            } else {
                initial.unwrap_or(-1)
            };
            assert!(
                ttl == expect || ttl == expect - 1,
                "TTL {initial:?}; {req}: ttl {ttl}, want {expect}"
            );
        }
    }
    check(
        &mut r,
        &[
            ("EXPIRE nokey 100", ":0\r\n"),
            ("EXPIRE nokey 100 XX", ":0\r\n"),
            (
                "EXPIRE k 10 NX XX",
                "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
            ),
            (
                "EXPIRE k 10 NX GT",
                "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
            ),
            (
                "PEXPIRE k 10 LT NX",
                "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
            ),
            (
                "EXPIREAT k 10 GT LT",
                "-ERR GT and LT options at the same time are not compatible\r\n",
            ),
            ("EXPIRE k 10 foo", "-ERR Unsupported option foo\r\n"),
            // Options are checked before the time.
            ("EXPIRE k x foo", "-ERR Unsupported option foo\r\n"),
            (
                "EXPIRE k x",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (
                "EXPIRE k 1.5",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (
                "EXPIRE k 9223372036854775",
                "-ERR invalid expire time in 'expire' command\r\n",
            ),
            (
                "EXPIRE k -9223372036854776",
                "-ERR invalid expire time in 'expire' command\r\n",
            ),
            (
                "PEXPIRE k 9223372036854775807",
                "-ERR invalid expire time in 'pexpire' command\r\n",
            ),
            (
                "EXPIREAT k 9223372036854776",
                "-ERR invalid expire time in 'expireat' command\r\n",
            ),
            (
                "EXPIRE nokey 9223372036854775",
                "-ERR invalid expire time in 'expire' command\r\n",
            ),
            // A time in the past deletes the key (also through LT on a key without TTL).
            ("SET k v", "+OK\r\n"),
            ("EXPIRE k -1 GT", ":0\r\n"),
            ("EXPIRE k -1 LT", ":1\r\n"),
            ("EXISTS k", ":0\r\n"),
            ("SET k v", "+OK\r\n"),
            ("PEXPIRE k 0", ":1\r\n"),
            ("EXISTS k", ":0\r\n"),
            ("SET k v", "+OK\r\n"),
            ("EXPIREAT k 1", ":1\r\n"),
            ("EXISTS k", ":0\r\n"),
            ("SET k v", "+OK\r\n"),
            ("PEXPIREAT k 1000", ":1\r\n"),
            ("EXISTS k", ":0\r\n"),
            // Absolute times.
            ("SET k v", "+OK\r\n"),
            ("EXPIREAT k 4000000000", ":1\r\n"),
            ("EXPIRETIME k", ":4000000000\r\n"),
            ("PEXPIRETIME k", ":4000000000000\r\n"),
            ("PEXPIREAT k 4000000000123", ":1\r\n"),
            ("PEXPIRETIME k", ":4000000000123\r\n"),
            ("EXPIRETIME k", ":4000000000\r\n"),
            ("PEXPIREAT k 4000000000500", ":1\r\n"),
            ("EXPIRETIME k", ":4000000001\r\n"),
            ("EXPIREAT k 4000000001 GT", ":1\r\n"),
            ("EXPIREAT k 4000000000 GT", ":0\r\n"),
            ("EXPIREAT k 4000000000 LT", ":1\r\n"),
            ("PEXPIREAT k 9223372036854775807", ":1\r\n"),
            ("PEXPIRETIME k", ":9223372036854775807\r\n"),
            ("EXPIRETIME k", ":9223372036854776\r\n"),
            (
                "EXPIRE k",
                "-ERR wrong number of arguments for 'expire' command\r\n",
            ),
        ],
    );
}

#[test]
fn ttl_family_and_persist() {
    let t = start();
    let mut r = t.raw();
    let mut c = t.client();
    check(
        &mut r,
        &[
            ("TTL nokey", ":-2\r\n"),
            ("PTTL nokey", ":-2\r\n"),
            ("EXPIRETIME nokey", ":-2\r\n"),
            ("PEXPIRETIME nokey", ":-2\r\n"),
            ("SET k v", "+OK\r\n"),
            ("TTL k", ":-1\r\n"),
            ("PTTL k", ":-1\r\n"),
            ("EXPIRETIME k", ":-1\r\n"),
            ("PEXPIRETIME k", ":-1\r\n"),
            ("PERSIST k", ":0\r\n"),
            ("PERSIST nokey", ":0\r\n"),
            ("PEXPIRE k 100500", ":1\r\n"),
        ],
    );
    // TTL rounds to the nearest second: 100.5 s left -> 101 (or 100 a moment later).
    let ttl: i64 = redis::cmd("TTL").arg("k").query(&mut c).unwrap();
    assert!(ttl == 101 || ttl == 100, "ttl {ttl}");
    let p = pttl(&mut c, "k");
    assert!((99_000..=100_500).contains(&p), "pttl {p}");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let at: i64 = redis::cmd("PEXPIRETIME").arg("k").query(&mut c).unwrap();
    assert!((at - now_ms - 100_500).abs() < 5_000, "pexpiretime {at}");
    let at_s: i64 = redis::cmd("EXPIRETIME").arg("k").query(&mut c).unwrap();
    assert_eq!(at_s, (at + 500) / 1000);
    check(
        &mut r,
        &[
            ("PERSIST k", ":1\r\n"),
            ("TTL k", ":-1\r\n"),
            ("PERSIST k", ":0\r\n"),
            // A key that expires is gone for every command.
            ("SET k v", "+OK\r\n"),
            ("PEXPIRE k 30", ":1\r\n"),
        ],
    );
    std::thread::sleep(Duration::from_millis(60));
    check(
        &mut r,
        &[
            ("TTL k", ":-2\r\n"),
            ("PERSIST k", ":0\r\n"),
            ("EXISTS k", ":0\r\n"),
            (
                "TTL",
                "-ERR wrong number of arguments for 'ttl' command\r\n",
            ),
            (
                "PERSIST a b",
                "-ERR wrong number of arguments for 'persist' command\r\n",
            ),
        ],
    );
}

#[test]
fn keys_patterns() {
    let t = start();
    let mut c = t.client();
    let keys = [
        "hello", "hallo", "hxllo", "hllo", "heeeello", "h*llo", "h?llo", "foo:1", "foo:2",
        "foo:10", "bar", "{t}a", "{t}b", "a\\b", "", "x y", "ab]", "a-b", "A",
    ];
    for k in keys {
        let _: () = redis::cmd("SET").arg(k).arg("v").query(&mut c).unwrap();
    }
    let _: () = redis::cmd("SET")
        .arg("gone")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("PEXPIRE")
        .arg("gone")
        .arg(1)
        .query(&mut c)
        .unwrap();
    std::thread::sleep(Duration::from_millis(10));
    let cases: &[(&str, &[&str])] = &[
        ("h?llo", &["h*llo", "h?llo", "hallo", "hello", "hxllo"]),
        (
            "h*llo",
            &[
                "h*llo", "h?llo", "hallo", "heeeello", "hello", "hllo", "hxllo",
            ],
        ),
        ("h[ae]llo", &["hallo", "hello"]),
        ("h[^e]llo", &["h*llo", "h?llo", "hallo", "hxllo"]),
        ("h[a-b]llo", &["hallo"]),
        ("h[e-a]llo", &["hallo", "hello"]),
        ("h\\*llo", &["h*llo"]),
        ("foo:*", &["foo:1", "foo:10", "foo:2"]),
        ("foo:?", &["foo:1", "foo:2"]),
        ("*:1*", &["foo:1", "foo:10"]),
        ("[abc", &[]),
        ("a\\\\b", &["a\\b"]),
        ("*b", &["a-b", "a\\b", "{t}b"]),
        ("", &[""]),
        ("x y", &["x y"]),
        ("ab]", &["ab]"]),
        ("[A]", &["A"]),
        ("a", &[]),
        ("?", &["A"]),
        ("gone", &[]),
        ("{t}*", &["{t}a", "{t}b"]),
    ];
    for (pat, want) in cases {
        let mut got: Vec<String> = redis::cmd("KEYS").arg(*pat).query(&mut c).unwrap();
        got.sort();
        assert_eq!(got, *want, "KEYS {pat:?}");
    }
    let mut all: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    all.sort();
    let mut want: Vec<String> = keys.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(all, want);
    let mut r = t.raw();
    check(
        &mut r,
        &[
            ("SELECT 3", "+OK\r\n"),
            ("KEYS *", "*0\r\n"),
            ("SET foo:1 v", "+OK\r\n"),
            ("KEYS foo*", "*1\r\n$5\r\nfoo:1\r\n"),
            (
                "KEYS",
                "-ERR wrong number of arguments for 'keys' command\r\n",
            ),
        ],
    );
}

/// Runs a full SCAN iteration with `opts`, calling `between` after every call.
fn scan_all(
    c: &mut redis::Connection,
    opts: &[&str],
    mut between: impl FnMut(usize),
) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut out = Vec::new();
    let mut calls = 0;
    loop {
        let (next, keys): (String, Vec<String>) =
            redis::cmd("SCAN").arg(&cursor).arg(opts).query(c).unwrap();
        out.extend(keys);
        calls += 1;
        assert!(calls < 100_000, "SCAN does not terminate");
        if next == "0" {
            return out;
        }
        between(calls);
        cursor = next;
    }
}

#[test]
fn scan_full_iteration_with_concurrent_changes() {
    let t = start();
    let mut c = t.client();
    let mut w = t.client();
    let mut p = redis::pipe();
    for i in 0..5000 {
        p.cmd("SET").arg(format!("k:{i}")).arg(i).ignore();
    }
    let _: () = p.query(&mut c).unwrap();

    // Plain iteration: every key exactly once.
    let got = scan_all(&mut c, &["COUNT", "10"], |_| {});
    assert_eq!(got.len(), 5000);
    let set: HashSet<&String> = got.iter().collect();
    assert_eq!(set.len(), 5000);

    // Keys added and deleted during the iteration (enough additions to make the tables grow).
    // Keys k:i with i % 5 == 0 get deleted along the way; every other k:i is present
    // throughout and must be returned; nothing that never existed may be returned.
    let mut added = 0;
    let mut deleted = 0;
    let mut deleted_keys = Vec::new();
    let got = scan_all(&mut c, &["COUNT", "10"], |_| {
        let mut p = redis::pipe();
        for _ in 0..10 {
            p.cmd("SET").arg(format!("new:{added}")).arg(1).ignore();
            added += 1;
        }
        if deleted < 5000 {
            p.cmd("DEL").arg(format!("k:{deleted}")).ignore();
            deleted_keys.push(deleted);
            deleted += 5;
        }
        let _: () = p.query(&mut w).unwrap();
    });
    let got: HashSet<String> = got.into_iter().collect();
    for i in (0..5000).filter(|i| i % 5 != 0) {
        assert!(got.contains(&format!("k:{i}")), "k:{i} missing");
    }
    for k in &got {
        let ok = k
            .strip_prefix("k:")
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n < 5000)
            || k.strip_prefix("new:")
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|n| n < added);
        assert!(ok, "unexpected key {k}");
    }
    assert!(added > 2000, "the iteration made only {added} additions");

    // With MATCH and TYPE, while more keys come and go.
    let mut more = 0;
    let got = scan_all(
        &mut c,
        &["MATCH", "k:1*", "TYPE", "string", "COUNT", "10"],
        |n| {
            let mut p = redis::pipe();
            p.cmd("SET").arg(format!("k:1x{more}")).arg(1).ignore();
            p.cmd("DEL").arg(format!("new:{n}")).ignore();
            more += 1;
            let _: () = p.query(&mut w).unwrap();
        },
    );
    let got: HashSet<String> = got.into_iter().collect();
    for i in (0..5000).filter(|i| i % 5 != 0 && i.to_string().starts_with('1')) {
        assert!(got.contains(&format!("k:{i}")), "k:{i} missing");
    }
    assert!(got.iter().all(|k| k.starts_with("k:1")), "{got:?}");
    let got = scan_all(&mut c, &["TYPE", "list", "COUNT", "100"], |_| {});
    assert!(got.is_empty());
    let got = scan_all(&mut c, &["MATCH", "nothing*", "COUNT", "1000"], |_| {});
    assert!(got.is_empty());
}

#[test]
fn scan_options_and_errors() {
    let t = start();
    let mut r = t.raw();
    let mut c = t.client();
    check(
        &mut r,
        &[
            ("SCAN x", "-ERR invalid cursor\r\n"),
            ("SCAN 1x", "-ERR invalid cursor\r\n"),
            ("SCAN -", "-ERR invalid cursor\r\n"),
            ("SCAN 18446744073709551616", "-ERR invalid cursor\r\n"),
            // The cursor is checked before the options.
            ("SCAN x COUNT 0", "-ERR invalid cursor\r\n"),
            ("SCAN 0 COUNT 0", "-ERR syntax error\r\n"),
            ("SCAN 0 COUNT -1", "-ERR syntax error\r\n"),
            (
                "SCAN 0 COUNT x",
                "-ERR value is not an integer or out of range\r\n",
            ),
            ("SCAN 0 COUNT", "-ERR syntax error\r\n"),
            ("SCAN 0 MATCH", "-ERR syntax error\r\n"),
            ("SCAN 0 TYPE", "-ERR syntax error\r\n"),
            ("SCAN 0 FOO bar", "-ERR syntax error\r\n"),
            (
                "SCAN",
                "-ERR wrong number of arguments for 'scan' command\r\n",
            ),
            ("SELECT 5", "+OK\r\n"),
            ("SET {a}only v", "+OK\r\n"),
        ],
    );
    // One key: a full iteration finds it whatever the cursor format; a huge COUNT is fine.
    let _: () = redis::cmd("SELECT").arg(5).query(&mut c).unwrap();
    for opts in [
        &["COUNT", "9223372036854775807"][..],
        &["MATCH", "*"],
        &["match", "{a}*", "type", "STRING"],
        &["MATCH", "x*", "MATCH", "{a}o*"],
    ] {
        let got = scan_all(&mut c, opts, |_| {});
        assert_eq!(got, vec!["{a}only".to_string()], "{opts:?}");
    }
    let got = scan_all(&mut c, &["TYPE", "nosuchtype"], |_| {});
    assert!(got.is_empty());
}

#[test]
fn randomkey_returns_live_keys_from_every_shard() {
    let t = start();
    let mut r = t.raw();
    check(
        &mut r,
        &[("RANDOMKEY", "$-1\r\n"), ("SET {a}only v", "+OK\r\n")],
    );
    check(&mut r, &[("RANDOMKEY", "$7\r\n{a}only\r\n")]);
    let mut c = t.client();
    let mut all = HashSet::new();
    for tag in ["a", "b", "c", "d"] {
        for i in 0..10 {
            let k = format!("{{{tag}}}{i}");
            let _: () = redis::cmd("SET").arg(&k).arg(1).query(&mut c).unwrap();
            all.insert(k);
        }
    }
    all.insert("{a}only".to_string());
    let mut shards = HashSet::new();
    for _ in 0..200 {
        let k: String = redis::cmd("RANDOMKEY").query(&mut c).unwrap();
        assert!(all.contains(&k), "{k}");
        shards.insert(shard(&k));
    }
    assert_eq!(shards.len(), 4, "RANDOMKEY picked from shards {shards:?}");
    check(
        &mut r,
        &[(
            "RANDOMKEY x",
            "-ERR wrong number of arguments for 'randomkey' command\r\n",
        )],
    );
}

#[test]
fn object_subcommands() {
    let t = start();
    let mut r = t.raw();
    let v44 = "a".repeat(44);
    let v45 = "a".repeat(45);
    check(
        &mut r,
        &[
            ("SET k 100", "+OK\r\n"),
            ("OBJECT ENCODING k", "$3\r\nint\r\n"),
            ("OBJECT REFCOUNT k", ":2147483647\r\n"),
            ("SET k 0", "+OK\r\n"),
            ("OBJECT REFCOUNT k", ":2147483647\r\n"),
            ("SET k 9999", "+OK\r\n"),
            ("OBJECT REFCOUNT k", ":2147483647\r\n"),
            ("SET k 10000", "+OK\r\n"),
            ("OBJECT ENCODING k", "$3\r\nint\r\n"),
            ("OBJECT REFCOUNT k", ":1\r\n"),
            ("SET k -1", "+OK\r\n"),
            ("OBJECT ENCODING k", "$3\r\nint\r\n"),
            ("OBJECT REFCOUNT k", ":1\r\n"),
            ("SET k -9223372036854775808", "+OK\r\n"),
            ("OBJECT ENCODING k", "$3\r\nint\r\n"),
            ("SET k 9223372036854775808", "+OK\r\n"),
            ("OBJECT ENCODING k", "$6\r\nembstr\r\n"),
            ("SET k 0100", "+OK\r\n"),
            ("OBJECT ENCODING k", "$6\r\nembstr\r\n"),
            ("SET k -0", "+OK\r\n"),
            ("OBJECT ENCODING k", "$6\r\nembstr\r\n"),
            ("SET k abc", "+OK\r\n"),
            ("OBJECT ENCODING k", "$6\r\nembstr\r\n"),
            ("OBJECT REFCOUNT k", ":1\r\n"),
            (&format!("SET k {v44}"), "+OK\r\n"),
            ("OBJECT ENCODING k", "$6\r\nembstr\r\n"),
            (&format!("SET k {v45}"), "+OK\r\n"),
            ("OBJECT ENCODING k", "$3\r\nraw\r\n"),
            ("OBJECT REFCOUNT k", ":1\r\n"),
            (
                "OBJECT FREQ k",
                "-ERR An LFU maxmemory policy is not selected, access frequency not tracked. \
                 Please note that when switching between policies at runtime LRU and LFU data \
                 will take some time to adjust.\r\n",
            ),
            ("OBJECT ENCODING nokey", "$-1\r\n"),
            ("OBJECT REFCOUNT nokey", "$-1\r\n"),
            ("OBJECT IDLETIME nokey", "$-1\r\n"),
            ("OBJECT FREQ nokey", "$-1\r\n"),
            (
                "OBJECT",
                "-ERR wrong number of arguments for 'object' command\r\n",
            ),
            (
                "OBJECT foo k",
                "-ERR unknown subcommand 'foo'. Try OBJECT HELP.\r\n",
            ),
            (
                "OBJECT ENCODING",
                "-ERR wrong number of arguments for 'object|encoding' command\r\n",
            ),
            (
                "OBJECT IDLETIME a b",
                "-ERR wrong number of arguments for 'object|idletime' command\r\n",
            ),
        ],
    );
    let mut c = t.client();
    let help: redis::Value = redis::cmd("OBJECT").arg("HELP").query(&mut c).unwrap();
    let redis::Value::Array(lines) = help else {
        panic!("OBJECT HELP: {help:?}")
    };
    assert!(lines.len() > 5);
    for l in &lines {
        assert!(matches!(l, redis::Value::SimpleString(_)), "{l:?}");
    }
    assert_eq!(
        lines[0],
        redis::Value::SimpleString(
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:".into()
        )
    );
}

#[test]
fn object_idletime_is_not_reset_by_introspection() {
    let t = start();
    let mut c = t.client();
    let idle = |c: &mut redis::Connection| -> i64 {
        redis::cmd("OBJECT")
            .arg("IDLETIME")
            .arg("k")
            .query(c)
            .unwrap()
    };
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    assert!(idle(&mut c) <= 1);
    std::thread::sleep(Duration::from_millis(2100));
    for cmd in ["TYPE", "TTL", "PTTL", "EXISTS", "EXPIRETIME"] {
        let _: redis::Value = redis::cmd(cmd).arg("k").query(&mut c).unwrap();
    }
    let _: redis::Value = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert!(idle(&mut c) >= 2);
    assert!(idle(&mut c) >= 2);
    let _: i64 = redis::cmd("TOUCH").arg("k").query(&mut c).unwrap();
    assert!(idle(&mut c) <= 1);
}

#[test]
fn watch_sees_both_sides_of_rename_and_move() {
    let t = start();
    let mut r = t.raw();
    let mut other = t.raw();
    let mut c = t.client();
    for (watched, write) in [
        ("{a}src", "RENAME {a}src {b}dst"),
        ("{b}dst", "RENAME {a}src {b}dst"),
        ("{b}dst", "COPY {a}src {b}dst"),
        ("{a}src", "MOVE {a}src 1"),
        ("{a}src", "EXPIRE {a}src 100"),
        ("{a}src", "PERSIST {a}src"),
        ("{a}src", "DEL {a}src {c}x"),
    ] {
        let _: () = redis::pipe()
            .cmd("SELECT")
            .arg(1)
            .ignore()
            .cmd("DEL")
            .arg("{a}src")
            .ignore()
            .cmd("SELECT")
            .arg(0)
            .ignore()
            .cmd("DEL")
            .arg("{a}src")
            .arg("{b}dst")
            .ignore()
            .cmd("SET")
            .arg("{a}src")
            .arg("v")
            .ignore()
            .cmd("PEXPIRE")
            .arg("{a}src")
            .arg(500_000)
            .ignore()
            .query(&mut c)
            .unwrap();
        check(&mut r, &[(&format!("WATCH {watched}"), "+OK\r\n")]);
        let want = if write.starts_with("RENAME") {
            "+OK\r\n"
        } else {
            ":1\r\n"
        };
        check(&mut other, &[(write, want)]);
        check(
            &mut r,
            &[
                ("MULTI", "+OK\r\n"),
                ("EXISTS {a}src", "+QUEUED\r\n"),
                ("EXEC", "*-1\r\n"),
            ],
        );
    }
    // A failed conditional write changes nothing, so the transaction goes through.
    check(
        &mut r,
        &[
            ("SET {a}src v", "+OK\r\n"),
            ("WATCH {a}src", "+OK\r\n"),
            ("EXPIRE {a}src 100 XX", ":0\r\n"),
            ("PERSIST {a}src", ":0\r\n"),
            ("RENAMENX {a}src {a}src", ":0\r\n"),
            ("MULTI", "+OK\r\n"),
            ("RENAME {a}src {c}dst", "+QUEUED\r\n"),
            ("KEYS {c}*", "+QUEUED\r\n"),
            ("TTL {c}dst", "+QUEUED\r\n"),
            ("EXEC", "*3\r\n+OK\r\n*1\r\n$6\r\n{c}dst\r\n:-1\r\n"),
        ],
    );
}
