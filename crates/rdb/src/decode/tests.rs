//! Hand-built inputs for the decoder's paths: every object type (including the legacy ones
//! no current server writes), every refusal, truncation at every byte, and the file state
//! machine (modifiers, checksums, batches, pieces).

use super::*;
use crate::crc64::crc64;
use crate::{object_type as ot, opcode as op, Entry, HashField, StreamId};

fn len(out: &mut Vec<u8>, n: u64) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
    } else if n <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn string(out: &mut Vec<u8>, s: &[u8]) {
    len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// `[type][body][version][crc]`.
fn payload_v(t: u8, body: &[u8], version: u16) -> Vec<u8> {
    let mut p = vec![t];
    p.extend_from_slice(body);
    p.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

fn payload(t: u8, body: &[u8]) -> Vec<u8> {
    payload_v(t, body, 11)
}

fn blob(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, b);
    out
}

fn decode(p: &[u8]) -> Result<Value, DumpError> {
    decode_dump_payload(p).map(|(v, _)| v)
}

fn bad(p: &[u8]) -> &'static str {
    match decode(p) {
        Err(DumpError::BadData(Error {
            kind: ErrorKind::Corrupt(m),
            ..
        })) => m,
        other => panic!("expected corrupt data, got {other:?}"),
    }
}

fn s(x: &str) -> Vec<u8> {
    x.as_bytes().to_vec()
}

fn hf(f: &str, v: &str, t: Option<u64>) -> HashField {
    HashField {
        field: s(f),
        value: s(v),
        expire_at_ms: t,
    }
}

/// One valid payload of every type the decoder loads, with its value.
fn samples() -> Vec<(Vec<u8>, Value)> {
    let mut out = Vec::new();
    let mut b = Vec::new();
    string(&mut b, b"hello");
    out.push((payload(ot::STRING, &b), Value::String(s("hello"))));

    let mut b = Vec::new();
    len(&mut b, 2);
    string(&mut b, b"a");
    b.extend_from_slice(&[0xc0, 0xfb]); // int8 -5
    out.push((payload(ot::LIST, &b), Value::List(vec![s("a"), s("-5")])));

    let mut b = Vec::new();
    len(&mut b, 2);
    string(&mut b, b"x");
    string(&mut b, b"y");
    out.push((payload(ot::SET, &b), Value::Set(vec![s("x"), s("y")])));

    let mut b = Vec::new();
    len(&mut b, 2);
    string(&mut b, b"m");
    b.extend_from_slice(&[3, b'1', b'.', b'5']);
    string(&mut b, b"n");
    b.push(255);
    out.push((
        payload(ot::ZSET, &b),
        Value::SortedSet(vec![(s("m"), 1.5), (s("n"), f64::NEG_INFINITY)]),
    ));

    let mut b = Vec::new();
    len(&mut b, 1);
    string(&mut b, b"f");
    string(&mut b, b"v");
    out.push((payload(ot::HASH, &b), Value::Hash(vec![hf("f", "v", None)])));

    let mut b = Vec::new();
    len(&mut b, 1);
    string(&mut b, b"m");
    b.extend_from_slice(&(-0.25f64).to_le_bytes());
    out.push((
        payload(ot::ZSET_2, &b),
        Value::SortedSet(vec![(s("m"), -0.25)]),
    ));

    let zm = zipmap::build(&[(b"f", b"v"), (b"g", b"")], 1);
    out.push((
        payload(ot::HASH_ZIPMAP, &blob(&zm)),
        Value::Hash(vec![hf("f", "v", None), hf("g", "", None)]),
    ));

    let zl = ziplist::build(&[Elem::Str(b"a"), Elem::Int(300)]);
    out.push((
        payload(ot::LIST_ZIPLIST, &blob(&zl)),
        Value::List(vec![s("a"), s("300")]),
    ));

    let is = intset::build(4, &[-70000, 3]);
    out.push((
        payload(ot::SET_INTSET, &blob(&is)),
        Value::Set(vec![s("-70000"), s("3")]),
    ));

    let zl = ziplist::build(&[
        Elem::Str(b"m"),
        Elem::Int(2),
        Elem::Str(b"n"),
        Elem::Str(b"2.5"),
    ]);
    out.push((
        payload(ot::ZSET_ZIPLIST, &blob(&zl)),
        Value::SortedSet(vec![(s("m"), 2.0), (s("n"), 2.5)]),
    ));

    let zl = ziplist::build(&[Elem::Str(b"f"), Elem::Int(1)]);
    out.push((
        payload(ot::HASH_ZIPLIST, &blob(&zl)),
        Value::Hash(vec![hf("f", "1", None)]),
    ));

    // Quicklist of ziplists, with an empty node (skipped).
    let mut b = Vec::new();
    len(&mut b, 3);
    string(&mut b, &ziplist::build(&[Elem::Str(b"a")]));
    string(&mut b, &ziplist::build(&[]));
    string(&mut b, &ziplist::build(&[Elem::Int(7), Elem::Str(b"b")]));
    out.push((
        payload(ot::LIST_QUICKLIST, &b),
        Value::List(vec![s("a"), s("7"), s("b")]),
    ));

    let lp = listpack::build(&[
        Elem::Str(b"f"),
        Elem::Int(-1),
        Elem::Str(b""),
        Elem::Str(b""),
    ]);
    out.push((
        payload(ot::HASH_LISTPACK, &blob(&lp)),
        Value::Hash(vec![hf("f", "-1", None), hf("", "", None)]),
    ));

    let lp = listpack::build(&[
        Elem::Str(b"a"),
        Elem::Str(b"inf"),
        Elem::Str(b"b"),
        Elem::Int(3),
    ]);
    out.push((
        payload(ot::ZSET_LISTPACK, &blob(&lp)),
        Value::SortedSet(vec![(s("a"), f64::INFINITY), (s("b"), 3.0)]),
    ));

    // Quicklist 2: a PLAIN node between PACKED ones.
    let mut b = Vec::new();
    len(&mut b, 3);
    len(&mut b, 2);
    string(&mut b, &listpack::build(&[Elem::Str(b"a")]));
    len(&mut b, 1);
    string(&mut b, &[b'p'; 100]);
    len(&mut b, 2);
    string(&mut b, &listpack::build(&[Elem::Int(12345678)]));
    out.push((
        payload(ot::LIST_QUICKLIST_2, &b),
        Value::List(vec![s("a"), vec![b'p'; 100], s("12345678")]),
    ));

    let lp = listpack::build(&[Elem::Str(b"a"), Elem::Int(1)]);
    out.push((
        payload(ot::SET_LISTPACK, &blob(&lp)),
        Value::Set(vec![s("a"), s("1")]),
    ));

    // 7.4 hash with field TTLs, hashtable form: TTLs relative to the minimum, plus one.
    let mut b = Vec::new();
    b.extend_from_slice(&5_000_000_000_000u64.to_le_bytes());
    len(&mut b, 2);
    len(&mut b, 0);
    string(&mut b, b"a");
    string(&mut b, b"1");
    len(&mut b, 11);
    string(&mut b, b"b");
    string(&mut b, b"2");
    out.push((
        payload_v(ot::HASH_METADATA, &b, 12),
        Value::Hash(vec![
            hf("a", "1", None),
            hf("b", "2", Some(5_000_000_000_010)),
        ]),
    ));

    // 7.4 hash with field TTLs, listpack form: absolute TTLs, 0 for none.
    let mut b = Vec::new();
    b.extend_from_slice(&5_000_000_000_000u64.to_le_bytes());
    string(
        &mut b,
        &listpack::build(&[
            Elem::Str(b"a"),
            Elem::Str(b"1"),
            Elem::Int(0),
            Elem::Str(b"b"),
            Elem::Str(b"2"),
            Elem::Int(5_000_000_000_000),
        ]),
    );
    out.push((
        payload_v(ot::HASH_LISTPACK_EX, &b, 12),
        Value::Hash(vec![
            hf("a", "1", None),
            hf("b", "2", Some(5_000_000_000_000)),
        ]),
    ));

    for t in [
        ot::STREAM_LISTPACKS,
        ot::STREAM_LISTPACKS_2,
        ot::STREAM_LISTPACKS_3,
    ] {
        out.push((
            payload(t, &stream_body(t, 2)),
            Value::Stream(Box::new(stream_value(t))),
        ));
    }
    out
}

/// A stream: one node with master fields (a, b), entries 10-0 (same fields), 10-1 (deleted),
/// 11-0 (own fields); a group with two pending entries owned by one consumer.
fn stream_body(t: u8, entries_read: u64) -> Vec<u8> {
    let lp = listpack::build(&[
        // master: count 2, deleted 1, 2 fields a b, terminator
        Elem::Int(2),
        Elem::Int(1),
        Elem::Int(2),
        Elem::Str(b"a"),
        Elem::Str(b"b"),
        Elem::Int(0),
        // 10-0 same fields: flags 2, diff 0 0, values, lp-count 5
        Elem::Int(2),
        Elem::Int(0),
        Elem::Int(0),
        Elem::Str(b"1"),
        Elem::Str(b"2"),
        Elem::Int(5),
        // 10-1 deleted, same fields
        Elem::Int(3),
        Elem::Int(0),
        Elem::Int(1),
        Elem::Str(b"x"),
        Elem::Str(b"y"),
        Elem::Int(5),
        // 11-0 own fields: flags 0, diff 1 0, 1 field c=3, lp-count 6
        Elem::Int(0),
        Elem::Int(1),
        Elem::Int(0),
        Elem::Int(1),
        Elem::Str(b"c"),
        Elem::Str(b"3"),
        Elem::Int(6),
    ]);
    let mut b = Vec::new();
    len(&mut b, 1);
    let mut key = 10u64.to_be_bytes().to_vec();
    key.extend_from_slice(&0u64.to_be_bytes());
    string(&mut b, &key);
    string(&mut b, &lp);
    len(&mut b, 2); // length
    len(&mut b, 11); // last id
    len(&mut b, 0);
    if t >= ot::STREAM_LISTPACKS_2 {
        len(&mut b, 10); // first id
        len(&mut b, 0);
        len(&mut b, 10); // max deleted
        len(&mut b, 1);
        len(&mut b, 3); // entries added
    }
    len(&mut b, 1); // groups
    string(&mut b, b"g");
    len(&mut b, 11);
    len(&mut b, 0);
    if t >= ot::STREAM_LISTPACKS_2 {
        len(&mut b, entries_read);
    }
    len(&mut b, 2); // PEL
    for id in [(10u64, 0u64), (11, 0)] {
        b.extend_from_slice(&id.0.to_be_bytes());
        b.extend_from_slice(&id.1.to_be_bytes());
        b.extend_from_slice(&1000u64.to_le_bytes());
        len(&mut b, 2);
    }
    len(&mut b, 1); // consumers
    string(&mut b, b"c");
    b.extend_from_slice(&500u64.to_le_bytes());
    if t >= ot::STREAM_LISTPACKS_3 {
        b.extend_from_slice(&600u64.to_le_bytes());
    }
    len(&mut b, 2);
    for id in [(11u64, 0u64), (10, 0)] {
        b.extend_from_slice(&id.0.to_be_bytes());
        b.extend_from_slice(&id.1.to_be_bytes());
    }
    b
}

fn stream_value(t: u8) -> Stream {
    let id = |ms, seq| StreamId { ms, seq };
    let v1 = t == ot::STREAM_LISTPACKS;
    Stream {
        entries: vec![
            StreamEntry {
                id: id(10, 0),
                fields: vec![(s("a"), s("1")), (s("b"), s("2"))],
            },
            StreamEntry {
                id: id(11, 0),
                fields: vec![(s("c"), s("3"))],
            },
        ],
        length: 2,
        last_id: id(11, 0),
        first_id: id(10, 0),
        max_deleted_id: if v1 { id(0, 0) } else { id(10, 1) },
        entries_added: if v1 { 2 } else { 3 },
        groups: vec![StreamGroup {
            name: s("g"),
            last_delivered_id: id(11, 0),
            // Type 15 did not store it: estimated as Redis does (the last id: entries added).
            entries_read: Some(2),
            pending: vec![
                PendingEntry {
                    id: id(10, 0),
                    delivery_time_ms: 1000,
                    delivery_count: 2,
                    consumer: s("c"),
                },
                PendingEntry {
                    id: id(11, 0),
                    delivery_time_ms: 1000,
                    delivery_count: 2,
                    consumer: s("c"),
                },
            ],
            consumers: vec![StreamConsumer {
                name: s("c"),
                seen_time_ms: 500,
                active_time_ms: if t >= ot::STREAM_LISTPACKS_3 {
                    600
                } else {
                    500
                },
                pending: vec![id(10, 0), id(11, 0)],
            }],
        }],
    }
}

use crate::{PendingEntry, Stream, StreamConsumer, StreamEntry, StreamGroup};

#[test]
fn every_type_decodes() {
    for (p, want) in samples() {
        assert_eq!(decode(&p), Ok(want), "type {}", p[0]);
    }
}

#[test]
fn truncation_at_every_byte_is_an_error_never_a_panic() {
    for (p, _) in samples() {
        let n = p.len();
        let body = &p[..n - 10];
        for cut in 1..body.len() {
            // A well-formed footer after a cut object: the object must not decode.
            let cut_payload = payload_v(body[0], &body[1..cut], 12);
            assert!(
                matches!(decode(&cut_payload), Err(DumpError::BadData(_))),
                "type {} cut at {cut}",
                p[0]
            );
        }
        for cut in 0..n {
            assert!(decode(&p[..cut]).is_err(), "type {} raw cut at {cut}", p[0]);
        }
    }
}

#[test]
fn footer_checks_give_the_version_or_checksum_error() {
    let (p, _) = samples().remove(0);
    let mut bad_crc = p.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    assert_eq!(decode(&bad_crc), Err(DumpError::VersionOrChecksum));
    // Version 13 with a correct CRC.
    let v13 = payload_v(p[0], &p[1..p.len() - 10], 13);
    assert_eq!(decode(&v13), Err(DumpError::VersionOrChecksum));
    // A zero CRC is checked like any other (only files may turn checksums off).
    let mut zero = p.clone();
    let n = zero.len();
    zero[n - 8..].fill(0);
    assert_eq!(decode(&zero), Err(DumpError::VersionOrChecksum));
    assert_eq!(decode(&[0; 9]), Err(DumpError::VersionOrChecksum));
    assert_eq!(
        DumpError::VersionOrChecksum.message(),
        "ERR DUMP payload version or checksum are wrong"
    );
    assert_eq!(
        DumpError::BadData(Error {
            offset: 0,
            kind: ErrorKind::Truncated
        })
        .message(),
        "ERR Bad data format"
    );
    // The version comes back; older versions load.
    assert_eq!(
        decode_dump_payload(&v13[..0]).err(),
        Some(DumpError::VersionOrChecksum)
    );
    let v9 = payload_v(p[0], &p[1..p.len() - 10], 9);
    assert_eq!(decode_dump_payload(&v9).unwrap().1, 9);
}

#[test]
fn embedded_encodings_are_validated() {
    // Wrong listpack count.
    let mut lp = listpack::build(&[Elem::Str(b"a"), Elem::Str(b"b")]);
    lp[4] = 3;
    assert_eq!(
        bad(&payload(ot::SET_LISTPACK, &blob(&lp))),
        "listpack count does not match its entries"
    );
    // Duplicate set member, in every set form.
    let lp = listpack::build(&[Elem::Str(b"a"), Elem::Str(b"a")]);
    assert_eq!(
        bad(&payload(ot::SET_LISTPACK, &blob(&lp))),
        "duplicate set members"
    );
    let lp = listpack::build(&[Elem::Int(1), Elem::Str(b"1")]);
    assert_eq!(
        bad(&payload(ot::SET_LISTPACK, &blob(&lp))),
        "duplicate set members"
    );
    let mut b = Vec::new();
    len(&mut b, 2);
    string(&mut b, b"x");
    string(&mut b, b"x");
    assert_eq!(bad(&payload(ot::SET, &b)), "duplicate set members");
    // Intset unsorted.
    assert_eq!(
        bad(&payload(ot::SET_INTSET, &blob(&intset::build(2, &[2, 1])))),
        "intset values not sorted or not unique"
    );
    // Ziplist wrong entry count.
    let mut zl = ziplist::build(&[Elem::Str(b"a")]);
    zl[8] = 2;
    assert_eq!(
        bad(&payload(ot::LIST_ZIPLIST, &blob(&zl))),
        "ziplist entry count does not match its entries"
    );
    // Duplicate hash fields and zset members.
    let lp = listpack::build(&[Elem::Str(b"f"), Elem::Int(1), Elem::Str(b"f"), Elem::Int(2)]);
    assert_eq!(
        bad(&payload(ot::HASH_LISTPACK, &blob(&lp))),
        "duplicate hash fields"
    );
    let lp = listpack::build(&[Elem::Str(b"m"), Elem::Int(1), Elem::Str(b"m"), Elem::Int(2)]);
    assert_eq!(
        bad(&payload(ot::ZSET_LISTPACK, &blob(&lp))),
        "duplicate zset members"
    );
    // Odd hash / zset listpacks, partial TTL triples.
    let lp = listpack::build(&[Elem::Str(b"f")]);
    assert_eq!(
        bad(&payload(ot::HASH_LISTPACK, &blob(&lp))),
        "hash with an odd number of entries"
    );
    let mut b = 0u64.to_le_bytes().to_vec();
    string(
        &mut b,
        &listpack::build(&[Elem::Str(b"f"), Elem::Str(b"v")]),
    );
    assert_eq!(
        bad(&payload(ot::HASH_LISTPACK_EX, &b)),
        "hash listpack with a partial field/value/TTL triple"
    );
    // NaN scores, in every zset form.
    let lp = listpack::build(&[Elem::Str(b"m"), Elem::Str(b"nan")]);
    assert_eq!(
        bad(&payload(ot::ZSET_LISTPACK, &blob(&lp))),
        "zset with a NaN score"
    );
    let mut b = Vec::new();
    len(&mut b, 1);
    string(&mut b, b"m");
    b.push(253);
    assert_eq!(bad(&payload(ot::ZSET, &b)), "zset with a NaN score");
    let mut b = Vec::new();
    len(&mut b, 1);
    string(&mut b, b"m");
    b.extend_from_slice(&f64::NAN.to_le_bytes());
    assert_eq!(bad(&payload(ot::ZSET_2, &b)), "zset with a NaN score");
    let lp = listpack::build(&[Elem::Str(b"m"), Elem::Str(b"one")]);
    assert_eq!(
        bad(&payload(ot::ZSET_LISTPACK, &blob(&lp))),
        "zset score is not a number"
    );
    // Quicklist node containers.
    let mut b = Vec::new();
    len(&mut b, 1);
    len(&mut b, 3);
    string(&mut b, b"x");
    assert_eq!(
        bad(&payload(ot::LIST_QUICKLIST_2, &b)),
        "quicklist node with an unknown container"
    );
    // Field TTL out of range.
    let mut b = Vec::new();
    b.extend_from_slice(&(1u64 << 48).to_le_bytes());
    len(&mut b, 1);
    len(&mut b, 5);
    string(&mut b, b"f");
    string(&mut b, b"v");
    assert_eq!(
        bad(&payload(ot::HASH_METADATA, &b)),
        "hash field with an invalid expiry"
    );
    // A minimum of 0 (no underflow): the TTL is then the time plus one.
    let mut b = Vec::new();
    b.extend_from_slice(&0u64.to_le_bytes());
    len(&mut b, 1);
    len(&mut b, 5);
    string(&mut b, b"f");
    string(&mut b, b"v");
    assert_eq!(
        decode(&payload(ot::HASH_METADATA, &b)),
        Ok(Value::Hash(vec![hf("f", "v", Some(4))]))
    );
}

#[test]
fn empty_collections_are_bad_data_in_a_dump() {
    let mut zero = Vec::new();
    len(&mut zero, 0);
    for t in [
        ot::LIST,
        ot::SET,
        ot::ZSET_2,
        ot::HASH,
        ot::LIST_QUICKLIST_2,
    ] {
        assert_eq!(bad(&payload(t, &zero)), "empty key", "type {t}");
    }
    let lp = listpack::build(&[]);
    assert_eq!(bad(&payload(ot::SET_LISTPACK, &blob(&lp))), "empty key");
    let zl = ziplist::build(&[]);
    assert_eq!(bad(&payload(ot::LIST_ZIPLIST, &blob(&zl))), "empty key");
    // A quicklist whose only node is empty.
    let mut b = Vec::new();
    len(&mut b, 1);
    len(&mut b, 2);
    string(&mut b, &listpack::build(&[]));
    assert_eq!(bad(&payload(ot::LIST_QUICKLIST_2, &b)), "empty key");
    // An empty stream is a valid key.
    let mut b = Vec::new();
    for n in [0u64, 0, 5, 1, 0, 0, 5, 1, 1, 0] {
        len(&mut b, n);
    }
    let Value::Stream(st) = decode(&payload(ot::STREAM_LISTPACKS_3, &b)).unwrap() else {
        panic!()
    };
    assert_eq!(st.length, 0);
    assert_eq!(st.last_id, StreamId { ms: 5, seq: 1 });
}

#[test]
fn huge_claimed_lengths_are_refused_without_allocating() {
    // Counts far beyond what the payload can hold.
    for t in [
        ot::LIST,
        ot::SET,
        ot::ZSET_2,
        ot::HASH,
        ot::LIST_QUICKLIST_2,
        ot::STREAM_LISTPACKS_3,
    ] {
        let mut b = Vec::new();
        len(&mut b, u64::MAX);
        assert_eq!(
            bad(&payload(t, &b)),
            "count larger than the data can hold",
            "type {t}"
        );
    }
    // A string claiming 2^62 bytes, and an LZF string claiming a huge uncompressed size.
    let mut b = Vec::new();
    len(&mut b, 1 << 62);
    assert!(matches!(
        decode(&payload(ot::STRING, &b)),
        Err(DumpError::BadData(Error {
            kind: ErrorKind::Truncated,
            ..
        }))
    ));
    let mut b = vec![0xc3];
    len(&mut b, 2);
    len(&mut b, 1 << 40);
    b.extend_from_slice(&[0, b'x']);
    assert_eq!(bad(&payload(ot::STRING, &b)), "invalid LZF string");
    // A listpack whose 32-bit string length runs past it.
    let mut lp = listpack::build(&[Elem::Str(&[b'a'; 5000])]);
    lp[7..11].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode(&payload(ot::SET_LISTPACK, &blob(&lp))).is_err());
}

#[test]
fn stream_consistency_is_checked() {
    let t = ot::STREAM_LISTPACKS_3;
    let good = stream_body(t, 2);
    assert!(decode(&payload(t, &good)).is_ok());
    // Find and corrupt pieces of the body: the stream length (2 -> 3).
    let lp_end = {
        // node count (1) + key string (1 + 16), then the listpack string's length field.
        let (hdr, lp_len) = match good[18] >> 6 {
            0 => (1, good[18] as usize),
            1 => (2, ((good[18] as usize & 0x3f) << 8) | good[19] as usize),
            _ => unreachable!("a small listpack"),
        };
        18 + hdr + lp_len
    };
    let mut b = good.clone();
    assert_eq!(b[lp_end], 2);
    b[lp_end] = 3;
    assert_eq!(
        bad(&payload(t, &b)),
        "stream length does not match its entries"
    );
    // A consumer claiming an id that is not in the group's PEL.
    let mut b = good.clone();
    let n = b.len();
    b[n - 1] = 9;
    assert_eq!(
        bad(&payload(t, &b)),
        "consumer PEL entry not in the group's PEL"
    );
    // A consumer claiming the same id twice.
    let mut b = good.clone();
    let n = b.len();
    let first = b[n - 32..n - 16].to_vec();
    b[n - 16..].copy_from_slice(&first);
    assert_eq!(bad(&payload(t, &b)), "stream PEL entry owned twice");
    // A PEL entry no consumer owns: the consumer owns one of two.
    let mut b = good[..good.len() - 33].to_vec();
    len(&mut b, 1);
    b.extend_from_slice(&10u64.to_be_bytes());
    b.extend_from_slice(&0u64.to_be_bytes());
    assert_eq!(bad(&payload(t, &b)), "stream PEL entry without a consumer");
    // Wrong lp-count in the node.
    let lp = listpack::build(&[
        Elem::Int(1),
        Elem::Int(0),
        Elem::Int(1),
        Elem::Str(b"a"),
        Elem::Int(0),
        Elem::Int(2),
        Elem::Int(0),
        Elem::Int(0),
        Elem::Str(b"1"),
        Elem::Int(5),
    ]);
    let mut b = Vec::new();
    len(&mut b, 1);
    string(&mut b, &[0u8; 16]);
    string(&mut b, &lp);
    assert_eq!(bad(&payload(t, &b)), "stream entry lp-count does not match");
    // An empty node.
    let mut b = Vec::new();
    len(&mut b, 1);
    string(&mut b, &[0u8; 16]);
    string(&mut b, &listpack::build(&[]));
    assert_eq!(bad(&payload(t, &b)), "empty listpack inside a stream");
    // A node key of the wrong size.
    let mut b = Vec::new();
    len(&mut b, 1);
    string(&mut b, &[0u8; 15]);
    string(&mut b, &listpack::build(&[Elem::Int(0)]));
    assert_eq!(
        bad(&payload(t, &b)),
        "stream node key is not the size of a stream ID"
    );
    // Unknown entries-read comes back as None.
    let b = stream_body(t, u64::MAX);
    let Ok(Value::Stream(st)) = decode(&payload(t, &b)) else {
        panic!()
    };
    assert_eq!(st.groups[0].entries_read, None);
}

#[test]
fn unsupported_types_are_refused() {
    for t in [
        ot::MODULE_PRE_GA,
        ot::MODULE_2,
        8,
        ot::HASH_METADATA_PRE_GA,
        ot::HASH_LISTPACK_EX_PRE_GA,
        26,
        199,
    ] {
        assert!(
            matches!(
                decode(&payload(t, &[0, 0])),
                Err(DumpError::BadData(Error {
                    kind: ErrorKind::UnsupportedType(x),
                    offset: 0,
                })) if x == t
            ),
            "type {t}"
        );
    }
}

#[test]
fn darner_sets_with_member_ttls_decode_and_are_checked() {
    // A count, then each member as a string and its TTL (8 bytes LE, 0 for none).
    let mut body = vec![2, 1, b'a'];
    body.extend_from_slice(&4_102_444_800_000u64.to_le_bytes());
    body.extend_from_slice(&[1, b'b']);
    body.extend_from_slice(&0u64.to_le_bytes());
    let v = decode(&payload(ot::DARNER_SET_TTL, &body)).unwrap();
    assert_eq!(
        v,
        Value::SetWithTtl(vec![
            (b"a".to_vec(), Some(4_102_444_800_000)),
            (b"b".to_vec(), None)
        ])
    );
    // A duplicate member, a count past the input, and a cut TTL are bad data.
    let mut dup = body.clone();
    dup[11] = b'a';
    let mut long = body.clone();
    long[0] = 3;
    for bad in [dup, long, body[..body.len() - 1].to_vec()] {
        assert!(matches!(
            decode(&payload(ot::DARNER_SET_TTL, &bad)),
            Err(DumpError::BadData(_))
        ));
    }
}

// ---- files ----

fn file(version: u16, body: &[u8], checksum: Option<u64>) -> Vec<u8> {
    let mut f = format!("REDIS{version:04}").into_bytes();
    f.extend_from_slice(body);
    f.push(op::EOF);
    if version >= 5 {
        let crc = checksum.unwrap_or_else(|| crc64(0, &f));
        f.extend_from_slice(&crc.to_le_bytes());
    }
    f
}

/// A file body with aux fields, two dbs, key modifiers, an empty key and a big list.
fn sample_body() -> Vec<u8> {
    let mut b = Vec::new();
    b.push(op::AUX);
    string(&mut b, b"redis-ver");
    string(&mut b, b"7.2.4");
    b.push(op::AUX);
    string(&mut b, b"redis-bits");
    b.extend_from_slice(&[0xc0, 64]);
    b.push(op::FUNCTION2);
    string(
        &mut b,
        b"#!lua name=lib\nredis.register_function('f', function() end)",
    );
    b.push(op::SELECTDB);
    len(&mut b, 0);
    b.push(op::RESIZEDB);
    len(&mut b, 3);
    len(&mut b, 1);
    b.push(op::EXPIRETIME_MS);
    b.extend_from_slice(&4_000_000_000_000u64.to_le_bytes());
    b.push(op::IDLE);
    len(&mut b, 77);
    b.push(ot::STRING);
    string(&mut b, b"k1");
    string(&mut b, b"v1");
    b.push(op::FREQ);
    b.push(9);
    b.push(ot::LIST);
    string(&mut b, b"empty");
    len(&mut b, 0);
    b.push(op::SELECTDB);
    len(&mut b, 7);
    b.push(op::SLOT_INFO);
    len(&mut b, 1);
    len(&mut b, 2);
    len(&mut b, 3);
    b.push(op::EXPIRETIME);
    b.extend_from_slice(&2_000_000_000u32.to_le_bytes());
    b.push(ot::LIST);
    string(&mut b, b"big");
    len(&mut b, 50);
    for i in 0..50 {
        string(&mut b, format!("e{i}").as_bytes());
    }
    b
}

fn sample_entries() -> Vec<Entry> {
    vec![
        Entry {
            db: 0,
            key: s("k1"),
            expire_at_ms: Some(4_000_000_000_000),
            idle_seconds: Some(77),
            lfu_freq: None,
            value: Value::String(s("v1")),
        },
        Entry {
            db: 7,
            key: s("big"),
            expire_at_ms: Some(2_000_000_000_000),
            idle_seconds: None,
            lfu_freq: None,
            value: Value::List((0..50).map(|i| format!("e{i}").into_bytes()).collect()),
        },
    ]
}

#[test]
fn a_file_decodes_with_its_aux_functions_modifiers_and_empty_keys() {
    let f = file(11, &sample_body(), None);
    let (info, keys, functions) = decode_file(&f).unwrap();
    assert_eq!(info.version, 11);
    assert_eq!(
        info.aux,
        vec![(s("redis-ver"), s("7.2.4")), (s("redis-bits"), s("64"))]
    );
    assert!(matches!(info.checksum, Checksum::Verified(_)));
    assert_eq!(info.empty_keys_skipped, 1);
    assert_eq!(info.end_offset, f.len() as u64);
    assert_eq!(functions.len(), 1);
    assert_eq!(keys, sample_entries());
    // The FREQ before the empty key was consumed by it, not carried to the next key.
    assert_eq!(keys[1].lfu_freq, None);
}

#[test]
fn items_come_in_file_order_and_big_collections_in_batches() {
    let f = file(11, &sample_body(), None);
    let mut d = FileDecoder::new();
    d.set_inline_limit(10);
    d.set_batch_limit(20);
    let mut items = Vec::new();
    let mut pos = 0;
    loop {
        match d.next(&f[pos..]).unwrap() {
            Step::Need(n) => panic!("needs {n} with the whole file given"),
            Step::Item { item, consumed } => {
                pos += consumed;
                let end = matches!(item, Item::End { .. });
                items.push(item);
                if end {
                    break;
                }
            }
        }
    }
    let kinds: Vec<String> = items
        .iter()
        .map(|i| match i {
            Item::Elements(Value::List(v)) => format!("Elements({})", v.len()),
            other => format!("{other:?}")
                .split([' ', '(', '{'])
                .next()
                .unwrap()
                .to_string(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "Header",
            "Aux",
            "Aux",
            "Function",
            "SelectDb",
            "ResizeDb",
            "Key",
            "EmptyKey",
            "SelectDb",
            "SlotInfo",
            "KeyStart",
            "Elements(20)",
            "Elements(20)",
            "Elements(10)",
            "KeyEnd",
            "End"
        ]
    );
    assert!(d.next(&f[pos..]).is_err(), "nothing after the end");
}

#[test]
fn a_file_fed_one_byte_at_a_time_decodes_the_same() {
    let f = file(11, &sample_body(), None);
    let whole = decode_file(&f).unwrap().1;
    for inline in [0, 1000] {
        let mut d = FileDecoder::new();
        d.set_inline_limit(inline);
        d.set_batch_limit(3);
        let mut buf = Vec::new();
        let mut fed = 0;
        let mut keys: Vec<Entry> = Vec::new();
        loop {
            match d.next(&buf).unwrap() {
                Step::Need(n) => {
                    assert!(n >= 1);
                    buf.push(f[fed]);
                    fed += 1;
                }
                Step::Item { item, consumed } => {
                    buf.drain(..consumed);
                    match item {
                        Item::Key(e) => keys.push(e),
                        Item::KeyStart(k) => keys.push(Entry {
                            db: k.db,
                            key: k.key,
                            expire_at_ms: k.expire_at_ms,
                            idle_seconds: k.idle_seconds,
                            lfu_freq: k.lfu_freq,
                            value: k.kind.empty(),
                        }),
                        Item::Elements(b) => value::append(&mut keys.last_mut().unwrap().value, b),
                        Item::End { .. } => break,
                        _ => {}
                    }
                }
            }
        }
        assert_eq!(fed, f.len());
        assert_eq!(keys, whole);
    }
}

#[test]
fn file_checksums_versions_and_magic() {
    let body = sample_body();
    // Wrong checksum: an error at the checksum's offset.
    let f = file(11, &body, Some(12345));
    let e = decode_file(&f).unwrap_err();
    assert_eq!(e.kind, ErrorKind::BadChecksum);
    assert_eq!(e.offset, f.len() as u64 - 8);
    // Checksum 0: written with rdbchecksum off, not checked.
    let f = file(11, &body, Some(0));
    assert_eq!(decode_file(&f).unwrap().0.checksum, Checksum::Disabled);
    // Version 4 files have no checksum.
    let f = file(4, &body, None);
    assert_eq!(decode_file(&f).unwrap().0.checksum, Checksum::Absent);
    // Version 13 and 0, and bad magic.
    let e = decode_file(&file(13, &body, None)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnsupportedVersion(13));
    let e = decode_file(&file(0, &body, None)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnsupportedVersion(0));
    let mut f = file(11, &body, None);
    f[0] = b'X';
    assert_eq!(decode_file(&f).unwrap_err().kind, ErrorKind::BadMagic);
    let mut f = file(11, &body, None);
    f[7] = b'x';
    assert_eq!(decode_file(&f).unwrap_err().kind, ErrorKind::BadMagic);
    // An AOF tail after the end is the caller's.
    let mut f = file(11, &body, None);
    let end = f.len() as u64;
    f.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
    assert_eq!(decode_file(&f).unwrap().0.end_offset, end);
}

#[test]
fn file_truncation_at_every_byte_is_an_error_never_a_panic() {
    let f = file(11, &sample_body(), None);
    for cut in 0..f.len() {
        let e = decode_file(&f[..cut]).unwrap_err();
        assert!(
            matches!(e.kind, ErrorKind::Truncated | ErrorKind::BadChecksum),
            "cut {cut}: {e}"
        );
    }
}

#[test]
fn file_errors_carry_absolute_offsets() {
    // A listpack with a bad count, after some other items: the offset is the string's.
    let mut b = Vec::new();
    b.push(op::AUX);
    string(&mut b, b"a");
    string(&mut b, b"b");
    b.push(ot::SET_LISTPACK);
    string(&mut b, b"key");
    let at = 9 + b.len() as u64;
    let mut lp = listpack::build(&[Elem::Str(b"a")]);
    lp[4] = 5;
    string(&mut b, &lp);
    let e = decode_file(&file(11, &b, None)).unwrap_err();
    assert_eq!(e.offset, at);
    assert_eq!(
        e.kind,
        ErrorKind::Corrupt("listpack count does not match its entries")
    );
    // Unknown opcode.
    let e = decode_file(&file(11, &[op::MODULE_AUX], None)).unwrap_err();
    assert_eq!(
        (e.offset, e.kind),
        (9, ErrorKind::UnsupportedType(op::MODULE_AUX))
    );
    // Duplicates across batches are caught by decode_file.
    let mut b = Vec::new();
    b.push(ot::SET);
    string(&mut b, b"s");
    len(&mut b, 2000);
    for i in 0..2000 {
        string(&mut b, format!("{}", i % 1999).as_bytes());
    }
    let e = decode_file(&file(11, &b, None)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Corrupt("duplicate set members"));
}

// ---- mutations ----

/// Applies `(position, byte, op)` mutations to `body`: 0 sets, 1 xors, 2 inserts, 3 removes.
fn mutate(body: &mut Vec<u8>, muts: &[(usize, u8, u8)]) {
    for &(at, byte, kind) in muts {
        if body.is_empty() {
            body.push(byte);
            continue;
        }
        let i = at % body.len();
        match kind % 4 {
            0 => body[i] = byte,
            1 => body[i] ^= byte | 1,
            2 => body.insert(i, byte),
            _ => {
                body.remove(i);
            }
        }
    }
}

/// A file holding one key whose type and object are `object`.
fn file_with_object(object: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    if let Some((&t, rest)) = object.split_first() {
        b.push(t);
        string(&mut b, b"key");
        b.extend_from_slice(rest);
    }
    file(12, &b, None)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// Mutated payloads of every type (with a CRC that matches, so the object decoder sees
    /// them) decode or fail, never panic; and as a file, fed in any pieces, they decode to
    /// the same result as whole.
    #[test]
    fn mutated_payloads_never_panic_and_pieces_agree(
        pick in 0usize..1000,
        muts in proptest::collection::vec((0usize..100_000, proptest::prelude::any::<u8>(), 0u8..4), 1..6),
        pieces in proptest::collection::vec(1usize..40, 1..8),
        limits in (0u64..4, 1usize..5),
    ) {
        let all = samples();
        let (p, _) = &all[pick % all.len()];
        let mut object = p[..p.len() - 10].to_vec();
        mutate(&mut object, &muts);
        let _ = decode(&payload_v(object.first().copied().unwrap_or(0), object.get(1..).unwrap_or(&[]), 12));
        let f = file_with_object(&object);
        let whole = decode_file(&f);
        let split = decode_file_in_pieces(&f, &pieces, u64::MAX, 1000);
        proptest::prop_assert_eq!(&whole, &split);
        // Batched: the same keys, or an error for the same file (its offset may differ: a
        // duplicate in a batched key is found at its end).
        let batched = decode_file_in_pieces(&f, &pieces, limits.0, limits.1);
        match (&whole, &batched) {
            (Ok(w), Ok(b)) => proptest::prop_assert_eq!(w, b),
            (Err(_), Err(_)) => {}
            _ => proptest::prop_assert!(false, "whole {:?} batched {:?}", whole, batched),
        }
    }
}
