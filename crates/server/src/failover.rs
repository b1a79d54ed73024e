//! FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]: a coordinated hand-over from this
//! primary to one of its replicas (Redis 7.2's `failoverCommand` / `updateFailoverStatus`).
//!
//! The primary holds clients' writes back (as CLIENT PAUSE WRITE does, for a purpose of its
//! own: CLIENT UNPAUSE does not end it) and waits, in a thread of its own, until the target
//! replica (or, without TO, any replica) has acknowledged the primary's whole stream: its
//! `REPLCONF ACK` offset equals `master_repl_offset`, and has stayed so while the threads
//! handed over what they had (see [`STABLE`]). Then it becomes a replica of the target
//! (`replica::set_master`), whose link sends `PSYNC <replid> <offset> FAILOVER`: the target,
//! still following this server under the same replication ID, promotes itself first
//! (cmd/server/replication.rs) and then answers the PSYNC as a primary. The answer
//! (`+FULLRESYNC` or `+CONTINUE`) ends the failover and lets the held writes go on, to be
//! refused with READONLY now; any other end of the handshake aborts it, and this server is a
//! primary again. A TIMEOUT that passes while waiting aborts, or with FORCE fails over
//! anyway. INFO shows the phase as `master_failover_state`.
//!
//! Lock order: the failover's lock, then the replication state's.

use crate::shared::Shared;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NONE: u8 = 0;
const WAIT_FOR_SYNC: u8 = 1;
const IN_PROGRESS: u8 = 2;

/// How long the target's acknowledged offset must have matched the primary's (writes held
/// back) before the primary steps down: the threads hand their shards' last changes to the
/// replication feed at the end of their loop turn, so an offset read in between may still
/// miss a write acknowledged to its client just before the pause.
const STABLE: Duration = Duration::from_millis(50);

/// The failover's state (in `Shared`).
#[derive(Default)]
pub struct Failover {
    /// The phase, readable without the lock (INFO, the pause check on every command).
    phase: AtomicU8,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The replica chosen (TO, or the first one found in sync).
    target: Option<(String, u16)>,
    end: Option<Instant>,
    force: bool,
}

impl Failover {
    fn phase(&self) -> u8 {
        self.phase.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes are held back (from FAILOVER until the target answered or it was aborted).
    pub fn pausing(&self) -> bool {
        self.phase() != NONE
    }

    /// This server stepped down: its link's PSYNC asks the target to take over.
    pub fn in_progress(&self) -> bool {
        self.phase() == IN_PROGRESS
    }

    /// INFO's `master_failover_state`.
    pub fn state_name(&self) -> &'static str {
        match self.phase() {
            WAIT_FOR_SYNC => "waiting-for-sync",
            IN_PROGRESS => "failover-in-progress",
            _ => "no-failover",
        }
    }
}

/// FAILOVER's arguments.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    Abort,
    Start {
        target: Option<(String, u16)>,
        force: bool,
        timeout_ms: i64,
    },
}

/// Parses FAILOVER's arguments (after the name) as Redis does: each option once, in any
/// order; errors as Redis words them.
pub fn parse(args: &[&[u8]]) -> Result<Request, &'static [u8]> {
    let is = |a: &[u8], w: &str| a.eq_ignore_ascii_case(w.as_bytes());
    if args.len() == 1 && is(args[0], "abort") {
        return Ok(Request::Abort);
    }
    let mut timeout_ms = 0i64;
    let mut force = false;
    let mut target: Option<(String, u16)> = None;
    let mut j = 0;
    while j < args.len() {
        let a = args[j];
        if is(a, "timeout") && j + 1 < args.len() && timeout_ms == 0 {
            let Some(t) = crate::cmd::parse_int(args[j + 1]) else {
                return Err(crate::cmd::ERR_NOT_INT);
            };
            if t <= 0 {
                return Err(b"ERR FAILOVER timeout must be greater than 0");
            }
            timeout_ms = t;
            j += 2;
        } else if is(a, "to") && j + 2 < args.len() && target.is_none() {
            let Some(port) = crate::cmd::parse_int(args[j + 2]) else {
                return Err(crate::cmd::ERR_NOT_INT);
            };
            // A port no replica can have finds no replica (Redis compares it as a long).
            let port = u16::try_from(port).unwrap_or(0);
            target = Some((String::from_utf8_lossy(args[j + 1]).into_owned(), port));
            j += 3;
        } else if is(a, "force") && !force {
            force = true;
            j += 1;
        } else {
            return Err(crate::cmd::ERR_SYNTAX);
        }
    }
    Ok(Request::Start {
        target,
        force,
        timeout_ms,
    })
}

/// FAILOVER: checks, holds writes back and starts the thread that waits for the target
/// (or aborts the failover in progress).
pub fn start(shared: &Arc<Shared>, req: Request) -> Result<(), &'static [u8]> {
    let (target, force, timeout_ms) = match req {
        Request::Abort => {
            let mut inner = shared.failover.lock();
            if !shared.failover.pausing() {
                return Err(b"ERR No failover in progress.");
            }
            abort_locked(shared, &mut inner, "Failover manually aborted");
            return Ok(());
        }
        Request::Start {
            target,
            force,
            timeout_ms,
        } => (target, force, timeout_ms),
    };
    let f = &shared.failover;
    let mut inner = f.lock();
    if f.pausing() {
        return Err(b"ERR FAILOVER already in progress.");
    }
    {
        let st = shared.repl.lock();
        if st.master.is_some() {
            return Err(b"ERR FAILOVER is not valid when server is a replica.");
        }
        if st.replicas.list.is_empty() {
            return Err(b"ERR FAILOVER requires connected replicas.");
        }
        if force && (timeout_ms == 0 || target.is_none()) {
            return Err(
                b"ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
            );
        }
        if let Some((host, port)) = &target {
            match crate::primary::find(&st.replicas, host, *port) {
                None => return Err(b"ERR FAILOVER target HOST and PORT is not a replica."),
                Some((_, false)) => return Err(b"ERR FAILOVER target replica is not online."),
                Some((_, true)) => {}
            }
        }
    }
    match &target {
        Some((host, port)) => crate::log::notice(&format!("FAILOVER requested to {host}:{port}.")),
        None => crate::log::notice("FAILOVER requested to any replica."),
    }
    *inner = Inner {
        target,
        end: (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64)),
        force,
    };
    f.phase.store(WAIT_FOR_SYNC, Ordering::SeqCst);
    let sh = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("failover".into())
        .spawn(move || {
            let mut synced_since: Option<(Instant, i64)> = None;
            while step(&sh, &mut synced_since) {
                std::thread::sleep(Duration::from_millis(10));
            }
        });
    if spawned.is_err() {
        clear_locked(shared, &mut inner);
        return Err(b"ERR can't start the failover thread");
    }
    Ok(())
}

/// One look at the replicas while waiting for the target (Redis's updateFailoverStatus).
/// Returns whether to keep waiting.
fn step(shared: &Arc<Shared>, synced_since: &mut Option<(Instant, i64)>) -> bool {
    let f = &shared.failover;
    let mut inner = f.lock();
    if f.phase() != WAIT_FOR_SYNC {
        return false;
    }
    if inner.end.is_some_and(|e| Instant::now() >= e) {
        if inner.force {
            let (host, port) = inner.target.clone().unwrap_or_default();
            crate::log::notice(&format!(
                "FAILOVER to {host}:{port} time out exceeded, failing over."
            ));
            f.phase.store(IN_PROGRESS, Ordering::SeqCst);
            step_down(shared, host, port);
        } else {
            abort_locked(shared, &mut inner, "Replica never caught up before timeout");
        }
        return false;
    }
    let synced = {
        let st = shared.repl.lock();
        let offset = st.history.master_repl_offset;
        let found = match &inner.target {
            Some((host, port)) => crate::primary::find(&st.replicas, host, *port)
                .filter(|(ack, online)| *online && *ack == offset)
                .map(|_| (host.clone(), *port)),
            None => crate::primary::synced_replica(&st.replicas, offset),
        };
        found.map(|t| (t, offset))
    };
    let Some((target, offset)) = synced else {
        *synced_since = None;
        return true;
    };
    match synced_since {
        Some((since, o)) if *o == offset && since.elapsed() >= STABLE => {}
        Some((_, o)) if *o == offset => return true,
        _ => {
            *synced_since = Some((Instant::now(), offset));
            return true;
        }
    }
    crate::log::notice(&format!(
        "Failover target {}:{} is synced, failing over.",
        target.0, target.1
    ));
    inner.target = Some(target.clone());
    // Under the lock: an ABORT finds this server a replica already, or not at all.
    f.phase.store(IN_PROGRESS, Ordering::SeqCst);
    step_down(shared, target.0, target.1);
    false
}

/// This primary becomes a replica of the target; its link asks the target to take over.
fn step_down(shared: &Arc<Shared>, host: String, port: u16) {
    let (_, gen) = crate::replica::set_master(shared, host, port);
    crate::replica::start_link(shared, gen);
}

/// Ends the failover (the caller holds its lock); held writes go on.
fn clear_locked(shared: &Shared, inner: &mut Inner) {
    *inner = Inner::default();
    shared.failover.phase.store(NONE, Ordering::SeqCst);
    for t in 0..shared.threads {
        crate::exec::post(shared, t, crate::msg::Msg::Unpaused);
    }
}

/// Aborts the failover: a server that already stepped down is a primary again.
pub fn abort(shared: &Arc<Shared>, why: &str) {
    abort_locked(shared, &mut shared.failover.lock(), why);
}

fn abort_locked(shared: &Arc<Shared>, inner: &mut Inner, why: &str) {
    let phase = shared.failover.phase();
    if phase == NONE {
        return;
    }
    match &inner.target {
        Some((host, port)) => {
            crate::log::notice(&format!("FAILOVER to {host}:{port} aborted: {why}"))
        }
        None => crate::log::notice(&format!("FAILOVER to any replica aborted: {why}")),
    }
    if phase == IN_PROGRESS && crate::replica::unset_master(shared).is_some() {
        // Back to a primary: the target answered nothing, so the link applied nothing.
        crate::replica::promote(shared);
        crate::primary::settled(shared);
    }
    clear_locked(shared, inner);
}

/// The demoted primary's link got the target's answer to `PSYNC ... FAILOVER`: `accepted`
/// (a full or partial resync) ends the failover, anything else aborts it. Returns whether
/// the link goes on.
pub fn answered(shared: &Arc<Shared>, accepted: bool) -> bool {
    let mut inner = shared.failover.lock();
    if !shared.failover.in_progress() {
        return true;
    }
    if accepted {
        clear_locked(shared, &mut inner);
        true
    } else {
        abort_locked(shared, &mut inner, "Failover target rejected psync request");
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Request, &'static [u8]> {
        let v: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse(&v)
    }

    #[test]
    fn failover_arguments_parse_as_redis_reads_them() {
        assert_eq!(p(&["ABORT"]), Ok(Request::Abort));
        assert_eq!(
            p(&[]),
            Ok(Request::Start {
                target: None,
                force: false,
                timeout_ms: 0
            })
        );
        assert_eq!(
            p(&["timeout", "50", "TO", "h", "7", "force"]),
            Ok(Request::Start {
                target: Some(("h".into(), 7)),
                force: true,
                timeout_ms: 50
            })
        );
        assert_eq!(p(&["abort", "timeout", "5"]), Err(crate::cmd::ERR_SYNTAX));
        assert_eq!(p(&["force", "force"]), Err(crate::cmd::ERR_SYNTAX));
        assert_eq!(p(&["to", "h"]), Err(crate::cmd::ERR_SYNTAX));
        assert_eq!(p(&["timeout", "x"]), Err(crate::cmd::ERR_NOT_INT));
        assert_eq!(
            p(&["timeout", "0"]),
            Err(&b"ERR FAILOVER timeout must be greater than 0"[..])
        );
        assert_eq!(
            p(&["timeout", "5", "timeout", "6"]),
            Err(crate::cmd::ERR_SYNTAX)
        );
    }
}
