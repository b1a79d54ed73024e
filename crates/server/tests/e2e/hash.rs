//! End-to-end tests of the hash commands. Exact replies are Redis 7.2's (checked against a real
//! redis-server for the same sequence on an empty database, with Redis's default
//! `hash-max-listpack-*` settings).

use crate::common::{args_of, cmd, run, Raw, Server, Steps};
use std::collections::{HashMap, HashSet};

fn resp3(s: &Server) -> Raw {
    let mut r = s.raw();
    r.send(&cmd(&[b"HELLO", b"3"]));
    r.send(&cmd(&[b"PING"]));
    let mut got = Vec::new();
    while !got.ends_with(b"+PONG\r\n") {
        let chunk = r.read_n(1);
        assert!(!chunk.is_empty(), "HELLO 3 failed");
        got.extend_from_slice(&chunk);
    }
    r
}

const BASICS: Steps = &[
    ("HSET h a 1", b":1\r\n"),
    ("HSET h b 2 c 3", b":2\r\n"),
    ("HSET h a 10 d 4", b":1\r\n"),
    ("HSET h a", b"-ERR wrong number of arguments for 'hset' command\r\n"),
    ("HSET h a 1 b", b"-ERR wrong number of arguments for 'hset' command\r\n"),
    ("HMSET h a 1 b", b"-ERR wrong number of arguments for 'hmset' command\r\n"),
    ("HGET h a", b"$2\r\n10\r\n"),
    ("HGET h zz", b"$-1\r\n"),
    ("HGET nokey a", b"$-1\r\n"),
    ("HMGET h a zz b", b"*3\r\n$2\r\n10\r\n$-1\r\n$1\r\n2\r\n"),
    ("HMGET nokey a b", b"*2\r\n$-1\r\n$-1\r\n"),
    ("HLEN h", b":4\r\n"),
    ("HLEN nokey", b":0\r\n"),
    ("HSTRLEN h a", b":2\r\n"),
    ("HSTRLEN h zz", b":0\r\n"),
    ("HEXISTS h a", b":1\r\n"),
    ("HEXISTS h zz", b":0\r\n"),
    ("HEXISTS nokey a", b":0\r\n"),
    // A listpack keeps insertion order; an update keeps the field's place.
    ("HKEYS h", b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
    ("HVALS h", b"*4\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n"),
    (
        "HGETALL h",
        b"*8\r\n$1\r\na\r\n$2\r\n10\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n",
    ),
    ("HKEYS nokey", b"*0\r\n"),
    ("HGETALL nokey", b"*0\r\n"),
    ("HMSET h e 5 f 6", b"+OK\r\n"),
    ("HSETNX h a x", b":0\r\n"),
    ("HSETNX h new y", b":1\r\n"),
    ("HGET h new", b"$1\r\ny\r\n"),
    ("HDEL h a zz b a", b":2\r\n"),
    ("HDEL nokey a", b":0\r\n"),
    ("HDEL h c d e f new", b":5\r\n"),
    ("EXISTS h", b":0\r\n"),
    ("HSET h '' ''", b":1\r\n"),
    ("HGET h ''", b"$0\r\n\r\n"),
    ("HSET h f\\x00\\xff v\\r\\n", b":1\r\n"),
    ("HGET h f\\x00\\xff", b"$5\r\nv\\r\\n\r\n"),
    ("HSTRLEN h f\\x00\\xff", b":5\r\n"),
    ("HGET h", b"-ERR wrong number of arguments for 'hget' command\r\n"),
    ("HDEL h", b"-ERR wrong number of arguments for 'hdel' command\r\n"),
    // Redis 7.4 (7.2 has no HEXPIRE): no field "a" here.
    ("HEXPIRE h 10 FIELDS 1 a", b"*1\r\n:-2\r\n"),
];

#[test]
fn basics() {
    let s = Server::start(&[]);
    run(&mut s.raw(), BASICS);
}

const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[test]
fn wrong_type_everywhere() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&[b"SET", b"s", b"v"]), b"+OK\r\n");
    for line in [
        "HSET s a 1",
        "HMSET s a 1",
        "HSETNX s a 1",
        "HGET s a",
        "HMGET s a",
        "HDEL s a",
        "HLEN s",
        "HSTRLEN s a",
        "HEXISTS s a",
        "HKEYS s",
        "HVALS s",
        "HGETALL s",
        "HINCRBY s a 1",
        "HINCRBYFLOAT s a 1",
        "HRANDFIELD s",
        "HRANDFIELD s 2",
        "HSCAN s 0",
    ] {
        let args = args_of(line);
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        r.roundtrip(&cmd(&refs), WRONGTYPE);
    }
    run(
        &mut r,
        &[
            // Argument errors come first where Redis checks them first.
            (
                "HINCRBY s a x",
                b"-ERR value is not an integer or out of range\r\n",
            ),
            ("HINCRBYFLOAT s a x", b"-ERR value is not a valid float\r\n"),
            ("HSCAN s x", b"-ERR invalid cursor\r\n"),
            (
                "HRANDFIELD s x",
                b"-ERR value is not an integer or out of range\r\n",
            ),
            ("HSET h a 1", b":1\r\n"),
            ("GET h", WRONGTYPE),
            ("TYPE h", b"+hash\r\n"),
        ],
    );
}

const INCR: Steps = &[
    ("HINCRBY h n 5", b":5\r\n"),
    ("HINCRBY h n -7", b":-2\r\n"),
    (
        "HINCRBY h n x",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "HINCRBY nokey n x",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("EXISTS nokey", b":0\r\n"),
    (
        "HSET h s abc sp \\x201 z 01 big 9223372036854775807",
        b":4\r\n",
    ),
    ("HINCRBY h s 1", b"-ERR hash value is not an integer\r\n"),
    ("HINCRBY h z 1", b"-ERR hash value is not an integer\r\n"),
    (
        "HINCRBY h big 1",
        b"-ERR increment or decrement would overflow\r\n",
    ),
    ("HINCRBY h big 0", b":9223372036854775807\r\n"),
    (
        "HINCRBY h n -9223372036854775808",
        b"-ERR increment or decrement would overflow\r\n",
    ),
    ("HINCRBYFLOAT h f 10.5", b"$4\r\n10.5\r\n"),
    ("HINCRBYFLOAT h f 0.1", b"$4\r\n10.6\r\n"),
    (
        "HINCRBYFLOAT h f -5.0e3",
        b"$23\r\n-4989.39999999999999991\r\n",
    ),
    ("HINCRBYFLOAT h n 1", b"$2\r\n-1\r\n"),
    ("HINCRBY h n 1", b":0\r\n"),
    (
        "HINCRBYFLOAT h f abc",
        b"-ERR value is not a valid float\r\n",
    ),
    ("HINCRBYFLOAT h s 1", b"-ERR hash value is not a float\r\n"),
    ("HINCRBYFLOAT h f inf", b"-ERR value is NaN or Infinity\r\n"),
    (
        "HINCRBYFLOAT h f nan",
        b"-ERR value is not a valid float\r\n",
    ),
    ("HSET h huge 1e4932", b":1\r\n"),
    (
        "HINCRBYFLOAT h huge 1e4932",
        b"-ERR increment would produce NaN or Infinity\r\n",
    ),
    ("HINCRBYFLOAT h g 1e20", b"$21\r\n100000000000000000000\r\n"),
    ("HINCRBYFLOAT h e 1.23e-5", b"$9\r\n0.0000123\r\n"),
];

#[test]
fn increments() {
    let s = Server::start(&[]);
    run(&mut s.raw(), INCR);
}

#[test]
fn encodings_follow_the_thresholds() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let long = "x".repeat(65);
    let mut steps: Vec<(String, &[u8])> = vec![
        ("HSET h a 1".into(), b":1\r\n"),
        ("OBJECT ENCODING h".into(), b"$8\r\nlistpack\r\n"),
        (format!("HSET h b {}", "x".repeat(64)), b":1\r\n"),
        ("OBJECT ENCODING h".into(), b"$8\r\nlistpack\r\n"),
        (format!("HSET h c {long}"), b":1\r\n"),
        ("OBJECT ENCODING h".into(), b"$9\r\nhashtable\r\n"),
        ("HDEL h c".into(), b":1\r\n"),
        ("OBJECT ENCODING h".into(), b"$9\r\nhashtable\r\n"),
        (format!("HSET h2 {long} 1"), b":1\r\n"),
        ("OBJECT ENCODING h2".into(), b"$9\r\nhashtable\r\n"),
        (format!("HSETNX h3 f {long}"), b":1\r\n"),
        ("OBJECT ENCODING h3".into(), b"$9\r\nhashtable\r\n"),
    ];
    for i in 0..128 {
        steps.push((format!("HSET big f{i} {i}"), b":1\r\n"));
    }
    steps.push(("OBJECT ENCODING big".into(), b"$8\r\nlistpack\r\n"));
    steps.push(("HSET big f128 x".into(), b":1\r\n"));
    steps.push(("OBJECT ENCODING big".into(), b"$9\r\nhashtable\r\n"));
    steps.push(("HLEN big".into(), b":129\r\n"));
    steps.push(("HGET big f77".into(), b"$2\r\n77\r\n"));
    steps.push(("CONFIG SET hash-max-listpack-entries 2".into(), b"+OK\r\n"));
    steps.push(("HSET small a 1 b 2".into(), b":2\r\n"));
    steps.push(("OBJECT ENCODING small".into(), b"$8\r\nlistpack\r\n"));
    steps.push(("HSET small c 3".into(), b":1\r\n"));
    steps.push(("OBJECT ENCODING small".into(), b"$9\r\nhashtable\r\n"));
    steps.push(("CONFIG SET hash-max-listpack-value 3".into(), b"+OK\r\n"));
    steps.push(("HSET s2 abc abc".into(), b":1\r\n"));
    steps.push(("OBJECT ENCODING s2".into(), b"$8\r\nlistpack\r\n"));
    steps.push(("HINCRBYFLOAT s3 f 0.1234".into(), b"$6\r\n0.1234\r\n"));
    steps.push(("OBJECT ENCODING s3".into(), b"$9\r\nhashtable\r\n"));
    for (line, want) in &steps {
        let args = args_of(line);
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        r.roundtrip(&cmd(&refs), want);
    }
}

#[test]
fn resp3_shapes() {
    let s = Server::start(&[]);
    let mut r = resp3(&s);
    run(
        &mut r,
        &[
            ("HGETALL nokey", b"%0\r\n"),
            ("HKEYS nokey", b"*0\r\n"),
            ("HSET h f v", b":1\r\n"),
            ("HGETALL h", b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n"),
            ("HGET h nope", b"_\r\n"),
            ("HRANDFIELD nokey", b"_\r\n"),
            ("HRANDFIELD nokey 3", b"*0\r\n"),
            ("HRANDFIELD h", b"$1\r\nf\r\n"),
            ("HRANDFIELD h 0", b"*0\r\n"),
            (
                "HRANDFIELD h 1 WITHVALUES",
                b"*1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
            ),
            (
                "HRANDFIELD h 5 WITHVALUES",
                b"*1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
            ),
            (
                "HRANDFIELD h -2 WITHVALUES",
                b"*2\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
            ),
            ("HRANDFIELD h -2", b"*2\r\n$1\r\nf\r\n$1\r\nf\r\n"),
            ("HINCRBYFLOAT h x 1.5", b"$3\r\n1.5\r\n"),
            (
                "HSCAN h 0",
                b"*2\r\n$1\r\n0\r\n*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\nx\r\n$3\r\n1.5\r\n",
            ),
        ],
    );
    // RESP2 forms of the same.
    run(
        &mut s.raw(),
        &[
            ("HRANDFIELD nokey", b"$-1\r\n"),
            ("HSET one f v", b":1\r\n"),
            (
                "HRANDFIELD one -2 WITHVALUES",
                b"*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\nf\r\n$1\r\nv\r\n",
            ),
            (
                "HRANDFIELD one 1 WITHVALUES",
                b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
            ),
            ("HGETALL one", b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n"),
        ],
    );
}

#[test]
fn hrandfield_arguments_and_distribution() {
    let s = Server::start(&[]);
    run(
        &mut s.raw(),
        &[
            ("HSET h a 1 b 2 c 3", b":3\r\n"),
            ("HRANDFIELD h 3", b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"),
            ("HRANDFIELD h 10 WITHVALUES", b"*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            ("HRANDFIELD h x", b"-ERR value is not an integer or out of range\r\n"),
            ("HRANDFIELD h 1 WITHVALUE", b"-ERR syntax error\r\n"),
            ("HRANDFIELD h 1 WITHVALUES x", b"-ERR syntax error\r\n"),
            ("HRANDFIELD nokey 1 bad", b"-ERR syntax error\r\n"),
            (
                "HRANDFIELD h -9223372036854775808",
                b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n",
            ),
            ("HRANDFIELD h -4611686018427387904 WITHVALUES", b"-ERR value is out of range\r\n"),
            // Darner's bound on a reply built in memory (Redis has none): 2^24 samples.
            ("HRANDFIELD h -16777217", b"-ERR count is too large for a reply\r\n"),
            ("HRANDFIELD h -10000000000", b"-ERR count is too large for a reply\r\n"),
            ("HRANDFIELD h -16777217 WITHVALUES", b"-ERR count is too large for a reply\r\n"),
            ("PING", b"+PONG\r\n"),
            ("HRANDFIELD h 4611686018427387904 WITHVALUES", b"-ERR value is out of range\r\n"),
        ],
    );
    let mut c = s.client();
    for n in [50usize, 1000] {
        let key = format!("h{n}");
        let pairs: Vec<(String, String)> =
            (0..n).map(|i| (format!("f{i}"), format!("v{i}"))).collect();
        let _: i64 = redis::cmd("HSET")
            .arg(&key)
            .arg(&pairs)
            .query(&mut c)
            .unwrap();
        for count in [1usize, 3, 10, 40, 400, 999] {
            let got: Vec<String> = redis::cmd("HRANDFIELD")
                .arg(&key)
                .arg(count)
                .query(&mut c)
                .unwrap();
            let want = count.min(n);
            assert_eq!(got.len(), want);
            let distinct: HashSet<&String> = got.iter().collect();
            assert_eq!(distinct.len(), want, "unique fields for count {count}");
            assert!(got.iter().all(|f| f[1..].parse::<usize>().unwrap() < n));
        }
        let got: Vec<String> = redis::cmd("HRANDFIELD")
            .arg(&key)
            .arg(-2000)
            .arg("WITHVALUES")
            .query(&mut c)
            .unwrap();
        assert_eq!(got.len(), 4000);
        for p in got.chunks(2) {
            assert_eq!(p[0][1..], p[1][1..]);
        }
        let distinct: HashSet<&String> = got.iter().step_by(2).collect();
        assert!(distinct.len() > n / 3, "samples spread over the hash");
    }
}

#[test]
fn hscan_listpack_and_options() {
    let s = Server::start(&[]);
    run(
        &mut s.raw(),
        &[
            ("HSCAN nokey 0", b"*2\r\n$1\r\n0\r\n*0\r\n"),
            ("HSCAN nokey 0 COUNT x", b"*2\r\n$1\r\n0\r\n*0\r\n"),
            ("HSET h a1 1 b2 2 a3 3", b":3\r\n"),
            ("HSCAN h 0 COUNT 1", b"*2\r\n$1\r\n0\r\n*6\r\n$2\r\na1\r\n$1\r\n1\r\n$2\r\nb2\r\n$1\r\n2\r\n$2\r\na3\r\n$1\r\n3\r\n"),
            ("HSCAN h 0 MATCH a*", b"*2\r\n$1\r\n0\r\n*4\r\n$2\r\na1\r\n$1\r\n1\r\n$2\r\na3\r\n$1\r\n3\r\n"),
            ("HSCAN h 0 MATCH a* NOVALUES", b"*2\r\n$1\r\n0\r\n*2\r\n$2\r\na1\r\n$2\r\na3\r\n"),
            ("HSCAN h 0 COUNT 0", b"-ERR syntax error\r\n"),
            ("HSCAN h 0 COUNT x", b"-ERR value is not an integer or out of range\r\n"),
            ("HSCAN h 0 COUNT", b"-ERR syntax error\r\n"),
            ("HSCAN h 0 FOO bar", b"-ERR syntax error\r\n"),
            ("HSCAN h x", b"-ERR invalid cursor\r\n"),
            ("HSCAN h 18446744073709551616", b"-ERR invalid cursor\r\n"),
        ],
    );
}

/// A full HSCAN of a big hash returns every field present for the whole iteration, while
/// the hash grows (bucket splits) and loses other fields.
#[test]
fn hscan_full_iteration_while_modified() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let pairs: Vec<(String, String)> = (0..3000)
        .map(|i| (format!("f{i}"), format!("v{i}")))
        .collect();
    let _: i64 = redis::cmd("HSET")
        .arg("h")
        .arg(&pairs)
        .query(&mut c)
        .unwrap();
    let mut cursor = 0u64;
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut extra = 3000;
    let mut calls = 0;
    loop {
        let (next, items): (u64, Vec<String>) = redis::cmd("HSCAN")
            .arg("h")
            .arg(cursor)
            .arg("COUNT")
            .arg(50)
            .query(&mut c)
            .unwrap();
        for p in items.chunks(2) {
            seen.insert(p[0].clone(), p[1].clone());
        }
        // Grow, and remove fields that are not part of the stable set.
        let more: Vec<(String, String)> = (extra..extra + 40)
            .map(|i| (format!("f{i}"), "x".into()))
            .collect();
        let _: i64 = redis::cmd("HSET")
            .arg("h")
            .arg(&more)
            .query(&mut c)
            .unwrap();
        let _: i64 = redis::cmd("HDEL")
            .arg("h")
            .arg(format!("f{}", extra + 20))
            .query(&mut c)
            .unwrap();
        extra += 40;
        calls += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert!(calls > 10, "a big hash is scanned in steps");
    for i in 0..3000 {
        assert_eq!(seen.get(&format!("f{i}")), Some(&format!("v{i}")));
    }
    let keys: Vec<String> = redis::cmd("HSCAN")
        .arg("h")
        .arg(0)
        .arg("MATCH")
        .arg("f1?")
        .arg("COUNT")
        .arg(100000)
        .arg("NOVALUES")
        .query::<(u64, Vec<String>)>(&mut c)
        .unwrap()
        .1;
    let mut keys = keys;
    keys.sort();
    let want: Vec<String> = (10..20).map(|i| format!("f{i}")).collect();
    assert_eq!(keys, want);
}

#[test]
fn big_hash_roundtrip_and_deletion() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let n = 20_000;
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..n)
        .map(|i: u32| {
            let mut f = i.to_le_bytes().to_vec();
            f.extend_from_slice(b"\x00\r\nfield");
            (f, vec![(i % 251) as u8; (i % 40) as usize])
        })
        .collect();
    for chunk in pairs.chunks(1000) {
        let _: i64 = redis::cmd("HSET")
            .arg("h")
            .arg(chunk)
            .query(&mut c)
            .unwrap();
    }
    let len: usize = redis::cmd("HLEN").arg("h").query(&mut c).unwrap();
    assert_eq!(len, n as usize);
    let all: HashMap<Vec<u8>, Vec<u8>> = redis::cmd("HGETALL").arg("h").query(&mut c).unwrap();
    let want: HashMap<Vec<u8>, Vec<u8>> = pairs.iter().cloned().collect();
    assert_eq!(all, want);
    let keys: Vec<Vec<u8>> = redis::cmd("HKEYS").arg("h").query(&mut c).unwrap();
    assert_eq!(keys.len(), n as usize);
    let v: Vec<u8> = redis::cmd("HGET")
        .arg("h")
        .arg(&pairs[777].0)
        .query(&mut c)
        .unwrap();
    assert_eq!(v, pairs[777].1);
    let inc: i64 = redis::cmd("HINCRBY")
        .arg("h")
        .arg("counter")
        .arg(41)
        .query(&mut c)
        .unwrap();
    assert_eq!(inc, 41);
    let d: i64 = redis::cmd("HDEL")
        .arg("h")
        .arg("counter")
        .query(&mut c)
        .unwrap();
    assert_eq!(d, 1);
    for chunk in pairs.chunks(1000) {
        let fields: Vec<&Vec<u8>> = chunk.iter().map(|p| &p.0).collect();
        let d: i64 = redis::cmd("HDEL")
            .arg("h")
            .arg(fields)
            .query(&mut c)
            .unwrap();
        assert_eq!(d, 1000);
    }
    let e: i64 = redis::cmd("EXISTS").arg("h").query(&mut c).unwrap();
    assert_eq!(e, 0);
}

#[test]
fn writes_signal_watchers_and_failed_ones_do_not() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let mut other = s.raw();
    run(&mut r, &[("HSET h a 1", b":1\r\n")]);
    // A write that changes nothing (HDEL of an absent field, HSETNX of a present one) does
    // not abort the transaction.
    run(&mut r, &[("WATCH h", b"+OK\r\n")]);
    run(
        &mut other,
        &[
            ("HDEL h zz", b":0\r\n"),
            (
                "HINCRBY h a x",
                b"-ERR value is not an integer or out of range\r\n",
            ),
        ],
    );
    run(
        &mut r,
        &[
            ("MULTI", b"+OK\r\n"),
            ("HGET h a", b"+QUEUED\r\n"),
            ("EXEC", b"*1\r\n$1\r\n1\r\n"),
        ],
    );
    run(&mut r, &[("WATCH h", b"+OK\r\n")]);
    run(&mut other, &[("HSET h a 2", b":0\r\n")]);
    run(
        &mut r,
        &[
            ("MULTI", b"+OK\r\n"),
            ("HGET h a", b"+QUEUED\r\n"),
            ("EXEC", b"*-1\r\n"),
        ],
    );
}

// ---- Field expiry (Redis 7.4: HEXPIRE family, HTTL family, HPERSIST). The exact replies
// are Redis 7.4's documented ones (Debian's redis-server 7.0 has no such commands); times
// are far in the future (4102444800 = 2100-01-01) or already past, so they never depend on
// the clock.

const FIELD_TTL: Steps = &[
    ("HSET h a 1 b 2 c 3", b":3\r\n"),
    ("OBJECT ENCODING h", b"$8\r\nlistpack\r\n"),
    (
        "HEXPIREAT h 4102444800 FIELDS 2 a zz",
        b"*2\r\n:1\r\n:-2\r\n",
    ),
    ("OBJECT ENCODING h", b"$10\r\nlistpackex\r\n"),
    (
        "HEXPIRETIME h FIELDS 3 a b zz",
        b"*3\r\n:4102444800\r\n:-1\r\n:-2\r\n",
    ),
    ("HPEXPIRETIME h FIELDS 1 a", b"*1\r\n:4102444800000\r\n"),
    (
        "HEXPIREAT h 4102444900 NX FIELDS 2 a b",
        b"*2\r\n:0\r\n:1\r\n",
    ),
    (
        "HPEXPIREAT h 4102444800001 XX FIELDS 2 a c",
        b"*2\r\n:1\r\n:0\r\n",
    ),
    (
        "HEXPIREAT h 4102444850 GT FIELDS 3 a b c",
        b"*3\r\n:1\r\n:0\r\n:0\r\n",
    ),
    (
        "HEXPIREAT h 4102444820 lt FIELDS 3 a b c",
        b"*3\r\n:1\r\n:1\r\n:1\r\n",
    ),
    (
        "HPEXPIRETIME h FIELDS 3 a b c",
        b"*3\r\n:4102444820000\r\n:4102444820000\r\n:4102444820000\r\n",
    ),
    ("HPERSIST h FIELDS 3 a zz a", b"*3\r\n:1\r\n:-2\r\n:-1\r\n"),
    ("HTTL h FIELDS 1 a", b"*1\r\n:-1\r\n"),
    // HSET clears a TTL, HINCRBY keeps it (Redis 7.4's HASH_SET_KEEP_TTL).
    ("HSET h b 20", b":0\r\n"),
    ("HINCRBY h c 5", b":8\r\n"),
    (
        "HEXPIRETIME h FIELDS 2 b c",
        b"*2\r\n:-1\r\n:4102444820\r\n",
    ),
    ("HINCRBYFLOAT h c 0.5", b"$3\r\n8.5\r\n"),
    ("HEXPIRETIME h FIELDS 1 c", b"*1\r\n:4102444820\r\n"),
    // A time already past deletes the field (2); the key goes with its last field.
    ("HEXPIREAT h 1 FIELDS 2 c c", b"*2\r\n:2\r\n:-2\r\n"),
    (
        "HGETALL h",
        b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n20\r\n",
    ),
    ("HPEXPIRE h 0 FIELDS 1 a", b"*1\r\n:2\r\n"),
    ("HEXPIRE h 0 XX FIELDS 1 b", b"*1\r\n:0\r\n"),
    ("HEXPIRE h 0 FIELDS 1 b", b"*1\r\n:2\r\n"),
    ("EXISTS h", b":0\r\n"),
    // A missing key: -2 for every field.
    ("HEXPIRE nokey 10 FIELDS 2 a b", b"*2\r\n:-2\r\n:-2\r\n"),
    ("HTTL nokey FIELDS 1 a", b"*1\r\n:-2\r\n"),
    ("HPERSIST nokey FIELDS 1 a", b"*1\r\n:-2\r\n"),
    // "listpackex" stays, even without any TTL left; a table is a table.
    ("HSET p x 1", b":1\r\n"),
    ("HPERSIST p FIELDS 1 x", b"*1\r\n:-1\r\n"),
    ("OBJECT ENCODING p", b"$8\r\nlistpack\r\n"),
    ("HEXPIRE p 100 FIELDS 1 nope", b"*1\r\n:-2\r\n"),
    ("OBJECT ENCODING p", b"$10\r\nlistpackex\r\n"),
    ("HSET p x 2", b":0\r\n"),
    ("OBJECT ENCODING p", b"$10\r\nlistpackex\r\n"),
];

const FIELD_TTL_ERRORS: Steps = &[
    ("HSET h a 1", b":1\r\n"),
    ("SET s x", b"+OK\r\n"),
    (
        "HEXPIRE s abc FIELDS 1 a",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    ),
    (
        "HTTL s FIELDS 0 a",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    ),
    (
        "HPERSIST s FIELDS 1 a",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    ),
    (
        "HEXPIRE h abc FIELDS 1 a",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "HEXPIRE h -1 FIELDS 1 a",
        b"-ERR invalid expire time, must be >= 0\r\n",
    ),
    (
        "HEXPIRE h 70368744178 FIELDS 1 a",
        b"-ERR invalid expire time in 'hexpire' command\r\n",
    ),
    (
        "HPEXPIREAT h 70368744177664 FIELDS 1 a",
        b"-ERR invalid expire time in 'hpexpireat' command\r\n",
    ),
    (
        "HEXPIRE h 10 FIELDS 0 a",
        b"-ERR Parameter `numFields` should be greater than 0\r\n",
    ),
    (
        "HEXPIRE h 10 FIELDS x a",
        b"-ERR Parameter `numFields` should be greater than 0\r\n",
    ),
    (
        "HEXPIRE h 10 FIELDS 2 a",
        b"-ERR The `numfields` parameter must match the number of arguments\r\n",
    ),
    (
        "HEXPIRE h 10 FIELDS 1 a b",
        b"-ERR The `numfields` parameter must match the number of arguments\r\n",
    ),
    (
        "HEXPIRE h 10 XX FIELD 1 a",
        b"-ERR Mandatory argument FIELDS is missing or not at the right position\r\n",
    ),
    (
        "HEXPIRE h 10 NX XX FIELDS 1 a",
        b"-ERR Mandatory argument FIELDS is missing or not at the right position\r\n",
    ),
    (
        "HEXPIRE h 10 NX FIELDS 1",
        b"-ERR The `numfields` parameter must match the number of arguments\r\n",
    ),
    (
        "HEXPIRE h 10 FIELDS",
        b"-ERR wrong number of arguments for 'hexpire' command\r\n",
    ),
    (
        "HTTL h FIELDS 0 a",
        b"-ERR Number of fields must be a positive integer\r\n",
    ),
    (
        "HPTTL h FIELDS -1 a",
        b"-ERR Number of fields must be a positive integer\r\n",
    ),
    (
        "HPERSIST h FIELDS 2 a",
        b"-ERR The `numfields` parameter must match the number of arguments\r\n",
    ),
    (
        "HEXPIRETIME h FIELD 1 a",
        b"-ERR Mandatory argument FIELDS is missing or not at the right position\r\n",
    ),
    (
        "HTTL h FIELDS 1",
        b"-ERR wrong number of arguments for 'httl' command\r\n",
    ),
    ("HGET h a", b"$1\r\n1\r\n"),
];

#[test]
fn field_ttl_exact_replies() {
    let s = Server::start(&[]);
    run(&mut s.raw(), FIELD_TTL);
    run(&mut s.raw(), &FIELD_TTL_ERRORS[..1]);
    run(&mut s.raw(), &FIELD_TTL_ERRORS[1..]);
}

#[test]
fn field_ttl_in_a_table() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    run(
        &mut r,
        &[
            ("CONFIG SET hash-max-listpack-entries 1", b"+OK\r\n"),
            ("HSET t a 1 b 2", b":2\r\n"),
            ("OBJECT ENCODING t", b"$9\r\nhashtable\r\n"),
            (
                "HEXPIREAT t 4102444800 FIELDS 2 a x",
                b"*2\r\n:1\r\n:-2\r\n",
            ),
            ("OBJECT ENCODING t", b"$9\r\nhashtable\r\n"),
            (
                "HEXPIRETIME t FIELDS 2 a b",
                b"*2\r\n:4102444800\r\n:-1\r\n",
            ),
            ("HEXPIREAT t 1 FIELDS 1 a", b"*1\r\n:2\r\n"),
            ("HLEN t", b":1\r\n"),
            ("HPERSIST t FIELDS 1 b", b"*1\r\n:-1\r\n"),
            // Conversion keeps TTLs.
            ("CONFIG SET hash-max-listpack-entries 128", b"+OK\r\n"),
            ("HSET l a 1", b":1\r\n"),
            ("HEXPIREAT l 4102444800 FIELDS 1 a", b"*1\r\n:1\r\n"),
            (
                "HSET l f 0123456789012345678901234567890123456789012345678901234567890123456789",
                b":1\r\n",
            ),
            ("OBJECT ENCODING l", b"$9\r\nhashtable\r\n"),
            (
                "HEXPIRETIME l FIELDS 2 a f",
                b"*2\r\n:4102444800\r\n:-1\r\n",
            ),
        ],
    );
}

#[test]
fn ttl_replies_count_down_from_now() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let _: i64 = redis::cmd("HSET")
        .arg("h")
        .arg(&["a", "1", "b", "2"])
        .query(&mut c)
        .unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let r: Vec<i64> = redis::cmd("HEXPIRE")
        .arg("h")
        .arg(100)
        .arg("FIELDS")
        .arg(1)
        .arg("a")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, vec![1]);
    let r: Vec<i64> = redis::cmd("HPEXPIRE")
        .arg("h")
        .arg(50_000)
        .arg("FIELDS")
        .arg(1)
        .arg("b")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, vec![1]);
    let ttl: Vec<i64> = redis::cmd("HTTL")
        .arg("h")
        .arg("FIELDS")
        .arg(2)
        .arg("a")
        .arg("b")
        .query(&mut c)
        .unwrap();
    assert!((99..=100).contains(&ttl[0]), "{ttl:?}");
    assert!((49..=50).contains(&ttl[1]), "{ttl:?}");
    let pttl: Vec<i64> = redis::cmd("HPTTL")
        .arg("h")
        .arg("FIELDS")
        .arg(2)
        .arg("a")
        .arg("b")
        .query(&mut c)
        .unwrap();
    assert!((90_000..=100_000).contains(&pttl[0]), "{pttl:?}");
    assert!((40_000..=50_000).contains(&pttl[1]), "{pttl:?}");
    let at: Vec<i64> = redis::cmd("HPEXPIRETIME")
        .arg("h")
        .arg("FIELDS")
        .arg(1)
        .arg("a")
        .query(&mut c)
        .unwrap();
    assert!(
        (at[0] - (now_ms + 100_000)).abs() < 10_000,
        "{at:?} vs {now_ms}"
    );
    let at_s: Vec<i64> = redis::cmd("HEXPIRETIME")
        .arg("h")
        .arg("FIELDS")
        .arg(1)
        .arg("a")
        .query(&mut c)
        .unwrap();
    assert_eq!(at_s[0], (at[0] + 999) / 1000);
}

/// A field past its TTL is gone for every command, in both encodings, and the key goes with
/// its last field. Only "after" is checked (TTL 1 ms, then a pause), so timing cannot flake.
#[test]
fn expired_fields_are_invisible_everywhere() {
    let s = Server::start(&[]);
    let mut c = s.client();
    for (key, n) in [("small", 4usize), ("big", 300)] {
        let pairs: Vec<(String, String)> =
            (0..n).map(|i| (format!("f{i}"), format!("v{i}"))).collect();
        let _: i64 = redis::cmd("HSET")
            .arg(key)
            .arg(&pairs)
            .query(&mut c)
            .unwrap();
        // Every field but f0 expires in 1 ms.
        let doomed: Vec<String> = (1..n).map(|i| format!("f{i}")).collect();
        let r: Vec<i64> = redis::cmd("HPEXPIRE")
            .arg(key)
            .arg(1)
            .arg("FIELDS")
            .arg(doomed.len())
            .arg(&doomed)
            .query(&mut c)
            .unwrap();
        assert!(r.iter().all(|&x| x == 1));
    }
    std::thread::sleep(std::time::Duration::from_millis(30));
    for key in ["small", "big"] {
        let v: Option<String> = redis::cmd("HGET").arg(key).arg("f1").query(&mut c).unwrap();
        assert_eq!(v, None, "{key}");
        let e: i64 = redis::cmd("HEXISTS")
            .arg(key)
            .arg("f2")
            .query(&mut c)
            .unwrap();
        assert_eq!(e, 0);
        let l: i64 = redis::cmd("HSTRLEN")
            .arg(key)
            .arg("f2")
            .query(&mut c)
            .unwrap();
        assert_eq!(l, 0);
        let m: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(key)
            .arg("f0")
            .arg("f3")
            .query(&mut c)
            .unwrap();
        assert_eq!(m, vec![Some("v0".to_string()), None]);
        let (cur, items): (u64, Vec<String>) = redis::cmd("HSCAN")
            .arg(key)
            .arg(0)
            .arg("COUNT")
            .arg(1000)
            .query(&mut c)
            .unwrap();
        assert_eq!(
            (cur, items),
            (0, vec!["f0".to_string(), "v0".to_string()]),
            "{key}"
        );
        let len: i64 = redis::cmd("HLEN").arg(key).query(&mut c).unwrap();
        assert_eq!(len, 1, "{key}");
        let all: HashMap<String, String> = redis::cmd("HGETALL").arg(key).query(&mut c).unwrap();
        assert_eq!(all, HashMap::from([("f0".to_string(), "v0".to_string())]));
        let rf: Vec<String> = redis::cmd("HRANDFIELD")
            .arg(key)
            .arg(-5)
            .query(&mut c)
            .unwrap();
        assert!(rf.iter().all(|f| f == "f0"));
        let t: Vec<i64> = redis::cmd("HTTL")
            .arg(key)
            .arg("FIELDS")
            .arg(2)
            .arg("f0")
            .arg("f1")
            .query(&mut c)
            .unwrap();
        assert_eq!(t, vec![-1, -2]);
        // Writing a dead field creates it anew.
        let n: i64 = redis::cmd("HSET")
            .arg(key)
            .arg("f1")
            .arg("x")
            .query(&mut c)
            .unwrap();
        assert_eq!(n, 1);
        let d: i64 = redis::cmd("HDEL")
            .arg(key)
            .arg("f1")
            .arg("f2")
            .query(&mut c)
            .unwrap();
        assert_eq!(d, 1);
        // The last field expires: the key goes.
        let r: Vec<i64> = redis::cmd("HPEXPIRE")
            .arg(key)
            .arg(1)
            .arg("FIELDS")
            .arg(1)
            .arg("f0")
            .query(&mut c)
            .unwrap();
        assert_eq!(r, vec![1]);
    }
    std::thread::sleep(std::time::Duration::from_millis(30));
    let n: i64 = redis::cmd("EXISTS")
        .arg("small")
        .arg("big")
        .query(&mut c)
        .unwrap();
    // The keys go on the first access (or earlier, by the active cycle).
    let l: i64 = redis::cmd("HLEN").arg("small").query(&mut c).unwrap();
    let g: Option<String> = redis::cmd("HGET")
        .arg("big")
        .arg("f0")
        .query(&mut c)
        .unwrap();
    assert_eq!((l, g), (0, None));
    let n2: i64 = redis::cmd("EXISTS")
        .arg("small")
        .arg("big")
        .query(&mut c)
        .unwrap();
    assert!(n <= 2);
    assert_eq!(n2, 0);
}

#[test]
fn field_expiry_signals_watchers() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    run(
        &mut r,
        &[
            ("HSET h a 1 b 2", b":2\r\n"),
            ("WATCH h", b"+OK\r\n"),
            ("HEXPIRE h 100 NX FIELDS 1 zz", b"*1\r\n:-2\r\n"),
            ("MULTI", b"+OK\r\n"),
            ("PING", b"+QUEUED\r\n"),
            ("EXEC", b"*1\r\n+PONG\r\n"),
            ("WATCH h", b"+OK\r\n"),
            ("HEXPIRE h 100 FIELDS 1 a", b"*1\r\n:1\r\n"),
            ("MULTI", b"+OK\r\n"),
            ("PING", b"+QUEUED\r\n"),
            ("EXEC", b"*-1\r\n"),
            ("WATCH h", b"+OK\r\n"),
            ("HPERSIST h FIELDS 1 a", b"*1\r\n:1\r\n"),
            ("MULTI", b"+OK\r\n"),
            ("PING", b"+QUEUED\r\n"),
            ("EXEC", b"*-1\r\n"),
        ],
    );
}

/// Expired fields are removed by the active expiry cycle without any client reading them:
/// memory comes back, and a hash whose last field expires disappears (DBSIZE counts keys
/// without touching them).
#[test]
fn active_cycle_removes_expired_fields_nobody_reads() {
    let s = Server::start(&["--hz", "100"]);
    let mut c = s.client();
    // A small (listpack) hash and a big (table) one, on both threads' shards.
    for (key, n) in [
        ("small", 5usize),
        ("big", 3000),
        ("small2", 3),
        ("big2", 1000),
    ] {
        let pairs: Vec<(String, String)> = (0..n).map(|i| (format!("f{i}"), "v".into())).collect();
        let _: () = redis::cmd("HSET")
            .arg(key)
            .arg(&pairs)
            .query(&mut c)
            .unwrap();
        let fields: Vec<String> = (0..n).map(|i| format!("f{i}")).collect();
        let _: redis::Value = redis::cmd("HPEXPIRE")
            .arg(key)
            .arg(50)
            .arg("FIELDS")
            .arg(n)
            .arg(&fields)
            .query(&mut c)
            .unwrap();
    }
    // One field of "big2" keeps no TTL: that hash stays, with one field.
    let _: redis::Value = redis::cmd("HPERSIST")
        .arg("big2")
        .arg("FIELDS")
        .arg(1)
        .arg("f0")
        .query(&mut c)
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        if n == 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {n} keys");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let left: i64 = redis::cmd("HLEN").arg("big2").query(&mut c).unwrap();
    assert_eq!(left, 1);
}

#[test]
fn hrandfield_reply_of_big_values_is_bounded() {
    // A big value drawn many times: each WITHVALUES sample costs 100,018 bytes of reply
    // ($1 f and the value), so 10 fit in proto-max-bulk-len (1 MiB here) and 11 do not (the
    // bound of SRANDMEMBER and ZRANDMEMBER too; Redis would build any size).
    let s = Server::start(&[
        "--proto-max-bulk-len",
        "1mb",
        "--hash-max-listpack-value",
        "200000",
    ]);
    let mut c = s.client();
    let big = vec![b'v'; 100_000];
    for key in ["pack", "table"] {
        let _: i64 = redis::cmd("HSET")
            .arg(key)
            .arg("f")
            .arg(&big)
            .query(&mut c)
            .unwrap();
    }
    // Many fields: the hash leaves the listpack (each encoding has its own sampling loop).
    for i in 0..200 {
        let _: i64 = redis::cmd("HSET")
            .arg("table")
            .arg(format!("g{i}"))
            .arg(&big)
            .query(&mut c)
            .unwrap();
    }
    for (key, encoding) in [("pack", "listpack"), ("table", "hashtable")] {
        let enc: String = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(key)
            .query(&mut c)
            .unwrap();
        assert_eq!(enc, encoding);
        let got: Vec<Vec<u8>> = redis::cmd("HRANDFIELD")
            .arg(key)
            .arg(-10)
            .arg("WITHVALUES")
            .query(&mut c)
            .unwrap();
        assert_eq!(got.len(), 20);
        let err = redis::cmd("HRANDFIELD")
            .arg(key)
            .arg(-11)
            .arg("WITHVALUES")
            .query::<Vec<Vec<u8>>>(&mut c)
            .unwrap_err();
        assert_eq!(
            err.detail(),
            Some("count is too large for a reply"),
            "{key}"
        );
        // Without the values the same count is small.
        let got: Vec<Vec<u8>> = redis::cmd("HRANDFIELD")
            .arg(key)
            .arg(-11)
            .query(&mut c)
            .unwrap();
        assert_eq!(got.len(), 11);
    }
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}
