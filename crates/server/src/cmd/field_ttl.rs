//! Dragonfly's TTL commands for the members of a collection: FIELDTTL (the remaining TTL of a
//! hash field or a set member) and FIELDEXPIRE (gives hash fields or set members a TTL).
//! Redis has neither; their replies follow Dragonfly's (see tools/specs and
//! docs/compatibility.md).
//!
//! Set members: the database removes expired ones before any command sees the set. Hash
//! fields: removed lazily by the hash commands, so the fields named here are expired first,
//! as cmd/hash.rs does; both kinds are registered for the active cycle's field sweep.

use crate::cmd::{parse_int, Reg, ERR_NOT_INT, ERR_WRONGTYPE};
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_engine::{DbView, Expired, Value, ValueRef, ValueType};
use darner_resp::ReplyWriter;

pub fn register(r: &mut Reg) {
    r.key("fieldttl", fieldttl);
    r.key("fieldexpire", fieldexpire);
}

/// FIELDEXPIRE's bound on the TTL in seconds (Dragonfly's, 2^26).
const MAX_FIELD_TTL_SECS: i64 = 1 << 26;

/// Removes the named fields of the hash at `key` whose TTL has passed, deleting the key when
/// none is left (the hash commands' lazy field expiry). Anything else is left alone.
fn expire_hash_fields(db: &mut DbView<'_>, key: &[u8], fields: &[&[u8]]) {
    let now = db.now_ms();
    let log = db.logging_expired();
    // Checked on the borrowed view first: a hash without field TTLs (the usual case) is
    // left alone after one lookup.
    let entry = db
        .get_mut_quiet(key)
        .filter(|e| matches!(e.value(), ValueRef::Hash(h) if h.has_ttls()));
    let (gone, empty, names) = match entry.and_then(|e| e.hash_mut()) {
        Some(mut h) => {
            let gone: Vec<&[u8]> = fields
                .iter()
                .copied()
                .filter(|f| h.expire_field(f, now))
                .collect();
            (gone.len(), h.is_empty(), gone)
        }
        _ => return,
    };
    // For the AOF: HDEL per field removed (the last one takes the key), as cmd/hash.rs.
    if log && !names.is_empty() {
        let names = names.into_iter().map(Box::from).collect();
        db.log_expired(Expired::Fields(key.into(), names));
    }
    if empty {
        db.remove(key);
    } else if gone > 0 {
        db.signal(key);
    }
}

/// FIELDTTL key field: the remaining TTL in seconds (rounded up) of a hash field or set
/// member; -1 when it has none, -2 when the key is missing, -3 when the field or member is.
fn fieldttl(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let (key, field) = (args[1], args[2]);
    let mut db = ctx.db();
    let now = db.now_ms();
    expire_hash_fields(&mut db, key, &[field]);
    let expiry = match db.get(key).map(|e| e.value()) {
        None => return w.int(-2),
        Some(ValueRef::Set(s)) => s.expiry_of(field),
        Some(ValueRef::Hash(h)) => h.expiry_of(field),
        Some(_) => return w.error(ERR_WRONGTYPE),
    };
    w.int(match expiry {
        None => -3,
        Some(None) => -1,
        Some(Some(e)) => (e - now + 999) / 1000,
    });
}

/// FIELDEXPIRE key seconds field [field ...]: gives each named hash field or set member a TTL
/// of `seconds`. Replies with one integer per field: 1 when set, -2 when the field is absent
/// (every field is -2 when the key is missing or holds another type, as in Dragonfly).
fn fieldexpire(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let key = args[1];
    let secs = match parse_int(args[2]) {
        Some(n) if (1..=MAX_FIELD_TTL_SECS).contains(&n) => n,
        _ => return w.error(ERR_NOT_INT),
    };
    let fields = &args[3..];
    let logging = ctx.propagating();
    let mut db = ctx.db();
    let when = db.now_ms() + secs * 1000;
    expire_hash_fields(&mut db, key, fields);
    let mut changed = false;
    // The fields that got the TTL, for the AOF (written with the absolute time below).
    let mut done: Vec<&[u8]> = Vec::new();
    let mut is_set = false;
    w.array(fields.len());
    // A hash through `hash_mut`: a small one stays inline in its entry.
    let is_hash = db.get_mut_quiet(key).map(|e| e.value_type()) == Some(ValueType::Hash);
    let entry = db.get_mut_quiet(key);
    let (hash, set) = match entry {
        Some(e) if is_hash => (e.hash_mut(), None),
        Some(e) => (None, e.value_mut()),
        None => (None, None),
    };
    match (hash, set) {
        (_, Some(Value::Set(s))) => {
            is_set = true;
            for f in fields {
                let ok = s.set_expiry(f, Some(when));
                if ok && logging {
                    done.push(f);
                }
                changed |= ok;
                w.int(if ok { 1 } else { -2 });
            }
        }
        (Some(mut h), _) => {
            // A listpack hash keeps field TTLs only once marked "listpackex".
            if fields.iter().any(|f| h.contains(f)) {
                h.mark_ex();
            }
            for f in fields {
                let ok = h.set_expiry(f, Some(when));
                if ok && logging {
                    done.push(f);
                }
                changed |= ok;
                w.int(if ok { 1 } else { -2 });
            }
        }
        _ => {
            for _ in fields {
                w.int(-2);
            }
        }
    }
    if changed {
        db.signal(key);
        db.note_field_ttls(key);
    }
    // Written with the absolute time: SADDEX's PXAT form for set members, HPEXPIREAT for
    // hash fields (the members and fields are there, so both just set the TTL).
    if done.is_empty() {
        ctx.propagate_nothing();
    } else {
        let when = Bytes::from(when.to_string());
        let mut v = if is_set {
            vec![
                Bytes::from_static(b"SADDEX"),
                Bytes::copy_from_slice(key),
                Bytes::from_static(b"PXAT"),
                when,
            ]
        } else {
            vec![
                Bytes::from_static(b"HPEXPIREAT"),
                Bytes::copy_from_slice(key),
                when,
                Bytes::from_static(b"FIELDS"),
                Bytes::from(done.len().to_string()),
            ]
        };
        v.extend(done.iter().map(|f| Bytes::copy_from_slice(f)));
        ctx.propagate(v);
    }
}
