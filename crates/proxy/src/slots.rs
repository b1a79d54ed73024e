//! The slot map: which primary owns each of the 16384 hash slots, read from a backend's
//! `CLUSTER SLOTS` or `CLUSTER SHARDS` reply.
//!
//! A node is named by its `host:port` text, the same text a `-MOVED 3999 127.0.0.1:7001`
//! redirect carries, so a redirect can patch the map without a lookup table between the two
//! spellings. The map is a flat array of node indices (two bytes a slot, 32 KiB) rather than a
//! list of ranges: a lookup is one load on every request, and a MOVED patches one slot in place
//! while the full refresh it triggers is on its way.

use darner_commands::SLOTS;
use darner_resp::Frame;

/// A slot with no owner in [`SlotMap::owner_index`].
const UNASSIGNED: u16 = u16::MAX;

/// Slot → primary `host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotMap {
    nodes: Vec<String>,
    owner: Box<[u16]>,
}

/// Why a topology reply could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyError(pub String);

impl std::fmt::Display for TopologyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Default for SlotMap {
    fn default() -> Self {
        SlotMap {
            nodes: Vec::new(),
            owner: vec![UNASSIGNED; usize::from(SLOTS)].into_boxed_slice(),
        }
    }
}

fn err<T>(what: &str) -> Result<T, TopologyError> {
    Err(TopologyError(what.to_string()))
}

fn as_int(f: &Frame) -> Option<i64> {
    match f {
        Frame::Integer(n) => Some(*n),
        Frame::Bulk(b) | Frame::Simple(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn as_text(f: &Frame) -> Option<String> {
    match f {
        Frame::Bulk(b) | Frame::Simple(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Frame::Verbatim { text, .. } => Some(String::from_utf8_lossy(text).into_owned()),
        _ => None,
    }
}

fn elements(f: &Frame) -> Option<&[Frame]> {
    match f {
        Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => Some(v),
        _ => None,
    }
}

/// The pairs of a map, whether RESP3 sent it as a map or RESP2 as a flat array.
fn pairs(f: &Frame) -> Option<Vec<(&Frame, &Frame)>> {
    match f {
        Frame::Map(v) => Some(v.iter().map(|(k, v)| (k, v)).collect()),
        Frame::Array(v) if v.len() % 2 == 0 => {
            Some(v.chunks_exact(2).map(|c| (&c[0], &c[1])).collect())
        }
        _ => None,
    }
}

/// `host:port`, with an IPv6 host in brackets so that the text splits at its last colon and
/// parses as a socket address.
pub fn node_name(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A slot number from a reply, in range.
fn slot_of(f: &Frame) -> Result<u16, TopologyError> {
    match as_int(f) {
        Some(n) if (0..i64::from(SLOTS)).contains(&n) => Ok(n as u16),
        _ => err("slot out of range"),
    }
}

/// A node's endpoint: an empty or `?` endpoint means "the node you asked", as Redis writes it
/// when the node does not know its own address.
fn endpoint(host: &str, source_host: &str) -> String {
    if host.is_empty() || host == "?" {
        source_host.to_string()
    } else {
        host.to_string()
    }
}

impl SlotMap {
    /// The map of a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id, ...], replicas...], ...]`.
    /// `source_host` stands in for an empty endpoint.
    pub fn from_cluster_slots(reply: &Frame, source_host: &str) -> Result<SlotMap, TopologyError> {
        if let Frame::Error(e) = reply {
            return err(&String::from_utf8_lossy(e));
        }
        let ranges = elements(reply).ok_or_else(|| TopologyError("not an array".into()))?;
        let mut map = SlotMap::default();
        for range in ranges {
            let r = elements(range).ok_or_else(|| TopologyError("range not an array".into()))?;
            if r.len() < 3 {
                return err("short slot range");
            }
            let (start, end) = (slot_of(&r[0])?, slot_of(&r[1])?);
            let primary = elements(&r[2]).ok_or_else(|| TopologyError("bad node".into()))?;
            if primary.len() < 2 {
                return err("short node entry");
            }
            let host = as_text(&primary[0]).ok_or_else(|| TopologyError("bad host".into()))?;
            let port = match as_int(&primary[1]) {
                Some(p) if (1..=65535).contains(&p) => p as u16,
                _ => return err("bad port"),
            };
            map.assign(start, end, &node_name(&endpoint(&host, source_host), port));
        }
        Ok(map)
    }

    /// The map of a `CLUSTER SHARDS` reply: one map per shard with `slots` (a flat list of
    /// start/end pairs) and `nodes` (maps with `ip`/`endpoint`, `port`, `role`, `health`). The
    /// primary is the node whose role is `master`.
    pub fn from_cluster_shards(reply: &Frame, source_host: &str) -> Result<SlotMap, TopologyError> {
        if let Frame::Error(e) = reply {
            return err(&String::from_utf8_lossy(e));
        }
        let shards = elements(reply).ok_or_else(|| TopologyError("not an array".into()))?;
        let mut map = SlotMap::default();
        for shard in shards {
            let fields = pairs(shard).ok_or_else(|| TopologyError("shard not a map".into()))?;
            let field = |name: &str| {
                fields
                    .iter()
                    .find(|(k, _)| as_text(k).as_deref() == Some(name))
                    .map(|(_, v)| *v)
            };
            let slots = field("slots").and_then(elements).unwrap_or(&[]);
            let nodes = field("nodes").and_then(elements).unwrap_or(&[]);
            let mut primary = None;
            for node in nodes {
                let nf = pairs(node).ok_or_else(|| TopologyError("node not a map".into()))?;
                let get = |name: &str| {
                    nf.iter()
                        .find(|(k, _)| as_text(k).as_deref() == Some(name))
                        .map(|(_, v)| *v)
                };
                if get("role").and_then(as_text).as_deref() != Some("master") {
                    continue;
                }
                let host = get("endpoint")
                    .and_then(as_text)
                    .or_else(|| get("ip").and_then(as_text))
                    .unwrap_or_default();
                let port = get("port")
                    .or_else(|| get("tls-port"))
                    .and_then(as_int)
                    .filter(|p| (1..=65535).contains(p))
                    .ok_or_else(|| TopologyError("bad port".into()))?;
                primary = Some(node_name(&endpoint(&host, source_host), port as u16));
            }
            let Some(primary) = primary else { continue };
            if slots.len() % 2 != 0 {
                return err("odd slot list");
            }
            for pair in slots.chunks_exact(2) {
                map.assign(slot_of(&pair[0])?, slot_of(&pair[1])?, &primary);
            }
        }
        Ok(map)
    }

    fn node_index(&mut self, node: &str) -> u16 {
        match self.nodes.iter().position(|n| n == node) {
            Some(i) => i as u16,
            None => {
                self.nodes.push(node.to_string());
                (self.nodes.len() - 1) as u16
            }
        }
    }

    /// Gives slots `start..=end` to `node` (nothing when `start > end`).
    pub fn assign(&mut self, start: u16, end: u16, node: &str) {
        if start > end || end >= SLOTS {
            return;
        }
        let i = self.node_index(node);
        self.owner[usize::from(start)..=usize::from(end)].fill(i);
    }

    /// The primary that owns `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<&str> {
        let i = *self.owner.get(usize::from(slot))?;
        self.nodes.get(usize::from(i)).map(String::as_str)
    }

    /// Every primary that owns at least one slot, in the order first seen.
    pub fn primaries(&self) -> Vec<&str> {
        let mut used = vec![false; self.nodes.len()];
        for &i in self.owner.iter() {
            if let Some(u) = used.get_mut(usize::from(i)) {
                *u = true;
            }
        }
        self.nodes
            .iter()
            .zip(used)
            .filter(|(_, u)| *u)
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// Whether every slot has an owner.
    pub fn is_complete(&self) -> bool {
        self.owner.iter().all(|&i| i != UNASSIGNED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use darner_resp::Bytes;

    fn bulk(s: &str) -> Frame {
        Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn node(host: &str, port: i64) -> Frame {
        Frame::Array(vec![
            bulk(host),
            Frame::Integer(port),
            bulk("id"),
            Frame::Array(vec![]),
        ])
    }

    #[test]
    fn cluster_slots_reply() {
        let reply = Frame::Array(vec![
            Frame::Array(vec![
                Frame::Integer(0),
                Frame::Integer(5460),
                node("10.0.0.1", 7000),
            ]),
            Frame::Array(vec![
                Frame::Integer(5461),
                Frame::Integer(16383),
                node("", 7001),
                node("10.0.0.9", 7009),
            ]),
        ]);
        let map = SlotMap::from_cluster_slots(&reply, "10.0.0.2").unwrap();
        assert_eq!(map.owner(0), Some("10.0.0.1:7000"));
        assert_eq!(map.owner(5460), Some("10.0.0.1:7000"));
        assert_eq!(map.owner(5461), Some("10.0.0.2:7001"));
        assert_eq!(map.owner(16383), Some("10.0.0.2:7001"));
        assert!(map.is_complete());
        assert_eq!(map.primaries(), vec!["10.0.0.1:7000", "10.0.0.2:7001"]);
    }

    #[test]
    fn cluster_slots_rejects_garbage() {
        for bad in [
            Frame::Integer(3),
            Frame::Array(vec![Frame::Integer(1)]),
            Frame::Array(vec![Frame::Array(vec![
                Frame::Integer(0),
                Frame::Integer(16384),
                node("h", 1),
            ])]),
            Frame::Array(vec![Frame::Array(vec![
                Frame::Integer(0),
                Frame::Integer(1),
                node("h", 70000),
            ])]),
            Frame::Error(Bytes::from_static(
                b"ERR This instance has cluster support disabled",
            )),
        ] {
            assert!(SlotMap::from_cluster_slots(&bad, "h").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn cluster_shards_reply_resp2_and_resp3() {
        let node2 = |role: &str, port: i64| {
            Frame::Array(vec![
                bulk("id"),
                bulk("abc"),
                bulk("port"),
                Frame::Integer(port),
                bulk("ip"),
                bulk("127.0.0.1"),
                bulk("endpoint"),
                bulk("127.0.0.1"),
                bulk("role"),
                bulk(role),
            ])
        };
        let shard = Frame::Array(vec![
            bulk("slots"),
            Frame::Array(vec![
                Frame::Integer(0),
                Frame::Integer(99),
                Frame::Integer(200),
                Frame::Integer(16383),
            ]),
            bulk("nodes"),
            Frame::Array(vec![node2("replica", 7004), node2("master", 7001)]),
        ]);
        let map = SlotMap::from_cluster_shards(&Frame::Array(vec![shard.clone()]), "x").unwrap();
        assert_eq!(map.owner(50), Some("127.0.0.1:7001"));
        assert_eq!(map.owner(150), None);
        assert_eq!(map.owner(300), Some("127.0.0.1:7001"));
        assert!(!map.is_complete());
        // The same as RESP3 maps.
        let to_map = |f: &Frame| match f {
            Frame::Array(v) => Frame::Map(
                v.chunks_exact(2)
                    .map(|c| (c[0].clone(), c[1].clone()))
                    .collect(),
            ),
            _ => unreachable!(),
        };
        let Frame::Array(fields) = &shard else {
            unreachable!()
        };
        let Frame::Array(nodes) = &fields[3] else {
            unreachable!()
        };
        let shard3 = Frame::Map(vec![
            (fields[0].clone(), fields[1].clone()),
            (
                fields[2].clone(),
                Frame::Array(nodes.iter().map(to_map).collect()),
            ),
        ]);
        let map3 = SlotMap::from_cluster_shards(&Frame::Array(vec![shard3]), "x").unwrap();
        assert_eq!(map, map3);
    }

    proptest::proptest! {
        /// Ranges given to nodes in any order, read back from a CLUSTER SLOTS and from a
        /// CLUSTER SHARDS reply, own exactly the slots a plain per-slot model says.
        #[test]
        fn replies_build_the_model(
            ranges in proptest::collection::vec((0u16..SLOTS, 0u16..300, 0u16..4), 0..12)
        ) {
            let mut model = vec![None; usize::from(SLOTS)];
            let mut slots_reply = Vec::new();
            let mut shards: Vec<Vec<Frame>> = vec![Vec::new(); 4];
            for &(start, len, n) in &ranges {
                let end = start.saturating_add(len).min(SLOTS - 1);
                // Later ranges win, as they do in the map: keep the model and replies disjoint.
                for s in start..=end {
                    model[usize::from(s)] = Some(n);
                }
            }
            // Rebuild disjoint ranges from the model, as a real cluster reports them.
            let mut s = 0usize;
            while s < model.len() {
                let Some(n) = model[s] else { s += 1; continue };
                let mut e = s;
                while e + 1 < model.len() && model[e + 1] == Some(n) {
                    e += 1;
                }
                slots_reply.push(Frame::Array(vec![
                    Frame::Integer(s as i64),
                    Frame::Integer(e as i64),
                    node("10.0.0.1", 7000 + i64::from(n)),
                ]));
                shards[usize::from(n)].extend([Frame::Integer(s as i64), Frame::Integer(e as i64)]);
                s = e + 1;
            }
            let map = SlotMap::from_cluster_slots(&Frame::Array(slots_reply), "x").unwrap();
            let shards_reply = Frame::Array(shards.into_iter().enumerate().map(|(n, slots)| {
                Frame::Map(vec![
                    (bulk("slots"), Frame::Array(slots)),
                    (bulk("nodes"), Frame::Array(vec![Frame::Map(vec![
                        (bulk("port"), Frame::Integer(7000 + n as i64)),
                        (bulk("ip"), bulk("10.0.0.1")),
                        (bulk("role"), bulk("master")),
                    ])])),
                ])
            }).collect());
            let from_shards = SlotMap::from_cluster_shards(&shards_reply, "x").unwrap();
            for (slot, want) in model.iter().enumerate() {
                let want = want.map(|n| format!("10.0.0.1:{}", 7000 + n));
                proptest::prop_assert_eq!(map.owner(slot as u16).map(String::from), want.clone());
                proptest::prop_assert_eq!(from_shards.owner(slot as u16).map(String::from), want);
            }
            proptest::prop_assert_eq!(map.is_complete(), model.iter().all(Option::is_some));
        }
    }

    #[test]
    fn ipv6_names_keep_brackets() {
        assert_eq!(node_name("::1", 7000), "[::1]:7000");
        assert_eq!(node_name("h", 7000), "h:7000");
    }
}
