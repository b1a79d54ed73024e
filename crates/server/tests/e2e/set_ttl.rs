//! End-to-end tests of set member TTLs and Dragonfly's SADDEX, FIELDTTL and FIELDEXPIRE.
//! Redis has none of these: the expected replies are Dragonfly's documented ones (see
//! docs/compatibility.md). SADDEX takes whole seconds, so the expiry tests give members one
//! second and poll with a deadline; every test waits at most once.

use crate::common::{cmd, Raw, Server};
use redis::Connection;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const WRONG: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";

/// Sends each command (words split on spaces) and checks the exact reply.
fn check(r: &mut Raw, cases: &[(&str, &str)]) {
    for (req, want) in cases {
        let args: Vec<&[u8]> = req.split(' ').map(str::as_bytes).collect();
        r.roundtrip(&cmd(&args), want.as_bytes());
    }
}

fn q<T: redis::FromRedisValue>(c: &mut Connection, line: &str) -> T {
    let mut it = line.split(' ');
    let mut command = redis::cmd(it.next().unwrap());
    for a in it {
        command.arg(a);
    }
    command.query(c).unwrap()
}

fn members(c: &mut Connection, key: &str) -> BTreeSet<String> {
    q(c, &format!("SMEMBERS {key}"))
}

fn set_of(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Polls until `done` holds (at most 5 s).
fn wait_until(mut done: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn saddex_replies_and_errors() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    check(
        &mut r,
        &[
            ("SADDEX s 100 a b c", ":3\r\n"),
            ("SADDEX s 100 a d", ":1\r\n"),
            ("SADDEX s KEEPTTL 200 a e", ":1\r\n"),
            ("SADDEX s keepttl 200 e", ":0\r\n"),
            ("SCARD s", ":5\r\n"),
            ("OBJECT ENCODING s", "$9\r\nhashtable\r\n"),
            // Errors: the TTL (1 .. 2^28-1 seconds), a member required, the arity, the type.
            ("SADDEX s 0 a", NOT_INT),
            ("SADDEX s -1 a", NOT_INT),
            ("SADDEX s 268435456 a", NOT_INT),
            ("SADDEX s 1.5 a", NOT_INT),
            ("SADDEX s KEEPTTL a b", NOT_INT),
            (
                "SADDEX s KEEPTTL 10",
                "-ERR wrong number of arguments for 'saddex' command\r\n",
            ),
            (
                "SADDEX s 10",
                "-ERR wrong number of arguments for 'saddex' command\r\n",
            ),
            ("SET str v", "+OK\r\n"),
            ("SADDEX str 10 a", WRONG),
            // Argument errors come before the type check (Dragonfly parses first).
            ("SADDEX str 0 a", NOT_INT),
            ("SADDEX s 268435455 big", ":1\r\n"),
            // SADD of a member with a TTL keeps it; a new member has none.
            ("SADD s a x", ":1\r\n"),
            ("FIELDTTL s x", ":-1\r\n"),
            ("FIELDTTL s a", ":100\r\n"),
            ("FIELDTTL s e", ":200\r\n"),
            ("FIELDTTL s big", ":268435455\r\n"),
            // SADDEX without KEEPTTL replaces the TTL of a member already there.
            ("SADDEX s 7 a x", ":0\r\n"),
            ("FIELDTTL s a", ":7\r\n"),
            ("FIELDTTL s x", ":7\r\n"),
            ("SADDEX s KEEPTTL 9 a", ":0\r\n"),
            ("FIELDTTL s a", ":7\r\n"),
            // An intset becomes a hashtable with its first TTL.
            ("SADD ints 1 2 3", ":3\r\n"),
            ("OBJECT ENCODING ints", "$6\r\nintset\r\n"),
            ("SADDEX ints 10 4", ":1\r\n"),
            ("OBJECT ENCODING ints", "$9\r\nhashtable\r\n"),
            ("SMISMEMBER ints 1 4 5", "*3\r\n:1\r\n:1\r\n:0\r\n"),
            // A member that loses its TTL: SREM, then SADD again.
            ("SREM ints 4", ":1\r\n"),
            ("SADD ints 4", ":1\r\n"),
            ("FIELDTTL ints 4", ":-1\r\n"),
            ("OBJECT ENCODING ints", "$9\r\nhashtable\r\n"),
        ],
    );
}

#[test]
fn fieldttl_and_fieldexpire_replies() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    check(
        &mut r,
        &[
            ("SADD s a b", ":2\r\n"),
            ("FIELDTTL s a", ":-1\r\n"),
            ("FIELDTTL s zz", ":-3\r\n"),
            ("FIELDTTL nokey a", ":-2\r\n"),
            ("SET str v", "+OK\r\n"),
            ("FIELDTTL str a", WRONG),
            ("LPUSH l a", ":1\r\n"),
            ("FIELDTTL l a", WRONG),
            (
                "FIELDTTL s",
                "-ERR wrong number of arguments for 'fieldttl' command\r\n",
            ),
            // FIELDEXPIRE on set members.
            ("FIELDEXPIRE s 30 a zz", "*2\r\n:1\r\n:-2\r\n"),
            ("FIELDTTL s a", ":30\r\n"),
            ("FIELDTTL s b", ":-1\r\n"),
            ("OBJECT ENCODING s", "$9\r\nhashtable\r\n"),
            ("FIELDEXPIRE s 5 a b", "*2\r\n:1\r\n:1\r\n"),
            ("FIELDTTL s a", ":5\r\n"),
            // A missing key or another type: -2 for every field, no error (Dragonfly).
            ("FIELDEXPIRE nokey 5 a b", "*2\r\n:-2\r\n:-2\r\n"),
            ("FIELDEXPIRE str 5 a", "*1\r\n:-2\r\n"),
            ("EXISTS nokey", ":0\r\n"),
            // The TTL: 1 .. 2^26 seconds.
            ("FIELDEXPIRE s 0 a", NOT_INT),
            ("FIELDEXPIRE s -5 a", NOT_INT),
            ("FIELDEXPIRE s x a", NOT_INT),
            ("FIELDEXPIRE s 67108865 a", NOT_INT),
            ("FIELDEXPIRE s 67108864 a", "*1\r\n:1\r\n"),
            (
                "FIELDEXPIRE s 5",
                "-ERR wrong number of arguments for 'fieldexpire' command\r\n",
            ),
            // Hash fields: FIELDEXPIRE and FIELDTTL agree with the HEXPIRE family.
            ("HSET h f1 v1 f2 v2", ":2\r\n"),
            ("FIELDTTL h f1", ":-1\r\n"),
            ("FIELDTTL h nope", ":-3\r\n"),
            ("FIELDEXPIRE h 50 f1 nope", "*2\r\n:1\r\n:-2\r\n"),
            ("FIELDTTL h f1", ":50\r\n"),
            ("HTTL h FIELDS 2 f1 f2", "*2\r\n:50\r\n:-1\r\n"),
            ("OBJECT ENCODING h", "$10\r\nlistpackex\r\n"),
            ("HEXPIRE h 70 FIELDS 1 f2", "*1\r\n:1\r\n"),
            ("FIELDTTL h f2", ":70\r\n"),
            ("HPERSIST h FIELDS 1 f1", "*1\r\n:1\r\n"),
            ("FIELDTTL h f1", ":-1\r\n"),
        ],
    );
    let mut c = s.client();
    let info: Vec<redis::Value> = q(&mut c, "COMMAND INFO saddex fieldttl fieldexpire");
    let arity = |v: &redis::Value| match v {
        redis::Value::Array(a) => match &a[1] {
            redis::Value::Int(n) => *n,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    assert_eq!(info.iter().map(arity).collect::<Vec<_>>(), vec![-4, 3, -4]);
}

#[test]
fn copies_keep_ttls_and_results_drop_them() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    check(
        &mut r,
        &[
            ("SADD {k}s 1 2", ":2\r\n"),
            ("SADDEX {k}s 100 3", ":1\r\n"),
            // COPY and RENAME move the value whole: TTLs included.
            ("COPY {k}s {k}c", ":1\r\n"),
            ("FIELDTTL {k}c 3", ":100\r\n"),
            ("FIELDTTL {k}c 1", ":-1\r\n"),
            ("RENAME {k}c {k}r", "+OK\r\n"),
            ("FIELDTTL {k}r 3", ":100\r\n"),
            // A result computed from members has none (as Dragonfly's *STORE).
            ("SUNIONSTORE {k}u {k}s", ":3\r\n"),
            ("FIELDTTL {k}u 3", ":-1\r\n"),
            ("OBJECT ENCODING {k}u", "$6\r\nintset\r\n"),
            ("SINTERSTORE {k}i {k}s {k}r", ":3\r\n"),
            ("FIELDTTL {k}i 3", ":-1\r\n"),
            ("SDIFFSTORE {k}d {k}s {k}u", ":0\r\n"),
            // SMOVE: the member leaves with its TTL; it arrives without one.
            ("SMOVE {k}s {k}m 3", ":1\r\n"),
            ("FIELDTTL {k}m 3", ":-1\r\n"),
            ("FIELDTTL {k}s 3", ":-3\r\n"),
            ("OBJECT ENCODING {k}s", "$9\r\nhashtable\r\n"),
            // SPOP with a count keeps the TTLs of the members it leaves.
            ("SADDEX {k}p 100 a b c d e f g h i j", ":10\r\n"),
            ("SADD {k}p x", ":1\r\n"),
        ],
    );
    let mut c = s.client();
    let popped: BTreeSet<String> = q(&mut c, "SPOP {k}p 9");
    assert_eq!(popped.len(), 9);
    let left = members(&mut c, "{k}p");
    assert_eq!(left.len(), 2);
    for m in left {
        let ttl: i64 = q(&mut c, &format!("FIELDTTL {{k}}p {m}"));
        assert_eq!(ttl, if m == "x" { -1 } else { 100 }, "{m}");
    }
}

/// Builds, under `key`, a set of two permanent members ("1", "keep") and two members that
/// expire in one second ("2", "gone").
fn mixed(c: &mut Connection, key: &str) {
    let _: () = q(c, &format!("SADD {key} 1 keep"));
    let _: () = q(c, &format!("SADDEX {key} 1 2 gone"));
}

#[test]
fn expired_members_are_invisible_to_every_command() {
    let s = Server::start(&[]);
    let mut c = s.client();
    // Lazy expiry alone: the active cycle must not help.
    let _: () = q(&mut c, "DEBUG SET-ACTIVE-EXPIRE 0");
    let names = [
        "smembers",
        "sismember",
        "smismember",
        "scard",
        "srandmember",
        "srandcount",
        "spop",
        "spopcount",
        "sscan",
        "sinter",
        "sinterstore",
        "sintercard",
        "sunion",
        "sunionstore",
        "sdiff",
        "sdiffstore",
        "smove",
        "sort",
        "zunion",
        "zinterstore",
        "srem",
        "sadd",
        "saddex",
        "fieldttl",
        "fieldexpire",
        "exists",
        "copy",
    ];
    for n in names {
        mixed(&mut c, &format!("{{t}}{n}"));
    }
    // Sets whose members all expire: the key goes with the last one.
    for n in ["all1", "all2", "all3", "all4", "all5", "all6"] {
        let _: () = q(&mut c, &format!("SADDEX {{t}}{n} 1 a b"));
    }
    let _: () = q(&mut c, "SADD {t}other gone other");
    // Wait on a probe of our own, so that each key above is first read after the expiry.
    let _: () = q(&mut c, "SADDEX {t}probe 1 p");
    wait_until(
        || q::<i64>(&mut c, "SISMEMBER {t}probe p") == 0,
        "the probe to expire",
    );
    let want = set_of(&["1", "keep"]);
    assert_eq!(members(&mut c, "{t}smembers"), want);
    assert_eq!(q::<i64>(&mut c, "SISMEMBER {t}sismember gone"), 0);
    assert_eq!(
        q::<Vec<i64>>(&mut c, "SMISMEMBER {t}smismember 1 2 gone keep"),
        vec![1, 0, 0, 1]
    );
    assert_eq!(q::<i64>(&mut c, "SCARD {t}scard"), 2);
    for _ in 0..20 {
        let m: String = q(&mut c, "SRANDMEMBER {t}srandmember");
        assert!(want.contains(&m), "{m}");
    }
    assert_eq!(
        q::<Vec<String>>(&mut c, "SRANDMEMBER {t}srandcount 10")
            .into_iter()
            .collect::<BTreeSet<_>>(),
        want
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, "SRANDMEMBER {t}srandcount -30").len(),
        30
    );
    let popped: String = q(&mut c, "SPOP {t}spop");
    assert!(want.contains(&popped));
    assert_eq!(q::<BTreeSet<String>>(&mut c, "SPOP {t}spopcount 10"), want);
    assert_eq!(q::<i64>(&mut c, "EXISTS {t}spopcount"), 0);
    let (cursor, got): (String, BTreeSet<String>) = q(&mut c, "SSCAN {t}sscan 0 COUNT 100");
    assert_eq!((cursor.as_str(), got), ("0", want.clone()));
    assert_eq!(
        q::<BTreeSet<String>>(&mut c, "SINTER {t}sinter {t}other"),
        BTreeSet::new()
    );
    assert_eq!(
        q::<i64>(&mut c, "SINTERSTORE {t}dst1 {t}sinterstore {t}sinterstore"),
        2
    );
    assert_eq!(q::<i64>(&mut c, "SINTERCARD 1 {t}sintercard"), 2);
    assert_eq!(q::<BTreeSet<String>>(&mut c, "SUNION {t}sunion"), want);
    assert_eq!(q::<i64>(&mut c, "SUNIONSTORE {t}dst2 {t}sunionstore"), 2);
    assert_eq!(members(&mut c, "{t}dst2"), want);
    assert_eq!(
        q::<BTreeSet<String>>(&mut c, "SDIFF {t}other {t}sdiff"),
        set_of(&["gone", "other"])
    );
    assert_eq!(
        q::<i64>(&mut c, "SDIFFSTORE {t}dst3 {t}sdiffstore {t}all1"),
        2
    );
    assert_eq!(q::<i64>(&mut c, "SMOVE {t}smove {t}dst4 gone"), 0);
    assert_eq!(q::<i64>(&mut c, "SMOVE {t}smove {t}dst4 keep"), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, "SORT {t}sort ALPHA"),
        vec!["1", "keep"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, "ZUNION 1 {t}zunion"),
        vec!["1", "keep"]
    );
    assert_eq!(q::<i64>(&mut c, "ZINTERSTORE {t}dst5 1 {t}zinterstore"), 2);
    assert_eq!(q::<i64>(&mut c, "SREM {t}srem 2 gone 1"), 1);
    assert_eq!(q::<i64>(&mut c, "SADD {t}sadd 2 gone"), 2);
    assert_eq!(q::<i64>(&mut c, "FIELDTTL {t}sadd gone"), -1);
    assert_eq!(q::<i64>(&mut c, "SADDEX {t}saddex KEEPTTL 50 2"), 1);
    assert_eq!(q::<i64>(&mut c, "FIELDTTL {t}saddex 2"), 50);
    assert_eq!(q::<i64>(&mut c, "FIELDTTL {t}fieldttl gone"), -3);
    assert_eq!(
        q::<Vec<i64>>(&mut c, "FIELDEXPIRE {t}fieldexpire 9 gone keep"),
        vec![-2, 1]
    );
    assert_eq!(q::<i64>(&mut c, "EXISTS {t}exists"), 1);
    assert_eq!(q::<i64>(&mut c, "COPY {t}copy {t}dst6"), 1);
    assert_eq!(members(&mut c, "{t}dst6"), want);
    // Every path sees an all-expired set as a missing key.
    assert_eq!(q::<i64>(&mut c, "EXISTS {t}all1"), 0);
    assert_eq!(q::<String>(&mut c, "TYPE {t}all2"), "none");
    assert_eq!(q::<i64>(&mut c, "SCARD {t}all3"), 0);
    assert_eq!(q::<i64>(&mut c, "FIELDTTL {t}all4 a"), -2);
    assert_eq!(
        q::<BTreeSet<String>>(&mut c, "SMEMBERS {t}all5"),
        BTreeSet::new()
    );
    // A new SADDEX on it starts a new set.
    assert_eq!(q::<i64>(&mut c, "SADDEX {t}all6 10 a"), 1);
    assert_eq!(q::<i64>(&mut c, "SCARD {t}all6"), 1);
    assert_eq!(q::<i64>(&mut c, "TTL {t}all6"), -1);
}

#[test]
fn the_active_cycle_deletes_sets_nobody_reads() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let _: () = q(&mut c, "SADDEX a 1 x y");
    let _: () = q(&mut c, "SADD b keep");
    let _: () = q(&mut c, "SADDEX b 1 x");
    // A copy with member TTLs is swept too.
    let _: () = q(&mut c, "SADDEX {c}src 100 x");
    let _: () = q(&mut c, "SADDEX {c}src 1 y");
    let _: () = q(&mut c, "COPY {c}src {c}dst");
    let _: () = q(&mut c, "SREM {c}src y");
    let _: () = q(&mut c, "SREM {c}dst x");
    // DBSIZE reads no key: only the sweep can bring it down.
    wait_until(|| q::<i64>(&mut c, "DBSIZE") == 2, "the sweep");
    let keys: BTreeSet<String> = q(&mut c, "KEYS *");
    assert_eq!(keys, set_of(&["b", "{c}src"]));
    assert_eq!(members(&mut c, "b"), set_of(&["keep"]));
}

#[test]
fn member_expiry_signals_watchers() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let _: () = q(&mut c, "DEBUG SET-ACTIVE-EXPIRE 0");
    let _: () = q(&mut c, "SADD w keep");
    let _: () = q(&mut c, "SADDEX w 1 x");
    let mut r = s.raw();
    check(&mut r, &[("WATCH w", "+OK\r\n")]);
    wait_until(
        || q::<i64>(&mut c, "SISMEMBER w x") == 0,
        "the member to expire",
    );
    check(
        &mut r,
        &[
            ("MULTI", "+OK\r\n"),
            ("SCARD w", "+QUEUED\r\n"),
            ("EXEC", "*-1\r\n"),
        ],
    );
}

/// Member TTLs on a big set, observed through reads while the active cycle is off: members
/// leave exactly when due, and a set all of whose members are due goes whole.
#[test]
fn big_set_members_expire_exactly_and_a_fully_due_set_goes_whole() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let _: () = q(&mut c, "DEBUG SET-ACTIVE-EXPIRE 0");
    let all: Vec<String> = (0..2000).map(|i| format!("m{i}")).collect();
    let due: Vec<&String> = all.iter().step_by(2).collect();
    let kept: Vec<&String> = all.iter().skip(1).step_by(2).collect();
    let _: i64 = redis::cmd("SADDEX")
        .arg("whole")
        .arg(1)
        .arg(&all)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("SADDEX")
        .arg("half")
        .arg(1)
        .arg(&due)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("SADD")
        .arg("half")
        .arg(&kept)
        .query(&mut c)
        .unwrap();
    assert_eq!(q::<usize>(&mut c, "SCARD half"), 2000);
    wait_until(
        || q::<usize>(&mut c, "SCARD half") == 1000,
        "the TTL'd half to go",
    );
    let want: BTreeSet<String> = kept.iter().map(|m| m.to_string()).collect();
    assert_eq!(members(&mut c, "half"), want);
    assert_eq!(q::<usize>(&mut c, "SCARD whole"), 0);
    assert_eq!(q::<i64>(&mut c, "EXISTS whole"), 0);
    assert_eq!(q::<i64>(&mut c, "EXISTS half"), 1);
}
