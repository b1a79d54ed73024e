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
    r.conn("role", role);
    r.tx("psync", Locks::None, psync);
    r.tx("sync", Locks::None, psync);
    r.conn("replconf", replconf);
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
            crate::bgsave::cut(&tx, snap, false, stopped.clone()).await;
        // The cut's end in the stream: every shard's marker is in, the barrier follows.
        tx.end_log();
        tx.release();
        crate::primary::run_job(&shared, job, header, shards, from_shards, stopped);
        Vec::new()
    })
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
        if eq(&args[1], "no") && eq(&args[2], "one") {
            if let Some(old) = replica::unset_master(&shared) {
                wait_quiet(&tx, old).await;
                crate::primary::settled(&shared);
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

/// ROLE: `master <offset> <replicas>` or `slave <host> <port> <state> <offset>`.
fn role(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    replica::role(ctx.shared, w);
}
