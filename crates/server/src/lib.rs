//! darner-server: the `darner` binary.
//!
//! ```text
//!                 ┌────────────── thread 0 ──────────────┐   ┌──────── thread 1 ────────┐
//!  clients ──TCP──▶ listener (SO_REUSEPORT) → conns       │   │ listener → conns          │
//!                 │   parse → dispatch ─┬─ inline ─▶ shard 0│   │ ... ─▶ shard 1            │
//!                 │                     └─ Batch msg ──────┼──▶│ inbox → run → BatchDone ──┼─┐
//!                 │   tasks (MULTI, MSET, RENAME, KEYS)     │   │                           │ │
//!                 │     ──Schedule/Run/Release─────────────┼──▶│ scheduler (sched.rs)      │ │
//!                 │   inbox ◀──────────────────────────────┼───┼───────────────────────────┼─┘
//!                 └─────────────────────────────────────────┘   └───────────────────────────┘
//! ```
//! N threads (`--threads`, default: the cores available), each with its own mio event loop, its
//! own connections and the one shard of every database it owns. No lock guards data: a key is
//! only ever touched by its shard's thread. Threads talk by messages (`msg.rs`).
//!
//! Layout:
//! - `main.rs`: argument handling; `server.rs`: start-up, listeners, signals, shutdown.
//! - `config.rs`: the directive table (file, command line, CONFIG GET/SET).
//! - `worker/`: the per-thread event loop, dispatch, the scheduler's message side
//!   (`scheduling.rs`), and per-command accounting: statistics, slow log, MONITOR (`stats.rs`).
//! - `conn.rs`: a connection, its ordered replies and its client state.
//! - `shard.rs`: a shard's data and scheduler state; `sched.rs`: the transaction scheduler
//!   (key-level intents in one global order, sans-I/O, model-tested); `exec.rs`: transaction
//!   tasks and their executor.
//! - `stream.rs`: big whole-collection replies (HGETALL, SMEMBERS, LRANGE, ZRANGE) produced in
//!   steps, with the key locked against writers meanwhile.
//! - `msg.rs`: inter-thread messages; `shared.rs`: state all threads share (stats, clients).
//! - `cmd/`: one file per command group; `cmd/mod.rs` is the handler registry.
//! - `blocking.rs`: clients blocked on keys (BLPOP, BZPOPMIN, ...): waiters, wake-ups, timeouts.
//! - `tracking.rs`: client-side caching (CLIENT TRACKING): per-shard tables, invalidations.
//! - `pubsub.rs`: Pub/Sub subscriptions (a process-wide registry) and message delivery.
//! - `notify.rs`: keyspace notifications (`notify-keyspace-events`), published over Pub/Sub.
//! - `persist/`: RDB snapshots: SAVE's driver, the per-shard serializer (a resumable
//!   cursor), loading a file at start-up.
//! - `propagate.rs`: what each write does, recorded per thread as commands for the AOF;
//!   `aof.rs`: loading the AOF directory at start-up and the AOF thread that merges, writes and
//!   fsyncs the log (`worker/durability.rs`: replies held for `appendfsync always`).
//! - `replica.rs`: the replica side of replication (REPLICAOF): the link thread, the
//!   snapshot, the primary's stream applied through a connection of the server's own.
//! - `failover.rs`: FAILOVER, the primary's coordinated hand-over to a replica.
//! - `lazyfree.rs`: big values freed off the request path, in steps between requests.
//! - `log.rs`: Redis-format logging; `alloc.rs`: the counting global allocator; `sys.rs`: the
//!   request path's `recv` and `send`, made as direct system calls, and the loop's alarm clock
//!   (an idle thread sleeps without a timeout; the alarm rings for the cron and timers).

pub mod alloc;
pub mod aof;
pub mod bgsave;
pub mod blocking;
pub mod cmd;
pub mod config;
pub mod conn;
pub mod digest;
pub mod evict;
pub mod exec;
pub mod failover;
pub mod latency;
pub mod lazyfree;
pub mod log;
pub mod msg;
pub mod notify;
pub mod persist;
pub mod primary;
pub mod propagate;
pub mod pubsub;
pub mod replica;
pub mod sched;
pub mod server;
pub mod sha1;
pub mod shard;
pub mod shared;
pub mod stream;
pub mod sys;
pub mod tracking;
pub mod worker;

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

/// The Redis version Darner reports to clients (HELLO, INFO): client libraries enable
/// features such as client-side caching by this number.
pub const REDIS_COMPAT_VERSION: &str = "7.4.0";
pub const DARNER_VERSION: &str = env!("CARGO_PKG_VERSION");
