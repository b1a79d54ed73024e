//! The keyspace table: extendible hashing over small open-addressing segments.
//!
//! Why not one big hash table? A single table doubles by rehashing every key at once: at ten
//! million keys that is a pause of hundreds of milliseconds in which the shard serves nobody.
//! Redis avoids the pause with incremental rehashing, which keeps two tables alive during the
//! move. Here the table is a directory of segments (Fagin et al., "Extendible hashing", 1979):
//! the top `global_depth` bits of a key's hash pick a directory slot, each slot names a segment,
//! and a segment that fills up splits in two by one more hash bit. A split moves at most
//! `MAX_BUCKETS * 6` entries, so the worst pause is bounded (a fraction of a millisecond, most of it
//! cache misses on the moved entries) whatever the
//! keyspace size, and no second table ever exists.
//!
//! Each segment is an open-addressing table of 64-byte buckets (seven tags and seven thin
//! entry pointers per cache line, see `bucket.rs`). A segment grows by doubling up to
//! `MAX_BUCKETS` buckets and splits instead of growing past that, so its load stays between
//! 43% and 86%.
//!
//! Iteration order (SCAN, the active expiry sweep) follows the top 32 bits of the hash: a key
//! always has the same position in that order whatever splits happen, so a cursor that is a
//! hash prefix never misses a key that stayed in the table for the whole iteration.
//!
//! **Snapshots without fork** (BGSAVE) use the same order. [`Table::snapshot_begin`] marks
//! the table as it is at that moment; [`Table::snapshot_step`] hands the entries at the
//! snapshot cursor to the snapshot's sink, a bounded number per step, between requests. A
//! change to the table before the cursor gets there would lose the old contents, so every
//! mutating entry point first calls `guard`: if the key is at or past the cursor and not yet
//! written, it goes to the sink first (serialize-before-write) and is recorded as written
//! early (`skip`), so the cursor passes it later; a key created at or past the cursor is
//! recorded the same way, since it was not there at the beginning. One key, not its
//! neighbours: a guard once wrote the whole unwritten part of the key's segment (up to
//! `MAX_BUCKETS * 6` entries), and a pipeline of writes to 50 segments of 1 KB values then
//! held the shard for 30 ms at the start of a BGSAVE (docs/benchmarks.md, "Snapshots").
//!
//! The cursor itself goes in position order a few keys at a time: it reads the keys of one
//! segment's position range (positions do not move when the segment splits later) and writes
//! them in steps, each looked up again by its key, so a step is bounded by the entries it
//! was asked for, not by a segment. Keys sharing a 32-bit position are written together, so
//! the cursor can pass their position.
//!
//! The record of early keys costs memory while the snapshot runs: one boxed key for each key
//! written or created ahead of the cursor (dropped as the cursor passes those that were
//! there at the beginning).

use crate::bucket::{self, Pos};
use crate::entry::Entry;
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// Buckets of a full-grown segment (896 slots, at most 768 used): a split moves at most that
/// many entries, which bounds the worst pause.
const MAX_BUCKETS: usize = 128;
/// The deepest a segment splits (beyond that it simply grows); 32 keeps cursors 32-bit.
const MAX_DEPTH: u32 = 32;

fn hasher() -> &'static foldhash::fast::RandomState {
    static H: OnceLock<foldhash::fast::RandomState> = OnceLock::new();
    H.get_or_init(foldhash::fast::RandomState::default)
}

/// What [`Table::upsert`] did.
pub enum Upsert {
    /// The existing entry was changed in place.
    Updated,
    /// The existing entry was replaced; here it is.
    Replaced(Entry),
    /// The key was absent.
    Inserted,
}

/// The table hash of a key (process-wide seed, random per process).
pub fn hash_key(key: &[u8]) -> u64 {
    hasher().hash_one(key)
}

/// The hash a segment sees. All keys of a segment share the top bits of `hash_key` (they
/// chose the segment), and the segment takes its 7-bit tag from the top bits: unmixed, every
/// probe would match every tag and compare keys. Multiplying by an odd constant keeps the low
/// bits (the bucket index) a bijection of the low bits, and spreads all bits into the top ones
/// (the tag).
fn slot_hash(h: u64) -> u64 {
    h.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn entry_hash(e: &Entry) -> u64 {
    slot_hash(hash_key(e.key()))
}

/// Slots a segment of `buckets` buckets may fill (live or tombstoned) before it rebuilds.
fn bucket_capacity(buckets: usize) -> usize {
    buckets * 6
}

/// Iteration position of a hash: its top 32 bits.
fn position(h: u64) -> u64 {
    h >> 32
}

/// The directory slot of hash `h` under global depth `g`.
fn dir_index(g: u32, h: u64) -> usize {
    if g == 0 {
        0
    } else {
        (h >> (64 - g)) as usize
    }
}

/// One past the last iteration position.
pub const SCAN_END: u64 = 1 << 32;

/// The outcome of [`Table::find_live`].
pub enum Found<'a> {
    Live(&'a mut Entry),
    /// The key was there but had expired; it has been removed and is handed back.
    Expired(Entry),
    /// The key has expired but expiry is frozen (CLIENT PAUSE): it stays, and reads as
    /// missing.
    Frozen,
    Missing,
}

struct Segment {
    depth: u32,
    table: bucket::Segment,
}

pub struct Table {
    dir: Vec<u32>,
    global_depth: u32,
    segments: Vec<Segment>,
    len: usize,
    /// A snapshot of this table being written (boxed: rare, and the table stays small).
    snapshot: Option<Box<SnapshotMark>>,
}

/// Receives each entry of a snapshot once, as it was when the snapshot began. `forced`:
/// the entry is about to change or go, so it must be written whole now; otherwise the sink
/// may return false to take it later, in steps of its own (a big value), and the table then
/// forces it only if a write comes first ([`Table::snapshot_undefer`] when it is done).
pub type SnapshotSink = Box<dyn FnMut(&Entry, bool) -> bool + Send>;

/// Where a snapshot of a table stands (see "Snapshots without fork" above).
struct SnapshotMark {
    /// Positions below this have been written.
    cursor: u64,
    /// Keys at or past `cursor` that the cursor must not write: written early by a guard
    /// (the key was about to change), or absent at the beginning (a guard saw the write that
    /// created them).
    skip: std::collections::HashSet<Box<[u8]>>,
    /// The keys of the position range the cursor is in (`cursor..range_end`, one segment's
    /// range when it was read), by position, from `next` on: what a step writes next. Each
    /// is its hash (the position is its top bits, and the lookup needs the rest) and where
    /// its bytes are in `keys`: one buffer for the range rather than a box per key, and no
    /// hashing again, since these were a fifth of a snapshot's CPU in a full sync.
    range: Vec<(u64, usize, usize)>,
    keys: Vec<u8>,
    next: usize,
    range_end: u64,
    /// Keys the sink took to write later in steps (big values), not written yet.
    deferred: std::collections::HashSet<Box<[u8]>>,
    sink: SnapshotSink,
}

impl SnapshotMark {
    /// Whether the key at position `p` has been written already (or is not the snapshot's).
    fn written(&self, p: u64, key: &[u8]) -> bool {
        p < self.cursor || self.skip.contains(key)
    }
}

impl Default for Table {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // A table thrown away whole (a small flushed database) still owes its snapshot the
        // entries not written yet.
        if self.snapshot.is_some() {
            self.snapshot_finish();
        }
    }
}

impl Table {
    /// Bytes the table itself takes (directory, segments and their buckets), not counting
    /// the entries it points to: MEMORY STATS' `overhead.hashtable.main`.
    pub fn overhead(&self) -> usize {
        self.dir.capacity() * 4
            + self
                .segments
                .iter()
                .map(|s| s.table.memory() + 4)
                .sum::<usize>()
    }

    /// Empties a table that is being thrown away (a flushed database) one segment at a time,
    /// from the back: hands the entries of the last `segments` segments to `f` and frees
    /// those segments. Returns true once nothing is left. The table is only fit to be dropped
    /// afterwards (its directory names freed segments).
    ///
    /// A snapshot in progress over the table (a database flushed during BGSAVE) gets each
    /// segment's entries it has not written yet before the segment goes, and ends with the
    /// table.
    pub fn drain_step(&mut self, segments: usize, mut f: impl FnMut(Entry)) -> bool {
        for _ in 0..segments {
            let Some(mut seg) = self.segments.pop() else {
                break;
            };
            if let Some(mark) = self.snapshot.as_mut() {
                for e in seg.table.iter() {
                    if !mark.written(position(hash_key(e.key())), e.key())
                        || mark.deferred.remove(e.key())
                    {
                        (mark.sink)(e, true);
                    }
                }
            }
            self.len -= seg.table.len();
            seg.table.remove_if(|_| true, &mut f);
        }
        if self.segments.is_empty() {
            self.snapshot = None;
        }
        self.segments.is_empty()
    }

    // ---- snapshots (see "Snapshots without fork" at the top) ----

    /// Marks the table as it is now as a snapshot to be written to `sink`, each entry once,
    /// by [`Table::snapshot_step`] and by the guards of the writes that come first. A
    /// snapshot still in progress is ended first (its remaining entries written).
    pub fn snapshot_begin(&mut self, sink: SnapshotSink) {
        self.snapshot_finish();
        self.snapshot = Some(Box::new(SnapshotMark {
            cursor: 0,
            skip: Default::default(),
            range: Vec::new(),
            keys: Vec::new(),
            next: 0,
            range_end: 0,
            deferred: Default::default(),
            sink,
        }));
    }

    /// Whether a snapshot of this table is in progress.
    pub fn snapshot_active(&self) -> bool {
        self.snapshot.is_some()
    }

    /// Writes the snapshot's entries from its cursor on, in position order, until about
    /// `count` were written (more only when several keys share a position). Returns true once
    /// the cursor has nothing more to write: the snapshot is then complete (the sink dropped),
    /// or only waits for the big values the sink took for later ([`Table::snapshot_undefer`]
    /// ends it once the last is written); true at once when none is in progress.
    ///
    /// The cursor reads the keys of one segment's position range at a time (the range stays
    /// the same when the segment splits meanwhile: positions do not move) and writes them a
    /// few at a time, each looked up by its key: a key of the range that changed since was
    /// written by its guard and is in `skip`, a key created since is not in the range.
    pub fn snapshot_step(&mut self, count: usize) -> bool {
        let mut written = 0;
        while written < count.max(1) {
            let Some(mark) = self.snapshot.as_deref_mut() else {
                return true;
            };
            if mark.next >= mark.range.len() {
                // The range is through: the next one.
                mark.cursor = mark.cursor.max(mark.range_end);
                mark.range.clear();
                mark.keys.clear();
                mark.next = 0;
                let cursor = mark.cursor;
                if cursor >= SCAN_END {
                    if mark.deferred.is_empty() {
                        self.snapshot = None;
                    }
                    return true;
                }
                let (s, end) = self.segment_at_position(cursor);
                let mark = self.snapshot.as_deref_mut().expect("checked");
                for e in self.segments[s].table.iter() {
                    let key = e.key();
                    let h = hash_key(key);
                    let p = position(h);
                    if p >= cursor && p < end {
                        mark.range.push((h, mark.keys.len(), key.len()));
                        mark.keys.extend_from_slice(key);
                    }
                }
                // By hash is by position (its top bits), keys of one position together.
                mark.range.sort_unstable_by_key(|x| x.0);
                mark.range_end = end;
                continue;
            }
            // The keys at the next position, all of them (so the cursor can pass it).
            let p = position(mark.range[mark.next].0);
            while mark.next < mark.range.len() && position(mark.range[mark.next].0) == p {
                let (h, at, len) = mark.range[mark.next];
                let key = &mark.keys[at..at + len];
                mark.next += 1;
                // Passed from now on: what a guard wrote is no longer needed here. (Most
                // snapshots see few writes: an empty set is not worth hashing the key for.)
                if !mark.skip.is_empty() && mark.skip.remove(key) {
                    continue;
                }
                let s = self.dir[dir_index(self.global_depth, h)] as usize;
                let seg = &self.segments[s].table;
                if let Some(at) = seg.find(slot_hash(h), key) {
                    if !(mark.sink)(seg.at(at), false) {
                        mark.deferred.insert(key.into());
                    }
                    written += 1;
                }
            }
            mark.cursor = p + 1;
        }
        false
    }

    /// The sink wrote the big value of `key` it had taken for later: the table stops
    /// forcing it before writes.
    pub fn snapshot_undefer(&mut self, key: &[u8]) {
        if let Some(mark) = self.snapshot.as_deref_mut() {
            mark.deferred.remove(key);
            if mark.deferred.is_empty() && mark.cursor >= SCAN_END && mark.next >= mark.range.len()
            {
                self.snapshot = None;
            }
        }
    }

    /// Hands `key` to the snapshot's sink now, ahead of the cursor and not forced, when the
    /// snapshot has not written it yet: a writer about to change a big value asks for it, so
    /// that the sink takes it for later (returns false) and the writer can wait while it is
    /// written in steps, instead of the write's guard serializing it whole in one go. Returns
    /// whether the key is now taken for later ([`Table::snapshot_undefer`] once written); a
    /// value the sink wrote at once (small after all) is recorded as written, as a guard
    /// would.
    pub fn snapshot_take(&mut self, key: &[u8]) -> bool {
        let h = hash_key(key);
        let Some(mark) = self.snapshot.as_deref() else {
            return false;
        };
        if mark.written(position(h), key) {
            return mark.deferred.contains(key);
        }
        let seg = &self.segments[self.segment_of(h)].table;
        let Some(at) = seg.find(slot_hash(h), key) else {
            return false;
        };
        let mark = self.snapshot.as_deref_mut().expect("checked");
        mark.skip.insert(key.into());
        if (mark.sink)(seg.at(at), false) {
            return false;
        }
        mark.deferred.insert(key.into());
        true
    }

    /// Ends the snapshot in progress without writing what it has not written yet (the save
    /// was stopped): its sink is dropped, writes no longer call it.
    pub fn snapshot_abort(&mut self) {
        self.snapshot = None;
    }

    /// Writes everything the snapshot in progress has not written yet, and ends it.
    pub fn snapshot_finish(&mut self) {
        while let Some(mark) = self.snapshot.as_deref() {
            if mark.cursor < SCAN_END || mark.next < mark.range.len() {
                self.snapshot_step(usize::MAX);
                continue;
            }
            // Big values taken for later: written whole now.
            let keys: Vec<Box<[u8]>> = mark.deferred.iter().cloned().collect();
            for k in keys {
                self.force(&k);
            }
            self.snapshot = None;
        }
    }

    /// Writes the deferred big value of `key` whole, now (it is about to change).
    fn force(&mut self, key: &[u8]) {
        let h = hash_key(key);
        let s = self.segment_of(h);
        let seg = &self.segments[s].table;
        let found = seg.find(slot_hash(h), key);
        let mark = self
            .snapshot
            .as_deref_mut()
            .expect("a snapshot is in progress");
        mark.deferred.remove(key);
        if let Some(p) = found {
            (mark.sink)(self.segments[s].table.at(p), true);
        }
    }

    /// Before a change to the key of hash `h`: if the snapshot in progress has not written
    /// the key yet, writes it now (if it exists) and records it as written. A key the write
    /// creates is recorded the same way: it was not there at the beginning.
    #[inline]
    fn guard(&mut self, h: u64, key: &[u8]) {
        if self.snapshot.is_some() {
            self.guard_slow(h, key);
        }
    }

    #[inline(never)]
    fn guard_slow(&mut self, h: u64, key: &[u8]) {
        let Some(mark) = self.snapshot.as_deref() else {
            return;
        };
        if mark.written(position(h), key) {
            if mark.deferred.contains(key) {
                self.force(key);
            }
            return;
        }
        let seg = &self.segments[self.segment_of(h)].table;
        // A key that is not there now was not there at the beginning either (its removal
        // would have been guarded): nothing to write. If the write creates it,
        // `insert_new` records it.
        if let Some(at) = seg.find(slot_hash(h), key) {
            let mark = self.snapshot.as_deref_mut().expect("checked");
            (mark.sink)(seg.at(at), true);
            mark.skip.insert(key.into());
        }
    }

    pub fn new() -> Table {
        Table {
            dir: vec![0],
            global_depth: 0,
            segments: vec![Segment {
                depth: 0,
                table: bucket::Segment::new(),
            }],
            len: 0,
            snapshot: None,
        }
    }

    /// Sizes an empty table for about `n` keys at once (a file's RESIZEDB hint at load):
    /// `2^d` full-grown segments of depth `d`, each about three quarters full at `n`, so the
    /// inserts that follow neither grow nor split segments (rehashing every entry). Does
    /// nothing on a table that holds anything or is being snapshotted. The caller bounds `n`
    /// (a hint from a file is not to be trusted); past 2^16 segments it is capped anyway.
    pub fn reserve(&mut self, n: usize) {
        if self.len != 0 || self.segments.len() != 1 || self.snapshot.is_some() {
            return;
        }
        let per = bucket_capacity(MAX_BUCKETS) * 3 / 4;
        if n <= per {
            let mut b = 1;
            while bucket_capacity(b) * 3 / 4 < n {
                b *= 2;
            }
            if self.segments[0].table.buckets() < b {
                self.segments[0].table = bucket::Segment::with_buckets(b);
            }
            return;
        }
        let mut d = 0u32;
        while (n >> d) > per && d < 16 {
            d += 1;
        }
        self.global_depth = d;
        self.dir = (0..1u32 << d).collect();
        self.segments = (0..1usize << d)
            .map(|_| Segment {
                depth: d,
                table: bucket::Segment::with_buckets(MAX_BUCKETS),
            })
            .collect();
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn dir_index(&self, h: u64) -> usize {
        dir_index(self.global_depth, h)
    }

    fn segment_of(&self, h: u64) -> usize {
        self.dir[self.dir_index(h)] as usize
    }

    /// Hints the CPU to load the bucket `key` would be in (see `bucket.rs`). Returns the
    /// key's hash, for [`Table::prefetch_entry`] a little later.
    pub fn prefetch(&self, key: &[u8]) -> u64 {
        let h = hash_key(key);
        self.segments[self.segment_of(h)]
            .table
            .prefetch(slot_hash(h));
        h
    }

    /// Hints the CPU to load the entry a key of hash `h` probably is (its bucket should be in
    /// cache by now, from [`Table::prefetch`]).
    pub fn prefetch_entry(&self, h: u64) {
        self.segments[self.segment_of(h)]
            .table
            .prefetch_entry(slot_hash(h));
    }

    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        let h = hash_key(key);
        let seg = &self.segments[self.segment_of(h)].table;
        seg.find(slot_hash(h), key).map(|p| seg.at(p))
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let h = hash_key(key);
        self.guard(h, key);
        let s = self.segment_of(h);
        let seg = &mut self.segments[s].table;
        let p = seg.find(slot_hash(h), key)?;
        Some(seg.at_mut(p))
    }

    /// Finds `key` for a command running at `now_ms`, removing it first if it has expired
    /// (unless it is one of the `pinned` keys, which stay while something reads them): one
    /// hash and one probe on the hot path (GET, SET's lookup, INCR).
    /// While `frozen(now_ms)` says so, an expired key is left in place ([`Found::Frozen`]);
    /// it is asked only when the key has expired.
    pub fn find_live(
        &mut self,
        key: &[u8],
        now_ms: i64,
        pinned: &[Box<[u8]>],
        frozen: impl FnOnce(i64) -> bool,
    ) -> Found<'_> {
        let h = hash_key(key);
        self.guard(h, key);
        let s = self.segment_of(h);
        let seg = &mut self.segments[s].table;
        let Some(p) = seg.find(slot_hash(h), key) else {
            return Found::Missing;
        };
        if seg.at(p).is_expired(now_ms) && !pinned.iter().any(|k| **k == *key) {
            if frozen(now_ms) {
                return Found::Frozen;
            }
            self.len -= 1;
            Found::Expired(seg.take(p))
        } else {
            Found::Live(seg.at_mut(p))
        }
    }

    /// Updates the entry for `key` in place when `update` agrees (returns true), otherwise puts
    /// `make()` in its place, or inserts it when the key is absent. One probe either way.
    pub fn upsert(
        &mut self,
        key: &[u8],
        update: impl FnOnce(&mut Entry) -> bool,
        make: impl FnOnce() -> Entry,
    ) -> Upsert {
        let h = hash_key(key);
        self.guard(h, key);
        let s = self.segment_of(h);
        if let Some(p) = self.segments[s].table.find(slot_hash(h), key) {
            let e = self.segments[s].table.at_mut(p);
            if update(e) {
                return Upsert::Updated;
            }
            return Upsert::Replaced(std::mem::replace(e, make()));
        }
        self.insert_new(h, s, make());
        Upsert::Inserted
    }

    /// Inserts `e`, replacing (and returning) an entry with the same key. One probe, unless the
    /// segment must grow or split first.
    pub fn insert(&mut self, e: Entry) -> Option<Entry> {
        let h = hash_key(e.key());
        self.guard(h, e.key());
        let sh = slot_hash(h);
        let s = self.segment_of(h);
        if let Some(p) = self.segments[s].table.find(sh, e.key()) {
            return Some(std::mem::replace(self.segments[s].table.at_mut(p), e));
        }
        self.insert_new(h, s, e);
        None
    }

    /// Inserts `e` unless an entry has its key (expired or not): one probe. Gives `e` back,
    /// nothing changed, if one has.
    pub fn insert_absent(&mut self, e: Entry) -> Result<(), Entry> {
        let h = hash_key(e.key());
        self.guard(h, e.key());
        let s = self.segment_of(h);
        if self.segments[s].table.find(slot_hash(h), e.key()).is_some() {
            return Err(e);
        }
        self.insert_new(h, s, e);
        Ok(())
    }

    /// Inserts `e`, whose key (hash `h`, in segment `s`) is known to be absent.
    fn insert_new(&mut self, h: u64, mut s: usize, e: Entry) {
        let sh = slot_hash(h);
        if let Some(mark) = self.snapshot.as_deref_mut() {
            // Created after the beginning, where the cursor has yet to pass: not the
            // snapshot's.
            if !mark.written(position(h), e.key()) {
                mark.skip.insert(e.key().into());
            }
        }
        if self.segments[s].table.full() {
            let seg = &mut self.segments[s];
            let (buckets, len) = (seg.table.buckets(), seg.table.len());
            if buckets < MAX_BUCKETS {
                // Grow; a segment mostly full of tombstones is rebuilt at its size instead.
                let size = if len * 2 < bucket_capacity(buckets) {
                    buckets
                } else {
                    (buckets * 2).max(1)
                };
                seg.table.rebuild(size.max(1), entry_hash);
            } else if len * 4 >= bucket_capacity(buckets) * 3 && seg.depth < MAX_DEPTH {
                self.split(s, h);
                s = self.segment_of(h);
            } else {
                seg.table.rebuild(buckets, entry_hash);
            }
        }
        self.segments[s].table.insert_absent(sh, e);
        self.len += 1;
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let h = hash_key(key);
        self.guard(h, key);
        let s = self.segment_of(h);
        let seg = &mut self.segments[s].table;
        let p: Pos = seg.find(slot_hash(h), key)?;
        self.len -= 1;
        Some(seg.take(p))
    }

    /// Splits segment `s` (which contains hash `h`) by one more hash bit.
    fn split(&mut self, s: usize, h: u64) {
        let depth = self.segments[s].depth;
        if depth == self.global_depth {
            // Double the directory: slot i of the new one is slot i/2 of the old one.
            let old = std::mem::take(&mut self.dir);
            self.dir = old.iter().flat_map(|&x| [x, x]).collect();
            self.global_depth += 1;
        }
        let g = self.global_depth;
        let new_depth = depth + 1;
        // The directory slots that point at s form one aligned run of 2^(g - depth) slots.
        let run = 1usize << (g - depth);
        let start = self.dir_index(h) & !(run - 1);
        let new_index = self.segments.len() as u32;
        for slot in &mut self.dir[start + run / 2..start + run] {
            *slot = new_index;
        }
        let bit = 63 - depth; // the hash bit that now tells the halves apart
        let mut low = bucket::Segment::with_buckets(MAX_BUCKETS);
        let mut high = bucket::Segment::with_buckets(MAX_BUCKETS);
        let old = std::mem::replace(&mut self.segments[s].table, bucket::Segment::new());
        for e in old.into_entries() {
            let eh = hash_key(e.key());
            if (eh >> bit) & 1 == 1 {
                high.insert_absent(slot_hash(eh), e);
            } else {
                low.insert_absent(slot_hash(eh), e);
            }
        }
        self.segments[s] = Segment {
            depth: new_depth,
            table: low,
        };
        self.segments.push(Segment {
            depth: new_depth,
            table: high,
        });
    }

    /// The segment covering iteration position `pos`, with the end of its position range.
    fn segment_at_position(&self, pos: u64) -> (usize, u64) {
        let g = self.global_depth;
        let idx = if g == 0 {
            0
        } else {
            (pos >> (32 - g)) as usize
        };
        let s = self.dir[idx] as usize;
        let d = self.segments[s].depth;
        let width = 1u64 << (32 - d);
        let start = pos & !(width - 1);
        (s, start + width)
    }

    /// One SCAN step from position `cursor` (0 starts; `SCAN_END` means done): calls `f` on
    /// roughly `count` entries (never splitting a run of equal positions) and returns the next
    /// position. Entries present for the whole iteration are visited exactly once.
    pub fn scan(&self, mut cursor: u64, count: usize, mut f: impl FnMut(&Entry)) -> u64 {
        let count = count.max(1);
        let mut emitted = 0usize;
        let mut found: Vec<(u64, &Entry)> = Vec::new();
        while cursor < SCAN_END && emitted < count {
            let (s, end) = self.segment_at_position(cursor);
            found.clear();
            for e in self.segments[s].table.iter() {
                let p = position(hash_key(e.key()));
                if p >= cursor && p < end {
                    found.push((p, e));
                }
            }
            let want = count - emitted;
            if found.len() <= want {
                for (_, e) in &found {
                    f(e);
                }
                emitted += found.len();
                cursor = end;
            } else {
                // Take the `want` lowest positions, plus every entry sharing the last one.
                found.select_nth_unstable_by_key(want - 1, |x| x.0);
                let pivot = found[want - 1].0;
                for (p, e) in &found {
                    if *p <= pivot {
                        f(e);
                        emitted += 1;
                    }
                }
                cursor = pivot + 1;
            }
        }
        cursor
    }

    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.segments.iter().flat_map(|s| s.table.iter())
    }

    /// Visits segments starting at segment `start` (wrapping), removing entries for which
    /// `remove` returns true, until about `budget` entries have been looked at. Removed entries
    /// are handed to `removed`. Returns the segment to resume from and how many were visited.
    pub fn sweep(
        &mut self,
        start: usize,
        budget: usize,
        mut remove: impl FnMut(&Entry) -> bool,
        mut removed: impl FnMut(Entry),
    ) -> (usize, usize) {
        let n = self.segments.len();
        let mut s = start % n;
        let mut visited = 0;
        for _ in 0..n {
            // A snapshot in progress gets what this segment would lose first (`remove` is
            // asked twice then: it must be a plain test).
            if self.snapshot.is_some() {
                let doomed: Vec<Box<[u8]>> = self.segments[s]
                    .table
                    .iter()
                    .filter(|e| remove(e))
                    .map(|e| e.key().into())
                    .collect();
                for k in doomed {
                    self.guard(hash_key(&k), &k);
                }
            }
            let seg = &mut self.segments[s];
            visited += seg.table.len();
            let before = seg.table.len();
            seg.table.remove_if(&mut remove, &mut removed);
            self.len -= before - seg.table.len();
            s = (s + 1) % n;
            if visited >= budget {
                break;
            }
        }
        (s, visited)
    }

    /// Visits the entries of random buckets (`r` seeds the choice) until `want` of them were
    /// accepted by `f` or `max_buckets` buckets were looked at (the eviction sampler, as
    /// Redis's dictGetSomeKeys). Returns how many were accepted.
    ///
    /// Each bucket is drawn on its own: a random hash picks the segment through the directory
    /// (so a segment is drawn in proportion to the hash range it covers, which is its share of
    /// new keys), then a bucket in it. An entry is then sampled in proportion to how crowded
    /// its segment is, and eviction takes keys from each segment in proportion to the keys
    /// it holds, as inserts bring them: segment loads stay even under churn. Taking `want`
    /// entries from one place instead evicted as much from a sparse segment as from a full
    /// one, and the full ones kept splitting (3x the table's overhead after a few million
    /// evictions).
    pub fn sample(
        &self,
        mut r: u64,
        want: usize,
        max_buckets: usize,
        mut f: impl FnMut(&Entry) -> bool,
    ) -> usize {
        if self.len == 0 || self.segments.is_empty() {
            return 0;
        }
        let mut taken = 0;
        for _ in 0..max_buckets.max(1) {
            r = r
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let h = r ^ (r >> 29);
            let seg = &self.segments[self.segment_of(h)].table;
            let b = seg.buckets();
            if b > 0 && !seg.is_empty() {
                for e in seg.bucket(((h >> 17) % b as u64) as usize) {
                    if f(e) {
                        taken += 1;
                    }
                }
            }
            if taken >= want {
                break;
            }
        }
        taken
    }

    /// A pseudo-random entry, given a random number (uniform enough for RANDOMKEY).
    pub fn random(&self, mut r: u64) -> Option<&Entry> {
        if self.len == 0 {
            return None;
        }
        let n = self.segments.len();
        for _ in 0..n {
            let seg = &self.segments[(r % n as u64) as usize];
            if !seg.table.is_empty() {
                let i = ((r >> 20) % seg.table.len() as u64) as usize;
                return seg.table.nth(i);
            }
            r = r
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        }
        self.iter().next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, HashSet};
    use std::sync::{Arc, Mutex};

    #[derive(Debug, Clone)]
    enum SnapOp {
        Insert(u16, u8),
        Remove(u16),
        Modify(u16, u8),
        Upsert(u16, u8),
        Sweep(u8),
        Step(u8),
        /// A writer asks for a key ahead of the cursor (`snapshot_take`).
        Take(u16),
    }

    fn snap_op() -> impl Strategy<Value = SnapOp> {
        prop_oneof![
            (0u16..3000, any::<u8>()).prop_map(|(k, v)| SnapOp::Insert(k, v)),
            (0u16..3000).prop_map(SnapOp::Remove),
            (0u16..3000, any::<u8>()).prop_map(|(k, v)| SnapOp::Modify(k, v)),
            (0u16..3000, any::<u8>()).prop_map(|(k, v)| SnapOp::Upsert(k, v)),
            any::<u8>().prop_map(SnapOp::Sweep),
            (1u8..200).prop_map(SnapOp::Step),
            (0u16..3000).prop_map(SnapOp::Take),
        ]
    }

    fn key(k: u16) -> Vec<u8> {
        format!("key:{k}").into_bytes()
    }

    #[test]
    fn reserved_table_takes_its_keys_without_growing_and_scans_them_all() {
        for n in [0usize, 1, 100, 576, 577, 5000, 200_000] {
            let mut t = Table::new();
            t.reserve(n);
            let (segments, buckets) = (t.segments.len(), t.segments[0].table.buckets());
            for i in 0..n {
                let k = format!("k{i}");
                assert!(t
                    .insert_absent(Entry::new_str(k.as_bytes(), b"v", None, false, 0))
                    .is_ok());
            }
            assert_eq!(t.len(), n);
            if n > 0 {
                assert_eq!(t.segments.len(), segments, "no split at {n}");
                assert_eq!(t.segments[0].table.buckets(), buckets, "no growth at {n}");
            }
            for i in (0..n).step_by(97) {
                assert!(t.get(format!("k{i}").as_bytes()).is_some());
            }
            let mut seen = 0;
            let mut c = 0;
            loop {
                c = t.scan(c, 1000, |_| seen += 1);
                if c == SCAN_END {
                    break;
                }
            }
            assert_eq!(seen, n);
        }
    }

    #[test]
    fn reserve_leaves_a_table_with_keys_alone() {
        let mut t = Table::new();
        t.insert(Entry::new_str(b"a", b"1", None, false, 0));
        t.reserve(1_000_000);
        assert_eq!(t.segments.len(), 1);
        assert!(t.get(b"a").is_some());
    }

    /// Runs `ops` on `t` while a snapshot is in progress (begun on `t` as it is), then
    /// finishes it (by steps, by a flush drained in steps, or by dropping the table), and
    /// checks the snapshot got exactly the contents at its beginning, each key once.
    fn check_snapshot(mut t: Table, ops: &[SnapOp], end: u8) -> Result<(), TestCaseError> {
        let before: BTreeMap<Vec<u8>, Vec<u8>> = t
            .iter()
            .map(|e| (e.key().to_vec(), e.str_value().to_vec()))
            .collect();
        type Written = Vec<(Vec<u8>, Vec<u8>)>;
        let got: Arc<Mutex<Written>> = Arc::default();
        // Entries whose value starts with a multiple of 5 play big values: the sink takes
        // them for later (unless forced) and the test's steps write them one at a time.
        let pending: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let (sink, later) = (got.clone(), pending.clone());
        t.snapshot_begin(Box::new(move |e: &Entry, forced| {
            let big = e.str_value().first().is_some_and(|b| b % 5 == 0);
            let mut later = later.lock().unwrap();
            if big && !forced && !later.iter().any(|k| k == e.key()) {
                later.push(e.key().to_vec());
                return false;
            }
            later.retain(|k| k != e.key());
            sink.lock()
                .unwrap()
                .push((e.key().to_vec(), e.str_value().to_vec()));
            true
        }));
        let write_later = |t: &mut Table, got: &Arc<Mutex<Written>>| {
            let k = pending.lock().unwrap().pop();
            if let Some(k) = k {
                let e = t.get(&k).expect("a deferred key stays until forced");
                got.lock()
                    .unwrap()
                    .push((k.clone(), e.str_value().to_vec()));
                t.snapshot_undefer(&k);
            }
        };
        for op in ops {
            match op {
                SnapOp::Insert(k, v) => {
                    t.insert(e(&key(*k), &[*v]));
                }
                SnapOp::Remove(k) => {
                    t.remove(&key(*k));
                }
                SnapOp::Modify(k, v) => {
                    if let Some(x) = t.get_mut(&key(*k)) {
                        *x = e(&key(*k), &[*v, *v]);
                    }
                }
                SnapOp::Upsert(k, v) => {
                    t.upsert(&key(*k), |_| false, || e(&key(*k), &[*v, 1]));
                }
                SnapOp::Sweep(m) => {
                    let m = *m;
                    t.sweep(
                        m as usize,
                        500,
                        |x| x.str_value().first() == Some(&m),
                        |_| {},
                    );
                }
                SnapOp::Step(n) => {
                    t.snapshot_step(*n as usize);
                    write_later(&mut t, &got);
                }
                SnapOp::Take(k) => {
                    // Taken for later exactly when the sink still has it to write.
                    let taken = t.snapshot_take(&key(*k));
                    let pending = pending.lock().unwrap().contains(&key(*k));
                    prop_assert_eq!(taken, pending);
                }
            }
        }
        match end % 3 {
            0 => {
                while t.snapshot_active() {
                    t.snapshot_step(64);
                    write_later(&mut t, &got);
                }
            }
            1 => while !t.drain_step(1, |_| {}) {},
            _ => drop(t),
        }
        let got = got.lock().unwrap();
        let keys: HashSet<&Vec<u8>> = got.iter().map(|(k, _)| k).collect();
        prop_assert_eq!(keys.len(), got.len(), "a key written twice");
        let got: BTreeMap<Vec<u8>, Vec<u8>> = got.iter().cloned().collect();
        prop_assert_eq!(got, before);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn a_snapshot_holds_the_table_as_it_was_whatever_changes_meanwhile(
            n in prop_oneof![0usize..10, 100usize..3000],
            ops in prop::collection::vec(snap_op(), 0..400),
            end in any::<u8>(),
        ) {
            let mut t = Table::new();
            for k in 0..n as u16 {
                t.insert(e(&key(k), &[k as u8]));
            }
            check_snapshot(t, &ops, end)?;
        }
    }

    #[test]
    fn a_snapshot_after_a_snapshot_starts_over_and_steps_are_bounded() {
        let mut t = Table::new();
        for k in 0..5000u16 {
            t.insert(e(&key(k), b"v"));
        }
        let n: Arc<Mutex<usize>> = Arc::default();
        let c = n.clone();
        t.snapshot_begin(Box::new(move |_, _| {
            *c.lock().unwrap() += 1;
            true
        }));
        assert!(!t.snapshot_step(10));
        // A step writes what it was asked for (more only for keys sharing a position), not a
        // whole segment range.
        assert!(*n.lock().unwrap() < 10 + 4);
        t.snapshot_finish();
        assert_eq!(*n.lock().unwrap(), 5000);
        assert!(!t.snapshot_active() && t.snapshot_step(1));
    }

    fn e(k: &[u8], v: &[u8]) -> Entry {
        Entry::new_str(k, v, None, false, 0)
    }

    /// A write ahead of the cursor writes its own key first, not the unwritten part of its
    /// segment (a whole segment a write held a shard for tens of ms at a BGSAVE's start);
    /// each step writes about what it was asked for; every key once in the end.
    #[test]
    fn a_write_ahead_of_the_cursor_writes_only_its_key_and_steps_stay_small() {
        let mut t = Table::new();
        for k in 0..20_000u16 {
            t.insert(e(&key(k), b"v"));
        }
        let n: Arc<Mutex<usize>> = Arc::default();
        let c = n.clone();
        t.snapshot_begin(Box::new(move |_, _| {
            *c.lock().unwrap() += 1;
            true
        }));
        let count = || *n.lock().unwrap();
        for k in (0..20_000u16).step_by(97) {
            let before = count();
            t.insert(e(&key(k), b"w"));
            assert!(count() - before <= 1, "a write wrote {}", count() - before);
            // A key created now is not the snapshot's.
            let before = count();
            t.insert(e(format!("new:{k}").as_bytes(), b"x"));
            assert_eq!(count(), before);
            let before = count();
            t.snapshot_step(16);
            assert!(
                count() - before < 16 + 4,
                "a step wrote {}",
                count() - before
            );
        }
        t.snapshot_finish();
        assert_eq!(count(), 20_000);
    }

    #[test]
    fn sampling_finds_entries_everywhere() {
        let mut t = Table::new();
        let mut r = 0x1234_5678_9abc_def1u64;
        for n in [1usize, 10, 1000, 50_000] {
            while t.len() < n {
                t.insert(e(format!("key:{}", t.len()).as_bytes(), b"v"));
            }
            let mut seen = HashSet::new();
            for _ in 0..2000 {
                r ^= r << 13;
                r ^= r >> 7;
                r ^= r << 17;
                let got = t.sample(r, 5, 64, |e| {
                    seen.insert(e.key().to_vec());
                    true
                });
                assert!(got >= 5.min(n), "{n}: {got}");
            }
            // Spread over the table, not stuck in one place.
            assert!(seen.len() >= n.min(2000), "{n}: {}", seen.len());
        }
    }

    #[test]
    fn grows_through_many_splits() {
        let mut t = Table::new();
        for i in 0..100_000u32 {
            assert!(t.insert(e(format!("key:{i}").as_bytes(), b"v")).is_none());
        }
        assert_eq!(t.len(), 100_000);
        assert!(t.segments.len() > 16);
        // Full-grown segments split rather than grow.
        assert!(t.segments.iter().all(|s| s.table.buckets() <= MAX_BUCKETS));
        for i in 0..100_000u32 {
            assert!(t.get(format!("key:{i}").as_bytes()).is_some());
        }
        for i in (0..100_000u32).step_by(2) {
            assert!(t.remove(format!("key:{i}").as_bytes()).is_some());
        }
        assert_eq!(t.len(), 50_000);
        assert_eq!(t.iter().count(), 50_000);
    }

    #[test]
    fn scan_visits_every_key_once() {
        let mut t = Table::new();
        for i in 0..20_000u32 {
            t.insert(e(format!("k{i}").as_bytes(), b""));
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut calls = 0;
        loop {
            cursor = t.scan(cursor, 10, |x| assert!(seen.insert(x.key().to_vec())));
            calls += 1;
            if cursor >= SCAN_END {
                break;
            }
        }
        assert_eq!(seen.len(), 20_000);
        assert!(calls > 1000);
    }

    #[test]
    fn scan_survives_splits_during_iteration() {
        let mut t = Table::new();
        for i in 0..5_000u32 {
            t.insert(e(format!("old{i}").as_bytes(), b""));
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut n = 0u32;
        while cursor < SCAN_END {
            let mut batch = Vec::new();
            cursor = t.scan(cursor, 50, |x| batch.push(x.key().to_vec()));
            seen.extend(batch);
            for _ in 0..100 {
                t.insert(e(format!("new{n}").as_bytes(), b""));
                n += 1;
            }
        }
        for i in 0..5_000u32 {
            assert!(seen.contains(format!("old{i}").as_bytes()));
        }
    }

    #[test]
    fn sweep_removes_matching_entries() {
        let mut t = Table::new();
        for i in 0..10_000u32 {
            t.insert(e(
                format!("k{i}").as_bytes(),
                if i % 3 == 0 { b"x" } else { b"y" },
            ));
        }
        let mut gone = 0;
        let mut pos = 0;
        let mut total = 0;
        while total < 10_000 {
            let (next, visited) = t.sweep(pos, 1000, |x| x.str_value() == b"x", |_| gone += 1);
            pos = next;
            total += visited;
        }
        assert_eq!(gone, 3334);
        assert_eq!(t.len(), 10_000 - 3334);
    }

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((0u8..4, 0u16..2000, any::<u8>()), 1..3000)) {
            let mut t = Table::new();
            let mut m = BTreeMap::new();
            for (op, k, v) in ops {
                let key = format!("{k}").into_bytes();
                match op {
                    0 => {
                        let old = t.insert(e(&key, &[v])).map(|x| x.str_value().to_vec());
                        prop_assert_eq!(old, m.insert(key, vec![v]));
                    }
                    1 => {
                        let old = t.remove(&key).map(|x| x.str_value().to_vec());
                        prop_assert_eq!(old, m.remove(&key));
                    }
                    2 => {
                        // Values of one or two bytes: in place for the same length, else replaced.
                        let val = if v % 2 == 0 { vec![v] } else { vec![v, v] };
                        let done = t.upsert(&key, |x| x.overwrite_str(&val, None, 0), || e(&key, &val));
                        let was = m.insert(key, val);
                        match done {
                            Upsert::Inserted => prop_assert!(was.is_none()),
                            Upsert::Updated => prop_assert_eq!(was.map(|w| w.len()), Some(1 + (v % 2) as usize)),
                            Upsert::Replaced(old) => prop_assert_eq!(Some(old.str_value().to_vec()), was),
                        }
                    }
                    _ => {
                        let got = t.get(&key).map(|x| x.str_value().to_vec());
                        prop_assert_eq!(got.as_ref(), m.get(&key));
                    }
                }
                prop_assert_eq!(t.len(), m.len());
            }
            prop_assert_eq!(t.iter().count(), m.len());
        }
    }
}
