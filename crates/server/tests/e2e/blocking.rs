//! End-to-end tests of clients blocked on keys (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP,
//! BZPOPMIN, BZPOPMAX, BZMPOP):
//! woken by pushes from other connections, in the order they blocked, across threads, with
//! millisecond timeouts, never served after they disconnect. Replies of the non-waiting paths
//! are compared with redis-server in tests/diff_scenarios_blocking.py.

use crate::common::{cmd, Server};
use redis::Value;
use std::thread::sleep;
use std::time::{Duration, Instant};

fn q(c: &mut redis::Connection, args: &[&str]) -> Value {
    redis::cmd(args[0]).arg(&args[1..]).query(c).unwrap()
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn blocked_clients(c: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("clients").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Waits until `n` clients are blocked (the waiters registered), at most 5 s.
fn until_blocked(c: &mut redis::Connection, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while blocked_clients(c) != n {
        assert!(Instant::now() < deadline, "never saw {n} blocked clients");
        sleep(Duration::from_millis(5));
    }
}

#[test]
fn timeouts_have_millisecond_precision() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let t = Instant::now();
    assert_eq!(q(&mut c, &["BLPOP", "a", "b", "0.15"]), Value::Nil);
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(150), "{took:?}");
    assert!(took < Duration::from_millis(900), "{took:?}");
    assert_eq!(blocked_clients(&mut c), 0);
    // The connection is usable afterwards.
    assert_eq!(q(&mut c, &["RPUSH", "a", "x"]), Value::Int(1));
}

#[test]
fn pushes_wake_waiters_in_blocking_order_across_threads() {
    let s = Server::start(&[]);
    let mut pusher = s.client();
    // Three waiters on keys spread over both threads' shards, all waiting for "k3" among others.
    let mut handles = Vec::new();
    for (i, keys) in [vec!["k1", "k3"], vec!["k3"], vec!["k2", "k3", "k4"]]
        .into_iter()
        .enumerate()
    {
        let mut c = s.client();
        handles.push(std::thread::spawn(move || {
            let mut args: Vec<&str> = vec!["BLPOP"];
            args.extend(keys);
            args.push("5");
            q(&mut c, &args)
        }));
        until_blocked(&mut pusher, i as i64 + 1);
    }
    // One push of three elements serves the three waiters, first blocked first served.
    assert_eq!(
        q(&mut pusher, &["RPUSH", "k3", "a", "b", "c"]),
        Value::Int(3)
    );
    let got: Vec<Value> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(
        got,
        vec![
            Value::Array(vec![bulk("k3"), bulk("a")]),
            Value::Array(vec![bulk("k3"), bulk("b")]),
            Value::Array(vec![bulk("k3"), bulk("c")]),
        ]
    );
    assert_eq!(q(&mut pusher, &["EXISTS", "k3"]), Value::Int(0));
    until_blocked(&mut pusher, 0);
}

#[test]
fn a_waiter_is_served_once_even_when_two_of_its_keys_get_data() {
    let s = Server::start(&[]);
    let mut pusher = s.client();
    let mut c = s.client();
    let h = std::thread::spawn(move || q(&mut c, &["BRPOP", "x1", "x2", "x3", "x4", "5"]));
    until_blocked(&mut pusher, 1);
    // One MULTI pushing to keys on both shards: exactly one element is taken.
    let _: () = redis::cmd("MULTI").query(&mut pusher).unwrap();
    for k in ["x1", "x2", "x3", "x4"] {
        let _: Value = redis::cmd("RPUSH")
            .arg(k)
            .arg("v")
            .query(&mut pusher)
            .unwrap();
    }
    let _: Value = redis::cmd("EXEC").query(&mut pusher).unwrap();
    let got = h.join().unwrap();
    let Value::Array(kv) = got else {
        panic!("{got:?}")
    };
    assert_eq!(kv[1], bulk("v"));
    let left: i64 = ["x1", "x2", "x3", "x4"]
        .iter()
        .map(|k| redis::cmd("LLEN").arg(k).query::<i64>(&mut pusher).unwrap())
        .sum();
    assert_eq!(left, 3);
}

#[test]
fn a_transaction_sees_its_push_before_the_waiter_is_served() {
    let s = Server::start(&[]);
    let mut pusher = s.client();
    let mut c = s.client();
    let h = std::thread::spawn(move || q(&mut c, &["BLPOP", "mk", "5"]));
    until_blocked(&mut pusher, 1);
    let _: () = redis::cmd("MULTI").query(&mut pusher).unwrap();
    let _: Value = redis::cmd("RPUSH")
        .arg("mk")
        .arg("v")
        .query(&mut pusher)
        .unwrap();
    let _: Value = redis::cmd("LLEN").arg("mk").query(&mut pusher).unwrap();
    let r: Vec<i64> = redis::cmd("EXEC").query(&mut pusher).unwrap();
    assert_eq!(r, vec![1, 1]);
    assert_eq!(h.join().unwrap(), Value::Array(vec![bulk("mk"), bulk("v")]));
}

#[test]
fn blmove_and_brpoplpush_wake_on_the_same_and_other_shards() {
    let s = Server::start(&[]);
    let mut pusher = s.client();
    // Source and destination on one shard ({t}), then keys that land on different shards.
    for (src, dst) in [("s{t}", "d{t}"), ("a", "b"), ("a", "c"), ("a", "d")] {
        let mut c = s.client();
        let (s2, d2) = (src.to_string(), dst.to_string());
        let h = std::thread::spawn(move || q(&mut c, &["BLMOVE", &s2, &d2, "RIGHT", "LEFT", "5"]));
        until_blocked(&mut pusher, 1);
        assert_eq!(q(&mut pusher, &["LPUSH", src, "e"]), Value::Int(1));
        assert_eq!(h.join().unwrap(), bulk("e"));
        assert_eq!(
            q(&mut pusher, &["LRANGE", dst, "0", "-1"]),
            Value::Array(vec![bulk("e")])
        );
        assert_eq!(q(&mut pusher, &["EXISTS", src]), Value::Int(0));
        q(&mut pusher, &["DEL", dst]);
    }
    let mut c = s.client();
    let h = std::thread::spawn(move || q(&mut c, &["BRPOPLPUSH", "p", "p2", "5"]));
    until_blocked(&mut pusher, 1);
    q(&mut pusher, &["RPUSH", "p", "1", "2"]);
    assert_eq!(h.join().unwrap(), bulk("2"));
    assert_eq!(
        q(&mut pusher, &["LRANGE", "p2", "0", "-1"]),
        Value::Array(vec![bulk("2")])
    );
    // A destination of another type: the waiter gets WRONGTYPE and the element stays put.
    q(&mut pusher, &["SET", "str", "x"]);
    let mut c = s.client();
    let h = std::thread::spawn(move || {
        redis::cmd("BLMOVE")
            .arg(&["w", "str", "LEFT", "RIGHT", "5"])
            .query::<Value>(&mut c)
            .unwrap_err()
            .code()
            .map(str::to_string)
    });
    until_blocked(&mut pusher, 1);
    q(&mut pusher, &["RPUSH", "w", "z"]);
    assert_eq!(h.join().unwrap().as_deref(), Some("WRONGTYPE"));
    assert_eq!(
        q(&mut pusher, &["LRANGE", "w", "0", "-1"]),
        Value::Array(vec![bulk("z")])
    );
}

#[test]
fn blmpop_takes_up_to_count_from_the_key_that_got_data() {
    let s = Server::start(&[]);
    let mut pusher = s.client();
    let mut c = s.client();
    let h = std::thread::spawn(move || {
        q(
            &mut c,
            &["BLMPOP", "5", "2", "q1", "q2", "RIGHT", "COUNT", "2"],
        )
    });
    until_blocked(&mut pusher, 1);
    q(&mut pusher, &["RPUSH", "q2", "1", "2", "3"]);
    assert_eq!(
        h.join().unwrap(),
        Value::Array(vec![bulk("q2"), Value::Array(vec![bulk("3"), bulk("2")])])
    );
}

#[test]
fn a_client_that_leaves_is_never_served() {
    let s = Server::start(&[]);
    let mut pusher = s.client();
    let mut r = s.raw();
    r.send(&cmd(&[b"BLPOP", b"gone", b"0"]));
    until_blocked(&mut pusher, 1);
    drop(r);
    until_blocked(&mut pusher, 0);
    q(&mut pusher, &["RPUSH", "gone", "keep"]);
    assert_eq!(
        q(&mut pusher, &["LRANGE", "gone", "0", "-1"]),
        Value::Array(vec![bulk("keep")])
    );
    // CLIENT KILL of a blocked client: the same.
    let mut c = s.client();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c).unwrap();
    let h = std::thread::spawn(move || {
        redis::cmd("BLPOP")
            .arg(&["gone2", "0"])
            .query::<Value>(&mut c)
    });
    until_blocked(&mut pusher, 1);
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "ID", &id.to_string()])
        .query(&mut pusher)
        .unwrap();
    assert_eq!(killed, 1);
    assert!(h.join().unwrap().is_err());
    until_blocked(&mut pusher, 0);
    q(&mut pusher, &["RPUSH", "gone2", "keep"]);
    assert_eq!(q(&mut pusher, &["LLEN", "gone2"]), Value::Int(1));
}

#[test]
fn sorted_set_pops_wake_on_zadd() {
    let s = Server::start(&[]);
    let mut pusher = s.client();
    let mut c = s.client();
    let h = std::thread::spawn(move || q(&mut c, &["BZPOPMAX", "z1", "z2", "5"]));
    until_blocked(&mut pusher, 1);
    q(&mut pusher, &["ZADD", "z2", "5", "m", "7", "n"]);
    assert_eq!(
        h.join().unwrap(),
        Value::Array(vec![bulk("z2"), bulk("n"), bulk("7")])
    );
    let mut c = s.client();
    let h = std::thread::spawn(move || {
        q(
            &mut c,
            &["BZMPOP", "5", "2", "r1", "r2", "MIN", "COUNT", "2"],
        )
    });
    until_blocked(&mut pusher, 1);
    q(&mut pusher, &["ZADD", "r1", "5", "m", "7", "n", "1", "o"]);
    assert_eq!(
        h.join().unwrap(),
        Value::Array(vec![
            bulk("r1"),
            Value::Array(vec![
                Value::Array(vec![bulk("o"), bulk("1")]),
                Value::Array(vec![bulk("m"), bulk("5")]),
            ])
        ])
    );
    assert_eq!(q(&mut pusher, &["ZCARD", "r1"]), Value::Int(1));
}

/// The id of the connection behind `r` (CLIENT ID over the raw socket).
fn raw_id(r: &mut crate::common::Raw) -> String {
    r.send(&cmd(&[b"CLIENT", b"ID"]));
    let got = r.read_n(3);
    let mut line = got;
    while !line.ends_with(b"\r\n") {
        line.extend(r.read_n(1));
    }
    String::from_utf8(line[1..line.len() - 2].to_vec()).unwrap()
}

#[test]
fn client_unblock_ends_waits_on_any_thread() {
    let s = Server::start(&["--threads", "4"]);
    let mut admin = s.client();
    // Enough connections that some are on other threads than the admin's.
    // (the blocking command, CLIENT UNBLOCK's reason, the blocked client's reply)
    type Wait<'a> = (&'a [&'a [u8]], Option<&'a str>, &'a [u8]);
    let waits: [Wait; 8] = [
        (&[b"BLPOP", b"k1", b"k2", b"0"], None, b"*-1\r\n"),
        (&[b"BRPOP", b"k3", b"0"], Some("TIMEOUT"), b"*-1\r\n"),
        (
            &[b"BLMOVE", b"k4", b"d", b"LEFT", b"RIGHT", b"0"],
            Some("timeout"),
            b"*-1\r\n",
        ),
        (&[b"BZPOPMIN", b"z1", b"0"], None, b"*-1\r\n"),
        (
            &[b"BLMPOP", b"0", b"1", b"k5", b"LEFT"],
            Some("ERROR"),
            UNBLOCKED,
        ),
        (
            &[b"BRPOPLPUSH", b"k6", b"d", b"0"],
            Some("error"),
            UNBLOCKED,
        ),
        (
            &[b"BZMPOP", b"0", b"1", b"z2", b"MIN"],
            Some("ERROR"),
            UNBLOCKED,
        ),
        (&[b"BZPOPMAX", b"z3", b"0"], None, b"*-1\r\n"),
    ];
    const UNBLOCKED: &[u8] = b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n";
    let mut conns = Vec::new();
    for (i, (args, _, _)) in waits.iter().enumerate() {
        let mut r = s.raw();
        let id = raw_id(&mut r);
        r.send(&cmd(args));
        until_blocked(&mut admin, i as i64 + 1);
        conns.push((r, id));
    }
    for (i, ((r, id), (_, how, reply))) in conns.iter_mut().zip(waits.iter()).enumerate() {
        let mut args = vec!["CLIENT", "UNBLOCK", id.as_str()];
        args.extend(how.iter());
        assert_eq!(q(&mut admin, &args), Value::Int(1), "{args:?}");
        assert_eq!(r.read_n(reply.len()), reply.to_vec(), "{args:?}");
        until_blocked(&mut admin, (waits.len() - i - 1) as i64);
        // No longer blocked: nothing to unblock.
        assert_eq!(
            q(&mut admin, &["CLIENT", "UNBLOCK", id.as_str()]),
            Value::Int(0)
        );
        // The connection goes on, and its old wait took nothing.
        r.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");
    }
    assert_eq!(q(&mut admin, &["RPUSH", "k1", "x"]), Value::Int(1));
    assert_eq!(q(&mut admin, &["LLEN", "k1"]), Value::Int(1));
    // Clients that are not blocked, or do not exist.
    let me = q(&mut admin, &["CLIENT", "ID"]);
    let Value::Int(me) = me else { panic!() };
    let me = me.to_string();
    assert_eq!(q(&mut admin, &["CLIENT", "UNBLOCK", &me]), Value::Int(0));
    assert_eq!(
        q(&mut admin, &["CLIENT", "UNBLOCK", "999999"]),
        Value::Int(0)
    );
    assert_eq!(q(&mut admin, &["CLIENT", "UNBLOCK", "-3"]), Value::Int(0));
    let err = redis::cmd("CLIENT")
        .arg(&["UNBLOCK", &me, "later"])
        .query::<Value>(&mut admin)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
        "{err}"
    );
}

#[test]
fn client_unblock_leaves_clients_held_by_client_pause() {
    // As Redis 7.2: a client held by CLIENT PAUSE is not blocked on keys.
    let s = Server::start(&[]);
    let mut admin = s.client();
    let mut r = s.raw();
    let id = raw_id(&mut r);
    assert_eq!(
        q(&mut admin, &["CLIENT", "PAUSE", "10000", "WRITE"]),
        Value::Okay
    );
    r.send(&cmd(&[b"SET", b"x", b"1"]));
    // Held (INFO counts it as blocked, as Redis does).
    until_blocked(&mut admin, 1);
    assert_eq!(q(&mut admin, &["CLIENT", "UNBLOCK", &id]), Value::Int(0));
    assert_eq!(
        q(&mut admin, &["CLIENT", "UNBLOCK", &id, "ERROR"]),
        Value::Int(0)
    );
    assert_eq!(q(&mut admin, &["CLIENT", "UNPAUSE"]), Value::Okay);
    assert_eq!(r.read_n(5), b"+OK\r\n");
}
