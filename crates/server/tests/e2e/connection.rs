//! End-to-end tests of the connection commands: PING, ECHO, SELECT, QUIT, AUTH, HELLO, RESET
//! and CLIENT. Expected bytes were checked against redis-server (7.0, and 7.2's texts where
//! they differ: HELLO's NOAUTH text, CLIENT SETINFO / NO-TOUCH, lib-name/lib-ver fields).

use crate::common::{cmd, Raw, Server};
use std::time::{Duration, Instant};

/// Length of the first complete RESP reply in `b`, if there is one.
fn reply_len(b: &[u8]) -> Option<usize> {
    let line_end = b.windows(2).position(|w| w == b"\r\n")?;
    let head = std::str::from_utf8(&b[1..line_end]).ok()?;
    let after = line_end + 2;
    match b[0] {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Some(after),
        b'$' | b'=' | b'!' => {
            let n: i64 = head.parse().ok()?;
            if n < 0 {
                return Some(after);
            }
            let end = after + n as usize + 2;
            (b.len() >= end).then_some(end)
        }
        b'*' | b'%' | b'~' | b'>' => {
            let n: i64 = head.parse().ok()?;
            let items = if b[0] == b'%' { 2 * n } else { n };
            let mut pos = after;
            for _ in 0..items.max(0) {
                pos += reply_len(&b[pos..])?;
            }
            Some(pos)
        }
        _ => None,
    }
}

/// Sends `req` and reads one whole reply.
fn call(r: &mut Raw, req: &[u8]) -> Vec<u8> {
    r.send(req);
    read_reply(r)
}

fn read_reply(r: &mut Raw) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(n) = reply_len(&out) {
            assert_eq!(n, out.len(), "more than one reply: {:?}", lossy(&out));
            return out;
        }
        match r.s.read(&mut buf) {
            Ok(0) | Err(_) => panic!("connection ended in a reply: {:?}", lossy(&out)),
            Ok(k) => out.extend_from_slice(&buf[..k]),
        }
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The text of a bulk or verbatim reply.
fn text_of(reply: &[u8]) -> String {
    let s = lossy(reply);
    let body = &s[s.find("\r\n").unwrap() + 2..s.len() - 2];
    body.strip_prefix("txt:").unwrap_or(body).to_string()
}

fn client_id(r: &mut Raw) -> i64 {
    let rep = call(r, &cmd(&[b"CLIENT", b"ID"]));
    lossy(&rep[1..rep.len() - 2]).parse().unwrap()
}

/// A field of a CLIENT LIST / INFO line.
fn field(line: &str, name: &str) -> String {
    line.split([' ', '\n'])
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .to_string()
}

fn hello_reply(resp3: bool, id: i64) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(if resp3 { b"%7\r\n" } else { b"*14\r\n" });
    let ver = darner_server::REDIS_COMPAT_VERSION;
    let id = id.to_string();
    let proto = if resp3 { ":3\r\n" } else { ":2\r\n" };
    v.extend_from_slice(b"$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n");
    v.extend_from_slice(format!("${}\r\n{ver}\r\n", ver.len()).as_bytes());
    v.extend_from_slice(b"$5\r\nproto\r\n");
    v.extend_from_slice(proto.as_bytes());
    v.extend_from_slice(format!("$2\r\nid\r\n:{id}\r\n").as_bytes());
    v.extend_from_slice(
        b"$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n",
    );
    v
}

#[test]
fn ping_echo_select_quit() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");
    r.roundtrip(&cmd(&[b"PING", b"hi there"]), b"$8\r\nhi there\r\n");
    r.roundtrip(
        &cmd(&[b"PING", b"a", b"b"]),
        b"-ERR wrong number of arguments for 'ping' command\r\n",
    );
    r.roundtrip(&cmd(&[b"ECHO", b""]), b"$0\r\n\r\n");
    r.roundtrip(
        &cmd(&[b"ECHO", b"a", b"b"]),
        b"-ERR wrong number of arguments for 'echo' command\r\n",
    );
    r.roundtrip(&cmd(&[b"SELECT", b"3"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"SET", b"k", b"in3"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"SELECT", b"0"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"GET", b"k"]), b"$-1\r\n");
    r.roundtrip(&cmd(&[b"SELECT", b"3"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"GET", b"k"]), b"$3\r\nin3\r\n");
    for (arg, err) in [
        (
            &b"x"[..],
            &b"-ERR value is not an integer or out of range\r\n"[..],
        ),
        (b"1.5", b"-ERR value is not an integer or out of range\r\n"),
        (b"16", b"-ERR DB index is out of range\r\n"),
        (b"-1", b"-ERR DB index is out of range\r\n"),
        (
            b"99999999999",
            b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
        ),
    ] {
        r.roundtrip(&cmd(&[b"SELECT", arg]), err);
    }
    r.roundtrip(
        &cmd(&[b"SELECT", b"1", b"2"]),
        b"-ERR wrong number of arguments for 'select' command\r\n",
    );
    r.roundtrip(&cmd(&[b"QUIT", b"extra"]), b"+OK\r\n");
    assert!(r.closed());
}

#[test]
fn hello_replies_and_errors() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let id = client_id(&mut r);
    r.roundtrip(&cmd(&[b"HELLO"]), &hello_reply(false, id));
    r.roundtrip(&cmd(&[b"HELLO", b"3"]), &hello_reply(true, id));
    // RESP3 from now on: a null is `_`.
    r.roundtrip(&cmd(&[b"CLIENT", b"GETNAME"]), b"_\r\n");
    r.roundtrip(&cmd(&[b"HELLO"]), &hello_reply(true, id));
    r.roundtrip(&cmd(&[b"HELLO", b"2"]), &hello_reply(false, id));
    r.roundtrip(&cmd(&[b"CLIENT", b"GETNAME"]), b"$-1\r\n");
    for (args, err) in [
        (
            vec![&b"HELLO"[..], b"4"],
            &b"-NOPROTO unsupported protocol version\r\n"[..],
        ),
        (
            vec![b"HELLO", b"1"],
            b"-NOPROTO unsupported protocol version\r\n",
        ),
        (
            vec![b"HELLO", b"abc"],
            b"-ERR Protocol version is not an integer or out of range\r\n",
        ),
        (
            vec![b"HELLO", b"3", b"foo"],
            b"-ERR Syntax error in HELLO option 'foo'\r\n",
        ),
        (
            vec![b"HELLO", b"3", b"auth", b"a"],
            b"-ERR Syntax error in HELLO option 'auth'\r\n",
        ),
        (
            vec![b"HELLO", b"3", b"setname", b"a b"],
            b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
        ),
        (
            vec![b"HELLO", b"3", b"auth", b"foo", b"bar"],
            b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
        ),
    ] {
        r.roundtrip(&cmd(&args), err);
    }
    // Errors change nothing: still RESP2.
    r.roundtrip(&cmd(&[b"CLIENT", b"GETNAME"]), b"$-1\r\n");
    // Without a password the default user is "nopass": any password is accepted.
    r.roundtrip(
        &cmd(&[b"HELLO", b"3", b"SETNAME", b"x", b"AUTH", b"default", b"y"]),
        &hello_reply(true, id),
    );
    r.roundtrip(&cmd(&[b"CLIENT", b"GETNAME"]), b"$1\r\nx\r\n");
    r.roundtrip(
        &cmd(&[b"HELLO", b"2", b"setname", b""]),
        &hello_reply(false, id),
    );
    r.roundtrip(&cmd(&[b"CLIENT", b"GETNAME"]), b"$-1\r\n");
}

#[test]
fn auth_without_password_configured() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    r.roundtrip(
        &cmd(&[b"AUTH", b"x"]),
        b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
    );
    r.roundtrip(&cmd(&[b"AUTH", b"default", b"x"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"AUTH", b"default", b""]), b"+OK\r\n");
    r.roundtrip(
        &cmd(&[b"AUTH", b"foo", b"x"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    r.roundtrip(&cmd(&[b"AUTH", b"a", b"b", b"c"]), b"-ERR syntax error\r\n");
    r.roundtrip(
        &cmd(&[b"AUTH"]),
        b"-ERR wrong number of arguments for 'auth' command\r\n",
    );
}

#[test]
fn auth_flows_with_requirepass() {
    let s = Server::start(&["--requirepass", "secret"]);
    let mut r = s.raw();
    let noauth_hello = b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n";
    let wrongpass = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";
    r.roundtrip(&cmd(&[b"PING"]), b"-NOAUTH Authentication required.\r\n");
    r.roundtrip(&cmd(&[b"HELLO"]), noauth_hello);
    r.roundtrip(&cmd(&[b"HELLO", b"3"]), noauth_hello);
    r.roundtrip(
        &cmd(&[b"CLIENT", b"ID"]),
        b"-NOAUTH Authentication required.\r\n",
    );
    r.roundtrip(&cmd(&[b"AUTH", b"x"]), wrongpass);
    r.roundtrip(&cmd(&[b"AUTH", b"default", b"x"]), wrongpass);
    r.roundtrip(&cmd(&[b"AUTH", b"other", b"secret"]), wrongpass);
    r.roundtrip(&cmd(&[b"AUTH", b"a", b"b", b"c"]), b"-ERR syntax error\r\n");
    r.roundtrip(&cmd(&[b"AUTH", b"secret"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");
    // A failed AUTH does not log an authenticated client out.
    r.roundtrip(&cmd(&[b"AUTH", b"wrong"]), wrongpass);
    r.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");
    r.roundtrip(&cmd(&[b"AUTH", b"default", b"secret"]), b"+OK\r\n");
    r.roundtrip(
        &cmd(&[b"HELLO", b"3", b"AUTH", b"default", b"wrong"]),
        wrongpass,
    );
    // RESET logs out when a password is set.
    r.roundtrip(&cmd(&[b"RESET"]), b"+RESET\r\n");
    r.roundtrip(&cmd(&[b"PING"]), b"-NOAUTH Authentication required.\r\n");

    // HELLO AUTH authenticates, names and switches protocol at once.
    let mut r = s.raw();
    r.send(&cmd(&[
        b"HELLO", b"3", b"AUTH", b"default", b"secret", b"SETNAME", b"me",
    ]));
    let rep = read_reply(&mut r);
    let id = client_id(&mut r);
    assert_eq!(lossy(&rep), lossy(&hello_reply(true, id)));
    r.roundtrip(&cmd(&[b"CLIENT", b"GETNAME"]), b"$2\r\nme\r\n");
    r.roundtrip(&cmd(&[b"QUIT"]), b"+OK\r\n");
    assert!(r.closed());
}

#[test]
fn client_names_and_library_info() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let bad_name = b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n";
    r.roundtrip(&cmd(&[b"CLIENT", b"GETNAME"]), b"$-1\r\n");
    r.roundtrip(&cmd(&[b"CLIENT", b"SETNAME", b"a b"]), bad_name);
    r.roundtrip(&cmd(&[b"CLIENT", b"SETNAME", b"a\nb"]), bad_name);
    r.roundtrip(&cmd(&[b"CLIENT", b"SETNAME", "é".as_bytes()]), bad_name);
    r.roundtrip(&cmd(&[b"CLIENT", b"SETNAME", b"ok!~"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"CLIENT", b"GETNAME"]), b"$4\r\nok!~\r\n");
    r.roundtrip(&cmd(&[b"CLIENT", b"SETNAME", b""]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"CLIENT", b"GETNAME"]), b"$-1\r\n");
    r.roundtrip(
        &cmd(&[b"CLIENT", b"SETNAME", b"a", b"b"]),
        b"-ERR wrong number of arguments for 'client|setname' command\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CLIENT", b"GETNAME", b"x"]),
        b"-ERR wrong number of arguments for 'client|getname' command\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CLIENT", b"ID", b"x"]),
        b"-ERR wrong number of arguments for 'client|id' command\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CLIENT", b"FOO"]),
        b"-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CLIENT"]),
        b"-ERR wrong number of arguments for 'client' command\r\n",
    );

    r.roundtrip(
        &cmd(&[b"CLIENT", b"SETINFO", b"lib-name", b"redis-py"]),
        b"+OK\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CLIENT", b"SETINFO", b"LIB-VER", b"1.0"]),
        b"+OK\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CLIENT", b"SETINFO", b"LIB-name", b"a b"]),
        b"-ERR LIB-name cannot contain spaces, newlines or special characters.\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CLIENT", b"SETINFO", b"foo", b"x"]),
        b"-ERR Unrecognized option 'foo'\r\n",
    );
    let info = text_of(&call(&mut r, &cmd(&[b"CLIENT", b"INFO"])));
    assert_eq!(field(&info, "lib-name"), "redis-py");
    assert_eq!(field(&info, "lib-ver"), "1.0");
    r.roundtrip(&cmd(&[b"CLIENT", b"SETINFO", b"lib-name", b""]), b"+OK\r\n");
    let info = text_of(&call(&mut r, &cmd(&[b"CLIENT", b"INFO"])));
    assert_eq!(field(&info, "lib-name"), "");
    assert_eq!(field(&info, "lib-ver"), "1.0");
}

/// The field names of a CLIENT LIST line, in Redis 7.2's order.
const FIELDS: &[&str] = &[
    "id",
    "addr",
    "laddr",
    "fd",
    "name",
    "age",
    "idle",
    "flags",
    "db",
    "sub",
    "psub",
    "ssub",
    "multi",
    "qbuf",
    "qbuf-free",
    "argv-mem",
    "multi-mem",
    "rbs",
    "rbp",
    "obl",
    "oll",
    "omem",
    "tot-mem",
    "events",
    "cmd",
    "user",
    "redir",
    "resp",
    "lib-name",
    "lib-ver",
];

fn check_line_layout(line: &str) {
    let names: Vec<&str> = line
        .split(' ')
        .map(|kv| kv.split('=').next().unwrap())
        .collect();
    assert_eq!(names, FIELDS, "{line}");
}

#[test]
fn client_info_and_list_format() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    let mut b = s.raw();
    let ida = client_id(&mut a);
    let idb = client_id(&mut b);
    b.roundtrip(&cmd(&[b"CLIENT", b"SETNAME", b"bee"]), b"+OK\r\n");
    b.roundtrip(&cmd(&[b"SELECT", b"2"]), b"+OK\r\n");
    b.roundtrip(&cmd(&[b"MULTI"]), b"+OK\r\n");
    b.roundtrip(&cmd(&[b"SET", b"k", b"v"]), b"+QUEUED\r\n");

    let rep = call(&mut a, &cmd(&[b"CLIENT", b"INFO"]));
    assert!(rep.starts_with(b"$"), "{}", lossy(&rep));
    let info = text_of(&rep);
    assert!(info.ends_with('\n') && info.matches('\n').count() == 1);
    let line = info.trim_end();
    check_line_layout(line);
    assert_eq!(field(line, "id"), ida.to_string());
    assert_eq!(
        field(line, "addr"),
        a.s.local_addr().unwrap().to_string(),
        "addr is the client's side"
    );
    assert_eq!(field(line, "laddr"), format!("127.0.0.1:{}", s.port));
    for (f, v) in [
        ("name", ""),
        ("idle", "0"),
        ("flags", "N"),
        ("db", "0"),
        ("sub", "0"),
        ("psub", "0"),
        ("ssub", "0"),
        ("multi", "-1"),
        ("argv-mem", "10"),
        ("multi-mem", "0"),
        ("events", "r"),
        ("cmd", "client|info"),
        ("user", "default"),
        ("redir", "-1"),
        ("resp", "2"),
        ("lib-name", ""),
        ("lib-ver", ""),
    ] {
        assert_eq!(field(line, f), v, "{f} in {line}");
    }

    let list = text_of(&call(&mut a, &cmd(&[b"CLIENT", b"LIST"])));
    // The harness's readiness probe may still be closing: it never sent a command (cmd=NULL).
    let lines: Vec<&str> = list.lines().filter(|l| field(l, "cmd") != "NULL").collect();
    assert_eq!(lines.len(), 2, "{list}");
    // Ascending ids (accept order); each line complete.
    let ids: Vec<i64> = lines
        .iter()
        .map(|l| field(l, "id").parse().unwrap())
        .collect();
    assert!(ids[0] < ids[1], "{list}");
    for l in &lines {
        check_line_layout(l);
    }
    let line_of = |id: i64| {
        *lines
            .iter()
            .find(|l| field(l, "id") == id.to_string())
            .unwrap()
    };
    assert_eq!(field(line_of(ida), "cmd"), "client|list");
    let lb = line_of(idb);
    assert_eq!(field(lb, "name"), "bee");
    assert_eq!(field(lb, "db"), "2");
    assert_eq!(field(lb, "flags"), "x");
    assert_eq!(field(lb, "multi"), "1");
    assert_eq!(field(lb, "multi-mem"), "5");
    assert_eq!(field(lb, "cmd"), "set");

    // Filters.
    let only_b = text_of(&call(
        &mut a,
        &cmd(&[
            b"CLIENT",
            b"LIST",
            b"ID",
            idb.to_string().as_bytes(),
            b"999999",
            idb.to_string().as_bytes(),
        ]),
    ));
    let ls: Vec<&str> = only_b.lines().collect();
    assert_eq!(ls.len(), 2, "one line per ID asked for: {only_b}");
    assert!(ls.iter().all(|l| field(l, "id") == idb.to_string()));
    let normal = text_of(&call(
        &mut a,
        &cmd(&[b"CLIENT", b"LIST", b"TYPE", b"normal"]),
    ));
    assert_eq!(normal.lines().count(), 2);
    for t in [&b"master"[..], b"replica", b"slave", b"pubsub"] {
        a.roundtrip(&cmd(&[b"CLIENT", b"LIST", b"TYPE", t]), b"$0\r\n\r\n");
    }
    a.roundtrip(
        &cmd(&[b"CLIENT", b"LIST", b"TYPE", b"foo"]),
        b"-ERR Unknown client type 'foo'\r\n",
    );
    a.roundtrip(
        &cmd(&[b"CLIENT", b"LIST", b"foo"]),
        b"-ERR syntax error\r\n",
    );
    a.roundtrip(&cmd(&[b"CLIENT", b"LIST", b"ID"]), b"-ERR syntax error\r\n");
    a.roundtrip(
        &cmd(&[b"CLIENT", b"LIST", b"ID", b"x"]),
        b"-ERR Invalid client ID\r\n",
    );
    a.roundtrip(
        &cmd(&[b"CLIENT", b"LIST", b"TYPE", b"normal", b"x"]),
        b"-ERR syntax error\r\n",
    );

    // Flags of the client's own modes; RESP3 replies verbatim text.
    a.roundtrip(&cmd(&[b"CLIENT", b"NO-EVICT", b"on"]), b"+OK\r\n");
    a.roundtrip(&cmd(&[b"CLIENT", b"NO-TOUCH", b"ON"]), b"+OK\r\n");
    a.roundtrip(
        &cmd(&[b"CLIENT", b"NO-EVICT", b"maybe"]),
        b"-ERR syntax error\r\n",
    );
    a.roundtrip(
        &cmd(&[b"CLIENT", b"NO-TOUCH", b"maybe"]),
        b"-ERR syntax error\r\n",
    );
    call(&mut a, &cmd(&[b"HELLO", b"3"]));
    let rep = call(&mut a, &cmd(&[b"CLIENT", b"INFO"]));
    assert!(rep.starts_with(b"="), "{}", lossy(&rep));
    let line = text_of(&rep);
    assert_eq!(field(&line, "flags"), "eT");
    assert_eq!(field(line.trim_end(), "resp"), "3");
    a.roundtrip(&cmd(&[b"CLIENT", b"NO-EVICT", b"off"]), b"+OK\r\n");
    a.roundtrip(&cmd(&[b"CLIENT", b"NO-TOUCH", b"off"]), b"+OK\r\n");
    let line = text_of(&call(&mut a, &cmd(&[b"CLIENT", b"INFO"])));
    assert_eq!(field(&line, "flags"), "N");

    let help = call(&mut a, &cmd(&[b"CLIENT", b"HELP"]));
    assert!(help.starts_with(b"*"));
    assert!(lossy(&help)
        .contains("+CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"));
}

#[test]
fn client_kill() {
    let s = Server::start(&["--threads", "3"]);
    let mut a = s.raw();
    let mut b = s.raw();
    // By id from another connection (whichever thread it lives on): really closed.
    let ida = client_id(&mut a);
    b.roundtrip(
        &cmd(&[b"CLIENT", b"KILL", b"ID", ida.to_string().as_bytes()]),
        b":1\r\n",
    );
    assert!(a.closed());
    b.roundtrip(
        &cmd(&[b"CLIENT", b"KILL", b"ID", ida.to_string().as_bytes()]),
        b":0\r\n",
    );

    // Old form, by address.
    let mut c = s.raw();
    // Accepted by now (a connect alone may still wait in the listen queue).
    c.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");
    let addr_c = c.s.local_addr().unwrap().to_string();
    b.roundtrip(&cmd(&[b"CLIENT", b"KILL", addr_c.as_bytes()]), b"+OK\r\n");
    assert!(c.closed());
    b.roundtrip(
        &cmd(&[b"CLIENT", b"KILL", addr_c.as_bytes()]),
        b"-ERR No such client\r\n",
    );

    // The old form may kill the caller: reply first, then close.
    let mut d = s.raw();
    let addr_d = d.s.local_addr().unwrap().to_string();
    d.roundtrip(&cmd(&[b"CLIENT", b"KILL", addr_d.as_bytes()]), b"+OK\r\n");
    assert!(d.closed());

    // The new form skips the caller unless SKIPME no.
    let mut e = s.raw();
    let ide = client_id(&mut e).to_string();
    e.roundtrip(
        &cmd(&[b"CLIENT", b"KILL", b"ID", ide.as_bytes()]),
        b":0\r\n",
    );
    e.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");
    e.roundtrip(
        &cmd(&[b"CLIENT", b"KILL", b"ID", ide.as_bytes(), b"SKIPME", b"no"]),
        b":1\r\n",
    );
    assert!(e.closed());

    // Filters combine; LADDR, USER, TYPE, MAXAGE.
    let mut f = s.raw();
    let mut g = s.raw();
    g.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");
    let laddr = format!("127.0.0.1:{}", s.port);
    f.roundtrip(
        &cmd(&[
            b"CLIENT",
            b"KILL",
            b"LADDR",
            b"1.2.3.4:5",
            b"TYPE",
            b"normal",
        ]),
        b":0\r\n",
    );
    f.roundtrip(&cmd(&[b"CLIENT", b"KILL", b"MAXAGE", b"100000"]), b":0\r\n");
    f.roundtrip(&cmd(&[b"CLIENT", b"KILL", b"TYPE", b"master"]), b":0\r\n");
    // b and g are normal clients of user default on this address.
    f.roundtrip(
        &cmd(&[
            b"CLIENT",
            b"KILL",
            b"LADDR",
            laddr.as_bytes(),
            b"USER",
            b"default",
            b"TYPE",
            b"normal",
        ]),
        b":2\r\n",
    );
    assert!(g.closed());
    assert!(b.closed());
    f.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");

    for (args, err) in [
        (
            vec![&b"ID"[..], b"x"],
            &b"-ERR client-id should be greater than 0\r\n"[..],
        ),
        (
            vec![b"ID", b"0"],
            b"-ERR client-id should be greater than 0\r\n",
        ),
        (
            vec![b"ID", b"-1"],
            b"-ERR client-id should be greater than 0\r\n",
        ),
        (vec![b"TYPE", b"foo"], b"-ERR Unknown client type 'foo'\r\n"),
        (
            vec![b"TYPE", b"normal", b"SKIPME", b"maybe"],
            b"-ERR syntax error\r\n",
        ),
        (vec![b"USER", b"bob"], b"-ERR No such user 'bob'\r\n"),
        (vec![b"ID", b"5", b"SKIPME"], b"-ERR syntax error\r\n"),
        (vec![b"foo", b"bar"], b"-ERR syntax error\r\n"),
        (
            vec![b"MAXAGE", b"x"],
            b"-ERR maxage is not an integer or out of range\r\n",
        ),
        (
            vec![b"MAXAGE", b"0"],
            b"-ERR maxage should be greater than 0\r\n",
        ),
    ] {
        let mut req: Vec<&[u8]> = vec![b"CLIENT", b"KILL"];
        req.extend(args);
        f.roundtrip(&cmd(&req), err);
    }
    f.roundtrip(
        &cmd(&[b"CLIENT", b"KILL"]),
        b"-ERR wrong number of arguments for 'client|kill' command\r\n",
    );
}

#[test]
fn client_reply_off_on_skip() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    // Everything pipelined at once: suppressed replies would shift what follows.
    let mut req = Vec::new();
    for args in [
        &[&b"CLIENT"[..], b"REPLY", b"OFF"][..],
        &[b"PING"],
        &[b"SET", b"k", b"v"],
        &[b"CLIENT", b"REPLY", b"bad"],
        &[b"NOSUCH"],
        &[b"CLIENT", b"REPLY", b"SKIP"],
        &[b"PING"],
        &[b"CLIENT", b"REPLY", b"ON"],
        &[b"GET", b"k"],
        &[b"CLIENT", b"REPLY", b"SKIP"],
        &[b"GET", b"k"],
        &[b"PING", b"after-skip"],
        &[b"CLIENT", b"REPLY", b"SKIP"],
        &[b"CLIENT", b"REPLY", b"ON"],
        &[b"PING", b"on-again"],
        &[b"CLIENT", b"REPLY", b"bad"],
        &[b"CLIENT", b"REPLY", b"OFF"],
        &[b"RESET"],
        &[b"PING", b"after-reset"],
        &[b"CLIENT", b"REPLY", b"SKIP"],
        &[b"RESET"],
        &[b"PING", b"last"],
    ] {
        req.extend(cmd(args));
    }
    r.roundtrip(
        &req,
        b"+OK\r\n$1\r\nv\r\n$10\r\nafter-skip\r\n+OK\r\n$8\r\non-again\r\n-ERR syntax error\r\n+RESET\r\n$11\r\nafter-reset\r\n$4\r\nlast\r\n",
    );
    r.roundtrip(
        &cmd(&[b"CLIENT", b"REPLY"]),
        b"-ERR wrong number of arguments for 'client|reply' command\r\n",
    );
}

#[test]
fn client_pause_write_holds_writes_only() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    let mut b = s.raw();
    let mut c = s.raw();
    c.roundtrip(&cmd(&[b"SET", b"k", b"old"]), b"+OK\r\n");
    let t0 = Instant::now();
    a.roundtrip(&cmd(&[b"CLIENT", b"PAUSE", b"400", b"WRITE"]), b"+OK\r\n");
    b.send(&cmd(&[b"SET", b"k", b"new"]));
    b.send(&cmd(&[b"GET", b"k"]));
    // Reads go on meanwhile and see the old value.
    c.roundtrip(&cmd(&[b"GET", b"k"]), b"$3\r\nold\r\n");
    c.roundtrip(&cmd(&[b"PING"]), b"+PONG\r\n");
    b.s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    assert!(b.read_n(1).is_empty(), "SET answered during the pause");
    b.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let got = b.read_n(b"+OK\r\n$3\r\nnew\r\n".len());
    assert_eq!(lossy(&got), "+OK\r\n$3\r\nnew\r\n");
    assert!(
        t0.elapsed() >= Duration::from_millis(350),
        "{:?}",
        t0.elapsed()
    );

    // UNPAUSE releases held commands early.
    let t0 = Instant::now();
    a.roundtrip(&cmd(&[b"CLIENT", b"PAUSE", b"20000", b"WRITE"]), b"+OK\r\n");
    b.send(&cmd(&[b"DEL", b"k"]));
    std::thread::sleep(Duration::from_millis(50));
    a.roundtrip(&cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
    b.roundtrip(b"", b":1\r\n");
    assert!(t0.elapsed() < Duration::from_secs(5));

    for (args, err) in [
        (
            vec![&b"x"[..]],
            &b"-ERR timeout is not an integer or out of range\r\n"[..],
        ),
        (vec![b"-1"], b"-ERR timeout is negative\r\n"),
        (
            vec![b"10", b"foo"],
            b"-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n",
        ),
        (
            vec![b"9223372036854775807"],
            b"-ERR timeout is out of range\r\n",
        ),
        (
            vec![b"10", b"write", b"x"],
            b"-ERR unknown subcommand or wrong number of arguments for 'PAUSE'. Try CLIENT HELP.\r\n",
        ),
    ] {
        let mut req: Vec<&[u8]> = vec![b"CLIENT", b"PAUSE"];
        req.extend(args);
        a.roundtrip(&cmd(&req), err);
    }
    a.roundtrip(
        &cmd(&[b"CLIENT", b"PAUSE"]),
        b"-ERR wrong number of arguments for 'client|pause' command\r\n",
    );
    a.roundtrip(
        &cmd(&[b"CLIENT", b"UNPAUSE", b"x"]),
        b"-ERR wrong number of arguments for 'client|unpause' command\r\n",
    );
    // A zero timeout pauses nothing.
    a.roundtrip(&cmd(&[b"CLIENT", b"PAUSE", b"0"]), b"+OK\r\n");
    a.roundtrip(&cmd(&[b"SET", b"k", b"v"]), b"+OK\r\n");
}

#[test]
fn reset_restores_a_fresh_connection() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    for args in [
        &[&b"CLIENT"[..], b"SETNAME", b"foo"][..],
        &[b"CLIENT", b"SETINFO", b"lib-name", b"mylib"],
        &[b"CLIENT", b"NO-EVICT", b"on"],
        &[b"CLIENT", b"NO-TOUCH", b"on"],
        &[b"SELECT", b"3"],
        &[b"WATCH", b"w"],
        &[b"HELLO", b"3"],
    ] {
        call(&mut r, &cmd(args));
    }
    r.roundtrip(&cmd(&[b"MULTI"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"PING"]), b"+QUEUED\r\n");
    r.roundtrip(&cmd(&[b"RESET"]), b"+RESET\r\n");
    // RESP2 again, no name, db 0, no transaction, no flags; the library name stays.
    r.roundtrip(&cmd(&[b"CLIENT", b"GETNAME"]), b"$-1\r\n");
    r.roundtrip(&cmd(&[b"EXEC"]), b"-ERR EXEC without MULTI\r\n");
    let line = text_of(&call(&mut r, &cmd(&[b"CLIENT", b"INFO"])));
    for (f, v) in [
        ("flags", "N"),
        ("db", "0"),
        ("multi", "-1"),
        ("name", ""),
        ("resp", "2"),
        ("lib-name", "mylib"),
    ] {
        assert_eq!(field(line.trim_end(), f), v, "{f} in {line}");
    }
    // The WATCH is gone: a write to w does not abort a new transaction.
    let mut other = s.raw();
    other.roundtrip(&cmd(&[b"SET", b"w", b"1"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"MULTI"]), b"+OK\r\n");
    r.roundtrip(&cmd(&[b"PING"]), b"+QUEUED\r\n");
    r.roundtrip(&cmd(&[b"EXEC"]), b"*1\r\n+PONG\r\n");
    r.roundtrip(
        &cmd(&[b"RESET", b"x"]),
        b"-ERR wrong number of arguments for 'reset' command\r\n",
    );
}

#[test]
fn client_unpause_releases_held_commands_at_once() {
    // With one cron tick a second, a release left to the cron would take up to a second;
    // UNPAUSE tells every thread at once (as Redis releases them in the same call).
    let s = Server::start(&["--hz", "1"]);
    let mut a = s.raw();
    let mut held: Vec<Raw> = (0..4).map(|_| s.raw()).collect();
    a.roundtrip(&cmd(&[b"CLIENT", b"PAUSE", b"60000", b"ALL"]), b"+OK\r\n");
    for (i, b) in held.iter_mut().enumerate() {
        b.send(&cmd(&[b"SET", format!("k{i}").as_bytes(), b"v"]));
    }
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    a.roundtrip(&cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
    for b in &mut held {
        b.roundtrip(b"", b"+OK\r\n");
    }
    assert!(
        t0.elapsed() < Duration::from_millis(300),
        "released after {:?}",
        t0.elapsed()
    );
}

/// A field of INFO (all sections).
fn info_field(r: &mut Raw, name: &str) -> String {
    let text = text_of(&call(r, &cmd(&[b"INFO", b"everything"])));
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO"))
        .trim()
        .to_string()
}

/// Waits (at most 5 s) until INFO's `name` reads `want`.
fn until_info(r: &mut Raw, name: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let got = info_field(r, name);
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{name} stays {got}, not {want}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn client_pause_counts_held_clients_as_blocked() {
    let s = Server::start(&["--threads", "4"]);
    let mut a = s.raw();
    let mut held: Vec<Raw> = (0..3).map(|_| s.raw()).collect();
    a.roundtrip(&cmd(&[b"CLIENT", b"PAUSE", b"60000", b"WRITE"]), b"+OK\r\n");
    for (i, b) in held.iter_mut().enumerate() {
        b.send(&cmd(&[b"SET", format!("k{i}").as_bytes(), b"v"]));
    }
    // As Redis counts postponed clients.
    until_info(&mut a, "blocked_clients", "3");
    a.roundtrip(&cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
    for b in &mut held {
        b.roundtrip(b"", b"+OK\r\n");
    }
    until_info(&mut a, "blocked_clients", "0");
    // A held client that goes away is no longer counted.
    a.roundtrip(&cmd(&[b"CLIENT", b"PAUSE", b"60000", b"WRITE"]), b"+OK\r\n");
    let mut gone = s.raw();
    gone.send(&cmd(&[b"DEL", b"k0"]));
    until_info(&mut a, "blocked_clients", "1");
    drop(gone);
    a.roundtrip(&cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
    until_info(&mut a, "blocked_clients", "0");
}

#[test]
fn client_pause_write_holds_publish_spublish_pfcount_and_their_exec() {
    // Redis 7.2 holds the commands flagged write or may-replicate, and an EXEC that holds one.
    let s = Server::start(&[]);
    let mut a = s.raw();
    let mut sub = s.raw();
    sub.roundtrip(
        &cmd(&[b"SUBSCRIBE", b"ch"]),
        b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    );
    let mut m = s.raw();
    m.roundtrip(&cmd(&[b"MULTI"]), b"+OK\r\n");
    m.roundtrip(&cmd(&[b"PUBLISH", b"ch", b"m2"]), b"+QUEUED\r\n");
    a.roundtrip(&cmd(&[b"CLIENT", b"PAUSE", b"60000", b"WRITE"]), b"+OK\r\n");
    let mut held: Vec<Raw> = (0..3).map(|_| s.raw()).collect();
    held[0].send(&cmd(&[b"PUBLISH", b"ch", b"m1"]));
    held[1].send(&cmd(&[b"SPUBLISH", b"sch", b"m"]));
    held[2].send(&cmd(&[b"PFCOUNT", b"h"]));
    m.send(&cmd(&[b"EXEC"]));
    until_info(&mut a, "blocked_clients", "4");
    // Reads go on.
    a.roundtrip(&cmd(&[b"GET", b"k"]), b"$-1\r\n");
    a.roundtrip(&cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
    held[0].roundtrip(b"", b":1\r\n");
    held[1].roundtrip(b"", b":0\r\n");
    held[2].roundtrip(b"", b":0\r\n");
    m.roundtrip(b"", b"*1\r\n:1\r\n");
    let (m1, m2) = (
        "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nm1\r\n",
        "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nm2\r\n",
    );
    let got = lossy(&sub.read_n(m1.len() + m2.len()));
    assert!(
        got == format!("{m1}{m2}") || got == format!("{m2}{m1}"),
        "{got:?}"
    );
}

#[test]
fn client_pause_freezes_expiry() {
    // As Redis: while paused, a key whose TTL passed reads as missing but is not deleted
    // (lazily or by the active cycle), so nothing is written; it goes after the pause.
    let s = Server::start(&["--hz", "100"]);
    let mut a = s.raw();
    // k2 first: once k's TTL has passed, k2's (set before it) has too.
    a.roundtrip(&cmd(&[b"SET", b"k2", b"v", b"PX", b"100"]), b"+OK\r\n");
    a.roundtrip(&cmd(&[b"SET", b"k", b"v", b"PX", b"100"]), b"+OK\r\n");
    a.roundtrip(&cmd(&[b"CLIENT", b"PAUSE", b"60000", b"WRITE"]), b"+OK\r\n");
    // Until the TTL has passed (a read of a live key answers its value).
    let deadline = Instant::now() + Duration::from_secs(5);
    while call(&mut a, &cmd(&[b"GET", b"k"])) != b"$-1\r\n" {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    }
    a.roundtrip(&cmd(&[b"EXISTS", b"k", b"k2"]), b":0\r\n");
    a.roundtrip(&cmd(&[b"PTTL", b"k2"]), b":-2\r\n");
    a.roundtrip(&cmd(&[b"KEYS", b"*"]), b"*0\r\n");
    // Many cron ticks (hz 100) later, both keys are still there, none counted expired.
    std::thread::sleep(Duration::from_millis(300));
    a.roundtrip(&cmd(&[b"DBSIZE"]), b":2\r\n");
    assert_eq!(info_field(&mut a, "expired_keys"), "0");
    a.roundtrip(&cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
    a.roundtrip(&cmd(&[b"GET", b"k"]), b"$-1\r\n");
    // The active cycle takes the other one.
    until_info(&mut a, "expired_keys", "2");
    a.roundtrip(&cmd(&[b"DBSIZE"]), b":0\r\n");
}

/// The CLIENT LIST line of client `id`.
fn client_line(r: &mut Raw, id: i64) -> String {
    let id = id.to_string();
    text_of(&call(r, &cmd(&[b"CLIENT", b"LIST", b"ID", id.as_bytes()])))
}

#[test]
fn client_list_qbuf_counts_requests_read_but_held() {
    // A pipeline whose first command CLIENT PAUSE holds: the held command's arguments are its
    // argv-mem, the request behind it is still in the query buffer (as in Redis).
    let s = Server::start(&[]);
    let mut a = s.raw();
    let mut b = s.raw();
    let id = client_id(&mut b);
    a.roundtrip(&cmd(&[b"CLIENT", b"PAUSE", b"60000", b"WRITE"]), b"+OK\r\n");
    let get = cmd(&[b"GET", b"a"]);
    let mut pipeline = cmd(&[b"SET", b"a", b"1"]);
    pipeline.extend_from_slice(&get);
    b.send(&pipeline);
    until_info(&mut a, "blocked_clients", "1");
    let line = client_line(&mut a, id);
    assert_eq!(field(&line, "qbuf"), get.len().to_string(), "{line}");
    assert_eq!(field(&line, "argv-mem"), "5", "{line}");
    a.roundtrip(&cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
    b.roundtrip(b"", b"+OK\r\n$1\r\n1\r\n");
    let line = client_line(&mut a, id);
    assert_eq!(field(&line, "qbuf"), "0", "{line}");
    assert_eq!(field(&line, "argv-mem"), "0", "{line}");
}

#[test]
fn an_idle_query_buffer_shrinks_after_a_huge_command() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    let mut big = s.raw();
    let id = client_id(&mut big);
    let members: Vec<Vec<u8>> = (0..100_000).map(|i| format!("m{i}").into_bytes()).collect();
    let mut args: Vec<&[u8]> = vec![b"SADD", b"s"];
    args.extend(members.iter().map(|m| &m[..]));
    big.roundtrip(&cmd(&args), b":100000\r\n");
    let line = client_line(&mut a, id);
    let free: usize = field(&line, "qbuf-free").parse().unwrap();
    assert!(free > 100_000, "the buffer grew for the command: {line}");
    // As Redis's cron: once the client is idle (2 s), the buffer's spare room goes back.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let line = client_line(&mut a, id);
        let free: usize = field(&line, "qbuf-free").parse().unwrap();
        let tot: usize = field(&line, "tot-mem").parse().unwrap();
        if free < 16 * 1024 && tot < 64 * 1024 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the query buffer stays big: {line}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The connection works as before.
    big.roundtrip(&cmd(&[b"SCARD", b"s"]), b":100000\r\n");
}
