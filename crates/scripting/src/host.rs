//! What the server provides to a running script ([`Host`]) and what it can
//! observe and control from outside while a script runs ([`RunControl`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use darner_resp::Frame;

/// `redis.log` levels (Redis's `LL_*` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// `redis.LOG_DEBUG` (0).
    Debug,
    /// `redis.LOG_VERBOSE` (1).
    Verbose,
    /// `redis.LOG_NOTICE` (2).
    Notice,
    /// `redis.LOG_WARNING` (3).
    Warning,
}

impl LogLevel {
    /// The level for Redis's numeric value, if valid.
    pub fn from_num(n: i64) -> Option<LogLevel> {
        Some(match n {
            0 => LogLevel::Debug,
            1 => LogLevel::Verbose,
            2 => LogLevel::Notice,
            3 => LogLevel::Warning,
            _ => return None,
        })
    }
}

/// `redis.set_repl` flags: bit 1 = AOF, bit 2 = replicas.
pub const REPL_NONE: u8 = 0;
/// Propagate to the AOF.
pub const REPL_AOF: u8 = 1;
/// Propagate to replicas.
pub const REPL_REPLICA: u8 = 2;
/// Propagate to both.
pub const REPL_ALL: u8 = 3;

/// The context of one `redis.call` / `redis.pcall`.
#[derive(Debug, Clone, Copy)]
pub struct CallCtx {
    /// The protocol the script asked for with `redis.setresp` (2 or 3): the
    /// reply must be built as a client speaking this version would get it.
    pub resp: u8,
    /// `true` for `redis.pcall` (the error is returned to the script),
    /// `false` for `redis.call` (the error stops the script). The host
    /// replies the same way in both cases; this is informational.
    pub pcall: bool,
    /// The flags of the running script or function (`no-writes`, ...), so the
    /// host can refuse writes from read-only scripts, OOM, stale reads, ...
    pub flags: crate::ScriptFlags,
}

/// The server's side of a running script.
///
/// The engine calls it from inside `redis.call`, `redis.pcall`, `redis.log`
/// and `redis.set_repl`. It does no I/O of its own: the server implements it
/// on top of its command dispatch.
pub trait Host {
    /// Runs one command (`args[0]` is its name, as the script spelled it) and
    /// returns its reply, built for protocol `ctx.resp`. Every failure is an
    /// error reply ([`Frame::Error`] without the leading `-`), including the
    /// ones Redis's scripting layer produces itself: see [`errors`].
    ///
    /// When the command writes, the host should call
    /// [`RunControl::note_write`] so that `SCRIPT KILL` answers `UNKILLABLE`.
    fn call(&mut self, args: &[&[u8]], ctx: &CallCtx) -> Frame;

    /// `redis.log(level, ...)`: the message is the arguments joined by spaces.
    fn log(&mut self, level: LogLevel, msg: &[u8]) {
        let _ = (level, msg);
    }

    /// `redis.acl_check_cmd(...)`: whether the calling user may run this
    /// command with these arguments; `None` when the command does not exist.
    fn acl_check_cmd(&mut self, args: &[&[u8]]) -> Option<bool> {
        let _ = args;
        Some(true)
    }

    /// `redis.set_repl(flags)` (one of the `REPL_*` constants).
    fn set_repl(&mut self, flags: u8) {
        let _ = flags;
    }
}

/// Error texts of Redis 7.2's scripting layer (`script.c`) that a [`Host`]
/// returns from [`Host::call`] (as [`Frame::Error`]) where Redis would.
pub mod errors {
    /// The command does not exist.
    pub const UNKNOWN_COMMAND: &str = "ERR Unknown Redis command called from script";
    /// Wrong number of arguments for the command.
    pub const WRONG_ARITY: &str = "ERR Wrong number of args calling Redis command from script";
    /// The command has the `noscript` flag.
    pub const NOT_ALLOWED: &str = "ERR This Redis command is not allowed from script";
    /// A write from a `no-writes` script or EVAL_RO / FCALL_RO.
    pub const WRITE_IN_READONLY: &str =
        "ERR Write commands are not allowed from read-only scripts.";
}

/// Shared state of the script running on one engine, readable and
/// controllable from any thread: how long it has run, whether it wrote, and
/// the `SCRIPT KILL` / `FUNCTION KILL` switch.
#[derive(Debug)]
pub struct RunControl {
    epoch: Instant,
    /// Milliseconds since `epoch` at which the current run started, plus one;
    /// 0 when no script runs.
    started: AtomicU64,
    wrote: AtomicBool,
    kill: AtomicBool,
}

/// What [`RunControl::kill`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// No script is running (`NOTBUSY No scripts in execution right now.`).
    NotBusy,
    /// The script has written: killing it would break atomicity (`UNKILLABLE`).
    Unkillable,
    /// The script will stop with an error at its next hook check.
    Killed,
}

impl Default for RunControl {
    fn default() -> Self {
        RunControl {
            epoch: Instant::now(),
            started: AtomicU64::new(0),
            wrote: AtomicBool::new(false),
            kill: AtomicBool::new(false),
        }
    }
}

impl RunControl {
    /// A new control with no script running.
    pub fn new() -> Arc<RunControl> {
        Arc::new(RunControl::default())
    }

    pub(crate) fn begin(&self) {
        let now = self.epoch.elapsed().as_millis() as u64 + 1;
        self.wrote.store(false, Ordering::Relaxed);
        self.kill.store(false, Ordering::Relaxed);
        self.started.store(now, Ordering::Release);
    }

    pub(crate) fn end(&self) {
        self.started.store(0, Ordering::Release);
        self.kill.store(false, Ordering::Relaxed);
    }

    /// Whether a script is running now.
    pub fn is_running(&self) -> bool {
        self.started.load(Ordering::Acquire) != 0
    }

    /// How long the current script has run (milliseconds), or `None`.
    pub fn elapsed_ms(&self) -> Option<u64> {
        match self.started.load(Ordering::Acquire) {
            0 => None,
            s => Some((self.epoch.elapsed().as_millis() as u64 + 1).saturating_sub(s)),
        }
    }

    /// Whether the running script has been running for at least
    /// `threshold_ms` (busy-reply-threshold): other clients then get `BUSY`.
    pub fn is_busy(&self, threshold_ms: u64) -> bool {
        self.elapsed_ms().is_some_and(|e| e >= threshold_ms)
    }

    /// The host calls this when a command run by the script wrote.
    pub fn note_write(&self) {
        self.wrote.store(true, Ordering::Relaxed);
    }

    /// Whether the running script has written.
    pub fn has_written(&self) -> bool {
        self.wrote.load(Ordering::Relaxed)
    }

    /// `SCRIPT KILL` / `FUNCTION KILL`: asks the running script to stop.
    pub fn kill(&self) -> KillOutcome {
        if !self.is_running() {
            KillOutcome::NotBusy
        } else if self.has_written() {
            KillOutcome::Unkillable
        } else {
            self.kill.store(true, Ordering::Release);
            KillOutcome::Killed
        }
    }

    /// Stops the running script at its next hook check, whether it has written or not: the
    /// host has undone its writes and runs it again (the server reruns a script that reached
    /// beyond the keys it reserved).
    pub fn abort(&self) {
        self.kill.store(true, Ordering::Release);
    }

    pub(crate) fn kill_requested(&self) -> bool {
        self.kill.load(Ordering::Acquire)
    }
}
