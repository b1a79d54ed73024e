//! The checks behind the cargo-fuzz target `repl` and its stable stand-in property test: on
//! any bytes from a primary, the handshake and the snapshot reader never panic, and they
//! decide the same whether the bytes come whole or in pieces.

use crate::handshake::{Config, Failed, Handshake, Output};
use crate::payload::{PayloadError, PayloadReader, Progress};
use crate::ReplId;

/// What a handshake made of some bytes: what it sent, logged and decided, and the bytes it
/// left for what follows.
#[derive(Debug, PartialEq, Eq)]
pub struct HandshakeRun {
    pub sent: Vec<u8>,
    pub log: Vec<String>,
    pub result: Result<Option<crate::Outcome>, Failed>,
    pub rest: Vec<u8>,
}

/// Runs a handshake over `data` fed in pieces of `sizes` (cycled; whole when empty).
pub fn handshake_in_pieces(config: &Config, data: &[u8], sizes: &[usize]) -> HandshakeRun {
    let mut out = Output::default();
    let mut h = Handshake::start(config.clone(), &mut out);
    let mut at = 0;
    let mut i = 0;
    let mut result = Ok(None);
    while at < data.len() {
        let n = sizes
            .get(i % sizes.len().max(1))
            .copied()
            .unwrap_or(data.len())
            .max(1);
        i += 1;
        let piece = &data[at..(at + n).min(data.len())];
        match h.feed(piece, &mut out) {
            Ok((used, outcome)) => {
                assert!(used <= piece.len());
                at += used;
                if outcome.is_some() {
                    result = Ok(outcome);
                    break;
                }
                assert_eq!(used, piece.len(), "a pending handshake takes every byte");
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let rest = if matches!(result, Ok(Some(_))) {
        data[at..].to_vec()
    } else {
        Vec::new()
    };
    HandshakeRun {
        sent: out.send,
        log: out.log.into_iter().map(|(_, l)| l).collect(),
        result,
        rest,
    }
}

/// What a snapshot reader made of some bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct PayloadRun {
    pub rdb: Vec<u8>,
    pub result: Result<Progress, PayloadError>,
    pub rest: Vec<u8>,
}

/// Runs a snapshot reader over `data` fed in pieces of `sizes` (cycled; whole when empty).
pub fn payload_in_pieces(data: &[u8], sizes: &[usize]) -> PayloadRun {
    let mut r = PayloadReader::default();
    let mut rdb = Vec::new();
    let mut at = 0;
    let mut i = 0;
    let mut result = Ok(Progress::More);
    while at < data.len() {
        let n = sizes
            .get(i % sizes.len().max(1))
            .copied()
            .unwrap_or(data.len())
            .max(1);
        i += 1;
        let piece = &data[at..(at + n).min(data.len())];
        match r.feed(piece, &mut |b| rdb.extend_from_slice(b)) {
            Ok((used, p)) => {
                assert!(used <= piece.len());
                at += used;
                if p == Progress::Done {
                    result = Ok(p);
                    break;
                }
                assert_eq!(used, piece.len(), "a pending reader takes every byte");
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let rest = if matches!(result, Ok(Progress::Done)) {
        data[at..].to_vec()
    } else {
        Vec::new()
    };
    PayloadRun { rdb, result, rest }
}

/// The fuzz target's body: the handshake (with and without a cached primary) and the
/// snapshot reader on `data`, whole and in pieces sized by its first bytes, agree.
pub fn exercise(data: &[u8]) {
    let sizes: Vec<usize> = data
        .iter()
        .take(8)
        .map(|&b| usize::from(b % 32) + 1)
        .collect();
    for cached in [None, Some((ReplId([b'a'; 40]), 10))] {
        let config = Config {
            masterauth: Some(b"pw".to_vec()),
            cached,
            ..Config::default()
        };
        let whole = handshake_in_pieces(&config, data, &[]);
        assert_eq!(handshake_in_pieces(&config, data, &sizes), whole);
    }
    let whole = payload_in_pieces(data, &[]);
    assert_eq!(payload_in_pieces(data, &sizes), whole);
}
