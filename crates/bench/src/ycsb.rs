//! YCSB's core workloads A–F, with the requests YCSB's Redis binding (`site.ycsb.db.RedisClient`)
//! sends for them (sans-I/O).
//!
//! The data model is the binding's: a record is a hash `user<FNV-64 of the record number>` with
//! `field0..field9` of 100 bytes each, and every inserted key is also a member of the sorted
//! set `_indices`, scored by Java's `String.hashCode()` of the key, which is what scans walk:
//!
//! | YCSB operation | commands (one round trip each, in this order) |
//! | --- | --- |
//! | insert | `HMSET key field0 v0 .. field9 v9`, then (if that said OK) `ZADD _indices <hash(key)> key` |
//! | read | `HGETALL key` (YCSB's default `readallfields=true`) |
//! | update | `HMSET key fieldN v` (one field, YCSB's default `writeallfields=false`) |
//! | scan | `ZRANGEBYSCORE _indices <hash(startkey)> +inf LIMIT 0 <len>`, then `HGETALL` of each key |
//! | read-modify-write | `HGETALL key`, then (if the record was there) `HMSET key fieldN v` |
//!
//! Scores go out as Jedis writes a Java `double` (`Double.toString`: `-1.23456789E9`,
//! `1234567.0`), and `+inf` for the upper bound.
//!
//! Key choice follows YCSB's `CoreWorkload` with `insertorder=hashed` (the default):
//! - `zipfian`: the scrambled Zipfian generator (Gray et al.'s algorithm over 10^10 items with
//!   the precomputed zeta, constant 0.99, then FNV-64 modulo the key space). Like YCSB, the key
//!   space counts the inserts expected during the run (2 x insert proportion x operation
//!   count; the runs here are timed, so the operation count is taken to be the record count),
//!   and draws past the last inserted record are drawn again.
//! - `latest`: the skewed-latest generator: the last inserted record number minus a Zipfian draw
//!   over the records inserted so far.
//!
//! Inserts during a run take record numbers from one counter shared by every connection, and a
//! record counts as inserted (reads may pick it) once its ZADD is answered and every record
//! before it is too (YCSB's acknowledged counter).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::keys::Rng;
use crate::proto::{bulk_array, encode_command, Reply};

/// YCSB's 64-bit FNV hash of a record number (`Utils.fnvhash64`): FNV-1 over the 8 bytes,
/// least significant first, then the absolute value (Java's, so `i64::MIN` stays negative).
pub fn fnv_hash64(val: i64) -> i64 {
    const OFFSET_BASIS: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 1_099_511_628_211;
    let mut v = val;
    let mut h = OFFSET_BASIS as i64;
    for _ in 0..8 {
        h ^= v & 0xff;
        v >>= 8;
        h = h.wrapping_mul(PRIME as i64);
    }
    h.wrapping_abs()
}

/// The key of record `keynum`: `user` + its FNV hash (`insertorder=hashed`, no zero padding).
pub fn key_name(keynum: u64) -> Vec<u8> {
    format!("user{}", fnv_hash64(keynum as i64)).into_bytes()
}

/// Java's `String.hashCode()` of an ASCII string.
pub fn java_string_hash(s: &[u8]) -> i32 {
    s.iter()
        .fold(0i32, |h, &b| h.wrapping_mul(31).wrapping_add(b as i32))
}

/// Java's `Double.toString` of an `int` held in a double, as Jedis sends scores:
/// `12.0`, `-1234567.0`, then from 10^7 on `1.0E7`, `-2.147483648E9`.
pub fn java_double_string(v: i32) -> String {
    let a = (v as i64).unsigned_abs();
    if a < 10_000_000 {
        return format!("{v}.0");
    }
    let digits = a.to_string();
    let exp = digits.len() - 1;
    let mant = digits.trim_end_matches('0');
    let (first, rest) = mant.split_at(1);
    let rest = if rest.is_empty() { "0" } else { rest };
    let sign = if v < 0 { "-" } else { "" };
    format!("{sign}{first}.{rest}E{exp}")
}

/// Gray et al.'s Zipfian generator ("Quickly Generating Billion-Record Synthetic Databases",
/// SIGMOD 1994), as YCSB's `ZipfianGenerator` runs it: items `base..base+items`, the zeta
/// constant extended incrementally when the item count grows.
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
}

/// The sum of 1/i^theta for i in `st+1..=n`, added to `initial`.
fn zeta(st: u64, n: u64, theta: f64, initial: f64) -> f64 {
    (st..n).fold(initial, |s, i| s + 1.0 / ((i + 1) as f64).powf(theta))
}

impl Zipfian {
    pub const CONSTANT: f64 = 0.99;

    /// Items `min..=max`; computes zeta over them (linear in the item count).
    pub fn new(min: u64, max: u64, theta: f64) -> Zipfian {
        Zipfian::with_zetan(min, max, theta, zeta(0, max - min + 1, theta, 0.0))
    }

    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Zipfian {
        let items = max - min + 1;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        Zipfian {
            items,
            base: min,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan),
            count_for_zeta: items,
        }
    }

    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        self.next_long(self.items, rng)
    }

    /// A draw over `itemcount` items (YCSB's `nextLong(itemcount)`: a larger count extends
    /// zeta; the eta term keeps the first item count, as YCSB's does).
    pub fn next_long(&mut self, itemcount: u64, rng: &mut Rng) -> u64 {
        if itemcount > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, itemcount, self.theta, self.zetan);
            self.count_for_zeta = itemcount;
            self.eta = (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta))
                / (1.0 - self.zeta2theta / self.zetan);
        }
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        self.base + (itemcount as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }
}

/// YCSB's `ScrambledZipfianGenerator`: a Zipfian draw over 10^10 items, hashed into `min..=max`.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    min: u64,
    itemcount: u64,
    gen: Zipfian,
}

impl ScrambledZipfian {
    const ITEM_COUNT: u64 = 10_000_000_000;
    /// zeta(10^10, 0.99), YCSB's precomputed value.
    const ZETAN: f64 = 26.469_028_201_783_02;

    pub fn new(min: u64, max: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            min,
            itemcount: max - min + 1,
            gen: Zipfian::with_zetan(0, Self::ITEM_COUNT, Zipfian::CONSTANT, Self::ZETAN),
        }
    }

    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        let r = self.gen.next(rng);
        self.min + fnv_hash64(r as i64) as u64 % self.itemcount
    }
}

/// A YCSB core workload: the operation proportions and the request distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Workload {
    pub name: char,
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub rmw: f64,
    pub latest: bool,
}

impl Workload {
    /// `a` .. `f` (either case), with the proportions of YCSB's workloads/workload[a-f] files.
    pub fn parse(s: &str) -> Result<Workload, String> {
        let w = |name, read, update, insert, scan, rmw, latest| Workload {
            name,
            read,
            update,
            insert,
            scan,
            rmw,
            latest,
        };
        Ok(match s.to_ascii_lowercase().as_str() {
            "a" => w('a', 0.5, 0.5, 0.0, 0.0, 0.0, false),
            "b" => w('b', 0.95, 0.05, 0.0, 0.0, 0.0, false),
            "c" => w('c', 1.0, 0.0, 0.0, 0.0, 0.0, false),
            "d" => w('d', 0.95, 0.0, 0.05, 0.0, 0.0, true),
            "e" => w('e', 0.0, 0.0, 0.05, 0.95, 0.0, false),
            "f" => w('f', 0.5, 0.0, 0.0, 0.0, 0.5, false),
            _ => return Err(format!("--ycsb: a workload from a to f, got {s:?}")),
        })
    }
}

/// The settings of a YCSB run.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub workload: Workload,
    /// Records loaded before the run (and the key space reads draw from).
    pub records: u64,
    /// Whether to load them first (off when an earlier run loaded them).
    pub load: bool,
    pub field_count: usize,
    pub field_length: usize,
    pub max_scan_length: u64,
}

impl Settings {
    pub fn new(workload: Workload) -> Settings {
        Settings {
            workload,
            records: 100_000,
            load: true,
            field_count: 10,
            field_length: 100,
            max_scan_length: 100,
        }
    }
}

/// What every connection of a run shares: the load counter and the run's insert counter.
#[derive(Debug)]
pub struct Shared {
    records: u64,
    load_next: AtomicU64,
    insert_next: AtomicU64,
    /// The last record number below which every insert was answered.
    last: AtomicU64,
    acked: Mutex<Acked>,
}

#[derive(Debug)]
struct Acked {
    /// Every record number below this one is inserted.
    limit: u64,
    /// Answered inserts above the limit.
    pending: BTreeSet<u64>,
}

impl Shared {
    pub fn new(records: u64) -> Arc<Shared> {
        assert!(records >= 1, "at least one record");
        Arc::new(Shared {
            records,
            load_next: AtomicU64::new(0),
            insert_next: AtomicU64::new(records),
            last: AtomicU64::new(records - 1),
            acked: Mutex::new(Acked {
                limit: records,
                pending: BTreeSet::new(),
            }),
        })
    }

    /// The next record of the load phase, until all are handed out.
    fn next_load(&self) -> Option<u64> {
        let k = self.load_next.fetch_add(1, Ordering::Relaxed);
        (k < self.records).then_some(k)
    }

    fn next_insert(&self) -> u64 {
        self.insert_next.fetch_add(1, Ordering::Relaxed)
    }

    /// The highest record number that reads may pick.
    pub fn last_value(&self) -> u64 {
        self.last.load(Ordering::Acquire)
    }

    fn acknowledge(&self, keynum: u64) {
        let mut a = self.acked.lock().unwrap_or_else(|e| e.into_inner());
        a.pending.insert(keynum);
        let before = a.limit;
        while let Some(&k) = a.pending.first() {
            if k != a.limit {
                break;
            }
            a.pending.pop_first();
            a.limit += 1;
        }
        if a.limit != before {
            self.last.store(a.limit - 1, Ordering::Release);
        }
    }
}

/// The YCSB operations, as measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YcsbOp {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

/// Where an operation in progress stands.
#[derive(Clone, Debug)]
pub enum Step {
    /// `HGETALL` sent (read).
    Read,
    /// `HMSET` of one field sent (update, or the write of a read-modify-write).
    Update,
    /// `HMSET` of a new record sent; `ZADD` next.
    InsertHash {
        keynum: u64,
        key: Vec<u8>,
        load: bool,
    },
    /// `ZADD` sent.
    InsertIndex { keynum: u64, load: bool },
    /// `ZRANGEBYSCORE` sent.
    ScanRange,
    /// `HGETALL` of a scanned key sent; `left` to read after it (last first).
    ScanRead { left: Vec<Vec<u8>> },
    /// The read of a read-modify-write sent.
    RmwRead { key: Vec<u8> },
}

/// What a reply did to an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Another command was appended to the output.
    More,
    /// The operation is over: `ok` unless a reply was an error, `found` whether the records it
    /// read were there (YCSB counts a read of a missing record as a failure too).
    Done { ok: bool, found: bool },
}

/// Builds one connection's YCSB operations.
#[derive(Clone, Debug)]
pub struct YcsbGen {
    s: Settings,
    shared: Arc<Shared>,
    rng: Rng,
    chooser: Chooser,
    /// Load phase: inserts only, until the records are all handed out.
    loading: bool,
    field_names: Vec<Vec<u8>>,
}

#[derive(Clone, Debug)]
enum Chooser {
    Zipfian(ScrambledZipfian),
    Latest(Zipfian),
}

impl YcsbGen {
    /// A template for the connections of a run (the Zipfian set-up is computed once here and
    /// cloned); `loading` selects the load phase.
    pub fn new(s: &Settings, shared: Arc<Shared>, loading: bool) -> YcsbGen {
        let w = s.workload;
        let chooser = if w.latest {
            Chooser::Latest(Zipfian::new(0, s.records - 1, Zipfian::CONSTANT))
        } else {
            // YCSB: expectednewkeys = operationcount * insertproportion * 2.
            let expected_new = (s.records as f64 * w.insert * 2.0) as u64;
            Chooser::Zipfian(ScrambledZipfian::new(0, s.records + expected_new))
        };
        YcsbGen {
            s: s.clone(),
            shared,
            rng: Rng::new(0),
            chooser,
            loading,
            field_names: (0..s.field_count)
                .map(|i| format!("field{i}").into_bytes())
                .collect(),
        }
    }

    /// This connection's copy, with its own random stream.
    pub fn for_connection(&self, seed: u64) -> YcsbGen {
        let mut g = self.clone();
        g.rng = Rng::new(seed);
        g
    }

    /// A record number for a read, update, scan or read-modify-write.
    pub fn next_keynum(&mut self) -> u64 {
        match &mut self.chooser {
            Chooser::Zipfian(z) => loop {
                let k = z.next(&mut self.rng);
                if k <= self.shared.last_value() {
                    return k;
                }
            },
            Chooser::Latest(z) => {
                let max = self.shared.last_value();
                max - z.next_long(max, &mut self.rng).min(max)
            }
        }
    }

    /// A field value: `field_length` printable bytes.
    fn value(&mut self, out: &mut Vec<u8>) {
        let mut left = self.s.field_length;
        while left > 0 {
            let mut r = self.rng.next_u64();
            for _ in 0..left.min(10) {
                out.push(b' ' + (r & 63) as u8);
                r >>= 6;
                left -= 1;
            }
        }
    }

    fn field(&mut self) -> usize {
        self.rng.below(self.field_names.len() as u64) as usize
    }

    fn encode_insert(&mut self, key: &[u8], out: &mut Vec<u8>) {
        let mut values = Vec::with_capacity(self.s.field_count * self.s.field_length);
        for _ in 0..self.s.field_count {
            self.value(&mut values);
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + 2 * self.s.field_count);
        args.push(b"HMSET");
        args.push(key);
        for (i, name) in self.field_names.iter().enumerate() {
            args.push(name);
            args.push(&values[i * self.s.field_length..(i + 1) * self.s.field_length]);
        }
        encode_command(&args, out);
    }

    fn encode_update(&mut self, key: &[u8], out: &mut Vec<u8>) {
        let f = self.field();
        let mut v = Vec::with_capacity(self.s.field_length);
        self.value(&mut v);
        encode_command(&[b"HMSET", key, &self.field_names[f], &v], out);
    }

    /// Starts the next operation: appends its first command to `out`. `None` when the load
    /// phase has handed out every record.
    pub fn begin(&mut self, out: &mut Vec<u8>) -> Option<(YcsbOp, Step)> {
        if self.loading {
            let keynum = self.shared.next_load()?;
            let key = key_name(keynum);
            self.encode_insert(&key, out);
            return Some((
                YcsbOp::Insert,
                Step::InsertHash {
                    keynum,
                    key,
                    load: true,
                },
            ));
        }
        let w = self.s.workload;
        let mut u = self.rng.next_f64();
        let mut pick = |p: f64| {
            let hit = p > 0.0 && u < p;
            u -= p;
            hit
        };
        let op = if pick(w.read) {
            YcsbOp::Read
        } else if pick(w.update) {
            YcsbOp::Update
        } else if pick(w.insert) {
            YcsbOp::Insert
        } else if pick(w.scan) {
            YcsbOp::Scan
        } else if w.rmw > 0.0 {
            YcsbOp::ReadModifyWrite
        } else {
            // Rounding left u past the last proportion: the last one named.
            [
                (w.scan, YcsbOp::Scan),
                (w.insert, YcsbOp::Insert),
                (w.update, YcsbOp::Update),
                (w.read, YcsbOp::Read),
            ]
            .into_iter()
            .find(|(p, _)| *p > 0.0)
            .map_or(YcsbOp::Read, |(_, o)| o)
        };
        let step = match op {
            YcsbOp::Read => {
                let key = key_name(self.next_keynum());
                encode_command(&[b"HGETALL", &key], out);
                Step::Read
            }
            YcsbOp::Update => {
                let key = key_name(self.next_keynum());
                self.encode_update(&key, out);
                Step::Update
            }
            YcsbOp::Insert => {
                let keynum = self.shared.next_insert();
                let key = key_name(keynum);
                self.encode_insert(&key, out);
                Step::InsertHash {
                    keynum,
                    key,
                    load: false,
                }
            }
            YcsbOp::Scan => {
                let key = key_name(self.next_keynum());
                let len = 1 + self.rng.below(self.s.max_scan_length);
                let score = java_double_string(java_string_hash(&key));
                let len = len.to_string();
                encode_command(
                    &[
                        b"ZRANGEBYSCORE",
                        b"_indices",
                        score.as_bytes(),
                        b"+inf",
                        b"LIMIT",
                        b"0",
                        len.as_bytes(),
                    ],
                    out,
                );
                Step::ScanRange
            }
            YcsbOp::ReadModifyWrite => {
                let key = key_name(self.next_keynum());
                encode_command(&[b"HGETALL", &key], out);
                Step::RmwRead { key }
            }
        };
        Some((op, step))
    }

    /// The reply (`kind`, its bytes `reply`) to the last command of the operation at `step`:
    /// appends the operation's next command, if any, to `out`.
    pub fn on_reply(
        &mut self,
        step: &mut Step,
        kind: Reply,
        reply: &[u8],
        out: &mut Vec<u8>,
    ) -> Progress {
        let error = kind == Reply::Error;
        // A hash read: found when the array is not empty.
        let found = || kind == Reply::Aggregate && !reply.starts_with(b"*0\r");
        match std::mem::replace(step, Step::Read) {
            Step::Read => Progress::Done {
                ok: !error,
                found: found(),
            },
            Step::Update => Progress::Done {
                ok: !error,
                found: true,
            },
            Step::InsertHash { keynum, key, load } => {
                if error {
                    if !load {
                        self.shared.acknowledge(keynum);
                    }
                    return Progress::Done {
                        ok: false,
                        found: true,
                    };
                }
                let score = java_double_string(java_string_hash(&key));
                encode_command(&[b"ZADD", b"_indices", score.as_bytes(), &key], out);
                *step = Step::InsertIndex { keynum, load };
                Progress::More
            }
            Step::InsertIndex { keynum, load } => {
                if !load {
                    self.shared.acknowledge(keynum);
                }
                Progress::Done {
                    ok: !error,
                    found: true,
                }
            }
            Step::ScanRange => {
                let keys = match bulk_array(reply) {
                    Ok(Some(items)) => items,
                    _ => {
                        return Progress::Done {
                            ok: false,
                            found: false,
                        }
                    }
                };
                let mut left: Vec<Vec<u8>> = keys
                    .into_iter()
                    .rev()
                    .flatten()
                    .map(|k| k.to_vec())
                    .collect();
                match left.pop() {
                    None => Progress::Done {
                        ok: true,
                        found: false,
                    },
                    Some(k) => {
                        encode_command(&[b"HGETALL", &k], out);
                        *step = Step::ScanRead { left };
                        Progress::More
                    }
                }
            }
            Step::ScanRead { mut left } => {
                if error {
                    return Progress::Done {
                        ok: false,
                        found: true,
                    };
                }
                match left.pop() {
                    None => Progress::Done {
                        ok: true,
                        found: true,
                    },
                    Some(k) => {
                        encode_command(&[b"HGETALL", &k], out);
                        *step = Step::ScanRead { left };
                        Progress::More
                    }
                }
            }
            Step::RmwRead { key } => {
                if error || !found() {
                    return Progress::Done {
                        ok: !error,
                        found: false,
                    };
                }
                self.encode_update(&key, out);
                *step = Step::Update;
                Progress::More
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::parse_reply;

    #[test]
    fn fnv_hash_and_key_names_follow_ycsb() {
        // FNV-1 64 of eight zero bytes, by the definition: basis * prime^8 (xor with 0 is a
        // no-op), then the absolute value.
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for _ in 0..8 {
            h = h.wrapping_mul(1_099_511_628_211);
        }
        assert_eq!(fnv_hash64(0), (h as i64).wrapping_abs());
        // Different numbers, different keys; always "user" + a non-negative decimal.
        let k0 = key_name(0);
        let k1 = key_name(1);
        assert_ne!(k0, k1);
        for k in [&k0, &k1] {
            let s = std::str::from_utf8(k).unwrap();
            let n: i64 = s.strip_prefix("user").unwrap().parse().unwrap();
            assert!(n >= 0);
        }
        assert_eq!(key_name(0), format!("user{}", fnv_hash64(0)).into_bytes());
    }

    #[test]
    fn java_string_hash_and_double_text_match_java() {
        // "abc".hashCode() == 96354; "" is 0; the wrap-around is Java's int arithmetic.
        assert_eq!(java_string_hash(b"abc"), 96354);
        assert_eq!(java_string_hash(b""), 0);
        assert_eq!(
            java_string_hash(b"user6284781860667377211"),
            b"user6284781860667377211"
                .iter()
                .fold(0i64, |h, &b| (h * 31 + b as i64) as i32 as i64) as i32
        );
        for (v, want) in [
            (0, "0.0"),
            (12, "12.0"),
            (-9_999_999, "-9999999.0"),
            (10_000_000, "1.0E7"),
            (123_456_789, "1.23456789E8"),
            (-2_147_483_648, "-2.147483648E9"),
            (2_000_000_000, "2.0E9"),
            (1_230_000_000, "1.23E9"),
        ] {
            assert_eq!(java_double_string(v), want, "{v}");
            // And Redis reads the same number back.
            assert_eq!(want.parse::<f64>().unwrap(), v as f64);
        }
    }

    #[test]
    fn zipfian_favours_the_first_items_and_stays_in_range() {
        let mut rng = Rng::new(5);
        let mut z = Zipfian::new(0, 999, Zipfian::CONSTANT);
        let n = 100_000;
        let mut first = 0;
        for _ in 0..n {
            let k = z.next(&mut rng);
            assert!(k <= 1000, "{k}"); // YCSB's formula can reach the item count itself
            first += (k == 0) as u32;
        }
        // P(0) = 1 / zeta(1000, 0.99) = 1/7.51 = 0.133.
        let p = first as f64 / n as f64;
        assert!((p - 0.133).abs() < 0.01, "{p}");
    }

    #[test]
    fn scrambled_zipfian_spreads_the_popular_items() {
        let mut rng = Rng::new(9);
        let mut z = ScrambledZipfian::new(0, 9_999);
        let mut counts = vec![0u32; 10_000];
        for _ in 0..200_000 {
            counts[z.next(&mut rng) as usize] += 1;
        }
        // Skewed: the most popular item gets far more than the 20 an even spread would give…
        let max = *counts.iter().max().unwrap();
        assert!(max > 2_000, "{max}");
        // …and the popular ones are not clustered at the start of the range.
        let top = counts.iter().position(|&c| c == max).unwrap();
        assert_ne!(top, 0);
        // In range, and most of it is touched.
        assert!(counts.iter().filter(|&&c| c > 0).count() > 3_000);
    }

    fn gen(w: &str, records: u64) -> (YcsbGen, Arc<Shared>) {
        let mut s = Settings::new(Workload::parse(w).unwrap());
        s.records = records;
        s.field_length = 4;
        let shared = Shared::new(records);
        (
            YcsbGen::new(&s, shared.clone(), false).for_connection(3),
            shared,
        )
    }

    /// Splits a buffer of RESP commands into their arguments.
    fn commands(buf: &[u8]) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < buf.len() {
            let (_, used) = parse_reply(&buf[pos..]).unwrap().unwrap();
            let items = bulk_array(&buf[pos..pos + used]).unwrap().unwrap();
            out.push(
                items
                    .into_iter()
                    .map(|a| String::from_utf8_lossy(a.unwrap()).into_owned())
                    .collect(),
            );
            pos += used;
        }
        out
    }

    #[test]
    fn the_load_phase_inserts_every_record_once_as_hmset_then_zadd() {
        let mut s = Settings::new(Workload::parse("a").unwrap());
        s.records = 3;
        let shared = Shared::new(3);
        let mut g = YcsbGen::new(&s, shared, true).for_connection(1);
        let mut keys = Vec::new();
        while let Some((op, mut step)) = g.begin(&mut Vec::new()) {
            assert_eq!(op, YcsbOp::Insert);
            let mut out = Vec::new();
            assert_eq!(
                g.on_reply(&mut step, Reply::Simple, b"+OK\r\n", &mut out),
                Progress::More
            );
            let zadd = &commands(&out)[0];
            assert_eq!(zadd[..2], ["ZADD", "_indices"]);
            let key = zadd[3].clone();
            assert_eq!(
                zadd[2],
                java_double_string(java_string_hash(key.as_bytes()))
            );
            assert_eq!(
                g.on_reply(&mut step, Reply::Integer, b":1\r\n", &mut out),
                Progress::Done {
                    ok: true,
                    found: true
                }
            );
            keys.push(key);
        }
        let want: Vec<String> = (0..3)
            .map(|i| String::from_utf8(key_name(i)).unwrap())
            .collect();
        assert_eq!(keys, want);
        // The first command of an insert: HMSET of 10 fields of field_length bytes.
        let mut g = YcsbGen::new(&s, Shared::new(1), true).for_connection(1);
        let mut out = Vec::new();
        g.begin(&mut out).unwrap();
        let hmset = &commands(&out)[0];
        assert_eq!(hmset.len(), 2 + 2 * 10);
        assert_eq!(hmset[0], "HMSET");
        assert_eq!(hmset[2], "field0");
        assert_eq!(hmset[21].len(), 100);
        assert!(hmset[3].bytes().all(|b| (b' '..=b'_').contains(&b)));
    }

    #[test]
    fn workload_mixes_follow_the_proportions() {
        for (w, read, other) in [
            ("a", 0.5, YcsbOp::Update),
            ("b", 0.95, YcsbOp::Update),
            ("c", 1.0, YcsbOp::Update),
            ("d", 0.95, YcsbOp::Insert),
            ("e", 0.0, YcsbOp::Insert),
            ("f", 0.5, YcsbOp::ReadModifyWrite),
        ] {
            let (mut g, _) = gen(w, 1000);
            let n = 20_000;
            let mut reads = 0;
            let mut others = 0;
            let mut scans = 0;
            for _ in 0..n {
                match g.begin(&mut Vec::new()).unwrap().0 {
                    YcsbOp::Read => reads += 1,
                    YcsbOp::Scan => scans += 1,
                    o if o == other => others += 1,
                    o => panic!("workload {w} gave {o:?}"),
                }
            }
            let r = reads as f64 / n as f64;
            assert!((r - read).abs() < 0.015, "{w}: reads {r}");
            if w == "e" {
                let s = scans as f64 / n as f64;
                assert!((s - 0.95).abs() < 0.015, "{w}: scans {s}");
            } else if read < 1.0 {
                let o = others as f64 / n as f64;
                assert!((o - (1.0 - read)).abs() < 0.015, "{w}: {other:?} {o}");
            }
        }
    }

    #[test]
    fn reads_pick_only_inserted_records() {
        // Workload A's key space counts no inserts; workload E's counts 10% more records than
        // are loaded, and the draws past the last one are drawn again.
        for w in ["a", "e"] {
            let (mut g, _) = gen(w, 500);
            for _ in 0..10_000 {
                assert!(g.next_keynum() < 500);
            }
        }
    }

    #[test]
    fn latest_favours_the_newest_records_and_follows_acknowledged_inserts() {
        let (mut g, shared) = gen("d", 1000);
        let n = 20_000;
        let newest = (0..n).filter(|_| g.next_keynum() == 999).count();
        assert!(newest as f64 / n as f64 > 0.1, "{newest}");
        // Insert 1000 and 1001: acknowledged out of order, 1001 alone is not yet readable.
        let mut out = Vec::new();
        let mut steps = Vec::new();
        while steps.len() < 2 {
            if let (YcsbOp::Insert, step) = g.begin(&mut out).unwrap() {
                steps.push(step);
            }
        }
        let mut finish = |step: &mut Step| {
            g.on_reply(step, Reply::Simple, b"+OK\r\n", &mut out);
            g.on_reply(step, Reply::Integer, b":1\r\n", &mut out)
        };
        finish(&mut steps[1]);
        assert_eq!(shared.last_value(), 999);
        finish(&mut steps[0]);
        assert_eq!(shared.last_value(), 1001);
    }

    #[test]
    fn scans_read_each_key_the_range_returned_in_turn() {
        let (mut g, _) = gen("e", 100);
        let mut out = Vec::new();
        let mut step = loop {
            out.clear();
            if let (YcsbOp::Scan, step) = g.begin(&mut out).unwrap() {
                break step;
            }
        };
        let cmd = &commands(&out)[0];
        assert_eq!(cmd[..2], ["ZRANGEBYSCORE", "_indices"]);
        assert_eq!(cmd[3..6], ["+inf", "LIMIT", "0"]);
        let len: u64 = cmd[6].parse().unwrap();
        assert!((1..=100).contains(&len));
        let reply = b"*2\r\n$2\r\nk1\r\n$2\r\nk2\r\n";
        out.clear();
        assert_eq!(
            g.on_reply(&mut step, Reply::Aggregate, reply, &mut out),
            Progress::More
        );
        let hash = b"*2\r\n$6\r\nfield0\r\n$1\r\nv\r\n";
        assert_eq!(
            g.on_reply(&mut step, Reply::Aggregate, hash, &mut out),
            Progress::More
        );
        assert_eq!(
            g.on_reply(&mut step, Reply::Aggregate, hash, &mut out),
            Progress::Done {
                ok: true,
                found: true
            }
        );
        assert_eq!(commands(&out), [["HGETALL", "k1"], ["HGETALL", "k2"]]);
    }

    #[test]
    fn read_modify_write_updates_only_a_record_that_was_there() {
        let (mut g, _) = gen("f", 100);
        let mut out = Vec::new();
        let next_rmw = |g: &mut YcsbGen, out: &mut Vec<u8>| loop {
            out.clear();
            if let (YcsbOp::ReadModifyWrite, step) = g.begin(out).unwrap() {
                return step;
            }
        };
        let mut step = next_rmw(&mut g, &mut out);
        let key = commands(&out)[0][1].clone();
        out.clear();
        let hash = b"*2\r\n$6\r\nfield0\r\n$1\r\nv\r\n";
        assert_eq!(
            g.on_reply(&mut step, Reply::Aggregate, hash, &mut out),
            Progress::More
        );
        let update = &commands(&out)[0];
        assert_eq!(update[..2], ["HMSET".to_string(), key]);
        assert_eq!(update.len(), 4);
        assert_eq!(
            g.on_reply(&mut step, Reply::Simple, b"+OK\r\n", &mut out),
            Progress::Done {
                ok: true,
                found: true
            }
        );
        // A missing record: no update.
        let mut step = next_rmw(&mut g, &mut out);
        out.clear();
        assert_eq!(
            g.on_reply(&mut step, Reply::Aggregate, b"*0\r\n", &mut out),
            Progress::Done {
                ok: true,
                found: false
            }
        );
        assert!(out.is_empty());
    }
}
