//! A shard: the part of every database that one thread owns, and the scheduler state that
//! makes multi-shard work atomic.
//!
//! Transactions are scheduled by sched.rs (key-level intents granted in one global order; see
//! its essay). What this file adds is the worker's side, [`ShardLock`]: the scheduler, and the
//! work outside transactions that waits behind granted intents (single-shard batches, lone
//! steps), in FIFO order. Single-shard commands on keys nobody holds never see any of it: they
//! run inline, with no message and no lock.
//!
//! Streams (stream.rs): a shard producing big replies in steps holds shared intent locks on
//! the streamed keys. A transaction's part arriving meanwhile does not enter the scheduler
//! (a granted part would make every single-key command of its keys wait until the streams
//! end, and a stream does not step while anything is granted): it waits aside in
//! `Streams::tx_waiting`, in order, and is scheduled when the last stream ends; while one
//! waits, no new stream starts (big reads run at once instead), so it cannot starve. No stream
//! starts while anything is granted, so a transaction's steps never see a half-streamed key,
//! and streams and granted intents never coexist on a shard (so neither waits for the other).
//! The exception proves the rule: a transaction's own part (XREAD / XREADGROUP over several
//! shards, `stream::start_tx_segs`) streams under that transaction's intents, which guard its
//! keys; it waits for nothing but its client (bounded: `stream::SLOW_CLIENT_MS`), so
//! transactions behind it wait no differently than behind any holder. While its transaction
//! holds keys for it (`Streams::hold`), work outside transactions on them waits aside in
//! `Streams` (the deferred FIFO would hold the whole shard), and transactions' parts arriving
//! while some waits there wait in `tx_waiting` behind it (a connection's order); the
//! transaction's release puts both back at the front of the deferred work, in that order.

use crate::msg::{Msg, Part};
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
    /// Transactions' intents on this shard and the work waiting behind them.
    pub lock: ShardLock,
    /// A background save's part on this shard, while it is being written (bgsave.rs).
    pub snapshot: Option<crate::bgsave::ShardSnapshot>,
    /// A replica's `repl-diskless-load swapdb` load in progress: this shard's part of the
    /// new dataset, swapped in once complete (persist/load.rs, replica.rs).
    pub staging: Option<Staging>,
    rng: u64,
}

/// Fresh databases a load fills while the live ones go on serving; `id` tells one load from
/// an older one still winding down (a newer load wins: see `persist::load::Target`).
pub struct Staging {
    pub id: u64,
    pub dbs: Vec<Db>,
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
            lock: Default::default(),
            snapshot: None,
            staging: None,
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
        self.count_unchanged();
        crate::propagate::note_unchanged();
    }

    /// The count of [`ShardCtx::unchanged_write`], without telling `propagate::call` (which
    /// calls this itself when the handler did not say so).
    pub fn count_unchanged(&self) {
        crate::shared::bump(&self.shared.stats[self.shard.id].unchanged_writes, 1);
        crate::shared::bump(&self.shared.stats[self.shard.id].undirty, 1);
    }

    pub fn db(&mut self) -> DbView<'_> {
        let c = self.clock;
        self.shard.dbs[self.db].view(c)
    }

    /// Starts loading the table buckets, then the entries, of up to 32 keys of this command's
    /// database, so that a multi-key command's lookups overlap their cache misses instead of
    /// waiting for each in turn.
    pub fn prefetch<K: AsRef<[u8]>>(&self, keys: &[K]) {
        if keys.len() < 2 {
            return;
        }
        let db = &self.shard.dbs[self.db];
        let mut hashes = [0u64; 32];
        let n = keys.len().min(hashes.len());
        for (h, k) in hashes.iter_mut().zip(keys) {
            *h = db.prefetch(k.as_ref());
        }
        for &h in &hashes[..n] {
            db.prefetch_entry(h);
        }
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

/// The shard's transaction scheduler, and the work outside transactions waiting behind it.
#[derive(Default)]
pub struct ShardLock {
    pub sched: crate::sched::Sched<Part>,
    /// Batches and lone steps waiting (for a granted intent on their keys, or behind earlier
    /// work that waits), in arrival order.
    pub deferred: VecDeque<Msg>,
}

impl ShardLock {
    /// Whether work that is not part of a transaction can run right now whatever its keys.
    pub fn free(&self) -> bool {
        self.sched.idle() && self.deferred.is_empty()
    }
}
