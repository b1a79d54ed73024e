//! Connection commands: PING, ECHO, SELECT, QUIT, HELLO, AUTH, RESET, CLIENT.
//!
//! Most act on the calling client's own state and run on its thread (`Conn` handlers).
//! CLIENT LIST, INFO and KILL need other connections, which live on every thread: they are
//! `Tx` handlers without locks that visit each thread's connections with `Tx::on_thread`.
//! While such a command runs, the caller's own state is the transaction's copy
//! (`tx.client()`), so its line and its filters are taken from there.

use super::{eq, ConnCtx, Locks, Reg, TxFuture};
use crate::conn::{ClientState, Conn, ReplyMode};
use crate::exec::{Tx, THREAD};
use crate::shared::Shared;
use bytes::Bytes;
use darner_commands::tracking::{parse_client_tracking, TrackingNow, TrackingRequest};
use darner_resp::ReplyWriter;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

pub fn register(r: &mut Reg) {
    r.conn("ping", ping);
    r.conn("echo", echo);
    r.conn("select", select);
    r.conn("quit", quit);
    r.conn("auth", auth);
    r.conn("hello", hello);
    r.conn("reset", reset);
    r.conn("client|id", client_id);
    r.conn("client|setname", client_setname);
    r.conn("client|getname", client_getname);
    r.conn("client|setinfo", client_setinfo);
    r.conn("client|no-evict", client_no_evict);
    r.conn("client|no-touch", client_no_touch);
    r.conn("client|reply", client_reply);
    r.conn("client|pause", client_pause);
    r.conn("client|unpause", client_unpause);
    r.conn("client|help", client_help);
    r.conn("client|tracking", client_tracking);
    r.conn("client|caching", client_caching);
    r.conn("client|getredir", client_getredir);
    r.conn("client|trackinginfo", client_trackinginfo);
    r.tx("client|info", Locks::None, client_info);
    r.tx("client|list", Locks::None, client_list);
    r.tx("client|kill", Locks::None, client_kill);
    r.tx("client|unblock", Locks::None, client_unblock);
}

const ERR_WRONGPASS: &[u8] = b"WRONGPASS invalid username-password pair or user is disabled.";
const ERR_BAD_NAME: &[u8] =
    b"ERR Client names cannot contain spaces, newlines or special characters.";

fn lossy(b: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// The arguments as MONITOR and the slow log may show them: passwords of AUTH and HELLO AUTH
/// become "(redacted)", as in Redis.
pub fn redact<'a>(full_name: &str, args: &'a [&'a [u8]]) -> Cow<'a, [&'a [u8]]> {
    const R: &[u8] = b"(redacted)";
    match full_name {
        // Redis redacts only once the argument count is accepted (at most 3).
        "auth" if args.len() <= 3 => {
            let mut v = args.to_vec();
            for a in v.iter_mut().skip(1) {
                *a = R;
            }
            Cow::Owned(v)
        }
        "hello" => {
            let mut v: Option<Vec<&[u8]>> = None;
            let mut i = 2;
            while i < args.len() {
                let more = args.len() - 1 - i;
                if eq(args[i], "auth") && more >= 2 {
                    let v = v.get_or_insert_with(|| args.to_vec());
                    v[i + 1] = R;
                    v[i + 2] = R;
                    i += 3;
                } else if eq(args[i], "setname") && more >= 1 {
                    i += 2;
                } else {
                    break;
                }
            }
            match v {
                Some(v) => Cow::Owned(v),
                None => Cow::Borrowed(args),
            }
        }
        _ => Cow::Borrowed(args),
    }
}

fn ping(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    // A RESP2 client in subscribe mode gets a two-element array, Redis's pubsub-mode reply.
    if args.len() <= 2 && !ctx.client.resp3 && ctx.client.subscribed() {
        w.array(2);
        w.bulk(b"pong");
        w.bulk(args.get(1).copied().unwrap_or(b""));
        return;
    }
    match args.len() {
        1 => w.simple(b"PONG"),
        2 => w.bulk(args[1]),
        _ => w.error(&super::arity_error(
            darner_commands::lookup(b"ping").unwrap(),
        )),
    }
}

fn echo(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    w.bulk(args[1]);
}

fn select(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    // getIntFromObjectOrReply: an integer that does not fit a C int has its own error.
    match super::parse_int(args[1]) {
        None => w.error(super::ERR_NOT_INT),
        Some(i) if i < i32::MIN as i64 || i > i32::MAX as i64 => {
            w.error(b"ERR value is out of range, value must between -2147483648 and 2147483647")
        }
        Some(i) if i < 0 || i as usize >= ctx.shared.databases => w.error(super::ERR_DB_INDEX),
        Some(i) => {
            ctx.client.db = i as usize;
            w.ok();
        }
    }
}

fn quit(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    ctx.client.close_after_reply = true;
    w.ok();
}

// ---- authentication ----

/// Whether the default user has a password (`requirepass`); without one it is "nopass".
fn password_set(shared: &Shared) -> bool {
    !shared.config.hot.requirepass.read().unwrap().is_empty()
}

/// Checks credentials against the only user there is, "default".
fn credentials_ok(shared: &Shared, user: &[u8], pass: &[u8]) -> bool {
    if user != b"default" {
        return false;
    }
    let rp = shared.config.hot.requirepass.read().unwrap();
    // nopass: any password is accepted.
    rp.is_empty() || constant_time_eq(rp.as_bytes(), pass)
}

/// Compares without stopping at the first difference (as Redis's time_independent_strcmp).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() != b.len()) as u8;
    let n = a.len().max(b.len());
    for i in 0..n {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

fn auth(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    if args.len() > 3 {
        return w.error(super::ERR_SYNTAX);
    }
    let (user, pass): (&[u8], &[u8]) = if args.len() == 2 {
        if !password_set(ctx.shared) {
            return w.error(
                b"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            );
        }
        (b"default", args[1])
    } else {
        (args[1], args[2])
    };
    // A failed AUTH leaves the client as it was (an authenticated client stays so).
    if credentials_ok(ctx.shared, user, pass) {
        ctx.client.authenticated = true;
        w.ok();
    } else {
        w.error(ERR_WRONGPASS);
    }
}

/// Redis's validateClientAttr: printable ASCII without spaces. Like Redis (a C string), it
/// looks only up to the first NUL byte.
fn valid_attr(v: &[u8]) -> bool {
    v.iter()
        .take_while(|&&c| c != 0)
        .all(|&c| (b'!'..=b'~').contains(&c))
}

fn set_name(client: &mut ClientState, name: &[u8]) {
    client.name = lossy(name).into_owned();
}

fn hello(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut ver = 0;
    let mut i = 1;
    if args.len() >= 2 {
        let Some(v) = super::parse_int(args[1]) else {
            return w.error(b"ERR Protocol version is not an integer or out of range");
        };
        if !(2..=3).contains(&v) {
            return w.error(b"NOPROTO unsupported protocol version");
        }
        ver = v;
        i = 2;
    }
    let mut creds: Option<(&[u8], &[u8])> = None;
    let mut name: Option<&[u8]> = None;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if eq(args[i], "auth") && more >= 2 {
            creds = Some((args[i + 1], args[i + 2]));
            i += 3;
        } else if eq(args[i], "setname") && more >= 1 {
            if !valid_attr(args[i + 1]) {
                return w.error(ERR_BAD_NAME);
            }
            name = Some(args[i + 1]);
            i += 2;
        } else {
            return w.error(
                format!("ERR Syntax error in HELLO option '{}'", lossy(args[i])).as_bytes(),
            );
        }
    }
    if let Some((user, pass)) = creds {
        if !credentials_ok(ctx.shared, user, pass) {
            return w.error(ERR_WRONGPASS);
        }
        ctx.client.authenticated = true;
    }
    if !ctx.client.authenticated {
        return w.error(b"NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if let Some(n) = name {
        set_name(ctx.client, n);
    }
    if ver != 0 {
        ctx.client.resp3 = ver == 3;
        // The reply already speaks the new protocol.
        w.resp3 = ctx.client.resp3;
    }
    w.map(7);
    w.bulk(b"server");
    w.bulk(b"redis");
    w.bulk(b"version");
    w.bulk(crate::REDIS_COMPAT_VERSION.as_bytes());
    w.bulk(b"proto");
    w.int(if ctx.client.resp3 { 3 } else { 2 });
    w.bulk(b"id");
    w.int(ctx.client.id as i64);
    w.bulk(b"mode");
    w.bulk(b"standalone");
    w.bulk(b"role");
    w.bulk(b"master");
    w.bulk(b"modules");
    w.array(0);
}

/// RESET: the connection becomes like a new one, except for its library name and version.
fn reset(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    let c = &mut *ctx.client;
    if c.monitor {
        c.monitor = false;
        ctx.shared.monitors.fetch_sub(1, Ordering::Relaxed);
    }
    c.multi = None;
    c.multi_dirty = false;
    c.unwatch();
    crate::pubsub::forget(ctx.shared, c);
    crate::tracking::disable(ctx.shared, c);
    c.db = 0;
    c.resp3 = false;
    w.resp3 = false;
    c.authenticated = !password_set(ctx.shared);
    c.name.clear();
    c.no_evict = false;
    c.no_touch = false;
    // Redis clears REPLY OFF (and a SKIP given for the next command) before it replies, so
    // +RESET is sent under OFF; a SKIP already in force for this command still applies.
    if c.reply_mode == ReplyMode::Off {
        c.force_reply = true;
    }
    c.reply_mode = ReplyMode::On;
    w.simple(b"RESET");
}

// ---- CLIENT, own state ----

fn client_id(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    w.int(ctx.client.id as i64);
}

fn client_setname(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    if !valid_attr(args[2]) {
        return w.error(ERR_BAD_NAME);
    }
    set_name(ctx.client, args[2]);
    w.ok();
}

fn client_getname(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    if ctx.client.name.is_empty() {
        w.null();
    } else {
        w.bulk(ctx.client.name.as_bytes());
    }
}

fn client_setinfo(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let attr = &args[2];
    let dest = if eq(attr, "lib-name") {
        &mut ctx.client.lib_name
    } else if eq(attr, "lib-ver") {
        &mut ctx.client.lib_ver
    } else {
        return w.error(format!("ERR Unrecognized option '{}'", lossy(attr)).as_bytes());
    };
    if !valid_attr(args[3]) {
        return w.error(
            format!(
                "ERR {} cannot contain spaces, newlines or special characters.",
                lossy(attr)
            )
            .as_bytes(),
        );
    }
    *dest = lossy(args[3]).into_owned();
    w.ok();
}

fn on_off(arg: &[u8]) -> Option<bool> {
    if eq(arg, "on") {
        Some(true)
    } else if eq(arg, "off") {
        Some(false)
    } else {
        None
    }
}

fn client_no_evict(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match on_off(args[2]) {
        Some(v) => {
            ctx.client.no_evict = v;
            w.ok();
        }
        None => w.error(super::ERR_SYNTAX),
    }
}

fn client_no_touch(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    match on_off(args[2]) {
        Some(v) => {
            ctx.client.no_touch = v;
            w.ok();
        }
        None => w.error(super::ERR_SYNTAX),
    }
}

/// CLIENT REPLY ON|OFF|SKIP. Suppression itself happens in dispatch (`take_suppress`): the
/// mode set here applies from the next command on; OFF and SKIP reply nothing.
fn client_reply(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let c = &mut *ctx.client;
    if eq(args[2], "on") {
        c.reply_mode = ReplyMode::On;
        c.force_reply = true;
        w.ok();
    } else if eq(args[2], "off") {
        c.reply_mode = ReplyMode::Off;
    } else if eq(args[2], "skip") {
        // Dispatch turns SkipThis into "suppress" for the very next command.
        if c.reply_mode != ReplyMode::Off {
            c.reply_mode = ReplyMode::SkipThis;
        }
    } else {
        w.error(super::ERR_SYNTAX);
    }
}

fn client_pause(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    if args.len() > 4 {
        return w.error(
            format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
                lossy(args[1])
            )
            .as_bytes(),
        );
    }
    let mut all = true;
    if args.len() == 4 {
        if eq(args[3], "write") {
            all = false;
        } else if !eq(args[3], "all") {
            return w.error(b"ERR CLIENT PAUSE mode must be WRITE or ALL");
        }
    }
    let Some(ms) = super::parse_int(args[2]) else {
        return w.error(b"ERR timeout is not an integer or out of range");
    };
    if ms < 0 {
        return w.error(b"ERR timeout is negative");
    }
    let now = Shared::now_ms();
    let end = if ms > 0 {
        if ms > i64::MAX - now {
            return w.error(b"ERR timeout is out of range");
        }
        ms + now
    } else {
        0
    };
    // As Redis 7.2: a pause in force only gets longer, and a WRITE pause does not weaken an
    // ALL pause in force.
    let sh = ctx.shared;
    let cur = sh.pause_until.load(Ordering::Relaxed);
    let active = cur > now;
    let keep_all = active && !sh.pause_writes_only.load(Ordering::Relaxed);
    sh.pause_writes_only
        .store(!all && !keep_all, Ordering::Relaxed);
    sh.pause_until
        .store(if active { cur.max(end) } else { end }, Ordering::Relaxed);
    w.ok();
}

fn client_unpause(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    ctx.shared.pause_until.store(0, Ordering::Relaxed);
    ctx.shared.pause_writes_only.store(false, Ordering::Relaxed);
    // Every thread runs its held commands at once (a pause that times out is released by
    // each thread's cron, within 1/hz, as Redis's serverCron does).
    for t in 0..ctx.shared.threads {
        crate::exec::post(ctx.shared, t, crate::msg::Msg::Unpaused);
    }
    crate::primary::unpaused();
    w.ok();
}

// ---- CLIENT TRACKING (tracking.rs has the tables) ----

/// CLIENT TRACKING: the arguments checked by darner_commands::tracking (shared with the
/// proxy); a REDIRECT must name a client connected now (it may go away later: the redirect is
/// then broken).
fn client_tracking(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let now = ctx.client.tracking.as_deref().map(|t| TrackingNow {
        bcast: t.bcast,
        optin: t.optin,
        optout: t.optout,
        prefixes: &t.prefixes[..],
    });
    let shared = ctx.shared;
    let parsed = parse_client_tracking(args, now, |arg| {
        let Some(id) = super::parse_int(arg) else {
            return Err(String::from_utf8_lossy(super::ERR_NOT_INT).into_owned());
        };
        if id <= 0 || !shared.clients.lock().unwrap().contains_key(&(id as u64)) {
            return Err("ERR The client ID you want redirect to does not exist".into());
        }
        Ok(id as u64)
    });
    let (redirect, bcast, optin, optout, noloop, prefixes) = match parsed {
        Err(msg) => return w.error(msg.as_bytes()),
        Ok(TrackingRequest::Off) => {
            crate::tracking::disable(ctx.shared, ctx.client);
            return w.ok();
        }
        Ok(TrackingRequest::On {
            redirect,
            bcast,
            optin,
            optout,
            noloop,
            prefixes,
        }) => (redirect, bcast, optin, optout, noloop, prefixes),
    };
    // Enable (or re-enable: the mode flags are replaced, BCAST prefixes accumulate).
    if ctx.client.tracking.is_none() {
        ctx.shared.tracking.clients.fetch_add(1, Ordering::Relaxed);
    }
    let id = ctx.client.id;
    let conn = ctx.client.conn;
    let t = ctx.client.tracking.get_or_insert_with(Default::default);
    t.redirect = redirect;
    t.broken_redirect = false;
    t.bcast = bcast;
    t.optin = optin;
    t.optout = optout;
    t.noloop = noloop;
    if bcast {
        darner_commands::tracking::add_bcast_prefixes(
            &mut t.prefixes,
            prefixes,
            Bytes::copy_from_slice,
        );
        let reader = crate::tracking::Reader {
            id,
            thread: ctx.thread,
            conn,
            noloop,
        };
        for p in &t.prefixes {
            ctx.shared.tracking.prefixes.add(p, reader);
        }
    }
    w.ok();
}

fn client_caching(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let Some(t) = ctx.client.tracking.as_deref() else {
        return w.error(b"ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    };
    if eq(args[2], "yes") {
        if !t.optin {
            return w.error(
                b"ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if eq(args[2], "no") {
        if !t.optout {
            return w.error(
                b"ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return w.error(super::ERR_SYNTAX);
    }
    ctx.client.caching = true;
    w.ok();
}

fn client_getredir(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    w.int(
        ctx.client
            .tracking
            .as_ref()
            .map_or(-1, |t| t.redirect as i64),
    );
}

fn client_trackinginfo(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    let c = &*ctx.client;
    let mut flags: Vec<&[u8]> = Vec::new();
    match c.tracking.as_deref() {
        None => flags.push(b"off"),
        Some(t) => {
            flags.push(b"on");
            if t.bcast {
                flags.push(b"bcast");
            }
            if t.optin {
                flags.push(b"optin");
                if c.caching {
                    flags.push(b"caching-yes");
                }
            }
            if t.optout {
                flags.push(b"optout");
                if c.caching {
                    flags.push(b"caching-no");
                }
            }
            if t.noloop {
                flags.push(b"noloop");
            }
            if t.broken_redirect {
                flags.push(b"broken_redirect");
            }
        }
    }
    w.map(3);
    w.bulk(b"flags");
    w.set(flags.len());
    for f in flags {
        w.bulk(f);
    }
    w.bulk(b"redirect");
    w.int(c.tracking.as_ref().map_or(-1, |t| t.redirect as i64));
    w.bulk(b"prefixes");
    let prefixes: &[Bytes] = c.tracking.as_deref().map_or(&[], |t| &t.prefixes);
    w.array(prefixes.len());
    for p in prefixes {
        w.bulk(p);
    }
}

fn client_help(_: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    const HELP: &[&str] = &[
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME",
        "    Return the name of this connection.",
        "ID",
        "    Return the ID of this connection.",
        "INFO",
        "    Return information about this connection, in CLIENT LIST's format.",
        "KILL <ip:port>",
        "    Close the connection that comes from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Close every connection that matches all the filters given:",
        "    * ID <client-id>",
        "      The connection with this ID.",
        "    * ADDR <ip:port>",
        "      Connections from this address.",
        "    * LADDR <ip:port>",
        "      Connections to this local address.",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Connections of this type.",
        "    * USER <username>",
        "      Connections authenticated as <username>.",
        "    * MAXAGE <seconds>",
        "      Connections at least this many seconds old.",
        "    * SKIPME (YES|NO)",
        "      Whether to spare this connection (default: YES).",
        "LIST [TYPE (NORMAL|MASTER|REPLICA|PUBSUB)] [ID <client-id> [...]]",
        "    Return information about connections, one line each.",
        "NO-EVICT (ON|OFF)",
        "    Exempt this connection from client eviction, or not.",
        "NO-TOUCH (ON|OFF)",
        "    When ON, commands of this connection do not change keys' LRU/LFU data.",
        "UNBLOCK <client-id> [TIMEOUT|ERROR]",
        "    End the wait of a client blocked on keys, as its timeout would, or with an error.",
        "PAUSE <timeout> [WRITE|ALL]",
        "    Hold the commands of all clients (or only writes) for <timeout> milliseconds.",
        "UNPAUSE",
        "    End a pause started by CLIENT PAUSE.",
        "REPLY (ON|OFF|SKIP)",
        "    Turn replies to this connection on or off, or skip the next command's reply.",
        "SETINFO <option> <value>",
        "    Record information about the client library:",
        "    * LIB-NAME <name>",
        "    * LIB-VER <version>",
        "SETNAME <name>",
        "    Name this connection (an empty name removes it).",
        "HELP",
        "    Print this help.",
    ];
    w.array(HELP.len());
    for line in HELP {
        w.simple(line.as_bytes());
    }
}

// ---- CLIENT INFO / LIST / KILL ----

/// Socket-level numbers of a connection for its CLIENT LIST line.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnStats {
    pub qbuf: usize,
    pub qbuf_free: usize,
    pub rbs: usize,
    pub rbp: usize,
    pub obl: usize,
    pub oll: usize,
    pub omem: usize,
    pub idle_secs: u64,
    pub writing: bool,
    pub argv_mem: usize,
}

impl ConnStats {
    pub fn of(conn: &Conn) -> ConnStats {
        let (qbuf, qbuf_free) = conn.query_buffer();
        ConnStats {
            qbuf,
            qbuf_free,
            rbs: conn.out.capacity(),
            rbp: conn.out.len(),
            obl: conn.out_len(),
            oll: conn.pending.len(),
            omem: conn
                .pending
                .iter()
                .map(|(r, _)| r.as_ref().map_or(0, |r| r.len()))
                .sum(),
            idle_secs: conn.last_interaction.elapsed().as_secs(),
            writing: conn.out_len() > 0,
            // A command held by CLIENT PAUSE keeps its arguments (as Redis's argv).
            argv_mem: conn
                .paused
                .as_ref()
                .map_or(0, |a| a.iter().map(|x| x.len()).sum()),
        }
    }
}

/// Redis's client types (CLIENT LIST TYPE, CLIENT KILL TYPE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientType {
    Normal,
    Replica,
    Master,
    PubSub,
}

fn client_type(name: &[u8]) -> Option<ClientType> {
    if eq(name, "normal") {
        Some(ClientType::Normal)
    } else if eq(name, "slave") || eq(name, "replica") {
        Some(ClientType::Replica)
    } else if eq(name, "master") {
        Some(ClientType::Master)
    } else if eq(name, "pubsub") {
        Some(ClientType::PubSub)
    } else {
        None
    }
}

/// A client's type, as Redis's getClientType: the primary's link (on a replica), a replica
/// (on a primary; a MONITOR client counts as normal), a client with subscriptions.
fn type_of(s: &ClientState) -> ClientType {
    if s.master {
        ClientType::Master
    } else if s.replica && !s.monitor {
        ClientType::Replica
    } else if s.subscribed() {
        ClientType::PubSub
    } else {
        ClientType::Normal
    }
}

fn unknown_type(name: &[u8]) -> Vec<u8> {
    format!("ERR Unknown client type '{}'", lossy(name)).into_bytes()
}

fn age_secs(s: &ClientState, now_ms: i64) -> i64 {
    now_ms / 1000 - s.created_ms / 1000
}

/// One CLIENT LIST line (without the newline), in Redis 7.2's field order.
pub fn client_line(s: &ClientState, st: &ConnStats, now_ms: i64) -> String {
    let (multi, multi_mem) = match &s.multi {
        Some(q) => (
            q.len() as i64,
            q.iter()
                .map(|(_, a)| a.iter().map(|x| x.len()).sum::<usize>())
                .sum::<usize>(),
        ),
        None => (-1, 0),
    };
    let tot_mem = st.qbuf + st.qbuf_free + st.rbs + st.omem + st.argv_mem + multi_mem;
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} \
         multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll={} \
         omem={} tot-mem={} events={} cmd={} user=default redir={} resp={} lib-name={} lib-ver={}",
        s.id,
        s.addr,
        s.laddr,
        s.fd,
        s.name,
        age_secs(s, now_ms),
        st.idle_secs,
        s.flags_string(),
        s.db,
        s.subscriptions(crate::pubsub::Kind::Channel),
        s.subscriptions(crate::pubsub::Kind::Pattern),
        s.subscriptions(crate::pubsub::Kind::Shard),
        multi,
        st.qbuf,
        st.qbuf_free,
        st.argv_mem,
        multi_mem,
        st.rbs,
        st.rbp,
        st.obl,
        st.oll,
        st.omem,
        tot_mem + std::mem::size_of::<Conn>(),
        if st.writing { "rw" } else { "r" },
        s.last_cmd,
        s.tracking.as_ref().map_or(-1, |t| t.redirect as i64),
        if s.resp3 { 3 } else { 2 },
        s.lib_name,
        s.lib_ver,
    )
}

/// The calling client's own line: its state is the transaction's copy, its socket numbers
/// come from its connection (`own`, fetched from its thread).
fn own_line(tx: &Tx, own: Option<ConnStats>, args: &[Bytes], now_ms: i64) -> String {
    let mut st = own.unwrap_or_default();
    st.idle_secs = 0;
    // Not counting the slot that waits for this very reply.
    st.oll = st.oll.saturating_sub(1);
    st.argv_mem = args.iter().map(|a| a.len()).sum();
    client_line(&tx.client(), &st, now_ms)
}

/// Visits every thread's connections except the caller's: `f` picks the lines to return.
/// Also returns the caller's own socket numbers. All threads are asked at once.
async fn each_thread<R, F>(tx: &Tx, me: u64, f: F) -> (Vec<R>, Option<ConnStats>)
where
    R: Send + 'static,
    F: Fn(&mut Conn) -> Option<R> + Send + Sync + Clone + 'static,
{
    let hops: Vec<_> = (0..tx.nshards())
        .map(|t| {
            let f = f.clone();
            tx.on_thread(t, move |tctx| {
                let mut out = Vec::new();
                let mut own = None;
                for (_, conn) in tctx.conns.iter_mut() {
                    if conn.state.id == me {
                        own = Some(ConnStats::of(conn));
                    } else if let Some(r) = f(conn) {
                        out.push(r);
                    }
                }
                (out, own)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut own = None;
    for h in hops {
        let (mut v, o) = h.await;
        all.append(&mut v);
        own = own.or(o);
    }
    (all, own)
}

fn client_info(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let me = tx.client().id;
        let here = THREAD.with(|t| t.get());
        let own = tx
            .on_thread(here, move |tctx| {
                tctx.conns
                    .iter()
                    .find(|(_, c)| c.state.id == me)
                    .map(|(_, c)| ConnStats::of(c))
            })
            .await;
        let mut line = own_line(&tx, own, &args, Shared::now_ms());
        line.push('\n');
        super::with_writer(tx.resp3(), |w| w.verbatim(b"txt", line.as_bytes()))
    })
}

fn client_list(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| super::with_writer(resp3, |w| w.error(e));
        let mut ctype = None;
        let mut ids: Option<Vec<u64>> = None;
        if args.len() == 4 && eq(&args[2], "type") {
            match client_type(&args[3]) {
                Some(t) => ctype = Some(t),
                None => return err(&unknown_type(&args[3])),
            }
        } else if args.len() > 3 && eq(&args[2], "id") {
            let mut v = Vec::with_capacity(args.len() - 3);
            for a in &args[3..] {
                match super::parse_int(a) {
                    Some(i) => v.push(i as u64),
                    None => return err(b"ERR Invalid client ID"),
                }
            }
            ids = Some(v);
        } else if args.len() != 2 {
            return err(super::ERR_SYNTAX);
        }
        let now = Shared::now_ms();
        let me = tx.client().id;
        let wanted: Option<HashSet<u64>> = ids.as_ref().map(|v| v.iter().copied().collect());
        let (mut lines, own) = each_thread(&tx, me, move |conn: &mut Conn| {
            let s = &conn.state;
            if ctype.is_some_and(|t| type_of(s) != t) {
                return None;
            }
            if wanted.as_ref().is_some_and(|w| !w.contains(&s.id)) {
                return None;
            }
            Some((s.id, client_line(s, &ConnStats::of(conn), now)))
        })
        .await;
        let own_matches = ctype.is_none_or(|t| type_of(&tx.client()) == t);
        if own_matches {
            lines.push((me, own_line(&tx, own, &args, now)));
        }
        let mut text = String::new();
        match ids {
            // One line per ID asked for, in that order (as Redis, repeats included).
            Some(ids) => {
                let by_id: HashMap<u64, String> = lines.into_iter().collect();
                for id in ids {
                    if let Some(l) = by_id.get(&id) {
                        text.push_str(l);
                        text.push('\n');
                    }
                }
            }
            None => {
                lines.sort_by_key(|l| l.0);
                for (_, l) in lines {
                    text.push_str(&l);
                    text.push('\n');
                }
            }
        }
        super::with_writer(resp3, |w| w.verbatim(b"txt", text.as_bytes()))
    })
}

/// CLIENT KILL's filters (all must match).
#[derive(Clone, Default)]
struct KillFilter {
    addr: Option<Bytes>,
    laddr: Option<Bytes>,
    ctype: Option<ClientType>,
    id: Option<u64>,
    max_age: Option<i64>,
}

impl KillFilter {
    fn matches(&self, s: &ClientState, now_ms: i64) -> bool {
        self.addr
            .as_ref()
            .is_none_or(|a| a[..] == *s.addr.as_bytes())
            && self
                .laddr
                .as_ref()
                .is_none_or(|a| a[..] == *s.laddr.as_bytes())
            && self.ctype.is_none_or(|t| type_of(s) == t)
            && self.id.is_none_or(|id| s.id == id)
            && self.max_age.is_none_or(|m| age_secs(s, now_ms) >= m)
    }
}

fn client_kill(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| super::with_writer(resp3, |w| w.error(e));
        let mut f = KillFilter::default();
        let old_form = args.len() == 3;
        // The old form may kill the caller itself.
        let mut skipme = !old_form;
        if old_form {
            f.addr = Some(args[2].clone());
        } else {
            let mut i = 2;
            while i < args.len() {
                let (opt, val) = (&args[i], args.get(i + 1));
                match val {
                    Some(v) if eq(opt, "id") => match super::parse_int(v) {
                        Some(id) if id >= 1 => f.id = Some(id as u64),
                        _ => return err(b"ERR client-id should be greater than 0"),
                    },
                    Some(v) if eq(opt, "maxage") => match super::parse_int(v) {
                        None => return err(b"ERR maxage is not an integer or out of range"),
                        Some(m) if m <= 0 => return err(b"ERR maxage should be greater than 0"),
                        Some(m) => f.max_age = Some(m),
                    },
                    Some(v) if eq(opt, "type") => match client_type(v) {
                        Some(t) => f.ctype = Some(t),
                        None => return err(&unknown_type(v)),
                    },
                    Some(v) if eq(opt, "addr") => f.addr = Some(v.clone()),
                    Some(v) if eq(opt, "laddr") => f.laddr = Some(v.clone()),
                    Some(v) if eq(opt, "user") => {
                        // "default" is the only user, and every client is it.
                        if &v[..] != b"default" {
                            return err(format!("ERR No such user '{}'", lossy(v)).as_bytes());
                        }
                    }
                    Some(v) if eq(opt, "skipme") => {
                        if eq(v, "yes") {
                            skipme = true;
                        } else if eq(v, "no") {
                            skipme = false;
                        } else {
                            return err(super::ERR_SYNTAX);
                        }
                    }
                    _ => return err(super::ERR_SYNTAX),
                }
                i += 2;
            }
        }
        let now = Shared::now_ms();
        let me = tx.client().id;
        let filter = f.clone();
        // The victim's thread closes it once this hop returns (see worker/mod.rs, Msg::Thread).
        let (killed, _) = each_thread(&tx, me, move |conn: &mut Conn| {
            if filter.matches(&conn.state, now) {
                conn.handle.kill.store(true, Ordering::Relaxed);
                Some(())
            } else {
                None
            }
        })
        .await;
        let mut n = killed.len();
        {
            let mut c = tx.client();
            if !skipme && f.matches(&c, now) {
                // Closed after this reply is written.
                c.close_after_reply = true;
                n += 1;
            }
        }
        super::with_writer(resp3, |w| {
            if !old_form {
                w.int(n as i64);
            } else if n == 0 {
                w.error(b"ERR No such client");
            } else {
                w.ok();
            }
        })
    })
}

/// CLIENT UNBLOCK client-id [TIMEOUT|ERROR]: ends the wait of a client blocked on keys
/// (BLPOP & co), on whichever thread it is (blocking.rs). 1 if it was blocked, else 0.
fn client_unblock(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let err = |e: &[u8]| super::with_writer(resp3, |w| w.error(e));
        if args.len() > 4 {
            return super::with_writer(resp3, |w| {
                super::server::subcommand_error(w, &args[0], &args[1])
            });
        }
        let error = match args.get(3) {
            None => false,
            Some(a) if eq(a, "timeout") => false,
            Some(a) if eq(a, "error") => true,
            Some(_) => return err(b"ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
        };
        let Some(id) = super::parse_int(&args[2]) else {
            return err(super::ERR_NOT_INT);
        };
        let thread = tx
            .shared()
            .clients
            .lock()
            .unwrap()
            .get(&(id as u64))
            .map(|h| h.thread);
        let unblocked = match thread {
            Some(t) if id > 0 => {
                let id = id as u64;
                tx.on_thread(t, move |tctx| {
                    crate::blocking::unblock(tctx.shared, id, error)
                })
                .await
            }
            _ => false,
        };
        super::with_writer(resp3, |w| w.int(unblocked as i64))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_validation_follows_redis() {
        assert!(valid_attr(b"ok!~"));
        assert!(valid_attr(b""));
        assert!(!valid_attr(b"a b"));
        assert!(!valid_attr(b"a\nb"));
        assert!(!valid_attr("é".as_bytes()));
        // C string: nothing after a NUL is looked at.
        assert!(valid_attr(b"a\0 b"));
    }

    #[test]
    fn redaction() {
        let a: Vec<&[u8]> = vec![b"auth", b"u", b"p"];
        assert_eq!(redact("auth", &a)[1], b"(redacted)");
        assert_eq!(redact("auth", &a)[2], b"(redacted)");
        let h: Vec<&[u8]> = vec![b"hello", b"3", b"setname", b"n", b"AUTH", b"u", b"p"];
        let r = redact("hello", &h);
        assert_eq!(r[3], b"n");
        assert_eq!(r[5], b"(redacted)");
        assert_eq!(r[6], b"(redacted)");
        assert!(matches!(redact("get", &a), Cow::Borrowed(_)));
    }

    #[test]
    fn constant_time_compare() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
