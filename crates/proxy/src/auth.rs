//! Client authentication to the proxy (`requirepass`): AUTH, HELLO's AUTH option and the
//! NOAUTH gate, with Redis's exact replies. The proxy has one user, `default`, as a Redis
//! without ACL rules: with no `requirepass` it has `nopass` (every client is authenticated and
//! `AUTH default <anything>` succeeds), with one it takes that password.
//!
//! The gate runs before routing, so nothing an unauthenticated client sends reaches a
//! backend. It keeps Redis's order of checks: an unknown command, an unknown subcommand or a
//! wrong number of arguments is reported as such before NOAUTH (processCommand checks those
//! first), and only commands flagged `no-auth` (AUTH, HELLO, QUIT, RESET) pass.

use darner_commands::{flags, lookup, lookup_subcommand};
use darner_resp::ReplyWriter;

use crate::route::{error, Identity, Plan, Session};
use crate::slots::SlotMap;

/// Redis's reply to a wrong user or password.
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
/// Redis's reply to a command before AUTH.
pub const NOAUTH: &str = "NOAUTH Authentication required.";
const NOAUTH_HELLO: &str = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";
const NO_PASSWORD: &str = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?";

/// What the gate decided.
#[derive(Debug)]
pub enum Verdict<'a> {
    /// The request is answered (AUTH, or refused).
    Reply(Plan),
    /// A HELLO whose AUTH option was checked and taken out: route these arguments.
    Hello(Vec<&'a [u8]>),
    /// Not the gate's business: route the request as it is.
    Pass,
}

fn ok(s: &Session) -> Plan {
    let mut bytes = Vec::new();
    ReplyWriter::new(&mut bytes, s.resp3).ok();
    Plan::Reply {
        bytes,
        close: false,
    }
}

/// Whether the client may run commands.
pub fn authenticated(s: &Session, requirepass: Option<&[u8]>) -> bool {
    requirepass.is_none() || s.authenticated
}

/// Compares without stopping at the first difference, so that the time taken says nothing
/// about how much of a guess was right (as Redis's time_independent_strcmp).
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

fn credentials_ok(user: &[u8], pass: &[u8], requirepass: Option<&[u8]>) -> bool {
    user == b"default" && requirepass.is_none_or(|p| same_secret(p, pass))
}

/// The gate for one request (`args` not empty); `me` and `map` are routing's, for HELLO.
pub fn check<'a>(
    args: &[&'a [u8]],
    s: &mut Session,
    requirepass: Option<&[u8]>,
    me: &Identity,
    map: &SlotMap,
) -> Verdict<'a> {
    let name = args[0];
    if name.eq_ignore_ascii_case(b"auth") {
        return Verdict::Reply(auth(args, s, requirepass));
    }
    if name.eq_ignore_ascii_case(b"hello") {
        return hello(args, s, requirepass, me, map);
    }
    if authenticated(s, requirepass) {
        return Verdict::Pass;
    }
    let Some(top) = lookup(name) else {
        // CLUSTER is not in the shared table but is a command: it needs AUTH like any other.
        if name.eq_ignore_ascii_case(b"cluster") {
            return Verdict::Reply(error(s, NOAUTH));
        }
        return Verdict::Reply(error(s, &unknown_command(args)));
    };
    let spec = match (top.is_container(), args.get(1)) {
        (true, Some(sub)) => match lookup_subcommand(top, sub) {
            Some(sub) => sub,
            None => {
                return Verdict::Reply(error(
                    s,
                    &format!(
                        "ERR unknown subcommand '{}'. Try {} HELP.",
                        String::from_utf8_lossy(&sub[..sub.len().min(128)]),
                        top.name.to_ascii_uppercase()
                    ),
                ))
            }
        },
        _ => top,
    };
    if !spec.arity_ok(args.len()) {
        return Verdict::Reply(error(
            s,
            &format!(
                "ERR wrong number of arguments for '{}' command",
                spec.full_name
            ),
        ));
    }
    if spec.has(flags::NO_AUTH) {
        Verdict::Pass
    } else {
        Verdict::Reply(error(s, NOAUTH))
    }
}

/// Redis's unknown-command error: the name and the first arguments, each cut at 128 bytes and
/// the list at about 128.
pub(crate) fn unknown_command(args: &[&[u8]]) -> String {
    let cut = |a: &[u8], n: usize| String::from_utf8_lossy(&a[..a.len().min(n)]).into_owned();
    let mut list = String::new();
    for a in &args[1..] {
        if list.len() >= 128 {
            break;
        }
        let room = 128 - list.len();
        list.push('\'');
        list.push_str(&cut(a, room));
        list.push_str("' ");
    }
    format!(
        "ERR unknown command '{}', with args beginning with: {list}",
        cut(args[0], 128)
    )
}

/// AUTH [user] password.
fn auth(args: &[&[u8]], s: &mut Session, requirepass: Option<&[u8]>) -> Plan {
    if args.len() < 2 {
        return error(s, "ERR wrong number of arguments for 'auth' command");
    }
    if s.tx.multi {
        // Queued, it would authenticate at EXEC on a backend connection, not to the proxy.
        s.tx.aborted = true;
        return error(s, "ERR AUTH inside MULTI is not supported by darner proxy");
    }
    if args.len() > 3 {
        return error(s, "ERR syntax error");
    }
    let (user, pass): (&[u8], &[u8]) = if args.len() == 2 {
        if requirepass.is_none() {
            return error(s, NO_PASSWORD);
        }
        (b"default", args[1])
    } else {
        (args[1], args[2])
    };
    // A failed AUTH leaves the client as it was: one already authenticated stays so.
    if credentials_ok(user, pass, requirepass) {
        s.authenticated = true;
        ok(s)
    } else {
        error(s, WRONGPASS)
    }
}

/// HELLO: its AUTH option is checked here, after the checks that Redis makes first (protocol
/// version, option syntax, client name), which routing makes on the arguments without it.
fn hello<'a>(
    args: &[&'a [u8]],
    s: &mut Session,
    requirepass: Option<&[u8]>,
    me: &Identity,
    map: &SlotMap,
) -> Verdict<'a> {
    let mut rest: Vec<&[u8]> = args[..args.len().min(2)].to_vec();
    let mut creds = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - i - 1;
        if args[i].eq_ignore_ascii_case(b"auth") && more >= 2 {
            creds = Some((args[i + 1], args[i + 2]));
            i += 3;
        } else if args[i].eq_ignore_ascii_case(b"setname") && more >= 1 {
            rest.extend_from_slice(&args[i..i + 2]);
            i += 2;
        } else {
            // Routing's HELLO refuses it (and everything after it is not read).
            rest.push(args[i]);
            i += 1;
        }
    }
    // Would the HELLO without AUTH be refused? Then that is the reply, as on a node.
    let mut probe = s.clone();
    probe.authenticated = true;
    if let Plan::Reply { bytes, .. } = crate::route::plan(&rest, &mut probe, me, map) {
        if bytes.first() == Some(&b'-') {
            return Verdict::Reply(Plan::Reply {
                bytes,
                close: false,
            });
        }
    }
    if let Some((user, pass)) = creds {
        if !credentials_ok(user, pass, requirepass) {
            return Verdict::Reply(error(s, WRONGPASS));
        }
        s.authenticated = true;
    }
    if !authenticated(s, requirepass) {
        return Verdict::Reply(error(s, NOAUTH_HELLO));
    }
    Verdict::Hello(rest)
}

/// The backend credentials: (user, password).
pub type Credentials = (String, String);

/// What a new backend connection sends first: HELLO 3 for a RESP3 connection, with AUTH when
/// the proxy has backend credentials (one round trip either way); `None` when nothing is
/// needed.
pub fn backend_handshake(resp3: bool, creds: Option<&Credentials>) -> Option<Vec<u8>> {
    match (resp3, creds) {
        (true, Some((u, p))) => Some(crate::route::encode_request(&["HELLO", "3", "AUTH", u, p])),
        (true, None) => Some(crate::route::encode_request(&["HELLO", "3"])),
        (false, Some((u, p))) => Some(crate::route::encode_request(&["AUTH", u, p])),
        (false, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use darner_resp::{decode, Frame, Limits};

    fn run(args: &[&str], s: &mut Session, pass: Option<&str>) -> Option<String> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let me = Identity {
            host: String::new(),
            port: 0,
            node_id: String::new(),
        };
        match check(&args, s, pass.map(str::as_bytes), &me, &SlotMap::default()) {
            Verdict::Reply(Plan::Reply { bytes, .. }) => {
                match decode(&bytes, &Limits::default()).unwrap().unwrap().0 {
                    Frame::Error(e) => Some(String::from_utf8_lossy(&e).into_owned()),
                    Frame::Simple(t) => Some(String::from_utf8_lossy(&t).into_owned()),
                    f => Some(format!("{f:?}")),
                }
            }
            Verdict::Reply(p) => Some(format!("{p:?}")),
            Verdict::Hello(rest) => Some(format!(
                "hello {}",
                rest.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            )),
            Verdict::Pass => None,
        }
    }

    #[test]
    fn with_a_password() {
        let mut s = Session::default();
        let p = Some("sesame");
        assert_eq!(run(&["GET", "k"], &mut s, p).unwrap(), NOAUTH);
        assert_eq!(
            run(&["GET"], &mut s, p).unwrap(),
            "ERR wrong number of arguments for 'get' command"
        );
        assert!(run(&["NOPE", "a"], &mut s, p)
            .unwrap()
            .starts_with("ERR unknown command 'NOPE', with args beginning with: 'a' "));
        assert_eq!(run(&["CLUSTER", "SLOTS"], &mut s, p).unwrap(), NOAUTH);
        assert_eq!(run(&["QUIT"], &mut s, p), None);
        assert_eq!(run(&["HELLO", "3"], &mut s, p).unwrap(), NOAUTH_HELLO);
        assert_eq!(run(&["AUTH", "x"], &mut s, p).unwrap(), WRONGPASS);
        assert_eq!(
            run(&["AUTH", "a", "b", "c"], &mut s, p).unwrap(),
            "ERR syntax error"
        );
        assert_eq!(
            run(&["HELLO", "3", "AUTH", "default", "x"], &mut s, p).unwrap(),
            WRONGPASS
        );
        assert_eq!(
            run(&["HELLO", "4", "AUTH", "default", "sesame"], &mut s, p).unwrap(),
            "NOPROTO unsupported protocol version"
        );
        assert!(
            !s.authenticated,
            "an error before the check authenticates nobody"
        );
        assert_eq!(
            run(
                &["HELLO", "3", "AUTH", "default", "sesame", "SETNAME", "n"],
                &mut s,
                p
            )
            .unwrap(),
            "hello HELLO 3 SETNAME n"
        );
        assert_eq!(
            run(&["HELLO", "3", "SETNAME", "AUTH", "x", "y"], &mut s, p).unwrap(),
            "ERR Syntax error in HELLO option 'x'"
        );
        assert!(s.authenticated);
        assert_eq!(run(&["GET", "k"], &mut s, p), None);
        // A failed AUTH keeps the client authenticated.
        assert_eq!(run(&["AUTH", "bad"], &mut s, p).unwrap(), WRONGPASS);
        assert_eq!(run(&["GET", "k"], &mut s, p), None);
        let mut t = Session::default();
        assert_eq!(
            run(&["AUTH", "default", "sesame"], &mut t, p).unwrap(),
            "OK"
        );
        assert!(t.authenticated);
    }

    #[test]
    fn without_a_password() {
        let mut s = Session::default();
        assert_eq!(run(&["GET", "k"], &mut s, None), None);
        assert_eq!(run(&["AUTH", "x"], &mut s, None).unwrap(), NO_PASSWORD);
        assert_eq!(
            run(&["AUTH", "default", "any"], &mut s, None).unwrap(),
            "OK"
        );
        assert_eq!(
            run(&["AUTH", "bob", "any"], &mut s, None).unwrap(),
            WRONGPASS
        );
        assert_eq!(
            run(&["HELLO", "3", "AUTH", "default", "x"], &mut s, None).unwrap(),
            "hello HELLO 3"
        );
        assert!(same_secret(b"ab", b"ab") && !same_secret(b"ab", b"abc"));
    }
}
