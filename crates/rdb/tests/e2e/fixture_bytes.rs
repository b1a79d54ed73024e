//! The encoder's bytes against the DUMP payloads real servers wrote for the same values
//! (shared/fixtures/rdb): Redis 7.0.15 for strings, intsets and listpack hashes, sorted sets
//! and lists, Redis 7.4.1 for hashes with field TTLs. Values come from the manifests; where a
//! server's order is not derivable from the value (a listpack hash keeps insertion order) it
//! is read from the fixture payload. Strings the server LZF-compressed are compared after
//! decompression (our compressor is not liblzf byte for byte), everything else byte for byte,
//! checksum included.

use crate::common::{b64, hex, listpack_entries, load_json, LpEntry, Reader, StrEnc};
use darner_rdb::{dump_payload, object_type as t, HashField, Value};
use serde_json::Value as J;
use std::collections::HashMap;

/// The manifest entries of one file, by (db, key).
fn manifest_entries(name: &str) -> HashMap<(String, Vec<u8>), J> {
    let m = load_json(name);
    let mut out = HashMap::new();
    for (db, entries) in m["dbs"].as_object().unwrap() {
        for e in entries.as_array().unwrap() {
            out.insert((db.clone(), b64(&e["key"])), e.clone());
        }
    }
    out
}

fn string_value(e: &J) -> Vec<u8> {
    if e["value"].is_null() {
        let r = &e["value_repeat"];
        b64(&r["unit"]).repeat(r["count"].as_u64().unwrap() as usize)
    } else {
        b64(&e["value"])
    }
}

fn list_of(e: &J) -> Vec<Vec<u8>> {
    e["value"].as_array().unwrap().iter().map(b64).collect()
}

/// The manifest's hash as field -> value.
fn hash_of(e: &J) -> HashMap<Vec<u8>, Vec<u8>> {
    e["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (b64(&p[0]), b64(&p[1])))
        .collect()
}

/// The object of a payload taken apart: its type, the strings it is made of (decompressed)
/// with how each was stored, and the other bytes in order (lengths, times).
#[derive(Debug, PartialEq)]
struct Parts {
    ty: u8,
    items: Vec<Item>,
    version: u16,
}

#[derive(Debug, PartialEq)]
enum Item {
    Str(Vec<u8>, StrEnc),
    Len(u64),
    Ms(u64),
}

fn parts(payload: &[u8]) -> Parts {
    let n = payload.len();
    let body = &payload[..n - 10];
    let mut r = Reader::new(body);
    let ty = r.byte();
    let mut items = Vec::new();
    match ty {
        t::STRING | t::SET_INTSET | t::HASH_LISTPACK | t::ZSET_LISTPACK => {
            let (s, e) = r.string();
            items.push(Item::Str(s, e));
        }
        t::LIST_QUICKLIST_2 => {
            let nodes = r.len();
            items.push(Item::Len(nodes));
            for _ in 0..nodes {
                items.push(Item::Len(r.len()));
                let (s, e) = r.string();
                items.push(Item::Str(s, e));
            }
        }
        t::HASH_LISTPACK_EX => {
            items.push(Item::Ms(r.u64le()));
            let (s, e) = r.string();
            items.push(Item::Str(s, e));
        }
        t::HASH_METADATA => {
            items.push(Item::Ms(r.u64le()));
            let len = r.len();
            items.push(Item::Len(len));
            for _ in 0..len {
                items.push(Item::Len(r.len()));
                for _ in 0..2 {
                    let (s, e) = r.string();
                    items.push(Item::Str(s, e));
                }
            }
        }
        other => panic!("type {other} not compared"),
    }
    assert_eq!(r.pos, body.len(), "trailing bytes in a type {ty} payload");
    Parts {
        ty,
        items,
        version: u16::from_le_bytes([payload[n - 10], payload[n - 9]]),
    }
}

/// Compares our payload with the server's: the same items and encodings (LZF on both sides
/// counts as the same), and the very same bytes when the server compressed nothing.
fn compare(what: &str, ours: &[u8], theirs: &[u8]) -> bool {
    let (a, b) = (parts(ours), parts(theirs));
    assert_eq!(a.ty, b.ty, "{what}: object type");
    assert_eq!(a.version, b.version, "{what}: version");
    assert_eq!(a.items.len(), b.items.len(), "{what}: items");
    for (x, y) in a.items.iter().zip(&b.items) {
        match (x, y) {
            (Item::Str(s1, e1), Item::Str(s2, e2)) => {
                assert!(
                    s1 == s2,
                    "{what}: string differs (ours {} bytes, theirs {})",
                    s1.len(),
                    s2.len()
                );
                // liblzf gives up when its output comes within a few bytes of the limit
                // (len - 4), where ours may still fit: on short strings, where those few
                // bytes decide, one side may be LZF and the other verbatim. Both load.
                let short_lzf_call = s1.len() < 64
                    && matches!(
                        (e1, e2),
                        (StrEnc::Lzf, StrEnc::Raw) | (StrEnc::Raw, StrEnc::Lzf)
                    );
                if short_lzf_call {
                    return false;
                }
                assert_eq!(e1, e2, "{what}: string encoding");
            }
            _ => assert_eq!(x, y, "{what}"),
        }
    }
    let lzf = b
        .items
        .iter()
        .any(|i| matches!(i, Item::Str(_, StrEnc::Lzf)));
    if !lzf {
        assert!(
            ours == theirs,
            "{what}: bytes differ\nours   {ours:02x?}\ntheirs {theirs:02x?}"
        );
    }
    !lzf
}

/// The elements of the listpack inside a fixture payload (hash or list node).
fn fixture_listpack(payload: &[u8]) -> Vec<LpEntry> {
    let p = parts(payload);
    let lp = p
        .items
        .iter()
        .find_map(|i| match i {
            Item::Str(s, _) => Some(s.clone()),
            _ => None,
        })
        .unwrap();
    listpack_entries(&lp)
}

#[test]
fn redis_7_0_payloads_of_simple_values_match_ours_byte_for_byte() {
    let manifest = manifest_entries("redis-7.0.15.manifest.json");
    let dump = load_json("redis-7.0.15.dump.json");
    let (mut exact, mut decompressed) = (0, 0);
    let mut types_seen = std::collections::BTreeSet::new();
    for (db, entries) in dump["dbs"].as_object().unwrap() {
        for d in entries.as_array().unwrap() {
            let key = b64(&d["key"]);
            let what = format!("db {db} {}", String::from_utf8_lossy(&key));
            let theirs = hex(d["dump"].as_str().unwrap());
            let e = &manifest[&(db.clone(), key.clone())];
            let value = match theirs[0] {
                t::STRING => Value::String(string_value(e)),
                t::SET_INTSET => Value::Set(list_of(e)),
                t::ZSET_LISTPACK => Value::SortedSet(
                    e["value"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|p| (b64(&p[0]), p[1].as_str().unwrap().parse::<f64>().unwrap()))
                        .collect(),
                ),
                t::LIST_QUICKLIST_2 if theirs[1] == 1 => Value::List(list_of(e)),
                t::HASH_LISTPACK => {
                    // The server's field order: insertion order, read from its listpack.
                    let values = hash_of(e);
                    let lp = fixture_listpack(&theirs);
                    assert_eq!(lp.len(), 2 * values.len(), "{what}");
                    Value::Hash(
                        lp.chunks(2)
                            .map(|p| {
                                let field = p[0].bytes();
                                HashField {
                                    value: values[&field].clone(),
                                    field,
                                    expire_at_ms: None,
                                }
                            })
                            .collect(),
                    )
                }
                // Hashtables (random order), multi-node quicklists, streams with deleted
                // entries: not the same bytes by construction.
                _ => continue,
            };
            types_seen.insert(theirs[0]);
            let ours = dump_payload(&value, true);
            if compare(&what, &ours, &theirs) {
                exact += 1;
            } else {
                decompressed += 1;
            }
        }
    }
    assert_eq!(
        types_seen.into_iter().collect::<Vec<_>>(),
        [
            t::STRING,
            t::SET_INTSET,
            t::HASH_LISTPACK,
            t::ZSET_LISTPACK,
            t::LIST_QUICKLIST_2
        ]
    );
    // Most are byte for byte; the LZF-compressed ones (str:1mb, hash:512 ...) by content.
    assert!(exact > 80, "{exact} compared byte for byte");
    assert!(
        decompressed >= 3,
        "{decompressed} compared after decompression"
    );
}

#[test]
fn redis_7_4_field_ttl_payloads_match_ours() {
    let manifest = manifest_entries("redis-7.4.1-field-ttl.manifest.json");
    let dump = load_json("redis-7.4.1-field-ttl.dump.json");
    let mut compared = Vec::new();
    for (db, entries) in dump["dbs"].as_object().unwrap() {
        for d in entries.as_array().unwrap() {
            let theirs = hex(d["dump"].as_str().unwrap());
            if theirs[0] != t::HASH_LISTPACK_EX && theirs[0] != t::HASH_METADATA {
                continue;
            }
            let key = b64(&d["key"]);
            let name = String::from_utf8_lossy(&key).into_owned();
            let e = &manifest[&(db.clone(), key.clone())];
            let values = hash_of(e);
            let ttls: HashMap<Vec<u8>, u64> = e["field_expires"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|p| (b64(&p[0]), p[1].as_u64().unwrap()))
                        .collect()
                })
                .unwrap_or_default();
            // The server's field order, from its payload.
            let order: Vec<Vec<u8>> = if theirs[0] == t::HASH_LISTPACK_EX {
                fixture_listpack(&theirs)
                    .chunks(3)
                    .map(|p| p[0].bytes())
                    .collect()
            } else {
                parts(&theirs)
                    .items
                    .iter()
                    .skip(2)
                    .collect::<Vec<_>>()
                    .chunks(3)
                    .map(|c| match c[1] {
                        Item::Str(s, _) => s.clone(),
                        _ => unreachable!(),
                    })
                    .collect()
            };
            if order.len() != values.len() {
                continue; // holds fields that had expired when it was dumped
            }
            let value = Value::Hash(
                order
                    .into_iter()
                    .map(|field| HashField {
                        value: values[&field].clone(),
                        expire_at_ms: ttls.get(&field).copied(),
                        field,
                    })
                    .collect(),
            );
            compare(&name, &dump_payload(&value, true), &theirs);
            compared.push(name);
        }
    }
    compared.sort();
    for must in [
        "hfe:small",
        "hfe:allttl",
        "hfe:small:keyttl",
        "hfe:large",
        "hfe:longval",
    ] {
        assert!(
            compared.iter().any(|c| c == must),
            "{must} not compared: {compared:?}"
        );
    }
}
