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

/// Feeds `data` to `feed` in pieces of `sizes` (cycled; whole when empty) until it reports
/// the end (`Ok((used, true))`) or an error. `feed` returns the bytes it took and whether it
/// is done; until it is done it must take every byte. Returns the bytes left after the end
/// (none when it did not end) and the error, if any.
fn run_in_pieces<E>(
    data: &[u8],
    sizes: &[usize],
    mut feed: impl FnMut(&[u8]) -> Result<(usize, bool), E>,
) -> (Vec<u8>, Option<E>) {
    let mut at = 0;
    let mut i = 0;
    while at < data.len() {
        let n = sizes
            .get(i % sizes.len().max(1))
            .copied()
            .unwrap_or(data.len())
            .max(1);
        i += 1;
        let piece = &data[at..(at + n).min(data.len())];
        match feed(piece) {
            Ok((used, done)) => {
                assert!(used <= piece.len());
                at += used;
                if done {
                    return (data[at..].to_vec(), None);
                }
                assert_eq!(used, piece.len(), "a pending reader takes every byte");
            }
            Err(e) => return (Vec::new(), Some(e)),
        }
    }
    (Vec::new(), None)
}

/// Runs a handshake over `data` fed in pieces of `sizes` (cycled; whole when empty).
pub fn handshake_in_pieces(config: &Config, data: &[u8], sizes: &[usize]) -> HandshakeRun {
    let mut out = Output::default();
    let mut h = Handshake::start(config.clone(), &mut out);
    let mut outcome = None;
    let (rest, failed) = run_in_pieces(data, sizes, |piece| {
        let (used, o) = h.feed(piece, &mut out)?;
        let done = o.is_some();
        outcome = outcome.take().or(o);
        Ok::<_, Failed>((used, done))
    });
    HandshakeRun {
        sent: out.send,
        log: out.log.into_iter().map(|(_, l)| l).collect(),
        result: failed.map_or(Ok(outcome), Err),
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
    let mut progress = Progress::More;
    let (rest, failed) = run_in_pieces(data, sizes, |piece| {
        let (used, p) = r.feed(piece, &mut |b| rdb.extend_from_slice(b))?;
        progress = p.clone();
        Ok::<_, PayloadError>((used, p == Progress::Done))
    });
    PayloadRun {
        rdb,
        result: failed.map_or(Ok(progress), Err),
        rest,
    }
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
