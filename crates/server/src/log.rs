//! Log lines in Redis's format: `pid:role day mon year hh:mm:ss.mmm level message`, to stdout
//! or to `logfile`. Level marks: `.` debug, `-` verbose, `*` notice, `#` warning.

use crate::config::{LOG_DEBUG, LOG_NOTICE, LOG_VERBOSE, LOG_WARNING};
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

static LEVEL: AtomicU8 = AtomicU8::new(LOG_NOTICE);
static FILE: OnceLock<Mutex<Option<std::fs::File>>> = OnceLock::new();

/// Points logging at a file (empty: stdout) and sets the level source.
pub fn init(logfile: &str) -> std::io::Result<()> {
    let f = if logfile.is_empty() {
        None
    } else {
        Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(logfile)?,
        )
    };
    let _ = FILE.set(Mutex::new(f));
    Ok(())
}

pub fn set_level(l: u8) {
    LEVEL.store(l, Ordering::Relaxed);
}

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub fn timestamp(ms: i64) -> String {
    const MON: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = ms.div_euclid(1000);
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        d,
        MON[(m - 1) as usize],
        y,
        sod / 3600,
        (sod / 60) % 60,
        sod % 60,
        ms.rem_euclid(1000)
    )
}

/// The role letter of each line: `M` a primary, `S` a replica (as Redis writes them).
static ROLE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(b'M');

pub fn set_role(role: u8) {
    ROLE.store(role, Ordering::Relaxed);
}

pub fn log(level: u8, msg: &str) {
    if level < LEVEL.load(Ordering::Relaxed) {
        return;
    }
    let mark = match level {
        LOG_DEBUG => '.',
        LOG_VERBOSE => '-',
        LOG_NOTICE => '*',
        _ => '#',
    };
    let line = format!(
        "{}:{} {} {} {}\n",
        std::process::id(),
        ROLE.load(Ordering::Relaxed) as char,
        timestamp(crate::shared::Shared::real_now_ms()),
        mark,
        msg
    );
    if let Some(m) = FILE.get() {
        if let Some(f) = m.lock().unwrap().as_mut() {
            let _ = f.write_all(line.as_bytes());
            return;
        }
    }
    let _ = std::io::stdout().lock().write_all(line.as_bytes());
}

/// An I/O error as Redis writes it: strerror's text, without Rust's " (os error N)" suffix.
pub fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// The text of `errno` (strerror).
pub fn errno_text(errno: i32) -> String {
    strerror(&std::io::Error::from_raw_os_error(errno))
}

pub fn verbose(msg: &str) {
    log(LOG_VERBOSE, msg)
}
pub fn notice(msg: &str) {
    log(LOG_NOTICE, msg)
}
pub fn warning(msg: &str) {
    log(LOG_WARNING, msg)
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_dates() {
        assert_eq!(super::timestamp(0), "01 Jan 1970 00:00:00.000");
        assert_eq!(
            super::timestamp(1_795_305_600_123),
            "22 Nov 2026 00:00:00.123"
        );
    }
}
