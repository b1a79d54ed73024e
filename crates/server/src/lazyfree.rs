//! Freeing big values off the request path (Redis's "lazyfree"), in steps on the shard's own
//! thread.
//!
//! Freeing a collection of millions of elements means hundreds of thousands of `free` calls:
//! tens to hundreds of milliseconds during which a thread that did it at once would serve
//! nobody. So a big value that leaves the keyspace (DEL, UNLINK, an overwrite, expiry, a
//! FLUSHALL's tables) is only unlinked on the request path: the engine puts its entry in the
//! database's graveyard, and the worker moves graveyards into its shard's [`Dying`] queue at
//! the end of each loop turn. Each turn then frees a slice of that queue, about
//! [`STEP_TIME`] of work (the value's storage is dropped from the back: buckets, nodes,
//! segments), and the loop does not sleep while the queue holds anything.
//!
//! Why on the shard's thread and not a background thread, as Redis does: the memory belongs
//! to the shard thread's allocator heap. Blocks freed by another thread are only marked
//! (mimalloc's thread-free lists), and the owner takes them back as it allocates, so after a
//! big DEL an idle server kept the whole value resident (335 MB for a freed 5M-field hash,
//! until other work reused it), and any attempt to collect them at once walked every block
//! (35 ms in one turn). Freed here, the blocks go straight back to their pages and empty
//! pages back to the system. The cost is the same CPU time, spent between requests on this
//! thread instead of on another core.
//!
//! Darner does this whatever the `lazyfree-lazy-*` directives say: Redis's synchronous mode
//! only exists to avoid its background thread's overhead, and blocking all clients to free
//! a big key is exactly what Darner promises never to do.

use crate::cmd::server::Metrics;
use darner_engine::db::LAZYFREE_THRESHOLD;
use darner_engine::table::Table;
use darner_engine::Entry;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The work of one step (one step per loop turn).
pub const STEP_TIME: Duration = Duration::from_micros(200);
/// Allocations freed between two looks at the clock. Small because a free may give pages
/// back to the system (`madvise`, several µs each) while a shard frees in steps (see
/// `alloc::begin_bulk_free`): 256 made some steps last 1.3 ms instead of 0.2.
const FREES_PER_CHECK: usize = 32;

/// The big values and flushed tables a shard is freeing, with the number of objects each
/// counts for INFO's `lazyfree_pending_objects` / `lazyfreed_objects` (as Redis counts them:
/// one per value, a flushed table's keys).
#[derive(Default)]
pub struct Dying {
    entries: VecDeque<(Entry, u64)>,
    tables: Vec<(Table, u64)>,
}

impl Dying {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.tables.is_empty()
    }

    /// Queues big entries (a database's graveyard).
    pub fn push_entries(&mut self, metrics: &Metrics, entries: Vec<Entry>) {
        metrics
            .lazyfree_pending
            .fetch_add(entries.len() as u64, Ordering::Relaxed);
        self.entries.extend(entries.into_iter().map(|e| (e, 1)));
    }

    /// Queues the old table of a flushed database.
    pub fn push_table(&mut self, metrics: &Metrics, table: Table) {
        let n = table.len() as u64;
        metrics.lazyfree_pending.fetch_add(n, Ordering::Relaxed);
        self.tables.push((table, n));
    }

    /// Frees for about `time`. Returns whether work is left.
    pub fn step(&mut self, metrics: &Metrics, time: Duration) -> bool {
        let start = Instant::now();
        loop {
            if let Some((table, _)) = self.tables.last_mut() {
                // One segment (at most a few hundred keys); a big value in it joins the queue
                // instead of being freed whole here.
                let entries = &mut self.entries;
                let done = table.drain_step(1, |e| {
                    if e.free_effort() > LAZYFREE_THRESHOLD {
                        entries.push_back((e, 0)); // counted with its table
                    }
                });
                if done {
                    let (_, n) = self.tables.pop().expect("looked at above");
                    finished(metrics, n);
                }
            } else if let Some((e, _)) = self.entries.front_mut() {
                let freed = e.heap_mut().map_or(0, |v| v.free_step(FREES_PER_CHECK));
                if freed == 0 {
                    let (e, n) = self.entries.pop_front().expect("looked at above");
                    drop(e);
                    finished(metrics, n);
                }
            } else {
                return false;
            }
            if start.elapsed() >= time {
                return !self.is_empty();
            }
        }
    }
}

fn finished(metrics: &Metrics, n: u64) {
    metrics.lazyfree_pending.fetch_sub(n, Ordering::Relaxed);
    metrics.lazyfreed.fetch_add(n, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use darner_engine::types::{Hash, Limits};
    use darner_engine::value::Value;

    fn big_hash(key: &str, fields: usize) -> Entry {
        let mut h = Hash::new();
        for i in 0..fields {
            h.set(format!("field:{i}").as_bytes(), b"v", &Limits::default());
        }
        Entry::new_value(key.as_bytes(), Value::Hash(h), None, 0)
    }

    #[test]
    fn values_and_tables_are_freed_in_steps_and_counted() {
        let metrics = Metrics::default();
        let mut dying = Dying::default();
        dying.push_entries(&metrics, vec![big_hash("a", 100_000)]);
        let mut table = Table::new();
        for i in 0..50_000 {
            let k = format!("key:{i}");
            table.insert(Entry::new_str(k.as_bytes(), b"v", None, false, 0));
        }
        // A big value inside a flushed table is freed in steps too.
        table.insert(big_hash("in-table", 100_000));
        dying.push_table(&metrics, table);
        assert_eq!(metrics.lazyfree_pending.load(Ordering::Relaxed), 1 + 50_001);
        let mut steps = 0;
        while dying.step(&metrics, Duration::from_micros(20)) {
            steps += 1;
            assert!(steps < 1_000_000);
        }
        assert!(steps > 10, "{steps} steps");
        assert!(dying.is_empty());
        assert_eq!(metrics.lazyfree_pending.load(Ordering::Relaxed), 0);
        assert_eq!(metrics.lazyfreed.load(Ordering::Relaxed), 50_002);
    }
}
