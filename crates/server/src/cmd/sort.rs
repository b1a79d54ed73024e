//! SORT and SORT_RO (Redis 7.2's sort.c semantics).
//!
//! The source key is read on its shard in one hop: its elements come back copied (for a list
//! or sorted set with `BY <constant>`, only the LIMIT range, in native order, as Redis loads
//! it). Sorting and output then happen on the connection's thread. A BY pattern with `*`
//! names one weight key per element, and a GET pattern one key per element and pattern: those
//! keys can live on any shard, so the command is registered with `Locks::All` (every shard
//! stays locked, so all lookups see one consistent state) and the lookups are batched: one hop
//! per shard for all BY weights, then one hop per shard for all GET values of the returned
//! range (GET is only evaluated on the elements LIMIT keeps, as in Redis). STORE writes the
//! result as a list on the destination's shard (deleting it when the result is empty).
//!
//! Ties: numeric sorting breaks score ties by the elements' bytes (as Redis); ALPHA with BY
//! keeps the load order of equal weights (a stable sort, as glibc's merge-sort `qsort`).
//! ALPHA compares bytes (Redis's `strcoll` in the C locale: up to the first NUL byte unless
//! STORE is given, where Redis compares whole strings).

use super::{Locks, Reg, TxFuture, ERR_NOT_INT, ERR_SYNTAX, ERR_WRONGTYPE};
use crate::exec::Tx;
use crate::notify::{notify, GENERIC, LIST};
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_engine::types::{Limits, List, ZSet};
use darner_engine::{Entry, Value, ValueRef, ValueType};
use std::cmp::Ordering;

pub fn register(r: &mut Reg) {
    r.tx("sort", Locks::All, sort);
    r.tx("sort_ro", Locks::All, sort_ro);
}

const ERR_SCORE: &[u8] = b"ERR One or more scores can't be converted into double";

fn sort(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move { sort_generic(tx, args, false).await })
}

fn sort_ro(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move { sort_generic(tx, args, true).await })
}

/// What C code sees of a byte string: the bytes before the first NUL.
fn cstr(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// Redis's `strcasecmp(arg, word)`.
fn kw(a: &[u8], word: &str) -> bool {
    cstr(a).eq_ignore_ascii_case(word.as_bytes())
}

/// A BY / GET pattern as Redis's `lookupKeyByPattern` reads it.
#[derive(Clone, Debug)]
enum Pattern {
    /// `#`: the element itself.
    Elem,
    /// No `*`: names no key (GET replies null).
    Never,
    /// `pre*post` or `pre*post->field`: the first `*` is replaced by the element.
    Key {
        pre: Bytes,
        post: Bytes,
        field: Option<Bytes>,
    },
}

impl Pattern {
    fn parse(p: &Bytes) -> Pattern {
        // Redis tests `p[0] == '#' && p[1] == '\0'` on a NUL-terminated buffer.
        if p.first() == Some(&b'#') && p.get(1).is_none_or(|&c| c == 0) {
            return Pattern::Elem;
        }
        // strchr / strstr stop at the first NUL.
        let c = cstr(p);
        let Some(star) = c.iter().position(|&b| b == b'*') else {
            return Pattern::Never;
        };
        let arrow = c[star + 1..]
            .windows(2)
            .position(|w| w == b"->")
            .map(|i| star + 1 + i)
            // "->" at the end (or before a NUL) is no field: it stays part of the key.
            .filter(|&f| p.get(f + 2).is_some_and(|&b| b != 0));
        match arrow {
            Some(f) => Pattern::Key {
                pre: p.slice(..star),
                post: p.slice(star + 1..f),
                field: Some(p.slice(f + 2..)),
            },
            None => Pattern::Key {
                pre: p.slice(..star),
                post: p.slice(star + 1..),
                field: None,
            },
        }
    }

    /// The key (and hash field) to look up for `elem`; None when nothing is looked up.
    fn lookup(&self, elem: &[u8]) -> Option<Lookup> {
        match self {
            Pattern::Key { pre, post, field } => {
                let mut k = Vec::with_capacity(pre.len() + elem.len() + post.len());
                k.extend_from_slice(pre);
                k.extend_from_slice(elem);
                k.extend_from_slice(post);
                Some((k, field.clone()))
            }
            _ => None,
        }
    }
}

/// A key and an optional hash field.
type Lookup = (Vec<u8>, Option<Bytes>);

struct Opts {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    store: Option<Bytes>,
    /// The last BY pattern.
    by: Option<Pattern>,
    /// Some BY had no `*`: nothing is sorted (sticky, as in Redis).
    dontsort: bool,
    gets: Vec<Pattern>,
}

fn parse(args: &[Bytes], readonly: bool) -> Result<Opts, &'static [u8]> {
    let mut o = Opts {
        desc: false,
        alpha: false,
        limit_start: 0,
        limit_count: -1,
        store: None,
        by: None,
        dontsort: false,
        gets: Vec::new(),
    };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if kw(a, "asc") {
            o.desc = false;
        } else if kw(a, "desc") {
            o.desc = true;
        } else if kw(a, "alpha") {
            o.alpha = true;
        } else if kw(a, "limit") && left >= 2 {
            o.limit_start = super::parse_int(&args[j + 1]).ok_or(ERR_NOT_INT)?;
            o.limit_count = super::parse_int(&args[j + 2]).ok_or(ERR_NOT_INT)?;
            j += 2;
        } else if !readonly && kw(a, "store") && left >= 1 {
            o.store = Some(args[j + 1].clone());
            j += 1;
        } else if kw(a, "by") && left >= 1 {
            if !cstr(&args[j + 1]).contains(&b'*') {
                o.dontsort = true;
            }
            o.by = Some(Pattern::parse(&args[j + 1]));
            j += 1;
        } else if kw(a, "get") && left >= 1 {
            o.gets.push(Pattern::parse(&args[j + 1]));
            j += 1;
        } else {
            return Err(ERR_SYNTAX);
        }
        j += 1;
    }
    Ok(o)
}

/// The source's elements as loaded, and the output range over them (Redis's `start` / `end`,
/// inclusive; `end < start` is an empty result).
struct Loaded {
    elems: Vec<Vec<u8>>,
    start: i64,
    end: i64,
    dontsort: bool,
    alpha: bool,
    /// The BY pattern is used to sort.
    by: bool,
}

/// Step one, on the source's shard: type check and load (Redis's order of operations).
fn load(ctx: &mut ShardCtx, key: &[u8], o: LoadOpts) -> Result<Loaded, ()> {
    let limits = ctx.limits();
    let mut db = ctx.db();
    let ty = db.get(key).map(|e| e.value_type());
    let (mut dontsort, mut alpha, mut by) = (o.dontsort, o.alpha, o.by);
    match ty {
        None | Some(ValueType::List) | Some(ValueType::ZSet) => {}
        Some(ValueType::Set) => {
            // A set has no order of its own: with STORE the result must be reproducible, so
            // Redis sorts it (ALPHA, by the elements).
            if dontsort && o.store {
                dontsort = false;
                alpha = true;
                by = false;
            }
        }
        Some(_) => return Err(()),
    }
    if ty == Some(ValueType::ZSet) {
        // Redis converts a listpack sorted set to a skiplist for SORT (and keeps it so).
        if let Some(Value::ZSet(z)) = db.get_mut_quiet(key).and_then(|e| e.value_mut()) {
            to_skiplist(z, &limits);
        }
    }
    let value = db.peek(key).map(|e| e.value());
    let n = match value {
        Some(ValueRef::List(l)) => l.len(),
        Some(ValueRef::Set(s)) => s.len(),
        Some(ValueRef::ZSet(z)) => z.len(),
        _ => 0,
    } as i64;
    let mut start = o.limit_start.max(0).min(n);
    let count = o.limit_count.max(-1).min(n);
    let mut end = if count < 0 { n - 1 } else { start + count - 1 };
    if start >= n {
        start = n - 1;
        end = n - 2;
    }
    if end >= n {
        end = n - 1;
    }
    let mut elems: Vec<Vec<u8>> = Vec::new();
    match value {
        // BY <constant>: the LIMIT range straight from the list, from the tail when DESC.
        Some(ValueRef::List(l)) if dontsort && end >= start => {
            let take = (end - start + 1) as usize;
            if o.desc {
                let from = (n - start - 1) as usize;
                elems.extend(
                    l.iter_rev_from(from)
                        .take(take)
                        .map(std::borrow::Cow::into_owned),
                );
            } else {
                elems.extend(
                    l.iter_from(start as usize)
                        .take(take)
                        .map(std::borrow::Cow::into_owned),
                );
            }
            end -= start;
            start = 0;
        }
        Some(ValueRef::List(_)) if dontsort => {}
        Some(ValueRef::List(l)) => {
            elems.reserve(l.len());
            elems.extend(l.iter().map(std::borrow::Cow::into_owned));
        }
        Some(ValueRef::Set(s)) => {
            elems.reserve(s.len());
            s.for_each(|m| elems.push(m.to_vec()));
        }
        Some(ValueRef::ZSet(z)) if dontsort => {
            let take = if start != 0 || end != n - 1 {
                (end - start + 1).max(0)
            } else {
                n
            };
            if take > 0 {
                // Ranks start..start+take, counted from the top when DESC.
                let (a, b) = if o.desc {
                    (n - start - take, n - start)
                } else {
                    (start, start + take)
                };
                z.range(a as usize, b as usize, o.desc, |m, _| {
                    elems.push(m.to_vec())
                });
            }
            end -= start;
            start = 0;
        }
        Some(ValueRef::ZSet(z)) => {
            elems.reserve(z.len());
            z.for_each(|m, _| elems.push(m.to_vec()));
        }
        _ => {}
    }
    Ok(Loaded {
        elems,
        start,
        end,
        dontsort,
        alpha,
        by,
    })
}

/// Redis's `zsetConvert(zobj, OBJ_ENCODING_SKIPLIST)`, which SORT applies to its source.
fn to_skiplist(z: &mut ZSet, limits: &Limits) {
    if z.encoding() != "listpack" {
        return;
    }
    let items = z.to_vec();
    let refs: Vec<(&[u8], f64)> = items.iter().map(|(m, s)| (&m[..], *s)).collect();
    let forced = Limits {
        zset_max_listpack_entries: 0,
        ..*limits
    };
    *z = ZSet::from_sorted(&refs, &forced);
}

#[derive(Clone, Copy)]
struct LoadOpts {
    desc: bool,
    alpha: bool,
    dontsort: bool,
    /// A BY pattern with `*` is in force.
    by: bool,
    store: bool,
    limit_start: i64,
    limit_count: i64,
}

/// Looks up keys (and hash fields) on one shard as Redis's `lookupKeyByPattern`: a string
/// key's value, a hash's field, or nothing (missing key, other type, missing field).
fn lookup_batch(ctx: &mut ShardCtx, batch: Vec<Lookup>) -> Vec<Option<Vec<u8>>> {
    let mut db = ctx.db();
    batch
        .into_iter()
        .map(|(k, field)| match (db.get(&k).map(|e| e.value()), field) {
            (Some(ValueRef::Str(s)), None) => Some(s.to_vec()),
            (Some(ValueRef::Hash(h)), Some(f)) => h.get(&f).map(<[u8]>::to_vec),
            _ => None,
        })
        .collect()
}

/// Runs the lookups with one hop per shard (all hops sent before any is awaited); the
/// results come back in the order of `reqs`.
async fn lookup_all(tx: &Tx, reqs: Vec<Lookup>) -> Vec<Option<Vec<u8>>> {
    let total = reqs.len();
    let mut per: Vec<(Vec<usize>, Vec<Lookup>)> =
        (0..tx.nshards()).map(|_| Default::default()).collect();
    for (i, r) in reqs.into_iter().enumerate() {
        let s = tx.shard_of(&r.0);
        per[s].0.push(i);
        per[s].1.push(r);
    }
    let hops: Vec<_> = per
        .into_iter()
        .enumerate()
        .filter(|(_, (idx, _))| !idx.is_empty())
        .map(|(s, (idx, batch))| (idx, tx.run(s, move |ctx| lookup_batch(ctx, batch))))
        .collect();
    let mut out = vec![None; total];
    for (idx, hop) in hops {
        for (i, v) in idx.into_iter().zip(hop.await) {
            out[i] = v;
        }
    }
    out
}

/// The score Redis's SORT computes with `strtod`: leading white space allowed, the number must
/// end the string (or be followed by a NUL), no NaN, no ERANGE (overflow or underflow). The
/// empty string is 0 (strtod converts nothing and stops on the terminator).
fn sort_score(b: &[u8]) -> Option<f64> {
    let b = cstr(b);
    if b.is_empty() {
        return Some(0.0);
    }
    let t = match b
        .iter()
        .position(|&c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
    {
        Some(i) => &b[i..],
        None => return None,
    };
    let v = darner_resp::parse_f64_strict(t)?;
    // glibc also reports ERANGE for an inexact result below the normal range. A decimal
    // subnormal is (short of a full 750-digit expansion) inexact; a hex one is taken as exact.
    let unsigned = t
        .strip_prefix(b"-")
        .or_else(|| t.strip_prefix(b"+"))
        .unwrap_or(t);
    let hex = unsigned.len() > 1 && unsigned[0] == b'0' && (unsigned[1] | 0x20) == b'x';
    if v.is_subnormal() && !hex {
        return None;
    }
    Some(v)
}

async fn sort_generic(tx: Tx, args: Vec<Bytes>, readonly: bool) -> Vec<u8> {
    let resp3 = tx.resp3();
    let err = |e: &[u8]| super::with_writer(resp3, |w| w.error(e));
    let o = match parse(&args, readonly) {
        Ok(o) => o,
        Err(e) => return err(e),
    };
    let lo = LoadOpts {
        desc: o.desc,
        alpha: o.alpha,
        dontsort: o.dontsort,
        by: o.by.is_some(),
        store: o.store.is_some(),
        limit_start: o.limit_start,
        limit_count: o.limit_count,
    };
    let src = args[1].clone();
    let loaded = tx
        .run(tx.shard_of(&src), move |ctx| load(ctx, &src, lo))
        .await;
    let Ok(Loaded {
        elems,
        start,
        end,
        dontsort,
        alpha,
        by,
    }) = loaded
    else {
        return err(ERR_WRONGTYPE);
    };
    let store = o.store.is_some();

    // Sort a permutation of the loaded elements.
    let mut order: Vec<usize> = (0..elems.len()).collect();
    if !dontsort {
        let by_pat = if by { o.by.as_ref() } else { None };
        let weights: Option<Vec<Option<Vec<u8>>>> = match by_pat {
            Some(p) => {
                let mut reqs = Vec::new();
                let mut at = Vec::with_capacity(elems.len());
                for e in &elems {
                    match p.lookup(e) {
                        Some(l) => {
                            at.push(Some(reqs.len()));
                            reqs.push(l);
                        }
                        None => at.push(None),
                    }
                }
                let mut vals = lookup_all(&tx, reqs).await;
                Some(
                    at.into_iter()
                        .map(|i| i.and_then(|i| vals[i].take()))
                        .collect(),
                )
            }
            None => None,
        };
        let desc = o.desc;
        let dir = |c: Ordering| if desc { c.reverse() } else { c };
        let text_cmp = |a: &[u8], b: &[u8]| {
            if store {
                a.cmp(b)
            } else {
                cstr(a).cmp(cstr(b))
            }
        };
        if alpha {
            match &weights {
                Some(w) => order.sort_by(|&a, &b| {
                    dir(match (&w[a], &w[b]) {
                        (None, None) => Ordering::Equal,
                        (None, Some(_)) => Ordering::Less,
                        (Some(_), None) => Ordering::Greater,
                        (Some(x), Some(y)) => text_cmp(x, y),
                    })
                }),
                None => order.sort_by(|&a, &b| dir(text_cmp(&elems[a], &elems[b]))),
            }
        } else {
            let mut scores = Vec::with_capacity(elems.len());
            let mut bad = false;
            for (i, e) in elems.iter().enumerate() {
                let src: Option<&[u8]> = match &weights {
                    Some(w) => w[i].as_deref(),
                    None => Some(e),
                };
                // A missing weight key leaves the score at 0.
                let s = match src {
                    None => 0.0,
                    Some(b) => sort_score(b).unwrap_or_else(|| {
                        bad = true;
                        0.0
                    }),
                };
                scores.push(s);
            }
            if bad {
                return err(ERR_SCORE);
            }
            order.sort_by(|&a, &b| {
                dir(scores[a]
                    .partial_cmp(&scores[b])
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| elems[a].cmp(&elems[b])))
            });
        }
    }

    // The output range, then the GET lookups for it.
    let range: &[usize] = if end >= start {
        &order[start as usize..=end as usize]
    } else {
        &[]
    };
    let getop = o.gets.len();
    let outputlen = if getop > 0 {
        getop * range.len()
    } else {
        range.len()
    };
    let mut got: Vec<Option<Vec<u8>>> = Vec::new();
    let mut got_at: Vec<Option<usize>> = Vec::new();
    if getop > 0 {
        let mut reqs = Vec::new();
        for &i in range {
            for g in &o.gets {
                match g.lookup(&elems[i]) {
                    Some(l) => {
                        got_at.push(Some(reqs.len()));
                        reqs.push(l);
                    }
                    None => got_at.push(None),
                }
            }
        }
        got = lookup_all(&tx, reqs).await;
    }
    // One output item: the element, or a GET result (None: null).
    let item = |k: usize, i: usize, g: usize| -> Option<&[u8]> {
        if getop == 0 {
            return Some(&elems[i]);
        }
        match &o.gets[g] {
            Pattern::Elem => Some(&elems[i]),
            Pattern::Never => None,
            Pattern::Key { .. } => got_at[k * getop + g].and_then(|j| got[j].as_deref()),
        }
    };

    match &o.store {
        None => super::with_writer(resp3, |w| {
            w.array(outputlen);
            for (k, &i) in range.iter().enumerate() {
                for g in 0..getop.max(1) {
                    match item(k, i, g) {
                        Some(v) => w.bulk(v),
                        None => w.null(),
                    }
                }
            }
        }),
        Some(dst) => {
            let mut items: Vec<Vec<u8>> = Vec::with_capacity(outputlen);
            for (k, &i) in range.iter().enumerate() {
                for g in 0..getop.max(1) {
                    // A missing GET value is stored as an empty string.
                    items.push(item(k, i, g).unwrap_or_default().to_vec());
                }
            }
            let dst = dst.clone();
            tx.run(tx.shard_of(&dst), move |ctx| store_list(ctx, &dst, items))
                .await;
            super::with_writer(resp3, |w| w.int(outputlen as i64))
        }
    }
}

/// STORE: the result replaces the destination as a new list (no TTL), or an empty result
/// deletes it.
fn store_list(ctx: &mut ShardCtx, dst: &[u8], items: Vec<Vec<u8>>) {
    let lim = ctx.limits();
    let (fill, depth) = (lim.list_max_listpack_size, lim.list_compress_depth);
    let mut db = ctx.db();
    if items.is_empty() {
        if db.delete(dst) {
            notify(ctx, GENERIC, "del", dst);
        }
        return;
    }
    let mut l = List::new();
    // Redis 7.2 builds a quicklist and converts it to a listpack when it fits in one: the
    // same outcome as a growth check for the whole result.
    let bytes = items.iter().map(Vec::len).sum();
    l.grow_check(bytes, items.len(), fill, depth);
    for e in &items {
        l.push(e, false, fill);
    }
    let lru = db.clock.lru;
    db.set(Entry::new_value(dst, Value::List(Box::new(l)), None, lru));
    notify(ctx, LIST, "sortstore", dst);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: &[u8], e: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
        Pattern::parse(&Bytes::copy_from_slice(p))
            .lookup(e)
            .map(|(k, f)| (k, f.map(|f| f.to_vec())))
    }

    #[test]
    fn patterns_follow_lookup_key_by_pattern() {
        assert!(matches!(Pattern::parse(&Bytes::from("#")), Pattern::Elem));
        assert!(matches!(
            Pattern::parse(&Bytes::from("#\0x")),
            Pattern::Elem
        ));
        assert!(matches!(Pattern::parse(&Bytes::from("#x")), Pattern::Never));
        assert!(matches!(
            Pattern::parse(&Bytes::from("nosort")),
            Pattern::Never
        ));
        // A '*' after a NUL byte is not seen.
        assert!(matches!(
            Pattern::parse(&Bytes::from("a\0*")),
            Pattern::Never
        ));
        assert_eq!(key(b"w_*", b"1"), Some((b"w_1".to_vec(), None)));
        assert_eq!(key(b"*", b"x"), Some((b"x".to_vec(), None)));
        // Only the first '*' is replaced.
        assert_eq!(key(b"a*b*c", b"X"), Some((b"aXb*c".to_vec(), None)));
        assert_eq!(
            key(b"h_*->f", b"1"),
            Some((b"h_1".to_vec(), Some(b"f".to_vec())))
        );
        // The first "->" after the '*' splits; the field may contain "->".
        assert_eq!(
            key(b"h->_*x->f->g", b"1"),
            Some((b"h->_1x".to_vec(), Some(b"f->g".to_vec())))
        );
        // "->" at the end is part of the key.
        assert_eq!(key(b"h_*->", b"1"), Some((b"h_1->".to_vec(), None)));
        assert_eq!(key(b"h_*->\0f", b"1"), Some((b"h_1->\0f".to_vec(), None)));
    }

    #[test]
    fn scores_follow_strtod() {
        assert_eq!(sort_score(b""), Some(0.0));
        assert_eq!(sort_score(b" \t1.5"), Some(1.5));
        assert_eq!(sort_score(b"5\0junk"), Some(5.0));
        assert_eq!(sort_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(sort_score(b"0x10"), Some(16.0));
        for bad in [
            &b" "[..],
            b"1 ",
            b"nan",
            b"1e400",
            b"1e-310",
            b"-",
            b"x",
            b"0x",
        ] {
            assert_eq!(sort_score(bad), None, "{:?}", bad);
        }
    }
}
