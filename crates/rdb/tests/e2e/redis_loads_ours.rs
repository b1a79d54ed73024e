//! What the encoder writes, loaded by a real Redis (Debian's redis-server 7.0, the oldest
//! version Darner's RDB 10 targets): DUMP payloads of every type and size class RESTOREd and
//! read back with commands, and a whole file written with `FileWriter` loaded at startup.

use crate::common::{Redis, Rng, TempDir};
use darner_rdb::encode::{self, FileWriter};
use darner_rdb::{
    dump_payload, object_type as t, EncodeOptions, HashField, PendingEntry, Stream, StreamConsumer,
    StreamEntry, StreamGroup, StreamId, Value,
};
use redis::Value as R;
use std::collections::HashMap;

fn restore(con: &mut redis::Connection, key: &[u8], payload: &[u8]) {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(payload)
        .arg("REPLACE")
        .query::<()>(con)
        .unwrap_or_else(|e| panic!("RESTORE {:?}: {e}", String::from_utf8_lossy(key)));
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

/// Reads `key` back with commands and compares with `value`.
fn assert_loaded(con: &mut redis::Connection, key: &[u8], value: &Value) {
    let name = String::from_utf8_lossy(key).into_owned();
    match value {
        Value::String(s) => {
            let got: Vec<u8> = redis::cmd("GET").arg(key).query(con).unwrap();
            assert!(
                got == *s,
                "{name}: GET differs (len {} vs {})",
                got.len(),
                s.len()
            );
        }
        Value::List(items) => {
            let got: Vec<Vec<u8>> = redis::cmd("LRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .query(con)
                .unwrap();
            assert!(got == *items, "{name}: LRANGE differs");
        }
        Value::Set(members) => {
            let got: Vec<Vec<u8>> = redis::cmd("SMEMBERS").arg(key).query(con).unwrap();
            assert!(
                sorted(got) == sorted(members.clone()),
                "{name}: SMEMBERS differs"
            );
        }
        Value::Hash(fields) => {
            let got: Vec<Vec<u8>> = redis::cmd("HGETALL").arg(key).query(con).unwrap();
            let mut got: Vec<(Vec<u8>, Vec<u8>)> = got
                .chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect();
            got.sort();
            let mut want: Vec<(Vec<u8>, Vec<u8>)> = fields
                .iter()
                .map(|f| (f.field.clone(), f.value.clone()))
                .collect();
            want.sort();
            assert!(got == want, "{name}: HGETALL differs");
        }
        Value::SortedSet(members) => {
            let got: Vec<Vec<u8>> = redis::cmd("ZRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(con)
                .unwrap();
            let got: Vec<(Vec<u8>, u64)> = got
                .chunks(2)
                .map(|p| {
                    let s = std::str::from_utf8(&p[1]).unwrap();
                    (p[0].clone(), s.parse::<f64>().unwrap().to_bits())
                })
                .collect();
            let mut want = members.clone();
            want.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then_with(|| a.0.cmp(&b.0)));
            let want: Vec<(Vec<u8>, u64)> =
                want.into_iter().map(|(m, s)| (m, s.to_bits())).collect();
            assert_eq!(got.len(), want.len(), "{name}: ZCARD");
            for (g, w) in got.iter().zip(&want) {
                assert!(g == w, "{name}: {g:?} vs {w:?}");
            }
        }
        Value::Stream(s) => assert_stream(con, key, s),
        Value::SetWithTtl(_) => unreachable!("no Redis loads Darner's type 200"),
    }
}

fn id_text(id: StreamId) -> Vec<u8> {
    format!("{}-{}", id.ms, id.seq).into_bytes()
}

fn bulk(v: &R) -> Vec<u8> {
    match v {
        R::BulkString(b) => b.clone(),
        R::SimpleString(s) => s.clone().into_bytes(),
        other => panic!("not a string: {other:?}"),
    }
}

fn int(v: &R) -> i64 {
    match v {
        R::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

fn arr(v: &R) -> &[R] {
    match v {
        R::Array(a) => a,
        other => panic!("not an array: {other:?}"),
    }
}

/// A RESP2 flat map (`[k1, v1, k2, v2 ...]`).
fn map(v: &R) -> HashMap<String, R> {
    arr(v)
        .chunks(2)
        .map(|p| (String::from_utf8(bulk(&p[0])).unwrap(), p[1].clone()))
        .collect()
}

fn assert_stream(con: &mut redis::Connection, key: &[u8], s: &Stream) {
    let name = String::from_utf8_lossy(key).into_owned();
    let got: R = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(con)
        .unwrap();
    let got = arr(&got);
    assert_eq!(got.len(), s.entries.len(), "{name}: XLEN");
    for (g, e) in got.iter().zip(&s.entries) {
        let g = arr(g);
        assert_eq!(bulk(&g[0]), id_text(e.id), "{name}: id");
        let fv: Vec<Vec<u8>> = arr(&g[1]).iter().map(bulk).collect();
        let want: Vec<Vec<u8>> = e
            .fields
            .iter()
            .flat_map(|(f, v)| [f.clone(), v.clone()])
            .collect();
        assert!(fv == want, "{name}: fields of {:?}", e.id);
    }
    let info: R = redis::cmd("XINFO")
        .arg("STREAM")
        .arg(key)
        .arg("FULL")
        .arg("COUNT")
        .arg(0)
        .query(con)
        .unwrap();
    let info = map(&info);
    assert_eq!(int(&info["length"]) as usize, s.entries.len());
    assert_eq!(bulk(&info["last-generated-id"]), id_text(s.last_id));
    assert_eq!(
        bulk(&info["max-deleted-entry-id"]),
        id_text(s.max_deleted_id)
    );
    assert_eq!(int(&info["entries-added"]) as u64, s.entries_added);
    assert_eq!(bulk(&info["recorded-first-entry-id"]), id_text(s.first_id));
    let groups = arr(&info["groups"]);
    assert_eq!(groups.len(), s.groups.len(), "{name}: groups");
    for (g, want) in groups.iter().zip(&s.groups) {
        let g = map(g);
        assert_eq!(bulk(&g["name"]), want.name);
        assert_eq!(
            bulk(&g["last-delivered-id"]),
            id_text(want.last_delivered_id)
        );
        match want.entries_read {
            Some(n) => assert_eq!(int(&g["entries-read"]) as u64, n),
            None => assert_eq!(g["entries-read"], R::Nil),
        }
        let pel = arr(&g["pending"]);
        assert_eq!(pel.len(), want.pending.len());
        for (p, w) in pel.iter().zip(&want.pending) {
            let p = arr(p);
            assert_eq!(bulk(&p[0]), id_text(w.id));
            assert_eq!(bulk(&p[1]), w.consumer);
            assert_eq!(int(&p[2]) as u64, w.delivery_time_ms);
            assert_eq!(int(&p[3]) as u64, w.delivery_count);
        }
        let consumers = arr(&g["consumers"]);
        assert_eq!(consumers.len(), want.consumers.len());
        for (c, w) in consumers.iter().zip(&want.consumers) {
            let c = map(c);
            assert_eq!(bulk(&c["name"]), w.name);
            assert_eq!(int(&c["seen-time"]) as u64, w.seen_time_ms);
            let ids: Vec<Vec<u8>> = arr(&c["pending"])
                .iter()
                .map(|p| bulk(&arr(p)[0]))
                .collect();
            let want_ids: Vec<Vec<u8>> = w.pending.iter().map(|id| id_text(*id)).collect();
            assert_eq!(ids, want_ids);
        }
    }
}

/// RESTOREs each value (with compression on and off) and reads it back; checks the payload's
/// type byte is the one expected for it.
fn check_all(values: &[(String, Value, u8)]) {
    let redis = Redis::start();
    let mut con = redis.client();
    for compression in [true, false] {
        for (key, value, ty) in values {
            let payload = dump_payload(value, compression);
            assert_eq!(payload[0], *ty, "{key}: object type");
            assert_eq!(
                &payload[payload.len() - 10..payload.len() - 8],
                &[10, 0],
                "{key}"
            );
            restore(&mut con, key.as_bytes(), &payload);
            assert_loaded(&mut con, key.as_bytes(), value);
        }
    }
}

/// Integers of every width and their edges, as text.
fn int_texts() -> Vec<Vec<u8>> {
    let mut v: Vec<i64> = vec![
        0, 1, -1, 7, 127, 128, -128, -129, 255, 256, 4095, 4096, -4096, -4097, 32767, 32768,
        -32768, -32769, 65535, 8_388_607, 8_388_608, -8_388_608, -8_388_609,
    ];
    v.extend([
        i32::MAX as i64,
        i32::MAX as i64 + 1,
        i32::MIN as i64,
        i32::MIN as i64 - 1,
        1 << 32,
        i64::MAX,
        i64::MIN,
        i64::MAX - 1,
        i64::MIN + 1,
    ]);
    v.into_iter().map(|i| i.to_string().into_bytes()).collect()
}

/// Strings that look like integers but are not canonical, so must stay strings.
fn int_like_texts() -> Vec<Vec<u8>> {
    [
        "007",
        "+1",
        "-0",
        " 1",
        "1 ",
        "1.5",
        "1e3",
        "0x10",
        "00",
        "-",
        "9223372036854775808",
        "-9223372036854775809",
        "",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

#[test]
fn strings_of_every_encoding_load_back() {
    let mut rng = Rng::new(1);
    let mut values: Vec<(String, Value, u8)> = Vec::new();
    let mut add = |k: String, s: Vec<u8>| values.push((k, Value::String(s), t::STRING));
    for (i, s) in int_texts().into_iter().chain(int_like_texts()).enumerate() {
        add(format!("int:{i}"), s);
    }
    add(
        "binary".into(),
        [&b"\0 \r\n\xff\xfe"[..], &rng.bytes(100)].concat(),
    );
    add("compressible:300".into(), b"abcdefghij".repeat(30));
    add("short:21".into(), vec![b'a'; 21]);
    add("random:16k".into(), rng.bytes(16 * 1024));
    let unit = rng.bytes(4096);
    add("1mb".into(), unit.repeat(256));
    add("44".into(), rng.word(44));
    add("crlf".into(), b"a\r\nb".to_vec());
    check_all(&values);
    // The integer encodings are the ones Redis would use: an int8 for 7, compression for
    // repetitive text.
    assert_eq!(
        dump_payload(&Value::String(b"7".to_vec()), true)[..3],
        [0, 0xc0, 7]
    );
    assert_eq!(
        dump_payload(&Value::String(b"abc".repeat(10)), true)[1],
        0xc3
    );
}

fn listpack_ints_and_strings(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut v = int_texts();
    v.extend(int_like_texts());
    v.extend([
        vec![],
        vec![b'x'],
        rng.word(63),
        rng.word(64),
        rng.bytes(20),
    ]);
    v
}

#[test]
fn lists_small_and_big_load_back() {
    let mut rng = Rng::new(2);
    let small = listpack_ints_and_strings(&mut rng);
    let mut big = Vec::new();
    for i in 0..20_000u64 {
        let (shift, n) = (rng.below(63), rng.below(70) as usize);
        big.push(match i % 5 {
            0 | 1 => ((rng.next() as i64) >> shift).to_string().into_bytes(),
            2 => rng.word(1 + n % 12),
            3 => rng.bytes(n),
            _ => format!("{i}").into_bytes(),
        });
    }
    let values = vec![
        ("list:small".into(), Value::List(small), t::LIST_QUICKLIST_2),
        (
            "list:one".into(),
            Value::List(vec![b"x".to_vec()]),
            t::LIST_QUICKLIST_2,
        ),
        (
            "list:empties".into(),
            Value::List(vec![vec![]; 10]),
            t::LIST_QUICKLIST_2,
        ),
        (
            "list:strsizes".into(),
            Value::List(vec![rng.word(4095), rng.word(4096)]),
            t::LIST,
        ),
        (
            "list:4095".into(),
            Value::List(vec![rng.word(4095), b"1".to_vec()]),
            t::LIST_QUICKLIST_2,
        ),
        ("list:large".into(), Value::List(big), t::LIST),
        (
            "list:huge-element".into(),
            Value::List(vec![rng.bytes(100_000)]),
            t::LIST,
        ),
    ];
    check_all(&values);
}

#[test]
fn sets_intset_and_plain_load_back() {
    let mut rng = Rng::new(3);
    let ints16: Vec<Vec<u8>> = (0..20)
        .map(|i| (i * 100 - 1000).to_string().into_bytes())
        .collect();
    let ints32 = vec![b"1".to_vec(), b"-70000".to_vec(), b"2147483647".to_vec()];
    let ints64 = vec![
        b"1".to_vec(),
        i64::MIN.to_string().into_bytes(),
        i64::MAX.to_string().into_bytes(),
    ];
    let n512: Vec<Vec<u8>> = (0..512).map(|i| (i * 7).to_string().into_bytes()).collect();
    let n513: Vec<Vec<u8>> = (0..513).map(|i| (i * 7).to_string().into_bytes()).collect();
    let mut mixed = vec![
        b"1".to_vec(),
        b"007".to_vec(),
        b"-0".to_vec(),
        vec![],
        rng.bytes(10),
    ];
    mixed.push(b"abc".to_vec());
    let large: Vec<Vec<u8>> = (0..2000)
        .map(|i| format!("m:{i}:{}", i * 31).into_bytes())
        .collect();
    let values = vec![
        ("set:int16".into(), Value::Set(ints16), t::SET_INTSET),
        ("set:int32".into(), Value::Set(ints32), t::SET_INTSET),
        ("set:int64".into(), Value::Set(ints64), t::SET_INTSET),
        ("set:intset:512".into(), Value::Set(n512), t::SET_INTSET),
        ("set:bigints".into(), Value::Set(n513), t::SET),
        ("set:mixed".into(), Value::Set(mixed), t::SET),
        ("set:large".into(), Value::Set(large), t::SET),
        ("set:long".into(), Value::Set(vec![rng.word(300)]), t::SET),
    ];
    check_all(&values);
}

fn hf(field: Vec<u8>, value: Vec<u8>) -> HashField {
    HashField {
        field,
        value,
        expire_at_ms: None,
    }
}

#[test]
fn hashes_listpack_and_plain_load_back() {
    let mut rng = Rng::new(4);
    let mut small: Vec<HashField> = listpack_ints_and_strings(&mut rng)
        .into_iter()
        .enumerate()
        .map(|(i, v)| hf(format!("f{i}").into_bytes(), v))
        .collect();
    small.push(hf(vec![], b"empty field name".to_vec()));
    small.push(hf(b"\0bin\xff".to_vec(), b"".to_vec()));
    small.push(hf(b"12".to_vec(), b"-5".to_vec()));
    let n = |count: usize, rng: &mut Rng| -> Vec<HashField> {
        (0..count)
            .map(|i| hf(format!("field:{i}").into_bytes(), rng.word(8)))
            .collect()
    };
    let values = vec![
        ("hash:small".into(), Value::Hash(small), t::HASH_LISTPACK),
        (
            "hash:512".into(),
            Value::Hash(n(512, &mut rng)),
            t::HASH_LISTPACK,
        ),
        ("hash:513".into(), Value::Hash(n(513, &mut rng)), t::HASH),
        ("hash:large".into(), Value::Hash(n(5000, &mut rng)), t::HASH),
        (
            "hash:longval".into(),
            Value::Hash(vec![
                hf(b"a".to_vec(), rng.word(65)),
                hf(b"b".to_vec(), b"1".to_vec()),
            ]),
            t::HASH,
        ),
        (
            "hash:64".into(),
            Value::Hash(vec![hf(rng.word(64), rng.word(64))]),
            t::HASH_LISTPACK,
        ),
    ];
    check_all(&values);
}

fn edge_scores() -> Vec<f64> {
    vec![
        f64::NEG_INFINITY,
        f64::INFINITY,
        0.1,
        -0.0,
        0.0,
        5e-324,
        -5e-324,
        1e300,
        -1e300,
        f64::MAX,
        f64::MIN,
        9007199254740993.0, // 2^53 + 1, stored as 2^53
        4503599627370496.0,
        4503599627370495.0,
        -4503599627370495.0,
        1e-10,
        1.5,
        -3.75,
        1.0,
        100.0,
        1e17,
    ]
}

#[test]
fn sorted_sets_with_edge_scores_load_back() {
    let mut rng = Rng::new(5);
    let mut small: Vec<(Vec<u8>, f64)> = edge_scores()
        .into_iter()
        .enumerate()
        .map(|(i, s)| (format!("m{i}").into_bytes(), s))
        .collect();
    small.push((b"\0bin".to_vec(), 1.0)); // a tie with m18, and binary
    small.push((b"a".to_vec(), 1.0));
    small.push((vec![], 2.0));
    small.push((b"17".to_vec(), -0.0)); // an integer-like member
    let mut large: Vec<(Vec<u8>, f64)> = Vec::new();
    let scores = edge_scores();
    for i in 0..5000usize {
        let score = if i < scores.len() {
            scores[i]
        } else if i % 3 == 0 {
            (i / 100) as f64 // many ties
        } else {
            f64::from_bits(rng.next() >> 2) * if i % 2 == 0 { 1.0 } else { -1.0 }
        };
        large.push((format!("m:{i}:{}", rng.below(1000)).into_bytes(), score));
    }
    let n129: Vec<(Vec<u8>, f64)> = (0..129)
        .map(|i| (format!("{i}").into_bytes(), i as f64 / 3.0))
        .collect();
    let n128: Vec<(Vec<u8>, f64)> = (0..128)
        .map(|i| (format!("{i}").into_bytes(), i as f64 / 3.0))
        .collect();
    let values = vec![
        (
            "zset:small".into(),
            Value::SortedSet(small),
            t::ZSET_LISTPACK,
        ),
        ("zset:128".into(), Value::SortedSet(n128), t::ZSET_LISTPACK),
        ("zset:129".into(), Value::SortedSet(n129), t::ZSET_2),
        ("zset:large".into(), Value::SortedSet(large), t::ZSET_2),
        (
            "zset:longmember".into(),
            Value::SortedSet(vec![(rng.word(65), 1.0), (b"b".to_vec(), -0.0)]),
            t::ZSET_2,
        ),
    ];
    check_all(&values);
}

fn sid(ms: u64, seq: u64) -> StreamId {
    StreamId { ms, seq }
}

/// A stream like the fixtures' `stream:main`: shared milliseconds, a common field set and
/// others, binary and empty values, deleted entries (two still pending), three groups.
fn main_stream(rng: &mut Rng) -> Stream {
    let mut all = Vec::new();
    let (mut ms, mut seq) = (1_700_000_000_000u64, 0u64);
    for i in 0..600u64 {
        if i > 0 && rng.below(10) < 3 {
            seq += 1;
        } else {
            ms += 1 + rng.below(1000);
            seq = 0;
        }
        let fields = match i % 10 {
            7 => vec![(b"other".to_vec(), rng.bytes(12)), (b"x".to_vec(), vec![])],
            8 => vec![(b"n".to_vec(), (rng.next() as i64).to_string().into_bytes())],
            _ => vec![
                (b"name".to_vec(), rng.word(6)),
                (
                    b"count".to_vec(),
                    rng.below(100_000).to_string().into_bytes(),
                ),
                (b"empty".to_vec(), vec![]),
            ],
        };
        all.push(StreamEntry {
            id: sid(ms, seq),
            fields,
        });
    }
    let last_id = all.last().unwrap().id;
    // Delete the first entry and 27 others; 40 and 41 stay pending in g1.
    let mut deleted: Vec<usize> = vec![0, 40, 41];
    while deleted.len() < 28 {
        let i = 1 + rng.below(598) as usize;
        if !deleted.contains(&i) {
            deleted.push(i);
        }
    }
    let max_deleted_id = deleted.iter().map(|&i| all[i].id).max().unwrap();
    let entries: Vec<StreamEntry> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| !deleted.contains(i))
        .map(|(_, e)| e.clone())
        .collect();
    let pel_of = |ids: Vec<StreamId>, who: &str, base: u64| -> Vec<PendingEntry> {
        ids.into_iter()
            .enumerate()
            .map(|(k, id)| PendingEntry {
                id,
                delivery_time_ms: base + k as u64,
                delivery_count: 1 + k as u64 % 4,
                consumer: who.as_bytes().to_vec(),
            })
            .collect()
    };
    let alice_ids: Vec<StreamId> = [40usize, 41]
        .iter()
        .map(|&i| all[i].id)
        .chain((100..128).map(|i| all[i * 2].id))
        .collect();
    let bob_ids: Vec<StreamId> = (0..25).map(|i| all[301 + i * 3].id).collect();
    let mut g1_pel = pel_of(alice_ids.clone(), "alice", 1_700_000_100_000);
    g1_pel.extend(pel_of(bob_ids.clone(), "bob", 1_700_000_200_000));
    g1_pel.sort_by_key(|p| p.id);
    let consumer = |name: &str, seen: u64, pending: Vec<StreamId>| StreamConsumer {
        name: name.as_bytes().to_vec(),
        seen_time_ms: seen,
        active_time_ms: seen,
        pending,
    };
    let dave_ids: Vec<StreamId> = (0..5).map(|i| all[10 + i].id).collect();
    Stream {
        length: entries.len() as u64,
        first_id: entries[0].id,
        entries,
        last_id,
        max_deleted_id,
        entries_added: 600,
        groups: vec![
            StreamGroup {
                name: b"g1".to_vec(),
                last_delivered_id: all[400].id,
                entries_read: Some(380),
                pending: g1_pel,
                consumers: vec![
                    consumer("alice", 1_700_000_300_000, alice_ids),
                    consumer("bob", 1_700_000_300_001, bob_ids),
                    consumer("carol", 1_700_000_300_002, vec![]),
                ],
            },
            StreamGroup {
                name: b"g2".to_vec(),
                last_delivered_id: last_id,
                entries_read: None,
                pending: vec![],
                consumers: vec![],
            },
            StreamGroup {
                name: b"g3".to_vec(),
                last_delivered_id: all[20].id,
                entries_read: Some(20),
                pending: pel_of(dave_ids.clone(), "dave", 1_700_000_400_000),
                consumers: vec![consumer("dave", 1_700_000_500_000, dave_ids)],
            },
        ],
    }
}

#[test]
fn streams_with_groups_load_back() {
    let mut rng = Rng::new(6);
    let main = main_stream(&mut rng);
    let empty = Stream {
        last_id: sid(5, 1),
        max_deleted_id: sid(5, 1),
        entries_added: 3,
        groups: vec![StreamGroup {
            name: b"g".to_vec(),
            last_delivered_id: sid(5, 1),
            entries_read: Some(3),
            pending: vec![],
            consumers: vec![],
        }],
        ..Stream::default()
    };
    let big_entries: Vec<StreamEntry> = (0..5)
        .map(|i| StreamEntry {
            id: sid(10 + i, 0),
            fields: vec![(b"v".to_vec(), rng.word(5000))],
        })
        .collect();
    let bigvalues = Stream {
        length: 5,
        first_id: big_entries[0].id,
        last_id: big_entries[4].id,
        entries_added: 5,
        entries: big_entries,
        ..Stream::default()
    };
    // Seqs that go down inside a node (a negative seq difference from the master id).
    let seq_entries: Vec<StreamEntry> = [(1, 5), (1, 6), (2, 0), (3, 1), (u64::MAX / 2, 0)]
        .iter()
        .map(|&(ms, seq)| StreamEntry {
            id: sid(ms, seq),
            fields: vec![(b"123".to_vec(), b"-7".to_vec())],
        })
        .collect();
    let seqs = Stream {
        length: 5,
        first_id: seq_entries[0].id,
        last_id: seq_entries[4].id,
        entries_added: 5,
        entries: seq_entries,
        ..Stream::default()
    };
    let values = vec![
        (
            "stream:main".into(),
            Value::Stream(Box::new(main)),
            t::STREAM_LISTPACKS_2,
        ),
        (
            "stream:empty".into(),
            Value::Stream(Box::new(empty)),
            t::STREAM_LISTPACKS_2,
        ),
        (
            "stream:bigvalues".into(),
            Value::Stream(Box::new(bigvalues)),
            t::STREAM_LISTPACKS_2,
        ),
        (
            "stream:seqs".into(),
            Value::Stream(Box::new(seqs)),
            t::STREAM_LISTPACKS_2,
        ),
    ];
    check_all(&values);
    // Nodes are cut as XADD cuts them: 100 entries, or 4096 bytes.
    let redis = Redis::start();
    let mut con = redis.client();
    for (key, v, _) in &values {
        restore(&mut con, key.as_bytes(), &dump_payload(v, true));
    }
    let keys = |con: &mut redis::Connection, k: &str| -> i64 {
        let info: R = redis::cmd("XINFO").arg("STREAM").arg(k).query(con).unwrap();
        int(&map(&info)["radix-tree-keys"])
    };
    assert_eq!(keys(&mut con, "stream:main"), 6); // 572 entries
    assert_eq!(keys(&mut con, "stream:bigvalues"), 5);
    assert_eq!(keys(&mut con, "stream:empty"), 0);
}

#[test]
fn field_ttl_hashes_are_version_12_which_redis_7_0_refuses() {
    let mut fields = vec![
        hf(b"a".to_vec(), b"1".to_vec()),
        hf(b"b".to_vec(), b"x".to_vec()),
    ];
    fields[1].expire_at_ms = Some(4_102_444_800_000);
    let redis = Redis::start();
    let mut con = redis.client();
    for v in [
        Value::Hash(fields.clone()),
        Value::Hash({
            let mut f = fields.clone();
            f.push(hf(b"long".to_vec(), vec![b'v'; 100]));
            f
        }),
    ] {
        let payload = dump_payload(&v, true);
        assert!(payload[0] == t::HASH_LISTPACK_EX || payload[0] == t::HASH_METADATA);
        assert_eq!(&payload[payload.len() - 10..payload.len() - 8], &[12, 0]);
        let err = redis::cmd("RESTORE")
            .arg("k")
            .arg(0)
            .arg(&payload)
            .query::<()>(&mut con)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("DUMP payload version or checksum are wrong"),
            "{err}"
        );
    }
    // Without the TTL the same hash is version 10 and loads.
    fields[1].expire_at_ms = None;
    let payload = dump_payload(&Value::Hash(fields.clone()), true);
    restore(&mut con, b"k", &payload);
    assert_loaded(&mut con, b"k", &Value::Hash(fields));
}

/// One database's keys: (key, value, absolute expiry).
type Db = Vec<(Vec<u8>, Value, Option<u64>)>;

fn file_dataset() -> Vec<(u64, Db)> {
    let mut rng = Rng::new(7);
    let future = 4_102_444_800_000u64; // 2100-01-01
    let db0: Db = vec![
        (b"str".to_vec(), Value::String(b"hello".to_vec()), None),
        (
            b"str:int".to_vec(),
            Value::String(b"-32769".to_vec()),
            Some(future),
        ),
        (b"str:lzf".to_vec(), Value::String(b"xyz".repeat(100)), None),
        (vec![], Value::String(b"the empty key".to_vec()), None),
        (
            b"key\0with\r\nbinary\xff".to_vec(),
            Value::String(rng.bytes(50)),
            Some(future + 1),
        ),
        (rng.word(1024), Value::String(b"long key".to_vec()), None),
        (
            b"list".to_vec(),
            Value::List(listpack_ints_and_strings(&mut rng)),
            Some(future + 2),
        ),
        (
            b"set".to_vec(),
            Value::Set(vec![b"1".to_vec(), b"2".to_vec(), b"x".to_vec()]),
            None,
        ),
        (
            b"intset".to_vec(),
            Value::Set(vec![b"3".to_vec(), b"-3".to_vec()]),
            None,
        ),
        (
            b"hash".to_vec(),
            Value::Hash(vec![
                hf(b"f".to_vec(), b"v".to_vec()),
                hf(b"n".to_vec(), b"12".to_vec()),
            ]),
            Some(future + 3),
        ),
        (
            b"zset".to_vec(),
            Value::SortedSet(vec![(b"a".to_vec(), 1.5), (b"b".to_vec(), f64::INFINITY)]),
            None,
        ),
        (
            b"stream".to_vec(),
            Value::Stream(Box::new(main_stream(&mut rng))),
            Some(future + 4),
        ),
        // Expired when loaded: Redis (as a master) drops it.
        (
            b"expired".to_vec(),
            Value::String(b"gone".to_vec()),
            Some(1_000),
        ),
    ];
    let db1: Db = vec![
        (
            b"shared:name".to_vec(),
            Value::String(b"db1".to_vec()),
            None,
        ),
        (
            b"bighash".to_vec(),
            Value::Hash(
                (0..3000)
                    .map(|i| hf(format!("f{i}").into_bytes(), rng.word(10)))
                    .collect(),
            ),
            None,
        ),
    ];
    let db7: Db = vec![
        (
            b"shared:name".to_vec(),
            Value::String(b"db7".to_vec()),
            None,
        ),
        (
            b"ttl".to_vec(),
            Value::String(b"v".to_vec()),
            Some(future + 7),
        ),
    ];
    vec![(0, db0), (1, db1), (7, db7)]
}

/// A big list written element by element, in pieces (the incremental path).
fn big_list(rng: &mut Rng) -> Vec<Vec<u8>> {
    (0..50_000)
        .map(|i| {
            if i % 3 == 0 {
                i.to_string().into_bytes()
            } else {
                rng.word(8)
            }
        })
        .collect()
}

#[test]
fn a_whole_file_loads_at_startup() {
    let library = "#!lua name=mylib\nredis.register_function('answer', function() return 42 end)";
    for checksum in [true, false] {
        let dataset = file_dataset();
        let list = big_list(&mut Rng::new(8));
        let opts = EncodeOptions::default();
        let mut w = FileWriter::new(darner_rdb::WRITTEN_VERSION, checksum, opts);
        let mut file = Vec::new();
        w.aux(b"redis-ver", b"7.0.15");
        w.aux(b"redis-bits", b"64");
        w.aux(b"ctime", b"1700000000");
        w.aux(b"used-mem", b"1000000");
        w.aux(b"aof-base", b"0");
        w.function(library.as_bytes());
        for (db, keys) in &dataset {
            w.select_db(*db);
            let expires = keys.iter().filter(|k| k.2.is_some()).count() as u64;
            w.resize_db(keys.len() as u64 + (*db == 0) as u64, expires);
            for (key, value, at) in keys {
                w.entry(key, value, *at);
                file.extend(w.take());
            }
            if *db == 0 {
                w.idle(100);
                w.key(t::LIST, b"biglist");
                encode::begin_list(w.buf(), list.len() as u64);
                for chunk in list.chunks(1000) {
                    for e in chunk {
                        encode::list_element(w.buf(), e, &opts);
                    }
                    file.extend(w.take());
                }
            }
        }
        file.extend(w.finish());

        let dir = TempDir::new("file");
        std::fs::write(dir.0.join("dump.rdb"), &file).unwrap();
        let redis = Redis::start_in(dir, &[]);
        let mut con = redis.client();
        for (db, keys) in &dataset {
            redis::cmd("SELECT").arg(*db).query::<()>(&mut con).unwrap();
            let live: Vec<_> = keys.iter().filter(|k| k.0 != b"expired").collect();
            let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
            assert_eq!(size as usize, live.len() + (*db == 0) as usize, "db {db}");
            for (key, value, at) in live {
                assert_loaded(&mut con, key, value);
                let got: i64 = redis::cmd("PEXPIRETIME").arg(key).query(&mut con).unwrap();
                assert_eq!(
                    got,
                    at.map_or(-1, |a| a as i64),
                    "{}",
                    String::from_utf8_lossy(key)
                );
            }
            if *db == 0 {
                assert_loaded(&mut con, b"biglist", &Value::List(list.clone()));
                let exists: i64 = redis::cmd("EXISTS").arg("expired").query(&mut con).unwrap();
                assert_eq!(exists, 0);
            }
        }
        let answer: i64 = redis::cmd("FCALL")
            .arg("answer")
            .arg(0)
            .query(&mut con)
            .unwrap();
        assert_eq!(answer, 42);
        assert!(!redis.log().contains("Internal error"), "{}", redis.log());
    }
}
