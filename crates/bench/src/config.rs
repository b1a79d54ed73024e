//! The command line: `--name value` or `--name=value`.

use crate::keys::KeyPattern;
use crate::mix::Ratio;

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub host: String,
    pub port: u16,
    /// Driver threads.
    pub threads: usize,
    /// Connections per thread.
    pub connections: usize,
    /// Requests in flight per connection (closed loop).
    pub pipeline: usize,
    pub ratio: Ratio,
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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            host: "127.0.0.1".into(),
            port: 6379,
            threads: 1,
            connections: 50,
            pipeline: 1,
            ratio: Ratio { sets: 1, gets: 10 },
            key_pattern: KeyPattern::Uniform,
            key_maximum: 1_000_000,
            key_prefix: "key:".into(),
            data_size: 32,
            test_time_s: 10.0,
            rate: None,
            seed: 1,
            json: false,
        }
    }
}

pub const USAGE: &str = "\
usage: darner-bench [options]
  --host H             server address (127.0.0.1)
  --port N             server port (6379)
  --threads T          driver threads (1)
  --connections C      connections per thread (50)
  --pipeline P         requests in flight per connection, closed loop (1)
  --ratio S:G          SETs to GETs, sent as a cycle (1:10)
  --key-pattern K      uniform | sequential | gaussian | zipf | zipf:S (uniform)
  --key-maximum N      keys are PREFIX0 .. PREFIX<N-1> (1000000)
  --key-prefix S       (key:)
  --data-size N        SET value bytes (32)
  --test-time SECONDS  (10)
  --rate N             open loop: N requests/s in all, at fixed intervals per connection;
                       latency counts from each request's scheduled time (--pipeline ignored)
  --seed N             key generator seed (1)
  --json               print one JSON object instead of a table
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Config, String> {
        Config::parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn parses_every_option_in_both_forms() {
        let c = parse(
            "--host 10.0.0.1 --port=7000 --threads 2 --connections 3 --pipeline 16 \
             --ratio 1:0 --key-pattern zipf:1.1 --key-maximum 500 --key-prefix k \
             --data-size 100 --test-time 0.5 --rate 2000 --seed 9 --json",
        )
        .unwrap();
        assert_eq!(
            c,
            Config {
                host: "10.0.0.1".into(),
                port: 7000,
                threads: 2,
                connections: 3,
                pipeline: 16,
                ratio: Ratio { sets: 1, gets: 0 },
                key_pattern: KeyPattern::Zipf(1.1),
                key_maximum: 500,
                key_prefix: "k".into(),
                data_size: 100,
                test_time_s: 0.5,
                rate: Some(2000.0),
                seed: 9,
                json: true,
            }
        );
        assert_eq!(parse("").unwrap(), Config::default());
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
