//! Per-command accounting: the lap timer, command statistics, the slow log and MONITOR lines.

use super::*;
/// A stopwatch read once per command: each command's end is the next one's start, so timing a
/// run of commands costs one clock read per command instead of two. The clock is the CPU's
/// time-stamp counter where there is one (x86-64: a few nanoseconds, against tens for the
/// vDSO clock in a VM, which showed as 5% of a pipelined GET's CPU time).
pub(super) struct Lap(u64);

impl Lap {
    pub(super) fn start() -> Lap {
        Lap(ticks())
    }

    /// Microseconds since the previous lap.
    pub(super) fn lap(&mut self) -> u64 {
        let now = ticks();
        let us = (now.saturating_sub(self.0) as f64 * us_per_tick()) as u64;
        self.0 = now;
        us
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) fn ticks() -> u64 {
    // SAFETY: RDTSC only reads the time-stamp counter (present on every x86-64 CPU); it
    // touches no memory. Cores may disagree slightly: `lap` saturates at zero.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn ticks() -> u64 {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Microseconds per tick, measured once against the monotonic clock (20 ms) by
/// [`calibrate_clock`].
static RATE: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

pub(super) fn us_per_tick() -> f64 {
    // Measuring here, in the first command, would hold that command's thread 20 ms.
    *RATE.get().expect("calibrate_clock runs at start-up")
}

/// Measures the tick rate: at start-up, before the threads start, so no command pays for it
/// (the first command after start-up used to wait the 20 ms, holding its thread's loop).
pub fn calibrate_clock() {
    RATE.get_or_init(|| {
        let (t0, k0) = (Instant::now(), ticks());
        std::thread::sleep(Duration::from_millis(20));
        let (t1, k1) = (Instant::now(), ticks());
        let ticks = k1.saturating_sub(k0).max(1) as f64;
        (t1 - t0).as_secs_f64() * 1e6 / ticks
    });
}

/// Shows a command to MONITOR clients (every thread's), unless it is one Redis hides
/// (admin and skip-monitor commands; passwords redacted).
pub fn feed_monitors(
    shared: &Shared,
    spec: &darner_commands::CommandSpec,
    state: &ClientState,
    args: &[&[u8]],
) {
    if shared.monitors.load(Ordering::Relaxed) == 0
        || spec.has(flags::SKIP_MONITOR)
        || spec.has(flags::ADMIN)
    {
        return;
    }
    let line = monitor_line(state, &cmd::connection::redact(spec.full_name, args));
    for t in 0..shared.threads {
        post(shared, t, Msg::Monitor { line: line.clone() });
    }
}

pub(super) fn monitor_line(state: &ClientState, args: &[&[u8]]) -> Arc<Vec<u8>> {
    let us = Shared::now_us();
    let mut s = format!(
        "+{}.{:06} [{} {}]",
        us / 1_000_000,
        us % 1_000_000,
        state.db,
        state.addr
    )
    .into_bytes();
    for a in args {
        s.extend_from_slice(b" \"");
        for &b in a.iter() {
            match b {
                b'\\' => s.extend_from_slice(b"\\\\"),
                b'"' => s.extend_from_slice(b"\\\""),
                b'\n' => s.extend_from_slice(b"\\n"),
                b'\r' => s.extend_from_slice(b"\\r"),
                b'\t' => s.extend_from_slice(b"\\t"),
                7 => s.extend_from_slice(b"\\a"),
                8 => s.extend_from_slice(b"\\b"),
                0x20..=0x7e => s.push(b),
                _ => s.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
            }
        }
        s.push(b'"');
    }
    s.extend_from_slice(b"\r\n");
    Arc::new(s)
}

/// Records a command's statistics and, when slow, a slow log entry.
pub(super) fn record(
    shared: &Shared,
    thread: usize,
    cmd: &Command,
    us: u64,
    err: Option<&[u8]>,
    state: &ClientState,
    args: &[&[u8]],
) {
    record_stats(shared, thread, cmd, us, err, args, Some(state));
}

/// Records a command that ran on this thread for this thread's client: its time is the lap
/// since the previous command, and it failed when its reply is an error.
pub(super) fn account(
    shared: &Shared,
    thread: usize,
    lap: &mut Lap,
    cmd: &Command,
    reply: &[u8],
    state: &ClientState,
    args: &[&[u8]],
) {
    let err = (reply.first() == Some(&b'-')).then_some(reply);
    record(shared, thread, cmd, lap.lap(), err, state, args);
}

pub(super) fn record_stats(
    shared: &Shared,
    thread: usize,
    cmd: &Command,
    us: u64,
    err: Option<&[u8]>,
    args: &[&[u8]],
    state: Option<&ClientState>,
) -> Option<u64> {
    let st = &shared.stats[thread].cmd[cmd.id];
    bump(&st.calls, 1);
    bump(&st.usec, us);
    let hot = &shared.config.hot;
    if hot.latency_tracking.load(Ordering::Relaxed) {
        st.hist.record(us);
    }
    if hot.latency_monitor_threshold.load(Ordering::Relaxed) > 0 {
        let event = if cmd.spec.has(flags::FAST) {
            "fast-command"
        } else {
            "command"
        };
        crate::latency::monitor(shared, event, us);
    }
    if err.is_none() && cmd.spec.has(flags::WRITE) {
        bump(&shared.stats[thread].dirty, 1);
    }
    if let Some(e) = err {
        bump(&st.failed, 1);
        bump(&shared.stats[thread].total_error_replies, 1);
        shared.record_error(e);
    }
    let threshold = shared
        .config
        .hot
        .slowlog_log_slower_than
        .load(Ordering::Relaxed);
    if threshold >= 0 && us as i64 >= threshold && !cmd.spec.has(flags::SKIP_SLOWLOG) {
        match state {
            Some(state) => slowlog_push(shared, us, args, Some(state)),
            None => return Some(us),
        }
    }
    None
}

/// Records a command that ran inside EXEC, as Redis's `call` does for each queued command:
/// its call and time, a failure with its error, and a slow log entry when slow. (EXEC runs on
/// the client's thread, whose counters these are.)
pub fn record_in_exec(
    shared: &Shared,
    cmd: &Command,
    us: u64,
    reply: &[u8],
    args: &[Bytes],
    state: &ClientState,
) {
    let err = (reply.first() == Some(&b'-')).then_some(reply);
    let thread = THREAD.with(|t| t.get());
    record_stats(shared, thread, cmd, us, err, &cmd::views(args), Some(state));
}

/// Adds a slow log entry (newest first, trimmed to slowlog-max-len).
pub(super) fn slowlog_push(shared: &Shared, us: u64, args: &[&[u8]], state: Option<&ClientState>) {
    let max = shared.config.hot.slowlog_max_len.load(Ordering::Relaxed) as usize;
    let mut log = shared.slowlog.lock().unwrap();
    let id = shared.slowlog_next_id.fetch_add(1, Ordering::Relaxed);
    let mut kept: Vec<Vec<u8>> = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if i == 31 && args.len() > 32 {
            kept.push(format!("... ({} more arguments)", args.len() - 31).into_bytes());
            break;
        }
        if a.len() > 128 {
            let mut v = a[..128].to_vec();
            v.extend_from_slice(format!("... ({} more bytes)", a.len() - 128).as_bytes());
            kept.push(v);
        } else {
            kept.push(a.to_vec());
        }
    }
    log.push_front(SlowlogEntry {
        id,
        time: Shared::now_ms() / 1000,
        micros: us,
        args: kept,
        addr: state.map(|s| s.addr.to_string()).unwrap_or_default(),
        name: state.map(|s| s.name.clone()).unwrap_or_default(),
    });
    while log.len() > max {
        log.pop_back();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lap_timer_measures_microseconds() {
        super::calibrate_clock();
        let mut lap = super::Lap::start();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let us = lap.lap();
        assert!((25_000..200_000).contains(&us), "{us}");
        assert!(lap.lap() < 5_000);
    }
}
