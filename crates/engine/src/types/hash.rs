//! The hash value type (Redis's t_hash.c encodings).
//!
//! Two representations, as in Redis:
//! - **listpack** (small hashes): ONE exact-size byte buffer of `field, value` pairs in
//!   insertion order (an update keeps the position, as Redis's listpack does, so HGETALL's
//!   order matches Redis's for small hashes). Each pair starts with one header byte: below
//!   0x80 it holds both lengths (field < 16 bytes in bits 3-6, value < 8 bytes in bits 0-2,
//!   no TTL), which covers the usual `name -> small number or word` pair, so such a pair costs
//!   its bytes plus ONE byte (Redis's listpack spends 2-3 bytes per pair on headers and
//!   back-lengths, storing small integers in one byte); 0x80 is followed by the field length
//!   varint and the value length varint (see TTLs below). Values keep their exact bytes: the
//!   buffer hands out borrowed slices, and "007" or "-0" must come back as sent. Lookups are a
//!   linear scan, which is why the buffer is limited to `hash-max-listpack-entries` pairs of
//!   at most `hash-max-listpack-value` bytes.
//! - **hashtable** (everything else): a [`DenseTable`] (see `dense.rs`): elements back to back
//!   in small exact-size buckets under an extendible-hashing directory, ~3 bytes of overhead
//!   per element plus ~6-9 bytes of bucket/directory share, O(1) operations and no rehash pause.
//!
//! A hash converts from listpack to hashtable when it gets too many fields or a too long
//! field or value, and never back (Redis's rule).
//!
//! **Field expiry** (Redis 7.4's HEXPIRE family): a field may carry an absolute expiry in unix
//! ms. Both encodings keep it inline, behind a flag bit in the value-length varint (the long
//! header form), as 8 bytes after the value, so a field without a TTL pays nothing. Redis 7.4 names a small hash that
//! has been given field TTLs "listpackex" (its listpack then stores a TTL per pair); it
//! switches the first time an HEXPIRE-family command (or Redis 8's HGETEX / HSETEX with a
//! TTL option) runs on the hash and never switches back (not even when HPERSIST removes the
//! last TTL); the `ex` flag of [`Hash::Pack`] records that.
//! Expired fields are not removed here by themselves: the caller removes them lazily
//! ([`Hash::expire_field`], [`Hash::remove_all_expired`]) or in steps ([`Hash::remove_expired`]).
//! A table counts its fields with a TTL, so a hash without any skips every expiry check.

use super::dense::{named, DenseTable, EntryRef};
use super::Limits;

/// A hash value.
#[derive(Clone, Debug)]
pub enum Hash {
    /// One exact-size buffer (a boxed slice, not a Vec: 8 bytes less per hash, which keeps
    /// every keyspace value at 32 bytes).
    Pack {
        buf: Box<[u8]>,
        len: u32,
        /// Redis's "listpackex": a field TTL was set at some point.
        ex: bool,
    },
    /// Boxed: a small hash (the common case) then costs a 32-byte `Hash`, not an 80-byte one.
    Table(Box<DenseTable>),
}

impl Default for Hash {
    fn default() -> Hash {
        Hash::new()
    }
}

/// Writes `v` as a varint at the start of `out`; returns its length.
fn put_varint(out: &mut [u8], mut v: usize) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        out[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v as u8;
    n + 1
}

fn get_varint(b: &[u8], p: &mut usize) -> usize {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let c = b[*p];
        *p += 1;
        v |= u64::from(c & 0x7f) << shift;
        if c < 0x80 {
            return v as usize;
        }
        shift += 7;
    }
}

/// The flag bit in a pair's value-length varint: an 8-byte expiry (i64 LE) follows the value.
const HAS_EXPIRY: usize = 1;
/// A pair's header byte with this bit set is followed by the two varints (long form).
const LONG: u8 = 0x80;

/// What a write does to the field's TTL.
#[derive(Clone, Copy)]
enum Ttl {
    /// Drop it (HSET).
    Clear,
    /// Keep the existing field's (HINCRBY, HSETEX KEEPTTL).
    Keep,
    /// Expire at this unix ms (HSETEX EX ...).
    At(i64),
}

impl Ttl {
    /// The expiry to store, given the existing field's (`None` for a new field).
    fn resolve(self, old: Option<i64>) -> Option<i64> {
        match self {
            Ttl::Clear => None,
            Ttl::Keep => old,
            Ttl::At(ms) => Some(ms),
        }
    }
}

/// One pair of a listpack buffer, by byte offsets.
#[derive(Clone, Copy)]
struct PackSlot {
    start: usize,
    key: (usize, usize),
    val: (usize, usize),
    expiry: Option<i64>,
    end: usize,
}

fn pack_next(b: &[u8], p: usize) -> PackSlot {
    let head = b[p];
    let mut q = p + 1;
    let (klen, vmeta) = if head & LONG == 0 {
        // Short form: field length in bits 3-6, value length in bits 0-2, no expiry.
        ((head >> 3) as usize, ((head & 7) as usize) << 1)
    } else {
        let klen = get_varint(b, &mut q);
        (klen, get_varint(b, &mut q))
    };
    let key = (q, q + klen);
    let val = (key.1, key.1 + (vmeta >> 1));
    let mut end = val.1;
    let expiry = if vmeta & HAS_EXPIRY != 0 {
        let mut e = [0u8; 8];
        e.copy_from_slice(&b[end..end + 8]);
        end += 8;
        Some(i64::from_le_bytes(e))
    } else {
        None
    };
    PackSlot {
        start: p,
        key,
        val,
        expiry,
        end,
    }
}

fn pack_find(b: &[u8], field: &[u8]) -> Option<PackSlot> {
    let mut p = 0;
    while p < b.len() {
        let s = pack_next(b, p);
        if &b[s.key.0..s.key.1] == field {
            return Some(s);
        }
        p = s.end;
    }
    None
}

/// Whether a pair fits the one-byte short header.
fn is_short(klen: usize, vlen: usize, expiry: bool) -> bool {
    klen < 16 && vlen < 8 && !expiry
}

/// Encoded size of a pair's header.
fn header_len(klen: usize, vlen: usize, expiry: bool) -> usize {
    if is_short(klen, vlen, expiry) {
        1
    } else {
        1 + varint_len(klen) + varint_len((vlen << 1) | usize::from(expiry))
    }
}

/// Encoded size of a pair.
fn pack_size(field: &[u8], value: &[u8], expiry: Option<i64>) -> usize {
    let (k, v, e) = (field.len(), value.len(), expiry.is_some());
    header_len(k, v, e) + k + v + 8 * usize::from(e)
}

fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Writes a pair's header at the start of `out`; returns its length ([`header_len`]).
fn put_header(out: &mut [u8], klen: usize, vlen: usize, expiry: bool) -> usize {
    if is_short(klen, vlen, expiry) {
        out[0] = ((klen as u8) << 3) | vlen as u8;
        return 1;
    }
    out[0] = LONG;
    let n = 1 + put_varint(&mut out[1..], klen);
    n + put_varint(&mut out[n..], (vlen << 1) | usize::from(expiry))
}

/// Writes a pair into `out`, which is [`pack_size`] bytes long.
fn put_pair(out: &mut [u8], field: &[u8], value: &[u8], expiry: Option<i64>) {
    let h = put_header(out, field.len(), value.len(), expiry.is_some());
    let (k, v) = (h + field.len(), h + field.len() + value.len());
    out[h..k].copy_from_slice(field);
    out[k..v].copy_from_slice(value);
    if let Some(e) = expiry {
        out[v..v + 8].copy_from_slice(&e.to_le_bytes());
    }
}

/// Iterator over a hash's (field, value) pairs.
pub enum Iter<'a> {
    Pack(&'a [u8], usize),
    Table(Box<dyn Iterator<Item = (&'a [u8], &'a [u8])> + 'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Pack(b, p) => {
                if *p >= b.len() {
                    return None;
                }
                let s = pack_next(b, *p);
                *p = s.end;
                Some((&b[s.key.0..s.key.1], &b[s.val.0..s.val.1]))
            }
            Iter::Table(it) => it.next(),
        }
    }
}

// ---- Writing a hash where it is stored ----------------------------------------------------

/// A hash being written, wherever it is stored: an owned [`Hash`], or a keyspace entry whose
/// block holds a small hash's listpack inline (`entry::HashMut`). The write operations are
/// written once, as this trait's provided methods, on top of a few primitives. A listpack is
/// edited where it is: a value replaced by one of the same length (or a TTL by another TTL)
/// is overwritten in place; anything else is one [`HashStore::splice`], which moves the pairs
/// after the change and resizes the storage by the difference. The whole listpack is never
/// copied into a second buffer.
pub(crate) trait HashStore {
    /// The hash, read-only.
    fn view(&self) -> HashRef<'_>;
    /// The table, if the hash is one (None: a listpack).
    fn table_mut(&mut self) -> Option<&mut DenseTable>;
    /// A listpack's pairs, to overwrite in place (for a listpack only).
    fn pack_mut(&mut self) -> &mut [u8];
    /// Resizes a listpack's pairs around byte `at` (for a listpack only): the bytes from
    /// `at + remove` to the end move to `at + insert`, the `min(remove, insert)` bytes at `at`
    /// stay, and the pair count becomes `len`. Returns the pairs; the bytes of
    /// `at + min(remove, insert) .. at + insert` are the caller's to write (their content is
    /// unspecified).
    fn splice(&mut self, at: usize, remove: usize, insert: usize, len: u32) -> &mut [u8];
    /// Makes a listpack "listpackex" (a no-op for a table).
    fn mark_ex(&mut self);
    /// Replaces the listpack with `table` (the conversion).
    fn store_table(&mut self, table: DenseTable);

    /// Converts to the hashtable encoding (no-op if already there).
    fn convert(&mut self) {
        if let HashRef::Pack { buf, .. } = self.view() {
            let mut t = DenseTable::new();
            let mut p = 0;
            while p < buf.len() {
                let s = pack_next(buf, p);
                t.insert(&buf[s.key.0..s.key.1], &buf[s.val.0..s.val.1], s.expiry);
                p = s.end;
            }
            self.store_table(t);
        }
    }

    /// Redis's `hashTypeTryConversion`: converts a listpack hash before a write if any of the
    /// strings about to be written is longer than `hash-max-listpack-value`.
    fn convert_for<'a>(&mut self, limits: &Limits, args: impl IntoIterator<Item = &'a [u8]>) {
        // The lengths first: they are usually short, and the view costs a header read.
        if args
            .into_iter()
            .any(|a| a.len() > limits.hash_max_listpack_value)
            && matches!(self.view(), HashRef::Pack { .. })
        {
            self.convert();
        }
    }

    /// See [`Hash::set`].
    fn set(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        set_with(self, field, value, Ttl::Clear, limits)
    }

    /// See [`Hash::set_keep_ttl`].
    fn set_keep_ttl(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        set_with(self, field, value, Ttl::Keep, limits)
    }

    /// See [`Hash::set_expiring`].
    fn set_expiring(
        &mut self,
        field: &[u8],
        value: &[u8],
        expiry_ms: i64,
        limits: &Limits,
    ) -> bool {
        self.mark_ex();
        set_with(self, field, value, Ttl::At(expiry_ms), limits)
    }

    /// See [`Hash::remove`].
    fn remove(&mut self, field: &[u8]) -> bool {
        match self.view() {
            HashRef::Pack { buf, len, .. } => match pack_find(buf, field) {
                Some(s) => {
                    self.splice(s.start, s.end - s.start, 0, len - 1);
                    true
                }
                None => false,
            },
            HashRef::Table(_) => self.table_mut().is_some_and(|t| t.remove(field).is_some()),
        }
    }

    /// See [`Hash::set_expiry`].
    fn set_expiry(&mut self, field: &[u8], expiry: Option<i64>) -> bool {
        match self.view() {
            HashRef::Pack { buf, len, .. } => match pack_find(buf, field) {
                Some(s) => {
                    pack_set_expiry(self, s, len, expiry);
                    true
                }
                None => false,
            },
            HashRef::Table(_) => self
                .table_mut()
                .is_some_and(|t| t.set_expiry(field, expiry)),
        }
    }

    /// See [`Hash::expire_field`].
    fn expire_field(&mut self, field: &[u8], now_ms: i64) -> bool {
        let due = self
            .view()
            .expiry_of(field)
            .flatten()
            .is_some_and(|e| e <= now_ms);
        due && self.remove(field)
    }

    /// See [`Hash::remove_all_expired_with`].
    fn remove_all_expired(&mut self, now_ms: i64, gone: &mut dyn FnMut(&[u8])) -> usize {
        match self.view() {
            HashRef::Pack { ex: false, .. } => 0,
            HashRef::Pack { len, .. } => pack_remove_expired(self, len, now_ms, gone),
            HashRef::Table(_) => match self.table_mut() {
                // O(1) unless some field may really be due: HLEN, HGETALL ... on a big hash
                // with TTLs then visit the buckets holding due fields, found through the
                // table's expiry index (never a pass over the table).
                Some(t) if t.may_have_expired(now_ms) => {
                    // As many visits as there are buckets: nothing due is left.
                    let n = t.buckets();
                    named(t.remove_expired(now_ms, n), gone)
                }
                _ => 0,
            },
        }
    }

    /// See [`Hash::remove_expired_with`].
    fn remove_expired(
        &mut self,
        now_ms: i64,
        max_buckets: usize,
        gone: &mut dyn FnMut(&[u8]),
    ) -> usize {
        match self.view() {
            HashRef::Pack { .. } => self.remove_all_expired(now_ms, gone),
            HashRef::Table(_) => self
                .table_mut()
                .map_or(0, |t| named(t.remove_expired(now_ms, max_buckets), gone)),
        }
    }
}

/// Sets `field` to `value`, its TTL as `ttl` says; converts past the listpack limits.
/// Returns true if the field is new.
fn set_with<S: HashStore + ?Sized>(
    s: &mut S,
    field: &[u8],
    value: &[u8],
    ttl: Ttl,
    limits: &Limits,
) -> bool {
    s.convert_for(limits, [field, value]);
    match s.table_mut() {
        Some(t) => {
            let expiry = match ttl {
                Ttl::Keep => t.get(field).and_then(|(_, e)| e),
                _ => ttl.resolve(None),
            };
            t.insert(field, value, expiry)
        }
        None => {
            let (new, len) = pack_set(s, field, value, ttl);
            if len > limits.hash_max_listpack_entries {
                s.convert();
            }
            new
        }
    }
}

/// [`set_with`] on a listpack: a value of the same length (and a TTL kept as a TTL)
/// overwritten in place, any other update re-encodes the pair where it is, a new pair goes at
/// the end (Redis's order). Returns whether the field is new, and the number of pairs.
fn pack_set<S: HashStore + ?Sized>(
    s: &mut S,
    field: &[u8],
    value: &[u8],
    ttl: Ttl,
) -> (bool, usize) {
    let HashRef::Pack { buf, len, .. } = s.view() else {
        unreachable!("pack_set of a table")
    };
    match pack_find(buf, field) {
        Some(slot) => {
            let expiry = ttl.resolve(slot.expiry);
            if slot.val.1 - slot.val.0 == value.len() && slot.expiry.is_some() == expiry.is_some() {
                let b = s.pack_mut();
                b[slot.val.0..slot.val.1].copy_from_slice(value);
                if let Some(e) = expiry {
                    b[slot.val.1..slot.end].copy_from_slice(&e.to_le_bytes());
                }
            } else {
                let n = pack_size(field, value, expiry);
                let b = s.splice(slot.start, slot.end - slot.start, n, len);
                put_pair(&mut b[slot.start..slot.start + n], field, value, expiry);
            }
            (false, len as usize)
        }
        None => {
            let expiry = ttl.resolve(None);
            let (at, n) = (buf.len(), pack_size(field, value, expiry));
            let b = s.splice(at, 0, n, len + 1);
            put_pair(&mut b[at..at + n], field, value, expiry);
            (true, len as usize + 1)
        }
    }
}

/// Sets or clears the TTL of the listpack pair at `slot` (of `len` pairs). A TTL replaced by
/// a TTL is overwritten in place; otherwise the pair's header and its 8 expiry bytes change
/// around its field and value, which are moved inside the storage rather than copied out.
fn pack_set_expiry<S: HashStore + ?Sized>(
    s: &mut S,
    slot: PackSlot,
    len: u32,
    expiry: Option<i64>,
) {
    if slot.expiry.is_some() == expiry.is_some() {
        if let Some(e) = expiry {
            s.pack_mut()[slot.val.1..slot.end].copy_from_slice(&e.to_le_bytes());
        }
        return;
    }
    let at = slot.start;
    let (klen, vlen) = (slot.key.1 - slot.key.0, slot.val.1 - slot.val.0);
    let body = klen + vlen;
    let (h, h2) = (slot.key.0 - at, header_len(klen, vlen, expiry.is_some()));
    let remove = slot.end - at;
    let insert = h2 + body + 8 * usize::from(expiry.is_some());
    let b = if insert <= remove {
        // Shrinking: the body moves to its new offset first, within the old pair, since the
        // splice keeps only the first `insert` bytes.
        s.pack_mut().copy_within(at + h..at + h + body, at + h2);
        s.splice(at, remove, insert, len)
    } else {
        // Growing: the splice keeps the whole old pair, then the body moves.
        let b = s.splice(at, remove, insert, len);
        b.copy_within(at + h..at + h + body, at + h2);
        b
    };
    put_header(&mut b[at..], klen, vlen, expiry.is_some());
    if let Some(e) = expiry {
        b[at + h2 + body..at + insert].copy_from_slice(&e.to_le_bytes());
    }
}

/// Removes a listpack's (of `len` pairs) fields due at `now_ms`: the pairs that stay are
/// moved down over the others in place, then one splice cuts the end. Each removed field is
/// passed to `named` (before it is overwritten). Returns how many went.
fn pack_remove_expired<S: HashStore + ?Sized>(
    s: &mut S,
    len: u32,
    now_ms: i64,
    named: &mut dyn FnMut(&[u8]),
) -> usize {
    let b = s.pack_mut();
    let (mut p, mut w, mut gone) = (0, 0, 0);
    while p < b.len() {
        let slot = pack_next(b, p);
        if slot.expiry.is_some_and(|e| e <= now_ms) {
            named(&b[slot.key.0..slot.key.1]);
            gone += 1;
        } else {
            // `w` never passes `slot.start`: the pairs still to read are left intact.
            if w != slot.start {
                b.copy_within(slot.start..slot.end, w);
            }
            w += slot.end - slot.start;
        }
        p = slot.end;
    }
    let total = b.len();
    if gone > 0 {
        s.splice(w, total - w, 0, len - gone as u32);
    }
    gone
}

impl HashStore for Hash {
    fn view(&self) -> HashRef<'_> {
        Hash::view(self)
    }

    fn table_mut(&mut self) -> Option<&mut DenseTable> {
        match self {
            Hash::Table(t) => Some(t),
            Hash::Pack { .. } => None,
        }
    }

    fn pack_mut(&mut self) -> &mut [u8] {
        match self {
            Hash::Pack { buf, .. } => buf,
            Hash::Table(_) => unreachable!("pack_mut of a table"),
        }
    }

    fn splice(&mut self, at: usize, remove: usize, insert: usize, len: u32) -> &mut [u8] {
        let Hash::Pack { buf, len: n, .. } = self else {
            unreachable!("splice of a table")
        };
        let old = buf.len();
        if insert != remove {
            // Exact size: a small hash pays for its bytes only.
            let mut v = std::mem::take(buf).into_vec();
            if insert > remove {
                v.reserve_exact(insert - remove);
                v.resize(old - remove + insert, 0);
                v.copy_within(at + remove..old, at + insert);
            } else {
                v.copy_within(at + remove..old, at + insert);
                v.truncate(old - remove + insert);
            }
            *buf = v.into_boxed_slice();
        }
        *n = len;
        buf
    }

    fn mark_ex(&mut self) {
        if let Hash::Pack { ex, .. } = self {
            *ex = true;
        }
    }

    fn store_table(&mut self, table: DenseTable) {
        *self = Hash::Table(Box::new(table));
    }
}

impl Hash {
    pub fn new() -> Hash {
        Hash::Pack {
            buf: Box::default(),
            len: 0,
            ex: false,
        }
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.view().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING's name for the current representation.
    pub fn encoding(&self) -> &'static str {
        self.view().encoding()
    }

    /// Approximate heap bytes used.
    pub fn memory(&self) -> usize {
        self.view().memory()
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.view().get(field)
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Converts to the hashtable encoding (no-op if already there).
    pub fn convert(&mut self) {
        HashStore::convert(self)
    }

    /// Redis's `hashTypeTryConversion`: converts a listpack hash before a write if any of the
    /// strings about to be written is longer than `hash-max-listpack-value`.
    pub fn convert_for<'a>(&mut self, limits: &Limits, args: impl IntoIterator<Item = &'a [u8]>) {
        HashStore::convert_for(self, limits, args)
    }

    /// Sets `field` to `value`, removing any TTL it had (HSET). Returns true if the field is
    /// new.
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        HashStore::set(self, field, value, limits)
    }

    /// Sets `field` to `value`, keeping the TTL of an existing field (HINCRBY, HINCRBYFLOAT, as
    /// Redis 7.4's `HASH_SET_KEEP_TTL`). Returns true if the field is new.
    pub fn set_keep_ttl(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        HashStore::set_keep_ttl(self, field, value, limits)
    }

    /// Sets `field` to `value` expiring at `expiry_ms` (unix ms), whatever TTL it had (HSETEX).
    /// A listpack hash becomes "listpackex". Returns true if the field is new.
    pub fn set_expiring(
        &mut self,
        field: &[u8],
        value: &[u8],
        expiry_ms: i64,
        limits: &Limits,
    ) -> bool {
        HashStore::set_expiring(self, field, value, expiry_ms, limits)
    }

    /// Removes `field`. Returns whether it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        HashStore::remove(self, field)
    }

    /// Every (field, value): insertion order for a listpack, table order otherwise.
    pub fn iter(&self) -> Iter<'_> {
        self.view().iter()
    }

    /// One HSCAN step (see [`HashRef::scan`]).
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, f: impl FnMut(&'a [u8], &'a [u8])) -> u64 {
        self.view().scan(cursor, count, f)
    }

    /// A random (field, value), None when empty. `rand` yields random numbers.
    pub fn random(&self, rand: impl FnMut() -> u64) -> Option<(&[u8], &[u8])> {
        self.view().random(rand)
    }
}

impl Hash {
    /// Whether any field carries a TTL (false: no expiry check is needed).
    pub fn has_ttls(&self) -> bool {
        self.view().has_ttls()
    }

    /// Switches a listpack hash to "listpackex" (Redis 7.4 does so whenever an HEXPIRE-family
    /// command runs on it). A no-op for a table.
    pub fn mark_ex(&mut self) {
        HashStore::mark_ex(self)
    }

    /// `None`: no such field; `Some(None)`: no TTL; `Some(Some(ms))`: expires at `ms`.
    pub fn expiry_of(&self, field: &[u8]) -> Option<Option<i64>> {
        self.view().expiry_of(field)
    }

    /// Sets or clears the TTL of a present field. Returns false if the field is absent.
    pub fn set_expiry(&mut self, field: &[u8], expiry: Option<i64>) -> bool {
        HashStore::set_expiry(self, field, expiry)
    }

    /// Removes `field` if its TTL is at or before `now_ms`. Returns whether it did.
    pub fn expire_field(&mut self, field: &[u8], now_ms: i64) -> bool {
        HashStore::expire_field(self, field, now_ms)
    }

    /// Removes every field whose TTL is at or before `now_ms` (O(n) for a listpack with TTLs,
    /// which is small; for a table O(1) unless a field may be due, then proportional to the
    /// buckets holding due fields: see dense.rs).
    /// Returns how many it removed.
    pub fn remove_all_expired(&mut self, now_ms: i64) -> usize {
        HashStore::remove_all_expired(self, now_ms, &mut |_| {})
    }

    /// [`Hash::remove_all_expired`], passing each removed field to `gone`.
    pub fn remove_all_expired_with(&mut self, now_ms: i64, gone: &mut dyn FnMut(&[u8])) -> usize {
        HashStore::remove_all_expired(self, now_ms, gone)
    }

    /// Every (field, value, expiry).
    pub fn iter_ttl(&self) -> Box<dyn Iterator<Item = EntryRef<'_>> + '_> {
        self.view().iter_ttl()
    }

    /// Like [`Hash::scan`], passing each field's expiry too.
    pub fn scan_ttl<'a>(
        &'a self,
        cursor: u64,
        count: usize,
        f: impl FnMut(&'a [u8], &'a [u8], Option<i64>),
    ) -> u64 {
        self.view().scan_ttl(cursor, count, f)
    }

    /// One bounded step of field expiry (for the server's active expiry cycle): visits up to
    /// `max_buckets` buckets of a table (a listpack hash is swept whole) and removes fields
    /// whose expiry is at or before `now_ms`. Returns how many it removed.
    pub fn remove_expired(&mut self, now_ms: i64, max_buckets: usize) -> usize {
        HashStore::remove_expired(self, now_ms, max_buckets, &mut |_| {})
    }

    /// [`Hash::remove_expired`], passing each removed field to `gone`.
    pub fn remove_expired_with(
        &mut self,
        now_ms: i64,
        max_buckets: usize,
        gone: &mut dyn FnMut(&[u8]),
    ) -> usize {
        HashStore::remove_expired(self, now_ms, max_buckets, gone)
    }
}

impl PartialEq for Hash {
    fn eq(&self, other: &Hash) -> bool {
        self.view() == other.view()
    }
}

impl Hash {
    /// A read-only view (what a keyspace entry hands out: see [`HashRef`]).
    pub fn view(&self) -> HashRef<'_> {
        match self {
            Hash::Pack { buf, len, ex } => HashRef::Pack {
                buf,
                len: *len,
                ex: *ex,
            },
            Hash::Table(t) => HashRef::Table(t),
        }
    }

    /// A listpack hash from its parts (see [`HashRef::Pack`]): the keyspace entry keeps a
    /// small hash's buffer inside its own block and rebuilds the `Hash` when `value_mut`
    /// moves it out of line.
    pub fn from_pack(buf: &[u8], len: u32, ex: bool) -> Hash {
        Hash::Pack {
            buf: buf.into(),
            len,
            ex,
        }
    }
}

/// A borrowed hash: a listpack buffer (wherever it is stored: a small hash's lives inside its
/// keyspace entry's block, see `entry.rs`) or a table. All of [`Hash`]'s reads.
#[derive(Clone, Copy, Debug)]
pub enum HashRef<'a> {
    Pack {
        /// Pairs in the format described at the top of this file.
        buf: &'a [u8],
        /// Number of pairs.
        len: u32,
        /// "listpackex".
        ex: bool,
    },
    Table(&'a DenseTable),
}

impl<'a> HashRef<'a> {
    /// Number of fields.
    pub fn len(self) -> usize {
        match self {
            HashRef::Pack { len, .. } => len as usize,
            HashRef::Table(t) => t.len(),
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING's name for the current representation.
    pub fn encoding(self) -> &'static str {
        match self {
            HashRef::Pack { ex: false, .. } => "listpack",
            HashRef::Pack { ex: true, .. } => "listpackex",
            HashRef::Table(_) => "hashtable",
        }
    }

    /// Approximate heap bytes used.
    pub fn memory(self) -> usize {
        match self {
            HashRef::Pack { buf, .. } => buf.len(),
            HashRef::Table(t) => std::mem::size_of::<DenseTable>() + t.memory(),
        }
    }

    pub fn get(self, field: &[u8]) -> Option<&'a [u8]> {
        match self {
            HashRef::Pack { buf, .. } => pack_find(buf, field).map(|s| &buf[s.val.0..s.val.1]),
            HashRef::Table(t) => t.get(field).map(|(v, _)| v),
        }
    }

    pub fn contains(self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Every (field, value): insertion order for a listpack, table order otherwise.
    pub fn iter(self) -> Iter<'a> {
        match self {
            HashRef::Pack { buf, .. } => Iter::Pack(buf, 0),
            HashRef::Table(t) => Iter::Table(Box::new(t.iter().map(|(k, v, _)| (k, v)))),
        }
    }

    /// One HSCAN step. A listpack hash is returned whole with cursor 0 (as Redis does); a
    /// table is scanned by hash position (see `DenseTable::scan`). Returns the next cursor.
    pub fn scan(self, cursor: u64, count: usize, mut f: impl FnMut(&'a [u8], &'a [u8])) -> u64 {
        match self {
            HashRef::Pack { .. } => {
                for (k, v) in self.iter() {
                    f(k, v);
                }
                0
            }
            HashRef::Table(t) => t.scan(cursor, count, |(k, v, _)| f(k, v)),
        }
    }

    /// A random (field, value), None when empty. `rand` yields random numbers.
    pub fn random(self, mut rand: impl FnMut() -> u64) -> Option<(&'a [u8], &'a [u8])> {
        match self {
            HashRef::Pack { len, .. } => {
                if len == 0 {
                    return None;
                }
                let i = (rand() % u64::from(len)) as usize;
                self.iter().nth(i)
            }
            HashRef::Table(t) => t.random(rand).map(|(k, v, _)| (k, v)),
        }
    }

    /// Whether every field of a big hash has a TTL at or before `now_ms` (O(1); false when
    /// unsure, and for a listpack, which is small): the hash may then go whole, as an
    /// expired key does, instead of field by field.
    pub fn all_due(self, now_ms: i64) -> bool {
        matches!(self, HashRef::Table(t) if t.all_due(now_ms))
    }

    /// Whether any field carries a TTL (false: no expiry check is needed).
    pub fn has_ttls(self) -> bool {
        match self {
            HashRef::Pack { ex: false, .. } => false,
            HashRef::Pack { .. } => self.iter_ttl().any(|(_, _, e)| e.is_some()),
            HashRef::Table(t) => t.expiring() > 0,
        }
    }

    /// `None`: no such field; `Some(None)`: no TTL; `Some(Some(ms))`: expires at `ms`.
    pub fn expiry_of(self, field: &[u8]) -> Option<Option<i64>> {
        match self {
            HashRef::Pack { buf, .. } => pack_find(buf, field).map(|s| s.expiry),
            HashRef::Table(t) => t.get(field).map(|(_, e)| e),
        }
    }

    /// Every (field, value, expiry).
    pub fn iter_ttl(self) -> Box<dyn Iterator<Item = EntryRef<'a>> + 'a> {
        match self {
            HashRef::Pack { buf, .. } => {
                let mut p = 0;
                Box::new(std::iter::from_fn(move || {
                    if p >= buf.len() {
                        return None;
                    }
                    let s = pack_next(buf, p);
                    p = s.end;
                    Some((&buf[s.key.0..s.key.1], &buf[s.val.0..s.val.1], s.expiry))
                }))
            }
            HashRef::Table(t) => Box::new(t.iter()),
        }
    }

    /// Like [`HashRef::scan`], passing each field's expiry too.
    pub fn scan_ttl(
        self,
        cursor: u64,
        count: usize,
        mut f: impl FnMut(&'a [u8], &'a [u8], Option<i64>),
    ) -> u64 {
        match self {
            HashRef::Pack { .. } => {
                for (k, v, e) in self.iter_ttl() {
                    f(k, v, e);
                }
                0
            }
            HashRef::Table(t) => t.scan(cursor, count, |(k, v, e)| f(k, v, e)),
        }
    }
}

impl PartialEq for HashRef<'_> {
    fn eq(&self, other: &HashRef<'_>) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

// ---- Resumable iteration (streamed replies) -------------------------------------------------

impl Hash {
    /// Resumable [`Hash::iter`]: visits (field, value) pairs from position `at` (0 to start)
    /// until at least `min` were visited; returns where to resume (None: done). A listpack is
    /// visited whole. Valid only while the hash is not modified between calls.
    pub fn for_each_from<'a>(
        &'a self,
        at: usize,
        min: usize,
        mut f: impl FnMut(&'a [u8], &'a [u8]),
    ) -> Option<usize> {
        match self {
            Hash::Pack { .. } => {
                if at == 0 {
                    self.iter().for_each(|(k, v)| f(k, v));
                }
                None
            }
            Hash::Table(t) => t.for_each_from(at, min, |(k, v, _)| f(k, v)),
        }
    }
}

impl<'a> HashRef<'a> {
    /// [`Hash::for_each_from`] on a borrowed hash (an inline small hash is visited whole).
    pub fn for_each_from(
        &self,
        at: usize,
        min: usize,
        mut f: impl FnMut(&'a [u8], &'a [u8]),
    ) -> Option<usize> {
        match *self {
            HashRef::Pack { .. } => {
                if at == 0 {
                    self.iter().for_each(|(k, v)| f(k, v));
                }
                None
            }
            HashRef::Table(t) => t.for_each_from(at, min, |(k, v, _)| f(k, v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn limits(entries: usize, value: usize) -> Limits {
        Limits {
            hash_max_listpack_entries: entries,
            hash_max_listpack_value: value,
            ..Limits::default()
        }
    }

    #[test]
    fn listpack_keeps_insertion_order_and_converts_on_count() {
        let l = limits(3, 64);
        let mut h = Hash::new();
        assert!(h.set(b"b", b"1", &l));
        assert!(h.set(b"a", b"2", &l));
        assert!(!h.set(b"b", b"333", &l));
        let pairs: Vec<_> = h.iter().collect();
        assert_eq!(
            pairs,
            vec![(&b"b"[..], &b"333"[..]), (&b"a"[..], &b"2"[..])]
        );
        assert!(h.set(b"c", b"", &l));
        assert_eq!(h.encoding(), "listpack");
        assert!(h.set(b"d", b"4", &l));
        assert_eq!(h.encoding(), "hashtable");
        // Never back.
        assert!(h.remove(b"d") && h.remove(b"c") && h.remove(b"a"));
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"b"), Some(&b"333"[..]));
    }

    #[test]
    fn short_and_long_pair_headers() {
        let l = Limits::default();
        let mut h = Hash::new();
        // Around the short form's limits: field 15/16 bytes, value 7/8 bytes, with a TTL.
        let cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (vec![b'f'; 15], vec![b'v'; 7]),
            (vec![b'g'; 16], vec![b'v'; 7]),
            (vec![b'h'; 15], vec![b'w'; 8]),
            (vec![], vec![]),
            (b"member:0".to_vec(), b"12".to_vec()),
            (vec![b'i'; 64], vec![b'x'; 64]),
        ];
        for (f, v) in &cases {
            assert!(h.set(f, v, &l));
        }
        assert_eq!(h.memory(), 23 + 26 + 26 + 1 + 11 + 132);
        h.mark_ex();
        h.set_expiry(b"member:0", Some(-1));
        h.set_keep_ttl(&[b'f'; 15], b"1234567", &l);
        assert_eq!(h.get(b"member:0"), Some(&b"12"[..]));
        assert_eq!(h.expiry_of(b"member:0"), Some(Some(-1)));
        let got: Vec<_> = h.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        let mut want = cases.clone();
        want[0].1 = b"1234567".to_vec();
        assert_eq!(got, want);
        h.set_expiry(b"member:0", None);
        assert_eq!(h.expiry_of(b"member:0"), Some(None));
        assert_eq!(h.memory(), 23 + 26 + 26 + 1 + 11 + 132);
    }

    #[test]
    fn a_small_hash_value_is_small() {
        assert!(std::mem::size_of::<Hash>() <= 32);
    }

    #[test]
    fn long_strings_convert() {
        let l = limits(128, 4);
        let mut h = Hash::new();
        h.set(b"f", b"1234", &l);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f", b"12345", &l);
        assert_eq!(h.encoding(), "hashtable");
        let mut h = Hash::new();
        h.set(b"fffff", b"1", &l);
        assert_eq!(h.encoding(), "hashtable");
        let mut h = Hash::new();
        h.convert_for(&l, [&b"x"[..], &b"yyyyy"[..]]);
        assert_eq!(h.encoding(), "hashtable");
    }

    #[test]
    fn listpack_scan_and_random() {
        let l = Limits::default();
        let mut h = Hash::new();
        for i in 0..10 {
            h.set(format!("f{i}").as_bytes(), b"v", &l);
        }
        let mut n = 0;
        assert_eq!(h.scan(0, 1, |_, _| n += 1), 0);
        assert_eq!(n, 10);
        let mut r = 0;
        let (k, _) = h
            .random(|| {
                r += 7;
                r
            })
            .unwrap();
        assert_eq!(k, b"f7");
        assert!(Hash::new().random(|| 1).is_none());
    }

    #[test]
    fn field_ttls_in_both_encodings() {
        for entries in [128, 0] {
            let l = limits(entries, 64);
            let mut h = Hash::new();
            h.set(b"a", b"1", &l);
            h.set(b"b", b"22", &l);
            assert!(!h.has_ttls());
            h.mark_ex();
            let enc = if entries == 0 {
                "hashtable"
            } else {
                "listpackex"
            };
            assert_eq!(h.encoding(), enc);
            assert!(h.set_expiry(b"a", Some(100)));
            assert!(!h.set_expiry(b"zz", Some(100)));
            assert!(h.has_ttls());
            assert_eq!(h.expiry_of(b"a"), Some(Some(100)));
            assert_eq!(h.expiry_of(b"b"), Some(None));
            assert_eq!(h.expiry_of(b"c"), None);
            // HINCRBY keeps the TTL, HSET clears it.
            h.set_keep_ttl(b"a", b"12345", &l);
            assert_eq!(h.expiry_of(b"a"), Some(Some(100)));
            assert_eq!(h.get(b"a"), Some(&b"12345"[..]));
            assert!(!h.expire_field(b"a", 99));
            assert!(h.expire_field(b"a", 100));
            assert_eq!(h.len(), 1);
            h.set_expiry(b"b", Some(5));
            h.set(b"b", b"x", &l);
            assert_eq!(h.expiry_of(b"b"), Some(None));
            assert!(!h.has_ttls());
            // Never back to "listpack".
            assert_eq!(h.encoding(), enc);
        }
    }

    #[test]
    fn set_expiring_sets_value_and_ttl() {
        for entries in [128, 0] {
            let l = limits(entries, 64);
            let mut h = Hash::new();
            h.set(b"a", b"1", &l);
            assert!(!h.set_expiring(b"a", b"2", 50, &l));
            assert!(h.set_expiring(b"b", b"3", 60, &l));
            let enc = if entries == 0 {
                "hashtable"
            } else {
                "listpackex"
            };
            assert_eq!(h.encoding(), enc);
            assert_eq!(h.get(b"a"), Some(&b"2"[..]));
            assert_eq!(h.expiry_of(b"a"), Some(Some(50)));
            assert_eq!(h.expiry_of(b"b"), Some(Some(60)));
            // KEEPTTL keeps it; a plain set drops it.
            h.set_keep_ttl(b"b", b"4", &l);
            assert_eq!(h.expiry_of(b"b"), Some(Some(60)));
            h.set(b"b", b"5", &l);
            assert_eq!(h.expiry_of(b"b"), Some(None));
            assert_eq!(h.remove_all_expired(50), 1);
            assert_eq!(h.len(), 1);
        }
    }

    #[test]
    fn conversion_keeps_ttls() {
        let l = limits(2, 64);
        let mut h = Hash::new();
        h.set(b"a", b"1", &l);
        h.mark_ex();
        h.set_expiry(b"a", Some(7));
        h.set(b"b", b"2", &l);
        h.set(b"c", b"3", &l);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.expiry_of(b"a"), Some(Some(7)));
        assert_eq!(h.remove_all_expired(7), 1);
        assert_eq!(h.len(), 2);
        assert!(!h.has_ttls());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn ttls_behave_like_a_model(
            ops in proptest::collection::vec((0u8..7, 0u8..30, 0i64..50), 0..300),
            entries in 0usize..20,
        ) {
            let l = limits(entries, 8);
            let mut h = Hash::new();
            let mut m: HashMap<Vec<u8>, (Vec<u8>, Option<i64>)> = HashMap::new();
            for (op, k, t) in ops {
                let k = vec![k];
                match op {
                    0 => {
                        let v = t.to_string().into_bytes();
                        prop_assert_eq!(h.set(&k, &v, &l), m.insert(k.clone(), (v, None)).is_none());
                    }
                    1 => {
                        let v = t.to_string().into_bytes();
                        let old = m.get(&k).and_then(|e| e.1);
                        prop_assert_eq!(h.set_keep_ttl(&k, &v, &l), m.insert(k.clone(), (v, old)).is_none());
                    }
                    2 => {
                        h.mark_ex();
                        let present = m.get_mut(&k).map(|e| e.1 = Some(t)).is_some();
                        prop_assert_eq!(h.set_expiry(&k, Some(t)), present);
                    }
                    3 => {
                        let present = m.get_mut(&k).map(|e| e.1 = None).is_some();
                        prop_assert_eq!(h.set_expiry(&k, None), present);
                    }
                    4 => {
                        let dead = m.get(&k).and_then(|e| e.1).is_some_and(|e| e <= t);
                        if dead { m.remove(&k); }
                        prop_assert_eq!(h.expire_field(&k, t), dead);
                    }
                    5 => {
                        let v = t.to_string().into_bytes();
                        prop_assert_eq!(h.set_expiring(&k, &v, t, &l), m.insert(k.clone(), (v, Some(t))).is_none());
                    }
                    _ => {
                        let before = m.len();
                        m.retain(|_, e| e.1.is_none_or(|e| e > t));
                        prop_assert_eq!(h.remove_all_expired(t), before - m.len());
                    }
                }
                prop_assert_eq!(h.len(), m.len());
                prop_assert_eq!(h.has_ttls(), m.values().any(|e| e.1.is_some()));
            }
            let all: HashMap<Vec<u8>, (Vec<u8>, Option<i64>)> =
                h.iter_ttl().map(|(k, v, e)| (k.to_vec(), (v.to_vec(), e))).collect();
            prop_assert_eq!(&all, &m);
            for (k, (v, e)) in &m {
                prop_assert_eq!(h.get(k), Some(&v[..]));
                prop_assert_eq!(h.expiry_of(k), Some(*e));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn behaves_like_a_hashmap(
            ops in proptest::collection::vec(
                (any::<bool>(), 0u8..60, proptest::collection::vec(any::<u8>(), 0..12)), 0..400),
            entries in 0usize..40,
            value in 0usize..10,
        ) {
            let l = limits(entries, value);
            let mut h = Hash::new();
            let mut m: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
            let mut was_table = false;
            for (ins, k, v) in ops {
                let k = vec![k];
                if ins {
                    prop_assert_eq!(h.set(&k, &v, &l), m.insert(k.clone(), v.clone()).is_none());
                    if v.len() > value { prop_assert_eq!(h.encoding(), "hashtable"); }
                } else {
                    prop_assert_eq!(h.remove(&k), m.remove(&k).is_some());
                }
                prop_assert_eq!(h.len(), m.len());
                if h.len() > entries { prop_assert_eq!(h.encoding(), "hashtable"); }
                if was_table { prop_assert_eq!(h.encoding(), "hashtable"); }
                was_table = h.encoding() == "hashtable";
            }
            let all: HashMap<Vec<u8>, Vec<u8>> = h.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
            prop_assert_eq!(all, m);
        }
    }
}
