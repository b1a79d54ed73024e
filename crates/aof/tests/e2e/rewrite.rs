//! A rewrite's base as commands (`darner_aof::rewrite`): values of every type rendered, read
//! back with the reader, and replayed on a small model of the commands give the values back;
//! no variadic command carries more than 64 elements.

use darner_aof::rewrite::{render_header, render_key, ITEMS_PER_CMD};
use darner_aof::{read_all, render_select, Bytes, Ending};
use darner_rdb::{
    HashField, PendingEntry, Stream, StreamConsumer, StreamEntry, StreamGroup, StreamId, Value,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A value as the model keeps it: order-free collections, stream groups by name.
#[derive(Clone, Debug, PartialEq)]
enum M {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(BTreeMap<Vec<u8>, Option<u64>>),
    ZSet(BTreeMap<Vec<u8>, u64>),
    Hash(BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>),
    Stream(MStream),
}

/// A stream entry: its id and field/value pairs.
type MEntry = (StreamId, Vec<(Vec<u8>, Vec<u8>)>);

#[derive(Clone, Debug, Default, PartialEq)]
struct MStream {
    entries: Vec<MEntry>,
    last_id: StreamId,
    entries_added: u64,
    max_deleted_id: StreamId,
    /// Group name -> (last delivered id, entries read, consumers -> pending (id, time, count)).
    groups: BTreeMap<Vec<u8>, MGroup>,
}

#[derive(Clone, Debug, Default, PartialEq)]
struct MGroup {
    last_id: StreamId,
    entries_read: Option<u64>,
    consumers: BTreeMap<Vec<u8>, Vec<(StreamId, u64, u64)>>,
}

/// What a base holds: the libraries, and per (database, key) the value and its TTL.
#[derive(Debug, Default, PartialEq)]
struct Data {
    libraries: Vec<Vec<u8>>,
    keys: BTreeMap<(u32, Vec<u8>), (M, Option<i64>)>,
}

fn model_of(v: &Value) -> M {
    match v {
        Value::String(s) => M::Str(s.clone()),
        Value::List(l) => M::List(l.clone()),
        Value::Set(s) => M::Set(s.iter().map(|m| (m.clone(), None)).collect()),
        Value::SetWithTtl(s) => M::Set(s.iter().cloned().collect()),
        Value::SortedSet(z) => M::ZSet(z.iter().map(|(m, s)| (m.clone(), s.to_bits())).collect()),
        Value::Hash(h) => M::Hash(
            h.iter()
                .map(|f| (f.field.clone(), (f.value.clone(), f.expire_at_ms)))
                .collect(),
        ),
        Value::Stream(s) => M::Stream(MStream {
            entries: s.entries.iter().map(|e| (e.id, e.fields.clone())).collect(),
            last_id: s.last_id,
            entries_added: s.entries_added,
            max_deleted_id: s.max_deleted_id,
            groups: s
                .groups
                .iter()
                .map(|g| {
                    let consumers = g
                        .consumers
                        .iter()
                        .map(|c| {
                            let pel = c
                                .pending
                                .iter()
                                .map(|id| {
                                    let p = g.pending.iter().find(|p| p.id == *id).unwrap();
                                    (*id, p.delivery_time_ms, p.delivery_count)
                                })
                                .collect();
                            (c.name.clone(), pel)
                        })
                        .collect();
                    (
                        g.name.clone(),
                        MGroup {
                            last_id: g.last_delivered_id,
                            entries_read: g.entries_read,
                            consumers,
                        },
                    )
                })
                .collect(),
        }),
    }
}

fn text(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap()
}

fn num<T: std::str::FromStr>(b: &[u8]) -> T
where
    T::Err: std::fmt::Debug,
{
    text(b).parse().unwrap()
}

fn sid(b: &[u8]) -> StreamId {
    let (ms, seq) = text(b).split_once('-').unwrap();
    StreamId {
        ms: ms.parse().unwrap(),
        seq: seq.parse().unwrap(),
    }
}

fn upper(b: &[u8]) -> String {
    text(b).to_ascii_uppercase()
}

/// Replays a base's commands on the model; checks each variadic command's size on the way.
fn replay(base: &[u8]) -> Data {
    let (entries, ending) = read_all(base).unwrap();
    assert!(
        matches!(ending, Ending::Complete { .. } | Ending::Empty),
        "{ending:?}"
    );
    let mut d = Data::default();
    let mut db = 0u32;
    for e in entries {
        let Some(argv) = e.argv() else { continue };
        let a: Vec<&[u8]> = argv.iter().map(|x: &Bytes| &x[..]).collect();
        let name = upper(a[0]);
        if name == "SELECT" {
            db = num(a[1]);
            continue;
        }
        if name == "FUNCTION" {
            assert_eq!(upper(a[1]), "LOAD");
            d.libraries.push(a[2].to_vec());
            continue;
        }
        if name == "XCLAIM" {
            let Some((M::Stream(s), _)) = d.keys.get_mut(&(db, a[1].to_vec())) else {
                panic!("XCLAIM on no stream")
            };
            assert_eq!(a.len(), 12);
            assert_eq!(
                (upper(a[6]), upper(a[8]), upper(a[10]), upper(a[11])),
                (
                    "TIME".into(),
                    "RETRYCOUNT".into(),
                    "JUSTID".into(),
                    "FORCE".into()
                )
            );
            let g = s.groups.get_mut(a[2]).unwrap();
            g.consumers
                .entry(a[3].to_vec())
                .or_default()
                .push((sid(a[5]), num(a[7]), num(a[9])));
            continue;
        }
        if name == "XGROUP" {
            let Some((M::Stream(s), _)) = d.keys.get_mut(&(db, a[2].to_vec())) else {
                panic!("XGROUP on no stream")
            };
            match upper(a[1]).as_str() {
                "CREATE" => {
                    assert_eq!(upper(a[5]), "ENTRIESREAD");
                    let read: i64 = num(a[6]);
                    let g = MGroup {
                        last_id: sid(a[4]),
                        entries_read: (read >= 0).then_some(read as u64),
                        consumers: BTreeMap::new(),
                    };
                    assert!(s.groups.insert(a[3].to_vec(), g).is_none());
                }
                "CREATECONSUMER" => {
                    let g = s.groups.get_mut(a[3]).unwrap();
                    assert!(g.consumers.insert(a[4].to_vec(), Vec::new()).is_none());
                }
                other => panic!("unexpected XGROUP {other}"),
            }
            continue;
        }
        let key = (db, a[1].to_vec());
        let slot = d.keys.entry(key);
        match name.as_str() {
            "SET" => {
                slot.or_insert((M::Str(a[2].to_vec()), None));
            }
            "PEXPIREAT" => {
                let (_, ttl) = match slot {
                    std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                    _ => panic!("PEXPIREAT before its key"),
                };
                *ttl = Some(num(a[2]));
            }
            "RPUSH" => {
                assert!(a.len() - 2 <= ITEMS_PER_CMD && a.len() > 2);
                let (v, _) = slot.or_insert((M::List(Vec::new()), None));
                let M::List(l) = v else { panic!() };
                l.extend(a[2..].iter().map(|x| x.to_vec()));
            }
            "SADD" | "SADDEX" => {
                let (ttl, members) = if name == "SADDEX" {
                    assert_eq!(upper(a[2]), "PXAT");
                    (Some(num::<u64>(a[3])), &a[4..])
                } else {
                    (None, &a[2..])
                };
                assert!(!members.is_empty() && members.len() <= ITEMS_PER_CMD);
                let (v, _) = slot.or_insert((M::Set(BTreeMap::new()), None));
                let M::Set(s) = v else { panic!() };
                for m in members {
                    assert!(s.insert(m.to_vec(), ttl).is_none());
                }
            }
            "ZADD" => {
                assert!(
                    a.len().is_multiple_of(2) && a.len() > 2 && (a.len() - 2) / 2 <= ITEMS_PER_CMD
                );
                let (v, _) = slot.or_insert((M::ZSet(BTreeMap::new()), None));
                let M::ZSet(z) = v else { panic!() };
                for p in a[2..].chunks(2) {
                    z.insert(p[1].to_vec(), num::<f64>(p[0]).to_bits());
                }
            }
            "HMSET" | "HSET" => {
                assert!(
                    a.len().is_multiple_of(2) && a.len() > 2 && (a.len() - 2) / 2 <= ITEMS_PER_CMD
                );
                let (v, _) = slot.or_insert((M::Hash(BTreeMap::new()), None));
                let M::Hash(h) = v else { panic!() };
                for p in a[2..].chunks(2) {
                    h.insert(p[0].to_vec(), (p[1].to_vec(), None));
                }
            }
            "HPEXPIREAT" => {
                assert_eq!(
                    (upper(a[3]).as_str(), a[4], a.len()),
                    ("FIELDS", &b"1"[..], 6)
                );
                let (M::Hash(h), _) = slot.or_insert((M::Str(vec![]), None)) else {
                    panic!("HPEXPIREAT on no hash")
                };
                h.get_mut(a[5]).unwrap().1 = Some(num(a[2]));
            }
            "XADD" => {
                let (v, _) = slot.or_insert((M::Stream(MStream::default()), None));
                let M::Stream(s) = v else { panic!() };
                let (maxlen0, rest) = if upper(a[2]) == "MAXLEN" {
                    assert_eq!(a[3], b"0");
                    (true, &a[4..])
                } else {
                    (false, &a[2..])
                };
                let id = sid(rest[0]);
                assert!(s.entries.last().is_none_or(|(l, _)| *l < id));
                let fields = rest[1..]
                    .chunks(2)
                    .map(|p| (p[0].to_vec(), p[1].to_vec()))
                    .collect();
                s.entries.push((id, fields));
                if maxlen0 {
                    s.entries.clear();
                }
            }
            "XSETID" => {
                let (M::Stream(s), _) = slot.or_insert((M::Str(vec![]), None)) else {
                    panic!()
                };
                s.last_id = sid(a[2]);
                assert_eq!(upper(a[3]), "ENTRIESADDED");
                s.entries_added = num(a[4]);
                assert_eq!(upper(a[5]), "MAXDELETEDID");
                s.max_deleted_id = sid(a[6]);
            }
            other => panic!("unexpected command {other}"),
        }
    }
    d
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..12),
        prop::collection::vec(prop::sample::select(b"*$\r\n0123456789-".to_vec()), 0..6),
        (0i64..1000).prop_map(|n| n.to_string().into_bytes()),
    ]
}

fn ttl() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        3 => Just(None),
        1 => (1_700_000_000_000u64..1_700_000_000_100).prop_map(Some),
    ]
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("no NaN", |s| !s.is_nan()),
        (-1000i32..1000).prop_map(|n| f64::from(n) / 8.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
    ]
}

/// Collections either small or past 64 elements (split over several commands).
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![1usize..10, 60usize..200]
}

fn unique<T>(v: Vec<(Vec<u8>, T)>) -> Vec<(Vec<u8>, T)> {
    let mut seen = std::collections::HashSet::new();
    v.into_iter()
        .filter(|(k, _)| seen.insert(k.clone()))
        .collect()
}

fn stream() -> impl Strategy<Value = Stream> {
    (
        prop::collection::vec(
            (1u64..5, prop::collection::vec((bytes(), bytes()), 1..3)),
            0..80,
        ),
        0u64..3,
        prop::collection::vec(
            (
                bytes(),
                prop::option::of(0u64..100),
                prop::collection::vec((bytes(), prop::collection::vec(any::<u8>(), 0..6)), 0..4),
            ),
            0..3,
        ),
        any::<u64>(),
    )
        .prop_map(|(raw, extra, groups, seed)| {
            let mut ms = 0;
            let entries: Vec<StreamEntry> = raw
                .into_iter()
                .map(|(step, fields)| {
                    ms += step;
                    StreamEntry {
                        id: StreamId { ms, seq: 0 },
                        fields,
                    }
                })
                .collect();
            let last = entries
                .last()
                .map_or(StreamId { ms: 0, seq: extra }, |e| e.id);
            let mut rng = seed;
            let mut next = move |n: u64| {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (rng >> 33) % n.max(1)
            };
            let groups = unique(
                groups
                    .into_iter()
                    .map(|(name, read, consumers)| (name, (read, consumers)))
                    .collect(),
            )
            .into_iter()
            .map(|(name, (read, consumers))| {
                let consumers = unique(consumers);
                let mut pending = Vec::new();
                let mut cons = Vec::new();
                for (cname, picks) in consumers {
                    let mut ids = Vec::new();
                    for p in picks {
                        if entries.is_empty() {
                            break;
                        }
                        let id = entries[usize::from(p) % entries.len()].id;
                        if pending.iter().any(|x: &PendingEntry| x.id == id) {
                            continue;
                        }
                        pending.push(PendingEntry {
                            id,
                            delivery_time_ms: 1_700_000_000_000 + next(1000),
                            delivery_count: next(5),
                            consumer: cname.clone(),
                        });
                        ids.push(id);
                    }
                    ids.sort();
                    cons.push(StreamConsumer {
                        name: cname,
                        seen_time_ms: 0,
                        active_time_ms: 0,
                        pending: ids,
                    });
                }
                pending.sort_by_key(|p| p.id);
                StreamGroup {
                    name,
                    last_delivered_id: StreamId {
                        ms: next(last.ms + 1),
                        seq: 0,
                    },
                    entries_read: read,
                    pending,
                    consumers: cons,
                }
            })
            .collect();
            Stream {
                length: entries.len() as u64,
                entries_added: entries.len() as u64 + extra,
                max_deleted_id: StreamId {
                    ms: next(last.ms + 1).min(last.ms),
                    seq: 0,
                },
                last_id: last,
                first_id: StreamId::default(),
                entries,
                groups,
            }
        })
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        bytes().prop_map(Value::String),
        size()
            .prop_flat_map(|n| prop::collection::vec(bytes(), n))
            .prop_map(Value::List),
        size()
            .prop_flat_map(|n| prop::collection::vec((bytes(), ttl()), n))
            .prop_map(|v| {
                let v = unique(v);
                if v.iter().any(|(_, t)| t.is_some()) {
                    Value::SetWithTtl(v)
                } else {
                    Value::Set(v.into_iter().map(|(m, _)| m).collect())
                }
            }),
        size()
            .prop_flat_map(|n| prop::collection::vec((bytes(), score()), n))
            .prop_map(|v| Value::SortedSet(unique(v))),
        size()
            .prop_flat_map(|n| prop::collection::vec((bytes(), bytes(), ttl()), n))
            .prop_map(|v| {
                let v = unique(v.into_iter().map(|(f, x, t)| (f, (x, t))).collect());
                Value::Hash(
                    v.into_iter()
                        .map(|(field, (value, expire_at_ms))| HashField {
                            field,
                            value,
                            expire_at_ms,
                        })
                        .collect(),
                )
            }),
        stream().prop_map(|s| Value::Stream(Box::new(s))),
    ]
}

type Db = Vec<(Vec<u8>, Value, Option<i64>)>;

fn dataset() -> impl Strategy<Value = (Vec<Vec<u8>>, Vec<Db>)> {
    (
        prop::collection::vec(bytes(), 0..3),
        prop::collection::vec(
            prop::collection::vec(
                (
                    bytes(),
                    value(),
                    prop::option::of(1_700_000_000_000i64..1_800_000_000_000),
                ),
                0..6,
            ),
            1..4,
        ),
    )
        .prop_map(|(libs, dbs)| {
            let dbs = dbs
                .into_iter()
                .map(|keys| {
                    unique(keys.into_iter().map(|(k, v, t)| (k, (v, t))).collect())
                        .into_iter()
                        .map(|(k, (v, t))| (k, v, t))
                        .collect()
                })
                .collect();
            (libs, dbs)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn a_base_of_commands_replays_to_the_values_it_was_written_from(
        (libs, dbs) in dataset(),
        ts in prop::option::of(1_700_000_000i64..1_800_000_000),
    ) {
        let mut base = Vec::new();
        render_header(&mut base, ts, &libs);
        let mut want = Data { libraries: libs.clone(), keys: BTreeMap::new() };
        for (i, keys) in dbs.iter().enumerate() {
            if keys.is_empty() {
                continue;
            }
            render_select(&mut base, i as u32);
            for (k, v, t) in keys {
                render_key(&mut base, k, v, *t);
                want.keys.insert((i as u32, k.clone()), (model_of(v), *t));
            }
        }
        if ts.is_some() {
            prop_assert!(base.starts_with(b"#TS:"));
        } else if !base.is_empty() {
            prop_assert_eq!(base[0], b'*');
        }
        let got = replay(&base);
        prop_assert_eq!(got, want);
    }
}

#[test]
fn a_big_list_goes_as_rpush_commands_of_64_elements() {
    let l: Vec<Vec<u8>> = (0..130).map(|i| format!("e{i}").into_bytes()).collect();
    let mut out = Vec::new();
    render_key(&mut out, b"k", &Value::List(l.clone()), Some(1234));
    let (entries, _) = read_all(&out).unwrap();
    let cmds: Vec<Vec<Bytes>> = entries.iter().map(|e| e.argv().unwrap().to_vec()).collect();
    let sizes: Vec<(&[u8], usize)> = cmds.iter().map(|c| (&c[0][..], c.len())).collect();
    assert_eq!(
        sizes,
        vec![
            (&b"RPUSH"[..], 66),
            (&b"RPUSH"[..], 66),
            (&b"RPUSH"[..], 4),
            (&b"PEXPIREAT"[..], 3)
        ]
    );
    assert_eq!(&cmds[3][2][..], b"1234");
    let pushed: Vec<Vec<u8>> = cmds[..3]
        .iter()
        .flat_map(|c| c[2..].iter().map(|x| x.to_vec()))
        .collect();
    assert_eq!(pushed, l);
}

#[test]
fn an_empty_stream_is_made_with_xadd_maxlen_0_then_xsetid() {
    let s = Stream {
        last_id: StreamId { ms: 5, seq: 2 },
        entries_added: 3,
        max_deleted_id: StreamId { ms: 5, seq: 2 },
        groups: vec![StreamGroup {
            name: b"g".to_vec(),
            last_delivered_id: StreamId { ms: 5, seq: 2 },
            entries_read: None,
            pending: vec![],
            consumers: vec![StreamConsumer {
                name: b"c".to_vec(),
                seen_time_ms: 1,
                active_time_ms: 1,
                pending: vec![],
            }],
        }],
        ..Stream::default()
    };
    let mut out = Vec::new();
    render_key(&mut out, b"s", &Value::Stream(Box::new(s)), None);
    let (entries, _) = read_all(&out).unwrap();
    let cmds: Vec<String> = entries
        .iter()
        .map(|e| {
            e.argv()
                .unwrap()
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        cmds,
        [
            "XADD s MAXLEN 0 0-1 x y",
            "XSETID s 5-2 ENTRIESADDED 3 MAXDELETEDID 5-2",
            "XGROUP CREATE s g 5-2 ENTRIESREAD -1",
            "XGROUP CREATECONSUMER s g c",
        ]
    );
}
