//! One keyspace entry: key, TTL, access clock and value in a single heap block.
//!
//! Memory is the product (DESIGN.md, principle 4), and per-key overhead is what a cache of
//! millions of small keys pays for. Redis spends a dictEntry, an sds key, a robj and the value
//! (about 100 bytes for a 12-byte key and a 16-byte value). Here a key with a small string value
//! is one allocation, pointed to by one 8-byte thin pointer in the hash table:
//!
//! ```text
//! pointer bits 0-3  flags, kept in the low bits of the 16-aligned block address (tagged
//!                   pointer): bit 0 has-expire, bit 1 raw encoding, bit 2 value out of line,
//!                   bit 3 never int-encoded (INCRBYFLOAT's results are embstr in Redis);
//!                   bits 1+2 together: an inline small hash (the string bits mean nothing
//!                   for a value that is not an inline string)
//! bytes 0-1         access clock (seconds, wrapping u16) for OBJECT IDLETIME
//! [8 bytes]         absolute expiry in unix ms, little endian, only when has-expire is set
//! varint, key       the key's length (LEB128) and bytes
//! payload           inline string: varint length and bytes
//!                   inline hash:   varint (pairs << 1 | listpackex), varint length, and the
//!                                  listpack's bytes (format in types/hash.rs)
//!                   out of line:   a pointer to a boxed [`Value`]: a string that grows (APPEND,
//!                                  SETBIT) or a collection (hash table, list, set, sorted set)
//! ```
//!
//! A 12-byte key with a 16-byte value takes exactly 32 bytes, one allocator size class; the
//! flags cost nothing because they live in the pointer. Changing the TTL from none to some
//! rebuilds the block (rare); changing an existing TTL or the clock is done in place. A string
//! that is mutated is moved out of line into a growable `Vec`, so repeated APPENDs are
//! amortised O(1) rather than re-copying the whole block.
//!
//! The block's length is not stored: it is recomputed from the header. That keeps the table
//! slot at 8 bytes instead of 16 for a fat pointer.
//!
//! **Small hashes inline.** A million 10-field hashes is the typical "object per key" cache, and
//! there the boxed `Value` (32 bytes) was a fifth of the cost. A listpack hash is therefore kept
//! inside the entry's block: `hash:00000001` with ten `member:<j> -> <number>` pairs is ONE
//! 128-byte block (2 clock + 14 key + 2 header + ~109 pairs) plus the table slot, about 153 bytes a
//! key against Redis's 207. Readers get a [`HashRef`] borrowed from the block. Writers get a
//! [`HashMut`] from [`Entry::hash_mut`], which edits the listpack where it is: types/hash.rs writes
//! the hash operations once over a `HashStore` (an owned [`Hash`](enum@Hash), or this block), and
//! their listpack edits are splices. A value replaced by one of the same length is overwritten in
//! place; any other change (a longer or shorter value, a new pair appended at the end as Redis
//! does, a pair removed, a TTL added or dropped, expired pairs compacted) moves the bytes after it
//! and resizes the block only when its size changes (`Entry::pack_splice`): `realloc` to grow, and
//! to shrink within the allocator's size class; a shrink into a smaller class moves to a fresh
//! exact-size block instead, since realloc would keep the bigger one (mimalloc does while the new
//! size is at least half) and memory per key would then depend on the key's history (the server
//! tells the engine mimalloc's classes: [`set_size_classes`]). The header's varints (pair count,
//! byte length) may change length too, which shifts the pairs: the same pass moves them. Past the
//! listpack limits the hash becomes a boxed table, as before. The first version of this layout
//! copied the listpack into an owned `Hash` and back on every write command (15-20% of a single-key
//! HSET loop); editing in place removed that: docs/benchmarks.md ("Speed of the small-hash path")
//! has the figures, e.g. the server's instructions per request -10% for that loop, -14% for HSETs
//! growing 100k hashes, -16% for HINCRBY, against the copying version.

use crate::types::dense::DenseTable;
use crate::types::hash::HashStore;
use crate::types::{Hash, HashRef, Limits, List, Set, Stream, ZSet};
pub use crate::value::{Value, ValueType};
use std::alloc::Layout;
use std::ptr::NonNull;

const HAS_EXPIRE: u8 = 0b001;
const RAW: u8 = 0b010;
const HEAP: u8 = 0b100;
const NOT_INT: u8 = 0b1000;
/// With HEAP: the payload is a small hash's listpack, inline (RAW means nothing for a
/// value that is not an inline string, so its bit is reused).
const PACK: u8 = RAW;
const TAG_MASK: usize = 0b1111;
const CLOCK_AT: usize = 0;
const EXPIRE_AT: usize = 2;
/// Blocks are 16-aligned so the address's low four bits are free for the flags (mimalloc
/// aligns every block of 16 bytes or more to 16 anyway: this costs no memory).
const ALIGN: usize = 16;

/// A borrowed view of an entry's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    Str(&'a [u8]),
    Hash(HashRef<'a>),
    List(&'a List),
    Set(&'a Set),
    ZSet(&'a ZSet),
    Stream(&'a Stream),
}

/// A keyspace entry. Owns its block (and the out-of-line string, if any). `tagged` is the
/// block's address with the flags in its low bits.
pub struct Entry {
    tagged: NonNull<u8>,
}

// SAFETY: an Entry exclusively owns its heap block and its out-of-line Vec; nothing is shared,
// so moving it to another thread (RENAME or MOVE across shards) is safe.
unsafe impl Send for Entry {}

fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Reads a varint from `b` at `*pos`, advancing `*pos`.
fn get_varint(b: &[u8], pos: &mut usize) -> usize {
    let mut v = 0usize;
    let mut shift = 0;
    loop {
        let byte = b[*pos];
        *pos += 1;
        v |= ((byte & 0x7f) as usize) << shift;
        if byte & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

/// Where a block's key and payload are.
struct Parts {
    key_start: usize,
    key_end: usize,
}

fn parts_of(b: &[u8], flags: u8) -> Parts {
    let mut pos = EXPIRE_AT;
    if flags & HAS_EXPIRE != 0 {
        pos += 8;
    }
    let klen = get_varint(b, &mut pos);
    Parts {
        key_start: pos,
        key_end: pos + klen,
    }
}

/// The payload an entry is built with.
enum Payload<'a> {
    Inline(&'a [u8]),
    Heap(Box<Value>),
    /// A listpack hash's pairs, count and "listpackex" flag.
    Pack(&'a [u8], u32, bool),
}

impl Entry {
    /// A string entry. `raw` forces OBJECT ENCODING to report "raw" (set by in-place edits).
    pub fn new_str(key: &[u8], value: &[u8], expire: Option<i64>, raw: bool, clock: u16) -> Entry {
        let flags = if raw { RAW } else { 0 };
        Self::build(flags, clock, expire, key, Payload::Inline(value))
    }

    fn build(
        flags: u8,
        clock: u16,
        expire: Option<i64>,
        key: &[u8],
        payload: Payload<'_>,
    ) -> Entry {
        // The string flags mean something for an inline string only.
        let mut flags = match payload {
            Payload::Inline(_) => flags & (RAW | NOT_INT),
            Payload::Heap(_) => HEAP,
            Payload::Pack(..) => HEAP | PACK,
        };
        let mut size = EXPIRE_AT + varint_len(key.len()) + key.len();
        if expire.is_some() {
            flags |= HAS_EXPIRE;
            size += 8;
        }
        size += match &payload {
            Payload::Inline(v) => varint_len(v.len()) + v.len(),
            Payload::Heap(_) => 8,
            Payload::Pack(buf, len, ex) => {
                varint_len(pack_meta(*len, *ex)) + varint_len(buf.len()) + buf.len()
            }
        };
        let layout = Layout::from_size_align(size, ALIGN).expect("entry size");
        // SAFETY: size >= EXPIRE_AT + 2 > 0: the layout is not zero-sized, as alloc requires.
        let raw = unsafe { std::alloc::alloc(layout) };
        if raw.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // Writes `bytes` at `pos` of the fresh block (no temporary buffer, no zeroing).
        let put = |pos: &mut usize, bytes: &[u8]| {
            debug_assert!(*pos + bytes.len() <= size);
            // SAFETY: raw is a fresh allocation of `size` bytes that nothing else references;
            // every write stays within it (the sizes above were computed from the same parts),
            // and the source never overlaps the new block.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), raw.add(*pos), bytes.len()) };
            *pos += bytes.len();
        };
        let mut varint = [0u8; 10];
        let encode = |v: usize, buf: &mut [u8; 10]| -> usize {
            let (mut v, mut n) = (v, 0);
            while v >= 0x80 {
                buf[n] = (v as u8) | 0x80;
                v >>= 7;
                n += 1;
            }
            buf[n] = v as u8;
            n + 1
        };
        let mut pos = 0;
        put(&mut pos, &clock.to_le_bytes());
        if let Some(when) = expire {
            put(&mut pos, &when.to_le_bytes());
        }
        let n = encode(key.len(), &mut varint);
        put(&mut pos, &varint[..n]);
        put(&mut pos, key);
        match payload {
            Payload::Inline(v) => {
                let n = encode(v.len(), &mut varint);
                put(&mut pos, &varint[..n]);
                put(&mut pos, v);
            }
            Payload::Heap(value) => {
                let p = Box::into_raw(value) as usize as u64;
                put(&mut pos, &p.to_le_bytes());
            }
            Payload::Pack(buf, len, ex) => {
                let n = encode(pack_meta(len, ex), &mut varint);
                put(&mut pos, &varint[..n]);
                let n = encode(buf.len(), &mut varint);
                put(&mut pos, &varint[..n]);
                put(&mut pos, buf);
            }
        }
        debug_assert_eq!(pos, size);
        // The address is 16-aligned, so or-ing in four flag bits loses nothing.
        let tagged = raw.map_addr(|a| a | flags as usize);
        // SAFETY: raw is non-null (checked above) and the tag only sets low bits.
        Entry {
            tagged: unsafe { NonNull::new_unchecked(tagged) },
        }
    }

    /// Hints the CPU to load this entry's block (its first cache line).
    pub(crate) fn prefetch(&self) {
        crate::prefetch_line(self.base());
    }

    fn flags(&self) -> u8 {
        (self.tagged.as_ptr().addr() & TAG_MASK) as u8
    }

    fn base(&self) -> *mut u8 {
        self.tagged.as_ptr().map_addr(|a| a & !TAG_MASK)
    }

    /// Reads one of the header's varints at `*pos` (a position the header itself leads to),
    /// advancing `*pos`; for the lengths that locate the rest before the block's length is
    /// known.
    fn header_varint(&self, pos: &mut usize) -> usize {
        let p = self.base();
        let mut v = 0usize;
        let mut shift = 0;
        loop {
            // SAFETY: the block was written by `build` (or `pack_splice`) with a consistent
            // header; varints are read byte by byte and never past the end the header itself
            // implies.
            let byte = unsafe { *p.add(*pos) };
            *pos += 1;
            v |= ((byte & 0x7f) as usize) << shift;
            if byte & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    }

    /// Where the payload starts: past the clock, the expiry and the key.
    fn payload_start(&self) -> usize {
        let mut pos = EXPIRE_AT;
        if self.flags() & HAS_EXPIRE != 0 {
            pos += 8;
        }
        let klen = self.header_varint(&mut pos);
        pos + klen
    }

    /// Length of the block, read from its header.
    fn block_len(&self) -> usize {
        let mut pos = self.payload_start();
        match self.flags() & (HEAP | PACK) {
            HEAP => pos + 8,
            k if k == HEAP | PACK => {
                self.header_varint(&mut pos);
                let blen = self.header_varint(&mut pos);
                pos + blen
            }
            _ => {
                let vlen = self.header_varint(&mut pos);
                pos + vlen
            }
        }
    }

    /// The inline listpack's header, in one pass: (offset of its first varint, that varint
    /// (pairs << 1 | listpackex), the length of the pairs, offset of the pairs, which end the
    /// block).
    fn pack_header(&self) -> (usize, usize, usize, usize) {
        debug_assert!(self.is_pack());
        let meta_at = self.payload_start();
        let mut pos = meta_at;
        let meta = self.header_varint(&mut pos);
        let blen = self.header_varint(&mut pos);
        (meta_at, meta, blen, pos)
    }

    /// Whether the payload is a pointer to a boxed [`Value`].
    fn is_boxed(&self) -> bool {
        self.flags() & (HEAP | PACK) == HEAP
    }

    /// Whether the payload is a small hash's listpack, inline.
    fn is_pack(&self) -> bool {
        self.flags() & (HEAP | PACK) == HEAP | PACK
    }

    /// The inline listpack hash, if that is the payload.
    fn pack(&self) -> Option<HashRef<'_>> {
        if !self.is_pack() {
            return None;
        }
        let (_, meta, blen, at) = self.pack_header();
        // SAFETY: the pairs are the block's last `blen` bytes, from `at` (see `build`): within
        // the live allocation this entry owns; the borrow is tied to &self.
        let buf = unsafe { std::slice::from_raw_parts(self.base().add(at), blen) };
        Some(HashRef::Pack {
            buf,
            len: (meta >> 1) as u32,
            ex: meta & 1 != 0,
        })
    }

    fn block(&self) -> &[u8] {
        let len = self.block_len();
        // SAFETY: base() points to a live allocation of exactly `len` bytes (see `build`), owned
        // by self, and the returned borrow is tied to &self.
        unsafe { std::slice::from_raw_parts(self.base(), len) }
    }

    fn block_mut(&mut self) -> &mut [u8] {
        let len = self.block_len();
        // SAFETY: as in `block`, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.base(), len) }
    }

    pub fn key(&self) -> &[u8] {
        let b = self.block();
        let p = parts_of(b, self.flags());
        &b[p.key_start..p.key_end]
    }

    pub fn expire(&self) -> Option<i64> {
        if self.flags() & HAS_EXPIRE == 0 {
            return None;
        }
        let b = self.block();
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[EXPIRE_AT..EXPIRE_AT + 8]);
        Some(i64::from_le_bytes(w))
    }

    /// Redis's rule: a key is expired when now is strictly past its expiry time.
    pub fn is_expired(&self, now_ms: i64) -> bool {
        matches!(self.expire(), Some(when) if now_ms > when)
    }

    #[inline]
    pub fn clock(&self) -> u16 {
        let b = self.block();
        u16::from_le_bytes([b[CLOCK_AT], b[CLOCK_AT + 1]])
    }

    pub fn set_clock(&mut self, clock: u16) {
        let b = self.block_mut();
        b[CLOCK_AT..CLOCK_AT + 2].copy_from_slice(&clock.to_le_bytes());
    }

    /// Whether in-place edits marked this string "raw" for OBJECT ENCODING.
    pub fn is_raw(&self) -> bool {
        self.flags() & (RAW | HEAP) != 0
    }

    /// Marks a string that Redis would never int-encode (INCRBYFLOAT's result).
    pub fn mark_not_int(&mut self) {
        let t = self.tagged.as_ptr().map_addr(|a| a | NOT_INT as usize);
        // SAFETY: only a low tag bit changes; the pointer stays non-null.
        self.tagged = unsafe { NonNull::new_unchecked(t) };
    }

    /// OBJECT ENCODING of a string, by Redis's `tryObjectEncoding` rules: a canonical 64-bit
    /// integer of at most 20 bytes is "int", up to 44 bytes "embstr", longer or edited in
    /// place "raw".
    pub fn string_encoding(&self) -> &'static str {
        if self.is_raw() {
            return "raw";
        }
        let v = self.str_value();
        if self.flags() & NOT_INT == 0 && v.len() <= 20 && is_canonical_i64(v) {
            "int"
        } else if v.len() <= 44 {
            "embstr"
        } else {
            "raw"
        }
    }

    pub fn value_type(&self) -> ValueType {
        match self.heap() {
            None if self.is_pack() => ValueType::Hash,
            None => ValueType::String,
            Some(v) => v.value_type(),
        }
    }

    /// OBJECT ENCODING: Redis's name for how the value is stored.
    pub fn encoding(&self) -> &'static str {
        if let Some(h) = self.pack() {
            return h.encoding();
        }
        match self.heap() {
            Some(v) if v.value_type() != ValueType::String => v.encoding(),
            _ => self.string_encoding(),
        }
    }

    /// The out-of-line value, if the value is stored out of line.
    fn heap(&self) -> Option<&Value> {
        if !self.is_boxed() {
            return None;
        }
        let b = self.block();
        let p = heap_value_ptr(b, self.payload_at(b));
        // SAFETY: the pointer was produced by Box::into_raw in `build` and is owned by this
        // entry; the borrow is tied to &self.
        Some(unsafe { &*p })
    }

    /// The out-of-line value, mutably: a collection (or a string already out of line). None
    /// for an inline string, which [`Entry::str_mut`] moves out of line.
    ///
    /// A small hash kept inline is moved out of line into a boxed `Value` first, which costs
    /// memory until the next [`Entry::hash_mut`] puts it back: hash writes use that instead.
    pub fn value_mut(&mut self) -> Option<&mut Value> {
        if let Some(h) = self.pack() {
            let hash = match h {
                HashRef::Pack { buf, len, ex } => Hash::from_pack(buf, len, ex),
                HashRef::Table(_) => unreachable!("an inline hash is a listpack"),
            };
            let fresh = Self::build(
                HEAP,
                self.clock(),
                self.expire(),
                self.key(),
                Payload::Heap(Box::new(Value::Hash(hash))),
            );
            *self = fresh;
        }
        self.heap_mut()
    }

    /// The out-of-line value, mutably, as it is: None for an inline value (a small hash stays
    /// in its block). For freeing a big value in steps.
    pub fn heap_mut(&mut self) -> Option<&mut Value> {
        if !self.is_boxed() {
            return None;
        }
        let b = self.block();
        let p = heap_value_ptr(b, self.payload_at(b));
        // SAFETY: as in `heap`; &mut self makes the borrow exclusive.
        Some(unsafe { &mut *p })
    }

    fn payload_at(&self, b: &[u8]) -> usize {
        parts_of(b, self.flags()).key_end
    }

    pub fn value(&self) -> ValueRef<'_> {
        if let Some(h) = self.pack() {
            return ValueRef::Hash(h);
        }
        if let Some(v) = self.heap() {
            return match v {
                Value::Str(s) => ValueRef::Str(s),
                Value::Hash(h) => ValueRef::Hash(h.view()),
                Value::List(l) => ValueRef::List(l),
                Value::Set(s) => ValueRef::Set(s),
                Value::ZSet(z) => ValueRef::ZSet(z),
                Value::Stream(s) => ValueRef::Stream(s),
            };
        }
        let b = self.block();
        let mut p = self.payload_at(b);
        let vlen = get_varint(b, &mut p);
        ValueRef::Str(&b[p..p + vlen])
    }

    /// The string value, for callers that checked the type is string (a bug otherwise: the
    /// server contains the panic and answers an error).
    pub fn str_value(&self) -> &[u8] {
        match self.value() {
            ValueRef::Str(s) => s,
            other => panic!("str_value of a {:?} value", other),
        }
    }

    /// Replaces the expiry (None removes it). In place when the block already has room.
    pub fn set_expire(&mut self, expire: Option<i64>) {
        let has = self.flags() & HAS_EXPIRE != 0;
        match (has, expire) {
            (true, Some(when)) => {
                self.block_mut()[EXPIRE_AT..EXPIRE_AT + 8].copy_from_slice(&when.to_le_bytes());
            }
            (false, None) => {}
            _ => self.rebuild(expire, None),
        }
    }

    /// Replaces an inline string value in place when the new block would have exactly this
    /// block's layout (same value length, same TTL presence): a cache overwriting a key with a
    /// value of the same size then costs no allocation, no free and no key copy. Resets the
    /// encoding flags as a fresh `new_str(.., raw: false, ..)` would. Returns false, changing
    /// nothing, when the layouts differ.
    pub fn overwrite_str(&mut self, value: &[u8], expire: Option<i64>, clock: u16) -> bool {
        let flags = self.flags();
        if flags & HEAP != 0 || (flags & HAS_EXPIRE != 0) != expire.is_some() {
            return false;
        }
        let b = self.block_mut();
        let mut at = parts_of(b, flags).key_end;
        if get_varint(b, &mut at) != value.len() {
            return false;
        }
        b[at..at + value.len()].copy_from_slice(value);
        b[CLOCK_AT..CLOCK_AT + 2].copy_from_slice(&clock.to_le_bytes());
        if let Some(when) = expire {
            b[EXPIRE_AT..EXPIRE_AT + 8].copy_from_slice(&when.to_le_bytes());
        }
        let keep = (flags & HAS_EXPIRE) as usize;
        let tagged = self.tagged.as_ptr().map_addr(|a| (a & !TAG_MASK) | keep);
        // SAFETY: the same non-null block address with other low tag bits.
        self.tagged = unsafe { NonNull::new_unchecked(tagged) };
        true
    }

    /// Rebuilds the block with a new expiry and, optionally, a new key; keeps the value.
    fn rebuild(&mut self, expire: Option<i64>, new_key: Option<&[u8]>) {
        let flags = self.flags();
        let clock = self.clock();
        let fresh = {
            let key = new_key.unwrap_or_else(|| self.key());
            if let Some(HashRef::Pack { buf, len, ex }) = self.pack() {
                Self::build(flags, clock, expire, key, Payload::Pack(buf, len, ex))
            } else if flags & HEAP != 0 {
                let vec = self.take_heap();
                Self::build(flags, clock, expire, key, Payload::Heap(vec))
            } else {
                Self::build(flags, clock, expire, key, Payload::Inline(self.str_value()))
            }
        };
        *self = fresh;
    }

    /// Moves the out-of-line vector out, leaving the block pointing at an empty one.
    fn take_heap(&self) -> Box<Value> {
        let b = self.block();
        let p = heap_value_ptr(b, self.payload_at(b));
        // SAFETY: p is the live Box<Value> owned by this entry; we take its contents and leave
        // an empty string in place so that the entry's Drop still frees a valid box.
        let taken = unsafe { std::mem::replace(&mut *p, Value::Str(Vec::new())) };
        Box::new(taken)
    }

    /// The same entry under another key (RENAME, MOVE).
    pub fn with_key(mut self, key: &[u8]) -> Entry {
        let expire = self.expire();
        self.rebuild(expire, Some(key));
        self
    }

    /// A deep copy under another key (COPY).
    pub fn clone_as(&self, key: &[u8]) -> Entry {
        if let Some(HashRef::Pack { buf, len, ex }) = self.pack() {
            return Self::build(
                HEAP | PACK,
                self.clock(),
                self.expire(),
                key,
                Payload::Pack(buf, len, ex),
            );
        }
        match self.heap() {
            Some(v) if v.value_type() != ValueType::String => Self::build(
                self.flags(),
                self.clock(),
                self.expire(),
                key,
                Payload::Heap(Box::new(v.clone())),
            ),
            _ => Entry::new_str(
                key,
                self.str_value(),
                self.expire(),
                self.is_raw(),
                self.clock(),
            ),
        }
    }

    /// An entry holding an out-of-line value (a collection). A listpack hash goes inline.
    pub fn new_value(key: &[u8], value: Value, expire: Option<i64>, clock: u16) -> Entry {
        if let Value::Hash(Hash::Pack { buf, len, ex }) = &value {
            return Self::build(0, clock, expire, key, Payload::Pack(buf, *len, *ex));
        }
        Self::build(0, clock, expire, key, Payload::Heap(Box::new(value)))
    }

    /// The hash value, for writing: None for another type. A listpack hash kept inline is
    /// edited inside this entry's block (see [`HashMut`]); a table is written in place.
    pub fn hash_mut(&mut self) -> Option<HashMut<'_>> {
        if !self.is_pack() {
            match self.heap() {
                // A listpack that `value_mut` moved out of line goes back inline first.
                Some(Value::Hash(Hash::Pack { .. })) => {
                    if let Value::Hash(h) = *self.take_heap() {
                        self.store_hash(h);
                    }
                }
                Some(Value::Hash(_)) => {}
                _ => return None,
            }
        }
        Some(HashMut { entry: self })
    }

    /// The inline listpack's pairs, to overwrite in place.
    fn pack_bytes_mut(&mut self) -> &mut [u8] {
        let (.., blen, at) = self.pack_header();
        // SAFETY: as in `pack`; &mut self makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.base().add(at), blen) }
    }

    /// Marks the inline listpack "listpackex": the flag is the low bit of its header's first
    /// varint, so the header keeps its length.
    fn pack_mark_ex(&mut self) {
        let (meta_at, ..) = self.pack_header();
        self.block_mut()[meta_at] |= 1;
    }

    /// [`HashStore::splice`] on the inline listpack, inside the block: the pairs after the
    /// change move by the difference, the header's varints (pair count, length) are rewritten
    /// (their length may change, which moves the pairs before `at` too), and the block is
    /// resized only when its size changes ([`Entry::resize_block`]: realloc, or a fresh block
    /// of a smaller size class): grown before the moves, shrunk after them. Returns the pairs.
    fn pack_splice(&mut self, at: usize, remove: usize, insert: usize, len: u32) -> &mut [u8] {
        let (meta_at, old_meta, blen, lp_at) = self.pack_header();
        let old_size = lp_at + blen;
        // Everything that can fail is checked before the first byte moves: a panic midway
        // would leave a header that does not describe the block.
        assert!(
            at <= blen && remove <= blen - at,
            "splice outside the listpack"
        );
        let new_blen = blen - remove + insert;
        let meta = pack_meta(len, old_meta & 1 != 0);
        let new_lp_at = meta_at + varint_len(meta) + varint_len(new_blen);
        let new_size = new_lp_at + new_blen;
        Layout::from_size_align(new_size, ALIGN).expect("entry size");
        debug_assert_eq!(self.block_len(), old_size);
        #[cfg(test)]
        let before = self.base();
        if new_size > old_size {
            self.resize_block(old_size, new_size);
        }
        let span = old_size.max(new_size);
        // SAFETY: the block is now `span` bytes long (grown above, or shrunk only below), all
        // initialised (`resize_block` zeroes what it adds), and &mut self makes the access
        // exclusive. The header is inconsistent until the varints below are written, so the
        // length is not read from it.
        let b = unsafe { std::slice::from_raw_parts_mut(self.base(), span) };
        // The pairs before the change (with the bytes at `at` that stay) move with the start of
        // the pairs; those after it, by the difference too.
        let head = lp_at..lp_at + at + remove.min(insert);
        let tail = lp_at + at + remove..old_size;
        let tail_to = new_lp_at + at + insert;
        // Whichever part moves towards the other goes second, so that neither overwrites the
        // other before it moved: the destinations never overlap (head ends at or before
        // `tail_to`); a tail moving right lands past the head's source, and a head moving
        // right while the tail does not ends at or before the tail's source.
        let tail_first = tail_to > tail.start;
        if tail_first {
            b.copy_within(tail, tail_to);
            if new_lp_at != lp_at {
                b.copy_within(head, new_lp_at);
            }
        } else {
            if new_lp_at != lp_at {
                b.copy_within(head, new_lp_at);
            }
            if tail_to != tail.start {
                b.copy_within(tail, tail_to);
            }
        }
        let mut p = meta_at;
        put_varint(b, &mut p, meta);
        put_varint(b, &mut p, new_blen);
        debug_assert_eq!(p, new_lp_at);
        if new_size < old_size {
            self.resize_block(old_size, new_size);
        }
        #[cfg(test)]
        splice_paths::note(
            new_size.cmp(&old_size),
            new_lp_at.cmp(&lp_at),
            tail_first,
            self.base() != before,
        );
        &mut self.block_mut()[new_lp_at..]
    }

    /// Reallocates the block from `old` to `new` bytes (both its exact sizes), keeping its
    /// first `min(old, new)` bytes and zeroing any added; the flags stay.
    ///
    /// A block that shrinks into a smaller allocator size class (see [`set_size_classes`])
    /// moves to a fresh block of that class instead, as `build` would size it: realloc keeps
    /// a block that still fits (mimalloc does while the new size is at least half the old
    /// block), so a hash that lost half its fields to HDEL would keep its bigger block, and
    /// its memory would depend on its history.
    fn resize_block(&mut self, old: usize, new: usize) {
        let flags = self.flags();
        let layout = Layout::from_size_align(old, ALIGN).expect("entry size");
        let new_layout = Layout::from_size_align(new, ALIGN).expect("entry size");
        let raw = if new < old && !same_size_class(old, new) {
            // SAFETY: new_layout is not zero-sized (a block holds at least the clock).
            let raw = unsafe { std::alloc::alloc(new_layout) };
            if raw.is_null() {
                std::alloc::handle_alloc_error(new_layout);
            }
            // SAFETY: the old block is valid for `old` > `new` bytes and the fresh one for
            // `new`; they are distinct allocations. The old block was allocated with `layout`
            // (as below) and is freed once, here, after its bytes were copied; the entry
            // points at the fresh one from now on.
            unsafe {
                std::ptr::copy_nonoverlapping(self.base(), raw, new);
                std::alloc::dealloc(self.base(), layout);
            }
            #[cfg(test)]
            splice_paths::note_shrink(false);
            raw
        } else {
            #[cfg(test)]
            if new < old {
                splice_paths::note_shrink(true);
            }
            // SAFETY: base() was allocated by the global allocator with `layout`: `build` and
            // every earlier resize allocate blocks of exactly their header's length (`old`,
            // which the caller read before changing the header) with ALIGN. `new` is non-zero
            // and `new_layout` proved it does not overflow when rounded up to ALIGN. realloc
            // keeps ALIGN, so the low tag bits stay free.
            let raw = unsafe { std::alloc::realloc(self.base(), layout, new) };
            if raw.is_null() {
                std::alloc::handle_alloc_error(new_layout);
            }
            raw
        };
        if new > old {
            // SAFETY: raw is valid for `new` bytes; the `new - old` bytes past `old` are
            // within it and not yet initialised.
            unsafe { raw.add(old).write_bytes(0, new - old) };
        }
        let tagged = raw.map_addr(|a| a | flags as usize);
        // SAFETY: raw is non-null (checked above) and the tag only sets low bits.
        self.tagged = unsafe { NonNull::new_unchecked(tagged) };
    }

    /// Stores `hash` as this entry's value: inline when it is a listpack, boxed otherwise.
    fn store_hash(&mut self, hash: Hash) {
        let (clock, expire) = (self.clock(), self.expire());
        let fresh = if let Hash::Pack { buf, len, ex } = &hash {
            Self::build(0, clock, expire, self.key(), Payload::Pack(buf, *len, *ex))
        } else {
            let value = Payload::Heap(Box::new(Value::Hash(hash)));
            Self::build(0, clock, expire, self.key(), value)
        };
        *self = fresh;
    }

    /// Mutable access to a string value; moves it out of line first, and marks it raw. For
    /// callers that checked the type is string (a bug otherwise, as for `str_value`).
    pub fn str_mut(&mut self) -> &mut Vec<u8> {
        if self.flags() & HEAP == 0 {
            let value = Box::new(Value::Str(self.str_value().to_vec()));
            let fresh = Self::build(
                RAW,
                self.clock(),
                self.expire(),
                self.key(),
                Payload::Heap(value),
            );
            *self = fresh;
        }
        match self.value_mut() {
            Some(Value::Str(s)) => s,
            other => panic!("str_mut of a {:?} value", other.map(|v| v.value_type())),
        }
    }

    /// Roughly how many frees dropping this entry takes (see [`Value::free_effort`]).
    pub fn free_effort(&self) -> usize {
        match self.pack() {
            Some(h) => h.len(),
            None => self.heap().map_or(1, Value::free_effort),
        }
    }

    /// Approximate memory used by this entry (block and out-of-line value).
    pub fn memory(&self) -> usize {
        let b = self.block();
        let extra = match self.heap() {
            Some(v) => std::mem::size_of::<Value>() + v.memory(),
            None => 0,
        };
        b.len() + extra
    }
}

/// Redis's string2ll acceptance: optional '-', digits without leading zeros ("0" alone is
/// fine, "-0" is not), within i64.
fn is_canonical_i64(v: &[u8]) -> bool {
    let digits = v.strip_prefix(b"-").unwrap_or(v);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return false;
    }
    if digits[0] == b'0' && (digits.len() > 1 || v.len() > 1) {
        return false;
    }
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .is_some()
}

/// The varint before an inline listpack's length: its pair count and "listpackex" flag.
fn pack_meta(len: u32, ex: bool) -> usize {
    ((len as usize) << 1) | usize::from(ex)
}

/// The global allocator's size class of an allocation of n bytes (what it really reserves
/// for it), if the program said (see [`set_size_classes`]).
static SIZE_CLASSES: std::sync::OnceLock<fn(usize) -> usize> = std::sync::OnceLock::new();

/// Tells the entries the global allocator's size classes: `good_size(n)` is how many bytes an
/// allocation of n bytes really takes (mimalloc's `mi_good_size`). A block that shrinks
/// within its class is then resized in place (realloc); without it, every shrink moves the
/// block to a fresh exact-size allocation. The first call wins.
pub fn set_size_classes(good_size: fn(usize) -> usize) {
    let _ = SIZE_CLASSES.set(good_size);
}

/// Whether blocks of `a` and `b` bytes take the same allocator size class (false when the
/// classes are unknown).
fn same_size_class(a: usize, b: usize) -> bool {
    SIZE_CLASSES.get().is_some_and(|f| f(a) == f(b))
}

/// Which paths of [`Entry::pack_splice`] ran on this thread, so that the tests can check
/// they exercised every one.
#[cfg(test)]
mod splice_paths {
    use std::cell::Cell;
    use std::cmp::Ordering;

    pub const GROW: u32 = 1;
    pub const SHRINK: u32 = 2;
    pub const SAME_SIZE: u32 = 4;
    pub const HEADER_GREW: u32 = 8;
    pub const HEADER_SHRANK: u32 = 16;
    pub const TAIL_FIRST: u32 = 32;
    pub const HEAD_FIRST: u32 = 64;
    /// The block moved (realloc or a fresh block).
    pub const MOVED: u32 = 128;
    /// A shrink within the allocator's size class (realloc).
    pub const SHRINK_SAME_CLASS: u32 = 256;
    /// A shrink into a smaller class (a fresh block).
    pub const SHRINK_NEW_CLASS: u32 = 512;
    pub const ALL: u32 = 1023;

    thread_local! {
        static SEEN: Cell<u32> = const { Cell::new(0) };
    }

    pub fn note(size: Ordering, header: Ordering, tail_first: bool, moved: bool) {
        let mut bits = match size {
            Ordering::Greater => GROW,
            Ordering::Less => SHRINK,
            Ordering::Equal => SAME_SIZE,
        };
        bits |= match header {
            Ordering::Greater => HEADER_GREW,
            Ordering::Less => HEADER_SHRANK,
            Ordering::Equal => 0,
        };
        bits |= if tail_first { TAIL_FIRST } else { HEAD_FIRST };
        if moved {
            bits |= MOVED;
        }
        SEEN.with(|s| s.set(s.get() | bits));
    }

    pub fn note_shrink(same_class: bool) {
        let bit = if same_class {
            SHRINK_SAME_CLASS
        } else {
            SHRINK_NEW_CLASS
        };
        SEEN.with(|s| s.set(s.get() | bit));
    }

    /// The paths seen since the last call.
    pub fn take() -> u32 {
        SEEN.with(|s| s.replace(0))
    }
}

/// Writes `v` as a varint into `b` at `*pos`, advancing `*pos`.
fn put_varint(b: &mut [u8], pos: &mut usize, mut v: usize) {
    while v >= 0x80 {
        b[*pos] = (v as u8) | 0x80;
        v >>= 7;
        *pos += 1;
    }
    b[*pos] = v as u8;
    *pos += 1;
}

/// A hash being written (see [`Entry::hash_mut`]): [`Hash`](enum@Hash)'s reads and writes. A small
/// hash is edited inside the entry's block, where it stays (types/hash.rs's `HashStore`
/// with [`Entry`]'s listpack primitives): a same-length update in place, anything else by
/// moving the pairs after the change and resizing the block with `realloc` when its size
/// changes. Past the listpack limits the hash becomes a boxed table, written in place from
/// then on. Dropping the guard has nothing left to do.
pub struct HashMut<'a> {
    entry: &'a mut Entry,
}

impl HashStore for HashMut<'_> {
    fn view(&self) -> HashRef<'_> {
        match self.entry.pack() {
            Some(h) => h,
            None => match self.entry.heap() {
                Some(Value::Hash(h)) => h.view(),
                _ => unreachable!("hash_mut checked the type"),
            },
        }
    }

    fn table_mut(&mut self) -> Option<&mut DenseTable> {
        if self.entry.is_pack() {
            return None;
        }
        match self.entry.heap_mut() {
            Some(Value::Hash(Hash::Table(t))) => Some(t),
            _ => unreachable!("hash_mut checked the type and put a listpack inline"),
        }
    }

    fn pack_mut(&mut self) -> &mut [u8] {
        self.entry.pack_bytes_mut()
    }

    fn splice(&mut self, at: usize, remove: usize, insert: usize, len: u32) -> &mut [u8] {
        self.entry.pack_splice(at, remove, insert, len)
    }

    fn mark_ex(&mut self) {
        if self.entry.is_pack() {
            self.entry.pack_mark_ex();
        }
    }

    fn store_table(&mut self, table: DenseTable) {
        self.entry.store_hash(Hash::Table(Box::new(table)));
    }
}

/// The same reads and writes as [`Hash`](enum@Hash)'s (see there).
impl HashMut<'_> {
    pub fn view(&self) -> HashRef<'_> {
        HashStore::view(self)
    }

    pub fn len(&self) -> usize {
        self.view().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn encoding(&self) -> &'static str {
        self.view().encoding()
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.view().get(field)
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    pub fn has_ttls(&self) -> bool {
        self.view().has_ttls()
    }

    pub fn expiry_of(&self, field: &[u8]) -> Option<Option<i64>> {
        self.view().expiry_of(field)
    }

    pub fn convert_for<'a>(&mut self, limits: &Limits, args: impl IntoIterator<Item = &'a [u8]>) {
        HashStore::convert_for(self, limits, args)
    }

    pub fn set(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        HashStore::set(self, field, value, limits)
    }

    pub fn set_keep_ttl(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        HashStore::set_keep_ttl(self, field, value, limits)
    }

    pub fn set_expiring(
        &mut self,
        field: &[u8],
        value: &[u8],
        expiry_ms: i64,
        limits: &Limits,
    ) -> bool {
        HashStore::set_expiring(self, field, value, expiry_ms, limits)
    }

    pub fn remove(&mut self, field: &[u8]) -> bool {
        HashStore::remove(self, field)
    }

    pub fn mark_ex(&mut self) {
        HashStore::mark_ex(self)
    }

    pub fn set_expiry(&mut self, field: &[u8], expiry: Option<i64>) -> bool {
        HashStore::set_expiry(self, field, expiry)
    }

    pub fn expire_field(&mut self, field: &[u8], now_ms: i64) -> bool {
        HashStore::expire_field(self, field, now_ms)
    }

    pub fn remove_all_expired(&mut self, now_ms: i64) -> usize {
        HashStore::remove_all_expired(self, now_ms, &mut |_| {})
    }

    /// [`HashMut::remove_all_expired`], passing each removed field to `gone`.
    pub fn remove_all_expired_with(&mut self, now_ms: i64, gone: &mut dyn FnMut(&[u8])) -> usize {
        HashStore::remove_all_expired(self, now_ms, gone)
    }

    pub fn remove_expired(&mut self, now_ms: i64, max_buckets: usize) -> usize {
        HashStore::remove_expired(self, now_ms, max_buckets, &mut |_| {})
    }

    /// [`HashMut::remove_expired`], passing each removed field to `gone`.
    pub fn remove_expired_with(
        &mut self,
        now_ms: i64,
        max_buckets: usize,
        gone: &mut dyn FnMut(&[u8]),
    ) -> usize {
        HashStore::remove_expired(self, now_ms, max_buckets, gone)
    }
}

fn heap_value_ptr(b: &[u8], at: usize) -> *mut Value {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w) as usize as *mut Value
}

impl Drop for Entry {
    fn drop(&mut self) {
        let len = self.block_len();
        if self.is_boxed() {
            let b = self.block();
            let p = heap_value_ptr(b, self.payload_at(b));
            // SAFETY: p came from Box::into_raw and is freed exactly once, here.
            drop(unsafe { Box::from_raw(p) });
        }
        let layout = Layout::from_size_align(len, ALIGN).expect("entry size");
        // SAFETY: base() and layout are exactly what `build` allocated; freed once, here.
        unsafe { std::alloc::dealloc(self.base(), layout) };
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("expire", &self.expire())
            .field("value", &self.value())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_string_is_one_compact_block() {
        let e = Entry::new_str(b"key:00000001", b"0123456789abcdef", None, false, 7);
        assert_eq!(e.block().len(), 32);
        assert_eq!(e.base() as usize % ALIGN, 0);
        assert_eq!(e.string_encoding(), "embstr");
        let mut n = Entry::new_str(b"k", b"10", Some(5), false, 0);
        assert_eq!(n.string_encoding(), "int");
        n.mark_not_int();
        n.set_expire(None);
        assert_eq!(n.string_encoding(), "embstr");
        for (v, int) in [
            (&b"-0"[..], false),
            (b"007", false),
            (b"0", true),
            (b"-12", true),
            (b"9223372036854775808", false),
        ] {
            assert_eq!(
                Entry::new_str(b"k", v, None, false, 0).string_encoding() == "int",
                int,
                "{v:?}"
            );
        }
        assert_eq!(e.key(), b"key:00000001");
        assert_eq!(e.str_value(), b"0123456789abcdef");
        assert_eq!(e.clock(), 7);
        assert_eq!(e.expire(), None);
        assert!(!e.is_raw());
    }

    #[test]
    fn collection_values_live_out_of_line() {
        let mut e = Entry::new_value(b"h", Value::Hash(Hash::new()), None, 3);
        assert_eq!(e.value_type(), ValueType::Hash);
        assert!(matches!(e.value(), ValueRef::Hash(_)));
        assert!(matches!(e.value_mut(), Some(Value::Hash(_))));
        // A TTL change rebuilds the block and keeps the value; so does a new key.
        e.set_expire(Some(1234));
        assert_eq!((e.expire(), e.value_type()), (Some(1234), ValueType::Hash));
        let e = e.with_key(b"other");
        assert_eq!((e.key(), e.value_type()), (&b"other"[..], ValueType::Hash));
        let c = e.clone_as(b"copy");
        assert_eq!(
            (c.key(), c.expire(), c.value_type()),
            (&b"copy"[..], Some(1234), ValueType::Hash)
        );
        assert_eq!(c.encoding(), Hash::new().encoding());
        let mut c = c;
        assert!(!c.overwrite_str(b"x", Some(1), 0));
        assert_eq!(c.value_type(), ValueType::Hash);
        // A string never turns into a collection in place; inline strings have no heap value.
        let mut s = Entry::new_str(b"s", b"v", None, false, 0);
        assert!(s.value_mut().is_none());
        s.str_mut().push(b'2');
        assert!(matches!(s.value_mut(), Some(Value::Str(v)) if v == b"v2"));
        assert_eq!(s.encoding(), "raw");
    }

    #[test]
    fn a_small_hash_lives_inside_the_entry_block() {
        let l = crate::types::Limits::default();
        let mut e = Entry::new_value(b"hash:00000001", Value::Hash(Hash::new()), None, 5);
        assert!(e.is_pack());
        {
            let mut h = e.hash_mut().unwrap();
            for j in 0..10 {
                h.set(
                    format!("member:{j}").as_bytes(),
                    format!("{}", j * 10).as_bytes(),
                    &l,
                );
            }
        }
        // 2 clock + 1 + 13 key + 2 header + 10 pairs of 1 + 8 + 1..2 bytes: one 128-byte class.
        assert!(e.is_pack());
        assert_eq!(e.block().len(), 2 + 14 + 2 + 10 * 11 - 1);
        assert_eq!(e.memory(), e.block().len());
        assert_eq!(
            (e.value_type(), e.encoding()),
            (ValueType::Hash, "listpack")
        );
        let ValueRef::Hash(h) = e.value() else {
            panic!("a hash")
        };
        assert_eq!(h.get(b"member:3"), Some(&b"30"[..]));
        assert_eq!(h.len(), 10);
        // A read-only guard leaves the block alone; a same-length update writes in place.
        let before = e.base();
        assert_eq!(e.hash_mut().unwrap().len(), 10);
        assert!(!e.hash_mut().unwrap().set(b"member:5", b"51", &l));
        assert_eq!(e.base(), before);
        let ValueRef::Hash(h) = e.value() else {
            panic!("a hash")
        };
        assert_eq!((h.get(b"member:5"), h.len()), (Some(&b"51"[..]), 10));
        e.hash_mut().unwrap().set(b"member:5", b"50", &l);
        // TTL, rename and copy keep the pairs; the clock too.
        e.set_expire(Some(77));
        let e = e.with_key(b"k2");
        let mut c = e.clone_as(b"k3");
        assert_eq!((c.key(), c.expire(), c.clock()), (&b"k3"[..], Some(77), 5));
        assert_eq!(c.value(), e.value());
        // value_mut moves it out of line; the next hash_mut puts it back.
        match c.value_mut() {
            Some(Value::Hash(h)) => {
                h.mark_ex();
                h.set_expiry(b"member:0", Some(9));
            }
            _ => panic!("a hash"),
        }
        assert!(c.is_boxed());
        assert_eq!(c.encoding(), "listpackex");
        let _ = c.hash_mut();
        assert!(c.is_pack());
        let ValueRef::Hash(h) = c.value() else {
            panic!("a hash")
        };
        assert_eq!(
            (h.encoding(), h.expiry_of(b"member:0")),
            ("listpackex", Some(Some(9)))
        );
        // Past the listpack limits it becomes a boxed table, and stays one.
        {
            let mut h = c.hash_mut().unwrap();
            h.set(b"long", &[b'x'; 65], &l);
        }
        assert!(c.is_boxed());
        assert_eq!((c.encoding(), c.free_effort()), ("hashtable", 11));
        c.hash_mut().unwrap().remove(b"long");
        assert_eq!(c.encoding(), "hashtable");
        assert!(Entry::new_str(b"s", b"v", None, false, 0)
            .hash_mut()
            .is_none());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn inline_hash_behaves_like_a_hashmap(
            ops in proptest::collection::vec((0u8..4, 0u8..12, 0usize..8), 0..120),
        ) {
            // Integer-looking values that are not canonical must come back byte for byte.
            const VALUES: [&[u8]; 8] = [b"0", b"-0", b"007", b" 1", b"9223372036854775807",
                b"-9223372036854775808", b"123456789012345678901234567890", b"\x00\xff"];
            let l = crate::types::Limits { hash_max_listpack_entries: 8, ..Default::default() };
            let mut e = Entry::new_value(b"k", Value::Hash(Hash::new()), None, 0);
            let mut m = std::collections::HashMap::new();
            for (op, k, v) in ops {
                let k = vec![b'f'; k as usize];
                match op {
                    0 | 1 => {
                        let new = e.hash_mut().unwrap().set(&k, VALUES[v], &l);
                        prop_assert_eq!(new, m.insert(k, VALUES[v].to_vec()).is_none());
                    }
                    2 => {
                        let gone = e.hash_mut().unwrap().remove(&k);
                        prop_assert_eq!(gone, m.remove(&k).is_some());
                    }
                    _ => {
                        e.set_expire(if v % 2 == 0 { None } else { Some(v as i64) });
                    }
                }
                let ValueRef::Hash(h) = e.value() else { panic!("a hash") };
                prop_assert_eq!(h.len(), m.len());
                prop_assert_eq!(e.is_pack(), h.encoding() == "listpack");
            }
            let ValueRef::Hash(h) = e.value() else { panic!("a hash") };
            for (k, v) in &m {
                prop_assert_eq!(h.get(k), Some(&v[..]));
            }
        }
    }

    /// One step of [`inline_hash_edits_match_a_model`]: what a hash command (or the expiry
    /// machinery) does to an inline hash. Fields and values are indices into the pools below.
    #[derive(Clone, Debug)]
    enum Op {
        /// HSET / HMSET.
        Set(usize, usize),
        /// HSETNX: a set only when the field is missing.
        SetNx(usize, usize),
        /// HINCRBY: read, add, set keeping the TTL.
        Incr(usize, i64),
        /// HSETEX ... KEEPTTL.
        SetKeep(usize, usize),
        /// HSETEX EX: value and TTL.
        SetExpiring(usize, usize, i64),
        /// HDEL.
        Remove(usize),
        /// HEXPIRE (marks the hash "listpackex" first, as Redis 7.4 does).
        Expire(usize, i64),
        /// HPERSIST.
        Persist(usize),
        /// Lazy expiry of one named field.
        ExpireField(usize, i64),
        /// Lazy expiry of every field (HLEN, HGETALL).
        RemoveAllExpired(i64),
        /// The active cycle's field sweep.
        Sweep(i64),
        /// EXPIRE / PERSIST of the key: the block is rebuilt around the listpack.
        KeyTtl(Option<i64>),
        /// A guard taken and dropped unused (a type check).
        Guard,
    }

    /// Field names around the pair header's limits (15/16 bytes) and past the value limit.
    fn model_field(i: usize) -> Vec<u8> {
        let mut f = format!("f{i}").into_bytes();
        match i % 4 {
            0 => {}
            1 => f.resize(15, b'.'),
            2 => f.resize(16, b'-'),
            _ => f.resize(if i % 8 == 3 { 40 } else { 70 }, b'+'),
        }
        f
    }

    /// Values around the short header (7/8 bytes), the default value limit (64/65), the
    /// listpack's 128-byte length varint and, twice, its 16 KiB one.
    fn model_value(i: usize) -> Vec<u8> {
        match i {
            0 => Vec::new(),
            1 => b"7".to_vec(),
            2 => b"1234567".to_vec(),
            3 => b"12345678".to_vec(),
            4 => b"-0".to_vec(),
            5 => b"007".to_vec(),
            6 => vec![b'x'; 63],
            7 => vec![b'y'; 64],
            8 => vec![b'z'; 65],
            9 => vec![b'w'; 200],
            _ => vec![b'v'; 9000],
        }
    }

    fn model_op() -> impl Strategy<Value = Op> {
        let f = 0usize..90;
        let v = 0usize..11;
        let t = 0i64..60;
        prop_oneof![
            8 => (f.clone(), v.clone()).prop_map(|(f, v)| Op::Set(f, v)),
            1 => (f.clone(), v.clone()).prop_map(|(f, v)| Op::SetNx(f, v)),
            3 => (f.clone(), -200i64..200).prop_map(|(f, by)| Op::Incr(f, by)),
            1 => (f.clone(), v.clone()).prop_map(|(f, v)| Op::SetKeep(f, v)),
            2 => (f.clone(), v, t.clone()).prop_map(|(f, v, t)| Op::SetExpiring(f, v, t)),
            4 => f.clone().prop_map(Op::Remove),
            2 => (f.clone(), t.clone()).prop_map(|(f, t)| Op::Expire(f, t)),
            1 => f.clone().prop_map(Op::Persist),
            1 => (f, t.clone()).prop_map(|(f, t)| Op::ExpireField(f, t)),
            1 => t.clone().prop_map(Op::RemoveAllExpired),
            1 => t.prop_map(Op::Sweep),
            1 => proptest::option::of(0i64..1000).prop_map(Op::KeyTtl),
            1 => Just(Op::Guard),
        ]
    }

    /// The model: the pairs in listpack order (Redis's: a new field at the end, an update in
    /// place), each with its TTL, plus whether the hash is "listpackex" or a table by now.
    #[derive(Default)]
    struct Model {
        pairs: Vec<(Vec<u8>, Vec<u8>, Option<i64>)>,
        ex: bool,
        table: bool,
    }

    impl Model {
        fn at(&self, f: &[u8]) -> Option<usize> {
            self.pairs.iter().position(|p| p.0 == f)
        }

        /// A set, converting as `Hash` does (a long string before, too many pairs after).
        fn set(&mut self, f: &[u8], v: &[u8], ttl: Option<Option<i64>>, l: &Limits) -> bool {
            if f.len().max(v.len()) > l.hash_max_listpack_value {
                self.table = true;
            }
            let new = match self.at(f) {
                Some(i) => {
                    let p = &mut self.pairs[i];
                    p.1 = v.to_vec();
                    if let Some(t) = ttl {
                        p.2 = t;
                    }
                    false
                }
                None => {
                    self.pairs.push((f.to_vec(), v.to_vec(), ttl.flatten()));
                    true
                }
            };
            if self.pairs.len() > l.hash_max_listpack_entries {
                self.table = true;
            }
            new
        }

        fn remove_due(&mut self, now: i64) -> usize {
            if !self.table && !self.ex {
                return 0;
            }
            let before = self.pairs.len();
            self.pairs.retain(|p| p.2.is_none_or(|e| e > now));
            before - self.pairs.len()
        }
    }

    /// Applies `op` to a hash through `HashStore` (the inline entry's guard, or an owned
    /// `Hash` as the reference) and to the model; returns what the write returned.
    fn apply_op<S: HashStore + ?Sized>(h: &mut S, op: &Op, l: &Limits) -> Option<i64> {
        match *op {
            Op::Set(f, v) => Some(h.set(&model_field(f), &model_value(v), l) as i64),
            Op::SetNx(f, v) => {
                let f = model_field(f);
                if h.view().contains(&f) {
                    return Some(0);
                }
                Some(h.set(&f, &model_value(v), l) as i64)
            }
            Op::Incr(f, by) => {
                let f = model_field(f);
                let old = match h.view().get(&f) {
                    None => 0,
                    Some(v) => match std::str::from_utf8(v).ok()?.parse::<i64>() {
                        Ok(n) if n.to_string().as_bytes() == v => n,
                        _ => return None,
                    },
                };
                let new = (old + by).to_string();
                h.set_keep_ttl(&f, new.as_bytes(), l);
                Some(old + by)
            }
            Op::SetKeep(f, v) => Some(h.set_keep_ttl(&model_field(f), &model_value(v), l) as i64),
            Op::SetExpiring(f, v, t) => {
                Some(h.set_expiring(&model_field(f), &model_value(v), t, l) as i64)
            }
            Op::Remove(f) => Some(h.remove(&model_field(f)) as i64),
            Op::Expire(f, t) => {
                h.mark_ex();
                Some(h.set_expiry(&model_field(f), Some(t)) as i64)
            }
            Op::Persist(f) => Some(h.set_expiry(&model_field(f), None) as i64),
            Op::ExpireField(f, t) => Some(h.expire_field(&model_field(f), t) as i64),
            // Each removed field is named once (the AOF writes an HDEL per name).
            Op::RemoveAllExpired(t) => {
                let mut names = std::collections::HashSet::new();
                let n = h.remove_all_expired(t, &mut |f| assert!(names.insert(f.to_vec())));
                assert_eq!(names.len(), n);
                assert!(names.iter().all(|f| !h.view().contains(f)));
                Some(n as i64)
            }
            Op::Sweep(t) => {
                let mut names = std::collections::HashSet::new();
                let n = h.remove_expired(t, 1 << 20, &mut |f| assert!(names.insert(f.to_vec())));
                assert_eq!(names.len(), n);
                assert!(names.iter().all(|f| !h.view().contains(f)));
                Some(n as i64)
            }
            Op::KeyTtl(_) | Op::Guard => None,
        }
    }

    fn apply_model(m: &mut Model, op: &Op, l: &Limits) -> Option<i64> {
        match *op {
            Op::Set(f, v) => Some(m.set(&model_field(f), &model_value(v), Some(None), l) as i64),
            Op::SetNx(f, v) => {
                let f = model_field(f);
                if m.at(&f).is_some() {
                    return Some(0);
                }
                Some(m.set(&f, &model_value(v), Some(None), l) as i64)
            }
            Op::Incr(f, by) => {
                let f = model_field(f);
                let old = match m.at(&f) {
                    None => 0,
                    Some(i) => {
                        let v = &m.pairs[i].1;
                        match std::str::from_utf8(v).ok()?.parse::<i64>() {
                            Ok(n) if n.to_string().as_bytes() == &v[..] => n,
                            _ => return None,
                        }
                    }
                };
                m.set(&f, (old + by).to_string().as_bytes(), None, l);
                Some(old + by)
            }
            Op::SetKeep(f, v) => Some(m.set(&model_field(f), &model_value(v), None, l) as i64),
            Op::SetExpiring(f, v, t) => {
                m.ex = true;
                Some(m.set(&model_field(f), &model_value(v), Some(Some(t)), l) as i64)
            }
            Op::Remove(f) => {
                let i = m.at(&model_field(f));
                Some(i.map(|i| m.pairs.remove(i)).is_some() as i64)
            }
            Op::Expire(f, t) => {
                m.ex = true;
                let i = m.at(&model_field(f));
                Some(i.map(|i| m.pairs[i].2 = Some(t)).is_some() as i64)
            }
            Op::Persist(f) => {
                let i = m.at(&model_field(f));
                Some(i.map(|i| m.pairs[i].2 = None).is_some() as i64)
            }
            Op::ExpireField(f, t) => {
                let i = m.at(&model_field(f));
                match i {
                    Some(i) if m.pairs[i].2.is_some_and(|e| e <= t) => {
                        m.pairs.remove(i);
                        Some(1)
                    }
                    _ => Some(0),
                }
            }
            Op::RemoveAllExpired(t) | Op::Sweep(t) => Some(m.remove_due(t) as i64),
            Op::KeyTtl(_) | Op::Guard => None,
        }
    }

    /// Runs one op sequence on an inline-hash entry, an owned `Hash` and the model, checking
    /// after every step that all three agree (pairs, order, TTLs, encoding) and that the
    /// entry's block is byte for byte the block a fresh build of the same listpack makes.
    fn run_model(
        ops: &[Op],
        l: &Limits,
        long_key: bool,
        key_ttl: Option<i64>,
    ) -> Result<(), TestCaseError> {
        let key = if long_key {
            vec![b'K'; 200]
        } else {
            b"k".to_vec()
        };
        let mut e = Entry::new_value(&key, Value::Hash(Hash::new()), key_ttl, 9);
        let mut owned = Hash::new();
        let mut m = Model::default();
        let mut ttl = key_ttl;
        for op in ops {
            let want = apply_model(&mut m, op, l);
            let got = match op {
                Op::KeyTtl(t) => {
                    ttl = *t;
                    e.set_expire(ttl);
                    None
                }
                Op::Guard => {
                    let _ = e.hash_mut();
                    None
                }
                _ => apply_op(&mut e.hash_mut().unwrap(), op, l),
            };
            prop_assert_eq!(got, want, "{:?}", op);
            prop_assert_eq!(apply_op(&mut owned, op, l), want, "{:?}", op);
            // The entry keeps its key, TTL and clock.
            prop_assert_eq!((e.key(), e.expire(), e.clock()), (&key[..], ttl, 9));
            let ValueRef::Hash(h) = e.value() else {
                panic!("a hash")
            };
            let enc = match (m.table, m.ex) {
                (true, _) => "hashtable",
                (false, true) => "listpackex",
                (false, false) => "listpack",
            };
            prop_assert_eq!((h.encoding(), owned.encoding()), (enc, enc), "{:?}", op);
            prop_assert_eq!(e.is_pack(), !m.table);
            prop_assert_eq!(h.len(), m.pairs.len());
            let got: Vec<(Vec<u8>, Vec<u8>, Option<i64>)> = h
                .iter_ttl()
                .map(|(k, v, t)| (k.to_vec(), v.to_vec(), t))
                .collect();
            if m.table {
                let as_map = |p: &[(Vec<u8>, Vec<u8>, Option<i64>)]| {
                    p.iter()
                        .map(|(k, v, t)| (k.clone(), (v.clone(), *t)))
                        .collect::<std::collections::BTreeMap<_, _>>()
                };
                prop_assert_eq!(as_map(&got), as_map(&m.pairs));
                prop_assert_eq!(h, owned.view());
            } else {
                // Listpack order is Redis's, and the bytes are the owned listpack's.
                prop_assert_eq!(&got, &m.pairs);
                prop_assert_eq!(h.memory(), owned.memory());
                let (HashRef::Pack { buf, .. }, HashRef::Pack { buf: b2, .. }) = (h, owned.view())
                else {
                    panic!("two listpacks")
                };
                prop_assert_eq!(buf, b2);
                // Exactly the block `build` makes for this listpack: same header, same size.
                let fresh = e.clone_as(&key);
                prop_assert_eq!(e.block(), fresh.block());
                prop_assert_eq!(e.memory(), fresh.memory());
            }
        }
        Ok(())
    }

    /// Size classes for the tests: 16-byte steps (the first call in the process wins; every
    /// test that cares installs the same).
    fn test_size_classes() {
        set_size_classes(|n| n.next_multiple_of(16));
    }

    fn model_limits() -> impl Strategy<Value = Limits> {
        let entries = prop_oneof![Just(4usize), Just(20), Just(63), Just(100)];
        let value = prop_oneof![Just(64usize), Just(20_000)];
        (entries, value).prop_map(|(entries, value)| Limits {
            hash_max_listpack_entries: entries,
            hash_max_listpack_value: value,
            ..Limits::default()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(192))]
        /// Random HSET / HSETNX / HINCRBY / HDEL / field TTL / lazy and active expiry
        /// sequences on an inline-hash entry match a model (and an owned `Hash`) after every
        /// step, through conversion to a table; the block grows and shrinks (past the 128-byte
        /// and 16 KiB listpack lengths and the 64-pair count, where the header's varints change
        /// length), with a short or long key, with or without a key TTL.
        #[test]
        fn inline_hash_edits_match_a_model(
            ops in proptest::collection::vec(model_op(), 0..300),
            l in model_limits(),
            long_key in any::<bool>(),
            key_ttl in proptest::option::of(0i64..1000),
        ) {
            test_size_classes();
            run_model(&ops, &l, long_key, key_ttl)?;
        }
    }

    /// Every path of `Entry::pack_splice`, each taken on purpose (and checked against the
    /// model): the block grown (moved by realloc), shrunk within its size class (realloc) and
    /// into a smaller one (a fresh block), kept at its size while the pair changes; the
    /// header's length varint one byte longer and shorter; the pairs after the change moved
    /// first (growth) or last (shrink).
    #[test]
    fn inline_hash_splice_takes_every_path() {
        test_size_classes();
        let l = Limits::default();
        let f16 = 2; // model_field(2) is 16 bytes: a long pair header
        let mut ops = vec![
            // Same size: an empty value with a TTL (3 + 16 + 0 + 8 bytes) becomes an 8-byte
            // value without one (3 + 16 + 8).
            Op::SetExpiring(f16, 0, 50),
            Op::Set(f16, 3),
        ];
        // Past 128 bytes of pairs: the length varint grows (and the block with it).
        ops.extend((0..12).map(|i| Op::Set(i * 4 + 1, 2)));
        // A pair in the middle grows and shrinks (the pairs after it move right, then left).
        ops.extend([Op::Set(5, 6), Op::Set(5, 1)]);
        // A shorter value by one byte: the same 16-byte class (test_size_classes).
        ops.extend([Op::Set(9, 5), Op::Set(9, 4)]);
        // Back under 128 bytes: the varint shrinks with the block.
        ops.extend((0..12).map(|i| Op::Remove(i * 4 + 1)));
        splice_paths::take();
        // Another block allocated right after the entry's makes realloc move it to grow.
        let _neighbour = Entry::new_str(b"n", &[0; 40], None, false, 0);
        run_model(&ops, &l, false, None).unwrap();
        let big = [Op::Set(0, 10), Op::Set(4, 10), Op::Remove(0), Op::Remove(4)];
        let l = Limits {
            hash_max_listpack_value: 20_000,
            ..l
        };
        run_model(&big, &l, true, Some(5)).unwrap();
        let seen = splice_paths::take();
        assert_eq!(seen, splice_paths::ALL, "paths seen: {seen:#b}");
    }

    #[test]
    fn overwrite_in_place_only_for_the_same_layout() {
        let mut e = Entry::new_str(b"k", b"abc", None, false, 7);
        e.mark_not_int();
        let before = e.base();
        assert!(e.overwrite_str(b"xyz", None, 9));
        assert_eq!(e.base(), before);
        assert_eq!(
            (e.key(), e.str_value(), e.clock()),
            (&b"k"[..], &b"xyz"[..], 9)
        );
        assert!(!e.is_raw());
        assert_eq!(e.string_encoding(), "embstr");
        assert!(e.overwrite_str(b"123", None, 9));
        assert_eq!(e.string_encoding(), "int");
        // Other length, TTL added: refused, nothing changed.
        assert!(!e.overwrite_str(b"toolong", None, 1));
        assert!(!e.overwrite_str(b"abc", Some(5), 1));
        assert_eq!((e.str_value(), e.expire()), (&b"123"[..], None));
        let mut t = Entry::new_str(b"k", b"abc", Some(100), false, 0);
        assert!(t.overwrite_str(b"def", Some(200), 0));
        assert_eq!((t.str_value(), t.expire()), (&b"def"[..], Some(200)));
        assert!(!t.overwrite_str(b"def", None, 0));
        // Out of line values are never overwritten in place.
        let mut h = Entry::new_str(b"k", b"abc", None, false, 0);
        h.str_mut();
        assert!(!h.overwrite_str(b"abc", None, 0));
    }

    #[test]
    fn expire_set_change_and_clear() {
        let mut e = Entry::new_str(b"k", b"v", None, false, 0);
        e.set_expire(Some(1000));
        assert_eq!(e.expire(), Some(1000));
        assert!(!e.is_expired(1000));
        assert!(e.is_expired(1001));
        e.set_expire(Some(-5));
        assert_eq!(e.expire(), Some(-5));
        e.set_expire(None);
        assert_eq!(e.expire(), None);
        assert_eq!(e.key(), b"k");
        assert_eq!(e.str_value(), b"v");
    }

    #[test]
    fn str_mut_moves_out_of_line_and_keeps_ttl() {
        let mut e = Entry::new_str(b"k", b"abc", Some(99), false, 3);
        e.str_mut().extend_from_slice(b"def");
        assert_eq!(e.str_value(), b"abcdef");
        assert!(e.is_raw());
        assert_eq!(e.expire(), Some(99));
        e.str_mut().push(b'!');
        e.set_expire(None);
        assert_eq!(e.str_value(), b"abcdef!");
        let e2 = e.with_key(b"other");
        assert_eq!(e2.key(), b"other");
        assert_eq!(e2.str_value(), b"abcdef!");
        let c = e2.clone_as(b"copy");
        assert_eq!(c.str_value(), b"abcdef!");
        assert!(c.is_raw());
    }

    #[test]
    fn long_keys_and_values_use_multi_byte_varints() {
        let key = vec![b'k'; 300];
        let val = vec![0u8; 70_000];
        let e = Entry::new_str(&key, &val, Some(1), true, 0);
        assert_eq!(e.key(), &key[..]);
        assert_eq!(e.str_value(), &val[..]);
        assert!(e.is_raw());
    }

    proptest! {
        #[test]
        fn roundtrip(key in proptest::collection::vec(any::<u8>(), 0..300),
                     val in proptest::collection::vec(any::<u8>(), 0..600),
                     exp in proptest::option::of(any::<i64>()),
                     clock in any::<u16>(),
                     grow in proptest::collection::vec(any::<u8>(), 0..50)) {
            let mut e = Entry::new_str(&key, &val, exp, false, clock);
            prop_assert_eq!(e.key(), &key[..]);
            prop_assert_eq!(e.str_value(), &val[..]);
            prop_assert_eq!(e.expire(), exp);
            prop_assert_eq!(e.clock(), clock);
            e.str_mut().extend_from_slice(&grow);
            let mut want = val.clone();
            want.extend_from_slice(&grow);
            prop_assert_eq!(e.str_value(), &want[..]);
            prop_assert_eq!(e.key(), &key[..]);
            prop_assert_eq!(e.expire(), exp);
        }
    }
}
