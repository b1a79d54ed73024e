//! Encode, then decode: random values of every type, in sizes on both sides of the listpack /
//! intset limits (so every encoding the encoder picks is taken), with and without LZF, come
//! back equal from a DUMP payload and from a file. Orders the format does not keep (an intset
//! sorts its members, a hash with field TTLs is written by TTL) are compared sorted.

use darner_rdb::encode::FileWriter;
use darner_rdb::*;
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Integer-looking text, canonical or not (int encodings and their edges).
        any::<i64>().prop_map(|i| i.to_string().into_bytes()),
        (0i64..70_000).prop_map(|i| i.to_string().into_bytes()),
        Just(b"007".to_vec()),
        Just(b"-0".to_vec()),
        Just(Vec::new()),
        // Compressible runs and arbitrary bytes.
        (1usize..max, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
        prop::collection::vec(any::<u8>(), 0..max),
    ]
}

fn unique<T: Clone>(items: Vec<(Vec<u8>, T)>) -> Vec<(Vec<u8>, T)> {
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .filter(|(k, _)| seen.insert(k.clone()))
        .collect()
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("no NaN", |f| !f.is_nan()),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        (-1000i32..1000).prop_map(|i| i as f64 / 8.0),
    ]
}

fn ttl() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![Just(None), (1u64..4_000_000_000_000).prop_map(Some)]
}

fn sizes() -> impl Strategy<Value = usize> {
    prop_oneof![1usize..20, 120usize..140, 500usize..530, 600usize..700]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        bytes(3000).prop_map(Value::String),
        sizes()
            .prop_flat_map(|n| prop::collection::vec(bytes(80), n))
            .prop_map(Value::List),
        sizes()
            .prop_flat_map(|n| prop::collection::vec((bytes(70), Just(())), n))
            .prop_map(|v| Value::Set(unique(v).into_iter().map(|(m, _)| m).collect())),
        sizes()
            .prop_flat_map(|n| prop::collection::vec((bytes(70), ttl()), n))
            .prop_map(|v| Value::SetWithTtl(unique(v))),
        sizes()
            .prop_flat_map(|n| prop::collection::vec((bytes(70), score()), n))
            .prop_map(|v| Value::SortedSet(unique(v))),
        (sizes(), any::<bool>())
            .prop_flat_map(|(n, ttls)| {
                let t = if ttls {
                    ttl().boxed()
                } else {
                    Just(None).boxed()
                };
                prop::collection::vec((bytes(70), (bytes(70), t)), n)
            })
            .prop_map(|v| Value::Hash(
                unique(v)
                    .into_iter()
                    .map(|(field, (value, expire_at_ms))| HashField {
                        field,
                        value,
                        expire_at_ms,
                    })
                    .collect()
            )),
        (1usize..300).prop_map(stream),
    ]
}

/// A stream of `n` entries with one group that has read half of them.
fn stream(n: usize) -> Value {
    let entries: Vec<StreamEntry> = (0..n as u64)
        .map(|i| StreamEntry {
            id: StreamId {
                ms: 1000 + i / 3,
                seq: i % 3,
            },
            fields: vec![(b"f".to_vec(), i.to_string().into_bytes()); 1 + (i % 2) as usize],
        })
        .collect();
    let read: Vec<StreamId> = entries[..n / 2].iter().map(|e| e.id).collect();
    let last = entries.last().unwrap().id;
    Value::Stream(Box::new(Stream {
        length: n as u64,
        last_id: last,
        first_id: entries[0].id,
        max_deleted_id: StreamId::default(),
        entries_added: n as u64,
        groups: vec![StreamGroup {
            name: b"g".to_vec(),
            last_delivered_id: read.last().copied().unwrap_or_default(),
            entries_read: Some(read.len() as u64),
            pending: read
                .iter()
                .map(|id| PendingEntry {
                    id: *id,
                    delivery_time_ms: 1_700_000_000_000 + id.ms,
                    delivery_count: 1 + id.seq,
                    consumer: b"alice".to_vec(),
                })
                .collect(),
            consumers: vec![StreamConsumer {
                name: b"alice".to_vec(),
                seen_time_ms: 1_700_000_000_000,
                active_time_ms: 1_700_000_000_000,
                pending: read.clone(),
            }],
        }],
        entries,
    }))
}

/// `v` with the orders the format may change sorted.
fn normal(v: &Value) -> Value {
    let mut v = v.clone();
    match &mut v {
        Value::Set(m) => m.sort(),
        Value::SetWithTtl(m) => m.sort(),
        Value::Hash(f) => f.sort_by(|a, b| a.field.cmp(&b.field)),
        Value::SortedSet(m) => m.sort_by(|a, b| a.0.cmp(&b.0)),
        _ => {}
    }
    v
}

/// Scores compare by their bits (-0.0 is not 0.0 here).
fn same(a: &Value, b: &Value) -> bool {
    match (normal(a), normal(b)) {
        (Value::SortedSet(x), Value::SortedSet(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(&y)
                    .all(|(p, q)| p.0 == q.0 && p.1.to_bits() == q.1.to_bits())
        }
        (x, y) => x == y,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn dump_payloads_decode_to_what_was_encoded(v in value(), compression in any::<bool>()) {
        let payload = dump_payload(&v, compression);
        let (back, _) = decode_dump_payload(&payload).expect("our own payload decodes");
        prop_assert!(same(&v, &back), "{:?}\n!=\n{:?}", v, back);
    }

    #[test]
    fn files_decode_to_what_was_written(
        vs in prop::collection::vec((value(), ttl()), 1..6),
        compression in any::<bool>(),
    ) {
        let opts = EncodeOptions { compression };
        let mut w = FileWriter::new(WRITTEN_VERSION_FIELD_TTL, true, opts);
        w.aux(b"redis-ver", b"7.0.0");
        w.select_db(0);
        for (i, (v, expire)) in vs.iter().enumerate() {
            w.entry(format!("key:{i}").as_bytes(), v, *expire);
        }
        let file = w.finish();
        let (_, keys, _) = decode_file(&file).expect("our own file decodes");
        prop_assert_eq!(keys.len(), vs.len());
        for (k, (v, expire)) in keys.iter().zip(&vs) {
            prop_assert_eq!(k.expire_at_ms, *expire);
            prop_assert!(same(v, &k.value), "{:?}\n!=\n{:?}", v, k.value);
        }
    }
}
