//! The command line: `--listen host:port --cluster host:port[,host:port...] [--threads N]
//! [--cluster-refresh-interval ms]`. Names are the future config file's names, as the server's
//! command line uses redis.conf's.

use std::time::Duration;

use crate::replicas::ReadPolicy;

/// The proxy's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Where clients connect (`host:port`).
    pub listen: String,
    /// Seed nodes of the cluster (`host:port`), asked for the topology in turn.
    pub cluster: Vec<String>,
    /// Event-loop threads.
    pub threads: usize,
    /// How often each thread re-reads the topology even without a MOVED.
    pub refresh_interval: Duration,
    /// How long a backend may keep a request unanswered before its connection is dropped and
    /// the requests in flight on it fail; `None` (`--op-timeout 0`, the default): no limit.
    pub op_timeout: Option<Duration>,
    /// Where read-only commands go (`--read-policy`, default `master`).
    pub read_policy: ReadPolicy,
    /// How long after a read first went out it may still be retried on another node of its
    /// shard when one fails (`--read-retry-deadline`, ms).
    pub read_retry_deadline: Duration,
}

/// Usage text.
pub const USAGE: &str =
    "Usage: darner-proxy --listen <host:port> --cluster <host:port>[,<host:port>...] \
[--threads <n>] [--cluster-refresh-interval <ms>] [--op-timeout <ms>] \
[--read-policy master|prefer-master|replica|prefer-replica|any] [--read-retry-deadline <ms>]";

/// Reads the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Config, String> {
    let mut listen = None;
    let mut cluster = Vec::new();
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut refresh_ms: u64 = 10_000;
    let mut op_timeout_ms: u64 = 0;
    let mut read_policy = ReadPolicy::default();
    let mut read_retry_ms: u64 = 2_000;
    let mut i = 0;
    while i < args.len() {
        let name = args[i].trim_start_matches("--");
        let value = args
            .get(i + 1)
            .ok_or_else(|| format!("missing value for --{name}\n{USAGE}"))?;
        match name {
            "listen" => listen = Some(value.clone()),
            "cluster" => cluster.extend(
                value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from),
            ),
            "threads" => {
                threads = value
                    .parse()
                    .ok()
                    .filter(|&n| (1..=1024).contains(&n))
                    .ok_or_else(|| format!("--threads must be 1 to 1024, not {value:?}"))?
            }
            "cluster-refresh-interval" => {
                refresh_ms = value.parse().ok().filter(|&n| n >= 10).ok_or_else(|| {
                    format!("--cluster-refresh-interval must be at least 10 (ms), not {value:?}")
                })?
            }
            "op-timeout" => {
                op_timeout_ms = value
                    .parse()
                    .map_err(|_| format!("--op-timeout must be a number of ms, not {value:?}"))?
            }
            "read-policy" => {
                read_policy = ReadPolicy::parse(value).ok_or_else(|| {
                    format!("--read-policy must be master, prefer-master, replica, prefer-replica or any, not {value:?}")
                })?
            }
            "read-retry-deadline" => {
                read_retry_ms = value.parse().map_err(|_| {
                    format!("--read-retry-deadline must be a number of ms, not {value:?}")
                })?
            }
            _ => return Err(format!("unknown option {:?}\n{USAGE}", args[i])),
        }
        i += 2;
    }
    let listen = listen.ok_or_else(|| format!("--listen is required\n{USAGE}"))?;
    if cluster.is_empty() {
        return Err(format!("--cluster is required\n{USAGE}"));
    }
    for addr in std::iter::once(&listen).chain(&cluster) {
        match addr.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => {}
            _ => return Err(format!("{addr:?} is not host:port")),
        }
    }
    Ok(Config {
        listen,
        cluster,
        threads,
        refresh_interval: Duration::from_millis(refresh_ms),
        op_timeout: (op_timeout_ms > 0).then(|| Duration::from_millis(op_timeout_ms)),
        read_policy,
        read_retry_deadline: Duration::from_millis(read_retry_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_and_refuses() {
        let c = parse(&args(
            "--listen 127.0.0.1:7000 --cluster a:1,b:2 --threads 3 --cluster-refresh-interval 50",
        ))
        .unwrap();
        assert_eq!(c.cluster, vec!["a:1", "b:2"]);
        assert_eq!(c.threads, 3);
        assert_eq!(c.refresh_interval, Duration::from_millis(50));
        assert_eq!(c.op_timeout, None);
        let c = parse(&args("--listen h:1 --cluster a:1 --op-timeout 250")).unwrap();
        assert_eq!(c.op_timeout, Some(Duration::from_millis(250)));
        assert!(parse(&args("--listen h:1 --cluster a:1 --op-timeout -1")).is_err());
        assert_eq!(c.read_policy, ReadPolicy::Master);
        assert_eq!(c.read_retry_deadline, Duration::from_millis(2000));
        let c = parse(&args(
            "--listen h:1 --cluster a:1 --read-policy prefer-replica --read-retry-deadline 300",
        ))
        .unwrap();
        assert_eq!(c.read_policy, ReadPolicy::PreferReplica);
        assert_eq!(c.read_retry_deadline, Duration::from_millis(300));
        assert!(parse(&args("--listen h:1 --cluster a:1 --read-policy slave")).is_err());
        assert!(parse(&args("--listen 127.0.0.1:7000")).is_err());
        assert!(parse(&args("--listen x --cluster a:1")).is_err());
        assert!(parse(&args("--listen h:1 --cluster a:1 --threads 0")).is_err());
        assert!(parse(&args("--listen h:1 --cluster a:1 --bogus 1")).is_err());
        assert!(parse(&args("--listen h:1 --cluster")).is_err());
    }
}
