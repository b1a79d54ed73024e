//! The command mix (sans-I/O): which command each request is, and its bytes.
//!
//! A `--ratio S:G` sends S SETs then G GETs, over and over (memtier's cycle), so the mix is
//! exact over every S+G requests rather than random.

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Set,
    Get,
}

/// Builds the requests of one connection.
#[derive(Clone, Debug)]
pub struct Mix {
    ratio: Ratio,
    /// Position in the cycle of `sets + gets` requests.
    pos: u32,
    keys: KeyGen,
    prefix: Vec<u8>,
    value: Vec<u8>,
    key_buf: Vec<u8>,
}

impl Mix {
    pub fn new(ratio: Ratio, keys: KeyGen, prefix: &[u8], data_size: usize) -> Mix {
        Mix {
            ratio,
            pos: 0,
            keys,
            prefix: prefix.to_vec(),
            value: vec![b'x'; data_size],
            key_buf: Vec::with_capacity(prefix.len() + 20),
        }
    }

    /// Appends the next request to `out` and says what it is.
    pub fn next_request(&mut self, out: &mut Vec<u8>) -> Op {
        let op = if self.pos < self.ratio.sets {
            Op::Set
        } else {
            Op::Get
        };
        self.pos += 1;
        if self.pos >= self.ratio.sets + self.ratio.gets {
            self.pos = 0;
        }
        let k = self.keys.next_key();
        self.key_buf.clear();
        self.key_buf.extend_from_slice(&self.prefix);
        self.key_buf.extend_from_slice(k.to_string().as_bytes());
        match op {
            Op::Set => encode_command(&[b"SET", &self.key_buf, &self.value], out),
            Op::Get => encode_command(&[b"GET", &self.key_buf], out),
        }
        op
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeyPattern;

    fn mix(ratio: &str, size: usize) -> Mix {
        let keys = KeyGen::new(KeyPattern::Sequential, 100, 0, 0);
        Mix::new(Ratio::parse(ratio).unwrap(), keys, b"k:", size)
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
    fn ratio_parse_rejects_bad_forms() {
        assert_eq!(Ratio::parse("1:10"), Ok(Ratio { sets: 1, gets: 10 }));
        for bad in ["", "1", "1:", "a:1", "-1:2", "0:0", "1:2:3"] {
            assert!(Ratio::parse(bad).is_err(), "{bad:?}");
        }
    }
}
