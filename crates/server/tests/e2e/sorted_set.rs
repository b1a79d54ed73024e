//! End-to-end tests of the sorted set commands. The byte-exact steps below were produced by a
//! real redis-server (7.0; these commands and replies are the same in 7.2) for the same
//! command sequence on an empty database, in RESP2 and in RESP3.

use crate::common::{cmd, Raw, Server};
use std::collections::HashSet;

type Steps = &'static [(&'static str, &'static [u8])];

fn run(r: &mut Raw, steps: Steps) {
    for (line, want) in steps {
        let args: Vec<&[u8]> = line.split(' ').map(|a| a.as_bytes()).collect();
        r.roundtrip(&cmd(&args), want);
    }
}

fn flush(r: &mut Raw) {
    r.roundtrip(&cmd(&[b"FLUSHALL"]), b"+OK\r\n");
}

fn hello3(r: &mut Raw) {
    r.send(&cmd(&[b"HELLO", b"3"]));
    r.send(&cmd(&[b"PING"]));
    let mut got = Vec::new();
    while !got.ends_with(b"+PONG\r\n") {
        let chunk = r.read_n(1);
        assert!(!chunk.is_empty(), "connection closed");
        got.extend_from_slice(&chunk);
    }
}

#[test]
fn commands_match_redis_byte_for_byte() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    flush(&mut r);
    run(&mut r, BASICS_RESP2);
    let mut r3 = s.raw();
    flush(&mut r3);
    hello3(&mut r3);
    run(&mut r3, BASICS_RESP3);
}

fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut k = redis::cmd(args[0]);
    for a in &args[1..] {
        k.arg(*a);
    }
    k.query(c).unwrap()
}

#[test]
fn encodings_follow_the_thresholds() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let _: () = q(&mut c, &["CONFIG", "SET", "zset-max-listpack-entries", "3"]);
    let _: i64 = q(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    let enc: String = q(&mut c, &["OBJECT", "ENCODING", "z"]);
    assert_eq!(enc, "listpack");
    let _: i64 = q(&mut c, &["ZADD", "z", "4", "d"]);
    let enc: String = q(&mut c, &["OBJECT", "ENCODING", "z"]);
    assert_eq!(enc, "skiplist");
    // Shrinking does not convert back...
    let _: i64 = q(&mut c, &["ZREM", "z", "a", "b", "c"]);
    let enc: String = q(&mut c, &["OBJECT", "ENCODING", "z"]);
    assert_eq!(enc, "skiplist");
    // ...but a store command's small result is a listpack again.
    let n: i64 = q(&mut c, &["ZUNIONSTORE", "u", "1", "z"]);
    assert_eq!(n, 1);
    let enc: String = q(&mut c, &["OBJECT", "ENCODING", "u"]);
    assert_eq!(enc, "listpack");
    let long = "x".repeat(65);
    let _: i64 = q(&mut c, &["ZADD", "v", "1", &long]);
    let enc: String = q(&mut c, &["OBJECT", "ENCODING", "v"]);
    assert_eq!(enc, "skiplist");
}

#[test]
fn multi_key_commands_across_shards() {
    let s = Server::start(&["--threads", "4"]);
    let mut c = s.client();
    // Many source keys: they land on different shards.
    for i in 0..20 {
        let k = format!("src{i}");
        let _: i64 = q(
            &mut c,
            &[
                "ZADD",
                &k,
                &i.to_string(),
                "common",
                "1",
                &format!("own{i}"),
            ],
        );
    }
    let keys: Vec<String> = (0..20).map(|i| format!("src{i}")).collect();
    let mut args = vec!["ZUNIONSTORE".to_string(), "dst".into(), "20".into()];
    args.extend(keys.iter().cloned());
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let n: i64 = q(&mut c, &refs);
    assert_eq!(n, 21);
    let score: f64 = q(&mut c, &["ZSCORE", "dst", "common"]);
    assert_eq!(score, (0..20).sum::<i32>() as f64);
    let mut args = vec!["ZINTER".to_string(), "20".into()];
    args.extend(keys.iter().cloned());
    args.push("WITHSCORES".into());
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let got: Vec<String> = q(&mut c, &refs);
    assert_eq!(got, vec!["common".to_string(), "190".into()]);
    let n: i64 = q(&mut c, &["ZDIFFSTORE", "d2", "2", "src3", "src4"]);
    assert_eq!(n, 1);
    let n: i64 = q(&mut c, &["ZRANGESTORE", "r", "dst", "0", "4"]);
    assert_eq!(n, 5);
    let v: Vec<redis::Value> = q(&mut c, &["ZMPOP", "3", "nope", "src5", "src6", "MAX"]);
    let got = v.into_iter().flatten_strings();
    assert_eq!(got, vec!["src5", "common", "5"]);
}

trait Flatten {
    fn flatten_strings(self) -> Vec<String>;
}

impl Flatten for std::vec::IntoIter<redis::Value> {
    fn flatten_strings(self) -> Vec<String> {
        fn walk(v: redis::Value, out: &mut Vec<String>) {
            match v {
                redis::Value::Array(items) => items.into_iter().for_each(|i| walk(i, out)),
                redis::Value::BulkString(b) => out.push(String::from_utf8(b).unwrap()),
                other => out.push(format!("{other:?}")),
            }
        }
        let mut out = Vec::new();
        self.for_each(|v| walk(v, &mut out));
        out
    }
}

#[test]
fn zscan_returns_every_member_present_throughout() {
    let s = Server::start(&[]);
    let mut c = s.client();
    for i in 0..500 {
        let _: i64 = q(&mut c, &["ZADD", "big", &i.to_string(), &format!("m{i}")]);
    }
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut step = 0;
    loop {
        let (next, items): (String, Vec<String>) =
            q(&mut c, &["ZSCAN", "big", &cursor, "COUNT", "20"]);
        for pair in items.chunks(2) {
            seen.insert(pair[0].clone());
        }
        // The set grows and shrinks during the iteration (rehashing both ways).
        step += 1;
        if step == 3 {
            for i in 500..3000 {
                let _: i64 = q(&mut c, &["ZADD", "big", "1", &format!("n{i}")]);
            }
        }
        if step == 6 {
            for i in 500..3000 {
                let _: i64 = q(&mut c, &["ZREM", "big", &format!("n{i}")]);
            }
        }
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    for i in 0..500 {
        assert!(seen.contains(&format!("m{i}")), "m{i} missing");
    }
}

#[test]
fn zrandmember_shapes() {
    let s = Server::start(&[]);
    let mut c = s.client();
    for i in 0..300 {
        let _: i64 = q(&mut c, &["ZADD", "z", &i.to_string(), &format!("m{i}")]);
    }
    let _: i64 = q(&mut c, &["ZADD", "small", "1", "a", "2", "b", "3", "c"]);
    for key in ["z", "small"] {
        let got: Vec<String> = q(&mut c, &["ZRANDMEMBER", key, "2"]);
        assert_eq!(got.len(), 2);
        assert_ne!(got[0], got[1]);
        let got: Vec<String> = q(&mut c, &["ZRANDMEMBER", key, "-50"]);
        assert_eq!(got.len(), 50);
        let got: Vec<String> = q(&mut c, &["ZRANDMEMBER", key, "1000", "WITHSCORES"]);
        let n: usize = q(&mut c, &["ZCARD", key]);
        assert_eq!(got.len(), 2 * n);
        let uniq: HashSet<&String> = got.iter().step_by(2).collect();
        assert_eq!(uniq.len(), n);
    }
    // A negative count is not turned into an allocation of its size (Redis would build it).
    for count in ["-4000000000000", "-16777217", "-9223372036854775807"] {
        let err = redis::cmd("ZRANDMEMBER")
            .arg("z")
            .arg(count)
            .query::<Vec<String>>(&mut c)
            .unwrap_err();
        assert_eq!(err.detail(), Some("count is too large for a reply"));
    }
    let pong: String = q(&mut c, &["PING"]);
    assert_eq!(pong, "PONG");
}

#[test]
fn zrandmember_reply_of_big_members_is_bounded() {
    // Members of 2,000 bytes: 2,009 bytes of reply per sample, so 500 samples fit in
    // proto-max-bulk-len (1 MiB here) and 600 do not, for a small and a big sorted set
    // (each has its own sampling loop).
    let s = Server::start(&["--proto-max-bulk-len", "1mb"]);
    let mut c = s.client();
    for (key, n) in [("small", 3), ("big", 600)] {
        for i in 0..n {
            let m = format!("{i:02000}");
            let _: i64 = redis::cmd("ZADD")
                .arg(key)
                .arg(i)
                .arg(m)
                .query(&mut c)
                .unwrap();
        }
        let got: Vec<String> = q(&mut c, &["ZRANDMEMBER", key, "-500"]);
        assert_eq!(got.len(), 500);
        let err = redis::cmd("ZRANDMEMBER")
            .arg(key)
            .arg(-600)
            .query::<Vec<String>>(&mut c)
            .unwrap_err();
        assert_eq!(
            err.detail(),
            Some("count is too large for a reply"),
            "{key}"
        );
        let got: Vec<String> = q(&mut c, &["ZRANDMEMBER", key, "-300", "WITHSCORES"]);
        assert_eq!(got.len(), 600);
    }
    let pong: String = q(&mut c, &["PING"]);
    assert_eq!(pong, "PONG");
}

#[test]
fn a_write_that_changes_nothing_leaves_watchers_alone() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let _: i64 = q(&mut c, &["ZADD", "z", "1", "a"]);
    let _: () = q(&mut c, &["WATCH", "z"]);
    let _: i64 = q(&mut c, &["ZADD", "z", "XX", "1", "nosuch"]);
    let _: i64 = q(&mut c, &["ZADD", "z", "1", "a"]);
    let _: i64 = q(&mut c, &["ZREM", "z", "nosuch"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: () = q(&mut c, &["PING"]);
    let r: Option<Vec<String>> = q(&mut c, &["EXEC"]);
    assert!(r.is_some(), "EXEC aborted by a no-op write");
    let _: () = q(&mut c, &["WATCH", "z"]);
    let _: f64 = q(&mut c, &["ZINCRBY", "z", "1", "a"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: () = q(&mut c, &["PING"]);
    let r: Option<Vec<String>> = q(&mut c, &["EXEC"]);
    assert!(r.is_none(), "EXEC ran after a real write");
}

const BASICS_RESP2: Steps = &[
    ("ZADD z 1 a 2 b 3 c", b":3\r\n"),
    ("ZADD z CH 5 a 2 b 9 d", b":2\r\n"),
    ("ZADD z NX 100 a 7 e", b":1\r\n"),
    ("ZADD z XX GT CH 1000 a 1 b", b":1\r\n"),
    ("ZADD z NX XX 1 a", b"-ERR XX and NX options at the same time are not compatible\r\n"),
    ("ZADD z GT LT 1 a", b"-ERR GT, LT, and/or NX options at the same time are not compatible\r\n"),
    ("ZADD z INCR 1 a 2 b", b"-ERR INCR option supports a single increment-element pair\r\n"),
    ("ZADD z INCR 5 a", b"$4\r\n1005\r\n"),
    ("ZADD z INCR NX 5 a", b"$-1\r\n"),
    ("ZADD z 1 a 2", b"-ERR syntax error\r\n"),
    ("ZADD z nan a", b"-ERR value is not a valid float\r\n"),
    ("ZADD z abc a", b"-ERR value is not a valid float\r\n"),
    ("ZINCRBY z 2.5 b", b"$3\r\n4.5\r\n"),
    ("ZINCRBY z -inf a", b"$4\r\n-inf\r\n"),
    ("ZINCRBY z +inf a", b"-ERR resulting score is not a number (NaN)\r\n"),
    ("ZADD z inf x -inf y", b":2\r\n"),
    ("ZSCORE z a", b"$4\r\n-inf\r\n"),
    ("ZSCORE z nosuch", b"$-1\r\n"),
    ("ZMSCORE z a nosuch b", b"*3\r\n$4\r\n-inf\r\n$-1\r\n$3\r\n4.5\r\n"),
    ("ZCARD z", b":7\r\n"),
    ("ZRANK z b", b":3\r\n"),
    ("ZREVRANK z b", b":3\r\n"),
    ("ZRANK z nosuch", b"$-1\r\n"),
    ("ZRANGE z 0 -1 WITHSCORES", b"*14\r\n$1\r\na\r\n$4\r\n-inf\r\n$1\r\ny\r\n$4\r\n-inf\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nb\r\n$3\r\n4.5\r\n$1\r\ne\r\n$1\r\n7\r\n$1\r\nd\r\n$1\r\n9\r\n$1\r\nx\r\n$3\r\ninf\r\n"),
    ("ZRANGE z 0 1 REV", b"*2\r\n$1\r\nx\r\n$1\r\nd\r\n"),
    ("ZREVRANGE z 0 -1 WITHSCORES", b"*14\r\n$1\r\nx\r\n$3\r\ninf\r\n$1\r\nd\r\n$1\r\n9\r\n$1\r\ne\r\n$1\r\n7\r\n$1\r\nb\r\n$3\r\n4.5\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\ny\r\n$4\r\n-inf\r\n$1\r\na\r\n$4\r\n-inf\r\n"),
    ("ZRANGE z (2 +inf BYSCORE LIMIT 1 2 WITHSCORES", b"*4\r\n$1\r\nb\r\n$3\r\n4.5\r\n$1\r\ne\r\n$1\r\n7\r\n"),
    ("ZRANGE z +inf (2 BYSCORE REV", b"*5\r\n$1\r\nx\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nb\r\n$1\r\nc\r\n"),
    ("ZRANGEBYSCORE z -inf 9 WITHSCORES", b"*12\r\n$1\r\na\r\n$4\r\n-inf\r\n$1\r\ny\r\n$4\r\n-inf\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nb\r\n$3\r\n4.5\r\n$1\r\ne\r\n$1\r\n7\r\n$1\r\nd\r\n$1\r\n9\r\n"),
    ("ZREVRANGEBYSCORE z 9 -inf LIMIT 0 2", b"*2\r\n$1\r\nd\r\n$1\r\ne\r\n"),
    ("ZRANGE z 0 1 LIMIT 0 1", b"-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n"),
    ("ZRANGE z - + BYLEX WITHSCORES", b"-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n"),
    ("ZRANGE z x y BYSCORE", b"-ERR min or max is not a float\r\n"),
    ("ZRANGE z a b BYLEX", b"-ERR min or max not valid string range item\r\n"),
    ("ZCOUNT z (2 +inf", b":5\r\n"),
    ("ZCOUNT z x 1", b"-ERR min or max is not a float\r\n"),
    ("ZREM z x y nosuch", b":2\r\n"),
    ("ZPOPMIN z", b"*2\r\n$1\r\na\r\n$4\r\n-inf\r\n"),
    ("ZPOPMAX z 2", b"*4\r\n$1\r\nd\r\n$1\r\n9\r\n$1\r\ne\r\n$1\r\n7\r\n"),
    ("ZPOPMIN z -1", b"-ERR value is out of range, must be positive\r\n"),
    ("ZREMRANGEBYRANK z 0 0", b":1\r\n"),
    ("ZRANGE z 0 -1", b"*1\r\n$1\r\nb\r\n"),
    ("ZADD l 0 a 0 b 0 c 0 d", b":4\r\n"),
    ("ZRANGEBYLEX l [b (d", b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n"),
    ("ZREVRANGEBYLEX l + - LIMIT 1 2", b"*2\r\n$1\r\nc\r\n$1\r\nb\r\n"),
    ("ZLEXCOUNT l - +", b":4\r\n"),
    ("ZLEXCOUNT l a +", b"-ERR min or max not valid string range item\r\n"),
    ("ZREMRANGEBYLEX l - [b", b":2\r\n"),
    ("ZREMRANGEBYSCORE l -inf +inf", b":2\r\n"),
    ("EXISTS l", b":0\r\n"),
    ("SET s x", b"+OK\r\n"),
    ("ZADD s 1 a", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZRANGE s 0 -1", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZSCAN s 0", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZSCAN z 0", b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\nb\r\n$3\r\n4.5\r\n"),
    ("ZSCAN nosuch 0", b"*2\r\n$1\r\n0\r\n*0\r\n"),
    ("ZRANDMEMBER nosuch", b"$-1\r\n"),
    ("ZRANDMEMBER z 0", b"*0\r\n"),
    ("ZRANDMEMBER z -9223372036854775808", b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"),
    ("ZUNIONSTORE u 2 z nosuch", b":1\r\n"),
    ("ZUNION 2 z l WITHSCORES", b"*2\r\n$1\r\nb\r\n$3\r\n4.5\r\n"),
    ("ZINTER 1 z WITHSCORES", b"*2\r\n$1\r\nb\r\n$3\r\n4.5\r\n"),
    ("ZDIFF 2 z u", b"*0\r\n"),
    ("ZINTERCARD 2 z u LIMIT 1", b":1\r\n"),
    ("ZUNION 0 z", b"-ERR at least 1 input key is needed for 'zunion' command\r\n"),
    ("ZMPOP 2 nosuch z MAX COUNT 5", b"*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$3\r\n4.5\r\n"),
    ("ZMPOP 1 z MIN", b"*-1\r\n"),
    ("ZUNION 2 z s", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZRANGESTORE d z 0 -1", b":0\r\n"),
];
const BASICS_RESP3: Steps = &[
    ("ZADD z 1 a 2 b 3 c", b":3\r\n"),
    ("ZADD z CH 5 a 2 b 9 d", b":2\r\n"),
    ("ZADD z NX 100 a 7 e", b":1\r\n"),
    ("ZADD z XX GT CH 1000 a 1 b", b":1\r\n"),
    ("ZADD z NX XX 1 a", b"-ERR XX and NX options at the same time are not compatible\r\n"),
    ("ZADD z GT LT 1 a", b"-ERR GT, LT, and/or NX options at the same time are not compatible\r\n"),
    ("ZADD z INCR 1 a 2 b", b"-ERR INCR option supports a single increment-element pair\r\n"),
    ("ZADD z INCR 5 a", b",1005\r\n"),
    ("ZADD z INCR NX 5 a", b"_\r\n"),
    ("ZADD z 1 a 2", b"-ERR syntax error\r\n"),
    ("ZADD z nan a", b"-ERR value is not a valid float\r\n"),
    ("ZADD z abc a", b"-ERR value is not a valid float\r\n"),
    ("ZINCRBY z 2.5 b", b",4.5\r\n"),
    ("ZINCRBY z -inf a", b",-inf\r\n"),
    ("ZINCRBY z +inf a", b"-ERR resulting score is not a number (NaN)\r\n"),
    ("ZADD z inf x -inf y", b":2\r\n"),
    ("ZSCORE z a", b",-inf\r\n"),
    ("ZSCORE z nosuch", b"_\r\n"),
    ("ZMSCORE z a nosuch b", b"*3\r\n,-inf\r\n_\r\n,4.5\r\n"),
    ("ZCARD z", b":7\r\n"),
    ("ZRANK z b", b":3\r\n"),
    ("ZREVRANK z b", b":3\r\n"),
    ("ZRANK z nosuch", b"_\r\n"),
    ("ZRANGE z 0 -1 WITHSCORES", b"*7\r\n*2\r\n$1\r\na\r\n,-inf\r\n*2\r\n$1\r\ny\r\n,-inf\r\n*2\r\n$1\r\nc\r\n,3\r\n*2\r\n$1\r\nb\r\n,4.5\r\n*2\r\n$1\r\ne\r\n,7\r\n*2\r\n$1\r\nd\r\n,9\r\n*2\r\n$1\r\nx\r\n,inf\r\n"),
    ("ZRANGE z 0 1 REV", b"*2\r\n$1\r\nx\r\n$1\r\nd\r\n"),
    ("ZREVRANGE z 0 -1 WITHSCORES", b"*7\r\n*2\r\n$1\r\nx\r\n,inf\r\n*2\r\n$1\r\nd\r\n,9\r\n*2\r\n$1\r\ne\r\n,7\r\n*2\r\n$1\r\nb\r\n,4.5\r\n*2\r\n$1\r\nc\r\n,3\r\n*2\r\n$1\r\ny\r\n,-inf\r\n*2\r\n$1\r\na\r\n,-inf\r\n"),
    ("ZRANGE z (2 +inf BYSCORE LIMIT 1 2 WITHSCORES", b"*2\r\n*2\r\n$1\r\nb\r\n,4.5\r\n*2\r\n$1\r\ne\r\n,7\r\n"),
    ("ZRANGE z +inf (2 BYSCORE REV", b"*5\r\n$1\r\nx\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nb\r\n$1\r\nc\r\n"),
    ("ZRANGEBYSCORE z -inf 9 WITHSCORES", b"*6\r\n*2\r\n$1\r\na\r\n,-inf\r\n*2\r\n$1\r\ny\r\n,-inf\r\n*2\r\n$1\r\nc\r\n,3\r\n*2\r\n$1\r\nb\r\n,4.5\r\n*2\r\n$1\r\ne\r\n,7\r\n*2\r\n$1\r\nd\r\n,9\r\n"),
    ("ZREVRANGEBYSCORE z 9 -inf LIMIT 0 2", b"*2\r\n$1\r\nd\r\n$1\r\ne\r\n"),
    ("ZRANGE z 0 1 LIMIT 0 1", b"-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n"),
    ("ZRANGE z - + BYLEX WITHSCORES", b"-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n"),
    ("ZRANGE z x y BYSCORE", b"-ERR min or max is not a float\r\n"),
    ("ZRANGE z a b BYLEX", b"-ERR min or max not valid string range item\r\n"),
    ("ZCOUNT z (2 +inf", b":5\r\n"),
    ("ZCOUNT z x 1", b"-ERR min or max is not a float\r\n"),
    ("ZREM z x y nosuch", b":2\r\n"),
    ("ZPOPMIN z", b"*2\r\n$1\r\na\r\n,-inf\r\n"),
    ("ZPOPMAX z 2", b"*2\r\n*2\r\n$1\r\nd\r\n,9\r\n*2\r\n$1\r\ne\r\n,7\r\n"),
    ("ZPOPMIN z -1", b"-ERR value is out of range, must be positive\r\n"),
    ("ZREMRANGEBYRANK z 0 0", b":1\r\n"),
    ("ZRANGE z 0 -1", b"*1\r\n$1\r\nb\r\n"),
    ("ZADD l 0 a 0 b 0 c 0 d", b":4\r\n"),
    ("ZRANGEBYLEX l [b (d", b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n"),
    ("ZREVRANGEBYLEX l + - LIMIT 1 2", b"*2\r\n$1\r\nc\r\n$1\r\nb\r\n"),
    ("ZLEXCOUNT l - +", b":4\r\n"),
    ("ZLEXCOUNT l a +", b"-ERR min or max not valid string range item\r\n"),
    ("ZREMRANGEBYLEX l - [b", b":2\r\n"),
    ("ZREMRANGEBYSCORE l -inf +inf", b":2\r\n"),
    ("EXISTS l", b":0\r\n"),
    ("SET s x", b"+OK\r\n"),
    ("ZADD s 1 a", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZRANGE s 0 -1", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZSCAN s 0", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZSCAN z 0", b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\nb\r\n$3\r\n4.5\r\n"),
    ("ZSCAN nosuch 0", b"*2\r\n$1\r\n0\r\n*0\r\n"),
    ("ZRANDMEMBER nosuch", b"_\r\n"),
    ("ZRANDMEMBER z 0", b"*0\r\n"),
    ("ZRANDMEMBER z -9223372036854775808", b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"),
    ("ZUNIONSTORE u 2 z nosuch", b":1\r\n"),
    ("ZUNION 2 z l WITHSCORES", b"*1\r\n*2\r\n$1\r\nb\r\n,4.5\r\n"),
    ("ZINTER 1 z WITHSCORES", b"*1\r\n*2\r\n$1\r\nb\r\n,4.5\r\n"),
    ("ZDIFF 2 z u", b"*0\r\n"),
    ("ZINTERCARD 2 z u LIMIT 1", b":1\r\n"),
    ("ZUNION 0 z", b"-ERR at least 1 input key is needed for 'zunion' command\r\n"),
    ("ZMPOP 2 nosuch z MAX COUNT 5", b"*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n,4.5\r\n"),
    ("ZMPOP 1 z MIN", b"_\r\n"),
    ("ZUNION 2 z s", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZRANGESTORE d z 0 -1", b":0\r\n"),
];

/// Plain sets as inputs of ZUNION/ZINTER/ZDIFF (and STORE forms) and ZINTERCARD: every member
/// has score 1. The byte-exact steps come from redis-server 7.0; with 4 shards the hashtags
/// {a}, {b}, {c}, {d} are on four different shards.
#[test]
fn plain_sets_are_inputs_with_score_one() {
    let s = Server::start(&["--threads", "4"]);
    let mut r = s.raw();
    flush(&mut r);
    run(&mut r, SET_INPUTS_RESP2);
    let mut r3 = s.raw();
    flush(&mut r3);
    hello3(&mut r3);
    run(&mut r3, SET_INPUTS_RESP3);

    // Encodings of the stored result, for inputs in every set encoding.
    let mut c = s.client();
    let ints: Vec<String> = (0..600).map(|i| (i * 2).to_string()).collect();
    let strs: Vec<String> = (0..129).map(|i| format!("e{i:03}")).collect();
    let _: i64 = redis::cmd("SADD")
        .arg("{a}ints")
        .arg(&ints)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("SADD")
        .arg("{b}s128")
        .arg(&strs[..128])
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("SADD")
        .arg("{c}s129")
        .arg(&strs)
        .query(&mut c)
        .unwrap();
    let _: i64 = q(&mut c, &["SADD", "{d}long", &"w".repeat(65), "4"]);
    let enc = |c: &mut redis::Connection, k: &str| -> String { q(c, &["OBJECT", "ENCODING", k]) };
    assert_eq!(enc(&mut c, "{a}ints"), "hashtable");
    assert_eq!(enc(&mut c, "{b}s128"), "listpack");
    assert_eq!(enc(&mut c, "{c}s129"), "hashtable");
    let n: i64 = q(&mut c, &["ZUNIONSTORE", "{b}d", "1", "{a}ints"]);
    assert_eq!(n, 600);
    assert_eq!(enc(&mut c, "{b}d"), "skiplist");
    let n: i64 = q(&mut c, &["ZUNIONSTORE", "{b}d", "1", "{b}s128"]);
    assert_eq!(n, 128);
    assert_eq!(enc(&mut c, "{b}d"), "listpack");
    let n: i64 = q(&mut c, &["ZDIFFSTORE", "{b}d", "2", "{c}s129", "{b}s128"]);
    assert_eq!(n, 1);
    assert_eq!(enc(&mut c, "{b}d"), "listpack");
    let n: i64 = q(&mut c, &["ZUNIONSTORE", "{b}d", "1", "{c}s129"]);
    assert_eq!(n, 129);
    assert_eq!(enc(&mut c, "{b}d"), "skiplist");
    let n: i64 = q(&mut c, &["ZINTERSTORE", "{b}d", "2", "{d}long", "{a}ints"]);
    assert_eq!(n, 1);
    assert_eq!(enc(&mut c, "{b}d"), "listpack");
    let n: i64 = q(&mut c, &["ZUNIONSTORE", "{b}d", "1", "{d}long"]);
    assert_eq!(n, 2);
    assert_eq!(enc(&mut c, "{b}d"), "skiplist");
    // Sorted by (score, member): all scores equal, so byte order ("0" < "10" < "100" ...).
    let first: Vec<String> = q(&mut c, &["ZUNION", "1", "{a}ints"]);
    assert_eq!(&first[..4], &["0", "10", "100", "1000"]);
    let n: i64 = q(
        &mut c,
        &["ZINTERCARD", "2", "{a}ints", "{a}ints", "LIMIT", "50"],
    );
    assert_eq!(n, 50);
    let n: i64 = q(
        &mut c,
        &["ZINTERCARD", "3", "{a}ints", "{c}s129", "{d}long"],
    );
    assert_eq!(n, 0);

    // Twenty sets on four shards, one hop each.
    for i in 0..20 {
        let k = format!("set{i}");
        let _: i64 = q(&mut c, &["SADD", &k, "common", &format!("own{i}")]);
    }
    let mut args = vec!["ZUNIONSTORE".to_string(), "dst".into(), "20".into()];
    args.extend((0..20).map(|i| format!("set{i}")));
    args.push("WEIGHTS".into());
    args.extend((0..20).map(|i| i.to_string()));
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let n: i64 = q(&mut c, &refs);
    assert_eq!(n, 21);
    let score: f64 = q(&mut c, &["ZSCORE", "dst", "common"]);
    assert_eq!(score, (0..20).sum::<i32>() as f64);
    let score: f64 = q(&mut c, &["ZSCORE", "dst", "own7"]);
    assert_eq!(score, 7.0);
    let mut args = vec!["ZINTER".to_string(), "20".into()];
    args.extend((0..20).map(|i| format!("set{i}")));
    args.push("WITHSCORES".into());
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let got: Vec<String> = q(&mut c, &refs);
    assert_eq!(got, vec!["common".to_string(), "20".into()]);
}

const SET_INPUTS_RESP2: Steps = &[
    ("SADD {a}si 3 1 2 -5 100", b":5\r\n"),
    ("SADD {b}sl b a c 1", b":4\r\n"),
    ("ZADD {c}z 10 1 20 2 30 07 40 x 0.5 b", b":5\r\n"),
    ("ZUNION 3 {a}si {b}sl {c}z WITHSCORES", b"*20\r\n$2\r\n-5\r\n$1\r\n1\r\n$3\r\n100\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nc\r\n$1\r\n1\r\n$1\r\nb\r\n$3\r\n1.5\r\n$1\r\n1\r\n$2\r\n12\r\n$1\r\n2\r\n$2\r\n21\r\n$2\r\n07\r\n$2\r\n30\r\n$1\r\nx\r\n$2\r\n40\r\n"),
    ("ZUNION 2 {a}si {c}z WEIGHTS 2 3 AGGREGATE MAX WITHSCORES", b"*16\r\n$1\r\nb\r\n$3\r\n1.5\r\n$2\r\n-5\r\n$1\r\n2\r\n$3\r\n100\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n$2\r\n30\r\n$1\r\n2\r\n$2\r\n60\r\n$2\r\n07\r\n$2\r\n90\r\n$1\r\nx\r\n$3\r\n120\r\n"),
    ("ZINTER 2 {c}z {a}si WEIGHTS 0.5 4 WITHSCORES", b"*4\r\n$1\r\n1\r\n$1\r\n9\r\n$1\r\n2\r\n$2\r\n14\r\n"),
    ("ZINTER 2 {a}si {b}sl AGGREGATE MIN WITHSCORES", b"*2\r\n$1\r\n1\r\n$1\r\n1\r\n"),
    ("ZINTER 2 {a}si {a}si WEIGHTS inf -inf WITHSCORES", b"*10\r\n$2\r\n-5\r\n$1\r\n0\r\n$1\r\n1\r\n$1\r\n0\r\n$3\r\n100\r\n$1\r\n0\r\n$1\r\n2\r\n$1\r\n0\r\n$1\r\n3\r\n$1\r\n0\r\n"),
    ("ZDIFF 2 {a}si {c}z WITHSCORES", b"*6\r\n$2\r\n-5\r\n$1\r\n1\r\n$3\r\n100\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n1\r\n"),
    ("ZDIFF 2 {b}sl {a}si", b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"),
    ("ZINTERCARD 2 {a}si {c}z", b":2\r\n"),
    ("ZINTERCARD 3 {a}si {b}sl {c}z LIMIT 1", b":1\r\n"),
    ("ZINTERCARD 1 {b}sl LIMIT 0", b":4\r\n"),
    ("ZUNIONSTORE {d}u 2 {a}si {b}sl WEIGHTS 1 -1", b":8\r\n"),
    ("ZRANGE {d}u 0 -1 WITHSCORES", b"*16\r\n$1\r\na\r\n$2\r\n-1\r\n$1\r\nb\r\n$2\r\n-1\r\n$1\r\nc\r\n$2\r\n-1\r\n$1\r\n1\r\n$1\r\n0\r\n$2\r\n-5\r\n$1\r\n1\r\n$3\r\n100\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n1\r\n"),
    ("OBJECT ENCODING {d}u", b"$8\r\nlistpack\r\n"),
    ("ZINTERSTORE {a}si 2 {a}si {c}z", b":2\r\n"),
    ("TYPE {a}si", b"+zset\r\n"),
    ("ZRANGE {a}si 0 -1 WITHSCORES", b"*4\r\n$1\r\n1\r\n$2\r\n11\r\n$1\r\n2\r\n$2\r\n21\r\n"),
    ("ZDIFFSTORE {d}u 2 {b}sl {b}sl", b":0\r\n"),
    ("EXISTS {d}u", b":0\r\n"),
    ("SET {d}str v", b"+OK\r\n"),
    ("ZUNION 2 {b}sl {d}str", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZINTERCARD 2 {d}str {b}sl LIMIT x", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZRANGESTORE {d}u {b}sl 0 -1", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZMPOP 1 {b}sl MIN", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
];

const SET_INPUTS_RESP3: Steps = &[
    ("SADD {a}si 3 1 2 -5 100", b":5\r\n"),
    ("SADD {b}sl b a c 1", b":4\r\n"),
    ("ZADD {c}z 10 1 20 2 30 07 40 x 0.5 b", b":5\r\n"),
    ("ZUNION 3 {a}si {b}sl {c}z WITHSCORES", b"*10\r\n*2\r\n$2\r\n-5\r\n,1\r\n*2\r\n$3\r\n100\r\n,1\r\n*2\r\n$1\r\n3\r\n,1\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nc\r\n,1\r\n*2\r\n$1\r\nb\r\n,1.5\r\n*2\r\n$1\r\n1\r\n,12\r\n*2\r\n$1\r\n2\r\n,21\r\n*2\r\n$2\r\n07\r\n,30\r\n*2\r\n$1\r\nx\r\n,40\r\n"),
    ("ZUNION 2 {a}si {c}z WEIGHTS 2 3 AGGREGATE MAX WITHSCORES", b"*8\r\n*2\r\n$1\r\nb\r\n,1.5\r\n*2\r\n$2\r\n-5\r\n,2\r\n*2\r\n$3\r\n100\r\n,2\r\n*2\r\n$1\r\n3\r\n,2\r\n*2\r\n$1\r\n1\r\n,30\r\n*2\r\n$1\r\n2\r\n,60\r\n*2\r\n$2\r\n07\r\n,90\r\n*2\r\n$1\r\nx\r\n,120\r\n"),
    ("ZINTER 2 {c}z {a}si WEIGHTS 0.5 4 WITHSCORES", b"*2\r\n*2\r\n$1\r\n1\r\n,9\r\n*2\r\n$1\r\n2\r\n,14\r\n"),
    ("ZINTER 2 {a}si {b}sl AGGREGATE MIN WITHSCORES", b"*1\r\n*2\r\n$1\r\n1\r\n,1\r\n"),
    ("ZINTER 2 {a}si {a}si WEIGHTS inf -inf WITHSCORES", b"*5\r\n*2\r\n$2\r\n-5\r\n,0\r\n*2\r\n$1\r\n1\r\n,0\r\n*2\r\n$3\r\n100\r\n,0\r\n*2\r\n$1\r\n2\r\n,0\r\n*2\r\n$1\r\n3\r\n,0\r\n"),
    ("ZDIFF 2 {a}si {c}z WITHSCORES", b"*3\r\n*2\r\n$2\r\n-5\r\n,1\r\n*2\r\n$3\r\n100\r\n,1\r\n*2\r\n$1\r\n3\r\n,1\r\n"),
    ("ZDIFF 2 {b}sl {a}si", b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"),
    ("ZINTERCARD 2 {a}si {c}z", b":2\r\n"),
    ("ZINTERCARD 3 {a}si {b}sl {c}z LIMIT 1", b":1\r\n"),
    ("ZINTERCARD 1 {b}sl LIMIT 0", b":4\r\n"),
    ("ZUNIONSTORE {d}u 2 {a}si {b}sl WEIGHTS 1 -1", b":8\r\n"),
    ("ZRANGE {d}u 0 -1 WITHSCORES", b"*8\r\n*2\r\n$1\r\na\r\n,-1\r\n*2\r\n$1\r\nb\r\n,-1\r\n*2\r\n$1\r\nc\r\n,-1\r\n*2\r\n$1\r\n1\r\n,0\r\n*2\r\n$2\r\n-5\r\n,1\r\n*2\r\n$3\r\n100\r\n,1\r\n*2\r\n$1\r\n2\r\n,1\r\n*2\r\n$1\r\n3\r\n,1\r\n"),
    ("OBJECT ENCODING {d}u", b"$8\r\nlistpack\r\n"),
    ("ZINTERSTORE {a}si 2 {a}si {c}z", b":2\r\n"),
    ("TYPE {a}si", b"+zset\r\n"),
    ("ZRANGE {a}si 0 -1 WITHSCORES", b"*2\r\n*2\r\n$1\r\n1\r\n,11\r\n*2\r\n$1\r\n2\r\n,21\r\n"),
    ("ZDIFFSTORE {d}u 2 {b}sl {b}sl", b":0\r\n"),
    ("EXISTS {d}u", b":0\r\n"),
    ("SET {d}str v", b"+OK\r\n"),
    ("ZUNION 2 {b}sl {d}str", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZINTERCARD 2 {d}str {b}sl LIMIT x", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZRANGESTORE {d}u {b}sl 0 -1", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("ZMPOP 1 {b}sl MIN", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
];

#[test]
fn zset_operations_copy_a_key_once_however_often_named() {
    // ZUNION/ZINTER/ZDIFF copied their inputs once per naming (and built a lookup table per
    // naming): one big sorted set named 200 times cost 200 copies. Now the namings share one
    // copy and one table. Replies checked against redis-server; keys "a" and "b" are on
    // different shards.
    let s = Server::start(&[]);
    let mut c = s.client();
    let _: i64 = q(&mut c, &["ZADD", "a", "1", "x", "2", "y", "3", "z"]);
    let _: i64 = q(&mut c, &["ZADD", "b", "5", "y", "6", "w"]);
    let _: i64 = q(&mut c, &["SADD", "s", "x", "w", "q"]);
    let got: Vec<String> = q(
        &mut c,
        &["ZUNION", "5", "a", "b", "a", "s", "a", "WITHSCORES"],
    );
    assert_eq!(got, ["q", "1", "x", "4", "w", "7", "z", "9", "y", "11"]);
    let got: Vec<String> = q(&mut c, &["ZINTER", "4", "a", "a", "b", "a", "WITHSCORES"]);
    assert_eq!(got, ["y", "11"]);
    let got: Vec<String> = q(
        &mut c,
        &[
            "ZINTER",
            "3",
            "a",
            "a",
            "a",
            "WEIGHTS",
            "1",
            "2",
            "3",
            "WITHSCORES",
        ],
    );
    assert_eq!(got, ["x", "6", "y", "12", "z", "18"]);
    let got: Vec<String> = q(&mut c, &["ZDIFF", "3", "a", "b", "b", "WITHSCORES"]);
    assert_eq!(got, ["x", "1", "z", "3"]);
    let got: Vec<String> = q(&mut c, &["ZDIFF", "2", "a", "a"]);
    assert!(got.is_empty());
    let n: i64 = q(&mut c, &["ZINTERCARD", "3", "a", "a", "a", "LIMIT", "2"]);
    assert_eq!(n, 2);
    let n: i64 = q(
        &mut c,
        &[
            "ZUNIONSTORE",
            "d",
            "4",
            "a",
            "a",
            "nokey",
            "b",
            "WEIGHTS",
            "1",
            "1",
            "1",
            "2",
        ],
    );
    assert_eq!(n, 4);
    let got: Vec<String> = q(&mut c, &["ZRANGE", "d", "0", "-1", "WITHSCORES"]);
    assert_eq!(got, ["x", "2", "z", "6", "w", "12", "y", "14"]);
    // One big input named 200 times.
    for i in (0..20_000).step_by(1000) {
        let mut add = redis::cmd("ZADD");
        add.arg("big");
        for j in i..i + 1000 {
            add.arg(j).arg(j);
        }
        let _: i64 = add.query(&mut c).unwrap();
    }
    let mut inter = redis::cmd("ZINTERCARD");
    inter.arg(200);
    let mut union = redis::cmd("ZUNIONSTORE");
    union.arg("u").arg(200);
    for _ in 0..200 {
        inter.arg("big");
        union.arg("big");
    }
    let n: i64 = inter.query(&mut c).unwrap();
    assert_eq!(n, 20_000);
    let n: i64 = union.query(&mut c).unwrap();
    assert_eq!(n, 20_000);
    let top: Vec<String> = q(&mut c, &["ZRANGE", "u", "-1", "-1", "WITHSCORES"]);
    assert_eq!(top, ["19999", "3999800"]);
    let pong: String = q(&mut c, &["PING"]);
    assert_eq!(pong, "PONG");
}
