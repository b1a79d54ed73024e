//! End-to-end tests of the set commands over TCP (2 threads: keys "a" and "c" live on one
//! shard, "b" on the other, so multi-key commands over them cross shards).

use crate::common::{cmd, Raw, Server};
use redis::{Connection, Value};
use std::collections::{BTreeSet, HashSet};

const WRONG: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

/// Sends each command (words split on spaces) and checks the exact reply.
fn check(r: &mut Raw, cases: &[(&str, &str)]) {
    for (req, want) in cases {
        let args: Vec<&[u8]> = req.split(' ').map(str::as_bytes).collect();
        r.roundtrip(&cmd(&args), want.as_bytes());
    }
}

fn members(c: &mut Connection, key: &str) -> BTreeSet<Vec<u8>> {
    redis::cmd("SMEMBERS").arg(key).query(c).unwrap()
}

fn encoding(c: &mut Connection, key: &str) -> String {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(c)
        .unwrap()
}

fn sadd(c: &mut Connection, key: &str, ms: &[String]) -> i64 {
    redis::cmd("SADD").arg(key).arg(ms).query(c).unwrap()
}

#[test]
fn single_key_commands_byte_exact() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    check(
        &mut r,
        &[
            ("SADD s 3 1 2 1", ":3\r\n"),
            ("SCARD s", ":3\r\n"),
            ("SMEMBERS s", "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n"),
            ("SISMEMBER s 2", ":1\r\n"),
            ("SISMEMBER s 02", ":0\r\n"),
            ("SISMEMBER nokey 2", ":0\r\n"),
            ("SMISMEMBER s 1 x 3", "*3\r\n:1\r\n:0\r\n:1\r\n"),
            ("SMISMEMBER nokey a", "*1\r\n:0\r\n"),
            ("SREM s 1 9 1", ":1\r\n"),
            ("SREM nokey a", ":0\r\n"),
            ("SMEMBERS nokey", "*0\r\n"),
            ("SCARD nokey", ":0\r\n"),
            ("SRANDMEMBER nokey", "$-1\r\n"),
            ("SRANDMEMBER nokey 5", "*0\r\n"),
            ("SPOP nokey", "$-1\r\n"),
            ("SPOP nokey 5", "*0\r\n"),
            ("SSCAN nokey 0", "*2\r\n$1\r\n0\r\n*0\r\n"),
            ("SREM s 2 3", ":2\r\n"),
            ("EXISTS s", ":0\r\n"),
            ("SADD one m", ":1\r\n"),
            ("SRANDMEMBER one", "$1\r\nm\r\n"),
            ("SRANDMEMBER one -3", "*3\r\n$1\r\nm\r\n$1\r\nm\r\n$1\r\nm\r\n"),
            ("SRANDMEMBER one 3", "*1\r\n$1\r\nm\r\n"),
            ("SRANDMEMBER one 0", "*0\r\n"),
            ("SRANDMEMBER one 9223372036854775807", "*1\r\n$1\r\nm\r\n"),
            (
                "SRANDMEMBER one -9223372036854775808",
                "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n",
            ),
            ("SRANDMEMBER one x", "-ERR value is not an integer or out of range\r\n"),
            ("SRANDMEMBER one 1 2", "-ERR syntax error\r\n"),
            ("SPOP one -1", "-ERR value is out of range, must be positive\r\n"),
            ("SPOP one x", "-ERR value is out of range, must be positive\r\n"),
            ("SPOP one 1 2", "-ERR syntax error\r\n"),
            ("SPOP one 0", "*0\r\n"),
            ("SPOP one 9223372036854775807", "*1\r\n$1\r\nm\r\n"),
            ("EXISTS one", ":0\r\n"),
            ("SADD one m", ":1\r\n"),
            ("SPOP one", "$1\r\nm\r\n"),
            ("EXISTS one", ":0\r\n"),
            ("SADD", "-ERR wrong number of arguments for 'sadd' command\r\n"),
            ("SADD k", "-ERR wrong number of arguments for 'sadd' command\r\n"),
            ("SINTERCARD 1", "-ERR wrong number of arguments for 'sintercard' command\r\n"),
        ],
    );
    // RESP3: SMEMBERS, SPOP with a count and the set algebra reply sets; SRANDMEMBER arrays.
    check(&mut r, &[("SADD t 1", ":1\r\n")]);
    // HELLO 3's map ends with the "modules" array, the only empty array in it.
    r.send(&cmd(&[b"HELLO", b"3"]));
    let mut hello = Vec::new();
    while !hello.ends_with(b"*0\r\n") {
        let got = r.read_n(1);
        assert!(!got.is_empty(), "HELLO 3 reply cut short");
        hello.extend_from_slice(&got);
    }
    check(
        &mut r,
        &[
            ("SMEMBERS t", "~1\r\n$1\r\n1\r\n"),
            ("SMEMBERS nokey", "~0\r\n"),
            ("SINTER t", "~1\r\n$1\r\n1\r\n"),
            ("SUNION t nokey", "~1\r\n$1\r\n1\r\n"),
            ("SDIFF nokey t", "~0\r\n"),
            ("SRANDMEMBER t 2", "*1\r\n$1\r\n1\r\n"),
            ("SRANDMEMBER nokey", "_\r\n"),
            ("SPOP nokey 1", "~0\r\n"),
            ("SPOP t 1", "~1\r\n$1\r\n1\r\n"),
        ],
    );
}

#[test]
fn wrongtype_everywhere() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    check(&mut r, &[("SET str v", "+OK\r\n"), ("SADD s 1", ":1\r\n")]);
    for c in [
        "SADD str a",
        "SREM str a",
        "SCARD str",
        "SISMEMBER str a",
        "SMISMEMBER str a",
        "SMEMBERS str",
        "SRANDMEMBER str",
        "SRANDMEMBER str 2",
        "SPOP str",
        "SPOP str 2",
        "SSCAN str 0",
        "SINTER s str",
        "SINTER nokey str",
        "SUNION str s",
        "SDIFF nokey str",
        "SINTERCARD 2 s str",
        "SINTERSTORE d s str",
        "SUNIONSTORE d str",
        "SDIFFSTORE d s str",
        "SMOVE str s 1",
        "SMOVE s str 1",
        "SMOVE s str nomember",
    ] {
        check(&mut r, &[(c, WRONG)]);
    }
    check(
        &mut r,
        &[
            ("SMOVE nokey str x", ":0\r\n"),
            ("SSCAN str x", "-ERR invalid cursor\r\n"),
            ("SUNIONSTORE str s", ":1\r\n"),
            ("TYPE str", "+set\r\n"),
            ("SET str v", "+OK\r\n"),
            ("SINTERSTORE str s nokey", ":0\r\n"),
            ("EXISTS str", ":0\r\n"),
        ],
    );
}

#[test]
fn encodings_and_thresholds() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let ints: Vec<String> = (0..512).map(|i| i.to_string()).collect();
    assert_eq!(sadd(&mut c, "i", &ints), 512);
    assert_eq!(encoding(&mut c, "i"), "intset");
    sadd(&mut c, "i", &["512".into()]);
    assert_eq!(encoding(&mut c, "i"), "hashtable");
    sadd(&mut c, "i127", &ints[..127]);
    sadd(&mut c, "i127", &["x".into()]);
    assert_eq!(encoding(&mut c, "i127"), "listpack");
    sadd(&mut c, "i128", &ints[..128]);
    sadd(&mut c, "i128", &["x".into()]);
    assert_eq!(encoding(&mut c, "i128"), "hashtable");
    let strs: Vec<String> = (0..129).map(|i| format!("m{i}")).collect();
    sadd(&mut c, "l", &strs[..128]);
    assert_eq!(encoding(&mut c, "l"), "listpack");
    sadd(&mut c, "l", &strs[128..]);
    assert_eq!(encoding(&mut c, "l"), "hashtable");
    let _: i64 = redis::cmd("SREM")
        .arg("l")
        .arg(&strs[1..])
        .query(&mut c)
        .unwrap();
    assert_eq!(encoding(&mut c, "l"), "hashtable");
    sadd(&mut c, "v", &["y".repeat(64)]);
    assert_eq!(encoding(&mut c, "v"), "listpack");
    sadd(&mut c, "v", &["y".repeat(65)]);
    assert_eq!(encoding(&mut c, "v"), "hashtable");
    sadd(&mut c, "big", &strs);
    assert_eq!(encoding(&mut c, "big"), "hashtable");
    // The thresholds follow CONFIG SET.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("set-max-intset-entries")
        .arg("4")
        .arg("set-max-listpack-entries")
        .arg("3")
        .arg("set-max-listpack-value")
        .arg("2")
        .query(&mut c)
        .unwrap();
    sadd(&mut c, "ci", &ints[..4]);
    assert_eq!(encoding(&mut c, "ci"), "intset");
    sadd(&mut c, "ci", &ints[4..5]);
    assert_eq!(encoding(&mut c, "ci"), "hashtable");
    sadd(&mut c, "cl", &["ab".into(), "cd".into()]);
    assert_eq!(encoding(&mut c, "cl"), "listpack");
    sadd(&mut c, "cl", &["abc".into()]);
    assert_eq!(encoding(&mut c, "cl"), "hashtable");
    sadd(&mut c, "cw", &["100".into()]);
    sadd(&mut c, "cw", &["a".into()]);
    assert_eq!(
        encoding(&mut c, "cw"),
        "hashtable",
        "a 3-digit integer is too wide"
    );
}

#[test]
fn multi_key_across_shards_against_a_model() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let keys = ["a", "b", "c", "{t}a", "{t}b"];
    let mut model: Vec<BTreeSet<Vec<u8>>> = vec![BTreeSet::new(); keys.len()];
    let mut rng = 0x1234_5678_9abc_def1u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for round in 0..300 {
        let k = (next() % keys.len() as u64) as usize;
        let m = match next() % 3 {
            0 => (next() % 40).to_string(),
            1 => format!("s{}", next() % 40),
            _ => format!("{}", next() % 600),
        };
        match next() % 8 {
            0..=3 => {
                let added: i64 = redis::cmd("SADD")
                    .arg(keys[k])
                    .arg(&m)
                    .query(&mut c)
                    .unwrap();
                assert_eq!(added == 1, model[k].insert(m.clone().into_bytes()));
            }
            4 => {
                let n: i64 = redis::cmd("SREM")
                    .arg(keys[k])
                    .arg(&m)
                    .query(&mut c)
                    .unwrap();
                assert_eq!(n == 1, model[k].remove(m.as_bytes()));
            }
            5 => {
                let d = (next() % keys.len() as u64) as usize;
                let n: i64 = redis::cmd("SMOVE")
                    .arg(keys[k])
                    .arg(keys[d])
                    .arg(&m)
                    .query(&mut c)
                    .unwrap();
                let had = model[k].contains(m.as_bytes());
                assert_eq!(n == 1, had, "round {round}");
                if had && k != d {
                    model[k].remove(m.as_bytes());
                    model[d].insert(m.into_bytes());
                }
            }
            _ => {
                let (x, y, z) = (
                    (next() % keys.len() as u64) as usize,
                    (next() % keys.len() as u64) as usize,
                    (next() % keys.len() as u64) as usize,
                );
                let ks = [keys[x], keys[y]];
                let inter: BTreeSet<Vec<u8>> = model[x].intersection(&model[y]).cloned().collect();
                let union: BTreeSet<Vec<u8>> = model[x].union(&model[y]).cloned().collect();
                let diff: BTreeSet<Vec<u8>> = model[x].difference(&model[y]).cloned().collect();
                let got: BTreeSet<Vec<u8>> = redis::cmd("SINTER").arg(&ks).query(&mut c).unwrap();
                assert_eq!(got, inter);
                let got: BTreeSet<Vec<u8>> = redis::cmd("SUNION").arg(&ks).query(&mut c).unwrap();
                assert_eq!(got, union);
                let got: BTreeSet<Vec<u8>> = redis::cmd("SDIFF").arg(&ks).query(&mut c).unwrap();
                assert_eq!(got, diff);
                let n: usize = redis::cmd("SINTERCARD")
                    .arg(2)
                    .arg(&ks)
                    .query(&mut c)
                    .unwrap();
                assert_eq!(n, inter.len());
                let n: usize = redis::cmd("SINTERCARD")
                    .arg(2)
                    .arg(&ks)
                    .arg("LIMIT")
                    .arg(2)
                    .query(&mut c)
                    .unwrap();
                assert_eq!(n, inter.len().min(2));
                let (cmdname, result) = match next() % 3 {
                    0 => ("SINTERSTORE", inter),
                    1 => ("SUNIONSTORE", union),
                    _ => ("SDIFFSTORE", diff),
                };
                let n: usize = redis::cmd(cmdname)
                    .arg(keys[z])
                    .arg(&ks)
                    .query(&mut c)
                    .unwrap();
                assert_eq!(n, result.len(), "{cmdname}");
                model[z] = result;
            }
        }
        if round % 50 == 49 {
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(members(&mut c, k), model[i], "{k}");
                let exists: bool = redis::cmd("EXISTS").arg(k).query(&mut c).unwrap();
                assert_eq!(exists, !model[i].is_empty());
            }
        }
    }
}

#[test]
fn multi_key_commands_in_exec_and_watch() {
    let s = Server::start(&[]);
    let mut c = s.client();
    sadd(&mut c, "a", &["1".into(), "2".into()]);
    sadd(&mut c, "b", &["2".into(), "3".into()]);
    let (n, m): (i64, BTreeSet<String>) = redis::pipe()
        .atomic()
        .cmd("SUNIONSTORE")
        .arg("c")
        .arg("a")
        .arg("b")
        .cmd("SMEMBERS")
        .arg("c")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 3);
    assert_eq!(m.len(), 3);
    // A write that changes nothing leaves a WATCH alone; one that changes the set does not.
    let mut w = s.client();
    let _: () = redis::cmd("WATCH").arg("a").query(&mut w).unwrap();
    sadd(&mut c, "a", &["1".into()]);
    let _: i64 = redis::cmd("SREM").arg("a").arg("zz").query(&mut c).unwrap();
    let r: Value = redis::pipe().atomic().cmd("PING").query(&mut w).unwrap();
    assert_ne!(r, Value::Nil);
    let _: () = redis::cmd("WATCH").arg("a").query(&mut w).unwrap();
    let _: i64 = redis::cmd("SMOVE")
        .arg("b")
        .arg("a")
        .arg("3")
        .query(&mut c)
        .unwrap();
    let r: Option<Vec<String>> = redis::pipe().atomic().cmd("PING").query(&mut w).unwrap();
    assert_eq!(r, None);
}

#[test]
fn spop_and_srandmember_shapes() {
    let s = Server::start(&[]);
    let mut c = s.client();
    for (key, ms) in [
        ("ints", (0..100).map(|i| i.to_string()).collect::<Vec<_>>()),
        ("pack", (0..50).map(|i| format!("p{i}")).collect()),
        ("table", (0..1000).map(|i| format!("t{i}")).collect()),
    ] {
        sadd(&mut c, key, &ms);
        let all: HashSet<String> = ms.iter().cloned().collect();
        for count in [1usize, 5, 30, 49, 99, 500] {
            let got: Vec<String> = redis::cmd("SRANDMEMBER")
                .arg(key)
                .arg(count)
                .query(&mut c)
                .unwrap();
            assert_eq!(got.len(), count.min(ms.len()), "{key} {count}");
            let uniq: HashSet<&String> = got.iter().collect();
            assert_eq!(uniq.len(), got.len(), "{key}: distinct");
            assert!(got.iter().all(|m| all.contains(m)));
            let got: Vec<String> = redis::cmd("SRANDMEMBER")
                .arg(key)
                .arg(-(count as i64))
                .query(&mut c)
                .unwrap();
            assert_eq!(got.len(), count);
            assert!(got.iter().all(|m| all.contains(m)));
        }
        // Pop in steps of every strategy until the set is gone.
        let mut left = all.clone();
        for count in [1usize, 3, 10, 0, 40] {
            let got: Vec<String> = redis::cmd("SPOP")
                .arg(key)
                .arg(count)
                .query(&mut c)
                .unwrap();
            assert_eq!(got.len(), count.min(left.len()));
            for m in got {
                assert!(left.remove(&m), "{key}: popped {m} twice or never had it");
            }
            let n: usize = redis::cmd("SCARD").arg(key).query(&mut c).unwrap();
            assert_eq!(n, left.len());
        }
        let one: Option<String> = redis::cmd("SPOP").arg(key).query(&mut c).unwrap();
        if let Some(m) = one {
            assert!(left.remove(&m));
        }
        let rest: Vec<String> = redis::cmd("SPOP")
            .arg(key)
            .arg(100_000)
            .query(&mut c)
            .unwrap();
        assert_eq!(rest.into_iter().collect::<HashSet<_>>(), left);
        let exists: bool = redis::cmd("EXISTS").arg(key).query(&mut c).unwrap();
        assert!(!exists);
    }
    // Popping most of a hashtable rebuilds the rest compactly (Redis 7.2).
    let ms: Vec<String> = (0..300).map(|i| format!("h{i}")).collect();
    sadd(&mut c, "h", &ms);
    let _: Vec<String> = redis::cmd("SPOP").arg("h").arg(290).query(&mut c).unwrap();
    assert_eq!(encoding(&mut c, "h"), "listpack");
    assert_eq!(members(&mut c, "h").len(), 10);
}

#[test]
fn sscan_full_iteration_sees_every_stable_member() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let stable: Vec<String> = (0..3000).map(|i| format!("stable:{i}")).collect();
    sadd(&mut c, "big", &stable);
    let mut seen = HashSet::new();
    let mut cursor = 0u64;
    let mut round = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SSCAN")
            .arg("big")
            .arg(cursor)
            .arg("COUNT")
            .arg(50)
            .query(&mut c)
            .unwrap();
        seen.extend(batch);
        // Members come and go during the iteration (the table grows and shrinks).
        let extra: Vec<String> = (0..200).map(|i| format!("tmp:{round}:{i}")).collect();
        sadd(&mut c, "big", &extra);
        if round % 3 == 2 {
            let _: i64 = redis::cmd("SREM")
                .arg("big")
                .arg(&extra)
                .query(&mut c)
                .unwrap();
        }
        round += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
        assert!(round < 10_000);
    }
    for m in &stable {
        assert!(seen.contains(m), "missed {m}");
    }
    // MATCH filters; COUNT errors; a compact set answers in one step.
    let (next, batch): (u64, Vec<String>) = redis::cmd("SSCAN")
        .arg("big")
        .arg(0)
        .arg("MATCH")
        .arg("stable:1?")
        .arg("COUNT")
        .arg(100_000)
        .query(&mut c)
        .unwrap();
    assert_eq!(next, 0);
    assert_eq!(batch.len(), 10);
    let mut r = s.raw();
    check(
        &mut r,
        &[
            ("SADD small b a", ":2\r\n"),
            (
                "SSCAN small 0 COUNT 1",
                "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nb\r\n$1\r\na\r\n",
            ),
            (
                "SSCAN small 0 MATCH a",
                "*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n",
            ),
            ("SSCAN small 0 COUNT 0", "-ERR syntax error\r\n"),
            (
                "SSCAN small 0 COUNT x",
                "-ERR value is not an integer or out of range\r\n",
            ),
            ("SSCAN small 0 MATCH", "-ERR syntax error\r\n"),
            ("SSCAN small -", "-ERR invalid cursor\r\n"),
        ],
    );
}

#[test]
fn sintercard_errors() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    check(
        &mut r,
        &[
            ("SADD a 1 2 3", ":3\r\n"),
            ("SADD b 2 3 4", ":3\r\n"),
            ("SINTERCARD 2 a b", ":2\r\n"),
            ("SINTERCARD 2 a b LIMIT 1", ":1\r\n"),
            ("SINTERCARD 2 a b LIMIT 0", ":2\r\n"),
            (
                "SINTERCARD 0 a",
                "-ERR numkeys should be greater than 0\r\n",
            ),
            (
                "SINTERCARD x a",
                "-ERR numkeys should be greater than 0\r\n",
            ),
            (
                "SINTERCARD 3 a b",
                "-ERR Number of keys can't be greater than number of args\r\n",
            ),
            (
                "SINTERCARD 2 a b LIMIT -1",
                "-ERR LIMIT can't be negative\r\n",
            ),
            ("SINTERCARD 2 a b LIMIT", "-ERR syntax error\r\n"),
            ("SINTERCARD 1 a b", "-ERR syntax error\r\n"),
        ],
    );
}

/// The cross-shard paths (copy the base set, filter on the other shards) build the same
/// result, with the same encoding, as the one-shard path.
#[test]
fn cross_shard_results_match_one_shard_results() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let ints = |r: std::ops::Range<i64>, step: usize| -> Vec<String> {
        r.step_by(step).map(|i| i.to_string()).collect()
    };
    let strs = |r: std::ops::Range<i64>| -> Vec<String> { r.map(|i| format!("s{i}")).collect() };
    let cases: Vec<[Vec<String>; 3]> = vec![
        [ints(0..100, 1), ints(0..100, 2), ints(0..100, 3)],
        [strs(0..200), strs(100..150), strs(0..10)],
        [
            [ints(0..200, 1), strs(0..1)].concat(),
            [ints(0..400, 2), strs(0..1)].concat(),
            ints(0..300, 1),
        ],
        [strs(0..300), strs(0..5), strs(5..10)],
        [
            [ints(0..50, 1), strs(0..50)].concat(),
            strs(0..50),
            ints(0..10, 1),
        ],
    ];
    for (n, sets) in cases.iter().enumerate() {
        let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
        for names in [["a", "b", "c"], ["{t}a", "{t}b", "{t}c"]] {
            for (k, ms) in names.iter().zip(sets) {
                sadd(&mut c, k, ms);
            }
        }
        for op in ["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"] {
            for args in [
                vec![0, 1],
                vec![0, 1, 2],
                vec![1, 0],
                vec![2, 0, 1],
                vec![0, 0],
            ] {
                let cross: Vec<&str> = args.iter().map(|&i| ["a", "b", "c"][i]).collect();
                let local: Vec<&str> = args.iter().map(|&i| ["{t}a", "{t}b", "{t}c"][i]).collect();
                let n1: i64 = redis::cmd(op).arg("a").arg(&cross).query(&mut c).unwrap();
                let n2: i64 = redis::cmd(op)
                    .arg("{t}d")
                    .arg(&local)
                    .query(&mut c)
                    .unwrap();
                let ctx = format!("case {n} {op} {args:?}");
                assert_eq!(n1, n2, "{ctx}");
                if n1 > 0 {
                    assert_eq!(encoding(&mut c, "a"), encoding(&mut c, "{t}d"), "{ctx}");
                    assert_eq!(members(&mut c, "a"), members(&mut c, "{t}d"), "{ctx}");
                }
                // Restore "a" (it was the destination).
                let _: () = redis::cmd("DEL").arg("a").query(&mut c).unwrap();
                sadd(&mut c, "a", &sets[0]);
                let card: Vec<i64> = (0..2)
                    .map(|which| {
                        let ks = if which == 0 { &cross } else { &local };
                        redis::cmd("SINTERCARD")
                            .arg(ks.len())
                            .arg(ks)
                            .arg("LIMIT")
                            .arg(7)
                            .query(&mut c)
                            .unwrap()
                    })
                    .collect();
                assert_eq!(card[0], card[1], "{ctx}");
            }
        }
    }
}

const TOO_LARGE: &str = "-ERR count is too large for a reply\r\n";

#[test]
fn srandmember_negative_count_is_bounded() {
    // Redis builds whatever reply a negative count asks for (`SRANDMEMBER s -10000000000`
    // runs it out of memory). Darner refuses more than 2^24 samples, or a reply past
    // proto-max-bulk-len bytes, as for HRANDFIELD and ZRANDMEMBER (docs/compatibility.md).
    let s = Server::start(&["--proto-max-bulk-len", "1mb"]);
    let mut r = s.raw();
    check(
        &mut r,
        &[
            ("SADD s a b c", ":3\r\n"),
            ("SRANDMEMBER s -10000000000", TOO_LARGE),
            ("SRANDMEMBER s -9223372036854775807", TOO_LARGE),
            ("SRANDMEMBER s -16777217", TOO_LARGE),
            ("SADD n 1 2 3", ":3\r\n"),
            ("SRANDMEMBER n -16777217", TOO_LARGE),
            ("PING", "+PONG\r\n"),
        ],
    );
    let mut c = s.client();
    let got: Vec<String> = redis::cmd("SRANDMEMBER")
        .arg("s")
        .arg(-1000)
        .query(&mut c)
        .unwrap();
    assert_eq!(got.len(), 1000);
    // A big member drawn many times: each sample costs 100,010 bytes of reply, so 10 fit in
    // proto-max-bulk-len (1 MiB here) and 11 do not.
    let big = vec![b'x'; 100_000];
    let _: i64 = redis::cmd("SADD")
        .arg("big")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    let got: Vec<Vec<u8>> = redis::cmd("SRANDMEMBER")
        .arg("big")
        .arg(-10)
        .query(&mut c)
        .unwrap();
    assert_eq!(got, vec![big.clone(); 10]);
    let err = redis::cmd("SRANDMEMBER")
        .arg("big")
        .arg(-11)
        .query::<Vec<Vec<u8>>>(&mut c)
        .unwrap_err();
    assert_eq!(err.detail(), Some("count is too large for a reply"));
    // What was written of the refused reply is taken back: the replies around it, in one
    // pipeline and in one transaction, are intact.
    r.roundtrip(
        &[
            cmd(&[b"SCARD", b"s"]),
            cmd(&[b"SRANDMEMBER", b"big", b"-11"]),
            cmd(&[b"PING"]),
        ]
        .concat(),
        format!(":3\r\n{TOO_LARGE}+PONG\r\n").as_bytes(),
    );
    check(
        &mut r,
        &[
            ("MULTI", "+OK\r\n"),
            ("SCARD s", "+QUEUED\r\n"),
            ("SRANDMEMBER big -11", "+QUEUED\r\n"),
            ("SCARD big", "+QUEUED\r\n"),
            (
                "EXEC",
                "*3\r\n:3\r\n-ERR count is too large for a reply\r\n:1\r\n",
            ),
            ("PING", "+PONG\r\n"),
        ],
    );
}

#[test]
fn sunion_across_shards_of_many_and_repeated_keys() {
    // Across shards a union copies the sets: once per key however often it is named (it
    // was once per naming: one big set named 300 times took 700 MB), and the repeats are
    // matched by a map (it was a search per key: 100,000 keys took 12 s).
    let s = Server::start(&[]);
    let mut r = s.raw();
    check(
        &mut r,
        &[
            ("SADD a 1 2 x", ":3\r\n"),
            ("SADD b 2 3", ":2\r\n"),
            // Redis 7.2's order: a listpack result, members in the order they were added.
            (
                "SUNION a b a a b a",
                "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\nx\r\n$1\r\n3\r\n",
            ),
            ("SUNIONSTORE c a b a nokey b", ":4\r\n"),
            (
                "SMEMBERS c",
                "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\nx\r\n$1\r\n3\r\n",
            ),
            ("RPUSH l x", ":1\r\n"),
            ("SUNION a b a l", WRONG),
        ],
    );
    let mut c = s.client();
    let mut cmd = redis::cmd("SUNION");
    cmd.arg("a").arg("b");
    for i in 0..200_000 {
        cmd.arg(format!("k{i}"));
    }
    let start = std::time::Instant::now();
    let got: BTreeSet<String> = cmd.query(&mut c).unwrap();
    assert_eq!(got.len(), 4);
    assert!(
        start.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

/// Redis 7.2's t_set.c: SINTERSTORE's result becomes an intset when all its members are
/// integers and it fits one, even when it passed through a hash table (the smallest input
/// set was big); SUNIONSTORE/SDIFFSTORE build from an intset, which takes a small
/// non-integer result as a listpack (7.0, without set listpacks, answers hashtable).
#[test]
fn set_stores_choose_redis_encodings_for_big_inputs() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let ints = |r: std::ops::Range<usize>, step: usize| -> Vec<String> {
        r.step_by(step).map(|i| i.to_string()).collect()
    };
    let words = |p: &str, n: usize| -> Vec<String> { (0..n).map(|i| format!("{p}{i}")).collect() };
    sadd(
        &mut c,
        "{k}big1",
        &[ints(0..3000, 1), words("s", 300)].concat(),
    );
    sadd(
        &mut c,
        "{k}big2",
        &[ints(0..3000, 10), words("t", 300)].concat(),
    );
    sadd(
        &mut c,
        "{k}big3",
        &[ints(0..3000, 2), words("s", 50)].concat(),
    );
    sadd(&mut c, "{k}sm1", &words("a", 3));
    sadd(&mut c, "{k}sm2", &[words("a", 2), ints(1..4, 1)].concat());
    let store = |c: &mut Connection, op: &str, keys: &[&str]| -> i64 {
        let mut q = redis::cmd(op);
        q.arg("{k}d");
        for k in keys {
            q.arg(format!("{{k}}{k}"));
        }
        q.query(c).unwrap()
    };
    for (op, keys, n, enc) in [
        // 300 integers out of two hash tables: an intset.
        ("SINTERSTORE", &["big1", "big2"][..], 300, "intset"),
        // 1500 integers and 50 words: too many for a listpack.
        ("SINTERSTORE", &["big1", "big3"], 1550, "hashtable"),
        // Two words: a listpack.
        ("SINTERSTORE", &["sm1", "sm2"], 2, "listpack"),
        // Three sets, the smallest a hash table: 300 integers again.
        ("SINTERSTORE", &["big3", "big1", "big2"], 300, "intset"),
        ("SUNIONSTORE", &["sm1", "sm2"], 6, "listpack"),
        ("SDIFFSTORE", &["sm2", "sm1"], 3, "intset"),
        ("SDIFFSTORE", &["big2", "big1"], 300, "hashtable"),
    ] {
        assert_eq!(store(&mut c, op, keys), n, "{op} {keys:?}");
        assert_eq!(encoding(&mut c, "{k}d"), enc, "{op} {keys:?}");
    }
    // An all-integer intersection past set-max-intset-entries stays a hash table.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("set-max-intset-entries")
        .arg("100")
        .query(&mut c)
        .unwrap();
    assert_eq!(store(&mut c, "SINTERSTORE", &["big1", "big2"]), 300);
    assert_eq!(encoding(&mut c, "{k}d"), "hashtable");
}
