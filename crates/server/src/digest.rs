//! DEBUG DIGEST and DIGEST-VALUE: Redis's signature of a dataset, computed the way Redis
//! computes it, so the same data gives the same 40 hex digits here and there.
//!
//! Redis's two SHA-1 combinators: `xor(d, data)` XORs SHA1(data) into the 20-byte digest `d`
//! (order-free: set members, hash fields, keys); `mix(d, data)` does that and then replaces
//! `d` with SHA1(d) (order-bound: list elements, a key then its value). A key's digest starts
//! at zero: mix(key), mix(type as a big-endian u32), then the value:
//! - string: mix(bytes);
//! - list: mix(element) for each element from head to tail;
//! - set: xor(member) for each member;
//! - sorted set: for each member, a zeroed element digest gets mix(member) and mix(score as
//!   Redis's fpconv_dtoa writes it), and is xor-ed into the key's digest;
//! - hash: for each field, a zeroed element digest gets mix(field) and mix(value), xor-ed in;
//! - stream: for each entry in id order, mix(`ms.seq`), then mix(field) and mix(value) for
//!   each pair (consumer groups do not count);
//! - a key with a TTL gets xor("!!expire!!") (the time itself does not count).
//!
//! The dataset's digest starts at zero; for each database with keys, in index order, it gets
//! mix(index as a big-endian u32) and then xor(key digest) for each of its keys. Since those
//! XORs do not depend on order, each shard XORs its own keys' parts and the shards' parts are
//! XOR-ed together.
//!
//! Hash field TTLs (Redis 7.4) and set member TTLs (a Darner extension) do not enter the
//! digest: only the fields and members do.

use crate::sha1::sha1;
use darner_engine::{Db, Entry, ValueRef};

/// One SHA-1-sized digest.
pub type Digest = [u8; 20];

/// Redis's xorDigest.
pub fn xor(d: &mut Digest, data: &[u8]) {
    for (a, b) in d.iter_mut().zip(sha1(data)) {
        *a ^= b;
    }
}

/// Redis's mixDigest.
pub fn mix(d: &mut Digest, data: &[u8]) {
    xor(d, data);
    *d = sha1(d);
}

/// Redis's type numbers (OBJ_STRING .. OBJ_HASH, OBJ_STREAM).
fn type_code(v: &ValueRef<'_>) -> u32 {
    match v {
        ValueRef::Str(_) => 0,
        ValueRef::List(_) => 1,
        ValueRef::Set(_) => 2,
        ValueRef::ZSet(_) => 3,
        ValueRef::Hash(_) => 4,
        ValueRef::Stream(_) => 6,
    }
}

/// Mixes `e`'s value (and whether it has a TTL) into `d`: Redis's xorObjectDigest, which
/// DEBUG DIGEST-VALUE reports on its own.
pub fn value_digest(e: &Entry, d: &mut Digest) {
    let v = e.value();
    mix(d, &type_code(&v).to_be_bytes());
    match v {
        ValueRef::Str(s) => mix(d, s),
        ValueRef::List(l) => {
            for el in l.iter() {
                mix(d, &el);
            }
        }
        ValueRef::Set(s) => s.for_each(|m| xor(d, m)),
        ValueRef::ZSet(z) => {
            let mut score = Vec::with_capacity(32);
            z.for_each(|m, s| {
                let mut el = [0u8; 20];
                mix(&mut el, m);
                score.clear();
                darner_resp::format_fpconv(s, &mut score);
                mix(&mut el, &score);
                xor(d, &el);
            });
        }
        ValueRef::Hash(h) => {
            for (f, val) in h.iter() {
                let mut el = [0u8; 20];
                mix(&mut el, f);
                mix(&mut el, val);
                xor(d, &el);
            }
        }
        ValueRef::Stream(st) => {
            for entry in st.iter() {
                mix(d, format!("{}.{}", entry.id.ms, entry.id.seq).as_bytes());
                for (f, v) in entry.pairs {
                    mix(d, f);
                    mix(d, &v);
                }
            }
        }
    }
    if e.expire().is_some() {
        xor(d, b"!!expire!!");
    }
}

/// The digest of one key and its value.
pub fn key_digest(e: &Entry) -> Digest {
    let mut d = [0u8; 20];
    mix(&mut d, e.key());
    value_digest(e, &mut d);
    d
}

/// One shard's part of one database: how many keys it holds and the XOR of the SHA-1s of
/// their digests (Redis xor-digests each key's digest into the total).
/// Every entry counts, logically expired ones not yet reclaimed included (as in Redis, whose
/// digest walks the keyspace's table).
pub fn db_part(db: &Db) -> (usize, Digest) {
    let mut acc = [0u8; 20];
    let mut n = 0;
    for e in db.entries() {
        n += 1;
        xor(&mut acc, &key_digest(e));
    }
    (n, acc)
}

/// Combines the parts of every database (`parts[db]` = each shard's part of that database)
/// into the dataset digest.
pub fn dataset(parts: &[Vec<(usize, Digest)>]) -> Digest {
    let mut out = [0u8; 20];
    for (j, shards) in parts.iter().enumerate() {
        if shards.iter().all(|(n, _)| *n == 0) {
            continue;
        }
        mix(&mut out, &(j as u32).to_be_bytes());
        for (_, d) in shards {
            for (a, b) in out.iter_mut().zip(d) {
                *a ^= b;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_dataset_is_zero() {
        assert_eq!(dataset(&[]), [0u8; 20]);
        assert_eq!(dataset(&[vec![(0, [0u8; 20])], vec![]]), [0u8; 20]);
    }

    #[test]
    fn xor_is_order_free_mix_is_not() {
        let (mut a, mut b) = ([0u8; 20], [0u8; 20]);
        xor(&mut a, b"x");
        xor(&mut a, b"y");
        xor(&mut b, b"y");
        xor(&mut b, b"x");
        assert_eq!(a, b);
        let (mut a, mut b) = ([0u8; 20], [0u8; 20]);
        mix(&mut a, b"x");
        mix(&mut a, b"y");
        mix(&mut b, b"y");
        mix(&mut b, b"x");
        assert_ne!(a, b);
    }

    #[test]
    fn ttl_changes_the_key_digest() {
        let plain = Entry::new_str(b"k", b"v", None, false, 0);
        let ttl = Entry::new_str(b"k", b"v", Some(1 << 50), false, 0);
        let other_ttl = Entry::new_str(b"k", b"v", Some(1 << 51), false, 0);
        assert_ne!(key_digest(&plain), key_digest(&ttl));
        assert_eq!(key_digest(&ttl), key_digest(&other_ttl));
    }

    #[test]
    fn shards_combine_like_one_table() {
        // A database split over two shards gives the digest of the XOR of all its keys.
        let (mut a, mut b) = ([0u8; 20], [0u8; 20]);
        xor(
            &mut a,
            &key_digest(&Entry::new_str(b"a", b"1", None, false, 0)),
        );
        xor(
            &mut b,
            &key_digest(&Entry::new_str(b"b", b"2", None, false, 0)),
        );
        let mut ab = a;
        for (x, y) in ab.iter_mut().zip(b) {
            *x ^= y;
        }
        assert_eq!(
            dataset(&[vec![(1, a), (1, b)]]),
            dataset(&[vec![(2, ab), (0, [0; 20])]])
        );
    }
}
