//! Replicas and the read policy: which nodes may answer a read-only request for a slot, in
//! which order they are tried.
//!
//! The replicas of each shard come from the same `CLUSTER SHARDS` reply as the slot map (or
//! `CLUSTER SLOTS`, which lists them without health). They are kept apart from [`SlotMap`],
//! keyed by their primary's `host:port`, so that the slot map stays one array lookup for the
//! writes and the `master` policy, which never need them.
//!
//! A replica whose `health` is not `online` (`failed`, `loading`) is never chosen: it would
//! refuse the read, or answer from a dataset it is still loading. Among the others, the one
//! with the highest `replication-offset` (the least lag behind its primary) comes first; ties
//! keep the order the node listed them in. Which replica answers is therefore stable between
//! refreshes, so a client reading twice in a row reads the same copy.

use std::collections::HashMap;

use darner_commands::{flags, lookup, lookup_subcommand};
use darner_resp::Frame;

use crate::slots::{node_name, SlotMap};

/// Where read-only requests go (`--read-policy`). Writes, transactions, blocking commands and
/// subscriptions always go to the primary whatever the policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadPolicy {
    /// The primary only (Redis Cluster's default: every read sees every acknowledged write).
    #[default]
    Master,
    /// The primary; its replicas when it fails.
    PreferMaster,
    /// Replicas only: a shard without a usable replica fails its reads.
    Replica,
    /// Replicas; the primary when none answers.
    PreferReplica,
    /// Any node of the shard, in turn; the others when it fails.
    Any,
}

impl ReadPolicy {
    /// The policy a `--read-policy` value names.
    pub fn parse(s: &str) -> Option<ReadPolicy> {
        Some(match s.to_ascii_lowercase().as_str() {
            "master" | "primary" => ReadPolicy::Master,
            "prefer-master" | "prefer-primary" => ReadPolicy::PreferMaster,
            "replica" => ReadPolicy::Replica,
            "prefer-replica" => ReadPolicy::PreferReplica,
            "any" => ReadPolicy::Any,
            _ => return None,
        })
    }
}

/// Whether a request may be answered by a replica: its command (or subcommand) is flagged
/// `readonly` and not `write` in the command table, as a Redis replica with READONLY decides.
pub fn is_read_only(args: &[&[u8]]) -> bool {
    let Some(top) = args.first().and_then(|n| lookup(n)) else {
        return false;
    };
    let spec = if top.is_container() {
        match args.get(1).and_then(|sub| lookup_subcommand(top, sub)) {
            Some(s) => s,
            None => return false,
        }
    } else {
        top
    };
    spec.has(flags::READONLY) && !spec.has(flags::WRITE) && !spec.has(flags::BLOCKING)
}

/// One replica as the topology reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replica {
    /// `host:port`.
    pub node: String,
    /// Its `replication-offset` (0 when the reply has none, as CLUSTER SLOTS).
    pub offset: i64,
}

/// Usable replicas of each primary, least lag first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replicas {
    by_primary: HashMap<String, Vec<Replica>>,
    /// Every node the reply named, whatever its role and health.
    listed: Vec<String>,
}

fn text(f: &Frame) -> Option<String> {
    match f {
        Frame::Bulk(b) | Frame::Simple(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Frame::Verbatim { text, .. } => Some(String::from_utf8_lossy(text).into_owned()),
        _ => None,
    }
}

fn int(f: &Frame) -> Option<i64> {
    match f {
        Frame::Integer(n) => Some(*n),
        other => text(other)?.parse().ok(),
    }
}

fn elements(f: &Frame) -> &[Frame] {
    match f {
        Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => v,
        _ => &[],
    }
}

/// A field of a map, whether RESP3 sent a map or RESP2 a flat array.
fn field<'a>(f: &'a Frame, name: &str) -> Option<&'a Frame> {
    match f {
        Frame::Map(v) => v
            .iter()
            .find(|(k, _)| text(k).as_deref() == Some(name))
            .map(|(_, v)| v),
        Frame::Array(v) => v
            .chunks_exact(2)
            .find(|c| text(&c[0]).as_deref() == Some(name))
            .map(|c| &c[1]),
        _ => None,
    }
}

fn port(p: Option<i64>) -> Option<u16> {
    p.filter(|p| (1..=65535).contains(p)).map(|p| p as u16)
}

fn host(h: String, source_host: &str) -> String {
    if h.is_empty() || h == "?" {
        source_host.to_string()
    } else {
        h
    }
}

impl Replicas {
    /// The replicas of a `CLUSTER SHARDS` reply (`source_host` stands in for an empty
    /// endpoint). Anything unreadable is skipped: the slot map's parse reports errors, and a
    /// replica the proxy cannot read is one it does not use.
    pub fn from_cluster_shards(reply: &Frame, source_host: &str) -> Replicas {
        let mut out = Replicas::default();
        for shard in elements(reply) {
            let nodes = field(shard, "nodes").map(elements).unwrap_or(&[]);
            let mut primary = None;
            let mut replicas = Vec::new();
            for n in nodes {
                let get = |name| field(n, name);
                let Some(p) = port(get("port").or_else(|| get("tls-port")).and_then(int)) else {
                    continue;
                };
                let h = get("endpoint")
                    .and_then(text)
                    .or_else(|| get("ip").and_then(text))
                    .unwrap_or_default();
                let name = node_name(&host(h, source_host), p);
                if !out.listed.contains(&name) {
                    out.listed.push(name.clone());
                }
                match get("role").and_then(text).as_deref() {
                    Some("master") => primary = Some(name),
                    Some("replica") | Some("slave")
                        if get("health").and_then(text).as_deref() == Some("online") =>
                    {
                        let offset = get("replication-offset").and_then(int).unwrap_or(0);
                        replicas.push(Replica { node: name, offset });
                    }
                    _ => {}
                }
            }
            if let Some(p) = primary {
                out.insert(p, replicas);
            }
        }
        out
    }

    /// The replicas of a `CLUSTER SLOTS` reply: each range's entries after the primary. The
    /// reply has no health; a node lists only replicas it does not consider failed.
    pub fn from_cluster_slots(reply: &Frame, source_host: &str) -> Replicas {
        let mut out = Replicas::default();
        let entry = |f: &Frame| {
            let e = elements(f);
            let h = e.first().and_then(text)?;
            let p = port(e.get(1).and_then(int))?;
            Some(node_name(&host(h, source_host), p))
        };
        for range in elements(reply) {
            let r = elements(range);
            let Some(primary) = r.get(2).and_then(entry) else {
                continue;
            };
            if out.by_primary.contains_key(&primary) {
                continue;
            }
            let replicas: Vec<Replica> = r
                .iter()
                .skip(3)
                .filter_map(entry)
                .map(|node| Replica { node, offset: 0 })
                .collect();
            out.listed.push(primary.clone());
            out.listed.extend(replicas.iter().map(|r| r.node.clone()));
            out.insert(primary, replicas);
        }
        out
    }

    fn insert(&mut self, primary: String, mut replicas: Vec<Replica>) {
        // Stable: equal offsets keep the reply's order.
        replicas.sort_by_key(|r| std::cmp::Reverse(r.offset));
        self.by_primary.insert(primary, replicas);
    }

    /// The usable replicas of `primary`, least lag first.
    pub fn of(&self, primary: &str) -> &[Replica] {
        self.by_primary.get(primary).map_or(&[], Vec::as_slice)
    }

    /// Whether the topology named `node` at all (a failed or loading replica too).
    pub fn lists(&self, node: &str) -> bool {
        self.listed.iter().any(|n| n == node)
    }

    /// Whether `node` is a usable replica of some primary.
    pub fn is_replica(&self, node: &str) -> bool {
        self.by_primary
            .values()
            .any(|v| v.iter().any(|r| r.node == node))
    }

    /// The nodes that may answer a read of `slot`, in the order the policy tries them; `turn`
    /// rotates the first choice of the `any` policy. Empty when the slot has no owner, or the
    /// `replica` policy finds no replica.
    pub fn candidates(
        &self,
        policy: ReadPolicy,
        map: &SlotMap,
        slot: u16,
        turn: usize,
    ) -> Vec<String> {
        let Some(primary) = map.owner(slot) else {
            return Vec::new();
        };
        let replicas = self.of(primary).iter().map(|r| r.node.clone());
        let primary = primary.to_string();
        match policy {
            ReadPolicy::Master => vec![primary],
            ReadPolicy::PreferMaster => std::iter::once(primary).chain(replicas).collect(),
            ReadPolicy::Replica => replicas.collect(),
            ReadPolicy::PreferReplica => replicas.chain(std::iter::once(primary)).collect(),
            ReadPolicy::Any => {
                let mut all: Vec<String> = std::iter::once(primary).chain(replicas).collect();
                let n = all.len();
                all.rotate_left(turn % n);
                all
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use darner_resp::Bytes;

    fn bulk(s: &str) -> Frame {
        Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn node(port: i64, role: &str, health: &str, offset: i64) -> Frame {
        Frame::Array(vec![
            bulk("port"),
            Frame::Integer(port),
            bulk("ip"),
            bulk("10.0.0.1"),
            bulk("endpoint"),
            bulk("10.0.0.1"),
            bulk("role"),
            bulk(role),
            bulk("replication-offset"),
            Frame::Integer(offset),
            bulk("health"),
            bulk(health),
        ])
    }

    fn shards() -> Frame {
        Frame::Array(vec![
            Frame::Array(vec![
                bulk("slots"),
                Frame::Array(vec![Frame::Integer(0), Frame::Integer(8191)]),
                bulk("nodes"),
                Frame::Array(vec![
                    node(7003, "replica", "online", 90),
                    node(7000, "master", "online", 100),
                    node(7004, "replica", "online", 100),
                    node(7005, "replica", "failed", 100),
                    node(7006, "replica", "loading", 0),
                ]),
            ]),
            Frame::Array(vec![
                bulk("slots"),
                Frame::Array(vec![Frame::Integer(8192), Frame::Integer(16383)]),
                bulk("nodes"),
                Frame::Array(vec![node(7001, "master", "online", 5)]),
            ]),
        ])
    }

    #[test]
    fn shards_keep_online_replicas_least_lag_first() {
        let reply = shards();
        let r = Replicas::from_cluster_shards(&reply, "x");
        let nodes: Vec<&str> = r.of("10.0.0.1:7000").iter().map(|r| &*r.node).collect();
        assert_eq!(nodes, ["10.0.0.1:7004", "10.0.0.1:7003"]);
        assert!(r.of("10.0.0.1:7001").is_empty());
        assert!(r.is_replica("10.0.0.1:7003"));
        assert!(!r.is_replica("10.0.0.1:7005"));
        assert!(!r.is_replica("10.0.0.1:7000"));
        assert!(r.lists("10.0.0.1:7005") && r.lists("10.0.0.1:7006") && r.lists("10.0.0.1:7001"));
        assert!(!r.lists("10.0.0.1:7009"));
    }

    #[test]
    fn policies_order_the_candidates() {
        let reply = shards();
        let r = Replicas::from_cluster_shards(&reply, "x");
        let map = SlotMap::from_cluster_shards(&reply, "x").unwrap();
        let (p, r1, r2) = ("10.0.0.1:7000", "10.0.0.1:7004", "10.0.0.1:7003");
        let c = |policy, slot, turn| r.candidates(policy, &map, slot, turn);
        assert_eq!(c(ReadPolicy::Master, 5, 0), [p]);
        assert_eq!(c(ReadPolicy::PreferMaster, 5, 0), [p, r1, r2]);
        assert_eq!(c(ReadPolicy::Replica, 5, 0), [r1, r2]);
        assert_eq!(c(ReadPolicy::PreferReplica, 5, 0), [r1, r2, p]);
        assert_eq!(c(ReadPolicy::Any, 5, 0), [p, r1, r2]);
        assert_eq!(c(ReadPolicy::Any, 5, 1), [r1, r2, p]);
        assert_eq!(c(ReadPolicy::Any, 5, 5), [r2, p, r1]);
        // A shard without replicas.
        assert!(c(ReadPolicy::Replica, 9000, 0).is_empty());
        assert_eq!(c(ReadPolicy::PreferReplica, 9000, 0), ["10.0.0.1:7001"]);
        assert_eq!(c(ReadPolicy::Any, 9000, 7), ["10.0.0.1:7001"]);
        // No owner.
        assert!(r
            .candidates(ReadPolicy::Any, &SlotMap::default(), 1, 0)
            .is_empty());
    }

    #[test]
    fn cluster_slots_replicas() {
        let entry = |port| Frame::Array(vec![bulk(""), Frame::Integer(port), bulk("id")]);
        let reply = Frame::Array(vec![Frame::Array(vec![
            Frame::Integer(0),
            Frame::Integer(16383),
            entry(7000),
            entry(7003),
        ])]);
        let r = Replicas::from_cluster_slots(&reply, "h");
        assert_eq!(
            r.of("h:7000"),
            [Replica {
                node: "h:7003".into(),
                offset: 0
            }]
        );
    }

    #[test]
    fn garbage_gives_no_replicas() {
        for bad in [
            Frame::Integer(1),
            Frame::Array(vec![Frame::Integer(1)]),
            Frame::Array(vec![Frame::Array(vec![bulk("nodes"), Frame::Integer(3)])]),
        ] {
            assert_eq!(
                Replicas::from_cluster_shards(&bad, "h"),
                Replicas::default()
            );
            assert_eq!(Replicas::from_cluster_slots(&bad, "h"), Replicas::default());
        }
    }

    #[test]
    fn read_only_from_the_table() {
        let ro = |s: &str| is_read_only(&s.split(' ').map(str::as_bytes).collect::<Vec<_>>());
        assert!(ro("GET k"));
        assert!(ro("MGET a b"));
        assert!(ro("HGETALL h"));
        assert!(ro("OBJECT ENCODING k"));
        assert!(!ro("SET k v"));
        assert!(!ro("INCR k"));
        assert!(!ro("EVAL s 0"));
        assert!(!ro("BLPOP k 0"));
        assert!(!ro("OBJECT"));
        assert!(!ro("NOSUCH k"));
        assert!(!ro(""));
    }
}
