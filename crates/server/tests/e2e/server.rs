//! End-to-end tests of the server commands: COMMAND, INFO, DBSIZE, FLUSHDB, FLUSHALL, TIME,
//! LASTSAVE, CONFIG, SLOWLOG, MONITOR, SHUTDOWN, DEBUG. Expected bytes are redis-server's.

use crate::common::{cmd, Raw, Server};
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The end of the first complete RESP value in `b`, if it is all there.
fn resp_end(b: &[u8], at: usize) -> Option<usize> {
    let line_end = at + b.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
    let head = std::str::from_utf8(&b[at + 1..line_end]).ok()?;
    let next = line_end + 2;
    match b[at] {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Some(next),
        b'$' | b'=' | b'!' => {
            let n: i64 = head.parse().ok()?;
            if n < 0 {
                return Some(next);
            }
            let end = next + n as usize + 2;
            (b.len() >= end).then_some(end)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n: i64 = head.parse().ok()?;
            let items = if matches!(b[at], b'%' | b'|') {
                n * 2
            } else {
                n
            };
            let mut pos = next;
            for _ in 0..items.max(0) {
                pos = resp_end(b, pos)?;
            }
            Some(pos)
        }
        _ => panic!("bad RESP at {at}: {:?}", String::from_utf8_lossy(b)),
    }
}

/// Sends `req` and returns exactly one complete reply.
fn ask(r: &mut Raw, req: &[u8]) -> Vec<u8> {
    r.send(req);
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while resp_end(&out, 0).is_none() {
        match r.s.read(&mut buf) {
            Ok(0) | Err(_) => panic!("connection ended: {:?}", String::from_utf8_lossy(&out)),
            Ok(k) => out.extend_from_slice(&buf[..k]),
        }
    }
    out
}

fn ask_str(r: &mut Raw, args: &[&[u8]]) -> String {
    String::from_utf8_lossy(&ask(r, &cmd(args))).into_owned()
}

/// INFO's text (bulk reply without its header).
fn info(r: &mut Raw, sections: &[&str]) -> String {
    let mut args: Vec<&[u8]> = vec![b"INFO"];
    args.extend(sections.iter().map(|s| s.as_bytes()));
    let reply = ask_str(r, &args);
    assert!(reply.starts_with('$'), "{reply}");
    let body = &reply[reply.find("\r\n").unwrap() + 2..reply.len() - 2];
    body.to_string()
}

fn field(info: &str, name: &str) -> String {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .trim_end()
        .to_string()
}

/// Starts darner with a leading config file (which `Server::start` cannot pass) or other
/// arguments, and returns the child and its port. Retries on another port when the one picked
/// was taken meanwhile (darner then exits).
fn spawn(first: Option<&std::path::Path>, extra: &[&str]) -> (Child, u16) {
    for _ in 0..5 {
        // (A port no other test of this binary was given: see common::free_port.)
        let port = crate::common::free_port();
        let mut c = Command::new(env!("CARGO_BIN_EXE_darner"));
        if let Some(f) = first {
            c.arg(f);
        }
        c.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--loglevel", "warning", "--threads", "2"]);
        // No save points unless the test gives its own (see common::Server::start).
        if !extra.contains(&"--save") {
            c.args(["--save", ""]);
        }
        c.args(extra).stdout(Stdio::null()).stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                // Something answers: ours only if it is still running (a child that lost the
                // port to another process exits with a bind error).
                std::thread::sleep(Duration::from_millis(20));
                if child.try_wait().unwrap().is_none() {
                    return (child, port);
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("darner did not start");
}

fn raw_at(port: u16) -> Raw {
    let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    Raw { s }
}

// ---- COMMAND ----

/// Byte for byte what redis-server prints for GET and MSET.
const INFO_GET: &[u8] = b"*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n";
const INFO_MSET: &[u8] = b"*10\r\n$4\r\nmset\r\n:-3\r\n*2\r\n+write\r\n+denyoom\r\n:1\r\n:-1\r\n:2\r\n*3\r\n+@write\r\n+@string\r\n+@slow\r\n*2\r\n$26\r\nrequest_policy:multi_shard\r\n$29\r\nresponse_policy:all_succeeded\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+OW\r\n+update\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:-1\r\n$7\r\nkeystep\r\n:2\r\n$5\r\nlimit\r\n:0\r\n*0\r\n";
/// redis-server's SET, less the key spec's "notes" pair (prose Darner's table does not carry).
const INFO_SET: &[u8] = b"*10\r\n$3\r\nset\r\n:-3\r\n*2\r\n+write\r\n+denyoom\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@write\r\n+@string\r\n+@slow\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*4\r\n+RW\r\n+access\r\n+update\r\n+variable_flags\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n";

#[test]
fn command_info_count_and_list() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let mut expect = b"*4\r\n".to_vec();
    for part in [INFO_GET, INFO_SET, INFO_MSET, b"$-1\r\n"] {
        expect.extend_from_slice(part);
    }
    r.roundtrip(
        &cmd(&[b"COMMAND", b"INFO", b"get", b"SET", b"mset", b"nosuch"]),
        &expect,
    );
    let n = darner_commands::all().len();
    r.roundtrip(
        &cmd(&[b"COMMAND", b"COUNT"]),
        format!(":{n}\r\n").as_bytes(),
    );
    r.roundtrip(
        &cmd(&[b"COMMAND", b"COUNT", b"x"]),
        b"-ERR wrong number of arguments for 'command|count' command\r\n",
    );
    // Bare COMMAND and COMMAND INFO without names: every top-level command.
    for req in [cmd(&[b"COMMAND"]), cmd(&[b"COMMAND", b"INFO"])] {
        let all = ask(&mut r, &req);
        assert!(all.starts_with(format!("*{n}\r\n*10\r\n").as_bytes()));
        let text = String::from_utf8_lossy(&all);
        assert!(text.contains("$10\r\nconfig|get\r\n:-3\r\n"));
    }
    // A subcommand by its full name, and a container with its subcommands.
    let cg = ask_str(&mut r, &[b"COMMAND", b"INFO", b"CONFIG|GET"]);
    assert!(cg.starts_with("*1\r\n*10\r\n$10\r\nconfig|get\r\n:-3\r\n*4\r\n+admin\r\n+noscript\r\n+loading\r\n+stale\r\n:0\r\n:0\r\n:0\r\n*3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n"), "{cg}");
    let sl = ask_str(&mut r, &[b"COMMAND", b"INFO", b"slowlog"]);
    assert!(sl.starts_with("*1\r\n*10\r\n$7\r\nslowlog\r\n:-2\r\n*0\r\n:0\r\n:0\r\n:0\r\n*1\r\n+@slow\r\n*0\r\n*0\r\n*4\r\n*10\r\n$11\r\nslowlog|get\r\n"), "{sl}");

    r.roundtrip(
        &cmd(&[b"COMMAND", b"LIST", b"FILTERBY", b"pattern", b"config*"]),
        b"*6\r\n$6\r\nconfig\r\n$10\r\nconfig|get\r\n$11\r\nconfig|help\r\n$16\r\nconfig|resetstat\r\n$14\r\nconfig|rewrite\r\n$10\r\nconfig|set\r\n",
    );
    r.roundtrip(
        &cmd(&[b"COMMAND", b"LIST", b"FILTERBY", b"PATTERN", b"sl*|l?n"]),
        b"*1\r\n$11\r\nslowlog|len\r\n",
    );
    let fast = ask_str(
        &mut r,
        &[b"COMMAND", b"LIST", b"FILTERBY", b"ACLCAT", b"FAST"],
    );
    assert!(
        fast.contains("$3\r\nget\r\n") && !fast.contains("$4\r\nkeys\r\n"),
        "{fast}"
    );
    for empty in [
        cmd(&[b"COMMAND", b"LIST", b"FILTERBY", b"aclcat", b"nosuchcat"]),
        cmd(&[b"COMMAND", b"LIST", b"FILTERBY", b"module", b"foo"]),
    ] {
        r.roundtrip(&empty, b"*0\r\n");
    }
    let everything = ask_str(&mut r, &[b"COMMAND", b"LIST"]);
    let total: usize = darner_commands::all()
        .iter()
        .map(|c| 1 + c.subcommands.len())
        .sum();
    assert!(everything.starts_with(&format!("*{total}\r\n")));
    for bad in [
        cmd(&[b"COMMAND", b"LIST", b"FILTERBY"]),
        cmd(&[b"COMMAND", b"LIST", b"FILTERBY", b"x", b"y"]),
        cmd(&[b"COMMAND", b"LIST", b"foo"]),
        cmd(&[b"COMMAND", b"LIST", b"FILTERBY", b"pattern", b"a", b"b"]),
    ] {
        r.roundtrip(&bad, b"-ERR syntax error\r\n");
    }
    r.roundtrip(
        &cmd(&[b"COMMAND", b"FOO"]),
        b"-ERR unknown subcommand 'FOO'. Try COMMAND HELP.\r\n",
    );
    let help = ask_str(&mut r, &[b"command", b"help"]);
    assert!(
        help.starts_with(
            "*18\r\n+COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
        ),
        "{help}"
    );
    assert!(help.ends_with("+HELP\r\n+    Prints this help.\r\n"));
}

#[test]
fn command_getkeys() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let cases: &[(&[&[u8]], &[u8])] = &[
        (
            &[b"get"],
            b"-ERR Invalid number of arguments specified for command\r\n",
        ),
        (&[b"nosuch", b"a"], b"-ERR Invalid command specified\r\n"),
        (
            &[b"object", b"nosuch", b"k"],
            b"-ERR Invalid command specified\r\n",
        ),
        (
            &[b"ping", b"x"],
            b"-ERR The command has no key arguments\r\n",
        ),
        (
            &[b"client", b"list"],
            b"-ERR The command has no key arguments\r\n",
        ),
        (&[b"object"], b"-ERR The command has no key arguments\r\n"),
        (
            &[b"get", b"a", b"b"],
            b"-ERR Invalid number of arguments specified for command\r\n",
        ),
        (
            &[b"mset", b"a", b"1", b"b", b"2"],
            b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        ),
        (&[b"OBJECT", b"encoding", b"k"], b"*1\r\n$1\r\nk\r\n"),
        (&[b"set", b"k", b"v", b"get"], b"*1\r\n$1\r\nk\r\n"),
        (&[b"copy", b"a", b"b"], b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
    ];
    for (argv, expect) in cases {
        let mut req: Vec<&[u8]> = vec![b"COMMAND", b"GETKEYS"];
        req.extend_from_slice(argv);
        r.roundtrip(&cmd(&req), expect);
    }
    let flags: &[(&[&[u8]], &[u8])] = &[
        (
            &[b"mset", b"a", b"1", b"b", b"2"],
            b"*2\r\n*2\r\n$1\r\na\r\n*2\r\n+OW\r\n+update\r\n*2\r\n$1\r\nb\r\n*2\r\n+OW\r\n+update\r\n",
        ),
        (&[b"set", b"k", b"v"], b"*1\r\n*2\r\n$1\r\nk\r\n*2\r\n+OW\r\n+update\r\n"),
        (
            &[b"set", b"k", b"v", b"GET"],
            b"*1\r\n*2\r\n$1\r\nk\r\n*3\r\n+RW\r\n+access\r\n+update\r\n",
        ),
        (
            &[b"bitfield", b"k", b"get", b"u8", b"0"],
            b"*1\r\n*2\r\n$1\r\nk\r\n*2\r\n+RO\r\n+access\r\n",
        ),
        (
            &[b"bitfield", b"k", b"set", b"u8", b"0", b"1"],
            b"*1\r\n*2\r\n$1\r\nk\r\n*3\r\n+RW\r\n+access\r\n+update\r\n",
        ),
        (
            &[b"copy", b"a", b"b"],
            b"*2\r\n*2\r\n$1\r\na\r\n*2\r\n+RO\r\n+access\r\n*2\r\n$1\r\nb\r\n*2\r\n+OW\r\n+update\r\n",
        ),
    ];
    for (argv, expect) in flags {
        let mut req: Vec<&[u8]> = vec![b"COMMAND", b"GETKEYSANDFLAGS"];
        req.extend_from_slice(argv);
        r.roundtrip(&cmd(&req), expect);
    }
    r.roundtrip(
        &cmd(&[b"COMMAND", b"GETKEYS"]),
        b"-ERR wrong number of arguments for 'command|getkeys' command\r\n",
    );
}

#[test]
fn command_docs() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    // Redis 7.2's shape: summary, since, group, then arguments with display_text.
    r.roundtrip(
        &cmd(&[b"COMMAND", b"DOCS", b"get", b"nosuch"]),
        b"*2\r\n$3\r\nget\r\n*8\r\n$7\r\nsummary\r\n$34\r\nReturns the string value of a key.\r\n$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$6\r\nstring\r\n$9\r\narguments\r\n*1\r\n*8\r\n$4\r\nname\r\n$3\r\nkey\r\n$4\r\ntype\r\n$3\r\nkey\r\n$12\r\ndisplay_text\r\n$3\r\nkey\r\n$14\r\nkey_spec_index\r\n:0\r\n",
    );
    // A oneof with tokens; a deprecated command; a container with subcommands.
    let list = ask_str(&mut r, &[b"COMMAND", b"DOCS", b"command|list"]);
    assert!(list.contains("$4\r\nname\r\n$8\r\nfilterby\r\n$4\r\ntype\r\n$5\r\noneof\r\n$5\r\ntoken\r\n$8\r\nFILTERBY\r\n$5\r\nflags\r\n*1\r\n+optional\r\n$9\r\narguments\r\n*3\r\n"), "{list}");
    let setex = ask_str(&mut r, &[b"COMMAND", b"DOCS", b"setex"]);
    assert!(
        setex.contains(
            "$9\r\ndoc_flags\r\n*1\r\n+deprecated\r\n$16\r\ndeprecated_since\r\n$6\r\n2.6.12\r\n"
        ),
        "{setex}"
    );
    let config = ask_str(&mut r, &[b"COMMAND", b"DOCS", b"config"]);
    assert!(
        config.contains("$11\r\nsubcommands\r\n*10\r\n$10\r\nconfig|get\r\n"),
        "{config}"
    );
    let all = ask_str(&mut r, &[b"COMMAND", b"DOCS"]);
    assert!(all.starts_with(&format!("*{}\r\n", 2 * darner_commands::all().len())));
    r.roundtrip(&cmd(&[b"COMMAND", b"DOCS", b"nosuch"]), b"*0\r\n");
}

// ---- CONFIG ----

#[test]
fn config_get_set_and_errors() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    r.roundtrip(
        &cmd(&[b"CONFIG", b"GET", b"hz"]),
        b"*2\r\n$2\r\nhz\r\n$2\r\n10\r\n",
    );
    // A plain name comes back as typed; duplicates are given once.
    r.roundtrip(
        &cmd(&[b"CONFIG", b"GET", b"HZ", b"hz"]),
        b"*2\r\n$2\r\nHZ\r\n$2\r\n10\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CONFIG", b"GET", b"slowlog*", b"nosuch", b"SLOWLOG-MAX-LEN"]),
        b"*4\r\n$23\r\nslowlog-log-slower-than\r\n$5\r\n10000\r\n$15\r\nslowlog-max-len\r\n$3\r\n128\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CONFIG", b"GET", b"save", b"appendonly"]),
        b"*4\r\n$4\r\nsave\r\n$0\r\n\r\n$10\r\nappendonly\r\n$2\r\nno\r\n",
    );
    r.roundtrip(&cmd(&[b"CONFIG", b"GET", b"nosuch*"]), b"*0\r\n");
    let all = ask_str(&mut r, &[b"CONFIG", b"GET", b"*"]);
    assert!(all.contains("$4\r\nport\r\n$") && all.contains("$9\r\nmaxmemory\r\n$1\r\n0\r\n"));

    r.roundtrip(
        &cmd(&[b"CONFIG", b"SET", b"hz", b"20", b"maxclients", b"50"]),
        b"+OK\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CONFIG", b"GET", b"hz", b"maxclients"]),
        b"*4\r\n$2\r\nhz\r\n$2\r\n20\r\n$10\r\nmaxclients\r\n$2\r\n50\r\n",
    );
    // All or nothing: the valid hz is not kept when maxclients fails.
    r.roundtrip(
        &cmd(&[b"CONFIG", b"SET", b"hz", b"30", b"maxclients", b"0"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 1000000 inclusive\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CONFIG", b"GET", b"hz"]),
        b"*2\r\n$2\r\nhz\r\n$2\r\n20\r\n",
    );
    let errors: &[(&[&[u8]], &[u8])] = &[
        (&[b"hz", b"abc"], b"-ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer\r\n"),
        (&[b"nosuch", b"1"], b"-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'\r\n"),
        (&[b"hz", b"5", b"nosuch", b"3"], b"-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'\r\n"),
        (&[b"hz", b"10", b"HZ", b"11"], b"-ERR CONFIG SET failed (possibly related to argument 'HZ') - duplicate parameter\r\n"),
        (&[b"hz", b"5", b"maxclients"], b"-ERR syntax error\r\n"),
        (&[b"databases", b"5"], b"-ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config\r\n"),
        (&[b"port", b"99999"], b"-ERR CONFIG SET failed (possibly related to argument 'port') - argument must be between 0 and 65535 inclusive\r\n"),
        (&[b"protected-mode", b"maybe"], b"-ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument must be 'yes' or 'no'\r\n"),
        (&[b"proto-max-bulk-len", b"1"], b"-ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be between 1048576 and 9223372036854775807 inclusive\r\n"),
        (&[b"proto-max-bulk-len", b"1x"], b"-ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be a memory value\r\n"),
        (&[b"tls-port", b"6390"], b"-ERR CONFIG SET failed (possibly related to argument 'tls-port') - not supported by this version of Darner (the feature is not built yet)\r\n"),
        (&[b"appendfsync", b"sometimes"], b"-ERR CONFIG SET failed (possibly related to argument 'appendfsync') - argument(s) must be one of the following: everysec, always, no\r\n"),
        // Memory values as Redis's memtoull reads them: no sign; past 2^63 they read negative.
        (&[b"proto-max-bulk-len", b"-1"], b"-ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be a memory value\r\n"),
        (&[b"hll-sparse-max-bytes", b"-0"], b"-ERR CONFIG SET failed (possibly related to argument 'hll-sparse-max-bytes') - argument must be a memory value\r\n"),
        (&[b"client-query-buffer-limit", b"+5mb"], b"-ERR CONFIG SET failed (possibly related to argument 'client-query-buffer-limit') - argument must be a memory value\r\n"),
        (&[b"proto-max-bulk-len", b"9223372036854775808"], b"-ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be between 1048576 and 9223372036854775807 inclusive\r\n"),
        (&[b"proto-max-bulk-len", b"99999999999999999999999kb"], b"-ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be between 1048576 and 9223372036854775807 inclusive\r\n"),
        (&[b"hz", b"-1"], b"-ERR CONFIG SET failed (possibly related to argument 'hz') - argument must be between 0 and 2147483647 inclusive\r\n"),
        (&[b"hz", b"9223372036854775807"], b"-ERR CONFIG SET failed (possibly related to argument 'hz') - argument must be between 0 and 2147483647 inclusive\r\n"),
        (&[b"hz", b"+5"], b"-ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer\r\n"),
    ];
    for (argv, expect) in errors {
        let mut req: Vec<&[u8]> = vec![b"CONFIG", b"SET"];
        req.extend_from_slice(argv);
        r.roundtrip(&cmd(&req), expect);
    }
    r.roundtrip(
        &cmd(&[b"CONFIG", b"SET", b"appendonly", b"no", b"save", b""]),
        b"+OK\r\n",
    );
    // Redis takes any hz up to INT_MAX and keeps it within 1..=500.
    for (given, kept) in [
        ("0", "1"),
        ("501", "500"),
        ("2147483647", "500"),
        ("10", "10"),
    ] {
        r.roundtrip(
            &cmd(&[b"CONFIG", b"SET", b"hz", given.as_bytes()]),
            b"+OK\r\n",
        );
        r.roundtrip(
            &cmd(&[b"CONFIG", b"GET", b"hz"]),
            format!("*2\r\n$2\r\nhz\r\n${}\r\n{kept}\r\n", kept.len()).as_bytes(),
        );
    }
    // An empty memory value is 0 (Redis's memtoull).
    r.roundtrip(
        &cmd(&[b"CONFIG", b"SET", b"hll-sparse-max-bytes", b""]),
        b"+OK\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CONFIG", b"GET", b"hll-sparse-max-bytes"]),
        b"*2\r\n$20\r\nhll-sparse-max-bytes\r\n$1\r\n0\r\n",
    );
    r.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");
    r.roundtrip(
        &cmd(&[b"CONFIG", b"SET", b"hz"]),
        b"-ERR wrong number of arguments for 'config|set' command\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CONFIG", b"GET"]),
        b"-ERR wrong number of arguments for 'config|get' command\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CONFIG", b"REWRITE"]),
        b"-ERR The server is running without a config file\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CONFIG", b"FOO"]),
        b"-ERR unknown subcommand 'FOO'. Try CONFIG HELP.\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CONFIG"]),
        b"-ERR wrong number of arguments for 'config' command\r\n",
    );
    let help = ask_str(&mut r, &[b"config", b"help"]);
    assert!(
        help.starts_with(
            "*12\r\n+CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
        ),
        "{help}"
    );
}

#[test]
fn config_rewrite_updates_the_file() {
    let dir = std::env::temp_dir().join(format!("darner-server-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("darner.conf");
    std::fs::write(
        &file,
        "# test config\nhz 15\nsave \"\"\n\nslowlog-max-len 64\nhz 16\n",
    )
    .unwrap();
    let (mut child, port) = spawn(Some(&file), &[]);
    let mut r = raw_at(port);
    r.roundtrip(
        &cmd(&[b"CONFIG", b"GET", b"hz"]),
        b"*2\r\n$2\r\nhz\r\n$2\r\n16\r\n",
    );
    let text = info(&mut r, &["server"]);
    assert_eq!(
        field(&text, "config_file"),
        std::fs::canonicalize(&file).unwrap().display().to_string()
    );
    r.roundtrip(
        &cmd(&[
            b"CONFIG",
            b"SET",
            b"hz",
            b"25",
            b"maxclients",
            b"77",
            b"timeout",
            b"300",
        ]),
        b"+OK\r\n",
    );
    r.roundtrip(&cmd(&[b"CONFIG", b"REWRITE"]), b"+OK\r\n");
    let written = std::fs::read_to_string(&file).unwrap();
    // Directives in the file are replaced in place (a repeated one is dropped), other lines
    // kept; every other non-default value, command-line ones included, is appended.
    assert_eq!(
        written,
        format!(
            "# test config\nhz 25\nsave \"\"\n\nslowlog-max-len 64\n# Generated by CONFIG REWRITE\n\
             port {port}\nbind 127.0.0.1\nthreads 2\nmaxclients 77\ntimeout 300\nloglevel warning\n"
        )
    );
    let _ = child.kill();
    let _ = child.wait();
    // The rewritten file starts a server with the same settings.
    let (mut child, port) = spawn(Some(&file), &[]);
    let mut r = raw_at(port);
    r.roundtrip(
        &cmd(&[b"CONFIG", b"GET", b"hz", b"maxclients", b"timeout"]),
        b"*6\r\n$2\r\nhz\r\n$2\r\n25\r\n$10\r\nmaxclients\r\n$2\r\n77\r\n$7\r\ntimeout\r\n$3\r\n300\r\n",
    );
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- SLOWLOG ----

#[test]
fn slowlog_records_commands() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    r.roundtrip(
        &cmd(&[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"0"]),
        b"+OK\r\n",
    );
    r.roundtrip(&cmd(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    let got = ask(&mut r, &cmd(&[b"SLOWLOG", b"GET", b"1"]));
    let text = String::from_utf8_lossy(&got);
    let addr = r.s.local_addr().unwrap().to_string();
    let tail = format!(
        "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n${}\r\n{addr}\r\n$0\r\n\r\n",
        addr.len()
    );
    assert!(
        text.starts_with("*1\r\n*6\r\n:") && text.ends_with(&tail),
        "{text}"
    );
    // id, unix time, duration.
    let nums: Vec<i64> = text
        .split("\r\n")
        .filter_map(|l| l.strip_prefix(':'))
        .map(|n| n.parse().unwrap())
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        nums[0] >= 1 && (nums[1] - now).abs() <= 5 && nums[2] >= 0,
        "{nums:?}"
    );

    let all = ask_str(&mut r, &[b"SLOWLOG", b"GET", b"-1"]);
    let len = ask_str(&mut r, &[b"SLOWLOG", b"LEN"]);
    let n: usize = len[1..len.len() - 2].parse().unwrap();
    // SLOWLOG LEN includes the SLOWLOG GET -1 that ran before it.
    assert!(all.starts_with(&format!("*{}\r\n", n - 1)), "{all} {len}");
    assert!(ask_str(&mut r, &[b"SLOWLOG", b"GET", b"0"]) == "*0\r\n");
    r.roundtrip(&cmd(&[b"SLOWLOG", b"RESET"]), b"+OK\r\n");
    // The RESET itself is slow enough to be logged.
    r.roundtrip(&cmd(&[b"SLOWLOG", b"LEN"]), b":1\r\n");
    r.roundtrip(
        &cmd(&[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"-1"]),
        b"+OK\r\n",
    );
    r.roundtrip(&cmd(&[b"SLOWLOG", b"RESET"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"SLOWLOG", b"LEN"]), b":0\r\n");
    r.roundtrip(&cmd(&[b"SLOWLOG", b"GET"]), b"*0\r\n");
    let errors: &[(&[&[u8]], &[u8])] = &[
        (&[b"GET", b"-2"], b"-ERR count should be greater than or equal to -1\r\n"),
        (&[b"GET", b"x"], b"-ERR count should be greater than or equal to -1\r\n"),
        (&[b"get", b"1", b"2"], b"-ERR unknown subcommand or wrong number of arguments for 'get'. Try SLOWLOG HELP.\r\n"),
        (&[b"LEN", b"x"], b"-ERR wrong number of arguments for 'slowlog|len' command\r\n"),
        (&[b"FOO"], b"-ERR unknown subcommand 'FOO'. Try SLOWLOG HELP.\r\n"),
    ];
    for (argv, expect) in errors {
        let mut req: Vec<&[u8]> = vec![b"SLOWLOG"];
        req.extend_from_slice(argv);
        r.roundtrip(&cmd(&req), expect);
    }
    r.roundtrip(
        &cmd(&[b"SLOWLOG"]),
        b"-ERR wrong number of arguments for 'slowlog' command\r\n",
    );
    let help = ask_str(&mut r, &[b"slowlog", b"help"]);
    assert!(help.starts_with("*11\r\n+SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+GET [<count>]\r\n"), "{help}");
}

// ---- DBSIZE, FLUSHDB, FLUSHALL, TIME, LASTSAVE ----

#[test]
fn dbsize_and_flush_across_shards() {
    let s = Server::start(&["--threads", "4"]);
    let mut r = s.raw();
    let mut req = Vec::new();
    for i in 0..300 {
        req.extend(cmd(&[b"SET", format!("k:{i}").as_bytes(), b"v"]));
    }
    r.roundtrip(&req, &b"+OK\r\n".repeat(300));
    r.roundtrip(&cmd(&[b"DBSIZE"]), b":300\r\n");
    r.roundtrip(&cmd(&[b"SELECT", b"1"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"DBSIZE"]), b":0\r\n");
    let mut req = Vec::new();
    for i in 0..50 {
        req.extend(cmd(&[b"SET", format!("other:{i}").as_bytes(), b"v"]));
    }
    r.roundtrip(&req, &b"+OK\r\n".repeat(50));
    r.roundtrip(&cmd(&[b"DBSIZE"]), b":50\r\n");
    // FLUSHDB empties only the selected database.
    r.roundtrip(&cmd(&[b"FLUSHDB"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"DBSIZE"]), b":0\r\n");
    r.roundtrip(&cmd(&[b"SELECT", b"0"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"DBSIZE"]), b":300\r\n");
    let ks = info(&mut r, &["keyspace"]);
    assert_eq!(ks, "# Keyspace\r\ndb0:keys=300,expires=0,avg_ttl=0\r\n");
    // Another client sees the same count, from another thread.
    let mut other = s.raw();
    other.roundtrip(&cmd(&[b"DBSIZE"]), b":300\r\n");
    r.roundtrip(&cmd(&[b"FLUSHALL", b"ASYNC"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"DBSIZE"]), b":0\r\n");
    other.roundtrip(&cmd(&[b"GET", b"k:7"]), b"$-1\r\n");
    assert_eq!(info(&mut r, &["keyspace"]), "# Keyspace\r\n");
    r.roundtrip(&cmd(&[b"SET", b"x", b"1"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"FLUSHALL", b"sync"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"DBSIZE"]), b":0\r\n");
    for bad in [
        cmd(&[b"FLUSHALL", b"x"]),
        cmd(&[b"FLUSHALL", b"ASYNC", b"SYNC"]),
        cmd(&[b"FLUSHDB", b"a", b"b"]),
    ] {
        r.roundtrip(&bad, b"-ERR syntax error\r\n");
    }
    r.roundtrip(
        &cmd(&[b"DBSIZE", b"x"]),
        b"-ERR wrong number of arguments for 'dbsize' command\r\n",
    );
}

#[test]
fn flushall_of_a_big_keyspace_frees_in_the_background() {
    let s = Server::start(&["--threads", "2"]);
    let mut r = s.raw();
    let n = 70_000;
    let mut req = Vec::new();
    for i in 0..n {
        req.extend(cmd(&[b"SET", format!("big:{i}").as_bytes(), b"v"]));
    }
    r.send(&req);
    let got = r.read_n(5 * n);
    assert_eq!(got.len(), 5 * n);
    r.roundtrip(&cmd(&[b"FLUSHALL"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"DBSIZE"]), b":0\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mem = info(&mut r, &["memory"]);
        if field(&mem, "lazyfree_pending_objects") == "0" {
            assert_eq!(field(&mem, "lazyfreed_objects"), n.to_string());
            break;
        }
        assert!(Instant::now() < deadline, "{mem}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn time_and_lastsave() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let t = ask_str(&mut r, &[b"TIME"]);
    let parts: Vec<&str> = t.split("\r\n").collect();
    assert_eq!(parts[0], "*2", "{t}");
    let secs: i64 = parts[2].parse().unwrap();
    let micros: i64 = parts[4].parse().unwrap();
    assert!(
        (secs - now).abs() <= 5 && (0..1_000_000).contains(&micros),
        "{t}"
    );
    let l = ask_str(&mut r, &[b"LASTSAVE"]);
    let last: i64 = l[1..l.len() - 2].parse().unwrap();
    assert!(last <= now + 1 && now - last < 60, "{l}");
    r.roundtrip(
        &cmd(&[b"TIME", b"x"]),
        b"-ERR wrong number of arguments for 'time' command\r\n",
    );
}

// ---- INFO ----

#[test]
fn info_sections_and_values() {
    let s = Server::start(&["--threads", "3"]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&[b"SET", b"a", b"1"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"GET", b"a"]), b"$1\r\n1\r\n");
    r.roundtrip(&cmd(&[b"GET", b"nope"]), b"$-1\r\n");
    r.roundtrip(
        &cmd(&[b"NOSUCHCMD"]),
        b"-ERR unknown command 'NOSUCHCMD', with args beginning with: \r\n",
    );
    let titles = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("# "))
            .map(|l| l.trim_end().to_string())
            .collect()
    };
    let default = [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Replication",
        "# CPU",
        "# Modules",
        "# Errorstats",
        "# Cluster",
        "# Keyspace",
    ];
    let text = info(&mut r, &[]);
    assert_eq!(titles(&text), default);
    assert_eq!(titles(&info(&mut r, &["default"])), default);
    let mut all = default.to_vec();
    all.insert(8, "# Commandstats");
    all.insert(10, "# Latencystats");
    assert_eq!(titles(&info(&mut r, &["all"])), all);
    assert_eq!(titles(&info(&mut r, &["everything"])), all);
    // Any order in, Redis's order out; unknown names ignored.
    assert_eq!(
        titles(&info(&mut r, &["KEYSPACE", "cpu", "nosuch", "server"])),
        ["# Server", "# CPU", "# Keyspace"]
    );
    r.roundtrip(&cmd(&[b"INFO", b"nosuch"]), b"$0\r\n\r\n");
    // Sections are separated by one empty line; the text ends with its last field.
    assert!(text.contains("\r\n\r\n# Clients\r\n") && text.ends_with("\r\n"));
    assert!(!text.ends_with("\r\n\r\n"));

    assert_eq!(
        field(&text, "redis_version"),
        darner_server::REDIS_COMPAT_VERSION
    );
    assert_eq!(
        field(&text, "darner_version"),
        darner_server::DARNER_VERSION
    );
    assert_eq!(field(&text, "redis_mode"), "standalone");
    assert_eq!(field(&text, "tcp_port"), s.port.to_string());
    assert_eq!(field(&text, "server_threads"), "3");
    assert_eq!(field(&text, "multiplexing_api"), "epoll");
    let run_id = field(&text, "run_id");
    assert!(run_id.len() == 40 && run_id.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(field(&info(&mut r, &["server"]), "run_id"), run_id);
    assert_eq!(field(&text, "connected_clients"), "1");
    assert!(field(&text, "used_memory").parse::<u64>().unwrap() > 0);
    assert!(field(&text, "used_memory_rss").parse::<u64>().unwrap() > 0);
    assert!(
        field(&text, "used_memory_peak").parse::<u64>().unwrap()
            >= field(&text, "used_memory").parse::<u64>().unwrap()
    );
    assert_eq!(field(&text, "mem_allocator"), "mimalloc");
    assert_eq!(field(&text, "maxmemory_policy"), "noeviction");
    assert_eq!(field(&text, "aof_enabled"), "0");
    assert_eq!(field(&text, "role"), "master");
    assert_eq!(field(&text, "keyspace_hits"), "1");
    assert_eq!(field(&text, "keyspace_misses"), "1");
    assert_eq!(field(&text, "total_error_replies"), "1");
    assert!(
        field(&text, "total_commands_processed")
            .parse::<u64>()
            .unwrap()
            >= 4
    );
    assert!(
        field(&text, "total_net_input_bytes")
            .parse::<u64>()
            .unwrap()
            > 0
    );
    assert!(field(&text, "used_cpu_user").contains('.'));
    assert_eq!(field(&text, "errorstat_ERR"), "count=1");
    assert_eq!(field(&text, "db0"), "keys=1,expires=0,avg_ttl=0");

    let stats = info(&mut r, &["commandstats"]);
    let get = field(&stats, "cmdstat_get");
    assert!(get.starts_with("calls=2,usec="), "{get}");
    assert!(get.ends_with(",rejected_calls=0,failed_calls=0"), "{get}");
    // A rejected call (arity) is counted, and subcommands appear by their full name.
    r.roundtrip(
        &cmd(&[b"GET"]),
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    ask(&mut r, &cmd(&[b"CONFIG", b"GET", b"hz"]));
    let stats = info(&mut r, &["commandstats"]);
    assert!(field(&stats, "cmdstat_get").ends_with(",rejected_calls=1,failed_calls=0"));
    assert!(field(&stats, "cmdstat_config|get").starts_with("calls=1,"));

    // WATCHing clients are counted from their threads.
    let mut w1 = s.raw();
    w1.roundtrip(&cmd(&[b"WATCH", b"a", b"b"]), b"+OK\r\n");
    let clients = info(&mut r, &["clients"]);
    assert_eq!(field(&clients, "connected_clients"), "2");
    assert_eq!(field(&clients, "watching_clients"), "1");
    assert_eq!(field(&clients, "total_watched_keys"), "2");

    // instantaneous_ops_per_sec is sampled: a burst shows up within a couple of seconds.
    let mut req = Vec::new();
    for _ in 0..2000 {
        req.extend(cmd(&[b"PING"]));
    }
    r.roundtrip(&req, &b"+PONG\r\n".repeat(2000));
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let ops: u64 = field(&info(&mut r, &["stats"]), "instantaneous_ops_per_sec")
            .parse()
            .unwrap();
        if ops > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "ops/sec stayed 0");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn config_resetstat_zeroes_statistics() {
    let s = Server::start(&["--threads", "2"]);
    let mut r = s.raw();
    for k in [b"a", b"b", b"c"] {
        r.roundtrip(&cmd(&[b"GET", k]), b"$-1\r\n");
    }
    r.roundtrip(
        &cmd(&[b"GET"]),
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    let before = info(&mut r, &["all"]);
    assert_eq!(field(&before, "keyspace_misses"), "3");
    assert_eq!(field(&before, "errorstat_ERR"), "count=1");
    r.roundtrip(&cmd(&[b"CONFIG", b"RESETSTAT"]), b"+OK\r\n");
    let after = info(&mut r, &["all"]);
    assert_eq!(field(&after, "keyspace_misses"), "0");
    assert_eq!(field(&after, "total_error_replies"), "0");
    assert!(!after.contains("errorstat_"), "{after}");
    assert!(!after.contains("cmdstat_get"), "{after}");
    // Since the reset: the RESETSTAT's call (recorded when it completed) and this INFO.
    assert!(field(&after, "cmdstat_config|resetstat").starts_with("calls=1,"));
    assert_eq!(field(&after, "total_commands_processed"), "1");
    assert_eq!(field(&after, "connected_clients"), "1");
}

#[test]
fn info_reports_the_event_loop_and_its_longest_turn() {
    let s = Server::start(&["--threads", "2", "--enable-debug-command", "yes"]);
    let mut r = s.raw();
    let num = |i: &str, name: &str| -> u64 { field(i, name).parse().unwrap() };
    let first = info(&mut r, &["stats"]);
    r.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");
    let second = info(&mut r, &["stats"]);
    // Each request above ended a turn of this connection's thread.
    assert!(num(&second, "eventloop_cycles") >= num(&first, "eventloop_cycles") + 2);
    assert!(num(&second, "eventloop_duration_sum") >= num(&first, "eventloop_duration_sum"));
    for name in [
        "instantaneous_eventloop_cycles_per_sec",
        "instantaneous_eventloop_duration_usec",
    ] {
        num(&second, name);
    }
    // DEBUG SLEEP holds its thread's turn: the longest turn and the commands' time see it.
    r.roundtrip(&cmd(&[b"DEBUG", b"SLEEP", b"0.05"]), b"+OK\r\n");
    let slept = info(&mut r, &["stats"]);
    assert!(
        num(&slept, "darner_eventloop_duration_max") >= 50_000,
        "{slept}"
    );
    assert!(
        num(&slept, "eventloop_duration_cmd_sum") >= 50_000,
        "{slept}"
    );
    assert!(num(&slept, "eventloop_duration_sum") >= 50_000, "{slept}");
    r.roundtrip(&cmd(&[b"CONFIG", b"RESETSTAT"]), b"+OK\r\n");
    let reset = info(&mut r, &["stats"]);
    assert!(
        num(&reset, "darner_eventloop_duration_max") < 50_000,
        "{reset}"
    );
    assert!(
        num(&reset, "eventloop_duration_cmd_sum") < 50_000,
        "{reset}"
    );
}

// ---- MONITOR ----

#[test]
fn monitor_sees_commands_of_other_clients() {
    let s = Server::start(&["--threads", "2"]);
    let mut m = s.raw();
    m.roundtrip(&cmd(&[b"MONITOR"]), b"+OK\r\n");
    // Several clients, so that some land on the other thread.
    for i in 0..4 {
        let mut c = s.raw();
        let key = format!("key {i}");
        c.roundtrip(&cmd(&[b"SET", key.as_bytes(), b"v\"1\n"]), b"+OK\r\n");
        let addr = c.s.local_addr().unwrap().to_string();
        let want = format!(" [0 {addr}] \"SET\" \"{key}\" \"v\\\"1\\n\"\r\n");
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&got).contains(&want) {
            match m.s.read(&mut buf) {
                Ok(0) | Err(_) => panic!("no monitor line: {:?}", String::from_utf8_lossy(&got)),
                Ok(k) => got.extend_from_slice(&buf[..k]),
            }
        }
        let line = String::from_utf8_lossy(&got).into_owned();
        assert!(line.starts_with('+'), "{line}");
        let ts: f64 = line[1..line.find(' ').unwrap()].parse().unwrap();
        assert!(ts > 1.0e9, "{line}");
    }
    // Admin commands are not shown; a second MONITOR is ignored without a reply.
    let mut c = s.raw();
    ask(&mut c, &cmd(&[b"CONFIG", b"GET", b"hz"]));
    m.send(&cmd(&[b"MONITOR"]));
    // The monitor's own PING is shown to it too, after the reply.
    let pong = ask(&mut m, &cmd(&[b"PING"]));
    assert!(
        pong.starts_with(b"+PONG\r\n"),
        "{:?}",
        String::from_utf8_lossy(&pong)
    );
    // Closing the monitor stops the broadcast (the server keeps serving).
    drop(m);
    c.roundtrip(&cmd(&[b"SET", b"x", b"y"]), b"+OK\r\n");
}

#[test]
fn monitor_shows_the_commands_run_inside_multi_exec() {
    // As Redis: MULTI, then each queued command once EXEC ran it (with the database it
    // left selected), then EXEC; a command queued and discarded is never shown.
    let s = Server::start(&["--threads", "2"]);
    let mut m = s.raw();
    m.roundtrip(&cmd(&[b"MONITOR"]), b"+OK\r\n");
    let mut c = s.raw();
    let addr = c.s.local_addr().unwrap().to_string();
    for (req, reply) in [
        (&[&b"MULTI"[..]][..], "+OK\r\n"),
        (&[b"DISCARD"], "+OK\r\n"),
        (&[b"MULTI"], "+OK\r\n"),
        (&[b"SET", b"k", b"v"], "+QUEUED\r\n"),
        (&[b"SELECT", b"2"], "+QUEUED\r\n"),
        (&[b"GET", b"k"], "+QUEUED\r\n"),
        (&[b"EXEC"], "*3\r\n+OK\r\n+OK\r\n$-1\r\n"),
        (&[b"PING"], "+PONG\r\n"),
    ] {
        assert_eq!(ask_str(&mut c, req), reply, "{req:?}");
    }
    let want: Vec<String> = [
        "0 \"MULTI\"",
        "0 \"DISCARD\"",
        "0 \"MULTI\"",
        "0 \"SET\" \"k\" \"v\"",
        "2 \"SELECT\" \"2\"",
        "2 \"GET\" \"k\"",
        "2 \"EXEC\"",
        "2 \"PING\"",
    ]
    .iter()
    .map(|l| {
        let (db, cmd) = l.split_once(' ').unwrap();
        format!("[{db} {addr}] {cmd}")
    })
    .collect();
    let mut got = String::new();
    let mut buf = [0u8; 4096];
    while got.matches("\r\n").count() < want.len() {
        match m.s.read(&mut buf) {
            Ok(0) | Err(_) => panic!("monitor stream cut short: {got:?}"),
            Ok(k) => got.push_str(&String::from_utf8_lossy(&buf[..k])),
        }
    }
    let lines: Vec<&str> = got
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(|l| &l[l.find(' ').unwrap() + 1..])
        .collect();
    assert_eq!(lines, want);
}

// ---- SHUTDOWN ----

/// An empty temp dir for a server's `dir`; [`make_save_fail`] then makes its saves fail.
fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("darner-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Makes `dump.rdb` a directory (once the server has started: it would not load one), so
/// the rename of a save fails.
fn make_save_fail(dir: &std::path::Path) {
    std::fs::create_dir_all(dir.join("dump.rdb")).unwrap();
}

#[test]
fn shutdown_stops_the_server() {
    let dir = temp_dir("shutdown");
    let (mut child, port) = spawn(None, &["--dir", dir.to_str().unwrap()]);
    make_save_fail(&dir);
    let mut r = raw_at(port);
    for bad in [
        cmd(&[b"SHUTDOWN", b"foo"]),
        cmd(&[b"SHUTDOWN", b"NOSAVE", b"SAVE"]),
        cmd(&[b"SHUTDOWN", b"ABORT", b"NOW"]),
    ] {
        r.roundtrip(&bad, b"-ERR syntax error\r\n");
    }
    r.roundtrip(
        &cmd(&[b"SHUTDOWN", b"ABORT"]),
        b"-ERR No shutdown in progress.\r\n",
    );
    // The save fails (see make_save_fail), and the server keeps running.
    r.roundtrip(
        &cmd(&[b"SHUTDOWN", b"SAVE"]),
        b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n",
    );
    r.roundtrip(&cmd(&[b"MULTI"]), b"+OK\r\n");
    r.roundtrip(
        &cmd(&[b"SHUTDOWN"]),
        b"-ERR Command not allowed inside a transaction\r\n",
    );
    r.roundtrip(&cmd(&[b"DISCARD"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");
    let mut other = raw_at(port);
    r.send(&cmd(&[b"SHUTDOWN", b"NOW", b"NOSAVE"]));
    // No reply: the connection just closes, as do the others, and the process exits.
    assert!(r.closed());
    assert!(other.closed());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "darner still running 5 s after SHUTDOWN"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shutdown_save_force_exits_anyway() {
    let dir = temp_dir("shutdown-force");
    let (mut child, port) = spawn(None, &["--dir", dir.to_str().unwrap()]);
    make_save_fail(&dir);
    let mut r = raw_at(port);
    r.send(&cmd(&[b"SHUTDOWN", b"SAVE", b"FORCE"]));
    assert!(r.closed());
    let deadline = Instant::now() + Duration::from_secs(5);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "darner still running");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- DEBUG ----

const DEBUG_REFUSED: &[u8] = b"-ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n";

#[test]
fn debug_is_refused_unless_enable_debug_command_allows_it() {
    // Redis 7's default: refused, counted as a rejected call, and a queued DEBUG aborts EXEC.
    let s = Server::start(&["--enable-debug-command", "no"]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&[b"DEBUG", b"SLEEP", b"0"]), DEBUG_REFUSED);
    r.roundtrip(
        &cmd(&[b"CONFIG", b"GET", b"enable-debug-command"]),
        b"*2\r\n$20\r\nenable-debug-command\r\n$2\r\nno\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CONFIG", b"SET", b"enable-debug-command", b"yes"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'enable-debug-command') - can't set immutable config\r\n",
    );
    r.roundtrip(&cmd(&[b"MULTI"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"DEBUG", b"SLEEP", b"0"]), DEBUG_REFUSED);
    r.roundtrip(
        &cmd(&[b"EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    let stats = ask_str(&mut r, &[b"INFO", b"commandstats"]);
    assert!(stats.contains("cmdstat_debug:calls=0,"), "{stats}");
    assert!(stats.contains("rejected_calls=2,"), "{stats}");
    drop(s);
    // "local": a client on the loopback interface may; "yes": anyone may.
    for v in ["local", "yes"] {
        let s = Server::start(&["--enable-debug-command", v]);
        let mut r = s.raw();
        r.roundtrip(&cmd(&[b"DEBUG", b"SLEEP", b"0"]), b"+OK\r\n");
    }
    // Any other value stops start-up, as in Redis.
    let out = Command::new(env!("CARGO_BIN_EXE_darner"))
        .args(["--port", "0", "--enable-debug-command", "maybe"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("enable-debug-command"), "{text}");
}

#[test]
fn debug_subcommands() {
    let s = Server::start(&["--threads", "2"]);
    let mut r = s.raw();
    r.roundtrip(
        &cmd(&[b"DEBUG", b"OBJECT", b"nosuch"]),
        b"-ERR no such key\r\n",
    );
    // Keys on both shards: DEBUG OBJECT hops to the key's shard.
    let long = "x".repeat(50);
    for (k, v, enc, refcount, len) in [
        ("a", "v", "embstr", "1", 2),
        ("b", "123", "int", "2147483647", 2),
        ("c", "1234567890123", "int", "1", 14),
        ("d", long.as_str(), "raw", "1", 51),
        ("{x}e", "hello", "embstr", "1", 6),
    ] {
        r.roundtrip(&cmd(&[b"SET", k.as_bytes(), v.as_bytes()]), b"+OK\r\n");
        let got = ask_str(&mut r, &[b"DEBUG", b"OBJECT", k.as_bytes()]);
        assert!(got.starts_with("+Value at:0x"), "{got}");
        let want = format!(" refcount:{refcount} encoding:{enc} serializedlength:{len} lru:");
        assert!(got.contains(&want), "{got} / {want}");
        assert!(got.ends_with(" lru_seconds_idle:0\r\n"), "{got}");
    }
    let start = Instant::now();
    r.roundtrip(&cmd(&[b"DEBUG", b"SLEEP", b"0.2"]), b"+OK\r\n");
    assert!(start.elapsed() >= Duration::from_millis(190));
    r.roundtrip(&cmd(&[b"DEBUG", b"sleep", b"0"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"DEBUG", b"SLEEP", b"x"]), b"+OK\r\n");
    // Times whose microseconds do not fit a long long (and NaN, infinities, negative times)
    // do not sleep, as in Redis (the conversion gives LLONG_MIN there); Darner used to sleep
    // 10^12 seconds for them.
    for t in [
        "inf",
        "1e300",
        "nan",
        "-inf",
        "-1",
        "9.3e12",
        "-9223372036854775808",
    ] {
        let start = Instant::now();
        r.roundtrip(&cmd(&[b"DEBUG", b"SLEEP", t.as_bytes()]), b"+OK\r\n");
        assert!(start.elapsed() < Duration::from_secs(1), "DEBUG SLEEP {t}");
    }
    r.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");
    let errors: &[(&[&[u8]], &[u8])] = &[
        (&[b"OBJECT"], b"-ERR unknown subcommand or wrong number of arguments for 'OBJECT'. Try DEBUG HELP.\r\n"),
        (&[b"object", b"a", b"b"], b"-ERR unknown subcommand or wrong number of arguments for 'object'. Try DEBUG HELP.\r\n"),
        (&[b"NOSUCH"], b"-ERR unknown subcommand or wrong number of arguments for 'NOSUCH'. Try DEBUG HELP.\r\n"),
        (&[b"SLEEP"], b"-ERR unknown subcommand or wrong number of arguments for 'SLEEP'. Try DEBUG HELP.\r\n"),
        (&[b"SET-ACTIVE-EXPIRE"], b"-ERR unknown subcommand or wrong number of arguments for 'SET-ACTIVE-EXPIRE'. Try DEBUG HELP.\r\n"),
    ];
    for (argv, expect) in errors {
        let mut req: Vec<&[u8]> = vec![b"DEBUG"];
        req.extend_from_slice(argv);
        r.roundtrip(&cmd(&req), expect);
    }
    r.roundtrip(
        &cmd(&[b"DEBUG"]),
        b"-ERR wrong number of arguments for 'debug' command\r\n",
    );
    let help = ask_str(&mut r, &[b"debug", b"help"]);
    assert!(
        help.starts_with(
            "*37\r\n+DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
        ),
        "{help}"
    );
    for sub in [
        "+DIGEST\r\n",
        "+PROTOCOL <type>\r\n",
        "+ERROR <string>\r\n",
        "+QUICKLIST-PACKED-THRESHOLD <size>\r\n",
    ] {
        assert!(help.contains(sub), "{sub} in {help}");
    }
    r.roundtrip(&cmd(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"1"]), b"+OK\r\n");
}

/// Sets a TTL with PEXPIRE, which the keys family provides; false while it is not there.
fn pexpire(r: &mut Raw, key: &[u8], ms: &[u8]) -> bool {
    let reply = ask(r, &cmd(&[b"PEXPIRE", key, ms]));
    if reply.starts_with(b"-ERR command not implemented")
        || reply.starts_with(b"-ERR unknown command")
    {
        eprintln!("PEXPIRE is not available in this build: skipping the expiry part");
        return false;
    }
    assert_eq!(reply, b":1\r\n");
    true
}

#[test]
fn debug_set_active_expire_keeps_expired_keys_counted() {
    let s = Server::start(&["--threads", "2", "--hz", "100"]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"0"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"SET", b"a", b"1"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"SET", b"b", b"1"]), b"+OK\r\n");
    if !pexpire(&mut r, b"a", b"20") || !pexpire(&mut r, b"b", b"20") {
        return;
    }
    std::thread::sleep(Duration::from_millis(300));
    // Not reclaimed by the periodic cycle: still counted, though never returned.
    r.roundtrip(&cmd(&[b"DBSIZE"]), b":2\r\n");
    assert_eq!(
        field(&info(&mut r, &["keyspace"]), "db0"),
        "keys=2,expires=2,avg_ttl=0"
    );
    assert_eq!(field(&info(&mut r, &["stats"]), "expired_keys"), "0");
    r.roundtrip(&cmd(&[b"GET", b"a"]), b"$-1\r\n");
    r.roundtrip(&cmd(&[b"DBSIZE"]), b":1\r\n");
    // Back on: the cycle reclaims the other one.
    r.roundtrip(&cmd(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"1"]), b"+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(3);
    while ask(&mut r, &cmd(&[b"DBSIZE"])) != b":0\r\n" {
        assert!(Instant::now() < deadline, "active expiry did not run");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(field(&info(&mut r, &["stats"]), "expired_keys"), "2");
}

#[test]
fn sigterm_is_not_held_up_by_debug_sleep() {
    // A thread in a long DEBUG SLEEP wakes for a shutdown (Redis handles SIGTERM only after
    // the sleep).
    let (mut child, port) = spawn(None, &[]);
    let mut r = raw_at(port);
    r.send(&cmd(&[b"DEBUG", b"SLEEP", b"100000"]));
    std::thread::sleep(Duration::from_millis(200));
    let status = Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut exited = false;
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            exited = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(exited, "darner still running 5 s after SIGTERM");
}

#[test]
fn commands_run_by_exec_count_in_commandstats_errorstats_and_the_slowlog() {
    // As Redis's call() for each queued command: calls, failures, errors and slow log
    // entries, keys on both shards; EXEC itself is never slow-logged.
    let s = Server::start(&["--slowlog-log-slower-than", "0"]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&[b"MULTI"]), b"+OK\r\n");
    for c in [
        &[&b"SET"[..], b"{a}k", b"1"][..],
        &[b"INCR", b"{a}k"],
        &[b"HSET", b"{a}k", b"f", b"v"],
        &[b"SET", b"{b}k", b"x"],
    ] {
        r.roundtrip(&cmd(c), b"+QUEUED\r\n");
    }
    let _ = ask_str(&mut r, &[b"EXEC"]);
    let stats = ask_str(&mut r, &[b"INFO", b"commandstats"]);
    for want in [
        "cmdstat_set:calls=2,",
        "cmdstat_incr:calls=1,",
        "cmdstat_hset:calls=1,",
        "cmdstat_exec:calls=1,",
    ] {
        assert!(stats.contains(want), "{want} in {stats}");
    }
    let hset = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_hset:"))
        .unwrap();
    assert!(hset.ends_with("failed_calls=1"), "{hset}");
    let errors = ask_str(&mut r, &[b"INFO", b"errorstats"]);
    assert!(errors.contains("errorstat_WRONGTYPE:count=1"), "{errors}");
    let log = ask_str(&mut r, &[b"SLOWLOG", b"GET", b"100"]);
    assert!(log.contains("HSET") && log.contains("INCR"), "{log}");
    assert!(!log.contains("EXEC"), "{log}");
}

/// `disable-thp yes` (the default, as in Redis) turns transparent huge pages off for the
/// process; `no` leaves the system's setting.
#[test]
fn disable_thp_turns_huge_pages_off_for_the_process() {
    let thp = |s: &Server| -> Option<String> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", s.pid())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("THP_enabled:").map(|v| v.trim().to_string()))
    };
    let on = Server::start(&[]);
    let Some(v) = thp(&on) else {
        return; // a kernel without the field (before 5.0): nothing to observe
    };
    assert_eq!(v, "0");
    let off = Server::start(&["--disable-thp", "no"]);
    if std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        assert_eq!(thp(&off).as_deref(), Some("1"));
    }
    let mut r = on.raw();
    r.roundtrip(
        &cmd(&[b"CONFIG", b"GET", b"disable-thp"]),
        b"*2\r\n$11\r\ndisable-thp\r\n$3\r\nyes\r\n",
    );
}

#[test]
fn swapdb_swaps_two_databases_on_every_shard() {
    let s = Server::start(&["--threads", "4"]);
    let mut r = s.raw();
    for i in 0..40 {
        let (k, m) = (format!("k{i}"), format!("m{i}"));
        ask(
            &mut r,
            &cmd(&[b"SET", k.as_bytes(), b"zero", b"EX", b"1000"]),
        );
        ask(&mut r, &cmd(&[b"SELECT", b"1"]));
        ask(&mut r, &cmd(&[b"SET", m.as_bytes(), b"one"]));
        ask(&mut r, &cmd(&[b"SELECT", b"0"]));
    }
    assert_eq!(ask_str(&mut r, &[b"SWAPDB", b"0", b"1"]), "+OK\r\n");
    assert_eq!(ask_str(&mut r, &[b"DBSIZE"]), ":40\r\n");
    for i in 0..40 {
        let (k, m) = (format!("k{i}"), format!("m{i}"));
        assert_eq!(ask_str(&mut r, &[b"GET", m.as_bytes()]), "$3\r\none\r\n");
        assert_eq!(ask_str(&mut r, &[b"EXISTS", k.as_bytes()]), ":0\r\n");
    }
    ask(&mut r, &cmd(&[b"SELECT", b"1"]));
    for i in 0..40 {
        let k = format!("k{i}");
        assert_eq!(ask_str(&mut r, &[b"GET", k.as_bytes()]), "$4\r\nzero\r\n");
        let ttl = ask_str(&mut r, &[b"TTL", k.as_bytes()]);
        assert!(ttl == ":1000\r\n" || ttl.starts_with(":99"), "{ttl}");
    }
    let ks = info(&mut r, &["keyspace"]);
    assert!(ks.contains("db0:keys=40,expires=0"), "{ks}");
    assert!(ks.contains("db1:keys=40,expires=40"), "{ks}");
    // A database with itself, and a swap back.
    assert_eq!(ask_str(&mut r, &[b"SWAPDB", b"3", b"3"]), "+OK\r\n");
    assert_eq!(ask_str(&mut r, &[b"SWAPDB", b"1", b"0"]), "+OK\r\n");
    assert_eq!(ask_str(&mut r, &[b"GET", b"m0"]), "$3\r\none\r\n");
    for (args, reply) in [
        (
            &[&b"SWAPDB"[..], b"x", b"1"][..],
            "-ERR invalid first DB index\r\n",
        ),
        (
            &[b"SWAPDB", b"1", b"1.5"],
            "-ERR invalid second DB index\r\n",
        ),
        (
            &[b"SWAPDB", b"4294967296", b"1"],
            "-ERR invalid first DB index\r\n",
        ),
        (
            &[b"SWAPDB", b"0", b"16"],
            "-ERR DB index is out of range\r\n",
        ),
        (
            &[b"SWAPDB", b"-1", b"0"],
            "-ERR DB index is out of range\r\n",
        ),
        (
            &[b"SWAPDB", b"0"],
            "-ERR wrong number of arguments for 'swapdb' command\r\n",
        ),
    ] {
        assert_eq!(ask_str(&mut r, args), reply, "{args:?}");
    }
}

#[test]
fn swapdb_is_atomic_across_shards() {
    // Keys on every shard hold "a" in db 0 and "b" in db 1; while SWAPDB runs over and over,
    // a multi-shard read never sees some shards swapped and others not.
    let s = Server::start(&["--threads", "4"]);
    let mut r = s.raw();
    let keys: Vec<String> = (0..32).map(|i| format!("key:{i}")).collect();
    for db in [b"0", b"1"] {
        ask(&mut r, &cmd(&[b"SELECT", db]));
        let v: &[u8] = if db == b"0" { b"a" } else { b"b" };
        for k in &keys {
            ask(&mut r, &cmd(&[b"SET", k.as_bytes(), v]));
        }
    }
    let port = s.port;
    let swapper = std::thread::spawn(move || {
        let mut w = raw_at(port);
        for _ in 0..300 {
            assert_eq!(ask_str(&mut w, &[b"SWAPDB", b"0", b"1"]), "+OK\r\n");
        }
    });
    let mut rd = s.raw();
    let mut mget: Vec<&[u8]> = vec![b"MGET"];
    mget.extend(keys.iter().map(|k| k.as_bytes()));
    let (mut seen_a, mut seen_b) = (0, 0);
    while !swapper.is_finished() {
        let got = ask_str(&mut rd, &mget);
        let a = got.matches("$1\r\na\r\n").count();
        let b = got.matches("$1\r\nb\r\n").count();
        assert!(a == keys.len() || b == keys.len(), "{got}");
        seen_a += (a > 0) as u32;
        seen_b += (b > 0) as u32;
    }
    swapper.join().unwrap();
    assert!(seen_a + seen_b > 0);
}

#[test]
fn swapdb_touches_watched_keys_of_both_databases() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let mut w = s.raw();
    // "x" only in db 1, "y" in neither, "z" in both.
    ask(&mut r, &cmd(&[b"SELECT", b"1"]));
    ask(&mut r, &cmd(&[b"SET", b"x", b"1"]));
    ask(&mut r, &cmd(&[b"SET", b"z", b"1"]));
    ask(&mut r, &cmd(&[b"SELECT", b"0"]));
    ask(&mut r, &cmd(&[b"SET", b"z", b"0"]));
    let exec_after_swap = |w: &mut Raw, r: &mut Raw, db: &[u8], key: &[u8]| {
        ask(w, &cmd(&[b"SELECT", db]));
        assert_eq!(ask_str(w, &[b"WATCH", key]), "+OK\r\n");
        assert_eq!(ask_str(w, &[b"MULTI"]), "+OK\r\n");
        assert_eq!(ask_str(w, &[b"PING"]), "+QUEUED\r\n");
        assert_eq!(ask_str(r, &[b"SWAPDB", b"0", b"1"]), "+OK\r\n");
        ask_str(w, &[b"EXEC"])
    };
    // A key that appears, one that disappears, one that changes: the transaction fails.
    assert_eq!(exec_after_swap(&mut w, &mut r, b"0", b"x"), "*-1\r\n");
    assert_eq!(exec_after_swap(&mut w, &mut r, b"1", b"x"), "*-1\r\n");
    assert_eq!(exec_after_swap(&mut w, &mut r, b"1", b"z"), "*-1\r\n");
    // A key in neither database did not change.
    assert_eq!(
        exec_after_swap(&mut w, &mut r, b"0", b"y"),
        "*1\r\n+PONG\r\n"
    );
    // Databases not swapped are not touched.
    ask(&mut r, &cmd(&[b"SELECT", b"5"]));
    ask(&mut r, &cmd(&[b"SET", b"x", b"5"]));
    ask(&mut r, &cmd(&[b"SELECT", b"0"]));
    assert_eq!(
        exec_after_swap(&mut w, &mut r, b"5", b"x"),
        "*1\r\n+PONG\r\n"
    );
}

#[test]
fn swapdb_serves_clients_blocked_on_keys_of_the_swapped_databases() {
    let s = Server::start(&["--threads", "4"]);
    let mut r = s.raw();
    ask(&mut r, &cmd(&[b"SELECT", b"1"]));
    ask(&mut r, &cmd(&[b"RPUSH", b"list", b"v"]));
    ask(&mut r, &cmd(&[b"SET", b"str", b"v"]));
    ask(&mut r, &cmd(&[b"SELECT", b"0"]));
    let mut b1 = s.raw();
    let mut b2 = s.raw();
    b1.send(&cmd(&[b"BLPOP", b"list", b"10"]));
    b2.send(&cmd(&[b"BLPOP", b"str", b"0.5"]));
    let deadline = Instant::now() + Duration::from_secs(5);
    while field(&info(&mut r, &["clients"]), "blocked_clients") != "2" {
        assert!(Instant::now() < deadline, "never blocked");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(ask_str(&mut r, &[b"SWAPDB", b"0", b"1"]), "+OK\r\n");
    // The list now in db 0 serves its waiter; the string does not suit the other one, which
    // times out.
    b1.roundtrip(b"", b"*2\r\n$4\r\nlist\r\n$1\r\nv\r\n");
    b2.roundtrip(b"", b"*-1\r\n");
    assert_eq!(ask_str(&mut r, &[b"EXISTS", b"list"]), ":0\r\n");
}

#[test]
fn swapdb_sends_tracking_clients_a_null_invalidation() {
    let s = Server::start(&[]);
    let mut t = s.raw();
    t.hello3();
    assert_eq!(ask_str(&mut t, &[b"CLIENT", b"TRACKING", b"on"]), "+OK\r\n");
    let mut r = s.raw();
    ask(&mut r, &cmd(&[b"SET", b"k", b"0"]));
    assert_eq!(ask_str(&mut t, &[b"GET", b"k"]), "$1\r\n0\r\n");
    assert_eq!(ask_str(&mut r, &[b"SWAPDB", b"0", b"1"]), "+OK\r\n");
    // The value under "k" changed (it is gone): the cache is told to drop everything.
    t.roundtrip(b"", b">2\r\n$10\r\ninvalidate\r\n_\r\n");
}
