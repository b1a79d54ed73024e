//! Property tests: the backlog against a model (the whole stream kept), the snapshot reader
//! and the handshake split at random points, and arbitrary bytes through both (the stable
//! stand-in of the fuzz target `fuzz/fuzz_targets/repl.rs`).

use darner_repl::backlog::{Backlog, MIN_SIZE};
use darner_repl::fuzz_support::{exercise, handshake_in_pieces, payload_in_pieces};
use darner_repl::handshake::Config;
use darner_repl::payload::{length_header, mark_header, Progress, MARK_LEN};
use darner_repl::{Outcome, ReplId};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Feed(usize),
    Resize(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..MIN_SIZE * 3).prop_map(Op::Feed),
        1 => (0..MIN_SIZE * 3).prop_map(Op::Resize),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The backlog holds exactly the newest `min(size, written)` bytes of the stream, by
    /// offset, whatever the feeds and resizes.
    #[test]
    fn the_backlog_holds_the_stream_s_newest_bytes(start in 0i64..1000, ops in prop::collection::vec(op(), 1..40)) {
        let mut b = Backlog::new(MIN_SIZE, start + 1);
        let mut stream: Vec<u8> = Vec::new();
        let mut size = MIN_SIZE;
        for (i, op) in ops.into_iter().enumerate() {
            match op {
                Op::Feed(n) => {
                    let bytes: Vec<u8> = (0..n).map(|k| (k * 31 + i * 7) as u8).collect();
                    b.feed(&bytes);
                    stream.extend_from_slice(&bytes);
                }
                Op::Resize(n) => {
                    size = n.max(MIN_SIZE);
                    b.resize(n);
                }
            }
            // A resize never brings back bytes a smaller size dropped: the model keeps what
            // the backlog may hold, the newest `size` bytes of what it held.
            let held = b.histlen();
            prop_assert!(held <= size);
            let first = b.first_byte_offset();
            prop_assert_eq!(first + held as i64, start + 1 + stream.len() as i64);
            let tail = &stream[stream.len() - held..];
            for from in [first, first + held as i64 / 2, first + held as i64] {
                let (x, y) = b.read_from(from).unwrap();
                prop_assert_eq!([x, y].concat(), &tail[(from - first) as usize..]);
            }
            prop_assert!(b.read_from(first - 1).is_none());
            prop_assert!(b.read_from(first + held as i64 + 1).is_none());
        }
    }

    /// A snapshot framed either way comes out whole, and what follows it is left, however the
    /// bytes are split.
    #[test]
    fn a_snapshot_comes_out_whole_in_any_pieces(
        body in prop::collection::vec(any::<u8>(), 0..2000),
        keepalives in 0usize..3,
        marked in any::<bool>(),
        sizes in prop::collection::vec(1usize..200, 1..8),
    ) {
        let mark = [b'7'; MARK_LEN];
        // The mark must first appear where the body ends: a body ending in '7's followed by
        // the mark holds the mark earlier (regression: a body ending in b'7' failed here).
        let framed = [&body[..], &mark[..]].concat();
        prop_assume!(framed.windows(MARK_LEN).position(|w| w == mark) == Some(body.len()));
        let mut input = b"\n".repeat(keepalives);
        if marked {
            input.extend(mark_header(&mark));
            input.extend_from_slice(&body);
            input.extend_from_slice(&mark);
        } else {
            input.extend(length_header(body.len() as u64));
            input.extend_from_slice(&body);
            input.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        }
        let run = payload_in_pieces(&input, &sizes);
        prop_assert_eq!(run.result, Ok(Progress::Done));
        prop_assert_eq!(&run.rdb, &body);
        let rest: &[u8] = if marked { b"" } else { b"*1\r\n$4\r\nPING\r\n" };
        prop_assert_eq!(&run.rest, rest);
    }

    /// The handshake sends, logs and decides the same however the primary's replies are
    /// split, and leaves the same bytes after the PSYNC answer.
    #[test]
    fn the_handshake_decides_the_same_in_any_pieces(
        ping in prop::sample::select(vec!["+PONG", "-NOAUTH x", "-ERR bad"]),
        auth in prop::sample::select(vec!["+OK", "-WRONGPASS no"]),
        others in prop::sample::select(vec!["+OK", "-ERR unknown option"]),
        answer in prop::sample::select(vec![
            format!("+FULLRESYNC {} 77", "c".repeat(40)),
            format!("+CONTINUE {}", "d".repeat(40)),
            "+CONTINUE".to_string(),
            "-LOADING wait".to_string(),
            "-ERR unknown command".to_string(),
            "+FULLRESYNC short 1".to_string(),
        ]),
        cached in any::<bool>(),
        sizes in prop::collection::vec(1usize..20, 1..8),
    ) {
        let config = Config {
            masterauth: Some(b"pw".to_vec()),
            listening_port: 6380,
            cached: cached.then_some((ReplId([b'a'; 40]), 41)),
            ..Config::default()
        };
        let data = format!("{ping}\r\n{auth}\r\n{others}\r\n{others}\r\n\n{answer}\r\n$3\r\nabc");
        let whole = handshake_in_pieces(&config, data.as_bytes(), &[]);
        let split = handshake_in_pieces(&config, data.as_bytes(), &sizes);
        prop_assert_eq!(&split, &whole);
        if let Ok(Some(outcome)) = &whole.result {
            prop_assert_eq!(&whole.rest[..], b"$3\r\nabc");
            if let Outcome::FullResync(Some((_, offset))) = outcome {
                prop_assert_eq!(*offset, 77);
            }
        }
    }

    /// Arbitrary bytes from a primary never panic either reader, and both decide the same
    /// whole or in pieces.
    #[test]
    fn arbitrary_bytes_never_panic_and_decide_the_same_in_pieces(data in prop::collection::vec(any::<u8>(), 0..600)) {
        exercise(&data);
    }

    /// The same on inputs that start like the protocol, so the checks reach past the first line.
    #[test]
    fn protocol_like_bytes_never_panic(
        head in prop::sample::select(vec!["+PONG\r\n+OK\r\n+OK\r\n+OK\r\n", "$EOF:", "$10\r\n", "\n\n$"]),
        tail in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut data = head.as_bytes().to_vec();
        data.extend(tail);
        exercise(&data);
    }
}
