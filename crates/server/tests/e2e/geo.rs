//! End-to-end tests of the geo commands. The byte-exact steps were produced by a real
//! redis-server (7.0; these replies are the same in 7.2) for the same command sequence on an
//! empty database, in RESP2 and RESP3. The differential scenarios in
//! tests/diff_scenarios_geo.py cover the rest (search edges, errors, random searches); these
//! tests add stores across shards, WATCH, and untrusted counts.

use crate::common::{cmd, Raw, Server};

type Steps = &'static [(&'static str, &'static [u8])];

fn run(r: &mut Raw, steps: Steps) {
    for (line, want) in steps {
        let args: Vec<&[u8]> = line.split(' ').map(|a| a.as_bytes()).collect();
        r.roundtrip(&cmd(&args), want);
    }
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

fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut k = redis::cmd(args[0]);
    for a in &args[1..] {
        k.arg(*a);
    }
    k.query(c).unwrap()
}

#[test]
fn commands_match_redis_byte_for_byte() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    run(&mut r, STEPS_RESP2);
    r.roundtrip(&cmd(&[b"FLUSHALL"]), b"+OK\r\n");
    let mut r3 = s.raw();
    hello3(&mut r3);
    run(&mut r3, STEPS_RESP3);
}

#[test]
fn stores_across_shards() {
    let s = Server::start(&["--threads", "4"]);
    let mut c = s.client();
    let _: i64 = q(
        &mut c,
        &[
            "GEOADD",
            "src",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ],
    );
    // Destinations spread over every shard; each store is checked from a fresh read.
    for i in 0..16 {
        let dst = format!("dst{i}");
        let n: i64 = q(
            &mut c,
            &[
                "GEOSEARCHSTORE",
                &dst,
                "src",
                "FROMMEMBER",
                "Palermo",
                "BYRADIUS",
                "200",
                "km",
            ],
        );
        assert_eq!(n, 2);
        let got: Vec<String> = q(&mut c, &["ZRANGE", &dst, "0", "-1"]);
        assert_eq!(got, vec!["Palermo", "Catania"]);
        let n: i64 = q(
            &mut c,
            &[
                "GEORADIUS",
                "src",
                "15",
                "37",
                "200",
                "km",
                "STOREDIST",
                &dst,
                "COUNT",
                "1",
            ],
        );
        assert_eq!(n, 1);
        let d: f64 = q(&mut c, &["ZSCORE", &dst, "Catania"]);
        assert!((d - 56.4413).abs() < 1e-3, "{d}");
        let n: i64 = q(
            &mut c,
            &[
                "GEORADIUSBYMEMBER",
                "src",
                "Palermo",
                "1",
                "m",
                "STORE",
                &dst,
            ],
        );
        assert_eq!(n, 1);
        // A search that finds nothing deletes the destination.
        let n: i64 = q(
            &mut c,
            &["GEORADIUS", "src", "0", "0", "1", "m", "STORE", &dst],
        );
        assert_eq!(n, 0);
        let e: i64 = q(&mut c, &["EXISTS", &dst]);
        assert_eq!(e, 0);
    }
}

#[test]
fn watch_sees_geo_writes() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let mut other = s.client();
    let _: i64 = q(&mut c, &["GEOADD", "g", "1", "1", "a"]);
    for (cmd_args, dst) in [
        (vec!["GEOADD", "g", "2", "2", "b"], "g"),
        (
            vec![
                "GEOSEARCHSTORE",
                "d",
                "g",
                "FROMLONLAT",
                "1",
                "1",
                "BYRADIUS",
                "500",
                "km",
            ],
            "d",
        ),
    ] {
        let _: () = q(&mut c, &["WATCH", dst]);
        let _: redis::Value = q(&mut other, &cmd_args);
        let _: () = q(&mut c, &["MULTI"]);
        let _: () = q(&mut c, &["PING"]);
        let res: redis::Value = q(&mut c, &["EXEC"]);
        assert_eq!(res, redis::Value::Nil, "{cmd_args:?}");
    }
    // A GEOADD that changes nothing does not touch the key.
    let _: () = q(&mut c, &["WATCH", "g"]);
    let _: i64 = q(&mut other, &["GEOADD", "g", "NX", "5", "5", "a"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: () = q(&mut c, &["PING"]);
    let res: Vec<String> = q(&mut c, &["EXEC"]);
    assert_eq!(res, vec!["PONG"]);
}

#[test]
fn huge_counts_and_many_points() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let mut args = vec!["GEOADD".to_string(), "g".into()];
    for i in 0..2000 {
        args.push(format!("{:.4}", (i % 50) as f64 * 0.01));
        args.push(format!("{:.4}", (i / 50) as f64 * 0.01));
        args.push(format!("p{i}"));
    }
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let n: i64 = q(&mut c, &refs);
    assert_eq!(n, 2000);
    let enc: String = q(&mut c, &["OBJECT", "ENCODING", "g"]);
    assert_eq!(enc, "skiplist");
    let max = "9223372036854775807";
    let all: Vec<String> = q(
        &mut c,
        &[
            "GEOSEARCH",
            "g",
            "FROMLONLAT",
            "0.2",
            "0.2",
            "BYBOX",
            "2000",
            "2000",
            "km",
            "COUNT",
            max,
        ],
    );
    assert_eq!(all.len(), 2000);
    let any: Vec<String> = q(
        &mut c,
        &[
            "GEOSEARCH",
            "g",
            "FROMLONLAT",
            "0.2",
            "0.2",
            "BYRADIUS",
            "2000",
            "km",
            "COUNT",
            "3",
            "ANY",
        ],
    );
    assert_eq!(any.len(), 3);
    let near: Vec<String> = q(
        &mut c,
        &["GEORADIUS_RO", "g", "0", "0", "2000", "km", "COUNT", "1"],
    );
    assert_eq!(near, vec!["p0"]);
}

const STEPS_RESP2: Steps = &[
    ("GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania", b":2\r\n"),
    ("GEOADD Sicily CH 13.361389 38.115556 Palermo 14 37 Gela", b":1\r\n"),
    ("GEOPOS Sicily Palermo nope", b"*2\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n*-1\r\n"),
    ("GEODIST Sicily Palermo Catania km", b"$8\r\n166.2742\r\n"),
    ("GEODIST Sicily Palermo nope", b"$-1\r\n"),
    ("GEOHASH Sicily Palermo Catania nope", b"*3\r\n$11\r\nsqc8b49rny0\r\n$11\r\nsqdtr74hyu0\r\n$-1\r\n"),
    ("GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC WITHDIST WITHCOORD WITHHASH", b"*3\r\n*4\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n:3479447370796909\r\n*2\r\n$20\r\n15.08726745843887329\r\n$20\r\n37.50266842333162032\r\n*4\r\n$4\r\nGela\r\n$7\r\n88.8287\r\n:3476101302610854\r\n*2\r\n$20\r\n14.00000184774398804\r\n$20\r\n37.00000026605963654\r\n*4\r\n$7\r\nPalermo\r\n$8\r\n190.4424\r\n:3479099956230698\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n"),
    ("GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 400 400 km DESC COUNT 2 WITHDIST", b"*2\r\n*2\r\n$7\r\nCatania\r\n$8\r\n166.2742\r\n*2\r\n$4\r\nGela\r\n$8\r\n136.2572\r\n"),
    ("GEORADIUS Sicily 15 37 200 km WITHDIST STORE d", b"-ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options\r\n"),
    ("GEORADIUS Sicily 200 37 200 km", b"-ERR invalid longitude,latitude pair 200.000000,37.000000\r\n"),
    ("GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ANY", b"-ERR the ANY argument requires COUNT argument\r\n"),
    ("GEOSEARCH Sicily BYRADIUS 200 km", b"-ERR wrong number of arguments for 'geosearch' command\r\n"),
    ("GEODIST Sicily Palermo Catania parsec", b"-ERR unsupported unit provided. please use M, KM, FT, MI\r\n"),
    ("GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km COUNT 2", b":2\r\n"),
    ("ZRANGE dst 0 -1", b"*2\r\n$4\r\nGela\r\n$7\r\nCatania\r\n"),
];
const STEPS_RESP3: Steps = &[
    ("GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania", b":2\r\n"),
    ("GEOADD Sicily CH 13.361389 38.115556 Palermo 14 37 Gela", b":1\r\n"),
    ("GEOPOS Sicily Palermo nope", b"*2\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n_\r\n"),
    ("GEODIST Sicily Palermo Catania km", b"$8\r\n166.2742\r\n"),
    ("GEODIST Sicily Palermo nope", b"_\r\n"),
    ("GEOHASH Sicily Palermo Catania nope", b"*3\r\n$11\r\nsqc8b49rny0\r\n$11\r\nsqdtr74hyu0\r\n_\r\n"),
    ("GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC WITHDIST WITHCOORD WITHHASH", b"*3\r\n*4\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n:3479447370796909\r\n*2\r\n,15.08726745843887329\r\n,37.50266842333162032\r\n*4\r\n$4\r\nGela\r\n$7\r\n88.8287\r\n:3476101302610854\r\n*2\r\n,14.00000184774398804\r\n,37.00000026605963654\r\n*4\r\n$7\r\nPalermo\r\n$8\r\n190.4424\r\n:3479099956230698\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n"),
    ("GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 400 400 km DESC COUNT 2 WITHDIST", b"*2\r\n*2\r\n$7\r\nCatania\r\n$8\r\n166.2742\r\n*2\r\n$4\r\nGela\r\n$8\r\n136.2572\r\n"),
    ("GEORADIUS Sicily 15 37 200 km WITHDIST STORE d", b"-ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options\r\n"),
    ("GEORADIUS Sicily 200 37 200 km", b"-ERR invalid longitude,latitude pair 200.000000,37.000000\r\n"),
    ("GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ANY", b"-ERR the ANY argument requires COUNT argument\r\n"),
    ("GEOSEARCH Sicily BYRADIUS 200 km", b"-ERR wrong number of arguments for 'geosearch' command\r\n"),
    ("GEODIST Sicily Palermo Catania parsec", b"-ERR unsupported unit provided. please use M, KM, FT, MI\r\n"),
    ("GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km COUNT 2", b":2\r\n"),
    ("ZRANGE dst 0 -1", b"*2\r\n$4\r\nGela\r\n$7\r\nCatania\r\n"),
];
