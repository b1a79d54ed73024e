//! Engine tests with an in-memory [`Host`]: a toy keyspace that implements
//! a handful of commands, so that scripts have something to call. This is a
//! unit test of the engine, not a server mock: the server's own end-to-end
//! tests run scripts over TCP.
//!
//! Expected texts are Redis 7.2's (checked against redis-server 7.0 where
//! the two agree, and Redis's source).

mod api;
mod functions;
mod libs;
mod sandbox;

use std::collections::HashMap;

use bytes::Bytes;

use crate::*;

#[derive(Default)]
pub(crate) struct FakeHost {
    pub kv: HashMap<Vec<u8>, Vec<u8>>,
    pub logs: Vec<(LogLevel, Vec<u8>)>,
    pub calls: Vec<(Vec<Vec<u8>>, u8, bool)>,
    pub repl: Vec<u8>,
    pub control: Option<std::sync::Arc<RunControl>>,
}

fn b(s: &str) -> Frame {
    Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

fn err(s: &str) -> Frame {
    Frame::Error(Bytes::copy_from_slice(s.as_bytes()))
}

impl Host for FakeHost {
    fn call(&mut self, args: &[&[u8]], ctx: &CallCtx) -> Frame {
        self.calls.push((
            args.iter().map(|a| a.to_vec()).collect(),
            ctx.resp,
            ctx.pcall,
        ));
        let name = args[0].to_ascii_lowercase();
        let resp3 = ctx.resp == 3;
        match (&name[..], args.len()) {
            (b"ping", 1) => Frame::Simple(Bytes::from_static(b"PONG")),
            (b"echo", 2) => Frame::Bulk(Bytes::copy_from_slice(args[1])),
            (b"get", 2) => match self.kv.get(args[1]) {
                Some(v) => Frame::Bulk(Bytes::copy_from_slice(v)),
                None if resp3 => Frame::Null,
                None => Frame::NullBulk,
            },
            (b"set", 3) => {
                if ctx.flags.no_writes {
                    return err(errors::WRITE_IN_READONLY);
                }
                self.kv.insert(args[1].to_vec(), args[2].to_vec());
                if let Some(c) = &self.control {
                    c.note_write();
                }
                Frame::Simple(Bytes::from_static(b"OK"))
            }
            (b"incr", 2) => {
                let cur = self.kv.get(args[1]).cloned().unwrap_or(b"0".to_vec());
                match std::str::from_utf8(&cur)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                {
                    Some(n) => {
                        self.kv
                            .insert(args[1].to_vec(), (n + 1).to_string().into_bytes());
                        Frame::Integer(n + 1)
                    }
                    None => err("ERR value is not an integer or out of range"),
                }
            }
            (b"types", 1) => {
                // One of every reply type, as a RESP2 / RESP3 client gets it.
                if resp3 {
                    Frame::Array(vec![
                        Frame::Map(vec![(b("f"), Frame::Integer(1))]),
                        Frame::Set(vec![b("m")]),
                        Frame::Double(3.5),
                        Frame::Boolean(true),
                        Frame::BigNumber(Bytes::from_static(b"123456789012345678901234567890")),
                        Frame::Verbatim {
                            format: *b"txt",
                            text: Bytes::from_static(b"hello"),
                        },
                        Frame::Null,
                    ])
                } else {
                    Frame::Array(vec![
                        Frame::Array(vec![b("f"), Frame::Integer(1)]),
                        Frame::Array(vec![b("m")]),
                        b("3.5"),
                        Frame::Integer(1),
                        b("123456789012345678901234567890"),
                        b("hello"),
                        Frame::NullArray,
                    ])
                }
            }
            (b"get" | b"set" | b"incr" | b"echo" | b"ping", _) => err(errors::WRONG_ARITY),
            _ => err(errors::UNKNOWN_COMMAND),
        }
    }

    fn log(&mut self, level: LogLevel, msg: &[u8]) {
        self.logs.push((level, msg.to_vec()));
    }

    fn set_repl(&mut self, flags: u8) {
        self.repl.push(flags);
    }
}

pub(crate) fn eval(e: &mut EvalEngine, h: &mut FakeHost, body: &str) -> Frame {
    e.eval(h, body.as_bytes(), &[], &[])
}

pub(crate) fn run(body: &str) -> Frame {
    let mut e = EvalEngine::new();
    let mut h = FakeHost::default();
    eval(&mut e, &mut h, body)
}

/// The error text of `body`'s reply, with `script: <sha>` shortened to
/// `script: SHA` for readability.
pub(crate) fn run_err(body: &str) -> String {
    match run(body) {
        Frame::Error(e) => {
            let sha = sha1_hex(body.as_bytes());
            String::from_utf8_lossy(&e).replace(&sha, "SHA")
        }
        other => panic!("expected an error from {body:?}, got {other:?}"),
    }
}

/// `body`'s reply as a RESP2 client reads it, CRLF shown as spaces and the
/// script's SHA-1 as `SHA`.
pub(crate) fn resp2_of(f: &Frame, body: &str) -> String {
    let mut out = Vec::new();
    write_reply(f, &mut darner_resp::ReplyWriter::new(&mut out, false));
    let sha = sha1_hex(body.as_bytes());
    String::from_utf8_lossy(&out)
        .replace(&sha, "SHA")
        .replace("\r\n", " ")
        .trim_end()
        .to_string()
}

/// Runs `return <expr>` for each case in one engine and compares the RESP2
/// text of the reply.
pub(crate) fn check(cases: &[(&str, &str)]) {
    let mut e = EvalEngine::new();
    let mut h = FakeHost::default();
    for (expr, want) in cases {
        let body = format!("return {expr}");
        let f = e.eval(&mut h, body.as_bytes(), &[], &[]);
        assert_eq!(resp2_of(&f, &body), *want, "for {expr}");
    }
}
