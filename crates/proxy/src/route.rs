//! What to do with one client request: [`plan`] turns its arguments into a [`Plan`] — a reply
//! the proxy gives itself, or backend requests and how to merge their replies.
//!
//! Routing reads the shared command table, as a cluster client does: the key specs say where
//! the keys are, the command tips say which commands may be split (`request_policy:multi_shard`:
//! MGET, MSET, DEL, UNLINK, EXISTS, TOUCH) or sent to every primary (`all_shards`,
//! `all_nodes`), and how to merge the answers (`response_policy:*`). Any other command whose
//! keys hash to more than one slot is refused with Redis Cluster's CROSSSLOT error, because
//! splitting it would break its atomicity (MSETNX, RENAME, SUNIONSTORE, EVAL).
//!
//! The proxy presents itself as a one-node cluster that owns every slot: CLUSTER SLOTS, SHARDS
//! and NODES name the proxy's own address, so a cluster-aware client sends everything to the
//! proxy and never learns the backends' addresses (which may not even be reachable from it).
//! Commands that change per-connection state on the server (SELECT, HELLO, CLIENT SETNAME) are
//! answered here, since backend connections are shared by every client of a thread. A
//! transaction (MULTI, WATCH) is pinned to one slot and a blocking command gets a connection of
//! the client's own ([`Plan::Pinned`], [`Plan::Blocking`]); SUBSCRIBE turns the client into a
//! passthrough to a connection of its own ([`Plan::Subscribe`]); MONITOR opens a connection
//! of the client's own to every node it watches ([`Plan::Monitor`]).

use darner_commands::{flags, key_positions, key_slot, lookup, lookup_subcommand, CommandSpec};
use darner_commands::{FindKeys, SLOTS};
use darner_resp::{parse_i64_strict, ReplyWriter};

use crate::merge::Merge;
use crate::slots::SlotMap;

/// The `version` HELLO reports: the Redis version whose behaviour Darner follows (the server
/// reports the same).
pub const REDIS_COMPAT_VERSION: &str = "7.4.0";

/// Redis Cluster's error for a request whose keys are in several slots.
pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// How the proxy names itself to clients.
#[derive(Clone, Debug)]
pub struct Identity {
    /// Host clients reach the proxy at.
    pub host: String,
    /// Port clients reach the proxy at.
    pub port: u16,
    /// The 40-hex-digit node id of the one-node cluster the proxy presents.
    pub node_id: String,
}

/// A client connection's own state.
#[derive(Clone, Debug, Default)]
pub struct Session {
    /// Speaks RESP3 (after HELLO 3).
    pub resp3: bool,
    /// CLIENT SETNAME's name.
    pub name: Option<Vec<u8>>,
    /// CLIENT ID.
    pub id: u64,
    /// MULTI/WATCH state.
    pub tx: Tx,
    /// AUTH (or HELLO ... AUTH) succeeded (only read when the proxy has `requirepass`).
    pub authenticated: bool,
    /// CLIENT TRACKING on (see [`crate::tracking`]).
    pub tracking: Option<crate::tracking::Tracking>,
    /// CLIENT CACHING yes/no applies to the next command.
    pub caching: bool,
}

/// Most keyless commands a transaction may queue before its first key names the slot (and so
/// the backend) they will run on: they wait in the proxy until then.
pub const MAX_QUEUED_BEFORE_SLOT: usize = 4096;
/// Most bytes those queued commands may take together.
pub const MAX_QUEUED_BYTES_BEFORE_SLOT: usize = 64 << 20;

/// A client's transaction: MULTI and WATCH pin it to one slot, whose owner runs it on a
/// backend connection of the client's own (the server holds that connection; this is what the
/// routing needs to know about it).
#[derive(Clone, Debug, Default)]
pub struct Tx {
    /// Between MULTI and EXEC/DISCARD.
    pub multi: bool,
    /// The slot the transaction is pinned to, once WATCH or a keyed command named one.
    pub slot: Option<u16>,
    /// The client holds a dedicated backend connection (pinned to `slot`, or to any primary
    /// for a transaction without keys).
    pub pinned: bool,
    /// The backend has been sent MULTI.
    pub multi_sent: bool,
    /// Keys are watched on the pinned connection.
    pub watching: bool,
    /// Keyless commands queued before the slot was known, to be sent after MULTI once it is.
    pub queued: Vec<Vec<u8>>,
    /// A command of another slot was queued: EXEC answers CROSSSLOT, as a cluster node does
    /// when a transaction's commands are in several slots.
    pub crossslot: bool,
    /// A command was refused while queueing: EXEC answers EXECABORT.
    pub aborted: bool,
    /// The pinned connection was lost while keys were watched: EXEC answers a null array, as
    /// when a watched key changed, since the proxy cannot tell whether one did.
    pub watch_lost: bool,
}

impl Tx {
    /// The pinned connection went away (backend failure): what was sent on it is lost.
    pub fn connection_lost(&mut self) {
        if self.multi {
            self.aborted = true;
        }
        if self.watching {
            self.watch_lost = true;
        }
        self.pinned = false;
        self.multi_sent = false;
        self.watching = false;
        self.slot = None;
    }
}

/// Where a backend request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The primary owning this slot (looked up when sent, again after a MOVED).
    Slot(u16),
    /// This node.
    Node(String),
    /// Any primary: a command whose answer does not depend on the node.
    Any,
}

/// One backend request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// Where it goes.
    pub target: Target,
    /// The request in RESP multibulk form.
    pub payload: Vec<u8>,
}

/// What to do with a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Answer this (already in the client's protocol).
    Reply {
        /// The reply's bytes.
        bytes: Vec<u8>,
        /// Close the connection once it is written (QUIT).
        close: bool,
    },
    /// Send these and merge their replies.
    Forward {
        /// The backend requests.
        parts: Vec<Part>,
        /// How their replies become the client's.
        merge: Merge,
    },
    /// Send on the client's own pinned backend connection (a transaction).
    Pinned {
        /// Where to open it if the client holds none; `None`: the client must hold one already
        /// (if it was lost, the request fails rather than run outside its transaction).
        open: Option<Target>,
        /// Sent first; their replies are nobody's (MULTI and the keyless commands queued before
        /// the slot was known, whose `+QUEUED` the proxy already gave).
        preamble: Vec<Vec<u8>>,
        /// The request.
        payload: Vec<u8>,
        /// The client's reply, if not the backend's (EXEC of a transaction the proxy knows is
        /// void, whose backend side is only discarded).
        reply: Option<Vec<u8>>,
        /// The connection is given back after this request (EXEC, DISCARD, UNWATCH).
        release: bool,
    },
    /// A blocking command: sent on a backend connection of the client's own, so that it never
    /// holds up the shared ones.
    Blocking {
        /// Where it goes.
        target: Target,
        /// The request.
        payload: Vec<u8>,
    },
    /// SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE or PUNSUBSCRIBE outside a transaction: from this
    /// request on, once the client's earlier replies are out, the client's bytes go unparsed to
    /// a backend connection of its own and that connection's bytes to the client, until the
    /// client leaves. The node then answers every command itself, with its own errors in
    /// subscribed mode; classic PUBLISH reaches every node's subscribers, so any primary does,
    /// while SSUBSCRIBE goes to the owner of its channels' slot.
    Subscribe {
        /// The node the connection goes to.
        target: Target,
    },
    /// MONITOR outside a transaction: once the client's earlier replies are out, the proxy
    /// opens a MONITOR connection of the client's own to every primary (and every replica when
    /// reads may go there), answers `+OK` once every node has, and from then on passes each
    /// node's lines to the client as they arrive, until QUIT, RESET or the client leaves.
    Monitor,
    /// WAIT outside a transaction, its arguments checked as Redis checks them: the proxy asks
    /// the nodes the client wrote to since its last WAIT (see `server/wait.rs`).
    Wait {
        /// Replicas wanted.
        numreplicas: i64,
        /// Milliseconds; 0: no limit.
        timeout_ms: u64,
    },
}

/// `args` as a RESP multibulk request.
pub fn encode_request<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let size: usize = args.iter().map(|a| a.as_ref().len() + 16).sum();
    let mut out = Vec::with_capacity(size + 16);
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        let a = a.as_ref();
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The proxy's own answer, in the client's protocol.
pub(crate) fn reply(s: &Session, f: impl FnOnce(&mut ReplyWriter)) -> Plan {
    let mut bytes = Vec::new();
    f(&mut ReplyWriter::new(&mut bytes, s.resp3));
    Plan::Reply {
        bytes,
        close: false,
    }
}

/// The proxy's own error reply.
pub(crate) fn error(s: &Session, msg: &str) -> Plan {
    reply(s, |w| w.error(msg.as_bytes()))
}

fn arity_error(s: &Session, spec: &CommandSpec) -> Plan {
    error(
        s,
        &format!(
            "ERR wrong number of arguments for '{}' command",
            spec.full_name
        ),
    )
}

fn unsupported(s: &Session, name: &str) -> Plan {
    error(
        s,
        &format!("ERR command '{name}' is not supported by darner proxy yet"),
    )
}

fn forward(target: Target, args: &[&[u8]]) -> Plan {
    Plan::Forward {
        parts: vec![Part {
            target,
            payload: encode_request(args),
        }],
        merge: Merge::Passthrough,
    }
}

fn has_tip(spec: &CommandSpec, tip: &str) -> bool {
    spec.tips.contains(&tip)
}

/// The plan for one request (`args[0]` is the command name; never empty).
pub fn plan(args: &[&[u8]], s: &mut Session, me: &Identity, map: &SlotMap) -> Plan {
    let Some(&name) = args.first() else {
        return error(s, "ERR empty request");
    };
    let named = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    if named("multi") || named("exec") || named("discard") || named("watch") || named("unwatch") {
        return transaction(args, s);
    }
    if s.tx.multi {
        return in_multi(args, s, me, map);
    }
    let p = route_one(args, s, me, map, false);
    // Outside MULTI, a command of the watched slot travels on the pinned connection, so that
    // it reaches the node after the WATCH (on a shared connection it could overtake it).
    match p {
        Plan::Forward {
            parts,
            merge: Merge::Passthrough,
        } if s.tx.pinned
            && parts.len() == 1
            && s.tx
                .slot
                .is_some_and(|slot| parts[0].target == Target::Slot(slot)) =>
        {
            let part = parts.into_iter().next().expect("one part");
            Plan::Pinned {
                open: None,
                preamble: Vec::new(),
                payload: part.payload,
                reply: None,
                release: false,
            }
        }
        p => p,
    }
}

fn queued(s: &Session) -> Plan {
    reply(s, |w| w.simple(b"QUEUED"))
}

/// A command between MULTI and EXEC.
fn in_multi(args: &[&[u8]], s: &mut Session, me: &Identity, map: &SlotMap) -> Plan {
    let known = match lookup(args[0]) {
        Some(top) if top.is_container() => args
            .get(1)
            .is_some_and(|sub| lookup_subcommand(top, sub).is_some()),
        Some(_) => true,
        None => args[0].eq_ignore_ascii_case(b"cluster"),
    };
    if !known {
        // Refused while queueing, as on a node: the backend words the error, and EXEC aborts.
        s.tx.aborted = true;
        return forward(Target::Any, args);
    }
    let p = route_one(args, s, me, map, true);
    match p {
        Plan::Reply { ref bytes, .. } => {
            // Refused while queueing: Redis flags the transaction, and EXEC aborts.
            if bytes.first() == Some(&b'-') {
                s.tx.aborted = true;
            }
            p
        }
        Plan::Forward { parts, merge } => {
            if parts.len() != 1 || merge != Merge::Passthrough {
                s.tx.aborted = true;
                return if parts.iter().all(|p| matches!(p.target, Target::Slot(_))) {
                    error(s, CROSSSLOT)
                } else {
                    error(
                        s,
                        &format!(
                            "ERR command '{}' goes to every primary and cannot be part of a transaction through darner proxy",
                            String::from_utf8_lossy(&args[0][..args[0].len().min(64)]).to_ascii_lowercase()
                        ),
                    )
                };
            }
            let part = parts.into_iter().next().expect("one part");
            pinned_in_multi(part, s)
        }
        Plan::Pinned { .. }
        | Plan::Blocking { .. }
        | Plan::Subscribe { .. }
        | Plan::Monitor
        | Plan::Wait { .. } => p,
    }
}

/// A queued command's way to the pinned connection.
fn pinned_in_multi(part: Part, s: &mut Session) -> Plan {
    let tx = &mut s.tx;
    let slot = match part.target {
        Target::Slot(slot) => Some(slot),
        _ => None,
    };
    match (tx.pinned, tx.slot, slot) {
        // Another slot than the transaction's: a node owning both queues it and refuses EXEC.
        (_, Some(pinned), Some(slot)) if pinned != slot => {
            tx.crossslot = true;
            queued(s)
        }
        (true, _, _) => {
            if tx.slot.is_none() {
                tx.slot = slot;
            }
            Plan::Pinned {
                open: None,
                preamble: Vec::new(),
                payload: part.payload,
                reply: None,
                release: false,
            }
        }
        (false, _, None) => {
            let bytes: usize = tx.queued.iter().map(Vec::len).sum::<usize>() + part.payload.len();
            if tx.queued.len() >= MAX_QUEUED_BEFORE_SLOT || bytes > MAX_QUEUED_BYTES_BEFORE_SLOT {
                tx.aborted = true;
                return error(
                    s,
                    "ERR too many commands queued before the first key of the transaction (darner proxy)",
                );
            }
            tx.queued.push(part.payload);
            queued(s)
        }
        (false, _, Some(slot)) => {
            tx.slot = Some(slot);
            tx.pinned = true;
            tx.multi_sent = true;
            let mut preamble = vec![encode_request(&["MULTI"])];
            preamble.append(&mut tx.queued);
            Plan::Pinned {
                open: Some(Target::Slot(slot)),
                preamble,
                payload: part.payload,
                reply: None,
                release: false,
            }
        }
    }
}

/// MULTI, EXEC, DISCARD, WATCH, UNWATCH.
fn transaction(args: &[&[u8]], s: &mut Session) -> Plan {
    let name = String::from_utf8_lossy(args[0]).to_ascii_lowercase();
    let spec = lookup(args[0]).expect("transaction commands are in the table");
    if !spec.arity_ok(args.len()) {
        if s.tx.multi {
            s.tx.aborted = true;
        }
        return arity_error(s, spec);
    }
    let pinned = |payload: Vec<u8>, reply: Option<Vec<u8>>, release: bool| Plan::Pinned {
        open: None,
        preamble: Vec::new(),
        payload,
        reply,
        release,
    };
    match name.as_str() {
        "multi" => {
            if s.tx.multi {
                return error(s, "ERR MULTI calls can not be nested");
            }
            s.tx.multi = true;
            if s.tx.pinned {
                s.tx.multi_sent = true;
                return pinned(encode_request(args), None, false);
            }
            reply(s, |w| w.ok())
        }
        "watch" => {
            if s.tx.multi {
                return error(s, "ERR WATCH inside MULTI is not allowed");
            }
            let slot = key_slot(args[1]);
            if args[2..].iter().any(|k| key_slot(k) != slot)
                || s.tx.slot.is_some_and(|pinned| pinned != slot)
            {
                return error(s, CROSSSLOT);
            }
            let open = !s.tx.pinned;
            s.tx.pinned = true;
            s.tx.slot = Some(slot);
            s.tx.watching = true;
            Plan::Pinned {
                open: open.then_some(Target::Slot(slot)),
                preamble: Vec::new(),
                payload: encode_request(args),
                reply: None,
                release: false,
            }
        }
        "unwatch" if s.tx.multi => pinned_in_multi(
            Part {
                target: Target::Any,
                payload: encode_request(args),
            },
            s,
        ),
        "unwatch" => {
            let was = std::mem::take(&mut s.tx);
            if was.pinned {
                pinned(encode_request(args), None, true)
            } else {
                reply(s, |w| w.ok())
            }
        }
        "discard" => {
            if !s.tx.multi {
                return error(s, "ERR DISCARD without MULTI");
            }
            let was = std::mem::take(&mut s.tx);
            if was.pinned {
                pinned(encode_request(args), None, true)
            } else {
                reply(s, |w| w.ok())
            }
        }
        _ => {
            if !s.tx.multi {
                return error(s, "ERR EXEC without MULTI");
            }
            let was = std::mem::take(&mut s.tx);
            let void = if was.crossslot {
                Some(error_bytes(s, CROSSSLOT))
            } else if was.aborted {
                Some(error_bytes(
                    s,
                    "EXECABORT Transaction discarded because of previous errors.",
                ))
            } else if was.watch_lost {
                let mut b = Vec::new();
                ReplyWriter::new(&mut b, s.resp3).null_array();
                Some(b)
            } else {
                None
            };
            match (void, was.pinned) {
                (Some(bytes), false) => Plan::Reply {
                    bytes,
                    close: false,
                },
                (Some(bytes), true) => {
                    let payload = if was.multi_sent { "DISCARD" } else { "UNWATCH" };
                    pinned(encode_request(&[payload]), Some(bytes), true)
                }
                (None, true) => pinned(encode_request(args), None, true),
                (None, false) if was.queued.is_empty() => reply(s, |w| w.array(0)),
                // Keyless commands only: any primary runs them.
                (None, false) => {
                    let mut preamble = vec![encode_request(&["MULTI"])];
                    preamble.extend(was.queued);
                    Plan::Pinned {
                        open: Some(Target::Any),
                        preamble,
                        payload: encode_request(args),
                        reply: None,
                        release: true,
                    }
                }
            }
        }
    }
}

fn error_bytes(s: &Session, msg: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    ReplyWriter::new(&mut bytes, s.resp3).error(msg.as_bytes());
    bytes
}

/// The plan for one request outside the transaction logic; `in_multi`: it will be queued, so
/// a blocking command does not block and PING or ECHO are the backend's to answer.
fn route_one(
    args: &[&[u8]],
    s: &mut Session,
    me: &Identity,
    map: &SlotMap,
    in_multi: bool,
) -> Plan {
    let Some(&name) = args.first() else {
        return error(s, "ERR empty request");
    };
    // The cluster commands are not in the shared table (the server does not implement them
    // yet), so the proxy knows their shapes itself.
    if name.eq_ignore_ascii_case(b"cluster") {
        return cluster(args, s, me, map);
    }
    for bare in ["readonly", "readwrite", "asking"] {
        if name.eq_ignore_ascii_case(bare.as_bytes()) {
            if args.len() != 1 {
                return error(
                    s,
                    &format!("ERR wrong number of arguments for '{bare}' command"),
                );
            }
            return reply(s, |w| w.ok());
        }
    }
    if name.eq_ignore_ascii_case(b"waitaof") {
        // WAITAOF is Redis 7.2's, and the command table is 7.0's: the proxy answers as a 7.0
        // node does, whatever the backends run, rather than forward it to a 7.2 node on a
        // shared connection, where it would block other clients and count their writes.
        return error(s, &crate::auth::unknown_command(args));
    }
    let Some(top) = lookup(name) else {
        // The backend words the unknown-command error exactly as it should be.
        return forward(Target::Any, args);
    };
    match top.name {
        "ping" | "echo" | "select" if in_multi => {
            if !top.arity_ok(args.len()) || (top.name == "ping" && args.len() > 2) {
                return arity_error(s, top);
            }
            if top.name == "select" {
                // SELECT 0 is queued for the node (where it succeeds); others are refused.
                if let Plan::Reply { bytes, close } = local(top, args, s) {
                    if bytes.first() == Some(&b'-') {
                        return Plan::Reply { bytes, close };
                    }
                }
            }
            return forward(Target::Any, args);
        }
        "ping" | "echo" | "hello" | "select" | "quit" | "client" => return local(top, args, s),
        "subscribe" | "psubscribe" | "unsubscribe" | "punsubscribe" if !in_multi => {
            if !top.arity_ok(args.len()) {
                return arity_error(s, top);
            }
            return Plan::Subscribe {
                target: Target::Any,
            };
        }
        "ssubscribe" | "sunsubscribe" if !in_multi => {
            if !top.arity_ok(args.len()) {
                return arity_error(s, top);
            }
            // Every argument is a channel, hashed like a key: one slot, as a node requires.
            let mut slots = args[1..].iter().map(|c| key_slot(c));
            let target = match slots.next() {
                None => Target::Any,
                Some(first) if slots.all(|x| x == first) => Target::Slot(first),
                Some(_) => return error(s, CROSSSLOT),
            };
            return Plan::Subscribe { target };
        }
        "wait" if !in_multi => {
            if !top.arity_ok(args.len()) {
                return arity_error(s, top);
            }
            // Redis's order and texts (getLongFromObjectOrReply, getTimeoutFromObjectOrReply).
            let Some(numreplicas) = parse_i64_strict(args[1]) else {
                return error(s, "ERR value is not an integer or out of range");
            };
            let Some(timeout) = parse_i64_strict(args[2]) else {
                return error(s, "ERR timeout is not an integer or out of range");
            };
            let Ok(timeout_ms) = u64::try_from(timeout) else {
                return error(s, "ERR timeout is negative");
            };
            return Plan::Wait {
                numreplicas,
                timeout_ms,
            };
        }
        "monitor" if !in_multi => {
            if !top.arity_ok(args.len()) {
                return arity_error(s, top);
            }
            return Plan::Monitor;
        }
        "subscribe" | "psubscribe" | "ssubscribe" | "unsubscribe" | "punsubscribe"
        | "sunsubscribe" | "monitor" | "sync" | "psync" | "replconf" | "auth" | "reset"
        | "shutdown" | "debug" | "failover" | "replicaof" | "slaveof" | "wait" | "randomkey"
        | "scan" => return unsupported(s, top.name),
        _ => {}
    }
    if top.has(flags::BLOCKING) {
        // XREAD and XREADGROUP block only with BLOCK; the others always may.
        let blocks = match top.name {
            "xread" | "xreadgroup" => args.iter().any(|a| a.eq_ignore_ascii_case(b"block")),
            _ => true,
        };
        if blocks && !in_multi {
            return match route_one(args, s, me, map, true) {
                Plan::Forward {
                    parts,
                    merge: Merge::Passthrough,
                } if parts.len() == 1 => {
                    let part = parts.into_iter().next().expect("one part");
                    Plan::Blocking {
                        target: part.target,
                        payload: part.payload,
                    }
                }
                other => other,
            };
        }
    }
    let spec = match (top.is_container(), args.get(1)) {
        (true, Some(sub)) => match lookup_subcommand(top, sub) {
            Some(sub) => sub,
            None => return forward(Target::Any, args),
        },
        (true, None) => return forward(Target::Any, args),
        (false, _) => top,
    };
    if !spec.arity_ok(args.len()) {
        return arity_error(s, spec);
    }
    if has_tip(spec, "request_policy:all_shards") || has_tip(spec, "request_policy:all_nodes") {
        return fan_out(spec, args, s, map);
    }
    let mut keys = key_positions(spec, args);
    if keys.is_empty() && matches!(spec.name, "sort" | "sort_ro") {
        // SORT's key specs are incomplete (BY and GET take patterns), which empties the
        // positions; its keys are the sorted key and the STORE destination, as Redis's own
        // sortGetKeys finds them.
        keys.push(1);
        if let Some(i) = args.iter().position(|a| a.eq_ignore_ascii_case(b"store")) {
            if i >= 2 && i + 1 < args.len() {
                keys.push(i + 1);
            }
        }
    }
    let Some(&first) = keys.first() else {
        return forward(Target::Any, args);
    };
    let slot = key_slot(args[first]);
    if keys.iter().all(|&k| key_slot(args[k]) == slot) {
        return forward(Target::Slot(slot), args);
    }
    if !has_tip(spec, "request_policy:multi_shard") {
        return error(s, CROSSSLOT);
    }
    split(spec, args, &keys)
}

/// A multi-shard command split into one request per slot, keys in their original order within
/// each part (so duplicates count as they would on one node).
fn split(spec: &CommandSpec, args: &[&[u8]], keys: &[usize]) -> Plan {
    // The arguments that travel with a key: the key itself, and for MSET its value.
    let step = match spec.key_specs.first().map(|k| k.find) {
        Some(FindKeys::Range { step, .. }) if step > 0 => step as usize,
        _ => 1,
    };
    let mut slots: Vec<u16> = Vec::new();
    let mut groups: Vec<(Vec<&[u8]>, Vec<usize>)> = Vec::new();
    for (i, &k) in keys.iter().enumerate() {
        let slot = key_slot(args[k]);
        let g = match slots.iter().position(|&s| s == slot) {
            Some(g) => g,
            None => {
                slots.push(slot);
                groups.push((vec![args[0]], Vec::new()));
                groups.len() - 1
            }
        };
        let end = (k + step).min(args.len());
        groups[g].0.extend_from_slice(&args[k..end]);
        groups[g].1.push(i);
    }
    let merge = if has_tip(spec, "response_policy:agg_sum") {
        Merge::Sum
    } else if has_tip(spec, "response_policy:all_succeeded") {
        Merge::AllOk
    } else {
        Merge::KeyOrder {
            len: keys.len(),
            positions: groups.iter().map(|g| g.1.clone()).collect(),
        }
    };
    let parts = slots
        .into_iter()
        .zip(groups)
        .map(|(slot, (a, _))| Part {
            target: Target::Slot(slot),
            payload: encode_request(&a),
        })
        .collect();
    Plan::Forward { parts, merge }
}

/// A command for every primary, merged by its response policy.
fn fan_out(spec: &CommandSpec, args: &[&[u8]], s: &Session, map: &SlotMap) -> Plan {
    let merge = if has_tip(spec, "response_policy:agg_sum") {
        Merge::Sum
    } else if has_tip(spec, "response_policy:all_succeeded") {
        Merge::AllOk
    } else if has_tip(spec, "response_policy:agg_logical_and") {
        Merge::LogicalAnd
    } else if spec.tips.iter().any(|t| t.starts_with("response_policy:")) {
        // INFO and MEMORY STATS answer for one node; the rest (special, one_succeeded, agg_min)
        // have no merge yet.
        if spec.full_name == "info" {
            return forward(Target::Any, args);
        }
        return unsupported(s, spec.full_name);
    } else {
        Merge::Concat
    };
    let payload = encode_request(args);
    let parts: Vec<Part> = map
        .primaries()
        .into_iter()
        .map(|n| Part {
            target: Target::Node(n.to_string()),
            payload: payload.clone(),
        })
        .collect();
    if parts.is_empty() {
        return error(s, "CLUSTERDOWN Hash slot not served");
    }
    Plan::Forward { parts, merge }
}

/// Commands the proxy answers itself.
fn local(top: &'static CommandSpec, args: &[&[u8]], s: &mut Session) -> Plan {
    let spec = match (top.is_container(), args.get(1)) {
        (true, Some(sub)) => match lookup_subcommand(top, sub) {
            Some(sub) => sub,
            None => {
                return error(
                    s,
                    &format!(
                        "ERR unknown subcommand '{}'. Try {} HELP.",
                        String::from_utf8_lossy(&sub[..sub.len().min(128)]),
                        top.name.to_ascii_uppercase()
                    ),
                )
            }
        },
        _ => top,
    };
    if !spec.arity_ok(args.len()) {
        return arity_error(s, spec);
    }
    match spec.full_name {
        // PING's arity is -1, but it takes one message at most.
        "ping" if args.len() > 2 => arity_error(s, spec),
        "ping" => match args.get(1) {
            None => reply(s, |w| w.simple(b"PONG")),
            Some(m) => reply(s, |w| w.bulk(m)),
        },
        "echo" => reply(s, |w| w.bulk(args[1])),
        "quit" => Plan::Reply {
            bytes: b"+OK\r\n".to_vec(),
            close: true,
        },
        "select" => match parse_i64_strict(args[1]) {
            None => error(s, "ERR value is not an integer or out of range"),
            Some(0) => reply(s, |w| w.ok()),
            Some(_) => error(s, "ERR SELECT is not allowed in cluster mode"),
        },
        "hello" => hello(args, s),
        "client|setname" => {
            let name = args[2];
            if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
                return error(
                    s,
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            s.name = (!name.is_empty()).then(|| name.to_vec());
            reply(s, |w| w.ok())
        }
        "client|getname" => {
            let name = s.name.clone();
            reply(s, |w| match &name {
                Some(n) => w.bulk(n),
                None => w.null(),
            })
        }
        "client|id" => {
            let id = s.id as i64;
            reply(s, |w| w.int(id))
        }
        "client|setinfo" => {
            let attr = args[2];
            if attr.eq_ignore_ascii_case(b"lib-name") || attr.eq_ignore_ascii_case(b"lib-ver") {
                reply(s, |w| w.ok())
            } else {
                error(
                    s,
                    &format!(
                        "ERR Unrecognized option '{}'",
                        String::from_utf8_lossy(attr)
                    ),
                )
            }
        }
        "client|tracking" => crate::tracking::client_tracking(args, s),
        "client|caching" => crate::tracking::client_caching(args, s),
        "client|getredir" => crate::tracking::client_getredir(s),
        "client|trackinginfo" => crate::tracking::client_trackinginfo(s),
        other => unsupported(s, other),
    }
}

/// CLUSTER: the proxy is a one-node cluster owning every slot, at its own address.
fn cluster(args: &[&[u8]], s: &mut Session, me: &Identity, map: &SlotMap) -> Plan {
    let Some(sub) = args.get(1) else {
        return error(s, "ERR wrong number of arguments for 'cluster' command");
    };
    let sub_lc = String::from_utf8_lossy(sub).to_ascii_lowercase();
    // Arity counting the command and the subcommand, as Redis's table has it.
    let arity: i32 = match sub_lc.as_str() {
        "slots" | "shards" | "nodes" | "info" | "myid" => 2,
        "keyslot" | "countkeysinslot" => 3,
        "getkeysinslot" => 4,
        _ => {
            return error(
                s,
                &format!(
                    "ERR unknown subcommand '{}'. Try CLUSTER HELP.",
                    String::from_utf8_lossy(&sub[..sub.len().min(128)])
                ),
            )
        }
    };
    if args.len() != arity as usize {
        return error(
            s,
            &format!("ERR wrong number of arguments for 'cluster|{sub_lc}' command"),
        );
    }
    match sub_lc.as_str() {
        "keyslot" => {
            let slot = key_slot(args[2]);
            reply(s, |w| w.int(i64::from(slot)))
        }
        "myid" => reply(s, |w| w.bulk(me.node_id.as_bytes())),
        "slots" => reply(s, |w| {
            w.array(1);
            w.array(3);
            w.int(0);
            w.int(i64::from(SLOTS - 1));
            w.array(4);
            w.bulk(me.host.as_bytes());
            w.int(i64::from(me.port));
            w.bulk(me.node_id.as_bytes());
            w.map(0);
        }),
        "shards" => reply(s, |w| {
            w.array(1);
            w.map(2);
            w.bulk(b"slots");
            w.array(2);
            w.int(0);
            w.int(i64::from(SLOTS - 1));
            w.bulk(b"nodes");
            w.array(1);
            w.map(7);
            w.bulk(b"id");
            w.bulk(me.node_id.as_bytes());
            w.bulk(b"port");
            w.int(i64::from(me.port));
            w.bulk(b"ip");
            w.bulk(me.host.as_bytes());
            w.bulk(b"endpoint");
            w.bulk(me.host.as_bytes());
            w.bulk(b"role");
            w.bulk(b"master");
            w.bulk(b"replication-offset");
            w.int(0);
            w.bulk(b"health");
            w.bulk(b"online");
        }),
        "nodes" => {
            let line = format!(
                "{} {}:{}@0 myself,master - 0 0 0 connected 0-{}\n",
                me.node_id,
                me.host,
                me.port,
                SLOTS - 1
            );
            reply(s, |w| w.verbatim(b"txt", line.as_bytes()))
        }
        "info" => {
            let state = if map.is_complete() { "ok" } else { "fail" };
            let text = format!(
                "cluster_state:{state}\r\ncluster_slots_assigned:16384\r\n\
                 cluster_slots_ok:16384\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\n\
                 cluster_known_nodes:1\r\ncluster_size:1\r\ncluster_current_epoch:0\r\n\
                 cluster_my_epoch:0\r\ncluster_stats_messages_sent:0\r\n\
                 cluster_stats_messages_received:0\r\n\
                 total_cluster_links_buffer_limit_exceeded:0\r\n"
            );
            reply(s, |w| w.verbatim(b"txt", text.as_bytes()))
        }
        // The keys of one slot live on its owner.
        "countkeysinslot" | "getkeysinslot" => match parse_i64_strict(args[2]) {
            Some(n) if (0..i64::from(SLOTS)).contains(&n) => forward(Target::Slot(n as u16), args),
            _ => error(s, "ERR Invalid slot"),
        },
        other => unsupported(s, other),
    }
}

/// HELLO [protover [AUTH user pass] [SETNAME name]].
fn hello(args: &[&[u8]], s: &mut Session) -> Plan {
    let mut resp3 = s.resp3;
    if let Some(v) = args.get(1) {
        match parse_i64_strict(v) {
            None => return error(s, "ERR Protocol version is not an integer or out of range"),
            Some(2) => resp3 = false,
            Some(3) => resp3 = true,
            Some(_) => return error(s, "NOPROTO unsupported protocol version"),
        }
    }
    let mut name = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - i - 1;
        if args[i].eq_ignore_ascii_case(b"auth") && more >= 2 {
            return unsupported(s, "auth");
        } else if args[i].eq_ignore_ascii_case(b"setname") && more >= 1 {
            let n = args[i + 1];
            if n.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
                return error(
                    s,
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            name = Some(n.to_vec());
            i += 2;
        } else {
            return error(
                s,
                &format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(args[i])
                ),
            );
        }
    }
    if let Some(n) = name {
        s.name = (!n.is_empty()).then_some(n);
    }
    s.resp3 = resp3;
    let id = s.id as i64;
    reply(s, |w| {
        w.map(7);
        w.bulk(b"server");
        w.bulk(b"redis");
        w.bulk(b"version");
        w.bulk(REDIS_COMPAT_VERSION.as_bytes());
        w.bulk(b"proto");
        w.int(if resp3 { 3 } else { 2 });
        w.bulk(b"id");
        w.int(id);
        w.bulk(b"mode");
        w.bulk(b"cluster");
        w.bulk(b"role");
        w.bulk(b"master");
        w.bulk(b"modules");
        w.array(0);
    })
}

/// A redirection in a backend's error reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redirect {
    /// `-MOVED slot host:port`: the slot has a new owner; update the map.
    Moved {
        /// The slot.
        slot: u16,
        /// Its owner.
        node: String,
    },
    /// `-ASK slot host:port`: this one request goes there, after ASKING.
    Ask {
        /// The slot.
        slot: u16,
        /// The importing node.
        node: String,
    },
}

/// The redirection in a reply's wire bytes, if it is one.
pub fn parse_redirect(reply: &[u8]) -> Option<Redirect> {
    let line = reply.strip_prefix(b"-")?;
    let line = &line[..line.iter().position(|&c| c == b'\r')?];
    let text = std::str::from_utf8(line).ok()?;
    let mut words = text.split(' ');
    let kind = words.next()?;
    let slot: u16 = words.next()?.parse().ok().filter(|&s| s < SLOTS)?;
    let node = words.next()?;
    let (host, port) = node.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    // An empty host means "the node you asked" (Redis writes `:port` when it does not know its
    // own address); the caller fills it in.
    let node = if host.is_empty() {
        format!(":{port}")
    } else {
        node.to_string()
    };
    match kind {
        "MOVED" => Some(Redirect::Moved { slot, node }),
        "ASK" => Some(Redirect::Ask { slot, node }),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
