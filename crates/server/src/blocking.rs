//! Clients blocked on keys: BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP,
//! XREAD and XREADGROUP.
//!
//! A blocking command is a transaction task (it may name keys on several shards). With the
//! locks of all its keys' shards held it first tries to serve itself; when every key is empty
//! it registers one [`Waiter`] on each key, on the key's shard, releases the locks and waits.
//! Holding the locks while looking and registering means no push can slip in between.
//!
//! A write to a key with waiters makes the key "ready" in the engine (the same signal WATCH
//! uses). When its shard is free of transactions (so a MULTI/EXEC that pushes and then reads
//! sees its own result first, as in Redis), the worker serves the key's waiters in the order
//! they blocked: each waiter is claimed with one compare-and-swap (a waiter registered on
//! keys of several shards can be claimed only once), the data is taken on the spot (the pop
//! happens before any other command can run on the shard), and the result goes to the
//! waiting task as a message. A timeout or a disconnect claims the waiter the same way, so
//! exactly one of "served", "timed out" and "cancelled" happens. The task then removes its
//! registrations from the other keys.
//!
//! Keys are served right after the command that wrote them, before its reply leaves (Redis
//! serves them after each command too): a client that has seen a write's reply sees what that
//! write woke as done. A BLMOVE / BRPOPLPUSH whose destination lives on another shard takes the
//! element on the source's shard and pushes it in a second step ([`BlockOp::second_step`]): a
//! task on the serving thread that hops to the destination's shard. The serving step returns
//! these tasks ([`Mover`]); the worker holds the writer's reply until they are done (an
//! output fence on an inline writer's connection, or the batch result held back), so no
//! client that saw the reply can see the destination change afterwards. For a moment the
//! element is in neither list, which only the two lists' own readers could notice. (Redis
//! Cluster requires both keys in one slot, and one slot is always one shard here, so
//! cluster-style clients never see even that.)

use crate::exec::{self, Tx, THREAD};
use crate::msg::{Completion, TxId};
use crate::shard::{Shard, ShardCtx};
use crate::shared::Shared;
use bytes::Bytes;
use darner_engine::Clock;
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// What a key can do for a blocked command now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Missing,
    /// Another type: the command answers WRONGTYPE (when this is the first existing key).
    WrongType,
    /// It can serve the command.
    Ready,
}

/// What a blocked command does when one of its keys can serve it.
pub trait BlockOp: Send + Sync {
    /// What `key` (in the command's database, on this shard) can do for it now.
    fn kind(&self, ctx: &mut ShardCtx, key: &[u8]) -> KeyKind;

    /// Whether `key` can serve the waiter now.
    fn ready(&self, ctx: &mut ShardCtx, key: &[u8]) -> bool {
        self.kind(ctx, key) == KeyKind::Ready
    }
    /// Takes what the waiter asked for from `key` (`ready` just said yes) and returns it,
    /// encoded as the command wants to see it in [`Outcome::Served`].
    fn serve(&self, ctx: &mut ShardCtx, key: &[u8]) -> Vec<u8>;

    /// Work that serving leaves for other shards, given what [`BlockOp::serve`] returned:
    /// `Ok` (the default) when the payload is final, else the step that finishes the work
    /// and yields the final payload (run as a task on the serving thread).
    fn second_step(&self, _at: StepAt, payload: Vec<u8>) -> Result<Vec<u8>, SecondStep> {
        Ok(payload)
    }

    /// Whether a waiter that the key cannot serve holds up the ones behind it (a pop: the
    /// first come is served first). False for XREAD, whose waiters each wait past their own
    /// id: one waiting for a later id must not keep the others from entries they can take.
    fn fifo(&self) -> bool {
        true
    }
}

/// Where a served waiter's second step runs from: its database and protocol, the key that
/// served it, and the server.
pub struct StepAt<'a> {
    pub shared: &'a Arc<Shared>,
    pub key: &'a [u8],
    pub db: usize,
    pub resp3: bool,
}

/// The rest of a served command's work on other shards; yields the waiter's payload.
pub type SecondStep = Pin<Box<dyn Future<Output = Vec<u8>>>>;

/// A served waiter's second step and its delivery, as a task for the serving thread: the
/// writes that woke it reply only after it is done.
pub type Mover = Pin<Box<dyn Future<Output = ()>>>;

/// How a wait ended.
pub enum Outcome {
    /// `key` served the waiter; `payload` is what [`BlockOp::serve`] returned.
    Served { key: Bytes, payload: Vec<u8> },
    /// The client disconnected (or was killed).
    Cancelled,
    /// CLIENT UNBLOCK ended the wait: as a timeout would, or (`error`) with an error.
    Unblocked { error: bool },
}

/// The reply of a wait ended by CLIENT UNBLOCK ... ERROR.
pub const ERR_UNBLOCKED: &[u8] = b"UNBLOCKED client unblocked via CLIENT UNBLOCK";

/// One blocked client, registered on every key it waits for.
pub struct Waiter {
    id: u64,
    claimed: AtomicBool,
    done: Completion,
    op: Arc<dyn BlockOp>,
    db: usize,
    resp3: bool,
}

impl Waiter {
    fn claim(&self) -> bool {
        self.claimed
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

static NEXT_WAITER: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The waiters of this thread's clients, by client id (to cancel them on disconnect).
    static BLOCKED: RefCell<HashMap<u64, Arc<Waiter>>> = RefCell::new(HashMap::new());
}

/// Blocked clients of this server (INFO's `blocked_clients`).
pub static BLOCKED_CLIENTS: AtomicU64 = AtomicU64::new(0);

/// Clients waiting on keys (registered on some shard): while there are none, a transaction
/// skips looking for clients its writes woke ([`serve_before_release`]).
pub static KEY_WAITERS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Second steps started by a transaction's serving hop on this thread, for the worker to
    /// run as tasks after the hop ([`take_stashed`]).
    static STASHED: RefCell<Vec<Mover>> = const { RefCell::new(Vec::new()) };
}

/// The tasks [`serve_before_release`]'s hops left on this thread.
pub fn take_stashed() -> Vec<Mover> {
    STASHED.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

/// Serves, on every shard a transaction holds, the clients blocked on keys it wrote, before it
/// lets go of them (Redis serves them right after EXEC or the multi-key command, before its
/// reply). Returns what to await after the release and before replying: each shard's second
/// steps (a BLMOVE's push into a shard the transaction may still hold).
pub async fn serve_before_release(tx: &Tx) -> Vec<exec::Hop<()>> {
    if KEY_WAITERS.load(Ordering::Acquire) == 0 {
        return Vec::new();
    }
    let mut done = Vec::new();
    let mut hops = Vec::new();
    for s in tx.held_shards() {
        let (finished, wait) = exec::pending::<()>();
        done.push(wait);
        let shared = tx.shared().clone();
        let me = tx.id();
        hops.push(tx.run(s, move |ctx| {
            let now = ctx.now_ms();
            let movers = serve_ready(ctx.shard, &shared, now, Some(me));
            if movers.is_empty() {
                exec::complete(&shared, finished, ());
                return;
            }
            STASHED.with(|st| {
                st.borrow_mut().push(Box::pin(async move {
                    for m in movers {
                        m.await;
                    }
                    exec::complete(&shared, finished, ());
                }))
            });
        }));
    }
    for h in hops {
        h.await;
    }
    done
}

/// A key of one database.
type DbKey = (usize, Box<[u8]>);

/// The waiters of one shard, per (database, key), in blocking order.
#[derive(Default)]
pub struct Registry {
    keys: HashMap<DbKey, std::collections::VecDeque<Arc<Waiter>>>,
}

impl Registry {
    /// No client is blocked on this shard's keys.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

fn register(ctx: &mut ShardCtx, keys: &[Bytes], w: &Arc<Waiter>) {
    for k in keys {
        ctx.shard.dbs[w.db].block_on(k);
        ctx.shard
            .blocked
            .keys
            .entry((w.db, k.as_ref().into()))
            .or_default()
            .push_back(w.clone());
    }
}

fn unregister(shard: &mut Shard, db: usize, keys: &[Bytes], id: u64) {
    for k in keys {
        let slot = (db, k.as_ref().into());
        if let Some(q) = shard.blocked.keys.get_mut(&slot) {
            q.retain(|w| w.id != id);
            if q.is_empty() {
                shard.blocked.keys.remove(&slot);
                shard.dbs[db].unblock(k);
            }
        }
    }
}

/// Serves the waiters of every key made ready since the last call (the worker calls this when
/// the shard holds no transaction lock). Returns the second steps of the waiters served that
/// still have work on other shards, for the worker to run before the writers' replies leave.
#[must_use]
///
/// `me`: the transaction serving (its own keys are served), or None. A key another
/// transaction holds is left ready for later: its clients are served once it is released.
pub fn serve_ready(
    shard: &mut Shard,
    shared: &Arc<Shared>,
    now_ms: i64,
    me: Option<TxId>,
) -> Vec<Mover> {
    let mut movers = Vec::new();
    if shard.blocked.keys.is_empty() {
        return movers;
    }
    let mut held: Vec<(usize, Box<[u8]>)> = Vec::new();
    // Serving writes (a pop, a BLMOVE's push) may make more keys ready: go on until none is.
    loop {
        let mut any = false;
        for db in 0..shard.dbs.len() {
            let Some(ready) = shard.dbs[db].take_ready() else {
                continue;
            };
            any = true;
            for key in ready {
                if !shard.lock.sched.idle() && shard.lock.sched.held_by_other(&key, me) {
                    held.push((db, key));
                    continue;
                }
                serve_key(shard, shared, db, &key, now_ms, &mut movers);
            }
        }
        if !any {
            break;
        }
    }
    for (db, key) in held {
        shard.dbs[db].requeue_ready(key);
    }
    movers
}

fn serve_key(
    shard: &mut Shard,
    shared: &Arc<Shared>,
    db: usize,
    key: &[u8],
    now_ms: i64,
    movers: &mut Vec<Mover>,
) {
    let slot = (db, Box::<[u8]>::from(key));
    // Position in the key's queue: waiters a key cannot serve are passed over only when they
    // do not hold up the others ([`BlockOp::fifo`]).
    let mut i = 0;
    loop {
        let Some(w) = shard
            .blocked
            .keys
            .get(&slot)
            .and_then(|q| q.get(i))
            .cloned()
        else {
            break;
        };
        if w.claimed.load(Ordering::Acquire) {
            // Timed out, cancelled or served by another key: its task unregisters it; drop it
            // here already so it does not hold up the ones behind it.
            remove_at(shard, &slot, i);
            continue;
        }
        let mut ctx = ShardCtx {
            shard: &mut *shard,
            db,
            clock: Clock::at(now_ms),
            resp3: w.resp3,
            shared,
        };
        if !w.op.ready(&mut ctx, key) {
            if w.op.fifo() {
                break;
            }
            i += 1;
            continue;
        }
        if !w.claim() {
            continue; // claimed meanwhile by its timer or a disconnect: next waiter
        }
        let payload = w.op.serve(&mut ctx, key);
        // Done with the shard: the context publishes the keyspace events the engine recorded
        // (notify.rs) before the result leaves for the client.
        drop(ctx);
        remove_at(shard, &slot, i);
        let at = StepAt {
            shared,
            key,
            db,
            resp3: w.resp3,
        };
        let key = Bytes::copy_from_slice(key);
        match w.op.second_step(at, payload) {
            // Its reply shows this shard's write: under appendfsync always it waits for the
            // fsync (worker/durability.rs).
            Ok(payload) => exec::complete_durable(shared, w.done, Outcome::Served { key, payload }),
            Err(step) => {
                let (shared, done) = (shared.clone(), w.done);
                movers.push(Box::pin(async move {
                    let payload = step.await;
                    exec::complete(&shared, done, Outcome::Served { key, payload });
                }));
            }
        }
    }
    if shard.blocked.keys.get(&slot).is_none_or(|q| q.is_empty()) {
        shard.blocked.keys.remove(&slot);
        shard.dbs[db].unblock(key);
    }
}

fn remove_at(shard: &mut Shard, slot: &DbKey, i: usize) {
    if let Some(q) = shard.blocked.keys.get_mut(slot) {
        q.remove(i);
    }
}

/// Cancels the wait of client `id` (it disconnected), if it is blocked on this thread.
pub fn cancel(shared: &Shared, id: u64) {
    let w = BLOCKED.with(|b| b.borrow_mut().remove(&id));
    if let Some(w) = w {
        if w.claim() {
            exec::complete(shared, w.done, Outcome::Cancelled);
        }
    }
}

/// CLIENT UNBLOCK: ends the wait of client `id` if it is blocked on keys on this thread (its
/// connection's thread, where its task runs), as its timeout would or with an error. Whether
/// it was blocked. A client held by CLIENT PAUSE is not blocked here (Redis 7.2 does not
/// unblock paused clients either).
pub fn unblock(shared: &Shared, id: u64, error: bool) -> bool {
    let w = BLOCKED.with(|b| b.borrow().get(&id).cloned());
    match w {
        Some(w) if w.claim() => {
            exec::complete(shared, w.done, Outcome::Unblocked { error });
            true
        }
        _ => false,
    }
}

/// Parses a blocking command's timeout (seconds, fractions allowed; 0 = forever) as Redis's
/// getTimeoutFromObjectOrReply does.
pub fn parse_timeout(arg: &[u8]) -> Result<Option<Duration>, &'static [u8]> {
    let secs = darner_resp::num::parse_f64_strict(arg)
        .filter(|v| !v.is_nan())
        .ok_or(&b"ERR timeout is not a float or out of range"[..])?;
    if secs < 0.0 {
        return Err(b"ERR timeout is negative");
    }
    let ms = (secs * 1000.0).ceil();
    // Redis adds the timeout to the current time in ms and refuses what overflows.
    if ms > i64::MAX as f64 - Shared::now_ms() as f64 {
        return Err(b"ERR timeout is out of range");
    }
    Ok((ms > 0.0).then(|| Duration::from_millis(ms as u64)))
}

/// Waits until one of `keys` serves `op`, the timeout passes (None) or the client goes away.
/// Call with the locks of all the keys' shards held, after finding every key unable to serve:
/// registers, releases the locks, waits, and cleans up.
pub async fn block(
    tx: &Tx,
    keys: &[Bytes],
    op: Arc<dyn BlockOp>,
    timeout: Option<Duration>,
) -> Option<Outcome> {
    let (done, result) = exec::pending::<Outcome>();
    let w = Arc::new(Waiter {
        id: NEXT_WAITER.fetch_add(1, Ordering::Relaxed),
        claimed: AtomicBool::new(false),
        done,
        op,
        db: tx.db(),
        resp3: tx.resp3(),
    });
    let groups = crate::cmd::generic::by_shard(tx, keys);
    let hops: Vec<_> = groups
        .iter()
        .map(|(s, idx)| {
            let ks: Vec<Bytes> = idx.iter().map(|&i| keys[i].clone()).collect();
            let w = w.clone();
            tx.run(*s, move |ctx| register(ctx, &ks, &w))
        })
        .collect();
    for h in hops {
        h.await;
    }
    let client = tx.client().id;
    BLOCKED.with(|b| b.borrow_mut().insert(client, w.clone()));
    BLOCKED_CLIENTS.fetch_add(1, Ordering::Relaxed);
    KEY_WAITERS.fetch_add(1, Ordering::Release);
    tx.release();
    // Its log ends here (it wrote nothing yet): a transaction's markers hold its shards'
    // AOF logs until it ends, and what serves it may wait for those (a push whose reply
    // waits for its fsync). Whatever serves it writes what it did (`BlockOp::serve`).
    tx.end_log();
    let outcome = within(&w, result, timeout).await;
    BLOCKED.with(|b| b.borrow_mut().remove(&client));
    BLOCKED_CLIENTS.fetch_sub(1, Ordering::Relaxed);
    KEY_WAITERS.fetch_sub(1, Ordering::Release);
    // Remove the registrations left on the other keys.
    let (db, id) = (w.db, w.id);
    let hops: Vec<_> = groups
        .into_iter()
        .map(|(s, idx)| {
            let ks: Vec<Bytes> = idx.iter().map(|&i| keys[i].clone()).collect();
            tx.run(s, move |ctx| unregister(ctx.shard, db, &ks, id))
        })
        .collect();
    for h in hops {
        h.await;
    }
    debug_assert_eq!(THREAD.with(|t| t.get()), done.thread);
    outcome
}

/// The op of a waiter on no key (WAIT): keys never serve it.
struct NoKey;

impl BlockOp for NoKey {
    fn kind(&self, _: &mut ShardCtx, _: &[u8]) -> KeyKind {
        KeyKind::Missing
    }
    fn serve(&self, _: &mut ShardCtx, _: &[u8]) -> Vec<u8> {
        Vec::new()
    }
}

impl Waiter {
    /// Whether the wait is over (served, timed out, cancelled or unblocked).
    pub fn is_claimed(&self) -> bool {
        self.claimed.load(Ordering::Acquire)
    }

    /// Ends the wait of a client blocked on something other than keys ([`block_other`]) with
    /// `payload` as its reply; false when it ended already. Call on a worker thread.
    pub fn serve_other(&self, shared: &Shared, payload: Vec<u8>) -> bool {
        if !self.claim() {
            return false;
        }
        let key = Bytes::new();
        exec::complete(shared, self.done, Outcome::Served { key, payload });
        true
    }
}

/// Waits, blocked on something other than keys (WAIT: replicas' acknowledgements), until
/// whoever `register` handed the waiter to serves it ([`Waiter::serve_other`]), the timeout
/// passes (None) or the client goes away; CLIENT UNBLOCK ends it as it ends a wait on keys.
pub async fn block_other(
    tx: &Tx,
    timeout: Option<Duration>,
    register: impl FnOnce(Arc<Waiter>),
) -> Option<Outcome> {
    let (done, result) = exec::pending::<Outcome>();
    let w = Arc::new(Waiter {
        id: NEXT_WAITER.fetch_add(1, Ordering::Relaxed),
        claimed: AtomicBool::new(false),
        done,
        op: Arc::new(NoKey),
        db: tx.db(),
        resp3: tx.resp3(),
    });
    let client = tx.client().id;
    BLOCKED.with(|b| b.borrow_mut().insert(client, w.clone()));
    BLOCKED_CLIENTS.fetch_add(1, Ordering::Relaxed);
    register(w.clone());
    let outcome = within(&w, result, timeout).await;
    BLOCKED.with(|b| b.borrow_mut().remove(&client));
    BLOCKED_CLIENTS.fetch_sub(1, Ordering::Relaxed);
    outcome
}

enum Waited {
    Done(Outcome),
    TimedOut(exec::Hop<Outcome>),
}

/// `w`'s result, or None once `timeout` passed and the timer claimed the waiter (a shard or
/// a disconnect that claimed it just before the timer gives its result).
async fn within(
    w: &Waiter,
    result: exec::Hop<Outcome>,
    timeout: Option<Duration>,
) -> Option<Outcome> {
    let sleep = timeout.map(|t| exec::sleep_until(Instant::now() + t));
    match (Wait { result, sleep }).await {
        Waited::Done(o) => Some(o),
        Waited::TimedOut(result) => {
            if w.claim() {
                result.forget();
                None
            } else {
                Some(result.await)
            }
        }
    }
}

/// The result or the timer, whichever comes first.
struct Wait {
    result: exec::Hop<Outcome>,
    sleep: Option<exec::Sleep>,
}

impl Future for Wait {
    type Output = Waited;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Waited> {
        let this = self.get_mut();
        if let Poll::Ready(o) = Pin::new(&mut this.result).poll(cx) {
            return Poll::Ready(Waited::Done(o));
        }
        if let Some(s) = this.sleep.as_mut() {
            if Pin::new(s).poll(cx).is_ready() {
                let result = std::mem::replace(&mut this.result, exec::Hop::detached());
                return Poll::Ready(Waited::TimedOut(result));
            }
        }
        Poll::Pending
    }
}

/// What each of `keys` can do for `op`, in argument order (one hop per shard).
pub async fn kinds_of(tx: &Tx, keys: &[Bytes], op: &Arc<dyn BlockOp>) -> Vec<KeyKind> {
    let groups = crate::cmd::generic::by_shard(tx, keys);
    let hops: Vec<_> = groups
        .iter()
        .map(|(s, idx)| {
            let ks: Vec<Bytes> = idx.iter().map(|&i| keys[i].clone()).collect();
            let op = op.clone();
            tx.run(*s, move |ctx| {
                ks.iter().map(|k| op.kind(ctx, k)).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut kinds = vec![KeyKind::Missing; keys.len()];
    for (g, hop) in hops.into_iter().enumerate() {
        for (j, k) in hop.await.into_iter().enumerate() {
            kinds[groups[g].1[j]] = k;
        }
    }
    kinds
}

/// The blocking pops' common path (BLPOP, BRPOP, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP): with the
/// shards of `keys` locked, the first key that exists serves `op` at once (or, holding another
/// type, makes the reply WRONGTYPE); with none, a null array inside MULTI, else the client
/// waits. A timeout answers a null array too.
pub async fn pop_or_block(
    tx: &Tx,
    keys: Vec<Bytes>,
    timeout: Option<Duration>,
    op: Arc<dyn BlockOp>,
) -> Vec<u8> {
    let resp3 = tx.resp3();
    let kinds = kinds_of(tx, &keys, &op).await;
    match kinds.iter().position(|&k| k != KeyKind::Missing) {
        Some(i) if kinds[i] == KeyKind::WrongType => {
            return crate::cmd::with_writer(resp3, |w| w.error(crate::cmd::ERR_WRONGTYPE));
        }
        Some(i) => {
            let key = keys[i].clone();
            return tx
                .run(tx.shard_of(&key), move |ctx| op.serve(ctx, &key))
                .await;
        }
        None => {}
    }
    if tx.nested() {
        return crate::cmd::with_writer(resp3, |w| w.null_array());
    }
    match block(tx, &keys, op, timeout).await {
        Some(Outcome::Served { payload, .. }) => payload,
        Some(Outcome::Unblocked { error: true }) => {
            crate::cmd::with_writer(resp3, |w| w.error(ERR_UNBLOCKED))
        }
        // Timed out, unblocked as by a timeout (or the client went away: nobody reads this).
        _ => crate::cmd::with_writer(resp3, |w| w.null_array()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn timeouts_parse_as_redis_does() {
        use super::parse_timeout;
        use std::time::Duration;
        assert_eq!(parse_timeout(b"0"), Ok(None));
        assert_eq!(parse_timeout(b"0.0"), Ok(None));
        assert_eq!(parse_timeout(b"1"), Ok(Some(Duration::from_secs(1))));
        assert_eq!(parse_timeout(b"0.0001"), Ok(Some(Duration::from_millis(1))));
        assert_eq!(parse_timeout(b"1.5"), Ok(Some(Duration::from_millis(1500))));
        assert_eq!(parse_timeout(b"-1"), Err(&b"ERR timeout is negative"[..]));
        assert_eq!(
            parse_timeout(b"abc"),
            Err(&b"ERR timeout is not a float or out of range"[..])
        );
        assert_eq!(
            parse_timeout(b"inf"),
            Err(&b"ERR timeout is out of range"[..])
        );
        assert_eq!(
            parse_timeout(b"1e300"),
            Err(&b"ERR timeout is out of range"[..])
        );
    }
}
