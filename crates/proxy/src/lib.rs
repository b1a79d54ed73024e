//! darner-proxy: a cluster-aware proxy. Clients speak plain single-node Redis to it; it speaks
//! Redis Cluster to the backends (Redis 7 or Darner primaries), so that short-lived clients
//! (PHP-FPM workers, scripts) neither rediscover the topology nor open connections to every
//! node on every request.
//!
//! # Layout
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`slots`] | [`SlotMap`]: slot → primary, read from `CLUSTER SLOTS` / `CLUSTER SHARDS` replies |
//! | [`replicas`] | each primary's usable replicas (health, replication offset) and the read policy's order of a slot's nodes |
//! | [`health`] | outlier ejection: consecutive failures per node, backoff, probes |
//! | [`route`] | [`plan`]: one request → a local reply, or backend requests (by slot, split by slot, or to every primary, or on the client's pinned or blocking connection) and how to merge them; the MULTI/WATCH state; the proxy's own CLUSTER/HELLO/SELECT/CLIENT answers; MOVED/ASK parsing |
//! | [`merge`] | [`Merge`] rules (sum, all-OK, key order, concatenation) and [`ReplyQueue`], a client's replies released in request order |
//! | [`scan`] | [`ReplyScanner`]: where a backend reply ends, resumable, without decoding it |
//! | [`fanout`] | SCAN (a cursor over every primary), RANDOMKEY, INFO; [`fanout::plan`], the entry point: authentication gate, these, then routing |
//! | [`cache`] | the shared client cache (`proxy-cache yes`): which requests it answers, what writes invalidate, fills in flight and the invalidation race, CLOCK eviction |
//! | [`auth`] | client AUTH / HELLO AUTH against `requirepass`, the NOAUTH gate |
//! | [`metrics`] | per-thread counters published once per loop turn, INFO's proxy sections, the Prometheus endpoint |
//! | [`config`] | the command line and the config file |
//! | `fuzz_support` | the checks shared by the cargo-fuzz targets and their stable stand-in tests (hidden) |
//! | [`server`] | the only module with sockets: one mio event loop per thread, client connections, pipelined backend connections, dedicated ones (transactions, blocking commands, subscriptions), redirects, topology refresh; `server/reads.rs`: reads sent by the read policy, retried on failure, probes of ejected nodes |
//!
//! # Design
//!
//! **Sans-I/O core.** Everything that decides (routing, splitting, merging, topology parsing,
//! reply framing) is plain functions and data, unit- and property-tested without a socket;
//! `server` only moves bytes between sockets and those functions.
//!
//! **Shared, pipelined backend connections.** Each thread keeps one connection per backend
//! primary (two when both RESP2 and RESP3 clients are connected: a reply's encoding follows the
//! connection's protocol, so a RESP3 client's requests travel on a RESP3 connection), shared
//! by every client of the thread. Requests are written back to back; the backend answers in
//! order, so each reply belongs to the oldest request still in flight on that connection. A
//! thousand short-lived clients therefore cost the cluster a handful of long-lived
//! connections, and no TIME_WAIT sockets on the cluster's side.
//!
//! **Threads share nothing.** Each thread accepts its own clients (SO_REUSEPORT), owns its
//! backend connections and its own copy of the slot map, and refreshes it itself: no lock on
//! the request path, at the price of one CLUSTER SLOTS per thread per refresh.
//!
//! **Redirects.** A `-MOVED` patches the slot in the thread's map, asks the node that sent it
//! for the full topology, and resends the request to the new owner, so the client never sees
//! it. An `-ASK` (a slot being migrated) resends the request once, preceded by ASKING, to the
//! importing node, without touching the map. After a few redirects of one request the error
//! goes to the client, rather than chasing a cluster that is changing faster than it answers.
//!
//! **Dedicated connections.** MULTI/EXEC/WATCH pin a client's transaction to one slot, on a
//! backend connection of the client's own to its owner; blocking commands wait on one too, so
//! they never hold up the shared connections. Clean ones go back to a small idle pool.
//!
//! **Pub/sub.** A client that subscribes becomes a byte passthrough to a backend connection
//! of its own (any primary: classic PUBLISH reaches every node's subscribers) until it leaves:
//! messages are unsolicited, so they cannot travel on a connection whose replies are matched
//! to requests in order. SSUBSCRIBE's connection goes to the owner of its channels' slot.
//!
//! **Authentication is the proxy's.** Clients AUTH to the proxy (`requirepass`), which checks
//! them itself before routing anything; the backend connections are the proxy's own and
//! authenticate with the proxy's backend credentials (`backend-user`, `backend-password`),
//! so a client's AUTH never travels to a shared connection.
//!
//! **Replicas and retries.** With a read policy other than `master`, read-only requests go to
//! a replica of their slot's shard (chosen by health and replication offset from CLUSTER
//! SHARDS) or its primary, in the policy's order; a read whose node fails is sent to the next
//! one within a deadline, since running a read twice is harmless, while a write never is
//! retried. Nodes that fail repeatedly are ejected and probed (ROLE) before they take
//! reads again, so a dead replica costs its shard's reads no detour once noticed. A read
//! still unanswered after `read-hedge-after` may get one second copy on another node of its
//! policy (capped at `read-hedge-max-percent` of the reads); the first reply answers, the
//! other is dropped when it comes (see `server/reads.rs`).
//!
//! **Shared cache** (`proxy-cache yes`). Read-only single-key replies kept per thread, made
//! coherent by CLIENT TRACKING on the thread's RESP3 shared connections: see [`cache`] for the
//! rules (fills in flight, writes through the proxy, lost connections) and why they suffice.
//!
//! **Clients' own tracking.** A client's CLIENT TRACKING is served from the invalidations the
//! thread's shared connections receive, to itself (RESP3) or to its REDIRECT target (any
//! thread's, through [`tracking::Hub`]): see [`tracking`].
//!
//! **MONITOR** opens a MONITOR connection of the client's own to every node that runs its
//! commands (primaries; replicas too when reads may go there), and to each node a topology
//! refresh names later, and merges their lines in arrival order (`server/monitor.rs`). **WAIT** goes, after a PING that moves the
//! connection's replication mark past the client's writes, on a connection of the client's own
//! to each primary it wrote to, and the least count is answered (`server/wait.rs`): never on a
//! shared connection, where it would hold up every other client.
//!
//! **Not yet.** Commands not supported get a clear error (`ERR command '...' is not supported by darner proxy yet`),
//! never a wrong answer.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod cache;
pub mod config;
pub mod fanout;
#[doc(hidden)]
pub mod fuzz_support;
pub mod health;
pub mod merge;
pub mod metrics;
pub mod replicas;
pub mod route;
pub mod scan;
pub mod server;
pub mod slots;
pub mod tracking;

pub use merge::{Merge, ReplyQueue};
pub use route::{plan, Plan};
pub use scan::ReplyScanner;
pub use slots::SlotMap;
