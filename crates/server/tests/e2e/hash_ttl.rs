//! End-to-end tests of Redis 8.0's HGETDEL, HGETEX and HSETEX, and of Dragonfly's HSETEX form.
//! Redis 7.2 has none of them: the exact replies follow Redis 8.0's t_hash.c (error texts and
//! their order) and Dragonfly's documented HSETEX. Absolute times are far in the future
//! (4102444800 = 2100-01-01) or long past, so that no exact reply depends on the clock; the
//! expiry itself is checked with short PX values and polling.

use crate::common::{cmd, run, Server, Steps};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
const NO_FIELDS: &[u8] =
    b"-ERR Mandatory argument FIELDS is missing or not at the right position\r\n";
const NUMFIELDS: &[u8] = b"-ERR Number of fields must be a positive integer\r\n";
const MISMATCH: &[u8] = b"-ERR The `numfields` parameter must match the number of arguments\r\n";
const SETEX_ARITY: &[u8] = b"-ERR wrong number of arguments for 'hsetex' command\r\n";

const HGETDEL: Steps = &[
    ("HSET h a 1 b 2 c 3", b":3\r\n"),
    // A field asked twice is deleted the first time.
    (
        "HGETDEL h FIELDS 4 a zz a b",
        b"*4\r\n$1\r\n1\r\n$-1\r\n$-1\r\n$1\r\n2\r\n",
    ),
    ("HGETALL h", b"*2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
    ("HGETDEL h fields 1 c", b"*1\r\n$1\r\n3\r\n"),
    ("EXISTS h", b":0\r\n"),
    ("HGETDEL nokey FIELDS 2 a b", b"*2\r\n$-1\r\n$-1\r\n"),
    ("EXISTS nokey", b":0\r\n"),
    // Errors: the type first, then FIELDS, the count, the match.
    ("SET s x", b"+OK\r\n"),
    ("HGETDEL s FIELDS 0 a", WRONGTYPE),
    ("HSET h a 1", b":1\r\n"),
    ("HGETDEL h FIELD 1 a", NO_FIELDS),
    ("HGETDEL h a FIELDS 1 a", NO_FIELDS),
    ("HGETDEL h FIELDS 0 a", NUMFIELDS),
    ("HGETDEL h FIELDS -1 a", NUMFIELDS),
    ("HGETDEL h FIELDS x a", NUMFIELDS),
    ("HGETDEL h FIELDS 2 a", MISMATCH),
    ("HGETDEL h FIELDS 1 a b", MISMATCH),
    (
        "HGETDEL h FIELDS 1",
        b"-ERR wrong number of arguments for 'hgetdel' command\r\n",
    ),
    ("HGET h a", b"$1\r\n1\r\n"),
    // A field with a TTL goes like any other.
    ("HSET h b 2", b":1\r\n"),
    ("HPEXPIREAT h 4102444800000 FIELDS 1 b", b"*1\r\n:1\r\n"),
    ("HGETDEL h FIELDS 1 b", b"*1\r\n$1\r\n2\r\n"),
    ("OBJECT ENCODING h", b"$10\r\nlistpackex\r\n"),
];

const HGETEX: Steps = &[
    ("HSET h a 1 b 2 c 3", b":3\r\n"),
    // No option: HMGET, and the encoding stays.
    ("HGETEX h FIELDS 2 a zz", b"*2\r\n$1\r\n1\r\n$-1\r\n"),
    ("OBJECT ENCODING h", b"$8\r\nlistpack\r\n"),
    // An option turns a listpack into listpackex, even when no field is found.
    ("HGETEX h PERSIST FIELDS 1 zz", b"*1\r\n$-1\r\n"),
    ("OBJECT ENCODING h", b"$10\r\nlistpackex\r\n"),
    (
        "HGETEX h EXAT 4102444800 FIELDS 3 a zz b",
        b"*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n",
    ),
    (
        "HEXPIRETIME h FIELDS 3 a b c",
        b"*3\r\n:4102444800\r\n:4102444800\r\n:-1\r\n",
    ),
    (
        "HGETEX h pxat 4102444800123 FIELDS 1 c",
        b"*1\r\n$1\r\n3\r\n",
    ),
    ("HPEXPIRETIME h FIELDS 1 c", b"*1\r\n:4102444800123\r\n"),
    (
        "HGETEX h PERSIST FIELDS 2 a zz",
        b"*2\r\n$1\r\n1\r\n$-1\r\n",
    ),
    (
        "HEXPIRETIME h FIELDS 2 a b",
        b"*2\r\n:-1\r\n:4102444800\r\n",
    ),
    ("HGETEX h EX 1000 FIELDS 1 a", b"*1\r\n$1\r\n1\r\n"),
    ("HTTL h FIELDS 1 a", b"*1\r\n:1000\r\n"),
    // EX 0 and a past time return the value and delete the field; the key goes with the
    // last one.
    ("HGETEX h EX 0 FIELDS 2 a a", b"*2\r\n$1\r\n1\r\n$-1\r\n"),
    ("HGETEX h EXAT 1 FIELDS 1 b", b"*1\r\n$1\r\n2\r\n"),
    ("HKEYS h", b"*1\r\n$1\r\nc\r\n"),
    ("HGETEX h PX 0 FIELDS 1 c", b"*1\r\n$1\r\n3\r\n"),
    ("EXISTS h", b":0\r\n"),
    ("HGETEX nokey EX 10 FIELDS 2 a b", b"*2\r\n$-1\r\n$-1\r\n"),
    ("EXISTS nokey", b":0\r\n"),
    // A hashtable stays one.
    ("CONFIG SET hash-max-listpack-entries 1", b"+OK\r\n"),
    ("HSET t a 1 b 2", b":2\r\n"),
    (
        "HGETEX t PXAT 4102444800000 FIELDS 1 b",
        b"*1\r\n$1\r\n2\r\n",
    ),
    ("OBJECT ENCODING t", b"$9\r\nhashtable\r\n"),
    (
        "HPEXPIRETIME t FIELDS 2 a b",
        b"*2\r\n:-1\r\n:4102444800000\r\n",
    ),
    ("CONFIG SET hash-max-listpack-entries 128", b"+OK\r\n"),
];

const HGETEX_ERRORS: Steps = &[
    ("HSET h a 1", b":1\r\n"),
    ("SET s x", b"+OK\r\n"),
    // The type is checked first.
    ("HGETEX s EX abc FIELD 0", WRONGTYPE),
    (
        "HGETEX h EX abc FIELDS 1 a",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "HGETEX h PX -1 FIELDS 1 a",
        b"-ERR invalid expire time, must be >= 0\r\n",
    ),
    (
        "HGETEX h EX 70368744178 FIELDS 1 a",
        b"-ERR invalid expire time in 'hgetex' command\r\n",
    ),
    (
        "HGETEX h PXAT 70368744177664 FIELDS 1 a",
        b"-ERR invalid expire time in 'hgetex' command\r\n",
    ),
    // Redis 8.0 reads one option, right after the key: a second one is a misplaced FIELDS.
    ("HGETEX h EX 10 PERSIST FIELDS 1 a", NO_FIELDS),
    ("HGETEX h PERSIST EX 10 FIELDS 1 a", NO_FIELDS),
    ("HGETEX h FIELDS 1 a EX 10", MISMATCH),
    ("HGETEX h KEEPTTL FIELDS 1 a", NO_FIELDS),
    ("HGETEX h FIELDS 0 a", NUMFIELDS),
    ("HGETEX h EX 10 FIELDS x a", NUMFIELDS),
    ("HGETEX h FIELDS 2 a", MISMATCH),
    ("HGETEX h PERSIST FIELDS 1", MISMATCH),
    (
        "HGETEX h EX 10 FIELDS",
        b"-ERR wrong number of arguments for 'hgetex' command\r\n",
    ),
    (
        "HGETEX h FIELDS 1",
        b"-ERR wrong number of arguments for 'hgetex' command\r\n",
    ),
    // Nothing above changed the hash.
    ("HTTL h FIELDS 1 a", b"*1\r\n:-1\r\n"),
    ("OBJECT ENCODING h", b"$8\r\nlistpack\r\n"),
];

const HSETEX_REDIS: Steps = &[
    ("HSETEX h FIELDS 2 a 1 b 2", b":1\r\n"),
    ("OBJECT ENCODING h", b"$8\r\nlistpack\r\n"),
    // FNX: only if none exists; FXX: only if all exist (a missing key has none).
    ("HSETEX h FNX FIELDS 2 c 3 a 9", b":0\r\n"),
    ("HSETEX h FXX FIELDS 2 a 9 c 3", b":0\r\n"),
    ("HSETEX nokey FXX FIELDS 1 a 1", b":0\r\n"),
    ("EXISTS nokey", b":0\r\n"),
    ("HGETALL h", b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n"),
    ("HSETEX h FXX EXAT 4102444800 FIELDS 2 a 10 b 20", b":1\r\n"),
    ("OBJECT ENCODING h", b"$10\r\nlistpackex\r\n"),
    ("HMGET h a b", b"*2\r\n$2\r\n10\r\n$2\r\n20\r\n"),
    ("HEXPIRETIME h FIELDS 2 a b", b"*2\r\n:4102444800\r\n:4102444800\r\n"),
    // KEEPTTL keeps a TTL; no option drops it; options in any order before FIELDS.
    ("HSETEX h KEEPTTL FNX FIELDS 1 c 3", b":1\r\n"),
    ("HSETEX h KEEPTTL FIELDS 2 a 11 c 33", b":1\r\n"),
    ("HSETEX h FIELDS 1 b 22", b":1\r\n"),
    (
        "HEXPIRETIME h FIELDS 3 a b c",
        b"*3\r\n:4102444800\r\n:-1\r\n:-1\r\n",
    ),
    ("HSETEX h pxat 4102444800123 fxx fields 1 c 3", b":1\r\n"),
    ("HPEXPIRETIME h FIELDS 1 c", b"*1\r\n:4102444800123\r\n"),
    ("HSETEX h EX 1000 FIELDS 1 b 2", b":1\r\n"),
    ("HTTL h FIELDS 1 b", b"*1\r\n:1000\r\n"),
    // A time already past sets and deletes at once; the key goes with the last field.
    ("HSETEX h PX 0 FIELDS 2 a 1 new 1", b":1\r\n"),
    ("HKEYS h", b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n"),
    ("HSETEX h EXAT 1 FIELDS 2 b 1 c 1", b":1\r\n"),
    ("EXISTS h", b":0\r\n"),
    ("HSETEX h EX 0 FIELDS 1 a 1", b":1\r\n"),
    ("EXISTS h", b":0\r\n"),
    // A new key with a TTL is a listpackex; a long value makes a hashtable.
    ("HSETEX n EX 100 FIELDS 1 a 1", b":1\r\n"),
    ("OBJECT ENCODING n", b"$10\r\nlistpackex\r\n"),
    (
        "HSETEX n KEEPTTL FIELDS 1 f 0123456789012345678901234567890123456789012345678901234567890123456789",
        b":1\r\n",
    ),
    ("OBJECT ENCODING n", b"$9\r\nhashtable\r\n"),
    ("HTTL n FIELDS 2 a f", b"*2\r\n:100\r\n:-1\r\n"),
];

const HSETEX_REDIS_ERRORS: Steps = &[
    ("HSET h a 1", b":1\r\n"),
    ("SET s x", b"+OK\r\n"),
    // Parse errors come before the type check.
    (
        "HSETEX s FIELDS 0 a 1",
        b"-ERR invalid number of fields\r\n",
    ),
    ("HSETEX s FIELDS 1 a 1", WRONGTYPE),
    (
        "HSETEX h FIELDS 0 a 1",
        b"-ERR invalid number of fields\r\n",
    ),
    (
        "HSETEX h FIELDS x a 1",
        b"-ERR invalid number of fields\r\n",
    ),
    (
        "HSETEX h FIELDS 2147483648 a 1",
        b"-ERR invalid number of fields\r\n",
    ),
    ("HSETEX h FIELDS 2 a 1", SETEX_ARITY),
    ("HSETEX h FIELDS 1 a 1 b", SETEX_ARITY),
    ("HSETEX h FIELDS 1 a", SETEX_ARITY),
    ("HSETEX h EX 10 FIELDS 1 a", SETEX_ARITY),
    (
        "HSETEX h FNX FXX FIELDS 1 a 1",
        b"-ERR Only one of FXX or FNX arguments can be specified\r\n",
    ),
    (
        "HSETEX h FNX FNX FIELDS 1 a 1",
        b"-ERR Only one of FXX or FNX arguments can be specified\r\n",
    ),
    (
        "HSETEX h EX 10 KEEPTTL FIELDS 1 a 1",
        b"-ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified\r\n",
    ),
    (
        "HSETEX h PX 10 EXAT 10 FIELDS 1 a 1",
        b"-ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified\r\n",
    ),
    (
        "HSETEX h EX abc FIELDS 1 a 1",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "HSETEX h EX -1 FIELDS 1 a 1",
        b"-ERR invalid expire time, must be >= 0\r\n",
    ),
    (
        "HSETEX h EXAT 70368744178 FIELDS 1 a 1",
        b"-ERR invalid expire time in 'hsetex' command\r\n",
    ),
    (
        "HSETEX h FNX FXX EX",
        b"-ERR Only one of FXX or FNX arguments can be specified\r\n",
    ),
    (
        "HSETEX h FNX KEEPTTL EX",
        b"-ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified\r\n",
    ),
    (
        "HSETEX h EX 10 GT FIELDS 1 a 1",
        b"-ERR unknown argument: GT\r\n",
    ),
    // NX belongs to the Dragonfly form only.
    (
        "HSETEX h NX EX 10 FIELDS 1 a 1",
        b"-ERR unknown argument: NX\r\n",
    ),
    (
        "HSETEX h FNX NX FIELDS 1 a 1",
        b"-ERR unknown argument: NX\r\n",
    ),
    ("HSETEX h abc a 1", b"-ERR unknown argument: abc\r\n"),
    // Only options and no FIELDS.
    ("HSETEX h FNX EX 10", SETEX_ARITY),
    ("HSETEX h", SETEX_ARITY),
    ("HGET h a", b"$1\r\n1\r\n"),
    ("HTTL h FIELDS 1 a", b"*1\r\n:-1\r\n"),
];

const HSETEX_DRAGONFLY: Steps = &[
    ("HSET h a 1", b":1\r\n"),
    // How many fields are new, as HSET; every field set gets the TTL.
    ("HSETEX h 1000 a 2 b 3", b":1\r\n"),
    ("OBJECT ENCODING h", b"$10\r\nlistpackex\r\n"),
    ("HTTL h FIELDS 2 a b", b"*2\r\n:1000\r\n:1000\r\n"),
    // NX leaves existing fields alone (value and TTL).
    ("HSETEX h NX 500 a 9 c 4", b":1\r\n"),
    ("HMGET h a c", b"*2\r\n$1\r\n2\r\n$1\r\n4\r\n"),
    ("HTTL h FIELDS 2 a c", b"*2\r\n:1000\r\n:500\r\n"),
    // KEEPTTL replaces the value of an existing field but keeps its TTL, or its absence.
    ("HSET h d 5", b":1\r\n"),
    ("HSETEX h KEEPTTL 100 a 7 d 6 e 8", b":1\r\n"),
    ("HMGET h a d e", b"*3\r\n$1\r\n7\r\n$1\r\n6\r\n$1\r\n8\r\n"),
    ("HTTL h FIELDS 3 a d e", b"*3\r\n:1000\r\n:-1\r\n:100\r\n"),
    ("HSETEX h NX KEEPTTL 100 a 0 f 1", b":1\r\n"),
    ("HSETEX h keepttl nx 100 a 0 f 1", b":0\r\n"),
    ("HGET h a", b"$1\r\n7\r\n"),
    // Seconds from 1 to 2^26.
    ("HSETEX h 67108864 g 1", b":1\r\n"),
    ("HTTL h FIELDS 1 g", b"*1\r\n:67108864\r\n"),
    (
        "HSETEX h 67108865 g 1",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "HSETEX h 0 g 1",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    (
        "HSETEX h -5 g 1",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("HSETEX h NX NX 10 g 1", SETEX_ARITY),
    ("HSETEX h KEEPTTL KEEPTTL 10 g 1", SETEX_ARITY),
    ("HSETEX h 10 g 1 x", SETEX_ARITY),
    ("HSETEX h NX KEEPTTL 10", SETEX_ARITY),
    ("HSETEX h NX 10 g", SETEX_ARITY),
    ("SET s x", b"+OK\r\n"),
    ("HSETEX s 10 g 1", WRONGTYPE),
    // A new key.
    ("HSETEX n NX 10 a 1 b 2 a 3", b":2\r\n"),
    (
        "HGETALL n",
        b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n",
    ),
];

#[test]
fn hgetdel_exact_replies() {
    let s = Server::start(&[]);
    run(&mut s.raw(), HGETDEL);
}

#[test]
fn hgetex_exact_replies() {
    let s = Server::start(&[]);
    run(&mut s.raw(), HGETEX);
    run(&mut s.raw(), HGETEX_ERRORS);
}

#[test]
fn hsetex_redis_form_exact_replies() {
    let s = Server::start(&[]);
    run(&mut s.raw(), HSETEX_REDIS);
    run(&mut s.raw(), HSETEX_REDIS_ERRORS);
}

#[test]
fn hsetex_dragonfly_form_exact_replies() {
    let s = Server::start(&[]);
    run(&mut s.raw(), HSETEX_DRAGONFLY);
}

#[test]
fn resp3_nulls_and_command_info() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    r.send(&cmd(&[b"HELLO", b"3"]));
    // Skip the HELLO map: read until the PING after it has answered.
    r.send(&cmd(&[b"PING"]));
    let mut got = Vec::new();
    while !got.ends_with(b"+PONG\r\n") {
        let chunk = r.read_n(1);
        assert!(!chunk.is_empty(), "HELLO 3 failed");
        got.extend_from_slice(&chunk);
    }
    r.roundtrip(&cmd(&[b"HSET", b"h", b"a", b"1"]), b":1\r\n");
    r.roundtrip(
        &cmd(&[b"HGETEX", b"h", b"PERSIST", b"FIELDS", b"2", b"a", b"b"]),
        b"*2\r\n$1\r\n1\r\n_\r\n",
    );
    r.roundtrip(
        &cmd(&[b"HGETDEL", b"h", b"FIELDS", b"2", b"b", b"a"]),
        b"*2\r\n_\r\n$1\r\n1\r\n",
    );
    let mut c = s.client();
    // The arity admits the Dragonfly form (Redis 8's HSETEX has -6).
    let info: redis::Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("hsetex")
        .arg("hgetex")
        .arg("hgetdel")
        .query(&mut c)
        .unwrap();
    let text = format!("{info:?}");
    assert!(text.contains("int(-5)"), "{text}");
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn poll(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Fields given a TTL by HSETEX (both forms) and HGETEX expire: lazily for a reader, and the
/// key with its last field.
#[test]
fn ttls_set_by_hsetex_and_hgetex_expire() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let r: i64 = redis::cmd("HSETEX")
        .arg("h")
        .arg("PX")
        .arg(60)
        .arg("FIELDS")
        .arg(2)
        .arg(&["a", "1", "b", "2"])
        .query(&mut c)
        .unwrap();
    assert_eq!(r, 1);
    let _: i64 = redis::cmd("HSET")
        .arg("h")
        .arg(&["c", "3", "d", "4"])
        .query(&mut c)
        .unwrap();
    let got: Vec<Option<String>> = redis::cmd("HGETEX")
        .arg("h")
        .arg("PX")
        .arg(60)
        .arg("FIELDS")
        .arg(2)
        .arg(&["c", "zz"])
        .query(&mut c)
        .unwrap();
    assert_eq!(got, vec![Some("3".to_string()), None]);
    let pttl: Vec<i64> = redis::cmd("HPTTL")
        .arg("h")
        .arg("FIELDS")
        .arg(3)
        .arg(&["a", "c", "d"])
        .query(&mut c)
        .unwrap();
    assert!((0..=60).contains(&pttl[0]) && (0..=60).contains(&pttl[1]));
    assert_eq!(pttl[2], -1);
    poll("the fields to expire", || {
        let n: i64 = redis::cmd("HLEN").arg("h").query(&mut c).unwrap();
        n == 1
    });
    let keys: Vec<String> = redis::cmd("HKEYS").arg("h").query(&mut c).unwrap();
    assert_eq!(keys, vec!["d"]);

    // The Dragonfly form counts in seconds: the TTL is 1 s from now.
    let t0 = now_ms();
    let n: i64 = redis::cmd("HSETEX")
        .arg("d")
        .arg(1)
        .arg(&["x", "1"])
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    let at: Vec<i64> = redis::cmd("HPEXPIRETIME")
        .arg("d")
        .arg("FIELDS")
        .arg(1)
        .arg("x")
        .query(&mut c)
        .unwrap();
    // About a second from now (the server's clock is read once per command: allow slack).
    assert!(at[0] >= t0 + 900 && at[0] <= now_ms() + 1100, "{at:?}");
    poll("the key to go", || {
        let v: Option<String> = redis::cmd("HGET").arg("d").arg("x").query(&mut c).unwrap();
        v.is_none()
    });
    let e: i64 = redis::cmd("EXISTS").arg("d").query(&mut c).unwrap();
    assert_eq!(e, 0);
}

/// TTLs set by HSETEX and HGETEX are swept by the active cycle: nobody reads these hashes and
/// they still go (DBSIZE counts keys without touching them).
#[test]
fn active_cycle_sweeps_ttls_from_hsetex_and_hgetex() {
    let s = Server::start(&["--hz", "100"]);
    let mut c = s.client();
    for (key, n) in [
        ("small", 4usize),
        ("big", 600),
        ("small2", 2),
        ("big2", 300),
    ] {
        let pairs: Vec<(String, String)> = (0..n).map(|i| (format!("f{i}"), "v".into())).collect();
        let _: i64 = redis::cmd("HSETEX")
            .arg(key)
            .arg("PX")
            .arg(40)
            .arg("FIELDS")
            .arg(n)
            .arg(&pairs)
            .query(&mut c)
            .unwrap();
    }
    for key in ["g1", "g2"] {
        let _: i64 = redis::cmd("HSET")
            .arg(key)
            .arg(&["a", "1", "b", "2"])
            .query(&mut c)
            .unwrap();
        let _: redis::Value = redis::cmd("HGETEX")
            .arg(key)
            .arg("PX")
            .arg(40)
            .arg("FIELDS")
            .arg(2)
            .arg(&["a", "b"])
            .query(&mut c)
            .unwrap();
    }
    let _: i64 = redis::cmd("HSETEX")
        .arg("df")
        .arg(1)
        .arg(&["a", "1"])
        .query(&mut c)
        .unwrap();
    // One field without a TTL keeps "keep" alive.
    let _: i64 = redis::cmd("HSETEX")
        .arg("keep")
        .arg("PX")
        .arg(40)
        .arg("FIELDS")
        .arg(2)
        .arg(&["a", "1", "b", "2"])
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("HSETEX")
        .arg("keep")
        .arg("FIELDS")
        .arg(1)
        .arg(&["b", "3"])
        .query(&mut c)
        .unwrap();
    poll("the active cycle", || {
        let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        n == 1
    });
    let all: Vec<String> = redis::cmd("HGETALL").arg("keep").query(&mut c).unwrap();
    assert_eq!(all, vec!["b", "3"]);
}

#[test]
fn writes_signal_watchers_and_reads_do_not() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    run(
        &mut r,
        &[
            ("HSET h a 1 b 2", b":2\r\n"),
            // Reads that change nothing keep the transaction.
            ("WATCH h", b"+OK\r\n"),
            ("HGETEX h FIELDS 1 a", b"*1\r\n$1\r\n1\r\n"),
            ("HGETDEL h FIELDS 1 zz", b"*1\r\n$-1\r\n"),
            ("HSETEX h FXX FIELDS 1 zz 1", b":0\r\n"),
            ("MULTI", b"+OK\r\n"),
            ("PING", b"+QUEUED\r\n"),
            ("EXEC", b"*1\r\n+PONG\r\n"),
            ("WATCH h", b"+OK\r\n"),
            ("HGETDEL h FIELDS 1 a", b"*1\r\n$1\r\n1\r\n"),
            ("MULTI", b"+OK\r\n"),
            ("PING", b"+QUEUED\r\n"),
            ("EXEC", b"*-1\r\n"),
            ("WATCH h", b"+OK\r\n"),
            ("HGETEX h EX 100 FIELDS 1 b", b"*1\r\n$1\r\n2\r\n"),
            ("MULTI", b"+OK\r\n"),
            ("PING", b"+QUEUED\r\n"),
            ("EXEC", b"*-1\r\n"),
            ("WATCH h", b"+OK\r\n"),
            ("HSETEX h 100 c 3", b":1\r\n"),
            ("MULTI", b"+OK\r\n"),
            ("PING", b"+QUEUED\r\n"),
            ("EXEC", b"*-1\r\n"),
            ("WATCH h", b"+OK\r\n"),
            ("HSETEX h FIELDS 1 c 4", b":1\r\n"),
            ("MULTI", b"+OK\r\n"),
            ("PING", b"+QUEUED\r\n"),
            ("EXEC", b"*-1\r\n"),
        ],
    );
}

/// A field past its TTL that nothing has removed yet (active expiry off) counts as absent:
/// FXX fails and FNX holds on it, HGETEX / HGETDEL return null for it, and the key goes
/// with its last field.
#[test]
fn expired_fields_count_as_absent() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    run(
        &mut r,
        &[
            ("DEBUG SET-ACTIVE-EXPIRE 0", b"+OK\r\n"),
            ("HSETEX h PX 20 FIELDS 1 a 1", b":1\r\n"),
            ("HSETEX g PX 20 FIELDS 2 a 1 b 2", b":1\r\n"),
            ("HSETEX g FIELDS 1 c 3", b":1\r\n"),
            ("HSETEX d PX 20 FIELDS 2 a 1 b 2", b":1\r\n"),
        ],
    );
    // Well past the 20 ms (no reply below depends on how far).
    std::thread::sleep(Duration::from_millis(150));
    run(
        &mut r,
        &[
            ("DBSIZE", b":3\r\n"),
            ("HSETEX h FXX FIELDS 1 a 2", b":0\r\n"),
            ("EXISTS h", b":0\r\n"),
            ("HSETEX g FNX FIELDS 1 a 9", b":1\r\n"),
            (
                "HGETEX g EX 100 FIELDS 3 a b c",
                b"*3\r\n$1\r\n9\r\n$-1\r\n$1\r\n3\r\n",
            ),
            ("HGETDEL d FIELDS 2 a b", b"*2\r\n$-1\r\n$-1\r\n"),
            ("EXISTS d", b":0\r\n"),
            ("DEBUG SET-ACTIVE-EXPIRE 1", b"+OK\r\n"),
        ],
    );
}

/// Field TTLs on a big hash (the hashtable encoding), observed through reads while the active
/// cycle is off: fields due at different times leave exactly when due (the table finds them
/// through its expiry index, dense.rs), and a hash all of whose fields are due goes whole
/// with Redis 7.4's events, `hexpired` then `del`.
#[test]
fn big_hash_fields_expire_exactly_and_a_fully_due_hash_goes_whole() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let q = |c: &mut redis::Connection, args: &[&str]| -> redis::Value {
        redis::cmd(args[0]).arg(&args[1..]).query(c).unwrap()
    };
    q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ehg"]);
    let fields: Vec<String> = (0..2000).map(|i| format!("f{i}")).collect();
    for key in ["stag", "all"] {
        let mut hset = redis::cmd("HSET");
        hset.arg(key);
        for f in &fields {
            hset.arg(f).arg("v");
        }
        let _: i64 = hset.query(&mut c).unwrap();
    }
    // stag: a quarter due in 500 ms, a quarter in 1 s, half never (wide margins: the first
    // reads below must come before the first TTL on a busy machine).
    for (rem, ms) in [(0, "500"), (1, "1000")] {
        let mut hpexpire = redis::cmd("HPEXPIRE");
        let due: Vec<&String> = fields
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 4 == rem)
            .map(|(_, f)| f)
            .collect();
        hpexpire
            .arg("stag")
            .arg(ms)
            .arg("FIELDS")
            .arg(due.len())
            .arg(&due);
        let _: Vec<i64> = hpexpire.query(&mut c).unwrap();
    }
    // all: every field due in 500 ms.
    let _: Vec<i64> = redis::cmd("HPEXPIRE")
        .arg("all")
        .arg(500)
        .arg("FIELDS")
        .arg(fields.len())
        .arg(&fields)
        .query(&mut c)
        .unwrap();
    let mut sub = s.client();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__keyevent@0__:*").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();

    let live = |c: &mut redis::Connection, keep: &dyn Fn(usize) -> bool| {
        let want: std::collections::BTreeSet<String> = fields
            .iter()
            .enumerate()
            .filter(|(i, _)| keep(*i))
            .map(|(_, f)| f.clone())
            .collect();
        let got: std::collections::BTreeSet<String> =
            redis::cmd("HKEYS").arg("stag").query(c).unwrap();
        assert_eq!(got, want);
        let n: usize = redis::cmd("HLEN").arg("stag").query(c).unwrap();
        assert_eq!(n, want.len());
    };
    live(&mut c, &|_| true);
    std::thread::sleep(Duration::from_millis(650));
    live(&mut c, &|i| i % 4 != 0);
    let n: i64 = redis::cmd("HLEN").arg("all").query(&mut c).unwrap();
    assert_eq!(n, 0);
    let e: i64 = redis::cmd("EXISTS").arg("all").query(&mut c).unwrap();
    assert_eq!(e, 0);
    std::thread::sleep(Duration::from_millis(500));
    live(&mut c, &|i| i % 4 >= 2);

    let mut events = Vec::new();
    while events.len() < 4 {
        let m = ps.get_message().expect("an event within 5 s");
        let payload: String = m.get_payload().unwrap();
        events.push(format!("{} {payload}", m.get_channel_name()));
    }
    assert_eq!(
        events,
        [
            "__keyevent@0__:hexpired stag",
            "__keyevent@0__:hexpired all",
            "__keyevent@0__:del all",
            "__keyevent@0__:hexpired stag",
        ]
    );
}
