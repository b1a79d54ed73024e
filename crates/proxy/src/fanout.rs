//! Requests answered from every primary, or from the proxy itself, beyond what the command
//! tips give routing (KEYS, DBSIZE, FLUSHALL and FLUSHDB go to every primary there, merged by
//! their response policies): SCAN, RANDOMKEY and INFO, and [`plan`], the entry point that puts
//! the authentication gate and these in front of [`route::plan`].
//!
//! **SCAN.** The proxy's cursor names a primary and that primary's cursor:
//! `node_cursor << 10 | node_index`, the primaries taken in address order. A scan walks the
//! first primary to its end, then the next from 0, and ends (cursor 0) after the last, so a
//! full iteration returns every key that exists throughout it, as SCAN promises on one node,
//! as long as the set of primaries does not change during it (a key whose slot moves to a
//! primary already walked may be missed, one moving the other way seen twice: a cluster
//! client's SCAN has the same limits). MATCH, COUNT and TYPE go to the node as given. Redis
//! cursors are below the node's largest hash table size, so 54 bits leave room; a larger one
//! is refused rather than truncated.
//!
//! **RANDOMKEY** is asked of every primary, the replies read from a random one on: the first
//! key found is the answer, and nil only when every primary is empty, as on one node.
//!
//! **INFO** is the proxy's own sections (server, clients, stats, proxy, commandstats; see
//! [`metrics`]) and the keyspace section added up over the primaries.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use darner_resp::{parse_i64_strict, Bytes, Frame};

use crate::auth::{self, Verdict};
use crate::merge::Merge;
use crate::metrics::{self, InfoContext, Registry, Sections};
use crate::route::{self, encode_request, error, reply, Identity, Part, Plan, Session, Target};
use crate::slots::SlotMap;

/// Bits of the proxy's SCAN cursor that name the primary.
const NODE_BITS: u32 = 10;
/// Most primaries a SCAN cursor can name.
pub const MAX_SCAN_NODES: usize = 1 << NODE_BITS;

/// What the proxy knows of itself when planning: its password, its counters.
#[derive(Clone, Debug)]
pub struct Admin {
    /// `requirepass`: clients must AUTH with it.
    pub requirepass: Option<Vec<u8>>,
    /// The counters INFO shows.
    pub registry: Arc<Registry>,
    /// What INFO shows besides them.
    pub info: InfoContext,
}

/// The plan for one request: the authentication gate, then SCAN,
/// RANDOMKEY and INFO, then routing.
pub fn plan(args: &[&[u8]], s: &mut Session, me: &Identity, map: &SlotMap, admin: &Admin) -> Plan {
    if args.is_empty() {
        // Routing answers it (the parser does not make one, but nothing here relies on that).
        return route::plan(args, s, me, map);
    }
    match auth::check(args, s, admin.requirepass.as_deref(), me, map) {
        Verdict::Reply(p) => return p,
        Verdict::Hello(rest) => return route::plan(&rest, s, me, map),
        Verdict::Pass => {}
    }
    // In a transaction these go where routing sends them (INFO to one node; SCAN and
    // RANDOMKEY refused), since a transaction runs on one node.
    if !s.tx.multi {
        let name = args[0];
        if name.eq_ignore_ascii_case(b"scan") {
            return scan(args, s, map);
        }
        if name.eq_ignore_ascii_case(b"randomkey") {
            return randomkey(args, s, map);
        }
        if name.eq_ignore_ascii_case(b"info") {
            return info(args, s, map, admin);
        }
    }
    route::plan(args, s, me, map)
}

/// The primaries in a fixed order (by address): a SCAN cursor's node index must mean the same
/// node on every thread and after every topology refresh.
fn sorted_primaries(map: &SlotMap) -> Vec<String> {
    let mut p: Vec<String> = map.primaries().into_iter().map(String::from).collect();
    p.sort();
    p
}

/// The proxy cursor for `node_cursor` on primary `index`, `None` if it does not fit.
pub fn encode_cursor(index: usize, node_cursor: u64) -> Option<u64> {
    if index >= MAX_SCAN_NODES || node_cursor >> (64 - NODE_BITS) != 0 {
        return None;
    }
    Some(node_cursor << NODE_BITS | index as u64)
}

/// The primary index and that primary's cursor a proxy cursor names.
pub fn decode_cursor(cursor: u64) -> (usize, u64) {
    (
        (cursor & (MAX_SCAN_NODES as u64 - 1)) as usize,
        cursor >> NODE_BITS,
    )
}

/// A cursor as Redis reads one, with C's strtoul: decimal digits after an optional sign (a
/// minus wraps around), the empty string being 0; anything else, or more than 64 bits, is
/// `invalid cursor`.
fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let (neg, digits) = match arg.first() {
        None => return Some(0),
        Some(b'-') => (true, &arg[1..]),
        Some(b'+') => (false, &arg[1..]),
        Some(_) => (false, arg),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

fn scan(args: &[&[u8]], s: &Session, map: &SlotMap) -> Plan {
    if args.len() < 2 {
        return error(s, "ERR wrong number of arguments for 'scan' command");
    }
    let nodes = sorted_primaries(map);
    if nodes.is_empty() {
        return error(s, "CLUSTERDOWN Hash slot not served");
    }
    if nodes.len() > MAX_SCAN_NODES {
        return error(
            s,
            "ERR SCAN through darner proxy covers at most 1024 primaries",
        );
    }
    let Some(cursor) = parse_cursor(args[1]) else {
        return error(s, "ERR invalid cursor");
    };
    let (index, node_cursor) = decode_cursor(cursor);
    let Some(node) = nodes.get(index) else {
        return error(s, "ERR invalid cursor");
    };
    let node_cursor = node_cursor.to_string();
    let mut forwarded: Vec<&[u8]> = Vec::with_capacity(args.len());
    forwarded.push(args[0]);
    forwarded.push(node_cursor.as_bytes());
    forwarded.extend_from_slice(&args[2..]);
    Plan::Forward {
        parts: vec![Part {
            target: Target::Node(node.clone()),
            payload: encode_request(&forwarded),
        }],
        merge: Merge::Scan {
            index,
            nodes: nodes.len(),
        },
    }
}

/// A node's SCAN reply with the proxy's cursor in place of the node's.
pub fn merge_scan(reply: Frame, index: usize, nodes: usize) -> Frame {
    let bad = || Frame::Error(Bytes::from_static(b"ERR upstream reply not a SCAN reply"));
    let Frame::Array(mut v) = reply else {
        return bad();
    };
    if v.len() != 2 {
        return bad();
    }
    let node_cursor = match &v[0] {
        Frame::Bulk(b) | Frame::Simple(b) => match parse_cursor(b) {
            Some(c) => c,
            None => return bad(),
        },
        _ => return bad(),
    };
    let next = if node_cursor == 0 {
        // This primary is done: the next one from its start, or the end.
        if index + 1 < nodes {
            encode_cursor(index + 1, 0)
        } else {
            Some(0)
        }
    } else {
        encode_cursor(index, node_cursor)
    };
    let Some(next) = next else {
        return Frame::Error(Bytes::from_static(
            b"ERR upstream SCAN cursor too large for darner proxy",
        ));
    };
    v[0] = Frame::Bulk(Bytes::from(next.to_string()));
    Frame::Array(v)
}

fn random_u64() -> u64 {
    // Each RandomState has fresh keys: enough randomness to pick a node, with no dependency.
    RandomState::new().build_hasher().finish()
}

fn randomkey(args: &[&[u8]], s: &Session, map: &SlotMap) -> Plan {
    if args.len() != 1 {
        return error(s, "ERR wrong number of arguments for 'randomkey' command");
    }
    let mut nodes = sorted_primaries(map);
    if nodes.is_empty() {
        return error(s, "CLUSTERDOWN Hash slot not served");
    }
    let start = (random_u64() % nodes.len() as u64) as usize;
    nodes.rotate_left(start);
    let payload = encode_request(args);
    Plan::Forward {
        parts: nodes
            .into_iter()
            .map(|n| Part {
                target: Target::Node(n),
                payload: payload.clone(),
            })
            .collect(),
        merge: Merge::FirstNonNull,
    }
}

/// The first part's reply that is not nil; nil (the first part's kind of it) when all are.
pub fn merge_first_non_null(parts: Vec<Frame>) -> Frame {
    let is_null = |f: &Frame| matches!(f, Frame::Null | Frame::NullBulk);
    let mut first = None;
    for p in parts {
        if !is_null(&p) {
            return p;
        }
        first.get_or_insert(p);
    }
    first.unwrap_or(Frame::NullBulk)
}

fn info(args: &[&[u8]], s: &Session, map: &SlotMap, admin: &Admin) -> Plan {
    let sections = Sections::parse(&args[1..]);
    let head = metrics::info_sections(&admin.registry, &admin.info, &sections);
    if !sections.has("keyspace") {
        return reply(s, |w| w.verbatim(b"txt", head.as_bytes()));
    }
    let nodes = sorted_primaries(map);
    if nodes.is_empty() {
        let text = join_keyspace(&head, Vec::new());
        return reply(s, |w| w.verbatim(b"txt", text.as_bytes()));
    }
    let payload = encode_request(&["INFO", "keyspace"]);
    Plan::Forward {
        parts: nodes
            .into_iter()
            .map(|n| Part {
                target: Target::Node(n),
                payload: payload.clone(),
            })
            .collect(),
        merge: Merge::Info {
            head,
            resp3: s.resp3,
        },
    }
}

/// `head` and a keyspace section of `dbs` (`dbN` and its fields, in order).
fn join_keyspace(head: &str, dbs: Vec<(String, Vec<(String, i64)>)>) -> String {
    let mut ks = String::from("# Keyspace\r\n");
    for (db, fields) in dbs {
        let fields: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        ks.push_str(&format!("{db}:{}\r\n", fields.join(",")));
    }
    if head.is_empty() {
        ks
    } else {
        format!("{head}\r\n{ks}")
    }
}

/// The nodes' `INFO keyspace` replies added up: every field summed per database, except
/// `avg_ttl`, averaged over the keys with an expiry (the nodes' averages weighted by their
/// `expires`).
pub fn merge_info(parts: Vec<Frame>, head: &str, resp3: bool) -> Frame {
    let mut dbs: Vec<(String, Vec<(String, i64)>)> = Vec::new();
    // Per database: sum of avg_ttl × expires, for the weighted average.
    let mut ttl_weight: Vec<i128> = Vec::new();
    for p in parts {
        let text = match p {
            Frame::Bulk(b) => b,
            Frame::Verbatim { text, .. } => text,
            _ => return Frame::Error(Bytes::from_static(b"ERR upstream reply not INFO text")),
        };
        for line in text.split(|&c| c == b'\n') {
            let line = String::from_utf8_lossy(line);
            let line = line.trim_end_matches('\r');
            let Some((db, rest)) = line.split_once(':') else {
                continue;
            };
            if !db.starts_with("db") {
                continue;
            }
            let fields: Vec<(&str, i64)> = rest
                .split(',')
                .filter_map(|f| f.split_once('='))
                .filter_map(|(k, v)| parse_i64_strict(v.as_bytes()).map(|v| (k, v)))
                .collect();
            let expires = fields
                .iter()
                .find(|(k, _)| *k == "expires")
                .map_or(0, |f| f.1);
            let i = match dbs.iter().position(|(d, _)| d == db) {
                Some(i) => i,
                None => {
                    dbs.push((db.to_string(), Vec::new()));
                    ttl_weight.push(0);
                    dbs.len() - 1
                }
            };
            for (k, v) in fields {
                if k == "avg_ttl" {
                    ttl_weight[i] += i128::from(v) * i128::from(expires);
                }
                let entry = &mut dbs[i].1;
                match entry.iter_mut().find(|(name, _)| name == k) {
                    Some((_, sum)) => *sum = sum.saturating_add(v),
                    None => entry.push((k.to_string(), v)),
                }
            }
        }
    }
    for (i, (_, fields)) in dbs.iter_mut().enumerate() {
        let expires = fields
            .iter()
            .find(|(k, _)| k == "expires")
            .map_or(0, |f| f.1);
        if let Some((_, ttl)) = fields.iter_mut().find(|(k, _)| k == "avg_ttl") {
            *ttl = if expires > 0 {
                (ttl_weight[i] / i128::from(expires)) as i64
            } else {
                0
            };
        }
    }
    dbs.sort_by_key(|(db, _)| db[2..].parse::<u64>().unwrap_or(u64::MAX));
    let text = join_keyspace(head, dbs);
    if resp3 {
        Frame::Verbatim {
            format: *b"txt",
            text: Bytes::from(text),
        }
    } else {
        Frame::Bulk(Bytes::from(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bulk(s: &str) -> Frame {
        Frame::Bulk(Bytes::from(s.to_string()))
    }

    #[test]
    fn scan_cursor_walks_the_nodes() {
        let keys = Frame::Array(vec![bulk("k")]);
        let got = merge_scan(Frame::Array(vec![bulk("0"), keys.clone()]), 0, 3);
        assert_eq!(got, Frame::Array(vec![bulk("1"), keys.clone()]));
        let got = merge_scan(Frame::Array(vec![bulk("0"), keys.clone()]), 2, 3);
        assert_eq!(got, Frame::Array(vec![bulk("0"), keys.clone()]));
        let got = merge_scan(Frame::Array(vec![bulk("5"), keys.clone()]), 2, 3);
        assert_eq!(got, Frame::Array(vec![bulk("5122"), keys.clone()]));
        assert_eq!(decode_cursor(5122), (2, 5));
        assert!(matches!(
            merge_scan(Frame::Array(vec![bulk(&u64::MAX.to_string()), keys]), 0, 1),
            Frame::Error(_)
        ));
        assert!(matches!(merge_scan(bulk("x"), 0, 1), Frame::Error(_)));
    }

    #[test]
    fn an_empty_request_is_refused_not_a_panic() {
        let admin = Admin {
            requirepass: Some(b"x".to_vec()),
            registry: Registry::new(1),
            info: InfoContext {
                threads: 1,
                maxclients: 1,
                redis_version: "7.4.0",
            },
        };
        let me = Identity {
            host: String::new(),
            port: 0,
            node_id: String::new(),
        };
        let p = plan(
            &[],
            &mut Session::default(),
            &me,
            &SlotMap::default(),
            &admin,
        );
        assert!(matches!(p, Plan::Reply { ref bytes, .. } if bytes.starts_with(b"-ERR")));
    }

    #[test]
    fn cursors_read_as_strtoul() {
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"+1025"), Some(1025));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        for bad in [&b"-"[..], b"1 ", b" 1", b"x", b"1x"] {
            assert_eq!(parse_cursor(bad), None, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn cursors_round_trip(index in 0usize..MAX_SCAN_NODES, c in 0u64..(1 << 54)) {
            let enc = encode_cursor(index, c).unwrap();
            prop_assert_eq!(decode_cursor(enc), (index, c));
        }
    }

    #[test]
    fn random_key_first_found() {
        assert_eq!(
            merge_first_non_null(vec![Frame::NullBulk, bulk("a"), bulk("b")]),
            bulk("a")
        );
        assert_eq!(
            merge_first_non_null(vec![Frame::Null, Frame::Null]),
            Frame::Null
        );
    }

    #[test]
    fn keyspace_adds_up() {
        let parts = vec![
            bulk("# Keyspace\r\ndb0:keys=3,expires=1,avg_ttl=1000\r\n"),
            bulk("# Keyspace\r\n"),
            Frame::Verbatim {
                format: *b"txt",
                text: Bytes::from_static(b"# Keyspace\r\ndb0:keys=2,expires=3,avg_ttl=2000\r\n"),
            },
        ];
        let got = merge_info(parts, "# Server\r\nx:1\r\n", false);
        assert_eq!(
            got,
            bulk("# Server\r\nx:1\r\n\r\n# Keyspace\r\ndb0:keys=5,expires=4,avg_ttl=1750\r\n")
        );
    }
}
