//! The command mix (sans-I/O): which command each request is, and its bytes.
//!
//! A `--ratio S:G` sends S SETs then G GETs, over and over (memtier's cycle), so the mix is
//! exact over every S+G requests rather than random. With N keys per request (N > 1) the
//! writes are `MSET k1 v k2 v ..` and the reads `MGET k1 k2 ..`, each key drawn from the key
//! pattern in turn (as `redis-benchmark -t mset` draws each of its 10 keys).
//!
//! Two other shapes ([`Verbs`]): `EXISTS k1 .. kN` for the reads, and MSET/DEL pairs, an
//! `MSET` of N fresh draws followed by a `DEL` of the same N keys (the ratio does not apply),
//! so that every DEL removes keys that are there: a DEL of keys drawn at random from a filled
//! key space would empty it within seconds and then measure DELs of missing keys.

use crate::keys::KeyGen;
use crate::proto::encode_command;

/// SETs to GETs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ratio {
    pub sets: u32,
    pub gets: u32,
}

impl Ratio {
    /// `S:G`, both non-negative integers, not both 0.
    pub fn parse(s: &str) -> Result<Ratio, String> {
        let bad = || format!("ratio must be SETS:GETS, e.g. 1:10, got {s:?}");
        let (a, b) = s.split_once(':').ok_or_else(bad)?;
        let sets: u32 = a.trim().parse().map_err(|_| bad())?;
        let gets: u32 = b.trim().parse().map_err(|_| bad())?;
        if sets == 0 && gets == 0 {
            return Err("ratio 0:0 sends nothing".into());
        }
        Ok(Ratio { sets, gets })
    }
}

/// Which commands the mix sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Verbs {
    /// SET and GET (one key per request) or MSET and MGET (more), by the ratio.
    #[default]
    SetGet,
    /// SET or MSET for the writes, EXISTS of the request's keys for the reads.
    Exists,
    /// MSET of fresh draws, then DEL of the same keys, in turn; the ratio does not apply.
    MsetDel,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Set,
    Get,
    Mset,
    Mget,
    Exists,
    Del,
}

impl Op {
    pub fn is_write(self) -> bool {
        matches!(self, Op::Set | Op::Mset | Op::Del)
    }
}

/// Builds the requests of one connection.
#[derive(Clone, Debug)]
pub struct Mix {
    ratio: Ratio,
    verbs: Verbs,
    /// MSET/DEL pairs: the next request is the DEL of the keys in `key_buf`.
    del_next: bool,
    /// Position in the cycle of `sets + gets` requests.
    pos: u32,
    keys: KeyGen,
    prefix: Vec<u8>,
    value: Vec<u8>,
    /// Keys per request: 1 for SET/GET, more for MSET/MGET.
    per_request: usize,
    key_buf: Vec<u8>,
    ends: Vec<usize>,
}

impl Mix {
    /// `per_request` keys per request (at least 1).
    pub fn new(
        ratio: Ratio,
        keys: KeyGen,
        prefix: &[u8],
        data_size: usize,
        per_request: usize,
    ) -> Mix {
        let per_request = per_request.max(1);
        Mix {
            ratio,
            verbs: Verbs::SetGet,
            del_next: false,
            pos: 0,
            keys,
            prefix: prefix.to_vec(),
            value: vec![b'x'; data_size],
            per_request,
            key_buf: Vec::with_capacity((prefix.len() + 20) * per_request),
            ends: Vec::with_capacity(per_request),
        }
    }

    /// The same mix sending `verbs`.
    pub fn with_verbs(mut self, verbs: Verbs) -> Mix {
        self.verbs = verbs;
        self.del_next = false;
        self
    }

    /// Keys per request.
    pub fn per_request(&self) -> usize {
        self.per_request
    }

    /// Appends the next request to `out` and says what it is.
    pub fn next_request(&mut self, out: &mut Vec<u8>) -> Op {
        let multi = self.per_request > 1;
        let op = if self.verbs == Verbs::MsetDel {
            let op = if self.del_next { Op::Del } else { Op::Mset };
            self.del_next = !self.del_next;
            op
        } else {
            let write = self.pos < self.ratio.sets;
            self.pos += 1;
            if self.pos >= self.ratio.sets + self.ratio.gets {
                self.pos = 0;
            }
            match (write, multi, self.verbs) {
                (true, false, _) => Op::Set,
                (true, true, _) => Op::Mset,
                (false, _, Verbs::Exists) => Op::Exists,
                (false, false, _) => Op::Get,
                (false, true, _) => Op::Mget,
            }
        };
        // The keys one after the other in key_buf; `ends` marks where each one stops. A DEL
        // reuses the keys of the MSET before it.
        if op != Op::Del {
            self.key_buf.clear();
            self.ends.clear();
            for _ in 0..self.per_request {
                let k = self.keys.next_key();
                self.key_buf.extend_from_slice(&self.prefix);
                self.key_buf.extend_from_slice(k.to_string().as_bytes());
                self.ends.push(self.key_buf.len());
            }
        }
        let mut keys: Vec<&[u8]> = Vec::with_capacity(self.per_request);
        let mut start = 0;
        for &e in &self.ends {
            keys.push(&self.key_buf[start..e]);
            start = e;
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(1 + 2 * self.per_request);
        match op {
            Op::Set => args.extend([&b"SET"[..], keys[0], &self.value]),
            Op::Mset => {
                args.push(b"MSET");
                for k in &keys {
                    args.push(k);
                    args.push(&self.value);
                }
            }
            Op::Get => args.extend([&b"GET"[..], keys[0]]),
            Op::Mget | Op::Exists | Op::Del => {
                args.push(match op {
                    Op::Mget => b"MGET",
                    Op::Exists => b"EXISTS",
                    _ => b"DEL",
                });
                args.extend(keys.iter().copied());
            }
        }
        encode_command(&args, out);
        op
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeyPattern;

    fn mix(ratio: &str, size: usize) -> Mix {
        let keys = KeyGen::new(KeyPattern::Sequential, 100, 0, 0);
        Mix::new(Ratio::parse(ratio).unwrap(), keys, b"k:", size, 1)
    }

    #[test]
    fn ratio_cycles_sets_then_gets() {
        let mut m = mix("2:3", 1);
        let mut out = Vec::new();
        let ops: Vec<Op> = (0..10).map(|_| m.next_request(&mut out)).collect();
        use Op::*;
        assert_eq!(ops, [Set, Set, Get, Get, Get, Set, Set, Get, Get, Get]);
    }

    #[test]
    fn only_sets_or_only_gets() {
        let mut out = Vec::new();
        let mut m = mix("1:0", 1);
        assert!((0..5).all(|_| m.next_request(&mut out) == Op::Set));
        let mut m = mix("0:1", 1);
        assert!((0..5).all(|_| m.next_request(&mut out) == Op::Get));
    }

    #[test]
    fn requests_carry_the_key_and_a_value_of_data_size() {
        let mut m = mix("1:1", 4);
        let mut out = Vec::new();
        m.next_request(&mut out);
        m.next_request(&mut out);
        assert_eq!(
            out,
            b"*3\r\n$3\r\nSET\r\n$3\r\nk:0\r\n$4\r\nxxxx\r\n*2\r\n$3\r\nGET\r\n$3\r\nk:1\r\n"
        );
    }

    #[test]
    fn several_keys_per_request_send_mset_and_mget_of_distinct_draws() {
        let keys = KeyGen::new(KeyPattern::Sequential, 100, 0, 0);
        let mut m = Mix::new(Ratio::parse("1:1").unwrap(), keys, b"k:", 2, 3);
        let mut out = Vec::new();
        assert_eq!(m.next_request(&mut out), Op::Mset);
        assert_eq!(m.next_request(&mut out), Op::Mget);
        assert_eq!(
            out,
            &b"*7\r\n$4\r\nMSET\r\n$3\r\nk:0\r\n$2\r\nxx\r\n$3\r\nk:1\r\n$2\r\nxx\r\n\
               $3\r\nk:2\r\n$2\r\nxx\r\n\
               *4\r\n$4\r\nMGET\r\n$3\r\nk:3\r\n$3\r\nk:4\r\n$3\r\nk:5\r\n"[..]
        );
    }

    #[test]
    fn mset_del_deletes_the_keys_of_the_mset_before_it_then_draws_new_ones() {
        let keys = KeyGen::new(KeyPattern::Sequential, 100, 0, 0);
        // The ratio does not apply: MSET and DEL alternate.
        let mut m =
            Mix::new(Ratio::parse("0:1").unwrap(), keys, b"k:", 1, 2).with_verbs(Verbs::MsetDel);
        let mut out = Vec::new();
        let ops: Vec<Op> = (0..4).map(|_| m.next_request(&mut out)).collect();
        assert_eq!(ops, [Op::Mset, Op::Del, Op::Mset, Op::Del]);
        assert_eq!(
            out,
            &b"*5\r\n$4\r\nMSET\r\n$3\r\nk:0\r\n$1\r\nx\r\n$3\r\nk:1\r\n$1\r\nx\r\n\
               *3\r\n$3\r\nDEL\r\n$3\r\nk:0\r\n$3\r\nk:1\r\n\
               *5\r\n$4\r\nMSET\r\n$3\r\nk:2\r\n$1\r\nx\r\n$3\r\nk:3\r\n$1\r\nx\r\n\
               *3\r\n$3\r\nDEL\r\n$3\r\nk:2\r\n$3\r\nk:3\r\n"[..]
        );
        assert!(Op::Del.is_write() && !Op::Exists.is_write());
    }

    #[test]
    fn exists_reads_the_requests_keys_and_writes_stay_sets() {
        let keys = KeyGen::new(KeyPattern::Sequential, 100, 0, 0);
        let mut m =
            Mix::new(Ratio::parse("1:1").unwrap(), keys, b"k:", 1, 1).with_verbs(Verbs::Exists);
        let mut out = Vec::new();
        assert_eq!(m.next_request(&mut out), Op::Set);
        assert_eq!(m.next_request(&mut out), Op::Exists);
        assert_eq!(
            out,
            &b"*3\r\n$3\r\nSET\r\n$3\r\nk:0\r\n$1\r\nx\r\n\
               *2\r\n$6\r\nEXISTS\r\n$3\r\nk:1\r\n"[..]
        );
    }

    #[test]
    fn ratio_parse_rejects_bad_forms() {
        assert_eq!(Ratio::parse("1:10"), Ok(Ratio { sets: 1, gets: 10 }));
        for bad in ["", "1", "1:", "a:1", "-1:2", "0:0", "1:2:3"] {
            assert!(Ratio::parse(bad).is_err(), "{bad:?}");
        }
    }
}
