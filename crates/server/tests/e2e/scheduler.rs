//! The transaction scheduler over TCP (sched.rs): a multi-shard transaction holds its keys, not
//! its shards, and its keys until every part of it has run.
//!
//! How a transaction is kept half done: a big HGETALL whose client does not read is a stream
//! that stalls (stream.rs: its key stays locked until the client reads, or for a second), and a
//! transaction's part for a shard with a stream waits until the stream ends. So an MSET of one
//! key on each shard, with a stalled stream on the second shard, has run its part on the first
//! shard and waits on the second.

use crate::common::{cmd, Server};
use darner_server::cmd::shard_of;
use std::io::Read;
use std::time::Duration;

/// A key named `prefix` + a number that lives on `shard` of 2.
fn key_on(prefix: &str, shard: usize) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| shard_of(k.as_bytes(), 2) == shard)
        .unwrap()
}

/// Whether `r` has nothing to read right now.
fn nothing_yet(r: &mut crate::common::Raw) -> bool {
    r.s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let got = r.s.peek(&mut b);
    r.s.set_nonblocking(false).unwrap();
    matches!(got, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

#[test]
fn a_transaction_waiting_on_one_shard_holds_its_keys_not_the_other_shard() {
    let s = Server::start(&[]);
    let mut c = s.client();
    // A hash whose HGETALL reply (~20 MB) cannot all sit in the socket buffers: streamed.
    let big = key_on("big-", 1);
    let value = "v".repeat(60);
    for chunk in (0..300_000).collect::<Vec<usize>>().chunks(10_000) {
        let mut hset = redis::cmd("HSET");
        hset.arg(&big);
        for i in chunk {
            hset.arg(format!("field{i}")).arg(&value);
        }
        let _: i64 = hset.query(&mut c).unwrap();
    }
    let (k0, k1) = (key_on("k-", 0), key_on("k-", 1));
    let other = key_on("other-", 0);
    let () = redis::cmd("SET")
        .arg(&other)
        .arg("v")
        .query(&mut c)
        .unwrap();

    // The stream starts (its first byte arrives) and stalls: this client reads no more.
    let mut reader = s.raw();
    reader.send(&cmd(&[b"HGETALL", big.as_bytes()]));
    let mut first = [0u8; 1];
    reader.s.read_exact(&mut first).unwrap();

    // Its part on shard 0 runs; its part on shard 1 waits for the stream.
    let mut writer = s.raw();
    writer.send(&cmd(&[b"MSET", k0.as_bytes(), b"1", k1.as_bytes(), b"1"]));
    std::thread::sleep(Duration::from_millis(50));

    // Shard 0's other keys are served meanwhile.
    let got: String = redis::cmd("GET").arg(&other).query(&mut c).unwrap();
    assert_eq!(got, "v");
    assert!(
        nothing_yet(&mut writer),
        "MSET answered while its part on the streaming shard must still wait"
    );

    // Its key on shard 0 is written already but held: a read waits for the whole MSET.
    let mut getter = s.raw();
    getter.send(&cmd(&[b"GET", k0.as_bytes()]));
    std::thread::sleep(Duration::from_millis(50));
    assert!(nothing_yet(&mut getter), "a read saw half of the MSET");

    // The reader reads the stream: it ends, the MSET finishes, the read sees it.
    let mut sink = Vec::new();
    reader
        .s
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let _ = reader.s.read_to_end(&mut sink);
    writer
        .s
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    getter
        .s
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(writer.read_n(5), b"+OK\r\n");
    assert_eq!(getter.read_n(7), b"$1\r\n1\r\n");
}

#[test]
fn multi_key_commands_on_one_shard_run_as_single_shard_commands() {
    // Keys all on one shard take the single-shard path (inline on the connection's thread or
    // batched to the other), keys on both the transaction path: the same replies either way.
    let s = Server::start(&[]);
    let mut r = s.raw();
    for shard in 0..2 {
        let a = key_on(&format!("a{shard}-"), shard);
        let b = key_on(&format!("b{shard}-"), shard);
        let steps: Vec<(Vec<&[u8]>, &[u8])> = vec![
            (
                vec![b"MSET", a.as_bytes(), b"1", b.as_bytes(), b"2"],
                b"+OK\r\n",
            ),
            (
                vec![b"MGET", a.as_bytes(), b"nokey", b.as_bytes()],
                b"*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n",
            ),
            (
                vec![b"EXISTS", a.as_bytes(), b.as_bytes(), a.as_bytes()],
                b":3\r\n",
            ),
            (vec![b"TOUCH", a.as_bytes(), b.as_bytes()], b":2\r\n"),
            (vec![b"MSETNX", a.as_bytes(), b"x"], b":0\r\n"),
            (
                vec![b"MSET", a.as_bytes(), b"1", b.as_bytes()],
                b"-ERR wrong number of arguments for 'mset' command\r\n",
            ),
            (
                vec![b"DEL", a.as_bytes(), b.as_bytes(), a.as_bytes()],
                b":2\r\n",
            ),
            (
                vec![b"MSETNX", a.as_bytes(), b"x", b.as_bytes(), b"y"],
                b":1\r\n",
            ),
            (vec![b"MGET", b.as_bytes()], b"*1\r\n$1\r\ny\r\n"),
            (vec![b"UNLINK", a.as_bytes(), b.as_bytes()], b":2\r\n"),
        ];
        // Pipelined: the replies come back in order whichever path each took.
        let mut want = Vec::new();
        for (args, reply) in &steps {
            r.send(&cmd(args));
            want.extend_from_slice(reply);
        }
        assert_eq!(
            String::from_utf8_lossy(&r.read_n(want.len())),
            String::from_utf8_lossy(&want),
            "keys on shard {shard}"
        );
    }
}
