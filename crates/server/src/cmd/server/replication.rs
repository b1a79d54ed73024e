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
