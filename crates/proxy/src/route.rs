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
//! answered here, since backend connections are shared by every client of a thread; commands
//! that need a connection of their own (MULTI, blocking commands, SUBSCRIBE, MONITOR) are not
//! supported yet and say so, rather than misbehaving on a shared connection.

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

fn reply(s: &Session, f: impl FnOnce(&mut ReplyWriter)) -> Plan {
    let mut bytes = Vec::new();
    f(&mut ReplyWriter::new(&mut bytes, s.resp3));
    Plan::Reply {
        bytes,
        close: false,
    }
}

fn error(s: &Session, msg: &str) -> Plan {
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
    let Some(top) = lookup(name) else {
        // The backend words the unknown-command error exactly as it should be.
        return forward(Target::Any, args);
    };
    match top.name {
        "ping" | "echo" | "hello" | "select" | "quit" | "client" => return local(top, args, s),
        "multi" | "exec" | "discard" | "watch" | "unwatch" | "subscribe" | "psubscribe"
        | "ssubscribe" | "unsubscribe" | "punsubscribe" | "sunsubscribe" | "monitor" | "sync"
        | "psync" | "replconf" | "auth" | "reset" | "shutdown" | "debug" | "failover"
        | "replicaof" | "slaveof" | "wait" | "waitaof" | "randomkey" | "scan" => {
            return unsupported(s, top.name)
        }
        _ => {}
    }
    if top.has(flags::BLOCKING) {
        // XREAD and XREADGROUP block only with BLOCK; the others always may.
        let blocks = match top.name {
            "xread" | "xreadgroup" => args.iter().any(|a| a.eq_ignore_ascii_case(b"block")),
            _ => true,
        };
        if blocks {
            return unsupported(s, top.name);
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
