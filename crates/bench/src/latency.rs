//! Latency recording in an HdrHistogram: 3 significant digits from 1 ns to 1 hour, one
//! histogram per thread, merged at the end.

use hdrhistogram::Histogram;

pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

impl Latency {
    pub fn new() -> Latency {
        Latency {
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
        }
    }

    /// Records one latency in nanoseconds (clamped into the histogram's range).
    pub fn record_ns(&mut self, ns: u64) {
        self.hist.saturating_record(ns.max(1));
    }

    pub fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides: adding cannot fail.
        self.hist.add(&other.hist).expect("same bounds");
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The latency at percentile `p` (0..=100), in microseconds; 0 when nothing was recorded.
    pub fn percentile_us(&self, p: f64) -> f64 {
        if self.hist.is_empty() {
            return 0.0;
        }
        self.hist.value_at_quantile(p / 100.0) as f64 / 1000.0
    }

    pub fn max_us(&self) -> f64 {
        self.hist.max() as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_recorded_values_within_precision() {
        let mut l = Latency::new();
        for us in 1..=1000u64 {
            l.record_ns(us * 1000);
        }
        assert_eq!(l.count(), 1000);
        let close = |got: f64, want: f64| (got - want).abs() <= want * 0.001 + 0.001;
        assert!(
            close(l.percentile_us(50.0), 500.0),
            "{}",
            l.percentile_us(50.0)
        );
        assert!(
            close(l.percentile_us(99.0), 990.0),
            "{}",
            l.percentile_us(99.0)
        );
        // 99.9% of 1000 values is the 999th or, rounding up, the 1000th.
        assert!(
            (999.0..=1001.0).contains(&l.percentile_us(99.9)),
            "{}",
            l.percentile_us(99.9)
        );
        assert!(close(l.max_us(), 1000.0));
    }

    #[test]
    fn merging_adds_the_counts_and_moves_the_tail() {
        let mut a = Latency::new();
        let mut b = Latency::new();
        for _ in 0..99 {
            a.record_ns(10_000);
        }
        b.record_ns(5_000_000);
        a.merge(&b);
        assert_eq!(a.count(), 100);
        assert!(a.percentile_us(50.0) < 11.0);
        assert!(a.max_us() > 4_990.0);
        assert_eq!(Latency::new().percentile_us(99.0), 0.0);
    }
}
