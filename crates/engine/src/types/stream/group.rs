//! Consumer groups of a stream (Redis 7.2's streamCG, streamConsumer, streamNACK).
//!
//! A group has its last delivered id, its entries-read counter (None: unknown, Redis's -1),
//! its pending entries list (PEL: id -> delivery record) and its consumers, each with the ids
//! of the PEL it owns. Both maps are ordered: XPENDING and XAUTOCLAIM walk them by id.

use super::StreamId;
use std::collections::{BTreeMap, BTreeSet};

/// A pending entry: delivered to `consumer`, not acknowledged yet.
#[derive(Clone, Debug, PartialEq)]
pub struct Nack {
    pub consumer: Vec<u8>,
    /// When it was last delivered (ms).
    pub delivery_time: i64,
    pub delivery_count: u64,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Consumer {
    /// Last time it tried anything (XREADGROUP, XCLAIM, ...).
    pub seen_time: i64,
    /// Last time it got entries (or claimed some); -1 never.
    pub active_time: i64,
    pub pel: BTreeSet<StreamId>,
}

impl Consumer {
    pub fn new(now: i64) -> Consumer {
        Consumer {
            seen_time: now,
            active_time: -1,
            pel: BTreeSet::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Group {
    pub last_id: StreamId,
    pub entries_read: Option<u64>,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Vec<u8>, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: Option<u64>) -> Group {
        Group {
            last_id,
            entries_read,
            pel: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }

    /// Approximate heap bytes.
    pub fn memory(&self) -> usize {
        self.pel
            .values()
            .map(|n| 16 + 40 + n.consumer.len())
            .sum::<usize>()
            + self
                .consumers
                .iter()
                .map(|(k, c)| k.len() + 64 + c.pel.len() * 24)
                .sum::<usize>()
    }
}

use super::Stream;

impl Stream {
    /// Whether a deleted entry may lie in `start..=end` (None: unbounded), as Redis's
    /// streamRangeHasTombstones judges it from the greatest deleted id.
    pub fn range_has_tombstones(&self, start: Option<StreamId>, end: Option<StreamId>) -> bool {
        if self.is_empty() || self.max_deleted_id == StreamId::MIN {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            // The latest tombstone is before the first entry.
            return false;
        }
        let start = start.unwrap_or(StreamId::MIN);
        let end = end.unwrap_or(StreamId::MAX);
        start <= self.max_deleted_id && self.max_deleted_id <= end
    }

    /// The logical read counter of `id` (how many entries were ever added up to it), when it
    /// can be known (Redis's streamEstimateDistanceFromFirstEverEntry); None otherwise.
    pub fn estimate_distance(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.is_empty() && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        if self.max_deleted_id == StreamId::MIN || self.max_deleted_id < self.first_id {
            if id < self.first_id {
                return Some(self.entries_added - self.len());
            }
            if id == self.first_id {
                return Some(self.entries_added - self.len() + 1);
            }
        }
        None
    }

    /// A group's lag: entries not yet delivered to it, when it can be known (Redis 7.2's
    /// streamReplyWithCGLag; 7.4 added rules for an emptied stream and a group behind the
    /// first entry, which Darner does not follow); None when tombstones make it unknowable.
    pub fn group_lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        let lag = |read: u64| (self.entries_added as i64).wrapping_sub(read as i64);
        if let Some(read) = g.entries_read {
            if !self.range_has_tombstones(Some(g.last_id), None) {
                return Some(lag(read));
            }
        }
        self.estimate_distance(g.last_id).map(lag)
    }

    /// Moves group `g`'s last delivered id to `id` (an entry it is delivering past it),
    /// keeping its read counter as Redis's streamReplyWithRange does.
    pub fn advance_group(&self, g: &mut Group, id: StreamId) {
        if id <= g.last_id {
            return;
        }
        match g.entries_read {
            Some(n) if !self.range_has_tombstones(Some(id), None) => {
                g.entries_read = Some(n + 1);
            }
            _ if self.entries_added > 0 => g.entries_read = self.estimate_distance(id),
            _ => {}
        }
        g.last_id = id;
    }
}

impl Group {
    /// Records `id` as delivered to `consumer` at `now` (a first delivery, or a redelivery
    /// after XGROUP SETID moved the group back: the entry changes owner and its count
    /// restarts at 1).
    pub fn deliver(&mut self, id: StreamId, consumer: &[u8], now: i64) {
        if let Some(old) = self.pel.get(&id).map(|n| n.consumer.clone()) {
            if let Some(c) = self.consumers.get_mut(&old) {
                c.pel.remove(&id);
            }
        }
        self.pel.insert(
            id,
            Nack {
                consumer: consumer.to_vec(),
                delivery_time: now,
                delivery_count: 1,
            },
        );
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }

    /// Acknowledges `id`; whether it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(n) => {
                if let Some(c) = self.consumers.get_mut(&n.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Gives pending entry `id` to `consumer` (which exists).
    pub fn transfer(&mut self, id: StreamId, consumer: &[u8]) {
        let Some(n) = self.pel.get_mut(&id) else {
            return;
        };
        if n.consumer != consumer {
            let old = std::mem::replace(&mut n.consumer, consumer.to_vec());
            if let Some(c) = self.consumers.get_mut(&old) {
                c.pel.remove(&id);
            }
            if let Some(c) = self.consumers.get_mut(consumer) {
                c.pel.insert(id);
            }
        }
    }

    /// Deletes a consumer and its pending entries; how many it had, None if unknown.
    pub fn remove_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }
}
