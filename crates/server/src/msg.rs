//! Messages between threads. Every thread has one inbox; a thread talks to a shard by sending
//! to the thread that owns it. See `shard.rs` for the lock protocol these messages implement.

use crate::cmd::Command;
use crate::conn::ClientState;
use crate::shard::ShardCtx;
use bytes::Bytes;
use std::any::Any;

/// A connection on some thread: slab index plus a generation, so that a reply for a
/// connection that closed meanwhile is recognised and dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ConnRef {
    pub idx: u32,
    pub gen: u32,
}

/// Where a hop's result goes: a slot of a task on a thread.
#[derive(Clone, Copy, Debug)]
pub struct Completion {
    pub thread: usize,
    pub task: usize,
    pub slot: usize,
}

/// A transaction's identity: unique across the server.
pub type TxId = crate::sched::TxId;

/// A transaction's part for one shard: its intents there and what it does once granted.
pub struct Scheduled {
    pub tx: TxId,
    pub intents: crate::sched::Intents,
    pub part: Part,
}

/// What a transaction's part on one shard does once the shard's scheduler grants it
/// (sched.rs).
pub enum Part {
    /// A reservation: run `first` if any (its result, or `()`, goes to `done`) and tell
    /// `done`; the transaction then sends its steps ([`Msg::Run`]) and a [`Msg::Release`].
    Reserve {
        done: Completion,
        /// Database, RESP3, the client as a tracking writer, the step.
        first: Option<(usize, bool, Option<crate::tracking::Writer>, PartFn)>,
    },
    /// Work known up front: run `f` (which sends its own result back) and count the quorum
    /// down; the intents go when every part of the transaction has run.
    OneShot {
        quorum: std::sync::Arc<crate::sched::Quorum>,
        db: usize,
        resp3: bool,
        writer: Option<crate::tracking::Writer>,
        f: PartFn,
        /// Where its result goes (after the blocked clients its writes woke are served).
        done: Completion,
    },
    /// A share of a plain multi-shard command run without a task (MSET, MGET, DEL, ...:
    /// worker/direct.rs): scheduled as a one-shot part; its outcome goes back as
    /// [`Msg::PartDone`].
    Direct(crate::worker::direct::DirectPart),
}

/// One single-shard command travelling to its shard.
pub struct BatchItem {
    pub conn: ConnRef,
    pub seq: u64,
    pub db: usize,
    pub resp3: bool,
    pub touch: bool,
    /// Sent by this replica's primary: no key counts as expired (`Clock::from_primary`).
    pub from_primary: bool,
    pub cmd: &'static Command,
    /// Inline up to three (GET, SET key value): no allocation of its own.
    pub args: smallvec::SmallVec<[Bytes; 3]>,
    /// The positions of its keys among `args` (found once, when it was routed).
    pub keys: darner_commands::KeyPositions,
    /// The client, when it tracks keys: whether this command records its keys, and who
    /// wrote (for NOLOOP).
    pub track: Option<(crate::tracking::Reader, bool)>,
}

/// A command that ran on another thread and belongs in the slow log.
pub type SlowCall = Box<(u64, Vec<Bytes>)>;

/// Where a batch's reply to one command lies: the connection, its reply's sequence number,
/// the reply's start and end in the batch's reply buffer, and its slow-log entry if any.
pub type BatchReply = (ConnRef, u64, u32, u32, Option<SlowCall>);

/// A batch's replies, concatenated, and where each lies: built on the shard's thread, read on
/// the connections' thread, and sent back empty with the next batch (`Batch::spare`), so that
/// the shard reuses them instead of allocating per batch and the connections' thread does not
/// free per batch what another thread allocated (a free from another thread leaves holes that
/// the allocator cannot reuse until the owner frees nearby: RSS past used_memory).
#[derive(Default)]
pub struct ReplyBufs {
    pub buf: Vec<u8>,
    pub items: Vec<BatchReply>,
}

pub type ShardFn = Box<dyn FnOnce(&mut ShardCtx) + Send>;
/// A one-shot part's work: its result, boxed for the hop back.
pub type PartFn = Box<dyn FnOnce(&mut ShardCtx) -> Box<dyn Any + Send> + Send>;
/// Builds a task on the thread that receives it.
pub type SpawnFn = Box<
    dyn FnOnce(
            std::sync::Arc<crate::shared::Shared>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>
        + Send,
>;
pub type ThreadFn = Box<dyn FnOnce(&mut crate::worker::ThreadCtx) + Send>;

pub enum Msg {
    /// Single-shard commands of one pipelined read, for this thread's shard; with `spare`, the
    /// buffers of an earlier `BatchDone` from this shard, emptied, for its next replies.
    Batch {
        from: usize,
        items: Vec<BatchItem>,
        spare: Option<Box<ReplyBufs>>,
    },
    /// Their replies, concatenated in `buf`, back to the connections' thread; with each, for a
    /// command slow enough for the slow log, its duration and arguments (the connection's
    /// thread records the entry, as only it knows the client's address and name).
    ///
    /// `spent` is the batch itself, run, coming home: its arguments are slices of the
    /// connections' read buffers, whose reference counts live on this thread, so they are
    /// dropped here (no cache line crossing back and forth per argument), and its allocation
    /// is reused for the next batch to `shard`, which sent this.
    BatchDone {
        shard: usize,
        replies: Box<ReplyBufs>,
        spent: Vec<BatchItem>,
    },
    /// A part of a transaction for this thread's shard, in the global order (sched.rs).
    Schedule(Box<Scheduled>),
    /// A transaction whose intents this shard holds or waits behind has run all its parts:
    /// sweep (sched.rs, [`crate::sched::Quorum`]).
    Released,
    /// Run `f` on this thread's shard (inside transaction `tx`, or as a lone step).
    Run {
        tx: Option<TxId>,
        db: usize,
        resp3: bool,
        /// The client, if it tracks keys (for invalidations of its own writes).
        writer: Option<crate::tracking::Writer>,
        f: ShardFn,
    },
    /// Transaction `tx` lets go of its reservation on this thread's shard.
    Release { tx: TxId },
    /// Run `f` with access to this thread's connections (CLIENT LIST, KILL, ...).
    Thread { f: ThreadFn },
    /// CLIENT UNPAUSE: run the commands held by CLIENT PAUSE now.
    Unpaused,
    /// maxmemory: a shard started an eviction round; take this shard's part now (evict.rs).
    Evict,
    /// appendfsync always: the AOF thread fsynced more of this thread's chunks; replies held
    /// for them can go (worker/durability.rs).
    AofSynced,
    /// A hop's result for a task of this thread.
    HopDone {
        task: usize,
        slot: usize,
        result: Box<dyn Any + Send>,
    },
    /// The outcome of one share of a multi-shard command run without a task, for the record
    /// that gathers them on the connection's thread (worker/direct.rs).
    PartDone {
        gather: u32,
        part: u32,
        outcome: crate::worker::direct::Outcome,
    },
    /// A fence on a connection's output is lifted (blocking.rs: what its write woke is done).
    Unfence { conn: ConnRef },
    /// A finished transaction task's reply for a connection of this thread.
    TxDone {
        conn: ConnRef,
        seq: u64,
        reply: Vec<u8>,
        client: Box<ClientState>,
    },
    /// A chunk of a streamed reply (stream.rs) for a connection of this thread: appended to its
    /// reply `seq`, which is complete with the `last` chunk. The first chunk of a stream that
    /// has more carries its flow control (credits for the next chunks, cancellation).
    StreamChunk {
        conn: ConnRef,
        seq: u64,
        bytes: Vec<u8>,
        last: bool,
        /// The stream producing it ended (with `last`, or a transaction's part: the
        /// transaction completes the reply).
        end: bool,
        flow: Option<std::sync::Arc<crate::stream::Flow>>,
    },
    /// Run one step of this thread's shard's streams (queued once per loop turn while streams
    /// can run, which also keeps the loop from sleeping meanwhile; sent by a connection's
    /// thread when it gives a stream a credit or cancels it).
    StreamTick,
    /// Replication stream bytes for a replica connection of this thread (primary.rs).
    ReplicaData {
        conn: ConnRef,
        bytes: std::sync::Arc<Vec<u8>>,
    },
    /// Bytes for a MONITOR client of this thread.
    Monitor { line: std::sync::Arc<Vec<u8>> },
    /// Tracking invalidations for connections of this thread (tracking.rs).
    Invalidate {
        what: crate::tracking::Invalid,
        /// From a shard's table (default mode): a client now in BCAST mode ignores it, as
        /// Redis does (it read those keys before switching).
        table: bool,
        /// Each connection, with the sequence number of the reply its push must follow (its
        /// own write), or None: after every reply it is owed.
        conns: Vec<(ConnRef, Option<u64>)>,
    },
    /// An invalidation redirected to a connection of this thread (CLIENT TRACKING REDIRECT).
    InvalidateRedirected {
        what: crate::tracking::Invalid,
        conn: ConnRef,
        /// The tracking client's protocol, in which a flush's null is written (as Redis
        /// writes it), whatever the target's.
        null_resp3: bool,
    },
    /// FLUSHDB / FLUSHALL: every tracking client of this thread gets a null invalidation.
    TrackingFlush,
    /// A client stopped tracking: purge it from this shard's table.
    TrackingForget { id: u64 },
    /// A published message for subscribers on this thread (pubsub.rs).
    Publish {
        msg: std::sync::Arc<crate::pubsub::Published>,
        targets: Vec<crate::pubsub::Target>,
    },
    /// Spawn a task on this thread (a thread that is no worker needs one: the replica's
    /// link thread has its snapshot loaded by a task holding every shard, replica.rs).
    Spawn { f: SpawnFn },
    /// Stop the event loop.
    Shutdown,
}
