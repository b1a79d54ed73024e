//! The decoder against files and DUMP payloads written by real Redis 7.0 / 7.2 / 7.4 and
//! Valkey 8 servers (`shared/fixtures`, see its README): every key is compared with the
//! manifest the generator wrote from the live server. Nothing here is hard-coded from the
//! manifests: a second fixture set made with another seed must pass the same way.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use base64::Engine;
use darner_rdb::{
    decode_dump_payload, decode_file, Checksum, Entry, FileDecoder, Item, Step, StreamId, Value,
};
use serde_json::Value as J;

const FILES: [&str; 4] = [
    "redis-7.0.15",
    "redis-7.2.4",
    "valkey-8.0.1",
    "redis-7.4.1-field-ttl",
];

fn fixtures() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/rdb");
    assert!(
        dir.is_dir(),
        "fixture directory {} is missing: the RDB tests need the shared persistence fixtures \
         checked out next to the repository (shared/fixtures)",
        dir.display()
    );
    dir
}

/// A fixture RDB file, or None when this checkout of the shared fixtures lacks it (some copy
/// the JSON manifests and DUMP payloads but not the binary files, which SHA256SUMS still
/// lists): the test then says so loudly and checks what it can. The same objects are decoded
/// from the real DUMP payloads, and in files built from them, by the other tests here.
fn rdb_file(name: &str) -> Option<Vec<u8>> {
    let path = fixtures().join(format!("{name}.rdb"));
    match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        Err(e) => {
            eprintln!(
                "WARNING: fixture {} is missing ({e}): not checked here. shared/fixtures/rdb \
                 should hold the RDB files listed in shared/fixtures/SHA256SUMS",
                path.display()
            );
            None
        }
    }
}

fn load_json(name: &str) -> J {
    let path = fixtures().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn b64(v: &J) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().expect("base64 string"))
        .expect("valid base64")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn id(v: &J) -> StreamId {
    let (ms, seq) = v.as_str().unwrap().split_once('-').unwrap();
    StreamId {
        ms: ms.parse().unwrap(),
        seq: seq.parse().unwrap(),
    }
}

fn opt_u64(v: &J) -> Option<u64> {
    v.as_i64().filter(|&x| x >= 0).map(|x| x as u64)
}

/// A stream entry as compared: id and field/value pairs.
type IdFields = (StreamId, Vec<(Vec<u8>, Vec<u8>)>);

/// Fields of one key whose TTL had passed when the file was written: present in the file,
/// absent from the manifest's `value`.
type ExpiredFields = HashMap<(u64, Vec<u8>), BTreeMap<Vec<u8>, u64>>;

fn expired_fields(m: &J) -> ExpiredFields {
    let mut out: ExpiredFields = HashMap::new();
    for f in m["expired_hash_fields_in_file"]
        .as_array()
        .into_iter()
        .flatten()
    {
        out.entry((f["db"].as_u64().unwrap(), b64(&f["key"])))
            .or_default()
            .insert(b64(&f["field"]), f["hpexpireat"].as_u64().unwrap());
    }
    out
}

/// Compares a decoded value with a manifest entry; `expired` are the key's fields that are
/// in the data but not in the manifest.
fn compare(
    v: &Value,
    e: &J,
    expired: Option<&BTreeMap<Vec<u8>, u64>>,
    what: &str,
) -> Result<(), String> {
    let ty = e["type"].as_str().unwrap();
    let err = |m: String| Err(format!("{what}: {m}"));
    match (ty, v) {
        ("string", Value::String(s)) => {
            let want = if e["value"].is_null() {
                let r = &e["value_repeat"];
                b64(&r["unit"]).repeat(r["count"].as_u64().unwrap() as usize)
            } else {
                b64(&e["value"])
            };
            if *s != want {
                return err(format!("string of {} bytes differs", s.len()));
            }
        }
        ("list", Value::List(l)) => {
            let want: Vec<Vec<u8>> = e["value"].as_array().unwrap().iter().map(b64).collect();
            if *l != want {
                return err(format!(
                    "list differs ({} vs {} elements)",
                    l.len(),
                    want.len()
                ));
            }
        }
        ("set", Value::Set(m)) => {
            let mut got = m.clone();
            got.sort();
            let want: Vec<Vec<u8>> = e["value"].as_array().unwrap().iter().map(b64).collect();
            if got != want {
                return err(format!(
                    "set differs ({} vs {} members)",
                    got.len(),
                    want.len()
                ));
            }
        }
        ("hash", Value::Hash(fields)) => {
            let mut got: BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)> = BTreeMap::new();
            for f in fields {
                got.insert(f.field.clone(), (f.value.clone(), f.expire_at_ms));
            }
            if got.len() != fields.len() {
                return err("duplicate fields".into());
            }
            for (f, at) in expired.into_iter().flatten() {
                match got.remove(f) {
                    Some((_, Some(t))) if t == *at => {}
                    other => return err(format!("expired field {f:?}: {other:?}")),
                }
            }
            let ttls: BTreeMap<Vec<u8>, u64> = e["field_expires"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| (b64(&p[0]), p[1].as_u64().unwrap()))
                .collect();
            let want: BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)> = e["value"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    let f = b64(&p[0]);
                    let t = ttls.get(&f).copied();
                    (f, (b64(&p[1]), t))
                })
                .collect();
            if got != want {
                return err(format!(
                    "hash differs ({} vs {} fields)",
                    got.len(),
                    want.len()
                ));
            }
        }
        ("zset", Value::SortedSet(m)) => {
            let mut got = m.clone();
            got.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then_with(|| a.0.cmp(&b.0)));
            let want: Vec<(Vec<u8>, f64)> = e["value"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (b64(&p[0]), p[1].as_str().unwrap().parse::<f64>().unwrap()))
                .collect();
            if got.len() != want.len() {
                return err(format!(
                    "zset has {} members, want {}",
                    got.len(),
                    want.len()
                ));
            }
            for (g, w) in got.iter().zip(&want) {
                // Bit-exact: -0.0 keeps its sign, 5e-324 its denormal.
                if g.0 != w.0 || g.1.to_bits() != w.1.to_bits() {
                    return err(format!(
                        "zset member {:?} {} vs {:?} {}",
                        g.0, g.1, w.0, w.1
                    ));
                }
            }
        }
        ("stream", Value::Stream(s)) => {
            let w = &e["value"];
            let meta = (
                s.length,
                s.last_id,
                s.max_deleted_id,
                s.entries_added,
                s.first_id,
            );
            let want_meta = (
                w["length"].as_u64().unwrap(),
                id(&w["last_generated_id"]),
                id(&w["max_deleted_entry_id"]),
                w["entries_added"].as_u64().unwrap(),
                id(&w["recorded_first_entry_id"]),
            );
            if meta != want_meta {
                return err(format!("stream metadata {meta:?} vs {want_meta:?}"));
            }
            let want: Vec<IdFields> = w["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|en| {
                    let kv: Vec<Vec<u8>> = en[1].as_array().unwrap().iter().map(b64).collect();
                    let pairs = kv.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect();
                    (id(&en[0]), pairs)
                })
                .collect();
            let got: Vec<IdFields> = s
                .entries
                .iter()
                .map(|en| (en.id, en.fields.clone()))
                .collect();
            if got != want {
                return err(format!(
                    "stream entries differ ({} vs {})",
                    got.len(),
                    want.len()
                ));
            }
            let wg = w["groups"].as_array().unwrap();
            if s.groups.len() != wg.len() {
                return err(format!("{} groups, want {}", s.groups.len(), wg.len()));
            }
            for (g, wg) in s.groups.iter().zip(wg) {
                let name = b64(&wg["name"]);
                let pel: Vec<(StreamId, Vec<u8>, u64, u64)> = g
                    .pending
                    .iter()
                    .map(|p| {
                        (
                            p.id,
                            p.consumer.clone(),
                            p.delivery_time_ms,
                            p.delivery_count,
                        )
                    })
                    .collect();
                let want_pel: Vec<(StreamId, Vec<u8>, u64, u64)> = wg["pel"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        (
                            id(&p[0]),
                            b64(&p[1]),
                            p[2].as_u64().unwrap(),
                            p[3].as_u64().unwrap(),
                        )
                    })
                    .collect();
                let consumers: Vec<(Vec<u8>, Vec<StreamId>)> = g
                    .consumers
                    .iter()
                    .map(|c| (c.name.clone(), c.pending.clone()))
                    .collect();
                let want_consumers: Vec<(Vec<u8>, Vec<StreamId>)> = wg["consumers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| {
                        (
                            b64(&c["name"]),
                            c["pending"].as_array().unwrap().iter().map(id).collect(),
                        )
                    })
                    .collect();
                if g.name != name
                    || g.last_delivered_id != id(&wg["last_delivered_id"])
                    || g.entries_read != wg["entries_read"].as_u64()
                    || pel != want_pel
                    || consumers != want_consumers
                {
                    return err(format!(
                        "group {:?} differs",
                        String::from_utf8_lossy(&name)
                    ));
                }
            }
        }
        _ => return err(format!("decoded {v:?} is not a {ty}")),
    }
    Ok(())
}

fn key_name(db: u64, key: &[u8]) -> String {
    format!("db{db} {:?}", String::from_utf8_lossy(key))
}

#[test]
fn rdb_files_decode_to_their_manifests() {
    for name in FILES {
        let Some(bytes) = rdb_file(name) else {
            continue;
        };
        let m = load_json(&format!("{name}.manifest.json"));
        check_file(name, &bytes, &m, true);
    }
}

/// Decodes `bytes` and compares every key with the manifest `m`; `real` files also hold the
/// keys that had expired when they were written.
fn check_file(name: &str, bytes: &[u8], m: &J, real: bool) {
    {
        let (info, keys, functions) = decode_file(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            info.version as u64,
            m["rdb_version"].as_u64().unwrap(),
            "{name}"
        );
        assert!(matches!(info.checksum, Checksum::Verified(_)), "{name}");
        assert_eq!(info.end_offset, bytes.len() as u64, "{name}");
        assert!(functions.is_empty(), "{name}");
        assert_eq!(info.empty_keys_skipped, 0, "{name}");

        // AUX fields, by value (numbers as the decimal text the file stores).
        let aux: BTreeMap<String, String> = info
            .aux
            .iter()
            .map(|(k, v)| {
                (
                    String::from_utf8(k.clone()).unwrap(),
                    String::from_utf8(v.clone()).unwrap(),
                )
            })
            .collect();
        let want_aux: BTreeMap<String, String> = m["rdb_aux"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    J::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), v)
            })
            .collect();
        assert_eq!(aux, want_aux, "{name}: aux fields");

        let mut got: HashMap<(u64, Vec<u8>), &Entry> = HashMap::new();
        for e in &keys {
            let k = (e.db as u64, e.key.clone());
            assert!(got.insert(k, e).is_none(), "{name}: key twice");
        }
        let expired = expired_fields(m);
        let mut failures = Vec::new();
        let mut expected = 0;
        for (db, entries) in m["dbs"].as_object().unwrap() {
            let db: u64 = db.parse().unwrap();
            for want in entries.as_array().unwrap() {
                expected += 1;
                let key = b64(&want["key"]);
                let what = format!("{name} {}", key_name(db, &key));
                let Some(e) = got.remove(&(db, key.clone())) else {
                    failures.push(format!("{what}: missing"));
                    continue;
                };
                if e.expire_at_ms != opt_u64(&want["pexpiretime"]) {
                    failures.push(format!("{what}: expiry {:?}", e.expire_at_ms));
                }
                if let Err(f) = compare(&e.value, want, expired.get(&(db, key)), &what) {
                    failures.push(f);
                }
            }
        }
        // What is left: the keys that had expired, with their expiry, and the hashes whose
        // every field had expired.
        let none = Vec::new();
        let expired_keys = if real {
            m["expired_keys_in_file"].as_array().unwrap()
        } else {
            &none
        };
        for x in expired_keys {
            let k = (x["db"].as_u64().unwrap(), b64(&x["key"]));
            match got.remove(&k) {
                Some(e) if e.expire_at_ms == x["pexpireat"].as_u64() => {}
                other => failures.push(format!(
                    "{name} expired key {}: {:?}",
                    key_name(k.0, &k.1),
                    other.map(|e| e.expire_at_ms)
                )),
            }
        }
        for x in m["keys_empty_after_field_expiry"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|_| real)
        {
            let k = (x["db"].as_u64().unwrap(), b64(&x["key"]));
            let fields = expired.get(&k).expect("its fields are listed as expired");
            match got.remove(&k).map(|e| &e.value) {
                Some(Value::Hash(h))
                    if h.len() == fields.len()
                        && h.iter()
                            .all(|f| fields.get(&f.field) == f.expire_at_ms.as_ref()) => {}
                other => failures.push(format!(
                    "{name} all-expired hash {}: {other:?}",
                    key_name(k.0, &k.1)
                )),
            }
        }
        for k in got.keys() {
            failures.push(format!("{name}: unexpected key {}", key_name(k.0, &k.1)));
        }
        assert!(expected > 100, "{name}: the manifest lists {expected} keys");
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

/// Every DUMP payload decodes to the manifest's value, with the file's RDB version.
#[test]
fn dump_payloads_decode_to_their_manifests() {
    for name in FILES {
        let m = load_json(&format!("{name}.manifest.json"));
        let d = load_json(&format!("{name}.dump.json"));
        let expired = expired_fields(&m);
        let mut manifest: HashMap<(u64, Vec<u8>), &J> = HashMap::new();
        for (db, entries) in m["dbs"].as_object().unwrap() {
            for e in entries.as_array().unwrap() {
                manifest.insert((db.parse().unwrap(), b64(&e["key"])), e);
            }
        }
        let mut failures = Vec::new();
        let mut n = 0;
        for (db, entries) in d["dbs"].as_object().unwrap() {
            let db: u64 = db.parse().unwrap();
            for x in entries.as_array().unwrap() {
                n += 1;
                let key = b64(&x["key"]);
                let what = format!("{name} DUMP {}", key_name(db, &key));
                let payload = hex(x["dump"].as_str().unwrap());
                assert_eq!(payload[0] as u64, x["rdb_type"].as_u64().unwrap(), "{what}");
                let want = manifest.get(&(db, key.clone())).expect("in the manifest");
                assert_eq!(x["pexpiretime"], want["pexpiretime"], "{what}");
                match decode_dump_payload(&payload) {
                    Ok((v, version)) => {
                        if version as u64 != x["rdb_version"].as_u64().unwrap() {
                            failures.push(format!("{what}: version {version}"));
                        }
                        if let Err(f) = compare(&v, want, expired.get(&(db, key)), &what) {
                            failures.push(f);
                        }
                    }
                    Err(e) => failures.push(format!("{what}: {e}")),
                }
            }
        }
        assert_eq!(n, manifest.len(), "{name}: a payload for every key");
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

/// Feeding a real file in small pieces, with every collection batched, gives exactly what
/// decoding it whole gives.
#[test]
fn rdb_files_decode_the_same_in_pieces_and_batches() {
    for name in FILES {
        if let Some(bytes) = rdb_file(name) {
            check_pieces(name, &bytes);
        }
    }
}

/// Feeds `bytes` in pieces of varying size with every collection batched and compares with
/// decoding it whole.
fn check_pieces(name: &str, bytes: &[u8]) {
    {
        let (_, whole, _) = decode_file(bytes).unwrap();
        let mut d = FileDecoder::new();
        d.set_inline_limit(0);
        d.set_batch_limit(7);
        let mut buf: Vec<u8> = Vec::new();
        let mut fed = 0usize;
        let mut keys: Vec<Entry> = Vec::new();
        let mut batched = 0;
        let mut piece = 1usize;
        loop {
            match d.next(&buf).unwrap() {
                Step::Need(n) => {
                    assert!(n > 0);
                    assert!(fed < bytes.len(), "{name}: needs more than the file");
                    // Pieces of varying size, at least what was asked for.
                    piece = (piece * 7 + 3) % 5000 + 1;
                    let take = piece.max(n as usize).min(bytes.len() - fed);
                    buf.extend_from_slice(&bytes[fed..fed + take]);
                    fed += take;
                }
                Step::Item { item, consumed } => {
                    buf.drain(..consumed);
                    match item {
                        Item::Key(e) => keys.push(e),
                        Item::KeyStart(k) => {
                            batched += 1;
                            keys.push(Entry {
                                db: k.db,
                                key: k.key,
                                expire_at_ms: k.expire_at_ms,
                                idle_seconds: k.idle_seconds,
                                lfu_freq: k.lfu_freq,
                                value: k.kind.empty(),
                            });
                        }
                        Item::Elements(b) => {
                            let v = &mut keys.last_mut().unwrap().value;
                            match (v, b) {
                                (Value::List(a), Value::List(b))
                                | (Value::Set(a), Value::Set(b)) => a.extend(b),
                                (Value::SortedSet(a), Value::SortedSet(b)) => a.extend(b),
                                (Value::Hash(a), Value::Hash(b)) => a.extend(b),
                                _ => panic!("batch of another kind"),
                            }
                        }
                        Item::End { .. } => break,
                        _ => {}
                    }
                }
            }
        }
        assert!(batched > 10, "{name}: only {batched} keys came in batches");
        assert_eq!(keys, whole, "{name}");
    }
}

/// An RDB length field.
fn put_len(out: &mut Vec<u8>, n: u64) {
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

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// An RDB file assembled from a server's DUMP payloads (each is `[type][object]` plus a
/// footer, which is exactly how a key's value sits in a file), with the manifest's AUX fields,
/// SELECTDB / RESIZEDB and the keys' expiry opcodes, and a real CRC-64 trailer.
fn file_from_dumps(m: &J, d: &J) -> Vec<u8> {
    let version = m["rdb_version"].as_u64().unwrap();
    let mut f = format!("REDIS{version:04}").into_bytes();
    for (k, v) in m["rdb_aux"].as_object().unwrap() {
        f.push(0xfa);
        put_str(&mut f, k.as_bytes());
        match v {
            J::String(s) => put_str(&mut f, s.as_bytes()),
            other => put_str(&mut f, other.to_string().as_bytes()),
        }
    }
    for (db, entries) in d["dbs"].as_object().unwrap() {
        let entries = entries.as_array().unwrap();
        f.push(0xfe);
        put_len(&mut f, db.parse().unwrap());
        f.push(0xfb);
        put_len(&mut f, entries.len() as u64);
        put_len(
            &mut f,
            entries
                .iter()
                .filter(|x| x["pexpiretime"].as_i64() != Some(-1))
                .count() as u64,
        );
        for x in entries {
            if let Some(at) = opt_u64(&x["pexpiretime"]) {
                f.push(0xfc);
                f.extend_from_slice(&at.to_le_bytes());
            }
            let payload = hex(x["dump"].as_str().unwrap());
            f.push(payload[0]);
            put_str(&mut f, &b64(&x["key"]));
            f.extend_from_slice(&payload[1..payload.len() - 10]);
        }
    }
    f.push(0xff);
    let crc = darner_rdb::crc64::crc64(0, &f);
    f.extend_from_slice(&crc.to_le_bytes());
    f
}

/// The file decoder on real objects: a file built from every DUMP payload decodes to the
/// manifest, whole and in pieces with every collection batched.
#[test]
fn files_built_from_dump_payloads_decode_to_their_manifests() {
    for name in FILES {
        let m = load_json(&format!("{name}.manifest.json"));
        let d = load_json(&format!("{name}.dump.json"));
        let bytes = file_from_dumps(&m, &d);
        check_file(name, &bytes, &m, false);
        check_pieces(name, &bytes);
    }
}

/// Every real DUMP payload's `[type][object]`, from all four servers.
fn real_objects() -> &'static Vec<Vec<u8>> {
    static OBJECTS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    OBJECTS.get_or_init(|| {
        let mut out = Vec::new();
        for name in FILES {
            let d = load_json(&format!("{name}.dump.json"));
            for entries in d["dbs"].as_object().unwrap().values() {
                for x in entries.as_array().unwrap() {
                    let p = hex(x["dump"].as_str().unwrap());
                    out.push(p[..p.len() - 10].to_vec());
                }
            }
        }
        out
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    /// Random byte mutations of real payloads (re-checksummed, so the object decoder sees
    /// them) never panic: RESTORE answers or refuses, and a file holding the mutated object
    /// decodes to the same result whole and in pieces.
    #[test]
    fn mutated_real_payloads_never_panic(
        pick in proptest::prelude::any::<proptest::sample::Index>(),
        muts in proptest::collection::vec(
            (proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>(), 0u8..4),
            1..5,
        ),
        pieces in proptest::collection::vec(1usize..5000, 1..6),
    ) {
        let objects = real_objects();
        let mut object = objects[pick.index(objects.len())].clone();
        for &(at, byte, kind) in &muts {
            let i = at % object.len().max(1);
            match kind {
                0 if !object.is_empty() => object[i] = byte,
                1 if !object.is_empty() => object[i] ^= byte | 1,
                2 => object.insert(i.min(object.len()), byte),
                _ if !object.is_empty() => {
                    object.remove(i);
                }
                _ => {}
            }
        }
        let mut payload = object.clone();
        payload.extend_from_slice(&12u16.to_le_bytes());
        let crc = darner_rdb::crc64::crc64(0, &payload);
        payload.extend_from_slice(&crc.to_le_bytes());
        let _ = decode_dump_payload(&payload);

        let mut f = b"REDIS0012".to_vec();
        if let Some((&t, rest)) = object.split_first() {
            f.push(t);
            put_str(&mut f, b"k");
            f.extend_from_slice(rest);
        }
        f.push(0xff);
        let crc = darner_rdb::crc64::crc64(0, &f);
        f.extend_from_slice(&crc.to_le_bytes());
        let whole = decode_file(&f);
        let split = darner_rdb::decode_file_in_pieces(&f, &pieces, u64::MAX, 1000);
        proptest::prop_assert_eq!(whole, split);
    }
}
