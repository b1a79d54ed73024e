//! The command line: `--name value` or `--name=value`.

use crate::keys::KeyPattern;
use crate::mix::{Ratio, Verbs};
use crate::ycsb;

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub host: String,
    pub port: u16,
    /// `--cluster`: `host:port` is one node of a Redis Cluster; each connection opens a
    /// socket per primary and sends each request to its key's primary.
    pub cluster: bool,
    /// Driver threads.
    pub threads: usize,
    /// Connections per thread.
    pub connections: usize,
    /// Requests in flight per connection (closed loop).
    pub pipeline: usize,
    pub ratio: Ratio,
    /// Keys per request: 1 sends SET/GET, more sends MSET/MGET (`--command mset:N` ...).
    pub keys_per_request: usize,
    /// The commands sent: SET/GET (MSET/MGET), EXISTS reads, or MSET/DEL pairs.
    pub verbs: Verbs,
    /// A YCSB core workload instead of the SET/GET mix.
    pub ycsb: Option<ycsb::Settings>,
    pub key_pattern: KeyPattern,
    /// Keys are `key_prefix` + an index in `0..key_maximum`.
    pub key_maximum: u64,
    pub key_prefix: String,
    pub data_size: usize,
    pub test_time_s: f64,
    /// Open loop: total requests per second over all connections, at fixed intervals.
    pub rate: Option<f64>,
    pub seed: u64,
    pub json: bool,
    /// `--tracking`: every connection sends CLIENT TRACKING on before the run (RESP2, no
    /// redirect: the server records what each reads, and sends it nothing).
    pub tracking: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            host: "127.0.0.1".into(),
            port: 6379,
            cluster: false,
            threads: 1,
            connections: 50,
            pipeline: 1,
            ratio: Ratio { sets: 1, gets: 10 },
            keys_per_request: 1,
            verbs: Verbs::SetGet,
            ycsb: None,
            key_pattern: KeyPattern::Uniform,
            key_maximum: 1_000_000,
            key_prefix: "key:".into(),
            data_size: 32,
            test_time_s: 10.0,
            rate: None,
            seed: 1,
            json: false,
            tracking: false,
        }
    }
}

pub const USAGE: &str = "\
usage: darner-bench [options]
  --host H             server address (127.0.0.1)
  --port N             server port (6379)
  --cluster            HOST:PORT is a node of a Redis Cluster: the slot map is read once
                       with CLUSTER SLOTS, each connection opens one socket per primary and
                       sends each request to its key's primary (pipelining per socket); a
                       MOVED/ASK reply (the map changed) counts as an error. Single-key
                       commands only: refused with --ycsb and with --command N > 1
  --threads T          driver threads (1)
  --connections C      connections per thread (50)
  --pipeline P         requests in flight per connection, closed loop (1)
  --ratio S:G          SETs to GETs, sent as a cycle (1:10)
  --command C          set-get (the --ratio mix), set, get, mset:N, mget:N (N keys per
                       request, each drawn from the key pattern), mset-mget:N (by --ratio),
                       exists:N (EXISTS of N keys), mset-del:N (an MSET of N keys, then a
                       DEL of the same N keys, each an operation: every DEL deletes keys
                       that are there)
  --ycsb W             YCSB core workload a..f, sent as YCSB's Redis binding does (hashes
                       user<hash> of 10 fields, the _indices sorted set for scans); reports
                       each operation's latency; --key-* and --command do not apply
  --ycsb-records N     records loaded before the run, the key space (100000)
  --ycsb-no-load       do not load them (an earlier run did)
  --ycsb-field-count N   fields per record (10)
  --ycsb-field-length N  bytes per field (100)
  --key-pattern K      uniform | sequential | gaussian | zipf | zipf:S (uniform)
  --key-maximum N      keys are PREFIX0 .. PREFIX<N-1> (1000000)
  --key-prefix S       (key:)
  --data-size N        SET value bytes (32)
  --test-time SECONDS  (10)
  --rate N             open loop: N requests/s in all, at fixed intervals per connection;
                       latency counts from each request's scheduled time (--pipeline ignored)
  --seed N             key generator seed (1)
  --json               print one JSON object instead of a table
  --tracking           each connection turns CLIENT TRACKING on first (RESP2, no redirect:
                       the server records every key read, and sends nothing)
  --help";

fn num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("--{name}: not a valid number: {v:?}"))
}

impl Config {
    /// Parses the arguments after the program name. `Err` carries the message to print
    /// (the usage text for `--help`).
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Config, String> {
        let mut c = Config::default();
        let mut it = args.into_iter();
        let mut command_ratio = None;
        let mut workload = None;
        let mut no_load = false;
        let mut records = None;
        let mut field_count = None;
        let mut field_length = None;
        while let Some(arg) = it.next() {
            let Some(body) = arg.strip_prefix("--") else {
                return Err(format!("unexpected argument {arg:?}\n{USAGE}"));
            };
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (body.to_string(), None),
            };
            match name.as_str() {
                "help" => return Err(USAGE.into()),
                "json" => {
                    c.json = true;
                    continue;
                }
                "ycsb-no-load" => {
                    no_load = true;
                    continue;
                }
                "cluster" => {
                    c.cluster = true;
                    continue;
                }
                "tracking" => {
                    c.tracking = true;
                    continue;
                }
                _ => {}
            }
            let v = match inline {
                Some(v) => v,
                None => it.next().ok_or_else(|| format!("--{name} needs a value"))?,
            };
            match name.as_str() {
                "host" => c.host = v,
                "port" => c.port = num(&name, &v)?,
                "threads" => c.threads = num(&name, &v)?,
                "connections" => c.connections = num(&name, &v)?,
                "pipeline" => c.pipeline = num(&name, &v)?,
                "ratio" => c.ratio = Ratio::parse(&v)?,
                "command" => {
                    let (ratio, n, verbs) = parse_command(&v)?;
                    command_ratio = ratio;
                    c.keys_per_request = n;
                    c.verbs = verbs;
                }
                "ycsb" => workload = Some(ycsb::Workload::parse(&v)?),
                "ycsb-records" => records = Some(num::<u64>(&name, &v)?),
                "ycsb-field-count" => field_count = Some(num::<usize>(&name, &v)?),
                "ycsb-field-length" => field_length = Some(num::<usize>(&name, &v)?),
                "key-pattern" => c.key_pattern = KeyPattern::parse(&v)?,
                "key-maximum" => c.key_maximum = num(&name, &v)?,
                "key-prefix" => c.key_prefix = v,
                "data-size" => c.data_size = num(&name, &v)?,
                "test-time" => c.test_time_s = num(&name, &v)?,
                "rate" => c.rate = Some(num(&name, &v)?),
                "seed" => c.seed = num(&name, &v)?,
                _ => return Err(format!("unknown option --{name}\n{USAGE}")),
            }
        }
        if let Some(r) = command_ratio {
            c.ratio = r;
        }
        match workload {
            Some(w) => {
                let mut y = ycsb::Settings::new(w);
                y.records = records.unwrap_or(y.records);
                y.field_count = field_count.unwrap_or(y.field_count);
                y.field_length = field_length.unwrap_or(y.field_length);
                y.load = !no_load;
                if y.records == 0 || y.field_count == 0 || y.field_count > 1000 {
                    return Err(
                        "--ycsb-records must be at least 1, --ycsb-field-count 1 to 1000".into(),
                    );
                }
                if y.field_length > 1 << 20 {
                    return Err("--ycsb-field-length: at most 1048576 bytes".into());
                }
                c.ycsb = Some(y);
            }
            None => {
                if records.is_some() || no_load || field_count.is_some() || field_length.is_some() {
                    return Err("the --ycsb-* options need --ycsb W".into());
                }
            }
        }
        if c.cluster && (c.ycsb.is_some() || c.keys_per_request > 1) {
            // Keys drawn at random fall into different slots, which a cluster refuses in one
            // command (CROSSSLOT); YCSB's scans read a sorted set and hashes that live apart.
            return Err(
                "--cluster sends single-key commands only: it cannot be used with --ycsb or \
                 with a --command of more than one key per request"
                    .into(),
            );
        }
        if c.threads == 0 || c.connections == 0 || c.pipeline == 0 || c.key_maximum == 0 {
            return Err(
                "--threads, --connections, --pipeline and --key-maximum must be at least 1".into(),
            );
        }
        if !(c.test_time_s > 0.0 && c.test_time_s.is_finite()) {
            return Err("--test-time must be a positive number of seconds".into());
        }
        if let Some(r) = c.rate {
            if !(r > 0.0 && r.is_finite()) {
                return Err("--rate must be a positive number of requests per second".into());
            }
        }
        Ok(c)
    }
}

/// `--command`: the ratio it implies (if any), the keys per request and the commands.
fn parse_command(v: &str) -> Result<(Option<Ratio>, usize, Verbs), String> {
    let (name, n) = match v.split_once(':') {
        Some((name, n)) => match n.parse::<usize>() {
            Ok(n) if (1..=10_000).contains(&n) => (name, n),
            _ => return Err(format!("--command {v}: N must be 1 to 10000")),
        },
        None => (v, 1),
    };
    let write = Ratio { sets: 1, gets: 0 };
    let read = Ratio { sets: 0, gets: 1 };
    let plain = Verbs::SetGet;
    Ok(match (name, v.contains(':')) {
        ("set-get", false) => (None, 1, plain),
        ("set", false) => (Some(write), 1, plain),
        ("get", false) => (Some(read), 1, plain),
        ("mset", true) => (Some(write), n, plain),
        ("mget", true) => (Some(read), n, plain),
        ("mset-mget", true) => (None, n, plain),
        ("exists", true) => (Some(read), n, Verbs::Exists),
        ("mset-del", true) => (None, n, Verbs::MsetDel),
        _ => {
            return Err(format!(
                "--command: set-get, set, get, mset:N, mget:N, mset-mget:N, exists:N or \
                 mset-del:N, got {v:?}"
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Config, String> {
        Config::parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn parses_every_option_in_both_forms() {
        let c = parse(
            "--host 10.0.0.1 --port=7000 --cluster --threads 2 --connections 3 --pipeline 16 \
             --ratio 1:0 --key-pattern zipf:1.1 --key-maximum 500 --key-prefix k \
             --data-size 100 --test-time 0.5 --rate 2000 --seed 9 --json --tracking",
        )
        .unwrap();
        assert_eq!(
            c,
            Config {
                host: "10.0.0.1".into(),
                port: 7000,
                cluster: true,
                threads: 2,
                connections: 3,
                pipeline: 16,
                ratio: Ratio { sets: 1, gets: 0 },
                keys_per_request: 1,
                verbs: Verbs::SetGet,
                ycsb: None,
                key_pattern: KeyPattern::Zipf(1.1),
                key_maximum: 500,
                key_prefix: "k".into(),
                data_size: 100,
                test_time_s: 0.5,
                rate: Some(2000.0),
                seed: 9,
                json: true,
                tracking: true,
            }
        );
        assert_eq!(parse("").unwrap(), Config::default());
    }

    #[test]
    fn command_sets_the_keys_per_request_and_the_ratio_whatever_the_order() {
        let c = parse("--command mset:10 --ratio 3:4").unwrap();
        assert_eq!(
            (c.keys_per_request, c.ratio),
            (10, Ratio { sets: 1, gets: 0 })
        );
        let c = parse("--command mget:5").unwrap();
        assert_eq!(
            (c.keys_per_request, c.ratio),
            (5, Ratio { sets: 0, gets: 1 })
        );
        let c = parse("--ratio 1:3 --command mset-mget:2").unwrap();
        assert_eq!(
            (c.keys_per_request, c.ratio),
            (2, Ratio { sets: 1, gets: 3 })
        );
        let c = parse("--command get").unwrap();
        assert_eq!(
            (c.keys_per_request, c.ratio),
            (1, Ratio { sets: 0, gets: 1 })
        );
        let c = parse("--command exists:3").unwrap();
        assert_eq!(
            (c.keys_per_request, c.ratio, c.verbs),
            (3, Ratio { sets: 0, gets: 1 }, Verbs::Exists)
        );
        let c = parse("--command mset-del:10").unwrap();
        assert_eq!((c.keys_per_request, c.verbs), (10, Verbs::MsetDel));
        assert_eq!(parse("--command mget:2").unwrap().verbs, Verbs::SetGet);
        for bad in [
            "mset", "mset:0", "mget:x", "set:2", "del", "del:10", "exists", "mset-del",
        ] {
            assert!(parse(&format!("--command {bad}")).is_err(), "{bad}");
        }
    }

    #[test]
    fn ycsb_options_build_the_settings() {
        let c = parse("--ycsb E --ycsb-records 500 --ycsb-no-load --ycsb-field-length 8").unwrap();
        let y = c.ycsb.unwrap();
        assert_eq!(y.workload.name, 'e');
        assert_eq!(
            (y.records, y.load, y.field_count, y.field_length),
            (500, false, 10, 8)
        );
        assert!(parse("--ycsb g").is_err());
        assert!(parse("--ycsb-records 10").is_err());
        assert!(parse("--ycsb a --ycsb-records 0").is_err());
    }

    #[test]
    fn cluster_takes_single_key_commands_only() {
        for ok in [
            "",
            "--command set",
            "--command get",
            "--command exists:1",
            "--command mset-del:1",
        ] {
            assert!(parse(&format!("--cluster {ok}")).unwrap().cluster, "{ok}");
        }
        for bad in [
            "--command mset:2",
            "--command mget:10",
            "--command exists:3",
            "--ycsb a",
        ] {
            let err = parse(&format!("--cluster {bad}")).unwrap_err();
            assert!(err.contains("single-key"), "{bad}: {err}");
        }
    }

    #[test]
    fn rejects_bad_values_with_a_message() {
        for bad in [
            "--port",
            "--port 70000",
            "--threads 0",
            "--pipeline x",
            "--test-time 0",
            "--rate -1",
            "--key-pattern hot",
            "--bogus 1",
            "stray",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
