//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD / EXISTS / FLUSH / KILL: Lua scripts
//! (crates/scripting runs them; this file gives them the keyspace).
//!
//! **A script is a transaction.** No client sees half of it, whatever shards its keys live
//! on, and keys it did not declare in KEYS (legal outside cluster mode, and common) are as
//! safe as the declared ones.
//!
//! **Which shards.** A script reserves its declared keys' intents only (sched.rs), so scripts
//! and commands on other keys, and other shards, go on meanwhile: Redis stops everything
//! while a script runs, Darner only what the script declared. Every command the script calls
//! is checked against them first ([`Declared::within`]). A run that reaches beyond them (an
//! undeclared key, a command bound to no key such as KEYS or FLUSHDB, MOVE, or an effect no
//! undo could take back such as PUBLISH) cannot simply take more: VLL's order is fixed when a
//! transaction is scheduled, and a later claim could wait on a transaction that waits on it.
//! So the run is stopped (its engine's abort: its commands fail from then on and its hook
//! ends it), undone, and started again with every shard reserved, as Redis runs every
//! script; the script is remembered (`Scripts::wide`) and reserves every shard from its next
//! run on. Undone means: before a run that holds only its declared keys writes a key for the
//! first time, the key's entry is copied ([`Journal`]); the undo puts the copies back. Nobody
//! saw the writes in between (their keys were held), so the rerun is the only run anyone
//! sees. Where a copy could not make the undo invisible, the write is treated as reaching
//! beyond: a value over 64 KiB (copying it on every run would cost more than reserving every
//! shard), a key some client WATCHes (its EXEC would fail for a write that was undone), and
//! any write while keyspace notifications are on (their messages cannot be taken back).
//! What a rerun repeats is harmless: `redis.log` lines, and a tracking client's
//! invalidation for a key that ends as it was.
//!
//! **Where it runs.** On the connection's thread, in that thread's Lua engine (a Lua state is
//! not `Send`; each thread has its own, and a shared map of script bodies lets EVALSHA find
//! a script loaded on another thread). `redis.call` runs the command as EXEC runs a queued
//! one (`transactions::run_in_tx`): on its key's shard, by message when that is another
//! thread. The script therefore runs on a stack of its own (a stackful coroutine,
//! `corosensei`): `redis.call` suspends it while the command hops, the thread goes on serving
//! its other work meanwhile, and the reply resumes it. (Lua 5.1 cannot yield across its own
//! C calls, such as `pcall`, so a Lua-level coroutine could not do this.) One script runs on
//! a thread at a time (its engine is the thread's): a run takes the thread's [`Turn`] before
//! it reserves anything, so that one waiting for the turn holds nothing.
//!
//! **A busy script.** Past `busy-reply-threshold`, other clients get `-BUSY` at dispatch
//! (`Scripts::busy`), on every thread. A script that loops in Lua without calling a command
//! never suspends on its own, so its engine's instruction hook (every 100000 instructions)
//! suspends it too, at most once a millisecond, once it is past the threshold (a "service"
//! yield): `drive` then waits for the next turn of the worker's loop (`exec::next_turn`),
//! which reads the thread's sockets and dispatches what they brought (-BUSY, SCRIPT KILL,
//! FUNCTION KILL, SHUTDOWN NOSAVE, as Redis's `processEventsWhileBlocked` from its hook),
//! and resumes the script. Meanwhile the script's engine stays borrowed by its run: another
//! EVAL or FUNCTION command of that thread gets -BUSY at dispatch, or waits for the script's
//! reservation, and never reaches the engine.
//!
//! **Killing.** SCRIPT KILL / FUNCTION KILL, from any thread, ask the running script's engine
//! to stop (its instruction hook checks the flag); a script that has written answers
//! UNKILLABLE. SHUTDOWN NOSAVE stops the server under a busy script: the script's stack is
//! given up, not unwound (`Suspended`).

use super::{ConnCtx, Locks, Reg, TxFuture};
use crate::exec::{self, Tx};
use crate::sched::{fingerprint, Intents};
use crate::shard::ShardCtx;
use bytes::Bytes;
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use darner_commands::{flags, CommandSpec};
use darner_engine::entry::Entry;
use darner_resp::{Frame, ReplyWriter};
use darner_scripting::{
    errors, CallCtx, EvalEngine, FunctionEngine, Host, KillOutcome, RestorePolicy, RunControl,
    ScriptFlags,
};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub fn register(r: &mut Reg) {
    r.tx("eval", Locks::None, eval);
    r.tx("evalsha", Locks::None, evalsha);
    r.tx("eval_ro", Locks::None, eval_ro);
    r.tx("evalsha_ro", Locks::None, evalsha_ro);
    r.tx("script|load", Locks::All, script_load);
    r.tx("script|flush", Locks::All, script_flush);
    r.conn("script|exists", script_exists);
    r.conn("script|kill", script_kill);
    r.conn("script|help", script_help);
    r.tx("fcall", Locks::None, fcall);
    r.tx("fcall_ro", Locks::None, fcall_ro);
    r.tx("function|load", Locks::All, function_load);
    r.tx("function|delete", Locks::All, function_delete);
    r.tx("function|flush", Locks::All, function_flush);
    r.tx("function|restore", Locks::All, function_restore);
    r.tx("function|list", Locks::All, function_list);
    r.tx("function|dump", Locks::All, function_dump);
    r.conn("function|stats", function_stats);
    r.conn("function|kill", function_kill);
    r.conn("function|help", function_help);
}

/// What every thread's engine shares: the bodies of the scripts loaded anywhere (EVALSHA on
/// one thread of a script loaded on another), SCRIPT FLUSH's generation, and the engines'
/// kill switches.
pub struct Scripts {
    bodies: Mutex<HashMap<String, Bytes>>,
    flushes: AtomicU64,
    /// Each thread's EVAL engine's kill switch and run clock, registered when the engine is
    /// made. Read without a lock: while any script runs, every command of every thread asks
    /// whether one is busy.
    controls: Registry<Arc<RunControl>>,
    /// FUNCTION libraries: every library's code, and a generation bumped at each change;
    /// each thread's function engine reloads them when its generation is behind.
    libraries: Mutex<Vec<Bytes>>,
    library_changes: AtomicU64,
    /// How many functions those libraries register (FUNCTION STATS).
    functions: AtomicUsize,
    /// Each thread's function engine's control and the function it runs now (FUNCTION STATS:
    /// its name, its FCALL's arguments, and since when). The function slot is written only
    /// by its thread, so its lock is never contended by another FCALL.
    function_controls: Registry<(Arc<RunControl>, RunningFunction)>,
    /// Scripts and functions running now (suspended in a hop included): while none runs, the
    /// BUSY check of every command is this one load.
    running: AtomicUsize,
    /// Scripts (by SHA-1) and functions (by `f:` and name) seen reaching beyond their declared
    /// keys: they reserve every shard from the start (see "Which shards" at the top).
    wide: Mutex<std::collections::HashSet<String>>,
    /// Whether `wide` has any: until one script reaches beyond its keys, runs do not take
    /// its lock (every run on every thread would).
    any_wide: std::sync::atomic::AtomicBool,
}

/// The function a thread's engine runs now: name, FCALL arguments, start.
type RunningFunction = Mutex<Option<(String, Vec<Bytes>, Instant)>>;

/// An append-only list read without a lock: one slot per thread (the thread count is known
/// at start-up), filled once when the thread makes its engine. A registration past the
/// slots (not expected: engines live on the shard threads) goes to a locked overflow list
/// that readers look at only once it is used.
struct Registry<T> {
    slots: Box<[std::sync::OnceLock<T>]>,
    next: AtomicUsize,
    overflow: Mutex<Vec<Arc<T>>>,
    overflowed: std::sync::atomic::AtomicBool,
}

impl<T> Registry<T> {
    fn new(capacity: usize) -> Registry<T> {
        Registry {
            slots: (0..capacity).map(|_| std::sync::OnceLock::new()).collect(),
            next: AtomicUsize::new(0),
            overflow: Mutex::new(Vec::new()),
            overflowed: Default::default(),
        }
    }

    /// Adds `item`; returns the index [`Registry::get`] finds it under.
    fn register(&self, item: T) -> usize {
        let i = self.next.fetch_add(1, Ordering::AcqRel);
        match self.slots.get(i) {
            Some(slot) => {
                let _ = slot.set(item);
            }
            None => {
                self.overflow.lock().unwrap().push(Arc::new(item));
                self.overflowed.store(true, Ordering::Release);
            }
        }
        i
    }

    /// The item registered under `i`.
    fn get(&self, i: usize) -> Option<Registered<'_, T>> {
        match self.slots.get(i) {
            Some(slot) => slot.get().map(Registered::Slot),
            None => {
                let overflow = self.overflow.lock().unwrap();
                overflow
                    .get(i - self.slots.len())
                    .cloned()
                    .map(Registered::Overflow)
            }
        }
    }

    /// Whether any registered item satisfies `f`; the first that does, mapped by `f`.
    fn find_map<R>(&self, mut f: impl FnMut(&T) -> Option<R>) -> Option<R> {
        let n = self.next.load(Ordering::Acquire).min(self.slots.len());
        if let Some(r) = self.slots[..n]
            .iter()
            .filter_map(|s| s.get())
            .find_map(&mut f)
        {
            return Some(r);
        }
        if self.overflowed.load(Ordering::Acquire) {
            return self.overflow.lock().unwrap().iter().find_map(|t| f(t));
        }
        None
    }

    fn any(&self, mut f: impl FnMut(&T) -> bool) -> bool {
        self.find_map(|t| f(t).then_some(())).is_some()
    }

    fn for_each(&self, mut f: impl FnMut(&T)) {
        self.any(|t| {
            f(t);
            false
        });
    }
}

/// Where a registered item lives.
enum Registered<'a, T> {
    Slot(&'a T),
    Overflow(Arc<T>),
}

impl<T> std::ops::Deref for Registered<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            Registered::Slot(t) => t,
            Registered::Overflow(t) => t,
        }
    }
}

const ERR_BUSY_SCRIPT: &[u8] =
    b"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
const ERR_BUSY_FUNCTION: &[u8] =
    b"BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

impl Scripts {
    /// The shared state of `threads` shard threads.
    pub fn new(threads: usize) -> Scripts {
        Scripts {
            bodies: Default::default(),
            flushes: Default::default(),
            controls: Registry::new(threads),
            libraries: Default::default(),
            library_changes: Default::default(),
            functions: Default::default(),
            function_controls: Registry::new(threads),
            running: Default::default(),
            wide: Default::default(),
            any_wide: Default::default(),
        }
    }

    /// The `-BUSY` error a command without the allow-busy flag gets now: a script or function
    /// has run for `threshold_ms` or more (busy-reply-threshold), None otherwise.
    pub fn busy(&self, threshold_ms: i64) -> Option<&'static [u8]> {
        if self.running.load(Ordering::Acquire) == 0 {
            return None;
        }
        let over = |c: &Arc<RunControl>| c.is_busy(threshold_ms.max(0) as u64);
        if self.controls.any(|c| over(c)) {
            return Some(ERR_BUSY_SCRIPT);
        }
        if self.function_controls.any(|(c, _)| over(c)) {
            return Some(ERR_BUSY_FUNCTION);
        }
        None
    }

    /// The `-BUSY` error of an EVAL script past `threshold_ms`, None otherwise.
    fn busy_eval(&self, threshold_ms: i64) -> Option<&'static [u8]> {
        self.busy(threshold_ms).filter(|e| *e == ERR_BUSY_SCRIPT)
    }
}

/// busy-reply-threshold now (ms).
fn threshold(shared: &crate::shared::Shared) -> i64 {
    shared
        .config
        .hot
        .busy_reply_threshold
        .load(Ordering::Relaxed)
}

/// SHUTDOWN under a busy script: only SHUTDOWN NOSAVE may stop the server (Redis's rule);
/// the `-BUSY` error for any other, None when no script is busy.
pub fn shutdown_refused(shared: &crate::shared::Shared, nosave: bool) -> Option<&'static [u8]> {
    if nosave {
        return None;
    }
    shared.scripts.busy(threshold(shared))
}

/// Counts a script as running for as long as it lives.
struct Running<'a>(&'a AtomicUsize);

impl<'a> Running<'a> {
    fn start(n: &'a AtomicUsize) -> Running<'a> {
        n.fetch_add(1, Ordering::AcqRel);
        Running(n)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A script's stack: enough for Lua's C stack at its nesting limits (crates/scripting caps
/// recursion well below it). Kept per thread and reused.
const STACK_SIZE: usize = 1 << 20;

thread_local! {
    /// This thread's engine and the SCRIPT FLUSH generation it has seen.
    static ENGINE: RefCell<Option<(EvalEngine, u64)>> = const { RefCell::new(None) };
    static STACK: Cell<Option<DefaultStack>> = const { Cell::new(None) };
    /// This thread's function engine and the library generation it holds.
    static FUNCTIONS: RefCell<Option<(FunctionEngine, u64)>> = const { RefCell::new(None) };
    /// Where this thread's function engine is registered in `Scripts::function_controls`.
    static FUNCTION_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Runs `f` with this thread's function engine, brought up to the shared libraries first.
fn with_functions<R>(scripts: &Scripts, f: impl FnOnce(&mut FunctionEngine) -> R) -> Option<R> {
    FUNCTIONS.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        let (engine, seen) = slot.get_or_insert_with(|| {
            let e = FunctionEngine::new();
            let i = scripts
                .function_controls
                .register((e.control(), Mutex::new(None)));
            FUNCTION_SLOT.set(i);
            (e, u64::MAX)
        });
        let gen = scripts.library_changes.load(Ordering::Acquire);
        if *seen != gen {
            engine.flush();
            for code in scripts.libraries.lock().unwrap().iter() {
                // Loaded before on another thread: it loads here too.
                let _ = engine.load(&mut LoadHost, code, false);
            }
            *seen = gen;
        }
        Some(f(engine))
    })
}

impl Scripts {
    /// Every function library's code (a snapshot's FUNCTION2 records).
    pub fn library_codes(&self) -> Vec<Bytes> {
        self.libraries.lock().unwrap().clone()
    }

    /// Replaces the libraries with those of `codes` (a loaded snapshot's), after checking that
    /// each loads (`replace`: a later library of a name replaces an earlier one, rather than
    /// being an error): on an error nothing changes. Every thread's engine reloads them
    /// before its next use.
    pub fn install_libraries(&self, codes: &[Vec<u8>], replace: bool) -> Result<(), String> {
        let mut engine = FunctionEngine::new();
        for code in codes {
            engine.load(&mut LoadHost, code, replace)?;
        }
        let mut libs = self.libraries.lock().unwrap();
        *libs = engine.libraries().map(|l| l.code.clone()).collect();
        self.functions
            .store(engine.function_count(), Ordering::Release);
        self.library_changes.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}

/// After a FUNCTION command changed this thread's engine: its libraries become everyone's.
fn publish_libraries(scripts: &Scripts, engine: &FunctionEngine) {
    let mut libs = scripts.libraries.lock().unwrap();
    *libs = engine.libraries().map(|l| l.code.clone()).collect();
    scripts
        .functions
        .store(engine.function_count(), Ordering::Release);
    let gen = scripts.library_changes.fetch_add(1, Ordering::AcqRel) + 1;
    FUNCTIONS.with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            if let Some((_, seen)) = slot.as_mut() {
                *seen = gen;
            }
        }
    });
}

/// The host of a library's code at FUNCTION LOAD: only `redis.log` reaches it.
struct LoadHost;

impl Host for LoadHost {
    fn call(&mut self, _: &[&[u8]], _: &CallCtx) -> Frame {
        error_frame(errors::UNKNOWN_COMMAND)
    }
}

/// Runs `f` with this thread's engine (made on first use; flushed if a SCRIPT FLUSH happened
/// since it last ran). None when a script of this thread is running (runs take the thread's
/// `Turn`, and a busy one makes SCRIPT LOAD answer -BUSY; answered as an error rather than
/// trusted).
fn with_engine<R>(scripts: &Scripts, f: impl FnOnce(&mut EvalEngine) -> R) -> Option<R> {
    ENGINE.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        let gen = scripts.flushes.load(Ordering::Acquire);
        let (engine, seen) = slot.get_or_insert_with(|| {
            let e = EvalEngine::new();
            scripts.controls.register(e.control());
            (e, gen)
        });
        if *seen != gen {
            engine.flush();
            *seen = gen;
        }
        Some(f(engine))
    })
}

const ERR_ENGINE_BUSY: &[u8] = b"ERR a script is already running on this thread";

fn eval(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(run(tx, args, false, false))
}

fn evalsha(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(run(tx, args, true, false))
}

fn eval_ro(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(run(tx, args, false, true))
}

fn evalsha_ro(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(run(tx, args, true, true))
}

/// The number of keys (EVAL's third argument), checked as Redis does.
fn numkeys(args: &[Bytes]) -> Result<usize, &'static [u8]> {
    let n = super::parse_int(&args[2]).ok_or(super::ERR_NOT_INT)?;
    if n > (args.len() - 3) as i64 {
        return Err(b"ERR Number of keys can't be greater than number of args");
    }
    if n < 0 {
        return Err(b"ERR Number of keys can't be negative");
    }
    Ok(n as usize)
}

/// Finds (loading it into this thread's engine if it was loaded elsewhere) or compiles the
/// script: its SHA-1 and flags, or the error reply.
fn prepare(
    scripts: &Scripts,
    script: &Bytes,
    by_sha: bool,
) -> Result<(String, ScriptFlags), Vec<u8>> {
    let loaded = with_engine(scripts, |engine| {
        if !by_sha {
            return engine.load(script).map_err(String::into_bytes);
        }
        let sha = String::from_utf8_lossy(script).to_ascii_lowercase();
        if let Some(flags) = engine.flags(&sha) {
            return Ok((sha, flags));
        }
        let body = scripts.bodies.lock().unwrap().get(&sha).cloned();
        match body {
            Some(body) => engine.load(&body).map_err(String::into_bytes),
            None => Err(b"NOSCRIPT No matching script. Please use EVAL.".to_vec()),
        }
    })
    .ok_or_else(|| ERR_ENGINE_BUSY.to_vec())??;
    if !by_sha {
        scripts
            .bodies
            .lock()
            .unwrap()
            .entry(loaded.0.clone())
            .or_insert_with(|| script.clone());
    }
    Ok(loaded)
}

async fn run(tx: Tx, args: Vec<Bytes>, by_sha: bool, read_only: bool) -> Vec<u8> {
    let _turn = Turn::take(&tx).await;
    let resp3 = tx.resp3();
    let err = |e: &[u8]| super::with_writer(resp3, |w| w.error(e));
    let n = match numkeys(&args) {
        Ok(n) => n,
        Err(e) => return err(e),
    };
    let shared = tx.shared().clone();
    let (sha, script_flags) = match prepare(&shared.scripts, &args[1], by_sha) {
        Ok(x) => x,
        Err(e) => return err(&e),
    };
    if read_only && !script_flags.eval_compat_mode && !script_flags.no_writes {
        return err(b"ERR Can not execute a script with write flag using *_ro command.");
    }
    let oom = match oom_rule(&tx, script_flags) {
        Ok(oom) => oom,
        Err(e) => return err(&e),
    };
    reply(&tx, Run::Script(sha), &args, n, read_only, oom).await
}

/// Redis's maxmemory rules for a script, with the process over maxmemory and nothing to evict
/// when the command came: a script with flags but neither `allow-oom` nor `no-writes` is
/// refused (Err); otherwise Ok(whether its commands that may grow memory are refused until it
/// has written: a script without flags, or with `no-writes`; never with `allow-oom`).
fn oom_rule(tx: &Tx, flags: ScriptFlags) -> Result<bool, Cow<'static, [u8]>> {
    // A script whose flags allow writes is a write command to Redis's MISCONF rule
    // (bgsave.rs `writes_denied`); one without flags meets it at its first write.
    if !flags.eval_compat_mode && !flags.no_writes {
        if let Some(denied) = crate::bgsave::writes_denied(tx.shared()) {
            return Err(denied.message());
        }
        if crate::primary::too_few_good_replicas(tx.shared()) {
            return Err(crate::primary::ERR_NOREPLICAS.into());
        }
    }
    if !tx.client().oom_at_dispatch || flags.allow_oom {
        return Ok(false);
    }
    if !flags.eval_compat_mode && !flags.no_writes {
        return Err(crate::evict::ERR_OOM.into());
    }
    Ok(true)
}

/// Runs the script or function with `args[3..]` (the first `n` its keys) and writes its
/// result in the client's protocol. `oom`: see [`oom_rule`].
async fn reply(tx: &Tx, what: Run, args: &[Bytes], n: usize, ro: bool, oom: bool) -> Vec<u8> {
    let resp3 = tx.resp3();
    let keys: Vec<Bytes> = args[3..3 + n].to_vec();
    let argv: Vec<Bytes> = args[3 + n..].to_vec();
    let frame = schedule(tx, &what, &keys, &argv, (ro, oom)).await;
    tx.set_resp3(resp3);
    let mut out = Vec::new();
    darner_scripting::write_reply(&frame, &mut ReplyWriter::new(&mut out, resp3));
    out
}

/// Reserves what the run needs and runs it: its declared keys, or every shard for a script
/// known to reach beyond them; a run that reaches beyond them is undone and runs again over
/// every shard (see "Which shards" at the top).
async fn schedule(
    tx: &Tx,
    what: &Run,
    keys: &[Bytes],
    argv: &[Bytes],
    (ro, oom): (bool, bool),
) -> Frame {
    let scripts = &tx.shared().scripts;
    // Inside EXEC every shard is held already (a queued script makes EXEC reserve them all).
    let nested = !tx.held_shards().is_empty();
    let mut wide = nested
        || (scripts.any_wide.load(Ordering::Acquire)
            && scripts.wide.lock().unwrap().contains(&what.name()));
    // A SELECT inside the script changes the script's database only, as in Redis 7: the
    // caller's (and a rerun's) is the one it came with.
    let db = tx.db();
    let keep_db = || {
        tx.set_db(db);
        tx.client().db = db;
    };
    loop {
        keep_db();
        let declared = if wide {
            if !nested {
                tx.reserve(every_shard(tx.nshards())).await;
            }
            None
        } else {
            let write = !ro;
            let mut plan: Vec<(usize, Intents)> = Vec::new();
            for k in keys {
                let s = tx.shard_of(k);
                match plan.iter_mut().find(|(p, _)| *p == s) {
                    Some((_, i)) => i.push(k, write),
                    None => {
                        let mut i = Intents::default();
                        i.push(k, write);
                        plan.push((s, i));
                    }
                }
            }
            for (_, i) in plan.iter_mut() {
                i.normalize();
            }
            tx.reserve(plan).await;
            Some(Rc::new(Declared {
                keys: keys.iter().map(|k| fingerprint(k)).collect(),
                beyond: Cell::new(false),
            }))
        };
        let mut journal = Journal::default();
        let limits = Limits {
            ro,
            oom,
            misconf: crate::bgsave::writes_denied(tx.shared()),
            noreplicas: crate::primary::too_few_good_replicas(tx.shared()),
        };
        let frame = drive(tx, what, keys, argv, limits, declared.clone(), &mut journal).await;
        match declared {
            Some(d) if d.beyond.get() => {
                // Nobody saw the writes (their keys are held): put them back, let go, and
                // start again holding everything.
                journal.undo(tx).await;
                tx.release();
                scripts.wide.lock().unwrap().insert(what.name());
                scripts.any_wide.store(true, Ordering::Release);
                wide = true;
            }
            _ => {
                keep_db();
                return frame;
            }
        }
    }
}

fn every_shard(n: usize) -> Vec<(usize, Intents)> {
    (0..n).map(|s| (s, Intents::whole())).collect()
}

/// What a run may not do: write (EVAL_RO, FCALL_RO), or, over maxmemory, run a command that
/// may grow memory before it has written ([`oom_rule`]).
#[derive(Clone, Copy)]
struct Limits {
    ro: bool,
    oom: bool,
    /// Writes are refused with MISCONF (bgsave.rs `writes_denied`) until the run has written.
    misconf: Option<crate::bgsave::DiskError>,
    /// Writes are refused with NOREPLICAS (primary.rs `too_few_good_replicas`) until the run
    /// has written.
    noreplicas: bool,
}

/// A run that holds only its declared keys.
struct Declared {
    /// Their fingerprints (`sched::fingerprint`).
    keys: Vec<u64>,
    /// Set once the run reached beyond them: its commands fail from then on, it is stopped,
    /// undone, and run again over every shard.
    beyond: Cell<bool>,
}

impl Declared {
    /// Whether `call` stays within the declared keys; Some(the keys to copy before it runs,
    /// for a write), None if it reaches beyond them. Beyond means: a key not declared, a
    /// command that reads or writes keys it does not name (KEYS, SCAN, FLUSHDB, SORT ... BY,
    /// RANDOMKEY), one that writes another database (MOVE, COPY ... DB), and effects an undo
    /// could not take back (PUBLISH, CONFIG SET, ...).
    fn within(&self, cmd: &super::Command, args: &[&[u8]]) -> Option<Vec<Bytes>> {
        let spec = cmd.spec;
        if spec.has(flags::TOUCHES_ARBITRARY_KEYS) {
            return None;
        }
        let has_keys = match cmd.handler {
            super::Handler::Conn(_) => {
                let effect = flags::WRITE | flags::PUBSUB | flags::ADMIN;
                return (spec.flags & effect == 0).then(Vec::new);
            }
            super::Handler::Key(_) | super::Handler::Tx(_, Locks::Keys | Locks::Parts) => true,
            super::Handler::Tx(..) => false,
        };
        let writes = spec.has(flags::WRITE);
        if !has_keys || (writes && matches!(spec.name, "move" | "copy")) {
            return None;
        }
        let at = darner_commands::key_positions(spec, args);
        if at.is_empty() {
            return None;
        }
        let mut copy = Vec::new();
        for &i in at.iter() {
            if !self.keys.contains(&fingerprint(args[i])) {
                return None;
            }
            if writes {
                copy.push(Bytes::copy_from_slice(args[i]));
            }
        }
        Some(copy)
    }
}

/// Values a run holding only its declared keys copies before writing them, so that it can be
/// undone; one bigger than this (in memory) is not copied, and the run goes wide instead.
const UNDO_COPY_LIMIT: usize = 64 * 1024;

/// What a run holding only its declared keys wrote, as it was before: per key (first write
/// only), its shard, database and old entry (None: it did not exist).
#[derive(Default)]
struct Journal {
    saved: Vec<(usize, Saved)>,
}

/// A key as it was before a run wrote it: its database, name and entry (None: absent).
type Saved = (usize, Bytes, Option<Entry>);

impl Journal {
    /// The keys of `keys` (in the current database) not copied yet, by shard.
    fn unsaved(&self, tx: &Tx, keys: &[Bytes]) -> Vec<(usize, Vec<Bytes>)> {
        let db = tx.db();
        let mut by_shard: Vec<(usize, Vec<Bytes>)> = Vec::new();
        for k in keys {
            let seen = self
                .saved
                .iter()
                .any(|(_, (d, key, _))| *d == db && key == k);
            let s = tx.shard_of(k);
            match by_shard.iter_mut().find(|(p, _)| *p == s) {
                _ if seen => {}
                Some((_, v)) if v.contains(k) => {}
                Some((_, v)) => v.push(k.clone()),
                None => by_shard.push((s, vec![k.clone()])),
            }
        }
        by_shard
    }

    /// Copies `keys` (by shard, from [`Journal::unsaved`]) before a command writes them, one
    /// hop per shard. False when one cannot be taken back (see [`copy_entries`]).
    async fn save(&mut self, tx: &Tx, by_shard: Vec<(usize, Vec<Bytes>)>) -> bool {
        let db = tx.db();
        let hops: Vec<_> = by_shard
            .into_iter()
            .map(|(s, keys)| tx.run(s, move |ctx| (s, copy_entries(ctx, db, keys))))
            .collect();
        let mut ok = true;
        for (s, got) in crate::exec::join(hops).await {
            match got {
                Some(v) => self.saved.extend(v.into_iter().map(|e| (s, e))),
                None => ok = false,
            }
        }
        ok
    }

    /// Copies `keys` and runs a single-shard command's `step` in one hop to their shard (the
    /// common case: a script's write of one key). None when a key cannot be taken back (the
    /// command did not run).
    async fn save_and_run(
        &mut self,
        tx: &Tx,
        keys: Vec<Bytes>,
        (shard, step): (
            usize,
            impl FnOnce(&mut ShardCtx) -> Vec<u8> + Send + 'static,
        ),
    ) -> Option<Vec<u8>> {
        let db = tx.db();
        let got = tx
            .run(shard, move |ctx| {
                let saved = copy_entries(ctx, db, keys)?;
                Some((saved, step(ctx)))
            })
            .await;
        let (saved, reply) = got?;
        self.saved.extend(saved.into_iter().map(|e| (shard, e)));
        Some(reply)
    }

    /// Puts every saved key back as it was.
    async fn undo(self, tx: &Tx) {
        let mut by_shard: Vec<(usize, Vec<Saved>)> = Vec::new();
        for (s, saved) in self.saved {
            match by_shard.iter_mut().find(|(p, _)| *p == s) {
                Some((_, v)) => v.push(saved),
                None => by_shard.push((s, vec![saved])),
            }
        }
        let hops: Vec<_> = by_shard
            .into_iter()
            .map(|(s, items)| {
                tx.run(s, move |ctx| {
                    let clock = ctx.clock;
                    for (db, k, old) in items {
                        let mut view = ctx.shard.dbs[db].view(clock);
                        view.delete(&k);
                        if let Some(e) = old {
                            view.set(e);
                        }
                    }
                })
            })
            .collect();
        crate::exec::join(hops).await;
    }
}

/// Copies of `keys` of database `db` on this shard as they are, for an undo; None when one
/// cannot be taken back invisibly: too big, WATCHed by a client, or keyspace notifications on
/// (an undone write would have been seen).
fn copy_entries(ctx: &mut ShardCtx, db: usize, keys: Vec<Bytes>) -> Option<Vec<Saved>> {
    if crate::notify::enabled(ctx.shared) {
        return None;
    }
    let clock = ctx.clock;
    let mut view = ctx.shard.dbs[db].view(clock);
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        if view.db().has_watchers(&k) {
            return None;
        }
        let old = match view.peek(&k) {
            None => None,
            Some(e) if e.memory() > UNDO_COPY_LIMIT => return None,
            Some(e) => Some(e.clone_as(&k)),
        };
        out.push((db, k, old));
    }
    Some(out)
}

/// One script or function at a time on a thread (its engine is the thread's), in arrival
/// order; held for the whole run, including its reservation. Taken before the reservation, so
/// that a run waiting here holds nothing anyone waits for.
struct Turn {
    shared: Arc<crate::shared::Shared>,
}

thread_local! {
    /// Whether a run has this thread's turn, and the runs waiting for it.
    static TURN: RefCell<(bool, Vec<crate::msg::Completion>)> = const { RefCell::new((false, Vec::new())) };
}

impl Turn {
    /// This thread's turn, once free; None inside EXEC (which holds every shard: no other run
    /// of this thread can be between its hops then).
    async fn take(tx: &Tx) -> Option<Turn> {
        if !tx.held_shards().is_empty() {
            return None;
        }
        loop {
            let wait = TURN.with(|t| {
                let mut t = t.borrow_mut();
                if !t.0 {
                    t.0 = true;
                    return None;
                }
                let (done, hop) = crate::exec::pending::<()>();
                t.1.push(done);
                Some(hop)
            });
            match wait {
                None => {
                    return Some(Turn {
                        shared: tx.shared().clone(),
                    })
                }
                Some(hop) => hop.await,
            }
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // Every waiter looks again (one that is gone cannot hold the turn up).
        let waiters = TURN.with(|t| {
            let mut t = t.borrow_mut();
            t.0 = false;
            std::mem::take(&mut t.1)
        });
        for w in waiters {
            crate::exec::complete(&self.shared, w, ());
        }
    }
}

/// A command a script calls, on its way out of the script's stack.
struct Call {
    cmd: &'static super::Command,
    args: Vec<Bytes>,
    resp3: bool,
    /// Keys to copy before it runs (a write of a run holding only its declared keys).
    save: Vec<Bytes>,
}

/// What a script run is: an EVAL script by SHA-1, or a function by name.
#[derive(Clone)]
enum Run {
    Script(String),
    Function(String),
}

impl Run {
    /// Its name in `Scripts::wide`.
    fn name(&self) -> String {
        match self {
            Run::Script(sha) => sha.clone(),
            Run::Function(name) => format!("f:{name}"),
        }
    }

    /// The end of Redis's "Slow script detected" warning for it.
    fn slow_warning(&self) -> String {
        let (kill, name) = match self {
            Run::Script(sha) => ("SCRIPT KILL", sha),
            Run::Function(name) => ("FUNCTION KILL", name),
        };
        format!("You can try killing the script using the {kill} command. Script name is: {name}.")
    }
}

/// What a script's stack hands out when it suspends.
enum Out {
    /// A command the script calls: run it, and resume the script with its reply.
    Call(Call),
    /// The script is past busy-reply-threshold (it has run this many ms): give the thread a
    /// turn of its loop, then resume it.
    Service(u64),
}

type ScriptCoroutine = Coroutine<Vec<u8>, Out, Frame, DefaultStack>;

/// A script's coroutine. Dropped unfinished (its task dropped when its thread stops, at
/// SHUTDOWN under a busy script), it is given up, not unwound: unwinding would cross Lua's
/// C frames. The process is exiting; its stack is not reused.
struct Suspended(Option<ScriptCoroutine>);

impl Suspended {
    /// The coroutine (present until `drive` takes its stack back, after it finished).
    fn get(&mut self) -> &mut ScriptCoroutine {
        self.0
            .as_mut()
            .expect("the coroutine is taken only once it finished")
    }
}

impl Drop for Suspended {
    fn drop(&mut self) {
        if let Some(co) = self.0.take() {
            if co.started() && !co.done() {
                std::mem::forget(co);
            }
        }
    }
}

/// The error a command of a run that reached beyond its declared keys gets (the run is
/// stopped and started again; no client sees it).
const ERR_RESCHEDULED: &str = "ERR the script is being rescheduled";

/// The two engines' busy callbacks.
trait BusyHook {
    fn set_busy(&mut self, f: impl FnMut(u64) + 'static);
    fn clear_busy(&mut self);
}

impl BusyHook for EvalEngine {
    fn set_busy(&mut self, f: impl FnMut(u64) + 'static) {
        self.set_busy_callback(f);
    }
    fn clear_busy(&mut self) {
        self.clear_busy_callback();
    }
}

impl BusyHook for FunctionEngine {
    fn set_busy(&mut self, f: impl FnMut(u64) + 'static) {
        self.set_busy_callback(f);
    }
    fn clear_busy(&mut self) {
        self.clear_busy_callback();
    }
}

/// Runs `f`, a run of a script on `engine` inside the coroutine of `y`, with the service
/// yield as the engine's busy callback: past busy-reply-threshold, at most once a
/// millisecond, the script suspends with [`Out::Service`].
fn serviced<E: BusyHook, R>(
    engine: &mut E,
    y: &Yielder<Vec<u8>, Out>,
    shared: &Arc<crate::shared::Shared>,
    f: impl FnOnce(&mut E) -> R,
) -> R {
    /// Removes the callback however the run ends.
    struct Clear<'a, E: BusyHook>(&'a mut E);
    impl<E: BusyHook> Drop for Clear<'_, E> {
        fn drop(&mut self) {
            self.0.clear_busy();
        }
    }
    let yielder: *const Yielder<Vec<u8>, Out> = y;
    let shared = shared.clone();
    let mut last: Option<u64> = None;
    engine.set_busy(move |ms| {
        if ms < threshold(&shared).max(0) as u64 || last == Some(ms) {
            return;
        }
        last = Some(ms);
        // SAFETY: this callback runs only from the instruction hook of the script that `f`
        // runs, on the stack of the coroutine that `y` belongs to (the engine runs nothing
        // else meanwhile: it is borrowed by this run). `Clear` removes the callback before
        // `serviced` returns, so the yielder, which lives as long as the coroutine's body
        // that called `serviced`, outlives every call. While suspended, nothing touches the
        // engine (it stays borrowed) and the coroutine is resumed by `drive` only.
        unsafe {
            (*yielder).suspend(Out::Service(ms));
        }
    });
    let guard = Clear(engine);
    f(guard.0)
}

/// Runs the script on its own stack; each command it calls is run here, outside that stack,
/// and its reply handed back.
async fn drive(
    tx: &Tx,
    what: &Run,
    keys: &[Bytes],
    argv: &[Bytes],
    limits: Limits,
    declared: Option<Rc<Declared>>,
    journal: &mut Journal,
) -> Frame {
    let shared = tx.shared().clone();
    let stack = STACK
        .with(Cell::take)
        .map_or_else(|| DefaultStack::new(STACK_SIZE), Ok);
    let Ok(stack) = stack else {
        return Frame::Error(Bytes::from_static(b"ERR could not allocate a script stack"));
    };
    let host_declared = declared.clone();
    let (keys, argv) = (keys.to_vec(), argv.to_vec());
    // Shared with the script's stack: the warning below names it.
    let what = std::rc::Rc::new(what.clone());
    let run = what.clone();
    let co: ScriptCoroutine = Coroutine::with_stack(stack, move |y: &Yielder<Vec<u8>, Out>, _| {
        let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
        let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_ref()).collect();
        let host = |control| ScriptHost {
            yielder: y,
            limits,
            control,
            declared: host_declared,
        };
        let ran = match &*run {
            Run::Script(sha) => with_engine(&shared.scripts, |engine| {
                serviced(engine, y, &shared, |engine| {
                    engine.evalsha(&mut host(engine.control()), sha, &keys, &argv)
                })
            }),
            Run::Function(name) => with_functions(&shared.scripts, |engine| {
                serviced(engine, y, &shared, |engine| {
                    engine.fcall(&mut host(engine.control()), name, &keys, &argv)
                })
            }),
        };
        ran.unwrap_or_else(|| Frame::Error(Bytes::from_static(ERR_ENGINE_BUSY)))
    });
    let mut warned = false;
    let mut co = Suspended(Some(co));
    let _running = Running::start(&tx.shared().scripts.running);
    let mut input = Vec::new();
    let frame = loop {
        match co.get().resume(std::mem::take(&mut input)) {
            CoroutineResult::Yield(Out::Call(call)) => {
                tx.set_resp3(call.resp3);
                tx.next_step();
                let called = call.cmd;
                let unsaved = journal.unsaved(tx, &call.save);
                let ran = match (unsaved.len(), call.cmd.handler) {
                    (0, _) => Some(super::transactions::run_in_tx(tx, call.cmd, call.args).await),
                    // A single-shard command: its keys share its shard.
                    (1, super::Handler::Key(f)) => {
                        let keys = unsaved.into_iter().flat_map(|(_, k)| k).collect();
                        let step = super::transactions::key_step(tx, call.cmd, f, call.args);
                        journal.save_and_run(tx, keys, step).await
                    }
                    _ => match journal.save(tx, unsaved).await {
                        true => Some(super::transactions::run_in_tx(tx, call.cmd, call.args).await),
                        false => None,
                    },
                };
                input = match ran {
                    Some(reply) => {
                        // A write the script made counts in `server.dirty` as Redis's call()
                        // counts it (once a call here), unless it said it changed nothing (its
                        // `undirty`, bumped where it ran).
                        if called.spec.has(darner_commands::flags::WRITE)
                            && reply.first() != Some(&b'-')
                        {
                            let thread = exec::THREAD.with(|t| t.get());
                            crate::shared::bump(&tx.shared().stats[thread].dirty, 1);
                        }
                        reply
                    }
                    None => {
                        if let Some(d) = &declared {
                            d.beyond.set(true);
                        }
                        Vec::new()
                    }
                };
            }
            CoroutineResult::Yield(Out::Service(ms)) => {
                if !warned {
                    warned = true;
                    crate::log::warning(&format!(
                        "Slow script detected: still in execution after {ms} milliseconds. {}",
                        what.slow_warning()
                    ));
                }
                exec::next_turn().await
            }
            CoroutineResult::Return(frame) => break frame,
        }
    };
    if let Some(c) = co.0.take() {
        STACK.with(|s| s.set(Some(c.into_stack())));
    }
    if matches!(&frame, Frame::Error(e) if e.starts_with(b"ERR Script killed by user")) {
        crate::log::warning("Lua script killed by user with SCRIPT KILL.");
    }
    frame
}

/// The server's side of `redis.call` for a script running in [`drive`].
struct ScriptHost<'y> {
    yielder: &'y Yielder<Vec<u8>, Out>,
    limits: Limits,
    /// The engine's run control: a write makes the script unkillable.
    control: Arc<RunControl>,
    /// The declared keys, when the run holds only those.
    declared: Option<Rc<Declared>>,
}

impl ScriptHost<'_> {
    /// The run reached beyond its declared keys: stop it (it is undone and run again).
    fn beyond(&self) -> Frame {
        self.control.abort();
        error_frame(ERR_RESCHEDULED)
    }
}

fn lookup(args: &[&[u8]]) -> Option<&'static CommandSpec> {
    let spec = darner_commands::lookup(args[0])?;
    let alone = args.len() < 2 && super::registry().get(spec).is_some();
    if spec.is_container() && !alone {
        return darner_commands::lookup_subcommand(spec, args.get(1)?);
    }
    Some(spec)
}

fn error_frame(text: &str) -> Frame {
    Frame::Error(Bytes::copy_from_slice(text.as_bytes()))
}

impl Host for ScriptHost<'_> {
    fn call(&mut self, args: &[&[u8]], ctx: &CallCtx) -> Frame {
        let Some(spec) = lookup(args) else {
            return error_frame(errors::UNKNOWN_COMMAND);
        };
        let Some(cmd) = super::registry().get(spec) else {
            return error_frame(errors::UNKNOWN_COMMAND);
        };
        if !spec.arity_ok(args.len()) {
            return error_frame(errors::WRONG_ARITY);
        }
        if spec.has(flags::NOSCRIPT) {
            return error_frame(errors::NOT_ALLOWED);
        }
        let writes = spec.has(flags::WRITE);
        if writes && (self.limits.ro || ctx.flags.no_writes) {
            return error_frame(errors::WRITE_IN_READONLY);
        }
        // Redis stops a script's writes after a failed background save only before its first
        // write, as for maxmemory below: after it, stopping would leave half of it.
        if let Some(denied) = self.limits.misconf.filter(|_| writes) {
            if !self.control.has_written() {
                return Frame::Error(Bytes::from(denied.message().into_owned()));
            }
        }
        // The same for too few good replicas (min-replicas-to-write).
        if self.limits.noreplicas && writes && !self.control.has_written() {
            return Frame::Error(Bytes::from_static(crate::primary::ERR_NOREPLICAS));
        }
        // Redis stops a script over maxmemory only before its first write: after it, stopping
        // would leave half of it.
        if self.limits.oom && spec.has(flags::DENYOOM) && !self.control.has_written() {
            return Frame::Error(Bytes::from_static(crate::evict::ERR_OOM));
        }
        let mut save = Vec::new();
        if let Some(d) = &self.declared {
            match d.within(cmd, args) {
                Some(keys) if !d.beyond.get() => save = keys,
                _ => {
                    d.beyond.set(true);
                    return self.beyond();
                }
            }
        }
        let call = Call {
            cmd,
            args: args.iter().map(|a| Bytes::copy_from_slice(a)).collect(),
            resp3: ctx.resp == 3,
            save,
        };
        let reply = self.yielder.suspend(Out::Call(call));
        if self.declared.as_ref().is_some_and(|d| d.beyond.get()) {
            // Its keys could not be saved for an undo: the command did not run.
            return self.beyond();
        }
        let frame = match darner_resp::decode(&reply, &darner_resp::Limits::default()) {
            Ok(Some((f, _))) => f,
            _ => error_frame("ERR the command's reply could not be read"),
        };
        if writes && !matches!(frame, Frame::Error(_)) {
            self.control.note_write();
        }
        frame
    }

    fn log(&mut self, level: darner_scripting::LogLevel, msg: &[u8]) {
        let text = String::from_utf8_lossy(msg);
        match level {
            darner_scripting::LogLevel::Warning => crate::log::warning(&text),
            darner_scripting::LogLevel::Notice => crate::log::notice(&text),
            darner_scripting::LogLevel::Verbose | darner_scripting::LogLevel::Debug => {
                crate::log::verbose(&text)
            }
        }
    }
}

// ---- SCRIPT ----------------------------------------------------------------------------------

fn script_load(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let shared = tx.shared().clone();
        match prepare(&shared.scripts, &args[2], false) {
            Ok((sha, _)) => super::with_writer(resp3, |w| w.bulk(sha.as_bytes())),
            Err(e) => super::with_writer(resp3, |w| w.error(&e)),
        }
    })
}

fn script_flush(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        if let Some(mode) = args.get(2) {
            let ok = mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync");
            if !ok || args.len() > 3 {
                return super::with_writer(resp3, |w| {
                    w.error(b"ERR SCRIPT FLUSH only support SYNC|ASYNC option")
                });
            }
        }
        let scripts = &tx.shared().scripts;
        scripts.bodies.lock().unwrap().clear();
        // Every thread's engine starts afresh when it next runs (`with_engine`).
        scripts.flushes.fetch_add(1, Ordering::AcqRel);
        super::with_writer(resp3, |w| w.ok())
    })
}

fn script_exists(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let bodies = ctx.shared.scripts.bodies.lock().unwrap();
    w.array(args.len() - 2);
    for sha in &args[2..] {
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        w.int(bodies.contains_key(&sha) as i64);
    }
}

fn script_kill(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    kill_reply(&ctx.shared.scripts, true, w);
}

/// SCRIPT KILL (`eval`) or FUNCTION KILL, as Redis answers them: NOTBUSY, UNKILLABLE once
/// the script wrote, and -BUSY naming the other command when what runs is the other kind.
fn kill_reply(scripts: &Scripts, eval: bool, w: &mut ReplyWriter) {
    let running_eval = scripts
        .controls
        .find_map(|c| c.is_running().then(|| c.clone()));
    let running_function = || {
        scripts
            .function_controls
            .find_map(|(c, _)| c.is_running().then(|| c.clone()))
    };
    let (control, is_eval) = match running_eval {
        Some(c) => (c, true),
        None => match running_function() {
            Some(c) => (c, false),
            None => return w.error(ERR_NOTBUSY),
        },
    };
    let outcome = if control.has_written() {
        KillOutcome::Unkillable
    } else if eval && !is_eval {
        return w.error(ERR_BUSY_FUNCTION);
    } else if !eval && is_eval {
        return w.error(ERR_BUSY_SCRIPT);
    } else {
        control.kill()
    };
    match outcome {
        KillOutcome::NotBusy => w.error(ERR_NOTBUSY),
        KillOutcome::Unkillable => w.error(
            b"UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
        ),
        KillOutcome::Killed => w.ok(),
    }
}

const ERR_NOTBUSY: &[u8] = b"NOTBUSY No scripts in execution right now.";

/// SCRIPT HELP: Redis's lines, word for word (clients and tools show them as they are).
fn script_help(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    super::server::help_reply(
        w,
        args[0],
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
}

// ---- FCALL and FUNCTION ------------------------------------------------------------------------

fn fcall(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(run_function(tx, args, false))
}

fn fcall_ro(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(run_function(tx, args, true))
}

async fn run_function(tx: Tx, args: Vec<Bytes>, read_only: bool) -> Vec<u8> {
    let _turn = Turn::take(&tx).await;
    let resp3 = tx.resp3();
    let err = |e: &[u8]| super::with_writer(resp3, |w| w.error(e));
    let n = match numkeys(&args) {
        Ok(n) => n,
        Err(e) => return err(e),
    };
    let shared = tx.shared().clone();
    let name = String::from_utf8_lossy(&args[1]).into_owned();
    let flags = match with_functions(&shared.scripts, |e| e.function_flags(&name)) {
        None => return err(ERR_ENGINE_BUSY),
        Some(None) => return err(b"ERR Function not found"),
        Some(Some(f)) => f,
    };
    if read_only && !flags.no_writes {
        return err(b"ERR Can not execute a script with write flag using *_ro command.");
    }
    let oom = match oom_rule(&tx, flags) {
        Ok(oom) => oom,
        Err(e) => return err(&e),
    };
    /// Clears FUNCTION STATS's running function however the run ends.
    struct Ran<'a>(Option<Registered<'a, (Arc<RunControl>, RunningFunction)>>);
    impl Drop for Ran<'_> {
        fn drop(&mut self) {
            if let Some(slot) = &self.0 {
                *slot.1.lock().unwrap() = None;
            }
        }
    }
    // This thread's slot: only FUNCTION STATS ever reads it from another thread.
    let slot = shared.scripts.function_controls.get(FUNCTION_SLOT.get());
    if let Some(slot) = &slot {
        *slot.1.lock().unwrap() = Some((name.clone(), args.clone(), Instant::now()));
    }
    let _ran = Ran(slot);
    reply(&tx, Run::Function(name), &args, n, read_only, oom).await
}

/// Runs a change of the libraries on this thread's engine and publishes the result.
fn change_libraries(
    tx: &Tx,
    f: impl FnOnce(&mut FunctionEngine) -> Result<Option<String>, String>,
) -> Vec<u8> {
    let resp3 = tx.resp3();
    let scripts = &tx.shared().scripts;
    let r = with_functions(scripts, |engine| {
        let r = f(engine);
        if r.is_ok() {
            publish_libraries(scripts, engine);
        }
        r
    });
    super::with_writer(resp3, |w| match r {
        None => w.error(ERR_ENGINE_BUSY),
        Some(Err(e)) => w.error(e.as_bytes()),
        Some(Ok(Some(name))) => w.bulk(name.as_bytes()),
        Some(Ok(None)) => w.ok(),
    })
}

fn function_load(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let (replace, code) = match &args[2..] {
            [code] => (false, code),
            [opt, code] if opt.eq_ignore_ascii_case(b"replace") => (true, code),
            [opt, _] => {
                let msg = format!("ERR Unknown option given: {}", String::from_utf8_lossy(opt));
                return super::with_writer(tx.resp3(), |w| w.error(msg.as_bytes()));
            }
            _ => {
                return super::with_writer(tx.resp3(), |w| w.error(b"ERR Function code is missing"))
            }
        };
        change_libraries(&tx, |e| e.load(&mut LoadHost, code, replace).map(Some))
    })
}

fn function_delete(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let name = String::from_utf8_lossy(&args[2]).into_owned();
        change_libraries(&tx, |e| e.delete(&name).map(|()| None))
    })
}

fn flush_mode_ok(args: &[Bytes]) -> bool {
    match args.get(2) {
        None => true,
        Some(m) => {
            args.len() == 3 && (m.eq_ignore_ascii_case(b"async") || m.eq_ignore_ascii_case(b"sync"))
        }
    }
}

fn function_flush(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        if !flush_mode_ok(&args) {
            return super::with_writer(tx.resp3(), |w| {
                w.error(b"ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
            });
        }
        change_libraries(&tx, |e| {
            e.flush();
            Ok(None)
        })
    })
}

fn function_restore(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let policy = match args.get(3) {
            None => RestorePolicy::Append,
            Some(p) if p.eq_ignore_ascii_case(b"append") => RestorePolicy::Append,
            Some(p) if p.eq_ignore_ascii_case(b"replace") => RestorePolicy::Replace,
            Some(p) if p.eq_ignore_ascii_case(b"flush") => RestorePolicy::Flush,
            Some(_) => {
                return super::with_writer(tx.resp3(), |w| {
                    w.error(b"ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")
                })
            }
        };
        if args.len() > 4 {
            return super::with_writer(tx.resp3(), |w| w.error(b"ERR syntax error"));
        }
        let payload = args[2].clone();
        change_libraries(&tx, |e| {
            e.restore(&mut LoadHost, &payload, policy).map(|()| None)
        })
    })
}

fn function_dump(tx: Tx, _args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        match with_functions(&tx.shared().scripts, |e| e.dump()) {
            Some(payload) => super::with_writer(resp3, |w| w.bulk(&payload)),
            None => super::with_writer(resp3, |w| w.error(ERR_ENGINE_BUSY)),
        }
    })
}

fn function_list(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let mut pattern: Option<Bytes> = None;
        let mut with_code = false;
        let mut i = 2;
        while i < args.len() {
            let a = &args[i];
            if a.eq_ignore_ascii_case(b"withcode") {
                if with_code {
                    return super::with_writer(resp3, |w| {
                        w.error(b"ERR Unknown argument withcode")
                    });
                }
                with_code = true;
                i += 1;
            } else if a.eq_ignore_ascii_case(b"libraryname") && i + 1 < args.len() {
                if pattern.is_some() {
                    return super::with_writer(resp3, |w| {
                        w.error(b"ERR library name argument was already given")
                    });
                }
                pattern = Some(args[i + 1].clone());
                i += 2;
            } else {
                let msg = format!("ERR Unknown argument {}", String::from_utf8_lossy(a));
                return super::with_writer(resp3, |w| w.error(msg.as_bytes()));
            }
        }
        let out = with_functions(&tx.shared().scripts, |e| {
            super::with_writer(resp3, |w| {
                let libs: Vec<_> = e
                    .libraries()
                    .filter(|l| {
                        pattern.as_ref().is_none_or(|p| {
                            darner_engine::glob::glob_match(p, l.name.as_bytes(), false)
                        })
                    })
                    .collect();
                w.array(libs.len());
                for l in libs {
                    w.map(if with_code { 4 } else { 3 });
                    w.bulk(b"library_name");
                    w.bulk(l.name.as_bytes());
                    w.bulk(b"engine");
                    w.bulk(l.engine.as_bytes());
                    w.bulk(b"functions");
                    w.array(l.functions.len());
                    for f in &l.functions {
                        w.map(3);
                        w.bulk(b"name");
                        w.bulk(f.name.as_bytes());
                        w.bulk(b"description");
                        match &f.description {
                            Some(d) => w.bulk(d),
                            None => w.null(),
                        }
                        w.bulk(b"flags");
                        let names = f.flags.names();
                        w.set(names.len());
                        for n in names {
                            w.simple(n.as_bytes());
                        }
                    }
                    if with_code {
                        w.bulk(b"library_code");
                        w.bulk(&l.code);
                    }
                }
            })
        });
        out.unwrap_or_else(|| super::with_writer(resp3, |w| w.error(ERR_ENGINE_BUSY)))
    })
}

fn function_stats(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    let scripts = &ctx.shared.scripts;
    // Redis answers it only while no EVAL script is busy.
    if let Some(e) = scripts.busy_eval(threshold(ctx.shared)) {
        return w.error(e);
    }
    // The function that started last, if several threads run one.
    let mut running: Option<(String, Vec<Bytes>, Instant)> = None;
    scripts.function_controls.for_each(|(_, slot)| {
        if let Some(r) = slot.lock().unwrap().as_ref() {
            if running.as_ref().is_none_or(|(_, _, since)| r.2 > *since) {
                running = Some(r.clone());
            }
        }
    });
    let libs = scripts.libraries.lock().unwrap().len();
    let functions = scripts.functions.load(Ordering::Acquire);
    w.map(2);
    w.bulk(b"running_script");
    match running {
        Some((name, command, since)) => {
            w.map(3);
            w.bulk(b"name");
            w.bulk(name.as_bytes());
            w.bulk(b"command");
            w.array(command.len());
            for a in &command {
                w.bulk(a);
            }
            w.bulk(b"duration_ms");
            w.int(since.elapsed().as_millis() as i64);
        }
        None => w.null(),
    }
    w.bulk(b"engines");
    w.map(1);
    w.bulk(b"LUA");
    w.map(2);
    w.bulk(b"libraries_count");
    w.int(libs as i64);
    w.bulk(b"functions_count");
    w.int(functions as i64);
}

fn function_kill(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    kill_reply(&ctx.shared.scripts, false, w);
}

/// FUNCTION HELP: Redis's lines, word for word.
fn function_help(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    super::server::help_reply(
        w,
        args[0],
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::Registry;

    #[test]
    fn registry_finds_items_in_slots_and_past_them() {
        let r = Registry::new(2);
        assert_eq!(r.find_map(|x: &u32| Some(*x)), None);
        let at: Vec<usize> = (10..15).map(|x| r.register(x)).collect();
        assert_eq!(at, vec![0, 1, 2, 3, 4]);
        // Slots first, then the overflow list, in registration order.
        assert_eq!(r.find_map(|x| (*x > 11).then_some(*x)), Some(12));
        for (i, x) in at.iter().zip(10..) {
            assert_eq!(*r.get(*i).unwrap(), x);
        }
        assert!(r.get(5).is_none());
        let mut seen = Vec::new();
        r.for_each(|x| seen.push(*x));
        assert_eq!(seen, vec![10, 11, 12, 13, 14]);
        assert!(r.any(|x| *x == 14) && !r.any(|x| *x == 15));
    }
}
