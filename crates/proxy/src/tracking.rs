//! The proxy's clients' own CLIENT TRACKING: what a client asked for (kept in its
//! [`Session`]), the CLIENT TRACKING / CACHING / GETREDIR / TRACKINGINFO replies, and each
//! thread's table of which client read which key.
//!
//! The proxy does not open a backend connection per tracking client: it reuses the
//! invalidations its RESP3 shared connections already receive (the cache's, or turned on for
//! the first tracking client, see the server). A client in the default mode has the keys of
//! its read-only commands recorded here when their replies are read, in the order of that
//! connection's stream, so an invalidation the node pushed after the read finds the record;
//! an invalidation of a key hands it to each reader once (the record goes, as on a node). A
//! BCAST client gets every invalidated key under its prefixes, which needs the backend
//! connections in BCAST mode themselves (a default-mode connection reports only keys read on
//! it). When what a backend connection tracked is lost (it closed, a node flushed, a slot
//! changed owner) every tracking client gets the null invalidation: flush your cache.
//!
//! **REDIRECT.** A client may have its invalidations sent to another client (by CLIENT ID,
//! which tells the thread that serves it): a RESP3 target gets them as `invalidate` pushes, a
//! RESP2 one in pub/sub mode as messages on `__redis__:invalidate` (the proxy writes them into
//! its subscription's stream itself, whole frames between the node's), any other nothing: as
//! on a node. A target on another thread is reached through the [`Hub`]: its inbox and waker.
//! A redirect whose target has gone is broken: the tracking client (RESP3) is told
//! `tracking-redir-broken` at each invalidation instead.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use darner_commands::tracking::{parse_client_tracking, TrackingNow, TrackingRequest};
use darner_commands::{flags, key_positions, lookup, lookup_subcommand};

use crate::route::{error, reply, Plan, Session};

/// Keys recorded per thread before the oldest are invalidated to make room (Redis's
/// `tracking-table-max-keys` default).
pub const MAX_KEYS: usize = 1_000_000;

/// What a client's CLIENT TRACKING on asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tracking {
    /// BCAST: every key under `prefixes`, read or not.
    pub bcast: bool,
    /// OPTIN: only reads after CLIENT CACHING yes are recorded.
    pub optin: bool,
    /// OPTOUT: reads after CLIENT CACHING no are not recorded.
    pub optout: bool,
    /// NOLOOP: the invalidations its own writes cause are not sent to it, where the proxy can
    /// tell (see [`own_write_keys`]); elsewhere they are.
    pub noloop: bool,
    /// REDIRECT's client id (0: none).
    pub redirect: u64,
    /// The redirect target was gone when an invalidation was due.
    pub broken_redirect: bool,
    /// BCAST's prefixes, sorted (the empty prefix: every key).
    pub prefixes: Vec<Vec<u8>>,
}

impl Tracking {
    /// Whether a BCAST client wants `key`.
    pub fn wants(&self, key: &[u8]) -> bool {
        self.bcast && self.prefixes.iter().any(|p| key.starts_with(p))
    }
}

/// Whether a read-only command of this client records its keys now: tracking on in the
/// default mode, and OPTIN after CLIENT CACHING yes / OPTOUT not after CLIENT CACHING no.
pub fn remembers(s: &Session) -> bool {
    match &s.tracking {
        Some(t) if !t.bcast => !((t.optin && !s.caching) || (t.optout && s.caching)),
        _ => false,
    }
}

/// After a command: CLIENT CACHING's flag covers the next command, or a whole MULTI ... EXEC,
/// and CLIENT commands leave it in place (Redis's rule). `in_multi`: before the command.
pub fn after_command(s: &mut Session, name: &[u8], in_multi: bool) {
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    if s.tracking.is_some()
        && !is("client")
        && !is("multi")
        && (!in_multi || is("exec") || is("discard"))
    {
        s.caching = false;
    }
}

/// The keys a read-only command reads (none for anything else).
pub fn read_keys(args: &[&[u8]]) -> Vec<Vec<u8>> {
    let Some(mut spec) = args.first().and_then(|n| lookup(n)) else {
        return Vec::new();
    };
    if spec.is_container() {
        match args.get(1).and_then(|sub| lookup_subcommand(spec, sub)) {
            Some(s) => spec = s,
            None => return Vec::new(),
        }
    }
    if !spec.has(flags::READONLY) {
        return Vec::new();
    }
    key_positions(spec, args)
        .iter()
        .filter_map(|&i| args.get(i).map(|k| k.to_vec()))
        .collect()
}

/// The keys a NOLOOP client's write changed for sure, given its reply: those whose
/// invalidation on a default-mode tracking connection, among the pushes right after that
/// reply, is the write's own.
///
/// A node sends the invalidations a connection's own command causes right after its reply,
/// before anything else (Redis 7's pending-key list), and a key's push needs the connection to
/// track it, which the proxy's table tells (a read recorded, its reply scanned before the
/// write's). So a push of key `k` right after the reply is the write's when the write surely
/// changed `k`; when it may not have (`SET NX`, `SADD` of a member already there, ...), a push
/// there may be another client's write made just after, which must reach the client: only
/// commands that change every key they name whenever they succeed count, and DEL/UNLINK of one
/// key answered `:1`. Anything else is reported, as before NOLOOP (an extra invalidation costs a
/// read; a missing one, a stale cache).
pub fn own_write_keys(args: &[&[u8]], reply: &[u8]) -> Vec<Vec<u8>> {
    if matches!(reply.first(), Some(b'-' | b'!') | None) {
        return Vec::new();
    }
    let Some(name) = args.first() else {
        return Vec::new();
    };
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    let one = || args.get(1).map(|k| vec![k.to_vec()]).unwrap_or_default();
    if is("set") {
        let conditional = args
            .iter()
            .skip(3)
            .any(|a| a.eq_ignore_ascii_case(b"nx") || a.eq_ignore_ascii_case(b"xx"));
        return if conditional || args.len() < 3 {
            Vec::new()
        } else {
            one()
        };
    }
    const ALWAYS: &[&str] = &[
        "setex",
        "psetex",
        "getset",
        "incr",
        "decr",
        "incrby",
        "decrby",
        "incrbyfloat",
        "hset",
        "hmset",
        "hincrby",
        "hincrbyfloat",
        "lpush",
        "rpush",
    ];
    if ALWAYS.iter().any(|n| is(n)) {
        return one();
    }
    if is("mset") && args.len() >= 3 && args.len() % 2 == 1 {
        return args.iter().skip(1).step_by(2).map(|k| k.to_vec()).collect();
    }
    if (is("del") || is("unlink")) && args.len() == 2 && reply == b":1\r\n" {
        return one();
    }
    Vec::new()
}

/// The RESP3 push `invalidate`: of `keys`, or the null one (everything) for `None`.
pub fn push(keys: Option<&[Vec<u8>]>) -> Vec<u8> {
    redirected(keys, true, false, true).unwrap_or_default()
}

/// What a redirect target gets for an invalidation (see
/// [`darner_commands::tracking::invalidation_frame`]): the null invalidation's null is in the
/// tracking client's protocol (`null_resp3`), not the target's, as Redis writes it.
pub fn redirected(
    keys: Option<&[Vec<u8>]>,
    resp3: bool,
    subscribed: bool,
    null_resp3: bool,
) -> Option<Vec<u8>> {
    darner_commands::tracking::invalidation_frame(keys, resp3, subscribed, null_resp3)
}

/// The push a RESP3 tracking client gets when its redirect target has gone.
pub fn broken_push(redirect: u64) -> Vec<u8> {
    darner_commands::tracking::redirect_broken_frame(redirect)
}

/// An invalidation for a redirect target served by another thread, or, sent back to the
/// tracking client's thread, the news that its target had gone when one came.
#[derive(Debug)]
pub struct Redirected {
    /// The target's client id (for `broken`: the tracking client's).
    pub target: u64,
    /// The keys (`None`: the null invalidation, everything).
    pub keys: Option<Vec<Vec<u8>>>,
    /// The tracking client speaks RESP3 (the null invalidation's null is in its protocol).
    pub from_resp3: bool,
    /// The tracking client's id (for `broken`: the target that had gone).
    pub from: u64,
    /// The target left between the invalidation's post and its delivery: the tracking client
    /// `target` is told its redirect is broken, as a node tells it when the target is gone at
    /// an invalidation (the invalidation itself goes nowhere, as on a node).
    pub broken: bool,
}

/// What a proxy's threads share for REDIRECT: which client ids are connected now (a REDIRECT
/// must name one), and each thread's inbox of invalidations for its clients, with the waker
/// of its event loop.
#[derive(Debug)]
pub struct Hub {
    threads: u64,
    live: Mutex<HashSet<u64>>,
    inboxes: Vec<Mutex<Vec<Redirected>>>,
    wakers: Vec<OnceLock<mio::Waker>>,
}

impl Hub {
    /// A hub for `threads` threads (client ids: `(id - 1) % threads` is the thread).
    pub fn new(threads: u64) -> Hub {
        let threads = threads.max(1);
        Hub {
            threads,
            live: Mutex::new(HashSet::new()),
            inboxes: (0..threads).map(|_| Mutex::new(Vec::new())).collect(),
            wakers: (0..threads).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The thread that serves client `id`.
    pub fn thread_of(&self, id: u64) -> usize {
        (id.saturating_sub(1) % self.threads) as usize
    }

    /// Thread `t`'s loop is woken by `waker` (set once).
    pub fn set_waker(&self, t: usize, waker: mio::Waker) {
        if let Some(slot) = self.wakers.get(t) {
            let _ = slot.set(waker);
        }
    }

    /// Client `id` connected (`true`) or left.
    pub fn set_live(&self, id: u64, live: bool) {
        let mut set = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if live {
            set.insert(id);
        } else {
            set.remove(&id);
        }
    }

    /// Whether client `id` is connected now.
    pub fn is_live(&self, id: u64) -> bool {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&id)
    }

    /// Hands `r` to its target's thread and wakes it.
    pub fn post(&self, r: Redirected) {
        let t = self.thread_of(r.target);
        let Some(inbox) = self.inboxes.get(t) else {
            return;
        };
        inbox.lock().unwrap_or_else(|e| e.into_inner()).push(r);
        if let Some(w) = self.wakers.get(t).and_then(OnceLock::get) {
            let _ = w.wake();
        }
    }

    /// Wakes thread `t`'s loop (the cache posted it something: see `cache::Store::set_wake`).
    pub fn wake(&self, t: usize) {
        if let Some(w) = self.wakers.get(t).and_then(OnceLock::get) {
            let _ = w.wake();
        }
    }

    /// Thread `t`'s invalidations posted since it last looked.
    pub fn take(&self, t: usize) -> Vec<Redirected> {
        self.inboxes.get(t).map_or_else(Vec::new, |i| {
            std::mem::take(&mut *i.lock().unwrap_or_else(|e| e.into_inner()))
        })
    }
}

thread_local! {
    /// The hub of the proxy this thread serves, for CLIENT TRACKING's REDIRECT check (the
    /// routing functions are sans-I/O and take no handle to it).
    static HUB: RefCell<Option<Arc<Hub>>> = const { RefCell::new(None) };
}

/// Makes `hub` the one this thread's CLIENT TRACKING ... REDIRECT checks ids against.
pub fn install_hub(hub: Arc<Hub>) {
    HUB.with(|h| *h.borrow_mut() = Some(hub));
}

fn redirect_target_exists(id: u64) -> bool {
    HUB.with(|h| h.borrow().as_ref().is_some_and(|h| h.is_live(id)))
}

/// A tracking client of a thread: its slab index and id (an index is reused by later
/// clients; the id tells them apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reader {
    /// The client's index in the thread's slab.
    pub idx: usize,
    /// The client's id.
    pub id: u64,
}

/// Which default-mode clients read which key, per thread.
#[derive(Debug, Default)]
pub struct Table {
    keys: HashMap<Vec<u8>, Vec<Reader>>,
}

impl Table {
    /// Records that `r` read `key`; returns the keys dropped to stay within [`MAX_KEYS`],
    /// with their readers (to be invalidated: they are no longer tracked).
    pub fn remember(&mut self, key: &[u8], r: Reader) -> Vec<(Vec<u8>, Vec<Reader>)> {
        let mut dropped = Vec::new();
        if !self.keys.contains_key(key) {
            while self.keys.len() >= MAX_KEYS {
                let Some(k) = self.keys.keys().next().cloned() else {
                    break;
                };
                let readers = self.keys.remove(&k).unwrap_or_default();
                dropped.push((k, readers));
            }
        }
        let readers = self.keys.entry(key.to_vec()).or_default();
        if !readers.contains(&r) {
            readers.push(r);
        }
        dropped
    }

    /// `key` changed: its readers, who are no longer recorded for it.
    pub fn take(&mut self, key: &[u8]) -> Vec<Reader> {
        self.keys.remove(key).unwrap_or_default()
    }

    /// Everything was invalidated.
    pub fn clear(&mut self) {
        self.keys.clear();
    }

    /// Keys recorded.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// No key recorded.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// CLIENT TRACKING on|off [REDIRECT id] [PREFIX p]... [BCAST] [OPTIN] [OPTOUT] [NOLOOP], with
/// Redis's checks and errors (darner_commands::tracking); REDIRECT must name a client of this
/// proxy connected now (see [`Hub`]).
pub fn client_tracking(args: &[&[u8]], s: &mut Session) -> Plan {
    let now = s.tracking.as_ref().map(|t| TrackingNow {
        bcast: t.bcast,
        optin: t.optin,
        optout: t.optout,
        prefixes: &t.prefixes[..],
    });
    let parsed = parse_client_tracking(args, now, |arg| {
        let id = std::str::from_utf8(arg)
            .ok()
            .and_then(|a| a.parse::<i64>().ok())
            .ok_or_else(|| "ERR value is not an integer or out of range".to_string())?;
        if id <= 0 || !redirect_target_exists(id as u64) {
            return Err("ERR The client ID you want redirect to does not exist".into());
        }
        Ok(id as u64)
    });
    let (redirect, bcast, optin, optout, noloop, prefixes) = match parsed {
        Err(msg) => return error(s, &msg),
        Ok(TrackingRequest::Off) => {
            s.tracking = None;
            s.caching = false;
            return reply(s, |w| w.ok());
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
    let t = s.tracking.get_or_insert_with(Default::default);
    t.bcast = bcast;
    t.optin = optin;
    t.optout = optout;
    t.noloop = noloop;
    t.redirect = redirect;
    t.broken_redirect = false;
    if bcast {
        darner_commands::tracking::add_bcast_prefixes(&mut t.prefixes, prefixes, <[u8]>::to_vec);
    }
    reply(s, |w| w.ok())
}

/// CLIENT CACHING yes|no.
pub fn client_caching(args: &[&[u8]], s: &mut Session) -> Plan {
    let Some(t) = &s.tracking else {
        return error(s, "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    };
    if eq(args[2], "yes") {
        if !t.optin {
            return error(
                s,
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if eq(args[2], "no") {
        if !t.optout {
            return error(
                s,
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return error(s, "ERR syntax error");
    }
    s.caching = true;
    reply(s, |w| w.ok())
}

/// CLIENT GETREDIR: -1 without tracking, else the redirect's id (0: none).
pub fn client_getredir(s: &Session) -> Plan {
    let id = s.tracking.as_ref().map_or(-1, |t| t.redirect as i64);
    reply(s, |w| w.int(id))
}

/// CLIENT TRACKINGINFO.
pub fn client_trackinginfo(s: &Session) -> Plan {
    let mut flags: Vec<&[u8]> = Vec::new();
    match &s.tracking {
        None => flags.push(b"off"),
        Some(t) => {
            flags.push(b"on");
            if t.bcast {
                flags.push(b"bcast");
            }
            if t.optin {
                flags.push(b"optin");
                if s.caching {
                    flags.push(b"caching-yes");
                }
            }
            if t.optout {
                flags.push(b"optout");
                if s.caching {
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
    let redirect = s.tracking.as_ref().map_or(-1, |t| t.redirect as i64);
    let prefixes: &[Vec<u8>] = s.tracking.as_ref().map_or(&[], |t| &t.prefixes);
    reply(s, |w| {
        w.map(3);
        w.bulk(b"flags");
        w.set(flags.len());
        for f in &flags {
            w.bulk(f);
        }
        w.bulk(b"redirect");
        w.int(redirect);
        w.bulk(b"prefixes");
        w.array(prefixes.len());
        for p in prefixes {
            w.bulk(p);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(s: &mut Session, line: &str) -> Vec<u8> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let plan = match args[1].to_ascii_lowercase().as_slice() {
            b"tracking" => client_tracking(&args, s),
            b"caching" => client_caching(&args, s),
            b"getredir" => client_getredir(s),
            _ => client_trackinginfo(s),
        };
        match plan {
            Plan::Reply { bytes, .. } => bytes,
            _ => panic!("not a reply"),
        }
    }

    #[test]
    fn modes_and_their_errors() {
        let mut s = Session::default();
        assert_eq!(run(&mut s, "CLIENT GETREDIR"), b":-1\r\n");
        assert_eq!(
            run(&mut s, "CLIENT CACHING yes")[..40],
            b"-ERR CLIENT CACHING can be called only w"[..]
        );
        assert_eq!(run(&mut s, "CLIENT TRACKING on OPTIN"), b"+OK\r\n");
        assert!(!remembers(&s));
        assert_eq!(
            run(&mut s, "CLIENT CACHING no")[..36],
            b"-ERR CLIENT CACHING NO is only valid"[..]
        );
        assert_eq!(run(&mut s, "CLIENT CACHING yes"), b"+OK\r\n");
        assert!(remembers(&s));
        after_command(&mut s, b"client", false);
        assert!(remembers(&s));
        after_command(&mut s, b"get", false);
        assert!(!remembers(&s));
        assert!(run(&mut s, "CLIENT TRACKING on BCAST").starts_with(b"-ERR You can't switch BCAST"));
        assert!(run(&mut s, "CLIENT TRACKING on OPTOUT")
            .starts_with(b"-ERR You can't switch OPTIN/OPTOUT"));
        assert_eq!(
            run(&mut s, "CLIENT TRACKING on REDIRECT 5"),
            b"-ERR The client ID you want redirect to does not exist\r\n"
        );
        let hub = Arc::new(Hub::new(2));
        hub.set_live(5, true);
        install_hub(hub.clone());
        assert_eq!(
            run(&mut s, "CLIENT TRACKING on OPTIN REDIRECT 5"),
            b"+OK\r\n"
        );
        assert_eq!(run(&mut s, "CLIENT GETREDIR"), b":5\r\n");
        assert_eq!(hub.thread_of(5), 0);
        assert_eq!(hub.thread_of(6), 1);
        assert_eq!(
            run(&mut s, "CLIENT TRACKING on PREFIX a"),
            b"-ERR PREFIX option requires BCAST mode to be enabled\r\n"
        );
        assert_eq!(
            run(&mut s, "CLIENT TRACKING maybe"),
            b"-ERR syntax error\r\n"
        );
        assert_eq!(run(&mut s, "CLIENT TRACKING off"), b"+OK\r\n");
        assert_eq!(
            run(&mut s, "CLIENT TRACKING on BCAST PREFIX a: PREFIX b:"),
            b"+OK\r\n"
        );
        assert!(run(&mut s, "CLIENT TRACKING on BCAST PREFIX a:x")
            .starts_with(b"-ERR Prefix 'a:x' overlaps with an existing prefix 'a:'"));
        let t = s.tracking.clone().unwrap();
        assert!(t.wants(b"a:1") && t.wants(b"b:") && !t.wants(b"c:1"));
        assert!(!remembers(&s), "BCAST records no reads");
        assert_eq!(
            run(&mut s, "CLIENT TRACKINGINFO"),
            b"*6\r\n$5\r\nflags\r\n*2\r\n$2\r\non\r\n$5\r\nbcast\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*2\r\n$2\r\na:\r\n$2\r\nb:\r\n"
        );
    }

    #[test]
    fn own_writes_are_those_that_surely_changed_their_keys() {
        let w = |line: &str, reply: &[u8]| {
            let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            own_write_keys(&args, reply)
        };
        assert_eq!(w("SET k v", b"+OK\r\n"), vec![b"k".to_vec()]);
        assert_eq!(w("set k v GET", b"$-1\r\n"), vec![b"k".to_vec()]);
        assert!(w("SET k v NX", b"+OK\r\n").is_empty());
        assert!(w("SET k v px 10 xx", b"+OK\r\n").is_empty());
        assert!(w("INCR k", b"-ERR value is not an integer\r\n").is_empty());
        assert_eq!(
            w("MSET a 1 b 2", b"+OK\r\n"),
            vec![b"a".to_vec(), b"b".to_vec()]
        );
        assert_eq!(w("DEL k", b":1\r\n"), vec![b"k".to_vec()]);
        assert!(w("DEL k", b":0\r\n").is_empty());
        assert!(w("DEL a b", b":2\r\n").is_empty());
        assert!(w("SADD s m", b":1\r\n").is_empty());
        assert!(w("GET k", b"$1\r\nv\r\n").is_empty());
    }

    #[test]
    fn many_prefixes_are_checked_in_n_log_n() {
        let mut s = Session::default();
        let many: Vec<String> = (0..100_000).map(|i| format!("p{i:06}:")).collect();
        let line = format!("CLIENT TRACKING on BCAST PREFIX {}", many.join(" PREFIX "));
        let start = std::time::Instant::now();
        assert_eq!(run(&mut s, &line), b"+OK\r\n");
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        assert!(run(&mut s, "CLIENT TRACKING on BCAST PREFIX p000001:x")
            .starts_with(b"-ERR Prefix 'p000001:x' overlaps with an existing prefix 'p000001:'"));
        let mut s = Session::default();
        let line = format!(
            "CLIENT TRACKING on BCAST PREFIX {} PREFIX p05",
            many.join(" PREFIX ")
        );
        assert!(run(&mut s, &line)
            .starts_with(b"-ERR Prefix 'p05' overlaps with another provided prefix"));
        assert!(s.tracking.is_none());
    }

    #[test]
    fn the_table_hands_each_reader_an_invalidation_once() {
        let mut t = Table::default();
        let (a, b) = (Reader { idx: 0, id: 1 }, Reader { idx: 1, id: 2 });
        assert!(t.remember(b"k", a).is_empty());
        t.remember(b"k", a);
        t.remember(b"k", b);
        assert_eq!(t.take(b"k"), vec![a, b]);
        assert!(t.take(b"k").is_empty());
        assert!(t.is_empty());
        let args: Vec<&[u8]> = vec![b"MGET", b"x", b"y"];
        assert_eq!(read_keys(&args), vec![b"x".to_vec(), b"y".to_vec()]);
        let args: Vec<&[u8]> = vec![b"SET", b"x", b"1"];
        assert!(read_keys(&args).is_empty());
        assert_eq!(push(None), b">2\r\n$10\r\ninvalidate\r\n_\r\n");
        assert_eq!(
            push(Some(&[b"k".to_vec()])),
            b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
        );
    }
}
