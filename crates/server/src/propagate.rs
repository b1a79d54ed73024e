//! What a write does to the dataset, as commands for the append-only file (and later for
//! replicas): Redis's `propagate`.
//!
//! Every thread keeps its own list of what its shard changed, in the order it changed it
//! (a thread-local: a shard is a thread, so the list needs no lock), and hands it to the AOF
//! thread in chunks ([`flush`]) at the end of each loop turn and of each transaction step.
//! The AOF thread merges the threads' lists into one log (`darner_aof::Merger`).
//!
//! **What is written.** A write command that succeeded is written as it was sent, the way
//! Redis propagates `c->argv`, unless its handler says otherwise while it runs: a command
//! whose effect depends on when or where it ran (a relative TTL, a random pop, a generated
//! stream id, a float increment) gives the commands that redo its effect exactly
//! ([`ShardCtx::propagate`], Redis's `rewriteClientCommandVector` / `alsoPropagate`), and one
//! that changed nothing says so ([`ShardCtx::propagate_nothing`]). Keys evicted for maxmemory
//! are written as DEL, and so are keys their TTL removed ([`expired`]), before the command
//! that found them expired: a load replays the log with nothing expiring (Redis's rule: the
//! log's TTLs are absolute, and a key must not vanish between two of its commands), so
//! without the DEL a key that expired and was written again would come back as its old value
//! changed (SET k v PX 100, then APPEND k x after the TTL, would load as "vx", expired).
//! Hash fields and set members their TTL removes are written the same way ([`expired`]):
//! `HDEL key field` per field (Redis 7.4's form), `SREM key member` per member, before the
//! command that found them due or at the end of the active cycle's turn (without them,
//! HSET h f 5, HPEXPIRE h 50 FIELDS 1 f, then HINCRBY h f 1 after the TTL would load as 6,
//! not 1). A hash or set left empty goes with its last HDEL (SREM), as Redis writes it;
//! one all of whose fields (members) were due at once goes whole, written as DEL. The
//! clock is stopped before every TTL while the log loads, so the fields and members a
//! client saw hidden (not removed) are there during the load and hidden again after it.
//!
//! **Transactions.** A command that ran as a step of a multi-shard transaction (a queued
//! command of EXEC, a script's call, a part of a multi-shard MSET) is tagged with the
//! transaction and its step; the transaction's first step on a shard leaves a marker there,
//! and the coordinating thread ends the transaction with the commands it writes itself
//! ([`TxLog`]: the multi-shard command as sent, when no shard wrote it piecewise). The AOF
//! thread writes the whole transaction as one MULTI/EXEC block where the markers say.

use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_aof::{Cmd, Item};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether anything is being recorded (the AOF is on). The engine's databases note the keys,
/// hash fields and set members their TTL removes while it is set ([`expired`]).
pub static ENABLED: AtomicBool = AtomicBool::new(false);

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::SeqCst);
}

#[derive(Default)]
struct Local {
    items: Vec<Item>,
    /// The transaction step running on this thread now (set around a hop's work).
    tx: Option<(u64, u32)>,
    /// The transaction whose marker this thread placed last.
    marked: Option<u64>,
    /// Commands the running handler gave in place of its arguments; None: its arguments.
    call: Option<Vec<Cmd>>,
    /// Handlers running now (a script's call runs inside EVAL's hop): only the outermost
    /// call's arguments are written when nothing better was given.
    depth: u32,
    ticket: u64,
    /// Transactions whose end is a barrier of the replication feed only (a full sync's cut),
    /// not of the AOF's merge.
    repl_barriers: Vec<u64>,
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::new(Local::default());
}

fn push(item: Item) {
    LOCAL.with(|l| l.borrow_mut().items.push(item));
}

fn cmd_of(db: usize, argv: Vec<Bytes>) -> Cmd {
    Cmd {
        db: Some(db as u32),
        argv,
    }
}

/// Records one command run on this thread's shard, where it belongs: inside the transaction
/// step running now, if any.
fn record(cmd: Cmd) {
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        match l.tx {
            Some((tx, step)) => l.items.push(Item::TxCmd { tx, step, cmd }),
            None => render(&mut l.items, cmd.db, &cmd.argv),
        }
    });
}

/// [`record`] of a command given by its arguments: outside a transaction it is rendered
/// straight from them, with no copy of its own.
fn record_args(db: usize, args: &[&[u8]]) {
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        match l.tx {
            Some(_) => {
                drop(l);
                record(cmd_of(db, crate::cmd::argv(args)));
            }
            None => render(&mut l.items, Some(db as u32), args),
        }
    });
}

/// Appends a command outside transactions to the thread's items: rendered in AOF form, onto
/// the last run when that is one of the same database (darner_aof::Run).
fn render<A: AsRef<[u8]>>(items: &mut Vec<Item>, db: Option<u32>, argv: &[A]) {
    match items.last_mut() {
        Some(Item::Run(r)) if r.db == db => darner_aof::writer::render_command(&mut r.resp, argv),
        _ => {
            let mut resp = Vec::new();
            darner_aof::writer::render_command(&mut resp, argv);
            items.push(Item::Run(darner_aof::Run { db, resp }));
        }
    }
}

impl ShardCtx<'_> {
    /// Whether the command running now should say what to write ([`ShardCtx::propagate`]).
    pub fn propagating(&self) -> bool {
        enabled()
    }

    /// Writes `argv` (in this command's database) in place of the running command's own
    /// arguments; call it once per command to write, in order.
    pub fn propagate(&self, argv: Vec<Bytes>) {
        if !enabled() {
            return;
        }
        let cmd = cmd_of(self.db, argv);
        LOCAL.with(|l| {
            let mut l = l.borrow_mut();
            if l.depth > 0 {
                l.call.get_or_insert_with(Vec::new).push(cmd);
            } else {
                drop(l);
                record(cmd);
            }
        });
    }

    /// [`ShardCtx::propagate`] of a command given by its parts (copied only when the AOF is
    /// on).
    pub fn propagate_args(&self, parts: &[&[u8]]) {
        if enabled() {
            self.propagate(parts.iter().map(|p| Bytes::copy_from_slice(p)).collect());
        }
    }

    /// The running command changed nothing: nothing is written for it.
    pub fn propagate_nothing(&self) {
        if enabled() {
            LOCAL.with(|l| {
                let mut l = l.borrow_mut();
                if l.depth > 0 {
                    l.call.get_or_insert_with(Vec::new);
                }
            });
        }
    }
}

thread_local! {
    /// The running handler said it changed nothing ([`ShardCtx::unchanged_write`]).
    static SAID_UNCHANGED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// [`ShardCtx::unchanged_write`] was called: [`call`] counts the call once.
pub fn note_unchanged() {
    SAID_UNCHANGED.with(|c| c.set(true));
}

/// Runs a key handler's call `f`, then records what it wrote: what the handler gave, or its
/// arguments if it is a write command that succeeded (`failed` tells from the reply) and
/// wrote a key. A write command that wrote no key (DEL of a missing key, SADD of a member
/// already there: `darner_engine::keys_written` did not move) changed nothing: it is not
/// written, and not counted as a change, as Redis neither propagates nor counts a call
/// that left `server.dirty` as it was.
pub fn call<R>(
    ctx: &mut ShardCtx,
    spec: &darner_commands::CommandSpec,
    args: &[&[u8]],
    f: impl FnOnce(&mut ShardCtx) -> R,
    failed: impl FnOnce(&R) -> bool,
) -> R {
    // Only a write command is judged by its key writes (reads, most calls, skip all this).
    let write = spec.has(darner_commands::flags::WRITE);
    let watched = write.then(|| {
        (
            darner_engine::keys_written(),
            SAID_UNCHANGED.with(|c| c.replace(false)),
        )
    });
    let recording = enabled();
    let db = ctx.db;
    let outer = recording.then(|| {
        LOCAL.with(|l| {
            let mut l = l.borrow_mut();
            l.depth += 1;
            std::mem::take(&mut l.call)
        })
    });
    let r = f(ctx);
    let succeeded_write = write && !failed(&r);
    let mut wrote = true;
    if let Some((written_before, said_before)) = watched {
        let said = SAID_UNCHANGED.with(|c| c.replace(said_before));
        wrote = changed_something(spec, darner_engine::keys_written() != written_before);
        if succeeded_write && !wrote && !said {
            ctx.count_unchanged();
        }
    }
    if let Some(outer) = outer {
        // Keys the command found past their TTL went first: their DEL precedes it.
        expired(ctx.shard);
        let given = LOCAL.with(|l| {
            let mut l = l.borrow_mut();
            l.depth -= 1;
            std::mem::replace(&mut l.call, outer)
        });
        match given {
            Some(cmds) => {
                for c in cmds {
                    record(c);
                }
            }
            None if succeeded_write && wrote => record_args(db, args),
            None => {}
        }
    }
    r
}

/// Writes `argv` for work on this thread's shard that runs outside a command's handler (a
/// blocked client served, a streamed XREADGROUP's step).
pub fn write(db: usize, argv: Vec<Bytes>) {
    if enabled() {
        record(cmd_of(db, argv));
    }
}

/// What the shard's TTLs removed since the last look, in the order it went: a key as DEL
/// (Redis propagates an expired key so), a hash field as `HDEL key field` (Redis 7.4's
/// `propagateHashFieldDeletion`: one command per field; the last one takes the emptied hash
/// with it), a set member as `SREM key member`. Called right after each command (before what
/// it wrote), after each transaction step and active expiry cycle, and at the end of each
/// loop turn. (While the AOF loads nothing is recorded, and nothing expires.)
pub fn expired(shard: &mut crate::shard::Shard) {
    use darner_engine::Expired;
    if !enabled() {
        return;
    }
    for (db, d) in shard.dbs.iter_mut().enumerate() {
        for what in d.take_expired() {
            match what {
                Expired::Key(key) => record_args(db, &[b"DEL", &key]),
                Expired::Fields(key, fields) => {
                    for f in fields {
                        record_args(db, &[b"HDEL", &key, &f]);
                    }
                }
                Expired::Members(key, members) => {
                    for m in members {
                        record_args(db, &[b"SREM", &key, &m]);
                    }
                }
            }
        }
    }
}

/// A key evicted for maxmemory: written as DEL, as Redis propagates it.
pub fn evicted(db: usize, key: &[u8]) {
    if enabled() {
        record_args(db, &[b"DEL", key]);
    }
}

/// Runs a transaction's step on this thread's shard: what it writes is tagged with the
/// transaction, and its first step here leaves the marker.
pub fn in_tx<R>(tx: Option<(u64, u32)>, f: impl FnOnce() -> R) -> R {
    let Some((id, step)) = tx.filter(|_| enabled()) else {
        return f();
    };
    let before = LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        if l.marked != Some(id) {
            l.marked = Some(id);
            l.items.push(Item::Marker { tx: id });
        }
        l.tx.replace((id, step))
    });
    let r = f();
    LOCAL.with(|l| l.borrow_mut().tx = before);
    r
}

/// What a multi-shard transaction's coordinator writes itself: its commands (each with its
/// step), handed over with the transaction's end when it is dropped, on the coordinator's
/// thread, after every step (so after every shard's part was handed over).
pub struct TxLog {
    pub id: u64,
    step: u32,
    cmds: Vec<(u32, Cmd)>,
    /// The log is cut where it sits (an AOF rewrite's point in time).
    pub barrier: bool,
    /// The replication feed's stream is cut where it sits (a full sync's point in time).
    pub repl_barrier: bool,
}

impl TxLog {
    pub fn new(id: u64) -> TxLog {
        TxLog {
            id,
            step: 0,
            cmds: Vec::new(),
            barrier: false,
            repl_barrier: false,
        }
    }

    pub fn step(&self) -> u32 {
        self.step
    }

    /// The next command of the transaction begins (EXEC's next queued command).
    pub fn next_step(&mut self) {
        self.step += 1;
    }

    /// Writes `argv` at the current step.
    pub fn command(&mut self, db: usize, argv: Vec<Bytes>) {
        self.cmds.push((self.step, cmd_of(db, argv)));
    }
}

impl Drop for TxLog {
    fn drop(&mut self) {
        if enabled() {
            let cmds = std::mem::take(&mut self.cmds);
            if self.repl_barrier {
                LOCAL.with(|l| l.borrow_mut().repl_barriers.push(self.id));
            }
            push(Item::TxDone {
                tx: self.id,
                cmds,
                barrier: self.barrier,
            });
        }
    }
}

/// Whether this thread has recorded anything not handed over yet.
pub fn pending() -> bool {
    LOCAL.with(|l| !l.borrow().items.is_empty())
}

/// Hands what this thread recorded to the AOF thread; returns the chunk's ticket (None when
/// there was nothing).
pub fn flush(shared: &crate::shared::Shared, thread: usize) -> Option<u64> {
    let (items, ticket, repl_barriers) = LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        if l.items.is_empty() {
            return (Vec::new(), 0, Vec::new());
        }
        l.ticket += 1;
        let barriers = std::mem::take(&mut l.repl_barriers);
        (std::mem::take(&mut l.items), l.ticket, barriers)
    });
    if items.is_empty() {
        return None;
    }
    if crate::primary::feeding() {
        // The feed has a merge of its own: its barriers are the full syncs' cuts, not the
        // AOF rewrites'.
        let for_feed = |mut items: Vec<Item>| {
            for it in items.iter_mut() {
                if let Item::TxDone { tx, barrier, .. } = it {
                    *barrier = repl_barriers.contains(tx);
                }
            }
            items
        };
        crate::primary::hand_over(thread, ticket, for_feed(items.clone()));
    }
    shared.aof.hand_over(thread, ticket, items);
    Some(ticket)
}

/// [`flush`] from a shard step (the thread's own id).
pub fn flush_here(shared: &crate::shared::Shared) {
    flush(shared, crate::exec::THREAD.with(|t| t.get()));
}

/// A multi-shard command's coordinator, after it succeeded: the command as sent, for the
/// ones that do not say what they wrote step by step (EXEC and scripts do: their steps'
/// commands are recorded where they run).
pub fn coordinator_command(
    tx: &crate::exec::Tx,
    spec: &darner_commands::CommandSpec,
    args: &[Bytes],
) {
    if enabled() && logged_as_sent(spec) && changed_something(spec, tx.wrote_keys()) {
        tx.log_command(args.to_vec());
    }
}

/// Whether a write command that succeeded changed anything: a command on keys did when it
/// wrote one (`darner_engine::keys_written`: SMOVE of a missing member, COPY of a missing
/// key, DEL of missing keys change nothing, and Redis neither propagates nor counts them);
/// a command without keys (FLUSHALL, FUNCTION LOAD) is taken as changing something, and so
/// is every stream command: a consumer group's changes (XGROUP CREATE, XREADGROUP, XACK,
/// XCLAIM) do not signal their key, as in Redis, where WATCH does not see them either; a
/// stream command that changed nothing says so itself (cmd/stream, `unchanged`).
pub fn changed_something(spec: &darner_commands::CommandSpec, wrote_keys: bool) -> bool {
    wrote_keys || spec.key_specs.is_empty() || spec.group == "stream"
}

/// Whether a multi-shard command that succeeded is written as sent by its coordinator (a
/// write that does not say what it wrote step by step).
pub fn logged_as_sent(spec: &darner_commands::CommandSpec) -> bool {
    // Their steps say what they wrote, where they ran: XREADGROUP its XCLAIMs, the blocking
    // commands the pop or move that served them, at once or later (cmd/list/blocking.rs,
    // cmd/sorted_set/blocking.rs), never themselves (a replayed BLPOP could block the load).
    spec.has(darner_commands::flags::WRITE)
        && !matches!(
            spec.full_name,
            "exec"
                | "xreadgroup"
                | "blpop"
                | "brpop"
                | "blmpop"
                | "blmove"
                | "brpoplpush"
                | "bzpopmin"
                | "bzpopmax"
                | "bzmpop"
        )
}

/// The last ticket this thread handed over.
pub fn last_ticket() -> u64 {
    LOCAL.with(|l| l.borrow().ticket)
}
