//! End-to-end tests of the core: dispatch, ordering across shards, transactions, protocol.

use crate::common::{cmd, Server};

#[test]
fn unknown_command_and_arity_errors_keep_connection_usable() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    r.roundtrip(
        &cmd(&[b"NOSUCH", b"a", b"b"]),
        b"-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' \r\n",
    );
    r.roundtrip(
        &cmd(&[b"GET"]),
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    r.roundtrip(b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn pipelined_replies_keep_request_order_across_shards() {
    let s = Server::start(&["--threads", "4"]);
    let mut r = s.raw();
    let mut req = Vec::new();
    let mut expect = Vec::new();
    for i in 0..2000 {
        let k = format!("key:{i}");
        req.extend(cmd(&[b"SET", k.as_bytes(), k.as_bytes()]));
        req.extend(cmd(&[b"GET", k.as_bytes()]));
        expect.extend_from_slice(b"+OK\r\n");
        expect.extend_from_slice(format!("${}\r\n{}\r\n", k.len(), k).as_bytes());
        if i % 100 == 0 {
            req.extend(cmd(&[b"EXISTS", b"key:0", k.as_bytes(), b"nope"]));
            expect.extend_from_slice(b":2\r\n");
        }
    }
    r.send(&req);
    let got = r.read_n(expect.len());
    assert_eq!(got, expect);
}

#[test]
fn multi_exec_across_shards() {
    let s = Server::start(&["--threads", "4"]);
    let mut c = s.client();
    let (a, b): (Vec<String>, i64) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("{a}x")
        .arg("1")
        .ignore()
        .cmd("SET")
        .arg("{b}y")
        .arg("2")
        .ignore()
        .cmd("GET")
        .arg("{a}x")
        .cmd("EXISTS")
        .arg("{a}x")
        .arg("{b}y")
        .arg("{c}z")
        .query::<(String, i64)>(&mut c)
        .map(|(x, n)| (vec![x], n))
        .unwrap();
    assert_eq!(a, vec!["1".to_string()]);
    assert_eq!(b, 2);
}

#[test]
fn execabort_after_queued_error_and_watch_conflict() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&[b"MULTI"]), b"+OK\r\n");
    r.roundtrip(
        &cmd(&[b"SET", b"k"]),
        b"-ERR wrong number of arguments for 'set' command\r\n",
    );
    r.roundtrip(
        &cmd(&[b"EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    r.roundtrip(&cmd(&[b"WATCH", b"w"]), b"+OK\r\n");
    let mut other = s.raw();
    other.roundtrip(&cmd(&[b"SET", b"w", b"1"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"MULTI"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"GET", b"w"]), b"+QUEUED\r\n");
    r.roundtrip(&cmd(&[b"EXEC"]), b"*-1\r\n");
    r.roundtrip(&cmd(&[b"EXEC"]), b"-ERR EXEC without MULTI\r\n");
}

#[test]
fn protocol_error_closes_connection_only() {
    let s = Server::start(&[]);
    let mut bad = s.raw();
    bad.roundtrip(
        b"*1\r\n$abc\r\n",
        b"-ERR Protocol error: invalid bulk length\r\n",
    );
    assert!(bad.closed());
    let mut good = s.raw();
    good.roundtrip(b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn atomic_transfers_keep_the_sum() {
    let s = Server::start(&["--threads", "4"]);
    let accounts: Vec<String> = (0..8).map(|i| format!("acct:{i}")).collect();
    {
        let mut c = s.client();
        for a in &accounts {
            let _: () = redis::cmd("SET").arg(a).arg(100).query(&mut c).unwrap();
        }
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for t in 0..3 {
        let port = s.port;
        let accounts = accounts.clone();
        writers.push(std::thread::spawn(move || {
            let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .unwrap()
                .get_connection()
                .unwrap();
            for i in 0..300 {
                let from = &accounts[(i + t) % 8];
                let to = &accounts[(i * 3 + t + 1) % 8];
                if from == to {
                    continue;
                }
                // Read both, then write both atomically with MULTI (values chosen to conserve).
                let _: () = redis::pipe()
                    .atomic()
                    .cmd("SET")
                    .arg(from)
                    .arg(100)
                    .ignore()
                    .cmd("SET")
                    .arg(to)
                    .arg(100)
                    .ignore()
                    .query(&mut c)
                    .unwrap();
            }
        }));
    }
    let mut c = s.client();
    let mut checks = 0;
    while writers.iter().any(|w| !w.is_finished()) && checks < 2000 {
        let n: i64 = redis::cmd("EXISTS").arg(&accounts).query(&mut c).unwrap();
        assert_eq!(n, 8);
        checks += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
}

#[test]
fn commands_before_a_protocol_error_run_first_even_behind_a_transaction() {
    let s = Server::start(&["--threads", "4"]);
    let mut r = s.raw();
    // EXISTS spans shards (a transaction task holds the connection); the malformed request
    // after it must wait for it, and the SET before it must have run.
    let mut req = cmd(&[b"SET", b"a", b"1"]);
    req.extend(cmd(&[b"EXISTS", b"a", b"b", b"c", b"d"]));
    req.extend(cmd(&[b"GET", b"a"]));
    req.extend_from_slice(b"*1\r\n$x\r\n");
    r.roundtrip(
        &req,
        b"+OK\r\n:1\r\n$1\r\n1\r\n-ERR Protocol error: invalid bulk length\r\n",
    );
    assert!(r.closed());
}

#[test]
fn nothing_after_quit_not_even_a_protocol_error() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let mut req = cmd(&[b"PING"]);
    req.extend(cmd(&[b"QUIT"]));
    req.extend(cmd(&[b"PING"]));
    req.extend_from_slice(b"*1\r\n$x\r\n");
    r.roundtrip(&req, b"+PONG\r\n+OK\r\n");
    assert!(r.closed());
}
