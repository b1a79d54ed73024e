use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
type Model = BTreeMap<StreamId, Pairs>;

fn pairs_of(i: u64, shape: u8) -> Vec<(Vec<u8>, Vec<u8>)> {
    match shape % 3 {
        0 => vec![(b"a".to_vec(), i.to_string().into_bytes())],
        1 => vec![
            (b"a".to_vec(), b"x".to_vec()),
            (b"b".to_vec(), format!("v{i}").into_bytes()),
        ],
        _ => vec![(
            format!("f{}", i % 4).into_bytes(),
            vec![b'z'; (i % 7) as usize],
        )],
    }
}

fn add(s: &mut Stream, m: &mut Model, id: StreamId, p: Vec<(Vec<u8>, Vec<u8>)>, lim: NodeLimits) {
    let refs: Vec<(&[u8], &[u8])> = p.iter().map(|(f, v)| (&f[..], &v[..])).collect();
    s.append(id, &refs, lim);
    m.insert(id, p);
}

fn owned(e: &EntryRef<'_>) -> (StreamId, Pairs) {
    (
        e.id,
        e.pairs
            .iter()
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .collect(),
    )
}

fn same(s: &Stream, m: &Model) {
    s.check();
    assert_eq!(s.len() as usize, m.len());
    let got: Vec<_> = s.iter().map(|e| owned(&e)).collect();
    let want: Vec<_> = m.iter().map(|(k, v)| (*k, v.clone())).collect();
    assert_eq!(got, want);
}

#[derive(Clone, Debug)]
enum Op {
    Add { dms: u64, dseq: u64, shape: u8 },
    Del(usize),
    Range { a: usize, b: usize, rev: bool },
    MaxLen { n: u64, approx: bool, limit: u64 },
    MinId { at: usize, approx: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u64..3, 0u64..4, any::<u8>()).prop_map(|(dms, dseq, shape)| Op::Add { dms, dseq, shape }),
        2 => (0usize..400).prop_map(Op::Del),
        2 => (0usize..400, 0usize..400, any::<bool>()).prop_map(|(a, b, rev)| Op::Range { a, b, rev }),
        1 => (0u64..200, any::<bool>(), prop_oneof![Just(0u64), 1u64..50]).prop_map(|(n, approx, limit)| Op::MaxLen { n, approx, limit }),
        1 => (0usize..400, any::<bool>()).prop_map(|(at, approx)| Op::MinId { at, approx }),
    ]
}

/// An id near the model's keys (some present, some between, some outside).
fn pick(m: &Model, last: StreamId, i: usize) -> StreamId {
    if m.is_empty() || i % 5 == 4 {
        return StreamId::new((i as u64) / 3, (i as u64) % 3);
    }
    let k = *m.keys().nth(i % m.len()).unwrap();
    if i % 7 == 6 {
        k.next().unwrap_or(last)
    } else {
        k
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn stream_matches_a_btreemap_model(
        ops in prop::collection::vec(op(), 1..300),
        max_entries in prop_oneof![Just(0usize), Just(1), Just(3), Just(100)],
        max_bytes in prop_oneof![Just(0usize), Just(40), Just(4096)],
    ) {
        let lim = NodeLimits { max_bytes, max_entries };
        let mut s = Stream::new();
        let mut m = Model::new();
        let mut i = 0u64;
        for op in ops {
            match op {
                Op::Add { dms, dseq, shape } => {
                    let last = s.last_id;
                    let id = if dms > 0 {
                        StreamId::new(last.ms + dms, dseq)
                    } else {
                        StreamId::new(last.ms, last.seq + 1 + dseq)
                    };
                    i += 1;
                    add(&mut s, &mut m, id, pairs_of(i, shape), lim);
                    prop_assert_eq!(s.last_id, id);
                }
                Op::Del(at) => {
                    let id = pick(&m, s.last_id, at);
                    let was = m.remove(&id).is_some();
                    prop_assert_eq!(s.delete(id), was);
                    if was {
                        prop_assert!(s.max_deleted_id >= id);
                    }
                }
                Op::Range { a, b, rev } => {
                    let (x, y) = (pick(&m, s.last_id, a), pick(&m, s.last_id, b));
                    let got: Vec<_> = s.range(x, y, rev).map(|e| owned(&e)).collect();
                    let mut want: Vec<_> = if x <= y {
                        m.range(x..=y).map(|(k, v)| (*k, v.clone())).collect()
                    } else {
                        Vec::new()
                    };
                    if rev {
                        want.reverse();
                    }
                    let n = want.len() as u64;
                    prop_assert_eq!(s.count_range(x, y, u64::MAX), n);
                    prop_assert_eq!(s.count_range(x, y, 3), n.min(3));
                    prop_assert_eq!(got, want);
                }
                Op::MaxLen { n, approx, limit } => {
                    let before = s.len();
                    let removed = s.trim(Trim::MaxLen(n), approx, limit);
                    prop_assert_eq!(before - removed, s.len());
                    for _ in 0..removed {
                        m.pop_first();
                    }
                    if !approx && limit == 0 {
                        prop_assert_eq!(s.len(), before.min(n));
                    }
                    prop_assert!(s.len() >= n.min(before));
                    if limit > 0 {
                        prop_assert!(removed <= limit);
                    }
                }
                Op::MinId { at, approx } => {
                    let min = pick(&m, s.last_id, at);
                    let removed = s.trim(Trim::MinId(min), approx, 0);
                    let below = m.range(..min).count() as u64;
                    if approx {
                        prop_assert!(removed <= below);
                    } else {
                        prop_assert_eq!(removed, below);
                    }
                    for _ in 0..removed {
                        m.pop_first();
                    }
                }
            }
            same(&s, &m);
            let first = m.keys().next().copied();
            if let Some(f) = first {
                prop_assert_eq!(s.first_id, f);
            }
        }
    }
}

#[test]
fn nodes_hold_at_most_max_entries() {
    let mut s = Stream::new();
    let lim = NodeLimits::default();
    for i in 1..=1000u64 {
        s.append(StreamId::new(i, 0), &[(b"f", b"v")], lim);
    }
    assert_eq!(s.node_count(), 10);
    // Approximate trimming removes whole nodes only.
    assert_eq!(s.trim(Trim::MaxLen(950), true, 0), 0);
    assert_eq!(s.trim(Trim::MaxLen(850), true, 0), 100);
    assert_eq!(s.trim(Trim::MaxLen(850), false, 0), 50);
    assert_eq!(s.len(), 850);
    assert_eq!(s.first_id, StreamId::new(151, 0));
    s.check();
}

#[test]
fn five_small_fields_take_few_bytes_per_entry() {
    let mut s = Stream::new();
    let lim = NodeLimits::default();
    for i in 0..100_000u64 {
        let vals: Vec<Vec<u8>> = (0..5)
            .map(|j| format!("{}", i * 5 + j).into_bytes())
            .collect();
        let pairs: Vec<(&[u8], &[u8])> = [&b"f1"[..], b"f2", b"f3", b"f4", b"f5"]
            .iter()
            .zip(&vals)
            .map(|(f, v)| (*f, &v[..]))
            .collect();
        s.append(StreamId::new(1_700_000_000_000 + i, 0), &pairs, lim);
    }
    let per = s.memory() as f64 / 100_000.0;
    assert!(per < 24.0, "{per} bytes per entry");
}

#[test]
fn the_first_node_survives_until_its_last_entry_goes() {
    let mut s = Stream::new();
    let lim = NodeLimits::default();
    for i in 1..=3u64 {
        s.append(StreamId::new(i, 0), &[(b"f", b"v")], lim);
    }
    assert!(s.delete(StreamId::new(1, 0)));
    assert!(!s.delete(StreamId::new(1, 0)));
    assert_eq!(s.first_id, StreamId::new(2, 0));
    assert!(s.delete(StreamId::new(2, 0)));
    assert!(s.delete(StreamId::new(3, 0)));
    assert_eq!(s.node_count(), 0);
    assert_eq!(s.first_id, StreamId::MIN);
    assert_eq!(s.max_deleted_id, StreamId::new(3, 0));
    assert_eq!(s.last_id, StreamId::new(3, 0));
}

#[test]
fn values_round_trip_whether_or_not_they_are_integers() {
    let vals: Vec<Vec<u8>> = [
        "0",
        "-0",
        "7",
        "-7",
        "007",
        "+5",
        "12345678",
        "-1",
        " 1",
        "1 ",
        "",
        "x",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "4611686018427387903",
        "-4611686018427387904",
        "4611686018427387904",
        "-4611686018427387905",
        "99999999999999999999",
        "1e3",
        "0x10",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .chain([vec![0u8, 255, b'\r', b'\n'], vec![b'9'; 200]])
    .collect();
    let mut s = Stream::new();
    for (i, v) in vals.iter().enumerate() {
        s.append(
            StreamId::new(i as u64 + 1, 0),
            &[(b"f", v), (b"g", v)],
            NodeLimits::default(),
        );
    }
    let got: Vec<Vec<u8>> = s.iter().map(|e| e.pairs[0].1.to_vec()).collect();
    assert_eq!(got, vals);
    let got: Vec<Vec<u8>> = s.iter().map(|e| e.pairs[1].1.to_vec()).collect();
    assert_eq!(got, vals);
    assert!(canonical_int(b"12345678").is_some());
    assert!(canonical_int(b"-0").is_none() && canonical_int(b"007").is_none());
}
