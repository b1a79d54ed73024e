//! One key's value, by RDB object type: the element-by-element types (read one element or
//! quicklist node at a time, so the file decoder can hand a big collection over in batches)
//! and the types stored as one blob (listpack, ziplist, intset, zipmap), which are read whole
//! and validated entry by entry.

use std::collections::HashSet;

use super::reader::{parse_double, Reader, R};
use super::{intset, listpack, stream, ziplist, zipmap, Elem};
use crate::{object_type as ot, ErrorKind, HashField, Value};

/// Largest field expiry Redis 7.4 accepts (`EB_EXPIRE_TIME_MAX`, 2^48 - 1 ms).
pub(crate) const FIELD_EXPIRE_MAX: u64 = (1 << 48) - 1;

/// Quicklist node containers (RDB type 18).
const CONTAINER_PLAIN: u64 = 1;
const CONTAINER_PACKED: u64 = 2;

/// The collection kinds a key can be streamed as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    List,
    Set,
    SortedSet,
    Hash,
}

impl Kind {
    /// An empty value of this kind (a batch to fill).
    pub fn empty(self) -> Value {
        match self {
            Kind::List => Value::List(Vec::new()),
            Kind::Set => Value::Set(Vec::new()),
            Kind::SortedSet => Value::SortedSet(Vec::new()),
            Kind::Hash => Value::Hash(Vec::new()),
        }
    }
}

/// Reading state of a collection stored element by element (types 1-5, 14, 18, 24): how many
/// units (elements, or quicklist nodes) are left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Elements {
    t: u8,
    pub(crate) remaining: u64,
    /// Units read so far that produced elements (an all-empty quicklist is an empty key).
    pub(crate) produced: u64,
    /// Type 24: the base field TTLs are stored relative to.
    min_expire: u64,
}

/// Whether `t` is an object type this decoder loads (not modules, not 7.4's pre-release
/// types).
pub(crate) fn is_object_type(t: u8) -> bool {
    matches!(
        t,
        0..=5 | 9..=21 | ot::HASH_METADATA | ot::HASH_LISTPACK_EX | ot::DARNER_SET_TTL
    )
}

/// Whether `t` is stored element by element.
pub(crate) fn is_element_type(t: u8) -> bool {
    matches!(
        t,
        ot::LIST
            | ot::SET
            | ot::ZSET
            | ot::HASH
            | ot::ZSET_2
            | ot::LIST_QUICKLIST
            | ot::LIST_QUICKLIST_2
            | ot::HASH_METADATA
    )
}

/// Smallest encoding of one unit of an element type, for count checks.
fn unit_min_bytes(t: u8) -> u64 {
    match t {
        ot::ZSET => 2,
        ot::ZSET_2 => 9,
        ot::HASH => 2,
        ot::HASH_METADATA => 3,
        ot::LIST_QUICKLIST_2 => 2,
        _ => 1,
    }
}

impl Elements {
    /// Reads the header of an element type (`t` from [`is_element_type`]): its count, and
    /// for type 24 the minimum field expiry.
    pub(crate) fn start(r: &mut Reader, t: u8) -> R<Elements> {
        let mut min_expire = 0;
        if t == ot::HASH_METADATA {
            let at = r.offset();
            min_expire = r.u64_le()?;
            if min_expire > FIELD_EXPIRE_MAX + 1 {
                return Err(Reader::fail_at(
                    at,
                    ErrorKind::Corrupt("hash with an invalid minimum field expiry"),
                ));
            }
        }
        let remaining = r.count(unit_min_bytes(t))?;
        Ok(Elements {
            t,
            remaining,
            produced: 0,
            min_expire,
        })
    }

    pub(crate) fn kind(&self) -> Kind {
        match self.t {
            ot::SET => Kind::Set,
            ot::ZSET | ot::ZSET_2 => Kind::SortedSet,
            ot::HASH | ot::HASH_METADATA => Kind::Hash,
            _ => Kind::List,
        }
    }

    /// Reads one unit and appends what it holds to `batch` (of this kind). Changes nothing
    /// when it fails, so a caller can retry with more input.
    pub(crate) fn read_one(&mut self, r: &mut Reader, batch: &mut Value) -> R<()> {
        match (self.t, batch) {
            (ot::LIST, Value::List(v)) => v.push(r.string()?),
            (ot::SET, Value::Set(v)) => v.push(r.string()?),
            (ot::ZSET | ot::ZSET_2, Value::SortedSet(v)) => {
                let member = r.string()?;
                let at = r.offset();
                let score = if self.t == ot::ZSET {
                    r.text_double()?
                } else {
                    r.binary_double()?
                };
                if score.is_nan() {
                    return Err(Reader::fail_at(
                        at,
                        ErrorKind::Corrupt("zset with a NaN score"),
                    ));
                }
                v.push((member, score));
            }
            (ot::HASH, Value::Hash(v)) => {
                let field = r.string()?;
                let value = r.string()?;
                v.push(HashField {
                    field,
                    value,
                    expire_at_ms: None,
                });
            }
            (ot::HASH_METADATA, Value::Hash(v)) => {
                let at = r.offset();
                let ttl = r.length()?;
                // 0 is "no TTL"; anything else is relative to the minimum, plus one.
                let expire_at_ms = match ttl {
                    0 => None,
                    _ => Some(
                        (ttl - 1)
                            .checked_add(self.min_expire)
                            .filter(|&e| e <= FIELD_EXPIRE_MAX)
                            .ok_or_else(|| {
                                Reader::fail_at(
                                    at,
                                    ErrorKind::Corrupt("hash field with an invalid expiry"),
                                )
                            })?,
                    ),
                };
                let field = r.string()?;
                let value = r.string()?;
                v.push(HashField {
                    field,
                    value,
                    expire_at_ms,
                });
            }
            (ot::LIST_QUICKLIST | ot::LIST_QUICKLIST_2, Value::List(v)) => {
                let mut container = CONTAINER_PACKED;
                if self.t == ot::LIST_QUICKLIST_2 {
                    let at = r.offset();
                    container = r.length()?;
                    if container != CONTAINER_PLAIN && container != CONTAINER_PACKED {
                        return Err(Reader::fail_at(
                            at,
                            ErrorKind::Corrupt("quicklist node with an unknown container"),
                        ));
                    }
                }
                let at = r.offset();
                let data = r.string()?;
                if data.is_empty() {
                    return Err(Reader::fail_at(
                        at,
                        ErrorKind::Corrupt("empty quicklist node"),
                    ));
                }
                if container == CONTAINER_PLAIN {
                    v.push(data);
                } else {
                    let elems = if self.t == ot::LIST_QUICKLIST {
                        ziplist::parse(&data)
                    } else {
                        listpack::parse(&data)
                    }
                    .map_err(|m| Reader::fail_at(at, ErrorKind::Corrupt(m)))?;
                    // Empty nodes are skipped, as Redis does.
                    if elems.is_empty() {
                        self.remaining -= 1;
                        return Ok(());
                    }
                    v.extend(elems.iter().map(|e| e.to_vec()));
                }
            }
            _ => return Err(r.corrupt("internal: batch of the wrong kind")),
        }
        self.remaining -= 1;
        self.produced += 1;
        Ok(())
    }
}

/// Refuses duplicate members / fields, as Redis does when it builds the value.
pub(crate) fn check_unique(v: &Value) -> Result<(), &'static str> {
    fn unique<'a>(it: impl ExactSizeIterator<Item = &'a [u8]>) -> bool {
        let mut seen = HashSet::with_capacity(it.len());
        it.into_iter().all(|m| seen.insert(m))
    }
    let ok = match v {
        Value::Set(m) => unique(m.iter().map(Vec::as_slice)),
        Value::SetWithTtl(m) => unique(m.iter().map(|(m, _)| m.as_slice())),
        Value::SortedSet(m) => unique(m.iter().map(|(m, _)| m.as_slice())),
        Value::Hash(f) => unique(f.iter().map(|f| f.field.as_slice())),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(match v {
            Value::Hash(_) => "duplicate hash fields",
            Value::SortedSet(_) => "duplicate zset members",
            _ => "duplicate set members",
        })
    }
}

/// Appends `batch` to `into` (same kind).
pub(crate) fn append(into: &mut Value, batch: Value) {
    match (into, batch) {
        (Value::List(a), Value::List(b)) | (Value::Set(a), Value::Set(b)) => a.extend(b),
        (Value::SortedSet(a), Value::SortedSet(b)) => a.extend(b),
        (Value::Hash(a), Value::Hash(b)) => a.extend(b),
        _ => {}
    }
}

/// Whether a value holds nothing (an empty key, which Redis does not load).
pub(crate) fn is_empty(v: &Value) -> bool {
    match v {
        Value::List(v) | Value::Set(v) => v.is_empty(),
        Value::SetWithTtl(v) => v.is_empty(),
        Value::SortedSet(v) => v.is_empty(),
        Value::Hash(v) => v.is_empty(),
        Value::String(_) | Value::Stream(_) => false,
    }
}

/// Reads a whole value of type `t` (the type byte already read). `None` is an empty key:
/// Redis skips those when loading a file and refuses them in RESTORE.
pub(crate) fn read_value(r: &mut Reader, t: u8) -> R<Option<Value>> {
    let start = r.offset();
    let v = match t {
        ot::STRING => Value::String(r.string()?),
        _ if is_element_type(t) => {
            let mut el = Elements::start(r, t)?;
            let cap = r.capacity(el.remaining, unit_min_bytes(t));
            let mut v = match el.kind() {
                Kind::List => Value::List(Vec::with_capacity(cap)),
                Kind::Set => Value::Set(Vec::with_capacity(cap)),
                Kind::SortedSet => Value::SortedSet(Vec::with_capacity(cap)),
                Kind::Hash => Value::Hash(Vec::with_capacity(cap)),
            };
            while el.remaining > 0 {
                el.read_one(r, &mut v)?;
            }
            v
        }
        ot::STREAM_LISTPACKS | ot::STREAM_LISTPACKS_2 | ot::STREAM_LISTPACKS_3 => {
            Value::Stream(Box::new(stream::read(r, t)?))
        }
        ot::DARNER_SET_TTL => {
            // Darner's own type (encode/value.rs): a count, then each member as a string and
            // its TTL, an absolute unix ms time in 8 bytes LE, 0 for none.
            let n = r.count(9)?;
            let mut v = Vec::with_capacity(r.capacity(n, 9));
            for _ in 0..n {
                let member = r.string()?;
                let ttl = r.u64_le()?;
                v.push((member, (ttl != 0).then_some(ttl)));
            }
            Value::SetWithTtl(v)
        }
        ot::HASH_ZIPMAP
        | ot::LIST_ZIPLIST
        | ot::SET_INTSET
        | ot::ZSET_ZIPLIST
        | ot::HASH_ZIPLIST
        | ot::HASH_LISTPACK
        | ot::ZSET_LISTPACK
        | ot::SET_LISTPACK
        | ot::HASH_LISTPACK_EX => {
            if t == ot::HASH_LISTPACK_EX {
                // The minimum field expiry: only a hint for Redis, not checked on load.
                r.u64_le()?;
            }
            let at = r.offset();
            let blob = r.string()?;
            blob_value(t, &blob).map_err(|m| Reader::fail_at(at, ErrorKind::Corrupt(m)))?
        }
        _ => {
            return Err(Reader::fail_at(
                start.saturating_sub(1),
                ErrorKind::UnsupportedType(t),
            ))
        }
    };
    if is_empty(&v) {
        return Ok(None);
    }
    check_unique(&v).map_err(|m| Reader::fail_at(start, ErrorKind::Corrupt(m)))?;
    Ok(Some(v))
}

fn score(e: &Elem) -> Result<f64, &'static str> {
    let s = match *e {
        Elem::Int(i) => i as f64,
        Elem::Str(s) => parse_double(s).ok_or("zset score is not a number")?,
    };
    if s.is_nan() {
        return Err("zset with a NaN score");
    }
    Ok(s)
}

fn pairs<'a>(
    elems: &'a [Elem<'a>],
    what: &'static str,
) -> Result<&'a [[Elem<'a>; 2]], &'static str> {
    let (pairs, rest) = elems.as_chunks::<2>();
    if !rest.is_empty() {
        return Err(what);
    }
    Ok(pairs)
}

/// A value stored as one blob.
fn blob_value(t: u8, blob: &[u8]) -> Result<Value, &'static str> {
    Ok(match t {
        ot::SET_INTSET => Value::Set(
            intset::parse(blob)?
                .into_iter()
                .map(|i| i.to_string().into_bytes())
                .collect(),
        ),
        ot::HASH_ZIPMAP => Value::Hash(
            zipmap::parse(blob)?
                .into_iter()
                .map(|(f, v)| HashField {
                    field: f.to_vec(),
                    value: v.to_vec(),
                    expire_at_ms: None,
                })
                .collect(),
        ),
        ot::LIST_ZIPLIST => Value::List(ziplist::parse(blob)?.iter().map(|e| e.to_vec()).collect()),
        ot::SET_LISTPACK => Value::Set(listpack::parse(blob)?.iter().map(|e| e.to_vec()).collect()),
        ot::ZSET_ZIPLIST | ot::ZSET_LISTPACK => {
            let elems = if t == ot::ZSET_ZIPLIST {
                ziplist::parse(blob)?
            } else {
                listpack::parse(blob)?
            };
            let mut out = Vec::with_capacity(elems.len() / 2);
            for [m, s] in pairs(&elems, "zset with an odd number of entries")? {
                out.push((m.to_vec(), score(s)?));
            }
            Value::SortedSet(out)
        }
        ot::HASH_ZIPLIST | ot::HASH_LISTPACK => {
            let elems = if t == ot::HASH_ZIPLIST {
                ziplist::parse(blob)?
            } else {
                listpack::parse(blob)?
            };
            let mut out = Vec::with_capacity(elems.len() / 2);
            for [f, v] in pairs(&elems, "hash with an odd number of entries")? {
                out.push(HashField {
                    field: f.to_vec(),
                    value: v.to_vec(),
                    expire_at_ms: None,
                });
            }
            Value::Hash(out)
        }
        ot::HASH_LISTPACK_EX => {
            let elems = listpack::parse(blob)?;
            let (triples, rest) = elems.as_chunks::<3>();
            if !rest.is_empty() {
                return Err("hash listpack with a partial field/value/TTL triple");
            }
            let mut out = Vec::with_capacity(triples.len());
            for [f, v, ttl] in triples {
                // Absolute unix ms; 0 means "no TTL".
                let ttl = ttl
                    .int()
                    .filter(|&t| (0..=FIELD_EXPIRE_MAX as i64).contains(&t))
                    .ok_or("hash field with an invalid expiry")?;
                out.push(HashField {
                    field: f.to_vec(),
                    value: v.to_vec(),
                    expire_at_ms: (ttl != 0).then_some(ttl as u64),
                });
            }
            Value::Hash(out)
        }
        _ => return Err("internal: not a blob type"),
    })
}
