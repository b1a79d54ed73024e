//! A shard: the part of every database that one thread owns, and the lock that makes
//! multi-shard work atomic.
//!
//! The lock protocol (a simplified VLL, see DESIGN.md): a transaction that spans shards takes
//! each shard's lock in ascending shard order, by message; a shard that is locked defers every
//! other piece of work (single-shard batches, other transactions' lock requests) in FIFO order
//! and runs only the holder's steps. Ordered acquisition rules out deadlock, and holding all
//! locks until the end (strict two-phase locking) makes every multi-key command and MULTI/EXEC
//! serializable. Single-shard commands on an unlocked shard never see any of this: they run
//! inline, with no message and no lock.
//!
//! Streams (stream.rs): a shard producing big replies in steps holds shared intent locks on
//! the streamed keys. A lock request arriving meanwhile is NOT put in `ShardLock::waiting`
//! (that would make `free()` false and defer every single-key command of the shard until the
//! streams end, the very stall streams exist to avoid): it waits aside in
//! `Streams::tx_waiting` and is granted when the last stream ends; while one waits, no new
//! stream starts (big reads run at once instead), so it cannot starve. A held lock is never
//! granted with streams running, and a locked shard starts none, so a transaction's steps
//! never see a half-streamed key. What a transaction waiting for one shard's streams does to
//! the shards it already holds (their work waits, as for any lock wait) is the price of
//! strict two-phase locking; streams are bounded by the value's size.

use crate::msg::{Msg, TxId};
use crate::shared::Shared;
use darner_engine::{Clock, Db, DbView};
use std::collections::VecDeque;

pub struct Shard {
    pub id: usize,
    pub dbs: Vec<Db>,
    /// Clients blocked on this shard's keys (blocking.rs).
    pub blocked: crate::blocking::Registry,
    /// Client tracking: who read which of this shard's keys.
    pub tracking: crate::tracking::Table,
    /// Big replies being produced in steps, and the work waiting for them (stream.rs).
    pub streams: crate::stream::Streams,
    /// Big values and flushed tables being freed in steps (lazyfree.rs).
    pub dying: crate::lazyfree::Dying,
    /// Set by the databases when they record a keyspace event (notify.rs takes them).
    pub events_recorded: std::sync::Arc<std::sync::atomic::AtomicBool>,
    rng: u64,
}

impl Shard {
    pub fn new(id: usize, databases: usize) -> Shard {
        Shard {
            id,
            dbs: (0..databases).map(|_| Db::new()).collect(),
            blocked: Default::default(),
            tracking: Default::default(),
            streams: Default::default(),
            dying: Default::default(),
            events_recorded: Default::default(),
            rng: 0x9E37_79B9_7F4A_7C15
                ^ ((id as u64 + 1) * 0x2545_F491_4F6C_DD1D)
                ^ Shared::now_us() as u64,
        }
    }

    pub fn random(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// What a command running on a shard sees.
pub struct ShardCtx<'a> {
    pub shard: &'a mut Shard,
    pub db: usize,
    pub clock: Clock,
    pub resp3: bool,
    pub shared: &'a Shared,
}

impl<'a> ShardCtx<'a> {
    /// The command's database, as of this command's clock.
    /// Records that this write command call changed nothing (Redis does not count it in
    /// `server.dirty`, so INFO's rdb_changes_since_last_save leaves it out).
    pub fn unchanged_write(&self) {
        crate::shared::bump(&self.shared.stats[self.shard.id].unchanged_writes, 1);
    }

    pub fn db(&mut self) -> DbView<'_> {
        let c = self.clock;
        self.shard.dbs[self.db].view(c)
    }

    pub fn db_at(&mut self, i: usize) -> DbView<'_> {
        let c = self.clock;
        self.shard.dbs[i].view(c)
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms
    }

    /// `proto-max-bulk-len`: the longest string, and the bound on some replies and transient
    /// buffers that a single command's arguments size.
    pub fn proto_max_bulk_len(&self) -> u64 {
        self.shared
            .config
            .hot
            .proto_max_bulk_len
            .load(std::sync::atomic::Ordering::Relaxed)
            .max(0) as u64
    }

    /// The collection encoding thresholds in force (hash-max-listpack-entries, ...).
    pub fn limits(&self) -> darner_engine::types::Limits {
        self.shared.config.hot.limits()
    }
}

/// The shard's lock: who holds it and what waits.
#[derive(Default)]
pub struct ShardLock {
    pub holder: Option<TxId>,
    pub waiting: VecDeque<Msg>,
}

impl ShardLock {
    /// Whether work that is not part of a transaction can run right now.
    pub fn free(&self) -> bool {
        self.holder.is_none() && self.waiting.is_empty()
    }
}
