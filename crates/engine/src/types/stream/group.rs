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
