//! REPLICAOF / SLAVEOF and ROLE: the replica side of replication (replica.rs).

use crate::cmd::connection::client_line;
use crate::cmd::{eq, parse_int, with_writer, ConnCtx, Locks, Reg, TxFuture};
use crate::exec::Tx;
use crate::log;
use crate::replica;
use crate::shared::Shared;
use bytes::Bytes;
use darner_resp::ReplyWriter;
use std::time::{Duration, Instant};

pub fn register(r: &mut Reg) {
    r.tx("replicaof", Locks::None, replicaof);
    r.tx("slaveof", Locks::None, replicaof);
    r.tx("role", Locks::None, role);
    r.tx("psync", Locks::None, psync);
    r.tx("sync", Locks::None, psync);
    r.conn("replconf", replconf);
    r.conn("failover", failover);
    r.tx("wait", Locks::None, wait);
}

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms] (failover.rs).
fn failover(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let started =
        crate::failover::parse(&args[1..]).and_then(|req| crate::failover::start(ctx.shared, req));
    match started {
        Ok(()) => w.ok(),
        Err(e) => w.error(e),
    }
}

/// `PSYNC <replid> <offset> FAILOVER` from the primary this server follows, which is
/// stepping down: this server becomes a primary first (Redis's syncCommand), then answers the
/// PSYNC as one. Err: the reply.
async fn take_over(tx: &Tx, replid: &[u8]) -> Result<(), &'static [u8]> {
    let shared = tx.shared().clone();
    log::warning(&format!(
        "Failover request received for replid {}.",
        String::from_utf8_lossy(replid)
    ));
    {
        let st = shared.repl.lock();
        if st.master.is_none() {
            return Err(b"ERR PSYNC FAILOVER can't be sent to a master.");
        }
        if !replid.eq_ignore_ascii_case(st.history.replid.as_bytes()) {
            return Err(b"ERR PSYNC FAILOVER replid must match my replid.");
        }
    }
    if become_primary(tx).await {
        log::notice(&format!(
            "MASTER MODE enabled (failover request from '{}')",
            client_line(&tx.client(), &Default::default(), Shared::now_ms())
        ));
    }
    Ok(())
}

/// Redis's refusal of WAIT on a replica.
const ERR_WAIT_REPLICA: &[u8] = b"ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.";

/// WAIT numreplicas timeout: the number of replicas that acknowledged what this client wrote,
/// once `numreplicas` did or after `timeout` milliseconds (0: no limit). What it waits for is
/// the stream's offset when it runs, after this client's writes (primary.rs `wait_offset`).
/// Inside MULTI or a script it does not block.
fn wait(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let shared = tx.shared().clone();
        let err = |e: &[u8]| with_writer(resp3, |w| w.error(e));
        if shared
            .repl
            .is_replica
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return err(ERR_WAIT_REPLICA);
        }
        let Some(num) = darner_resp::parse_i64_strict(&args[1]) else {
            return err(crate::cmd::ERR_NOT_INT);
        };
        let Some(ms) = darner_resp::parse_i64_strict(&args[2]) else {
            return err(b"ERR timeout is not an integer or out of range");
        };
        if ms < 0 {
            return err(b"ERR timeout is negative");
        }
        if ms > i64::MAX - Shared::now_ms() {
            return err(b"ERR timeout is out of range");
        }
        let count = |offset: i64| shared.repl.lock().replicas.acked(offset);
        let int = |n: i64| with_writer(resp3, |w| w.int(n));
        if tx.nested() {
            let offset = shared.repl.lock().data_offset();
            return int(count(offset));
        }
        let offset = crate::primary::wait_offset(&tx).await;
        let now = count(offset);
        if now >= num {
            return int(now);
        }
        let timeout = (ms > 0).then(|| Duration::from_millis(ms as u64));
        let outcome = crate::blocking::block_other(&tx, timeout, |w| {
            crate::primary::add_wait(&shared, offset, num, w)
        })
        .await;
        crate::primary::drop_waits(&shared);
        match outcome {
            Some(crate::blocking::Outcome::Served { payload, .. }) => payload,
            Some(crate::blocking::Outcome::Unblocked { error: true }) => {
                err(crate::blocking::ERR_UNBLOCKED)
            }
            // Timed out or unblocked as by a timeout: the count now.
            _ => int(count(offset)),
        }
    })
}

/// PSYNC replid offset / SYNC: the connection becomes a replica (primary.rs).
fn psync(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let shared = tx.shared().clone();
        let is_psync = eq(&args[0], "psync");
        let offset = if is_psync {
            match darner_resp::parse_i64_strict(&args[2]) {
                Some(o) => o,
                None => return with_writer(resp3, |w| w.error(crate::cmd::ERR_NOT_INT)),
            }
        } else {
            0
        };
        // A replica already: Redis ignores a second SYNC.
        if tx.client().replica {
            return Vec::new();
        }
        if is_psync && args.len() > 3 && eq(&args[3], "failover") {
            if let Err(e) = take_over(&tx, &args[1]).await {
                return with_writer(resp3, |w| w.error(e));
            }
        }
        if shared.failover.pausing() {
            return with_writer(resp3, |w| {
                w.error(b"NOMASTERLINK Can't SYNC while failing over")
            });
        }
        let (client_id, fd, conn, addr) = {
            let c = tx.client();
            (c.id, c.fd, c.conn, c.addr.clone())
        };
        let thread = crate::exec::THREAD.with(|t| t.get());
        let req = crate::primary::Request {
            shared: &shared,
            client_id,
            thread,
            conn,
            fd,
            addr: &addr,
            psync: if is_psync {
                Some((&args[1][..], offset))
            } else {
                None
            },
        };
        // The snapshot is taken like BGSAVE's (one at a time: a running BGSAVE or AOF
        // rewrite is waited for, without holding the shards).
        let started = crate::primary::psync(&req);
        match started {
            crate::primary::Started::Continue => {
                tx.client().replica = true;
                return Vec::new();
            }
            crate::primary::Started::Error(e) => return with_writer(resp3, |w| w.error(e)),
            crate::primary::Started::Full => {}
            crate::primary::Started::FullChained => {
                tx.client().replica = true;
                chained_full_sync(&tx, client_id).await;
                return Vec::new();
            }
        }
        tx.client().replica = true;
        crate::primary::log_delay(&shared, client_id);
        // Waits for the snapshot to start (repl-diskless-sync-delay, another save in
        // progress), unless the replica shares one another handler starts.
        loop {
            match crate::primary::poll_start(&shared, client_id) {
                crate::primary::Poll::Done => return Vec::new(),
                crate::primary::Poll::Start => break,
                crate::primary::Poll::Wait => {
                    crate::exec::sleep_until(Instant::now() + Duration::from_millis(10)).await
                }
            }
        }
        tx.reserve(crate::cmd::transactions::every_shard(tx.nshards()))
            .await;
        // Every replica waiting now shares this snapshot; its cut is numbered while every
        // shard is held: the feed meets the cuts in this order.
        let Some(job) = crate::primary::take_waiting(&shared) else {
            shared
                .bgsaves
                .in_progress
                .store(false, std::sync::atomic::Ordering::Release);
            tx.release();
            return Vec::new();
        };
        crate::log::notice(&format!(
            "Starting BGSAVE for SYNC with target: {}",
            job.target()
        ));
        tx.start_repl_barrier_log();
        let snap =
            crate::persist::snapshot::SnapshotOptions::from_config(&shared, Shared::now_ms());
        let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (header, shards, from_shards) =
            crate::bgsave::cut_head(&tx, snap, false, stopped.clone()).await;
        // The cut's end in the stream: every shard's marker is in, the barrier follows (handed
        // to the feed now, not at the end of this thread's turn: the replicas wait for it).
        tx.end_log();
        crate::propagate::flush_here(&shared);
        tx.release();
        crate::primary::run_job(&shared, job, header, shards, from_shards, stopped);
        Vec::new()
    })
}

/// A replica's own replica full-syncs (chained replication): the link pauses where every
/// command it forwarded is applied, the snapshot is cut there (its offset is one of the
/// primary's stream), and the link goes on, the stream after the cut buffered for the new
/// replica (replica.rs `request_hold`).
async fn chained_full_sync(tx: &Tx, client_id: u64) {
    let shared = tx.shared().clone();
    while !crate::bgsave::claim(&shared) {
        crate::exec::sleep_until(Instant::now() + Duration::from_millis(10)).await;
    }
    let hold = replica::request_hold(&shared);
    let deadline = Instant::now() + Duration::from_secs(10);
    let paused = loop {
        match replica::held(&shared, hold) {
            Some(true) => break true,
            None => break false,
            Some(false) if Instant::now() >= deadline => break false,
            Some(false) => {
                crate::exec::sleep_until(Instant::now() + Duration::from_millis(1)).await;
            }
        }
    };
    if !paused {
        replica::release_hold(&shared);
        shared
            .bgsaves
            .in_progress
            .store(false, std::sync::atomic::Ordering::Release);
        crate::primary::forget(&shared, client_id);
        return;
    }
    tx.reserve(crate::cmd::transactions::every_shard(tx.nshards()))
        .await;
    let Some(job) = crate::primary::chained_job(&shared, client_id) else {
        // The replica went away meanwhile.
        tx.release();
        replica::release_hold(&shared);
        shared
            .bgsaves
            .in_progress
            .store(false, std::sync::atomic::Ordering::Release);
        return;
    };
    crate::log::notice(&format!(
        "Starting BGSAVE for SYNC with target: {}",
        job.target()
    ));
    let snap = crate::persist::snapshot::SnapshotOptions::from_config(&shared, Shared::now_ms());
    let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (header, shards, from_shards) =
        crate::bgsave::cut_head(tx, snap, false, stopped.clone()).await;
    tx.release();
    replica::release_hold(&shared);
    crate::primary::run_job(&shared, job, header, shards, from_shards, stopped);
}

/// REPLCONF option value ...: what a replica says about itself, and its acknowledgements.
fn replconf(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    use darner_repl::replconf::End;
    let (opts, end) = darner_repl::replconf::parse(&args[1..]);
    for o in &opts {
        if matches!(
            o,
            darner_repl::replconf::Opt::RdbOnly(true)
                | darner_repl::replconf::Opt::RdbFilterOnly { .. }
        ) {
            return w
                .error(b"ERR REPLCONF rdb-only and rdb-filter-only are not supported by Darner");
        }
    }
    if !opts.is_empty() {
        ctx.client.replconf = true;
        crate::primary::replconf(ctx.shared, ctx.client.id, opts);
    }
    match end {
        End::Ok => w.ok(),
        End::Silent => {}
        End::Error(e) => w.error(e.as_bytes()),
    }
}

/// Waits until the link of generation `old` has no more commands in the server's hands,
/// then until a snapshot being loaded (a task holding every shard) is done: what the old
/// primary sent lands before the reply, nothing after it.
/// REPLICAOF NO ONE's steps (and a FAILOVER target's): the link stops, its last commands
/// land and are counted, then the history shifts and clients may write. False when this
/// server followed no primary.
async fn become_primary(tx: &Tx) -> bool {
    let shared = tx.shared().clone();
    let Some(old) = replica::unset_master(&shared) else {
        return false;
    };
    wait_quiet(tx, old).await;
    // The old link's commands were recorded while following: the feed (when it runs, as on
    // a demoted primary) renders them as such before the shift.
    if let Some(fence) = crate::primary::fence() {
        let deadline = Instant::now() + Duration::from_secs(10);
        while fence.try_recv() == Err(std::sync::mpsc::TryRecvError::Empty)
            && Instant::now() < deadline
        {
            crate::exec::sleep_until(Instant::now() + Duration::from_millis(1)).await;
        }
    }
    replica::promote(&shared);
    crate::primary::settled(&shared);
    true
}

/// A primary about to follow another: its clients' writes stop (READONLY from here on), those
/// in flight land, and everything its threads recorded is rendered into its stream, before
/// [`replica::set_master`] takes the offset it offers the new primary (PSYNC) and the feed
/// stops extending its history. Redis's writes are in the stream when they are applied, so
/// its demoted primary offers an offset that covers its data; without this, the last writes
/// applied before REPLICAOF could still be on their way to the feed, be dropped there as a
/// follower's, and the offset offered would fall short of the data: a new primary at that
/// offset would accept a partial resync and the writes would stay on this server alone.
async fn stop_own_stream(tx: &Tx) {
    let shared = tx.shared();
    shared
        .repl
        .is_replica
        .store(true, std::sync::atomic::Ordering::SeqCst);
    tx.reserve(crate::cmd::transactions::every_shard(tx.nshards()))
        .await;
    tx.release();
    if crate::primary::feeding() && !tx.nested() {
        crate::primary::wait_offset(tx).await;
    }
}

async fn wait_quiet(tx: &Tx, old: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while replica::still_applying(tx.shared(), old) && Instant::now() < deadline {
        crate::exec::sleep_until(Instant::now() + Duration::from_millis(1)).await;
    }
    tx.reserve(crate::cmd::transactions::every_shard(tx.nshards()))
        .await;
    tx.release();
}

/// REPLICAOF host port | NO ONE, with Redis 7's replies and log lines.
fn replicaof(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let shared = tx.shared().clone();
        let who = |tx: &Tx| client_line(&tx.client(), &Default::default(), Shared::now_ms());
        if shared.failover.pausing() {
            return with_writer(resp3, |w| {
                w.error(b"ERR REPLICAOF not allowed while failing over.")
            });
        }
        if eq(&args[1], "no") && eq(&args[2], "one") {
            if become_primary(&tx).await {
                log::notice(&format!(
                    "MASTER MODE enabled (user request from '{}')",
                    who(&tx)
                ));
            }
            return with_writer(resp3, |w| w.ok());
        }
        let Some(port) = parse_int(&args[2]).filter(|p| (0..=65535).contains(p)) else {
            return with_writer(resp3, |w| w.error(b"ERR Invalid master port"));
        };
        let port = port as u16;
        let host = String::from_utf8_lossy(&args[1]).into_owned();
        if replica::following(&shared, &host, port) {
            log::notice("REPLICAOF would result into synchronization with the master we are already connected with. No operation performed.");
            return with_writer(resp3, |w| {
                w.simple(b"OK Already connected to specified master")
            });
        }
        if !shared
            .repl
            .is_replica
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            stop_own_stream(&tx).await;
        }
        let (old, gen) = replica::set_master(&shared, host.clone(), port);
        wait_quiet(&tx, old).await;
        replica::start_link(&shared, gen);
        log::notice(&format!(
            "REPLICAOF {host}:{port} enabled (user request from '{}')",
            who(&tx)
        ));
        with_writer(resp3, |w| w.ok())
    })
}

/// ROLE: `master <offset> <replicas>` or `slave <host> <port> <state> <offset>`. On a
/// primary the offset covers every write already answered, as in Redis (where a write is in
/// the stream before its reply leaves) and as INFO's `master_repl_offset`: the threads hand
/// over what they recorded and the feed thread merges it first (WAIT's offset). Without this
/// a client that wrote and then compared ROLE's offset with a replica's could see the replica
/// ahead of its primary. Inside EXEC nothing waits, as for WAIT.
fn role(tx: Tx, _: Vec<Bytes>) -> TxFuture {
    Box::pin(async move {
        let shared = tx.shared().clone();
        if crate::primary::feeding()
            && !tx.nested()
            && !shared
                .repl
                .is_replica
                .load(std::sync::atomic::Ordering::SeqCst)
        {
            crate::primary::wait_offset(&tx).await;
        }
        with_writer(tx.resp3(), |w| replica::role(&shared, w))
    })
}
