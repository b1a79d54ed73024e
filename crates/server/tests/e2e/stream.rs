//! Streamed replies (crates/server/src/stream.rs): whole-collection reads of big values
//! (HGETALL, HKEYS, HVALS, SMEMBERS, LRANGE, ZRANGE/ZREVRANGE by rank) are produced in steps
//! while the key is locked against writers. These tests check what a client sees: the whole,
//! exact contents, in order with its other replies, as a snapshot; they assert order only,
//! never timing.
//!
//! Servers run with 2 threads: `{a}...` keys live on shard 1 and `{b}...` keys on shard 0, so
//! every connection reads one of them from its own thread's shard and the other from the
//! other thread's.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// More than the streaming threshold (8192), several steps of 4096 elements.
const N: usize = 30_000;
const TAGS: [&str; 2] = ["{a}", "{b}"];

#[derive(Debug, Clone, PartialEq)]
enum V {
    Str(Vec<u8>),
    Bulk(Option<Vec<u8>>),
    Int(i64),
    Double(String),
    Arr(Vec<V>),
    Map(Vec<(V, V)>),
    Set(Vec<V>),
    Err(String),
}

impl V {
    fn bytes(&self) -> Vec<u8> {
        match self {
            V::Bulk(Some(b)) | V::Str(b) => b.clone(),
            V::Double(d) => d.clone().into_bytes(),
            other => panic!("not a string: {other:?}"),
        }
    }

    fn items(&self) -> &[V] {
        match self {
            V::Arr(v) | V::Set(v) => v,
            other => panic!("not an array: {other:?}"),
        }
    }
}

/// A raw RESP2/RESP3 connection.
struct Conn {
    r: BufReader<TcpStream>,
}

impl Conn {
    fn new(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Conn {
            r: BufReader::with_capacity(1 << 16, s),
        }
    }

    fn send(&mut self, cmds: &[&[&str]]) {
        let mut out = Vec::new();
        for c in cmds {
            let args: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
            out.extend(crate::common::cmd(&args));
        }
        self.r.get_mut().write_all(&out).unwrap();
    }

    fn call(&mut self, c: &[&str]) -> V {
        self.send(&[c]);
        self.read()
    }

    fn line(&mut self) -> Vec<u8> {
        let mut l = Vec::new();
        self.r.read_until(b'\n', &mut l).unwrap();
        assert!(l.ends_with(b"\r\n"), "truncated reply line {l:?}");
        l.truncate(l.len() - 2);
        l
    }

    fn read(&mut self) -> V {
        let l = self.line();
        let rest = String::from_utf8_lossy(&l[1..]).to_string();
        let n = || rest.parse::<i64>().unwrap();
        match l[0] {
            b'+' => V::Str(l[1..].to_vec()),
            b'-' => V::Err(rest),
            b':' => V::Int(n()),
            b',' => V::Double(rest),
            b'_' => V::Bulk(None),
            b'$' => {
                if n() < 0 {
                    return V::Bulk(None);
                }
                let mut b = vec![0u8; n() as usize + 2];
                self.r.read_exact(&mut b).unwrap();
                b.truncate(n() as usize);
                V::Bulk(Some(b))
            }
            b'*' => V::Arr((0..n()).map(|_| self.read()).collect()),
            b'~' => V::Set((0..n()).map(|_| self.read()).collect()),
            b'%' => V::Map((0..n()).map(|_| (self.read(), self.read())).collect()),
            other => panic!("unexpected reply type {other}"),
        }
    }
}

fn b(s: &str) -> V {
    V::Bulk(Some(s.as_bytes().to_vec()))
}

/// Fills, for `tag`: a hash `<tag>h` (field fI -> vI), a set `<tag>s` (mI), a list `<tag>l`
/// (eI) and a sorted set `<tag>z` (zI scored I), N elements each.
fn fill(c: &mut Conn, tag: &str) {
    let mut sent = 0;
    for i in (0..N).step_by(1000) {
        let mut h = vec!["HSET".to_string(), format!("{tag}h")];
        let mut s = vec!["SADD".to_string(), format!("{tag}s")];
        let mut l = vec!["RPUSH".to_string(), format!("{tag}l")];
        let mut z = vec!["ZADD".to_string(), format!("{tag}z")];
        for j in i..(i + 1000).min(N) {
            h.extend([format!("f{j}"), format!("v{j}")]);
            s.push(format!("m{j}"));
            l.push(format!("e{j}"));
            z.extend([j.to_string(), format!("z{j}")]);
        }
        for cmd in [h, s, l, z] {
            let refs: Vec<&str> = cmd.iter().map(|x| x.as_str()).collect();
            c.send(&[&refs]);
            sent += 1;
        }
    }
    for _ in 0..sent {
        assert!(matches!(c.read(), V::Int(_)));
    }
}

fn hash_model() -> BTreeMap<Vec<u8>, Vec<u8>> {
    (0..N)
        .map(|j| (format!("f{j}").into_bytes(), format!("v{j}").into_bytes()))
        .collect()
}

fn pairs_of(v: &V) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    match v {
        V::Map(p) => {
            for (k, v) in p {
                assert!(m.insert(k.bytes(), v.bytes()).is_none());
            }
        }
        V::Arr(a) => {
            assert_eq!(a.len() % 2, 0);
            for p in a.chunks(2) {
                assert!(m.insert(p[0].bytes(), p[1].bytes()).is_none());
            }
        }
        other => panic!("not a map: {other:?}"),
    }
    m
}

fn set_of(v: &V) -> BTreeSet<Vec<u8>> {
    let items = v.items();
    let s: BTreeSet<Vec<u8>> = items.iter().map(V::bytes).collect();
    assert_eq!(s.len(), items.len(), "duplicates");
    s
}

fn check_all(c: &mut Conn, tag: &str, resp3: bool) {
    let h = c.call(&["HGETALL", &format!("{tag}h")]);
    assert_eq!(matches!(h, V::Map(_)), resp3);
    assert_eq!(pairs_of(&h), hash_model());
    let keys = c.call(&["HKEYS", &format!("{tag}h")]);
    assert_eq!(set_of(&keys), hash_model().into_keys().collect());
    let vals = c.call(&["HVALS", &format!("{tag}h")]);
    assert_eq!(set_of(&vals), hash_model().into_values().collect());
    // HKEYS and HVALS walk the hash in the same order as HGETALL.
    let order: Vec<V> = match &h {
        V::Map(p) => p.iter().map(|(k, _)| k.clone()).collect(),
        V::Arr(a) => a.iter().step_by(2).cloned().collect(),
        _ => unreachable!(),
    };
    assert_eq!(keys.items(), &order[..]);
    let s = c.call(&["SMEMBERS", &format!("{tag}s")]);
    assert_eq!(matches!(s, V::Set(_)), resp3);
    assert_eq!(
        set_of(&s),
        (0..N).map(|j| format!("m{j}").into_bytes()).collect()
    );
    let l = c.call(&["LRANGE", &format!("{tag}l"), "0", "-1"]);
    let want: Vec<V> = (0..N).map(|j| b(&format!("e{j}"))).collect();
    assert_eq!(l.items(), &want[..]);
    let l = c.call(&["LRANGE", &format!("{tag}l"), "7", "-12"]);
    assert_eq!(l.items(), &want[7..N - 11]);
    let members: Vec<V> = (0..N).map(|j| b(&format!("z{j}"))).collect();
    let z = c.call(&["ZRANGE", &format!("{tag}z"), "0", "-1"]);
    assert_eq!(z.items(), &members[..]);
    let z = c.call(&["zrange", &format!("{tag}z"), "3", "20000", "rev"]);
    let rev: Vec<V> = (N - 20001..=N - 4)
        .rev()
        .map(|j| b(&format!("z{j}")))
        .collect();
    assert_eq!(z.items(), &rev[..]);
    let z = c.call(&["ZREVRANGE", &format!("{tag}z"), "0", "-1", "WITHSCORES"]);
    let mut want = Vec::new();
    for j in (0..N).rev() {
        let (m, s) = (b(&format!("z{j}")), j.to_string());
        if resp3 {
            want.push(V::Arr(vec![m, V::Double(s)]));
        } else {
            want.push(m);
            want.push(b(&s));
        }
    }
    assert_eq!(z.items(), &want[..]);
    let z = c.call(&["ZRANGE", &format!("{tag}z"), "-10000", "-1", "WITHSCORES"]);
    let start = if resp3 { N - 10000 } else { 2 * (N - 10000) };
    let mut fwd = want.clone();
    if resp3 {
        fwd.reverse();
    } else {
        let pairs: Vec<Vec<V>> = want.chunks(2).rev().map(|p| p.to_vec()).collect();
        fwd = pairs.concat();
    }
    assert_eq!(z.items(), &fwd[start..]);
}

#[test]
fn streamed_replies_equal_the_contents_in_resp2_and_resp3_on_both_shards() {
    let s = crate::common::Server::start(&[]);
    let mut c = Conn::new(s.port);
    for tag in TAGS {
        fill(&mut c, tag);
    }
    for tag in TAGS {
        check_all(&mut c, tag, false);
    }
    let mut c3 = Conn::new(s.port);
    assert!(matches!(c3.call(&["HELLO", "3"]), V::Map(_)));
    for tag in TAGS {
        check_all(&mut c3, tag, true);
    }
    // Small values and other shapes are unchanged (replied at once).
    assert_eq!(c.call(&["HGETALL", "nokey"]), V::Arr(vec![]));
    assert_eq!(c.call(&["LRANGE", "{a}l", "5", "3"]), V::Arr(vec![]));
    assert_eq!(
        c.call(&["ZRANGE", "{a}z", "0", "-1", "BYSCORE", "LIMIT", "0", "2"]),
        V::Arr(vec![])
    );
    assert_eq!(
        c.call(&["ZRANGE", "{a}z", "0", "2", "BYSCORE"]),
        V::Arr(vec![b("z0"), b("z1"), b("z2")])
    );
    assert!(matches!(
        c.call(&["ZRANGE", "{a}z", "0", "-1", "REV", "REV"]),
        V::Err(_)
    ));
    assert!(matches!(c.call(&["LRANGE", "{a}l", "x", "-1"]), V::Err(_)));
    assert!(matches!(c.call(&["SMEMBERS", "{a}h"]), V::Err(e) if e.starts_with("WRONGTYPE")));
}

#[test]
fn pipelines_keep_reply_order_and_a_streamed_key_is_a_snapshot() {
    let s = crate::common::Server::start(&[]);
    let mut c = Conn::new(s.port);
    for tag in TAGS {
        fill(&mut c, tag);
    }
    for tag in TAGS {
        let (h, other) = (format!("{tag}h"), format!("{tag}x"));
        // The writes after the read wait for it (same connection, same key), the one to another
        // key of the same shard does not change what the client sees: replies in order.
        c.send(&[
            &["HGETALL", &h],
            &["HSET", &h, "new", "1"],
            &["SET", &other, "7"],
            &["HGETALL", "{b}h"],
            &["GET", &other],
            &["HLEN", &h],
            &["HDEL", &h, "new"],
            &["SMEMBERS", &format!("{tag}s")],
            &["PING"],
        ]);
        assert_eq!(pairs_of(&c.read()), hash_model());
        assert_eq!(c.read(), V::Int(1));
        assert_eq!(c.read(), V::Str(b"OK".to_vec()));
        let second = pairs_of(&c.read());
        if tag == "{b}" {
            // This hash had "new" set by the HSET before it.
            assert_eq!(second.get(&b"new"[..]), Some(&b"1".to_vec()));
            assert_eq!(second.len(), N + 1);
        } else {
            assert_eq!(second, hash_model());
        }
        assert_eq!(c.read(), b("7"));
        assert_eq!(c.read(), V::Int(N as i64 + 1));
        assert_eq!(c.read(), V::Int(1));
        assert_eq!(c.read().items().len(), N);
        assert_eq!(c.read(), V::Str(b"PONG".to_vec()));
    }
    // Two streams at once for one connection, one per shard, then a plain reply.
    c.send(&[
        &["LRANGE", "{a}l", "0", "-1"],
        &["LRANGE", "{b}l", "0", "-1"],
        &["ZRANGE", "{a}z", "0", "-1"],
        &["ECHO", "end"],
    ]);
    let want: Vec<V> = (0..N).map(|j| b(&format!("e{j}"))).collect();
    assert_eq!(c.read().items(), &want[..]);
    assert_eq!(c.read().items(), &want[..]);
    assert_eq!(c.read().items().len(), N);
    assert_eq!(c.read(), b("end"));
}

#[test]
fn other_clients_writes_wait_for_the_stream_and_other_keys_proceed() {
    let s = crate::common::Server::start(&[]);
    let mut c = Conn::new(s.port);
    for tag in TAGS {
        fill(&mut c, tag);
    }
    for tag in TAGS {
        let h = format!("{tag}h");
        let mut reader = Conn::new(s.port);
        reader.send(&[&["HGETALL", &h]]);
        // The stream has started once its first bytes arrive: a write sent after that is
        // applied after the whole reply.
        let mut first = [0u8; 1];
        reader.r.read_exact(&mut first).unwrap();
        let mut w = Conn::new(s.port);
        w.send(&[
            &["HSET", &h, "late", "x"],
            &["SET", &format!("{tag}other"), "1"],
            &["HGET", &h, "late"],
        ]);
        // Rest of the streamed reply (after the first byte).
        let rest = reader.read_after(first[0]);
        assert_eq!(pairs_of(&rest), hash_model());
        assert_eq!(w.read(), V::Int(1));
        assert_eq!(w.read(), V::Str(b"OK".to_vec()));
        assert_eq!(w.read(), b("x"));
        assert_eq!(reader.call(&["HGET", &h, "late"]), b("x"));
        assert_eq!(reader.call(&["HDEL", &h, "late"]), V::Int(1));
        // A multi-shard transaction touching the shard waits too and then runs.
        reader.send(&[&["SMEMBERS", &format!("{tag}s")]]);
        reader.r.read_exact(&mut first).unwrap();
        w.send(&[
            &["MSET", "{a}m", "1", "{b}m", "2"],
            &["SREM", &format!("{tag}s"), "m0"],
        ]);
        let rest = reader.read_after(first[0]);
        assert_eq!(rest.items().len(), N);
        assert_eq!(w.read(), V::Str(b"OK".to_vec()));
        assert_eq!(w.read(), V::Int(1));
        assert_eq!(w.call(&["SADD", &format!("{tag}s"), "m0"]), V::Int(1));
    }
}

impl Conn {
    /// Reads a reply whose first byte (`t`) was already consumed.
    fn read_after(&mut self, t: u8) -> V {
        // Put the type byte back in front by parsing the rest of its line by hand.
        let l = self.line();
        let mut full = vec![t];
        full.extend_from_slice(&l);
        let n: i64 = String::from_utf8_lossy(&full[1..]).parse().unwrap();
        match t {
            b'*' => V::Arr((0..n).map(|_| self.read()).collect()),
            b'~' => V::Set((0..n).map(|_| self.read()).collect()),
            b'%' => V::Map((0..n).map(|_| (self.read(), self.read())).collect()),
            other => panic!("unexpected {other}"),
        }
    }
}

#[test]
fn a_client_that_leaves_mid_stream_releases_the_key() {
    let s = crate::common::Server::start(&[]);
    let mut c = Conn::new(s.port);
    for tag in TAGS {
        fill(&mut c, tag);
    }
    for tag in TAGS {
        let h = format!("{tag}h");
        for _ in 0..3 {
            let mut gone = Conn::new(s.port);
            gone.send(&[&["HGETALL", &h], &["HVALS", &h]]);
            let mut first = [0u8; 1];
            gone.r.read_exact(&mut first).unwrap();
            drop(gone);
        }
        // Killed mid-stream.
        let mut killed = Conn::new(s.port);
        let V::Int(id) = killed.call(&["CLIENT", "ID"]) else {
            panic!("client id")
        };
        killed.send(&[&["HKEYS", &h], &["HKEYS", &h]]);
        let mut first = [0u8; 1];
        killed.r.read_exact(&mut first).unwrap();
        let kill = c.call(&["CLIENT", "KILL", "ID", &id.to_string()]);
        assert_eq!(kill, V::Int(1));
        // The key is writable again and the server answers everyone.
        assert_eq!(c.call(&["HSET", &h, "after", "1"]), V::Int(1));
        assert_eq!(c.call(&["HLEN", &h]), V::Int(N as i64 + 1));
        assert_eq!(c.call(&["HDEL", &h, "after"]), V::Int(1));
        assert_eq!(pairs_of(&c.call(&["HGETALL", &h])), hash_model());
    }
}

#[test]
fn multi_exec_replies_big_values_at_once_as_before() {
    let s = crate::common::Server::start(&[]);
    let mut c = Conn::new(s.port);
    for tag in TAGS {
        fill(&mut c, tag);
    }
    c.send(&[
        &["MULTI"],
        &["HGETALL", "{a}h"],
        &["HSET", "{a}h", "t", "1"],
        &["LRANGE", "{b}l", "0", "-1"],
        &["HLEN", "{a}h"],
        &["EXEC"],
    ]);
    assert_eq!(c.read(), V::Str(b"OK".to_vec()));
    for _ in 0..4 {
        assert_eq!(c.read(), V::Str(b"QUEUED".to_vec()));
    }
    let V::Arr(r) = c.read() else {
        panic!("EXEC reply")
    };
    assert_eq!(r.len(), 4);
    assert_eq!(pairs_of(&r[0]), hash_model());
    assert_eq!(r[1], V::Int(1));
    assert_eq!(r[2].items().len(), N);
    assert_eq!(r[3], V::Int(N as i64 + 1));
}

#[test]
fn a_client_blocked_on_a_list_is_served_before_the_list_is_streamed() {
    let s = crate::common::Server::start(&[]);
    for tag in TAGS {
        let key = format!("{tag}bl");
        let mut blocked = Conn::new(s.port);
        blocked.send(&[&["BLPOP", &key, "10"]]);
        // Wait until the server knows the client is blocked.
        let mut c = Conn::new(s.port);
        for _ in 0..500 {
            let V::Bulk(Some(info)) = c.call(&["INFO", "clients"]) else {
                panic!("info")
            };
            if String::from_utf8_lossy(&info).contains("blocked_clients:1") {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let items: Vec<String> = (0..9000).map(|j| format!("e{j}")).collect();
        let mut push = vec!["RPUSH", key.as_str()];
        push.extend(items.iter().map(|x| x.as_str()));
        c.send(&[&push, &["LRANGE", &key, "0", "-1"]]);
        assert_eq!(c.read(), V::Int(9000));
        // As in Redis: the blocked client is served right after the push, before the read.
        let want: Vec<V> = items[1..].iter().map(|x| b(x)).collect();
        assert_eq!(c.read().items(), &want[..]);
        assert_eq!(blocked.read(), V::Arr(vec![b(&key), b("e0")]));
    }
}

#[test]
fn a_client_that_does_not_read_keeps_writers_waiting_only_briefly() {
    let s = crate::common::Server::start(&[]);
    let mut c = Conn::new(s.port);
    // ~6 MB of reply: more than the sockets' buffers hold.
    let value = "v".repeat(200);
    for tag in TAGS {
        let h = format!("{tag}slow");
        for i in (0..30_000).step_by(1000) {
            let mut cmd = vec!["HSET".to_string(), h.clone()];
            for j in i..i + 1000 {
                cmd.extend([format!("f{j}"), value.clone()]);
            }
            let refs: Vec<&str> = cmd.iter().map(|x| x.as_str()).collect();
            assert_eq!(c.call(&refs), V::Int(1000));
        }
        let mut idle = Conn::new(s.port);
        idle.send(&[&["HGETALL", &h]]);
        // The stream has started once its first byte arrived; then the client stops reading.
        let mut first = [0u8; 1];
        idle.r.read_exact(&mut first).unwrap();
        // Once the reader has been given up on (after about a second), the rest of its reply
        // is buffered for it and the write goes through.
        let mut w = Conn::new(s.port);
        assert_eq!(w.call(&["HSET", &h, "late", "1"]), V::Int(1));
        let got = pairs_of(&idle.read_after(first[0]));
        assert_eq!(got.len(), 30_000);
        assert!(!got.contains_key(&b"late"[..]));
    }
}

#[test]
fn a_big_value_whose_ttl_passes_while_it_is_streamed_is_replied_whole() {
    // Active expiry 100 times a second; the reply (~30 MB) is more than the sockets' buffers
    // hold, so the stream waits for its reader while the TTLs pass. The reply is the value
    // as it was when the command ran; the expiry happens after it.
    let s = crate::common::Server::start(&["--hz", "100"]);
    let mut c = Conn::new(s.port);
    let value = "v".repeat(1000);
    for tag in TAGS {
        let (h, set) = (format!("{tag}th"), format!("{tag}ts"));
        for i in (0..N).step_by(1000) {
            let mut cmd = vec!["HSET".to_string(), h.clone()];
            let mut sadd = vec!["SADD".to_string(), set.clone()];
            for j in i..i + 1000 {
                cmd.extend([format!("f{j}"), value.clone()]);
                sadd.push(format!("{j}{value}"));
            }
            let refs: Vec<&str> = cmd.iter().map(|x| x.as_str()).collect();
            assert_eq!(c.call(&refs), V::Int(1000));
            let refs: Vec<&str> = sadd.iter().map(|x| x.as_str()).collect();
            assert_eq!(c.call(&refs), V::Int(1000));
        }
        // 1,000 fields of the hash expire in 200 ms, and the whole set.
        let mut hexpire = vec!["HPEXPIRE", &h, "200", "FIELDS", "1000"];
        let fields: Vec<String> = (0..1000).map(|j| format!("f{j}")).collect();
        hexpire.extend(fields.iter().map(|f| f.as_str()));
        assert_eq!(c.call(&hexpire).items().len(), 1000);
        assert_eq!(c.call(&["PEXPIRE", &set, "200"]), V::Int(1));

        let mut reader = Conn::new(s.port);
        reader.send(&[&["HGETALL", &h], &["SMEMBERS", &set]]);
        let mut first = [0u8; 1];
        reader.r.read_exact(&mut first).unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let got = pairs_of(&reader.read_after(first[0]));
        assert_eq!(got.len(), N);
        assert!(got.values().all(|v| v == value.as_bytes()));
        assert_eq!(set_of(&reader.read()).len(), N);
        // Now the TTLs have their effect.
        assert_eq!(reader.call(&["HLEN", &h]), V::Int(N as i64 - 1000));
        assert_eq!(reader.call(&["EXISTS", &set]), V::Int(0));
    }
}
