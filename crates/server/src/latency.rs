//! Latency: the per-command histograms behind LATENCY HISTOGRAM and INFO latencystats
//! (`latency-tracking`), and the latency monitor's event series behind LATENCY LATEST /
//! HISTORY / GRAPH / DOCTOR (`latency-monitor-threshold`).
//!
//! The histogram has the layout of the HdrHistogram Redis uses for these (values in
//! nanoseconds from 1 to 10^9, two significant digits: 24 runs of 128 counters), so that the
//! buckets LATENCY HISTOGRAM reports and the percentiles INFO prints are Redis's. A run of
//! counters is allocated when a value first falls in it: a command whose latencies stay
//! within a few microseconds holds a few KiB, not the 24 KiB of the whole range.
//!
//! Each thread records into its own histograms (a command's statistics belong to the thread
//! that ran it); a reader sums them. The latency monitor records only events at or over the
//! threshold (milliseconds), which are rare: one series per event for the whole server.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Counters per run, and runs: `(bucket + 1) << 7 | sub-bucket offset` indexes 3072 counters.
const RUN: usize = 128;
const RUNS: usize = 24;
pub const COUNTS: usize = RUN * RUNS;
/// The range Redis tracks, in nanoseconds.
const MIN_NS: u64 = 1;
const MAX_NS: u64 = 1_000_000_000;

type Run = Box<[AtomicU64; RUN]>;

/// One command's latency histogram on one thread.
#[derive(Default)]
pub struct Hist {
    runs: [OnceLock<Run>; RUNS],
}

fn bucket_index(v: u64) -> u32 {
    (64 - (v | 255).leading_zeros()) - 8
}

/// The counter index of a value in nanoseconds.
fn index_of(v: u64) -> usize {
    let b = bucket_index(v);
    let sub = (v >> b) as usize;
    (((b + 1) as usize) << 7) + sub - 128
}

/// The lowest value (nanoseconds) that counts at index `i`.
fn value_at(i: usize) -> u64 {
    let b = (i >> 7) as i64 - 1;
    let sub = (i & 127) as u64 + 128;
    if b < 0 {
        sub - 128
    } else {
        sub << b
    }
}

/// The highest value counted with `v`.
fn highest_equivalent(v: u64) -> u64 {
    let b = bucket_index(v);
    let lowest = (v >> b) << b;
    lowest + (1u64 << b) - 1
}

impl Hist {
    /// Counts one command that took `us` microseconds. Only the owning thread calls this.
    #[inline]
    pub fn record(&self, us: u64) {
        let ns = us.saturating_mul(1000).clamp(MIN_NS, MAX_NS);
        let i = index_of(ns);
        let run =
            self.runs[i / RUN].get_or_init(|| Box::new(std::array::from_fn(|_| AtomicU64::new(0))));
        crate::shared::bump(&run[i % RUN], 1);
    }

    pub fn reset(&self) {
        for run in self.runs.iter().filter_map(OnceLock::get) {
            for c in run.iter() {
                c.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Adds this histogram's counts to `into` (COUNTS long).
    pub fn add_to(&self, into: &mut [u64]) {
        for (r, run) in self.runs.iter().enumerate() {
            if let Some(run) = run.get() {
                for (j, c) in run.iter().enumerate() {
                    into[r * RUN + j] += c.load(Ordering::Relaxed);
                }
            }
        }
    }
}

/// A histogram summed over threads.
pub struct Counts(pub Vec<u64>);

impl Counts {
    pub fn new() -> Counts {
        Counts(vec![0; COUNTS])
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The value (microseconds) under which `p` percent of the samples fall, as
    /// HdrHistogram's value_at_percentile reports it.
    pub fn percentile_us(&self, p: f64) -> f64 {
        let total = self.total();
        let want = (((p.min(100.0) / 100.0) * total as f64) + 0.5) as u64;
        let want = want.max(1);
        let mut seen = 0;
        for (i, &c) in self.0.iter().enumerate() {
            seen += c;
            if seen >= want {
                let v = value_at(i);
                let v = if p == 0.0 { v } else { highest_equivalent(v) };
                return v as f64 / 1000.0;
            }
        }
        0.0
    }

    /// LATENCY HISTOGRAM's buckets: (microseconds, cumulative count) at 1, 2, 4, ... µs
    /// (2^10 · 2^k ns, reported by their highest equivalent value), the ones where the count
    /// grew, up to the first that holds every sample.
    pub fn cumulative_buckets(&self) -> Vec<(u64, u64)> {
        let total = self.total();
        let mut out = Vec::new();
        let (mut upto, mut seen, mut prev) = (0usize, 0u64, 0u64);
        for k in 0..20 {
            let level = highest_equivalent(1024u64 << k);
            let last = index_of(level);
            while upto <= last {
                seen += self.0[upto];
                upto += 1;
            }
            if seen > prev {
                out.push((level / 1000, seen));
            }
            prev = seen;
            if seen == total {
                break;
            }
        }
        out
    }
}

impl Default for Counts {
    fn default() -> Self {
        Counts::new()
    }
}

// ---- the latency monitor ----

/// Samples kept per event (one per second at most), as Redis keeps.
pub const SERIES_LEN: usize = 160;

#[derive(Clone, Copy, Default)]
pub struct Sample {
    /// Unix seconds; 0 for an unused slot.
    pub time: i64,
    /// Milliseconds.
    pub latency: u64,
}

pub struct Series {
    pub samples: [Sample; SERIES_LEN],
    /// The next slot to write.
    pub idx: usize,
    /// The highest latency ever recorded.
    pub max: u64,
}

impl Series {
    /// The used samples, oldest first.
    pub fn in_order(&self) -> impl Iterator<Item = &Sample> {
        (0..SERIES_LEN)
            .map(move |j| &self.samples[(self.idx + j) % SERIES_LEN])
            .filter(|s| s.time != 0)
    }

    pub fn latest(&self) -> Sample {
        self.samples[(self.idx + SERIES_LEN - 1) % SERIES_LEN]
    }
}

#[derive(Default)]
pub struct Monitor {
    pub events: Mutex<BTreeMap<&'static str, Series>>,
}

impl Monitor {
    /// Records `ms` for `event` at second `now`: within one second the highest value is kept.
    pub fn add(&self, event: &'static str, ms: u64, now: i64) {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let s = events.entry(event).or_insert_with(|| Series {
            samples: [Sample::default(); SERIES_LEN],
            idx: 0,
            max: 0,
        });
        s.max = s.max.max(ms);
        let prev = (s.idx + SERIES_LEN - 1) % SERIES_LEN;
        if s.samples[prev].time == now {
            s.samples[prev].latency = s.samples[prev].latency.max(ms);
            return;
        }
        s.samples[s.idx] = Sample {
            time: now,
            latency: ms,
        };
        s.idx = (s.idx + 1) % SERIES_LEN;
    }
}

/// Records `us` microseconds for `event` when the latency monitor is on and it reaches the
/// threshold.
#[inline]
pub fn monitor(shared: &crate::shared::Shared, event: &'static str, us: u64) {
    let threshold = shared
        .config
        .hot
        .latency_monitor_threshold
        .load(Ordering::Relaxed);
    let ms = us / 1000;
    if threshold > 0 && ms >= threshold as u64 {
        shared
            .latency
            .add(event, ms, crate::shared::Shared::now_ms() / 1000);
    }
}

// ---- LATENCY GRAPH's sparkline ----

const COLS: usize = 80;
const ROWS: usize = 4;
/// Characters for the three heights within one row, the graph filled below the line.
const FILL: &[u8; 3] = b"_o#";

/// The ASCII graph of a series, as Redis draws LATENCY GRAPH: a title line, a dashed rule,
/// then the samples in blocks of 80 columns, four rows of bars each (filled with `|` below the
/// top), and under them each sample's age ("12s", "3m", "5h", "2d") written downwards.
pub fn graph(event: &str, series: &Series, now: i64) -> String {
    let samples: Vec<(u64, String)> = series
        .in_order()
        .map(|s| {
            let ago = now - s.time;
            let label = if ago < 60 {
                format!("{ago}s")
            } else if ago < 3600 {
                format!("{}m", ago / 60)
            } else if ago < 86400 {
                format!("{}h", ago / 3600)
            } else {
                format!("{}d", ago / 86400)
            };
            (s.latency, label)
        })
        .collect();
    let min = samples.iter().map(|s| s.0).min().unwrap_or(0);
    let max = samples.iter().map(|s| s.0).max().unwrap_or(0);
    let mut out = format!(
        "{event} - high {max} ms, low {min} ms (all time high {} ms)\n",
        series.max
    );
    out.push_str(&"-".repeat(COLS));
    out.push('\n');
    for (n, block) in samples.chunks(COLS).enumerate() {
        if n != 0 {
            out.push('\n');
        }
        render_block(&mut out, block, min, max);
    }
    out
}

fn render_block(out: &mut String, block: &[(u64, String)], min: u64, max: u64) {
    let steps = (FILL.len() * ROWS) as i64;
    let range = match max - min {
        0 => 1.0,
        r => r as f64,
    };
    let step_of = |v: u64| -> i64 {
        let s = (((v - min) as f64 * steps as f64) as i64 as f64 / range) as i64;
        s.clamp(0, steps - 1)
    };
    // The bars, top row first.
    for row in 0..ROWS {
        let line: String = block
            .iter()
            .map(|(v, _)| {
                let at = step_of(*v) - ((ROWS - row - 1) * FILL.len()) as i64;
                match at {
                    a if (0..FILL.len() as i64).contains(&a) => FILL[a as usize] as char,
                    a if a >= FILL.len() as i64 => '|',
                    _ => ' ',
                }
            })
            .collect();
        out.push_str(&line);
        out.push('\n');
    }
    // One blank line, then the labels, one character per line.
    out.push_str(&" ".repeat(block.len()));
    out.push('\n');
    let longest = block.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
    for c in 0..longest {
        let line: String = block
            .iter()
            .map(|(_, l)| l.as_bytes().get(c).map_or(' ', |&b| b as char))
            .collect();
        out.push_str(&line);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdr_layout_matches_redis_buckets() {
        // Values below 256 ns count one by one; above, two significant digits.
        assert_eq!(index_of(1), 1);
        assert_eq!(value_at(index_of(255)), 255);
        assert_eq!(highest_equivalent(1024), 1031);
        assert_eq!(highest_equivalent(32768), 33023);
        assert!(index_of(MAX_NS) < COUNTS);
        for v in [1u64, 300, 1000, 5000, 123_456, 999_999_999] {
            let i = index_of(v);
            assert!(
                value_at(i) <= v && v <= highest_equivalent(value_at(i)),
                "{v}"
            );
        }
    }

    #[test]
    fn histogram_buckets_and_percentiles() {
        let h = Hist::default();
        for _ in 0..99 {
            h.record(1);
        }
        h.record(40);
        let mut c = Counts::new();
        h.add_to(&mut c.0);
        assert_eq!(c.total(), 100);
        // 1 µs = 1000 ns falls under the first level (1024 ns, reported as 1 µs).
        assert_eq!(c.cumulative_buckets(), vec![(1, 99), (66, 100)]);
        assert_eq!(c.percentile_us(50.0), 1.003);
        assert_eq!(c.percentile_us(100.0), 40.191);
        h.reset();
        let mut c = Counts::new();
        h.add_to(&mut c.0);
        assert_eq!(c.total(), 0);
    }

    #[test]
    fn monitor_keeps_the_highest_value_per_second() {
        let m = Monitor::default();
        m.add("command", 5, 100);
        m.add("command", 9, 100);
        m.add("command", 3, 100);
        m.add("command", 2, 101);
        let ev = m.events.lock().unwrap();
        let s = &ev["command"];
        let v: Vec<_> = s.in_order().map(|s| (s.time, s.latency)).collect();
        assert_eq!(v, vec![(100, 9), (101, 2)]);
        assert_eq!(s.max, 9);
        assert_eq!(s.latest().latency, 2);
    }
}
