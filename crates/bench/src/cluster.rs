//! Redis Cluster mode (`--cluster`), sans-I/O: the slot map read from a `CLUSTER SLOTS` reply,
//! and the node each request goes to.
//!
//! The map is read once, at start, from the node `--host/--port` names. A `MOVED` or `ASK`
//! reply during the run (a resharding, a failover) is counted as an error and not followed:
//! a benchmark whose topology moves under it measures something else, and the error count says
//! so. Only single-key commands are sent in this mode ([`crate::config`] refuses the others),
//! so each request has exactly one owner.

use darner_commands::{key_slot, SLOTS};
use darner_resp::Frame;

/// `CLUSTER SLOTS`, as a client sends it.
pub const CLUSTER_SLOTS: &[u8] = b"*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";

/// Which primary serves each slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotMap {
    /// The primaries, each once, in the order of their first range in the reply.
    pub nodes: Vec<(String, u16)>,
    /// Per slot, an index into `nodes`.
    owner: Vec<u16>,
}

impl SlotMap {
    /// The index in [`SlotMap::nodes`] of the primary that serves `slot`.
    pub fn node_of_slot(&self, slot: u16) -> usize {
        self.owner[(slot & (SLOTS - 1)) as usize] as usize
    }

    /// The index of the primary that serves `key`.
    pub fn node_of_key(&self, key: &[u8]) -> usize {
        self.node_of_slot(key_slot(key))
    }

    /// Reads a complete `CLUSTER SLOTS` reply (RESP2). `seed_host` stands for a primary whose
    /// address is empty or `?` (Redis's "unknown endpoint", meaning: the address this reply
    /// came from). Every slot must be served: a request for an unserved slot could go nowhere.
    pub fn parse(reply: &[u8], seed_host: &str) -> Result<SlotMap, String> {
        // The protocol crate's decoder (fuzzed, depth- and length-bounded): the reply is
        // hostile input like any other.
        let (value, used) = darner_resp::decode(reply, &darner_resp::Limits::default())
            .map_err(|e| format!("CLUSTER SLOTS: {e}"))?
            .ok_or("CLUSTER SLOTS: reply cut short")?;
        if used != reply.len() {
            return Err("CLUSTER SLOTS: bytes after the reply".into());
        }
        let ranges = match value {
            Frame::Array(r) => r,
            Frame::Error(e) => {
                return Err(format!("CLUSTER SLOTS: {}", String::from_utf8_lossy(&e)))
            }
            _ => return Err("CLUSTER SLOTS: the reply is not an array".into()),
        };
        const NONE: u16 = u16::MAX;
        let mut owner = vec![NONE; SLOTS as usize];
        let mut nodes: Vec<(String, u16)> = Vec::new();
        for range in &ranges {
            let Frame::Array(fields) = range else {
                return Err("CLUSTER SLOTS: a range is not an array".into());
            };
            let (start, end, primary) = match fields.as_slice() {
                [Frame::Integer(s), Frame::Integer(e), Frame::Array(p), ..] => (*s, *e, p),
                _ => {
                    return Err(
                        "CLUSTER SLOTS: a range is not [start, end, [host, port ..] ..]".into(),
                    )
                }
            };
            if !(0..SLOTS as i64).contains(&start) || !(start..SLOTS as i64).contains(&end) {
                return Err(format!("CLUSTER SLOTS: bad slot range {start}-{end}"));
            }
            let (host, port) = match primary.as_slice() {
                [Frame::Bulk(h), Frame::Integer(p), ..] => (h, *p),
                _ => return Err("CLUSTER SLOTS: a primary is not [host, port ..]".into()),
            };
            let port = u16::try_from(port)
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| format!("CLUSTER SLOTS: bad port {port}"))?;
            let host = match std::str::from_utf8(host) {
                Ok("") | Ok("?") => seed_host.to_string(),
                Ok(h) => h.to_string(),
                Err(_) => return Err("CLUSTER SLOTS: a host is not UTF-8".into()),
            };
            let index = match nodes.iter().position(|n| n.0 == host && n.1 == port) {
                Some(i) => i,
                None => {
                    // At most one node per slot, so the index fits a u16 below NONE.
                    nodes.push((host, port));
                    nodes.len() - 1
                }
            };
            for slot in &mut owner[start as usize..=end as usize] {
                if *slot != NONE && *slot as usize != index {
                    return Err(format!(
                        "CLUSTER SLOTS: slots {start}-{end} served by two primaries"
                    ));
                }
                *slot = index as u16;
            }
        }
        if let Some(unserved) = owner.iter().position(|&o| o == NONE) {
            return Err(format!(
                "CLUSTER SLOTS: slot {unserved} is served by no primary (is the cluster formed?)"
            ));
        }
        Ok(SlotMap { nodes, owner })
    }
}

/// The key of a request the load generator encoded (`*N\r\n$L\r\nCMD\r\n$L\r\nKEY\r\n..`):
/// its second element. `None` for anything else.
pub fn request_key(req: &[u8]) -> Option<&[u8]> {
    fn line(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
        let rest = buf.get(from..)?;
        let end = rest.windows(2).position(|w| w == b"\r\n")?;
        Some((&rest[..end], from + end + 2))
    }
    fn bulk(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
        let (head, body) = line(buf, from)?;
        let len: usize = std::str::from_utf8(head.strip_prefix(b"$")?)
            .ok()?
            .parse()
            .ok()?;
        let end = body.checked_add(len)?;
        Some((buf.get(body..end)?, end + 2))
    }
    let (count, pos) = line(req, 0)?;
    let n: usize = std::str::from_utf8(count.strip_prefix(b"*")?)
        .ok()?
        .parse()
        .ok()?;
    if n < 2 {
        return None;
    }
    let (_, pos) = bulk(req, pos)?;
    Some(bulk(req, pos)?.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::encode_command;
    use proptest::prelude::*;

    fn bulk(s: &str) -> String {
        format!("${}\r\n{s}\r\n", s.len())
    }

    /// A CLUSTER SLOTS reply as Redis 7 writes it: each node is [host, port, id, metadata].
    fn reply(ranges: &[(u16, u16, &str, u16)]) -> Vec<u8> {
        let mut s = format!("*{}\r\n", ranges.len());
        for (start, end, host, port) in ranges {
            s += &format!(
                "*3\r\n:{start}\r\n:{end}\r\n*4\r\n{}:{port}\r\n{}*0\r\n",
                bulk(host),
                bulk("0123456789abcdef0123456789abcdef01234567")
            );
        }
        s.into_bytes()
    }

    #[test]
    fn parses_the_ranges_and_routes_each_key_to_its_slots_primary() {
        let r = reply(&[
            (0, 5460, "127.0.0.1", 7000),
            (5461, 10922, "127.0.0.1", 7001),
            (10923, 16383, "127.0.0.1", 7002),
        ]);
        let map = SlotMap::parse(&r, "seed").unwrap();
        assert_eq!(
            map.nodes,
            vec![
                ("127.0.0.1".to_string(), 7000),
                ("127.0.0.1".to_string(), 7001),
                ("127.0.0.1".to_string(), 7002)
            ]
        );
        // Redis's documented slots: foo 12182, bar 5061, and a hashtag's slot is its tag's.
        assert_eq!(map.node_of_key(b"foo"), 2);
        assert_eq!(map.node_of_key(b"bar"), 0);
        assert_eq!(map.node_of_key(b"{bar}.x"), 0);
        assert_eq!(map.node_of_slot(5461), 1);
        assert_eq!(map.node_of_slot(10922), 1);
        assert_eq!(map.node_of_slot(16383), 2);
    }

    #[test]
    fn a_primary_with_several_ranges_is_one_node_and_an_unknown_host_is_the_seed() {
        let r = reply(&[
            (0, 99, "", 7000),
            (100, 16000, "10.0.0.2", 7001),
            (16001, 16383, "?", 7000),
        ]);
        let map = SlotMap::parse(&r, "seed").unwrap();
        assert_eq!(
            map.nodes,
            vec![("seed".to_string(), 7000), ("10.0.0.2".to_string(), 7001)]
        );
        assert_eq!(map.node_of_slot(16383), 0);
        // Replicas after the primary, and Redis 6's 3-element node entries, are fine.
        let r = b"*1\r\n*4\r\n:0\r\n:16383\r\n*3\r\n$1\r\nh\r\n:1\r\n$1\r\nx\r\n\
                  *3\r\n$1\r\nr\r\n:2\r\n$1\r\ny\r\n";
        assert_eq!(SlotMap::parse(r, "s").unwrap().nodes, vec![("h".into(), 1)]);
    }

    #[test]
    fn refuses_what_cannot_be_routed() {
        let cases: &[(&[u8], &str)] = &[
            (
                b"-ERR This instance has cluster support disabled\r\n",
                "disabled",
            ),
            (b"*0\r\n", "served by no primary"),
            (&reply(&[(0, 16000, "h", 1)]), "slot 16001"),
            (
                &reply(&[(0, 16383, "h", 1), (5, 5, "h", 2)]),
                "two primaries",
            ),
            (&reply(&[(0, 16384, "h", 1)]), "bad slot range"),
            (&reply(&[(9, 3, "h", 1)]), "bad slot range"),
            (&reply(&[(0, 16383, "h", 0)]), "bad port"),
            (b"*1\r\n*3\r\n:0\r\n:16383\r\n", "cut short"),
            (b"*1\r\n*2\r\n:0\r\n:16383\r\n", "not [start"),
            (b"+OK\r\n", "not an array"),
            (b"*1\r\n:1\r\n", "not an array"),
        ];
        for (bytes, want) in cases {
            let err = SlotMap::parse(bytes, "s").unwrap_err();
            assert!(err.contains(want), "{err:?} lacks {want:?}");
        }
        // Nesting past the protocol decoder's bound is an error, not a deep recursion.
        let deep = format!("{}:1\r\n", "*1\r\n".repeat(100_000));
        assert!(SlotMap::parse(deep.as_bytes(), "s").is_err());
    }

    #[test]
    fn request_key_is_the_second_element() {
        let mut out = Vec::new();
        encode_command(&[b"SET", b"key:12", b"value"], &mut out);
        assert_eq!(request_key(&out), Some(&b"key:12"[..]));
        out.clear();
        encode_command(&[b"GET", b""], &mut out);
        assert_eq!(request_key(&out), Some(&b""[..]));
        out.clear();
        encode_command(&[b"PING"], &mut out);
        assert_eq!(request_key(&out), None);
        assert_eq!(request_key(b"*2\r\n$3\r\nGET\r\n$9\r\nab\r\n"), None);
        assert_eq!(request_key(b"garbage"), None);
    }

    proptest! {
        /// CLUSTER SLOTS replies are untrusted input: any bytes give a map or an error,
        /// never a panic, and a map routes every slot somewhere it lists.
        #[test]
        fn parse_never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(map) = SlotMap::parse(&bytes, "s") {
                for slot in 0..SLOTS {
                    prop_assert!(map.node_of_slot(slot) < map.nodes.len());
                }
            }
        }

        /// Mutations of a valid reply (the shapes garbage is most likely to reach deep
        /// into the parser with): no panic.
        #[test]
        fn parse_never_panics_on_a_damaged_reply(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut r = reply(&[(0, 8000, "127.0.0.1", 7000), (8001, 16383, "h", 7001)]);
            for (at, byte) in edits {
                let i = at.index(r.len());
                r[i] = byte;
            }
            let n = cut.index(r.len() + 1);
            let _ = SlotMap::parse(&r[..n], "s");
            let _ = request_key(&r[..n]);
        }

        #[test]
        fn request_key_finds_any_key(key in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut out = Vec::new();
            encode_command(&[b"GET", &key], &mut out);
            prop_assert_eq!(request_key(&out), Some(&key[..]));
        }
    }
}
