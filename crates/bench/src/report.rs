//! The result: a human table, or one JSON object (`--json`).

use crate::config::Config;
use crate::driver::RunResult;
use crate::keys::KeyPattern;
use crate::mix::Verbs;
use crate::workload::OpKind;

/// One kind of operation's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct KindSummary {
    pub name: &'static str,
    pub ops: u64,
    pub ops_per_sec: f64,
    pub errors: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// The YCSB load phase's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadSummary {
    pub records: u64,
    pub seconds: f64,
    pub ops_per_sec: f64,
    pub errors: u64,
}

/// The figures a run reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub mode: &'static str,
    /// `set-get`, `mset:10`, `ycsb-a`, ...
    pub command: String,
    pub seconds: f64,
    pub ops: u64,
    pub requests: u64,
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
    /// Each kind of operation run, in [`OpKind::ALL`] order.
    pub by_kind: Vec<KindSummary>,
    pub load: Option<LoadSummary>,
}

fn per_sec(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

impl Summary {
    pub fn new(cfg: &Config, r: &RunResult) -> Summary {
        let s = &r.stats;
        let secs = r.elapsed.as_secs_f64();
        let command = match (&cfg.ycsb, cfg.verbs, cfg.keys_per_request, cfg.ratio) {
            (Some(y), _, _, _) => format!("ycsb-{}", y.workload.name),
            (None, Verbs::MsetDel, n, _) => format!("mset-del:{n}"),
            (None, Verbs::Exists, n, _) => format!("exists:{n}"),
            (None, Verbs::SetGet, 1, _) => "set-get".to_string(),
            (None, Verbs::SetGet, n, r) if r.gets == 0 => format!("mset:{n}"),
            (None, Verbs::SetGet, n, r) if r.sets == 0 => format!("mget:{n}"),
            (None, Verbs::SetGet, n, _) => format!("mset-mget:{n}"),
        };
        let by_kind = OpKind::ALL
            .iter()
            .filter_map(|&k| {
                let ks = s.by_kind[k.index()].as_ref()?;
                Some(KindSummary {
                    name: k.name(),
                    ops: ks.ops,
                    ops_per_sec: per_sec(ks.ops, secs),
                    errors: ks.errors,
                    p50_us: ks.latency.percentile_us(50.0),
                    p99_us: ks.latency.percentile_us(99.0),
                    p999_us: ks.latency.percentile_us(99.9),
                    max_us: ks.latency.max_us(),
                })
            })
            .collect();
        let load = r.load.as_ref().map(|l| LoadSummary {
            records: l.records,
            seconds: l.elapsed.as_secs_f64(),
            ops_per_sec: per_sec(l.records, l.elapsed.as_secs_f64()),
            errors: l.errors,
        });
        Summary {
            mode: if cfg.rate.is_some() { "open" } else { "closed" },
            command,
            seconds: secs,
            ops: s.ops,
            requests: s.requests,
            ops_per_sec: per_sec(s.ops, secs),
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
            by_kind,
            load,
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
        let by_kind: Vec<String> = self
            .by_kind
            .iter()
            .map(|k| {
                format!(
                    "\"{}\":{{\"ops\":{},\"ops_per_sec\":{:.1},\"errors\":{},\"p50_us\":{:.1},\
                     \"p99_us\":{:.1},\"p999_us\":{:.1},\"max_us\":{:.1}}}",
                    k.name, k.ops, k.ops_per_sec, k.errors, k.p50_us, k.p99_us, k.p999_us, k.max_us
                )
            })
            .collect();
        let load = match &self.load {
            None => "null".to_string(),
            Some(l) => format!(
                "{{\"records\":{},\"seconds\":{:.3},\"ops_per_sec\":{:.1},\"errors\":{}}}",
                l.records, l.seconds, l.ops_per_sec, l.errors
            ),
        };
        format!(
            "{{\"mode\":\"{}\",\"cluster\":{},\"command\":\"{}\",\"keys_per_request\":{},\"threads\":{},\"connections\":{},\"pipeline\":{},\
             \"ratio\":\"{}:{}\",\"key_pattern\":\"{}\",\"key_maximum\":{},\"data_size\":{},\
             \"rate\":{},\"seconds\":{:.3},\"ops\":{},\"ops_per_sec\":{:.1},\"sets\":{},\
             \"gets\":{},\"hits\":{},\"misses\":{},\"errors\":{},\"p50_us\":{:.1},\
             \"p99_us\":{:.1},\"p999_us\":{:.1},\"max_us\":{:.1},\"requests\":{},\
             \"by_type\":{{{}}},\"load\":{}}}",
            self.mode,
            cfg.cluster,
            self.command,
            cfg.keys_per_request,
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
            self.requests,
            by_kind.join(","),
            load,
        )
    }

    pub fn to_table(&self) -> String {
        let mut t = String::new();
        if let Some(l) = &self.load {
            t += &format!(
                "load: {} records in {:.2} s, {:.0} inserts/s, {} errors\n",
                l.records, l.seconds, l.ops_per_sec, l.errors
            );
        }
        t += &format!(
            "{:<18} {:>12} {:>10} {:>10} {:>10} {:>10} {:>8} {:>10} {:>10}\n",
            "mode/operation",
            "ops/s",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
            "errors",
            "hits",
            "misses",
        );
        t += &format!(
            "{:<18} {:>12.0} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>8} {:>10} {:>10}\n",
            format!("{} {}", self.mode, self.command),
            self.ops_per_sec,
            self.p50_us,
            self.p99_us,
            self.p999_us,
            self.max_us,
            self.errors,
            self.hits,
            self.misses,
        );
        if self.by_kind.len() > 1 {
            for k in &self.by_kind {
                t += &format!(
                    "{:<18} {:>12.0} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>8}\n",
                    format!("  {}", k.name),
                    k.ops_per_sec,
                    k.p50_us,
                    k.p99_us,
                    k.p999_us,
                    k.max_us,
                    k.errors,
                );
            }
        }
        t
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
        stats.record(
            OpKind::Get,
            crate::workload::Outcome {
                ok: true,
                hits: 1,
                misses: 0,
            },
            200_000,
        );
        let r = RunResult {
            stats,
            elapsed: Duration::from_secs(2),
            load: None,
        };
        let cfg = Config::default();
        let s = Summary::new(&cfg, &r);
        assert_eq!(s.ops_per_sec, 3001.0 / 2.0);
        assert!((s.p50_us - 100.0).abs() < 0.1);
        let j = s.to_json(&cfg);
        for part in [
            "\"mode\":\"closed\",\"cluster\":false,",
            "\"ops\":3001,",
            "\"ops_per_sec\":1500.5,",
            "\"hits\":1501,",
            "\"command\":\"set-get\"",
            "\"by_type\":{\"get\":{\"ops\":1,\"ops_per_sec\":0.5,\"errors\":0,\"p50_us\":200.1,",
            "\"load\":null",
            "\"misses\":500,",
            "\"errors\":2,",
            "\"ratio\":\"1:10\"",
            "\"rate\":null",
        ] {
            assert!(j.contains(part), "{part} not in {j}");
        }
        assert!(j.starts_with('{') && j.ends_with('}') && !j.contains('\n'));
        assert!(s.to_table().contains("1500"));
        assert_eq!(s.by_kind.len(), 1);
    }

    #[test]
    fn the_command_is_named_as_given() {
        let r = RunResult {
            stats: Stats::default(),
            elapsed: Duration::from_secs(1),
            load: None,
        };
        for name in [
            "mset:10",
            "mget:3",
            "mset-mget:2",
            "exists:4",
            "mset-del:10",
        ] {
            let cfg = Config::parse(["--command".to_string(), name.to_string()]).unwrap();
            assert_eq!(Summary::new(&cfg, &r).command, name);
        }
    }
}
