//! The result: a human table, or one JSON object (`--json`).

use crate::config::Config;
use crate::driver::RunResult;
use crate::keys::KeyPattern;

/// The figures a run reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub mode: &'static str,
    pub seconds: f64,
    pub ops: u64,
    pub ops_per_sec: f64,
    pub sets: u64,
    pub gets: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Summary {
    pub fn new(cfg: &Config, r: &RunResult) -> Summary {
        let s = &r.stats;
        let secs = r.elapsed.as_secs_f64();
        Summary {
            mode: if cfg.rate.is_some() { "open" } else { "closed" },
            seconds: secs,
            ops: s.ops,
            ops_per_sec: if secs > 0.0 { s.ops as f64 / secs } else { 0.0 },
            sets: s.sets,
            gets: s.gets,
            hits: s.hits,
            misses: s.misses,
            errors: s.errors,
            p50_us: s.latency.percentile_us(50.0),
            p99_us: s.latency.percentile_us(99.0),
            p999_us: s.latency.percentile_us(99.9),
            max_us: if s.latency.count() > 0 {
                s.latency.max_us()
            } else {
                0.0
            },
        }
    }

    /// One JSON object on one line.
    pub fn to_json(&self, cfg: &Config) -> String {
        let pattern = match cfg.key_pattern {
            KeyPattern::Uniform => "uniform".to_string(),
            KeyPattern::Sequential => "sequential".to_string(),
            KeyPattern::Gaussian => "gaussian".to_string(),
            KeyPattern::Zipf(s) => format!("zipf:{s}"),
        };
        let rate = match cfg.rate {
            Some(r) => format!("{r}"),
            None => "null".into(),
        };
        format!(
            "{{\"mode\":\"{}\",\"threads\":{},\"connections\":{},\"pipeline\":{},\
             \"ratio\":\"{}:{}\",\"key_pattern\":\"{}\",\"key_maximum\":{},\"data_size\":{},\
             \"rate\":{},\"seconds\":{:.3},\"ops\":{},\"ops_per_sec\":{:.1},\"sets\":{},\
             \"gets\":{},\"hits\":{},\"misses\":{},\"errors\":{},\"p50_us\":{:.1},\
             \"p99_us\":{:.1},\"p999_us\":{:.1},\"max_us\":{:.1}}}",
            self.mode,
            cfg.threads,
            cfg.connections,
            cfg.pipeline,
            cfg.ratio.sets,
            cfg.ratio.gets,
            pattern,
            cfg.key_maximum,
            cfg.data_size,
            rate,
            self.seconds,
            self.ops,
            self.ops_per_sec,
            self.sets,
            self.gets,
            self.hits,
            self.misses,
            self.errors,
            self.p50_us,
            self.p99_us,
            self.p999_us,
            self.max_us,
        )
    }

    pub fn to_table(&self) -> String {
        format!(
            "{:<8} {:>12} {:>10} {:>10} {:>10} {:>10} {:>8} {:>10} {:>10}\n\
             {:<8} {:>12.0} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>8} {:>10} {:>10}\n",
            "mode",
            "ops/s",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
            "errors",
            "hits",
            "misses",
            self.mode,
            self.ops_per_sec,
            self.p50_us,
            self.p99_us,
            self.p999_us,
            self.max_us,
            self.errors,
            self.hits,
            self.misses,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Stats;
    use std::time::Duration;

    #[test]
    fn summary_divides_ops_by_seconds_and_json_carries_every_figure() {
        let mut stats = Stats {
            ops: 3000,
            sets: 1000,
            gets: 2000,
            hits: 1500,
            misses: 500,
            errors: 2,
            ..Stats::default()
        };
        stats.latency.record_ns(100_000);
        let r = RunResult {
            stats,
            elapsed: Duration::from_secs(2),
        };
        let cfg = Config::default();
        let s = Summary::new(&cfg, &r);
        assert_eq!(s.ops_per_sec, 1500.0);
        assert!((s.p50_us - 100.0).abs() < 0.1);
        let j = s.to_json(&cfg);
        for part in [
            "\"mode\":\"closed\"",
            "\"ops\":3000,",
            "\"ops_per_sec\":1500.0,",
            "\"hits\":1500,",
            "\"misses\":500,",
            "\"errors\":2,",
            "\"ratio\":\"1:10\"",
            "\"rate\":null",
        ] {
            assert!(j.contains(part), "{part} not in {j}");
        }
        assert!(j.starts_with('{') && j.ends_with('}') && !j.contains('\n'));
        assert!(s.to_table().contains("1500"));
    }
}
