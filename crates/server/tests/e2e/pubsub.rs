//! End-to-end tests of Pub/Sub: messages reach subscribers on every thread, in publish order,
//! through channels, patterns and shard channels; PUBLISH counts receivers; RESP2 subscribe
//! mode; subscriptions die with their connection; a subscriber that does not read is cut off
//! by `client-output-buffer-limit pubsub`. Replies are compared byte for byte with
//! redis-server in tests/test_pubsub.py.

use crate::common::{cmd, Server};
use std::time::{Duration, Instant};

fn q(c: &mut redis::Connection, args: &[&str]) -> redis::Value {
    redis::cmd(args[0]).arg(&args[1..]).query(c).unwrap()
}

fn int(c: &mut redis::Connection, args: &[&str]) -> i64 {
    redis::cmd(args[0]).arg(&args[1..]).query(c).unwrap()
}

/// Waits until `cond` holds, at most 5 s.
fn eventually(mut cond: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < deadline, "never saw: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn msg(kind: &str, channel: &str, payload: &str) -> Vec<u8> {
    cmd(&[kind.as_bytes(), channel.as_bytes(), payload.as_bytes()])
}

#[test]
fn publish_reaches_subscribers_on_every_thread() {
    let s = Server::start(&[]);
    // Four subscribers: with two threads, connections are spread over both.
    let mut subs: Vec<_> = (0..4).map(|_| s.raw()).collect();
    for r in subs.iter_mut() {
        r.roundtrip(
            &cmd(&[b"SUBSCRIBE", b"news"]),
            b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n",
        );
    }
    let mut p = s.client();
    assert_eq!(int(&mut p, &["PUBLISH", "news", "hello"]), 4);
    assert_eq!(int(&mut p, &["PUBLISH", "nobody", "hello"]), 0);
    let want = msg("message", "news", "hello");
    for r in subs.iter_mut() {
        assert_eq!(r.read_n(want.len()), want);
    }
    let numsub: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("news")
        .query(&mut p)
        .unwrap();
    assert_eq!(numsub[1], redis::Value::Int(4));
}

#[test]
fn one_publisher_is_received_in_publish_order_across_channels() {
    let s = Server::start(&[]);
    let mut sub = s.raw();
    sub.send(&cmd(&[b"SUBSCRIBE", b"a", b"b", b"c"]));
    let mut expect_confirm = Vec::new();
    for (i, ch) in ["a", "b", "c"].iter().enumerate() {
        expect_confirm
            .extend(format!("*3\r\n$9\r\nsubscribe\r\n$1\r\n{ch}\r\n:{}\r\n", i + 1).bytes());
    }
    assert_eq!(sub.read_n(expect_confirm.len()), expect_confirm);
    // One pipeline of 3,000 publishes over three channels, from each of two publishers (on
    // different threads): each publisher's messages must arrive in its own order.
    let mut pubs: Vec<_> = (0..2).map(|_| s.raw()).collect();
    let mut expected: Vec<Vec<Vec<u8>>> = vec![Vec::new(), Vec::new()];
    for (p, r) in pubs.iter_mut().enumerate() {
        let mut pipe = Vec::new();
        for i in 0..3000 {
            let ch = ["a", "b", "c"][i % 3];
            let payload = format!("p{p}-{i}");
            pipe.extend(cmd(&[b"PUBLISH", ch.as_bytes(), payload.as_bytes()]));
            expected[p].push(msg("message", ch, &payload));
        }
        r.send(&pipe);
    }
    for r in pubs.iter_mut() {
        let got = r.read_n(3000 * 4);
        assert_eq!(got, b":1\r\n".repeat(3000));
    }
    let total: usize = expected.iter().flatten().map(|m| m.len()).sum();
    let got = sub.read_n(total);
    assert_eq!(got.len(), total);
    // Split the stream into frames and check each publisher's subsequence.
    let mut seen: Vec<Vec<Vec<u8>>> = vec![Vec::new(), Vec::new()];
    let mut at = 0;
    while at < got.len() {
        let frame_end = nth_crlf(&got[at..], 7) + at;
        let frame = got[at..frame_end].to_vec();
        let p = if frame.windows(3).any(|w| w == b"p0-") {
            0
        } else {
            1
        };
        seen[p].push(frame);
        at = frame_end;
    }
    assert_eq!(seen, expected);
}

/// The end (exclusive) of the `n`th CRLF-terminated line of `b`.
fn nth_crlf(b: &[u8], n: usize) -> usize {
    let mut count = 0;
    for i in 0..b.len() - 1 {
        if &b[i..i + 2] == b"\r\n" {
            count += 1;
            if count == n {
                return i + 2;
            }
        }
    }
    panic!("truncated frame");
}

#[test]
fn patterns_and_shard_channels() {
    let s = Server::start(&[]);
    let mut sub = s.raw();
    sub.roundtrip(
        &cmd(&[b"PSUBSCRIBE", b"user:*"]),
        b"*3\r\n$10\r\npsubscribe\r\n$6\r\nuser:*\r\n:1\r\n",
    );
    sub.roundtrip(
        &cmd(&[b"SUBSCRIBE", b"user:1"]),
        b"*3\r\n$9\r\nsubscribe\r\n$6\r\nuser:1\r\n:2\r\n",
    );
    sub.roundtrip(
        &cmd(&[b"SSUBSCRIBE", b"user:1"]),
        b"*3\r\n$10\r\nssubscribe\r\n$6\r\nuser:1\r\n:1\r\n",
    );
    let mut p = s.client();
    // Channel and pattern: two receptions; a shard channel is a namespace of its own.
    assert_eq!(int(&mut p, &["PUBLISH", "user:1", "x"]), 2);
    assert_eq!(int(&mut p, &["SPUBLISH", "user:1", "y"]), 1);
    assert_eq!(int(&mut p, &["PUBLISH", "user:2", "z"]), 1);
    assert_eq!(int(&mut p, &["PUBSUB", "NUMPAT"]), 1);
    let mut want = msg("message", "user:1", "x");
    want.extend(cmd(&[b"pmessage", b"user:*", b"user:1", b"x"]));
    want.extend(msg("smessage", "user:1", "y"));
    want.extend(cmd(&[b"pmessage", b"user:*", b"user:2", b"z"]));
    assert_eq!(
        String::from_utf8_lossy(&sub.read_n(want.len())),
        String::from_utf8_lossy(&want)
    );
}

#[test]
fn resp2_subscribe_mode_and_resp3_pushes() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    r.roundtrip(
        &cmd(&[b"SUBSCRIBE", b"c"]),
        b"*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n",
    );
    r.roundtrip(
        &cmd(&[b"GET", b"k"]),
        b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
    );
    r.roundtrip(&cmd(&[b"PING"]), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    r.roundtrip(
        &cmd(&[b"UNSUBSCRIBE"]),
        b"*3\r\n$11\r\nunsubscribe\r\n$1\r\nc\r\n:0\r\n",
    );
    r.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");
    // RESP3: any command works while subscribed; a client's own message comes before
    // PUBLISH's reply.
    let mut r3 = s.raw();
    r3.hello3();
    r3.roundtrip(
        &cmd(&[b"SUBSCRIBE", b"c"]),
        b">3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n",
    );
    r3.roundtrip(&cmd(&[b"GET", b"k"]), b"_\r\n");
    // Redis 7.2: the message to the publisher itself follows PUBLISH's reply.
    r3.roundtrip(
        &cmd(&[b"PUBLISH", b"c", b"self"]),
        b":1\r\n>3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$4\r\nself\r\n",
    );
}

#[test]
fn subscriptions_end_with_the_connection_and_reset() {
    let s = Server::start(&[]);
    let mut p = s.client();
    {
        let mut sub = s.raw();
        sub.roundtrip(
            &cmd(&[b"PSUBSCRIBE", b"p*"]),
            b"*3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:1\r\n",
        );
        assert_eq!(int(&mut p, &["PUBSUB", "NUMPAT"]), 1);
        let info: String = redis::cmd("INFO").arg("clients").query(&mut p).unwrap();
        assert!(info.contains("pubsub_clients:1"), "{info}");
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("pubsub")
            .query(&mut p)
            .unwrap();
        assert!(
            list.contains("flags=P") && list.contains("psub=1"),
            "{list}"
        );
    }
    eventually(|| int(&mut p, &["PUBSUB", "NUMPAT"]) == 0, "pattern gone");
    assert_eq!(int(&mut p, &["PUBLISH", "pa", "x"]), 0);
    let mut r = s.raw();
    r.roundtrip(
        &cmd(&[b"SUBSCRIBE", b"x"]),
        b"*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n",
    );
    r.roundtrip(&cmd(&[b"RESET"]), b"+RESET\r\n");
    assert_eq!(int(&mut p, &["PUBLISH", "x", "y"]), 0);
    let info: String = redis::cmd("INFO").arg("stats").query(&mut p).unwrap();
    assert!(info.contains("pubsub_channels:0"), "{info}");
    let _ = q(&mut p, &["PING"]);
}

#[test]
fn a_subscriber_that_does_not_read_is_disconnected() {
    let s = Server::start(&[]);
    let mut p = s.client();
    let _ = q(
        &mut p,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1mb 0 0",
        ],
    );
    let mut sub = s.raw();
    sub.roundtrip(
        &cmd(&[b"SUBSCRIBE", b"flood"]),
        b"*3\r\n$9\r\nsubscribe\r\n$5\r\nflood\r\n:1\r\n",
    );
    // The subscriber never reads: once its output passes 1 MB (after the kernel's socket
    // buffers fill) it is cut off, and PUBLISH then finds nobody.
    let big = "x".repeat(64 * 1024);
    eventually(
        || int(&mut p, &["PUBLISH", "flood", &big]) == 0,
        "the slow subscriber disconnected",
    );
    let info: String = redis::cmd("INFO").arg("clients").query(&mut p).unwrap();
    assert!(info.contains("pubsub_clients:0"), "{info}");
}
