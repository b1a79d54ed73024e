//! Transactions as small async tasks, run by a per-thread executor.
//!
//! A command that touches several shards (MSET, RENAME, MULTI/EXEC, KEYS, ...) is written as
//! straight-line async code on the connection's thread: `tx.run(shard, |ctx| ...).await` sends
//! a closure to the shard's thread and resumes with its result. The executor is a slab of
//! futures polled with a no-op waker: a task is re-polled exactly when one of its hops
//! completes, which the worker knows because hop results arrive as messages. No thread ever
//! blocks waiting for another, so two threads coordinating transactions on each other's
//! shards cannot deadlock; lock ordering (see `shard.rs`) does the rest.
//!
//! Hops to the local shard go through a thread-local queue instead of the channel, so they
//! cost no synchronisation at all.

use crate::conn::ClientState;
use crate::msg::{Completion, Msg, Part, Scheduled, TxId};
use crate::sched::{Intents, Quorum};
use crate::shard::ShardCtx;
use crate::shared::Shared;
use bytes::Bytes;
use std::any::Any;
use std::cell::{Cell, RefCell, RefMut};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

pub type Task = Pin<Box<dyn Future<Output = ()>>>;

thread_local! {
    /// Messages for this thread produced by this thread (local hops, lock grants, replies).
    pub static LOCAL: RefCell<VecDeque<Msg>> = const { RefCell::new(VecDeque::new()) };
    /// Results of completed hops, by slot.
    static SLOTS: RefCell<slab::Slab<Option<Box<dyn Any + Send>>>> = RefCell::new(slab::Slab::new());
    /// The task being polled.
    static CURRENT: Cell<usize> = const { Cell::new(usize::MAX) };
    /// This thread's index.
    pub static THREAD: Cell<usize> = const { Cell::new(0) };
    /// Pending timers of this thread's tasks: deadlines, and the hop each one completes
    /// (absent once cancelled or fired).
    static TIMERS: RefCell<BinaryHeap<Reverse<(Instant, u64)>>> = const { RefCell::new(BinaryHeap::new()) };
    static TIMER_HOPS: RefCell<HashMap<u64, Completion>> = RefCell::new(HashMap::new());
    static NEXT_TIMER: Cell<u64> = const { Cell::new(0) };
    /// Tasks that gave the loop a turn ([`next_turn`]): resumed at the start of the next one.
    static NEXT_TURN: RefCell<Vec<Completion>> = const { RefCell::new(Vec::new()) };
}

static NEXT_TX: AtomicU64 = AtomicU64::new(1);

/// A new transaction identity (a task's [`Tx`], or a multi-shard command run without a task:
/// worker/direct.rs).
pub fn new_tx_id() -> TxId {
    NEXT_TX.fetch_add(1, Ordering::Relaxed)
}

/// Sends `m` to thread `t`; to this thread through the local queue.
pub fn post(shared: &Shared, t: usize, m: Msg) {
    if t == THREAD.with(|c| c.get()) {
        LOCAL.with(|l| l.borrow_mut().push_back(m));
    } else {
        shared.send(t, m);
    }
}

/// Stores a hop result (called by the worker on HopDone).
pub fn fill_slot(slot: usize, result: Box<dyn Any + Send>) {
    SLOTS.with(|s| {
        if let Some(x) = s.borrow_mut().get_mut(slot) {
            *x = Some(result);
        }
    });
}

#[derive(Default)]
pub struct Executor {
    tasks: slab::Slab<Task>,
    ready: Vec<usize>,
}

impl Executor {
    pub fn spawn(&mut self, fut: impl Future<Output = ()> + 'static) {
        let id = self.tasks.insert(Box::pin(fut));
        self.ready.push(id);
    }

    pub fn wake(&mut self, task: usize) {
        self.ready.push(task);
    }

    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Polls every ready task once.
    pub fn run_ready(&mut self) {
        let ready = std::mem::take(&mut self.ready);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        for id in ready {
            let Some(task) = self.tasks.get_mut(id) else {
                continue;
            };
            CURRENT.with(|c| c.set(id));
            if task.as_mut().poll(&mut cx).is_ready() {
                drop(self.tasks.remove(id));
            }
            CURRENT.with(|c| c.set(usize::MAX));
        }
    }
}

/// The pending result of a hop.
pub struct Hop<R> {
    slot: usize,
    ready: Option<R>,
    _r: PhantomData<R>,
}

impl<R: 'static> Future for Hop<R> {
    type Output = R;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<R> {
        // SAFETY-free: Hop is Unpin (no self-references), so get_mut is fine.
        let this = self.get_mut();
        if let Some(r) = this.ready.take() {
            return Poll::Ready(r);
        }
        let got = SLOTS.with(|s| {
            let mut s = s.borrow_mut();
            if s.get(this.slot).is_some_and(|x| x.is_some()) {
                s.remove(this.slot)
            } else {
                None
            }
        });
        match got {
            Some(b) => Poll::Ready(*b.downcast::<R>().expect("hop result type")),
            None => Poll::Pending,
        }
    }
}

impl<R> Unpin for Hop<R> {}

impl<R> Hop<R> {
    /// A hop that never completes (a placeholder for one moved out).
    pub fn detached() -> Hop<R> {
        Hop {
            slot: usize::MAX,
            ready: None,
            _r: PhantomData,
        }
    }

    /// Gives up on a result that can no longer arrive (its completion was never sent and
    /// never will be), freeing its slot.
    pub fn forget(self) {
        SLOTS.with(|s| {
            let mut s = s.borrow_mut();
            if s.contains(self.slot) {
                s.remove(self.slot);
            }
        });
    }
}

/// Awaits every hop (all already sent, so they run in parallel): results in order.
pub async fn join<R: 'static>(hops: Vec<Hop<R>>) -> Vec<R> {
    let mut out = Vec::with_capacity(hops.len());
    for h in hops {
        out.push(h.await);
    }
    out
}

/// A result that something else will deliver later (a shard serving a blocked client, the
/// worker cancelling one): the completion to deliver it with and the future that waits for it.
pub fn pending<R: 'static>() -> (Completion, Hop<R>) {
    let done = new_completion();
    let hop = Hop {
        slot: done.slot,
        ready: None,
        _r: PhantomData,
    };
    (done, hop)
}

/// A timer: resolves at its deadline (ms precision: the loop wakes for the nearest deadline).
/// Dropping it before then cancels it.
pub struct Sleep {
    id: u64,
    hop: Hop<()>,
    finished: bool,
}

pub fn sleep_until(deadline: Instant) -> Sleep {
    let (done, hop) = pending::<()>();
    let id = NEXT_TIMER.with(|n| {
        let id = n.get();
        n.set(id + 1);
        id
    });
    TIMERS.with(|t| t.borrow_mut().push(Reverse((deadline, id))));
    TIMER_HOPS.with(|h| h.borrow_mut().insert(id, done));
    Sleep {
        id,
        hop,
        finished: false,
    }
}

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.hop).poll(cx);
        this.finished |= r.is_ready();
        r
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if self.finished {
            return; // its slot was consumed (and may already belong to another hop)
        }
        let unfired = TIMER_HOPS
            .with(|h| h.borrow_mut().remove(&self.id))
            .is_some();
        SLOTS.with(|s| {
            let mut s = s.borrow_mut();
            // Not fired: nothing will fill the slot. Fired and delivered: nobody will read it.
            // Fired with the message still queued: the slot stays until the message fills it
            // (then unread: rare, one small entry).
            if unfired || s.get(self.hop.slot).is_some_and(|x| x.is_some()) {
                s.remove(self.hop.slot);
            }
        });
    }
}

/// The nearest pending timer deadline of this thread.
pub fn next_timer() -> Option<Instant> {
    TIMERS.with(|t| {
        let mut t = t.borrow_mut();
        while let Some(Reverse((at, id))) = t.peek().copied() {
            if TIMER_HOPS.with(|h| h.borrow().contains_key(&id)) {
                return Some(at);
            }
            t.pop(); // cancelled
        }
        None
    })
}

/// Completes the timers due at `now` (their tasks run when the worker pumps the local queue).
pub fn fire_timers(now: Instant) {
    TIMERS.with(|t| {
        let mut t = t.borrow_mut();
        while let Some(Reverse((at, id))) = t.peek().copied() {
            if at > now {
                break;
            }
            t.pop();
            if let Some(done) = TIMER_HOPS.with(|h| h.borrow_mut().remove(&id)) {
                LOCAL.with(|l| {
                    l.borrow_mut().push_back(Msg::HopDone {
                        task: done.task,
                        slot: done.slot,
                        result: Box::new(()),
                    })
                });
            }
        }
    });
}

/// Resolves in the next turn of the worker's loop, after it has polled its sockets and
/// dispatched what they brought: a task that runs long (a busy script) lets the thread serve
/// its other clients meanwhile. Call from inside a task. The loop does not sleep while a task
/// waits here.
pub fn next_turn() -> Hop<()> {
    let (done, hop) = pending::<()>();
    NEXT_TURN.with(|n| n.borrow_mut().push(done));
    hop
}

/// Whether a task waits for the next turn ([`next_turn`]).
pub fn turn_waiting() -> bool {
    NEXT_TURN.with(|n| !n.borrow().is_empty())
}

/// A new turn of the loop starts: the tasks that waited for it run when the worker next pumps
/// the local queue.
pub fn start_turn() {
    let waiting = NEXT_TURN.with(|n| std::mem::take(&mut *n.borrow_mut()));
    if waiting.is_empty() {
        return;
    }
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        for done in waiting {
            l.push_back(Msg::HopDone {
                task: done.task,
                slot: done.slot,
                result: Box::new(()),
            });
        }
    });
}

/// Runs `f` on `shard` (in database `db`) for a task that is no transaction: it queues behind
/// whatever lock the shard has, like a single-shard command. Call from inside a task.
pub fn run_on<R, F>(shared: &Arc<Shared>, shard: usize, db: usize, resp3: bool, f: F) -> Hop<R>
where
    R: Send + 'static,
    F: FnOnce(&mut ShardCtx) -> R + Send + 'static,
{
    let (done, hop) = pending::<R>();
    let back = shared.clone();
    let job: crate::msg::ShardFn = Box::new(move |ctx: &mut ShardCtx| {
        let r = f(ctx);
        crate::notify::done(ctx);
        complete(&back, done, r);
    });
    post(
        shared,
        shard,
        Msg::Run {
            tx: None,
            db,
            resp3,
            writer: None,
            f: job,
        },
    );
    hop
}

thread_local! {
    /// Results held for an fsync, posted by the worker at the end of its turn.
    static HELD_RESULTS: RefCell<Vec<(usize, Msg)>> = const { RefCell::new(Vec::new()) };
}

/// [`complete`] for a result that shows a write of this thread's shard (a blocked client
/// served): under `appendfsync always` it leaves once the write is fsynced
/// (worker/durability.rs takes it with [`take_held_results`]).
pub fn complete_durable<R: Send + 'static>(shared: &Shared, done: Completion, r: R) {
    if shared.aof.acks_wait(shared) {
        let m = Msg::HopDone {
            task: done.task,
            slot: done.slot,
            result: Box::new(r),
        };
        HELD_RESULTS.with(|h| h.borrow_mut().push((done.thread, m)));
    } else {
        complete(shared, done, r);
    }
}

pub fn take_held_results() -> Vec<(usize, Msg)> {
    HELD_RESULTS.with(|h| std::mem::take(&mut *h.borrow_mut()))
}

/// Sends a hop's result back to the task waiting for it.
pub fn complete<R: Send + 'static>(shared: &Shared, done: Completion, r: R) {
    post(
        shared,
        done.thread,
        Msg::HopDone {
            task: done.task,
            slot: done.slot,
            result: Box::new(r),
        },
    );
}

fn new_completion() -> Completion {
    let slot = SLOTS.with(|s| s.borrow_mut().insert(None));
    Completion {
        thread: THREAD.with(|c| c.get()),
        task: CURRENT.with(|c| c.get()),
        slot,
    }
}

/// How a transaction's steps see the clock: EXEC's one instant (if any), and whether the
/// commands come from this replica's primary (then no key counts as expired).
#[derive(Clone, Copy)]
struct StepClock {
    frozen_ms: Option<i64>,
    from_primary: bool,
    /// Reads update the access clock (false for a CLIENT NO-TOUCH client, as its own
    /// commands: Redis looks at the client for every lookup, inside EXEC and scripts too).
    touch: bool,
}

impl StepClock {
    fn apply(self, clock: &mut darner_engine::db::Clock) {
        if let Some(ms) = self.frozen_ms {
            clock.now_ms = ms;
        }
        clock.from_primary = self.from_primary;
        clock.touch = self.touch;
    }
}

/// A part's work as the shard runs it: `f` at the transaction's time (see [`StepClock`]), then the
/// tracking client's reads recorded (`track`: the reader and the part's read keys), then its
/// keyspace events sent; its result boxed for the hop back.
fn part_job<R, F>(
    clock: StepClock,
    track: Option<(crate::tracking::Reader, Vec<Bytes>)>,
    logged: Option<(TxId, u32)>,
    wrote_keys: Arc<AtomicBool>,
    f: F,
) -> crate::msg::PartFn
where
    R: Send + 'static,
    F: FnOnce(&mut ShardCtx) -> R + Send + 'static,
{
    Box::new(move |ctx: &mut ShardCtx| {
        clock.apply(&mut ctx.clock);
        let before = darner_engine::keys_written();
        let r: Box<dyn Any + Send> = Box::new(crate::propagate::in_tx(logged, || {
            let r = f(ctx);
            crate::propagate::expired(ctx.shard);
            r
        }));
        if darner_engine::keys_written() != before {
            wrote_keys.store(true, Ordering::Relaxed);
        }
        // What it wrote reaches the AOF thread before its result reaches the coordinator,
        // which ends the transaction's log after every part (propagate.rs).
        if logged.is_some() {
            crate::propagate::flush_here(ctx.shared);
        }
        if let Some((reader, keys)) = &track {
            for k in keys {
                crate::tracking::remember_later(ctx.shard, k, *reader);
            }
        }
        crate::notify::done(ctx);
        r
    })
}

struct TxInner {
    id: TxId,
    shared: Arc<Shared>,
    db: Cell<usize>,
    resp3: Cell<bool>,
    held: RefCell<Vec<usize>>,
    client: RefCell<ClientState>,
    /// Running as a command queued in MULTI (inside EXEC).
    nested: Cell<bool>,
    /// The client as a tracking reader, when this transaction's reads are to be recorded.
    track: Cell<Option<crate::tracking::Reader>>,
    /// The time every step sees (EXEC: one instant for the whole transaction, as Redis's
    /// command time snapshot; a key does not expire between two queued commands).
    frozen_ms: Cell<Option<i64>>,
    /// The client is this replica's primary (its link): its steps see no key expired.
    from_primary: bool,
    /// Where the command's reply goes (set for a command the connection sent itself), for
    /// parts of it streamed by its shards (stream.rs, `start_tx_segs`).
    dest: Cell<Option<crate::stream::Dest>>,
    /// What it writes to the AOF itself, when it may write (propagate.rs).
    log: RefCell<Option<crate::propagate::TxLog>>,
    /// A step of it wrote a key (`darner_engine::keys_written` moved while it ran): a
    /// multi-shard command whose steps wrote none changed nothing (propagate.rs, `call`).
    wrote_keys: Arc<AtomicBool>,
}

/// A transaction: the handle multi-shard commands use to reach shards.
#[derive(Clone)]
pub struct Tx(Rc<TxInner>);

impl Tx {
    pub fn new(shared: Arc<Shared>, client: ClientState) -> Tx {
        let from_primary = client.master;
        Tx(Rc::new(TxInner {
            id: new_tx_id(),
            shared,
            db: Cell::new(client.db),
            resp3: Cell::new(client.resp3),
            held: RefCell::new(Vec::new()),
            client: RefCell::new(client),
            nested: Cell::new(false),
            track: Cell::new(None),
            frozen_ms: Cell::new(None),
            from_primary,
            dest: Cell::new(None),
            log: RefCell::new(None),
            wrote_keys: Arc::new(AtomicBool::new(false)),
        }))
    }

    /// Whether a step of this transaction wrote a key so far.
    pub fn wrote_keys(&self) -> bool {
        self.0.wrote_keys.load(Ordering::Relaxed)
    }

    /// Whether a step wrote a key so far, forgetting it: a command queued in EXEC (or called
    /// by a script) then sees only what its own steps wrote; [`Tx::note_wrote_keys`] puts
    /// back what came before.
    pub fn take_wrote_keys(&self) -> bool {
        self.0.wrote_keys.swap(false, Ordering::Relaxed)
    }

    /// A key was written (see [`Tx::take_wrote_keys`]).
    pub fn note_wrote_keys(&self) {
        self.0.wrote_keys.store(true, Ordering::Relaxed);
    }

    pub fn id(&self) -> TxId {
        self.0.id
    }

    /// Records what this transaction writes for the AOF (a command that may write, with the
    /// AOF on): its steps on shards are tagged, and it ends with its own commands.
    pub fn start_log(&self) {
        if crate::propagate::enabled() {
            *self.0.log.borrow_mut() = Some(crate::propagate::TxLog::new(self.0.id));
        }
    }

    /// Makes it a barrier in the AOF's log (an AOF rewrite's cut: it holds every shard).
    pub fn start_barrier_log(&self) {
        self.start_log();
        if let Some(l) = self.0.log.borrow_mut().as_mut() {
            l.barrier = true;
        }
    }

    /// Whether its steps are tagged for the AOF and the replication feed (a write's).
    pub fn logging(&self) -> bool {
        self.0.log.borrow().is_some()
    }

    /// Makes it a barrier in the replication feed's stream (a full sync's cut: it holds
    /// every shard).
    pub fn start_repl_barrier_log(&self) {
        if self.0.log.borrow().is_none() {
            self.start_log();
        }
        if let Some(l) = self.0.log.borrow_mut().as_mut() {
            l.repl_barrier = true;
        }
    }

    /// The tag of its steps: the transaction and its current step (None: not logged).
    fn step_clock(&self) -> StepClock {
        StepClock {
            frozen_ms: self.0.frozen_ms.get(),
            from_primary: self.0.from_primary,
            touch: !self.0.client.borrow().no_touch,
        }
    }

    fn log_tag(&self) -> Option<(TxId, u32)> {
        self.0.log.borrow().as_ref().map(|l| (l.id, l.step()))
    }

    /// The next command of the transaction begins (EXEC's next queued command, a script's
    /// next call).
    pub fn next_step(&self) {
        if let Some(l) = self.0.log.borrow_mut().as_mut() {
            l.next_step();
        }
    }

    /// Writes `argv` as one of its commands (a multi-shard command as sent).
    pub fn log_command(&self, argv: Vec<Bytes>) {
        let db = self.db();
        if let Some(l) = self.0.log.borrow_mut().as_mut() {
            l.command(db, argv);
        }
    }

    /// Ends its log: its commands go to the AOF with the transaction's end (before its reply
    /// leaves).
    pub fn end_log(&self) {
        let l = self.0.log.borrow_mut().take();
        drop(l);
    }

    /// Makes every later step of this transaction see `now_ms` as the time.
    pub fn freeze_clock(&self, now_ms: i64) {
        self.0.frozen_ms.set(Some(now_ms));
    }

    /// The reader to record this transaction's reads for (client tracking), if any.
    /// Whether this command's reads are recorded for CLIENT TRACKING (build its parts'
    /// intents with [`Intents::of_reads`]).
    pub fn tracks_reads(&self) -> bool {
        self.0.track.get().is_some()
    }

    pub fn track(&self) -> Option<crate::tracking::Reader> {
        self.0.track.get()
    }

    pub fn set_track(&self, r: Option<crate::tracking::Reader>) {
        self.0.track.set(r);
    }

    pub fn resp3(&self) -> bool {
        self.0.resp3.get()
    }

    /// The protocol its replies are built in from now on (a script's `redis.setresp`: the
    /// commands a script calls answer in the script's protocol, not the client's).
    pub fn set_resp3(&self, resp3: bool) {
        self.0.resp3.set(resp3);
    }

    /// Whether the command runs inside EXEC (blocking commands then never block).
    pub fn nested(&self) -> bool {
        self.0.nested.get()
    }

    pub fn set_nested(&self, nested: bool) {
        self.0.nested.set(nested);
    }

    /// Notes where the command's reply goes (its connection's next reply).
    pub fn set_dest(&self, dest: crate::stream::Dest) {
        self.0.dest.set(Some(dest));
    }

    /// Where shards may stream parts of the command's reply (stream.rs, `start_tx_segs`):
    /// the reply of a command the connection sent itself, not one inside EXEC or a script
    /// (whose replies are built at once).
    pub fn stream_dest(&self) -> Option<crate::stream::Dest> {
        self.0.dest.get().filter(|_| !self.nested())
    }

    pub fn db(&self) -> usize {
        self.0.db.get()
    }

    pub fn set_db(&self, db: usize) {
        self.0.db.set(db);
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.0.shared
    }

    pub fn nshards(&self) -> usize {
        self.0.shared.threads
    }

    pub fn shard_of(&self, key: &[u8]) -> usize {
        crate::cmd::shard_of(key, self.0.shared.threads)
    }

    /// The client's state, as of the command (changes are adopted by the connection after
    /// the transaction ends).
    pub fn client(&self) -> RefMut<'_, ClientState> {
        self.0.client.borrow_mut()
    }

    pub fn into_client(self) -> ClientState {
        match Rc::try_unwrap(self.0) {
            Ok(inner) => inner.client.into_inner(),
            Err(rc) => rc.client.borrow().clone(),
        }
    }

    /// Runs `f` on `shard` (in this transaction when it holds the shard, otherwise queued
    /// behind any lock there) and resolves to its result.
    pub fn run<R, F>(&self, shard: usize, f: F) -> Hop<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut ShardCtx) -> R + Send + 'static,
    {
        let (done, hop) = pending::<R>();
        let shared = self.0.shared.clone();
        let held = self.0.held.borrow().contains(&shard);
        let writer = self.writer();
        let clock = self.step_clock();
        let logged = self.log_tag();
        let wrote_keys = self.0.wrote_keys.clone();
        let job: crate::msg::ShardFn = Box::new(move |ctx: &mut ShardCtx| {
            clock.apply(&mut ctx.clock);
            let before = darner_engine::keys_written();
            let r = crate::propagate::in_tx(logged, || {
                let r = f(ctx);
                // Keys its step found expired: their DEL is part of the transaction.
                crate::propagate::expired(ctx.shard);
                r
            });
            if darner_engine::keys_written() != before {
                wrote_keys.store(true, Ordering::Relaxed);
            }
            // The hop's keyspace events leave before its result can (notify.rs); so does
            // what it wrote, to the AOF thread (propagate.rs).
            crate::notify::done(ctx);
            if logged.is_some() {
                crate::propagate::flush_here(ctx.shared);
            }
            complete(&shared, done, r);
        });
        post(
            &self.0.shared,
            shard,
            Msg::Run {
                tx: held.then_some(self.0.id),
                db: self.db(),
                resp3: self.0.resp3.get(),
                writer,
                f: job,
            },
        );
        hop
    }

    /// Runs `f` on every shard at once (each in parallel) and collects the results in shard
    /// order.
    pub async fn run_all<R, F>(&self, f: F) -> Vec<R>
    where
        R: Send + 'static,
        F: Fn(&mut ShardCtx) -> R + Send + Sync + Clone + 'static,
    {
        let hops: Vec<Hop<R>> = (0..self.nshards())
            .map(|s| {
                let f = f.clone();
                self.run(s, move |ctx| f(ctx))
            })
            .collect();
        join(hops).await
    }

    /// Runs `f` on thread `t` with access to its connections.
    pub fn on_thread<R, F>(&self, t: usize, f: F) -> Hop<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut crate::worker::ThreadCtx) -> R + Send + 'static,
    {
        self.thread_hop(t, f, false)
    }

    /// As [`Tx::on_thread`], but through the thread's inbox even when it is this thread, so
    /// that steps sent in some order (under a lock, from any threads) run in that order on
    /// each thread (CONFIG SET port / bind).
    pub fn on_thread_in_order<R, F>(&self, t: usize, f: F) -> Hop<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut crate::worker::ThreadCtx) -> R + Send + 'static,
    {
        self.thread_hop(t, f, true)
    }

    fn thread_hop<R, F>(&self, t: usize, f: F, inbox: bool) -> Hop<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut crate::worker::ThreadCtx) -> R + Send + 'static,
    {
        let (done, hop) = pending::<R>();
        let shared = self.0.shared.clone();
        let m = Msg::Thread {
            f: Box::new(move |ctx| {
                complete(&shared, done, f(ctx));
            }),
        };
        if inbox {
            self.0.shared.send(t, m);
        } else {
            post(&self.0.shared, t, m);
        }
        hop
    }

    /// Reserves each shard of `plan` with its intents (sched.rs): one message per shard, all
    /// granted in parallel; with several shards the messages go out in the global order.
    /// Shards already reserved are skipped.
    pub async fn reserve(&self, plan: Vec<(usize, Intents)>) {
        let mut msgs = Vec::with_capacity(plan.len());
        let mut hops = Vec::with_capacity(plan.len());
        let mut shards = Vec::with_capacity(plan.len());
        for (s, intents) in plan {
            if self.0.held.borrow().contains(&s) || shards.contains(&s) {
                continue;
            }
            let (done, hop) = pending::<()>();
            hops.push(hop);
            shards.push(s);
            msgs.push((
                s,
                Msg::Schedule(Box::new(Scheduled {
                    tx: self.0.id,
                    intents,
                    part: Part::Reserve { done, first: None },
                })),
            ));
        }
        self.send_parts(msgs);
        for h in hops {
            h.await;
        }
        self.0.held.borrow_mut().extend(shards);
    }

    /// Runs a transaction whose work is known up front (MSET, MGET, DEL, ...): each `f` on its
    /// shard, in one message per shard, its results in `plan`'s order. Each part runs when its
    /// intents are granted, and they are held until every part has run (sched.rs). Inside a
    /// transaction that reserved its shards already (EXEC), the parts are plain steps.
    pub async fn run_parts<R, F>(&self, plan: Vec<(usize, Intents, F)>) -> Vec<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut ShardCtx) -> R + Send + 'static,
    {
        if !self.0.held.borrow().is_empty() || plan.is_empty() {
            return self.plain_steps(plan).await;
        }
        let quorum = Quorum::new(plan.len());
        let writer = self.writer();
        let clock = self.step_clock();
        // A tracking client's reads are recorded by the parts themselves, while they hold
        // their keys (a record made after could miss a write in between).
        let track = self.0.track.get();
        let mut msgs = Vec::with_capacity(plan.len());
        let mut hops = Vec::with_capacity(plan.len());
        for (s, mut intents, f) in plan {
            let (done, hop) = pending::<R>();
            hops.push(hop);
            let reads = std::mem::take(&mut intents.reads);
            let job = part_job(
                clock,
                track.map(|r| (r, reads)),
                self.log_tag(),
                self.0.wrote_keys.clone(),
                f,
            );
            msgs.push((
                s,
                Msg::Schedule(Box::new(Scheduled {
                    tx: self.0.id,
                    intents,
                    part: Part::OneShot {
                        quorum: quorum.clone(),
                        db: self.db(),
                        resp3: self.0.resp3.get(),
                        writer,
                        f: job,
                        done,
                    },
                })),
            ));
        }
        self.send_parts(msgs);
        join(hops).await
    }

    /// Reserves each shard of `plan` with its intents, as [`Tx::reserve`], and runs its first
    /// step there as soon as it is granted, in the same message (RENAME's taking of its source,
    /// MSETNX's check): results in `plan`'s order. Later steps (`Tx::run`) and the release
    /// follow as usual. On shards already reserved, the steps are plain steps.
    pub async fn reserve_then<R, F>(&self, plan: Vec<(usize, Intents, F)>) -> Vec<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut ShardCtx) -> R + Send + 'static,
    {
        if !self.0.held.borrow().is_empty() {
            return self.plain_steps(plan).await;
        }
        let clock = self.step_clock();
        let writer = self.writer();
        let mut msgs = Vec::with_capacity(plan.len());
        let mut hops = Vec::with_capacity(plan.len());
        let mut shards = Vec::with_capacity(plan.len());
        for (s, intents, f) in plan {
            let (done, hop) = pending::<R>();
            hops.push(hop);
            shards.push(s);
            let job = part_job(clock, None, self.log_tag(), self.0.wrote_keys.clone(), f);
            msgs.push((
                s,
                Msg::Schedule(Box::new(Scheduled {
                    tx: self.0.id,
                    intents,
                    part: Part::Reserve {
                        done,
                        first: Some((self.db(), self.0.resp3.get(), writer, job)),
                    },
                })),
            ));
        }
        self.send_parts(msgs);
        let out = join(hops).await;
        self.0.held.borrow_mut().extend(shards);
        out
    }

    /// The steps of `plan` on shards this transaction reserved already (inside EXEC), in
    /// parallel: results in `plan`'s order.
    async fn plain_steps<R, F>(&self, plan: Vec<(usize, Intents, F)>) -> Vec<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut ShardCtx) -> R + Send + 'static,
    {
        let hops: Vec<Hop<R>> = plan.into_iter().map(|(s, _, f)| self.run(s, f)).collect();
        join(hops).await
    }

    /// Posts a transaction's parts: one shard's alone, several in the global order.
    fn send_parts(&self, mut msgs: Vec<(usize, Msg)>) {
        match msgs.len() {
            0 => {}
            1 => {
                let (s, m) = msgs.pop().expect("one message");
                post(&self.0.shared, s, m);
            }
            _ => self.0.shared.send_ordered(msgs),
        }
    }

    /// The client as a writer, when it tracks keys (its own writes' invalidations).
    fn writer(&self) -> Option<crate::tracking::Writer> {
        let c = self.0.client.borrow();
        c.tracking.as_ref().map(|t| crate::tracking::Writer {
            id: c.id,
            noloop: t.noloop,
            at: None,
        })
    }

    /// The shards this transaction holds now.
    pub fn held_shards(&self) -> Vec<usize> {
        self.0.held.borrow().clone()
    }

    /// Releases every reservation held (one message per shard).
    pub fn release(&self) {
        for s in self.0.held.borrow_mut().drain(..) {
            post(&self.0.shared, s, Msg::Release { tx: self.0.id });
        }
    }
}
