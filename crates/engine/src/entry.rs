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
//! **Small hashes inline.** A million 10-field hashes is the typical "object per key" cache,
//! and there the boxed `Value` (32 bytes) was a fifth of the cost. A listpack hash is
//! therefore kept inside the entry's block: `hash:00000001` with ten `member:<j> -> <number>`
//! pairs is ONE 128-byte block (2 clock + 14 key + 2 header + ~109 pairs) plus the table slot,
//! about 153 bytes a key against Redis's 207. Readers get a [`HashRef`] borrowed from the
//! block. A write goes through [`Entry::hash_mut`]: the guard rebuilds an owned [`Hash`] from
//! the bytes, the command changes it, and dropping the guard writes the new listpack back into
//! a fresh block (or, once it converted, boxes the table). That is one extra copy of a buffer
//! of at most a few KiB per write command, in exchange for one allocation per key instead of
//! three. A read-only guard (a type check, nothing expired) leaves the block untouched, and a
//! change that keeps the listpack's length is written back in place. The copy costs a
//! single-key HSET loop ~15-20% (docs/benchmarks.md); editing the listpack directly inside
//! the block (the pair functions of types/hash.rs working on a `&mut [u8]` region, growing the
//! block with `realloc`) would remove it.

use crate::types::{Hash, HashRef, List, Set, ZSet};
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

    /// Length of the block, read from its header.
    fn block_len(&self) -> usize {
        let flags = self.flags();
        let p = self.base();
        let read_varint = |pos: &mut usize| {
            let mut v = 0usize;
            let mut shift = 0;
            loop {
                // SAFETY: the block was written by `build` with a consistent header; varints are
                // read byte by byte and never past the end the header itself implies.
                let byte = unsafe { *p.add(*pos) };
                *pos += 1;
                v |= ((byte & 0x7f) as usize) << shift;
                if byte & 0x80 == 0 {
                    return v;
                }
                shift += 7;
            }
        };
        let mut pos = EXPIRE_AT;
        if flags & HAS_EXPIRE != 0 {
            pos += 8;
        }
        let klen = read_varint(&mut pos);
        pos += klen;
        match flags & (HEAP | PACK) {
            HEAP => pos + 8,
            k if k == HEAP | PACK => {
                read_varint(&mut pos);
                let blen = read_varint(&mut pos);
                pos + blen
            }
            _ => {
                let vlen = read_varint(&mut pos);
                pos + vlen
            }
        }
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
        let b = self.block();
        let mut p = self.payload_at(b);
        let meta = get_varint(b, &mut p);
        let blen = get_varint(b, &mut p);
        Some(HashRef::Pack {
            buf: &b[p..p + blen],
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
    /// rebuilt as a [`Hash`] for the guard's lifetime and put back into the block when the
    /// guard drops (only if it changed); a table is written in place.
    pub fn hash_mut(&mut self) -> Option<HashMut<'_>> {
        let inline = match self.pack() {
            Some(HashRef::Pack { buf, len, ex }) => Some(Hash::from_pack(buf, len, ex)),
            _ if self.value_type() == ValueType::Hash => None,
            _ => return None,
        };
        Some(HashMut {
            entry: self,
            inline,
        })
    }

    /// Writes a listpack over the inline one when the block keeps its layout (same byte
    /// length, same header size: an update of a value by one of the same length, HINCRBY
    /// 1 -> 2): no allocation. Returns false, changing nothing, otherwise.
    fn overwrite_pack(&mut self, buf: &[u8], len: u32, ex: bool) -> bool {
        if !self.is_pack() {
            return false;
        }
        let flags = self.flags();
        let b = self.block_mut();
        let meta_at = parts_of(b, flags).key_end;
        let mut p = meta_at;
        let old_meta = get_varint(b, &mut p);
        let blen = get_varint(b, &mut p);
        let meta = pack_meta(len, ex);
        if blen != buf.len() || varint_len(old_meta) != varint_len(meta) {
            return false;
        }
        let (mut v, mut at) = (meta, meta_at);
        while v >= 0x80 {
            b[at] = (v as u8) | 0x80;
            v >>= 7;
            at += 1;
        }
        b[at] = v as u8;
        b[p..p + blen].copy_from_slice(buf);
        true
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

/// A hash being written (see [`Entry::hash_mut`]); derefs to the [`Hash`].
pub struct HashMut<'a> {
    entry: &'a mut Entry,
    /// The rebuilt listpack of an inline hash; None: the hash is boxed in the entry.
    inline: Option<Hash>,
}

impl std::ops::Deref for HashMut<'_> {
    type Target = Hash;
    fn deref(&self) -> &Hash {
        match &self.inline {
            Some(h) => h,
            None => match self.entry.heap() {
                Some(Value::Hash(h)) => h,
                _ => unreachable!("hash_mut checked the type"),
            },
        }
    }
}

impl std::ops::DerefMut for HashMut<'_> {
    fn deref_mut(&mut self) -> &mut Hash {
        match &mut self.inline {
            Some(h) => h,
            None => match self.entry.value_mut() {
                Some(Value::Hash(h)) => h,
                _ => unreachable!("hash_mut checked the type"),
            },
        }
    }
}

impl Drop for HashMut<'_> {
    fn drop(&mut self) {
        match self.inline.take() {
            Some(h) => {
                // A read-only use (a type check, nothing expired) costs no rebuild, nor does
                // a change that keeps the listpack's length.
                if same_pack(self.entry.pack(), &h) {
                    return;
                }
                if let Hash::Pack { buf, len, ex } = &h {
                    if self.entry.overwrite_pack(buf, *len, *ex) {
                        return;
                    }
                }
                self.entry.store_hash(h);
            }
            None => {
                // A listpack that `value_mut` moved out of line goes back inline.
                if matches!(self.entry.heap(), Some(Value::Hash(Hash::Pack { .. }))) {
                    if let Value::Hash(h) = *self.entry.take_heap() {
                        self.entry.store_hash(h);
                    }
                }
            }
        }
    }
}

/// Whether an inline listpack has exactly `h`'s bytes and flags.
fn same_pack(inline: Option<HashRef<'_>>, h: &Hash) -> bool {
    match (inline, h.view()) {
        (
            Some(HashRef::Pack { buf, len, ex }),
            HashRef::Pack {
                buf: b2,
                len: l2,
                ex: e2,
            },
        ) => buf == b2 && len == l2 && ex == e2,
        _ => false,
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
        drop(c.hash_mut());
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
